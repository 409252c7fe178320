#!/usr/bin/env python3
"""bench/phase_ab.py: A/B runs of `smelt bench` by environment variant, each
round tagged with how fast one core reads what the other just wrote.

usage: bench/phase_ab.py MODEL_DIR THREADS ROUNDS VARIANT... [-- SMELT BENCH ARGS]

A VARIANT is `-` (the environment as it is) or `NAME=V[,NAME=V...]` (set for
that variant's runs).  Each round first runs the probe (bench/cross_core_read.c
at 3 MB, built into a temporary folder on first use with `cc -O2
-march=native -pthread`) and calls the round "fast" when the other core's
lines came at more than --fast-gbs GB/s (default 70), else "slow"; then one
`smelt bench MODEL --mode default --threads T --runs R --agreement 0` per
variant, in the given order, the median of each kept.  On VMs whose two
vCPUs sometimes share no cache (docs/PARALLEL.md, thirty-fifth and
thirty-sixth sessions) a split's cost moves with that phase, so the table
gives, per phase, each variant's median of the round medians and its ratio
to the first variant (above 1: faster than the first).

Each round prints a line as it ends (phase, probe GB/s, one median per
variant) on stderr; the table goes to stdout.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def probe_binary():
    out = os.path.join(tempfile.gettempdir(), "smelt_cross_core_read")
    src = os.path.join(HERE, "cross_core_read.c")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        subprocess.run(["cc", "-O2", "-march=native", "-pthread", src, "-o", out], check=True)
    return out


def probe_gbs(binary):
    text = subprocess.run([binary, "3"], capture_output=True, text=True, check=True).stdout
    m = re.findall(r"other core wrote it\s+([\d.]+)", text)
    if not m:
        raise RuntimeError(f"{binary}: no rate in its output:\n{text}")
    return float(m[0])


def bench_median(smelt, model, threads, runs, env, extra):
    cmd = [smelt, "bench", os.path.join(model, "model.onnx"), "--mode", "default", "--threads", str(threads),
           "--runs", str(runs), "--agreement", "0"] + extra
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    m = re.findall(r"median ([\d.]+) ms", p.stdout)
    if p.returncode != 0 or not m:
        raise RuntimeError(f"{' '.join(cmd)} failed (rc {p.returncode}):\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return float(m[0])


def main():
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description="A/B smelt bench variants by the VM's cross-core phase")
    ap.add_argument("model")
    ap.add_argument("threads", type=int)
    ap.add_argument("rounds", type=int)
    ap.add_argument("variants", nargs="+")
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--fast-gbs", type=float, default=70.0)
    ap.add_argument("--smelt", default=os.path.join(HERE, "..", "build", "smelt"))
    a = ap.parse_args(argv)
    envs = []
    for v in a.variants:
        env = dict(os.environ)
        if v != "-":
            for kv in v.split(","):
                if "=" not in kv:
                    ap.error(f"variant {v!r}: expected NAME=V[,NAME=V...] or -")
                k, x = kv.split("=", 1)
                env[k] = x
        envs.append(env)
    probe = probe_binary()
    res = {}
    for r in range(a.rounds):
        gbs = probe_gbs(probe)
        phase = "fast" if gbs > a.fast_gbs else "slow"
        line = [phase, f"{gbs:.0f}"]
        for v, env in zip(a.variants, envs):
            t = bench_median(a.smelt, a.model, a.threads, a.runs, env, extra)
            res.setdefault((phase, v), []).append(t)
            line.append(f"{t:.4f}")
        print(f"round {r + 1}:", *line, file=sys.stderr, flush=True)
    print(f"| phase | variant | rounds | median of medians, ms | first variant's / this |")
    print("|---|---|---:|---:|---:|")
    for phase in ("fast", "slow"):
        base = res.get((phase, a.variants[0]))
        for v in a.variants:
            ts = res.get((phase, v))
            if not ts:
                continue
            med = statistics.median(ts)
            print(f"| {phase} | `{v}` | {len(ts)} | {med:.4f} | {statistics.median(base) / med:.3f} |")


if __name__ == "__main__":
    main()
