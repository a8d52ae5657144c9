"""GatherElements, ScatterElements and Scatter: one index per element, along one axis.

Each kernel runs: validate (shape rule, dtypes, index bounds) -> one compiled pass per chunk
on the thread pool (``_numba``: read an index, check it, move one element) where the
dtype and layout allow, else NumPy (``take_along_axis``, fancy assignment, ``ufunc.at``).
Nothing is written to a caller's array before every index is checked. Strings come back as
object arrays of ``str``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ..resources import buffers as _buffers
from ..resources import threads as _parallel
from ..rules import dims as _dims
from ..rules import dtypes as _dtypes
from ..rules import shapes as _shapes
from ..rules.validate import as_array, check_bounds, check_out, native_indices, same_memory
from ..rules.versions import OpVersion, Reduction
from . import _codes, _numba
from ._reductions import UFUNCS, compiled_form, compiled_operands
from ._writes import (
    bits,
    cached_output,
    checked_target,
    copy_into,
    fresh_output,
    last_of_duplicates,
    result_dtype,
    scatter_output,
    strings_as_objects,
)


def _c_strides(shape: tuple[int, ...]) -> np.ndarray:
    """C strides in elements (from the shape: size-1 dims may carry any stride in NumPy)."""
    strides = np.ones(len(shape), dtype=np.int64)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    return strides


def _copyable(array: np.ndarray) -> bool:
    return array.flags.c_contiguous and not array.dtype.hasobject and array.dtype.itemsize in (1, 2, 4, 8)


def _window(array: np.ndarray, shape: tuple[int, ...], axis: int) -> np.ndarray:
    """``array`` cut to ``shape`` on every axis but ``axis`` (a view)."""
    return array[tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(shape))]


def run_gather_elements(spec: OpVersion, data, indices, axis=0, out=None) -> np.ndarray:
    """GatherElements, any version, with NumPy: one element of ``data`` per index, along ``axis``.

    The kernel behind :func:`gather_scatter.gather_elements` for NumPy input, every check
    included: ``output[i...] = data[i... with the axis coordinate = indices[i...]]``.

    ``spec`` is the version (a registry ``OpVersion``) whose types, attributes and name the
    checks use. The other parameters, the result and the errors, with shapes and dtypes, are
    those of :func:`gather_scatter.gather_elements`.

    See Also
    --------
    gather_scatter.gather_elements : The public function (GatherElements-13, any array library).

    Notes
    -----
    Implements ONNX GatherElements (https://onnx.ai/onnx/operators/onnx__GatherElements.html):
    the result of the spec's loop, given in :func:`gather_scatter.gather_elements`, bit for bit. Every check runs before
    the first write.

    Examples
    --------
    >>> import numpy as np
    >>> from gather_scatter.rules.versions import GATHER_ELEMENTS
    >>> run_gather_elements(GATHER_ELEMENTS, np.array([[1, 2], [3, 4]]), np.array([[1, -2]]), axis=1)
    array([[2, 1]])
    """
    data, indices = as_array(spec, "data", data), as_array(spec, "indices", indices, np.int64)
    _dtypes.output_dtype(spec, data.dtype, indices.dtype)
    out_shape = _dims.concrete(_shapes.gather_elements_shape(spec, data.shape, indices.shape, axis))
    ax = _dims.normalize_axis(spec, axis, data.ndim)
    indices, size, data = native_indices(indices), data.shape[ax], strings_as_objects(data)
    dtype = data.dtype
    if out is None:
        result = cached_output(spec, out_shape, dtype)
        result = _buffers.empty(out_shape, dtype) if result is None else result
    else:  # a caller's buffer (any layout): every index is checked before the first write
        result = check_out(spec, out, out_shape, dtype, {"data": data, "indices": indices})
        check_bounds(spec, indices, size, ax)
    loops = (
        _numba.loops_for(result.size, ("gather_elements", dtype.itemsize, indices.dtype.str)) if result.size else None
    )
    if loops is not None and _copyable(data) and result.flags.c_contiguous:
        src, dst = _numba.read_only(bits(data)), bits(result)
        flat = _numba.read_only(np.ascontiguousarray(indices).reshape(-1))
        shape, strides = np.array(indices.shape, dtype=np.int64), _c_strides(data.shape)
        work = flat.size * (flat.itemsize + data.itemsize)
        if ax == data.ndim - 1 and indices.shape[:-1] == data.shape[:-1]:  # whole rows: prefetched
            n, rows = indices.shape[-1], _dims.size(indices.shape[:-1])
            bad = _parallel.run(
                lambda lo, hi: loops.gather_last(src, flat, dst, size, n, lo, hi), _parallel.ranges(rows, work)
            )
        else:
            bad = _parallel.run(
                lambda lo, hi: loops.gather(src, flat, dst, shape, strides, ax, size, lo, hi),
                _parallel.ranges(flat.size, work),
            )
        if max(bad) >= 0:
            check_bounds(spec, indices, size, ax)
            raise AssertionError("the compiled loop found a bad index that check_bounds did not")  # pragma: no cover
        return result if out is None else out
    check_bounds(spec, indices, size, ax)
    if result.size:
        result[...] = np.take_along_axis(_window(data, indices.shape, ax), indices, ax)
    return result if out is None else out


def run_scatter_elements(spec: OpVersion, data, indices, updates, axis=0, reduction="none", out=None) -> np.ndarray:
    """ScatterElements or Scatter, any version, with NumPy: ``data`` with each update applied along ``axis``.

    The kernel behind :func:`gather_scatter.scatter_elements` for NumPy input, every check
    included: each update is written (or reduced) at its index along ``axis``.

    ``spec`` is the version (a registry ``OpVersion``) whose types, attributes and name the
    checks use. The other parameters, the result and the errors, with shapes and dtypes, are
    those of :func:`gather_scatter.scatter_elements`.

    See Also
    --------
    gather_scatter.scatter_elements : The public function (ScatterElements-18, any array library).

    Notes
    -----
    Implements ONNX ScatterElements (https://onnx.ai/onnx/operators/onnx__ScatterElements.html):
    the result of the spec's loop, given in :func:`gather_scatter.scatter_elements`, bit for bit.
    Every check runs before the first write.

    Examples
    --------
    >>> import numpy as np
    >>> from gather_scatter.rules.versions import SCATTER_ELEMENTS
    >>> run_scatter_elements(SCATTER_ELEMENTS, np.zeros(2), np.array([1, 1, 0]), np.array([1.0, 2.0, 3.0]), 0, "max")
    array([3., 2.])
    """
    in_place = out is not None and same_memory(out, data)
    data = as_array(spec, "data", data)
    indices = as_array(spec, "indices", indices, np.int64)
    updates = as_array(spec, "updates", updates, data.dtype)
    _dtypes.output_dtype(spec, data.dtype, indices.dtype, updates.dtype)
    _shapes.scatter_elements_shape(spec, data.shape, indices.shape, updates.shape, axis)
    ax = _dims.normalize_axis(spec, axis, data.ndim)
    reduction = Reduction.parse(spec, reduction)
    _dtypes.check_reduction_type(spec, reduction, data.dtype)
    indices = native_indices(indices)
    dtype = result_dtype(data.dtype)
    target = checked_target(spec, out, data, dtype, {"indices": indices, "updates": updates}, in_place)
    check_bounds(spec, indices, data.shape[ax], ax)  # every index checked: nothing written yet
    output = scatter_output(data, target, dtype, in_place)
    if indices.size and _scatter_compiled(output, indices, updates, ax, reduction) is None:
        _scatter_numpy(output, indices, updates, ax, reduction)
    return output if out is None else out


def run_scatter_accepted(
    spec: OpVersion, data: np.ndarray, indices: np.ndarray, updates: np.ndarray, ax: int, reduction: Reduction
) -> np.ndarray:
    """Run :func:`run_scatter_elements` for a call whose signature passed every static check before.

    The signature (version, dtypes, shapes, axis, reduction) was accepted on ``_runners``' fast
    path: numeric ``data``, native ``indices``, a fresh output. Only what depends on the values
    remains: the bounds, then the copy and the writes.
    """
    output = fresh_output(spec, data.shape, data.dtype)
    copy_into(output, data)
    if indices.size:
        bad = _scatter_compiled(output, indices, updates, ax, reduction)  # the bounds in the same pass
        if bad is None:
            check_bounds(spec, indices, data.shape[ax], ax)
            _scatter_numpy(output, indices, updates, ax, reduction)
        elif bad >= 0:  # a fresh output, dropped: the error with its facts
            check_bounds(spec, indices, data.shape[ax], ax)
            raise AssertionError("the compiled loop found a bad index that check_bounds did not")  # pragma: no cover
    return output


def plan_scatter_accepted(
    data: np.ndarray, indices: np.ndarray, updates: np.ndarray, ax: int, reduction: Reduction
) -> Callable[[OpVersion, np.ndarray, np.ndarray, np.ndarray], np.ndarray | None] | None:
    """Plan :func:`run_scatter_accepted`'s compiled call for every later call of this signature.

    What :func:`_scatter_compiled` decides per call from the signature alone (its loop applies:
    a dtype it computes, the loop in use in this process already, one call on one thread by the
    layout; the loop's function, arguments, views and codes) is decided here once, as
    ``scatter_nd.plan_accepted`` does for ScatterND: a call is the copy, the views and the
    loop, on arguments of the same types (the same bits). None where that loop would not run
    on one thread now. The plan takes a call of the same signature whose output the caller
    judged small and returns the output, or None where the thread count changed since; a bad
    index raises its error with the facts.
    """
    dtype = data.dtype
    loops = _numba.ready_loops(("scatter_elements", dtype.str, reduction))
    if loops is None or not indices.size or not indices.dtype.isnative or not dtype.isnative:
        return None
    if dtype.hasobject or dtype.itemsize not in (1, 2, 4, 8):  # the output's _copyable, any layout of data
        return None
    form: tuple[np.dtype, int, int | None] | None = (np.dtype(f"u{dtype.itemsize}"), _codes.NONE, None)
    if reduction is not Reduction.NONE:
        form = compiled_form(dtype, reduction)
    if form is None:
        return None
    view, op, half = form
    threads = _parallel.get_num_threads()
    axis_calls = _axis_layout(data.shape, indices.shape, ax, dtype.itemsize, threads)
    args: tuple
    if axis_calls is not None:
        (_, n, inner, size), calls = axis_calls
        loop, args = loops.planned_loop("axis", op, half), (n, inner, size, *calls[0])
    elif half:  # the general loop computes in the type itself: NumPy's path
        return None
    else:
        shape, strides, calls = _scatter_layout(data.shape, indices.shape, ax, dtype.itemsize, threads)
        loop, args = loops.scatter, (shape, strides, ax, data.shape[ax], op, *calls[0])
    if len(calls) != 1:
        return None
    cast, size = (None if view == dtype else view), data.shape[ax]
    convert = None if updates.dtype == dtype else dtype  # another byte order: converted

    def run(spec: OpVersion, data: np.ndarray, indices: np.ndarray, updates: np.ndarray) -> np.ndarray | None:
        if _parallel.get_num_threads() != threads:
            return None
        output = data.copy()  # fresh and C-contiguous (ravel: a view, the loop's 1-D C arrays)
        dst, src = output.ravel(), np.ascontiguousarray(updates, dtype=convert).ravel()
        if cast is not None:
            dst, src = dst.view(cast), src.view(cast)
        flat = _numba.read_only(np.ascontiguousarray(indices).ravel())  # read-only: the loop's own signature
        if loop(dst, flat, _numba.read_only(src), *args) >= 0:
            check_bounds(spec, indices, size, ax)  # the error with its facts
            raise AssertionError("the compiled loop found a bad index that check_bounds did not")  # pragma: no cover
        return output

    return run


def _scatter_compiled(
    output: np.ndarray, indices: np.ndarray, updates: np.ndarray, ax: int, reduction: Reduction
) -> int | None:
    """Run the compiled scatter, if the dtype and layout allow it.

    Where indices agree with data's shape off the axis (the usual case: PyTorch's
    ``scatter_reduce`` and ``index_add`` exports), both collapse to ``(outer, axis, inner)``
    and one loop (``scatter_axis``) serves every reduction and type, float16 and bfloat16
    included; other shapes take the general loop (``scatter``), or NumPy for those two types.
    Returns the position of a bad index it met (-1: none); None leaves the work to NumPy,
    nothing written.
    """
    dtype = output.dtype
    loops = _numba.loops_for(indices.size, ("scatter_elements", dtype.str, reduction))
    if loops is None or not _copyable(output) or not dtype.isnative:
        return None
    if reduction is Reduction.NONE:
        operands = bits(output), _numba.read_only(bits(np.ascontiguousarray(updates, dtype=dtype))), _codes.NONE, None
    else:
        operands = compiled_operands(output, updates, reduction)
        if operands is None:  # complex, ml_dtypes' other types: NumPy's path
            return None
    dst, src, op, half = operands
    flat = _numba.read_only(np.ascontiguousarray(indices).reshape(-1))
    threads = _parallel.get_num_threads()
    axis_calls = _axis_layout(output.shape, indices.shape, ax, dtype.itemsize, threads)
    if axis_calls is not None:
        (outer, n, inner, size), calls = axis_calls
        run_axis = loops.scatter_axis
        return max(
            _parallel.run(
                lambda i, _: run_axis(dst, flat, src, outer, n, inner, size, op, *calls[i], half),
                [(i, i + 1) for i in range(len(calls))],
            )
        )
    if half:  # the general loop computes in the type itself: NumPy rounds float16 as the spec does
        return None
    shape, strides, general = _scatter_layout(output.shape, indices.shape, ax, dtype.itemsize, threads)
    run, size = loops.scatter, output.shape[ax]
    return max(
        _parallel.run(
            lambda i, _: run(dst, flat, src, shape, strides, ax, size, op, *general[i]),
            [(i, i + 1) for i in range(len(general))],
        )
    )


_SPLIT_ROW_BYTES = 256  # a thread's columns of a row, at least: 4 cache lines


@functools.lru_cache(maxsize=256)
def _axis_layout(
    data_shape: tuple[int, ...], indices_shape: tuple[int, ...], ax: int, item: int, threads: int
) -> tuple[tuple[int, int, int, int], list[tuple[int, int, int, int]]] | None:
    """Return ``((outer, n, inner, size), calls)`` for ``scatter_axis``, or None.

    None where indices differ from data's shape off the axis (the general loop's case).

    Per call ``(olo, ohi, ilo, ihi)``: the threads split the targets, never the updates, so
    each target sees its updates in the spec's order. They split the dims before the axis
    where there are enough of them, else the inner columns where each thread's share spans
    several cache lines; else one thread. Threads writing columns of one cache line would
    fight over it (2 threads on 2-wide float32 rows: 4x slower than one), and a split of the
    axis' rows (each thread walking every index for those landing in its rows) measured 2x
    slower than one thread: the filter is a branch mispredicted half the time.
    Cached: a model's nodes repeat their shapes.
    """
    if any(i != d for k, (i, d) in enumerate(zip(indices_shape, data_shape, strict=True)) if k != ax):
        return None
    outer, inner = _dims.size(data_shape[:ax]), _dims.size(data_shape[ax + 1 :])
    n, size = indices_shape[ax], data_shape[ax]
    work = outer * n * inner * (8 + 2 * item)  # per index: it, an update read, an element written
    if outer >= threads:
        parts = [(lo, hi, 0, inner) for lo, hi in _parallel.ranges(outer, work, threads)]
    elif inner * item >= threads * _SPLIT_ROW_BYTES:
        parts = [(0, outer, lo, hi) for lo, hi in _parallel.ranges(inner, work, threads)]
    else:
        parts = [(0, outer, 0, inner)]
    return (outer, n, inner, size), parts


@functools.lru_cache(maxsize=256)
def _scatter_layout(
    data_shape: tuple[int, ...], indices_shape: tuple[int, ...], ax: int, item: int, threads: int
) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int, int, int]]]:
    """Return the compiled scatter's arguments that follow from the shapes alone.

    They are the index shape and data's C strides as arrays (read-only to the loop), and per
    call ``(lo, hi, jlo, jhi)``. Cached: a model's nodes repeat their shapes.
    """
    n = _dims.size(indices_shape)
    r, last = len(indices_shape), indices_shape[-1]
    work = n * (8 + 2 * item)  # an index read, an update read, an element written
    # Targets differ unless all coordinates off the axis agree: split along one of those.
    if ax != 0:  # whole blocks of the first coordinate
        block = n // indices_shape[0]
        calls = [(lo * block, hi * block, 0, last) for lo, hi in _parallel.ranges(indices_shape[0], work, threads)]
    elif r > 1 and last * item >= threads * _SPLIT_ROW_BYTES:  # columns of the last coordinate, every row
        calls = [(0, n, lo, hi) for lo, hi in _parallel.ranges(last, work, threads)]
    else:
        calls = [(0, n, 0, last)]
    return np.array(indices_shape, dtype=np.int64), _c_strides(data_shape), calls


def _scatter_numpy(output: np.ndarray, indices: np.ndarray, updates: np.ndarray, ax: int, reduction: Reduction) -> None:
    """Scatter with NumPy, for any dtype and any writeable layout of ``output``."""
    target = _window(output, indices.shape, ax)
    grid: tuple[np.ndarray, ...] = np.indices(indices.shape, sparse=True)
    where = tuple(
        np.where(indices < 0, indices + target.shape[ax], indices) if d == ax else g for d, g in enumerate(grid)
    )
    offsets = np.ravel_multi_index(where, target.shape).reshape(-1)
    values = strings_as_objects(updates).reshape(-1)
    if reduction is Reduction.NONE:  # last wins: keep each destination's last update only
        winners = last_of_duplicates(offsets, target.size)
        if winners is not None:
            offsets, values = offsets[winners], values[winners]
        target[np.unravel_index(offsets, target.shape)] = values
        return
    with np.errstate(invalid="ignore"):  # NaN in max/min: as quiet as np.maximum itself
        UFUNCS[reduction].at(target, np.unravel_index(offsets, target.shape), values)
