"""A deterministic scatter reduction in one Triton kernel, for the torch backend off the CPU.

:func:`scatter_reduce_rows` returns ``data`` (``(T, S)``) with each row ``updates[i]``
(``(N, S)``) folded into row ``targets[i]`` by add, mul, max or min, in order of ``i`` — the
spec's loop, bit for bit as :meth:`ArrayAPIBackend.combine` and the NumPy kernels compute it:

1. a stable sort of the targets (``torch.sort(stable=True)``; int32 keys where the rows fit),
   so each target's updates form a run in row-major order, each position's run end
   (``searchsorted``) and the updates gathered into that order (``index_select``);
2. one launch of :func:`_fold`: a program takes a block of ``RUNS`` sorted positions and a
   block of ``BLOCK`` columns; every position that starts a run folds that run's update rows in
   order into its target's row, starting from ``data[target]`` and rounding to the data's type
   after every step, and writes the row once. Each target has one run, so no two programs
   write the same element: no atomics, the same bits every run. The loop's length is the
   deepest run in the block (the largest multiplicity, as the rounds' count, but in one launch).

Narrow rows take many runs per program (``RUNS * BLOCK`` about 1,024 elements), wide rows few.

That is for float add and mul, and integer mul, whose result depends on the order (or that no
atomic computes). Max and min only select one of the values met, and integer add wraps the same
in any order, so after the same sort they take :func:`._torch_triton_atomics.reduce_by_atomics`:
``atomic_max`` over keys, or ``atomic_add``, over the sorted updates, three or four launches whose
cost does not grow with the depth (a fold of 100,000 updates onto one element is 100,000
dependent steps), the same bits.

Rules (those of ``ArrayAPIBackend.combine``): float16/bfloat16 compute in float32 and convert
back to their type after every step, round-to-nearest-even (NumPy's and ml_dtypes' loops);
integer add/mul wrap; max/min propagate NaN from either side (the first NaN met wins) and on a
tie take the update, except float16, which keeps the held value (visible as -0.0 against 0.0).

Types: float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8 (:data:`COVERED`);
the torch backend maps bool and uint16/32/64 onto these first. Not differentiable: the
backend uses it only where no input requires grad.

Where it runs (:func:`runs_on`): CUDA tensors, compiled by ``triton.jit``; CPU tensors only in
Triton's interpreter, which ``TRITON_INTERPRET=1`` turns on for the whole process when set before
triton is first imported (Triton decides at decoration time, its own ``tl.max`` included) — that
is how the tests run it without a GPU, in a subprocess; it is slow.
Under ``torch.compile`` the fold is the custom op ``gather_scatter::triton_scatter``.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import torch

try:  # an optional dependency: torch's CUDA builds ship it
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised where triton is missing
    triton = None

from ._torch_triton_atomics import reduce_by_atomics
from ._torch_triton_atomics import takes as takes_atomics

REDUCTIONS = ("add", "mul", "max", "min")
COVERED = frozenset(
    {
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.uint8,
    }
)
_HALF = {torch.float16, torch.bfloat16}
ELEMENTS = 1024  # elements per program (RUNS * BLOCK): ~8 per thread of 4 warps
MAX_BLOCK = 512  # columns per program at most; wider rows take more programs on axis 1
MAX_COLUMN_PROGRAMS = 65_535  # programs on axis 1 a launch (CUDA's limit); wider rows take more launches


GPU_SCATTER_METHODS = ("triton", "rounds")
_gpu_scatter = ["rounds" if os.environ.get("GATHER_SCATTER_GPU_SCATTER", "").strip().lower() == "rounds" else "triton"]


def set_gpu_scatter(method: str) -> str:
    """Choose how scatter reductions run off the CPU, and return the previous choice.

    ``method``: 'triton' (the default: one sort and one Triton kernel launch, where triton
    imports and the type is covered; otherwise the rounds) or 'rounds' (the standard rounds of
    :meth:`ArrayAPIBackend.scatter_rows`, one pass per duplicate depth). The environment
    variable ``GATHER_SCATTER_GPU_SCATTER=rounds`` chooses the rounds at import. Both give the
    same bits; the CPU path takes neither. Raises ValueError for another ``method``.
    """
    if method not in GPU_SCATTER_METHODS:
        raise ValueError(f"set_gpu_scatter: method must be one of {GPU_SCATTER_METHODS}, got {method!r}")
    previous, _gpu_scatter[0] = _gpu_scatter[0], method
    return previous


def takes(data: torch.Tensor, updates: torch.Tensor) -> bool:
    """Whether a reduction off the CPU takes the Triton fold (:func:`scatter_reduce_rows`).

    Only when chosen (:func:`set_gpu_scatter`), where triton imports and runs on data's device
    (CUDA; the CPU under Triton's interpreter, for the tests) and where autograd needs no
    graph: the fold has no backward, so an input that requires grad (with grad enabled) takes
    the differentiable rounds.
    """
    if _gpu_scatter[0] != "triton" or not runs_on(data):
        return False
    return not (torch.is_grad_enabled() and (data.requires_grad or updates.requires_grad))


def available() -> bool:
    """Whether triton imports (the fold can run)."""
    return triton is not None


def covers(dtype: torch.dtype, reduction: str) -> bool:
    """Whether :func:`scatter_reduce_rows` takes ``dtype`` with ``reduction``."""
    return triton is not None and dtype in COVERED and reduction in REDUCTIONS


def launch_shape(width: int) -> tuple[int, int]:
    """Return (RUNS, BLOCK) for rows of ``width`` elements: positions and columns per program.

    BLOCK is ``width`` rounded up to a power of two, at most :data:`MAX_BLOCK`; RUNS fills the
    program to :data:`ELEMENTS` (1,024 positions for rows of one element, 2 for 512).
    """
    block = min(MAX_BLOCK, triton.next_power_of_2(max(int(width), 1)))
    return max(1, ELEMENTS // block), block


def scatter_reduce_rows(data: torch.Tensor, targets: torch.Tensor, updates: torch.Tensor, reduction: str):
    """Return a new ``(T, S)`` tensor: ``data`` with rows ``updates[i]`` reduced into rows ``targets[i]`` in order.

    ``data``: ``(T, S)`` of a type in :data:`COVERED`; ``targets``: ``(N,)`` int64, checked and
    non-negative (not checked here: a bad target is a wild write); ``updates``: ``(N, S)`` of
    data's type on data's device; ``reduction``: 'add', 'mul', 'max' or 'min'. Raises
    ValueError for another reduction or type, RuntimeError without triton. Under
    ``torch.compile`` it is the custom op ``gather_scatter::triton_scatter``.
    """
    if torch.compiler.is_compiling():
        return torch.ops.gather_scatter.triton_scatter(data, targets, updates, reduction)
    return _scatter(data, targets, updates, reduction)


def _scatter(data: torch.Tensor, targets: torch.Tensor, updates: torch.Tensor, reduction: str) -> torch.Tensor:
    if triton is None:
        raise RuntimeError("gather_scatter: the Triton scatter needs triton, which is not installed")
    if reduction not in REDUCTIONS or data.dtype not in COVERED:
        raise ValueError(
            f"gather_scatter: the Triton scatter takes {REDUCTIONS} on {sorted(map(str, COVERED))}, "
            f"got {reduction!r} on {data.dtype}"
        )
    out = data.contiguous().clone()
    n, width = updates.shape[0], out.shape[1]
    if n == 0 or width == 0 or out.shape[0] == 0:
        return out
    keys = targets if out.shape[0] > 2**31 - 1 else targets.to(torch.int32)  # fewer radix passes
    ordered, order = torch.sort(keys, stable=True)
    atomic = takes_atomics(out.dtype, reduction)  # order-free (max, min, integer add): atomics, flat in the depth
    ends = None if atomic else torch.searchsorted(ordered, ordered, right=True)
    # The updates in sorted order (one parallel gather): the fold then reads each run's rows one
    # after the other, addresses known ahead of the values, instead of a dependent random read per step.
    values = updates.contiguous().index_select(0, order)
    runs, block = launch_shape(width)
    span = MAX_COLUMN_PROGRAMS * block  # columns one launch covers (CUDA's grid y is at most 65,535)
    for first in range(0, width, span):
        columns = min(span, width - first)
        if atomic:
            reduce_by_atomics(
                out, values, ordered, n, width, first, columns, reduction, runs, block, out.dtype == torch.float16
            )
        else:
            _launch(out, values, ordered, ends, n, width, first, columns, reduction, runs, block)
    return out


def _launch(out, values, ordered, ends, n, width, first, columns, reduction, runs, block) -> None:
    """One launch of :func:`_fold` over columns ``first:first + columns`` of every run."""
    grid = (triton.cdiv(n, runs), triton.cdiv(columns, block))
    _kernel()[grid](
        out,
        values,
        ordered,
        ends,
        n,
        width,
        first,
        REDUCE=REDUCTIONS.index(reduction),
        HALF=out.dtype in _HALF,
        BF16=out.dtype == torch.bfloat16,
        RUNS=runs,
        BLOCK=block,
        num_warps=4,
    )


if triton is not None:

    @triton.jit
    def _to_half(x, dtype: tl.constexpr, BF16: tl.constexpr):
        """float32 ``x`` rounded to ``dtype`` (float16 or bfloat16), to nearest even.

        bfloat16 in integer steps on the bits: Triton's interpreter truncates a float32 to
        bfloat16 (its RTNE rounds half up); compiled, this is ``cvt.rn.bf16.f32``'s result.
        NaN stays NaN (quiet, its payload's top bits).
        """
        if BF16:
            bits = x.to(tl.uint32, bitcast=True)
            even = (bits >> 16) & 1
            rounded = (bits + 0x7FFF + even) >> 16
            rounded = tl.where(x != x, (bits >> 16) | 0x40, rounded)
            return rounded.to(tl.uint16).to(tl.bfloat16, bitcast=True)
        else:
            return x.to(dtype, fp_downcast_rounding="rtne")

    @triton.jit
    def _update(values_ptr, j, start, end, cols, width):
        """The update rows ``j`` (one per position) of the runs that start here, where ``j`` is still in the run."""
        return tl.load(
            values_ptr + j[:, None] * width + cols[None, :], mask=(start & (j < end))[:, None] & (cols < width)[None, :]
        )

    def _fold(out_ptr, values_ptr, ordered_ptr, ends_ptr, n, width, first,
              REDUCE: tl.constexpr, HALF: tl.constexpr, BF16: tl.constexpr,
              RUNS: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
        """Fold each run that starts in this program's positions into its target row, in order.

        ``out_ptr``: the result, a copy of data, ``(T, width)``; ``values_ptr``: the updates
        ``(n, width)`` in sorted order; ``ordered_ptr``: the sorted targets; ``ends_ptr``: each
        position's run end; ``first``: the launch's first column.
        REDUCE: 0 add, 1 mul (max and min, order-free, take :func:`._torch_triton_atomics.reduce_by_atomics`).
        """
        p = tl.program_id(0).to(tl.int64) * RUNS + tl.arange(0, RUNS)
        inside = p < n
        tgt = tl.load(ordered_ptr + p, mask=inside, other=-1)
        prev = tl.load(ordered_ptr + p - 1, mask=inside & (p > 0), other=-1)
        start = inside & ((p == 0) | (prev != tgt))
        end = tl.load(ends_ptr + p, mask=start, other=0)
        depth = tl.max(tl.where(start, end - p, 0), axis=0)
        cols = first + tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        cells = start[:, None] & (cols < width)[None, :]
        row = tgt.to(tl.int64)[:, None] * width + cols[None, :]
        acc = tl.load(out_ptr + row, mask=cells)
        # Updates are read 4 steps ahead of their use (their addresses do not depend on the sum), so
        # a long run waits on the chain of adds, not on one memory round trip per step.
        u0 = _update(values_ptr, p, start, end, cols, width)
        u1 = _update(values_ptr, p + 1, start, end, cols, width)
        u2 = _update(values_ptr, p + 2, start, end, cols, width)
        u3 = _update(values_ptr, p + 3, start, end, cols, width)
        for s in range(0, depth):
            j = p + s
            live = start & (j < end)
            following = _update(values_ptr, j + 4, start, end, cols, width)
            u = u0
            if REDUCE == 0:
                if HALF:  # noqa: SIM108 (Triton: constexpr branches)
                    r = _to_half(acc.to(tl.float32) + u.to(tl.float32), acc.dtype, BF16)
                else:
                    r = acc + u
            else:
                if HALF:  # noqa: SIM108 (Triton: constexpr branches)
                    r = _to_half(acc.to(tl.float32) * u.to(tl.float32), acc.dtype, BF16)
                else:
                    r = acc * u
            acc = tl.where(live[:, None], r, acc)
            u0, u1, u2, u3 = u1, u2, u3, following
        tl.store(out_ptr + row, acc, mask=cells)


@functools.cache
def _kernel() -> Any:
    """:func:`_fold` under ``triton.jit``: compiled, or interpreted where ``TRITON_INTERPRET=1`` was set
    before triton was imported (Triton decides when it decorates its own library's functions)."""
    return triton.jit(_fold)


def interpreting() -> bool:
    """Whether triton runs kernels in its interpreter (``TRITON_INTERPRET=1`` before its import).

    Read once, when this module is imported (Triton itself decides when it is imported); a
    constant to ``torch.compile``, which cannot trace Triton's reading of its settings.
    """
    return _INTERPRETING


def _interpreting() -> bool:
    if triton is None:
        return False
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:
        return bool(knobs.runtime.interpret)
    import os  # pragma: no cover - triton before 3.4

    return os.environ.get("TRITON_INTERPRET", "0") == "1"  # pragma: no cover


_INTERPRETING = _interpreting()


def runs_on(t: torch.Tensor) -> bool:
    """Whether the fold can run on ``t``'s device: CUDA, or the CPU under Triton's interpreter."""
    if triton is None:
        return False
    return t.device.type == "cuda" or (t.device.type == "cpu" and _INTERPRETING)


def _register() -> None:
    """Register ``gather_scatter::triton_scatter``, the fold as a custom op for ``torch.compile`` graphs."""
    if triton is None or hasattr(torch.ops.gather_scatter, "triton_scatter"):
        return

    @torch.library.custom_op("gather_scatter::triton_scatter", mutates_args=())
    def _op(data: torch.Tensor, targets: torch.Tensor, updates: torch.Tensor, reduction: str) -> torch.Tensor:
        """:func:`scatter_reduce_rows`, eagerly on the real tensors."""
        return _scatter(data, targets, updates, reduction)

    @_op.register_fake
    def _shape(data, targets, updates, reduction):
        return torch.empty_like(data, memory_format=torch.contiguous_format)


_register()
