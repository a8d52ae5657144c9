"""Hypothesis strategies over the package's case generators (``gather_scatter.check.cases``):
shapes and choices drawn by hypothesis so that they shrink; element values from a generator
seeded by hypothesis. The plain generators are re-exported here for the tests.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from gather_scatter.check.cases import (  # noqa: F401 - re-exported for the tests
    CLASSIC,
    COMPLEX,
    DTYPES,
    FLOATS,
    INDEX_DTYPES,
    LOW_PRECISION,
    STRINGS,
    Case,
    elements_case,
    gather_case,
    gather_indices,
    gather_nd_case,
    index_tuples,
    invalid_cases,
    onnx_name,
    reductions_for,
    scatter_nd_case,
    tensor_scatter_case,
    valid_cases,
    values,
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
