"""Gather (1, 11, 13): entries along one axis, by ``np.take`` into the output on the pool."""

from __future__ import annotations

import numpy as np

from ..resources import buffers as _buffers
from ..resources import threads as _parallel
from ..rules import dims as _dims
from ..rules import dtypes as _dtypes
from ..rules import shapes as _shapes
from ..rules.validate import as_array, check_bounds, check_out, native_indices
from ..rules.versions import OpVersion
from . import _numba
from ._writes import bits, cached_output, fresh_output, strings_as_objects


def run_gather(spec: OpVersion, data, indices, axis=0, out=None) -> np.ndarray:
    """Gather, any version, with NumPy: entries of ``data`` along ``axis`` at ``indices``.

    The kernel behind :func:`gather_scatter.gather` for NumPy input, every check included.

    ``spec`` is the version (a registry ``OpVersion``) whose types, attributes and name the
    checks use. The other parameters, the result and the errors, with shapes and dtypes, are
    those of :func:`gather_scatter.gather`.

    See Also
    --------
    gather_scatter.gather : The public function (Gather-13, any array library).

    Notes
    -----
    Implements ONNX Gather (https://onnx.ai/onnx/operators/onnx__Gather.html):
    the result of the spec's loop, given in :func:`gather_scatter.gather`, bit for bit. Every check runs before
    the first write.

    Examples
    --------
    >>> import numpy as np
    >>> from gather_scatter.rules.versions import REGISTRY
    >>> run_gather(REGISTRY[("", "Gather", 1)], np.arange(10), np.array([[0, -9], [3, 9]]))
    array([[0, 1],
           [3, 9]])
    """
    data, indices = as_array(spec, "data", data), as_array(spec, "indices", indices, np.int64)
    _dtypes.output_dtype(spec, data.dtype, indices.dtype)
    out_shape = _dims.concrete(_shapes.gather_shape(spec, data.shape, indices.shape, axis))
    ax = _dims.normalize_axis(spec, axis, data.ndim)
    indices, data = native_indices(indices), strings_as_objects(data)
    result = None
    if out is None:
        result = cached_output(spec, out_shape, data.dtype)
    else:
        target = check_out(spec, out, out_shape, data.dtype, {"data": data, "indices": indices})
        if not target.flags.c_contiguous:  # a strided view: compute (every check), then write through it
            target[...] = run_gather(spec, data, indices, axis)
            return out
        out = target
    check_bounds(spec, indices, data.shape[ax], ax)
    if out is None and data.dtype.hasobject and data.flags.c_contiguous:
        # take's own new object array starts empty; np.empty's is filled with None first.
        return np.take(data, indices.reshape(-1), axis=ax, mode="wrap").reshape(out_shape)
    if result is None:
        result = _buffers.empty(out_shape, data.dtype) if out is None else out
    if result.size == 0:
        return result
    if not data.flags.c_contiguous:  # strided or broadcast data: index it where it lies, no full copy
        result[...] = data[(slice(None),) * ax + (indices,)]
        return result
    outer, inner = _dims.size(data.shape[:ax]), _dims.size(data.shape[ax + 1 :])
    src = data.reshape(outer, data.shape[ax], inner)
    # A rank-0 index is a length-1 vector here; result keeps the rank-0 output shape.
    dst = result.reshape(outer, indices.size, inner)
    _take_rows(src, indices.reshape(-1), dst)
    return result


def run_accepted(spec: OpVersion, data: np.ndarray, indices: np.ndarray, ax: int) -> np.ndarray:
    """Run :func:`run_gather` for a call whose signature passed every static check before.

    The signature (version, dtypes, ranks, axis) was accepted on ``_runners``' fast path:
    C-contiguous numeric ``data`` with elements, native ``indices``, a fresh output. Only what
    depends on the values remains: the output's size and the bounds, then the copy.
    """
    out_shape = data.shape[:ax] + indices.shape + data.shape[ax + 1 :]
    loops = _numba.warm_loops() if data.dtype.itemsize in (1, 2, 4, 8) else None
    if loops is not None:  # the bounds and the copy in one compiled pass
        return _take_rows_compiled(spec, loops, data, indices, ax, out_shape)
    result = cached_output(spec, out_shape, data.dtype)
    check_bounds(spec, indices, data.shape[ax], ax)
    if result is None:
        result = _buffers.empty(out_shape, data.dtype)
    outer = _dims.size(data.shape[:ax])
    _take_rows(data.reshape(outer, data.shape[ax], -1), indices.reshape(-1), result.reshape(outer, indices.size, -1))
    return result


def _take_rows_compiled(
    spec: OpVersion, loops, data: np.ndarray, indices: np.ndarray, ax: int, out_shape: tuple[int, ...]
) -> np.ndarray:
    """Gather along ``ax`` of C-contiguous ``data`` in one compiled pass, checking the bounds.

    Each thread (one per MiB of output, on ranges of the outer rows, or of the indices where
    there is one) checks its indices (min and max, one pass) and copies their slices,
    prefetched. A bad index: the fresh output is dropped and :func:`check_bounds` raises with
    the facts. 10,000 rows of 256 bytes from a 25.6 MB table: ~130 us on two threads against
    ~145 for np.take and ~160 for the separate bounds pass and take (the 2-core machine,
    interleaved).
    """
    result = fresh_output(spec, out_shape, data.dtype)
    src, dst, flat = bits(data), bits(result), indices.reshape(-1)
    outer, size = _dims.size(data.shape[:ax]), data.shape[ax]
    block, run = _dims.size(data.shape[ax + 1 :]), loops.take_rows
    if outer == 1:
        calls = [(0, 1, lo, hi) for lo, hi in _parallel.ranges(flat.size, result.nbytes)]
    else:
        calls = [(lo, hi, 0, flat.size) for lo, hi in _parallel.ranges(outer, result.nbytes)]
    bad = _parallel.run(
        lambda i, _: run(src, flat, dst, size, block, *calls[i]), [(i, i + 1) for i in range(len(calls))]
    )
    if max(bad) >= 0:
        check_bounds(spec, indices, size, ax)
        raise AssertionError("the compiled loop found a bad index that check_bounds did not")  # pragma: no cover
    return result


def _take_rows(src: np.ndarray, idx: np.ndarray, dst: np.ndarray) -> None:
    """``dst[o, i] = src[o, idx[i]]`` for checked ``idx`` (negatives allowed), on the pool.

    Threads get disjoint ranges of the outer dim, or of ``idx`` when there is one outer row
    (the only case where a range of ``dst`` stays contiguous). ``mode='wrap'`` maps the checked
    negatives and, unlike 'raise', lets take write straight into ``dst`` without a buffer.
    """
    parts = copy_parts(dst.nbytes)
    if src.dtype.hasobject or parts < 2:
        # One call: object copies hold the GIL, and small copies cost less than a hand-off.
        np.take(src, idx, 1, dst, "wrap")
        return
    if dst.shape[0] == 1:
        chunks = _parallel.ranges(dst.shape[1], dst.nbytes, parts)
        _parallel.run(lambda lo, hi: np.take(src[0], idx[lo:hi], 0, dst[0, lo:hi], "wrap"), chunks)
    else:
        chunks = _parallel.ranges(dst.shape[0], dst.nbytes, parts)
        _parallel.run(lambda lo, hi: np.take(src[lo:hi], idx, 1, dst[lo:hi], "wrap"), chunks)


# Output bytes per thread of a gather's slice copies, in _parallel.MIN_CHUNK_BYTES (4 MiB). Timed
# on the 2-core machine, one thread against two: 8 MB of random rows 713 -> 539 us (GatherND
# batch_dims=1: 509 -> 360) when the second core is free, 4.3 MB and 2.5 MB even; with another
# process on the second core, two threads lost at every size up to 25 MB (4.3 MB: 238 -> 295 us).
COPY_CHUNKS = 4


def copy_parts(nbytes: int) -> int:
    """Threads for a slice copy of ``nbytes`` of output (1: on the calling thread)."""
    return max(1, min(_parallel.get_num_threads(), nbytes // (COPY_CHUNKS * _parallel.MIN_CHUNK_BYTES)))
