"""Targeted valid cases: what random draws reach rarely or never, made on purpose for each version.

Each generator takes a version (:class:`~gather_scatter.rules.versions.OpVersion`) and a seeded
``numpy.random.Generator`` and yields :class:`~gather_scatter.check.cases.Case` values built
from the checker's generators (``check/cases.py``, ``check/quantized_cases.py``), then bent to
the feature: every index negative, no index at all, data of rank 5, ``batch_dims`` 2, duplicate
targets under every reduction of every float width, NaN under max/min, 0.0 against -0.0 under
max/min (made whole, drawing nothing from the generator), TensorScatter write
indices at and past ``max_sequence_length`` in circular mode. What a case covers is decided
afterwards from its arrays (:func:`..tags.tags_of`), not from which generator made it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..check import case_values as V
from ..check import cases as C
from ..check import quantized_cases as Q
from ..check.issue_class import has_duplicates
from ..check.runner import CheckCase
from ..rules.versions import OpVersion
from .tags import SCATTERS, reduction_of

__all__ = ["draw", "targeted_cases"]


def _index_types(spec: OpVersion) -> list[str]:
    return sorted(spec.index_types)


def _undefined(spec: OpVersion, case: V.Case) -> bool:
    """Tell whether a scatter has reduction none and two updates on one element (the spec leaves the winner open)."""
    return (
        spec.op_type in SCATTERS
        and reduction_of(spec, case.attrs) == "none"
        and has_duplicates(CheckCase(spec, spec.since_version, case, "valid"))
    )


def draw(
    spec: OpVersion, rng: np.random.Generator, type_name: str, index_dtype: str, reduction: str | None = None, **kw: Any
) -> V.Case:
    """Return a random valid case of ``spec`` from the checker's generator for its operator.

    Never one the spec leaves undefined: with reduction ``none`` (or none given) a scatter's
    targets are distinct (ScatterND draws unique index tuples; the elements scatters draw
    again until no two updates meet, a negative and a positive index naming one element
    counting as meeting).
    """
    op = spec.op_type
    for _ in range(200):
        if op == "Gather":
            case = C.gather_case(rng, type_name, index_dtype, **kw)
        elif op == "GatherND":
            case = C.gather_nd_case(rng, type_name, index_dtype, batch_dims="batch_dims" in spec.attributes, **kw)
        elif op == "TensorScatter":
            case = C.tensor_scatter_case(rng, type_name, **kw)
        elif op == "ScatterND":
            options = {"unique": reduction in (None, "none"), **kw}
            case = C.scatter_nd_case(rng, type_name, index_dtype, reduction, **options)
        else:
            options = {"duplicates": False if reduction in (None, "none") else None, **kw}
            case = C.elements_case(rng, op, type_name, index_dtype, reduction, **options)
            if op != "GatherElements" and reduction in (None, "none"):
                case = _distinct_along_axis(rng, case)
        if not _undefined(spec, case):
            return case
    raise AssertionError(f"{spec.name}: no case without duplicate targets in 200 draws")


def _distinct_along_axis(rng: np.random.Generator, case: V.Case) -> V.Case:
    """Return an elements scatter case whose updates never meet: distinct indices along each line of the axis.

    A line longer than the axis is cut to its length (indices and updates alike). Drawing
    again until no two updates met instead would favour empty and one-element cases.
    """
    data, indices, updates = case.inputs
    ax = int(case.attrs.get("axis", 0)) % data.ndim
    size = data.shape[ax]
    length = min(indices.shape[ax], size)
    indices, updates = (np.take(a, np.arange(length), axis=ax) for a in (indices, updates))
    lines = np.moveaxis(indices, ax, -1)
    n = math.prod(lines.shape[:-1])
    distinct = np.argsort(rng.random((n, size)), axis=1)[:, :length] if size else np.zeros((n, 0), np.int64)
    distinct = np.where(rng.random(distinct.shape) < 0.35, distinct - size, distinct)
    indices = np.moveaxis(distinct.reshape(lines.shape), -1, ax).astype(indices.dtype)
    return V.Case(case.op, [data, np.ascontiguousarray(indices), np.ascontiguousarray(updates)], case.attrs)


def _negate(spec: OpVersion, case: V.Case) -> V.Case:
    """Return the same case with every index written as its negative spelling (``i - size``)."""
    data, indices = case.inputs[0], case.inputs[1]
    op = spec.op_type
    if op == "Gather":
        sizes: Any = data.shape[int(case.attrs.get("axis", 0))]
    elif op in ("GatherND", "ScatterND"):
        b = int(case.attrs.get("batch_dims", 0))
        sizes = np.asarray(data.shape[b : b + indices.shape[-1]], dtype=np.int64)
    else:
        sizes = data.shape[int(case.attrs.get("axis", 0)) % data.ndim]
    wide = indices.astype(np.int64)
    negative = np.where(wide >= 0, wide - sizes, wide).astype(indices.dtype)
    return V.Case(case.op, [data, negative, *case.inputs[2:]], case.attrs, case.constants)


def _types(spec: OpVersion, preferred: tuple[str, ...]) -> list[str]:
    """Return the ``preferred`` types the version allows, in that order, else its first type."""
    chosen = [t for t in preferred if t in spec.data_types]
    return chosen or sorted(spec.data_types)[:1]


def _negative_cases(spec, rng) -> Iterator[V.Case]:
    for j, type_name in enumerate(_types(spec, ("float", "int64", "string", "float16", "uint8"))):
        index = _index_types(spec)[j % len(spec.index_types)]
        reduction = "add" if "add" in spec.reductions and type_name != "string" else None
        for _ in range(50):
            case = draw(spec, rng, type_name, index, reduction, zero=0.0)
            if case.inputs[1].size:
                break
        yield _negate(spec, case)


def _empty_cases(spec, rng) -> Iterator[V.Case]:
    for j, type_name in enumerate(_types(spec, ("float", "int32", "bool"))):
        index = _index_types(spec)[j % len(spec.index_types)]
        dtype = V.INDEX_DTYPES[index]
        op = spec.op_type
        data = V.values(rng, type_name, (3, 2, 4)[: 2 + j % 2])
        if op == "Gather":
            yield V.Case(op, [data, np.zeros((0,) if j % 2 else (2, 0), dtype)], {"axis": j % data.ndim})
        elif op == "GatherND":
            k = 1 + j % data.ndim
            yield V.Case(
                op, [data, np.zeros((0, k), dtype)], {"batch_dims": 0} if "batch_dims" in spec.attributes else {}
            )
        elif op == "ScatterND":
            k = j % (data.ndim + 1)
            updates = V.values(rng, type_name, (0, *data.shape[k:]))
            yield V.Case(op, [data, np.zeros((0, k), dtype), updates], {})
        else:  # the elements ops: a zero dim in indices (and updates)
            axis = j % data.ndim
            shape = tuple(0 if d == axis else n for d, n in enumerate(data.shape))
            inputs = [data, np.zeros(shape, dtype)]
            if op != "GatherElements":
                inputs.append(V.values(rng, type_name, shape))
            yield V.Case(op, inputs, {"axis": axis})


def _empty_data_cases(spec, rng) -> Iterator[V.Case]:
    """Yield cases whose data has a zero dim off the indexed axis (indices may still name a non-empty axis)."""
    op = spec.op_type
    type_name = _types(spec, ("float", "int64"))[0]
    index = _index_types(spec)[-1]
    dtype = V.INDEX_DTYPES[index]
    if op == "Gather":
        yield V.Case(op, [V.values(rng, type_name, (0, 3)), np.array([2, -1], dtype)], {"axis": 1})
    elif op == "GatherND":
        yield V.Case(op, [V.values(rng, type_name, (2, 0)), np.array([[1], [-2]], dtype)], {})
    elif op == "ScatterND":
        updates = V.values(rng, type_name, (2, 0))
        yield V.Case(op, [V.values(rng, type_name, (2, 0)), np.array([[1], [-2]], dtype), updates], {})
    elif op == "TensorScatter":
        past, update = V.values(rng, type_name, (2, 3, 0)), V.values(rng, type_name, (2, 1, 0))
        yield V.Case(op, [past, update, np.array([0, 2], np.int64)], {"axis": 1})
        past, update = V.values(rng, type_name, (0, 3, 2)), V.values(rng, type_name, (0, 1, 2))
        yield V.Case(op, [past, update, np.zeros(0, np.int64)], {"axis": 1, "mode": "circular"})
    else:
        inputs = [V.values(rng, type_name, (2, 0)), np.zeros((1, 0), dtype)]
        if op != "GatherElements":
            inputs.append(V.values(rng, type_name, (1, 0)))
        yield V.Case(op, inputs, {"axis": 0})


def _rank5_shape(rng) -> tuple[int, ...]:
    return tuple(int(rng.integers(1, 4)) for _ in range(5))


def _rank5_cases(spec, rng) -> Iterator[V.Case]:
    op = spec.op_type
    for j, type_name in enumerate(_types(spec, ("float", "int8", "bool", "float8e4m3fn"))):
        index = _index_types(spec)[j % len(spec.index_types)]
        shape = _rank5_shape(rng)
        data = V.values(rng, type_name, shape)
        if op == "Gather":
            axis = int(rng.integers(-5, 5))
            indices = V.gather_indices(rng, shape[axis], (2, 2), index)
            yield V.Case(op, [data, indices], {"axis": axis})
        elif op == "GatherND":
            b = min(j, 2) if "batch_dims" in spec.attributes else 0
            k = int(rng.integers(1, 6 - b))
            indices = V.index_tuples(rng, shape[b : b + k], (*shape[:b], 2), index)
            yield V.Case(op, [data, indices], {"batch_dims": b} if "batch_dims" in spec.attributes else {})
        elif op == "ScatterND":
            yield _scatter_nd_rank5(rng, type_name, index, data)
        elif op == "TensorScatter":
            axis = int(rng.integers(1, 5))
            length = int(rng.integers(0, shape[axis] + 1))
            update = V.values(rng, type_name, (*shape[:axis], length, *shape[axis + 1 :]))
            write = rng.integers(0, shape[axis] - length + 1, size=shape[0]).astype(np.int64)
            yield V.Case(op, [data, update, write], {"axis": axis})
        else:
            axis = int(rng.integers(-5, 5))
            ax = axis % 5
            ind_shape = tuple(int(rng.integers(1, n + 1)) if d != ax else 1 for d, n in enumerate(shape))
            flat = rng.integers(-shape[ax], shape[ax], size=math.prod(ind_shape))
            inputs = [data, flat.reshape(ind_shape).astype(V.INDEX_DTYPES[index])]
            if op != "GatherElements":
                inputs.append(V.values(rng, type_name, ind_shape))
            yield V.Case(op, inputs, {"axis": axis})


def _scatter_nd_rank5(rng, type_name: str, index: str, data: np.ndarray) -> V.Case:
    k = int(rng.integers(1, 6))
    block = data.shape[:k]
    n = min(math.prod(block), 3)
    indices = V.index_tuples(rng, block, (n,), index, unique=True)
    return V.Case("ScatterND", [data, indices, V.values(rng, type_name, (n, *data.shape[k:]))], {})


def _batch_dims_cases(spec, rng) -> Iterator[V.Case]:
    if "batch_dims" not in spec.attributes:
        return
    for j, type_name in enumerate(_types(spec, ("float", "int64", "string", "float16"))):
        r = 3 + j % 3
        b = 2 + (j % (r - 2)) if r > 3 else 2
        b = min(b, r - 1)
        shape = tuple(int(rng.integers(1, 4)) for _ in range(r))
        k = int(rng.integers(1, r - b + 1))
        lead = (int(rng.integers(1, 3)),) if j % 2 else ()
        indices = V.index_tuples(rng, shape[b : b + k], (*shape[:b], *lead), "int64")
        yield V.Case("GatherND", [V.values(rng, type_name, shape), indices], {"batch_dims": b})


def _reduction_cases(spec, rng) -> Iterator[V.Case]:
    """Duplicate targets under every reduction, for every float width and a few other types."""
    if "reduction" not in spec.attributes:
        return
    types = [t for t in ("float16", "bfloat16", "float", "double", "int32", "uint8", "bool", "string", "complex64")]
    types = [t for t in types if t in spec.data_types]
    for r in spec.reductions:
        if r == "none":
            continue
        for j, type_name in enumerate(types):
            if r not in V.reductions_for(type_name, spec.reductions):
                continue
            index = _index_types(spec)[j % len(spec.index_types)]
            for _ in range(50):
                case = draw(spec, rng, type_name, index, r, duplicates=True, zero=0.0)
                if has_duplicates(CheckCase(spec, spec.since_version, case, "valid")):
                    break
            yield case


def _nan_cases(spec, rng) -> Iterator[V.Case]:
    """NaN in data and in updates on the elements they reach, under max and min."""
    for r in ("max", "min"):
        if r not in spec.reductions or "reduction" not in spec.attributes:
            continue
        for j, type_name in enumerate(_types(spec, ("float", "float16", "bfloat16", "double"))):
            index = _index_types(spec)[j % len(spec.index_types)]
            for _ in range(50):
                case = draw(spec, rng, type_name, index, r, duplicates=True, zero=0.0)
                if case.inputs[2].size:
                    break
            data, indices, updates = (np.array(a, copy=True) for a in case.inputs)
            u = updates.reshape(-1)
            u[rng.random(u.size) < 0.4] = np.nan
            u[int(rng.integers(u.size))] = np.nan
            d = data.reshape(-1)
            d[rng.random(d.size) < 0.3] = np.nan
            yield V.Case(case.op, [data, indices, updates], case.attrs)


def _signed_zero_cases(spec, rng) -> Iterator[V.Case]:
    """0.0 against -0.0 under max and min, at elements with duplicates and without, every float width.

    Written out, not drawn (``rng`` is left as it was: the cases drawn after these stay the same).
    Six elements, seven updates in this order: element 0 takes -0.0 then 0.0 over data -1.0
    (1.0 under min: the first update wins, the second ties it), element 1 takes 0.0 then -0.0
    (the second spelled -5), elements 2 and 3 hold -0.0 and 0.0 and take the other zero, and
    element 5 (5.0; -5.0 under min) takes -0.0 and keeps its value: no tie there.
    """
    if "reduction" not in spec.attributes:
        return
    positions = [0, 1, 2, 3, 0, -5, 5]
    zeros = [-0.0, 0.0, 0.0, -0.0, 0.0, -0.0, -0.0]
    for r in ("max", "min"):
        if r not in spec.reductions:
            continue
        far = -1.0 if r == "max" else 1.0
        floats = [t for t in ("float", "double", "float16", "bfloat16") if t in spec.data_types]
        for j, type_name in enumerate(floats):
            dtype = V.DTYPES[type_name]
            data = np.array([far, far, -0.0, 0.0, far, -5.0 * far], dtype)
            index_dtype = V.INDEX_DTYPES[_index_types(spec)[j % len(spec.index_types)]]
            indices = np.array(positions, index_dtype)
            if spec.op_type == "ScatterND":
                indices = indices.reshape(-1, 1)
            yield V.Case(spec.op_type, [data, indices, np.array(zeros, dtype)], {"reduction": r})


def _tensor_scatter_cases(spec, rng) -> Iterator[V.Case]:
    """Circular writes whose index reaches or passes max_sequence_length; both modes without write_indices."""
    if spec.op_type != "TensorScatter":
        return
    types = ("float", "float16", "int8", "bool", "string", "float8e5m2", "int4", "float4e2m1")
    for j, type_name in enumerate(types):
        batch, capacity = 1 + j % 3, 2 + j % 4
        rank = 3 + j % 2
        axis = int(rng.integers(1, rank))
        past_shape = tuple(capacity if d == axis else batch if d == 0 else 2 for d in range(rank))
        length = int(rng.integers(1, capacity + 1))
        update_shape = tuple(length if d == axis else n for d, n in enumerate(past_shape))
        write = rng.integers(0, 3 * capacity + 1, size=batch).astype(np.int64)
        write[int(rng.integers(batch))] = capacity + int(rng.integers(0, 2 * capacity))
        inputs = [V.values(rng, type_name, past_shape), V.values(rng, type_name, update_shape), write]
        attrs = {"axis": axis if j % 2 else axis - rank, "mode": "circular"}
        yield V.Case("TensorScatter", inputs, attrs)
    for mode in ("linear", "circular"):
        case = C.tensor_scatter_case(rng, "float", mode, with_write=False, zero=0.0)
        yield V.Case(case.op, case.inputs[:2], {**case.attrs, "mode": mode})


def _quantized_cases(spec, rng) -> Iterator[V.Case]:
    """GatherBlockQuantized: every index negative, no index, each uint8 width with and without zero points."""
    if spec.op_type != "GatherBlockQuantized":
        return
    for j, ((t1, bits), t2, index) in enumerate(Q.COMBINATIONS[:20]):
        case = Q.valid_case(rng, t1, bits, t2, index, zero_points=j % 2 == 0)
        data, indices = case.inputs[:2]
        size = data.shape[int(case.attrs["gather_axis"]) % data.ndim]
        if j % 2:
            ids = rng.integers(-size, 0, size=(3,)).astype(indices.dtype)
        else:
            ids = np.zeros((0,) if j % 4 else (2, 0), indices.dtype)
        yield V.Case(case.op, [data, ids, *case.inputs[2:]], case.attrs, case.constants)


_GENERATORS = (
    _negative_cases,
    _empty_cases,
    _empty_data_cases,
    _rank5_cases,
    _batch_dims_cases,
    _reduction_cases,
    _nan_cases,
    _tensor_scatter_cases,
    _signed_zero_cases,
)


def targeted_cases(spec: OpVersion, rng: np.random.Generator) -> Iterator[V.Case]:
    """Yield the targeted valid cases of ``spec`` (a few dozen at most), reproducible from ``rng``."""
    if spec.op_type == "GatherBlockQuantized":
        yield from _quantized_cases(spec, rng)
        return
    for make in _GENERATORS:
        if spec.op_type == "TensorScatter" and make in (_negative_cases, _empty_cases):
            continue
        yield from make(spec, rng)
