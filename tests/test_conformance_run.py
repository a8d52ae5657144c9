"""``gather-scatter run-tests``: a suite folder run on an engine of the checker, each test's outcome, the score.

Suites are written here by hand (so each outcome is one we chose): ours (``indexing/``,
``indexing_invalid/`` with ``error.json``, ``MANIFEST.json``) and onnx's backend-test layout
(onnx's own Gather node tests written to disk, and a two-output model with two data sets).
``liar``, an engine "installed" as a distribution's metadata in a temporary folder on the path
(an entry point in the group ``gather_scatter.engines``, no pip), does what each model's graph
name says: answer right, answer wrong, raise, crash, hang, say unsupported, accept anything.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from gather_scatter.cli import main
from gather_scatter.conformance import SuiteError, load_suite
from gather_scatter.conformance.run import OUTCOMES, _signal_named, compare, run_cases

ROOT = Path(__file__).resolve().parents[1]

LIAR = '''\
import os
import time

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

name = "liar"


def prepare():
    if os.path.exists(os.environ.get("LIAR_BROKEN", "")):
        raise RuntimeError("liar cannot start")


def version():
    return "0.1"


def run(model, feeds, options):
    m = onnx.load_from_string(model)
    how = m.graph.name
    if how == "crash":
        os._exit(3)
    if how == "crash_for_good":  # and the worker cannot start again
        open(os.environ["LIAR_BROKEN"], "w").close()
        os._exit(3)
    if how == "hang":
        time.sleep(60)
    if how == "unsupported":
        raise NotImplementedError("liar lacks this operator")
    if how == "raise":
        raise RuntimeError("liar refuses these inputs")
    if how == "accept":
        return [np.zeros(1, np.float32)]
    outputs = [np.array(o) for o in ReferenceEvaluator(m).run(None, feeds)]
    if how == "wrong":
        outputs[0].flat[1] += 1
    if how == "shape":
        outputs[0] = outputs[0][:1]
    return outputs
'''

ABSENT = '''\
name = "absent"


def available():
    return 'engine absent is not installed: pip install "absent-engine"'


def version():
    return "0"


def run(model, feeds, options):
    return []
'''


@pytest.fixture
def liar(tmp_path, monkeypatch):
    """The engines ``liar`` and ``absent``, on this process's path (a spawned worker gets it too)."""
    site = tmp_path / "site"
    info = site / "gs_liar_engine-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gs-liar-engine\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[gather_scatter.engines]\nliar = gs_liar_engine\nabsent = gs_absent\n")
    (site / "gs_liar_engine.py").write_text(LIAR)
    (site / "gs_absent.py").write_text(ABSENT)
    monkeypatch.syspath_prepend(str(site))
    return site


DATA = np.arange(6, dtype=np.float32).reshape(3, 2)


def _gather_model(graph_name: str = "gather", data: np.ndarray = DATA, indices_shape=(2,)) -> onnx.ModelProto:
    elem = helper.np_dtype_to_tensor_dtype(data.dtype)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["data", "indices"], ["output"], axis=0)],
        graph_name,
        [
            helper.make_tensor_value_info("data", elem, data.shape),
            helper.make_tensor_value_info("indices", onnx.TensorProto.INT64, indices_shape),
        ],
        [helper.make_tensor_value_info("output", elem, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _write_test(folder: Path, model: onnx.ModelProto, data_sets, *, data_json=None, error_json=None) -> Path:
    """One test folder in the backend-test layout: model.onnx, test_data_set_N/input_K.pb, output_K.pb."""
    folder.mkdir(parents=True)
    (folder / "model.onnx").write_bytes(model.SerializeToString())
    inputs = [i.name for i in model.graph.input]
    for n, (ins, outs) in enumerate(data_sets):
        where = folder / f"test_data_set_{n}"
        where.mkdir()
        for k, a in enumerate(ins):
            (where / f"input_{k}.pb").write_bytes(numpy_helper.from_array(a, inputs[k]).SerializeToString())
        for k, a in enumerate(outs):
            name = model.graph.output[k].name
            (where / f"output_{k}.pb").write_bytes(numpy_helper.from_array(a, name).SerializeToString())
    if data_json is not None:
        (folder / "data.json").write_text(json.dumps(data_json))
    if error_json is not None:
        (folder / "error.json").write_text(json.dumps(error_json))
    return folder


BOUNDS = {"kind": "bounds", "error": "IndexOutOfBoundsError", "input": "indices", "message": "indices[0] = 7 is out "
          "of bounds", "spec": "All index values are expected to be within bounds [-s, s-1]"}


def _our_suite(root: Path, valid: dict[str, str], invalid: dict[str, str]) -> Path:
    """Our layout: a Gather-13 test per graph name (valid: indices [2, -3], invalid: [7]) and MANIFEST.json."""
    entries = []
    for n, (test, how) in enumerate(valid.items()):
        indices = np.array([2, -3], np.int64)
        _write_test(root / "indexing" / test, _gather_model(how), [([DATA, indices], [np.take(DATA, indices, 0)])])
        entries.append({"name": test, "path": f"indexing/{test}", "valid": True, "op": "Gather", "domain": "",
                        "version": 13, "opset": 13, "tags": ["negative_indices", "float32"], "n": n})
    for test, how in invalid.items():
        _write_test(root / "indexing_invalid" / test, _gather_model(how, indices_shape=(1,)),
                    [([DATA, np.array([7], np.int64)], [])], error_json=BOUNDS)
        entries.append({"name": test, "path": f"indexing_invalid/{test}", "valid": False, "op": "Gather",
                        "domain": "", "version": 13, "opset": 13, "tags": ["invalid_bounds"],
                        "error": {"kind": "bounds", "error": "IndexOutOfBoundsError"}})
    (root / "MANIFEST.json").write_text(json.dumps({"format": 1, "seed": 0, "cases": entries}))
    return root


def test_our_layout_passes_on_onnx_reference_and_onnxruntime(tmp_path):
    suite = _our_suite(tmp_path / "suite", {"test_gather_13_float32_negative_indices_0": "g"},
                       {"test_gather_13_bounds_0": "g"})
    cases = load_suite(suite)
    assert [(c.group, c.name, c.valid, c.family, c.version, c.rtol) for c in cases] == [
        ("indexing", "test_gather_13_float32_negative_indices_0", True, "Gather", 13, None),
        ("indexing_invalid", "test_gather_13_bounds_0", False, "Gather", 13, None),
    ]
    assert cases[0].tags == ["negative_indices", "float32"] and cases[1].error["kind"] == "bounds"
    for engine in ("onnx-reference", "onnxruntime"):
        if engine == "onnxruntime":
            pytest.importorskip("onnxruntime")
        result = run_cases(cases, engine, timeout=60)
        assert result["counts"] == {**dict.fromkeys(OUTCOMES, 0), "pass": 2}, result["results"]
        assert result["score"] == {"passed": 2, "scored": 2, "ratio": 1.0}
        refused = result["results"][1]
        assert refused["outcome"] == "pass" and refused["detail"].startswith("refused: ")


def test_a_wrong_plugin_engine_gives_every_outcome(liar, tmp_path, capsys):
    valid = {f"test_gather_13_{how}_0": how for how in ("right", "wrong", "shape", "raise", "crash", "hang",
                                                        "unsupported")}
    invalid = {"test_gather_13_accept_0": "accept", "test_gather_13_refuse_0": "raise"}
    suite = _our_suite(tmp_path / "suite", valid, invalid)
    report = tmp_path / "out.json"
    status = main(["run-tests", str(suite), "--engine", "liar", "--timeout", "2", "--json", str(report)])
    out = capsys.readouterr().out
    assert status == 1
    result = json.loads(report.read_text())
    outcomes = {r["name"].split("_")[3]: (r["outcome"], r["detail"]) for r in result["results"]}
    assert {k: o for k, (o, _) in outcomes.items()} == {
        "right": "pass", "wrong": "fail", "shape": "fail", "raise": "error", "crash": "crash", "hang": "timeout",
        "unsupported": "unsupported", "accept": "accepted_invalid", "refuse": "pass"}
    # The first differing element with both values: [4, 5] taken at -3 is [0, 1]; the liar adds 1 to element 1.
    assert outcomes["wrong"][1] == "output 0 ('output'): 1 of 4 elements differ; first at flat position 1: " \
        "np.float32(6.0), expected np.float32(5.0)"
    assert outcomes["shape"][1] == "output 0 ('output'): shape (1, 2), expected (2, 2)"
    assert outcomes["raise"][1] == "the engine raised on a valid test: RuntimeError: liar refuses these inputs"
    assert outcomes["crash"][1].startswith("the engine's process died (exit code 3)")
    assert _signal_named("the engine's process died (exit code -8): x") == (
        "the engine's process died (exit code -8, SIGFPE): x")
    assert outcomes["hang"][1] == "no answer within 2 s"
    assert outcomes["unsupported"][1] == "liar lacks this operator"
    assert outcomes["accept"][1] == ("the spec requires IndexOutOfBoundsError: indices[0] = 7 is out of bounds; "
                                     "the engine returned a result")
    assert outcomes["refuse"][1] == "refused: RuntimeError: liar refuses these inputs"
    # Every test ran after the crash and the hang (the worker restarted twice); unsupported is not scored.
    assert result["restarts"] == 2 and result["tests"] == result["planned"] == 9
    assert result["counts"] == {"pass": 2, "fail": 2, "error": 1, "accepted_invalid": 1, "crash": 1, "timeout": 1,
                                "unsupported": 1}
    assert result["score"] == {"passed": 2, "scored": 8, "ratio": 0.25}
    assert result["by_family"]["Gather"]["counts"] == result["counts"]
    assert (result["engine"], result["engine_version"], result["timeout"]) == ("liar", "0.1", 2.0)
    for row in result["results"]:
        assert set(row) == {"name", "group", "family", "op", "domain", "version", "valid", "tags", "outcome",
                            "detail", "seconds"}
        assert row["tags"] == (["negative_indices", "float32"] if row["valid"] else ["invalid_bounds"])
        assert (row["op"], row["domain"], row["version"]) == ("Gather", "ai.onnx", 13) and row["seconds"] >= 0
    assert next(r for r in result["results"] if "hang" in r["name"])["seconds"] >= 2  # the hang's time
    lines = out.splitlines()
    assert lines[0].startswith("liar 0.1 on ") and "(9 tests): score 2/8 (25.0%); pass 2, fail 2, error 1" in lines[0]
    assert lines[1].split() == ["family", "tests", *OUTCOMES, "score"]
    assert lines[2].split() == ["Gather", "9", "2", "2", "1", "1", "1", "1", "1", "25.0%"]
    assert lines[3] == "not passed (every test's outcome in --json):"
    assert len(lines) == 4 + 6 and "  crash             test_gather_13_crash_0: the engine's process died" in out


def test_exit_status_is_0_when_every_supported_test_passes(liar, tmp_path, capsys):
    suite = _our_suite(tmp_path / "suite", {"test_gather_13_right_0": "right", "test_gather_13_u_0": "unsupported"},
                       {"test_gather_13_refuse_0": "raise"})
    assert main(["run-tests", str(suite / "indexing"), "--engine", "liar"]) == 0
    out = capsys.readouterr().out
    assert "(2 tests): score 1/1 (100.0%)" in out and out.endswith("every supported test passed\n")


def test_usage_errors(liar, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    suite = _our_suite(tmp_path / "suite", {"test_gather_13_right_0": "right"}, {})
    for args, message in [
        ([str(tmp_path / "empty"), "--engine", "onnx-reference"], "holds no test: expected test folders"),
        ([str(tmp_path / "nowhere"), "--engine", "onnx-reference"], "is not a folder"),
        ([str(suite), "--engine", "refrence"], "unknown engine 'refrence' (engines: absent, "),
        ([str(suite), "--engine", "absent"], 'engine absent is not installed: pip install "absent-engine"'),
    ]:
        assert main(["run-tests", *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("gather-scatter run-tests: error: ") and message in err, err
    assert main(["run-tests", str(suite), "--engine", "refrence"]) == 2
    assert capsys.readouterr().err.rstrip().endswith("; did you mean 'onnx-reference'?")
    with pytest.raises(SystemExit) as exc:
        main(["run-tests", str(suite)])  # --engine is required
    assert exc.value.code == 2
    broken = tmp_path / "broken" / "test_x"
    broken.mkdir(parents=True)
    (broken / "model.onnx").write_bytes(_gather_model().SerializeToString())
    (broken / "test_data_set_0").mkdir()
    assert main(["run-tests", str(broken.parent), "--engine", "onnx-reference"]) == 2
    assert "no output_K.pb in test_data_set_0 and no error.json" in capsys.readouterr().err


_NODE_MODULE_OPS = {"gather": "Gather", "scatternd": "ScatterND"}


def _single_op(case) -> str | None:
    """The operator of an onnx node test whose model is that one operator (its _expanded variants are not)."""
    ops = {n.op_type for n in case.model.graph.node} if case.model is not None else set()
    return ops.pop() if len(ops) == 1 else None


def _onnx_node_tests(root: Path, module: str) -> list[str]:
    """onnx's own node tests of ``module`` (built in memory since onnx #7959) written to disk as its
    cmd_tools wrote them: ``root/node/test_NAME/``; their names."""
    import importlib

    import onnx.backend.test.case.node as node

    importlib.import_module(f"onnx.backend.test.case.node.{module}")
    # onnx's registry is global: other tests in this process may have imported other modules' cases
    cases = [c for c in node._NodeTestCases if _single_op(c) == _NODE_MODULE_OPS[module]]
    for case in cases:
        _write_test(root / "node" / case.name, case.model, case.data_sets,
                    data_json={"rtol": case.rtol, "atol": case.atol})
    return [c.name for c in cases]


def _two_outputs_model() -> onnx.ModelProto:
    """Gather and GatherElements of one data: two outputs, data an initializer-free input, indices two inputs."""
    graph = helper.make_graph(
        [helper.make_node("Gather", ["data", "i"], ["y0"], axis=0),
         helper.make_node("GatherElements", ["data", "j"], ["y1"], axis=1)],
        "two",
        [helper.make_tensor_value_info("data", onnx.TensorProto.FLOAT, [3, 2]),
         helper.make_tensor_value_info("i", onnx.TensorProto.INT64, [None]),
         helper.make_tensor_value_info("j", onnx.TensorProto.INT64, [3, 1])],
        [helper.make_tensor_value_info("y0", onnx.TensorProto.FLOAT, None),
         helper.make_tensor_value_info("y1", onnx.TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_onnx_backend_layout_with_several_data_sets_and_outputs(tmp_path, capsys):
    names = _onnx_node_tests(tmp_path / "onnx", "gather")
    assert {"test_gather_0", "test_gather_negative_indices"} <= set(names)
    j = np.array([[1], [0], [-1]], np.int64)
    sets = [([DATA, np.array([0], np.int64), j], [DATA[:1], np.take_along_axis(DATA, j % 2, 1)]),
            ([DATA, np.array([2, 1], np.int64), j], [DATA[[2, 1]], np.take_along_axis(DATA, j % 2, 1)])]
    _write_test(tmp_path / "onnx" / "model" / "test_two_outputs", _two_outputs_model(), sets)
    sets[1][1][1] = sets[1][1][1] + np.float32(0.5)  # the second data set's second output, wrong
    _write_test(tmp_path / "onnx" / "model" / "test_two_outputs_wrong", _two_outputs_model(), sets)
    cases = load_suite(tmp_path / "onnx")  # a root of kind folders, as onnx's data/ is
    assert [c.group for c in cases] == ["model", "model", *(["node"] * len(names))]
    two = cases[0]
    assert (two.op, two.domain, two.version, two.input_names, two.output_names) == (
        "Gather+GatherElements", "", None, ["data", "i", "j"], ["y0", "y1"])
    assert two.family == "(several operators)" and cases[-1].family == "Gather"
    assert (two.rtol, two.atol) == (1e-3, 1e-7)  # onnx's loader defaults, without data.json
    assert [len(outs) for _, outs in two.data_sets()] == [2, 2]
    result = run_cases(cases, "onnx-reference")
    rows = {r["name"]: r for r in result["results"]}
    assert all(rows[n]["outcome"] == "pass" for n in [*names, "test_two_outputs"]), result["results"]
    assert rows["test_gather_0"]["family"] == "Gather" and rows["test_gather_0"]["version"] == 13
    wrong = rows["test_two_outputs_wrong"]
    assert wrong["outcome"] == "fail"
    assert wrong["detail"].startswith("data set 1: output 1 ('y1'): 3 of 3 elements differ beyond rtol=0.001, "
                                      "atol=1e-07; first at flat position 0: np.float32(1.0), expected np.float32(1.5)")
    # One kind folder, and one test folder, are suites too.
    assert [c.name for c in load_suite(tmp_path / "onnx" / "node")] == sorted(names)
    assert [c.name for c in load_suite(tmp_path / "onnx" / "node" / "test_gather_0")] == ["test_gather_0"]
    assert main(["run-tests", str(tmp_path / "onnx" / "node" / "test_gather_0"), "--engine", "onnx-reference"]) == 0
    assert "(1 tests): score 1/1 (100.0%)" in capsys.readouterr().out


def test_the_tolerance_comes_from_data_json(tmp_path):
    indices = np.array([0, 2], np.int64)
    near = np.take(DATA, indices, 0) * np.float32(1 + 1e-5)  # off by 1e-5 relative: 3 of 4 elements (not 0)
    suite = tmp_path / "suite"
    _write_test(suite / "indexing" / "test_exact", _gather_model(), [([DATA, indices], [near])])
    _write_test(suite / "indexing" / "test_loose", _gather_model(), [([DATA, indices], [near])],
                data_json={"rtol": 1e-4, "atol": 0})
    _write_test(suite / "indexing" / "test_tight", _gather_model(), [([DATA, indices], [near])],
                data_json={"rtol": 1e-6, "atol": 0})
    (suite / "MANIFEST.json").write_text(json.dumps({"format": 1, "cases": []}))
    cases = load_suite(suite)
    assert [(c.name, c.rtol, c.atol) for c in cases] == [("test_exact", None, None), ("test_loose", 1e-4, 0.0),
                                                         ("test_tight", 1e-6, 0.0)]
    rows = run_cases(cases, "onnx-reference")["results"]
    assert [r["outcome"] for r in rows] == ["fail", "pass", "fail"]
    exact = "3 of 4 elements differ; first at flat position 1: np.float32(1.0), expected np.float32(1.00001)"
    assert exact in rows[0]["detail"]  # exact: bits
    assert "3 of 4 elements differ beyond rtol=1e-06, atol=0; first at flat position 1" in rows[2]["detail"]


def test_a_tolerance_that_is_not_a_finite_number_at_least_0_is_a_usage_error_naming_the_file(tmp_path, capsys):
    """data.json's rtol/atol: a string, null, a bool, a list, a negative or NaN: exit 2, not a traceback (issue 36)."""
    indices = np.array([0, 2], np.int64)
    sets = [([DATA, indices], [np.take(DATA, indices, 0)])]
    bad = [("rtol", "x", '"x"'), ("atol", None, "null"), ("rtol", [1e-3], "[0.001]"), ("atol", True, "true"),
           ("rtol", "1e-3", '"1e-3"'), ("atol", -1e-7, "-1e-07"), ("rtol", float("nan"), "NaN"),
           ("atol", float("inf"), "Infinity")]
    for n, (key, value, shown) in enumerate(bad):
        folder = _write_test(tmp_path / f"s{n}" / "test_x", _gather_model(), sets,
                             data_json={"rtol": 1e-3, "atol": 0, key: value})
        for suite in (folder.parent, tmp_path / f"o{n}"):  # onnx's layout, and ours (a MANIFEST above)
            if suite.name.startswith("o"):
                shutil.copytree(folder.parent, suite)
                (suite / "MANIFEST.json").write_text(json.dumps({"format": 1, "cases": []}))
            message = f"{suite / 'test_x' / 'data.json'}: {key} must be a finite number >= 0, got {shown}"
            with pytest.raises(SuiteError, match=re.escape(message)):
                load_suite(suite)
            assert main(["run-tests", str(suite), "--engine", "onnx-reference"]) == 2
            assert f"gather-scatter run-tests: error: {message}\n" in capsys.readouterr().err
    good = _write_test(tmp_path / "good" / "test_x", _gather_model(), sets, data_json={"rtol": 0, "atol": 0})
    assert [(c.rtol, c.atol) for c in load_suite(good.parent)] == [(0.0, 0.0)]  # ints are numbers (onnx writes 0)


def test_compare():
    nan = np.array([np.nan, 1.0], np.float32)
    assert compare(nan.copy(), nan) is None and compare(nan.copy(), nan, 1e-3, 0) is None  # NaN equals NaN
    assert compare(np.array([np.inf], np.float32), np.array([np.inf], np.float32), 1e-3, 1e-7) is None
    assert compare(np.array([-np.inf], np.float32), np.array([np.inf], np.float32), 1e-3, 1e-7) is not None
    assert compare(np.array([-0.0], np.float32), np.array([0.0], np.float32)) is not None  # exact: bits
    assert compare(np.array([-0.0], np.float32), np.array([0.0], np.float32), 0, 0) is None
    assert compare(np.zeros(2, np.float64), np.zeros(2, np.float32), 1, 1) == "dtype float64, expected float32"
    assert compare(np.zeros(3, np.float32), np.zeros(2, np.float32), 1, 1) == "shape (3,), expected (2,)"
    # Integers are exact whatever the tolerance.
    assert compare(np.array([1001], np.int64), np.array([1000], np.int64), 1e-2, 0) is not None
    strings = np.array(["a", "b"], dtype=object)
    assert compare(np.array(["a", "b"], dtype=object), strings, 1e-3, 1e-7) is None


def test_a_string_suite_reads_and_compares_strings(tmp_path):
    data = np.array([["x", "yy"], ["", "zzz"]], dtype=object)
    indices = np.array([1, -2], np.int64)
    folder = _write_test(tmp_path / "test_strings", _gather_model(data=data), [([data, indices],
                                                                               [data[[1, 0]]])])
    (case,) = load_suite(folder)
    (feeds, (expected,)), = case.data_sets()
    assert feeds["data"].dtype == object and expected.tolist() == [["", "zzz"], ["x", "yy"]]
    assert run_cases([case], "onnx-reference")["counts"]["pass"] == 1


def test_a_bad_tensor_file_is_named(tmp_path):
    folder = _write_test(tmp_path / "test_x", _gather_model(), [([DATA, np.array([0], np.int64)], [DATA[:1]])])
    (folder / "test_data_set_0" / "output_0.pb").write_bytes(b"\xff\xff not a proto")
    (case,) = load_suite(folder)
    with pytest.raises(SuiteError, match=r"output_0\.pb: not a readable TensorProto"):
        case.data_sets()


def test_run_tests_is_the_command_line(tmp_path):
    # python -m gather_scatter run-tests, as a user runs it: its output and exit status.
    suite = _our_suite(tmp_path / "suite", {"test_gather_13_x_0": "g"}, {"test_gather_13_bounds_0": "g"})
    done = subprocess.run([sys.executable, "-m", "gather_scatter", "run-tests", str(suite), "--engine",
                           "onnx-reference", "--threads", "1"], capture_output=True, text=True, timeout=120,
                          env={**os.environ})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"onnx-reference {onnx.__version__} on {suite} (2 tests): score 2/2 (100.0%)")


def test_the_scoreboard_script_runs_and_fills_its_markers(tmp_path):
    # benchmarks/scoreboard.py --quick: a small export run on onnx.reference (a sample) and on our oracle (all of it),
    # its table written between the markers.
    import gather_scatter

    page = tmp_path / "page.md"
    page.write_text("# Page\n\nbefore\n\n<!-- scoreboard:start -->\nold table\n<!-- scoreboard:end -->\n\nafter\n")
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "scoreboard.py"), "--quick", "--engine",
                           "onnx-reference", "--engine", "gather_scatter", "--engine", "no-such-engine", "--sample",
                           "onnx-reference=20", "--doc", str(page), "--json", str(tmp_path / "raw.json")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    text = page.read_text()
    assert text.startswith("# Page\n\nbefore\n\n<!-- scoreboard:start -->\nWritten by `benchmarks/scoreboard.py`: ")
    assert "\n`python benchmarks/scoreboard.py " in text
    assert text.endswith("\n<!-- scoreboard:end -->\n\nafter\n") and "old table" not in text
    raw = json.loads((tmp_path / "raw.json").read_text())
    reference, ours, missing = raw["engines"]
    assert reference["tests"] == 20 and reference["sampled"] and raw["suite"]["tests"] > 20
    assert sum(reference["counts"].values()) == 20 and reference["engine_version"] == onnx.__version__
    assert {r["family"] for r in reference["results"]} == {"Gather", "ScatterND"}  # stratified: both families
    s = reference["score"]
    row = next(line for line in text.splitlines() if line.startswith("| onnx-reference |"))
    assert row.startswith(f"| onnx-reference | {onnx.__version__} | 20 of {raw['suite']['tests']} (seeded sample) | "
                          f"{s['passed']}/{s['scored']} (")
    grid = next(line for line in text.splitlines() if line.startswith("| engine | Gather | ScatterND |"))
    assert grid and (f"**onnx-reference {onnx.__version__}**: every supported test passed" in text
                     or f'??? note "onnx-reference {onnx.__version__}: ' in text)
    # Our own row: the whole suite, every test passed (the oracle that wrote it).
    total = raw["suite"]["tests"]
    assert (ours["engine"], ours["tests"], ours["sampled"]) == ("gather_scatter", total, False)
    assert ours["counts"]["pass"] == total and ours["engine_version"] == gather_scatter.__version__
    assert f"| gather_scatter | {gather_scatter.__version__} | {total} | {total}/{total} (100.0%) | {total} |" in text
    assert f"**gather_scatter {gather_scatter.__version__}**: every supported test passed" in text
    assert missing["status"].startswith("unknown engine 'no-such-engine'") and "- no-such-engine: unknown" in text
    assert ("--engine=onnx-reference --engine=gather_scatter --engine=no-such-engine --sample=onnx-reference=20 "
            "--seed 0 --threads 1 --quick") in text


def test_the_docs_way_to_write_onnx_node_tests_to_disk(tmp_path, monkeypatch):
    # docs/conformance.md's block, run on onnx's Gather and ScatterND node tests only (loading all ~1,900 takes
    # seconds): it writes the backend-test layout that load_suite reads and onnx.reference passes.
    import importlib

    import onnx.backend.test.case.node as node
    import onnx.backend.test.loader as loader
    from doc_examples import python_block

    for module in ("gather", "scatternd"):  # importing a module of onnx's node tests registers its cases
        importlib.import_module(f"onnx.backend.test.case.node.{module}")
    wanted = [c for c in node._NodeTestCases if _single_op(c) in ("Gather", "ScatterND")]  # a global registry
    monkeypatch.setattr(loader, "load_node_model_tests", lambda: wanted)
    monkeypatch.chdir(tmp_path)
    exec(python_block(ROOT / "docs" / "conformance.md", "load_node_model_tests()"), {})
    cases = load_suite(tmp_path / "onnx-node-tests")
    assert sorted(c.name for c in cases) == sorted({c.name for c in wanted}) and len(cases) >= 10
    assert {c.family for c in cases} == {"Gather", "ScatterND"} and all(c.rtol is not None for c in cases)
    result = run_cases(cases, "onnx-reference")
    assert result["counts"]["pass"] == len(cases), [r for r in result["results"] if r["outcome"] != "pass"]


def test_an_exported_suite_runs_with_its_manifest(tmp_path, capsys):
    # export-tests' own files: every case run once, named and tagged as MANIFEST.json says.
    from gather_scatter.conformance import export_tests

    manifest = export_tests(tmp_path / "suite", ops=["GatherND-13", "TensorScatter"], cases_per_version=2)
    report = tmp_path / "out.json"
    status = main(["run-tests", str(tmp_path / "suite"), "--engine", "onnx-reference", "--json", str(report)])
    result = json.loads(report.read_text())
    entries = {c["name"]: c for c in manifest["cases"]}
    assert result["tests"] == len(entries) == manifest["counts"]["valid"] + manifest["counts"]["invalid"]
    for row in result["results"]:
        entry = entries[row["name"]]
        assert (row["op"], row["version"], row["valid"], row["tags"]) == (
            entry["op"], entry["version"], entry["valid"], entry["tags"])
        assert row["group"] == ("indexing" if entry["valid"] else "indexing_invalid")
    assert set(result["by_family"]) == {"GatherND", "TensorScatter"}
    assert result["counts"]["pass"] > len(entries) / 2
    assert status == (1 if any(result["counts"][o] for o in ("fail", "error", "accepted_invalid", "crash",
                                                             "timeout")) else 0)
    assert capsys.readouterr().out.startswith(f"onnx-reference {onnx.__version__} on {tmp_path / 'suite'} ")


def test_an_engine_that_does_not_start_again_after_a_crash_costs_each_test_not_the_run(liar, tmp_path, monkeypatch):
    monkeypatch.setenv("LIAR_BROKEN", str(tmp_path / "broken"))
    suite = _our_suite(tmp_path / "suite", {"test_gather_13_a_0": "right", "test_gather_13_b_0": "crash_for_good",
                                            "test_gather_13_c_0": "right"}, {})
    rows = run_cases(load_suite(suite), "liar")["results"]
    assert [r["outcome"] for r in rows] == ["pass", "crash", "crash"]
    assert rows[1]["detail"].startswith("the engine's process died (exit code 3)")
    assert rows[2]["detail"].startswith("the engine's worker did not restart: engine 'liar' is installed but cannot "
                                        "run: RuntimeError: liar cannot start")
