"""Tensors stored as external data: where they are, how many bytes they take, and whether a
model's were loaded; the checks :mod:`._model_check` runs on them (step 4 of its list)."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator

import numpy as np
import onnx

from ..errors import ModelInputError, one_line
from ._graph import walk

__all__ = ["all_tensors", "check_external", "external_data_loaded", "nbytes"]


def external_data_loaded(model: onnx.ModelProto, *, from_bytes: bool = False) -> None:
    """ModelInputError for a tensor whose external data was not loaded (``onnx.load(path,
    load_external_data=False)``), which onnx.reference would refuse with a bare RuntimeError. Run
    whether or not the model is checked: an evaluator cannot do without the data.

    ``from_bytes``: the model was given as serialized bytes, which say where the data file is
    relative to a folder they do not carry; the message asks for the path instead."""
    for tensor in all_tensors(model):
        if onnx.external_data_helper.uses_external_data(tensor):
            location = onnx.external_data_helper.ExternalDataInfo(tensor).location
            if from_bytes:
                raise ModelInputError(
                    f"tensor {tensor.name!r} is stored as external data ({location!r}, a path relative to the "
                    "model's folder), and a model given as bytes does not say which folder that is: pass the "
                    "path of the .onnx file instead (its external data is read beside it), or an onnx.ModelProto "
                    "read with onnx.load(path)",
                    input=tensor.name,
                    value=location,
                )
            raise ModelInputError(
                f"tensor {tensor.name!r} is stored as external data ({location!r}) that was not loaded (the model "
                "was read with load_external_data=False): load it with onnx.load(path) (load_external_data=True, "
                "the default), or call onnx.external_data_helper.load_external_data_for_model(model, base_dir) "
                "with the folder of the .onnx file, or pass the model's path instead",
                input=tensor.name,
                value=location,
            )


def all_tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every tensor of ``model``, in :func:`._graph.walk`'s order: each graph's initializers
    (main graph and subgraphs) and each node's tensor attributes (functions' nodes included)."""
    for body, _, node in walk(model):
        if node is None:
            if isinstance(body.proto, onnx.GraphProto):
                yield from body.proto.initializer
            continue
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors


def nbytes(tensor: onnx.TensorProto) -> int | None:
    """The bytes of a tensor's data, None for a type of no fixed size (strings) or unknown."""
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type))
    except (KeyError, ValueError, TypeError):
        return None
    if dtype == object:  # noqa: E721 - NumPy dtype equality (dtype("O") == object), not a type comparison
        return None
    count = math.prod(tensor.dims)
    if tensor.data_type in _PACKED:  # 4-bit and 2-bit types, two or four to a byte
        return -(-count * _PACKED[tensor.data_type] // 8)
    return count * dtype.itemsize


_PACKED = {
    getattr(onnx.TensorProto, name): bits
    for name, bits in (("INT4", 4), ("UINT4", 4), ("FLOAT4E2M1", 4), ("INT2", 2), ("UINT2", 2))
    if hasattr(onnx.TensorProto, name)
}


def check_external(tensor: onnx.TensorProto, base_dir: str | None) -> None:
    """A tensor's external data: a relative location inside ``base_dir``, within the file's
    size, as long as its dims and type say."""
    what = f"tensor {tensor.name!r}"

    def refuse(problem: str) -> None:
        raise ModelInputError(f"{what} is stored as external data {problem}", input=tensor.name)

    try:
        info = onnx.external_data_helper.ExternalDataInfo(tensor)
    except ValueError as exc:
        refuse(f"with an invalid entry: {one_line(exc)}")
    location = info.location
    if not location:
        refuse("with no location")
    if "\x00" in location:  # os.path raises ValueError for it
        refuse(f"at {location!r}, a path with a NUL character")
    if os.path.isabs(location) or os.path.splitdrive(location)[0] or location.startswith(("/", "\\")):
        refuse(f"at {location!r}, an absolute path: it must be a path relative to the model's folder")
    if base_dir is None:
        return
    root = os.path.realpath(base_dir)
    full = os.path.realpath(os.path.join(root, location))
    if os.path.commonpath([root, full]) != root:
        refuse(f"at {location!r}, which points outside the model's folder {base_dir!r}")
    if not os.path.exists(full):  # refused even where no weights are read (shapes): the model is incomplete
        refuse(f"in {location!r}, which does not exist in the model's folder {root!r}")
    if not os.path.isfile(full):
        refuse(f"in {location!r}, which is not a regular file")
    size = os.path.getsize(full)
    offset = info.offset or 0
    if offset > size:
        refuse(f"at offset {offset} of {location!r}, a file of {size} bytes")
    length = info.length if info.length is not None else size - offset
    if offset + length > size:
        refuse(f"at offset {offset}, length {length} of {location!r}, a file of {size} bytes")
    expected = nbytes(tensor)
    if expected is not None and length != expected:
        dims = tuple(tensor.dims)
        refuse(f"of {length} bytes in {location!r}, but its dims {dims} and type take {expected} bytes")
