#!/usr/bin/env python3
"""The static KV cache against the model as written, in one process taking turns.

    bench/generate_static.py MODEL_DIR [--prompt-len 128] [--new 128] [--threads 2]
                             [--modes eager,default] [--rounds 3]

For each mode: one session, two smelt.Generator on it (static_cache=True and
False); each round runs prefill + --new greedy tokens with each, the first
generator rotating, after one untimed warm-up run each.  Prints per mode and
generator the median decode ms/token (the steps after the first token) and
prefill ms over the rounds, the ratio as-written / static, and that both
produced the same tokens.  Needs the package built in build/python
(PYTHONPATH=build/python) or installed.  Timings on a shared machine are
noisy: compare the ratios within one run."""
import argparse
import os
import statistics
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "build", "python"))
import smelt  # noqa: E402


def one_run(gen, prompt, new):
    t0 = time.perf_counter()
    gen.prefill(prompt)
    t1 = time.perf_counter()
    toks, steps = [], []
    for i in range(new):
        ts = time.perf_counter()
        toks.append(gen.next())
        if i:
            steps.append(time.perf_counter() - ts)
    return (t1 - t0) * 1e3, statistics.mean(steps) * 1e3 if steps else 0.0, toks


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--modes", default="eager,default")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    path = os.path.join(a.model_dir, "model.onnx") if os.path.isdir(a.model_dir) else a.model_dir
    prompt = [(i * 37) % 500 + 1 for i in range(a.prompt_len)]
    print(f"{path}: prompt {a.prompt_len}, {a.new} new tokens, {a.threads} threads, {a.rounds} rounds")
    for mode in a.modes.split(","):
        s = smelt.Session(path, mode=mode, threads=a.threads, dynamic=(mode != "eager"),
                          recompile_limit=(1 << 20) if mode != "eager" else None)
        gens = {"static": smelt.Generator(s, max_length=a.prompt_len + a.new, eos_token_id=-1),
                "as-written": smelt.Generator(s, max_length=a.prompt_len + a.new, eos_token_id=-1,
                                              static_cache=False)}
        assert gens["static"].static_cache, "the static KV cache did not apply to this model (see the log line)"
        res = {k: ([], []) for k in gens}
        toks = {}
        for k, g in gens.items():
            toks[k] = one_run(g, prompt, min(a.new, 4))[2]  # warm-up (packing, compiling)
        names = list(gens)
        for r in range(a.rounds):
            for k in names[r % 2:] + names[:r % 2]:
                pre, dec, toks[k] = one_run(gens[k], prompt, a.new)
                res[k][0].append(pre)
                res[k][1].append(dec)
        med = {k: (statistics.median(v[0]), statistics.median(v[1])) for k, v in res.items()}
        for k in names:
            print(f"  {mode:8s} {k:10s} prefill {med[k][0]:8.1f} ms   decode {med[k][1]:7.2f} ms/token")
        print(f"  {mode:8s} as-written / static decode: {med['as-written'][1] / med['static'][1]:.2f}x   "
              f"same tokens: {toks['static'] == toks['as-written']}")
        del gens, s


if __name__ == "__main__":
    main()
