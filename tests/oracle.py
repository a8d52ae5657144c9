"""A slow loop oracle for the whole family (Gather, GatherND, ScatterND, GatherElements,
ScatterElements, Scatter, TensorScatter), written from the spec text.

Nothing here imports gather_scatter: every output element is computed by an explicit
Python loop over ``np.ndindex``, as the spec's reference code reads, so a vectorization
mistake in the library cannot hide in the oracle too. Errors are plain builtins
(IndexError / ValueError / TypeError); the tests map them to the library's classes.

Rules taken from the project's spec notes (shared/spec/README.md, beside the repository):

* every index lies in ``[-s, s-1]`` (negatives count from the end), for every version;
* ScatterND applies updates in row-major order of ``indices`` (for 'none' the last wins),
  with ``indices.shape[-1] == 0`` allowed (each update is then the whole tensor);
* reductions on one element at a time with NumPy scalars of the data type, so
  float16/bfloat16 round after every update; bool add/max = or, mul/min = and; strings
  add concatenates, max/min by code point, mul is a TypeError; complex max/min TypeError.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = [
    "assert_same", "combine", "first_difference", "gather", "gather_elements", "gather_nd", "scatter",
    "scatter_elements", "scatter_nd", "tensor_scatter",
]


def _index(value, size: int, where) -> int:
    """One index value in ``[-size, size-1]``, as a non-negative position."""
    value = int(value)
    if not -size <= value < size:
        error = IndexError(f"indices{list(where)} = {value} out of bounds for an axis of size {size}")
        error.position = tuple(where)  # the loops run in row-major order: this is the first bad one
        raise error
    return value + size if value < 0 else value


def _empty_like_dtype(shape, dtype) -> np.ndarray:
    out = np.empty(shape, dtype=dtype)
    if dtype == object:
        out.fill("")
    return out


def gather(data: np.ndarray, indices: np.ndarray, axis: int = 0) -> np.ndarray:
    """``output[j0.., i.., j1..] = data[j0.., indices[i..], j1..]`` (Gather-11/13, numpy.take)."""
    data, indices = np.asarray(data), np.asarray(indices)
    r = data.ndim
    if r < 1:
        raise ValueError("Gather: data must have rank >= 1")
    if not -r <= axis < r:
        raise ValueError(f"Gather: axis {axis} out of range for rank {r}")
    ax = axis + r if axis < 0 else axis
    s = data.shape[ax]
    positions = {}
    for i in np.ndindex(indices.shape):  # check every index before producing anything
        positions[i] = _index(indices[i], s, i)
    q = indices.ndim
    out_shape = data.shape[:ax] + indices.shape + data.shape[ax + 1 :]
    out = _empty_like_dtype(out_shape, data.dtype)
    for o in np.ndindex(out_shape):
        j0, i, j1 = o[:ax], o[ax : ax + q], o[ax + q :]
        out[o] = data[j0 + (positions[i],) + j1]
    return out


def gather_nd(data: np.ndarray, indices: np.ndarray, batch_dims: int = 0) -> np.ndarray:
    """``output[b.., i..] = data[b.., *indices[b.., i.., :], ...]`` (GatherND-12/13)."""
    data, indices = np.asarray(data), np.asarray(indices)
    r, q, b = data.ndim, indices.ndim, batch_dims
    if r < 1 or q < 1:
        raise ValueError("GatherND: data and indices must have rank >= 1")
    if not 0 <= b < min(q, r):
        raise ValueError(f"GatherND: batch_dims {b} out of range")
    if data.shape[:b] != indices.shape[:b]:
        raise ValueError("GatherND: batch dimensions differ")
    k = indices.shape[-1]
    if not 1 <= k <= r - b:
        raise ValueError(f"GatherND: indices.shape[-1] = {k} out of [1, {r - b}]")
    tuples = {}
    for idx in np.ndindex(indices.shape[:-1]):
        tuples[idx] = tuple(
            _index(indices[idx + (j,)], data.shape[b + j], idx + (j,)) for j in range(k)
        )
    out_shape = indices.shape[:-1] + data.shape[b + k :]
    out = _empty_like_dtype(out_shape, data.dtype)
    slice_shape = data.shape[b + k :]
    for idx in np.ndindex(indices.shape[:-1]):
        source = idx[:b] + tuples[idx]
        for rest in np.ndindex(slice_shape):
            out[idx + rest] = data[source + rest]
    return out


def combine(reduction: str, current, update):
    """``f(output element, update element)`` of ScatterND, one scalar at a time."""
    if reduction == "none":
        return update
    if isinstance(current, str) or isinstance(update, str):
        if reduction == "add":
            return current + update
        if reduction == "max":
            return current if current > update else update
        if reduction == "min":
            return current if current < update else update
        raise TypeError(f"ScatterND: reduction {reduction!r} is not defined for strings")
    if isinstance(current, np.bool_):
        a, b = bool(current), bool(update)
        return np.bool_(a or b) if reduction in ("add", "max") else np.bool_(a and b)
    is_complex = isinstance(current, np.complexfloating)
    if reduction == "add":
        return current + update
    if reduction == "mul":
        return current * update
    if is_complex:
        raise TypeError(f"ScatterND: reduction {reduction!r} is not defined for complex numbers")
    # max/min are np.maximum/np.minimum, as in the spec's loop (onnx.reference): NaN
    # propagates; on a signed-zero tie NumPy itself differs by dtype (float16 keeps the current
    # value, float32/float64/bfloat16 take the update), and the loop's result is NumPy's.
    return (np.maximum if reduction == "max" else np.minimum)(current, update)


def scatter_nd(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, reduction: str = "none") -> np.ndarray:
    """The spec's loop::

        output = np.copy(data)
        for idx in np.ndindex(indices.shape[:-1]):
            output[indices[idx]] = f(output[indices[idx]], updates[idx])
    """
    data, indices, updates = np.asarray(data), np.asarray(indices), np.asarray(updates)
    r, q = data.ndim, indices.ndim
    if r < 1 or q < 1:
        raise ValueError("ScatterND: data and indices must have rank >= 1")
    k = indices.shape[-1]
    if not 0 <= k <= r:
        raise ValueError(f"ScatterND: indices.shape[-1] = {k} out of [0, {r}]")
    if updates.shape != indices.shape[:-1] + data.shape[k:]:
        raise ValueError(f"ScatterND: updates shape {updates.shape} is wrong")
    tuples = {}
    for idx in np.ndindex(indices.shape[:-1]):
        tuples[idx] = tuple(_index(indices[idx + (j,)], data.shape[j], idx + (j,)) for j in range(k))
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise ValueError(f"ScatterND: unknown reduction {reduction!r}")
    output = np.copy(data)
    slice_shape = data.shape[k:]
    with np.errstate(all="ignore"):  # integer wrap-around and float overflow are the answer
        for idx in np.ndindex(indices.shape[:-1]):
            target = tuples[idx]
            for rest in np.ndindex(slice_shape):
                output[target + rest] = combine(reduction, output[target + rest], updates[idx + rest])
    return output


def _elements_positions(data: np.ndarray, indices: np.ndarray, axis: int, op: str) -> tuple[int, dict]:
    """The checks of GatherElements/ScatterElements (README: same rank, indices no larger than
    data off the axis) and, in row-major order, each index position's data position."""
    r = data.ndim
    if r < 1 or indices.ndim != r:
        raise ValueError(f"{op}: data and indices must have the same rank >= 1")
    if not -r <= axis < r:
        raise ValueError(f"{op}: axis {axis} out of range for rank {r}")
    ax = axis + r if axis < 0 else axis
    for d in range(r):
        if d != ax and indices.shape[d] > data.shape[d]:
            raise ValueError(f"{op}: indices.shape[{d}] > data.shape[{d}]")
    positions = {}
    for idx in np.ndindex(indices.shape):  # check every index before producing anything
        target = list(idx)
        target[ax] = _index(indices[idx], data.shape[ax], idx)
        positions[idx] = tuple(target)
    return ax, positions


def gather_elements(data: np.ndarray, indices: np.ndarray, axis: int = 0) -> np.ndarray:
    """GatherElements-11/13: ``output[i][j] = data[indices[i][j]][j]`` for axis 0 (2-D), in
    general the index position with its axis coordinate replaced by the index value."""
    data, indices = np.asarray(data), np.asarray(indices)
    _, positions = _elements_positions(data, indices, axis, "GatherElements")
    out = _empty_like_dtype(indices.shape, data.dtype)
    for idx, target in positions.items():
        out[idx] = data[target]
    return out


def scatter_elements(data, indices, updates, axis: int = 0, reduction: str = "none") -> np.ndarray:
    """ScatterElements-11..18: ``output[indices[i][j]][j] = f(output[...], updates[i][j])`` for
    axis 0 (2-D); updates apply in row-major order of ``indices`` (README)."""
    data, indices, updates = np.asarray(data), np.asarray(indices), np.asarray(updates)
    if updates.shape != indices.shape:
        raise ValueError("ScatterElements: updates must have the shape of indices")
    _, positions = _elements_positions(data, indices, axis, "ScatterElements")
    if reduction not in ("none", "add", "mul", "max", "min"):
        raise ValueError(f"ScatterElements: unknown reduction {reduction!r}")
    if (data.dtype == object and reduction == "mul") or (data.dtype.kind == "c" and reduction in ("max", "min")):
        raise TypeError(f"ScatterElements: reduction {reduction!r} is not defined for {data.dtype}")  # README
    output = np.copy(data)
    with np.errstate(all="ignore"):
        for idx, target in positions.items():
            output[target] = combine(reduction, output[target], updates[idx])
    return output


def scatter(data, indices, updates, axis: int = 0) -> np.ndarray:
    """Scatter-9: ScatterElements without a reduction (the text of Scatter-9 is ScatterElements-11's)."""
    return scatter_elements(data, indices, updates, axis)


def tensor_scatter(past_cache, update, write_indices=None, axis: int = -2, mode: str = "linear") -> np.ndarray:
    """TensorScatter-24, the text's pseudocode, with the README's checks (mode 'linear' or
    'circular', axis never 0, update equal to the cache off the axis, sequence_length <=
    max_sequence_length, write_indices int64 of shape (batch,), each >= 0, and in linear mode
    write_indices[b] + sequence_length <= max)."""
    past, update = np.asarray(past_cache), np.asarray(update)
    if mode not in ("linear", "circular"):
        raise ValueError(f"TensorScatter: unknown mode {mode!r}")
    r = past.ndim
    if r < 2 or update.ndim != r:
        raise ValueError("TensorScatter: past_cache and update must have the same rank >= 2")
    if not -r <= axis < r or axis % r == 0:
        raise ValueError(f"TensorScatter: axis {axis} out of range or the batch axis")
    axis %= r
    max_sequence_length, sequence_length = past.shape[axis], update.shape[axis]
    if any(u != p for d, (u, p) in enumerate(zip(update.shape, past.shape)) if d != axis):
        raise ValueError("TensorScatter: update differs from past_cache off the sequence axis")
    if sequence_length > max_sequence_length:
        raise ValueError("TensorScatter: sequence_length > max_sequence_length")
    batch = past.shape[0]
    if write_indices is None:
        write_indices = np.zeros(batch, dtype=np.int64)
    write_indices = np.asarray(write_indices)
    if write_indices.dtype != np.int64:
        raise TypeError("TensorScatter: write_indices must be tensor(int64)")
    if write_indices.shape != (batch,):
        raise ValueError("TensorScatter: write_indices must have shape (batch,)")
    for b in range(batch):
        w = int(write_indices[b])
        if w < 0 or (mode == "linear" and w + sequence_length > max_sequence_length):
            error = IndexError(f"write_indices[{b}] = {w} out of range")
            error.position = (b,)
            raise error
    present_cache = np.copy(past)
    for prefix_idx in np.ndindex(past.shape[:axis]):
        batch_idx = prefix_idx[0]
        for sequence_idx in range(sequence_length):
            cache_sequence_idx = int(write_indices[batch_idx]) + sequence_idx
            if mode == "circular":
                cache_sequence_idx = cache_sequence_idx % max_sequence_length
            for rest in np.ndindex(past.shape[axis + 1 :]):
                present_cache[(*prefix_idx, cache_sequence_idx, *rest)] = update[(*prefix_idx, sequence_idx, *rest)]
    return present_cache


# ----------------------------------------------------------------------------- comparison


def first_difference(actual: np.ndarray, expected: np.ndarray) -> str | None:
    """None when ``actual`` equals ``expected`` exactly, else a sentence saying where not.

    Same shape and dtype are required. Strings: object arrays of ``str`` compared element by
    element (type and value). Numbers: the same bytes (so -0.0 != 0.0), except that any two
    NaNs are equal: the sign bit of a NaN made by ``inf - inf`` differs between scalar and
    SIMD code paths and carries no meaning.
    """
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        return f"shape {actual.shape} != {expected.shape}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype} != {expected.dtype}"
    if expected.dtype == object:
        for pos in np.ndindex(expected.shape):
            a, e = actual[pos], expected[pos]
            if type(a) is not type(e) or a != e:
                return f"at {pos}: {a!r} != {e!r}"
        return None
    if actual.size == 0:
        return None
    actual, expected = _nan_as_zero(actual, expected)
    width = (actual.dtype.itemsize,)
    a_bytes = np.ascontiguousarray(actual).reshape(-1).view(np.uint8).reshape(actual.shape + width)
    e_bytes = np.ascontiguousarray(expected).reshape(-1).view(np.uint8).reshape(expected.shape + width)
    if np.array_equal(a_bytes, e_bytes):
        return None
    differs = np.any(a_bytes != e_bytes, axis=-1)
    pos = tuple(int(i) for i in np.unravel_index(int(np.argmax(differs)), actual.shape))
    count = int(differs.sum())
    return f"{count} element(s) differ bitwise; first at {pos}: {actual[pos]!r} != {expected[pos]!r}"


def _nan_as_zero(actual: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Copies with each float component that is NaN in both set to 0 in both."""
    shape = actual.shape
    if actual.dtype.kind not in "fc" and actual.dtype != ml_dtypes.bfloat16:
        return actual, expected
    actual, expected = np.array(actual).reshape(-1), np.array(expected).reshape(-1)
    parts = (lambda x: x.view(x.real.dtype)) if actual.dtype.kind == "c" else (lambda x: x)
    both = np.isnan(parts(actual)) & np.isnan(parts(expected))
    parts(actual)[both] = 0
    parts(expected)[both] = 0
    return actual.reshape(shape), expected.reshape(shape)


def assert_same(actual, expected, context: str = "") -> None:
    """Assert bit-for-bit equality (see :func:`first_difference`)."""
    diff = first_difference(actual, expected)
    assert diff is None, f"{context}: {diff}" if context else diff
