#!/usr/bin/env python3
"""bench/weight_memory.py: peak memory and session-creation time of smelt
beside ONNX Runtime, model by model.

usage: bench/weight_memory.py MODEL_DIR... [--modes eager,default] [--threads N]
                              [--runs N] [--repeat N] [--lib build/libsmelt.so] [--env K=V]...
                              [--no-ort] [--json FILE]

Every runner lives in a process of its own (forked from a parent that has
loaded nothing), so its peak RSS (VmHWM) is its own:
  - smelt MODE: smelt_model_load (the file is mapped), session creation
    with the session option dims set from the inputs' shapes (so a compiled
    mode compiles at creation) and SMELT_CACHE_DIR set to a fresh empty
    folder (cold: compiles and
    prepares weights), the session freed, created again from the cache it
    filled (warm: the same process, the model already loaded), then --runs
    runs on the model's test_data_set_0 inputs; then a new process loads the
    model and creates a session from that cache (cache s: a restart);
  - ort: InferenceSession creation (ORT_ENABLE_ALL, --threads intra-op
    threads) and --runs runs on the same inputs.
Per runner: create_cold_s / create_warm_s / create_cache_s (ORT: create_s), the RSS after
creation and after the runs (anonymous and file-backed parts, from
/proc/self/status) and peak_rss_mb.

--repeat N runs every runner N times (a fresh cache each time), ONNX Runtime
first in the odd-numbered rounds and last in the others, and prints the
median of each time (and its range).  The order matters on a VM: the
first process after a pause that touches hundreds of MB of new memory waits
for the host to back it (measured on the 2-core VM, gpt2_small: ORT 2.01 s
then smelt 2.63 s, again: ORT 2.06 s, smelt 1.27 s; the same smelt
build took 3.44 s and 0.66 s in two runs a minute apart), so a runner that
always goes second is favoured.  For a 1-layer version of a transformer
beside the full one, see bench/one_layer.py.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def status_mb():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0]) / 1024.0
    return out


def inputs_of(model_dir):
    import glob
    return sorted(glob.glob(os.path.join(model_dir, "test_data_set_0", "input_*.pb")),
                  key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))


def dims_of(model_dir):
    """"name=v,..." for the symbolic dims of the model's inputs, from the
    test inputs' shapes (run in a child: parsing the model costs memory)."""
    import onnx
    m = onnx.load(os.path.join(model_dir, "model.onnx"), load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    ins = [i for i in m.graph.input if i.name not in inits]
    dims = {}
    for i, p in zip(ins, inputs_of(model_dir)):
        shape = list(onnx.load_tensor(p).dims)
        for d, v in zip(i.type.tensor_type.shape.dim, shape):
            if d.dim_param:
                dims[d.dim_param] = v
    return {"dims": ",".join(f"{k}={v}" for k, v in dims.items())}


def run_smelt_from_cache(model_dir, mode, args, cache):
    """A new process over the cache a cold run filled: model load and session
    creation, as a user's second `smelt run` or server restart sees them."""
    import ort_compare as oc
    sm = oc.Smelt(args.lib)
    os.environ["SMELT_CACHE_DIR"] = cache
    t0 = time.perf_counter()
    r = oc.SmeltRunner(None, sm, os.path.join(model_dir, "model.onnx"), inputs_of(model_dir), args.threads,
                       oc.MODES[mode], dims=args.dims.get(model_dir) or None)
    res = {"create_cache_s": time.perf_counter() - t0}  # includes model load and input reads
    r.close()
    return res


def run_smelt(model_dir, mode, args, cache):
    import ort_compare as oc
    sm = oc.Smelt(args.lib)
    path = os.path.join(model_dir, "model.onnx")
    res = {"runner": "smelt " + mode}
    if True:
        os.environ["SMELT_CACHE_DIR"] = cache
        t0 = time.perf_counter()
        r = oc.SmeltRunner(None, sm, path, inputs_of(model_dir), args.threads, oc.MODES[mode],
                           dims=args.dims.get(model_dir) or None)
        res["create_cold_s"] = time.perf_counter() - t0  # includes model load and input reads
        res["after_cold_create"] = status_mb()
        sm.lib.smelt_session_free(r.session)
        opts = sm.lib.smelt_session_options_default()
        opts.threads, opts.mode = args.threads, oc.MODES[mode]
        if getattr(r, "dims", None):
            opts.dims = r.dims
        t0 = time.perf_counter()
        sm.check(sm.lib.smelt_session_create(r.model, oc.ctypes.byref(opts), oc.ctypes.byref(r.session)),
                 "create session (warm)")
        res["create_warm_s"] = time.perf_counter() - t0
        res["after_create"] = status_mb()
        for _ in range(args.runs):
            r.run()
        res["after_runs"] = status_mb()
        res["peak_rss_mb"] = res["after_runs"]["VmHWM"]
        r.close()
    return res


def run_ort(model_dir, args):
    import numpy as np
    import onnxruntime as ort
    import onnx
    from onnx import numpy_helper
    res = {"runner": "ort"}
    feeds = [numpy_helper.to_array(onnx.load_tensor(p)) for p in inputs_of(model_dir)]
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    t0 = time.perf_counter()
    sess = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), so,
                                providers=["CPUExecutionProvider"])
    res["create_s"] = time.perf_counter() - t0
    res["after_create"] = status_mb()
    feed = {i.name: np.asarray(feeds[k]) for k, i in enumerate(sess.get_inputs())}
    for _ in range(args.runs):
        sess.run(None, feed)
    res["after_runs"] = status_mb()
    res["peak_rss_mb"] = res["after_runs"]["VmHWM"]
    return res


def in_child(fn, *a):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = fn(*a)
        except Exception as e:  # reported, not raised: the other runners go on
            out = {"error": f"{type(e).__name__}: {e}"}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return json.loads(data) if data else {"error": "child died"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--modes", default="eager,default")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--lib", default=os.path.join(HERE, "..", "build", "libsmelt.so"))
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--no-ort", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    for kv in args.env:
        k, _, v = kv.partition("=")
        os.environ[k] = v
    rows = []
    args.dims = {d: in_child(dims_of, d).get("dims", "") for d in args.models}
    print(f"{'model':<12} {'runner':<14} {'peak MB':>8} {'anon MB':>8} {'file MB':>8} "
          f"{'cold s':>7} {'warm s':>7} {'cache s':>7}")
    tmp = tempfile.TemporaryDirectory()
    for d in args.models:
        name = os.path.basename(os.path.normpath(d))
        runners = []
        if not args.no_ort:
            runners.append((run_ort, d, args))
        for m in args.modes.split(","):
            if m:
                runners.append((run_smelt, d, m, args, None))
        got = {}
        for rep in range(args.repeat):
            order = runners if rep % 2 == 0 else runners[::-1]
            for fn, *a in order:
                if fn is run_smelt:  # a fresh cache every round: cold is cold
                    a[-1] = os.path.join(tmp.name, f"{name}-{a[1]}-{rep}")
                res = in_child(fn, *a)
                if fn is run_smelt and "error" not in res:
                    res.update(in_child(run_smelt_from_cache, *a))
                res["model"], res["round"] = name, rep
                rows.append(res)
                got.setdefault(res.get("runner", fn.__name__), []).append(res)
        for runner, rs in got.items():
            errs = [r for r in rs if "error" in r]
            if errs:
                print(f"{name:<12} {runner:<14} error: {errs[0]['error']}")
                continue
            last = rs[-1]["after_runs"]
            med = lambda key: statistics.median([r[key] for r in rs]) if key in rs[0] else None
            cold = med("create_cold_s") if "create_cold_s" in rs[0] else med("create_s")
            warm, fresh = med("create_warm_s"), med("create_cache_s")
            peak = statistics.median([r["peak_rss_mb"] for r in rs])
            colds = [r.get("create_cold_s", r.get("create_s")) for r in rs]
            spread = f"  (cold {min(colds):.2f}-{max(colds):.2f} over {len(rs)})" if len(rs) > 1 else ""
            print(f"{name:<12} {runner:<14} {peak:>8.0f} {last['RssAnon']:>8.0f} "
                  f"{last['RssFile']:>8.0f} {cold:>7.2f} " + (f"{warm:>7.2f}" if warm is not None else f"{'':>7}")
                  + (f" {fresh:>7.2f}" if fresh is not None else f" {'':>7}") + spread)
    tmp.cleanup()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": rows, "threads": args.threads, "env": args.env}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
