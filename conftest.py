"""pytest's collection rules for the whole repository.

``--doctest-modules`` imports every module under ``src/gather_scatter``; a backend module
imports its array library at the top (it is only ever imported when an input already is
one of that library's arrays), so it is left out of the doctest collection where that
library is not installed, as in a plain ``pip install -e ".[test]"``. The backend tests
themselves skip with a reason (``tests/backends.py``). The engines this checkout's
``pyproject.toml`` declares are registered where the installed metadata lacks them
(:func:`_checkout_engines`).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import pathlib
import re
import shutil
import sys
import tempfile

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


def _checkout_engines() -> None:
    """Register the engines this checkout's ``pyproject.toml`` declares and the installed metadata lacks.

    The entry-point group ``gather_scatter.engines`` is read from the installed distribution's
    metadata, written by ``pip install -e`` of some checkout. Where the tests run this checkout's
    ``src`` (``PYTHONPATH=src``) beside metadata installed from another one (a git worktree of a
    branch that adds an engine), the new engine's entry point is missing: ``scripts/checkout_engines.py``
    writes it as a stand-in distribution in a temporary folder, put on ``sys.path`` (a spawned
    worker gets it) and on ``PYTHONPATH`` (a subprocess does). Nothing is added where the
    metadata is this checkout's (``pip install -e .``, CI).
    """
    spec = importlib.util.spec_from_file_location(
        "checkout_engines", pathlib.Path(__file__).parent / "scripts" / "checkout_engines.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    engines = script.missing()
    if not engines:
        return
    site = tempfile.mkdtemp(prefix="gather-scatter-checkout-engines-")
    atexit.register(shutil.rmtree, site, True)
    script.write(pathlib.Path(site), engines)
    sys.path.append(site)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), site) if p)


_checkout_engines()


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
