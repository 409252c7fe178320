"""com.microsoft::MatMulNBits (src/ops/matmul_nbits.c) on models written by ONNX Runtime's own
quantizer (onnxruntime.quantization.matmul_nbits_quantizer.MatMulNBitsQuantizer) from a MatMul
built with onnx.helper, against ONNX Runtime's output on the same model and inputs.

- device "cpu-ref" (no op cache: the reference path, W dequantized to fp32) must match ONNX
  Runtime to fp32 rounding (rtol 1e-4 of the magnitudes);
- the default device takes the fast path when block_size is a multiple of 32 (weights repacked
  into int4 groups of 32, kernels/q4gemm.h): up to 16 rows the activations are quantized per
  group of 32 (da = max |a| / 127), so each output may be off by sum_k |W[k][n]| da_k / 2
  (W dequantized here from the initializers); more rows run fp32 on dequantized panels
  (rtol 1e-4 again).  block_size 16 runs the reference path there too.
Shapes: K not a multiple of the block (a padded last block), N odd, rows 1, 3 and 20.
"""
import numpy as np
import pytest

import smelt

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
mq = pytest.importorskip("onnxruntime.quantization.matmul_nbits_quantizer")
from onnx import helper, numpy_helper  # noqa: E402


def quantized_model(K, N, block, symmetric, seed=0):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((K, N)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["rows", K])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["rows", N])],
                          [numpy_helper.from_array(W, "W")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    q = mq.MatMulNBitsQuantizer(m, bits=4, block_size=block, is_symmetric=symmetric)
    q.process()
    model = q.model.model
    assert [n.op_type for n in model.graph.node] == ["MatMulNBits"]
    return model


def dequantized(model):
    """W (K x N) as MatMulNBits defines it, from the model's initializers."""
    node = model.graph.node[0]
    at = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    K, N, bs = at["K"], at["N"], at["block_size"]
    init = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    B = init[node.input[1]].reshape(N, -1)
    nb = (K + bs - 1) // bs
    codes = np.stack([B & 15, B >> 4], -1).reshape(N, -1)[:, :K].astype(np.float32)
    scales = init[node.input[2]].reshape(N, nb)
    if len(node.input) > 3 and node.input[3]:
        z = init[node.input[3]].reshape(N, -1)
        zp = np.stack([z & 15, z >> 4], -1).reshape(N, -1)[:, :nb].astype(np.float32)
    else:
        zp = np.full((N, nb), 8, np.float32)
    blk = np.arange(K) // bs
    return ((codes - zp[:, blk]) * scales[:, blk]).T


def act_bound(x, W):
    """sum_k |W[k][n]| da_k / 2 per output: the int8 activations' rounding."""
    K = x.shape[1]
    pad = (-K) % 32
    xp = np.pad(np.abs(x), ((0, 0), (0, pad))).reshape(x.shape[0], -1, 32)
    da = np.repeat(xp.max(-1) / 127, 32, axis=1)[:, :K]
    return (da / 2) @ np.abs(W)


@pytest.mark.parametrize("block", [16, 32, 64, 128])
@pytest.mark.parametrize("symmetric", [True, False])
def test_matmul_nbits_vs_ort(block, symmetric):
    K, N = 100, 37
    model = quantized_model(K, N, block, symmetric)
    data = model.SerializeToString()
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    W = dequantized(model)
    fast = smelt.Session(data, mode="eager", threads=2)
    plain = smelt.Session(data, mode="eager", device="cpu-ref")
    rng = np.random.default_rng(1)
    for rows in (1, 3, 20):
        x = rng.standard_normal((rows, K)).astype(np.float32)
        want = ref.run(None, {"x": x})[0]
        mag = np.abs(x) @ np.abs(W)
        np.testing.assert_allclose(x @ W, want, rtol=0, atol=float(1e-4 * mag.max()))  # our reading of the format
        got_ref = plain.run([x])[0]
        assert np.all(np.abs(got_ref - want) <= 1e-4 * mag + 1e-6)
        got = fast.run([x])[0]
        tol = 1e-4 * mag + 1e-6
        if block % 32 == 0 and rows <= 16:
            tol = tol + act_bound(x, W)
        assert np.all(np.abs(got - want) <= tol), f"max error {np.abs(got - want).max()}"
        if block % 32 == 0 and rows <= 16:
            assert not np.array_equal(got, got_ref)  # the int8 x int4 kernel ran


def test_matmul_nbits_bias_and_errors():
    K, N = 64, 9
    model = quantized_model(K, N, 32, True)
    bias = np.linspace(-1, 1, N).astype(np.float32)
    node = model.graph.node[0]
    node.input.extend(["", "", "bias"] if len(node.input) == 3 else ["", "bias"])
    model.graph.initializer.append(numpy_helper.from_array(bias, "bias"))
    data = model.SerializeToString()
    x = np.random.default_rng(2).standard_normal((20, K)).astype(np.float32)
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for dev in ("cpu", "cpu-ref"):
        got = smelt.Session(data, mode="eager", device=dev).run([x])[0]
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    # bits 8 is refused with a message, never run as something else
    for a in node.attribute:
        if a.name == "bits":
            a.i = 8
    with pytest.raises(smelt.Error, match="bits 8"):
        smelt.Session(model.SerializeToString(), mode="eager").run([x])
