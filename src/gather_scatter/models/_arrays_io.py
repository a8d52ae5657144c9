"""The one codec of arrays in .npy/.npz files: the command line's, the checker's findings' and repro scripts'.

NumPy has no dtype of its own for ml_dtypes' types (bfloat16, float8*, float4, float6, int4,
uint4, int2, uint2): ``np.save`` writes most of them as raw void of their width (``|V2``,
``|V1``), which ``np.load`` gives back as void, and float8_e5m2 as ``'<f1'``, which ``np.load``
refuses; and it writes a string tensor (an object array) as a pickle. The encoding, one for every
writer (:func:`save_npz`: ``run --output``, a finding's ``finding-NNNN.npz``, a repro script's
archive) and every reader (:func:`read_npz`, :func:`load_npz`; a repro script's own lines,
:func:`decode_source`):

- an ml_dtypes type is stored as raw void of its width (``|V2``, ``|V1``), its bytes unchanged;
- a string tensor as a NumPy unicode array (``U``; an object array of bytes as ``S``), which
  cannot hold a string ending in NUL (refused, see :func:`storable`; a finding's inputs pickle
  that one array instead, :func:`save_npz`'s ``allow_pickle``);
- any other type (float, int, bool, complex, float16) as NumPy stores it;
- the exact ONNX type of each array whose NumPy dtype does not say it (the ml_dtypes types, which
  share ``|V1``, and strings) is the comment of its zip member, ``onnx:<type>``, with ``<type>``
  ONNX's name in lower case (``onnx:bfloat16``, ``onnx:float8e5m2``, ``onnx:int4``,
  ``onnx:string``); :data:`TAG_PREFIX`.

So ``np.load(path, allow_pickle=False)`` reads every such file, with exactly the arrays written,
by name (a comment is no entry: ``dict(np.load(path))`` fed to an engine has no extra input, as a
side entry would make); ``arr.view(ml_dtypes.bfloat16)`` restores one of void, and
``np.load(path).zip.getinfo("x.npy").comment`` names its type. :func:`read_npz` gives each tagged
array back as its ONNX type (strings as the object arrays of str, or bytes, that engines take).

Files written before this codec, or by ``np.savez``, carry no tags: raw void, and the unsigned
bits (``u1``, ``u2``) that the checker's findings held, are read as the model's declared type by
:func:`typed_inputs` where its width is the declared ml_dtypes type's; a unicode array as a string
input. A .npy file (:func:`load`) has no tag either.
"""

from __future__ import annotations

import ast
import math
import os
import re
import struct
import time
import zipfile
from collections.abc import Mapping
from functools import cache
from typing import IO, Any

import numpy as np

__all__ = [
    "TAG_PREFIX",
    "decode_source",
    "load",
    "load_npz",
    "not_numpy",
    "onnx_type_of",
    "read_npz",
    "save_npz",
    "storable",
    "typed_inputs",
]

TAG_PREFIX = "onnx:"
"""A zip member's comment ``onnx:<type>`` names the ONNX type of the array it holds."""

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")  # a zip archive's first entry, or an empty archive
_SIZED = re.compile(r"[<>|=]?[a-zA-Z](\d+)")  # a descr NumPy cannot read, as ml_dtypes' '<f1'


@cache
def _ml_types() -> dict[str, np.dtype]:
    """ONNX's name (lower case) of each ml_dtypes type onnx maps a tensor type to, and its dtype."""
    from onnx import TensorProto, helper

    types = {}
    for name, number in TensorProto.DataType.items():
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(number))
        except (KeyError, TypeError, ValueError):
            continue  # UNDEFINED
        if _ml_dtype(dtype):
            types[name.lower()] = dtype
    return types


def _ml_dtype(dtype: np.dtype) -> bool:
    return dtype.type.__module__.startswith("ml_dtypes")


def onnx_type_of(dtype: np.dtype) -> str | None:
    """The tag of an array of ``dtype``: ONNX's type name for ml_dtypes' types and strings, else None.

    None: NumPy's dtype says the type itself (float, int, bool, complex, float16).
    """
    dtype = np.dtype(dtype)
    if dtype.kind in "OUS":
        return "string"
    if _ml_dtype(dtype):
        return next((name for name, known in _ml_types().items() if known == dtype), None)  # one onnx lacks: void
    return None


def _decoder(onnx_type: str) -> tuple[str, Any, str]:
    """How an array tagged ``onnx_type`` is decoded: (method, its argument, the argument's source).

    The one table of :func:`read_npz` (which calls the method) and :func:`decode_source` (which
    writes the call), so that a repro script decodes as the reader does.
    """
    if onnx_type == "string":
        return "astype", object, "object"
    dtype = _ml_types().get(onnx_type)
    if dtype is None:
        raise ValueError(f"unknown ONNX type {onnx_type!r} in its tag {TAG_PREFIX}{onnx_type}")
    return "view", dtype, f"ml_dtypes.{dtype.name}"


def decode_source(expression: str, onnx_type: str | None) -> str:
    """Python source decoding ``expression`` (an array as :func:`save_npz` stores it) into its ONNX type.

    ``ARRAYS['x'].view(ml_dtypes.bfloat16)``, ``ARRAYS['s'].astype(object)``; ``expression`` itself
    for an untagged type (``onnx_type`` None). It needs ``ml_dtypes`` imported for an ml_dtypes type.
    """
    if onnx_type is None:
        return expression
    method, _, argument = _decoder(onnx_type)
    return f"{expression}.{method}({argument})"


def _decoded(name: str, array: np.ndarray, onnx_type: str) -> np.ndarray:
    method, argument, _ = _decoder(onnx_type)
    if onnx_type == "string":
        if array.dtype.kind not in "OUS":
            raise ValueError(f"array {name!r} is tagged {TAG_PREFIX}string but holds {array.dtype}")
    elif array.dtype.kind != "V" or array.dtype.names is not None or array.dtype.itemsize != argument.itemsize:
        width = argument.itemsize
        raise ValueError(f"array {name!r} is tagged {TAG_PREFIX}{onnx_type} but holds {array.dtype}, not |V{width}")
    return getattr(array, method)(argument)


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
    """Every array of an open ``NpzFile``, by name, each tagged one as its ONNX type.

    One of a descr NumPy cannot read (``'<f1'``, as ``np.savez`` writes float8_e5m2) is raw
    void; an untagged one is as stored (see :func:`typed_inputs`). A tag of an unknown type, or
    one the array does not fit, is a ValueError naming the array.
    """
    arrays = {}
    names = set(archive.zip.namelist())
    for name in archive.files:
        member = name if name in names else f"{name}.npy"
        try:
            array = archive[name]
        except ValueError as exc:
            if not _unknown_descr(exc):
                raise
            with archive.zip.open(member) as f:
                array = _read_raw(f)
        comment = archive.zip.getinfo(member).comment.decode("utf8", "replace")
        arrays[name] = _decoded(name, array, comment[len(TAG_PREFIX) :]) if comment.startswith(TAG_PREFIX) else array
    return arrays


def load_npz(path: str | os.PathLike, *, allow_pickle: bool = False) -> dict[str, np.ndarray]:
    """Every array of the .npz file ``path``, by name, as :func:`read_npz` gives them."""
    archive = np.load(path, allow_pickle=allow_pickle)
    if not isinstance(archive, np.lib.npyio.NpzFile):  # np.load reads one .npy array too
        raise ValueError(f"{os.fspath(path)!r} is a .npy file, not an .npz archive of arrays by name")
    with archive:
        return read_npz(archive)


def typed_inputs(graph: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Return ``inputs`` with each untagged array read as its input's declared type, where it is that type's bits.

    Raw void (``|V2``, ``|V1``: what ``np.save`` writes) of the width of an ml_dtypes type that
    the input declares (bfloat16, float8, int4, ...) is that type's bytes (never unsigned
    integers: a ``uint16`` array given for a bfloat16 input is refused by the feed checks); a NumPy string array (``U``,
    ``S``) for a string input is the object array engines take. Any other array is left to the
    feed checks, which name a mismatch.
    """
    import onnx

    declared = {i.name: i.type for i in graph.input}
    typed = dict(inputs)
    for name, value in inputs.items():
        t = declared.get(name)
        if t is None or not isinstance(value, np.ndarray) or value.dtype.names is not None:
            continue
        if t.WhichOneof("value") != "tensor_type" or not t.tensor_type.elem_type:
            continue
        try:
            want = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type))
        except (KeyError, TypeError, ValueError):
            continue  # the feed checks name the element type
        bits = value.dtype.kind == "V"  # never unsigned integers: a uint16 feed for bfloat16 is an error
        if _ml_dtype(want) and bits and want.itemsize == value.dtype.itemsize:
            typed[name] = value.view(want)
        elif want.kind == "O" and value.dtype.kind in "US":
            typed[name] = value.astype(object)
    return typed


def storable(name: str, value: Any, *, what: str = "output") -> np.ndarray:
    """Return one array as :func:`save_npz` stores it, an array ``np.load(..., allow_pickle=False)`` reads back.

    A string tensor (an object array of str, or of bytes) becomes a NumPy unicode (or bytes)
    array; an ml_dtypes type raw void of its width (``|V2``, ``|V1``: what ``np.save`` writes for
    most of them, and what it cannot read back for float8_e5m2's ``'<f1'``). A sequence, map,
    empty optional or a string a NumPy string array cannot hold exactly (one ending in NUL) is
    a ValueError naming the ``what`` (output, input) ``name``.
    """
    if isinstance(value, (list, tuple)):  # np.asarray would stack it, or fail on a ragged one
        raise ValueError(f"{what} {name!r} is a sequence of {len(value)} tensors, and an .npz file holds tensors only")
    if value is None:
        raise ValueError(f"{what} {name!r} is an empty optional (None), and an .npz file holds tensors only")
    if isinstance(value, dict):
        raise ValueError(f"{what} {name!r} is a map, and an .npz file holds tensors only")
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
        raise ValueError(f"{what} {name!r} is an object array of {shown}, which only a pickle could store")
    # NumPy's fixed-width strings drop trailing NULs: refuse what would not read back as it was.
    if any(item.endswith(nul) for item in array.flat):
        raise ValueError(f"{what} {name!r} has a string ending in NUL, which a NumPy string array cannot hold")
    return fixed


def save_npz(
    path: str | os.PathLike, arrays: Mapping[str, Any], *, what: str = "output", allow_pickle: bool = False
) -> None:
    """Write ``arrays`` by name to the .npz file ``path`` (exactly that path), in the one encoding.

    Each array as :func:`storable` stores it, with its ONNX type as its member's comment where
    NumPy's dtype does not say it. What ``np.savez(path, **arrays)`` writes otherwise, without its
    own parameters taking arrays by name (an array named 'file' was a TypeError, one named
    'allow_pickle' was dropped). Every array is encoded before the file is opened: one that
    cannot be is a ValueError naming it, and nothing is written; with ``allow_pickle`` an object
    array :func:`storable` refuses (a string ending in NUL) is pickled instead, a file that
    ``np.load`` then reads with ``allow_pickle=True`` only.
    """
    stored = {}
    for name, value in arrays.items():
        try:
            array = storable(name, value, what=what)
        except ValueError:
            if not (allow_pickle and isinstance(value, np.ndarray) and value.dtype.kind == "O"):
                raise
            array = value
        tag = onnx_type_of(np.asarray(value).dtype)
        stored[name] = (array, tag)
    now = time.localtime()[:6]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, (array, tag) in stored.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=now)
            info.compress_type = zipfile.ZIP_STORED
            if tag is not None:
                info.comment = (TAG_PREFIX + tag).encode()
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=allow_pickle)
