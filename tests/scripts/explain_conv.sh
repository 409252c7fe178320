#!/usr/bin/env bash
# smelt compile --explain names the kernel every convolution step takes
# (ops/conv.c: conv_op_describe): on squeezenet and mobilenet_v2 from
# ../shared/models, each Conv library line names an element type and a
# kernel with its file, never "the op's kernel"; squeezenet's 3x3 convs name
# a Winograd or direct kernel and its 1x1 ones a 1x1 route; SMELT_CONV=direct
# turns the 3x3 lines into the direct kernel; under --precision bf16 with
# SMELT_CONV_BF16=1 every Conv the autocast log marks bf16 says bf16, and
# mobilenet_v2's depthwise ones run on the f32 depthwise kernel, or between
# channels-last bf16 activations on the bf16 depthwise one (passes/bf16_acts.c).
# usage: explain_conv.sh SMELT MODELS_DIR   (exit 77 when the models are missing)
set -eu
smelt=$1 models=$2
sq=$models/squeezenet/model.onnx mb=$models/mobilenet_v2/model.onnx
[ -f "$sq" ] && [ -f "$mb" ] || { echo "SKIP: $models/{squeezenet,mobilenet_v2} not found"; exit 77; }
export SMELT_CACHE=off
fail() { echo "FAIL: $*"; exit 1; }
for m in "$sq" "$mb"; do
  out=$("$smelt" compile "$m" --explain)
  conv=$(echo "$out" | grep -c "^  library: .* (Conv) conv ") || true
  named=$(echo "$out" | grep -c "^  library: .* (Conv) conv .*: f32 .*(\(kernels/conv_[a-z_]*\.c\|ops/conv\.c\))$") || true
  [ "$conv" -gt 10 ] && [ "$conv" = "$named" ] || fail "$m: $named of $conv Conv steps name an f32 kernel and its file"
  echo "$out" | grep "(Conv)" | grep -q "the op's kernel" && fail "$m: a Conv step says only 'the op's kernel'"
done
out=$("$smelt" compile "$sq" --explain)
echo "$out" | grep "kernel 3x3 stride 1,1" | grep -qv "Winograd\|direct" && fail "squeezenet: a 3x3 conv without a Winograd or direct kernel"
echo "$out" | grep "kernel 1x1 stride 1,1" | grep -qv "1x1\|direct" && fail "squeezenet: a 1x1 conv on no 1x1 route"
out=$(SMELT_CONV=direct "$smelt" compile "$sq" --explain)
echo "$out" | grep "kernel 3x3 stride 1,1" | grep -qv "direct implicit GEMM" && fail "SMELT_CONV=direct: a 3x3 conv not on the direct kernel"
out=$(SMELT_CONV_BF16=1 "$smelt" compile "$mb" --precision bf16 --explain)
marked=$(echo "$out" | grep -c "autocast: .*Conv) -> bf16") || true
bf=$(echo "$out" | grep -c "^  library: .*: bf16 x bf16 -> f32") || true
[ "$marked" -gt 20 ] && [ "$marked" = "$bf" ] || fail "mobilenet_v2 bf16: $bf Conv steps say bf16, autocast marked $marked"
echo "$out" | grep "group " | grep "^  library" | grep -v "f32 depthwise" | grep -qv "channels-last in and out: bf16 depthwise" &&
  fail "mobilenet_v2 bf16: a depthwise conv on neither the f32 depthwise kernel nor the channels-last bf16 one"
echo "ok: every Conv step names its kernel"
