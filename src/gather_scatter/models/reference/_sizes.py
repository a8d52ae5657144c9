"""The memory limit (:func:`~gather_scatter.set_memory_limit`) over a whole model run, for the
operators that are not ours (ours check their own outputs before allocating them).

Before a run, onnx's shape inference with data propagation (``infer_shapes(model,
data_prop=True)``, once per model, on a copy without its large weights) fixes the shape of
most values, a ConstantOfShape's from an initializer included: :func:`static_sizes`. A node
whose output would exceed the limit is refused before it runs (:func:`check_outputs`); a
``MemoryError`` raised by any operator while running becomes the same error as a last resort
(:func:`from_memory_error`). Both are :class:`~gather_scatter.errors.OutputTooLargeError`
naming the node.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import numpy as np
import onnx

from ...errors import OutputTooLargeError, node_label, one_line
from ...resources import memory as _memory

__all__ = ["check_outputs", "from_memory_error", "static_sizes"]

# Initializers above this many bytes become graph inputs in the copy given to the inference:
# their shapes are all it needs (data propagation reads small integer tensors only).
_SKELETON_BYTES = 1 << 16


def static_sizes(model: onnx.ModelProto) -> dict[str, tuple[tuple[int, ...], np.dtype, int]]:
    """Shape, dtype and bytes of each value of the main graph whose shape and type onnx's
    inference fixes; empty where the inference fails (a model it cannot read)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(_skeleton(model), data_prop=True)
    except Exception:  # noqa: BLE001 - no static sizes; the MemoryError fallback still holds
        return {}
    sizes = {}
    for value in [*inferred.graph.value_info, *inferred.graph.output]:
        t = value.type
        if t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField("shape"):
            continue
        dims = t.tensor_type.shape.dim
        if not all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims):
            continue
        dtype = _dtype(t.tensor_type.elem_type)
        if dtype is None:
            continue
        shape = tuple(d.dim_value for d in dims)
        sizes[value.name] = (shape, dtype, math.prod(shape) * dtype.itemsize)
    return sizes


@functools.cache
def _dtype(elem_type: int) -> np.dtype | None:
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError):
        return None


def _skeleton(model: onnx.ModelProto) -> onnx.ModelProto:
    big = [t for t in model.graph.initializer if len(t.raw_data) > _SKELETON_BYTES]
    if not big:
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    names = {t.name for t in big}
    kept = [t for t in copy.graph.initializer if t.name not in names]
    del copy.graph.initializer[:]
    copy.graph.initializer.extend(kept)
    declared = {i.name for i in copy.graph.input}
    for t in big:
        if t.name not in declared:
            copy.graph.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, t.dims))
    return copy


def check_outputs(node: onnx.NodeProto, sizes: Mapping[str, tuple[tuple[int, ...], np.dtype, int]]) -> None:
    """OutputTooLargeError naming ``node`` if one of its outputs of known size exceeds the limit."""
    for name in node.output:
        known = sizes.get(name)
        if known is None:
            continue
        shape, dtype, nbytes = known
        limit = _memory.exceeded(nbytes)
        if limit is not None:
            raise OutputTooLargeError(
                f"{node_label(node.name)} ({node.op_type}): output {name!r} of shape {shape} and dtype {dtype} "
                f"would take {nbytes} bytes, more than the memory limit of {limit} bytes (see "
                "gather_scatter.set_memory_limit)",
                op=node.op_type,
                node=node.name,
                input=name,
                value=nbytes,
            )


def from_memory_error(node: onnx.NodeProto, exc: MemoryError) -> OutputTooLargeError:
    """The OutputTooLargeError naming ``node`` for a MemoryError its operator raised."""
    text = one_line(exc) or "out of memory"
    return OutputTooLargeError(
        f"{node_label(node.name)} ({node.op_type}): MemoryError: {text} (the memory limit is "
        f"{_memory.memory_limit()} bytes; see gather_scatter.set_memory_limit)",
        op=node.op_type,
        node=node.name,
    )
