"""Hostile and odd inputs: huge (zero-stride) shapes, int64-overflowing dims, zero dims, and
indices that are non-contiguous, read-only, byte-swapped or of another integer type. Each
case has its expected result or error class and message pattern. Cases that could allocate
terabytes if the check failed run in a subprocess under an address-space cap, so a failure
there is a MemoryError in the child, never a dead pytest or a swapping machine.
"""

from __future__ import annotations

import os
import re
import resource  # noqa: F401 - the child uses it; import here fails early off POSIX
import subprocess
import sys
from typing import Any, Callable, NamedTuple

import numpy as np
import pytest

from gather_scatter import (
    ArityError,
    DTypeError,
    IndexOutOfBoundsError,
    InvalidAttributeError,
    OutputTooLargeError,
    ShapeError,
    UnsupportedOpError,
    gather,
    gather_elements,
    gather_nd,
    infer_shape,
    run_node,
    scatter_elements,
    scatter_nd,
    set_memory_limit,
    tensor_scatter,
)

TB = np.broadcast_to(np.float32(0), (10**6, 10**6))  # 4 TB of data, no memory
MS = "com.microsoft"


class Case(NamedTuple):
    id: str
    call: Callable[[], Any]
    expected: Any  # an ndarray (value and dtype), a tuple (an infer_shape result), or (error class, pattern)
    isolate: bool = False  # run in a capped subprocess
    env: dict | None = None  # extra environment for the subprocess


def _readonly(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.flags.writeable = False
    return a


def _with_limit(nbytes: int, call: Callable[[], Any]) -> Callable[[], Any]:
    def run():
        previous = set_memory_limit(nbytes)
        try:
            return call()
        finally:
            set_memory_limit(previous)

    return run


A = np.arange(12, dtype=np.float32).reshape(3, 4)
I2 = np.array([[2], [0]])

CASES = [
    # Outputs far beyond memory: refused before allocating, in the child under a 2 GiB cap.
    Case("gather-4TB-output", lambda: gather(TB, np.broadcast_to(np.int64(0), (10**6,))),
         (OutputTooLargeError, r"Gather-13: output of shape \(1000000, 1000000\) and dtype float32 would take "
                               r"4000000000000 bytes, more than the memory limit"), isolate=True),
    Case("gather_nd-4TB-output", lambda: gather_nd(TB, np.broadcast_to(np.int64(0), (10**6, 1))),
         (OutputTooLargeError, r"GatherND-13: output of shape \(1000000, 1000000\)"), isolate=True),
    Case("scatter_nd-4TB-copy", lambda: scatter_nd(TB, np.zeros((1, 2), np.int64), np.zeros(1, np.float32)),
         (OutputTooLargeError, r"ScatterND-18: output of shape \(1000000, 1000000\) .* 4000000000000 bytes"), isolate=True),
    Case("run_node-gather1-huge-string-output", lambda: run_node(
            "Gather", [np.broadcast_to(np.array("x", dtype=object), (10**5, 10**5)), np.zeros(10**5, np.int64)],
            opset=1),
         (OutputTooLargeError, r"Gather-1: output of shape \(100000, 100000\) and dtype object would take 80000000000 bytes"),
         isolate=True),
    # Small outputs from 4 TB broadcast data: indexed where it lies, never copied whole.
    Case("gather-small-output-of-4TB-data", lambda: gather(TB, np.array([[1, -2]]), axis=1),
         np.zeros((10**6, 1, 2), np.float32), isolate=True),
    Case("gather_nd-small-output-of-4TB-data", lambda: gather_nd(TB, np.array([[1, 2], [-1, -1]])),
         np.zeros(2, np.float32), isolate=True),
    Case("env-limit", lambda: gather(np.zeros(10), np.zeros(1000, np.int64)),
         (OutputTooLargeError, r"8000 bytes, more than the memory limit of 4096 bytes"),
         isolate=True, env={"GATHER_SCATTER_MEMORY_LIMIT": "4096"}),
    # A bad variable is ignored with one warning (tests/test_config.py), never a failed call.
    Case("env-limit-garbage", lambda: gather(np.zeros(10), np.zeros(10**6, np.int64)),
         np.zeros(10**6), isolate=True, env={"GATHER_SCATTER_MEMORY_LIMIT": "4k"}),
    Case("set_memory_limit", _with_limit(1000, lambda: scatter_nd(np.zeros(200), I2, np.ones(2))),
         (OutputTooLargeError, r"ScatterND-18: output of shape \(200,\) and dtype float64 would take 1600 bytes, "
                               r"more than the memory limit of 1000 bytes")),
    Case("set_memory_limit-exact-fit", _with_limit(96, lambda: gather(np.ones(3), np.zeros((3, 4), np.int64))),
         np.ones((3, 4))),
    # Shape-only inference with dims whose products overflow int64: Python ints, typed error.
    Case("infer-output-beyond-int64", lambda: infer_shape("GatherND", [[2**40, 2**40, 2**40], [2**40, 1]], opset=13),
         (OutputTooLargeError, r"output of shape \(1099511627776, 1099511627776, 1099511627776\) would take "
                               r"1329227995784915872903807060280344576 bytes, more than 9223372036854775807 bytes")),
    Case("infer-huge-but-addressable", lambda: infer_shape("Gather", [[2**62, 2], [3]], [np.int8, np.int64], opset=13),
         ((3, 2), np.dtype(np.int8))),
    Case("infer-huge-symbolic", lambda: infer_shape("ScatterND", [[2**62, 2**62, "N"], [1, 2], [1, "N"]], opset=18),
         ((2**62, 2**62, "N"), None)),
    # Zero dimensions.
    Case("gather-empty-indices", lambda: gather(np.zeros((0, 3), np.int8), np.zeros(0, np.int32)),
         np.zeros((0, 3), np.int8)),
    Case("gather-empty-axis", lambda: gather(np.zeros((0, 3)), np.array([0])),
         (IndexOutOfBoundsError, r"indices\[0\] = 0 is out of bounds for data axis 0 of size 0 \(the axis is empty")),
    Case("gather_nd-empty-batch", lambda: gather_nd(np.zeros((0, 3, 4)), np.zeros((0, 5, 1), np.int64), batch_dims=1),
         np.zeros((0, 5, 4))),
    Case("gather_nd-zero-trailing", lambda: gather_nd(np.zeros((3, 0)), np.array([[2], [1]])), np.zeros((2, 0))),
    Case("scatter_nd-no-updates", lambda: scatter_nd(A, np.zeros((0, 1), np.int64), np.zeros((0, 4), np.float32)), A),
    Case("scatter_nd-zero-slice", lambda: scatter_nd(np.zeros((3, 0)), I2, np.zeros((2, 0))), np.zeros((3, 0))),
    # Odd index arrays the versions allow: converted.
    Case("indices-non-contiguous", lambda: gather(np.arange(10), np.arange(10)[::-3]), np.array([9, 6, 3, 0])),
    Case("indices-zero-stride", lambda: gather_nd(A, np.broadcast_to(np.array([1, 2]), (3, 2))),
         np.array([6, 6, 6], np.float32)),
    Case("indices-read-only", lambda: scatter_nd(_readonly(A), _readonly(I2), _readonly(np.ones((2, 4), np.float32))),
         np.array([[1, 1, 1, 1], [4, 5, 6, 7], [1, 1, 1, 1]], np.float32)),
    Case("indices-big-endian-int64", lambda: gather_nd(A, np.array([[2, -1], [0, 1]], dtype=">i8")),
         np.array([11, 1], np.float32)),
    Case("indices-big-endian-int32", lambda: gather(A, np.array([-1, 0], dtype=">i4"), axis=1),
         np.array([[3, 0], [7, 4], [11, 8]], np.float32)),
    Case("indices-fortran-order", lambda: gather_nd(A, np.asfortranarray([[2, 3], [1, 0]])), np.array([11, 4], np.float32)),
    Case("indices-python-list", lambda: run_node("ScatterND", [A, [[1]], np.zeros((1, 4), np.float32)], opset=11),
         np.array([[0, 1, 2, 3], [0, 0, 0, 0], [8, 9, 10, 11]], np.float32)),
    Case("ms-gathernd-int32", lambda: run_node("GatherND", [A, np.array([[1]], np.int32)], opset=1, domain=MS),
         np.array([[4, 5, 6, 7]], np.float32)),
    # ... and those they do not: DTypeError naming the type.
    Case("indices-int16", lambda: gather(A, np.array([0], np.int16)),
         (DTypeError, r"Gather-13: indices has type tensor\(int16\), which this version does not allow "
                      r"\(allowed: tensor\(int32\), tensor\(int64\)\)")),
    Case("indices-uint64", lambda: gather(A, np.array([0], np.uint64)), (DTypeError, r"indices has type tensor\(uint64\)")),
    Case("indices-bool", lambda: gather(A, np.array([True])), (DTypeError, r"indices has type tensor\(bool\)")),
    Case("indices-float", lambda: gather_nd(A, np.array([[0.0]])), (DTypeError, r"indices has type tensor\(double\)")),
    Case("indices-int32-gathernd13", lambda: gather_nd(A, np.array([[0]], np.int32)),
         (DTypeError, r"GatherND-13: indices has type tensor\(int32\).*allowed: tensor\(int64\)")),
    Case("indices-big-endian-int32-scatternd", lambda: scatter_nd(A, np.array([[0]], ">i4"), np.ones((1, 4), np.float32)),
         (DTypeError, r"ScatterND-18: indices has type tensor\(int32\)")),
    Case("indices-ragged", lambda: gather(A, [[0], [1, 2]]), (DTypeError, r"Gather-13: indices cannot be read as an array")),
    Case("indices-objects", lambda: gather(A, np.array([0, None], dtype=object)),
         (DTypeError, r"Gather-13: indices\[0\] = 0 is an int, but indices is an object array, which stands for "
                      r"tensor\(string\) and may hold only str or bytes")),
    # Ints beyond 64 bits in a list or scalar: NumPy holds them as objects, not as strings.
    *[Case(f"huge-int-{name}", call, (DTypeError, rf"^{re.escape(message)} does not fit exactly in {dtype}, the type"))
      for name, call, message, dtype in [
          ("gather-list", lambda: gather(A, [2**70]), "Gather-13: indices[0] = 1180591620717411303424", "int64"),
          ("gather-scalar", lambda: gather(A, 2**70), "Gather-13: indices = 1180591620717411303424", "int64"),
          ("gather-second", lambda: gather(A, [[1, -(2**70)]]), "Gather-13: indices[0, 1] = -1180591620717411303424",
           "int64"),
          ("gather-as-float", lambda: gather(A, [-1, 2**63]), "Gather-13: indices[1] = 9223372036854775808", "int64"),
          ("gather_nd", lambda: gather_nd(A, [[0, 2**64]]), "GatherND-13: indices[0, 1] = 18446744073709551616",
           "int64"),
          ("scatter_nd-indices", lambda: scatter_nd(A, [[2**70]], np.ones((1, 4), np.float32)),
           "ScatterND-18: indices[0, 0] = 1180591620717411303424", "int64"),
          ("scatter_nd-updates", lambda: scatter_nd(np.zeros(3, np.int64), [[0], [1]], [1, 2**70]),
           "ScatterND-18: updates[1] = 1180591620717411303424", "int64"),
          ("scatter_nd-updates-uint64", lambda: scatter_nd(np.zeros(3, np.uint64), [[0]], [2**64]),
           "ScatterND-18: updates[0] = 18446744073709551616", "uint64"),
          ("scatter_nd-updates-float", lambda: scatter_nd(np.zeros(3), [[0]], [2**70 + 1]),
           "ScatterND-18: updates[0] = 1180591620717411303425", "float64"),
          ("gather_elements", lambda: gather_elements(A, [[2**70]]),
           "GatherElements-13: indices[0, 0] = 1180591620717411303424", "int64"),
          ("scatter_elements-indices", lambda: scatter_elements(A, [[2**70]], np.ones((1, 1), np.float32)),
           "ScatterElements-18: indices[0, 0] = 1180591620717411303424", "int64"),
          ("scatter_elements-updates", lambda: scatter_elements(np.zeros(3, np.int32), [0], [2**70]),
           "ScatterElements-18: updates[0] = 1180591620717411303424", "int32"),
          ("tensor_scatter-write", lambda: tensor_scatter(np.zeros((2, 4, 1)), np.ones((2, 1, 1)), [0, 2**70]),
           "TensorScatter-24: write_indices[1] = 1180591620717411303424", "int64"),
          ("tensor_scatter-update", lambda: tensor_scatter(np.zeros((1, 4, 1), np.int64), [[[2**70]]]),
           "TensorScatter-24: update[0, 0, 0] = 1180591620717411303424", "int64"),
          ("run_node", lambda: run_node("Gather", [A, [2**70]], opset=1), "Gather-1: indices[0] = 1180591620717411303424",
           "int64"),
      ]],
    Case("huge-int-fits-a-float", lambda: scatter_nd(np.zeros(2), [[0]], [2**70]), np.array([2.0**70, 0])),
    # Object arrays are tensor(string): items that are not str or bytes are refused, never computed on.
    Case("object-ints-data", lambda: scatter_elements(np.array([1, 2, 3], dtype=object), [0],
                                                      np.array([5], dtype=object), reduction="add"),
         (DTypeError, r"^ScatterElements-18: data\[0\] = 1 is an int, but data is an object array, which stands for "
                      r"tensor\(string\) and may hold only str or bytes; for numbers pass an array of a numeric dtype")),
    Case("object-int-among-strings", lambda: scatter_nd(np.array(["a", "b"], dtype=object), [[0], [1]],
                                                        np.array(["x", 7], dtype=object), reduction="add"),
         (DTypeError, r"^ScatterND-18: updates\[1\] = 7 is an int, but updates is an object array")),
    Case("object-none", lambda: gather(np.array([["a", "b"], ["c", None]], dtype=object), [1]),
         (DTypeError, r"^Gather-13: data\[1, 1\] = None is a NoneType, but data is an object array")),
    Case("object-broadcast-ints", lambda: gather(np.broadcast_to(np.array(5, dtype=object), (10**5, 10**5)), [0]),
         (DTypeError, r"^Gather-13: data\[0, 0\] = 5 is an int, but data is an object array")),
    Case("object-0-d-string", lambda: scatter_nd(np.array(["a", "b"], dtype=object), np.array([0]),
                                                  np.array("x", dtype=object)), np.array(["x", "b"], object)),
    Case("object-0-d-int", lambda: scatter_nd(np.array(["a", "b"], dtype=object), np.array([0]), np.array(3, dtype=object)),
         (DTypeError, r"^ScatterND-18: updates = 3 is an int, but updates is an object array")),
    Case("object-str-and-bytes", lambda: gather(np.array(["a", b"b"], dtype=object), [1]), np.array([b"b"], object)),
    Case("list-str-and-int", lambda: gather(["a", 1], [1]),  # NumPy alone makes it ['a', '1']
         (DTypeError, r"^Gather-13: data\[1\] = 1 is an int, but data is a list mixing strings with other values, "
                      r"which stands for tensor\(string\)")),
    Case("list-str-and-int-updates", lambda: scatter_nd(np.array(["a", "b"], dtype=object), [[0]], [3]),
         (DTypeError, r"^ScatterND-18: updates has type tensor\(int64\) but data has tensor\(string\)")),
    Case("list-huge-int-data", lambda: gather([2**70, 1], [0]),
         (DTypeError, r"^Gather-13: data\[0\] = 1180591620717411303424 is an int, but data is a list that NumPy can "
                      r"only hold as objects, which stands for tensor\(string\) .* \(no NumPy number type holds")),
    # Extreme index values: bounds, not wrap-around or overflow.
    Case("index-int64-max", lambda: gather(A, np.array([2**63 - 1])),
         (IndexOutOfBoundsError, r"indices\[0\] = 9223372036854775807 is out of bounds for data axis 0 of size 3")),
    Case("index-int64-min", lambda: gather_nd(A, np.array([[0, -(2**63)]])),
         (IndexOutOfBoundsError, r"indices\[0, 1\] = -9223372036854775808 is out of bounds for data axis 1 of size 4")),
    # -- the family: GatherElements, ScatterElements, Scatter, TensorScatter ----------------------
    Case("gather_elements-rank-mismatch", lambda: gather_elements(A, np.array([0, 1])),
         (ShapeError, r"GatherElements-13: indices must have the rank of data \(2\), got shape \(2,\)")),
    Case("gather_elements-wider-than-data", lambda: gather_elements(A, np.zeros((4, 2), np.int64), axis=1),
         (ShapeError, r"GatherElements-13: indices.shape\[0\] = 4 exceeds data.shape\[0\] = 3 \(off the axis")),
    Case("gather_elements-narrower-is-fine", lambda: gather_elements(A, np.array([[3, -4]]), axis=1),
         np.array([[3, 0]], np.float32)),
    Case("gather_elements-long-axis", lambda: gather_elements(A, np.zeros((3, 100), np.int64) - 1, axis=1),
         np.full((3, 100), 3, np.float32) + np.array([[0], [4], [8]], np.float32)),
    Case("gather_elements-int64-max", lambda: gather_elements(A, np.array([[0], [2**63 - 1]]), axis=1),
         (IndexOutOfBoundsError, r"indices\[1, 0\] = 9223372036854775807 is out of bounds for data axis 1 of size 4")),
    Case("gather_elements-4TB-output", lambda: gather_elements(TB, np.broadcast_to(np.int64(0), (10**6, 10**6))),
         (OutputTooLargeError, r"GatherElements-13: output of shape \(1000000, 1000000\)"), isolate=True),
    Case("scatter_elements-4TB-copy", lambda: scatter_elements(TB, np.zeros((1, 1), np.int64), np.zeros((1, 1), np.float32)),
         (OutputTooLargeError, r"ScatterElements-18: output of shape \(1000000, 1000000\)"), isolate=True),
    Case("scatter_elements-updates-shape", lambda: scatter_elements(A, np.zeros((1, 4), np.int64), np.zeros((1, 3), np.float32)),
         (ShapeError, r"ScatterElements-18: updates shape \(1, 3\) must equal indices shape \(1, 4\)")),
    Case("scatter_elements-read-only-in-place", lambda: scatter_elements(_readonly(A), I2.T, np.ones((1, 2), np.float32),
                                                                        out=_readonly(A)),
         (InvalidAttributeError, r"ScatterElements-18: out is read-only")),
    Case("scatter_elements-strided-data", lambda: scatter_elements(A[:, ::2], np.array([[1, 0]]), np.ones((1, 2), np.float32)),
         np.array([[0, 1], [1, 6], [8, 10]], np.float32)),
    Case("scatter-at-opset-11", lambda: run_node("Scatter", [A, I2, np.ones((2, 1), np.float32)], opset=11),
         (UnsupportedOpError, r"Scatter: opset 11 of domain ai.onnx has no Scatter: .* use ScatterElements")),
    Case("tensor_scatter-write-past-cache", lambda: tensor_scatter(np.zeros((2, 4, 1)), np.ones((2, 2, 1)), np.array([2, 3])),
         (IndexOutOfBoundsError, r"TensorScatter-24: write_indices\[1\] = 3 is out of bounds for the sequence axis 1 of size 4 "
                                 r"\(valid range \[0, 2\]: linear mode needs")),
    Case("tensor_scatter-negative-write", lambda: tensor_scatter(np.zeros((2, 4, 1)), np.ones((2, 2, 1)), np.array([-1, 0]),
                                                                 mode="circular"),
         (IndexOutOfBoundsError, r"write_indices\[0\] = -1 is out of bounds .* write indices must be >= 0 in either mode")),
    Case("tensor_scatter-circular-wraps", lambda: tensor_scatter(np.zeros((1, 4, 1)), np.ones((1, 2, 1)), np.array([11]),
                                                                 mode="circular")[0, :, 0],
         np.array([1.0, 0.0, 0.0, 1.0])),
    Case("tensor_scatter-longer-update", lambda: tensor_scatter(np.zeros((1, 4, 1)), np.ones((1, 5, 1))),
         (ShapeError, r"update.shape\[1\] = 5 but past_cache.shape\[1\] = 4 \(sequence_length must be <= max_sequence_length")),
    Case("tensor_scatter-axis-0", lambda: tensor_scatter(np.zeros((1, 4, 1)), np.ones((1, 4, 1)), axis=0),
         (InvalidAttributeError, r"TensorScatter-24: axis = 0 is the batch axis 0")),
    Case("tensor_scatter-rank-mismatch", lambda: tensor_scatter(np.zeros((1, 2, 3)), np.zeros((1, 2))),
         (ShapeError, r"^TensorScatter-24: update must have the rank of past_cache \(3\), got shape \(1, 2\) "
                      r"\(past_cache shape \(1, 2, 3\)\)$")),
    Case("tensor_scatter-rank-1", lambda: tensor_scatter(np.zeros(4), np.ones(1), axis=-1),
         (ShapeError, r"TensorScatter-24: past_cache must have rank >= 2")),
    Case("tensor_scatter-4TB-copy", lambda: tensor_scatter(TB, np.zeros((10**6, 1), np.float32), axis=1),
         (OutputTooLargeError, r"TensorScatter-24: output of shape \(1000000, 1000000\)"), isolate=True),
    Case("tensor_scatter-int32-write", lambda: tensor_scatter(np.zeros((1, 4, 1)), np.ones((1, 1, 1)), np.array([0], np.int32)),
         (DTypeError, r"TensorScatter-24: write_indices has type tensor\(int32\)")),
    # A required input given as None is an input left out (issue 26 item 14: it said None "is a list").
    *[Case(f"none-{name}", call, (ArityError, rf"^{re.escape(message)} is None, but it is a required input: pass an array$"))
      for name, call, message in [
          ("run_node-indices", lambda: run_node("Gather", [A, None], opset=13), "Gather-13: indices"),
          ("run_node-data", lambda: run_node("GatherND", [None, np.array([[0]])], opset=12), "GatherND-12: data"),
          ("scatter_nd-updates", lambda: run_node("ScatterND", [A, np.array([[0]]), None], opset=11),
           "ScatterND-11: updates"),
          ("gather", lambda: gather(A, None), "Gather-13: indices"),
          ("gather_elements", lambda: gather_elements(A, None), "GatherElements-13: indices"),
          ("scatter_elements", lambda: scatter_elements(A, [[0]], None), "ScatterElements-18: updates"),
          ("tensor_scatter-update", lambda: tensor_scatter(np.zeros((1, 4, 1)), None), "TensorScatter-24: update"),
      ]],
    # ... where an input is optional, None leaves it out: TensorScatter's write_indices.
    Case("none-tensor_scatter-write_indices", lambda: tensor_scatter(np.zeros((1, 2, 1)), np.ones((1, 1, 1)), None)[0, :, 0],
         np.array([1.0, 0.0])),
]


def _check(case: Case, outcome: Any) -> None:
    if isinstance(case.expected, tuple) and len(case.expected) == 2 and isinstance(case.expected[0], type):
        error, pattern = case.expected
        assert isinstance(outcome, error), f"expected {error.__name__}, got {outcome!r}"
        assert re.search(pattern, str(outcome)), str(outcome)
    elif isinstance(case.expected, np.ndarray):
        assert isinstance(outcome, np.ndarray), outcome
        assert outcome.dtype == case.expected.dtype and outcome.shape == case.expected.shape
        np.testing.assert_array_equal(outcome, case.expected)
    else:
        assert outcome == case.expected


def _outcome(case: Case) -> Any:
    try:
        return case.call()
    except Exception as exc:  # noqa: BLE001 - the table says which exception is right
        return exc


# Child: cap the address space, run one case and check its outcome there.
_CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
sys.path.insert(0, {tests!r})
import test_hostile_inputs as t
case = t.CASES_BY_ID[{id!r}]
out = t._outcome(case)
t._check(case, out)
print("checked:", type(out).__name__)
"""

CASES_BY_ID = {c.id: c for c in CASES}


def test_table_is_big_enough():
    assert len(CASES) >= 20 and len(CASES_BY_ID) == len(CASES)


@pytest.mark.parametrize("case", [c for c in CASES if not c.isolate], ids=lambda c: c.id)
def test_in_process(case):
    _check(case, _outcome(case))


@pytest.mark.parametrize("case", [c for c in CASES if c.isolate], ids=lambda c: c.id)
def test_in_capped_subprocess(case):
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", **(case.env or {})}
    code = _CHILD.format(tests=os.path.dirname(__file__), id=case.id)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("checked:"), proc.stdout
