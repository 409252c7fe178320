"""smelt.fx_lower: Dynamo's FX graphs written as ONNX directly (no
torch.onnx.export) match eager on small modules of every op family it maps;
graphs it does not take (an unmapped op, symbolic dims, a random op) go
through torch.onnx.export instead, still matching eager."""
import warnings

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional
from smelt import dynamo  # noqa: E402
from smelt.dynamo import SmeltFallbackWarning  # noqa: E402

OPTS = {"threads": 2, "fallback": "eager"}


def run_compiled(model, *args, dynamic=False):
    """(output, [lowering of each graph]) of model under backend="smelt"."""
    how = []

    def backend(gm, example_inputs):
        fn = dynamo.smelt_backend(gm, example_inputs, options=OPTS)
        how.append(getattr(fn, "smelt_lowering", "fallback"))
        return fn

    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SmeltFallbackWarning)
        c = torch.compile(model, backend=backend, dynamic=dynamic)
        with torch.no_grad():
            return c(*args), how


def check_fx(model, *args, atol=1e-4):
    model = model.eval()
    with torch.no_grad():
        ref = model(*args)
    out, how = run_compiled(model, *args)
    assert how == ["fx"], how
    refs = ref if isinstance(ref, (tuple, list)) else (ref,)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    assert len(refs) == len(outs)
    for r, o in zip(refs, outs):
        assert o.dtype == r.dtype and o.shape == r.shape
        if r.dtype == torch.bool or not r.is_floating_point():
            assert torch.equal(o, r)
        else:
            torch.testing.assert_close(o, r, rtol=1e-3, atol=atol)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 8, bias=False)
        self.ln = torch.nn.LayerNorm(32)

    def forward(self, x):
        h = F.gelu(self.a(x))
        h = self.ln(h) + F.gelu(h, approximate="tanh")
        h = torch.tanh(h) * torch.sigmoid(h) - F.silu(h) / 2.0
        return self.b(F.relu(h) + torch.erf(h) + h ** 2 + torch.rsqrt(h.abs() + 1))


def test_mlp_activations_layernorm():
    check_fx(Mlp(), torch.randn(2, 5, 16))
    check_fx(Mlp(), torch.randn(4, 16))  # rank-2 Linear


class Attention(torch.nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)
        self.o = torch.nn.Linear(32, 32)
        self.mode = mode

    def forward(self, x, keep):
        b, s, _ = x.shape
        q, k, v = self.qkv(x).split(32, dim=2)
        q, k, v = (t.view(b, s, 4, 8).transpose(1, 2) for t in (q, k, v))
        if self.mode == "bool":  # a padding mask from an input, BERT's way
            m = keep.to(torch.bool)[:, None, None, :].expand(b, 1, s, s)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
        elif self.mode == "float":
            m = (1.0 - keep[:, None, None, :].float()) * -1e4
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.3)
        elif self.mode == "causal":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # a causal mask built from arange: constants evaluated at lowering
            i = torch.arange(s)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=i[None, :] <= i[:, None])
        return self.o(y.transpose(1, 2).contiguous().reshape(b, s, 32))


@pytest.mark.parametrize("mode", ["bool", "float", "causal", "arange"])
def test_attention(mode):
    keep = torch.ones(2, 6, dtype=torch.long)
    keep[1, 4:] = 0
    check_fx(Attention(mode), torch.randn(2, 6, 32), keep)


class Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = torch.nn.Embedding(50, 16)
        self.pos = torch.nn.Embedding(10, 16)
        self.register_buffer("position_ids", torch.arange(10).expand(1, -1))

    def forward(self, ids):
        pos = self.position_ids[:, : ids.shape[1]]
        h = self.tok(ids) + self.pos(pos)
        first, rest = h[:, 0], h[:, 1:]
        return torch.cat([rest, first.unsqueeze(1)], dim=1).permute(0, 2, 1), h[..., 2:8:2], h.mean(-1)


def test_embedding_slicing_cat():
    check_fx(Embed(), torch.randint(0, 50, (2, 7)))


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        h = F.relu(self.bn(self.c1(x)))
        h = F.max_pool2d(h, 3, 2, 1)
        r = self.c2(h)
        r += h  # in place on a value nothing else reads: an Add
        h = F.avg_pool2d(F.hardswish(r), 2) + F.relu6(F.adaptive_avg_pool2d(r, 4))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(h, 1), 1))


def test_cnn():
    m = Cnn()
    with torch.no_grad():  # non-trivial running statistics
        m.bn.running_mean.uniform_(-1, 1)
        m.bn.running_var.uniform_(0.5, 2)
    check_fx(m, torch.randn(1, 3, 32, 32))


class Mixed(torch.nn.Module):
    def forward(self, x, ids):
        big = x > 0.5
        y = torch.where(big, x, x * 3) + ids / 2  # int / int promotes to float
        y = y.masked_fill(ids == 2, -1.0)
        n = (ids != 1).long() + ids * 2 - 1
        return y, n, big & (x < 0.9), torch.softmax(y, dim=-1), y.sum(dim=1, keepdim=True), x.size(1) * y


def test_elementwise_types():
    check_fx(Mixed(), torch.rand(3, 4), torch.randint(0, 4, (3, 4)))


class Cumsum(torch.nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=1) * 2


def test_unmapped_op_goes_through_torch_onnx_export():
    x = torch.randn(2, 5)
    out, how = run_compiled(Cumsum(), x)
    assert len(how) == 1 and how[0].startswith("torch.onnx.export: op cumsum"), how
    torch.testing.assert_close(out, torch.cumsum(x, 1) * 2)


def test_symbolic_dims_go_through_torch_onnx_export():
    m = Mlp().eval()
    x = torch.randn(3, 5, 16)
    out, how = run_compiled(m, x, dynamic=True)
    assert how == ["torch.onnx.export: symbolic dims"], how
    with torch.no_grad():
        torch.testing.assert_close(out, m(x), rtol=1e-3, atol=1e-4)


class Noise(torch.nn.Module):
    def forward(self, x):
        return x + torch.rand(3) * 0


def test_random_op_is_not_frozen_into_a_constant():
    out, how = run_compiled(Noise(), torch.ones(3))
    assert how and how[0].startswith("torch.onnx.export: random op rand"), how
    assert torch.equal(out, torch.ones(3))


def test_lowered_model_is_valid_onnx():
    onnx = pytest.importorskip("onnx")
    from smelt import fx_lower
    captured = {}

    def backend(gm, example_inputs):
        placeholders = []
        for i, x in enumerate(example_inputs):
            placeholders.append(("const", f"c{i}", x.detach()) if isinstance(x, torch.nn.Parameter)
                                else ("in", f"in{i}", x))
        captured["model"], captured["consts"] = fx_lower.lower(gm, placeholders)
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(Attention("bool").eval(), backend=backend)(torch.randn(1, 4, 32),
                                                                 torch.ones(1, 4, dtype=torch.long))
    m = onnx.load_from_string(bytes(captured["model"]))
    onnx.checker.check_model(m)
    names = {i.name for i in m.graph.input}
    assert set(captured["consts"]) <= names and len(names - set(captured["consts"])) == 2
    assert not any(len(t.raw_data) > 4096 for t in m.graph.initializer)  # no weight copied in


class Hidden(torch.nn.Module):
    """A transformers model's last hidden state (the bench's wrapper)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids, mask=None):
        if mask is None:
            return self.m(input_ids=ids, use_cache=False).last_hidden_state
        return self.m(input_ids=ids, attention_mask=mask).last_hidden_state


def test_bert_with_padding_mask():
    tr = pytest.importorskip("transformers")
    cfg = tr.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, vocab_size=500)
    ids = torch.randint(0, 500, (2, 12))
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, 7:] = 0
    check_fx(Hidden(tr.BertModel(cfg)), ids, mask)


def test_gpt2():
    tr = pytest.importorskip("transformers")
    cfg = tr.GPT2Config(n_embd=64, n_layer=2, n_head=2, vocab_size=500, n_positions=32)
    check_fx(Hidden(tr.GPT2Model(cfg)), torch.randint(0, 500, (1, 12)))


class GqaAttention(torch.nn.Module):
    """F.scaled_dot_product_attention with fewer key/value heads than query
    heads (enable_gqa), causal or with a float mask."""

    def __init__(self, causal):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v, mask):
        if self.causal:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


@pytest.mark.parametrize("causal", [True, False])
def test_sdpa_enable_gqa(causal):
    q, k, v = torch.randn(2, 6, 5, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    mask = torch.randn(2, 1, 5, 5)
    check_fx(GqaAttention(causal), q, k, v, mask)


def test_sdpa_enable_gqa_symbolic_dims():
    """Symbolic dims go through torch.onnx.export, which cannot write
    enable_gqa: the call is rewritten over repeated keys and values first
    (smelt.export.expand_gqa)."""
    m = GqaAttention(True).eval()
    q, k, v = torch.randn(2, 6, 7, 8), torch.randn(2, 2, 7, 8), torch.randn(2, 2, 7, 8)
    for t in (q, k, v):  # the sequence symbolic, the heads fixed, as in a model
        torch._dynamo.mark_dynamic(t, 2)
    out, how = run_compiled(m, q, k, v, None)
    assert how == ["torch.onnx.export: symbolic dims"], how
    with torch.no_grad():
        torch.testing.assert_close(out, m(q, k, v, None), rtol=1e-3, atol=1e-4)


def test_failed_export_prints_nothing(capfd):
    """torch.onnx.export prints the whole graph it was building when it fails;
    smelt.export keeps that off stderr (the exception's first line is what
    the fallback warning says)."""
    from smelt.export import export_bytes
    q, k = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 3, 8)
    with pytest.raises(Exception):
        export_bytes(GqaAttention(True), [q, k, k, None], ["q", "k", "v"], ["y"])
    got = capfd.readouterr()
    assert "ONNX graph" not in got.out and "ONNX graph" not in got.err


def test_llama_grouped_query_attention():
    tr = pytest.importorskip("transformers")
    cfg = tr.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=500, max_position_embeddings=64)
    check_fx(WithCache(tr.LlamaModel(cfg)), torch.randint(0, 500, (1, 12)))


class Mha(torch.nn.Module):
    """nn.MultiheadAttention as blocks call it: self-attention, batch first
    or not, with or without the heads' weights."""

    def __init__(self, batch_first, need_weights, average):
        super().__init__()
        self.a = torch.nn.MultiheadAttention(16, 4, batch_first=batch_first)
        self.need, self.avg = need_weights, average

    def forward(self, x):
        y, w = self.a(x, x, x, need_weights=self.need, average_attn_weights=self.avg)
        return (y, w) if self.need else y


@pytest.mark.parametrize("batch_first,need,avg", [(True, False, True), (False, True, True), (True, True, False)])
def test_multihead_attention(batch_first, need, avg):
    check_fx(Mha(batch_first, need, avg), torch.randn(2, 5, 16))


def test_torchvision_vit_attention():
    tv = pytest.importorskip("torchvision")
    m = tv.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                                    mlp_dim=64, num_classes=10)
    torch.nn.init.normal_(m.heads.head.weight)  # torchvision starts the head at zero
    check_fx(m, torch.randn(1, 3, 32, 32))


class CatEmpty(torch.nn.Module):
    """torch.cat skips 1-D empty tensors beside tensors of any rank."""

    def forward(self, x):
        empty = torch.tensor([], dtype=x.dtype)
        return torch.cat([empty, x * 2, empty], dim=-2), torch.cat([empty, x.flatten()])


def test_cat_skips_empty_1d_operands():
    check_fx(CatEmpty(), torch.randn(1, 2, 3, 4))


class WithCache(torch.nn.Module):
    """A transformers decoder as called by default: use_cache on, so each
    layer concatenates its keys onto an empty DynamicCache."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids):
        return self.m(input_ids=ids).last_hidden_state


def test_gpt2_with_default_cache():
    tr = pytest.importorskip("transformers")
    cfg = tr.GPT2Config(n_embd=64, n_layer=2, n_head=2, vocab_size=500, n_positions=32)
    check_fx(WithCache(tr.GPT2Model(cfg)), torch.randint(0, 500, (1, 12)))


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small"])
def test_torchvision(name):
    tv = pytest.importorskip("torchvision")
    check_fx(getattr(tv.models, name)(weights=None), torch.randn(1, 3, 96, 96), atol=1e-3)


class InplaceShared(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.a(x)
        v = h.view(2, 4, 2)
        r = F.relu(v, inplace=True)  # changes h too, which is read below
        return r.reshape(2, 8) + h


def test_inplace_on_a_value_read_elsewhere_falls_back():
    """Neither the lowering nor torch.onnx.export keeps the aliasing (the
    exporter gave relu(h) + h here): the graph runs on the fallback."""
    m = InplaceShared().eval()
    x = torch.randn(2, 8)
    with torch.no_grad():
        ref = m(x)
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always", SmeltFallbackWarning)
        with torch.no_grad():
            out = torch.compile(m, backend="smelt", options=OPTS)(x)
    msgs = [str(x.message) for x in w if issubclass(x.category, SmeltFallbackWarning)]
    assert len(msgs) == 1 and "in-place relu" in msgs[0], msgs
    torch.testing.assert_close(out, ref)


def test_bfloat16_graph_falls_back_with_its_reason():
    m = torch.nn.Linear(8, 4).to(torch.bfloat16).eval()
    x = torch.randn(2, 8, dtype=torch.bfloat16)
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with torch.no_grad():
            out = torch.compile(m, backend=lambda gm, ex: dynamo.smelt_backend(gm, ex, options=OPTS))(x)
    msgs = [str(e.message) for e in w if issubclass(e.category, SmeltFallbackWarning)]
    assert len(msgs) == 1 and "bfloat16" in msgs[0], msgs
    with torch.no_grad():
        torch.testing.assert_close(out, m(x))
