"""Model inputs as onnx.reference takes them, each checked against its graph input's declared
type (see :func:`~gather_scatter.run_model`): :func:`check_inputs` does it all on every call;
:class:`FeedPlan` keeps what depends only on the graph, so that a :class:`~gather_scatter.Session`
checks an ordinary tensor feed (declared dtype, native byte order, not a string) with a few
comparisons, and any other through :func:`check_inputs`, which gives the same errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx

from ..errors import DTypeError, ModelInputError, ShapeError

__all__ = ["FeedPlan", "check_inputs", "type_str"]


def check_inputs(graph: onnx.GraphProto, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """``inputs`` as the evaluator takes them, each checked against its graph input's declared
    type (see :func:`run_model`); initializers listed as inputs may be left out."""
    _check_mapping(inputs)
    initializers = {init.name for init in graph.initializer}
    declared = {i.name: i for i in graph.input}
    unknown = sorted(set(inputs) - set(declared))
    if unknown:
        raise ModelInputError(
            f"the model has no input {unknown[0]!r} (inputs: {', '.join(declared) or 'none'})", input=unknown[0]
        )
    missing = [name for name in declared if name not in inputs and name not in initializers]
    if missing:
        raise ModelInputError(
            f"model input {missing[0]!r} is missing (inputs: {', '.join(declared)})", input=missing[0]
        )
    return {name: _feed(name, (), value, declared[name].type) for name, value in inputs.items()}


def _check_mapping(inputs: Any) -> None:
    """ModelInputError for feeds that are not a mapping of input name to value."""
    if isinstance(inputs, Mapping):
        return
    if isinstance(inputs, (list, tuple)) and inputs and all(isinstance(p, tuple) and len(p) == 2 for p in inputs):
        hint = ": pass dict(feeds) to make one of these (name, value) pairs"
    elif inputs is None:
        hint = ": pass {} for a model without inputs"
    else:
        hint = ""
    raise ModelInputError(
        f"the feeds must be a mapping (a dict) of input name to value, not {type(inputs).__name__}{hint}",
        value=type(inputs).__name__,
    )


def type_str(t: onnx.TypeProto) -> str:
    """An ONNX type as the operator docs write it: ``seq(tensor(float))``, ``map(string, tensor(int64))``."""
    kind = t.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        elem = getattr(t, kind).elem_type
        name = onnx.TensorProto.DataType.Name(elem).lower() if elem in onnx.TensorProto.DataType.values() else elem
        return f"{kind[:-5]}({name})" if elem else kind[:-5]
    if kind == "sequence_type":
        return f"seq({type_str(t.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"optional({type_str(t.optional_type.elem_type)})"
    if kind == "map_type":
        key = onnx.TensorProto.DataType.Name(t.map_type.key_type).lower()
        return f"map({key}, {type_str(t.map_type.value_type)})"
    return kind or "no type"


def _label(name: str, position: tuple[int, ...]) -> str:
    """How messages name an input or one element of it: ``model input 'seq'[1]``."""
    return f"model input {name!r}" + "".join(f"[{i}]" for i in position)


def _feed(name: str, position: tuple[int, ...], value: Any, declared: onnx.TypeProto) -> Any:
    """One input value as onnx.reference takes it, checked against its declared type: a tensor
    as an array (its element type, rank and fixed dims checked), a sequence as a list of its
    checked elements (ragged or not), an optional as None or its checked element, a map as a
    dict (key type checked, values as given)."""
    kind = declared.WhichOneof("value")
    fields: dict[str, Any] = dict(input=name, position=position or None)
    if kind == "optional_type":
        return None if value is None else _feed(name, position, value, declared.optional_type.elem_type)
    if value is None and kind is not None:
        raise ModelInputError(
            f"{_label(name, position)} is None, but the model declares {type_str(declared)}, which is not optional",
            value=None,
            **fields,
        )
    if kind == "sequence_type":
        if not isinstance(value, (list, tuple)):
            raise DTypeError(
                f"{_label(name, position)} is a {type(value).__name__}, but the model declares "
                f"{type_str(declared)}: feed a list of its elements",
                value=type(value).__name__,
                **fields,
            )
        elem = declared.sequence_type.elem_type
        return [_feed(name, (*position, i), v, elem) for i, v in enumerate(value)]
    if kind == "map_type":
        if not isinstance(value, Mapping):
            raise DTypeError(
                f"{_label(name, position)} is a {type(value).__name__}, but the model declares "
                f"{type_str(declared)}: feed a dict",
                value=type(value).__name__,
                **fields,
            )
        _check_keys(name, position, value, declared)
        return dict(value)
    if kind is None and (value is None or isinstance(value, (list, tuple, Mapping))):
        return value  # no declared type: not ours to convert
    if kind not in ("tensor_type", None):
        return value  # a sparse tensor or an opaque value: as given
    if isinstance(value, np.ma.MaskedArray):  # np.asarray would drop the mask; the kernels refuse one too
        raise DTypeError(
            f"{_label(name, position)} is a masked array, and masks are not supported (the model would ignore "
            f"them); pass {name}.filled(fill_value) or {name}.data",
            value="MaskedArray",
            **fields,
        )
    value = np.asarray(value)
    tensor = declared.tensor_type
    if tensor.elem_type:
        _check_type(_label(name, position), value, tensor.elem_type, fields)
    if tensor.HasField("shape"):
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        _check_shape(_label(name, position), value, dims, fields)
    return _as_feed(value)


def _check_keys(name: str, position: tuple[int, ...], value: Mapping, declared: onnx.TypeProto) -> None:
    key_type = declared.map_type.key_type
    strings = key_type == onnx.TensorProto.STRING
    for key in value:
        ok = (
            isinstance(key, (str, bytes))
            if strings
            else (isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)))
        )
        if not ok:
            raise DTypeError(
                f"{_label(name, position)} has key {key!r} of type {type(key).__name__}, but the model declares "
                f"{type_str(declared)}",
                input=name,
                position=position or None,
                value=type(key).__name__,
            )


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


def _check_type(label: str, value: np.ndarray, elem_type: int, fields: dict) -> None:
    try:
        want = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except KeyError:  # found by tests/test_model_fuzz.py: was a KeyError out of onnx.helper
        raise DTypeError(
            f"{label} is declared with elem_type {elem_type}, which is not an ONNX tensor type",
            value=elem_type,
            **fields,
        ) from None
    native = value.dtype.newbyteorder("=") if value.dtype.byteorder not in "=|" else value.dtype
    if native == want or (want == object and value.dtype.kind in "OUS"):  # any byte order  # noqa: E721 - NumPy dtype equality (dtype("O") == object), not a type comparison
        return
    shown = onnx.TensorProto.DataType.Name(elem_type).lower()
    raise DTypeError(
        f"{label} has NumPy dtype {value.dtype}, but the model declares tensor({shown}) (NumPy {want})",
        value=str(value.dtype),
        **fields,
    )


def _check_shape(label: str, value: np.ndarray, dims: list[int | None], fields: dict) -> None:
    if value.ndim != len(dims):
        raise ShapeError(
            f"{label} has rank {value.ndim} (shape {value.shape}), but the model declares rank {len(dims)}",
            value=value.shape,
            **fields,
        )
    for axis, (size, want) in enumerate(zip(value.shape, dims, strict=False)):
        if want is not None and size != want:
            shown = tuple("?" if d is None else d for d in dims)
            raise ShapeError(
                f"{label} has shape {value.shape}, but the model declares {shown} (axis {axis} must be {want})",
                value=value.shape,
                axis=axis,
                **fields,
            )


class FeedPlan:
    """The checks of :func:`check_inputs` for one graph, prepared once.

    A feed that is an ndarray of its input's declared dtype (native byte order; for a string
    input, an object array, which :func:`check_inputs` passes as it is too, its items judged
    by the operators that read them) with the declared rank and fixed dims passes as it is;
    anything else (another dtype, a list, a ``str_`` or ``bytes_`` array, a sequence, an
    optional, a name the graph lacks, a missing input) goes through :func:`check_inputs`,
    which converts it or raises the error it names.
    """

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.graph = graph
        initializers = {init.name for init in graph.initializer}
        self.required = tuple(i.name for i in graph.input if i.name not in initializers)
        self.required_names = frozenset(self.required)
        # no input an initializer backs: feeds that all pass, as many as the inputs, are every input
        self.count = len(self.required) if len(self.required) == len(graph.input) else None
        # name -> (dtype, shape, rank, fixed dims) for the inputs a tensor feed can pass as is:
        # ``shape`` the declared one where every dim is fixed (one comparison), else None
        self.tensors: dict[str, tuple[np.dtype, tuple[int, ...] | None, int, tuple[tuple[int, int], ...]]] = {}
        for declared in graph.input:
            fast = self._tensor(declared.type)
            if fast is not None:
                self.tensors[declared.name] = fast

    @staticmethod
    def _tensor(t: onnx.TypeProto) -> tuple[np.dtype, tuple[int, ...] | None, int, tuple[tuple[int, int], ...]] | None:
        if t.WhichOneof("value") != "tensor_type" or not t.tensor_type.elem_type:
            return None
        if not t.tensor_type.HasField("shape"):
            return None
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type))
        except (KeyError, TypeError, ValueError):
            return None  # check_inputs names the element type
        if dtype.kind in "SU" or not dtype.isnative:
            return None
        dims = t.tensor_type.shape.dim
        fixed = tuple((axis, d.dim_value) for axis, d in enumerate(dims) if d.HasField("dim_value"))
        exact = tuple(size for _, size in fixed) if len(fixed) == len(dims) else None
        return dtype, exact, len(dims), fixed

    def check(self, inputs: Mapping[str, Any]) -> Mapping[str, Any]:
        """``inputs`` as the evaluator takes them (see :func:`check_inputs`); ``inputs``
        itself where every feed passes as it is."""
        if type(inputs) is not dict:
            _check_mapping(inputs)
        tensors = self.tensors
        for name, value in inputs.items():
            want = tensors.get(name)
            if want is None or type(value) is not _ndarray:
                return check_inputs(self.graph, inputs)
            dtype, exact, rank, fixed = want
            if value.dtype is not dtype and value.dtype != dtype:
                return check_inputs(self.graph, inputs)
            shape = value.shape
            if exact is not None:
                if shape != exact:
                    return check_inputs(self.graph, inputs)
                continue
            if len(shape) != rank:
                return check_inputs(self.graph, inputs)
            for axis, size in fixed:
                if shape[axis] != size:
                    return check_inputs(self.graph, inputs)
        # where no initializer backs an input, feeds that all passed, as many as the inputs, are
        # every input (one comparison for the set's)
        if len(inputs) != self.count and not inputs.keys() >= self.required_names:
            return check_inputs(self.graph, inputs)
        return inputs


_ndarray = np.ndarray  # a module global: one lookup, not np's attribute
