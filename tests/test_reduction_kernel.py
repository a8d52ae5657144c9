"""The compiled reduction kernels (issue 24) against the spec's loop: ScatterND's rows
(kernels._reductions.reduce_rows) and ScatterElements' elements along an axis (scatter_axis).

Every reduction x dtype x row width (1, 7, 8, 9, 64, 1000) x duplicate depth (none, a few, all
updates on one target) x thread count 1-3, through the public ``scatter_nd``, bit for bit with
``oracle.scatter_nd`` (the spec's loop, written from its text). The threads' split of the
targets is forced (the cost model would keep these small calls on one thread), so each part's
order is what is tested. Then NaN, signed zeros and ties; negative indices; empty updates; the
first bad index raised before anything is written; ``out=data``; and the first call of a
process, before numba is loaded (NumPy's path), against the compiled one.

ScatterElements likewise: every reduction (and none) x dtype x layout (the axis first, in the
middle, last; rows of 1, 7 and 64 elements; indices smaller than data off the axis, the
general loop's case) x duplicate depth x thread count 1-3, its column and outer splits forced.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import oracle
import pytest

import gather_scatter as gs
from gather_scatter import _calls as _runners
from gather_scatter.kernels import _numba as _compiled
from gather_scatter.kernels import _reductions, elements
from gather_scatter.resources import threads as _parallel

LOOPS = _compiled.loops()
pytestmark = pytest.mark.skipif(LOOPS is None, reason="numba's loops are off here (GATHER_SCATTER_COMPILED=0)")

DTYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.int32, np.int64, np.uint16, np.bool_]
WIDTHS = [1, 7, 8, 9, 64, 1000]
DEPTHS = ["none", "few", "one_target"]
FLOATS = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]


def _values(rng, dtype, shape, reduction):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)  # near the ends too: adds and products wrap as NumPy's
        return rng.integers(max(info.min, -(2**40)), min(info.max, 2**40), shape, endpoint=True).astype(dtype)
    values = (1 + rng.standard_normal(shape) / 64) if reduction == "mul" else rng.standard_normal(shape) * 8
    values[rng.random(shape) < 0.03] = np.nan
    values[rng.random(shape) < 0.03] = -0.0
    values[rng.random(shape) < 0.03] = 0.0
    return values.astype(dtype)


def _case(rng, dtype, width, depth, reduction, n_rows=24, n_updates=60):
    if depth == "none":
        n_updates = min(n_updates, n_rows)
        rows = rng.permutation(n_rows)[:n_updates]
    elif depth == "few":
        rows = rng.integers(0, n_rows, n_updates)
    else:
        rows = np.full(n_updates, rng.integers(0, n_rows))
    rows = np.where(rng.random(n_updates) < 0.5, rows - n_rows, rows)  # negative indices too
    data = _values(rng, dtype, (n_rows, width), reduction)
    updates = _values(rng, dtype, (n_updates, width), reduction)
    return data, rows.reshape(-1, 1).astype(np.int64), updates


@pytest.fixture
def threads(request, monkeypatch):
    """Run with ``request.param`` threads, each taking a part of the targets (forced).

    No signature is accepted yet, and none is small: a first call runs the kernel with every
    check, a second the accepted path (``run_accepted``: on one thread, offsets computed in the
    compiled loop, ``reduce_nd``; split, the offsets then the parts).
    """
    n = request.param
    monkeypatch.setattr(_runners, "_ACCEPTED", {})
    monkeypatch.setattr(_runners, "_small", lambda nbytes, most=0: False)
    monkeypatch.setattr(_parallel, "MIN_CHUNK_BYTES", 1)
    monkeypatch.setattr(_reductions, "thread_parts", lambda n_updates, nbytes, n_rows: max(1, min(n, n_rows)))
    before = gs.get_num_threads()
    gs.set_num_threads(n)
    yield n
    gs.set_num_threads(before)


@pytest.mark.parametrize("threads", [1, 2, 3], indirect=True)
@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])  # none: narrow rows in reduce_nd too
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_kernel_is_the_spec_loop_bit_for_bit(dtype, reduction, width, depth, threads):
    rng = np.random.default_rng([WIDTHS.index(width), DEPTHS.index(depth), threads])
    data, indices, updates = _case(rng, dtype, width, depth, reduction)
    before = data.copy()
    with np.errstate(all="ignore"):
        expected = oracle.scatter_nd(data, indices, updates, reduction)
        first = gs.scatter_nd(data, indices, updates, reduction=reduction)
        again = gs.scatter_nd(data, indices, updates, reduction=reduction)  # the accepted path
    for actual in (first, again):
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        assert actual.tobytes() == expected.tobytes()
    assert data.tobytes() == before.tobytes()


# float16/bfloat16 bits of values one step can round badly: subnormals (and the smallest),
# values near the top that overflow, infinities, NaNs with payloads of both signs
_HALF_SPECIALS = {
    np.dtype(np.float16): [0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E01, 0xFE77],
    np.dtype(ml_dtypes.bfloat16): [0x0001, 0x8001, 0x007F, 0x0080, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC1, 0xFFE3],
}


@pytest.mark.parametrize("threads", [1, 2], indirect=True)
@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("width", [2, 3, 4, 5, 8, 16])
@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_narrow_half_rows_are_the_spec_loop(dtype, reduction, width, depth, threads):
    """float16/bfloat16 rows of 2, 4, 8 and 16 elements go through one vector each way
    (``_loops_reduce._narrow_row``; 3 and 5 one element at a time): bit for bit the spec's loop
    with subnormals, overflow, infinities, ties and NaNs with payloads among the values, on
    every path (the kernel and the accepted one; one thread and the targets split); a sum or
    product NaN for NaN, max/min the winner's bits."""
    rng = np.random.default_rng([width, DEPTHS.index(depth), threads, reduction == "mul"])
    data, indices, updates = _case(rng, dtype, width, depth, reduction, n_rows=24, n_updates=200)
    specials = np.array(_HALF_SPECIALS[np.dtype(dtype)], np.uint16)
    for values in (data, updates):
        bits = values.view(np.uint16)
        where = rng.random(bits.shape) < 0.15
        bits[where] = rng.choice(specials, int(where.sum()))
    with np.errstate(all="ignore"):
        expected = oracle.scatter_nd(data, indices, updates, reduction)
        first = gs.scatter_nd(data, indices, updates, reduction=reduction)
        again = gs.scatter_nd(data, indices, updates, reduction=reduction)  # the accepted path
    nan = np.isnan(expected.astype(np.float32))
    assert nan.any() and (~nan).any()
    for actual in (first, again):
        if reduction in ("max", "min"):  # the winner's own bits, NaN payloads included
            assert actual.tobytes() == expected.tobytes()
            continue
        # the bits, but which payload NaN + NaN keeps: the CPU's (NumPy's float16 loop keeps
        # the update's here; one NaN alone keeps its own payload either way)
        assert (np.isnan(actual.astype(np.float32)) == nan).all()
        assert actual[~nan].tobytes() == expected[~nan].tobytes()


@pytest.mark.parametrize("threads", [1, 2], indirect=True)
@pytest.mark.parametrize("depth", ["few", "one_target"])
@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_half_single_elements_into_few_targets_are_the_spec_loop(dtype, reduction, k, depth, threads):
    """float16/bfloat16 ScatterND of single elements (index tuples of 1 and 2 components)
    under many more updates than targets, 8 and more updates at a time to each target (the
    element walk, ``reduce_nd``): bit for bit the spec's loop with subnormals, overflow,
    infinities, signed zeros and NaNs with payloads among the values, and an untouched
    signalling NaN keeps its bits."""
    rng = np.random.default_rng([k, DEPTHS.index(depth), threads, ["add", "mul", "max", "min"].index(reduction)])
    shape, n = ((12,), (4, 3))[k - 1], 201
    data, updates = _values(rng, dtype, shape, reduction), _values(rng, dtype, (n,), reduction)
    specials = np.array(_HALF_SPECIALS[np.dtype(dtype)], np.uint16)
    for values in (data, updates):
        bits = values.reshape(-1).view(np.uint16)
        where = rng.random(bits.shape) < 0.1
        bits[where] = rng.choice(specials, int(where.sum()))
    positions = rng.integers(0, 12, n) if depth == "few" else np.full(n, rng.integers(1, 12))
    if np.dtype(dtype) == np.float16 and reduction in ("add", "mul") and depth == "one_target":
        data.reshape(-1).view(np.uint16)[0] = 0x7D23  # signalling, untouched (its bits compared below)
    indices = np.stack(np.unravel_index(positions, shape), axis=1)
    indices = np.where(rng.random(indices.shape) < 0.5, indices - np.array(shape), indices)  # negatives too
    with np.errstate(all="ignore"):
        expected = oracle.scatter_nd(data, indices, updates, reduction)
        results = [gs.scatter_nd(data, indices, updates, reduction=reduction) for _ in range(2)]  # then accepted
    nan = np.isnan(expected.astype(np.float32))
    for actual in results:
        if reduction in ("max", "min"):  # the winner's own bits
            assert actual.tobytes() == expected.tobytes()
            continue
        assert (np.isnan(actual.astype(np.float32)) == nan).all()  # which payload NaN + NaN keeps: the CPU's
        assert actual[~nan].tobytes() == expected[~nan].tobytes()
        if depth == "one_target":  # element 0 untouched: its bits, a signalling NaN's too
            assert actual.reshape(-1).view(np.uint16)[0] == expected.reshape(-1).view(np.uint16)[0]


@pytest.mark.parametrize("reduction", ["max", "min"])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_nan_signed_zeros_and_ties(dtype, reduction):
    nan, values = np.nan, [0.0, -0.0, 1.0, np.nan, 1.0, -0.0, 0.0]
    # one row, every pair in sequence: a NaN sticks, -0 and 0 tie (the update's bits win), 1 ties 1
    data = np.array([[0.0, -0.0, nan, 2.0]], dtype)
    updates = np.array([[v, v, v, v] for v in values], dtype)
    indices = np.zeros((len(values), 1), np.int64)
    expected = oracle.scatter_nd(data, indices, updates, reduction)
    with np.errstate(all="ignore"):
        actual = gs.scatter_nd(data, indices, updates, reduction=reduction)
    assert actual.tobytes() == expected.tobytes()
    assert np.isnan(actual[0, 2].astype(np.float32))  # data's NaN stays


@pytest.mark.parametrize("reduction", ["add", "max"])
def test_empty_updates_leave_data(reduction):
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = gs.scatter_nd(data, np.zeros((0, 1), np.int64), np.zeros((0, 3), np.float32), reduction=reduction)
    assert out.tobytes() == data.tobytes() and out is not data


@pytest.mark.parametrize("in_place", [False, True], ids=["copy", "out=data"])
@pytest.mark.parametrize("n_rows", [16, 5000])  # a small table, and one past the fused copy's 1 MiB
def test_first_bad_index_raised_before_anything_is_written(n_rows, in_place):
    rng = np.random.default_rng(3)
    data = rng.standard_normal((n_rows, 64)).astype(np.float32)
    indices = rng.integers(0, n_rows, (3000, 1))
    indices[1700, 0], indices[2500, 0] = n_rows, -n_rows - 1  # the first bad one is at 1700
    updates = rng.standard_normal((3000, 64)).astype(np.float32)
    before = data.copy()
    for _ in range(2):  # the first call's checks, then (a copy) the accepted path's
        with pytest.raises(gs.IndexOutOfBoundsError, match=rf"indices\[1700, 0\] = {n_rows} is out of bounds"):
            gs.scatter_nd(data, indices, updates, reduction="add", out=data if in_place else None)
    assert data.tobytes() == before.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64], ids=lambda d: np.dtype(d).name)
def test_out_data_in_place_equals_the_copy(dtype):
    rng = np.random.default_rng(4)
    data, indices, updates = _case(rng, dtype, 9, "few", "add", n_rows=3000, n_updates=20000)
    expected = gs.scatter_nd(data, indices, updates, reduction="add")
    result = gs.scatter_nd(data, indices, updates, reduction="add", out=data)
    assert result is data and data.tobytes() == expected.tobytes()


def test_large_work_loads_the_compiled_loops_on_the_first_call():
    # A fresh process: numba not imported. A call whose work on NumPy's path would cost more
    # than the compile loads it at once (no 100-call wait; PAYS_SECONDS lowered so that a test
    # sized call is one); a small one stays on NumPy's path, numba unloaded; both give the
    # compiled path's bits (checked here in this process, where it is loaded).
    script = textwrap.dedent(
        """
        import sys, numpy as np, gather_scatter as gs
        from gather_scatter.kernels import _numba
        _numba.PAYS_SECONDS = 0.01  # 1.25M elements of ScatterND rows
        rng = np.random.default_rng(9)
        small = (rng.standard_normal((64, 8)).astype(np.float16), rng.integers(-64, 64, (500, 1)),
                 rng.standard_normal((500, 8)).astype(np.float16))
        out = [gs.scatter_nd(*small, reduction="add")]
        loaded_after_small = "numba" in sys.modules
        big = (rng.standard_normal((64, 8)).astype(np.float32), rng.integers(0, 64, (200_000, 1)),
               rng.standard_normal((200_000, 8)).astype(np.float32))
        out.append(gs.scatter_nd(*big, reduction="max"))
        np.savez(sys.argv[1], *out, loaded=[loaded_after_small, "numba" in sys.modules])
        """
    )
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/out.npz"
        subprocess.run([sys.executable, "-c", script, path], check=True, timeout=300)
        saved = np.load(path)
        first_small, first_big, loaded = saved["arr_0"], saved["arr_1"], saved["loaded"].tolist()
    assert loaded == [False, True]
    rng = np.random.default_rng(9)
    small = (rng.standard_normal((64, 8)).astype(np.float16), rng.integers(-64, 64, (500, 1)),
             rng.standard_normal((500, 8)).astype(np.float16))
    big = (rng.standard_normal((64, 8)).astype(np.float32), rng.integers(0, 64, (200_000, 1)),
           rng.standard_normal((200_000, 8)).astype(np.float32))
    assert first_small.tobytes() == gs.scatter_nd(*small, reduction="add").tobytes()
    assert first_big.tobytes() == gs.scatter_nd(*big, reduction="max").tobytes()
    # and here, with the loops loaded, the small call took the compiled path: same bits as the spec
    assert first_small.tobytes() == oracle.scatter_nd(*small, "add").tobytes()


# ScatterElements: (data shape, indices shape, axis). Indices equal data off the axis collapse
# to (outer, axis, inner), scatter_axis' case; a smaller shape off the axis takes the general loop.
ELEMENT_LAYOUTS = {
    "axis0_inner1": ((24,), (60,), 0),
    # float16/bfloat16 rows of 2 or 4 into 128 rows or more: 8 updates of consecutive rows at a
    # time, a group one element at a time where two share a target (and a tail per outer)
    "axis0_inner2_many": ((200, 2), (301, 2), 0),
    "axis1_outer3_inner4_many": ((3, 200, 4), (3, 301, 4), 1),
    # float16/bfloat16 reductions into few rows under many updates: the held values in float32
    # (_loops_axis._held_walk), a tail of fewer than 8 per outer
    "axis0_inner1_few_rows": ((8,), (101,), 0),
    "axis0_inner2_few_rows": ((8, 2), (101, 2), 0),
    "axis1_outer3_inner4_few_rows": ((3, 8, 4), (3, 101, 4), 1),
    "axis0_inner7": ((24, 7), (60, 7), 0),
    "axis0_inner64": ((24, 64), (60, 64), 0),
    "axis1_outer3_inner9": ((3, 24, 9), (3, 60, 9), 1),
    "axis_last_outer5": ((5, 24), (5, 60), -1),
    "smaller_off_axis": ((24, 9, 4), (60, 7, 4), 0),
}


def _elements_case(rng, dtype, layout, depth, reduction):
    data_shape, indices_shape, axis = ELEMENT_LAYOUTS[layout]
    size = data_shape[axis]
    if depth == "none":  # distinct targets along the axis: as many updates as rows
        indices_shape = tuple(size if d == axis % len(data_shape) else n for d, n in enumerate(indices_shape))
        indices = np.argsort(rng.random(indices_shape), axis=axis)
    elif depth == "few":
        indices = rng.integers(0, size, indices_shape)
    else:
        indices = np.full(indices_shape, rng.integers(0, size))
    indices = np.where(rng.random(indices_shape) < 0.5, indices - size, indices)  # negative indices too
    data = _values(rng, dtype, data_shape, reduction)
    updates = _values(rng, dtype, indices_shape, reduction)
    return data, indices.astype(np.int64), updates, axis


@pytest.fixture
def element_threads(request, monkeypatch):
    """Run with ``request.param`` threads, every split ScatterElements allows taken (forced).

    No signature is accepted yet, and none is small: a first call runs the kernel with every
    check, a second the accepted path (``run_scatter_accepted``), both on the compiled loops.
    """
    n = request.param
    monkeypatch.setattr(_runners, "_ACCEPTED", {})
    monkeypatch.setattr(_runners, "_small", lambda nbytes, most=0: False)
    monkeypatch.setattr(_parallel, "MIN_CHUNK_BYTES", 1)
    monkeypatch.setattr(elements, "_SPLIT_ROW_BYTES", 1)
    elements._axis_layout.cache_clear()
    elements._scatter_layout.cache_clear()
    before = gs.get_num_threads()
    gs.set_num_threads(n)
    yield n
    gs.set_num_threads(before)
    elements._axis_layout.cache_clear()
    elements._scatter_layout.cache_clear()


@pytest.mark.parametrize("element_threads", [1, 2, 3], indirect=True)
@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("layout", list(ELEMENT_LAYOUTS))
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_scatter_elements_kernel_is_the_spec_loop_bit_for_bit(dtype, reduction, layout, depth, element_threads):
    rng = np.random.default_rng([list(ELEMENT_LAYOUTS).index(layout), DEPTHS.index(depth), element_threads])
    data, indices, updates, axis = _elements_case(rng, dtype, layout, depth, reduction)
    before = data.copy()
    expected = oracle.scatter_elements(data, indices, updates, axis, reduction)
    with np.errstate(all="ignore"):
        first = gs.scatter_elements(data, indices, updates, axis=axis, reduction=reduction)
        again = gs.scatter_elements(data, indices, updates, axis=axis, reduction=reduction)  # the accepted path
    for actual in (first, again):
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        assert actual.tobytes() == expected.tobytes()
    assert data.tobytes() == before.tobytes()


@pytest.mark.parametrize("reduction", ["max", "min"])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_scatter_elements_nan_signed_zeros_and_ties(dtype, reduction):
    values = [0.0, -0.0, 1.0, np.nan, 1.0, -0.0, 0.0]
    data = np.array([[0.0, -0.0, np.nan, 2.0]], dtype)
    updates = np.array([[v, v, v, v] for v in values], dtype)
    indices = np.zeros(updates.shape, np.int64)
    expected = oracle.scatter_elements(data, indices, updates, 0, reduction)
    with np.errstate(all="ignore"):
        actual = gs.scatter_elements(data, indices, updates, axis=0, reduction=reduction)
    assert actual.tobytes() == expected.tobytes()
    assert np.isnan(actual[0, 2].astype(np.float32))


@pytest.mark.parametrize("in_place", [False, True], ids=["copy", "out=data"])
@pytest.mark.parametrize("reduction", ["add", "max"])
@pytest.mark.parametrize("width", [1, 4, 8], ids=lambda w: f"w{w}")
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=lambda d: np.dtype(d).name)
def test_scatter_elements_first_bad_index_raised_before_anything_is_written(dtype, width, reduction, in_place):
    # float16 takes several updates at a time: the bad one sits inside a group, after good ones
    rng = np.random.default_rng(5)
    data = rng.standard_normal((1000, width)).astype(dtype)
    indices = rng.integers(0, 1000, (300_000, width))
    column = width // 2
    indices[170_000, column], indices[250_000, 0] = 1000, -1001  # the first bad one is at (170000, column)
    updates = rng.standard_normal((300_000, width)).astype(dtype)
    before = data.copy()
    said = rf"indices\[170000, {column}\] = 1000 is out of bounds"
    for _ in range(2):  # the first call's checks, then the accepted path's
        with pytest.raises(gs.IndexOutOfBoundsError, match=said):
            gs.scatter_elements(data, indices, updates, axis=0, reduction=reduction, out=data if in_place else None)
    assert data.tobytes() == before.tobytes()


@pytest.mark.parametrize("element_threads", [1], indirect=True)
@pytest.mark.parametrize("reduction", ["add", "mul"])
@pytest.mark.parametrize("width", [1, 2, 4])
def test_half_sums_into_few_rows_keep_an_untouched_signalling_nan(width, reduction, element_threads):
    """float16 sums and products into few rows hold the rows' values in float32, where a
    signalling NaN would turn quiet: a table holding one takes the one-element walk, and an
    untouched signalling NaN keeps its bits (a touched one turns quiet, as NumPy's own sum)."""
    rng = np.random.default_rng(width)
    data = rng.standard_normal((8, width)).astype(np.float16)
    data.view(np.uint16)[3, 0] = 0x7D23  # signalling, payload 0x123
    data.view(np.uint16)[5, -1] = 0xFC01
    indices = rng.integers(0, 8, (500, width))
    indices[indices == 3] = 2  # row 3 untouched; row 5 touched
    updates = rng.standard_normal((500, width)).astype(np.float16)
    expected = oracle.scatter_elements(data, indices, updates, 0, reduction)
    with np.errstate(all="ignore"):
        actual = gs.scatter_elements(data, indices, updates, axis=0, reduction=reduction)
    assert actual.view(np.uint16)[3, 0] == 0x7D23
    assert actual.tobytes() == expected.tobytes()


# float16 <-> float32 in the compiled loops: the CPU's conversions (F16C) in vector loops, bit
# arithmetic elsewhere. Each against NumPy's own conversions: every float16, and float32 values
# covering every sign/exponent/top-mantissa pattern with the low bits that decide the rounding
# (the whole 2**32 range was checked once by hand; it takes minutes).
def _rounding_inputs() -> np.ndarray:
    top = np.arange(1 << 19, dtype=np.uint32) << np.uint32(13)
    low = np.array([0, 1, 0xFFF, 0x1000, 0x1001, 0x1FFF, 0x0800, 0x17FF], np.uint32)
    rng = np.random.default_rng(7)
    picked = (top[:, None] | low[None, :]).reshape(-1)
    return np.concatenate([picked, rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32)])


def test_half_conversions_are_numpys():
    import numba

    from gather_scatter.kernels import _loops_half as lh
    from gather_scatter.kernels import _loops_reduce as lr

    def converter(convert):
        @numba.njit
        def run(x, out):
            for i in range(x.size):
                out[i] = convert(x[i])

        return run

    halves = np.arange(1 << 16, dtype=np.uint16)
    out = np.empty(halves.size, np.float32)
    converter(lr._half_to_float)(halves, out)
    assert (out.view(np.uint32) == halves.view(np.float16).astype(np.float32).view(np.uint32)).all()
    floats = _rounding_inputs().view(np.float32)
    with np.errstate(all="ignore"):
        expected = floats.astype(np.float16).view(np.uint16)
    bits = np.empty(floats.size, np.uint16)
    converter(lr._float16_bits)(floats, bits)
    assert (bits == expected).all()
    if lr.F16C:
        # the CPU's: quiets a signalling NaN (no sum or product is one; max/min store operands)
        converter(lr._f16c_to_float)(halves, out)
        exact = ~np.isnan(halves.view(np.float16))
        assert (out.view(np.uint32) == halves.view(np.float16).astype(np.float32).view(np.uint32))[exact].all()
        alone = np.empty(halves.size, np.float32)  # one element at a time: the same bits, NaNs too
        converter(lr._f16c_to_float_alone)(halves, alone)
        assert (alone.view(np.uint32) == out.view(np.uint32)).all()
        converter(lr._f16c_bits)(floats, bits)
        raw = floats.view(np.uint32)
        signalling = ((raw & 0x7FC00000) == 0x7F800000) & ((raw & 0x3FFFFF) != 0)
        assert (bits == expected)[~signalling].all()
    with np.errstate(all="ignore"):
        expected = floats.astype(ml_dtypes.bfloat16).view(np.uint16)
    # the rounding of a sum or product: ml_dtypes' for every number; a NaN (such a result is
    # quiet, its low 16 bits zero) keeps its sign and payload
    converter(lh._bfloat16_result_bits)(floats, bits)
    assert (bits == expected)[~np.isnan(floats)].all()
    raw = floats.view(np.uint32)
    results = np.isnan(floats) & ((raw & 0xFFFF) == 0) & ((raw & 0x400000) != 0)
    assert results.sum() >= 128 and (bits[results] == raw[results] >> 16).all()  # every such NaN, both signs


def test_one_element_float16_sums_load_without_waiting_on_the_last_update():
    """float16 add/mul of one element at a time (ScatterND's element walk and narrow rows,
    ScatterElements' axis walk: ``_value(..., alone=True)``) convert each loaded float16 in a
    register written whole (movzx, vmovd, vcvtph2ps), never by ``vpinsrw`` into a register's
    low lane, which keeps the register's other lanes and so waits on whatever wrote it last
    (the last update's result): that chain made these loops run at its latency, 2-3x slower.
    Checked on the machine code of such a loop compiled here (the kernels' own come from
    numba's cache, which keeps none); the plain conversion in the same loop shows the chain."""
    import numba

    from gather_scatter.kernels import _loops_reduce as lr

    if not (lr.F16C and lr._X86):
        pytest.skip("the CPU's float16 conversions (F16C on x86) are not in use here")

    def loop_of(alone):
        @numba.njit(nogil=True)
        def add(dst, offsets, src):
            for e in range(offsets.size):
                t = offsets[e]
                value = lr._value(dst[t], 1, alone) + lr._value(src[e], 1, alone)
                dst[t] = lr._rounded(value, 1, lr._SCALAR)

        return add

    rng = np.random.default_rng(3)
    dst = rng.standard_normal(16).astype(np.float16)
    src = rng.standard_normal(64).astype(np.float16)
    offsets = rng.integers(0, 16, 64)
    expected = dst.copy()
    np.add.at(expected, offsets, src)
    for alone in (True, False):
        loop, out = loop_of(alone), dst.copy()
        loop(out.view(np.uint16), offsets, src.view(np.uint16))
        assert out.tobytes() == expected.tobytes()
        (asm,) = loop.inspect_asm().values()
        if "vaddsh" in asm:  # AVX512-FP16 (Sapphire Rapids on): LLVM adds in float16 itself, nothing to convert
            continue
        assert "vcvtph2ps" in asm
        assert ("vpinsrw" in asm) is not alone


def test_cmov_conversion_is_off_only_while_a_half_max_min_loop_compiles(monkeypatch):
    """LLVM's x86 cmov conversion (a process-wide option) is turned off for the compile of a
    float16/bfloat16 max/min loop and on again after, once for nested compiles; any other
    compile, the user's own functions included, never touches it."""
    import numba

    from gather_scatter.kernels import _loops_axis
    from gather_scatter.kernels import _loops_reduce as lr
    from gather_scatter.kernels._codes import ADD, MAX, MIN

    if not lr._X86:
        pytest.skip("the cmov conversion is an x86 pass: not compiled for x86 here")
    axis = _loops_axis._AXIS
    assert all(axis[code][half] in lr._SELECTING for code in (MAX, MIN) for half in (1, 2))
    assert axis[MAX][0] not in lr._SELECTING and axis[ADD][2] not in lr._SELECTING
    calls = []
    monkeypatch.setattr(lr.llvm, "set_option", lambda name, option: calls.append(option))

    def pick(keep, a, b):
        return a if keep else b

    inner = numba.njit(pick)  # no cache: each of these compiles here

    @numba.njit
    def outer(keep, a, b):
        return inner(keep, a, b) + np.uint16(1)

    users = numba.njit(pick)
    monkeypatch.setattr(lr, "_SELECTING", {outer, inner})
    assert outer(True, np.uint16(3), np.uint16(4)) == 4  # compiles inner within outer's compile
    assert calls == ["--x86-cmov-converter=false", "--x86-cmov-converter=true"]
    assert users(False, np.uint16(3), np.uint16(4)) == 4
    assert inner(False, np.float32(3), np.float32(5)) == 5  # a new signature of a marked loop
    assert calls == ["--x86-cmov-converter=false", "--x86-cmov-converter=true"] * 2


_SPECIAL_BITS = {  # NaNs quiet and signalling with payloads, infinities, zeros, subnormals, ties
    "float16": [0x7C01, 0xFE01, 0x7E00, 0x7E55, 0xFC00, 0x7C00, 0x0001, 0x8001, 0x8000, 0x0000, 0x3C00, 0xBC00,
                0x3C00, 0x7BFF, 0xFBFF, 0x7D23],
    "bfloat16": [0x7F81, 0xFFC1, 0x7FC0, 0x7FD5, 0xFF80, 0x7F80, 0x0001, 0x8001, 0x8000, 0x0000, 0x3F80, 0xBF80,
                 0x3F80, 0x7F7F, 0xFF7F, 0x7FA3],
}


@pytest.mark.parametrize("element_threads", [1, 2], indirect=True)
@pytest.mark.parametrize("width", [1, 2, 4, 7, 8, 16, 64], ids=lambda w: f"w{w}")
@pytest.mark.parametrize("reduction", ["max", "min"])
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_half_max_min_store_the_winners_own_bits(dtype, reduction, width, element_threads):
    """max/min of float16/bfloat16 keep the winning operand's bits exactly, a signalling NaN's
    too (the narrow loops choose between float32 values and convert back: a NaN must not come
    back quieted), every pair of special values in sequence into every target, in ScatterND's
    row loops (scalar below 8 wide, vector from 8) and ScatterElements' element loop. The
    expected bits follow the spec's loop by definition: x's bits where x is NaN or wins
    (float16 also on a tie, as NumPy's half loop), else the update's."""
    special = np.array(_SPECIAL_BITS[np.dtype(dtype).name], np.uint16)
    n = special.size
    pairs = np.array(np.meshgrid(np.arange(n), np.arange(n), indexing="ij")).reshape(2, -1)  # (x, update)
    cells = pairs.shape[1]
    data = np.tile(special[pairs[0]][:, None], (1, width)).view(dtype)
    updates = np.tile(special[pairs[1]][:, None], (1, width)).view(dtype)
    with np.errstate(invalid="ignore"):
        p, q = data.astype(np.float64), updates.astype(np.float64)
    wins = (p > q) if reduction == "max" else (p < q)
    keep = wins | np.isnan(p) | ((p == q) if np.dtype(dtype) == np.float16 else False)
    expected = np.where(keep, data.view(np.uint16), updates.view(np.uint16))
    rows = np.arange(cells, dtype=np.int64)
    calls = {  # each twice: the first call (every check), then the accepted path
        "ScatterND": lambda: gs.scatter_nd(data, rows[:, None], updates, reduction=reduction),
        "ScatterElements": lambda: gs.scatter_elements(data, np.tile(rows[:, None], (1, width)), updates, axis=0,
                                                       reduction=reduction),
    }
    with np.errstate(all="ignore"):
        results = [(name, call()) for name, call in calls.items() for _ in range(2)]
    for name, actual in results:
        bad = np.flatnonzero((actual.view(np.uint16) != expected).any(axis=1))
        assert bad.size == 0, [
            (name, hex(special[pairs[0, i]]), hex(special[pairs[1, i]]), hex(actual.view(np.uint16)[i, 0]),
             hex(expected[i, 0]))
            for i in bad[:5]
        ]


@pytest.mark.parametrize("element_threads", [1, 2], indirect=True)
@pytest.mark.parametrize("width", [1, 2, 4], ids=lambda w: f"w{w}")
@pytest.mark.parametrize("reduction", ["max", "min"])
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
def test_half_max_min_into_few_rows_store_the_winners_own_bits(dtype, reduction, width, element_threads):
    """max/min of float16/bfloat16 into few rows under many updates hold the rows' values in
    float32 (``_loops_axis._held_walk``; ScatterND's single elements the same way): each
    target still ends with the bits of the spec loop's winner, in sequence, with signalling
    and quiet NaNs (payloads, both signs), infinities, signed zeros, subnormals and ties among
    the table's values and the updates, and a signalling NaN in an untouched row keeps its bits."""
    special = np.array(_SPECIAL_BITS[np.dtype(dtype).name], np.uint16)
    sign = 0x8000 if reduction == "max" else 0  # values at or below zero for max: ties of +0 and -0
    top = 0x7C00 if np.dtype(dtype) == np.float16 else 0x7F80
    # signed zeros (the winner's sign is the rule's), infinity, subnormals, repeated values; NaNs rare
    pool = np.array([0, 0x8000, 0, 0x8000, sign | 0x0001, sign | 0x3C00, sign | 0x3C00, sign | top], np.uint16)
    rng = np.random.default_rng([width, reduction == "max"])
    data_bits = rng.choice(pool, (8, width)).astype(np.uint16)
    data_bits[6, 0] = special[0]  # a signalling NaN in a row no update reaches
    update_bits = rng.choice(pool, (600, width)).astype(np.uint16)
    nans = rng.random(update_bits.shape) < 0.001
    update_bits[nans] = rng.choice(special[:4], int(nans.sum()))
    indices = rng.integers(0, 8, (600, width))
    indices[indices == 6] = 7
    expected = data_bits.copy()
    with np.errstate(invalid="ignore"):
        p_all, q_all = data_bits.view(dtype).astype(np.float64), update_bits.view(dtype).astype(np.float64)
    held = p_all.copy()
    for k in range(600):  # the spec's loop, one index row at a time
        for c in range(width):
            t, x, u = indices[k, c], held[indices[k, c], c], q_all[k, c]
            wins = x > u if reduction == "max" else x < u
            if not (np.isnan(x) or wins or (x == u and np.dtype(dtype) == np.float16)):
                held[t, c], expected[t, c] = u, update_bits[k, c]
    assert np.isin(expected, [0x0000, 0x8000]).sum() >= expected.size // 2  # the ties decide
    data, updates = data_bits.view(dtype), update_bits.view(dtype)
    # the same updates in the same order as ScatterND's single elements: (row, column) tuples
    elements = np.stack([indices.reshape(-1), np.tile(np.arange(width), 600)], axis=1)
    with np.errstate(all="ignore"):  # each twice: the first call (every check), then the accepted path
        results = [
            (name, call())
            for name, call in {
                "ScatterElements": lambda: gs.scatter_elements(data, indices, updates, axis=0, reduction=reduction),
                "ScatterND": lambda: gs.scatter_nd(data, elements, updates.reshape(-1), reduction=reduction),
            }.items()
            for _ in range(2)
        ]
    wrong = []
    for name, actual in results:
        bits = actual.view(np.uint16)
        assert bits[6, 0] == special[0], name
        bad = np.argwhere(bits != expected)[:5]
        wrong += [(name, tuple(b), hex(bits[tuple(b)]), hex(expected[tuple(b)])) for b in bad]
    assert not wrong, wrong


def test_half_reductions_without_f16c_are_the_spec_loop(tmp_path):
    """The software conversions, as a CPU without F16C runs them (ARM, older x86; numba told
    to compile for a generic x86-64): float16 and bfloat16 add/mul/max/min in every loop kind
    (ScatterND's element walk, narrow and vector rows; ScatterElements' axis walk) on the
    compiled path, bit for bit the spec's loop (``oracle``), NaNs, signed zeros and ties included."""
    script = textwrap.dedent(
        """
        import sys, ml_dtypes, numpy as np, gather_scatter as gs
        from gather_scatter import _calls as _runners
        from gather_scatter.kernels import _loops_reduce
        from gather_scatter.kernels import _numba as _compiled
        assert _compiled.loops() is not None and not _loops_reduce.F16C
        _runners._small = lambda nbytes, most=0: False  # the compiled loops, not NumPy's path
        rng = np.random.default_rng(4)
        out = {}
        for dtype in (np.float16, ml_dtypes.bfloat16):
            for reduction in ("add", "mul", "max", "min"):
                for width in (1, 2, 3, 4, 8, 64):
                    values = rng.standard_normal((3, 40, width)) * 8
                    values[rng.random(values.shape) < 0.05] = np.nan
                    values[rng.random(values.shape) < 0.05] = -0.0
                    if reduction == "mul":
                        values = 1 + values / 512
                    data, updates, other = values.astype(dtype)
                    rows = rng.integers(-40, 40, (40, 1))
                    key = f"{np.dtype(dtype).name}-{reduction}-{width}"
                    with np.errstate(all="ignore"):
                        out[key + "-nd"] = gs.scatter_nd(data, rows, updates, reduction=reduction)
                        axis = rng.integers(-40, 40, (40, width))
                        out[key + "-el"] = gs.scatter_elements(data, axis, other, axis=0, reduction=reduction)
                    out[key + "-in"] = np.stack([data, updates, other])
                    out[key + "-rows"], out[key + "-axis"] = rows, axis
        np.savez(sys.argv[1], **{k: v.view(np.uint16) if v.dtype.itemsize == 2 and v.dtype.kind != "i" else v
                                 for k, v in out.items()})
        """
    )
    env = {**__import__("os").environ, "NUMBA_CPU_NAME": "generic", "NUMBA_CPU_FEATURES": "",
           "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    path = tmp_path / "out.npz"
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, timeout=600, env=env)
    saved = np.load(path)
    checked = 0
    for dtype in (np.float16, ml_dtypes.bfloat16):
        for reduction in ("add", "mul", "max", "min"):
            for width in (1, 2, 3, 4, 8, 64):
                key = f"{np.dtype(dtype).name}-{reduction}-{width}"
                data, updates, other = saved[key + "-in"].view(dtype)
                with np.errstate(all="ignore"):
                    nd = oracle.scatter_nd(data, saved[key + "-rows"], updates, reduction)
                    el = oracle.scatter_elements(data, saved[key + "-axis"], other, 0, reduction)
                assert saved[key + "-nd"].tobytes() == nd.tobytes(), key + " ScatterND"
                assert saved[key + "-el"].tobytes() == el.tobytes(), key + " ScatterElements"
                checked += 1
    assert checked == 48
