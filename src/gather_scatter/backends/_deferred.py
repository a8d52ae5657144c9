"""Bounds checks that do not make the host wait for the device: where and when a bad index is raised.

On a GPU, an eager check reads the indices' minimum and maximum back to the host before the
call can go on: every call waits for the device to finish all the work queued before it (a
host sync, ~0.15 ms on an H200, more than a gather of a million indices takes). In the
``'deferred'`` mode (the default for torch tensors on CUDA) a call does not wait:

- on the device, each index is checked, negatives resolved and a bad index replaced by a valid
  one (so the kernels never address memory outside the data: no device assert, no wild write),
  and the first bad position and its value are reduced into three numbers;
- those numbers are copied to pinned host memory behind the call's work, with an event after
  them; the call returns its result at once;
- the check is read where the host learns it without waiting: at the start of the **next**
  gather_scatter call on torch tensors or JAX arrays on the same thread (any operator, any
  device: each one's ``backends.backend_for``; NumPy calls of a signature already seen skip it,
  so as not to slow the small calls) for every check whose event has completed, at
  :func:`synchronize` (which waits for all of this thread's checks), and at interpreter exit (a
  message on stderr for any bad index nobody was told of).

A bad index then raises the eager IndexOutOfBoundsError — operator and version, first bad
position, value, axis, size and valid range — with a note that it was found after its call
returned and that that call's result is not valid. ``out=`` is written only where the check
passed (on the device: ``out`` keeps its values when an index was bad), so a bad index never
leaves the caller's tensor half written. :func:`set_bounds_check` (or
``GATHER_SCATTER_BOUNDS_CHECK=eager``) keeps today's eager behaviour: the error from the call
itself, at the cost of the sync. The CPU has no sync to save: it is always checked eagerly,
and so is every call under ``torch.compile`` (a custom op, see ``_torch_compile``).

This module knows no array library: a backend gives :func:`defer` a :class:`Pending` check.
"""

from __future__ import annotations

import atexit
import sys
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import GatherScatterError
from ..resources.settings import choice_from_env

MODES = ("deferred", "eager")
ENV_VAR = "GATHER_SCATTER_BOUNDS_CHECK"
NOTE = (
    " (found on the device after that call returned, by the 'deferred' bounds check: the call's result is not "
    "valid; gather_scatter.set_bounds_check('eager') raises from the call itself)"
)


def _mode_from_env() -> str:
    return choice_from_env(ENV_VAR, MODES)


_mode = [_mode_from_env()]


def set_bounds_check(mode: str) -> str:
    """Choose when a bad index found on a GPU is raised, and return the previous choice.

    Parameters
    ----------
    mode : {'deferred', 'eager'}
        ``'deferred'`` (the default; also ``GATHER_SCATTER_BOUNDS_CHECK=deferred``): torch
        tensors on CUDA are checked on the device without the host waiting; a bad index raises
        its IndexOutOfBoundsError at the next gather_scatter call on torch or JAX arrays on the same thread, at
        :func:`synchronize`, or is reported on stderr at exit. ``'eager'``: every call reads
        its check back before returning (a host sync per call) and raises from the call itself.
        The CPU, and calls under ``torch.compile``, are checked eagerly either way.

    Returns
    -------
    str
        The mode before this call.

    Raises
    ------
    ValueError
        For any other ``mode``.
    """
    if mode not in MODES:
        raise ValueError(f"set_bounds_check: mode must be one of {MODES}, got {mode!r}")
    previous, _mode[0] = _mode[0], mode
    return previous


def get_bounds_check() -> str:
    """Return the bounds-check mode, ``'deferred'`` or ``'eager'`` (:func:`set_bounds_check`)."""
    return _mode[0]


@dataclass(eq=False)
class Pending:
    """One call's check, queued until its values reach the host.

    ``ready()``: whether the values are on the host (never waits); ``wait()``: wait until they
    are; ``read()``: ``(bad, position, value)``, the first bad position flat in row-major order
    of the checked array; ``fail(position, value)``: raise that call's error (eager message).
    """

    ready: Callable[[], bool]
    wait: Callable[[], object]
    read: Callable[[], tuple[int, int, int]]
    fail: Callable[[int, int], None]


class _Queue(threading.local):
    def __init__(self) -> None:  # once in each thread that uses it: its own deque
        self.checks: deque[Pending] = deque()
        with _lock:
            _queues.append(self.checks)


_lock = threading.Lock()
_queues: list[deque[Pending]] = []  # every thread's (a finished thread's too), for the report at exit
_local = _Queue()


def defer(check: Pending) -> None:
    """Queue ``check`` on this thread, to be read by :func:`settle` or :func:`synchronize`."""
    _local.checks.append(check)


def settle() -> None:
    """Raise the error of this thread's oldest check that found a bad index and has reached the host.

    Never waits: checks still on the device stay queued (they complete in order on a stream, so
    the first one not ready ends the look). Called at the start of every call of a backend that
    defers. Passed checks are dropped; a failed one is dropped when raised.
    """
    checks = _local.checks
    while checks and checks[0].ready():
        _raise_if_bad(checks.popleft())


def synchronize() -> None:
    """Wait for every deferred bounds check of this thread and raise the first bad index's error.

    In the ``'deferred'`` mode (:func:`set_bounds_check`, the default for torch tensors on
    CUDA) a call returns before its indices are checked on the device; this waits for those
    checks (a host sync) and raises the IndexOutOfBoundsError of the oldest call that had a bad
    index — the eager message (operator and version, position, value, axis, size, valid range)
    with a note that the call's result is not valid. Checks after a failed one stay queued for
    the next call or the next ``synchronize()``. With nothing queued it returns at once.

    Raises
    ------
    IndexOutOfBoundsError
        The first queued call, in call order, that had a bad index (also the error of a bad
        TensorScatter write index).
    """
    checks = _local.checks
    while checks:
        check = checks.popleft()
        check.wait()
        _raise_if_bad(check)


def pending() -> int:
    """How many of this thread's checks are still queued (read nowhere yet)."""
    return len(_local.checks)


def _raise_if_bad(check: Pending) -> None:
    bad, position, value = check.read()
    if not bad:
        return
    try:
        check.fail(position, value)
    except GatherScatterError as err:
        raise err.with_note(NOTE) from None


@atexit.register
def _report_at_exit() -> None:
    """Say on stderr which deferred checks found a bad index that no call raised (never raises)."""
    for checks in list(_queues):
        while checks:
            check = checks.popleft()
            try:
                check.wait()
                _raise_if_bad(check)
            except GatherScatterError as err:
                print(f"gather_scatter: a bad index was never raised: {err}", file=sys.stderr)
            except Exception:  # noqa: BLE001 (the device may be gone at exit: nothing more to say)
                return
