"""Model validation (issue 19): each invalid model of the issue is a ModelInputError naming the
node or tensor, one line and exit 2 at the command line, before anything runs; --no-check and
check=False skip it; the models the project accepts on purpose still pass."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import pytest

from gather_scatter import (
    DTypeError,
    ModelInputError,
    OutputTooLargeError,
    infer_model_shapes,
    run_model,
    set_memory_limit,
)
from gather_scatter.cli import main
from gather_scatter.models._model_check import check_model
from gather_scatter.reference import Evaluator

DATA = Path(__file__).parent / "data"
BUILTIN = Path(__file__).parents[1] / "src" / "gather_scatter" / "data" / "decoder_step.onnx"
MODELS = sorted(DATA.glob("*.onnx")) + [BUILTIN]


def _vi(name, elem, shape):
    return oh.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, initializers=(), opset=13):
    graph = oh.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])


def _gather(*, name="read", op_type="Gather"):
    node = oh.make_node(op_type, ["x", "i"], ["y"], name=name)
    return _model([node], [_vi("x", 1, [4]), _vi("i", 7, [2])], [_vi("y", 1, [2])])


def _bad_utf8_op_type():
    # Protobuf hands back bytes for a string field that is not valid UTF-8.
    raw = _gather(op_type="Gathxx").SerializeToString().replace(b"Gathxx", b"Gath\xff\xfe")
    model = onnx.load_model_from_string(raw)
    assert isinstance(model.graph.node[0].op_type, bytes)
    return model


def _cycle():
    a = oh.make_node("Gather", ["x", "b"], ["a"], name="first")
    b = oh.make_node("Gather", ["x", "a"], ["b"], name="second")
    return _model([a, b], [_vi("x", 7, [4])], [_vi("b", 7, None)])


def _duplicate_output():
    a = oh.make_node("Gather", ["x", "i"], ["y"], name="first")
    b = oh.make_node("Gather", ["x", "i"], ["y"], name="second")
    return _model([a, b], [_vi("x", 1, [4]), _vi("i", 7, [2])], [_vi("y", 1, [2])])


def _short_initializer(raw):
    values = np.arange(6, dtype=np.float32)
    tensor = oh.make_tensor("w", 1, [2, 3], values.tobytes() if raw else values, raw=raw)
    tensor.dims[:] = [1000, 3]
    node = oh.make_node("Gather", ["w", "i"], ["y"], name="read")
    return _model([node], [_vi("i", 7, [2])], [_vi("y", 1, [2, 3])], [tensor])


def _long_raw_initializer():
    # Found by tests/test_model_fuzz.py: onnx's checker refuses raw_data too short, not too long.
    tensor = oh.make_tensor("w", 1, [6], np.arange(6, dtype=np.float32).tobytes(), raw=True)
    tensor.raw_data = np.arange(7, dtype=np.float32).tobytes()
    node = oh.make_node("Gather", ["w", "i"], ["y"], name="read")
    return _model([node], [_vi("i", 7, [2])], [_vi("y", 1, [2])], [tensor])


def _undefined_data_type():
    # Found by tests/test_model_fuzz.py: the checker lets data_type 99 through, and
    # onnx.reference failed with a KeyError.
    model = _long_raw_initializer()
    model.graph.initializer[0].data_type = 99
    return model


def _split_num_outputs():
    # Found by tests/test_model_fuzz.py: onnx's shape inference aborts the process (a C++
    # assertion) for a Split with fewer num_outputs than outputs.
    node = oh.make_node("Split", ["x"], ["a", "b"], axis=0, num_outputs=1, name="halves")
    return _model([node], [_vi("x", 1, [4])], [_vi("a", 1, [2]), _vi("b", 1, [2])], opset=18)


# name -> (model, pattern of the message, node named)
INVALID = {
    "op_type not UTF-8": (_bad_utf8_op_type, r"graph\.node\[0\] \('read'\): op_type is not valid UTF-8", "read"),
    "cycle": (_cycle, r"topologically sorted, however input 'b' of node: name: first OpType: Gather", "first"),
    "value written twice": (_duplicate_output, r"node 'second' \(Gather\): .*single static assignment", "second"),
    "initializer of 6 values, dims (1000, 3)": (
        lambda: _short_initializer(False), r"tensor name: w\) float_data size \(6\) is too small", None),
    "raw initializer of 6 values, dims (1000, 3)": (
        lambda: _short_initializer(True),
        r"tensor 'w' has raw_data of 24 bytes, but its dims \(1000, 3\) and type take 12000 bytes", None),
    "raw initializer of 7 values, dims (6,)": (
        _long_raw_initializer, r"tensor 'w' has raw_data of 28 bytes, but its dims \(6,\) and type take 24 bytes",
        None),
    "initializer of data_type 99": (
        _undefined_data_type, r"tensor 'w' has data_type 99, which is not an ONNX tensor type", None),
    "Split of num_outputs 1 with two outputs": (
        _split_num_outputs, r"^node 'halves' \(Split\): num_outputs = 1, but the node has 2 outputs$", "halves"),
    "opset 0": (lambda: _model(_gather().graph.node, _gather().graph.input, _gather().graph.output, opset=0),
                r"imports opset 0 of domain 'ai.onnx', which is not a known opset", None),
}


@pytest.mark.parametrize("case", INVALID)
def test_invalid_model_is_one_model_input_error_everywhere(case, tmp_path, capsys):
    build, pattern, node = INVALID[case]
    model = build()
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    calls = {
        "check_model": lambda: check_model(model),
        "run_model": lambda: run_model(model, {}),
        "run_model(path)": lambda: run_model(path, {}),
        "Evaluator": lambda: Evaluator(model),
        "infer_model_shapes": lambda: infer_model_shapes(model),
        "infer_model_shapes(path)": lambda: infer_model_shapes(path),
    }
    for call in calls.values():
        with pytest.raises(ModelInputError, match=pattern) as info:
            call()
        assert info.value.node == node
    for command in (["run", str(path)], ["shapes", str(path)]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert err.startswith(f"gather-scatter {command[0]}: error: ")


def test_no_check_skips_validation(tmp_path, capsys):
    # Two writers of 'y': unchecked, onnx.reference runs the model as it did before.
    model = _duplicate_output()
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    feeds = {"x": np.arange(4, dtype=np.float32), "i": np.array([2, 1])}
    np.testing.assert_array_equal(run_model(model, feeds, check=False)["y"], [2, 1])
    Evaluator(model, check=False)
    infer_model_shapes(model, check=False)
    np.save(tmp_path / "x.npy", feeds["x"])
    np.save(tmp_path / "i.npy", feeds["i"])
    inputs = ["--input", f"x={tmp_path / 'x.npy'}", "--input", f"i={tmp_path / 'i.npy'}"]
    assert main(["run", str(path), *inputs, "--no-check"]) == 0
    assert main(["shapes", str(path), "--no-check"]) == 0
    assert main(["run", str(path), *inputs]) == 2
    capsys.readouterr()


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.name)
def test_project_models_pass(path):
    check_model(onnx.load(path), path=path)
    check_model(onnx.load(path, load_external_data=False), path=path)
    check_model(onnx.load(path, load_external_data=False))  # shapes from a proto need no weights


@pytest.mark.parametrize("opset_domain", ["", "ai.onnx"])
def test_accepted_on_purpose(opset_domain):
    """The checker refuses these; the project accepts them: the default domain imported as
    'ai.onnx', an off-spec attribute of the family (run with strict=False), a family node
    with an attribute or input count its schema lacks (our own error, not the checker's),
    com.microsoft GatherND, and unshaped value_info."""
    x, i, u = _vi("d", 1, None), _vi("i", 7, None), _vi("u", 1, None)
    for node, opset in (
        (oh.make_node("ScatterElements", ["d", "i", "u"], ["y"], reduction="max"), 17),
        (oh.make_node("GatherND", ["d", "i"], ["y"], batch_dims=1), 11),
        (oh.make_node("Gather", ["d", "i"], ["y"], foo=1), 13),
        (oh.make_node("Gather", ["d"], ["y"]), 13),
    ):
        graph = oh.make_graph([node], "g", [x, i, u], [_vi("y", 1, None)])
        check_model(oh.make_model(graph, opset_imports=[oh.make_opsetid(opset_domain, opset)]))
    node = oh.make_node("GatherND", ["d", "i"], ["y"], domain="com.microsoft")
    graph = oh.make_graph([node], "g", [x, i], [_vi("y", 1, None)])
    opsets = [oh.make_opsetid(opset_domain, 13), oh.make_opsetid("com.microsoft", 1)]
    check_model(oh.make_model(graph, opset_imports=opsets))


def _external_model(tmp_path, **entries):
    src = onnx.load(DATA / "gather_elements.onnx", load_external_data=False)
    shutil.copy(DATA / "gather_elements.onnx.data", tmp_path / "gather_elements.onnx.data")
    tensor = next(t for t in src.graph.initializer if onnx.external_data_helper.uses_external_data(t))
    for key, value in entries.items():
        entry = next((e for e in tensor.external_data if e.key == key), None) or tensor.external_data.add(key=key)
        entry.value = value
    path = tmp_path / "model.onnx"
    onnx.save(src, path)
    return path


@pytest.mark.parametrize("entries, pattern", [
    ({"location": "../gather_elements.onnx.data"}, "points outside the model's folder"),
    ({"location": "/etc/hostname"}, "an absolute path"),
    ({"offset": "100000"}, "at offset 100000 of 'gather_elements.onnx.data', a file of"),
    ({"length": "99999999"}, "length 99999999 of 'gather_elements.onnx.data', a file of"),
    ({"length": "8"}, "of 8 bytes in 'gather_elements.onnx.data', but its dims \\(16, 48\\) and type take 3072"),
    ({"offset": "-1"}, "invalid entry: External data offset must be non-negative"),
    ({"location": "moved.data"}, "in 'moved.data', which does not exist in the model's folder"),  # issue 26 item 9
])
def test_external_data_stays_in_its_folder_and_file(tmp_path, capsys, entries, pattern):
    path = _external_model(tmp_path, **entries)
    with pytest.raises(ModelInputError, match=pattern):
        infer_model_shapes(path)
    with pytest.raises(ModelInputError):
        run_model(path, {})
    assert main(["shapes", str(path)]) == 2
    assert "Traceback" not in capsys.readouterr().err


def _constant_of_shape_gather(n=10**7):
    shape = oh.make_tensor("shape", 7, [2], [n, n])
    nodes = [oh.make_node("ConstantOfShape", ["shape"], ["big"], name="fill"),
             oh.make_node("Gather", ["big", "i"], ["y"], name="read")]
    return _model(nodes, [_vi("i", 7, [1])], [_vi("y", 1, None)], [shape])


def test_memory_limit_covers_every_operator(tmp_path, capsys):
    # ConstantOfShape to 10^7 x 10^7 (400 TB): refused before it allocates, naming the node.
    model = _constant_of_shape_gather()
    with pytest.raises(OutputTooLargeError, match=r"^node 'fill' \(ConstantOfShape\): output 'big' of shape "
                       r"\(10000000, 10000000\) and dtype float32 would take 400000000000000 bytes") as info:
        run_model(model, {"i": np.array([0])})
    assert (info.value.node, info.value.op) == ("fill", "ConstantOfShape")
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    np.save(tmp_path / "i.npy", np.array([0]))
    assert main(["run", str(path), "--input", f"i={tmp_path / 'i.npy'}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "node 'fill' (ConstantOfShape)" in err
    # The limit set by the user applies too; shapes infers without it (the model may run elsewhere).
    previous = set_memory_limit(1000)
    try:
        with pytest.raises(OutputTooLargeError, match="node 'fill'.* more than the memory limit of 1000 bytes"):
            run_model(_constant_of_shape_gather(16), {"i": np.array([0])})
    finally:
        set_memory_limit(previous)
    assert main(["shapes", str(path)]) == 0
    assert "(1, 10000000)" in capsys.readouterr().out


def test_memory_error_of_any_operator_names_the_node(monkeypatch):
    # A size no inference fixed (the shape is a model input): the MemoryError, as a last resort.
    from onnx.reference.ops import op_constant_of_shape

    def fail(self, *args, **kwargs):
        raise MemoryError("Unable to allocate 364. TiB for an array")

    monkeypatch.setattr(op_constant_of_shape.ConstantOfShape, "_run", fail)
    nodes = [oh.make_node("ConstantOfShape", ["shape"], ["big"], name="fill")]
    model = _model(nodes, [_vi("shape", 7, [2])], [_vi("big", 1, None)])
    with pytest.raises(OutputTooLargeError, match=r"^node 'fill' \(ConstantOfShape\): MemoryError: Unable to "
                       "allocate 364. TiB") as info:
        run_model(model, {"shape": np.array([2, 2])})
    assert info.value.node == "fill"


def test_onnx_inference_refusal_is_a_model_input_error(tmp_path, capsys):
    # Found by tests/test_model_fuzz.py: a node in domain 'ai.onnx' with only '' imported
    # passes the check; onnx's inference refused it with an InferenceError, not our error.
    model = _gather()
    model.graph.node[0].domain = "ai.onnx"
    check_model(model)
    pattern = r"node 'read' \(Gather\): onnx's shape inference refuses the model: .*No opset import for domain ai.onnx"
    with pytest.raises(ModelInputError, match=pattern) as info:
        infer_model_shapes(model)
    assert info.value.node == "read"
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    assert main(["shapes", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gather-scatter shapes: error: node 'read' (Gather): onnx's")


def test_undefined_input_elem_type_is_a_dtype_error():
    # Found by tests/test_model_fuzz.py: the checker lets elem_type 99 through, and run_model's
    # input check failed with a KeyError out of onnx.helper.
    model = _gather()
    model.graph.input[0].type.tensor_type.elem_type = 99
    feeds = {"x": np.arange(4, dtype=np.float32), "i": np.array([2, 1])}
    with pytest.raises(DTypeError, match=r"^model input 'x' is declared with elem_type 99, which is not an ONNX"):
        run_model(model, feeds)


def test_external_data_location_with_nul_is_refused(tmp_path, capsys):
    # Found by tests/test_model_fuzz.py: os.path.realpath raised ValueError (embedded null
    # byte) out of the check, a traceback from gather-scatter shapes.
    model = _short_initializer(True)
    tensor = model.graph.initializer[0]
    tensor.dims[:] = [2, 3]
    tensor.ClearField("raw_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "w\x00.data"
    path = tmp_path / "model.onnx"
    path.write_bytes(model.SerializeToString())
    pattern = r"tensor 'w' is stored as external data at 'w\\x00.data', a path with a NUL character"
    with pytest.raises(ModelInputError, match=pattern):
        infer_model_shapes(path)
    assert main(["shapes", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
