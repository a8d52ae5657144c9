"""Model mode's first half: make a model's inputs and record its indexing nodes' calls.

The model's inputs are made, and the model run once with our kernels while
each indexing node (Gather, GatherND, ScatterND, GatherElements, ScatterElements, Scatter,
TensorScatter, com.microsoft GatherND and GatherBlockQuantized; in the main graph, subgraphs and
functions) records the inputs and attributes of its first call (:func:`capture`), to be replayed on an engine
(``model``).

Inputs not given are random, reproducible from the seed (:func:`make_feeds`): integers in
``[0, n)`` where ``n`` is the smallest dim of the model's inputs (so they are valid indices into
any of them), floats small and finite, every other type as the operator cases draw it.
"""

from __future__ import annotations

import warnings
import zlib
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from ..errors import GatherScatterError, InvalidAttributeError, NodeError, one_line
from ..models import all_nodes, check_inputs, check_model, load_model, type_str
from ..rules.versions import FAMILY, OpVersion
from . import case_values as C
from . import runner

__all__ = [
    "FAMILY",
    "ModelUsageError",
    "NodeRun",
    "capture",
    "capturing_ops",
    "finish",
    "indexing_nodes",
    "load",
    "make_feeds",
    "not_run",
    "recorder",
]


class ModelUsageError(ValueError):
    """A model or its inputs that model mode cannot check (exit status 2 at the command line).

    Unreadable, no indexing node, a symbolic dim without ``--dim``, an input it cannot make.
    """


@dataclass
class NodeRun:
    """One indexing node as the model ran it: its first call's inputs and attributes.

    Attributes
    ----------
    label, name : str
        How the report names the node (``unnamed ScatterND #2`` where it has no name), its name.
    spec : OpVersion
        The version it ran as; ``opset`` is the one it is replayed at (the model's, or the
        version's own where the node is off-spec at the model's).
    error : GatherScatterError or None
        What our kernel raised on these inputs (the model stopped there).
    calls : int
        How often it ran (a node in a Loop body or a function runs more than once).
    model_opset : int or None
        The opset of the node's domain in the model (or its function); below
        ``spec.since_version`` where the node is off-spec and ran as a later version
        (``strict=False``).
    """

    label: str
    name: str
    spec: OpVersion
    opset: int
    inputs: list
    attrs: dict
    error: GatherScatterError | None = None
    calls: int = 1
    model_opset: int | None = None
    check: runner.CheckCase = field(init=False)

    def __post_init__(self) -> None:
        self.check = runner.CheckCase(
            self.spec,
            self.opset,
            C.Case(self.spec.op_type, self.inputs, self.attrs, constants=_constants(self.spec)),
            "valid" if self.error is None else "invalid",
        )


def _constants(spec: OpVersion) -> tuple[int, ...]:
    """Return the inputs a replay holds as initializers: GatherBlockQuantized's data, scales, zero points."""
    if (spec.domain, spec.op_type) == ("com.microsoft", "GatherBlockQuantized"):
        from .quantized_cases import CONSTANTS

        return CONSTANTS
    return ()


def _domain(node: onnx.NodeProto) -> str:
    return "" if node.domain in ("", "ai.onnx") else node.domain


def indexing_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """Return the model's nodes of the family, in the main graph, its subgraphs and its functions.

    Parameters
    ----------
    model : onnx.ModelProto

    Returns
    -------
    list of onnx.NodeProto
    """
    return [n for n in all_nodes(model) if (_domain(n), n.op_type) in FAMILY]


def _input_shape(value: onnx.ValueInfoProto, dims: Mapping[str, int]) -> tuple[int, ...]:
    name, t = value.name, value.type
    if t.WhichOneof("value") != "tensor_type" or not t.tensor_type.elem_type:
        raise ModelUsageError(
            f"model input {name!r} is {type_str(t)}: random values are made for tensors only; "
            f"pass it with --input {name}=FILE.npy"
        )
    if not t.tensor_type.HasField("shape"):
        raise ModelUsageError(f"model input {name!r} declares no shape: pass it with --input {name}=FILE.npy")
    shape = []
    for axis, d in enumerate(t.tensor_type.shape.dim):
        if d.HasField("dim_value"):
            shape.append(d.dim_value)
        elif d.dim_param and d.dim_param in dims:
            shape.append(dims[d.dim_param])
        elif d.dim_param:
            raise ModelUsageError(
                f"model input {name!r} has the symbolic dim {d.dim_param!r} (axis {axis}): "
                f"pass --dim {d.dim_param}=SIZE"
            )
        else:
            raise ModelUsageError(
                f"model input {name!r} has no size on axis {axis}: pass it with --input {name}=FILE.npy"
            )
    return tuple(shape)


def make_feeds(
    graph: onnx.GraphProto, given: Mapping[str, np.ndarray], dims: Mapping[str, int], seed: int
) -> tuple[dict[str, np.ndarray], list[str]]:
    """Return the model's inputs: ``given`` ones as they are, the others random.

    The others are random of their declared type and shape, reproducible from ``seed``.

    Parameters
    ----------
    graph : onnx.GraphProto
    given : mapping of str to ndarray
        Inputs by name (``--input NAME=FILE``); a raw void array of an ml_dtypes type's width
        (as ``np.save`` stores bfloat16, float8, int4 ...) is read as the declared type.
    dims : mapping of str to int
        A size for each symbolic dim (``--dim NAME=SIZE``) of an input not given.
    seed : int

    Returns
    -------
    feeds : dict of str to ndarray
        Checked as :func:`~gather_scatter.run_model` checks them.
    described : list of str
        One ``name dtype shape (random|given)`` per input, for the report.

    Raises
    ------
    ModelUsageError
        A name in ``given`` the model does not declare, a name of ``dims`` that no input has, a
        symbolic dim not in ``dims``, an input that is not a tensor, or a given input of another
        type or shape than declared.
    """
    from ..models import typed_inputs

    given = typed_inputs(graph, dict(given))  # bfloat16, float8, int4 ... as .npy stores them: raw void
    initializers = {i.name for i in graph.initializer}
    declared = {i.name: i for i in graph.input}
    for name in given:
        if name not in declared:
            raise ModelUsageError(f"the model has no input {name!r} (inputs: {', '.join(declared) or 'none'})")
    symbols = {
        d.dim_param
        for i in graph.input
        if i.type.WhichOneof("value") == "tensor_type"
        for d in i.type.tensor_type.shape.dim
        if d.dim_param
    }
    for name in dims:
        if name not in symbols:
            raise ModelUsageError(
                f"--dim {name}: the model's inputs have no symbolic dim {name!r} "
                f"(symbolic dims: {', '.join(sorted(symbols)) or 'none'})"
            )
    shapes = {
        name: _input_shape(value, dims)
        for name, value in declared.items()
        if name not in given and name not in initializers
    }
    sizes = [n for s in [*shapes.values(), *(np.shape(a) for a in given.values())] for n in s if n > 0]
    high = min(sizes, default=1)
    feeds: dict[str, Any] = dict(given)
    described = []
    for name, shape in shapes.items():
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(declared[name].type.tensor_type.elem_type))
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        if dtype.kind in "iu":
            feeds[name] = rng.integers(0, high, size=shape).astype(dtype)
        else:
            feeds[name] = C.values(rng, C.onnx_name(dtype), shape, special=False)
    for name in declared:
        if name in feeds:
            a = np.asarray(feeds[name])
            described.append(f"{name} {a.dtype}{list(a.shape)} {'random' if name in shapes else 'given'}")
    try:
        return check_inputs(graph, feeds), described
    except GatherScatterError as exc:
        raise ModelUsageError(str(exc)) from None


def _capturing(cls: type, record) -> type:
    """Return ``cls`` (one of ``reference.NEW_OPS``) calling ``record(node, inputs, attrs, run)``.

    It calls ``record`` instead of running the kernel straight (kept under its name and domain,
    so it replaces ``cls``).
    """

    class Capturing(cls):
        def direct_run(self):
            run = super().direct_run()
            attrs = {name: getattr(self, name) for name in self.attributes_names_}
            return lambda *inputs: record(self, inputs, attrs, lambda: run(*inputs))

        def _run(self, *inputs, **attrs):
            given = {name: getattr(self, name) for name in self.attributes_names_ if hasattr(self, name)}
            return record(self, inputs, {**given, **attrs}, lambda: super(Capturing, self)._run(*inputs, **attrs))

    Capturing.__name__ = Capturing.__qualname__ = cls.__name__
    Capturing.op_domain = cls.op_domain  # type: ignore[attr-defined]  # every class of reference.NEW_OPS has one
    return Capturing


def recorder() -> tuple[dict[int, NodeRun], Callable[..., Any]]:
    """Return an empty record of indexing nodes, and the ``record`` callback that fills it.

    ``record(op, inputs, attrs, run)`` (see :func:`capturing_ops`) runs the node and keeps its
    first call's inputs and attributes as a :class:`NodeRun` (its error too, where our kernel
    raises), keyed by the node; later calls count.
    """
    runs: dict[int, NodeRun] = {}

    def record(op, inputs, attrs, run):
        key = id(op.onnx_node)
        if key in runs:
            runs[key].calls += 1
            return run()
        while inputs and inputs[-1] is None:  # trailing optional inputs left out
            inputs = inputs[:-1]
        spec = op._spec
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in attrs.items() if v is not None}
        label = op.onnx_node.name or f"unnamed {op.onnx_node.op_type} #{sum(not r.name for r in runs.values()) + 1}"
        arrays = [a if isinstance(a, np.ndarray) else np.asarray(a) for a in inputs]
        opset = max(op._opset, spec.since_version)
        try:
            out = run()
        except GatherScatterError as exc:
            if not isinstance(exc, NodeError):
                runs[key] = NodeRun(
                    label, op.onnx_node.name, spec, opset, arrays, attrs, error=exc, model_opset=op._opset
                )
            raise
        runs[key] = NodeRun(label, op.onnx_node.name, spec, opset, arrays, attrs, model_opset=op._opset)
        return out

    return runs, record


def capturing_ops(record: Callable[..., Any]) -> tuple[type, ...]:
    """Return our operators (``reference.NEW_OPS``), each calling ``record`` (see :func:`recorder`)."""
    from ..reference import NEW_OPS

    return tuple(_capturing(cls, record) for cls in NEW_OPS)


def finish(
    runs: dict[int, NodeRun], outputs: list[Any] | None, failure: Exception | None, who: str = "our run of the model"
) -> tuple[list[NodeRun], list[Any] | None, GatherScatterError | None]:
    """Return what :func:`capture` returns, from a run's record, outputs and exception.

    ``failure`` not raised by one of our kernels on its inputs is a ModelUsageError saying
    that ``who`` failed.
    """
    ours = next((r.error for r in runs.values() if r.error is not None), None)
    if failure is not None and ours is None:
        said = str(failure) if isinstance(failure, GatherScatterError) else f"{type(failure).__name__}: {failure}"
        if isinstance(failure, InvalidAttributeError):  # the model's own fault, whatever its inputs (off-spec)
            raise ModelUsageError(one_line(said)) from None
        raise ModelUsageError(f"{who} failed: {one_line(said)}") from None
    return list(runs.values()), outputs, ours if failure is not None else None


def capture(
    model: onnx.ModelProto, feeds: Mapping[str, Any], *, strict: bool = False
) -> tuple[list[NodeRun], list[Any] | None, GatherScatterError | None]:
    """Run ``model`` with our kernels, recording each indexing node's first call.

    Parameters
    ----------
    model : onnx.ModelProto
        External data loaded; already checked.
    feeds : mapping of str to value
        As :func:`make_feeds` returns them.
    strict : bool, default False
        As for :func:`~gather_scatter.run_model`: True refuses an off-spec node (a
        ModelUsageError naming the version that accepts it), False runs it as that version
        (its NodeRun's ``model_opset`` is then below its ``spec.since_version``).

    Returns
    -------
    runs : list of NodeRun
        In the order the nodes first ran.
    outputs : list or None
        The graph's outputs, None where one of our kernels raised (``error``).
    error : GatherScatterError or None
        That error: the model's inputs are invalid for that node (its NodeRun holds it too).

    Raises
    ------
    ModelUsageError
        Any other error: an operator that is not ours failed, or the model cannot be loaded.
    """
    from ..reference import Evaluator

    runs, record = recorder()
    outputs = None
    failure = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # strict=False: an off-spec node runs as the version it needs
        try:
            outputs = Evaluator(model, new_ops=capturing_ops(record), strict=strict, check=False).run(None, dict(feeds))
        except Exception as exc:  # noqa: BLE001 - ours (an invalid input) or any other operator's
            failure = exc
    return finish(runs, outputs, failure)


def load(
    path: str, *, engine_ops: Callable[[onnx.ModelProto], Collection[tuple[str, str]]] | None = None
) -> onnx.ModelProto:
    """Load the model at ``path``, external data loaded, checked as ``gather-scatter run`` checks it.

    Parameters
    ----------
    path : str
        The ``.onnx`` file.
    engine_ops : callable, optional
        Given the model as read, before it is checked: the ``(domain, op_type)`` pairs that
        onnx's checker leaves to the engine that will run them (see :func:`gather_scatter.models.check_model`).

    Returns
    -------
    onnx.ModelProto

    Raises
    ------
    ModelUsageError
        It cannot be read, or it is not well-formed (one line naming what is wrong).
    """
    try:
        proto = load_model(path)
        left = engine_ops(proto) if engine_ops is not None else ()
        check_model(proto, path=path, engine_ops=left)
    except GatherScatterError as exc:
        raise ModelUsageError(one_line(exc)) from None
    return proto


def not_run(proto: onnx.ModelProto, runs: list[NodeRun]) -> list[str]:
    """Return the indexing nodes the model did not run on its inputs.

    An If branch not taken, or a node after ours raised.

    Parameters
    ----------
    proto : onnx.ModelProto
    runs : list of NodeRun
        As :func:`capture` returns them.

    Returns
    -------
    list of str
        The nodes' names (``an unnamed OP`` where a node has none).
    """
    ran = Counter(run.name for run in runs)
    missing = []
    for node in indexing_nodes(proto):
        if ran[node.name] > 0:
            ran[node.name] -= 1
        else:
            missing.append(node.name or f"an unnamed {node.op_type}")
    return missing
