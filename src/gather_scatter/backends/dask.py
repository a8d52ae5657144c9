"""dask arrays: the operators as lazy task graphs.

For tables larger than memory (zarr on disk) or spread over a ``dask.distributed`` cluster.

Every operator is one of two plans over the *items* it moves — an item is an index tuple into
the first ``m`` axes of data (a row for Gather after moving its axis first, a tuple for
GatherND/ScatterND, an element for GatherElements/ScatterElements):

- **gather**: the items are grouped by the data block that holds them (vectorized, on the
  client: ``searchsorted`` on the chunk bounds, one stable sort); one task per touched block
  reads it once and takes its items; one task per output block puts the taken items back in
  the order of ``indices``. A block no item touches is never read.
- **scatter**: the items (and their updates) are routed to the block that owns their target;
  one task per touched block applies them there with the NumPy kernel in row-major order of
  ``indices`` — a target lives in one block, so the result is bitwise the in-memory one,
  duplicates and reductions included. Untouched blocks are data's own.

The graph has a task per touched block and per output block, never per index. With NumPy
``indices`` the rules of ``_shapes``/``_validate`` run at the call, bounds included, so a bad
index raises the in-memory error before any task exists. With dask ``indices`` the grouping
needs their values, so the plan is made per chunk of ``indices`` (tasks: index chunks x data
blocks); each index chunk is checked in its own task and a bad index raises the same error
(the position counted in the whole ``indices``) at compute.

``out=``: any array that takes ``out[region] = block`` (a zarr array, an HDF5 dataset, a NumPy
memmap) is written at the call and returned. An ``out`` with a unit of writing (a zarr chunk or
shard, an HDF5 chunk) is written in whole units, each by one task: a store rewrites the whole
unit, so two tasks writing parts of one would each read it, change their part and write it
back, and one part would be lost. A scatter whose ``out`` is the very array that ``data`` was
read from (``da.from_zarr(z)`` ... ``out=z``) writes only the units that change, each after
every block of ``data`` that overlaps it was read. A read-only ``out`` (a NumPy array or memmap
that is not writeable, a zarr array opened with ``mode="r"``, a read-only icechunk session's) is
the NumPy path's "out is read-only" error at the call, before any task.

None of these stores has transactions: a run killed part way leaves the units written so far
changed and the others not. An array of an icechunk writable session takes the writes into the
session, where they appear at its ``commit`` (``_dask_icechunk``: on ``dask.distributed`` through
forks of the session, merged back).
"""

from __future__ import annotations

import math
from typing import Any

import dask.array as da
import numpy as np

from ..errors import DTypeError, InvalidAttributeError, ShapeError
from ..rules import dims as _dims
from ..rules import dtypes as _dtypes
from ..rules import shapes as _shapes
from ..rules.validate import as_array, check_bounds, refuse_broadcast
from ..rules.versions import Reduction
from . import _dask_icechunk
from . import _dask_plans as plans
from ._library import foreign, library_name


class DaskBackend:
    """The operators on a dask ``data``; the other inputs NumPy (or lists) or dask arrays."""

    def __init__(self, spec, xp, first, first_name):
        self.spec, self.first_name = spec, first_name
        self.known(first_name, first)

    def known(self, name: str, array: da.Array) -> None:
        """Raise ShapeError for a dask array whose chunk sizes are unknown (NaN, e.g. after masking).

        The plans place items by chunk bounds.
        """
        if any(math.isnan(c) for chunks in array.chunks for c in chunks):
            spec = self.spec
            raise spec.error(
                ShapeError,
                f"{name} has unknown chunk sizes (shape {array.shape}); call {name}.compute_chunk_sizes() first",
                input=name,
                value=array.shape,
            )

    # ---- inputs -------------------------------------------------------------------------

    def input(self, name: str, value: Any, dtype: Any) -> Any:
        """``value`` as a NumPy array (NumPy's rules of ``as_array``) or a dask array."""
        if isinstance(value, da.Array):
            self.known(name, value)
            return value
        if foreign(value):
            spec = self.spec
            raise spec.error(
                DTypeError,
                f"{name} is a {library_name(value)} but {self.first_name} is a dask.array.Array; pass "
                f"NumPy or dask arrays",
                input=name,
                value=library_name(value),
            )
        return as_array(self.spec, name, value, dtype)

    def checked(self, indices: Any, sizes: Any, axes: Any) -> Any:
        """Return ``indices`` checked and made non-negative int64.

        NumPy ``indices`` are checked now (the in-memory error); dask ``indices`` are checked
        chunk by chunk at compute (see :func:`plans.checked_chunk`).
        """
        if isinstance(indices, da.Array):
            if isinstance(sizes, tuple):  # a tuple's components in one chunk: component j is axis axes[j]
                indices = indices.rechunk({indices.ndim - 1: -1})
            return da.map_blocks(
                plans.checked_chunk,
                indices,
                dtype=np.int64,
                spec_key=plans.registry_key(self.spec),
                sizes=sizes,
                axes=axes,
            )
        check_bounds(self.spec, indices, sizes, axes)
        return plans.nonnegative(indices, sizes)

    def finish(self, result: da.Array, out: Any, inputs: dict, rows: Any = None) -> Any:
        """Return ``result``, or ``out`` with ``result`` stored into it in whole units of writing.

        ``rows``: the items a scatter changes, None for a gather. ``out`` may be the array a
        scatter's data was read from (then in place: with NumPy ``rows`` only the units that
        hold one are written, each after the blocks of data that overlap it were read); any
        other input read from ``out`` is refused, as its blocks could be overwritten before
        they are read; so is an ``out`` that cannot be written, before any task.
        """
        if out is None:
            return result
        spec = self.spec
        if not hasattr(out, "__setitem__") or tuple(getattr(out, "shape", ())) != result.shape:
            raise spec.error(
                ShapeError,
                f"out must be a writable array of shape {result.shape} (a zarr array, an HDF5 dataset, "
                f"a NumPy memmap), got {library_name(out)} of shape {getattr(out, 'shape', None)}",
                input="out",
                value=getattr(out, "shape", None),
            )
        if np.dtype(out.dtype) != result.dtype:
            raise spec.error(
                DTypeError,
                f"out has dtype {out.dtype} but the result has dtype {result.dtype}",
                input="out",
                value=str(out.dtype),
            )
        if isinstance(out, np.ndarray):  # the NumPy path's order: a broadcast view is read-only too
            refuse_broadcast(spec, out)
        why = _read_only(out)
        if why is not None:
            raise spec.error(
                InvalidAttributeError,
                f"out is read-only ({why})",
                input="out",
            )
        in_place = spec.op_type.startswith("Scatter") and _read_from(inputs["data"], out)
        for name, array in inputs.items():
            if isinstance(array, da.Array) and not (in_place and name == "data") and _mentions(array, out):
                raise spec.error(
                    InvalidAttributeError,
                    f"out is an array that {name} is read from; the result would overwrite its own "
                    "input (pass a separate array)",
                    input="out",
                )
        unit = _write_unit(out, result.ndim)
        if in_place and isinstance(rows, np.ndarray):  # only the units that change
            _dask_icechunk.store(
                spec, result if unit is None else result.rechunk(unit), out, lambda result: _touched(result, rows)
            )
        else:
            _dask_icechunk.store(spec, result if unit is None else _aligned(result, unit), out, lambda result: None)
        return out

    # ---- the operators ------------------------------------------------------------------

    def gather(self, data, indices, axis=0, out=None):
        """Return Gather of ``data`` at ``indices`` along ``axis``, as a lazy dask array.

        As :func:`gather_scatter.gather`, with the NumPy kernel's shapes, types and errors. NumPy
        ``indices`` are checked at the call, dask ``indices`` chunk by chunk at compute; ``out``,
        if given, is written at the call and returned.
        """
        spec = self.spec
        indices = self.input("indices", indices, np.int64)
        _dtypes.output_dtype(spec, data.dtype, indices.dtype)
        out_shape = _shapes.gather_shape(spec, data.shape, indices.shape, axis)
        ax = _dims.normalize_axis(spec, axis, data.ndim)
        norm = self.checked(indices, data.shape[ax], ax)
        data = _strings_as_objects(data)
        moved = da.moveaxis(data, ax, 0) if ax else data
        items = plans.gather(
            moved, plans.reshape(norm, (math.prod(indices.shape), 1)), indices.shape
        )  # (*indices.shape, *before, *after)
        q = len(indices.shape)
        if ax:  # the axes before ``axis`` go back in front of the indices' axes
            order = [*range(q, q + ax), *range(q), *range(q + ax, items.ndim)]
            items = items.transpose(order)
        assert items.shape == tuple(out_shape)
        return self.finish(items, out, {"data": data, "indices": indices})

    def gather_nd(self, data, indices, batch_dims=0, out=None):
        """Return GatherND of ``data`` at index tuples ``indices``, as a lazy dask array.

        As :func:`gather_scatter.gather_nd`, with the NumPy kernel's shapes, types and errors. NumPy
        ``indices`` are checked at the call, dask ``indices`` chunk by chunk at compute; ``out``,
        if given, is written at the call and returned.
        """
        spec = self.spec
        indices = self.input("indices", indices, np.int64)
        _dtypes.output_dtype(spec, data.dtype, indices.dtype)
        _shapes.gather_nd_shape(spec, data.shape, indices.shape, batch_dims)
        b, k = int(batch_dims), indices.shape[-1]
        norm = self.checked(indices, data.shape[b : b + k], tuple(range(b, b + k)))
        data = _strings_as_objects(data)
        rows = plans.as_rows(norm, k)
        if b:  # each tuple's batch coordinates come first
            rows = plans.with_batch(rows, indices.shape[:b], indices.shape[:-1])
        return self.finish(plans.gather(data, rows, indices.shape[:-1]), out, {"data": data, "indices": indices})

    def gather_elements(self, data, indices, axis=0, out=None):
        """Return GatherElements of ``data`` at ``indices`` along ``axis``, as a lazy dask array.

        As :func:`gather_scatter.gather_elements`, with the NumPy kernel's shapes, types and errors. NumPy
        ``indices`` are checked at the call, dask ``indices`` chunk by chunk at compute; ``out``,
        if given, is written at the call and returned.
        """
        spec = self.spec
        indices = self.input("indices", indices, np.int64)
        _dtypes.output_dtype(spec, data.dtype, indices.dtype)
        _shapes.gather_elements_shape(spec, data.shape, indices.shape, axis)
        ax = _dims.normalize_axis(spec, axis, data.ndim)
        norm = self.checked(indices, data.shape[ax], ax)
        data = _strings_as_objects(data)
        return self.finish(
            plans.gather(data, plans.element_rows(norm, ax), indices.shape), out, {"data": data, "indices": indices}
        )

    def scatter_nd(self, data, indices, updates, reduction="none", out=None):
        """Return ScatterND: ``data`` with ``updates`` at index tuples ``indices``, as a lazy dask array.

        As :func:`gather_scatter.scatter_nd`, with the NumPy kernel's shapes, types and errors. NumPy
        ``indices`` are checked at the call, dask ``indices`` chunk by chunk at compute; ``out``,
        if given, is written at the call and returned.
        """
        spec = self.spec
        indices = self.input("indices", indices, np.int64)
        updates = self.input("updates", updates, data.dtype)
        _dtypes.output_dtype(spec, data.dtype, indices.dtype, updates.dtype)
        _shapes.scatter_nd_shape(spec, data.shape, indices.shape, updates.shape)
        reduction = Reduction.parse(spec, reduction)
        _dtypes.check_reduction_type(spec, reduction, data.dtype)
        k = indices.shape[-1]
        norm = self.checked(indices, data.shape[:k], tuple(range(k)))
        data = _strings_as_objects(data)
        values = plans.reshape(updates, (math.prod(indices.shape[:-1]), *data.shape[k:]))
        rows = plans.as_rows(norm, k)
        return self.finish(
            plans.scatter(data, rows, values, reduction),
            out,
            {"data": data, "indices": indices, "updates": updates},
            rows,
        )

    def scatter_elements(self, data, indices, updates, axis=0, reduction="none", out=None):
        """Return ScatterElements: ``data`` with ``updates`` at ``indices`` along ``axis``, lazily.

        As :func:`gather_scatter.scatter_elements`, with the NumPy kernel's shapes, types and errors. NumPy
        ``indices`` are checked at the call, dask ``indices`` chunk by chunk at compute; ``out``,
        if given, is written at the call and returned.
        """
        spec = self.spec
        indices = self.input("indices", indices, np.int64)
        updates = self.input("updates", updates, data.dtype)
        _dtypes.output_dtype(spec, data.dtype, indices.dtype, updates.dtype)
        _shapes.scatter_elements_shape(spec, data.shape, indices.shape, updates.shape, axis)
        ax = _dims.normalize_axis(spec, axis, data.ndim)
        reduction = Reduction.parse(spec, reduction)
        _dtypes.check_reduction_type(spec, reduction, data.dtype)
        norm = self.checked(indices, data.shape[ax], ax)
        data = _strings_as_objects(data)
        values = plans.reshape(updates, (math.prod(updates.shape),))
        rows = plans.element_rows(norm, ax)
        return self.finish(
            plans.scatter(data, rows, values, reduction),
            out,
            {"data": data, "indices": indices, "updates": updates},
            rows,
        )

    def tensor_scatter(self, past_cache, update, write_indices=None, axis=-2, mode="linear", out=None):
        """Raise DTypeError: TensorScatter does not run on dask arrays.

        A KV cache lives in one device's memory; TensorScatter runs on NumPy, PyTorch, JAX and
        array-API arrays.
        """
        spec = self.spec
        raise spec.error(
            DTypeError,
            "past_cache is a dask.array.Array; TensorScatter runs on NumPy, PyTorch, JAX and "
            "array-API arrays (a KV cache lives in one device's memory)",
            input="past_cache",
            value="dask.array.Array",
        )


def _strings_as_objects(data: da.Array) -> da.Array:
    """Return string data of any NumPy kind as object arrays of str, as every kernel returns them."""
    if data.dtype.kind not in "US":
        return data
    from ..kernels import strings_as_objects

    return data.map_blocks(strings_as_objects, dtype=object, meta=np.empty((0,) * data.ndim, object))


# ---- out= ----------------------------------------------------------------------------------


def _read_from(data: da.Array, out: Any) -> bool:
    """Return whether ``data`` is exactly the contents of ``out``.

    That is ``da.from_zarr(out)`` or ``da.from_array(out)``, whose graph is the array and one
    task per block reading it.
    """
    graph = data.__dask_graph__()
    original = f"original-{data.name}"
    if set(graph.layers) != {data.name, original}:
        return False
    return graph.layers[original].get(original) is out


def _mentions(array: da.Array, out: Any) -> bool:
    """Return whether ``out`` itself is one of the values in ``array``'s graph.

    Such a value is what from_array and from_zarr keep of the array they read.
    """
    return any(value is out for value in array.__dask_graph__().values())


def _write_unit(out: Any, ndim: int) -> tuple | None:
    """Return the shape of ``out``'s unit of writing, or None for an array written by region.

    The unit is a zarr shard, else its chunk; an HDF5 chunk. None: an array written region by
    region (a NumPy memmap, a contiguous HDF5 dataset).
    """
    unit = getattr(out, "shards", None) or getattr(out, "chunks", None)
    if isinstance(unit, tuple) and len(unit) == ndim and all(isinstance(u, (int, np.integer)) and u > 0 for u in unit):
        return tuple(int(u) for u in unit)
    return None


def _aligned(result: da.Array, unit: tuple) -> da.Array:
    """Return ``result`` in blocks of whole units, so that one task writes each unit.

    On each axis a block is the largest multiple of the unit within result's largest block,
    one unit at least.
    """
    return result.rechunk(tuple(max(u, max(c) // u * u) for c, u in zip(result.chunks, unit, strict=False)))


def _touched(result: da.Array, rows: np.ndarray) -> tuple[list, list]:
    """Return the blocks of ``result`` that hold one of the items ``rows``, and their regions in ``out``.

    The rest of ``out`` holds its values already.
    """
    m = rows.shape[1]
    starts = [np.cumsum((0, *c)) for c in result.chunks]
    sources, regions = [], []
    for lead, _ in plans.Plan(result, rows).groups():
        for tail, _ in plans.tail_blocks(result, m):
            key = lead + tail
            sources.append(result.blocks[key])
            regions.append(tuple(slice(int(starts[d][i]), int(starts[d][i + 1])) for d, i in enumerate(key)))
    return sources, regions


def _read_only(out: Any) -> str | None:
    """Return what makes ``out`` read-only, or None if it can be written.

    A NumPy array (a memmap included) whose writeable flag is off, a zarr array opened read-only,
    an array of a read-only (or committed) icechunk session, an HDF5 dataset of a file opened
    read-only.
    """
    if isinstance(out, np.memmap) and not out.flags.writeable:
        return f"a NumPy memmap opened with mode={getattr(out, 'mode', 'r')!r}; open it with mode='r+'"
    if isinstance(out, np.ndarray):
        return None if out.flags.writeable else "a NumPy array whose writeable flag is off; pass one of your own"
    session = _dask_icechunk.session_of(out)
    if session is not None and session.read_only:
        return (
            "an array of a read-only icechunk session, or of one already committed; open the array from "
            "repo.writable_session(branch).store"
        )
    if getattr(out, "read_only", False) is True:
        return "a zarr array opened read-only; open it with mode='r+'"
    if getattr(getattr(out, "file", None), "mode", None) == "r":
        return "an HDF5 dataset of a file opened with mode='r'; open the file with mode='r+'"
    return None
