"""A reused ``gather_scatter.Session`` against a reused plain ``onnx.reference.ReferenceEvaluator``.

    python benchmarks/bench_session.py [MODEL ...] [--rounds N] [--per-round M]

Models: a one-Gather model (a 3-element int64 vector at a 0-d index, built with onnx.helper)
and every ``*.onnx`` in ``tests/data`` and ``src/gather_scatter/data`` with its
``*_inputs.npz``. Each is built once per engine; then rounds alternate the engines (ours first
in even rounds, theirs in odd ones), each round timing M runs of each; the figures are the
medians over rounds of the time per run. The target (issue 16) is ratio <= 1.0 everywhere.
The right half times the model's nodes of the family alone (each engine's own, on the
inputs a run gives them): what the whole-model ratio owes to the kernels rather than to the
adapter. Where plain onnx.reference cannot run a model or a node (our kernels exist for such
cases), its column says "fails" and the ratio is left out. A measurement, never an assertion.
"""

from __future__ import annotations

import argparse
import functools
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
    from gather_scatter import Session

    session = Session(model)
    return session, lambda feeds: session.run(None, feeds)


FAMILY = {"Gather", "GatherND", "ScatterND", "GatherElements", "ScatterElements", "Scatter", "TensorScatter"}


def indexing_nodes(session, plain, feeds):
    """Two functions running the model's nodes of the family once each, on the inputs they
    get in a run: ours (as a Session runs them) and onnx.reference's (None where one fails)."""
    evaluator = session._evaluator
    values = evaluator.run(None, feeds, intermediate=True)
    calls = [(k, [values[name] for name in node.input]) for k, node in enumerate(evaluator.rt_nodes_)
             if node.op_type in FAMILY]

    def ours(_feeds):
        for k, args in calls:
            evaluator.rt_nodes_[k].run(*args)

    def theirs(_feeds):
        for k, args in calls:
            plain_nodes[k].run(*args)

    if plain is None:
        return ours, None
    plain_nodes = plain.rt_nodes_
    try:
        theirs(feeds)
    except Exception:  # noqa: BLE001
        return ours, None
    return ours, theirs


def per_run(run, feeds, count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        run(feeds)
    return (time.perf_counter() - start) / count


def _pair(mine: float, plain: float | None) -> str:
    if plain is None:
        return f"{mine * 1e6:9.1f}us {'fails':>11} {'-':>7}"
    return f"{mine * 1e6:9.1f}us {plain * 1e6:9.1f}us {mine / plain:7.2f}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="MODEL", help="only these models (default: all)")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    parser.add_argument("--per-round", type=int, default=0,
                        help="runs per round and engine (default: about 20 ms of runs)")
    args = parser.parse_args(argv)
    print(f"{'':<18} {'whole model, per run':^38} {'its indexing nodes, summed':^38}")
    print(f"{'model':<18} {'ours':>11} {'onnx.ref':>11} {'ratio':>7}     {'ours':>11} {'onnx.ref':>11} {'ratio':>7}")
    for name, model, feeds in models():
        if args.names and name not in args.names:
            continue
        session, mine = ours(model)
        try:
            reference = ReferenceEvaluator(model)
            plain = functools.partial(reference.run, None)
            plain(feeds)
        except Exception:  # noqa: BLE001 - plain onnx.reference fails where ours is needed
            reference, plain = None, None
        nodes_mine, nodes_plain = indexing_nodes(session, reference, feeds)
        mine(feeds)
        count = args.per_round or max(1, int(0.02 / per_run(mine, feeds, 3)))
        engines = {"ours": mine, "theirs": plain, "ours_nodes": nodes_mine, "theirs_nodes": nodes_plain}
        times: dict[str, list[float]] = {key: [] for key in engines}
        for i in range(args.rounds):
            order = list(engines.items())[:: 1 if i % 2 == 0 else -1]
            for key, run in order:
                if run is not None:
                    times[key].append(per_run(run, feeds, count))
        median = {key: statistics.median(t) if t else None for key, t in times.items()}
        print(f"{name:<18} {_pair(median['ours'], median['theirs'])}     "
              f"{_pair(median['ours_nodes'], median['theirs_nodes'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

