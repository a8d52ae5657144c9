"""ScatterElements' compiled walk along one axis (``scatter_axis``), every reduction and type,
float16 and bfloat16 several updates at a time where the CPU converts them (``_loops_half``'s
gathered lanes). Part of the module ``_numba.loops()`` returns: ``_loops`` imports these names.
Positions are uint64, as in ``_loops``."""

import threading

import numba
import numpy as np

from . import _loops_cache  # noqa: F401 - every loop's numba cache stamped with all their sources
from ._codes import ADD, MAX, MIN, MUL, NONE
from ._loops_half import F16C, _gathered2, _gathered4, _gathered8, _rows8_2, _rows8_4, nearest, widened8
from ._loops_reduce import (
    _ND,
    _SCALAR,
    _SELECTING,
    _VECTOR_LOOP,
    _reduce_loop,
    _rounded,
    _signalling,
    _value,
    by_reduction,
)

jit = numba.njit(nogil=True, cache=True)
inline = numba.njit(nogil=True, cache=True, inline="always")
u64 = np.uint64

__all__ = ["planned_loop", "scatter_axis"]


@inline
def _target(index, base, w, column, size):
    """Whether ``index`` lies in ``[-size, size)``, and the flat target of an update of it in
    ``column``. (Given the index, not the array: an inlined function with arrays and branches
    keeps their reference counts, an atomic pair per call.)"""
    v = np.int64(index)
    v += (v >> 63) & size
    return u64(v) < u64(size), base + u64(v) * w + column


@inline
def _put(dst, t, src, e, op, half):
    """Update ``e`` into ``dst[t]``."""
    if op == NONE:
        dst[t] = src[e]
    else:
        _reduce_loop(dst, t, dst, t, src, e, u64(1), op, half, _SCALAR)


# _rows_walk's tables: a group of 8 updates then shares a target at most 1 time in 32 (4
# columns); with few rows, often, and the group goes one element at a time (16 rows, 1 column:
# 2.1x -> 3.1x float32's time)
_MANY_ROWS = 128


@inline
def _rows8(dst, indices, src, e, base, w, size, op, bf16, inner):
    """``_loops_half``'s whole-row lanes for rows of ``inner`` (2 or 4) columns."""
    if inner == 2:
        return _rows8_2(dst, indices, src, e, base, w, u64(0), size, op, bf16)
    return _rows8_4(dst, indices, src, e, base, w, u64(0), size, op, bf16)


@inline
def _rows_walk(dst, indices, src, n, inner, size, op, olo, ohi, ilo, ihi, half):
    """float16/bfloat16 rows of 2 or 4 columns, all of them, into a table of many rows: 8
    updates of consecutive rows at a time (``_loops_half``'s lanes), a group where two share a
    target (or holding a bad index) one element at a time, in order."""
    w = u64(inner)
    m = u64(n) * w
    bf16 = half == 2
    for o in range(olo, ohi):
        base = u64(o) * u64(size) * w
        at = u64(o) * m
        e = at
        while e < at + m:
            if (e + u64(8) <= at + m) and _rows8(dst, indices, src, e, base, w, size, op, bf16, inner):
                e += u64(8)
                continue
            stop = min(e + u64(8), at + m)  # refused, or the tail
            while e < stop:
                ok, t = _target(indices[e], base, w, (e - at) & (w - u64(1)), size)
                if not ok:
                    return np.int64(e)
                _put(dst, t, src, e, op, half)
                e += u64(1)
    return np.int64(-1)


_MOST_HELD = 1 << 18  # float32 held values: 1 MB
_SIGNALLING = np.int64(-2)


@inline
def _takes(x, u, op, bf16):
    """Whether max/min's update ``u`` replaces the held ``x`` (float32 values of float16 or
    bfloat16 elements), as ``_loops_reduce`` decides on the elements: ``x`` stays where it is
    NaN or wins, and on a tie for float16 (NumPy's half loop), so the update takes it where it
    is strictly better, or NaN; on a tie too for bfloat16."""
    beaten = (x > u if bf16 else x >= u) if op == MAX else x < u if bf16 else x <= u
    return (x == x) and not beaten


@inline
def _held_next(x, u, op, bf16):
    """One update ``u`` into the held value ``x``: the value then held, and whether the
    update's own bits are stored (max/min's winner). Scalars only: an inlined function taking
    arrays costs an atomic reference-count pair per call, here per update."""
    if op == ADD:
        return nearest(x + u, bf16), False
    if op == MUL:
        return nearest(x * u, bf16), False
    takes = _takes(x, u, op, bf16)
    return (u if takes else x), takes


@inline
def _held_walk(dst, indices, src, n, inner, size, op, olo, ohi, ilo, ihi, half):
    """float16/bfloat16 reductions into few rows of 1, 2 or 4 columns (all of them): the rows'
    values converted once to float32 and held there, the updates converted 8 at a time.

    - Sums and products: each step is the held value plus (times) the update rounded to the
      type's nearest (``_loops_half.nearest``: two conversions in vector registers, where a
      step on the type's bits takes four, each with a move between register files, all on one
      port); the held values are converted back at the end, exactly (each is a rounded value).
      Returns ``_SIGNALLING``, nothing written, where a float16 held value is a signalling NaN
      (float32 would keep it quiet: an untouched one must keep its bits).
    - max/min: each step compares the held value with the update's; where the update wins
      (:func:`_takes`) its own bits are stored and its float32 value held: a conversion less
      per step than on the elements, no rounding, every NaN's bits kept, signalling ones too
      (ScatterElements float16 max of rows of 2 into 16 rows: 1.47x -> 0.97x our float32's time).

    Else returns what the walk returns."""
    bf16 = half == 2
    w = u64(inner)
    lo, hi = u64(olo) * u64(size) * w, u64(ohi) * u64(size) * w
    values = np.empty(hi - lo, np.float32)
    signalling = False
    for j in range(lo, hi):
        bits = dst[j]
        signalling |= _signalling(bits, half) if op in (ADD, MUL) else False
        values[j - lo] = _value(bits, half, False)
    if signalling:
        return _SIGNALLING
    bad = np.int64(-1)
    for o in range(olo, ohi):
        base = u64(o) * u64(size) * w - lo
        at = u64(o) * u64(n) * w
        e, end = at, at + u64(n) * w
        while e + u64(8) <= end:  # 8 updates converted as one
            updates = widened8(src, e, bf16)
            for k in range(8):
                ok, t = _target(indices[e], base, w, (e - at) & (w - u64(1)), size)
                if not ok:
                    bad = np.int64(e)
                    break
                values[t], store = _held_next(values[t], updates[k], op, bf16)
                if store:
                    dst[t + lo] = src[e]
                e += u64(1)
            if bad >= 0:
                break
        while (bad < 0) & (e < end):
            ok, t = _target(indices[e], base, w, (e - at) & (w - u64(1)), size)
            if not ok:
                bad = np.int64(e)
                break
            values[t], store = _held_next(values[t], _value(src[e], half, True), op, bf16)
            if store:
                dst[t + lo] = src[e]
            e += u64(1)
        if bad >= 0:
            break
    if op in (ADD, MUL):  # what the steps before a bad index wrote, as the other walks leave it
        for j in range(lo, hi):
            dst[j] = _rounded(values[j - lo], half, _VECTOR_LOOP)
    return bad


@inline
def _flat_sums_walk(dst, indices, src, n, inner, size, op, olo, ohi, ilo, ihi, half):
    """float16/bfloat16 sums and products of one element per index row: the updates converted
    8 at a time (``_loops_half.widened8``), each step still one at a time in the spec's order
    (targets may repeat), its held value converted and the result rounded as one element."""
    m = u64(n)
    bf16 = half == 2
    for o in range(olo, ohi):
        base = u64(o) * u64(size)
        e = u64(o) * m
        end = e + m
        while e + u64(8) <= end:
            values = widened8(src, e, bf16)
            for k in range(8):
                ok, t = _target(indices[e], base, u64(1), u64(0), size)
                if not ok:
                    return np.int64(e)
                held = _value(dst[t], half, True)
                dst[t] = _rounded(held + values[k] if op == ADD else held * values[k], half, _SCALAR)
                e += u64(1)
        while e < end:
            ok, t = _target(indices[e], base, u64(1), u64(0), size)
            if not ok:
                return np.int64(e)
            _put(dst, t, src, e, op, half)
            e += u64(1)
    return np.int64(-1)


@inline  # inlined with op a constant: no dispatch per element
def _axis_walk(dst, indices, src, n, inner, size, op, olo, ohi, ilo, ihi, half, side):
    """The walk one update at a time; ``side`` (a constant: float16/bfloat16 with F16C, 8 or
    more columns): each index row's columns 8 (then 4, 2) side by side first
    (``_loops_half``'s lanes), the rest, or a group holding a bad index, one at a time."""
    w = u64(inner)
    m = u64(n) * w
    bf16 = half == 2
    for o in range(olo, ohi):
        base = u64(o) * u64(size) * w
        at = u64(o) * m
        if inner == 1:  # one element per row: a flat walk
            for e in range(at, at + m):
                ok, t = _target(indices[e], base, u64(1), u64(0), size)
                if not ok:
                    return np.int64(e)
                _put(dst, t, src, e, op, half)
            continue
        for _ in range(n):
            j = ilo
            if side:
                while (j + 8 <= ihi) and _gathered8(dst, indices, src, at + u64(j), base, w, j, size, op, bf16):
                    j += 8
                if (j + 4 <= ihi) and _gathered4(dst, indices, src, at + u64(j), base, w, j, size, op, bf16):
                    j += 4
                if (j + 2 <= ihi) and _gathered2(dst, indices, src, at + u64(j), base, w, j, size, op, bf16):
                    j += 2
            for i in range(j, ihi):
                e = at + u64(i)
                ok, t = _target(indices[e], base, w, u64(i), size)
                if not ok:
                    return np.int64(e)
                _put(dst, t, src, e, op, half)
            at += w
    return np.int64(-1)


@inline
def _held1_walk(dst, indices, src, n, inner, size, op, olo, ohi, ilo, ihi, half):
    """:func:`_held_walk` of one column, a constant: the step as short as float32's."""
    return _held_walk(dst, indices, src, n, 1, size, op, olo, ohi, ilo, ihi, half)


# _LanesAxis' walks, each (dst, indices, src, n, inner, size, op, olo, ohi, ilo, ihi, half)
_WALKS = ("rows", "side", "held1", "held", "flat", "plain")


def _walk_for(kind, op, half):
    """One walk of :class:`_LanesAxis`, compiled for ``op`` and ``half`` on its first call:
    ``kind`` (its number in ``_WALKS``) a constant of the closure, numba compiles only the call
    it picks (the others are pruned before typing)."""
    number = _WALKS.index(kind)

    @jit
    def run(dst, indices, src, n, inner, size, olo, ohi, ilo, ihi):
        if number == 0:
            return _rows_walk(dst, indices, src, n, inner, size, op, olo, ohi, ilo, ihi, half)
        if number == 1:
            return _axis_walk(dst, indices, src, n, inner, size, op, olo, ohi, ilo, ihi, half, True)
        if number == 2:
            return _held1_walk(dst, indices, src, n, inner, size, op, olo, ohi, ilo, ihi, half)
        if number == 3:
            return _held_walk(dst, indices, src, n, inner, size, op, olo, ohi, ilo, ihi, half)
        if number == 4:
            return _flat_sums_walk(dst, indices, src, n, inner, size, op, olo, ohi, ilo, ihi, half)
        return _axis_walk(dst, indices, src, n, inner, size, op, olo, ohi, ilo, ihi, half, False)

    return run


_MADE = threading.Lock()


class _LanesAxis:
    """``scatter_axis``' loop for a float16/bfloat16 reduction where the CPU has F16C: picks the
    walk the shape calls for (several updates in one vector, or the held values in float32, or
    one at a time), each its own compiled function, compiled on its first call: all of them in
    one function took numba 9-12 s to compile, not 1-1.5, a cost every first call of a fresh
    install would pay for walks its shapes never take (and a loop holding the paths it does
    not take ran 5-15% slower). Called as the compiled loops are: ``(dst, indices, src, n,
    inner, size, olo, ohi, ilo, ihi)``."""

    def __init__(self, op: int, half: int) -> None:
        self.op, self.half = op, half
        self.walks: dict = {}

    def walk(self, kind: str):
        """The compiled walk ``kind``, made on its first use (a max/min loop marked, as
        :func:`_loops_reduce.by_reduction` marks its own)."""
        found = self.walks.get(kind)
        if found is None:
            with _MADE:  # the threads of one call meet here at once: one function, compiled once
                found = self.walks.get(kind)
                if found is None:
                    found = _walk_for(kind, self.op, self.half)
                    if self.op in (MAX, MIN):
                        _SELECTING.add(found)
                    self.walks[kind] = found
        return found

    def __call__(self, dst, indices, src, n, inner, size, olo, ohi, ilo, ihi):
        args = (dst, indices, src, n, inner, size, olo, ohi, ilo, ihi)
        full = ilo == 0 and ihi == inner
        if inner in (2, 4) and full and size >= _MANY_ROWS:
            return self.walk("rows")(*args)
        if ihi - ilo >= 8:  # narrower: no faster
            return self.walk("side")(*args)
        if inner == 1 or (inner in (2, 4) and full):
            # a table of few rows under many updates: its values held in float32 (_held_walk)
            held = (ohi - olo) * size * inner
            if held * 4 <= (ohi - olo) * n * inner and held <= _MOST_HELD:
                bad = self.walk("held1" if inner == 1 else "held")(*args)
                if bad != _SIGNALLING:
                    return bad
            if inner == 1 and self.op in (ADD, MUL):  # the updates converted 8 at a time
                return self.walk("flat")(*args)
        return self.walk("plain")(*args)


def _axis_for(op, half):
    if half is None or op == NONE or not F16C:

        @jit
        def axis(dst, indices, src, n, inner, size, olo, ohi, ilo, ihi):
            return _axis_walk(dst, indices, src, n, inner, size, op, olo, ohi, ilo, ihi, half, False)

        return axis
    return _LanesAxis(op, half)


_AXIS = by_reduction(_axis_for, (NONE, ADD, MUL, MAX, MIN))


def scatter_axis(dst, indices, src, outer, n, inner, size, op, olo, ohi, ilo, ihi, half):
    """ScatterElements with data of shape ``(outer, size, inner)`` and indices and updates of
    ``(outer, n, inner)`` (the shapes collapsed around the axis), C-contiguous: for every
    position ``e = (o, k, i)`` in row-major order with ``o`` in ``[olo, ohi)`` and ``i`` in
    ``[ilo, ihi)``, ``dst[o, v, i] = f(dst[o, v, i], src[e])`` (NONE: assigned), ``v =
    indices[e]`` (negative counts from the end).

    Two positions share a target only if their ``o`` and ``i`` agree, so a caller may split
    the work by ``o`` or by ``i``; each target still sees its updates in the spec's order, the
    same bits at any thread count. ``half``: as for ``_loops_reduce._reduce_row``; float16 and
    bfloat16 take several updates at a time where their targets differ (one index row's
    columns, or consecutive rows of 1, 2 or 4 columns with different indices): each target
    still sees its updates in order. A bad index stops the loop and returns its position
    (else -1), the updates before it written."""
    return _AXIS[op][half or 0](dst, indices, src, n, inner, size, olo, ohi, ilo, ihi)


def planned_loop(kernel, op, half):
    """The compiled function that ``_loops_reduce.reduce_nd`` (``kernel`` "nd") or
    :func:`scatter_axis` ("axis") calls for ``op`` and ``half``, for a call planned once per
    signature (``_planned``), which calls it directly: the same machine code, without the
    wrapper."""
    return (_ND if kernel == "nd" else _AXIS)[op][half or 0]
