"""Export a ScatterElements test model: pooling tokens into segments with repeated destinations.

Regenerates ``tests/data/scatter_reduce.onnx``, its weights ``scatter_reduce.onnx.data``
(external data, as ``torch.onnx.export(..., external_data=True)`` writes it) and
``scatter_reduce_inputs.npz``. Needs torch and onnxruntime; see ``export_gather_elements.py``
for the set-up and the shared export helpers.

Each token of a batch of sequences belongs to one of ``SEGMENTS`` segments (``seg``, several
tokens per segment, one segment empty in the first sequence); the model pools the tokens into
their segments every way ``torch.scatter_*`` can (opset 18, so ScatterElements-18 and
ScatterND-18):

- ``zeros.scatter_add(1, idx, h)`` sums projected features -> ScatterElements reduction='add';
- ``zeros.scatter_add(1, seg, ones)`` counts tokens per segment, int64
  -> ScatterElements reduction='add' on int64 data;
- ``full(-inf).scatter_reduce(1, idx, x, "amax")`` max-pools the raw tokens
  -> ScatterElements reduction='max';
- ``zeros.scatter_reduce(1, idx, x, "amin", include_self=False)`` min-pools, the empty
  segment keeping its 0 -> two nodes: ScatterElements reduction='max' of float32's largest
  value into the written slots (so the old value drops out), then ScatterElements
  reduction='min' (ONNX has no include_self);
- ``zeros.scatter_reduce(1, idx, h, "prod", include_self=False)`` -> ScatterElements
  reduction='none' writing 1 into the written slots (repeated indices, one value), then
  ScatterElements reduction='mul';
- ``zeros.index_put((batch, seg), h, accumulate=True)`` sums again by advanced indexing
  -> ScatterND reduction='add';
- ``zeros_like(perm).scatter(1, perm, arange)`` inverts a permutation, int64
  -> ScatterElements reduction='none' (the exporter writes the attribute out).

``x`` (an input) is what the max and min pool, so those outputs, the counts and the inverse
permutation are exact; the sums and products are of ``h = tanh(x @ W + b)``.
"""

from __future__ import annotations

import numpy as np
import torch
from export_gather_elements import OUT, check_with_onnxruntime, describe, export
from torch import nn

NAME = "scatter_reduce"
BATCH, TOKENS, DIM, SEGMENTS = 2, 12, 16, 5


class SegmentPool(nn.Module):
    """Pool each sequence's tokens into ``SEGMENTS`` segments every way ``torch.scatter_*`` can.

    Each pooling exports to ScatterElements or ScatterND nodes (see the module's docstring).
    """

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x, seg, perm):
        """Return the segments' pooled features, the token counts and the inverse permutation.

        Parameters
        ----------
        x : Tensor, shape (B, TOKENS, DIM), float32
        seg : Tensor, shape (B, TOKENS), int64
            Each token's segment, in [0, SEGMENTS).
        perm : Tensor, shape (B, TOKENS), int64
            A permutation of range(TOKENS) in each row.

        Returns
        -------
        mean, high, low, prod, total_nd : Tensor, shape (B, SEGMENTS, DIM), float32
            Mean, max, min (0 where empty), product (0 where empty) and sum per segment.
        count : Tensor, shape (B, SEGMENTS), int64
        inverse : Tensor, shape (B, TOKENS), int64
        """
        batch = x.shape[0]
        h = torch.tanh(self.proj(x))
        idx = seg[..., None].expand(-1, -1, DIM)
        zeros = x.new_zeros(batch, SEGMENTS, DIM)
        total = zeros.scatter_add(1, idx, h)
        count = seg.new_zeros(batch, SEGMENTS).scatter_add(1, seg, torch.ones_like(seg))
        mean = total / count.clamp(min=1)[..., None]
        high = torch.full_like(zeros, float("-inf")).scatter_reduce(1, idx, x, "amax")
        low = zeros.scatter_reduce(1, idx, x, "amin", include_self=False)
        prod = zeros.scatter_reduce(1, idx, h, "prod", include_self=False)
        rows = torch.arange(batch)[:, None].expand(-1, TOKENS)
        total_nd = zeros.index_put((rows, seg), h, accumulate=True)
        inverse = torch.zeros_like(perm).scatter(1, perm, torch.arange(TOKENS).expand(batch, -1))
        return mean, count, high, low, prod, total_nd, inverse


def inputs() -> dict[str, np.ndarray]:
    """Make the model's feeds: ``x``, float32 (BATCH, TOKENS, DIM), and int64 ``seg`` and ``perm``."""
    rng = np.random.default_rng(3)
    seg = np.array(
        [
            [0, 0, 1, 1, 1, 3, 3, 0, 4, 4, 1, 3],  # segment 2 is empty
            [2, 4, 4, 0, 1, 2, 2, 3, 0, 4, 4, 4],
        ],
        dtype=np.int64,
    )
    perm = np.stack([rng.permutation(TOKENS) for _ in range(BATCH)]).astype(np.int64)
    return {"x": rng.standard_normal((BATCH, TOKENS, DIM)).astype(np.float32), "seg": seg, "perm": perm}


def main() -> None:
    """Export the model with a dynamic batch, save it with its inputs, check it and describe it."""
    torch.manual_seed(3)
    model = SegmentPool().eval()
    feeds = inputs()
    path = OUT / f"{NAME}.onnx"
    batch = torch.export.Dim("batch", min=1)
    names = ["mean", "count", "high", "low", "prod", "total_nd", "inverse"]
    export(model, feeds, path, names, {"x": {0: batch}, "seg": {0: batch}, "perm": {0: batch}})
    np.savez(OUT / f"{NAME}_inputs.npz", **feeds)
    check_with_onnxruntime(model, feeds, path)
    describe(path)


if __name__ == "__main__":
    main()
