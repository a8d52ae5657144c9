"""The fast path for small calls (_runners.py): once a signature's first call has passed every
check, later calls skip the static checks and use NumPy's checked indexing. It must give what
the kernels give — values, dtype, type (a 0-d result is an ndarray, not a NumPy scalar),
errors with their facts, the memory limit — on every call, not only the first."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import gather_scatter as gs
from gather_scatter import _calls as _runners
from gather_scatter.kernels.elements import run_gather_elements, run_scatter_elements
from gather_scatter.kernels.gather import run_gather
from gather_scatter.kernels.gather_nd import run_gather_nd
from gather_scatter.kernels.scatter_nd import run_scatter_nd
from gather_scatter.kernels.tensor_scatter import run_tensor_scatter
from gather_scatter.rules.versions import (
    GATHER,
    GATHER_ELEMENTS,
    GATHER_ND,
    SCATTER_ELEMENTS,
    SCATTER_ND,
    TENSOR_SCATTER,
)

RNG = np.random.default_rng(16)


def _variants(array: np.ndarray):
    """The array, a strided view of a bigger one, a read-only copy, byte-swapped."""
    yield array
    wide = np.repeat(array[..., None], 2, axis=-1)[..., 0] if array.ndim else array
    yield wide
    frozen = array.copy()
    frozen.flags.writeable = False
    yield frozen
    if array.dtype.itemsize > 1:
        yield array.astype(array.dtype.newbyteorder())


def _same(fast, slow):
    assert type(fast) is type(slow) is np.ndarray
    assert fast.dtype == slow.dtype and fast.shape == slow.shape
    np.testing.assert_array_equal(fast, slow)


CASES = [
    # (public function, kernel, spec, data shape, indices maker, attribute)
    (gs.gather, run_gather, GATHER, (3,), lambda: np.array(1), 0),
    (gs.gather, run_gather, GATHER, (3,), lambda: np.array(-3), 0),
    (gs.gather, run_gather, GATHER, (4, 5), lambda: RNG.integers(-5, 5, (2, 3)), 1),
    (gs.gather, run_gather, GATHER, (4, 5), lambda: RNG.integers(-4, 4, (0,)), -2),
    (gs.gather, run_gather, GATHER, (2, 3, 4), lambda: RNG.integers(-3, 3, ()).astype(np.int32), 1),
    (gs.gather_nd, run_gather_nd, GATHER_ND, (3, 4), lambda: np.array([1, -1]), 0),
    (gs.gather_nd, run_gather_nd, GATHER_ND, (3, 4), lambda: RNG.integers(-3, 3, (2, 1)), 0),
    (gs.gather_nd, run_gather_nd, GATHER_ND, (3, 4, 2), lambda: np.stack(
        [RNG.integers(-3, 3, (5,)), RNG.integers(-4, 4, (5,))], -1), 0),
    (gs.gather_nd, run_gather_nd, GATHER_ND, (2, 3, 4), lambda: RNG.integers(0, 3, (2, 1)), 1),
    (gs.gather_elements, run_gather_elements, GATHER_ELEMENTS, (3, 4), lambda: RNG.integers(-3, 3, (3, 4)), 0),
    (gs.gather_elements, run_gather_elements, GATHER_ELEMENTS, (3, 4), lambda: RNG.integers(-4, 4, (2, 2)), 1),
    (gs.gather_elements, run_gather_elements, GATHER_ELEMENTS, (5,), lambda: RNG.integers(-5, 5, (7,)), 0),
]


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.complex64, np.uint8])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_every_call_gives_what_the_kernel_gives(case, dtype):
    public, kernel, spec, shape, make, attr = CASES[case]
    base = (RNG.random(shape) * 10).astype(dtype)
    for data in _variants(base):
        for indices in _variants(np.asarray(make())):
            slow = kernel(spec, data, indices, attr)
            for _ in range(3):  # the first call checks the signature, the next take the fast path
                _same(public(data, indices, attr), slow)


SCATTERS = [
    # (public function, kernel, spec, data shape, indices maker, updates shape, attributes)
    (gs.scatter_nd, run_scatter_nd, SCATTER_ND, (4, 3), lambda: np.array([[1], [-1], [1]]), (3, 3), ()),
    (gs.scatter_nd, run_scatter_nd, SCATTER_ND, (4, 3), lambda: np.array([[1, 2], [-4, 0], [1, -1]]), (3,), ()),
    (gs.scatter_nd, run_scatter_nd, SCATTER_ND, (5,), lambda: RNG.integers(-5, 5, (6, 1)), (6,), ()),
    (gs.scatter_nd, run_scatter_nd, SCATTER_ND, (2, 3), lambda: np.array([1, 2]), (), ()),
    (gs.scatter_elements, run_scatter_elements, SCATTER_ELEMENTS, (3, 4), lambda: RNG.integers(-3, 3, (2, 4)),
     (2, 4), (0,)),
    (gs.scatter_elements, run_scatter_elements, SCATTER_ELEMENTS, (3, 4), lambda: RNG.integers(-4, 4, (3, 2)),
     (3, 2), (1,)),
    (gs.scatter_elements, run_scatter_elements, SCATTER_ELEMENTS, (6,), lambda: RNG.integers(-6, 6, (9,)), (9,),
     (-1,)),
]


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.bool_, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("case", range(len(SCATTERS)))
def test_every_scatter_gives_what_the_kernel_gives(case, dtype, reduction):
    public, kernel, spec, shape, make, updates_shape, attrs = SCATTERS[case]
    data = (RNG.random(shape) * 10).astype(dtype)
    updates = (RNG.random(updates_shape) * 10).astype(dtype)
    if dtype in (np.float32, np.float64):
        updates.flat[0] = np.nan  # NaN through max/min as the kernel's
    for indices in _variants(np.asarray(make())):
        for source in _variants(data):
            before = source.copy()
            slow = kernel(spec, source, indices, updates, *attrs, reduction)
            for _ in range(3):
                _same(public(source, indices, updates, *attrs, reduction=reduction), slow)
            np.testing.assert_array_equal(source, before)  # data never written


@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_, np.complex128])
@pytest.mark.parametrize("shape, axis, length, writes", [
    ((2, 3, 6, 4), -2, 2, [[0, 4], [4, 1], [3, 3]]),
    ((2, 6, 4), 1, 1, [[5, 0], [2, 2]]),
    ((1, 5), -1, 3, [[2], [0]]),
    ((3, 2, 5, 2), 2, 5, [[0, 0, 0]]),
    ((2, 4, 3, 2), 1, 2, [None]),
])
def test_every_tensor_scatter_gives_what_the_kernel_gives(shape, axis, length, writes, dtype, mode):
    past = (RNG.random(shape) * 10).astype(dtype)
    ax = axis % len(shape)
    update = (RNG.random(shape[:ax] + (length,) + shape[ax + 1 :]) * 10).astype(dtype)
    for write in writes:
        indices = None if write is None else np.array(write)
        if mode == "circular" and indices is not None:
            indices = indices + shape[ax]  # past the end: wraps
        for source in _variants(past):
            try:
                slow = run_tensor_scatter(TENSOR_SCATTER, source, update, indices, axis, mode)
            except gs.IndexOutOfBoundsError as e:
                for _ in range(3):
                    with pytest.raises(gs.IndexOutOfBoundsError) as info:
                        gs.tensor_scatter(source, update, indices, axis=axis, mode=mode)
                    assert str(info.value) == str(e)
                continue
            for _ in range(3):
                _same(gs.tensor_scatter(source, update, indices, axis=axis, mode=mode), slow)


@pytest.mark.parametrize("public, args, message", [
    (gs.scatter_nd, (np.zeros((3, 4)), np.array([[1], [3]]), np.ones((2, 4))), r"ScatterND-18: indices\[1, 0\] = 3"),
    (gs.scatter_elements, (np.zeros((3, 4)), np.array([[1, -5]]), np.ones((1, 2)), 1),
     r"ScatterElements-18: indices\[0, 1\] = -5"),

    (gs.gather, (np.arange(3.0), np.array([0, 3])), r"Gather-13: indices\[1\] = 3 is out of bounds"),
    (gs.gather, (np.arange(3.0), np.array(-4)), r"indices \(a scalar\) = -4 is out of bounds"),
    (gs.gather_nd, (np.zeros((3, 4)), np.array([[1, 1], [0, -5]])), r"GatherND-13: indices\[1, 1\] = -5"),
    (gs.gather_elements, (np.zeros((3, 4)), np.array([[1, 1], [0, 3]])), r"GatherElements-13: indices\[1, 1\] = 3"),
])
def test_a_bad_index_on_the_fast_path_is_the_kernels_error(public, args, message):
    public(args[0], np.zeros_like(args[1]), *args[2:])  # the signature, accepted
    for _ in range(2):
        with pytest.raises(gs.IndexOutOfBoundsError, match=message):
            public(*args)


def test_the_memory_limit_applies_to_every_call(monkeypatch):
    data, indices = np.zeros(10), np.zeros(20, dtype=np.int64)
    gs.gather(data, indices)  # accepted without a limit
    previous = gs.set_memory_limit(100)
    try:
        with pytest.raises(gs.OutputTooLargeError):
            gs.gather(data, indices)
    finally:
        gs.set_memory_limit(previous)
    monkeypatch.setenv("GATHER_SCATTER_MEMORY_LIMIT", "100")
    with pytest.raises(gs.OutputTooLargeError):
        gs.gather(data, indices)
    monkeypatch.setenv("GATHER_SCATTER_MEMORY_LIMIT", "1000")
    assert gs.gather(data, indices).shape == (20,)


def test_a_signature_the_checks_refuse_is_never_remembered():
    before = dict(_runners._ACCEPTED)
    for _ in range(2):
        with pytest.raises(gs.InvalidAttributeError):
            gs.gather(np.zeros(3), np.array(0), axis=1)
        with pytest.raises(gs.DTypeError):
            gs.gather(np.zeros(3), np.array(0.0))
    assert {k: v for k, v in _runners._ACCEPTED.items() if k not in before} == {}


def test_strings_and_bool_axis_keep_the_kernels_path():
    words = np.array(["a", "bc", "d"])
    for _ in range(2):
        assert gs.gather(words, np.array([2, 0])).tolist() == ["d", "a"]
        assert gs.gather(words, np.array([2, 0])).dtype == object
    gs.gather(np.zeros((2, 2)), np.array(0), 1)
    with pytest.raises(gs.GatherScatterError):
        gs.gather(np.zeros((2, 2)), np.array(0), True)


def test_a_bad_index_into_empty_data_is_still_an_error():
    # NumPy's take checks no index when data has no elements; the op still refuses a bad one.
    data = np.zeros((0, 2, 4), dtype=bool)
    gs.gather(data, np.zeros((0, 2, 3), dtype=np.int32), 1)
    for _ in range(2):
        with pytest.raises(gs.IndexOutOfBoundsError):
            gs.gather(data, np.full((1, 1, 1), 1000, dtype=np.int32), 1)
    gs.gather_nd(np.zeros((3, 0)), np.zeros((2, 1), np.int64))
    with pytest.raises(gs.IndexOutOfBoundsError):
        gs.gather_nd(np.zeros((3, 0)), np.full((2, 1), 7))


def test_updates_of_another_shape_are_checked_on_every_call():
    data, indices = np.zeros((3, 1, 3), bool), np.zeros((4, 1, 3), np.int32)
    gs.scatter_elements(data, indices, np.ones((4, 1, 3), bool), 0, "add")
    with pytest.raises(gs.ShapeError):
        gs.scatter_elements(data, indices, np.ones((4, 1, 3, 2), bool), 0, "add")
    gs.scatter_nd(np.zeros((3, 2)), np.zeros((2, 1), np.int64), np.ones((2, 2)))
    with pytest.raises(gs.ShapeError):
        gs.scatter_nd(np.zeros((3, 2)), np.zeros((2, 1), np.int64), np.ones((2, 2, 2)))


@pytest.mark.parametrize("reduction", ["none", "add", "max"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("shape", [(300, 100), (600, 500)], ids=["240KB-800KB", "0.6MB-2.4MB"])
def test_big_scatters_after_acceptance_give_the_kernels_values_and_errors(shape, dtype, reduction):
    """Above the small-call size an accepted signature runs the kernel less its static checks
    (ScatterND from 1 MiB fused in compiled code, ScatterElements' bounds in its compiled loop):
    values, untouched data and each bad index's error as the whole kernel's, call after call."""
    data = (RNG.random(shape) * 10).astype(dtype)
    before = data.copy()
    rows = RNG.integers(-shape[0], shape[0], (50, 1))  # duplicates among 50 of 300 or 600 rows
    nd_updates = (RNG.random((50, shape[1])) * 10).astype(dtype)
    el_indices = RNG.integers(-shape[0], shape[0], (7, shape[1]))
    el_updates = (RNG.random((7, shape[1])) * 10).astype(dtype)
    calls = [
        (gs.scatter_nd, run_scatter_nd, SCATTER_ND, (rows, nd_updates), ()),
        (gs.scatter_elements, run_scatter_elements, SCATTER_ELEMENTS, (el_indices, el_updates), (0,)),
    ]
    for public, kernel, spec, (indices, updates), attrs in calls:
        slow = kernel(spec, data, indices, updates, *attrs, reduction)
        for _ in range(3):
            _same(public(data, indices, updates, *attrs, reduction=reduction), slow)
        for bad in (shape[0], -shape[0] - 1):
            wrong = indices.copy()
            wrong[-1, -1] = bad
            with pytest.raises(gs.IndexOutOfBoundsError) as expected:
                kernel(spec, data, wrong, updates, *attrs, reduction)
            for _ in range(2):
                with pytest.raises(gs.IndexOutOfBoundsError) as info:
                    public(data, wrong, updates, *attrs, reduction=reduction)
                assert str(info.value) == str(expected.value)
        _same(public(data, indices, updates, *attrs, reduction=reduction), slow)  # still accepted, still right
    np.testing.assert_array_equal(data, before)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("shape, indices_shape", [((16, 4), (12, 1)), ((5, 6, 3), (9, 2)), ((40,), (30, 1))])
def test_in_place_scatters_of_an_accepted_signature_are_the_kernels(shape, indices_shape, dtype, reduction):
    """ScatterND with out=data (a cache's write) after its signature is accepted, fresh or in
    place: call after call the values are the spec's loop (duplicates included), a bad index
    raises the kernel's error and leaves data as it was, and what the signature does not fix
    (read-only, updates that are a view of data, a strided view) is still checked."""
    k = indices_shape[-1]
    indices = np.stack([RNG.integers(-n, n, indices_shape[:-1]) for n in shape[:k]], -1)
    updates_shape = indices_shape[:-1] + shape[k:]
    data = (RNG.random(shape) * 10).astype(dtype)
    gs.scatter_nd(data, indices, (RNG.random(updates_shape) * 10).astype(dtype), reduction)  # accepted fresh
    for first in (True, False):  # and a signature whose first call is in place
        table = data.copy()
        for _ in range(3):
            updates = (RNG.random(updates_shape) * 3).astype(dtype)  # products stay finite in float16
            expected = run_scatter_nd(SCATTER_ND, table, indices, updates, reduction)
            assert gs.scatter_nd(table, indices, updates, reduction, out=table) is table
            np.testing.assert_array_equal(table, expected)
        wrong = indices.copy()
        wrong[-1, -1] = shape[k - 1]
        before = table.copy()
        with pytest.raises(gs.IndexOutOfBoundsError) as info:
            gs.scatter_nd(table, wrong, updates, reduction, out=table)
        assert info.value.position == (indices_shape[0] - 1, k - 1) and info.value.value == shape[k - 1]
        np.testing.assert_array_equal(table, before)  # nothing written
        frozen = table.copy()
        frozen.flags.writeable = False
        with pytest.raises(gs.InvalidAttributeError, match="read-only"):
            gs.scatter_nd(frozen, indices, updates, reduction, out=frozen)
        aliased = table.copy()
        view = aliased.reshape(-1)[: updates.size].reshape(updates.shape)
        with pytest.raises(gs.InvalidAttributeError):  # updates share data's memory
            gs.scatter_nd(aliased, indices, view, reduction, out=aliased)
        if first:
            _runners._ACCEPTED.clear()
    wide = np.repeat(data[..., None], 2, axis=-1)
    strided = wide[..., 0]  # in place into a strided view: its own signature, every check
    for _ in range(2):
        expected = run_scatter_nd(SCATTER_ND, strided, indices, updates, reduction)
        gs.scatter_nd(strided, indices, updates, reduction, out=strided)
        np.testing.assert_array_equal(strided, expected)
    np.testing.assert_array_equal(wide[..., 1], data)  # the other half untouched


@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.bool_, np.complex128])
@pytest.mark.parametrize("shape, axis, length, writes", [
    ((2, 3, 6, 4), -2, 2, [0, 4]),
    ((2, 6, 4), 1, 1, [5, 0]),
    ((1, 5), -1, 3, [2]),
    ((3, 2, 5, 2), 2, 5, [0, 0, 0]),
    ((2, 4, 3, 2), 1, 2, None),
])
def test_in_place_tensor_scatters_of_an_accepted_signature_are_the_kernels(shape, axis, length, writes, dtype, mode):
    """TensorScatter with out=past_cache (a decode step) call after call, its signature accepted
    by an in-place first call: the kernel's values; a bad write index raises the kernel's error
    and writes nothing; read-only caches, an update that is a view of the cache and a strided
    cache are still checked."""
    ax = axis % len(shape)
    update_shape = shape[:ax] + (length,) + shape[ax + 1 :]
    indices = None if writes is None else np.array(writes) + (shape[ax] if mode == "circular" else 0)
    cache = (RNG.random(shape) * 10).astype(dtype)
    for _ in range(3):
        update = (RNG.random(update_shape) * 10).astype(dtype)
        expected = run_tensor_scatter(TENSOR_SCATTER, cache, update, indices, axis, mode)
        assert gs.tensor_scatter(cache, update, indices, axis=axis, mode=mode, out=cache) is cache
        np.testing.assert_array_equal(cache, expected)
    if indices is not None:
        before = cache.copy()
        for bad in (-1, shape[ax] - length + 1) if mode == "linear" else (-1,):
            wrong = indices.copy()
            wrong[-1] = bad
            with pytest.raises(gs.IndexOutOfBoundsError) as expected_error:
                run_tensor_scatter(TENSOR_SCATTER, cache, update, wrong, axis, mode)
            with pytest.raises(gs.IndexOutOfBoundsError) as info:
                gs.tensor_scatter(cache, update, wrong, axis=axis, mode=mode, out=cache)
            assert str(info.value) == str(expected_error.value)
            np.testing.assert_array_equal(cache, before)  # nothing written
    frozen = cache.copy()
    frozen.flags.writeable = False
    with pytest.raises(gs.InvalidAttributeError, match="read-only"):
        gs.tensor_scatter(frozen, update, indices, axis=axis, mode=mode, out=frozen)
    aliased = cache.copy()
    view = aliased.reshape(-1)[: update.size].reshape(update.shape)
    with pytest.raises(gs.InvalidAttributeError):
        gs.tensor_scatter(aliased, view, indices, axis=axis, mode=mode, out=aliased)
    wide = np.repeat(cache[..., None], 2, axis=-1)
    strided = wide[..., 0]
    for _ in range(2):
        expected = run_tensor_scatter(TENSOR_SCATTER, strided, update, indices, axis, mode)
        gs.tensor_scatter(strided, update, indices, axis=axis, mode=mode, out=strided)
        np.testing.assert_array_equal(strided, expected)
    np.testing.assert_array_equal(wide[..., 1], cache)
