#!/usr/bin/env python3
"""bench/layer_profile.py: smelt's time per layer beside ONNX Runtime's, one row per kernel.

usage: bench/layer_profile.py MODEL_DIR [--threads N] [--runs N] [--mode M] [--smelt build/smelt]
                              [--kinds] [--env K=V]...

Runs `smelt profile MODEL_DIR/model.onnx --by node` (its Chrome trace) and
ONNX Runtime with enable_profiling (settings as bench/ort_compare.py: intra-op
threads N, inter-op 1, sequential, ORT_ENABLE_ALL), both on the zoo's
inputs, and sets their kernels side by side in execution order.  Both
runtimes fuse a conv with its bias/activation/residual into one kernel, so
the k-th compute kernel of one is the k-th of the other; ORT's layout
reorders (ReorderInput/ReorderOutput) and free reshapes are left out.  Each
row names the layer by ORT's recorded shapes (convs: kind, C->M, kernel,
stride, output plane), with ms per run of each and the ratio ORT/smelt (>1:
smelt faster).  --kinds adds a summary per layer kind (pointwise by plane
size, depthwise by stride, full convs, other ops).  Rows are paired by
position only: a run where the two do not fuse alike shows it as a
mismatch of op names, and the tool says so.
"""
import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
SKIP_ORT = {"ReorderInput", "ReorderOutput", "Flatten", "Reshape", "Identity"}


def ort_layers(model_dir, threads, runs):
    import onnxruntime as ort
    from ort_compare import ort_options  # bench/: the settings of every comparison
    so = ort_options(ort, threads)
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(prefix="layer_profile_"), "ort")
    sess = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), so, providers=["CPUExecutionProvider"])
    import ort_profile  # bench/: the same inputs, read the same way
    feeds, files = ort_profile.load_inputs(model_dir, sess), ort_profile.input_files(model_dir)
    sess.run(None, feeds)  # untimed
    for _ in range(runs):
        sess.run(None, feeds)
    with open(sess.end_profiling()) as fh:
        events = json.load(fh)
    starts = sorted(e["ts"] for e in events if e.get("cat") == "Session" and e.get("name") == "model_run")
    first = starts[1] if len(starts) > 1 else 0
    order, per = [], {}
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time") or e["ts"] < first:
            continue
        a = e.get("args", {})
        op = a.get("op_name", "?")
        if op in SKIP_ORT:
            continue
        name = e["name"][: -len("_kernel_time")]
        if name not in per:
            order.append(name)
            per[name] = {"op": op, "ms": 0.0, "in": a.get("input_type_shape", []),
                         "out": a.get("output_type_shape", []), "attrs": a}
        per[name]["ms"] += e["dur"] / 1000.0 / runs
    return [dict(per[n], name=n) for n in order], files, sess


def shape(x):
    return next(iter(x.values())) if isinstance(x, dict) and x else []


def describe(layer):
    """(kind, text) from ORT's recorded shapes."""
    ins, outs = layer["in"], layer["out"]
    if layer["op"] in ("Conv", "FusedConv") and len(ins) >= 2:
        x, w, y = shape(ins[0]), shape(ins[1]), shape(outs[0]) if outs else []
        if len(x) == 4 and len(w) == 4 and len(y) == 4:
            C, M, kh, kw = x[1], y[1], w[2], w[3]
            s = max(1, round(x[2] / y[2])) if y[2] else 1
            res = " +res" if len(ins) >= 4 else ""
            if w[1] == 1 and C == M and C > 1:
                return f"dw{kh}x{kw}/s{s}", f"dw {C} {kh}x{kw}/{s} -> {y[2]}x{y[3]}{res}"
            if kh == kw == 1:
                plane = "big" if y[2] * y[3] >= 28 * 28 else "small"
                return f"pw-{plane}", f"pw {C}->{M} @{y[2]}x{y[3]}{res}"
            return f"conv{kh}x{kw}", f"conv {C}->{M} {kh}x{kw}/{s} -> {y[2]}x{y[3]}{res}"
    return layer["op"], layer["op"] + " " + "x".join(str(d) for d in (shape(outs[0]) if outs else []))


def smelt_layers(smelt, model, threads, runs, mode, files, names, env):
    trace = os.path.join(tempfile.mkdtemp(prefix="layer_profile_"), "t.json")
    cmd = [smelt, "profile", model, "-o", trace, "--mode", mode, "--threads", str(threads),
           "--runs", str(runs), "--by", "node", "--top", "1"]
    for n, f in zip(names, files):
        cmd += ["-i", f"{n}={f}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    with open(trace) as fh:
        ev = json.load(fh)
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    order, per = [], {}
    for e in ev:
        a = e.get("args", {})
        if e.get("ph") != "X" or e.get("cat") != "step" or a.get("depth", 0) != 0:
            continue
        n = a.get("node", e["name"])
        if n not in per:
            order.append(n)
            per[n] = {"op": e["name"], "ms": 0.0}
        per[n]["ms"] += e["dur"] / 1000.0 / runs
    return [dict(per[n], name=n) for n in order]


def pair(sm, ort):
    """smelt's layers in ORT's order: by name where ORT's kernel is named
    after the output of the node smelt's fused kernel is named after
    ("<node>_output_0..."), otherwise the next unpaired one in order."""
    by_name = {l["name"]: l for l in sm}
    used, out = set(), []
    for o in ort:
        key = o["name"].split("_output_")[0]
        l = by_name.get(key)
        if l is None or id(l) in used:
            l = next((x for x in sm if id(x) not in used and x["ms"] > 0.0005), None)
        if l is None:
            break
        used.add(id(l))
        out.append(l)
    return out + [l for l in sm if id(l) not in used and l["ms"] > 0.0005]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--mode", default="default")
    ap.add_argument("--smelt", default=os.path.join(HERE, "..", "build", "smelt"))
    ap.add_argument("--kinds", action="store_true")
    ap.add_argument("--env", action="append", default=[])
    a = ap.parse_args()
    env = dict(os.environ)
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    ort, files, sess = ort_layers(a.model_dir, a.threads, a.runs)
    names = [i.name for i in sess.get_inputs()]
    sm = smelt_layers(a.smelt, os.path.join(a.model_dir, "model.onnx"), a.threads, a.runs, a.mode, files,
                      names, env)
    sm = pair(sm, ort)
    if len(sm) != len(ort):
        print(f"warning: {len(sm)} smelt kernels, {len(ort)} ONNX Runtime kernels: rows may not pair up",
              file=sys.stderr)
    print(f"{a.model_dir}: {a.threads} threads, smelt --mode {a.mode}, {a.runs} runs; ms per run\n")
    print(f"| {'#':>3} | {'layer (ORT shapes)':<36} | {'smelt op':<12} | {'smelt':>7} | {'ORT':>7} | {'ORT/smelt':>9} |")
    print(f"| {'-' * 3} | {'-' * 36} | {'-' * 12} | {'-' * 7} | {'-' * 7} | {'-' * 9} |")
    kinds = collections.OrderedDict()
    for i in range(max(len(sm), len(ort))):
        s = sm[i] if i < len(sm) else {"op": "-", "ms": 0.0}
        o = ort[i] if i < len(ort) else {"op": "-", "ms": 0.0, "in": [], "out": []}
        kind, text = describe(o) if i < len(ort) else ("?", "-")
        k = kinds.setdefault(kind, [0, 0.0, 0.0])
        k[0] += 1
        k[1] += s["ms"]
        k[2] += o["ms"]
        r = o["ms"] / s["ms"] if s["ms"] > 0 else float("nan")
        print(f"| {i:>3} | {text[:36]:<36} | {s['op'][:12]:<12} | {s['ms']:>7.3f} | {o['ms']:>7.3f} | {r:>9.2f} |")
    ts, to = sum(l["ms"] for l in sm), sum(l["ms"] for l in ort)
    print(f"| {'':>3} | {'total':<36} | {'':<12} | {ts:>7.3f} | {to:>7.3f} | {to / ts if ts else 0:>9.2f} |")
    if a.kinds:
        print(f"\n| {'kind':<14} | {'layers':>6} | {'smelt':>7} | {'ORT':>7} | {'ORT/smelt':>9} |")
        print(f"| {'-' * 14} | {'-' * 6} | {'-' * 7} | {'-' * 7} | {'-' * 9} |")
        for kind, (n, s, o) in kinds.items():
            print(f"| {kind:<14} | {n:>6} | {s:>7.3f} | {o:>7.3f} | {o / s if s else 0:>9.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
