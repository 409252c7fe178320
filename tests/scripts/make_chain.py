#!/usr/bin/env python3
"""Writes a chain model: x [4] f32 -> Neg -> Relu -> Neg -> Relu ... -> y.

The ONNX protobuf is written by hand (standard library only), so tests and
benchmarks do not need the onnx package.  usage: make_chain.py N OUT.onnx
(N nodes, N >= 1).  y = relu(-x) for even N >= 2, -x for N = 1, and
-relu(-x) for odd N >= 3."""
import struct
import sys


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, payload):
    """A length-delimited field (wire type 2)."""
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def vfield(num, value):
    """A varint field (wire type 0)."""
    return varint(num << 3) + varint(value)


def value_info(name, dims):
    shape = b"".join(field(1, vfield(1, d)) for d in dims)        # TensorShapeProto.dim.dim_value
    tensor = vfield(1, 1) + field(2, shape)                       # elem_type FLOAT, shape
    return field(1, name) + field(2, field(1, tensor))            # name, type.tensor_type


def chain_model(n, dims=(4,)):
    ops = ("Neg", "Relu")
    parts = []
    for i in range(n):
        src = "x" if i == 0 else "v%d" % (i - 1)
        dst = "y" if i == n - 1 else "v%d" % i
        parts.append(field(1, field(1, src) + field(2, dst) + field(3, "n%d" % i) + field(4, ops[i % 2])))
    parts.append(field(2, "chain%d" % n))
    parts.append(field(11, value_info("x", dims)))
    parts.append(field(12, value_info("y", dims)))
    graph = b"".join(parts)
    return (vfield(1, 8) + field(2, "smelt-make-chain") + field(7, graph)
            + field(8, field(1, "") + vfield(2, 17)))               # ir 8, opset 17


def write_npy(path, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % len(values)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%df" % len(values), *values))


def main():
    if len(sys.argv) != 3 or not sys.argv[1].isdigit() or int(sys.argv[1]) < 1:
        sys.exit("usage: make_chain.py N OUT.onnx")
    with open(sys.argv[2], "wb") as f:
        f.write(chain_model(int(sys.argv[1])))


if __name__ == "__main__":
    main()
