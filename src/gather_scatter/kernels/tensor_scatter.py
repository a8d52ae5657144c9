"""TensorScatter: the KV-cache write of opset 24.

The update is a block of ``sequence_length`` positions per (batch, head...) row of the cache;
each row's positions start at ``write_indices[batch]`` (wrapping modulo
``max_sequence_length`` in 'circular' mode). The kernel computes one flat row offset per
(row, position) and copies whole ``R``-element slices (the dims after the sequence axis) with
one fancy assignment per chunk on the thread pool. Elements are moved as raw bits, so every
type — float8 and 4-bit included — is copied exactly.
"""

from __future__ import annotations

import numpy as np

from ..errors import IndexOutOfBoundsError
from ..resources import buffers as _buffers
from ..resources import threads as _parallel
from ..rules import dims as _dims
from ..rules import dtypes as _dtypes
from ..rules import shapes as _shapes
from ..rules.validate import as_array, native_indices, same_memory
from ..rules.versions import Mode, OpVersion
from . import _numba
from ._writes import bits, checked_target, copy_into, result_dtype, strings_as_objects

NAMES = ("past_cache", "write_indices", "update")  # in output_dtype's (data, indices, updates) order


def _check_write_indices(
    spec: OpVersion, write_indices: np.ndarray, length: int, capacity: int, mode: Mode, axis: int
) -> None:
    """Raise IndexOutOfBoundsError at the first batch whose write index is out of bounds.

    Out of bounds: negative or, in linear mode, leaving no room for ``length`` positions below
    ``capacity``.
    """
    high = capacity - length if mode is Mode.LINEAR else None
    bad = write_indices < 0
    if high is not None:
        bad |= write_indices > high
    if bad.any():
        b = int(np.argmax(bad))
        write_index_error(spec, b, int(write_indices[b]), length, capacity, mode, axis)


def write_index_error(spec: OpVersion, b: int, value: int, length: int, capacity: int, mode: Mode, axis: int) -> None:
    """Raise the IndexOutOfBoundsError for ``write_indices[b] = value`` (the first bad batch)."""
    high = capacity - length if mode is Mode.LINEAR else None
    if value < 0:
        why = "write indices must be >= 0 in either mode"
    else:
        why = f"linear mode needs write_indices[b] + sequence_length ({length}) <= max_sequence_length ({capacity})"
    valid = (0, high) if high is not None else (0, None)
    shown = f"[0, {high}]" if high is not None else "[0, inf)"
    raise spec.error(
        IndexOutOfBoundsError,
        f"write_indices[{b}] = {value} is out of bounds for the sequence axis {axis} of size "
        f"{capacity} (valid range {shown}: {why})",
        input="write_indices",
        position=(b,),
        value=value,
        valid_range=valid,
        axis=axis,
    )


def run_tensor_scatter(
    spec: OpVersion, past_cache, update, write_indices=None, axis=-2, mode="linear", out=None
) -> np.ndarray:
    """TensorScatter with NumPy: the cache with ``update`` written along the sequence ``axis``.

    The kernel behind :func:`gather_scatter.tensor_scatter` for NumPy input, every check
    included: each batch's update starts at its write index.

    ``spec`` is the version (a registry ``OpVersion``) whose types, attributes and name the
    checks use. The other parameters, the result and the errors, with shapes and dtypes, are
    those of :func:`gather_scatter.tensor_scatter`.

    See Also
    --------
    gather_scatter.tensor_scatter : The public function (TensorScatter-24, any array library).

    Notes
    -----
    Implements ONNX TensorScatter-24 (https://onnx.ai/onnx/operators/onnx__TensorScatter.html):
    the result of the spec's loop, given in :func:`gather_scatter.tensor_scatter`, bit for bit. Every check runs before
    the first write.

    Examples
    --------
    >>> import numpy as np
    >>> from gather_scatter.rules.versions import TENSOR_SCATTER
    >>> cache = np.zeros((2, 3), dtype=np.float32)
    >>> run_tensor_scatter(TENSOR_SCATTER, cache, np.ones((2, 2), np.float32), np.array([2, 0]), -1, "circular")
    array([[1., 0., 1.],
           [1., 1., 0.]], dtype=float32)
    """
    in_place = out is not None and same_memory(out, past_cache)
    past = as_array(spec, "past_cache", past_cache)
    update = as_array(spec, "update", update, past.dtype)
    absent = write_indices is None
    write = None if absent else as_array(spec, "write_indices", write_indices, np.int64)
    _dtypes.output_dtype(spec, past.dtype, None if write is None else write.dtype, update.dtype, names=NAMES)
    _shapes.tensor_scatter_shape(spec, past.shape, update.shape, _dims.ABSENT if write is None else write.shape, axis)
    mode = Mode.parse(spec, mode)
    ax = _dims.normalize_axis(spec, axis, past.ndim)
    batch, capacity, length = past.shape[0], past.shape[ax], update.shape[ax]
    write = np.zeros(batch, dtype=np.int64) if write is None else native_indices(write).astype(np.int64, copy=False)
    dtype = result_dtype(past.dtype)
    others = {"update": update} if absent else {"update": update, "write_indices": write}
    target = checked_target(spec, out, past, dtype, others, in_place, "past_cache")
    _check_write_indices(spec, write, length, capacity, mode, ax)  # nothing written yet
    output = _buffers.empty(past.shape, dtype) if target is None else target
    source = None if in_place else strings_as_objects(past)
    if not _write_rows_compiled(output, source, update, write, ax, mode):
        if source is not None:
            copy_into(output, source)
        if update.size:
            _write_rows_numpy(output, update, write, ax, mode)
    return output if out is None else out


def write_accepted(
    spec: OpVersion, past_cache: np.ndarray, update: np.ndarray, write_indices: np.ndarray | None, ax: int, mode: Mode
) -> None:
    """Write ``update`` into ``past_cache`` in place, for a call whose signature passed every static check.

    The in-place decode step (``out=past_cache``) less the checks its signature fixed:
    ``past_cache`` is writeable, broadcast-free and shares no memory with ``update`` or
    ``write_indices`` (the caller checked). The write indices are checked before the first
    write, so a bad one leaves the cache as it was.
    """
    batch = past_cache.shape[0]
    if write_indices is None:
        write = np.zeros(batch, dtype=np.int64)
    else:
        write = native_indices(write_indices).astype(np.int64, copy=False)
    _check_write_indices(spec, write, update.shape[ax], past_cache.shape[ax], mode, ax)  # nothing written yet
    if not _write_rows_compiled(past_cache, None, update, write, ax, mode) and update.size:
        _write_rows_numpy(past_cache, update, write, ax, mode)


def _write_rows_compiled(
    output: np.ndarray, past: np.ndarray | None, update: np.ndarray, write: np.ndarray, ax: int, mode: Mode
) -> bool:
    """Copy ``past`` (None: in place) around the update and write ``update``, compiled.

    Each thread takes a range of cache rows; False where the dtype or layout needs NumPy.
    """
    loops = _numba.loops_for(update.size, ("tensor_scatter", output.dtype.itemsize))
    if (
        loops is None
        or not output.flags.c_contiguous
        or output.dtype.itemsize not in (1, 2, 4, 8)
        or output.dtype.hasobject
        or (past is not None and not past.flags.c_contiguous)
        or not output.size
    ):
        return False
    start = write % output.shape[ax] if mode is Mode.CIRCULAR else write
    heads, inner = _dims.size(output.shape[1:ax]), _dims.size(output.shape[ax + 1 :])
    target = bits(output)
    values = _numba.read_only(bits(np.ascontiguousarray(update, dtype=output.dtype)))  # one byte order
    source = _numba.read_only(bits(past if past is not None else output))
    write_rows = loops.write_rows
    args = (target, source, values, start, heads, output.shape[ax], update.shape[ax], inner, past is not None)
    work = (output.nbytes if past is not None else 0) + 2 * values.nbytes
    _parallel.run(lambda lo, hi: write_rows(*args, lo, hi), _parallel.ranges(output.shape[0] * heads, work))
    return True


def _write_rows_numpy(output: np.ndarray, update: np.ndarray, write: np.ndarray, ax: int, mode: Mode) -> None:
    """Write ``update`` with NumPy, for objects and any layout.

    The sequence axis is moved next to batch, then one fancy assignment writes every position
    (positions are distinct within a batch: sequence_length <= capacity).
    """
    batch, capacity, length = output.shape[0], output.shape[ax], update.shape[ax]
    start = write % capacity if mode is Mode.CIRCULAR else write
    positions = (np.arange(length, dtype=np.int64) + start[:, None]) % capacity  # (batch, length)
    view = np.moveaxis(output, ax, 1)
    view[np.arange(batch)[:, None], positions] = np.moveaxis(strings_as_objects(update), ax, 1)
