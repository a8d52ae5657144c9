"""Random cases for every operator version of the family.

Valid ones, and invalid ones with the error class the spec requires.

Plain functions of a seeded ``numpy.random.Generator``, so a case is reproducible from its
seed. The test suite draws from the same generators (``tests/strategies.py`` wraps them for
hypothesis), and so does ``gather-scatter check``, which runs them through other engines.

Values cover what breaks implementations: zero-size dims, rank-0 Gather indices,
batch_dims, every ONNX type (NaN, -0.0 and infinities for floats; empty and non-ASCII strings
of varying length; complex; float8 and 4-bit for TensorScatter), int32/int64 indices, negative
indices, duplicates, indices smaller than data off the axis.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import errors
from .case_values import (
    INDEX_DTYPES,
    Case,
    gather_indices,
    index_tuples,
    reductions_for,
    values,
)


def _shape(rng, rank: int, low: int = 1, high: int = 4, zero: float = 0.08) -> tuple[int, ...]:
    return tuple(0 if rng.random() < zero else int(rng.integers(low, high + 1)) for _ in range(rank))


def _lead_for(rng, lead: tuple[int, ...], block: tuple[int, ...]) -> tuple[int, ...]:
    """``lead`` made empty (a zero dim) when the indexed block is empty, so indices stay valid."""
    if math.prod(block) == 0 and math.prod(lead) != 0:
        if not lead:
            raise ValueError("rank-0 lead cannot be empty")
        dims = list(lead)
        dims[int(rng.integers(len(dims)))] = 0
        lead = tuple(dims)
    return lead


def gather_case(rng, type_name: str, index_dtype: str, *, zero: float = 0.08) -> Case:
    """Return a valid Gather case: data of rank 1 to 3, any axis, indices of rank 0 to 3.

    ``type_name`` is the data's ONNX type (one of :data:`DTYPES`), ``index_dtype`` ``int32`` or
    ``int64``, and ``zero`` the chance of each dim being 0.
    """
    r = int(rng.integers(1, 4))
    data_shape = _shape(rng, r, zero=zero)
    axis = int(rng.integers(-r, r))
    size = data_shape[axis]
    q = int(rng.integers(0, 4))
    ind_shape = _shape(rng, q, 1, 3, zero=zero)
    if size == 0 and math.prod(ind_shape) != 0:
        ind_shape = _lead_for(rng, ind_shape if q else (1,), (0,))
    indices = gather_indices(rng, size, ind_shape, index_dtype)
    return Case("Gather", [values(rng, type_name, data_shape), indices], {"axis": axis})


def gather_nd_case(rng, type_name: str, index_dtype: str, *, batch_dims: bool = True, zero: float = 0.08) -> Case:
    """Return a valid GatherND case: data of rank 1 to 4, index tuples of length 1 to rank - batch_dims.

    ``type_name``, ``index_dtype`` and ``zero`` as for :func:`gather_case`. ``batch_dims``: whether
    the version has that attribute; it is set (to 0 or, half the time, a random valid value) only then.
    """
    r = int(rng.integers(1, 5))
    data_shape = _shape(rng, r, zero=zero)
    b = int(rng.integers(0, r)) if batch_dims and rng.random() < 0.5 else 0
    k = int(rng.integers(1, r - b + 1))
    lead = _shape(rng, int(rng.integers(0, 3)), 1, 3, zero=zero)
    block = data_shape[b : b + k]
    if math.prod(block) == 0 and math.prod(data_shape[:b] + lead) != 0:
        lead = _lead_for(rng, lead if lead else (1,), block)
    indices = index_tuples(rng, block, data_shape[:b] + lead, index_dtype)
    attrs = {"batch_dims": b} if batch_dims else {}
    return Case("GatherND", [values(rng, type_name, data_shape), indices], attrs)


def scatter_nd_case(
    rng,
    type_name: str,
    index_dtype: str,
    reduction: str | None,
    *,
    duplicates: bool | None = None,
    unique: bool = False,
    zero: float = 0.08,
    max_rank: int = 4,
) -> Case:
    """Return a valid ScatterND case: data of rank 1 to ``max_rank``, index tuples of length 0 to rank.

    ``type_name`` (of data and updates), ``index_dtype`` and ``zero`` as for :func:`gather_case`;
    ``reduction`` is the attribute (None leaves it out). ``duplicates``: index tuples repeat (drawn
    from a pool of at most 3), by default 40% of the time; ``unique``: no two index tuples address
    the same element (overrides ``duplicates``).
    """
    r = int(rng.integers(1, max_rank + 1))
    data_shape = _shape(rng, r, zero=zero)
    k = int(rng.integers(0, r + 1))
    block = data_shape[:k]
    lead = _shape(rng, int(rng.integers(0, 3)), 1, 4, zero=zero)
    if unique and math.prod(lead) > math.prod(block):
        lead = (int(rng.integers(0, math.prod(block) + 1)),)
    if math.prod(block) == 0 and math.prod(lead) != 0:
        lead = _lead_for(rng, lead if lead else (1,), block)
    if duplicates is None:
        duplicates = rng.random() < 0.4
    indices = index_tuples(rng, block, lead, index_dtype, duplicates=duplicates and not unique, unique=unique)
    updates = values(rng, type_name, lead + data_shape[k:])
    attrs = {} if reduction is None else {"reduction": reduction}
    return Case("ScatterND", [values(rng, type_name, data_shape), indices, updates], attrs)


def elements_case(
    rng,
    op: str,
    type_name: str,
    index_dtype: str,
    reduction: str | None = None,
    *,
    duplicates: bool | None = None,
    zero: float = 0.08,
) -> Case:
    """Return a valid GatherElements, ScatterElements or Scatter case.

    Same rank, indices no larger than data off the axis (often smaller), any length on the
    axis, negatives, duplicates for the scatters.
    """
    r = int(rng.integers(1, 5))
    data_shape = _shape(rng, r, zero=zero)
    axis = int(rng.integers(-r, r))
    ax = axis % r
    ind_shape = tuple(
        int(rng.integers(0, 5)) if d == ax else int(rng.integers(0, n + 1)) if rng.random() < 0.4 else n
        for d, n in enumerate(data_shape)
    )
    if data_shape[ax] == 0 and math.prod(ind_shape) != 0:
        ind_shape = (*ind_shape[:ax], 0, *ind_shape[ax + 1 :])
    size = data_shape[ax]
    if duplicates is None:
        duplicates = rng.random() < 0.5
    high = min(size, 2) if duplicates else size
    flat = rng.integers(0, max(high, 1), size=math.prod(ind_shape))
    flat = np.where(rng.random(flat.size) < 0.35, flat - size, flat)
    indices = flat.reshape(ind_shape).astype(INDEX_DTYPES[index_dtype])
    inputs = [values(rng, type_name, data_shape), indices]
    attrs: dict[str, Any] = {"axis": axis}
    if op != "GatherElements":
        inputs.append(values(rng, type_name, ind_shape))
        if reduction is not None:
            attrs["reduction"] = reduction
    return Case(op, inputs, attrs)


def tensor_scatter_case(
    rng, type_name: str, mode: str | None = None, *, with_write: bool | None = None, zero: float = 0.08
) -> Case:
    """Return a valid TensorScatter case.

    Cache (batch, ..., max_sequence_length, ...), an update of sequence_length <= max on the
    axis, write indices in range for the mode (circular ones may exceed max).
    """
    r = int(rng.integers(2, 5))
    past_shape = _shape(rng, r, zero=zero)
    axis = int(rng.integers(1, r)) - (r if rng.random() < 0.5 else 0)
    ax = axis % r
    capacity = past_shape[ax]
    length = int(rng.integers(0, capacity + 1))
    update_shape = (*past_shape[:ax], length, *past_shape[ax + 1 :])
    mode = mode or ("circular" if rng.random() < 0.5 else "linear")
    if with_write is None:
        with_write = rng.random() < 0.75
    inputs = [values(rng, type_name, past_shape), values(rng, type_name, update_shape)]
    if with_write:
        high = capacity - length if mode == "linear" else 3 * capacity + 2
        inputs.append(rng.integers(0, high + 1, size=past_shape[0]).astype(np.int64))
    attrs: dict[str, Any] = {"axis": axis} if rng.random() < 0.7 or axis != -2 else {}
    if mode != "linear" or rng.random() < 0.5:
        attrs["mode"] = mode
    return Case("TensorScatter", inputs, attrs)


def valid_cases(spec, rng, per_combination: int = 4):
    """Yield valid cases of ``spec`` (an OpVersion), ``per_combination`` for each data type, index type and reduction.

    The reductions are those of the version defined for the type (:func:`reductions_for`).
    """
    if spec.op_type == "GatherBlockQuantized":
        from . import quantized_cases

        yield from quantized_cases.valid_cases(rng, per_combination)
        return
    index_types = sorted(spec.index_types)
    for type_name in sorted(spec.data_types):
        for index_dtype in index_types:
            reductions = reductions_for(type_name, spec.reductions) if "reduction" in spec.attributes else [None]
            for reduction in reductions:
                for _ in range(per_combination):
                    if spec.op_type == "Gather":
                        yield gather_case(rng, type_name, index_dtype)
                    elif spec.op_type == "GatherND":
                        yield gather_nd_case(rng, type_name, index_dtype, batch_dims="batch_dims" in spec.attributes)
                    elif spec.op_type == "TensorScatter":
                        yield tensor_scatter_case(rng, type_name)
                    elif spec.op_type == "ScatterND":
                        yield scatter_nd_case(rng, type_name, index_dtype, reduction)
                    else:
                        yield elements_case(rng, spec.op_type, type_name, index_dtype, reduction)


def _nonempty(make, rng, attempts=50):
    for _ in range(attempts):
        case = make(rng)
        if case.inputs[1].size:
            return case
    raise AssertionError("no case with non-empty indices")


def _push_out_of_bounds(rng, case: Case) -> Case:
    indices = case.inputs[1].copy()
    flat = indices.reshape(-1)
    flat[int(rng.integers(flat.size))] = rng.choice([50, -51])
    return Case(case.op, [case.inputs[0], indices, *case.inputs[2:]], case.attrs)


def invalid_cases(spec, rng, type_name: str, index_dtype: str):
    """Yield (kind, case, expected error class) for ``spec``; every case has something wrong.

    For GatherBlockQuantized, ``type_name`` is not used (each rule picks the data types it
    concerns; see ``quantized_cases.invalid_cases``).
    """
    op = spec.op_type
    if op == "GatherBlockQuantized":
        from . import quantized_cases

        yield from quantized_cases.invalid_cases(rng, index=index_dtype)
        return
    has_batch = "batch_dims" in spec.attributes
    if op == "Gather":
        base = _nonempty(lambda r: gather_case(r, type_name, index_dtype, zero=0.0), rng)
        yield "index out of bounds", _push_out_of_bounds(rng, base), errors.IndexOutOfBoundsError
        r = base.inputs[0].ndim
        yield (
            "axis out of range",
            Case(op, base.inputs, {"axis": int(rng.choice([r, -r - 1]))}),
            errors.InvalidAttributeError,
        )
        return
    if op == "GatherND":
        base = _nonempty(lambda r: gather_nd_case(r, type_name, index_dtype, batch_dims=has_batch, zero=0.0), rng)
        yield "index out of bounds", _push_out_of_bounds(rng, base), errors.IndexOutOfBoundsError
        data, indices = base.inputs
        b = base.attrs.get("batch_dims", 0)
        too_long = np.zeros((*indices.shape[:-1], data.ndim - b + 1), dtype=indices.dtype)
        yield "indices.shape[-1] > rank - batch_dims", Case(op, [data, too_long], base.attrs), errors.ShapeError
        if has_batch:
            data = values(rng, type_name, (2, 3, 2))
            batch = int(rng.choice([1, 3, 4, 6]))  # != 2; ORT refuses only those not divisible by 2
            indices = index_tuples(rng, (3,), (batch, int(rng.integers(1, 3))), index_dtype)
            yield "batch dims differ", Case(op, [data, indices], {"batch_dims": 1}), errors.ShapeError
            yield "batch_dims >= rank", Case(op, [data, indices[0]], {"batch_dims": 2}), errors.InvalidAttributeError
        if spec.domain == "":
            wrong = index_tuples(rng, data.shape[:1], (2,), "int32")
            yield "int32 indices", Case(op, [data, wrong], {}), errors.DTypeError
        return
    if op == "TensorScatter":
        base = tensor_scatter_case(rng, type_name, "linear", with_write=True, zero=0.0)
        past, update, write = base.inputs
        axis = base.attrs.get("axis", -2) % past.ndim
        room = past.shape[axis] - update.shape[axis]
        for kind, bad in (("negative write index", -1), ("write past the cache", room + 1)):
            w = write.copy()
            w[int(rng.integers(w.size))] = bad
            yield kind, Case(op, [past, update, w], base.attrs), errors.IndexOutOfBoundsError
        longer = (*past.shape[:axis], past.shape[axis] + 1, *past.shape[axis + 1 :])
        yield (
            "sequence_length > max",
            Case(op, [past, values(rng, type_name, longer), write], base.attrs),
            errors.ShapeError,
        )
        yield "axis 0", Case(op, [past, update, write], {**base.attrs, "axis": 0}), errors.InvalidAttributeError
        yield (
            "write_indices shape",
            Case(op, [past, update, np.zeros(past.shape[0] + 1, np.int64)], base.attrs),
            errors.ShapeError,
        )
        return
    reductions = reductions_for(type_name, spec.reductions) if "reduction" in spec.attributes else [None]
    reduction = reductions[int(rng.integers(len(reductions)))]
    if op in ("GatherElements", "ScatterElements", "Scatter"):
        base = _nonempty(lambda r: elements_case(r, op, type_name, index_dtype, reduction, zero=0.0), rng)
        yield "index out of bounds", _push_out_of_bounds(rng, base), errors.IndexOutOfBoundsError
        data, indices = base.inputs[:2]
        rest = base.inputs[2:]
        yield (
            "rank differs",
            Case(op, [data, indices[..., None], *(u[..., None] for u in rest)], base.attrs),
            errors.ShapeError,
        )
        ax = base.attrs["axis"] % data.ndim
        if data.ndim > 1:
            d = (ax + 1) % data.ndim
            wide = (*indices.shape[:d], data.shape[d] + 1, *indices.shape[d + 1 :])
            big = np.zeros(wide, dtype=indices.dtype)
            yield (
                "indices wider than data off the axis",
                Case(op, [data, big, *(values(rng, type_name, wide) for _ in rest)], base.attrs),
                errors.ShapeError,
            )
        if rest:
            grown = (*indices.shape[:-1], indices.shape[-1] + 1)
            yield (
                "updates shape",
                Case(op, [data, indices, values(rng, type_name, grown)], base.attrs),
                errors.ShapeError,
            )
        return

    def make(r):
        return scatter_nd_case(r, type_name, index_dtype, reduction, zero=0.0)

    base = _nonempty(make, rng)
    yield "index out of bounds", _push_out_of_bounds(rng, base), errors.IndexOutOfBoundsError
    data, indices, updates = base.inputs
    grown = (*updates.shape[:-1], updates.shape[-1] + 1) if updates.ndim else (1,)
    yield "updates shape", Case(op, [data, indices, values(rng, type_name, grown)], base.attrs), errors.ShapeError
    too_long = np.zeros((*indices.shape[:-1], data.ndim + 1), dtype=indices.dtype)
    yield "indices.shape[-1] > rank", Case(op, [data, too_long, updates], base.attrs), errors.ShapeError
    other = "int32" if type_name != "int32" else "int64"
    mixed = values(rng, other, updates.shape)
    yield "updates type differs", Case(op, [data, indices, mixed], base.attrs), errors.DTypeError
    yield "int32 indices", Case(op, [data, indices.astype(np.int32), updates], base.attrs), errors.DTypeError
