"""JAX arrays: the operators in ``jnp.take``/``take_along_axis`` and ``.at[]`` scatters.

They run eagerly and under ``jax.jit``, with ``jax_enable_x64`` off (JAX's default) or on.

- Exactness: on the CPU, XLA applies a scatter's updates serially in index order (the
  spec's row-major order) and rounds every step in the data's type, so results are bitwise
  the NumPy kernel's (tested) — except subnormal floats in arithmetic: XLA's CPU runs with
  flush-to-zero and denormals-are-zero, so a scatter with reduction 'add', 'mul', 'max' or
  'min' on float32, float64, bfloat16, complex64 or complex128 data reads a subnormal
  ``data`` or ``updates`` value as zero and returns a subnormal result as zero of the same
  sign, where NumPy keeps it (float16 is computed in float32 there, so its subnormals stay).
  Every result that involves no subnormal is bitwise NumPy's. Gathers, reduction 'none' and
  TensorScatter only copy, so they keep subnormals bit for bit. Reduction 'none' keeps each
  target's last update first (``.at[].set`` leaves the winner of duplicates unspecified).
  Float 'max'/'min': XLA orders -0.0 below 0.0, where NumPy's loops tie them (the update
  wins; float16's loop keeps the value held), so where an update is zero the sign of each
  zero result is set afterwards as NumPy's (``_jax_scatter``, on every device).
  On a GPU, scatter reductions (add/mul/max/min of bool, integer, float16, bfloat16, float32
  and float64 data) go through ``_pallas_scatter``, eagerly and under ``jit`` alike: float
  add/mul in one stable sort and one Pallas kernel (each target's updates folded in index
  order from ``data[target]``, rounding in the data's type at every step), float max/min by
  integer keys through XLA's integer scatters, integers and bool as XLA's own scatters (the
  same in any order): bitwise the NumPy kernel's (the fold tested on an H200). Other eager
  GPU scatters (reduction 'none', complex) use the deterministic standard rounds of
  :class:`ArrayAPIBackend` (staged, 'none' is XLA's, each target's last update kept), and so
  does every eager scatter on a TPU. The one
  exception to exactness: under ``jit`` off the CPU, a scatter the kernel does not take is
  XLA's native one, whose complex add/mul order with duplicate indices is not promised (set
  ``XLA_FLAGS=--xla_gpu_deterministic_ops=true`` for repeatable bits); so are float add/mul
  with ``GATHER_SCATTER_JAX_GPU_SCATTER=native``, which keeps the paths before the kernel.
- Errors: shapes, types and attributes are static under ``jit``, so those errors raise at
  trace time, as in eager mode. Indices given as NumPy arrays, lists or Python scalars are
  values at trace time: they are checked on the host, as passed (int64 before any narrowing),
  and a bad one raises IndexOutOfBoundsError eagerly and under ``jit`` alike. JAX array
  indices are checked on the device: eagerly, a bad one raises IndexOutOfBoundsError; traced
  (under ``jit``), bounds follow JAX's convention for values known only at run time, a
  ``checkify.check`` — run the function through ``jax.experimental.checkify.checkify`` to get
  the error (the eager message: operator, first bad position, value, axis, size and valid
  range); without checkify, a bad index under jit reads as the fill value (NaN, or the type's
  minimum) and its update is dropped: an index this backend sees is never wrapped onto another
  element (without x64, JAX may have wrapped it before: see Types).
- Autodiff: ``jax.grad`` flows through every op.
- Types: JAX's own. Without x64 JAX has no int64 (it holds int64 as int32), so:
  NumPy/list indices keep ONNX's int64 and are checked as passed, then moved to the device as
  int32 (exact: every valid index fits). Where JAX itself makes an array of a NumPy int64 (an
  argument of a ``jit``/``vmap`` function, ``jnp.asarray``, ``jax.device_put``) it keeps the
  low 32 bits silently, before this backend runs: 2**32 + 1 arrives as a valid 1 and nothing
  here can tell (a value that narrows to a bad index is reported with its narrowed value).
  Only indices that reach this backend as NumPy or Python values, eagerly or closed over by a
  jitted function, are checked as int64. A JAX int32 index array counts as JAX's int64, so
  GatherND, ScatterND and TensorScatter (int64 indices only, as in ONNX) accept it — the
  values are the same, only JAX's width differs. Index arithmetic is then int32: an operator
  whose offsets would range over 2**31 positions or more raises OutputTooLargeError naming
  ``jax_enable_x64`` rather than wrap. The positions are what the offsets count, not the
  data's elements: GatherND/ScatterND count rows of the leading dims an index tuple names
  (``data.shape[:batch_dims + k]``), ScatterElements data's elements, TensorScatter rows up
  to its sequence axis (``past_cache.shape[:axis + 1]``, and capacity + sequence_length),
  Gather/GatherElements the one axis they index; 2**31 index values refuse too. Rows past
  that are copied whole by XLA, which addresses their elements itself: a (2, 2**15,
  2**15 + 64) int8 cache (2**31 + 2**22 elements) takes TensorScatter without x64 (tested).
  The backend's own casts never narrow a value or warn.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..errors import IndexOutOfBoundsError, OutputTooLargeError
from ..rules.dims import fmt_shape
from ..rules.validate import as_array, check_bounds, native_indices, out_of_bounds
from ..rules.versions import REGISTRY, Mode
from . import _jax_deferred, _jax_scatter, _pallas_scatter
from ._library import foreign
from .array_api import ArrayAPIBackend, numpy_dtype

# The NumPy dtype a list or NumPy array given for an input must fit ("data": the first input's).
_NEEDS = {"indices": np.int64, "write_indices": np.int64, "updates": "data", "update": "data"}
_INDEX_INPUTS = ("indices", "write_indices")
_INT32_POSITIONS = 2**31  # how many positions int32 offsets address
_MARK = 10**15 + 1  # a value no message holds otherwise: where the run-time value goes in a template


class _Namespace:
    """``jax.numpy`` whose ``int64`` is JAX's widest int.

    That is int32 without x64, where asking for int64 warns and truncates. The array-API steps
    build every index and offset with it.
    """

    def __init__(self, xp: Any, index_dtype: np.dtype):
        self._xp, self.int64 = xp, index_dtype

    def __getattr__(self, name: str) -> Any:
        return getattr(self._xp, name)


class JaxBackend(ArrayAPIBackend):
    """The operators on JAX arrays, eagerly and under ``jax.jit`` (rules in the module docstring).

    A call on concrete CPU arrays without ``out=`` runs as one compiled computation where it
    can (:meth:`staged`); otherwise :class:`ArrayAPIBackend`'s steps run op by op, with ``jnp``
    takes and ``.at[]`` scatters.
    JAX arrays are immutable, so ``out=`` is refused.
    """

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
        self.index_dtype = np.dtype(jax.dtypes.canonicalize_dtype(np.int64))  # int32 without x64
        self.xp = _Namespace(xp, self.index_dtype)

    def gather(self, data, indices, axis=0, out=None):
        """Return Gather of ``data`` at ``indices`` along ``axis`` (see :meth:`staged`)."""
        return self.staged("gather", {"indices": indices}, {"axis": axis}, out)

    def gather_nd(self, data, indices, batch_dims=0, out=None):
        """Return GatherND of ``data`` at index tuples ``indices`` (see :meth:`staged`)."""
        return self.staged("gather_nd", {"indices": indices}, {"batch_dims": batch_dims}, out)

    def scatter_nd(self, data, indices, updates, reduction="none", out=None):
        """Return ScatterND: ``data`` with ``updates`` at index tuples ``indices`` (see :meth:`staged`)."""
        return self.staged("scatter_nd", {"indices": indices, "updates": updates}, {"reduction": reduction}, out)

    def gather_elements(self, data, indices, axis=0, out=None):
        """Return GatherElements of ``data`` at ``indices`` along ``axis`` (see :meth:`staged`)."""
        return self.staged("gather_elements", {"indices": indices}, {"axis": axis}, out)

    def scatter_elements(self, data, indices, updates, axis=0, reduction="none", out=None):
        """Return ScatterElements: ``data`` with ``updates`` at ``indices`` along ``axis`` (see :meth:`staged`)."""
        return self.staged(
            "scatter_elements", {"indices": indices, "updates": updates}, {"axis": axis, "reduction": reduction}, out
        )

    def tensor_scatter(self, past_cache, update, write_indices=None, axis=-2, mode="linear", out=None):
        """Return TensorScatter: ``past_cache`` with ``update`` at ``write_indices`` (see :meth:`staged`)."""
        return self.staged(
            "tensor_scatter", {"update": update, "write_indices": write_indices}, {"axis": axis, "mode": mode}, out
        )

    def staged(self, op: str, inputs: dict, attrs: dict, out: Any) -> Any:
        """Run ``op`` as one compiled XLA computation, then raise the exact eager error if an index was bad.

        One compilation per shape, one dispatch per call, where op-by-op eager JAX compiles and
        dispatches a dozen small ones. On a GPU only in the 'deferred' mode and where that is
        exact (:mod:`._jax_deferred`: the flag is then not waited for). Under a trace, off the
        CPU otherwise (where the eager scatters keep the deterministic rounds), with ``out=`` or
        with attributes that cannot be static, it runs op by op.
        """
        method = getattr(ArrayAPIBackend, op)
        eager = functools.partial(method, self, self.first, **inputs, **attrs, out=out)
        if self.traced or out is not None or any(isinstance(v, jax.core.Tracer) for v in inputs.values()):
            return eager()
        # On a GPU in the 'deferred' mode, staged too, where that gives the eager bits, and the check not waited for
        deferring = (
            _jax_deferred.defers(self.first)
            and all(isinstance(inputs[name], jax.Array) for name in _INDEX_INPUTS if inputs.get(name) is not None)
            and _jax_deferred.stages_exactly(op, inputs, attrs, self.first)
        )  # (indices given on the host are checked there, at the call)
        if not deferring and not _on_cpu(self.first):
            return eager()
        try:
            statics = tuple(sorted((name, type(v).__name__, v) for name, v in attrs.items()))
            hash(statics)
        except TypeError:
            return eager()
        dtype = self.dtype(self.first_name, self.first)
        arrays = {
            name: None if value is None else self.array(name, value, dtype if _NEEDS[name] == "data" else _NEEDS[name])
            for name, value in inputs.items()
        }
        for name in _INDEX_INPUTS:  # host indices that JAX holds exactly go in as they are, checked there
            host = arrays.get(name)
            if isinstance(host, np.ndarray) and host.dtype.kind == "i":
                limits = np.iinfo(self.index_dtype)
                if host.size and not limits.min <= int(host.min()) <= int(host.max()) <= limits.max:
                    return eager()  # a value beyond int32 without x64: checked on the host
                arrays[name] = self.from_numpy(host.astype(self.index_dtype, copy=False))
        if not all(v is None or isinstance(v, jax.Array) for v in arrays.values()):
            return eager()  # a type JAX cannot hold: the type rule raises
        spec = self.spec
        result, any_bad = _staged(
            self.first,
            arrays,
            op=op,
            key=(spec.domain, spec.op_type, spec.since_version),
            first_name=self.first_name,
            statics=statics,
            host_dtypes=tuple(sorted((k, v.name) for k, v in self.host_dtypes.items())),
        )
        if deferring:  # raised later, by a rerun op by op (the inputs are immutable)
            _jax_deferred.defer(any_bad, eager)
        elif bool(any_bad):
            return eager()  # raises the IndexOutOfBoundsError naming the first bad position
        return result

    def same_device(self, array: Any) -> bool:
        """Return whether ``array`` is on this backend's device (always so under a trace)."""
        if self.traced or isinstance(array, jax.core.Tracer):
            return True
        return super().same_device(array)

    def dtype(self, name: str, array: Any) -> np.dtype:
        """Return ``array``'s dtype as NumPy's; without x64 a JAX int32 index array counts as int64."""
        dtype = super().dtype(name, array)
        held = name in _INDEX_INPUTS and name not in self.host_dtypes
        if held and dtype == np.int32 and self.index_dtype == np.int32:
            return np.dtype(np.int64)  # JAX's int64 without x64: the same values, held in int32
        return dtype

    def array(self, name: str, value: Any, dtype: Any = None) -> Any:
        """Return ``value`` as a JAX array on this device, indices given on the host excepted.

        Indices given as NumPy arrays, lists or scalars stay on the host as passed (int64
        for a list): :meth:`bounds` and :meth:`checked_writes` check them there, before any
        narrowing and at trace time under ``jit``, then move them to the device.
        """
        if name in _INDEX_INPUTS and not isinstance(value, jax.Array) and not foreign(value):
            host = as_array(self.spec, name, value, dtype)
            self.host_dtypes[name] = host.dtype
            return host
        return super().array(name, value, dtype)

    def from_numpy(self, host: np.ndarray) -> Any:
        """Return the NumPy array ``host`` as a JAX array on this device.

        A dtype JAX does not hold as it is (float64 without x64, ...) raises TypeError, so that
        the type rule refuses the value as passed.
        """
        if jax.dtypes.canonicalize_dtype(host.dtype) != host.dtype:
            # float64 updates without x64, ...: never a type the op accepts here (it must be
            # data's, a JAX type); the type rule refuses it as passed.
            raise TypeError(f"JAX without x64 holds no {host.dtype}")
        array = jnp.asarray(host)
        return array if self.device is None else jax.device_put(array, self.device)

    def check_positions(self, positions: int, count: int) -> None:
        """Raise OutputTooLargeError naming ``jax_enable_x64`` where int32 offsets would wrap.

        Without x64, every index and offset is int32: the error is raised when ``positions``
        (what one offset ranges over) or ``count`` (the index values) reach 2**31, where int32
        arithmetic would wrap.
        """
        if self.index_dtype == np.int64 or max(positions, count) < _INT32_POSITIONS:
            return
        spec = self.spec
        what = (
            f"{self.first_name} of shape {fmt_shape(self.shape(self.first))} needs offsets over {positions} positions"
            if positions >= count
            else f"{count} index values need positions up to {count}"
        )
        raise spec.error(
            OutputTooLargeError,
            f"{what}, more than int32 holds (2**31); JAX without jax_enable_x64 indexes with int32, "
            f"so enable it (jax.config.update('jax_enable_x64', True), or `with jax.enable_x64(True):`)",
            input=self.first_name,
            value=max(positions, count),
        )

    def bounds(self, indices, sizes, axes):
        """Return ``indices`` checked and non-negative, as :meth:`ArrayAPIBackend.bounds` does.

        Offsets must fit the index type first (:meth:`check_positions`). Indices given on the
        host are checked there as passed, then moved to the device in its index type.
        """
        shape = self.shape(self.first)
        # GatherND/ScatterND (sizes a tuple): offsets over the data's leading block
        positions = math.prod(shape[: axes[-1] + 1] if axes else shape) if isinstance(sizes, tuple) else int(sizes)
        self.check_positions(positions, math.prod(self.shape(indices)))
        if not isinstance(indices, np.ndarray):
            return super().bounds(indices, sizes, axes)
        # Given on the host: checked there as passed, negatives resolved in int64, then moved
        # (every value now fits the device's index type).
        indices = native_indices(indices)
        check_bounds(self.spec, indices, sizes, axes)
        self.bad = None
        norm = np.where(indices < 0, indices + np.asarray(sizes, dtype=np.int64), indices)
        return self.from_numpy(norm.astype(self.index_dtype))

    def scatter_along(self, data, norm, updates, axis, reduction):
        """Return ScatterElements' bytes, once flat element offsets are known to fit the index type."""
        self.check_positions(math.prod(self.shape(data)), 0)  # flat element offsets
        return super().scatter_along(data, norm, updates, axis, reduction)

    def checked_writes(self, write, capacity, length, mode, ax):
        """Return TensorScatter's checked ``write``, as :meth:`ArrayAPIBackend.checked_writes` does.

        Offsets must fit the index type first (:meth:`check_positions`). A ``write`` given on
        the host is checked there and moved reduced modulo ``capacity``, so any int64 fits.
        """
        shape = self.shape(self.first)
        self.check_positions(max(math.prod(shape[: ax + 1]), capacity + length), shape[0])
        if not isinstance(write, np.ndarray):
            return super().checked_writes(write, capacity, length, mode, ax)
        from ..kernels.tensor_scatter import write_index_error

        write = native_indices(write).astype(np.int64)
        bad = write < 0
        if mode is Mode.LINEAR:
            bad |= write > capacity - length
        if bad.any():
            b = int(np.argmax(bad))
            write_index_error(self.spec, b, int(write[b]), length, capacity, mode, ax)
        self.bad = None
        # Positions are (write + j) % capacity: reduced on the host, so any int64 fits the device.
        return self.from_numpy((write % max(capacity, 1)).astype(self.index_dtype))

    def write_rows(self, past, update, write, ax):
        """Return TensorScatter's copy, with ``write`` reduced modulo the capacity first."""
        # (write + j) % capacity == (write % capacity + j) % capacity, without int32 overflow
        # for a circular write near 2**31.
        return super().write_rows(past, update, write % max(self.shape(past)[ax], 1), ax)

    def _tracing(self, *arrays: Any) -> bool:
        return self.traced or any(isinstance(a, jax.core.Tracer) for a in arrays)

    def extremes(self, idx, sizes):
        """Return the minimum and maximum of ``idx`` on the host, or None under a trace."""
        return None if self._tracing(idx) else super().extremes(idx, sizes)

    def raise_first_bad(self, indices, bad, sizes, axes, error=None):
        """Raise IndexOutOfBoundsError at the first bad index; under a trace, stage a check of it.

        Eagerly as :meth:`ArrayAPIBackend.raise_first_bad`. Traced, it records in ``any_bad``
        whether an index was bad and adds a ``checkify`` check whose message is the eager one,
        position and value filled at run time; without ``checkify.checkify`` the check is a
        no-op and :meth:`guard` keeps a bad index from wrapping.
        """
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
        args = (*position, value)
        # A no-op unless the caller runs the function through checkify.checkify; without it a bad
        # index reads as the fill value and its update is dropped (see guard), JAX's own convention.
        # The message is the eager one (one check per text it can take; only one can fail).
        if error is not None:  # TensorScatter's write_indices: the text depends on the sign
            for case, mark in ((value < 0, -1), (value >= 0, _MARK)):
                checkify.debug_check(~(found & case), _template(error, (0,), mark), *args)
        elif isinstance(sizes, tuple):  # one text per component: its axis and size
            zeros = (0,) * (len(position) - 1)
            for j in range(len(sizes)):
                text = _template(lambda p, v: out_of_bounds(self.spec, p, v, sizes, axes), (*zeros, j), _MARK)
                checkify.debug_check(~(found & (position[-1] == j)), text, *args)
        else:
            text = _template(lambda p, v: out_of_bounds(self.spec, p, v, sizes, axes), (0,) * len(position), _MARK)
            checkify.debug_check(~found, text, *args)

    def guard(self, offsets, beyond, per_tuple=False):
        """Return ``offsets``, under a trace with those of bad indices moved to ``beyond``.

        Eagerly (bad indices raised already) or staged (a bad index discards the result) the
        offsets are returned as they are.
        """
        if not self.traced or self.bad is None or self.staging:
            return offsets
        bad = jnp.any(self.bad, axis=-1) if per_tuple else self.bad
        if bad.size == offsets.size:
            bad = jnp.reshape(bad, offsets.shape)
        return jnp.where(bad, beyond, offsets)

    def take(self, x, idx, axis):
        """Return ``x`` at ``idx`` along ``axis`` by ``jnp.take``.

        Traced (outside :meth:`staged`), a bad index reads the fill value.
        """
        x, idx = _readable(x, idx, axis)
        return jnp.take(x, idx, axis=axis, mode="fill" if self.traced and not self.staging else "clip")

    def take_along(self, x, idx, axis):
        """Return ``x`` at ``idx`` along ``axis`` by ``jnp.take_along_axis``.

        Traced (outside :meth:`staged`), a bad index reads the fill value.
        """
        x, idx = _readable(x, idx, axis)
        return jnp.take_along_axis(x, idx, axis=axis, mode="fill" if self.traced and not self.staging else "clip")

    def scatter_rows(self, data, targets, updates, reduction, unique=False):
        """Return ``data`` with rows ``updates[i]`` written or reduced into rows ``targets[i]`` by ``.at[]``.

        On a GPU, the reductions the Pallas kernel takes (``_pallas_scatter``, eagerly and
        traced). Otherwise on the CPU, and under a trace, XLA's scatter
        (``_jax_scatter.scatter_rows``: serial, in index order on the CPU); eagerly on other
        devices the deterministic rounds of :meth:`ArrayAPIBackend.scatter_rows`. Reduction
        'none' keeps each target's last update first; a target past the end is dropped.
        """
        traced = self._tracing(data, targets, updates)
        on_cpu = self.traced or _on_cpu(data)
        kernel = (traced or not on_cpu) and _pallas_scatter.enabled(traced, data)
        if kernel and _pallas_scatter.supports(data, updates, reduction):
            if traced:  # the platform is chosen when lowered: the kernel for CUDA, else XLA's scatter
                xla = functools.partial(_jax_scatter.scatter_rows, reduction=reduction, unique=unique)
                return _pallas_scatter.traced_scatter_rows(data, targets, updates, reduction, xla)
            return _pallas_scatter.scatter_rows(data, targets, updates, reduction, interpret=_pallas_scatter.INTERPRET)
        if not on_cpu and not traced:
            return super().scatter_rows(data, targets, updates, reduction, unique)
        return _jax_scatter.scatter_rows(data, targets, updates, reduction, unique)


def _on_cpu(array: Any) -> bool:
    """Whether concrete ``array`` lies on CPU devices only, where XLA's scatters run serially in index order.

    Elsewhere (GPU, TPU) eager calls run op by op and scatters take the standard rounds; tests
    patch this to run those paths on the CPU (tests/test_cuda.py).
    """
    return all(d.platform == "cpu" for d in array.devices())


def _template(error: Any, position: tuple[int, ...], value: int) -> str:
    """Return the message ``error(position, value)`` raises, with ``{}`` fields for position and value.

    ``checkify`` fills the fields at run time: the eager text, never restated.
    """
    try:
        error(position, value)
    except IndexOutOfBoundsError as exc:
        text = str(exc).replace("{", "{{").replace("}", "}}")
    else:  # pragma: no cover - error always raises
        raise AssertionError("error() did not raise")
    shown = f"[{', '.join(map(str, position))}] = {value}" if position else f"(a scalar) = {value}"
    fields = f"[{', '.join('{}' for _ in position)}] = {{}}" if position else "(a scalar) = {}"
    return text.replace(shown, fields, 1)


def _readable(x, idx, axis):
    """Return ``x`` and ``idx`` as jnp's takes accept them.

    From an empty axis (every index bad, so every read is the fill value) JAX refuses to take,
    so one dummy element is there to miss.
    """
    if x.shape[axis] or not idx.size:
        return x, idx
    return jnp.zeros((*x.shape[:axis], 1, *x.shape[axis + 1 :]), x.dtype), jnp.ones_like(idx)


@functools.partial(jax.jit, static_argnames=("op", "key", "first_name", "statics", "host_dtypes"))
def _staged(first, arrays, *, op, key, first_name, statics, host_dtypes):
    """Return ``op``'s result, traced once per shape, and whether any index was bad.

    The result is the backend's own steps; when an index was bad the caller discards it and
    reruns op by op for the error.
    """
    backend = JaxBackend(REGISTRY[key], jnp, first, first_name)
    backend.host_dtypes = {name: numpy_dtype(code) for name, code in host_dtypes}
    backend.staging = True
    result = getattr(ArrayAPIBackend, op)(backend, first, **arrays, **{name: v for name, _, v in statics})
    return result, backend.any_bad
