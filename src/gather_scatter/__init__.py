"""gather_scatter: ONNX's indexing operators, every version, exact and vectorized.

Kernels (NumPy in, NumPy out, newest semantics): :func:`gather` (Gather-13),
:func:`gather_nd` (GatherND-13), :func:`scatter_nd` (ScatterND-18),
:func:`gather_elements` (GatherElements-13), :func:`scatter_elements` (ScatterElements-18),
:func:`tensor_scatter` (TensorScatter-24), :func:`gather_block_quantized` (com.microsoft
GatherBlockQuantized-1, a block-quantized embedding lookup).
Version-exact evaluation: :func:`run_node`; shape inference: :func:`infer_shape` (one node)
and :func:`infer_model_shapes` (a model); output size limit: :func:`set_memory_limit`.
torch tensors on CUDA are bounds-checked without a host sync: :func:`synchronize` and
:func:`set_bounds_check` say when a bad index is raised.
ONNX models: :func:`run_model` (and ``gather_scatter.reference`` for onnx.reference).
"""

from ._nodes import OffSpecWarning, infer_shape, run_node
from .backends import get_bounds_check, set_bounds_check, synchronize
from .errors import (
    ArityError,
    DTypeError,
    GatherScatterError,
    IndexOutOfBoundsError,
    InvalidAttributeError,
    ModelInputError,
    NodeError,
    OutputTooLargeError,
    ShapeError,
    UnsupportedOpError,
)
from .ops import gather, gather_elements, gather_nd, scatter_elements, scatter_nd, tensor_scatter
from .quantized import gather_block_quantized
from .resources.buffers import get_buffer_cache_size, set_buffer_cache_size
from .resources.memory import memory_limit, set_memory_limit
from .resources.threads import get_num_threads, set_num_threads

__all__ = [
    "ArityError",
    "DTypeError",
    "GatherScatterError",
    "IndexOutOfBoundsError",
    "InvalidAttributeError",
    "ModelInputError",
    "NodeError",
    "OffSpecWarning",
    "OutputTooLargeError",
    "Session",
    "ShapeError",
    "UnsupportedOpError",
    "gather",
    "gather_block_quantized",
    "gather_elements",
    "gather_nd",
    "get_bounds_check",
    "get_buffer_cache_size",
    "get_num_threads",
    "infer_model_shapes",
    "infer_shape",
    "memory_limit",
    "run_model",
    "run_node",
    "scatter_elements",
    "scatter_nd",
    "set_bounds_check",
    "set_buffer_cache_size",
    "set_memory_limit",
    "set_num_threads",
    "synchronize",
    "tensor_scatter",
]


def __dir__() -> list[str]:
    # dir() and help() list the lazy names too, which the module's __dict__ lacks until first use.
    return sorted(set(globals()) | set(__all__) | {"__version__"})


def __getattr__(name: str):
    if name == "__version__":  # importlib.metadata would be a quarter of the package's import time
        from importlib import metadata

        try:
            globals()["__version__"] = metadata.version("gather_scatter")
        except metadata.PackageNotFoundError:  # a source tree on sys.path, never installed
            globals()["__version__"] = "0+unknown"
        return globals()["__version__"]
    # run_model needs onnx.reference, which is slow to import: load it on first use only.
    if name == "run_model":
        from .models.session import run_model

        return run_model
    if name == "Session":
        from .models.session import Session

        return Session
    if name == "infer_model_shapes":  # imports onnx, also slow
        from .models.shape_inference import infer_model_shapes

        return infer_model_shapes
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
