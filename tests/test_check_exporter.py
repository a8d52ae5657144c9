"""``gather-scatter check --exporter torch`` (issue 40): torch's ONNX exporters checked against torch eager,
the exported graph run by our evaluator. A deliberately wrong lowering must be caught, a right one must
give no finding, an exporter that kills its process must be a finding, and each real finding's script
must reproduce it."""

from __future__ import annotations

import json
import os
import pathlib
import signal

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the exporter check exports PyTorch modules: needs torch")
pytest.importorskip("onnxscript", reason="torch.onnx's dynamo exporter needs onnxscript")

from gather_scatter.check.exporters import OPERATIONS, ExporterSelectionError, run_exporter_check  # noqa: E402
from gather_scatter.check.exporters.export import compare  # noqa: E402
from gather_scatter.check.exporters.program import build, module_source, tensor_source  # noqa: E402
from gather_scatter.check.exporters.samples import Sample, duplicate_targets, samples  # noqa: E402
from gather_scatter.cli import main  # noqa: E402
from test_check_report_robust import _run_script  # noqa: E402 - runs a script with gather_scatter unimportable


def _check(tmp_path, **options):
    options.setdefault("progress", False)
    options.setdefault("out_dir", str(tmp_path / "findings"))
    options.setdefault("stream", open(os.devnull, "w"))  # noqa: SIM115 - closed with the process
    return run_exporter_check("torch", **options)


def _off_by_one_index_select(g, self, dim, index):
    """A wrong TorchScript lowering of aten::index_select: every index one lower (0 reads the last row)."""
    one = g.op("Constant", value_t=torch.tensor(1, dtype=torch.int64))
    return g.op("Gather", self, g.op("Sub", index, one), axis_i=0)


def test_a_wrong_lowering_is_caught_and_the_right_one_gives_no_finding(tmp_path):
    # In this process (isolate=False), so the lowering patched into torch here is what exports.
    torch.onnx.register_custom_op_symbolic("aten::index_select", _off_by_one_index_select, 18)
    try:
        wrong = _check(tmp_path / "wrong", modes=["torchscript"], ops=["index_select"], cases=1, isolate=False)
    finally:
        torch.onnx.unregister_custom_op_symbolic("aten::index_select", 18)
    assert wrong["table"]["index_select"]["torchscript"] == {"wrong_output": 1}
    (finding,) = wrong["findings"]
    assert finding["kind"] == "wrong_output" and finding["sample"] == "duplicate indices"
    assert finding["carrier"] == "Gather(axis=0)" and "Sub" in finding["nodes"]
    # shrunk to one index: data[4] wanted, data[3] given
    assert finding["shrunk_from"] == 5 * 3 + 4 and "first at [0, 0]: np.float32(10.0), eager gives np.float32(13.0)" in \
        finding["detail"]
    assert os.path.exists(finding["model"]) and os.path.exists(finding["inputs"])

    right = _check(tmp_path / "right", modes=["torchscript"], ops=["index_select"], cases=5, isolate=False)
    assert right["findings"] == [] and right["classes"] == []
    assert right["table"]["index_select"]["torchscript"] == {"ok": 5}


def _dynamo_with_an_off_by_one_index_select(module, tensors, names, mode, opset):
    """torch's dynamo exporter with a wrong aten::index_select in its translation table (an exporter plugin)."""
    from onnxscript import opset18 as op

    def index_select(self, dim: int, index):
        return op.Gather(self, op.Sub(index, op.Constant(value_int=1)), axis=dim)

    table = {torch.ops.aten.index_select.default: index_select}
    return torch.onnx.export(module, tuple(tensors), dynamo=True, input_names=names, opset_version=opset,
                             custom_translation_table=table).model_proto


def test_an_exporter_plugin_with_a_wrong_translation_is_caught(tmp_path):
    result = _check(tmp_path, modes=["dynamo"], ops=["index_select"], cases=1, isolate=False,
                    export=_dynamo_with_an_off_by_one_index_select)
    (finding,) = result["findings"]
    assert finding["kind"] == "wrong_output" and finding["nodes"] == ["Sub", "Gather(axis=0)"]
    assert "first at [0, 0]: np.float32(10.0), eager gives np.float32(13.0)" in finding["detail"]


def _killed_exporter(module, tensors, names, mode, opset):
    os.kill(os.getpid(), signal.SIGFPE)  # as the TorchScript exporter does on an empty index (torch 2.13)


def test_an_exporter_that_kills_its_process_is_a_finding_and_the_check_goes_on(tmp_path):
    result = _check(tmp_path, modes=["torchscript"], ops=["take"], cases=1, export=_killed_exporter,
                    shrink_budget=1)
    (finding,) = result["findings"]
    assert finding["kind"] == "export_crashed"
    assert finding["detail"] == f"the process died (exit code {-signal.SIGFPE}) while exporting"
    assert result["table"]["take"]["torchscript"] == {"export_crashed": 1}


def test_real_findings_reproduce_in_their_standalone_scripts(tmp_path):
    # TorchScript lowers index_add to ScatterElements without a reduction, then adds: a duplicate index
    # adds once (torch 2.13; it warns "this will cause the ONNX model to be incorrect").
    result = _check(tmp_path, modes=["torchscript"], ops=["index_add"], cases=1, report_dir=str(tmp_path / "report"),
                    json_path=str(tmp_path / "r.json"))
    if not result["findings"]:
        pytest.skip(f"torch {torch.__version__} exports index_add with duplicate indices correctly")
    (cls,) = result["classes"]
    assert cls["kind"] == "wrong_output" and cls["reproduced"] == 1
    assert json.loads((tmp_path / "r.json").read_text())["classes"][0]["reproduced"] == 1
    text = (tmp_path / "report" / "01-torch-torchscript-index-add-wrong_output.md").read_text()
    assert "EXPORT DEFECT REPRODUCED" in text and "ScatterElements" in text
    script = tmp_path / "report" / "01-torch-torchscript-index-add-wrong_output.py"
    assert "import gather_scatter" not in script.read_text() and "from gather_scatter" not in script.read_text()
    run = _run_script(script)  # gather_scatter unimportable
    assert run.returncode == 1 and "EXPORT DEFECT REPRODUCED" in run.stdout


def test_every_operation_runs_through_both_exporters(tmp_path):
    # One sample of each: the table has a row per operation and mode, and every sample ran.
    result = _check(tmp_path, ops=list(OPERATIONS), cases=1, shrink_budget=0)
    assert list(result["table"]) == list(OPERATIONS)
    for op, by_mode in result["table"].items():
        assert set(by_mode) == {"dynamo", "torchscript"}
        assert sum(by_mode["dynamo"].values()) == sum(by_mode["torchscript"].values()) == 1, op
    assert result["skipped"] == 0 and result["samples"] == len(OPERATIONS)


def test_values_compare_bit_for_bit_or_within_the_stated_tolerance():
    want = [np.array([0.0, 1.0, np.nan], np.float32)]
    assert compare([np.array([0.0, 1.0, np.nan], np.float32)], want, None)[0] == "ok"
    kind, detail, _, position = compare([np.array([-0.0, 1.0, np.nan], np.float32)], want, None)
    assert kind == "wrong_output" and position == (0,)  # -0.0 is not 0.0's bits
    assert compare([np.array([0.0, 1.000001, np.nan], np.float32)], want, 1e-5)[0] == "ok"
    assert compare([np.array([0.0, 1.0001, np.nan], np.float32)], want, 1e-5)[0] == "wrong_output"
    assert compare([np.array([0, 1, 2], np.int64)], want, None)[0] == "wrong_dtype"
    assert compare([np.zeros((1, 3), np.float32)], want, None)[0] == "wrong_shape"
    assert compare([], want, None)[0] == "wrong_count"
    # where torch writes an element twice without accumulating, which write wins is unspecified
    twice = np.array([False, True, False])
    assert compare([np.array([0.0, 2.0, np.nan], np.float32)], want, None, twice)[0] == "undefined"
    kind, _, _, position = compare([np.array([5.0, 2.0, np.nan], np.float32)], want, None, twice)
    assert kind == "wrong_output" and position == (0,)


@pytest.mark.parametrize(("op", "args", "kwargs", "undefined"), [
    ("scatter", (torch.zeros(3, 2), 0, torch.tensor([[1, 1]]), torch.ones(1, 2)), {}, False),
    ("scatter", (torch.zeros(3, 2), 0, torch.tensor([[1, 0], [1, 2]]), torch.ones(2, 2)), {}, True),
    ("scatter", (torch.zeros(3, 2), 0, torch.tensor([[1, 0], [1, 2]]), 5.0), {}, False),  # one value
    ("index_copy", (torch.zeros(3, 2), 0, torch.tensor([0, -1]), torch.ones(2, 2)), {}, False),
    ("index_copy", (torch.zeros(3, 2), 0, torch.tensor([2, -1]), torch.ones(2, 2)), {}, True),  # -1 is 2
    ("index_copy", (torch.zeros(3, 2), 0, torch.tensor([2, 2]), torch.ones(2, 2)), {}, True),
    ("index_put", (torch.zeros(3), (torch.tensor([0, -3]),), torch.ones(2)), {"accumulate": False}, True),
    ("index_put", (torch.zeros(3), (torch.tensor([0, -3]),), torch.ones(2)), {"accumulate": True}, False),
    ("setitem", (torch.zeros(3, 2), (slice(None), torch.tensor([1, -1])), torch.ones(3, 2)), {}, True),
    ("put", (torch.zeros(2, 2), torch.tensor([3, -1]), torch.ones(2)), {"accumulate": False}, True),
    ("put", (torch.zeros(2, 2), torch.tensor([3, -1]), torch.ones(2)), {"accumulate": True}, False),
])
def test_writes_to_one_element_twice_without_accumulating_are_found(op, args, kwargs, undefined):
    mask = duplicate_targets(OPERATIONS[op], Sample(op, args, kwargs, ""))
    assert (mask is not None) is undefined
    if undefined:
        assert mask.shape == args[0].shape and mask.sum() in (1, 2, 3)


def test_the_module_is_built_from_the_source_the_script_carries():
    sample = Sample("getitem", (torch.arange(12.0).reshape(3, 4), (slice(None), torch.tensor([-1, 0]))), {}, "")
    source = module_source(sample)
    assert "return F(a0, (slice(None, None, None), a1))" in source
    module, tensors, names = build(sample)
    assert names == ["a0", "a1"] and module(*tensors).tolist() == [[3.0, 0.0], [7.0, 4.0], [11.0, 8.0]]
    for t in (torch.tensor([-0.0, float("nan"), 1.5], dtype=torch.bfloat16), torch.zeros(0, 3, dtype=torch.int8)):
        again = eval(tensor_source(t), {"torch": torch})  # noqa: S307 - our own source
        assert again.dtype == t.dtype and again.shape == t.shape
        assert torch.equal(again.view(torch.int16) if t.dtype == torch.bfloat16 else again,
                           t.view(torch.int16) if t.dtype == torch.bfloat16 else t)


def test_samples_cover_what_users_send():
    for op in OPERATIONS.values():
        assert len(op.own()) >= 2, op.name  # OpInfo's come on top where torch's test helpers import
    notes = " ".join(s.note for s in samples(OPERATIONS["getitem"], 100, 0))
    for what in ("negative", "duplicate", "empty", "0-d", "broadcast", "x[mask]"):
        assert what in notes
    pytest.importorskip("expecttest", reason="PyTorch's OpInfo samples (torch.testing._internal) need expecttest")
    dtypes = {s.note.rsplit(", ", 1)[-1] for s in samples(OPERATIONS["index_add"], 100, 0) if "OpInfo" in s.note}
    assert {"float32", "float64", "float16", "bfloat16", "int64", "int8", "uint8"} <= dtypes


def test_bad_selections_are_refused_with_the_valid_names():
    with pytest.raises(ExporterSelectionError, match="unknown torch operation 'Gather'; choose from getitem"):
        run_exporter_check("torch", ops=["Gather"])
    with pytest.raises(ExporterSelectionError, match="choose from dynamo, torchscript"):
        run_exporter_check("torch", modes=["jit"])
    with pytest.raises(ExporterSelectionError, match="the one checked is 'torch'"):
        run_exporter_check("tensorflow")


@pytest.mark.parametrize(("args", "message"), [
    (["--exporter", "torch", "--op", "Gather"], "unknown torch operation 'Gather'"),
    (["--mode", "dynamo", "--engine", "onnx-reference"], "--mode picks an exporter's mode"),
    (["--exporter", "torch", "model.onnx"], "MODEL applies to a model, not to --exporter"),
    (["--exporter", "torch", "--opset", "17", "--opset", "18"], "--exporter exports at one --opset"),
    (["--engine", "onnx-reference", "--engine", "onnxruntime"], "--engine is given 2 times"),
    (["--engine", "onnx-reference", "--op", "index_add"], "--op index_add is a torch operation: it selects samples"),
])
def test_the_cli_refuses_options_of_the_other_mode(args, message, capsys):
    assert main(["check", *args]) == 2
    assert message in capsys.readouterr().err


def test_the_cli_writes_the_table_and_exits_1_with_findings(tmp_path, capsys):
    code = main(["check", "--exporter", "torch", "--mode", "torchscript", "--op", "index_select", "--op", "masked_fill",
                 "--cases", "2", "--out", str(tmp_path / "f"), "--json", str(tmp_path / "r.json")])
    out = capsys.readouterr().out
    result = json.loads((tmp_path / "r.json").read_text())
    assert code == (1 if result["findings"] else 0)
    assert "| operation | torchscript |" in out and "| index_select | 2 ok |" in out
    assert result["modes"] == ["torchscript"] and result["versions"]["torch"] == torch.__version__


def test_the_docs_example_runs_as_it_says(tmp_path, monkeypatch):
    from doc_examples import python_block

    monkeypatch.chdir(tmp_path)  # its findings go to ./check-findings
    block = python_block(pathlib.Path(__file__).parents[1] / "docs" / "checker.md", "run_exporter_check(")
    namespace: dict = {}
    exec(block, namespace)  # noqa: S102 - the page's own example
    if not namespace["classes"]:
        pytest.skip(f"torch {torch.__version__} exports index_add with duplicate indices correctly")
    assert namespace["classes"] == [("wrong_output", ["ScatterElements(axis=0)", "Add"], "duplicate indices")]


def test_ctrl_c_prints_and_writes_the_samples_run_so_far(tmp_path):
    from gather_scatter.check import Interrupted
    from gather_scatter.check.exporters.export import export

    calls = []

    def interrupted_at_the_second(*args):
        calls.append(args)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return export(*args)

    with pytest.raises(Interrupted, match="interrupted after 1 of 3 cases") as info:
        _check(tmp_path, modes=["torchscript"], ops=["index_select"], cases=3, isolate=False,
               export=interrupted_at_the_second, json_path=str(tmp_path / "r.json"))
    written = json.loads((tmp_path / "r.json").read_text())
    assert info.value.result["interrupted"] and written["interrupted"]
    assert written["table"]["index_select"]["torchscript"] == {"ok": 1}


def test_engine_verdicts_say_whether_a_runtime_shows_the_exports_error(tmp_path):
    pytest.importorskip("onnxruntime", reason="the onnxruntime engine needs onnxruntime")
    result = _check(tmp_path, modes=["torchscript"], ops=["index_add", "index_select"], cases=1,
                    engines=["onnxruntime"])
    if not result["classes"]:
        pytest.skip(f"torch {torch.__version__} exports index_add with duplicate indices correctly")
    (cls,) = result["classes"]  # onnxruntime runs ScatterElements' spec, so it shows the lost update
    assert cls["op"] == "index_add" and cls["engines"] == {
        "onnxruntime": "gives the spec's result (ours): it shows this export's error"}
