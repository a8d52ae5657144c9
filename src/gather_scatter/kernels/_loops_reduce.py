"""The compiled reductions: ScatterND's rows (any width, split by target rows) and
ScatterElements' elements along one axis, for ints, bool, float32/64 and float16/bfloat16
(computed in float32, rounded after every update as NumPy and ml_dtypes round: the conversions
are ``_loops_half``'s; add and mul also take their widened float32 copies). Part of the module ``_numba.loops()``
returns: ``_loops`` imports these names. Positions are uint64, as in ``_loops``."""

import llvmlite.binding as llvm
import numba
import numpy as np
from numba.core import event, types
from numba.extending import intrinsic, overload

from . import _loops_cache  # noqa: F401 - every loop's numba cache stamped with all their sources
from ._codes import ADD, MAX, MIN, MUL, NONE
from ._loops_half import (
    F16C,
    _bfloat16_result_bits,
    _bfloat16_to_float,
    _f16c_bits,
    _f16c_to_float,
    _f16c_to_float_alone,
    _float16_bits,
    _half_to_float,
    _row2,
    _row4,
    _row8,
    _row16,
)

jit = numba.njit(nogil=True, cache=True)
u64 = np.uint64


U32 = np.uint32
inline = numba.njit(nogil=True, cache=True, inline="always")


@intrinsic
def _pick(typingctx, keep, a, b):
    """``a if keep else b`` (two uint16) as a select marked unpredictable, so that LLVM keeps it
    a select (a cmov) rather than a branch (CodeGenPrepare reads the mark; the x86 backend's
    cmov conversion does not: see ``_CmovKept``)."""

    def codegen(context, builder, signature, args):
        picked = builder.select(args[0], args[1], args[2])
        picked.set_metadata("unpredictable", builder.module.add_metadata([]))
        return picked

    return types.uint16(types.boolean, types.uint16, types.uint16), codegen


# max/min's float16/bfloat16 loops: compiled with LLVM's x86 cmov conversion off (_CmovKept)
_SELECTING: set = set()
_X86 = llvm.get_process_triple().startswith(("x86_64", "i386", "i686"))


class _CmovKept(event.Listener):
    """Turns LLVM's x86 cmov conversion off while numba compiles a loop in ``_SELECTING``, and
    back on after: that pass turns max/min's select of two float16/bfloat16 values (``_pick``)
    into a branch whatever its mark, which mispredicts half the time where the winner is random
    (ScatterElements bfloat16 max, 64 wide into 1,000 rows: 3.7-4.0x our float32's time, 1.5x
    without the branch). The
    option is LLVM's, for the whole process, so it is set only within such a compile: numba
    holds its compiler lock around each, and no other function (the user's included) is
    compiled meanwhile. A loop loaded from numba's cache was compiled so too."""

    def __init__(self) -> None:
        self.depth = 0

    def on_start(self, ev) -> None:
        if ev.data["dispatcher"] in _SELECTING:
            if self.depth == 0:
                llvm.set_option("", "--x86-cmov-converter=false")
            self.depth += 1

    def on_end(self, ev) -> None:
        if ev.data["dispatcher"] in _SELECTING:
            self.depth -= 1
            if self.depth == 0:
                llvm.set_option("", "--x86-cmov-converter=true")


if _X86:
    event.register("numba:compile", _CmovKept())


def _value(a, half, alone):
    """``a`` (an element) as the value a reduction computes with: itself (``half`` None), or
    (``half`` 1: float16 bits, 2: bfloat16 bits) its float32 value, exact. float16 with the
    CPU's conversion where it has one (F16C): for a sum or product of one element at a time
    (``alone``), one that waits on no earlier update (:func:`_loops_half._f16c_to_float_alone`:
    300,000 float16 adds into 16 cells, 2.8x -> 1.4x the float32 loop's time), else the plain
    one, which LLVM vectorizes, and which max/min's one-element loops keep (they compare the
    values and store the bits: 1.3x against 2.1x the other way)."""


@overload(_value)
def _value_impl(a, half, alone):
    if isinstance(half, types.NoneType):
        return lambda a, half, alone: a
    if not F16C:
        return lambda a, half, alone: _half_to_float(a) if half == 1 else _bfloat16_to_float(a)

    def value(a, half, alone):
        if half != 1:
            return _bfloat16_to_float(a)
        return _f16c_to_float_alone(a) if alone else _f16c_to_float(a)

    return value


def _signalling(bits, half):
    """Whether float16 ``bits`` (``half`` 1) are a signalling NaN, which a conversion to float32
    makes quiet; False for any other type (bfloat16's conversion keeps its bits)."""


@overload(_signalling)
def _signalling_impl(bits, half):
    if isinstance(half, types.NoneType):
        return lambda bits, half: False
    return lambda bits, half: (half == 1) & ((bits & 0x7E00) == 0x7C00) & ((bits & 0x1FF) != 0)


def _tie(p, q, half):
    """Whether max/min keep ``x`` on a tie: float16 only (``half`` 1), as NumPy's half loop
    does. Without ``half``, the constant False: the select then stays branch-free (2x)."""


@overload(_tie)
def _tie_impl(p, q, half):
    if isinstance(half, types.NoneType):
        return lambda p, q, half: False
    return lambda p, q, half: (half == 1) & (p == q)


def _winner(keep, a, b, half, mode):
    """max/min's stored bits: ``a if keep else b``, the winner's own bits (a signalling NaN's
    too). For float16/bfloat16 outside vector loops (``mode`` not ``_VECTOR_LOOP``, whose
    selects are blends) a select marked unpredictable (:func:`_pick`), compiled without LLVM's
    x86 cmov conversion (``_CmovKept``), where it was a branch that mispredicts half the time
    on random winners. Choosing between the float32 values and converting back, as before,
    did not help: LLVM folds that back into the same select."""


@overload(_winner)
def _winner_impl(keep, a, b, half, mode):
    if isinstance(half, types.NoneType):
        return lambda keep, a, b, half, mode: a if keep else b

    def winner(keep, a, b, half, mode):
        if mode == _VECTOR_LOOP:  # a vector select is a blend already
            return a if keep else b
        return _pick(keep, a, b)

    return winner


def _rounded(value, half, mode):
    """``value`` as stored: itself, or (``half`` given) the float32 ``value`` rounded to the
    nearest float16 (``half`` 1) or bfloat16 (2) bits, ties to even, as NumPy and ml_dtypes
    round: float16 with the CPU's conversion where it has one (F16C), else with
    :func:`_float16_bits`; bfloat16 with :func:`_loops_half._bfloat16_result_bits` (``value``
    is a sum or a product). (One element at a time, the branches of :func:`_float16_bits` had
    cost less than the CPU's scalar conversion while its loads waited on the last update:
    see :func:`_value`.)"""


@overload(_rounded)
def _rounded_impl(value, half, mode):
    if isinstance(half, types.NoneType):
        return lambda value, half, mode: value
    if not F16C:
        return lambda value, half, mode: _float16_bits(value) if half == 1 else _bfloat16_result_bits(value)
    return lambda value, half, mode: _f16c_bits(np.float32(value)) if half == 1 else _bfloat16_result_bits(value)


# Rows narrower than this reduce one element at a time (float16 rounds with branches);
# wider ones in a loop the compiler vectorizes (float16 with the CPU's conversions).
_VECTOR = 8
# How a loop converts float16 (_rounded) and selects max/min's winner (_winner).
_SCALAR, _VECTOR_LOOP, _ELEMENT_WALK = 0, 1, 2


@inline  # inlined with op a constant; LLVM unswitches the loop on mode: straight vector code
def _reduce_loop(dst, at, x, xat, src, sat, n, op, half, mode):
    alone = mode != _VECTOR_LOOP
    if op == ADD:
        for j in range(n):
            dst[at + j] = _rounded(_value(x[xat + j], half, alone) + _value(src[sat + j], half, alone), half, mode)
    elif op == MUL:
        for j in range(n):
            dst[at + j] = _rounded(_value(x[xat + j], half, alone) * _value(src[sat + j], half, alone), half, mode)
    elif op == MAX:
        for j in range(n):
            a = x[xat + j]  # loaded once into locals: the select below stays a select, no branch
            b = src[sat + j]
            p = _value(a, half, False)
            q = _value(b, half, False)
            # NumPy's float16 loop keeps x on a tie (p >= q), the others give src
            dst[at + j] = _winner((p > q) | (p != p) | _tie(p, q, half), a, b, half, mode)
    else:
        for j in range(n):
            a = x[xat + j]
            b = src[sat + j]
            p = _value(a, half, False)
            q = _value(b, half, False)
            dst[at + j] = _winner((p < q) | (p != p) | _tie(p, q, half), a, b, half, mode)


@inline  # per update: a call would cost more than a narrow row
def _reduce_row(dst, at, x, xat, src, sat, n, op, half):
    """``dst[at + j] = f(x[xat + j], src[sat + j])`` for ``j < n``, ``f`` the reduction ``op``
    (ADD, MUL, MAX, MIN) as NumPy's ufunc computes it: max/min keep a NaN in ``x`` and give
    ``src``'s on a tie (``x``'s for float16, as NumPy's half loop does; the winner's bits,
    unrounded: -0 and 0 tie). ``half`` None: the arrays' own type; 1 or 2: they hold float16 or
    bfloat16 bits, and sums and products are computed in float32, exact for these types'
    operands, then rounded once: NumPy's and ml_dtypes' own arithmetic, bit for bit. The
    conversions are the CPU's (F16C) or branch-free bit arithmetic, so float16 rows vectorize
    as float32 rows do. Indices are uint64 (no wraparound checks).

    One copy of the loop, its ``mode`` a run-time value: a second inlined copy for wide rows
    tripled numba's compile time of each signature (4 to 11-16 s here, every first call of a
    fresh install), where LLVM's loop unswitching gives the same two loops."""
    if _narrow_row(dst, at, x, xat, src, sat, n, op, half):
        return
    mode = _VECTOR_LOOP if n >= _VECTOR else (_ELEMENT_WALK if n == 1 else _SCALAR)
    _reduce_loop(dst, at, x, xat, src, sat, n, op, half, mode)


def _narrow_row(dst, at, x, xat, src, sat, n, op, half):
    """Whether a float16/bfloat16 row of 2, 4, 8 or 16 elements went through one vector each way
    (``_loops_half._row2`` ... ``_row16``, for every reduction: the CPU's float16 conversions,
    F16C, where it has them): a load, a conversion and a rounding or select for the row, where
    one element at a time takes one each per element (ScatterND rows 4 wide into 1,000, float16
    / bfloat16 add: 1.7-1.9x / 2.1-2.2x -> 0.7-0.8x / 1.2-1.3x our float32's time), and 8 or 16
    wide one vector where the vector loop's prologue and tail cost more than the row (8 wide into
    16 rows, add: 1.06x / 1.37x -> 0.76x / 0.91x). False
    (nothing written) for any other row, or without ``half``."""


@overload(_narrow_row)
def _narrow_row_impl(dst, at, x, xat, src, sat, n, op, half):
    if isinstance(half, types.NoneType) or not F16C:
        return lambda dst, at, x, xat, src, sat, n, op, half: False

    def narrow_row(dst, at, x, xat, src, sat, n, op, half):
        if n == 4:
            _row4(dst, at, x, xat, src, sat, op, half == 2)
            return True
        if n == 8:
            _row8(dst, at, x, xat, src, sat, op, half == 2)
            return True
        if n == 16:
            _row16(dst, at, x, xat, src, sat, op, half == 2)
            return True
        if n == 2:
            _row2(dst, at, x, xat, src, sat, op, half == 2)
            return True
        return False

    return narrow_row


def by_reduction(make, codes=(ADD, MUL, MAX, MIN)):
    """``make(op, half)`` for each reduction code in ``codes`` and each ``half`` (None, 1:
    float16 bits, 2: bfloat16 bits), as a table indexed ``[op][half or 0]`` (None at the other
    codes): one compiled function per reduction and element kind, both constants in it
    (closure cells, which numba's cache keys on). numba compiles a function on its first call
    for a signature, so a call compiles only its own reduction's loop: a function holding all
    four took 4x as long to compile (5.9 against 1.4-1.8 s per dtype, every first call of a
    fresh install), for the same machine code per reduction. ``half`` a constant, float16's
    loop holds no bfloat16 code and the reverse (as a run-time argument, one uint16 signature
    served both): 300,000 one-element max into 128 cells, float16 1.88 -> 1.64 ms, bfloat16
    1.59 -> 1.17 (float32 0.9; best of 3 quiet processes), add unchanged."""
    table: list = [None] * 5
    for op in codes:
        table[op] = (make(op, None), make(op, 1), make(op, 2))
        if op in (MAX, MIN):
            _SELECTING.update(table[op][1:])
    return tuple(table)


@inline
def _columns_walk(dst, offsets, src, width, op, jlo, jhi, half):
    w = u64(width)
    m = u64(jhi - jlo)
    for i in range(offsets.size):
        a = u64(offsets[i]) * w + u64(jlo)
        _reduce_row(dst, a, dst, a, src, u64(i) * w + u64(jlo), m, op, half)


def _columns_for(op, half):
    @jit
    def columns(dst, offsets, src, width, jlo, jhi):
        _columns_walk(dst, offsets, src, width, op, jlo, jhi, half)

    return columns


_COLUMNS = by_reduction(_columns_for)


def reduce_rows(dst, offsets, src, width, op, jlo, jhi, half):
    """ScatterND's reductions on whole slices: ``dst[offsets[i]] = f(dst[offsets[i]], src[i])``
    for rows i in increasing order (row-major: duplicates in the spec's order), columns
    ``[jlo, jhi)`` of each ``width``-element slice (a caller may split the columns); ``op``
    is ADD, MUL, MAX or MIN; ``half`` as for ``_reduce_row``. Offsets are already
    checked and non-negative."""
    _COLUMNS[op][half or 0](dst, offsets, src, width, jlo, jhi)


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


@inline  # inlined with op a constant: no dispatch per row
def _rows_walk(dst, offsets, src, width, op, positions, plo, phi, half):
    w = u64(width)
    if positions.size == 0 and width == 1:  # one element per update: the plainest loop
        for p in range(u64(plo), u64(phi)):
            a = u64(offsets[p])
            _reduce_row(dst, a, dst, a, src, p, u64(1), op, half)
    elif positions.size == 0:
        for p in range(plo, phi):
            a = u64(offsets[p]) * w
            _reduce_row(dst, a, dst, a, src, u64(p) * w, w, op, half)
    else:
        for k in range(plo, phi):
            p = positions[k]
            a = u64(offsets[p]) * w
            _reduce_row(dst, a, dst, a, src, u64(p) * w, w, op, half)


def _rows_at_for(op, half):
    @jit
    def rows_at(dst, offsets, src, width, positions, plo, phi):
        _rows_walk(dst, offsets, src, width, op, positions, plo, phi, half)

    return rows_at


_ROWS_AT = by_reduction(_rows_at_for)


def reduce_rows_at(dst, offsets, src, width, op, positions, plo, phi, half):
    """``dst[offsets[p]] = f(dst[offsets[p]], src[p])`` (whole rows of ``width``) for ``p`` in
    ``positions[plo:phi]`` in that order, or for ``p`` in ``range(plo, phi)`` where
    ``positions`` is empty: one part of :func:`bucket_rows`, or all updates on one thread.
    Each reduction has its own compiled loop (:func:`by_reduction`; ``op`` a constant there, no
    dispatch per update: 1M element adds into 1M cells 4.0 -> 1.6 ms, np.add.at: 2.2)."""
    _ROWS_AT[op][half or 0](dst, offsets, src, width, positions, plo, phi)


def _nd_for(op, half):
    @jit
    def nd(dst, indices, dims, src, width):
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
            elif width == 1:  # one element: the row loop's length a constant (its mode folded)
                _reduce_row(dst, at, dst, at, src, u64(i), u64(1), op, half)
            else:
                _reduce_row(dst, a, dst, a, src, u64(i) * w, w, op, half)
        return np.int64(-1)

    return nd


_ND = by_reduction(_nd_for, (NONE, ADD, MUL, MAX, MIN))


def reduce_nd(dst, indices, dims, src, width, op, half):
    """ScatterND with the offsets computed in the same pass: update ``i`` (row ``i`` of
    ``indices``, shape ``(n, k)``, into data's first k axes ``dims``; negatives count from the
    end) reduced into its ``width``-element slice (NONE: assigned, so the last write wins), in
    increasing ``i`` (the spec's order). One thread, no offsets array: for narrow slices
    NumPy's offsets cost more than the writes themselves (300,000 element reductions: 0.95 of
    1.5 ms). A bad index stops the loop and returns its row (else -1): for a caller that
    writes a fresh output it then drops, or checked first."""
    return _ND[op][half or 0](dst, indices, dims, src, width)
