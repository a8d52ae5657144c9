"""run_model and the CLI on real models of the element-wise family: GatherElements,
ScatterElements (add, max, min, mul, none) and TensorScatter, against onnxruntime.

- ``gather_elements.onnx`` (examples/export_gather_elements.py, torch dynamo exporter, opset 18):
  BERT-style relative-position bias and top-k re-ranking; its GatherElements nodes gather along
  axes of 255 and 128 positions, where plain onnx.reference's GatherElements raises.
- ``scatter_reduce.onnx`` (examples/export_scatter_reduce.py, the same exporter, opset 18):
  segment pooling with repeated destinations through every ScatterElements reduction and
  ScatterND add.
- ``kv_tensor_scatter.onnx`` (examples/build_kv_tensor_scatter.py, onnx.helper, opset 24): a
  decode step writing a linear and a circular KV cache with TensorScatter.

The two exported models keep their weights in external data (``<model>.onnx.data``); each test
runs from another working directory, so that data must be found beside the model.
"""

from __future__ import annotations

import collections
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

from gather_scatter import run_model
from gather_scatter.cli import main

DATA = pathlib.Path(__file__).resolve().parent / "data"

# name -> the outputs that must match onnxruntime bit for bit. The others come out of float
# MatMul, Einsum, Softmax, Tanh or of sums and products over repeated destinations, whose
# rounding depends on the engine (onnx.reference's NumPy vs onnxruntime's MLAS, and the order
# in which each accumulates): those match to rtol 1e-5.
EXACT = {
    # bias: table values picked by integer offsets; ranked: int64 token ids (the top-k and
    # sort margins are >= 2e-4, far above the float error, so the order is the same).
    "gather_elements": {"bias", "ranked"},
    # count: int64 sums; high, low: max and min of the input x; inverse: int64 permutation.
    "scatter_reduce": {"count", "high", "low", "inverse"},
    # The cache writes copy input values.
    "kv_tensor_scatter": {"present_global_k", "present_global_v", "present_local_k", "present_local_v"},
}
MODELS = sorted(EXACT)
EXPORTED = ["gather_elements", "scatter_reduce"]


def model_path(name):
    return DATA / f"{name}.onnx"


def load_inputs(name):
    with np.load(DATA / f"{name}_inputs.npz") as archive:
        return dict(archive)


def onnxruntime_outputs(path, inputs):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is an optional test dependency")
    options = ort.SessionOptions()
    options.log_severity_level = 3  # TensorScatter warns that it copies the cache (not in place)
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - an onnxruntime older than the model's opset
        pytest.skip(f"onnxruntime {ort.__version__} cannot load {path.name}: {exc}")
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, inputs)))


def assert_outputs_match(name, got, want):
    assert list(got) == list(want)
    for key, value in want.items():
        assert got[key].dtype == value.dtype and got[key].shape == value.shape, key
        if key in EXACT[name]:
            np.testing.assert_array_equal(got[key], value, err_msg=key)
        else:
            np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=1e-6, err_msg=key)


def node_attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def test_gather_elements_model_gathers_past_64_positions():
    model = onnx.shape_inference.infer_shapes(onnx.load(model_path("gather_elements")))
    assert {o.domain: o.version for o in model.opset_import} == {"": 18}
    shapes = {v.name: [d.dim_value or d.dim_param for d in v.type.tensor_type.shape.dim]
              for v in model.graph.value_info}
    sizes = [shapes[n.input[0]][node_attrs(n)["axis"]] for n in model.graph.node if n.op_type == "GatherElements"]
    # The relative-position table (255 offsets), the top-k over 128 tokens, the re-ranked 8.
    assert sizes == [255, 128, 8]


def test_scatter_reduce_model_uses_every_reduction():
    model = onnx.load(model_path("scatter_reduce"))
    assert {o.domain: o.version for o in model.opset_import} == {"": 18}
    reductions = collections.Counter(
        (n.op_type, node_attrs(n)["reduction"].decode()) for n in model.graph.node if n.op_type.startswith("Scatter")
    )
    assert reductions == {
        ("ScatterElements", "add"): 2,  # scatter_add of floats and of int64 counts
        ("ScatterElements", "max"): 2,  # amax, and include_self=False's first step for amin
        ("ScatterElements", "min"): 1,
        ("ScatterElements", "mul"): 1,
        ("ScatterElements", "none"): 2,  # scatter, and include_self=False's first step for prod
        ("ScatterND", "add"): 1,  # index_put(accumulate=True)
    }


def test_kv_model_writes_linear_and_circular():
    model = onnx.load(model_path("kv_tensor_scatter"))
    assert {o.domain: o.version for o in model.opset_import} == {"": 24}
    modes = [node_attrs(n)["mode"].decode() for n in model.graph.node if n.op_type == "TensorScatter"]
    assert modes == ["linear", "linear", "circular", "circular"]


@pytest.mark.parametrize("name", EXPORTED)
def test_exported_weights_are_external_data(name):
    path = model_path(name)
    model = onnx.load(path, load_external_data=False)
    external = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    assert external, "the weights should be in the .data file"
    locations = {entry.value for t in external for entry in t.external_data if entry.key == "location"}
    assert locations == {f"{name}.onnx.data"}
    for file in (path, path.with_name(f"{name}.onnx.data"), DATA / f"{name}_inputs.npz"):
        assert file.stat().st_size < 1 << 20, file


@pytest.mark.parametrize("name", MODELS)
def test_run_model_matches_onnxruntime(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # external data resolves beside the model, not here
    inputs = load_inputs(name)
    want = onnxruntime_outputs(model_path(name), inputs)
    assert_outputs_match(name, run_model(model_path(name), inputs), want)


@pytest.mark.parametrize("name", MODELS)
def test_run_model_evaluates_the_indexing_nodes_itself(name, monkeypatch):
    """Our kernels, not onnx.reference's, run every GatherElements, ScatterElements and
    TensorScatter node: the fallbacks would raise if called."""
    from onnx.reference.ops import op_gather_elements, op_scatter_elements, op_tensor_scatter

    def refuse(self, *args, **kwargs):
        raise AssertionError(f"onnx.reference's {type(self).__name__} ran")

    for op in (op_gather_elements.GatherElements, op_scatter_elements.ScatterElements, op_tensor_scatter.TensorScatter):
        monkeypatch.setattr(op, "_run", refuse)
    run_model(model_path(name), load_inputs(name))


@pytest.mark.parametrize("name", MODELS)
def test_cli_run_saves_the_same_outputs(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    inputs = load_inputs(name)
    want = onnxruntime_outputs(model_path(name), inputs)
    argv = ["run", str(model_path(name)), "--inputs", str(DATA / f"{name}_inputs.npz"), "--output", "out.npz"]
    assert main(argv) == 0, capsys.readouterr().err
    with np.load(tmp_path / "out.npz") as archive:
        saved = dict(archive)
    assert_outputs_match(name, saved, want)
    # The same engine in and out of the CLI: bit for bit.
    for key, value in run_model(model_path(name), inputs).items():
        np.testing.assert_array_equal(saved[key], value, err_msg=key)


def test_cli_subprocess_runs_the_exported_gather_elements_model(tmp_path):
    name = "gather_elements"
    result = subprocess.run(
        [sys.executable, "-m", "gather_scatter.cli", "run", str(model_path(name)),
         "--inputs", str(DATA / f"{name}_inputs.npz"), "--output", "out.npz"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "bias    float32  (2, 2, 128, 128)" in result.stdout
    with np.load(tmp_path / "out.npz") as archive:
        assert_outputs_match(name, dict(archive), onnxruntime_outputs(model_path(name), load_inputs(name)))


def test_plain_onnx_reference_fails_on_the_gather_elements_model():
    """Documents the peer bug this package works around: onnx.reference's GatherElements uses
    ``np.choose``, which takes at most 64 choices (32 before NumPy 2), so a gather along an axis
    of more positions raises (or, on a 2-D input, falls back to a loop that mishandles all
    but one index per row). If onnx fixes it, this test fails: then drop it."""
    with pytest.raises(ValueError, match=r"at most \d+ array objects"):
        ReferenceEvaluator(str(model_path("gather_elements"))).run(None, load_inputs("gather_elements"))


def tensor_scatter_spec(past, update, write_indices, mode, axis):
    """The TensorScatter-24 spec's loop, written out."""
    present = past.copy()
    axis %= past.ndim
    for prefix in np.ndindex(past.shape[:axis]):
        for step in range(update.shape[axis]):
            slot = write_indices[prefix[0]] + step
            if mode == "circular":
                slot %= past.shape[axis]
            present[(*prefix, slot)] = update[(*prefix, step)]
    return present


def test_kv_cache_writes_follow_the_spec():
    inputs = load_inputs("kv_tensor_scatter")
    got = run_model(model_path("kv_tensor_scatter"), inputs)
    pos = inputs["pos"]
    for layer, mode, axis in (("global", "linear", -2), ("local", "circular", 2)):
        for kv in "kv":
            want = tensor_scatter_spec(inputs[f"{layer}_{kv}"], inputs[f"new_{kv}"], pos, mode, axis)
            np.testing.assert_array_equal(got[f"present_{layer}_{kv}"], want)
    # The window wrapped: the first sequence wrote slots 3 and 0, the second 2 and 3 (6 mod 4).
    changed = np.any(got["present_local_k"] != inputs["local_k"], axis=(1, 3))
    np.testing.assert_array_equal(changed, [[True, False, False, True], [False, False, True, True]])


def test_cli_shapes_names_every_family_node(capsys):
    assert main(["shapes", str(DATA / "kv_tensor_scatter.onnx")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "node 'write_global_k' (TensorScatter-24): present_global_k (2, 2, 8, 4) float32",
        "node 'write_global_v' (TensorScatter-24): present_global_v (2, 2, 8, 4) float32",
        "node 'write_local_k' (TensorScatter-24): present_local_k (2, 2, 4, 4) float32",
        "node 'write_local_v' (TensorScatter-24): present_local_v (2, 2, 4, 4) float32",
    ]
    assert main(["shapes", str(DATA / "gather_elements.onnx")]) == 0
    out = capsys.readouterr().out
    assert "node 'node_gather' (GatherElements-13): bias ('batch', 2, 128, 128) float32" in out
    assert main(["shapes", str(DATA / "scatter_reduce.onnx")]) == 0
    assert "(ScatterElements-18): high ('batch', 5, 16) float32" in capsys.readouterr().out
