"""Time infer_model_shapes on a chain of com.microsoft GatherND -> Relu pairs (onnx's own
inference skips the GatherND, so every Relu needs our rule's output first).

    python benchmarks/bench_shape_inference.py [NODES ...]     # default: 100 200 800 3200

Prints the node count, the wall time of one call, and onnx's own infer_shapes on the same
model for comparison. A measurement, never an assertion.
"""

from __future__ import annotations

import sys
import time

import onnx
import onnx.helper as oh
from onnx import TensorProto

from gather_scatter import infer_model_shapes


def chain(nodes: int) -> onnx.ModelProto:
    layers, prev = [], "data"
    for i in range(nodes // 2):
        layers += [oh.make_node("GatherND", [prev, "idx"], [f"g{i}"], name=f"g{i}", domain="com.microsoft"),
                   oh.make_node("Relu", [f"g{i}"], [f"r{i}"])]
        prev = f"r{i}"
    graph = oh.make_graph(layers, "chain", [oh.make_tensor_value_info("data", TensorProto.FLOAT, ["N", 5]),
                                            oh.make_tensor_value_info("idx", TensorProto.INT64, ["N", 1])],
                          [oh.make_tensor_value_info(prev, TensorProto.FLOAT, None)])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18), oh.make_opsetid("com.microsoft", 1)])


def main(argv: list[str]) -> int:
    for nodes in [int(a) for a in argv] or [100, 200, 800, 3200]:
        model = chain(nodes)
        start = time.perf_counter()
        out = infer_model_shapes(model)
        ours = time.perf_counter() - start
        start = time.perf_counter()
        onnx.shape_inference.infer_shapes(model)
        theirs = time.perf_counter() - start
        last = out.graph.output[0].type.tensor_type.shape.dim
        shape = tuple(d.dim_param or d.dim_value for d in last)
        print(f"{nodes:6d} nodes: infer_model_shapes {ours * 1e3:9.1f} ms   onnx infer_shapes {theirs * 1e3:7.1f} ms"
              f"   last output {shape}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
