"""Scatter max/min (and integer add) on CUDA without folding run by run: the spec's bits by atomics, at any depth.

A max or min only selects: the spec's loop (``ArrayAPIBackend.combine``) ends at one of the
values it met, so its result does not depend on the order it met them in — once the two cases
where equal values have different bits are named:

- NaN: the first NaN met wins (``data``'s own first), its payload kept;
- -0.0 against 0.0 (a tie): the update wins, so the last zero met; float16's loop keeps the
  value held, so there the first.

So each candidate — ``data[target]`` as position -1, then every update ``p`` of the target in
row-major order — gets an int64 **key** in the reduction's order (floats through their bits made
monotonic, -0.0 as 0.0, NaN above everything for max and min alike; integers as themselves;
``~key`` for min), and the winner is the largest key, and among equal keys the last position (or
the first: NaN, float16). Four launches over the sorted updates, whatever the depth:

1. ``_init``: each run's start writes ``key(data[target])`` into ``keys[run]``;
2. ``_best``: every update ``atomic_max``-es its key into its run's ``keys[run]``;
3. ``_tie`` (floats): every candidate whose key is the run's best ``atomic_max``-es its
   position, coded so that larger is the one to keep (``p + 1``, or ``n - p`` for the first);
4. ``_write``: each run's start writes the winner: integers from the key itself, floats the
   winning update's bits (``data``'s bits stay where data won).

Integer add is order-free too (it wraps: a sum modulo ``2**64``, cut to the data's width, is
the spec's whatever the order): ``_init`` writes ``data[target]`` as int64, ``_best`` adds every
update with ``atomic_add``, ``_write`` writes the sum cut to the data's type.

Atomics decide nothing here but a maximum or a wrapping sum of integers, which are the same
whatever order they run in: the same bits every run, as the sequential fold of
:mod:`._torch_triton` gives (which float add and mul, and integer mul, keep: their order
matters, or Triton has no atomic for them). ``keys`` and ``ties`` hold one row per run (at most
one per update): memory of the updates' size, not the data's.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

try:  # an optional dependency: torch's CUDA builds ship it
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised where triton is missing
    triton = None

NAN_KEY = 2**63 - 1  # NaN's key: above every number's, for max and min alike


def reduce_by_atomics(out, values, ordered, n, width, first, columns, reduction, runs, block, keep_ties) -> None:
    """Reduce the sorted updates ``values`` into ``out`` by max, min or integer add, columns ``first:first + columns``.

    ``out``: a copy of data, ``(T, width)``, written in place; ``values``: ``(n, width)``, the
    updates in the stable order of their targets ``ordered``; ``reduction``: 'max', 'min', or
    'add' for integer data (:func:`takes`);
    ``runs``/``block``: positions and columns per program (:func:`._torch_triton.launch_shape`);
    ``keep_ties``: float16's rule (the held value wins a tie).
    """
    starts = torch.ones(n, dtype=torch.bool, device=out.device)
    starts[1:] = ordered[1:] != ordered[:-1]
    run = torch.cumsum(starts, 0) - 1
    keys = torch.empty((n, columns), dtype=torch.int64, device=out.device)
    floating = out.dtype.is_floating_point
    ties = torch.full((n, columns), -1, dtype=torch.int64, device=out.device) if floating else keys
    grid = (triton.cdiv(n, runs), triton.cdiv(columns, block))
    shape = {
        "ADD": reduction == "add",
        "MIN": reduction == "min",
        "FLOAT": floating,
        "KEEP_TIES": keep_ties,
        "RUNS": runs,
        "BLOCK": block,
        "num_warps": 4,
    }
    args = (out, values, ordered, run, starts, keys, ties, n, width, first, columns)
    for kernel in _kernels(floating):
        kernel[grid](*args, **shape)


def takes(dtype: torch.dtype, reduction: str) -> bool:
    """Whether :func:`reduce_by_atomics` gives the fold's bits for ``reduction`` on ``dtype``: max, min, integer add."""
    return reduction in ("max", "min") or (reduction == "add" and not dtype.is_floating_point)


@functools.cache
def _kernels(floating: bool) -> list[Any]:
    """The launches in order, under ``triton.jit`` (compiled, or interpreted under ``TRITON_INTERPRET=1``)."""
    steps = [_init, _best, _tie, _write] if floating else [_init, _best, _write]
    return [triton.jit(step) for step in steps]


if triton is not None:

    @triton.jit
    def _key(x, MIN: tl.constexpr, FLOAT: tl.constexpr):
        """``x``'s int64 key: larger is kept (max), or smaller (min: the key's complement); NaN largest."""
        if FLOAT:
            if x.dtype == tl.float64:  # noqa: SIM108 (Triton: constexpr branches)
                f = x
            else:
                f = x.to(tl.float32).to(tl.float64)  # exact for every narrower float
            bits = tl.where(f == 0, 0, f.to(tl.int64, bitcast=True))  # -0.0 is 0.0's tie
            key = bits ^ ((bits >> 63) & 0x7FFFFFFFFFFFFFFF)  # negative floats in reverse: the numbers' order
            if MIN:
                key = ~key
            key = tl.where(f != f, 0x7FFFFFFFFFFFFFFF, key)
        else:
            key = x.to(tl.int64)
            if MIN:
                key = ~key
        return key

    @triton.jit
    def _tile(p0, n, width, first, columns, RUNS: tl.constexpr, BLOCK: tl.constexpr):
        """This program's positions ``p``, its columns (of the data, and of this launch's ``keys``), masks."""
        p = p0 * RUNS + tl.arange(0, RUNS)
        c = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        inside = p < n
        cells = inside[:, None] & (c < columns)[None, :]
        return p, first + c, c, inside, cells

    @triton.jit
    def _run_of(starts_ptr, ordered_ptr, run_ptr, p, inside):
        """For positions ``p``: whether each starts its run, its target row, its run's number."""
        start = tl.load(starts_ptr + p, mask=inside, other=0) != 0
        tgt = tl.load(ordered_ptr + p, mask=inside, other=0).to(tl.int64)
        return start, tgt, tl.load(run_ptr + p, mask=inside, other=0)

    def _init(out_ptr, values_ptr, ordered_ptr, run_ptr, starts_ptr, keys_ptr, ties_ptr, n, width, first, columns,
              ADD: tl.constexpr, MIN: tl.constexpr, FLOAT: tl.constexpr, KEEP_TIES: tl.constexpr,
              RUNS: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
        """Each run's start: ``keys[run] = key(data[target])`` (data is the run's first candidate)."""
        p, col, c, inside, cells = _tile(tl.program_id(0).to(tl.int64), n, width, first, columns, RUNS, BLOCK)
        start, tgt, run = _run_of(starts_ptr, ordered_ptr, run_ptr, p, inside)
        mask = cells & start[:, None]
        held = tl.load(out_ptr + tgt[:, None] * width + col[None, :], mask=mask)
        tl.store(keys_ptr + run[:, None] * columns + c[None, :], _key(held, MIN, FLOAT), mask=mask)

    def _best(out_ptr, values_ptr, ordered_ptr, run_ptr, starts_ptr, keys_ptr, ties_ptr, n, width, first, columns,
              ADD: tl.constexpr, MIN: tl.constexpr, FLOAT: tl.constexpr, KEEP_TIES: tl.constexpr,
              RUNS: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
        """Every update: its key into its run's best (``atomic_max``: the same maximum in any order), or added (ADD)."""
        p, col, c, inside, cells = _tile(tl.program_id(0).to(tl.int64), n, width, first, columns, RUNS, BLOCK)
        run = tl.load(run_ptr + p, mask=inside, other=0)
        u = tl.load(values_ptr + p[:, None] * width + col[None, :], mask=cells)
        if ADD:
            tl.atomic_add(keys_ptr + run[:, None] * columns + c[None, :], u.to(tl.int64), mask=cells)
        else:
            tl.atomic_max(keys_ptr + run[:, None] * columns + c[None, :], _key(u, MIN, FLOAT), mask=cells)

    def _tie(out_ptr, values_ptr, ordered_ptr, run_ptr, starts_ptr, keys_ptr, ties_ptr, n, width, first, columns,
             ADD: tl.constexpr, MIN: tl.constexpr, FLOAT: tl.constexpr, KEEP_TIES: tl.constexpr,
             RUNS: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
        """Every candidate with its run's best key: its position, coded so that the one to keep is largest.

        The last one (``p + 1``; data's position -1 codes as 0), or for a NaN and under
        ``KEEP_TIES`` the first (``n - p``; data's as ``n + 1``).
        """
        p, col, c, inside, cells = _tile(tl.program_id(0).to(tl.int64), n, width, first, columns, RUNS, BLOCK)
        start, tgt, run = _run_of(starts_ptr, ordered_ptr, run_ptr, p, inside)
        at = run[:, None] * columns + c[None, :]
        best = tl.load(keys_ptr + at, mask=cells, other=0)
        if KEEP_TIES:  # noqa: SIM108 (Triton: constexpr branches)
            first_wins = cells
        else:
            first_wins = best == 0x7FFFFFFFFFFFFFFF
        u = tl.load(values_ptr + p[:, None] * width + col[None, :], mask=cells)
        coded = tl.where(first_wins, n - p[:, None], p[:, None] + 1)
        tl.atomic_max(ties_ptr + at, coded, mask=cells & (_key(u, MIN, FLOAT) == best))
        held = tl.load(out_ptr + tgt[:, None] * width + col[None, :], mask=cells & start[:, None])
        data_coded = tl.where(first_wins, n + 1, 0)
        tl.atomic_max(ties_ptr + at, data_coded, mask=cells & start[:, None] & (_key(held, MIN, FLOAT) == best))

    def _write(out_ptr, values_ptr, ordered_ptr, run_ptr, starts_ptr, keys_ptr, ties_ptr, n, width, first, columns,
               ADD: tl.constexpr, MIN: tl.constexpr, FLOAT: tl.constexpr, KEEP_TIES: tl.constexpr,
               RUNS: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
        """Each run's start: the winner into ``out[target]`` (floats: its bits; integers: from the key)."""
        p, col, c, inside, cells = _tile(tl.program_id(0).to(tl.int64), n, width, first, columns, RUNS, BLOCK)
        start, tgt, run = _run_of(starts_ptr, ordered_ptr, run_ptr, p, inside)
        mask = cells & start[:, None]
        at = run[:, None] * columns + c[None, :]
        target = out_ptr + tgt[:, None] * width + col[None, :]
        best = tl.load(keys_ptr + at, mask=mask, other=0)
        if FLOAT:
            coded = tl.load(ties_ptr + at, mask=mask, other=0)
            if KEEP_TIES:  # noqa: SIM108 (Triton: constexpr branches)
                first_wins = mask
            else:
                first_wins = best == 0x7FFFFFFFFFFFFFFF
            winner = tl.where(first_wins, n - coded, coded - 1)  # -1: data's own value
            won = mask & (winner >= 0)
            u = tl.load(values_ptr + winner * width + col[None, :], mask=won)
            tl.store(target, u, mask=won)
        else:
            if MIN:  # noqa: SIM108 (Triton: constexpr branches)
                value = ~best
            else:
                value = best
            tl.store(target, value.to(out_ptr.dtype.element_ty), mask=mask)
