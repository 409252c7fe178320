#!/usr/bin/env python3
"""Decoder generation measured the way `smelt generate --json` reports it, for
peers driving the same model: ONNX Runtime on the same ONNX file in a Python
loop (present -> past fed back each step, IO binding keeps outputs in ORT's
memory), and ONNX Runtime GenAI on its own export of the same Hugging Face
folder (its model builder, fp32 CPU) when onnxruntime-genai is installed, or,
where the builder has no path for the architecture (GPT-2), GenAI over the
same model.onnx with a generic decoder config (--genai-wrap DIR).

usage: generate_peers.py MODEL_DIR [--prompt-len 128] [--new 128] [--threads 2]
                         [--genai-dir DIR | --genai-wrap DIR] [--smelt SMELT --mode eager ...]
                         [--hf eager] [--hf compile] [--warmup N] [--rounds N]
--rounds N: every runner generates N times, the runners taking turns round by
round (the order rotating), each keeping its loaded model; the figures are
each runner's medians over the rounds, with every round's decode and prefill
tokens/s in "rounds".  On a machine whose speed drifts (other tenants'
memory traffic moved this 2-core VM's decode speed by a third within
minutes), one round per runner can set a fast runner beside a slow moment.
--warmup N: untimed generations before each runner's first timed one (smelt
--warmup N per round, as each round is a fresh process; the in-process peers
once).
--hf: Hugging Face generate() on the same folder with cache_implementation="static",
eager or with the forward under torch.compile(mode="reduce-overhead").
MODEL_DIR holds model.onnx and config.json (tests/scripts/make_decoder_fixtures.py
writes both: `make_decoder_fixtures.py /tmp/m gpt2-124m`).  Prints one JSON
object per runner with time_to_first_token_ms, prefill_tokens_per_s,
decode_tokens_per_s, ms_per_token_p50/p99 and the tokens' agreement with smelt's."""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def summarize(name, prompt_len, t0, t_first, step_ms, tokens):
    steps = sorted(step_ms)
    dec = sum(step_ms)
    return {"runner": name, "prompt_tokens": prompt_len, "new_tokens": len(tokens),
            "time_to_first_token_ms": (t_first - t0) * 1e3,
            "prefill_tokens_per_s": prompt_len / (t_first - t0),
            "decode_tokens_per_s": len(step_ms) / (dec / 1e3) if step_ms else 0,
            "ms_per_token_p50": float(np.percentile(steps, 50)) if steps else 0,
            "ms_per_token_p99": float(np.percentile(steps, 99)) if steps else 0,
            "tokens": tokens}


class OrtRunner:
    """ONNX Runtime on the same model.onnx in a Python loop (present -> past)."""

    def __init__(self, model_dir, prompt, n_new, threads, warmup):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        self.s = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), so, providers=["CPUExecutionProvider"])
        self.ins = {i.name: i for i in self.s.get_inputs()}
        self.outs = [o.name for o in self.s.get_outputs()]
        self.empty = {}
        for name, i in self.ins.items():
            if "past" in name:
                self.empty[name] = np.zeros((1, i.shape[1], 0, i.shape[3]), np.float32)
        self.prompt, self.n_new = prompt, n_new
        self.name = "onnxruntime %s (python loop, io binding)" % ort.__version__
        for _ in range(warmup):
            ort_loop(self.s, self.ins, self.outs, dict(self.empty), prompt, 2)

    def run(self):
        past = dict(self.empty)
        t0 = time.perf_counter()
        t_first, step_ms, tokens = ort_loop(self.s, self.ins, self.outs, past, self.prompt, self.n_new)
        return summarize(self.name, len(self.prompt), t0, t_first, step_ms, tokens)


def ort_loop(s, ins, outs, past, prompt, n_new):
    import onnxruntime as ort
    ids, pos, tokens, step_ms = list(prompt), 0, [], []
    t_first = None
    for step in range(n_new):
        ts = time.perf_counter()
        b = s.io_binding()
        feed = {"input_ids": np.array([ids], np.int64)}
        if "attention_mask" in ins:
            feed["attention_mask"] = np.ones((1, pos + len(ids)), np.int64)
        if "position_ids" in ins:
            feed["position_ids"] = np.arange(pos, pos + len(ids), dtype=np.int64)[None]
        feed.update(past)
        for k, v in feed.items():
            b.bind_ortvalue_input(k, v if isinstance(v, ort.OrtValue) else ort.OrtValue.ortvalue_from_numpy(v))
        for o in outs:
            b.bind_output(o)
        s.run_with_iobinding(b)
        r = b.get_outputs()
        logits = r[0].numpy()
        t = int(logits[0, -1].argmax())
        tokens.append(t)
        for name, v in zip(outs[1:], r[1:]):
            past[name.replace("present", "past_key_values" if "past_key_values.0.key" in ins else "past")] = v
        te = time.perf_counter()
        if t_first is None:
            t_first = te
        else:
            step_ms.append((te - ts) * 1e3)
        pos += len(ids)
        ids = [t]
    return t_first, step_ms, tokens


def genai_wrap(model_dir, out_dir):
    """A GenAI folder for MODEL_DIR's own model.onnx (linked, not copied), for
    architectures the model builder has no path for (GPT-2): a genai_config.json
    of the generic decoder-only kind ("llama": input_ids, attention_mask, optional
    position_ids, past_key_values.N.key/value in, logits and present.N.key/value
    out) with past_present_share_buffer off (the export joins past and new keys
    with a Concat, so GenAI feeds each step's presents back as the next pasts).
    GenAI then runs the same ONNX graph smelt and ONNX Runtime run; no tokenizer
    is needed for token ids."""
    import onnx
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    g = onnx.load(os.path.join(model_dir, "model.onnx"), load_external_data=False).graph
    names = [i.name for i in g.input]
    past = next(i for i in g.input if "past" in i.name)
    dims = [d.dim_value for d in past.type.tensor_type.shape.dim]  # [batch, kv_heads, past, head_dim]
    layers = sum(1 for n in names if "past" in n and n.endswith("key"))
    key_fmt = next(n for n in names if "past" in n and n.endswith("key")).replace(".0.", ".%d.")
    eos = cfg.get("eos_token_id", 0)
    eos = eos[0] if isinstance(eos, list) else eos
    inputs = {"input_ids": "input_ids", "past_key_names": key_fmt, "past_value_names": key_fmt[:-3] + "value"}
    for opt in ("attention_mask", "position_ids"):
        if opt in names:
            inputs[opt] = opt
    out_names = [o.name for o in g.output]
    present_fmt = next(n for n in out_names if "present" in n and n.endswith("key")).replace(".0.", ".%d.")
    heads = cfg.get("num_attention_heads", cfg.get("n_head"))
    hidden = cfg.get("hidden_size", cfg.get("n_embd"))
    conf = {"model": {"bos_token_id": cfg.get("bos_token_id", eos), "eos_token_id": eos, "pad_token_id": eos,
                      "context_length": cfg.get("max_position_embeddings", cfg.get("n_positions", 1024)),
                      "type": "llama", "vocab_size": cfg.get("vocab_size"),
                      "decoder": {"filename": "model.onnx", "session_options": {"log_id": "onnxruntime-genai",
                                                                                "provider_options": []},
                                  "head_size": dims[3], "hidden_size": hidden, "num_attention_heads": heads,
                                  "num_key_value_heads": dims[1], "num_hidden_layers": layers, "inputs": inputs,
                                  "outputs": {"logits": out_names[0], "present_key_names": present_fmt,
                                              "present_value_names": present_fmt[:-3] + "value"}}},
            "search": {"do_sample": False, "num_beams": 1, "max_length": 1024, "past_present_share_buffer": False}}
    os.makedirs(out_dir, exist_ok=True)
    link = os.path.join(out_dir, "model.onnx")
    if not os.path.exists(link):
        os.symlink(os.path.abspath(os.path.join(model_dir, "model.onnx")), link)
    json.dump(conf, open(os.path.join(out_dir, "genai_config.json"), "w"), indent=2)
    return out_dir


class GenAIRunner:
    """onnxruntime-genai over genai_dir (its builder's export, or genai_wrap's)."""
    optional = True  # a peer that cannot run is reported, not fatal

    def __init__(self, genai_dir, prompt, n_new, threads, warmup):
        import onnxruntime_genai as og
        cfg_path = os.path.join(genai_dir, "genai_config.json")
        cfg = json.load(open(cfg_path))
        opts = cfg["model"]["decoder"].setdefault("session_options", {})
        opts["intra_op_num_threads"] = threads
        opts["inter_op_num_threads"] = 1
        json.dump(cfg, open(cfg_path, "w"), indent=2)
        self.og, self.model = og, og.Model(genai_dir)
        self.prompt, self.n_new = prompt, n_new
        self.name = "onnxruntime-genai %s" % og.__version__
        for _ in range(warmup):
            self.run()

    def run(self):
        og, prompt = self.og, self.prompt
        params = og.GeneratorParams(self.model)
        params.set_search_options(do_sample=False, max_length=len(prompt) + self.n_new,
                                  min_length=len(prompt) + self.n_new)
        g = og.Generator(self.model, params)
        tokens, step_ms = [], []
        t0 = time.perf_counter()
        g.append_tokens(np.array([prompt], np.int32))
        t_first = None
        while not g.is_done() and len(tokens) < self.n_new:
            ts = time.perf_counter()
            g.generate_next_token()  # the first one samples from the prompt's logits
            tokens.append(int(g.get_next_tokens()[0]))
            te = time.perf_counter()
            if t_first is None:
                t_first = te
            else:
                step_ms.append((te - ts) * 1e3)
        return summarize(self.name, len(prompt), t0, t_first, step_ms, tokens)


class _Clock:
    """A generate() streamer that stamps each token's arrival (the first put()
    is the prompt)."""

    def __init__(self):
        self.t = []

    def put(self, value):
        self.t.append(time.perf_counter())

    def end(self):
        pass


class HFRunner:
    """Hugging Face generate() with cache_implementation="static"; compiled:
    the forward under torch.compile(mode="reduce-overhead", fullgraph=True),
    PyTorch's own recipe for fast decoding.  Warm-up generations of the same
    lengths first (untimed; at least one when compiled), so compiling is not
    in the figures."""
    optional = True  # a peer that cannot run is reported, not fatal

    def __init__(self, model_dir, prompt, n_new, threads, compiled, warmup):
        import torch
        import transformers
        torch.set_num_threads(threads)
        self.torch = torch
        self.model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
        if compiled:
            self.model.forward = torch.compile(self.model.forward, mode="reduce-overhead", fullgraph=True)
        self.prompt = prompt
        self.ids = torch.tensor([prompt], dtype=torch.long)
        self.kw = dict(do_sample=False, max_new_tokens=n_new, min_new_tokens=n_new, cache_implementation="static",
                       pad_token_id=0, attention_mask=torch.ones_like(self.ids))
        self.name = "transformers %s generate, static cache%s" % (
            transformers.__version__, ", torch.compile reduce-overhead" if compiled else "")
        with torch.inference_mode():
            tw = time.perf_counter()
            for _ in range(max(warmup, 1 if compiled else 0)):
                self.model.generate(self.ids, **self.kw)
            self.warm_s = time.perf_counter() - tw

    def run(self):
        with self.torch.inference_mode():
            clock = _Clock()
            t0 = time.perf_counter()
            out = self.model.generate(self.ids, streamer=clock, **self.kw)
        stamps = clock.t[1:]  # [0] is the prompt
        step_ms = [(b - a) * 1e3 for a, b in zip(stamps, stamps[1:])]
        r = summarize(self.name, len(self.prompt), t0, stamps[0], step_ms, out[0, len(self.prompt):].tolist())
        r["warmup_s"] = self.warm_s
        return r


class SmeltRunner:
    """`smelt generate --json`, a fresh process each round."""

    def __init__(self, smelt, model_dir, prompt, n_new, threads, mode, warmup):
        self.cmd = [smelt, "generate", os.path.join(model_dir, "model.onnx"), "--prompt-ids",
                    ",".join(map(str, prompt)), "--max-new-tokens", str(n_new), "--eos", "-1", "--json",
                    "--threads", str(threads), "--mode", mode, "--warmup", str(warmup)]
        self.name = "smelt generate --mode %s" % mode

    def run(self):
        r = subprocess.run(self.cmd, capture_output=True, text=True, check=True)
        rep = json.loads(r.stdout)
        rep["runner"] = self.name
        rep["tokens"] = rep["tokens"][0]
        return rep


def take_rounds(runners, rounds):
    """Every runner `rounds` times, in turns, the first of each round
    rotating; an optional runner (a peer) that fails is reported and
    dropped, smelt's and ONNX Runtime's failures stop the run.  Returns one
    report per runner: the first round's, with the medians over the rounds
    of the timings and every round's decode / prefill tokens/s."""
    reps = {id(r): [] for r in runners}
    live = list(runners)
    for k in range(rounds):
        for j in range(len(live)):
            r = live[(j + k) % len(live)]
            if r is None:
                continue
            try:
                reps[id(r)].append(r.run())
            except Exception as e:
                if not getattr(r, "optional", False):
                    raise
                print("%s: %s" % (r.name, e), file=sys.stderr)
                live[(j + k) % len(live)] = None
    out = []
    for r in runners:
        rs = reps[id(r)]
        if not rs:
            continue
        rep = dict(rs[0])
        for key in ("time_to_first_token_ms", "prefill_tokens_per_s", "decode_tokens_per_s", "ms_per_token_p50",
                    "ms_per_token_p99"):
            rep[key] = float(np.median([x[key] for x in rs]))
        rep["rounds"] = [{"decode_tokens_per_s": round(x["decode_tokens_per_s"], 2),
                          "prefill_tokens_per_s": round(x["prefill_tokens_per_s"], 2)} for x in rs]
        out.append(rep)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--genai-dir", help="onnxruntime-genai's model builder's export of the Hugging Face folder")
    ap.add_argument("--genai-wrap", metavar="DIR",
                    help="where the builder has no path (GPT-2): write DIR, a GenAI folder over MODEL_DIR's own "
                         "model.onnx (generic decoder config, past/present not sharing a buffer), and run GenAI on it")
    ap.add_argument("--smelt")
    ap.add_argument("--mode", action="append")
    ap.add_argument("--warmup", type=int, default=0, help="untimed generations first (smelt --warmup; the peers too)")
    ap.add_argument("--hf", action="append", choices=["eager", "compile"],
                    help="Hugging Face generate with a static cache, eager or under torch.compile "
                         "(reads MODEL_DIR's config.json and safetensors; repeatable)")
    ap.add_argument("--rounds", type=int, default=1, help="generations per runner, the runners taking turns")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    vocab = json.load(open(os.path.join(a.model_dir, "config.json"))).get("vocab_size", 50257)
    prompt = rng.integers(0, vocab, a.prompt_len).tolist()
    runners = []
    if a.smelt:
        runners += [SmeltRunner(a.smelt, a.model_dir, prompt, a.new, a.threads, mode, a.warmup)
                    for mode in a.mode or ["eager"]]
    runners.append(OrtRunner(a.model_dir, prompt, a.new, a.threads, a.warmup))
    for kind in a.hf or []:
        try:
            runners.append(HFRunner(a.model_dir, prompt, a.new, a.threads, kind == "compile", a.warmup))
        except Exception as e:  # a peer that cannot run is reported, not fatal
            print("transformers (%s): %s" % (kind, e), file=sys.stderr)
    if a.genai_wrap and not a.genai_dir:
        a.genai_dir = genai_wrap(a.model_dir, a.genai_wrap)
    if a.genai_dir:
        try:
            runners.append(GenAIRunner(a.genai_dir, prompt, a.new, a.threads, a.warmup))
        except Exception as e:  # a peer that cannot run is reported, not fatal
            print("onnxruntime-genai: %s" % e, file=sys.stderr)
    results = take_rounds(runners, max(1, a.rounds))
    ref = results[0]["tokens"]
    for r in results:
        r["tokens_equal_first"] = r["tokens"] == ref
        r["tokens"] = r["tokens"][:8]
        print(json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()}))


if __name__ == "__main__":
    main()
