#!/usr/bin/env bash
# --timeout on the CLI, on a Loop whose trip count is 1e18 (files written by
# `test_cancel --write DIR`): `smelt run --timeout 2` exits 1 with a one-line
# error naming the timeout, in well under 20 s; `smelt test --timeout 2` fails
# that test with "timeout" in its line and goes on to pass the next one;
# bench and profile stop the same way; a bad --timeout value is refused.
set -u
smelt=$1 writer=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
"$writer" --write "$tmp" || { echo "FAIL: could not write the test files"; exit 1; }

start=$(date +%s%N)
"$smelt" run "$tmp/loop.onnx" -i M="$tmp/m_huge.npy" --timeout 2 -o "$tmp/o" >"$tmp/out" 2>"$tmp/err"
rc=$?
took_ms=$((($(date +%s%N) - start) / 1000000))
echo "smelt run --timeout 2: exit $rc after ${took_ms} ms: $(head -1 "$tmp/err")"
[ $rc -eq 1 ] || fail "run: exit $rc, expected 1"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "run: expected a one-line error"
grep -q "timeout" "$tmp/err" || fail "run: the error does not name the timeout"
[ $took_ms -lt 20000 ] || fail "run: took ${took_ms} ms"
[ ! -e "$tmp/o/y.npy" ] || fail "run: wrote an output"

"$smelt" test "$tmp/loop_huge" "$tmp/loop_small" --timeout 2 >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/out"
[ $rc -eq 1 ] || fail "test: exit $rc, expected 1"
grep -q "^FAIL loop_huge .*timeout" "$tmp/out" || fail "test: no FAIL line with 'timeout' for loop_huge"
grep -q "^PASS loop_small" "$tmp/out" || fail "test: loop_small did not pass after the timeout"
grep -q "^1 passed, 1 failed, 0 skipped" "$tmp/out" || fail "test: wrong summary"

"$smelt" test "$tmp/loop_huge" --timeout 1 --mode default >"$tmp/out" 2>"$tmp/err"
grep -q "^FAIL loop_huge .*timeout" "$tmp/out" || fail "test --mode default: no timeout line"

"$smelt" bench "$tmp/loop.onnx" -i M="$tmp/m_huge.npy" --timeout 1 --runs 1 --warmup 0 >"$tmp/out" 2>&1
grep -q "timeout" "$tmp/out" || fail "bench: the mode's error does not name the timeout"

"$smelt" profile "$tmp/loop.onnx" -i M="$tmp/m_huge.npy" --timeout 1 -o "$tmp/trace.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q "timeout" "$tmp/err" || fail "profile: exit $rc, $(head -1 "$tmp/err")"

for bad in 0 -1 abc; do
  "$smelt" run "$tmp/loop.onnx" --timeout "$bad" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  [ $rc -eq 2 ] && grep -q -- "--timeout" "$tmp/err" || fail "run --timeout $bad: exit $rc"
done

[ $fails -eq 0 ] && echo "cli_timeout: all ok" || echo "cli_timeout: $fails failed"
[ $fails -eq 0 ]
