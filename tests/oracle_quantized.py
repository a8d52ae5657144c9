"""A slow loop oracle for com.microsoft GatherBlockQuantized-1, written from its schema text
(onnxruntime 1.32's registry; docs/ContribOperators.md in onnxruntime's repository).

Nothing here imports gather_scatter: every output element is computed by an explicit Python
loop over ``np.ndindex`` of the output, one element at a time, so a vectorization mistake in
the library cannot hide in the oracle too. Rules read from the schema:

* the output is ``data.shape[:g] + indices.shape + data.shape[g+1:]``; for uint8 data with
  ``bits`` < 8 the last axis holds ``8 / bits`` elements per byte, low-order bits first, and
  everything (blocks, scales, zero points) counts unpacked elements;
* ``output = (q - zero_point) * scale`` block-wise along the quantize axis, the block of an
  element being its quantize coordinate divided by ``block_size`` (0 for FP8/FP4: the whole
  axis); default zero point 0 for int4/uint4 and ``2**(bits-1)`` for uint8; zero points of
  packed uint8 are packed the same way along the quantize axis; FP8/FP4 have none;
* for FP8/FP4 a scales dim of 1 off the quantize axis broadcasts;
* negative indices count from the end; an index outside ``[-s, s-1]`` gives zeros;
* arithmetic: the integer difference, then one float32 multiply, rounded once to the output
  type (the precision rule the library documents; onnxruntime's for float and float16).
"""

from __future__ import annotations

import numpy as np

__all__ = ["gather_block_quantized"]

FP_NAMES = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn")


def gather_block_quantized(data, indices, scales, zero_points=None, gather_axis=0, quantize_axis=1,
                           block_size=128, bits=4):
    """The output, computed one element at a time (valid inputs only: the library checks)."""
    r = data.ndim
    g, q = gather_axis % r, quantize_axis % r
    name = data.dtype.name
    packed_uint8 = data.dtype == np.uint8
    fp = name in FP_NAMES
    per = 8 // bits if packed_uint8 else 1
    logical = list(data.shape)
    logical[q] *= per
    block = block_size if block_size else max(logical[q], 1)
    out_shape = tuple(logical[:g]) + indices.shape + tuple(logical[g + 1:])
    out = np.zeros(out_shape, dtype=scales.dtype)
    s = data.shape[g]
    nq = indices.ndim

    def element(x):
        if packed_uint8:
            stored = list(x)
            stored[q] = x[q] // per
            byte = int(data[tuple(stored)])
            return (byte >> ((x[q] % per) * bits)) & ((1 << bits) - 1)
        return float(np.float32(data[x])) if fp else int(data[x])

    def zero_point(b):
        if zero_points is None:
            return 2 ** (bits - 1) if packed_uint8 else 0
        if packed_uint8:
            stored = list(b)
            stored[q] = b[q] // per
            byte = int(zero_points[tuple(stored)])
            return (byte >> ((b[q] % per) * bits)) & ((1 << bits) - 1)
        return int(zero_points[b])

    for pos in np.ndindex(out_shape):
        k = int(indices[pos[g:g + nq]])
        if not -s <= k < s:
            continue  # zeros
        x = pos[:g] + (k % s,) + pos[g + nq:]
        b = list(x)
        b[q] = x[q] // block
        for a in range(r):
            if a != q and scales.shape[a] == 1:
                b[a] = 0  # broadcast (FP8/FP4); also right where data's dim is 1
        b = tuple(b)
        scale = np.float32(scales[b])
        if fp:
            value = np.float32(element(x)) * scale
        else:
            value = np.float32(element(x) - zero_point(b)) * scale
        out[pos] = value  # float32 -> T2: rounded once
    return out
