"""Small scatters of an accepted signature run a plan made once (issue 38: ``plan_accepted`` of
ScatterND, ``plan_scatter_accepted`` of ScatterElements): the compiled loop with its views,
codes and reshapes fixed by the signature. A plan must give the whole kernel's bits and errors
for every call of its signature, whatever the call's layouts, and never serve another
signature (a dtype, a reduction, an axis of the same shapes), a thread count it was not made
for, an ``out=`` or a bad index."""

from __future__ import annotations

import gc
import weakref

import ml_dtypes
import numpy as np
import pytest

import gather_scatter as gs
from gather_scatter import _calls as _runners
from gather_scatter.kernels.elements import run_scatter_elements
from gather_scatter.kernels.scatter_nd import run_scatter_nd
from gather_scatter.rules.versions import SCATTER_ELEMENTS, SCATTER_ND

RNG = np.random.default_rng(38)

pytestmark = pytest.mark.skipif(gs.kernels.compiled_loops() is None, reason="the plans are of compiled loops")


@pytest.fixture
def plans(monkeypatch):
    """Count the plans made and the calls each answered: {"made": n, "ran": n}."""
    counts = {"made": 0, "ran": 0}
    monkeypatch.setattr(_runners, "_ACCEPTED", {})  # every signature new to the test

    def counting(make):
        def planner(*args):
            plan = make(*args)
            if plan is None:
                return None
            counts["made"] += 1

            def run(*call):
                result = plan(*call)
                counts["ran"] += result is not None
                return result

            return run

        return planner

    monkeypatch.setattr(_runners._scatter_nd, "plan_accepted", counting(_runners._scatter_nd.plan_accepted))
    monkeypatch.setattr(_runners._elements, "plan_scatter_accepted", counting(_runners._elements.plan_scatter_accepted))
    return counts


def _same(fast, slow):
    assert type(fast) is type(slow) is np.ndarray
    assert fast.dtype == slow.dtype and fast.shape == slow.shape
    assert fast.tobytes() == slow.tobytes()  # bits: NaN and -0.0 included


def _layouts(array):
    """The array, a strided view of a bigger one, Fortran order, read-only."""
    yield array
    yield np.repeat(array[..., None], 3, axis=-1)[..., 1]
    yield np.asfortranarray(array)
    frozen = array.copy()
    frozen.flags.writeable = False
    yield frozen


def _values(shape, dtype):
    values = (RNG.standard_normal(shape) * 4).astype(dtype)
    if np.dtype(dtype).kind == "f" and values.size > 1:
        values.flat[0] = np.nan
        values.flat[-1] = -0.0
    return values


def _nd_call(shape, n, k, dtype):
    indices = np.stack([RNG.integers(-d, d, n) for d in shape[:k]], -1)
    return _values(shape, dtype), indices, _values((n, *shape[k:]), dtype)


DTYPES = [np.float32, np.float64, np.int8, np.int32, np.uint16, np.bool_, np.float16, ml_dtypes.bfloat16]


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, n, k", [((16, 4), 40, 1), ((2, 5, 4), 7, 2), ((64,), 300, 1), ((3, 4, 5), 9, 3)])
def test_a_planned_scatter_nd_is_the_kernel_call_after_call(plans, shape, n, k, dtype, reduction):
    for call in range(6):  # new values every call, the signature the same
        data, indices, updates = _nd_call(shape, n, k, dtype)
        for layout in (_layouts(data), _layouts(indices), _layouts(updates))[call % 3]:
            args = [data, indices, updates]
            args[call % 3] = layout
            before = [a.copy() for a in args]
            _same(gs.scatter_nd(*args, reduction=reduction), run_scatter_nd(SCATTER_ND, *args, reduction))
            for given, kept in zip(args, before, strict=True):
                assert given.tobytes() == kept.tobytes()  # no input written
    assert plans["made"] == 1 and plans["ran"] > 10


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, indices_shape, axis", [
    ((2, 5, 16), (2, 12, 16), 1),  # the axis layout (scatter_reduce's export)
    ((6, 4), (9, 4), 0),
    ((5, 6), (3, 2), -1),  # indices narrower than data off the axis: the general loop
    ((4, 3, 2), (2, 3, 2), 0),
])
def test_a_planned_scatter_elements_is_the_kernel_call_after_call(plans, shape, indices_shape, axis, dtype, reduction):
    if reduction == "none" and indices_shape[axis] > 3:
        indices_shape = (*indices_shape[:axis % len(shape)], 70, *indices_shape[axis % len(shape) + 1:])
    for call in range(6):
        data = _values(shape, dtype)
        indices = RNG.integers(-shape[axis], shape[axis], indices_shape)
        updates = _values(indices_shape, dtype)
        for layout in (_layouts(data), _layouts(indices), _layouts(updates))[call % 3]:
            args = [data, indices, updates]
            args[call % 3] = layout
            want = run_scatter_elements(SCATTER_ELEMENTS, *args, axis, reduction)
            _same(gs.scatter_elements(*args, axis, reduction=reduction), want)
    compiled = reduction != "none" or np.prod(indices_shape) > 64  # a few assignments stay NumPy's (a dict)
    general_half = axis == -1 and dtype in (np.float16, ml_dtypes.bfloat16)  # NumPy rounds those there
    if compiled and not general_half:
        assert plans["made"] == 1 and plans["ran"] > 10


def test_signatures_of_the_same_shapes_keep_plans_of_their_own(plans):
    """A dtype, a reduction or an axis of the same shapes, interleaved: each its own plan."""
    shape, n = (8, 6), 20
    indices = RNG.integers(-8, 8, (n, 1))
    square = RNG.integers(-6, 6, (6, 6))
    for _ in range(4):
        for dtype in (np.float32, np.float64, np.int32, np.uint32, np.float16):
            data, updates = _values(shape, dtype), _values((n, 6), dtype)
            for reduction in ("add", "mul", "max", "min"):
                _same(gs.scatter_nd(data, indices, updates, reduction), run_scatter_nd(
                    SCATTER_ND, data, indices, updates, reduction))
            sq_data, sq_updates = _values((6, 6), dtype), _values((6, 6), dtype)
            for axis in (0, 1):
                _same(gs.scatter_elements(sq_data, square, sq_updates, axis, "max"), run_scatter_elements(
                    SCATTER_ELEMENTS, sq_data, square, sq_updates, axis, "max"))
    assert plans["made"] == 5 * 4 + 5 * 2


@pytest.mark.parametrize("bad", [8, -9, 1 << 40])
def test_a_bad_index_of_a_planned_signature_is_the_kernels_error(plans, bad):
    data, indices, updates = _nd_call((8, 3), 10, 1, np.float32)
    for _ in range(3):
        gs.scatter_nd(data, indices, updates, "add")
    wrong = indices.copy()
    wrong[6, 0] = bad
    with pytest.raises(gs.IndexOutOfBoundsError) as expected:
        run_scatter_nd(SCATTER_ND, data, wrong, updates, "add")
    before = data.copy()
    for _ in range(2):
        with pytest.raises(gs.IndexOutOfBoundsError) as info:
            gs.scatter_nd(data, wrong, updates, "add")
        assert str(info.value) == str(expected.value)
        assert (info.value.input, info.value.position, info.value.value) == ("indices", (6, 0), bad)
    np.testing.assert_array_equal(data, before)
    el_data, el_indices = _values((5, 4), np.float32), RNG.integers(-5, 5, (7, 4))
    el_updates = _values((7, 4), np.float32)
    for _ in range(3):
        gs.scatter_elements(el_data, el_indices, el_updates, 0, "max")
    el_wrong = el_indices.copy()
    el_wrong[5, 2] = bad if bad != 8 else 5
    with pytest.raises(gs.IndexOutOfBoundsError) as expected:
        run_scatter_elements(SCATTER_ELEMENTS, el_data, el_wrong, el_updates, 0, "max")
    with pytest.raises(gs.IndexOutOfBoundsError) as info:
        gs.scatter_elements(el_data, el_wrong, el_updates, 0, "max")
    assert str(info.value) == str(expected.value) and info.value.position == (5, 2)
    assert plans["made"] == 2 and plans["ran"] >= 2
    _same(gs.scatter_nd(data, indices, updates, "add"), run_scatter_nd(SCATTER_ND, data, indices, updates, "add"))


def test_out_of_a_planned_signature_takes_the_kernel(plans):
    data, indices, updates = _nd_call((6, 5), 12, 1, np.float64)
    want = run_scatter_nd(SCATTER_ND, data, indices, updates, "mul")
    for _ in range(3):
        _same(gs.scatter_nd(data, indices, updates, "mul"), want)
    ran = plans["ran"]
    buffer = np.full((6, 5), 7.0)
    assert gs.scatter_nd(data, indices, updates, "mul", out=buffer) is buffer
    _same(buffer, want)
    cache = data.copy()
    assert gs.scatter_nd(cache, indices, updates, "mul", out=cache) is cache
    _same(cache, want)
    assert plans["ran"] == ran  # neither took the plan, whose output is always fresh
    _same(gs.scatter_nd(data, indices, updates, "mul"), want)


def test_a_plan_serves_only_the_thread_count_it_was_made_for(plans):
    """16 x 1024 float32 (64 KiB, small) with 1,000 rows of updates (4 MB): two threads split
    the targets (reduce_rows), one runs the fused loop; the plan is of one thread only."""
    data, indices, updates = _nd_call((16, 1024), 1000, 1, np.float32)
    want = run_scatter_nd(SCATTER_ND, data, indices, updates, "add")
    previous = gs.get_num_threads()
    try:
        gs.set_num_threads(1)
        for _ in range(3):
            _same(gs.scatter_nd(data, indices, updates, "add"), want)
        assert plans["made"] == 1 and plans["ran"] == 1
        gs.set_num_threads(2)
        for _ in range(3):
            _same(gs.scatter_nd(data, indices, updates, "add"), want)
        assert plans["made"] == 1 and plans["ran"] == 1  # two threads: the split, and no plan for it
        gs.set_num_threads(1)
        for _ in range(3):
            _same(gs.scatter_nd(data, indices, updates, "add"), want)
        assert plans["made"] == 1 and plans["ran"] == 4  # the plan of one thread, kept
    finally:
        gs.set_num_threads(previous)


def test_a_plan_holds_no_array_of_the_call_that_made_it(plans):
    data, indices, updates = _nd_call((10, 2), 5, 1, np.float32)
    gs.scatter_nd(data, indices, updates, "max")
    seen = [weakref.ref(a) for a in (data, indices, updates)]
    gs.scatter_nd(data, indices, updates, "max")  # the plan is made here
    assert plans["made"] == 1
    del data, indices, updates
    gc.collect()
    assert all(ref() is None for ref in seen)


def test_the_memory_limit_still_refuses_a_planned_call(plans):
    data, indices, updates = _nd_call((32, 4), 6, 1, np.float32)
    for _ in range(3):
        gs.scatter_nd(data, indices, updates, "add")
    assert plans["ran"] == 1
    previous = gs.set_memory_limit(100)
    try:
        with pytest.raises(gs.OutputTooLargeError):
            gs.scatter_nd(data, indices, updates, "add")
    finally:
        gs.set_memory_limit(previous)


def test_a_string_gather_of_an_accepted_signature_checks_its_items_every_call():
    """Object arrays of str take the fast path once accepted (the hosted Session's string rows):
    the values are the kernel's, and each call still checks the items and the bounds."""
    from gather_scatter.kernels.gather import run_gather
    from gather_scatter.rules.versions import GATHER

    words = np.array([[f"w{i}_{j}" for j in range(3)] for i in range(6)], dtype=object)
    cases = [(words, RNG.integers(-6, 6, (4,)), 0), (words, RNG.integers(-3, 3, (2, 2)), 1),
             (words[::2], np.array(-1), 0), (words.T, RNG.integers(-6, 6, (5,)), 1)]
    for data, indices, axis in cases:
        want = run_gather(GATHER, data, indices, axis)
        for _ in range(4):
            got = gs.gather(data, indices, axis)
            assert type(got) is np.ndarray and got.dtype == object and got.shape == want.shape
            assert got.tolist() == want.tolist()
    mixed = words.copy()
    mixed[4, 1] = 7
    with pytest.raises(gs.DTypeError) as expected:
        run_gather(GATHER, mixed, np.array([0, 1, 2, 3]), 0)
    for _ in range(2):
        with pytest.raises(gs.DTypeError) as info:
            gs.gather(mixed, np.array([0, 1, 2, 3]), 0)  # the row holding 7 is not gathered: still refused
        assert str(info.value) == str(expected.value) and info.value.position == (4, 1)
    with pytest.raises(gs.IndexOutOfBoundsError, match=r"indices\[2\] = 6"):
        gs.gather(words, np.array([0, 1, 6, 2]), 0)
    unicode = np.array(["a", "bc", "d"])
    for _ in range(3):
        got = gs.gather(unicode, np.array([2, 0]))
        assert got.dtype == object and got.tolist() == ["d", "a"]
