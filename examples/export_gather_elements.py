"""Export a GatherElements test model: BERT-style relative-position bias plus top-k re-ranking.

Regenerates ``tests/data/gather_elements.onnx``, its weights ``gather_elements.onnx.data``
(external data, as ``torch.onnx.export(..., external_data=True)`` writes it) and
``gather_elements_inputs.npz``. Needs torch (not a dependency of gather_scatter) and
onnxruntime, which checks the export (onnx.reference cannot: see below)::

    python3 -m venv /tmp/torchvenv
    /tmp/torchvenv/bin/pip install torch==2.13.0 onnx numpy onnxscript onnxruntime
    /tmp/torchvenv/bin/python examples/export_gather_elements.py

One attention layer over ``SEQ = 128`` positions, then a two-stage re-ranking. Every
``torch.gather`` becomes a GatherElements node (opset 18, so GatherElements-13), each on an
axis with more than 64 positions, where plain onnx.reference's GatherElements breaks (it uses
``np.choose``, which takes at most 64 choices):

- ``torch.gather(table, 3, rel)`` looks up each (query, key) pair's relative-position bias in a
  learned table of ``2 * SEQ - 1 = 255`` offsets, the offsets computed from the ``pos`` input
  (the second sequence is padded, so its positions repeat) -> GatherElements, axis 3 of 255;
- ``torch.gather(ctx, 1, top)`` picks the first stage's top-k tokens' features out of 128
  -> GatherElements, axis 1 of 128 (``Tensor.topk`` -> TopK);
- ``torch.gather(top, 1, order)`` reorders those token ids (int64 data) by the second stage's
  scores -> GatherElements, axis 1 of ``TOP_K``;
- ``Tensor.argsort`` -> TopK too; also MatMul, Einsum, Softmax, Clip, Sub, Expand, Concat...

The batch dim is dynamic, as in a real BERT export; with a static batch the exporter folds the
expanded bias table into one (batch, heads, 128, 255) initializer.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import torch
from torch import nn

OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data"
NAME = "gather_elements"
SEQ, DIM, HEADS, BATCH, TOP_K = 128, 16, 2, 2, 8
OPSET = 18


class RelPosRerank(nn.Module):
    """One attention layer with a learned relative-position bias, then a two-stage top-k re-ranking.

    Each of its three ``torch.gather`` calls exports to a GatherElements node (see the module's
    docstring).
    """

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM, bias=False)
        self.rel_bias = nn.Parameter(torch.randn(HEADS, 2 * SEQ - 1))
        self.first = nn.Linear(DIM, 1)
        self.second = nn.Linear(DIM, 1)

    def forward(self, hidden, pos):
        """Return the relative-position bias, the first stage's picked features and the ranked token ids.

        Parameters
        ----------
        hidden : Tensor, shape (B, SEQ, DIM), float32
        pos : Tensor, shape (B, SEQ), int64
            Position ids in [0, SEQ).

        Returns
        -------
        bias : Tensor, shape (B, HEADS, SEQ, SEQ), float32
        picked : Tensor, shape (B, TOP_K, DIM), float32
        ranked : Tensor, shape (B, TOP_K), int64
        """
        batch = hidden.shape[0]
        q, k, v = (t.unflatten(-1, (HEADS, DIM // HEADS)).transpose(1, 2) for t in self.qkv(hidden).chunk(3, -1))
        # Relative offsets key - query, shifted to [0, 2 * SEQ - 2]: (B, HEADS, SEQ, SEQ).
        rel = (pos[:, None, :] - pos[:, :, None]).clamp(1 - SEQ, SEQ - 1) + (SEQ - 1)
        rel = rel[:, None].expand(batch, HEADS, SEQ, SEQ)
        table = self.rel_bias[None, :, None, :].expand(batch, HEADS, SEQ, 2 * SEQ - 1)
        bias = torch.gather(table, 3, rel)
        att = torch.einsum("bhid,bhjd->bhij", q, k) / (DIM // HEADS) ** 0.5 + bias
        ctx = (att.softmax(-1) @ v).transpose(1, 2).flatten(2)  # (B, SEQ, DIM)
        # Re-rank: the first stage keeps TOP_K tokens, the second orders them.
        top = self.first(ctx).squeeze(-1).topk(TOP_K, dim=1).indices  # (B, TOP_K)
        picked = torch.gather(ctx, 1, top[:, :, None].expand(batch, TOP_K, DIM))
        rescored = self.second(picked).squeeze(-1)
        order = rescored.argsort(dim=1, descending=True)
        ranked = torch.gather(top, 1, order)
        return bias, picked, ranked


def inputs() -> dict[str, np.ndarray]:
    """Make the model's feeds: ``hidden``, float32 (BATCH, SEQ, DIM), and ``pos``, int64 (BATCH, SEQ)."""
    rng = np.random.default_rng(2)
    # The second sequence is padded after 100 tokens: its last positions repeat id 99.
    pos = np.stack([np.arange(SEQ), np.minimum(np.arange(SEQ), 99)]).astype(np.int64)
    return {"hidden": rng.standard_normal((BATCH, SEQ, DIM)).astype(np.float32), "pos": pos}


def check_with_onnxruntime(model: nn.Module, feeds: dict, path: pathlib.Path) -> list[np.ndarray]:
    """Check that the saved graph computes what the module computes, and return its outputs.

    The graph is read back from disk, external data included, and run with onnxruntime, not
    onnx.reference, whose GatherElements fails here.

    Raises
    ------
    AssertionError
        If a float output differs beyond rtol 1e-5, atol 1e-6, or an integer output differs.
    """
    import onnxruntime as ort

    with torch.no_grad():
        expected = model(*(torch.from_numpy(a) for a in feeds.values()))
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    for want, have in zip(expected, got, strict=True):
        if want.dtype.is_floating_point:
            np.testing.assert_allclose(have, want.numpy(), rtol=1e-5, atol=1e-6)
        else:
            np.testing.assert_array_equal(have, want.numpy())
    return got


def export(model: nn.Module, feeds: dict, path: pathlib.Path, output_names: list[str], dynamic_shapes) -> None:
    """Export with the dynamo exporter and save ``path`` + ``path.data`` as the exporter does.

    The per-node stack traces are dropped (they hold this machine's paths).
    """
    program = torch.onnx.export(
        model,
        tuple(torch.from_numpy(a) for a in feeds.values()),
        input_names=list(feeds),
        output_names=output_names,
        opset_version=OPSET,
        dynamic_shapes=dynamic_shapes,
        dynamo=True,
    )
    for node in program.model.graph.all_nodes():
        node.metadata_props.clear()
    # Tensors of 256 bytes and more go to path.data: the weights, not the small constants.
    program.save(path, external_data=True)


def describe(path: pathlib.Path) -> None:
    """Check the saved model and print its files' sizes, opset and op types."""
    onnx.checker.check_model(str(path), full_check=True)  # by path: external data included
    proto = onnx.load(path, load_external_data=False)
    external = [t.name for t in proto.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    data = path.with_name(path.name + ".data")
    opset = {o.domain or "ai.onnx": o.version for o in proto.opset_import}
    ops = sorted({n.op_type for n in proto.graph.node})
    print(f"{path.name}: {path.stat().st_size} bytes; {data.name}: {data.stat().st_size} bytes ({', '.join(external)})")
    print(f"  opset {opset}; ops: {', '.join(ops)}")
    for node in proto.graph.node:
        if node.op_type.startswith(("Gather", "Scatter")):
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            print(f"  {node.name}: {node.op_type} {attrs}")


def main() -> None:
    """Export the model with a dynamic batch, save it with its inputs, check it and describe it."""
    torch.manual_seed(2)
    model = RelPosRerank().eval()
    feeds = inputs()
    path = OUT / f"{NAME}.onnx"
    batch = torch.export.Dim("batch", min=1)
    export(model, feeds, path, ["bias", "picked", "ranked"], {"hidden": {0: batch}, "pos": {0: batch}})
    np.savez(OUT / f"{NAME}_inputs.npz", **feeds)
    check_with_onnxruntime(model, feeds, path)
    describe(path)


if __name__ == "__main__":
    main()
