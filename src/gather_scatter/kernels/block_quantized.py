"""com.microsoft GatherBlockQuantized-1: gather rows of a block-quantized table, dequantized.

Only the gathered rows are read: the indices are normalized first (an index outside
``[-s, s-1]`` selects a row of zeros), the stored codes, scales and zero points of those rows
are taken, and only they are dequantized. Each element is ``T2(float32(q - zero_point) *
float32(scale))`` (FP8/FP4: ``T2(float32(q) * float32(scale))``): one float32 multiply, rounded
once to the output type, as onnxruntime's CPU kernel computes float and float16 (and bfloat16,
which it refuses, by the same rule).

Two paths compute the same values: a numba loop (``_loops_quantized``) for the layouts
onnxruntime's exporters write (the quantize axis last, the gather axis before it: every uint8
table), on ranges of output rows on the pool, so the result is the same for any thread count;
and NumPy on the gathered rows for every other layout or where numba is not installed.
"""

from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple

import numpy as np

from ..resources import threads as _parallel
from ..rules import dims as _dims
from ..rules.dims import ABSENT
from ..rules.quantized import Plan, plan
from ..rules.validate import as_array, check_out
from ..rules.versions import OpVersion
from . import _numba
from ._writes import fresh_output

_module: Any = None


def compiled() -> Any:
    """Return the module of the compiled loop, or None where numba's loops are unavailable."""
    global _module
    if _module is None:
        _module = False
        if _numba.loops() is not None:
            from . import _loops_quantized

            _module = _loops_quantized
    return _module or None


@cache
def code_values(dtype: np.dtype) -> np.ndarray:
    """Return the float32 value of each stored code 0..255 of ``dtype``, read-only.

    uint8: the code itself; int4: -8..7 from its nibble; FP8/FP4: ml_dtypes' exact value.
    """
    codes = np.arange(256, dtype=np.uint8)
    values = codes.astype(np.float32) if dtype == np.uint8 else codes.view(dtype).astype(np.float32)
    values.setflags(write=False)
    return values


def run_gather_block_quantized(
    spec: OpVersion,
    data,
    indices,
    scales,
    zero_points=None,
    gather_axis=0,
    quantize_axis=1,
    block_size=128,
    bits=4,
    out=None,
) -> tuple[np.ndarray, Compiled | Plan]:
    """Run GatherBlockQuantized with NumPy, every check included.

    The kernel behind :func:`gather_scatter.gather_block_quantized` (which documents the
    parameters, result and errors) and ``run_node``. Returns the result and what a call of the
    same signature (dtypes, shapes but the indices', attributes) needs to run without the
    checks: where the compiled loop ran it, its constants for :func:`run_prepared`; else the
    checks' :class:`Plan`, for :func:`run_planned`.
    """
    data = as_array(spec, "data", data)
    indices = as_array(spec, "indices", indices, np.int64)
    scales = as_array(spec, "scales", scales)
    zp = None if zero_points is None else as_array(spec, "zero_points", zero_points)
    p = plan(
        spec,
        data.shape,
        indices.shape,
        scales.shape,
        ABSENT if zp is None else zp.shape,
        dtypes=[data.dtype, indices.dtype, scales.dtype, None if zp is None else zp.dtype],
        gather_axis=gather_axis,
        quantize_axis=quantize_axis,
        block_size=block_size,
        bits=bits,
    )
    shape, dtype = _dims.concrete(p.shape), np.dtype(p.dtype)
    if out is not None:
        inputs = {"data": data, "indices": indices, "scales": scales}
        if zp is not None:
            inputs["zero_points"] = zp
        target = check_out(spec, out, shape, dtype, inputs)
        result = target if target.flags.c_contiguous else fresh_output(spec, shape, dtype)
    else:
        target, result = None, fresh_output(spec, shape, dtype)
    ready = None
    if _numba.loops_for(result.size) is not None:
        ready = prepare(p, data, scales, zp, bits)
    if result.size:
        if ready is not None:
            _compiled_rows(ready, data, indices, scales, zp, result)
        else:
            idx = indices.reshape(-1).astype(np.int64, copy=False)
            _numpy_rows(p, data, idx, scales, zp, bits, result)
    if target is not None and target is not result:
        target[...] = result
    return (result if out is None else out), (p if ready is None else ready)


def run_planned(spec: OpVersion, p: Plan, data, indices, scales, zp, bits: int) -> tuple[np.ndarray, Compiled | None]:
    """Run a call whose signature :func:`run_gather_block_quantized` accepted on its NumPy path.

    The checks' plan ``p`` stands for them (they depend on the signature alone: an index out
    of range is a row of zeros). Where the compiled loop has become available since (numba is
    loaded from a process's 100th call of the kind), it runs the call and its constants come
    back, for :func:`run_prepared` from then on; else None.
    """
    g = p.gather_axis
    assert g is not None
    tail = list(data.shape[g + 1 :])
    if p.per_byte > 1:  # packed uint8: the quantize axis is the last one, unpacked
        tail[-1] *= p.per_byte
    result = fresh_output(spec, (*data.shape[:g], *indices.shape, *tail), np.dtype(p.dtype))
    ready = prepare(p, data, scales, zp, bits) if _numba.loops_for(result.size) is not None else None
    if result.size:
        if ready is not None:
            _compiled_rows(ready, data, indices, scales, zp, result)
        else:
            _numpy_rows(p, data, indices.reshape(-1).astype(np.int64, copy=False), scales, zp, bits, result)
    return result, ready


class Compiled(NamedTuple):
    """A signature's constants for the compiled loop (see :func:`prepare`)."""

    run: Any  # _loops_quantized.dequantize_rows
    params: np.ndarray  # _loops_quantized's slots (read-only: calls on several threads share it)
    values: np.ndarray  # the float32 value of each stored code, then float16/bfloat16 scales' bits'
    lead: tuple[int, ...]  # data.shape[:g]
    tail: tuple[int, ...]  # the output's dims after the indices'
    rows_per_index: int  # M * R: output rows per index (M outer, R inner)
    inner: int  # R
    width: int  # Q, the logical quantize dim
    dtype: np.dtype  # the output's
    u8: bool  # data is uint8 (else viewed as its bytes, as are zero points)
    f32: bool  # scales and output are float32 (else float16/bfloat16: scales read as bits)


def prepare(p: Plan, data, scales, zp, bits) -> Compiled | None:
    """Return the compiled loop's constants for this signature, or None where it does not apply.

    It does not where numba is missing, for a layout other than the quantize axis last and the
    gather axis before it, for inputs not C-contiguous, or scales broadcast on part of a group
    of axes.
    """
    g, q = p.gather_axis, p.quantize_axis
    assert g is not None and q is not None and p.block is not None
    if q != data.ndim - 1 or g >= q or not _grouped(data, scales, g, q) or compiled() is None:
        return None
    if not (data.flags.c_contiguous and scales.flags.c_contiguous and (zp is None or zp.flags.c_contiguous)):
        return None
    loops = compiled()
    M, S = _dims.size(data.shape[:g]), data.shape[g]
    R, Q = _dims.size(data.shape[g + 1 : q]), data.shape[q] * p.per_byte
    # scales grouped as (Ms, Ss, Rs, blocks), each of Ms, Ss, Rs data's or 1 (broadcast):
    # element strides for data's (m, s, r), 0 on a dim of 1
    nb, ms, ss, rs = (
        scales.shape[q],
        _dims.size(scales.shape[:g]),
        scales.shape[g],
        _dims.size(scales.shape[g + 1 : q]),
    )
    st_r = nb if rs > 1 else 0
    st_s = rs * nb if ss > 1 else 0
    st_m = ss * rs * nb if ms > 1 else 0
    params = np.zeros(loops.N_PARAMS, np.int64)
    params[loops.S], params[loops.R], params[loops.Q] = S, R, Q
    params[loops.ST_M], params[loops.ST_S], params[loops.ST_R] = st_m, st_s, st_r
    params[loops.Z_WIDTH] = 0 if zp is None else zp.shape[q]
    params[loops.PER_SHIFT] = p.per_byte.bit_length() - 1
    params[loops.BITS] = bits if p.kind == "uint8" and p.per_byte > 1 else 8
    params[loops.BLOCK] = p.block
    params[loops.ZDEFAULT] = 1 << (bits - 1) if p.kind == "uint8" else 0
    params[loops.IDENTITY] = p.kind == "uint8"
    out = np.dtype(scales.dtype)
    params[loops.OUT_KIND] = (
        loops.FLOAT32 if out == np.float32 else loops.FLOAT16 if out == np.float16 else loops.BFLOAT16
    )
    params.setflags(write=False)
    return Compiled(
        loops.dequantize_rows,
        params,
        _values(data.dtype, scales.dtype),
        data.shape[:g],
        (*data.shape[g + 1 : q], Q),
        M * R,
        R,
        Q,
        out,
        data.dtype == np.uint8,
        out == np.float32,
    )


@cache
def _values(data: np.dtype, scales: np.dtype) -> np.ndarray:
    """Return the compiled loop's value table, read-only.

    :func:`code_values` of data's type, then for float16/bfloat16 scales the exact float32
    value of each of their 65,536 bit patterns: one argument, not two (numba's call costs
    ~55 ns an array; a decode step's call ~4 us in all).
    """
    parts = [code_values(data)]
    if scales != np.float32:
        parts.append(np.arange(1 << 16, dtype=np.uint16).view(scales).astype(np.float32))
    table = np.concatenate(parts)
    table.setflags(write=False)
    return table


def _grouped(data, scales, g: int, q: int) -> bool:
    """Return whether the compiled loop's (M, S, R) view of scales holds.

    That is: scales' axes before the gather axis, and those between it and the quantize axis,
    are each all data's or all broadcast (1).
    """
    for lo, hi in ((0, g), (g + 1, q)):
        d, s = data.shape[lo:hi], scales.shape[lo:hi]
        if s != d and any(x != 1 for x in s):
            return False
    return True


def run_prepared(spec: OpVersion, ready: Compiled, data, indices, scales, zp) -> np.ndarray:
    """Run a call whose signature :func:`run_gather_block_quantized` accepted and prepared.

    Only the output's size is checked, then the loop runs.
    """
    result = fresh_output(spec, (*ready.lead, *indices.shape, *ready.tail), ready.dtype)
    if result.size:
        _compiled_rows(ready, data, indices, scales, zp, result)
    return result


_NO_BYTES = np.empty(0, np.uint8)
_NO_BITS = np.empty(0, np.uint16)
_NO_FLOATS = np.empty(0, np.float32)
_U8, _U16 = np.dtype(np.uint8), np.dtype(np.uint16)


def _compiled_rows(ready: Compiled, data, indices, scales, zp, result) -> None:
    """Run the compiled loop into C-contiguous ``result``.

    Few steps: a decode step's call (one row) takes a few microseconds in all (``ravel``, not
    ``reshape(-1)``: 80 against 140 ns, on arrays the signature says are C-contiguous).
    """
    run, params, values, _, _, per_index, _, width, _, u8, f32 = ready  # one unpacking: ~35 ns an attribute
    idx = indices.ravel()
    if not idx.dtype.isnative:
        idx = idx.astype(idx.dtype.newbyteorder("="))
    if u8:
        src = data.ravel()
        zps = _NO_BYTES if zp is None else zp.ravel()
    else:
        src = data.ravel().view(_U8)
        zps = _NO_BYTES if zp is None else zp.ravel().view(_U8)
    rows = per_index * idx.size
    if f32:
        sc, work, bits16 = scales.ravel(), result.ravel(), _NO_BITS
    else:  # the loop rounds each row from float32 rows of its own
        sc, work, bits16 = scales.ravel().view(_U16), _NO_FLOATS, result.ravel().view(_U16)
    nbytes = rows * width * 4
    if nbytes < 2 * _parallel.MIN_CHUNK_BYTES:  # one thread's work: no hand-off
        run(src, values, idx, sc, zps, work, bits16, params, 0, rows)
        return

    def part(lo: int, hi: int) -> None:
        run(src, values, idx, sc, zps, work, bits16, params, lo, hi)

    _parallel.run(part, _parallel.ranges(rows, nbytes))


def _normalized(idx: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the indices mapped into ``[0, size)`` (out-of-range ones to 0), and the mask of valid ones."""
    wrapped = np.where(idx < 0, idx + size, idx)
    valid = (wrapped >= 0) & (wrapped < size)
    return np.where(valid, wrapped, 0), valid


def _numpy_rows(p: Plan, data, idx, scales, zp, bits, result) -> None:
    g, q, per, block = p.gather_axis, p.quantize_axis, p.per_byte, p.block
    assert g is not None and q is not None and block is not None
    S, Q = data.shape[g], data.shape[q] * per
    rank = data.ndim
    safe, valid = _normalized(idx, S)
    if not S:
        result.fill(0)
        return
    values = code_values(data.dtype)
    qq = q if q != g else None  # the quantize axis in the gathered array (same rank), if expanded

    def codes(array: np.ndarray, width: int | None) -> np.ndarray:
        """Return stored elements as codes (uint8), packed ones unpacked along the last axis."""
        c = array.view(np.uint8)
        if per > 1:
            shifts = (np.arange(per, dtype=np.uint8) * bits).astype(np.uint8)
            c = ((c[..., None] >> shifts) & np.uint8((1 << bits) - 1)).reshape((*c.shape[:-1], -1))
            c = c[..., :width]
        return c

    def along_g(array: np.ndarray) -> np.ndarray:
        if array.shape[g] == 1:  # one row of scales for all (broadcast, or a single block)
            return array
        return np.take(array, safe if qq is not None else safe // block, axis=g)

    def along_q(array: np.ndarray) -> np.ndarray:
        if qq is None:
            return array
        expanded = np.repeat(array, block, axis=qq)
        return expanded[(slice(None),) * qq + (slice(0, Q),)]

    vals = values[codes(np.take(data, safe, axis=g), Q)]
    sc = along_q(along_g(scales)).astype(np.float32)
    if zp is not None:
        zv = along_q(values[codes(along_g(zp), scales.shape[q])])
    else:
        zv = np.float32(1 << (bits - 1) if p.kind == "uint8" else 0)
    # IEEE float32 arithmetic, as the compiled loop's: inf * 0 is NaN and a float16 overflow is
    # inf, without NumPy's warnings (a kernel result, not a user's mistake)
    with np.errstate(invalid="ignore", over="ignore"):
        res = (vals - zv) * sc
        mask = valid.reshape((1,) * g + (idx.size,) + (1,) * (rank - g - 1))
        res = np.where(mask, res, np.float32(0))
        result[...] = res.reshape(result.shape)
