"""Output buffers, reused once every array viewing them is gone (like onnxruntime's arena).

A fresh large NumPy array is mapped by the kernel page by page on first write; on a virtual
machine those faults can cost as much as the gather itself (100 MB: ~9 ms of faults against
~10 ms of copying, measured). So big outputs are carved from a small cache of blocks. Safety
does not depend on the caller: an output's ``base`` is a :class:`_Block`, every view of the
output keeps that block alive, and the block goes back to the cache only from its ``__del__``,
when no array can reach its memory any more.

The cache is shared by all threads under one lock; a forked child gets a fresh lock, so a
thread of the parent that held it at the fork cannot leave it held in the child. The cache
size follows the one rule of ``_settings``: :func:`set_buffer_cache_size` takes any integer
>= 0 and raises ValueError for anything else.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections import OrderedDict

import numpy as np

from .settings import checked

__all__ = ["empty", "get_buffer_cache_size", "reused", "set_buffer_cache_size"]

# Smaller arrays come from malloc: glibc serves anything below its mmap ceiling (32 MiB) from
# memory already mapped once a block of that size was freed, and the cache's lock and
# bookkeeping cost ~15 us per output in a loop of copies (a 2.5 MB gather: ~10% of it).
MIN_BYTES = 32 << 20
_GRAIN = 1 << 21  # block sizes round up to huge pages, so near sizes share blocks

_lock = threading.Lock()
_free: OrderedDict[int, list[tuple[np.ndarray, int]]] = OrderedDict()  # size -> (raw block, address), oldest first
_free_bytes = 0
_limit = 512 << 20


def _new_lock_in_child() -> None:
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_lock_in_child)


class _Block:
    """Owner of one raw block while arrays use it (their ``base``): the array interface of the
    output carved from it, so carving is one ``np.asarray`` (a uint8 interface viewed and
    reshaped cost ~4 us per output, ~12 us right after a large copy had evicted the caches).
    """

    __slots__ = ("__array_interface__", "address", "raw")

    def __init__(self, raw: np.ndarray, address: int, shape: tuple[int, ...], typestr: str) -> None:
        self.raw, self.address = raw, address
        self.__array_interface__ = {"shape": shape, "typestr": typestr, "version": 3, "data": (address, False)}

    def __del__(self) -> None:
        # interpreter shutdown: module globals may already be gone
        with contextlib.suppress(Exception):
            _give_back(self.raw, self.address)


def _give_back(raw: np.ndarray, address: int) -> None:
    global _free_bytes
    with _lock:
        if raw.nbytes > _limit:
            return
        _free.setdefault(raw.nbytes, []).append((raw, address))
        _free.move_to_end(raw.nbytes)
        _free_bytes += raw.nbytes
        _evict()


def _evict() -> None:
    """Drop cached blocks, least recently freed size class first, until within the limit.
    The caller holds ``_lock``.
    """
    global _free_bytes
    while _free_bytes > _limit:
        size, blocks = next(iter(_free.items()))
        blocks.pop(0)
        _free_bytes -= size
        if not blocks:
            del _free[size]


def empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """``np.empty(shape, dtype)``, from the cache when the array is big and holds no objects."""
    array = reused(shape, dtype)
    if array is not None:
        return array
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < MIN_BYTES or dtype.hasobject or _limit == 0:
        return np.empty(shape, dtype)
    raw = np.empty(-(-nbytes // _GRAIN) * _GRAIN, np.uint8)
    return _view((raw, raw.ctypes.data), nbytes, shape, dtype)


def reused(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
    """An uninitialized array of ``shape`` and ``dtype`` on a cached block (memory already
    mapped: it takes no new memory), or None where no cached block fits.
    """
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < MIN_BYTES or dtype.hasobject or not _free:
        return None
    size = -(-nbytes // _GRAIN) * _GRAIN
    global _free_bytes
    with _lock:
        blocks = _free.get(size)
        block = blocks.pop() if blocks else None
        if block is not None:
            _free_bytes -= size
            if not blocks:
                del _free[size]
    return None if block is None else _view(block, nbytes, shape, dtype)


def _view(block: tuple[np.ndarray, int], nbytes: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if dtype.isbuiltin == 1:  # NumPy's own types in native order: the interface says it all
        return np.asarray(_Block(*block, shape, dtype.str))
    return np.asarray(_Block(*block, (nbytes,), "|u1")).view(dtype).reshape(shape)


def get_buffer_cache_size() -> int:
    """Bytes of freed output buffers kept for reuse (default 512 MiB)."""
    return _limit


def set_buffer_cache_size(nbytes: int) -> None:
    """Keep at most ``nbytes`` of freed output buffers for reuse; 0 turns reuse off.

    Big outputs (>= 32 MiB, non-object dtypes) are then served from memory that is already
    mapped, which saves the page faults of a fresh allocation. The cache never holds memory an
    array can still reach; lowering the size frees the excess at once.

    Raises
    ------
    ValueError
        ``nbytes`` is not an integer (Python or NumPy, not bool) >= 0.
    """
    global _limit
    nbytes = checked("set_buffer_cache_size", "nbytes", nbytes, 0)
    with _lock:
        _limit = nbytes
        _evict()
