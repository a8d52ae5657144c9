"""The element-wise kernels' two paths — numba's compiled loops and NumPy — give the same
bits, for every reduction, layout and thread count, and the compiled chunks split the work
so that duplicates still apply in row-major order of ``indices``."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import gather_scatter as gs
from gather_scatter.kernels import _numba as _compiled

pytestmark = pytest.mark.skipif(_compiled.loops() is None, reason="numba is not installed: only the NumPy path runs")

REDUCTIONS = ("none", "add", "mul", "max", "min")
DTYPES = (np.float32, np.float64, np.int8, np.int32, np.int64, np.uint8, np.uint64, np.bool_, np.float16,
          ml_dtypes.bfloat16, np.complex64)


@pytest.fixture
def numpy_path(monkeypatch):
    """Run a call with the compiled loops switched off."""
    def run(call):
        monkeypatch.setattr(_compiled, "_module", False)
        try:
            return call()
        finally:
            monkeypatch.undo()
    return run


def _case(rng, dtype, shape, axis, index_shape, special=True):
    data = (rng.standard_normal(shape) * 4).astype(dtype)
    s = shape[axis]
    indices = rng.integers(-s, s, index_shape)
    updates = (rng.standard_normal(index_shape) * 4).astype(dtype)
    if special and np.dtype(dtype).kind == "f" and updates.size >= 3:
        updates.flat[:3] = [np.nan, -0.0, 0.0]  # NaN propagation and signed-zero ties
        data.flat[:2] = [0.0, np.nan]
    return data, indices, updates


CASES = [  # (data shape, axis, indices shape)
    ((5, 7), 0, (9, 7)),  # duplicates along the axis, every column
    ((5, 7), 1, (5, 12)),  # the last axis
    ((4, 6, 3), -2, (3, 10, 2)),  # smaller off the axis
    ((11,), 0, (40,)),  # rank 1: one chunk
    ((2, 3, 4, 5), 3, (2, 1, 4, 9)),
    ((6, 1, 4), 0, (8, 1, 4)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize(("shape", "axis", "index_shape"), CASES, ids=str)
def test_compiled_and_numpy_paths_agree_bit_for_bit(numpy_path, dtype, shape, axis, index_shape):
    rng = np.random.default_rng(abs(hash((np.dtype(dtype).name, shape, axis))) % 2**32)
    data, indices, updates = _case(rng, dtype, shape, axis, index_shape)
    for index_dtype in (np.int32, np.int64):
        i = indices.astype(index_dtype)
        got = gs.gather_elements(data, i, axis)
        want = numpy_path(lambda: gs.gather_elements(data, i, axis))
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
        for reduction in REDUCTIONS:
            if np.dtype(dtype).kind == "c" and reduction in ("max", "min"):
                continue
            with np.errstate(over="ignore", invalid="ignore"):
                got = gs.scatter_elements(data, i, updates, axis, reduction)
                want = numpy_path(lambda: gs.scatter_elements(data, i, updates, axis, reduction))
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), reduction


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_chunked_runs_are_bitwise_equal_for_any_thread_count(numpy_path, reduction, axis):
    # Big enough that the pool splits the work (> 1 MiB per chunk), with many duplicates per
    # target: float32 add and mul are order-sensitive, so a wrong order changes bits.
    rng = np.random.default_rng(7)
    data, indices, updates = _case(rng, np.float32, (64, 256, 3), axis, (64 * 32, 256, 3)
                                   if axis == 0 else (64, 256 * 32, 3) if axis == 1 else (64, 256, 300))
    if reduction == "mul":
        updates = (1 + updates / 1000).astype(np.float32)
    previous = gs.get_num_threads()
    results = []
    try:
        for n in (1, 2, 3):
            gs.set_num_threads(n)
            results.append(gs.scatter_elements(data, indices, updates, axis, reduction).tobytes())
            results.append(gs.gather_elements(data, indices, axis).tobytes())
    finally:
        gs.set_num_threads(previous)
    want = numpy_path(lambda: gs.scatter_elements(data, indices, updates, axis, reduction)).tobytes()
    assert results[0::2] == [want] * 3
    assert len(set(results[1::2])) == 1


def test_out_of_bounds_found_by_the_compiled_gather_names_the_first_position():
    data = np.arange(2048.0).reshape(2, 1024)
    indices = np.zeros((2, 600_000), dtype=np.int64)
    indices[1, 599_999] = 1024  # last chunk
    indices[1, 3] = -1025  # the first bad one, row-major
    with pytest.raises(gs.IndexOutOfBoundsError) as info:
        gs.gather_elements(data, indices, axis=1)
    assert (info.value.position, info.value.value, info.value.valid_range) == ((1, 3), -1025, (-1024, 1023))


def test_in_place_scatter_on_a_strided_view_takes_the_numpy_path_and_writes_through(numpy_path):
    rng = np.random.default_rng(3)
    cache = rng.standard_normal((4, 10)).astype(np.float32)
    view = cache[:, ::2]  # writeable, not contiguous
    indices = rng.integers(-5, 5, (4, 6))
    updates = rng.standard_normal((4, 6)).astype(np.float32)
    want = gs.scatter_elements(view.copy(), indices, updates, axis=1, reduction="add")
    before = cache.copy()
    out = gs.scatter_elements(view, indices, updates, axis=1, reduction="add", out=view)
    assert out is view
    np.testing.assert_array_equal(cache[:, ::2], want)
    np.testing.assert_array_equal(cache[:, 1::2], before[:, 1::2])  # nothing else touched
