#!/usr/bin/env python3
"""Check that a release of gather_scatter builds, installs and runs, as a user would meet it.

In a temporary directory:

1. ``python -m build`` makes an sdist and a wheel of this checkout (``pip install build`` first);
2. the wheel's file list is checked: only the package and its ``.dist-info``, with the files the
   package needs at run time, and no tests, caches (``__pycache__``, ``.pyc``), benchmarks or their
   output, docs or images (:func:`wheel_problems`); the sdist holds no caches either;
3. the wheel is installed in a fresh virtual environment and smoke tested: import, one kernel call,
   ``gather_scatter.__version__``, ``gather-scatter --version`` and ``gather-scatter run``, each
   giving pyproject.toml's version;
4. the sdist is installed in a second fresh virtual environment (built there from source) and
   smoke tested the same way.

Usage: ``python scripts/check_release.py [--keep]`` (``--keep`` leaves the temporary directory).
Exit status 0 when every step passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "gather_scatter"

# Path components that never belong in the wheel, and file suffixes that never do.
FORBIDDEN_PARTS = frozenset(
    {
        "__pycache__",
        "tests",
        "test",
        "benchmarks",
        "docs",
        "examples",
        ".hypothesis",
        ".pytest_cache",
        ".mypy_cache",
        "check-findings",
        "build",
        "dist",
    }
)
FORBIDDEN_SUFFIXES = frozenset({".pyc", ".pyo", ".png", ".svg", ".jpg", ".jpeg", ".gif"})
FORBIDDEN_NAMES = re.compile(r"(bench_results.*|results)\.json$|^conftest\.py$|^test_.*\.py$")
# What the installed package cannot run without.
REQUIRED = ("__init__.py", "py.typed", "cli/__init__.py", "data/decoder_step.onnx", "data/decoder_step_inputs.npz")

SMOKE = """
import sys
import numpy as np
import gather_scatter
assert gather_scatter.__version__ == sys.argv[1], (gather_scatter.__version__, sys.argv[1])
assert gather_scatter.__file__.startswith(sys.prefix), gather_scatter.__file__
out = gather_scatter.gather(np.arange(12.0).reshape(4, 3), np.array([3, 0]), axis=0)
assert out.tolist() == [[9.0, 10.0, 11.0], [0.0, 1.0, 2.0]], out
print("import ok:", gather_scatter.__version__, "from", gather_scatter.__file__)
"""


def project_version(root: Path = ROOT) -> str:
    """The version pyproject.toml declares (its one source)."""
    match = re.search(r'^version = "([^"]+)"$', (root / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    if not match:
        raise SystemExit("pyproject.toml has no version line")
    return match.group(1)


def wheel_problems(names: list[str], version: str) -> list[str]:
    """What is wrong with a wheel whose archive holds ``names``: one line per problem, none if fine."""
    dist_info = f"{PACKAGE}-{version}.dist-info"
    problems = []
    for name in names:
        path = PurePosixPath(name)
        if path.parts[0] not in (PACKAGE, dist_info):
            problems.append(f"{name}: outside {PACKAGE}/ and {dist_info}/")
        bad = FORBIDDEN_PARTS.intersection(path.parts)
        if bad:
            problems.append(f"{name}: forbidden directory {sorted(bad)[0]}")
        if path.suffix.lower() in FORBIDDEN_SUFFIXES:
            problems.append(f"{name}: forbidden file type {path.suffix}")
        if FORBIDDEN_NAMES.search(path.name):
            problems.append(f"{name}: test or benchmark output file")
    present = set(names)
    for needed in [f"{PACKAGE}/{n}" for n in REQUIRED] + [f"{dist_info}/{n}" for n in ("METADATA", "entry_points.txt")]:
        if needed not in present:
            problems.append(f"{needed}: missing")
    return problems


def sdist_problems(names: list[str]) -> list[str]:
    """Caches or build debris in an sdist's member names."""
    return [
        f"{n}: cache or build debris"
        for n in names
        if {"__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache"}.intersection(PurePosixPath(n).parts)
        or n.endswith((".pyc", ".pyo"))
    ]


def _run(cmd: list[str], cwd: Path, what: str) -> subprocess.CompletedProcess:
    result = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(
            f"FAILED: {what} (exit {result.returncode})\n$ {' '.join(map(str, cmd))}\n"
            f"{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )
    return result


def _step(label: str):
    print(f"--- {label}", flush=True)
    return time.perf_counter()


def _done(start: float) -> None:
    print(f"    ({time.perf_counter() - start:.1f} s)", flush=True)


def smoke_test(artifact: Path, venv: Path, version: str, work: Path) -> None:
    """Install ``artifact`` in a fresh venv at ``venv`` and check import, --version and run."""
    start = _step(f"fresh venv {venv.name}: pip install {artifact.name}")
    _run([sys.executable, "-m", "venv", venv], work, "create the venv")
    python = venv / "bin" / "python"
    _run([python, "-m", "pip", "install", "-q", artifact], work, f"pip install {artifact.name}")
    _done(start)
    start = _step(f"smoke test in {venv.name}")
    print("    " + _run([python, "-c", SMOKE, version], work, "import").stdout.strip())
    cli = venv / "bin" / "gather-scatter"
    out = _run([cli, "--version"], work, "gather-scatter --version").stdout
    if out != f"gather-scatter {version}\n":
        raise SystemExit(f"FAILED: gather-scatter --version printed {out!r}, expected 'gather-scatter {version}'")
    print(f"    $ gather-scatter --version\n    {out.strip()}")
    out = _run([cli, "run"], work, "gather-scatter run").stdout
    if not out.startswith("model: built-in decoder_step.onnx"):
        raise SystemExit(f"FAILED: gather-scatter run printed:\n{out}")
    print("    $ gather-scatter run\n" + "".join(f"    {line}\n" for line in out.splitlines()[:6]) + "    ...")
    _done(start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    version = project_version()
    began = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="gs-release-"))
    try:
        start = _step(f"python -m build ({PACKAGE} {version}) into {work / 'dist'}")
        _run(
            [sys.executable, "-m", "build", "--outdir", work / "dist", ROOT],
            work,
            "python -m build (pip install build?)",
        )
        wheels = sorted((work / "dist").glob("*.whl"))
        sdists = sorted((work / "dist").glob("*.tar.gz"))
        if len(wheels) != 1 or len(sdists) != 1:
            raise SystemExit(f"FAILED: expected one wheel and one sdist, got {wheels + sdists}")
        wheel, sdist = wheels[0], sdists[0]
        for artifact in (sdist, wheel):
            print(f"    {artifact.name}: {artifact.stat().st_size / 1024:.1f} KiB")
        _done(start)

        start = _step("wheel contents")
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
        dirs = sorted({str(PurePosixPath(n).parent) for n in names})
        print(f"    {len(names)} files in {len(dirs)} directories: " + ", ".join(dirs))
        problems = wheel_problems(names, version)
        with tarfile.open(sdist) as archive:
            sdist_names = archive.getnames()
        print(
            f"    sdist: {len(sdist_names)} members; top level: "
            + ", ".join(sorted({PurePosixPath(n).parts[1] for n in sdist_names if len(PurePosixPath(n).parts) > 1}))
        )
        problems += sdist_problems(sdist_names)
        if problems:
            raise SystemExit("FAILED: release contents\n" + "\n".join(f"  {p}" for p in problems))
        print("    no tests, caches, benchmarks output, docs or images; required files present")
        _done(start)

        smoke_test(wheel, work / "venv-wheel", version, work)
        smoke_test(sdist, work / "venv-sdist", version, work)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(
        f"OK: {PACKAGE} {version} builds, installs from wheel and sdist, and runs ({time.perf_counter() - began:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
