#!/usr/bin/env python3
"""Greedy tokens from `smelt generate` equal Hugging Face generate(do_sample=False)
for 64 new tokens on the GPT-2-style and Llama-style fixtures
(make_decoder_fixtures.py, built here with random weights), in eager and
default modes; and the zoo's gpt_tiny_kv (past.N.key -> present.N.key)
gives the same tokens eagerly and compiled.  Where the build has the
tokenizer (src/tokenizer/), --prompt TEXT with a tokenizer.json trained here
streams the text that `tokenizers` decodes from the ids --prompt-ids gives.

usage: generate_parity.py SMELT SHARED_DIR [WORK_DIR]
Exit 77 when torch or transformers is missing."""
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import transformers
except ImportError as e:
    print("skip: %s" % e)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_decoder_fixtures  # noqa: E402

N_NEW = 64
PROMPT = [5, 17, 42, 7, 99, 3, 250, 11]


def smelt_tokens(smelt, model, mode, prompt, n_new, extra=()):
    cmd = [smelt, "generate", model, "--prompt-ids", ",".join(map(str, prompt)), "--max-new-tokens",
           str(n_new), "--eos", "-1", "--json", "--threads", "2", "--mode", mode, *extra]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("FAIL: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    rep = json.loads(r.stdout)
    for key in ("time_to_first_token_ms", "prefill_tokens_per_s", "decode_tokens_per_s", "ms_per_token_p50",
                "ms_per_token_p99", "kv_cache_bytes", "peak_rss_bytes"):
        if key not in rep:
            raise SystemExit("FAIL: --json has no '%s': %s" % (key, r.stdout))
    return rep


def hf_tokens(folder, prompt, n_new):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=n_new, do_sample=False, eos_token_id=None,
                             pad_token_id=0)
    return out[0, len(prompt):].tolist()


def check_prompt_text(smelt, folder):
    """--prompt with tokenizer.json beside the model: the streamed text is the
    decode of the tokens --prompt-ids gives for the same ids.  0 = ok or
    skipped, 1 = failed."""
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError:
        print("skip --prompt: no tokenizers package")
        return 0
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=500, special_tokens=["<|endoftext|>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["hello world, the quick brown fox jumps over the lazy dog %d" % i for i in range(300)], tr)
    tok.save(os.path.join(folder, "tokenizer.json"))
    model = os.path.join(folder, "model.onnx")
    text = "hello world, the quick"
    r = subprocess.run([smelt, "generate", model, "--prompt", text, "--max-new-tokens", "16", "--eos", "-1"],
                       capture_output=True)
    if r.returncode == 2 and b"does not have" in r.stderr:
        print("skip --prompt: this build of smelt has no tokenizer")
        return 0
    ids = tok.encode(text).ids
    got = smelt_tokens(smelt, model, "eager", ids, 16)["tokens"][0]
    want = tok.decode(got).encode("utf-8")
    ok = r.returncode == 0 and r.stdout[:-1] == want
    print("%s --prompt streams the decoded tokens: %r" % ("ok  " if ok else "FAIL", r.stdout[:-1]))
    if not ok:
        print("  want %r\n  stderr %s" % (want, r.stderr.decode(errors="replace")))
    return 0 if ok else 1


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    smelt, shared = sys.argv[1], sys.argv[2]
    work = sys.argv[3] if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="smelt-gen-")
    os.makedirs(work, exist_ok=True)
    failed = 0
    for name in ("gpt2", "llama"):
        folder = os.path.join(work, name)
        if not os.path.exists(os.path.join(folder, "model.onnx")):
            make_decoder_fixtures.build(name, work)
        ref = hf_tokens(folder, PROMPT, N_NEW)
        kv = None
        for mode in ("eager", "default"):
            # default: after a --warmup run of the prompt, which must not change the tokens
            extra = ("--warmup", "1") if mode == "default" else ()
            rep = smelt_tokens(smelt, os.path.join(folder, "model.onnx"), mode, PROMPT, N_NEW, extra)
            got = rep["tokens"][0]
            ok = got == ref
            failed += not ok
            print("%s %-7s %s  %d tokens, kv %d bytes" % ("ok  " if ok else "FAIL", mode, name, len(got),
                                                           rep["kv_cache_bytes"]))
            if not ok:
                print("  smelt: %s\n  hf:    %s" % (got, ref))
            kv = rep["kv_cache_bytes"]
        cfg = json.load(open(os.path.join(folder, "config.json")))
        layers = cfg.get("n_layer", cfg.get("num_hidden_layers"))
        heads = cfg.get("num_key_value_heads") or cfg.get("n_head") or cfg.get("num_attention_heads")
        dim = cfg.get("n_embd", cfg.get("hidden_size")) // (cfg.get("n_head") or cfg.get("num_attention_heads"))
        # the cache after the run: prompt + every new token but the last (not fed back)
        want = 2 * layers * heads * (len(PROMPT) + N_NEW - 1) * dim * 4
        if kv != want:
            print("FAIL %s: kv_cache_bytes %d, expected %d" % (name, kv, want))
            failed += 1
    failed += check_prompt_text(smelt, os.path.join(work, "gpt2"))
    tiny = os.path.join(shared, "models", "gpt_tiny_kv", "model.onnx")
    if os.path.exists(tiny):
        a = smelt_tokens(smelt, tiny, "eager", PROMPT[:4], 16)["tokens"]
        b = smelt_tokens(smelt, tiny, "default", PROMPT[:4], 16)["tokens"]
        ok = a == b and len(a[0]) == 16
        failed += not ok
        print("%s gpt_tiny_kv eager == default: %s" % ("ok  " if ok else "FAIL", a[0]))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
