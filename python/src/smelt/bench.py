"""python -m smelt bench: smelt against the other ways to run a PyTorch model
on the CPU, from Python, with the usual method: per backend one first call
(timed: the compile; each back end's one-time set-up -- imports, Dynamo's
start -- is paid before, on a toy model, and Dynamo traces each model once
untimed, so no back end's first call depends on the order) and warm-up runs; then >= 10 timed rounds in which the
backends take turns, one run each after a short pause (--settle-ms), the first
one rotating, so no backend always follows the same other one's spinning
threads and load from elsewhere falls on all alike; median with a 95%
confidence interval (order statistics), p50/p99, peak resident memory over
the backend's first call and warm-up, and parity with eager (max abs
difference).  Prints one table; --json writes the rows.

Backends: eager, inductor (torch.compile default), onnxrt and openvino (when
torch has them registered), smelt (torch.compile(backend="smelt")).
Models: resnet50 (torchvision, weights=None), bert (transformers BertModel,
BERT-base config) and gpt2 (GPT2Model, GPT-2 small config), batch 1, --seq
tokens; weights are random (no download).
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import warnings
from typing import Any, Callable, Dict, List, Tuple

BACKENDS = ("eager", "inductor", "onnxrt", "openvino", "smelt")
MODELS = ("resnet50", "bert", "gpt2")


def build_model(name: str, seq: int):
    import torch
    torch.manual_seed(0)
    if name == "resnet50":
        import torchvision
        return torchvision.models.resnet50(weights=None).eval(), (torch.randn(1, 3, 224, 224),)
    import transformers
    if name == "bert":
        m = transformers.BertModel(transformers.BertConfig()).eval()
        ids = torch.randint(0, 30000, (1, seq))
        return _Hidden(m), (ids, torch.ones(1, seq, dtype=torch.long))
    if name == "gpt2":
        m = transformers.GPT2Model(transformers.GPT2Config()).eval()
        return _Hidden(m, gpt=True), (torch.randint(0, 50000, (1, seq)),)
    raise SystemExit(f"unknown model {name!r}; known: {', '.join(MODELS)}")


def _Hidden(m, gpt=False):
    import torch

    class Hidden(torch.nn.Module):
        """The model's last hidden state as one tensor (no cache, plain output)."""

        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, ids, mask=None):
            if gpt:
                return self.m(input_ids=ids, use_cache=False).last_hidden_state
            return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

    return Hidden().eval()


def _peak_reset() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
    except OSError:
        pass


def _peak_mb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def median_ci(xs: List[float]) -> Tuple[float, float, float]:
    """Median and a distribution-free 95% CI from order statistics."""
    s = sorted(xs)
    n = len(s)
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)))
    hi = min(n - 1, int(math.ceil(n / 2 + half)))
    return statistics.median(s), s[lo], s[hi]


def percentile(xs: List[float], q: float) -> float:
    s = sorted(xs)
    k = (len(s) - 1) * q
    f = math.floor(k)
    c = min(f + 1, len(s) - 1)
    return s[f] + (s[c] - s[f]) * (k - f)


def available(backend: str) -> bool:
    import torch
    if backend in ("eager", "inductor", "smelt"):
        return True
    if backend == "openvino":
        try:
            import openvino.torch  # noqa: F401 - registers the backend
        except Exception:
            return False
    return backend in torch._dynamo.list_backends()


def make_fn(backend: str, model, threads: int, mode: str) -> Callable:
    import torch
    if backend == "eager":
        return model
    if backend == "inductor":
        return torch.compile(model)
    if backend == "smelt":
        return torch.compile(model, backend="smelt", options={"mode": mode, "threads": threads})
    return torch.compile(model, backend=backend)


def warm_backends(backends: List[str], threads: int, mode: str) -> None:
    """Pays each compiled back end's one-time cost (its imports, Dynamo's and
    its own set-up) on a toy model first, so that a model's first call times
    that model's compile, whichever back end happens to go first: without
    this the first back end of the first model carried ~2 s of Dynamo's
    start-up that the others did not."""
    import torch
    toy = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
    x = torch.randn(2, 8)
    for b in backends:
        if b == "eager" or not available(b):
            continue
        try:
            with torch.inference_mode(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                make_fn(b, toy, threads, mode)(x)
        except Exception:  # the model's own first call reports a back end that fails
            pass
    torch._dynamo.reset()


def setup_one(backend: str, model, args, ref, threads: int, warmup: int, mode: str):
    """The backend's first call (timed: the compile), its warm-up runs and its
    peak memory over both; (row, callable or None on failure)."""
    import torch
    row: Dict[str, Any] = {"backend": backend}
    _peak_reset()
    try:
        with torch.inference_mode(), warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            fn = make_fn(backend, model, threads, mode)
            out = fn(*args)
            row["first_call_s"] = time.perf_counter() - t0
            for _ in range(warmup):
                fn(*args)
        fb = [str(x.message) for x in w if "runs on" in str(x.message) and "smelt" in str(x.message)]
        if fb:
            row["fallback"] = fb[0][:200]
    except Exception as e:  # one backend failing does not end the table
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        return row, None
    row.update(peak_rss_mb=_peak_mb(), max_abs_diff=float((out.float() - ref.float()).abs().max()))
    return row, fn


def time_rounds(fns: Dict[str, Callable], args, runs: int, settle_s: float) -> Dict[str, List[float]]:
    """runs rounds; in each, every backend runs once after a pause of
    settle_s (other runtimes' threads spin a while after their run: the
    pause keeps that off the next one's clock), the first backend rotating
    from round to round, so load from elsewhere falls on all alike."""
    import torch
    names = list(fns)
    times: Dict[str, List[float]] = {n: [] for n in names}
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in range(runs):
            k = r % len(names)
            for n in names[k:] + names[:k]:
                time.sleep(settle_s)
                t = time.perf_counter()
                fns[n](*args)
                times[n].append(time.perf_counter() - t)
    return times


def print_table(rows: List[Dict[str, Any]], file=sys.stdout) -> None:
    hdr = f"{'model':<9} {'backend':<9} {'median ms':>10} {'95% CI':>17} {'p50':>8} {'p99':>8} " \
          f"{'1st call s':>10} {'peak MB':>8} {'max|diff|':>9} {'vs inductor':>11}"
    print(hdr, file=file)
    print("-" * len(hdr), file=file)
    ind = {r["model"]: r.get("median_ms") for r in rows if r["backend"] == "inductor"}
    for r in rows:
        if "error" in r or "median_ms" not in r:
            print(f"{r['model']:<9} {r['backend']:<9} {r.get('error', 'not available')}", file=file)
            continue
        base = ind.get(r["model"])
        speed = f"{base / r['median_ms']:.2f}x" if base else "-"
        print(f"{r['model']:<9} {r['backend']:<9} {r['median_ms']:>10.2f} "
              f"{'[%.2f, %.2f]' % (r['ci_lo_ms'], r['ci_hi_ms']):>17} {r['p50_ms']:>8.2f} "
              f"{r['p99_ms']:>8.2f} {r['first_call_s']:>10.1f} {r['peak_rss_mb']:>8.0f} "
              f"{r['max_abs_diff']:>9.2g} {speed:>11}", file=file)
        if r.get("fallback"):
            print(f"{'':<9} {'':<9} (fell back: {r['fallback']})", file=file)
    geo = {}
    for b in {r["backend"] for r in rows}:
        ratios = [ind[r["model"]] / r["median_ms"] for r in rows
                  if r["backend"] == b and r.get("median_ms") and ind.get(r["model"])]
        if ratios and len(ratios) == len(ind):
            geo[b] = math.exp(sum(map(math.log, ratios)) / len(ratios))
    if geo:
        print("geomean speed vs inductor: " +
              ", ".join(f"{b} {g:.2f}x" for b, g in sorted(geo.items(), key=lambda kv: -kv[1])),
              file=file)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m smelt bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ", ".join(MODELS))
    p.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated: " + ", ".join(BACKENDS))
    p.add_argument("--threads", type=int, default=2, help="torch and smelt threads (default 2)")
    p.add_argument("--runs", type=int, default=20, help="timed runs per backend (>= 10, default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed runs after the first call (default 3)")
    p.add_argument("--seq", type=int, default=128, help="tokens for bert and gpt2 (default 128)")
    p.add_argument("--mode", default="default", help="smelt's mode (default 'default')")
    p.add_argument("--settle-ms", type=float, default=150, help="pause before each timed run (default 150: ONNX Runtime's threads spin ~50-65 ms after a run)")
    p.add_argument("--json", help="also write the rows to this file")
    a = p.parse_args(argv)
    if a.runs < 10:
        p.error("--runs must be at least 10")
    import torch
    torch.set_num_threads(a.threads)
    rows = []
    warm_backends(a.backends.split(","), a.threads, a.mode)
    for name in a.models.split(","):
        model, args = build_model(name, a.seq)
        with torch.inference_mode():
            ref = model(*args)
        # Dynamo traces the model once untimed (its eager back end: no
        # compile), so every back end's first call below finds the same warm
        # per-model state (lazy imports and caches that outlive a reset) and
        # the order of the back ends does not decide whose first call is
        # slower.  Then once per model, not per backend: a reset drops the
        # backends compiled before, which would then recompile inside the
        # timed rounds.
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.compile(model, backend="eager")(*args)
        torch._dynamo.reset()
        fns: Dict[str, Callable] = {}
        model_rows = []
        for b in a.backends.split(","):
            if not available(b):
                model_rows.append({"model": name, "backend": b, "error": "not available in this torch"})
                continue
            r, fn = setup_one(b, model, args, ref, a.threads, a.warmup, a.mode)
            r["model"] = name
            model_rows.append(r)
            if fn is not None:
                fns[b] = fn
        times = time_rounds(fns, args, a.runs, a.settle_ms / 1e3)
        for r in model_rows:
            ts = times.get(r["backend"])
            if ts:
                med, lo, hi = median_ci(ts)
                r.update(median_ms=med * 1e3, ci_lo_ms=lo * 1e3, ci_hi_ms=hi * 1e3,
                         p50_ms=percentile(ts, 0.5) * 1e3, p99_ms=percentile(ts, 0.99) * 1e3, runs=len(ts))
            rows.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
    print(f"# threads {a.threads}, batch 1, seq {a.seq}, {a.runs} rounds (every backend once each, "
          f"rotating, {a.settle_ms:g} ms pause before each run) after {a.warmup} warm-up, torch {torch.__version__}; "
          f"1st call: the model's compile and first run, after each back end's one-time set-up on a toy model "
          f"and one untimed Dynamo trace of the model")
    print_table(rows)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0
