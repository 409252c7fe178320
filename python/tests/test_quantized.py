"""Graphs that are already quantized: the fast paths (MatMulInteger and
QLinearMatMul on the exact int32 kernel, DynamicQuantizeLinear and per-tensor
QuantizeLinear / DequantizeLinear as vector loops, a quantized weight folded
to float32) give exactly the values of the reference kernels (device
cpu-ref runs those); a float GEMM behind them within its summation order."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import smelt  # noqa: E402

RNG = np.random.default_rng(0)
TP = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}


def ints(dt, shape):
    lo, hi = (0, 256) if dt == np.uint8 else (-128, 128)
    return RNG.integers(lo, hi, shape).astype(dt)


def same_as_reference(model_bytes, inputs):
    ref = smelt.Session(model_bytes, mode="eager", device="cpu-ref").run(inputs)
    for mode in ("eager", "default"):
        out = smelt.Session(model_bytes, mode=mode, threads=2).run(inputs)
        for o, r in zip(out, ref):
            o, r = np.asarray(o), np.asarray(r)
            if np.issubdtype(r.dtype, np.floating) and r.ndim:  # a GEMM's sums: order-dependent last bits
                np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-5, err_msg=mode)
            else:  # quantized values, scales: exactly the reference's
                assert np.array_equal(o, r), mode


def model(nodes, inputs, outputs, inits, opset=21):
    g = helper.make_graph(nodes, "q", inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m.SerializeToString()


@pytest.mark.parametrize("at,bt,per", [(np.uint8, np.int8, False), (np.uint8, np.uint8, True), (np.int8, np.int8, True)])
def test_qlinearmatmul_and_matmulinteger(at, bt, per):
    M, K, N = 5, 37, 19
    A, B = ints(at, (2, M, K)), ints(bt, (K, N))
    bz = (RNG.integers(0, 20, N) if per else np.array(3)).astype(bt)
    bs = (RNG.random(N) * 0.02 + 0.001 if per else np.array(0.01)).astype(np.float32)
    f32 = lambda v, n: numpy_helper.from_array(np.array(v, np.float32), n)  # noqa: E731
    inits = [numpy_helper.from_array(B, "B"), f32(0.05, "as"), numpy_helper.from_array(np.array(7, at), "az"),
             numpy_helper.from_array(bs, "bs"), numpy_helper.from_array(bz, "bz"), f32(0.3, "ys"),
             numpy_helper.from_array(np.array(5, np.uint8), "yz")]
    nodes = [helper.make_node("QLinearMatMul", ["A", "as", "az", "B", "bs", "bz", "ys", "yz"], ["Y"]),
             helper.make_node("MatMulInteger", ["A", "B", "az", "bz"], ["I"])]
    b = model(nodes, [helper.make_tensor_value_info("A", TP[at], [2, M, K])],
              [helper.make_tensor_value_info("Y", TensorProto.UINT8, [2, M, N]),
               helper.make_tensor_value_info("I", TensorProto.INT32, [2, M, N])], inits)
    same_as_reference(b, [A])


@pytest.mark.parametrize("qt", [np.uint8, np.int8])
def test_qdq_and_dynamic_quantize(qt):
    """x -> DynamicQuantizeLinear; x -> QuantizeLinear -> DequantizeLinear ->
    MatMul with a dequantized constant weight (folded)."""
    x = (RNG.standard_normal((3, 40)) * 4).astype(np.float32)
    x[0, 0], x[1, 1] = np.nan, np.inf
    W = ints(np.int8, (40, 24))
    f32 = lambda v, n: numpy_helper.from_array(np.array(v, np.float32), n)  # noqa: E731
    inits = [f32(0.05, "s"), numpy_helper.from_array(np.array(3 if qt == np.uint8 else -2, qt), "z"),
             numpy_helper.from_array(W, "W"), f32(0.01, "ws"), numpy_helper.from_array(np.array(0, np.int8), "wz")]
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["dq", "dqs", "dqz"]),
             helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
             helper.make_node("DequantizeLinear", ["W", "ws", "wz"], ["Wf"]),
             helper.make_node("MatMul", ["d", "Wf"], ["y"])]
    b = model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 40])],
              [helper.make_tensor_value_info("dq", TensorProto.UINT8, [3, 40]),
               helper.make_tensor_value_info("dqs", TensorProto.FLOAT, []),
               helper.make_tensor_value_info("q", TP[qt], [3, 40]),
               helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 24])], inits)
    same_as_reference(b, [x])
