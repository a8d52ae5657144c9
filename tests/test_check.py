"""``gather-scatter check``: engines out of process, classification, shrinking, the report.

onnx.reference is always here (onnx is a dependency); onnxruntime, OpenVINO and tract come with
the test extra, so CI runs every engine. Known engine bugs are what the checker must find.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import pytest

from gather_scatter.check import engines, run_check, runner
from gather_scatter.check.case_values import Case
from gather_scatter.cli import main
from gather_scatter.rules.versions import REGISTRY, SWEPT


def _check(spec_key, inputs, attrs=None, kind="valid"):
    spec = REGISTRY[spec_key]
    return runner.CheckCase(spec, spec.since_version, Case(spec.op_type, inputs, attrs or {}), kind)


def test_reference_findings_are_written_and_reproduce(tmp_path):
    out = tmp_path / "findings"
    result = run_check("onnx-reference", ops=["GatherElements"], cases=30, seed=1, out_dir=str(out),
                       json_path=str(tmp_path / "r.json"), progress=False)
    assert json.loads((tmp_path / "r.json").read_text()) == result
    assert result["engine"] == "onnx-reference" and result["engine_version"] == onnx.__version__
    assert result["cases"] == 60 and sum(result["summary"].values()) == 60
    kinds = {f["kind"] for f in result["findings"]}
    # onnx.reference wraps out-of-range GatherElements indices instead of raising
    assert "accepted_invalid" in kinds
    for f in result["findings"]:
        model, inputs = onnx.load(f["model"]), np.load(f["inputs"], allow_pickle=True)
        assert model.graph.node[0].op_type == "GatherElements" and len(inputs.files) == 2
        assert f["op"] == "GatherElements" and f["domain"] == "ai.onnx" and f["opset"] == f["since_version"]
        assert f["repro"].startswith('python -c "') and f["model"] in f["repro"]
    accepted = next(f for f in result["findings"] if f["kind"] == "accepted_invalid")
    run = subprocess.run(accepted["repro"], shell=True, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr  # the engine returns where the spec requires an error


def test_shrinking_keeps_the_finding_and_makes_the_case_smaller():
    # onnx.reference's GatherElements wraps an out-of-range index: the shrunk case still shows it.
    data = np.arange(60, dtype=np.float32).reshape(6, 10)
    indices = np.tile(np.arange(10), (6, 1))
    indices[4, 7] = 10  # out of range on axis 1
    check = _check(("", "GatherElements", 13), [data, indices], {"axis": 1}, "index out of bounds")
    with engines.Worker("onnx-reference") as worker:
        assert runner.run_one(worker, check)[0] == "accepted_invalid"
        from gather_scatter.check.shrink import shrink, size

        small = shrink(check, "accepted_invalid", lambda c: runner.run_one(worker, c)[0])
        assert runner.run_one(worker, small)[0] == "accepted_invalid"
    assert size(small) <= 4 < size(check)  # a one-element axis and an index past it, or similar
    assert isinstance(runner.expected(small), IndexError)  # still an input the spec refuses


def test_a_hung_engine_is_a_timeout_and_the_worker_restarts():
    check = _check(("", "Gather", 13), [np.arange(5.0), np.array([1, 2])], {"axis": 0})
    # Milliseconds of work: the worker's smoke run has warmed the engine up, and a pipe's poll
    # waits at least a millisecond, so a small case can answer "within" 1e-6 s.
    slow = _check(("", "Gather", 13), [np.arange(2e6), np.arange(2_000_000) % 5], {"axis": 0})
    with engines.Worker("onnx-reference", timeout=1e-6) as worker:
        outcome = worker.run(runner.model_bytes(slow), slow.feeds())
        assert outcome.kind == "timeout" and worker.restarts == 1
        worker.timeout = 60
        outcome = worker.run(runner.model_bytes(check), check.feeds())
        assert outcome.kind == "ok" and outcome.output.tolist() == [1.0, 2.0]


def test_classification():
    valid = _check(("", "Gather", 13), [np.arange(5.0), np.array([1, 2])], {"axis": 0})
    invalid = _check(("", "Gather", 13), [np.arange(5.0), np.array([1, 9])], {"axis": 0}, "index out of bounds")
    ok = engines.Outcome("ok", np.array([1.0, 2.0]))
    assert runner.classify(valid, ok) == ("agree", "")
    assert runner.classify(valid, engines.Outcome("ok", np.array([1.0, 3.0])))[0] == "wrong_output"
    assert runner.classify(valid, engines.Outcome("ok", np.array([1, 2])))[0] == "wrong_output"  # dtype
    assert runner.classify(valid, engines.Outcome("error", message="no"))[0] == "rejected_valid"
    assert runner.classify(invalid, ok)[0] == "accepted_invalid"
    assert runner.classify(invalid, engines.Outcome("error", message="no")) == ("agree", "")
    assert runner.classify(valid, engines.Outcome("crash", message="died"))[0] == "crash"
    assert runner.classify(valid, engines.Outcome("unsupported", message="n/a"))[0] == "unsupported"
    nan = _check(("", "Gather", 13), [np.array([np.nan, 1.0]), np.array([0])], {"axis": 0})
    assert runner.classify(nan, engines.Outcome("ok", np.array([np.nan])))[0] == "agree"


def test_missing_engine_is_one_line_naming_the_extra(monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "tract" else real(name))
    assert main(["check", "--engine", "tract"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["gather-scatter check: error: engine 'tract' is not installed: pip install \"gather_scatter[tract]\""]


def test_cli_exit_status_and_table(tmp_path, capsys):
    code = main(["check", "--engine", "onnx-reference", "--op", "ScatterND-18", "--cases", "3", "--out", str(tmp_path),
                 "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    result = json.loads((tmp_path / "r.json").read_text())
    assert code == (1 if result["findings"] else 0)
    assert out.startswith(f"onnx-reference {onnx.__version__}: 3 cases; wrong_output ")


def test_onnxruntime_bugs_are_found(tmp_path):
    pytest.importorskip("onnxruntime", reason="the onnxruntime engine needs onnxruntime")
    # 0.1's measured bugs: string Gather with slices wider than one element returns empty strings.
    check = _check(("", "Gather", 13), [np.array([["a", "b"], ["c", "d"]], dtype=object), np.array([1, 0])])
    with engines.Worker("onnxruntime") as worker:
        kind, detail = runner.run_one(worker, check)
    assert kind == "wrong_output" and detail == "at flat position 1: '', expected 'd'", detail


def test_openvino_out_of_range_gathernd_is_found():
    pytest.importorskip("openvino", reason="the openvino engine needs OpenVINO")
    check = _check(("", "GatherND", 13), [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([[1, 5]])],
                   kind="index out of bounds")
    with engines.Worker("openvino") as worker:
        assert runner.run_one(worker, check)[0] == "accepted_invalid"  # memory garbage, not an error


def test_tract_abort_on_a_valid_negative_index_is_a_crash_and_the_run_goes_on():
    pytest.importorskip("tract", reason="the tract engine needs tract")
    negative = _check(("", "GatherND", 13), [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([[-1, 0]])])
    fine = _check(("", "GatherND", 13), [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([[1, 0]])])
    with engines.Worker("tract") as worker:
        kind, detail = runner.run_one(worker, negative)
        assert kind == "crash" and "died" in detail and "assertion failed: index < dim" in detail
        assert runner.run_one(worker, fine) == ("agree", "") and worker.restarts == 1


def test_generated_cases_are_reproducible_and_cover_every_version():
    a = list(runner.generate(None, None, 4, seed=3))
    b = list(runner.generate(None, None, 4, seed=3))
    assert len(a) == 4 * len(REGISTRY)  # GatherBlockQuantized included (issue 27)
    assert {c.spec.name for c in a} == {v.name for v in REGISTRY.values()}
    assert all(x.case.describe() == y.case.describe() and x.kind == y.kind for x, y in zip(a, b))
    assert sum(c.kind != "valid" for c in a) == len(REGISTRY)  # one in three
    # --opset: each version at the opsets where it is the one in effect
    assert sorted((c.spec.name, c.opset) for c in runner.generate(["GatherND"], [12, 13, 20], 1, 0)) == [
        ("GatherND-12", 12), ("GatherND-13", 13), ("GatherND-13", 20), ("com.microsoft.GatherND-1", 1)]


# -- each defect the issue lists, found with its kind, and reproduced from the written files ----


def _reload(finding):
    """The finding's case rebuilt from its written model and inputs alone."""
    from gather_scatter.check.report import load_inputs

    model = onnx.load(finding["model"])
    node = model.graph.node[0]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
    inputs = list(load_inputs(finding["model"], finding["inputs"]).values())
    return node, inputs, attrs


def _found(result, op, kind, text=""):
    return [f for f in result["findings"] if f["op"] == op and f["kind"] == kind and text in f["detail"]]


def test_reference_defects(tmp_path):
    result = run_check("onnx-reference", ops=["GatherElements"], cases=30, seed=0, out_dir=str(tmp_path),
                       progress=False)
    wraps = _found(result, "GatherElements", "accepted_invalid", "is out of bounds")
    smaller = _found(result, "GatherElements", "rejected_valid", "all dimensions of index and self should be")
    assert wraps and smaller
    node, inputs, attrs = _reload(smaller[0])  # valid for us, refused by onnx.reference, from the files alone
    from onnx.reference import ReferenceEvaluator

    with pytest.raises(ValueError, match="all dimensions of index and self"):
        ReferenceEvaluator(onnx.load(smaller[0]["model"])).run(None, dict(zip(node.input, inputs)))
    # Past 64 positions on the axis (a PyTorch-exported BERT's torch.gather), and a negative write index.
    past_64 = _check(("", "GatherElements", 13), [np.arange(200.0).reshape(2, 100), np.full((2, 3), 99)], {"axis": 1})
    negative = _check(("", "TensorScatter", 24), [np.zeros((2, 4, 1)), np.ones((2, 1, 1)), np.array([-1, 0])],
                      {"axis": 1}, "negative write index")
    with engines.Worker("onnx-reference") as worker:
        assert runner.run_one(worker, past_64)[0] in ("rejected_valid", "wrong_output")
        assert runner.run_one(worker, negative)[0] == "accepted_invalid"
    scatter = run_check("onnx-reference", ops=["Scatter"], cases=3, out_dir=str(tmp_path / "s"), progress=False)
    assert scatter["summary"]["unsupported"] == 3  # no Scatter-9: counted, not a bug


def test_onnxruntime_defects(tmp_path):
    pytest.importorskip("onnxruntime", reason="the onnxruntime engine needs onnxruntime")
    result = run_check("onnxruntime", ops=["Gather"], cases=200, seed=0, threads=1, out_dir=str(tmp_path),
                       progress=False)
    empty = _found(result, "Gather", "wrong_output", "'', expected")
    assert empty
    import onnxruntime as ort

    node, inputs, _ = _reload(empty[0])  # the written files show it on their own
    got = ort.InferenceSession(empty[0]["model"], providers=["CPUExecutionProvider"]).run(None, dict(zip(node.input, inputs)))
    assert "" in np.asarray(got[0]).reshape(-1).tolist()
    # ScatterND add on 2 threads loses duplicate updates.
    race = _check(("", "ScatterND", 16), [np.zeros((4, 20000), np.int64), np.zeros((64, 1), np.int64),
                                          np.ones((64, 20000), np.int64)], {"reduction": "add"})
    with engines.Worker("onnxruntime", threads=2) as worker:  # a race: give it up to 60 chances to show
        kinds = []
        while "wrong_output" not in kinds and len(kinds) < 60:
            kinds.append(runner.run_one(worker, race)[0])
    assert "wrong_output" in kinds and set(kinds) <= {"agree", "wrong_output"}


def test_openvino_defects(tmp_path):
    pytest.importorskip("openvino", reason="the openvino engine needs OpenVINO")
    gather_nd = _check(("", "GatherND", 13), [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([[1, 5]])],
                       kind="index out of bounds")
    gather = _check(("", "Gather", 13), [np.arange(1.0, 4.0, dtype=np.float32), np.array([5])],
                    kind="index out of bounds")
    with engines.Worker("openvino") as worker:
        assert runner.run_one(worker, gather_nd)[0] == "accepted_invalid"  # memory garbage, not an error
        assert runner.run_one(worker, gather)[0] == "accepted_invalid"
        outcome = worker.run(runner.model_bytes(gather), gather.feeds())
    assert outcome.kind == "ok" and outcome.output.tolist() == [0.0]  # an out-of-range Gather index reads 0
    # Generated cases find more (int64 and float64 computed in 32 bits, crashes), and the run completes.
    result = run_check("openvino", ops=["Gather-13"], cases=30, seed=0, out_dir=str(tmp_path), progress=False)
    assert sum(result["summary"].values()) == 30 and result["findings"]
    for f in result["findings"]:
        onnx.load(f["model"])
        assert set(np.load(f["inputs"], allow_pickle=True).files) == {"x0", "x1"}


def test_tract_crash_does_not_stop_the_run(tmp_path):
    pytest.importorskip("tract", reason="the tract engine needs tract")
    result = run_check("tract", ops=["GatherND-13"], cases=12, seed=0, out_dir=str(tmp_path), progress=False)
    crashes = _found(result, "GatherND", "crash", "died")
    assert crashes and sum(result["summary"].values()) == 12  # every case after the crash ran too
    node, inputs, _ = _reload(crashes[0])
    assert (inputs[1] < 0).any()  # a valid negative index is what aborts it
    run = subprocess.run(crashes[0]["repro"], shell=True, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0  # the written files abort tract on their own


def test_onnxruntime_reports_only_listed_divergences(tmp_path):
    """No false findings: every finding of 2,000 cases per version on one thread is a row of
    tests/test_onnxruntime.py's divergence table."""
    pytest.importorskip("onnxruntime", reason="the onnxruntime engine needs onnxruntime")
    import test_onnxruntime as T

    swept = sorted(v.name for v in SWEPT.values())  # GatherBlockQuantized: tests/test_check_quantized.py
    result = run_check("onnxruntime", ops=swept, cases=2000, seed=7, threads=1, out_dir=str(tmp_path),
                       progress=False)
    assert result["cases"] == 2000 * len(SWEPT)
    for f in result["findings"]:
        node, inputs, attrs = _reload(f)
        spec = REGISTRY[("" if f["domain"] == "ai.onnx" else f["domain"], f["op"], f["since_version"])]
        row = T.divergence_for(spec, Case(f["op"], inputs, attrs))
        assert row is not None, f


def test_complex_products_rounded_with_or_without_fma_are_the_same_answer():
    want = np.array([19.500387 - 4.2770295j], np.complex64)
    assert runner.same(np.array([19.500385 - 4.2770295j], np.complex64), want) is None  # 1 ulp
    assert runner.same(np.array([19.6 - 4.2770295j], np.complex64), want) is not None
    assert runner.same(np.array([np.nan + 1j], np.complex64), np.array([np.nan + 1j], np.complex64)) is None


def test_first_update_winning_a_duplicate_is_not_a_finding_without_reduction():
    data, indices, updates = np.zeros(3), np.array([[1], [1]]), np.array([5.0, 7.0])
    none = _check(("", "ScatterND", 18), [data, indices, updates])
    assert runner.classify(none, engines.Outcome("ok", np.array([0.0, 5.0, 0.0])))[0] == "agree"  # first wins
    assert runner.classify(none, engines.Outcome("ok", np.array([0.0, 7.0, 0.0])))[0] == "agree"  # last wins
    assert runner.classify(none, engines.Outcome("ok", np.array([0.0, 6.0, 0.0])))[0] == "wrong_output"
    add = _check(("", "ScatterND", 18), [data, indices, updates], {"reduction": "add"})
    assert runner.classify(add, engines.Outcome("ok", np.array([0.0, 5.0, 0.0])))[0] == "wrong_output"
    elements = _check(("", "ScatterElements", 18), [np.zeros((2, 2)), np.array([[1, 0], [1, 0]]),
                                                    np.array([[1.0, 2.0], [3.0, 4.0]])])
    assert runner.classify(elements, engines.Outcome("ok", np.array([[0.0, 2.0], [1.0, 0.0]])))[0] == "agree"


def test_ctrl_c_writes_the_partial_report_and_exits_130(tmp_path, monkeypatch, capsys):
    # Ctrl-C was a traceback and no report, though findings were already written.
    real, calls = runner.run_one, []

    def run_one(worker, check):
        calls.append(check)
        if len(calls) == 40:  # well after onnx.reference's first GatherElements finding
            raise KeyboardInterrupt
        return real(worker, check)

    monkeypatch.setattr(runner, "run_one", run_one)
    out, report = tmp_path / "findings", tmp_path / "r.json"
    code = main(["check", "--engine", "onnx-reference", "--op", "GatherElements", "--cases", "30", "--seed", "1",
                 "--out", str(out), "--json", str(report)])
    assert code == 130
    captured = capsys.readouterr()
    result = json.loads(report.read_text())
    assert result["interrupted"] is True and result["planned"] == 60 and 0 < result["cases"] < 60
    assert sum(result["summary"].values()) == result["cases"]
    assert result["findings"] and all(pathlib.Path(f["model"]).exists() for f in result["findings"])
    assert captured.out.startswith(
        f"onnx-reference {onnx.__version__}: interrupted after {result['cases']} of 60 cases; ")
    assert "Traceback" not in captured.err
    assert captured.err.splitlines()[-1] == (
        f"gather-scatter check: interrupted after {result['cases']} of 60 cases; the findings so far in "
        f"{str(out)!r} and the report in {str(report)!r}")


def test_run_check_raises_keyboard_interrupt_after_the_report(tmp_path, monkeypatch):
    from gather_scatter.check import Interrupted

    def stop(worker, check):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_one", stop)
    with pytest.raises(KeyboardInterrupt) as info:  # a library caller's Ctrl-C still stops it
        run_check("onnx-reference", ops=["Gather-13"], cases=2, out_dir=str(tmp_path),
                  json_path=str(tmp_path / "r.json"), progress=False)
    assert isinstance(info.value, Interrupted) and info.value.result["cases"] == 0
    assert json.loads((tmp_path / "r.json").read_text()) == info.value.result


def test_an_engine_that_fails_to_import_is_one_line(tmp_path, monkeypatch, capsys):
    # An installed engine whose import fails was a RuntimeError traceback, exit 1, "within 300 s".
    fake = tmp_path / "fake" / "tract"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("libtract.so: cannot open shared object file")\n')
    monkeypatch.syspath_prepend(str(tmp_path / "fake"))  # the spawned worker takes this sys.path too
    monkeypatch.delitem(sys.modules, "tract", raising=False)
    assert main(["check", "--engine", "tract", "--op", "Gather-13", "--cases", "1", "--out", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ("gather-scatter check: error: engine 'tract' is installed but cannot run: import tract "
                            "failed: ImportError: libtract.so: cannot open shared object file\n")


@pytest.mark.parametrize(("args", "message"), [
    (["--op", "GatherND", "--opset", "8"],
     "--op GatherND selects nothing at --opset 8: GatherND is in effect at opsets 11 to 28 (GatherND-11, "
     "GatherND-12, GatherND-13); opset 8 has Gather-1"),
    (["--op", "Scatter", "--opset", "11"],
     "--op Scatter selects nothing at --opset 11: Scatter is in effect at opsets 9 to 10 (Scatter-9); opset 11 has "
     "Gather-11, GatherElements-11, GatherND-11, ScatterElements-11, ScatterND-11"),
    (["--op", "ScatterND-16", "--opset", "13", "--opset", "18"],
     "--op ScatterND-16 selects nothing at --opset 13, 18: ScatterND-16 is in effect at opsets 16 to 17; opset 13 "
     "has Gather-13, GatherElements-13, GatherND-13, ScatterElements-13, ScatterND-13; opset 18 has Gather-13, "
     "GatherElements-13, GatherND-13, ScatterElements-18, ScatterND-18"),
], ids=["gathernd-before-11", "scatter-after-10", "version-at-neither"])
def test_an_op_at_opsets_where_it_does_not_exist_is_a_usage_error(tmp_path, args, message, capsys):
    # These ran nothing (or only the com.microsoft GatherND) and said so with exit 0.
    assert main(["check", "--engine", "onnx-reference", *args, "--out", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == f"gather-scatter check: error: {message}\n"


def test_an_op_in_effect_at_one_of_the_opsets_runs_there():
    runner.check_selection(["GatherND"], [8, 13])
    assert {(c.spec.name, c.opset) for c in runner.generate(["GatherND"], [8, 13], 1, 0)} == {
        ("GatherND-13", 13), ("com.microsoft.GatherND-1", 1)}
    runner.check_selection(["com.microsoft.GatherND-1"], [8])  # other domains run at their own opsets


@pytest.mark.parametrize("seed", [-1, 1.5, "3", True, None])
def test_run_check_refuses_a_seed_that_is_not_an_integer_at_least_0_before_anything_runs(seed, tmp_path):
    from gather_scatter.check import run_check, runner

    with pytest.raises(runner.SelectionError, match=r"seed must be an integer >= 0, got "):
        run_check("onnx-reference", ops=["Gather-13"], cases=1, seed=seed, out_dir=str(tmp_path / "f"), progress=False)
    assert not (tmp_path / "f").exists()
