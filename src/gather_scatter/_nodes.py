"""Version-exact entry points: resolve the version in effect at an opset, check the node's
attributes against that version's table, then run the one kernel or shape rule.

With ``strict=False`` a node whose version lacks an attribute or attribute value that a later
version of its operator has runs as the earliest such version, with an OffSpecWarning: which
version that is comes from the registry (:func:`~gather_scatter.rules.versions.first_accepting`),
never from a branch in a kernel.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._calls import (
    run_gather,
    run_gather_block_quantized,
    run_gather_elements,
    run_gather_nd,
    run_scatter_elements,
    run_scatter_nd,
    run_tensor_scatter,
)
from .errors import ArityError, InvalidAttributeError, node_label
from .resources import memory as _memory
from .rules import dims as _dims
from .rules import dtypes as _dtypes
from .rules import shapes as _shapes
from .rules.quantized import plan as _quantized_plan
from .rules.versions import REGISTRY, Mode, OpVersion, Reduction, choice_value, first_accepting, fix_hint, resolve


class OffSpecWarning(UserWarning):
    """A node run, with ``strict=False``, as a later version of its operator than its opset's.

    Issued when the version in effect at the model's opset lacks an attribute or an attribute
    value that a later version of the same operator has (PyTorch's exporter at opset 17 writes
    ScatterElements ``reduction='max'``, a ScatterElements-18 value). Fields: ``node`` (None
    outside a model), ``op``, ``domain``, ``opset``, ``resolved`` (the version in effect, e.g.
    ``'ScatterElements-16'``) and ``used`` (the version run, e.g. ``'ScatterElements-18'``).
    """

    def __init__(
        self,
        message: str,
        *,
        node: str | None = None,
        op: str | None = None,
        domain: str = "",
        opset: int | None = None,
        resolved: str | None = None,
        used: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.node, self.op, self.domain, self.opset = node, op, domain, opset
        self.resolved, self.used = resolved, used


@dataclass(frozen=True)
class _Op:
    """How to run one operator: the same kernel and shape rule for every version (what
    differs is the OpVersion they are given)."""

    kernel: Callable[..., np.ndarray]
    rule: Callable[..., _dims.Shape]
    inputs: tuple[str, ...]
    optional: int = 0  # how many trailing inputs a node may leave out
    dtype_order: tuple[int, int, int] | None = None  # input positions of (data, indices, updates)
    infer: Callable[..., tuple[_dims.Shape, Any]] | None = None  # a rule of shapes and dtypes together

    def dtype_args(self, dtypes: Sequence[Any]) -> tuple[list, tuple[str, ...]]:
        """``dtypes`` (in input order) as output_dtype's (data, indices, updates), and those names."""
        order = self.dtype_order or (0, 1, 2)
        padded = list(dtypes) + [None] * (3 - len(dtypes))
        names = tuple(self.inputs[i] if i < len(self.inputs) else "updates" for i in order)
        return [padded[i] for i in order], names


def _infer_quantized(spec: OpVersion, values: Mapping[str, Any], shapes: list, dtypes: list) -> tuple:
    """GatherBlockQuantized's shape and dtype: its output's last dim depends on data's type."""
    given = list(shapes) + [_dims.ABSENT] * (4 - len(shapes))
    plan = _quantized_plan(spec, *given, dtypes=list(dtypes) + [None] * (4 - len(dtypes)), **values)
    _dtypes.check_output_bytes(spec, plan.shape, plan.dtype, limit=_memory.INT64_MAX)
    return plan.shape, plan.dtype


_OPS = {
    "Gather": _Op(run_gather, _shapes.gather_shape, ("data", "indices")),
    "GatherND": _Op(run_gather_nd, _shapes.gather_nd_shape, ("data", "indices")),
    "ScatterND": _Op(run_scatter_nd, _shapes.scatter_nd_shape, ("data", "indices", "updates")),
    "GatherElements": _Op(run_gather_elements, _shapes.gather_elements_shape, ("data", "indices")),
    "ScatterElements": _Op(run_scatter_elements, _shapes.scatter_elements_shape, ("data", "indices", "updates")),
    "Scatter": _Op(run_scatter_elements, _shapes.scatter_elements_shape, ("data", "indices", "updates")),
    "TensorScatter": _Op(
        run_tensor_scatter,
        _shapes.tensor_scatter_shape,
        ("past_cache", "update", "write_indices"),
        optional=1,
        dtype_order=(0, 2, 1),
    ),
    "GatherBlockQuantized": _Op(
        run_gather_block_quantized,
        _shapes.gather_shape,  # unused: ``infer`` reads shapes and dtypes together
        ("data", "indices", "scales", "zero_points"),
        optional=1,
        infer=_infer_quantized,
    ),
}


Attributes = Mapping[str, Any] | Iterable[Any] | None  # a mapping, or a sequence of onnx.AttributeProto


def _is_attribute_proto(value: Any) -> bool:
    onnx = sys.modules.get("onnx")  # not imported here: a caller holding an AttributeProto has
    return onnx is not None and isinstance(value, onnx.AttributeProto)


def attribute_dict(attrs: Attributes) -> dict[str, Any]:
    """A node's attributes as ``{name: value}``: from a mapping of name to value, or from a
    sequence of ``onnx.AttributeProto`` (as ``NodeProto.attribute``); an AttributeProto value in
    a mapping is read too. InvalidAttributeError for anything else, or a name given twice."""
    if attrs is None:
        return {}
    if isinstance(attrs, Mapping):
        items = list(attrs.items())
    elif isinstance(attrs, (str, bytes)) or not isinstance(attrs, Iterable):
        raise InvalidAttributeError(
            f"attributes must be a mapping of name to value or a sequence of onnx.AttributeProto, got "
            f"{type(attrs).__name__}",
            input="attrs",
            value=type(attrs).__name__,
        )
    else:
        items = []
        for position, attr in enumerate(attrs):
            if not _is_attribute_proto(attr):
                raise InvalidAttributeError(
                    f"attributes[{position}] is a {type(attr).__name__}, not an onnx.AttributeProto (attributes "
                    "are a mapping of name to value, or a sequence of onnx.AttributeProto)",
                    input="attrs",
                    position=(position,),
                    value=type(attr).__name__,
                )
            items.append((attr.name, attr))
    values: dict[str, Any] = {}
    for name, value in items:
        if name in values:
            raise InvalidAttributeError(f"attribute {name!r} is given twice", input=name, value=value)
        if _is_attribute_proto(value):
            from onnx import helper

            value = helper.get_attribute_value(value)
            if isinstance(value, bytes):  # a STRING attribute, as onnx.reference reads it: a str
                # (reduction=b"max" missed the kernels' fast path: 220 against 14 us); bytes that
                # are not text stay as given, for their check to name
                with contextlib.suppress(UnicodeDecodeError):
                    value = value.decode("utf-8")
        values[name] = value
    return values


def node_attributes(spec: OpVersion, attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The version's attributes with defaults filled in; InvalidAttributeError for any other."""
    values = dict(spec.attributes)
    for name, value in (attrs or {}).items():
        if name not in spec.attributes:
            added = sorted(
                (
                    v
                    for v in REGISTRY.values()
                    if (v.domain, v.op_type) == (spec.domain, spec.op_type) and name in v.attributes
                ),
                key=lambda v: v.since_version,
            )
            hint = f"; it was added in {added[0].name}" if added else ""
            later = first_accepting(spec, {name: value})
            if later is not None:  # some version takes this very value: name the way forward
                if later is not added[0]:
                    hint += f", and {name} = {choice_value(value)!r} exists from {later.name}"
                hint += f": {fix_hint(later)}"
            known = ", ".join(spec.attributes) or "none"
            raise spec.error(
                InvalidAttributeError,
                f"has no attribute {name!r} (attributes: {known}){hint}",
                input=name,
                value=value,
            )
        values[name] = value
    return values


def _check_arity(spec: OpVersion, op: _Op, count: int) -> None:
    low, high = len(op.inputs) - op.optional, len(op.inputs)
    if not low <= count <= high:
        takes = f"{low} to {high}" if low != high else f"{high}"
        optional = f", the last {op.optional} optional" if op.optional else ""
        missing = f"; missing: {', '.join(op.inputs[count:low])}" if count < low else ""
        raise spec.error(
            ArityError,
            f"takes {takes} inputs ({', '.join(op.inputs)}{optional}), got {count}{missing}",
            value=count,
            valid_range=(low, high),
            input=op.inputs[count] if count < low else None,
        )


def check_arity(spec: OpVersion, count: int) -> None:
    """Raise ArityError where ``count`` inputs are not as many as ``spec`` takes."""
    _check_arity(spec, _OPS[spec.op_type], count)


def check_node_arity(spec: OpVersion, inputs: Sequence[str]) -> None:
    """Raise ArityError where a node's ``inputs`` (its input names; trailing empty names are
    optional inputs left out) are not as many as ``spec`` takes."""
    count = len(inputs)
    while count and not inputs[count - 1]:
        count -= 1
    check_arity(spec, count)


def _warn_off_spec(spec: OpVersion, used: OpVersion, attrs: Mapping[str, Any], opset: int, node: str | None) -> None:
    refused = ", ".join(f"{n} = {choice_value(v)!r}" for n, v in attrs.items() if spec.refuses({n: v}))
    where = f"{node_label(node)} ({spec.op_type}): " if node is not None else ""
    warnings.warn(
        OffSpecWarning(
            f"{where}{spec.op_type} at opset {opset} is {spec.name}, which does not accept {refused}; "
            f"run as {used.name}, the earliest version that does (strict=False)",
            node=node,
            op=spec.op_type,
            domain=spec.domain or "ai.onnx",
            opset=int(opset),
            resolved=spec.name,
            used=used.name,
        ),
        stacklevel=4,  # the caller of run_node / infer_shape
    )


def resolve_node(
    op_type: str, attrs: Attributes, *, opset: int, domain: str = "", strict: bool = True, node: str | None = None
) -> tuple[OpVersion, dict[str, Any]]:
    """The version a node runs as, and its attributes with the version's defaults filled in.

    That version is the one in effect at ``opset``; with ``strict=False``, if it lacks one of
    ``attrs`` or one of their values that a later version of the operator has, the earliest
    such version instead, with an OffSpecWarning naming ``node`` (a model's node name, or None).
    Raises UnsupportedOpError or InvalidAttributeError as :func:`run_node` describes.
    """
    spec = resolve(op_type, opset, domain)
    given = attribute_dict(attrs)
    if not strict and spec.refuses(given) is not None:
        later = first_accepting(spec, given)
        if later is not None:
            _warn_off_spec(spec, later, given, opset, node)
            spec = later
    return spec, node_attributes(spec, given)


def version_kernel(spec: OpVersion) -> tuple[Callable[..., np.ndarray], int, int]:
    """``(kernel, low, high)``: ``spec``'s kernel, called as ``kernel(spec, *inputs, **values)``,
    and the fewest and most inputs it takes; for a caller that runs one version call after call
    (a model's node): :func:`run_version` less its lookups, :func:`check_arity` where the count
    is outside ``[low, high]``."""
    op = _OPS[spec.op_type]
    return op.kernel, len(op.inputs) - op.optional, len(op.inputs)


def run_version(spec: OpVersion, inputs: Sequence[Any], values: Mapping[str, Any]) -> np.ndarray:
    """Run ``spec``'s kernel: ``values`` as :func:`resolve_node` returns them."""
    op = _OPS[spec.op_type]
    _check_arity(spec, op, len(inputs))
    return op.kernel(spec, *inputs, **values)


def run_node(
    op_type: str,
    inputs: Sequence[Any],
    attrs: Attributes = None,
    *,
    opset: int,
    domain: str = "",
    strict: bool = True,
) -> np.ndarray:
    """Evaluate one node with the operator version in effect at ``opset`` of ``domain``.

    Parameters
    ----------
    op_type : {'Gather', 'GatherND', 'ScatterND', 'GatherElements', 'ScatterElements', 'Scatter', 'TensorScatter', 'GatherBlockQuantized'}
    inputs : sequence of ndarray
        ``[data, indices]``; for the scatters ``[data, indices, updates]``; for TensorScatter
        ``[past_cache, update]`` or ``[past_cache, update, write_indices]`` (a None
        ``write_indices`` is absent, as an empty input name in a model); for
        GatherBlockQuantized ``[data, indices, scales]`` or ``[data, indices, scales,
        zero_points]``.
    attrs : mapping or sequence of onnx.AttributeProto, optional
        The node's attributes (``axis``, ``batch_dims``, ``reduction``, ``mode``), as a
        mapping of name to value or as a node's ``attribute`` list; only those the resolved
        version has are accepted.
    opset : int
        The model's opset for ``domain``; the version used is the newest whose
        ``since_version <= opset`` (GatherND at opset 12 -> GatherND-12).
    domain : str, default ''
        ``''`` or ``'ai.onnx'``, or ``'com.microsoft'`` (GatherND-1 and GatherBlockQuantized-1).
    strict : bool, default True
        False runs an off-spec node, one with an attribute or attribute value its version
        lacks but a later version of the operator has (ScatterElements ``reduction='max'`` at
        opset 17), with the semantics of the earliest version that accepts it, and issues an
        :class:`~gather_scatter.OffSpecWarning` naming both versions.

    Returns
    -------
    ndarray
        The node's single output.

    Raises
    ------
    UnsupportedOpError
        Unknown op, domain, or an opset outside the known range (Scatter at opset >= 11,
        where ScatterElements replaces it).
    InvalidAttributeError
        An attribute the version lacks (e.g. ``batch_dims`` on GatherND-11, ``reduction``
        before ScatterND-16) or a value it refuses (``'max'`` before ScatterND-18); when a
        later version accepts it, the message names the opset to re-export with.
    ArityError
        Fewer or more inputs than the version takes.
    DTypeError
        A type the version lacks (bfloat16 before version 13, int32 indices for ai.onnx
        GatherND/ScatterND).
    ShapeError, IndexOutOfBoundsError
        As raised by the kernel.

    Warns
    -----
    OffSpecWarning
        With ``strict=False``, when the node runs as a later version than its opset's.

    Examples
    --------
    >>> import numpy as np
    >>> run_node("GatherND", [np.array([[0, 1], [2, 3]]), np.array([[1], [0]])], opset=11)
    array([[2, 3],
           [0, 1]])
    >>> run_node("ScatterElements", [np.zeros(2), np.array([0])], opset=13)
    Traceback (most recent call last):
    ...
    gather_scatter.errors.ArityError: ScatterElements-13: takes 3 inputs (data, indices, updates), got 2; missing: updates
    """  # noqa: E501 - exact doctest output, cannot be wrapped
    spec, values = resolve_node(op_type, attrs, opset=opset, domain=domain, strict=strict)
    return run_version(spec, inputs, values)


def infer_shape(
    op_type: str,
    input_shapes: Sequence[Sequence[_dims.Dim] | None],
    input_dtypes: Sequence[Any] | None = None,
    attrs: Attributes = None,
    *,
    opset: int,
    domain: str = "",
    strict: bool = True,
) -> tuple[_dims.Shape, Any]:
    """Output shape and dtype of one node, from input shapes, dtypes and attributes alone.

    Parameters
    ----------
    op_type, attrs, opset, domain, strict
        As for :func:`run_node` (``strict=False`` infers an off-spec node as the version it
        would run as, with the same warning).
    input_shapes : sequence of (sequence of dim) or None
        One per input. A dim is an int, a symbol name (str) or None (unknown); a shape of
        None means unknown rank.
    input_dtypes : sequence of dtype or None, optional
        NumPy dtypes or their names (``ml_dtypes.bfloat16``, ``object`` for strings), ONNX
        element-type numbers (``onnx.TensorProto.FLOAT``) or type strings (``'tensor(float)'``);
        None entries are unknown. Anything else is a DTypeError.

    Returns
    -------
    (shape, dtype)
        ``shape`` is a tuple of dims, or None when the output rank cannot be known: Gather
        with data's or indices' rank unknown; GatherND with either rank or
        ``indices.shape[-1]`` unknown; ScatterND with data's rank unknown unless indices'
        rank, ``indices.shape[-1]`` and updates' rank are known (the output is then
        ``(None,) * k + updates.shape[q-1:]``). Symbols pass through wherever the rule copies
        a dim, and are never replaced; an unknown (None) dim is filled from another input the
        rule proves equal (a GatherND batch dim from data, a ScatterND dim from updates).
        ``dtype`` is data's dtype (GatherBlockQuantized: scales', its T2), or None when it is
        not given.

    Raises
    ------
    UnsupportedOpError, InvalidAttributeError, ArityError, DTypeError, ShapeError
        The same class and message the kernel raises for arrays of these shapes, attributes
        and dtypes, checked in the kernel's order (attributes, dtypes, shapes, reduction);
        only violations the known facts prove (a symbol may equal anything at run time).
    OutputTooLargeError
        The output, fully known, would take more bytes than int64 offsets address. The
        run-time memory limit is not applied: the model may run on another machine.

    Notes
    -----
    Shape rules as written in the operator specs (https://onnx.ai/onnx/operators/): Gather
    ``data.shape[:axis] + indices.shape + data.shape[axis+1:]``; GatherND
    ``indices.shape[:-1] + data.shape[b + k:]``; ScatterND ``data.shape`` with updates
    ``indices.shape[:-1] + data.shape[k:]``; GatherElements ``indices.shape`` and the scatters
    ``data.shape``, with ``indices.shape[d] <= data.shape[d]`` off the axis; TensorScatter
    ``past_cache.shape``. IndexOutOfBoundsError needs values, so never here.

    Examples
    --------
    >>> infer_shape("Gather", [["N", 256], ["B", "T"]], opset=13)
    (('B', 'T', 256), None)
    >>> infer_shape("GatherND", [[2, 3, 4], ["Q", 1]], [np.float16, np.int32], opset=1, domain="com.microsoft")
    (('Q', 3, 4), dtype('float16'))
    >>> infer_shape("ScatterND", [None, [5, 1], [5, 7]], opset=18)
    ((None, 7), None)
    >>> infer_shape("GatherND", [[2, 3], [4, 3]], opset=13)
    Traceback (most recent call last):
    ...
    gather_scatter.errors.ShapeError: GatherND-13: indices.shape[-1] = 3 must be in [1, 2] (1 to rank(data) - batch_dims; data shape (2, 3), indices shape (4, 3))
    """  # noqa: E501 - exact doctest output, cannot be wrapped
    spec, values = resolve_node(op_type, attrs, opset=opset, domain=domain, strict=strict)
    return infer_version(spec, values, input_shapes, input_dtypes)


def infer_version(
    spec: OpVersion,
    values: Mapping[str, Any],
    input_shapes: Sequence[Sequence[_dims.Dim] | None],
    input_dtypes: Sequence[Any] | None = None,
) -> tuple[_dims.Shape, Any]:
    """:func:`infer_shape` for a resolved version: ``values`` as :func:`resolve_node` returns them."""
    op = _OPS[spec.op_type]
    values = dict(values)
    _check_arity(spec, op, len(input_shapes))
    dtypes = list(input_dtypes) if input_dtypes is not None else [None] * len(input_shapes)
    _check_arity(spec, op, len(dtypes))
    if op.infer is not None:
        return op.infer(spec, values, list(input_shapes), dtypes)
    ordered, names = op.dtype_args(dtypes)
    dtype = _dtypes.output_dtype(spec, *ordered, names=names)
    reduction = values.pop("reduction", None)
    mode = values.pop("mode", None)
    shapes = list(input_shapes) + [_dims.ABSENT] * (len(op.inputs) - len(input_shapes))
    shape = op.rule(spec, *shapes, **values)
    _dtypes.check_output_bytes(spec, shape, dtype, limit=_memory.INT64_MAX)
    if reduction is not None:
        reduction = Reduction.parse(spec, reduction)
        if dtype is not None:
            _dtypes.check_reduction_type(spec, reduction, dtype)
    if mode is not None:
        Mode.parse(spec, mode)
    return shape, (np.dtype(dtype) if dtype is not None else None)
