#!/usr/bin/env python3
"""Writes fuzz/corpus/onnx/seed_initializers.onnx: a small model that exercises
what the conformance models lack (none of them has initializers): every
TensorProto encoding (raw_data, float_data, int32_data for small types,
int64_data, double_data, uint64_data, empty and scalar tensors), an input that
is also an initializer, nodes out of topological order, value_info with
symbolic dims.  Needs the onnx Python package; the output is committed."""
import os
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

def main():
    inits = [
        numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "W"),
        helper.make_tensor("B", TensorProto.FLOAT, [3], [0.5, -1.0, 2.0]),
        helper.make_tensor("idx", TensorProto.INT64, [2], [0, 2]),
        helper.make_tensor("h", TensorProto.FLOAT16, [2], np.array([1.0, -2.0], np.float16).view(np.uint16).tolist(), raw=False),
        helper.make_tensor("d", TensorProto.DOUBLE, [2], [1.5, 2.5]),
        helper.make_tensor("u", TensorProto.UINT64, [1], [7]),
        helper.make_tensor("b", TensorProto.BOOL, [3], [1, 0, 1]),
        helper.make_tensor("e", TensorProto.FLOAT, [0, 3], []),
        helper.make_tensor("s", TensorProto.INT32, [], [-5]),
    ]
    nodes = [  # y2 is consumed before the node that makes it
        helper.make_node("Gather", ["y2", "idx"], ["y3"], name="gather", axis=1),
        helper.make_node("Add", ["y1", "B"], ["y2"], name="add"),
        helper.make_node("MatMul", ["x", "W"], ["y1"], name="matmul"),
    ]
    graph = helper.make_graph(
        nodes, "seed", [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("B", TensorProto.FLOAT, [3]),
        ],
        [helper.make_tensor_value_info("y3", TensorProto.FLOAT, ["batch", 2])],
        initializer=inits,
        value_info=[helper.make_tensor_value_info("y1", TensorProto.FLOAT, ["batch", None])])
    model = helper.make_model(graph, producer_name="smelt-seed", ir_version=8,
                              opset_imports=[helper.make_opsetid("", 17)])
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "onnx",
                       "seed_initializers.onnx")
    onnx.save(model, out)

if __name__ == "__main__":
    main()
