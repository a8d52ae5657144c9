"""The conformance suite's own test (issue 28): the default export, read back as another project would.

One default export (seed 0) per module: every valid case loads through onnx's
``load_model_tests(DIR, kind="indexing")`` and runs through ``run_model`` to its ``output_0.pb``
(exactly, or within data.json's tolerance); a seeded 1-in-10 sample runs through
``onnx.reference`` where it has the operator and type (its gaps are listed in
``REFERENCE_GAPS`` with the reason); each invalid case raises its error.json class through
``run_node``; the MANIFEST's counts match the folders; every tag appears, for every version
that can carry it; the same seed writes the same bytes; ``--op`` selects; a non-suite folder is
refused and a previous suite replaced.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from onnx.backend.test.loader import load_model_tests

import gather_scatter
from gather_scatter.check import case_values as C
from gather_scatter.check.issue_class import has_duplicates
from gather_scatter.check.runner import CheckCase, same
from gather_scatter.cli import main
from gather_scatter.conformance import build_suite, export_tests, tags_of
from gather_scatter.conformance.suite import ERROR_KINDS
from gather_scatter.conformance.tags import COVERAGE_TAGS, applicable_tags, reduction_of
from gather_scatter.rules.versions import REGISTRY


@pytest.fixture(scope="module")
def suite(default_suite):
    return default_suite  # conftest.py's: written once for this module and tests/test_hosted_suite.py


def _tensor(path: Path) -> np.ndarray:
    """The .pb file's array, a writable copy: onnx's to_array gives read-only arrays, and numba compiles each
    loop once more for read-only inputs; that second set (~3 minutes of compiling in CI's fresh process) tests
    nothing about the files. Read-only inputs have their own tests (test_hostile_inputs.py, test_fast_path.py)."""
    return np.array(numpy_helper.to_array(onnx.load_tensor(str(path))))


def _feeds(folder: Path, model: onnx.ModelProto) -> dict[str, np.ndarray]:
    data_set = folder / "test_data_set_0"
    return {i.name: _tensor(data_set / f"input_{k}.pb") for k, i in enumerate(model.graph.input)}


def _node_inputs(folder: Path, model: onnx.ModelProto) -> list[np.ndarray]:
    """The node's inputs in node order: graph inputs from their .pb files, initializers from the model."""
    values = {**_feeds(folder, model), **{t.name: np.array(numpy_helper.to_array(t)) for t in model.graph.initializer}}
    return [values[n] for n in model.graph.node[0].input]


def _attrs(model: onnx.ModelProto) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in model.graph.node[0].attribute}


def _spec(entry: dict):
    return REGISTRY[(entry["domain"], entry["op"], entry["version"])]


def test_counts_every_version_and_the_manifest_match_the_folders(suite):
    folder, manifest = suite
    counts = manifest["counts"]
    assert counts["valid"] >= 3000 and counts["invalid"] >= 300
    assert set(counts["by_op"]) == {v.name for v in REGISTRY.values()}
    assert all(row["valid"] >= 150 and row["invalid"] >= 12 for row in counts["by_op"].values())
    valid = sorted(p.name for p in (folder / "indexing").iterdir())
    invalid = sorted(p.name for p in (folder / "indexing_invalid").iterdir())
    assert len(valid) == counts["valid"] and len(invalid) == counts["invalid"]
    entries = manifest["cases"]
    assert sorted(e["name"] for e in entries if e["valid"]) == valid
    assert sorted(e["name"] for e in entries if not e["valid"]) == invalid
    assert len({e["name"] for e in entries}) == len(entries)
    assert Counter(t for e in entries for t in e["tags"]) == counts["by_tag"]
    for name, row in counts["by_op"].items():
        mine = [e for e in entries if _spec(e).name == name]
        assert row == {"valid": sum(e["valid"] for e in mine), "invalid": sum(not e["valid"] for e in mine)}
    on_disk = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    assert manifest["size_bytes"] == on_disk < 8_000_000
    assert json.loads((folder / "MANIFEST.json").read_text()) == manifest
    assert manifest["seed"] == 0 and manifest["format"] == 1 and manifest["generator"].startswith("gather_scatter ")
    # data.json exactly where the manifest gives a tolerance: float add/mul with meeting updates, and complex mul
    for e in entries:
        has = (folder / e["path"] / "data.json").exists()
        assert has == ("rtol" in e), e["name"]
        if has:
            complex_mul = "complex" in e["tags"] and "reduction_mul" in e["tags"]
            assert complex_mul or (
                e["attributes"].get("reduction") in ("add", "mul") and "duplicates_with_reduction" in e["tags"]
            )


def test_every_valid_case_loads_through_onnx_and_runs_to_its_output(suite):
    folder, manifest = suite
    tests = load_model_tests(str(folder), kind="indexing")
    by_name = {e["name"]: e for e in manifest["cases"]}
    assert len(tests) == manifest["counts"]["valid"]
    wrong = []
    for test in tests:
        entry = by_name[test.name]
        case_dir = Path(test.model_dir)
        model = onnx.load(str(case_dir / "model.onnx"))
        feeds = _feeds(case_dir, model)
        expected = _tensor(case_dir / "test_data_set_0" / "output_0.pb")
        assert [n["dtype"] for n in entry["inputs"] if not n.get("initializer")] == [
            C.onnx_name(a.dtype) for a in feeds.values()
        ]
        assert list(expected.shape) == entry["output"]["shape"]
        with np.errstate(all="ignore"):
            (got,) = gather_scatter.run_model(model, feeds).values()
        diff = same(got, expected)
        if diff and "rtol" in entry:
            assert (test.rtol, test.atol) == (entry["rtol"], entry["atol"])  # onnx's loader read data.json
            kind = np.complex128 if expected.dtype.kind == "c" else np.float64
            close = np.allclose(got.astype(kind), expected.astype(kind), entry["rtol"], entry["atol"], equal_nan=True)
            diff = None if close else diff
        if diff:
            wrong.append(f"{test.name}: {diff}")
        spec = _spec(entry)
        if reduction_of(spec, _attrs(model)) == "none":  # the spec leaves meeting updates undefined: none here
            inputs = _node_inputs(case_dir, model)
            check = CheckCase(spec, spec.since_version, C.Case(spec.op_type, inputs, _attrs(model)), "valid")
            assert not has_duplicates(check), test.name
    assert not wrong, wrong[:10]


# onnx.reference (onnx 1.23) where it cannot run a case, or gives another answer than the spec's loop
REFERENCE_GAPS = {
    "com.microsoft": "onnx.reference has no com.microsoft operators (GatherND-1, GatherBlockQuantized-1)",
    "Scatter-9": "onnx.reference has no Scatter (deprecated at opset 11): 'No registered implementation'",
    "GatherElements smaller indices": (
        "onnx.reference's GatherElements requires indices.shape == data.shape off the axis ('all dimensions of "
        "index and self should be the same size'); the spec's text and onnxruntime allow smaller"
    ),
    "GatherElements axis -1": (
        "onnx.reference's GatherElements with axis=-1 compares index.shape[:-1] + index.shape[0:] (dim + 1 = 0) "
        "with data's: 'all dimensions of index and self should be the same size'"
    ),
    "GatherND batch_dims empty": (
        "onnx.reference's GatherND with batch_dims >= 1 and no index tuple fails reshaping an empty array"
    ),
    "ScatterElements NaN max/min": (
        "onnx.reference's ScatterElements-18 max/min drops a NaN (data or update) where the loop's max/min keeps it "
        "(its ScatterND-18 keeps it)"
    ),
    "ScatterND string max/min": "onnx.reference's ScatterND-18 max/min refuses strings (TypeError)",
    "ScatterElements signed zero tie": (
        "onnx.reference's ScatterElements-18 max/min is Python's max/min, which keeps the output's zero where 0.0 "
        "ties -0.0; the suite's rule (numpy.maximum, its ScatterND-18's) takes the update's for float, double, bfloat16"
    ),
}


def _reference_gap(entry: dict) -> str | None:
    spec, tags, attrs = _spec(entry), entry["tags"], entry["attributes"]
    if spec.domain:
        return "com.microsoft"
    if spec.name == "Scatter-9":
        return "Scatter-9"
    if spec.op_type == "GatherElements":
        data, indices = entry["inputs"][0]["shape"], entry["inputs"][1]["shape"]
        if attrs.get("axis", 0) == -1:
            return "GatherElements axis -1"
        axis = attrs.get("axis", 0) % len(data)
        if any(i != d for k, (i, d) in enumerate(zip(indices, data, strict=True)) if k != axis):
            return "GatherElements smaller indices"
    if spec.op_type == "GatherND" and attrs.get("batch_dims", 0) and "empty_indices" in tags:
        return "GatherND batch_dims empty"
    if spec.op_type == "ScatterElements" and "nan" in tags and attrs.get("reduction") in ("max", "min"):
        return "ScatterElements NaN max/min"
    if spec.op_type == "ScatterND" and "string" in tags and attrs.get("reduction") in ("max", "min"):
        return "ScatterND string max/min"
    if spec.op_type == "ScatterElements" and "signed_zero_tie" in tags:
        return "ScatterElements signed zero tie"
    return None


def test_a_sample_agrees_with_onnx_reference_where_it_has_the_operator(suite):
    from onnx.reference import ReferenceEvaluator

    folder, manifest = suite
    rng = np.random.default_rng(10)
    entries = [e for e in manifest["cases"] if e["valid"]]
    sample = [entries[i] for i in sorted(rng.choice(len(entries), size=len(entries) // 10, replace=False))]
    gaps, ran, wrong = Counter(), 0, []
    for entry in sample:
        gap = _reference_gap(entry)
        if gap:
            gaps[gap] += 1
            continue
        case_dir = folder / entry["path"]
        model = onnx.load(str(case_dir / "model.onnx"))
        expected = _tensor(case_dir / "test_data_set_0" / "output_0.pb")
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            (got,) = ReferenceEvaluator(model).run(None, _feeds(case_dir, model))
        diff = same(got, expected)
        if diff and "rtol" in entry:
            close = np.allclose(
                np.asarray(got, np.complex128),
                expected.astype(np.complex128),
                entry["rtol"],
                entry["atol"],
                equal_nan=True,
            )
            diff = None if close else diff
        ran += 1
        if diff:
            wrong.append(f"{entry['name']}: {diff}")
    assert not wrong, wrong[:10]
    assert ran >= 250 and set(gaps) <= set(REFERENCE_GAPS)


def test_each_invalid_case_raises_its_declared_error_through_run_node(suite):
    folder, manifest = suite
    classes = {cls.__name__: cls for cls in ERROR_KINDS}
    kinds = Counter()
    for entry in (e for e in manifest["cases"] if not e["valid"]):
        case_dir = folder / entry["path"]
        declared = json.loads((case_dir / "error.json").read_text(encoding="utf-8"))
        assert declared["kind"] == ERROR_KINDS[classes[declared["error"]]] == entry["error"]["kind"]
        assert declared["spec"] and declared["spec_file"] and declared["message"], entry["name"]
        assert not (case_dir / "test_data_set_0" / "output_0.pb").exists()
        model = onnx.load(str(case_dir / "model.onnx"))
        spec = _spec(entry)
        with pytest.raises(classes[declared["error"]]) as raised:
            gather_scatter.run_node(
                spec.op_type, _node_inputs(case_dir, model), _attrs(model), opset=entry["opset"], domain=spec.domain
            )
        assert str(raised.value) == declared["message"]
        kinds[declared["kind"]] += 1
    assert set(kinds) == {"bounds", "shape", "type", "attribute", "arity"}


def test_every_tag_appears_for_every_version_that_can_carry_it(suite):
    _, manifest = suite
    assert set(COVERAGE_TAGS) <= set(manifest["counts"]["by_tag"])
    for spec in REGISTRY.values():
        mine = {t for e in manifest["cases"] if e["valid"] and _spec(e) is spec for t in e["tags"]}
        assert applicable_tags(spec) <= mine, (spec.name, sorted(applicable_tags(spec) - mine))
        types = {e["inputs"][0]["dtype"] for e in manifest["cases"] if e["valid"] and _spec(e) is spec}
        index_types = {
            e["inputs"][1]["dtype"]
            for e in manifest["cases"]
            if e["valid"] and _spec(e) is spec and e["op"] != "TensorScatter"
        }
        reductions = [r for r in spec.reductions if r != "none"] if "reduction" in spec.attributes else []
        for r in reductions:  # duplicates under every reduction, on float16 and bfloat16 too
            with_r = [set(e["tags"]) for e in manifest["cases"] if e["valid"] and _spec(e) is spec]
            with_r = [t for t in with_r if f"reduction_{r}" in t and "duplicates_with_reduction" in t]
            for needed in ("float16", "bfloat16", "float", "double", "int32", "bool"):
                assert any(needed in t for t in with_r), (spec.name, r, needed)
        if spec.op_type != "GatherBlockQuantized":  # its data types are T1: every one is in the suite too
            assert types == set(spec.data_types), spec.name
            if spec.op_type != "TensorScatter":
                assert index_types == set(spec.index_types), spec.name


def test_tags_are_read_from_the_arrays():
    spec = REGISTRY[("", "ScatterND", 18)]
    data = np.array([1.0, np.nan, -0.0, 3.0], np.float16)
    indices = np.array([[1], [-3], [2]], np.int64)  # 1 and -3 name the same element
    case = C.Case("ScatterND", [data, indices, np.array([2, 5, 7], np.float16)], {"reduction": "max"})
    assert {
        "duplicates_with_reduction",
        "nan_max_min",
        "float16_reduction",
        "negative_indices",
        "nan",
        "negative_zero",
        "reduction_max",
        "float16",
        "int64_indices",
    } == set(tags_of(spec, case))
    case = C.Case("ScatterND", [data, np.array([[0], [2]], np.int64), np.array([2, 5], np.float16)], {})
    assert set(tags_of(spec, case)) == {"float16", "int64_indices", "nan", "negative_zero", "reduction_none"}
    ts = REGISTRY[("", "TensorScatter", 24)]
    past, update = np.zeros((2, 3, 1), np.float32), np.ones((2, 1, 1), np.float32)
    wrap = C.Case("TensorScatter", [past, update, np.array([3, 0], np.int64)], {"mode": "circular"})
    assert "circular_wrap_batch_ge_max_seq" in tags_of(ts, wrap)
    assert "circular_wrap_batch_ge_max_seq" not in tags_of(
        ts, C.Case("TensorScatter", [past, update, np.array([2, 0])], {"mode": "circular"})
    )


def test_the_same_seed_writes_the_same_bytes_and_a_version_is_the_same_whatever_else_is_selected(suite, tmp_path):
    folder, _ = suite
    ops = ["ScatterND-18", "TensorScatter", "com.microsoft.GatherBlockQuantized"]
    first, second = tmp_path / "a", tmp_path / "b"
    one = export_tests(first, ops=ops)
    export_tests(second, ops=ops)

    def files(root):
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    a, b = files(first), files(second)
    assert a == b
    assert {e["name"] for e in one["cases"]} and all(
        e["op"] in ("ScatterND", "TensorScatter", "GatherBlockQuantized") for e in one["cases"]
    )
    whole = files(folder)
    assert all(whole[k] == v for k, v in a.items() if k != "MANIFEST.json")
    other = build_suite(seed=1, ops=["ScatterND-18"], cases_per_version=5)
    assert [c.name for c in other] != [e["name"] for e in one["cases"] if e["version"] == 18][: len(other)]


def test_the_command_selects_refuses_and_replaces(tmp_path, capsys):
    target = tmp_path / "suite"
    assert main(["export-tests", str(target), "--op", "com.microsoft.GatherND", "--cases-per-version", "4"]) == 0
    out = capsys.readouterr().out
    assert "com.microsoft.GatherND-1" in out and "MANIFEST.json" in out and "MB" in out
    names = os.listdir(target / "indexing")
    assert names and all(n.startswith("test_com_microsoft_gathernd_1_") for n in names)
    # a previous suite is replaced whole
    assert main(["export-tests", str(target), "--op", "GatherND-12", "--cases-per-version", "2"]) == 0
    names = os.listdir(target / "indexing") + os.listdir(target / "indexing_invalid")
    assert names and all(n.startswith("test_gathernd_12_") for n in names)
    capsys.readouterr()
    # an unknown name: the nearest one suggested
    with pytest.raises(SystemExit) as exited:
        main(["export-tests", str(target), "--op", "ScatterNd-16"])
    assert exited.value.code == 2 and "did you mean 'ScatterND-16'" in capsys.readouterr().err
    # a folder that holds something else is refused, untouched
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert main(["export-tests", str(other), "--op", "Gather-1"]) == 2
    assert "not a suite written by export-tests" in capsys.readouterr().err
    assert os.listdir(other) == ["notes.txt"]
    # a suite with a stranger beside it is not ours to delete either
    (target / "notes.txt").write_text("mine")
    assert main(["export-tests", str(target), "--op", "Gather-1"]) == 2
    assert (target / "notes.txt").exists() and os.listdir(target / "indexing")[0].startswith("test_gathernd_12_")


def test_a_seed_below_zero_or_not_an_integer_is_refused_before_anything_is_written(tmp_path, capsys):
    """NumPy's generators take seeds >= 0 only: a usage error, not NumPy's traceback (issue 36)."""
    from gather_scatter.conformance import SuiteSelectionError

    target = tmp_path / "suite"
    for seed in (-1, -5, 1.5, "3", True, None):
        with pytest.raises(SuiteSelectionError, match=r"seed must be an integer >= 0, got "):
            export_tests(target, seed=seed, ops=["Gather-1"], cases_per_version=1)
        with pytest.raises(ValueError, match=r"seed must be an integer >= 0, got " + re.escape(repr(seed))):
            build_suite(seed=seed, ops=["Gather-1"], cases_per_version=1)
    assert not target.exists()
    with pytest.raises(SystemExit) as exited:
        main(["export-tests", str(target), "--seed", "-5", "--op", "Gather-1"])
    assert exited.value.code == 2
    assert "error: argument --seed: -5 is not >= 0" in capsys.readouterr().err and not target.exists()
    # any integer type >= 0 is taken, and the manifest holds it as a JSON int
    manifest = export_tests(target, seed=np.int64(3), ops=["Gather-1"], cases_per_version=1)
    assert manifest["seed"] == 3 and json.loads((target / "MANIFEST.json").read_text())["seed"] == 3


def test_every_type_round_trips_through_the_files(suite):
    """Strings, bfloat16, float8, int4/uint4 and float4 read back from the .pb files bit for bit."""
    folder, _ = suite
    for suite_case in build_suite(ops=["TensorScatter", "com.microsoft.GatherBlockQuantized"]):
        if not suite_case.valid:
            continue
        case_dir = folder / "indexing" / suite_case.name
        model = onnx.load(str(case_dir / "model.onnx"))
        for ours, read in zip(suite_case.case.inputs, _node_inputs(case_dir, model), strict=True):
            assert same(read, ours) is None, suite_case.name
        assert same(_tensor(case_dir / "test_data_set_0" / "output_0.pb"), suite_case.result) is None


DOCS = Path(__file__).resolve().parents[1] / "docs" / "conformance.md"


def test_the_docs_say_what_the_default_suite_holds(suite):
    """docs/conformance.md's counts and tag table are the default export's."""
    _, manifest = suite
    page = DOCS.read_text(encoding="utf-8")
    counts = manifest["counts"]
    assert (
        f"**{counts['valid']:,} valid and {counts['invalid']:,} invalid cases, {manifest['size_bytes'] / 1e6:.1f} MB**"
        in page
    )
    table = page.split("<!-- tags:start -->")[1].split("<!-- tags:end -->")[0]
    rows = {
        line.split("|")[1].strip(" `"): int(line.split("|")[3]) for line in table.splitlines() if line.startswith("| `")
    }
    assert set(COVERAGE_TAGS) <= set(rows)
    assert rows == {tag: counts["by_tag"].get(tag, 0) for tag in rows}
    readme = " ".join((DOCS.parents[1] / "README.md").read_text(encoding="utf-8").split())
    assert f"{counts['valid']:,} valid and {counts['invalid']:,} invalid cases at the default seed" in readme
    assert f"{manifest['size_bytes'] / 1e6:.1f} MB" in readme


def test_the_docs_pytest_harness_runs_as_written(suite, monkeypatch):
    """The page's harness, with run() set to our run_model, passes a sample of valid cases and every invalid one."""
    from doc_examples import python_block

    folder, manifest = suite
    monkeypatch.setenv("INDEXING_SUITE", str(folder))
    namespace: dict = {}
    exec(compile(python_block(DOCS, "test_indexing_suite.py"), str(DOCS), "exec"), namespace)
    namespace["run"] = lambda path, feeds: list(  # writable copies, as _tensor's
        gather_scatter.run_model(str(path), {k: np.array(v) for k, v in feeds.items()}).values()
    )
    cases = namespace["CASES"]
    assert len(cases) == len(manifest["cases"])
    for case in [c for c in cases if not c["valid"]] + [c for c in cases if c["valid"]][::10]:
        with np.errstate(all="ignore"):
            namespace["test_case"](case)
    monkeypatch.setenv("INDEXING_SUITE_SKIP_TAGS", "nan_max_min,string")
    skipping: dict = {}
    exec(compile(python_block(DOCS, "test_indexing_suite.py"), str(DOCS), "exec"), skipping)
    kept = [c["name"] for c in manifest["cases"] if not {"nan_max_min", "string"} & set(c["tags"])]
    assert [c["name"] for c in skipping["CASES"]] == kept and len(kept) < len(cases)
    # and it fails a wrong answer: an output off by one bit, a refused case accepted
    case = next(
        c
        for c in cases
        if c["valid"]
        and c["output"]["dtype"] == "float"
        and not c.get("rtol")
        and c["output"]["shape"]
        and all(c["output"]["shape"])
    )

    def off_by_one_bit(path, feeds):
        (out,) = gather_scatter.run_model(str(path), feeds).values()
        out = out.copy()
        out.reshape(-1).view(np.uint32)[0] ^= 1
        return [out]

    namespace["run"] = off_by_one_bit
    with pytest.raises(AssertionError):
        namespace["test_case"](case)
    namespace["run"] = lambda path, feeds: [np.zeros(1)]
    with pytest.raises(pytest.fail.Exception):
        namespace["test_case"](next(c for c in cases if not c["valid"]))


def test_models_are_well_formed_where_the_fault_is_in_the_values(suite):
    """onnx.checker with shape inference accepts every valid ai.onnx model and every one whose index is out of bounds.

    An engine then refuses a bounds case for its index, at run time, not for a malformed model.
    (onnx's checker has no com.microsoft schemas.)
    """
    folder, manifest = suite
    checked = 0
    for entry in manifest["cases"]:
        if entry["domain"] or not (entry["valid"] or entry["error"]["kind"] == "bounds"):
            continue
        onnx.checker.check_model(onnx.load(str(folder / entry["path"] / "model.onnx")), full_check=True)
        checked += 1
    assert checked > 3000
