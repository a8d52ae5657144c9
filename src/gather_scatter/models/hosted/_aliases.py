"""Identity nodes the hosted Session resolves in Python (issue 38): an onnxruntime segment's
Identity of a value from outside the segment (a graph input, an earlier step's output, a
body's outer value) makes a copy of a value the run already holds, and costs the segment an
input and an output (~3 us a run of a Loop body's ``cond_out = Identity(cond)``). Such a
node, or a chain of them, leaves its segment: its output is the value it names, an alias, and
a segment left with no output is no onnxruntime call at all.

Values are never written in place by the steps (our kernels return new arrays), so sharing one
is safe; a main graph's output stays onnxruntime's copy (the caller gets no array of its feeds
back), and an initializer's Identity stays in onnxruntime, which holds it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

import onnx

from ...rules.versions import normalize_domain
from ._partition import PlanStep, free_names

__all__ = ["split_aliases"]


def _is_identity(node: onnx.NodeProto) -> bool:
    return node.op_type == "Identity" and normalize_domain(node.domain) == "" and len(node.input) == 1


def split_aliases(
    model: onnx.ModelProto, step: PlanStep, held: Collection[str], kept: Collection[str]
) -> tuple[PlanStep, dict[str, str]]:
    """Return the onnxruntime ``step`` less its Identity nodes resolved as aliases, and those
    aliases (output -> the value outside the step it is, through any chain).

    An Identity is resolved where what it reads comes from outside the step (not one of
    ``held``, the initializers, which the step holds itself) or from an Identity resolved, and
    no other node of the step reads its output; ``kept``: outputs that must stay onnxruntime's
    (a main graph's outputs). The step's inputs and outputs are what its other nodes read and
    make.
    """
    nodes = model.graph.node
    outside = {n for n in step.inputs if n not in held}
    aliases: dict[str, str] = {}
    for index in step.nodes:  # graph order: a chain's links come in order
        node = nodes[index]
        if _is_identity(node) and node.output[0] not in kept:
            source = node.input[0]
            if source in outside or source in aliases:
                aliases[node.output[0]] = aliases.get(source, source)
    while aliases:  # an alias another node of the step reads stays in the step (and the chain before it)
        rest = [i for i in step.nodes if not (_is_identity(nodes[i]) and nodes[i].output[0] in aliases)]
        read = {n for i in rest for n in free_names(nodes[i])}
        dropped = {out for out in aliases if out in read}
        if not dropped:
            break
        for index in step.nodes:
            node = nodes[index]
            if node.output and node.output[0] in aliases and (node.output[0] in dropped or node.input[0] in dropped):
                dropped.add(node.output[0])
        aliases = {out: root for out, root in aliases.items() if out not in dropped}
    if not aliases:
        return step, {}
    members = tuple(i for i in step.nodes if not (_is_identity(nodes[i]) and nodes[i].output[0] in aliases))
    read = {n for i in members for n in free_names(nodes[i])}
    inputs = tuple(n for n in step.inputs if n in read)
    outputs = tuple(n for n in step.outputs if n not in aliases)
    return PlanStep(step.engine, members, inputs, outputs, step.reasons), aliases


def resolve(aliases: Mapping[str, str], name: str) -> str:
    """The value ``name`` is: itself, or the value outside every segment its alias names."""
    return aliases.get(name, name)
