#!/usr/bin/env bash
# Runs the Python package's pytest suite (python/tests) against the package
# built in the build tree (build/python: smelt/ with the extension, and the
# dist-info that registers the torch.compile back end).
#   run_pytest.sh PYTHON BUILD_PYTHON_DIR SHARED_DIR [pytest args...]
# Exit 77 (ctest: skipped) when numpy or pytest is missing, unless
# SMELT_REQUIRE_PYTEST=1 (CI), where that is a failure.  pytest's exit 5 (no
# tests collected) is a failure: the suite is never empty.  A run in which
# pytest skipped tests (a module such as torch missing, a zoo model not there)
# and none failed exits 77 too: it did not check everything.
set -u
py=$1 pkg=$2 shared=$3
shift 3
here=$(cd "$(dirname "$0")/.." && pwd)
if ! "$py" -c "import numpy, pytest" 2>/dev/null; then
  if [ "${SMELT_REQUIRE_PYTEST:-0}" = 1 ]; then
    echo "FAIL: $py lacks numpy or pytest (SMELT_REQUIRE_PYTEST=1)"
    exit 1
  fi
  echo "SKIP: $py lacks numpy or pytest (pip install numpy pytest; torch etc. for the torch tests)"
  exit 77
fi
export PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}"
export SMELT_SHARED_DIR="$shared"
cd "$here/python/tests" || exit 1
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
"$py" -m pytest -q -rs -p no:cacheprovider "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ $rc = 5 ]; then
  echo "FAIL: pytest collected no tests"
  exit 1
fi
# the summary line: "N passed, M skipped in S s"
if [ $rc = 0 ] && tail -n 1 "$log" | grep -q ' skipped'; then
  echo "SKIP: some tests were skipped (see above); exit 77"
  exit 77
fi
exit $rc
