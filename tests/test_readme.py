"""The README is a front page: short, its set-up commands and tour run as they say, its links resolve.

Everything else the README used to hold lives in the documentation pages (``docs/``), whose
examples ``tests/test_docs_examples.py`` runs.
"""

from __future__ import annotations

import importlib.metadata
import json
import pathlib
import re
import shlex
import subprocess
import sys

import numpy as np
import pytest
from doc_examples import python_block, run_with_claims

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """The anchor GitHub and MkDocs give a heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: pathlib.Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)  # not in code blocks
    return {_slug(m) for m in re.findall(r"^#{1,6} (.+?)\s*$", text, flags=re.M)}


def test_readme_is_a_front_page():
    # issue 26 item 15: a newcomer reads it in two minutes; the rest lives in docs/
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move sections into docs/"


def test_readme_says_the_two_set_up_commands():
    # .ci/run runs exactly these lines in a brand-new virtual environment
    lines = README.read_text(encoding="utf-8").splitlines()
    assert 'pip install -e ".[test]" && gather-scatter run' in lines
    assert "python -m pytest" in lines


def test_readme_links_resolve():
    for target in LINK.findall(README.read_text(encoding="utf-8")):
        if target.startswith(("http:", "https:", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        page = ROOT / path
        assert page.is_file(), f"README links to {target}, which does not exist"
        if anchor:
            assert anchor in _anchors(page), f"README links to {target}: {path} has no such heading"


def test_readme_and_checker_page_name_every_built_in_engine():
    # issue 26 item 14: they named four engines where eight are built in; issue 36: and our own two
    built_in = {ep.name for ep in importlib.metadata.entry_points(group="gather_scatter.engines")
                if ep.value.startswith("gather_scatter.check.engines.")}
    ours = {"gather_scatter", "gather_scatter-hosted"}
    others = built_in - ours
    assert ours <= built_in and len(others) >= 8
    readme = README.read_text(encoding="utf-8").lower()
    names = {"onnx-reference": "onnx.reference", "onnxruntime": "onnxruntime"}
    assert all(names.get(name, name) in readme for name in others), others
    assert all(f"`{name}`" in readme for name in ours)
    words = {8: "eight", 9: "nine", 10: "ten"}
    assert f"{words[len(others)]} other engines" in readme
    checker = (ROOT / "docs" / "checker.md").read_text(encoding="utf-8")
    table = set(re.findall(r"^\| `(\w[\w-]*)` \|", checker, flags=re.M))  # onnx-reference, not `--engine`
    assert table == built_in
    assert not re.search(r"\bfour\b", checker), "docs/checker.md still counts four engines"


def test_readme_kernel_tour_runs_as_it_says():
    assert run_with_claims(python_block(README, "gs.gather(")) == 4


def test_readme_session_tour_runs_as_it_says():
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed (pip install 'gather_scatter[onnxruntime]')")
    scope: dict = {}
    exec(python_block(README, "gs.Session("), scope)
    exact, fast = scope["exact"], scope["fast"]
    assert exact.dtype == np.float32 and exact.shape == (64, 8)
    assert fast.tobytes() == exact.tobytes()  # onnxruntime alone loses updates on two threads
    segment, rows = scope["feeds"]["segment"][:, 0], scope["feeds"]["rows"]
    sums = np.zeros((64, 8), np.float64)
    np.add.at(sums, segment, rows)
    assert np.allclose(exact, np.maximum(sums, 0), rtol=1e-4, atol=1e-3)
    assert scope["routed"] == ["pool"]


def test_readme_check_commands_run(tmp_path):
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed (pip install 'gather_scatter[onnxruntime]')")
    text = README.read_text(encoding="utf-8")
    commands = [line.split("#", 1)[0].strip() for block in text.split("```bash\n")[1:]
                for line in block.split("```", 1)[0].splitlines() if line.startswith("gather-scatter check")]
    # the model-mode line names the user's model; exporter mode (minutes) is tested in test_check_exporter.py
    runnable = [c for c in commands if "model.onnx" not in c and "--exporter" not in c]
    assert len(runnable) == 2
    for command in runnable:
        argv = [sys.executable, "-m", "gather_scatter", *shlex.split(command)[1:]]
        result = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert result.returncode in (0, 1), (command, result.stdout, result.stderr)  # 1: findings
    listed = subprocess.run([sys.executable, "-m", "gather_scatter", "check", "--list-engines"],
                            capture_output=True, text=True, timeout=300).stdout
    assert {"onnxruntime", "onnx-reference", "gather_scatter", "gather_scatter-hosted"} <= {
        line.split()[0] for line in listed.splitlines() if line.strip()}
    assert (tmp_path / "report.json").is_file()


def test_readme_suite_commands_run(tmp_path):
    """The README's export-tests and run-tests lines run as written, the export on one version.

    (The default export, whose counts the README gives, is tests/test_conformance_export.py's.)
    """
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed (pip install 'gather_scatter[onnxruntime]')")
    text = README.read_text(encoding="utf-8")
    commands = [shlex.split(line.split("#", 1)[0]) for block in text.split("```bash\n")[1:]
                for line in block.split("```", 1)[0].splitlines()
                if line.startswith(("gather-scatter export-tests", "gather-scatter run-tests"))]
    assert [c[1] for c in commands] == ["export-tests", "run-tests"]
    commands[0] += ["--op", "Gather-13"]  # the whole default suite is exported and checked elsewhere
    results = [subprocess.run([sys.executable, "-m", "gather_scatter", *c[1:]], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300) for c in commands]
    assert results[0].returncode == 0, results[0].stderr
    manifest = json.loads((tmp_path / "indexing_suite" / "MANIFEST.json").read_text(encoding="utf-8"))
    assert results[1].returncode == 1, results[1].stderr  # onnxruntime fails some cases (docs/conformance.md)
    outcomes = json.loads((tmp_path / "outcomes.json").read_text(encoding="utf-8"))
    assert outcomes["engine"] == "onnxruntime" and outcomes["tests"] == len(manifest["cases"]) > 100
    by_name = {row["name"]: row["outcome"] for row in outcomes["results"]}
    assert set(by_name) == {c["name"] for c in manifest["cases"]}
    assert sum(o == "pass" for o in by_name.values()) > 0.8 * len(by_name)  # most pass; strings on axis 0 do not:
    assert any(o == "fail" and "_string_" in n for n, o in by_name.items())
