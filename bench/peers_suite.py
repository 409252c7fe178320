#!/usr/bin/env python3
"""bench/peers_suite.py: every runner on every model, all in one process taking turns.

usage: bench/peers_suite.py MODEL_DIR... [--threads 1,2] [--runners LIST]
                            [--smelt-modes eager,default,max-autotune] [--runs N]
                            [--block K] [--warmup N] [--settle-ms MS] [--lib build/libsmelt.so]
                            [--out DIR] [--load-core] [--setup-alone]

MODEL_DIR holds model.onnx and test_data_set_0/input_N.pb (the zoo layout; what
../shared/models/export.py OUT [--large] writes).  For each thread count and
each model, one child process loads every runner -- ONNX Runtime (all graph
optimizations, intra-op threads N, sequential), OpenVINO (CPU plugin,
INFERENCE_PRECISION_HINT=f32, PERFORMANCE_HINT=LATENCY, INFERENCE_NUM_THREADS=N),
PyTorch eager and torch.compile (the ONNX model through onnx2torch) and smelt in
each of --smelt-modes (through the C API, in this same process) -- on the same
inputs, then times them in turns: each turn is a pause (--settle-ms, so the
previous runner's spinning threads are gone), one untimed run and --block timed
runs, the starting runner rotating each round, until every runner has --runs
timed runs.  Load from other processes falls on every runner alike; the ratio
of medians is what to read.  Setup (session creation / compile; for smelt,
cold, with an empty cache folder) and the first run are reported apart.
--setup-alone also times each runner's setup in a child process of its own
(nothing made before it), beside the figure from the shared process, where
the runners are made in the order given and each pays for the memory the
ones before it took.

Reported per thread count: a Markdown table of the median ms of every runner
on every model, each runner's speed relative to ONNX Runtime (ORT ms / runner
ms: above 1 is faster than ONNX Runtime), the geometric mean of that ratio
over the models, the max abs difference of each runner's outputs from ONNX
Runtime's, and a PNG chart of the ratios.  A runner that is missing or fails
says why in the table; nothing is estimated.

--load-core starts a competing process that keeps one core busy (a Python
spin loop, pinned to the last core) for the whole measurement: the robustness
check of issue 17 (compare each ratio with a quiet run's).

Needs: numpy, onnx; peers are optional (onnxruntime, openvino, torch +
onnx2torch, matplotlib for the chart).
"""
import argparse
import ctypes
import glob
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ort_compare as oc  # noqa: E402  (the ctypes binding of smelt's C API)

PEERS = ("onnxruntime", "openvino", "torch-eager", "torch-compile")


# ---- runners: each has setup() -> None, run() -> outputs (list of arrays) ----

def load_inputs(model_dir):
    import numpy as np
    import onnx
    from onnx import numpy_helper
    files = sorted(glob.glob(os.path.join(model_dir, "test_data_set_0", "input_*.pb")),
                   key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    arrays = []
    for f in files:
        t = onnx.TensorProto()
        with open(f, "rb") as fh:
            t.ParseFromString(fh.read())
        arrays.append(np.ascontiguousarray(numpy_helper.to_array(t)))
    m = onnx.load(os.path.join(model_dir, "model.onnx"), load_external_data=False)
    inits = {t.name for t in m.graph.initializer}
    ins = [i for i in m.graph.input if i.name not in inits]
    dims = {}
    for vi, a in zip(ins, arrays):
        for k, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.dim_param and k < a.ndim:
                dims[d.dim_param] = a.shape[k]
    return files, [i.name for i in ins], arrays, ",".join(f"{k}={v}" for k, v in dims.items())


class OrtRunner:
    def __init__(self, path, names, arrays, threads):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self.sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        self.feed = dict(zip(names, arrays))
        self.version = "onnxruntime " + ort.__version__

    def run(self):
        return self.sess.run(None, self.feed)


class OpenVinoRunner:
    def __init__(self, path, names, arrays, threads):
        import openvino as ov
        core = ov.Core()
        model = core.read_model(path)
        self.compiled = core.compile_model(model, "CPU", {
            "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
            "INFERENCE_NUM_THREADS": threads})
        self.req = self.compiled.create_infer_request()
        self.feed = dict(zip(names, arrays))
        self.n_out = len(self.compiled.outputs)
        self.version = "openvino " + ov.__version__

    def run(self):
        self.req.infer(self.feed)
        return [self.req.get_output_tensor(k).data.copy() for k in range(self.n_out)]


class TorchRunner:
    def __init__(self, path, names, arrays, threads, compiled):
        import onnx
        import torch
        from onnx2torch import convert
        torch.set_num_threads(threads)
        peers = _load_peers_module()
        module = convert(peers.fold_identity_initializers(onnx.load(path))).eval()
        self.fn = torch.compile(module) if compiled else module
        self.args = [torch.from_numpy(a) for a in arrays]
        self.torch = torch
        self.version = "torch " + torch.__version__ + (" (torch.compile)" if compiled else "")

    def run(self):
        with self.torch.inference_mode():
            out = self.fn(*self.args)
        out = out if isinstance(out, (tuple, list)) else [out]
        return [o.detach().numpy() for o in out]


def _load_peers_module():
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("peers_main", os.path.join(HERE, "peers"))
    spec = importlib.util.spec_from_loader("peers_main", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


class SmeltRunner:
    """smelt through its C API, cold session creation in an empty cache folder."""

    def __init__(self, np, sm, path, files, threads, mode, cache_dir, dims):
        self.np = np
        self.sm = sm
        os.environ["SMELT_CACHE_DIR"] = cache_dir
        self.r = oc.SmeltRunner(np, sm, path, files, threads, oc.MODES[mode], dims)
        sm.lib.smelt_version.restype = ctypes.c_char_p
        self.version = "smelt " + sm.lib.smelt_version().decode()

    def run(self):
        return self.r.run(keep=True)[1]

    def run_fast(self):
        self.r.run(keep=False)


def make_runner(name, model_dir, names, arrays, files, threads, np, sm, cache_root, dims):
    path = os.path.join(model_dir, "model.onnx")
    if name == "onnxruntime":
        return OrtRunner(path, names, arrays, threads)
    if name == "openvino":
        return OpenVinoRunner(path, names, arrays, threads)
    if name in ("torch-eager", "torch-compile"):
        return TorchRunner(path, names, arrays, threads, name == "torch-compile")
    mode = name.split(" ", 1)[1]
    return SmeltRunner(np, sm, path, files, threads, mode,
                       tempfile.mkdtemp(prefix="smelt-cache-", dir=cache_root), dims)


def maxdiff(np, ours, theirs):
    if len(ours) != len(theirs):
        return f"{len(ours)} outputs vs {len(theirs)}"
    worst = 0.0
    for a, b in zip(ours, theirs):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return f"shape {a.shape} vs {b.shape}"
        if a.size:
            worst = max(worst, float(np.max(np.abs(a.astype("float64") - b.astype("float64")))))
    return worst


# ---- one (model, threads): the child process ----

def measure(model_dir, threads, runners, args, body=None):
    """body (measure_in, or setup_in for --setup-alone) with a fresh smelt
    cache folder, removed after."""
    # smelt's cold caches (hundreds of MB of prepared weights per model) go
    # when the model is done: left behind, their dirty pages slowed the next
    # models' cold session creation by writeback (bert_base 0.35 -> 1.3 s)
    cache_root = tempfile.mkdtemp(prefix="peers-suite-")
    try:
        return (body or measure_in)(model_dir, threads, runners, args, cache_root)
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)


def time_in_turns(calls, args):
    """calls (name -> run()): --warmup untimed rounds, then --runs timed
    runs of each in turns (ort_compare.take_turns).  name -> list of ms."""
    for _ in range(args.warmup):
        for f in calls.values():
            f()

    def timed(f):
        def run():
            t0 = time.perf_counter()
            f()
            return time.perf_counter() - t0, None
        return run
    turns = oc.take_turns({n: timed(f) for n, f in calls.items()}, args.runs, args.block, args.settle_ms)
    return {n: [t * 1e3 for t in turns[n]] for n in calls}


def measure_in(model_dir, threads, runners, args, cache_root):
    import numpy as np
    files, names, arrays, dims = load_inputs(model_dir)
    sm = oc.Smelt(args.lib)
    live, rows = {}, {}
    for name in runners:
        row = rows[name] = {"runner": name}
        try:
            t0 = time.perf_counter()
            r = make_runner(name, model_dir, names, arrays, files, threads, np, sm, cache_root, dims)
            row["setup_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            out = r.run()
            row["first_run_ms"] = (time.perf_counter() - t0) * 1e3
            row["version"] = r.version
            row["status"] = "ok"
            live[name] = (r, out)
        except ImportError as e:
            row.update(status="missing", detail=f"{e} (pip install it)")
        except Exception as e:  # the peer refused the model: say why
            row.update(status="error", detail=f"{type(e).__name__}: {' '.join(str(e).split())[:300]}")
    ref = live.get("onnxruntime")
    for name, (r, out) in live.items():
        rows[name]["max_abs_vs_ort"] = maxdiff(np, out, ref[1]) if ref else None
    order = list(live)
    calls = {n: (live[n][0].run_fast if hasattr(live[n][0], "run_fast") else live[n][0].run)
             for n in order}
    samples = time_in_turns(calls, args)
    for n in order:
        s = sorted(samples[n])
        rows[n]["median_ms"] = statistics.median(s)
        rows[n]["p90_ms"] = s[min(len(s) - 1, int(0.9 * (len(s) - 1) + 0.5))]
        rows[n]["min_ms"] = s[0]
        rows[n]["runs"] = len(s)
    return [rows[n] for n in runners]


def setup_in(model_dir, threads, runners, args, cache_root):
    """The first runner's setup (session creation / conversion), nothing
    else made before it in this process: --setup-alone."""
    import numpy as np
    files, names, arrays, dims = load_inputs(model_dir)
    sm = oc.Smelt(args.lib)
    t0 = time.perf_counter()
    make_runner(runners[0], model_dir, names, arrays, files, threads, np, sm, cache_root, dims)
    return time.perf_counter() - t0


def setup_alone(d, thr, runners, args, rows):
    """--setup-alone: each runner's setup again, each in a child of its own,
    into rows[i]["setup_alone_s"].  In the timed child the runners are made
    one after another in one process, and the later ones' creation pays
    for fresh memory the earlier ones' sessions took (on a VM whose host
    backs guest memory on demand, that doubled smelt's bert_base creation,
    which is always made last there)."""
    for r in rows:
        if r.get("status") != "ok":
            continue
        cmd = [sys.executable, os.path.abspath(__file__), d, "--child", "setup", "--threads", str(thr),
               "--runners", r["runner"], "--lib", args.lib]
        p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS=str(thr)))
        line = next((l for l in p.stdout.splitlines() if l.startswith("SUITE-SETUP ")), None)
        if line:
            r["setup_alone_s"] = float(line.split()[1])


# ---- the parent: one child per (model, threads), then the report ----

def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def report(results, runners, threads_list, out_dir, args):
    lines = ["# smelt beside its peers", "",
             f"cpu: {cpu_name()} ({os.cpu_count()} cores) · {args.runs} timed runs per runner, "
             f"turns of {args.block}, all runners of a model in one process"
             + (" · ONE CORE KEPT BUSY by a competing process" if args.load_core else ""), "",
             "Cells: median ms, and in parentheses ONNX Runtime's median / this runner's "
             "(above 1: faster than ONNX Runtime).", ""]
    for thr in threads_list:
        lines += [f"## {thr} thread{'s' if thr > 1 else ''}", "",
                  "| model | " + " | ".join(runners) + " |",
                  "| --- | " + " | ".join("---" for _ in runners) + " |"]
        ratios = {n: [] for n in runners}
        for model, res in results[thr].items():
            by = {r["runner"]: r for r in res}
            ort = by.get("onnxruntime", {}).get("median_ms")
            cells = []
            for n in runners:
                r = by.get(n, {"status": "missing"})
                if r.get("status") != "ok" or "median_ms" not in r:
                    cells.append(f"{r.get('status', '?')}: {str(r.get('detail', ''))[:80]}".replace("|", "/"))
                    continue
                ratio = ort / r["median_ms"] if ort else None
                ratios[n].append(ratio)
                cells.append(f"{r['median_ms']:.2f}" + (f" ({ratio:.2f})" if ratio else ""))
            lines.append(f"| {model} | " + " | ".join(cells) + " |")
        lines.append("| **geomean vs ORT** | " + " | ".join(
            f"**{g:.3f}**" if (g := geomean(ratios[n])) else "—" for n in runners) + " |")
        alone = any("setup_alone_s" in r for res in results[thr].values() for r in res)
        lines += ["", "Setup s (session creation / conversion; smelt compiled modes: cold compile, "
                  "empty cache" + ("; each runner alone in a process of its own, then in the timed process "
                                   "after the runners to its left" if alone else "") +
                  ") and max abs difference from ONNX Runtime:", "",
                  "| model | " + " | ".join(runners) + " |",
                  "| --- | " + " | ".join("---" for _ in runners) + " |"]
        for model, res in results[thr].items():
            by = {r["runner"]: r for r in res}
            cells = []
            for n in runners:
                r = by.get(n, {})
                if r.get("status") != "ok":
                    cells.append("—")
                    continue
                d = r.get("max_abs_vs_ort")
                a = f"{r['setup_alone_s']:.3f} s alone, " if "setup_alone_s" in r else ""
                cells.append(a + f"{r['setup_s']:.3f} s / " + (f"{d:.1e}" if isinstance(d, float) else str(d)))
            lines.append(f"| {model} | " + " | ".join(cells) + " |")
        lines.append("")
    md = "\n".join(lines)
    with open(os.path.join(out_dir, "peers_suite.md"), "w") as f:
        f.write(md + "\n")
    with open(os.path.join(out_dir, "peers_suite.json"), "w") as f:
        json.dump({"cpu": cpu_name(), "runs": args.runs, "block": args.block,
                   "load_core": args.load_core, "results": results}, f, indent=1)
    chart(results, runners, threads_list, os.path.join(out_dir, "peers_suite.png"))
    return md


def chart(results, runners, threads_list, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("peers_suite: matplotlib is not installed: no chart", file=sys.stderr)
        return
    fig, axes = plt.subplots(len(threads_list), 1, figsize=(11, 3.6 * len(threads_list)), squeeze=False)
    for ax, thr in zip(axes[:, 0], threads_list):
        models = list(results[thr])
        width = 0.8 / max(1, len(runners))
        for k, n in enumerate(runners):
            vals = []
            for m in models:
                by = {r["runner"]: r for r in results[thr][m]}
                ort = by.get("onnxruntime", {}).get("median_ms")
                r = by.get(n, {})
                vals.append(ort / r["median_ms"] if ort and r.get("median_ms") else 0)
            ax.bar([i + k * width for i in range(len(models))], vals, width, label=n)
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(models))], models, rotation=20)
        ax.set_ylabel("ORT ms / runner ms")
        ax.set_title(f"{thr} thread{'s' if thr > 1 else ''}: speed relative to ONNX Runtime (higher is faster)")
        ax.legend(fontsize=7, ncol=4)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            return next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "unknown")
    except OSError:
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--runners", default=",".join(PEERS + ("smelt",)))
    ap.add_argument("--smelt-modes", default="eager,default,max-autotune")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--block", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--settle-ms", type=float, default=150)
    ap.add_argument("--lib", default=os.path.join(HERE, "..", "build", "libsmelt.so"))
    ap.add_argument("--out", default="peers-suite")
    ap.add_argument("--load-core", action="store_true")
    ap.add_argument("--setup-alone", action="store_true",
                    help="also time each runner's setup in a process of its own (the setup table shows both)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    runners = []
    for n in (s.strip() for s in args.runners.split(",") if s.strip()):
        if n == "smelt":
            runners += [f"smelt {m.strip()}" for m in args.smelt_modes.split(",") if m.strip()]
        elif n in PEERS or (n.startswith("smelt ") and n.split(" ", 1)[1] in oc.MODES):
            runners.append(n)
        else:
            ap.error(f"unknown runner '{n}': expected {', '.join(PEERS)}, smelt")
    for n in runners:
        if n.startswith("smelt ") and n.split(" ", 1)[1] not in oc.MODES:
            ap.error(f"unknown smelt mode in '{n}'")
    threads_list = [int(t) for t in args.threads.split(",")]
    if args.child == "setup":  # one runner's setup alone (--setup-alone)
        print(f"SUITE-SETUP {measure(args.models[0], threads_list[0], runners, args, setup_in):.6f}")
        return 0
    if args.child:  # one (model, threads): print the rows as JSON
        rows = measure(args.models[0], threads_list[0], runners, args)
        print("SUITE-RESULT " + json.dumps(rows))
        return 0
    os.makedirs(args.out, exist_ok=True)
    load = None
    if args.load_core:
        last = os.cpu_count() - 1
        load = subprocess.Popen(["taskset", "-c", str(last), sys.executable, "-c", "while True: pass"])
    results = {t: {} for t in threads_list}
    try:
        for thr in threads_list:
            for d in args.models:
                model = os.path.basename(os.path.normpath(d))
                print(f"peers_suite: {model}, {thr} thread(s)...", file=sys.stderr, flush=True)
                cmd = [sys.executable, os.path.abspath(__file__), d, "--child", "1", "--threads", str(thr),
                       "--runners", ",".join(runners), "--runs", str(args.runs), "--block", str(args.block),
                       "--warmup", str(args.warmup), "--settle-ms", str(args.settle_ms), "--lib", args.lib]
                env = dict(os.environ, OMP_NUM_THREADS=str(thr))
                p = subprocess.run(cmd, capture_output=True, text=True, env=env)
                line = next((l for l in p.stdout.splitlines() if l.startswith("SUITE-RESULT ")), None)
                if line:
                    results[thr][model] = json.loads(line[len("SUITE-RESULT "):])
                    if args.setup_alone:
                        setup_alone(d, thr, runners, args, results[thr][model])
                else:
                    tail = (p.stderr.strip().splitlines() or ["no output"])[-1][:300]
                    results[thr][model] = [{"runner": n, "status": "error",
                                            "detail": f"child exited {p.returncode}: {tail}"} for n in runners]
    finally:
        if load:
            load.kill()
    print(report(results, runners, threads_list, args.out, args))
    print(f"\nwritten: {args.out}/peers_suite.md, peers_suite.json, peers_suite.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
