"""GatherBlockQuantized against onnxruntime's CPU kernel, swept over the shapes exports send.

Each cell: a table type (4-bit and 2-bit packed uint8, 8-bit uint8 with zero points, int4,
float8e4m3fn), a table shape (hidden x vocab: a small model's, Qwen2-1.5B's, a 4096-wide
one's), ids per call (a decode step, a batch, a prompt), output type (float32, float16) and
thread count, timed interleaved with onnxruntime in the same process (a one-node model, its
table, scales and zero points initializers, the ids a feed), each side warmed past 120 calls
(our kernels load numba at a process's 100th small call). Prints one row per cell and the
worst and median ratio ours/onnxruntime; ``--json`` keeps the rows.

    python benchmarks/bench_quantized.py            # the sweep (a few minutes)
    python benchmarks/bench_quantized.py --quick    # small tables, a smoke test (seconds)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper as oh
from onnx import numpy_helper as nh

# Steady state, as a loop of calls sees it: every kernel compiled on its first call (by default a
# kernel takes NumPy's path until its calls pay for the compile: docs/performance.md, First calls).
if __name__ == "__main__":  # as a module (the smoke tests) the importer's setting stands
    os.environ.setdefault("GATHER_SCATTER_COMPILED", "eager")

import gather_scatter as gs  # noqa: E402

BLOCK = 32


def _table(kind: str, vocab: int, hidden: int, rng: np.random.Generator) -> tuple[dict, dict]:
    """The node's constant inputs (data, scales[, zero_points]) and its attributes."""
    blocks = -(-hidden // BLOCK)
    scales = (rng.random((vocab, blocks), dtype=np.float32) + 0.5) / 64
    if kind in ("4bit", "2bit"):
        bits = 4 if kind == "4bit" else 2
        data = rng.integers(0, 256, (vocab, hidden * bits // 8), dtype=np.uint8)
        return {"data": data, "scales": scales}, {"bits": bits, "block_size": BLOCK}
    if kind == "8bit_zp":
        data = rng.integers(0, 256, (vocab, hidden), dtype=np.uint8)
        zero_points = rng.integers(0, 256, (vocab, blocks), dtype=np.uint8)
        return {"data": data, "scales": scales, "zero_points": zero_points}, {"bits": 8, "block_size": BLOCK}
    if kind == "int4":
        data = rng.integers(-8, 8, (vocab, hidden)).astype(ml_dtypes.int4)
        return {"data": data, "scales": scales}, {"bits": 4, "block_size": BLOCK}
    data = (rng.standard_normal((vocab, hidden)) * 4).astype(ml_dtypes.float8_e4m3fn)
    return {"data": data, "scales": scales}, {"block_size": BLOCK}


def _session(constants: dict, attrs: dict, threads: int) -> ort.InferenceSession:
    names = ["data", "ids", "scales"] + (["zero_points"] if "zero_points" in constants else [])
    out_type = oh.np_dtype_to_tensor_dtype(constants["scales"].dtype)
    node = oh.make_node("GatherBlockQuantized", names, ["out"], domain="com.microsoft", **attrs)
    graph = oh.make_graph(
        [node],
        "g",
        [oh.make_tensor_value_info("ids", onnx.TensorProto.INT64, None)],
        [oh.make_tensor_value_info("out", out_type, None)],
        initializer=[nh.from_array(value, name) for name, value in constants.items()],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21), oh.make_opsetid("com.microsoft", 1)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _interleaved(ours, theirs, rounds: int) -> tuple[float, float]:
    """Median seconds per call of each, in alternating batches sized to ~20 ms."""
    for _ in range(120):
        ours()
        theirs()
    start = time.perf_counter()
    ours()
    per_call = max(time.perf_counter() - start, 1e-6)
    batch = max(1, min(1000, int(0.02 / per_call)))
    a, b = [], []
    for _ in range(rounds):
        for fn, times in ((ours, a), (theirs, b)):
            start = time.perf_counter()
            for _ in range(batch):
                fn()
            times.append((time.perf_counter() - start) / batch)
    return statistics.median(a), statistics.median(b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small tables, few rounds: a smoke test")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--json", default=None, help="write the rows here")
    args = parser.parse_args()
    shapes = [(1000, 128)] if args.quick else [(1000, 128), (151_936, 1536), (32_000, 4096)]
    ids_counts = [1, 2048] if args.quick else [1, 64, 2048]
    rounds = 2 if args.quick else args.rounds
    rng = np.random.default_rng(0)
    rows = []
    print(f"{'table':8} {'vocab x hidden':>16} {'ids':>5} {'out':>8} {'thr':>3} {'ours':>10} {'ort':>10} {'ratio':>6}")
    for vocab, hidden in shapes:
        for kind in ("4bit", "2bit", "8bit_zp", "int4", "fp8"):
            constants, attrs = _table(kind, vocab, hidden, rng)
            for out in (np.float32, np.float16):
                consts = {**constants, "scales": constants["scales"].astype(out)}
                for threads in args.threads:
                    gs.set_num_threads(threads)
                    session = _session(consts, attrs, threads)
                    for n in ids_counts:
                        ids = rng.integers(0, vocab, (1, n))
                        feeds = {"ids": ids}
                        ours_fn = lambda: gs.gather_block_quantized(  # noqa: E731
                            consts["data"], ids, consts["scales"], consts.get("zero_points"), **attrs
                        )
                        theirs_fn = lambda: session.run(None, feeds)  # noqa: E731
                        assert np.array_equal(ours_fn().view(np.uint8), theirs_fn()[0].view(np.uint8))
                        ours, theirs = _interleaved(ours_fn, theirs_fn, rounds)
                        row = dict(table=kind, vocab=vocab, hidden=hidden, ids=n, out=np.dtype(out).name,
                                   threads=threads, ours_ms=ours * 1e3, ort_ms=theirs * 1e3, ratio=ours / theirs)
                        rows.append(row)
                        print(f"{kind:8} {vocab:>8} x {hidden:<6} {n:>5} {row['out']:>8} {threads:>3} "
                              f"{ours * 1e3:>8.3f}ms {theirs * 1e3:>8.3f}ms {ours / theirs:>6.2f}")
    ratios = sorted(rows, key=lambda r: r["ratio"])
    worst = ratios[-1]
    print(f"{len(rows)} cells: median ratio {statistics.median(r['ratio'] for r in rows):.2f}, "
          f"worst {worst['ratio']:.2f} ({worst['table']} {worst['vocab']}x{worst['hidden']}, {worst['ids']} ids, "
          f"{worst['out']}, {worst['threads']} thread(s)); ort {ort.__version__}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
