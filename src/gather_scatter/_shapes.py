"""Pure shape and type rules: functions of shapes, dtypes and attributes, never of data.

The same rule serves shape inference (``infer_shape``), the kernels' pre-flight check and the
tests, so a shape error reads the same whether it is found statically or at run time.

A dimension is an ``int`` (known), a ``str`` (a symbol, equal only to itself) or ``None``
(unknown). A shape is a tuple of dimensions, or ``None`` when even the rank is unknown. A rule
raises only for violations the known facts prove.
"""

from __future__ import annotations

import math
from typing import Any, Sequence, Union

from ._versions import OpVersion, Reduction, onnx_type_name
from .errors import DTypeError, InvalidAttributeError, ShapeError

Dim = Union[int, str, None]
Shape = Union[tuple[Dim, ...], None]


def fmt_shape(shape: Shape) -> str:
    """``(2, 'N', ?)`` style: symbols quoted, unknown dims as ``?``."""
    if shape is None:
        return "(unknown rank)"
    parts = ["?" if d is None else repr(d) if isinstance(d, str) else str(d) for d in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def _known(d: Dim) -> bool:
    return isinstance(d, int)


def as_shape(spec: OpVersion, input: str, shape: Sequence[Dim] | None) -> Shape:
    """Validate a user-given shape: each dim an int >= 0, a symbol, or None."""
    if shape is None:
        return None
    dims = []
    for i, d in enumerate(shape):
        if d is None or isinstance(d, str):
            dims.append(d)
        elif hasattr(d, "__index__") and not isinstance(d, bool) and int(d) >= 0:
            dims.append(int(d))
        else:
            raise ShapeError(
                f"{spec.name}: {input} shape {tuple(shape)} has an invalid dimension {d!r} at {i} "
                "(dimensions are ints >= 0, symbol names, or None)",
                op=spec.op_type, since_version=spec.since_version, input=input, position=(i,), value=d,
            )
    return tuple(dims)


def _need_rank(spec: OpVersion, input: str, shape: Shape, minimum: int = 1) -> None:
    if shape is not None and len(shape) < minimum:
        raise ShapeError(
            f"{spec.name}: {input} must have rank >= {minimum}, got shape {fmt_shape(shape)}",
            op=spec.op_type, since_version=spec.since_version, input=input, value=len(shape),
        )


def _int_attr(spec: OpVersion, name: str, value: Any) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise InvalidAttributeError(
            f"{spec.name}: attribute {name} must be an int, got {value!r}",
            op=spec.op_type, since_version=spec.since_version, input=name, value=value,
        )
    return int(value)


def normalize_axis(spec: OpVersion, axis: Any, rank: int) -> int:
    """``axis`` in ``[-rank, rank-1]`` mapped to ``[0, rank-1]``; InvalidAttributeError otherwise."""
    axis = _int_attr(spec, "axis", axis)
    if not -rank <= axis < rank:
        raise InvalidAttributeError(
            f"{spec.name}: axis = {axis} is out of range for data of rank {rank} "
            f"(valid range [{-rank}, {rank - 1}])",
            op=spec.op_type, since_version=spec.since_version, input="axis", value=axis,
            valid_range=(-rank, rank - 1),
        )
    return axis % rank


def gather_shape(spec: OpVersion, data: Shape, indices: Shape, axis: Any = 0) -> Shape:
    """Gather: ``data.shape[:axis] + indices.shape + data.shape[axis+1:]``."""
    data, indices = as_shape(spec, "data", data), as_shape(spec, "indices", indices)
    _need_rank(spec, "data", data)
    if data is None:
        _int_attr(spec, "axis", axis)
        return None
    ax = normalize_axis(spec, axis, len(data))
    if indices is None:
        return None
    return data[:ax] + indices + data[ax + 1 :]


def _batch_dims(spec: OpVersion, batch_dims: Any, data: Shape, indices: Shape) -> int:
    b = _int_attr(spec, "batch_dims", batch_dims)
    ranks = [len(s) for s in (data, indices) if s is not None]
    limit = min(ranks) if ranks else None
    if b < 0 or (limit is not None and b >= limit):
        shown = f"{limit - 1}" if limit is not None else "min(rank(data), rank(indices)) - 1"
        raise InvalidAttributeError(
            f"{spec.name}: batch_dims = {b} must be in [0, {shown}] "
            f"(below min(rank(data), rank(indices)); data shape {fmt_shape(data)}, "
            f"indices shape {fmt_shape(indices)})",
            op=spec.op_type, since_version=spec.since_version, input="batch_dims", value=b,
            valid_range=(0, limit - 1) if limit is not None else None,
        )
    if data is not None and indices is not None:
        for i in range(b):
            d, j = data[i], indices[i]
            if _known(d) and _known(j) and d != j:  # two symbols may still be equal at run time
                raise ShapeError(
                    f"{spec.name}: batch dimension {i} differs: data.shape[{i}] = {d} but "
                    f"indices.shape[{i}] = {j} (data shape {fmt_shape(data)}, indices shape {fmt_shape(indices)})",
                    op=spec.op_type, since_version=spec.since_version, input="indices", position=(i,), value=j,
                )
    return b


def _last_dim_range(spec: OpVersion, k: Dim, low: int, high: int, data: Shape, indices: Shape, what: str) -> None:
    if _known(k) and not low <= k <= high:
        raise ShapeError(
            f"{spec.name}: indices.shape[-1] = {k} must be in [{low}, {high}] ({what}; "
            f"data shape {fmt_shape(data)}, indices shape {fmt_shape(indices)})",
            op=spec.op_type, since_version=spec.since_version, input="indices",
            position=(len(indices) - 1,), value=k, valid_range=(low, high),
        )


def gather_nd_shape(spec: OpVersion, data: Shape, indices: Shape, batch_dims: Any = 0) -> Shape:
    """GatherND: ``indices.shape[:-1] + data.shape[b + k:]`` with ``k = indices.shape[-1]``."""
    data, indices = as_shape(spec, "data", data), as_shape(spec, "indices", indices)
    _need_rank(spec, "data", data)
    _need_rank(spec, "indices", indices)
    b = _batch_dims(spec, batch_dims, data, indices)
    if indices is None:
        return None
    k = indices[-1]
    if data is None:
        return None
    _last_dim_range(spec, k, 1, len(data) - b, data, indices, "1 to rank(data) - batch_dims")
    if not _known(k):
        return None
    # Batch dims: take data's where indices' is unknown, so the output keeps the better fact.
    lead = tuple(j if j is not None else d for j, d in zip(indices[:b], data[:b]))
    return lead + indices[b:-1] + data[b + k :]


def scatter_nd_shape(spec: OpVersion, data: Shape, indices: Shape, updates: Shape) -> Shape:
    """ScatterND: the output has ``data``'s shape; ``updates`` must be
    ``indices.shape[:-1] + data.shape[k:]``."""
    data = as_shape(spec, "data", data)
    indices = as_shape(spec, "indices", indices)
    updates = as_shape(spec, "updates", updates)
    _need_rank(spec, "data", data)
    _need_rank(spec, "indices", indices)
    if data is None or indices is None:
        return data
    k = indices[-1]
    _last_dim_range(spec, k, 0, len(data), data, indices, "0 to rank(data)")
    if not _known(k) or updates is None:
        return data
    expected = indices[:-1] + data[k:]
    mismatch = len(updates) != len(expected) or any(
        _known(u) and _known(e) and u != e for u, e in zip(updates, expected)
    )
    if mismatch:
        raise ShapeError(
            f"{spec.name}: updates shape {fmt_shape(updates)} must equal indices.shape[:-1] + "
            f"data.shape[k:] = {fmt_shape(expected)} with k = {k} (data shape {fmt_shape(data)}, "
            f"indices shape {fmt_shape(indices)})",
            op=spec.op_type, since_version=spec.since_version, input="updates", value=updates,
        )
    return data


def output_dtype(spec: OpVersion, data: Any, indices: Any, updates: Any = None) -> Any:
    """Check each known dtype against ``spec``; the output has ``data``'s dtype.

    ``updates`` must have data's element type. Unknown dtypes (None) are skipped.
    """
    for input, dtype in (("data", data), ("indices", indices), ("updates", updates)):
        if dtype is not None:
            spec.check_dtype(input, dtype)
    if data is not None and updates is not None and onnx_type_name(data) != onnx_type_name(updates):
        raise DTypeError(
            f"{spec.name}: updates has type tensor({onnx_type_name(updates)}) but data has "
            f"tensor({onnx_type_name(data)}); they must match",
            op=spec.op_type, since_version=spec.since_version, input="updates", value=onnx_type_name(updates),
        )
    return data


def check_reduction_type(spec: OpVersion, reduction: Reduction, dtype) -> None:
    """DTypeError for reductions the spec's loop cannot apply to ``dtype``."""
    kind = onnx_type_name(dtype)
    if (kind == "string" and reduction is Reduction.MUL) or (
        kind in ("complex64", "complex128") and reduction in (Reduction.MAX, Reduction.MIN)
    ):
        why = "strings cannot be multiplied" if kind == "string" else "complex numbers have no order"
        raise DTypeError(
            f"{spec.name}: reduction {reduction.value!r} is not defined for tensor({kind}) ({why})",
            op=spec.op_type, since_version=spec.since_version, input="data", value=kind,
        )


def size(shape: Sequence[int]) -> int:
    return math.prod(shape)
