"""The numba loop behind GatherBlockQuantized (this module imports numba: import it lazily,
through :func:`gather_scatter.kernels.block_quantized.compiled`).

One call dequantizes the output rows ``[lo, hi)`` of a layout where the quantize axis is the
last one and the gather axis comes before it: data is read as ``(M, S, R, Qp)`` stored
elements (``Qp = ceil(Q / per)`` bytes of ``per`` logical elements each, low-order bits first),
the output as ``(M, K, R, Q)`` float32. Only the gathered rows are read: their codes, their
scales (float32, or float16/bfloat16 bits through an exact table) and their zero points.

uint8 tables (2, 4 or 8 bits a code) are dequantized 16 codes at a time by one vector of LLVM's
(``_chunk16``): a block is 16 to a few hundred codes, too short for LLVM's loop vectorizer
on numba's loops (it vectorizes long loops only, several vectors an iteration, after runtime
checks that the output does not overlap the table), which ran them one element at a time
(0.3-1.0 ns an element, now 0.14-0.18 on an AVX-512 CPU). float16 output is rounded
in the same vector by the CPU's conversion where it has one (x86's F16C), else row by row by
bit arithmetic (:func:`round_into`). Every other layout (int4, FP8/FP4 codes through their
value table, a partial last block's tail) takes the scalar loop.
"""

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic, overload

from . import _loops_cache  # noqa: F401 - every loop's numba cache stamped with all their sources
from ._loops import _prefetch
from ._loops_half import F16C, _f16c_bits

jit = numba.njit(nogil=True, cache=True)
u64 = np.uint64
u32 = np.uint32

# params' slots (an int64 array: numba's call costs per argument)
S, R, Q, ST_M, ST_S, ST_R, Z_WIDTH, PER_SHIFT, BITS, BLOCK, ZDEFAULT, IDENTITY, OUT_KIND = range(13)
N_PARAMS = 13
FLOAT32, FLOAT16, BFLOAT16 = 0, 1, 2  # OUT_KIND's values
AHEAD = 4  # rows


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


def _chunk16(bits: int, half: bool):
    """An intrinsic ``(src, at, dst, to, z, s)``: the 16 codes stored from ``src[at]`` (bytes,
    ``bits`` each, low-order bits first: 16, 8 or 4 bytes), dequantized as
    ``(float32(code) - z) * s`` into ``dst[to:to + 16]``, float32 or (``half``) float16 bits
    rounded by the CPU's conversion (F16C's vcvtps2ph: NumPy's rounding for every non-signalling
    value, and a product is never a signalling NaN). One vector of 16 lanes, in LLVM's own
    vector types: a chunk is too short for numba's loops to vectorize (no alias information)."""
    lanes = 16
    i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
    v32, vf = ir.VectorType(i32, lanes), ir.VectorType(ir.FloatType(), lanes)

    def splat(builder, value, vtype):
        one = builder.insert_element(ir.Constant(vtype, ir.Undefined), value, i32(0))
        return builder.shuffle_vector(one, ir.Constant(vtype, ir.Undefined), ir.Constant(v32, [0] * lanes))

    @intrinsic
    def chunk(typingctx, src, at, dst, to, z, s):
        def codegen(context, builder, signature, args):
            source = context.make_array(signature.args[0])(context, builder, args[0]).data
            target = context.make_array(signature.args[2])(context, builder, args[2]).data
            start = builder.gep(source, [args[1]])
            if bits == 8:
                raw = builder.load(builder.bitcast(start, ir.VectorType(i8, lanes).as_pointer()), align=1)
                codes = builder.zext(raw, v32)
            elif bits == 4:  # 8 bytes: 16 nibbles
                v64 = ir.VectorType(i64, lanes)
                word = builder.load(builder.bitcast(start, i64.as_pointer()), align=1)
                shifted = builder.lshr(splat(builder, word, v64), ir.Constant(v64, [4 * t for t in range(lanes)]))
                codes = builder.and_(builder.trunc(shifted, v32), ir.Constant(v32, [15] * lanes))
            else:  # 4 bytes: 16 2-bit codes
                word = builder.load(builder.bitcast(start, i32.as_pointer()), align=1)
                shifted = builder.lshr(splat(builder, word, v32), ir.Constant(v32, [2 * t for t in range(lanes)]))
                codes = builder.and_(shifted, ir.Constant(v32, [3] * lanes))
            values = builder.fmul(
                builder.fsub(builder.sitofp(codes, vf), splat(builder, args[4], vf)), splat(builder, args[5], vf)
            )
            at_out = builder.gep(target, [args[3]])
            if half:
                v16 = ir.VectorType(ir.IntType(16), lanes)
                bits16 = builder.bitcast(builder.fptrunc(values, ir.VectorType(ir.HalfType(), lanes)), v16)
                builder.store(bits16, builder.bitcast(at_out, v16.as_pointer()), align=2)
            else:
                builder.store(values, builder.bitcast(at_out, vf.as_pointer()), align=4)
            return context.get_dummy_value()

        return types.void(src, types.uint64, dst, types.uint64, types.float32, types.float32), codegen

    return chunk


CHUNK2, CHUNK4, CHUNK8 = _chunk16(2, False), _chunk16(4, False), _chunk16(8, False)
CHUNK2_HALF, CHUNK4_HALF, CHUNK8_HALF = _chunk16(2, True), _chunk16(4, True), _chunk16(8, True)


@jit
def dequantize_rows(src, values, idx, scales, zps, work, dst16, p, lo, hi):  # pragma: no cover - compiled
    """Fill output rows ``[lo, hi)`` (rows of ``p[Q]`` elements), ``idx.size`` per (m, r).

    float32 output (``p[OUT_KIND]``): written into ``work``, the flat output. float16 or
    bfloat16 (``work`` unused): each row is dequantized into a row of float32 of its own, then
    rounded once into ``dst16``, the flat output's uint16 bits; float16 from uint8 codes on a
    CPU with F16C: rounded in the chunks' vectors, straight into ``dst16``.

    ``src``: data's stored elements as uint8, flat C order. ``values``: the float32 value of
    each stored code 0..255 (a nibble's, a byte's; ``p[IDENTITY]``: the code itself, uint8
    data), then (float16/bfloat16 scales) the exact float32 value of each of their 65,536 bit
    patterns.
    ``idx``: the indices, flat (int32 or int64). ``scales``: the whole table, flat, element
    strides ``p[ST_M], p[ST_S], p[ST_R]`` for data's (m, s, r) (0 on an FP8/FP4 broadcast
    axis), blocks contiguous; float32, or uint16 bits read through ``values[256:]``. ``zps``: the zero
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
    # the vector path: uint8 codes of 2, 4 or 8 bits, whole chunks of 16 codes
    width = bits if identity and bits << per_shift == 8 else 0
    direct = kind == FLOAT16 and F16C and width != 0  # float16 written by the chunks themselves
    lut, table = values[:256], values[256:]
    if kind != FLOAT32 and not direct:
        work = np.empty(q, np.float32)  # a row's float32 values, then rounded
    # (m, k, r) of row lo, then stepped row by row: no division per row
    r = lo % rr
    k = (lo // rr) % kk
    m = lo // (rr * kk)
    ahead = AHEAD if rr == 1 and qp >= 256 else 0  # long rows: their lines are asked for ahead
    for row in range(lo, hi):
        if ahead and row + ahead < hi:
            k2 = k + ahead
            m2 = m
            while k2 >= kk:
                k2 -= kk
                m2 += 1
            i2 = np.int64(idx[k2])
            if i2 < 0:
                i2 += size
            if 0 <= i2 < size:
                stored2 = u64(m2 * size + i2)
                first = stored2 * u64(qp)
                for line in range(first - (first & u64(63)), first + u64(qp), u64(64)):
                    _prefetch(src, line)
                _prefetch(scales, u64(m2 * p[ST_M] + i2 * p[ST_S]))
                if has_zp:
                    _prefetch(zps, stored2 * u64(zwidth))
        i = np.int64(idx[k])
        if i < 0:
            i += size
        if i < 0 or i >= size:
            if kind == FLOAT32:
                for j in range(u64(q)):
                    work[u64(row * q) + j] = np.float32(0.0)
            else:
                for j in range(u64(q)):
                    dst16[u64(row * q) + j] = np.uint16(0)
        else:
            stored = u64((m * size + i) * rr + r)
            base = stored * u64(qp)
            srow = u64(m * p[ST_M] + i * p[ST_S] + r * p[ST_R])
            out = u64(row * q) if kind == FLOAT32 or direct else u64(0)
            for b in range(u64(nb)):
                s = np.float32(scale_at(scales, srow + b, table))
                if has_zp:
                    zb = zps[stored * u64(zwidth) + (b >> u64(per_shift))]
                    z = lut[(zb >> ((b & u64(pmask)) * u64(bits))) & u64(mask)]
                else:
                    z = zdefault
                j0 = b * u64(block)
                j1 = min(u64(q), j0 + u64(block))
                tail = j0
                if width != 0:
                    step = u64(16 >> per_shift)  # stored bytes a chunk
                    at = base + (j0 >> u64(per_shift))
                    while tail + u64(16) <= j1:
                        if direct:
                            if width == 2:
                                CHUNK2_HALF(src, at, dst16, out + tail, z, s)
                            elif width == 4:
                                CHUNK4_HALF(src, at, dst16, out + tail, z, s)
                            else:
                                CHUNK8_HALF(src, at, dst16, out + tail, z, s)
                        elif width == 2:
                            CHUNK2(src, at, work, out + tail, z, s)
                        elif width == 4:
                            CHUNK4(src, at, work, out + tail, z, s)
                        else:
                            CHUNK8(src, at, work, out + tail, z, s)
                        tail += u64(16)
                        at += step
                for j in range(tail, j1):  # the rest: a partial last block's tail, other layouts
                    code = (src[base + (j >> u64(per_shift))] >> ((j & u64(pmask)) * u64(bits))) & u64(mask)
                    value = (lut[code] - z) * s
                    if direct:
                        dst16[out + j] = _f16c_bits(value)
                    else:
                        work[out + j] = value
            if direct:
                pass  # rounded in the chunks
            elif kind == FLOAT16 and F16C:
                at = u64(row * q)
                for j in range(u64(q)):
                    dst16[at + j] = _f16c_bits(work[j])
            elif kind != FLOAT32:
                round_into(work, dst16, row * q, q, kind)
        r += 1
        if r == rr:
            r = 0
            k += 1
            if k == kk:
                k = 0
                m += 1
