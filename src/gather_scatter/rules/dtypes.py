"""The operators' type rules: functions of dtypes (and, for the output's size, of shapes), never of data.

Reading a user-given dtype (:func:`as_dtype`), checking the inputs' dtypes against an operator
version (:func:`output_dtype`), the reductions a dtype allows (:func:`check_reduction_type`)
and the size an output may take (:func:`check_output_bytes`). Like the shape rules in
:mod:`gather_scatter.rules.shapes`, they serve shape inference and the kernels' pre-flight
check alike, and raise only for what the known facts prove.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from ..errors import DTypeError, OutputTooLargeError
from ..resources import memory as _memory
from .dims import Shape, _known, fmt_shape, size
from .versions import OpVersion, Reduction, onnx_type_name


def as_dtype(spec: OpVersion, input: str, dtype: Any) -> np.dtype:
    """``dtype`` as a NumPy dtype: a NumPy dtype or anything ``np.dtype`` reads (``'float32'``,
    ``np.int64``, ``object`` for strings), an ONNX element type number
    (``onnx.TensorProto.FLOAT == 1``) or its ``'tensor(float)'`` name; DTypeError otherwise.
    """
    if isinstance(dtype, np.dtype):
        return dtype
    facts = dict(input=input, value=dtype)
    forms = (
        "a NumPy dtype or its name ('float32'), an ONNX element type number (onnx.TensorProto.FLOAT) "
        "or its type string ('tensor(float)')"
    )
    if isinstance(dtype, str) and dtype.startswith("tensor(") and dtype.endswith(")"):
        from onnx import TensorProto

        try:
            dtype = TensorProto.DataType.Value(dtype[len("tensor(") : -1].upper())
        except ValueError:
            raise spec.error(
                DTypeError, f"{input} dtype {dtype!r} names no ONNX element type (pass {forms})", **facts
            ) from None
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, (bool, np.bool_)):
        from onnx import TensorProto, helper

        try:
            return np.dtype(helper.tensor_dtype_to_np_dtype(int(dtype)))
        except (KeyError, ValueError, TypeError):
            last = max(TensorProto.DataType.values())
            raise spec.error(
                DTypeError,
                f"{input} dtype {int(dtype)} is not an ONNX element type number (those "
                f"of onnx.TensorProto run from 1, FLOAT, to {last}, "
                f"{TensorProto.DataType.Name(last)})",
                **facts,
            ) from None
    try:
        return np.dtype(dtype)
    except (TypeError, ValueError):
        raise spec.error(DTypeError, f"{input} dtype {dtype!r} is not a dtype (pass {forms})", **facts) from None


def output_dtype(
    spec: OpVersion,
    data: Any,
    indices: Any,
    updates: Any = None,
    *,
    names: tuple[str, ...] = ("data", "indices", "updates"),
) -> Any:
    """Check each known dtype against ``spec``; the output has ``data``'s dtype.

    Dtypes are read by :func:`as_dtype`. ``updates`` must have data's element type. Unknown
    dtypes (None) are skipped. ``names`` are the three inputs' names in messages
    (TensorScatter: past_cache, write_indices, update).
    """
    data, indices, updates = (
        None if d is None else as_dtype(spec, n, d) for n, d in zip(names, (data, indices, updates), strict=False)
    )
    for input, dtype in zip(names, (data, indices, updates), strict=False):
        if dtype is not None:
            spec.check_dtype(input, dtype)
    if data is not None and updates is not None and onnx_type_name(data) != onnx_type_name(updates):
        raise spec.error(
            DTypeError,
            f"{names[2]} has type tensor({onnx_type_name(updates)}) but {names[0]} has "
            f"tensor({onnx_type_name(data)}); they must match",
            input=names[2],
            value=onnx_type_name(updates),
        )
    return data


def check_reduction_type(spec: OpVersion, reduction: Reduction, dtype) -> None:
    """DTypeError for reductions the spec's loop cannot apply to ``dtype``."""
    kind = onnx_type_name(dtype)
    if (kind == "string" and reduction is Reduction.MUL) or (
        kind in ("complex64", "complex128") and reduction in (Reduction.MAX, Reduction.MIN)
    ):
        why = "strings cannot be multiplied" if kind == "string" else "complex numbers have no order"
        raise spec.error(
            DTypeError,
            f"reduction {reduction.value!r} is not defined for tensor({kind}) ({why})",
            input="data",
            value=kind,
        )


def check_output_bytes(spec: OpVersion, shape: Shape, dtype: Any, *, limit: int | None = None) -> None:
    """OutputTooLargeError unless an array of ``shape`` and ``dtype`` fits in ``limit`` bytes.

    Always refused: more bytes than int64 offsets address (no such array can exist). ``limit``
    None means the run-time memory limit (``gather_scatter.set_memory_limit``). Shapes with an
    unknown dim pass; an unknown dtype counts one byte per element. Python ints, so the product
    of huge dims cannot overflow here.
    """
    if shape is None or not all(_known(d) for d in shape):
        return
    nbytes = size(cast(tuple[int, ...], shape)) * (np.dtype(dtype).itemsize if dtype is not None else 1)
    bound: int | None
    if nbytes > _memory.INT64_MAX:
        bound, why = _memory.INT64_MAX, "the most that int64 byte offsets can address"
    elif (bound := limit if limit is not None else _memory.exceeded(nbytes)) is not None and nbytes > bound:
        why = "see gather_scatter.set_memory_limit"
    else:
        return
    shown = f" and dtype {np.dtype(dtype)}" if dtype is not None else ""
    raise spec.error(
        OutputTooLargeError,
        f"output of shape {fmt_shape(shape)}{shown} would take {nbytes} bytes, "
        f"more than {'the memory limit of ' if bound != _memory.INT64_MAX else ''}{bound} bytes ({why})",
        input="output",
        value=nbytes,
        valid_range=(0, bound),
    )
