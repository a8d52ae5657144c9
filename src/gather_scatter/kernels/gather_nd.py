"""GatherND (11, 12, 13; com.microsoft 1): slices addressed by index tuples, taken step by step
as their offsets are computed."""

from __future__ import annotations

from typing import Any, overload

import numpy as np

from .. import _buffers, _shapes
from ..backends import backend_for
from .._validate import as_array, check_bounds, check_out, native_indices
from .._versions import GATHER_ND, OpVersion
from ._offsets import TakeInto, nd_offsets, slices_shape
from ._types import ArrayT, NDArray, NumPyInput
from ._writes import strings_as_objects


def run_gather_nd(spec: OpVersion, data, indices, batch_dims=0, out=None) -> np.ndarray:
    backend = backend_for(spec, {"data": data, "indices": indices})
    if backend is not None:
        return backend.gather_nd(data, indices, batch_dims, out)
    data, indices = as_array(spec, "data", data), as_array(spec, "indices", indices, np.int64)
    _shapes.output_dtype(spec, data.dtype, indices.dtype)
    out_shape = _shapes.gather_nd_shape(spec, data.shape, indices.shape, batch_dims)
    b, k = int(batch_dims), indices.shape[-1]
    indices, data = native_indices(indices), strings_as_objects(data)
    dims = data.shape[b : b + k]
    rows = indices.reshape(slices_shape(indices.shape, indices.ndim - 1))
    if out is None:
        _shapes.check_output_bytes(spec, out_shape, data.dtype)
    else:  # a caller's buffer: every index is checked before the first write
        target = check_out(spec, out, out_shape, data.dtype, {"data": data, "indices": indices})
        if not target.flags.c_contiguous:  # a strided view: compute (every check), then write through it
            target[...] = run_gather_nd(spec, data, indices, batch_dims)
            return out
        out = target
        check_bounds(spec, indices, dims, np.arange(b, b + k))
    result = _buffers.empty(out_shape, data.dtype) if out is None else out
    slice_size = _shapes.size(data.shape[b + k :])
    if result.size == 0:  # nothing to move, but bad indices are still errors
        check_bounds(spec, indices, dims, np.arange(b, b + k))
        return result
    dst = result.reshape(rows.shape[0], slice_size)
    per_batch = rows.shape[0] // _shapes.size(data.shape[:b]) if b else 1
    if not data.flags.c_contiguous:  # strided or broadcast data: index it where it lies, no full copy
        offsets = nd_offsets(spec, indices, dims, b, per_batch)
        dst[...] = data[np.unravel_index(offsets, data.shape[: b + k])].reshape(dst.shape)
        return result
    src = data.reshape(_shapes.size(data.shape[: b + k]), slice_size)
    if src.dtype.hasobject:  # take on objects holds the GIL: offsets first, one take
        np.take(src, nd_offsets(spec, indices, dims, b, per_batch), 0, dst, "wrap")
        return result
    nd_offsets(spec, indices, dims, b, per_batch, emit=TakeInto(src, dst), checked=out is not None)
    return result


@overload
def gather_nd(data: NumPyInput, indices: Any, batch_dims: int = 0, *, out: NDArray | None = None) -> NDArray: ...
@overload
def gather_nd(data: ArrayT, indices: Any, batch_dims: int = 0, *, out: ArrayT | None = None) -> ArrayT: ...
def gather_nd(data: Any, indices: Any, batch_dims: int = 0, *, out: Any = None) -> Any:
    """GatherND-13: gather slices of ``data`` addressed by index tuples.

    With ``b = batch_dims`` and ``k = indices.shape[-1]``:
    ``output[B..., I...] = data[B..., *indices[B..., I..., :], ...]``.

    Parameters
    ----------
    data : ndarray, shape (B..., D_0..D_{k-1}, R...), rank r >= 1
        Any of the 16 ONNX tensor types (strings: the result is an object array of str).
    indices : ndarray of int64, shape (B..., I..., k), rank q >= 1, 1 <= k <= r - b
        Component ``j`` lies in ``[-D_j, D_j - 1]``.
    batch_dims : int, default 0
        ``0 <= b < min(q, r)``; the first ``b`` dims of data and indices must be equal.
    out : ndarray, optional
        Where to write the result, as for :func:`gather`.

    Returns
    -------
    ndarray, shape ``indices.shape[:-1] + data.shape[b + k:]``, dtype of data (``out`` when given).

    Raises
    ------
    IndexOutOfBoundsError
        A component out of bounds (first bad position, data axis, size, valid range).
    InvalidAttributeError
        ``batch_dims`` out of range.
    ShapeError
        Rank < 1, batch dims that differ, or ``k`` outside ``[1, r - b]``.
    DTypeError
        A data type GatherND-13 does not allow, or indices that are not int64; ``out`` not an
        ndarray of data's dtype.
    ShapeError, InvalidAttributeError
        ``out`` of the wrong shape; read-only, broadcast or overlapping an input.

    Notes
    -----
    Other array libraries: ``data`` may be a PyTorch tensor, a JAX array or any array-API array
    (computed there, returned as one of that library on data's device, with these errors:
    :mod:`gather_scatter.backends`), or a dask array (a lazy result: ``backends.dask``).
    Implements ONNX GatherND-13 (https://onnx.ai/onnx/operators/onnx__GatherND.html); the output
    rank is the summary's ``q + r - k - 1 - b``. The spec's reference loop::

        for (bi..., ii...) in ndindex(indices.shape[:-1]):
            output[bi..., ii...] = data[bi..., *indices[bi..., ii...]]

    Examples
    --------
    >>> import numpy as np
    >>> gather_nd(np.array([[0, 1], [2, 3]]), np.array([[0, 0], [1, 1]]))
    array([0, 3])
    >>> gather_nd(np.array([[[0, 1], [2, 3]], [[4, 5], [6, 7]]]), np.array([[1], [0]]), batch_dims=1)
    array([[2, 3],
           [4, 5]])
    """
    return run_gather_nd(GATHER_ND, data, indices, batch_dims, out=out)
