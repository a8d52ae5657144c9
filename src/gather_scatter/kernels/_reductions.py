"""Reductions into rows: ``f(target[offsets[i]], values[i])`` in order of ``i``, the spec's loop,
for ScatterND's and ScatterElements' reductions (add, mul, max, min).

NumPy's ufuncs (:data:`UFUNCS`, :func:`reduce_into`'s rounds of distinct rows) and the compiled
row loops (:func:`reduce_rows`: the operands and codes they take, and the cost model that
decides how many threads split the targets). Copies, last-wins assignment and the fused
copy-and-scatter that calls these are ``_writes``'s."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..resources import threads as _parallel
from ..rules import dims as _dims
from ..rules.versions import Reduction
from . import _codes, _numba

__all__ = ["UFUNCS", "compiled_form", "compiled_operands", "reduce_into", "reduce_rows", "thread_parts"]


UFUNCS = {
    Reduction.ADD: np.add,
    Reduction.MUL: np.multiply,
    Reduction.MAX: np.maximum,
    Reduction.MIN: np.minimum,
}


_ROUND_BYTES = 8 << 20  # the rows one step of reduce_into's NumPy path gathers, reduces and writes


def reduce_into(
    target: np.ndarray,
    offsets: np.ndarray,
    values: np.ndarray,
    reduction: Reduction,
    dims: tuple[int, ...] | None = None,
) -> None:
    """``target[offsets[i]] = f(target[offsets[i]], values[i])`` in order of ``i`` (the spec's
    loop), ``f`` the reduction's ufunc; ``target`` holds one slice per row (1-D: one element),
    or, given ``dims``, one per flat offset into its first ``len(dims)`` axes (any layout).

    A C-contiguous target of any slice width (elements too) goes through the compiled row
    kernel (:func:`reduce_rows`) where numba is here or the work pays for its import; complex
    numbers and elements on NumPy's path through ``ufunc.at``; whole slices on NumPy's path
    through the ufunc itself, vectorized, in rounds: round ``r`` takes the ``r``-th update of every destination, so each
    round writes distinct rows and every element sees its updates in row-major order, bit for
    bit what ``ufunc.at`` computes (``ufunc.at`` on rows costs ~12 us per 1000-float row).
    Distinct destinations are a single round.
    """
    ufunc = UFUNCS[reduction]
    lead = 1 if dims is None else len(dims)
    at = (lambda rows: rows) if dims is None else (lambda rows: np.unravel_index(rows, dims))
    with np.errstate(invalid="ignore"):  # NaN in max/min: as quiet as np.maximum itself
        # Complex products differ in the last bit between NumPy's vector loop and its scalar one.
        if dims is None and target.dtype.kind != "c":
            table = target.reshape(target.shape[0], _dims.size(target.shape[1:]))
            if reduce_rows(table, offsets, values.reshape(offsets.size, table.shape[1]), reduction):
                return
        if target.ndim == lead or target.dtype.kind == "c":
            ufunc.at(target, at(offsets), values)
            return
        # In chunks of rows: the gathered rows and the ufunc's result are temporaries of the
        # chunk's size, not of the whole update (two copies of 256 MiB of updates, 1M rows).
        step = max(1, _ROUND_BYTES // max(1, values[:1].nbytes))
        for where in _rounds(offsets):
            picked = offsets if where is None else offsets[where]
            for lo in range(0, picked.size, step):
                rows = at(picked[lo : lo + step])
                part = values[lo : lo + step] if where is None else values[where[lo : lo + step]]
                target[rows] = ufunc(target[rows], part)


_CODES = {
    Reduction.ADD: _codes.ADD,
    Reduction.MUL: _codes.MUL,
    Reduction.MAX: _codes.MAX,
    Reduction.MIN: _codes.MIN,
}
_BOOL_CODES = {
    Reduction.ADD: _codes.MAX,
    Reduction.MUL: _codes.MIN,
    Reduction.MAX: _codes.MAX,
    Reduction.MIN: _codes.MIN,
}  # bool as uint8 0/1: or is max, and is min


# The compiled reductions' ``half``: float16 and bfloat16 travel as their uint16 bits.
_HALF = {np.dtype(np.float16): 1, np.dtype(ml_dtypes.bfloat16): 2}


def compiled_form(dtype: np.dtype, reduction: Reduction) -> tuple[np.dtype, int, int | None] | None:
    """``(view, op, half)``: the dtype whose bits the compiled reductions take for data of
    native-order ``dtype`` (``dtype`` itself where no view is needed), the reduction's code and
    ``half``; None for NumPy's path (complex, other ml_dtypes types, objects, other byte order).
    A planned call (``_planned``) takes it once per signature, :func:`compiled_operands` per call."""
    if not dtype.isnative:
        return None
    half = _HALF.get(dtype)
    if half:
        return _UINT16, _CODES[reduction], half
    if dtype == np.bool_:
        return _UINT8, _BOOL_CODES[reduction], None
    if dtype.kind in "iu" or (dtype.kind == "f" and dtype.itemsize >= 4):
        if dtype.kind == "i" and reduction in (Reduction.ADD, Reduction.MUL):
            # Two's complement: a wrapped sum or product has the same bits signed or not, so
            # int8..int64 share uint8..uint64's compiled loops (half the compiles: CI, first calls)
            return np.dtype(f"u{dtype.itemsize}"), _CODES[reduction], None
        return dtype, _CODES[reduction], None
    return None


_UINT8, _UINT16 = np.dtype(np.uint8), np.dtype(np.uint16)


def compiled_operands(target: np.ndarray, values: np.ndarray, reduction: Reduction):
    """``(dst, src, op, half)``: the flat buffers and codes the compiled reductions take
    for a C-contiguous, native-order ``target`` of ints, bool, float32/64, float16 or bfloat16
    (:func:`compiled_form`); None for any other (complex, other ml_dtypes types, objects): NumPy's path."""
    dtype = target.dtype
    form = compiled_form(dtype, reduction)
    if form is None or not target.flags.c_contiguous:
        return None
    view, op, half = form
    dst, src = target.reshape(-1), np.ascontiguousarray(values, dtype=dtype).reshape(-1)
    if view != dtype:
        dst, src = dst.view(view), src.view(view)
    return dst, _numba.read_only(src), op, half


# The compiled reductions' cost, measured on this project's 2-core machine (float32, random
# targets; benchmarks/bench_reductions.py sweeps them): per update walked, per byte of updates
# reduced, per update sorted into the threads' parts (a counting pass), and one hand-off to
# the pool. A part reads its updates' rows at scattered positions, which the prefetcher
# follows badly for narrow rows: 200,000 rows of 256 bytes cost 3x per byte split in two
# than read in order, 16 KiB rows about the same (_split_penalty).
_NS_UPDATE, _NS_BYTE, _NS_BUCKET, _NS_HANDOFF = 1.7, 0.045, 4.5, 40_000.0


def _split_penalty(row_bytes: int) -> float:
    return 1.0 + 2.0 * min(1.0, 1024 / max(row_bytes, 1))


def thread_parts(n_updates: int, nbytes: int, n_rows: int) -> int:
    """How many threads split the target rows, by the cost model above: 1 where sorting the
    updates into parts, reading them scattered and the hand-off cost more than the threads save."""
    threads = min(_parallel.get_num_threads(), n_rows)
    if threads < 2 or not n_updates:
        return 1
    alone = n_updates * _NS_UPDATE + nbytes * _NS_BYTE
    shared = n_updates * _NS_UPDATE + nbytes * _NS_BYTE * _split_penalty(nbytes // n_updates)
    split = n_updates * _NS_BUCKET + shared / threads + _NS_HANDOFF
    return threads if split < alone else 1


def reduce_rows(target: np.ndarray, offsets: np.ndarray, values: np.ndarray, reduction: Reduction) -> bool:
    """``target[offsets[i]] = f(target[offsets[i]], values[i])`` in order of ``i``, compiled:
    ``target`` 2-D (rows, width), any width from 1, ``values`` (n, width), or both 1-D (one
    element each); False (nothing written) where the compiled loops are not here yet or the
    dtype needs NumPy.

    The threads split the **targets**: the update positions are sorted (stably, one counting
    pass) into one part per thread by their target row, and each thread applies its part in
    order, so every row sees its updates in the spec's order and the bits are the same at any
    thread count (onnxruntime splits the updates and races). Whether the split pays is a cost
    model (:func:`thread_parts`); a table of fewer rows than threads splits the columns of its rows.
    float16 and bfloat16 are rounded after every update, as the spec's loop in NumPy computes.
    """
    if target.ndim == 1:  # one element per update
        target, values = target.reshape(-1, 1), values.reshape(-1, 1)
    n_rows, width = target.shape
    loops = _numba.loops_for(offsets.size * width, ("rows", target.dtype.str, reduction))
    operands = None if loops is None else compiled_operands(target, values, reduction)
    if operands is None:
        return False
    dst, src, op, half = operands
    rows = _numba.read_only(np.ascontiguousarray(offsets, dtype=np.int64).view())
    n = rows.size
    parts = thread_parts(n, values.nbytes, n_rows)
    if parts > 1:
        positions, starts = np.empty(n, np.int64), np.empty(parts + 1, np.int64)
        loops.bucket_rows(rows, n_rows, parts, positions, starts)
        run = loops.reduce_rows_at
        chunks = [(int(starts[b]), int(starts[b + 1])) for b in range(parts)]
        _parallel.run(lambda lo, hi: run(dst, rows, src, width, op, positions, lo, hi, half), chunks)
    elif n_rows < _parallel.get_num_threads() and len(columns := _parallel.ranges(width, 3 * values.nbytes)) > 1:
        run = loops.reduce_rows  # a few wide rows: split their columns
        _parallel.run(lambda lo, hi: run(dst, rows, src, width, op, lo, hi, half), columns)
    else:
        loops.reduce_rows_at(dst, rows, src, width, op, rows[:0], 0, n, half)
    return True


def _rounds(offsets: np.ndarray) -> list:
    """Positions of ``offsets`` split so that round ``r`` holds the ``r``-th occurrence of each
    value (ascending positions within a round): ``[None]`` (all of them) when they are distinct."""
    n = offsets.size
    if n < 2:
        return [None]
    order = np.argsort(offsets, kind="stable")  # equal offsets keep their row-major order
    ordered = offsets[order]
    first = np.empty(n, dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    if starts.size == n:
        return [None]
    rank = np.arange(n) - np.repeat(starts, np.diff(np.append(starts, n)))  # occurrence number
    by_rank = np.argsort(rank, kind="stable")
    bounds = np.cumsum(np.bincount(rank))[:-1]
    return [np.sort(order[part]) for part in np.split(by_rank, bounds)]
