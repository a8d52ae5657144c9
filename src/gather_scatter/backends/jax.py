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

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._versions import Reduction
from .array_api import ArrayAPIBackend


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

    def raise_first_bad(self, indices, bad, sizes, axes, error=None):
        if not self._tracing(indices, bad):
            return super().raise_first_bad(indices, bad, sizes, axes, error)
        self.traced = True
        if not bad.size:
            return
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
            place = ", ".join("{}" for _ in position)
            message = (f"{spec.name}: indices[{place}] = {{}} is out of bounds for data axis {{}} of size {{}} "
                       f"(valid range [-size, size - 1])")
            args = (*position, value, axes_[position[-1]], sizes_[position[-1]])
        else:
            place = ", ".join("{}" for _ in position)
            message = (f"{spec.name}: indices[{place}] = {{}} is out of bounds for data axis {axes} of size {sizes} "
                       f"(valid range [{-sizes}, {sizes - 1}])")
            args = (*position, value)
        try:
            checkify.check(~jnp.any(bad), message, *args)
        except ValueError:  # not under checkify.checkify: JAX's fill/drop convention (see guard)
            pass

    def guard(self, offsets, beyond, per_tuple=False):
        if not self.traced or self.bad is None:
            return offsets
        bad = jnp.any(self.bad, axis=-1) if per_tuple else self.bad
        if bad.size == offsets.size:
            bad = jnp.reshape(bad, offsets.shape)
        return jnp.where(bad, beyond, offsets)

    def take(self, x, idx, axis):
        return jnp.take(x, idx, axis=axis, mode="fill" if self.traced else "clip")

    def take_along(self, x, idx, axis):
        return jnp.take_along_axis(x, idx, axis=axis, mode="fill" if self.traced else "clip")

    def scatter_rows(self, data, targets, updates, reduction, unique=False):
        on_cpu = self.traced or all(d.platform == "cpu" for d in data.devices())
        if not on_cpu and not self._tracing(data, targets, updates):
            return super().scatter_rows(data, targets, updates, reduction, unique)
        rows = data.shape[0]
        if reduction is Reduction.NONE:
            if not unique:  # only each target's last update: .at[].set picks no winner itself
                order = jnp.arange(targets.shape[0], dtype=targets.dtype)
                last = jnp.full((rows,), -1, dtype=targets.dtype).at[targets].max(order, mode="drop")
                winner = jnp.take(last, targets, mode="fill", fill_value=-1) == order
                targets = jnp.where(winner, targets, rows)
            return data.at[targets].set(updates, mode="drop", unique_indices=unique)
        at = data.at[targets]
        if data.dtype == jnp.bool_:  # or / and
            return (at.max if reduction in (Reduction.ADD, Reduction.MAX) else at.min)(updates, mode="drop")
        apply = {Reduction.ADD: at.add, Reduction.MUL: at.multiply, Reduction.MAX: at.max, Reduction.MIN: at.min}
        return apply[reduction](updates, mode="drop")
