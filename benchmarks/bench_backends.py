"""Time gather_scatter on PyTorch tensors and JAX arrays against each library's native op for
the same work, on the same device.

    python benchmarks/bench_backends.py [--quick] [--json PATH] [--repeats N] [--only NAME ...]
                                        [--device cpu|cuda] [--library torch|jax ...]

Per case the two run interleaved (ours, native, ours, ...) and the median of the repeats is
reported with the ratio ours / native (the issue's target: 1.2 or less where the work is the
same). "The same work" means the native op is handed indices it can use as they are: ours also
checks every index (one reduction and a one-bool host transfer), resolves negatives and, for
reductions with duplicates, keeps ONNX's row-major order (torch's native ``index_add_`` does so
on the CPU too). JAX runs twice: eagerly (op by op, as a user calls it) and under ``jax.jit``,
where our bounds check becomes a ``where`` (see ``gather_scatter.backends.jax``). Results of the
two are compared bit for bit before timing. Timings are measurements, never assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

# Steady state, as a loop of calls sees it: every kernel compiled on its first call (by default a
# kernel takes NumPy's path until its calls pay for the compile: docs/performance.md, First calls).
if __name__ == "__main__":  # as a module (the smoke tests) the importer's setting stands
    os.environ.setdefault("GATHER_SCATTER_COMPILED", "eager")

import gather_scatter as gs  # noqa: E402


@dataclass
class Case:
    name: str
    ours: Callable[[], Any]
    native: Callable[[], Any]
    note: str = ""


def _sync(library: str, value: Any) -> Any:
    if library == "jax":
        return value.block_until_ready()
    import torch

    if value.device.type == "cuda":
        torch.cuda.synchronize()
    return value


def _arrays(quick: bool, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    rows, width, n = (4096, 128, 2048) if quick else (32768, 512, 16384)
    table = rng.standard_normal((rows, width), dtype=np.float32)
    return {
        "table": table,
        "ids": rng.integers(0, rows, n),
        "pairs": np.stack([rng.integers(0, rows, n), rng.integers(0, width, n)], axis=1),
        "dups": rng.integers(0, rows // 64, (n, 1)),  # 64x fewer rows than updates: duplicates
        "distinct": rng.permutation(rows)[:n, None],
        "rows_upd": rng.standard_normal((n, width), dtype=np.float32),
        "elem_idx": rng.integers(0, width, (rows, width // 4)),
        "elem_upd": rng.standard_normal((rows, width // 4), dtype=np.float32),
        "cache": rng.standard_normal((4, 8, 1024 if not quick else 256, 64), dtype=np.float32),
        "step": rng.standard_normal((4, 8, 1, 64), dtype=np.float32),
        "write": np.array([5, 100, 17, 200]),
    }


def torch_cases(a: dict[str, np.ndarray], device: str) -> list[Case]:
    import torch

    t = {k: torch.from_numpy(v).to(device) for k, v in a.items()}
    table, ids, pairs = t["table"], t["ids"], t["pairs"]
    dups, distinct, upd = t["dups"], t["distinct"], t["rows_upd"]
    eidx, eupd, cache, step, write = t["elem_idx"], t["elem_upd"], t["cache"], t["step"], t["write"]
    positions = write[:, None] + torch.zeros(1, dtype=torch.int64, device=device)

    def kv_native():
        out = cache.clone()
        out[torch.arange(4, device=device)[:, None], :, positions] = step.permute(0, 2, 1, 3)
        return out

    return [
        Case("gather_rows", lambda: gs.gather(table, ids), lambda: torch.index_select(table, 0, ids)),
        Case("gather_nd_elements", lambda: gs.gather_nd(table, pairs), lambda: table[pairs[:, 0], pairs[:, 1]]),
        Case("gather_nd_rows", lambda: gs.gather_nd(table, distinct), lambda: table[distinct[:, 0]]),
        Case("gather_elements", lambda: gs.gather_elements(table, eidx, axis=1), lambda: torch.gather(table, 1, eidx)),
        Case("scatter_nd_none_distinct", lambda: gs.scatter_nd(table, distinct, upd),
             lambda: table.index_copy(0, distinct[:, 0], upd), "native is told the rows are distinct"),
        Case("scatter_nd_add_dups", lambda: gs.scatter_nd(table, dups, upd, reduction="add"),
             lambda: table.index_add(0, dups[:, 0], upd)),
        Case("scatter_nd_max_dups", lambda: gs.scatter_nd(table, dups, upd, reduction="max"),
             lambda: table.index_reduce(0, dups[:, 0], upd, "amax")),
        Case("scatter_elements_add", lambda: gs.scatter_elements(table, eidx, eupd, axis=1, reduction="add"),
             lambda: table.scatter_add(1, eidx, eupd)),
        Case("tensor_scatter_decode", lambda: gs.tensor_scatter(cache, step, write), kv_native),
    ]


def jax_cases(a: dict[str, np.ndarray], jit: bool) -> list[Case]:
    import jax
    import jax.numpy as jnp

    j = {k: jnp.asarray(v) for k, v in a.items()}
    table, ids, pairs = j["table"], j["ids"], j["pairs"]
    dups, distinct, upd = j["dups"], j["distinct"], j["rows_upd"]
    eidx, eupd, cache, step, write = j["elem_idx"], j["elem_upd"], j["cache"], j["step"], j["write"]

    def kv_native(cache, step, write):
        return jax.vmap(lambda c, s, w: jax.lax.dynamic_update_slice(c, s, (0, w, 0)))(cache, step, write)

    pairs_ = [
        ("gather_rows", lambda t, i: gs.gather(t, i), lambda t, i: jnp.take(t, i, axis=0), (table, ids)),
        ("gather_nd_elements", lambda t, i: gs.gather_nd(t, i), lambda t, i: t[i[:, 0], i[:, 1]], (table, pairs)),
        ("gather_nd_rows", lambda t, i: gs.gather_nd(t, i), lambda t, i: t[i[:, 0]], (table, distinct)),
        ("gather_elements", lambda t, i: gs.gather_elements(t, i, axis=1),
         lambda t, i: jnp.take_along_axis(t, i, axis=1), (table, eidx)),
        ("scatter_nd_none_distinct", lambda t, i, u: gs.scatter_nd(t, i, u),
         lambda t, i, u: t.at[i[:, 0]].set(u, unique_indices=True), (table, distinct, upd)),
        ("scatter_nd_add_dups", lambda t, i, u: gs.scatter_nd(t, i, u, reduction="add"),
         lambda t, i, u: t.at[i[:, 0]].add(u), (table, dups, upd)),
        ("scatter_nd_max_dups", lambda t, i, u: gs.scatter_nd(t, i, u, reduction="max"),
         lambda t, i, u: t.at[i[:, 0]].max(u), (table, dups, upd)),
        ("scatter_elements_add", lambda t, i, u: gs.scatter_elements(t, i, u, axis=1, reduction="add"),
         lambda t, i, u: t.at[jnp.arange(t.shape[0])[:, None], i].add(u), (table, eidx, eupd)),
        ("tensor_scatter_decode", lambda c, s, w: gs.tensor_scatter(c, s, w), kv_native, (cache, step, write)),
    ]
    cases = []
    for name, ours, native, args in pairs_:
        if jit:
            ours, native = jax.jit(ours), jax.jit(native)
        cases.append(Case(name, (lambda f, x: lambda: f(*x))(ours, args), (lambda f, x: lambda: f(*x))(native, args),
                          "native is told the rows are distinct" if "distinct" in name else ""))
    return cases


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def time_case(library: str, case: Case, repeats: int) -> dict:
    expected, got = _to_numpy(_sync(library, case.native())), _to_numpy(_sync(library, case.ours()))
    same = expected.shape == got.shape and bool(np.array_equal(expected.view(np.uint32), got.view(np.uint32)))
    for _ in range(2):  # warm-up (jit compiles, caches fill)
        _sync(library, case.ours()), _sync(library, case.native())
    ours, native = [], []
    for _ in range(repeats):
        for fn, times in ((case.ours, ours), (case.native, native)):
            start = time.perf_counter()
            _sync(library, fn())
            times.append(time.perf_counter() - start)
    o, n = statistics.median(ours), statistics.median(native)
    return {"case": case.name, "ours_ms": o * 1e3, "native_ms": n * 1e3, "ratio": o / n, "same_bits": same,
            "note": case.note}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a few repeats (seconds)")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    parser.add_argument("--only", nargs="*", default=None, help="case names to run")
    parser.add_argument("--device", default="cpu", help="torch device (cpu, cuda); JAX uses its default")
    parser.add_argument("--library", nargs="*", default=["torch", "jax", "jax-jit"],
                        choices=["torch", "jax", "jax-jit"])
    args = parser.parse_args(argv)
    repeats = args.repeats or (5 if args.quick else 25)
    arrays = _arrays(args.quick)
    rows = []
    for library in args.library:
        try:
            if library == "torch":
                cases = torch_cases(arrays, args.device)
            else:
                import jax

                jax.config.update("jax_enable_x64", True)  # int64 indices, as ONNX has them
                cases = jax_cases(arrays, jit=library == "jax-jit")
        except ImportError as exc:
            print(f"{library}: not installed ({exc})", file=sys.stderr)
            continue
        for case in cases:
            if args.only and case.name not in args.only:
                continue
            row = {"library": library, **time_case(library.split("-")[0], case, repeats)}
            rows.append(row)
            print(f"{library:8} {row['case']:26} ours {row['ours_ms']:9.3f} ms  native {row['native_ms']:9.3f} ms  "
                  f"ours/native {row['ratio']:5.2f}{'' if row['same_bits'] else '  (bits differ)'}", flush=True)
    print("\n| library | case | ours | native | ours / native |\n| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['library']} | {r['case']} | {r['ours_ms']:.3f} ms | {r['native_ms']:.3f} ms | {r['ratio']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": platform.platform(), "python": sys.version, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
