"""What a fresh install's first calls cost: numba's compiles, measured with an empty cache.

    python benchmarks/bench_first_call.py                  # every part (a few minutes here)
    python benchmarks/bench_first_call.py --quick          # float32 calls and the export only
    python benchmarks/bench_first_call.py --part calls export harness models

Each figure comes from a new Python process whose ``NUMBA_CACHE_DIR`` points at a new, empty
folder (numba's compiled code is cached there, so this is a fresh install's first run), then,
where it says "warm", a second process on the same folder (every later run):

- ``calls``: per operator x dtype x reduction, the import of gather_scatter and the first call,
  at a model's size (a few thousand elements) and at a large one (>= 2**20 elements of work,
  which compiles at once), and the same call once more in the same process.
- ``export``: ``gather-scatter export-tests DIR`` at its default size, cold and warm.
- ``harness``: docs/conformance.md's pytest harness over that suite with ``run`` set to
  ``gather_scatter.run_model``, cold and warm.
- ``models``: ``run_model``'s first run of every model of tests/data with its inputs, cold, and
  of every model of ``--zoo DIR`` (``hosted_models.py``'s exports, ``<name>.onnx`` beside
  ``<name>.npz``) where given.

A measurement, never an assertion: the targets are in issue 38's closing note.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (operator, reduction) -> the call, given data ``d``, indices ``i``, updates ``u`` drawn by _CALL's prelude.
OPERATORS = {
    ("gather", "none"): "gs.gather(d, i[:, 0] % R, axis=0)",
    ("gather_elements", "none"): "gs.gather_elements(d, i % R, axis=0)",
    ("gather_nd", "none"): "gs.gather_nd(d.reshape(1, R, W), (i[:, :1] % R)[None], batch_dims=1)",
    (
        "tensor_scatter",
        "none",
    ): "gs.tensor_scatter(d.reshape(1, R, W), u[: R // 2].reshape(1, R // 2, W), np.array([R // 4]))",
}
for _red in ("none", "add", "max"):
    OPERATORS[("scatter_nd", _red)] = f"gs.scatter_nd(d, i[:, :1] % R, u, reduction={_red!r})"
    OPERATORS[("scatter_elements", _red)] = f"gs.scatter_elements(d, i % R, u, axis=0, reduction={_red!r})"

_CALL = """
import sys, time
t0 = time.perf_counter()
import numpy as np, gather_scatter as gs
t1 = time.perf_counter()
rng = np.random.default_rng(0)
R, W, N = {rows}, {width}, {updates}
d = rng.standard_normal((R, W)).astype({dtype!r})
i = rng.integers(-R, R, (N, W))
u = rng.standard_normal((N, W)).astype({dtype!r})
t2 = time.perf_counter()
{call}
t3 = time.perf_counter()
{call}
t4 = time.perf_counter()
print(t1 - t0, t3 - t2, t4 - t3)
"""

SIZES = {"model": (256, 16, 256), "large": (4096, 64, 20_000)}  # rows, width, updates


def _env(cache: str, extra: dict | None = None) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache, **(extra or {}))
    env.pop("GATHER_SCATTER_COMPILED", None)
    return env


def _run(args, cache, extra=None, **kw) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(args, env=_env(cache, extra), capture_output=True, text=True, **kw)
    if done.returncode != 0:
        raise RuntimeError(f"{args[:3]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.perf_counter() - start, done


def bench_calls(dtypes, sizes) -> list[dict]:
    rows = []
    for (op, reduction), call in OPERATORS.items():
        for dtype in dtypes:
            for size in sizes:
                r, w, n = SIZES[size]
                script = _CALL.format(rows=r, width=w, updates=n, dtype=dtype, call=call)
                with tempfile.TemporaryDirectory() as cache:
                    _, cold = _run([sys.executable, "-c", script], cache)
                    _, warm = _run([sys.executable, "-c", script], cache)
                imp, first, second = map(float, cold.stdout.split())
                _, warm_first, _ = map(float, warm.stdout.split())
                row = {
                    "op": op,
                    "reduction": reduction,
                    "dtype": dtype,
                    "size": size,
                    "import_s": imp,
                    "first_s": first,
                    "second_s": second,
                    "warm_first_s": warm_first,
                }
                rows.append(row)
                print(
                    f"| {op} | {reduction} | {dtype} | {size} | {imp:.2f} | {first:.3f} | {second * 1e3:.2f} "
                    f"| {warm_first:.3f} |",
                    flush=True,
                )
    return rows


def bench_export(suite: Path) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        cold, _ = _run([sys.executable, "-m", "gather_scatter", "export-tests", str(suite)], cache)
        warm, _ = _run([sys.executable, "-m", "gather_scatter", "export-tests", str(suite)], cache)
    print(f"export-tests (default suite): cold {cold:.1f} s, warm {warm:.1f} s", flush=True)
    return {"cold_s": cold, "warm_s": warm}


def harness_source() -> str:
    """docs/conformance.md's pytest harness with ``run`` set to gather_scatter.run_model."""
    text = (ROOT / "docs" / "conformance.md").read_text(encoding="utf-8")
    section = text[text.index("### A pytest harness over MANIFEST.json") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    run = (
        "def run(model_path, feeds):\n    import gather_scatter\n\n"
        "    return list(gather_scatter.run_model(str(model_path), feeds).values())\n"
    )
    return re.sub(r"def run\(model_path, feeds\):.*?\n\n\n", run + "\n\n", code, count=1, flags=re.S)


def bench_harness(suite: Path) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        test = Path(folder) / "test_indexing_suite.py"
        test.write_text(harness_source(), encoding="utf-8")
        args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", str(test)]
        figures = {}
        with tempfile.TemporaryDirectory() as cache:
            for name in ("cold_s", "warm_s"):
                figures[name], done = _run(args, cache, {"INDEXING_SUITE": str(suite)}, cwd=folder)
                figures[name.replace("_s", "_summary")] = done.stdout.strip().splitlines()[-1]
    print(
        f"pytest harness over the suite with run_model: cold {figures['cold_s']:.1f} s, warm "
        f"{figures['warm_s']:.1f} s ({figures['warm_summary']})",
        flush=True,
    )
    return figures


_MODEL = """
import sys, time
import numpy as np, gather_scatter as gs
from gather_scatter.models import _arrays_io
feeds = _arrays_io.load_npz(sys.argv[2]) if sys.argv[2] else None
t = time.perf_counter()
gs.run_model(sys.argv[1], feeds)
t1 = time.perf_counter()
gs.run_model(sys.argv[1], feeds)
print(t1 - t, time.perf_counter() - t1)
"""


def bench_models(zoo: str | None) -> list[dict]:
    rows = []
    models = sorted((ROOT / "tests" / "data").glob("*.onnx")) + (sorted(Path(zoo).glob("*.onnx")) if zoo else [])
    for model in models:
        inputs = model.with_name(model.stem + "_inputs.npz")
        inputs = inputs if inputs.exists() else model.with_suffix(".npz")
        with tempfile.TemporaryDirectory() as cache:
            _, done = _run([sys.executable, "-c", _MODEL, str(model), str(inputs) if inputs.exists() else ""], cache)
        first, second = map(float, done.stdout.split())
        rows.append({"model": model.name, "first_s": first, "second_s": second})
        print(f"| {model.name} | {first:.3f} | {second * 1e3:.1f} |", flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="float32 calls at a model's size and the export only")
    parser.add_argument("--part", nargs="*", choices=("calls", "export", "harness", "models"), default=None)
    parser.add_argument("--zoo", default=None, help="a folder of hosted_models.py's exports (models part)")
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results_first_call.json"))
    args = parser.parse_args(argv)
    parts = args.part or (("calls", "export") if args.quick else ("calls", "export", "harness", "models"))
    result: dict = {"date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count()}
    with tempfile.TemporaryDirectory() as work:
        suite = Path(work) / "suite"
        if "calls" in parts:
            print("| operator | reduction | dtype | size | import s | first s | second ms | first, warm cache s |")
            print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: |")
            dtypes = ("float32",) if args.quick else ("float32", "float16", "int64")
            sizes = ("model",) if args.quick else ("model", "large")
            result["calls"] = bench_calls(dtypes, sizes)
            worst = max(result["calls"], key=lambda r: r["first_s"])
            print(
                f"\nslowest first call: {worst['op']} {worst['reduction']} {worst['dtype']} {worst['size']}: "
                f"{worst['first_s']:.2f} s (+ import {worst['import_s']:.2f} s)\n"
            )
        if "export" in parts or "harness" in parts:
            result["export"] = bench_export(suite)
        if "harness" in parts:
            result["harness"] = bench_harness(suite)
        if "models" in parts:
            print("\n| model | first run_model s | second ms |\n| --- | ---: | ---: |")
            result["models"] = bench_models(args.zoo)
    Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
