"""gather_scatter: ONNX Gather, GatherND and ScatterND, every version, exact and vectorized.

Kernels (NumPy in, NumPy out, newest semantics): :func:`gather` (Gather-13),
:func:`gather_nd` (GatherND-13), :func:`scatter_nd` (ScatterND-18).
Version-exact evaluation: :func:`run_node`; shape inference: :func:`infer_shape`.
ONNX models: :func:`run_model` (and ``gather_scatter.reference`` for onnx.reference).
"""

from ._dispatch import infer_shape, run_node
from ._kernels import gather, gather_nd, scatter_nd
from .errors import (
    DTypeError,
    GatherScatterError,
    IndexOutOfBoundsError,
    InvalidAttributeError,
    OutputTooLargeError,
    ShapeError,
    UnsupportedOpError,
)

__version__ = "0.1.0"

__all__ = [
    "DTypeError",
    "GatherScatterError",
    "IndexOutOfBoundsError",
    "InvalidAttributeError",
    "OutputTooLargeError",
    "ShapeError",
    "UnsupportedOpError",
    "gather",
    "gather_nd",
    "infer_shape",
    "run_node",
    "scatter_nd",
]
