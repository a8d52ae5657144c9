"""GatherND (11, 12, 13; com.microsoft 1): slices addressed by index tuples.

The slices are taken step by step as their offsets are computed.
"""

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
from ._offsets import STEP, TakeInto, nd_offsets, slices_shape
from ._writes import cached_output, strings_as_objects
from .gather import copy_parts


def run_gather_nd(spec: OpVersion, data, indices, batch_dims=0, out=None) -> np.ndarray:
    """GatherND, any version, with NumPy: the slices of ``data`` addressed by index tuples.

    The kernel behind :func:`gather_scatter.gather_nd` for NumPy input, every check included.
    With ``b = batch_dims`` and ``k = indices.shape[-1]``:
    ``output[B..., I...] = data[B..., *indices[B..., I..., :], ...]``.

    ``spec`` is the version (a registry ``OpVersion``) whose types, attributes and name the
    checks use. The other parameters, the result and the errors, with shapes and dtypes, are
    those of :func:`gather_scatter.gather_nd`.

    See Also
    --------
    gather_scatter.gather_nd : The public function (GatherND-13, any array library).

    Notes
    -----
    Implements ONNX GatherND (https://onnx.ai/onnx/operators/onnx__GatherND.html):
    the result of the spec's loop, given in :func:`gather_scatter.gather_nd`, bit for bit. Every check runs before
    the first write.

    Examples
    --------
    >>> import numpy as np
    >>> from gather_scatter.rules.versions import GATHER_ND
    >>> run_gather_nd(GATHER_ND, np.array([[0, 1], [2, 3]]), np.array([[0, 0], [-1, -1]]))
    array([0, 3])
    """
    data, indices = as_array(spec, "data", data), as_array(spec, "indices", indices, np.int64)
    _dtypes.output_dtype(spec, data.dtype, indices.dtype)
    out_shape = _dims.concrete(_shapes.gather_nd_shape(spec, data.shape, indices.shape, batch_dims))
    b, k = int(batch_dims), indices.shape[-1]
    indices, data = native_indices(indices), strings_as_objects(data)
    dims = data.shape[b : b + k]
    rows = indices.reshape(slices_shape(indices.shape, indices.ndim - 1))
    result = None
    if out is None:
        result = cached_output(spec, out_shape, data.dtype)
    else:  # a caller's buffer: every index is checked before the first write
        target = check_out(spec, out, out_shape, data.dtype, {"data": data, "indices": indices})
        if not target.flags.c_contiguous:  # a strided view: compute (every check), then write through it
            target[...] = run_gather_nd(spec, data, indices, batch_dims)
            return out
        out = target
        check_bounds(spec, indices, dims, np.arange(b, b + k))
    if result is None:
        result = _buffers.empty(out_shape, data.dtype) if out is None else out
    slice_size = _dims.size(data.shape[b + k :])
    if result.size == 0:  # nothing to move, but bad indices are still errors
        check_bounds(spec, indices, dims, np.arange(b, b + k))
        return result
    dst = result.reshape(rows.shape[0], slice_size)
    per_batch = rows.shape[0] // _dims.size(data.shape[:b]) if b else 1
    if not data.flags.c_contiguous:  # strided or broadcast data: index it where it lies, no full copy
        offsets = nd_offsets(spec, indices, dims, b, per_batch)
        dst[...] = data[np.unravel_index(offsets, data.shape[: b + k])].reshape(dst.shape)
        return result
    src = data.reshape(_dims.size(data.shape[: b + k]), slice_size)
    if src.dtype.hasobject:  # take on objects holds the GIL: offsets first, one take
        np.take(src, nd_offsets(spec, indices, dims, b, per_batch), 0, dst, "wrap")
        return result
    loops = _numba.loops_for(dst.size, ("gather_nd", src.dtype.itemsize, rows.dtype.str)) if b else None
    if loops is not None:  # one compiled pass: each tuple read, checked and its slice copied
        _take_tuples(loops, spec, src, rows, dst, indices, dims, b, per_batch)
        return result
    nd_offsets(spec, indices, dims, b, per_batch, emit=TakeInto(src, dst), checked=out is not None)
    return result


def _take_tuples(
    loops,
    spec: OpVersion,
    src: np.ndarray,
    rows: np.ndarray,
    dst: np.ndarray,
    indices: np.ndarray,
    dims: tuple[int, ...],
    b: int,
    per_batch: int,
) -> None:
    """Copy ``dst[r] = src[batch of r, rows[r]]`` in compiled steps of STEP tuples.

    Per step the compiled loop writes the tuples' checked slice numbers (one pass over the
    indices, no temporaries), then the slices are copied, prefetched ahead, in units as wide
    as a slice's bytes allow; a bad index raises with its position (a fresh output may then
    hold partial results, a caller's buffer was checked before).
    """
    flat_rows, sizes = _numba.read_only(np.ascontiguousarray(rows).reshape(-1)), np.array(dims, dtype=np.int64)
    width = next(w for w in (8, 4, 2, 1) if dst.shape[1] * dst.itemsize % w == 0)
    block = dst.shape[1] * dst.itemsize // width
    units, out_units = _numba.read_only(src.reshape(-1).view(f"u{width}")), dst.reshape(-1).view(f"u{width}")

    def work(lo: int, hi: int) -> int:
        numbers = np.empty(min(STEP, hi - lo), dtype=np.intp)
        for s in range(lo, hi, STEP):
            e = min(hi, s + STEP)
            bad = loops.slice_numbers(flat_rows, sizes, per_batch, numbers, s, e)
            if bad >= 0:
                return bad
            loops.copy_slices(units, numbers, e - s, out_units, s, block)
        return -1

    chunks = _parallel.ranges(rows.shape[0], dst.nbytes, copy_parts(dst.nbytes))
    if max(_parallel.run(work, chunks)) >= 0:
        check_bounds(spec, indices, dims, np.arange(b, b + len(dims)))
        raise AssertionError("the compiled loop found a bad index that check_bounds did not")  # pragma: no cover
