"""Gather (1, 11, 13): entries along one axis, by ``np.take`` into the output on the pool."""

from __future__ import annotations

from typing import Any, overload

import numpy as np

from .. import _buffers, _parallel, _shapes
from ..backends import backend_for
from .._validate import as_array, check_bounds, check_out, native_indices
from .._versions import GATHER, OpVersion
from ._types import ArrayT, NDArray, NumPyInput
from ._writes import strings_as_objects


def run_gather(spec: OpVersion, data, indices, axis=0, out=None) -> np.ndarray:
    backend = backend_for(spec, {"data": data, "indices": indices})
    if backend is not None:
        return backend.gather(data, indices, axis, out)
    data, indices = as_array(spec, "data", data), as_array(spec, "indices", indices, np.int64)
    _shapes.output_dtype(spec, data.dtype, indices.dtype)
    out_shape = _shapes.gather_shape(spec, data.shape, indices.shape, axis)
    ax = _shapes.normalize_axis(spec, axis, data.ndim)
    indices, data = native_indices(indices), strings_as_objects(data)
    if out is None:
        _shapes.check_output_bytes(spec, out_shape, data.dtype)
    else:
        target = check_out(spec, out, out_shape, data.dtype, {"data": data, "indices": indices})
        if not target.flags.c_contiguous:  # a strided view: compute (every check), then write through it
            target[...] = run_gather(spec, data, indices, axis)
            return out
        out = target
    check_bounds(spec, indices, data.shape[ax], ax)
    if out is None and data.dtype.hasobject and data.flags.c_contiguous:
        # take's own new object array starts empty; np.empty's is filled with None first.
        return np.take(data, indices.reshape(-1), axis=ax, mode="wrap").reshape(out_shape)
    result = _buffers.empty(out_shape, data.dtype) if out is None else out
    if result.size == 0:
        return result
    if not data.flags.c_contiguous:  # strided or broadcast data: index it where it lies, no full copy
        result[...] = data[(slice(None),) * ax + (indices,)]
        return result
    outer, inner = _shapes.size(data.shape[:ax]), _shapes.size(data.shape[ax + 1 :])
    src = data.reshape(outer, data.shape[ax], inner)
    # A rank-0 index is a length-1 vector here; result keeps the rank-0 output shape.
    dst = result.reshape(outer, indices.size, inner)
    _take_rows(src, indices.reshape(-1), dst)
    return result


def _take_rows(src: np.ndarray, idx: np.ndarray, dst: np.ndarray) -> None:
    """``dst[o, i] = src[o, idx[i]]`` for checked ``idx`` (negatives allowed), on the pool.

    Threads get disjoint ranges of the outer dim, or of ``idx`` when there is one outer row
    (the only case where a range of ``dst`` stays contiguous). ``mode='wrap'`` maps the checked
    negatives and, unlike 'raise', lets take write straight into ``dst`` without a buffer.
    """
    if src.dtype.hasobject or dst.nbytes < 2 * _parallel.MIN_CHUNK_BYTES:
        # One call: object copies hold the GIL, and small copies cost less than a hand-off.
        np.take(src, idx, 1, dst, "wrap")
        return
    if dst.shape[0] == 1:
        chunks = _parallel.ranges(dst.shape[1], dst.nbytes)
        _parallel.run(lambda lo, hi: np.take(src[0], idx[lo:hi], 0, dst[0, lo:hi], "wrap"), chunks)
    else:
        chunks = _parallel.ranges(dst.shape[0], dst.nbytes)
        _parallel.run(lambda lo, hi: np.take(src[lo:hi], idx, 1, dst[lo:hi], "wrap"), chunks)


@overload
def gather(data: NumPyInput, indices: Any, axis: int = 0, *, out: NDArray | None = None) -> NDArray: ...
@overload
def gather(data: ArrayT, indices: Any, axis: int = 0, *, out: ArrayT | None = None) -> ArrayT: ...
def gather(data: Any, indices: Any, axis: int = 0, *, out: Any = None) -> Any:
    """Gather-13: take entries of ``data`` along ``axis`` at ``indices``.

    ``output[j_0..j_{axis-1}, i_0..i_{q-1}, j_{axis+1}..] = data[j_0..j_{axis-1}, indices[i_0..i_{q-1}], j_{axis+1}..]``

    Parameters
    ----------
    data : ndarray, shape (D_0, ..., D_{r-1}), r >= 1
        Any of the 16 ONNX tensor types (strings as object, ``U`` or ``S`` arrays; bfloat16 via
        ml_dtypes).
    indices : ndarray of int32 or int64, any shape (Q...), rank 0 allowed
        Values in ``[-s, s-1]`` where ``s = data.shape[axis]``; negatives count from the end.
    axis : int, default 0
        In ``[-r, r-1]``.
    out : ndarray, optional
        Where to write the result: writeable, any layout (a strided view is written through), of
        exactly the output's shape and dtype, sharing no memory with ``data`` or ``indices``.
        Nothing is written to it unless every index is valid.

    Returns
    -------
    ndarray, shape ``data.shape[:axis] + indices.shape + data.shape[axis+1:]``, dtype of data
        (strings: an object array of str). ``out`` when given.

    Raises
    ------
    IndexOutOfBoundsError
        An index outside ``[-s, s-1]``; the message names the first bad position.
    InvalidAttributeError
        ``axis`` outside ``[-r, r-1]``.
    ShapeError
        ``data`` is a scalar.
    DTypeError
        A data or index type Gather-13 does not allow; ``out`` not an ndarray of data's dtype.
    ShapeError, InvalidAttributeError
        ``out`` of the wrong shape; read-only, broadcast or overlapping an input.

    Notes
    -----
    Other array libraries: ``data`` may be a PyTorch tensor, a JAX array or any array-API array
    (computed there, returned as one of that library on data's device, with these errors:
    :mod:`gather_scatter.backends`), or a dask array (a lazy result: ``backends.dask``).
    Implements ONNX Gather-13 (https://onnx.ai/onnx/operators/onnx__Gather.html; bounds as in
    Gather-11 for every version).
    The reference is ``numpy.take(data, indices, axis)`` after the bounds check.

    Examples
    --------
    >>> import numpy as np
    >>> gather(np.array([[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]]), np.array([[0, 1], [1, 2]])).shape
    (2, 2, 2)
    >>> gather(np.arange(10), np.array([0, -9, -10]))
    array([0, 1, 0])
    """
    return run_gather(GATHER, data, indices, axis, out=out)
