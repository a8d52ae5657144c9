"""infer_model_shapes over whole models, and the ``gather-scatter shapes`` command."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto, numpy_helper

from gather_scatter import ArityError, DTypeError, ShapeError, UnsupportedOpError, infer_model_shapes
from gather_scatter.cli import main
from gather_scatter.models.shape_inference import node_shapes

MS = "com.microsoft"


def _model(nodes, inputs, outputs=(), initializers=(), opset=18, ms=True):
    opsets = [oh.make_opsetid("", opset)] + ([oh.make_opsetid(MS, 1)] if ms else [])
    graph = oh.make_graph(nodes, "g", inputs, list(outputs), initializer=list(initializers))
    return oh.make_model(graph, opset_imports=opsets)


def _vi(name, elem, shape):
    return oh.make_tensor_value_info(name, elem, shape)


def _shapes(model):
    """name -> (dims, elem_type) for every typed value of the graph."""
    g = model.graph
    return {
        v.name: (
            tuple(d.dim_value if d.HasField("dim_value") else d.dim_param or None for d in v.type.tensor_type.shape.dim)
            if v.type.tensor_type.HasField("shape") else None,
            v.type.tensor_type.elem_type,
        )
        for v in (*g.input, *g.value_info, *g.output)
    }


def test_ms_gathernd_chain_gets_shapes_downstream():
    # ms GatherND -> Relu -> ms GatherND -> Neg: needs our rule, onnx's, ours, onnx's again.
    nodes = [
        oh.make_node("GatherND", ["data", "idx"], ["a"], name="first", domain=MS),
        oh.make_node("Relu", ["a"], ["b"]),
        oh.make_node("GatherND", ["b", "idx2"], ["c"], name="second", domain=MS),
        oh.make_node("Neg", ["c"], ["d"]),
    ]
    model = _model(
        nodes,
        [_vi("data", TensorProto.FLOAT, ["N", 5, 6, 7]), _vi("idx", TensorProto.INT32, ["Q", 1]),
         _vi("idx2", TensorProto.INT64, [3, 2])],
        [_vi("d", TensorProto.FLOAT, None)],
    )
    before = model.SerializeToString()
    shapes = _shapes(infer_model_shapes(model))
    assert model.SerializeToString() == before  # the input model is left alone
    assert shapes["a"] == (("Q", 5, 6, 7), TensorProto.FLOAT)
    assert shapes["b"] == (("Q", 5, 6, 7), TensorProto.FLOAT)
    assert shapes["c"] == ((3, 6, 7), TensorProto.FLOAT)
    assert shapes["d"] == ((3, 6, 7), TensorProto.FLOAT)


def test_initializer_shapes_and_ai_onnx_nodes():
    indices = numpy_helper.from_array(np.zeros((4, 1), dtype=np.int64), "idx")
    nodes = [
        oh.make_node("ScatterND", ["data", "idx", "upd"], ["s"], reduction="add"),
        oh.make_node("Gather", ["s", "gi"], ["g"], axis=1),
    ]
    model = _model(
        nodes,
        [_vi("data", TensorProto.FLOAT16, [None, 3]), _vi("upd", TensorProto.FLOAT16, [4, 3]),
         _vi("gi", TensorProto.INT32, ["T"])],
        initializers=[indices],
        ms=False,
    )
    shapes = _shapes(infer_model_shapes(model))
    assert shapes["s"] == ((None, 3), TensorProto.FLOAT16)
    assert shapes["g"] == ((None, "T"), TensorProto.FLOAT16)


def test_scatter_updates_error_names_the_node():
    # onnx's own inference never checks ScatterND updates; ours does.
    node = oh.make_node("ScatterND", ["data", "idx", "upd"], ["y"], name="write")
    model = _model(
        [node],
        [_vi("data", TensorProto.FLOAT, [4, 5]), _vi("idx", TensorProto.INT64, [3, 1]),
         _vi("upd", TensorProto.FLOAT, [3, 4])],
        ms=False,
    )
    with pytest.raises(ShapeError) as e:
        infer_model_shapes(model)
    assert str(e.value) == (
        "node 'write' (ScatterND): ScatterND-18: updates shape (3, 4) must equal indices.shape[:-1] + "
        "data.shape[k:] = (3, 5) with k = 1 (data shape (4, 5), indices shape (3, 1))"
    )
    assert e.value.node == "write"


def test_version_errors_name_the_node():
    node = oh.make_node("GatherND", ["data", "idx"], ["y"], name="pick")
    model = _model([node], [_vi("data", TensorProto.BFLOAT16, [4]), _vi("idx", TensorProto.INT64, [1, 1])],
                   opset=12, ms=False)
    with pytest.raises(DTypeError, match=r"^node 'pick' \(GatherND\): GatherND-12: data has type tensor\(bfloat16\)"):
        infer_model_shapes(model)
    ms_node = oh.make_node("GatherND", ["data", "idx"], ["y"], name="ms", domain=MS)
    model = _model([ms_node], [_vi("data", TensorProto.FLOAT, [4]), _vi("idx", TensorProto.INT64, [1, 1])], ms=False)
    with pytest.raises(UnsupportedOpError, match=r"^node 'ms' \(GatherND\): the model imports no opset for domain 'com.microsoft'"):
        infer_model_shapes(model)


def test_declared_output_that_contradicts_the_rule():
    node = oh.make_node("Gather", ["data", "idx"], ["y"], name="take")
    model = _model([node], [_vi("data", TensorProto.FLOAT, [4, 5]), _vi("idx", TensorProto.INT64, [2])],
                   [_vi("y", TensorProto.FLOAT, [3, 5])], ms=False)
    with pytest.raises(ShapeError, match=r"node 'take' \(Gather\): output 'y' is declared with shape \(3, 5\), but the inputs give \(2, 5\)"):
        infer_model_shapes(model)


def test_declared_output_fills_what_the_rule_leaves_unknown():
    node = oh.make_node("GatherND", ["data", "idx"], ["y"], domain=MS)
    model = _model([node], [_vi("data", TensorProto.FLOAT, [4, 5]), _vi("idx", TensorProto.INT64, [None, 1])],
                   [_vi("y", TensorProto.FLOAT, [7, 5])])
    assert _shapes(infer_model_shapes(model))["y"] == ((7, 5), TensorProto.FLOAT)
    assert list(node_shapes(infer_model_shapes(model))) == ["unnamed node (com.microsoft.GatherND-1): y (7, 5) float32"]


def test_cli_shapes(tmp_path, capsys):
    good = _model([oh.make_node("GatherND", ["data", "idx"], ["y"], name="pick", domain=MS)],
                  [_vi("data", TensorProto.FLOAT, ["N", 3, 4]), _vi("idx", TensorProto.INT32, ["Q", 2])])
    onnx.save(good, tmp_path / "good.onnx")
    assert main(["shapes", str(tmp_path / "good.onnx")]) == 0
    assert capsys.readouterr().out == "node 'pick' (com.microsoft.GatherND-1): y ('Q', 4) float32\n"

    bad = _model([oh.make_node("GatherND", ["data", "idx"], ["y"], name="pick", domain=MS)],
                 [_vi("data", TensorProto.FLOAT, [3]), _vi("idx", TensorProto.INT32, [5, 2])])
    onnx.save(bad, tmp_path / "bad.onnx")
    assert main(["shapes", str(tmp_path / "bad.onnx")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "gather-scatter shapes: error: node 'pick' (GatherND): com.microsoft.GatherND-1: indices.shape[-1] = 2 "
        "must be in [1, 1] (1 to rank(data) - batch_dims; data shape (3,), indices shape (5, 2))\n"
    )
    assert "Traceback" not in captured.err


def test_package_import_leaves_onnx_for_first_use():
    code = (
        "import sys, gather_scatter as gs\n"
        "assert 'onnx' not in sys.modules\n"
        "assert gs.infer_model_shapes.__module__ == 'gather_scatter.models.shape_inference'\n"
        "assert 'onnx' in sys.modules\n"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stderr == ""


def _chain(n_pairs):
    """ms GatherND -> Relu, ``n_pairs`` times: each Relu needs our rule's output first."""
    nodes, prev = [], "data"
    for i in range(n_pairs):
        nodes += [oh.make_node("GatherND", [prev, "idx"], [f"g{i}"], name=f"g{i}", domain=MS),
                  oh.make_node("Relu", [f"g{i}"], [f"r{i}"])]
        prev = f"r{i}"
    return _model(nodes, [_vi("data", TensorProto.FLOAT, ["N", 5]), _vi("idx", TensorProto.INT64, ["N", 1])],
                  [_vi(prev, TensorProto.FLOAT, None)])


def test_a_long_chain_is_inferred_in_one_pass(monkeypatch):
    # 800 nodes took 25 s: a whole-model onnx pass per step of the chain. One pass now (~0.1 s).
    passes = []
    whole_model = onnx.shape_inference.infer_shapes
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", lambda m, *a, **k: passes.append(1) or whole_model(m, *a, **k))
    shapes = _shapes(infer_model_shapes(_chain(400)))
    assert len(passes) == 1
    assert shapes["r399"] == (("N", 5), TensorProto.FLOAT)
    assert shapes["g200"] == (("N", 5), TensorProto.FLOAT)


def test_infer_model_shapes_takes_a_path(tmp_path):
    onnx.save(_chain(2), tmp_path / "chain.onnx")
    shapes = _shapes(infer_model_shapes(str(tmp_path / "chain.onnx")))
    assert shapes["r1"] == (("N", 5), TensorProto.FLOAT)
    assert _shapes(infer_model_shapes(tmp_path / "chain.onnx")) == shapes


def test_family_nodes_get_our_rule():
    nodes = [oh.make_node("GatherElements", ["data", "idx"], ["a"], name="ge", axis=1),
             oh.make_node("ScatterElements", ["data", "idx2", "upd"], ["b"], name="se", reduction="max"),
             oh.make_node("TensorScatter", ["cache", "step", ""], ["c"], name="ts"),
             oh.make_node("Relu", ["a"], ["d"])]
    model = _model(nodes, [_vi("data", TensorProto.FLOAT, ["N", 100]), _vi("idx", TensorProto.INT64, ["N", 7]),
                           _vi("idx2", TensorProto.INT32, [2, 3]), _vi("upd", TensorProto.FLOAT, [2, 3]),
                           _vi("cache", TensorProto.FLOAT16, ["B", 8, "M", 64]),
                           _vi("step", TensorProto.FLOAT16, ["B", 8, 1, 64])],
                   [_vi("d", TensorProto.FLOAT, None)], opset=24, ms=False)
    shapes = _shapes(infer_model_shapes(model))
    assert shapes["a"] == (("N", 7), TensorProto.FLOAT) and shapes["d"] == (("N", 7), TensorProto.FLOAT)
    assert shapes["b"] == (("N", 100), TensorProto.FLOAT)
    assert shapes["c"] == (("B", 8, "M", 64), TensorProto.FLOAT16)
    assert [line.split(" ")[2] for line in node_shapes(infer_model_shapes(model))] == [
        "(GatherElements-13):", "(ScatterElements-18):", "(TensorScatter-24):"]


@pytest.mark.parametrize("inputs, message", [
    (["data", ""], "Gather-13: takes 2 inputs (data, indices), got 1; missing: indices"),
    (["", "idx"], "Gather-13: input 0 (data) is required, but the node leaves it out (an empty input name)"),
], ids=["trailing", "leading"])
def test_a_required_input_left_out_is_an_error_naming_the_node(inputs, message):
    # An empty name read as an input of unknown shape: 'y' came out with an unknown rank, no error.
    model = _model([oh.make_node("Gather", inputs, ["y"], name="pick")],
                   [_vi("data", TensorProto.FLOAT, [4, 3]), _vi("idx", TensorProto.INT64, [2])], ms=False)
    with pytest.raises(ArityError) as info:
        infer_model_shapes(model)
    assert str(info.value) == f"node 'pick' (Gather): {message}"
    assert (info.value.node, info.value.op, info.value.since_version) == ("pick", "Gather", 13)


def test_scatternd_with_indices_left_out_names_the_input():
    # Used to give data's shape (4, 3) as if indices were merely of unknown shape.
    model = _model([oh.make_node("ScatterND", ["data", "", "upd"], ["y"], name="put")],
                   [_vi("data", TensorProto.FLOAT, [4, 3]), _vi("upd", TensorProto.FLOAT, [2, 3])], ms=False)
    with pytest.raises(ArityError) as info:
        infer_model_shapes(model)
    assert (info.value.input, info.value.position, info.value.node) == ("indices", (1,), "put")


def test_tensor_scatter_write_indices_left_out_is_absent_not_unknown():
    # write_indices named '' (or not named at all): the two inputs are checked, the output is past_cache's.
    for inputs in (["cache", "step", ""], ["cache", "step"]):
        model = _model([oh.make_node("TensorScatter", inputs, ["c"], name="ts", mode="circular")],
                       [_vi("cache", TensorProto.FLOAT, [2, 8, 16]), _vi("step", TensorProto.FLOAT, [2, 3, 16])],
                       opset=24, ms=False)
        assert _shapes(infer_model_shapes(model))["c"] == ((2, 8, 16), TensorProto.FLOAT)
        bad = _model([oh.make_node("TensorScatter", inputs, ["c"], name="ts")],
                     [_vi("cache", TensorProto.FLOAT, [2, 8, 16]), _vi("step", TensorProto.FLOAT, [2, 9, 16])],
                     opset=24, ms=False)
        with pytest.raises(ShapeError, match=r"^node 'ts' \(TensorScatter\): TensorScatter-24: update.shape\[1\] = 9"):
            infer_model_shapes(bad)


def test_every_operator_of_the_dispatch_table_gets_our_rule():
    # A new entry of _OPS must not silently fall back to onnx's inference (or none, for com.microsoft).
    from gather_scatter._nodes import _OPS
    from gather_scatter.models.shape_inference import _ours

    assert sorted(op for op in _OPS if _ours(oh.make_node(op, ["a"], ["b"]))) == sorted(set(_OPS) - {"GatherBlockQuantized"})
    assert [op for op in _OPS if _ours(oh.make_node(op, ["a"], ["b"], domain=MS))] == ["GatherND", "GatherBlockQuantized"]
    assert not _ours(oh.make_node("GatherBlockQuantized", ["a"], ["b"]))  # com.microsoft's only
    assert not _ours(oh.make_node("Gather", ["a"], ["b"], domain="x.y"))


def test_scatter_9_gets_our_rule():
    model = _model([oh.make_node("Scatter", ["data", "idx", "upd"], ["y"], name="put", axis=1)],
                   [_vi("data", TensorProto.FLOAT, ["N", 6]), _vi("idx", TensorProto.INT64, [2, 3]),
                    _vi("upd", TensorProto.FLOAT, [2, 3])], opset=9, ms=False)
    out = infer_model_shapes(model)
    assert _shapes(out)["y"] == (("N", 6), TensorProto.FLOAT)
    assert list(node_shapes(out)) == ["node 'put' (Scatter-9): y ('N', 6) float32"]


def test_declared_output_type_that_contradicts_the_data_type():
    # The data's type used to overwrite the declared one silently (onnx's pass keeps either).
    node = oh.make_node("Gather", ["data", "idx"], ["y"], name="take")
    model = _model([node], [_vi("data", TensorProto.FLOAT, [4, 5]), _vi("idx", TensorProto.INT64, [2])],
                   [_vi("y", TensorProto.INT64, [2, 5])], ms=False)
    with pytest.raises(DTypeError) as e:
        infer_model_shapes(model)
    assert str(e.value) == ("node 'take' (Gather): output 'y' is declared with type tensor(int64), but its data "
                            "input 'data' has type tensor(float)")
    assert (e.value.node, e.value.input, e.value.value) == ("take", "y", TensorProto.INT64)


@pytest.mark.parametrize("where", ["data", "idx", "y"])
def test_an_element_type_onnx_does_not_define_names_the_node(where, tmp_path, capsys):
    # elem_type 99 was a KeyError traceback out of onnx.helper (exit 1 from gather-scatter shapes).
    elem = {"data": TensorProto.FLOAT, "idx": TensorProto.INT64, "y": 0}
    elem[where] = 99
    node = oh.make_node("Gather", ["data", "idx"], ["y"], name="take")
    model = _model([node], [_vi("data", elem["data"], [4, 5]), _vi("idx", elem["idx"], [2])],
                   [_vi("y", elem["y"], None)], ms=False)
    with pytest.raises(DTypeError) as e:
        infer_model_shapes(model)
    assert str(e.value) == f"node 'take' (Gather): {where!r} has elem_type 99, which is not an ONNX tensor type"
    assert (e.value.node, e.value.input, e.value.value) == ("take", where, 99)
    onnx.save(model, tmp_path / "m.onnx")
    assert main(["shapes", str(tmp_path / "m.onnx")]) == 2
    assert capsys.readouterr().err == f"gather-scatter shapes: error: {e.value}\n"


def test_node_shapes_names_the_node_for_every_error_and_a_node_without_output():
    # An opset that does not resolve raised without the node, a node without outputs an IndexError,
    # and an elem_type onnx does not define a KeyError.
    take = oh.make_node("Gather", ["data", "idx"], ["y"], name="take")
    inputs = [_vi("data", TensorProto.FLOAT, [4, 5]), _vi("idx", TensorProto.INT64, [2])]
    model = _model([take, oh.make_node("Gather", ["data", "idx"], [], name="nothing")], inputs, ms=False)
    assert list(node_shapes(model)) == ["node 'take' (Gather-13): y (unknown rank) ?",
                                      "node 'nothing' (Gather-13): no output"]
    model = _model([take], inputs, [_vi("y", 99, None)], ms=False)
    with pytest.raises(DTypeError, match=r"^node 'take' \(Gather\): 'y' has elem_type 99, which is not an ONNX tensor type$"):
        list(node_shapes(model))
    model = _model([take], inputs, opset=0, ms=False)
    with pytest.raises(UnsupportedOpError) as e:
        list(node_shapes(model))
    assert str(e.value).startswith("node 'take' (Gather): Gather: ") and e.value.node == "take"
    model = _model([oh.make_node("GatherND", ["data", "idx"], ["y"], name="ms", domain=MS)], inputs, ms=False)
    with pytest.raises(UnsupportedOpError) as e:
        list(node_shapes(model))
    assert str(e.value) == "node 'ms' (GatherND): the model imports no opset for domain 'com.microsoft'"


# ---- issue 26 item 9: external data that is missing is refused, as external data that is truncated


@pytest.mark.parametrize("damage, problem", [
    ("missing", r"is stored as external data in 'gather_elements.onnx.data', which does not exist in the "
                r"model's folder '.*'"),
    ("truncated", r"is stored as external data at offset 0, length 3072 of 'gather_elements.onnx.data', a file of "
                  r"100 bytes"),
])
@pytest.mark.parametrize("engine", ["reference", "onnxruntime"])
def test_missing_or_truncated_external_data_is_refused_naming_the_tensor_and_file(tmp_path, capsys, damage, problem,
                                                                                  engine):
    import pathlib
    import shutil

    from gather_scatter import ModelInputError, Session

    data = pathlib.Path(__file__).parent / "data"
    path = tmp_path / "gather_elements.onnx"
    shutil.copy(data / "gather_elements.onnx", path)
    if damage == "truncated":
        (tmp_path / "gather_elements.onnx.data").write_bytes((data / "gather_elements.onnx.data").read_bytes()[:100])
    tensor = next(t.name for t in onnx.load(path, load_external_data=False).graph.initializer
                  if onnx.external_data_helper.uses_external_data(t))
    pattern = rf"^tensor '{tensor}' {problem}$"
    for model in (path, str(path)):
        with pytest.raises(ModelInputError, match=pattern) as info:
            infer_model_shapes(model)
        assert info.value.input == tensor
    assert main(["shapes", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gather-scatter shapes: error: tensor '{tensor}' is stored as external data ") and "Traceback" not in err
    if engine == "onnxruntime":  # onnxruntime reads the data itself: it too is checked first
        pytest.importorskip("onnxruntime")
        with pytest.raises(ModelInputError, match=pattern):
            Session(path, engine=engine)
    infer_model_shapes(path, check=False)  # a model you trust: nothing is read or checked
