"""Scatter reductions in the spec's order on a GPU: one stable sort and one Pallas kernel.

The JAX backend's :meth:`~gather_scatter.backends.jax.JaxBackend.scatter_rows` on a GPU,
eagerly and under ``jax.jit`` alike. XLA's GPU scatter adds and multiplies duplicate targets in
no promised order; the standard rounds (:meth:`ArrayAPIBackend.scatter_rows`) are exact but
take one pass per duplicate depth. Here:

1. a stable sort of the targets groups each target's updates in row-major order (a run);
2. one ``pallas_call`` with a static grid of (every possible run, N of them) x (column blocks):
   program ``(r, c)`` folds run ``r``'s update rows in order into ``data[target]``, columns
   block ``c``, rounding in the data's type after every step, and writes the row back
   (programs past the number of runs do nothing). The loop over a run is a ``fori_loop``
   with bounds read from memory, so the grid is static under ``jit``.

Each (target, column) is written by one program only: no atomics, the same bits every run.
The step is :meth:`ArrayAPIBackend.combine`'s: float16/bfloat16 computed in float32 and
rounded back after each step (NumPy's float16 loop).

That fold is for float add and mul, whose result depends on the order. The other reductions do
not, so they skip it and run at XLA's speed, with the same bits: integers and bool (a wrapping
sum or product, or a selection, is the same in any order) take XLA's own scatter; float max and
min take :func:`_keyed`, a selection by integer keys (NaN first met wins, the -0.0/0.0 tie by
position: the last update, float16 the value held) through two integer ``.at[].max`` scatters.

Where it runs: eagerly when the data lies on a GPU; under a trace, ``lax.platform_dependent``
puts it in the CUDA branch and XLA's scatter (``_jax_scatter``, the CPU's exact serial one) in
the other, so the choice is made when the computation is lowered for its platform.
Reduction 'none', complex, float8 and 4-bit types, and data whose elements int32 offsets do not
address keep the paths before the kernel; so does everything with
``GATHER_SCATTER_JAX_GPU_SCATTER=native``. Off a GPU (tests, CI) the same kernel runs in Pallas'
interpreter (``interpret=True``). JAX 0.11 warns that Pallas' Triton backend is deprecated
(DeprecationWarning at lowering); where a JAX lacks it, :func:`enabled` is False.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..resources.settings import choice_from_env
from ..rules.versions import Reduction
from . import _jax_scatter

__all__ = ["INTERPRET", "SUPPORTED", "enabled", "scatter_rows", "supports", "traced_scatter_rows"]

# Data types the kernel folds itself (after the bool/unsigned transforms below).
_NATIVE = frozenset(np.dtype(t) for t in ("float16", "float32", "float64", "int8", "int16", "int32", "int64"))
_HALF = frozenset((np.dtype("float16"), np.dtype(jnp.bfloat16)))
SUPPORTED = _NATIVE | _HALF | frozenset(np.dtype(t) for t in ("bool", "uint8", "uint16", "uint32", "uint64"))
_BLOCK = 128  # the widest column block one program folds
_POSITIONS = 2**31  # int32 offsets address the rows and columns of data and updates


# Run the Pallas kernel in its interpreter (tests patch it and enabled() to run the GPU path on the CPU).
INTERPRET = False
_SCATTER_VARIABLE = "GATHER_SCATTER_JAX_GPU_SCATTER"
_SCATTER_CHOICES = ("pallas", "native")


def enabled(traced: bool, data: Any) -> bool:
    """Whether scatter reductions may take the Pallas kernel (:func:`scatter_rows`): on a GPU.

    Concrete ``data``: it lies on GPU devices. Under a trace the platform is known only when
    the computation is lowered: :func:`traced_scatter_rows` chooses then. Never with
    ``GATHER_SCATTER_JAX_GPU_SCATTER=native``, which keeps the paths before it (the rounds
    eagerly, XLA's scatter under ``jit``), nor where this JAX has no Pallas.
    """
    if _scatter_setting() == "native" or _pallas() is None:
        return False
    if traced or isinstance(data, jax.core.Tracer):
        return True
    return all(d.platform == "gpu" for d in data.devices())


def traced_scatter_rows(data, targets, updates, reduction: Reduction, otherwise):
    """Under a trace: :func:`scatter_rows` where the computation is lowered for CUDA, else
    ``otherwise(data, targets, updates)`` (``lax.platform_dependent``: only the chosen branch is
    compiled, so the CPU's computation is the one it was before the kernel).

    With :data:`INTERPRET` (tests), the interpreted kernel on every platform.
    """
    if INTERPRET:
        return scatter_rows(data, targets, updates, reduction, interpret=True)
    kernel = lambda d, t, u: scatter_rows(d, t, u, reduction)  # noqa: E731 - looked up when traced (tests spy on it)
    return lax.platform_dependent(data, targets, updates, cuda=kernel, default=otherwise)


def _scatter_setting() -> str:
    """Return ``GATHER_SCATTER_JAX_GPU_SCATTER``: 'pallas' (unset: the default) or 'native'.

    Anything else warns once and reads as 'pallas' (a typo never stops a call).
    """
    return choice_from_env(_SCATTER_VARIABLE, _SCATTER_CHOICES)


def supports(data, updates, reduction: Reduction) -> bool:
    """Whether :func:`scatter_rows` takes ``data``/``updates`` with ``reduction``.

    Reductions add/mul/max/min of the types in :data:`SUPPORTED`, with data and updates whose
    elements int32 offsets address (the kernel's pointer arithmetic).
    """
    if reduction is Reduction.NONE or np.dtype(data.dtype) not in SUPPORTED:
        return False
    width = _padded(math.prod(data.shape[1:]))
    return max(data.shape[0], updates.shape[0]) * width < _POSITIONS


@functools.partial(jax.jit, static_argnames=("reduction", "interpret"))
def scatter_rows(data, targets, updates, reduction: Reduction, *, interpret: bool = False):
    """Return ``data`` (``(T, ...)``) with rows ``updates[i]`` reduced into rows ``targets[i]`` in order of ``i``.

    ``targets`` (``(N,)``): a target outside ``[0, T)`` (under a trace, a bad index) is dropped;
    ``supports(data, updates, reduction)`` must hold. ``interpret``: run the kernel in Pallas'
    interpreter (any device, slowly). Jitted: eagerly too, the sort, the runs and the kernel are
    one dispatch (under a trace it inlines).
    """
    rows, n = data.shape[0], targets.shape[0]
    if not rows or not n or not data.size:
        return data
    if np.dtype(data.dtype).kind in "biu":
        # Integers and bool: a wrapping sum or product and a selection are the same in any order,
        # so XLA's own scatter (its atomics) gives the spec's bits, at its speed.
        return _jax_scatter.scatter_rows(data, targets, updates, reduction)
    shape = data.shape
    data, updates = data.reshape(rows, -1), updates.reshape(n, -1)
    return _differentiable(data, targets, updates, reduction, interpret).reshape(shape)


@functools.partial(jax.custom_jvp, nondiff_argnums=(3, 4))
def _differentiable(data, targets, updates, reduction: Reduction, interpret: bool):
    """Float data: :func:`_keyed` for max/min, :func:`_fold` for add/mul, with a derivative (``pallas_call``
    and bit casts have none, so the tangents are those of XLA's scatter: ``_jax_scatter``, linear in
    them, so ``jax.grad`` transposes it)."""
    if reduction in (Reduction.MAX, Reduction.MIN):
        return _keyed(data, targets, updates, reduction)
    return _fold(data, targets, updates, reduction, interpret)


@_differentiable.defjvp
def _differentiable_jvp(reduction, interpret, primals, tangents):
    data, targets, updates = primals
    d_data, _, d_updates = tangents
    xla = lambda d, u: _jax_scatter.scatter_rows(d, targets, u, reduction)  # noqa: E731
    _, d_out = jax.jvp(xla, (data, updates), (d_data, d_updates))
    return _differentiable(data, targets, updates, reduction, interpret), d_out


def _padded(width: int) -> int:
    """``width`` rounded up to a whole number of column blocks (Triton's blocks are powers of 2)."""
    block = _block(width)
    return -(-width // block) * block


def _block(width: int) -> int:
    return min(_BLOCK, 1 << max(width - 1, 0).bit_length())


@functools.cache
def _pallas() -> tuple[Any, Any] | None:
    """Return (``jax.experimental.pallas``, its Triton compiler parameters), or None where this JAX has none.

    Imported on first use: importing the JAX backend imports no Pallas.
    """
    try:
        from jax.experimental import pallas
        from jax.experimental.pallas import triton
    except ImportError:  # pragma: no cover - a JAX without Pallas' Triton backend
        return None
    params = getattr(triton, "CompilerParams", None) or getattr(triton, "TritonCompilerParams", None)
    return None if params is None else (pallas, params)


def _fold(data, targets, updates, reduction: Reduction, interpret: bool):
    """The sort, the runs and the kernel on 2-D ``data`` (``(T, S)``) and ``updates`` (``(N, S)``)."""
    n, width = targets.shape[0], data.shape[1]
    block = _block(width)
    padded = _padded(width)
    rows = data.shape[0]
    targets = jnp.where((targets < 0) | (targets >= rows), rows, targets).astype(jnp.int32)  # dropped: sorted last
    order = jnp.argsort(targets, stable=True)
    ordered = targets[order]
    values = updates[order]
    if padded != width:  # whole blocks: the kernel's loads and stores need no mask
        data = jnp.pad(data, ((0, 0), (0, padded - width)))
        values = jnp.pad(values, ((0, 0), (0, padded - width)))
    # Run r is values[lo[r]:hi[r]], all into row target[r]; runs past the last are empty (lo = hi = n).
    starts = jnp.concatenate([jnp.ones((1,), bool), ordered[1:] != ordered[:-1]])
    (lo,) = jnp.nonzero(starts, size=n, fill_value=n)
    lo = lo.astype(jnp.int32)
    hi = jnp.concatenate([lo[1:], jnp.full((1,), n, jnp.int32)])
    hi = jnp.where(lo < n, hi, n)
    target = jnp.take(ordered, jnp.minimum(lo, n - 1))
    hi = jnp.where(target < rows, hi, lo)  # a target past the end (under a trace, a bad index) is dropped
    pallas = _pallas()
    assert pallas is not None, "enabled() is False without Pallas"
    pl, params = pallas
    kernel = functools.partial(_kernel, pl=pl, block=block, step=_step(reduction, np.dtype(data.dtype)))
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(data.shape, data.dtype),
        grid=(n, padded // block),
        input_output_aliases={0: 0},
        interpret=interpret,
        # Triton (not Mosaic GPU, whose copies need whole warpgroups); one warp per 32 columns.
        compiler_params=params(num_warps=max(1, min(4, block // 32)), num_stages=1),
    )(data, values, target, lo, hi)
    return out[:, :width] if padded != width else out


def _keys(x, reduction: Reduction):
    """Float ``x``'s integer keys in the reduction's order: larger is kept; NaN largest, -0.0 as 0.0.

    The bits made monotonic (negative floats' magnitudes reversed), complemented for min; int32
    for float16/bfloat16/float32 (half types widened exactly), int64 for float64.
    """
    wide = x if x.dtype.itemsize >= 4 else x.astype(jnp.float32)
    ints = jnp.dtype(f"int{wide.dtype.itemsize * 8}")
    bits = jnp.where(wide == 0, jnp.zeros((), ints), lax.bitcast_convert_type(wide, ints))
    top = jnp.array(np.iinfo(ints).max, ints)
    keys = bits ^ (lax.shift_right_arithmetic(bits, jnp.array(ints.itemsize * 8 - 1, ints)) & top)
    if reduction is Reduction.MIN:
        keys = ~keys
    return jnp.where(wide != wide, top, keys)


def _keyed(data, targets, updates, reduction: Reduction):
    """Max or min of float rows (``(T, S)``, ``(N, S)``) by XLA's integer scatters, bitwise the spec's loop.

    A selection ends at one of the values met, whatever the order, once two things are decided
    by position: the first NaN wins (data's own first), and on a -0.0/0.0 tie the last update
    (float16's loop: the value held, so the first). Each candidate gets a key (:func:`_keys`):
    the largest key wins (``.at[].max`` of integers: the same in any order), then among the
    candidates with that key the position coded so that the one to keep is largest (``p + 1``,
    or ``n - p`` where the first wins; data is position -1), and its bits are the result. Two
    integer scatters and a gather, at XLA's speed, where a fold takes a step per duplicate.
    """
    n = targets.shape[0]
    codes = jnp.int64 if n >= 2**31 - 1 else jnp.int32
    held, given = _keys(data, reduction), _keys(updates, reduction)
    best = held.at[targets].max(given, mode="drop")
    first_wins = best == jnp.iinfo(best.dtype).max
    if data.dtype == jnp.float16:  # NumPy's float16 loop keeps the value held on a tie
        first_wins = jnp.ones_like(first_wins)
    position = jnp.arange(n, dtype=codes)[:, None]
    their_best = jnp.take(best, targets, axis=0, mode="fill", fill_value=0)
    their_rule = jnp.take(first_wins, targets, axis=0, mode="fill", fill_value=False)
    offered = jnp.where(given == their_best, jnp.where(their_rule, n - position, position + 1), -1).astype(codes)
    data_code = jnp.where(held == best, jnp.where(first_wins, n + 1, 0), -1).astype(codes)
    code = data_code.at[targets].max(offered, mode="drop")
    winner = jnp.where(first_wins, n - code, code - 1)  # -1: data's own value
    as_bits = _jax_scatter.as_bits  # the winner's bits as they are
    picked = jnp.take_along_axis(as_bits(updates), jnp.clip(winner, 0, n - 1), axis=0)
    return lax.bitcast_convert_type(jnp.where(winner >= 0, picked, as_bits(data)), data.dtype)


def _kernel(data_ref, values_ref, target_ref, lo_ref, hi_ref, out_ref, *, pl, block, step):
    """Program (r, c): fold run r's rows of ``values`` into ``data[target[r]]``, columns block c."""
    r, c = pl.program_id(0), pl.program_id(1)
    lo, hi = lo_ref[r], hi_ref[r]

    @pl.when(lo < hi)
    def _():
        t = target_ref[r]
        cols = pl.ds(pl.multiple_of(c * block, block), block)
        held = lax.fori_loop(lo, hi, lambda i, acc: step(acc, values_ref[i, cols]), data_ref[t, cols])
        out_ref[t, cols] = held


def _step(reduction: Reduction, dtype: np.dtype):
    """``f(held, update)`` on one block for add or mul (the fold's; max/min are :func:`_keyed`), as NumPy's loops:
    float16/bfloat16 in float32, rounded back after every step."""
    op = jnp.add if reduction is Reduction.ADD else jnp.multiply
    if dtype in _HALF:
        return lambda a, b: op(a.astype(jnp.float32), b.astype(jnp.float32)).astype(dtype)
    return op
