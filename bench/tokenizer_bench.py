#!/usr/bin/env python3
"""Encode throughput of smelt's tokenizer against the `tokenizers` library,
on the same text, in one process (smelt through ctypes on libsmelt.so),
taking turns: a benchmark, not a test.

Text: the lines tests/scripts/tokenizer_corpus.py generates (varied
scripts, emoji, code...), or --text FILE.  Tokenizers: trained there (GPT-2,
Llama-2, Llama-3 shapes), or --tokenizer FILE.  Two measures per tokenizer:
the whole text as one string, and line by line (one encode call per line;
`tokenizers`' encode_batch, which runs on several threads, is shown beside it
for reference).  MB/s are of UTF-8 input bytes; each figure is the median of
--rounds turns.  The library is asked for one thread (RAYON_NUM_THREADS=1,
TOKENIZERS_PARALLELISM) unless --threads says otherwise.

    bench/tokenizer_bench.py [--lib build/libsmelt.so] [--lines 20000] [--rounds 7]"""
import argparse
import ctypes
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "scripts"))


class Smelt:
    def __init__(self, lib):
        self.lib = ctypes.CDLL(lib)
        L = self.lib
        L.smelt_tokenizer_load.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
        L.smelt_tokenizer_encode.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int,
                                             ctypes.POINTER(ctypes.POINTER(ctypes.c_int32)),
                                             ctypes.POINTER(ctypes.c_size_t)]
        L.smelt_free.argtypes = [ctypes.c_void_p]
        L.smelt_tokenizer_free.argtypes = [ctypes.c_void_p]
        L.smelt_last_error.restype = ctypes.c_char_p

    def load(self, path):
        h = ctypes.c_void_p()
        if self.lib.smelt_tokenizer_load(path.encode(), ctypes.byref(h)):
            raise RuntimeError(self.lib.smelt_last_error().decode())
        return h

    def encode(self, h, data):
        ids = ctypes.POINTER(ctypes.c_int32)()
        n = ctypes.c_size_t()
        if self.lib.smelt_tokenizer_encode(h, data, len(data), 1, ctypes.byref(ids), ctypes.byref(n)):
            raise RuntimeError(self.lib.smelt_last_error().decode())
        out = ids[: n.value]
        self.lib.smelt_free(ids)
        return out


def timed(fn):
    t = time.perf_counter()
    r = fn()
    return time.perf_counter() - t, r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.path.join(HERE, "..", "build", "libsmelt.so"))
    ap.add_argument("--lines", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--text", help="a UTF-8 file to encode instead of the generated lines")
    ap.add_argument("--tokenizer", action="append", help="tokenizer.json (repeatable) instead of the trained ones")
    ap.add_argument("--threads", type=int, default=1, help="threads the tokenizers library may use (default 1)")
    args = ap.parse_args()
    os.environ.setdefault("RAYON_NUM_THREADS", str(args.threads))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true" if args.threads > 1 else "false")
    from tokenizers import Tokenizer
    import tokenizer_corpus as corpus

    if args.text:
        with open(args.text, encoding="utf-8") as f:
            lines = f.read().split("\n")
    else:
        lines = corpus.make_lines(args.lines, seed=7)
    text = "\n".join(lines)
    data = text.encode()
    lines_b = [l.encode() for l in lines]
    mb = len(data) / 1e6
    if args.tokenizer:
        paths = {os.path.basename(p): p for p in args.tokenizer}
    else:
        tmp = tempfile.mkdtemp(prefix="smelt-tokbench-")
        paths = corpus.train_tokenizers(tmp, corpus.make_lines(3000), ["gpt2", "llama2", "llama3"])
    sm = Smelt(args.lib)
    print(f"text: {len(lines)} lines, {mb:.2f} MB UTF-8; tokenizers library threads: {args.threads}; "
          f"median of {args.rounds} rounds")
    print(f"{'tokenizer':<10} {'mode':<8} {'smelt MB/s':>11} {'tokenizers MB/s':>16} {'ratio':>6}  "
          f"{'encode_batch MB/s':>18}  ids equal")
    for name, path in paths.items():
        hf = Tokenizer.from_file(path)
        h = sm.load(path)
        same = sm.encode(h, data) == hf.encode(text).ids
        same_lines = all(sm.encode(h, b) == hf.encode(l).ids for b, l in zip(lines_b[:2000], lines[:2000]))
        res = {k: [] for k in ("s_whole", "h_whole", "s_lines", "h_lines", "h_batch")}
        for r in range(args.rounds):
            turns = [("s_whole", lambda: sm.encode(h, data)), ("h_whole", lambda: hf.encode(text)),
                     ("s_lines", lambda: [sm.encode(h, b) for b in lines_b]),
                     ("h_lines", lambda: [hf.encode(l) for l in lines]),
                     ("h_batch", lambda: hf.encode_batch(lines))]
            turns = turns[r % len(turns):] + turns[: r % len(turns)]  # rotate who goes first
            for k, fn in turns:
                res[k].append(timed(fn)[0])
        med = {k: statistics.median(v) for k, v in res.items()}
        for mode, s, hh in (("whole", "s_whole", "h_whole"), ("lines", "s_lines", "h_lines")):
            extra = f"{mb / med['h_batch']:>18.1f}" if mode == "lines" else f"{'':>18}"
            print(f"{name:<10} {mode:<8} {mb / med[s]:>11.1f} {mb / med[hh]:>16.1f} {med[hh] / med[s]:>6.2f}  {extra}"
                  f"  {same if mode == 'whole' else same_lines}")
        sm.lib.smelt_tokenizer_free(h)
    return 0


if __name__ == "__main__":
    sys.exit(main())
