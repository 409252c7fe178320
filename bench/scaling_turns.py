#!/usr/bin/env python3
"""bench/scaling_turns.py: thread scaling measured with the thread counts taking turns.

usage: bench/scaling_turns.py MODEL_DIR... [--threads 1,2] [--runners smelt,onnxruntime]
                              [--mode default] [--runs 20] [--block 3] [--warmup 3]
                              [--settle-ms 150] [--lib build/libsmelt.so] [--json FILE]

For each model, one child process makes every runner at every thread count
(smelt in --mode through the C API, each session with a pool of its own;
ONNX Runtime with intra-op threads N; OpenVINO with INFERENCE_NUM_THREADS N)
and times them all in turns, as bench/peers_suite.py times runners: a pause
(--settle-ms), one untimed run, --block timed runs, the first runner
rotating each round.  The speed-up of a runner from the fewest threads to
each other count is the ratio of its medians in that one process.

Why turns: on a shared VM the memory rate and the clock drift by 5-30%
within minutes (docs/PARALLEL.md, twenty-seventh session), so a 1-thread
figure and a 2-thread figure taken minutes apart in separate runs put that
drift into the ratio.  Here both counts see the same minutes.

PyTorch is not offered: its thread count is one setting per process.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ort_compare as oc  # noqa: E402
import peers_suite as ps  # noqa: E402

RUNNERS = ("smelt", "onnxruntime", "openvino")


def child(model_dir, threads_list, runners, args):
    """Every (runner, threads) in one process, in turns: name -> median ms."""
    import numpy as np
    files, names, arrays, dims = ps.load_inputs(model_dir)
    sm = oc.Smelt(args.lib)
    cache_root = tempfile.mkdtemp(prefix="scaling-turns-")
    try:
        live = {}
        for r in runners:
            for t in threads_list:
                name = f"smelt {args.mode}" if r == "smelt" else r
                live[f"{r}@{t}"] = ps.make_runner(name, model_dir, names, arrays, files, t, np, sm,
                                                  cache_root, dims)
        calls = {k: (v.run_fast if hasattr(v, "run_fast") else v.run) for k, v in live.items()}
        turns = ps.time_in_turns(calls, args)
        return {k: {"median_ms": statistics.median(v), "min_ms": min(v), "runs": len(v)}
                for k, v in turns.items()}
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)


def table(results, threads_list, runners):
    base = threads_list[0]
    head = "| model | " + " | ".join(f"{r} {t}t ms" for r in runners for t in threads_list) + " | " + \
        " | ".join(f"{r} {base}->{t}" for r in runners for t in threads_list[1:]) + " |"
    lines = [head, "|" + "---|" * (1 + len(runners) * (2 * len(threads_list) - 1))]
    for model, rows in results.items():
        if "error" in rows:
            lines.append(f"| {model} | {rows['error']} |")
            continue
        cells = [f"{rows[f'{r}@{t}']['median_ms']:.2f}" for r in runners for t in threads_list]
        cells += [f"{rows[f'{r}@{base}']['median_ms'] / rows[f'{r}@{t}']['median_ms']:.2f}x"
                  for r in runners for t in threads_list[1:]]
        lines.append(f"| {model} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runners", default="smelt,onnxruntime")
    ap.add_argument("--mode", default="default", choices=list(oc.MODES))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--block", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--settle-ms", type=float, default=150)
    ap.add_argument("--lib", default=os.path.join(HERE, "..", "build", "libsmelt.so"))
    ap.add_argument("--json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    threads_list = sorted({int(t) for t in args.threads.split(",")})
    runners = [r.strip() for r in args.runners.split(",") if r.strip()]
    for r in runners:
        if r not in RUNNERS:
            ap.error(f"unknown runner '{r}': expected one of {', '.join(RUNNERS)}")
    if len(threads_list) < 2:
        ap.error("--threads needs at least two counts")
    if args.child:
        print("SCALING-RESULT " + json.dumps(child(args.models[0], threads_list, runners, args)))
        return 0
    results = {}
    for d in args.models:
        model = os.path.basename(os.path.normpath(d))
        print(f"scaling_turns: {model}...", file=sys.stderr, flush=True)
        cmd = [sys.executable, os.path.abspath(__file__), d, "--child", "--threads", args.threads,
               "--runners", ",".join(runners), "--mode", args.mode, "--runs", str(args.runs),
               "--block", str(args.block), "--warmup", str(args.warmup),
               "--settle-ms", str(args.settle_ms), "--lib", args.lib]
        p = subprocess.run(cmd, capture_output=True, text=True)
        line = next((l for l in p.stdout.splitlines() if l.startswith("SCALING-RESULT ")), None)
        if line:
            results[model] = json.loads(line[len("SCALING-RESULT "):])
        else:
            tail = (p.stderr.strip().splitlines() or ["no output"])[-1][:300]
            results[model] = {"error": f"child exited {p.returncode}: {tail}"}
    print(table(results, threads_list, runners))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": threads_list, "mode": args.mode, "runs": args.runs, "block": args.block,
                       "results": results}, f, indent=1)
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
