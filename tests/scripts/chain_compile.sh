#!/usr/bin/env bash
# A long Neg/Relu chain (default 20000 nodes) compiled in default mode must
# give the same result as eager and as the expected values: compile time has
# to stay near-linear in the node count for this to finish within the test's
# timeout (quadratic fusion took ~3 s at 20k nodes and minutes at 200k).
# usage: chain_compile.sh SMELT [N]
set -eu
smelt=$1 n=${2:-20000}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 "$here/make_chain.py" "$n" "$dir/chain" --test
for n_check in 1 2 3; do  # the short chains check the expected values themselves
  python3 "$here/make_chain.py" "$n_check" "$dir/chain$n_check" --test
done
export SMELT_CACHE=off
"$smelt" test "$dir"/chain1 "$dir"/chain2 "$dir"/chain3 "$dir/chain"
"$smelt" test --mode default "$dir"/chain1 "$dir"/chain2 "$dir"/chain3 "$dir/chain"
# smelt compile --explain reports the compile of a model whose input shapes
# are all fixed (such a session would otherwise compile when created, and
# the report would be empty)
out=$("$smelt" compile "$dir/chain3/model.onnx" --explain)
echo "$out" | grep -q '^fused groups: 1 -> 1 generated kernels' || { echo "FAIL: smelt compile --explain: $out"; exit 1; }
echo "$out" | grep -q "^  kernel 0 over \[4\], 3 nodes" || { echo "FAIL: smelt compile --explain: $out"; exit 1; }
# ... and, with the cache off, that no image of the model file is kept
echo "$out" | grep -q '^model image: not kept' || { echo "FAIL: smelt compile --explain (model image): $out"; exit 1; }
