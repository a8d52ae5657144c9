"""ScatterND (11, 13, 16, 18): a copy of data (or data itself) with updates written or reduced at
index tuples, in row-major order of the indices."""

from __future__ import annotations

import numpy as np

from .. import _shapes
from .._validate import as_array, native_indices, same_memory
from .._versions import OpVersion, Reduction
from ._offsets import nd_offsets
from ._writes import (
    assign_last_wins, checked_target, last_of_duplicates, reduce_into, result_dtype, scatter_output,
    strings_as_objects,
)


def run_scatter_nd(spec: OpVersion, data, indices, updates, reduction="none", out=None) -> np.ndarray:
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
            reduce_into(output, offsets, values, reduction, dims)
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
    else:  # updates applied in row-major order: the spec's loop, bit for bit
        reduce_into(target, offsets, values, reduction)
