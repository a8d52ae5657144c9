"""Shrink a finding to a minimal case that still shows it, the way hypothesis shrinks.

Candidates are the case with smaller shapes: along one axis, every input that has it cut to
half, then to one (coupled shapes such as ScatterElements' indices and updates shrink
together); then each input alone. A candidate is kept when the engine still gives the same
finding: the same kind and, for an input the spec refuses, the same error on the same input,
our kernel deciding what is expected as always. Repeated until no candidate
is kept or the budget of engine calls is spent. Index values are never rewritten, so a
shrunk case is always one the generators could have made.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Iterator

import numpy as np

from .runner import CheckCase


def _cut(array: np.ndarray, axis: int, size: int) -> np.ndarray:
    return np.ascontiguousarray(np.take(array, np.arange(size), axis=axis))


def _candidates(check: CheckCase) -> Iterator[CheckCase]:
    inputs = check.case.inputs
    rank = max(a.ndim for a in inputs)
    for axis in range(rank):
        for size in (1, None):  # one, then half
            together = []
            for a in inputs:
                n = a.shape[axis] if a.ndim > axis else 0
                target = 1 if size == 1 else n // 2
                together.append(_cut(a, axis, target) if 1 <= target < n else a)
            if any(t is not a for t, a in zip(together, inputs, strict=False)):
                yield CheckCase(check.spec, check.opset, dataclasses.replace(check.case, inputs=together), check.kind)
    for i, a in enumerate(inputs):
        for axis in range(a.ndim):
            for target in (1, a.shape[axis] // 2):
                if 1 <= target < a.shape[axis]:
                    alone = list(inputs)
                    alone[i] = _cut(a, axis, target)
                    yield CheckCase(check.spec, check.opset, dataclasses.replace(check.case, inputs=alone), check.kind)


def size(check: CheckCase) -> int:
    """Return the total number of elements of the case's inputs (what shrinking makes smaller)."""
    return sum(math.prod(a.shape) for a in check.case.inputs)


def shrink(
    check: CheckCase, kind: Hashable, reproduces: Callable[[CheckCase], Hashable], budget: int = 200
) -> CheckCase:
    """Return the smallest case found (total elements) for which ``reproduces(case) == kind``.

    ``kind`` is a finding kind, or a fuller signature of the finding such as ``runner.signature``.
    """
    calls = 0
    improved = True
    while improved and calls < budget:
        improved = False
        for candidate in sorted(_candidates(check), key=size):
            if size(candidate) >= size(check):
                continue
            calls += 1
            if reproduces(candidate) == kind:
                check, improved = candidate, True
                break
            if calls >= budget:
                break
    return check
