"""The vocabulary of the shape rules: dims and shapes, and the checks every rule shares.

A dimension (:data:`Dim`) is an ``int`` (known), a ``str`` (a symbol, equal only to itself) or
``None`` (unknown). A :data:`Shape` is a tuple of dimensions, or ``None`` when even the rank is
unknown; :data:`ABSENT` stands for an optional input the node leaves out. Here: reading a
user-given shape (:func:`as_shape`), printing one (:func:`fmt_shape`), an axis attribute
(:func:`normalize_axis`) and the element count of a known shape (:func:`size`). The per-operator
rules are in :mod:`gather_scatter.rules.shapes`, the dtype rules in :mod:`gather_scatter.rules.dtypes`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeGuard, cast

import numpy as np

from ..errors import InvalidAttributeError, ShapeError
from .versions import OpVersion

Dim = int | str | None
Shape = tuple[Dim, ...] | None

ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "ABSENT"})()
"""An optional input that the node leaves out (TensorScatter's ``write_indices``,
GatherBlockQuantized's ``zero_points``)."""


def fmt_shape(shape: Shape) -> str:
    """``(2, 'N', ?)`` style: symbols quoted, unknown dims as ``?``."""
    if shape is None:
        return "(unknown rank)"
    parts = ["?" if d is None else repr(d) if isinstance(d, str) else str(d) for d in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def concrete(shape: Shape) -> tuple[int, ...]:
    """``shape`` as computed by a rule from the shapes of arrays: every dim known (the kernels' case)."""
    return cast(tuple[int, ...], shape)


def size(shape: Sequence[int]) -> int:
    """The element count of a shape of known dims (Python ints: huge dims cannot overflow)."""
    return math.prod(shape)


def _known(d: Dim) -> TypeGuard[int]:
    return isinstance(d, int)


def as_shape(spec: OpVersion, input: str, shape: Sequence[Dim] | None) -> Shape:
    """Validate a user-given shape: an ordered sequence (list, tuple, 1-d array) of dims,
    each an int >= 0, a symbol, or None; or None for an unknown rank.

    Raises
    ------
    ShapeError
        ``shape`` is not such a sequence (a str, bytes, a number, a 0-d array, a set, a
        mapping, an iterator), or one of its dims is invalid (``position`` names it).
    """
    if shape is None:
        return None
    if type(shape) is tuple and all(type(d) is int and d >= 0 for d in shape):
        return shape  # an ndarray's shape: the kernels' every call
    from collections.abc import Sequence as _Sequence

    ordered = isinstance(shape, np.ndarray) and shape.ndim == 1
    if not ordered and (isinstance(shape, (str, bytes, bytearray)) or not isinstance(shape, _Sequence)):
        # "NT" is not the shape ('N', 'T'), nor 5 the shape (5,), nor {4, 3} the shape (3, 4)
        # (a set's order is not the caller's): refuse rather than guess.
        raise spec.error(
            ShapeError,
            f"{input} shape must be a sequence of dims (or None for an unknown rank), got {shape!r}",
            input=input,
            value=shape,
        )
    given = tuple(shape)
    dims: list[Dim] = []
    for i, d in enumerate(given):
        if d is None or isinstance(d, str):
            dims.append(d)
        elif hasattr(d, "__index__") and not isinstance(d, (bool, np.bool_)) and int(d) >= 0:
            dims.append(int(d))
        else:
            raise spec.error(
                ShapeError,
                f"{input} shape {given} has an invalid dimension {d!r} at {i} "
                "(dimensions are ints >= 0, symbol names, or None)",
                input=input,
                position=(i,),
                value=d,
            )
    return tuple(dims)


def _need_rank(spec: OpVersion, input: str, shape: Shape, minimum: int = 1) -> None:
    if shape is not None and len(shape) < minimum:
        raise spec.error(
            ShapeError,
            f"{input} must have rank >= {minimum}, got shape {fmt_shape(shape)}",
            input=input,
            value=len(shape),
        )


def _int_attr(spec: OpVersion, name: str, value: Any) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise spec.error(
            InvalidAttributeError,
            f"attribute {name} must be an int, got {value!r}",
            input=name,
            value=value,
        )
    return int(value)


def normalize_axis(spec: OpVersion, axis: Any, rank: int) -> int:
    """``axis`` in ``[-rank, rank-1]`` mapped to ``[0, rank-1]``; InvalidAttributeError otherwise."""
    axis = _int_attr(spec, "axis", axis)
    if not -rank <= axis < rank:
        raise spec.error(
            InvalidAttributeError,
            f"axis = {axis} is out of range for data of rank {rank} (valid range [{-rank}, {rank - 1}])",
            input="axis",
            value=axis,
            valid_range=(-rank, rank - 1),
        )
    return axis % rank
