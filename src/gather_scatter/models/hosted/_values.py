"""Values across the hosted Session's boundaries: NumPy arrays and onnxruntime's ``OrtValue``.

A run hands values from step to step as onnxruntime's own ``OrtValue`` where a segment exchanges
only tensors (:func:`mode`), as NumPy arrays, lists and None where strings, sequences or
optionals cross. :func:`to_ort` and :func:`to_numpy` convert every ONNX tensor type, those NumPy
lacks too (bfloat16, float8, 4-bit: ml_dtypes' dtypes on our side, their bits in onnxruntime's),
with 0-d and empty shapes kept; NumPy arrays made from an ``OrtValue`` share its memory where
the type allows.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from ...rules.versions import LOW_PRECISION_TYPES, ONNX_TYPES
from ._partition import elem_type_name

__all__ = ["mode", "to_numpy", "to_ort"]


class _Hold:
    """An OrtValue's memory as NumPy sees it (``typestr`` bytes per element): the array made
    from it keeps the OrtValue alive."""

    def __init__(self, value: Any, shape: tuple[int, ...], typestr: str) -> None:
        self.value = value
        self.__array_interface__ = {"shape": shape, "typestr": typestr, "data": (value.data_ptr(), False), "version": 3}


# The ONNX types NumPy has no type of its own for (ml_dtypes has them), by onnxruntime's name:
# their OrtValues are made from, and read back as, their bits. 4-bit types are packed two to a
# byte in onnxruntime (low nibble first, as ONNX stores them), one to a byte in ml_dtypes.
_ML_TYPES = {
    name: (onnx.TensorProto.DataType.Value(name.upper()), ONNX_TYPES[name])
    for name in sorted(LOW_PRECISION_TYPES | {"bfloat16"})
}
_ML_ELEM = {dtype: elem for elem, dtype in _ML_TYPES.values()}
_PACKED = frozenset({onnx.TensorProto.INT4, onnx.TensorProto.UINT4, onnx.TensorProto.FLOAT4E2M1})


def to_numpy(value: Any, c_ortvalue: Any) -> Any:
    """``value`` (an OrtValue, or what an earlier step gave) as NumPy: every tensor in its ONNX
    type's dtype (ml_dtypes for bfloat16, float8 and 4-bit types, as our engine gives them),
    strings as object arrays of ``str`` (onnxruntime's), shapes kept (0-d and empty included)."""
    if not isinstance(value, c_ortvalue):
        return value  # a checked feed (strings already object arrays of str) or our evaluator's output
    kind = value.data_type()
    name = kind[len("tensor(") : -1] if kind.startswith("tensor(") else None
    if name not in _ML_TYPES:
        return value.numpy()
    elem, dtype = _ML_TYPES[name]
    shape = tuple(value.shape())
    if elem not in _PACKED:
        return np.asarray(_Hold(value, shape, f"<u{dtype.itemsize}")).view(dtype)
    size = int(np.prod(shape, dtype=np.int64))
    packed = np.asarray(_Hold(value, ((size + 1) // 2,), "|u1"))
    nibbles = np.empty(2 * packed.size, np.uint8)
    nibbles[0::2] = packed & 0x0F
    nibbles[1::2] = packed >> 4
    return nibbles[:size].view(dtype).reshape(shape)


def to_ort(value: Any, ort: Any, c_ortvalue: Any, keep: list[Any]) -> Any:
    """``value`` as a C OrtValue (sharing its memory where onnxruntime can); what holds that
    memory goes into ``keep``. A 0-d array stays 0-d."""
    if isinstance(value, c_ortvalue):
        return value
    array = np.asarray(value)
    if not array.flags.c_contiguous:
        array = array.copy(order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
    elem = _ML_ELEM.get(array.dtype)
    if elem is None:
        keep.append(array)
        return c_ortvalue.ortvalue_from_numpy(array, _cpu(ort))
    made = c_ortvalue.ortvalue_from_shape_and_onnx_type(list(array.shape), elem, _cpu(ort))
    bits = array.view(f"u{array.dtype.itemsize}").reshape(-1)
    if elem in _PACKED:
        low = bits[0::2] & 0x0F
        high = np.zeros_like(low)
        high[: bits.size // 2] = (bits[1::2] & 0x0F) << 4
        bits = low | high
    if bits.size:
        np.asarray(_Hold(made, (bits.size,), f"<u{bits.dtype.itemsize}"))[...] = bits
    keep.append(made)
    return made


@functools.cache
def _cpu(ort: Any) -> Any:
    c = ort.capi._pybind_state
    return c.OrtDevice(c.OrtDevice.cpu(), c.OrtDevice.default_memory(), 0)


def mode(names: Sequence[str], types: Mapping[str, onnx.TypeProto]) -> bool:
    """Whether a segment exchanging ``names`` is called with OrtValues (True) or NumPy (False).

    onnxruntime's ``run`` cannot take or return the types NumPy lacks (bfloat16, float8, 4-bit),
    and ``run_with_ort_values`` cannot take strings, sequences or optionals from Python:
    OrtValues where such a tensor (or a value of unknown type, which may be one) crosses and
    only tensors cross, NumPy otherwise (the cheaper call: 30-40 us less per run for four
    inputs and three outputs).
    """
    kinds = [("unknown" if n not in types else elem_type_name(types[n]) or "other") for n in names]
    if "string" in kinds or "other" in kinds:
        return False
    return "unknown" in kinds or any(kind in _ML_TYPES for kind in kinds)
