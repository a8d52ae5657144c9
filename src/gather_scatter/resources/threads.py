"""The thread count and a small pool that splits a kernel into disjoint chunks.

NumPy releases the GIL inside ``take``, ``put``, copies and ufunc loops on non-object
dtypes, so a few threads each moving a disjoint output range run in parallel. Each chunk's
result is independent of how many chunks there are, so results are bitwise the same for
any thread count.

Any number of threads may call the kernels at once, and change the thread count meanwhile.
Growing the pool replaces it and never shuts the old one down, so no call loses the pool it
is submitting to; the old pool's threads exit once no call holds it. A chunk already on the
pool runs any nested split itself, so the pool never waits on the pool. A forked child starts
with no pool (the parent's threads do not exist there) and builds its own on first use.

The thread count follows the one rule of ``_settings``: :func:`set_num_threads` raises
ValueError for anything but an integer >= 1, and a ``GATHER_SCATTER_NUM_THREADS`` value it
would refuse is ignored with a RuntimeWarning at import.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from .settings import checked, from_env

__all__ = ["get_num_threads", "ranges", "run", "set_num_threads"]

T = TypeVar("T")

ENV_VAR = "GATHER_SCATTER_NUM_THREADS"

# Below this many bytes of work per chunk, a thread hand-off costs more than it saves.
MIN_CHUNK_BYTES = 1 << 20


def _available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


_lock = threading.Lock()
_num_threads = from_env(ENV_VAR, 1, "the cores this process may use") or _available_cores()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_on_pool = threading.local()  # .worker is True on the pool's own threads


def _mark_worker() -> None:
    _on_pool.worker = True


def _forget_pool() -> None:
    """In a forked child: the parent's pool has no threads here and its lock may be held."""
    global _lock, _pool, _pool_size
    _lock, _pool, _pool_size = threading.Lock(), None, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def get_num_threads() -> int:
    """The number of threads the kernels may use.

    Returns
    -------
    int
        Set by :func:`set_num_threads`, else the environment variable
        ``GATHER_SCATTER_NUM_THREADS`` read at import (an int >= 1; any other value is
        ignored with a RuntimeWarning), else the cores this process may run on.
    """
    return _num_threads


def set_num_threads(n: int) -> None:
    """Use at most ``n`` threads per kernel call (1 = everything on the calling thread).

    Results do not depend on ``n``: chunks write disjoint outputs and reductions keep the
    row-major order of their updates.

    Parameters
    ----------
    n : int
        At least 1.

    Raises
    ------
    ValueError
        ``n`` is not an integer (Python or NumPy, not bool) >= 1.
    """
    global _num_threads
    _num_threads = checked("set_num_threads", "n", n, 1)


def _executor(workers: int) -> ThreadPoolExecutor:
    """A pool of at least ``workers`` threads. Growing replaces the shared pool but never
    shuts the old one down: a call on another thread may still be submitting to it. Once no
    call holds it, it is collected and its idle threads exit.
    """
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size < workers:
            _pool = ThreadPoolExecutor(workers, thread_name_prefix="gather_scatter", initializer=_mark_worker)
            _pool_size = workers
        return _pool


def ranges(n: int, work_bytes: int, parts: int | None = None) -> list[tuple[int, int]]:
    """Split ``range(n)`` into at most ``parts`` (default: the thread count) contiguous
    ``(lo, hi)`` ranges, fewer when each would move less than ``MIN_CHUNK_BYTES``.
    """
    parts = get_num_threads() if parts is None else parts
    parts = max(1, min(parts, n, work_bytes // MIN_CHUNK_BYTES))
    bounds = [n * i // parts for i in range(parts + 1)]
    return list(itertools.pairwise(bounds))


def run(fn: Callable[[int, int], T], chunks: Sequence[tuple[int, int]]) -> list[T]:
    """``[fn(lo, hi) for lo, hi in chunks]``, the first on this thread, the rest on the pool.

    A chunk that has started runs to its end even if another raises, so no write is left in
    flight; then the exception of the earliest chunk is raised. On a pool thread (a chunk
    that splits again) the chunks run on that thread, in order, so a pool thread never waits
    on the pool and nested calls cannot deadlock it.
    """
    if len(chunks) <= 1 or getattr(_on_pool, "worker", False):
        return [fn(lo, hi) for lo, hi in chunks]
    pool = _executor(len(chunks) - 1)  # one pool for the whole call, whatever other threads do
    futures = [pool.submit(fn, lo, hi) for lo, hi in chunks[1:]]
    results: list = []
    errors: list = []
    for f in [None, *futures]:
        try:
            results.append(fn(*chunks[0]) if f is None else f.result())
        except BaseException as exc:  # noqa: BLE001 - re-raised below, after all chunks finished
            errors.append(exc)
            results.append(None)
    if errors:
        raise errors[0]
    return results
