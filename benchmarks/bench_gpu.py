"""Issue 39's GPU sweep: our deterministic scatters and gathers against the libraries' native ops.

    python benchmarks/bench_gpu.py [--device cuda|cpu] [--quick] [--out DIR] [--budget SECONDS]

Scatter reductions (ScatterND rows): row width 1/8/64/512 x duplicates per target
1/10/1k/100k x float32/float16/bfloat16 x add/max, about ``--elements`` update elements a cell
(4M; the targets are ``elements / width / duplicates``, at least 1, so the depth can be less
than asked: the table gives the real one). Per cell, each a median of several runs after a
warm-up (``torch.cuda.synchronize`` and ``perf_counter``; JAX: ``block_until_ready``), in ms:

- ``ours``: ``gather_scatter.scatter_nd`` on torch tensors (bounds check, one stable sort, one
  Triton launch); ``fold``: the fold alone (``_torch_triton.scatter_reduce_rows``);
- ``native``: ``index_add_`` / ``scatter_reduce_('amax')`` (atomics: not deterministic);
  ``det``: the same under ``torch.use_deterministic_algorithms(True)`` (or its error);
- ``rounds``: ours with ``set_gpu_scatter('rounds')`` (skipped past 1,000 duplicates);
- ``jax_at`` / ``jax_at_jit``: ``.at[].add`` / ``.at[].max``; ``ours_jax`` / ``ours_jax_jit``:
  ``gather_scatter.scatter_nd`` on JAX arrays (eager skipped past 1,000 duplicates).

``exact``: ours (torch), and ours on JAX eager and jitted where run, bit for bit against the
NumPy kernel (NaN matches NaN). Gathers: 1k/10k/100k/1M indices into a (1M, 64) float32 table,
``gather`` against ``index_select`` and GatherElements against ``torch.gather`` (and ``jnp.take``).

Writes ``gpu_table.md`` and ``gpu_results.json`` under ``--out`` (default ``$OUT``, else
``./device-out``) and prints the table. Every section and cell is guarded: a failure prints its
traceback and the sweep goes on. ``--budget``: seconds after which the cells left are skipped.
``--device cpu --quick``: tiny shapes on CPU tensors, the fold in Triton's interpreter (this
script sets ``TRITON_INTERPRET=1`` before anything imports triton), to check the script itself.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

ARGS = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ARGS.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
ARGS.add_argument("--quick", action="store_true", help="tiny shapes (a check of the script)")
ARGS.add_argument("--out", default=os.environ.get("OUT") or "./device-out")
ARGS.add_argument("--budget", type=float, default=240.0, help="seconds; cells after it are skipped")
ARGS.add_argument("--elements", type=int, default=4_000_000, help="update elements per scatter cell")
ARGS.add_argument("--no-jax", action="store_true")
OPTS = ARGS.parse_args() if __name__ == "__main__" else ARGS.parse_args([])
if OPTS.device == "cpu":
    os.environ["TRITON_INTERPRET"] = "1"  # before triton's first import: its interpreter, for CPU tensors
if __name__ == "__main__":  # as a module (the smoke tests) the importer's environment stands
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX beside torch on one GPU

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import gather_scatter as gs  # noqa: E402
import gather_scatter.backends.torch as torch_backend  # noqa: E402
from gather_scatter.backends import _torch_triton  # noqa: E402
from gather_scatter.kernels import numpy_paths  # noqa: E402

DEVICE = OPTS.device
START = time.perf_counter()
if DEVICE == "cpu":
    torch_backend._on_cpu = lambda t: False  # the GPU branch on CPU tensors (the fold interpreted)
WIDTHS = [1, 64] if OPTS.quick else [1, 8, 64, 512]
DUPS = [1, 10] if OPTS.quick else [1, 10, 1000, 100_000]
DTYPES = ["float32", "float16", "bfloat16"]
REDUCTIONS = ["add", "max"]
ELEMENTS = 512 if OPTS.quick else OPTS.elements
GATHERS = [1000] if OPTS.quick else [1000, 10_000, 100_000, 1_000_000]
TABLE_ROWS = 4096 if OPTS.quick else 1_000_000
ROUNDS_MAX_DEPTH = 1000


def left() -> float:
    return OPTS.budget - (time.perf_counter() - START)


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def timed(fn, reps: int = 7) -> float:
    """Median ms of ``fn()`` after one warm-up; fewer runs where one is slow (> 0.1 s)."""
    fn()
    sync()
    t = time.perf_counter()
    fn()
    sync()
    first = time.perf_counter() - t
    runs = [first]
    for _ in range(1 if first > 0.5 else 3 if first > 0.1 else reps - 1):
        t = time.perf_counter()
        result = fn()
        if hasattr(result, "block_until_ready"):
            result.block_until_ready()
        sync()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs) * 1e3


def timed_stream(fn, calls: int = 20, reps: int = 5) -> float:
    """Median ms a call of ``fn()`` when ``calls`` run back to back and the device is waited for once.

    What a model's step sees: calls queue behind each other, so a host sync inside a call (an
    eager bounds check) shows, where :func:`timed`'s sync after every call would hide it.
    """
    fn()
    sync()
    runs = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        runs.append((time.perf_counter() - t) / calls)
    gs.synchronize()
    return statistics.median(runs) * 1e3


def eager_check(fn):
    """``fn`` with the bounds check at the call (``set_bounds_check('eager')``: a host sync each call)."""

    def run():
        previous = gs.set_bounds_check("eager")
        try:
            return fn()
        finally:
            gs.set_bounds_check(previous)

    return run


def guarded(name, fn, row, skip=None):
    """``row[name] = fn()``, or the reason it was skipped, or 'error' (its traceback printed)."""
    if skip:
        row[name] = f"skip: {skip}"
        return None
    if left() <= 0:
        row[name] = "skip: budget"
        return None
    try:
        row[name] = fn()
    except Exception as e:  # noqa: BLE001 - one cell's failure must not lose the sweep
        traceback.print_exc()
        row[name] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}"
    return row[name]


def np_dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def to_torch(a: np.ndarray) -> torch.Tensor:
    if a.dtype == np_dtype("bfloat16"):
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).to(DEVICE)
    return torch.from_numpy(a).to(DEVICE)


def to_numpy(t: torch.Tensor, dt: np.dtype) -> np.ndarray:
    t = t.detach().cpu()
    return t.view(torch.int16).numpy().view(dt) if t.dtype == torch.bfloat16 else t.numpy()


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    width = f"u{a.dtype.itemsize}"
    same = a.view(width) == b.view(width)
    return bool((same | (np.isnan(a.astype(np.float32)) & np.isnan(b.astype(np.float32)))).all())


def jax_setup():
    if OPTS.no_jax:
        return None
    try:
        import jax

        jax.config.update("jax_enable_x64", True)  # int64 indices, as ONNX has them
        platform = "gpu" if DEVICE == "cuda" else "cpu"
        devices = [d for d in jax.devices() if d.platform == platform]
        return (jax, devices[0]) if devices else None
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return None


@functools.cache
def scatter_inputs(width, dups, dtype):
    """(data, targets, updates) of a cell, made once (the JAX pass reuses them)."""
    rng = np.random.default_rng(width * 1000 + dups)
    n = max(ELEMENTS // width, 1)
    t = max(n // dups, 1)
    dt = np_dtype(dtype)
    data = rng.standard_normal((t, width)).astype(np.float32).astype(dt)
    updates = rng.standard_normal((n, width)).astype(np.float32).astype(dt)
    return data, rng.integers(0, t, n), updates


@functools.cache
def expected_of(width, dups, dtype, reduction):
    """The NumPy kernel's result for a cell, computed once."""
    data, targets, updates = scatter_inputs(width, dups, dtype)
    with numpy_paths():  # the NumPy kernel's bits, without compiling a loop per signature
        return gs.scatter_nd(data, targets[:, None], updates, reduction=reduction)


def scatter_cell(width, dups, dtype, reduction) -> dict:
    """One cell's torch columns (ours, fold, native, det, rounds) and ours' exactness."""
    data, targets, updates = scatter_inputs(width, dups, dtype)
    dt = data.dtype
    row = {"op": "scatter", "width": width, "dups": dups, "dtype": dtype, "reduction": reduction,
           "targets": data.shape[0], "updates": updates.shape[0],
           "depth": int(np.bincount(targets, minlength=data.shape[0]).max())}  # fmt: skip
    d, u, tg = to_torch(data), to_torch(updates), to_torch(targets)
    idx = tg[:, None]
    ours = lambda: gs.scatter_nd(d, idx, u, reduction=reduction)  # noqa: E731
    guarded("ours", lambda: timed(ours), row)
    guarded("fold", lambda: timed(lambda: _torch_triton.scatter_reduce_rows(d, tg, u, reduction)), row)
    if reduction == "add":
        native = lambda: d.clone().index_add_(0, tg, u)  # noqa: E731
    else:
        # scatter_reduce_ (index_reduce_ has no deterministic CUDA implementation at all)
        cells = idx.expand(-1, width).contiguous()
        native = lambda: d.clone().scatter_reduce_(0, cells, u, "amax", include_self=True)  # noqa: E731
    guarded("native", lambda: timed(native), row)

    def deterministic():
        was = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)
        try:
            return timed(native)
        finally:
            torch.use_deterministic_algorithms(was)

    guarded("det", deterministic, row, skip=None if DEVICE == "cuda" else "cuda only")

    def rounds():
        previous = torch_backend.set_gpu_scatter("rounds")
        try:
            return timed(ours, reps=3)
        finally:
            torch_backend.set_gpu_scatter(previous)

    guarded("rounds", rounds, row, skip="depth > 1000" if row["depth"] > ROUNDS_MAX_DEPTH else None)
    expected = expected_of(width, dups, dtype, reduction)
    row["exact"] = guarded("exact_torch", lambda: same_bits(expected, to_numpy(ours(), dt)), {})
    return row


def jax_cells(jx, row):
    """A cell's JAX columns (.at[] and ours, eager and jitted) and ours' exactness there."""
    jax, device = jx
    reduction = row["reduction"]
    data, targets, updates = scatter_inputs(row["width"], row["dups"], row["dtype"])
    expected = expected_of(row["width"], row["dups"], row["dtype"], reduction)
    jd, ji, ju = (jax.device_put(a, device) for a in (data, targets[:, None], updates))

    def native(d, i, u):
        at = d.at[i[:, 0]]
        return at.add(u) if reduction == "add" else at.max(u)

    def ours(d, i, u):
        return gs.scatter_nd(d, i, u, reduction=reduction)

    native_jit, ours_jit = jax.jit(native), jax.jit(ours)
    guarded("jax_at", lambda: timed(lambda: native(jd, ji, ju).block_until_ready()), row)
    guarded("jax_at_jit", lambda: timed(lambda: native_jit(jd, ji, ju).block_until_ready()), row)
    deep = "depth > 1000" if row["depth"] > ROUNDS_MAX_DEPTH else None
    guarded("ours_jax", lambda: timed(lambda: ours(jd, ji, ju).block_until_ready(), reps=3), row, skip=deep)
    guarded("ours_jax_jit", lambda: timed(lambda: ours_jit(jd, ji, ju).block_until_ready()), row)
    if not deep:
        row["exact_jax"] = guarded("exact_jax", lambda: same_bits(expected, np.asarray(ours(jd, ji, ju))), {})
    row["exact_jax_jit"] = guarded("exact_jax_jit", lambda: same_bits(expected, np.asarray(ours_jit(jd, ji, ju))), {})


def gather_cells(count, jx) -> list[dict]:
    rng = np.random.default_rng(count)
    table = rng.standard_normal((TABLE_ROWS, 64)).astype(np.float32)
    indices = rng.integers(0, TABLE_ROWS, count)
    t, i = to_torch(table), to_torch(indices)
    rows = []
    row = {"op": "gather", "indices": count}
    guarded("ours", lambda: timed_stream(lambda: gs.gather(t, i, axis=0)), row)
    guarded("ours_eager", lambda: timed_stream(eager_check(lambda: gs.gather(t, i, axis=0))), row)
    guarded("native", lambda: timed_stream(lambda: torch.index_select(t, 0, i)), row)
    got = lambda: to_numpy(gs.gather(t, i, axis=0), table.dtype)  # noqa: E731
    row["exact"] = guarded("exact", lambda: same_bits(table[indices], got()), {})
    if jx is not None:
        jax, device = jx
        jt, ji = jax.device_put(table, device), jax.device_put(indices, device)
        import jax.numpy as jnp

        take_jit, ours_jit = jax.jit(lambda a, b: jnp.take(a, b, axis=0)), jax.jit(lambda a, b: gs.gather(a, b, axis=0))
        guarded("jax_take_jit", lambda: timed(lambda: take_jit(jt, ji).block_until_ready()), row)
        guarded("ours_jax", lambda: timed(lambda: gs.gather(jt, ji, axis=0).block_until_ready()), row)
        guarded("ours_jax_jit", lambda: timed(lambda: ours_jit(jt, ji).block_until_ready()), row)
    rows.append(row)
    # GatherElements: (count/64 rows, 64) indices along axis 0 against torch.gather
    er = max(count // 64, 1)
    eidx = to_torch(rng.integers(0, TABLE_ROWS, (er, 64)))
    row = {"op": "gather_elements", "indices": er * 64}
    guarded("ours", lambda: timed_stream(lambda: gs.gather_elements(t, eidx, axis=0)), row)
    guarded("ours_eager", lambda: timed_stream(eager_check(lambda: gs.gather_elements(t, eidx, axis=0))), row)
    guarded("native", lambda: timed_stream(lambda: torch.gather(t, 0, eidx)), row)
    rows.append(row)
    return rows


SCATTER_COLUMNS = ["ours", "fold", "native", "det", "rounds", "jax_at", "jax_at_jit", "ours_jax", "ours_jax_jit"]


def fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    if value is None:
        return ""
    return str(value).replace("|", "/")


def ratio(row, a, b) -> str:
    x, y = row.get(a), row.get(b)
    return f"{x / y:.2f}" if isinstance(x, float) and isinstance(y, float) and y > 0 else ""


def table(rows, device_name) -> str:
    lines = [f"# Issue 39 GPU sweep — {device_name}", "",
             f"torch {torch.__version__}, triton {getattr(_torch_triton.triton, '__version__', 'absent')}, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; times in ms (median); "
             f"{ELEMENTS:,} update elements a scatter cell", ""]  # fmt: skip
    head = ["width", "dups", "depth", "dtype", "red", *SCATTER_COLUMNS, "ours/native", "ours/det", "exact"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in (r for r in rows if r["op"] == "scatter"):
        cells = [r["width"], r["dups"], r["depth"], r["dtype"], r["reduction"], *(r.get(c) for c in SCATTER_COLUMNS),
                 ratio(r, "ours", "native"), ratio(r, "ours", "det"),
                 "/".join(str(r[k]) for k in ("exact", "exact_jax", "exact_jax_jit") if k in r)]  # fmt: skip
        lines.append("| " + " | ".join(fmt(c) for c in cells) + " |")
    lines += ["", "exact: ours on torch / JAX eager / JAX jitted, bit for bit against the NumPy kernel.", ""]
    lines += ["Gathers: ms a call, 20 calls back to back then one wait (a host sync inside a call shows); "
              "ours: the deferred bounds check (the default on CUDA), ours_eager: set_bounds_check('eager').", ""]
    head = ["op", "indices", "ours", "ours_eager", "native", "ours/native", "eager/native", "jax_take_jit",
            "ours_jax", "ours_jax_jit", "exact"]  # fmt: skip
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in (r for r in rows if r["op"] != "scatter"):
        cells = [r["op"], r["indices"], r.get("ours"), r.get("ours_eager"), r.get("native"),
                 ratio(r, "ours", "native"), ratio(r, "ours_eager", "native"),
                 r.get("jax_take_jit"), r.get("ours_jax"), r.get("ours_jax_jit"), r.get("exact")]  # fmt: skip
        lines.append("| " + " | ".join(fmt(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    out = Path(OPTS.out)
    out.mkdir(parents=True, exist_ok=True)
    device_name = torch.cuda.get_device_name() if DEVICE == "cuda" else "CPU (Triton interpreter, --quick)"
    print(f"bench_gpu: {device_name}, budget {OPTS.budget:.0f} s", flush=True)
    jx = jax_setup()
    rows: list[dict] = []

    def save():
        (out / "gpu_results.json").write_text(json.dumps({"device": device_name, "rows": rows}, indent=1))
        (out / "gpu_table.md").write_text(table(rows, device_name))

    for count in GATHERS:
        try:
            rows.extend(gather_cells(count, jx))
        except Exception:  # noqa: BLE001
            traceback.print_exc()
    # Two passes, so that the budget drops JAX columns before torch cells: torch first, then JAX.
    for dtype in DTYPES:
        for reduction in REDUCTIONS:
            for width in WIDTHS:
                for dups in DUPS:
                    if left() <= 0:
                        rows.append({"op": "scatter", "width": width, "dups": dups, "dtype": dtype,
                                     "reduction": reduction, "depth": None, "ours": "skip: budget"})  # fmt: skip
                        continue
                    try:
                        rows.append(scatter_cell(width, dups, dtype, reduction))
                        print(json.dumps(rows[-1]), flush=True)
                    except Exception:  # noqa: BLE001
                        traceback.print_exc()
                    save()
    for row in rows:
        if jx is None or row["op"] != "scatter" or row.get("depth") is None or left() <= 0:
            continue
        try:
            jax_cells(jx, row)
            print(json.dumps(row), flush=True)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
        save()
    save()
    print(table(rows, device_name))
    print(f"bench_gpu: {time.perf_counter() - START:.0f} s; wrote {out / 'gpu_table.md'}, {out / 'gpu_results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
