"""pytest's collection rules for the whole repository.

``--doctest-modules`` imports every module under ``src/gather_scatter``; a backend module
imports its array library at the top (it is only ever imported when an input already is
one of that library's arrays), so it is left out of the doctest collection where that
library is not installed, as in a plain ``pip install -e ".[test]"``. The backend tests
themselves skip with a reason (``tests/backends.py``).
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re

import pytest

from gather_scatter.kernels import _numba

# The tests' own process takes the compiled loops on every call where numba is here, small ones
# included (_numba.EAGER): the kernels' tests mean "compiled" when they say it. By default a
# small call takes NumPy's path until its kernel's work pays for the compile; the tests of that
# rule set it back, and the tests that start a Python process run the default.
_numba.EAGER = True

# A backend module that imports an optional library at its top (backends/torch.py and
# backends/_torch_compile.py import torch, ...): read from the module itself, so a new module
# cannot be forgotten here.
_OPTIONAL = frozenset({"torch", "jax", "dask", "icechunk"})
_BACKENDS = pathlib.Path(__file__).parent / "src" / "gather_scatter" / "backends"


def _missing_libraries(module: pathlib.Path) -> set[str]:
    imported = set(re.findall(r"^(?:import|from) (\w+)", module.read_text(encoding="utf-8"), flags=re.M))
    return {name for name in imported & _OPTIONAL if importlib.util.find_spec(name) is None}


collect_ignore = [
    f"src/gather_scatter/backends/{module.name}"
    for module in sorted(_BACKENDS.glob("*.py"))
    if _missing_libraries(module)
]


def _record_skip(report) -> None:
    """Append a skipped report's node id to the file ``GATHER_SCATTER_SKIPPED`` names.

    With ``GATHER_SCATTER_SKIPPED`` set to a file name, the node id of every skipped test or
    module is appended to it: ``.ci/run`` reruns exactly those once torch and JAX are installed.
    """
    path = os.environ.get("GATHER_SCATTER_SKIPPED")
    if path and report.skipped and not hasattr(report, "wasxfail"):  # an xfail ran: not skipped
        with open(path, "a", encoding="utf-8") as skipped:
            skipped.write(report.nodeid + "\n")


def pytest_runtest_logreport(report):
    """Record a skipped test (pytest hook, called for each test phase's report)."""
    _record_skip(report)


def pytest_collectreport(report):
    """Record a skipped module (pytest hook, called for each collector's report)."""
    _record_skip(report)


@pytest.fixture(scope="session")
def default_suite(tmp_path_factory):
    """Write the default conformance suite once per test run, and return ``(folder, manifest)``.

    That is ``export_tests`` with its defaults (seed 0); tests read it, none writes into it.
    """
    from gather_scatter.conformance import export_tests

    folder = tmp_path_factory.mktemp("conformance") / "suite"
    return folder, export_tests(folder)
