"""The hosted Session's routed steps (issue 38): each routed node run by the cheapest exact call,
chosen once at build, so that a run does only that call and the hand-off of its values.

- A node of the family: its kernel, the version and attributes resolved at build
  (:func:`~gather_scatter.models.reference.node_runner`, as our evaluator resolves them).
- An If, Loop or Scan whose body holds a routed node: our driver of it (:mod:`._bodies`), each
  body hosted as a graph of its own (onnxruntime segments and our kernels).
- Any other routed node (one onnxruntime refuses to load, a model-local function whose body
  holds a routed node, what :mod:`._bodies` does not drive), and every node where the Session
  was given operators of its own (``new_ops``: the checker's capturing ones): our evaluator,
  one per node, as every routed step ran before.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx

from ...rules.versions import FAMILY, normalize_domain
from .._graph import imported_opsets
from ._bodies import Values, driver, reader
from ._partition import PlanStep, free_names, step_model

__all__ = ["RoutedStep"]


class RoutedStep:
    """The routed nodes of one step, run in graph order, each by the call chosen at build."""

    def __init__(self, hosted: Any, step: PlanStep, strict: bool) -> None:
        opsets = imported_opsets(hosted.model)
        self.outputs = list(step.outputs)
        self.calls = [_call(hosted, index, opsets, strict) for index in step.nodes]
        # run(values): the step's nodes, their outputs put among values; one node's call itself
        # (most steps: one frame less per run)
        self.run: Callable[[Values], None] = self.calls[0] if len(self.calls) == 1 else self._run_all

    def _run_all(self, values: Values) -> None:
        for call in self.calls:
            call(values)


def _call(hosted: Any, index: int, opsets: dict[str, int], strict: bool) -> Callable[[Values], None]:
    node = hosted.model.graph.node[index]
    domain = normalize_domain(node.domain)

    def evaluated() -> Callable[[Values], None]:  # for the runs a driver leaves to the evaluator
        return _evaluated(hosted, index, strict, quiet=True)

    if hosted.new_ops:
        return _evaluated(hosted, index, strict)
    if (domain, node.op_type) in FAMILY:
        from ..reference import node_runner

        kernel = node_runner(node, opsets.get(domain, 1), strict=strict)
        read = reader(hosted, list(node.input))
        output = node.output[0]
        if node.op_type in _PLANNED and len(node.input) == 3:
            return _planned(node, opsets.get(domain, 1), strict, kernel, read, output)

        def run(values: Values) -> None:
            values[output] = kernel(*read(values))[0]

        return run
    if domain == "":
        call = driver(hosted, node, opsets.get("", 1), evaluated)
        if call is not None:
            return call
    return _evaluated(hosted, index, strict)


#: The operators whose small calls of an accepted signature run a plan (:func:`~gather_scatter._calls.planned_scatter`).
_PLANNED = frozenset({"ScatterND", "ScatterElements"})


def _planned(
    node: onnx.NodeProto, opset: int, strict: bool, kernel: Callable, read: Callable, output: str
) -> Callable[[Values], None]:
    """A ScatterND or ScatterElements that calls its signature's plan itself (~3 us) once the
    kernel's path has made one, not through the kernel's layers (node_runner's call, the
    kernel's signature lookup: ~2 us more a call, more in a run whose other steps evict
    them from the caches). The plan is what the kernel's path would run for that signature;
    any other call, a None from the plan (a path it does not take) or an error (the kernel's
    path raises it, named after the node) goes the kernel's way."""
    from ..._calls import fast_output, planned_scatter
    from ..._nodes import resolve_node

    with warnings.catch_warnings():  # node_runner gave them already
        warnings.simplefilter("ignore")
        spec, attributes = resolve_node(node.op_type, node.attribute, opset=opset, domain=node.domain, strict=strict)
    ndarray = np.ndarray
    held: list[Any] = [None, None, 0]  # the signature (dtypes, shapes), its plan, the lookups made

    data_name, indices_name, updates_name = node.input

    def run(values: Values) -> None:
        plan = held[1]
        if plan is not None:
            # the values themselves, not read(values)'s list (a call less): a name not among
            # them (an initializer) or a value that is not an ndarray takes the kernel's way
            data, indices, updates = values.get(data_name), values.get(indices_name), values.get(updates_name)
            if (
                type(data) is ndarray
                and type(indices) is ndarray
                and type(updates) is ndarray
                and (data.dtype, indices.dtype, updates.dtype, data.shape, indices.shape, updates.shape) == held[0]
                and fast_output(data.nbytes)
            ):
                try:
                    result = plan(spec, data, indices, updates)
                except Exception:  # noqa: BLE001 - the kernel's path raises it with its facts, named
                    result = None
                if result is not None:
                    values[output] = result
                    return
        args = read(values)
        data, indices, updates = args
        values[output] = kernel(*args)[0]
        if type(data) is ndarray and type(indices) is ndarray and type(updates) is ndarray:
            signature = (data.dtype, indices.dtype, updates.dtype, data.shape, indices.shape, updates.shape)
            if signature != held[0]:
                held[:] = [signature, None, 0]
            if held[1] is None and held[2] < 3:  # the kernel's path plans on a signature's 2nd call
                held[1], held[2] = planned_scatter(spec, (data, indices, updates), attributes), held[2] + 1

    return run


def _evaluated(hosted: Any, index: int, strict: bool, quiet: bool = False) -> Callable[[Values], None]:
    """The node run by our evaluator, alone (its subgraphs and functions in onnx.reference and
    our kernels); ``quiet``: built during a run, its OffSpecWarnings given at build already."""
    from ..reference import Evaluator

    node: onnx.NodeProto = hosted.model.graph.node[index]
    single = PlanStep("gather_scatter", (index,), tuple(free_names(node)), tuple(n for n in node.output if n))
    with warnings.catch_warnings():
        if quiet:
            warnings.simplefilter("ignore")
        evaluator = Evaluator(
            step_model(hosted.model, single), new_ops=hosted.new_ops or None, strict=strict, check=False
        )
    inputs, outputs = single.inputs, list(single.outputs)
    read = reader(hosted, list(inputs))

    def run(values: Values) -> None:
        feeds = dict(zip(inputs, read(values), strict=True))
        values.update(zip(outputs, evaluator.run(outputs, feeds), strict=True))

    return run
