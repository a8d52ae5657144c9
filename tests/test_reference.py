"""gather_scatter.reference: our kernels inside onnx.reference, against plain onnx.reference and
onnxruntime, version gating through the evaluator, run_model on the exported models, and errors
that name their node (ours and onnx.reference's); off-spec nodes with strict=False, external
data not loaded."""

from __future__ import annotations

import io
import pathlib
import pickle
import subprocess
import sys
import warnings

import ml_dtypes
import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx.reference import ReferenceEvaluator

import gather_scatter
from gather_scatter import (
    DTypeError,
    IndexOutOfBoundsError,
    InvalidAttributeError,
    ModelInputError,
    ShapeError,
    UnsupportedOpError,
)
from gather_scatter.reference import NEW_OPS, run_model

ROOT = pathlib.Path(__file__).resolve().parents[1]
DECODER = ROOT / "src" / "gather_scatter" / "data" / "decoder_step.onnx"
DECODER_INPUTS = DECODER.with_name("decoder_step_inputs.npz")
SPARSE = ROOT / "tests" / "data" / "sparse_update.onnx"
SPARSE_INPUTS = SPARSE.with_name("sparse_update_inputs.npz")
INPUT_NAMES = ("data", "indices", "updates")


def one_node(op_type, arrays, attrs=None, *, opset, domain="", name="the_node", declare_types=True):
    """A model of one node named ``name`` whose inputs are graph inputs data, indices(, updates)."""
    names = INPUT_NAMES[: len(arrays)]
    node = oh.make_node(op_type, names, ["y"], name=name, domain=domain, **(attrs or {}))

    def info(n, a):
        elem = oh.np_dtype_to_tensor_dtype(a.dtype) if declare_types else onnx.TensorProto.UNDEFINED
        return oh.make_tensor_value_info(n, elem, a.shape if declare_types else None)

    output = oh.make_tensor_value_info("y", info("y", arrays[0]).type.tensor_type.elem_type, None)
    graph = oh.make_graph([node], "g", [info(n, a) for n, a in zip(names, arrays)], [output])
    opsets = [oh.make_opsetid("", opset)] if not domain else [oh.make_opsetid("", 13), oh.make_opsetid(domain, opset)]
    return oh.make_model(graph, opset_imports=opsets, ir_version=8)


def feeds(arrays):
    return dict(zip(INPUT_NAMES, arrays))


def ours(model, arrays):
    return ReferenceEvaluator(model, new_ops=list(NEW_OPS)).run(None, feeds(arrays))[0]


def onnxruntime_run(model, inputs):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is an optional test dependency")
    options = ort.SessionOptions()
    options.log_severity_level = 3  # opset-1 models draw a legacy-support warning
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, inputs)))


DATA = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
# (id, op_type, domain, opset, arrays, attrs, expected): every version of every operator.
CASES = [
    ("Gather-1", "Gather", "", 1, [DATA, np.array([[2, 0]], np.int64)], {"axis": 1}, DATA[:, [[2, 0]]]),
    ("Gather-11", "Gather", "", 11, [DATA, np.array([-1, 0], np.int32)], {"axis": 2}, DATA[..., [-1, 0]]),
    ("Gather-13", "Gather", "", 13, [DATA, np.array(1, np.int64)], {}, DATA[1]),
    ("GatherND-11", "GatherND", "", 11, [DATA, np.array([[1, -1], [0, 2]])], {}, DATA[[1, 0], [-1, 2]]),
    ("GatherND-12", "GatherND", "", 12, [DATA, np.array([[2], [0]])], {"batch_dims": 1}, DATA[[0, 1], [2, 0]]),
    ("GatherND-13", "GatherND", "", 13, [DATA, np.array([[1, 2, 3]])], {"batch_dims": 0}, DATA[[1], [2], [3]]),
    ("ScatterND-11", "ScatterND", "", 11, [DATA, np.array([[1, 0]]), -np.ones((1, 4), np.float32)], {}, None),
    ("ScatterND-13", "ScatterND", "", 13, [DATA, np.array([[0], [1]]), np.zeros((2, 3, 4), np.float32)], {}, None),
    ("ScatterND-16-add", "ScatterND", "", 16, [DATA, np.array([[0, 1], [0, 1]]), np.ones((2, 4), np.float32)],
     {"reduction": "add"}, None),
    ("ScatterND-16-mul", "ScatterND", "", 16, [DATA, np.array([[1, 2, 3]]), np.full(1, 2, np.float32)],
     {"reduction": "mul"}, None),
    ("ScatterND-18-max", "ScatterND", "", 18, [DATA, np.array([[1, 1], [0, 0]]), np.full((2, 4), 10, np.float32)],
     {"reduction": "max"}, None),
    ("ScatterND-18-min", "ScatterND", "", 18, [DATA, np.array([[1, 1], [0, 0]]), np.full((2, 4), 10, np.float32)],
     {"reduction": "min"}, None),
    ("com.microsoft.GatherND-1", "GatherND", "com.microsoft", 1, [DATA, np.array([[1, 2], [0, -3]], np.int32)], {},
     DATA[[1, 0], [2, -3]]),
]
def _scatter_expected(case_id, data, indices, updates):
    """The spec's loop, written out for these small cases (the oracle tests cover the rest)."""
    out = data.copy()
    reduce = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
    kind = case_id.rsplit("-", 1)[-1]
    for idx, upd in zip(indices.reshape(-1, indices.shape[-1]), updates.reshape(-1, *data.shape[indices.shape[-1]:])):
        key = tuple(idx)
        out[key] = reduce[kind](out[key], upd) if kind in reduce else upd
    return out


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_new_ops_match_expected_onnx_reference_and_onnxruntime(case):
    case_id, op_type, domain, opset, arrays, attrs, expected = case
    if expected is None:
        expected = _scatter_expected(case_id, *arrays)
    model = one_node(op_type, arrays, attrs, opset=opset, domain=domain)
    got = ours(model, arrays)
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == DATA.dtype
    if not domain:  # onnx.reference has no com.microsoft operators
        np.testing.assert_array_equal(ReferenceEvaluator(model).run(None, feeds(arrays))[0], expected)
    np.testing.assert_array_equal(onnxruntime_run(model, feeds(arrays))["y"], expected)


def test_each_node_uses_the_version_of_the_model_opset():
    # Opset 15 has no new ScatterND: it is ScatterND-13, which names itself in errors.
    model = one_node("ScatterND", [DATA, np.array([[5]]), DATA[:1]], opset=15)
    with pytest.raises(IndexOutOfBoundsError, match=r"ScatterND-13: indices\[0, 0\] = 5") as info:
        ours(model, [DATA, np.array([[5]]), DATA[:1]])
    assert info.value.since_version == 13


@pytest.mark.parametrize(
    "op_type, arrays, attrs, opset, error, message",
    [
        ("GatherND", [DATA, np.array([[1]])], {"batch_dims": 1}, 11, InvalidAttributeError,
         r"GatherND-11: has no attribute 'batch_dims' .*added in GatherND-12"),
        ("ScatterND", [DATA, np.array([[1]]), DATA[:1]], {"reduction": "add"}, 13, InvalidAttributeError,
         r"ScatterND-13: has no attribute 'reduction'"),
        ("Gather", [DATA, np.array([0])], {"batch_dims": 0}, 13, InvalidAttributeError, r"Gather-13: has no attribute"),
        ("GatherND", [DATA, np.array([[1]])], {}, 10, UnsupportedOpError, r"GatherND: opset 10 .* predates the operator"),
    ],
)
def test_version_gating_rejects_the_model_when_loaded(op_type, arrays, attrs, opset, error, message):
    model = one_node(op_type, arrays, attrs, opset=opset)
    with pytest.raises(error, match=r"^node 'the_node' \(" + op_type + r"\): " + message) as info:
        ReferenceEvaluator(model, new_ops=list(NEW_OPS))
    assert info.value.node == "the_node"


@pytest.mark.parametrize(
    "op_type, arrays, attrs, opset, domain, error, message",
    [
        ("ScatterND", [DATA, np.array([[1]]), DATA[:1]], {"reduction": "max"}, 16, "", InvalidAttributeError,
         r"ScatterND-16: reduction = 'max' is not accepted"),
        ("Gather", [DATA.astype(ml_dtypes.bfloat16), np.array([0])], {}, 11, "", DTypeError,
         r"Gather-11: data has type tensor\(bfloat16\)"),
        ("GatherND", [DATA, np.array([[1]], np.int32)], {}, 13, "", DTypeError,
         r"GatherND-13: indices has type tensor\(int32\)"),
    ],
)
def test_version_gating_at_run_keeps_class_and_fields(op_type, arrays, attrs, opset, domain, error, message):
    # Undeclared input types, so onnx.reference itself checks nothing before our kernel.
    model = one_node(op_type, arrays, attrs, opset=opset, domain=domain, declare_types=False)
    with pytest.raises(error, match=r"^node 'the_node' \(" + op_type + r"\): " + message) as info:
        ours(model, arrays)
    assert info.value.node == "the_node"
    assert info.value.since_version == opset


def test_com_microsoft_gather_nd_takes_int32_indices_where_ai_onnx_does_not():
    arrays = [DATA, np.array([[1, 2, 3]], np.int32)]
    np.testing.assert_array_equal(ours(one_node("GatherND", arrays, opset=1, domain="com.microsoft"), arrays), [23.0])


def load_inputs(path):
    with np.load(path) as archive:
        return dict(archive)


@pytest.mark.parametrize("model_path, inputs_path", [(DECODER, DECODER_INPUTS), (SPARSE, SPARSE_INPUTS)])
def test_run_model_on_exported_models_matches_onnxruntime(model_path, inputs_path):
    model = onnx.load(model_path)
    assert {"Gather", "GatherND", "ScatterND"} <= {n.op_type for n in model.graph.node}
    inputs = load_inputs(inputs_path)
    got = run_model(model_path, inputs)
    want = onnxruntime_run(model, inputs)
    assert list(got) == [o.name for o in model.graph.output]
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_decoder_step_writes_each_sequence_position_only():
    inputs = load_inputs(DECODER_INPUTS)
    out = gather_scatter.run_model(onnx.load(DECODER), inputs)
    changed = np.any(out["k_cache_out"] != inputs["k_cache"], axis=-1)
    expected = np.zeros_like(changed)
    expected[np.arange(len(inputs["pos"])), inputs["pos"]] = True
    np.testing.assert_array_equal(changed, expected)
    assert np.all(np.isfinite(out["logits"]))


def test_errors_inside_a_model_name_the_node_and_keep_class_and_fields():
    inputs = {**load_inputs(DECODER_INPUTS), "pos": np.array([2, 6])}
    with pytest.raises(IndexError) as info:  # the builtin still catches it
        run_model(DECODER, inputs)
    err = info.value
    assert isinstance(err, IndexOutOfBoundsError)
    assert (err.node, err.op, err.since_version) == ("node_ScatterND_20", "ScatterND", 18)
    assert (err.position, err.value, err.valid_range, err.axis) == ((1, 1), 6, (-6, 5), 1)
    assert str(err) == err.message == (
        "node 'node_ScatterND_20' (ScatterND): ScatterND-18: indices[1, 1] = 6 is out of bounds "
        "for data axis 1 of size 6 (valid range [-6, 5])"
    )
    copy = pickle.loads(pickle.dumps(err))
    assert (type(copy), str(copy), copy.node, copy.position) == (type(err), str(err), err.node, err.position)


def test_unnamed_node_is_named_by_op_type():
    arrays = [DATA, np.array([9])]
    with pytest.raises(IndexOutOfBoundsError, match=r"^unnamed node \(Gather\): Gather-13: indices\[0\] = 9"):
        ours(one_node("Gather", arrays, opset=13, name=""), arrays)


@pytest.mark.parametrize(
    "change, error, message",
    [
        (lambda f: f.pop("tokens"), ModelInputError, r"model input 'tokens' is missing"),
        (lambda f: f.update(token=f["tokens"]), ModelInputError, r"the model has no input 'token'"),
        (lambda f: f.update(tokens=f["tokens"].astype(np.int32)), DTypeError,
         r"model input 'tokens' has NumPy dtype int32, but the model declares tensor\(int64\)"),
        (lambda f: f.update(pos=f["pos"][:, None]), ShapeError, r"model input 'pos' has rank 2 .* declares rank 1"),
        (lambda f: f.update(pos=np.zeros(3, np.int64)), ShapeError, r"axis 0 must be 2"),
    ],
)
def test_run_model_checks_inputs_against_the_declaration(change, error, message):
    inputs = load_inputs(DECODER_INPUTS)
    change(inputs)
    with pytest.raises(error, match=message):
        run_model(DECODER, inputs)


def test_import_does_not_load_onnx_reference():
    code = (
        "import sys, gather_scatter; assert 'onnx.reference' not in sys.modules; "
        "gather_scatter.run_model; assert 'onnx.reference' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the family, functions, subgraphs, odd opset imports and feeds (issue 11 items 3, 4, 10, 11) ----------

_VI = oh.make_tensor_value_info


def _gather_nd_model(wrap: str, opset_domain: str = "") -> onnx.ModelProto:
    """GatherND(data, indices) named 'pick', directly, inside a model-local function, an If
    branch or a Loop body."""
    pick = oh.make_node("GatherND", ["data", "indices"], ["y"], name="pick")
    inputs = [_VI("data", onnx.TensorProto.FLOAT, [2, 3]), _VI("indices", onnx.TensorProto.INT64, [1, 2])]
    output = _VI("y", onnx.TensorProto.FLOAT, [1])
    functions = []
    if wrap == "plain":
        nodes = [pick]
    elif wrap == "function":
        functions = [oh.make_function("local", "Pick", ["data", "indices"], ["y"], [pick],
                                      [oh.make_opsetid(opset_domain, 13)])]
        nodes = [oh.make_node("Pick", ["data", "indices"], ["y"], name="call", domain="local")]
    elif wrap == "if":
        branch = oh.make_graph([pick], "then", [], [output])
        nodes = [oh.make_node("Constant", [], ["c"], value=oh.make_tensor("c", onnx.TensorProto.BOOL, [], [True])),
                 oh.make_node("If", ["c"], ["y"], name="branch", then_branch=branch, else_branch=branch)]
    else:  # a Loop whose one iteration gathers
        body = oh.make_graph(
            [oh.make_node("Identity", ["cond_in"], ["cond_out"]), pick],
            "body", [_VI("i", onnx.TensorProto.INT64, []), _VI("cond_in", onnx.TensorProto.BOOL, [])],
            [_VI("cond_out", onnx.TensorProto.BOOL, []), output])
        nodes = [oh.make_node("Constant", [], ["n"], value=oh.make_tensor("n", onnx.TensorProto.INT64, [], [1])),
                 oh.make_node("Constant", [], ["t"], value=oh.make_tensor("t", onnx.TensorProto.BOOL, [], [True])),
                 oh.make_node("Loop", ["n", "t"], ["ys"], name="loop", body=body)]
        output = _VI("ys", onnx.TensorProto.FLOAT, [1, 1])
    opsets = [oh.make_opsetid(opset_domain, 13)] + ([oh.make_opsetid("local", 1)] if functions else [])
    graph = oh.make_graph(nodes, "g", inputs, [output])
    return oh.make_model(graph, opset_imports=opsets, functions=functions, ir_version=8)


_X23 = np.arange(6, dtype=np.float32).reshape(2, 3)


@pytest.mark.parametrize("wrap", ["plain", "function", "if", "loop"])
def test_our_kernels_run_in_functions_and_subgraphs(wrap):
    model = _gather_nd_model(wrap)
    (got,) = run_model(model, {"data": _X23, "indices": np.array([[1, -1]])}).values()
    np.testing.assert_array_equal(np.asarray(got).reshape(-1), [5.0])
    with pytest.raises(IndexOutOfBoundsError) as info:  # onnx.reference's own GatherND: a plain IndexError
        run_model(model, {"data": _X23, "indices": np.array([[1, 3]])})
    assert str(info.value).startswith("node 'pick' (GatherND): GatherND-13: indices[0, 1] = 3 is out of bounds "
                                      "for data axis 1 of size 3")
    assert (info.value.node, info.value.position, info.value.value) == ("pick", (0, 1), 3)


@pytest.mark.parametrize("wrap", ["plain", "function", "if", "loop"])
def test_a_type_error_in_a_body_keeps_its_class_and_fields(wrap):
    # Every enclosing If, Loop or function call re-raises a TypeError (DTypeError is one) as
    # a plain TypeError "Issues with types ..."; ours must come back whole.
    model = _gather_nd_model(wrap)
    model.graph.input[1].type.tensor_type.elem_type = onnx.TensorProto.INT32
    with pytest.raises(DTypeError) as info:
        run_model(model, {"data": _X23, "indices": np.array([[1, -1]], np.int32)})
    assert str(info.value) == ("node 'pick' (GatherND): GatherND-13: indices has type tensor(int32), which this "
                               "version does not allow (allowed: tensor(int64))")
    assert (info.value.node, info.value.op, info.value.since_version, info.value.input) == (
        "pick", "GatherND", 13, "indices")


def test_evaluator_reads_a_path_and_lets_the_caller_replace_an_operator(tmp_path, monkeypatch):
    from onnx.reference.op_run import OpRun

    from gather_scatter.reference import Evaluator

    model = _gather_nd_model("function", opset_domain="ai.onnx")
    onnx.save_model(model, tmp_path / "model.onnx")
    monkeypatch.chdir(tmp_path)
    feeds_ = {"data": _X23, "indices": np.array([[1, 3]])}
    with pytest.raises(IndexOutOfBoundsError, match=r"^node 'pick' \(GatherND\)"):
        Evaluator(pathlib.Path("model.onnx")).run(None, feeds_)

    class GatherND(OpRun):  # the caller's own, in the function too
        op_domain = ""

        def _run(self, data, indices, batch_dims=0):
            return (np.full(1, -7.0, np.float32),)

    (got,) = Evaluator(model, new_ops=[GatherND]).run(None, feeds_)
    np.testing.assert_array_equal(got, [-7.0])


@pytest.mark.parametrize("wrap", ["plain", "function", "if"])
def test_default_domain_imported_as_ai_onnx(wrap):
    model = _gather_nd_model(wrap, opset_domain="ai.onnx")
    if wrap != "function":  # the checker wants a function's own import spelled as its nodes' domain
        onnx.checker.check_model(model)
    before = model.SerializeToString()
    (got,) = run_model(model, {"data": _X23, "indices": np.array([[0, 2]])}).values()
    np.testing.assert_array_equal(np.asarray(got).reshape(-1), [2.0])
    assert model.SerializeToString() == before  # the caller's model is not rewritten


def test_big_endian_inputs_are_accepted_in_any_byte_order():
    nodes = [oh.make_node("Gather", ["data", "indices"], ["g"], name="take"),
             oh.make_node("Add", ["g", "g"], ["y"])]
    graph = oh.make_graph(nodes, "g", [_VI("data", onnx.TensorProto.FLOAT, [2, 3]),
                                       _VI("indices", onnx.TensorProto.INT64, [2])],
                          [_VI("y", onnx.TensorProto.FLOAT, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)], ir_version=8)
    native = run_model(model, {"data": _X23, "indices": np.array([1, 0])})["y"]
    swapped = run_model(model, {"data": _X23.astype(">f4"), "indices": np.array([1, 0], dtype=">i8")})["y"]
    np.testing.assert_array_equal(native, [[6, 8, 10], [0, 2, 4]])
    assert swapped.dtype == np.float32 and swapped.tobytes() == native.tobytes()


@pytest.mark.parametrize("strings", [np.array(["ab", "c", "def"]), np.array([b"ab", b"c", b"def"]),
                                     np.array(["ab", "c", "def"], dtype=object)], ids=["U", "S", "object"])
def test_string_outputs_are_object_arrays_of_str_whatever_was_fed(strings):
    nodes = [oh.make_node("Gather", ["data", "indices"], ["y"]), oh.make_node("Identity", ["data"], ["same"])]
    graph = oh.make_graph(nodes, "g", [_VI("data", onnx.TensorProto.STRING, [3]),
                                       _VI("indices", onnx.TensorProto.INT64, [2])],
                          [_VI("y", onnx.TensorProto.STRING, None), _VI("same", onnx.TensorProto.STRING, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)], ir_version=8)
    got = run_model(model, {"data": strings, "indices": np.array([2, 0])})
    for name, want in [("y", ["def", "ab"]), ("same", ["ab", "c", "def"])]:  # ours, and onnx.reference's
        assert got[name].dtype == object and list(got[name]) == want
        assert {type(s) for s in got[name]} == {str}


def test_run_model_reads_external_data_beside_the_file_from_any_cwd(tmp_path, monkeypatch):
    table = np.arange(300, dtype=np.float32).reshape(100, 3)
    node = oh.make_node("GatherElements", ["table", "indices"], ["y"], axis=0)
    graph = oh.make_graph([node], "g", [_VI("indices", onnx.TensorProto.INT64, [2, 3])],
                          [_VI("y", onnx.TensorProto.FLOAT, None)], [onnx.numpy_helper.from_array(table, "table")])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)], ir_version=8)
    (tmp_path / "m").mkdir()
    path = tmp_path / "m" / "model.onnx"
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location="model.onnx.data", size_threshold=0)
    assert (tmp_path / "m" / "model.onnx.data").stat().st_size == table.nbytes
    monkeypatch.chdir(tmp_path)
    indices = np.array([[99, 0, -1], [64, 70, 80]])
    got = run_model(str(path), {"indices": indices})["y"]
    np.testing.assert_array_equal(got, np.take_along_axis(table, indices % 100, 0))


def test_every_operator_of_the_family_has_an_adapter():
    from gather_scatter._nodes import _OPS

    assert {cls.__name__ for cls in NEW_OPS} == set(_OPS)
    assert {(cls.op_domain, cls.__name__) for cls in NEW_OPS} >= {("com.microsoft", "GatherND"), ("", "GatherND")}


def test_family_nodes_in_a_model():
    data = np.arange(200, dtype=np.float32).reshape(2, 100)
    idx = np.array([[99, 0, 64, -1], [70, 65, 1, 2]])  # past onnx.reference's 64 choices
    (got,) = run_model(one_node("GatherElements", [data, idx], {"axis": 1}, opset=13),
                       feeds([data, idx])).values()
    np.testing.assert_array_equal(got, np.take_along_axis(data, idx % 100, 1))
    upd = np.ones((2, 4), np.float32)
    scatter = one_node("Scatter", [data, idx, upd], {"axis": 1}, opset=10)
    (got,) = run_model(scatter, feeds([data, idx, upd])).values()
    want = data.copy()
    np.put_along_axis(want, idx % 100, 1.0, 1)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(UnsupportedOpError, match=r"^node 'the_node' \(Scatter\): Scatter: opset 11 .* use ScatterElements"):
        run_model(one_node("Scatter", [data, idx, upd], {"axis": 1}, opset=11), feeds([data, idx, upd]))


@pytest.mark.parametrize("write, empty", [(None, True), (None, False), (np.array([3, 0]), False)],
                         ids=["empty-name", "left-out", "given"])
def test_tensor_scatter_with_and_without_write_indices(write, empty):
    cache, update = np.zeros((2, 4, 1), np.float32), np.ones((2, 2, 1), np.float32)
    names = ["past", "update"] + (["write"] if write is not None else [""] if empty else [])
    node = oh.make_node("TensorScatter", names, ["y"], name="kv", mode="circular", axis=1)
    inputs = [_VI("past", 1, [2, 4, 1]), _VI("update", 1, [2, 2, 1])] + ([_VI("write", 7, [2])] if write is not None else [])
    graph = oh.make_graph([node], "g", inputs, [_VI("y", 1, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 24)], ir_version=11)
    feeds_ = {"past": cache, "update": update, **({"write": write} if write is not None else {})}
    got = run_model(model, feeds_)["y"][..., 0]
    want = [[1, 0, 0, 1], [1, 1, 0, 0]] if write is not None else [[1, 1, 0, 0], [1, 1, 0, 0]]
    np.testing.assert_array_equal(got, want)


# -- issue 15: off-spec nodes (10), external data not loaded (22), arity (23), other operators' errors (25) ---

_SCATTER_FEEDS = {"d": np.zeros(4, np.float32), "i": np.array([2, 2, 0]), "u": np.array([1.0, 5.0, 2.0], np.float32)}
_SCATTER_MAX = np.array([2.0, 0.0, 5.0, 0.0], np.float32)  # ScatterElements-18 'max': np.maximum.at


def _off_spec_model(opset=17):
    """ScatterElements reduction='max' at opset 17 (a ScatterElements-18 value), as PyTorch's
    TorchScript exporter writes it: twice in the main graph and once in an If branch, next to
    an on-spec 'add'."""
    vi = [_VI("d", 1, [4]), _VI("i", 7, [3]), _VI("u", 1, [3])]
    branch = oh.make_graph([oh.make_node("ScatterElements", ["d", "i", "u"], ["b"], name="in_branch", reduction="max")],
                           "then", [], [_VI("b", 1, [4])])
    other = oh.make_graph([oh.make_node("Identity", ["d"], ["b"])], "else", [], [_VI("b", 1, [4])])
    nodes = [
        oh.make_node("ScatterElements", ["d", "i", "u"], ["y1"], name="agg1", reduction="max"),
        oh.make_node("ScatterElements", ["d", "i", "u"], ["y2"], name="agg2", reduction=b"max"),
        oh.make_node("ScatterElements", ["d", "i", "u"], ["y3"], name="sum", reduction="add"),
        oh.make_node("Constant", [], ["c"], value=oh.make_tensor("c", onnx.TensorProto.BOOL, [], [True])),
        oh.make_node("If", ["c"], ["y4"], name="branch", then_branch=branch, else_branch=other),
    ]
    graph = oh.make_graph(nodes, "g", vi, [_VI(f"y{k}", 1, [4]) for k in range(1, 5)])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=8)


def test_an_off_spec_attribute_value_is_refused_by_default_naming_the_fix():
    with pytest.raises(InvalidAttributeError) as info:
        run_model(_off_spec_model(), _SCATTER_FEEDS)
    assert str(info.value) == (
        "node 'agg1' (ScatterElements): ScatterElements-16: reduction = 'max' is not accepted (accepted: 'none', "
        "'add', 'mul'); 'max' exists from ScatterElements-18: re-export the model with opset 18 or later, or pass "
        "strict=False to run the node as ScatterElements-18")
    assert (info.value.node, info.value.op, info.value.since_version, info.value.value) == (
        "agg1", "ScatterElements", 16, "max")


def test_not_strict_runs_each_off_spec_node_as_the_earliest_version_that_accepts_it_with_one_warning():
    from gather_scatter import OffSpecWarning
    from gather_scatter.reference import Evaluator

    model = _off_spec_model()
    with pytest.warns(OffSpecWarning) as record:
        got = run_model(model, _SCATTER_FEEDS, strict=False)
    for name in ("y1", "y2", "y4"):
        np.testing.assert_array_equal(got[name], _SCATTER_MAX, strict=True)
    np.testing.assert_array_equal(got["y3"], [2.0, 0.0, 6.0, 0.0])
    assert sorted(w.message.node for w in record) == ["agg1", "agg2", "in_branch"]  # not the on-spec 'sum'
    w = next(w.message for w in record if w.message.node == "agg1")
    assert (w.op, w.domain, w.opset, w.resolved, w.used) == ("ScatterElements", "ai.onnx", 17, "ScatterElements-16",
                                                             "ScatterElements-18")
    assert str(w) == ("node 'agg1' (ScatterElements): ScatterElements at opset 17 is ScatterElements-16, which does "
                      "not accept reduction = 'max'; run as ScatterElements-18, the earliest version that does "
                      "(strict=False)")
    with pytest.warns(OffSpecWarning) as record:  # warned when loaded, not again at each run
        session = Evaluator(model, strict=False)
        session.run(None, _SCATTER_FEEDS)
        session.run(None, _SCATTER_FEEDS)
    assert len(record) == 3
    with pytest.raises(InvalidAttributeError, match=r"^node 'agg1'"):  # strict again in a fresh evaluator
        Evaluator(model).run(None, _SCATTER_FEEDS)


def test_not_strict_shape_inference():
    from gather_scatter import OffSpecWarning
    from gather_scatter.models.shape_inference import infer_model_shapes

    model = _off_spec_model()
    for vi in model.graph.output:
        vi.type.tensor_type.ClearField("shape")
    with pytest.raises(InvalidAttributeError, match=r"^node 'agg1' \(ScatterElements\): ScatterElements-16: "):
        infer_model_shapes(model)
    with pytest.warns(OffSpecWarning) as record:
        out = infer_model_shapes(model, strict=False)
    assert [w.message.node for w in record] == ["agg1", "agg2"]  # subgraphs are not walked
    shapes = {vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim] for vi in out.graph.output}
    assert shapes["y1"] == shapes["y2"] == [4]


def test_torchscript_export_of_scatter_reduce_amax_at_opset_17_runs_with_no_strict():
    torch = pytest.importorskip("torch", reason="torch is an optional test dependency")
    from gather_scatter import OffSpecWarning

    class Gat(torch.nn.Module):  # a GAT layer's neighbourhood max, as torch_geometric aggregates it
        def forward(self, x, index, src):
            return x.scatter_reduce(0, index, src, reduce="amax", include_self=True)

    args = (torch.zeros(4, 3), torch.tensor([[0, 1, 2], [3, 0, 1], [0, 0, 0]]), torch.arange(9.0).reshape(3, 3))
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(Gat(), args, buffer, opset_version=17, dynamo=False)
    model = onnx.load_from_string(buffer.getvalue())
    scatters = [n for n in model.graph.node if n.op_type == "ScatterElements"]
    reductions = [oh.get_attribute_value(a) for n in scatters for a in n.attribute if a.name == "reduction"]
    if reductions != [b"max"] or model.opset_import[0].version != 17:
        pytest.skip(f"this torch ({torch.__version__}) no longer writes reduction='max' at opset 17")
    feeds_ = dict(zip([i.name for i in model.graph.input], [a.numpy() for a in args]))
    with pytest.raises(InvalidAttributeError, match=r"re-export the model with opset 18 or later, or pass strict="):
        run_model(model, feeds_)
    with pytest.warns(OffSpecWarning, match=r"ScatterElements at opset 17 is ScatterElements-16, which does not "
                                            r"accept reduction = 'max'; run as ScatterElements-18"):
        (got,) = run_model(model, feeds_, strict=False).values()
    want = Gat()(*args).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(next(iter(onnxruntime_run(model, feeds_).values())), want)  # ORT takes it too


def test_cli_run_no_strict(tmp_path, capsys):
    from gather_scatter.cli import main

    path = tmp_path / "model.onnx"
    onnx.save_model(_off_spec_model(), path)
    np.savez(tmp_path / "inputs.npz", **_SCATTER_FEEDS)
    assert main(["run", str(path), "--inputs", str(tmp_path / "inputs.npz")]) == 2
    assert "'max' exists from ScatterElements-18: re-export the model with opset 18 or later, or pass --no-strict" in (
        capsys.readouterr().err)
    assert main(["run", str(path), "--inputs", str(tmp_path / "inputs.npz"), "--no-strict"]) == 0
    captured = capsys.readouterr()
    warned = [line for line in captured.err.splitlines() if line.startswith("gather-scatter run: warning: ")]
    assert len(warned) == 3 and all(line.endswith("the earliest version that does (--no-strict)") for line in warned)
    assert "y1  float32  (4,)         [2. 0. 5. 0.]" in captured.out


def _external_model(tmp_path, where):
    """A GatherElements over a table saved as external data: an initializer, or a Constant in an If branch."""
    table = np.arange(300, dtype=np.float32).reshape(100, 3)
    gather = oh.make_node("GatherElements", ["table", "indices"], ["y"], axis=0)
    inputs, outputs = [_VI("indices", onnx.TensorProto.INT64, [2, 3])], [_VI("y", onnx.TensorProto.FLOAT, None)]
    if where == "initializer":
        graph = oh.make_graph([gather], "g", inputs, outputs, [onnx.numpy_helper.from_array(table, "table")])
    else:
        const = oh.make_node("Constant", [], ["table"], value=onnx.numpy_helper.from_array(table, "table"))
        branch = oh.make_graph([const, gather], "then", [], [_VI("y", onnx.TensorProto.FLOAT, None)])
        cond = oh.make_node("Constant", [], ["c"], value=oh.make_tensor("c", onnx.TensorProto.BOOL, [], [True]))
        graph = oh.make_graph([cond, oh.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)],
                              "g", inputs, outputs)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)], ir_version=8)
    path = tmp_path / "model.onnx"
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="model.onnx.data",
                    size_threshold=0, convert_attribute=True)
    return path, table


@pytest.mark.parametrize("where", ["initializer", "constant-in-a-subgraph"])
def test_external_data_not_loaded_is_a_model_input_error_saying_how_to_load_it(tmp_path, where):
    from gather_scatter.reference import Evaluator

    path, table = _external_model(tmp_path, where)
    model = onnx.load(path, load_external_data=False)
    indices = np.array([[99, 0, -1], [64, 70, 80]])
    for call in (lambda: run_model(model, {"indices": indices}), lambda: Evaluator(model)):
        with pytest.raises(ModelInputError) as info:  # was RuntimeError: "... LargeContainer ..."
            call()
        assert str(info.value) == (
            "tensor 'table' is stored as external data ('model.onnx.data') that was not loaded (the model was read "
            "with load_external_data=False): load it with onnx.load(path) (load_external_data=True, the default), "
            "or call onnx.external_data_helper.load_external_data_for_model(model, base_dir) with the folder of the "
            ".onnx file, or pass the model's path instead")
        assert (info.value.input, info.value.value) == ("table", "model.onnx.data")
    want = np.take_along_axis(table, indices % 100, 0)
    np.testing.assert_array_equal(run_model(path, {"indices": indices})["y"], want)  # each fix it names works
    np.testing.assert_array_equal(run_model(onnx.load(path), {"indices": indices})["y"], want)
    onnx.external_data_helper.load_external_data_for_model(model, str(tmp_path))
    np.testing.assert_array_equal(run_model(model, {"indices": indices})["y"], want)


def test_a_node_with_an_input_missing_is_an_arity_error_naming_it():
    from gather_scatter import ArityError

    node = oh.make_node("ScatterElements", ["data", "indices"], ["y"], name="write")
    graph = oh.make_graph([node], "g", [_VI("data", 1, [3]), _VI("indices", 7, [1])], [_VI("y", 1, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)], ir_version=8)
    with pytest.raises(ArityError) as info:  # was a ShapeError: a count is not a shape
        run_model(model, {"data": np.zeros(3, np.float32), "indices": np.array([0])})
    assert not isinstance(info.value, ShapeError) and isinstance(info.value, ValueError)
    assert str(info.value) == ("node 'write' (ScatterElements): ScatterElements-13: takes 3 inputs (data, indices, "
                               "updates), got 2; missing: updates")
    assert (info.value.node, info.value.op, info.value.since_version, info.value.value, info.value.valid_range,
            info.value.input) == ("write", "ScatterElements", 13, 2, (3, 3), "updates")


def _cumsum_model(wrap: str, axis: int = 1) -> onnx.ModelProto:
    """CumSum with a 1-element axis tensor (PyTorch's dynamo export of repeat_interleave writes
    one): directly, in a function, an If branch, a Loop. Axis 1 is out of range for x."""
    axis = onnx.numpy_helper.from_array(np.array([axis]), "axis")
    cumsum = oh.make_node("CumSum", ["x", "axis"], ["y"], name="cumsum")
    inputs, output = [_VI("x", onnx.TensorProto.FLOAT, [3])], _VI("y", onnx.TensorProto.FLOAT, None)
    axis_node = oh.make_node("Constant", [], ["axis"], value=axis)
    functions = []
    if wrap == "plain":
        nodes = [axis_node, cumsum]
    elif wrap == "function":
        functions = [oh.make_function("local", "Cum", ["x"], ["y"], [axis_node, cumsum], [oh.make_opsetid("", 14)])]
        nodes = [oh.make_node("Cum", ["x"], ["y"], name="call", domain="local")]
    elif wrap == "if":
        branch = oh.make_graph([axis_node, cumsum], "then", [], [output])
        nodes = [oh.make_node("Constant", [], ["c"], value=oh.make_tensor("c", onnx.TensorProto.BOOL, [], [True])),
                 oh.make_node("If", ["c"], ["y"], name="branch", then_branch=branch, else_branch=branch)]
    else:
        body = oh.make_graph([oh.make_node("Identity", ["cond_in"], ["cond_out"]), axis_node, cumsum], "body",
                             [_VI("i", onnx.TensorProto.INT64, []), _VI("cond_in", onnx.TensorProto.BOOL, [])],
                             [_VI("cond_out", onnx.TensorProto.BOOL, []), output])
        nodes = [oh.make_node("Constant", [], ["n"], value=oh.make_tensor("n", onnx.TensorProto.INT64, [], [1])),
                 oh.make_node("Constant", [], ["t"], value=oh.make_tensor("t", onnx.TensorProto.BOOL, [], [True])),
                 oh.make_node("Loop", ["n", "t"], ["y"], name="loop", body=body)]
    opsets = [oh.make_opsetid("", 14)] + ([oh.make_opsetid("local", 1)] if functions else [])
    graph = oh.make_graph(nodes, "g", inputs, [output])
    return oh.make_model(graph, opset_imports=opsets, functions=functions, ir_version=8)


@pytest.mark.parametrize("wrap", ["plain", "function", "if", "loop"])
def test_an_error_from_another_operator_names_its_node(wrap):
    from gather_scatter import GatherScatterError, NodeError

    with pytest.raises(NodeError) as info:  # was a bare ValueError
        run_model(_cumsum_model(wrap), {"x": np.ones(3, np.float32)})
    err = info.value
    assert isinstance(err, GatherScatterError) and isinstance(err, RuntimeError)
    assert str(err) == ("node 'cumsum' (CumSum, domain ai.onnx, opset 14): ValueError: CumSum's axis 1 is out of "
                        "range for input of rank 1 ([-1, 0])")
    assert (err.node, err.op, err.domain) == ("cumsum", "CumSum", "ai.onnx")
    assert type(err.__cause__) is ValueError and str(err.__cause__).startswith("CumSum's axis 1 is out of range")
    copy = pickle.loads(pickle.dumps(err))
    assert (type(copy), str(copy), copy.node, copy.domain) == (NodeError, str(err), "cumsum", "ai.onnx")


@pytest.mark.parametrize("wrap", ["plain", "function", "if", "loop"])
def test_cumsum_with_a_one_element_axis_runs_everywhere(wrap):
    # onnx.reference refused it ("Axis must be a rank-0 tensor"); onnxruntime runs it, and so do we
    (y,) = run_model(_cumsum_model(wrap, axis=0), {"x": np.array([1, 2, 3], np.float32)}).values()
    expected = np.array([1, 3, 6], np.float32)
    # the Loop's y is a scan output of its one iteration: shape (1, 3)
    np.testing.assert_array_equal(y, expected[None] if wrap == "loop" else expected, strict=True)


def test_a_type_error_from_another_operator_is_named_by_its_own_message():
    from gather_scatter import NodeError

    # onnx.reference wraps a TypeError from an operator in "Issues with types ...": ours shows the original.
    node = oh.make_node("Abs", ["s"], ["y"], name="abs")
    graph = oh.make_graph([node], "g", [_VI("s", onnx.TensorProto.STRING, [1])],
                          [_VI("y", onnx.TensorProto.STRING, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)], ir_version=8)
    with pytest.raises(NodeError, match=r"^node 'abs' \(Abs, domain ai\.onnx, opset 13\): TypeError: bad operand type "
                                        r"for abs\(\): 'str'$") as info:
        run_model(model, {"s": np.array(["a"], dtype=object)})
    assert isinstance(info.value.__cause__, TypeError)


def test_an_operator_onnx_reference_cannot_load_names_its_node():
    from gather_scatter import NodeError

    node = oh.make_node("Frob", ["x"], ["y"], name="frob", domain="my.domain")
    graph = oh.make_graph([node], "g", [_VI("x", 1, [3])], [_VI("y", 1, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13), oh.make_opsetid("my.domain", 2)], ir_version=8)
    with pytest.raises(NodeError, match=r"^node 'frob' \(Frob, domain my\.domain, opset 2\): NotImplementedError: "
                                        r"Node type 'Frob' from domain 'my\.domain' is unknown") as info:
        run_model(model, {"x": np.ones(3, np.float32)})
    assert (info.value.node, info.value.op, info.value.domain) == ("frob", "Frob", "my.domain")


def test_cli_names_the_node_of_another_operator_error(tmp_path, capsys):
    from gather_scatter.cli import main

    onnx.save_model(_cumsum_model("if"), tmp_path / "model.onnx")
    np.save(tmp_path / "x.npy", np.ones(3, np.float32))
    assert main(["run", str(tmp_path / "model.onnx"), "--input", f"x={tmp_path / 'x.npy'}"]) == 2
    assert capsys.readouterr().err == ("gather-scatter run: error: node 'cumsum' (CumSum, domain ai.onnx, opset 14): "
                                       "ValueError: CumSum's axis 1 is out of range for input of rank 1 ([-1, 0])\n")
