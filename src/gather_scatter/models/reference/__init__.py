"""The reference engine: onnx.reference's evaluator with the family's operators on our kernels.

``_evaluator`` (:class:`Evaluator`: our operators in every graph, subgraph and function, errors
naming their node), ``_ops`` (the OpRun classes, :data:`NEW_OPS`), ``_fixes`` (onnx.reference's
operators that disagree with the spec, replaced) and ``_sizes`` (the memory limit over the nodes
that are not ours). :mod:`gather_scatter.reference` is the public face.
"""

from ._evaluator import Evaluator
from ._ops import (
    NEW_OPS,
    Gather,
    GatherBlockQuantized,
    GatherElements,
    GatherND,
    MicrosoftGatherND,
    Scatter,
    ScatterElements,
    ScatterND,
    TensorScatter,
    node_runner,
)

__all__ = [
    "NEW_OPS",
    "Evaluator",
    "Gather",
    "GatherBlockQuantized",
    "GatherElements",
    "GatherND",
    "MicrosoftGatherND",
    "Scatter",
    "ScatterElements",
    "ScatterND",
    "TensorScatter",
    "node_runner",
]
