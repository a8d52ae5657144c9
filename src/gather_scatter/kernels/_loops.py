"""The numba loops behind ``_numba`` (this module imports numba: import it lazily).

Module-level functions, so numba's on-disk cache (``cache=True``) finds them again in a new
process. The layout they share is described in ``_numba``. Array positions are uint64:
numba then skips its negative-index wraparound on every access (2.5x on a gather).
"""

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from . import _loops_cache  # noqa: F401 - every loop's numba cache stamped with all their sources
from ._codes import ADD, MAX, MIN, MUL, NONE
from ._loops_axis import planned_loop, scatter_axis
from ._loops_reduce import (
    _reduce_row,
    bucket_rows,
    by_reduction,
    reduce_nd,
    reduce_rows,
    reduce_rows_at,
)

__all__ = [
    "bucket_rows",
    "copy_slices",
    "gather",
    "gather_last",
    "planned_loop",
    "reduce_nd",
    "reduce_rows",
    "reduce_rows_at",
    "scatter",
    "scatter_axis",
    "scatter_rows",
    "slice_numbers",
    "take_rows",
    "write_rows",
]

jit = numba.njit(nogil=True, cache=True)
u64 = np.uint64


@jit
def _first_row(shape, lo):
    """Coordinates of flat position ``lo`` of ``shape``."""
    coords = np.zeros(shape.size, np.int64)
    rest = lo
    for d in range(shape.size - 1, -1, -1):
        if shape[d]:
            coords[d] = rest % shape[d]
            rest //= shape[d]
    return coords


@jit
def _row_base(coords, strides, axis):
    """Data offset of a row: every coordinate but the last and the axis."""
    base = 0
    for d in range(coords.size - 1):
        if d != axis:
            base += coords[d] * strides[d]
    return base


@jit
def _next_row(coords, shape):
    for d in range(shape.size - 2, -1, -1):
        coords[d] += 1
        if coords[d] < shape[d]:
            return
        coords[d] = 0


BLOCK = 1024  # indices checked per pass: one pass maps and checks them (vectorizable), the next moves


@jit
def gather(data, indices, dst, shape, strides, axis, size, lo, hi):
    """``dst[e] = data[offset of e with its axis coordinate = indices[e]]`` for e in ``[lo, hi)``;
    returns the first e whose index is outside ``[-size, size-1]`` (stopping there), else -1.

    Blocks of up to BLOCK indices: a branch-free pass maps negatives, checks the bounds and
    computes the source offsets, then a second pass moves the elements (15-20% faster than
    checking each index just before its load)."""
    r = shape.size
    last = shape[r - 1]
    step = u64(strides[axis])
    column = u64(0 if axis == r - 1 else 1)  # the last coordinate moves the data offset too
    usize = u64(size)
    offsets = np.empty(BLOCK, np.uint64)
    coords = _first_row(shape, lo)
    e = lo
    while e < hi:
        base = u64(_row_base(coords, strides, axis))
        j = coords[r - 1]
        end = min(last, j + hi - e)
        while j < end:
            m = min(end - j, BLOCK)
            bad = False
            for t in range(m):
                v = np.int64(indices[u64(e + t)])
                v += (v >> 63) & size  # negatives count from the end, without a branch
                bad |= u64(v) >= usize  # also catches what is still negative
                offsets[t] = base + u64(v) * step + u64(j + t) * column
            if bad:
                for t in range(m):
                    v = np.int64(indices[u64(e + t)])
                    v += (v >> 63) & size
                    if u64(v) >= usize:
                        return e + t
            for t in range(m):
                dst[u64(e + t)] = data[offsets[t]]
            e += m
            j += m
        coords[r - 1] = 0
        _next_row(coords, shape)
    return -1


@jit
def slice_numbers(rows, dims, per_batch, numbers, lo, hi):
    """GatherND: ``numbers[r - lo]`` = the slice number of tuple ``r`` in ``[lo, hi)``, batch
    ``r // per_batch`` and coordinates ``rows[r]`` (``rows``: the ``(N, k)`` tuples flattened,
    component ``j`` in ``[-dims[j], dims[j]-1]``) into data viewed as ``(batches * prod(dims),
    slice)``; returns the first tuple holding a bad component (stopping there), else -1. The
    batch advances by a countdown, not a division per tuple."""
    k = dims.size
    cells = 1
    for j in range(k):
        cells *= dims[j]
    batch = lo // per_batch
    left = per_batch - (lo - batch * per_batch)
    base = batch * cells
    for r in range(lo, hi):
        if left == 0:
            left = per_batch
            base += cells
        left -= 1
        t = 0
        for j in range(k):
            size = dims[j]
            v = np.int64(rows[u64(r) * u64(k) + u64(j)])
            v += (v >> 63) & size
            if u64(v) >= u64(size):
                return r
            t = t * size + v
        numbers[r - lo] = base + t
    return -1


@intrinsic
def _prefetch(typingctx, array, at):
    """Ask for the cache line holding ``array[at]`` (LLVM's prefetch: a hint, never a fault)."""

    def codegen(context, builder, signature, args):
        data = context.make_array(signature.args[0])(context, builder, args[0]).data
        byte, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = builder.module.declare_intrinsic(
            "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [byte, i32, i32, i32])
        )
        builder.call(fn, [builder.bitcast(builder.gep(data, [args[1]]), byte), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(array, types.uint64), codegen


@intrinsic
def _copy_run(typingctx, dst, at, src, start, count):
    """``dst[at:at + count] = src[start:start + count]`` as one memcpy (the arrays never overlap)."""

    def codegen(context, builder, signature, args):
        to, at, source, start, count = args
        to = context.make_array(signature.args[0])(context, builder, to).data
        source = context.make_array(signature.args[2])(context, builder, source).data
        size = context.get_abi_sizeof(context.get_data_type(signature.args[0].dtype))
        cgutils.raw_memcpy(builder, builder.gep(to, [at]), builder.gep(source, [start]), count, size)
        return context.get_dummy_value()

    return types.void(dst, types.uint64, src, types.uint64, types.uint64), codegen


LINE = 64  # bytes per cache line: the prefetch stride
AHEAD = 8  # slices prefetched ahead of the copy: enough misses in flight to hide the latency


@jit
def copy_slices(src, numbers, count, dst, at, block):
    """``dst``'s slices ``[at, at + count)`` = ``src``'s slices ``numbers[:count]`` (slices of
    ``block`` elements; numbers already checked), the slice AHEAD copies on prefetched: random
    slices of a large table are bound by the latency of their loads, which the hardware's
    prefetcher cannot foresee (32768 slices of 256 bytes from 32 MB: 1.13 -> 0.85 ms)."""
    ublock = u64(block)
    stride = u64(max(1, LINE // src.itemsize))
    for r in range(count):
        if r + AHEAD < count:
            first = u64(numbers[r + AHEAD]) * ublock
            for p in range(u64(0), ublock, stride):
                _prefetch(src, first + p)
        _copy_run(dst, (u64(at) + u64(r)) * ublock, src, u64(numbers[r]) * ublock, ublock)


@jit
def take_rows(src, indices, dst, size, block, olo, ohi, lo, hi):
    """Gather of whole slices along one axis: for each outer row ``o`` in ``[olo, ohi)`` (of
    ``size`` slices in ``src``, ``indices.size`` in ``dst``), ``dst``'s slices ``[lo, hi)`` =
    ``src``'s slices ``indices[lo:hi]`` (slices of ``block`` elements; negatives from the
    end), prefetched as :func:`copy_slices` does. The indices' min and max come first (one
    tight pass): a bad index returns its position with nothing copied (else -1), and indices
    without negatives are copied without mapping them."""
    low = np.int64(0)
    high = np.int64(-1)
    if hi > lo:
        low = np.int64(indices[lo])
        high = low
    for r in range(lo, hi):
        v = np.int64(indices[r])
        low = min(low, v)
        high = max(high, v)
    if low < -size or high >= size:
        for r in range(lo, hi):
            v = np.int64(indices[r])
            if v < -size or v >= size:
                return np.int64(r)
    ublock = u64(block)
    n = u64(indices.size)
    for o in range(olo, ohi):
        row = src[u64(o) * u64(size) * ublock :]
        at = u64(o) * n + u64(lo)
        if low >= 0:
            copy_slices(row, indices[lo:hi], hi - lo, dst, at, block)
            continue
        for r in range(lo, hi):
            v = np.int64(indices[r])
            v += (v >> 63) & size
            _copy_run(dst, (at + u64(r - lo)) * ublock, row, u64(v) * ublock, ublock)
    return np.int64(-1)


@jit
def gather_last(data, indices, dst, size, n, lo, hi):
    """GatherElements on the last axis, indices of data's shape but the last dim (``n``):
    output rows ``[lo, hi)``, ``dst[r, j] = data[r, indices[r, j]]``; returns the first flat
    position whose index is outside ``[-size, size-1]`` (stopping there), else -1.

    The loads inside a row are random, so the hardware's prefetcher cannot see them coming: the
    next row of data is prefetched while this one is gathered (2M float32 from 4096 x 1024:
    4.0 -> 2.5 ms on one thread)."""
    usize = u64(size)
    un = u64(n)
    end = u64(hi) * usize
    stride = u64(max(1, LINE // data.itemsize))
    for r in range(lo, hi):
        base = u64(r) * usize
        ahead = base + usize
        if ahead < end:
            for p in range(u64(0), usize, stride):
                _prefetch(data, ahead + p)
        at = u64(r) * un
        for j in range(un):
            v = np.int64(indices[at + j])
            v += (v >> 63) & size
            if u64(v) >= usize:
                return np.int64(at + j)
            dst[at + j] = data[base + u64(v)]
    return -1


@jit
def scatter(dst, indices, src, shape, strides, axis, size, op, lo, hi, jlo, jhi):
    """``dst[target of e] = f(dst[target], src[e])`` for e in ``[lo, hi)`` with last coordinate
    in ``[jlo, jhi)``, in increasing ``e`` (row-major order). Two positions share a target only
    if every coordinate off the axis is equal, so a caller may split the work along any
    coordinate but the axis. A bad index stops the loop and returns its position (else -1):
    what was written by then is for a caller that checked the indices first, or writes a
    fresh output it then drops."""
    r = shape.size
    last = shape[r - 1]
    step = u64(strides[axis])
    column = u64(0 if axis == r - 1 else 1)
    coords = _first_row(shape, lo)
    row = lo - coords[r - 1]
    while row < hi:
        base = u64(_row_base(coords, strides, axis))
        for j in range(max(jlo, coords[r - 1]), min(jhi, last, hi - row)):
            e = u64(row + j)
            v = np.int64(indices[e])
            v += (v >> 63) & size
            if u64(v) >= u64(size):
                return np.int64(e)
            t = base + u64(v) * step + u64(j) * column
            a = dst[t]
            b = src[e]
            if op == NONE:
                dst[t] = b
            elif op == ADD:
                dst[t] = a + b
            elif op == MUL:
                dst[t] = a * b
            elif op == MAX:  # np.maximum of float32/64 and ints: a NaN in a wins, a tie gives b
                dst[t] = a if (a > b) | (a != a) else b  # no branch: a select
            else:
                dst[t] = a if (a < b) | (a != a) else b
        coords[r - 1] = 0
        row += last
        _next_row(coords, shape)
    return np.int64(-1)


@jit
def write_rows(dst, past, values, starts, heads, capacity, length, inner, copy, lo, hi):
    """TensorScatter, cache rows ``[lo, hi)`` (a row: one batch entry and one index of the dims
    between batch and the sequence axis; ``capacity * inner`` elements). Row r of batch b takes
    the update's row r at position ``starts[b]``: ``first = min(length, capacity - start)``
    positions there, the rest (a circular write that wraps) from position 0. With ``copy``, the
    rest of the row comes from ``past``: only what the update leaves, row by row, so each row is
    read and written once."""
    n = u64(inner)
    for r in range(lo, hi):
        start = starts[r // heads]
        first = min(length, capacity - start)
        row = u64(r) * u64(capacity) * n
        at = u64(r) * u64(length) * n  # the update's row r
        if copy:  # past outside the update: [end of the wrapped part, start), [start + first, capacity)
            for a, b in (
                (row + u64(length - first) * n, row + u64(start) * n),
                (row + u64(start + first) * n, row + u64(capacity) * n),
            ):
                for i in range(a, b):
                    dst[i] = past[i]
        d = row + u64(start) * n
        for i in range(u64(first) * n):
            dst[d + i] = values[at + i]
        at += u64(first) * n
        for i in range(u64(length - first) * n):
            dst[row + i] = values[at + i]


def _scatter_rows_for(op, half):
    @jit
    def rows(dst, past, offsets, src, width, copy, lo, hi):
        w = u64(width)
        runs = copy and width * dst.itemsize >= LINE
        if copy and not runs:
            _copy_run(dst, u64(lo) * w, past, u64(lo) * w, u64(hi - lo) * w)
        hit = np.zeros(hi - lo if runs else 0, np.uint8)
        if runs and op == NONE:  # the last update to each slice wins: the first met walking back
            for i in range(offsets.size - 1, -1, -1):
                o = offsets[i]
                if o >= lo and o < hi and hit[o - lo] == 0:
                    _copy_run(dst, u64(o) * w, src, u64(i) * w, w)
                    hit[o - lo] = 1
        else:  # every update in order: reductions, and assignments to narrow slices
            for i in range(offsets.size):
                o = offsets[i]
                if o < lo or o >= hi:
                    continue
                at = u64(o) * w
                if op == NONE:
                    _copy_run(dst, at, src, u64(i) * w, w)
                elif runs and hit[o - lo] == 0:  # a slice's first update reads past: not copied first
                    _reduce_row(dst, at, past, at, src, u64(i) * w, w, op, half)
                else:
                    _reduce_row(dst, at, dst, at, src, u64(i) * w, w, op, half)
                if runs:
                    hit[o - lo] = 1
        if runs:  # past's slices that no update touched
            r = lo
            while r < hi:
                if hit[r - lo]:
                    r += 1
                    continue
                start = r
                while r < hi and hit[r - lo] == 0:
                    r += 1
                _copy_run(dst, u64(start) * w, past, u64(start) * w, u64(r - start) * w)

    return rows


_SCATTER_ROWS = by_reduction(_scatter_rows_for, (NONE, ADD, MUL, MAX, MIN))


def scatter_rows(dst, past, offsets, src, width, op, copy, lo, hi, half):
    """ScatterND on whole slices of ``width`` elements, the output's slices ``[lo, hi)``: every
    update ``i`` in increasing order whose destination lies there, assigned (NONE: the last
    write wins, the spec's order) or reduced (ADD, MUL, MAX, MIN); with ``copy``, the rest of
    each slice comes from ``past``. Offsets already checked and non-negative.

    Slices of a cache line or more are copied only where no update lands (runs of them, one
    memcpy each), an assignment writes only the last update to each slice (walking the
    updates backwards), and a reduction's first update to a slice reads ``past`` itself, so
    each slice is read and written once: an assignment to every slice costs one copy, not
    two, whatever its duplicates. Narrower slices take one memcpy of the whole range first
    (runs would be elements), then every update in order. ``half``: as for
    ``_reduce_row`` (None, 0 but for float16/bfloat16 reductions)."""
    _SCATTER_ROWS[op][half or 0](dst, past, offsets, src, width, copy, lo, hi)
