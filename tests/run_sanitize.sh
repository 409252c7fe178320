#!/usr/bin/env bash
# Builds smelt and its unit tests with AddressSanitizer + UndefinedBehaviorSanitizer
# (-fsanitize=address,undefined -fno-sanitize-recover=all: the first finding
# ends the process with an error) in build-asan/, then runs there: every unit
# test, the CLI error checks, the model zoo eagerly and compiled (mode default:
# generated kernels, built by the system compiler at run time without
# sanitizers, are loaded into the instrumented process) and a fixed sample of
# the ONNX conformance tests.  Leaks are findings too (LeakSanitizer).
# Exit status 1 on any failure or finding.
#   usage: tests/run_sanitize.sh [CONFORMANCE_SAMPLE]   (every Nth node test; default 8)
# CC picks the compiler for the build (default cc; gcc and clang both work);
# generated kernels use CC too, so an instrumented build of them would need
# the same compiler: they are compiled without sanitizers either way.
set -euo pipefail

sample=${1:-8}
case $sample in '' | *[!0-9]* | 0) echo "usage: $0 [CONFORMANCE_SAMPLE]" >&2; exit 2 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-asan
shared=$root/../shared

echo "== configure $build (${CC:-cc}, SMELT_SANITIZE=ON, -O1)"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DSMELT_SANITIZE=ON >/dev/null
echo "== build"
cmake --build "$build" -j2 2>&1 | grep -Ev '^\[ *[0-9]+(/[0-9]+|%)\] ' || true
[ -x "$build/smelt" ] || { echo "the sanitizer build failed"; exit 1; }

# halt_on_error: the first finding fails the test; the generated kernels' .so
# files are not instrumented, which ASan allows.
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=0:${ASAN_OPTIONS:-}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}
# compiled kernels are cached in the build tree, not in the user's cache
export SMELT_CACHE_DIR=$build/smelt-cache

echo "== ctest: unit tests, CLI errors, zoo (eager, default)"
status=0
ctest --test-dir "$build" -j2 --output-on-failure --timeout 900 \
  -R '^(unit\..*|cli\.errors|zoo\.eager|zoo\.default)$' || status=1

echo "== conformance: every ${sample}th ONNX node test"
if [ -d "$shared/conformance/onnx-node" ]; then
  python3 "$root/tests/conformance/run.py" "$build/smelt" "$shared/conformance/onnx-node" \
    --sample "$sample" --jobs 2 --timeout 300 | tail -n 25 || status=1
else
  echo "   SKIP: $shared/conformance/onnx-node not found"
  skipped=1
fi

if [ $status -ne 0 ]; then
  echo "== the sanitizer run found problems"
  exit 1
fi
if [ "${skipped:-0}" = 1 ]; then
  echo "== sanitizer run clean, but the conformance sample did not run (exit 77: skipped)"
  exit 77
fi
echo "== sanitizer run clean"
