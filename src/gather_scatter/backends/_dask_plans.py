"""The task graphs behind :mod:`gather_scatter.backends.dask`: the index plumbing and the two plans.

Gather groups the items by the data block that holds them (one task per touched block reads it
once; one task per output block puts the taken items back in the order of ``indices``); scatter
routes items and updates to the block that owns their target and applies them there with the
NumPy kernel in row-major order. With dask ``indices`` the plan is made per index chunk, in its
task. The module docstring of ``backends.dask`` gives the whole design; this module holds no
policy (no input rules, no ``out=``), only the graphs.
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

from ..rules.validate import check_bounds, out_of_bounds
from ..rules.versions import Reduction

# ---- index plumbing (vectorized, on the client or in a task per index chunk) ---------------


def registry_key(spec) -> tuple:
    return (spec.domain, spec.op_type, spec.since_version)


def checked_chunk(chunk, spec_key, sizes, axes, block_info=None):
    """Return a chunk of dask indices, checked and made non-negative int64.

    A bad index raises the error naming its position in the whole array.
    """
    from ..rules.versions import REGISTRY

    spec = REGISTRY[spec_key]
    chunk = np.asarray(chunk)
    try:
        check_bounds(spec, chunk, sizes, axes)
    except IndexError as exc:
        origin = tuple(start for start, _ in block_info[0]["array-location"])
        position = tuple(p + o for p, o in zip(exc.position, origin, strict=False))
        out_of_bounds(spec, position, exc.value, sizes, axes)
    return nonnegative(chunk, sizes)


def nonnegative(indices: np.ndarray, sizes: Any) -> np.ndarray:
    """Return checked indices as int64 with negatives counted from the end of their axis."""
    sizes = np.asarray(sizes, dtype=np.int64)
    indices = indices.astype(np.int64, copy=False)
    return np.where(indices < 0, indices + sizes, indices)


def as_rows(norm: Any, k: int) -> Any:
    """Return checked indices as ``(n, k)`` item coordinates (NumPy or dask)."""
    return reshape(norm, (math.prod(norm.shape[:-1]), k))


def with_batch(rows: Any, batch_shape: tuple, lead_shape: tuple) -> Any:
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


def element_rows(norm: Any, axis: int) -> Any:
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
        return da.stack([reshape(g, flat) for g in grids], axis=1).rechunk((None, -1))
    coords = np.indices(norm.shape, dtype=np.int64)
    coords[axis] = norm
    return coords.reshape(norm.ndim, -1).T


# ---- the two plans -------------------------------------------------------------------------


class Plan:
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


def gather(data: da.Array, rows: Any, lead_shape: tuple) -> da.Array:
    """``data[tuple(rows[i])]`` for every item ``i``, shaped ``lead_shape + data.shape[m:]``."""
    m = rows.shape[1]
    if isinstance(rows, da.Array):
        return reshape(_gather_dask_rows(data, rows), tuple(lead_shape) + data.shape[m:])
    return _gather_rows(data, rows, tuple(lead_shape))


def reshape(x: Any, shape: tuple) -> Any:
    """``x.reshape(shape)``; dask's reshape fails on empty arrays, which hold nothing to move."""
    if isinstance(x, da.Array) and 0 in x.shape:
        return da.empty(shape, dtype=x.dtype, chunks=tuple(max(n, 1) for n in shape))
    return x.reshape(shape)


def tail_blocks(data: da.Array, m: int):
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
    plan = Plan(data, rows)
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
        for tail, _ in tail_blocks(data, m):
            layer[(parts, g) + tail] = (_take, (data.name, *lead, *tail), local)  # noqa: RUF005 - x[(a, *b)] reads as 3.11-only syntax to mypy
    for o, (lo, hi, block_lead) in enumerate(runs):
        pieces = []
        for g, (_, items) in enumerate(groups):  # items ascend within a group
            a, b = np.searchsorted(items, [lo, hi])
            if a < b:
                pieces.append((g, int(a), int(b), items[a:b] - lo))
        for tail, shape in tail_blocks(data, m):
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


def scatter(data: da.Array, rows: Any, values: Any, reduction: Reduction) -> da.Array:
    """Return ``data`` with ``values[i]`` written or reduced at ``tuple(rows[i])`` in order of ``i``."""
    if isinstance(rows, da.Array):
        return _scatter_dask_rows(data, rows, values, reduction)
    n, m = rows.shape
    plan = Plan(data, rows)
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
        for tail, _ in tail_blocks(data, m):
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
    from ..kernels.scatter_nd import run_scatter_nd
    from ..rules.versions import SCATTER_ND

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
            for tail, _ in tail_blocks(data, m):
                layer[(parts, c) + lead + tail] = (  # noqa: RUF005 - x[(a, *b)] reads as 3.11-only syntax to mypy
                    _take_masked,
                    (data.name, *lead, *tail),
                    (rows.name, c, 0),
                    _block_origin(data, lead),
                )
        for tail, shape in tail_blocks(data, m):
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
