#!/usr/bin/env python3
"""Writes onnx_manifest.txt: for every model under SHARED/conformance/onnx-node
and SHARED/models, what the onnx Python package reads from it, in the format
test_onnx_load.c compares against (one line per model):

  DIR ir=N opset=N nodes=N inits=N in=V;V... out=V;V...

V is name:type:shape: type is the element type number, wrapped as seq(T) or
opt(T); shape is d,d,... (numbers, symbol names, ? for unknown), * for no
shape, and empty for a scalar.  Models the reader rejects on purpose are
listed with 'unsupported'.  usage: make_onnx_manifest.py SHARED > onnx_manifest.txt"""
import glob
import os
import sys

import onnx

def vtype(t):
    w = t.WhichOneof("value")
    if w == "tensor_type":
        tt = t.tensor_type
        if not tt.HasField("shape"):
            shape = "*"
        else:
            shape = ",".join(
                str(d.dim_value) if d.HasField("dim_value")
                else (d.dim_param if d.dim_param else "?") for d in tt.shape.dim)
        return "%d:%s" % (tt.elem_type, shape)
    if w == "sequence_type":
        return "seq(%s)" % vtype(t.sequence_type.elem_type).split(":")[0] + ":*"
    if w == "optional_type":
        inner = vtype(t.optional_type.elem_type)
        head, _, shape = inner.partition(":")
        return "opt(%s):%s" % (head, shape)
    return "0:*"

def unsupported(m):
    def bad_type(t):
        w = t.WhichOneof("value")
        if w == "tensor_type": return t.tensor_type.elem_type > 26  # smelt knows types up to INT2
        if w == "sequence_type": return bad_type(t.sequence_type.elem_type)
        if w == "optional_type": return bad_type(t.optional_type.elem_type)
        return w is not None
    def walk(g):
        for v in list(g.input) + list(g.output) + list(g.value_info):
            if bad_type(v.type): return True
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == 8: return True
                if a.type == onnx.AttributeProto.GRAPH and walk(a.g): return True
                if a.type == onnx.AttributeProto.GRAPHS and any(walk(x) for x in a.graphs): return True
        return False
    return walk(m.graph)

def main():
    shared = sys.argv[1]
    paths = sorted(glob.glob(os.path.join(shared, "conformance/onnx-node/*/model.onnx")))
    paths += sorted(glob.glob(os.path.join(shared, "models/*/model.onnx")))
    for p in paths:
        d = os.path.relpath(os.path.dirname(p), shared)
        m = onnx.load(p, load_external_data=False)
        if unsupported(m):
            print(d, "unsupported")
            continue
        g = m.graph
        inits = {i.name for i in g.initializer}
        opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), -1)
        ins = ";".join("%s:%s" % (v.name, vtype(v.type)) for v in g.input if v.name not in inits)
        outs = ";".join("%s:%s" % (v.name, vtype(v.type)) for v in g.output)
        print("%s ir=%d opset=%d nodes=%d inits=%d in=%s out=%s" % (
            d, m.ir_version, opset, len(g.node), len(g.initializer), ins, outs))

if __name__ == "__main__":
    main()
