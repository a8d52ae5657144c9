"""The hosted Session's own If, Loop and Scan (issue 38): a control-flow node whose body holds a
routed node runs here, each body hosted as a graph of its own.

A body (an If branch, a Loop or Scan body) becomes a model, :func:`body_model`: its nodes and
initializers, its inputs, and the values it reads from the scopes around it as more inputs,
typed by the enclosing model's inference. That model is built once, at the Session's build, as
the main graph is (:class:`~._engine.Hosted`): its routed nodes on our kernels, the rest as
onnxruntime segments, the whole body as one ``InferenceSession`` where nothing in it is routed
(an If's other branch). A run of the node here is the spec's loop over those bodies, as our
evaluator's If, Loop and Scan run it (``models/reference/_fixes.py``: the spec's Loop table,
the scan outputs stacked on a new axis, Scan's axes and directions).

What this module does not drive is left to the evaluator (:func:`driver` returns None): Scan-8
(a batch axis and ``sequence_lens``), a body whose outer values onnx's inference gives no type
for, or one onnxruntime cannot load. At run time, a Loop or Scan of zero iterations with scan
outputs is run by the evaluator too (the outputs' empty shapes come from the body's declared
types, which it reads).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx

from ...errors import GatherScatterError, ModelInputError, NodeError, node_label
from ._partition import _graph_free, _no_shape, _sub_model, free_names

__all__ = ["CONTROL_FLOW", "body_model", "driver"]

#: The operators (of onnx's default domain) :func:`driver` runs.
CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})

Values = dict[str, Any]
Reader = Callable[[Values], list[Any]]


def body_model(model: onnx.ModelProto, graph: onnx.GraphProto, types: Mapping[str, onnx.TypeProto]) -> onnx.ModelProto:
    """Return a subgraph as a model of its own, for the hosted engine to build as it builds a main graph.

    Its inputs are the subgraph's inputs that it reads, then the names it reads from the scopes
    around it (each typed by ``types``, the enclosing model's inference); inputs and outputs are
    declared without shapes (a Loop's carried values may change shape from one iteration to the
    next). The model's opsets and functions are the enclosing model's.

    Raises
    ------
    KeyError
        A value read from outside whose type ``types`` does not give.
    """
    body = onnx.GraphProto(name=graph.name or "body")
    body.node.extend(graph.node)
    body.initializer.extend(graph.initializer)
    body.sparse_initializer.extend(graph.sparse_initializer)
    body.value_info.extend(graph.value_info)
    read = {name for node in graph.node for name in free_names(node)} | {o.name for o in graph.output}

    def declare(to: Any, name: str, t: onnx.TypeProto | None) -> None:
        value = to.add()
        value.name = name
        if t is not None and t.WhichOneof("value") is not None:
            value.type.CopyFrom(_no_shape(t))

    for value in graph.input:
        if value.name in read:
            declare(body.input, value.name, value.type if value.type.WhichOneof("value") else types[value.name])
    for name in _graph_free(graph):
        declare(body.input, name, types[name])
    for value in graph.output:
        declare(body.output, value.name, value.type if value.type.WhichOneof("value") else types.get(value.name))
    return _sub_model(model, body)


class _Body:
    """A subgraph built as a model: ``run(scope, formal)`` gives its outputs, in order.

    ``formal`` maps the subgraph's own inputs to their values; ``scope`` holds the values it
    reads from outside, read from the enclosing run's values by :meth:`scope`.
    """

    def __init__(self, hosted: Any, graph: onnx.GraphProto) -> None:
        model = body_model(hosted.model, graph, hosted.types)
        self.hosted = hosted.body(model)
        formal = {v.name for v in graph.input}
        self.outer = reader(hosted, [v.name for v in model.graph.input if v.name not in formal])
        self.outer_names = [v.name for v in model.graph.input if v.name not in formal]
        self.inputs = [v.name for v in graph.input]
        self.outputs = [v.name for v in graph.output]

    def reads(self, names: list[str]) -> frozenset[str]:
        """The inputs a run that asks for the outputs ``names`` reads (an output resolved as an
        alias of an input, :mod:`._aliases`, reads that input and makes nothing)."""
        aliases = self.hosted.aliases
        return self.hosted.reads | {aliases.get(n, n) for n in names}

    def is_input(self, output: str, name: str) -> bool:
        """Whether the body's output ``output`` is its input ``name`` as it was given (the same
        name, or Identity nodes of it)."""
        return self.hosted.aliases.get(output, output) == name

    def scope(self, values: Values) -> Values:
        """The values the body reads from outside, read once per run of the node."""
        return dict(zip(self.outer_names, self.outer(values), strict=True))

    def run(self, scope: Values, formal: Mapping[str, Any] | None = None) -> list[Any]:
        """Run the body on ``scope`` (see :meth:`scope`) and its own inputs ``formal``, which shadow it."""
        values = dict(scope)
        if formal:
            values.update(formal)
        return self.hosted.run(self.outputs, values, owned=True)


def reader(hosted: Any, names: list[str]) -> Reader:
    """Return ``read(values)``: the values of ``names`` as NumPy, an initializer's from the
    model, None for an empty name (an omitted optional input)."""
    c_ortvalue, constants, ndarray = hosted.c_ortvalue, hosted.constants, np.ndarray
    from ._values import to_numpy

    def read(values: Values) -> list[Any]:
        # an empty name is never among the values: None; an ndarray (most values) as it is; a
        # loop, not a comprehension (a call less per routed node)
        got = []
        for n in names:
            if n in values:
                v = values[n]
                got.append(v if type(v) is ndarray else to_numpy(v, c_ortvalue))
            else:
                got.append(constants(n) if n else None)
        return got

    return read


def _scalar(node: onnx.NodeProto, value: Any, what: str) -> Any:
    if type(value) is np.ndarray and value.size == 1:  # each iteration's cond: no conversion
        return value.item()
    array = np.asarray(value)
    if array.size != 1:
        raise NodeError(
            f"{node_label(node.name)} ({node.op_type}, domain ai.onnx): {what} must hold one value, got shape "
            f"{array.shape}",
            op=node.op_type,
            node=node.name,
        )
    return array.reshape(()).item()


def _attribute(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    for attr in node.attribute:
        if attr.name == name:
            return onnx.helper.get_attribute_value(attr)
    return default


def driver(
    hosted: Any, node: onnx.NodeProto, opset: int, evaluated: Callable[[], Callable[[Values], None]]
) -> Callable[[Values], None] | None:
    """Return the call that runs the If, Loop or Scan ``node`` here, its bodies hosted; None
    where this module does not drive it (see the module's docstring).

    ``evaluated()`` builds the evaluator's call of the node, for the runs left to it. The call
    takes the run's values and puts the node's outputs among them.
    """
    if node.op_type not in CONTROL_FLOW or (node.op_type == "Scan" and opset < 9):
        return None
    try:
        if node.op_type == "If":
            return _if(hosted, node)
        return (_loop if node.op_type == "Loop" else _scan)(hosted, node, evaluated)
    except (ModelInputError, KeyError):
        return None  # a body onnxruntime cannot load, or an outer value of no known type
    except GatherScatterError:
        raise  # an invalid node of the family in a body: as the evaluator refuses it


def _if(hosted: Any, node: onnx.NodeProto) -> Callable[[Values], None]:
    then, other = _Body(hosted, _attribute(node, "then_branch")), _Body(hosted, _attribute(node, "else_branch"))
    read_cond = reader(hosted, [node.input[0]])
    outputs = list(node.output)

    def run(values: Values) -> None:
        (cond,) = read_cond(values)
        branch = then if _scalar(node, cond, "If's cond") else other
        values.update(zip(outputs, branch.run(branch.scope(values)), strict=False))

    return run


def _loop(hosted: Any, node: onnx.NodeProto, evaluated: Callable[[], Callable[[Values], None]]) -> Callable:
    body = _Body(hosted, _attribute(node, "body"))
    names_in, n_carried = body.inputs, len(body.inputs) - 2
    n_scan = len(body.outputs) - 1 - n_carried
    given = list(node.input) + [""] * (2 - len(node.input))
    read = reader(hosted, given)
    outputs = list(node.output)
    fallback: list[Callable[[Values], None]] = []
    said = f"Loop's body output {body.outputs[0]!r}"
    # A body whose cond output is its cond input (a Loop made to run M times): the condition
    # never changes, and the body is not asked for it.
    same_cond = body.is_input(body.outputs[0], names_in[1])
    asked = body.outputs[1:] if same_cond else body.outputs
    first = 0 if same_cond else 1
    reads = body.reads(asked)
    reads_iteration, reads_cond = names_in[0] in reads, names_in[1] in reads
    run_body, carried_names = body.hosted.run, names_in[2:]
    whole = same_cond and not n_scan

    def run(values: Values) -> None:
        m, cond, *carried = read(values)
        scope = body.scope(values)
        trips = None if m is None else int(_scalar(node, m, "Loop's M"))
        # The spec's table: without a cond input, the body's cond output does not end the loop.
        condition = True if cond is None else bool(_scalar(node, cond, "Loop's cond"))
        scans: list[list[Any]] = [[] for _ in range(n_scan)]
        iteration = 0
        while (condition or cond is None) and (trips is None or iteration < trips):
            inner = dict(scope)  # the body's own inputs shadow the outer values
            if n_carried == 1:  # most Loops: no zip
                inner[carried_names[0]] = carried[0]
            else:
                inner.update(zip(carried_names, carried, strict=True))
            if reads_iteration:  # a body that reads them (the others never see them)
                inner[names_in[0]] = np.array(iteration, dtype=np.int64)
            if reads_cond:
                inner[names_in[1]] = np.array(condition)
            result = run_body(asked, inner, owned=True)
            if not same_cond:
                condition = bool(_scalar(node, result[0], said))
            if whole:  # the body's results are the carried values, as they are (no slice)
                carried = result
            else:
                carried = result[first : first + n_carried]
                for k in range(n_scan):
                    scans[k].append(result[first + n_carried + k])
            iteration += 1
        if n_scan and not iteration:  # empty scan outputs: their types are the body's declarations
            if not fallback:
                fallback.append(evaluated())
            fallback[0](values)
            return
        results = list(carried)
        for stack in scans:
            tensors = isinstance(stack[0], np.ndarray) or np.isscalar(stack[0])
            results.append(np.stack([np.asarray(v) for v in stack]) if tensors else stack)
        values.update(zip(outputs, results, strict=False))

    return run


def _scan(hosted: Any, node: onnx.NodeProto, evaluated: Callable[[], Callable[[Values], None]]) -> Callable:
    body = _Body(hosted, _attribute(node, "body"))
    m = int(_attribute(node, "num_scan_inputs"))
    n_states = len(node.input) - m
    n_scan = len(body.outputs) - n_states
    in_axes = [int(a) for a in _attribute(node, "scan_input_axes", [0] * m)]
    in_dirs = [int(d) for d in _attribute(node, "scan_input_directions", [0] * m)]
    out_axes = [int(a) for a in _attribute(node, "scan_output_axes", [0] * n_scan)]
    out_dirs = [int(d) for d in _attribute(node, "scan_output_directions", [0] * n_scan)]
    read = reader(hosted, list(node.input))
    outputs = list(node.output)
    fallback: list[Callable[[Values], None]] = []

    def run(values: Values) -> None:
        args = read(values)
        states, scan_inputs = args[:n_states], args[n_states:]
        moved = [np.moveaxis(x, axis, 0) for x, axis in zip(scan_inputs, in_axes, strict=True)]
        lengths = {x.shape[0] for x in moved}
        if len(lengths) != 1:
            raise NodeError(
                f"{node_label(node.name)} (Scan, domain ai.onnx): Scan's scan inputs have different lengths along "
                f"their scan axes: {sorted(lengths)}",
                op="Scan",
                node=node.name,
            )
        length = lengths.pop()
        if n_scan and not length:
            if not fallback:
                fallback.append(evaluated())
            fallback[0](values)
            return
        moved = [x[::-1] if d else x for x, d in zip(moved, in_dirs, strict=True)]
        scans: list[list[Any]] = [[] for _ in range(n_scan)]
        scope = body.scope(values)
        for t in range(length):
            formal = dict(zip(body.inputs[:n_states], states, strict=True))
            formal.update((name, x[t]) for name, x in zip(body.inputs[n_states:], moved, strict=True))
            result = body.run(scope, formal)
            states = result[:n_states]
            for k, value in enumerate(result[n_states:]):
                scans[k].append(value)
        results = list(states)
        for k in range(n_scan):
            stacked = np.stack(scans[k][::-1] if out_dirs[k] else scans[k])
            axis = out_axes[k] + stacked.ndim if out_axes[k] < 0 else out_axes[k]
            results.append(np.moveaxis(stacked, 0, axis))
        values.update(zip(outputs, results, strict=False))

    return run
