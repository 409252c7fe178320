#!/usr/bin/env python3
"""bench/one_layer.py: 1-layer versions of the benchmark-scale transformers,
for session-creation time against layer count.

usage: bench/one_layer.py OUT_DIR [--shared ../shared] [--layers 1]

Writes OUT_DIR/bert_base_1l and OUT_DIR/gpt2_small_1l (model.onnx and
test_data_set_0, the zoo layout): the zoo exporter's bert_base and
gpt2_small (../shared/models/export.py, random weights, nothing downloaded)
with --layers blocks instead of 12.  Time them beside the full models with
bench/weight_memory.py:

  bench/weight_memory.py /work/large/bert_base OUT_DIR/bert_base_1l --modes default
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared"))
    ap.add_argument("--layers", type=int, default=1)
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.shared, "models"))
    import export as zoo  # the zoo's exporter: torch, onnx
    n = a.layers
    for name, build in (("bert_base", lambda: zoo.Encoder(30522, 768, n, 12, 512)),
                        ("gpt2_small", lambda: zoo.GPT(50257, 768, n, 12, 1024))):
        entry = list(zoo.ZOO[name])
        entry[0] = build
        short = f"{name}_{n}l"
        zoo.ZOO[short] = tuple(entry)
        zoo.export(short, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
