#!/usr/bin/env bash
# Runs `smelt test` over every model of the shared zoo.  Exit 77 (ctest: skipped)
# when the zoo is not there.
set -u
smelt=$1 shared=$2
shift 2
if [ ! -d "$shared/models" ]; then
  echo "SKIP: $shared/models not found (the model zoo lives in ../shared beside the checkout)"
  exit 77
fi
exec "$smelt" test "$@" "$shared"/models/*/
