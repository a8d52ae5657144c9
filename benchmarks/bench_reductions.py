"""Scatter reductions with duplicate indices, swept over the shapes real models send, against onnxruntime.

op {ScatterND rows: indices (U, 1) into a (R, W) table, updates (U, W); ScatterND elements:
indices (U, 2) into (R, W), updates (U,); ScatterElements: axis 0 of (R, W), indices and updates
(ceil(U / W), W), so ~U elements are updated} x reduction {add, mul, max, min} x dtype {float32,
float64, float16, bfloat16, int32, int64} x row width W {1, 2, 4, 8, 16, 64, 256} x table rows
R {16, 1,000, 100,000} x updates U {10,000, 300,000}, uniform random targets (duplicates follow
from the sizes); plus ScatterND rows in the shapes of issue 38's table (W x R x U: 48 x 500 x
100,000, 48 x 17 x 100,000, 8 x 500 x 100,000, 256 x 500 x 100,000, 1,024 x 500 x 20,000). 'mul' multiplies by values near 1 (floats 1 +- 1/64, ints +-1), so products stay
finite and non-zero. Cells whose updates exceed 256 MiB are skipped.

The compiled loops are loaded before the first cell (steady state: a process's first ~100 calls
of small work take NumPy's path, ``tests/test_reduction_kernel.py`` checks the first calls' bits).
Each cell times ours (``gather_scatter.scatter_nd`` / ``scatter_elements``) and onnxruntime's
one-node model (opset 18) at 1 and at 2 intra-op threads (spinning off), interleaved in rounds
after a warm-up of each; a figure is the median over rounds of a batch of calls of >= 20 ms.
onnxruntime's answers are compared bitwise with ours (which equal the spec's loop: the tests
show it): a 1-thread difference is flagged loudly, a 2-thread one is marked "differs" (its
threads race on duplicates). onnxruntime has no float16 reductions, and asking it a few times
kills the process (onnxruntime 1.32: SIGSEGV or SIGFPE), so those cells give ours /
ours(float32) instead, the float32 case of the same shape timed in the same rounds.

    python benchmarks/bench_reductions.py            # the full sweep (about 20 minutes here)
    python benchmarks/bench_reductions.py --quick    # a small subset in seconds (CI's smoke test)

Prints a Markdown table and the worst cells, writes every figure to ``--json``
(benchmarks/results_reductions.json) and a heatmap of ours / onnxruntime(1 thread) to
``--plot`` (docs/perf/reductions.png).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import ml_dtypes  # noqa: F401  (registers bfloat16 with NumPy)
import numpy as np

# Steady state, as a loop of calls sees it: every kernel compiled on its first call (by default a
# kernel takes NumPy's path until its calls pay for the compile: docs/performance.md, First calls).
if __name__ == "__main__":  # as a module (the smoke tests) the importer's setting stands
    os.environ.setdefault("GATHER_SCATTER_COMPILED", "eager")

import gather_scatter as gs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OPS = ("scatter_nd_rows", "scatter_nd_elements", "scatter_elements")
REDUCTIONS = ("add", "mul", "max", "min")
DTYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64")
WIDTHS = (1, 2, 4, 8, 16, 64, 256)
ROWS = (16, 1000, 100_000)
UPDATES = (10_000, 300_000)
MAX_BYTES = 256 << 20
# ScatterND rows in the shapes issue 38 measured max/min 1.3-3.3x onnxruntime on: (W, R, U)
ISSUE_CELLS = ((48, 500, 100_000), (48, 17, 100_000), (8, 500, 100_000), (256, 500, 100_000), (1024, 500, 20_000))


def _values(rng, dtype, shape, reduction):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return (rng.choice([-1, 1], shape) if reduction == "mul" else rng.integers(-100, 100, shape)).astype(dtype)
    if reduction == "mul":
        return (1 + rng.uniform(-1, 1, shape) / 64).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def make_case(op, reduction, dtype, width, rows, updates, seed=0):
    """The inputs of one cell: (data, indices, updates, onnx op type, attributes)."""
    rng = np.random.default_rng(seed)
    data = _values(rng, dtype, (rows, width), reduction)
    if op == "scatter_nd_rows":
        return (
            data,
            rng.integers(0, rows, (updates, 1)),
            _values(rng, dtype, (updates, width), reduction),
            "ScatterND",
            {},
        )
    if op == "scatter_nd_elements":
        indices = np.stack([rng.integers(0, rows, updates), rng.integers(0, width, updates)], axis=1)
        return data, indices, _values(rng, dtype, (updates,), reduction), "ScatterND", {}
    n = math.ceil(updates / width)
    return (
        data,
        rng.integers(0, rows, (n, width)),
        _values(rng, dtype, (n, width), reduction),
        "ScatterElements",
        {"axis": 0},
    )


def _ours(op, data, indices, updates, reduction):
    if op == "scatter_elements":
        return lambda: gs.scatter_elements(data, indices, updates, axis=0, reduction=reduction)
    return lambda: gs.scatter_nd(data, indices, updates, reduction=reduction)


def _session(op_type, attrs, dtype, reduction, threads):
    import onnxruntime as ort
    from onnx import TensorProto, helper

    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    node = helper.make_node(op_type, ["data", "indices", "updates"], ["y"], reduction=reduction, **attrs)
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [node],
        "g",
        [vi("data", elem, None), vi("indices", TensorProto.INT64, None), vi("updates", elem, None)],
        [vi("y", elem, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 4  # its NOT_IMPLEMENTED for float16 is expected, not news
    try:
        return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - onnxruntime lacks the type (float16 reductions)
        return None


def _batch(fn, target_s):
    """Calls per timed batch: ``target_s`` over the median of 5 calls (one call's time, taken
    just after the warm-up of another runner, made a batch of a cell that copies a 6 MB table
    1-3 calls long, whose first call pays for the caches that runner evicted)."""
    once = []
    for _ in range(5):
        start = time.perf_counter()
        fn()
        once.append(time.perf_counter() - start)
    return max(3, int(target_s / max(statistics.median(once), 1e-7)))


def _timed(fn, calls):
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - start) / calls / 1e9


def run_cell(op, reduction, dtype, width, rows, updates, rounds, target_s):
    data, indices, values, op_type, attrs = make_case(op, reduction, dtype, width, rows, updates)
    ours = _ours(op, data, indices, values, reduction)
    expected = ours()
    row = {"op": op, "reduction": reduction, "dtype": dtype, "width": width, "rows": rows, "updates": updates}
    runners = {"ours": ours}
    if dtype in ("float16", "bfloat16"):  # ours on float32 of the same shape, in the same rounds
        f32_case = make_case(op, reduction, "float32", width, rows, updates)
        runners["ours_f32"] = _ours(op, *f32_case[:3], reduction)
    feeds = {"data": data, "indices": indices, "updates": values}
    # onnxruntime 1.32 has no float16 reductions, and a few of its NOT_IMPLEMENTED runs in one
    # process end it (SIGSEGV or SIGFPE, seen here without our library loaded): not asked.
    for threads in () if dtype in ("float16", "bfloat16") else (1, 2):
        session = _session(op_type, attrs, dtype, reduction, threads)
        if session is not None:
            try:
                answer = session.run(None, feeds)[0]
            except Exception:  # noqa: BLE001 - refused at run time
                continue
            key = f"ort{threads}"
            runners[key] = lambda s=session: s.run(None, feeds)
            same = [answer.tobytes() == expected.tobytes()]
            if threads == 2:
                same += [s.run(None, feeds)[0].tobytes() == expected.tobytes() for s in [session] * 4]
            row[f"{key}_equal"] = all(same)
    for fn in runners.values():  # warm: a signature's first calls check and compile (a cell's first
        warm = time.perf_counter() + 0.005  # timing was up to 2x its steady state without this)
        for i in range(1000):
            fn()
            if i >= 2 and time.perf_counter() > warm:
                break
    calls = {name: _batch(fn, target_s) for name, fn in runners.items()}
    times: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):  # interleaved: each round times every runner once
        for name, fn in runners.items():
            times[name].append(_timed(fn, calls[name]))
    for name, samples in times.items():
        row[f"{name}_s"] = statistics.median(samples)
    if "ours_f32_s" in row:  # timed interleaved: minutes apart, this machine's drift alone read 3x
        row["ratio_f32"] = row["ours_s"] / row["ours_f32_s"]
    if "ort1_s" in row:
        row["ratio_ort1"] = row["ours_s"] / row["ort1_s"]
    if "ort2_s" in row:
        row["ratio_ort2"] = row["ours_s"] / row["ort2_s"]
    return row


def _ms(seconds):
    return "—" if seconds is None else f"{seconds * 1e3:.3f}"


def table(rows):
    lines = [
        "| op | reduction | dtype | W | R | U | ours ms | ORT-1 ms | ORT-2 ms | ours/ORT-1 | ours/ORT-2 |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        ort2 = _ms(r.get("ort2_s")) + ("" if r.get("ort2_equal", True) else " (differs)")
        ratio1 = (
            f"{r['ratio_ort1']:.2f}"
            if "ratio_ort1" in r
            else (f"{r['ratio_f32']:.2f} of f32" if "ratio_f32" in r else "—")
        )
        ratio2 = f"{r['ratio_ort2']:.2f}" if "ratio_ort2" in r else "—"
        lines.append(
            f"| {r['op']} | {r['reduction']} | {r['dtype']} | {r['width']} | {r['rows']:,} | {r['updates']:,} "
            f"| {_ms(r['ours_s'])} | {_ms(r.get('ort1_s'))} | {ort2} | {ratio1} | {ratio2} |"
        )
    return "\n".join(lines)


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    panels = [(op, red) for op in OPS for red in REDUCTIONS]
    fig, axes = plt.subplots(len(OPS), len(REDUCTIONS), figsize=(4.2 * len(REDUCTIONS), 3.6 * len(OPS)), squeeze=False)
    norm = LogNorm(vmin=0.25, vmax=4)
    image = None
    for ax, (op, red) in zip(axes.ravel(), panels, strict=True):
        cells = [r for r in rows if r["op"] == op and r["reduction"] == red and "ratio_ort1" in r]
        labels = sorted({(r["dtype"], r["rows"], r["updates"]) for r in cells})
        widths = sorted({r["width"] for r in cells})
        grid = np.full((len(labels), len(widths)), np.nan)
        for r in cells:
            grid[labels.index((r["dtype"], r["rows"], r["updates"])), widths.index(r["width"])] = r["ratio_ort1"]
        image = ax.imshow(grid, cmap="RdYlGn_r", norm=norm, aspect="auto")
        for (i, j), v in np.ndenumerate(grid):
            if not np.isnan(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6)
        ax.set_xticks(range(len(widths)), [str(w) for w in widths], fontsize=7)
        first_column = ax in axes[:, 0]  # the rows' labels once per row of panels
        ax.set_yticks(
            range(len(labels)), [f"{d} R={r:,} U={u:,}" if first_column else "" for d, r, u in labels], fontsize=6
        )
        ax.set_title(f"{op} {red}", fontsize=9)
        ax.set_xlabel("row width W", fontsize=7)
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6, label="ours / onnxruntime (1 thread)")
    fig.suptitle("Scatter reductions with duplicates: ours / onnxruntime at 1 thread (green < 1: ours faster)")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small subset, 2 rounds (seconds)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--op", nargs="*", choices=OPS, default=None)
    parser.add_argument("--reduction", nargs="*", choices=REDUCTIONS, default=None)
    parser.add_argument("--dtype", nargs="*", choices=DTYPES, default=None)
    parser.add_argument("--width", nargs="*", type=int, default=None)
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results_reductions.json"))
    parser.add_argument("--plot", default=str(ROOT / "docs" / "perf" / "reductions.png"),
                        help="the heatmap's file (needs matplotlib, the [bench] extra; '' for none)")
    args = parser.parse_args(argv)
    quick = args.quick
    ops, reductions = args.op or OPS, args.reduction or REDUCTIONS
    dtypes = args.dtype or (("float32", "int64", "float16") if quick else DTYPES)
    widths = args.width or ((1, 8, 64) if quick else WIDTHS)
    rows_set, updates_set = ((16, 1000), (10_000,)) if quick else (ROWS, UPDATES)
    rounds = args.rounds or (2 if quick else 7)
    target_s = 0.005 if quick else 0.02
    # Steady state, as a model's loop of calls sees it: the compiled loops loaded first (a
    # process's first calls of small work take NumPy's path until they pay for numba's import).
    from gather_scatter.kernels import compiled_loops

    compiled_loops()
    rows = []
    started = time.perf_counter()
    for op in ops:
        for reduction in reductions:
            for dtype in dtypes:
                for rows_n in rows_set:
                    for updates in updates_set:
                        for width in widths:
                            nbytes = updates * width * np.dtype(dtype).itemsize
                            if nbytes > MAX_BYTES:
                                continue
                            row = run_cell(op, reduction, dtype, width, rows_n, updates, rounds, target_s)
                            rows.append(row)
                            if row.get("ort1_equal") is False:
                                print(f"!!! onnxruntime at 1 thread differs from ours: {row}", file=sys.stderr)
    if "scatter_nd_rows" in ops and not quick and not args.width:
        for reduction in reductions:
            for dtype in dtypes:
                for width, rows_n, updates in ISSUE_CELLS:
                    rows.append(run_cell("scatter_nd_rows", reduction, dtype, width, rows_n, updates, rounds, target_s))
    print(table(rows))
    compared = [r for r in rows if "ratio_ort1" in r]
    worst = sorted(compared, key=lambda r: -r["ratio_ort1"])[:15]
    print("\nWorst cells, ours / onnxruntime (1 thread):")
    print(table(worst))
    halves = [r["ratio_f32"] for r in rows if "ratio_f32" in r]
    if halves:
        print(f"\nfloat16 and bfloat16 / float32 (ours): median {statistics.median(halves):.2f}, worst {max(halves):.2f}")
        worst_halves = sorted((r for r in rows if "ratio_f32" in r), key=lambda r: -r["ratio_f32"])[:15]
        print(table(worst_halves))
    differs = sum(1 for r in rows if r.get("ort2_equal") is False)
    print(f"onnxruntime at 2 threads differs from the spec's loop on {differs} of {len(rows)} cells")
    result = {
        "machine": {
            "cores": os.cpu_count(),
            "threads": gs.get_num_threads(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "onnxruntime": __import__("onnxruntime").__version__,
            "date": datetime.date.today().isoformat(),
            "quick": quick,
        },
        "seconds": time.perf_counter() - started,
        "cells": rows,
    }
    Path(args.json).write_text(json.dumps(result, indent=1))
    if args.plot:
        try:
            plot(rows, args.plot)
        except ImportError:  # the table and the JSON are written: the heatmap alone needs matplotlib
            extra = 'pip install "gather_scatter[bench]"'
            print(f"no heatmap ({args.plot}): it needs matplotlib: {extra}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
