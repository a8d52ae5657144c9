"""The hosted Session's routed steps and control-flow bodies (issue 38).

A routed node of the family is called straight (its kernel, resolved at build); an If, Loop or
Scan whose body holds a routed node runs in our driver, each body hosted as a graph (its routed
nodes on our kernels, the rest in onnxruntime). Every result is compared bit for bit with
``run_model`` (the reference engine), and the tests that claim a body is hosted build the Session
with the evaluator unavailable, so that a silent fallback to it fails.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh

import gather_scatter as gs
from gather_scatter.errors import IndexOutOfBoundsError

pytest.importorskip("onnxruntime", reason="onnxruntime not installed (pip install 'gather_scatter[onnxruntime]')")

f = oh.make_tensor_value_info
rng = np.random.default_rng(38)


def _model(nodes, inputs, outputs, opset=18):
    graph = oh.make_graph(nodes, "g", inputs, outputs)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])


def _scatter(data, out, name):
    """A ScatterND max of float data: routed at every thread count (onnxruntime drops a NaN)."""
    return oh.make_node("ScatterND", [data, "k", "u"], [out], reduction="max", name=name)


def _relus(first, last, count, tag):
    names = [first, *(f"{tag}{i}" for i in range(count - 1)), last]
    return [oh.make_node("Relu", [names[i]], [names[i + 1]], name=f"{tag}_relu{i}") for i in range(count)]


FEEDS = {
    "x": rng.standard_normal((6, 4)).astype(np.float32),
    "k": np.array([[1], [4], [1]]),
    "u": rng.standard_normal((3, 4)).astype(np.float32) * 4,
}
INPUTS = [f("x", TP.FLOAT, [6, 4]), f("k", TP.INT64, [3, 1]), f("u", TP.FLOAT, [3, 4])]


class _NoEvaluator:
    def __init__(self, *args, **kwargs):
        raise AssertionError("a routed node went to the evaluator")


@pytest.fixture
def hosted_only(monkeypatch):
    """Build Sessions whose routed nodes may not use the evaluator (run_model still may)."""
    import gather_scatter.models.reference as reference

    def build(model, **kwargs):
        with monkeypatch.context() as patch:
            patch.setattr(reference, "Evaluator", _NoEvaluator)
            return gs.Session(model, engine="onnxruntime", threads=2, **kwargs)

    return build


def _same(session, model, feeds):
    """The hosted outputs, each bit for bit run_model's (dtype and shape too)."""
    want = gs.run_model(model, feeds)
    got = session.run(None, feeds)
    assert list(want) == [o.name for o in model.graph.output]
    for (name, w), g in zip(want.items(), got, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, name
        assert g.tobytes() == w.tobytes(), name
    return got


def test_top_level_routed_nodes_call_the_kernel_straight(hosted_only):
    words = np.array([["a", "b"], ["c", "d"], ["e", "f"]], dtype=object)
    nodes = [
        oh.make_node("Neg", ["x"], ["n"], name="neg"),
        _scatter("n", "s", "pool"),
        oh.make_node("Gather", ["words", "ids"], ["picked"], axis=0, name="pick_words"),  # strings: routed
        oh.make_node("GatherND", ["s", "k"], ["rows"], batch_dims=0, name="rows"),
        oh.make_node("Relu", ["rows"], ["y"], name="relu"),
    ]
    model = _model(nodes, [*INPUTS, f("words", TP.STRING, [3, 2]), f("ids", TP.INT64, [2])],
                   [f("y", TP.FLOAT, None), f("picked", TP.STRING, None), f("s", TP.FLOAT, None)])
    session = hosted_only(model)
    assert sorted(session.plan.routed) == ["pick_words", "pool"]
    feeds = {**FEEDS, "words": words, "ids": np.array([2, -3])}
    y, picked, s = session.run(None, feeds)
    assert picked.tolist() == [["e", "f"], ["a", "b"]]
    want_s = -FEEDS["x"]
    for row, upd in zip(FEEDS["k"][:, 0], FEEDS["u"], strict=True):
        want_s[row] = np.maximum(want_s[row], upd)
    assert s.tobytes() == want_s.tobytes() and y.tobytes() == np.maximum(want_s[[1, 4, 1]], 0).tobytes()
    _same(session, model, feeds)


def _if_model():
    then = oh.make_graph([_scatter("x", "s0", "then_pool"), *_relus("s0", "t_out", 5, "t")], "then", [],
                         [f("t_out", TP.FLOAT, None)])
    other = oh.make_graph([oh.make_node("Neg", ["x"], ["e_out"], name="else_neg")], "else", [],
                          [f("e_out", TP.FLOAT, None)])
    nodes = [
        oh.make_node("Abs", ["x"], ["a"], name="abs"),
        oh.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="branch"),
        oh.make_node("Add", ["y", "a"], ["z"], name="add"),
    ]
    return _model(nodes, [*INPUTS, f("c", TP.BOOL, [])], [f("z", TP.FLOAT, None)])


def test_an_if_with_a_routed_node_in_a_branch_hosts_both_branches(hosted_only):
    model = _if_model()
    session = hosted_only(model)
    assert list(session.plan.routed) == ["branch"]
    for cond in (True, False):
        (z,) = _same(session, model, {**FEEDS, "c": np.array(cond)})
        if not cond:
            assert z.tobytes() == (-FEEDS["x"] + np.abs(FEEDS["x"])).tobytes()
    assert z.sum() != 0


def test_a_loop_hosts_its_body_with_carried_values_scan_outputs_and_captures(hosted_only):
    # body(i, cond, v, keep): v' = relu(scatter_max(v, k, u) + x) (x, k, u from outside), keep
    # handed on unchanged (a body output that is a body input), the scan output i * 2, and
    # cond' = i < 2, so a loop given M = 5 and cond = true stops after 3 iterations.
    body_nodes = [
        _scatter("v", "s", "body_pool"),
        oh.make_node("Add", ["s", "x"], ["sx"], name="body_add"),
        oh.make_node("Relu", ["sx"], ["v_out"], name="body_relu"),
        oh.make_node("Add", ["i", "i"], ["twice"], name="body_twice"),
        oh.make_node("Less", ["i", "two"], ["cond_out"], name="body_less"),
    ]
    two = onnx.numpy_helper.from_array(np.array(2, np.int64), "two")
    body = oh.make_graph(body_nodes, "body",
                         [f("i", TP.INT64, []), f("cond", TP.BOOL, []), f("v", TP.FLOAT, [6, 4]),
                          f("keep", TP.INT64, [2])],
                         [f("cond_out", TP.BOOL, []), f("v_out", TP.FLOAT, None), f("keep", TP.INT64, None),
                          f("twice", TP.INT64, [])], initializer=[two])
    loop = oh.make_node("Loop", ["m", "c", "x", "kept"], ["v_final", "kept_final", "twices"], body=body, name="loop")
    model = _model([loop], [*INPUTS, f("m", TP.INT64, []), f("c", TP.BOOL, []), f("kept", TP.INT64, [2])],
                   [f("v_final", TP.FLOAT, None), f("kept_final", TP.INT64, None), f("twices", TP.INT64, None)])
    session = hosted_only(model)
    assert list(session.plan.routed) == ["loop"]
    feeds = {**FEEDS, "m": np.array(5), "c": np.array(True), "kept": np.array([7, 8])}
    v, kept, twices = _same(session, model, feeds)
    assert twices.tolist() == [0, 2, 4] and kept.tolist() == [7, 8]
    _same(session, model, {**feeds, "m": np.array(1)})
    # no iteration: the carried values as given; the empty scan output comes from the evaluator
    v, kept, twices = _same(session, model, {**feeds, "c": np.array(False)})
    assert v.tobytes() == FEEDS["x"].tobytes() and twices.shape == (0,)


def test_a_loop_body_that_reads_neither_i_nor_cond_or_hands_cond_on_as_it_is(hosted_only):
    # The driver makes the iteration number and cond only for a body that reads them: here one
    # body hands its cond input on as its cond output (a body output that is a body input) and
    # never reads i, the other reads neither (cond_out a constant), each over three trips.
    def loop_model(cond_out_node):
        nodes = [_scatter("v", "s", "body_pool"), *_relus("s", "v_out", 2, "b"), *cond_out_node]
        cond_out = "cond" if not cond_out_node else "cond_out"
        body = oh.make_graph(nodes, "body", [f("i", TP.INT64, []), f("cond", TP.BOOL, []), f("v", TP.FLOAT, [6, 4])],
                             [f(cond_out, TP.BOOL, []), f("v_out", TP.FLOAT, None)])
        loop = oh.make_node("Loop", ["m", "c", "x"], ["v_final"], body=body, name="loop")
        return _model([loop], [*INPUTS, f("m", TP.INT64, []), f("c", TP.BOOL, [])], [f("v_final", TP.FLOAT, None)])

    always = oh.make_node("Constant", [], ["cond_out"], value=onnx.numpy_helper.from_array(np.array(True)))
    for model in (loop_model([]), loop_model([always])):
        session = hosted_only(model)
        assert list(session.plan.routed) == ["loop"]
        feeds = {**FEEDS, "m": np.array(3), "c": np.array(True)}
        (v,) = _same(session, model, feeds)
        want = FEEDS["x"]
        for _ in range(3):
            want = want.copy()
            for row, upd in zip(FEEDS["k"][:, 0], FEEDS["u"], strict=True):
                want[row] = np.maximum(want[row], upd)
            want = np.maximum(want, 0)
        assert v.tobytes() == want.tobytes()
        _same(session, model, {**feeds, "c": np.array(False)})


def test_a_scan_hosts_its_body_with_axes_and_directions(hosted_only):
    # state: a running scatter_max of each row of x (scanned along axis 1, in reverse) into acc
    body_nodes = [
        oh.make_node("Unsqueeze", ["col", "zero"], ["col2"], name="body_unsqueeze"),
        oh.make_node("Add", ["acc", "col2"], ["summed"], name="body_add"),
        _scatter("summed", "acc_out", "scan_pool"),
        oh.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0, name="body_total"),
    ]
    zero = onnx.numpy_helper.from_array(np.array([1], np.int64), "zero")
    body = oh.make_graph(body_nodes, "body", [f("acc", TP.FLOAT, [6, 1]), f("col", TP.FLOAT, [6])],
                         [f("acc_out", TP.FLOAT, None), f("total", TP.FLOAT, [])], initializer=[zero])
    scan = oh.make_node("Scan", ["acc0", "x"], ["acc", "totals"], body=body, num_scan_inputs=1,
                        scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[-1],
                        scan_output_directions=[1], name="scan")
    inputs = [f("acc0", TP.FLOAT, [6, 1]), f("x", TP.FLOAT, [6, 4]), f("k", TP.INT64, [3, 1]), f("u", TP.FLOAT, [3, 1])]
    model = _model([scan], inputs, [f("acc", TP.FLOAT, None), f("totals", TP.FLOAT, None)])
    session = hosted_only(model)
    feeds = {**FEEDS, "u": FEEDS["u"][:, :1].copy(), "acc0": np.zeros((6, 1), np.float32)}
    acc, totals = _same(session, model, feeds)
    assert totals.shape == (4,) and acc.shape == (6, 1) and np.abs(totals).sum() > 0


def test_nested_bodies_are_hosted_at_every_depth_and_see_every_outer_scope(hosted_only):
    # Loop body -> If then-branch -> a routed scatter reading the Loop body's v and the main graph's k, u
    then = oh.make_graph([_scatter("v", "s", "deep_pool"), oh.make_node("Abs", ["s"], ["t"], name="deep_abs")],
                         "then", [], [f("t", TP.FLOAT, None)])
    other = oh.make_graph([oh.make_node("Neg", ["v"], ["e"], name="deep_neg")], "else", [],
                          [f("e", TP.FLOAT, None)])
    body_nodes = [
        oh.make_node("Mod", ["i", "two"], ["odd_i"], name="body_mod"),
        oh.make_node("Cast", ["odd_i"], ["odd"], to=TP.BOOL, name="body_cast"),
        oh.make_node("If", ["odd"], ["v_out"], then_branch=then, else_branch=other, name="inner_if"),
        oh.make_node("Identity", ["cond"], ["cond_out"], name="body_cond"),
    ]
    two = onnx.numpy_helper.from_array(np.array(2, np.int64), "two")
    body = oh.make_graph(body_nodes, "body", [f("i", TP.INT64, []), f("cond", TP.BOOL, []), f("v", TP.FLOAT, None)],
                         [f("cond_out", TP.BOOL, []), f("v_out", TP.FLOAT, None)], initializer=[two])
    loop = oh.make_node("Loop", ["m", "", "x"], ["y"], body=body, name="outer_loop")
    model = _model([loop], [*INPUTS, f("m", TP.INT64, [])], [f("y", TP.FLOAT, None)])
    session = hosted_only(model)
    (y,) = _same(session, model, {**FEEDS, "m": np.array(4)})
    assert y.shape == (6, 4) and not np.array_equal(y, FEEDS["x"])


def test_a_bad_index_in_a_body_raises_our_error_naming_the_body_node(hosted_only):
    session = hosted_only(_if_model())
    feeds = {**FEEDS, "k": np.array([[1], [6], [0]]), "c": np.array(True)}
    with pytest.raises(IndexOutOfBoundsError, match=r"node 'then_pool' \(ScatterND\).*indices\[1, 0\] = 6") as info:
        session.run(None, feeds)
    assert info.value.node == "then_pool" and info.value.value == 6
    with pytest.raises(IndexOutOfBoundsError, match="then_pool"):
        gs.run_model(_if_model(), feeds)
    # the other branch reads no index: it runs
    assert session.run(None, {**feeds, "c": np.array(False)})[0].shape == (6, 4)


def test_what_the_driver_does_not_take_runs_in_the_evaluator_as_before():
    # Scan-8 (a batch axis and sequence_lens) of a body with a routed string Gather
    body = oh.make_graph([oh.make_node("Gather", ["words", "id"], ["w"], axis=0, name="scan8_pick")], "body",
                         [f("id", TP.INT64, [])], [f("w", TP.STRING, [])])
    scan = oh.make_node("Scan", ["", "ids"], ["picked"], body=body, num_scan_inputs=1, name="scan8")
    model = _model([scan], [f("words", TP.STRING, [3]), f("ids", TP.INT64, [1, 4])], [f("picked", TP.STRING, None)],
                   opset=8)
    session = gs.Session(model, engine="onnxruntime", threads=2)
    feeds = {"words": np.array(["a", "b", "c"], dtype=object), "ids": np.array([[2, 0, -1, 1]])}
    (picked,) = session.run(None, feeds)
    assert picked.tolist() == [["c", "a", "c", "b"]]
    assert picked.tolist() == gs.run_model(model, feeds)["picked"].tolist()


def test_a_routed_scatter_calls_its_signatures_plan_once_the_kernel_made_one(hosted_only, monkeypatch):
    # A routed ScatterND / ScatterElements reduction runs the plan the kernel's path made for its
    # signature, itself: each run bit for bit the reference's, a new signature back through the
    # kernel, and a bad index raised by the kernel's path, naming the node.
    import gather_scatter._calls as calls

    ran = []
    real = calls.planned_scatter

    def counted(spec, inputs, values):
        plan = real(spec, inputs, values)
        if plan is None:
            return None

        def run(*args):
            ran.append(spec.op_type)
            return plan(*args)

        return run

    monkeypatch.setattr(calls, "planned_scatter", counted)
    nodes = [
        _scatter("x", "s", "pool"),
        oh.make_node("ScatterElements", ["s", "j", "w"], ["y"], axis=1, reduction="add", name="spread"),
    ]
    model = _model(nodes, [*INPUTS, f("j", TP.INT64, None), f("w", TP.FLOAT, None)], [f("y", TP.FLOAT, None)])
    session = hosted_only(model, route="all")
    assert sorted(session.plan.routed) == ["pool", "spread"]
    for trip in range(6):
        feeds = {**FEEDS, "u": rng.standard_normal((3, 4)).astype(np.float32),
                 "j": rng.integers(-4, 4, (6, 3)), "w": rng.standard_normal((6, 3)).astype(np.float32)}
        if trip == 4:  # a NaN: max keeps it, as the kernel does
            feeds["u"][0, 0] = np.nan
        _same(session, model, feeds)
    if gs.kernels.compiled_loops() is None:  # plans are of compiled loops: the kernel's path every time
        assert ran == []
    else:
        assert ran.count("ScatterND") >= 3 and ran.count("ScatterElements") >= 3
    ran.clear()
    wide = {**feeds, "j": rng.integers(0, 4, (6, 2)), "w": rng.standard_normal((6, 2)).astype(np.float32)}
    _same(session, model, wide)  # another signature: the kernel's path
    assert ran == ([] if gs.kernels.compiled_loops() is None else ["ScatterND"])
    with pytest.raises(IndexOutOfBoundsError, match=r"node 'pool' \(ScatterND\)"):
        session.run(None, {**feeds, "k": np.array([[1], [6], [0]])})
    with pytest.raises(IndexOutOfBoundsError, match=r"node 'spread' \(ScatterElements\)"):
        session.run(None, {**feeds, "j": np.full((6, 3), 4)})


def test_identities_of_values_from_outside_a_segment_are_resolved_as_aliases(hosted_only):
    # A Loop body: cond_out = Identity(cond) (the loop's condition then never changes, and the
    # driver feeds no cond), keep_out = Identity(Identity(keep)) (a chain), xs = Identity(x) (an
    # outer value, a scan output), y_out = Identity(v) read by a Relu of the same segment (stays
    # in onnxruntime). None of them costs the segment an input or an output.
    body_nodes = [
        _scatter("v", "s", "body_pool"),
        *_relus("s", "v_out", 2, "b"),
        oh.make_node("Identity", ["cond"], ["cond_out"], name="pass_cond"),
        oh.make_node("Identity", ["keep"], ["keep1"], name="keep_a"),
        oh.make_node("Identity", ["keep1"], ["keep_out"], name="keep_b"),
        oh.make_node("Identity", ["x"], ["xs"], name="outer"),
        oh.make_node("Identity", ["v_out"], ["seen"], name="seen"),
        oh.make_node("Relu", ["seen"], ["y_out"], name="after_seen"),
    ]
    body = oh.make_graph(body_nodes, "body",
                         [f("i", TP.INT64, []), f("cond", TP.BOOL, []), f("v", TP.FLOAT, [6, 4]),
                          f("keep", TP.INT64, [2])],
                         [f("cond_out", TP.BOOL, []), f("v_out", TP.FLOAT, None), f("keep_out", TP.INT64, None),
                          f("xs", TP.FLOAT, None), f("y_out", TP.FLOAT, None)])
    loop = oh.make_node("Loop", ["m", "c", "x", "kept"], ["v_final", "kept_final", "xss", "ys"], body=body,
                        name="loop")
    model = _model([loop], [*INPUTS, f("m", TP.INT64, []), f("c", TP.BOOL, []), f("kept", TP.INT64, [2])],
                   [f("v_final", TP.FLOAT, None), f("kept_final", TP.INT64, None), f("xss", TP.FLOAT, None),
                    f("ys", TP.FLOAT, None)])
    session = hosted_only(model)
    feeds = {**FEEDS, "m": np.array(3), "c": np.array(True), "kept": np.array([7, 8])}
    v, kept, xss, ys = _same(session, model, feeds)
    assert kept.tolist() == [7, 8] and xss.shape == (3, 6, 4) and all(np.array_equal(a, FEEDS["x"]) for a in xss)
    assert ys.shape == (3, 6, 4) and np.array_equal(ys[-1], v)
    loop_run = session._hosted.steps[0].run
    body_hosted = dict(zip(loop_run.__code__.co_freevars, [c.cell_contents for c in loop_run.__closure__]))["body"]
    assert body_hosted.hosted.aliases == {"cond_out": "cond", "keep1": "keep", "keep_out": "keep", "xs": "x"}
    segment = [s for s in body_hosted.hosted.steps if hasattr(s, "session")][0]
    assert set(segment.feeds) == {"s"} and "seen" not in body_hosted.hosted.aliases
    assert "cond" not in body_hosted.reads(body_hosted.outputs[1:])  # the driver feeds no cond
    _same(session, model, {**feeds, "c": np.array(False), "m": np.array(2)})


def test_an_identity_read_by_a_later_step_and_a_main_output_identity(hosted_only):
    # t = Identity(s) of a routed output, read by the next routed node: put among the values
    # after its segment; z = Identity(x) is a main-graph output: onnxruntime's copy, never the feed.
    nodes = [
        _scatter("x", "s", "first"),
        oh.make_node("Identity", ["s"], ["t"], name="alias"),
        oh.make_node("Neg", ["s"], ["n"], name="neg"),
        oh.make_node("Gather", ["n", "rows"], ["n_rows"], axis=0, name="rows_of_n"),
        oh.make_node("ScatterND", ["t", "k", "n_rows"], ["s2"], reduction="max", name="second"),
        oh.make_node("Relu", ["s2"], ["y"], name="relu"),
        oh.make_node("Identity", ["x"], ["z"], name="copy"),
    ]
    model = _model(nodes, [*INPUTS, f("rows", TP.INT64, [3])], [f("y", TP.FLOAT, None), f("z", TP.FLOAT, None)])
    session = hosted_only(model)
    feeds = {**FEEDS, "rows": np.array([0, 2, 5])}
    y, z = _same(session, model, feeds)
    assert not np.shares_memory(z, feeds["x"]) and np.array_equal(z, feeds["x"])
    assert session._hosted.aliases == {"t": "s"}
