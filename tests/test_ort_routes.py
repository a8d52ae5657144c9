"""The hosted Session's routing table (issue 25): which indexing nodes onnxruntime gets wrong
or cannot run, by version, each with its reason. Pure data: no onnxruntime needed."""

from __future__ import annotations

import dataclasses

import pytest

from gather_scatter.models.hosted import _routes as routes
from gather_scatter.models.hosted._routes import NodeFacts, route_reason
from gather_scatter.rules.versions import REGISTRY


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_scatter_nd_reductions_route_on_more_than_one_thread(reduction):
    node = NodeFacts("", "ScatterND", "int32" if reduction in ("max", "min") else "float", reduction, threads=2)
    assert "race" in route_reason(node, "1.32.0")
    assert route_reason(dataclasses.replace(node, threads=1), "1.32.0") is None  # one thread: exact
    assert route_reason(dataclasses.replace(node, reduction="none"), "1.32.0") is None  # no reduction: no race
    # ScatterElements' reductions run on one thread in onnxruntime: measured exact at 2 threads
    assert route_reason(dataclasses.replace(node, op_type="ScatterElements"), "1.32.0") is None


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op_type", ["ScatterND", "ScatterElements"])
def test_half_scatter_reductions_route_at_any_thread_count(op_type, dtype):
    reason = route_reason(NodeFacts("", op_type, dtype, "add", threads=1), "1.32.0")
    assert reason is not None and "NOT_IMPLEMENTED" in reason
    assert route_reason(NodeFacts("", op_type, dtype, "none", threads=1), "1.32.0") is None


@pytest.mark.parametrize("reduction", ["max", "min"])
@pytest.mark.parametrize("op_type", ["ScatterND", "ScatterElements"])
def test_bool_max_min_scatter_reductions_route(op_type, reduction):
    reason = route_reason(NodeFacts("", op_type, "bool", reduction, threads=1), "1.32.0")
    assert reason is not None and "bool" in reason
    for other in ("add", "mul", "none"):
        assert route_reason(NodeFacts("", op_type, "bool", other, threads=1), "1.32.0") is None


@pytest.mark.parametrize("domain, op_type", [("", "Gather"), ("", "GatherElements"), ("", "GatherND"),
                                             ("com.microsoft", "GatherND")])
def test_string_gathers_route(domain, op_type):
    assert "empty strings" in route_reason(NodeFacts(domain, op_type, "string"), "1.32.0")
    assert route_reason(NodeFacts(domain, op_type, "float"), "1.32.0") is None


@pytest.mark.parametrize("dtype", ["float", "double", "float16", "bfloat16"])
@pytest.mark.parametrize("reduction", ["max", "min"])
@pytest.mark.parametrize("op_type", ["ScatterND", "ScatterElements"])
def test_float_max_min_scatter_reductions_route_for_the_nan_rule(op_type, reduction, dtype):
    """onnxruntime drops a NaN under max/min: every float max/min routes, at any thread count."""
    reason = route_reason(NodeFacts("", op_type, dtype, reduction, threads=1), "1.32.0")
    assert reason is not None and ("NaN" in reason or "NOT_IMPLEMENTED" in reason)
    for integer in ("int32", "int64", "uint8"):
        assert route_reason(NodeFacts("", op_type, integer, reduction, threads=1), "1.32.0") is None


@pytest.mark.parametrize("op_type", ["ScatterND", "ScatterElements"])
def test_string_max_min_scatter_reductions_route(op_type):
    for reduction in ("max", "min"):
        assert "string" in route_reason(NodeFacts("", op_type, "string", reduction, threads=1), "1.32.0")
    # add concatenates in onnxruntime as the spec's loop does; mul is refused by both (a type error)
    for reduction in ("add", "mul", "none"):
        assert route_reason(NodeFacts("", op_type, "string", reduction, threads=1), "1.32.0") is None


def test_gather_nd_with_batch_dims_routes():
    node = NodeFacts("", "GatherND", "float", batch_dims=1)
    assert "batch dims" in route_reason(node, "1.32.0")
    assert route_reason(dataclasses.replace(node, batch_dims=0), "1.32.0") is None
    assert route_reason(dataclasses.replace(node, op_type="Gather"), "1.32.0") is None


def test_every_rule_says_what_onnxruntime_does_wrong():
    outcomes = {"wrong_value", "wrong_shape", "accepts_invalid", "refuses_at_load", "refuses_at_run", "crash"}
    for rule in routes.RULES:
        assert rule.outcome in outcomes, rule
        if not rule.suite:  # shown outside the suite only: the reason must say why
            assert "suite" in rule.reason, rule.kind


def test_nodes_no_rule_names_stay_in_onnxruntime():
    for node in (NodeFacts("", "MatMul", "float", threads=4), NodeFacts("", "TensorScatter", "float16", threads=4),
                 NodeFacts("", "Scatter", "float", threads=4), NodeFacts("", "ScatterND", None, "none", 4)):
        assert route_reason(node, "1.32.0") is None, node


def test_every_rule_names_registered_operators_and_a_reason():
    registered = {(v.domain, v.op_type) for v in REGISTRY.values()}
    for rule in routes.RULES:
        assert rule.ops <= registered, rule.ops - registered
        assert len(rule.reason) > 40 and "onnxruntime" in rule.reason


def test_a_rule_ends_at_the_release_that_fixes_it_and_holds_for_unmeasured_ones(monkeypatch):
    node = NodeFacts("", "ScatterND", "float", "add", threads=2)
    assert route_reason(node, "1.99.0") is not None  # newer than measured: kept
    assert route_reason(node, "1.2.0") is not None
    fixed = tuple(dataclasses.replace(r, fixed_in=(1, 40)) for r in routes.RULES)
    monkeypatch.setattr(routes, "RULES", fixed)
    assert route_reason(node, "1.39.9") is not None
    assert route_reason(node, "1.40.0") is None and route_reason(node, "2.0.0") is None


@pytest.mark.parametrize("bad", ["", "1", "one.two", "x.32.0"])
def test_a_malformed_version_is_refused(bad):
    with pytest.raises(ValueError, match="not an onnxruntime version"):
        route_reason(NodeFacts("", "ScatterND", "float", "add", 2), bad)


def _one_node(op_type, onnx_type, attrs, n_inputs, opset):
    from onnx import TensorProto, helper

    names = ["data", "indices", "updates"][:n_inputs]
    types = [onnx_type, TensorProto.INT64, onnx_type][:n_inputs]
    graph = helper.make_graph(
        [helper.make_node(op_type, names, ["out"], **attrs)], "g",
        [helper.make_tensor_value_info(n, t, None) for n, t in zip(names, types, strict=True)],
        [helper.make_tensor_value_info("out", onnx_type, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def _session(model, threads):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime not installed (pip install 'gather_scatter[test]')")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"]), ort.__version__


def test_the_string_rule_still_describes_the_installed_onnxruntime():
    """The string rule's reason, against the installed onnxruntime: where a release gives the
    right rows, this fails, and the rule gets that release as its ``fixed_in``."""
    import numpy as np
    from onnx import TensorProto

    import gather_scatter as gs

    session, version = _session(_one_node("Gather", TensorProto.STRING, {"axis": 0}, 2, 13), 1)
    data, indices = np.array([["a", "b"], ["c", "d"], ["e", "f"]], dtype=object), np.array([2, 0])
    got = session.run(None, {"data": data, "indices": indices})[0]
    assert got.tolist() != gs.gather(data, indices).tolist(), f"onnxruntime {version} gathers string rows right"
    assert route_reason(NodeFacts("", "Gather", "string"), version) is not None


def test_scatter_elements_reductions_left_to_onnxruntime_are_exact_on_two_threads():
    """What the table leaves to onnxruntime: ScatterElements' reductions with many duplicates
    on 2 threads equal our kernels (the spec's loop) run after run."""
    import numpy as np
    from onnx import TensorProto

    import gather_scatter as gs

    rng = np.random.default_rng(3)
    data = rng.standard_normal((64, 256)).astype(np.float32)
    indices = rng.integers(0, 64, (4096, 256))
    updates = rng.standard_normal((4096, 256)).astype(np.float32)
    # float max/min are routed for the NaN rule: int32 max is what stays in onnxruntime
    for reduction, onnx_type, dtype in (("add", TensorProto.FLOAT, "float"), ("max", TensorProto.INT32, "int32")):
        if dtype == "int32":
            data, updates = (data * 1000).astype(np.int32), (updates * 1000).astype(np.int32)
        session, version = _session(_one_node("ScatterElements", onnx_type, {"reduction": reduction}, 3, 18), 2)
        assert route_reason(NodeFacts("", "ScatterElements", dtype, reduction, threads=2), version) is None
        expected = gs.scatter_elements(data, indices, updates, reduction=reduction)
        feeds = {"data": data, "indices": indices, "updates": updates}
        for _ in range(5):
            assert session.run(None, feeds)[0].tobytes() == expected.tobytes(), (reduction, version)


# onnxruntime's words for a node it refuses to load: the hosted Session finds such a node at
# build (its error names it, or the node is probed alone) and routes it.
_LOAD_REFUSALS = ("Exception during loading", "Could not find an implementation")


def _worker_main(threads, per_version):
    """(op version, data type, reduction, routed, outcome, detail) of every valid generated case."""
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed (pip install 'gather_scatter[test]')")
    from gather_scatter.check import runner
    from gather_scatter.check.engines import Worker
    from gather_scatter.rules.versions import onnx_type_name

    rows = []
    with Worker("onnxruntime", threads, 60) as worker:
        for case in runner.generate(None, None, per_version, 0):
            if case.kind != "valid":
                continue
            data = case.case.inputs[0]
            dtype = "string" if data.dtype.kind in "OUS" else onnx_type_name(data.dtype)
            reduction = case.case.attrs.get("reduction", "none")
            # the output's type is data's, but GatherBlockQuantized's is its scales' (input 2)
            out = onnx_type_name(case.case.inputs[2].dtype) if "scales" in case.spec.input_types else dtype
            facts = NodeFacts(case.spec.domain, case.spec.op_type, dtype, reduction, threads, out, data.ndim)
            routed = route_reason(facts, worker.version or "0.0") is not None
            kind, detail = runner.run_one(worker, case)
            rows.append((case.spec.name, dtype, reduction, routed, kind, detail))
    return rows


@pytest.mark.parametrize("threads", [1, 2])
def test_every_combination_the_table_leaves_to_onnxruntime_agrees(threads):
    """gather-scatter check's operator mode against the installed onnxruntime at the hosted
    Session's thread count: every valid case (each version x data type x index type x
    reduction the generator cycles through) whose node the table leaves to onnxruntime agrees
    with our kernels bit for bit, or is one onnxruntime refuses to load (the Session routes
    those at build); none fails at run time or answers wrong."""
    rows = _worker_main(threads, 30)
    combos = {(op, dtype, reduction) for op, dtype, reduction, *_ in rows}
    assert len(combos) > 200  # every version's types and reductions, not a sample of them
    def refused_at_load(kind, detail):
        return kind == "unsupported" and any(words in detail for words in _LOAD_REFUSALS)

    bad = [row for row in rows if not row[3] and row[4] != "agree" and not refused_at_load(row[4], row[5])]
    assert not bad, "\n".join(f"{op} {dtype} {red}: {kind}: {detail[:200]}" for op, dtype, red, _, kind, detail in bad)


def test_a_bfloat16_gather_block_quantized_routes_and_float_and_float16_stay():
    # onnxruntime's CPU kernel has float and float16 scales/output only (issue 27): the rule
    # looks at the output's type (T2); the data's (uint8, int4...) does not matter.
    node = NodeFacts("com.microsoft", "GatherBlockQuantized", "uint8", output_dtype="bfloat16")
    reason = route_reason(node, "1.32.0")
    assert reason is not None and "bfloat16" in reason and "NOT_IMPLEMENTED" in reason
    for data in ("int4", "uint4", "float8e4m3fn"):
        assert route_reason(dataclasses.replace(node, dtype=data), "1.32.0") == reason
    for out in ("float", "float16", None):
        assert route_reason(dataclasses.replace(node, output_dtype=out), "1.32.0") is None
    # Other operators' bfloat16 outputs are no concern of this rule.
    assert route_reason(NodeFacts("", "Gather", "bfloat16", output_dtype="bfloat16"), "1.32.0") is None


def test_gather_block_quantized_of_rank_1_data_routes():
    # onnxruntime's shape inference demands rank > 1 where the schema allows rank >= 1 (found by
    # gather-scatter check): such a node fails to load, so the table routes it
    node = NodeFacts("com.microsoft", "GatherBlockQuantized", "int4", output_dtype="float", data_rank=1)
    assert "rank > 1" in route_reason(node, "1.32.0")
    for rank in (2, 3, None):
        assert route_reason(dataclasses.replace(node, data_rank=rank), "1.32.0") is None
