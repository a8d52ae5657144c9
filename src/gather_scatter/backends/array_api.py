"""Any array-API library (CuPy, array-api-strict, ...): the operators in standard functions only.

Each operator runs the same steps as its NumPy kernel — the rules of ``_shapes`` on the
inputs' shapes and dtypes (read as NumPy dtypes), then the bounds check, then the bytes — so
shapes, types and error messages are the NumPy path's. Bounds are checked on the device with
one reduction and one host transfer of a bool (and, only when an index is bad, of its
position and value).

What a call's arrays may be (one library, one device, dtypes read as NumPy's, ``out=``'s
checks) is the base class's, ``_array_api_inputs.ArrayAPIInputs``; this module is what runs on
them.

Moving bytes uses four primitives that the library backends (``torch.py``, ``jax.py``) replace
with native ops: :meth:`take`, :meth:`take_along`, :meth:`scatter_rows` and :meth:`bounds`.
The standard has no scatter, so :meth:`scatter_rows` here sorts the targets (stable, so each
target's updates stay in row-major order) and applies them in rounds — round ``r`` takes
every target's ``r``-th update — with ``where``: deterministic on any device and exact, in
the spec's order, for every reduction.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..rules import dims as _dims
from ..rules import dtypes as _dtypes
from ..rules import shapes as _shapes
from ..rules.validate import out_of_bounds
from ..rules.versions import Mode, Reduction
from ._array_api_inputs import ArrayAPIInputs, numpy_dtype

__all__ = ["ArrayAPIBackend", "numpy_dtype"]


class ArrayAPIBackend(ArrayAPIInputs):
    """The operators on arrays of one array-API namespace ``xp`` on ``first``'s device.

    Their inputs and ``out=`` are checked by the base class (:class:`ArrayAPIInputs`).
    """

    # ---- primitives (native ops in the library backends) -------------------------------

    def take(self, x: Any, idx: Any, axis: int) -> Any:
        """``x`` at the checked, non-negative 1-D int64 ``idx`` along ``axis``."""
        return self.xp.take(x, idx, axis=axis)

    def take_along(self, x: Any, idx: Any, axis: int) -> Any:
        """``x`` at ``idx`` (checked, non-negative, ``x``'s shape but on ``axis``) along ``axis``."""
        return self.xp.take_along_axis(x, idx, axis=axis)

    def bounds(self, indices: Any, sizes: Any, axes: Any) -> Any:
        """Return ``indices`` as int64 with negatives counted from the end, after checking them.

        Every value is checked against its axis size (IndexOutOfBoundsError naming the first bad
        position).

        ``sizes``/``axes``: one size for all (Gather, elements) or one per component of the last
        dim (GatherND/ScatterND), as in ``_validate.check_bounds``. The check is the indices'
        minimum and maximum (per component): one reduction on the device and those few values
        to the host; only when they are out of range is the first bad position looked for.
        Without negatives the indices are used as they are.
        """
        xp = self.xp
        idx = indices if indices.dtype == xp.int64 else xp.astype(indices, xp.int64)
        self.bad = None
        per_component = isinstance(sizes, tuple)
        extremes = self.extremes(idx, sizes) if math.prod(self.shape(idx)) else None
        if extremes is not None:
            low, high = extremes
            size = np.asarray(sizes)
            if (low >= 0).all() and (high < size).all():
                return idx
        limit = xp.asarray(sizes, dtype=xp.int64, device=self.device) if per_component else int(sizes)
        norm = xp.where(idx < 0, idx + limit, idx)
        if extremes is not None and (low >= -size).all() and (high < size).all():
            return norm
        bad = (norm < 0) | (norm >= limit)
        self.raise_first_bad(indices, bad, sizes, axes)
        self.bad = bad
        return norm

    def extremes(self, idx: Any, sizes: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """Return the minimum and maximum of non-empty int64 ``idx``, on the host.

        Per component of its last dim if ``sizes`` is a tuple, as in :meth:`bounds`; None where
        values cannot reach the host (tracing).
        """
        xp = self.xp
        per_component = isinstance(sizes, tuple)
        flat = xp.reshape(idx, (-1, self.shape(idx)[-1])) if per_component else xp.reshape(idx, (-1,))
        low, high = xp.min(flat, axis=0), xp.max(flat, axis=0)
        if not per_component:
            return np.asarray(int(low)), np.asarray(int(high))
        # int() of 0-d arrays: the standard's one way to the host (CuPy refuses np.asarray)
        return (
            np.array([int(low[j]) for j in range(self.shape(low)[0])]),
            np.array([int(high[j]) for j in range(self.shape(high)[0])]),
        )

    def constant(self, values: Any) -> Any:
        """Return ``values`` (a sequence of ints) as a 1-D int64 array on this backend's device."""
        return self.xp.asarray(values, dtype=self.xp.int64, device=self.device)

    def take_checked(self, indices: Any, size: int, axis: int, take: Any) -> Any:
        """Return ``take(norm)`` for ``norm`` the checked, non-negative ``indices`` of one axis.

        For Gather and GatherElements, on an axis of ``size``: :meth:`bounds`, then the take. A
        library whose take checks bounds itself may try it first (see the torch backend).
        """
        return take(self.guard(self.bounds(indices, size, axis), size))

    def guard(self, offsets: Any, beyond: int, per_tuple: bool = False) -> Any:
        """Return ``offsets`` computed from the last :meth:`bounds`, those of bad indices moved.

        Bad indices' offsets go to ``beyond`` (past the end). Eager backends raised already:
        nothing to move. A tracing backend (JAX under jit) overrides it, so a bad index is
        filled/dropped, never wrapped.
        """
        return offsets

    def raise_first_bad(self, indices: Any, bad: Any, sizes: Any, axes: Any, error: Any = None) -> None:
        """Raise IndexOutOfBoundsError at the first True of ``bad`` (row-major), if any.

        One reduction on the device, one bool to the host; position and value only on failure.
        ``error(position, value)`` raises it (default: ``_validate.out_of_bounds``).
        """
        xp = self.xp
        if not math.prod(self.shape(bad)) or not bool(xp.any(bad)):
            return
        flat = xp.reshape(bad, (-1,))
        first = int(xp.argmax(xp.astype(flat, xp.int8)))
        position = tuple(int(i) for i in np.unravel_index(first, self.shape(indices)))
        value = int(xp.reshape(indices, (-1,))[first])
        if error is not None:
            error(position, value)
        out_of_bounds(self.spec, position, value, sizes, axes)

    def scatter_rows(self, data: Any, targets: Any, updates: Any, reduction: Reduction, unique: bool = False) -> Any:
        """Return a new ``(T, S)`` array: ``data`` with rows of ``updates`` written or reduced in.

        The rows ``updates[i]`` (``(N, S)``) go into rows ``targets[i]`` (checked, non-negative),
        in order of ``i``.

        Standard functions only: a stable sort groups each target's updates in row-major
        order, ``searchsorted`` finds every target's run, and round ``r`` applies each
        target's ``r``-th update with ``where`` (a target without one keeps its value).
        """
        xp = self.xp
        n, t = self.shape(updates)[0], self.shape(data)[0]
        if n == 0 or t == 0:
            return xp.asarray(data, copy=True)
        order = xp.argsort(targets, stable=True)
        ordered = xp.take(targets, order)
        values = xp.take(updates, order, axis=0)
        rows = xp.arange(t, dtype=xp.int64, device=self.device)
        lo = xp.searchsorted(ordered, rows, side="left")
        hi = xp.searchsorted(ordered, rows, side="right")
        if reduction is Reduction.NONE:  # the last update of each target wins
            picked = xp.take(values, xp.clip(hi - 1, 0, n - 1), axis=0)
            return xp.where(xp.reshape(hi > lo, (t, 1)), picked, data)
        combine = self.combine(reduction, data.dtype)
        result = data
        for r in range(int(xp.max(hi - lo))):
            at = lo + r
            active = xp.reshape(at < hi, (t, 1))
            picked = xp.take(values, xp.clip(at, 0, n - 1), axis=0)
            result = xp.where(active, combine(result, picked), result)
        return result

    def combine(self, reduction: Reduction, dtype: Any):
        """Return the spec's ``f(data, update)`` elementwise, as NumPy's ufunc computes it.

        Max and min propagate NaN from either side and give ``b`` (the update) on a tie, ``a``
        for float16, as NumPy's loops and the NumPy kernels do: a tie shows only as -0.0
        against 0.0, so the sign of a zero result is the last zero's (float16: the first's).
        """
        xp = self.xp
        if dtype == xp.bool:
            return {
                Reduction.ADD: xp.logical_or,
                Reduction.MAX: xp.logical_or,
                Reduction.MUL: xp.logical_and,
                Reduction.MIN: xp.logical_and,
            }[reduction]
        if reduction is Reduction.ADD:
            return xp.add
        if reduction is Reduction.MUL:
            return xp.multiply
        floating = xp.isdtype(dtype, "real floating")
        keeps_a = dtype == getattr(xp, "float16", None)  # NumPy's float16 loop keeps a on a tie
        if reduction is Reduction.MAX:
            before = xp.greater_equal if keeps_a else xp.greater
        else:
            before = xp.less_equal if keeps_a else xp.less

        def pick(a, b):
            keep = before(a, b)
            if floating:
                keep = keep | xp.isnan(a)
            return xp.where(keep, a, b)

        return pick

    # ---- the operators ------------------------------------------------------------------

    def rows_of(self, norm: Any, dims: tuple[int, ...]) -> Any:
        """Return row-major offsets (int64, one per tuple) of checked index tuples ``norm``.

        ``norm`` is ``(..., k)``; the offsets are into a block of shape ``dims``.
        """
        xp = self.xp
        if len(dims) == 1:  # the index is the row
            return xp.reshape(norm, (-1,))
        strides = [math.prod(dims[j + 1 :]) for j in range(len(dims))]
        weights = self.constant(strides)
        return xp.reshape(xp.sum(norm * weights, axis=-1, dtype=xp.int64), (-1,))

    def gather_steps(self, data, indices, rule, attribute, out):
        """Run what every gather does first, and return what the gather needs.

        The steps: ``indices`` on the device, the type rule, the output shape by ``rule``
        (``_shapes.gather_shape``, ...), the ``out=`` and size checks. Returns (indices, data's
        shape, indices' shape, the output shape).
        """
        spec = self.spec
        indices = self.array("indices", indices, np.int64)
        shape, ishape = self.shape(data), self.shape(indices)
        dtype = self.dtype("data", data)
        _dtypes.output_dtype(spec, dtype, self.dtype("indices", indices))
        out_shape = rule(spec, shape, ishape, attribute)
        self.check_out(out, out_shape, dtype)
        _dtypes.check_output_bytes(spec, out_shape, dtype)
        return indices, shape, ishape, out_shape

    def scatter_steps(self, data, indices, updates, rule, attributes, reduction, out):
        """Run what every scatter does first, and return what the scatter needs.

        The steps: inputs on the device, the type and shape rules (``rule(spec, shape, ishape,
        ushape, *attributes)``), the reduction, ``out=`` and size. Returns (indices, updates,
        data's shape, indices' shape, the parsed reduction).
        """
        spec = self.spec
        dtype = self.dtype("data", data)
        indices = self.array("indices", indices, np.int64)
        updates = self.array("updates", updates, dtype)
        shape, ishape, ushape = self.shape(data), self.shape(indices), self.shape(updates)
        _dtypes.output_dtype(spec, dtype, self.dtype("indices", indices), self.dtype("updates", updates))
        rule(spec, shape, ishape, ushape, *attributes)
        reduction = Reduction.parse(spec, reduction)
        _dtypes.check_reduction_type(spec, reduction, dtype)
        self.check_out(out, shape, dtype)
        _dtypes.check_output_bytes(spec, shape, dtype)
        return indices, updates, shape, ishape, reduction

    def gather(self, data, indices, axis=0, out=None):
        """Return Gather of ``data`` at ``indices`` along ``axis``, as :func:`gather_scatter.gather`.

        Checks, shapes and errors are the NumPy kernel's; ``out``, if given, receives the result.
        """
        xp = self.xp
        indices, shape, _ishape, out_shape = self.gather_steps(data, indices, _shapes.gather_shape, axis, out)
        ax = _dims.normalize_axis(self.spec, axis, len(shape))
        result = self.take_checked(indices, shape[ax], ax, lambda norm: self.take(data, xp.reshape(norm, (-1,)), ax))
        return self.finish(xp.reshape(result, out_shape), out, {"data": data, "indices": indices})

    def gather_nd(self, data, indices, batch_dims=0, out=None):
        """Return GatherND of ``data`` at index tuples ``indices``, as :func:`gather_scatter.gather_nd`.

        Checks, shapes and errors are the NumPy kernel's; ``out``, if given, receives the result.
        """
        xp = self.xp
        indices, shape, ishape, out_shape = self.gather_steps(data, indices, _shapes.gather_nd_shape, batch_dims, out)
        b, k = int(batch_dims), ishape[-1]
        dims = shape[b : b + k]
        norm = self.bounds(indices, dims, tuple(range(b, b + k)))
        offsets = self.rows_of(norm, dims)
        n = math.prod(ishape[:-1])
        if b and n:  # each batch's block of data follows the previous one
            batch = xp.arange(n, dtype=xp.int64, device=self.device) // (n // math.prod(shape[:b]))
            offsets = offsets + batch * math.prod(dims)
        offsets = self.guard(offsets, math.prod(shape[: b + k]), per_tuple=True)
        source = xp.reshape(data, (math.prod(shape[: b + k]), math.prod(shape[b + k :])))
        result = self.take(source, offsets, 0)
        return self.finish(xp.reshape(result, out_shape), out, {"data": data, "indices": indices})

    def scatter_nd(self, data, indices, updates, reduction="none", out=None):
        """Return ScatterND: ``data`` with ``updates`` at index tuples ``indices``.

        As :func:`gather_scatter.scatter_nd`: updates apply in row-major order of ``indices``
        (:meth:`scatter_rows`); checks, shapes and errors are the NumPy kernel's; ``out``, if
        given, receives the result.
        """
        xp = self.xp
        indices, updates, shape, ishape, reduction = self.scatter_steps(
            data, indices, updates, _shapes.scatter_nd_shape, (), reduction, out
        )
        k = ishape[-1]
        dims = shape[:k]
        offsets = self.rows_of(self.bounds(indices, dims, tuple(range(k))), dims)
        offsets = self.guard(offsets, math.prod(dims), per_tuple=True)
        rows = (math.prod(dims), math.prod(shape[k:]))
        values = xp.reshape(updates, (self.shape(offsets)[0], rows[1]))
        result = self.scatter_rows(xp.reshape(data, rows), offsets, values, reduction)
        return self.finish(xp.reshape(result, shape), out, {"indices": indices, "updates": updates})

    def gather_elements(self, data, indices, axis=0, out=None):
        """Return GatherElements of ``data`` at ``indices`` along ``axis``, as :func:`gather_scatter.gather_elements`.

        Checks, shapes and errors are the NumPy kernel's; ``out``, if given, receives the result.
        """
        indices, shape, ishape, _ = self.gather_steps(data, indices, _shapes.gather_elements_shape, axis, out)
        ax = _dims.normalize_axis(self.spec, axis, len(shape))
        window = data[tuple(slice(None) if d == ax else slice(0, n) for d, n in enumerate(ishape))]
        result = self.take_checked(indices, shape[ax], ax, lambda norm: self.take_along(window, norm, ax))
        return self.finish(result, out, {"data": data, "indices": indices})

    def scatter_elements(self, data, indices, updates, axis=0, reduction="none", out=None):
        """Return ScatterElements: ``data`` with ``updates`` at ``indices`` along ``axis``.

        As :func:`gather_scatter.scatter_elements`: updates apply in row-major order of
        ``indices`` (:meth:`scatter_along`); checks, shapes and errors are the NumPy kernel's;
        ``out``, if given, receives the result.
        """
        indices, updates, shape, _, reduction = self.scatter_steps(
            data, indices, updates, _shapes.scatter_elements_shape, (axis,), reduction, out
        )
        ax = _dims.normalize_axis(self.spec, axis, len(shape))
        norm = self.bounds(indices, shape[ax], ax)
        result = self.scatter_along(data, norm, updates, ax, reduction)
        return self.finish(result, out, {"indices": indices, "updates": updates})

    def scatter_along(self, data: Any, norm: Any, updates: Any, axis: int, reduction: Reduction) -> Any:
        """Return ScatterElements' bytes: ``data`` with ``updates`` written or reduced in.

        Each ``updates[p]`` goes into ``data`` at ``p`` with ``norm[p]`` (checked, non-negative)
        on ``axis``, in row-major order of ``p``. Here: flat element offsets, then
        :meth:`scatter_rows` on rows of one element.
        """
        xp = self.xp
        shape, ishape = self.shape(data), self.shape(norm)
        # The flat element each update goes to: its own coordinates off the axis, norm on it.
        strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
        flat = norm * strides[axis]
        for d, n in enumerate(ishape):
            if d != axis and n > 1:
                along = xp.arange(n, dtype=xp.int64, device=self.device) * strides[d]
                flat = flat + xp.reshape(along, tuple(n if e == d else 1 for e in range(len(ishape))))
        size = math.prod(shape)
        flat = self.guard(flat, size)
        result = self.scatter_rows(
            xp.reshape(data, (size, 1)), xp.reshape(flat, (-1,)), xp.reshape(updates, (-1, 1)), reduction
        )
        return xp.reshape(result, shape)

    def tensor_scatter(self, past_cache, update, write_indices=None, axis=-2, mode="linear", out=None):
        """Return TensorScatter: ``past_cache`` with ``update`` written at ``write_indices`` on ``axis``.

        As :func:`gather_scatter.tensor_scatter` (absent ``write_indices``: position 0 for every
        batch); checks, shapes and errors are the NumPy kernel's; ``out``, if given, receives
        the result.
        """
        from ..kernels.tensor_scatter import NAMES

        spec, xp = self.spec, self.xp
        dtype = self.dtype("past_cache", past_cache)
        update = self.array("update", update, dtype)
        absent = write_indices is None
        write = None if absent else self.array("write_indices", write_indices, np.int64)
        shape, ushape = self.shape(past_cache), self.shape(update)
        _dtypes.output_dtype(
            spec,
            dtype,
            None if absent else self.dtype("write_indices", write),
            self.dtype("update", update),
            names=NAMES,
        )
        _shapes.tensor_scatter_shape(spec, shape, ushape, _dims.ABSENT if absent else self.shape(write), axis)
        mode = Mode.parse(spec, mode)
        ax = _dims.normalize_axis(spec, axis, len(shape))
        self.check_out(out, shape, dtype)
        _dtypes.check_output_bytes(spec, shape, dtype)
        if absent:
            write = xp.zeros(shape[0], dtype=xp.int64, device=self.device)
        write = self.checked_writes(write, shape[ax], ushape[ax], mode, ax)
        return self.finish(self.write_rows(past_cache, update, write, ax), out, {"update": update})

    def checked_writes(self, write: Any, capacity: int, length: int, mode: Mode, ax: int) -> Any:
        """Return TensorScatter's ``write`` (one per batch) as int64, after checking each one.

        Each is checked against the sequence axis ``ax`` of size ``capacity`` for an update of
        ``length`` in ``mode`` (IndexOutOfBoundsError naming the first bad batch); keeps
        ``self.bad`` for guard().
        """
        from ..kernels.tensor_scatter import write_index_error

        spec, xp = self.spec, self.xp
        write = xp.astype(write, xp.int64)
        bad = write < 0
        if mode is Mode.LINEAR:
            bad = bad | (write > capacity - length)
        self.raise_first_bad(
            write, bad, None, None, lambda b, value: write_index_error(spec, b[0], value, length, capacity, mode, ax)
        )
        self.bad = xp.reshape(bad, (self.shape(write)[0], 1, 1, 1))  # per batch, for guard()'s any(axis=-1)
        return write

    def write_rows(self, past: Any, update: Any, write: Any, ax: int) -> Any:
        """Return TensorScatter's copy: ``past`` with ``update`` written on the sequence axis ``ax``.

        ``update`` goes at sequence positions ``(write[b] + j) % capacity`` (distinct within a
        batch), as rows of the dims after ``ax``.
        """
        xp = self.xp
        shape, ushape = self.shape(past), self.shape(update)
        batch, capacity, length = shape[0], shape[ax], ushape[ax]
        heads, inner = math.prod(shape[1:ax]), math.prod(shape[ax + 1 :])
        steps = xp.arange(length, dtype=xp.int64, device=self.device)
        positions = (xp.reshape(write, (batch, 1, 1)) + xp.reshape(steps, (1, 1, length))) % max(capacity, 1)
        base = xp.reshape(xp.arange(batch * heads, dtype=xp.int64, device=self.device), (batch, heads, 1)) * capacity
        rows = self.guard(base + positions, batch * heads * capacity, per_tuple=True)
        rows = xp.reshape(rows, (-1,))
        result = self.scatter_rows(
            xp.reshape(past, (batch * heads * capacity, inner)),
            rows,
            xp.reshape(update, (batch * heads * length, inner)),
            Reduction.NONE,
            unique=True,
        )
        return xp.reshape(result, shape)
