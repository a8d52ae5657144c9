"""What runs where in a :class:`~gather_scatter.Session`.

The :class:`Plan` both engines give, one :class:`PlanEntry` a step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Plan", "PlanEntry"]


@dataclass(frozen=True)
class PlanEntry:
    """One step of :attr:`Session.plan <gather_scatter.Session.plan>`.

    Attributes
    ----------
    engine : {'onnxruntime', 'gather_scatter', 'reference'}
        Who runs the step: an onnxruntime session, our evaluator with our kernels for the
        routed nodes, or (``engine="reference"``) our evaluator for the whole model.
    nodes : tuple of str
        The main graph's nodes it runs, by name (``'<op_type>#<index>'`` for a node without one).
    reasons : mapping of str to str
        For each routed node, why it runs on our kernels.
    inputs, outputs : tuple of str
        The values it reads, and those it hands on to a later step or the caller.
    """

    engine: str
    nodes: tuple[str, ...]
    reasons: Mapping[str, str] = field(default_factory=dict)
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    """What runs where in a :class:`~gather_scatter.Session`.

    Attributes
    ----------
    engine : str
        The session's engine (``'reference'`` or ``'onnxruntime'``).
    steps : tuple of PlanEntry
        In the order a run takes them.
    threads : int or None
        onnxruntime's intra-op thread count (None for ``engine="reference"``).
    onnxruntime : str or None
        The installed onnxruntime's version, whose rules were applied.
    passthrough : bool
        True where onnxruntime runs the original model unchanged (nothing routed).
    """

    engine: str
    steps: tuple[PlanEntry, ...]
    threads: int | None = None
    onnxruntime: str | None = None
    passthrough: bool = False

    @property
    def routed(self) -> dict[str, str]:
        """Every node that runs on our kernels, with its reason."""
        return {name: reason for step in self.steps for name, reason in step.reasons.items()}

    def __str__(self) -> str:
        if self.engine == "reference":
            count = len(self.steps[0].nodes)
            return f"engine reference: our evaluator runs all {count} nodes (our kernels for the family)"
        head = f"engine onnxruntime {self.onnxruntime}, {self.threads} intra-op thread(s): "
        if self.passthrough:
            return head + f"onnxruntime runs the model unchanged ({len(self.steps[0].nodes)} nodes); nothing is routed"
        segments = sum(step.engine == "onnxruntime" for step in self.steps)
        lines = [head + f"{len(self.routed)} node(s) on our kernels, {segments} onnxruntime segment(s)"]
        for number, step in enumerate(self.steps, 1):
            if step.engine == "onnxruntime":
                lines.append(f"  step {number}: onnxruntime, {len(step.nodes)} node(s)")
            else:
                lines.append(f"  step {number}: gather_scatter")
                lines.extend(f"    {name}: {step.reasons.get(name, '')}" for name in step.nodes)
            lines.append(f"    reads {_names(step.inputs)}; hands on {_names(step.outputs)}")
        return "\n".join(lines)


def _names(names: Sequence[str], most: int = 6) -> str:
    shown = ", ".join(names[:most]) or "nothing"
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")
