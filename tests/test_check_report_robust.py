"""``gather-scatter check --report`` / ``--json`` on every finding (issue 26, items 3 to 6).

Item 3: a report for string tensors (and every other tensor type the case generator makes) is
written and its script reproduces with the same data. Item 4: a reduction finding with indices of
any shape (empty, rank 1 to 5) is reported; the JSON is written first, and a class whose issue
text fails is one line, the others kept. Item 5: an unwritable ``--report``/``--json`` is refused
before anything runs, naming the user's path. Item 6: a report script's exit status tells
"DEFECT REPRODUCED" (1), not reproduced (0) and "could not run" (125) apart, and its ``.npz``
loads without pickle.
"""

from __future__ import annotations

import ast
import itertools
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from gather_scatter.check import issue_class, repro_script, runner, upstream
from gather_scatter.check.case_values import DTYPES, Case, values
from gather_scatter.cli import main
from gather_scatter.rules.versions import REGISTRY

# Runs a script with the imports of the named top-level modules refused (argv: modules, script).
BLOCKED = (
    "import runpy, sys\n"
    "blocked = sys.argv[1].split(',')\n"
    "class Blocker:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "        if any(name == b or name.startswith(b + '.') for b in blocked):\n"
    "            raise ImportError(f'{name} is not installed here')\n"
    "sys.meta_path.insert(0, Blocker())\n"
    "sys.argv = sys.argv[2:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def _check(spec_key, inputs, attrs=None, kind="valid"):
    spec = REGISTRY[spec_key]
    return runner.CheckCase(spec, spec.since_version, Case(spec.op_type, inputs, attrs or {}), kind)


def _run_script(script: Path, *, blocked: str = "gather_scatter", timeout: float = 120):
    """Run a report script standalone (gather_scatter, and ``blocked``, unimportable)."""
    blocked = ",".join(dict.fromkeys(["gather_scatter", *blocked.split(",")]))
    return subprocess.run([sys.executable, "-c", BLOCKED, blocked, str(script)], capture_output=True, text=True,
                          timeout=timeout, cwd=script.parent)


def _one_report(finding, tmp_path, engine="onnx-reference", name="issues") -> Path:
    (issue,) = upstream.write_reports([finding], engine, "1", str(tmp_path / name), run_scripts=False)
    return Path(issue).with_suffix(".py")


def _string_model(path: Path, op: str, opset: int, attrs: dict, data_shape, index_shape, out_shape) -> Path:
    node = helper.make_node(op, ["data", "indices"], ["y"], **attrs)
    graph = helper.make_graph(
        [node], "strings",
        [helper.make_tensor_value_info("data", TensorProto.STRING, data_shape),
         helper.make_tensor_value_info("indices", TensorProto.INT64, index_shape)],
        [helper.make_tensor_value_info("y", TensorProto.STRING, out_shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


# ----------------------------------------------------------------------------- item 3: string tensors


def _model_mode_report(tmp_path, model, inputs, engine):
    np.savez(tmp_path / "inputs.npz", **inputs)
    report, js = tmp_path / "issues", tmp_path / "r.json"
    code = main(["check", str(model), "--engine", engine, "--inputs", str(tmp_path / "inputs.npz"),
                 "--out", str(tmp_path / "findings"), "--json", str(js), "--report", str(report)])
    assert code == 1
    result = json.loads(js.read_text())
    (issue,) = report.glob("*.md")
    assert result["reports"] == [str(issue)] and result["reports_not_written"] == []
    script = issue.with_suffix(".py")
    run = _run_script(script)
    assert run.returncode == 1 and "DEFECT REPRODUCED" in run.stdout, (run.stdout, run.stderr[-2000:])
    assert "DEFECT REPRODUCED" in issue.read_text() and "(exit status 1)" in issue.read_text()
    return result, script, run.stdout


def test_a_string_gather_elements_finding_of_onnx_reference_is_reported(tmp_path):
    # onnx.reference refuses a valid GatherElements-11 with axis=-1 whose indices are narrower
    # than the data; on strings, _nested descended into the str elements (AttributeError).
    model = _string_model(tmp_path / "ge.onnx", "GatherElements", 11, {"axis": -1}, [2, 3], [2, 2], [2, 2])
    inputs = {"data": np.array([["a", "b", "c"], ["é", "日本", ""]]), "indices": np.array([[2, 0], [1, -1]])}
    result, script, output = _model_mode_report(tmp_path, model, inputs, "onnx-reference")
    assert result["findings"][0]["kind"] == "rejected_valid"
    source = script.read_text()  # the shrunk case: the first row, one index
    assert "x0 = np.array([['a', 'b', 'c']], dtype=object)" in source
    assert "x1 = np.array([[2]], dtype=np.int64)" in source
    assert "the engine refused a valid input" in output and "expected: object [1, 1]\n[['c']]" in output


def test_onnxruntime_string_gather_finding_is_reported(tmp_path):
    pytest.importorskip("onnxruntime")
    # onnxruntime's Gather of strings: the string of another row comes back empty.
    model = _string_model(tmp_path / "g.onnx", "Gather", 13, {"axis": 0}, [3, 2], [2], [2, 2])
    inputs = {"data": np.array([["a", "b"], ["c", "d"], ["e", "f"]]), "indices": np.array([2, -1])}
    result, _, output = _model_mode_report(tmp_path, model, inputs, "onnxruntime")
    assert result["findings"][0]["kind"] == "wrong_output" and "expected 'f'" in output


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype == object:
        return a.tolist() == b.tolist()
    return a.tobytes() == b.tobytes()


@pytest.mark.parametrize("type_name", list(DTYPES))
def test_arrays_of_every_type_round_trip_through_the_script(type_name, tmp_path):
    """Literals and archived arrays give back the very array (bits, shape, dtype), pickle-free."""
    rng = np.random.default_rng(1)
    namespace = {"np": np, "ml_dtypes": ml_dtypes}
    for shape in [(), (0,), (2, 0, 3), (5,), (2, 3), (3, 40)]:
        array = values(rng, type_name, shape)
        literal = repro_script._literal(array)
        assert _same(eval(literal, namespace), array), (shape, literal[:200])
        stored: dict = {}
        line = repro_script._array_source("X", array, stored, "a.npz")
        if stored:
            np.savez(tmp_path / "a.npz", **stored)
            with np.load(tmp_path / "a.npz", allow_pickle=False) as archive:
                scope = dict(namespace, ARRAYS=archive)
                exec(line, scope)
            assert _same(scope["X"], array), shape
        else:
            assert array.size <= repro_script.LITERAL_LIMIT


def test_strings_unicode_cannot_hold_stay_literals():
    # NumPy's unicode arrays drop a trailing NUL: such strings are written into the script.
    tricky = np.array(["x\x00"] * 70, dtype=object)
    stored: dict = {}
    line = repro_script._array_source("X", tricky, stored, "a.npz")
    assert not stored and _same(eval(line.split(" = ", 1)[1], {"np": np}), tricky)


@pytest.mark.parametrize("type_name", list(DTYPES))
def test_a_report_for_every_tensor_type_is_written_and_its_script_runs(type_name, tmp_path):
    rng = np.random.default_rng(2)
    gather = REGISTRY[("", "Gather", 13)]
    if type_name in gather.data_types:  # the output (120 elements) and data go to the archive
        check = _check(("", "Gather", 13), [values(rng, type_name, (3, 40)), np.array([2, -1, 0], np.int64)])
    else:  # ml_dtypes' float8, 4-bit: TensorScatter's
        check = _check(("", "TensorScatter", 24), [values(rng, type_name, (2, 3, 40)),
                                                    values(rng, type_name, (2, 1, 40)), np.array([1, 0], np.int64)])
    finding = runner.Finding("wrong_output", check, "as found")  # onnx.reference gets these right
    script = _one_report(finding, tmp_path)
    assert "allow_pickle" not in script.read_text()
    with np.load(script.with_suffix(".npz"), allow_pickle=False) as archive:
        assert {"x0", "EXPECTED"} <= set(archive)
    run = _run_script(script)
    assert run.returncode == 0, (run.stdout, run.stderr[-2000:])
    assert "not reproduced in 1 runs: the output is as expected" in run.stdout


# ----------------------------------------------------------------------------- item 4: any indices' shape


def _duplicates_oracle(check) -> bool:
    """Two updates naming one element, by enumerating every update's target."""
    data, indices = check.case.inputs[:2]
    targets = []
    if check.spec.op_type == "ScatterND":
        k = indices.shape[-1]
        for tup in indices.reshape(-1, k).tolist() if indices.size else [()] * int(np.prod(indices.shape[:-1])):
            targets.append(tuple(t % s for t, s in zip(tup, data.shape, strict=False)))
    else:
        axis = check.case.attrs.get("axis", 0) % data.ndim
        for pos in itertools.product(*map(range, indices.shape)):
            target = list(pos)
            target[axis] = int(indices[pos]) % data.shape[axis]
            targets.append(tuple(target))
    return len(set(targets)) < len(targets)


def _reduction_cases():
    """ScatterND / ScatterElements reduction cases: indices empty and of rank 1 to 5, with and without duplicates."""
    rng = np.random.default_rng(3)
    for rank in range(1, 6):
        data = np.zeros((2,) * rank, np.float32)
        for n in (0, 1, 2, 3):  # 0: empty indices of this rank
            shape = (2,) * (rank - 1) + (n,)
            for axis in (0, rank - 1):
                indices = rng.integers(-2, 2, size=shape)
                updates = np.ones(shape, np.float32)
                yield _check(("", "ScatterElements", 18), [data, indices, updates], {"axis": axis, "reduction": "add"})
            for k in range(0, rank + 1):
                ind_shape = (n,) * min(rank, 2) + (k,)
                indices = rng.integers(-2, 2, size=ind_shape)
                updates = np.ones(ind_shape[:-1] + data.shape[k:], np.float32)
                yield _check(("", "ScatterND", 18), [data, indices, updates], {"reduction": "max"})


def test_duplicates_are_told_for_every_shape_of_indices():
    cases = list(_reduction_cases())
    assert any(c.case.inputs[1].size == 0 and c.case.inputs[1].ndim >= 3 for c in cases)
    for check in cases:
        assert issue_class.has_duplicates(check) == _duplicates_oracle(check), check.case


def test_reduction_findings_with_any_indices_shape_are_all_reported(tmp_path):
    # tinygrad and tract: a reduction finding with empty indices of rank >= 3 ended the report
    # (TypeError: unhashable type: 'list').
    findings = [runner.Finding("wrong_output", check, "as found") for check in _reduction_cases()]
    for finding in findings:
        assert upstream.title(upstream.IssueClass((), [finding]), "tract", "1", None)
        assert upstream.topic(finding) in ("reduction", "output")
    empty = {f.check.spec.op_type: f for f in findings
             if f.check.case.inputs[1].size == 0 and f.check.case.inputs[1].ndim >= 3}
    failures: list = []
    written = upstream.write_reports(list(empty.values()), "onnx-reference", "1", str(tmp_path / "issues"),
                                     run_scripts=False, failures=failures)
    assert failures == [] and len(written) == len(empty) == 2


def test_json_first_and_a_failed_issue_text_is_one_line(tmp_path, monkeypatch, capsys):
    real = upstream.script_source

    def script_source(group, *args):
        if group.key[1] == "accepted_invalid":
            raise TypeError("unhashable type: 'list'")
        return real(group, *args)

    monkeypatch.setattr(upstream, "script_source", script_source)
    report, js = tmp_path / "issues", tmp_path / "r.json"
    code = main(["check", "--engine", "onnx-reference", "--op", "GatherElements", "--cases", "30", "--seed", "0",
                 "--out", str(tmp_path / "findings"), "--json", str(js), "--report", str(report)])
    assert code == 1
    out = capsys.readouterr().out
    result = json.loads(js.read_text())
    classes = {(f["since_version"], f["kind"], f["case"]) for f in result["findings"]}
    failed = result["reports_not_written"]
    assert len(failed) == len({c for c in classes if c[1] == "accepted_invalid"}) >= 1
    for line in failed:
        assert line.endswith("could not be written: TypeError: unhashable type: 'list'") and "accepted_invalid" in line
        assert f"not written: {line}" in out.splitlines()
    assert len(result["reports"]) == len(classes) - len(failed) >= 1  # every other class written
    assert sorted(str(p) for p in report.glob("*.md")) == sorted(result["reports"])
    assert not list(report.glob("*accepted_invalid*"))  # nothing half written


def test_the_json_is_written_before_the_issue_texts(tmp_path, monkeypatch):
    from gather_scatter.check import run_check

    def broken(*args, **kwargs):
        raise RuntimeError("the issue texts failed")

    monkeypatch.setattr(upstream, "write_reports", broken)
    js = tmp_path / "r.json"
    with pytest.raises(RuntimeError):
        run_check("onnx-reference", ops=["GatherElements-11"], cases=6, out_dir=str(tmp_path / "f"), json_path=str(js),
                  report_dir=str(tmp_path / "issues"), progress=False)
    assert json.loads(js.read_text())["findings"]


# ----------------------------------------------------------------------------- item 5: unwritable destinations


def _unwritable_folder(tmp_path) -> str:
    """A folder no file can be created in: chmod where it binds, /sys where we run as root."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        (folder / "probe").touch()
    except OSError:
        return str(folder)
    (folder / "probe").unlink()
    if not os.path.isdir("/sys"):
        pytest.skip("chmod does not bind here (root) and there is no /sys")
    return "/sys"


@pytest.mark.parametrize("option", ["--report", "--json"])
def test_an_unwritable_destination_is_refused_before_anything_runs(option, tmp_path, monkeypatch, capsys):
    from gather_scatter import check

    def must_not_run(*args, **kwargs):
        raise AssertionError("the check ran")

    monkeypatch.setattr(check, "run_check", must_not_run)
    folder = _unwritable_folder(tmp_path)
    target = os.path.join(folder, "issues" if option == "--report" else "r.json")
    code = main(["check", "--engine", "onnx-reference", "--op", "Gather", "--out", str(tmp_path / "f"), option, target])
    err = capsys.readouterr().err
    assert code == 2 and f"cannot write {option} {target!r}: " in err
    assert f"no file can be created in {folder!r}" in err or f"{folder!r} is not writable" in err
    assert ".partial-" not in err and not (tmp_path / "f").exists()


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc")
def test_a_destination_under_proc_is_refused(tmp_path, capsys):
    code = main(["check", "--engine", "onnx-reference", "--op", "Gather", "--out", str(tmp_path / "f"),
                 "--json", "/proc/self/r.json"])
    assert code == 2 and "cannot write --json '/proc/self/r.json': " in capsys.readouterr().err


def test_write_reports_names_the_users_folder(tmp_path):
    folder = _unwritable_folder(tmp_path)
    finding = runner.Finding("accepted_invalid", _check(("", "Gather", 13), [np.zeros(3), np.array([5])],
                                                         kind="index out of bounds"), "wraps")
    with pytest.raises(OSError) as raised:
        upstream.write_reports([finding], "onnx-reference", "1", os.path.join(folder, "issues"), run_scripts=False)
    assert raised.value.filename == os.path.join(folder, "issues")


# ----------------------------------------------------------------------------- item 6: exit statuses


SCRIPT_CASES = {  # onnx.reference: a finding of each kind of script, with whether it reproduces
    "wrong_output": (_check(("", "Gather", 13), [np.arange(6.0).reshape(2, 3), np.array([1])]), 0),
    "accepted_invalid": (_check(("", "GatherElements", 13), [np.zeros((2, 3)), np.array([[7, 0, 0], [1, 2, 0]])],
                                {"axis": 1}, "index out of bounds"), 1),
    "rejected_valid": (_check(("", "GatherElements", 11), [np.array([["a", "b", "c"]], dtype=object),
                                                            np.array([[2, 0]])], {"axis": -1}), 1),
    "crash": (_check(("", "Gather", 13), [np.arange(6.0).reshape(2, 3), np.array([1])]), 0),
}


@pytest.mark.parametrize("kind", sorted(SCRIPT_CASES))
def test_a_script_exits_0_1_or_125_for_not_reproduced_reproduced_could_not_run(kind, tmp_path):
    check, status = SCRIPT_CASES[kind]
    script = _one_report(runner.Finding(kind, check, "as found"), tmp_path)
    doc = ast.get_docstring(ast.parse(script.read_text()))
    for code, meaning in repro_script.EXIT_STATUSES.items():
        assert f"{code:>5}  {meaning}" in doc
    run = _run_script(script)
    assert run.returncode == status, (run.stdout, run.stderr[-2000:])
    assert ("DEFECT REPRODUCED" in run.stdout) == (status == 1) and "COULD NOT RUN" not in run.stdout
    # the engine not installed: neither verdict
    run = _run_script(script, blocked="onnx.reference")
    assert run.returncode == repro_script.COULD_NOT_RUN, (run.stdout, run.stderr[-2000:])
    assert "COULD NOT RUN: ImportError: onnx.reference is not installed here (this script needs numpy, onnx and " \
           "onnx.reference (part of onnx))" in run.stdout
    assert "DEFECT REPRODUCED" not in run.stdout and "not reproduced" not in run.stdout


def test_a_plugin_not_registered_and_a_missing_archive_could_not_run(tmp_path, monkeypatch):
    check = _check(("", "Gather", 13), [np.arange(100.0).reshape(50, 2), np.array([1])])
    ghost = types.SimpleNamespace(name="ghost", version=lambda: "0", run=lambda model, feeds, options: [])
    monkeypatch.setattr(repro_script.engines, "load", lambda name: ghost)
    script = _one_report(runner.Finding("wrong_output", check, "as found"), tmp_path, engine="ghost")
    run = _run_script(script)
    assert run.returncode == repro_script.COULD_NOT_RUN and "StopIteration" not in run.stdout + run.stderr
    assert run.stdout.strip() == ("COULD NOT RUN: no installed package registers the engine 'ghost' "
                                  "(entry-point group gather_scatter.engines)")
    script.with_suffix(".npz").unlink()
    run = _run_script(script)
    assert run.returncode == repro_script.COULD_NOT_RUN and "COULD NOT RUN: FileNotFoundError" in run.stdout


def test_a_wrong_output_script_whose_engine_raises_could_not_run(tmp_path):
    # onnx.reference refuses this valid case (a rejected_valid finding): as a wrong_output
    # script it has no output to compare, which is no verdict.
    check, _ = SCRIPT_CASES["rejected_valid"]
    script = _one_report(runner.Finding("wrong_output", check, "as found"), tmp_path)
    run = _run_script(script)
    assert run.returncode == repro_script.COULD_NOT_RUN
    assert run.stdout.startswith("COULD NOT RUN: the engine raised ") and "(the defect is a wrong output)" in run.stdout


def test_a_findings_npz_of_strings_loads_without_pickle(tmp_path):
    from gather_scatter.check import report

    check = _check(("", "Gather", 13), [np.array(["a", "é", ""], dtype=object), np.array([1])])
    finding = runner.Finding("wrong_output", check, "as found")
    report.write_finding(finding, 1, str(tmp_path), "onnx-reference")
    with np.load(finding.files["inputs"], allow_pickle=False) as archive:
        assert archive["x0"].dtype.kind == "U"
    loaded = report.load_inputs(finding.files["model"], finding.files["inputs"])
    assert loaded["x0"].dtype == object and loaded["x0"].tolist() == ["a", "é", ""]
