"""onnx.reference adapters: our kernels inside ``onnx.reference.ReferenceEvaluator``.

Each class evaluates its node with :func:`~gather_scatter.run_node` at the model's opset for
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
- it refuses a model that imports the default domain as ``'ai.onnx'``.

:class:`Evaluator` (which :func:`run_model` uses) fixes all three: it is the class that
onnx.reference instantiates for functions and subgraphs, so it passes our operators to
each, gives our error back from the wrapping TypeError, and reads ``'ai.onnx'`` as ``''``.
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
gather_scatter.errors.InvalidAttributeError: node 'read' (GatherND): GatherND-11: has no attribute 'batch_dims' (attributes: none); it was added in GatherND-12
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from typing import Any, Mapping

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

from ._dispatch import node_attributes, run_node
from ._versions import resolve
from .errors import DTypeError, GatherScatterError, ModelInputError, ShapeError

__all__ = [
    "NEW_OPS",
    "Evaluator",
    "Gather",
    "GatherElements",
    "GatherND",
    "MicrosoftGatherND",
    "Scatter",
    "ScatterElements",
    "ScatterND",
    "TensorScatter",
    "run_model",
]


class _Node(OpRun):
    """One Gather/GatherND/ScatterND node, evaluated by run_node at the model's opset."""

    # No schema: the evaluator would otherwise add the newest version's attribute defaults
    # (batch_dims=0 on a GatherND-11 node), which the older version must refuse.
    op_schema = None

    def __init__(self, onnx_node: onnx.NodeProto, run_params: dict[str, Any], schema: Any = None):
        super().__init__(onnx_node, run_params, schema)
        # Refuse an attribute or opset the version lacks when the model is loaded, not run.
        try:
            node_attributes(resolve(onnx_node.op_type, self._opset, self.op_domain), self._attrs())
        except GatherScatterError as exc:
            raise exc.in_node(onnx_node.name, onnx_node.op_type) from None

    @property
    def _opset(self) -> int:
        return self.run_params["opsets"][self.onnx_node.domain]

    def _attrs(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.attributes_names_}

    def _run(self, *inputs, **attrs):
        while inputs and inputs[-1] is None:  # trailing optional inputs the node leaves out
            inputs = inputs[:-1]
        try:
            output = run_node(self.onnx_node.op_type, inputs, attrs, opset=self._opset, domain=self.op_domain)
        except GatherScatterError as exc:
            raise exc.in_node(self.onnx_node.name, self.onnx_node.op_type) from None
        return (output,)

    def run(self, *args, **kwargs):
        try:
            return super().run(*args, **kwargs)
        except TypeError as exc:
            # OpRun.run rewraps every TypeError from _run, DTypeError included: give ours back.
            ours = _our_error(exc)
            if ours is None:
                raise
            raise ours from None


class Gather(_Node):
    """ai.onnx Gather (1, 11, 13).

    https://onnx.ai/onnx/operators/onnx__Gather.html
    """


class GatherND(_Node):
    """ai.onnx GatherND (11, 12, 13).

    https://onnx.ai/onnx/operators/onnx__GatherND.html
    """


class ScatterND(_Node):
    """ai.onnx ScatterND (11, 13, 16, 18).

    https://onnx.ai/onnx/operators/onnx__ScatterND.html
    """


class GatherElements(_Node):
    """ai.onnx GatherElements (11, 13).

    https://onnx.ai/onnx/operators/onnx__GatherElements.html
    """


class ScatterElements(_Node):
    """ai.onnx ScatterElements (11, 13, 16, 18).

    https://onnx.ai/onnx/operators/onnx__ScatterElements.html
    """


class Scatter(_Node):
    """ai.onnx Scatter (9; a model at opset 11 or later is refused, naming ScatterElements).

    https://onnx.ai/onnx/operators/onnx__Scatter.html
    """


class TensorScatter(_Node):
    """ai.onnx TensorScatter (24; ``write_indices`` optional).

    https://onnx.ai/onnx/operators/onnx__TensorScatter.html
    """


class MicrosoftGatherND(_Node):
    """com.microsoft GatherND (1).

    https://github.com/microsoft/onnxruntime/blob/main/docs/ContribOperators.md#com.microsoft.GatherND
    """

    op_domain = "com.microsoft"


# The evaluator keys new_ops by (op_domain, class __name__).
MicrosoftGatherND.__name__ = "GatherND"

#: The classes to pass as ``ReferenceEvaluator(model, new_ops=NEW_OPS)``.
NEW_OPS: tuple[type[OpRun], ...] = (
    Gather, GatherND, ScatterND, GatherElements, ScatterElements, Scatter, TensorScatter, MicrosoftGatherND
)


def _default_domain(proto: Any) -> Any:
    """``proto`` (a model or function) with the default domain spelled ``''`` everywhere (a
    copy when it said ``'ai.onnx'``): onnx.reference only knows ``''``."""
    named = [o for o in proto.opset_import if o.domain == "ai.onnx"]
    if not named:
        return proto
    proto = type(proto).FromString(proto.SerializeToString())
    for o in proto.opset_import:
        if o.domain == "ai.onnx":
            o.domain = ""

    def fix(nodes) -> None:
        for node in nodes:
            if node.domain == "ai.onnx":
                node.domain = ""
            for attr in node.attribute:
                for graph in [attr.g, *attr.graphs]:
                    fix(graph.node)

    fix(proto.graph.node if isinstance(proto, onnx.ModelProto) else proto.node)
    for function in getattr(proto, "functions", ()):
        fix(function.node)
        for o in function.opset_import:
            if o.domain == "ai.onnx":
                o.domain = ""
    return proto


# The operators of the Evaluator being built, for the evaluators of its model-local
# functions, which onnx.reference builds inside its __init__ without new_ops.
_ENCLOSING_OPS: ContextVar[tuple[type[OpRun], ...]] = ContextVar("_ENCLOSING_OPS", default=())


class Evaluator(ReferenceEvaluator):
    """``onnx.reference.ReferenceEvaluator`` with this library's kernels for every operator of
    the family, everywhere: the main graph, subgraphs (If, Loop, Scan) and model-local
    functions, nested to any depth.

    onnx.reference builds the evaluator of each function and subgraph as
    ``self.__class__(...)``, so each is an Evaluator too: a function's (built without
    ``new_ops``) still gets ours and the caller's, and each one's :meth:`run` gives back our
    error that an enclosing If, Loop, Scan or function call has wrapped in a plain TypeError.

    Parameters
    ----------
    proto : onnx.ModelProto, onnx.FunctionProto, onnx.GraphProto, str, path-like or bytes
        As for ``ReferenceEvaluator``; a path is read with ``onnx.load`` (external data
        beside the file). A model or function may import the default domain as
        ``'ai.onnx'``: it is read as ``''`` on a copy, the caller's proto is not modified.
    *args, **kwargs
        Passed on to ``ReferenceEvaluator``.
    new_ops : sequence of OpRun subclasses, optional
        More operators, used in functions and subgraphs too; one keyed as one of ours (same
        ``op_domain`` and class name) replaces ours.

    Raises
    ------
    GatherScatterError
        From a node of the family, when the model is loaded (an attribute or opset its
        version lacks) or run, as described for :func:`run_model`.

    Examples
    --------
    >>> import numpy as np, onnx.helper as oh
    >>> pick = oh.make_node("GatherND", ["x", "i"], ["y"], name="pick")
    >>> function = oh.make_function("local", "Pick", ["x", "i"], ["y"], [pick], [oh.make_opsetid("", 13)])
    >>> call = oh.make_node("Pick", ["x", "i"], ["y"], domain="local")
    >>> graph = oh.make_graph([call], "g", [], [])
    >>> opsets = [oh.make_opsetid("ai.onnx", 13), oh.make_opsetid("local", 1)]
    >>> model = oh.make_model(graph, opset_imports=opsets, functions=[function])
    >>> Evaluator(model).run(None, {"x": np.arange(4.0), "i": np.array([[4]])})
    Traceback (most recent call last):
    ...
    gather_scatter.errors.IndexOutOfBoundsError: node 'pick' (GatherND): GatherND-13: indices[0, 0] = 4 is out of bounds for data axis 0 of size 4 (valid range [-4, 3])
    """

    def __init__(self, proto: Any, *args: Any, new_ops: Any = None, **kwargs: Any) -> None:
        if isinstance(proto, (str, os.PathLike)):
            proto = onnx.load(os.fspath(proto))
        elif isinstance(proto, bytes):
            proto = onnx.load_model_from_string(proto)
        if isinstance(proto, (onnx.ModelProto, onnx.FunctionProto)):
            proto = _default_domain(proto)
        if new_ops is None:  # none from the caller, or a function's evaluator: the enclosing ones
            new_ops = _ENCLOSING_OPS.get()
        # The evaluator keeps the first class given for each key: the caller's win.
        ops = (*new_ops, *NEW_OPS)
        token = _ENCLOSING_OPS.set(ops)
        try:
            super().__init__(proto, *args, new_ops=ops, **kwargs)
        finally:
            _ENCLOSING_OPS.reset(token)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().run(*args, **kwargs)
        except TypeError as exc:
            ours = _our_error(exc)
            if ours is None:
                raise
            raise ours from None


def _our_error(exc: BaseException | None) -> GatherScatterError | None:
    """Our error inside ``exc``, a chain of the TypeErrors that onnx.reference's ``OpRun.run``
    wraps around any TypeError (DTypeError included) from a node, one per enclosing node."""
    while isinstance(exc, TypeError) and not isinstance(exc, GatherScatterError):
        exc = exc.__cause__
    return exc if isinstance(exc, GatherScatterError) else None


def _check_inputs(graph: onnx.GraphProto, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """``inputs`` as arrays, checked against the graph's declared inputs (names, types, ranks
    and fixed dims); initializers listed as inputs may be left out."""
    initializers = {init.name for init in graph.initializer}
    declared = {i.name: i for i in graph.input}
    unknown = sorted(set(inputs) - set(declared))
    if unknown:
        raise ModelInputError(
            f"the model has no input {unknown[0]!r} (inputs: {', '.join(declared) or 'none'})", input=unknown[0]
        )
    missing = [name for name in declared if name not in inputs and name not in initializers]
    if missing:
        raise ModelInputError(f"model input {missing[0]!r} is missing (inputs: {', '.join(declared)})", input=missing[0])
    feeds = {}
    for name, value in inputs.items():
        value = np.asarray(value)
        tensor = declared[name].type.tensor_type
        if declared[name].type.HasField("tensor_type") and tensor.elem_type:
            _check_type(name, value, tensor.elem_type)
        if tensor.HasField("shape"):
            _check_shape(name, value, [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim])
        feeds[name] = _as_feed(value)
    return feeds


def _as_feed(value: np.ndarray) -> np.ndarray:
    """A checked input as every operator expects it: native byte order, and strings as an
    object array of str (so string outputs are object arrays whatever was fed)."""
    if value.dtype.kind == "S":
        return np.char.decode(value, "utf-8").astype(object)
    if value.dtype.kind == "U":
        return value.astype(object)
    if not value.dtype.isnative:
        return value.astype(value.dtype.newbyteorder("="))
    return value


def _check_type(name: str, value: np.ndarray, elem_type: int) -> None:
    want = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    native = value.dtype.newbyteorder("=") if value.dtype.byteorder not in "=|" else value.dtype
    if native == want or (want == object and value.dtype.kind in "OUS"):  # any byte order
        return
    shown = onnx.TensorProto.DataType.Name(elem_type).lower()
    raise DTypeError(
        f"model input {name!r} has NumPy dtype {value.dtype}, but the model declares tensor({shown}) "
        f"(NumPy {want})",
        input=name,
        value=str(value.dtype),
    )


def _check_shape(name: str, value: np.ndarray, dims: list[int | None]) -> None:
    if value.ndim != len(dims):
        raise ShapeError(
            f"model input {name!r} has rank {value.ndim} (shape {value.shape}), but the model declares "
            f"rank {len(dims)}",
            input=name,
            value=value.shape,
        )
    for axis, (size, want) in enumerate(zip(value.shape, dims)):
        if want is not None and size != want:
            shown = tuple("?" if d is None else d for d in dims)
            raise ShapeError(
                f"model input {name!r} has shape {value.shape}, but the model declares {shown} "
                f"(axis {axis} must be {want})",
                input=name,
                value=value.shape,
                axis=axis,
            )


def run_model(model: str | os.PathLike | onnx.ModelProto, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Evaluate an ONNX model: our kernels for every operator of the family (Gather, GatherND,
    ScatterND, GatherElements, ScatterElements, Scatter, TensorScatter; in the main graph,
    subgraphs and model-local functions), onnx.reference for every other operator.

    Parameters
    ----------
    model : str, path-like or onnx.ModelProto
        The model, or the path of an ``.onnx`` file (external data is read beside it).
    inputs : mapping of str to array_like
        One array per graph input, by name; each must have the declared element type (in any
        byte order; strings as object, ``'U'`` or ``'S'`` arrays), rank and fixed dims.

    Returns
    -------
    dict of str to ndarray
        The graph's outputs by name, in the graph's order.

    Raises
    ------
    ModelInputError
        A declared input is missing, or a name is not a declared input.
    DTypeError, ShapeError
        An input's dtype, rank or a fixed dim differs from the declaration.
    GatherScatterError
        Any of our errors raised by a node, with ``node`` set to its name and the message
        starting with ``node '<name>' (<op_type>):``; the class is kept, so
        ``except IndexError`` still catches an out-of-bounds index.
    OSError, onnx.onnx_cpp2py_export.checker.ValidationError, google.protobuf.message.DecodeError
        As raised by ``onnx.load`` for a missing or unreadable model file.

    Examples
    --------
    >>> import numpy as np, onnx.helper as oh
    >>> node = oh.make_node("ScatterND", ["x", "i", "u"], ["y"], name="write", reduction="add")
    >>> f = lambda name, elem, shape: oh.make_tensor_value_info(name, elem, shape)
    >>> graph = oh.make_graph([node], "g", [f("x", 1, [4]), f("i", 7, [2, 1]), f("u", 1, [2])], [f("y", 1, [4])])
    >>> model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 16)])
    >>> feeds = {"x": np.zeros(4, np.float32), "i": np.array([[1], [1]]), "u": np.ones(2, np.float32)}
    >>> run_model(model, feeds)
    {'y': array([0., 2., 0., 0.], dtype=float32)}
    >>> run_model(model, {**feeds, "i": np.array([[1], [4]])})
    Traceback (most recent call last):
    ...
    gather_scatter.errors.IndexOutOfBoundsError: node 'write' (ScatterND): ScatterND-16: indices[1, 0] = 4 is out of bounds for data axis 0 of size 4 (valid range [-4, 3])
    """
    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(os.fspath(model))  # external data: read relative to the file, not the cwd
    feeds = _check_inputs(model.graph, inputs)
    session = Evaluator(model)
    return dict(zip(session.output_names, session.run(None, feeds)))
