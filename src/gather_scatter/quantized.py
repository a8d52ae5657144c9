"""Quantized gathers: com.microsoft GatherBlockQuantized-1.

The embedding lookup of 4- and 8-bit language models, as onnxruntime-genai's model builder,
onnxruntime's quantizer and Olive write it.
"""

from __future__ import annotations

from typing import Any

from ._calls import run_gather_block_quantized
from ._types import NDArray
from .rules.versions import GATHER_BLOCK_QUANTIZED

__all__ = ["gather_block_quantized"]


def gather_block_quantized(
    data: Any,
    indices: Any,
    scales: Any,
    zero_points: Any = None,
    *,
    gather_axis: int = 0,
    quantize_axis: int = 1,
    block_size: int = 128,
    bits: int = 4,
    out: NDArray | None = None,
) -> NDArray:
    """com.microsoft GatherBlockQuantized-1: gather slices of a block-quantized table, dequantized.

    Only the gathered slices are read and dequantized, never the whole table. With ``g`` the
    gather axis, ``q`` the quantize axis and ``B`` the block size, each output element is
    ``(data[x] - zero_points[b(x)]) * scales[b(x)]`` for the data element ``x`` it comes from,
    where ``b(x)`` is ``x`` with its ``q`` coordinate divided by ``B``; an index outside
    ``[-s, s-1]`` gives a slice of zeros (not an error).

    Parameters
    ----------
    data : ndarray, rank r >= 1
        The quantized table (T1): uint8 holding ``8 / bits`` elements per byte along the last
        axis, low-order bits first (``bits`` 2 or 4; one per byte for 8); ml_dtypes ``int4`` or
        ``uint4`` (one element per byte, the logical shape); FP8 (``float8_e4m3fn``,
        ``float8_e4m3fnuz``, ``float8_e5m2``, ``float8_e5m2fnuz``) or FP4 (``float4_e2m1fn``).
    indices : ndarray of int32 or int64, any shape (Q...), rank 0 allowed
        Positions along ``gather_axis``; negatives count from the end (``-1`` is the last
        row); values outside ``[-s, s-1]`` select zeros.
    scales : ndarray of float32, float16 or bfloat16 (T2), rank r
        One scale per block: ``scales.shape[q] = ceil(n / B)`` for the quantize axis of ``n``
        logical elements (uint8 packed: ``data.shape[q] * 8 / bits``), data's dims elsewhere;
        for FP8/FP4 data a dim of 1 off the quantize axis broadcasts. Its dtype is the output's.
    zero_points : ndarray of data's dtype, optional
        One per block, scales' shape; for uint8 with ``bits < 8`` packed like data along the
        quantize axis (``ceil(scales.shape[q] / (8 / bits))`` bytes). Default ``2**(bits-1)``
        for uint8, 0 for int4/uint4. Never given for FP8/FP4 (symmetric).
    gather_axis : int, default 0
        In ``[-r, r-1]``; 0 for uint8 data.
    quantize_axis : int, default 1
        In ``[-r, r-1]``; for uint8 data the last axis, distinct from ``gather_axis``
        (int4/uint4/FP8/FP4: any axis, the gather axis included).
    block_size : int, default 128
        A power of 2 >= 16; for FP8/FP4 also 0, one block spanning the quantize axis.
    bits : int, default 4
        2, 4 or 8 for uint8 data, 4 for int4/uint4; ignored for FP8/FP4.
    out : ndarray, optional
        Where to write the result: writeable, of exactly the output's shape and dtype, sharing
        no memory with an input.

    Returns
    -------
    ndarray, shape data.shape[:g] + indices.shape + data.shape[g+1:], dtype of scales
        For packed uint8 the last dim is unpacked (``x 8 / bits``). ``out`` itself when given.

    Raises
    ------
    DTypeError
        A type the schema does not allow for an input (data: T1, indices: int32/int64, scales:
        float/float16/bfloat16, zero_points: data's type), or an input of another array
        library (this operator runs on NumPy only).
    InvalidAttributeError
        ``bits`` or ``block_size`` not accepted for data's type, an axis outside ``[-r, r-1]``,
        uint8 data with ``gather_axis != 0`` or ``quantize_axis`` not the last axis.
    ShapeError
        data a scalar; scales or zero_points of the wrong rank, or a dim that does not match
        (the message names the axis, the value and what it must be).
    ArityError
        zero_points given for FP8/FP4 data.

    Notes
    -----
    Implements com.microsoft GatherBlockQuantized-1 (onnxruntime's contrib operators,
    https://github.com/microsoft/onnxruntime/blob/main/docs/ContribOperators.md), as its
    schema and CPU kernel define it. In the unpacked index space, for every output position::

        for (j_0..j_{g-1}, i..., j_{g+1}..j_{r-1}) in output positions:
            k = indices[i...]
            if not -s <= k < s: output[...] = 0; continue
            x = (j_0..j_{g-1}, k mod s, j_{g+1}..j_{r-1})
            b = x with b[q] = x[q] // B (0 on an FP8/FP4 broadcast axis of scales)
            zp = zero_points[b] if given else (2**(bits-1) if uint8 else 0)
            output[...] = T2(float32(data[x] - zp) * float32(scales[b]))

    Precision: the difference is exact, the product is one float32 multiply, rounded once to
    the output type (nearest even). onnxruntime's CPU kernel computes float and float16 this
    way (equal bit for bit); bfloat16, which it refuses, follows the same rule. Results do not
    depend on the thread count.

    Examples
    --------
    >>> import numpy as np
    >>> data = np.array([[0x10, 0x32], [0xF8, 0x7F]], dtype=np.uint8)  # 2 rows of 4 nibbles
    >>> scales = np.array([[0.5], [2.0]], dtype=np.float32)  # one block of 16 (partial) per row
    >>> gather_block_quantized(data, np.array([1, 0, 5]), scales, block_size=16)
    array([[ 0. , 14. , 14. , -2. ],
           [-4. , -3.5, -3. , -2.5],
           [ 0. ,  0. ,  0. ,  0. ]], dtype=float32)
    """
    return run_gather_block_quantized(
        GATHER_BLOCK_QUANTIZED,
        data,
        indices,
        scales,
        zero_points,
        gather_axis=gather_axis,
        quantize_axis=quantize_axis,
        block_size=block_size,
        bits=bits,
        out=out,
    )
