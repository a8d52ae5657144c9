"""Input checks: inputs as arrays, index bounds with the one out-of-bounds message, index
tuples -> linear offsets, and the checks on a caller's ``out`` buffer.

Checks run over the whole ``indices`` array at once; the error names the first bad position
in row-major order. Nothing here writes to a caller's array.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from typing import Any

import numpy as np

from ..errors import ArityError, DTypeError, IndexOutOfBoundsError, InvalidAttributeError, ShapeError
from .versions import OpVersion


def as_array(spec: OpVersion, input: str, value: Any, dtype: Any = None) -> np.ndarray:
    """``value`` as a plain ndarray, by one rule for every kernel and input.

    - An ndarray is used as it is, without a copy; a subclass (``np.matrix``, ...) as a view of
      its plain array; a masked array is refused (DTypeError): a kernel cannot honour a mask.
      An object array is tensor(string): any item that is not ``str`` or ``bytes`` is refused
      (DTypeError at the first one), so no string op ever computes on numbers.
    - A NumPy scalar keeps its dtype, which is then checked strictly like an array's.
    - A list, tuple or Python scalar has no dtype of its own: with ``dtype`` (the one the op
      needs: int64 for indices, data's for updates) it takes that dtype if every value fits
      exactly, else DTypeError naming the first value that does not (an int too big for any
      NumPy type included); without, NumPy's default. Strings mixed with other values are
      refused, not turned into strings.
    - None is an input left out: ArityError naming it (not an object array of one None).
    """
    if isinstance(value, np.ndarray):
        if type(value) is not np.ndarray:
            _refuse_masked(spec, input, value)
            value = value.view(np.ndarray)
        if value.dtype.kind == "O":
            _only_strings(spec, input, value)
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    if value is None:  # an input left out, not an object array holding None
        raise spec.error(
            ArityError,
            f"{input} is None, but it is a required input: pass an array",
            input=input,
            value=None,
        )
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise spec.error(
            DTypeError,
            f"{input} cannot be read as an array ({exc})",
            input=input,
        ) from None
    if array.dtype.kind in "OUS":  # the items as given: NumPy makes ['a', 1] into ['a', '1']
        items = array if array.dtype.kind == "O" else _items(value, array)
        if dtype is not None and items.size and all(map(_is_number, items.flat)):  # ints beyond 64 bits
            return _exactly(spec, input, items, np.dtype(dtype), items)
        _only_strings(spec, input, items, listed=True)
        return array
    if dtype is None or array.dtype == dtype:
        return array
    dtype = np.dtype(dtype)
    numbers = (array.dtype.kind in "iuf" and dtype.kind in "iufcV") or array.dtype.kind == dtype.kind == "c"
    if not numbers:  # bools for ints, ...: the type check names it
        return array
    return _exactly(spec, input, array, dtype, value)


def _items(value: Any, array: np.ndarray) -> np.ndarray:
    """The items of a list as given (an object array of ``array``'s shape), not as NumPy converted them."""
    try:
        items = np.array(value, dtype=object)
    except (ValueError, TypeError):
        return array.astype(object)
    return items if items.shape == array.shape else array.astype(object)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, complex, np.number)) and not isinstance(v, (bool, np.bool_))


# Object arrays up to this many items are checked by one str.join (its copy is transient and small).
_JOINED_ITEMS = 1 << 16


def _only_strings(spec: OpVersion, input: str, array: np.ndarray, listed: bool = False) -> None:
    """DTypeError at the first item of the object array ``array`` (from a list if ``listed``)
    that is not ``str`` or ``bytes``: an object array stands for tensor(string).
    """
    # Each item once: a broadcast axis repeats its first item (and the first bad item is there).
    first = (*(slice(0, 1) if st == 0 else slice(None) for st in array.strides), ...)
    array = array[first]  # 0-d stays an array
    if array.size <= _JOINED_ITEMS:
        # str.join takes only str (subclasses too), checked in its first pass before it copies:
        # 400 short strings ~4.5 us, where the set of their types costs ~12 (a hosted Session's
        # string rows, every run). A TypeError (bytes among them, or an item to refuse) leaves
        # the judgement to the set below.
        with contextlib.suppress(TypeError):
            "".join(array.ravel().tolist())
            return
    if all(issubclass(t, (str, bytes)) for t in set(map(type, array.flat))):
        return
    position, item = next((p, v) for p, v in np.ndenumerate(array) if not isinstance(v, (str, bytes)))
    where = f"[{', '.join(map(str, position))}]" if position else ""
    shown = repr(item) if len(repr(item)) <= 60 else repr(item)[:57] + "..."
    if not listed:
        what = "an object array"
        hint = f"; for numbers pass an array of a numeric dtype ({input}.astype(...))" if _is_number(item) else ""
    elif any(isinstance(v, (str, bytes)) for v in array.flat):
        what, hint = "a list mixing strings with other values", ""
    else:
        what = "a list that NumPy can only hold as objects"
        hint = " (no NumPy number type holds this value)" if _is_number(item) else ""
    raise spec.error(
        DTypeError,
        f"{input}{where} = {shown} is {_a(type(item).__name__)}, but {input} is {what}, which stands "
        f"for tensor(string) and may hold only str or bytes{hint}",
        input=input,
        position=position,
        value=type(item).__name__,
    )


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _refuse_masked(spec: OpVersion, input: str, value: np.ndarray) -> None:
    if isinstance(value, np.ma.MaskedArray):
        raise spec.error(
            DTypeError,
            f"{input} is a masked array, and masks are not supported (the kernels would "
            f"ignore them); pass {input}.filled(fill_value) or {input}.data",
            input=input,
            value="MaskedArray",
        )


def _exactly(spec: OpVersion, input: str, array: np.ndarray, dtype: np.dtype, value: Any) -> np.ndarray:
    """``array`` (from the list or Python scalar ``value``) converted to ``dtype``, or
    DTypeError at the first value the conversion would change, shown as given.
    """
    if array.dtype.kind == "O":  # Python numbers, some beyond any NumPy type: one by one
        same = np.array([_fits(v, dtype) for v in array.flat], dtype=bool).reshape(array.shape)
        converted = array.astype(dtype) if same.all() else None
    else:
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                converted = array.astype(dtype)
                same = converted.astype(array.dtype) == array
            if array.dtype.kind in "fc":  # NaN converts to NaN
                same |= np.isnan(array) & np.isnan(converted.astype(array.dtype))
        except (ValueError, TypeError, OverflowError):
            same = np.zeros(array.shape, dtype=bool)
    if same.all():
        assert converted is not None  # same.all() only where the conversion ran
        return converted
    position = tuple(int(i) for i in np.unravel_index(int(np.argmin(same)), array.shape))
    value = _items(value, array)[position]  # as given: NumPy makes [-1, 2**63] floats
    value = value.item() if isinstance(value, np.generic) else value
    where = f"[{', '.join(map(str, position))}]" if position else ""
    raise spec.error(
        DTypeError,
        f"{input}{where} = {value!r} does not fit exactly in {dtype}, the type {input} must have "
        f"here (a list takes that type when every value fits; pass an array to choose another)",
        input=input,
        position=position,
        value=value,
    )


def _fits(v: Any, dtype: np.dtype) -> bool:
    """Whether the Python number ``v`` converts to ``dtype`` unchanged (compared in Python,
    exactly: ``2**70 + 1`` is not the float ``2**70``).
    """
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = np.array(v).astype(dtype) if isinstance(v, np.number) else dtype.type(v)
            back = c.item() if hasattr(c, "item") else c
            return bool(back == v or (back != back and v != v))
    except (ValueError, TypeError, OverflowError):
        return False


def native_indices(indices: np.ndarray) -> np.ndarray:
    """``indices`` in native byte order (a copy only when it is byte-swapped)."""
    if indices.dtype.byteorder not in "=|":
        return indices.astype(indices.dtype.newbyteorder("="))
    return indices


def check_bounds(spec: OpVersion, indices: np.ndarray, sizes: Any, axes: Any) -> None:
    """Raise IndexOutOfBoundsError unless every value is in ``[-s, s-1]`` for its data axis.

    ``sizes``/``axes`` are scalars (Gather: one axis for every value) or 1-D of length
    ``indices.shape[-1]`` (GatherND/ScatterND: component ``j`` of each tuple indexes axis
    ``axes[j]`` of size ``sizes[j]``).
    """
    if indices.size == 0:
        return
    # Fast path in Python ints (column by column: rows.min(axis=0) on a narrow (N, k) array
    # is ~20x slower); NumPy scalar comparisons would cost more than the reductions.
    if not isinstance(sizes, (tuple, list, np.ndarray)):
        s = int(sizes)
        if -s <= int(indices.min()) and int(indices.max()) < s:
            return
    else:
        rows = indices.reshape(-1, len(sizes))
        if all(-int(s) <= int(rows[:, j].min()) and int(rows[:, j].max()) < int(s) for j, s in enumerate(sizes)):
            return
    sizes = np.asarray(sizes, dtype=np.int64)
    bad = (indices < -sizes) | (indices >= sizes)
    position = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), indices.shape))
    out_of_bounds(spec, position, int(indices[position]), sizes, axes)


def out_of_bounds(spec: OpVersion, position: tuple[int, ...], value: int, sizes: Any, axes: Any) -> None:
    """Raise the one IndexOutOfBoundsError for ``indices[position] = value`` (``sizes``/``axes``
    as in :func:`check_bounds`); every backend that finds a bad index reports it here.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    size = int(sizes[position[-1]] if sizes.ndim else sizes)
    axis = int(np.asarray(axes)[position[-1]] if sizes.ndim else axes)
    where = f"indices[{', '.join(map(str, position))}]" if position else "indices (a scalar)"
    if size:
        valid_range, shown = (-size, size - 1), f"valid range [{-size}, {size - 1}]"
    else:
        valid_range, shown = None, "the axis is empty: no index is valid"
    raise spec.error(
        IndexOutOfBoundsError,
        f"{where} = {value} is out of bounds for data axis {axis} of size {size} ({shown})",
        input="indices",
        position=position,
        value=value,
        valid_range=valid_range,
        axis=axis,
    )


def linear_offsets(rows: np.ndarray, dims: tuple[int, ...], check: bool = True) -> np.ndarray | None:
    """Row-major offsets (int64, shape ``(N,)``) of index tuples ``rows`` (shape ``(N, k)``)
    into a block of shape ``dims``, negatives counted from the end; None if ``check`` and a
    component lies outside ``[-s, s-1]`` (then :func:`check_bounds` names it).

    Loops over the k components of a tuple, never over the tuples. One pass per operation:
    ``v = i + (s & (i >> 63))`` maps ``[-s, s-1]`` onto ``[0, s-1]`` and anything else
    outside it, so one unsigned max checks both bounds.
    """
    n, k = rows.shape
    if k and n * k <= 4096:  # few tuples: whole-array steps, a third of the NumPy calls
        sizes = np.array(dims, dtype=np.int64)
        rows = rows.astype(np.int64, copy=False)
        v = np.right_shift(rows, 63)
        v &= sizes
        v += rows
        if check and not (v.view(np.uint64) < sizes.view(np.uint64)).all():
            return None
        strides = [1] * k
        for j in range(k - 1, 0, -1):
            strides[j - 1] = strides[j] * dims[j]
        return v @ np.array(strides, dtype=np.int64)
    offsets = None
    strides = [math.prod(dims[j + 1 :]) for j in range(k)]
    for j in range(k):
        column = rows[:, j]
        # One read-only pass: an unsigned max below s proves the column is in [0, s-1], the
        # common case, which then needs no mapping and no copy.
        if column.size and int(column.view(f"u{column.itemsize}").max()) < dims[j]:
            v = column
        else:
            column = column.astype(np.int64, copy=False)
            v = np.right_shift(column, 63)
            v &= dims[j]
            v += column
            if check and v.size and int(v.view(np.uint64).max()) >= dims[j]:
                return None
        if offsets is None:
            offsets = np.multiply(v, strides[j], dtype=np.int64)
        elif strides[j] == 1:
            offsets += v
        else:
            offsets += np.multiply(v, strides[j], dtype=np.int64)
    return offsets if offsets is not None else np.zeros(rows.shape[0], dtype=np.int64)


def check_out(spec: OpVersion, out: Any, shape: tuple[int, ...], dtype: np.dtype, inputs: dict) -> np.ndarray:
    """``out`` as a plain ndarray view if it can take the result: an ndarray of exactly
    ``shape`` and ``dtype``, writeable, no two elements sharing memory, and sharing none with
    the arrays in ``inputs`` (name -> array). Any layout (strided views, Fortran order,
    negative strides) is fine: kernels write through it.

    Raises DTypeError (not an array, masked, wrong dtype), ShapeError (wrong shape) or
    InvalidAttributeError (read-only, broadcast, overlapping an input).
    """
    if not isinstance(out, np.ndarray):
        raise spec.error(DTypeError, f"out must be a numpy.ndarray, got {type(out).__name__}", input="out")
    _refuse_masked(spec, "out", out)
    check_out_type(spec, out.dtype, out.shape, dtype, shape)
    refuse_broadcast(spec, out)
    # After the broadcast check: np.broadcast_to views are read-only too, and "read-only" would
    # send the caller to flip a flag rather than pass an array of its own.
    if not out.flags.writeable:
        raise spec.error(InvalidAttributeError, "out is read-only", input="out")
    refuse_overlap(spec, out, inputs)
    return out if type(out) is np.ndarray else out.view(np.ndarray)


# The memory rules for out=, one for every library: other libraries' arrays come here as
# ndarrays over their addresses (backends/torch.py), which these functions never read.


def refuse_broadcast(spec: OpVersion, out: np.ndarray) -> None:
    """InvalidAttributeError if two elements of ``out`` are one (a stride of 0 on a dim of size > 1)."""
    if out.size and any(stride == 0 and size > 1 for stride, size in zip(out.strides, out.shape, strict=False)):
        raise spec.error(
            InvalidAttributeError,
            f"out is a broadcast view (strides {out.strides}: several elements share memory), so "
            "it cannot hold a result; pass an array of its own",
            input="out",
        )


def refuse_overlap(spec: OpVersion, out: np.ndarray, inputs: dict) -> None:
    """InvalidAttributeError if ``out`` may share an element with an array of ``inputs``
    (name -> array); disjoint parts of one buffer are fine. A scatter's ``data`` that is
    exactly ``out``'s memory (:func:`same_memory`) is not in ``inputs``: that is in place.
    """
    for name, array in inputs.items():
        if _overlaps(out, array):
            raise spec.error(
                InvalidAttributeError,
                f"out shares memory with {name}; the result would overwrite its own input (pass a separate array)",
                input="out",
            )


def check_out_type(spec: OpVersion, out_dtype: np.dtype, out_shape: tuple, dtype: np.dtype, shape: tuple) -> None:
    """DTypeError/ShapeError unless an ``out`` of ``out_dtype`` and ``out_shape`` can hold a
    result of ``dtype`` and ``shape`` (the dtypes as NumPy's, whatever the array library).
    """
    if out_dtype != dtype:
        why = ""
        if dtype == object and out_dtype.kind in "US":  # noqa: E721 - NumPy dtype equality (dtype("O") == object), not a type comparison
            why = (
                " (string results are object arrays of str: a fixed-width string array would truncate "
                "them; pass an object array, e.g. out.astype(object))"
            )
        raise spec.error(
            DTypeError,
            f"out has dtype {out_dtype} but the result has dtype {np.dtype(dtype)}{why}",
            input="out",
            value=str(out_dtype),
        )
    if tuple(out_shape) != tuple(shape):
        raise spec.error(
            ShapeError,
            f"out has shape {tuple(out_shape)} but the result has shape {tuple(shape)}",
            input="out",
            value=tuple(out_shape),
        )


def same_memory(out: Any, data: Any) -> bool:
    """True when ``out`` is ``data``'s own memory, element for element: two ndarrays (or views
    of one, made separately: ``c[:, 3]`` twice) with the same first byte, shape, strides and
    dtype. A scatter with such an ``out`` runs in place; any other overlap is refused.
    """
    if out is data:
        return out is not None
    if not (isinstance(out, np.ndarray) and isinstance(data, np.ndarray)):
        return False
    return (
        out.dtype == data.dtype
        and out.shape == data.shape
        and out.strides == data.strides
        and out.__array_interface__["data"][0] == data.__array_interface__["data"][0]
    )


def _overlaps(a: np.ndarray, b: np.ndarray) -> bool:
    if not np.may_share_memory(a, b):  # bounds only: cheap
        return False
    try:
        # numpy's stubs allow only -1 and 0 for max_work; its docs, any positive bound
        return bool(np.shares_memory(a, b, max_work=1 << 16))  # type: ignore[arg-type]
    except np.exceptions.TooHardError:  # can't prove they are disjoint
        return True
