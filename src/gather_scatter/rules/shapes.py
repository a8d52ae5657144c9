"""Pure shape and type rules: functions of shapes, dtypes and attributes, never of data.

The same rule serves shape inference (``infer_shape``), the kernels' pre-flight check and the
tests, so a shape error reads the same whether it is found statically or at run time.

A dimension is an ``int`` (known), a ``str`` (a symbol, equal only to itself) or ``None``
(unknown). A shape is a tuple of dimensions, or ``None`` when even the rank is unknown. A rule
raises only for violations the known facts prove.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeGuard, cast

import numpy as np

from ..errors import DTypeError, InvalidAttributeError, OutputTooLargeError, ShapeError
from ..resources import memory as _memory
from .versions import OpVersion, Reduction, onnx_type_name

Dim = int | str | None
Shape = tuple[Dim, ...] | None


def fmt_shape(shape: Shape) -> str:
    """``(2, 'N', ?)`` style: symbols quoted, unknown dims as ``?``."""
    if shape is None:
        return "(unknown rank)"
    parts = ["?" if d is None else repr(d) if isinstance(d, str) else str(d) for d in shape]
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def concrete(shape: Shape) -> tuple[int, ...]:
    """``shape`` as computed by a rule from the shapes of arrays: every dim known (the kernels' case)."""
    return cast(tuple[int, ...], shape)


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
        raise ShapeError(
            f"{spec.name}: {input} shape must be a sequence of dims (or None for an unknown rank), got {shape!r}",
            op=spec.op_type,
            since_version=spec.since_version,
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
            raise ShapeError(
                f"{spec.name}: {input} shape {given} has an invalid dimension {d!r} at {i} "
                "(dimensions are ints >= 0, symbol names, or None)",
                op=spec.op_type,
                since_version=spec.since_version,
                input=input,
                position=(i,),
                value=d,
            )
    return tuple(dims)


def _need_rank(spec: OpVersion, input: str, shape: Shape, minimum: int = 1) -> None:
    if shape is not None and len(shape) < minimum:
        raise ShapeError(
            f"{spec.name}: {input} must have rank >= {minimum}, got shape {fmt_shape(shape)}",
            op=spec.op_type,
            since_version=spec.since_version,
            input=input,
            value=len(shape),
        )


def _int_attr(spec: OpVersion, name: str, value: Any) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise InvalidAttributeError(
            f"{spec.name}: attribute {name} must be an int, got {value!r}",
            op=spec.op_type,
            since_version=spec.since_version,
            input=name,
            value=value,
        )
    return int(value)


def normalize_axis(spec: OpVersion, axis: Any, rank: int) -> int:
    """``axis`` in ``[-rank, rank-1]`` mapped to ``[0, rank-1]``; InvalidAttributeError otherwise."""
    axis = _int_attr(spec, "axis", axis)
    if not -rank <= axis < rank:
        raise InvalidAttributeError(
            f"{spec.name}: axis = {axis} is out of range for data of rank {rank} (valid range [{-rank}, {rank - 1}])",
            op=spec.op_type,
            since_version=spec.since_version,
            input="axis",
            value=axis,
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
            op=spec.op_type,
            since_version=spec.since_version,
            input="batch_dims",
            value=b,
            valid_range=(0, limit - 1) if limit is not None else None,
        )
    if data is not None and indices is not None:
        for i in range(b):
            d, j = data[i], indices[i]
            if _known(d) and _known(j) and d != j:  # two symbols may still be equal at run time
                raise ShapeError(
                    f"{spec.name}: batch dimension {i} differs: data.shape[{i}] = {d} but "
                    f"indices.shape[{i}] = {j} (data shape {fmt_shape(data)}, indices shape {fmt_shape(indices)})",
                    op=spec.op_type,
                    since_version=spec.since_version,
                    input="indices",
                    position=(i,),
                    value=j,
                )
    return b


def _last_dim_range(
    spec: OpVersion, k: Dim, low: int, high: int | None, data: Shape, indices: Shape, bound: str
) -> None:
    """``low <= k <= high``, where ``high`` is ``bound`` (e.g. rank(data)) or None when unknown."""
    if _known(k) and not (low <= k and (high is None or k <= high)):
        raise ShapeError(
            f"{spec.name}: indices.shape[-1] = {k} must be in [{low}, {bound if high is None else high}] "
            f"({low} to {bound}; data shape {fmt_shape(data)}, indices shape {fmt_shape(indices)})",
            op=spec.op_type,
            since_version=spec.since_version,
            input="indices",
            position=(len(indices) - 1,) if indices is not None else None,
            value=k,
            valid_range=(low, high) if high is not None else None,
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
        _last_dim_range(spec, k, 1, None, data, indices, "rank(data) - batch_dims")
        return None
    _last_dim_range(spec, k, 1, len(data) - b, data, indices, "rank(data) - batch_dims")
    if not _known(k):
        return None
    return _fill(indices[:b], data[:b]) + indices[b:-1] + data[b + k :]


def scatter_nd_shape(spec: OpVersion, data: Shape, indices: Shape, updates: Shape) -> Shape:
    """ScatterND: the output has ``data``'s shape; ``updates`` must be
    ``indices.shape[:-1] + data.shape[k:]``.

    Where ``k`` is unknown but all three ranks are known, the ranks fix it
    (``k = q - 1 + r - rank(updates)``). Unknown output dims are filled from ``updates``.
    """
    data = as_shape(spec, "data", data)
    indices = as_shape(spec, "indices", indices)
    updates = as_shape(spec, "updates", updates)
    _need_rank(spec, "data", data)
    _need_rank(spec, "indices", indices)
    if indices is None or updates is None:
        return data
    k, lead = indices[-1], len(indices) - 1
    if data is None:
        _check_updates(spec, updates, indices[:-1], updates[lead:], k, data, indices)
        return (None,) * k + updates[lead:] if _known(k) else None
    r = len(data)
    _last_dim_range(spec, k, 0, r, data, indices, "rank(data)")
    k_shown = k
    if not _known(k):
        k = lead + r - len(updates)  # the only k the ranks allow
        k_shown = f"? ({k} by the ranks)" if 0 <= k <= r else "? (no k in [0, rank(data)] fits the ranks)"
        k = min(max(k, 0), r)  # when none fits, either end shows the rank mismatch
    _check_updates(spec, updates, indices[:-1], data[k:], k_shown, data, indices)
    return data[:k] + _fill(data[k:], updates[lead:])


def _same_rank(spec: OpVersion, data: Shape, other: Shape, name: str, data_name: str = "data") -> None:
    if data is not None and other is not None and len(data) != len(other):
        raise ShapeError(
            f"{spec.name}: {name} must have the rank of {data_name} ({len(data)}), got shape {fmt_shape(other)} "
            f"({data_name} shape {fmt_shape(data)})",
            op=spec.op_type,
            since_version=spec.since_version,
            input=name,
            value=len(other),
        )


def _elements_rule(spec: OpVersion, data: Shape, indices: Shape, axis: Any) -> int | None:
    """The GatherElements/ScatterElements/Scatter checks on ``data`` and ``indices``: equal
    ranks >= 1, ``axis`` in range, ``indices.shape[d] <= data.shape[d]`` for every ``d != axis``.
    Returns the normalized axis, or None when no rank is known.
    """
    _need_rank(spec, "data", data)
    _need_rank(spec, "indices", indices)
    _same_rank(spec, data, indices, "indices")
    known = data if data is not None else indices
    if known is None:
        _int_attr(spec, "axis", axis)
        return None
    ax = normalize_axis(spec, axis, len(known))
    if data is not None and indices is not None:
        for d, (n, s) in enumerate(zip(indices, data, strict=False)):
            if d != ax and _known(n) and _known(s) and n > s:
                raise ShapeError(
                    f"{spec.name}: indices.shape[{d}] = {n} exceeds data.shape[{d}] = {s} "
                    f"(off the axis, indices may not be larger than data; axis = {ax}, "
                    f"data shape {fmt_shape(data)}, indices shape {fmt_shape(indices)})",
                    op=spec.op_type,
                    since_version=spec.since_version,
                    input="indices",
                    position=(d,),
                    value=n,
                    valid_range=(0, s),
                    axis=d,
                )
    return ax


def gather_elements_shape(spec: OpVersion, data: Shape, indices: Shape, axis: Any = 0) -> Shape:
    """GatherElements: the output has ``indices``' shape (rules in :func:`_elements_rule`)."""
    data, indices = as_shape(spec, "data", data), as_shape(spec, "indices", indices)
    _elements_rule(spec, data, indices, axis)
    if indices is None:
        return None if data is None else (None,) * len(data)
    return indices


def scatter_elements_shape(spec: OpVersion, data: Shape, indices: Shape, updates: Shape, axis: Any = 0) -> Shape:
    """ScatterElements/Scatter: the output has ``data``'s shape; ``updates.shape == indices.shape``."""
    data = as_shape(spec, "data", data)
    indices = as_shape(spec, "indices", indices)
    updates = as_shape(spec, "updates", updates)
    _need_rank(spec, "updates", updates)
    _elements_rule(spec, data, indices if indices is not None else updates, axis)
    if (
        indices is not None
        and updates is not None
        and (
            len(indices) != len(updates)
            or any(_known(i) and _known(u) and i != u for i, u in zip(indices, updates, strict=False))
        )
    ):
        raise ShapeError(
            f"{spec.name}: updates shape {fmt_shape(updates)} must equal indices shape {fmt_shape(indices)}",
            op=spec.op_type,
            since_version=spec.since_version,
            input="updates",
            value=updates,
        )
    return data


ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "ABSENT"})()
"""An optional input that the node leaves out (TensorScatter's ``write_indices``)."""


def tensor_scatter_shape(
    spec: OpVersion, past_cache: Shape, update: Shape, write_indices: Shape = ABSENT, axis: Any = -2
) -> Shape:
    """TensorScatter: the output has ``past_cache``'s shape ``(batch, ..., max_sequence_length, ...)``;
    ``update`` equals it except on ``axis`` (never 0, the batch axis), where
    ``sequence_length <= max_sequence_length``; ``write_indices``, unless :data:`ABSENT`, has shape
    ``(batch,)``. Unknown output dims off the axis are filled from ``update``.
    """
    past = as_shape(spec, "past_cache", past_cache)
    update = as_shape(spec, "update", update)
    _need_rank(spec, "past_cache", past, 2)
    _need_rank(spec, "update", update, 2)
    _same_rank(spec, past, update, "update", "past_cache")
    known = past if past is not None else update
    ax = None
    if known is None:
        _int_attr(spec, "axis", axis)
    else:
        ax = normalize_axis(spec, axis, len(known))
        if ax == 0:
            raise InvalidAttributeError(
                f"{spec.name}: axis = {axis} is the batch axis 0; the sequence axis must be in "
                f"[1, {len(known) - 1}] (or [{-len(known) + 1}, -1])",
                op=spec.op_type,
                since_version=spec.since_version,
                input="axis",
                value=int(axis),
                valid_range=(-len(known) + 1, len(known) - 1),
            )
        if past is not None and update is not None:
            for d, (u, p) in enumerate(zip(update, past, strict=False)):
                if _known(u) and _known(p) and (u > p if d == ax else u != p):
                    rule = (
                        "sequence_length must be <= max_sequence_length"
                        if d == ax
                        else "off the sequence axis, update must have past_cache's dims"
                    )
                    raise ShapeError(
                        f"{spec.name}: update.shape[{d}] = {u} but past_cache.shape[{d}] = {p} ({rule}; "
                        f"axis = {ax}, past_cache shape {fmt_shape(past)}, update shape {fmt_shape(update)})",
                        op=spec.op_type,
                        since_version=spec.since_version,
                        input="update",
                        position=(d,),
                        value=u,
                        valid_range=(0, p) if d == ax else (p, p),
                        axis=d,
                    )
    write = None if write_indices is ABSENT else as_shape(spec, "write_indices", write_indices)
    if write is not None:
        batch = next((s[0] for s in (past, update) if s is not None and _known(s[0])), None)
        if len(write) != 1 or (batch is not None and _known(write[0]) and write[0] != batch):
            raise ShapeError(
                f"{spec.name}: write_indices must have shape (batch,) = "
                f"{fmt_shape((batch if batch is not None else 'batch',))}, got {fmt_shape(write)}",
                op=spec.op_type,
                since_version=spec.since_version,
                input="write_indices",
                value=write,
            )
    if past is None or update is None:
        return past
    return tuple(p if p is not None or d == ax else u for d, (p, u) in enumerate(zip(past, update, strict=False)))


def _check_updates(spec: OpVersion, updates, lead: tuple, tail: tuple, k, data: Shape, indices: Shape) -> None:
    expected = lead + tail
    mismatch = len(updates) != len(expected) or any(
        _known(u) and _known(e) and u != e for u, e in zip(updates, expected, strict=False)
    )
    if mismatch:
        # With data's rank unknown only the indices part of the expected shape is a fact.
        shown = fmt_shape(expected) if data is not None else f"{fmt_shape(lead)} + (unknown)"
        raise ShapeError(
            f"{spec.name}: updates shape {fmt_shape(updates)} must equal indices.shape[:-1] + "
            f"data.shape[k:] = {shown} with k = {k} "
            f"(data shape {fmt_shape(data)}, indices shape {fmt_shape(indices)})",
            op=spec.op_type,
            since_version=spec.since_version,
            input="updates",
            value=updates,
        )


def _fill(dims: tuple, other: tuple) -> tuple:
    """``dims`` with unknown (None) entries taken from the equal-length ``other``: two dims
    the rule has proved equal, so the output keeps the better fact. Symbols are kept.
    """
    return tuple(o if d is None else d for d, o in zip(dims, other, strict=False))


def as_dtype(spec: OpVersion, input: str, dtype: Any) -> np.dtype:
    """``dtype`` as a NumPy dtype: a NumPy dtype or anything ``np.dtype`` reads (``'float32'``,
    ``np.int64``, ``object`` for strings), an ONNX element type number
    (``onnx.TensorProto.FLOAT == 1``) or its ``'tensor(float)'`` name; DTypeError otherwise.
    """
    if isinstance(dtype, np.dtype):
        return dtype
    facts = dict(op=spec.op_type, since_version=spec.since_version, input=input, value=dtype)
    forms = (
        "a NumPy dtype or its name ('float32'), an ONNX element type number (onnx.TensorProto.FLOAT) "
        "or its type string ('tensor(float)')"
    )
    if isinstance(dtype, str) and dtype.startswith("tensor(") and dtype.endswith(")"):
        from onnx import TensorProto

        try:
            dtype = TensorProto.DataType.Value(dtype[len("tensor(") : -1].upper())
        except ValueError:
            raise DTypeError(
                f"{spec.name}: {input} dtype {dtype!r} names no ONNX element type (pass {forms})", **facts
            ) from None
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, (bool, np.bool_)):
        from onnx import TensorProto, helper

        try:
            return np.dtype(helper.tensor_dtype_to_np_dtype(int(dtype)))
        except (KeyError, ValueError, TypeError):
            last = max(TensorProto.DataType.values())
            raise DTypeError(
                f"{spec.name}: {input} dtype {int(dtype)} is not an ONNX element type number (those "
                f"of onnx.TensorProto run from 1, FLOAT, to {last}, "
                f"{TensorProto.DataType.Name(last)})",
                **facts,
            ) from None
    try:
        return np.dtype(dtype)
    except (TypeError, ValueError):
        raise DTypeError(f"{spec.name}: {input} dtype {dtype!r} is not a dtype (pass {forms})", **facts) from None


def output_dtype(
    spec: OpVersion,
    data: Any,
    indices: Any,
    updates: Any = None,
    *,
    names: tuple[str, ...] = ("data", "indices", "updates"),
) -> Any:
    """Check each known dtype against ``spec``; the output has ``data``'s dtype.

    Dtypes are read by :func:`as_dtype`. ``updates`` must have data's element type. Unknown
    dtypes (None) are skipped. ``names`` are the three inputs' names in messages
    (TensorScatter: past_cache, write_indices, update).
    """
    data, indices, updates = (
        None if d is None else as_dtype(spec, n, d) for n, d in zip(names, (data, indices, updates), strict=False)
    )
    for input, dtype in zip(names, (data, indices, updates), strict=False):
        if dtype is not None:
            spec.check_dtype(input, dtype)
    if data is not None and updates is not None and onnx_type_name(data) != onnx_type_name(updates):
        raise DTypeError(
            f"{spec.name}: {names[2]} has type tensor({onnx_type_name(updates)}) but {names[0]} has "
            f"tensor({onnx_type_name(data)}); they must match",
            op=spec.op_type,
            since_version=spec.since_version,
            input=names[2],
            value=onnx_type_name(updates),
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
            op=spec.op_type,
            since_version=spec.since_version,
            input="data",
            value=kind,
        )


def check_output_bytes(spec: OpVersion, shape: Shape, dtype: Any, *, limit: int | None = None) -> None:
    """OutputTooLargeError unless an array of ``shape`` and ``dtype`` fits in ``limit`` bytes.

    Always refused: more bytes than int64 offsets address (no such array can exist). ``limit``
    None means the run-time memory limit (``gather_scatter.set_memory_limit``). Shapes with an
    unknown dim pass; an unknown dtype counts one byte per element. Python ints, so the product
    of huge dims cannot overflow here.
    """
    if shape is None or not all(_known(d) for d in shape):
        return
    nbytes = size(cast(tuple[int, ...], shape)) * (np.dtype(dtype).itemsize if dtype is not None else 1)
    bound: int | None
    if nbytes > _memory.INT64_MAX:
        bound, why = _memory.INT64_MAX, "the most that int64 byte offsets can address"
    elif (bound := limit if limit is not None else _memory.exceeded(nbytes)) is not None and nbytes > bound:
        why = "see gather_scatter.set_memory_limit"
    else:
        return
    shown = f" and dtype {np.dtype(dtype)}" if dtype is not None else ""
    raise OutputTooLargeError(
        f"{spec.name}: output of shape {fmt_shape(shape)}{shown} would take {nbytes} bytes, "
        f"more than {'the memory limit of ' if bound != _memory.INT64_MAX else ''}{bound} bytes ({why})",
        op=spec.op_type,
        since_version=spec.since_version,
        input="output",
        value=nbytes,
        valid_range=(0, bound),
    )


def size(shape: Sequence[int]) -> int:
    return math.prod(shape)
