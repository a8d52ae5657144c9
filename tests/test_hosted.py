"""The hosted Session (issue 25): onnxruntime runs the model, our kernels the nodes it gets wrong.

Each test builds a small model with onnx.helper and compares ``Session(engine="onnxruntime")``
with onnxruntime alone (bitwise where nothing is routed) and with ``run_model`` (our
evaluator: the spec's answer), and checks what :attr:`Session.plan` says runs where.
"""

from __future__ import annotations

import re
import subprocess
import sys

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh

import gather_scatter as gs
from gather_scatter.errors import IndexOutOfBoundsError, ModelInputError, NodeError

ort = pytest.importorskip("onnxruntime", reason="onnxruntime not installed (pip install 'gather_scatter[onnxruntime]')")

f = oh.make_tensor_value_info


def _model(nodes, inputs, outputs, opset=18, **kwargs):
    graph = oh.make_graph(nodes, "g", inputs, outputs, initializer=kwargs.pop("initializer", None))
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], **kwargs)


def _ort(model, feeds, threads=1):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _pooling(reduction="add", dtype=TP.FLOAT):
    """Relu -> ScatterND(reduction) into 64 segments -> Mul: a routed node between two segments."""
    nodes = [
        oh.make_node("Relu", ["x"], ["r"], name="relu"),
        oh.make_node("ScatterND", ["r", "i", "u"], ["s"], name="pool", reduction=reduction),
        oh.make_node("Mul", ["s", "s"], ["y"], name="square"),
    ]
    inputs = [f("x", dtype, [64, 8]), f("i", TP.INT64, ["n", 1]), f("u", dtype, ["n", 8])]
    return _model(nodes, inputs, [f("y", dtype, [64, 8])])


def _pooling_feeds(n=200_000, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((64, 8)).astype(dtype),
        "i": rng.integers(0, 64, (n, 1)),
        "u": rng.standard_normal((n, 8)).astype(dtype),
    }


def test_nothing_routed_runs_the_original_model_bitwise():
    model = _pooling()
    feeds = _pooling_feeds(1000)
    session = gs.Session(model, engine="onnxruntime", threads=1)
    plan = session.plan
    assert plan.passthrough and plan.routed == {} and len(plan.steps) == 1
    assert plan.steps[0].nodes == ("relu", "pool", "square")
    got = session.run(None, feeds)[0]
    assert got.tobytes() == _ort(model, feeds)[0].tobytes()
    assert "unchanged" in str(plan)


def test_the_builtin_decoder_runs_bitwise_onnxruntime():
    from importlib import resources

    data = resources.files("gather_scatter").joinpath("data")
    model = onnx.load_from_string(data.joinpath("decoder_step.onnx").read_bytes())
    with np.load(str(data.joinpath("decoder_step_inputs.npz"))) as npz:
        feeds = dict(npz)
    hosted = gs.Session(model, engine="onnxruntime", threads=2).run(None, feeds)
    for got, want in zip(hosted, _ort(model, feeds, threads=2), strict=True):
        assert got.tobytes() == want.tobytes()
    # route='all': every indexing node on our kernels, the rest in onnxruntime; float tolerance
    session = gs.Session(model, engine="onnxruntime", threads=2, route="all")
    family = {n.name for n in model.graph.node if (n.domain, n.op_type) in {("", "Gather"), ("", "ScatterND"),
                                                                          ("", "GatherND")}}
    assert set(session.plan.routed) == family and family
    reference = gs.run_model(model, feeds)
    for got, want in zip(session.run(None, feeds), reference.values(), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_scatter_nd_reduction_on_two_threads_is_routed_and_exact_every_run():
    model, feeds = _pooling(), _pooling_feeds()
    session = gs.Session(model, engine="onnxruntime", threads=2)
    plan = session.plan
    assert list(plan.routed) == ["pool"] and "race" in plan.routed["pool"]
    assert [step.engine for step in plan.steps] == ["onnxruntime", "gather_scatter", "onnxruntime"]
    want = gs.run_model(model, feeds)["y"].tobytes()
    assert all(session.run(None, feeds)[0].tobytes() == want for _ in range(20))
    # on one thread onnxruntime runs it right: nothing routed
    assert gs.Session(model, engine="onnxruntime", threads=1).plan.passthrough


@pytest.mark.parametrize("op_type", ["ScatterND", "ScatterElements"])
@pytest.mark.parametrize("dtype", [TP.FLOAT16, TP.BFLOAT16])
def test_half_scatter_reductions_run_where_onnxruntime_fails(op_type, dtype):
    """float16/bfloat16 cross between onnxruntime (Cast before and after) and our kernels."""
    np_dtype = np.float16 if dtype == TP.FLOAT16 else ml_dtypes.bfloat16
    indices = ["i"] if op_type == "ScatterND" else ["j"]
    nodes = [
        oh.make_node("Cast", ["x"], ["h"], to=dtype, name="to_half"),
        oh.make_node(op_type, ["h", *indices, "u"], ["s"], name="pool", reduction="add"),
        oh.make_node("Cast", ["s"], ["y"], to=TP.FLOAT, name="to_float"),
        oh.make_node("Identity", ["s"], ["s_out"], name="keep"),
    ]
    index_input = f("i", TP.INT64, [300, 1]) if op_type == "ScatterND" else f("j", TP.INT64, [300, 8])
    inputs = [f("x", TP.FLOAT, [64, 8]), index_input, f("u", dtype, [300, 8])]
    model = _model(nodes, inputs, [f("y", TP.FLOAT, [64, 8]), f("s_out", dtype, [64, 8])])
    rng = np.random.default_rng(1)
    feeds = {
        "x": rng.standard_normal((64, 8)).astype(np.float32),
        "u": rng.standard_normal((300, 8)).astype(np_dtype),
        **({"i": rng.integers(0, 64, (300, 1))} if op_type == "ScatterND" else {"j": rng.integers(0, 64, (300, 8))}),
    }
    session = gs.Session(model, engine="onnxruntime", threads=1)
    assert "NOT_IMPLEMENTED" in session.plan.routed["pool"]
    got = session.run(None, feeds)
    want = gs.run_model(model, feeds)
    assert got[0].tobytes() == want["y"].tobytes()
    assert got[1].dtype == np.dtype(np_dtype) and got[1].tobytes() == want["s_out"].tobytes()


def test_string_gather_rows_are_right():
    nodes = [
        oh.make_node("Gather", ["words", "ids"], ["rows"], name="lookup", axis=0),
        oh.make_node("Identity", ["rows"], ["out"], name="copy"),
    ]
    model = _model(nodes, [f("words", TP.STRING, [3, 2]), f("ids", TP.INT64, [2])], [f("out", TP.STRING, [2, 2])])
    feeds = {"words": np.array([["a", "b"], ["c", "d"], ["e", "f"]], dtype=object), "ids": np.array([2, 0])}
    session = gs.Session(model, engine="onnxruntime")
    assert "empty strings" in session.plan.routed["lookup"]
    assert session.run(None, feeds)[0].tolist() == [["e", "f"], ["a", "b"]]


def test_a_node_onnxruntime_refuses_to_load_is_routed():
    """complex64 data: onnxruntime refuses the whole model at load without naming a node,
    so each node is probed alone."""
    nodes = [
        oh.make_node("Gather", ["z", "ids"], ["picked"], name="pick", axis=0),
        oh.make_node("Identity", ["ids"], ["ids_out"], name="ids_copy"),
    ]
    model = _model(nodes, [f("z", TP.COMPLEX64, [4]), f("ids", TP.INT64, [2])],
                   [f("picked", TP.COMPLEX64, [2]), f("ids_out", TP.INT64, [2])])
    feeds = {"z": np.arange(4) * (1 + 2j), "ids": np.array([3, -4])}
    feeds["z"] = feeds["z"].astype(np.complex64)
    session = gs.Session(model, engine="onnxruntime")
    assert "refuses to load" in session.plan.routed["pick"]
    picked, ids = session.run(None, feeds)
    assert picked.tolist() == [3 + 6j, 0j] and ids.tolist() == [3, -4]


def test_a_control_flow_node_whose_body_holds_a_routed_node_is_routed_and_exact():
    body_nodes = [oh.make_node("ScatterND", ["x", "i", "u"], ["s"], name="inner_pool", reduction="add")]
    then_branch = oh.make_graph(body_nodes, "then", [], [f("s", TP.FLOAT, None)])
    else_branch = oh.make_graph([oh.make_node("Identity", ["x"], ["e"], name="pass")], "else", [],
                                [f("e", TP.FLOAT, None)])
    nodes = [
        oh.make_node("ReduceSum", ["x"], ["total"], keepdims=0, name="sum"),
        oh.make_node("Greater", ["total", "zero"], ["positive"], name="cmp"),
        oh.make_node("If", ["positive"], ["y"], then_branch=then_branch, else_branch=else_branch, name="branch"),
        oh.make_node("Neg", ["y"], ["z"], name="neg"),
    ]
    zero = onnx.numpy_helper.from_array(np.array(-1e9, np.float32), "zero")
    model = _model(nodes, [f("x", TP.FLOAT, [64, 8]), f("i", TP.INT64, ["n", 1]), f("u", TP.FLOAT, ["n", 8])],
                   [f("z", TP.FLOAT, None)], initializer=[zero])
    feeds = _pooling_feeds(50_000)
    session = gs.Session(model, engine="onnxruntime", threads=2)
    assert list(session.plan.routed) == ["branch"] and "inner_pool" in session.plan.routed["branch"]
    want = gs.run_model(model, feeds)["z"].tobytes()
    assert all(session.run(None, feeds)[0].tobytes() == want for _ in range(5))


def test_sequences_and_optionals_cross_boundaries():
    seq = oh.make_tensor_sequence_value_info
    nodes = [
        oh.make_node("SequenceConstruct", ["x", "x"], ["pair"], name="pair"),
        oh.make_node("ScatterND", ["x", "i", "u"], ["s"], name="pool", reduction="add"),
        oh.make_node("SequenceInsert", ["pair", "s"], ["triple"], name="insert"),
        oh.make_node("SequenceLength", ["triple"], ["n"], name="count"),
        oh.make_node("Optional", ["s"], ["maybe"], name="wrap"),
        oh.make_node("OptionalGetElement", ["maybe"], ["back"], name="unwrap"),
    ]
    inputs = [f("x", TP.FLOAT, [64, 8]), f("i", TP.INT64, ["n", 1]), f("u", TP.FLOAT, ["n", 8])]
    outputs = [seq("triple", TP.FLOAT, None), f("n", TP.INT64, []), f("back", TP.FLOAT, None)]
    model = _model(nodes, inputs, outputs)
    feeds = _pooling_feeds(5000)
    session = gs.Session(model, engine="onnxruntime", threads=2)
    assert list(session.plan.routed) == ["pool"]
    triple, n, back = session.run(None, feeds)
    want = gs.run_model(model, feeds)
    assert isinstance(triple, list) and len(triple) == 3 and int(n) == 3
    assert triple[2].tobytes() == want["triple"][2].tobytes() == back.tobytes()


def test_external_data_stays_in_its_file(tmp_path):
    rng = np.random.default_rng(2)
    weight = onnx.numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32), "w")
    table = onnx.numpy_helper.from_array(rng.standard_normal((64, 8)).astype(np.float32), "table")
    nodes = [
        oh.make_node("MatMul", ["u", "w"], ["uw"], name="project"),
        oh.make_node("ScatterND", ["table", "i", "uw"], ["s"], name="pool", reduction="add"),
        oh.make_node("MatMul", ["s", "w"], ["y"], name="project_back"),
    ]
    model = _model(nodes, [f("i", TP.INT64, ["n", 1]), f("u", TP.FLOAT, ["n", 8])], [f("y", TP.FLOAT, None)],
                   initializer=[weight, table])
    path = tmp_path / "m.onnx"
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="m.data",
              size_threshold=0)
    feeds = {"i": rng.integers(0, 64, (5000, 1)), "u": rng.standard_normal((5000, 8)).astype(np.float32)}
    session = gs.Session(path, engine="onnxruntime", threads=2)
    assert list(session.plan.routed) == ["pool"]
    # the segments reference the file: no weight is copied into them
    from gather_scatter.models.hosted import _partition

    segment = _partition.segment_model(onnx.load(path, load_external_data=False),
                                       session._hosted.plan_steps[0], _partition.value_types(model), "s")
    assert all(onnx.external_data_helper.uses_external_data(t) for t in segment.graph.initializer)
    want = gs.run_model(str(path), feeds)["y"]
    # y is onnxruntime's MatMul of our pool of onnxruntime's MatMul; want's MatMuls are NumPy's BLAS
    # (onnx.reference). Each rounds its float32 sums in its own order (on an AMD EPYC 29 of 512
    # elements differed by 1.5e-5; |y| <= 217): equal within 1e-5 of the largest |y|, where one
    # lost update (a row of u w, ~3) would move y by ~8.
    np.testing.assert_allclose(session.run(None, feeds)[0], want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))
    # what our kernel computes is exact: the pool's output, bit for bit, from the values onnxruntime handed it
    probe = _model(nodes[:2], [f("i", TP.INT64, ["n", 1]), f("u", TP.FLOAT, ["n", 8])],
                   [f("uw", TP.FLOAT, None), f("s", TP.FLOAT, None)], initializer=[weight, table])
    hosted = gs.Session(probe, engine="onnxruntime", threads=2)
    assert list(hosted.plan.routed) == ["pool"]
    uw, pooled = hosted.run(None, feeds)
    np.testing.assert_array_equal(pooled, gs.scatter_nd(onnx.numpy_helper.to_array(table), feeds["i"], uw,
                                                        reduction="add"))


def test_errors_name_the_node():
    model, feeds = _pooling(), _pooling_feeds(100)
    session = gs.Session(model, engine="onnxruntime", threads=2)
    bad = dict(feeds, i=np.where(np.arange(100)[:, None] == 7, 64, feeds["i"]))
    with pytest.raises(IndexOutOfBoundsError, match=r"node 'pool' \(ScatterND\): ScatterND-18: indices\[7, 0\] = 64"):
        session.run(None, bad)
    # an invalid input that onnxruntime refuses in a node of the family: our error, every fact in
    # it, raised from onnxruntime's (a NodeError naming the node onnxruntime names)
    nodes = [oh.make_node("Gather", ["t", "ids"], ["rows"], name="embed"), oh.make_node("Relu", ["rows"], ["y"])]
    model = _model(nodes, [f("t", TP.FLOAT, [4, 2]), f("ids", TP.INT64, [1])], [f("y", TP.FLOAT, None)])
    session = gs.Session(model, engine="onnxruntime", threads=1)
    with pytest.raises(IndexOutOfBoundsError, match=r"node 'embed' \(Gather\): Gather-13: indices\[0\] = 9") as info:
        session.run(None, {"t": np.zeros((4, 2), np.float32), "ids": np.array([9])})
    assert info.value.node == "embed" and info.value.op == "Gather"
    onnxruntimes = info.value.__cause__
    assert isinstance(onnxruntimes, NodeError)
    assert re.match(r"node 'embed' \(Gather, domain ai.onnx, opset 18\): onnxruntime: ", str(onnxruntimes))
    # a model importing the default domain as 'ai.onnx' names the node's opset too
    del model.opset_import[:]
    model.opset_import.append(oh.make_opsetid("ai.onnx", 18))
    with pytest.raises(IndexOutOfBoundsError) as info:
        gs.Session(model, engine="onnxruntime", threads=1).run(None, {"t": np.zeros((4, 2), np.float32),
                                                                      "ids": np.array([9])})
    assert re.match(r"node 'embed' \(Gather, domain ai.onnx, opset 18\): onnxruntime: ", str(info.value.__cause__))
    # feeds are checked as for the reference engine
    with pytest.raises(gs.errors.DTypeError):
        session.run(None, {"t": np.zeros((4, 2), np.float64), "ids": np.array([1])})
    with pytest.raises(ModelInputError, match="no output 'nope'"):
        session.run(["nope"], {"t": np.zeros((4, 2), np.float32), "ids": np.array([1])})


@pytest.mark.parametrize("kwargs, match", [({"engine": "tvm"}, "engine must be"), ({"route": "some"}, "route must"),
                                           ({"threads": 0}, "threads must"), ({"threads": 1.5}, "threads must")])
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gs.Session(_pooling(), **{"engine": "onnxruntime", **kwargs})


def test_without_onnxruntime_the_error_names_the_extra():
    code = (
        "import sys; sys.modules['onnxruntime'] = None\n"
        "import gather_scatter as gs, onnx.helper as oh\n"
        "g = oh.make_graph([oh.make_node('Relu', ['x'], ['y'])], 'g', [oh.make_tensor_value_info('x', 1, [1])],"
        " [oh.make_tensor_value_info('y', 1, [1])])\n"
        "try:\n"
        "    gs.Session(oh.make_model(g), engine='onnxruntime')\n"
        "except ModuleNotFoundError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == 'the onnxruntime engine needs onnxruntime: pip install "gather_scatter[onnxruntime]"'


def test_run_model_and_the_cli_take_the_engine(tmp_path, capsys):
    model, feeds = _pooling(), _pooling_feeds(3000)
    want = gs.run_model(model, feeds)["y"]
    got = gs.run_model(model, feeds, engine="onnxruntime", threads=2)["y"]
    assert got.tobytes() == want.tobytes()
    path = tmp_path / "pool.onnx"
    onnx.save(model, path)
    np.savez(tmp_path / "in.npz", **feeds)
    from gather_scatter.cli import main

    assert main(["run", str(path), "--inputs", str(tmp_path / "in.npz"), "--engine", "onnxruntime", "--threads", "2",
                 "--explain", "--output", str(tmp_path / "out.npz")]) == 0
    text = capsys.readouterr().out
    assert "1 node(s) on our kernels, 2 onnxruntime segment(s)" in text and "pool: onnxruntime splits" in text
    with np.load(tmp_path / "out.npz") as out:
        assert out["y"].tobytes() == want.tobytes()


def test_the_reference_engine_plan_is_one_step():
    plan = gs.Session(_pooling()).plan
    assert plan.engine == "reference" and [s.nodes for s in plan.steps] == [("relu", "pool", "square")]


def test_a_node_routed_inside_a_model_local_function_gives_its_own_rules_reason():
    """A float32 ScatterND add inside a function, at 2 threads: the plan's reason is the race
    rule's own text (the function's body is typed from its call), not a guess at another type."""
    from gather_scatter.models.hosted import _routes as _ort_routes

    f = oh.make_tensor_value_info
    body = oh.make_function(
        "local", "pool", ["x", "i", "u"], ["y"],
        [oh.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction="add")],
        opset_imports=[oh.make_opsetid("", 18)],
    )
    graph = oh.make_graph(
        [oh.make_node("pool", ["x", "i", "u"], ["y"], domain="local", name="call")], "g",
        [f("x", 1, [4]), f("i", 7, [2, 1]), f("u", 1, [2])], [f("y", 1, [4])],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18), oh.make_opsetid("local", 1)],
                          functions=[body])
    session = gs.Session(model, engine="onnxruntime", threads=2)
    (reason,) = session.plan.routed.values()
    race = next(rule for rule in _ort_routes.RULES if rule.kind == "reduction_threads")
    assert race.reason in reason and "no type" not in reason and "float16" not in reason
    feeds = {"x": np.zeros(4, np.float32), "i": np.array([[1], [1]]), "u": np.array([1.0, 2.0], np.float32)}
    np.testing.assert_array_equal(session.run(None, feeds)[0], [0, 3, 0, 0])
    assert gs.Session(model, engine="onnxruntime", threads=1).plan.routed == {}  # one thread: exact


def test_a_constant_read_across_a_routed_node_is_made_again_in_the_segment():
    """The TorchScript export of a scatter_reduce('amax') pool: an If on a Constant condition
    after the routed ScatterElements, whose branch output is declared float[1024] while it holds
    (16, 64). onnxruntime folds the If where the condition is a constant of its segment; fed from
    another step, it ran the branch and refused the declared shape. The Constant is made again in
    each segment that reads it, and nothing of it crosses a boundary."""
    f = oh.make_tensor_value_info
    cond = oh.make_node("Constant", [], ["cond"], value=oh.make_tensor("c", TP.BOOL, [], [False]), name="cond")
    pool = oh.make_node("ScatterElements", ["x", "i", "u"], ["s"], reduction="max", name="pool")
    then = oh.make_graph([oh.make_node("Flatten", ["s"], ["t"], axis=0)], "then", [], [f("t", TP.FLOAT, [1, 1024])])
    other = oh.make_graph([oh.make_node("Identity", ["s"], ["e"])], "else", [], [f("e", TP.FLOAT, [1024])])
    branch = oh.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other, name="branch")
    graph = oh.make_graph([cond, pool, branch, oh.make_node("Relu", ["y"], ["out"], name="relu")], "g",
                          [f("x", TP.FLOAT, [16, 64]), f("i", TP.INT64, [4, 64]), f("u", TP.FLOAT, [4, 64])],
                          [f("out", TP.FLOAT, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((16, 64)).astype(np.float32), "i": rng.integers(0, 16, (4, 64)),
             "u": rng.standard_normal((4, 64)).astype(np.float32)}
    session = gs.Session(model, engine="onnxruntime", threads=1)
    assert list(session.plan.routed) == ["pool"]
    assert all("cond" not in step.inputs for step in session.plan.steps)
    (out,) = session.run(None, feeds)
    pooled = gs.scatter_elements(feeds["x"], feeds["i"], feeds["u"], reduction="max")
    np.testing.assert_array_equal(out, np.maximum(pooled, 0))


def _string_max_model():
    f = oh.make_tensor_value_info
    node = oh.make_node("ScatterElements", ["x", "i", "u"], ["s"], reduction="max", name="top")
    graph = oh.make_graph([node, oh.make_node("Identity", ["s"], ["y"], name="echo")], "g",
                          [f("x", TP.STRING, [3]), f("i", TP.INT64, [2]), f("u", TP.STRING, [2])], [f("y", TP.STRING, [3])])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])


def test_a_valid_input_onnxruntime_refuses_at_run_time_runs_on_our_kernels_though_no_rule_names_it(monkeypatch):
    """Without the string max/min rule, onnxruntime refuses the node at run time ('string data
    type is not supported'): the run is made again with the node routed, and the Session keeps
    that routing, its reason in the plan."""
    from gather_scatter.models.hosted import _routes as _ort_routes

    monkeypatch.setattr(_ort_routes, "RULES", tuple(r for r in _ort_routes.RULES if r.kind != "string_max_min"))
    session = gs.Session(_string_max_model(), engine="onnxruntime", threads=1)
    assert session.plan.routed == {}  # nothing routed at build: onnxruntime loads it
    feeds = {"x": np.array(["b", "x", "m"], object), "i": np.array([0, 0]), "u": np.array(["c", "a"], object)}
    (out,) = session.run(None, feeds)
    assert out.tolist() == ["c", "x", "m"]
    assert "refused it at run time" in session.plan.routed["top"]
    assert feeds["x"].tolist() == ["b", "x", "m"]  # the caller's arrays untouched
    (again,) = session.run(None, {**feeds, "u": np.array(["z", "a"], object)})
    assert again.tolist() == ["z", "x", "m"]


def test_an_invalid_input_onnxruntime_refuses_raises_our_error_with_every_fact():
    """An index out of bounds in a Gather that onnxruntime runs: our IndexOutOfBoundsError
    (position, value, valid range), from onnxruntime's; the Session keeps Gather in onnxruntime."""
    f = oh.make_tensor_value_info
    graph = oh.make_graph([oh.make_node("Gather", ["data", "ids"], ["rows"], name="embed")], "g",
                          [f("data", TP.FLOAT, [4, 2]), f("ids", TP.INT64, ["n"])], [f("rows", TP.FLOAT, ["n", 2])])
    session = gs.Session(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]), engine="onnxruntime", threads=1)
    data = np.arange(8, dtype=np.float32).reshape(4, 2)
    with pytest.raises(gs.IndexOutOfBoundsError) as caught:
        session.run(None, {"data": data, "ids": np.array([1, 7])})
    assert (caught.value.position, caught.value.value, caught.value.node) == ((1,), 7, "embed")
    assert "onnxruntime" in str(caught.value.__cause__)
    assert session.plan.routed == {} and session.plan.passthrough
    np.testing.assert_array_equal(session.run(None, {"data": data, "ids": np.array([3])})[0], data[[3]])


def test_an_error_of_a_node_outside_the_family_stays_onnxruntimes():
    f = oh.make_tensor_value_info
    nodes = [oh.make_node("Gather", ["data", "ids"], ["rows"], name="embed"),
             oh.make_node("Reshape", ["rows", "shape"], ["out"], name="fold")]
    graph = oh.make_graph(nodes, "g", [f("data", TP.FLOAT, [4, 2]), f("ids", TP.INT64, ["n"]),
                                       f("shape", TP.INT64, [2])], [f("out", TP.FLOAT, None)])
    session = gs.Session(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]), engine="onnxruntime", threads=1)
    feeds = {"data": np.zeros((4, 2), np.float32), "ids": np.array([1, 2]), "shape": np.array([3, 3])}
    with pytest.raises(gs.NodeError, match="fold"):
        session.run(None, feeds)


def test_a_node_onnxruntime_refuses_to_load_for_an_invalid_attribute_raises_our_error(capfd):
    """onnxruntime refuses Gather's axis 5 on rank-2 data at load ('Node (g) Op (Gather)
    [ShapeInferenceError] axis must be in [-r, r-1]'): the node is found by that name, routed,
    and our InvalidAttributeError says the axis, the rank and the valid range; onnxruntime
    prints nothing of its own on stderr."""
    f = oh.make_tensor_value_info
    nodes = [oh.make_node("Gather", ["d", "i"], ["o"], axis=5, name="g"), oh.make_node("Relu", ["o"], ["r"])]
    graph = oh.make_graph(nodes, "g", [f("d", TP.FLOAT, [3, 2]), f("i", TP.INT64, [2])], [f("r", TP.FLOAT, None)])
    session = gs.Session(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]), engine="onnxruntime")
    assert "refuses to load" in session.plan.routed["g"]
    with pytest.raises(gs.InvalidAttributeError, match=r"axis = 5 is out of range for data of rank 2 \(valid range"):
        session.run(None, {"d": np.zeros((3, 2), np.float32), "i": np.array([0, 1])})
    assert "onnxruntime" not in capfd.readouterr().err


@pytest.mark.parametrize(("dtype", "np_dtype"), [(TP.FLOAT, np.float32), (TP.BFLOAT16, ml_dtypes.bfloat16)])
def test_an_initializer_that_is_also_an_input_is_fed_or_left_to_its_default(dtype, np_dtype):
    """A segment feeds a graph input with an initializer only where the run has it (issue 38: a
    segment's fed names are fixed at build), in NumPy's mode and in OrtValues' (bfloat16)."""
    nodes = [
        oh.make_node("ScatterND", ["x", "i", "u"], ["s"], name="pool", reduction="max"),
        oh.make_node("Add", ["s", "bias"], ["y"], name="shift"),
    ]
    bias = oh.make_tensor("bias", dtype, [4, 2], np.full(8, 0.5, np.float32))
    inputs = [f("x", dtype, [4, 2]), f("i", TP.INT64, [2, 1]), f("u", dtype, [2, 2]), f("bias", dtype, [4, 2])]
    model = _model(nodes, inputs, [f("y", dtype, [4, 2])], initializer=[bias])
    session = gs.Session(model, engine="onnxruntime", threads=2)
    assert session.plan.routed  # two threads: the ScatterND's reduction is ours
    feeds = {"x": np.arange(8).reshape(4, 2).astype(np_dtype), "i": np.array([[3], [0]]),
             "u": np.full((2, 2), 9).astype(np_dtype)}  # fmt: skip
    for given in ({}, {"bias": np.full((4, 2), -1).astype(np_dtype)}):
        (got,) = session.run(None, {**feeds, **given})
        want = gs.run_model(model, {**feeds, **given})["y"]
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), given
