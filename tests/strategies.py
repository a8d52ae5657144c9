"""Hypothesis strategies over the package's case generators (``gather_scatter.check.cases``):
shapes and choices drawn by hypothesis so that they shrink; element values from a generator
seeded by hypothesis. The plain generators are re-exported here for the tests.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from gather_scatter import errors
from gather_scatter.check.case_values import (  # noqa: F401 - re-exported for the tests
    CLASSIC,
    COMPLEX,
    DTYPES,
    FLOATS,
    INDEX_DTYPES,
    LOW_PRECISION,
    STRINGS,
    Case,
    gather_indices,
    index_tuples,
    onnx_name,
    reductions_for,
    values,
)
from gather_scatter.check.cases import (  # noqa: F401 - re-exported for the tests
    elements_case,
    gather_case,
    gather_nd_case,
    invalid_cases,
    scatter_nd_case,
    tensor_scatter_case,
    valid_cases,
)

# ----------------------------------------------------------------------------- hypothesis

type_names = st.sampled_from(sorted(CLASSIC))
index_dtypes = st.sampled_from(sorted(INDEX_DTYPES))
seeds = st.integers(0, 2**32 - 1)


@st.composite
def gather_cases(draw, types=type_names, index_types=index_dtypes) -> Case:
    rng = np.random.default_rng(draw(seeds))
    return gather_case(rng, draw(types), draw(index_types), zero=draw(st.sampled_from([0.0, 0.2])))


@st.composite
def gather_nd_cases(draw, types=type_names) -> Case:
    rng = np.random.default_rng(draw(seeds))
    return gather_nd_case(rng, draw(types), "int64", zero=draw(st.sampled_from([0.0, 0.2])))


@st.composite
def scatter_nd_cases(draw, types=type_names, reductions=st.sampled_from(["none", "add", "mul", "max", "min"]),
                     duplicates=st.booleans(), unique=False) -> Case:
    rng = np.random.default_rng(draw(seeds))
    type_name = draw(types)
    reduction = draw(reductions)
    if reduction not in reductions_for(type_name, [reduction]):
        reduction = "none"
    return scatter_nd_case(rng, type_name, "int64", reduction, duplicates=draw(duplicates), unique=unique,
                           zero=draw(st.sampled_from([0.0, 0.2])))


@st.composite
def elements_cases(draw, op=st.sampled_from(["GatherElements", "ScatterElements"]), types=type_names,
                   reductions=st.sampled_from(["none", "add", "mul", "max", "min"])) -> Case:
    rng = np.random.default_rng(draw(seeds))
    op, type_name = draw(op), draw(types)
    reduction = draw(reductions) if op == "ScatterElements" else None
    if reduction is not None and reduction not in reductions_for(type_name, [reduction]):
        reduction = "none"
    return elements_case(rng, op, type_name, draw(index_dtypes), reduction, zero=draw(st.sampled_from([0.0, 0.2])))


@st.composite
def tensor_scatter_cases(draw, types=st.sampled_from(sorted(DTYPES))) -> Case:
    rng = np.random.default_rng(draw(seeds))
    return tensor_scatter_case(rng, draw(types), draw(st.sampled_from(["linear", "circular"])),
                               zero=draw(st.sampled_from([0.0, 0.2])))


@st.composite
def unique_scatter_elements_cases(draw, types=type_names) -> Case:
    """ScatterElements with no two updates to one element: indices are distinct positions
    along the axis on every line (a prefix of a permutation)."""
    rng = np.random.default_rng(draw(seeds))
    r = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=r, max_size=r)))
    axis = draw(st.integers(-r, r - 1))
    ax = axis % r
    m = draw(st.integers(0, shape[ax]))
    order = np.argsort(rng.random(shape), axis=ax)
    indices = np.take(order, np.arange(m), axis=ax)
    indices = np.where(rng.random(indices.shape) < 0.3, indices - shape[ax], indices).astype(np.int64)
    type_name = draw(types)
    return Case("ScatterElements", [values(rng, type_name, shape), indices, values(rng, type_name, indices.shape)],
                {"axis": axis})


# ----------------------------------------------------------------------------- more invalid kinds


def _other_type(rng, spec, type_name: str) -> str:
    others = sorted(t for t in spec.data_types if t != type_name)
    return others[int(rng.integers(len(others)))]


def _nonempty(make) -> Case:
    while True:
        case = make()
        if case.inputs[1].size:
            return case


def more_invalid_cases(spec, rng, type_name: str, index_dtype: str):
    """(kind, case, expected error class): invalid kinds beyond ``invalid_cases`` for the
    family (axis, index and update types, rank 0, TensorScatter's update shape, mode and
    write_indices type, a negative write index in circular mode) and the reductions a
    version does not accept (ScatterND and ScatterElements)."""
    op = spec.op_type
    if op == "TensorScatter":
        base = tensor_scatter_case(rng, type_name, "circular", with_write=True, zero=0.0)
        past, update, write = base.inputs
        attrs = {**base.attrs, "mode": "circular"}
        axis = attrs.get("axis", -2) % past.ndim
        w = write.copy()
        w[int(rng.integers(w.size))] = -1 - int(rng.integers(3))
        yield "negative write index (circular)", Case(op, [past, update, w], attrs), errors.IndexOutOfBoundsError
        off = int(rng.choice([d for d in range(past.ndim) if d != axis]))
        wrong = update.shape[:off] + (update.shape[off] + 1,) + update.shape[off + 1:]
        yield "update shape off the axis", Case(op, [past, values(rng, type_name, wrong), write], attrs), \
            errors.ShapeError
        yield "update rank", Case(op, [past, update[..., None], write], attrs), errors.ShapeError
        yield "write_indices int32", Case(op, [past, update, write.astype(np.int32)], attrs), errors.DTypeError
        yield "write_indices 2-d", Case(op, [past, update, write[None]], attrs), errors.ShapeError
        yield "mode not accepted", Case(op, [past, update, write], {**attrs, "mode": "ring"}), \
            errors.InvalidAttributeError
        other = values(rng, _other_type(rng, spec, type_name), update.shape)
        yield "update type differs", Case(op, [past, other, write], attrs), errors.DTypeError
        yield "past_cache rank 1", Case(op, [past.reshape(-1), update.reshape(-1), write[:1]], {}), errors.ShapeError
        return
    reductions = reductions_for(type_name, spec.reductions) if "reduction" in spec.attributes else [None]
    reduction = reductions[int(rng.integers(len(reductions)))]
    if op in ("GatherElements", "ScatterElements", "Scatter"):
        base = _nonempty(lambda: elements_case(rng, op, type_name, index_dtype, reduction, zero=0.0))
        data, indices = base.inputs[:2]
        rest = base.inputs[2:]
        r = data.ndim
        yield "axis out of range", Case(op, base.inputs, {**base.attrs, "axis": int(rng.choice([r, -r - 1]))}), \
            errors.InvalidAttributeError
        yield "int16 indices", Case(op, [data, indices.astype(np.int16), *rest], base.attrs), errors.DTypeError
        scalar = [values(rng, type_name, ()), np.zeros((), dtype=indices.dtype)] + [values(rng, type_name, ())] * len(rest)
        yield "rank 0", Case(op, scalar, {"axis": 0}), errors.ShapeError
        if rest:
            other = values(rng, _other_type(rng, spec, type_name), indices.shape)
            yield "updates type differs", Case(op, [data, indices, other], base.attrs), errors.DTypeError
    elif op == "ScatterND":
        base = _nonempty(lambda: scatter_nd_case(rng, type_name, index_dtype, reduction, zero=0.0))
    else:
        return
    if op in ("ScatterElements", "ScatterND", "Scatter"):
        if "reduction" in spec.attributes:
            unknown = sorted({"max", "min", "sum", "MAX", ""} - set(spec.reductions))
            bad = {"reduction": unknown[int(rng.integers(len(unknown)))]}
        else:
            bad = {"reduction": "add"}
        yield "reduction not in this version", Case(op, base.inputs, {**base.attrs, **bad}), errors.InvalidAttributeError
