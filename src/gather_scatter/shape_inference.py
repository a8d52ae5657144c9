"""Model-level shape inference: our rules for the family's nodes, onnx's inference for every other node.

The public path of :mod:`gather_scatter.models.shape_inference`, where it lives;
``gather_scatter.infer_model_shapes`` is the same function.
"""

from .models.shape_inference import infer_model_shapes, node_shapes

__all__ = ["infer_model_shapes", "node_shapes"]
