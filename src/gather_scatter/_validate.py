"""Index checks with the one out-of-bounds message, and index tuples -> linear offsets.

Checks run over the whole ``indices`` array at once; the error names the first bad position
in row-major order. Nothing here writes to a caller's array.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._versions import OpVersion
from .errors import DTypeError, IndexOutOfBoundsError


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
    sizes = np.asarray(sizes, dtype=np.int64)
    if sizes.ndim:
        rows = indices.reshape(-1, sizes.size)
        lo, hi = rows.min(axis=0), rows.max(axis=0)
    else:
        lo, hi = indices.min(), indices.max()
    if np.all(lo >= -sizes) and np.all(hi < sizes):
        return
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


def linear_offsets(rows: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    """Row-major offsets (int64, shape ``(N,)``) of checked index tuples ``rows`` (shape ``(N, k)``)
    into a block of shape ``dims``, negatives counted from the end.

    Loops over the k components of a tuple, never over the tuples.
    """
    offsets = np.zeros(rows.shape[0], dtype=np.int64)
    stride = 1
    for j in range(len(dims) - 1, -1, -1):
        component = rows[:, j].astype(np.int64)
        np.add(component, dims[j], out=component, where=component < 0)
        if stride != 1:
            component *= stride
        offsets += component
        stride *= dims[j]
    return offsets
