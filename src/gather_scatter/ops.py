"""The front door: the public operators, and ``run_<op>(spec, ...)`` for any version.

Each call resolves nothing but the backend: ``spec`` (an OpVersion; the public functions pass
the newest one, :mod:`gather_scatter._dispatch` the version in effect at an opset) says what
the version accepts. The first array input decides the library (:func:`backends.backend_for`):
an array of torch, JAX, dask or any array-API library goes to its backend, NumPy input to the
NumPy kernels in :mod:`gather_scatter.kernels`. Per-call policy lives here, nowhere below.

Small calls take a fast path. What a call's checks depend on splits in two: its signature
(the version, the dtypes, the ranks or shapes, the attributes) and its values (the indices'
bounds). The first call of a signature runs the kernel with every check; once it succeeds
the signature is remembered (:data:`_ACCEPTED`, as onnxruntime checks a node once at session
build), and later calls of it on plain ndarrays, with an output small enough for one thread
and no arena, go straight to NumPy's own checked indexing: its bounds check is the one pass
over the values, and when it fails the kernel runs again to raise the error with its facts.
"""

from __future__ import annotations

from typing import Any, Literal, overload

import numpy as np

from . import _memory
from ._types import ArrayT, NDArray, NumPyInput, ReductionName
from ._versions import (
    GATHER,
    GATHER_ELEMENTS,
    GATHER_ND,
    SCATTER_ELEMENTS,
    SCATTER_ND,
    TENSOR_SCATTER,
    Mode,
    OpVersion,
    Reduction,
)
from .backends import backend_for
from .kernels import elements as _elements
from .kernels import gather as _gather
from .kernels import gather_nd as _gather_nd
from .kernels import scatter_nd as _scatter_nd
from .kernels import tensor_scatter as _tensor_scatter
from .kernels._writes import UFUNCS, assign_last_wins

__all__ = ["gather", "gather_elements", "gather_nd", "scatter_elements", "scatter_nd", "tensor_scatter"]


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


def run_gather(spec: OpVersion, data, indices, axis=0, out=None) -> Any:
    if out is None and type(data) is _ndarray and type(indices) is _ndarray and type(axis) is int:
        key = (id(spec), data.dtype, indices.dtype, data.ndim, indices.ndim, axis)
        ax = _ACCEPTED.get(key)
        if ax is not None:
            # data of no elements: NumPy would skip the bounds check that an empty output still needs
            if data.size and _small(data.nbytes // data.shape[ax] * indices.size, GATHER_BYTES):
                try:
                    result = data.take(indices, ax)  # mode 'raise': Gather's bounds, negatives included
                except IndexError:
                    pass  # the kernel raises the error with its facts
                else:  # a rank-0 output comes back as a NumPy scalar: the kernel's is a 0-d array
                    return result if type(result) is _ndarray else np.array(result, data.dtype)
            elif data.size and data.flags.c_contiguous and indices.dtype.isnative:
                return _gather.run_accepted(spec, data, indices, ax)  # the kernel less its static checks
        else:
            result = _gather.run_gather(spec, data, indices, axis)
            if data.dtype.kind in "biufc":  # not strings (object results), not ml_dtypes' types
                _accept(key, axis % data.ndim)
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


def _scatter(target: np.ndarray, offsets: np.ndarray, values: np.ndarray, reduction: Reduction) -> None:
    """Write as the kernels do, in row-major order of the updates: last wins, or ufunc.at."""
    if reduction is Reduction.NONE and offsets.size <= 64:  # a few updates: the last of each, in Python
        last = {offset: i for i, offset in enumerate(offsets.tolist())}
        if len(last) < offsets.size:
            keep = sorted(last.values())
            offsets, values = offsets[keep], values[keep]
        target[offsets] = values
    elif reduction is Reduction.NONE:
        assign_last_wins(target, offsets, values)
    else:
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
        out is None
        and type(data) is _ndarray
        and type(indices) is _ndarray
        and type(updates) is _ndarray
        and type(reduction) is str
    ):
        key = (id(spec), data.dtype, indices.dtype, updates.dtype, data.shape, indices.shape, updates.shape, reduction)
        accepted = _ACCEPTED.get(key)
        if accepted is not None:
            table, parsed = accepted
            if table is None or not _small(data.nbytes):  # the kernel less its static checks
                return _scatter_nd.run_accepted(spec, data, indices, updates, parsed, table)
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
            result = _scatter_nd.run_scatter_nd(spec, data, indices, updates, reduction)
            k = indices.shape[-1]  # k = 0, every tuple the whole of data: the kernel's path
            if data.dtype.kind in "biufc" and result.dtype == data.dtype and k and data.size:
                n = _size(data.shape[:k])  # the slice numbers, for NumPy's checked indexing (8 bytes each)
                slices = np.arange(n).reshape(data.shape[:k]) if n <= SLICE_TABLE else None
                _accept(key, (slices, Reduction(reduction)))
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
            ax, plan, parsed = accepted
            if plan is None or not _small(data.nbytes):
                if indices.dtype.isnative:  # the kernel less its static checks
                    return _elements.run_scatter_accepted(spec, data, indices, updates, ax, parsed)
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
            if data.dtype.kind in "biufc" and result.dtype == data.dtype and data.shape[axis]:
                ax = axis % data.ndim  # the offsets' plan for small calls (a base offset per index)
                plan = _elements_plan(data.shape, indices.shape, ax) if data.nbytes <= SMALL_BYTES else None
                _accept(key, (ax, plan, Reduction(reduction)))
            return result
    backend = backend_for(spec, {"data": data, "indices": indices, "updates": updates})
    if backend is not None:
        return backend.scatter_elements(data, indices, updates, axis, reduction, out)
    return _elements.run_scatter_elements(spec, data, indices, updates, axis, reduction, out)


def run_tensor_scatter(
    spec: OpVersion, past_cache, update, write_indices=None, axis=-2, mode="linear", out=None
) -> Any:
    if (
        out is None
        and type(past_cache) is _ndarray
        and type(update) is _ndarray
        and type(axis) is int
        and type(mode) is str
        and (write_indices is None or type(write_indices) is _ndarray)
    ):
        key = (
            id(spec),
            past_cache.dtype,
            update.dtype,
            past_cache.shape,
            update.shape,
            axis,
            mode,
            None if write_indices is None else (write_indices.dtype, write_indices.shape),
        )
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


# ---- the public operators: the newest version of each ----------------------------------------


@overload
def gather(data: NumPyInput, indices: Any, axis: int = 0, *, out: NDArray | None = None) -> NDArray: ...
@overload
def gather(data: ArrayT, indices: Any, axis: int = 0, *, out: ArrayT | None = None) -> ArrayT: ...
def gather(data: Any, indices: Any, axis: int = 0, *, out: Any = None) -> Any:
    """Gather-13: take entries of ``data`` along ``axis`` at ``indices``.

    ``output[j_0..j_{axis-1}, i_0..i_{q-1}, j_{axis+1}..] = data[j_0..j_{axis-1}, indices[i_0..i_{q-1}], j_{axis+1}..]``

    Parameters
    ----------
    data : ndarray, shape (D_0, ..., D_{r-1}), r >= 1
        Any of the 16 ONNX tensor types (strings as object, ``U`` or ``S`` arrays; bfloat16 via
        ml_dtypes).
    indices : ndarray of int32 or int64, any shape (Q...), rank 0 allowed
        Values in ``[-s, s-1]`` where ``s = data.shape[axis]``; negatives count from the end.
    axis : int, default 0
        In ``[-r, r-1]``.
    out : ndarray, optional
        Where to write the result: writeable, any layout (a strided view is written through), of
        exactly the output's shape and dtype, sharing no memory with ``data`` or ``indices``.
        Nothing is written to it unless every index is valid.

    Returns
    -------
    ndarray, shape data.shape[:axis] + indices.shape + data.shape[axis+1:], dtype of data
        For strings, an object array of str. ``out`` itself when given.

    Raises
    ------
    IndexOutOfBoundsError
        An index outside ``[-s, s-1]``; the message names the first bad position.
    InvalidAttributeError
        ``axis`` outside ``[-r, r-1]``.
    ShapeError
        ``data`` is a scalar.
    DTypeError
        A data or index type Gather-13 does not allow; ``out`` not an ndarray of data's dtype.
    ShapeError, InvalidAttributeError
        ``out`` of the wrong shape; read-only, broadcast or overlapping an input.

    Notes
    -----
    Other array libraries: ``data`` may be a PyTorch tensor, a JAX array or any array-API array
    (computed there, returned as one of that library on data's device, with these errors:
    :mod:`gather_scatter.backends`), or a dask array (a lazy result: ``backends.dask``).
    Implements ONNX Gather-13 (https://onnx.ai/onnx/operators/onnx__Gather.html; bounds as in
    Gather-11 for every version).
    The reference is ``numpy.take(data, indices, axis)`` after the bounds check.

    Examples
    --------
    >>> import numpy as np
    >>> gather(np.array([[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]]), np.array([[0, 1], [1, 2]])).shape
    (2, 2, 2)
    >>> gather(np.arange(10), np.array([0, -9, -10]))
    array([0, 1, 0])
    """
    return run_gather(GATHER, data, indices, axis, out=out)


@overload
def gather_nd(data: NumPyInput, indices: Any, batch_dims: int = 0, *, out: NDArray | None = None) -> NDArray: ...
@overload
def gather_nd(data: ArrayT, indices: Any, batch_dims: int = 0, *, out: ArrayT | None = None) -> ArrayT: ...
def gather_nd(data: Any, indices: Any, batch_dims: int = 0, *, out: Any = None) -> Any:
    """GatherND-13: gather slices of ``data`` addressed by index tuples.

    With ``b = batch_dims`` and ``k = indices.shape[-1]``:
    ``output[B..., I...] = data[B..., *indices[B..., I..., :], ...]``.

    Parameters
    ----------
    data : ndarray, shape (B..., D_0..D_{k-1}, R...), rank r >= 1
        Any of the 16 ONNX tensor types (strings: the result is an object array of str).
    indices : ndarray of int64, shape (B..., I..., k), rank q >= 1, 1 <= k <= r - b
        Component ``j`` lies in ``[-D_j, D_j - 1]``.
    batch_dims : int, default 0
        ``0 <= b < min(q, r)``; the first ``b`` dims of data and indices must be equal.
    out : ndarray, optional
        Where to write the result, as for :func:`gather`.

    Returns
    -------
    ndarray, shape indices.shape[:-1] + data.shape[b + k:], dtype of data
        ``out`` itself when given.

    Raises
    ------
    IndexOutOfBoundsError
        A component out of bounds (first bad position, data axis, size, valid range).
    InvalidAttributeError
        ``batch_dims`` out of range.
    ShapeError
        Rank < 1, batch dims that differ, or ``k`` outside ``[1, r - b]``.
    DTypeError
        A data type GatherND-13 does not allow, or indices that are not int64; ``out`` not an
        ndarray of data's dtype.
    ShapeError, InvalidAttributeError
        ``out`` of the wrong shape; read-only, broadcast or overlapping an input.

    Notes
    -----
    Other array libraries: ``data`` may be a PyTorch tensor, a JAX array or any array-API array
    (computed there, returned as one of that library on data's device, with these errors:
    :mod:`gather_scatter.backends`), or a dask array (a lazy result: ``backends.dask``).
    Implements ONNX GatherND-13 (https://onnx.ai/onnx/operators/onnx__GatherND.html); the output
    rank is the summary's ``q + r - k - 1 - b``. The spec's reference loop::

        for (bi..., ii...) in ndindex(indices.shape[:-1]):
            output[bi..., ii...] = data[bi..., *indices[bi..., ii...]]

    Examples
    --------
    >>> import numpy as np
    >>> gather_nd(np.array([[0, 1], [2, 3]]), np.array([[0, 0], [1, 1]]))
    array([0, 3])
    >>> gather_nd(np.array([[[0, 1], [2, 3]], [[4, 5], [6, 7]]]), np.array([[1], [0]]), batch_dims=1)
    array([[2, 3],
           [4, 5]])
    """
    return run_gather_nd(GATHER_ND, data, indices, batch_dims, out=out)


@overload
def scatter_nd(
    data: NumPyInput, indices: Any, updates: Any, reduction: ReductionName = "none", *, out: NDArray | None = None
) -> NDArray: ...
@overload
def scatter_nd(
    data: ArrayT, indices: Any, updates: Any, reduction: ReductionName = "none", *, out: ArrayT | None = None
) -> ArrayT: ...
def scatter_nd(
    data: Any,
    indices: Any,
    updates: Any,
    reduction: ReductionName = "none",
    *,
    out: Any = None,
) -> Any:
    """ScatterND-18: a copy of ``data`` with ``updates`` written (or reduced) at index tuples.

    Parameters
    ----------
    data : ndarray, shape (D_0..D_{k-1}, R...), rank r >= 1
        Any of the 16 ONNX tensor types. Never modified, unless ``out`` is data's memory (data or an identical view).
    indices : ndarray of int64, shape (I..., k), rank q >= 1, 0 <= k <= r
        Component ``j`` lies in ``[-D_j, D_j - 1]`` (negatives as in GatherND).
    updates : ndarray, shape indices.shape[:-1] + data.shape[k:], dtype of data
    reduction : {'none', 'add', 'mul', 'max', 'min'}, default 'none'
        Bool: add = or, mul = and, max = or, min = and. Strings: add concatenates,
        max/min compare by code point, mul is a DTypeError. Complex max/min is a DTypeError.
        Numeric max/min are ``np.maximum``/``np.minimum``, as in the spec's loop: NaN
        propagates, and a signed-zero tie resolves as NumPy does for the dtype.
    out : ndarray, optional
        Where to write the result. ``out=data`` updates ``data`` in place, at a cost that
        follows the updates, not the size of ``data`` (a KV-cache write; the same view made
        again, ``c[:, 3]`` twice, is data too). Any other ``out``
        (writeable, any layout, data's shape and the result's dtype: object for strings) must not
        overlap ``data``, ``indices`` or ``updates``; ``data`` is copied into it first.

    Returns
    -------
    ndarray, shape and dtype of data
        For strings, an object array of str. ``out`` itself when given.

    Raises
    ------
    IndexOutOfBoundsError, ShapeError, InvalidAttributeError, DTypeError
        Every check runs before the first write, so on an error ``out`` (``data`` itself
        included) is unchanged. ``out`` faults: DTypeError (not an ndarray, wrong dtype),
        ShapeError (wrong shape), InvalidAttributeError (read-only, broadcast, or overlapping
        an input other than ``data`` itself). ``data`` itself may be any writeable view (a
        slice of a bigger cache): the updates are written through it.

    Notes
    -----
    Other array libraries: ``data`` may be a PyTorch tensor, a JAX array or any array-API array
    (computed there, returned as one of that library on data's device, with these errors:
    :mod:`gather_scatter.backends`), or a dask array (a lazy result: ``backends.dask``).
    Implements ONNX ScatterND-16 and the max/min of ScatterND-18
    (https://onnx.ai/onnx/operators/onnx__ScatterND.html).
    In place (``out=data``) is safe whenever no other thread reads or writes ``data`` during
    the call and nothing else expects the old values: the result is the same as the copy's,
    and an invalid call leaves ``data`` untouched. It is not safe when ``updates`` or
    ``indices`` are views of ``data`` (refused with InvalidAttributeError).
    Duplicates apply in row-major order of ``indices``, the result of the spec's loop, bit
    for bit (float16/bfloat16 round after every update)::

        output = np.copy(data)
        for idx in np.ndindex(indices.shape[:-1]):
            output[tuple(indices[idx])] = f(output[tuple(indices[idx])], updates[idx])

    Examples
    --------
    >>> import numpy as np
    >>> scatter_nd(np.arange(1, 9), np.array([[4], [3], [1], [7]]), np.array([9, 10, 11, 12]))
    array([ 1, 11,  3, 10,  9,  6,  7, 12])
    >>> scatter_nd(np.zeros(2), np.array([[0], [0]]), np.array([1.0, 2.0]), reduction="add")
    array([3., 0.])
    """
    return run_scatter_nd(SCATTER_ND, data, indices, updates, reduction, out=out)


@overload
def gather_elements(data: NumPyInput, indices: Any, axis: int = 0, *, out: NDArray | None = None) -> NDArray: ...
@overload
def gather_elements(data: ArrayT, indices: Any, axis: int = 0, *, out: ArrayT | None = None) -> ArrayT: ...
def gather_elements(data: Any, indices: Any, axis: int = 0, *, out: Any = None) -> Any:
    """GatherElements-13: ``output[i...] = data[i... with the axis coordinate = indices[i...]]``.

    The operator behind ``torch.gather`` and ``np.take_along_axis``.

    Parameters
    ----------
    data : ndarray, shape (D_0, ..., D_{r-1}), r >= 1
        Any of the 16 ONNX tensor types (strings as object or str arrays, bfloat16 via ml_dtypes).
    indices : ndarray of int32 or int64, shape (I_0, ..., I_{r-1})
        The rank of data; ``I_d <= D_d`` for every ``d != axis`` (smaller is allowed), ``I_axis``
        free. Values in ``[-s, s-1]`` where ``s = D_axis``; negatives count from the end.
    axis : int, default 0
        In ``[-r, r-1]``.
    out : ndarray, optional
        Where to write the result: writeable, any layout, of exactly ``indices.shape`` and the
        result's dtype, sharing no memory with the inputs. Nothing is written unless every
        index is valid.

    Returns
    -------
    ndarray, shape indices.shape, dtype of data
        For strings, an object array of str. ``out`` itself when given.

    Raises
    ------
    IndexOutOfBoundsError
        An index outside ``[-s, s-1]``: the first bad position, its value and the valid range.
    ShapeError
        Ranks that differ, rank 0, or ``I_d > D_d`` off the axis.
    InvalidAttributeError
        ``axis`` out of range; ``out`` read-only, broadcast or overlapping an input.
    DTypeError
        A data or index type GatherElements-13 does not allow; ``out`` not an ndarray of the
        result's dtype.

    Notes
    -----
    Other array libraries: ``data`` may be a PyTorch tensor, a JAX array or any array-API array
    (computed there, returned as one of that library on data's device, with these errors:
    :mod:`gather_scatter.backends`), or a dask array (a lazy result: ``backends.dask``).
    Implements ONNX GatherElements-13 (https://onnx.ai/onnx/operators/onnx__GatherElements.html).
    The spec's loop, for ``axis = 1`` of a 2-D tensor, ``output[i][j] = data[i][indices[i][j]]``;
    in general::

        for idx in np.ndindex(indices.shape):
            position = list(idx); position[axis] = indices[idx]
            output[idx] = data[tuple(position)]

    Examples
    --------
    >>> import numpy as np
    >>> gather_elements(np.array([[1, 2], [3, 4]]), np.array([[0, 0], [1, 0]]), axis=1)
    array([[1, 1],
           [4, 3]])
    >>> gather_elements(np.arange(100.0), np.array([99, -100]))
    array([99.,  0.])
    """
    return run_gather_elements(GATHER_ELEMENTS, data, indices, axis, out=out)


@overload
def scatter_elements(
    data: NumPyInput,
    indices: Any,
    updates: Any,
    axis: int = 0,
    reduction: ReductionName = "none",
    *,
    out: NDArray | None = None,
) -> NDArray: ...
@overload
def scatter_elements(
    data: ArrayT,
    indices: Any,
    updates: Any,
    axis: int = 0,
    reduction: ReductionName = "none",
    *,
    out: ArrayT | None = None,
) -> ArrayT: ...
def scatter_elements(
    data: Any,
    indices: Any,
    updates: Any,
    axis: int = 0,
    reduction: ReductionName = "none",
    *,
    out: Any = None,
) -> Any:
    """ScatterElements-18: a copy of ``data`` with each update written (or reduced) at its index along ``axis``.

    The operator behind ``torch.Tensor.scatter``, ``scatter_add`` and ``scatter_reduce``.

    Parameters
    ----------
    data : ndarray, shape (D_0, ..., D_{r-1}), r >= 1
        Any of the 16 ONNX tensor types. Never modified, unless ``out`` is data's memory (data or an identical view).
    indices : ndarray of int32 or int64, shape (I_0, ..., I_{r-1})
        The rank of data; ``I_d <= D_d`` for ``d != axis``. Values in ``[-s, s-1]``, ``s = D_axis``.
    updates : ndarray, shape indices.shape, dtype of data
    axis : int, default 0
        In ``[-r, r-1]``.
    reduction : {'none', 'add', 'mul', 'max', 'min'}, default 'none'
        Duplicates apply in row-major order of ``indices`` (for 'none' the last wins). Bool:
        add = or, mul = and, max = or, min = and. Strings: add concatenates, max/min compare
        by code point, mul is a DTypeError. Complex max/min is a DTypeError. float16 and
        bfloat16 round after every update. Numeric max/min are ``np.maximum``/``np.minimum``.
    out : ndarray, optional
        ``out=data`` updates ``data`` in place at a cost that follows the updates, not the size
        of ``data`` (any writeable view; the same view made again, ``c[:, 3]`` twice, is data
        too). Any other ``out`` (data's shape, the result's dtype,
        writeable) must not overlap an input; ``data`` is copied into it first.

    Returns
    -------
    ndarray, shape and dtype of data
        For strings, an object array of str. ``out`` itself when given.

    Raises
    ------
    IndexOutOfBoundsError, ShapeError, InvalidAttributeError, DTypeError
        As for :func:`gather_elements`, plus updates whose shape differs from indices', an
        unknown reduction, and a reduction the type lacks. Every check runs before the first
        write: on an error ``out`` (``data`` itself included) is unchanged.

    Notes
    -----
    Other array libraries: ``data`` may be a PyTorch tensor, a JAX array or any array-API array
    (computed there, returned as one of that library on data's device, with these errors:
    :mod:`gather_scatter.backends`), or a dask array (a lazy result: ``backends.dask``).
    Implements ONNX ScatterElements-18 (https://onnx.ai/onnx/operators/onnx__ScatterElements.html),
    whose loop, for ``axis = 0`` of a 2-D tensor, is
    ``output[indices[i][j]][j] = f(output[indices[i][j]][j], updates[i][j])``; in general::

        output = np.copy(data)
        for idx in np.ndindex(indices.shape):
            position = list(idx); position[axis] = indices[idx]
            output[tuple(position)] = f(output[tuple(position)], updates[idx])

    Examples
    --------
    >>> import numpy as np
    >>> scatter_elements(np.zeros((3, 3)), np.array([[1, 0, 2], [0, 2, 1]]),
    ...                  np.array([[1.0, 1.1, 1.2], [2.0, 2.1, 2.2]]))
    array([[2. , 1.1, 0. ],
           [1. , 0. , 2.2],
           [0. , 2.1, 1.2]])
    >>> scatter_elements(np.zeros(2), np.array([1, 1, 0]), np.array([1.0, 2.0, 3.0]), reduction="add")
    array([3., 3.])
    """
    return run_scatter_elements(SCATTER_ELEMENTS, data, indices, updates, axis, reduction, out=out)


@overload
def tensor_scatter(
    past_cache: NumPyInput,
    update: Any,
    write_indices: Any = None,
    *,
    axis: int = -2,
    mode: Literal["linear", "circular"] = "linear",
    out: NDArray | None = None,
) -> NDArray: ...
@overload
def tensor_scatter(
    past_cache: ArrayT,
    update: Any,
    write_indices: Any = None,
    *,
    axis: int = -2,
    mode: Literal["linear", "circular"] = "linear",
    out: ArrayT | None = None,
) -> ArrayT: ...
def tensor_scatter(
    past_cache: Any,
    update: Any,
    write_indices: Any = None,
    *,
    axis: int = -2,
    mode: Literal["linear", "circular"] = "linear",
    out: Any = None,
) -> Any:
    """TensorScatter-24: the cache with ``update`` written along the sequence ``axis`` at each batch's write index.

    Parameters
    ----------
    past_cache : ndarray, shape (batch, D_1, ..., max_sequence_length, ..., D_n), rank >= 2
        Any of TensorScatter's 24 types: the 16 of the other ops plus float8 (e4m3fn,
        e4m3fnuz, e5m2, e5m2fnuz, e8m0) and 4-bit (int4, uint4, float4e2m1) as ml_dtypes
        arrays. Never modified, unless ``out`` is past_cache's memory (past_cache or an identical view).
    update : ndarray, shape (batch, D_1, ..., sequence_length, ..., D_n), dtype of past_cache
        ``sequence_length <= max_sequence_length``; every other dim equals past_cache's.
    write_indices : ndarray of int64, shape (batch,), optional
        Where each batch's update starts on the sequence axis; all zeros when absent. Every
        value ``>= 0``; in 'linear' mode also ``write_indices[b] + sequence_length <= max_sequence_length``.
    axis : int, default -2
        The sequence axis, in ``[-r, r-1]`` and never the batch axis 0.
    mode : {'linear', 'circular'}, default 'linear'
        'circular' wraps positions modulo ``max_sequence_length`` (a ring buffer).
    out : ndarray, optional
        ``out=past_cache`` is the decode-step write in place: its cost follows ``update``, not
        the cache (any writeable view; the same view made again, ``c[:, 3]`` twice, is
        past_cache too). Any other ``out`` (past_cache's shape, the result's dtype,
        writeable) must not overlap an input; ``past_cache`` is copied into it first.

    Returns
    -------
    ndarray, shape and dtype of past_cache
        For strings, an object array of str. ``out`` itself when given.

    Raises
    ------
    IndexOutOfBoundsError
        A negative write index, or in linear mode one that leaves no room for the update
        (first bad batch, its value and the valid range).
    ShapeError
        Ranks that differ or below 2, dims that differ off the axis, ``sequence_length >
        max_sequence_length``, ``write_indices`` not of shape (batch,).
    InvalidAttributeError
        ``axis`` out of range or 0, an unknown ``mode``; ``out`` read-only, broadcast or overlapping an
        input.
    DTypeError
        A type TensorScatter-24 does not allow, update's type differing from the cache's,
        ``write_indices`` not int64; ``out`` not an ndarray of the result's dtype.

    Notes
    -----
    Other array libraries: ``past_cache`` may be a PyTorch tensor, a JAX array or any array-API
    array (computed there, returned as one of that library on its device, with these errors:
    :mod:`gather_scatter.backends`); a dask array is refused.
    Implements ONNX TensorScatter-24 (https://onnx.ai/onnx/operators/onnx__TensorScatter.html),
    whose loop is::

        for prefix_idx in np.ndindex(past_cache.shape[:axis]):
            batch_idx = prefix_idx[0]
            for sequence_idx in range(sequence_length):
                cache_sequence_idx = write_indices[batch_idx] + sequence_idx
                if mode == "circular":
                    cache_sequence_idx = cache_sequence_idx % max_sequence_length
                present_cache[(*prefix_idx, cache_sequence_idx)] = update[(*prefix_idx, sequence_idx)]

    Every check runs before the first write: on an error ``out`` is unchanged.

    Examples
    --------
    >>> import numpy as np
    >>> cache = np.zeros((2, 4, 1), dtype=np.float32)
    >>> tensor_scatter(cache, np.ones((2, 1, 1), np.float32), np.array([3, 1]))[..., 0]
    array([[0., 0., 0., 1.],
           [0., 1., 0., 0.]], dtype=float32)
    >>> tensor_scatter(cache, np.ones((2, 2, 1), np.float32), np.array([3, 0]), mode="circular")[..., 0]
    array([[1., 0., 0., 1.],
           [1., 1., 0., 0.]], dtype=float32)
    """
    return run_tensor_scatter(TENSOR_SCATTER, past_cache, update, write_indices, axis, mode, out=out)
