"""Every example printed in the specification texts, at every version whose text prints it.

Sources (the operator texts in the project's shared/spec folder): ``Gather-1-11-13.rst.txt``, ``GatherND-11-12-13.rst.txt``,
``ScatterND-11-13-16.rst.txt``, ``com.microsoft-GatherND-1.md.txt``, ``GatherElements-11-13.md.txt``,
``ScatterElements-11-13-16-18.md.txt`` and ``Scatter-9-11.md.txt`` (``TensorScatter-24.md.txt`` prints
pseudocode only: it is tests/oracle.py's ``tensor_scatter``). The examples are
transcribed below as data; each expected output is the one the text prints, except where
``spec/README.md`` lists an erratum (noted on the row). Examples whose text computes the
expected output with ``np.take`` from random data (``gather_0``, ``gather_1``,
``gather_2d_indices``) keep that definition.

Each (example, version) pair runs through ``run_node`` at ``opset = since_version`` (Scatter-9
also at opset 10, the other opset where it is in effect) and through the loop oracle; each
example also runs once through the public kernel (the newest version), with the attributes
its newest printing gives. The ScatterElements/Scatter texts print their output rows without
the commas between them (``[2.0, 1.1, 0.0]`` newline ``[1.0, ...]``): a typographic slip only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import oracle
import pytest

from gather_scatter import (
    InvalidAttributeError,
    UnsupportedOpError,
    gather,
    gather_elements,
    gather_nd,
    run_node,
    scatter_elements,
    scatter_nd,
)

f32, i32, i64 = np.float32, np.int32, np.int64


@dataclass(frozen=True)
class Example:
    name: str
    op: str
    printed_at: dict[int, dict[str, Any]]  # since_version -> the attributes printed there
    inputs: tuple[np.ndarray, ...]
    expected: np.ndarray
    domain: str = ""
    erratum: str = field(default="", compare=False)


# -- Gather (Gather-1-11-13.rst.txt) ---------------------------------------------------------

_GATHER_AXIS0_DATA = np.array([[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]], dtype=f32)
_GATHER_AXIS1_DATA = np.array([[1.0, 1.2, 1.9], [2.3, 3.4, 3.9], [4.5, 5.7, 5.9]], dtype=f32)
# The "Examples" section draws random data and defines y = np.take(data, indices, axis).
_rng = np.random.default_rng(20240613)
_RANDN_5432 = _rng.standard_normal((5, 4, 3, 2)).astype(f32)
_RANDN_33 = _rng.standard_normal((3, 3)).astype(f32)

GATHER_EXAMPLES = [
    Example(
        # Gather-1 "Example 1", Gather-11 and Gather-13 "axis = 0".
        "gather_axis0_summary",
        "Gather",
        {1: {}, 11: {}, 13: {}},
        (_GATHER_AXIS0_DATA, np.array([[0, 1], [1, 2]], dtype=i64)),
        np.array([[[1.0, 1.2], [2.3, 3.4]], [[2.3, 3.4], [4.5, 5.7]]], dtype=f32),
    ),
    Example(
        # Gather-1 "Example 2", Gather-11 and Gather-13 "axis = 1".
        "gather_axis1_summary",
        "Gather",
        {1: {"axis": 1}, 11: {"axis": 1}, 13: {"axis": 1}},
        (_GATHER_AXIS1_DATA, np.array([[0, 2]], dtype=i64)),
        np.array([[[1.0, 1.9]], [[2.3, 3.9]], [[4.5, 5.9]]], dtype=f32),
        erratum="Gather-1 and Gather-11 print shape (1, 3, 2); spec/README.md: the real "
        "result is Gather-13's (3, 1, 2)",
    ),
    Example(
        "gather_0",
        "Gather",
        {13: {"axis": 0}},
        (_RANDN_5432, np.array([0, 1, 3], dtype=i64)),
        np.take(_RANDN_5432, [0, 1, 3], axis=0),
    ),
    Example(
        "gather_1",
        "Gather",
        {13: {"axis": 1}},
        (_RANDN_5432, np.array([0, 1, 3], dtype=i64)),
        np.take(_RANDN_5432, [0, 1, 3], axis=1),
    ),
    Example(
        "gather_2d_indices",
        "Gather",
        {13: {"axis": 1}},
        (_RANDN_33, np.array([[0, 2]], dtype=i64)),
        np.take(_RANDN_33, [[0, 2]], axis=1),
    ),
    Example(
        "gather_negative_indices",
        "Gather",
        {13: {"axis": 0}},
        (np.arange(10).astype(f32), np.array([0, -9, -10], dtype=i64)),
        np.array([0.0, 1.0, 0.0], dtype=f32),  # the text's "# print(y)" line
    ),
]

# -- GatherND (GatherND-11-12-13.rst.txt; the .md rendering prints the same examples) -----------

_ND_2x2 = np.array([[0, 1], [2, 3]], dtype=i64)
_ND_2x2x2 = np.array([[[0, 1], [2, 3]], [[4, 5], [6, 7]]], dtype=i64)
# Examples 1-4: GatherND-11 prints no attribute, GatherND-12/13 print "batch_dims = 0".
_B0 = {11: {}, 12: {"batch_dims": 0}, 13: {"batch_dims": 0}}

GATHER_ND_EXAMPLES = [
    Example(
        "gathernd_example1", "GatherND", _B0,
        (_ND_2x2, np.array([[0, 0], [1, 1]], dtype=i64)),
        np.array([0, 3], dtype=i64),
    ),
    Example(
        "gathernd_example2", "GatherND", _B0,
        (_ND_2x2, np.array([[1], [0]], dtype=i64)),
        np.array([[2, 3], [0, 1]], dtype=i64),
    ),
    Example(
        "gathernd_example3", "GatherND", _B0,
        (_ND_2x2x2, np.array([[0, 1], [1, 0]], dtype=i64)),
        np.array([[2, 3], [4, 5]], dtype=i64),
    ),
    Example(
        "gathernd_example4", "GatherND", _B0,
        (_ND_2x2x2, np.array([[[0, 1]], [[1, 0]]], dtype=i64)),
        np.array([[[2, 3]], [[4, 5]]], dtype=i64),
    ),
    Example(
        "gathernd_example5_batch_dims", "GatherND", {12: {"batch_dims": 1}, 13: {"batch_dims": 1}},
        (_ND_2x2x2, np.array([[1], [0]], dtype=i64)),
        np.array([[2, 3], [4, 5]], dtype=i64),
    ),
    Example(
        "gathernd_int32", "GatherND", {13: {}},
        (_ND_2x2.astype(i32), np.array([[0, 0], [1, 1]], dtype=i64)),
        np.array([0, 3], dtype=i32),
    ),
    Example(
        "gathernd_float32", "GatherND", {13: {}},
        (_ND_2x2x2.astype(f32), np.array([[[0, 1]], [[1, 0]]], dtype=i64)),
        np.array([[[2, 3]], [[4, 5]]], dtype=f32),
    ),
    Example(
        "gathernd_int32_batchdim_1", "GatherND", {13: {"batch_dims": 1}},
        (_ND_2x2x2.astype(i32), np.array([[1], [0]], dtype=i64)),
        np.array([[2, 3], [4, 5]], dtype=i32),
    ),
]

# -- com.microsoft GatherND-1 (com.microsoft-GatherND-1.md.txt) --------------------------------

_MS = {1: {}}
MS_GATHER_ND_EXAMPLES = [
    Example(
        "ms_gathernd_example1", "GatherND", _MS,
        (_ND_2x2, np.array([[0, 0], [1, 1]], dtype=i64)),
        np.array([0, 3], dtype=i64), domain="com.microsoft",
    ),
    Example(
        "ms_gathernd_example2", "GatherND", _MS,
        (_ND_2x2, np.array([[1], [0]], dtype=i64)),
        np.array([[2, 3], [0, 1]], dtype=i64), domain="com.microsoft",
    ),
    Example(
        "ms_gathernd_example3", "GatherND", _MS,
        (_ND_2x2x2, np.array([[0, 1], [1, 0]], dtype=i64)),
        np.array([[2, 3], [4, 5]], dtype=i64), domain="com.microsoft",
    ),
    Example(
        "ms_gathernd_example4", "GatherND", _MS,
        (_ND_2x2x2, np.array([[[0, 1]], [[1, 0]]], dtype=i64)),
        np.array([[[2, 3]], [[4, 5]]], dtype=i64), domain="com.microsoft",
    ),
    Example(
        "ms_gathernd_int32", "GatherND", _MS,
        (_ND_2x2.astype(i32), np.array([[0, 0], [1, 1]], dtype=i64)),
        np.array([0, 3], dtype=i32), domain="com.microsoft",
    ),
    Example(
        "ms_gathernd_float32", "GatherND", _MS,
        (_ND_2x2x2.astype(f32), np.array([[[0, 1]], [[1, 0]]], dtype=i64)),
        np.array([[[2, 3]], [[4, 5]]], dtype=f32), domain="com.microsoft",
    ),
]

# -- ScatterND (ScatterND-11-13-16.rst.txt) --------------------------------------------------

_SC_DATA = np.array(
    [
        [[1, 2, 3, 4], [5, 6, 7, 8], [8, 7, 6, 5], [4, 3, 2, 1]],
        [[1, 2, 3, 4], [5, 6, 7, 8], [8, 7, 6, 5], [4, 3, 2, 1]],
        [[8, 7, 6, 5], [4, 3, 2, 1], [1, 2, 3, 4], [5, 6, 7, 8]],
        [[8, 7, 6, 5], [4, 3, 2, 1], [1, 2, 3, 4], [5, 6, 7, 8]],
    ],
    dtype=i64,
)
_SC_UPDATES = np.array(
    [
        [[5, 5, 5, 5], [6, 6, 6, 6], [7, 7, 7, 7], [8, 8, 8, 8]],
        [[1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3], [4, 4, 4, 4]],
    ],
    dtype=i64,
)
# scatternd_add / scatternd_multiply: the text's "# Expecting output" comment prints block 2 as
# [[1, 1, 1, 1], [2, 2, 2, 2], ...], copied from the scatternd example; with indices [[0], [0]]
# only block 0 changes, and the text's own definition (output = scatter_nd_impl(...)) keeps
# data[2]. Block 0 is transcribed from the comment; blocks 1-3 are data's.
_SC_COMMENT_ERRATUM = "the printed comment's block 2 is the scatternd example's; data[2] is untouched"

SCATTER_ND_EXAMPLES = [
    Example(
        "scatternd_example1", "ScatterND", {11: {}, 13: {}, 16: {}},
        (
            np.array([1, 2, 3, 4, 5, 6, 7, 8], dtype=i64),
            np.array([[4], [3], [1], [7]], dtype=i64),
            np.array([9, 10, 11, 12], dtype=i64),
        ),
        np.array([1, 11, 3, 10, 9, 6, 7, 12], dtype=i64),
    ),
    Example(
        "scatternd_example2", "ScatterND", {11: {}, 13: {}, 16: {}},
        (_SC_DATA, np.array([[0], [2]], dtype=i64), _SC_UPDATES),
        np.array(
            [
                [[5, 5, 5, 5], [6, 6, 6, 6], [7, 7, 7, 7], [8, 8, 8, 8]],
                [[1, 2, 3, 4], [5, 6, 7, 8], [8, 7, 6, 5], [4, 3, 2, 1]],
                [[1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3], [4, 4, 4, 4]],
                [[8, 7, 6, 5], [4, 3, 2, 1], [1, 2, 3, 4], [5, 6, 7, 8]],
            ],
            dtype=i64,
        ),
    ),
    Example(
        "scatternd", "ScatterND", {16: {}},
        (_SC_DATA.astype(f32), np.array([[0], [2]], dtype=i64), _SC_UPDATES.astype(f32)),
        np.array(
            [
                [[5, 5, 5, 5], [6, 6, 6, 6], [7, 7, 7, 7], [8, 8, 8, 8]],
                [[1, 2, 3, 4], [5, 6, 7, 8], [8, 7, 6, 5], [4, 3, 2, 1]],
                [[1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3], [4, 4, 4, 4]],
                [[8, 7, 6, 5], [4, 3, 2, 1], [1, 2, 3, 4], [5, 6, 7, 8]],
            ],
            dtype=f32,
        ),
    ),
    Example(
        "scatternd_add", "ScatterND", {16: {"reduction": "add"}},
        (_SC_DATA.astype(f32), np.array([[0], [0]], dtype=i64), _SC_UPDATES.astype(f32)),
        np.array(
            [[[7, 8, 9, 10], [13, 14, 15, 16], [18, 17, 16, 15], [16, 15, 14, 13]]]
            + [_SC_DATA[i].tolist() for i in (1, 2, 3)],
            dtype=f32,
        ),
        erratum=_SC_COMMENT_ERRATUM,
    ),
    Example(
        "scatternd_multiply", "ScatterND", {16: {"reduction": "mul"}},
        (_SC_DATA.astype(f32), np.array([[0], [0]], dtype=i64), _SC_UPDATES.astype(f32)),
        np.array(
            [[[5, 10, 15, 20], [60, 72, 84, 96], [168, 147, 126, 105], [128, 96, 64, 32]]]
            + [_SC_DATA[i].tolist() for i in (1, 2, 3)],
            dtype=f32,
        ),
        erratum=_SC_COMMENT_ERRATUM,
    ),
]

# -- GatherElements (GatherElements-11-13.md.txt), ScatterElements (ScatterElements-11-13-16-18.md.txt),
#    Scatter (Scatter-9-11.md.txt) ---------------------------------------------------------------

_GE_OUTPUT_ERRATUM = ("GatherElements-11 prints the output inside one more pair of brackets (shape (1, 2, 2)); "
                      "the text's own rule ('Tensor of the same shape as indices') gives (2, 2), which is "
                      "what GatherElements-13 prints")
GATHER_ELEMENTS_EXAMPLES = [
    Example("gather_elements_0", "GatherElements", {11: {"axis": 1}, 13: {"axis": 1}},
            (np.array([[1, 2], [3, 4]], dtype=f32), np.array([[0, 0], [1, 0]], dtype=i64)),
            np.array([[1, 1], [4, 3]], dtype=f32), erratum=_GE_OUTPUT_ERRATUM),
    Example("gather_elements_1", "GatherElements", {11: {"axis": 0}, 13: {"axis": 0}},
            (np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], dtype=f32), np.array([[1, 2, 0], [2, 0, 0]], dtype=i32)),
            np.array([[4, 8, 3], [7, 2, 3]], dtype=f32), erratum=_GE_OUTPUT_ERRATUM),
]
_SE_1 = (np.zeros((3, 3), dtype=f32), np.array([[1, 0, 2], [0, 2, 1]], dtype=i64),
         np.array([[1.0, 1.1, 1.2], [2.0, 2.1, 2.2]], dtype=f32))
_SE_1_OUT = np.array([[2.0, 1.1, 0.0], [1.0, 0.0, 2.2], [0.0, 2.1, 1.2]], dtype=f32)
_SE_2 = (np.array([[1.0, 2.0, 3.0, 4.0, 5.0]], dtype=f32), np.array([[1, 3]], dtype=i64),
         np.array([[1.1, 2.1]], dtype=f32))
_SE_2_OUT = np.array([[1.0, 1.1, 3.0, 2.1, 5.0]], dtype=f32)
SCATTER_ELEMENTS_EXAMPLES = [
    Example("scatter_elements_1", "ScatterElements", {11: {}, 13: {}, 16: {}, 18: {}}, _SE_1, _SE_1_OUT),
    Example("scatter_elements_2", "ScatterElements", {v: {"axis": 1} for v in (11, 13, 16, 18)}, _SE_2, _SE_2_OUT),
    Example("scatter_1", "Scatter", {9: {}}, _SE_1, _SE_1_OUT),
    Example("scatter_2", "Scatter", {9: {"axis": 1}}, _SE_2, _SE_2_OUT),
]

EXAMPLES = (GATHER_EXAMPLES + GATHER_ND_EXAMPLES + MS_GATHER_ND_EXAMPLES + SCATTER_ND_EXAMPLES
            + GATHER_ELEMENTS_EXAMPLES + SCATTER_ELEMENTS_EXAMPLES)
PAIRS = [(ex, version) for ex in EXAMPLES for version in ex.printed_at]
ORACLE = {"Gather": oracle.gather, "GatherND": oracle.gather_nd, "ScatterND": oracle.scatter_nd,
          "GatherElements": oracle.gather_elements, "ScatterElements": oracle.scatter_elements,
          "Scatter": oracle.scatter}
KERNELS = {"Gather": gather, "GatherND": gather_nd, "ScatterND": scatter_nd, "GatherElements": gather_elements,
           "ScatterElements": scatter_elements, "Scatter": scatter_elements}


def _assert_exact(actual: np.ndarray, expected: np.ndarray) -> None:
    assert isinstance(actual, np.ndarray)
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected, strict=True)


def test_the_table_holds_every_printed_pair():
    # 10 Gather + 17 GatherND + 6 com.microsoft GatherND + 9 ScatterND printings; 4 GatherElements
    # + 8 ScatterElements + 2 Scatter-9 (TensorScatter-24 prints pseudocode, no example: its loop
    # is tests/oracle.py's tensor_scatter).
    assert len(PAIRS) == 56
    assert len({ex.name for ex in EXAMPLES}) == len(EXAMPLES)


@pytest.mark.parametrize(
    ("example", "version"),
    PAIRS,
    ids=[f"{ex.domain + '.' if ex.domain else ''}{ex.op}-{v}-{ex.name}" for ex, v in PAIRS],
)
def test_printed_example_at_its_version(example: Example, version: int):
    before = [np.copy(x) for x in example.inputs]
    out = run_node(
        example.op, list(example.inputs), example.printed_at[version], opset=version, domain=example.domain
    )
    _assert_exact(out, example.expected)
    for x, y in zip(before, example.inputs):  # examples share arrays: none may be written
        np.testing.assert_array_equal(x, y, strict=True)


@pytest.mark.parametrize("example", EXAMPLES, ids=[ex.name for ex in EXAMPLES])
def test_printed_example_through_the_public_kernel(example: Example):
    newest_attrs = example.printed_at[max(example.printed_at)]
    _assert_exact(KERNELS[example.op](*example.inputs, **newest_attrs), example.expected)


def test_gather_axis1_erratum_printed_shape_is_not_the_result():
    # Gather-1/11 print output shape (1, 3, 2); the semantics give (3, 1, 2) at every version.
    data, indices = GATHER_EXAMPLES[1].inputs
    for opset in (1, 11, 13):
        out = run_node("Gather", [data, indices], {"axis": 1}, opset=opset)
        assert out.shape == (3, 1, 2)
        np.testing.assert_array_equal(out, np.take(data, indices, axis=1), strict=True)


def test_com_microsoft_int32_batchdim_1_example_is_rejected():
    # The .md prints this example under com.microsoft GatherND-1, whose schema has no
    # batch_dims attribute (spec/README.md: "no batch_dims"): run_node must refuse it.
    data = _ND_2x2x2.astype(i32)
    indices = np.array([[1], [0]], dtype=i64)
    with pytest.raises(InvalidAttributeError, match=r"^com\.microsoft\.GatherND-1: has no attribute 'batch_dims'") as info:
        run_node("GatherND", [data, indices], {"batch_dims": 1}, opset=1, domain="com.microsoft")
    err = info.value
    assert (err.op, err.since_version, err.input, err.value) == ("GatherND", 1, "batch_dims", 1)


def test_scatter_example_is_refused_where_scatter_no_longer_exists():
    # Scatter-9-11.md.txt prints the examples again under Scatter-11, which is DEPRECATED: the
    # operator does not exist from opset 11 (ScatterElements replaces it).
    for opset in (11, 13, 18):
        with pytest.raises(UnsupportedOpError, match="use ScatterElements, which replaces it"):
            run_node("Scatter", list(_SE_1), opset=opset)


@pytest.mark.parametrize(
    ("example", "version"),
    PAIRS,
    ids=[f"{ex.domain + '.' if ex.domain else ''}{ex.op}-{v}-{ex.name}" for ex, v in PAIRS],
)
def test_loop_oracle_gives_the_printed_output(example: Example, version: int):
    # The oracle (tests/oracle.py) is written from the same texts: on every printed example it
    # must give what is printed (with the same errata), or it is the oracle that is wrong.
    oracle.assert_same(ORACLE[example.op](*example.inputs, **example.printed_at[version]), example.expected)


@pytest.mark.parametrize("example", [ex for ex in SCATTER_ELEMENTS_EXAMPLES if ex.op == "Scatter"],
                         ids=lambda ex: ex.name)
def test_scatter_9_examples_at_opset_10(example: Example):
    # Scatter-9 is the version in effect at opsets 9 and 10 (Scatter-9-11.md.txt; README).
    out = run_node("Scatter", list(example.inputs), example.printed_at[9], opset=10)
    _assert_exact(out, example.expected)
