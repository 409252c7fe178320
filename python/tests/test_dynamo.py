"""torch.compile(backend="smelt") matches eager: torchvision CNNs, transformers
BERT and GPT-2 from small configs, graph breaks, a dynamic batch,
inference_mode, and the fallbacks (training graphs, ops smelt cannot take)."""
import importlib.metadata
import warnings

import pytest

torch = pytest.importorskip("torch")
import smelt  # noqa: E402
from smelt.dynamo import SmeltFallbackWarning  # noqa: E402

OPTS = {"threads": 2, "fallback": "eager"}


def compiled(model, **kw):
    torch._dynamo.reset()
    return torch.compile(model, backend="smelt", options={**OPTS, **kw})


@pytest.fixture(autouse=True)
def no_fallback_unless_expected():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always", SmeltFallbackWarning)
        yield w


def fallbacks(w):
    return [x for x in w if issubclass(x.category, SmeltFallbackWarning)]


def test_entry_point_registered():
    eps = importlib.metadata.entry_points(group="torch_dynamo_backends")
    assert any(e.name == "smelt" and e.value == "smelt.dynamo:smelt_backend" for e in eps)
    assert "smelt" in torch._dynamo.list_backends()


def check(model, *args, rtol=1e-3, atol=1e-4, w=None):
    c = compiled(model)
    with torch.no_grad():
        got = c(*args)
        ref = model(*args)
    flat_got = got if isinstance(got, (tuple, list)) else [got]
    flat_ref = ref if isinstance(ref, (tuple, list)) else [ref]
    for g, r in zip(flat_got, flat_ref):
        torch.testing.assert_close(g, r, rtol=rtol, atol=atol)
    return c


def compiled_pieces(model):
    """torch.compile through smelt's back end, keeping what it returns for each
    graph Dynamo hands over (the callables carry .smelt_session)."""
    pieces = []
    orig = smelt.dynamo.smelt_backend

    def counting(gm, ex, **kw):
        f = orig(gm, ex, **kw)
        pieces.append(f)
        return f

    torch._dynamo.reset()
    return torch.compile(model, backend=counting, options=OPTS), pieces


def test_resnet50(no_fallback_unless_expected):
    tv = pytest.importorskip("torchvision")
    m = tv.models.resnet50(weights=None).eval()
    check(m, torch.randn(1, 3, 224, 224), atol=1e-3)
    assert not fallbacks(no_fallback_unless_expected)


def test_mobilenet_v3_small(no_fallback_unless_expected):
    tv = pytest.importorskip("torchvision")
    m = tv.models.mobilenet_v3_small(weights=None).eval()
    check(m, torch.randn(1, 3, 224, 224), atol=1e-3)
    assert not fallbacks(no_fallback_unless_expected)


def test_bert_from_config(no_fallback_unless_expected):
    tr = pytest.importorskip("transformers")
    cfg = tr.BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=256, vocab_size=1000)
    m = tr.BertModel(cfg).eval()
    ids = torch.randint(0, 1000, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.long)
    c = compiled(m)
    with torch.no_grad():
        got = c(input_ids=ids, attention_mask=mask).last_hidden_state
        ref = m(input_ids=ids, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(got, ref, rtol=1e-3, atol=1e-4)


def test_gpt2_from_config(no_fallback_unless_expected):
    tr = pytest.importorskip("transformers")
    cfg = tr.GPT2Config(n_embd=128, n_layer=2, n_head=2, vocab_size=1000, n_positions=64)
    m = tr.GPT2Model(cfg).eval()
    ids = torch.randint(0, 1000, (1, 16))
    c = compiled(m)
    with torch.no_grad():
        got = c(input_ids=ids, use_cache=False).last_hidden_state
        ref = m(input_ids=ids, use_cache=False).last_hidden_state
    torch.testing.assert_close(got, ref, rtol=1e-3, atol=1e-4)


class Broken(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 8)

    def forward(self, x):
        h = torch.relu(self.a(x))
        torch._dynamo.graph_break()
        return torch.tanh(self.b(h))


def test_graph_break(no_fallback_unless_expected):
    m = Broken().eval()
    c, pieces = compiled_pieces(m)
    x = torch.randn(4, 16)
    with torch.no_grad():
        torch.testing.assert_close(c(x), m(x), rtol=1e-4, atol=1e-5)
    assert len(pieces) == 2 and all(hasattr(p, "smelt_session") for p in pieces)
    assert not fallbacks(no_fallback_unless_expected)


def test_weights_bound_not_serialized(no_fallback_unless_expected):
    """The frozen weights reach smelt as bound constants (Session(consts=)),
    not through the ONNX bytes; a Linear's weight is read with transB."""
    m = torch.nn.Sequential(torch.nn.Linear(96, 80), torch.nn.GELU(), torch.nn.Linear(80, 8)).eval()
    c, pieces = compiled_pieces(m)
    x = torch.randn(3, 5, 96)
    with torch.no_grad():
        torch.testing.assert_close(c(x), m(x), rtol=1e-4, atol=1e-5)
    assert len(pieces) == 1
    sess = pieces[0].smelt_session
    assert len(sess.bound_consts) == 4 and sess.input_names == ("in0",)
    assert not fallbacks(no_fallback_unless_expected)


def test_dynamic_batch(no_fallback_unless_expected):
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).eval()
    torch._dynamo.reset()
    c = torch.compile(m, backend="smelt", options=OPTS, dynamic=True)
    with torch.no_grad():
        for b in (2, 5, 7):
            x = torch.randn(b, 16)
            torch.testing.assert_close(c(x), m(x), rtol=1e-4, atol=1e-5)
    assert not fallbacks(no_fallback_unless_expected)


def test_inference_mode(no_fallback_unless_expected):
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU()).eval()
    x = torch.randn(1, 3, 16, 16)
    c = compiled(m)
    with torch.inference_mode():
        torch.testing.assert_close(c(x), m(x), rtol=1e-4, atol=1e-5)
    assert not fallbacks(no_fallback_unless_expected)


def test_grad_enabled_runs_on_smelt_with_eager_gradients(no_fallback_unless_expected):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    ref.load_state_dict(m.state_dict())
    c = compiled(m)
    x = torch.randn(3, 8, requires_grad=True)
    xr = x.detach().clone().requires_grad_()
    y = c(x)  # grad enabled, weights require grad: smelt forward, eager-recompute backward
    assert y.requires_grad
    torch.testing.assert_close(y, ref(xr), rtol=1e-4, atol=1e-5)
    (y * torch.arange(4.0)).sum().backward()
    (ref(xr) * torch.arange(4.0)).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-4, atol=1e-5)
    for p, q in zip(m.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    assert not fallbacks(no_fallback_unless_expected)


def test_resnet50_one_liner_runs_on_smelt(no_fallback_unless_expected):
    """The issue's line as written: eval(), grad enabled, weights requiring grad."""
    tv = pytest.importorskip("torchvision")
    m = tv.models.resnet50().eval()
    c = torch.compile(m, backend="smelt", options={"threads": 2})
    x = torch.randn(1, 3, 224, 224)
    torch._dynamo.reset()
    err = (c(x) - m(x)).abs().max().item()
    assert err < 1e-3
    assert not fallbacks(no_fallback_unless_expected)


def test_weights_changed_in_place_fall_back(no_fallback_unless_expected):
    m = torch.nn.Linear(8, 4).eval()
    c = compiled(m)
    x = torch.randn(2, 8)
    with torch.no_grad():
        torch.testing.assert_close(c(x), m(x))
        assert not fallbacks(no_fallback_unless_expected)
        m.weight.mul_(2)  # frozen into the smelt model: must not be used stale
        torch.testing.assert_close(c(x), m(x))
        torch.testing.assert_close(c(x), m(x))
    w = fallbacks(no_fallback_unless_expected)
    assert len(w) == 1 and "changed in place" in str(w[0].message)


def test_training_mode_graph_falls_back(no_fallback_unless_expected):
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    m.train()
    c = compiled(m)
    x = torch.randn(2, 3, 8, 8)
    y = c(x)  # batch statistics and running-stat updates: not smelt's
    y.sum().backward()
    assert m[0].weight.grad is not None
    w = fallbacks(no_fallback_unless_expected)
    assert len(w) == 1 and "training-mode graph" in str(w[0].message)


def test_dropout_training_falls_back(no_fallback_unless_expected):
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5))
    m.train()
    c = compiled(m)
    with torch.no_grad():
        c(torch.randn(4, 8))
    w = fallbacks(no_fallback_unless_expected)
    assert len(w) == 1 and "dropout" in str(w[0].message)


def test_untakeable_graph_falls_back(no_fallback_unless_expected):
    class Odd(torch.nn.Module):
        def forward(self, x):
            return torch.fft.fft(x).real  # complex intermediates: no ONNX export

    m = Odd()
    x = torch.randn(4, 8)
    c = compiled(m)
    with torch.no_grad():
        torch.testing.assert_close(c(x), m(x))
    w = fallbacks(no_fallback_unless_expected)
    assert len(w) == 1 and "fft" in str(w[0].message).lower()


def test_bad_options():
    m = torch.nn.Linear(2, 2).eval()
    with pytest.raises(Exception, match="precision"):
        with torch.no_grad():
            compiled(m, precision="fp8")(torch.randn(1, 2))
