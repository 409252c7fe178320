#!/usr/bin/env python3
"""Accuracy of a reduced-precision decode against fp32 on one decoder
(smelt.Session precision P vs fp32, the same model, the same tokens):

  - greedy agreement, free-running: the tokens each precision generates on its
    own from the same prompt (the first divergence, then the rest follows
    different text, so this understates agreement);
  - greedy agreement, teacher-forced: at every decode step both precisions see
    the fp32 run's tokens (smelt.Generator step/sample), the share of steps
    whose next-token argmax equals fp32's;
  - logits cosine similarity and max abs difference per position, over the
    prompt followed by the fp32 tokens (one run with an empty cache; each row
    of a GEMM is quantized on its own, so a row's int8 product is the one a
    decode step computes for it);
  - the per-token cross-entropy (nats) of that sequence's next token under
    each precision, and its difference P - fp32: mean, mean and max of |.|
    (--prompt-len 128 --new 384: a fixed 512-token sequence).

On random-weight models the logits are nearly flat, so near-ties make argmax
agreement a harsh measure; the cosine is the steadier figure.

usage: decode_accuracy.py MODEL_DIR [--precision int8] [--prompt-len 128] [--new 128]
                          [--threads 2] [--mode eager]
Needs the smelt package (build/python on PYTHONPATH).  Prints one JSON object."""
import argparse
import json
import os

import numpy as np

import smelt


def past_feeds(sess, batch, seq):
    feeds = {}
    for (name, dtype, shape) in sess.inputs:
        if "past" in name:
            dims = [batch if d == "batch" or d == "batch_size" else (0 if isinstance(d, str) else d) for d in shape]
            feeds[name] = np.zeros(dims, np.float32)
        elif name == "attention_mask":
            feeds[name] = np.ones((batch, seq), np.int64)
        elif name == "position_ids":
            feeds[name] = np.arange(seq, dtype=np.int64)[None, :]
    return feeds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--precision", default="int8")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mode", default="eager")
    a = ap.parse_args()
    path = os.path.join(a.model_dir, "model.onnx")
    vocab = 1001  # token ids 1..1000, inside the model's vocabulary when config.json says it is smaller
    cfg = os.path.join(a.model_dir, "config.json")
    if os.path.exists(cfg):
        with open(cfg) as f:
            vocab = min(vocab, int(json.load(f).get("vocab_size", vocab)))
    prompt = [(i * 7919) % (vocab - 1) + 1 for i in range(a.prompt_len)]
    sess = {p: smelt.Session(path, mode=a.mode, threads=a.threads, precision=p) for p in ("fp32", a.precision)}
    total = a.prompt_len + a.new
    gens = {p: smelt.Generator(s, max_length=total + 1) for p, s in sess.items()}
    free = {p: g.generate(prompt, a.new) for p, g in gens.items()}
    ref = free["fp32"]
    # teacher-forced: the low precision sees the fp32 tokens
    g = gens[a.precision]
    g.prefill(prompt)
    forced = 0
    for t in ref:
        forced += int(g.sample() == t)
        g.step(t)
    # logits over prompt + fp32 tokens, one run each
    ids = np.array([prompt + ref], np.int64)
    logits = {}
    for p, s in sess.items():
        feeds = past_feeds(s, 1, ids.shape[1])
        feeds["input_ids"] = ids
        names = [n for (n, _, _) in s.inputs]
        out = s.run({k: v for k, v in feeds.items() if k in names})
        logits[p] = out[0][0].astype(np.float64)
    x, y = logits["fp32"], logits[a.precision]
    cos = (x * y).sum(1) / (np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1))
    # per-token cross-entropy of the sequence's next token (positions 0 .. n-2), in nats
    nxt = ids[0][1:]

    def xent(z):
        z = z[:-1]
        m = z.max(1)
        return m + np.log(np.exp(z - m[:, None]).sum(1)) - z[np.arange(len(nxt)), nxt]

    ce32, cep = xent(x), xent(y)
    first = next((i for i, (u, v) in enumerate(zip(ref, free[a.precision])) if u != v), len(ref))
    print(json.dumps({"model": a.model_dir, "precision": a.precision, "prompt_tokens": a.prompt_len, "new_tokens": a.new,
                      "free_running_agreement": sum(u == v for u, v in zip(ref, free[a.precision])) / len(ref),
                      "free_running_first_divergence": first,
                      "teacher_forced_agreement": forced / len(ref),
                      "logits_argmax_agreement": float((x.argmax(1) == y.argmax(1)).mean()),
                      "logits_cosine_mean": float(cos.mean()), "logits_cosine_min": float(cos.min()),
                      "logits_max_abs_diff": float(np.abs(x - y).max()),
                      "logits_max_abs_fp32": float(np.abs(x).max()),
                      "cross_entropy_tokens": int(len(nxt)),
                      "cross_entropy_fp32_mean": float(ce32.mean()),
                      "cross_entropy_mean": float(cep.mean()),
                      "cross_entropy_diff_mean": float((cep - ce32).mean()),
                      "cross_entropy_abs_diff_mean": float(np.abs(cep - ce32).mean()),
                      "cross_entropy_abs_diff_max": float(np.abs(cep - ce32).max())}))


if __name__ == "__main__":
    main()
