"""JAX arrays: the operators in ``jnp.take``/``take_along_axis`` and ``.at[]`` scatters,
eagerly and under ``jax.jit``.

- Exactness: on the CPU, XLA applies a scatter's updates serially in index order (the
  spec's row-major order) and rounds every step in the data's type, so results are bitwise
  the NumPy kernel's (tested). Reduction 'none' keeps each target's last update first
  (``.at[].set`` leaves the winner of duplicates unspecified). On other devices (GPU/TPU),
  eager scatters use the deterministic standard rounds of :class:`ArrayAPIBackend`; under
  ``jit`` there they are XLA's native scatters, whose float add/mul order with duplicate
  indices is not promised (set ``XLA_FLAGS=--xla_gpu_deterministic_ops=true`` for repeatable
  bits).
- Errors: shapes, types and attributes are static under ``jit``, so those errors raise at
  trace time, as in eager mode. Index bounds follow JAX's convention for values known only
  at run time: a ``checkify.check`` — run the function through
  ``jax.experimental.checkify.checkify`` to get the error (the message names the operator,
  the first bad position, the value and the valid range); without checkify, a bad index under
  jit reads as the fill value (NaN, or the type's minimum) and its update is dropped, never
  wrapped onto another element. Eagerly, bad indices raise IndexOutOfBoundsError.
- Autodiff: ``jax.grad`` flows through every op.
- Types: JAX's own (with ``jax_enable_x64`` for 64-bit ones). Without x64, JAX holds int64 as
  int32, so GatherND/ScatterND (int64 indices only, as in ONNX) take their indices as a NumPy
  int64 array, which is checked as passed and then moved to the device.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._versions import REGISTRY, Reduction
from .array_api import ArrayAPIBackend, numpy_dtype

# The NumPy dtype a list or NumPy array given for an input must fit ("data": the first input's).
_NEEDS = {"indices": np.int64, "write_indices": np.int64, "updates": "data", "update": "data"}


class JaxBackend(ArrayAPIBackend):
    writable = False

    def __init__(self, spec, xp, first, first_name):
        self.traced = isinstance(first, jax.core.Tracer)
        super().__init__(spec, xp, first if not self.traced else jnp.zeros(()), first_name)
        if self.traced:
            self.device = None
        self.kind = jax.Array
        self.library = "jax.Array"
        self.bad = None
        self.any_bad = jnp.zeros((), bool) if self.traced else None
        self.first = first
        self.staging = False  # traced by staged(): a bad index discards the result, so no guard

    def gather(self, data, indices, axis=0, out=None):
        return self.staged("gather", {"indices": indices}, {"axis": axis}, out)

    def gather_nd(self, data, indices, batch_dims=0, out=None):
        return self.staged("gather_nd", {"indices": indices}, {"batch_dims": batch_dims}, out)

    def scatter_nd(self, data, indices, updates, reduction="none", out=None):
        return self.staged("scatter_nd", {"indices": indices, "updates": updates}, {"reduction": reduction}, out)

    def gather_elements(self, data, indices, axis=0, out=None):
        return self.staged("gather_elements", {"indices": indices}, {"axis": axis}, out)

    def scatter_elements(self, data, indices, updates, axis=0, reduction="none", out=None):
        return self.staged("scatter_elements", {"indices": indices, "updates": updates},
                           {"axis": axis, "reduction": reduction}, out)

    def tensor_scatter(self, past_cache, update, write_indices=None, axis=-2, mode="linear", out=None):
        return self.staged("tensor_scatter", {"update": update, "write_indices": write_indices},
                           {"axis": axis, "mode": mode}, out)

    def staged(self, op: str, inputs: dict, attrs: dict, out: Any) -> Any:
        """Run ``op`` as one compiled XLA computation (one compilation per shape, one dispatch
        per call, where op-by-op eager JAX compiles and dispatches a dozen small ones), then
        raise the exact eager error if an index was bad. Under a trace, off the CPU (where the
        eager scatters keep the deterministic rounds), with ``out=`` or with attributes that
        cannot be static, it runs op by op."""
        method = getattr(ArrayAPIBackend, op)
        eager = functools.partial(method, self, self.first, **inputs, **attrs, out=out)
        if (self.traced or out is not None or any(isinstance(v, jax.core.Tracer) for v in inputs.values())
                or not all(d.platform == "cpu" for d in self.first.devices())):
            return eager()
        try:
            statics = tuple(sorted((name, type(v).__name__, v) for name, v in attrs.items()))
            hash(statics)
        except TypeError:
            return eager()
        dtype = self.dtype(self.first_name, self.first)
        arrays = {name: None if value is None else self.array(name, value, dtype if _NEEDS[name] == "data"
                                                                 else _NEEDS[name])
                  for name, value in inputs.items()}
        if not all(v is None or isinstance(v, jax.Array) for v in arrays.values()):
            return eager()  # a type JAX cannot hold: the type rule raises
        spec = self.spec
        result, any_bad = _staged(self.first, arrays, op=op, key=(spec.domain, spec.op_type, spec.since_version),
                                  first_name=self.first_name, statics=statics,
                                  host_dtypes=tuple(sorted((k, v.name) for k, v in self.host_dtypes.items())))
        if bool(any_bad):
            return eager()  # raises the IndexOutOfBoundsError naming the first bad position
        return result

    def same_device(self, array: Any) -> bool:
        if self.traced or isinstance(array, jax.core.Tracer):
            return True
        return super().same_device(array)

    def from_numpy(self, host: np.ndarray) -> Any:
        import warnings

        with warnings.catch_warnings():  # int64 -> int32 without x64: checked as passed
            warnings.simplefilter("ignore", UserWarning)
            array = jnp.asarray(host)
        return array if self.device is None else jax.device_put(array, self.device)

    def _tracing(self, *arrays: Any) -> bool:
        return self.traced or any(isinstance(a, jax.core.Tracer) for a in arrays)

    def extremes(self, idx, sizes):
        return None if self._tracing(idx) else super().extremes(idx, sizes)

    def raise_first_bad(self, indices, bad, sizes, axes, error=None):
        if not self._tracing(indices, bad):
            return super().raise_first_bad(indices, bad, sizes, axes, error)
        self.traced = True
        if not bad.size:
            return
        found = jnp.any(bad)
        self.any_bad = found if self.any_bad is None else self.any_bad | found
        from jax.experimental import checkify

        first = jnp.argmax(jnp.reshape(bad, (-1,)))
        position = jnp.unravel_index(first, indices.shape)
        value = jnp.reshape(indices, (-1,))[first]
        spec = self.spec
        if sizes is None:  # TensorScatter's write_indices
            message = f"{spec.name}: write_indices[{{}}] = {{}} is out of bounds for the sequence axis"
            args = (position[0], value)
        elif isinstance(sizes, tuple):
            sizes_, axes_ = jnp.asarray(sizes), jnp.asarray(axes)
            size = sizes_[position[-1]]
            place = ", ".join("{}" for _ in position)
            message = (f"{spec.name}: indices[{place}] = {{}} is out of bounds for data axis {{}} of size {{}} "
                       "(valid range [{}, {}])")
            args = (*position, value, axes_[position[-1]], size, -size, size - 1)
        else:
            place = ", ".join("{}" for _ in position)
            message = (f"{spec.name}: indices[{place}] = {{}} is out of bounds for data axis {axes} of size {sizes} "
                       f"(valid range [{-sizes}, {sizes - 1}])")
            args = (*position, value)
        # A no-op unless the caller runs the function through checkify.checkify; without it a bad
        # index reads as the fill value and its update is dropped (see guard), JAX's own convention.
        checkify.debug_check(~found, message, *args)

    def guard(self, offsets, beyond, per_tuple=False):
        if not self.traced or self.bad is None or self.staging:
            return offsets
        bad = jnp.any(self.bad, axis=-1) if per_tuple else self.bad
        if bad.size == offsets.size:
            bad = jnp.reshape(bad, offsets.shape)
        return jnp.where(bad, beyond, offsets)

    def take(self, x, idx, axis):
        x, idx = _readable(x, idx, axis)
        return jnp.take(x, idx, axis=axis, mode="fill" if self.traced and not self.staging else "clip")

    def take_along(self, x, idx, axis):
        x, idx = _readable(x, idx, axis)
        return jnp.take_along_axis(x, idx, axis=axis, mode="fill" if self.traced and not self.staging else "clip")

    def scatter_rows(self, data, targets, updates, reduction, unique=False):
        on_cpu = self.traced or all(d.platform == "cpu" for d in data.devices())
        if not on_cpu and not self._tracing(data, targets, updates):
            return super().scatter_rows(data, targets, updates, reduction, unique)
        rows = data.shape[0]
        if not rows or not targets.shape[0]:  # nothing to write (an empty axis: every index was bad)
            return data
        if reduction is Reduction.NONE:
            if not unique:  # only each target's last update: .at[].set picks no winner itself
                order = jnp.arange(targets.shape[0], dtype=targets.dtype)
                last = jnp.full((rows,), -1, dtype=targets.dtype).at[targets].max(order, mode="drop")
                winner = jnp.take(last, targets, mode="fill", fill_value=-1) == order
                targets = jnp.where(winner, targets, rows)
            return data.at[targets].set(updates, mode="drop", unique_indices=unique)
        if reduction is Reduction.MUL and data.dtype != jnp.bool_:
            return _scatter_mul(data, targets, updates)
        at = data.at[targets]
        if data.dtype == jnp.bool_:  # or / and
            return (at.max if reduction in (Reduction.ADD, Reduction.MAX) else at.min)(updates, mode="drop")
        apply = {Reduction.ADD: at.add, Reduction.MUL: at.multiply, Reduction.MAX: at.max, Reduction.MIN: at.min}
        return apply[reduction](updates, mode="drop")


def _readable(x, idx, axis):
    """``x`` and ``idx`` as jnp's takes accept them: from an empty axis (every index bad, so
    every read is the fill value) JAX refuses to take, so one dummy element is there to miss."""
    if x.shape[axis] or not idx.size:
        return x, idx
    return jnp.zeros((*x.shape[:axis], 1, *x.shape[axis + 1 :]), x.dtype), jnp.ones_like(idx)


@jax.custom_jvp
def _scatter_mul(data, targets, updates):
    """``data.at[targets].multiply(updates)`` (in index order, rounding every step), with a
    derivative for duplicate targets too: JAX's own has one for unique indices only."""
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


@functools.partial(jax.jit, static_argnames=("op", "key", "first_name", "statics", "host_dtypes"))
def _staged(first, arrays, *, op, key, first_name, statics, host_dtypes):
    """``op`` traced once per shape: the backend's own steps, and whether any index was bad
    (then the caller discards the result and reruns op by op for the error)."""
    backend = JaxBackend(REGISTRY[key], jnp, first, first_name)
    backend.host_dtypes = {name: numpy_dtype(code) for name, code in host_dtypes}
    backend.staging = True
    result = getattr(ArrayAPIBackend, op)(backend, first, **arrays, **{name: v for name, _, v in statics})
    return result, backend.any_bad
