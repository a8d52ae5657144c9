"""float16 and bfloat16 in the compiled reductions: exact conversions to float32 and rounding
back (ties to even, as NumPy and ml_dtypes round), by the CPU's F16C instructions where it has
them, else by bit arithmetic. Part of the module ``_numba.loops()`` returns, through
``_loops_reduce``."""

import llvmlite.binding as llvm
import numba
import numpy as np
from llvmlite import ir
from llvmlite.ir import instructions
from numba.core import config, types
from numba.extending import intrinsic

from . import _loops_cache  # noqa: F401 - every loop's numba cache stamped with all their sources
from ._codes import MAX, MIN, MUL

jit = numba.njit(nogil=True, cache=True)
U32 = np.uint32


def _targets_f16c() -> bool:
    """Whether numba compiles for a CPU with F16C (x86's float16 <-> float32 instructions): the
    host's, or the one ``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES`` name (portable caches)."""
    cpu_name = getattr(config, "CPU_NAME", None)  # set from the environment when numba loads
    if cpu_name is not None:
        return "+f16c" in (getattr(config, "CPU_FEATURES", None) or "")
    return bool(llvm.get_host_cpu_features().get("f16c", False))


F16C = _targets_f16c()


@intrinsic
def _f16c_to_float(typingctx, bits):
    """float16 bits as float32 with the CPU's conversion (LLVM's fpext: vcvtph2ps, 16 lanes at a
    time in a loop). Exact; a signalling NaN comes out quiet, which no reduction can tell: a sum
    or product of a NaN is quiet anyway, and max/min store the operands' own bits."""

    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.uint16), codegen


@intrinsic
def _f16c_bits(typingctx, value):
    """The float16 nearest float32 ``value`` (ties to even) as its bits, with the CPU's
    conversion (LLVM's fptrunc: vcvtps2ph). NumPy's bits for every input but a signalling NaN
    (NumPy keeps it signalling), and the values rounded here are sums and products: never one."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(types.float32), codegen


class _Freeze(instructions.Instruction):
    """LLVM's ``freeze`` (llvmlite's builder has none): its operand as it is, a value the
    optimizer does not look through."""

    def descr(self, buf):
        (operand,) = self.operands
        buf.append(f"freeze {operand.type} {operand.get_reference()}\n")


@intrinsic
def _f16c_to_float_alone(typingctx, bits):
    """:func:`_f16c_to_float` for one element at a time: the bits zero-extended into a whole
    vector register (movzx, vmovd) before vcvtph2ps. The plain scalar fpext loads the bits into
    the low lane of whatever register LLVM picks (vpinsrw), whose other lanes it keeps: each
    conversion then waits on the last instruction that wrote that register, often the last
    update's, and a loop of one-element updates runs at the latency of that chain (300,000 float16
    adds into 16 cells: 6.7x the float32 loop's time, 2.4x this way). The ``freeze`` of the
    zero-extended vector keeps LLVM from folding it back to the scalar form. Not for vector loops:
    LLVM vectorizes the plain form."""

    def codegen(context, builder, signature, args):
        i32, lanes = ir.IntType(32), ir.VectorType(ir.IntType(32), 4)
        zero_extended = builder.insert_element(ir.Constant(lanes, [0] * 4), builder.zext(args[0], i32), i32(0))
        frozen = _Freeze(builder.block, lanes, "freeze", [zero_extended])
        builder._insert(frozen)
        halves = builder.bitcast(frozen, ir.VectorType(ir.HalfType(), 8))
        low = builder.shuffle_vector(halves, halves, ir.Constant(lanes, [0, 1, 2, 3]))
        return builder.extract_element(builder.fpext(low, ir.VectorType(ir.FloatType(), 4)), i32(0))

    return types.float32(types.uint16), codegen


@jit
def _half_to_float(h):
    """float16 bits ``h`` as float32, exact, without a branch (so a loop of them vectorizes):
    ryg's half_to_float. Normal values rebias the exponent; inf and NaN (payload kept) rebias
    it to 255; subnormals and zeros subtract 2**-14 in the FPU."""
    h = U32(h)  # every step wrapped in uint32: numba widens uint32 arithmetic to 64 bits
    o = U32(U32(h & U32(0x7FFF)) << U32(13))
    e = U32(o & U32(0x0F800000))
    o = U32(o + U32(0x38000000))
    o = U32(o + U32(0x38000000)) if e == U32(0x0F800000) else o
    low = U32(o + U32(0x00800000)).view(np.float32) - U32(0x38800000).view(np.float32)
    o = np.float32(low).view(np.uint32) if e == U32(0) else o
    return U32(o | U32(U32(h & U32(0x8000)) << U32(16))).view(np.float32)


@jit
def _bfloat16_to_float(h):
    """bfloat16 bits ``h`` as float32: the top half of its bits."""
    return U32(U32(h) << U32(16)).view(np.float32)


@jit
def _float16_bits(value):
    """The float16 nearest float32 ``value`` (ties to even) as its 16 bits: NumPy's
    ``npy_floatbits_to_halfbits``, so NaN payloads come out as NumPy's float16 arithmetic gives
    them. Normal results take three integer steps (a rebias, a round-to-nearest-even bias,
    a shift; ryg's float_to_half_fast3_rtne), subnormals let the FPU round. Equal to NumPy's on
    all 2**32 inputs (checked exhaustively). Its branches are predictable: one element at a
    time it is 2x faster than the CPU's scalar vcvtps2ph here (10,000 element adds into 16
    cells: 14 against 34 us), so narrow rows round with it."""
    f = np.float32(value).view(np.uint32)
    sign = (f & U32(0x80000000)) >> U32(16)
    f &= U32(0x7FFFFFFF)
    if f >= U32(0x47800000):  # |value| >= 65536, inf or NaN
        if f > U32(0x7F800000):  # NaN: NumPy keeps the payload's top bits, never none
            bits = U32(0x7C00) + ((f & U32(0x007FFFFF)) >> U32(13))
            if bits == U32(0x7C00):
                bits = U32(0x7C01)
            return np.uint16(sign | bits)
        return np.uint16(sign | U32(0x7C00))
    if f < U32(0x38800000):  # a float16 subnormal or zero: adding 0.5 makes the FPU round
        g = np.float32(U32(f).view(np.float32) + np.float32(0.5)).view(np.uint32)
        return np.uint16(sign | (g - U32(0x3F000000)))
    odd = (f >> U32(13)) & U32(1)
    f += U32(0xC8000FFF) + odd  # exponent rebiased by (15 - 127) << 23, 0xFFF + odd: ties to even
    return np.uint16(sign | (f >> U32(13)))


@jit
def _bfloat16_result_bits(value):
    """The bfloat16 nearest a sum or product of two bfloat16 values computed in float32 (ties to
    even, as ml_dtypes rounds), as its 16 bits, without a NaN case: such a NaN is an operand's,
    made quiet, or the CPU's default NaN (x86, ARM), so its low 16 bits are zero, the rounding
    bias carries nothing into them and the top half is that quiet NaN. Five instructions fewer per
    step: 300,000 one-element adds into 16 cells, 2.8x -> 2.0x the float32 loop's time."""
    f = np.float32(value).view(np.uint32)
    return np.uint16(U32(U32(f + U32(0x7FFF) + U32(U32(f >> U32(16)) & U32(1))) >> U32(16)) & U32(0xFFFF))


def _widened(builder, bits, bf_v, width: int):
    """The LLVM IR of ``width`` lanes of float16 (or, ``bf_v`` true, bfloat16) ``bits`` as
    float32 lanes, exact: F16C's conversion, or the bits shifted into a float32's top half."""
    words = ir.VectorType(ir.IntType(32), width)
    floats = ir.VectorType(ir.FloatType(), width)
    as_half = builder.fpext(builder.bitcast(bits, ir.VectorType(ir.HalfType(), width)), floats)
    as_bf16 = builder.bitcast(builder.shl(builder.zext(bits, words), ir.Constant(words, [16] * width)), floats)
    return builder.select(bf_v, as_bf16, as_half)


def _reduced_lanes(builder, x_bits, src_bits, op_v, bf_v, width: int):
    """The LLVM IR of ``f(x, src)`` on ``width`` lanes of float16 (or, ``bf_v`` true, bfloat16)
    bits: the bits to store (see :func:`_row_intrinsic`)."""
    lanes = ir.VectorType(ir.IntType(16), width)
    words = ir.VectorType(ir.IntType(32), width)
    flags = ir.VectorType(ir.IntType(1), width)

    def splat(value: int) -> ir.Constant:
        return ir.Constant(words, [value] * width)

    def code(number):
        return builder.icmp_unsigned("==", op_v, ir.Constant(op_v.type, number))

    a, b = _widened(builder, x_bits, bf_v, width), _widened(builder, src_bits, bf_v, width)
    result = builder.select(code(MUL), builder.fmul(a, b), builder.fadd(a, b))
    half_bits = builder.bitcast(builder.fptrunc(result, ir.VectorType(ir.HalfType(), width)), lanes)
    raw = builder.bitcast(result, words)
    bias = builder.add(splat(0x7FFF), builder.and_(builder.lshr(raw, splat(16)), splat(1)))
    bf16_bits = builder.trunc(builder.lshr(builder.add(raw, bias), splat(16)), lanes)
    rounded = builder.select(bf_v, bf16_bits, half_bits)
    # max/min: x's bits where x wins (x NaN, or float16's tie), else src's
    wins = builder.select(code(MAX), builder.fcmp_ordered(">", a, b), builder.fcmp_ordered("<", a, b))
    tie = builder.and_(
        builder.fcmp_ordered("==", a, b),
        builder.select(bf_v, ir.Constant(flags, [0] * width), ir.Constant(flags, [1] * width)),
    )
    keep = builder.or_(builder.or_(wins, builder.fcmp_unordered("uno", a, a)), tie)
    picked = builder.select(keep, x_bits, src_bits)
    selecting = builder.or_(code(MAX), code(MIN))
    return builder.select(selecting, picked, rounded)


def _data_pointer(context, builder, ty, array):
    return context.make_array(ty)(context, builder, array).data


def _row_intrinsic(width: int):
    """An intrinsic ``row(dst, at, x, xat, src, sat, op, bfloat16)``: ``dst[at:at + width] =
    f(x[xat:xat + width], src[sat:sat + width])`` for float16 (or bfloat16) bits, ``f`` the
    reduction ``op`` (ADD, MUL, MAX, MIN: ``_codes``), the ``width`` elements of a narrow row
    in one vector each way. A sum or product is rounded to nearest even (F16C's conversion, or
    :func:`_bfloat16_result_bits`' arithmetic); max/min keep a NaN in ``x``, give ``src`` on a
    tie (``x`` for float16, as NumPy's half loop does) and store the winner's own bits, as
    ``_loops_reduce._reduce_loop`` does one element at a time. ``op`` and ``bfloat16`` are
    run-time values that are constants where the loop is compiled: LLVM keeps only the code
    they pick."""
    lanes = ir.VectorType(ir.IntType(16), width)

    @intrinsic
    def row(typingctx, dst, at, x, xat, src, sat, op, bfloat16):
        def codegen(context, builder, signature, args):
            dst_a, at_v, x_a, xat_v, src_a, sat_v, op_v, bf_v = args
            arrays = signature.args

            def at_of(position, array, ty):
                data = _data_pointer(context, builder, ty, array)
                return builder.bitcast(builder.gep(data, [position]), lanes.as_pointer())

            x_bits = builder.load(at_of(xat_v, x_a, arrays[2]), align=2)
            src_bits = builder.load(at_of(sat_v, src_a, arrays[4]), align=2)
            result = _reduced_lanes(builder, x_bits, src_bits, op_v, bf_v, width)
            builder.store(result, at_of(at_v, dst_a, arrays[0]), align=2)
            return context.get_dummy_value()

        return types.void(dst, at, x, xat, src, sat, op, bfloat16), codegen

    return row


def _gathered_intrinsic(width: int, columns: int = 0):
    """An intrinsic ``lanes(dst, indices, src, e, base, w, i, size, op, bfloat16) -> bool``:
    ScatterElements' reduction ``op`` of the ``width`` updates ``src[e + k]`` into ``dst[base +
    v_k * w + c_k]``, ``v_k = indices[e + k]`` (negative counting from ``size``), for float16
    (or bfloat16) bits, ``f`` and rounding as for :func:`_row_intrinsic`.

    ``columns`` 0: the updates lie side by side in one index row, in columns ``c_k = i + k``;
    their targets differ by their column, so the spec's order among them is free. ``columns``
    1, 2 or 4 (``w``, with ``i`` 0): the updates span whole rows of that many columns, ``c_k = k
    % columns``; two of one column with the same index would share a target, and the call then
    does nothing and returns False (the caller's one-element loop keeps their order).

    The ``width`` held values are loaded into one vector (four to a general register, not a
    port-5 insert per lane), converted, reduced and rounded (or selected) as one, and stored
    one by one: one element at a time, each takes a conversion each way. Returns False, having
    written nothing, where an index is outside ``[-size, size)`` (the caller's one-element loop
    then finds it), for arrays other than uint16 ones (typed for any, so that a loop of any
    type compiles the call and LLVM drops it) and without F16C."""
    lanes = ir.VectorType(ir.IntType(16), width)
    i1, i32, i64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)

    @intrinsic
    def gathered(typingctx, dst, indices, src, e, base, w, i, size, op, bfloat16):
        def codegen(context, builder, signature, args):
            if signature.args[0].dtype != types.uint16 or not F16C:
                return i1(0)
            e_v, base_v, w_v, i_v, size_v, op_v, bf_v = args[3:]

            def data(k):
                return _data_pointer(context, builder, signature.args[k], args[k])

            kind = context.get_value_type(signature.args[1].dtype)
            # the targets one index at a time in general registers: a vector of them costs a
            # 64-bit vector multiply and an extract per target (port 5, as the loads below)
            index_at, held = data(1), data(0)
            values, targets, refused = [], [], i1(0)
            for k in range(width):
                v = builder.load(builder.gep(index_at, [builder.add(e_v, i64(k))]))
                v = builder.sext(v, i64) if kind.width < 64 else v
                v = builder.add(v, builder.and_(builder.ashr(v, i64(63)), size_v))
                refused = builder.or_(refused, builder.icmp_unsigned(">=", v, size_v))
                column = builder.add(i_v, i64(k % columns if columns else k))
                for j in range(k % columns, k, columns) if columns else ():  # same column, earlier
                    refused = builder.or_(refused, builder.icmp_unsigned("==", v, values[j]))
                values.append(v)
                targets.append(builder.add(builder.add(base_v, builder.mul(v, w_v)), column))
            with builder.if_then(builder.not_(refused), likely=True):
                pointers = [builder.gep(held, [t]) for t in targets]
                per = min(width, 4)  # lanes per word
                word_type = ir.IntType(16 * per)
                words = []
                for q in range(0, width, per):
                    word = word_type(0)
                    for k in range(per):
                        bits = builder.zext(builder.load(pointers[q + k], align=2), word_type)
                        word = builder.or_(word, builder.shl(bits, word_type(16 * k)) if k else bits)
                    words.append(word)
                packed = ir.Constant(ir.VectorType(word_type, width // per), None)
                for q, word in enumerate(words):
                    packed = builder.insert_element(packed, word, i32(q))
                x_bits = builder.bitcast(packed, lanes)
                source = builder.bitcast(builder.gep(data(2), [e_v]), lanes.as_pointer())
                result = _reduced_lanes(builder, x_bits, builder.load(source, align=2), op_v, bf_v, width)
                for k, pointer in enumerate(pointers):
                    builder.store(builder.extract_element(result, i32(k)), pointer, align=2)
            return builder.not_(refused)

        return types.boolean(dst, indices, src, e, base, w, i, size, op, bfloat16), codegen

    return gathered


@intrinsic
def _f16c_nearest(typingctx, value):
    """The float16 nearest float32 ``value`` (ties to even), as float32: vcvtps2ph then
    vcvtph2ps, in vector registers (no general register, no memory between them)."""

    def codegen(context, builder, signature, args):
        return builder.fpext(builder.fptrunc(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.float32), codegen


@jit
def nearest(value, bfloat16):
    """The float16 (``bfloat16`` False; F16C's conversions) or bfloat16 value nearest a sum or
    product of two such values computed in float32, as float32: the rounding a step of the
    spec's loop makes, for a loop that keeps its held values in float32."""
    if bfloat16:
        return _bfloat16_to_float(_bfloat16_result_bits(value))
    return _f16c_nearest(np.float32(value))


@intrinsic
def widened8(typingctx, src, e, bfloat16):
    """``src[e:e + 8]`` (float16, or bfloat16 bits) as a tuple of 8 float32, converted as one
    vector: for a loop of one-element sums and products whose targets may repeat, which then
    converts only the held values one at a time."""
    floats = types.UniTuple(types.float32, 8)

    def codegen(context, builder, signature, args):
        src_a, e_v, bf_v = args
        lanes = ir.VectorType(ir.IntType(16), 8)
        at = builder.gep(_data_pointer(context, builder, signature.args[0], src_a), [e_v])
        values = _widened(builder, builder.load(builder.bitcast(at, lanes.as_pointer()), align=2), bf_v, 8)
        out = context.get_constant_undef(floats)
        for k in range(8):
            out = builder.insert_value(out, builder.extract_element(values, ir.IntType(32)(k)), k)
        return out

    return floats(src, e, bfloat16), codegen


_row2, _row4, _row8, _row16 = (_row_intrinsic(w) for w in (2, 4, 8, 16))
_gathered2, _gathered4, _gathered8 = _gathered_intrinsic(2), _gathered_intrinsic(4), _gathered_intrinsic(8)
# whole rows of 2 or 4 columns, 8 updates at a time
_rows8_2, _rows8_4 = _gathered_intrinsic(8, 2), _gathered_intrinsic(8, 4)
