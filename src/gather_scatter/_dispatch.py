"""Version-exact entry points: resolve the version in effect at an opset, check the node's
attributes against that version's table, then run the one kernel or shape rule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from . import _memory, _shapes
from ._versions import REGISTRY, Mode, OpVersion, Reduction, resolve
from .errors import InvalidAttributeError, ShapeError
from .kernels.elements import run_gather_elements, run_scatter_elements
from .kernels.gather import run_gather
from .kernels.gather_nd import run_gather_nd
from .kernels.scatter_nd import run_scatter_nd
from .kernels.tensor_scatter import run_tensor_scatter


@dataclass(frozen=True)
class _Op:
    """How to run one operator: the same kernel and shape rule for every version (what
    differs is the OpVersion they are given)."""

    kernel: Callable[..., np.ndarray]
    rule: Callable[..., _shapes.Shape]
    inputs: tuple[str, ...]
    optional: int = 0  # how many trailing inputs a node may leave out
    dtype_order: tuple[int, int, int] | None = None  # input positions of (data, indices, updates)

    def dtype_args(self, dtypes: Sequence[Any]) -> tuple[list, tuple[str, str, str]]:
        """``dtypes`` (in input order) as output_dtype's (data, indices, updates), and those names."""
        order = self.dtype_order or (0, 1, 2)
        padded = list(dtypes) + [None] * (3 - len(dtypes))
        names = tuple(self.inputs[i] if i < len(self.inputs) else "updates" for i in order)
        return [padded[i] for i in order], names


_OPS = {
    "Gather": _Op(run_gather, _shapes.gather_shape, ("data", "indices")),
    "GatherND": _Op(run_gather_nd, _shapes.gather_nd_shape, ("data", "indices")),
    "ScatterND": _Op(run_scatter_nd, _shapes.scatter_nd_shape, ("data", "indices", "updates")),
    "GatherElements": _Op(run_gather_elements, _shapes.gather_elements_shape, ("data", "indices")),
    "ScatterElements": _Op(
        run_scatter_elements, _shapes.scatter_elements_shape, ("data", "indices", "updates")
    ),
    "Scatter": _Op(run_scatter_elements, _shapes.scatter_elements_shape, ("data", "indices", "updates")),
    "TensorScatter": _Op(
        run_tensor_scatter, _shapes.tensor_scatter_shape, ("past_cache", "update", "write_indices"),
        optional=1, dtype_order=(0, 2, 1),
    ),
}


def node_attributes(spec: OpVersion, attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    """The version's attributes with defaults filled in; InvalidAttributeError for any other."""
    values = dict(spec.attributes)
    for name, value in (attrs or {}).items():
        if name not in spec.attributes:
            later = sorted(
                v.since_version
                for v in REGISTRY.values()
                if (v.domain, v.op_type) == (spec.domain, spec.op_type) and name in v.attributes
            )
            hint = f"; it was added in {spec.op_type}-{later[0]}" if later else ""
            known = ", ".join(spec.attributes) or "none"
            raise InvalidAttributeError(
                f"{spec.name}: has no attribute {name!r} (attributes: {known}){hint}",
                op=spec.op_type, since_version=spec.since_version, input=name, value=value,
            )
        values[name] = value
    return values


def _check_arity(spec: OpVersion, op: _Op, count: int) -> None:
    low, high = len(op.inputs) - op.optional, len(op.inputs)
    if not low <= count <= high:
        takes = f"{low} to {high}" if low != high else f"{high}"
        optional = f", the last {op.optional} optional" if op.optional else ""
        raise ShapeError(
            f"{spec.name}: takes {takes} inputs ({', '.join(op.inputs)}{optional}), got {count}",
            op=spec.op_type, since_version=spec.since_version, value=count,
        )


def run_node(
    op_type: str,
    inputs: Sequence[Any],
    attrs: Mapping[str, Any] | None = None,
    *,
    opset: int,
    domain: str = "",
) -> np.ndarray:
    """Evaluate one node with the operator version in effect at ``opset`` of ``domain``.

    Parameters
    ----------
    op_type : {'Gather', 'GatherND', 'ScatterND', 'GatherElements', 'ScatterElements', 'Scatter', 'TensorScatter'}
    inputs : sequence of ndarray
        ``[data, indices]``; for the scatters ``[data, indices, updates]``; for TensorScatter
        ``[past_cache, update]`` or ``[past_cache, update, write_indices]`` (a None
        ``write_indices`` is absent, as an empty input name in a model).
    attrs : mapping, optional
        The node's attributes (``axis``, ``batch_dims``, ``reduction``, ``mode``); only those
        the resolved version has are accepted.
    opset : int
        The model's opset for ``domain``; the version used is the newest whose
        ``since_version <= opset`` (GatherND at opset 12 -> GatherND-12).
    domain : str, default ''
        ``''`` or ``'ai.onnx'``, or ``'com.microsoft'`` (GatherND-1 only).

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
        before ScatterND-16) or a value it refuses (``'max'`` before ScatterND-18).
    DTypeError
        A type the version lacks (bfloat16 before version 13, int32 indices for ai.onnx
        GatherND/ScatterND).
    ShapeError, IndexOutOfBoundsError
        As raised by the kernel.

    Examples
    --------
    >>> import numpy as np
    >>> run_node("GatherND", [np.array([[0, 1], [2, 3]]), np.array([[1], [0]])], opset=11)
    array([[2, 3],
           [0, 1]])
    """
    spec = resolve(op_type, opset, domain)
    op = _OPS[spec.op_type]
    values = node_attributes(spec, attrs)
    _check_arity(spec, op, len(inputs))
    return op.kernel(spec, *inputs, **values)


def infer_shape(
    op_type: str,
    input_shapes: Sequence[Sequence[_shapes.Dim] | None],
    input_dtypes: Sequence[Any] | None = None,
    attrs: Mapping[str, Any] | None = None,
    *,
    opset: int,
    domain: str = "",
) -> tuple[_shapes.Shape, Any]:
    """Output shape and dtype of one node, from input shapes, dtypes and attributes alone.

    Parameters
    ----------
    op_type, attrs, opset, domain
        As for :func:`run_node`.
    input_shapes : sequence of (sequence of dim) or None
        One per input. A dim is an int, a symbol name (str) or None (unknown); a shape of
        None means unknown rank.
    input_dtypes : sequence of dtype or None, optional
        NumPy dtypes (``ml_dtypes.bfloat16``, ``object`` for strings); None entries are unknown.

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
        ``dtype`` is data's dtype, or None when it is not given.

    Raises
    ------
    UnsupportedOpError, InvalidAttributeError, DTypeError, ShapeError
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
    """
    spec = resolve(op_type, opset, domain)
    op = _OPS[spec.op_type]
    values = node_attributes(spec, attrs)
    _check_arity(spec, op, len(input_shapes))
    dtypes = list(input_dtypes) if input_dtypes is not None else [None] * len(input_shapes)
    _check_arity(spec, op, len(dtypes))
    ordered, names = op.dtype_args(dtypes)
    dtype = _shapes.output_dtype(spec, *ordered, names=names)
    reduction = values.pop("reduction", None)
    mode = values.pop("mode", None)
    shapes = list(input_shapes) + [_shapes.ABSENT] * (len(op.inputs) - len(input_shapes))
    shape = op.rule(spec, *shapes, **values)
    _shapes.check_output_bytes(spec, shape, dtype, limit=_memory.INT64_MAX)
    if reduction is not None:
        reduction = Reduction.parse(spec, reduction)
        if dtype is not None:
            _shapes.check_reduction_type(spec, reduction, dtype)
    if mode is not None:
        Mode.parse(spec, mode)
    return shape, (np.dtype(dtype) if dtype is not None else None)
