"""Named tables of invalid inputs -> error class, whole-message pattern and fields.

Every row runs through the public kernel (``gather``/``gather_nd``/``scatter_nd``) and through
``run_node`` at the newest opset, which resolves to the same versions (Gather-13, GatherND-13,
ScatterND-18): both must raise the same error. Each row also checks that no input was
modified. Version-specific refusals (attributes, types, opsets) are in ``test_versions.py``.
"""

from __future__ import annotations

import copy
import pickle
import re
import subprocess
import sys

import numpy as np
import pytest
from error_check import BUILTIN, assert_error

from gather_scatter import (
    ArityError,
    DTypeError,
    GatherScatterError,
    IndexOutOfBoundsError,
    InvalidAttributeError,
    NodeError,
    OutputTooLargeError,
    ShapeError,
    UnsupportedOpError,
    errors,
    gather,
    gather_nd,
    run_node,
    scatter_nd,
)
from gather_scatter.resources.memory import set_memory_limit
from gather_scatter.rules.versions import LATEST_OPSET

KERNELS = {"Gather": gather, "GatherND": gather_nd, "ScatterND": scatter_nd}
VERSION = {"Gather": 13, "GatherND": 13, "ScatterND": 18}

i64, i32, f32 = np.int64, np.int32, np.float32


def A(values, dtype=i64):
    return np.array(values, dtype=dtype)


def _oob(where, value, axis, size, op="Gather"):
    """The one out-of-bounds message, and its fields (``where`` is the position tuple)."""
    shown = f"indices[{', '.join(map(str, where))}]" if where else "indices (a scalar)"
    rng = f"valid range [{-size}, {size - 1}]" if size else "the axis is empty: no index is valid"
    message = f"{op}-{VERSION[op]}: {shown} = {value} is out of bounds for data axis {axis} of size {size} ({rng})"
    fields = dict(input="indices", position=tuple(where), value=value, axis=axis,
                  valid_range=(-size, size - 1) if size else None)
    return re.escape(message), fields


def row(id, op, inputs, attrs, cls, pattern, **fields):
    fields = {"op": op, "since_version": VERSION[op], **fields}
    return pytest.param(op, inputs, attrs, cls, pattern, fields, id=id)


def oob_row(id, op, inputs, attrs, where, value, axis, size):
    pattern, fields = _oob(where, value, axis, size, op)
    return row(id, op, inputs, attrs, IndexOutOfBoundsError, pattern, **fields)


_D34 = np.arange(12.0, dtype=f32).reshape(3, 4)
_D45 = np.arange(20, dtype=i64).reshape(4, 5)
_ALL_TYPES = (
    "(allowed: tensor(bfloat16), tensor(bool), tensor(complex128), tensor(complex64), tensor(double), "
    "tensor(float), tensor(float16), tensor(int16), tensor(int32), tensor(int64), tensor(int8), "
    "tensor(string), tensor(uint16), tensor(uint32), tensor(uint64), tensor(uint8))"
)
_GATHER_TIND = "(allowed: tensor(int32), tensor(int64))"
_INT64_ONLY = "(allowed: tensor(int64))"


def _dtype_row(id, op, inputs, input, shown, allowed):
    pattern = re.escape(f"{op}-{VERSION[op]}: {input} has type {shown}, which this version does not allow {allowed}")
    return row(id, op, inputs, {}, DTypeError, pattern, input=input, value=shown)


OUT_OF_BOUNDS = [
    oob_row("gather-positive", "Gather", [_D34, A([0, 3])], {}, (1,), 3, 0, 3),
    oob_row("gather-negative", "Gather", [_D34, A([[-4, 0]])], {}, (0, 0), -4, 0, 3),
    # Row-major order: (0, 1) = -9 comes before (1, 0) = 7, though 7 is the larger violation.
    oob_row("gather-first-in-row-major", "Gather", [_D34, A([[0, -9], [7, 0]])], {}, (0, 1), -9, 0, 3),
    oob_row("gather-first-in-row-major-hi", "Gather", [_D34, A([[0, 1], [5, -7]])], {}, (1, 0), 5, 0, 3),
    # A transposed view: row-major order is the view's, not memory's.
    oob_row("gather-transposed-indices", "Gather", [_D34, A([[0, 5], [7, 0]]).T], {}, (0, 1), 7, 0, 3),
    oob_row("gather-axis1", "Gather", [_D34, A([4])], {"axis": 1}, (0,), 4, 1, 4),
    oob_row("gather-negative-axis-reports-normalized-axis", "Gather", [_D34, A([-5])], {"axis": -1}, (0,), -5, 1, 4),
    oob_row("gather-int32-indices", "Gather", [_D34, A([1, 2, 3], i32)], {}, (2,), 3, 0, 3),
    oob_row("gather-rank0-indices", "Gather", [_D34, A(5)], {}, (), 5, 0, 3),
    oob_row("gather-rank0-indices-negative", "Gather", [_D34, A(-4)], {}, (), -4, 0, 3),
    oob_row("gather-empty-axis", "Gather", [np.zeros((0, 2)), A([0])], {}, (0,), 0, 0, 0),
    oob_row("gather-byteswapped-indices", "Gather", [_D34, A([1, 3]).astype(">i8")], {}, (1,), 3, 0, 3),
    # GatherND: component j of a tuple indexes data axis b + j.
    oob_row("gathernd-component1-axis1", "GatherND", [_D45, A([[[0, 0]], [[1, 7]]])], {}, (1, 0, 1), 7, 1, 5),
    oob_row("gathernd-component0-axis0", "GatherND", [_D45, A([[3, 4], [4, 4]])], {}, (1, 0), 4, 0, 4),
    oob_row("gathernd-negative", "GatherND", [_D45, A([[0, -6]])], {}, (0, 1), -6, 1, 5),
    oob_row("gathernd-first-in-row-major", "GatherND", [_D45, A([[0, 9], [9, 0]])], {}, (0, 1), 9, 1, 5),
    oob_row("gathernd-batch_dims-shifts-axis", "GatherND", [np.zeros((2, 3, 5)), A([[[0, 1]], [[2, 7]]])],
            {"batch_dims": 1}, (1, 0, 1), 7, 2, 5),
    oob_row("gathernd-empty-axis", "GatherND", [np.zeros((0, 3)), A([[0]])], {}, (0, 0), 0, 0, 0),
    oob_row("scatternd-positive", "ScatterND", [np.zeros(4), A([[1], [4]]), np.ones(2)], {}, (1, 0), 4, 0, 4),
    oob_row("scatternd-negative", "ScatterND", [np.zeros(4), A([[-5], [1]]), np.ones(2)], {}, (0, 0), -5, 0, 4),
    oob_row("scatternd-component1", "ScatterND", [np.zeros((2, 3)), A([[1, 2], [0, 3]]), np.ones(2)], {},
            (1, 1), 3, 1, 3),
    oob_row("scatternd-with-reduction", "ScatterND", [np.zeros(4), A([[1], [4]]), np.ones(2)],
            {"reduction": "add"}, (1, 0), 4, 0, 4),
    oob_row("scatternd-empty-axis", "ScatterND", [np.zeros((0, 2)), A([[0]]), np.ones((1, 2))], {}, (0, 0), 0, 0, 0),
]

SHAPES = [
    row("gather-rank0-data", "Gather", [np.float32(1.0), A([0])], {}, ShapeError,
        re.escape("Gather-13: data must have rank >= 1, got shape ()"), input="data", value=0),
    row("gathernd-rank0-data", "GatherND", [np.array(1.0), A([[0]])], {}, ShapeError,
        re.escape("GatherND-13: data must have rank >= 1, got shape ()"), input="data", value=0),
    row("gathernd-rank0-indices", "GatherND", [_D45, A(0)], {}, ShapeError,
        re.escape("GatherND-13: indices must have rank >= 1, got shape ()"), input="indices", value=0),
    row("scatternd-rank0-data", "ScatterND", [np.array(1.0), A([[0]]), np.ones(1)], {}, ShapeError,
        re.escape("ScatterND-18: data must have rank >= 1, got shape ()"), input="data", value=0),
    row("scatternd-rank0-indices", "ScatterND", [np.zeros(3), A(0), np.ones(1)], {}, ShapeError,
        re.escape("ScatterND-18: indices must have rank >= 1, got shape ()"), input="indices", value=0),
    row("gathernd-batch-dims-differ", "GatherND", [np.zeros((2, 3, 4)), A([[0], [1], [2]])], {"batch_dims": 1},
        ShapeError,
        re.escape("GatherND-13: batch dimension 0 differs: data.shape[0] = 2 but indices.shape[0] = 3 "
                  "(data shape (2, 3, 4), indices shape (3, 1))"),
        input="indices", position=(0,), value=3),
    row("gathernd-k-0", "GatherND", [_D45, np.zeros((2, 0), i64)], {}, ShapeError,
        re.escape("GatherND-13: indices.shape[-1] = 0 must be in [1, 2] (1 to rank(data) - batch_dims; "
                  "data shape (4, 5), indices shape (2, 0))"),
        input="indices", position=(1,), value=0, valid_range=(1, 2)),
    row("gathernd-k-above-rank", "GatherND", [_D45, A([[0, 0, 0]])], {}, ShapeError,
        re.escape("GatherND-13: indices.shape[-1] = 3 must be in [1, 2] (1 to rank(data) - batch_dims; "
                  "data shape (4, 5), indices shape (1, 3))"),
        input="indices", position=(1,), value=3, valid_range=(1, 2)),
    row("gathernd-k-above-rank-minus-batch_dims", "GatherND", [np.zeros((2, 3, 4)), A([[0, 0, 0], [0, 0, 0]])],
        {"batch_dims": 1}, ShapeError,
        re.escape("GatherND-13: indices.shape[-1] = 3 must be in [1, 2] (1 to rank(data) - batch_dims; "
                  "data shape (2, 3, 4), indices shape (2, 3))"),
        input="indices", position=(1,), value=3, valid_range=(1, 2)),
    row("scatternd-k-above-rank", "ScatterND", [np.zeros(4), A([[0, 0]]), np.ones(1)], {}, ShapeError,
        re.escape("ScatterND-18: indices.shape[-1] = 2 must be in [0, 1] (0 to rank(data); "
                  "data shape (4,), indices shape (1, 2))"),
        input="indices", position=(1,), value=2, valid_range=(0, 1)),
    row("scatternd-updates-shape", "ScatterND", [np.zeros((4, 4)), A([[0], [1]]), np.ones((2, 3))], {}, ShapeError,
        re.escape("ScatterND-18: updates shape (2, 3) must equal indices.shape[:-1] + data.shape[k:] = (2, 4) "
                  "with k = 1 (data shape (4, 4), indices shape (2, 1))"),
        input="updates", value=(2, 3)),
    row("scatternd-updates-rank", "ScatterND", [np.zeros((4, 4)), A([[0], [1]]), np.ones((2, 4, 1))], {},
        ShapeError,
        re.escape("ScatterND-18: updates shape (2, 4, 1) must equal indices.shape[:-1] + data.shape[k:] = (2, 4) "
                  "with k = 1 (data shape (4, 4), indices shape (2, 1))"),
        input="updates", value=(2, 4, 1)),
    row("scatternd-k-0-updates-shape", "ScatterND", [np.zeros(3), np.zeros((2, 0), i64), np.ones((2, 2))], {},
        ShapeError,
        re.escape("ScatterND-18: updates shape (2, 2) must equal indices.shape[:-1] + data.shape[k:] = (2, 3) "
                  "with k = 0 (data shape (3,), indices shape (2, 0))"),
        input="updates", value=(2, 2)),
]

ATTRIBUTES = [
    *[
        row(f"gather-axis-{axis}", "Gather", [_D34, A([0])], {"axis": axis}, InvalidAttributeError,
            re.escape(f"Gather-13: axis = {axis} is out of range for data of rank 2 (valid range [-2, 1])"),
            input="axis", value=axis, valid_range=(-2, 1))
        for axis in (2, -3)
    ],
    *[
        row(f"gather-axis-{name}", "Gather", [_D34, A([0])], {"axis": axis}, InvalidAttributeError,
            re.escape(f"Gather-13: attribute axis must be an int, got {axis!r}"), input="axis", value=axis)
        for name, axis in [("float", 1.0), ("bool", True), ("str", "0")]
    ],
    *[
        row(f"gathernd-batch_dims-{b}", "GatherND", [np.zeros((2, 2, 2)), A([[1], [0]])], {"batch_dims": b},
            InvalidAttributeError,
            re.escape(f"GatherND-13: batch_dims = {b} must be in [0, 1] (below min(rank(data), rank(indices)); "
                      "data shape (2, 2, 2), indices shape (2, 1))"),
            input="batch_dims", value=b, valid_range=(0, 1))
        for b in (2, -1)
    ],
    *[
        row(f"gathernd-batch_dims-{name}", "GatherND", [np.zeros((2, 2, 2)), A([[1], [0]])], {"batch_dims": b},
            InvalidAttributeError,
            re.escape(f"GatherND-13: attribute batch_dims must be an int, got {b!r}"), input="batch_dims", value=b)
        for name, b in [("float", 1.0), ("str", "1"), ("none", None)]
    ],
    *[
        row(f"scatternd-reduction-{name}", "ScatterND", [np.zeros(2), A([[0]]), np.ones(1)], {"reduction": r},
            InvalidAttributeError,
            re.escape(f"ScatterND-18: reduction = {shown!r} is not accepted "
                      "(accepted: 'none', 'add', 'mul', 'max', 'min')"),
            input="reduction", value=shown)
        for name, r, shown in [("sum", "sum", "sum"), ("ADD", "ADD", "ADD"), ("bytes-sum", b"sum", "sum"),
                               ("empty", "", ""), ("bytes-not-utf8", b"\xff", "\\xff"), ("none", None, None)]
    ],
]

DTYPES = [
    _dtype_row("gather-float-indices", "Gather", [_D34, np.array([0.0])], "indices", "tensor(double)", _GATHER_TIND),
    _dtype_row("gather-float32-indices", "Gather", [_D34, np.array([0.0], f32)], "indices", "tensor(float)",
               _GATHER_TIND),
    _dtype_row("gather-uint64-indices", "Gather", [_D34, A([0], np.uint64)], "indices", "tensor(uint64)", _GATHER_TIND),
    _dtype_row("gather-int16-indices", "Gather", [_D34, A([0], np.int16)], "indices", "tensor(int16)", _GATHER_TIND),
    _dtype_row("gather-bool-indices", "Gather", [_D34, np.array([True])], "indices", "tensor(bool)", _GATHER_TIND),
    _dtype_row("gather-string-list-indices", "Gather", [_D34, ["0"]], "indices", "tensor(string)", _GATHER_TIND),
    _dtype_row("gathernd-uint64-indices", "GatherND", [_D45, A([[0]], np.uint64)], "indices", "tensor(uint64)",
               _INT64_ONLY),
    _dtype_row("gathernd-int32-indices", "GatherND", [_D45, A([[0]], i32)], "indices", "tensor(int32)", _INT64_ONLY),
    _dtype_row("scatternd-float-indices", "ScatterND", [np.zeros(2), np.array([[0.0]]), np.ones(1)], "indices",
               "tensor(double)", _INT64_ONLY),
    _dtype_row("gather-datetime64-data", "Gather", [np.zeros(3, "datetime64[D]"), A([0])], "data",
               "NumPy dtype datetime64[D]", _ALL_TYPES),
    _dtype_row("gathernd-longdouble-data", "GatherND", [np.zeros(3, np.longdouble), A([[0]])], "data",
               f"NumPy dtype {np.dtype(np.longdouble)}", _ALL_TYPES),
    _dtype_row("scatternd-timedelta64-data", "ScatterND",
               [np.zeros(2, "timedelta64[s]"), A([[0]]), np.zeros(1, "timedelta64[s]")], "data",
               "NumPy dtype timedelta64[s]", _ALL_TYPES),
    row("scatternd-updates-dtype-differs", "ScatterND", [np.zeros(2, f32), A([[0]]), np.ones(1)], {}, DTypeError,
        re.escape("ScatterND-18: updates has type tensor(double) but data has tensor(float); they must match"),
        input="updates", value="double"),
    row("scatternd-updates-int-into-float", "ScatterND", [np.zeros(2), A([[0]]), A([1])], {}, DTypeError,
        re.escape("ScatterND-18: updates has type tensor(int64) but data has tensor(double); they must match"),
        input="updates", value="int64"),
    *[
        row(f"scatternd-string-mul-{kind}", "ScatterND", [data, A([[0]]), np.array(["x"], dtype=data.dtype)],
            {"reduction": "mul"}, DTypeError,
            re.escape("ScatterND-18: reduction 'mul' is not defined for tensor(string) (strings cannot be multiplied)"),
            input="data", value="string")
        for kind, data in [("object", np.array(["a", "b"], dtype=object)), ("unicode", np.array(["a", "b"]))]
    ],
    *[
        row(f"scatternd-{dt.__name__}-{r}", "ScatterND", [np.zeros(2, dt), A([[0]]), np.ones(1, dt)],
            {"reduction": r}, DTypeError,
            re.escape(f"ScatterND-18: reduction '{r}' is not defined for tensor({dt.__name__}) "
                      "(complex numbers have no order)"),
            input="data", value=dt.__name__)
        for dt, r in [(np.complex64, "max"), (np.complex128, "min")]
    ],
]

# Inputs NumPy cannot turn into an array: a typed error, never a raw NumPy exception.
NOT_ARRAYS = [
    row("gather-ragged-data", "Gather", [[[1, 2], [3]], A([0])], {}, DTypeError,
        r"Gather-13: data cannot be read as an array \(.+\)", input="data"),
    row("gathernd-ragged-indices", "GatherND", [_D45, [[0, 1], [2]]], {}, DTypeError,
        r"GatherND-13: indices cannot be read as an array \(.+\)", input="indices"),
    row("scatternd-ragged-updates", "ScatterND", [np.zeros((2, 2)), A([[0]]), [[1.0, 2.0, 3.0], [4.0]]], {},
        DTypeError, r"ScatterND-18: updates cannot be read as an array \(.+\)", input="updates"),
]

TABLE = OUT_OF_BOUNDS + SHAPES + ATTRIBUTES + DTYPES + NOT_ARRAYS


def _snapshot(inputs):
    return copy.deepcopy(inputs)


def _assert_unchanged(before, after):
    for b, a in zip(before, after):
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b, strict=True)
        else:
            assert a == b


def _call(via, op, inputs, attrs):
    if via == "kernel":
        return KERNELS[op](*inputs, **attrs)
    return run_node(op, inputs, attrs, opset=LATEST_OPSET[""])


@pytest.mark.parametrize("via", ["kernel", "run_node"])
@pytest.mark.parametrize(("op", "inputs", "attrs", "cls", "pattern", "fields"), TABLE)
def test_error_table(via, op, inputs, attrs, cls, pattern, fields):
    before = _snapshot(inputs)
    with pytest.raises(GatherScatterError) as info:
        _call(via, op, inputs, attrs)
    assert_error(info.value, cls, pattern, fields)
    _assert_unchanged(before, inputs)


def test_the_issue_example_message():
    data = np.zeros((2, 3, 5), dtype=f32)
    indices = A([[[0, 1]], [[2, 7]]])  # batch 1, tuple (2, 7): component 1 indexes data axis 1 + 1
    expected = "GatherND-13: indices[1, 0, 1] = 7 is out of bounds for data axis 2 of size 5 (valid range [-5, 4])"
    for call in (lambda: gather_nd(data, indices, batch_dims=1),
                 lambda: run_node("GatherND", [data, indices], {"batch_dims": 1}, opset=13)):
        with pytest.raises(IndexError) as info:
            call()
        assert str(info.value) == expected
        assert_error(info.value, IndexOutOfBoundsError, re.escape(expected),
                     dict(op="GatherND", since_version=13, input="indices", position=(1, 0, 1), value=7,
                          axis=2, valid_range=(-5, 4)))


def test_output_too_large():
    previous = set_memory_limit(100)
    try:
        with pytest.raises(MemoryError) as info:
            gather(np.zeros(4), np.zeros(13, dtype=i64))  # 13 float64 = 104 bytes
    finally:
        set_memory_limit(previous)
    assert_error(
        info.value, OutputTooLargeError,
        re.escape("Gather-13: output of shape (13,) and dtype float64 would take 104 bytes, more than the "
                  "memory limit of 100 bytes (see gather_scatter.set_memory_limit)"),
        dict(op="Gather", since_version=13, input="output", value=104, valid_range=(0, 100)),
    )


def test_run_node_only_errors():
    with pytest.raises(ArityError) as info:
        run_node("ScatterND", [np.zeros(2), A([[0]])], opset=18)
    assert_error(info.value, ArityError, re.escape("ScatterND-18: takes 3 inputs (data, indices, updates), got 2; "
                                                   "missing: updates"),
                 dict(op="ScatterND", since_version=18, value=2))
    with pytest.raises(UnsupportedOpError) as info:
        run_node("Scatter", [np.zeros(2), A([0]), np.ones(1)], opset=11)
    assert_error(info.value, UnsupportedOpError, r"Scatter: opset 11 of domain ai\.onnx has no Scatter: .*; use "
                 "ScatterElements, which replaces it", dict(op="Scatter", input="opset", value=11))
    with pytest.raises(ArityError) as info:
        run_node("TensorScatter", [np.zeros((1, 2))], opset=24)
    assert_error(info.value, ArityError, re.escape("TensorScatter-24: takes 2 to 3 inputs (past_cache, update, "
                                                   "write_indices, the last 1 optional), got 1; missing: update"),
                 dict(op="TensorScatter", since_version=24, value=1))


def test_every_error_class_is_a_gather_scatter_error_and_its_builtin():
    classes = {IndexOutOfBoundsError, ShapeError, InvalidAttributeError, DTypeError, UnsupportedOpError,
               OutputTooLargeError, ArityError, NodeError}
    assert set(BUILTIN) == classes
    for cls, builtin in BUILTIN.items():
        assert issubclass(cls, GatherScatterError) and issubclass(cls, builtin)
    # Every class is raised by some row of the tables above (or its own test).
    raised = {p.values[3] for p in TABLE} | {OutputTooLargeError, UnsupportedOpError, ArityError}
    raised |= {NodeError}  # raised only inside a model: tests/test_reference.py
    assert raised == classes


def test_builtin_except_clauses_catch_our_errors():
    with pytest.raises(IndexError):
        gather(np.arange(3), A([3]))
    with pytest.raises(ValueError):
        gather_nd(np.arange(3), A([[0, 0]]))
    with pytest.raises(TypeError):
        gather(np.arange(3), np.array([0.5]))
    with pytest.raises(LookupError):
        run_node("Gather", [np.arange(3), A([0])], opset=0)


# -- inputs are never written -------------------------------------------------------------------

_REDUCE = {"none": lambda a, b: b, "add": lambda a, b: a + b, "mul": lambda a, b: a * b, "max": max, "min": min}


_SUCCESS = [
    pytest.param(dtype, reduction, id=f"{name}-{reduction}")
    for dtype, name in [(np.float32, "float32"), (np.int64, "int64"), (np.bool_, "bool"), (object, "string")]
    for reduction in _REDUCE
    if not (dtype is object and reduction == "mul")  # refused for strings: in the error table
]


@pytest.mark.parametrize(("dtype", "reduction"), _SUCCESS)
def test_scatter_nd_leaves_data_unchanged_on_success(dtype, reduction):
    if dtype is object:
        data = np.array([["a", "b"], ["c", "d"]], dtype=object)
        updates = np.array([["x", "y"], ["z", "w"]], dtype=object)
    else:
        data = np.array([[1, 0], [3, 4]]).astype(dtype)
        updates = np.array([[5, 1], [0, 2]]).astype(dtype)
    indices = A([[1], [1]])
    inputs = [data, indices, updates]
    before = _snapshot(inputs)
    out = scatter_nd(*inputs, reduction=reduction)
    _assert_unchanged(before, inputs)
    assert not np.shares_memory(out, data)
    # The spec's loop in Python terms (bool: + is or, * is and once cast back; strings: + joins).
    expected = data.tolist()
    for update in updates.tolist():
        expected[1] = [_REDUCE[reduction](a, b) for a, b in zip(expected[1], update)]
    np.testing.assert_array_equal(out, np.array(expected).astype(dtype), strict=True)


def test_scatter_nd_with_k_0_replaces_the_whole_tensor():
    # spec/README.md: indices.shape[-1] == 0 is allowed for ScatterND; each update is all of data.
    data = np.arange(3.0)
    out = scatter_nd(data, np.zeros((2, 0), i64), np.array([[7.0, 8.0, 9.0], [1.0, 2.0, 3.0]]))
    np.testing.assert_array_equal(out, [1.0, 2.0, 3.0], strict=True)
    out = scatter_nd(data, np.zeros((2, 0), i64), np.array([[7.0, 8.0, 9.0], [1.0, 2.0, 3.0]]), reduction="add")
    np.testing.assert_array_equal(out, [8.0, 11.0, 14.0], strict=True)
    np.testing.assert_array_equal(data, [0.0, 1.0, 2.0], strict=True)


def test_empty_indices_on_an_empty_axis_are_not_an_error():
    out = gather(np.zeros((0, 2)), np.zeros((0,), i64))
    assert out.shape == (0, 2)
    out = gather_nd(np.zeros((0, 2)), np.zeros((0, 1), i64))
    assert out.shape == (0, 2)


def test_import_loads_no_optional_backend():
    code = "import gather_scatter, sys; assert 'torch' not in sys.modules and 'onnxruntime' not in sys.modules"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


_FIELDS = dict(op="Gather", since_version=13, input="indices", position=(1, 2), value=7, valid_range=(-5, 4), axis=1)


@pytest.mark.parametrize("cls", [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, Exception)
                                 and c.__module__ == errors.__name__], ids=lambda c: c.__name__)
@pytest.mark.parametrize("how", ["in_node", "pickle", "copy", "deepcopy"])
def test_every_error_class_survives_in_node_pickling_and_copying(cls, how):
    # OutputTooLargeError (a MemoryError) used to fail all four: MemoryError.__new__ is "not safe".
    err = cls("the message", **_FIELDS)
    if how == "in_node":
        got, message, node = err.in_node("read", "Gather"), "node 'read' (Gather): the message", "read"
    else:
        copier = {"pickle": lambda e: pickle.loads(pickle.dumps(e)), "copy": copy.copy, "deepcopy": copy.deepcopy}[how]
        got, message, node = copier(err), "the message", None
    assert type(got) is cls and got is not err
    assert str(got) == message == got.message and got.args == (message,)
    assert {k: getattr(got, k) for k in _FIELDS} == _FIELDS and got.node == node
    assert str(err) == "the message" and err.node is None  # the original is left as it was
