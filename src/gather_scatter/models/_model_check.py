"""Model validation before anything runs: a model file read from anywhere is refused in one
line, as a :class:`~gather_scatter.errors.ModelInputError`, before it reaches onnx.reference,
onnx's shape inference or our kernels.

:func:`check_model` is shared by ``run_model``, ``Evaluator``, ``infer_model_shapes`` and the
``run`` and ``shapes`` commands (``check=False`` / ``--no-check`` skip it). It checks, in order:

1. every string field (names, ``op_type``, domains, inputs, outputs; subgraphs and functions
   included) is valid UTF-8: Python's protobuf hands back ``bytes`` for one that is not, which
   onnx's C++ bindings refuse with a TypeError or UnicodeDecodeError;
2. every opset import has a version >= 1, and the default domain's is one onnx knows; no
   node is one whose shape inference aborts the process (a Split whose ``num_outputs``
   is not its output count);
3. a tensor's ``data_type`` is one onnx defines, and its ``raw_data`` holds exactly the
   bytes its dims and type take;
4. every tensor stored as external data (:mod:`._external_data`) names a file inside the model's folder, that file
   exists (also where no weights are read, as by ``shapes``), and the tensor's offset and
   length lie within it and match its dims and type;
5. ``onnx.checker.check_model(model, full_check=False)``, the field's standard, for the rest:
   the graph is acyclic and in SSA form (each value produced once, every input defined),
   initializer sizes match their dims and types, node specs match their schemas.

The checker refuses some models this project accepts on purpose. They are checked as a copy
with those liberties removed, made only when the checker refuses the model as it is: the
default domain imported as ``'ai.onnx'`` (read as ``''``), tensors without a shape in
``value_info``, tensors whose external data was not loaded (checked by step 3), and the nodes
of the family (Gather, GatherND, ScatterND, ...; com.microsoft GatherND), which our own rules
check when they are loaded (an off-spec attribute with ``strict=False``, an input count as an
ArityError) and the checker sees as nodes of a domain it does not know; with ``engine_ops``,
the operators the engine that runs the model registers where onnx has none (onnxruntime's
SimplifiedLayerNormalization in the default domain, for the hosted Session), which that engine
judges. A model too large to
serialize (over 2 GiB, its weights loaded) is checked by its path when one is given.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterator
from typing import Any

import onnx

from ..errors import ModelInputError, node_label, one_line
from ..rules.versions import FAMILY, normalize_domain
from ._external_data import all_tensors, check_external, nbytes
from ._graph import Body, all_nodes, walk

__all__ = ["check_model", "load_model"]

# The domain the checker's copy gives the family's nodes: one it has no schema for.
_UNCHECKED_DOMAIN = "gather_scatter.unchecked"
_PROTO_LIMIT = 2**31 - 1  # protobuf cannot serialize a message this large
_CONTEXT = re.compile(r"==> Context: Bad node spec for node\. Name: ?(\S*) OpType: ?(\S+)")
_OF_NODE = re.compile(r"of node: name: ?(\S*) OpType: ?(\S+)")
_SSA = re.compile(r"however '(.*)' has been used as output names multiple times")
_NO_OP = re.compile(r"No Op registered for (\S+) with domain_version")
# onnxruntime's contrib operators in the default domain (onnxruntime 1.32's schema registry, the
# TensorRT plugins left out): named in the checker's refusal, which onnxruntime would accept.
_ORT_DEFAULT_DOMAIN_OPS = frozenset(
    {
        "Affine",
        "Crop",
        "DynamicSlice",
        "GRUUnit",
        "GivenTensorFill",
        "ImageScaler",
        "MemcpyFromHost",
        "MemcpyToHost",
        "ParametricSoftplus",
        "Scale",
        "ScaledTanh",
        "SimplifiedLayerNormalization",
    }
)


def load_model(path: str | os.PathLike, *, external_data: bool = True) -> onnx.ModelProto:
    """``onnx.load(path)``, with a file that cannot be read or parsed, or external data that
    cannot be loaded, refused as a ModelInputError (``cannot read model '<path>': ...``)."""
    path = os.fspath(path)
    try:
        return onnx.load(path, load_external_data=external_data)
    except Exception as exc:  # noqa: BLE001 - missing file, not a protobuf, bad external data
        raise ModelInputError(f"cannot read model {path!r}: {one_line(exc, with_type=True)}", value=path) from None


def check_model(
    model: onnx.ModelProto,
    *,
    path: str | os.PathLike | None = None,
    engine_ops: Collection[tuple[str, str]] = (),
) -> None:
    """Refuse a model that is not well-formed, before anything runs it.

    Parameters
    ----------
    model : onnx.ModelProto
        The model, its external data loaded or not. Not modified.
    path : str or path-like, optional
        The file it was read from: external data not loaded is checked against the files
        beside it, and a model over 2 GiB is checked by reading this file again.
    engine_ops : collection of (domain, op_type), optional
        Operators the engine that will run the model registers where onnx has no schema
        (onnxruntime's SimplifiedLayerNormalization in the default domain, written by every
        onnxruntime-genai export): onnx's checker leaves them to that engine.

    Raises
    ------
    ModelInputError
        The first fault found, in one line naming the node, tensor or field and what is
        wrong; ``node`` is set to the node's name where the fault is a node's.

    Examples
    --------
    >>> import onnx.helper as oh
    >>> a = oh.make_node("Gather", ["x", "b"], ["a"], name="first")
    >>> b = oh.make_node("Gather", ["x", "a"], ["b"], name="second")
    >>> graph = oh.make_graph([a, b], "cycle", [oh.make_tensor_value_info("x", 1, [4])], [])
    >>> check_model(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]))
    Traceback (most recent call last):
    ...
    gather_scatter.errors.ModelInputError: invalid model: Nodes in a graph must be topologically sorted, however input 'b' of node: name: first OpType: Gather is not output of any previous nodes.
    """  # noqa: E501 - exact doctest output, cannot be wrapped
    _check_strings(model, "model")
    _check_opsets(model.opset_import, "model")
    _check_aborts(model)
    for function in model.functions:
        _check_opsets(function.opset_import, f"function {function.name!r}")
    base_dir = os.path.dirname(os.path.abspath(os.fspath(path))) if path is not None else None
    for tensor in all_tensors(model):
        _check_data_type(tensor)
        if onnx.external_data_helper.uses_external_data(tensor):
            check_external(tensor, base_dir)
        else:
            _check_raw_size(tensor)
    _run_checker(model, path, frozenset((normalize_domain(d), op) for d, op in engine_ops))


def _check_strings(model: onnx.ModelProto, where: str) -> None:
    """ModelInputError for the first string field holding bytes (not valid UTF-8)."""
    _fields(model, where, ("producer_name", "producer_version", "domain", "doc_string"))
    for i, entry in enumerate(model.metadata_props):
        _fields(entry, f"metadata_props[{i}]", ("key", "value"))
    for i, o in enumerate(model.opset_import):
        _fields(o, f"opset_import[{i}]", ("domain",))
    functions = iter(range(len(model.functions)))
    for body, index, node in walk(model):
        if node is not None:
            _node_strings(node, body, index)
        elif isinstance(body.proto, onnx.GraphProto):
            _graph_strings(body.proto, body.where)
        else:
            f, at = body.proto, body.where
            _fields(f, f"functions[{next(functions)}]", ("name",))
            _fields(f, at, ("domain", "overload", "input", "output", "attribute", "doc_string"))
            for j, o in enumerate(f.opset_import):
                _fields(o, f"{at}.opset_import[{j}]", ("domain",))


def _fields(message: Any, where: str, names: tuple[str, ...], node: str | None = None) -> None:
    for name in names:
        value = getattr(message, name)
        items = [value] if isinstance(value, (str, bytes)) else value
        for i, item in enumerate(items):
            if not isinstance(item, str):
                index = "" if isinstance(value, (str, bytes)) else f"[{i}]"
                raise ModelInputError(
                    f"{where}: {name}{index} is not valid UTF-8 ({bytes(item)[:60]!r})",
                    input=name,
                    value=bytes(item)[:60],
                    node=node,
                )


def _graph_strings(graph: onnx.GraphProto, where: str) -> None:
    """A graph's own strings; its nodes are the walk's next steps."""
    _fields(graph, where, ("name", "doc_string"))
    for kind in ("input", "output", "value_info"):
        for i, value in enumerate(getattr(graph, kind)):
            _fields(value, f"{where}.{kind}[{i}]", ("name", "doc_string"))
    for i, tensor in enumerate(graph.initializer):
        _tensor_strings(tensor, f"{where}.initializer[{i}]")
    for i, sparse in enumerate(graph.sparse_initializer):
        _tensor_strings(sparse.values, f"{where}.sparse_initializer[{i}].values")
        _tensor_strings(sparse.indices, f"{where}.sparse_initializer[{i}].indices")


def _tensor_strings(tensor: onnx.TensorProto, where: str) -> None:
    _fields(tensor, where, ("name", "doc_string"))
    for i, entry in enumerate(tensor.external_data):
        _fields(entry, f"{where}.external_data[{i}]", ("key", "value"))


def _node_strings(node: onnx.NodeProto, body: Body, index: int) -> None:
    """A node's strings and its attributes'; its subgraphs are the walk's next steps."""
    _fields(node, f"{body.where}.node[{index}]", ("name",))
    at = body.node_where(index, node)
    _fields(node, at, ("op_type", "domain", "overload", "input", "output", "doc_string"), node.name)
    for attr in node.attribute:
        _fields(attr, f"{at}.attribute", ("name", "ref_attr_name", "doc_string"), node.name)
        aat = f"{at}.attribute {attr.name!r}"
        if attr.HasField("t"):
            _tensor_strings(attr.t, f"{aat}.t")
        for j, tensor in enumerate(attr.tensors):
            _tensor_strings(tensor, f"{aat}.tensors[{j}]")


def _check_opsets(imports: Any, where: str) -> None:
    latest = onnx.defs.onnx_opset_version()
    for o in imports:
        domain = o.domain or "ai.onnx"
        if o.version < 1 or (normalize_domain(o.domain) == "" and o.version > latest):
            known = f"1 to {latest}" if normalize_domain(o.domain) == "" else ">= 1"
            raise ModelInputError(
                f"{where} imports opset {o.version} of domain {domain!r}, which is not a known opset "
                f"(onnx {onnx.__version__} knows {known})",
                value=o.version,
            )


def _check_data_type(tensor: onnx.TensorProto) -> None:
    """A tensor's ``data_type`` one that onnx maps to a NumPy dtype (the checker lets 99
    through, and onnx.reference then fails with a KeyError)."""
    try:
        onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
    except KeyError:
        raise ModelInputError(
            f"tensor {tensor.name!r} has data_type {tensor.data_type}, which is not an ONNX tensor type",
            input=tensor.name,
            value=tensor.data_type,
        ) from None


def _check_raw_size(tensor: onnx.TensorProto) -> None:
    """A tensor's ``raw_data`` as long as its dims and type say (the checker refuses one too
    short, not one too long, which numpy then fails to reshape)."""
    if not tensor.raw_data:
        return
    expected = nbytes(tensor)
    if expected is not None and len(tensor.raw_data) != expected:
        raise ModelInputError(
            f"tensor {tensor.name!r} has raw_data of {len(tensor.raw_data)} bytes, but its dims "
            f"{tuple(tensor.dims)} and type take {expected} bytes",
            input=tensor.name,
            value=len(tensor.raw_data),
        )


def _check_aborts(model: onnx.ModelProto) -> None:
    """ModelInputError for a node that onnx's shape inference (run by our inference, the memory
    limit and onnx.reference) answers with an assertion that aborts the process: a Split with
    fewer ``num_outputs`` than outputs (onnx 1.23, found by tests/test_model_fuzz.py); the spec
    wants them equal."""
    for node in all_nodes(model):
        if normalize_domain(node.domain) != "" or node.op_type != "Split":
            continue
        for attr in node.attribute:
            if attr.name == "num_outputs" and attr.i != len(node.output):
                raise ModelInputError(
                    f"{node_label(node.name)} (Split): num_outputs = {attr.i}, but the node has "
                    f"{len(node.output)} outputs",
                    node=node.name,
                    value=attr.i,
                )


def family_nodes(model: onnx.ModelProto) -> Iterator[tuple[onnx.NodeProto, str, int]]:
    """Each node of the family, ``(node, domain, opset)``, in the main graph, subgraphs and functions.

    ``domain`` is normalized (``""`` for ai.onnx); subgraph nodes take the opsets of the graph
    or function that holds them, a function's nodes the function's (:class:`._graph.Body`). A
    node whose domain the opsets do not import is left out (onnx's checker and loading refuse
    it). In :func:`._graph.walk`'s order.
    """
    for body, _, node in walk(model):
        if node is not None:
            domain = normalize_domain(node.domain)
            if (domain, node.op_type) in FAMILY and domain in body.opsets:
                yield node, domain, body.opsets[domain]


def off_spec_nodes(model: onnx.ModelProto) -> Iterator[tuple[onnx.NodeProto, int, Exception]]:
    """Each off-spec node of the family: ``(node, opset, error)``, in the main graph, subgraphs and functions.

    Off-spec: an attribute or attribute value that the version in effect at the node's opset
    lacks and a later version of its operator has (PyTorch's ScatterElements ``reduction='max'``
    at opset 17), what ``strict=False`` runs as that later version. ``error`` is the
    InvalidAttributeError ``strict=True`` refuses it with (naming the fix), without the node's
    name (``error.in_node`` adds it). Subgraph nodes take the model's opsets, a function's nodes
    the function's. Nodes that are invalid in every version are not listed: loading them says why.
    """
    from .._nodes import attribute_dict, node_attributes
    from ..errors import GatherScatterError
    from ..rules.versions import Mode, Reduction, first_accepting, resolve

    for node, domain, opset in family_nodes(model):
        try:
            spec = resolve(node.op_type, opset, domain)
            given = attribute_dict(node.attribute)
        except GatherScatterError:
            continue
        if spec.refuses(given) is None or first_accepting(spec, given) is None:
            continue
        try:  # the version's own refusal, as loading or running the node gives it
            node_attributes(spec, given)
            for name, parse in (("reduction", Reduction.parse), ("mode", Mode.parse)):
                if name in given:
                    parse(spec, given[name])
        except GatherScatterError as exc:
            yield node, opset, exc


def check_family_nodes(model: onnx.ModelProto, *, strict: bool = True) -> None:
    """Load every node of the family as our evaluator loads it, without running anything.

    For the onnxruntime engine, which otherwise meets a family node's attributes only in
    onnxruntime, which runs some that the spec refuses (``reduction='sum'`` on ScatterND-18 and
    ScatterElements-18): the version in effect at the node's opset (the later one an off-spec
    node runs as with ``strict=False``), its attributes, their values (``reduction``, ``mode``)
    and the count of its inputs, in the main graph, subgraphs and functions.

    Raises
    ------
    GatherScatterError
        The first node refused (UnsupportedOpError, InvalidAttributeError, ArityError), with
        ``node`` set to its name.
    """
    import warnings

    from .._nodes import check_node_arity, resolve_node
    from ..errors import GatherScatterError
    from ..rules.versions import Mode, Reduction

    for node, domain, opset in family_nodes(model):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # an off-spec node warns once, where the Session builds
                spec, values = resolve_node(node.op_type, node.attribute, opset=opset, domain=domain, strict=strict)
            for name, parse in (("reduction", Reduction.parse), ("mode", Mode.parse)):
                if name in values:
                    parse(spec, values[name])
            check_node_arity(spec, node.input)
        except GatherScatterError as exc:
            raise exc.in_node(node.name, node.op_type) from None


def _run_checker(
    model: onnx.ModelProto, path: str | os.PathLike | None, engine_ops: frozenset[tuple[str, str]] = frozenset()
) -> None:
    """onnx's checker on the model as it is; where it refuses it, its verdict on the copy
    without the liberties this project accepts on purpose (see the module's docstring)."""
    big = model.ByteSize() > _PROTO_LIMIT
    if big:
        if path is None:
            return  # cannot be serialized for the checker; steps 1-3 have run
        model = onnx.load(os.fspath(path), load_external_data=False)
        for tensor in all_tensors(model):  # the file checked above may differ from the proto
            if onnx.external_data_helper.uses_external_data(tensor):
                check_external(tensor, os.path.dirname(os.path.abspath(os.fspath(path))))
    try:
        onnx.checker.check_model(model, full_check=False)
        return
    except Exception:  # noqa: BLE001 - judged on the copy below
        pass
    try:
        onnx.checker.check_model(_checker_copy(model, engine_ops), full_check=False)
    except (onnx.checker.ValidationError, ValueError, TypeError, RuntimeError) as exc:
        text = one_line(str(exc).split("==> Context:")[0])
        unknown = _NO_OP.search(text)
        if unknown and unknown.group(1) in _ORT_DEFAULT_DOMAIN_OPS:
            text += (
                f" ({unknown.group(1)} is an onnxruntime contrib operator registered in the default domain, "
                "as onnxruntime-genai exports write it: engine='onnxruntime' runs this model)"
            )
        context = _CONTEXT.search(one_line(exc)) or _OF_NODE.search(text)
        node = context.group(1) if context else None
        twice = _SSA.search(text)
        if twice and not context:  # name the node that writes the value a second time
            writers = [n for n in model.graph.node if twice.group(1) in n.output]
            if len(writers) > 1:
                node = writers[-1].name
                label = f"node {node!r}" if node else "unnamed node"
                text = f"{label} ({writers[-1].op_type}): {text}"
        if context and context.re is _CONTEXT:
            label = f"node {node!r}" if node else "unnamed node"
            text = f"{label} ({context.group(2)}): {text}"
        raise ModelInputError(f"invalid model: {text}", node=node) from None


def _checker_copy(model: onnx.ModelProto, engine_ops: frozenset[tuple[str, str]] = frozenset()) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    _as_checked(copy.opset_import)
    unchecked = FAMILY | engine_ops
    for body, _, node in walk(copy):
        if node is not None:
            _node_copy(node, unchecked)
        elif isinstance(body.proto, onnx.GraphProto):
            _graph_copy(body.proto)
        else:
            _as_checked(body.proto.opset_import)
    return copy


def _as_checked(imports: Any) -> None:
    seen = set()
    for o in list(imports):
        o.domain = normalize_domain(o.domain)
        if o.domain in seen:
            imports.remove(o)
        seen.add(o.domain)
    imports.add(domain=_UNCHECKED_DOMAIN, version=1)


def _graph_copy(graph: onnx.GraphProto) -> None:
    for value in [*graph.input, *graph.output, *graph.value_info]:
        _give_shape(value.type)
    for tensor in list(graph.initializer):  # external data: checked by _check_external
        if onnx.external_data_helper.uses_external_data(tensor):
            graph.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims))
            graph.initializer.remove(tensor)


def _give_shape(t: onnx.TypeProto) -> None:
    kind = t.WhichOneof("value")
    if kind == "tensor_type" and not t.tensor_type.HasField("shape"):
        t.tensor_type.shape.SetInParent()
    elif kind == "sequence_type":
        _give_shape(t.sequence_type.elem_type)
    elif kind == "optional_type":
        _give_shape(t.optional_type.elem_type)


def _node_copy(node: onnx.NodeProto, unchecked: frozenset[tuple[str, str]]) -> None:
    node.domain = normalize_domain(node.domain)
    if (node.domain, node.op_type) in unchecked:
        node.domain = _UNCHECKED_DOMAIN
    for attr in node.attribute:
        if attr.HasField("t") and onnx.external_data_helper.uses_external_data(attr.t):
            del attr.t.external_data[:]
            attr.t.data_location = onnx.TensorProto.DEFAULT
            attr.t.raw_data = bytes(nbytes(attr.t) or 0)
