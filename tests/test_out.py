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
        (lambda e: np.lib.stride_tricks.as_strided(np.empty_like(e), writeable=False), gs.InvalidAttributeError,
         "read-only"),
        (lambda e: np.lib.stride_tricks.as_strided(np.empty(e.shape[-1:], e.dtype), e.shape, (0, e.itemsize),
                                                   writeable=True), gs.InvalidAttributeError, "broadcast view"),
        # np.broadcast_to is read-only too; "read-only" alone would send the caller to flip the flag.
        (lambda e: np.broadcast_to(np.empty(e.shape[-1:], e.dtype), e.shape), gs.InvalidAttributeError,
         "broadcast view"),
        (lambda e: np.ma.masked_array(np.empty_like(e)), gs.DTypeError, "masked array"),
    ],
    ids=["list", "dtype", "shape", "readonly", "broadcast", "broadcast_to", "masked"],
)
def test_bad_out_is_refused_before_any_write(name, call, expected, bad, error, pattern):
    out = bad(expected)
    if isinstance(out, np.ndarray) and out.flags.writeable and not any(st == 0 for st in out.strides):
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
    buf = np.zeros(5, np.float32)
    with pytest.raises(gs.InvalidAttributeError, match="shares memory with data"):
        gs.scatter_nd(buf[:4], np.arange(4).reshape(4, 1), upd, out=buf[1:])  # a partial overlap
    with pytest.raises(gs.InvalidAttributeError, match="shares memory with data"):
        gs.scatter_nd(buf[:4], np.arange(4).reshape(4, 1), upd, out=buf[3::-1])  # the same bytes, reversed


_SCATTERS = {  # name -> fn(data, out): the scatter with out
    "scatter_nd": lambda d, out: gs.scatter_nd(d, [[1], [1]], np.ones((2,) + d.shape[1:]), "add", out=out),
    "scatter_elements": lambda d, out: gs.scatter_elements(d, np.zeros((1,) + d.shape[1:], np.int64),
                                                           np.ones((1,) + d.shape[1:]), reduction="add", out=out),
    "tensor_scatter": lambda d, out: gs.tensor_scatter(d, np.ones((d.shape[0], 1, d.shape[2])), [0, 1], axis=1,
                                                       out=out),
}


@pytest.mark.parametrize("op", list(_SCATTERS))
def test_in_place_on_a_view_made_twice(op):
    # c[:, 3] twice is two view objects on the same memory: in place (as the torch backend
    # takes it), where identity alone refused it with "out shares memory with data".
    cache = np.arange(2 * 4 * 8 * 3, dtype=np.float64).reshape(2, 4, 8, 3)
    expected = _SCATTERS[op](cache[:, 3].copy(), None)
    rest = np.delete(cache, 3, axis=1).copy()
    out = cache[:, 3]
    assert _SCATTERS[op](cache[:, 3], out) is out
    np.testing.assert_array_equal(cache[:, 3], expected)
    np.testing.assert_array_equal(np.delete(cache, 3, axis=1), rest)


@pytest.mark.parametrize("op", list(_SCATTERS))
def test_out_overlapping_data_partly_is_still_refused(op):
    cache = np.zeros((2, 4, 8, 3))
    for data, out in ((cache[:, 3], cache[:, 2:4].reshape(2, 16, 3)[:, 4:12]),  # offset by half a row
                      (cache[:, 3], cache[:, 3, ::-1])):  # the same rows, reversed
        with pytest.raises(gs.InvalidAttributeError, match="shares memory with"):
            _SCATTERS[op](data, out)
    assert not cache.any()


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
    fixed = np.array(["a", "b"])
    with pytest.raises(gs.DTypeError, match=r"out has dtype <U1 but the result has dtype object \(string results "
                       r"are object arrays of str: a fixed-width string array would truncate them; pass an object "
                       r"array, e.g. out.astype\(object\)\)"):
        gs.scatter_nd(fixed, np.array([[0]]), np.array(["xyz"]), out=fixed)
    assert fixed.tolist() == ["a", "b"]


@pytest.mark.parametrize("kind", ["U", "S", "O"])
def test_every_string_result_is_an_object_array_of_str(kind):
    # gather/gather_nd used to keep 'U' while scatter_nd returned object: one rule now.
    data = np.array(["ab", "c", "def"]).astype(kind) if kind != "S" else np.array([b"ab", b"c", b"def"])
    results = [gs.gather(data, [2, 0]), gs.gather_nd(data, [[2], [0]]), gs.gather_elements(data, [2, 0]),
               gs.scatter_nd(data, [[1]], np.array(["zz"]).astype(kind) if kind != "S" else np.array([b"zz"])),
               gs.scatter_elements(data, [1], np.array(["zz"]).astype(kind) if kind != "S" else np.array([b"zz"]))]
    for got in results:
        assert got.dtype == object and all(type(v) is str for v in got.tolist())
    assert [r.tolist() for r in results] == [["def", "ab"]] * 3 + [["ab", "zz", "def"]] * 2


_CACHE_VIEWS = {  # a writeable array that is not C-contiguous, as KV caches often are
    "slice": lambda c: c[:, :6],
    "fortran": lambda c: np.asfortranarray(c),
    "reversed": lambda c: c[::-1, ::-1],
    "step": lambda c: c[:, ::2],
}


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("view", list(_CACHE_VIEWS))
def test_in_place_scatter_nd_on_any_writeable_view(view, reduction):
    # Refused before with "must be C-contiguous (np.ascontiguousarray makes a copy that is)".
    base = np.arange(4 * 12 * 3, dtype=np.float32).reshape(4, 12, 3) % 7 - 3
    cache = _CACHE_VIEWS[view](base)
    indices = np.array([[0, 1], [3, -1], [0, 1], [2, 4]])  # a duplicate tuple
    updates = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    expected = gs.scatter_nd(cache.copy(), indices, updates, reduction)
    outside = base.copy()
    assert gs.scatter_nd(cache, indices, updates, reduction, out=cache) is cache
    np.testing.assert_array_equal(cache, expected)
    if view in ("slice", "step"):  # the rest of the base array is untouched
        mask = np.ones(base.shape, bool)
        mask[(slice(None), slice(0, 6)) if view == "slice" else (slice(None), slice(0, None, 2))] = False
        np.testing.assert_array_equal(base[mask], outside[mask])


@pytest.mark.parametrize("view", ["slice", "fortran", "reversed", "step"])
def test_gathers_write_through_any_writeable_out(view):
    out = {"slice": lambda: np.zeros((30, 16), np.float32)[:, :8],
           "fortran": lambda: np.asfortranarray(np.zeros((30, 8), np.float32)),
           "reversed": lambda: np.zeros((30, 8), np.float32)[::-1, ::-1],
           "step": lambda: np.zeros((30, 16), np.float32)[:, ::2]}[view]()
    assert not out.flags.c_contiguous
    assert gs.gather(DATA, IDX[:, 0], out=out) is out
    np.testing.assert_array_equal(out, gs.gather(DATA, IDX[:, 0]))
    out[...] = 0
    assert gs.gather_nd(DATA, IDX, out=out) is out
    np.testing.assert_array_equal(out, gs.gather_nd(DATA, IDX))


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_ndarray_subclasses_work_as_plain_arrays():
    # np.matrix data raised NumPy's "output array does not match result of ndarray.take".
    data = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    got = gs.gather(data, [1, 0])
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, [[3.0, 4.0], [1.0, 2.0]])
    np.testing.assert_array_equal(gs.gather_nd(data, [[1, 1]]), [4.0])
    out = np.matrix(np.zeros((2, 2)))
    assert gs.scatter_nd(data, [[0, 0]], [9.0], out=out) is out
    np.testing.assert_array_equal(out, [[9.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize("role", ["data", "indices", "updates"])
def test_masked_arrays_are_refused(role):
    args = {"data": np.zeros(3), "indices": np.array([[1]]), "updates": np.ones(1)}
    args[role] = np.ma.masked_array(args[role], mask=np.zeros(args[role].shape, bool))
    with pytest.raises(gs.DTypeError, match=rf"^ScatterND-18: {role} is a masked array, and masks are not supported"):
        gs.scatter_nd(args["data"], args["indices"], args["updates"])


def test_lists_take_the_dtype_the_op_needs():
    assert gs.gather(np.arange(3), []).tolist() == [] and gs.gather(np.arange(3), []).dtype == np.arange(3).dtype
    np.testing.assert_array_equal(gs.scatter_nd([1.0, 2.0], [[0]], [9]), [9.0, 2.0])
    np.testing.assert_array_equal(gs.scatter_nd(np.zeros(2, np.uint8), [[1]], [255]), [0, 255])
    np.testing.assert_array_equal(gs.gather_nd(np.arange(4.0), [[3.0]]), [3.0])  # 3.0 is exactly 3


@pytest.mark.parametrize(("call", "message"), [
    (lambda: gs.gather(np.arange(3), [0, 1.5]), "Gather-13: indices[1] = 1.5 does not fit exactly in int64"),
    (lambda: gs.scatter_nd(np.zeros(2, np.float32), [[0]], [0.1]), "ScatterND-18: updates[0] = 0.1 does not fit "
     "exactly in float32"),
    (lambda: gs.scatter_nd(np.zeros(2, np.uint8), [[0], [1]], [1, 300]), "ScatterND-18: updates[1] = 300 does not "
     "fit exactly in uint8"),
    (lambda: gs.gather(np.arange(3), np.array([0.0])), "Gather-13: indices has type tensor(double)"),  # arrays: strict
])
def test_list_values_that_do_not_fit_are_named(call, message):
    with pytest.raises(gs.DTypeError) as info:
        call()
    assert str(info.value).startswith(message)


def test_nan_in_max_min_reductions_does_not_warn():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for reduction in ("max", "min"):
            got = gs.scatter_nd(np.array([1.0, np.nan]), [[0], [1]], np.array([np.nan, 2.0]), reduction)
            assert np.isnan(got).all()
            got = gs.scatter_elements(np.array([1.0, np.nan]), [0, 1], np.array([np.nan, 2.0]), reduction=reduction)
            assert np.isnan(got).all()


def test_big_outputs_reuse_buffers_only_when_unreachable():
    data = RNG.standard_normal((1000, 512)).astype(np.float32)
    first = gs.gather(data, np.arange(1000))
    view = first[10:20]
    del first
    second = gs.gather(data, np.arange(999, -1, -1))
    np.testing.assert_array_equal(view, data[10:20])  # the block behind view was not reused
    assert not np.shares_memory(view, second)


def test_family_in_place_with_a_bad_index_changes_nothing():
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    before = data.copy()
    with pytest.raises(gs.IndexOutOfBoundsError) as err:  # the last index is the bad one: all others checked first
        gs.scatter_elements(data, np.array([[0, 1, 2, 3], [2, 1, 0, 4]]), np.ones((2, 4), np.float32), axis=1,
                            reduction="add", out=data)
    assert err.value.position == (1, 3)
    np.testing.assert_array_equal(data, before)
    cache = np.zeros((2, 4, 3), np.float16)
    with pytest.raises(gs.IndexOutOfBoundsError) as err:
        gs.tensor_scatter(cache, np.ones((2, 2, 3), np.float16), np.array([0, 3]), out=cache)
    assert err.value.position == (1,) and not cache.any()
    out = np.full((2, 4), 5, np.float32)
    with pytest.raises(gs.IndexOutOfBoundsError):
        gs.gather_elements(data, np.array([[0, 1, 2, 3], [0, 1, 2, 4]]), axis=1, out=out)
    assert (out == 5).all()


# ---- torch: the same memory rule, the same messages ----------------------------------------

_OPS_3D = {  # name -> fn(data (B, S, D), out): every op whose out can be data's shape
    "gather": lambda d, out: gs.gather(d, list(range(d.shape[1] - 1, -1, -1)), axis=1, out=out),
    "gather_elements": lambda d, out: gs.gather_elements(d, np.zeros(d.shape, np.int64), axis=1, out=out),
    **_SCATTERS,
}
_VIEWS = {  # name -> fn(cache (2, 4, 8, 3)) -> (data, out), all of them views of the cache
    "same_view_twice": lambda c: (c[:, 3], c[:, 3]),
    "disjoint_slice": lambda c: (c[:, 3], c[:, 2]),
    "disjoint_interleaved": lambda c: (c[:, :, :3, 0], c[:, :, :3, 1]),  # every other element of one range
    "partial_overlap": lambda c: (c[:, 3], c[:, 2:4].reshape(2, 16, 3)[:, 4:12]),  # offset by half a row
    "broadcast": lambda c: (c[:, 3], c[:, 3, :1].expand(2, 8, 3) if hasattr(c, "expand")
                            else np.lib.stride_tricks.as_strided(c[:, 3, :1], (2, 8, 3), (c.strides[0], 0, 8))),
}


@pytest.mark.parametrize("view", list(_VIEWS))
@pytest.mark.parametrize("op", list(_OPS_3D))
def test_torch_out_follows_the_numpy_memory_rule(op, view):
    """Whether out is in place, refused (and with which message) or written beside data: the
    NumPy path's answer, for views of one buffer in each library."""
    torch = pytest.importorskip("torch", reason="torch not installed (pip install 'gather_scatter[torch]')")
    numpy_cache = np.arange(2 * 4 * 8 * 3, dtype=np.float64).reshape(2, 4, 8, 3)
    torch_cache = torch.from_numpy(numpy_cache.copy())
    outcomes = []
    for cache in (numpy_cache, torch_cache):
        data, out = _VIEWS[view](cache)
        try:
            result = _OPS_3D[op](data, out)
        except gs.GatherScatterError as exc:
            outcomes.append((type(exc), str(exc)))
        else:
            assert result is out
            outcomes.append(("written", None))
    assert outcomes[1] == outcomes[0]
    np.testing.assert_array_equal(torch_cache.numpy(), numpy_cache)  # the same bytes written, or none


def test_torch_broadcast_out_is_refused_before_any_write():
    torch = pytest.importorskip("torch", reason="torch not installed (pip install 'gather_scatter[torch]')")
    row = torch.zeros(1, 8, dtype=torch.float32)
    with pytest.raises(gs.InvalidAttributeError, match=r"^Gather-13: out is a broadcast view \(strides \(0, 4\): "
                                                       r"several elements share memory\)") as err:
        gs.gather(torch.from_numpy(DATA), IDX[:, 0], out=row.expand(30, 8))
    assert err.value.input == "out" and not row.any()
