"""The :class:`Evaluator`: onnx.reference's ``ReferenceEvaluator`` with our operators in every
graph, subgraph and function, our errors given back whole, and every other node's error naming
its node (see :mod:`gather_scatter.reference`, which exports it)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

import onnx
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpFunction, OpRun

from ...errors import GatherScatterError
from ...resources import memory as _memory
from .. import _external_data, _model_check
from .._graph import walk
from . import _sizes as _model_memory
from ._fixes import FIXED_OPS
from ._ops import _STRICT, NEW_OPS, _Node, _node_error, _our_error

__all__ = ["Evaluator"]


def _default_domain(proto: Any) -> Any:
    """Return ``proto`` (a model or function) with the default domain spelled ``''`` everywhere.

    A copy when it said ``'ai.onnx'``: onnx.reference only knows ``''``.
    """
    named = [o for o in proto.opset_import if o.domain == "ai.onnx"]
    if not named:
        return proto
    proto = type(proto).FromString(proto.SerializeToString())
    for o in proto.opset_import:
        if o.domain == "ai.onnx":
            o.domain = ""
    for body, _, node in walk(proto):
        if node is not None:
            if node.domain == "ai.onnx":
                node.domain = ""
        elif isinstance(body.proto, onnx.FunctionProto):
            for o in body.proto.opset_import:
                if o.domain == "ai.onnx":
                    o.domain = ""
    return proto


# The operators of the Evaluator being built, for the evaluators of its model-local
# functions, which onnx.reference builds inside its __init__ without new_ops.
_ENCLOSING_OPS: ContextVar[tuple[type[OpRun], ...]] = ContextVar("_ENCLOSING_OPS", default=())


def _foreign_hint(node: onnx.NodeProto) -> str:
    """Return the way to run a node neither onnx.reference nor our kernels implement.

    Where it is not one of onnx's operators (an onnxruntime contrib operator: com.microsoft
    MatMulNBits, GroupQueryAttention, SimplifiedLayerNormalization...), a sentence naming the
    hosted engine; otherwise ``""``.
    """
    domain = "" if node.domain == "ai.onnx" else node.domain
    if domain in ("", "ai.onnx.ml", "ai.onnx.preview.training") and onnx.defs.has(node.op_type, domain):
        return ""
    return (
        f" (onnx.reference has no {node.op_type} of domain {domain or 'ai.onnx'} and it is not an operator of ours; "
        "an onnxruntime contrib operator runs with engine='onnxruntime', where onnxruntime runs it "
        "and our kernels the indexing nodes)"
    )


def _named(node: OpRun, run: Any, sizes: Mapping[str, Any], guard: list[bool] | None = None) -> Any:
    """Wrap ``node.run`` so that its errors name the node.

    The wrapper raises our error as it is (out of any TypeError wrapping it), a MemoryError
    as an OutputTooLargeError naming the node, any other as a NodeError naming the node, the
    original as its ``__cause__``. It refuses before the node runs where one of its outputs, of
    a size in ``sizes`` (see ``_model_memory``), exceeds the memory limit, checked while
    ``guard[0]`` is true (the evaluator sets it once per run: some size exceeds it).
    """
    known = {name: sizes[name] for name in node.onnx_node.output if name in sizes}

    def named_run(*args: Any, **kwargs: Any) -> Any:
        if known and guard is not None and guard[0]:
            _model_memory.check_outputs(node.onnx_node, known)
        try:
            return run(*args, **kwargs)
        except GatherScatterError:
            raise
        except MemoryError as exc:
            raise _model_memory.from_memory_error(node.onnx_node, exc) from exc
        except Exception as exc:
            ours = _our_error(exc)
            if ours is not None:
                raise ours from None
            raise _node_error(node.onnx_node, node.run_params["opsets"], exc) from exc

    return named_run


def _direct(node: OpRun) -> Callable[..., tuple[Any, ...]] | None:
    """Return onnx.reference's ``node.run`` without ``OpRun.run``'s per-call work, or None.

    Only where none of that work applies to the node (its class keeps OpRun's run; no
    context, subgraph, linked attribute or function body): the attributes read once at load,
    the outputs checked as ``OpRun.run`` checks them. None for any other node. An error from
    the operator comes out unwrapped, which :func:`_named` names as it names the wrapped one.
    """
    plain = type(node).run is OpRun.run and not isinstance(node, OpFunction)
    if not plain or node.need_context() or node.has_subgraph or node.has_linked_attribute:
        return None
    if not all(hasattr(node, name) for name in node.attributes_names_):
        return None  # OpRun.run's NameError, at run as before
    attrs = {name: getattr(node, name) for name in node.attributes_names_}
    run, fix = node._run, node._check_and_fix_outputs

    def direct(*args: Any) -> tuple[Any, ...]:
        return fix(run(*args, **attrs))

    return direct


class Evaluator(ReferenceEvaluator):
    """``onnx.reference.ReferenceEvaluator`` with this library's kernels for every operator of the family.

    The kernels run everywhere: the main graph, subgraphs (If, Loop, Scan) and model-local
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
    strict : bool, optional
        As for :func:`run_model` (default True); a function's or subgraph's evaluator,
        built without it, takes its parent's.
    check : bool, default True
        As for :func:`run_model`: False skips the validation of a model (a ModelProto or a
        path; a function or graph is not validated).

    Raises
    ------
    GatherScatterError
        From a node of the family, when the model is loaded (an attribute or opset its
        version lacks) or run, as described for :func:`run_model`.
    NodeError
        Any other error from loading or running a node (onnx.reference's operators), naming
        the node, its operator, domain and opset; the original is its ``__cause__``.
    ModelInputError
        A model tensor stored as external data that was not loaded; a model that is not
        well-formed (see :func:`run_model`).

    Examples
    --------
    >>> import numpy as np, onnx.helper as oh
    >>> pick = oh.make_node("GatherND", ["x", "i"], ["y"], name="pick")
    >>> function = oh.make_function("local", "Pick", ["x", "i"], ["y"], [pick], [oh.make_opsetid("", 13)])
    >>> call = oh.make_node("Pick", ["x", "i"], ["y"], domain="local")
    >>> f = oh.make_tensor_value_info
    >>> graph = oh.make_graph([call], "g", [f("x", 11, [4]), f("i", 7, [1, 1])], [f("y", 11, None)])
    >>> opsets = [oh.make_opsetid("ai.onnx", 13), oh.make_opsetid("local", 1)]
    >>> model = oh.make_model(graph, opset_imports=opsets, functions=[function])
    >>> Evaluator(model).run(None, {"x": np.arange(4.0), "i": np.array([[4]])})
    Traceback (most recent call last):
    ...
    gather_scatter.errors.IndexOutOfBoundsError: node 'pick' (GatherND): GatherND-13: indices[0, 0] = 4 is out of bounds for data axis 0 of size 4 (valid range [-4, 3])
    """  # noqa: E501 - exact doctest output, cannot be wrapped

    def __init__(
        self,
        proto: Any,
        *args: Any,
        new_ops: Any = None,
        strict: bool | None = None,
        check: bool = True,
        **kwargs: Any,
    ) -> None:
        path = None
        if isinstance(proto, (str, os.PathLike)):
            path = proto
            proto = _model_check.load_model(proto) if check else onnx.load(os.fspath(proto))
        from_bytes = isinstance(proto, (bytes, bytearray, memoryview))
        if from_bytes:
            proto = onnx.load_model_from_string(bytes(proto))
        if isinstance(proto, onnx.ModelProto):
            _external_data.external_data_loaded(proto, from_bytes=from_bytes)
            if check:
                _model_check.check_model(proto, path=path)
        if isinstance(proto, (onnx.ModelProto, onnx.FunctionProto)):
            proto = _default_domain(proto)
        if new_ops is None:  # none from the caller, or a function's evaluator: the enclosing ones
            new_ops = _ENCLOSING_OPS.get()
        # A function's or subgraph's evaluator (built with no strict) is as strict as its parent.
        self.strict = _STRICT.get() if strict is None else bool(strict)
        # The evaluator keeps the first class given for each key: the caller's win, then our
        # kernels, then our replacements of onnx.reference's operators that the spec contradicts.
        ops = (*new_ops, *NEW_OPS, *FIXED_OPS)
        tokens = _ENCLOSING_OPS.set(ops), _STRICT.set(self.strict)
        try:
            # *args: ReferenceEvaluator's positional parameters before new_ops, never as many as it
            super().__init__(proto, *args, new_ops=list(ops), **kwargs)  # type: ignore[misc]
        finally:
            _ENCLOSING_OPS.reset(tokens[0])
            _STRICT.reset(tokens[1])

    def _init(self) -> None:
        # onnx.reference loads one node after the other: the first not loaded is the one at fault.
        try:
            super()._init()
        except GatherScatterError:
            raise
        except Exception as exc:
            loaded = len(self.rt_nodes_)
            if len(self.rt_inits_) < len({i.name for i in self.inits_}) or loaded >= len(self.nodes_):
                raise  # an initializer, not a node
            node = self.nodes_[loaded]
            raise _node_error(node, self.opsets, exc, _foreign_hint(node)) from exc
        # Our nodes check their own outputs; the others against the sizes inference fixes.
        sizes = _model_memory.static_sizes(self.proto_) if isinstance(self.proto_, onnx.ModelProto) else {}
        # The nodes check their sizes in a run only where the largest of them exceeds the
        # limit then: one reading of the limit per run, not one per node.
        self._largest = max((nbytes for _, _, nbytes in sizes.values()), default=0)
        self._guard = [False]
        for node in self.rt_nodes_:
            if isinstance(node, _Node):
                # _Node.run is a method: this node's run, replaced on the instance
                node.run = _named(node, node.run, {}) if node.has_linked_attribute else node.direct_run()  # type: ignore[method-assign]
            else:
                node.run = _named(node, _direct(node) or node.run, sizes, self._guard)
        # What run(output_names, feeds) calls, in order: a model's nodes only (a function's or
        # subgraph's evaluator is run with attributes or a context, by ReferenceEvaluator.run).
        self._steps: list[tuple[Any, tuple[str, ...], tuple[str, ...], bool]] | None = None
        if isinstance(self.proto_, onnx.ModelProto):
            self._steps = [
                (node.run, tuple(node.input), tuple(node.output), node.need_context()) for node in self.rt_nodes_
            ]

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Run as ``ReferenceEvaluator.run``, our errors given back from onnx.reference's wrapping.

        ``run(output_names, feeds)`` of a model (no other argument, no verbose logging or
        shape annotations) runs the nodes listed once at load, without
        ``ReferenceEvaluator.run``'s per-call work that such a run never needs.

        Parameters
        ----------
        *args, **kwargs
            As for ``ReferenceEvaluator.run``: ``output_names`` (None: all), ``feed_inputs``
            (input name to array), and its optional arguments.

        Returns
        -------
        list
            The requested outputs, in the order asked.

        Raises
        ------
        GatherScatterError
            A node of the family failed: the error of its kernel, named after the node
            (:meth:`GatherScatterError.in_node`), not wrapped in a TypeError.
        NodeError, OutputTooLargeError
            Another node failed, or ran out of memory (see :class:`Evaluator`).
        """
        if self._largest:
            self._guard[0] = _memory.exceeded(self._largest) is not None
        lean = len(args) == 2 and not kwargs and self._steps is not None
        lean = lean and not (self.check_shape_annotations_ or self.verbose)
        token = _STRICT.set(self.strict)  # for the nodes onnx.reference loads only when run
        try:
            return self._run_steps(*args) if lean else super().run(*args, **kwargs)
        except TypeError as exc:
            ours = _our_error(exc)
            if ours is None:
                raise
            raise ours from None
        finally:
            _STRICT.reset(token)

    def _run_steps(self, output_names: Sequence[str] | None, feeds: Mapping[str, Any]) -> list[Any]:
        assert self._steps is not None  # run() calls this only for a model's evaluator
        results = {"": None, **self.rt_inits_}
        results.update(feeds)
        for run, inputs, outputs, context in self._steps:
            try:
                args = [results[name] for name in inputs]
            except KeyError as exc:  # a model not checked (check=False), as onnx.reference says it
                raise RuntimeError(f"Unable to find input {exc.args[0]!r} in known results {sorted(results)}") from None
            values = run(*args, context=results) if context else run(*args)
            results.update(zip(outputs, values, strict=False))
        try:
            return [results[name] for name in (self.output_names if output_names is None else output_names)]
        except KeyError as exc:
            raise RuntimeError(f"Unable to find output name {exc.args[0]!r} in {sorted(results)}") from None
