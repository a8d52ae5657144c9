"""The hosted Session (``Session(engine="onnxruntime")``, issue 25) against onnxruntime alone.

    python benchmarks/bench_hosted.py [--threads 2] [--rounds 7] [--zoo DIR] [--no-zoo]
                                      [--no-reference] [--only NAME ...] [--json PATH]

Models: every ``*.onnx`` of ``tests/data`` and ``src/gather_scatter/data`` with its inputs,
three the hosted Session exists for (a float16 ScatterElements add, a bfloat16 ScatterND add
and a Gather of string rows, which onnxruntime fails or answers wrongly), two with a routed
node in a control-flow body (an If whose then-branch holds a routed ScatterND and 20 Relu
after it, and a Loop of 4 iterations whose body does the same), and the zoo of
``hosted_models.py`` (real architectures exported with the dynamo and TorchScript exporters,
random weights; needs torch) built into ``--zoo``.

Per model, built once each: an onnxruntime ``InferenceSession`` at ``--threads`` intra-op
threads (default options otherwise), the hosted Session at the same count, and today's
``Session`` (engine="reference"). Rounds alternate onnxruntime and the hosted Session (which
goes first alternates too), each timing a batch of runs sized to ~20 ms; the figures are the
medians over rounds of the time per run. The reference Session is timed on 3 runs (it is
slow). ``equal``: ``bitwise`` where the hosted outputs are onnxruntime's bit for bit,
``close`` within rtol 1e-4 / atol 1e-5, ``spec`` where onnxruntime fails or is wrong and the
hosted outputs equal ``run_model``'s, ``spec~`` where they are within that tolerance of
``run_model``'s (the operators outside the family rounded by onnxruntime, not onnx.reference).

Then two measurements of what the partition costs: the ``index_add`` target (200,000 rows of
8 float32 pooled into 64 segments on 2 threads: how many of 100 runs of each differ from the
spec's loop, as ``ort_race.py`` counts them, and the time ratio), and the cost of one boundary
(a chain of Relu and Gather nodes with every Gather routed, ``route="all"``, against
onnxruntime running the same chain).

A measurement, never an assertion: the targets are in the issue's closing note.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import onnxruntime as ort

# Steady state, as a loop of runs sees it: every kernel compiled on its first call (by default a
# kernel takes NumPy's path until its calls pay for the compile: docs/performance.md, First calls).
if __name__ == "__main__":  # as a module (the smoke tests) the importer's setting stands
    os.environ.setdefault("GATHER_SCATTER_COMPILED", "eager")

import gather_scatter as gs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = [ROOT / "tests" / "data", ROOT / "src" / "gather_scatter" / "data"]
TP = onnx.TensorProto


def _model(nodes, inputs, outputs, opset=18):
    graph = oh.make_graph(nodes, "g", inputs, outputs)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])


def _half_pool(op_type: str, half: int, np_half, index_shape: list[int], rng) -> tuple[onnx.ModelProto, dict]:
    """Cast to ``half``, a ``reduction='add'`` of 4,096 updates into 64 rows of 16, Cast back."""
    f = oh.make_tensor_value_info
    attrs = {"axis": 0} if op_type == "ScatterElements" else {}
    nodes = [
        oh.make_node("Cast", ["x"], ["h"], to=half),
        oh.make_node(op_type, ["h", "k", "u"], ["s"], reduction="add", name="pool", **attrs),
        oh.make_node("Cast", ["s"], ["y"], to=TP.FLOAT),
    ]
    model = _model(nodes, [f("x", TP.FLOAT, [64, 16]), f("k", TP.INT64, index_shape), f("u", half, [4096, 16])],
                   [f("y", TP.FLOAT, [64, 16])])
    feeds = {"x": rng.standard_normal((64, 16)).astype(np.float32), "k": rng.integers(0, 64, index_shape),
             "u": rng.standard_normal((4096, 16)).astype(np_half)}
    return model, feeds


def _special() -> list[tuple[str, onnx.ModelProto, dict]]:
    """Models where onnxruntime fails or answers wrongly: the hosted Session must run them."""
    import ml_dtypes

    f = oh.make_tensor_value_info
    rng = np.random.default_rng(0)
    out = [
        ("float16-scatter-elements-add", *_half_pool("ScatterElements", TP.FLOAT16, np.float16, [4096, 16], rng)),
        ("bfloat16-scatter-nd-add", *_half_pool("ScatterND", TP.BFLOAT16, ml_dtypes.bfloat16, [4096, 1], rng)),
    ]
    nodes = [oh.make_node("Gather", ["words", "ids"], ["rows"], axis=0, name="lookup"),
             oh.make_node("Identity", ["rows"], ["y"])]
    model = _model(nodes, [f("words", TP.STRING, [100, 4]), f("ids", TP.INT64, [32])], [f("y", TP.STRING, [32, 4])])
    words = np.array([[f"w{i}_{j}" for j in range(4)] for i in range(100)], dtype=object)
    out.append(("string-gather-rows", model, {"words": words, "ids": rng.integers(0, 100, 32)}))
    return out


def _routed_body(data: str, relus: int = 20) -> list[onnx.NodeProto]:
    """A ScatterND ``reduction='max'`` of float data (routed at every thread count: onnxruntime
    drops a NaN) of ``u`` into ``data``, then ``relus`` Relu nodes ending in ``out``."""
    nodes = [oh.make_node("ScatterND", [data, "k", "u"], ["s0"], reduction="max", name="scatter")]
    nodes += [oh.make_node("Relu", [f"s{i}"], [f"s{i + 1}" if i + 1 < relus else "out"]) for i in range(relus)]
    return nodes


def _control_flow() -> list[tuple[str, onnx.ModelProto, dict]]:
    """An If whose then-branch holds a routed ScatterND and 20 Relu after it (the scatter reads
    the outer scope), and a Loop of 4 iterations whose body does the same to its carried value."""
    f = oh.make_tensor_value_info
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((64, 8)).astype(np.float32), "k": rng.integers(0, 64, (16, 1)),
             "u": rng.standard_normal((16, 8)).astype(np.float32)}
    then = oh.make_graph(_routed_body("x"), "then", [],
                         [f("out", TP.FLOAT, [64, 8])])
    other = oh.make_graph([oh.make_node("Neg", ["x"], ["out2"])], "else", [], [f("out2", TP.FLOAT, [64, 8])])
    branch = oh.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="branch")
    inputs = [f("x", TP.FLOAT, [64, 8]), f("k", TP.INT64, [16, 1]), f("u", TP.FLOAT, [16, 8])]
    if_model = _model([branch], [*inputs, f("c", TP.BOOL, [])], [f("y", TP.FLOAT, [64, 8])])
    body = oh.make_graph([*_routed_body("v"), oh.make_node("Identity", ["cond"], ["cond_out"])], "body",
                         [f("i", TP.INT64, []), f("cond", TP.BOOL, []), f("v", TP.FLOAT, [64, 8])],
                         [f("cond_out", TP.BOOL, []), f("out", TP.FLOAT, [64, 8])])
    loop = oh.make_node("Loop", ["trips", "", "x"], ["y"], body=body, name="loop")
    loop_model = _model([loop], [*inputs, f("trips", TP.INT64, [])], [f("y", TP.FLOAT, [64, 8])])
    return [("if-routed-scatter-20-relu", if_model, {**feeds, "c": np.array(True)}),
            ("loop4-routed-scatter-20-relu", loop_model, {**feeds, "trips": np.array(4, np.int64)})]


def models(args) -> list[tuple[str, onnx.ModelProto | str, dict]]:
    found: list[tuple[str, onnx.ModelProto | str, dict]] = []
    for folder in FOLDERS:
        for path in sorted(folder.glob("*.onnx")):
            with np.load(path.with_name(f"{path.stem}_inputs.npz")) as archive:
                found.append((path.stem, str(path), dict(archive)))
    found.extend(_special())
    found.extend(_control_flow())
    if not args.no_zoo:
        try:
            import hosted_models
        except ImportError as exc:  # torch missing
            print(f"zoo skipped: {exc}", file=sys.stderr)
        else:
            for entry in hosted_models.build(args.zoo):
                found.append((entry.name, str(entry.path), entry.feeds))
    if args.only:
        found = [m for m in found if any(word in m[0] for word in args.only)]
    return found


def _ort_session(model, threads: int):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    source = model if isinstance(model, str) else model.SerializeToString()
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def _batch(run, feeds) -> int:
    """Warm ``run`` up, then size a batch to ~20 ms. The warm-up runs past 100 calls, where
    our kernels switch to their compiled loops (a compile must not land in a timed batch)."""
    start = time.perf_counter()
    for _ in range(150):
        run(feeds)
        if time.perf_counter() - start > 2.0:
            break
    start = time.perf_counter()
    run(feeds)
    once = max(time.perf_counter() - start, 1e-6)
    return max(1, min(2000, int(0.02 / once)))


def _per_run(run, feeds, count: int) -> float:
    start = time.perf_counter()
    for _ in range(count):
        run(feeds)
    return (time.perf_counter() - start) / count


def _equal(hosted: list, theirs: list | None, spec: list) -> str:
    def same(a, b) -> bool:
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and (a.tobytes() == b.tobytes() if a.dtype != object
                                                               else a.tolist() == b.tolist())

    if theirs is not None and all(same(a, b) for a, b in zip(hosted, theirs, strict=True)):
        return "bitwise"
    def close(a, b) -> bool:
        return np.asarray(a).dtype != object and np.allclose(
            np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=1e-4, atol=1e-5, equal_nan=True
        )

    if theirs is not None and all(close(a, b) for a, b in zip(hosted, theirs, strict=True)):
        return "close"
    if all(same(a, b) for a, b in zip(hosted, spec, strict=True)):
        return "spec"
    # onnxruntime wrong (a race of its threads), and the operators outside the family rounded by
    # onnxruntime here and by onnx.reference in run_model: the spec's answer within the tolerance
    if all(close(a, b) for a, b in zip(hosted, spec, strict=True)):
        return "spec~"
    return "DIFFERS"


def measure(name, model, feeds, args) -> dict:
    row: dict = {"model": name}
    hosted = gs.Session(model, engine="onnxruntime", threads=args.threads)
    plan = hosted.plan
    row.update(nodes=sum(len(s.nodes) for s in plan.steps), routed=len(plan.routed),
               boundaries=len(plan.steps) - 1, reasons=sorted({r.split(":")[0][:60] for r in plan.routed.values()}))
    spec_values = list(gs.run_model(model, feeds).values())
    try:
        theirs_session = _ort_session(model, args.threads)
        theirs_run = lambda feeds: theirs_session.run(None, feeds)  # noqa: E731
        theirs = theirs_run(feeds)
    except Exception as exc:  # noqa: BLE001 - onnxruntime cannot run it: that is why it is here
        theirs_run, theirs, row["onnxruntime"] = None, None, f"fails: {' '.join(str(exc).split())[:80]}"
    ours_run = lambda feeds: hosted.run(None, feeds)  # noqa: E731
    row["equal"] = _equal(ours_run(feeds), theirs, spec_values)
    times = {"ort": [], "hosted": []}
    runs = {"ort": theirs_run, "hosted": ours_run}
    counts = {k: _batch(r, feeds) for k, r in runs.items() if r is not None}
    for round_ in range(args.rounds):
        order = ["ort", "hosted"] if round_ % 2 == 0 else ["hosted", "ort"]
        for key in order:
            if runs[key] is not None:
                times[key].append(_per_run(runs[key], feeds, counts[key]))
    row["hosted_ms"] = statistics.median(times["hosted"]) * 1e3
    if times["ort"]:
        row["ort_ms"] = statistics.median(times["ort"]) * 1e3
        row["ratio"] = row["hosted_ms"] / row["ort_ms"]
    if args.reference:
        reference = gs.Session(model)
        row["reference_ms"] = min(_per_run(lambda f: reference.run(None, f), feeds, 1) for _ in range(3)) * 1e3
        row["speedup"] = row["reference_ms"] / row["hosted_ms"]
    return row


def index_add_target(threads: int, rounds: int, runs: int = 100) -> dict:
    """200,000 rows of 8 float32 pooled into 64 segments: the index_add case of docs/models.md.

    How many of ``runs`` runs differ from the spec's loop is ``ort_race.py``'s count, on the same
    model and feeds.
    """
    from ort_race import differing_runs, index_add_case

    path, feeds = index_add_case()
    want = [v.tobytes() for v in gs.run_model(path, feeds).values()]
    hosted = gs.Session(path, engine="onnxruntime", threads=threads)
    theirs = _ort_session(path, threads)
    differ = {
        "ort": differing_runs(theirs.run, feeds, want, runs)[0],
        "hosted": differing_runs(hosted.run, feeds, want, runs)[0],
    }
    times = {"ort": [], "hosted": []}
    for round_ in range(rounds):
        for key in (["ort", "hosted"] if round_ % 2 == 0 else ["hosted", "ort"]):
            run = theirs.run if key == "ort" else hosted.run
            times[key].append(_per_run(lambda f, run=run: run(None, f), feeds, 20))
    ort_ms, hosted_ms = (statistics.median(times[k]) * 1e3 for k in ("ort", "hosted"))
    return {"threads": threads, "runs": runs, "differ": differ, "ort_ms": ort_ms, "hosted_ms": hosted_ms,
            "ratio": hosted_ms / ort_ms, "routed": list(hosted.plan.routed)}


def boundary_cost(threads: int, rounds: int, links: int = 16) -> dict:
    """A chain of ``links`` (Relu, Gather) pairs on a (64, 8) float32 tensor, every Gather
    routed: 2 x links boundaries; the cost per boundary is the time over onnxruntime's
    divided by their number (onnxruntime's own Gathers, 1-2 us each, are in its time)."""
    f = oh.make_tensor_value_info
    nodes, last = [], "x"
    for k in range(links):
        nodes.append(oh.make_node("Relu", [last], [f"r{k}"]))
        nodes.append(oh.make_node("Gather", [f"r{k}", "ids"], [f"g{k}"], axis=0, name=f"gather{k}"))
        last = f"g{k}"
    model = _model(nodes, [f("x", TP.FLOAT, [64, 8]), f("ids", TP.INT64, [64])], [f(last, TP.FLOAT, [64, 8])])
    feeds = {"x": np.ones((64, 8), np.float32), "ids": np.arange(64)[::-1].copy()}
    hosted = gs.Session(model, engine="onnxruntime", threads=threads, route="all")
    theirs = _ort_session(model, threads)
    times = {"ort": [], "hosted": []}
    for round_ in range(rounds):
        for key in (["ort", "hosted"] if round_ % 2 == 0 else ["hosted", "ort"]):
            run = theirs.run if key == "ort" else hosted.run
            times[key].append(_per_run(lambda f, run=run: run(None, f), feeds, 200))
    ort_us, hosted_us = (statistics.median(times[k]) * 1e6 for k in ("ort", "hosted"))
    crossings = len(hosted.plan.steps) - 1
    return {"threads": threads, "boundaries": crossings, "ort_us": ort_us, "hosted_us": hosted_us,
            "per_boundary_us": (hosted_us - ort_us) / crossings}


def _table(rows: list[dict]) -> str:
    head = "| model | nodes | routed | bounds | onnxruntime ms | hosted ms | ratio | equal | reference ms | speedup |"
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        ort_ms = f"{r['ort_ms']:.3f}" if "ort_ms" in r else r.get("onnxruntime", "")
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else "-"
        ref = f"{r['reference_ms']:.1f}" if "reference_ms" in r else "-"
        speed = f"{r['speedup']:.0f}x" if "speedup" in r else "-"
        lines.append(f"| {r['model']} | {r['nodes']} | {r['routed']} | {r['boundaries']} | {ort_ms} | "
                     f"{r['hosted_ms']:.3f} | {ratio} | {r['equal']} | {ref} | {speed} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--zoo", default="/tmp/hosted_models", help="where hosted_models.py exports its models")
    parser.add_argument("--no-zoo", action="store_true", help="leave out the exported architectures (no torch)")
    parser.add_argument("--no-reference", dest="reference", action="store_false",
                        help="leave out today's Session (engine='reference'), the slowest part")
    parser.add_argument("--only", nargs="*", help="models whose name holds one of these words")
    parser.add_argument("--json", help="also write every figure as JSON")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    rows = []
    for name, model, feeds in models(args):
        try:
            rows.append(measure(name, model, feeds, args))
        except Exception as exc:  # noqa: BLE001 - one model's failure is a row, not the end
            print(f"{name}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}", file=sys.stderr)
            rows.append({"model": name, "nodes": "-", "routed": "-", "boundaries": "-", "hosted_ms": float("nan"),
                         "equal": f"ERROR {type(exc).__name__}"})
        print(f"  {rows[-1]['model']}: {rows[-1].get('ratio', float('nan')):.2f}x", file=sys.stderr, flush=True)
    print(f"onnxruntime {ort.__version__}, {args.threads} thread(s), {args.rounds} rounds\n")
    print(_table(rows))
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    if ratios:
        worst = max(rows, key=lambda r: r.get("ratio", 0))
        print(f"\nhosted / onnxruntime: median {statistics.median(ratios):.3f}, worst {worst['ratio']:.2f} "
              f"({worst['model']}), over {len(ratios)} models")
    speedups = [r["speedup"] for r in rows if "speedup" in r]
    if speedups:
        print(f"reference Session / hosted: median {statistics.median(speedups):.0f}x, least {min(speedups):.1f}x")
    target = index_add_target(2, args.rounds)
    print(f"\nindex_add, 200,000 x 8 into 64 segments, 2 threads: runs of {target['runs']} that differ from the "
          f"spec's loop: onnxruntime {target['differ']['ort']}, hosted {target['differ']['hosted']}; time "
          f"{target['hosted_ms']:.3f} "
          f"ms against {target['ort_ms']:.3f} ms ({target['ratio']:.2f}x)")
    boundary = boundary_cost(args.threads, args.rounds)
    print(f"boundary cost: {boundary['boundaries']} boundaries, {boundary['hosted_us']:.0f} us against "
          f"{boundary['ort_us']:.0f} us: {boundary['per_boundary_us']:.1f} us per boundary")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "index_add": target, "boundary": boundary,
                                               "onnxruntime": ort.__version__, "threads": args.threads}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
