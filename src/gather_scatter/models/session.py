"""A model built once and run many times: :class:`Session`, and :func:`run_model`, its one-shot form.

A Session does at build what depends only on the model, as onnxruntime's
``InferenceSession`` does: reading and validating it (``_model_check``), loading every node
(our operators resolve their version and attributes), sizing the values onnx's inference
fixes for the memory limit (``_model_memory``), and preparing the checks of the feeds
(``_feeds.FeedPlan``). A run checks the feeds' values and evaluates the graph with the one
:class:`~gather_scatter.reference.Evaluator` it holds.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import onnx

from ..errors import GatherScatterError, ModelInputError
from . import _external_data, _model_check
from ._feeds import FeedPlan, check_inputs, type_str
from ._graph import node_name
from .hosted import Hosted, onnxruntime_only_ops
from .plan import Plan, PlanEntry
from .reference import Evaluator

__all__ = ["NodeArg", "Session", "run_model"]


@dataclass(frozen=True)
class NodeArg:
    """A graph input or output, as onnxruntime's ``NodeArg`` describes it.

    Attributes
    ----------
    name : str
    type : str
        The ONNX type as the operator docs write it: ``'tensor(float)'``,
        ``'seq(tensor(int64))'``, ``'optional(tensor(float))'``.
    shape : list of (int, str or None), or None
        A tensor's dims: an int where fixed, the symbol (``'batch'``) where named, None where
        neither; None for an unknown rank or a value that is not a tensor (where
        onnxruntime gives ``[]``, which also describes a rank-0 tensor).
    """

    name: str
    type: str
    shape: list[int | str | None] | None


def _node_arg(value: onnx.ValueInfoProto) -> NodeArg:
    t = value.type
    shape = None
    kind = t.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type") and getattr(t, kind).HasField("shape"):
        shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in getattr(t, kind).shape.dim]
    return NodeArg(value.name, type_str(t), shape)


def _load(
    model: Any, check: bool, external_data: bool = True, engine_ops: frozenset[tuple[str, str]] = frozenset()
) -> onnx.ModelProto:
    """Read the model as a ModelProto, validated with ``check``.

    ``engine_ops``: operators the engine registers where onnx has none (see
    :func:`~gather_scatter.models.hosted._engine.onnxruntime_only_ops`), which onnx's checker leaves to it.

    ``external_data=False`` leaves a file's external data where it is (onnxruntime reads it),
    and accepts a model whose external data is not loaded only where it was read from a path.
    Bytes may be ``bytes``, ``bytearray`` or ``memoryview``; anything else that is not a path or
    a ModelProto (None, a file object) is a ModelInputError.
    """
    path = None
    from_bytes = isinstance(model, (bytes, bytearray, memoryview))
    if from_bytes:
        try:
            model = onnx.load_model_from_string(bytes(model))
        except Exception as exc:
            if not check:
                raise
            raise ModelInputError(f"cannot read model from bytes: {type(exc).__name__}: {exc}") from None
    elif not isinstance(model, (str, os.PathLike, onnx.ModelProto)):
        raise ModelInputError(
            f"model must be a path (str or path-like), bytes (bytearray, memoryview) or an onnx.ModelProto, "
            f"not {type(model).__name__}",
            value=type(model).__name__,
        )
    elif not isinstance(model, onnx.ModelProto):
        # External data: read relative to the file, not the cwd.
        path = model
        if check:
            model = _model_check.load_model(model, external_data=external_data)
        else:
            model = onnx.load(os.fspath(model), load_external_data=external_data)
    if external_data or path is None:
        _external_data.external_data_loaded(model, from_bytes=from_bytes)
    if check:
        _model_check.check_model(model, path=path, engine_ops=engine_ops)
    return model


def _hosted(proto: onnx.ModelProto, path: Any, threads: int | None, route: str, strict: bool, off_spec: list) -> Hosted:
    """Build the onnxruntime engine, with one OffSpecWarning per off-spec node (``strict=False``).

    A node routed to our kernels warns as it loads; one onnxruntime runs itself (it runs
    ScatterElements ``reduction='max'`` at opset 17 as ScatterElements-18 does) warns here.
    """
    from .._nodes import OffSpecWarning, _warn_off_spec, attribute_dict
    from ..rules.versions import first_accepting, normalize_domain, resolve

    # Our evaluator refuses an invalid family node as it loads it; onnxruntime runs some
    # (reduction='sum'): every family node is loaded here first, as ours would be.
    _model_check.check_family_nodes(proto, strict=strict)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", OffSpecWarning)
        hosted = Hosted(proto, path=path, threads=threads, route=route, strict=strict)
    warned = set()
    for w in caught:
        if isinstance(w.message, OffSpecWarning):
            warned.add((w.message.node, w.message.op))
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    for node, opset, _ in off_spec:
        if (node.name, node.op_type) not in warned:
            spec = resolve(node.op_type, opset, normalize_domain(node.domain))
            given = attribute_dict(node.attribute)
            later = first_accepting(spec, given)
            if later is not None:
                _warn_off_spec(spec, later, given, opset, node.name)
    return hosted


def _check_engine_options(engine: str, threads: int | None, route: str) -> None:
    """Refuse an unknown engine or route, and the onnxruntime engine's options given to ours."""
    if engine not in ("reference", "onnxruntime"):
        raise ValueError(f"engine must be 'reference' or 'onnxruntime', not {engine!r}")
    if route not in ("needed", "all"):
        raise ValueError(f"route must be 'needed' or 'all', not {route!r}")
    if engine == "reference" and threads is not None:  # not ignored: the caller meant onnxruntime's threads
        raise ValueError(
            f"threads={threads!r} is an option of engine='onnxruntime' (its intra-op thread count), not of "
            "engine='reference'; pass engine='onnxruntime', or set our kernels' threads with "
            "gather_scatter.set_num_threads"
        )
    if engine == "reference" and route != "needed":
        raise ValueError(
            f"route={route!r} is an option of engine='onnxruntime' (which nodes of the family our kernels run), "
            "not of engine='reference', which runs every one on our kernels; pass engine='onnxruntime'"
        )


class Session:
    """An ONNX model built once, to run many times, as :func:`run_model` evaluates it.

    Two engines. ``"reference"`` (the default): our kernels run every operator of the family
    (in the main graph, subgraphs and model-local functions), onnx.reference the others:
    exact, and slow outside the family (pure Python). ``"onnxruntime"``: onnxruntime runs the
    model, and our kernels run only the nodes it gets wrong or cannot run (the *routed* nodes:
    see :attr:`plan`, and the table in ``docs/models.md``): scatter reductions of ScatterND on
    more than one thread, float16 and bfloat16 scatter reductions, float max/min scatter
    reductions (onnxruntime drops a NaN), bool and string max/min, gathers of strings, GatherND
    with ``batch_dims`` (onnxruntime accepts batch dims that differ), a node onnxruntime refuses
    to load, and an If/Loop/Scan or function call whose body holds one (it runs in our
    evaluator). Every family node is loaded at build as our evaluator loads it, so an invalid
    attribute that onnxruntime would run (``reduction='sum'``) is refused there. The rest
    runs in onnxruntime segments, each an ``InferenceSession`` built once; where nothing is
    routed, onnxruntime runs the original model unchanged (its outputs bitwise onnxruntime's).

    Parameters
    ----------
    model : str, path-like, bytes, bytearray, memoryview or onnx.ModelProto
        The model, the path of an ``.onnx`` file (external data is read beside it), or its
        serialized bytes (which cannot hold external data: give the path of a model that has
        some). With ``engine="onnxruntime"`` a path is best: onnxruntime reads the
        external data from its folder, and no copy of the weights is kept here.
    engine : {'reference', 'onnxruntime'}, default 'reference'
        Who runs the operators outside the family (see above).
    threads : int, optional
        Only with ``engine="onnxruntime"`` (``engine="reference"`` raises ValueError for any
        value but None): onnxruntime's intra-op thread count (default: the cores this process
        may use). The routing depends on it: at 1, ScatterND's add and mul stay in
        onnxruntime, which runs them right on one thread.
    route : {'needed', 'all'}, default 'needed'
        Only with ``engine="onnxruntime"`` (``engine="reference"`` raises ValueError for
        ``'all'``): ``'needed'`` routes the nodes above; ``'all'`` every node of the family too.
    strict : bool, default True
        As for :func:`run_model`: True refuses an off-spec node at build, whichever engine
        would run it (onnxruntime itself runs ScatterElements ``reduction='max'`` at opset 17
        without a word); False runs it as the earliest version that accepts it, with an
        :class:`~gather_scatter.OffSpecWarning` at build, once per off-spec node.
    check : bool, default True
        As for :func:`run_model`: validate the model, once, at build.

    Raises
    ------
    ModelInputError
        At build: a model that is not a path, bytes or ModelProto (None); a model that cannot
        be read or is not well-formed (with ``check``), or a tensor stored as external data
        that was not loaded (or that bytes cannot carry).
    GatherScatterError, NodeError
        At build, from loading a node (an attribute or opset its version lacks), as for
        :func:`run_model`. With ``engine="onnxruntime"``, where onnxruntime raises inside a
        segment the run is made again with the segment's family nodes on our kernels: our
        error for an invalid input (onnxruntime's NodeError its ``__cause__``), or the result
        where onnxruntime refused a valid one (the node then stays routed); a node outside
        the family raises onnxruntime's error as a NodeError naming the node it names.
    ModuleNotFoundError
        ``engine="onnxruntime"`` without onnxruntime installed (the message names the pip extra).
    ValueError
        An unknown ``engine`` or ``route``, ``threads`` not a positive int, or ``threads`` or
        ``route='all'`` with ``engine="reference"`` (options of the onnxruntime engine only).

    Examples
    --------
    >>> import numpy as np, onnx.helper as oh
    >>> node = oh.make_node("Gather", ["table", "ids"], ["rows"], name="embed")
    >>> f = oh.make_tensor_value_info
    >>> graph = oh.make_graph([node], "g", [f("table", 1, [4, 2]), f("ids", 7, ["n"])], [f("rows", 1, ["n", 2])])
    >>> session = Session(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]))
    >>> [(i.name, i.type, i.shape) for i in session.get_inputs()]
    [('table', 'tensor(float)', [4, 2]), ('ids', 'tensor(int64)', ['n'])]
    >>> table = np.arange(8, dtype=np.float32).reshape(4, 2)
    >>> session.run(None, {"table": table, "ids": np.array([3, 0])})
    [array([[6., 7.],
           [0., 1.]], dtype=float32)]
    >>> session.run(["nope"], {"table": table, "ids": np.array([0])})
    Traceback (most recent call last):
    ...
    gather_scatter.errors.ModelInputError: the model has no output 'nope' (outputs: rows)
    """

    def __init__(
        self,
        model: str | os.PathLike | bytes | bytearray | memoryview | onnx.ModelProto,
        *,
        engine: Literal["reference", "onnxruntime"] = "reference",
        threads: int | None = None,
        route: Literal["needed", "all"] = "needed",
        strict: bool = True,
        check: bool = True,
    ) -> None:
        _check_engine_options(engine, threads, route)
        hosted = engine == "onnxruntime"
        path = model if isinstance(model, (str, os.PathLike)) else None
        proto = _load(
            model, check, external_data=not hosted, engine_ops=onnxruntime_only_ops() if hosted else frozenset()
        )
        self._feed_plan = FeedPlan(proto.graph)
        self._hosted: Hosted | None = None
        self._evaluator: Evaluator | None = None
        off_spec = list(_model_check.off_spec_nodes(proto))
        if strict and off_spec:  # at build, whichever engine would run the node
            node, _, error = off_spec[0]
            raise error.in_node(node.name, node.op_type) if isinstance(error, GatherScatterError) else error
        if hosted:
            self._hosted = _hosted(proto, path, threads, route, strict, off_spec)
        else:
            self._evaluator = Evaluator(proto, strict=strict, check=False)
            self._labels = tuple(node_name(node, i) for i, node in enumerate(proto.graph.node))
        initializers = {init.name for init in proto.graph.initializer}
        self._inputs = [_node_arg(i) for i in proto.graph.input if i.name not in initializers]
        self._outputs = [_node_arg(o) for o in proto.graph.output]
        self._output_names = [o.name for o in self._outputs]
        self._known_outputs = frozenset(self._output_names)

    @property
    def plan(self) -> Plan:
        """What runs where: each step's engine, its nodes, and why each routed node is routed.

        ``str(session.plan)`` is the text ``gather-scatter run --explain`` prints.
        """
        if self._hosted is not None:
            return self._hosted.plan()
        return Plan("reference", (PlanEntry("reference", self._labels),))

    def get_inputs(self) -> list[NodeArg]:
        """Return the graph inputs to feed.

        Those an initializer backs may be fed too, and are not listed.

        Returns
        -------
        list of NodeArg
            One per input, in the graph's order: its name, type and shape.
        """
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        """Return the graph outputs, in the graph's order.

        Returns
        -------
        list of NodeArg
            One per output: its name, type and shape.
        """
        return list(self._outputs)

    def run(self, output_names: Sequence[str] | None, feeds: Mapping[str, Any]) -> list[Any]:
        """Evaluate the model on ``feeds``.

        Parameters
        ----------
        output_names : sequence of str, or None
            The graph outputs to return, in this order; None for all, in the graph's order.
        feeds : mapping of str to value
            One value per graph input, by name, as :func:`run_model` takes them.

        Returns
        -------
        list
            One value per name of ``output_names``: an ndarray for a tensor, a list for a
            sequence, None for an empty optional.

        Raises
        ------
        ModelInputError
            A name of ``output_names`` that is not a graph output; ``feeds`` that is not a
            mapping (None, a list of pairs); a feed as :func:`run_model` describes.
        DTypeError, ShapeError, GatherScatterError, NodeError
            As for :func:`run_model`.
        """
        if output_names is None:
            names = self._output_names
        elif isinstance(output_names, (str, bytes)):
            raise ModelInputError(
                f"output_names must be a list of output names or None, not a {type(output_names).__name__}: "
                f"pass [{output_names!r}]",
                value=output_names,
            )
        else:
            names = list(output_names)
            for name in names:
                if name not in self._known_outputs:
                    raise ModelInputError(
                        f"the model has no output {name!r} (outputs: {', '.join(self._output_names) or 'none'})",
                        value=name,
                    )
        if self._hosted is not None:
            return self._hosted.run(names, self._feed_plan.check(feeds))
        assert self._evaluator is not None
        return self._evaluator.run(names, self._feed_plan.check(feeds))


def run_model(
    model: str | os.PathLike | onnx.ModelProto,
    inputs: Mapping[str, Any],
    *,
    engine: Literal["reference", "onnxruntime"] = "reference",
    threads: int | None = None,
    route: Literal["needed", "all"] = "needed",
    strict: bool = True,
    check: bool = True,
) -> dict[str, Any]:
    """Evaluate an ONNX model: our kernels for every operator of the family, onnx.reference for the others.

    The family: Gather, GatherND, ScatterND, GatherElements, ScatterElements, Scatter and
    TensorScatter, in the main graph, subgraphs and model-local functions.

    Parameters
    ----------
    model : str, path-like or onnx.ModelProto
        The model, or the path of an ``.onnx`` file (external data is read beside it).
    inputs : mapping of str to value
        One value per graph input, by name, as its declared type says: a tensor as an
        array_like with the declared element type (in any byte order; strings as object,
        ``'U'`` or ``'S'`` arrays), rank and fixed dims; a sequence as a list (or tuple) of
        its elements, each checked as its element type (tensors of different shapes too); an
        optional as None (no value) or a value of its element type; a map as a dict (key
        type checked, values passed as given). A sparse tensor is passed as given.
    strict : bool, default True
        False runs a node of the family that is off-spec in a way other engines tolerate (an
        attribute or attribute value its version lacks and a later version has, as PyTorch's
        exporter writes ScatterElements ``reduction='max'`` at opset 17) as the earliest
        version that accepts it, with one :class:`~gather_scatter.OffSpecWarning` per
        node; True (the default) refuses it with an InvalidAttributeError that names that
        version.
    engine : {'reference', 'onnxruntime'}, default 'reference'
        Who runs the operators outside the family: onnx.reference, or onnxruntime hosting
        the whole model, with our kernels for the nodes it gets wrong (see :class:`Session`).
    threads : int, optional
        With ``engine="onnxruntime"``: its intra-op thread count (default: the cores this
        process may use).
    route : {'needed', 'all'}, default 'needed'
        With ``engine="onnxruntime"``: which nodes of the family run on our kernels.
    check : bool, default True
        Validate the model before anything runs (the file parses; names are valid UTF-8;
        the graph is acyclic, in SSA form, every input defined; initializer sizes match
        their dims and types; external data lies inside the model's folder and its file;
        opset imports are known). False skips it, for a model you trust.

    Returns
    -------
    dict of str to value
        The graph's outputs by name, in the graph's order: an ndarray for a tensor, a list for
        a sequence, None for an empty optional.

    Raises
    ------
    ModelInputError
        ``inputs`` is not a mapping (None, a list of (name, value) pairs); a declared input
        is missing, or a name is not a declared input, or None given for an input that is
        not optional; ``model`` is not a path, bytes or ModelProto (None); a tensor stored as external data that was not loaded
        (``onnx.load(path, load_external_data=False)``); with ``check``, a model file that
        cannot be read, or a model that is not well-formed, in one line naming the node,
        tensor or field at fault.
    DTypeError, ShapeError
        An input's dtype, rank or a fixed dim differs from the declaration; or it is not the
        declared kind of value (a sequence that is not a list, a map that is not a dict); a
        masked array (``np.ma.MaskedArray``), whose mask the model could not honour (as
        the kernels refuse one).
    GatherScatterError
        Any of our errors raised by a node, with ``node`` set to its name and the message
        starting with ``node '<name>' (<op_type>):``; the class is kept, so
        ``except IndexError`` still catches an out-of-bounds index.
    NodeError
        Any other error raised by a node (or by loading it), that is by one of
        onnx.reference's operators: the message starts with ``node '<name>' (<op_type>,
        domain <domain>, opset <opset>):``, the original is its ``__cause__``.
    ValueError
        An unknown ``engine`` or ``route``, or ``threads`` or ``route='all'`` with
        ``engine="reference"`` (options of the onnxruntime engine only).
    OSError, onnx.onnx_cpp2py_export.checker.ValidationError, google.protobuf.message.DecodeError
        With ``check=False``, as raised by ``onnx.load`` for a missing or unreadable model file.

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
    """  # noqa: E501 - exact doctest output, cannot be wrapped
    if engine == "onnxruntime":
        session = Session(model, engine=engine, threads=threads, route=route, strict=strict, check=check)
        return dict(zip(session._output_names, session.run(None, inputs), strict=False))
    _check_engine_options(engine, threads, route)
    model = _load(model, check)
    # The feeds are checked before the nodes are loaded, as they always were here.
    feeds = check_inputs(model.graph, inputs)
    session = Session(model, engine=engine, strict=strict, check=False)
    return dict(zip(session._output_names, session.run(None, feeds), strict=False))
