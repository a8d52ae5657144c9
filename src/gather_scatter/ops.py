"""The front door: the public operators, the newest version of each, on any array library.

Each function passes its version (an OpVersion of the registry) to ``run_<op>`` in
:mod:`gather_scatter._calls`, which holds the per-call policy: the per-signature fast path,
then the backend that the first array input picks (NumPy's kernels for NumPy input).
:mod:`gather_scatter._nodes` calls the same runners with the version in effect at an opset.

One module of ~490 lines on purpose: it is the public face of six operators, each a few lines of
code under its overloads and its whole numpydoc docstring (shapes, dtypes, errors, spec section),
which is what the API reference renders; splitting it would spread the front door over files.
"""

from __future__ import annotations

from typing import Any, Literal, overload

from ._calls import (
    run_gather,
    run_gather_elements,
    run_gather_nd,
    run_scatter_elements,
    run_scatter_nd,
    run_tensor_scatter,
)
from ._types import ArrayT, NDArray, NumPyInput, ReductionName
from .rules.versions import GATHER, GATHER_ELEMENTS, GATHER_ND, SCATTER_ELEMENTS, SCATTER_ND, TENSOR_SCATTER

__all__ = ["gather", "gather_elements", "gather_nd", "scatter_elements", "scatter_nd", "tensor_scatter"]


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
