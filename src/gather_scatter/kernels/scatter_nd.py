"""ScatterND (11, 13, 16, 18): updates written or reduced at index tuples.

The result is a copy of data (or data itself) with the updates applied in row-major order of
the indices.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np

from ..resources import buffers as _buffers
from ..resources import threads as _parallel
from ..rules import dims as _dims
from ..rules import dtypes as _dtypes
from ..rules import shapes as _shapes
from ..rules.validate import as_array, native_indices, same_memory
from ..rules.versions import OpVersion, Reduction
from . import _numba
from ._offsets import nd_offsets
from ._reductions import compiled_form, reduce_into, thread_parts
from ._writes import (
    FUSED_TABLE_BYTES,
    FUSED_UPDATES,
    assign_last_wins,
    checked_target,
    copy_and_scatter_rows,
    copy_and_write_nd,
    copy_into,
    fresh_output,
    last_of_duplicates,
    result_dtype,
    scatter_output,
    strings_as_objects,
)

# Data from which the copy and the writes run fused in compiled code. Below it NumPy's copy and
# writes cost microseconds, and numba (imported on first use, ~0.5 s once per process) stays
# unloaded: `gather-scatter run` on the built-in model never loads it.
FUSED_BYTES = 1 << 20


def run_scatter_nd(spec: OpVersion, data, indices, updates, reduction="none", out=None) -> np.ndarray:
    """ScatterND, any version, with NumPy: ``data`` with ``updates`` written (or reduced) at index tuples.

    The kernel behind :func:`gather_scatter.scatter_nd` for NumPy input, every check included.

    ``spec`` is the version (a registry ``OpVersion``) whose types, attributes and name the
    checks use. The other parameters, the result and the errors, with shapes and dtypes, are
    those of :func:`gather_scatter.scatter_nd`.

    See Also
    --------
    gather_scatter.scatter_nd : The public function (ScatterND-18, any array library).

    Notes
    -----
    Implements ONNX ScatterND (https://onnx.ai/onnx/operators/onnx__ScatterND.html):
    the result of the spec's loop, given in :func:`gather_scatter.scatter_nd`, bit for bit. Every check runs before
    the first write.

    Examples
    --------
    >>> import numpy as np
    >>> from gather_scatter.rules.versions import SCATTER_ND
    >>> run_scatter_nd(SCATTER_ND, np.zeros(3), np.array([[2], [0], [2]]), np.array([1.0, 2.0, 3.0]), "add")
    array([2., 0., 4.])
    """
    in_place = out is not None and same_memory(out, data)
    data = as_array(spec, "data", data)
    indices = as_array(spec, "indices", indices, np.int64)
    updates = as_array(spec, "updates", updates, data.dtype)
    _dtypes.output_dtype(spec, data.dtype, indices.dtype, updates.dtype)
    _shapes.scatter_nd_shape(spec, data.shape, indices.shape, updates.shape)
    reduction = Reduction.parse(spec, reduction)
    _dtypes.check_reduction_type(spec, reduction, data.dtype)
    k = indices.shape[-1]
    indices = native_indices(indices)
    dtype = result_dtype(data.dtype)
    target = checked_target(spec, out, data, dtype, {"indices": indices, "updates": updates}, in_place)
    dims = data.shape[:k]
    offsets = nd_offsets(spec, indices, dims, 0, 1)  # every index checked: nothing written yet
    if not in_place and dtype == data.dtype and (target is None or target.flags.c_contiguous):
        output = _buffers.empty(data.shape, dtype) if target is None else target
        if _copy_and_write(output, data, dims, offsets, updates, reduction):
            return output if out is None else out
        output = scatter_output(data, output, dtype, False)
    else:
        output = scatter_output(data, target, dtype, in_place)
    _write(output, dims, offsets, strings_as_objects(updates), reduction)
    return output if out is None else out


def run_accepted(
    spec: OpVersion,
    data: np.ndarray,
    indices: np.ndarray,
    updates: np.ndarray,
    reduction: Reduction,
    slices: np.ndarray | None,
) -> np.ndarray:
    """Run :func:`run_scatter_nd` for a call whose signature passed every static check before.

    The signature (version, dtypes, shapes, reduction) was accepted on ``_runners``' fast path:
    numeric ``data``, int64 ``indices`` with ``k >= 1``, updates of data's dtype, a fresh
    output. Only what depends on the values remains: the bounds (``slices``, the slice numbers
    of data's first k axes, indexed with NumPy's checked indexing; None: :func:`nd_offsets`),
    then the copy and the writes.

    After a copy of megabytes the caches hold none of the interpreter's state, and each NumPy
    call costs microseconds more than in a loop of small calls: the steps here are few.
    """
    k = indices.shape[-1]
    dims = data.shape[:k]
    output = fresh_output(spec, data.shape, data.dtype)
    if indices.dtype.isnative:
        bad = copy_and_write_nd(output, data, indices, dims, updates, reduction)  # the bounds in the same pass
        if bad is not None:
            if bad >= 0:  # a fresh output, dropped: the error with its facts
                nd_offsets(spec, native_indices(indices), dims, 0, 1)
                raise AssertionError("the compiled loop found a bad index that nd_offsets did not")  # pragma: no cover
            return output
    offsets = _checked_offsets(spec, indices, dims, slices)
    if not _copy_and_write(output, data, dims, offsets, updates, reduction):
        copy_into(output, data)
        _write(output, dims, offsets, updates, reduction)
    return output


#: A planned call: the output, or None where its plan no longer applies (see :func:`plan_accepted`).
Planned = Callable[[OpVersion, np.ndarray, np.ndarray, np.ndarray], "np.ndarray | None"]


def plan_accepted(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, reduction: Reduction) -> Planned | None:
    """Plan :func:`run_accepted`'s compiled reduction for every later call of this signature.

    What ``copy_and_write_nd`` decides per call from the signature alone (that its compiled
    loop applies: a reduction of a dtype it computes, one thread by the cost model, the loop in
    use in this process already; the loop's function, views and codes, the reshapes) is decided
    here once: a call is then the copy, two views and the loop, the same loop on arguments of
    the same types, so the same bits (a ScatterND add of 7 rows of 4 float32: ~3 us against
    ~11). None where ``run_accepted`` would not take that loop now.

    The plan ``run(spec, data, indices, updates)`` takes a call of the same signature whose
    output the caller has judged small (no memory query: ``_calls._small``) and returns the
    output, or None where the thread count changed since (the caller then runs
    :func:`run_accepted` and plans again). A bad index raises its error with the facts, as
    :func:`run_accepted` does; the output is dropped.
    """
    if reduction is Reduction.NONE:  # the cheapest test first: an unplannable call tries every time
        return None
    dtype, k = data.dtype, indices.shape[-1]
    loops = _numba.ready_loops(("rows", dtype.str, reduction))
    form = compiled_form(dtype, reduction)
    dims = data.shape[:k]
    n_rows = _dims.size(dims)
    if loops is None or form is None or not indices.dtype.isnative:
        return None
    if not k or not n_rows or not data.size:
        return None
    n, width = indices.size // k, data.size // n_rows
    threads = _parallel.get_num_threads()
    if (n > FUSED_UPDATES and data.nbytes > FUSED_TABLE_BYTES) or thread_parts(n, updates.nbytes, n_rows) > 1:
        return None
    view, op, half = form
    loop = loops.planned_loop("nd", op, half)
    cast, shape = (None if view == dtype else view), np.array(dims, np.int64)
    # updates of another byte order are converted; indices already (n, k) need no reshape (ravel of
    # a C-contiguous array is a view, at half reshape(-1)'s cost): the loop's argument types as before
    convert, flat = None if updates.dtype == dtype else dtype, indices.ndim == 2

    def run(spec: OpVersion, data: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> np.ndarray | None:
        if _parallel.get_num_threads() != threads:
            return None
        output = data.copy()  # fresh and C-contiguous
        dst, src = output.ravel(), np.ascontiguousarray(updates, dtype=convert).ravel()
        if cast is not None:
            dst, src = dst.view(cast), src.view(cast)
        rows = np.ascontiguousarray(indices)  # read-only views: the loop's own signature (_numba.read_only)
        rows = _numba.read_only(rows.view() if flat else rows.reshape(n, k))
        if loop(dst, rows, shape, _numba.read_only(src), width) >= 0:
            nd_offsets(spec, indices, dims, 0, 1)  # the error with its facts
            raise AssertionError("the compiled loop found a bad index that nd_offsets did not")  # pragma: no cover
        return output

    return run


def write_accepted(
    spec: OpVersion,
    data: np.ndarray,
    indices: np.ndarray,
    updates: np.ndarray,
    reduction: Reduction,
    slices: np.ndarray | None,
) -> None:
    """Write ``updates`` into ``data`` in place, for a call whose signature passed every static check.

    The in-place twin of :func:`run_accepted` (``out=data``, a KV cache's write): ``data`` is
    writeable, broadcast-free and shares no memory with ``indices`` or ``updates`` (the caller
    checked). Every index is checked before the first write (``slices`` with NumPy's checked
    indexing, else :func:`nd_offsets`, which raises the error with its facts), so a bad index
    leaves ``data`` as it was.
    """
    dims = data.shape[: indices.shape[-1]]
    _write(data, dims, _checked_offsets(spec, indices, dims, slices), updates, reduction)


def _checked_offsets(
    spec: OpVersion, indices: np.ndarray, dims: tuple[int, ...], slices: np.ndarray | None
) -> np.ndarray:
    """Return the flat slice number of each index tuple into ``dims``, every index checked.

    ``slices`` (the slice numbers of ``dims``, or None) is indexed with NumPy's checked
    indexing: negatives from the end, IndexError past either end, whereupon (or without
    ``slices``) :func:`nd_offsets` computes them or raises the error with its facts.
    """
    if slices is not None:
        k = indices.shape[-1]
        with contextlib.suppress(IndexError):
            return slices[indices[..., 0] if k == 1 else tuple(indices[..., j] for j in range(k))].reshape(-1)
    return nd_offsets(spec, native_indices(indices), dims, 0, 1)


def _copy_and_write(
    output: np.ndarray,
    data: np.ndarray,
    dims: tuple[int, ...],
    offsets: np.ndarray,
    updates: np.ndarray,
    reduction: Reduction,
) -> bool:
    """Copy ``data`` into ``output`` and write the updates, fused; False where that cannot run.

    ``output`` (C-contiguous, not ``data``) becomes ``data`` with the updates written, in one
    compiled pass per range of slices (:func:`copy_and_scatter_rows`); False, with nothing
    written, where that loop does not apply (no numba, a dtype or layout NumPy must handle).
    """
    n_slices = _dims.size(dims)
    if not (data.nbytes >= FUSED_BYTES and output.flags.c_contiguous and data.flags.c_contiguous):
        return False
    shape = (n_slices, data.size // n_slices)
    return copy_and_scatter_rows(
        output.reshape(shape), data.reshape(shape), offsets, updates.reshape(offsets.size, shape[1]), reduction
    )


def _write(
    output: np.ndarray, dims: tuple[int, ...], offsets: np.ndarray, updates: np.ndarray, reduction: Reduction
) -> None:
    """Write or reduce the updates (row-major order) into the slices of ``output`` at ``offsets``.

    ``offsets`` are flat, into ``output``'s first ``len(dims)`` axes; any layout of ``output``.
    """
    slice_shape = output.shape[len(dims) :]
    if not output.flags.c_contiguous:  # a strided view (a cache slice): address it by coordinates
        values = updates.reshape((offsets.size, *slice_shape))
        if reduction is Reduction.NONE:
            winners = last_of_duplicates(offsets, _dims.size(dims))
            if winners is not None:
                offsets, values = offsets[winners], values[winners]
            output[np.unravel_index(offsets, dims)] = values
        else:
            reduce_into(output, offsets, values, reduction, dims)
        return
    n_slices = _dims.size(dims)
    if slice_shape and _dims.size(slice_shape) != 1:
        target = output.reshape((n_slices, *slice_shape))
        values = updates.reshape((offsets.size, *slice_shape))
    else:  # one element per update: the 1-D fast paths of put and ufunc.at
        target = output.reshape(n_slices)
        values = updates.reshape(offsets.size)
    if reduction is Reduction.NONE:
        assign_last_wins(target, offsets, values)
    else:  # updates applied in row-major order: the spec's loop, bit for bit
        reduce_into(target, offsets, values, reduction)
