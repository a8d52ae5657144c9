"""The memory limit that kernels check an output's byte count against before allocating it.

The limit is, first that wins: :func:`set_memory_limit`, the ``GATHER_SCATTER_MEMORY_LIMIT``
environment variable (bytes, an int >= 0), or the memory available now (``MemAvailable`` of
``/proc/meminfo``, else ``sysconf`` free pages, else no limit below the int64 range).

Both follow the one rule of ``_settings``: :func:`set_memory_limit` raises ValueError for
anything but an integer >= 0 (or None), and a value of the variable it would refuse is
ignored with one RuntimeWarning per value, never an error from a kernel. The variable is
read at each call, so a change to ``os.environ`` applies from the next call on: the read is
one lookup in ``os.environ``'s own mapping (``os.environ.get`` costs a microsecond, most of a
small call's budget), and a value is parsed once, when it first appears.
"""

from __future__ import annotations

import os
import time

from .settings import checked, from_env

ENV_VAR = "GATHER_SCATTER_MEMORY_LIMIT"
INT64_MAX = 2**63 - 1
# Below this an output is never refused unless a limit is set, so small calls skip the query.
_QUERY_FLOOR = 1 << 20

# The last query of the memory available: (bytes, time.monotonic()); see exceeded().
_seen: tuple[int, float] = (0, 0.0)
_MARGIN, _FRESH_S = 16, 0.5

_limit: int | None = None
# os.environ's backing dict and the key as it stores it (bytes on POSIX): what os.environ.get
# reads, without the encode and decode; os.environ.get where an implementation lacks them.
try:
    _ENV_KEY, _ENV_DATA = os.environ.encodekey(ENV_VAR), os.environ._data  # type: ignore[attr-defined]
except AttributeError:  # pragma: no cover
    _ENV_KEY, _ENV_DATA = ENV_VAR, os.environ
_parsed: tuple = (None, None)  # (the variable's raw value, its limit): parsed once per value


def set_memory_limit(nbytes: int | None) -> int | None:
    """Set the largest output, in bytes, that a kernel may allocate; None restores the default.

    Parameters
    ----------
    nbytes : int >= 0 or None
        The limit. None: the ``GATHER_SCATTER_MEMORY_LIMIT`` environment variable if set,
        else the memory available at each call.

    Returns
    -------
    int or None
        The previous setting, so a caller can restore it.

    Raises
    ------
    ValueError
        ``nbytes`` is not an integer (Python or NumPy, not bool) >= 0.

    Examples
    --------
    >>> import numpy as np
    >>> from gather_scatter import OutputTooLargeError, gather
    >>> previous = set_memory_limit(1000)
    >>> try:
    ...     gather(np.zeros(10), np.zeros(1000, dtype=np.int64))
    ... except OutputTooLargeError as e:
    ...     print(e)
    Gather-13: output of shape (1000,) and dtype float64 would take 8000 bytes, more than the memory limit of 1000 bytes (see gather_scatter.set_memory_limit)
    >>> set_memory_limit(previous)
    1000
    """  # noqa: E501 - exact doctest output, cannot be wrapped
    global _limit
    if nbytes is not None:
        nbytes = checked("set_memory_limit", "nbytes", nbytes, 0)
    previous, _limit = _limit, nbytes
    return previous


def memory_limit() -> int:
    """The limit in bytes now in effect (see :func:`set_memory_limit`)."""
    configured = _configured()
    return configured if configured is not None else available_memory()


def exceeded(nbytes: int) -> int | None:
    """The limit if ``nbytes`` exceeds it, else None (cheap for small outputs).

    Without a configured limit, the memory available is queried (``/proc/meminfo``: ~20 us)
    unless the output is at most 1 MiB, or at most a sixteenth of what the last query found
    less than half a second ago: the output then fits with room to spare, whatever the
    other processes did meanwhile, short of taking fifteen sixteenths in half a second.
    """
    global _seen
    configured = _configured()
    if configured is None:
        if nbytes <= _QUERY_FLOOR:
            return None
        available, when = _seen
        now = time.monotonic()
        if nbytes * _MARGIN <= available and now - when < _FRESH_S:
            return None
        configured = available_memory()
        _seen = (configured, now)
    return configured if nbytes > configured else None


def _configured() -> int | None:
    global _parsed
    if _limit is not None:
        return _limit
    raw = _ENV_DATA.get(_ENV_KEY)
    if raw is None:
        return None
    if _parsed[0] != raw:
        _parsed = (raw, from_env(ENV_VAR, 0, "the memory available"))
    return _parsed[1]


def available_memory() -> int:
    """Bytes of memory available now; ``2**63 - 1`` where the system does not say."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return INT64_MAX
