"""ScatterND's reductions on whole slices (kernels._reductions.reduce_into): the compiled row loop
and NumPy's rounds give ufunc.at's bits (the spec's row-major loop) for every dtype, with and
without duplicates, on one thread and on two with the columns split. The fused copy and write
(kernels._writes.copy_and_scatter_rows) gives the spec loop's bits too, slices narrower and
wider than a cache line, on one to three threads each taking a range of rows."""

import ml_dtypes
import numpy as np
import pytest

import gather_scatter as gs
from gather_scatter.kernels import _numba as _compiled
from gather_scatter.kernels import _reductions, _writes
from gather_scatter.resources import threads as _parallel
from gather_scatter.rules.versions import Reduction

# Load the compiled loops now: the paths under test take them only once numba is loaded (or
# after a process's first ~100 such calls, _compiled.warm_loops), so "compiled" means compiled.
LOOPS = _compiled.loops()

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_, np.float16, ml_dtypes.bfloat16,
          np.complex64, object]
REDUCTIONS = [Reduction.ADD, Reduction.MUL, Reduction.MAX, Reduction.MIN]


def _inputs(dtype, n_rows, n_updates, width, distinct, rng):
    def draw(shape):
        values = rng.standard_normal(shape) * 3
        if dtype is object:
            return values.astype(object)
        if np.dtype(dtype).kind == "c":
            return (values + 1j * rng.standard_normal(shape)).astype(dtype)
        if np.dtype(dtype).kind in "iub":
            return (values * 10).astype(np.int64).astype(dtype)
        values[values > 4] = np.nan  # NaN in max/min: the first operand's or the update's
        return values.astype(dtype)

    offsets = rng.permutation(n_rows)[:n_updates] if distinct else rng.integers(0, n_rows, n_updates)
    return draw((n_rows, width)), offsets.astype(np.int64), draw((n_updates, width))


@pytest.mark.parametrize("strided", [False, True], ids=["rows", "strided"])
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("distinct", [True, False], ids=["distinct", "duplicates"])
@pytest.mark.parametrize("reduction", REDUCTIONS, ids=lambda r: r.value)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_reduce_into_matches_ufunc_at(dtype, reduction, distinct, threads, compiled, strided, monkeypatch):
    rng = np.random.default_rng(7)
    data, offsets, values = _inputs(dtype, 40, 30 if distinct else 200, 17, distinct, rng)
    expected = data.copy()
    with np.errstate(all="ignore"):
        _reductions.UFUNCS[reduction].at(expected, offsets, values)
    if not compiled:
        monkeypatch.setattr(_compiled, "loops", lambda: None)
        if threads == 2:  # NumPy's path one row per step too (by default 8 MiB of rows per step)
            monkeypatch.setattr(_reductions, "_ROUND_BYTES", 1)
    elif LOOPS is None:
        pytest.skip("numba's loops are not available here (GATHER_SCATTER_COMPILED=0 or no numba)")
    monkeypatch.setattr(_parallel, "MIN_CHUNK_BYTES", 1)
    before = gs.get_num_threads()
    gs.set_num_threads(threads)
    try:
        if strided:  # a view with a gap between rows, addressed as (4, 10) blocks of rows
            actual = np.zeros((40, 2, 17), dtype)[:, 0]
            actual[...] = data
            with np.errstate(all="ignore"):
                _reductions.reduce_into(actual.reshape(4, 10, 17), offsets, values, reduction, (4, 10))
        else:
            actual = data.copy()
            with np.errstate(all="ignore"):
                _reductions.reduce_into(actual, offsets, values, reduction)
    finally:
        gs.set_num_threads(before)
    assert actual.tobytes() == expected.tobytes() if dtype is not object else (actual == expected).all()


def _spec_loop(data, offsets, values, reduction):
    """ScatterND's reference loop on whole slices: output = copy(data), then each update in order."""
    output = data.copy()
    with np.errstate(all="ignore"):
        for i, row in enumerate(offsets):
            ufunc = _reductions.UFUNCS.get(reduction)
            output[row] = values[i] if reduction is Reduction.NONE else ufunc(output[row], values[i])
    return output


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("width", [1, 5, 17, 64])  # 64 float32: a cache line or more, copied around the updates
# 300 into 40 rows: every row, most of them many times; 40 and 60 (about one or two a row, some
# rows twice or more, some none): reductions of wide rows then take the fused copy (_FUSED_DEPTH)
@pytest.mark.parametrize("n_updates", [0, 1, 7, 40, 60, 300])
@pytest.mark.parametrize("reduction", [Reduction.NONE, *REDUCTIONS], ids=lambda r: r.value)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_, np.uint16,
                                   np.dtype(">f4"), np.float16, ml_dtypes.bfloat16, np.complex64],
                         ids=lambda d: np.dtype(d).str)
def test_copy_and_scatter_rows_matches_the_spec_loop(dtype, reduction, n_updates, width, threads, monkeypatch):
    if LOOPS is None:
        pytest.skip("numba's loops are not available here (GATHER_SCATTER_COMPILED=0 or no numba)")
    rng = np.random.default_rng(11)
    data, _, values = _inputs(dtype, 40, n_updates, width, False, rng)
    offsets = rng.integers(0, 40, n_updates).astype(np.int64)
    before_data = data.copy()
    expected = _spec_loop(data, offsets, values, reduction)
    monkeypatch.setattr(_parallel, "MIN_CHUNK_BYTES", 1)  # a range of rows per thread
    narrow = reduction is Reduction.NONE and width * np.dtype(dtype).itemsize < _writes._ROW_BYTES
    if narrow:  # by default such assignments take NumPy's put, nothing written; the loop's own branch too
        assert not _writes.copy_and_scatter_rows(np.empty_like(data), data, offsets, values, reduction)
        monkeypatch.setattr(_writes, "_ROW_BYTES", 1)
    before = gs.get_num_threads()
    gs.set_num_threads(threads)
    try:
        output = np.full_like(data, 7)  # whatever the buffer held before
        done = _writes.copy_and_scatter_rows(output, data, offsets, values, reduction)
    finally:
        gs.set_num_threads(before)
    dtype = np.dtype(dtype)
    # Where the loop does not apply (byte-swapped reductions, complex, ml_dtypes' types but
    # bfloat16) it writes nothing and says so: the caller then takes NumPy's path. float16 and
    # bfloat16 reductions run compiled, rounded after every update.
    applies = reduction is Reduction.NONE or dtype.isnative and (
        dtype.kind in "iub" or (dtype.kind == "f" and dtype.itemsize >= 4) or dtype in (np.float16, ml_dtypes.bfloat16)
    )
    assert done is applies
    if done:
        assert output.tobytes() == expected.tobytes()
    else:
        assert (output.view(np.uint8) == np.full_like(data, 7).view(np.uint8)).all()
    assert data.tobytes() == before_data.tobytes()


def test_scatter_nd_fused_path_agrees_with_numpys_and_across_calls(monkeypatch):
    """The fused loop (first call: the whole kernel; later calls: the accepted signature's path,
    data of MBs, the buffer cache in play) against the NumPy path, duplicates included."""
    rng = np.random.default_rng(5)
    data = rng.standard_normal((1000, 300)).astype(np.float32)  # 1.2 MB: past the small-call path
    indices = rng.integers(-1000, 1000, (500, 1))
    updates = rng.standard_normal((500, 300)).astype(np.float32)
    for reduction in ("none", "add", "mul", "max", "min"):
        calls = [gs.scatter_nd(data, indices, updates, reduction) for _ in range(3)]
        monkeypatch.setattr(_compiled, "loops", lambda: None)
        expected = gs.scatter_nd(data, indices, updates, reduction)
        monkeypatch.undo()
        assert all(c.tobytes() == expected.tobytes() for c in calls), reduction


@pytest.mark.parametrize("n", [0, 1])
def test_reduce_into_few_updates(n):
    data = np.arange(12.0).reshape(4, 3)
    expected = data.copy()
    offsets, values = np.array([2][:n], np.int64), np.ones((n, 3))
    np.add.at(expected, offsets, values)
    _reductions.reduce_into(data, offsets, values, Reduction.ADD)
    assert data.tobytes() == expected.tobytes()


def test_copy_into_splits_only_big_copies(monkeypatch):
    calls = []
    real = _parallel.run
    monkeypatch.setattr(_parallel, "run", lambda fn, chunks: calls.append(len(chunks)) or real(fn, chunks))
    src = np.arange(1 << 20, dtype=np.float32)  # 4 MiB: under COPY_SPLIT_BYTES, one copy on this thread
    dst = np.empty_like(src)
    _writes.copy_into(dst, src)
    assert not calls and (dst == src).all()
    monkeypatch.setattr(_parallel, "MIN_CHUNK_BYTES", 1)  # the tests' way to force a split
    monkeypatch.setattr(_writes, "COPY_SPLIT_BYTES", 1)
    before = gs.get_num_threads()
    gs.set_num_threads(2)
    try:
        dst[...] = 0
        _writes.copy_into(dst, src)
    finally:
        gs.set_num_threads(before)
    assert calls == [2] and (dst == src).all()


@pytest.mark.parametrize("rows", [512, 8192], ids=["2MiB-malloc", "32MiB-cache-block"])
def test_a_fitting_output_skips_the_memory_query_but_not_a_configured_limit(monkeypatch, rows):
    import time

    from gather_scatter.errors import OutputTooLargeError
    from gather_scatter.resources import memory as _memory

    data = np.zeros((rows, 1024), np.float32)  # a sixteenth of the memory last found; or a cache block
    gs.scatter_nd(data, np.array([[1]]), np.ones((1, 1024), np.float32))  # a block goes back to the cache
    queried = []
    monkeypatch.setattr(_memory, "_seen", (1 << 40, time.monotonic()))
    monkeypatch.setattr(_memory, "available_memory", lambda: queried.append(1) or 0)
    result = gs.scatter_nd(data, np.array([[1]]), np.ones((1, 1024), np.float32))
    assert not queried and result[1].all() and not result[0].any()
    del result
    previous = gs.set_memory_limit(1000)
    try:
        with pytest.raises(OutputTooLargeError):
            gs.scatter_nd(data, np.array([[1]]), np.ones((1, 1024), np.float32))
    finally:
        gs.set_memory_limit(previous)
