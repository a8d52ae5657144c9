"""``run_<op>(spec, ...)``: one operator version on any input, the per-call policy of the front door.

Each call resolves nothing but the backend: ``spec`` (an OpVersion; the public functions in
:mod:`gather_scatter.ops` pass the newest one, :mod:`gather_scatter._nodes` the version in
effect at an opset) says what the version accepts. The first array input decides the library
(:func:`backends.backend_for`): an array of torch, JAX, dask or any array-API library goes to
its backend, NumPy input to the NumPy kernels in :mod:`gather_scatter.kernels`. Per-call
policy lives here, nowhere below.

Small calls take a fast path. What a call's checks depend on splits in two: its signature
(the version, the dtypes, the ranks or shapes, the attributes) and its values (the indices'
bounds). The first call of a signature runs the kernel with every check; once it succeeds
the signature is remembered (:data:`_ACCEPTED`, as onnxruntime checks a node once at session
build), and later calls of it on plain ndarrays, with an output small enough for one thread
and no arena, go straight to NumPy's own checked indexing: its bounds check is the one pass
over the values, and when it fails the kernel runs again to raise the error with its facts.
Larger calls of an accepted signature run the kernel without its static checks.
A small ScatterND reduction or ScatterElements of an accepted signature whose compiled loop is
in use runs a plan made once for the signature (``plan_accepted``: the loop, its views and
reshapes, fixed; ~3 us a call where the accepted kernel's steps cost ~11, issue 38).
A ScatterND into its own data (``out=data``, a cache's in-place write) of an accepted
signature checks per call only what the signature does not fix (writeable, no broadcast
strides, no overlap with indices or updates), then the bounds, then writes.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from .backends import backend_for, library_name
from .errors import DTypeError
from .kernels import UFUNCS, assign_last_wins, compiled_loaded, reduce_rows
from .kernels import block_quantized as _block_quantized
from .kernels import elements as _elements
from .kernels import gather as _gather
from .kernels import gather_nd as _gather_nd
from .kernels import scatter_nd as _scatter_nd
from .kernels import tensor_scatter as _tensor_scatter
from .resources import memory as _memory
from .rules.validate import as_array
from .rules.versions import Mode, OpVersion, Reduction

__all__ = [
    "fast_output",
    "planned_scatter",
    "run_gather",
    "run_gather_block_quantized",
    "run_gather_elements",
    "run_gather_nd",
    "run_scatter_elements",
    "run_scatter_nd",
    "run_tensor_scatter",
]

_ndarray = np.ndarray
# The largest output a fast call makes: one thread's work (_parallel.MIN_CHUNK_BYTES is 1 MiB),
# and below _memory's floor, under which only a configured limit can refuse an output.
SMALL_BYTES = 64 << 10
# Gather's fast call is NumPy's own checked take, the kernel's copy without its steps: it serves
# every output the kernel would make in one call from malloc (the memory query starts above
# 1 MiB), so a batch of 1,000 embedding rows (256 KiB) costs take's time plus a lookup.
GATHER_BYTES = (1 << 20) - 1
# A scatter's table of slice numbers (ScatterND's first k axes) is kept up to this many slices.
SLICE_TABLE = 1 << 16
# Signatures whose static checks passed -> what the fast path needs (the normalized axis). A
# version is its id: the OpVersions are the registry's, alive as long as the process.
# Bounded: a process that makes endless new signatures starts it afresh.
_ACCEPTED: dict[tuple, Any] = {}
_MAX_SIGNATURES = 4096


_NONE = Reduction.NONE  # a global read, not an attribute lookup, on the small calls' path


def _accept(key: tuple, value: Any) -> None:
    if len(_ACCEPTED) >= _MAX_SIGNATURES:
        _ACCEPTED.clear()
    _ACCEPTED[key] = value


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _small(nbytes: int, most: int = SMALL_BYTES) -> bool:
    """Whether an output of ``nbytes`` (at most ``most``) may take the fast path.

    A configured memory limit still refuses it on the kernel's path, with its error.
    """
    if nbytes > most:
        return False
    limit = _memory._configured()
    return limit is None or nbytes <= limit


def fast_output(nbytes: int) -> bool:
    """Whether an output of ``nbytes`` may take the fast path (a plan), as the kernels' calls
    ask per call: a memory limit configured later refuses it there."""
    return _small(nbytes)


def planned_scatter(spec: OpVersion, inputs: tuple, values: dict[str, Any]) -> Any:
    """Return the plan a small ScatterND reduction or ScatterElements of ``spec`` runs for the
    signature of ``inputs`` (ndarrays) and attribute ``values`` (as :func:`resolve_node` fills
    them), or None where it runs none (not accepted yet, not small).

    For a caller that runs one node call after call (the hosted Session's routed step): it
    calls ``plan(spec, *inputs)`` where the signature holds, a None result meaning "take the
    kernel's path", as :func:`run_scatter_nd` and :func:`run_scatter_elements` do (their keys,
    built here the same way; ``test_hosted_bodies`` counts the plan's calls).
    """
    data, indices, updates = inputs
    key: tuple = (id(spec), data.dtype, indices.dtype, updates.dtype, data.shape, indices.shape, updates.shape)
    if spec.op_type == "ScatterElements":
        key += (values.get("axis", 0),)
    accepted = _ACCEPTED.get((*key, values.get("reduction", "none")))
    planned = accepted[-1] if accepted is not None else None  # (..., planned) for both
    return planned if planned is not None and _small(data.nbytes) else None


def run_gather(spec: OpVersion, data, indices, axis=0, out=None) -> Any:
    if out is None and type(data) is _ndarray and type(indices) is _ndarray and type(axis) is int:
        key = (id(spec), data.dtype, indices.dtype, data.ndim, indices.ndim, axis)
        ax = _ACCEPTED.get(key)
        if ax is not None:
            # data of no elements: NumPy would skip the bounds check that an empty output still needs
            if data.size and _small(data.nbytes // data.shape[ax] * indices.size, GATHER_BYTES):
                if ax < 0:  # tensor(string) (kept as a negative axis): its items checked every call first
                    as_array(spec, "data", data)
                try:
                    result = data.take(indices, ax)  # mode 'raise': Gather's bounds, negatives included
                except IndexError:
                    pass  # the kernel raises the error with its facts
                else:  # a rank-0 output comes back as a NumPy scalar: the kernel's is a 0-d array
                    return result if type(result) is _ndarray else np.array(result, data.dtype)
            elif data.size and data.flags.c_contiguous and indices.dtype.isnative and ax >= 0:
                return _gather.run_accepted(spec, data, indices, ax)  # the kernel less its static checks
        else:
            result = _gather.run_gather(spec, data, indices, axis)
            # numbers, and strings as an object array (the hosted Session's string rows: 60 -> ~18 us);
            # not U/S strings (their result is an object array), not ml_dtypes' types
            if data.dtype.kind in "biufcO":  # strings' axis from the end: one int test tells them apart
                _accept(key, axis % data.ndim - (data.ndim if data.dtype.kind == "O" else 0))
            return result
    backend = backend_for(spec, {"data": data, "indices": indices})
    if backend is not None:
        return backend.gather(data, indices, axis, out)
    return _gather.run_gather(spec, data, indices, axis, out)


def run_gather_nd(spec: OpVersion, data, indices, batch_dims=0, out=None) -> Any:
    if out is None and type(data) is _ndarray and type(indices) is _ndarray and type(batch_dims) is int:
        key = (id(spec), data.dtype, indices.dtype, data.ndim, indices.ndim, indices.shape[-1:], batch_dims)
        k = _ACCEPTED.get(key)
        if k is not None:
            if data.size and _small(data.nbytes // _size(data.shape[:k]) * (indices.size // k)):
                try:  # NumPy's own checked indexing (negatives from the end), its index tuples spelled out
                    result = data.take(indices[..., 0], 0) if k == 1 else data[tuple(indices[..., j] for j in range(k))]
                except IndexError:
                    pass
                else:
                    return result if type(result) is _ndarray else np.array(result, data.dtype)
        else:
            result = _gather_nd.run_gather_nd(spec, data, indices, batch_dims)
            if data.dtype.kind in "biufc" and batch_dims == 0 and indices.shape[-1]:
                _accept(key, indices.shape[-1])
            return result
    backend = backend_for(spec, {"data": data, "indices": indices})
    if backend is not None:
        return backend.gather_nd(data, indices, batch_dims, out)
    return _gather_nd.run_gather_nd(spec, data, indices, batch_dims, out)


_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def _fast_dtype(dtype: np.dtype) -> bool:
    """Whether a scatter of this data type may take the accepted signature's path: numbers and
    bool, and bfloat16, the ml_dtypes type the compiled reductions compute (the full checks
    cost a bfloat16 ScatterElements of 10,000 elements 0.3 ms a call, 4x its kernel)."""
    return dtype.kind in "biufc" or dtype == _BFLOAT16


def _scatter(target: np.ndarray, offsets: np.ndarray, values: np.ndarray, reduction: Reduction) -> None:
    """Write as the kernels do, in row-major order of the updates: last wins, or reduced (compiled or ufunc.at)."""
    if reduction is Reduction.NONE and offsets.size <= 64:  # a few updates: the last of each, in Python
        last = {offset: i for i, offset in enumerate(offsets.tolist())}
        if len(last) < offsets.size:
            keep = sorted(last.values())
            offsets, values = offsets[keep], values[keep]
        target[offsets] = values
    elif reduction is Reduction.NONE:
        assign_last_wins(target, offsets, values)
    elif not reduce_rows(target, offsets, values, reduction):  # compiled, split by target rows
        with np.errstate(invalid="ignore"):  # NaN in max/min: as quiet as np.maximum itself
            UFUNCS[reduction].at(target, offsets, values)


def _elements_plan(data_shape: tuple[int, ...], indices_shape: tuple[int, ...], ax: int) -> tuple:
    """Plan GatherElements/ScatterElements of these shapes: ``(ax, ramp, base, stride)``.

    With them the flat offset of element ``p`` of ``indices`` is
    ``base[p] + ramp.take(indices[p]) * stride`` (``ramp.take`` checks the bounds and counts
    negatives from the end, as the ops do).
    """
    grid = list(np.indices(indices_shape, sparse=True))
    grid[ax] = np.zeros_like(grid[ax])
    base = np.ravel_multi_index(tuple(grid), data_shape) if indices_shape else np.zeros((), np.intp)
    return (
        ax,
        np.arange(data_shape[ax]),
        np.ascontiguousarray(np.broadcast_to(base, indices_shape)),
        _size(data_shape[ax + 1 :]),
    )


def run_scatter_nd(spec: OpVersion, data, indices, updates, reduction="none", out=None) -> Any:
    if (
        (out is None or out is data)
        and type(data) is _ndarray
        and type(indices) is _ndarray
        and type(updates) is _ndarray
        and type(reduction) is str
    ):
        key = (id(spec), data.dtype, indices.dtype, updates.dtype, data.shape, indices.shape, updates.shape, reduction)
        accepted = _ACCEPTED.get(key)
        if accepted is not None and out is not None:
            # in place (out=data, a cache's write): what the signature does not fix is checked per
            # call (a flag, a stride, an overlap); anything unusual takes the kernel's checks
            if (
                data.flags.writeable
                and 0 not in data.strides
                and not np.may_share_memory(data, indices)
                and not np.may_share_memory(data, updates)
            ):
                _scatter_nd.write_accepted(spec, data, indices, updates, accepted[1], accepted[0])
                return data
        elif accepted is not None:
            table, parsed, planned = accepted
            small = _small(data.nbytes)
            if planned is not None and small:  # the compiled reduction planned once (~3 us)
                result = planned(spec, data, indices, updates)
                if result is not None:
                    return result
            # the kernel less its static checks; small reductions too once numba is loaded
            # (offsets in its loop: 10,000 element adds into 16 x 1 in ~15 us, not ~45)
            if table is None or not small or (parsed is not _NONE and data.dtype.kind != "c" and compiled_loaded()):
                result = _scatter_nd.run_accepted(spec, data, indices, updates, parsed, table)
                if small and (planned := _scatter_nd.plan_accepted(data, indices, updates, parsed)) is not None:
                    _accept(key, (table, parsed, planned))
                return result
            k = table.ndim
            try:  # the slice numbers of data's first k axes, by NumPy's checked indexing
                offsets = table[tuple(indices[..., j] for j in range(k))].reshape(-1)
            except IndexError:
                pass
            else:
                output = data.copy()
                target = output.reshape(table.size, -1)
                _scatter(target, offsets, updates.reshape(offsets.size, target.shape[1]), parsed)
                return output
        else:
            result = _scatter_nd.run_scatter_nd(spec, data, indices, updates, reduction, out)
            k = indices.shape[-1]  # k = 0, every tuple the whole of data: the kernel's path
            if _fast_dtype(data.dtype) and result.dtype == data.dtype and k and data.size:
                n = _size(data.shape[:k])  # the slice numbers, for NumPy's checked indexing (8 bytes each)
                slices = np.arange(n).reshape(data.shape[:k]) if n <= SLICE_TABLE else None
                _accept(key, (slices, Reduction(reduction), None))
            return result
    backend = backend_for(spec, {"data": data, "indices": indices, "updates": updates})
    if backend is not None:
        return backend.scatter_nd(data, indices, updates, reduction, out)
    return _scatter_nd.run_scatter_nd(spec, data, indices, updates, reduction, out)


def run_gather_elements(spec: OpVersion, data, indices, axis=0, out=None) -> Any:
    if out is None and type(data) is _ndarray and type(indices) is _ndarray and type(axis) is int:
        key = (id(spec), data.dtype, indices.dtype, data.shape, indices.shape, axis)
        accepted = _ACCEPTED.get(key)
        if accepted is not None:
            _ax, ramp, base, stride = accepted
            if _small(indices.size * data.itemsize):
                try:  # flat offsets into data, NumPy's own checked indexing on the axis
                    return data.reshape(-1).take(base + ramp.take(indices) * stride)
                except IndexError:
                    pass
        else:
            result = _elements.run_gather_elements(spec, data, indices, axis)
            if data.dtype.kind in "biufc" and data.shape[axis] and data.nbytes <= SMALL_BYTES:
                _accept(key, _elements_plan(data.shape, indices.shape, axis % data.ndim))
            return result
    backend = backend_for(spec, {"data": data, "indices": indices})
    if backend is not None:
        return backend.gather_elements(data, indices, axis, out)
    return _elements.run_gather_elements(spec, data, indices, axis, out)


def run_scatter_elements(spec: OpVersion, data, indices, updates, axis=0, reduction="none", out=None) -> Any:
    if (
        out is None
        and type(data) is _ndarray
        and type(indices) is _ndarray
        and type(updates) is _ndarray
        and type(axis) is int
        and type(reduction) is str
    ):
        key = (
            id(spec),
            data.dtype,
            indices.dtype,
            updates.dtype,
            data.shape,
            indices.shape,
            updates.shape,
            axis,
            reduction,
        )
        accepted = _ACCEPTED.get(key)
        if accepted is not None:
            ax, plan, parsed, planned = accepted
            small = _small(data.nbytes)
            if planned is not None and small:  # the compiled call planned once
                result = planned(spec, data, indices, updates)
                if result is not None:
                    return result
            if plan is None or not small:
                if indices.dtype.isnative:  # the kernel less its static checks
                    result = _elements.run_scatter_accepted(spec, data, indices, updates, ax, parsed)
                    if small and (planned := _elements.plan_scatter_accepted(data, indices, updates, ax, parsed)):
                        _accept(key, (ax, plan, parsed, planned))
                    return result
            else:
                _, ramp, base, stride = plan
                try:
                    offsets = (base + ramp.take(indices) * stride).reshape(-1)
                except IndexError:
                    pass
                else:
                    output = data.copy()
                    _scatter(output.reshape(-1), offsets, updates.reshape(-1), parsed)
                    return output
        else:
            result = _elements.run_scatter_elements(spec, data, indices, updates, axis, reduction)
            if _fast_dtype(data.dtype) and result.dtype == data.dtype and data.shape[axis]:
                ax = axis % data.ndim  # the offsets' plan for small calls (a base offset per index)
                # Small calls: offsets computed by NumPy where the compiled loops are not here
                # (complex; numba missing or not imported yet: a small call never imports it,
                # 0.25 s) or for a few assignments (Python's dict: ~4 us); else the accepted
                # kernel is faster (15 vs 34 us for 10,000 adds into 16 rows).
                compiled = data.dtype.kind != "c" and compiled_loaded()
                few = reduction == "none" and indices.size <= 64
                small = data.nbytes <= SMALL_BYTES and (few or not compiled)
                plan = _elements_plan(data.shape, indices.shape, ax) if small else None
                _accept(key, (ax, plan, Reduction(reduction), None))
            return result
    backend = backend_for(spec, {"data": data, "indices": indices, "updates": updates})
    if backend is not None:
        return backend.scatter_elements(data, indices, updates, axis, reduction, out)
    return _elements.run_scatter_elements(spec, data, indices, updates, axis, reduction, out)


def run_tensor_scatter(
    spec: OpVersion, past_cache, update, write_indices=None, axis=-2, mode="linear", out=None
) -> Any:
    plain = (
        (out is None or out is past_cache)
        and type(past_cache) is _ndarray
        and type(update) is _ndarray
        and type(axis) is int
        and type(mode) is str
        and (write_indices is None or type(write_indices) is _ndarray)
    )
    if plain:
        key: tuple = (
            id(spec),
            past_cache.dtype,
            update.dtype,
            past_cache.shape,
            update.shape,
            axis,
            mode,
            None if write_indices is None else (write_indices.dtype, write_indices.shape),
        )
    if plain and out is not None:  # in place, a decode step's write: any cache size (nothing is copied)
        in_place = _ACCEPTED.get(("in place", key))
        if in_place is None:
            result = _tensor_scatter.run_tensor_scatter(spec, past_cache, update, write_indices, axis, mode, out)
            if past_cache.dtype.kind in "biufc":
                _accept(("in place", key), (axis % past_cache.ndim, Mode.parse(spec, mode)))
            return result
        if (
            past_cache.flags.writeable
            and 0 not in past_cache.strides
            and not np.may_share_memory(past_cache, update)
            and (write_indices is None or not np.may_share_memory(past_cache, write_indices))
        ):
            _tensor_scatter.write_accepted(spec, past_cache, update, write_indices, *in_place)
            return past_cache
    elif plain:
        plan = _ACCEPTED.get(key)
        if plan is not None:
            where, order, ramp, zeros, capacity, high = plan
            if _small(past_cache.nbytes):
                starts = zeros if write_indices is None else write_indices
                listed = starts.tolist()
                if min(listed) >= 0 and (high is None or max(listed) <= high):  # else the kernel's error
                    output = past_cache.copy()
                    # the kernel's NumPy write: positions (batch, length), the sequence axis beside batch
                    output[where + ((ramp + starts[:, None]) % capacity,)] = update.transpose(order)  # noqa: RUF005 - x[(a, *b)] reads as 3.11-only syntax to mypy
                    return output
        else:
            result = _tensor_scatter.run_tensor_scatter(spec, past_cache, update, write_indices, axis, mode)
            ax = axis % past_cache.ndim
            if (
                past_cache.dtype.kind in "biufc"
                and result.dtype == past_cache.dtype
                and past_cache.shape[0]
                and ax
                and past_cache.nbytes <= SMALL_BYTES
            ):
                batch, capacity, length = past_cache.shape[0], past_cache.shape[ax], update.shape[ax]
                where = (np.arange(batch)[:, None],) + (slice(None),) * (ax - 1)
                order = (0, ax, *(d for d in range(1, update.ndim) if d != ax))
                high = capacity - length if Mode.parse(spec, mode) is Mode.LINEAR else None
                _accept(key, (where, order, np.arange(length), np.zeros(batch, np.int64), capacity, high))
            return result
    backend = backend_for(spec, {"past_cache": past_cache, "update": update, "write_indices": write_indices})
    if backend is not None:
        return backend.tensor_scatter(past_cache, update, write_indices, axis, mode, out)
    return _tensor_scatter.run_tensor_scatter(spec, past_cache, update, write_indices, axis, mode, out)


def run_gather_block_quantized(
    spec: OpVersion,
    data,
    indices,
    scales,
    zero_points=None,
    gather_axis=0,
    quantize_axis=1,
    block_size=128,
    bits=4,
    out=None,
) -> Any:
    zp = zero_points
    if (
        out is None
        and type(data) is _ndarray
        and type(indices) is _ndarray
        and type(scales) is _ndarray
        and (zp is None or type(zp) is _ndarray)
        and type(gather_axis) is type(quantize_axis) is type(block_size) is type(bits) is int
    ):
        # Every check depends on the signature alone (an index out of range is a row of zeros,
        # not an error): an accepted one runs the compiled loop at once.
        key = (
            id(spec),
            data.dtype,
            data.shape,
            data.flags.c_contiguous,
            indices.dtype,
            scales.dtype,
            scales.shape,
            scales.flags.c_contiguous,
            None if zp is None else (zp.dtype, zp.shape, zp.flags.c_contiguous),
            gather_axis,
            quantize_axis,
            block_size,
            bits,
        )
        accepted = _ACCEPTED.get(key)
        if type(accepted) is _block_quantized.Compiled:
            return _block_quantized.run_prepared(spec, accepted, data, indices, scales, zp)
        if accepted is not None:  # the NumPy path's plan: numba not loaded yet, or a layout it lacks
            result, ready = _block_quantized.run_planned(spec, accepted, data, indices, scales, zp, bits)
            if ready is not None:
                _accept(key, ready)
            return result
        result, accepted = _block_quantized.run_gather_block_quantized(
            spec, data, indices, scales, zp, gather_axis, quantize_axis, block_size, bits
        )
        if data.size:
            _accept(key, accepted)
        return result
    # NumPy only: torch, JAX and the array-API libraries have no int4/uint4/float4 arrays, and
    # a silent round trip would hide a device-to-host copy of the table. Each input is asked
    # alone: with NumPy data, backend_for's rule for the others would advise data of their
    # library, which this operator refuses.
    inputs = {"data": data, "indices": indices, "scales": scales, "zero_points": zp}
    for name, value in inputs.items():
        if value is not None and backend_for(spec, {name: value}) is not None:
            raise spec.error(
                DTypeError,
                f"{name} is a {library_name(value)}, but this operator runs on NumPy arrays only "
                "(ml_dtypes' int4/uint4/float8/float4 for the quantized types): pass every input as a NumPy array",
                input=name,
                value=library_name(value),
            )
    return _block_quantized.run_gather_block_quantized(
        spec, data, indices, scales, zp, gather_axis, quantize_axis, block_size, bits, out
    )[0]
