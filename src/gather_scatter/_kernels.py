"""Vectorized Gather, GatherND and ScatterND.

Each kernel runs: validate (shape rule, dtypes, index bounds) -> offsets -> NumPy take /
assignment / ``ufunc.at``, split into disjoint chunks on the thread pool (``_parallel``) when
the work is big enough. Nothing is written to a caller's array (``out``, or ``data`` in
place) before everything is checked; a fresh GatherND output may be filled while its
indices are checked, and is dropped on an error. No input is modified. The ``spec`` argument
only names the version in errors and says what it allows; the computation is the same for
every version.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from . import _buffers, _parallel, _shapes
from ._validate import as_array, check_bounds, check_out, linear_offsets, native_indices
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


def run_gather(spec: OpVersion, data, indices, axis=0, out=None) -> np.ndarray:
    data, indices = as_array(spec, "data", data), as_array(spec, "indices", indices)
    _shapes.output_dtype(spec, data.dtype, indices.dtype)
    out_shape = _shapes.gather_shape(spec, data.shape, indices.shape, axis)
    ax = _shapes.normalize_axis(spec, axis, data.ndim)
    indices = native_indices(indices)
    if out is None:
        _shapes.check_output_bytes(spec, out_shape, data.dtype)
    else:
        check_out(spec, out, out_shape, data.dtype, {"data": data, "indices": indices})
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


def _slices_shape(shape: tuple[int, ...], lead: int) -> tuple[int, ...]:
    # Explicit, since reshape(-1, ...) is ambiguous when a trailing dim is 0.
    return (_shapes.size(shape[:lead]),) + shape[lead:]


# Index tuples per step of a chunk. Each NumPy call hands the GIL between the threads, and a
# contended hand-off costs tens of microseconds here: 128k tuples (1 MiB temporaries) per step
# keeps those few (1M element tuples: GatherND 10.5-12 ms at 32k per step, 7.8-8.3 ms at 128k).
_STEP = 1 << 17


def _nd_offsets(
    spec: OpVersion, indices: np.ndarray, dims: tuple[int, ...], batch_dims: int, per_batch: int,
    emit: _TakeInto | None = None, checked: bool = False,
) -> np.ndarray | None:
    """Flat offsets into ``data.reshape(-1, *data.shape[b + k:])`` of the index tuples
    (``indices.shape[-1] == k``), computed in steps on the pool with the bounds check in the same pass.

    With ``emit`` (a :class:`_TakeInto`: called per step, and its ``bytes_per_row`` sizes the
    chunks), each step's offsets go to ``emit(lo, hi, offsets)``, which writes the output,
    and nothing is kept; else they are returned, shape ``(N,)``. On a bad index,
    :func:`check_bounds` raises with the first bad position; with ``emit`` a fresh output may
    then hold partial results, so callers writing a caller's buffer pass ``checked=True``
    after validating everything first.
    """
    rows = indices.reshape(_slices_shape(indices.shape, indices.ndim - 1))
    n, k = rows.shape
    if emit is None and not batch_dims and n <= _STEP:  # one step: no pool, no copy
        offsets = linear_offsets(rows, dims, check=not checked)
        if offsets is None:
            check_bounds(spec, indices, dims, np.arange(k))
        return offsets
    offsets = None if emit is not None else np.empty(n, dtype=np.int64)
    block = _shapes.size(dims)

    def work(lo: int, hi: int) -> bool:
        for s in range(lo, hi, _STEP):
            e = min(hi, s + _STEP)
            if k == 1 and not batch_dims and emit is not None:
                step = rows[s:e, 0]  # take's 'wrap' maps negatives: no offsets to build
                if not checked and (int(step.min()) < -dims[0] or int(step.max()) >= dims[0]):
                    return False
            else:
                step = linear_offsets(rows[s:e], dims, check=not checked)
                if step is None:
                    return False
                if batch_dims:
                    base = np.arange(s, e, dtype=np.int64)  # in place: one temporary, not three
                    base //= per_batch
                    base *= block
                    step += base
            if emit is not None:
                emit(s, e, step)
            else:
                offsets[s:e] = step
        return True

    width = k * rows.itemsize + (emit.bytes_per_row if emit is not None else 8)
    if not all(_parallel.run(work, _parallel.ranges(n, n * width))):
        check_bounds(spec, indices, dims, np.arange(batch_dims, batch_dims + k))
        raise AssertionError("a step found a bad index that check_bounds did not")  # pragma: no cover
    return offsets


class _TakeInto:
    """``emit`` for GatherND: take each step's slices into its rows of the output."""

    def __init__(self, src: np.ndarray, dst: np.ndarray) -> None:
        self.src, self.dst = src, dst
        self.bytes_per_row = dst.strides[0] if dst.ndim else dst.itemsize

    def __call__(self, lo: int, hi: int, offsets: np.ndarray) -> None:
        np.take(self.src, offsets, 0, self.dst[lo:hi], "wrap")


def run_gather_nd(spec: OpVersion, data, indices, batch_dims=0, out=None) -> np.ndarray:
    data, indices = as_array(spec, "data", data), as_array(spec, "indices", indices)
    _shapes.output_dtype(spec, data.dtype, indices.dtype)
    out_shape = _shapes.gather_nd_shape(spec, data.shape, indices.shape, batch_dims)
    b, k = int(batch_dims), indices.shape[-1]
    indices = native_indices(indices)
    dims = data.shape[b : b + k]
    rows = indices.reshape(_slices_shape(indices.shape, indices.ndim - 1))
    if out is None:
        _shapes.check_output_bytes(spec, out_shape, data.dtype)
    else:  # a caller's buffer: every index is checked before the first write
        check_out(spec, out, out_shape, data.dtype, {"data": data, "indices": indices})
        check_bounds(spec, indices, dims, np.arange(b, b + k))
    result = _buffers.empty(out_shape, data.dtype) if out is None else out
    slice_size = _shapes.size(data.shape[b + k :])
    if result.size == 0:  # nothing to move, but bad indices are still errors
        check_bounds(spec, indices, dims, np.arange(b, b + k))
        return result
    dst = result.reshape(rows.shape[0], slice_size)
    per_batch = rows.shape[0] // _shapes.size(data.shape[:b]) if b else 1
    if not data.flags.c_contiguous:  # strided or broadcast data: index it where it lies, no full copy
        offsets = _nd_offsets(spec, indices, dims, b, per_batch)
        dst[...] = data[np.unravel_index(offsets, data.shape[: b + k])].reshape(dst.shape)
        return result
    src = data.reshape(_shapes.size(data.shape[: b + k]), slice_size)
    if src.dtype.hasobject:  # take on objects holds the GIL: offsets first, one take
        np.take(src, _nd_offsets(spec, indices, dims, b, per_batch), 0, dst, "wrap")
        return result
    _nd_offsets(spec, indices, dims, b, per_batch, emit=_TakeInto(src, dst), checked=out is not None)
    return result


def _copy_into(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` (same shape, dst C-contiguous), split across the pool."""
    if dst.dtype.hasobject or dst.nbytes < 2 * _parallel.MIN_CHUNK_BYTES or not src.flags.c_contiguous:
        np.copyto(dst, src)
        return
    flat_dst, flat_src = dst.reshape(-1), src.reshape(-1)
    chunks = _parallel.ranges(flat_dst.size, dst.nbytes)
    _parallel.run(lambda lo, hi: np.copyto(flat_dst[lo:hi], flat_src[lo:hi]), chunks)


def run_scatter_nd(spec: OpVersion, data, indices, updates, reduction="none", out=None) -> np.ndarray:
    data = as_array(spec, "data", data)
    indices = as_array(spec, "indices", indices)
    updates = as_array(spec, "updates", updates)
    _shapes.output_dtype(spec, data.dtype, indices.dtype, updates.dtype)
    _shapes.scatter_nd_shape(spec, data.shape, indices.shape, updates.shape)
    reduction = Reduction.parse(spec, reduction)
    _shapes.check_reduction_type(spec, reduction, data.dtype)
    k = indices.shape[-1]
    indices = native_indices(indices)
    # Fixed-width str/bytes would truncate scattered or concatenated strings: objects.
    out_dtype = np.dtype(object) if data.dtype.kind in "US" else data.dtype
    if out is None:
        _shapes.check_output_bytes(spec, data.shape, data.dtype)
    else:
        others = {"indices": indices, "updates": updates}
        check_out(spec, out, data.shape, out_dtype, others if out is data else {"data": data, **others})
    dims = data.shape[:k]
    offsets = _nd_offsets(spec, indices, dims, 0, 1)  # every index checked: nothing written yet

    if out is None:
        output = _buffers.empty(data.shape, out_dtype)
        _copy_into(output, _strings_as_objects(data))
    elif out is not data:
        output = out
        _copy_into(output, data)
    else:
        output = data
    slice_shape = data.shape[k:]
    n_slices = _shapes.size(dims)
    if slice_shape and _shapes.size(slice_shape) != 1:
        target = output.reshape((n_slices,) + slice_shape)
        values = _strings_as_objects(updates).reshape((offsets.size,) + slice_shape)
    else:  # one element per update: the 1-D fast paths of put and ufunc.at
        target = output.reshape(n_slices)
        values = _strings_as_objects(updates).reshape(offsets.size)
    if reduction is Reduction.NONE:
        _assign_last_wins(target, offsets, values)
    else:  # ufunc.at applies updates one by one in row-major order: the spec's loop, bit for bit
        _UFUNCS[reduction].at(target, offsets, values)
    return output


def _assign_last_wins(target: np.ndarray, offsets: np.ndarray, values: np.ndarray) -> None:
    """``target[offsets[i]] = values[i]`` in order of ``i``; with duplicates the last one wins.

    NumPy does not promise an order for repeated fancy-index assignment, so duplicates are
    first reduced to their last update; then every destination is written once, and threads
    can write disjoint ranges of the (now unique) updates.
    """
    winners = _last_of_duplicates(offsets, target.shape[0])
    if winners is not None:
        offsets, values = offsets[winners], values[winners]
    if target.dtype.hasobject or values.nbytes < _parallel.MIN_CHUNK_BYTES:
        target[offsets] = values
        return
    row_bytes = target.itemsize * _shapes.size(target.shape[1:])
    chunks = _parallel.ranges(offsets.size, offsets.size * (8 + 2 * row_bytes))
    _parallel.run(lambda lo, hi: target.__setitem__(offsets[lo:hi], values[lo:hi]), chunks)


def _last_of_duplicates(offsets: np.ndarray, n_slices: int) -> np.ndarray | None:
    """None if ``offsets`` are unique, else the positions whose update is the last to its
    destination (ascending). The cost follows the updates, never the data: a byte map of the
    destinations only when it is no bigger than the offsets themselves, else a sort."""
    n = offsets.size
    if n < 2:
        return None
    if n_slices <= 8 * n:
        seen = np.zeros(n_slices, dtype=np.uint8)
        seen[offsets] = 1  # every write stores the same value: order does not matter
        if np.count_nonzero(seen) == n:
            return None
        if n_slices <= 2 * n:  # last writer per destination: max of positions, order-free
            position = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
            last = np.full(n_slices, -1, dtype=position.dtype)
            np.maximum.at(last, offsets, position)
            return np.flatnonzero(last[offsets] == position)
    ordered = np.sort(offsets)
    if (ordered[1:] != ordered[:-1]).all():
        return None
    order = np.argsort(offsets, kind="stable")
    ordered = offsets[order]
    last = np.empty(n, dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=last[:-1])
    last[-1] = True
    return np.sort(order[last])


def gather(data, indices, axis: int = 0, *, out: np.ndarray | None = None) -> np.ndarray:
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
    out : ndarray, optional
        Where to write the result: C-contiguous, writeable, of exactly the output's shape and
        dtype, sharing no memory with ``data`` or ``indices``. Nothing is written to it unless
        every index is valid.

    Returns
    -------
    ndarray, shape ``data.shape[:axis] + indices.shape + data.shape[axis+1:]``, dtype of data.
        ``out`` when given.

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
        ``out`` of the wrong shape or not C-contiguous; read-only or overlapping an input.

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
    return run_gather(GATHER, data, indices, axis, out=out)


def gather_nd(data, indices, batch_dims: int = 0, *, out: np.ndarray | None = None) -> np.ndarray:
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
        ``out`` of the wrong shape or not C-contiguous; read-only or overlapping an input.

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
    return run_gather_nd(GATHER_ND, data, indices, batch_dims, out=out)


def scatter_nd(
    data,
    indices,
    updates,
    reduction: Literal["none", "add", "mul", "max", "min"] = "none",
    *,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """ScatterND-18: a copy of ``data`` with ``updates`` written (or reduced) at index tuples.

    Parameters
    ----------
    data : ndarray, shape (D_0..D_{k-1}, R...), rank r >= 1
        Any of the 16 ONNX tensor types. Never modified, unless ``out is data``.
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
        follows the updates, not the size of ``data`` (a KV-cache write). Any other ``out``
        (C-contiguous, writeable, data's shape and dtype, object for strings) must not
        overlap ``data``, ``indices`` or ``updates``; ``data`` is copied into it first.

    Returns
    -------
    ndarray, shape and dtype of data (strings as object arrays); ``out`` when given.

    Raises
    ------
    IndexOutOfBoundsError, ShapeError, InvalidAttributeError, DTypeError
        Every check runs before the first write, so on an error ``out`` (``data`` itself
        included) is unchanged. ``out`` faults: DTypeError (not an ndarray, wrong dtype),
        ShapeError (wrong shape, not C-contiguous), InvalidAttributeError (read-only, or
        overlapping an input other than ``data`` itself).

    Notes
    -----
    Implements ONNX ScatterND-16 and the max/min of ScatterND-18 (``ScatterND-11-13-16.rst``).
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
