"""The fixed cost of one small call: ours against the nearest NumPy operation, onnxruntime's
``session.run`` of a one-node model (1 intra-op thread) and a reused plain
``onnx.reference.ReferenceEvaluator``'s ``run`` of the same model.

    python benchmarks/bench_call.py [--rounds N] [--per-round M]

Inputs are tiny (a 3-element vector at a 0-d index and the like), so what is measured is the
cost of a call, not of moving bytes. Each round times M calls of every engine of a case in
turn, the order rotating from round to round; a figure is the median over rounds of the time
per call, in microseconds; the output is a Markdown table (docs/performance.md's). The targets (issue 16): ours <= 0.5x onnxruntime and <= 3 us above
NumPy for the Gather case, and ``run_node`` <= 1.0x onnxruntime. A measurement, never an assertion.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

# Steady state, as a loop of calls sees it: every kernel compiled on its first call (by default a
# kernel takes NumPy's path until its calls pay for the compile: docs/performance.md, First calls).
if __name__ == "__main__":  # as a module (the smoke tests) the importer's setting stands
    os.environ.setdefault("GATHER_SCATTER_COMPILED", "eager")

import gather_scatter as gs  # noqa: E402

F32 = np.float32


def cases() -> list[tuple]:
    """(name, ONNX op, attributes, inputs, ours, NumPy's nearest operation, its name)."""
    vec = np.array([10, 20, 30], np.int64)
    idx0 = np.array(1, np.int64)
    mat = np.arange(12, dtype=F32).reshape(3, 4)
    pairs = np.array([[1, 2], [2, 3]], np.int64)
    rows = np.array([[1, 0, 2, 1], [0, 2, 1, 1]], np.int64)
    upd = np.array([7.0, 8.0], F32)
    cache = np.zeros((1, 2, 8, 4), F32)
    step = np.ones((1, 2, 1, 4), F32)
    pos = np.array([3], np.int64)
    rows_upd = np.ones((2, 4), F32)

    def scatter_nd_numpy(data, indices, updates):
        out = data.copy()
        out[tuple(indices.T)] = updates
        return out

    def scatter_elements_numpy(data, indices, updates):
        out = data.copy()
        np.put_along_axis(out, indices, updates, 0)
        return out

    def tensor_scatter_numpy(cache, update, write):
        out = cache.copy()
        out[:, :, write[0] : write[0] + update.shape[2]] = update
        return out

    return [
        ("gather", "Gather", {}, [vec, idx0], lambda d, i: gs.gather(d, i), lambda d, i: np.take(d, i), "np.take"),
        ("gather run_node", "Gather", {}, [vec, idx0], lambda d, i: gs.run_node("Gather", [d, i], opset=13),
         lambda d, i: np.take(d, i), "np.take"),
        ("gather_nd", "GatherND", {}, [mat, pairs], lambda d, i: gs.gather_nd(d, i),
         lambda d, i: d[tuple(i.T)], "d[tuple(i.T)]"),
        ("scatter_nd", "ScatterND", {}, [mat, pairs, upd], lambda d, i, u: gs.scatter_nd(d, i, u),
         scatter_nd_numpy, "copy + d[tuple(i.T)] = u"),
        ("gather_elements", "GatherElements", {}, [mat, rows], lambda d, i: gs.gather_elements(d, i),
         lambda d, i: np.take_along_axis(d, i, 0), "np.take_along_axis"),
        ("scatter_elements", "ScatterElements", {}, [mat, rows, rows_upd],
         lambda d, i, u: gs.scatter_elements(d, i, u), scatter_elements_numpy, "copy + np.put_along_axis"),
        ("tensor_scatter", "TensorScatter", {}, [cache, step, pos], lambda c, u, w: gs.tensor_scatter(c, u, w),
         tensor_scatter_numpy, "copy + slice assignment"),
    ]


def one_node_model(op: str, attrs: dict, inputs: list[np.ndarray]):
    """The ONNX model of one ``op`` node on ``inputs`` (opset 18; TensorScatter 24), or None
    where onnx is missing."""
    try:
        import onnx.helper as oh
    except ImportError:
        return None
    names = [f"x{i}" for i in range(len(inputs))]
    node = oh.make_node(op, names, ["y"], **attrs)
    graph = oh.make_graph(
        [node], op,
        [oh.make_tensor_value_info(n, oh.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in zip(names, inputs)],
        [oh.make_tensor_value_info("y", oh.np_dtype_to_tensor_dtype(inputs[0].dtype), None)],
    )
    opset = 24 if op == "TensorScatter" else 18
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)]), dict(zip(names, inputs))


def onnxruntime_call(model, feeds):
    """``session.run`` of the model (1 thread), or None where onnxruntime cannot load it."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3  # TensorScatter warns at every run that it copies past_cache
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - an op onnxruntime lacks (TensorScatter before 1.23)
        return None
    return lambda *_: session.run(None, feeds)


def reference_call(model, feeds):
    """A reused plain ``onnx.reference.ReferenceEvaluator``'s ``run`` of the model, or None
    where it cannot load or run it."""
    try:
        from onnx.reference import ReferenceEvaluator

        evaluator = ReferenceEvaluator(model)
        evaluator.run(None, feeds)
    except Exception:  # noqa: BLE001 - an op this onnx version's reference lacks
        return None
    return lambda *_: evaluator.run(None, feeds)


def per_call(fn, args, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn(*args)
    return (time.perf_counter() - start) / number


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--per-round", type=int, default=2000)
    args = parser.parse_args(argv)
    print(f"per call, µs: median of {args.rounds} rounds of {args.per_round} calls, interleaved "
          "(onnx.reference: a tenth as many calls per round)\n")
    print("| case | ours | NumPy | onnxruntime | onnx.reference | ours − NumPy | ours / ORT | ours / reference "
          "| NumPy op |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for name, op, attrs, inputs, ours, numpy_op, numpy_name in cases():
        engines = {"ours": ours, "numpy": numpy_op}
        built = one_node_model(op, attrs, inputs)
        for key, make in (("ort", onnxruntime_call), ("reference", reference_call)):
            call = make(*built) if built is not None else None
            if call is not None:
                engines[key] = call
        for fn in engines.values():  # warm: the first call of a signature checks it
            per_call(fn, inputs, 10)
        times: dict[str, list[float]] = {key: [] for key in engines}
        keys = list(engines)
        for r in range(args.rounds):
            for key in keys[r % len(keys) :] + keys[: r % len(keys)]:
                number = max(1, args.per_round // 10) if key == "reference" else args.per_round
                times[key].append(per_call(engines[key], inputs, number))
        med = {key: statistics.median(values) * 1e6 for key, values in times.items()}

        def shown(key):
            return f"{med[key]:.2f}" if key in med else "—"

        def ratio(key):
            return f"{med['ours'] / med[key]:.2f}" if key in med else "—"

        print(f"| {name} | {med['ours']:.2f} | {med['numpy']:.2f} | {shown('ort')} | {shown('reference')} "
              f"| {med['ours'] - med['numpy']:.2f} | {ratio('ort')} | {ratio('reference')} | {numpy_name} |")


if __name__ == "__main__":
    main()
