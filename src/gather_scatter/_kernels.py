"""Vectorized Gather, GatherND and ScatterND.

Each kernel runs: validate (shape rule, dtypes, index bounds) -> linear offsets -> one
NumPy take / assignment / ``ufunc.at``. Nothing is written before everything is checked, and
no caller array is modified. The ``spec`` argument only names the version in errors and
says what it allows; the computation is the same for every version.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from . import _shapes
from ._validate import as_array, check_bounds, linear_offsets, native_indices
from ._versions import GATHER, GATHER_ND, SCATTER_ND, OpVersion, Reduction

_UFUNCS = {
    Reduction.ADD: np.add,
    Reduction.MUL: np.multiply,
    Reduction.MAX: np.maximum,
    Reduction.MIN: np.minimum,
}


def _strings_as_objects(array: np.ndarray) -> np.ndarray:
    # Fixed-width str/bytes arrays would truncate scattered or concatenated strings.
    return array.astype(object) if array.dtype.kind in "US" else array


def run_gather(spec: OpVersion, data, indices, axis=0) -> np.ndarray:
    data, indices = as_array(spec, "data", data), as_array(spec, "indices", indices)
    _shapes.output_dtype(spec, data.dtype, indices.dtype)
    out_shape = _shapes.gather_shape(spec, data.shape, indices.shape, axis)
    _shapes.check_output_bytes(spec, out_shape, data.dtype)
    ax = _shapes.normalize_axis(spec, axis, data.ndim)
    indices = native_indices(indices)
    check_bounds(spec, indices, data.shape[ax], ax)
    # A rank-0 index into rank-1 data makes np.take return a bare element (a str for object
    # arrays, with no .reshape): take a length-1 vector and reshape it to the rank-0 output.
    return np.take(data, indices.reshape(indices.shape or (1,)), axis=ax).reshape(out_shape)


def _slices_shape(shape: tuple[int, ...], lead: int) -> tuple[int, ...]:
    # Explicit, since reshape(-1, ...) is ambiguous when a trailing dim is 0.
    return (_shapes.size(shape[:lead]),) + shape[lead:]


def _nd_offsets(spec: OpVersion, indices: np.ndarray, data_shape: tuple[int, ...], batch_dims: int) -> np.ndarray:
    """Checked flat offsets into ``data.reshape(-1, *data_shape[b + k:])``, shape ``(N,)``."""
    k = indices.shape[-1]
    dims = data_shape[batch_dims : batch_dims + k]
    indices = native_indices(indices)
    check_bounds(spec, indices, dims, np.arange(batch_dims, batch_dims + k))
    offsets = linear_offsets(indices.reshape(_slices_shape(indices.shape, indices.ndim - 1)), dims)
    if batch_dims:
        batches = _shapes.size(data_shape[:batch_dims])
        per_batch = offsets.reshape(batches, _shapes.size(indices.shape[batch_dims:-1]))
        per_batch += (np.arange(batches, dtype=np.int64) * _shapes.size(dims))[:, None]
    return offsets


def run_gather_nd(spec: OpVersion, data, indices, batch_dims=0) -> np.ndarray:
    data, indices = as_array(spec, "data", data), as_array(spec, "indices", indices)
    _shapes.output_dtype(spec, data.dtype, indices.dtype)
    out_shape = _shapes.gather_nd_shape(spec, data.shape, indices.shape, batch_dims)
    _shapes.check_output_bytes(spec, out_shape, data.dtype)
    b, k = int(batch_dims), indices.shape[-1]
    offsets = _nd_offsets(spec, indices, data.shape, b)
    slices = data.reshape(_slices_shape(data.shape, b + k))
    return slices.take(offsets, axis=0).reshape(out_shape)


def run_scatter_nd(spec: OpVersion, data, indices, updates, reduction="none") -> np.ndarray:
    data = as_array(spec, "data", data)
    indices = as_array(spec, "indices", indices)
    updates = as_array(spec, "updates", updates)
    _shapes.output_dtype(spec, data.dtype, indices.dtype, updates.dtype)
    _shapes.scatter_nd_shape(spec, data.shape, indices.shape, updates.shape)
    _shapes.check_output_bytes(spec, data.shape, data.dtype)
    reduction = Reduction.parse(spec, reduction)
    _shapes.check_reduction_type(spec, reduction, data.dtype)
    k = indices.shape[-1]
    offsets = _nd_offsets(spec, indices, data.shape, 0)

    output = np.array(_strings_as_objects(data), order="C", copy=True)
    slice_shape = data.shape[k:]
    target = output.reshape(_slices_shape(data.shape, k))
    values = _strings_as_objects(updates).reshape((offsets.size,) + slice_shape)
    if reduction is Reduction.NONE:
        _assign_last_wins(target, offsets, values)
    else:
        _UFUNCS[reduction].at(target, offsets, values)
    return output


def _assign_last_wins(target: np.ndarray, offsets: np.ndarray, values: np.ndarray) -> None:
    """``target[offsets[i]] = values[i]`` in order of ``i``; with duplicates the last one wins.

    NumPy does not promise an order for repeated fancy-index assignment, so each destination
    is written exactly once, from its last update.
    """
    if offsets.size > 1:
        order = np.argsort(offsets, kind="stable")
        ordered = offsets[order]
        last = np.empty(ordered.size, dtype=bool)
        np.not_equal(ordered[1:], ordered[:-1], out=last[:-1])
        last[-1] = True
        offsets, values = ordered[last], values[order[last]]
    target[offsets] = values


def gather(data, indices, axis: int = 0) -> np.ndarray:
    """Gather-13: take entries of ``data`` along ``axis`` at ``indices``.

    ``output[j_0..j_{axis-1}, i_0..i_{q-1}, j_{axis+1}..] = data[j_0..j_{axis-1}, indices[i_0..i_{q-1}], j_{axis+1}..]``

    Parameters
    ----------
    data : ndarray, shape (D_0, ..., D_{r-1}), r >= 1
        Any of the 16 ONNX tensor types (strings as object arrays, bfloat16 via ml_dtypes).
    indices : ndarray of int32 or int64, any shape (Q...), rank 0 allowed
        Values in ``[-s, s-1]`` where ``s = data.shape[axis]``; negatives count from the end.
    axis : int, default 0
        In ``[-r, r-1]``.

    Returns
    -------
    ndarray, shape ``data.shape[:axis] + indices.shape + data.shape[axis+1:]``, dtype of data.

    Raises
    ------
    IndexOutOfBoundsError
        An index outside ``[-s, s-1]``; the message names the first bad position.
    InvalidAttributeError
        ``axis`` outside ``[-r, r-1]``.
    ShapeError
        ``data`` is a scalar.
    DTypeError
        A data or index type Gather-13 does not allow.

    Notes
    -----
    Implements ONNX Gather-13 (``Gather-1-11-13.rst``; bounds as in Gather-11 for every version).
    The reference is ``numpy.take(data, indices, axis)`` after the bounds check.

    Examples
    --------
    >>> import numpy as np
    >>> gather(np.array([[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]]), np.array([[0, 1], [1, 2]])).shape
    (2, 2, 2)
    >>> gather(np.arange(10), np.array([0, -9, -10]))
    array([0, 1, 0])
    """
    return run_gather(GATHER, data, indices, axis)


def gather_nd(data, indices, batch_dims: int = 0) -> np.ndarray:
    """GatherND-13: gather slices of ``data`` addressed by index tuples.

    With ``b = batch_dims`` and ``k = indices.shape[-1]``:
    ``output[B..., I...] = data[B..., *indices[B..., I..., :], ...]``.

    Parameters
    ----------
    data : ndarray, shape (B..., D_0..D_{k-1}, R...), rank r >= 1
        Any of the 16 ONNX tensor types.
    indices : ndarray of int64, shape (B..., I..., k), rank q >= 1, 1 <= k <= r - b
        Component ``j`` lies in ``[-D_j, D_j - 1]``.
    batch_dims : int, default 0
        ``0 <= b < min(q, r)``; the first ``b`` dims of data and indices must be equal.

    Returns
    -------
    ndarray, shape ``indices.shape[:-1] + data.shape[b + k:]``, dtype of data.

    Raises
    ------
    IndexOutOfBoundsError
        A component out of bounds (first bad position, data axis, size, valid range).
    InvalidAttributeError
        ``batch_dims`` out of range.
    ShapeError
        Rank < 1, batch dims that differ, or ``k`` outside ``[1, r - b]``.
    DTypeError
        A data type GatherND-13 does not allow, or indices that are not int64.

    Notes
    -----
    Implements ONNX GatherND-13 (``GatherND-11-12-13.rst``); the output rank is the summary's
    ``q + r - k - 1 - b``. The spec's reference loop::

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
    return run_gather_nd(GATHER_ND, data, indices, batch_dims)


def scatter_nd(
    data, indices, updates, reduction: Literal["none", "add", "mul", "max", "min"] = "none"
) -> np.ndarray:
    """ScatterND-18: a copy of ``data`` with ``updates`` written (or reduced) at index tuples.

    Parameters
    ----------
    data : ndarray, shape (D_0..D_{k-1}, R...), rank r >= 1
        Any of the 16 ONNX tensor types. Never modified.
    indices : ndarray of int64, shape (I..., k), rank q >= 1, 0 <= k <= r
        Component ``j`` lies in ``[-D_j, D_j - 1]`` (negatives as in GatherND).
    updates : ndarray, shape ``indices.shape[:-1] + data.shape[k:]``, dtype of data
    reduction : {'none', 'add', 'mul', 'max', 'min'}, default 'none'
        Bool: add = or, mul = and, max = or, min = and. Strings: add concatenates,
        max/min compare by code point, mul is a DTypeError. Complex max/min is a DTypeError.

    Returns
    -------
    ndarray, shape and dtype of data (strings as object arrays).

    Raises
    ------
    IndexOutOfBoundsError, ShapeError, InvalidAttributeError, DTypeError

    Notes
    -----
    Implements ONNX ScatterND-16 and the max/min of ScatterND-18 (``ScatterND-11-13-16.rst``).
    Duplicates apply in row-major order of ``indices``, the result of the spec's loop, bit
    for bit (float16/bfloat16 round after every update)::

        output = np.copy(data)
        for idx in np.ndindex(indices.shape[:-1]):
            output[tuple(indices[idx])] = f(output[tuple(indices[idx])], updates[idx])

    Examples
    --------
    >>> import numpy as np
    >>> scatter_nd(np.arange(1, 9), np.array([[4], [3], [1], [7]]), np.array([9, 10, 11, 12]))
    array([ 1, 11,  3, 10,  9,  6,  7, 12])
    >>> scatter_nd(np.zeros(2), np.array([[0], [0]]), np.array([1.0, 2.0]), reduction="add")
    array([3., 0.])
    """
    return run_scatter_nd(SCATTER_ND, data, indices, updates, reduction)
