"""smelt.Generator over the zoo's gpt_tiny_kv: the same tokens as smelt.Session
driven by hand (present -> past), batch, sampling by seed, reset, errors."""
import numpy as np
import pytest

import smelt


@pytest.fixture(scope="module")
def tiny(zoo):
    path = zoo / "gpt_tiny_kv" / "model.onnx"
    if not path.exists():
        pytest.skip(f"{path} not found")
    return path


def by_hand(session, prompt, n):
    """Greedy decoding through Session.run: the reference for Generator."""
    past = {f"past.{i}.{k}": np.zeros((1, 4, 0, 64), np.float32) for i in range(4) for k in ("key", "value")}
    ids, out = list(prompt), []
    names = session.output_names
    for _ in range(n):
        res = session.run({"input_ids": np.array([ids], np.int64), **past})
        t = int(np.asarray(res[0])[0, -1].argmax())
        out.append(t)
        for name, v in zip(names[1:], res[1:]):
            past[name.replace("present", "past")] = np.asarray(v)
        ids = [t]
    return out


def test_greedy_matches_session(tiny):
    s = smelt.Session(tiny, mode="eager", threads=2)
    g = smelt.Generator(s, max_length=32)
    got = g.generate([5, 17, 42, 9], 8)
    assert got == by_hand(s, [5, 17, 42, 9], 8)
    assert g.length == 4 + 7 and g.kv_bytes == 8 * 4 * 11 * 64 * 4
    g.reset()
    assert g.length == 0 and g.kv_bytes == 0
    assert g.generate([5, 17, 42, 9], 8) == got


@pytest.mark.parametrize("mode", ["eager", "default"])
def test_static_cache_matches_as_written(tiny, mode):
    s = smelt.Session(tiny, mode=mode, threads=2)
    st = smelt.Generator(s, max_length=40)
    plain = smelt.Generator(s, max_length=40, static_cache=False)
    assert st.static_cache and not plain.static_cache
    assert st.generate([5, 17, 42, 9], 30) == plain.generate([5, 17, 42, 9], 30)
    assert st.kv_bytes == plain.kv_bytes  # the positions in use


def test_batch_and_sampling(tiny):
    s = smelt.Session(tiny, mode="eager", threads=2)
    g = smelt.Generator(s, batch=2)
    g.prefill([[5, 17, 42], [5, 17, 42]])
    first = g.next()
    assert isinstance(first, list) and len(first) == 2 and first[0] == first[1]
    a = smelt.Generator(s, temperature=100.0, top_k=1000, seed=3).generate([1, 2, 3], 12)
    b = smelt.Generator(s, temperature=100.0, top_k=1000, seed=3).generate([1, 2, 3], 12)
    c = smelt.Generator(s, temperature=100.0, top_k=1000, seed=4).generate([1, 2, 3], 12)
    assert a == b and a != c


def test_errors(tiny):
    s = smelt.Session(tiny, mode="eager", threads=2)
    g = smelt.Generator(s, max_length=4)
    with pytest.raises(smelt.InvalidArgumentError):
        g.next()  # no prompt yet
    with pytest.raises(smelt.InvalidArgumentError, match="max_length"):
        g.prefill([1, 2, 3, 4, 5])
    with pytest.raises(smelt.InvalidArgumentError):
        smelt.Generator(s, batch=0)
    with pytest.raises(smelt.InvalidArgumentError):
        smelt.Generator(s, batch=2).prefill([[1, 2], [3]])


def test_not_a_decoder():
    import pathlib
    mlp = pathlib.Path(__file__).resolve().parents[2] / "models" / "mlp" / "model.onnx"
    with pytest.raises(smelt.UnsupportedError, match="input_ids|decoder"):
        smelt.Generator(smelt.Session(mlp, threads=1))


@pytest.mark.parametrize("precision", ["bf16", "int8", "int4"])
def test_reduced_precision(tiny, precision):
    """A Generator over a bf16 / int8 / int4 session (the decode GEMVs on the reduced-precision
    kernels) gives what that session gives driven by hand, and its first greedy token
    (after the prompt) agrees with fp32's."""
    s = smelt.Session(tiny, mode="eager", threads=2, precision=precision)
    got = smelt.Generator(s, max_length=32).generate([5, 17, 42, 9], 8)
    assert got == by_hand(s, [5, 17, 42, 9], 8)
    ref = smelt.Generator(smelt.Session(tiny, mode="eager", threads=2), max_length=32).generate([5, 17, 42, 9], 1)
    assert got[0] == ref[0]
