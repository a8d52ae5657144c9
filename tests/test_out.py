"""``out=``: results written into a caller's buffer, each rejection, and in-place ScatterND."""

from __future__ import annotations

import numpy as np
import pytest

import gather_scatter as gs

RNG = np.random.default_rng(0)
DATA = RNG.standard_normal((50, 8)).astype(np.float32)
IDX = RNG.integers(-50, 50, (30, 1))


def _calls():
    """(name, fn(out), expected result)."""
    return [
        ("gather", lambda out: gs.gather(DATA, IDX[:, 0], axis=0, out=out), gs.gather(DATA, IDX[:, 0])),
        ("gather_axis1", lambda out: gs.gather(DATA, [1, -1, 0], axis=1, out=out), gs.gather(DATA, [1, -1, 0], axis=1)),
        ("gather_nd", lambda out: gs.gather_nd(DATA, IDX, out=out), gs.gather_nd(DATA, IDX)),
        ("scatter_nd", lambda out: gs.scatter_nd(DATA, IDX, np.ones((30, 8), np.float32), "add", out=out),
         gs.scatter_nd(DATA, IDX, np.ones((30, 8), np.float32), "add")),
    ]


@pytest.mark.parametrize("name, call, expected", _calls(), ids=[c[0] for c in _calls()])
def test_out_receives_the_result(name, call, expected):
    before = DATA.copy()
    out = np.full_like(expected, 7)
    assert call(out) is out
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(DATA, before)


@pytest.mark.parametrize("name, call, expected", _calls(), ids=[c[0] for c in _calls()])
@pytest.mark.parametrize(
    "bad, error, pattern",
    [
        (lambda e: e.tolist(), gs.DTypeError, "out must be a numpy.ndarray"),
        (lambda e: np.empty(e.shape, np.float64), gs.DTypeError, "out has dtype float64"),
        (lambda e: np.empty(e.shape + (1,), e.dtype), gs.ShapeError, "out has shape"),
        (lambda e: np.empty(e.shape[::-1], e.dtype).T, gs.ShapeError, "C-contiguous"),
        (lambda e: np.lib.stride_tricks.as_strided(np.empty_like(e), writeable=False), gs.InvalidAttributeError,
         "read-only"),
    ],
    ids=["list", "dtype", "shape", "fortran", "readonly"],
)
def test_bad_out_is_refused_before_any_write(name, call, expected, bad, error, pattern):
    out = bad(expected)
    if isinstance(out, np.ndarray) and out.ndim == 1 and pattern == "C-contiguous":
        pytest.skip("a 1-D transpose is contiguous")
    if isinstance(out, np.ndarray) and out.flags.writeable:
        out[...] = 7
    before = np.array(out, copy=True)
    with pytest.raises(error, match=pattern) as err:
        call(out)
    assert err.value.input == "out"
    np.testing.assert_array_equal(out, before)


def test_out_overlapping_an_input_is_refused():
    data = DATA.copy()
    with pytest.raises(gs.InvalidAttributeError, match="shares memory with data"):
        gs.gather(data, [0, 1], out=data[:2])
    buf = np.zeros(12, dtype=np.int64)
    with pytest.raises(gs.InvalidAttributeError, match="shares memory with indices"):
        gs.gather_nd(np.zeros((3, 3), np.int64), buf[:4].reshape(4, 1), out=buf.reshape(4, 3))
    upd = np.zeros(4, np.float32)
    target = np.zeros(4, np.float32)
    with pytest.raises(gs.InvalidAttributeError, match="shares memory with updates"):
        gs.scatter_nd(target, np.arange(4).reshape(4, 1), upd, out=upd)
    with pytest.raises(gs.InvalidAttributeError, match="shares memory with data"):
        gs.scatter_nd(target, np.arange(4).reshape(4, 1), upd, out=target[...])  # a view, not data itself


def test_bad_index_leaves_out_untouched():
    out = np.full((3, 8), 5, np.float32)
    with pytest.raises(gs.IndexOutOfBoundsError):
        gs.gather(DATA, [0, 50, 1], out=out)
    with pytest.raises(gs.IndexOutOfBoundsError):
        gs.gather_nd(DATA, np.array([[0], [1], [-51]]), out=out)
    assert (out == 5).all()


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "int64"])
def test_in_place_scatter_equals_the_copy(reduction, dtype):
    rng = np.random.default_rng(5)
    data = rng.integers(-9, 9, (1, 4, 64, 16)).astype(dtype)
    indices = np.array([[[[0, h, (7 * h) % 64]] for h in range(4)] * 3]).reshape(1, 12, 1, 3)  # duplicates
    updates = rng.integers(-9, 9, (1, 12, 1, 16)).astype(dtype)
    idx_before, upd_before = indices.copy(), updates.copy()
    expected = gs.scatter_nd(data, indices, updates, reduction=reduction)
    assert gs.scatter_nd(data, indices, updates, reduction=reduction, out=data) is data
    np.testing.assert_array_equal(data, expected)
    np.testing.assert_array_equal(indices, idx_before)
    np.testing.assert_array_equal(updates, upd_before)


def test_in_place_scatter_with_a_bad_index_changes_nothing():
    data = np.zeros((4, 3), np.float32)
    with pytest.raises(gs.IndexOutOfBoundsError) as err:
        gs.scatter_nd(data, np.array([[0], [1], [4]]), np.ones((3, 3), np.float32), out=data)
    assert err.value.position == (2, 0)
    assert not data.any()


def test_separate_out_gets_data_copied_in_first():
    data = np.arange(6, dtype=np.int64)
    out = np.full(6, -1, np.int64)
    gs.scatter_nd(data, np.array([[1]]), np.array([10]), reduction="add", out=out)
    np.testing.assert_array_equal(out, [0, 11, 2, 3, 4, 5])
    np.testing.assert_array_equal(data, np.arange(6))


def test_strings_in_place():
    data = np.array(["a", "b", "c"], dtype=object)
    gs.scatter_nd(data, np.array([[0], [0]]), np.array(["x", "y"], dtype=object), "add", out=data)
    assert data.tolist() == ["axy", "b", "c"]
    with pytest.raises(gs.DTypeError, match="out has dtype"):
        fixed = np.array(["a", "b"])
        gs.scatter_nd(fixed, np.array([[0]]), np.array(["x"]), out=fixed)  # the result is object


def test_big_outputs_reuse_buffers_only_when_unreachable():
    data = RNG.standard_normal((1000, 512)).astype(np.float32)
    first = gs.gather(data, np.arange(1000))
    view = first[10:20]
    del first
    second = gs.gather(data, np.arange(999, -1, -1))
    np.testing.assert_array_equal(view, data[10:20])  # the block behind view was not reused
    assert not np.shares_memory(view, second)
