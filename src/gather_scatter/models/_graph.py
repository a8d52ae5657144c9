"""A model's graph as the rest of ``models/`` reads it: the one walk over its bodies (the main
graph, subgraphs, model-local functions) and their nodes, a node's name in a plan, and its
subgraphs.

:func:`walk` is the only recursion over ``node.attribute`` → ``attr.g`` / ``attr.graphs`` and
over ``model.functions``; everything that visits every node or graph of a model goes through it
(:func:`all_nodes` for the nodes alone).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

import onnx

from ..rules.versions import normalize_domain

__all__ = ["Body", "all_nodes", "imported_opsets", "node_name", "subgraphs", "walk"]


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


def imported_opsets(proto: onnx.ModelProto | onnx.FunctionProto) -> dict[str, int]:
    """The opsets a model or function imports, ``{domain: version}``, the domain normalized
    (``''`` for ai.onnx); where a domain is imported twice, the last import."""
    return {normalize_domain(o.domain): o.version for o in proto.opset_import}


@dataclass(frozen=True)
class Body:
    """A list of nodes that :func:`walk` enters.

    Attributes
    ----------
    proto : onnx.GraphProto or onnx.FunctionProto
        The graph (the main graph, or a node's subgraph) or the model-local function.
    kind : {'graph', 'subgraph', 'function'}
        The main graph (the graph the walk started at), a subgraph (an If branch, a Loop or Scan
        body; in the main graph or in a function) or a function's body.
    opsets : Mapping[str, int]
        The opsets its nodes take (:func:`imported_opsets`): the model's in the main graph and its
        subgraphs, the function's own imports in a function and its subgraphs; none where the
        walk started at a graph.
    where : str
        Where it is, as messages name it: ``graph``, ``functions[0] ('f')``,
        ``graph.node[2] ('loop').attribute 'body'.g``, ``... .attribute 'branches'.graphs[1]``.
    """

    proto: onnx.GraphProto | onnx.FunctionProto
    kind: Literal["graph", "subgraph", "function"]
    opsets: Mapping[str, int]
    where: str

    def node_where(self, index: int, node: onnx.NodeProto) -> str:
        """Where its node ``index`` is, as messages name it: ``graph.node[3] ('read')``
        (``graph.node[3]`` for a node with no name)."""
        return f"{self.where}.node[{index}]" + (f" ({node.name!r})" if node.name else "")


def walk(
    proto: onnx.ModelProto | onnx.FunctionProto | onnx.GraphProto,
) -> Iterator[tuple[Body, int, onnx.NodeProto | None]]:
    """Every body and node of ``proto``, in the order they stand in it.

    Each body is given as ``(body, -1, None)`` as it is entered, then each of its nodes as
    ``(body, index, node)``; a node's subgraphs are entered right after it (depth first, in
    attribute order), before the next node. A model: its main graph, then each model-local
    function's body; a function: its body; a graph: itself. The walk reads a node's subgraphs
    when the caller asks for the step after the node: a caller may change the node (its domain,
    its tensors) or a body's fields other than its nodes, and may stop at the first fault.

    Examples
    --------
    >>> import onnx.helper as oh
    >>> branch = oh.make_graph([oh.make_node("Identity", ["x"], ["y"])], "branch", [], [])
    >>> pick = oh.make_node("If", ["c"], ["y"], name="pick", then_branch=branch, else_branch=branch)
    >>> for body, index, node in walk(oh.make_model(oh.make_graph([pick], "main", [], []))):
    ...     print(body.where if node is None else f"  {index}: {node.op_type}")
    graph
      0: If
    graph.node[0] ('pick').attribute 'else_branch'.g
      0: Identity
    graph.node[0] ('pick').attribute 'then_branch'.g
      0: Identity
    """

    def enter(body: Body) -> Iterator[tuple[Body, int, onnx.NodeProto | None]]:
        yield body, -1, None
        for index, node in enumerate(body.proto.node):
            yield body, index, node
            for attr in node.attribute:
                inner = [(".g", attr.g)] if attr.HasField("g") else []
                inner += [(f".graphs[{j}]", graph) for j, graph in enumerate(attr.graphs)]
                for suffix, graph in inner:
                    where = f"{body.node_where(index, node)}.attribute {attr.name!r}{suffix}"
                    yield from enter(Body(graph, "subgraph", body.opsets, where))

    if isinstance(proto, onnx.GraphProto):
        yield from enter(Body(proto, "graph", {}, "graph"))
    elif isinstance(proto, onnx.FunctionProto):
        yield from enter(Body(proto, "function", imported_opsets(proto), f"function {proto.name!r}"))
    else:
        yield from enter(Body(proto.graph, "graph", imported_opsets(proto), "graph"))
        for i, function in enumerate(proto.functions):
            where = f"functions[{i}] ({function.name!r})"
            yield from enter(Body(function, "function", imported_opsets(function), where))


def all_nodes(proto: onnx.ModelProto | onnx.FunctionProto | onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of ``proto`` (a model, function or graph), as :func:`walk` visits them: the main
    graph's, each subgraph's (depth first, after the node that holds it) and each model-local
    function's."""
    for _, _, node in walk(proto):
        if node is not None:
            yield node
