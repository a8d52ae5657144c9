"""Settings follow one rule: a call takes any integer (Python or NumPy, not bool) at or above
its minimum and raises ValueError otherwise; an environment variable the call would refuse is
ignored with one RuntimeWarning, never an import or kernel failure."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import gather_scatter as gs


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})


SETTERS = [  # (setter, minimum, getter: None where the setter returns the previous value)
    (gs.set_num_threads, 1, gs.get_num_threads),
    (gs.set_buffer_cache_size, 0, gs.get_buffer_cache_size),
    (gs.set_memory_limit, 0, None),
]


@pytest.mark.parametrize(("setter", "minimum", "getter"), SETTERS, ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("value", [np.int64(3), np.uint16(3), np.int32(3), 3])
def test_every_setter_takes_any_integer(setter, minimum, getter, value):
    before = getter() if getter else setter(None)
    try:
        setter(value)
        now = getter() if getter else setter(None)
        assert now == 3 and type(now) is int
    finally:
        setter(before)


@pytest.mark.parametrize(("setter", "minimum", "getter"), SETTERS, ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("value", ["below", True, 2.0, "3", np.float64(3)], ids=repr)
def test_every_setter_refuses_the_same_way(setter, minimum, getter, value):
    value = minimum - 1 if value == "below" else value
    name = "n" if setter is gs.set_num_threads else "nbytes"
    with pytest.raises(ValueError, match=rf"^{setter.__name__}: {name} must be an int >= {minimum}, got "):
        setter(value)


@pytest.mark.parametrize("text", ["abc", "0", "-5", "2.5"])
def test_a_bad_thread_count_in_the_environment_warns_and_uses_the_default(text):
    result = _python("import gather_scatter as gs, os; print(gs.get_num_threads(), len(os.sched_getaffinity(0)))",
                     GATHER_SCATTER_NUM_THREADS=text)
    assert result.returncode == 0, result.stderr
    threads, cores = result.stdout.split()
    assert threads == cores
    assert f"RuntimeWarning: GATHER_SCATTER_NUM_THREADS='{text}' is not an integer >= 1; ignored, using the cores " \
           "this process may use" in result.stderr


def test_a_good_thread_count_in_the_environment_is_used():
    result = _python("import gather_scatter as gs; print(gs.get_num_threads())", GATHER_SCATTER_NUM_THREADS="3")
    assert (result.returncode, result.stdout.strip(), result.stderr) == (0, "3", "")


@pytest.mark.parametrize("text", ["lots", "-1"])
def test_a_bad_memory_limit_in_the_environment_warns_once_and_is_ignored(text):
    code = ("import numpy as np, gather_scatter as gs\n"
            "for _ in range(3): print(gs.gather(np.arange(10.0), np.array([1, 2])).sum())\n"
            "print(gs.memory_limit() > 1000)")
    result = _python(code, GATHER_SCATTER_MEMORY_LIMIT=text)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["3.0", "3.0", "3.0", "True"]
    assert result.stderr.count(f"GATHER_SCATTER_MEMORY_LIMIT='{text}' is not an integer >= 0; ignored, using "
                               "the memory available") == 1


def test_a_good_memory_limit_in_the_environment_applies(monkeypatch):
    monkeypatch.setenv("GATHER_SCATTER_MEMORY_LIMIT", "100")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gs.memory_limit() == 100
        with pytest.raises(gs.OutputTooLargeError):
            gs.gather(np.zeros(10), np.zeros(20, dtype=np.int64))


def test_the_memory_available_is_queried_unless_an_output_fits_with_room_by_a_recent_query(monkeypatch):
    """Without a configured limit an output over 1 MiB is checked against the memory available:
    queried, unless at most a sixteenth of what a query found under half a second ago."""
    import time

    from gather_scatter.resources import memory as _memory

    found = []
    monkeypatch.delenv(_memory.ENV_VAR, raising=False)
    monkeypatch.setattr(_memory, "_limit", None)
    monkeypatch.setattr(_memory, "available_memory", lambda: found.append(1) or 64 << 20)
    monkeypatch.setattr(_memory, "_seen", (0, 0.0))
    assert _memory.exceeded(1 << 20) is None and not found  # 1 MiB: never queried
    assert _memory.exceeded(4 << 20) is None and found == [1]  # the first query: 64 MiB found
    assert _memory.exceeded(4 << 20) is None and found == [1]  # a sixteenth of it, just now: no query
    assert _memory.exceeded((4 << 20) + 1) is None and found == [1, 1]  # more than a sixteenth: queried
    assert _memory.exceeded(65 << 20) == 64 << 20 and len(found) == 3  # refused, on a fresh query
    monkeypatch.setattr(_memory, "_seen", (64 << 20, time.monotonic() - 1.0))  # a second ago: stale
    assert _memory.exceeded(2 << 20) is None and len(found) == 4
    monkeypatch.setattr(_memory, "_seen", (1 << 40, time.monotonic()))
    gs.set_memory_limit(1 << 20)  # a configured limit is always applied
    try:
        assert _memory.exceeded(2 << 20) == 1 << 20
    finally:
        gs.set_memory_limit(None)
