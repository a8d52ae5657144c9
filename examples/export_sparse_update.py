"""Export the second test model: a sparse, batched feature update (one message-passing step).

Regenerates ``tests/data/sparse_update.onnx`` and ``sparse_update_inputs.npz``. Needs torch
(not a dependency of gather_scatter); see ``export_decoder_step.py`` for the set-up.

The step, over a batch of graphs sharing one node count:

- ``weight.index_select(0, edge_type)`` picks each edge's transform -> Gather;
- ``features[graph, src]`` reads each edge's source node by advanced indexing -> GatherND;
- ``features.index_put((graph, dst), messages, accumulate=True)`` sums the messages into the
  destination nodes -> ScatterND with ``reduction='add'`` (ScatterND-16 and later).
"""

from __future__ import annotations

import pathlib

import numpy as np
import torch
from export_decoder_step import check_against_torch, save_small
from torch import nn

OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data"
GRAPHS, NODES, FEATURES, EDGES, EDGE_TYPES = 2, 5, 4, 7, 3


class SparseUpdate(nn.Module):
    """One message-passing step over a batch of graphs with typed edges.

    Each edge's message is its source node's features times its type's transform; the messages
    are summed into their destination nodes, then ReLU.
    """

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(EDGE_TYPES, FEATURES, FEATURES) / FEATURES**0.5)

    def forward(self, features, graph, src, dst, edge_type):
        """Return the updated node features.

        Parameters
        ----------
        features : Tensor, shape (GRAPHS, NODES, FEATURES), float32
        graph, src, dst, edge_type : Tensor, shape (EDGES,), int64
            Each edge's graph, source node, destination node and type.

        Returns
        -------
        Tensor, shape (GRAPHS, NODES, FEATURES), float32
        """
        transform = self.weight.index_select(0, edge_type)
        messages = torch.einsum("ef,efg->eg", features[graph, src], transform)
        return torch.relu(features.index_put((graph, dst), messages, accumulate=True))


def main() -> None:
    """Export the model at opset 18, check it against torch, and save it with its inputs."""
    torch.manual_seed(1)
    model = SparseUpdate().eval()
    rng = np.random.default_rng(1)
    inputs = {
        "features": rng.standard_normal((GRAPHS, NODES, FEATURES)).astype(np.float32),
        "graph": rng.integers(0, GRAPHS, EDGES),
        "src": rng.integers(0, NODES, EDGES),
        # Repeated destinations: the sums must accumulate, not overwrite.
        "dst": np.array([0, 1, 1, 4, 0, 2, 1], dtype=np.int64),
        "edge_type": rng.integers(0, EDGE_TYPES, EDGES),
    }
    path = OUT / "sparse_update.onnx"
    program = torch.onnx.export(
        model,
        tuple(torch.from_numpy(a) for a in inputs.values()),
        input_names=list(inputs),
        output_names=["updated"],
        opset_version=18,
        dynamo=True,
    )
    check_against_torch(model, inputs, program.model_proto)
    save_small(program.model_proto, path)
    np.savez(OUT / "sparse_update_inputs.npz", **inputs)
    ops = sorted({n.op_type for n in program.model_proto.graph.node})
    print(path, path.stat().st_size, "bytes;", ", ".join(ops))


if __name__ == "__main__":
    main()
