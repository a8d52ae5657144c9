"""The operators' shape rules: functions of shapes and attributes, never of data.

The same rule serves shape inference (``infer_shape``), the kernels' pre-flight check and the
tests, so a shape error reads the same whether it is found statically or at run time.

Dims and shapes are those of :mod:`gather_scatter.rules.dims` (an int, a symbol, or None; a shape
of None is an unknown rank). A rule raises only for violations the known facts prove. The dtype
rules are in :mod:`gather_scatter.rules.dtypes`.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidAttributeError, ShapeError
from .dims import ABSENT, Dim, Shape, _int_attr, _known, _need_rank, as_shape, fmt_shape, normalize_axis
from .versions import OpVersion


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
        raise spec.error(
            InvalidAttributeError,
            f"batch_dims = {b} must be in [0, {shown}] "
            f"(below min(rank(data), rank(indices)); data shape {fmt_shape(data)}, "
            f"indices shape {fmt_shape(indices)})",
            input="batch_dims",
            value=b,
            valid_range=(0, limit - 1) if limit is not None else None,
        )
    if data is not None and indices is not None:
        for i in range(b):
            d, j = data[i], indices[i]
            if _known(d) and _known(j) and d != j:  # two symbols may still be equal at run time
                raise spec.error(
                    ShapeError,
                    f"batch dimension {i} differs: data.shape[{i}] = {d} but "
                    f"indices.shape[{i}] = {j} (data shape {fmt_shape(data)}, indices shape {fmt_shape(indices)})",
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
        raise spec.error(
            ShapeError,
            f"indices.shape[-1] = {k} must be in [{low}, {bound if high is None else high}] "
            f"({low} to {bound}; data shape {fmt_shape(data)}, indices shape {fmt_shape(indices)})",
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
        raise spec.error(
            ShapeError,
            f"{name} must have the rank of {data_name} ({len(data)}), got shape {fmt_shape(other)} "
            f"({data_name} shape {fmt_shape(data)})",
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
                raise spec.error(
                    ShapeError,
                    f"indices.shape[{d}] = {n} exceeds data.shape[{d}] = {s} "
                    f"(off the axis, indices may not be larger than data; axis = {ax}, "
                    f"data shape {fmt_shape(data)}, indices shape {fmt_shape(indices)})",
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
        raise spec.error(
            ShapeError,
            f"updates shape {fmt_shape(updates)} must equal indices shape {fmt_shape(indices)}",
            input="updates",
            value=updates,
        )
    return data


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
            raise spec.error(
                InvalidAttributeError,
                f"axis = {axis} is the batch axis 0; the sequence axis must be in "
                f"[1, {len(known) - 1}] (or [{-len(known) + 1}, -1])",
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
                    raise spec.error(
                        ShapeError,
                        f"update.shape[{d}] = {u} but past_cache.shape[{d}] = {p} ({rule}; "
                        f"axis = {ax}, past_cache shape {fmt_shape(past)}, update shape {fmt_shape(update)})",
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
            raise spec.error(
                ShapeError,
                f"write_indices must have shape (batch,) = "
                f"{fmt_shape((batch if batch is not None else 'batch',))}, got {fmt_shape(write)}",
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
        raise spec.error(
            ShapeError,
            f"updates shape {fmt_shape(updates)} must equal indices.shape[:-1] + "
            f"data.shape[k:] = {shown} with k = {k} "
            f"(data shape {fmt_shape(data)}, indices shape {fmt_shape(indices)})",
            input="updates",
            value=updates,
        )


def _fill(dims: tuple, other: tuple) -> tuple:
    """``dims`` with unknown (None) entries taken from the equal-length ``other``: two dims
    the rule has proved equal, so the output keeps the better fact. Symbols are kept.
    """
    return tuple(o if d is None else d for d, o in zip(dims, other, strict=False))
