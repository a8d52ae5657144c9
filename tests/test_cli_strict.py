"""Off-spec exports across the command line (issue 26 item 7): every subcommand that takes a model
refuses an off-spec node by default, naming the fix (``--no-strict``), and with ``--no-strict`` takes
it as the earliest version that accepts it, saying so, as the Python API's ``strict=False``."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import onnx.helper as oh
import pytest

from gather_scatter import run_model
from gather_scatter.cli import _build_parser, main

f = oh.make_tensor_value_info


def _scatter_max_17(path):
    # PyTorch's exporter at opset 17: ScatterElements reduction='max' is a ScatterElements-18 value.
    node = oh.make_node("ScatterElements", ["x", "i", "u"], ["y"], name="smax", reduction="max", axis=0)
    graph = oh.make_graph([node], "g", [f("x", 1, [4]), f("i", 7, [2]), f("u", 1, [2])], [f("y", 1, [4])])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]), path / "model.onnx")
    np.savez(path / "in.npz", x=np.zeros(4, np.float32), i=np.array([1, 1]), u=np.array([3, 5], np.float32))
    return {
        "refusal": "node 'smax' (ScatterElements): ", "fix": "or pass --no-strict to run the node as ScatterElements-18",
        "warning": "ScatterElements at opset 17 is ScatterElements-16, which does not accept reduction = 'max'; run "
                   "as ScatterElements-18, the earliest version that does (--no-strict)",
        "shapes": "node 'smax' (ScatterElements-18): y (4,) float32",
        "off_spec": "smax: ScatterElements at the model's opset 17 is ScatterElements-16, which does not accept "
                    "reduction = 'max'; run as ScatterElements-18 and replayed at opset 18 (--no-strict)",
        "row": ("smax", "ScatterElements-18", "18"), "y": [0, 5, 0, 0],
    }


def _gather_nd_batch_dims_11(path):
    # batch_dims exists from GatherND-12: at opset 11 it is off-spec.
    node = oh.make_node("GatherND", ["x", "i"], ["y"], name="bd", batch_dims=1)
    graph = oh.make_graph([node], "g", [f("x", 1, [2, 2]), f("i", 7, [2, 1])], [f("y", 1, [2])])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 11)]), path / "model.onnx")
    np.savez(path / "in.npz", x=np.array([[1, 2], [3, 4]], np.float32), i=np.array([[1], [0]]))
    return {
        "refusal": "node 'bd' (GatherND): ", "fix": "or pass --no-strict to run the node as GatherND-12",
        "warning": "GatherND at opset 11 is GatherND-11, which does not accept batch_dims = 1; run as GatherND-12, "
                   "the earliest version that does (--no-strict)",
        "shapes": "node 'bd' (GatherND-12): y (2,) float32",
        "off_spec": "bd: GatherND at the model's opset 11 is GatherND-11, which does not accept batch_dims = 1; run "
                    "as GatherND-12 and replayed at opset 12 (--no-strict)",
        "row": ("bd", "GatherND-12", "12"), "y": [2, 3],
    }


MODELS = {"scatter-max-at-17": _scatter_max_17, "gather_nd-batch_dims-at-11": _gather_nd_batch_dims_11}


def _args(command, path):
    model = str(path / "model.onnx")
    return {
        "run": ["run", model, "--inputs", str(path / "in.npz")],
        "run-onnxruntime": ["run", model, "--inputs", str(path / "in.npz"), "--engine", "onnxruntime"],
        "shapes": ["shapes", model],
        "check": ["check", model, "--engine", "onnx-reference", "--inputs", str(path / "in.npz"),
                  "--out", str(path / "findings"), "--json", str(path / "r.json"), "--tries", "1"],
    }[command]


COMMANDS = ["run", "run-onnxruntime", "shapes", "check"]


def test_every_subcommand_that_takes_a_model_has_no_strict():
    # The class: a subcommand added later with a MODEL argument is held to the same behaviour.
    parser = _build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command").choices
    taking_a_model = {name for name, sub in subparsers.items() if any(a.dest == "model" for a in sub._actions)}
    assert taking_a_model == {"run", "shapes", "check"}
    for name in taking_a_model:
        options = {o for a in subparsers[name]._actions for o in a.option_strings}
        assert "--no-strict" in options, name
        assert not {a.dest for a in subparsers[name]._actions if "--no-strict" in a.option_strings} - {"strict"}


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("command", COMMANDS)
def test_off_spec_is_refused_by_default_naming_the_fix(tmp_path, capsys, model, command):
    if command == "run-onnxruntime":
        pytest.importorskip("onnxruntime")
    expected = MODELS[model](tmp_path)
    assert main(_args(command, tmp_path)) == 2
    captured = capsys.readouterr()
    prefix = f"gather-scatter {command.split('-')[0]}: error: {expected['refusal']}"
    assert captured.err.startswith(prefix) and captured.err.rstrip().endswith(expected["fix"]), captured.err
    assert "strict=False" not in captured.err and "Traceback" not in captured.err
    assert captured.out == ""  # nothing ran, nothing printed
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "findings").exists()


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("command", COMMANDS)
def test_no_strict_runs_the_earliest_accepting_version_and_says_so(tmp_path, capsys, model, command):
    if command == "run-onnxruntime":
        pytest.importorskip("onnxruntime")
    expected = MODELS[model](tmp_path)
    assert main([*_args(command, tmp_path), "--no-strict"]) == 0
    captured = capsys.readouterr()
    with np.load(tmp_path / "in.npz") as archive:
        inputs = dict(archive)
    with pytest.warns(UserWarning):  # the Python API's answer, which the command line must give
        want = run_model(tmp_path / "model.onnx", inputs, strict=False)["y"]
    assert want.tolist() == expected["y"]
    if command in ("run", "run-onnxruntime"):
        assert captured.err == f"gather-scatter run: warning: {expected['refusal']}{expected['warning']}\n"
        assert f"[{' '.join(map(str, want.astype(int)))}]" in " ".join(captured.out.replace(".", "").split())
    elif command == "shapes":
        assert captured.err == f"gather-scatter shapes: warning: {expected['refusal']}{expected['warning']}\n"
        assert captured.out == expected["shapes"] + "\n"
    else:  # check MODEL: replayed as the later version at its opset, and said so, in print and JSON
        assert f"off-spec: {expected['off_spec']}\n" in captured.out
        row = next(line.split() for line in captured.out.splitlines() if line.startswith(expected["row"][0] + " "))
        assert tuple(row[:3]) == expected["row"] and row[3] == "agree"
        report = json.loads((tmp_path / "r.json").read_text())
        assert report["off_spec"] == [expected["off_spec"]]
        assert report["nodes"][0]["since_version"] == int(expected["row"][1].split("-")[1])


def test_a_valid_model_prints_no_off_spec_line(tmp_path, capsys):
    node = oh.make_node("ScatterElements", ["x", "i", "u"], ["y"], name="smax", reduction="max")
    graph = oh.make_graph([node], "g", [f("x", 1, [4]), f("i", 7, [2]), f("u", 1, [2])], [f("y", 1, [4])])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)]), tmp_path / "model.onnx")
    np.savez(tmp_path / "in.npz", x=np.zeros(4, np.float32), i=np.array([1, 1]), u=np.array([3, 5], np.float32))
    for strict in ([], ["--no-strict"]):
        assert main([*_args("check", tmp_path), *strict]) == 0
        out = capsys.readouterr().out
        assert "off-spec" not in out and json.loads((tmp_path / "r.json").read_text())["off_spec"] == []


def test_operator_mode_refuses_no_strict(capsys):
    # Generated cases are valid or invalid for their own version: there is no off-spec node to take.
    with pytest.raises(SystemExit):
        raise SystemExit(main(["check", "--engine", "onnx-reference", "--no-strict"]))
    err = capsys.readouterr().err  # (the verb's number is being fixed beside this: "apply" or "applies")
    assert re.search(r"error: --no-strict appl(y|ies) to a model: gather-scatter check MODEL.onnx --engine NAME", err)


@pytest.mark.parametrize("command", ["run", "run-onnxruntime", "check", "shapes"])
def test_an_off_spec_node_in_a_function_is_refused(tmp_path, capsys, command):
    if command == "run-onnxruntime":
        pytest.importorskip("onnxruntime")
    node = oh.make_node("ScatterElements", ["x", "i", "u"], ["y"], name="inner", reduction="max")
    function = oh.make_function("local", "Smax", ["x", "i", "u"], ["y"], [node], [oh.make_opsetid("", 17)])
    call = oh.make_node("Smax", ["x", "i", "u"], ["y"], domain="local", name="call")
    graph = oh.make_graph([call], "g", [f("x", 1, [4]), f("i", 7, [2]), f("u", 1, [2])], [f("y", 1, [4])])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18), oh.make_opsetid("local", 1)],
                          functions=[function])
    onnx.save(model, tmp_path / "model.onnx")
    np.savez(tmp_path / "in.npz", x=np.zeros(4, np.float32), i=np.array([1, 1]), u=np.array([3, 5], np.float32))
    assert main(_args(command, tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gather-scatter {command.split('-')[0]}: error: node 'inner' (ScatterElements): "
                          "ScatterElements-16: reduction = 'max' is not accepted"), err
    assert err.rstrip().endswith("or pass --no-strict to run the node as ScatterElements-18")
    assert main([*_args(command, tmp_path), "--no-strict"]) == 0
    # shapes infers the main graph only: a function's node is refused, not inferred, so no warning
    assert "run as ScatterElements-18" in capsys.readouterr().err or command in ("check", "shapes")
