#!/usr/bin/env bash
# Memory errors and leaks under valgrind (memcheck) in an ordinary build: the
# repo's model (models/mlp) run eagerly and in every compiled mode, and the
# unit tests of the file and message code.
#
# valgrind cannot decode AVX-512 instructions (SIGILL), so everything runs with
# SMELT_ISA=avx2: smelt's own kernels take their AVX2 path, and generated
# kernels are compiled with -mno-avx512f (the codegen lowers -march=native to
# the active ISA; SMELT_ISA=scalar gives -mno-avx).  glibc picks its string
# functions from the CPU valgrind reports, which has no AVX-512 either.
#   usage: tests/run_valgrind.sh [BUILD_DIR]   (default build/; needs valgrind)
# Exit status 1 on any error or definite/indirect leak, 77 when valgrind is missing.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
if ! command -v valgrind >/dev/null; then echo "SKIP: valgrind not installed"; exit 77; fi
[ -x "$build/smelt" ] || { echo "no smelt in $build: build it first"; exit 1; }

export SMELT_ISA=avx2 SMELT_CACHE=off
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
vg=(valgrind --quiet --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect
    --errors-for-leak-kinds=definite,indirect --num-callers=30)
failed=0
check() { # check DESCRIPTION CMD...
  local desc=$1
  shift
  local t0=$SECONDS
  if "${vg[@]}" --log-file="$tmp/vg.log" "$@" >"$tmp/out" 2>&1; then
    echo "ok   $desc ($((SECONDS - t0)) s)"
  else
    echo "FAIL $desc (exit $?):"
    tail -n 20 "$tmp/out" | sed 's/^/   /'
    head -n 60 "$tmp/vg.log" | sed 's/^/   /'
    failed=1
  fi
}

check "smelt run mlp (eager)" "$build/smelt" run "$root/models/mlp/model.onnx" -o "$tmp/o" --threads 2
for mode in default reduce-overhead max-autotune; do
  check "smelt test mlp (--mode $mode)" "$build/smelt" test "$root/models/mlp" --mode "$mode" --threads 2
done
for t in test_quote test_file_name test_file_set test_npy test_tensor_file test_onnx_pb; do
  [ -x "$build/tests/$t" ] && check "unit $t" "$build/tests/$t"
done

if [ $failed -ne 0 ]; then echo "== valgrind found problems"; exit 1; fi
echo "== valgrind clean"
