"""What ``gather-scatter check`` says (issue 26, item 14, the checker's parts).

No NumPy warning on stderr from comparing infinities; model mode's Ctrl-C counts nodes on both
streams; a bad ``--op`` is refused naming the operators and versions (and the near one); one
option "selects", two "select"; ``check --help`` names every engine of the registry.
"""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
import tomllib
from onnx import TensorProto, helper

from gather_scatter.check import engines, model, repro_script, runner
from gather_scatter.cli import _build_parser, main
from gather_scatter.rules.versions import REGISTRY

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _specials(dtype) -> np.ndarray:
    values = [np.inf, -np.inf, np.nan, 0.0, 1.0, -2.5]
    if np.dtype(dtype).kind == "c":
        return np.array([complex(r, i) for r, i in itertools.product(values, repeat=2)], dtype=dtype)
    return np.array(values, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.complex64, np.complex128])
def test_comparing_infinities_warns_nothing(dtype):
    # inf - inf in the complex comparison printed "invalid value encountered in subtract".
    specials = _specials(dtype)
    pairs = np.array(list(itertools.product(range(specials.size), repeat=2)))
    actual, expected = specials[pairs[:, 0]], specials[pairs[:, 1]]
    scope: dict = {"np": np}
    exec(repro_script._DIFFERS, scope)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert runner.same(expected, expected) is None and runner.same(actual, expected) is not None
        assert model.close(expected, expected) is None and model.close(actual, expected) is not None
        for tolerance in (0.0, 1e-4):
            scope["TOLERANCE"] = tolerance
            assert scope["differs"](expected, expected) is None and scope["differs"](actual, expected) is not None


def test_an_equal_infinite_component_is_equal():
    # (inf, 1) and (inf, 1 + 1 ulp): the real parts are equal, the imaginary ones within 4 ulps.
    a = np.array([complex(np.inf, 1.0)], np.complex64)
    e = a.copy()
    e.imag = np.nextafter(np.float32(1), np.float32(2))
    assert runner.same(a, e) is None


def _one_gather_model(path: Path) -> Path:
    node = helper.make_node("Gather", ["data", "indices"], ["y"])
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [3, 2]),
         helper.make_tensor_value_info("indices", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_model_mode_ctrl_c_counts_nodes_on_stdout_and_stderr(tmp_path, monkeypatch, capsys):
    def stop(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(model, "_replay", stop)
    path = _one_gather_model(tmp_path / "g.onnx")
    code = main(["check", str(path), "--engine", "onnx-reference", "--out", str(tmp_path / "f")])
    assert code == 130
    captured = capsys.readouterr()
    said = "interrupted after 0 of 1 indexing node; the whole model not compared"
    assert f": {said}; " in captured.out.splitlines()[0]
    assert captured.err.splitlines()[-1] == f"gather-scatter check: {said}"


def test_whole_model_interrupted_after_every_node(tmp_path, monkeypatch, capsys):
    def stop(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(model, "_check_whole", stop)
    code = main(["check", str(_one_gather_model(tmp_path / "g.onnx")), "--engine", "onnx-reference",
                 "--out", str(tmp_path / "f")])
    assert code == 130
    said = "interrupted after 1 of 1 indexing node; the whole model not compared"
    assert capsys.readouterr().err.splitlines()[-1] == f"gather-scatter check: {said}"


@pytest.mark.parametrize("value, hint", [
    ("select", ""),
    ("scatternd", " (did you mean 'ScatterND'?)"),
    ("ScaterND-16", " (did you mean 'ScatterND-16' or "),
    ("gather-13", " (did you mean 'Gather-13'?)"),
])
def test_a_bad_op_is_refused_naming_the_operators_and_versions(value, hint, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["check", "--engine", "onnx-reference", "--op", value])
    err = " ".join(capsys.readouterr().err.split())
    assert exited.value.code == 2
    assert f"argument --op: unknown operator or version {value!r}{hint}" in err
    known = sorted({v.op_type for v in REGISTRY.values()} | {v.name for v in REGISTRY.values()})
    assert {"Gather", "ScatterND-16", "TensorScatter"} <= set(known)
    assert err.endswith(f"; choose from {', '.join(known)}")


@pytest.mark.parametrize("args, said", [
    (["--op", "Gather"], "--op selects generated cases, not a model's nodes: leave out MODEL to check operators, "
                         "or drop it to check the model"),
    (["--op", "Gather", "--cases", "3"], "--op, --cases select generated cases, not a model's nodes: leave out MODEL "
                                         "to check operators, or drop them to check the model"),
])
def test_model_mode_refuses_operator_options_in_good_english(args, said, tmp_path, capsys):
    code = main(["check", str(_one_gather_model(tmp_path / "g.onnx")), "--engine", "onnx-reference", *args])
    assert code == 2 and said in capsys.readouterr().err


@pytest.mark.parametrize("args, verb", [(["--dim", "a=1"], "--dim applies"),
                                        (["--dim", "a=1", "--tries", "2"], "--dim, --tries apply")])
def test_operator_mode_refuses_model_options_in_good_english(args, verb, capsys):
    assert main(["check", "--engine", "onnx-reference", *args]) == 2
    assert f"{verb} to a model: gather-scatter check MODEL.onnx" in capsys.readouterr().err


def test_check_help_names_every_engine_of_the_registry(capsys):
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"][engines.GROUP]
    found = engines.discover()
    built_in = [n for n, p in found.items() if p.value.startswith("gather_scatter.check.engines.")]
    assert sorted(declared) == built_in  # the installed metadata is this source's
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    ours = [n for n in built_in if n.startswith("gather_scatter")]
    others = [n for n in built_in if n not in ours]
    assert ours == ["gather_scatter", "gather_scatter-hosted"]
    assert f"our own ({', '.join(ours)}: our oracle, and onnxruntime with our kernels where it is wrong)" in text
    assert (f"the {len(others)} other built-in ones ({', '.join(others)}: pip install 'gather_scatter[NAME]', "
            "onnxruntime-cuda's in a venv of its own; 'reference' is onnx-reference's old name)") in text
    assert len(others) == 9 and "onnxruntime-cuda" in others
    assert all(name in text for name in found)  # installed plugins too


def test_the_parser_reads_no_entry_point_unless_help_is_shown(monkeypatch):
    def slow(*args, **kwargs):
        raise AssertionError("entry points read at start-up")

    monkeypatch.setattr(engines, "discover", slow)
    _build_parser().parse_args(["check", "--engine", "onnx-reference"])
