"""Time per call against input size: ours, NumPy and onnxruntime, with a log-log plot.

    python benchmarks/bench_sizes.py [--quick] [--plot PATH]

Five sweeps (issue 16's middle sizes and copy-mode scatters):

- Gather (axis 0) of rows from a 100,000 x 64 float32 table by 1 ... 1,000,000 random int64
  indices: ``gs.gather``, ``np.take(table, indices, axis=0)``, onnxruntime;
- ScatterND, reduction none, of 1 ... 10,000 rows (each 1,000 float32) into a 1000 x 1000
  float32 tensor: ``gs.scatter_nd``, ``data.copy()`` (the copy every copy-mode scatter owes),
  onnxruntime. Up to 1,000 the rows are distinct; 10,000 writes each row 10 times;
- ScatterND, reduction add, the same sizes (one row is the issue's single-update case);
- ScatterElements, reduction none, axis 0, of 1 ... 100 rows of indices (1,000 random row
  positions each) into the same tensor: ``data.copy()`` is NumPy's column;
- TensorScatter (linear, copy mode) of updates of sequence_length 1 ... 256 into a
  4 x 8 x 2048 x 64 float16 cache at random positions: ``past_cache.copy()``.

One process. Per size, each round times a batch of calls of every engine in turn (the order
rotating from round to round; a batch lasts about 50 ms, or one call where a call lasts longer),
after warm-up calls; a figure is the median over rounds of the time per call. onnxruntime runs
a one-node model built once per case, inputs fed, intra-op threads = ``gs.get_num_threads()``
(this machine's cores), spinning off, as ``bench_ops.py`` sets it up. Each onnxruntime answer is
compared with ours; a difference is marked (its ScatterND add loses duplicate updates on two
threads). Prints a markdown table and writes a log-log plot (matplotlib, skipped with a message
where it is missing). A measurement, never an assertion.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

# Steady state, as a loop of calls sees it: every kernel compiled on its first call (by default a
# kernel takes NumPy's path until its calls pay for the compile: docs/performance.md, First calls).
if __name__ == "__main__":  # as a module (the smoke tests) the importer's setting stands
    os.environ.setdefault("GATHER_SCATTER_COMPILED", "eager")

import gather_scatter as gs  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ops import Case, _model  # noqa: E402  (the one-node model builder bench_ops uses)

ROOT = Path(__file__).resolve().parents[1]
F32 = np.float32


def _session(case: Case) -> ort.InferenceSession:
    """bench_ops.py's onnxruntime setup: intra-op threads = ours, one inter-op thread, no spinning
    (spinning workers would take the cores from whichever engine runs next)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = gs.get_num_threads()
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(_model(case), so, providers=["CPUExecutionProvider"])


def sweeps(quick: bool, rng: np.random.Generator) -> list[dict]:
    """Each sweep: a title, the x-axis label, NumPy's operation, and per size the three callables."""
    table = rng.standard_normal((100_000, 64)).astype(F32)
    grid = rng.standard_normal((1000, 1000)).astype(F32)
    gather_sizes = [1, 1000, 100_000] if quick else [1, 10, 100, 1000, 10_000, 100_000, 1_000_000]
    scatter_sizes = [1, 100] if quick else [1, 10, 100, 1000, 10_000]

    def gather_point(n):
        idx = rng.integers(0, table.shape[0], n, dtype=np.int64)
        sess = _session(Case("gather", "Gather", [table, idx], {"axis": 0}, 13))
        feeds = {"in0": table, "in1": idx}
        return (lambda: gs.gather(table, idx, axis=0), lambda: np.take(table, idx, axis=0),
                lambda: sess.run(None, feeds)[0])

    def scatter_point(reduction):
        def point(k):
            idx = np.resize(rng.permutation(grid.shape[0]), k)[:, None].astype(np.int64)  # (k, 1)
            upd = rng.standard_normal((k, grid.shape[1])).astype(F32)
            sess = _session(Case("scatter_nd", "ScatterND", [grid, idx, upd], {"reduction": reduction}, 18))
            feeds = {"in0": grid, "in1": idx, "in2": upd}
            return (lambda: gs.scatter_nd(grid, idx, upd, reduction=reduction), grid.copy,
                    lambda: sess.run(None, feeds)[0])
        return point

    def elements_point(k):  # k rows of 1,000 positions along axis 0, each column's rows at random
        idx = rng.integers(0, grid.shape[0], (k, grid.shape[1]))
        upd = rng.standard_normal((k, grid.shape[1])).astype(F32)
        sess = _session(Case("scatter_elements", "ScatterElements", [grid, idx, upd], {"axis": 0}, 18))
        feeds = {"in0": grid, "in1": idx, "in2": upd}
        return (lambda: gs.scatter_elements(grid, idx, upd, axis=0), grid.copy, lambda: sess.run(None, feeds)[0])

    cache = rng.standard_normal((4, 8, 2048, 64)).astype(np.float16)  # a KV cache of 8 MiB

    def tensor_point(length):  # one decode step (1) to a prefill chunk (256), at random positions
        update = rng.standard_normal((4, 8, length, 64)).astype(np.float16)
        write = rng.integers(0, cache.shape[2] - length + 1, cache.shape[0])
        sess = _session(Case("tensor_scatter", "TensorScatter", [cache, update, write], {}, 24))
        feeds = {"in0": cache, "in1": update, "in2": write}
        return (lambda: gs.tensor_scatter(cache, update, write), cache.copy, lambda: sess.run(None, feeds)[0])

    return [
        {"name": "gather", "title": "Gather rows of a 100,000 x 64 float32 table",
         "xlabel": "indices (rows gathered)", "numpy": "np.take", "sizes": gather_sizes, "point": gather_point},
        {"name": "scatter_nd_none", "title": "ScatterND (copy mode) of rows into 1000 x 1000 float32",
         "xlabel": "updates (rows of 1,000 written)", "numpy": "data.copy()", "sizes": scatter_sizes,
         "point": scatter_point("none")},
        {"name": "scatter_nd_add", "title": "ScatterND add of rows into 1000 x 1000 float32",
         "xlabel": "updates (rows of 1,000 added)", "numpy": "data.copy()", "sizes": scatter_sizes,
         "point": scatter_point("add")},
        {"name": "scatter_elements", "title": "ScatterElements (copy mode, axis 0) into 1000 x 1000 float32",
         "xlabel": "rows of indices (1,000 elements each)", "numpy": "data.copy()", "sizes": scatter_sizes[:3],
         "point": elements_point},
        {"name": "tensor_scatter", "title": "TensorScatter (copy mode) into a 4 x 8 x 2048 x 64 float16 cache",
         "xlabel": "sequence_length of the update", "numpy": "past_cache.copy()",
         "sizes": [1, 256] if quick else [1, 16, 256], "point": tensor_point},
    ]


def _batch_ns(fn, number: int) -> int:
    start = time.perf_counter_ns()
    for _ in range(number):
        fn()
    return time.perf_counter_ns() - start


def measure(engines: dict, rounds: int, batch_ns: int) -> dict[str, float]:
    """Median over rounds of the time per call (ns) of each engine, the engines interleaved."""
    number = {}
    for key, fn in engines.items():
        _batch_ns(fn, 3)  # warm: a first call checks its signature, fills the buffer cache
        one = max(min(_batch_ns(fn, 1) for _ in range(3)), 1)
        number[key] = max(1, batch_ns // one)
    keys = list(engines)
    per_call: dict[str, list[float]] = {key: [] for key in keys}
    for r in range(rounds):
        for key in keys[r % len(keys):] + keys[: r % len(keys)]:
            per_call[key].append(_batch_ns(engines[key], number[key]) / number[key])
    return {key: statistics.median(values) for key, values in per_call.items()}


def run(quick: bool, rounds: int, batch_ms: float, only: list[str] | None = None) -> list[dict]:
    rng = np.random.default_rng(0)
    results = []
    for sweep in sweeps(quick, rng):
        if only and sweep["name"] not in only:
            continue
        rows = []
        for size in sweep["sizes"]:
            ours, numpy_op, onnxruntime = sweep["point"](size)
            same = np.array_equal(ours(), onnxruntime())
            med = measure({"ours": ours, "numpy": numpy_op, "ort": onnxruntime}, rounds, int(batch_ms * 1e6))
            rows.append({"size": size, "same": same, **{k: v / 1e3 for k, v in med.items()}})  # us
            print(f"  {sweep['name']:16} {size:>9,}: ours {rows[-1]['ours']:10.1f} us  "
                  f"ort {rows[-1]['ort']:10.1f} us", file=sys.stderr, flush=True)
        results.append({**sweep, "rows": rows})
    return results


def table(results: list[dict]) -> str:
    lines = ["| case | size | ours µs | NumPy µs | ORT µs | ours / ORT | ours / NumPy |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for sweep in results:
        for r in sweep["rows"]:
            mark = "" if r["same"] else " (differs)"
            lines.append(f"| {sweep['name']} ({sweep['numpy']}) | {r['size']:,} | {r['ours']:,.1f} | "
                         f"{r['numpy']:,.1f} | {r['ort']:,.1f}{mark} | {r['ours'] / r['ort']:.2f} | "
                         f"{r['ours'] / r['numpy']:.2f} |")
    return "\n".join(lines)


def _crossings(sizes, ratio) -> list[float]:
    """Sizes where ours / ORT crosses 1, interpolated on log scales."""
    out = []
    for (s0, r0), (s1, r1) in zip(zip(sizes, ratio), zip(sizes[1:], ratio[1:])):
        if (r0 - 1) * (r1 - 1) < 0:
            t = np.log(r0) / (np.log(r0) - np.log(r1))
            out.append(float(np.exp(np.log(s0) + t * (np.log(s1) - np.log(s0)))))
    return out


def plot(results: list[dict], path: Path, subtitle: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 5.2), constrained_layout=True)
    for ax, sweep in zip(np.atleast_1d(axes), results):
        sizes = [r["size"] for r in sweep["rows"]]
        ours = [r["ours"] for r in sweep["rows"]]
        ax.loglog(sizes, ours, "o-", color="C0", lw=2, label="gather_scatter (ours)")
        ax.loglog(sizes, [r["ort"] for r in sweep["rows"]], "s-", color="C1", lw=2, label="onnxruntime session.run")
        ax.loglog(sizes, [r["numpy"] for r in sweep["rows"]], "^--", color="C2", label=f"NumPy {sweep['numpy']}")
        for s, o, r in zip(sizes, ours, sweep["rows"]):
            ax.annotate(f"{r['ours'] / r['ort']:.2f}x", (s, o), textcoords="offset points", xytext=(0, 8),
                        ha="center", fontsize=8, color="C0")
        for x in _crossings(sizes, [r["ours"] / r["ort"] for r in sweep["rows"]]):
            ax.axvline(x, color="grey", ls=":", lw=1)
            ax.annotate(f"ours = ORT\n~{x:,.0f}", (x, 0.02), xycoords=("data", "axes fraction"),
                        xytext=(3, 0), textcoords="offset points", fontsize=8, color="grey")
        ax.set_title(sweep["title"], fontsize=11)
        ax.set_xlabel(sweep["xlabel"] + ", log scale")
        ax.set_ylabel("time per call (µs), log scale")
        ax.grid(True, which="major", alpha=0.4)
        ax.grid(True, which="minor", alpha=0.12)
        low, high = ax.get_ylim()
        ax.set_ylim(low, high * 2.5)  # room for the ratio labels and the legend above the lines
        ax.legend(loc="upper left", fontsize=9, framealpha=0.9)
    fig.suptitle(f"Time per call against size; labels: ours / onnxruntime. {subtitle}", fontsize=11)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few sizes and rounds: a smoke run in seconds")
    p.add_argument("--plot", type=Path, default=ROOT / "docs" / "perf" / "sizes.png", help="where to write the PNG")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds per size (default 21, quick 3)")
    p.add_argument("--batch-ms", type=float, default=None, help="length of one timed batch (default 50, quick 2)")
    p.add_argument("--only", nargs="*", default=None, help="sweeps to run (gather, scatter_nd_none, scatter_nd_add, "
                   "scatter_elements, tensor_scatter; default: all)")
    args = p.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 21)
    batch_ms = args.batch_ms or (2.0 if args.quick else 50.0)
    machine = (f"{os.cpu_count()} cores, {gs.get_num_threads()} threads (ours and onnxruntime), "
               f"onnxruntime {ort.__version__}, NumPy {np.__version__}, {datetime.date.today().isoformat()}")
    print(f"median of {rounds} interleaved rounds of ~{batch_ms:g} ms batches; {machine}")
    results = run(args.quick, rounds, batch_ms, args.only)
    print(table(results))
    try:
        plot(results, args.plot, machine)
    except ImportError:
        print("matplotlib is missing: no plot (pip install 'gather_scatter[bench]')")
    else:
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
