"""The onnx.reference operators of the family: each node evaluated by ``run_version`` at the
model's opset, as :func:`~gather_scatter.run_node` does (see :mod:`gather_scatter.reference`,
which exports them), and the errors they raise named after their node."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

import onnx
from onnx.reference.op_run import OpRun

from ..._nodes import check_arity, check_node_arity, node_attributes, resolve_node, run_version, version_kernel
from ...errors import GatherScatterError, NodeError, node_label
from ...rules.versions import OpVersion
from . import _sizes as _model_memory

__all__ = [
    "NEW_OPS",
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


# The strictness of the Evaluator being built or run, for our nodes (their run_params come
# from onnx.reference) and for the evaluators of its functions and subgraphs.
_STRICT: ContextVar[bool] = ContextVar("_STRICT", default=True)


def _origin(exc: BaseException) -> BaseException:
    """Return the exception a node raised, out of the TypeErrors that ``OpRun.run`` wraps around it.

    ``OpRun.run`` wraps a TypeError or AttributeError from ``_run`` (one per enclosing node).
    """
    while isinstance(exc, TypeError) and str(exc).startswith("Issues with types") and exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def _node_error(node: onnx.NodeProto, opsets: Mapping[str, int], exc: BaseException, hint: str = "") -> NodeError:
    """Turn a foreign error raised by (or while loading) a model's node into a NodeError naming the node.

    ``hint`` (a sentence) is appended to the message.
    """
    origin = _origin(exc)
    domain = node.domain or "ai.onnx"
    opset = opsets.get(node.domain)
    where = f"{node_label(node.name)} ({node.op_type}, domain {domain}" + (f", opset {opset})" if opset else ")")
    err = NodeError(f"{where}: {type(origin).__name__}: {origin}{hint}", op=node.op_type, node=node.name)
    err.domain = domain
    return err


def _our_error(exc: BaseException | None) -> GatherScatterError | None:
    """Return our error inside ``exc``, or None.

    ``exc`` is a chain of the TypeErrors that onnx.reference's ``OpRun.run`` wraps around any
    TypeError (DTypeError included) from a node, one per enclosing node.
    """
    while isinstance(exc, TypeError) and not isinstance(exc, GatherScatterError):
        exc = exc.__cause__
    return exc if isinstance(exc, GatherScatterError) else None


class _Node(OpRun):
    """One Gather/GatherND/ScatterND node, evaluated by run_node at the model's opset."""

    # No schema: the evaluator would otherwise add the newest version's attribute defaults
    # (batch_dims=0 on a GatherND-11 node), which the older version must refuse.
    op_schema = None

    def __init__(self, onnx_node: onnx.NodeProto, run_params: dict[str, Any], schema: Any = None):
        super().__init__(onnx_node, run_params, schema)
        # Refuse an attribute or opset the version lacks when the model is loaded, not run; an
        # off-spec node of a non-strict evaluator gets its version (and its warning) once, here.
        try:
            self._spec, self._values = resolve_node(
                onnx_node.op_type,
                self._attrs(),
                opset=self._opset,
                domain=self.op_domain,
                strict=_STRICT.get(),
                node=onnx_node.name,
            )
            # A required input missing (a tied genai export with is_symmetric=false writes a
            # GatherBlockQuantized without scales) is refused at load too, not at the first run.
            check_node_arity(self._spec, onnx_node.input)
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
            output = run_version(self._spec, inputs, node_attributes(self._spec, attrs))
        except GatherScatterError as exc:
            raise exc.in_node(self.onnx_node.name, self.onnx_node.op_type) from None
        return (output,)

    def direct_run(self) -> Callable[..., tuple[Any]]:
        """Return what the evaluator calls as ``run`` for a node with no linked attribute.

        That is :func:`_kernel_call` of the version and attributes taken once at load.
        """
        return _kernel_call(self._spec, self._values, self.onnx_node, self.run_params["opsets"])

    def run(self, *args, **kwargs):
        try:
            return super().run(*args, **kwargs)
        except TypeError as exc:
            # OpRun.run rewraps every TypeError from _run, DTypeError included: give ours back.
            ours = _our_error(exc)
            if ours is None:
                raise
            raise ours from None


def _kernel_call(
    spec: OpVersion, values: Mapping[str, Any], node: onnx.NodeProto, opsets: Mapping[str, int]
) -> Callable[..., tuple[Any]]:
    """Return the kernel of ``spec`` with ``values`` bound: inputs in, ``(output,)`` out.

    Trailing None inputs are left out (optional inputs the node omits); our error comes out
    named after ``node``, a MemoryError as an OutputTooLargeError naming it, any other error
    as a NodeError naming it.
    """

    kernel, low, high = version_kernel(spec)  # run_version's lookups, once

    def run(*inputs: Any) -> tuple[Any]:
        while inputs and inputs[-1] is None:  # trailing optional inputs the node leaves out
            inputs = inputs[:-1]
        try:
            if not low <= len(inputs) <= high:
                check_arity(spec, len(inputs))  # raises ArityError
            return (kernel(spec, *inputs, **values),)
        except GatherScatterError as exc:
            raise exc.in_node(node.name, node.op_type) from None
        except MemoryError as exc:
            raise _model_memory.from_memory_error(node, exc) from exc
        except Exception as exc:
            raise _node_error(node, opsets, exc) from exc

    return run


def node_runner(node: onnx.NodeProto, opset: int, *, strict: bool = True) -> Callable[..., tuple[Any]]:
    """Return the call that runs a node of the family as our evaluator runs it, without the evaluator.

    The version in effect at ``opset`` (the model's, for the node's domain) and its attributes
    are resolved once, here, as the evaluator resolves them when it loads the node (an
    off-spec node, with ``strict=False``, warns here); the call takes the node's inputs
    (None for an omitted optional one) and returns ``(output,)``.

    Raises
    ------
    GatherScatterError
        Here, an attribute, opset or input count the version refuses; in the call, the
        kernel's error; both named after the node, as :meth:`GatherScatterError.in_node` gives them.
    """
    try:  # string attributes are read as str (attribute_dict), as the kernels' fast path takes them
        spec, values = resolve_node(
            node.op_type, node.attribute, opset=opset, domain=node.domain, strict=strict, node=node.name
        )
        check_node_arity(spec, node.input)
    except GatherScatterError as exc:
        raise exc.in_node(node.name, node.op_type) from None
    return _kernel_call(spec, values, node, {node.domain: opset})


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


class GatherBlockQuantized(_Node):
    """com.microsoft GatherBlockQuantized (1): a block-quantized embedding lookup, dequantized.

    https://github.com/microsoft/onnxruntime/blob/main/docs/ContribOperators.md#com.microsoft.GatherBlockQuantized
    """

    op_domain = "com.microsoft"


#: The classes to pass as ``ReferenceEvaluator(model, new_ops=NEW_OPS)``.
NEW_OPS: tuple[type[OpRun], ...] = (
    Gather,
    GatherND,
    ScatterND,
    GatherElements,
    ScatterElements,
    Scatter,
    TensorScatter,
    MicrosoftGatherND,
    GatherBlockQuantized,
)
