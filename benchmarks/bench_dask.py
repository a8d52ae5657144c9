"""Larger than memory: gather and scatter-add 1M random rows of a zarr table on disk through
dask, with the peak resident memory of each step, next to the same work on a NumPy memmap.

    python benchmarks/bench_dask.py [--dir PATH] [--rows N] [--width W] [--chunk-rows R]
                                    [--indices N] [--json PATH] [--keep]

Defaults: a float32 table of 16,777,216 x 64 (4 GiB) in chunks of 262,144 rows (64 MiB),
written once to ``--dir`` (default: a temporary folder, removed at the end unless ``--keep``)
as zarr and as a raw file for the memmap. Each step runs in a fresh Python process, so its peak
resident set (``ru_maxrss``) is its own: the gathered rows are stored to a zarr array on disk
(1M x 64 float32 = 256 MiB would not fit the budget twice), the scatter-add writes in place
(``out=`` the table: only the blocks that change). The memmap steps map the whole file, so their
resident set counts the page cache pages they touch. Figures are measurements, never assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

STEPS = ("dask-gather", "dask-scatter-add", "memmap-gather", "memmap-scatter-add")


def build(folder: str, rows: int, width: int, chunk_rows: int) -> None:
    """The table as zarr (uncompressed chunks) and as a raw float32 file, value = row + col / 100."""
    import numpy as np
    import zarr

    z = _create(zarr, os.path.join(folder, "table.zarr"), (rows, width), (chunk_rows, width))
    raw = np.lib.format.open_memmap(os.path.join(folder, "table.npy"), mode="w+", dtype=np.float32,
                                    shape=(rows, width))
    cols = (np.arange(width, dtype=np.float32) / np.float32(100))[None, :]
    for lo in range(0, rows, chunk_rows):
        hi = min(rows, lo + chunk_rows)
        block = np.arange(lo, hi, dtype=np.float32)[:, None] + cols
        z[lo:hi] = block
        raw[lo:hi] = block
    raw.flush()


def _peak_rss() -> int:
    """This process's peak resident set in bytes: VmHWM, which starts anew at exec (ru_maxrss
    carries the forking parent's over)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _plus_ones(value, adds: int):
    """``value`` with ``adds`` ones added one at a time, in float32 (the scatter's order)."""
    import numpy as np

    for _ in range(adds):
        value = value + np.float32(1)
    return value


def _create(zarr, path: str, shape: tuple, chunks: tuple):
    """A new uncompressed float32 zarr array (zarr 3's create_array, or zarr 2's open_array)."""
    if hasattr(zarr, "create_array"):
        return zarr.create_array(store=path, shape=shape, chunks=chunks, dtype="float32", compressors=None,
                                 overwrite=True)
    return zarr.open_array(path, mode="w", shape=shape, chunks=chunks, dtype="float32", compressor=None)


def step(name: str, folder: str, n: int, seed: int) -> dict:
    """One step, timed, in this process; returns its figures."""
    import numpy as np

    import gather_scatter as gs

    rng = np.random.default_rng(seed)
    table = os.path.join(folder, "table.zarr")
    start_rss = _peak_rss()
    if name.startswith("dask"):
        import dask
        import dask.array as da
        import zarr

        z = zarr.open_array(table, mode="r+")
        indices = rng.integers(0, z.shape[0], n)
        data = da.from_zarr(z)
        start = time.perf_counter()
        if name == "dask-gather":
            out = _create(zarr, os.path.join(folder, "rows.zarr"), (n, z.shape[1]), (z.chunks[0], z.shape[1]))
            lazy = gs.gather(data, indices)
            tasks = len(lazy.dask)
            with dask.config.set(scheduler="threads"):
                gs.gather(data, indices, out=out)
            check = out[n - 1]
            expected = z[int(indices[-1])]
        else:
            updates = np.ones((n, z.shape[1]), np.float32)
            before = z[int(indices[-1])]
            lazy = gs.scatter_nd(data, indices[:, None], updates, reduction="add")
            tasks = len(lazy.dask)
            del lazy
            with dask.config.set(scheduler="threads"):
                gs.scatter_nd(data, indices[:, None], updates, reduction="add", out=z)
            row = int(indices[-1])
            check = z[row]
            expected = _plus_ones(before, np.count_nonzero(indices == row))
    else:
        mm = np.load(os.path.join(folder, "table.npy"), mmap_mode="r+")
        indices = rng.integers(0, mm.shape[0], n)
        tasks = 0
        start = time.perf_counter()
        if name == "memmap-gather":
            rows = gs.gather(mm, indices)
            check = rows[-1]
            expected = mm[int(indices[-1])]
        else:
            before = np.array(mm[int(indices[-1])])
            gs.scatter_nd(mm, indices[:, None], np.ones((n, mm.shape[1]), np.float32), reduction="add", out=mm)
            mm.flush()
            row = int(indices[-1])
            check = mm[row]
            expected = _plus_ones(before, np.count_nonzero(indices == row))
    seconds = time.perf_counter() - start
    peak = _peak_rss()
    return {"step": name, "rows": n, "seconds": seconds, "rows_per_second": n / seconds, "peak_rss_bytes": peak,
            "rss_before_bytes": start_rss, "tasks": tasks, "correct": bool(np.array_equal(check, expected))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=None, help="where the table lives (default: a temporary folder)")
    parser.add_argument("--rows", type=int, default=16_777_216)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--chunk-rows", type=int, default=262_144)
    parser.add_argument("--indices", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the table (and reuse it next time)")
    parser.add_argument("--step", choices=STEPS, help=argparse.SUPPRESS)  # one step, in a child process
    args = parser.parse_args(argv)
    if args.step:
        print(json.dumps(step(args.step, args.dir, args.indices, args.seed)))
        return 0
    folder = args.dir or tempfile.mkdtemp(prefix="gs-dask-bench-")
    os.makedirs(folder, exist_ok=True)
    size = args.rows * args.width * 4
    try:
        if not os.path.exists(os.path.join(folder, "table.npy")):
            start = time.perf_counter()
            build(folder, args.rows, args.width, args.chunk_rows)
            print(f"built a {size / 2**30:.2f} GiB float32 table ({args.rows} x {args.width}, chunks of "
                  f"{args.chunk_rows} rows) as zarr and .npy in {time.perf_counter() - start:.1f} s", flush=True)
        results = []
        for name in STEPS:
            command = [sys.executable, __file__, "--step", name, "--dir", folder, "--indices", str(args.indices),
                       "--seed", str(args.seed)]
            line = subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            row = json.loads(line)
            results.append(row)
            print(f"{name:20} {row['rows']} rows in {row['seconds']:7.2f} s  {row['rows_per_second']:12,.0f} rows/s  "
                  f"peak RSS {row['peak_rss_bytes'] / 2**20:7.0f} MiB  tasks {row['tasks']}  "
                  f"{'correct' if row['correct'] else 'WRONG'}", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"table_bytes": size, "rows": args.rows, "width": args.width, "chunk_rows": args.chunk_rows,
                           "results": results}, f, indent=1)
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
