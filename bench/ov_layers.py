#!/usr/bin/env python3
"""bench/ov_layers.py: smelt's time per convolution beside OpenVINO's.

usage: bench/ov_layers.py MODEL_DIR [--threads N] [--precision bf16|fp32] [--runs N] [--reps N]
                          [--smelt build/smelt]

OpenVINO (CPU plugin, INFERENCE_PRECISION_HINT bf16 or f32, PERFORMANCE_HINT
LATENCY, N threads, PERF_COUNT on) and `smelt profile --by node --mode
default --precision P` take turns, --reps rounds of --runs / --reps runs
each, on the zoo's inputs; each Convolution / GroupConvolution (OpenVINO)
and each node (smelt) keeps its fastest time.  The two sets are paired per layer: by
shape (input and output channels, kernel, stride, from the ONNX model's Conv
nodes and smelt's --explain lines) in execution order within each shape, since
OpenVINO may run a block's downsample before or after its last conv.  Prints
one row per layer (smelt's kernel, both times, OpenVINO's over smelt's: above
1, smelt faster) and the sums per kernel size, stride and smelt kernel.
Fastest-of-runs, because this shared VM's medians move by 10-30% between
minutes; the ratio of sums is the figure to read, not a single row.
"""
import argparse
import collections
import glob
import json
import os
import re
import subprocess
import sys
import tempfile


class OvRunner:
    """OpenVINO's compiled model with PERF_COUNT: run(n) keeps each
    Convolution / GroupConvolution's fastest time over n more runs"""

    def __init__(self, model_dir, threads, precision):
        import onnx
        import openvino as ov
        from onnx import numpy_helper
        core = ov.Core()
        hint = "bf16" if precision == "bf16" else "f32"
        cm = core.compile_model(os.path.join(model_dir, "model.onnx"), "CPU",
                                {"INFERENCE_PRECISION_HINT": hint, "PERFORMANCE_HINT": "LATENCY",
                                 "INFERENCE_NUM_THREADS": threads, "PERF_COUNT": True})
        self.req = cm.create_infer_request()
        self.ins = [numpy_helper.to_array(onnx.load_tensor(f))
                    for f in sorted(glob.glob(os.path.join(model_dir, "test_data_set_0", "input_*.pb")))]
        for _ in range(5):
            self.req.infer(self.ins)
        self.best = {}  # insertion order: execution order

    def run(self, n):
        for _ in range(n):
            self.req.infer(self.ins)
            for p in self.req.profiling_info:
                if p.node_type in ("Convolution", "GroupConvolution"):
                    t = p.real_time.total_seconds() * 1e3
                    self.best[p.node_name] = min(self.best.get(p.node_name, 1e9), t)


def onnx_conv_shapes(model_dir):
    """ONNX Conv node name -> (C, M, K, stride)"""
    import onnx
    m = onnx.load(os.path.join(model_dir, "model.onnx"), load_external_data=False)
    inits = {t.name: t for t in m.graph.initializer}
    out = {}
    for nd in m.graph.node:
        if nd.op_type != "Conv" or nd.input[1] not in inits:
            continue
        w = inits[nd.input[1]]
        attrs = {a.name: a for a in nd.attribute}
        group = attrs["group"].i if "group" in attrs else 1
        stride = attrs["strides"].ints[0] if "strides" in attrs else 1
        out[nd.name] = (w.dims[1] * group, w.dims[0], w.dims[2], stride)
    return out


def smelt_profile(smelt, model, threads, precision, runs, best):
    """one `smelt profile` of `runs` runs; each node's fastest time into best"""
    trace = os.path.join(tempfile.mkdtemp(prefix="ov_layers_"), "t.json")
    subprocess.run([smelt, "profile", model, "-o", trace, "--precision", precision, "--threads", str(threads),
                    "--mode", "default", "--runs", str(runs), "--by", "node"], check=True, capture_output=True)
    ev = json.load(open(trace))
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    per = collections.defaultdict(collections.Counter)
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") == "step":
            per[e["args"]["run"]][e["args"].get("node")] += e["dur"]
    for node in set(k for r in per.values() for k in r):
        t = min(r[node] for r in per.values()) / 1000
        best[node] = min(best.get(node, 1e9), t)


EXPLAIN = re.compile(r"library: node '(\S+)' \((\S+)\) conv (\d+)->(\d+) ch, kernel (\d+)x\d+ stride (\d+),\d+"
                     r"(?: group \d+)?, (\d+) positions.*?: (.*)$")


def kernel_of(how):
    if "depthwise" in how:
        return "depthwise"
    if "Winograd" in how:
        return "Winograd" + (" bf16" if "vdpbf16ps" in how else " fp32")
    if "along the vector" in how:
        return "bf16 channel vectors"
    if "vdpbf16ps" in how or "AMX" in how:
        return "bf16 position vectors"
    for word in ("pointwise", "direct", "im2col", "Winograd"):
        if word in how:
            return "fp32 " + word
    return how.split(" (")[0][:32]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--smelt", default="build/smelt")
    a = ap.parse_args()
    model = os.path.join(a.model_dir, "model.onnx")
    shapes = onnx_conv_shapes(a.model_dir)
    runner, mine, per = OvRunner(a.model_dir, a.threads, a.precision), {}, max(1, a.runs // a.reps)
    for _ in range(a.reps):  # the two take turns, so each sees the same minutes of the machine
        runner.run(per)
        smelt_profile(a.smelt, model, a.threads, a.precision, per, mine)
    ov = runner.best
    ex = subprocess.run([a.smelt, "compile", model, "--precision", a.precision, "--threads", str(a.threads),
                         "--explain"], capture_output=True, text=True).stdout
    queue = collections.defaultdict(collections.deque)
    for name, t in ov.items():
        queue[shapes.get(name.replace("/WithoutBiases", ""))].append((name, t))
    rows, sums = [], collections.defaultdict(lambda: [0.0, 0.0, 0])
    for line in ex.splitlines():
        m = EXPLAIN.search(line)
        if not m:
            continue
        node, C, M, K, s, P = m.group(1), int(m.group(3)), int(m.group(4)), int(m.group(5)), int(m.group(6)), m.group(7)
        q = queue[(C, M, K, s)]
        if not q or node not in mine:
            print(f"unpaired: {node} ({C}->{M} {K}x{K}/{s})", file=sys.stderr)
            continue
        _, t_ov = q.popleft()
        kern = kernel_of(m.group(8))
        rows.append((f"{C}->{M} {K}x{K}/{s} P{P}", kern, mine[node], t_ov))
        key = f"{K}x{K}/{s} {kern}"
        sums[key][0] += mine[node]
        sums[key][1] += t_ov
        sums[key][2] += 1
    print(f"{model}, {a.threads} thread(s), precision {a.precision}: fastest of runs per layer, ms")
    print("| layer | smelt kernel | smelt | OpenVINO | OpenVINO / smelt |")
    print("|---|---|---:|---:|---:|")
    for desc, kern, ts, to in rows:
        print(f"| {desc} | {kern} | {ts:.3f} | {to:.3f} | {to / ts:.2f} |")
    tot_s, tot_o = sum(r[2] for r in rows), sum(r[3] for r in rows)
    print(f"| **all {len(rows)}** | | **{tot_s:.2f}** | **{tot_o:.2f}** | **{tot_o / tot_s:.2f}** |")
    print()
    print("| kernel size / stride, smelt kernel | layers | smelt | OpenVINO | OpenVINO / smelt |")
    print("|---|---:|---:|---:|---:|")
    for key, (ts, to, n) in sorted(sums.items(), key=lambda kv: -kv[1][0]):
        print(f"| {key} | {n} | {ts:.2f} | {to:.2f} | {to / ts:.2f} |")


if __name__ == "__main__":
    main()
