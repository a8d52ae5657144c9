"""The hosted Session's partition of a model (issue 25): which main-graph nodes run on our
kernels and why, and the steps that run the rest as maximal onnxruntime segments.

Pure graph logic on ``onnx`` protos; it imports no onnxruntime. ``hosted.py`` builds and runs
what this module plans.

A node is *routed* (runs on our kernels, as :mod:`._routed` calls them)
where :mod:`._ort_routes` says onnxruntime gets it wrong, where the caller routes every
indexing node (``route="all"``), where its body (an If/Loop/Scan subgraph, or a model-local
function it calls) holds a node that must be routed, or where onnxruntime refuses to load it
(found by ``hosted.py`` at build). Every other node runs in onnxruntime.

Stages: a routed node's stage is the largest of its producers'; any other node's stage is the
largest of its producers' plus one behind each routed producer. Stage k runs as one onnxruntime
segment (its unrouted nodes) followed by one step of our kernels (its routed nodes), so the
number of onnxruntime calls per run is one more than the longest chain of routed nodes, the
fewest any order of the graph allows. An onnxruntime node that no routed node depends on runs
in the last segment, so that no segment exists for it alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import onnx

from ...rules.versions import FAMILY, normalize_domain
from .._graph import node_name, subgraphs, walk
from ._routes import NodeFacts, route_reason

__all__ = [
    "PlanStep",
    "free_names",
    "holds_family",
    "route_nodes",
    "segment_model",
    "step_model",
    "steps",
    "value_types",
]

#: ``(domain, op_type)`` of every operator our kernels implement.

Engine = Literal["onnxruntime", "gather_scatter"]


@dataclass(frozen=True)
class PlanStep:
    """One step of a hosted run: ``engine`` runs the main graph's ``nodes`` (their indices),
    reading ``inputs`` and giving ``outputs`` that a later step or the caller needs.
    ``reasons`` holds, for each routed node's index, why it runs on our kernels."""

    engine: Engine
    nodes: tuple[int, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    reasons: Mapping[int, str] = field(default_factory=dict)


def _graph_free(graph: onnx.GraphProto) -> list[str]:
    """Names a subgraph reads from the scopes around it, in first-use order."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    defined |= {t.values.name for t in graph.sparse_initializer}
    free: dict[str, None] = {}
    for node in graph.node:
        for name in free_names(node):
            if name not in defined:
                free[name] = None
        defined.update(node.output)
    free.update((o.name, None) for o in graph.output if o.name and o.name not in defined)
    return list(free)


def holds_family(
    node: onnx.NodeProto,
    functions: Mapping[tuple[str, str], onnx.FunctionProto],
    seen: frozenset[tuple[str, str]] = frozenset(),
) -> bool:
    """Whether ``node`` is of the family, or its body (subgraphs, the model-local function it
    calls, at any depth) holds a node that is."""
    if (normalize_domain(node.domain), node.op_type) in FAMILY:
        return True
    if any(holds_family(inner, functions, seen) for g in subgraphs(node) for inner in g.node):
        return True
    key = (node.domain, node.op_type)
    return (
        key in functions
        and key not in seen
        and any(holds_family(inner, functions, seen | {key}) for inner in functions[key].node)
    )


def free_names(node: onnx.NodeProto) -> list[str]:
    """The values ``node`` reads from its graph: its inputs (absent optional ones left out),
    then the names its subgraphs read from outside themselves, each once, in order."""
    names = dict.fromkeys(name for name in node.input if name)
    for graph in subgraphs(node):
        names.update(dict.fromkeys(_graph_free(graph)))
    return list(names)


def value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """The type of every value onnx's inference knows, in the main graph and its subgraphs.

    Inference runs on a copy whose initializers are graph inputs (types and dims, no data):
    types do not depend on weights, and a model over 2 GiB is inferred as well. Where
    inference fails, the declared types (inputs, outputs, value_info) are all there is.
    """
    graph = onnx.GraphProto(name=model.graph.name)
    graph.node.extend(model.graph.node)
    graph.input.extend(model.graph.input)
    graph.output.extend(model.graph.output)
    graph.value_info.extend(model.graph.value_info)
    declared = {v.name for v in graph.input}
    for tensor in model.graph.initializer:
        if tensor.name not in declared:
            graph.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
    light = onnx.ModelProto(ir_version=model.ir_version)
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    light.graph.CopyFrom(graph)
    types: dict[str, onnx.TypeProto] = {}
    for _ in range(len(model.graph.node) + 1):
        # Inference is a help, not a requirement: where it fails, the declared types stand.
        with contextlib.suppress(Exception):
            light = onnx.shape_inference.infer_shapes(light, check_type=False, strict_mode=False)
        for body, _, node in walk(light.graph):  # the main graph and its subgraphs
            if node is None and isinstance(g := body.proto, onnx.GraphProto):
                for value in (*g.input, *g.output, *g.value_info):
                    if value.type.WhichOneof("value") is not None:
                        types.setdefault(value.name, value.type)
        filled = _family_output_types(light.graph, types)
        if not filled:
            break
        # onnx has no inference for some of the family (com.microsoft GatherBlockQuantized): its
        # outputs' types, declared, let onnx infer the values after it.
        light.graph.value_info.extend(filled)
    return types


def _family_output_types(graph: onnx.GraphProto, types: dict[str, onnx.TypeProto]) -> list[onnx.ValueInfoProto]:
    """Declare the element type of each main-graph family node's output that ``types`` lacks,
    where the input it follows is known: GatherBlockQuantized's output is its scales' type (T2),
    every other operator's its data's. Returns the declarations (also put into ``types``)."""
    filled = []
    for node in graph.node:
        if (normalize_domain(node.domain), node.op_type) not in FAMILY or not node.output or not node.output[0]:
            continue
        if node.output[0] in types:
            continue
        source = 2 if node.op_type == "GatherBlockQuantized" else 0
        elem = elem_type_name(types.get(node.input[source])) if len(node.input) > source else None
        if elem is None:
            continue
        value = onnx.ValueInfoProto(name=node.output[0])
        value.type.tensor_type.elem_type = types[node.input[source]].tensor_type.elem_type
        types[node.output[0]] = value.type
        filled.append(value)
    return filled


def elem_type_name(t: onnx.TypeProto | None) -> str | None:
    """A tensor type's element type as the rules name it (``'float'``, ``'bfloat16'``,
    ``'string'``...), or None where unknown or not a tensor."""
    if t is None or t.WhichOneof("value") != "tensor_type" or not t.tensor_type.elem_type:
        return None
    return onnx.TensorProto.DataType.Name(t.tensor_type.elem_type).lower()


def _rank(t: onnx.TypeProto | None) -> int | None:
    """A tensor type's rank, or None where unknown or not a tensor."""
    if t is None or t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField("shape"):
        return None
    return len(t.tensor_type.shape.dim)


def _reduction(node: onnx.NodeProto) -> str:
    for attr in node.attribute:
        if attr.name == "reduction":
            return attr.s.decode("utf-8", "replace")
    return "none"


def _batch_dims(node: onnx.NodeProto) -> int:
    for attr in node.attribute:
        if attr.name == "batch_dims":
            return int(attr.i)
    return 0


# Where inference gives no data type, every type a rule might name is tried, in this order.
_UNKNOWN_TYPES = tuple(
    onnx.TensorProto.DataType.Name(elem).lower() for elem in sorted(onnx.TensorProto.DataType.values()) if elem
)


def _own_reason(
    node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto], threads: int, ort_version: str, route: str
) -> str | None:
    domain = normalize_domain(node.domain)
    if (domain, node.op_type) not in FAMILY:
        return None
    if route == "all":
        return "route='all': every indexing node runs on our kernels"
    dtype = elem_type_name(types.get(node.input[0])) if node.input else None
    out = elem_type_name(types.get(node.output[0])) if node.output else None
    rank = _rank(types.get(node.input[0])) if node.input else None
    facts = NodeFacts(domain, node.op_type, dtype, _reduction(node), threads, out, rank, _batch_dims(node))
    if dtype is None:
        for guess in _UNKNOWN_TYPES:
            reason = route_reason(replace(facts, dtype=guess), ort_version)
            if reason is not None:
                return f"onnx's inference gives no type for its data, and for {guess} data: {reason}"
    return route_reason(facts, ort_version)


def _function_types(
    function: onnx.FunctionProto, call: onnx.NodeProto, types: Mapping[str, onnx.TypeProto], model: onnx.ModelProto
) -> dict[str, onnx.TypeProto]:
    """The types of a model-local function's values at one call: its body as a graph whose
    inputs take the call's argument types, through :func:`value_types` (attributes the body
    references stay unresolved: a value that depends on one stays unknown)."""
    body = onnx.ModelProto(ir_version=model.ir_version)
    body.opset_import.extend(function.opset_import or model.opset_import)
    body.functions.extend(model.functions)
    body.graph.name = function.name
    body.graph.node.extend(function.node)
    for formal, actual in zip(function.input, call.input, strict=False):
        value = body.graph.input.add()
        value.name = formal
        if actual and actual in types:
            value.type.CopyFrom(types[actual])
    body.graph.output.extend(onnx.ValueInfoProto(name=name) for name in function.output)
    return value_types(body)


def _reason(
    node: onnx.NodeProto,
    types: Mapping[str, onnx.TypeProto],
    functions: Mapping[tuple[str, str], onnx.FunctionProto],
    threads: int,
    ort_version: str,
    route: str,
    model: onnx.ModelProto,
    seen: frozenset[tuple[str, str]] = frozenset(),
) -> str | None:
    """Why ``node`` must run on our kernels, or None; a node whose body holds such a node
    must too (its body then runs hosted in our driver, :mod:`._bodies`, or in our evaluator)."""
    reason = _own_reason(node, types, threads, ort_version, route)
    if reason is not None:
        return reason
    key = (node.domain, node.op_type)
    bodies: list[tuple[str, Iterable[onnx.NodeProto], Mapping[str, onnx.TypeProto]]] = [
        ("subgraph", g.node, types) for g in subgraphs(node)
    ]
    if key in functions and key not in seen:
        bodies.append(("function", functions[key].node, _function_types(functions[key], node, types, model)))
        seen = seen | {key}
    for kind, nodes, scope in bodies:
        for inner in nodes:
            inner_reason = _reason(inner, scope, functions, threads, ort_version, route, model, seen)
            if inner_reason is not None:
                label = inner.name or inner.op_type
                return f"its {kind} holds {inner.op_type} node '{label}', which must run on our kernels: {inner_reason}"
    return None


def route_nodes(
    model: onnx.ModelProto,
    types: Mapping[str, onnx.TypeProto],
    *,
    threads: int,
    ort_version: str,
    route: str,
) -> dict[int, str]:
    """The main-graph nodes (by index) that run on our kernels, each with its reason.

    ``route``: ``"needed"`` routes the nodes :mod:`._ort_routes` names for onnxruntime
    ``ort_version`` at ``threads`` intra-op threads (and, where inference gives no data type,
    those it would name for some type); ``"all"`` every node of the family; both route a
    control-flow node or function call whose body holds a routed node.
    """
    functions = {(f.domain, f.name): f for f in model.functions}
    routed = {}
    for index, node in enumerate(model.graph.node):
        reason = _reason(node, types, functions, threads, ort_version, route, model)
        if reason is not None:
            routed[index] = reason
    return routed


def steps(model: onnx.ModelProto, routed: Mapping[int, str]) -> list[PlanStep]:
    """The steps of a run: per stage, its onnxruntime segment, then its routed nodes.

    Each step's ``outputs`` are the values it makes that a later step reads or the graph
    returns; its ``inputs`` what it reads from the graph's inputs or earlier steps (the
    initializers a step reads are among them).
    """
    nodes = model.graph.node
    producer: dict[str, int] = {}
    stage: list[int] = []
    reads: list[list[str]] = []
    for index, node in enumerate(nodes):
        names = free_names(node)
        reads.append(names)
        level = 0
        for name in names:
            p = producer.get(name)
            if p is not None:
                level = max(level, stage[p] + (1 if p in routed and index not in routed else 0))
        stage.append(level)
        producer.update((name, index) for name in node.output if name)
    _defer(nodes, routed, reads, producer, stage)
    groups: list[tuple[Engine, list[int]]] = []
    for level in range(max(stage, default=0) + 1):
        for engine, want in (("onnxruntime", False), ("gather_scatter", True)):
            members = [i for i in range(len(nodes)) if stage[i] == level and (i in routed) == want]
            if members:
                groups.append((engine, members))  # type: ignore[arg-type]
    # A Constant that an onnxruntime segment reads from another step is made again inside the
    # segment: onnxruntime folds what it feeds (an If on a constant condition runs as its
    # branch, whose outputs an exporter may declare with shapes that hold only there), and the
    # value need not cross a boundary.
    constants = {name: i for i, node in enumerate(nodes) if _is_constant(node) for name in node.output if name}
    for engine, members in groups:
        if engine == "onnxruntime":
            have = set(members)
            extra = {constants[n] for i in members for n in reads[i] if n in constants} - have
            members[:] = sorted(have | extra)
    steps_io = []
    for _, members in groups:
        made: dict[str, None] = {}
        read: dict[str, None] = {}
        for i in members:
            read.update((n, None) for n in reads[i] if n not in made)
            made.update((n, None) for n in nodes[i].output if n)
        steps_io.append((read, made))
    # What each step must hand on: what later steps read, and the graph's outputs.
    needed_after: list[set[str]] = []
    later = {o.name for o in model.graph.output}
    for read, _ in reversed(steps_io):
        needed_after.append(set(later))
        later.update(read)
    needed_after.reverse()
    plan = []
    for (engine, members), (read, made), after in zip(groups, steps_io, needed_after, strict=True):
        outputs = tuple(n for n in made if n in after)
        if engine == "onnxruntime" and not outputs:
            continue  # nothing it makes is read later (Constants made again where they are read)
        reasons = {i: routed[i] for i in members if i in routed}
        plan.append(PlanStep(engine, tuple(members), tuple(read), outputs, reasons))
    return plan


def _defer(
    nodes: Sequence[onnx.NodeProto],
    routed: Mapping[int, str],
    reads: list[list[str]],
    producer: Mapping[str, int],
    stage: list[int],
) -> None:
    """Move each onnxruntime node that no routed node depends on into the last onnxruntime
    segment (``stage`` changed in place), rather than a segment that may exist only for it (a
    Loop body's ``cond`` Identity beside a routed scatter: one onnxruntime call fewer per
    iteration). Segments only get fewer, and the order holds: what such a node reads is made
    in its stage or an earlier one, and what it makes no routed node reads.
    """
    last = max((stage[i] for i in range(len(nodes)) if i not in routed), default=None)
    if last is None:
        return
    feeds_routed = set()
    pending = list(routed)
    while pending:  # every node a routed node depends on, through any chain
        for name in reads[pending.pop()]:
            p = producer.get(name)
            if p is not None and p not in feeds_routed:
                feeds_routed.add(p)
                pending.append(p)
    for i in range(len(nodes)):
        if i not in routed and i not in feeds_routed:
            stage[i] = last


def _is_constant(node: onnx.NodeProto) -> bool:
    """A Constant node (no inputs): cheap to make again in each segment that reads it."""
    return node.op_type == "Constant" and normalize_domain(node.domain) == "" and not any(node.input)


def _no_shape(t: onnx.TypeProto) -> onnx.TypeProto:
    """``t`` with every tensor shape left out (unknown rank), element types kept."""
    out = onnx.TypeProto()
    out.CopyFrom(t)

    def strip(x: onnx.TypeProto) -> None:
        kind = x.WhichOneof("value")
        if kind in ("tensor_type", "sparse_tensor_type"):
            getattr(x, kind).ClearField("shape")
        elif kind == "sequence_type":
            strip(x.sequence_type.elem_type)
        elif kind == "optional_type":
            strip(x.optional_type.elem_type)
        elif kind == "map_type":
            strip(x.map_type.value_type)

    strip(out)
    return out


def _sub_model(model: onnx.ModelProto, graph: onnx.GraphProto) -> onnx.ModelProto:
    out = onnx.ModelProto(ir_version=model.ir_version, producer_name="gather_scatter hosted segment")
    out.opset_import.extend(model.opset_import)
    out.functions.extend(model.functions)
    out.graph.CopyFrom(graph)
    return out


def segment_model(
    model: onnx.ModelProto, step: PlanStep, types: Mapping[str, onnx.TypeProto | None], name: str
) -> onnx.ModelProto:
    """The onnxruntime model of ``step``: its nodes (a node without a name gets its label,
    so that onnxruntime's errors name it), the initializers they read (external data stays a
    reference to its file), inputs and outputs declared with ``types`` without shapes (onnx's
    inference of shapes is not always right; onnxruntime infers its own); an output of unknown
    type is declared without one, which onnxruntime accepts.

    Raises
    ------
    KeyError
        An input of the step whose type ``types`` does not give.
    """
    graph = onnx.GraphProto(name=name)
    for index in step.nodes:
        node = graph.node.add()
        node.CopyFrom(model.graph.node[index])
        if not node.name:
            node.name = node_name(node, index)
    reads = set(step.inputs)
    fed = {v.name for v in model.graph.input}
    for tensor in model.graph.initializer:
        if tensor.name in reads:
            graph.initializer.append(tensor)
    for sparse in model.graph.sparse_initializer:
        if sparse.values.name in reads:
            graph.sparse_initializer.append(sparse)
    held = {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}
    for name in step.inputs:
        if name in held and name not in fed:
            continue
        t = types[name]
        if t is None:
            raise KeyError(name)
        value = graph.input.add()
        value.name = name
        value.type.CopyFrom(_no_shape(t))
    for name in step.outputs:
        value = graph.output.add()
        value.name = name
        t = types.get(name)
        if t is not None:
            value.type.CopyFrom(_no_shape(t))
    return _sub_model(model, graph)


def step_model(model: onnx.ModelProto, step: PlanStep) -> onnx.ModelProto:
    """The model our evaluator runs for a routed ``step``: its nodes, every input (the
    initializers it reads too) fed at run time, its outputs; types are not declared (the
    evaluator needs none)."""
    graph = onnx.GraphProto(name="routed")
    for index in step.nodes:
        graph.node.add().CopyFrom(model.graph.node[index])
    graph.input.extend(onnx.ValueInfoProto(name=name) for name in step.inputs)
    graph.output.extend(onnx.ValueInfoProto(name=name) for name in step.outputs)
    return _sub_model(model, graph)
