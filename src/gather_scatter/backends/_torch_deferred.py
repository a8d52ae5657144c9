"""The torch backend's bounds checks on CUDA without a host sync (:mod:`._deferred` says when they raise).

A check here runs on the device, behind the work already queued, and returns at once:

- :func:`bounds` resolves negatives and maps every bad index onto a valid one (the kernels then
  never address memory outside the data: no device-side assert, which would end the CUDA
  context, and no wild write), in four elementwise passes: ``shifted = i + s`` (valid indices
  land in ``[0, 2s)``), clamped into ``[0, 2s - 1]``, bad where clamping changed it, and the
  clamped value modulo ``s`` (the index itself for a valid one);
- :func:`record` reduces the bad mask to (any bad, first bad position, its value) on the
  device — the value read then, so a caller refilling its index buffer afterwards cannot change
  what the error says — copies those three int64s to pinned host memory without waiting, and
  queues an event after them (:class:`._deferred.Pending`).

:data:`DEVICES` says where checks are deferred: CUDA. The tests add ``"cpu"`` to run this path
without a GPU (there the three numbers are ready at once).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from . import _deferred

DEVICES = {"cuda"}


def applies(t: torch.Tensor) -> bool:
    """Whether a check of ``t``'s call is deferred: its device defers, the mode is 'deferred', not compiling."""
    return t.device.type in DEVICES and _deferred.get_bounds_check() == "deferred" and not torch.compiler.is_compiling()


def bounds(indices: torch.Tensor, sizes: Any, fail: Any) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Return ``(norm, bad)`` for ``indices`` checked on the device, the check queued; None to check eagerly.

    ``norm``: int64, negatives counted from the end, every bad index replaced by a valid one;
    ``bad``: a 0-d bool tensor on the device, whether any index was bad. ``sizes``: one axis size,
    or a tuple of one per component of the last dim (GatherND/ScatterND). ``fail(position,
    value)`` raises the call's error for the first bad position (a tuple in ``indices``' shape).
    None where an axis is empty (every index is bad: the eager check raises at once) or there
    are no indices.
    """
    per_component = isinstance(sizes, tuple)
    if not indices.numel() or (min(sizes) if per_component else sizes) == 0:
        return None
    idx = indices if indices.dtype == torch.int64 else indices.to(torch.int64)
    limit: torch.Tensor | int
    if per_component:
        limit = constant(sizes, idx.device)
        shifted = idx + limit
        clamped = torch.minimum(shifted.clamp_min(0), 2 * limit - 1)
    else:
        limit = int(sizes)
        shifted = idx + limit
        clamped = shifted.clamp(0, 2 * limit - 1)
    bad_mask = clamped != shifted
    norm = clamped.remainder_(limit)
    shape = tuple(indices.shape)
    bad = record(indices, bad_mask, lambda position, value: fail(_unravel(position, shape), value))
    return norm, bad


def writes(write: torch.Tensor, high: int | None, fail: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(safe, bad)`` for TensorScatter's write indices, checked on the device, the check queued.

    A write index is bad below 0 or above ``high`` (None: no upper bound, the circular mode);
    ``safe`` is ``write`` clamped into range, int64. ``fail(batch, value)`` raises the error.
    """
    write = write.to(torch.int64)
    safe = write.clamp(0, high)
    return safe, record(write, safe != write, fail)


def record(values: torch.Tensor, bad_mask: torch.Tensor, fail: Any) -> torch.Tensor:
    """Queue the check of ``bad_mask`` (``values``' shape) and return whether any was bad (0-d bool, on the device).

    One reduction gives the first bad position (``max`` returns the first maximum) and whether
    there is one; the value at that position is read from ``values`` then. The three numbers go
    to pinned host memory without a sync, an event after them.
    """
    flags = bad_mask.reshape(-1).view(torch.uint8)
    hit, first = flags.max(0)
    value = values.reshape(-1).index_select(0, first.reshape(1)).to(torch.int64)
    info = torch.cat([hit.reshape(1).to(torch.int64), first.reshape(1), value])
    ready: Any
    wait: Any
    if info.device.type == "cuda":
        host = torch.empty(3, dtype=torch.int64, pin_memory=True)
        host.copy_(info, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        ready, wait = event.query, event.synchronize
    else:  # the CPU (tests): computed already
        host = info
        ready = wait = _true

    def read() -> tuple[int, int, int]:
        bad, position, value = host.tolist()
        return bad, position, value

    _deferred.defer(_deferred.Pending(ready=ready, wait=wait, read=read, fail=fail))
    return hit.bool()


def constant(values: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """Return ``values`` as an int64 tensor on ``device``, copied from pinned memory without a sync.

    (``torch.tensor(values, device=...)`` copies from pageable memory, which waits for the device.)
    """
    host = torch.tensor(values, dtype=torch.int64)
    if device.type != "cuda":
        return host.to(device)
    return host.pin_memory().to(device, non_blocking=True)


def _unravel(position: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(position, shape)) if math.prod(shape) else ()


def _true() -> bool:
    return True
