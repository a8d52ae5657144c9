"""Random cases for com.microsoft GatherBlockQuantized-1, valid and invalid (issue 27).

Its inputs are not one data type's: ``data`` and ``zero_points`` are T1 (uint8 packed with
``bits`` 2, 4 or 8, int4, uint4, the four FP8 types, FP4), ``scales`` and the output T2 (float,
float16, bfloat16). The schema says ``data``, ``scales`` and ``zero_points`` are constants, so a
case puts them in the one-node model as initializers (``Case.constants``); ``indices`` stays a
feed (int32 or int64 only: what every engine's Python API takes).

Valid cases (:func:`valid_case`) interleave T1 x T2 x index type so that any ten consecutive
ones cover every T1 and every T2, and draw the rest: each axis pair the type allows (uint8:
gather 0, quantize last; the others any pair, equal ones included, negative spellings too),
block sizes 16 to 256 (0 for FP8/FP4), quantize dims that end in a partial block, zero points
given and absent, FP scales broadcast along other axes, indices of rank 0 to 2 with
out-of-range ids (which give rows of zeros). Invalid cases (:func:`invalid_cases`) break one
schema rule each, with the error class ``run_node`` raises.
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from .. import errors
from . import case_values as C

__all__ = ["COMBINATIONS", "INVALID_KINDS", "T1", "T2", "invalid_cases", "valid_case", "valid_cases"]

#: (T1 name, bits) variants: packed uint8 at each width, then the others (bits 4, ignored for FP).
T1: tuple[tuple[str, int], ...] = (
    ("uint8", 2),
    ("uint8", 4),
    ("uint8", 8),
    ("int4", 4),
    ("uint4", 4),
    ("float8e4m3fn", 4),
    ("float8e4m3fnuz", 4),
    ("float8e5m2", 4),
    ("float8e5m2fnuz", 4),
    ("float4e2m1", 4),
)
T2 = ("float", "float16", "bfloat16")
FP = frozenset({"float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1"})
BLOCKS = (16, 32, 64, 128, 256)
CONSTANTS = (0, 2, 3)  # data, scales, zero_points: initializers of the one-node model


def _combination(i: int) -> tuple[tuple[str, int], str, str]:
    """Return the i-th (T1 variant, T2, index type): all 60 in i < 60, each T1 and T2 in any 10 in a row."""
    i %= len(T1) * len(T2) * 2
    index = ("int32", "int64")[(i // len(T1) + i) % 2]
    return T1[i % len(T1)], T2[i % len(T2)], index


COMBINATIONS = tuple(_combination(i) for i in range(len(T1) * len(T2) * 2))


def _codes(rng: np.random.Generator, t1: str, bits: int, shape: tuple[int, ...]) -> np.ndarray:
    """Return stored T1 values of ``shape`` (for uint8: bytes, each holding ``8 / bits`` codes)."""
    n = math.prod(shape)
    if t1 == "uint8":
        return rng.integers(0, 256, n, dtype=np.uint8).reshape(shape)
    if t1 == "int4":
        return rng.integers(-8, 8, n).astype(ml_dtypes.int4).reshape(shape)
    if t1 == "uint4":
        return rng.integers(0, 16, n).astype(ml_dtypes.uint4).reshape(shape)
    dtype = C.DTYPES[t1]
    high = 16 if t1 == "float4e2m1" else 256  # every bit pattern: NaN and infinities included
    bits_ = rng.integers(0, high, n, dtype=np.uint8)
    if rng.random() < 0.5:  # small exact values, most of the time
        return C.values(rng, t1, shape)
    return bits_.view(dtype).reshape(shape)


def _scales(rng: np.random.Generator, t2: str, shape: tuple[int, ...]) -> np.ndarray:
    special = rng.random() < 0.2
    return C.values(rng, t2, shape, special=special) * np.asarray(0.25, dtype=C.DTYPES[t2])


def _indices(rng: np.random.Generator, size: int, index: str, out_of_range: bool) -> np.ndarray:
    """Return indices of rank 0 to 2 into an axis of ``size``; some out of range (zeros) where asked."""
    rank = int(rng.choice([0, 1, 1, 1, 2]))
    shape = tuple(int(rng.integers(1, 4)) for _ in range(rank)) if rank != 1 else (int(rng.integers(1, 7)),)
    dtype = C.INDEX_DTYPES[index]
    flat = rng.integers(-size, size, math.prod(shape)) if size else np.zeros(math.prod(shape), np.int64)
    if out_of_range or not size:
        info = np.iinfo(dtype)
        far = [size, size + 1000, -size - 1, int(info.max), int(info.min)]
        mask = rng.random(flat.size) < 0.4 if size else np.ones(flat.size, bool)
        if mask.any():
            flat = flat.copy()
            flat[mask] = rng.choice(far, int(mask.sum()))
    return flat.astype(dtype).reshape(shape)


def _layout(rng: np.random.Generator, t1: str) -> tuple[int, int, int]:
    """(rank, gather_axis, quantize_axis) as the attributes spell them (negative sometimes)."""
    if t1 == "uint8":
        rank = int(rng.integers(2, 4))
        return rank, 0, -1 if rng.random() < 0.4 else rank - 1
    rank = int(rng.integers(1, 4))
    g, q = int(rng.integers(rank)), int(rng.integers(rank))
    g = g - rank if rng.random() < 0.2 else g
    q = q - rank if rng.random() < 0.2 else q
    return rank, g, q


def valid_case(
    rng: np.random.Generator, t1: str, bits: int, t2: str, index: str, *, zero_points: bool | None = None
) -> C.Case:
    """Return a valid GatherBlockQuantized-1 case of these types; the rest drawn from ``rng``.

    ``zero_points``: given or not (default: half the time, for the integer types; never FP8/FP4).
    """
    fp = t1 in FP
    rank, g, q = _layout(rng, t1)
    qa = q % rank
    per = 8 // bits if t1 == "uint8" else 1
    block = 0 if fp and rng.random() < 0.25 else int(rng.choice(BLOCKS, p=[0.35, 0.25, 0.2, 0.1, 0.1]))
    shape = [int(rng.integers(1, 5)) for _ in range(rank)]
    # the quantize axis: 0 to 2 whole blocks and, most of the time, a partial one
    whole = int(rng.integers(0, 3)) if block else 0
    size = (block or 64) * whole + (int(rng.integers(1, (block or 64) + 1)) if whole == 0 or rng.random() < 0.7 else 0)
    if t1 == "uint8":
        size = max(1, -(-size // per))  # stored bytes; the logical dim is size * per
    shape[qa] = size
    if qa != g % rank:
        shape[g % rank] = int(rng.integers(1, 9))
    logical = size * per
    effective = block or logical
    sshape = list(shape)
    sshape[qa] = -(-logical // effective)
    if fp:
        for a in range(rank):
            if a != qa and rng.random() < 0.4:
                sshape[a] = 1  # broadcast
    data = _codes(rng, t1, bits, tuple(shape))
    scales = _scales(rng, t2, tuple(sshape))
    indices = _indices(rng, shape[g % rank], index, out_of_range=rng.random() < 0.5)
    inputs = [data, indices, scales]
    if zero_points is None:
        zero_points = rng.random() < 0.5
    if zero_points and not fp:
        zshape = list(sshape)
        if per > 1:
            zshape[qa] = -(-sshape[qa] // per)
        inputs.append(_codes(rng, t1, bits, tuple(zshape)))
    attrs: dict[str, Any] = {"gather_axis": g, "quantize_axis": q, "block_size": block}
    if t1 == "uint8" or rng.random() < 0.3:
        attrs["bits"] = bits
    return C.Case("GatherBlockQuantized", inputs, attrs, constants=CONSTANTS)


def valid_cases(rng: np.random.Generator, per_combination: int = 1):
    """Yield ``per_combination`` valid cases of each (T1, T2, index type), interleaved (see :data:`COMBINATIONS`)."""
    for _ in range(per_combination):
        for (t1, bits), t2, index in COMBINATIONS:
            yield valid_case(rng, t1, bits, t2, index)


def _with(case: C.Case, inputs: list | None = None, **attrs: Any) -> C.Case:
    return C.Case(
        case.op, list(case.inputs if inputs is None else inputs), {**case.attrs, **attrs}, constants=case.constants
    )


def _base(rng: np.random.Generator, t1: str, bits: int, t2: str, index: str, *, zero_points: bool = False) -> C.Case:
    """Return a valid case of rank >= 2 with non-empty indices, to break one rule of."""
    for _ in range(100):
        case = valid_case(rng, t1, bits, t2, index, zero_points=zero_points)
        if case.inputs[0].ndim >= 2 and case.inputs[1].size:
            return case
    raise AssertionError("no rank-2 case drawn")


INVALID_KINDS = (
    "block_size not a power of 2",
    "block_size < 16",
    "block_size 0 for integer data",
    "bits 3 for uint8",
    "bits 8 for int4/uint4",
    "gather_axis out of range",
    "quantize_axis out of range",
    "gather_axis not 0 for uint8",
    "quantize_axis not last for uint8",
    "uint8 data of rank 1",
    "scales rank",
    "scales blocks on the quantize axis",
    "scales dim off the quantize axis",
    "zero_points rank",
    "zero_points shape",
    "zero_points with FP8/FP4",
    "zero_points type differs",
    "data type (int8)",
    "scales type (double)",
    "indices type (int16)",
)


def invalid_cases(rng: np.random.Generator, t2: str | None = None, index: str = "int64"):
    """Yield ``(kind, case, error class)``, one per :data:`INVALID_KINDS`, each breaking one schema rule.

    ``t2`` is the scales' type (default: drawn), ``index`` the indices' (but in the int16 case).
    """
    t2 = t2 or T2[int(rng.integers(len(T2)))]
    nibble = ("int4", 4) if rng.random() < 0.5 else ("uint4", 4)
    packed = ("uint8", int(rng.choice([2, 4, 8])))
    fp = (sorted(FP)[int(rng.integers(len(FP)))], 4)
    any_t1 = T1[int(rng.integers(len(T1)))]
    IAE, SE = errors.InvalidAttributeError, errors.ShapeError

    base = _base(rng, *any_t1, t2, index)
    yield "block_size not a power of 2", _with(base, block_size=48), IAE
    yield "block_size < 16", _with(base, block_size=8), IAE
    base = _base(rng, *nibble, t2, index)
    yield "block_size 0 for integer data", _with(base, block_size=0), IAE
    base = _base(rng, *packed, t2, index)
    yield "bits 3 for uint8", _with(base, bits=3), IAE
    base = _base(rng, *nibble, t2, index)
    yield "bits 8 for int4/uint4", _with(base, bits=8), IAE
    base = _base(rng, *any_t1, t2, index)
    r = base.inputs[0].ndim
    yield "gather_axis out of range", _with(base, gather_axis=int(rng.choice([r, -r - 1]))), IAE
    yield "quantize_axis out of range", _with(base, quantize_axis=int(rng.choice([r, -r - 1]))), IAE
    base = _base(rng, *packed, t2, index)
    yield "gather_axis not 0 for uint8", _with(base, gather_axis=1), IAE
    yield "quantize_axis not last for uint8", _with(base, quantize_axis=0), IAE
    data = _codes(rng, "uint8", packed[1], (32 // (8 // packed[1]),))
    rank1 = C.Case(
        "GatherBlockQuantized",
        [data, _indices(rng, 1, index, False) * 0, _scales(rng, t2, (1,))],
        {"gather_axis": 0, "quantize_axis": 0, "block_size": 32, "bits": packed[1]},
        constants=CONSTANTS,
    )
    yield "uint8 data of rank 1", rank1, IAE
    base = _base(rng, *any_t1, t2, index, zero_points=True)
    data, indices, scales, *zp = base.inputs
    yield "scales rank", _with(base, [data, indices, scales[..., None], *zp]), SE
    q = base.attrs["quantize_axis"] % data.ndim
    grown = list(scales.shape)
    grown[q] += 1
    yield "scales blocks on the quantize axis", _with(base, [data, indices, _scales(rng, t2, tuple(grown)), *zp]), SE
    off = next(a for a in range(data.ndim) if a != q)
    wider = list(scales.shape)
    wider[off] = data.shape[off] + 1
    yield "scales dim off the quantize axis", _with(base, [data, indices, _scales(rng, t2, tuple(wider)), *zp]), SE
    base = _base(rng, *(nibble if rng.random() < 0.5 else packed), t2, index, zero_points=True)
    data, indices, scales, points = base.inputs
    yield "zero_points rank", _with(base, [data, indices, scales, points[None]]), SE
    q = base.attrs["quantize_axis"] % data.ndim
    off = next(a for a in range(data.ndim) if a != q)
    bigger = list(points.shape)
    bigger[off] += 1
    wrong = _codes(rng, data.dtype.name, 4, tuple(bigger))
    yield "zero_points shape", _with(base, [data, indices, scales, wrong]), SE
    base = _base(rng, *fp, t2, index)
    data, indices, scales = base.inputs
    yield (
        "zero_points with FP8/FP4",
        _with(base, [data, indices, scales, np.zeros(scales.shape, data.dtype)]),
        (errors.ArityError),
    )
    base = _base(rng, *nibble, t2, index, zero_points=True)
    data, indices, scales, points = base.inputs
    other = ml_dtypes.uint4 if data.dtype == np.dtype(ml_dtypes.int4) else ml_dtypes.int4
    retyped = points.astype(np.int8).astype(other)
    yield "zero_points type differs", _with(base, [data, indices, scales, retyped]), errors.DTypeError
    base = _base(rng, *nibble, t2, index)
    data, indices, scales = base.inputs
    yield "data type (int8)", _with(base, [data.astype(np.int8), indices, scales]), errors.DTypeError
    yield "scales type (double)", _with(base, [data, indices, scales.astype(np.float64)]), errors.DTypeError
    yield "indices type (int16)", _with(base, [data, indices.astype(np.int16), scales]), errors.DTypeError
