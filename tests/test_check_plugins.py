"""``gather-scatter check --engine theirs``: an engine from an out-of-tree plugin package.

The test builds two tiny distributions in a temporary folder (a ``pyproject.toml`` with entry
points in the group ``gather_scatter.engines`` and one module), pip-installs them into this
interpreter's environment, runs the command line as a user would (a subprocess), and uninstalls
them. The plugin of docs/checker.md, copied from it: ``theirs`` (onnx.reference). The test's own:
``flipped`` (onnx.reference with the first element of every output off by one: a defect the
checker must find), and one engine per way a plugin can be broken.
"""

from __future__ import annotations

import importlib.metadata
import json
import pathlib
import subprocess
import sys

import onnx
import pytest

DIST = "gather-scatter-test-engines"
CHECKER_PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "checker.md"

PYPROJECT = f"""\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "{DIST}"
version = "0.1"

[tool.setuptools]
py-modules = ["gs_test_engines", "gs_test_broken"]

[project.entry-points."gather_scatter.engines"]
flipped = "gs_test_engines:Flipped"
raising = "gs_test_engines:Raising"
no-run = "gs_test_engines:NoRun"
misnamed = "gs_test_engines:Flipped"
broken-import = "gs_test_broken"
"""

ENGINES = '''\
import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator


class Flipped:
    name = "flipped"
    unsupported = ("is unknown, known functions",)

    def version(self):
        return "1.0"

    def run(self, model, feeds, options):
        outputs = ReferenceEvaluator(onnx.load_from_string(model)).run(None, feeds)
        y = np.array(outputs[0])
        if y.size and y.dtype.kind in "biufcV":
            y.flat[0] = (not y.flat[0]) if y.dtype == bool else y.flat[0] + 1
        return [y]


class Raising(Flipped):
    name = "raising"

    def run(self, model, feeds, options):
        raise RuntimeError("plugin bug: no session")


class NoRun:
    name = "no-run"

    def version(self):
        return "0"
'''


def _readme_block(language: str, marker: str) -> str:
    """The checker page's code block in ``language`` that contains ``marker``."""
    blocks = CHECKER_PAGE.read_text().split(f"```{language}\n")[1:]
    return next(b.split("```", 1)[0] for b in blocks if marker in b)


def _pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def plugins(tmp_path_factory):
    """The test distribution, installed for the module's tests and uninstalled after them."""
    # Asked of the installed metadata, never importlib.util.find_spec("pip"): setuptools'
    # distutils hack takes a lookup of pip for pip starting, and from then on hands this
    # process the standard library's distutils, which later breaks torch.compile's build
    # (its cpp_extension imports setuptools: "AssertionError: .../distutils/core.py").
    for dist in ("pip", "setuptools"):
        try:
            importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pytest.skip(f"installing a plugin package needs {dist}, which this environment lacks")
    theirs, ours = tmp_path_factory.mktemp("theirs-engine"), tmp_path_factory.mktemp("test-engines")
    (theirs / "pyproject.toml").write_text(_readme_block("toml", 'name = "theirs-engine"'))
    (theirs / "theirs_engine.py").write_text(_readme_block("python", 'name = "theirs"'))
    (ours / "pyproject.toml").write_text(PYPROJECT)
    (ours / "gs_test_engines.py").write_text(ENGINES)
    (ours / "gs_test_broken.py").write_text("import gs_not_a_module_anywhere\n")
    installed = _pip("install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index", str(theirs), str(ours))
    try:
        if installed.returncode:
            pytest.skip(f"pip could not install the test plugins: {installed.stderr.strip().splitlines()[-1:]}")
        yield
    finally:
        _pip("uninstall", "--quiet", "--yes", "theirs-engine", DIST)


def _check(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gather_scatter", "check", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_a_plugin_engine_runs_like_a_built_in_one(plugins, tmp_path):
    # onnx.reference through the plugin gives the built-in 'onnx-reference' engine's answers, case for case.
    args = ["--op", "Gather-13", "--op", "ScatterND-18", "--cases", "6", "--seed", "2"]
    theirs = _check("--engine", "theirs", *args, "--out", "t", "--json", "t.json", cwd=tmp_path)
    ours = _check("--engine", "onnx-reference", *args, "--out", "r", "--json", "r.json", cwd=tmp_path)
    assert theirs.returncode == ours.returncode, theirs.stderr
    result, reference = (json.loads((tmp_path / name).read_text()) for name in ("t.json", "r.json"))
    assert result["engine"] == "theirs" and result["engine_version"] == onnx.__version__
    assert result["cases"] == 12 and result["summary"] == reference["summary"]
    assert result["summary"]["agree"] > 0 and theirs.stdout.startswith(f"theirs {onnx.__version__}: 12 cases; ")


def test_a_wrong_plugin_engine_is_found_and_its_finding_reproduces(plugins, tmp_path):
    run = _check("--engine", "flipped", "--op", "Gather-13", "--cases", "6", "--out", "f", "--json", "f.json",
                 cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    result = json.loads((tmp_path / "f.json").read_text())
    wrong = [f for f in result["findings"] if f["kind"] == "wrong_output"]
    assert result["engine_version"] == "1.0" and wrong, result
    assert "elements differ" in wrong[0]["detail"]
    # Without a repro() of its own, the reproduction runs the plugin through its entry point, in-process.
    assert "run_in_process('flipped'" in wrong[0]["repro"]
    shown = subprocess.run(wrong[0]["repro"], shell=True, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout.startswith("[array("), shown.stderr


@pytest.mark.parametrize(("engine", "message"), [
    ("nope", "unknown engine 'nope' (engines: broken-import, flipped, gather_scatter, gather_scatter-hosted, "
             "jaxonnxruntime, misnamed, no-run, onnx-reference, onnx2torch, onnxruntime, "),
    ("broken-import", "engine 'broken-import' cannot be loaded: entry point 'gs_test_broken from "
                      f"{DIST} 0.1' failed: ModuleNotFoundError: No module named 'gs_not_a_module_anywhere'"),
    ("no-run", f"engine 'no-run' (gs_test_engines:NoRun from {DIST} 0.1) does not meet the engine protocol: "
               "it has no run() method"),
    ("misnamed", f"engine 'misnamed' (gs_test_engines:Flipped from {DIST} 0.1) does not meet the engine protocol: "
                 "its name is 'flipped', not 'misnamed' (the entry point's name)"),
    ("raising", "engine 'raising' is installed but cannot run: its run() raised on a one-node Gather-13 model: "
                "RuntimeError: plugin bug: no session"),
], ids=["unknown", "import-fails", "no-run", "misnamed", "run-always-raises"])
def test_a_bad_plugin_is_one_line_exit_2_and_writes_nothing(plugins, tmp_path, engine, message):
    run = _check("--engine", engine, "--op", "Gather-13", "--cases", "3", "--out", "out", "--json", "r.json",
                 cwd=tmp_path)
    assert run.returncode == 2 and run.stdout == ""
    assert len(run.stderr.splitlines()) == 1 and run.stderr.startswith(f"gather-scatter check: error: {message}"), \
        run.stderr
    assert list(tmp_path.iterdir()) == []  # no findings folder, no report


def test_list_engines_shows_every_engine_its_version_and_whether_it_runs(plugins, tmp_path):
    run = _check("--list-engines", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    rows = {line.split()[0]: line for line in lines[1:]}
    assert lines[0].split() == ["engine", "version", "source", "status"]
    assert {"onnx-reference", "theirs", "flipped", "raising", "no-run", "broken-import"} <= set(rows)
    assert rows["onnx-reference"].split()[1:] == [onnx.__version__, "gather_scatter", rows["onnx-reference"].split()[3],
                                             "can", "run"]
    assert rows["theirs"].split()[1:] == [onnx.__version__, "theirs-engine", "0.1", "can", "run"]
    assert "its run() raised on a one-node Gather-13 model" in rows["raising"]
    assert rows["no-run"].split()[1] == "-" and "it has no run() method" in rows["no-run"]


def test_the_protocol_check_in_process():
    from gather_scatter.check import engines

    assert set(engines.discover()) >= {"onnxruntime", "openvino", "onnx-reference", "tract"}
    with pytest.raises(engines.EngineMissing, match="unknown engine 'nope'"):
        engines.load("nope")
    assert engines.load("onnx-reference").name == "onnx-reference"
    assert engines._registry._check_protocol("x", type("E", (), {"name": "x", "version": lambda self: "1",
                                                                  "run": lambda self, m: []})()) == \
        "its run() does not take (model, feeds, options)"
