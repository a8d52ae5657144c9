"""The numba loop behind GatherBlockQuantized (this module imports numba: import it lazily,
through :func:`gather_scatter.kernels.block_quantized.compiled`).

One call dequantizes the output rows ``[lo, hi)`` of a layout where the quantize axis is the
last one and the gather axis comes before it: data is read as ``(M, S, R, Qp)`` stored
elements (``Qp = ceil(Q / per)`` bytes of ``per`` logical elements each, low-order bits first),
the output as ``(M, K, R, Q)`` float32. Only the gathered rows are read: their codes, their
scales (float32, or float16/bfloat16 bits through an exact table) and their zero points.
"""

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

jit = numba.njit(nogil=True, cache=True)
u64 = np.uint64
u32 = np.uint32

# params' slots (an int64 array: numba's call costs per argument)
S, R, Q, ST_M, ST_S, ST_R, Z_WIDTH, PER_SHIFT, BITS, BLOCK, ZDEFAULT, IDENTITY, OUT_KIND = range(13)
N_PARAMS = 13
FLOAT32, FLOAT16, BFLOAT16 = 0, 1, 2  # OUT_KIND's values


def scale_at(scales, x, table):  # pragma: no cover - replaced by the overload in compiled code
    raise NotImplementedError


@overload(scale_at)
def _scale_at(scales, x, table):
    """float32 scales are read as they are; float16/bfloat16 ones as uint16 bits through
    ``table`` (their exact float32 values)."""
    if isinstance(scales.dtype, types.Float):
        return lambda scales, x, table: scales[x]
    return lambda scales, x, table: table[scales[x]]


@jit
def half_bits(f):  # pragma: no cover - compiled
    """float32 bits -> float16 bits, rounded to nearest even (NumPy's own conversion, step
    for step: overflow to inf, NaN payloads kept, subnormals rounded once)."""
    h_sgn = (f & u32(0x80000000)) >> u32(16)
    f_exp = f & u32(0x7F800000)
    if f_exp >= u32(0x47800000):
        if f_exp == u32(0x7F800000):
            f_sig = f & u32(0x007FFFFF)
            if f_sig != 0:
                ret = u32(0x7C00) + (f_sig >> u32(13))
                if ret == u32(0x7C00):
                    ret += u32(1)
                return np.uint16(h_sgn + ret)
        return np.uint16(h_sgn + u32(0x7C00))
    if f_exp <= u32(0x38000000):
        if f_exp < u32(0x33000000):
            return np.uint16(h_sgn)
        e = f_exp >> u32(23)
        f_sig = u32(0x00800000) + (f & u32(0x007FFFFF))
        f_sig >>= u32(113) - e
        if (f_sig & u32(0x00003FFF)) != u32(0x00001000) or (f & u32(0x000007FF)) != 0:
            f_sig += u32(0x00001000)
        return np.uint16(h_sgn + (f_sig >> u32(13)))
    h_exp = (f_exp - u32(0x38000000)) >> u32(13)
    f_sig = f & u32(0x007FFFFF)
    if (f_sig & u32(0x00003FFF)) != u32(0x00001000):
        f_sig += u32(0x00001000)
    return np.uint16(h_sgn + h_exp + (f_sig >> u32(13)))


@jit
def bfloat16_bits(f):  # pragma: no cover - compiled
    """float32 bits -> bfloat16 bits, rounded to nearest even (ml_dtypes' conversion: a NaN
    becomes the quiet NaN of its sign)."""
    if (f & u32(0x7FFFFFFF)) > u32(0x7F800000):
        return np.uint16(0xFFC0) if f >> u32(31) else np.uint16(0x7FC0)
    return np.uint16((f + u32(0x7FFF) + ((f >> u32(16)) & u32(1))) >> u32(16))


@jit
def round_into(work, dst, start, n, kind):  # pragma: no cover - compiled
    """``dst[start + j]`` = bits of ``work[j]`` rounded once to float16 or bfloat16.

    One branch-free pass (it vectorizes) computes what the usual case gives (float16: zero or
    a normal result; bfloat16: not NaN) and notes any other value; only then a second pass
    gives those the full conversions above, so the result is theirs bit for bit.
    """
    bits = work.view(np.uint32)
    at = u64(start)
    other = u32(0)
    if kind == FLOAT16:
        for j in range(u64(n)):
            f = bits[j]
            a = f & u32(0x7FFFFFFF)
            h = (a - u32(0x38000000) + u32(0xFFF) + ((a >> u32(13)) & u32(1))) >> u32(13)
            h = h if a >= u32(0x33000000) else u32(0)
            dst[at + j] = np.uint16(h | ((f >> u32(16)) & u32(0x8000)))
            other |= u32(a >= u32(0x33000000)) & (u32(a < u32(0x38800000)) | u32(a >= u32(0x47800000)))
        if other:
            for j in range(u64(n)):
                a = bits[j] & u32(0x7FFFFFFF)
                if a >= u32(0x33000000) and (a < u32(0x38800000) or a >= u32(0x47800000)):
                    dst[at + j] = half_bits(bits[j])
    else:
        for j in range(u64(n)):
            f = bits[j]
            dst[at + j] = np.uint16((f + u32(0x7FFF) + ((f >> u32(16)) & u32(1))) >> u32(16))
            other |= u32((f & u32(0x7FFFFFFF)) > u32(0x7F800000))
        if other:
            for j in range(u64(n)):
                if (bits[j] & u32(0x7FFFFFFF)) > u32(0x7F800000):
                    dst[at + j] = bfloat16_bits(bits[j])


@jit
def dequantize_rows(src, lut, idx, scales, table, zps, work, dst16, p, lo, hi):  # pragma: no cover - compiled
    """Fill output rows ``[lo, hi)`` (rows of ``p[Q]`` elements), ``idx.size`` per (m, r).

    float32 output (``p[OUT_KIND]``): written into ``work``, the flat output. float16 or
    bfloat16: each row is dequantized into ``work`` (one row of float32), then rounded once
    into ``dst16``, the flat output's uint16 bits.

    ``src``: data's stored elements as uint8, flat C order. ``lut``: float32 value of each
    stored code (a nibble's, a byte's; ``p[IDENTITY]``: the code itself, uint8 data).
    ``idx``: the indices, flat (int32 or int64). ``scales``: the whole table, flat, element
    strides ``p[ST_M], p[ST_S], p[ST_R]`` for data's (m, s, r) (0 on an FP8/FP4 broadcast
    axis), blocks contiguous; float32, or uint16 bits read through ``table``. ``zps``: the zero
    points' stored bytes, ``p[Z_WIDTH]`` per (m, s, r) row (empty: ``p[ZDEFAULT]``), packed
    like data. Out-of-range indices give rows of +0.0.
    """
    size, rr, q, kk = p[S], p[R], p[Q], idx.size
    per_shift, bits, block = p[PER_SHIFT], p[BITS], p[BLOCK]
    qp = (q + (1 << per_shift) - 1) >> per_shift
    nb = (q + block - 1) // block
    pmask = (1 << per_shift) - 1
    mask = (1 << bits) - 1
    zwidth = p[Z_WIDTH]
    has_zp = zps.size > 0
    identity = p[IDENTITY] != 0
    zdefault = np.float32(p[ZDEFAULT])
    kind = p[OUT_KIND]
    for row in range(lo, hi):
        r = row % rr
        k = (row // rr) % kk
        m = row // (rr * kk)
        i = np.int64(idx[k])
        if i < 0:
            i += size
        if i < 0 or i >= size:
            for j in range(u64(q)):
                if kind == FLOAT32:
                    work[u64(row * q) + j] = np.float32(0.0)
                else:
                    dst16[u64(row * q) + j] = np.uint16(0)
            continue
        # positions as uint64 from here: numba then skips its negative-index wraparound on every
        # access (10x on the 4-bit loop)
        stored = u64((m * size + i) * rr + r)
        base = stored * u64(qp)
        srow = u64(m * p[ST_M] + i * p[ST_S] + r * p[ST_R])
        out = u64(row * q) if kind == FLOAT32 else u64(0)
        for b in range(u64(nb)):
            s = np.float32(scale_at(scales, srow + b, table))
            if has_zp:
                zb = zps[stored * u64(zwidth) + (b >> u64(per_shift))]
                z = lut[(zb >> ((b & u64(pmask)) * u64(bits))) & u64(mask)]
            else:
                z = zdefault
            j0 = b * u64(block)
            j1 = min(u64(q), j0 + u64(block))
            if identity and per_shift == 1:  # 4-bit: two per byte, low nibble first (j0 is even)
                half = (j1 - j0) >> u64(1)
                at = base + (j0 >> u64(1))
                to = out + j0
                for t in range(half):
                    byte = src[at + t]
                    work[to + u64(2) * t] = (np.float32(byte & np.uint8(15)) - z) * s
                    work[to + u64(2) * t + u64(1)] = (np.float32(byte >> np.uint8(4)) - z) * s
                if (j1 - j0) & u64(1):
                    work[out + j1 - u64(1)] = (np.float32(src[at + half] & np.uint8(15)) - z) * s
            elif identity and per_shift == 0:
                for j in range(j0, j1):
                    work[out + j] = (np.float32(src[base + j]) - z) * s
            else:
                for j in range(j0, j1):
                    code = (src[base + (j >> u64(per_shift))] >> ((j & u64(pmask)) * u64(bits))) & u64(mask)
                    work[out + j] = (lut[code] - z) * s
        if kind != FLOAT32:
            round_into(work, dst16, row * q, q, kind)
