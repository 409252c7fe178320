#!/usr/bin/env python3
"""smelt's tokenizer against the `tokenizers` library: trains small tokenizers
(tokenizer_corpus.py) on a few thousand generated lines, then compares, for
every line and tokenizer, smelt's encode (with and without special tokens),
decode (keeping and skipping special tokens) and streamed decode with the
library's, exactly; random id sequences test decode (byte fallback, bytes
that are not UTF-8).  Exit 77 (skip) when `tokenizers` is not installed.

    tokenizer_compare.py TOK_COMPARE_BINARY WORK_DIR [--lines N]"""
import argparse
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("driver")
    ap.add_argument("workdir")
    ap.add_argument("--lines", type=int, default=3000)
    ap.add_argument("--only", help="comma-separated tokenizer names")
    args = ap.parse_args()
    try:
        import tokenizers  # noqa: F401
        from tokenizers import Tokenizer
        from tokenizers.decoders import DecodeStream
    except ImportError as e:
        print(f"SKIP: tokenizers is not installed ({e})")
        return 77
    import tokenizer_corpus as corpus

    lines = corpus.make_lines(args.lines)
    names = args.only.split(",") if args.only else None
    try:
        import transformers  # noqa: F401
    except ImportError:
        print("note: transformers is not installed: GPT2TokenizerFast's file is not tested")
        names = [n for n in (names or ["gpt2", "gpt2_prefix", "llama2", "llama2_meta", "meta_unk", "llama3", "qwen2"])
                 if n != "gpt2_fast"]
    paths = corpus.train_tokenizers(args.workdir, lines, names)
    rng = random.Random(1)
    failures = 0
    for name, path in sorted(paths.items()):
        tok = Tokenizer.from_file(path)
        vocab = tok.get_vocab_size(with_added_tokens=True)
        cases = []
        for text in lines:
            cases.append({"text": text, "ids": tok.encode(text).ids})
        for _ in range(300):  # random ids: bytes split across tokens, invalid UTF-8, special tokens
            cases.append({"ids": [rng.randrange(vocab) for _ in range(rng.randint(1, 12))]})
        cases_path = os.path.join(args.workdir, name + ".cases.json")
        out_path = os.path.join(args.workdir, name + ".out.json")
        with open(cases_path, "w", encoding="utf-8") as f:
            json.dump(cases, f)
        r = subprocess.run([args.driver, path, cases_path, out_path], capture_output=True, text=True)
        if r.returncode:
            print(f"FAIL {name}: tok_compare exited {r.returncode}: {r.stderr.strip()}")
            failures += 1
            continue
        with open(out_path, encoding="utf-8") as f:
            got = json.load(f)
        bad = []
        n_checks = 0
        for case, g in zip(cases, got):
            text = case.get("text")
            ids = case["ids"]
            checks = []
            if text is not None:
                checks.append(("encode", ids, g["ids"]))
                checks.append(("encode add_special_tokens=False", tok.encode(text, add_special_tokens=False).ids,
                               g["ids_plain"]))
            checks.append(("decode", tok.decode(ids, skip_special_tokens=False),
                           bytes.fromhex(g["decoded"]).decode("utf-8")))
            checks.append(("decode skip_special_tokens=True", tok.decode(ids, skip_special_tokens=True),
                           bytes.fromhex(g["decoded_skip"]).decode("utf-8")))
            ds = DecodeStream(skip_special_tokens=False)
            want_stream = []
            for i in ids:
                try:
                    want_stream.append(ds.step(tok, i) or "")
                except Exception:  # "Invalid prefix encountered": smelt's stream fails at the same step
                    want_stream.append(None)
                    break
            checks.append(("stream", want_stream,
                           [None if c is None else bytes.fromhex(c).decode("utf-8") for c in g["stream"]]))
            for what, want, have in checks:
                n_checks += 1
                if want != have:
                    bad.append((what, text, ids, want, have))
        print(f"{'ok  ' if not bad else 'FAIL'} {name}: {len(cases)} cases, {n_checks} checks, {len(bad)} mismatches")
        for what, text, ids, want, have in bad[:8]:
            print(f"    {what}: text={text!r}\n      ids={ids}\n      want={want!r}\n      got ={have!r}")
        failures += bool(bad)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
