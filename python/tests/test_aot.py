"""smelt.compile (ahead of time, saved artifact) and the bench helpers."""
import pytest

torch = pytest.importorskip("torch")
import smelt  # noqa: E402
from smelt import bench  # noqa: E402


class Two(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(8, 4)

    def forward(self, x, y):
        h = self.l(x)
        return h, torch.relu(h) + y


def test_compile_and_save(tmp_path):
    m = Two().eval()
    x, y = torch.randn(3, 8), torch.randn(3, 4)
    c = smelt.compile(m, (x, y), threads=1, save=tmp_path / "art")
    got = c(x, y)
    ref = m(x, y)
    assert isinstance(got, tuple) and len(got) == 2
    for g, r in zip(got, ref):
        torch.testing.assert_close(g, r.detach(), rtol=1e-4, atol=1e-5)
    assert c.capture == "dynamo"
    assert (tmp_path / "art" / "model.onnx").is_file()
    again = smelt.load(tmp_path / "art", threads=1)
    for g, r in zip(again(x, y), ref):
        torch.testing.assert_close(g, r.detach(), rtol=1e-4, atol=1e-5)
    assert again.stats["compiles"] >= 1


def test_compile_single_output_dynamic():
    m = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Tanh()).eval()
    c = smelt.compile(m, torch.randn(2, 8), dynamic_axes={"in0": {0: "batch"}}, threads=1)
    assert c.session.inputs[0].shape == ("batch", 8)
    for b in (1, 5):
        x = torch.randn(b, 8)
        torch.testing.assert_close(c(x), m(x).detach(), rtol=1e-4, atol=1e-5)


def test_bench_stats():
    med, lo, hi = bench.median_ci([float(i) for i in range(1, 21)])
    assert med == 10.5 and lo <= med <= hi and lo >= 1 and hi <= 20
    assert bench.percentile([1.0, 2.0, 3.0], 0.5) == 2.0
    assert bench.percentile([1.0, 2.0, 3.0], 0.99) == pytest.approx(2.98)


def test_bench_cli_rejects_few_runs():
    with pytest.raises(SystemExit):
        bench.main(["--runs", "3"])


class Dict_(torch.nn.Module):
    """An output with a non-tensor leaf and an unused input."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(8, 4)

    def forward(self, x, unused, y):
        return {"h": self.l(x) * y, "n": 3, "t": torch.tanh(x)}


def test_compile_dict_output_unused_input():
    m = Dict_().eval()
    x, u, y = torch.randn(2, 8), torch.randn(5), torch.randn(2, 4)
    c = smelt.compile(m, (x, u, y), threads=1)
    assert c.capture == "dynamo"
    got, ref = c(x, u, y), m(x, u, y)
    assert got["n"] == 3 and set(got) == {"h", "n", "t"}
    torch.testing.assert_close(got["h"], ref["h"].detach(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got["t"], ref["t"], rtol=1e-4, atol=1e-5)


def test_compile_llama_through_dynamo():
    """A Hugging Face Llama's mask set-up calls torch.diff, which
    torch.onnx.export cannot write; captured by Dynamo it runs once, at
    capture, and the model compiles."""
    tr = pytest.importorskip("transformers")
    cfg = tr.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=500, max_position_embeddings=64)
    m = tr.LlamaForCausalLM(cfg).eval()

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, ids):
            return self.m(ids, use_cache=False).logits

    w = Logits()
    ids = torch.randint(0, 500, (1, 12))
    c = smelt.compile(w, ids, threads=1)
    assert c.capture == "dynamo"
    with torch.no_grad():
        torch.testing.assert_close(c(ids), w(ids), rtol=1e-3, atol=1e-4)


class Aliased(torch.nn.Module):
    """An in-place op on a value read again afterwards: the lowering would
    read it as out-of-place, so the Dynamo capture is refused."""

    def forward(self, x):
        h = x * 2
        y = h + 1
        h.masked_fill_(h > 0, 0.0)
        return y + h


def test_compile_refuses_inplace_on_a_value_read_elsewhere():
    m = Aliased()
    x = torch.randn(3, 4)
    c = smelt.compile(m, x, threads=1)
    assert c.capture.startswith("torch.onnx.export: ") and "in-place" in c.capture, c.capture
    torch.testing.assert_close(c(x), m(x))
