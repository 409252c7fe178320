#!/usr/bin/env python3
"""Writes small ONNX models for the CLI tests by encoding the protobuf by hand,
so the tests need no onnx package.  Every value is float32 with a fixed shape.

  tiny_onnx.py OUT.onnx SPEC.json

SPEC: {"opset": 20, "inputs": [["x", [2, 3]]], "outputs": [["y", [2, 3]]],
       "nodes": [{"op": "Relu", "name": "n0", "inputs": ["x"], "outputs": ["y"],
                  "attrs": {"approximate": "tanh", "alpha": 0.5, "axis": 1}}]}
Strings in SPEC may hold any character (JSON escapes such as \\u001b)."""
import json
import struct
import sys


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, wire, payload):
    return varint(num << 3 | wire) + payload


def f_int(num, v):
    return field(num, 0, varint(v))


def f_bytes(num, b):
    if isinstance(b, str):
        b = b.encode("utf-8", "surrogateescape")
    return field(num, 2, varint(len(b)) + b)


def value_info(name, shape):
    dims = b"".join(f_bytes(1, f_int(1, d)) for d in shape)  # Dimension.dim_value
    tensor_type = f_int(1, 1) + f_bytes(2, dims)  # elem_type FLOAT, shape
    return f_bytes(1, name) + f_bytes(2, f_bytes(1, tensor_type))


def attribute(name, v):
    a = f_bytes(1, name)
    if isinstance(v, str):
        return a + f_bytes(4, v) + f_int(20, 3)  # s, type STRING
    if isinstance(v, float):
        return a + field(2, 5, struct.pack("<f", v)) + f_int(20, 1)  # f, type FLOAT
    return a + f_int(3, v & (2**64 - 1)) + f_int(20, 2)  # i, type INT


def node(n):
    b = b"".join(f_bytes(1, i) for i in n["inputs"]) + b"".join(f_bytes(2, o) for o in n["outputs"])
    if n.get("name"):
        b += f_bytes(3, n["name"])
    b += f_bytes(4, n["op"])
    for k, v in n.get("attrs", {}).items():
        b += f_bytes(5, attribute(k, v))
    return b


def model(spec):
    g = b"".join(f_bytes(1, node(n)) for n in spec["nodes"]) + f_bytes(2, "g")
    g += b"".join(f_bytes(11, value_info(n, s)) for n, s in spec["inputs"])
    g += b"".join(f_bytes(12, value_info(n, s)) for n, s in spec["outputs"])
    opset = f_bytes(1, "") + f_int(2, spec.get("opset", 17))
    return f_int(1, 8) + f_bytes(7, g) + f_bytes(8, opset)  # ir_version 8, graph, opset_import


if __name__ == "__main__":
    with open(sys.argv[2]) as f:
        spec = json.load(f)
    with open(sys.argv[1], "wb") as f:
        f.write(model(spec))
