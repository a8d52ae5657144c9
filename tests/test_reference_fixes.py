"""The operators onnx.reference answers against the spec, replaced in run_model (``_reference_fixes``).

Each test builds the smallest model showing one fix, checks run_model's answer by value and,
where onnxruntime is installed, that onnxruntime gives the same answer.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from gather_scatter import IndexOutOfBoundsError, NodeError
from gather_scatter.reference import run_model

F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
vi = helper.make_tensor_value_info


def _model(nodes, inputs, outputs, opset=18, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _onnxruntime(model, feeds):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the second opinion")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _both(model, feeds):
    """run_model's outputs, after checking that onnxruntime gives the same values."""
    ours = list(run_model(model, feeds).values())
    for mine, theirs in zip(ours, _onnxruntime(model, feeds), strict=True):
        np.testing.assert_array_equal(mine, theirs, strict=True)
    return ours


def _scatter_add_loop(cond_input: str, row: int):
    """x + n times a ScatterND add of ones into row ``row``, in a Loop of trip count n."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("ScatterND", ["acc", "rows", "ones"], ["acc_out"], name="accumulate", reduction="add"),
        ],
        "body",
        [vi("i", I64, []), vi("cond_in", BOOL, []), vi("acc", F, [4])],
        [vi("cond_out", BOOL, []), vi("acc_out", F, [4])],
        initializer=[helper.make_tensor("rows", I64, [2, 1], [row, row]), helper.make_tensor("ones", F, [2], [1, 1])],
    )
    loop = helper.make_node("Loop", ["n", cond_input, "x"], ["y"], name="loop", body=body)
    inputs = [vi("n", I64, []), vi("x", F, [4])] + ([vi("cond", BOOL, [])] if cond_input else [])
    return _model([loop], inputs, [vi("y", F, [4])])


def test_loop_with_omitted_cond_runs_its_body_trip_count_times():
    # onnx.reference's `while cond and ...` read the omitted cond as false: y == x, nothing added
    model = _scatter_add_loop("", row=1)
    feeds = {"n": np.array(3, np.int64), "x": np.zeros(4, np.float32)}
    (y,) = _both(model, feeds)
    np.testing.assert_array_equal(y, np.array([0, 6, 0, 0], np.float32))


def test_loop_with_omitted_cond_reports_a_bad_index_in_its_body():
    model = _scatter_add_loop("", row=4)
    with pytest.raises(IndexOutOfBoundsError, match=r"node 'accumulate' \(ScatterND\).* = 4 is out of bounds"):
        run_model(model, {"n": np.array(2, np.int64), "x": np.zeros(4, np.float32)})


def test_loop_with_cond_stops_when_the_body_says_so_and_omitted_cond_ignores_it():
    # the body returns cond = (i < 1): with cond given the loop runs twice, without it n times
    body = helper.make_graph(
        [
            helper.make_node("Less", ["i", "one"], ["cond_out"]),
            helper.make_node("Add", ["acc", "fone"], ["acc_out"]),
        ],
        "body",
        [vi("i", I64, []), vi("cond_in", BOOL, []), vi("acc", F, [])],
        [vi("cond_out", BOOL, []), vi("acc_out", F, [])],
        initializer=[helper.make_tensor("one", I64, [], [1]), helper.make_tensor("fone", F, [], [1])],
    )
    feeds = {"n": np.array(5, np.int64), "x": np.array(0, np.float32)}
    with_cond = _model(
        [helper.make_node("Loop", ["n", "c", "x"], ["y"], body=body)],
        [vi("n", I64, []), vi("c", BOOL, []), vi("x", F, [])],
        [vi("y", F, [])],
        initializers=[helper.make_tensor("c", BOOL, [], [True])],
    )
    without = _model(
        [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body)],
        [vi("n", I64, []), vi("x", F, [])],
        [vi("y", F, [])],
    )
    assert _both(with_cond, feeds)[0] == 2
    # The spec: "input (trip_count, ""): for (...; i < trip_count; ...) { cond = ...; // ignored }".
    # onnxruntime 1.32 stops after 2 here: it reads the body's cond without a cond input too.
    assert run_model(without, feeds)["y"] == 5


def _scan_output_loop():
    """A Loop whose body emits i * 10 as a scalar scan output, trip count n."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Mul", ["i", "ten"], ["out"])],
        "body",
        [vi("i", I64, []), vi("cond_in", BOOL, [])],
        [vi("cond_out", BOOL, []), vi("out", I64, [])],
        initializer=[helper.make_tensor("ten", I64, [], [10])],
    )
    loop = helper.make_node("Loop", ["n", ""], ["scan"], body=body)
    return _model([loop], [vi("n", I64, [])], [vi("scan", I64, [None])])


def test_loop_scan_output_of_scalars_is_a_vector():
    # onnx.reference stacked with np.vstack: (3, 1); the spec adds one axis: (3,)
    (scan,) = _both(_scan_output_loop(), {"n": np.array(3, np.int64)})
    np.testing.assert_array_equal(scan, np.array([0, 10, 20], np.int64), strict=True)


def test_loop_of_zero_iterations_gives_an_empty_scan_output():
    (scan,) = run_model(_scan_output_loop(), {"n": np.array(0, np.int64)}).values()
    assert scan.shape == (0,) and scan.dtype == np.int64


@pytest.mark.parametrize("axis", [np.array([1], np.int64), np.array(1, np.int32), np.array([-1], np.int32)])
def test_cumsum_axis_as_a_one_element_tensor(axis):
    # PyTorch's dynamo export of repeat_interleave writes CumSum's axis as a 1-element tensor
    model = _model(
        [helper.make_node("CumSum", ["x", "axis"], ["y"])],
        [vi("x", F, [2, 3]), vi("axis", helper.np_dtype_to_tensor_dtype(axis.dtype), list(axis.shape))],
        [vi("y", F, [2, 3])],
    )
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = _both(model, {"x": x, "axis": axis})
    np.testing.assert_array_equal(y, np.cumsum(x, axis=1), strict=True)


def test_cumsum_axis_out_of_range_is_a_node_error():
    model = _model(
        [helper.make_node("CumSum", ["x", "axis"], ["y"], name="sum")],
        [vi("x", F, [2, 3]), vi("axis", I64, [1])],
        [vi("y", F, [2, 3])],
    )
    with pytest.raises(NodeError, match=r"node 'sum' \(CumSum.*axis 2 is out of range"):
        run_model(model, {"x": np.zeros((2, 3), np.float32), "axis": np.array([2])})


def test_optional_holds_its_input_and_an_empty_optional_has_no_element():
    tensor_type = helper.make_tensor_type_proto(F, [2])
    nodes = [
        helper.make_node("Optional", ["x"], ["opt"]),
        helper.make_node("OptionalGetElement", ["opt"], ["y"]),
        helper.make_node("Optional", [], ["empty"], type=tensor_type),
        helper.make_node("OptionalHasElement", ["empty"], ["has"]),
    ]
    model = _model(nodes, [vi("x", F, [2])], [vi("y", F, [2]), vi("has", BOOL, [])])
    y, has = _both(model, {"x": np.array([1, 2], np.float32)})
    np.testing.assert_array_equal(y, np.array([1, 2], np.float32), strict=True)  # was a list [x]
    assert has.item() is False  # was [None], which "has an element"


def _sum_body(n_in=1):
    """Scan body: state + slice -> state, and the running sum as the scan output."""
    return helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["scan_out"])],
        "body",
        [vi("s_in", F, [n_in]), vi("x_t", F, [n_in])],
        [vi("s_out", F, [n_in]), vi("scan_out", F, [n_in])],
    )


def test_scan8_with_batch_and_sequence_lens():
    # Scan-8: axis 0 is the batch; onnx.reference ran it as Scan-9 and read sequence_lens as the state
    scan = helper.make_node("Scan", ["lens", "s0", "x"], ["s", "running"], body=_sum_body(), num_scan_inputs=1)
    model = _model(
        [scan],
        [vi("lens", I64, [2]), vi("s0", F, [2, 1]), vi("x", F, [2, 3, 1])],
        [vi("s", F, [2, 1]), vi("running", F, [2, 3, 1])],
        opset=8,
    )
    feeds = {
        "lens": np.array([3, 2], np.int64),
        "s0": np.array([[0], [100]], np.float32),
        "x": np.arange(6, dtype=np.float32).reshape(2, 3, 1),
    }
    s, running = _both(model, feeds)
    np.testing.assert_array_equal(s, np.array([[3], [107]], np.float32))
    np.testing.assert_array_equal(running[:, :, 0], np.array([[0, 1, 3], [103, 107, 0]], np.float32))


def test_scan9_along_axis_1_reversed_with_output_axis_1_prepended():
    scan = helper.make_node(
        "Scan",
        ["s0", "x"],
        ["s", "running"],
        body=_sum_body(2),
        num_scan_inputs=1,
        scan_input_axes=[1],
        scan_input_directions=[1],
        scan_output_axes=[1],
        scan_output_directions=[1],
    )
    model = _model([scan], [vi("s0", F, [2]), vi("x", F, [2, 3])], [vi("s", F, [2]), vi("running", F, [2, 3])])
    x = np.array([[1, 2, 3], [10, 20, 30]], np.float32)
    s, running = _both(model, {"s0": np.zeros(2, np.float32), "x": x})
    np.testing.assert_array_equal(s, np.array([6, 60], np.float32))
    # reversed input: sums 3, 5, 6 (and 30, 50, 60); prepended output: last iteration first
    np.testing.assert_array_equal(running, np.array([[6, 5, 3], [60, 50, 30]], np.float32))


def test_fixed_operators_are_keyed_as_onnx_reference_keys_them():
    from gather_scatter.models.reference._fixes import FIXED_OPS

    assert {(getattr(c, "op_domain", ""), c.__name__) for c in FIXED_OPS} == {
        ("", "Loop"),
        ("", "CumSum"),
        ("", "Optional"),
        ("", "Scan"),
    }
    assert all(onnx.defs.has(c.__name__) for c in FIXED_OPS)
