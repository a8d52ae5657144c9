"""Build the TensorScatter test model: one decode step writing two KV caches (onnx.helper, no torch).

Regenerates ``tests/data/kv_tensor_scatter.onnx`` and ``kv_tensor_scatter_inputs.npz``
(needs only onnx and numpy; onnxruntime, if installed, checks the outputs)::

    python examples/build_kv_tensor_scatter.py

Opset 24, where TensorScatter appeared (torch's exporter does not emit it yet). The step
decodes ``STEP = 2`` tokens per sequence (as in speculative decoding) into two layers' caches,
shaped (batch, heads, max_sequence_length, head_dim), at each sequence's position ``pos``:

- a global layer's cache of ``MAX_LEN = 8`` slots, appended in place:
  TensorScatter ``mode='linear'`` (default axis -2), for keys and values;
- a sliding-window layer's cache of ``WINDOW = 4`` slots, overwritten round-robin:
  TensorScatter ``mode='circular'``, ``axis=2``, for keys and values. The first sequence's
  two tokens wrap past the end of the window (slots 3 then 0); the second's position 6 is
  past the window, so both slots are taken modulo 4 (2 and 3);
- then attention of ``q`` over each updated cache (Transpose, MatMul, Mul, Softmax, MatMul),
  the two contexts summed. No mask: the test model is about the cache writes.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import onnx.helper as oh
from onnx import TensorProto

OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data"
NAME = "kv_tensor_scatter"
BATCH, HEADS, HEAD_DIM, STEP, MAX_LEN, WINDOW = 2, 2, 4, 2, 8, 4
OPSET = 24


def attention(prefix: str, k: str, v: str) -> list[onnx.NodeProto]:
    """softmax(q @ k^T * scale) @ v over one cache, output ``{prefix}_context``."""
    return [
        oh.make_node("Transpose", [k], [f"{prefix}_kt"], perm=[0, 1, 3, 2]),
        oh.make_node("MatMul", ["q", f"{prefix}_kt"], [f"{prefix}_logits"]),
        oh.make_node("Mul", [f"{prefix}_logits", "scale"], [f"{prefix}_scaled"]),
        oh.make_node("Softmax", [f"{prefix}_scaled"], [f"{prefix}_probs"], axis=-1),
        oh.make_node("MatMul", [f"{prefix}_probs", v], [f"{prefix}_context"]),
    ]


def build() -> onnx.ModelProto:
    """Build the decode-step model: four TensorScatter writes, then attention over both caches.

    Returns
    -------
    onnx.ModelProto
        The opset-24 model (IR version 11), checked with ``onnx.checker.check_model(full_check=True)``.
    """

    def cache(name, slots):
        return oh.make_tensor_value_info(name, TensorProto.FLOAT, [BATCH, HEADS, slots, HEAD_DIM])

    def write(layer, kv, **attrs):
        cache_in, new, cache_out = f"{layer}_{kv}", f"new_{kv}", f"present_{layer}_{kv}"
        return oh.make_node("TensorScatter", [cache_in, new, "pos"], [cache_out], f"write_{layer}_{kv}", **attrs)

    nodes = [
        write("global", "k", mode="linear"),
        write("global", "v", mode="linear"),
        write("local", "k", mode="circular", axis=2),
        write("local", "v", mode="circular", axis=2),
        *attention("global", "present_global_k", "present_global_v"),
        *attention("local", "present_local_k", "present_local_v"),
        oh.make_node("Add", ["global_context", "local_context"], ["context"]),
    ]
    inputs = [
        cache("global_k", MAX_LEN),
        cache("global_v", MAX_LEN),
        cache("local_k", WINDOW),
        cache("local_v", WINDOW),
        cache("q", STEP),
        cache("new_k", STEP),
        cache("new_v", STEP),
        oh.make_tensor_value_info("pos", TensorProto.INT64, [BATCH]),
    ]
    outputs = [
        cache("context", STEP),
        cache("present_global_k", MAX_LEN),
        cache("present_global_v", MAX_LEN),
        cache("present_local_k", WINDOW),
        cache("present_local_v", WINDOW),
    ]
    scale = oh.make_tensor("scale", TensorProto.FLOAT, [], [HEAD_DIM**-0.5])
    graph = oh.make_graph(nodes, "kv_tensor_scatter", inputs, outputs, initializer=[scale])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", OPSET)], ir_version=11)
    onnx.checker.check_model(model, full_check=True)
    return model


def inputs() -> dict[str, np.ndarray]:
    """Make the model's feeds, seeded so the saved ``.npz`` is reproducible.

    Returns
    -------
    dict of str to ndarray
        float32 caches of shape (BATCH, HEADS, slots, HEAD_DIM) and ``q``/``new_k``/``new_v`` of
        ``STEP`` slots; ``pos`` is int64 ``[3, 6]``.
    """
    rng = np.random.default_rng(4)

    def normal(slots):
        return rng.standard_normal((BATCH, HEADS, slots, HEAD_DIM)).astype(np.float32)

    feeds = {name: normal(MAX_LEN) for name in ("global_k", "global_v")}
    feeds.update({name: normal(WINDOW) for name in ("local_k", "local_v")})
    feeds.update({name: normal(STEP) for name in ("q", "new_k", "new_v")})
    # Linear: 3 + 2 and 6 + 2 fit in 8 slots (the second fills the last one).
    feeds["pos"] = np.array([3, 6], dtype=np.int64)
    return feeds


def main() -> None:
    """Save the model and its inputs under ``tests/data``, then run it with onnxruntime if installed."""
    model = build()
    feeds = inputs()
    path = OUT / f"{NAME}.onnx"
    onnx.save(model, path)
    np.savez(OUT / f"{NAME}_inputs.npz", **feeds)
    ops = ", ".join(sorted({n.op_type for n in model.graph.node}))
    print(f"{path.name}: {path.stat().st_size} bytes; opset {OPSET}; ops: {ops}")
    try:
        import onnxruntime as ort
    except ImportError:
        return
    options = ort.SessionOptions()
    options.log_severity_level = 3  # TensorScatter warns that it copies the cache (not in place)
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    for name, value in zip([o.name for o in session.get_outputs()], session.run(None, feeds), strict=True):
        print(f"  {name} {value.dtype} {value.shape}")


if __name__ == "__main__":
    main()
