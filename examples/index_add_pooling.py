"""Segment pooling with ``index_add`` through ``Session``: its ScatterND node against onnxruntime's.

Exported by PyTorch's dynamo exporter; onnxruntime's single-threaded kernel is the yardstick.

A ``torch.nn.Module`` sums 200,000 rows of 8 features into 64 segments
(``zeros.index_add(0, segment, rows)``, the pooling of a GNN readout or of a segment mean);
the dynamo exporter writes it as ScatterND-18 with ``reduction='add'``: 200,000 updates into
64 rows, ~3,000 per row. The script exports the model (``index_add_pooling.onnx`` in
``--out``, with its inputs; ``--rows 2000`` made ``tests/data``'s), checks that ``Session``
and onnxruntime at 1 thread give the same bits, and times the ScatterND node: ours as
``Session`` runs it (``gather_scatter.scatter_nd`` on the node's inputs), onnxruntime's as
its profiler reports the node's kernel (1 thread, the setting where its duplicates are summed
in a fixed order), interleaved over rounds; then the whole model.

    pip install "torch==2.13.0+cpu" onnxscript onnxruntime
    python examples/index_add_pooling.py            # prints the figures
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch import nn

import gather_scatter as gs

ROWS, WIDTH, SEGMENTS = 200_000, 8, 64


class IndexAddPool(nn.Module):
    """Sum ``rows`` (N, WIDTH) float32 into SEGMENTS segments by ``segment`` (N,) int64."""

    def forward(self, rows, segment):
        """Return the (SEGMENTS, WIDTH) sums: ``zeros.index_add(0, segment, rows)``."""
        return rows.new_zeros(SEGMENTS, rows.shape[1]).index_add(0, segment, rows)


def export(path: pathlib.Path, rows: torch.Tensor, segment: torch.Tensor) -> onnx.ModelProto:
    """Export :class:`IndexAddPool` with the dynamo exporter (opset 18) to ``path`` and load it."""
    program = torch.onnx.export(IndexAddPool(), (rows, segment), dynamo=True, opset_version=18)
    program.save(str(path))
    return onnx.load(str(path))


def _ort(model: onnx.ModelProto, profile_dir: str | None = None) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if profile_dir is not None:
        options.enable_profiling = True
        options.profile_file_prefix = str(pathlib.Path(profile_dir) / "ort")
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _node_inputs(model: onnx.ModelProto, node: onnx.NodeProto, feeds: dict) -> list[np.ndarray]:
    """Return the node's input values, computed by onnxruntime (each made a graph output)."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    known = {o.name for o in probe.graph.output} | {i.name for i in probe.graph.input}
    for name in node.input:
        if name not in known and name not in {t.name for t in probe.graph.initializer}:
            probe.graph.output.append(onnx.ValueInfoProto(name=name))
    session = _ort(probe)
    values = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds), strict=True))
    initializers = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    return [values.get(n, feeds.get(n, initializers.get(n))) for n in node.input]


def main(argv=None) -> None:
    """Export, check against onnxruntime and print the node's and the model's times."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="folder for the .onnx (default: a temporary one)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--rows", type=int, default=ROWS, help="rows pooled (the test model: 2,000)")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((args.rows, WIDTH)).astype(np.float32)
    segment = rng.integers(0, SEGMENTS, args.rows)
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(args.out or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        model = export(folder / "index_add_pooling.onnx", torch.from_numpy(rows), torch.from_numpy(segment))
        nodes = [n for n in model.graph.node if n.op_type == "ScatterND"]
        print("exported ops:", sorted({n.op_type for n in model.graph.node}))
        assert len(nodes) == 1, "the exporter no longer writes index_add as one ScatterND"
        node = nodes[0]
        reduction = next(a.s.decode() for a in node.attribute if a.name == "reduction")
        feeds = {model.graph.input[0].name: rows, model.graph.input[1].name: segment}
        if args.out:  # the inputs beside the model, as tests/data holds them
            np.savez(folder / "index_add_pooling_inputs.npz", **feeds)

        ours_session = gs.Session(model)
        theirs = _ort(model)
        ours_out, theirs_out = ours_session.run(None, feeds)[0], theirs.run(None, feeds)[0]
        print("Session == onnxruntime (1 thread), bit for bit:", ours_out.tobytes() == theirs_out.tobytes())

        data, indices, updates = _node_inputs(model, node, feeds)
        print(f"ScatterND reduction={reduction}: data {data.shape}, indices {indices.shape}, updates {updates.shape}")
        profiled = _ort(model, tmp)

        def ours_node():
            gs.scatter_nd(data, indices, updates, reduction=reduction)

        ours_node()
        for _ in range(3):
            profiled.run(None, feeds)
        ours_times, model_ours, model_theirs = [], [], []
        for _ in range(args.rounds):  # interleaved
            start = time.perf_counter()
            ours_node()
            ours_times.append(time.perf_counter() - start)
            profiled.run(None, feeds)
            start = time.perf_counter()
            ours_session.run(None, feeds)
            model_ours.append(time.perf_counter() - start)
            start = time.perf_counter()
            theirs.run(None, feeds)
            model_theirs.append(time.perf_counter() - start)
        trace = json.loads(pathlib.Path(profiled.end_profiling()).read_text())
        kernel = [
            e["dur"] / 1e6
            for e in trace
            if e.get("cat") == "Node"
            and e.get("name", "").endswith("_kernel_time")
            and e["args"].get("op_name") == "ScatterND"
        ][3:]  # past the warm-up runs
        ours_ms, theirs_ms = statistics.median(ours_times) * 1e3, statistics.median(kernel) * 1e3
        print(
            f"ScatterND node: ours {ours_ms:.3f} ms, onnxruntime 1 thread {theirs_ms:.3f} ms, "
            f"ours/onnxruntime {ours_ms / theirs_ms:.2f}"
        )
        print(
            f"whole model: Session {statistics.median(model_ours) * 1e3:.3f} ms, "
            f"onnxruntime 1 thread {statistics.median(model_theirs) * 1e3:.3f} ms"
        )


if __name__ == "__main__":
    main()
