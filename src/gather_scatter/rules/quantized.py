"""com.microsoft GatherBlockQuantized-1: the schema's rules as one function of shapes, dtypes
and attributes, never of data.

:func:`plan` serves shape inference (``infer_shape``, ``infer_model_shapes``) and the kernel's
pre-flight check alike, so an error reads the same whether it is found statically or at run
time. Dims follow :mod:`gather_scatter.rules.dims` (an int, a symbol, or None; a shape of None is
an unknown rank); a rule raises only for what the known facts prove.

The rules, from onnxruntime's schema (1.32) and its CPU kernel
(``contrib_ops/cpu/quantization/gather_block_quantized.cc``): ``bits`` is 2, 4 or 8 for uint8
data, 4 for int4/uint4 and ignored for FP8/FP4; ``block_size`` is a power of 2 >= 16, or 0 (one
block spanning the quantize axis) for FP8/FP4; both axes lie in ``[-r, r-1]``; for uint8 data
``gather_axis`` is 0 and ``quantize_axis`` the last axis, distinct (so rank >= 2); ``scales`` has
data's rank, ``ceil(unpacked_q / block)`` blocks on the quantize axis and data's dims elsewhere
(FP8/FP4: or 1, broadcast); ``zero_points`` (never with FP8/FP4) has data's type and scales'
shape, except packed along the quantize axis for uint8 with ``bits`` < 8
(``ceil(scales_q / (8 / bits))``). Everything is in the unpacked (logical) index space.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..errors import ArityError, DTypeError, InvalidAttributeError, ShapeError
from .dims import ABSENT, Shape, _int_attr, _known, as_shape, fmt_shape
from .dtypes import as_dtype
from .versions import OpVersion, onnx_type_name

__all__ = ["FP_TYPES", "INT4_TYPES", "T1_TYPES", "T2_TYPES", "Plan", "plan"]

FP_TYPES = frozenset({"float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1"})
INT4_TYPES = frozenset({"int4", "uint4"})
T1_TYPES = FP_TYPES | INT4_TYPES | {"uint8"}
T2_TYPES = frozenset({"float", "float16", "bfloat16"})


class Plan(NamedTuple):
    """What the checks found: the output's shape and dtype, and how to read the inputs."""

    shape: Shape  # the output's
    dtype: np.dtype | None  # the output's: scales' dtype (T2)
    gather_axis: int | None  # normalized, None where data's rank is unknown
    quantize_axis: int | None
    kind: str | None  # 'uint8', 'int4' (int4/uint4), 'fp' (FP8/FP4); None: data's type unknown
    per_byte: int  # logical elements per stored element: 8 // bits for uint8, else 1
    block: int | None  # the effective block size (block_size, or the quantize dim for 0)


def _kind(type_name: str | None) -> str | None:
    if type_name is None:
        return None
    return "uint8" if type_name == "uint8" else "int4" if type_name in INT4_TYPES else "fp"


def _axis(spec: OpVersion, name: str, value: int, rank: int) -> int:
    if not -rank <= value < rank:
        raise spec.error(
            InvalidAttributeError,
            f"{name} = {value} is out of range for data of rank {rank} (valid range [{-rank}, {rank - 1}])",
            input=name,
            value=value,
            valid_range=(-rank, rank - 1),
        )
    return value % rank


def _dtypes(spec: OpVersion, dtypes: list[Any], given_zp: bool) -> tuple[str | None, np.dtype | None]:
    """Check each known dtype; return data's ONNX type name and the output dtype (scales')."""
    names = ("data", "indices", "scales", "zero_points")
    read = [None if d is None else as_dtype(spec, n, d) for n, d in zip(names, dtypes, strict=False)]
    for name, dtype in zip(names, read, strict=False):
        if dtype is not None:
            spec.check_dtype(name, dtype)
    data, zp = read[0], (read[3] if given_zp and len(read) > 3 else None)
    if data is not None and zp is not None and onnx_type_name(data) != onnx_type_name(zp):
        raise spec.error(
            DTypeError,
            f"zero_points has type tensor({onnx_type_name(zp)}) but data has "
            f"tensor({onnx_type_name(data)}); they must match (T1)",
            input="zero_points",
            value=onnx_type_name(zp),
        )
    return (onnx_type_name(data) if data is not None else None), (read[2] if len(read) > 2 else None)


def plan(
    spec: OpVersion,
    data: Shape,
    indices: Shape,
    scales: Shape,
    zero_points: Shape = ABSENT,
    *,
    dtypes: list[Any] | None = None,
    gather_axis: Any = 0,
    quantize_axis: Any = 1,
    block_size: Any = 128,
    bits: Any = 4,
) -> Plan:
    """Check every rule the known facts decide, in this order: attributes' types, dtypes,
    ``bits``, ``block_size``, axes, zero points with FP8/FP4, then shapes. ``zero_points`` is
    :data:`ABSENT` when not given; ``dtypes`` lists the inputs' dtypes (None: unknown).

    Raises ArityError (zero points with FP8/FP4), DTypeError, InvalidAttributeError, ShapeError.
    """
    g_attr, q_attr = _int_attr(spec, "gather_axis", gather_axis), _int_attr(spec, "quantize_axis", quantize_axis)
    block_size, bits = _int_attr(spec, "block_size", block_size), _int_attr(spec, "bits", bits)
    given_zp = zero_points is not ABSENT
    type_name, out_dtype = _dtypes(spec, list(dtypes or []), given_zp)
    kind = _kind(type_name)
    if kind == "uint8" and bits not in (2, 4, 8):
        raise spec.error(
            InvalidAttributeError,
            f"bits = {bits} is not accepted for uint8 data (accepted: 2, 4, 8)",
            input="bits",
            value=bits,
        )
    if kind == "int4" and bits != 4:
        raise spec.error(
            InvalidAttributeError,
            f"bits = {bits} is not accepted for tensor({type_name}) data (accepted: 4)",
            input="bits",
            value=bits,
            valid_range=(4, 4),
        )
    power = block_size >= 16 and block_size & (block_size - 1) == 0
    if not (power or (block_size == 0 and kind in ("fp", None))):
        zero = " or 0 (FP8/FP4 data only: one block spanning the quantize axis)"
        raise spec.error(
            InvalidAttributeError,
            f"block_size = {block_size} must be a power of 2 >= 16{zero}"
            + (f"; data is tensor({type_name})" if type_name else ""),
            input="block_size",
            value=block_size,
        )
    data, indices = as_shape(spec, "data", data), as_shape(spec, "indices", indices)
    scales = as_shape(spec, "scales", scales)
    zp = as_shape(spec, "zero_points", zero_points) if given_zp else None
    if data is not None and len(data) < 1:
        raise spec.error(ShapeError, "data must have rank >= 1, got shape ()", input="data", value=0)
    rank = len(data) if data is not None else len(scales) if scales is not None else None
    g = q = None
    if rank is not None:
        g, q = _axis(spec, "gather_axis", g_attr, rank), _axis(spec, "quantize_axis", q_attr, rank)
    if kind == "uint8" and rank is not None and (g != 0 or q != rank - 1 or g == q):
        name, value = ("gather_axis", g_attr) if g != 0 else ("quantize_axis", q_attr)
        raise spec.error(
            InvalidAttributeError,
            f"for uint8 data gather_axis must be 0 and quantize_axis the last axis "
            f"({rank - 1} or -1), and they must differ; got gather_axis = {g_attr}, quantize_axis = "
            f"{q_attr} for data of rank {rank}",
            input=name,
            value=value,
        )
    if kind == "fp" and given_zp:
        raise spec.error(
            ArityError,
            f"zero_points must not be given for tensor({type_name}) data (FP8/FP4 "
            "quantization is symmetric): the node takes 3 inputs (data, indices, scales), got 4",
            input="zero_points",
            value=4,
            valid_range=(3, 3),
        )
    per_byte = 8 // bits if kind == "uint8" else 1
    if kind is None and bits in (2, 4) and g == 0 and rank is not None and q == rank - 1:
        per_byte = 0  # may be packed uint8: the unpacked dim is unknown
    block: int | None = block_size
    if data is not None and scales is not None and q is not None:
        _check_scales(spec, data, scales, q, kind, per_byte, block_size)
    unpacked = None
    stored = data[q] if data is not None and q is not None else None
    if _known(stored) and per_byte:
        unpacked = stored * per_byte
        if block_size == 0:
            block = max(unpacked, 1)
    if zp is not None and scales is not None and q is not None:
        _check_zero_points(spec, scales, zp, q, per_byte)
    shape: Shape = None
    if data is not None and indices is not None and g is not None:
        shape = (*data[:g], *indices, *data[g + 1 :])
        if per_byte != 1 and shape:
            last = shape[-1]
            shape = (*shape[:-1], last * per_byte if _known(last) and per_byte else None)
    return Plan(shape, out_dtype, g, q, kind, per_byte, block if unpacked is not None or block_size else None)


def _check_scales(spec: OpVersion, data: tuple, scales: tuple, q: int, kind: str | None, per: int, bs: int) -> None:
    shown = f"data shape {fmt_shape(data)}, scales shape {fmt_shape(scales)}"
    if len(scales) != len(data):
        raise spec.error(
            ShapeError,
            f"scales must have data's rank {len(data)}, got rank {len(scales)} ({shown})",
            input="scales",
            value=len(scales),
            valid_range=(len(data), len(data)),
        )
    for i, (d, s) in enumerate(zip(data, scales, strict=True)):
        if not (_known(d) and _known(s)):
            continue
        if i == q:
            if not per:
                continue
            unpacked = d * per
            block = bs or max(unpacked, 1)
            want = -(-unpacked // block)
            if s != want:
                packed = f" ({d} stored x {per} per byte)" if per > 1 else ""
                raise spec.error(
                    ShapeError,
                    f"scales.shape[{i}] = {s} but the quantize axis {i} of {unpacked} elements"
                    f"{packed} in blocks of {block} needs ceil({unpacked} / {block}) = {want} ({shown})",
                    input="scales",
                    value=s,
                    position=(i,),
                    axis=i,
                    valid_range=(want, want),
                )
        elif s != d and not (kind == "fp" and s == 1):
            also = " or 1 (FP8/FP4 data: broadcast)" if kind in ("fp", None) else ""
            raise spec.error(
                ShapeError,
                f"scales.shape[{i}] = {s} must equal data.shape[{i}] = {d}{also} ({shown})",
                input="scales",
                value=s,
                position=(i,),
                axis=i,
                valid_range=(d, d),
            )


def _check_zero_points(spec: OpVersion, scales: tuple, zp: tuple, q: int, per: int) -> None:
    shown = f"scales shape {fmt_shape(scales)}, zero_points shape {fmt_shape(zp)}"
    if len(zp) != len(scales):
        raise spec.error(
            ShapeError,
            f"zero_points must have scales' rank {len(scales)}, got rank {len(zp)} ({shown})",
            input="zero_points",
            value=len(zp),
            valid_range=(len(scales), len(scales)),
        )
    for i, (s, z) in enumerate(zip(scales, zp, strict=True)):
        if not (_known(s) and _known(z)) or (i == q and not per):
            continue
        want = -(-s // per) if i == q else s
        if z != want:
            why = f"ceil({s} / {per}): {per} zero points per byte" if i == q and per > 1 else f"scales.shape[{i}]"
            raise spec.error(
                ShapeError,
                f"zero_points.shape[{i}] = {z} must be {want} ({why}; {shown})",
                input="zero_points",
                value=z,
                position=(i,),
                axis=i,
                valid_range=(want, want),
            )
