"""Gather's and GatherND's paths give the same bits: GatherND with batch_dims on numba's
compiled slice numbers and on NumPy, Gather's fast call and its kernel, for every dtype,
index dtype and thread count, with a bad index reported at its first position on each."""

from __future__ import annotations

import time

import ml_dtypes
import numpy as np
import pytest

import gather_scatter as gs
from gather_scatter import _calls as _runners
from gather_scatter.kernels import _numba as _compiled
from gather_scatter.kernels import gather as gather_kernel
from gather_scatter.resources import threads as _parallel
from gather_scatter.rules import versions as _versions

DTYPES = (np.float32, np.float64, np.int8, np.int64, np.uint16, np.bool_, np.float16, ml_dtypes.bfloat16,
          np.complex128)
compiled = pytest.mark.skipif(_compiled.loops() is None, reason="numba is not installed: only the NumPy path runs")


@pytest.fixture
def split_everything(monkeypatch):
    """Chunks down to one byte of work, so that small cases really split on 1-3 threads."""
    before = gs.get_num_threads()
    monkeypatch.setattr(_parallel, "MIN_CHUNK_BYTES", 1)
    yield
    gs.set_num_threads(before)


def _batched(rng, dtype, index_dtype):
    data = (rng.standard_normal((3, 4, 5, 6, 2)) * 4).astype(dtype)
    indices = np.stack([rng.integers(-5, 5, (3, 4, 7)), rng.integers(-6, 6, (3, 4, 7))], axis=-1)
    return data, indices.astype(index_dtype)


def _expected(data, indices):
    b0, b1 = np.ogrid[: data.shape[0], : data.shape[1]]
    return data[b0[..., None], b1[..., None], indices[..., 0], indices[..., 1]]


@compiled
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
def test_gather_nd_batch_dims_compiled_and_numpy_agree(split_everything, monkeypatch, dtype, index_dtype):
    if index_dtype == np.int32 and dtype == ml_dtypes.bfloat16:
        pytest.skip("com.microsoft GatherND (int32 indices) has no bfloat16")
    data, indices = _batched(np.random.default_rng(3), dtype, index_dtype)
    want = _expected(data, indices)
    spec = _versions.GATHER_ND if index_dtype == np.int64 else _versions.resolve("GatherND", 1, "com.microsoft")
    for threads in (1, 2, 3):
        gs.set_num_threads(threads)
        got = _runners.run_gather_nd(spec, data, indices, 2)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
        with monkeypatch.context() as m:
            m.setattr(_compiled, "_module", False)
            assert _runners.run_gather_nd(spec, data, indices, 2).tobytes() == want.tobytes()


@compiled
@pytest.mark.parametrize("where", [(0, 0, 0, 0), (1, 2, 3, 1), (2, 3, 6, 0)])
def test_gather_nd_batch_dims_reports_the_first_bad_index(split_everything, where):
    data, indices = _batched(np.random.default_rng(4), np.float32, np.int64)
    indices[where] = 9
    later = (2, 3, 6, 1) if where != (2, 3, 6, 0) else None
    if later is not None:
        indices[later] = -9
    for threads in (1, 2, 3):
        gs.set_num_threads(threads)
        with pytest.raises(gs.IndexOutOfBoundsError) as info:
            gs.gather_nd(data, indices, batch_dims=2)
        assert info.value.position == where and info.value.value == 9
        out = np.full((3, 4, 7, 2), -1.0, np.float32)
        with pytest.raises(gs.IndexOutOfBoundsError):
            gs.gather_nd(data, indices, batch_dims=2, out=out)
        assert (out == -1).all()  # nothing written to a caller's buffer


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_gather_rows_split_or_not_give_the_same_bits(split_everything, threads):
    rng = np.random.default_rng(5)
    table = rng.standard_normal((50, 3, 8)).astype(np.float32)
    gs.set_num_threads(threads)
    for axis, n in ((0, 40), (1, 3), (2, 11)):
        idx = rng.integers(-table.shape[axis], table.shape[axis], n)
        assert gather_kernel.run_gather(_versions.GATHER, table, idx, axis).tobytes() == np.take(table, idx, axis).tobytes()


def test_gather_fast_call_up_to_one_mib_matches_the_kernel():
    rng = np.random.default_rng(6)
    table = rng.standard_normal((5000, 64)).astype(np.float32)
    idx = rng.integers(-5000, 5000, 4000)  # 1,024,000 bytes of output: just under 1 MiB
    first = gs.gather(table, idx)  # the signature's first call: the kernel
    again = gs.gather(table, idx)  # then the fast call
    assert again.tobytes() == first.tobytes() == np.take(table, idx, 0).tobytes()
    bad = idx.copy()
    bad[[17, 3000]] = [5000, -5001]
    with pytest.raises(gs.IndexOutOfBoundsError) as info:
        gs.gather(table, bad)
    assert info.value.position == (17,) and info.value.value == 5000


@pytest.mark.parametrize("call", [
    lambda data: gs.gather(data, np.arange(len(data))),
    lambda data: gs.gather_nd(data.reshape(len(data), 1, 1024), np.zeros((len(data), 1, 1), np.int64), batch_dims=1),
    lambda data: gs.gather_elements(data, np.zeros(data.shape, np.int64), axis=1),
], ids=["gather", "gather_nd", "gather_elements"])
@pytest.mark.parametrize("rows", [512, 8192], ids=["2MiB-malloc", "32MiB-cache-block"])
def test_a_fitting_output_skips_the_memory_query_but_not_a_configured_limit(monkeypatch, call, rows):
    """2 MiB: a sixteenth of the memory the last query found, under half a second ago; 32 MiB:
    a block of the buffer cache, which takes no new memory."""
    from gather_scatter.errors import OutputTooLargeError
    from gather_scatter.resources import memory as _memory

    data = np.arange(rows * 1024, dtype=np.float32).reshape(rows, 1024)
    first = call(data)
    del first  # its block, if any, goes back to the cache
    queried = []
    monkeypatch.setattr(_memory, "_seen", (1 << 40, time.monotonic()))  # 1 TiB found just now
    monkeypatch.setattr(_memory, "available_memory", lambda: queried.append(1) or 0)
    result = call(data)
    assert not queried and result.nbytes == rows * 4096
    del result
    previous = gs.set_memory_limit(1000)
    try:
        with pytest.raises(OutputTooLargeError):
            call(data)
    finally:
        gs.set_memory_limit(previous)


@compiled
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
def test_gather_elements_last_axis_rows_compiled_and_numpy_agree(split_everything, monkeypatch, dtype, index_dtype):
    rng = np.random.default_rng(7)
    data = (rng.standard_normal((6, 5, 40)) * 4).astype(dtype)
    indices = rng.integers(-40, 40, (6, 5, 23)).astype(index_dtype)
    want = np.take_along_axis(data, indices.astype(np.int64) % 40, 2)
    for threads in (1, 2, 3):
        gs.set_num_threads(threads)
        assert gs.gather_elements(data, indices, axis=-1).tobytes() == want.tobytes()
        with monkeypatch.context() as m:
            m.setattr(_compiled, "_module", False)
            assert gs.gather_elements(data, indices, axis=2).tobytes() == want.tobytes()
    bad = indices.copy()
    bad[4, 2, 9], bad[5, 0, 0] = 40, -41
    for threads in (1, 2, 3):
        gs.set_num_threads(threads)
        with pytest.raises(gs.IndexOutOfBoundsError) as info:
            gs.gather_elements(data, bad, axis=2)
        assert info.value.position == (4, 2, 9) and info.value.value == 40


def test_gather_of_an_accepted_signature_above_the_fast_size_keeps_every_value_check():
    rng = np.random.default_rng(8)
    table = rng.standard_normal((3, 2000, 256)).astype(np.float32)
    idx = rng.integers(-2000, 2000, (2, 300))  # 1.8 MB of output: the kernel less its static checks
    first, again = gs.gather(table, idx, axis=1), gs.gather(table, idx, axis=1)
    assert again.tobytes() == first.tobytes() == np.take(table, idx, 1).tobytes()
    scalar = gs.gather(table, np.array(-1), axis=1)  # a 0-d index of the same rank-0 signature twice
    assert gs.gather(table, np.array(-1), axis=1).tobytes() == scalar.tobytes() == table[:, -1].tobytes()
    swapped = idx.astype(">i8")
    assert gs.gather(table, swapped, axis=1).tobytes() == first.tobytes()
    assert gs.gather(table, swapped, axis=1).tobytes() == first.tobytes()
    bad = idx.copy()
    bad[1, 7], bad[1, 9] = 2000, -2001
    with pytest.raises(gs.IndexOutOfBoundsError) as info:
        gs.gather(table, bad, axis=1)
    assert info.value.position == (1, 7) and info.value.value == 2000
    previous = gs.set_memory_limit(1 << 20)
    try:
        with pytest.raises(gs.OutputTooLargeError):
            gs.gather(table, idx, axis=1)
    finally:
        gs.set_memory_limit(previous)


@compiled
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.uint16, np.float64, ml_dtypes.bfloat16, np.complex128])
def test_gather_rows_compiled_above_the_fast_size_match_take_and_report_the_first_bad_index(
        split_everything, dtype, index_dtype, threads):
    """Axis 0 of an accepted signature above the fast call's size: each thread checks its
    range (min and max) and copies its rows, prefetched (gather._take_rows_compiled)."""
    rng = np.random.default_rng(9)
    table = (rng.standard_normal((500, 4, 1400)) * 5).astype(dtype)  # 200 rows of 5,600: over 1 MiB of output
    gs.set_num_threads(threads)
    for indices in (rng.integers(0, 500, (40, 5)), rng.integers(-500, 500, (40, 5)), np.full((1, 1), -500)):
        indices = indices.astype(index_dtype)
        expected = np.take(table, indices, 0)
        for _ in range(3):  # the first call: the kernel; then the accepted signature's path
            assert gs.gather(table, indices).tobytes() == expected.tobytes()
    indices = rng.integers(-500, 500, (40, 5)).astype(index_dtype)
    gs.gather(table, indices)
    for position, value in (((0, 0), 500), ((20, 3), -501), ((39, 4), 10**6)):
        bad = indices.copy()
        bad[position] = value
        with pytest.raises(gs.IndexOutOfBoundsError) as info:
            gs.gather(table, bad)
        assert info.value.position == position and info.value.value == value
