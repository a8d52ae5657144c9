"""The maintained-library checks, configured in pyproject.toml: ruff (lint and format) and mypy
on ``src/``. Each runs where its tool is installed (the ``lint`` extra; CI installs it) and is
skipped, with the reason, where it is not."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ruff() -> list[str]:
    if importlib.util.find_spec("ruff") is not None:
        return [sys.executable, "-m", "ruff"]
    found = shutil.which("ruff")
    if found is None:
        pytest.skip("ruff is not installed (pip install -e '.[lint]')")
    return [found]


def _run(command: list[str]) -> None:
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(command[1:])} failed:\n{done.stdout}\n{done.stderr}"


# The package, and the code that ships beside it or that users and CI run: the examples that
# regenerate tests/data, the docs build hook, the release and browser checks. (tests/ and
# benchmarks/ are not held to it yet.) numpydoc applies to the public names of src/ only.
CHECKED = ["src", "examples", "docs/hooks.py", "scripts", "conftest.py"]


def test_ruff_check():
    _run([*_ruff(), "check", *CHECKED])


def test_ruff_format():
    _run([*_ruff(), "format", "--check", *CHECKED])


def test_mypy():
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[lint]')")
    _run([sys.executable, "-m", "mypy", "src/gather_scatter"])
