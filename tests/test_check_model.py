"""``gather-scatter check MODEL.onnx`` (issue 17, part 3): each indexing node of a model replayed on
an engine with the tensors it saw, the whole model compared, findings named by node; bad input
is one line and exit status 2, with nothing written."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto, numpy_helper

from gather_scatter.check.capture import make_feeds
from gather_scatter.check.model import close
from gather_scatter.cli import main

DATA = Path(__file__).parent / "data"
BUILTIN = Path(__file__).parents[1] / "src" / "gather_scatter" / "data" / "decoder_step.onnx"
NODES = {  # the indexing nodes of each model, in the order they run
    "gather_elements.onnx": ["node_gather", "node_gather_1", "node_Gather_105", "node_gather_2"],
    "index_add_pooling.onnx": ["node_ScatterND_13"],
    "kv_tensor_scatter.onnx": ["write_global_k", "write_global_v", "write_local_k", "write_local_v"],
    "scatter_reduce.onnx": ["node_scatter_add", "node_scatter_add_1", "node_scatter_reduce", "node_ScatterElements_30",
                            "node_scatter_reduce_1", "node_ScatterElements_33", "node_scatter_reduce_2",
                            "node_ScatterND_67", "node_scatter"],
    "sparse_update.onnx": ["node_index_select", "node_GatherND_12", "node_ScatterND_25"],
    "decoder_step.onnx": ["node_embedding", "node_ScatterND_20", "node_ScatterND_33", "node_GatherND_44"],
}


def _check(tmp_path, model, *args):
    report = tmp_path / "report.json"
    code = main(["check", str(model), *args, "--out", str(tmp_path / "findings"), "--json", str(report)])
    return code, json.loads(report.read_text()) if report.exists() else None


@pytest.mark.parametrize("model", sorted(DATA.glob("*.onnx")) + [BUILTIN], ids=lambda p: p.name)
def test_the_project_models_agree_with_onnxruntime_node_by_node(tmp_path, model, capsys):
    pytest.importorskip("onnxruntime", reason="the onnxruntime engine needs onnxruntime")
    code, result = _check(tmp_path, model, "--engine", "onnxruntime", "--dim", "batch=2"
                          ) if model.name in ("gather_elements.onnx", "scatter_reduce.onnx") else \
        _check(tmp_path, model, "--engine", "onnxruntime")
    out = capsys.readouterr().out
    assert code == 0, out
    assert [row["node"] for row in result["nodes"]] == NODES[model.name]
    assert {row["kind"] for row in result["nodes"]} == {"agree"} and result["whole_model"]["kind"] == "agree"
    assert result["not_run"] == [] and result["our_error"] is None and result["findings"] == []
    assert all(name in out for name in NODES[model.name]) and out.rstrip().endswith("no findings")
    assert not (tmp_path / "findings").exists()


def test_a_diverging_node_is_named_with_its_repro_files(tmp_path, capsys):
    # onnx.reference's GatherElements fails on these shapes (numpy.choose takes at most 64
    # choices): its two nodes over the 128-long axis, and so the whole model, are findings.
    code, result = _check(tmp_path, DATA / "gather_elements.onnx", "--engine", "onnx-reference", "--dim", "batch=2")
    out = capsys.readouterr().out
    assert code == 1
    found = {f["node"]: f for f in result["findings"]}
    assert {"node_gather", "node_gather_1", None} <= set(found)
    row = found["node_gather"]
    assert (row["op"], row["since_version"], row["opset"], row["kind"]) == ("GatherElements", 13, 18, "rejected_valid")
    assert "64" in row["detail"]
    model = onnx.load(row["model"])  # the shrunk case, and the node as the model ran it
    assert model.graph.node[0].op_type == "GatherElements" and Path(row["inputs"]).exists()
    if row["shrunk"]:  # the node's own tensors are kept beside the smaller case
        def size(path):
            return sum(a.size for a in np.load(path).values())

        assert onnx.load(row["node_model"]).graph.node[0].op_type == "GatherElements"
        assert size(row["node_inputs"]) > size(row["inputs"])
    assert "node_gather " in out and "GatherElements-13" in out and row["model"] in out and row["repro"] in out
    assert found[None]["kind"] == "rejected_valid" and Path(found[None]["inputs"]).exists()


def _index_add_model(path: Path, rows: int, cols: int, n: int) -> str:
    """``x.index_add(0, idx, src) * scale`` as torch.onnx's exporter writes it (external data),
    or, where that exporter is not installed (it needs onnxscript), the same graph it writes:
    Unsqueeze, ScatterND reduction='add', Mul."""
    import torch

    class IndexAdd(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(cols))

        def forward(self, x, idx, src):
            return x.index_add(0, idx, src) * self.scale

    args = (torch.zeros(rows, cols), torch.zeros(n, dtype=torch.int64), torch.ones(n, cols))
    try:
        program = torch.onnx.export(IndexAdd(), args, input_names=["x", "idx", "src"], dynamo=True)
        program.save(str(path), external_data=True)
        return "torch.onnx"
    except ImportError:  # onnxscript missing
        pass
    nodes = [oh.make_node("Unsqueeze", ["idx", "val_5"], ["val_6"], name="node_Unsqueeze_6"),
             oh.make_node("ScatterND", ["x", "val_6", "src"], ["val_11"], name="node_ScatterND_11", reduction="add"),
             oh.make_node("Mul", ["val_11", "scale"], ["mul"], name="node_mul")]
    f = oh.make_tensor_value_info
    graph = oh.make_graph(nodes, "main_graph",
                          [f("x", TensorProto.FLOAT, [rows, cols]), f("idx", TensorProto.INT64, [n]),
                           f("src", TensorProto.FLOAT, [n, cols])], [f("mul", TensorProto.FLOAT, [rows, cols])],
                          [numpy_helper.from_array(np.ones(cols, np.float32), "scale"),
                           numpy_helper.from_array(np.array([1], np.int64), "val_5")])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 20)])
    model.ir_version = 10
    onnx.save(model, str(path), save_as_external_data=True, location=path.name + ".data", size_threshold=1024)
    return "onnx.helper"


def test_finds_the_onnxruntime_scatter_nd_race_inside_an_exported_index_add(tmp_path, capsys):
    pytest.importorskip("onnxruntime", reason="the onnxruntime engine needs onnxruntime")
    pytest.importorskip("torch", reason="exporting a PyTorch model needs torch")
    # onnxruntime's ScatterND add on 2 threads loses updates to a shared row, on some runs of
    # large enough inputs: 256 rows of 20,000 floats added into 4 (random indices, so duplicates).
    made = _index_add_model(tmp_path / "index_add.onnx", 4, 20000, 256)
    assert (tmp_path / "index_add.onnx.data").exists()  # external data, read beside the model
    code, result = _check(tmp_path, tmp_path / "index_add.onnx", "--engine", "onnxruntime", "--threads", "2",
                          "--tries", "200")
    out = capsys.readouterr().out
    assert code == 1, (made, out)
    (node,) = result["nodes"]
    assert (node["op"], node["since_version"], node["kind"]) == ("ScatterND", 18, "wrong_output"), (made, node)
    assert node["node"].startswith("node_ScatterND") and node["node"] in out
    assert result["findings"][0]["node"] == node["node"] and Path(result["findings"][0]["model"]).exists()
    # Only lost updates count: the same adds summed in another order (rounding) agree.
    assert "differ by more than" in node["detail"]


def test_a_float_add_summed_in_another_order_is_not_a_finding():
    want = np.array([1.0, 100.0], np.float32)
    assert close(np.array([1.0000001, 100.00001], np.float32), want) is None
    assert "1 of 2" in close(np.array([1.0, 99.0], np.float32), want)
    assert close(np.array([np.nan], np.float32), np.array([np.nan], np.float32)) is None
    assert close(np.array([3], np.int64), np.array([4], np.int64)) is not None  # integers: exact


def test_given_inputs_override_the_random_ones(tmp_path):
    pytest.importorskip("onnxruntime", reason="the onnxruntime engine needs onnxruntime")
    stored = np.load(DATA / "sparse_update_inputs.npz")
    np.save(tmp_path / "dst.npy", stored["dst"])
    code, result = _check(tmp_path, DATA / "sparse_update.onnx", "--engine", "onnxruntime", "--input",
                          f"dst={tmp_path / 'dst.npy'}", "--seed", "3")
    assert code == 0
    assert "dst int64[7] given" in result["inputs"] and "src int64[7] random" in result["inputs"]
    code, again = _check(tmp_path, DATA / "sparse_update.onnx", "--engine", "onnxruntime",
                         "--inputs", str(DATA / "sparse_update_inputs.npz"))
    assert code == 0 and all(line.endswith("given") for line in again["inputs"])


def test_random_inputs_are_valid_indices_and_reproducible():
    graph = onnx.load(DATA / "scatter_reduce.onnx", load_external_data=False).graph
    feeds, described = make_feeds(graph, {}, {"batch": 3}, seed=5)
    assert feeds["x"].shape == (3, 12, 16) and feeds["x"].dtype == np.float32 and np.isfinite(feeds["x"]).all()
    assert feeds["seg"].dtype == np.int64 and 0 <= feeds["seg"].min() and feeds["seg"].max() < 3  # smallest dim
    again, _ = make_feeds(graph, {}, {"batch": 3}, seed=5)
    assert all(np.array_equal(feeds[k], again[k]) for k in feeds)
    assert described[0] == "x float32[3, 12, 16] random"


def _no_index_model(path: Path) -> None:
    node = oh.make_node("Relu", ["x"], ["y"])
    f = oh.make_tensor_value_info
    graph = oh.make_graph([node], "g", [f("x", TensorProto.FLOAT, [2])], [f("y", TensorProto.FLOAT, [2])])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]), str(path))


@pytest.mark.parametrize("case, pattern", [
    ("unknown engine", "unknown engine 'nope'"),
    ("unreadable model", "cannot read model"),
    ("no indexing node", "has no Gather"),
    ("missing symbolic dim", "symbolic dim 'batch' (axis 0): pass --dim batch=SIZE"),
    ("unknown --dim", "no symbolic dim 'seq'"),
    ("unknown --input", "the model has no input 'nope'"),
    ("--op with a model", "--op selects generated cases"),
    ("--dim without a model", "--dim applies to a model"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, case, pattern):
    model, extra = DATA / "gather_elements.onnx", ["--dim", "batch=2"]
    engine = "onnx-reference"
    if case == "unknown engine":
        engine = "nope"
    elif case == "unreadable model":
        model = tmp_path / "broken.onnx"
        model.write_bytes(b"not a model")
    elif case == "no indexing node":
        model = tmp_path / "relu.onnx"
        _no_index_model(model)
    elif case == "missing symbolic dim":
        extra = []
    elif case == "unknown --dim":
        extra += ["--dim", "seq=3"]
    elif case == "unknown --input":
        np.save(tmp_path / "a.npy", np.zeros(2))
        extra += ["--input", f"nope={tmp_path / 'a.npy'}"]
    elif case == "--op with a model":
        extra += ["--op", "Gather"]
    args = ["check", str(model), "--engine", engine, *extra]
    if case == "--dim without a model":
        args = ["check", "--engine", engine, "--dim", "batch=2"]
    code = main([*args, "--out", str(tmp_path / "findings"), "--json", str(tmp_path / "r.json")])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1 and pattern in captured.err, captured.err
    assert not (tmp_path / "findings").exists() and not (tmp_path / "r.json").exists()


def test_our_error_on_given_inputs_is_a_case_too(tmp_path, capsys):
    # A token id past the vocabulary: our Gather raises, so the engine must refuse it too; the
    # nodes after it are listed as not run.
    pytest.importorskip("onnxruntime", reason="the onnxruntime engine needs onnxruntime")
    shutil.copy(BUILTIN, tmp_path / "decoder_step.onnx")
    np.save(tmp_path / "tokens.npy", np.array([1, 10_000], np.int64))
    code, result = _check(tmp_path, tmp_path / "decoder_step.onnx", "--engine", "onnxruntime", "--input",
                          f"tokens={tmp_path / 'tokens.npy'}")
    assert code == 0, capsys.readouterr().out
    assert [row["node"] for row in result["nodes"]] == ["node_embedding"] and "out of bounds" in result["our_error"]
    assert result["not_run"] == NODES["decoder_step.onnx"][1:]


def test_a_model_only_onnxruntime_runs_needs_onnxruntime_named_by_its_extra(tmp_path, capsys, monkeypatch):
    # An onnxruntime-genai export (SimplifiedLayerNormalization in onnx's domain, com.microsoft
    # MatMulNBits...): model mode captures its nodes' inputs through onnxruntime, so without it the
    # refusal names the pip extra, not the Session's engine='onnxruntime' that check has no option for.
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    model = DATA / "quantized" / "qwen2_h64_int4.onnx"
    code, result = _check(tmp_path, model, "--engine", "onnx-reference", "--inputs",
                          str(DATA / "quantized" / "qwen2_h64_int4_inputs.npz"))
    captured = capsys.readouterr()
    assert code == 2 and result is None and captured.out == ""
    err = captured.err
    assert len(err.strip().splitlines()) == 1, err
    assert 'needs onnxruntime: pip install "gather_scatter[onnxruntime]"' in err, err
    assert "SimplifiedLayerNormalization, com.microsoft.GroupQueryAttention, com.microsoft.MatMulNBits" in err, err
    assert "engine='onnxruntime'" not in err and not (tmp_path / "findings").exists()


def test_foreign_ops_are_those_neither_our_kernels_nor_onnx_reference_run():
    # Main graph, If branches and model-local functions: what sends model mode to onnxruntime.
    from gather_scatter.check.hosted_capture import foreign_ops

    vi = oh.make_tensor_value_info
    branch = oh.make_graph([oh.make_node("SimplifiedLayerNormalization", ["x", "w"], ["n"])], "then", [],
                           [vi("n", TensorProto.FLOAT, None)])
    body = [oh.make_node("MatMulNBits", ["x", "q", "s"], ["y"], domain="com.microsoft"),
            oh.make_node("GatherND", ["y", "i"], ["z"], domain="com.microsoft")]
    local = oh.make_function("local", "F", ["x", "q", "s", "i"], ["z"], body,
                             [oh.make_opsetid("", 18), oh.make_opsetid("com.microsoft", 1)])
    nodes = [oh.make_node("Gather", ["x", "i"], ["g"]), oh.make_node("Relu", ["g"], ["r"]),
             oh.make_node("F", ["x", "q", "s", "i"], ["f"], domain="local"),
             oh.make_node("If", ["c"], ["n"], then_branch=branch, else_branch=branch)]
    graph = oh.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [2, 2])], [vi("r", TensorProto.FLOAT, None)])
    model = oh.make_model(graph, functions=[local], opset_imports=[oh.make_opsetid("", 18),
                                                                   oh.make_opsetid("local", 1)])
    assert foreign_ops(model) == ["SimplifiedLayerNormalization", "com.microsoft.MatMulNBits"]
    del model.graph.node[3], model.functions[0].node[0]
    assert foreign_ops(model) == []


def test_our_error_in_a_model_only_onnxruntime_runs_is_a_case_too(tmp_path, capsys):
    # Captured through onnxruntime (SimplifiedLayerNormalization), a token id past the rows: our
    # Gather raises inside onnxruntime's plan, onnxruntime must refuse the node and the model too.
    pytest.importorskip("onnxruntime", reason="the capture runs the model in onnxruntime")
    vi = oh.make_tensor_value_info
    nodes = [oh.make_node("SimplifiedLayerNormalization", ["x", "w"], ["n"], name="norm", axis=-1, epsilon=1e-5),
             oh.make_node("Gather", ["n", "ids"], ["y"], name="embed")]
    graph = oh.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [3, 4]), vi("ids", TensorProto.INT64, [2])],
                          [vi("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(np.ones(4, np.float32), "w")])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)]), tmp_path / "norm_gather.onnx")
    np.save(tmp_path / "ids.npy", np.array([2, 3], np.int64))
    code, result = _check(tmp_path, tmp_path / "norm_gather.onnx", "--engine", "onnxruntime", "--input",
                          f"ids={tmp_path / 'ids.npy'}")
    assert code == 0, capsys.readouterr().out
    assert result["foreign_ops"] == ["SimplifiedLayerNormalization"] and "out of bounds" in result["our_error"]
    assert [(row["node"], row["kind"]) for row in result["nodes"]] == [("embed", "agree")]
    assert result["whole_model"]["kind"] == "agree"
    np.save(tmp_path / "ids.npy", np.array([2, -3], np.int64))  # in range: the whole model agrees on values
    code, result = _check(tmp_path, tmp_path / "norm_gather.onnx", "--engine", "onnxruntime", "--input",
                          f"ids={tmp_path / 'ids.npy'}")
    assert code == 0 and result["our_error"] is None and result["whole_model"]["kind"] == "agree"
