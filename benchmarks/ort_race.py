"""How often onnxruntime's ScatterND add comes out wrong at 2 threads: its threads race on duplicate indices.

    python benchmarks/ort_race.py [--threads 2] [--runs 100] [--rows 200000] [--seed 7]

The model is ``tests/data/index_add_pooling.onnx``: PyTorch's dynamo export of
``zeros.index_add(0, segment, rows)`` (``examples/index_add_pooling.py``; ScatterND-18,
``reduction='add'``), its 2,000 rows made symbolic and fed ``--rows`` rows of 8 float32 into
64 segments (the pooling of README.md's and docs/models.md's example, and of
``bench_hosted.py``'s index_add target). One onnxruntime ``InferenceSession`` at ``--threads``
intra-op threads (default options otherwise) runs it ``--runs`` times on the same feeds; each
run's output is compared bit for bit with the spec's loop (``gather_scatter.run_model``:
duplicates applied in row-major order of the indices). It prints how many runs differ and in
how many distinct results, and the same count for ``Session(engine="onnxruntime")``, which
routes the node to our kernels. A race: the count depends on the machine and its load, so the
docs give it with the command, the date and the machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

import gather_scatter as gs

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "tests" / "data" / "index_add_pooling.onnx"
SEGMENTS, WIDTH = 64, 8


def index_add_case(rows: int = 200_000, seed: int = 7) -> tuple[str, dict[str, np.ndarray]]:
    """Return the path of the index_add export with its 2,000 rows made symbolic, and ``rows`` rows of feeds."""
    model = onnx.load(str(MODEL))
    for value in (*model.graph.input, *model.graph.output, *model.graph.value_info):
        dims = value.type.tensor_type.shape.dim
        if dims and dims[0].dim_value == 2000:
            dims[0].dim_param = "rows"
    path = Path(tempfile.mkdtemp()) / MODEL.name
    onnx.save(model, str(path))
    rng = np.random.default_rng(seed)
    feeds = {"rows": rng.standard_normal((rows, WIDTH)).astype(np.float32), "segment": rng.integers(0, SEGMENTS, rows)}
    return str(path), feeds


def differing_runs(run, feeds: dict, want: list[bytes], runs: int) -> tuple[int, int]:
    """Run ``run(None, feeds)`` ``runs`` times: how many outputs differ from ``want`` (bytes), in how many distinct
    results."""
    got = [tuple(np.asarray(v).tobytes() for v in run(None, feeds)) for _ in range(runs)]
    wrong = [g for g in got if list(g) != want]
    return len(wrong), len(set(wrong))


def main(argv: list[str] | None = None) -> int:
    import onnxruntime as ort

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="onnxruntime's intra-op threads (default 2)")
    parser.add_argument("--runs", type=int, default=100, help="runs of each session on the same feeds (default 100)")
    parser.add_argument("--rows", type=int, default=200_000, help="rows pooled (default 200,000)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the feeds (default 7, as bench_hosted.py)")
    args = parser.parse_args(argv)
    path, feeds = index_add_case(args.rows, args.seed)
    want = [v.tobytes() for v in gs.run_model(path, feeds).values()]
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    theirs = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    hosted = gs.Session(path, engine="onnxruntime", threads=args.threads)
    ort_wrong, ort_distinct = differing_runs(theirs.run, feeds, want, args.runs)
    hosted_wrong, _ = differing_runs(hosted.run, feeds, want, args.runs)
    print(
        f"onnxruntime {ort.__version__}, {args.threads} intra-op threads, index_add export (ScatterND-18 add), "
        f"{args.rows:,} rows of {WIDTH} float32 into {SEGMENTS} segments: {ort_wrong} of {args.runs} runs differ "
        f"from the spec's loop (gather_scatter.run_model), in {ort_distinct} distinct results; "
        f"Session(engine='onnxruntime'): {hosted_wrong} of {args.runs}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
