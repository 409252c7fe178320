#!/usr/bin/env bash
# Bad input to the CLI: a truncated model, a non-model file, a missing file,
# wrong input names/shapes — each must give a one-line error and exit status 1.
set -u
smelt=$1 shared=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
expect_error() { # expect_error DESCRIPTION CMD...   (bad input: exit 1)
  expect_exit 1 "$@"
}
expect_exit() { # expect_exit CODE DESCRIPTION CMD...
  local want=$1 desc=$2
  shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$tmp/err")
  if [ $rc -ne "$want" ] || [ "$lines" -lt 1 ] || [ "$lines" -gt 12 ]; then
    echo "FAIL $desc: exit $rc, stderr:"; cat "$tmp/err"; fails=$((fails + 1))
  else
    echo "ok   $desc: $(head -c 300 "$tmp/err" | head -1)"
  fi
}
model=$shared/models/mlp/model.onnx
if [ ! -f "$model" ]; then echo "SKIP: $model not found"; exit 77; fi
head -c 3000 "$model" >"$tmp/truncated.onnx"
echo "this is not a model" >"$tmp/text.onnx"
: >"$tmp/empty.onnx"
expect_error "truncated model" "$smelt" run "$tmp/truncated.onnx" -o "$tmp/o"
expect_error "non-model file" "$smelt" run "$tmp/text.onnx" -o "$tmp/o"
expect_error "empty file" "$smelt" run "$tmp/empty.onnx" -o "$tmp/o"
expect_error "missing file" "$smelt" run "$tmp/nope.onnx" -o "$tmp/o"
expect_error "directory as model" "$smelt" run "$tmp" -o "$tmp/o"
expect_error "unknown input name" "$smelt" run "$model" -i nosuch="$tmp/x.npy" -o "$tmp/o"
expect_error "missing input file" "$smelt" run "$model" -i x="$tmp/x.npy" -o "$tmp/o"
expect_error "strict inputs" "$smelt" run "$model" --strict-inputs -o "$tmp/o"
# a wrong shape: mlp wants x [batch,64]; give it [2,3]
"$smelt" run "$shared/models/mlp/model.onnx" -o "$tmp/good" >/dev/null 2>&1 || { echo "FAIL good run"; fails=$((fails+1)); }
printf '\x93NUMPY\x01\x00\x76\x00{'"'"'descr'"'"': '"'"'<f4'"'"', '"'"'fortran_order'"'"': False, '"'"'shape'"'"': (2, 3), }' >"$tmp/bad.npy"
python3 - "$tmp/bad.npy" <<'PY' 2>/dev/null || true
import sys
p = sys.argv[1]
hdr = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
hdr += b" " * (118 - 10 - len(hdr) - 1) + b"\n"
open(p, "wb").write(b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr + b"\x00" * 24)
PY
expect_error "wrong input shape" "$smelt" run "$model" -i x="$tmp/bad.npy" -o "$tmp/o"
expect_exit 2 "unknown option (usage error)" "$smelt" run "$model" --bogus
# precisions: an unknown name is a usage error, never run as fp32
expect_exit 2 "unknown precision" "$smelt" run "$model" --precision fp64 -o "$tmp/o"
grep -q "fp64" "$tmp/err" || { echo "FAIL precision fp64: message names it"; fails=$((fails + 1)); }

# Model strings in messages are quoted with control characters escaped: a node
# name and an attribute holding ESC [2J and a newline must not reach the terminal.
here=$(cd "$(dirname "$0")" && pwd)
cat >"$tmp/evil.json" <<'JSON'
{"opset": 20, "inputs": [["x", [2, 3]]], "outputs": [["y", [2, 3]]],
 "nodes": [{"op": "Gelu", "name": "evil\u001b[2J\n", "inputs": ["x"], "outputs": ["y"],
            "attrs": {"approximate": "\u001b[2J\n"}}]}
JSON
python3 "$here/tiny_onnx.py" "$tmp/evil.onnx" "$tmp/evil.json"
expect_error "ESC in node name and attribute" "$smelt" run "$tmp/evil.onnx" -o "$tmp/o"
if grep -q "$(printf '\033')" "$tmp/err" || [ "$(wc -l <"$tmp/err")" -ne 1 ] ||
   ! grep -qF "node 'evil\x1b[2J\n' (Gelu)" "$tmp/err" || ! grep -qF "approximate is '\x1b[2J\n'" "$tmp/err"; then
  echo "FAIL the message is not escaped:"; od -c "$tmp/err" | head; fails=$((fails + 1))
else
  echo "ok   the message is escaped: $(cat "$tmp/err")"
fi
# smelt run -o: outputs "a/b" and "a_b" (Relu(x) and Neg(x)) both map to a_b.npy;
# each must get its own file, with a note on stderr.
cat >"$tmp/clash.json" <<'JSON'
{"opset": 17, "inputs": [["x", [2, 3]]], "outputs": [["a/b", [2, 3]], ["a_b", [2, 3]]],
 "nodes": [{"op": "Relu", "inputs": ["x"], "outputs": ["a/b"]},
           {"op": "Neg", "inputs": ["x"], "outputs": ["a_b"]}]}
JSON
python3 "$here/tiny_onnx.py" "$tmp/clash.onnx" "$tmp/clash.json"
if "$smelt" run "$tmp/clash.onnx" -o "$tmp/clash" >"$tmp/out" 2>"$tmp/err" &&
   grep -qF "'a/b' went to '$tmp/clash/a_b_1.npy'" "$tmp/err" &&
   [ "$(LC_ALL=C ls -A "$tmp/clash" | tr '\n' ' ')" = "a_b.npy a_b_1.npy " ] &&
   python3 - "$tmp/clash" <<'PY'
import struct, sys
def load(p):  # float32 .npy without numpy
    b = open(p, "rb").read()
    n = int.from_bytes(b[8:10], "little")
    d = b[10 + n:]
    return struct.unpack("<%df" % (len(d) // 4), d)
neg, relu = load(sys.argv[1] + "/a_b.npy"), load(sys.argv[1] + "/a_b_1.npy")
assert len(neg) == 6 and any(v > 0 for v in neg) and any(v < 0 for v in neg), neg
assert all(r == max(-v, 0.0) for r, v in zip(relu, neg)), (neg, relu)
PY
then
  echo "ok   clashing output names: $(cat "$tmp/err")"
else
  echo "FAIL clashing output names:"; cat "$tmp/out" "$tmp/err"; ls -A "$tmp/clash"; fails=$((fails + 1))
fi
# -o writes all outputs or none: with a_b_1.npy taken by a folder, the run
# fails and the existing a_b.npy is left as it was, with nothing beside it.
mkdir -p "$tmp/keep/a_b_1.npy"
echo sentinel >"$tmp/keep/a_b.npy"
expect_error "an output file cannot be written" "$smelt" run "$tmp/clash.onnx" -o "$tmp/keep"
if [ "$(cat "$tmp/keep/a_b.npy")" = sentinel ] && [ "$(LC_ALL=C ls -A "$tmp/keep" | tr '\n' ' ')" = "a_b.npy a_b_1.npy " ]; then
  echo "ok   nothing was written"
else
  echo "FAIL -o left changes behind:"; ls -lA "$tmp/keep"; fails=$((fails + 1))
fi

# smelt generate: a model that is not a decoder with a KV cache, bad prompt ids,
# a prompt past the model's positions (gpt_tiny_kv has 128 positions: a Gather out of range)
expect_error "generate: not a decoder" "$smelt" generate "$model" --prompt-ids 1,2
expect_exit 2 "generate: bad --prompt-ids" "$smelt" generate "$model" --prompt-ids 1,x
expect_exit 2 "generate: no prompt" "$smelt" generate "$model"
expect_exit 2 "generate: --top-p out of range" "$smelt" generate "$model" --prompt-ids 1 --top-p 0
tiny=$shared/models/gpt_tiny_kv/model.onnx
if [ -f "$tiny" ]; then
  expect_error "generate: an id past the vocabulary" "$smelt" generate "$tiny" --prompt-ids 1,999999 --eos -1
fi
# smelt tokenize: bad tokenizer files and bad input are one-line errors naming where
printf '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}' >"$tmp/tok_merge.json"
printf '{"model": {"type": "Unigram", "vocab": []}}' >"$tmp/tok_unigram.json"
printf '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}' >"$tmp/tok_ok.json"
head -c 40 "$tmp/tok_ok.json" >"$tmp/tok_cut.json"
expect_error "tokenizer: merge of a token not in the vocabulary" "$smelt" tokenize --tokenizer "$tmp/tok_merge.json" --text a
expect_error "tokenizer: unsupported model" "$smelt" tokenize --tokenizer "$tmp/tok_unigram.json" --text a
expect_error "tokenizer: truncated file" "$smelt" tokenize --tokenizer "$tmp/tok_cut.json" --text a
expect_error "tokenizer: missing file" "$smelt" tokenize --tokenizer "$tmp/nope.json" --text a
expect_error "tokenizer: id not in the vocabulary" "$smelt" tokenize --tokenizer "$tmp/tok_ok.json" --decode 1,7
expect_exit 2 "tokenizer: bad --decode list (usage error)" "$smelt" tokenize --tokenizer "$tmp/tok_ok.json" --decode 1,x
expect_exit 2 "tokenizer: no text (usage error)" "$smelt" tokenize --tokenizer "$tmp/tok_ok.json"
if [ "$("$smelt" tokenize --tokenizer "$tmp/tok_ok.json" --text abba)" = "2,1,0" ] &&
   [ "$("$smelt" tokenize --tokenizer "$tmp/tok_ok.json" --decode 2,1,0)" = "ab b a" ]; then
  echo "ok   tokenize encodes and decodes"
else
  echo "FAIL tokenize: $("$smelt" tokenize --tokenizer "$tmp/tok_ok.json" --text abba 2>&1)"; fails=$((fails + 1))
fi
# --device: CUDA is not built in, an unknown name lists the devices there are,
# and cpu-ref (the reference device) runs eager only
expect_device_error() { # expect_device_error CODE MESSAGE CMD...
  local code=$1 msg=$2
  shift 2
  expect_exit "$code" "device: $msg" "$@"
  grep -qF "$msg" "$tmp/err" || { echo "FAIL device: no \"$msg\" in:"; cat "$tmp/err"; fails=$((fails + 1)); }
}
expect_device_error 2 "device 'cuda:0': not built into this library" "$smelt" run "$model" --device cuda:0 -o "$tmp/o"
expect_device_error 2 "unknown device 'tpu'; this library has: cpu, cpu-ref" "$smelt" bench "$model" --device tpu
expect_device_error 2 "device 'cuda': not built into this library" "$smelt" profile "$model" -o "$tmp/t.json" --device cuda
expect_device_error 1 "device 'cpu-ref' runs the reference kernels eagerly" \
  "$smelt" run "$model" --device cpu-ref --mode default -o "$tmp/o"

[ $fails -eq 0 ] && echo "all CLI error checks passed" || echo "$fails CLI error checks failed"
[ $fails -eq 0 ]
