"""A model's graph as the rest of ``models/`` reads it: a node's name in a plan, and its subgraphs."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import onnx

__all__ = ["all_nodes", "node_name", "subgraphs"]


def node_name(node: onnx.NodeProto, index: int) -> str:
    """The node's name, or ``'<op_type>#<index>'`` for a node with none (``index``: its place in
    its graph): how :class:`~gather_scatter.models.plan.Plan` names the nodes it lists."""
    return node.name or f"{node.op_type}#{index}"


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The node's subgraphs (If branches, Loop/Scan bodies), in attribute order."""
    for attr in node.attribute:
        if attr.HasField("g"):
            yield attr.g
        yield from attr.graphs


def all_nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    """Every node of ``model``: its main graph's, each subgraph's (depth first, after the node
    that holds it) and each model-local function's."""

    def of_nodes(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.NodeProto]:
        for node in nodes:
            yield node
            for attr in node.attribute:
                for graph in [attr.g, *attr.graphs]:
                    yield from of_nodes(graph.node)

    yield from of_nodes(model.graph.node)
    for function in model.functions:
        yield from of_nodes(function.node)
