"""What a conformance case covers, computed from its arrays and attributes (never from its generator).

:func:`tags_of` reads a case's inputs and attributes and returns its tags (the MANIFEST's
``tags`` field; ``docs/conformance.md`` has the table); :func:`applicable_tags` says which of
the coverage tags a version can carry at all, so a test can check that the suite holds each
of them for every version. :func:`tolerance` gives the float tolerance of a valid case where the
order of a float reduction's roundings, or how a complex product rounds, is left to the engine,
and None where the comparison is exact.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..check import case_values as C
from ..check.issue_class import has_duplicates
from ..check.runner import CheckCase
from ..rules.versions import LOW_PRECISION_TYPES, OpVersion, onnx_type_name

__all__ = [
    "COVERAGE_TAGS",
    "QUANTIZED_TAGS",
    "SCATTERS",
    "applicable_tags",
    "index_input",
    "most_hits",
    "reduction_of",
    "tags_of",
    "tolerance",
]

SCATTERS = ("ScatterND", "ScatterElements", "Scatter")

#: The coverage tags only GatherBlockQuantized's cases carry.
QUANTIZED_TAGS = (
    "broadcast_scales",
    "zero_points",
    "partial_block",
    "out_of_range_zero_rows",
    "bits_2",
    "bits_4",
    "bits_8",
)

#: The tags the suite guarantees for every version that can carry them (see :func:`applicable_tags`).
COVERAGE_TAGS = (
    "negative_indices",
    "int32_indices",
    "int64_indices",
    "batch_dims_1",
    "batch_dims_2",
    "empty_indices",
    "empty_data",
    "rank_0_indices",
    "rank_5",
    "duplicates_with_reduction",
    "float16_reduction",
    "bfloat16_reduction",
    "nan_max_min",
    "signed_zero_tie",
    "nan",
    "negative_zero",
    "inf",
    "string",
    "bool",
    "complex",
    "low_precision",
    "circular_wrap_batch_ge_max_seq",
    "tensor_scatter_linear",
    "tensor_scatter_circular",
    *QUANTIZED_TAGS,
)


def reduction_of(spec: OpVersion, attrs: dict[str, Any]) -> str | None:
    """Return a scatter's reduction (its attribute, else the version's default ``none``); None for the other ops."""
    if spec.op_type not in SCATTERS:
        return None
    value = attrs.get("reduction", "none")
    return value.decode() if isinstance(value, bytes) else str(value)


def index_input(spec: OpVersion, inputs: list[np.ndarray]) -> np.ndarray | None:
    """Return the case's index input: ``indices``, or TensorScatter's ``write_indices`` (None when absent)."""
    if spec.op_type == "TensorScatter":
        return inputs[2] if len(inputs) > 2 else None
    return inputs[1]


def _float_view(array: np.ndarray) -> np.ndarray | None:
    """Return the array's values as float64 (complex: both parts), or None for a non-float type."""
    name = onnx_type_name(array.dtype) if array.dtype != object else "string"
    if name is None or array.dtype.kind in "biuO" or name in ("int4", "uint4"):
        return None
    if array.dtype.kind == "c":
        return np.concatenate([array.real.reshape(-1), array.imag.reshape(-1)]).astype(np.float64)
    return np.asarray(array, dtype=np.float64).reshape(-1)


def _value_tags(arrays: list[np.ndarray]) -> set[str]:
    tags: set[str] = set()
    for array in arrays:
        values = _float_view(array)
        if values is None or not values.size:
            continue
        if np.isnan(values).any():
            tags.add("nan")
        if np.isinf(values).any():
            tags.add("inf")
        if ((values == 0) & np.signbit(values)).any():
            tags.add("negative_zero")
    return tags


def _empty_indices(spec: OpVersion, indices: np.ndarray) -> bool:
    """No index at all: no index tuple for the ND ops (``prod(indices.shape[:-1]) == 0``), no element otherwise."""
    if spec.op_type in ("GatherND", "ScatterND"):
        return indices.ndim >= 1 and math.prod(indices.shape[:-1]) == 0
    return indices.size == 0


def _quantized_tags(case: C.Case) -> set[str]:
    data, indices, scales = case.inputs[:3]
    attrs = case.attrs
    tags = {"zero_points"} if len(case.inputs) > 3 else set()
    bits = int(attrs.get("bits", 4))
    t1 = onnx_type_name(data.dtype)
    if t1 == "uint8" and bits in (2, 4, 8):
        tags.add(f"bits_{bits}")
    if t1 in LOW_PRECISION_TYPES or (t1 == "uint8" and bits < 8):
        tags.add("low_precision")
    rank = data.ndim
    if rank:
        q = int(attrs.get("quantize_axis", 1)) % rank
        g = int(attrs.get("gather_axis", 0)) % rank
        per = 8 // bits if t1 == "uint8" else 1
        logical = data.shape[q] * per
        block = int(attrs.get("block_size", 128)) or logical
        if block and logical % block:
            tags.add("partial_block")
        if scales.ndim == rank and any(scales.shape[a] == 1 and data.shape[a] > 1 for a in range(rank) if a != q):
            tags.add("broadcast_scales")
        size = data.shape[g]
        flat = np.asarray(indices, dtype=np.int64).reshape(-1)
        if flat.size and ((flat < -size) | (flat >= size)).any():
            tags.add("out_of_range_zero_rows")
    return tags


def tags_of(spec: OpVersion, case: C.Case, *, valid: bool = True, error_kind: str | None = None) -> list[str]:
    """Return the sorted tags of ``case`` for version ``spec``, computed from its inputs and attributes.

    Parameters
    ----------
    spec : OpVersion
        The operator version the case runs as.
    case : cases.Case
        Its inputs (NumPy arrays, strings as object arrays) and attributes.
    valid : bool, default True
        Whether it is a valid case; an invalid one gets ``invalid_<error_kind>`` too, and no
        tag that needs a defined result (``duplicates_with_reduction``, ``nan_max_min``,
        ``signed_zero_tie``, ``circular_wrap_batch_ge_max_seq`` only mean something on a result).
    error_kind : str, optional
        The invalid case's error kind (``bounds``, ``shape``, ``type``, ``attribute``, ``arity``).

    Returns
    -------
    list of str
        The tags, sorted: those of :data:`COVERAGE_TAGS` that hold, ``reduction_<r>`` for a
        scatter (its effective reduction), ``negative_axis``, and the data's ONNX type name.
    """
    op, inputs, attrs = spec.op_type, case.inputs, case.attrs
    data = inputs[0]
    tags: set[str] = set()
    data_type = onnx_type_name(data.dtype) if data.dtype != object else "string"
    if data_type:
        tags.add(data_type)
    if data_type in ("string", "bool"):
        tags.add(data_type)
    if data_type in C.COMPLEX:
        tags.add("complex")
    if data_type in LOW_PRECISION_TYPES:
        tags.add("low_precision")
    if data.size == 0:
        tags.add("empty_data")
    if data.ndim >= 5:
        tags.add("rank_5")
    axis = attrs.get("axis", attrs.get("gather_axis"))
    if isinstance(axis, (int, np.integer)) and axis < 0:
        tags.add("negative_axis")
    indices = index_input(spec, inputs)
    if indices is not None and indices.dtype.kind == "i":
        tags.add(f"{indices.dtype.name}_indices")
        if indices.size and (indices < 0).any():
            tags.add("negative_indices")
        if op != "TensorScatter":
            if _empty_indices(spec, indices):
                tags.add("empty_indices")
            if indices.ndim == 0:
                tags.add("rank_0_indices")
    batch_dims = attrs.get("batch_dims", 0)
    if batch_dims == 1:
        tags.add("batch_dims_1")
    elif isinstance(batch_dims, (int, np.integer)) and batch_dims >= 2:
        tags.add("batch_dims_2")
    tags |= _value_tags([a for i, a in enumerate(inputs) if a is not indices])
    reduction = reduction_of(spec, attrs)
    if reduction in ("none", "add", "mul", "max", "min"):
        tags.add(f"reduction_{reduction}")
        if reduction != "none":
            if data_type in ("float16", "bfloat16"):
                tags.add(f"{data_type}_reduction")
            if valid and has_duplicates(CheckCase(spec, spec.since_version, case, "valid")):
                tags.add("duplicates_with_reduction")
            if valid and reduction in ("max", "min") and "nan" in _value_tags(inputs[:1] + inputs[2:]):
                tags.add("nan_max_min")
            if valid and _signed_zero_tie(spec, case):
                tags.add("signed_zero_tie")
    if op == "TensorScatter":
        mode = attrs.get("mode", "linear")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        if mode in ("linear", "circular"):
            tags.add(f"tensor_scatter_{mode}")
        ax = int(attrs.get("axis", -2)) % max(data.ndim, 1)
        wraps = mode == "circular" and indices is not None and indices.size and data.ndim
        if valid and wraps and (indices >= data.shape[ax]).any():
            tags.add("circular_wrap_batch_ge_max_seq")
    if op == "GatherBlockQuantized":
        tags |= _quantized_tags(case)
    if not valid and error_kind:
        tags.add(f"invalid_{error_kind}")
    return sorted(tags)


def applicable_tags(spec: OpVersion) -> frozenset[str]:
    """Return the coverage tags (:data:`COVERAGE_TAGS`) a valid case of ``spec`` can carry.

    The suite holds each of them for every version (``tests/test_conformance_export.py``).
    """
    op = spec.op_type
    tags = {"int64_indices", "empty_data", "rank_5"}
    if op != "TensorScatter":
        tags |= {"negative_indices", "empty_indices"}
    else:
        tags |= {"tensor_scatter_linear", "tensor_scatter_circular", "circular_wrap_batch_ge_max_seq"}
    if "int32" in spec.index_types:
        tags.add("int32_indices")
    if op == "Gather":
        tags.add("rank_0_indices")
    if "batch_dims" in spec.attributes:
        tags |= {"batch_dims_1", "batch_dims_2"}
    if op == "GatherBlockQuantized":
        common = ("int32_indices", "int64_indices", "negative_indices", "empty_indices", "rank_0_indices")
        return frozenset((*common, "nan", "inf", "low_precision", *QUANTIZED_TAGS))
    types = spec.data_types
    if types & {"float", "double", "float16", "bfloat16"}:
        tags |= {"nan", "inf", "negative_zero"}
    for name in ("string", "bool"):
        if name in types:
            tags.add(name)
    if types & set(C.COMPLEX):
        tags.add("complex")
    if types & LOW_PRECISION_TYPES:
        tags.add("low_precision")
    reductions = set(spec.reductions) - {"none"} if "reduction" in spec.attributes else set()
    if reductions:
        tags.add("duplicates_with_reduction")
        tags |= {f"{t}_reduction" for t in ("float16", "bfloat16") if t in types}
    if reductions & {"max", "min"}:
        tags.add("nan_max_min")
        if types & {"float", "double", "float16", "bfloat16"}:
            tags.add("signed_zero_tie")
    return frozenset(tags)


def _targets(spec: OpVersion, case: C.Case) -> tuple[np.ndarray, int]:
    """Return where a valid scatter's updates land: one flat key per update, in the spec's loop order, and the width.

    ScatterND: update ``i`` (an index tuple, row-major) writes the slice of ``data`` keyed by
    its flat position in ``data.shape[:k]``, ``width`` elements long. The elements scatters:
    update ``i`` (a position of ``indices``, row-major) writes the one element keyed by its flat
    position in ``data``, width 1. Negative indices are wrapped; a key names one slice whatever
    spelling reaches it.
    """
    data, indices = case.inputs[0], np.asarray(case.inputs[1], dtype=np.int64)
    if indices.size == 0 and (spec.op_type != "ScatterND" or indices.shape[-1] != 0):
        return np.zeros(0, np.int64), 1
    if spec.op_type == "ScatterND":
        k = indices.shape[-1]
        n = math.prod(indices.shape[:-1])
        width = math.prod(data.shape[k:])
        if k == 0:
            return np.zeros(n, np.int64), width
        rows = indices.reshape(n, k)
        rows = np.where(rows < 0, rows + np.asarray(data.shape[:k], np.int64), rows)
        return np.ravel_multi_index(tuple(rows.T), data.shape[:k]).astype(np.int64), width
    axis = int(case.attrs.get("axis", 0)) % indices.ndim
    coords: list[np.ndarray] = [c.reshape(-1) for c in np.indices(indices.shape)]
    coords[axis] = np.where(indices < 0, indices + data.shape[axis], indices).reshape(-1)
    return np.ravel_multi_index(tuple(coords), data.shape).astype(np.int64), 1


def most_hits(spec: OpVersion, case: C.Case) -> int:
    """Return the most updates of a scatter that reach one element (or slice) of ``data``; 0 for no update."""
    keys, _ = _targets(spec, case)
    return int(np.unique(keys, return_counts=True)[1].max()) if keys.size else 0


def _signed_zero_tie(spec: OpVersion, case: C.Case) -> bool:
    """Whether a max/min scatter's loop compares 0.0 with -0.0 at some element (``signed_zero_tie``).

    The spec's loop, ``output[i] = max(output[i], updates[j])`` in row-major order of the
    updates, run in float64 (exact for the float types) round by round: round ``r`` applies the
    ``r``-th update of every slice, so the updates of one element keep their order. A tie is a
    comparison of a zero with the zero of the other sign, between ``data`` and an update or
    between the value an earlier update left and a later one. Until the first tie every rule
    gives the same values (NaN propagating, as ours), so whether a case ties does not depend
    on what a tie gives.
    """
    reduction = reduction_of(spec, case.attrs)
    data = case.inputs[0]
    if reduction not in ("max", "min") or onnx_type_name(data.dtype) not in ("float16", "bfloat16", "float", "double"):
        return False
    keys, width = _targets(spec, case)
    if not keys.size or not width:
        return False
    table = np.array(data, dtype=np.float64).reshape(-1, width)  # a copy: the loop writes it
    updates = np.asarray(case.inputs[2], dtype=np.float64).reshape(keys.size, width)
    zeros = np.signbit(np.concatenate([table[table == 0], updates[updates == 0]]))
    if zeros.all() or not zeros.any():  # no zero, or zeros of one sign only: no tie to find
        return False
    order = np.argsort(keys, kind="stable")
    firsts = np.flatnonzero(np.r_[True, np.diff(keys[order]) != 0])
    rank = np.empty(keys.size, np.int64)
    rank[order] = np.arange(keys.size) - np.repeat(firsts, np.diff(np.r_[firsts, keys.size]))
    pick = np.maximum if reduction == "max" else np.minimum
    for r in range(int(rank.max()) + 1):
        now = np.flatnonzero(rank == r)  # distinct keys: one update per slice in this round
        a, b = table[keys[now]], updates[now]
        if ((a == 0) & (b == 0) & (np.signbit(a) != np.signbit(b))).any():
            return True
        table[keys[now]] = pick(a, b)
    return False


_EPS = {
    "float16": 2.0**-10,
    "bfloat16": 2.0**-7,
    "float": 2.0**-23,
    "double": 2.0**-52,
    "complex64": 2.0**-23,
    "complex128": 2.0**-52,
}


def tolerance(spec: OpVersion, case: C.Case) -> tuple[float, float] | None:
    """Return ``(rtol, atol)`` where the rounding of a float reduction is the engine's to choose, else None.

    That is a scatter with reduction ``add`` or ``mul`` of float (or complex) data where two
    updates reach one element: the spec's loop applies them in row-major order of ``indices``
    and rounds after each, an engine may sum in another order or in a wider type. With ``m``
    the most updates on one element and ``eps`` the data type's: ``rtol = 2 m eps``; ``atol``,
    for ``add``, ``2 m eps`` times the largest sum of magnitudes that can reach one element
    (``(m + 1)`` times the largest finite input: a sum's rounding error scales with it, not with
    the result, which can cancel to 0); for ``mul`` the type's smallest normal number.

    Complex ``mul``, every case (one update per element, or none, included): the spec does not
    say how a complex product rounds, and ``ac - bd`` rounded twice differs in the last bit from
    a fused multiply-add. Each way lands within ``sqrt(5) u`` (``u = eps / 2``) of the exact
    product in modulus (Brent, Percival and Zimmermann, 2007; ``2 u`` with a fused
    multiply-add), so two engines' products of ``k = max(m, 1)`` updates differ by at most
    ``2 sqrt(5) k u = sqrt(5) k eps``: ``rtol = 3 k eps``, ``atol`` the smallest normal number
    of the parts' type (a comparison of complex numbers is by modulus, as ``numpy.isclose``'s).
    Everywhere else (one update per element, integers, max/min) the comparison is exact.
    """
    reduction = reduction_of(spec, case.attrs)
    name = onnx_type_name(case.inputs[0].dtype)
    if reduction not in ("add", "mul") or name not in _EPS:
        return None
    m = most_hits(spec, case)
    eps = _EPS[name]
    if reduction == "mul" and name in C.COMPLEX:
        part = np.float32 if name == "complex64" else np.float64
        return _round_up(3 * max(m, 1) * eps), _round_up(float(np.finfo(part).tiny))
    if m < 2:
        return None
    rtol = 2 * m * eps
    if reduction == "add":
        magnitudes = np.abs(np.concatenate([_finite(case.inputs[0]), _finite(case.inputs[2])]))
        scale = float(magnitudes.max()) if magnitudes.size else 1.0
        atol = rtol * (m + 1) * max(scale, 1.0)
    else:
        atol = float(np.finfo(np.float16 if name == "float16" else np.float32 if name != "double" else np.float64).tiny)
        if name == "bfloat16":
            atol = float(np.finfo(np.float32).tiny)
    # rounded up to 2 significant digits: a short, stable number in data.json
    return _round_up(rtol), _round_up(atol)


def _round_up(x: float) -> float:
    if x <= 0:
        return 0.0
    e = math.floor(math.log10(x)) - 1
    return float(f"{math.ceil(x / 10.0**e) * 10.0**e:.2g}")


def _finite(array: np.ndarray) -> np.ndarray:
    values = _float_view(array)
    if values is None:
        return np.zeros(0)
    return values[np.isfinite(values)]
