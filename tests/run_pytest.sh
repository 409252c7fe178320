#!/usr/bin/env bash
# Runs the Python package's pytest suite (python/tests) against the package
# built in the build tree (build/python: smelt/ with the extension, and the
# dist-info that registers the torch.compile back end).
#   run_pytest.sh PYTHON BUILD_PYTHON_DIR SHARED_DIR [pytest args...]
# Exit 77 (ctest: skipped) when numpy or pytest is missing, unless
# SMELT_REQUIRE_PYTEST=1 (CI), where that is a failure.  pytest's exit 5 (no
# tests collected) is a failure: the suite is never empty.
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
"$py" -m pytest -q -p no:cacheprovider "$@"
rc=$?
if [ $rc = 5 ]; then
  echo "FAIL: pytest collected no tests"
  exit 1
fi
exit $rc
