#!/usr/bin/env bash
# Builds every libFuzzer target (fuzz/fuzz_NAME.c) with clang, ASan and UBSan
# in build-fuzz/, then runs each for SECONDS on a scratch copy of its seed
# corpus fuzz/corpus/NAME/ (the committed corpus is never modified).
# Exit status 1 if any target reports a crash, leak, timeout, out-of-memory or
# sanitizer finding; the reproducer is kept under build-fuzz/fuzz-run/NAME/.
#   usage: tests/run_fuzz.sh [SECONDS]   (default 60)
set -euo pipefail

secs=${1:-60}
case $secs in '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz

echo "== configure $build (clang, SMELT_FUZZ=ON)"
CC=clang cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSMELT_FUZZ=ON -DSMELT_TESTS=OFF >/dev/null
echo "== build fuzz targets"
cmake --build "$build" -j2 --target fuzz_all

shopt -s nullglob
targets=("$build"/fuzz/fuzz_*)
if [ ${#targets[@]} -eq 0 ]; then
  echo "no fuzz targets were built" >&2
  exit 1
fi

failed=0
for exe in "${targets[@]}"; do
  [ -f "$exe" ] && [ -x "$exe" ] || continue
  name=$(basename "$exe")
  short=${name#fuzz_}
  work=$build/fuzz-run/$short
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  seeds=0
  if [ -d "$root/fuzz/corpus/$short" ]; then
    cp -R "$root/fuzz/corpus/$short/." "$work/corpus/"
    seeds=$(find "$work/corpus" -type f | wc -l)
  fi
  echo "== $name: ${secs}s on $seeds seeds from fuzz/corpus/$short (log: $work/log)"
  if "$exe" "$work/corpus" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
      -malloc_limit_mb=2048 -artifact_prefix="$work/artifacts/" -print_final_stats=1 \
      >"$work/log" 2>&1; then
    grep -E '^(Done |stat::peak_rss_mb)' "$work/log" | sed 's/^/   /' || true
  else
    failed=1
    echo "!! $name FAILED; last lines of its log:"
    tail -n 40 "$work/log" | sed 's/^/   /'
    ls "$work/artifacts" | sed 's/^/   artifact: /'
  fi
done

if [ $failed -ne 0 ]; then
  echo "== fuzzing found problems"
  exit 1
fi
echo "== all fuzz targets ran clean"
