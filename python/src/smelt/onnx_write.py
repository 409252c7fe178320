"""A minimal ONNX ModelProto writer (protobuf wire format, no dependency on
the onnx package), for the graphs smelt.fx_lower builds.

Only the fields smelt reads are written: ModelProto (ir_version, opset_import,
producer_name, graph), GraphProto (node, name, initializer, input, output),
NodeProto (input, output, name, op_type, attribute, domain), AttributeProto
(f, i, s, t, floats, ints), TensorProto (dims, data_type, name, raw_data) and
ValueInfoProto with a tensor type of static or symbolic dims.  Repeated
scalars are written unpacked, as proto2 (onnx.proto's syntax) does.
"""
from __future__ import annotations

import struct
from typing import Iterable, List, Optional, Sequence, Tuple, Union

#: ONNX TensorProto.DataType for numpy dtype names
DTYPES = {"float32": 1, "uint8": 2, "int8": 3, "uint16": 4, "int16": 5, "int32": 6, "int64": 7,
          "bool": 9, "float16": 10, "float64": 11, "uint32": 12, "uint64": 13}

Dim = Union[int, str]


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint((field << 3) | wire)


def _len(field: int, payload: bytes) -> bytes:
    return _key(field, 2) + _varint(len(payload)) + payload


def _int(field: int, v: int) -> bytes:
    return _key(field, 0) + _varint(int(v))


def _str(field: int, s: str) -> bytes:
    return _len(field, s.encode())


def tensor(name: str, dtype: str, dims: Sequence[int], raw: bytes) -> bytes:
    """A TensorProto with raw_data (little-endian, C order)."""
    return (b"".join(_int(1, d) for d in dims) + _int(2, DTYPES[dtype]) + _str(8, name) +
            _len(9, raw))


def attribute(name: str, value) -> bytes:
    """An AttributeProto: int, float, str, bytes (a TensorProto) or a list of
    ints or floats (by the first element; an empty list is ints)."""
    out = _str(1, name)
    if isinstance(value, bool) or isinstance(value, int):
        return out + _int(3, value) + _int(20, 2)
    if isinstance(value, float):
        return out + _key(2, 5) + struct.pack("<f", value) + _int(20, 1)
    if isinstance(value, str):
        return out + _len(4, value.encode()) + _int(20, 3)
    if isinstance(value, (bytes, bytearray)):
        return out + _len(5, bytes(value)) + _int(20, 4)
    vals = list(value)
    if vals and isinstance(vals[0], float):
        return out + b"".join(_key(7, 5) + struct.pack("<f", v) for v in vals) + _int(20, 6)
    return out + b"".join(_int(8, v) for v in vals) + _int(20, 7)


def node(op: str, inputs: Iterable[str], outputs: Iterable[str], name: str = "", domain: str = "",
         **attrs) -> bytes:
    """A NodeProto; attributes as keyword arguments (None: left out)."""
    out = b"".join(_str(1, i) for i in inputs) + b"".join(_str(2, o) for o in outputs)
    if name:
        out += _str(3, name)
    out += _str(4, op)
    out += b"".join(_len(5, attribute(k, v)) for k, v in attrs.items() if v is not None)
    if domain:
        out += _str(7, domain)
    return out


def value_info(name: str, dtype: str, shape: Optional[Sequence[Dim]]) -> bytes:
    """A ValueInfoProto of a tensor type; dims are ints or symbolic names."""
    t = _int(1, DTYPES[dtype])
    if shape is not None:
        dims = b"".join(_len(1, _int(1, d) if isinstance(d, int) else _str(2, d)) for d in shape)
        t += _len(2, dims)
    return _str(1, name) + _len(2, _len(1, t))


def model(nodes: List[bytes], inputs: List[bytes], outputs: List[bytes],
          initializers: List[bytes], opsets: Sequence[Tuple[str, int]], graph_name: str = "g",
          ir_version: int = 8, producer: str = "smelt.fx_lower") -> bytes:
    """The ModelProto's bytes."""
    g = (b"".join(_len(1, n) for n in nodes) + _str(2, graph_name) +
         b"".join(_len(5, t) for t in initializers) + b"".join(_len(11, i) for i in inputs) +
         b"".join(_len(12, o) for o in outputs))
    ops = b"".join(_len(8, (_str(1, d) if d else b"") + _int(2, v)) for d, v in opsets)
    return _int(1, ir_version) + _str(2, producer) + ops + _len(7, g)
