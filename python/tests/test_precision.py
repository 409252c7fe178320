"""precision="int8" (and "bf16", "fp16", "int4", eager) over the model zoo, against the zoo's fp32 reference
outputs (test_data_set_0), in eager and default mode.

Tolerances: an int8 GEMM's error per product is at most |a| sb/2 + |b| sa/2
+ sa sb/4 (src/kernels/qgemm.h): about 1/254 of the weights' and 1/254 of
each activation row's range, relative to the terms it multiplies.  Through a
network these add up like noise, so the whole output is compared by cosine
similarity (>= 0.999: the issue's bar for reduced precision on
transformers; measured on the zoo: 0.99982-1.0), and the classifiers'
top-1 class must not change.  Float outputs that are all-constant or
integer outputs must match as fp32 would (rtol 1e-3, atol 1e-4).
"""
import pathlib

import numpy as np
import pytest

import smelt
from test_session import ZOO, load_pb

CLASSIFIERS = {"resnet18", "mobilenet_v2", "squeezenet", "vit_tiny", "mlp"}


def cosine(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    d = np.linalg.norm(a) * np.linalg.norm(b)
    return 1.0 if d == 0 else float(a @ b / d)


@pytest.mark.parametrize("model", ZOO, ids=[p.name for p in ZOO])
@pytest.mark.parametrize("mode", ["eager", "default"])
def test_zoo_int8(model, mode):
    data = model / "test_data_set_0"
    inputs = [load_pb(p) for p in sorted(data.glob("input_*.pb"))]
    refs = [load_pb(p) for p in sorted(data.glob("output_*.pb"))]
    s = smelt.Session(model / "model.onnx", mode=mode, threads=2, precision="int8")
    outs = s.run(inputs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype
        if o.dtype.kind != "f" or np.ptp(r) == 0:
            np.testing.assert_allclose(o, r, rtol=1e-3, atol=1e-4)
            continue
        assert cosine(o, r) >= 0.999, f"{model.name} output cosine {cosine(o, r)}"
    if model.name in CLASSIFIERS and refs[0].ndim == 2:
        np.testing.assert_array_equal(outs[0].argmax(-1), refs[0].argmax(-1))


@pytest.mark.parametrize("model", ZOO, ids=[p.name for p in ZOO])
@pytest.mark.parametrize("mode", ["eager", "default"])
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_zoo_bf16(model, mode, precision):
    """Weight-only bf16 and fp16 (eager; default: the GEMMs are plan steps
    through the kernel registry, src/runtime/gemm_registry.h): each GEMM off
    by at most 2^-8 of sum |a b| (bf16: the weights' rounding,
    src/kernels/wbf16.h), half int8's step, so the same bars hold: cosine >=
    0.999 and the classifiers' top-1 unchanged; fp16 rounds to 2^-11, 8x
    finer, so its bar is cosine >= 0.9999."""
    bar = 0.9999 if precision == "fp16" else 0.999
    data = model / "test_data_set_0"
    inputs = [load_pb(p) for p in sorted(data.glob("input_*.pb"))]
    refs = [load_pb(p) for p in sorted(data.glob("output_*.pb"))]
    outs = smelt.Session(model / "model.onnx", mode=mode, threads=2, precision=precision).run(inputs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype
        if o.dtype.kind != "f" or np.ptp(r) == 0:
            np.testing.assert_allclose(o, r, rtol=1e-3, atol=1e-4)
            continue
        assert cosine(o, r) >= bar, f"{model.name} {precision} output cosine {cosine(o, r)}"
    if model.name in CLASSIFIERS and refs[0].ndim == 2:
        np.testing.assert_array_equal(outs[0].argmax(-1), refs[0].argmax(-1))


@pytest.mark.parametrize("model", ZOO, ids=[p.name for p in ZOO])
def test_zoo_int4(model):
    """int4 weights (eager; default mode is not held to this bar yet: vit_tiny
    gives cosine 0.979 there, as before the GEMM registry): each weight off by up to its group's step, max |w| / 8 over 32
    weights (src/kernels/q4gemm.h) -- 16x int8's -- and the activations quantized per group
    of 32 as int8 (few rows) or fp32 (prefill).  Through a network that is a few percent of
    noise per GEMM, so the bar is cosine >= 0.99 (measured on the zoo 2026-11-25: 0.9941
    (vit_tiny) to 1.0) and the classifiers' top-1 unchanged."""
    data = model / "test_data_set_0"
    inputs = [load_pb(p) for p in sorted(data.glob("input_*.pb"))]
    refs = [load_pb(p) for p in sorted(data.glob("output_*.pb"))]
    outs = smelt.Session(model / "model.onnx", mode="eager", threads=2, precision="int4").run(inputs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype
        if o.dtype.kind != "f" or np.ptp(r) == 0:
            np.testing.assert_allclose(o, r, rtol=1e-3, atol=1e-4)
            continue
        assert cosine(o, r) >= 0.99, f"{model.name} output cosine {cosine(o, r)}"
    if model.name in CLASSIFIERS and refs[0].ndim == 2:
        np.testing.assert_array_equal(outs[0].argmax(-1), refs[0].argmax(-1))


def test_unknown_precision():
    for p in ("fp8", "float16"):
        with pytest.raises(smelt.UnsupportedError, match="implements only"):
            smelt.Session(pathlib.Path(__file__).resolve().parents[2] / "models" / "mlp" / "model.onnx",
                          mode="eager", precision=p)
