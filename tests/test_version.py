"""One version everywhere: pyproject.toml, the installed metadata, ``__version__``, the CLI and CHANGELOG.md.

The wheel-content rule is tested here on a wheel built without isolation from a copy of the source
tree (caches included, so the packaging config must leave them out); scripts/check_release.py does
the full check (``python -m build``, both artifacts installed in fresh venvs, smoke tests).
"""

import importlib.metadata
import importlib.util
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import gather_scatter
from gather_scatter.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _release_script():
    spec = importlib.util.spec_from_file_location("check_release", ROOT / "scripts" / "check_release.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _latest_changelog_release() -> str:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[(\d[^\]]*)\] - (\d{4}-\d{2}-\d{2})$", text, re.M)
    assert releases, "CHANGELOG.md has no '## [X.Y.Z] - YYYY-MM-DD' heading"
    return releases[0][0]


def test_one_version_everywhere(capsys):
    declared = _release_script().project_version()
    assert importlib.metadata.version("gather_scatter") == declared, "reinstall: pip install -e ."
    assert gather_scatter.__version__ == declared
    assert _latest_changelog_release() == declared
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out == f"gather-scatter {declared}\n"


def test_changelog_format():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert headings[0] == "Unreleased" and headings[1:] == ["0.3.0", "0.2.0", "0.1.0"]
    for section in re.split(r"^## ", text, flags=re.M)[2:]:  # each release: only Keep a Changelog's groups
        groups = re.findall(r"^### (.+)$", section, re.M)
        assert groups and set(groups) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}, groups


def test_version_without_metadata(monkeypatch):
    # A source tree on sys.path that was never installed has no distribution metadata.
    assert gather_scatter.__version__  # cached now, so monkeypatch puts it back afterwards
    monkeypatch.delitem(vars(gather_scatter), "__version__")

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert gather_scatter.__version__ == "0+unknown"
    assert "__version__" in dir(gather_scatter)


def test_wheel_problems_rule():
    rule = _release_script().wheel_problems
    good = ["gather_scatter/__init__.py", "gather_scatter/py.typed", "gather_scatter/cli/__init__.py",
            "gather_scatter/data/decoder_step.onnx", "gather_scatter/data/decoder_step_inputs.npz",
            "gather_scatter-1.0.dist-info/METADATA", "gather_scatter-1.0.dist-info/entry_points.txt"]
    assert rule(good, "1.0") == []
    bad = good + ["gather_scatter/__pycache__/ops.cpython-311.pyc", "tests/test_cli.py", "benchmarks/results.json",
                  "docs/perf/sizes.png", "gather_scatter/kernels/test_loops.py"]
    problems = rule(bad, "1.0")
    for name in bad[len(good):]:
        assert any(p.startswith(name + ":") for p in problems), (name, problems)
    assert rule(good[1:], "1.0") == ["gather_scatter/__init__.py: missing"]


def _setuptools_major() -> int:
    """The installed setuptools' major version (0: not installed), from its metadata."""
    try:
        return int(re.match(r"\d+", importlib.metadata.version("setuptools")).group())  # type: ignore[union-attr]
    except importlib.metadata.PackageNotFoundError:
        return 0


# The build without isolation uses the installed setuptools: it must meet pyproject's
# build-system requirement (a new venv of Python 3.11 brings setuptools 65, which cannot read
# the SPDX `license` string). scripts/check_release.py builds with isolation either way.
BUILD_SETUPTOOLS = int(re.search(r'"setuptools>=(\d+)', (ROOT / "pyproject.toml").read_text()).group(1))


@pytest.mark.skipif(_setuptools_major() < BUILD_SETUPTOOLS,
                    reason=f"building without isolation needs setuptools>={BUILD_SETUPTOOLS} (pyproject's "
                           "build-system); scripts/check_release.py builds with isolation")
def test_wheel_contents(tmp_path):
    # The source tree as a developer has it (__pycache__ included), built offline without isolation.
    source = tmp_path / "src-tree"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "MANIFEST.in", "CHANGELOG.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("*.egg-info"))
    (source / "src" / "gather_scatter" / "__pycache__").mkdir(exist_ok=True)
    (source / "src" / "gather_scatter" / "__pycache__" / "stale.cpython-311.pyc").write_bytes(b"")
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                             "-q", "-w", tmp_path / "dist", source], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    script = _release_script()
    assert script.wheel_problems(names, script.project_version()) == []
