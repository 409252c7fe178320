#!/usr/bin/env bash
# bench/thread_scaling.sh: smelt beside ONNX Runtime at 1, 2, 4, ... threads
# on one machine, then at the most threads with one core kept busy.
#
# usage: bench/thread_scaling.sh EXPORT_PY OUT_DIR [THREADS...]
#   EXPORT_PY  the zoo's exporter (../shared/models/export.py; torch,
#              torchvision, onnx): the models are made here, random weights
#   OUT_DIR    cpu.txt, scaling.txt (every run's table) and scaling.json
#              (every run's rows, keyed by run: t1, t2, ..., t16_busy)
#   THREADS    default: 1 2 4 8 16 (capped at the machine's cores)
#
# Builds Release into build/ if build/libsmelt.so is missing, exports
# resnet50, bert_base, gpt2_small, mobilenet_v2, squeezenet, resnet18 and
# vit_b16 (or $MODELS), and runs bench/ort_compare.py (default mode, one process, the
# runtimes taking turns; 8 runs in blocks of 2 after 2 warm-ups, 100 ms
# between turns) once per thread count.  The busy core: a Python spin loop
# pinned to the last core for the length of that run.  Written for the lent
# 16-core machine (docs/PARALLEL.md's "Scaling on 16 threads"); runs on any.
set -u
EXPORT=${1:?usage: bench/thread_scaling.sh EXPORT_PY OUT_DIR [THREADS...]}
OUT=${2:?usage: bench/thread_scaling.sh EXPORT_PY OUT_DIR [THREADS...]}
shift 2
THREADS=${*:-1 2 4 8 16}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
NCPU=$(nproc)
MODELS=${MODELS:-"resnet50 bert_base gpt2_small mobilenet_v2 squeezenet resnet18 vit_b16"}
mkdir -p "$OUT"
cd "$ROOT" || exit 1
lscpu | grep -E 'Model name|^CPU\(s\)|L2|L3' >"$OUT/cpu.txt"
python3 -c 'import onnxruntime, torch; print("onnxruntime", onnxruntime.__version__, "torch", torch.__version__)' >>"$OUT/cpu.txt" 2>&1
if [ ! -f build/libsmelt.so ]; then
  (cmake -B build -DCMAKE_BUILD_TYPE=Release -G Ninja >/dev/null && cmake --build build -j "$NCPU" >/dev/null) \
    >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
  rm -f "$OUT/build.log"
fi
MD=$(mktemp -d)
python3 "$EXPORT" "$MD" --only "$(echo $MODELS | tr ' ' ,)" >"$OUT/export.log" 2>&1 || { tail -20 "$OUT/export.log"; exit 1; }
cat "$OUT/export.log" >>"$OUT/cpu.txt" && rm -f "$OUT/export.log"
DIRS=$(for m in $MODELS; do echo "$MD/$m"; done)
JS=$(mktemp -d)
bench() { # threads, tag
  echo "== $2" >>"$OUT/scaling.txt"
  python3 bench/ort_compare.py $DIRS --mode default --threads "$1" --runs 8 --block 2 --warmup 2 \
    --settle-ms 100 --json "$JS/$2.json" 2>&1 | tee -a "$OUT/scaling.txt" | grep -E '^model|^[a-z]' | sed "s/^/[$2] /"
}
max=1
for t in $THREADS; do
  [ "$t" -le "$NCPU" ] || continue
  max=$t
  bench "$t" "t$t"
done
taskset -c $((NCPU - 1)) python3 -c 'while True: pass' &
SPIN=$!
bench "$max" "t${max}_busy"
kill $SPIN
python3 - "$JS" "$OUT/scaling.json" <<'PY'
import glob, json, os, sys
runs = {os.path.basename(p)[:-5]: json.load(open(p)) for p in sorted(glob.glob(sys.argv[1] + "/*.json"))}
json.dump(runs, open(sys.argv[2], "w"), indent=1)
PY
rm -rf "$MD" "$JS"
