"""``out=`` an array of an icechunk session: in-place writes that are all or nothing.

Zarr, HDF5 and memmaps have no transactions: a run killed part way leaves the chunks written so
far changed and the others not. icechunk (a transactional storage engine for zarr) keeps every
write of a writable session out of the repository until ``session.commit``, so a run that dies
before the commit leaves the branch at its last commit.

On a scheduler that runs the tasks in this process (dask's threaded and synchronous ones) the
tasks write into the session itself. A scheduler that pickles its tasks (``dask.distributed``,
the processes scheduler) cannot carry a writable session: icechunk refuses to pickle one, which
``distributed`` reports as "Could not serialize object of type _HLGExprSequence". There the
writes go through a fork of the session (``Session.fork``): the arrays of the session that the
graph reads or writes are reopened on the fork, each task returns the fork it wrote into,
``icechunk.dask.store_dask`` merges them in a tree and the result is merged into the session,
which the caller commits. icechunk forks only a session without uncommitted changes.

This module holds only that routing; which blocks are written, and in what units, is
``backends.dask``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import dask
import dask.array as da
import dask.local
import dask.threaded
from dask.highlevelgraph import HighLevelGraph, MaterializedLayer

from ..errors import InvalidAttributeError


def session_of(out: Any) -> Any | None:
    """Return the icechunk ``Session`` whose store holds the zarr array ``out``, or None.

    None: ``out`` is not an array of an icechunk store (icechunk is not imported for it).
    """
    store: Any = getattr(out, "store", None)
    if not type(store).__module__.startswith("icechunk"):
        return None
    return store.session


def _runs_here(sources: list[da.Array]) -> bool:
    """Return whether the scheduler that would compute ``sources`` runs their tasks in this process."""
    get = dask.base.get_scheduler(collections=sources)
    return get is None or get in (dask.threaded.get, dask.local.get_sync)


def store(spec, result: da.Array, out: Any, blocks: Callable[[da.Array], tuple[list, list] | None]) -> None:
    """Write ``result`` into ``out``: all of it, or the blocks and regions that ``blocks(result)`` names.

    ``blocks`` returns None for the whole of ``result``, else ``(sources, regions)``: blocks of
    ``result`` and where each goes in ``out``. ``out`` an array of a writable icechunk session on
    a scheduler that pickles tasks: through a fork of the session, merged into it when every
    write is done (the caller commits). Anything else: ``dask.array.store``.
    """
    session = session_of(out)
    if session is not None and not _runs_here([result]):
        if session.has_uncommitted_changes:
            raise spec.error(
                InvalidAttributeError,
                "out is an array of an icechunk session with uncommitted changes; a scheduler that "
                "pickles its tasks (dask.distributed) writes through a fork of the session, and icechunk forks "
                "only a session without them: commit them (session.commit(...)), open a new writable session and "
                "its array, then run again",
                input="out",
            )
        import zarr
        from icechunk.dask import store_dask

        fork = session.fork()
        reopened: dict[int, Any] = {}

        def on_fork(array: Any) -> Any:
            if id(array) not in reopened:
                reopened[id(array)] = zarr.open_array(fork.store, path=array.path, mode="r+")
            return reopened[id(array)]

        target = on_fork(out)
        result = _reading_from(result, session, on_fork)  # the same values: the fork has nothing uncommitted
        sources, regions = blocks(result) or ([result], None)
        if sources:
            session.merge(store_dask(sources=sources, targets=[target] * len(sources), regions=regions))
        return
    sources, regions = blocks(result) or ([result], None)
    if sources:
        da.store(sources, [out] * len(sources), regions=regions, lock=False)


def _reading_from(array: da.Array, session: Any, on_fork) -> da.Array:
    """Return ``array`` with every array of ``session`` in its graph (what ``da.from_zarr`` keeps) on the fork.

    The fork is made from the session without uncommitted changes, so it reads the same values.
    """
    graph = array.__dask_graph__()
    if not isinstance(graph, HighLevelGraph):
        return array
    layers: dict[str, Any] = dict(graph.layers)
    changed = False
    for name, layer in graph.layers.items():
        if not isinstance(layer, MaterializedLayer):
            continue
        swapped = {key: value for key, value in layer.items() if _of(value, session)}
        if swapped:
            layers[name] = MaterializedLayer({**layer, **{key: on_fork(value) for key, value in swapped.items()}})
            changed = True
    if not changed:
        return array
    return da.Array(HighLevelGraph(layers, dict(graph.dependencies)), array.name, array.chunks, meta=array._meta)


def _of(value: Any, session: Any) -> bool:
    """Return whether ``value`` is a zarr array of the (writable) icechunk ``session``."""
    if isinstance(value, (Mapping, tuple, list)) or not hasattr(value, "path"):
        return False
    other = session_of(value)
    return other is not None and not other.read_only and other == session
