"""infer_shape for every operator version: a table of (op, opset, shapes, dtypes, attrs) with the
expected (shape, dtype) or error, and the parity check that the kernel raises the same error
(class and message) for real arrays of the same static shapes."""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np
import pytest

from gather_scatter import (
    ArityError,
    DTypeError,
    InvalidAttributeError,
    OutputTooLargeError,
    ShapeError,
    UnsupportedOpError,
    infer_shape,
    run_node,
)

F32, F16, I32, I64, I16 = (np.dtype(t) for t in (np.float32, np.float16, np.int32, np.int64, np.int16))
BF16, OBJ, C64 = np.dtype(ml_dtypes.bfloat16), np.dtype(object), np.dtype(np.complex64)
MS = "com.microsoft"


class Case(NamedTuple):
    id: str
    op: str
    opset: int
    shapes: list
    dtypes: list | None = None
    attrs: dict | None = None
    domain: str = ""
    # A shape (tuple or None) and dtype; or an exception class with a message pattern.
    expected_shape: Any = None
    expected_dtype: Any = None
    error: type | None = None
    message: str = ""


def ok(id, op, opset, shapes, shape, dtypes=None, dtype=None, attrs=None, domain=""):
    return Case(id, op, opset, shapes, dtypes, attrs, domain, shape, dtype)


def err(id, op, opset, shapes, error, message, dtypes=None, attrs=None, domain=""):
    return Case(id, op, opset, shapes, dtypes, attrs, domain, error=error, message=message)


CASES = [
    # Gather 1 / 11 / 13
    ok("gather1-symbols", "Gather", 1, [["N", 256], ["B", "T"]], ("B", "T", 256)),
    ok("gather11-neg-axis", "Gather", 11, [[2, "C", 4], [5]], (2, "C", 5), attrs={"axis": -1}),
    ok("gather13-scalar-indices", "Gather", 13, [[3, 4], []], (3,), attrs={"axis": 1}),
    ok("gather13-zero-dims", "Gather", 13, [[0, 3], [0]], (0, 3), [F32, I32], F32),
    ok("gather13-unknown-dims", "Gather", 13, [[None, 3], [2, None]], (2, None, 3)),
    ok("gather13-data-rank-unknown", "Gather", 13, [None, [2]], None, attrs={"axis": 5}),
    ok("gather13-indices-rank-unknown", "Gather", 13, [[2, 3], None], None),
    ok("gather13-bfloat16", "Gather", 13, [[4], [2]], (2,), [BF16, I64], BF16),
    ok("gather13-huge-dims-no-overflow", "Gather", 13, [[2**62, 3], [1]], (1, 3), [F32, I64], F32),
    err("gather1-scalar-data", "Gather", 1, [[], [2]], ShapeError, r"Gather-1: data must have rank >= 1, got shape \(\)"),
    err("gather11-axis", "Gather", 11, [[2, 3], [1]], InvalidAttributeError,
        r"Gather-11: axis = 2 is out of range for data of rank 2 \(valid range \[-2, 1\]\)", attrs={"axis": 2}),
    err("gather13-axis-neg", "Gather", 13, [["N", 3], [1]], InvalidAttributeError, r"axis = -3 is out of range", attrs={"axis": -3}),
    err("gather11-bfloat16", "Gather", 11, [[4], [2]], DTypeError, r"Gather-11: data has type tensor\(bfloat16\)", [BF16, I64]),
    err("gather13-int16-indices", "Gather", 13, [[4], [2]], DTypeError, r"indices has type tensor\(int16\)", [F32, I16]),
    err("gather13-opset-too-new", "Gather", 29, [[4], [2]], UnsupportedOpError, r"opset 29 .* newer"),
    err("gather13-arity", "Gather", 13, [[4]], ArityError, r"Gather-13: takes 2 inputs \(data, indices\), got 1"),
    err("gather13-output-beyond-int64", "Gather", 13, [[2**40, 2**40], [2**40]], OutputTooLargeError,
        r"output of shape \(1099511627776, 1099511627776\) and dtype float64 would take \d+ bytes.*int64", [np.float64, I64]),
    err("gather13-bad-dim", "Gather", 13, [[2, -1], [1]], ShapeError, r"data shape \(2, -1\) has an invalid dimension -1 at 1"),
    # GatherND 11 / 12 / 13
    ok("gathernd11", "GatherND", 11, [[2, 3, 4], [5, 2]], (5, 4), [F32, I64], F32),
    ok("gathernd11-full-index", "GatherND", 11, [[2, 3], ["M", 2]], ("M",)),
    ok("gathernd12-batch", "GatherND", 12, [["B", 3, 4], [None, 6, 1]], ("B", 6, 4), attrs={"batch_dims": 1}),
    ok("gathernd12-batch-symbols-differ", "GatherND", 12, [["B", 3], ["C", 1]], ("C",), attrs={"batch_dims": 1}),
    ok("gathernd13-k-unknown", "GatherND", 13, [[2, 3], [5, "K"]], None),
    ok("gathernd13-data-rank-unknown", "GatherND", 13, [None, [5, 2]], None),
    ok("gathernd13-zero-dims", "GatherND", 13, [[0, 3, 4], [0, 1]], (0, 3, 4), [BF16, I64], BF16),
    err("gathernd11-batch-dims-attr", "GatherND", 11, [[2, 3], [1, 1]], InvalidAttributeError,
        r"GatherND-11: has no attribute 'batch_dims' .*added in GatherND-12", attrs={"batch_dims": 0}),
    err("gathernd12-batch-dims-range", "GatherND", 12, [[2, 3, 4], [2, 1]], InvalidAttributeError,
        r"GatherND-12: batch_dims = 2 must be in \[0, 1\]", attrs={"batch_dims": 2}),
    err("gathernd13-batch-dims-negative", "GatherND", 13, [[2, 3], [2, 1]], InvalidAttributeError,
        r"batch_dims = -1 must be in \[0, 1\]", attrs={"batch_dims": -1}),
    err("gathernd13-batch-dims-rank-unknown", "GatherND", 13, [None, [2, 1]], InvalidAttributeError,
        r"batch_dims = 2 must be in \[0, 1\]", attrs={"batch_dims": 2}),
    err("gathernd12-batch-differ", "GatherND", 12, [[2, 3, 4], [3, 1, 1]], ShapeError,
        r"GatherND-12: batch dimension 0 differs: data.shape\[0\] = 2 but indices.shape\[0\] = 3", attrs={"batch_dims": 1}),
    err("gathernd13-k-too-big", "GatherND", 13, [[2, 3], [1, 3]], ShapeError,
        r"GatherND-13: indices.shape\[-1\] = 3 must be in \[1, 2\] .*data shape \(2, 3\), indices shape \(1, 3\)"),
    err("gathernd13-k-too-big-batch", "GatherND", 13, [[2, 3, 4], [2, 3]], ShapeError,
        r"indices.shape\[-1\] = 3 must be in \[1, 2\]", attrs={"batch_dims": 1}),
    err("gathernd13-k-zero", "GatherND", 13, [[2, 3], [4, 0]], ShapeError, r"indices.shape\[-1\] = 0 must be in \[1, 2\]"),
    err("gathernd13-k-zero-data-rank-unknown", "GatherND", 13, [None, [4, 0]], ShapeError,
        r"indices.shape\[-1\] = 0 must be in \[1, rank\(data\) - batch_dims\]"),
    err("gathernd13-scalar-indices", "GatherND", 13, [[2, 3], []], ShapeError, r"indices must have rank >= 1, got shape \(\)"),
    err("gathernd13-int32-indices", "GatherND", 13, [[2, 3], [1, 1]], DTypeError,
        r"GatherND-13: indices has type tensor\(int32\), .*allowed: tensor\(int64\)", [F32, I32]),
    err("gathernd12-bfloat16", "GatherND", 12, [[2, 3], [1, 1]], DTypeError, r"data has type tensor\(bfloat16\)", [BF16, I64]),
    err("gathernd-opset-too-old", "GatherND", 10, [[2], [1, 1]], UnsupportedOpError, r"predates the operator \(first version 11\)"),
    # com.microsoft GatherND 1
    ok("ms-gathernd-int32", "GatherND", 1, [[2, 3, 4], ["Q", 1]], ("Q", 3, 4), [F16, I32], F16, domain=MS),
    ok("ms-gathernd-int64", "GatherND", 1, [[2, 3], [4, 2]], (4,), [I64, I64], I64, domain=MS),
    err("ms-gathernd-batch-dims", "GatherND", 1, [[2, 3], [1, 1]], InvalidAttributeError,
        r"com.microsoft.GatherND-1: has no attribute 'batch_dims'", attrs={"batch_dims": 0}, domain=MS),
    err("ms-gathernd-bfloat16", "GatherND", 1, [[2, 3], [1, 1]], DTypeError, r"com.microsoft.GatherND-1: data has type tensor\(bfloat16\)",
        [BF16, I64], domain=MS),
    err("ms-gathernd-k-too-big", "GatherND", 1, [[2], [1, 2]], ShapeError, r"indices.shape\[-1\] = 2 must be in \[1, 1\]", domain=MS),
    # ScatterND 11 / 13 / 16 / 18
    ok("scatternd11", "ScatterND", 11, [[4, 5], [3, 1], [3, 5]], (4, 5), [F32, I64, F32], F32),
    ok("scatternd13-k0", "ScatterND", 13, [[4, 5], [3, 0], [3, 4, 5]], (4, 5)),
    ok("scatternd13-symbols", "ScatterND", 13, [["N", 5], [3, 1], [3, "M"]], ("N", 5)),
    ok("scatternd16-data-rank-unknown", "ScatterND", 16, [None, [5, 1], [5, 7]], (None, 7), attrs={"reduction": "add"}),
    ok("scatternd16-fill-from-updates", "ScatterND", 16, [[None, None], [5, 1], [5, 7]], (None, 7)),
    ok("scatternd18-k-from-ranks", "ScatterND", 18, [[4, None, 6], [3, None], [3, 6]], (4, None, 6)),
    ok("scatternd18-max-f16", "ScatterND", 18, [[4], [2, 1], [2]], (4,), [F16, I64, F16], F16, attrs={"reduction": "max"}),
    ok("scatternd18-zero", "ScatterND", 18, [[0, 3], [0, 1], [0, 3]], (0, 3), [OBJ, I64, OBJ], OBJ),
    err("scatternd11-updates", "ScatterND", 11, [[4, 5], [3, 1], [3, 4]], ShapeError,
        r"ScatterND-11: updates shape \(3, 4\) must equal indices.shape\[:-1\] \+ data.shape\[k:\] = \(3, 5\) with k = 1 "
        r"\(data shape \(4, 5\), indices shape \(3, 1\)\)"),
    err("scatternd13-updates-rank", "ScatterND", 13, [[4, 5], [3, 2], [3, 5]], ShapeError, r"updates shape \(3, 5\) must equal .* = \(3,\)"),
    err("scatternd13-k-too-big", "ScatterND", 13, [[4], [2, 2], [2]], ShapeError, r"indices.shape\[-1\] = 2 must be in \[0, 1\]"),
    err("scatternd16-updates-prefix-rank-unknown", "ScatterND", 16, [None, [3, 2], [4, 5]], ShapeError,
        r"updates shape \(4, 5\) must equal .* = \(3,\) \+ \(unknown\) with k = 2"),
    err("scatternd16-k-from-ranks", "ScatterND", 16, [[4, 5, 6], [3, None], [3, 7]], ShapeError,
        r"= \(3, 6\) with k = \? \(2 by the ranks\)"),
    err("scatternd16-no-k-fits", "ScatterND", 16, [[4], [3, None], [3, 4, 4]], ShapeError, r"no k in \[0, rank\(data\)\] fits"),
    err("scatternd11-reduction-attr", "ScatterND", 11, [[4], [1, 1], [1]], InvalidAttributeError,
        r"ScatterND-11: has no attribute 'reduction' .*added in ScatterND-16", attrs={"reduction": "add"}),
    err("scatternd16-max", "ScatterND", 16, [[4], [1, 1], [1]], InvalidAttributeError,
        r"ScatterND-16: reduction = 'max' is not accepted \(accepted: 'none', 'add', 'mul'\)", attrs={"reduction": "max"}),
    err("scatternd18-string-mul", "ScatterND", 18, [[4], [1, 1], [1]], DTypeError,
        r"reduction 'mul' is not defined for tensor\(string\)", [OBJ, I64, OBJ], {"reduction": "mul"}),
    err("scatternd18-complex-min", "ScatterND", 18, [[4], [1, 1], [1]], DTypeError,
        r"reduction 'min' is not defined for tensor\(complex64\)", [C64, I64, C64], {"reduction": "min"}),
    err("scatternd18-updates-dtype", "ScatterND", 18, [[4], [1, 1], [1]], DTypeError,
        r"updates has type tensor\(float16\) but data has tensor\(float\)", [F32, I64, F16]),
    err("scatternd11-bfloat16", "ScatterND", 11, [[4], [1, 1], [1]], DTypeError, r"ScatterND-11: data has type tensor\(bfloat16\)",
        [BF16, I64, BF16]),
    err("scatternd18-int32-indices", "ScatterND", 18, [[4], [1, 1], [1]], DTypeError, r"indices has type tensor\(int32\)", [F32, I32, F32]),
    # Order as in the kernel: the shape error is found before the bad reduction value.
    err("scatternd18-shape-before-reduction", "ScatterND", 18, [[4], [1, 2], [1]], ShapeError,
        r"indices.shape\[-1\] = 2", attrs={"reduction": "sum"}),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_infer_shape_table(case):
    call = lambda: infer_shape(case.op, case.shapes, case.dtypes, case.attrs, opset=case.opset, domain=case.domain)  # noqa: E731
    if case.error is not None:
        with pytest.raises(case.error, match=case.message):
            call()
    else:
        assert call() == (case.expected_shape, case.expected_dtype)


def _static(case: Case) -> bool:
    return all(
        s is not None and all(isinstance(d, int) and d >= 0 for d in s) and math.prod(s) <= 10_000 for s in case.shapes
    )


def _arrays(case: Case) -> list[np.ndarray]:
    dtypes = case.dtypes or [F32, I64, F32][: len(case.shapes)]
    # Zero indices are in bounds for every non-empty axis, so only shape/type faults remain.
    return [np.zeros(s, dtype=d) if d != OBJ else np.full(s, "", dtype=object) for s, d in zip(case.shapes, dtypes)]


RUNNABLE = [c for c in CASES if _static(c)]


@pytest.mark.parametrize("case", RUNNABLE, ids=[c.id for c in RUNNABLE])
def test_kernel_agrees_with_infer_shape(case):
    """Same class and the very same message at run time; same shape and dtype on success."""
    inputs = _arrays(case)
    run = lambda: run_node(case.op, inputs, case.attrs, opset=case.opset, domain=case.domain)  # noqa: E731
    if case.error is not None:
        with pytest.raises(case.error) as static:
            infer_shape(case.op, case.shapes, [a.dtype for a in inputs], case.attrs, opset=case.opset, domain=case.domain)
        with pytest.raises(case.error) as dynamic:
            run()
        assert str(dynamic.value) == str(static.value)
    else:
        out = run()
        shape, dtype = infer_shape(
            case.op, case.shapes, [a.dtype for a in inputs], case.attrs, opset=case.opset, domain=case.domain
        )
        assert (out.shape, out.dtype) == (shape, dtype)


def test_most_error_cases_are_checked_at_run_time():
    runnable_errors = [c for c in RUNNABLE if c.error is not None]
    assert len(runnable_errors) >= 30


def test_error_names_the_shapes():
    with pytest.raises(ShapeError) as e:
        infer_shape("GatherND", [["B", 3, 4], [2, "K", 4]], opset=13, attrs={"batch_dims": 1})
    assert re.search(r"data shape \('B', 3, 4\), indices shape \(2, 'K', 4\)", str(e.value))
    assert (e.value.op, e.value.since_version, e.value.input, e.value.value) == ("GatherND", 13, "indices", 4)


@pytest.mark.parametrize("shape", ["NT", b"NT", bytearray(b"NT"), 5, 2.0, np.int64(3), np.array(5), {4, 3}, {4: 0, 3: 0},
                                   iter([4, 3]), np.zeros((2, 2), np.int64)],
                         ids=["str", "bytes", "bytearray", "int", "float", "np-int", "0-d-array", "set", "dict", "iterator",
                              "2-d-array"])
@pytest.mark.parametrize("position", [0, 1])
def test_a_shape_that_is_not_a_sequence_is_a_shape_error(shape, position):
    # "NT" used to be read as the two dims ('N', 'T'), 5 and a 0-d array raised a bare TypeError, and
    # {4, 3} was read in the set's order, (3, 4).
    shapes = [[4, 3], [2]]
    shapes[position] = shape
    with pytest.raises(ShapeError) as info:
        infer_shape("Gather", shapes, opset=13)
    name = ("data", "indices")[position]
    assert str(info.value) == (f"Gather-13: {name} shape must be a sequence of dims (or None for an unknown rank), "
                               f"got {shape!r}")
    assert (info.value.input, info.value.value) == (name, shape)


@pytest.mark.parametrize("shape", [[4, 3], (4, 3), range(4, 2, -1), np.array([4, 3]), [np.int32(4), np.uint64(3)]],
                         ids=["list", "tuple", "range", "1-d-array", "numpy-ints"])
def test_ordered_sequences_of_dims_are_shapes(shape):
    assert infer_shape("Gather", [shape, ["K"]], [np.float32, np.int64], opset=13) == (("K", 3), np.dtype(np.float32))


@pytest.mark.parametrize(("dtypes", "expected"), [
    ([1, 7], F32),  # onnx.TensorProto.FLOAT, INT64: raised NumPy's "Cannot interpret '1' as a data type"
    (["tensor(float)", "tensor(int64)"], F32),  # raised "data type 'tensor(float)' not understood"
    ([np.int64(16), "tensor(int32)"], BF16),
    (["tensor(string)", 6], OBJ),
    ([11, np.int64], np.dtype(np.float64)),
    (["float16", "int64"], F16),  # NumPy names, as before
], ids=["numbers", "type-strings", "numpy-int-number", "string-type", "number-and-numpy", "numpy-names"])
def test_dtypes_as_onnx_element_type_numbers_and_strings(dtypes, expected):
    import onnx

    assert onnx.TensorProto.FLOAT == 1 and onnx.TensorProto.INT64 == 7
    assert infer_shape("GatherElements", [[3, 5], [3, 2]], dtypes, opset=13) == ((3, 2), expected)


@pytest.mark.parametrize(("dtype", "message"), [
    (99, "GatherElements-13: data dtype 99 is not an ONNX element type number (those of onnx.TensorProto run from 1, "
         "FLOAT, to "),
    (0, "GatherElements-13: data dtype 0 is not an ONNX element type number"),  # UNDEFINED
    ("tensor(floaty)", "GatherElements-13: data dtype 'tensor(floaty)' names no ONNX element type (pass a NumPy dtype"),
    ("nonsense", "GatherElements-13: data dtype 'nonsense' is not a dtype (pass a NumPy dtype or its name ('float32'), "
                 "an ONNX element type number (onnx.TensorProto.FLOAT) or its type string ('tensor(float)'))"),
    (1.5, "GatherElements-13: data dtype 1.5 is not a dtype"),
    (True, "GatherElements-13: data dtype True is not a dtype"),
    ([1], "GatherElements-13: data dtype [1] is not a dtype"),
], ids=["unknown-number", "undefined", "unknown-type-string", "unknown-name", "float", "bool", "list"])
def test_anything_else_as_a_dtype_is_a_dtype_error(dtype, message):
    with pytest.raises(DTypeError) as info:
        infer_shape("GatherElements", [[3, 5], [3, 2]], [dtype, 7], opset=13)
    assert str(info.value).startswith(message), str(info.value)
    assert (info.value.input, info.value.op, info.value.since_version) == ("data", "GatherElements", 13)
