"""A reused ``gather_scatter.Session`` against a reused plain ``onnx.reference.ReferenceEvaluator``.

    python benchmarks/bench_session.py [--rounds N] [--per-round M]

Models: a one-Gather model (a 3-element int64 vector at a 0-d index, built with onnx.helper)
and every ``*.onnx`` in ``tests/data`` and ``src/gather_scatter/data`` with its
``*_inputs.npz``. Each is built once per engine; then rounds alternate the engines (ours first
in even rounds, theirs in odd ones), each round timing M runs of each; the figures are the
medians over rounds of the time per run. The target (issue 16) is ratio <= 1.0 everywhere.
Where plain onnx.reference cannot run a model (our kernels exist for such cases), its column
says so and the ratio is left out. A measurement, never an assertion.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
from onnx.reference import ReferenceEvaluator

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = [ROOT / "tests" / "data", ROOT / "src" / "gather_scatter" / "data"]


def one_gather() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    node = oh.make_node("Gather", ["data", "index"], ["y"], name="gather")
    graph = oh.make_graph(
        [node], "one_gather",
        [oh.make_tensor_value_info("data", onnx.TensorProto.INT64, [3]),
         oh.make_tensor_value_info("index", onnx.TensorProto.INT64, [])],
        [oh.make_tensor_value_info("y", onnx.TensorProto.INT64, [])],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)])
    return model, {"data": np.array([10, 20, 30], np.int64), "index": np.array(1, np.int64)}


def models() -> list[tuple[str, onnx.ModelProto, dict[str, np.ndarray]]]:
    found = [("one_gather", *one_gather())]
    for folder in FOLDERS:
        for path in sorted(folder.glob("*.onnx")):
            with np.load(path.with_name(f"{path.stem}_inputs.npz")) as archive:
                feeds = dict(archive)
            found.append((path.stem, onnx.load(str(path)), feeds))
    return found


def ours(model: onnx.ModelProto):
    try:
        from gather_scatter import Session
    except ImportError:  # before Session: what it replaces, a reused Evaluator and run_model's input check
        from gather_scatter.reference import Evaluator, _check_inputs

        evaluator = Evaluator(model)
        return lambda feeds: evaluator.run(None, _check_inputs(model.graph, feeds))
    session = Session(model)
    return lambda feeds: session.run(None, feeds)


def theirs(model: onnx.ModelProto):
    evaluator = ReferenceEvaluator(model)
    return lambda feeds: evaluator.run(None, feeds)


def per_run(run, feeds, count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        run(feeds)
    return (time.perf_counter() - start) / count


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    parser.add_argument("--per-round", type=int, default=0,
                        help="runs per round and engine (default: about 20 ms of runs)")
    args = parser.parse_args(argv)
    print(f"{'model':<20} {'ours':>11} {'onnx.reference':>15} {'ratio':>7}")
    for name, model, feeds in models():
        mine = ours(model)
        try:
            plain = theirs(model)
            plain(feeds)
        except Exception as exc:  # noqa: BLE001 - plain onnx.reference fails where ours is needed
            plain, failure = None, f"fails ({type(exc).__name__})"
        mine(feeds)
        count = args.per_round or max(1, int(0.02 / per_run(mine, feeds, 3)))
        times: dict[str, list[float]] = {"ours": [], "theirs": []}
        for i in range(args.rounds):
            order = [("ours", mine), ("theirs", plain)][:: 1 if i % 2 == 0 else -1]
            for key, run in order:
                if run is not None:
                    times[key].append(per_run(run, feeds, count))
        t_ours = statistics.median(times["ours"])
        if plain is None:
            print(f"{name:<20} {t_ours * 1e6:9.1f}us {failure:>15} {'-':>7}")
            continue
        t_theirs = statistics.median(times["theirs"])
        print(f"{name:<20} {t_ours * 1e6:9.1f}us {t_theirs * 1e6:13.1f}us {t_ours / t_theirs:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
