"""The compiled reductions: ScatterND's rows (any width, split by target rows) and
ScatterElements' elements along one axis, for ints, bool, float32/64 and float16/bfloat16
(computed in float32 through a table of the 65,536 bit patterns, rounded after every update
as NumPy and ml_dtypes round). Part of the module ``_compiled.loops()`` returns: ``_loops``
imports these names. Positions are uint64, as in ``_loops``."""

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

from ._compiled import ADD, MAX, MIN, MUL, NONE

jit = numba.njit(nogil=True, cache=True)
u64 = np.uint64


def _load(a, j, table):
    """``a[j]`` as the value a reduction computes with: itself, or (``table`` given: ``a`` holds
    float16 or bfloat16 bits) its float32 value, exact, read from the 65,536-entry ``table``."""


@overload(_load)
def _load_impl(a, j, table):
    if isinstance(table, types.NoneType):
        return lambda a, j, table: a[j]
    return lambda a, j, table: table[a[j]]


def _value(a, table):
    """``a`` (an element) as the value a reduction computes with: itself, or (``table`` given:
    ``a`` is float16 or bfloat16 bits) its float32 value, read from ``table``."""


@overload(_value)
def _value_impl(a, table):
    if isinstance(table, types.NoneType):
        return lambda a, table: a
    return lambda a, table: table[a]


def _tie(p, q, table, half):
    """Whether max/min keep ``x`` on a tie: float16 only (``half`` 1), as NumPy's half loop
    does. Without a table, the constant False: the select then stays branch-free (2x)."""


@overload(_tie)
def _tie_impl(p, q, table, half):
    if isinstance(table, types.NoneType):
        return lambda p, q, table, half: False
    return lambda p, q, table, half: (half == 1) & (p == q)


def _store(a, j, value, table, half):
    """``a[j] = value``; with ``table`` given, ``value`` (float32) rounded to the nearest float16
    (``half`` 1) or bfloat16 (``half`` 2), ties to even, as NumPy and ml_dtypes round."""


@overload(_store)
def _store_impl(a, j, value, table, half):
    if isinstance(table, types.NoneType):

        def plain(a, j, value, table, half):
            a[j] = value

        return plain

    def rounded(a, j, value, table, half):
        a[j] = _float16_bits(value) if half == 1 else _bfloat16_bits(value)

    return rounded


@jit
def _float16_bits(value):
    """The float16 nearest float32 ``value`` (ties to even) as its 16 bits: NumPy's
    ``npy_floatbits_to_halfbits``, so NaN payloads come out as NumPy's float16 arithmetic gives
    them. Normal results take three integer steps (a rebias, a round-to-nearest-even bias,
    a shift; ryg's float_to_half_fast3_rtne), subnormals let the FPU round; equal to NumPy's
    on all 2**32 inputs (checked exhaustively, 30% faster than NumPy's branches)."""
    f = np.float32(value).view(np.uint32)
    sign = (f & np.uint32(0x80000000)) >> np.uint32(16)
    f &= np.uint32(0x7FFFFFFF)
    if f >= np.uint32(0x47800000):  # |value| >= 65536, inf or NaN
        if f > np.uint32(0x7F800000):  # NaN: NumPy keeps the payload's top bits, never none
            bits = np.uint32(0x7C00) + ((f & np.uint32(0x007FFFFF)) >> np.uint32(13))
            if bits == np.uint32(0x7C00):
                bits = np.uint32(0x7C01)
            return np.uint16(sign | bits)
        return np.uint16(sign | np.uint32(0x7C00))
    if f < np.uint32(0x38800000):  # a float16 subnormal or zero: adding 0.5 makes the FPU round
        g = np.float32(np.uint32(f).view(np.float32) + np.float32(0.5)).view(np.uint32)
        return np.uint16(sign | (g - np.uint32(0x3F000000)))
    odd = (f >> np.uint32(13)) & np.uint32(1)
    f += np.uint32(0xC8000FFF) + odd  # exponent rebiased by (15 - 127) << 23, 0xFFF + odd: ties to even
    return np.uint16(sign | (f >> np.uint32(13)))


@jit
def _bfloat16_bits(value):
    """The bfloat16 nearest float32 ``value`` (ties to even) as its 16 bits, as ml_dtypes rounds;
    a NaN keeps its sign and top payload bits, made quiet."""
    f = np.uint32(np.float32(value).view(np.uint32))
    if (f & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000):
        return np.uint16((f >> np.uint32(16)) | np.uint32(0x0040))
    f += np.uint32(0x7FFF) + ((f >> np.uint32(16)) & np.uint32(1))
    return np.uint16(f >> np.uint32(16))


@numba.njit(nogil=True, cache=True, inline="always")  # per update: a call would cost more than a narrow row
def _reduce_row(dst, at, x, xat, src, sat, n, op, table, half):
    """``dst[at + j] = f(x[xat + j], src[sat + j])`` for ``j < n``, ``f`` the reduction ``op``
    (ADD, MUL, MAX, MIN) as NumPy's ufunc computes it: max/min keep a NaN in ``x`` and give
    ``src``'s on a tie (``x``'s for float16, as NumPy's half loop does; the winner's bits,
    unrounded: -0 and 0 tie). With ``table`` (float16/bfloat16 bits),
    sums and products are computed in float32, exact for these types' operands, then rounded
    once: NumPy's and ml_dtypes' own arithmetic, bit for bit. Indices are uint64 (no
    wraparound checks), so the loop over ``j`` compiles to straight vector code."""
    if op == ADD:
        for j in range(n):
            _store(dst, at + j, _load(x, xat + j, table) + _load(src, sat + j, table), table, half)
    elif op == MUL:
        for j in range(n):
            _store(dst, at + j, _load(x, xat + j, table) * _load(src, sat + j, table), table, half)
    elif op == MAX:
        for j in range(n):
            a = x[xat + j]  # loaded once into locals: the select below stays a select, no branch
            b = src[sat + j]
            p = _value(a, table)
            q = _value(b, table)
            # NumPy's float16 loop keeps x on a tie (p >= q), the others give src
            dst[at + j] = a if (p > q) | (p != p) | _tie(p, q, table, half) else b
    else:
        for j in range(n):
            a = x[xat + j]
            b = src[sat + j]
            p = _value(a, table)
            q = _value(b, table)
            dst[at + j] = a if (p < q) | (p != p) | _tie(p, q, table, half) else b


@jit
def reduce_rows(dst, offsets, src, width, op, jlo, jhi, table, half):
    """ScatterND's reductions on whole slices: ``dst[offsets[i]] = f(dst[offsets[i]], src[i])``
    for rows i in increasing order (row-major: duplicates in the spec's order), columns
    ``[jlo, jhi)`` of each ``width``-element slice (a caller may split the columns); ``op``
    is ADD, MUL, MAX or MIN; ``table``/``half`` as for ``_reduce_row``. Offsets are already
    checked and non-negative."""
    w = u64(width)
    m = u64(jhi - jlo)
    for i in range(offsets.size):
        a = u64(offsets[i]) * w + u64(jlo)
        _reduce_row(dst, a, dst, a, src, u64(i) * w + u64(jlo), m, op, table, half)


@jit
def bucket_rows(offsets, n_rows, parts, positions, starts):
    """Stable counting sort of the update positions by part of the target rows: part ``b`` is
    the rows ``r`` with ``r * parts // n_rows == b``. ``positions`` (size ``offsets.size``)
    receives, part after part, the positions whose target lies in it, ascending within a part;
    ``starts`` (size ``parts + 1``) where each part's run begins. Each part's updates then
    keep the spec's order, and no two parts share a row."""
    counts = np.zeros(parts + 1, np.int64)
    for i in range(offsets.size):
        counts[(offsets[i] * parts) // n_rows + 1] += 1
    for b in range(parts):
        counts[b + 1] += counts[b]
    starts[:] = counts
    for i in range(offsets.size):
        b = (offsets[i] * parts) // n_rows
        positions[counts[b]] = i
        counts[b] += 1


@numba.njit(nogil=True, cache=True, inline="always")  # inlined with op a constant: no dispatch per row
def _rows_walk(dst, offsets, src, width, op, positions, plo, phi, table, half):
    w = u64(width)
    if positions.size == 0 and width == 1:  # one element per update: the plainest loop
        for p in range(u64(plo), u64(phi)):
            a = u64(offsets[p])
            _reduce_row(dst, a, dst, a, src, p, u64(1), op, table, half)
    elif positions.size == 0:
        for p in range(plo, phi):
            a = u64(offsets[p]) * w
            _reduce_row(dst, a, dst, a, src, u64(p) * w, w, op, table, half)
    else:
        for k in range(plo, phi):
            p = positions[k]
            a = u64(offsets[p]) * w
            _reduce_row(dst, a, dst, a, src, u64(p) * w, w, op, table, half)


@jit
def reduce_rows_at(dst, offsets, src, width, op, positions, plo, phi, table, half):
    """``dst[offsets[p]] = f(dst[offsets[p]], src[p])`` (whole rows of ``width``) for ``p`` in
    ``positions[plo:phi]`` in that order, or for ``p`` in ``range(plo, phi)`` where
    ``positions`` is empty: one part of :func:`bucket_rows`, or all updates on one thread.
    Each reduction gets its own copy of the loop (``op`` a constant there): 1M element adds
    into 1M cells 4.0 -> 1.6 ms (np.add.at: 2.2)."""
    if op == ADD:
        _rows_walk(dst, offsets, src, width, ADD, positions, plo, phi, table, half)
    elif op == MUL:
        _rows_walk(dst, offsets, src, width, MUL, positions, plo, phi, table, half)
    elif op == MAX:
        _rows_walk(dst, offsets, src, width, MAX, positions, plo, phi, table, half)
    else:
        _rows_walk(dst, offsets, src, width, MIN, positions, plo, phi, table, half)


@numba.njit(nogil=True, cache=True, inline="always")  # inlined with op a constant: no dispatch per element
def _axis_walk(dst, indices, src, n, inner, size, op, olo, ohi, ilo, ihi, table, half):
    w = u64(inner)
    m = u64(n) * w
    for o in range(olo, ohi):
        base = u64(o) * u64(size) * w
        at = u64(o) * m
        if inner == 1:  # one element per row: a flat walk
            for e in range(at, at + m):
                v = np.int64(indices[e])
                v += (v >> 63) & size
                if u64(v) >= u64(size):
                    return np.int64(e)
                t = base + u64(v)
                if op == NONE:
                    dst[t] = src[e]
                else:
                    _reduce_row(dst, t, dst, t, src, e, u64(1), op, table, half)
            continue
        for _ in range(n):
            for i in range(ilo, ihi):
                e = at + u64(i)
                v = np.int64(indices[e])
                v += (v >> 63) & size
                if u64(v) >= u64(size):
                    return np.int64(e)
                t = base + u64(v) * w + u64(i)
                if op == NONE:
                    dst[t] = src[e]
                else:
                    _reduce_row(dst, t, dst, t, src, e, u64(1), op, table, half)
            at += w
    return np.int64(-1)


@jit
def scatter_axis(dst, indices, src, outer, n, inner, size, op, olo, ohi, ilo, ihi, table, half):
    """ScatterElements with data of shape ``(outer, size, inner)`` and indices and updates of
    ``(outer, n, inner)`` (the shapes collapsed around the axis), C-contiguous: for every
    position ``e = (o, k, i)`` in row-major order with ``o`` in ``[olo, ohi)`` and ``i`` in
    ``[ilo, ihi)``, ``dst[o, v, i] = f(dst[o, v, i], src[e])`` (NONE: assigned), ``v =
    indices[e]`` (negative counts from the end).

    Two positions share a target only if their ``o`` and ``i`` agree, so a caller may split
    the work by ``o`` or by ``i``; each target still sees its updates in the spec's order, the
    same bits at any thread count. ``table``/``half``: as for ``_reduce_row``. A bad index
    stops the loop and returns its position (else -1)."""
    if op == NONE:
        return _axis_walk(dst, indices, src, n, inner, size, NONE, olo, ohi, ilo, ihi, table, half)
    if op == ADD:
        return _axis_walk(dst, indices, src, n, inner, size, ADD, olo, ohi, ilo, ihi, table, half)
    if op == MUL:
        return _axis_walk(dst, indices, src, n, inner, size, MUL, olo, ohi, ilo, ihi, table, half)
    if op == MAX:
        return _axis_walk(dst, indices, src, n, inner, size, MAX, olo, ohi, ilo, ihi, table, half)
    return _axis_walk(dst, indices, src, n, inner, size, MIN, olo, ohi, ilo, ihi, table, half)


@jit
def reduce_nd(dst, indices, dims, src, width, op, table, half):
    """ScatterND with the offsets computed in the same pass: update ``i`` (row ``i`` of
    ``indices``, shape ``(n, k)``, into data's first k axes ``dims``; negatives count from the
    end) reduced into its ``width``-element slice (NONE: assigned, so the last write wins), in
    increasing ``i`` (the spec's order). One thread, no offsets array: for narrow slices
    NumPy's offsets cost more than the writes themselves (300,000 element reductions: 0.95 of
    1.5 ms). A bad index stops the loop and returns its row (else -1): for a caller that
    writes a fresh output it then drops, or checked first."""
    k = dims.size
    w = u64(width)
    for i in range(indices.shape[0]):
        at = u64(0)
        for j in range(k):
            v = np.int64(indices[i, j])
            size = dims[j]
            v += (v >> 63) & size
            if u64(v) >= u64(size):
                return np.int64(i)
            at = at * u64(size) + u64(v)
        a = at * w
        if op == NONE:
            for j in range(w):
                dst[a + j] = src[u64(i) * w + j]
        else:
            _reduce_row(dst, a, dst, a, src, u64(i) * w, w, op, table, half)
    return np.int64(-1)
