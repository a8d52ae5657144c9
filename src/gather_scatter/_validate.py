"""Input checks: inputs as arrays, index bounds with the one out-of-bounds message, index
tuples -> linear offsets, and the checks on a caller's ``out`` buffer.

Checks run over the whole ``indices`` array at once; the error names the first bad position
in row-major order. Nothing here writes to a caller's array.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._versions import OpVersion
from .errors import DTypeError, IndexOutOfBoundsError, InvalidAttributeError, ShapeError


def as_array(spec: OpVersion, input: str, value: Any) -> np.ndarray:
    """``value`` as an ndarray (no copy when it already is one); DTypeError if NumPy can't make one."""
    if isinstance(value, np.ndarray):
        return value
    try:
        return np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise DTypeError(
            f"{spec.name}: {input} cannot be read as an array ({exc})",
            op=spec.op_type, since_version=spec.since_version, input=input,
        ) from None


def native_indices(indices: np.ndarray) -> np.ndarray:
    """``indices`` in native byte order (a copy only when it is byte-swapped)."""
    if indices.dtype.byteorder not in "=|":
        return indices.astype(indices.dtype.newbyteorder("="))
    return indices


def check_bounds(spec: OpVersion, indices: np.ndarray, sizes: Any, axes: Any) -> None:
    """Raise IndexOutOfBoundsError unless every value is in ``[-s, s-1]`` for its data axis.

    ``sizes``/``axes`` are scalars (Gather: one axis for every value) or 1-D of length
    ``indices.shape[-1]`` (GatherND/ScatterND: component ``j`` of each tuple indexes axis
    ``axes[j]`` of size ``sizes[j]``).
    """
    if indices.size == 0:
        return
    # Fast path in Python ints (column by column: rows.min(axis=0) on a narrow (N, k) array
    # is ~20x slower); NumPy scalar comparisons would cost more than the reductions.
    if not isinstance(sizes, (tuple, list, np.ndarray)):
        s = int(sizes)
        if -s <= int(indices.min()) and int(indices.max()) < s:
            return
    else:
        rows = indices.reshape(-1, len(sizes))
        if all(-int(s) <= int(rows[:, j].min()) and int(rows[:, j].max()) < int(s) for j, s in enumerate(sizes)):
            return
    sizes = np.asarray(sizes, dtype=np.int64)
    bad = (indices < -sizes) | (indices >= sizes)
    position = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), indices.shape))
    value = int(indices[position])
    size = int(sizes[position[-1]] if sizes.ndim else sizes)
    axis = int(np.asarray(axes)[position[-1]] if sizes.ndim else axes)
    where = f"indices[{', '.join(map(str, position))}]" if position else "indices (a scalar)"
    if size:
        valid_range, shown = (-size, size - 1), f"valid range [{-size}, {size - 1}]"
    else:
        valid_range, shown = None, "the axis is empty: no index is valid"
    raise IndexOutOfBoundsError(
        f"{spec.name}: {where} = {value} is out of bounds for data axis {axis} of size {size} ({shown})",
        op=spec.op_type, since_version=spec.since_version, input="indices", position=position,
        value=value, valid_range=valid_range, axis=axis,
    )


def linear_offsets(rows: np.ndarray, dims: tuple[int, ...], check: bool = True) -> np.ndarray | None:
    """Row-major offsets (int64, shape ``(N,)``) of index tuples ``rows`` (shape ``(N, k)``)
    into a block of shape ``dims``, negatives counted from the end; None if ``check`` and a
    component lies outside ``[-s, s-1]`` (then :func:`check_bounds` names it).

    Loops over the k components of a tuple, never over the tuples. One pass per operation:
    ``v = i + (s & (i >> 63))`` maps ``[-s, s-1]`` onto ``[0, s-1]`` and anything else
    outside it, so one unsigned max checks both bounds.
    """
    n, k = rows.shape
    if k and n * k <= 4096:  # few tuples: whole-array steps, a third of the NumPy calls
        sizes = np.array(dims, dtype=np.int64)
        rows = rows.astype(np.int64, copy=False)
        v = np.right_shift(rows, 63)
        v &= sizes
        v += rows
        if check and not (v.view(np.uint64) < sizes.view(np.uint64)).all():
            return None
        strides = [1] * k
        for j in range(k - 1, 0, -1):
            strides[j - 1] = strides[j] * dims[j]
        return v @ np.array(strides, dtype=np.int64)
    offsets = None
    strides = [math.prod(dims[j + 1 :]) for j in range(k)]
    for j in range(k):
        column = rows[:, j]
        # One read-only pass: an unsigned max below s proves the column is in [0, s-1], the
        # common case, which then needs no mapping and no copy.
        if column.size and int(column.view(f"u{column.itemsize}").max()) < dims[j]:
            v = column
        else:
            column = column.astype(np.int64, copy=False)
            v = np.right_shift(column, 63)
            v &= dims[j]
            v += column
            if check and v.size and int(v.view(np.uint64).max()) >= dims[j]:
                return None
        if offsets is None:
            offsets = np.multiply(v, strides[j], dtype=np.int64)
        elif strides[j] == 1:
            offsets += v
        else:
            offsets += np.multiply(v, strides[j], dtype=np.int64)
    return offsets if offsets is not None else np.zeros(rows.shape[0], dtype=np.int64)


def check_out(spec: OpVersion, out: Any, shape: tuple[int, ...], dtype: np.dtype, inputs: dict) -> np.ndarray:
    """``out`` if it can take the result in place: an ndarray of exactly ``shape`` and ``dtype``,
    C-contiguous, writeable, and sharing no memory with the arrays in ``inputs`` (name -> array).

    Raises DTypeError (not an array, wrong dtype), ShapeError (wrong shape, not C-contiguous)
    or InvalidAttributeError (read-only, overlapping an input).
    """
    facts = dict(op=spec.op_type, since_version=spec.since_version, input="out")
    if not isinstance(out, np.ndarray):
        raise DTypeError(f"{spec.name}: out must be a numpy.ndarray, got {type(out).__name__}", **facts)
    if out.dtype != dtype:
        raise DTypeError(f"{spec.name}: out has dtype {out.dtype} but the result has dtype {np.dtype(dtype)}",
                         value=str(out.dtype), **facts)
    if out.shape != tuple(shape):
        raise ShapeError(f"{spec.name}: out has shape {out.shape} but the result has shape {tuple(shape)}",
                         value=out.shape, **facts)
    if not out.flags.c_contiguous:
        raise ShapeError(f"{spec.name}: out must be C-contiguous (np.ascontiguousarray makes a copy that is)",
                         **facts)
    if not out.flags.writeable:
        raise InvalidAttributeError(f"{spec.name}: out is read-only", **facts)
    for name, array in inputs.items():
        if _overlaps(out, array):
            raise InvalidAttributeError(
                f"{spec.name}: out shares memory with {name}; the result would overwrite its own input "
                "(pass a separate array)", **facts)
    return out


def _overlaps(a: np.ndarray, b: np.ndarray) -> bool:
    if not np.may_share_memory(a, b):  # bounds only: cheap
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=1 << 16))
    except np.exceptions.TooHardError:  # can't prove they are disjoint
        return True
