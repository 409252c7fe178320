#!/usr/bin/env python3
"""bench/int8_compare.py: smelt int8 against smelt fp32 and ONNX Runtime fp32 and int8, one process.

usage: python3 bench/int8_compare.py MODEL_DIR... [--threads N] [--runs N] [--mode M]
                                      [--ort-per-channel] [--json FILE]

MODEL_DIR holds model.onnx and test_data_set_0/input_N.pb (the zoo layout).
Per model, four runners on the same inputs, rotated in turns as in
ort_compare.py (so none always follows another's spinning threads):
  smelt fp32, smelt int8 (session precision int8, --mode, default "default"),
  ONNX Runtime fp32, and ONNX Runtime int8: onnxruntime.quantization's
  quantize_dynamic of the same model with QInt8 weights (per tensor, ORT's
  default; --ort-per-channel: per channel, as smelt quantizes).
Reported: median ms of each, the speed ratios, and each int8 output's cosine
similarity and max abs error against its own runtime's fp32 output (the
first output: the logits or last hidden state), plus smelt fp32 vs ORT fp32.
Exit 77 when onnxruntime or numpy is missing.
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
import ort_compare as oc  # noqa: E402  (Smelt, SmeltRunner: the C API through ctypes)


def cosine(np, a, b):
    a, b = a.astype("float64").ravel(), b.astype("float64").ravel()
    d = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / d) if d else 1.0


def accuracy(np, got, ref):
    return [{"cosine": cosine(np, a, b), "max_abs": float(np.max(np.abs(a.astype("float64") - b)))}
            for a, b in zip(got, ref) if a.dtype.kind == "f"]


def ort_session(ort, path, threads):
    return ort.InferenceSession(path, oc.ort_options(ort, threads), providers=["CPUExecutionProvider"])


def bench_model(np, ort, sm, model_dir, args, tmp):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    import glob
    path = os.path.join(model_dir, "model.onnx")
    name = os.path.basename(os.path.normpath(model_dir))
    qpath = os.path.join(tmp, name + ".int8.onnx")
    if not os.path.exists(qpath):
        quantize_dynamic(path, qpath, weight_type=QuantType.QInt8, per_channel=args.ort_per_channel)
    inputs = sorted(glob.glob(os.path.join(model_dir, "test_data_set_0", "input_*.pb")),
                    key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    mode = oc.MODES[args.mode]
    s32 = oc.SmeltRunner(np, sm, path, inputs, args.threads, mode, precision=0)
    s8 = oc.SmeltRunner(np, sm, path, inputs, args.threads, mode, precision=3)
    arrays = s32.arrays()
    o32, o8 = ort_session(ort, path, args.threads), ort_session(ort, qpath, args.threads)
    feed = {i.name: arrays[k] for k, i in enumerate(o32.get_inputs())}

    def ort_run(sess):
        def run(keep=False):
            t0 = time.perf_counter()
            res = sess.run(None, feed)
            return time.perf_counter() - t0, res
        return run

    runners = {"smelt_fp32": s32.run, "smelt_int8": s8.run, "ort_fp32": ort_run(o32), "ort_int8": ort_run(o8)}
    outs = {k: r(keep=True)[1] for k, r in runners.items()}
    for _ in range(args.warmup):
        for r in runners.values():
            r()
    times = oc.take_turns(runners, args.runs, args.block, args.settle_ms)
    s32.close()
    s8.close()
    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    row = {"model": name, "threads": args.threads, "mode": args.mode, "runs": args.runs,
           "ort_per_channel": args.ort_per_channel, "ms": ms,
           "smelt_int8_vs_fp32": ms["smelt_fp32"] / ms["smelt_int8"],
           "ort_int8_vs_fp32": ms["ort_fp32"] / ms["ort_int8"],
           "smelt_int8_vs_ort_int8": ms["ort_int8"] / ms["smelt_int8"],
           "smelt_int8_acc": accuracy(np, outs["smelt_int8"], outs["smelt_fp32"]),
           "ort_int8_acc": accuracy(np, outs["ort_int8"], outs["ort_fp32"]),
           "smelt_fp32_vs_ort_fp32": accuracy(np, outs["smelt_fp32"], outs["ort_fp32"])}
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--block", type=int, default=5)
    ap.add_argument("--settle-ms", type=float, default=50)
    ap.add_argument("--mode", default="default", choices=list(oc.MODES))
    ap.add_argument("--ort-per-channel", action="store_true")
    ap.add_argument("--lib", default=os.path.join(HERE, "..", "build", "libsmelt.so"))
    ap.add_argument("--json")
    args = ap.parse_args()
    try:
        import numpy as np
        import onnxruntime as ort
        import onnxruntime.quantization  # noqa: F401
    except ImportError as e:
        print(f"int8_compare: {e} (pip install onnxruntime numpy)", file=sys.stderr)
        return 77
    sm = oc.Smelt(args.lib)
    with tempfile.TemporaryDirectory() as tmp:
        rows = [bench_model(np, ort, sm, d, args, tmp) for d in args.models]
    print(f"{'model':<12} {'thr':>3} {'smelt32':>9} {'smelt8':>9} {'ort32':>9} {'ort8':>9} "
          f"{'s8/s32 x':>8} {'o8/o32 x':>8} {'s8 vs o8 x':>10} {'cos s8':>9} {'cos o8':>9}")
    for r in rows:
        m = r["ms"]
        print(f"{r['model']:<12} {r['threads']:>3} {m['smelt_fp32']:>9.2f} {m['smelt_int8']:>9.2f} "
              f"{m['ort_fp32']:>9.2f} {m['ort_int8']:>9.2f} {r['smelt_int8_vs_fp32']:>8.2f} "
              f"{r['ort_int8_vs_fp32']:>8.2f} {r['smelt_int8_vs_ort_int8']:>10.2f} "
              f"{r['smelt_int8_acc'][0]['cosine']:>9.6f} {r['ort_int8_acc'][0]['cosine']:>9.6f}")
    print("x: speed ratio (higher = the first is faster); cos: first output's cosine vs the same runtime's fp32")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
