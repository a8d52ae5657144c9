"""Export the CLI's default model: one step of a tiny decoder with a static KV cache.

Regenerates ``src/gather_scatter/data/decoder_step.onnx`` and ``decoder_step_inputs.npz``.
Needs torch (not a dependency of gather_scatter)::

    python3 -m venv /tmp/torchvenv
    /tmp/torchvenv/bin/pip install torch==2.13.0 onnx numpy onnxscript
    /tmp/torchvenv/bin/python examples/export_decoder_step.py

The step uses the three operators this package implements:

- ``embed(tokens)`` reads token embeddings -> Gather;
- ``cache.index_put((batch, pos), k)`` writes this step's key/value at each sequence's
  position into the static cache -> ScatterND;
- ``k_cache[batch, prev]`` reads the previous position's key by advanced indexing -> GatherND.
"""

from __future__ import annotations

import pathlib

import numpy as np
import onnx
import torch
from torch import nn

OUT = pathlib.Path(__file__).resolve().parents[1] / "src" / "gather_scatter" / "data"
VOCAB, DIM, MAX_LEN, BATCH = 16, 8, 6, 2


class DecoderStep(nn.Module):
    """One decode step of a tiny single-head decoder that keeps a static KV cache.

    Embeds each sequence's token (Gather), writes its key and value into the caches at
    ``pos`` (ScatterND), reads the previous position's key back (GatherND) and attends over
    the positions up to ``pos``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM, bias=False)
        self.head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens, pos, k_cache, v_cache):
        """Run the step and return the logits with the updated caches.

        Parameters
        ----------
        tokens, pos : Tensor, shape (B,), int64
            Each sequence's token, and the cache position it is written to.
        k_cache, v_cache : Tensor, shape (B, MAX_LEN, DIM), float32
            The key and value caches.

        Returns
        -------
        logits : Tensor, shape (B, VOCAB), float32
        k_cache, v_cache : Tensor, shape (B, MAX_LEN, DIM), float32
            The caches with this step's key and value written at ``pos``.
        """
        x = self.embed(tokens)
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        batch = torch.arange(tokens.shape[0])
        k_cache = k_cache.index_put((batch, pos), k)
        v_cache = v_cache.index_put((batch, pos), v)
        # The key one step back (the current one at position 0), for a tiny recurrence term.
        prev_k = k_cache[batch, torch.clamp(pos - 1, min=0)]
        scores = torch.einsum("bd,btd->bt", q + prev_k, k_cache) / DIM**0.5
        visible = torch.arange(MAX_LEN)[None, :] <= pos[:, None]
        scores = scores.masked_fill(~visible, float("-inf"))
        context = torch.einsum("bt,btd->bd", scores.softmax(-1), v_cache)
        return self.head(context), k_cache, v_cache


def save_small(model: onnx.ModelProto, path: pathlib.Path) -> None:
    """Save ``model`` to ``path`` as one small file.

    Weights are kept inline (package data is one file) and the exporter's per-node stack
    traces, which hold this machine's paths, are dropped.
    """
    for node in model.graph.node:
        del node.metadata_props[:]
    onnx.save(model, path)


def check_against_torch(model: nn.Module, inputs: dict, proto: onnx.ModelProto) -> None:
    """Check that the exported graph computes what the module computes (onnx.reference, no ORT here).

    Raises
    ------
    AssertionError
        If an output of ``proto`` differs from the module's beyond rtol 1e-5, atol 1e-6.
    """
    from onnx.reference import ReferenceEvaluator

    with torch.no_grad():
        expected = model(*(torch.from_numpy(a) for a in inputs.values()))
    expected = expected if isinstance(expected, tuple) else (expected,)
    for want, got in zip(expected, ReferenceEvaluator(proto).run(None, inputs), strict=True):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


def main() -> None:
    """Export the module with torch's dynamo exporter at opset 18, check it, and save it with its inputs."""
    torch.manual_seed(0)
    model = DecoderStep().eval()
    rng = np.random.default_rng(0)
    inputs = {
        "tokens": np.array([3, 11], dtype=np.int64),
        "pos": np.array([2, 4], dtype=np.int64),
        "k_cache": rng.standard_normal((BATCH, MAX_LEN, DIM)).astype(np.float32),
        "v_cache": rng.standard_normal((BATCH, MAX_LEN, DIM)).astype(np.float32),
    }
    path = OUT / "decoder_step.onnx"
    program = torch.onnx.export(
        model,
        tuple(torch.from_numpy(a) for a in inputs.values()),
        input_names=list(inputs),
        output_names=["logits", "k_cache_out", "v_cache_out"],
        opset_version=18,
        dynamo=True,  # the TorchScript exporter lowers advanced indexing to Gather, not GatherND
    )
    check_against_torch(model, inputs, program.model_proto)
    save_small(program.model_proto, path)
    np.savez(OUT / "decoder_step_inputs.npz", **inputs)
    ops = sorted({n.op_type for n in onnx.load(path).graph.node})
    print(path, path.stat().st_size, "bytes;", ", ".join(ops))


if __name__ == "__main__":
    main()
