"""onnx.reference adapters: our kernels inside ``onnx.reference.ReferenceEvaluator``.

Each class evaluates its node as :func:`~gather_scatter.run_node` does, at the model's opset for
the node's domain, which the evaluator hands every operator in ``run_params["opsets"]``; so
version gating (attributes, types) and our errors apply as they do for a single node.
An error raised by a node is re-raised as the same class with the same fields, its ``node``
field set and its message starting with the node's name.

``ReferenceEvaluator(model, new_ops=NEW_OPS)`` uses them in the main graph and in subgraphs
(If, Loop, Scan: their evaluators get the parent's ``new_ops``), but not everywhere, and
no argument of ``ReferenceEvaluator`` can change that (onnx 1.23):

- it builds a model-local function's evaluator as ``self.__class__(function)``, without
  ``new_ops``, so a node inside a function runs onnx.reference's own operator;
- every enclosing node (If, Loop, Scan, a function call) re-raises a TypeError from its
  body as a plain TypeError, so a DTypeError raised in a body loses its class;
- it refuses a model that imports the default domain as ``'ai.onnx'``;
- an error from one of its own operators names no node.

:class:`Evaluator` (which :func:`run_model` uses) fixes all four: it is the class that
onnx.reference instantiates for functions and subgraphs, so it passes our operators to
each, gives our error back from the wrapping TypeError, reads ``'ai.onnx'`` as ``''``, and
raises any other node's error as a :class:`~gather_scatter.errors.NodeError` naming the node.
It also takes ``strict=False`` to run off-spec nodes of the family (see :func:`run_model`).
The operators are specified at https://onnx.ai/onnx/operators/ (com.microsoft GatherND at
https://github.com/microsoft/onnxruntime/blob/main/docs/ContribOperators.md).

>>> import onnx.helper as oh
>>> from onnx.reference import ReferenceEvaluator
>>> node = oh.make_node("GatherND", ["data", "indices"], ["y"], name="read", batch_dims=1)
>>> graph = oh.make_graph([node], "g", [], [])
>>> model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 11)])
>>> ReferenceEvaluator(model, new_ops=NEW_OPS)
Traceback (most recent call last):
...
gather_scatter.errors.InvalidAttributeError: node 'read' (GatherND): GatherND-11: has no attribute 'batch_dims' (attributes: none); it was added in GatherND-12: re-export the model with opset 12 or later, or pass strict=False to run the node as GatherND-12
"""  # noqa: E501 - exact doctest output, cannot be wrapped

from __future__ import annotations

from .models.reference import (
    NEW_OPS,
    Evaluator,
    Gather,
    GatherBlockQuantized,
    GatherElements,
    GatherND,
    MicrosoftGatherND,
    Scatter,
    ScatterElements,
    ScatterND,
    TensorScatter,
)
from .models.session import run_model

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
    "run_model",
]
