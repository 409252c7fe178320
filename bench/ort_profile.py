#!/usr/bin/env python3
"""bench/ort_profile.py: ONNX Runtime's time per op class, to set beside `smelt profile`.

usage: bench/ort_profile.py MODEL_DIR [--threads N] [--runs N] [--top N]

MODEL_DIR holds model.onnx and test_data_set_0/input_N.pb (the zoo layout).
ONNX Runtime runs with the settings bench/ort_compare.py uses (intra-op
threads N, inter-op 1, sequential, ORT_ENABLE_ALL) and SessionOptions.
enable_profiling; after one untimed run, --runs runs (default 50) are
profiled and the kernel events summed per op type (ORT's fused op names, e.g.
FusedMatMul, FastGelu, Attention, SkipLayerNormalization).  Prints a
Markdown table like `smelt profile`'s: calls, total ms, ms per run, share.
The same inputs for smelt: `smelt profile MODEL_DIR/model.onnx -i NAME=FILE`.
"""
import argparse
import collections
import glob
import json
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ort_compare import ort_options  # noqa: E402  (the settings every bench/ comparison uses)


def input_files(model_dir):
    """test_data_set_0/input_N.pb of a zoo-layout folder, in N order."""
    return sorted(glob.glob(os.path.join(model_dir, "test_data_set_0", "input_*.pb")),
                  key=lambda f: int(f.rsplit("_", 1)[1].split(".")[0]))


def load_inputs(model_dir, sess):
    feeds = {}
    for meta, f in zip(sess.get_inputs(), input_files(model_dir)):
        t = onnx.TensorProto()
        with open(f, "rb") as fh:
            t.ParseFromString(fh.read())
        feeds[meta.name] = numpy_helper.to_array(t)
    return feeds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    so = ort_options(ort, a.threads)
    tmp = tempfile.mkdtemp(prefix="ort_profile_")
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tmp, "ort")
    sess = ort.InferenceSession(os.path.join(a.model_dir, "model.onnx"), so,
                                providers=["CPUExecutionProvider"])
    feeds = load_inputs(a.model_dir, sess)
    sess.run(None, feeds)
    sess.end_profiling()  # drops the session-creation and warm-up events
    so.enable_profiling = True
    sess = ort.InferenceSession(os.path.join(a.model_dir, "model.onnx"), so,
                                providers=["CPUExecutionProvider"])
    sess.run(None, feeds)  # untimed
    for _ in range(a.runs):
        sess.run(None, feeds)
    path = sess.end_profiling()
    with open(path) as fh:
        events = json.load(fh)
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    runs = runs[1:]  # the first is the untimed run
    first = runs[0]["ts"] if runs else 0
    per = collections.defaultdict(lambda: [0, 0.0])
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time") or e["ts"] < first:
            continue
        op = e.get("args", {}).get("op_name", "?")
        per[op][0] += 1
        per[op][1] += e["dur"] / 1000.0
    run_ms = sum(r["dur"] for r in runs) / 1000.0
    total = sum(v[1] for v in per.values())
    print(f"{a.model_dir}: ONNX Runtime {ort.__version__}, {a.threads} threads: {len(runs)} runs, "
          f"{run_ms / max(len(runs), 1):.3f} ms per run (mean)\n")
    print(f"| {'op':<30} | {'calls':>8} | {'total ms':>10} | {'ms/run':>9} | {'share':>6} |")
    print(f"| {'-' * 30} | {'-' * 8} | {'-' * 10} | {'-' * 9} | {'-' * 6} |")
    rows = sorted(per.items(), key=lambda kv: -kv[1][1])
    for op, (n, ms) in rows[:a.top]:
        print(f"| {op:<30} | {n:>8} | {ms:>10.3f} | {ms / max(len(runs), 1):>9.4f} | "
              f"{100 * ms / max(run_ms, 1e-9):>5.1f}% |")
    print(f"\ncoverage: kernels {total:.3f} of {run_ms:.3f} ms measured run time")


if __name__ == "__main__":
    sys.exit(main())
