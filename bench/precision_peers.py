#!/usr/bin/env python3
"""bench/precision_peers.py: smelt at a reduced precision beside its own fp32 and OpenVINO's.

usage: bench/precision_peers.py MODEL_DIR... [--precision bf16] [--threads N] [--runs N]
                                [--block K] [--warmup N] [--settle-ms MS]
                                [--lib build/libsmelt.so] [--no-openvino] [--json FILE]

MODEL_DIR holds model.onnx and test_data_set_0/input_N.pb (the zoo layout).  In
one process, on the same inputs and thread count, these runners take turns
(each turn: a pause of --settle-ms, one untimed run, --block timed runs; the
runner going first rotates every round):
  - smelt fp32 and smelt at --precision (default mode, through the C API);
  - OpenVINO's CPU plugin with INFERENCE_PRECISION_HINT f32 and the reduced
    hint (bf16 for bf16, f16 for fp16; OpenVINO has no int8/int4 hint: those
    columns are left out), PERFORMANCE_HINT LATENCY, INFERENCE_NUM_THREADS N.
    OpenVINO falls back to f32 where the CPU lacks the type's instructions;
    the table prints the precision its compiled model reports, so a fallback
    is visible rather than read as a result.
Per model: the median ms of each runner; each reduced runner's speed-up over
its own fp32 (fp32 ms / reduced ms); smelt reduced against OpenVINO reduced
(OpenVINO ms / smelt ms: above 1, smelt is faster); and each reduced
runner's outputs against its fp32 outputs (max abs difference, cosine).
This is the measurement of issue 12's bars (smelt bf16 >= OpenVINO bf16 and
>= 1.9x smelt fp32); it needs a CPU with the reduced type's instructions
(AVX512_BF16 for bf16) to say anything about them.
"""
import argparse
import glob
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ort_compare as oc  # noqa: E402  (the ctypes binding of smelt's C API)

PRECISIONS = {"bf16": 1, "fp16": 2, "int8": 3, "int4": 4}
OV_HINT = {"bf16": "bf16", "fp16": "f16"}


def cosine(np, a, b):
    a, b = a.astype("float64").ravel(), b.astype("float64").ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na and nb else float(na == nb)


def compare(np, ours, ref):
    """Largest abs difference and smallest cosine over the outputs."""
    diff = max(float(np.max(np.abs(a.astype("float64") - b.astype("float64")))) if a.size else 0.0
               for a, b in zip(ours, ref))
    cos = min(cosine(np, a, b) for a, b in zip(ours, ref))
    return diff, cos


class OpenVinoRunner:
    def __init__(self, ov, path, arrays, threads, hint):
        core = ov.Core()
        cfg = {"INFERENCE_PRECISION_HINT": hint, "PERFORMANCE_HINT": "LATENCY",
               "INFERENCE_NUM_THREADS": threads}
        self.cm = core.compile_model(core.read_model(path), "CPU", cfg)
        t = self.cm.get_property("INFERENCE_PRECISION_HINT")
        self.used = t.get_type_name() if hasattr(t, "get_type_name") else str(t)
        self.req = self.cm.create_infer_request()
        self.feed = {i: a for i, a in enumerate(arrays)}

    def run(self, keep=False):
        t0 = time.perf_counter()
        res = self.req.infer(self.feed)
        dt = time.perf_counter() - t0
        return dt, ([res[o].copy() for o in self.cm.outputs] if keep else None)


def bench_model(np, ov, sm, model_dir, args):
    path = os.path.join(model_dir, "model.onnx")
    inputs = sorted(glob.glob(os.path.join(model_dir, "test_data_set_0", "input_*.pb")),
                    key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    mode = oc.MODES["default"]
    runners = {"smelt fp32": oc.SmeltRunner(np, sm, path, inputs, args.threads, mode),
               f"smelt {args.precision}": oc.SmeltRunner(np, sm, path, inputs, args.threads, mode,
                                                         precision=PRECISIONS[args.precision])}
    arrays = runners["smelt fp32"].arrays()
    used = {}
    if ov and args.precision in OV_HINT:
        for name, hint in (("openvino fp32", "f32"), (f"openvino {args.precision}", OV_HINT[args.precision])):
            try:
                r = OpenVinoRunner(ov, path, arrays, args.threads, hint)
                runners[name], used[name] = r, r.used
            except Exception as e:  # noqa: BLE001  (a peer that fails says why, and the rest go on)
                print(f"precision_peers: {name} on {model_dir}: {e}", file=sys.stderr)
    outs = {name: r.run(keep=True)[1] for name, r in runners.items()}
    for _ in range(args.warmup):
        for r in runners.values():
            r.run()
    times = oc.take_turns({k: r.run for k, r in runners.items()}, args.runs, args.block, args.settle_ms)
    for name in ("smelt fp32", f"smelt {args.precision}"):
        runners[name].close()
    row = {"model": os.path.basename(os.path.normpath(model_dir)), "threads": args.threads,
           "precision": args.precision, "ms": {k: statistics.median(v) * 1e3 for k, v in times.items()},
           "openvino_precision_used": used, "accuracy": {}}
    for who in ("smelt", "openvino"):
        lo, hi = f"{who} {args.precision}", f"{who} fp32"
        if lo in outs and hi in outs:
            d, c = compare(np, outs[lo], outs[hi])
            row["accuracy"][who] = {"max_abs_diff": d, "cosine": c}
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--precision", default="bf16", choices=list(PRECISIONS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--block", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--settle-ms", type=float, default=150)
    ap.add_argument("--lib", default=os.path.join(HERE, "..", "build", "libsmelt.so"))
    ap.add_argument("--no-openvino", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    try:
        import numpy as np
    except ImportError as e:
        print(f"precision_peers: {e} (pip install numpy onnx)", file=sys.stderr)
        return 77
    ov = None
    if not args.no_openvino:
        try:
            import openvino as ov
        except ImportError as e:
            print(f"precision_peers: no OpenVINO ({e}); smelt columns only", file=sys.stderr)
    sm = oc.Smelt(args.lib)
    rows = [bench_model(np, ov, sm, d, args) for d in args.models]
    p = args.precision
    print(f"{args.threads} thread(s), precision {p}; ms are medians of {args.runs} runs")
    print(f"| model | smelt fp32 | smelt {p} | speed-up | OpenVINO f32 | OpenVINO {p} (used) | speed-up "
          f"| OpenVINO {p} / smelt {p} | smelt {p} cosine | OpenVINO {p} cosine |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ms = r["ms"]
        sf, sr = ms["smelt fp32"], ms[f"smelt {p}"]
        of, orr = ms.get("openvino fp32"), ms.get(f"openvino {p}")
        used = r["openvino_precision_used"].get(f"openvino {p}", "-")
        acc = r["accuracy"]

        def f(x, fmt="{:.2f}"):
            return fmt.format(x) if x is not None else "-"
        print(f"| {r['model']} | {sf:.2f} | {sr:.2f} | {sf / sr:.2f}x | {f(of)} | {f(orr)} ({used}) | "
              f"{f(of / orr if of and orr else None)}x | {f(orr / sr if orr else None)} | "
              f"{acc['smelt']['cosine']:.6f} | "
              f"{f(acc['openvino']['cosine'] if 'openvino' in acc else None, '{:.6f}')} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
