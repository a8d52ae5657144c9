"""ScatterND (11, 13, 16, 18): a copy of data (or data itself) with updates written or reduced at
index tuples, in row-major order of the indices."""

from __future__ import annotations

from typing import Any, overload

import numpy as np

from .. import _shapes
from ..backends import backend_for
from .._validate import as_array, native_indices, same_memory
from .._versions import SCATTER_ND, OpVersion, Reduction
from ._offsets import nd_offsets
from ._types import ArrayT, NDArray, NumPyInput, ReductionName
from ._writes import (
    UFUNCS, assign_last_wins, checked_target, last_of_duplicates, result_dtype, scatter_output, strings_as_objects,
)


def run_scatter_nd(spec: OpVersion, data, indices, updates, reduction="none", out=None) -> np.ndarray:
    backend = backend_for(spec, {"data": data, "indices": indices, "updates": updates})
    if backend is not None:
        return backend.scatter_nd(data, indices, updates, reduction, out)
    in_place = out is not None and same_memory(out, data)
    data = as_array(spec, "data", data)
    indices = as_array(spec, "indices", indices, np.int64)
    updates = as_array(spec, "updates", updates, data.dtype)
    _shapes.output_dtype(spec, data.dtype, indices.dtype, updates.dtype)
    _shapes.scatter_nd_shape(spec, data.shape, indices.shape, updates.shape)
    reduction = Reduction.parse(spec, reduction)
    _shapes.check_reduction_type(spec, reduction, data.dtype)
    k = indices.shape[-1]
    indices = native_indices(indices)
    dtype = result_dtype(data.dtype)
    target = checked_target(spec, out, data, dtype, {"indices": indices, "updates": updates}, in_place)
    dims = data.shape[:k]
    offsets = nd_offsets(spec, indices, dims, 0, 1)  # every index checked: nothing written yet
    output = scatter_output(data, target, dtype, in_place)
    _write(output, dims, offsets, strings_as_objects(updates), reduction)
    return output if out is None else out


def _write(output: np.ndarray, dims: tuple[int, ...], offsets: np.ndarray, updates: np.ndarray,
           reduction: Reduction) -> None:
    """Write or reduce the updates (row-major order) into the slices of ``output`` at
    ``offsets`` (flat, into its first ``len(dims)`` axes), whatever ``output``'s layout."""
    slice_shape = output.shape[len(dims):]
    if not output.flags.c_contiguous:  # a strided view (a cache slice): address it by coordinates
        values = updates.reshape((offsets.size,) + slice_shape)
        if reduction is Reduction.NONE:
            winners = last_of_duplicates(offsets, _shapes.size(dims))
            if winners is not None:
                offsets, values = offsets[winners], values[winners]
            output[np.unravel_index(offsets, dims)] = values
        else:
            with np.errstate(invalid="ignore"):  # NaN in max/min: as quiet as np.maximum itself
                UFUNCS[reduction].at(output, np.unravel_index(offsets, dims), values)
        return
    n_slices = _shapes.size(dims)
    if slice_shape and _shapes.size(slice_shape) != 1:
        target = output.reshape((n_slices,) + slice_shape)
        values = updates.reshape((offsets.size,) + slice_shape)
    else:  # one element per update: the 1-D fast paths of put and ufunc.at
        target = output.reshape(n_slices)
        values = updates.reshape(offsets.size)
    if reduction is Reduction.NONE:
        assign_last_wins(target, offsets, values)
    else:  # ufunc.at applies updates one by one in row-major order: the spec's loop, bit for bit
        with np.errstate(invalid="ignore"):  # NaN in max/min: as quiet as np.maximum itself
            UFUNCS[reduction].at(target, offsets, values)


@overload
def scatter_nd(data: NumPyInput, indices: Any, updates: Any, reduction: ReductionName = "none", *,
               out: NDArray | None = None) -> NDArray: ...
@overload
def scatter_nd(data: ArrayT, indices: Any, updates: Any, reduction: ReductionName = "none", *,
               out: ArrayT | None = None) -> ArrayT: ...
def scatter_nd(
    data: Any,
    indices: Any,
    updates: Any,
    reduction: ReductionName = "none",
    *,
    out: Any = None,
) -> Any:
    """ScatterND-18: a copy of ``data`` with ``updates`` written (or reduced) at index tuples.

    Parameters
    ----------
    data : ndarray, shape (D_0..D_{k-1}, R...), rank r >= 1
        Any of the 16 ONNX tensor types. Never modified, unless ``out`` is data's memory (data or an identical view).
    indices : ndarray of int64, shape (I..., k), rank q >= 1, 0 <= k <= r
        Component ``j`` lies in ``[-D_j, D_j - 1]`` (negatives as in GatherND).
    updates : ndarray, shape ``indices.shape[:-1] + data.shape[k:]``, dtype of data
    reduction : {'none', 'add', 'mul', 'max', 'min'}, default 'none'
        Bool: add = or, mul = and, max = or, min = and. Strings: add concatenates,
        max/min compare by code point, mul is a DTypeError. Complex max/min is a DTypeError.
        Numeric max/min are ``np.maximum``/``np.minimum``, as in the spec's loop: NaN
        propagates, and a signed-zero tie resolves as NumPy does for the dtype.
    out : ndarray, optional
        Where to write the result. ``out=data`` updates ``data`` in place, at a cost that
        follows the updates, not the size of ``data`` (a KV-cache write; the same view made
        again, ``c[:, 3]`` twice, is data too). Any other ``out``
        (writeable, any layout, data's shape and the result's dtype: object for strings) must not
        overlap ``data``, ``indices`` or ``updates``; ``data`` is copied into it first.

    Returns
    -------
    ndarray, shape and dtype of data (strings: an object array of str); ``out`` when given.

    Raises
    ------
    IndexOutOfBoundsError, ShapeError, InvalidAttributeError, DTypeError
        Every check runs before the first write, so on an error ``out`` (``data`` itself
        included) is unchanged. ``out`` faults: DTypeError (not an ndarray, wrong dtype),
        ShapeError (wrong shape), InvalidAttributeError (read-only, broadcast, or overlapping
        an input other than ``data`` itself). ``data`` itself may be any writeable view (a
        slice of a bigger cache): the updates are written through it.

    Notes
    -----
    Other array libraries: ``data`` may be a PyTorch tensor, a JAX array or any array-API array
    (computed there, returned as one of that library on data's device, with these errors:
    :mod:`gather_scatter.backends`), or a dask array (a lazy result: ``backends.dask``).
    Implements ONNX ScatterND-16 and the max/min of ScatterND-18
    (https://onnx.ai/onnx/operators/onnx__ScatterND.html).
    In place (``out=data``) is safe whenever no other thread reads or writes ``data`` during
    the call and nothing else expects the old values: the result is the same as the copy's,
    and an invalid call leaves ``data`` untouched. It is not safe when ``updates`` or
    ``indices`` are views of ``data`` (refused with InvalidAttributeError).
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
    return run_scatter_nd(SCATTER_ND, data, indices, updates, reduction, out=out)
