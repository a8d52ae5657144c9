"""Arrays in .npy/.npz files as the command line reads and writes them.

NumPy has no dtype of its own for ml_dtypes' types (bfloat16, float8, int4, uint4, ...):
``np.save`` writes most of them as raw void of their width (``|V2``, ``|V1``), which ``np.load``
gives back as void, and float8_e5m2 as ``'<f1'``, which ``np.load`` refuses. Inputs are read
as they are (void for both) and typed by the model's declared type (:func:`typed_inputs`);
outputs are written so that ``np.load(path, allow_pickle=False)`` reads them and ``run --inputs``
reads them back (:func:`storable`): strings as NumPy unicode (or bytes) arrays, ml_dtypes'
types as raw void of their width.
"""

from __future__ import annotations

import ast
import math
import os
import re
import struct
from typing import IO, Any

import numpy as np

__all__ = ["load", "not_numpy", "read_npz", "storable", "typed_inputs"]

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a zip archive's first entry, or an empty archive
_SIZED = re.compile(r"[<>|=]?[a-zA-Z](\d+)")  # a descr NumPy cannot read, as ml_dtypes' '<f1'


def not_numpy(path: str | os.PathLike) -> str | None:
    """Say why ``path`` is not a .npy or .npz file (np.load would try it as a pickle); None if it is one.

    None too where the file cannot be opened: np.load's own error names that.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError:
        return None
    if head.startswith(_NPY_MAGIC) or head[:4] in _ZIP_MAGIC:
        return None
    model = " (it looks like an ONNX model: the model goes first, as in gather-scatter run MODEL --inputs FILE.npz)"
    return "it is not a .npy or .npz file (it starts with neither NumPy's .npy signature nor a zip archive's)" + (
        model if os.fspath(path).endswith(".onnx") else ""
    )


def _unknown_descr(exc: Exception) -> bool:
    return isinstance(exc, ValueError) and "descr is not a valid dtype descriptor" in str(exc)


def _read_raw(f: IO[bytes]) -> np.ndarray:
    """A .npy array whose descr NumPy cannot read (``'<f1'``), as raw void of its item size."""
    version = np.lib.format.read_magic(f)
    size = struct.unpack("<H" if version == (1, 0) else "<I", f.read(2 if version == (1, 0) else 4))[0]
    header = ast.literal_eval(f.read(size).decode("latin1" if version < (3, 0) else "utf8"))
    sized = _SIZED.fullmatch(header["descr"]) if isinstance(header.get("descr"), str) else None
    if sized is None:
        raise ValueError(f"descr is not a valid dtype descriptor: {header.get('descr')!r}")
    dtype = np.dtype(f"V{sized.group(1)}")
    shape = tuple(header["shape"])
    data = f.read(math.prod(shape) * dtype.itemsize)
    if len(data) != math.prod(shape) * dtype.itemsize:
        raise ValueError(f"the file holds {len(data)} bytes of data, and shape {shape} of {dtype} takes more")
    return np.frombuffer(data, dtype).reshape(shape, order="F" if header.get("fortran_order") else "C").copy()


def load(path: str | os.PathLike) -> Any:
    """``np.load(path, allow_pickle=False)``; a .npy array of a descr NumPy cannot read as raw void."""
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as exc:
        if not _unknown_descr(exc):
            raise
    with open(path, "rb") as f:
        return _read_raw(f)


def read_npz(archive: Any) -> dict[str, np.ndarray]:
    """Every array of an open ``NpzFile``, by name; one of a descr NumPy cannot read as raw void."""
    arrays = {}
    for name in archive.files:
        try:
            arrays[name] = archive[name]
        except ValueError as exc:
            if not _unknown_descr(exc):
                raise
            member = name if name in archive.zip.namelist() else f"{name}.npy"
            with archive.zip.open(member) as f:
                arrays[name] = _read_raw(f)
    return arrays


def _ml_dtype(dtype: np.dtype) -> bool:
    return dtype.type.__module__.startswith("ml_dtypes")


def typed_inputs(graph: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Return ``inputs`` with each raw void array (``|V2``, ``|V1``) read as its input's declared type.

    Only where that type is one of ml_dtypes' (bfloat16, float8, int4, ...) and its item size the
    array's: the array is then that type's bytes, as NumPy stores them. Any other array is left
    to the feed checks, which name a mismatch.
    """
    import onnx

    declared = {i.name: i.type for i in graph.input}
    typed = dict(inputs)
    for name, value in inputs.items():
        t = declared.get(name)
        if t is None or not isinstance(value, np.ndarray) or value.dtype.kind != "V" or value.dtype.names is not None:
            continue
        if t.WhichOneof("value") != "tensor_type" or not t.tensor_type.elem_type:
            continue
        try:
            want = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type))
        except (KeyError, TypeError, ValueError):
            continue  # the feed checks name the element type
        if _ml_dtype(want) and want.itemsize == value.dtype.itemsize:
            typed[name] = value.view(want)
    return typed


def storable(name: str, value: Any) -> np.ndarray:
    """Return one output as an array that ``np.load(..., allow_pickle=False)`` reads back.

    A string tensor (an object array of str, or of bytes) becomes a NumPy unicode (or bytes)
    array; an ml_dtypes type raw void of its width (``|V2``, ``|V1``: what ``np.save`` writes for
    most of them, and what it cannot read back for float8_e5m2's ``'<f1'``). A sequence, map,
    empty optional or a string a NumPy string array cannot hold exactly (one ending in NUL) is
    a ValueError naming the output.
    """
    if isinstance(value, (list, tuple)):  # np.asarray would stack it, or fail on a ragged one
        raise ValueError(f"output {name!r} is a sequence of {len(value)} tensors, and an .npz file holds tensors only")
    if value is None:
        raise ValueError(f"output {name!r} is an empty optional (None), and an .npz file holds tensors only")
    if isinstance(value, dict):
        raise ValueError(f"output {name!r} is a map, and an .npz file holds tensors only")
    array = np.asarray(value)
    if _ml_dtype(array.dtype):
        return array.view(f"V{array.dtype.itemsize}")
    if array.dtype.kind != "O":
        return array
    kinds = {type(item) for item in array.flat}
    nul: str | bytes
    if kinds <= {str}:
        fixed, nul = array.astype(np.str_), "\x00"
    elif kinds <= {bytes}:
        fixed, nul = array.astype(np.bytes_), b"\x00"
    else:
        shown = ", ".join(sorted(k.__name__ for k in kinds))
        raise ValueError(f"output {name!r} is an object array of {shown}, which only a pickle could store")
    # NumPy's fixed-width strings drop trailing NULs: refuse what would not read back as it was.
    if any(item.endswith(nul) for item in array.flat):
        raise ValueError(f"output {name!r} has a string ending in NUL, which a NumPy string array cannot hold")
    return fixed
