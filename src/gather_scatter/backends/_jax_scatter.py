"""XLA's scatters as the spec computes them: the ``.at[]`` writes behind the JAX backend's
:meth:`~gather_scatter.backends.jax.JaxBackend.scatter_rows` on the CPU and under a trace.

Functions of ``jnp`` arrays only, no backend state. What each fixes in ``.at[]``:

- reduction 'none': ``.at[].set`` leaves the winner among duplicate targets unspecified, so
  each target's last update is kept first;
- 'mul': JAX's derivative of ``.at[].multiply`` holds for unique indices only; ours
  (:func:`_scatter_mul`) for duplicates too;
- float 'max'/'min': XLA orders -0.0 below 0.0 where NumPy's loops tie them, so the sign of
  each zero result is set afterwards as NumPy's (:func:`_zero_ties`); and XLA keeps a NaN but
  not which one (its sign is lost on the CPU, a bfloat16 payload too), so each NaN result is
  set to the first NaN met, NumPy's (:func:`_first_nan`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from ..rules.versions import Reduction

__all__ = ["as_bits", "scatter_rows"]


def scatter_rows(data, targets, updates, reduction: Reduction, unique: bool = False):
    """Return ``data`` with rows ``updates[i]`` written or reduced into rows ``targets[i]`` by ``.at[]``.

    In index order on the CPU (XLA's scatters run serially there). Reduction 'none' keeps each
    target's last update first (``unique``: the targets are known distinct); a target past the
    end is dropped.
    """
    rows = data.shape[0]
    if not rows or not targets.shape[0]:  # nothing to write (an empty axis: every index was bad)
        return data
    if reduction is Reduction.NONE:
        if not unique:  # only each target's last update: .at[].set picks no winner itself
            order = jnp.arange(targets.shape[0], dtype=targets.dtype)
            last = jnp.full((rows,), -1, dtype=targets.dtype).at[targets].max(order, mode="drop")
            winner = jnp.take(last, targets, mode="fill", fill_value=-1) == order
            targets = jnp.where(winner, targets, rows)
        if data.dtype == jnp.bfloat16:  # XLA's CPU canonicalizes a bfloat16 NaN it sets: its bits instead
            return _set_bits(data, targets, updates, unique)
        return data.at[targets].set(updates, mode="drop", unique_indices=unique)
    if reduction is Reduction.MUL and data.dtype != jnp.bool_:
        return _scatter_mul(data, targets, updates)
    at = data.at[targets]
    if data.dtype == jnp.bool_:  # or / and
        return (at.max if reduction in (Reduction.ADD, Reduction.MAX) else at.min)(updates, mode="drop")
    apply = {Reduction.ADD: at.add, Reduction.MUL: at.multiply, Reduction.MAX: at.max, Reduction.MIN: at.min}
    result = apply[reduction](updates, mode="drop")
    if reduction is Reduction.ADD or not jnp.issubdtype(data.dtype, jnp.floating):
        return result
    return _first_nan(data, targets, updates, _zero_ties(data, targets, updates, result))


def as_bits(x):
    """``x``'s bits as the unsigned integer of its width, moved as they are (XLA's CPU canonicalizes a
    bfloat16 NaN in any float op: a take, a select, a set)."""
    return jax.lax.bitcast_convert_type(x, jnp.dtype(f"uint{jnp.dtype(x.dtype).itemsize * 8}"))


@functools.partial(jax.custom_jvp, nondiff_argnums=(3,))
def _set_bits(data, targets, updates, unique):
    """``data.at[targets].set(updates)`` on the bits (:func:`as_bits`); the derivative is the set's."""
    written = as_bits(data).at[targets].set(as_bits(updates), mode="drop", unique_indices=unique)
    return jax.lax.bitcast_convert_type(written, data.dtype)


@_set_bits.defjvp
def _set_bits_jvp(unique, primals, tangents):
    data, targets, updates = primals
    d_data, _, d_updates = tangents
    return _set_bits(data, targets, updates, unique), d_data.at[targets].set(
        d_updates, mode="drop", unique_indices=unique
    )


def _first_nan(data, targets, updates, result):
    """Return XLA's max/min ``result`` with each NaN as NumPy's loops give it: the first NaN met.

    That is data's own where it is NaN, else the first NaN update in order (its payload and
    sign). Only where a NaN update is (``lax.cond``; for bfloat16 a NaN in data too); the bits
    are moved as unsigned integers (XLA's CPU canonicalizes a bfloat16 NaN in any float op), so
    the derivative is the result's.
    """
    n = targets.shape[0]
    if not updates.size:  # rows of no elements: nothing to fix (and max has no identity)
        return result

    def fix(result):
        order = jnp.broadcast_to(jnp.arange(n, dtype=targets.dtype).reshape(-1, 1), updates.shape)
        first = (
            jnp.full(data.shape, n, targets.dtype).at[targets].min(jnp.where(updates != updates, order, n), mode="drop")
        )
        return _nan_bits(data, updates, first, result)

    # max propagates NaN: one reduction. XLA keeps data's NaN bits where no NaN update meets it,
    # but for bfloat16, whose NaNs it canonicalizes: there data's NaNs count too.
    found = jnp.isnan(jnp.max(updates))
    if data.dtype == jnp.bfloat16:
        found = found | jnp.isnan(jnp.max(data))
    return jax.lax.cond(found, fix, lambda result: result, result)


@jax.custom_jvp
def _nan_bits(data, updates, first, result):
    """``result`` with data's bits where data is NaN, else ``updates[first]``'s where ``first`` names one."""
    n = updates.shape[0]
    picked = jnp.take_along_axis(as_bits(updates), jnp.minimum(first, n - 1), axis=0)
    fixed = jnp.where(data != data, as_bits(data), jnp.where(first < n, picked, as_bits(result)))
    return jax.lax.bitcast_convert_type(fixed, data.dtype)


@_nan_bits.defjvp
def _nan_bits_jvp(primals, tangents):
    return _nan_bits(*primals), tangents[3]  # a NaN's bits change no derivative: the result's


def _zero_ties(data, targets, updates, result):
    """Return XLA's max/min ``result`` with the sign of each zero as NumPy's loops give it.

    XLA orders -0.0 below 0.0; NumPy's loops (and the NumPy kernels) tie them and take the
    update (float16's loop keeps the value held), so a zero result is the last zero update's
    (float16: the held zero, else the first zero update). Only a zero update can tie a zero,
    so the fix runs only where one is (``lax.cond``).
    """
    n = targets.shape[0]

    def fix(result):
        order = jnp.broadcast_to(jnp.arange(n, dtype=targets.dtype).reshape(-1, 1), updates.shape)
        zero = updates == 0
        if data.dtype == jnp.float16:  # the held zero stays; else the first zero update
            first = jnp.full(data.shape, n, targets.dtype).at[targets].min(jnp.where(zero, order, n), mode="drop")
            picked = jnp.take_along_axis(updates, jnp.minimum(first, n - 1), axis=0)
            return jnp.where((result == 0) & (data != 0) & (first < n), picked, jnp.where(result == 0, data, result))
        last = jnp.full(data.shape, -1, targets.dtype).at[targets].max(jnp.where(zero, order, -1), mode="drop")
        picked = jnp.take_along_axis(updates, jnp.maximum(last, 0), axis=0)
        return jnp.where((result == 0) & (last >= 0), picked, result)

    return jax.lax.cond(jnp.any(updates == 0), fix, lambda result: result, result)


@jax.custom_jvp
def _scatter_mul(data, targets, updates):
    """Return ``data.at[targets].multiply(updates)`` (in index order, rounding every step).

    It has a derivative for duplicate targets too: JAX's own has one for unique indices only.
    """
    return data.at[targets].multiply(updates, mode="drop")


@_scatter_mul.defjvp
def _scatter_mul_jvp(primals, tangents):
    data, targets, updates = primals
    d_data, _, d_updates = tangents
    # Each update's coefficient: data[t] times the product of the other updates to t, from
    # exclusive prefix and suffix products within each target's run (no division, so zeros work).
    order = jnp.argsort(targets, stable=True)
    ordered, values = targets[order], updates[order]
    starts = jnp.concatenate([jnp.ones((1,), bool), ordered[1:] != ordered[:-1]])[:, None]
    ends = jnp.concatenate([ordered[1:] != ordered[:-1], jnp.ones((1,), bool)])[:, None]

    def segmented(a, b):
        (a_start, a_value), (b_start, b_value) = a, b
        return a_start | b_start, jnp.where(b_start, b_value, a_value * b_value)

    starts, ends = jnp.broadcast_to(starts, values.shape), jnp.broadcast_to(ends, values.shape)
    ones = jnp.ones_like(values)
    _, before = jax.lax.associative_scan(segmented, (starts, values))
    before = jnp.where(starts, ones, jnp.roll(before, 1, axis=0))
    _, after = jax.lax.associative_scan(segmented, (ends, values), reverse=True)
    after = jnp.where(ends, ones, jnp.roll(after, -1, axis=0))
    coefficient = jnp.take(data, ordered, axis=0, mode="fill", fill_value=0) * before * after
    products = jnp.ones_like(data).at[targets].multiply(updates, mode="drop")
    d_out = d_data * products + jnp.zeros_like(data).at[ordered].add(coefficient * d_updates[order], mode="drop")
    return _scatter_mul(data, targets, updates), d_out
