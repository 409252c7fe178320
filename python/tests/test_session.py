"""smelt.Session over NumPy arrays and torch tensors: the zoo against its
reference outputs, model description, zero-copy inputs and outputs, errors."""
import gc
import pathlib

import numpy as np
import pytest

import smelt
from conftest import REPO, shared_dir

ZOO = sorted(p for p in (shared_dir() / "models").glob("*/") if (p / "test_data_set_0").is_dir())


def load_pb(path):
    onnx = pytest.importorskip("onnx")
    from onnx import numpy_helper
    t = onnx.TensorProto()
    t.ParseFromString(pathlib.Path(path).read_bytes())
    return numpy_helper.to_array(t)


@pytest.mark.parametrize("model", ZOO, ids=[p.name for p in ZOO])
@pytest.mark.parametrize("mode", ["eager", "default"])
def test_zoo_reference(model, mode):
    data = model / "test_data_set_0"
    inputs = [load_pb(p) for p in sorted(data.glob("input_*.pb"))]
    refs = [load_pb(p) for p in sorted(data.glob("output_*.pb"))]
    s = smelt.Session(model / "model.onnx", mode=mode, threads=2)
    outs = s.run(inputs)
    assert len(outs) >= len(refs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype
        np.testing.assert_allclose(o, r, rtol=1e-3, atol=1e-4)
    # by name, in any order: the same outputs
    named = s.run(dict(reversed(list(zip(s.input_names, inputs)))))
    for a, b in zip(outs, named):
        np.testing.assert_array_equal(a, b)


MLP = REPO / "models" / "mlp" / "model.onnx"


def mlp_input(s, batch=2):
    info = s.inputs[0]
    shape = [batch if not isinstance(d, int) else d for d in info.shape]
    return np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape)


def test_bytes_and_description():
    a = smelt.Session(MLP, mode="eager")
    b = smelt.Session(MLP.read_bytes(), mode="eager")
    assert a.inputs == b.inputs and a.outputs == b.outputs
    assert a.inputs[0].dtype == "float32" and a.input_names == (a.inputs[0].name,)
    x = mlp_input(a)
    np.testing.assert_array_equal(a.run([x])[0], b.run([x])[0])
    assert isinstance(a.stats, dict) and "compiles" in a.stats
    assert smelt.__version__.count(".") == 2


def test_symbolic_shapes():
    s = smelt.Session(shared_dir() / "models" / "bert_tiny" / "model.onnx") \
        if (shared_dir() / "models" / "bert_tiny").is_dir() else None
    if s is None:
        pytest.skip("bert_tiny not in the zoo")
    assert s.inputs[0].shape == ("batch", "seq") and s.inputs[0].dtype == "int64"
    assert s.outputs[0].shape[-1] == 256


def node_model(op, x_shape, y_type, y_shape, **attrs):
    """An ONNX model y = op(x) over float32 x, the output declared y_type."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info("y", y_type, list(y_shape))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def reduce_model(shape):
    """An ONNX model y = ReduceSum(x) with x of the given shape."""
    onnx = pytest.importorskip("onnx")
    return node_model("ReduceSum", shape, onnx.TensorProto.FLOAT, [], keepdims=0)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_input_is_not_copied(kind):
    """A 1x3x224x224 float32 input is read where the caller keeps it."""
    s = smelt.Session(reduce_model([1, 3, 224, 224]), mode="eager", threads=1)
    x = np.zeros((1, 3, 224, 224), np.float32)
    if kind == "torch":
        torch = pytest.importorskip("torch")
        x = torch.zeros(1, 3, 224, 224)
        addr = x.data_ptr()
    else:
        addr = x.ctypes.data
    assert float(s.run([x])[0]) == 0.0
    assert s._s._last_input_addresses()[0] == addr  # smelt was handed the caller's pointer
    x[0, 1, 2, 3] = 5.0  # in place: the next run sees it
    assert float(s.run([x])[0]) == 5.0
    assert s._s._last_input_addresses()[0] == addr


def test_outputs_own_smelts_buffer():
    s = smelt.Session(MLP, mode="eager")
    out = s.run([mlp_input(s)])[0]
    assert isinstance(out, np.ndarray) and not out.flags.owndata
    base = out.base
    while isinstance(base, memoryview) or isinstance(base, np.ndarray):
        base = base.obj if isinstance(base, memoryview) else base.base
    assert isinstance(base, smelt._smelt.Buffer) and base.address == out.ctypes.data
    expect = out.copy()
    s.close()
    del s
    gc.collect()
    np.testing.assert_array_equal(out, expect)  # outputs outlive the session


def cast_model(to, shape=(2, 3)):
    """An ONNX model y = Cast(x, to) over float32 x."""
    return node_model("Cast", shape, to, shape, to=to)


@pytest.mark.parametrize("to", ["FLOAT", "DOUBLE", "FLOAT16", "INT8", "UINT8", "INT16", "UINT16", "INT32",
                                "UINT32", "INT64", "UINT64", "BOOL"])
def test_fast_path_matches_buffer_path(to):
    """run_arrays (NumPy arrays through NumPy's C API) gives what the buffer
    path gives, dtype and shape included, for every dtype NumPy has."""
    from onnx import TensorProto
    s = smelt.Session(cast_model(getattr(TensorProto, to)), mode="eager")
    x = np.array([[-1.5, 0.0, 2.25], [3.0, 70.0, 1.0]], np.float32)
    fast = s._s.run_arrays([x], None)
    assert fast is not NotImplemented and type(fast[0]) is np.ndarray
    assert isinstance(fast[0].base, smelt._smelt.Buffer) and fast[0].flags.writeable
    slow = np.asarray(s._s.run([x], None)[0])
    assert fast[0].dtype == slow.dtype and fast[0].shape == slow.shape
    np.testing.assert_array_equal(fast[0], slow)
    np.testing.assert_array_equal(s.run({"x": x})[0], slow)  # by name: the fast path too


def test_fast_path_declines_what_it_cannot_read():
    """Inputs run_arrays does not take in place answer NotImplemented before
    anything runs; Session.run then takes the general path (a copy, or the
    same error as before)."""
    s = smelt.Session(MLP, mode="eager")
    x = mlp_input(s, batch=4)
    want = s.run([x])[0]
    for other in (np.asfortranarray(x), x[::-1], x.astype(x.dtype.newbyteorder(">"))):
        assert s._s.run_arrays([other], None) is NotImplemented
    assert s._s.run_arrays(iter([x]), None) is NotImplemented  # not a list or tuple
    assert s._s.run_arrays([x.tolist()], None) is NotImplemented  # not an array
    np.testing.assert_array_equal(s.run([np.asfortranarray(x)])[0], want)  # copied to C order
    np.testing.assert_array_equal(s.run((x,))[0], want)
    with pytest.raises(smelt.InvalidArgumentError):  # not native byte order: refused as before
        s.run([x.astype(x.dtype.newbyteorder(">"))])
    with pytest.raises(ValueError):
        s._s.run_arrays([x], ["a", "b"])  # names and arrays differ in length


def test_fast_path_output_without_numpy_type():
    """A bfloat16 output has no NumPy type: the fast path hands it to
    numpy.asarray's own path (PyArray_FromAny), so it comes back as the
    buffer path's np.asarray gives it."""
    from onnx import TensorProto
    s = smelt.Session(cast_model(TensorProto.BFLOAT16), mode="eager")
    x = np.ones((2, 3), np.float32)
    slow = np.asarray(s._s.run([x], None)[0])
    fast = s._s.run_arrays([x], None)[0]
    assert type(fast) is np.ndarray and (fast.dtype, fast.shape) == (slow.dtype, slow.shape)


def test_torch_in_torch_out():
    torch = pytest.importorskip("torch")
    s = smelt.Session(MLP, mode="eager")
    x = mlp_input(s)
    out = s.run([torch.from_numpy(x).requires_grad_()])[0]
    assert isinstance(out, torch.Tensor)
    np.testing.assert_array_equal(out.numpy(), s.run([x])[0])
    # non-contiguous input: copied to a contiguous one, same result
    xt = torch.from_numpy(np.ascontiguousarray(x.T)).T
    assert not xt.is_contiguous()
    np.testing.assert_array_equal(s.run([xt])[0].numpy(), s.run([x])[0])


def test_wrong_dtype():
    s = smelt.Session(MLP, mode="eager")
    with pytest.raises(smelt.Error) as e:
        s.run([mlp_input(s).astype(np.float64)])
    assert isinstance(e.value, smelt.InvalidArgumentError) and e.value.status == 1
    assert "float64" in str(e.value) or "dtype" in str(e.value)


def test_wrong_rank():
    s = smelt.Session(MLP, mode="eager")
    with pytest.raises(smelt.InvalidArgumentError) as e:
        s.run([mlp_input(s)[None]])
    assert str(e.value)


def test_wrong_name_and_count():
    s = smelt.Session(MLP, mode="eager")
    with pytest.raises(smelt.InvalidArgumentError, match="no input named 'nope'"):
        s.run({"nope": mlp_input(s)})
    with pytest.raises(smelt.InvalidArgumentError, match="inputs given"):
        s.run([])


def test_closed_session():
    s = smelt.Session(MLP, mode="eager")
    s.close()
    assert s.closed
    with pytest.raises(smelt.Error, match="closed"):
        s.run([np.zeros(4, np.float32)])
    with pytest.raises(smelt.Error, match="closed"):
        s.inputs
    s.close()  # twice is fine


def test_bad_models(tmp_path):
    with pytest.raises(smelt.IOError, match="cannot open"):
        smelt.Session(tmp_path / "missing.onnx")
    with pytest.raises(smelt.InvalidModelError):
        smelt.Session(b"\x0a\xff\xff\xff\xff\x0fjunk")
    with pytest.raises(smelt.InvalidModelError, match="empty"):
        smelt.Session(b"")
    with pytest.raises(smelt.InvalidArgumentError, match="mode"):
        smelt.Session(MLP, mode="fastest")


def test_precision():
    with pytest.raises(smelt.UnsupportedError, match="fp32"):
        smelt.Session(MLP, precision="fp8")
    assert smelt.Session(MLP, precision="fp32", mode="eager")
    assert smelt.Session(MLP, precision="fp16", mode="eager").precision == "fp16"
    assert smelt.Session(MLP, precision="int8", mode="eager").precision == "int8"


def test_device():
    cpu = smelt.Session(MLP, mode="eager", device="cpu")
    ref = smelt.Session(MLP, mode="eager", device="cpu-ref")
    x = mlp_input(cpu)
    np.testing.assert_allclose(ref.run([x])[0], cpu.run([x])[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(smelt.Session(MLP, mode="eager").run([x])[0], cpu.run([x])[0])
    with pytest.raises(smelt.UnsupportedError, match="not built into this library"):
        smelt.Session(MLP, device="cuda:0")
    with pytest.raises(smelt.UnsupportedError, match="cpu-ref"):
        smelt.Session(MLP, mode="default", device="cpu-ref")
    with pytest.raises(smelt.InvalidArgumentError, match="unknown device 'tpu'"):
        smelt.Session(MLP, device="tpu")


def add_model(dtype="FLOAT"):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    t = getattr(TensorProto, dtype)
    x = helper.make_tensor_value_info("x", t, [2, 3])
    w = helper.make_tensor_value_info("W", t, [2, 3])
    y = helper.make_tensor_value_info("y", t, [2, 3])
    g = helper.make_graph([helper.make_node("Add", ["x", "W"], ["y"])], "g", [x, w], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_bound_consts_are_viewed(kind):
    """consts= makes graph inputs constants that view the caller's memory."""
    w = np.ones((2, 3), np.float32)
    c = w
    if kind == "torch":
        torch = pytest.importorskip("torch")
        c = torch.from_numpy(w)  # same memory
    s = smelt.Session(add_model(), mode="eager", threads=1, consts={"W": c})
    assert s.input_names == ("x",) and s.bound_consts == ("W",)
    x = np.zeros((2, 3), np.float32)
    assert np.array_equal(s.run([x])[0], w)
    w[0, 0] = 7.0  # not copied: eager reads the caller's array
    assert float(s.run([x])[0][0, 0]) == 7.0
    del w, c
    gc.collect()  # the session keeps the array alive
    assert float(s.run([x])[0][0, 0]) == 7.0


def test_bound_consts_errors(tmp_path):
    w = np.ones((2, 3), np.float32)
    with pytest.raises(smelt.Error, match="'Q' names no input"):
        smelt.Session(add_model(), consts={"Q": w})
    with pytest.raises(smelt.Error, match="declared float32"):
        smelt.Session(add_model(), consts={"W": w.astype(np.int32)})
    with pytest.raises(smelt.Error, match="dim 1 is 2"):
        smelt.Session(add_model(), consts={"W": np.ones((2, 2), np.float32)})
    path = tmp_path / "m.onnx"
    path.write_bytes(add_model())
    with pytest.raises(ValueError, match="bytes"):
        smelt.Session(str(path), consts={"W": w})
