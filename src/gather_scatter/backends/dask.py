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
every block of ``data`` that overlaps it was read.
"""

from __future__ import annotations

import math
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph
from dask.utils import parse_bytes

from .. import _shapes
from .._validate import as_array, check_bounds, out_of_bounds
from .._versions import Reduction
from ..errors import DTypeError, InvalidAttributeError, ShapeError
from . import _foreign, library_name


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
            raise ShapeError(
                f"{spec.name}: {name} has unknown chunk sizes (shape {array.shape}); call "
                f"{name}.compute_chunk_sizes() first",
                op=spec.op_type,
                since_version=spec.since_version,
                input=name,
                value=array.shape,
            )

    # ---- inputs -------------------------------------------------------------------------

    def input(self, name: str, value: Any, dtype: Any) -> Any:
        """``value`` as a NumPy array (NumPy's rules of ``as_array``) or a dask array."""
        if isinstance(value, da.Array):
            self.known(name, value)
            return value
        if _foreign(value):
            spec = self.spec
            raise DTypeError(
                f"{spec.name}: {name} is a {library_name(value)} but {self.first_name} is a dask.array.Array; pass "
                f"NumPy or dask arrays",
                op=spec.op_type,
                since_version=spec.since_version,
                input=name,
                value=library_name(value),
            )
        return as_array(self.spec, name, value, dtype)

    def checked(self, indices: Any, sizes: Any, axes: Any) -> Any:
        """Return ``indices`` checked and made non-negative int64.

        NumPy ``indices`` are checked now (the in-memory error); dask ``indices`` are checked
        chunk by chunk at compute (see :func:`_checked_chunk`).
        """
        if isinstance(indices, da.Array):
            if isinstance(sizes, tuple):  # a tuple's components in one chunk: component j is axis axes[j]
                indices = indices.rechunk({indices.ndim - 1: -1})
            return da.map_blocks(
                _checked_chunk, indices, dtype=np.int64, spec_key=_key(self.spec), sizes=sizes, axes=axes
            )
        check_bounds(self.spec, indices, sizes, axes)
        return _nonnegative(indices, sizes)

    def finish(self, result: da.Array, out: Any, inputs: dict, rows: Any = None) -> Any:
        """Return ``result``, or ``out`` with ``result`` stored into it in whole units of writing.

        ``rows``: the items a scatter changes, None for a gather. ``out`` may be the array a
        scatter's data was read from (then in place: with NumPy ``rows`` only the units that
        hold one are written, each after the blocks of data that overlap it were read); any
        other input read from ``out`` is refused, as its blocks could be overwritten before
        they are read.
        """
        if out is None:
            return result
        spec = self.spec
        if not hasattr(out, "__setitem__") or tuple(getattr(out, "shape", ())) != result.shape:
            raise ShapeError(
                f"{spec.name}: out must be a writable array of shape {result.shape} (a zarr array, an HDF5 dataset, "
                f"a NumPy memmap), got {library_name(out)} of shape {getattr(out, 'shape', None)}",
                op=spec.op_type,
                since_version=spec.since_version,
                input="out",
                value=getattr(out, "shape", None),
            )
        if np.dtype(out.dtype) != result.dtype:
            raise DTypeError(
                f"{spec.name}: out has dtype {out.dtype} but the result has dtype {result.dtype}",
                op=spec.op_type,
                since_version=spec.since_version,
                input="out",
                value=str(out.dtype),
            )
        in_place = spec.op_type.startswith("Scatter") and _read_from(inputs["data"], out)
        for name, array in inputs.items():
            if isinstance(array, da.Array) and not (in_place and name == "data") and _mentions(array, out):
                raise InvalidAttributeError(
                    f"{spec.name}: out is an array that {name} is read from; the result would overwrite its own "
                    "input (pass a separate array)",
                    op=spec.op_type,
                    since_version=spec.since_version,
                    input="out",
                )
        unit = _write_unit(out, result.ndim)
        if in_place and isinstance(rows, np.ndarray):  # only the units that change
            _store_touched(result if unit is None else result.rechunk(unit), out, rows)
        else:
            da.store(result if unit is None else _aligned(result, unit), out, lock=False)
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
        _shapes.output_dtype(spec, data.dtype, indices.dtype)
        out_shape = _shapes.gather_shape(spec, data.shape, indices.shape, axis)
        ax = _shapes.normalize_axis(spec, axis, data.ndim)
        norm = self.checked(indices, data.shape[ax], ax)
        data = _strings_as_objects(data)
        moved = da.moveaxis(data, ax, 0) if ax else data
        items = _gather(
            moved, _reshape(norm, (math.prod(indices.shape), 1)), indices.shape
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
        _shapes.output_dtype(spec, data.dtype, indices.dtype)
        _shapes.gather_nd_shape(spec, data.shape, indices.shape, batch_dims)
        b, k = int(batch_dims), indices.shape[-1]
        norm = self.checked(indices, data.shape[b : b + k], tuple(range(b, b + k)))
        data = _strings_as_objects(data)
        rows = _as_rows(norm, k)
        if b:  # each tuple's batch coordinates come first
            rows = _with_batch(rows, indices.shape[:b], indices.shape[:-1])
        return self.finish(_gather(data, rows, indices.shape[:-1]), out, {"data": data, "indices": indices})

    def gather_elements(self, data, indices, axis=0, out=None):
        """Return GatherElements of ``data`` at ``indices`` along ``axis``, as a lazy dask array.

        As :func:`gather_scatter.gather_elements`, with the NumPy kernel's shapes, types and errors. NumPy
        ``indices`` are checked at the call, dask ``indices`` chunk by chunk at compute; ``out``,
        if given, is written at the call and returned.
        """
        spec = self.spec
        indices = self.input("indices", indices, np.int64)
        _shapes.output_dtype(spec, data.dtype, indices.dtype)
        _shapes.gather_elements_shape(spec, data.shape, indices.shape, axis)
        ax = _shapes.normalize_axis(spec, axis, data.ndim)
        norm = self.checked(indices, data.shape[ax], ax)
        data = _strings_as_objects(data)
        return self.finish(
            _gather(data, _element_rows(norm, ax), indices.shape), out, {"data": data, "indices": indices}
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
        _shapes.output_dtype(spec, data.dtype, indices.dtype, updates.dtype)
        _shapes.scatter_nd_shape(spec, data.shape, indices.shape, updates.shape)
        reduction = Reduction.parse(spec, reduction)
        _shapes.check_reduction_type(spec, reduction, data.dtype)
        k = indices.shape[-1]
        norm = self.checked(indices, data.shape[:k], tuple(range(k)))
        data = _strings_as_objects(data)
        values = _reshape(updates, (math.prod(indices.shape[:-1]), *data.shape[k:]))
        rows = _as_rows(norm, k)
        return self.finish(
            _scatter(data, rows, values, reduction), out, {"data": data, "indices": indices, "updates": updates}, rows
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
        _shapes.output_dtype(spec, data.dtype, indices.dtype, updates.dtype)
        _shapes.scatter_elements_shape(spec, data.shape, indices.shape, updates.shape, axis)
        ax = _shapes.normalize_axis(spec, axis, data.ndim)
        reduction = Reduction.parse(spec, reduction)
        _shapes.check_reduction_type(spec, reduction, data.dtype)
        norm = self.checked(indices, data.shape[ax], ax)
        data = _strings_as_objects(data)
        values = _reshape(updates, (math.prod(updates.shape),))
        rows = _element_rows(norm, ax)
        return self.finish(
            _scatter(data, rows, values, reduction), out, {"data": data, "indices": indices, "updates": updates}, rows
        )

    def tensor_scatter(self, past_cache, update, write_indices=None, axis=-2, mode="linear", out=None):
        """Raise DTypeError: TensorScatter does not run on dask arrays.

        A KV cache lives in one device's memory; TensorScatter runs on NumPy, PyTorch, JAX and
        array-API arrays.
        """
        spec = self.spec
        raise DTypeError(
            f"{spec.name}: past_cache is a dask.array.Array; TensorScatter runs on NumPy, PyTorch, JAX and "
            "array-API arrays (a KV cache lives in one device's memory)",
            op=spec.op_type,
            since_version=spec.since_version,
            input="past_cache",
            value="dask.array.Array",
        )


def _strings_as_objects(data: da.Array) -> da.Array:
    """Return string data of any NumPy kind as object arrays of str, as every kernel returns them."""
    if data.dtype.kind not in "US":
        return data
    from ..kernels._writes import strings_as_objects

    return data.map_blocks(strings_as_objects, dtype=object, meta=np.empty((0,) * data.ndim, object))


# ---- index plumbing (vectorized, on the client or in a task per index chunk) ---------------


def _key(spec) -> tuple:
    return (spec.domain, spec.op_type, spec.since_version)


def _checked_chunk(chunk, spec_key, sizes, axes, block_info=None):
    """Return a chunk of dask indices, checked and made non-negative int64.

    A bad index raises the error naming its position in the whole array.
    """
    from .._versions import REGISTRY

    spec = REGISTRY[spec_key]
    chunk = np.asarray(chunk)
    try:
        check_bounds(spec, chunk, sizes, axes)
    except IndexError as exc:
        origin = tuple(start for start, _ in block_info[0]["array-location"])
        position = tuple(p + o for p, o in zip(exc.position, origin, strict=False))
        out_of_bounds(spec, position, exc.value, sizes, axes)
    return _nonnegative(chunk, sizes)


def _nonnegative(indices: np.ndarray, sizes: Any) -> np.ndarray:
    """Return checked indices as int64 with negatives counted from the end of their axis."""
    sizes = np.asarray(sizes, dtype=np.int64)
    indices = indices.astype(np.int64, copy=False)
    return np.where(indices < 0, indices + sizes, indices)


def _as_rows(norm: Any, k: int) -> Any:
    """Return checked indices as ``(n, k)`` item coordinates (NumPy or dask)."""
    return _reshape(norm, (math.prod(norm.shape[:-1]), k))


def _with_batch(rows: Any, batch_shape: tuple, lead_shape: tuple) -> Any:
    """GatherND with batch_dims: each tuple's batch coordinates before its own."""
    n = math.prod(lead_shape)
    per_batch = n // max(math.prod(batch_shape), 1) if n else 0
    if isinstance(rows, da.Array):
        position = da.arange(n, chunks=rows.chunks[0], dtype=np.int64)
        batch = da.stack(da.unravel_index(position // max(per_batch, 1), batch_shape), axis=1)
        return da.concatenate([batch.rechunk((rows.chunks[0], -1)), rows.rechunk((rows.chunks[0], -1))], axis=1)
    position = np.arange(n, dtype=np.int64)
    batch = (
        np.stack(np.unravel_index(position // max(per_batch, 1), batch_shape), axis=1)
        if n
        else np.empty((0, len(batch_shape)), np.int64)
    )
    return np.concatenate([batch.astype(np.int64), rows], axis=1)


def _element_rows(norm: Any, axis: int) -> Any:
    """GatherElements/ScatterElements: each element's own coordinates, ``norm`` on ``axis``."""
    if isinstance(norm, da.Array):
        grids = [
            da.broadcast_to(
                da.arange(n, chunks=c).reshape(tuple(n if e == d else 1 for e in range(norm.ndim))), norm.shape
            ).rechunk(norm.chunks)
            for d, (n, c) in enumerate(zip(norm.shape, norm.chunks, strict=False))
        ]
        grids[axis] = norm
        flat = (math.prod(norm.shape),)
        return da.stack([_reshape(g, flat) for g in grids], axis=1).rechunk((None, -1))
    coords = np.indices(norm.shape, dtype=np.int64)
    coords[axis] = norm
    return coords.reshape(norm.ndim, -1).T


# ---- the two plans -------------------------------------------------------------------------


class _Plan:
    """Items (``(n, m)`` checked coordinates into data's first ``m`` axes) grouped by block."""

    def __init__(self, data: da.Array, rows: np.ndarray):
        n, m = rows.shape
        grid = data.numblocks[:m]
        block = np.empty((n, m), dtype=np.int64)
        local = np.empty((n, m), dtype=np.int64)
        for j, chunks in enumerate(data.chunks[:m]):
            ends = np.cumsum(chunks)
            block[:, j] = np.searchsorted(ends, rows[:, j], side="right")
            local[:, j] = rows[:, j] - (ends - np.asarray(chunks))[block[:, j]]
        flat = np.ravel_multi_index(tuple(block.T), grid) if m else np.zeros(n, dtype=np.int64)
        self.order = np.argsort(flat, kind="stable")  # row-major order kept within a block
        ordered = flat[self.order]
        self.touched, self.first = np.unique(ordered, return_index=True)
        self.last = np.append(self.first[1:], n).astype(np.int64)
        self.local = local
        self.grid = grid

    def groups(self):
        """(block coordinates among the first m axes, item numbers in row-major order) per touched block."""
        for t, lo, hi in zip(self.touched, self.first, self.last, strict=False):
            yield tuple(int(i) for i in np.unravel_index(int(t), self.grid)), self.order[lo:hi]


def _gather(data: da.Array, rows: Any, lead_shape: tuple) -> da.Array:
    """``data[tuple(rows[i])]`` for every item ``i``, shaped ``lead_shape + data.shape[m:]``."""
    m = rows.shape[1]
    if isinstance(rows, da.Array):
        return _reshape(_gather_dask_rows(data, rows), tuple(lead_shape) + data.shape[m:])
    return _gather_rows(data, rows, tuple(lead_shape))


def _reshape(x: Any, shape: tuple) -> Any:
    """``x.reshape(shape)``; dask's reshape fails on empty arrays, which hold nothing to move."""
    if isinstance(x, da.Array) and 0 in x.shape:
        return da.empty(shape, dtype=x.dtype, chunks=tuple(max(n, 1) for n in shape))
    return x.reshape(shape)


def _tail(data: da.Array, m: int):
    """Every block position among the axes after the first m, with its block shape."""
    for tail in np.ndindex(*data.numblocks[m:]):
        yield tail, tuple(data.chunks[m + j][i] for j, i in enumerate(tail))


def _gather_rows(data: da.Array, rows: np.ndarray, lead_shape: tuple) -> da.Array:
    """Return the items of ``data`` at NumPy coordinates ``rows``, as a dask array.

    A task per touched block, a task per output block. Output blocks split the first axis of
    ``lead_shape`` into runs of about dask's ``array.chunk-size`` bytes, so each holds a
    contiguous run of items.
    """
    _n, m = rows.shape
    plan = _Plan(data, rows)
    if lead_shape:
        inner = math.prod(lead_shape[1:])
        item_bytes = math.prod(max(c) for c in data.chunks[m:]) * data.dtype.itemsize
        step = max(1, parse_bytes(dask.config.get("array.chunk-size")) // max(inner * item_bytes, 1))
        first = tuple(min(step, lead_shape[0] - lo) for lo in range(0, lead_shape[0], step)) or (0,)
        lead_chunks = (first, *tuple((d,) for d in lead_shape[1:]))
        runs = [
            (lo * inner, (lo + size) * inner, size) for lo, size in zip(np.cumsum((0, *first)), first, strict=False)
        ]
    else:  # a scalar index: one item
        lead_chunks, runs = (), [(0, 1, None)]
    token = tokenize(data, rows, lead_shape)
    name, parts = f"gather-{token}", f"gather-parts-{token}"
    layer: dict = {}
    groups = list(plan.groups())
    for g, (lead, items) in enumerate(groups):
        local = plan.local[items]
        for tail, _ in _tail(data, m):
            layer[(parts, g) + tail] = (_take, (data.name, *lead, *tail), local)  # noqa: RUF005 - x[(a, *b)] reads as 3.11-only syntax to mypy
    for o, (lo, hi, block_lead) in enumerate(runs):
        pieces = []
        for g, (_, items) in enumerate(groups):  # items ascend within a group
            a, b = np.searchsorted(items, [lo, hi])
            if a < b:
                pieces.append((g, int(a), int(b), items[a:b] - lo))
        for tail, shape in _tail(data, m):
            block_shape = ((block_lead, *tuple(lead_shape[1:])) if lead_shape else ()) + shape
            key = (name,) + ((o,) + (0,) * (len(lead_shape) - 1) if lead_shape else ()) + tail
            layer[key] = (
                _assemble,
                (hi - lo, *shape),
                block_shape,
                data.dtype,
                [(parts, g, *tail) for g, *_ in pieces],
                [p[1:] for p in pieces],
            )
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[data])
    ndim = len(lead_shape) + data.ndim - m
    return da.Array(
        graph, name, chunks=lead_chunks + data.chunks[m:], dtype=data.dtype, meta=np.empty((0,) * ndim, data.dtype)
    )


def _take(block: np.ndarray, local: np.ndarray) -> np.ndarray:
    return block[tuple(local.T)]


def _assemble(shape: tuple, block_shape: tuple, dtype, parts: list, placements: list) -> np.ndarray:
    out = np.empty(shape, dtype=dtype)
    for part, (a, b, positions) in zip(parts, placements, strict=False):
        out[positions] = part[a:b]
    return out.reshape(block_shape)


def _scatter(data: da.Array, rows: Any, values: Any, reduction: Reduction) -> da.Array:
    """Return ``data`` with ``values[i]`` written or reduced at ``tuple(rows[i])`` in order of ``i``."""
    if isinstance(rows, da.Array):
        return _scatter_dask_rows(data, rows, values, reduction)
    n, m = rows.shape
    plan = _Plan(data, rows)
    token = tokenize(data, rows, values, reduction.value)
    name = f"scatter-{token}"
    layer: dict = {}
    dependencies = [data]
    groups = list(plan.groups())
    if isinstance(values, da.Array):  # sorted by block, chunked so block g holds group g's updates
        sizes = tuple(len(items) for _, items in groups)
        ordered = values[plan.order].rechunk((sizes, *data.chunks[m:])) if n else values
        dependencies.append(ordered)

        def piece(g, items, tail):
            return (ordered.name, g, *tail)
    else:  # NumPy updates: one key holds them; each block's task takes its own rows (no copies up front)
        shared = f"scatter-updates-{token}"
        layer[shared] = values

        def piece(g, items, tail):
            spans = (_span(data.chunks[m + j], i) for j, i in enumerate(tail))
            return (_rows, shared, items, tuple(slice(start, start + size) for start, size in spans))

    touched = set()
    for g, (lead, items) in enumerate(groups):
        local = plan.local[items]
        for tail, _ in _tail(data, m):
            key = lead + tail
            layer[(name,) + key] = (_apply, (data.name, *key), local, piece(g, items, tail), reduction.value)  # noqa: RUF005 - x[(a, *b)] reads as 3.11-only syntax to mypy
            touched.add(key)
    for key in np.ndindex(*data.numblocks):
        if key not in touched:  # untouched: data's own block
            layer[(name,) + key] = (data.name, *key)  # noqa: RUF005 - x[(a, *b)] reads as 3.11-only syntax to mypy
    graph = HighLevelGraph.from_collections(name, layer, dependencies=dependencies)
    return da.Array(graph, name, chunks=data.chunks, dtype=data.dtype, meta=data._meta)


def _rows(values: np.ndarray, items: np.ndarray, tail: tuple) -> np.ndarray:
    return values[(items,) + tail]  # noqa: RUF005 - x[(a, *b)] reads as 3.11-only syntax to mypy


def _span(chunks: tuple, i: int) -> tuple[int, int]:
    """(first coordinate, size) of chunk ``i`` of an axis chunked as ``chunks``."""
    return sum(chunks[:i]), chunks[i]


def _apply(block: np.ndarray, local: np.ndarray, updates: np.ndarray, reduction: str) -> np.ndarray:
    """Return one block with its updates applied by the NumPy kernel, in ScatterND-18 semantics.

    ScatterND-18's rules (row-major order, every reduction rule) are every scatter's rule once
    targets are coordinates.
    """
    from .._versions import SCATTER_ND
    from ..kernels.scatter_nd import run_scatter_nd

    return run_scatter_nd(SCATTER_ND, block, local, updates, reduction)


# ---- dask indices: a plan per index chunk, made in its task ------------------------------


def _gather_dask_rows(data: da.Array, rows: da.Array) -> da.Array:
    """Return the items of ``data`` whose coordinates are the dask array ``rows``.

    For each chunk of items and each block of data, a task takes the items that fall in the
    block; one task per item chunk assembles them.
    """
    m = rows.shape[1]
    rows = rows.rechunk((rows.chunks[0], m))
    token = tokenize(data, rows)
    name, parts = f"gather-{token}", f"gather-parts-{token}"
    layer: dict = {}
    leads = list(np.ndindex(*data.numblocks[:m]))
    for c, size in enumerate(rows.chunks[0]):
        for lead in leads:
            for tail, _ in _tail(data, m):
                layer[(parts, c) + lead + tail] = (  # noqa: RUF005 - x[(a, *b)] reads as 3.11-only syntax to mypy
                    _take_masked,
                    (data.name, *lead, *tail),
                    (rows.name, c, 0),
                    _block_origin(data, lead),
                )
        for tail, shape in _tail(data, m):
            layer[(name, c) + tail] = (  # noqa: RUF005 - x[(a, *b)] reads as 3.11-only syntax to mypy
                _assemble_masked,
                (size, *shape),
                data.dtype,
                [(parts, c, *lead, *tail) for lead in leads],
            )
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[data, rows])
    return da.Array(
        graph,
        name,
        chunks=(rows.chunks[0], *data.chunks[m:]),
        dtype=data.dtype,
        meta=np.empty((0,) * (1 + data.ndim - m), data.dtype),
    )


def _block_origin(data: da.Array, lead: tuple) -> tuple:
    """(first coordinate, size) of block ``lead`` on each of the first axes."""
    return tuple(_span(data.chunks[j], i) for j, i in enumerate(lead))


def _inside(rows: np.ndarray, origin: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Which items fall in the block at ``origin``, and their coordinates inside it."""
    inside = np.ones(rows.shape[0], dtype=bool)
    for j, (start, size) in enumerate(origin):
        inside &= (rows[:, j] >= start) & (rows[:, j] < start + size)
    return inside, rows[inside] - np.array([start for start, _ in origin], dtype=np.int64)


def _take_masked(block: np.ndarray, rows: np.ndarray, origin: tuple):
    inside, local = _inside(rows, origin)
    return np.flatnonzero(inside), block[tuple(local.T)]


def _assemble_masked(shape: tuple, dtype, parts: list) -> np.ndarray:
    out = np.empty(shape, dtype=dtype)
    for positions, values in parts:
        out[positions] = values
    return out


def _scatter_dask_rows(data: da.Array, rows: da.Array, values: Any, reduction: Reduction) -> da.Array:
    """Return ``data`` with the updates of items whose coordinates are the dask array ``rows``.

    Each block of data takes, chunk of items after chunk of items (row-major order), the
    updates that fall in it.
    """
    m = rows.shape[1]
    rows = rows.rechunk((rows.chunks[0], m))
    if not isinstance(values, da.Array):
        values = da.from_array(values, chunks=(rows.chunks[0], *data.chunks[m:]))
    values = values.rechunk((rows.chunks[0], *data.chunks[m:]))
    token = tokenize(data, rows, values, reduction.value)
    name = f"scatter-{token}"
    layer: dict = {}
    for key in np.ndindex(*data.numblocks):
        lead, tail = key[:m], key[m:]
        current = (data.name, *key)
        for c in range(len(rows.chunks[0])):
            step = (f"{name}-step", c, *key) if c < len(rows.chunks[0]) - 1 else (name, *key)
            layer[step] = (
                _apply_masked,
                current,
                (rows.name, c, 0),
                (values.name, c, *tail),
                _block_origin(data, lead),
                reduction.value,
            )
            current = step
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[data, rows, values])
    return da.Array(graph, name, chunks=data.chunks, dtype=data.dtype, meta=data._meta)


def _apply_masked(block: np.ndarray, rows: np.ndarray, updates: np.ndarray, origin: tuple, reduction: str):
    inside, local = _inside(rows, origin)
    if not inside.any():
        return block
    return _apply(block, local, updates[inside], reduction)


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


def _store_touched(result: da.Array, out: Any, rows: np.ndarray) -> None:
    """Write the blocks of ``result`` that hold one of the items ``rows`` into ``out``.

    The rest is there already.
    """
    m = rows.shape[1]
    starts = [np.cumsum((0, *c)) for c in result.chunks]
    sources, regions = [], []
    for lead, _ in _Plan(result, rows).groups():
        for tail, _ in _tail(result, m):
            key = lead + tail
            sources.append(result.blocks[key])
            regions.append(tuple(slice(int(starts[d][i]), int(starts[d][i + 1])) for d, i in enumerate(key)))
    if sources:
        da.store(sources, [out] * len(sources), regions=regions, lock=False)
