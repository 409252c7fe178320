#!/usr/bin/env python3
"""bench/unseen_export.py: models nobody tuned smelt for, exported for a generality sweep.

  python3 bench/unseen_export.py OUT_DIR [--only NAME,...] [--list]

Each model becomes OUT_DIR/NAME/model.onnx plus test_data_set_0/{input_N.pb,output_N.pb}
(the zoo's layout, so bench/ort_compare.py and `smelt test` take them), with random
weights (seeded; torchvision weights=None, transformers models built from a config: no
download) and PyTorch eager's outputs.  TorchScript exporter, opset 17, batch 1.
The set covers op patterns the zoo lacks: squeeze-excitation, SiLU/Hardswish, channel
shuffle, grouped and 7x7 depthwise convs, LayerNorm over channels (ConvNeXt), dense
concatenation, inception branches, shifted-window attention (Swin), relative-position
attention (DeBERTa), T5's RMS-style norm, 1-D conv front ends (Whisper, wav2vec2).
"""
import argparse
import inspect
import os
import sys

import torch

OPSET = 17


def tv(name, **kw):
    def build():
        import torchvision
        return getattr(torchvision.models, name)(weights=None, **kw)
    return build, lambda: (torch.randn(1, 3, 224, 224),), ["image"]


class Hidden(torch.nn.Module):
    """A transformers model returning only its first output (last_hidden_state)."""
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, *xs):
        return self.m(*xs)[0]


def hf(model_cls, cfg_cls, cfg, make_inputs, names, part=None):
    def build():
        import transformers
        c = getattr(transformers, cfg_cls)(**cfg)
        c._attn_implementation = "eager"
        m = getattr(transformers, model_cls)(c)
        return Hidden(getattr(m, part) if part else m)
    return build, make_inputs, names


def ids(vocab, seq=128):
    return lambda: (torch.randint(0, vocab, (1, seq)),)


MODELS = {
    "efficientnet_b0": tv("efficientnet_b0"),
    "mobilenet_v3_large": tv("mobilenet_v3_large"),
    "shufflenet_v2": tv("shufflenet_v2_x1_0"),
    "regnet_y_400mf": tv("regnet_y_400mf"),
    "convnext_tiny": tv("convnext_tiny"),
    "densenet121": tv("densenet121"),
    "mnasnet1_0": tv("mnasnet1_0"),
    "resnext50": tv("resnext50_32x4d"),
    "googlenet": tv("googlenet", aux_logits=False, init_weights=True),
    "swin_t": tv("swin_t"),
    "distilbert": hf("DistilBertModel", "DistilBertConfig", {}, ids(30522), ["input_ids"]),
    "roberta": hf("RobertaModel", "RobertaConfig", {"vocab_size": 50265}, ids(50265), ["input_ids"]),
    "albert": hf("AlbertModel", "AlbertConfig", {"hidden_size": 768, "num_attention_heads": 12,
                                                 "intermediate_size": 3072}, ids(30000), ["input_ids"]),
    "deberta_v2": hf("DebertaV2Model", "DebertaV2Config",
                     {"hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 6,
                      "intermediate_size": 1536}, ids(128100), ["input_ids"]),
    "t5_encoder": hf("T5EncoderModel", "T5Config", {"d_model": 512, "num_layers": 6, "num_heads": 8,
                                                      "d_ff": 2048, "d_kv": 64}, ids(32128), ["input_ids"]),
    "whisper_encoder": hf("WhisperModel", "WhisperConfig",
                          {"d_model": 384, "encoder_layers": 4, "decoder_layers": 1,
                           "encoder_attention_heads": 6, "decoder_attention_heads": 6},
                          lambda: (torch.randn(1, 80, 3000),), ["input_features"], part="encoder"),
    "wav2vec2": hf("Wav2Vec2Model", "Wav2Vec2Config", {"num_hidden_layers": 4},
                   lambda: (torch.randn(1, 16000),), ["input_values"]),
    "clip_vision": hf("CLIPVisionModel", "CLIPVisionConfig", {"patch_size": 32},
                      lambda: (torch.randn(1, 3, 224, 224),), ["pixel_values"]),
}


def export(name, out):
    build, make_inputs, in_names = MODELS[name]
    torch.manual_seed(0)
    model = build().eval()
    inputs = make_inputs()
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    with torch.no_grad():
        outs = model(*inputs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    kw = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    import onnx
    from onnx import numpy_helper
    torch.onnx.export(model, inputs, os.path.join(d, "model.onnx"), opset_version=OPSET,
                      input_names=in_names, output_names=[f"out{i}" for i in range(len(outs))],
                      do_constant_folding=True, **kw)
    for kind, tensors in (("input", inputs), ("output", outs)):
        for i, t in enumerate(tensors):
            with open(os.path.join(d, "test_data_set_0", f"{kind}_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(t.detach().numpy()).SerializeToString())
    n = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"{name}: {n:.1f}M params -> {d}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list:
        print("\n".join(MODELS))
        return 0
    names = a.only.split(",") if a.only else list(MODELS)
    failed = []
    for n in names:
        try:
            export(n, a.out)
        except Exception as e:  # one model's exporter problem does not stop the rest
            print(f"{n}: export failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
            failed.append(n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
