"""``benchmarks/check_engines.py``, the README's findings table: a smoke run on the fast engines
(onnx.reference, onnxruntime where installed) with two cases per version of two families, and an
engine that does not exist, listed with its reason."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import re
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "check_engines.py"
KINDS = ("wrong_output", "accepted_invalid", "rejected_valid", "crash", "timeout", "unsupported", "agree")


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    engines = ["onnx-reference"] + (["onnxruntime"] if importlib.util.find_spec("onnxruntime") else [])
    where = tmp_path_factory.mktemp("check-engines")
    args = [arg for e in [*engines, "no-such-engine"] for arg in ("--engine", e)]
    done = subprocess.run([sys.executable, str(SCRIPT), *args, "--family", "Gather", "--family", "ScatterND",
                           "--seed", "0", "--cases", "2", "--json", "raw.json"],
                          capture_output=True, text=True, timeout=120, cwd=where)
    assert done.returncode == 0, done.stderr
    return engines, done.stdout, json.loads((where / "raw.json").read_text())


def _rows(text: str, header: str) -> list[list[str]]:
    """The Markdown table whose header row starts with ``header``: its rows, cells stripped."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    assert all(set(c) <= set("-: ") for c in rows[1]), rows[1]  # the separator row
    return [rows[0], *rows[2:]]


def test_the_table_has_a_row_per_engine_with_its_version_counts_and_time(table):
    engines, text, raw = table
    header, *rows = _rows(text, "| engine | version |")
    assert header == ["engine", "version", "cases", *KINDS, "time"]
    assert [r[0] for r in rows] == engines
    results = {e["engine"]: e for e in raw["engines"]}
    for row in rows:
        result = results[row[0]]
        assert row[1] == result["version"] and re.fullmatch(r"\d[\w.+ ()-]*", row[1])
        counts = [int(c) for c in row[2:-1]]
        assert counts[0] == sum(counts[1:]) == sum(f["report"]["cases"] for f in result["families"]) >= 2 * 2
        for i, kind in enumerate(KINDS):
            assert counts[1 + i] == sum(f["report"]["summary"][kind] for f in result["families"])
        assert re.fullmatch(r"\d+ s", row[-1])
    assert text.startswith("`python benchmarks/check_engines.py --engine=onnx-reference")
    assert "seed 0, 2 cases per operator version" in text.splitlines()[0]


def test_the_grid_has_a_cell_per_engine_and_family(table):
    engines, text, _ = table
    header, *rows = _rows(text, "| engine | Gather |")
    assert header == ["engine", "Gather", "ScatterND"]
    assert [r[0] for r in rows] == engines
    for row in rows:
        for cell in row[1:]:
            assert re.fullmatch(r"(0|([WARCT]\d+ ?)+)( · u\d+)? · ok\d+", cell), cell
    reference = rows[0]
    assert reference[1] == "0 · ok6"  # onnx.reference gets the six Gather cases right


def test_an_engine_that_cannot_run_is_listed_with_the_reason(table):
    _, text, raw = table
    assert "Not run:" in text
    assert re.search(r"^- no-such-engine: unknown engine 'no-such-engine' \(engines: .*reference", text, re.M)
    missing = next(e for e in raw["engines"] if e["engine"] == "no-such-engine")
    assert missing["status"].startswith("unknown engine") and missing["families"] == []


def test_the_json_holds_each_runs_checker_report(table):
    engines, _, raw = table
    assert (raw["seed"], raw["cases"], raw["families"]) == (0, 2, ["Gather", "ScatterND"])
    for result in raw["engines"][:len(engines)]:
        assert result["status"] == "ok" and result["seconds"] > 0
        assert [f["family"] for f in result["families"]] == ["Gather", "ScatterND"]
        for family in result["families"]:
            report = family["report"]
            assert family["returncode"] == (1 if report["findings"] else 0)
            assert report["engine"] == result["engine"] and report["engine_version"] == result["version"]
            assert sum(report["summary"].values()) == report["cases"] == report["planned"]
            assert {f["op"] for f in report["findings"]} <= {family["family"]}
