"""``gather-scatter check`` for com.microsoft GatherBlockQuantized-1 (issue 27, the checker).

Its cases (``check/quantized_cases.py``) are generated deterministically; every valid one equals
the loop oracle written from the schema text (tests/oracle_quantized.py), every invalid one
raises its declared error through ``run_node``; ``data``, ``scales`` and ``zero_points`` go into
the one-node model as initializers, ``indices`` as its one feed. onnxruntime agrees on every
case it runs (float and float16 output; bfloat16 is unsupported on its CPU), apart from data
of rank 1, which its shape inference refuses though the schema's text allows it; onnx.reference
has no implementation (every case unsupported, no finding). Model mode replays the node with its
constants as initializers, and a report's standalone script rebuilds them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import oracle_quantized
import pytest
from onnx import TensorProto, helper, numpy_helper

from gather_scatter import run_node
from gather_scatter.check import engines, repro_script, run_check, run_model_check, runner, upstream
from gather_scatter.check import quantized_cases as Q
from gather_scatter.check.case_values import Case
from gather_scatter.rules.versions import GATHER_BLOCK_QUANTIZED as SPEC

OP = {"opset": 1, "domain": "com.microsoft"}


def _valid(seed: int, per_combination: int = 1) -> list[Case]:
    return list(Q.valid_cases(np.random.default_rng(seed), per_combination))


def _bits(case: Case) -> list[tuple]:
    return [(a.dtype.str, a.shape, np.ascontiguousarray(a).tobytes()) for a in case.inputs]


def test_cases_are_deterministic_and_cover_every_type():
    a = list(runner.generate(["GatherBlockQuantized"], None, 30, seed=5))
    b = list(runner.generate(["com.microsoft.GatherBlockQuantized-1"], None, 30, seed=5))
    assert [(c.kind, c.case.attrs, _bits(c.case)) for c in a] == [(c.kind, c.case.attrs, _bits(c.case)) for c in b]
    assert {c.spec.name for c in a} == {"com.microsoft.GatherBlockQuantized-1"} and len(a) == 30
    assert all(c.opset == 1 and c.case.constants == Q.CONSTANTS for c in a)
    # the invalid ones take the schema's rules in turn
    assert [c.kind for c in a if c.kind != "valid"] == list(Q.INVALID_KINDS[:10])
    # any 10 valid cases in a row: every T1 variant and every T2; 60: every (T1, T2, index type)
    cases = _valid(0)
    assert len(Q.COMBINATIONS) == len(set(Q.COMBINATIONS)) == 60 == len(cases)
    for start in (0, 7, 50):
        window = cases[start : start + 10]
        seen = {(c.inputs[0].dtype.name, c.attrs.get("bits", 4) if c.inputs[0].dtype == np.uint8 else 4) for c in window}
        assert len(seen) == 10 and {c.inputs[2].dtype.name for c in window} == {"float32", "float16", "bfloat16"}
    every = _valid(1, 4)
    attrs = [c.attrs for c in every]
    assert {a["block_size"] for a in attrs} >= {0, 16, 32, 64, 128, 256}
    assert any(len(c.inputs) == 4 for c in every) and any(len(c.inputs) == 3 and c.inputs[0].dtype == np.uint8
                                                        for c in every)
    fp = [c for c in every if c.inputs[0].dtype.name.startswith("float")]
    assert any(1 in c.inputs[2].shape and c.inputs[0].ndim > 1 for c in fp)  # broadcast scales
    assert any(a["gather_axis"] % c.inputs[0].ndim == a["quantize_axis"] % c.inputs[0].ndim
               for c, a in zip(every, attrs))  # gather and quantize on one axis
    partial = [c for c in every if c.attrs["block_size"]
               and (c.inputs[0].shape[c.attrs["quantize_axis"]] * (8 // c.attrs.get("bits", 8) if c.inputs[0].dtype
                                                                    == np.uint8 else 1)) % c.attrs["block_size"]]
    assert len(partial) > len(every) // 3
    out_of_range = [c for c in every
                    if c.inputs[1].size and ((c.inputs[1] < -c.inputs[0].shape[c.attrs["gather_axis"]])
                                             | (c.inputs[1] >= c.inputs[0].shape[c.attrs["gather_axis"]])).any()]
    assert len(out_of_range) > len(every) // 4


@pytest.mark.parametrize("seed", [0, 1])
def test_every_valid_case_equals_the_oracle(seed):
    cases = _valid(seed, 2) + [c.case for c in runner.generate(["GatherBlockQuantized"], None, 60, seed)
                               if c.kind == "valid"]
    zero_rows = 0
    for case in cases:
        with np.errstate(all="ignore"):  # NaN and infinite FP8 codes and scales
            ours = run_node("GatherBlockQuantized", case.inputs, case.attrs, **OP)
            want = oracle_quantized.gather_block_quantized(*case.inputs, **case.attrs)
        assert runner.same(ours, want) is None, (case.describe(), runner.same(ours, want))
        data, ids = case.inputs[:2]
        s = data.shape[case.attrs["gather_axis"]]
        far = (ids < -s) | (ids >= s)
        if far.any():  # the rows of out-of-range ids are zeros
            g = case.attrs["gather_axis"] % data.ndim
            rows = np.moveaxis(ours.astype(np.float32), range(g, g + ids.ndim), range(ids.ndim))[far]
            assert (rows == 0).all()
            zero_rows += 1
    assert zero_rows


@pytest.mark.parametrize("seed", range(4))
def test_every_invalid_case_raises_its_declared_error(seed):
    kinds = []
    for kind, case, error in Q.invalid_cases(np.random.default_rng(seed)):
        with pytest.raises(error) as raised:
            run_node("GatherBlockQuantized", case.inputs, case.attrs, **OP)
        assert isinstance(runner.expected(runner.CheckCase(SPEC, 1, case, kind)), error)
        assert "GatherBlockQuantized" in str(raised.value)
        kinds.append(kind)
    assert tuple(kinds) == Q.INVALID_KINDS


def test_the_one_node_model_holds_the_constants_as_initializers():
    case = next(c for c in _valid(3) if len(c.inputs) == 4 and c.inputs[0].dtype == np.dtype(ml_dtypes.int4))
    check = runner.CheckCase(SPEC, 1, case, "valid")
    model = onnx.load_from_string(runner.model_bytes(check))
    assert [i.name for i in model.graph.input] == ["x1"] and list(check.feeds()) == ["x1"]
    assert [i.name for i in model.graph.initializer] == ["x0", "x2", "x3"]
    assert model.graph.initializer[0].data_type == TensorProto.INT4
    assert model.graph.output[0].type.tensor_type.elem_type == helper.np_dtype_to_tensor_dtype(case.inputs[2].dtype)
    np.testing.assert_array_equal(numpy_helper.to_array(model.graph.initializer[0]), case.inputs[0])
    assert {(o.domain, o.version) for o in model.opset_import} == {("", 13), ("com.microsoft", 1)}


def test_reference_has_no_implementation_and_finds_nothing(tmp_path):
    result = run_check("onnx-reference", ops=["GatherBlockQuantized"], cases=9, seed=0, out_dir=str(tmp_path),
                       progress=False, stream=open(tmp_path / "out.txt", "w"))
    assert result["cases"] == 9 and result["summary"]["unsupported"] == 9 and not result["findings"]


def test_onnxruntime_agrees_on_every_case_it_runs():
    pytest.importorskip("onnxruntime")
    checks = [runner.CheckCase(SPEC, 1, c, "valid") for c in _valid(4)]
    checks += list(runner.generate(["GatherBlockQuantized"], None, 60, 4))
    ran = set()
    with engines.Worker("onnxruntime", 1, 60) as worker:
        for check in checks:
            kind, detail = runner.run_one(worker, check)
            data, scales = check.case.inputs[0], check.case.inputs[2]
            if kind == "unsupported":  # onnxruntime's CPU has no bfloat16 kernel
                assert scales.dtype == ml_dtypes.bfloat16 and "NOT_IMPLEMENTED" in detail, detail
            elif kind == "rejected_valid":  # its shape inference refuses rank 1, which the schema allows
                assert data.ndim == 1 and "data tensor must have rank > 1" in detail, detail
            else:
                assert kind == "agree", (check.kind, check.case.describe(), detail)
                if check.kind == "valid":
                    ran.add((data.dtype.name, scales.dtype.name))
    t1 = {"uint8", "int4", "uint4", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
          "float4_e2m1fn"}
    assert ran == {(a, b) for a in t1 for b in ("float32", "float16")}  # every T1, float and float16 output


def _embedding_model(path: Path) -> Path:
    """ids -> GatherBlockQuantized (uint4 table 10 x 40 in blocks of 16, float16 scales, zero points) -> Mul."""
    rng = np.random.default_rng(0)
    table = rng.integers(0, 16, (10, 40)).astype(ml_dtypes.uint4)
    scales = rng.random((10, 3)).astype(np.float16)
    zp = rng.integers(0, 16, (10, 3)).astype(ml_dtypes.uint4)
    node = helper.make_node("GatherBlockQuantized", ["table", "ids", "scales", "zp"], ["emb"], name="embed",
                            domain="com.microsoft", quantize_axis=1, block_size=16)
    scale = helper.make_node("Mul", ["emb", "two"], ["y"], name="double")
    graph = helper.make_graph(
        [node, scale], "embedding",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 3, 40])],
        initializer=[numpy_helper.from_array(table, "table"), numpy_helper.from_array(scales, "scales"),
                     numpy_helper.from_array(zp, "zp"), numpy_helper.from_array(np.array(2, np.float16), "two")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    onnx.save(model, path)
    return path


def test_model_mode_replays_the_node_with_its_constants(tmp_path):
    pytest.importorskip("onnxruntime")
    model = _embedding_model(tmp_path / "embedding.onnx")
    ids = np.array([[0, 9, -1], [10, -11, 3]], np.int64)  # 10 and -11: out of range, rows of zeros
    out = open(tmp_path / "out.txt", "w")
    result = run_model_check(str(model), "onnxruntime", inputs={"ids": ids}, out_dir=str(tmp_path / "f"),
                             stream=out)
    (row,) = result["nodes"]
    assert (row["node"], row["op"], row["domain"], row["kind"]) == ("embed", "GatherBlockQuantized",
                                                                    "com.microsoft", "agree")
    assert result["whole_model"]["kind"] == "agree" and not result["findings"]
    # the replay: the table, scales and zero points as initializers, the ids as the one feed
    from gather_scatter.check.capture import capture, load

    (run,), _, _ = capture(load(str(model)), {"ids": ids})
    assert run.check.case.constants == Q.CONSTANTS and list(run.check.feeds()) == ["x1"]
    replay = onnx.load_from_string(runner.model_bytes(run.check))
    assert [i.name for i in replay.graph.initializer] == ["x0", "x2", "x3"]
    np.testing.assert_array_equal(run.check.feeds()["x1"], ids)


def _flipping_onnxruntime() -> types.SimpleNamespace:
    """A fake engine: onnxruntime with the first output element off by one (a defect to report)."""
    source = (
        "import onnxruntime as ort\n\n\n"
        "def run(model, feeds):\n"
        "    y = ort.InferenceSession(model, providers=['CPUExecutionProvider']).run(None, feeds)[0]\n"
        "    y.flat[0] += 1\n"
        "    return [y]\n"
    )
    return types.SimpleNamespace(name="flipped-ort", version=lambda: "1", standalone_run_source=lambda t: source,
                                 standalone_requires="onnxruntime")


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


def _run_script(script: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCKED, str(script)], capture_output=True, text=True, timeout=180,
                          cwd=script.parent)


def test_a_wrong_output_finding_is_reported_and_its_script_reproduces(tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    monkeypatch.setattr(repro_script.engines, "load", lambda name: _flipping_onnxruntime())
    # float8 table (an ml_dtypes initializer, over 64 elements: from the archive), float16 output
    def fits(c: Case) -> bool:
        if not (c.inputs[0].dtype == np.dtype(ml_dtypes.float8_e4m3fn) and c.inputs[2].dtype == np.float16
                and c.inputs[0].size > repro_script.LITERAL_LIMIT):
            return False
        out = runner.expected(runner.CheckCase(SPEC, 1, c, "valid"))
        return bool(out.size and np.isfinite(out.reshape(-1)[0].astype(np.float32)))

    case = next(c for seed in range(6, 40) for c in _valid(seed) if fits(c))
    check = runner.CheckCase(SPEC, 1, case, "valid")
    finding = runner.Finding("wrong_output", check, "the first element off by one")
    (issue,) = upstream.write_reports([finding], "flipped-ort", "1", str(tmp_path / "issues"), run_scripts=False)
    issue = Path(issue)
    text = issue.read_text()
    assert text.startswith("# [flipped-ort 1] com.microsoft.GatherBlockQuantized-1 returns a wrong output")
    assert "negative" not in text.splitlines()[0] and "ContribOperators.md" in text
    script = issue.with_suffix(".py")
    source = script.read_text()
    assert "numpy_helper.from_array(x0, 'x0')" in source and "FEEDS = {'x1': x1}" in source
    assert "view(ml_dtypes.float8_e4m3fn)" in source and "TensorProto.FLOAT16" in source
    run = _run_script(script)
    assert run.returncode == 1 and "DEFECT REPRODUCED" in run.stdout, (run.stdout, run.stderr[-2000:])


def test_onnxruntimes_rank_1_refusal_is_reported_and_reproduces(tmp_path):
    pytest.importorskip("onnxruntime")
    data = np.array([3, -2, 7, 0, 1, -8, 5, 4, 2, 2, -1, 6, 0, 3, -4, 1, 7], dtype=ml_dtypes.int4)
    case = Case("GatherBlockQuantized", [data, np.array([16, -1, 17], np.int64),
                                         np.array([0.5, 2.0], np.float32)],
                {"gather_axis": 0, "quantize_axis": 0, "block_size": 16}, constants=Q.CONSTANTS)
    check = runner.CheckCase(SPEC, 1, case, "valid")
    np.testing.assert_array_equal(runner.expected(check), np.array([14.0, 14.0, 0.0], np.float32))  # 17: zeros
    with engines.Worker("onnxruntime") as worker:
        kind, detail = runner.run_one(worker, check)
    assert kind == "rejected_valid" and "rank > 1" in detail
    (issue,) = upstream.write_reports([runner.Finding(kind, check, detail)], "onnxruntime",
                                      engines.load("onnxruntime").version(), str(tmp_path / "issues"),
                                      run_scripts=False)
    text = Path(issue).read_text()
    assert text.startswith(f"# [onnxruntime {engines.load('onnxruntime').version()}] "
                           "com.microsoft.GatherBlockQuantized-1 rejects")  # the domain named once
    assert "Tensor of rank r >= 1. Block-wise quantized." in text
    run = _run_script(Path(issue).with_suffix(".py"))
    assert run.returncode == 1 and "DEFECT REPRODUCED: the engine refused a valid input" in run.stdout, run.stdout


def test_check_cli_selects_the_operator_and_writes_findings(tmp_path):
    pytest.importorskip("onnxruntime")
    run = subprocess.run([sys.executable, "-m", "gather_scatter", "check", "--engine", "onnxruntime", "--op",
                          "com.microsoft.GatherBlockQuantized-1", "--cases", "20", "--seed", "0", "--out", "f",
                          "--json", "r.json"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode in (0, 1), run.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["cases"] == 20 and result["summary"]["unsupported"] >= 1  # bfloat16
    for f in result["findings"]:  # only rank-1 data, refused by its shape inference
        assert f["op"] == "GatherBlockQuantized" and f["domain"] == "com.microsoft" and "rank > 1" in f["detail"]
        model = onnx.load(tmp_path / f["model"])
        assert [i.name for i in model.graph.input] == ["x1"] and len(model.graph.initializer) >= 2
        with np.load(tmp_path / f["inputs"]) as saved:
            assert list(saved) == ["x1"]


def _one(engine: str, case: Case) -> tuple[str, str]:
    with engines.Worker(engine, 1, 120) as worker:
        return runner.run_one(worker, runner.CheckCase(SPEC, 1, case, "valid"))


def _packed(bits: int, t2, rows: int = 6, columns: int = 64) -> Case:
    rng = np.random.default_rng(bits)
    data = rng.integers(0, 256, (rows, columns * bits // 8), dtype=np.uint8)
    scales = (rng.random((rows, columns // 32)) - 0.5).astype(t2)
    return Case("GatherBlockQuantized", [data, np.array([[0, 5], [-1, 2]], np.int64), scales],
                {"gather_axis": 0, "quantize_axis": 1, "block_size": 32, "bits": bits}, constants=Q.CONSTANTS)


def test_tract_lacking_a_type_or_width_is_unsupported_not_a_finding():
    pytest.importorskip("tract")
    # float16 scales (float32 ones it rounds to float16) and ids in range (a negative one aborts it):
    # the two are findings of their own
    fine = _packed(4, np.float16)
    fine.inputs[1] = np.array([[0, 5], [1, 2]], np.int64)
    assert _one("tract", fine) == ("agree", "")
    kind, detail = _one("tract", _packed(2, np.float32))  # uint8 with bits 2: its importer has bits 4 only
    assert kind == "unsupported" and "only bits=4 is supported" in detail
    nibbles = _packed(4, np.float32)
    nibbles.inputs[0] = np.zeros((6, 64), ml_dtypes.int4)
    kind, detail = _one("tract", nibbles)  # its ONNX loader has no int4
    assert kind == "unsupported" and "Unknown DatumType" in detail


def test_openvino_bfloat16_output_is_read_as_bfloat16():
    pytest.importorskip("openvino")
    from gather_scatter.check.engines import openvino

    # OpenVINO's Python API hands a bfloat16 output back as float16 holding bfloat16 bits: read as
    # float16 every value was wrong (a false wrong_output); as bfloat16 they are within 2 of its
    # ulps of ours (OpenVINO's own rounding, a finding of its own)
    check = runner.CheckCase(SPEC, 1, _packed(4, ml_dtypes.bfloat16), "valid")
    (out,) = openvino.run(runner.model_bytes(check), check.feeds(), engines.RunOptions())
    ours = runner.expected(check)
    assert out.dtype == ml_dtypes.bfloat16 and out.shape == ours.shape
    np.testing.assert_allclose(out.astype(np.float32), ours.astype(np.float32), rtol=2**-6)
    assert _one("openvino", _packed(8, np.float16)) == ("agree", "")


def test_an_issue_title_names_out_of_range_ids_not_negative_ones(tmp_path, monkeypatch):
    monkeypatch.setattr(repro_script.engines, "load", lambda name: _flipping_onnxruntime())
    data = np.arange(64, dtype=np.uint8).reshape(2, 32)
    for ids, wanted in (([-1, 0], "returns a wrong output"), ([-3, 0], "for out-of-range indices (zeros expected)")):
        case = Case("GatherBlockQuantized", [data, np.array(ids, np.int64), np.ones((2, 4), np.float32)],
                    {"block_size": 16, "bits": 4}, constants=Q.CONSTANTS)
        finding = runner.Finding("wrong_output", runner.CheckCase(SPEC, 1, case, "valid"), "as found")
        (issue,) = upstream.write_reports([finding], "flipped-ort", "1", str(tmp_path / str(ids[0])),
                                          run_scripts=False)
        title = Path(issue).read_text().splitlines()[0]
        assert title.endswith(wanted) and "negative" not in title, title
