#!/usr/bin/env python3
"""Compile time against graph size: Neg/Relu chains on a [4] f32 tensor
(tests/scripts/make_chain.py) compiled in default mode, and run eagerly.

  bench/compile_scaling.py [--smelt build/smelt] [--sizes 1000,2500,...]
                           [--big 1000000] [--timeout 600]

Per size: `smelt compile MODEL --mode default --explain` with the cache off
(wall seconds, CPU seconds of smelt and the C compilers it ran, and the
stages smelt reports: front, passes, fusion, plan, emit, cc), then
`smelt run MODEL` in eager mode (wall seconds for load + run, and the run
alone as smelt reports it).  --big N: one eager load + run of an N-node
chain (0: skip).  A point that takes longer than --timeout is reported as
such and the larger sizes are skipped.  Standard library only."""
import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "scripts"))
import make_chain  # noqa: E402


def timed(cmd, timeout, env):
    """(wall s, child CPU s, stdout) or None past the timeout."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None
    wall = time.monotonic() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    if p.returncode:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), p.stdout[-2000:]))
    return wall, cpu, p.stdout


def stages(out):
    m = re.search(r"^time: .*\((.*)\)", out, re.M)
    if not m:
        return ""
    return " ".join("%s %.2f" % (k, float(v) / 1e3) for k, v in
                    (kv.split() for kv in m.group(1).split(", ")) if float(v) >= 5)


def ran_ms(out):
    m = re.search(r"ran in ([0-9.]+) ms", out)
    return float(m.group(1)) / 1e3 if m else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smelt", default=os.path.join(HERE, "..", "build", "smelt"))
    ap.add_argument("--sizes", default="1000,2500,10000,20000,50000,100000,200000")
    ap.add_argument("--big", type=int, default=1000000)
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    env = dict(os.environ, SMELT_CACHE="off")
    sizes = [int(s) for s in a.sizes.split(",") if s]
    print("%8s | %10s %9s | %10s %9s | %s" % ("nodes", "compile s", "cpu s", "eager s", "run s",
                                            "compile stages (s)"))
    with tempfile.TemporaryDirectory() as tmp:
        compile_ok = True
        for n in sizes:
            model = os.path.join(tmp, "chain%d.onnx" % n)
            with open(model, "wb") as f:
                f.write(make_chain.chain_model(n))
            c = timed([a.smelt, "compile", model, "--mode", "default", "--explain"], a.timeout, env) \
                if compile_ok else None
            e = timed([a.smelt, "run", model, "-o", os.path.join(tmp, "out")], a.timeout, env)
            cs = ("%10.2f %9.2f" % c[:2]) if c else ("%10s %9s" % ("> %ds" % a.timeout if compile_ok else "skipped", ""))
            es = ("%10.2f %9.3f" % (e[0], ran_ms(e[2]))) if e else "%10s %9s" % ("> %ds" % a.timeout, "")
            print("%8d | %s | %s | %s" % (n, cs, es, stages(c[2]) if c else ""), flush=True)
            compile_ok = compile_ok and c is not None
            os.unlink(model)
        if a.big:
            model = os.path.join(tmp, "chain%d.onnx" % a.big)
            with open(model, "wb") as f:
                f.write(make_chain.chain_model(a.big))
            e = timed([a.smelt, "run", model, "-o", os.path.join(tmp, "out")], a.timeout, env)
            print("%8d | %10s %9s | %s |" % (a.big, "-", "", ("%10.2f %9.3f" % (e[0], ran_ms(e[2]))) if e
                                            else "> %ds" % a.timeout), flush=True)


if __name__ == "__main__":
    main()
