"""Writing results: the outputs (fresh, cached, ``out=``), copies on the pool, the fused
copy-and-scatter, last-wins assignment, and the dtype rules every kernel shares (strings as
objects, raw bits for copies). The reductions the scatters apply are ``_reductions``'s."""

from __future__ import annotations

import numpy as np

from ..resources import buffers as _buffers
from ..resources import memory as _memory
from ..resources import threads as _parallel
from ..rules import dims as _dims
from ..rules import dtypes as _dtypes
from ..rules.validate import check_out
from ..rules.versions import OpVersion, Reduction
from . import _codes, _numba, _reductions

__all__ = [
    "FUSED_TABLE_BYTES",
    "FUSED_UPDATES",
    "assign_last_wins",
    "bits",
    "checked_target",
    "copy_and_scatter_rows",
    "copy_and_write_nd",
    "copy_into",
    "fresh_output",
    "last_of_duplicates",
    "result_dtype",
    "scatter_output",
    "strings_as_objects",
]


def strings_as_objects(array: np.ndarray) -> np.ndarray:
    """Strings of any NumPy kind as an object array of ``str`` (ONNX's NumPy type for
    tensor(string)); fixed-width ``U``/``S`` arrays would also truncate scattered or
    concatenated strings. ``S`` bytes decode as UTF-8 (undecodable bytes as surrogates)."""
    if array.dtype.kind == "U":
        return array.astype(object)
    if array.dtype.kind == "S":
        return np.char.decode(array, "utf-8", "surrogateescape").astype(object)
    return array


def result_dtype(dtype: np.dtype) -> np.dtype:
    """The result's dtype for data of ``dtype``: strings of any kind become object arrays of str."""
    return np.dtype(object) if dtype.kind in "US" else dtype


def bits(array: np.ndarray) -> np.ndarray:
    """The flat C-contiguous buffer as unsigned ints of its item size (1, 2, 4 or 8 bytes): a
    copy moves bits, whatever the type."""
    return array.reshape(-1).view(f"u{array.dtype.itemsize}")


# copy_into splits a copy across the pool from this size on. Measured on this project's 2-core
# machine (np.copyto vs two halves on the pool, float32): 2 MiB 44 vs 91 us, 4 MiB 88 vs 110,
# 8 MiB 211 vs 160, 16 MiB 619 vs 374, 64 MiB 3.75 vs 3.47 ms: below ~6 MiB the hand-off and
# the second core's cold cache cost more than the half copy saves.
COPY_SPLIT_BYTES = 6 << 20


def copy_into(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` (same shape): one ``np.copyto``, split across the pool when both are
    C-contiguous and at least ``COPY_SPLIT_BYTES``."""
    chunks = [(0, 0)]
    if not dst.dtype.hasobject and dst.nbytes >= COPY_SPLIT_BYTES and src.flags.c_contiguous and dst.flags.c_contiguous:
        chunks = _parallel.ranges(dst.size, dst.nbytes)
    if len(chunks) == 1:
        np.copyto(dst, src)
        return
    flat_dst, flat_src = dst.reshape(-1), src.reshape(-1)
    _parallel.run(lambda lo, hi: np.copyto(flat_dst[lo:hi], flat_src[lo:hi]), chunks)


# copy_and_write_nd's loop computes each offset just before its random access into the table:
# for a table past the caches that stalls the loop's memory-level parallelism (1M element muls
# into 1000 x 1000 float32: 5.5 ms fused against 4.7 with the offsets computed first), so
# many updates into a big table keep the separate offsets. Few updates (NumPy's offsets then
# cost mostly their fixed ~20 us) or a cached table take it.
FUSED_UPDATES = 1 << 14
FUSED_TABLE_BYTES = 1 << 20


def copy_and_write_nd(
    target: np.ndarray,
    source: np.ndarray,
    indices: np.ndarray,
    dims: tuple[int, ...],
    values: np.ndarray,
    reduction: Reduction,
) -> int | None:
    """``target[...] = source``, then ScatterND's writes with each update's offset computed in
    the compiled loop itself (``reduce_nd``: no offsets array, the bounds checked in the same
    pass), on one thread, in the spec's order: reductions, and assignments to slices narrower
    than a cache line (in order, the last write wins: no search for duplicates). ``target``: a
    fresh C-contiguous output of ``source``'s shape; ``indices`` ``(..., k)`` into ``dims``,
    data's first k axes, unchecked.

    Returns the first bad index row met (-1: none; the caller drops ``target`` and raises with
    the facts), or None with nothing written where it does not apply: the loops not loaded yet
    (:func:`_numba.loops_for`), a dtype NumPy must handle, wider assignments (the fused
    copy's), or reductions the cost model splits among threads (:func:`_reductions.thread_parts`:
    then the offsets pay for the split, :func:`_reductions.reduce_rows`).
    """
    k, n_rows = len(dims), _dims.size(dims)
    if not k or not n_rows or not target.size or not target.flags.c_contiguous or target.dtype.hasobject:
        return None
    n, width = indices.size // k, target.size // n_rows
    if n > FUSED_UPDATES and target.nbytes > FUSED_TABLE_BYTES:
        return None
    if reduction is Reduction.NONE:
        if width * target.itemsize >= _ROW_BYTES or target.itemsize not in (1, 2, 4, 8):
            return None
        src = _numba.read_only(bits(np.ascontiguousarray(values, dtype=target.dtype)))
        operands = bits(target), src, _codes.NONE, None
    elif _reductions.thread_parts(n, values.nbytes, n_rows) > 1:
        return None
    else:
        operands = _reductions.compiled_operands(target.reshape(-1), values, reduction)
    loops = _numba.loops_for(n * width, ("rows", target.dtype.str, reduction))
    if loops is None or operands is None:
        return None
    dst, src, op, half = operands
    rows, shape = _numba.read_only(np.ascontiguousarray(indices).reshape(n, k)), np.array(dims, np.int64)
    copy_into(target, source)  # last before the loop: after a copy of megabytes every step costs more
    return int(loops.reduce_nd(dst, rows, shape, src, width, op, half))


# A reduction of rows of a cache line or more with this many updates per row of the table on
# average goes through the fused copy (scatter_rows): each range of rows is read once from data
# and written once, where a copy and then the updates read and write it twice (1,000 distinct
# rows of 1,000 float32 added into 1000 x 1000: 353-365 -> 184-224 us, onnxruntime at 2 threads
# 224-246). Sparser updates leave runs too short to copy well (10,000 rows of 64 into 100,000:
# 1.7-1.9 -> 2.1-2.7 ms); denser ones walk every update on every thread without a per-reduction loop.
_FUSED_DEPTH = (0.5, 2.0)

# An assignment's rows narrower than this (a cache line) leave the fused loop: with one element
# per update its per-update steps cost more than NumPy's put (reductions take it at any width).
_ROW_BYTES = 64


def copy_and_scatter_rows(
    target: np.ndarray, source: np.ndarray | None, offsets: np.ndarray, values: np.ndarray, reduction: Reduction
) -> bool:
    """``target[...] = source`` (unless None: in place), then ``target[offsets[i]]`` assigned or
    reduced with ``values[i]`` in order of ``i`` (the spec's loop: the last write wins), in one
    compiled pass per range of rows on the pool: each row is copied and updated while it is in
    cache, and duplicates need no sorting. ``target``: 2-D (rows, width), C-contiguous; ``source``
    alike; ``offsets`` checked, non-negative. False (nothing written) where an assignment's rows
    are narrower than a cache line, numba is missing or the dtype needs NumPy: objects, and for
    reductions complex, ml_dtypes' types but bfloat16 and non-native byte order; and before
    numba is loaded, until a process's calls pay for its import (:func:`_numba.loops_for`)."""
    dtype = target.dtype
    width = target.shape[1]
    if reduction is Reduction.NONE and width * dtype.itemsize < _ROW_BYTES:  # put is faster
        return False
    loops = _numba.loops_for(offsets.size * width, ("rows", dtype.str, reduction))
    if (
        loops is None
        or dtype.hasobject
        or not target.flags.c_contiguous
        or (source is not None and not source.flags.c_contiguous)
    ):
        return False
    half = None
    if reduction is Reduction.NONE:
        if dtype.itemsize not in (1, 2, 4, 8):
            return False
        dst, src, op = bits(target), bits(np.ascontiguousarray(values, dtype=dtype)), _codes.NONE
        past = bits(source) if source is not None else dst
    else:
        operands = _reductions.compiled_operands(target, values, reduction)
        if operands is None:
            return False
        depth = offsets.size / max(1, target.shape[0])
        if source is None or width * dtype.itemsize < _ROW_BYTES or not _FUSED_DEPTH[0] <= depth <= _FUSED_DEPTH[1]:
            # the copy on the pool, then the updates split by target (reduce_rows)
            if source is not None:
                copy_into(target, source)
            return _reductions.reduce_rows(target, offsets, values, reduction)
        # few updates per row: each row's first update reads data itself (no copy of it first)
        dst, src, op, half = operands
        past = bits(source).view(dst.dtype)
    rows = np.ascontiguousarray(offsets, dtype=np.int64)
    run, copy = loops.scatter_rows, source is not None
    work = (2 * target.nbytes if copy else 0) + 3 * values.nbytes
    _parallel.run(
        lambda lo, hi: run(dst, past, rows, src, width, op, copy, lo, hi, half),
        _parallel.ranges(target.shape[0], work),
    )
    return True


def assign_last_wins(target: np.ndarray, offsets: np.ndarray, values: np.ndarray) -> None:
    """``target[offsets[i]] = values[i]`` in order of ``i``; with duplicates the last one wins.

    NumPy does not promise an order for repeated fancy-index assignment, so duplicates are
    first reduced to their last update; then every destination is written once, and threads
    can write disjoint ranges of the (now unique) updates.
    """
    winners = last_of_duplicates(offsets, target.shape[0])
    if winners is not None:
        offsets, values = offsets[winners], values[winners]
    if target.dtype.hasobject or values.nbytes < _parallel.MIN_CHUNK_BYTES:
        target[offsets] = values
        return
    row_bytes = target.itemsize * _dims.size(target.shape[1:])
    chunks = _parallel.ranges(offsets.size, offsets.size * (8 + 2 * row_bytes))
    _parallel.run(lambda lo, hi: target.__setitem__(offsets[lo:hi], values[lo:hi]), chunks)


def last_of_duplicates(offsets: np.ndarray, n_slices: int) -> np.ndarray | None:
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


def checked_target(
    spec: OpVersion, out, data: np.ndarray, dtype: np.dtype, others: dict, in_place: bool, data_name: str = "data"
) -> np.ndarray | None:
    """A scatter's checks on where it will write, returning the array to copy ``data`` into
    (None: a fresh one, its size checked against the memory limit now), else ``out`` checked
    (:func:`check_out`) against the inputs it may not overlap: all of them but ``data``
    itself when writing in place.

    A fresh output that the buffer cache holds already takes no new memory, so only a
    configured limit can refuse it (the query of the memory available costs ~20 us, an
    eighth of copying 4 MB): that cached array is returned, to be written like ``out``."""
    if out is None:
        return cached_output(spec, data.shape, dtype)
    return check_out(spec, out, data.shape, dtype, others if in_place else {data_name: data, **others})


def cached_output(spec: OpVersion, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
    """Return a fresh output on a block the buffer cache holds, or None.

    None: no cached block fits, and ``_buffers.empty`` makes the output. Its size is checked
    against the memory limit either way (OutputTooLargeError). A cached block takes no new
    memory, so only a configured limit can refuse it, and the query of the memory available
    (~20 us of /proc/meminfo per call, a tenth of copying 2.5 MB) is made only for new memory,
    for a gather's output and a scatter's (:func:`checked_target`).
    """
    output = _buffers.reused(shape, dtype)
    if output is None:
        _dtypes.check_output_bytes(spec, shape, dtype)
        return None
    configured = _memory._configured()
    _dtypes.check_output_bytes(spec, shape, dtype, limit=_memory.INT64_MAX if configured is None else configured)
    return output


def fresh_output(spec: OpVersion, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A new uninitialized array for a numeric output, its size checked against the memory
    limit (OutputTooLargeError): from the buffer cache where it is big enough for one (a
    cached block takes no new memory, so only a configured limit can refuse it), else from
    ``np.empty``. Few steps: after a copy of megabytes each costs several times its usual."""
    nbytes = _dims.size(shape) * dtype.itemsize
    if nbytes >= _buffers.MIN_BYTES:
        output = _buffers.reused(shape, dtype)
        if output is None:
            _dtypes.check_output_bytes(spec, shape, dtype)
            return _buffers.empty(shape, dtype)
        if (limit := _memory._configured()) is not None and nbytes > limit:
            _dtypes.check_output_bytes(spec, shape, dtype, limit=limit)  # raises
        return output
    if _memory.exceeded(nbytes) is not None:
        _dtypes.check_output_bytes(spec, shape, dtype)  # raises, with the facts
    return np.empty(shape, dtype)


def scatter_output(data: np.ndarray, target: np.ndarray | None, dtype: np.dtype, in_place: bool) -> np.ndarray:
    """The array a scatter then updates, holding ``data``: a fresh copy, ``target`` with
    ``data`` copied in, or ``target`` itself in place. Call only once every check has passed."""
    if target is None:
        output = _buffers.empty(data.shape, dtype)
        copy_into(output, strings_as_objects(data))
        return output
    if not in_place:
        copy_into(target, data)
    return target
