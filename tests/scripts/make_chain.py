#!/usr/bin/env python3
"""Writes a chain model: x [4] f32 -> Neg -> Relu -> Neg -> Neg -> Relu -> Neg ... -> y
(the ops repeat with period 3, so every third value is min(x, 0): a dropped
or misplaced node shows in the output).

The ONNX protobuf is written by hand (standard library only), so tests and
benchmarks do not need the onnx package.

  make_chain.py N OUT.onnx      the model alone (N nodes, N >= 1)
  make_chain.py N DIR --test    DIR/model.onnx and DIR/test_data_set_0 with an
                                input and its expected output (smelt test DIR)

"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


from tiny_onnx import f_bytes, f_int  # the protobuf writer shared by the test scripts

field, vfield = f_bytes, f_int  # length-delimited (wire type 2) and varint (wire type 0) fields


OPS = ("Neg", "Relu", "Neg")


def value_info(name, dims):
    shape = b"".join(field(1, vfield(1, d)) for d in dims)        # TensorShapeProto.dim.dim_value
    tensor = vfield(1, 1) + field(2, shape)                       # elem_type FLOAT, shape
    return field(1, name) + field(2, field(1, tensor))            # name, type.tensor_type


def chain_model(n, dims=(4,)):
    ops = OPS
    parts = []
    for i in range(n):
        src = "x" if i == 0 else "v%d" % (i - 1)
        dst = "y" if i == n - 1 else "v%d" % i
        parts.append(field(1, field(1, src) + field(2, dst) + field(3, "n%d" % i) + field(4, ops[i % 3])))
    parts.append(field(2, "chain%d" % n))
    parts.append(field(11, value_info("x", dims)))
    parts.append(field(12, value_info("y", dims)))
    graph = b"".join(parts)
    return (vfield(1, 8) + field(2, "smelt-make-chain") + field(7, graph)
            + field(8, field(1, "") + vfield(2, 17)))               # ir 8, opset 17


def tensor_pb(name, values):
    """A float TensorProto: dims, data_type FLOAT, name, raw_data."""
    raw = struct.pack("<%df" % len(values), *values)
    return vfield(1, len(values)) + vfield(2, 1) + field(8, name) + field(9, raw)


def expected(n, xs):
    """The chain's output, computed the way the ops define it."""
    out = []
    for x in xs:
        for i in range(n):
            x = -x if OPS[i % 3] == "Neg" else max(x, 0.0)
        out.append(x)
    return out


def write_test_dir(n, d):
    xs = [-1.5, -0.25, 0.0, 2.0]
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(chain_model(n, (len(xs),)))
    with open(os.path.join(d, "test_data_set_0", "input_0.pb"), "wb") as f:
        f.write(tensor_pb("x", xs))
    with open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb") as f:
        f.write(tensor_pb("y", expected(n, xs)))


def main():
    args = sys.argv[1:]
    test = "--test" in args
    args = [a for a in args if a != "--test"]
    if len(args) != 2 or not args[0].isdigit() or int(args[0]) < 1:
        sys.exit("usage: make_chain.py N OUT.onnx | make_chain.py N DIR --test")
    n = int(args[0])
    if test:
        write_test_dir(n, args[1])
    else:
        with open(args[1], "wb") as f:
            f.write(chain_model(n))


if __name__ == "__main__":
    main()
