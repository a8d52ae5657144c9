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
rounded back after each step (NumPy's float16 loop), max/min propagate NaN from either side,
a tie gives the update (float16: the value held), integers wrap. Types the kernel does not
take itself are carried by bits: bool as int8 (or/and as max/min), unsigned integers as
signed (add/mul wrap the same bits; max/min with the sign bit flipped keep the order).

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
import os
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

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
    text = os.environ.get(_SCATTER_VARIABLE, "").strip().lower()
    if not text or text in _SCATTER_CHOICES:
        return text or "pallas"
    if text not in _warned:
        _warned.add(text)
        warnings.warn(
            f"{_SCATTER_VARIABLE}={text!r} is not one of {_SCATTER_CHOICES}; ignored, using 'pallas'",
            RuntimeWarning,
            stacklevel=4,
        )
    return "pallas"


_warned: set[str] = set()


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
    dtype = np.dtype(data.dtype)
    shape = data.shape
    data, updates = data.reshape(rows, -1), updates.reshape(n, -1)
    if dtype == np.bool_:  # or/and as max/min of 0 and 1
        fold = Reduction.MAX if reduction in (Reduction.ADD, Reduction.MAX) else Reduction.MIN
        out = _fold(data.astype(jnp.int8), targets, updates.astype(jnp.int8), fold, interpret)
        return (out != 0).reshape(shape)
    if dtype.kind == "u":  # as signed bits; max/min with the sign bit flipped keep the order
        signed = jnp.dtype(f"int{dtype.itemsize * 8}")
        flip = jnp.array(np.iinfo(signed).min if reduction in (Reduction.MAX, Reduction.MIN) else 0, signed)
        as_signed = lambda x: lax.bitcast_convert_type(x, signed) ^ flip  # noqa: E731
        out = _fold(as_signed(data), targets, as_signed(updates), reduction, interpret)
        return lax.bitcast_convert_type(out ^ flip, dtype).reshape(shape)
    if dtype.kind == "f" or dtype in _HALF:
        return _differentiable(data, targets, updates, reduction, interpret).reshape(shape)
    return _fold(data, targets, updates, reduction, interpret).reshape(shape)


@functools.partial(jax.custom_jvp, nondiff_argnums=(3, 4))
def _differentiable(data, targets, updates, reduction: Reduction, interpret: bool):
    """:func:`_fold` with a derivative: ``pallas_call`` has none, so the tangents are those of
    XLA's scatter (``_jax_scatter``, linear in them, so ``jax.grad`` transposes it)."""
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
    """``f(held, update)`` on one block, as :meth:`ArrayAPIBackend.combine` (NumPy's loops) computes it."""
    half = dtype in _HALF
    if reduction in (Reduction.ADD, Reduction.MUL):
        op = jnp.add if reduction is Reduction.ADD else jnp.multiply
        if half:  # in float32, rounded back after every step
            return lambda a, b: op(a.astype(jnp.float32), b.astype(jnp.float32)).astype(dtype)
        return op
    floating = dtype.kind == "f" or half
    keeps_a = dtype == np.float16  # NumPy's float16 loop keeps the value held on a tie
    if reduction is Reduction.MAX:
        before = jnp.greater_equal if keeps_a else jnp.greater
    else:
        before = jnp.less_equal if keeps_a else jnp.less

    def pick(a, b):
        wide_a, wide_b = (a.astype(jnp.float32), b.astype(jnp.float32)) if half else (a, b)
        keep = before(wide_a, wide_b)
        if floating:
            keep = keep | (wide_a != wide_a)  # NaN held stays
        return jnp.where(keep, a, b)

    return pick
