"""The numba loops behind ``_compiled`` (this module imports numba: import it lazily).

Module-level functions, so numba's on-disk cache (``cache=True``) finds them again in a new
process. The layout they share is described in ``_compiled``. Array positions are uint64:
numba then skips its negative-index wraparound on every access (2.5x on a gather).
"""

import numba
import numpy as np

from ._compiled import ADD, MAX, MUL, NONE  # and MIN: the last branch

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
def scatter(dst, indices, src, shape, strides, axis, size, op, lo, hi, jlo, jhi):
    """``dst[target of e] = f(dst[target], src[e])`` for e in ``[lo, hi)`` with last coordinate
    in ``[jlo, jhi)``, in increasing ``e`` (row-major order); ``indices`` are already checked.
    Two positions share a target only if every coordinate off the axis is equal, so a caller
    may split the work along any coordinate but the axis."""
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
                dst[t] = a if (a > b or a != a) else b
            else:
                dst[t] = a if (a < b or a != a) else b
        coords[r - 1] = 0
        row += last
        _next_row(coords, shape)


@jit
def write_rows(dst, past, values, dst_starts, src_starts, runs, row_len, copy, lo, hi):
    """TensorScatter, cache rows ``[lo, hi)`` of ``row_len`` elements each. Row r's update is
    run ``2r`` (from the write position) and run ``2r + 1`` (from the row's start, where a
    circular write wraps): ``dst[dst_starts[k]:+runs[k]] = values[src_starts[k]:+runs[k]]``.
    With ``copy``, the rest of the row comes from ``past`` first: only what the update does
    not overwrite is copied, row by row, so each row is read and written once."""
    n = u64(row_len)
    for r in range(lo, hi):
        row = u64(r) * n
        if copy:  # past outside the runs: [end of the wrapped run, write position), [end of run, row end)
            for a, b in ((row + u64(runs[2 * r + 1]), u64(dst_starts[2 * r])),
                         (u64(dst_starts[2 * r]) + u64(runs[2 * r]), row + n)):
                for i in range(a, b):
                    dst[i] = past[i]
        for k in range(2 * r, 2 * r + 2):
            d, s = u64(dst_starts[k]), u64(src_starts[k])
            for i in range(u64(runs[k])):
                dst[d + i] = values[s + i]
