#!/usr/bin/env python3
"""Builds decoder-only LLM fixtures for `smelt generate` at test time: nothing is
downloaded, the models come from small transformers configs with random
weights (seeds fixed) and are written with save_pretrained, then exported with
torch.onnx.export (the TorchScript exporter) with past key/value inputs:

  inputs  input_ids [batch,seq] int64, attention_mask [batch,past+seq] int64,
          position_ids [batch,seq] int64 (llama), past_key_values.N.key/value
          [batch,kv_heads,past,head_dim] float32
  outputs logits [batch,seq,vocab], present.N.key/value [batch,kv_heads,past+seq,head_dim]

usage: make_decoder_fixtures.py OUT_DIR [gpt2|llama|gpt2-124m|llama-124m]...
Each model lands in OUT_DIR/NAME/ (config.json, model.safetensors, model.onnx).
Exit 77 when torch or transformers is missing."""
import os
import sys

try:
    import torch
    import transformers
except ImportError as e:  # pragma: no cover
    print("skip: %s" % e)
    sys.exit(77)


def config_for(name):
    if name == "gpt2":
        return transformers.GPT2Config(vocab_size=512, n_positions=256, n_embd=64, n_layer=2, n_head=4,
                                       bos_token_id=0, eos_token_id=511,
                                       initializer_range=0.1)
    if name == "gpt2-124m":
        return transformers.GPT2Config()  # GPT-2 small: 12 layers, 768 wide, 50257 tokens
    if name == "llama-124m":  # Llama-style at GPT-2 small's size (for onnxruntime-genai, which has no GPT-2)
        return transformers.LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048,
                                        num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=4,
                                        max_position_embeddings=1024, bos_token_id=1, eos_token_id=2,
                                        tie_word_embeddings=False)
    if name == "llama":
        return transformers.LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=160,
                                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                        max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0,
                                        bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
                                        initializer_range=0.1)
    raise SystemExit("unknown model '%s' (gpt2, llama, gpt2-124m, llama-124m)" % name)


class Wrapper(torch.nn.Module):
    """Flat tensors in and out: (input_ids, attention_mask[, position_ids], past...) ->
    (logits, present...)."""

    def __init__(self, model, n_layer, with_pos):
        super().__init__()
        self.model, self.n_layer, self.with_pos = model, n_layer, with_pos

    def forward(self, input_ids, attention_mask, *rest):
        pos = rest[0] if self.with_pos else None
        past = rest[1:] if self.with_pos else rest
        cache = transformers.DynamicCache()
        for i in range(self.n_layer):
            cache.update(past[2 * i], past[2 * i + 1], i)
        kw = dict(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
        if self.with_pos:
            kw["position_ids"] = pos
        out = self.model(**kw)
        pkv = out.past_key_values
        flat = []
        for i in range(self.n_layer):
            if hasattr(pkv, "layers"):
                flat += [pkv.layers[i].keys, pkv.layers[i].values]
            elif hasattr(pkv, "key_cache"):
                flat += [pkv.key_cache[i], pkv.value_cache[i]]
            else:
                flat += [pkv[i][0], pkv[i][1]]
        return (out.logits, *flat)


def build(name, out_dir):
    torch.manual_seed(1234 if name != "llama" else 4321)
    cfg = config_for(name)
    cls = transformers.LlamaForCausalLM if name.startswith("llama") else transformers.GPT2LMHeadModel
    model = cls(cfg).eval()
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d)
    n_layer = cfg.num_hidden_layers
    heads = cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    head_dim = cfg.hidden_size // heads
    with_pos = name.startswith("llama")
    b, s, p = 1, 3, 2
    ids = torch.randint(0, cfg.vocab_size, (b, s))
    mask = torch.ones(b, p + s, dtype=torch.int64)
    args = [ids, mask]
    names = ["input_ids", "attention_mask"]
    dyn = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total_seq"}}
    if with_pos:
        args.append(torch.arange(p, p + s).unsqueeze(0))
        names.append("position_ids")
        dyn["position_ids"] = {0: "batch", 1: "seq"}
    outs = ["logits"]
    dyn["logits"] = {0: "batch", 1: "seq"}
    for i in range(n_layer):
        for kv in ("key", "value"):
            args.append(torch.randn(b, kv_heads, p, head_dim))
            names.append("past_key_values.%d.%s" % (i, kv))
            dyn[names[-1]] = {0: "batch", 2: "past_seq"}
            outs.append("present.%d.%s" % (i, kv))
            dyn[outs[-1]] = {0: "batch", 2: "total_seq"}
    path = os.path.join(d, "model.onnx")
    with torch.no_grad():
        torch.onnx.export(Wrapper(model, n_layer, with_pos), tuple(args), path, input_names=names,
                          output_names=outs, dynamic_axes=dyn, opset_version=17, dynamo=False)
    print(path)


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    out_dir = sys.argv[1]
    for name in sys.argv[2:] or ["gpt2", "llama"]:
        build(name, out_dir)


if __name__ == "__main__":
    main()
