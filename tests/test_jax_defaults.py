"""JAX as users run it: ``jax_enable_x64`` off, JAX's default (no 64-bit types; int64 is held
as int32), next to x64 on. The flag is process-global: every test here holds
``jax.enable_x64(...)`` (a context manager that restores it), so no test depends on another's
order. Issue 15: host indices checked as passed before any narrowing, trace-time errors for
indices known at trace time, no int32 overflow in index arithmetic, int32 JAX indices taken
as JAX's int64, no warnings from our own casts, the eager text under checkify, and XLA's
flushed subnormals stated and shown. Issue 26.2: int64 indices JAX itself narrows without x64
(jit arguments, jnp.asarray), before we see them, asserted as they hold."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from backends import Library, same_bits

jax = pytest.importorskip("jax", reason="jax not installed (pip install 'gather_scatter[jax]')")
jnp = jax.numpy
from jax.experimental import checkify  # noqa: E402

import gather_scatter as gs  # noqa: E402
from gather_scatter import IndexOutOfBoundsError, OutputTooLargeError  # noqa: E402
from gather_scatter.rules.versions import SWEPT

BEYOND = 2**32 + 1  # int32 truncation makes it 1


@pytest.fixture(params=[False, True], ids=["x64_off", "x64_on"])
def x64(request):
    with jax.enable_x64(request.param), warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning from our own casts (int64 -> int32, ...)
        yield request.param


@pytest.fixture
def lib_default():
    with jax.enable_x64(False):
        yield Library("jax", x64=False)


def _numpy_error(fn, *args, **kwargs) -> str:
    with pytest.raises(IndexOutOfBoundsError) as info:
        fn(*args, **kwargs)
    return str(info.value)


TABLE = np.arange(12.0, dtype=np.float32).reshape(3, 4)
CACHE = np.zeros((1, 2, 4, 2), np.float32)
STEP = np.ones((1, 2, 1, 2), np.float32)

# (name, call with data and indices, data, indices beyond int32): each must raise the NumPy error
BEYOND_CASES = [
    ("gather", lambda d, i: gs.gather(d, i), TABLE, [BEYOND]),
    ("gather_scalar", lambda d, i: gs.gather(d, i), TABLE, BEYOND),
    ("gather_nd", lambda d, i: gs.gather_nd(d, i), TABLE, [[2, BEYOND]]),
    ("scatter_nd", lambda d, i: gs.scatter_nd(d, i, np.ones((1, 4), np.float32)), TABLE, [[2**32 + 2]]),
    ("gather_elements", lambda d, i: gs.gather_elements(d, i), TABLE, [[BEYOND]]),
    ("scatter_elements", lambda d, i: gs.scatter_elements(d, i, np.ones((1, 1), np.float32)), TABLE, [[BEYOND]]),
    ("tensor_scatter", lambda c, i: gs.tensor_scatter(c, STEP, write_indices=i), CACHE, [BEYOND]),
    ("tensor_scatter_negative", lambda c, i: gs.tensor_scatter(c, STEP, write_indices=i), CACHE, [-BEYOND]),
]


@pytest.mark.parametrize("name, fn, data, indices", BEYOND_CASES, ids=[c[0] for c in BEYOND_CASES])
@pytest.mark.parametrize("kind", ["numpy", "list"])
def test_indices_beyond_int32_raise_before_narrowing(x64, name, fn, data, indices, kind):
    """#15.2: int64 NumPy indices (and lists) are checked as passed, eagerly and under jit."""
    given = np.asarray(indices, dtype=np.int64) if kind == "numpy" else indices
    expected = _numpy_error(fn, data, np.asarray(indices, dtype=np.int64))
    assert _numpy_error(fn, jnp.asarray(data), given) == expected
    assert _numpy_error(jax.jit(lambda d: fn(d, given)), jnp.asarray(data)) == expected


def test_circular_write_beyond_int32_wraps_exactly(x64):
    """TensorScatter's circular mode takes any write index >= 0: (w + j) % capacity, in int64,
    not (w truncated to int32 + j) % capacity (capacity 3 does not divide 2**32)."""
    cache = np.zeros((2, 1, 3, 2), np.float32)
    step = np.arange(8, dtype=np.float32).reshape(2, 1, 2, 2) + 1
    write = np.array([BEYOND, 2**31 - 1])
    expected = gs.tensor_scatter(cache, step, write, axis=2, mode="circular")
    eager = gs.tensor_scatter(jnp.asarray(cache), jnp.asarray(step), write, axis=2, mode="circular")
    closed = jax.jit(lambda c, u: gs.tensor_scatter(c, u, write, axis=2, mode="circular"))  # write: a trace-time value
    for got in (eager, closed(jnp.asarray(cache), jnp.asarray(step))):
        assert same_bits(expected, np.asarray(got))
    # JAX indices near 2**31: (w % capacity + j) % capacity, no int32 overflow in w + j
    traced = jax.jit(lambda c, u, w: gs.tensor_scatter(c, u, w, axis=2, mode="circular"))
    assert same_bits(expected[1:], np.asarray(traced(jnp.asarray(cache[1:]), jnp.asarray(step[1:]),
                                                     jnp.asarray(write[1:]))))


# ---- #15.4: indices known at trace time are checked at trace time -----------------------------

TRACE_TIME = [
    ("gather_list", lambda d: gs.gather(d, [5]), lambda d: gs.gather(d, np.array([5]))),
    ("gather_scalar", lambda d: gs.gather(d, 5), lambda d: gs.gather(d, np.array(5))),
    ("gather_numpy", lambda d: gs.gather(d, np.array([0, -4])), None),
    ("gather_nd", lambda d: gs.gather_nd(d, [[0], [3]]), lambda d: gs.gather_nd(d, np.array([[0], [3]]))),
    ("scatter_nd", lambda d: gs.scatter_nd(d, np.array([[3]]), np.ones(1, np.float32)), None),
    ("gather_elements", lambda d: gs.gather_elements(d, np.array([1, 3])), None),
    ("scatter_elements", lambda d: gs.scatter_elements(d, [-4], np.ones(1, np.float32)),
     lambda d: gs.scatter_elements(d, np.array([-4]), np.ones(1, np.float32))),
]


@pytest.mark.parametrize("name, fn, numpy_fn", TRACE_TIME, ids=[c[0] for c in TRACE_TIME])
def test_jit_with_concrete_bad_indices_raises_at_trace_time(x64, name, fn, numpy_fn):
    data = np.arange(3.0, dtype=np.float32)
    expected = _numpy_error(numpy_fn or fn, data)
    assert _numpy_error(jax.jit(fn), jnp.asarray(data)) == expected  # never [nan]
    with pytest.raises(IndexOutOfBoundsError):
        jax.jit(fn).trace(jnp.asarray(data))  # at trace time: nothing runs


def test_traced_indices_still_follow_checkify(x64):
    f = jax.jit(lambda d, i: gs.gather(d, i))
    data = jnp.arange(3.0, dtype=jnp.float32)
    assert np.isnan(np.asarray(f(data, jnp.asarray([5])))[0])
    err, _ = checkify.checkify(f)(data, jnp.asarray([5]))
    assert err.get() == _numpy_error(gs.gather, np.arange(3.0), np.array([5])) + " (`check` failed)"


# ---- #26.2: what JAX narrows before we see it (x64 off) ---------------------------------------
# Indices that reach gs as NumPy or Python values (eagerly, or closed over by a jitted function)
# are checked as int64 above. Where JAX itself makes the array (an argument of a jitted function,
# jnp.asarray) it keeps the low 32 bits without x64, silently, before our code runs: nothing can
# tell, and a value that narrows to a valid index reads or writes that element (README, "x64 off").


def _narrowed(indices) -> np.ndarray:
    """``indices`` as JAX holds an int64 NumPy array without x64: its low 32 bits."""
    return np.asarray(indices, dtype=np.int64).astype(np.int32).astype(np.int64)


def _numpy_result_or_error(fn, data, indices):
    try:
        return fn(data, indices), None
    except IndexOutOfBoundsError as exc:
        return None, str(exc)


def test_issue_26_jit_arguments_narrow_silently():
    """The issue's case, as it holds: x64 off, NumPy int64 indices passed as arguments of jax.jit
    arrive as int32, so 2**32 + 1 reads row 1 and 2**32 + 2 overwrites row 2; checkify reports
    nothing and nothing warns. Closed over by the function, the same indices raise."""
    table = jnp.asarray(TABLE)
    gather = jax.jit(lambda d, i: gs.gather(d, i))
    scatter = jax.jit(lambda d, i: gs.scatter_nd(d, i, jnp.full((1, 4), -1.0, jnp.float32)))
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("error")  # JAX narrows without a warning
        assert np.asarray(gather(table, np.array([2**32 + 1]))).tolist() == [TABLE[1].tolist()]
        err, out = checkify.checkify(gather)(table, np.array([2**32 + 1]))
        assert err.get() is None and np.asarray(out).tolist() == [TABLE[1].tolist()]
        written = np.asarray(scatter(table, np.array([[2**32 + 2]])))
        assert written[2].tolist() == [-1.0] * 4 and same_bits(written[:2], TABLE[:2])
        assert checkify.checkify(scatter)(table, np.array([[2**32 + 2]]))[0].get() is None
        # what reaches gs as NumPy values is checked as passed, eagerly and closed over
        for call in (
            lambda: gs.gather(table, np.array([2**32 + 1])),
            lambda: jax.jit(lambda d: gs.gather(d, np.array([2**32 + 1])))(table),
        ):
            with pytest.raises(IndexOutOfBoundsError, match=r"indices\[0\] = 4294967297 is out of bounds"):
                call()
    with jax.enable_x64(True):  # with x64 nothing narrows: checkify reports the value as passed
        err, out = checkify.checkify(gather)(table, np.array([2**32 + 1]))
        assert err.get().startswith("Gather-13: indices[0] = 4294967297 is out of bounds")
        assert np.isnan(np.asarray(out)).all()


@pytest.mark.parametrize("name, fn, data, indices", BEYOND_CASES, ids=[c[0] for c in BEYOND_CASES])
@pytest.mark.parametrize("made_by", ["jit_argument", "jnp_asarray"])
def test_indices_jax_makes_are_narrowed_without_x64(x64, name, fn, data, indices, made_by):
    """Indices beyond int32 that JAX turns into an array itself: with x64 on they keep their
    value (the eager error, or checkify's, names it); with x64 off JAX keeps their low 32 bits
    before we see them, and the call is that of the narrowed value: a valid one reads or writes
    its element (no error, no warning), a bad one is reported with the narrowed value."""
    given = np.asarray(indices, dtype=np.int64)
    seen = given if x64 else _narrowed(given)
    assert x64 or not np.array_equal(seen, given)
    expected, message = _numpy_result_or_error(fn, data, seen)
    if made_by == "jit_argument":
        jitted = jax.jit(fn)
        err, out = checkify.checkify(jitted)(jnp.asarray(data), given)
        if message is None:
            assert err.get() is None
            assert same_bits(expected, np.asarray(out))
            assert same_bits(expected, np.asarray(jitted(jnp.asarray(data), given)))
        else:
            assert err.get() == message + " (`check` failed)"
        return
    array = jnp.asarray(given)
    assert np.asarray(array).tolist() == seen.tolist()
    if message is None:
        assert same_bits(expected, np.asarray(fn(jnp.asarray(data), array)))
    else:
        assert _numpy_error(fn, jnp.asarray(data), array) == message


def test_narrowing_keeps_the_low_32_bits():
    """Values JAX narrows: 2**32 + 1 -> 1, -(2**32) - 2 -> -2 (valid: rows 1 and 1 of 3), 2**31
    -> -2**31 and -(2**31) - 1 -> 2**31 - 1 (bad: reported with the narrowed value)."""
    table = jnp.asarray(TABLE)
    gather = jax.jit(lambda d, i: gs.gather(d, i))
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("error")
        given = np.array([2**32 + 1, -(2**32) - 2, 2**31, -(2**31) - 1])
        assert np.asarray(jnp.asarray(given)).tolist() == [1, -2, -(2**31), 2**31 - 1]
        out = np.asarray(gather(table, given))
        assert same_bits(out[:2], TABLE[[1, 1]]) and np.isnan(out[2:]).all()
        for value, narrowed in ((2**31, -(2**31)), (-(2**31) - 1, 2**31 - 1)):
            err, _ = checkify.checkify(gather)(table, np.array([value]))
            assert err.get() == _numpy_error(gs.gather, TABLE, np.array([narrowed])) + " (`check` failed)"
            with pytest.raises(IndexOutOfBoundsError, match=rf"indices\[0\] = {narrowed} is out of bounds"):
                gs.gather(table, jnp.asarray(np.array([value])))
            with pytest.raises(IndexOutOfBoundsError, match=rf"indices\[0\] = {value} is out of bounds"):
                gs.gather(table, np.array([value]))  # given to gs as NumPy: the value as passed


def test_python_ints_as_jit_arguments_overflow_in_jax():
    """Python ints and lists passed as jit arguments are not narrowed: JAX refuses them."""
    gather = jax.jit(lambda d, i: gs.gather(d, i))
    with jax.enable_x64(False):
        for given in (2**32 + 1, [2**32 + 1]):
            with pytest.raises(OverflowError):
                gather(jnp.asarray(TABLE), given)


BAD_IN_INT32 = [3, -4, 2**31 - 1, -(2**31)]  # out of range for 3 rows, no narrowing involved


@pytest.mark.parametrize("value", BAD_IN_INT32)
def test_bad_indices_within_int32_are_reported_every_way(x64, value):
    """Out-of-range values that int32 holds are reported with their value whichever way they
    come: eagerly and closed over as NumPy (raise), as jit arguments (checkify) and as JAX
    arrays (raise)."""
    table = jnp.asarray(TABLE)
    given = np.array([value])
    expected = _numpy_error(gs.gather, TABLE, given)
    assert f"indices[0] = {value} is out of bounds" in expected
    assert _numpy_error(gs.gather, table, given) == expected
    assert _numpy_error(gs.gather, table, np.int64(value)) == _numpy_error(gs.gather, TABLE, np.int64(value))
    assert _numpy_error(jax.jit(lambda d: gs.gather(d, given)), table) == expected
    assert _numpy_error(gs.gather, table, jnp.asarray(given)) == expected
    gather = jax.jit(lambda d, i: gs.gather(d, i))
    err, out = checkify.checkify(gather)(table, given)
    assert err.get() == expected + " (`check` failed)" and np.isnan(np.asarray(out)).all()


# ---- #15.3: index arithmetic never wraps past 2**31 positions ----------------------------------

BIG = jax.ShapeDtypeStruct((65536, 32769), jnp.int8)  # 2**31 + 65536 elements, never allocated
BIG_CALLS = [
    ("gather_nd", lambda h: gs.gather_nd(h, np.array([[65535, 5]])), (1,)),
    ("gather_nd_traced", lambda h: gs.gather_nd(h, jnp.array([[65535, 5]])), (1,)),
    ("scatter_nd", lambda h: gs.scatter_nd(h, np.array([[65535, 5]]), np.array([1], np.int8)), BIG.shape),
    ("scatter_elements", lambda h: gs.scatter_elements(h, np.array([[1]]), np.array([[1]], np.int8)), BIG.shape),
    ("tensor_scatter", lambda h: gs.tensor_scatter(h.reshape(1, 65536, 32769), jnp.ones((1, 65536, 1), jnp.int8),
                                                   np.array([4]), axis=2), (1, 65536, 32769)),
]


@pytest.mark.parametrize("name, fn, shape", BIG_CALLS, ids=[c[0] for c in BIG_CALLS])
def test_offsets_past_int32_refuse_without_x64(x64, name, fn, shape):
    if x64:
        assert jax.eval_shape(fn, BIG).shape == shape
        return
    with pytest.raises(OutputTooLargeError, match=r"more than int32 holds \(2\*\*31\); JAX without jax_enable_x64 "
                                                  r"indexes with int32, so enable it") as info:
        jax.eval_shape(fn, BIG)
    assert info.value.value >= 2**31 and info.value.input in ("data", "past_cache")


def test_per_axis_takes_on_big_data_need_no_x64(x64):
    """Gather and GatherElements index one axis at a time (below 2**31): nothing to refuse."""
    assert jax.eval_shape(lambda h: gs.gather(h, np.array([65535, 0])), BIG).shape == (2, 32769)
    assert jax.eval_shape(lambda h: gs.gather(h, np.array([32768]), axis=1), BIG).shape == (65536, 1)
    assert jax.eval_shape(lambda h: gs.gather_elements(h, jnp.zeros((2, 3), jnp.int32)), BIG).shape == (2, 3)


def test_big_table_element_is_read_exactly():
    """The issue's 2 GiB case on a real array: x64 on reads [65535, 5]; x64 off refuses, never [0, 0]."""
    host = np.zeros((65536, 32769), np.int8)
    host[65535, 5] = 7
    with jax.enable_x64(True):
        table = jnp.asarray(host)
        assert np.asarray(gs.gather_nd(table, np.array([[65535, 5]]))).tolist() == [7]
        del table
    with jax.enable_x64(False):
        table = jnp.asarray(host)
        with pytest.raises(OutputTooLargeError, match="jax_enable_x64"):
            gs.gather_nd(table, np.array([[65535, 5]]))
        with pytest.raises(OutputTooLargeError, match="jax_enable_x64"):
            gs.scatter_nd(table, np.array([[65535, 5]]), np.array([1], np.int8))


# Issue 26.14: what reaches 2**31 is the positions an operator's index arithmetic ranges over,
# not the data's size. TensorScatter writes rows of the dims after its sequence axis, so its
# offsets range over batch x heads x capacity rows (and capacity + sequence_length positions);
# GatherND/ScatterND's over the leading dims an index tuple names. Beyond those, XLA addresses
# the elements itself.
PAST_INT32_CALLS = [  # (name, the call, its input's shape, whether x64 off refuses)
    ("tensor_scatter_rows_below", lambda c: gs.tensor_scatter(c, jnp.ones((2, 1, 2**15 + 64), jnp.int8),
                                                               np.array([0, 2**15 - 1])), (2, 2**15, 2**15 + 64), False),
    ("tensor_scatter_rows_reach", lambda c: gs.tensor_scatter(c, jnp.ones((2, 1, 1), jnp.int8),
                                                               np.array([0, 0])), (2, 2**30, 1), True),
    ("tensor_scatter_capacity_reach", lambda c: gs.tensor_scatter(c, jnp.ones((1, 1), jnp.int8), np.array([0]),
                                                                  axis=-1), (1, 2**31), True),
    ("gather_nd_leading_rows_below", lambda h: gs.gather_nd(h, np.array([[65535]])), BIG.shape, False),
    ("scatter_nd_leading_rows_below", lambda h: gs.scatter_nd(h, np.array([[65535]]), jnp.ones((1, 32769), jnp.int8)),
     BIG.shape, False),
]


@pytest.mark.parametrize("name, fn, shape, refuses", PAST_INT32_CALLS, ids=[c[0] for c in PAST_INT32_CALLS])
def test_what_refuses_past_int32_without_x64(x64, name, fn, shape, refuses):
    """Data of 2**31 elements or more runs without x64 where the offsets stay below 2**31."""
    shaped = jax.ShapeDtypeStruct(shape, jnp.int8)  # never allocated
    if refuses and not x64:
        with pytest.raises(OutputTooLargeError, match="jax_enable_x64") as info:
            jax.eval_shape(fn, shaped)
        assert info.value.value >= 2**31
    else:
        assert jax.eval_shape(fn, shaped).shape


def _available_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration):
        return 0


@pytest.mark.skipif(_available_bytes() < 8 * 2**30, reason="needs about 8 GiB of free memory (two 2 GiB caches)")
def test_tensor_scatter_writes_past_2_31_elements_without_x64():
    """The issue's case on real arrays: a (2, 2**15, 2**15 + 64) int8 cache (2**31 + 2**22
    elements) with x64 off writes the right rows; its last element is at flat position
    2_151_677_951, past int32. TensorScatter's offsets range over 2 x 2**15 rows only."""
    with jax.enable_x64(False):
        width = 2**15 + 64
        cache = jnp.zeros((2, 2**15, width), jnp.int8)
        update = jnp.stack([jnp.full((1, width), 5, jnp.int8), jnp.full((1, width), 7, jnp.int8)])
        out = gs.tensor_scatter(cache, update, np.array([3, 2**15 - 1]))
        del cache
        assert out.shape == (2, 2**15, width) and out.dtype == jnp.int8
        assert (np.asarray(out[1, -1]) == 7).all() and (np.asarray(out[0, 3]) == 5).all()
        assert int(out[1, -1, -1]) == 7  # flat position 2 * 2**15 * width - 1 >= 2**31
        assert not np.asarray(out[1, -2]).any() and not np.asarray(out[0, 2]).any() and not np.asarray(out[0, 4]).any()
        assert np.count_nonzero(np.asarray(out)) == 2 * width  # nothing else written (a view on the CPU)


# ---- #15.11: JAX int32 indices are JAX's int64 without x64; no warnings ----------------------


def test_int32_jax_indices_are_int64_without_x64():
    data = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    cache, step = np.zeros((2, 1, 5, 2), np.float32), np.ones((2, 1, 2, 2), np.float32)
    indices, write = np.array([[1, 2], [0, -1]]), np.array([3, 0])
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("error")
        i32, w32 = jnp.asarray(indices.astype(np.int32)), jnp.asarray(write.astype(np.int32))
        calls = [
            (lambda d, i: gs.gather_nd(d, i), gs.gather_nd(data, indices), data, i32),
            (lambda d, i: gs.scatter_nd(d, i, jnp.ones((2, 4), jnp.float32), reduction="add"),
             gs.scatter_nd(data, indices, np.ones((2, 4), np.float32), reduction="add"), data, i32),
            (lambda c, w: gs.tensor_scatter(c, jnp.asarray(step), w), gs.tensor_scatter(cache, step, write), cache, w32),
        ]
        for fn, expected, first, idx in calls:
            assert same_bits(expected, np.asarray(fn(jnp.asarray(first), idx)))
            assert same_bits(expected, np.asarray(jax.jit(fn)(jnp.asarray(first), idx)))
        assert same_bits(gs.tensor_scatter(cache, step, write),
                         np.asarray(jax.jit(gs.tensor_scatter)(jnp.asarray(cache), jnp.asarray(step), w32)))
    with jax.enable_x64(True):  # with x64, int32 is int32 and ONNX's rule holds
        with pytest.raises(gs.DTypeError, match=r"indices has type tensor\(int32\)"):
            gs.gather_nd(jnp.asarray(data), jnp.asarray(indices, dtype=jnp.int32))


def test_no_call_warns(x64):
    """Every operator, NumPy/list and JAX indices, eager and jit, under warnings as errors."""
    data = jnp.arange(12.0, dtype=jnp.float32).reshape(3, 4)
    calls = [
        lambda d, i: gs.gather(d, i), lambda d, i: gs.gather_elements(d, i[:, :1]),
        lambda d, i: gs.scatter_elements(d, i[:, :1], jnp.ones((2, 1), jnp.float32), reduction="mul"),
        lambda d, i: gs.gather_nd(d, i), lambda d, i: gs.scatter_nd(d, i, jnp.ones(2, jnp.float32)),
        lambda d, i: gs.tensor_scatter(d[None], jnp.ones((1, 1, 4), jnp.float32), i[0, :1], axis=1, mode="circular"),
    ]
    for fn in calls:
        for indices in (np.array([[1, 2], [0, -1]]), jnp.asarray([[1, 2], [0, -1]])):
            fn(data, indices)
            jax.jit(fn)(data, indices)


# ---- #15.20: checkify carries the eager message ------------------------------------------------


def test_checkify_messages_are_the_eager_ones(x64):
    cache, step = np.zeros((2, 1, 4, 2), np.float32), np.ones((2, 1, 2, 2), np.float32)
    w = jax.jit(lambda c, u, i: gs.tensor_scatter(c, u, i, axis=2))
    for write in ([0, 3], [-2, 0], [0, -1]):  # too far for linear mode; negative
        expected = _numpy_error(gs.tensor_scatter, cache, step, np.array(write), axis=2)
        err, _ = checkify.checkify(w)(jnp.asarray(cache), jnp.asarray(step), jnp.asarray(write))
        assert err.get() == expected + " (`check` failed)"
    g = jax.jit(lambda d, i: gs.gather_nd(d, i))
    empty = np.zeros((2, 0, 3), np.float32)
    for data, indices in ((TABLE, [[1, 2], [0, 9]]), (TABLE, [[5, 0]]), (empty, [[1, 0]])):
        expected = _numpy_error(gs.gather_nd, data, np.array(indices))
        err, _ = checkify.checkify(g)(jnp.asarray(data), jnp.asarray(indices))
        assert err.get() == expected + " (`check` failed)"


# ---- #15.26: XLA's CPU flushes subnormals in arithmetic ---------------------------------------


def test_subnormals_flush_in_arithmetic_reductions_only(x64):
    """The documented exception to bitwise NumPy results: a 'mul' over 200k duplicates whose
    product is subnormal (2**-127) ends at 0 in JAX where NumPy keeps it; 'add' of a subnormal
    likewise. Copies (gathers, 'none', TensorScatter) keep subnormals, and float16 (computed
    in float32 there) keeps its own."""
    data = np.ones(2, np.float32)
    updates = np.ones(200_000, np.float32)
    updates[::1500][:127] = 0.5  # 127 halvings spread through 200k duplicate updates of element 0
    indices = np.zeros((200_000, 1), np.int64)
    expected = gs.scatter_nd(data, indices, updates, reduction="mul")
    assert expected[0] == np.float32(2.0**-127) and expected[0] < np.finfo(np.float32).tiny  # subnormal
    got = np.asarray(gs.scatter_nd(jnp.asarray(data), indices, jnp.asarray(updates), reduction="mul"))
    assert got.tolist() == [0.0, 1.0]  # flushed: the documented difference
    tiny = np.array([1e-39, 1.0], np.float32)  # a subnormal float32 and a normal one
    add = np.asarray(gs.scatter_nd(jnp.asarray(tiny), np.array([[0], [1]]), jnp.zeros(2, jnp.float32),
                                   reduction="add"))
    assert add.tolist() == [0.0, 1.0] and gs.scatter_nd(tiny, np.array([[0], [1]]), np.zeros(2, np.float32),
                                                        reduction="add")[0] == tiny[0]
    # copies keep the bits
    for fn in (lambda d: gs.gather(d, np.array([0, 0])), lambda d: gs.scatter_nd(d[::-1], np.array([[1]]), d[:1]),
               lambda d: gs.tensor_scatter(d.reshape(1, 2, 1), d[:1].reshape(1, 1, 1), np.array([1]), axis=1)):
        assert same_bits(fn(tiny), np.asarray(fn(jnp.asarray(tiny))))
    half = np.array([1e-6, 1.0], np.float16)  # subnormal in float16, normal in float32
    assert same_bits(gs.scatter_nd(half, np.array([[0]]), np.zeros(1, np.float16), reduction="add"),
                     np.asarray(gs.scatter_nd(jnp.asarray(half), np.array([[0]]), jnp.zeros(1, jnp.float16),
                                              reduction="add")))


def test_normal_products_are_bitwise_numpy(x64):
    """Where no subnormal arises, the same 200k-duplicate 'mul' is NumPy's bits."""
    rng = np.random.default_rng(26)
    data = np.ones(3, np.float32)
    updates = (1 + rng.standard_normal(200_000) / 4096).astype(np.float32)
    indices = rng.integers(0, 3, size=(200_000, 1))
    expected = gs.scatter_nd(data, indices, updates, reduction="mul")
    assert (np.abs(expected) >= np.finfo(np.float32).tiny).all()
    got = gs.scatter_nd(jnp.asarray(data), indices, jnp.asarray(updates), reduction="mul")
    assert same_bits(expected, np.asarray(got))


# ---- the shared backend tests, as users run JAX -----------------------------------------------


SPECS = sorted(SWEPT.values(), key=lambda s: (s.domain, s.op_type, s.since_version))


def _run(spec, inputs, attrs):
    return gs.run_node(spec.op_type, inputs, attrs, opset=spec.since_version, domain=spec.domain)


def _as_users_pass(spec, lib, inputs, numpy_indices):
    """data as a JAX array (None if JAX holds no such type without x64); indices as JAX arrays
    (int64 ones as the int32 JAX holds) or, with ``numpy_indices``, as NumPy; other inputs as
    JAX arrays, or as NumPy where JAX holds no such type (the type rule judges them as passed)."""
    if not lib.supports(inputs[0]) or inputs[0].dtype == np.int64:
        return None
    at = 2 if spec.op_type == "TensorScatter" else 1
    converted = [lib.convert(inputs[0])]
    for i, value in enumerate(inputs[1:], 1):
        if i == at:
            keep = value is None or numpy_indices or not lib.supports(value)
        else:
            keep = not isinstance(value, np.ndarray) or value.dtype == np.int64 or not lib.supports(value)
        converted.append(value if keep else lib.convert(value))
    return converted


def test_valid_cases_without_x64(lib_default):
    """The random cases of every version (as in test_backends), bitwise NumPy's, as users run JAX."""
    from gather_scatter.check.cases import valid_cases

    compared, failures = 0, []
    for n, spec in enumerate(SPECS):
        rng = np.random.default_rng(1000 + n)
        for i, case in enumerate(valid_cases(spec, rng, per_combination=1)):
            inputs = _as_users_pass(spec, lib_default, case.inputs, numpy_indices=i % 2 == 1)
            if inputs is None:
                continue
            expected = _run(spec, case.inputs, case.attrs)
            actual = lib_default.to_numpy(_run(spec, inputs, case.attrs), expected.dtype)
            compared += 1
            if expected.dtype.kind == "c" and case.attrs.get("reduction") == "mul":  # see test_backends
                if not np.allclose(expected, actual, rtol=1e-6, equal_nan=True):
                    failures.append(f"{spec.name}: {case.describe()}")
            elif not same_bits(expected, actual):
                failures.append(f"{spec.name}: {case.describe()}")
    assert not failures, f"{len(failures)} of {compared} differ, e.g. {failures[:3]}"
    assert compared > 300, compared


def test_invalid_cases_without_x64(lib_default):
    """The invalid cases (as in test_backends) raise the NumPy error, as users run JAX; the one
    documented difference: int32 JAX indices are JAX's int64, so an int64-only version takes them."""
    from error_check import raised, same_error
    from strategies import more_invalid_cases

    from gather_scatter.check.cases import invalid_cases

    compared, failures = 0, []
    for n, spec in enumerate(SPECS):
        rng = np.random.default_rng(2000 + n)
        for type_name in [t for t in ("float", "int32") if t in spec.data_types]:
            for index_dtype in sorted(spec.index_types):
                for source in (invalid_cases, more_invalid_cases):
                    for kind, case, cls in source(spec, rng, type_name, index_dtype):
                        if not isinstance(case.inputs[0], np.ndarray):
                            continue
                        inputs = _as_users_pass(spec, lib_default, case.inputs, numpy_indices=False)
                        if inputs is None or kind in ("int32 indices", "write_indices int32"):
                            continue
                        expected = raised(lambda: _run(spec, case.inputs, case.attrs))
                        actual = raised(lambda: _run(spec, inputs, case.attrs))
                        compared += 1
                        if not same_error(expected, actual):
                            failures.append(f"{spec.name} {kind}: numpy {expected!r} vs {actual!r}")
    assert not failures, f"{len(failures)} of {compared} differ: {failures[:4]}"
    assert compared > 100, compared


def _error_rows():
    from test_errors import TABLE as ROWS

    return ROWS


@pytest.mark.parametrize("row", [pytest.param(r.values, id=r.id) for r in _error_rows()])
def test_error_table_without_x64(lib_default, row):
    from test_backends import test_error_table

    if row[0] in ("GatherND", "ScatterND") and any(getattr(a, "dtype", None) == np.int32 for a in row[1][1:2]):
        pytest.skip("int32 JAX indices are JAX's int64 without x64 (test_int32_jax_indices_are_int64_without_x64)")
    test_error_table(lib_default, row)


def test_mixed_inputs_out_and_inputs_unchanged_without_x64(lib_default):
    data = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    for idx in (np.array([2, 0]), [2, 0], jnp.asarray([2, 0])):
        assert same_bits(gs.gather(data, np.array([2, 0])), np.asarray(gs.gather(jnp.asarray(data), idx)))
    with pytest.raises(gs.DTypeError, match=r"ScatterND-18: out= cannot be written for .* \(immutable arrays\)"):
        d = jnp.asarray(data)
        gs.scatter_nd(d, np.array([[1]]), jnp.ones((1, 4), jnp.float32), out=d)
    d, u = jnp.asarray(data), jnp.ones((3, 4), jnp.float32)
    for reduction in ("none", "add", "mul", "max", "min"):
        gs.scatter_nd(d, np.array([[1], [1], [-1]]), u, reduction=reduction)
    assert same_bits(data, np.asarray(d)) and same_bits(np.ones((3, 4), np.float32), np.asarray(u))
