"""Model-level shape inference: our rules for the family's nodes, onnx's inference for every other node.

The family: Gather, GatherND, ScatterND, GatherElements, ScatterElements, Scatter and
TensorScatter of ai.onnx, and com.microsoft GatherND and GatherBlockQuantized, which onnx does
not know.

>>> import onnx.helper as oh
>>> from onnx import TensorProto
>>> node = oh.make_node("GatherND", ["data", "indices"], ["y"], name="pick", domain="com.microsoft")
>>> graph = oh.make_graph(
...     [node, oh.make_node("Relu", ["y"], ["z"])], "g",
...     [oh.make_tensor_value_info("data", TensorProto.FLOAT, ["N", 3, 4]),
...      oh.make_tensor_value_info("indices", TensorProto.INT32, ["Q", 2])],
...     [oh.make_tensor_value_info("z", TensorProto.FLOAT, None)])
>>> model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18), oh.make_opsetid("com.microsoft", 1)])
>>> for line in node_shapes(infer_model_shapes(model)):
...     print(line)
node 'pick' (com.microsoft.GatherND-1): y ('Q', 4) float32
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
from onnx import helper

from .._nodes import _OPS, attribute_dict, infer_version, resolve_node
from ..errors import (
    ArityError,
    DTypeError,
    GatherScatterError,
    ModelInputError,
    ShapeError,
    UnsupportedOpError,
    node_label,
    one_line,
)
from ..rules.dims import Shape, fmt_shape
from ..rules.versions import FAMILY, first_accepting, normalize_domain, resolve
from . import _model_check
from ._graph import all_nodes, imported_opsets

__all__ = ["infer_model_shapes", "node_shapes"]


# The (domain, op_type) pairs our rules infer: the registry's (com.microsoft GatherND and
# GatherBlockQuantized included, which onnx does not know).


def _ours(node: onnx.NodeProto) -> bool:
    domain = normalize_domain(node.domain)
    return (domain, node.op_type) in FAMILY


def _known_types(graph: onnx.GraphProto) -> dict[str, onnx.TypeProto]:
    types = {}
    for init in graph.initializer:
        types[init.name] = helper.make_tensor_type_proto(init.data_type, list(init.dims))
    for vi in (*graph.input, *graph.value_info, *graph.output):
        if vi.type.HasField("tensor_type"):
            types[vi.name] = vi.type
    return types


def _shape(t: onnx.TypeProto | None) -> Shape:
    if t is None or not t.tensor_type.HasField("shape"):
        return None
    dims = t.tensor_type.shape.dim
    return tuple(d.dim_value if d.HasField("dim_value") else d.dim_param or None for d in dims)


def _dtype(t: onnx.TypeProto | None, name: str = "") -> Any:
    """Return the NumPy dtype of value ``name``'s tensor type; None where unknown."""
    elem = t.tensor_type.elem_type if t is not None else 0
    if not elem:
        return None
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem))
    except KeyError:  # a number TensorProto.DataType does not define
        raise DTypeError(
            f"{name!r} has elem_type {elem}, which is not an ONNX tensor type", input=name, value=elem
        ) from None


def _type_name(elem: int) -> str:
    return f"tensor({onnx.TensorProto.DataType.Name(elem).lower()})"


def _merge_elem(node: onnx.NodeProto, output: str, ours: int, declared: onnx.TypeProto | None) -> int:
    """Our element type (the data's; GatherBlockQuantized: the scales'), or the declared one where ours is unknown."""
    try:
        _dtype(declared, output)
    except DTypeError as exc:
        raise exc.in_node(node.name, node.op_type) from None
    theirs = declared.tensor_type.elem_type if declared is not None else 0
    if ours and theirs and ours != theirs:
        typed = ("scales", 2) if node.op_type == "GatherBlockQuantized" else ("data", 0)  # what types the output
        raise DTypeError(
            f"output {output!r} is declared with type {_type_name(theirs)}, but its {typed[0]} input "
            f"{node.input[typed[1]]!r} has type {_type_name(ours)}",
            op=node.op_type,
            input=output,
            value=theirs,
        ).in_node(node.name, node.op_type)
    return ours or theirs


def _merge(node: onnx.NodeProto, output: str, ours: Shape, declared: Shape) -> Shape:
    """Our shape, with dims we leave unknown taken from what the model already declares."""
    if declared is None:
        return ours
    if ours is None:
        return declared
    if len(ours) != len(declared) or any(
        isinstance(o, int) and isinstance(d, int) and o != d for o, d in zip(ours, declared, strict=False)
    ):
        raise ShapeError(
            f"output {output!r} is declared with shape {fmt_shape(declared)}, but the inputs give {fmt_shape(ours)}",
            op=node.op_type,
            input=output,
            value=declared,
        ).in_node(node.name, node.op_type)
    return tuple(d if o is None else o for o, d in zip(ours, declared, strict=False))


def _opset(node: onnx.NodeProto, opsets: dict[str, int]) -> int:
    domain = normalize_domain(node.domain)
    if domain not in opsets:
        raise UnsupportedOpError(
            f"the model imports no opset for domain {domain or 'ai.onnx'!r}", op=node.op_type, input="domain"
        )
    return opsets[domain]


def _infer_node(node: onnx.NodeProto, opsets: dict[str, int], types: dict[str, onnx.TypeProto], strict: bool):
    """(shape, elem_type) of the node's output, or the node's error naming it."""
    domain = normalize_domain(node.domain)
    names = list(node.input)
    while names and not names[-1]:  # an empty name leaves an optional input out: pass fewer shapes
        names.pop()
    inputs = [types.get(name) for name in names]
    try:
        spec, values = resolve_node(
            node.op_type, node.attribute, opset=_opset(node, opsets), domain=domain, strict=strict, node=node.name
        )
        declared = _OPS[spec.op_type].inputs
        position = names.index("") if "" in names else len(declared)
        if position < len(declared):  # only trailing inputs may be left out
            input = declared[position]
            raise spec.error(
                ArityError,
                f"input {position} ({input}) is required, but the node leaves it out (an empty input name)",
                input=input,
                position=(position,),
                value="",
            )
        shape, _ = infer_version(
            spec, values, [_shape(t) for t in inputs], [_dtype(t, name) for t, name in zip(inputs, names, strict=False)]
        )
    except GatherScatterError as exc:
        raise exc.in_node(node.name, node.op_type) from None
    typed = 2 if spec.op_type == "GatherBlockQuantized" else 0  # its output has scales' type (T2)
    typed_input = inputs[typed] if len(inputs) > typed else None
    elem = typed_input.tensor_type.elem_type if typed_input is not None else 0
    return shape, elem


def _onnx_node(node: onnx.NodeProto, model: onnx.ModelProto, types: dict[str, onnx.TypeProto]) -> dict:
    """Run ONNX's inference for one node that is not ours, from the types known so far.

    {} where onnx has no schema or cannot infer it alone (a function, a subgraph's outer names).
    """
    domain, opsets = normalize_domain(node.domain), imported_opsets(model)
    if domain not in opsets or not onnx.defs.has(node.op_type, domain):
        return {}
    try:
        schema = onnx.defs.get_schema(node.op_type, opsets[domain], domain)
        known = {name: types[name] for name in node.input if name in types}
        return onnx.shape_inference.infer_node_outputs(
            schema, node, known, opset_imports=list(model.opset_import), ir_version=model.ir_version
        )
    except Exception:  # noqa: BLE001 - keep what the whole-model pass found
        return {}


def _informative(t: onnx.TypeProto) -> int:
    """How much a tensor type says: elem type known, rank known, dims known."""
    if not t.HasField("tensor_type"):
        return 0
    tt = t.tensor_type
    dims = sum(d.HasField("dim_value") or bool(d.dim_param) for d in tt.shape.dim) if tt.HasField("shape") else -1
    return (tt.elem_type != 0) + (tt.HasField("shape")) + dims


def infer_model_shapes(
    model: onnx.ModelProto | str | os.PathLike, *, strict: bool = True, check: bool = True
) -> onnx.ModelProto:
    """Return a copy of ``model`` with the shape and type of every value filled in where known.

    Every node of the family (ai.onnx, and com.microsoft GatherND, which onnx's inference
    skips) gets our rule (:func:`~gather_scatter.infer_shape`) at the model's opset; all other
    nodes onnx's inference: once over the whole model, then node by node in one topological
    pass, so values downstream of a node onnx skips get shapes too. Linear in the node count.
    Only the main graph is walked, not subgraphs of If/Loop/Scan.

    Parameters
    ----------
    model : onnx.ModelProto, str or path-like
        The model or the path of an ``.onnx`` file (external data is not needed: only
        shapes are read). Not modified.
    strict : bool, default True
        As for :func:`~gather_scatter.run_model`: False infers an off-spec node of the
        family (an attribute or value its version lacks and a later version has) as the
        earliest version that accepts it, with one OffSpecWarning per node. True refuses an
        off-spec node anywhere in the model, subgraphs and functions included, as ``Session``
        does (their nodes are not inferred).
    check : bool, default True
        As for :func:`~gather_scatter.run_model`: validate the model first (external data
        not loaded is checked against the files beside a path); False skips it. Where
        onnxruntime is installed, the operators it registers in onnx's own domain where onnx
        has none (SimplifiedLayerNormalization, in every onnxruntime-genai export) are
        accepted, as ``Session(engine="onnxruntime")`` accepts them, and left to onnx's
        inference, which skips them.

    Returns
    -------
    onnx.ModelProto
        Our nodes' outputs in ``graph.value_info`` (or ``graph.output``): symbols kept,
        unknown dims left without value, a rank-unknown output without a shape.

    Raises
    ------
    ShapeError, InvalidAttributeError, ArityError, DTypeError, UnsupportedOpError, OutputTooLargeError
        As :func:`~gather_scatter.infer_shape` raises them, the message starting with the
        node: ``node 'pick' (GatherND): GatherND-13: ...``; also ShapeError for an output
        the model declares with a shape that contradicts the rule; ArityError for a required
        input the node leaves out (an empty name before the last input; trailing empty names
        leave optional inputs out, as TensorScatter's ``write_indices``); DTypeError for an output
        declared with another element type than its data input's, or an ``elem_type`` that
        ``onnx.TensorProto.DataType`` does not define.
    ModelInputError
        With ``check``, a model file that cannot be read, or a model that is not well-formed
        (see :func:`~gather_scatter.run_model`), or one with onnxruntime's default-domain
        operators where onnxruntime is not installed (naming the pip extra); onnx's
        whole-model pass refusing the model (its InferenceError, in one line naming the node,
        is the ``__context__``).
    OSError, google.protobuf.message.DecodeError
        With ``check=False``, as raised by ``onnx.load`` for a path that cannot be read.
    """
    path = None
    if not isinstance(model, onnx.ModelProto):
        path = model
        model = (
            _model_check.load_model(model, external_data=False)
            if check
            else onnx.load(os.fspath(model), load_external_data=False)
        )
    if check:
        check_for_inference(model, path)
    opsets = imported_opsets(model)
    for node in model.graph.node:  # onnx's own error for this would not name the node
        if _ours(node):
            try:
                _opset(node, opsets)
            except UnsupportedOpError as exc:
                raise exc.in_node(node.name, node.op_type) from None
    if strict:  # anywhere, as Session refuses it: subgraphs and functions are not inferred below
        for node, _, error in _model_check.off_spec_nodes(model):
            raise error.in_node(node.name, node.op_type) if isinstance(error, GatherScatterError) else error
    declared = _known_types(model.graph)
    try:
        out = onnx.shape_inference.infer_shapes(model)  # returns a new model
    except onnx.shape_inference.InferenceError as exc:
        raise _refused(model, exc) from None
    graph = out.graph
    types = _known_types(graph)
    changed: dict[str, onnx.TypeProto] = {}
    for node in graph.node:  # ONNX keeps nodes in topological order
        if _ours(node):
            if not node.output or not node.output[0]:
                continue
            name = node.output[0]
            shape, elem = _infer_node(node, opsets, types, strict)
            shape = _merge(node, name, shape, _shape(declared.get(name)))
            elem = _merge_elem(node, name, elem, declared.get(name))
            if shape is None and not elem:
                continue
            found = {name: helper.make_tensor_value_info(name, elem, list(shape) if shape is not None else None).type}
        else:
            found = _onnx_node(node, out, types)
        for name, t in found.items():
            if (
                name
                and (_ours(node) or _informative(t) > _informative(types.get(name, onnx.TypeProto())))
                and types.get(name) != t
            ):
                types[name] = changed[name] = t
    outputs = {o.name: o for o in graph.output}
    infos = {v.name: v for v in graph.value_info}
    for name, t in changed.items():
        target = outputs.get(name) or infos.get(name)
        if target is None:
            graph.value_info.append(helper.make_value_info(name, t))
        else:
            target.type.CopyFrom(t)
    return out


def check_for_inference(model: onnx.ModelProto, path: str | os.PathLike | None = None) -> None:
    """Refuse a model that is not well-formed, as :func:`infer_model_shapes` and ``shapes`` check it.

    As ``_model_check.check_model``, where onnxruntime is installed with the operators it
    registers in onnx's own domain where onnx has none (onnxruntime-genai's
    SimplifiedLayerNormalization) left to it, as the hosted Session's check leaves them: onnx's
    inference skips them, and our rules infer the family's nodes around them.

    Parameters
    ----------
    model : onnx.ModelProto
    path : str or path-like, optional
        The file it was read from (external data is checked beside it).

    Raises
    ------
    ModelInputError
        As ``_model_check.check_model``; without onnxruntime, a node of onnxruntime's
        default-domain operators, naming it and the pip extra that makes it accepted.
    """
    from .hosted import import_onnxruntime, onnxruntime_only_ops

    try:
        import_onnxruntime()  # importable now (onnxruntime_only_ops is cached)
        engine_ops = onnxruntime_only_ops()
    except ModuleNotFoundError:
        engine_ops = frozenset()
        for node in all_nodes(model):
            op = node.op_type
            ort_only = op in _model_check._ORT_DEFAULT_DOMAIN_OPS and not onnx.defs.has(op)
            if normalize_domain(node.domain) == "" and ort_only:
                raise ModelInputError(
                    f"{node_label(node.name)} ({op}): {op} is an onnxruntime contrib operator registered in onnx's "
                    "default domain (as onnxruntime-genai exports write it), which onnx does not know; shape "
                    "inference accepts it where onnxruntime is installed, leaving it to onnx's inference (which "
                    'skips it): pip install "gather_scatter[onnxruntime]"',
                    node=node.name,
                ) from None
    _model_check.check_model(model, path=path, engine_ops=engine_ops)


_INFERENCE_NODE = re.compile(r"for node name ([^ .]*)")


def _refused(model: onnx.ModelProto, exc: Exception) -> ModelInputError:
    """ONNX's whole-model inference refusing the model, as one line naming the node."""
    text = one_line(exc)
    error = ModelInputError(f"onnx's shape inference refuses the model: {text}")
    found = _INFERENCE_NODE.search(text)
    nodes = [n for n in model.graph.node if found and found.group(1) and n.name == found.group(1)]
    return error.in_node(nodes[0].name, nodes[0].op_type) if nodes else error


def node_shapes(model: onnx.ModelProto, *, strict: bool = True) -> Iterator[str]:
    """Describe each family node of an inferred model in one line: node, version, output name, shape and dtype.

    The family nodes are those that get our rule in :func:`infer_model_shapes`.

    Parameters
    ----------
    model : onnx.ModelProto
        A model as :func:`infer_model_shapes` returns it.
    strict : bool, default True
        As given to :func:`infer_model_shapes`: False names an off-spec node by the version it
        was inferred as (the earliest that accepts its attributes), not the one its opset gives.

    Yields
    ------
    str
        ``node 'pick' (com.microsoft.GatherND-1): y ('Q', 4) float32``: symbols quoted,
        ``?`` for an unknown dim or dtype, ``(unknown rank)`` for an unknown rank;
        ``node 'n' (Gather-13): no output`` for a node without one.

    Raises
    ------
    UnsupportedOpError
        A node whose domain the model imports no opset for, or whose operator version the
        opset does not resolve to; the message starts with the node, as in
        :func:`infer_model_shapes`.
    DTypeError
        An output's ``elem_type`` that ``onnx.TensorProto.DataType`` does not define
        (naming the node).
    """
    graph, opsets = model.graph, imported_opsets(model)
    types = _known_types(graph)
    for node in graph.node:
        if not _ours(node):
            continue
        name = node.output[0] if node.output else ""
        try:
            spec = resolve(node.op_type, _opset(node, opsets), node.domain)
            if not strict:  # as resolve_node reads it, without a second warning
                given = attribute_dict(node.attribute)
                spec = (first_accepting(spec, given) if spec.refuses(given) is not None else None) or spec
            dtype = _dtype(types.get(name), name)
        except GatherScatterError as exc:
            raise exc.in_node(node.name, node.op_type) from None
        found = (
            f"{name} {fmt_shape(_shape(types.get(name)))} {dtype if dtype is not None else '?'}"
            if name
            else "no output"
        )
        yield f"{node_label(node.name)} ({spec.name}): {found}"
