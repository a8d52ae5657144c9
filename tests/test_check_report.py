"""``gather-scatter check --report DIR`` (issue 17, part 4): per class of findings, an issue text
ready to file with the engine and a standalone script that reproduces it with numpy, onnx and
the engine's own API only. Every generated script is run here, with gather_scatter made
unimportable, and must show its defect."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gather_scatter.check import engines, runner, upstream
from gather_scatter.check.case_values import Case
from gather_scatter.cli import main
from gather_scatter.rules.versions import REGISTRY

DATA = Path(__file__).parent / "data"
SPEC = Path("/work/shared/spec")

# Runs a script with every import of gather_scatter refused: the script must stand alone.
BLOCKED = (
    "import runpy, sys\n"
    "class Blocker:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if name.split('.')[0] == 'gather_scatter':\n"
    "            raise ImportError('gather_scatter is not importable in a standalone reproduction')\n"
    "sys.meta_path.insert(0, Blocker())\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def _check(spec_key, inputs, attrs=None, kind="valid"):
    spec = REGISTRY[spec_key]
    return runner.CheckCase(spec, spec.since_version, Case(spec.op_type, inputs, attrs or {}), kind)


def _imports(script: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(script.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add((node.module or "").split(".")[0])
    return found


def _reproduces(script: Path, timeout: float = 120) -> str:
    """Run ``script`` standalone; it must exit 1 saying DEFECT REPRODUCED. Returns its output."""
    assert "gather_scatter" not in _imports(script)
    run = subprocess.run([sys.executable, "-c", BLOCKED, str(script)], capture_output=True, text=True,
                         timeout=timeout, cwd=script.parent)
    assert run.returncode == 1 and "DEFECT REPRODUCED" in run.stdout, (script.name, run.stdout, run.stderr[-2000:])
    return run.stdout


def _need(module: str, engine: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"the {engine} engine is not installed here: pip install \"gather_scatter[{engine}]\"")


def test_operator_mode_writes_one_issue_per_class_and_each_script_reproduces(tmp_path, capsys):
    report, out = tmp_path / "issues", tmp_path / "findings"
    code = main(["check", "--engine", "onnx-reference", "--op", "GatherElements", "--cases", "30", "--seed", "0",
                 "--out", str(out), "--json", str(tmp_path / "r.json"), "--report", str(report)])
    assert code == 1
    result = json.loads((tmp_path / "r.json").read_text())
    classes = {(f["op"], f["since_version"], f["kind"], f["case"]) for f in result["findings"]}
    issues = sorted(report.glob("*.md"))
    assert len(issues) == len(classes) < len(result["findings"])  # per class, not per case
    assert [str(p) for p in issues] == sorted(result["reports"])
    assert f"{len(issues)} issue texts in {report}" in capsys.readouterr().out
    for issue in issues:
        text = issue.read_text()
        script = issue.with_suffix(".py")
        assert text.startswith(f"# [onnx-reference {result['engine_version']}] GatherElements-1")
        for section in ("## Environment", "## What happens", "## What the ONNX specification says",
                        "## Actual and expected output", "## Reproduction"):
            assert section in text
        assert f"- numpy {np.__version__}, onnx " in text and "Python 3." in text
        assert "DEFECT REPRODUCED" in text and script.read_text().rstrip() in text  # the script inlined
        quote = re.search(r"^> (.*)$", text, re.M).group(1)
        assert any(q.startswith(quote) for q in upstream.SPEC_QUOTES.values())
        output = _reproduces(script)
        assert "expected" in output
    bounds = next(p for p in issues if "accepted_invalid" in p.name).read_text()
    assert "It is an error if any of the index values are out of bounds." in bounds
    assert "instead of raising an error" in bounds.splitlines()[0]
    assert not list(tmp_path.glob(".issues.*"))  # no temporary folder left


def test_model_mode_names_the_nodes_and_loads_large_arrays_beside_the_script(tmp_path):
    # onnx.reference's GatherElements fails past 64 positions on the axis (numpy.choose).
    report = tmp_path / "issues"
    code = main(["check", str(DATA / "gather_elements.onnx"), "--engine", "onnx-reference", "--dim", "batch=2",
                 "--out", str(tmp_path / "findings"), "--report", str(report)])
    assert code == 1
    (issue,) = report.glob("*.md")  # both GatherElements nodes: one class
    text = issue.read_text()
    assert "GatherElements-13 rejects a valid input" in text.splitlines()[0]
    assert "`node_gather`" in text and "`node_gather_1`" in text
    script = issue.with_suffix(".py")
    if issue.with_suffix(".npz").exists():  # a case over 64 elements: its arrays beside the script
        assert "np.load(" in script.read_text()
    assert "64" in _reproduces(script)


def test_an_onnxruntime_race_reproduces_in_its_script(tmp_path):
    _need("onnxruntime", "onnxruntime")
    # ScatterND add on 2 threads loses duplicate updates on some runs: the script tries until it shows.
    race = _check(("", "ScatterND", 16), [np.zeros((4, 20000), np.int64), np.zeros((64, 1), np.int64),
                                          np.ones((64, 20000), np.int64)], {"reduction": "add"})
    finding = runner.Finding("wrong_output", race, "64 updates added into row 0, some lost")
    (issue,) = upstream.write_reports([finding], "onnxruntime", engines.load("onnxruntime").version(),
                                      str(tmp_path / "issues"), threads=2, tries=300, run_scripts=False)
    issue = Path(issue)
    text = issue.read_text()
    assert "ScatterND-16 reduction='add' gives a wrong result for duplicate indices on 2 threads" in text
    assert "2 intra-op threads" in text and "output[indices[idx]] += updates[idx]" in text
    assert issue.with_suffix(".npz").exists() and "intra_op_num_threads = 2" in issue.with_suffix(".py").read_text()
    assert _imports(issue.with_suffix(".py")) <= {"os", "subprocess", "sys", "numpy", "onnx", "onnxruntime"}
    assert "elements differ" in _reproduces(issue.with_suffix(".py"), timeout=300)


OTHER_ENGINES = {  # as tests/test_check_engines.py finds them
    "tinygrad": (_check(("", "GatherND", 13), [np.array([[True, False, True]]), np.array([[[-3]]])],
                        {"batch_dims": 1}), "wrong_output"),
    "onnx2torch": (_check(("", "GatherElements", 13), [np.arange(6, dtype=np.float32).reshape(2, 3),
                                                       np.array([[-1, 0]])], {"axis": 1}), "rejected_valid"),
    "jaxonnxruntime": (_check(("", "Gather", 13), [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([5])],
                              kind="index out of bounds"), "accepted_invalid"),
    "tvm": (_check(("", "GatherElements", 13), [np.arange(6, dtype=np.float32).reshape(2, 3),
                                                np.zeros((2, 0), np.int64)], {"axis": 1}), "rejected_valid"),
    # tract aborts (a Rust panic) on a valid negative GatherND index: the script runs it in a child.
    "tract": (_check(("", "GatherND", 13), [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([[-1, 0]])]),
              "crash"),
}
MODULES = {"tinygrad": "tinygrad", "onnx2torch": "onnx2torch", "jaxonnxruntime": "jaxonnxruntime", "tvm": "tvm",
           "tract": "tract"}


@pytest.mark.parametrize("engine", sorted(OTHER_ENGINES))
def test_other_engines_defects_reproduce_standalone(engine, tmp_path):
    _need(MODULES[engine], engine)
    check, kind = OTHER_ENGINES[engine]
    finding = runner.Finding(kind, check, "as the checker found it")
    (issue,) = upstream.write_reports([finding], engine, "x", str(tmp_path / "issues"), run_scripts=False)
    script = Path(issue).with_suffix(".py")
    assert _imports(script) - {"os", "subprocess", "sys", "numpy", "onnx", "types", "shutil", "tempfile"} <= {
        "onnxruntime", "tinygrad", "torch", "torchvision", "onnx2torch", "jax", "jaxonnxruntime", "tvm", "tract"}
    output = _reproduces(script, timeout=240)
    if kind == "crash":
        assert "the process running the model died" in output


def test_every_engine_gives_standalone_run_source():
    for name in engines.discover():
        engine = engines.load(name)
        if name in MODULES or name in ("onnxruntime", "onnx-reference", "openvino"):
            source = engine.standalone_run_source(2)
            tree = ast.parse(source)
            assert any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body), name
            assert "gather_scatter" not in source, name


@pytest.mark.skipif(not SPEC.is_dir(), reason="the spec texts are not on this machine")
def test_each_quote_is_the_spec_text():
    def norm(text):
        return " ".join(text.replace("\\", "").split())

    for (op, topic), quote in upstream.SPEC_QUOTES.items():
        for paragraph in quote.split("\n\n"):
            assert norm(paragraph) in norm((SPEC / upstream.SPEC_FILES[op]).read_text()), (op, topic)


def test_a_failed_report_leaves_the_old_one_and_nothing_half_written(tmp_path, monkeypatch):
    report = tmp_path / "issues"
    report.mkdir()
    (report / "old.md").write_text("the report of an earlier run")
    check = _check(("", "GatherElements", 13), [np.zeros((2, 3)), np.array([[7, 0, 0]])], {"axis": 1},
                   "index out of bounds")
    finding = runner.Finding("accepted_invalid", check, "wraps")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(upstream, "issue_text", interrupted)
    with pytest.raises(KeyboardInterrupt):
        upstream.write_reports([finding], "onnx-reference", "1", str(report), run_scripts=False)
    assert [p.name for p in tmp_path.iterdir()] == ["issues"] and [p.name for p in report.iterdir()] == ["old.md"]
    monkeypatch.undo()
    (issue,) = upstream.write_reports([finding], "onnx-reference", "1", str(report), run_scripts=False)
    assert [p.name for p in tmp_path.iterdir()] == ["issues"]
    assert sorted(p.name for p in report.iterdir()) == [Path(issue).name, Path(issue).with_suffix(".py").name]


def test_an_interrupted_check_writes_no_report(tmp_path, monkeypatch):
    from gather_scatter import check as check_module

    real, calls = runner.run_one, []

    def run_one(worker, check):  # Ctrl-C at the sixth case
        if len(calls) == 5:
            raise KeyboardInterrupt
        calls.append(check)
        return real(worker, check)

    monkeypatch.setattr(runner, "run_one", run_one)
    with pytest.raises(check_module.Interrupted):
        check_module.run_check("onnx-reference", ops=["GatherElements"], cases=30, out_dir=str(tmp_path / "f"),
                               report_dir=str(tmp_path / "issues"), progress=False)
    assert not (tmp_path / "issues").exists() and not list(tmp_path.glob(".issues*"))
