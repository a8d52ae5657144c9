"""When a call takes the compiled loops (kernels/_numba.loops_for with a key): a kernel's small
calls take NumPy's path until its work in the process pays for the compile, then every call
is compiled; large work is compiled at once; each reduction compiles only its own loop.

The suite's process runs with ``_numba.EAGER`` (conftest.py); these tests set the default back.
"""

from __future__ import annotations

import numpy as np
import oracle
import pytest

import gather_scatter as gs
from gather_scatter.kernels import _loops_axis, _loops_reduce, _numba
from gather_scatter.rules.versions import Reduction

pytestmark = pytest.mark.skipif(_numba.loops() is None, reason="numba's loops are off here (GATHER_SCATTER_COMPILED=0)")


@pytest.fixture
def default_rule(monkeypatch):
    """The users' default: no EAGER, and no key seen yet in this process."""
    monkeypatch.setattr(_numba, "EAGER", False)
    monkeypatch.setattr(_numba, "_ready", set())
    monkeypatch.setattr(_numba, "_seen", {})


def _keys(kernel):
    return {key for key in _numba._ready if key[0] == kernel}


CALLS = [
    # (kernel key, call, spec), small enough to stay under pays_elements per call
    (
        "rows",
        lambda d, i, u, r: gs.scatter_nd(d, i[:, :1], u, reduction=r),
        lambda d, i, u, r: oracle.scatter_nd(d, i[:, :1], u, r),
    ),
    (
        "scatter_elements",
        lambda d, i, u, r: gs.scatter_elements(d, i, u, axis=0, reduction=r),
        lambda d, i, u, r: oracle.scatter_elements(d, i, u, 0, r),
    ),
]


@pytest.mark.parametrize("reduction", ["add", "max"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
@pytest.mark.parametrize("kernel, call, spec", CALLS, ids=[c[0] for c in CALLS])
def test_small_calls_compile_once_they_pay_and_give_the_same_bits(default_rule, kernel, call, spec, dtype, reduction):
    rng = np.random.default_rng(3)
    data = (rng.standard_normal((16, 8)) * 4).astype(dtype)
    indices = rng.integers(-16, 16, (40, 8))
    updates = (rng.standard_normal((40, 8)) * 4).astype(dtype)
    expected = spec(data, indices, updates, reduction).tobytes()
    ready_at = None
    for i in range(_numba.WARM_CALLS + 2):
        assert call(data, indices, updates, reduction).tobytes() == expected, f"call {i + 1}"
        if ready_at is None and _keys(kernel):
            ready_at = i + 1
    # NumPy's path first, the compiled loop once the calls add up (a ScatterND call may ask for
    # two of its row loops, each counted), the same bits throughout
    assert ready_at is not None and _numba.WARM_CALLS // 2 <= ready_at <= _numba.WARM_CALLS
    (key,) = _keys(kernel)
    assert key[1:] == (np.dtype(dtype).str, Reduction(reduction))


def test_large_work_compiles_at_once_and_small_work_adds_up(default_rule):
    key = ("rows", "test")
    assert _numba.loops_for(_numba.pays_elements("rows"), key) is not None  # one call that pays
    assert _numba.pays_elements("scatter_elements") < _numba.pays_elements("rows")  # NumPy's slower path pays sooner
    small = ("scatter_elements", "small")
    half = _numba.pays_elements("scatter_elements") // 2
    assert _numba.loops_for(half, small) is None
    assert _numba.loops_for(half - 1, small) is None
    rest = _numba.pays_elements("scatter_elements") - half - (half - 1)
    assert _numba.loops_for(rest, small) is not None  # the elements add up to the rule's count
    assert _numba.loops_for(0, small) is not None  # and it stays compiled
    assert _numba.loops_for(0, ("scatter_elements", "other")) is None  # per key


def test_eager_compiles_every_keyed_call(monkeypatch, default_rule):
    monkeypatch.setattr(_numba, "EAGER", True)
    assert _numba.loops_for(1, ("test", "eager")) is not None


def test_each_reduction_has_its_own_compiled_function():
    # A first call compiles only its reduction's loop (by_reduction): one function per code and
    # element kind (the type's own, float16 bits, bfloat16 bits), each compiled on its own.
    tables = [_loops_reduce._ROWS_AT, _loops_reduce._COLUMNS, _loops_axis._AXIS, _loops_reduce._ND]
    for table in tables:
        functions = [f for kinds in table if kinds is not None for f in kinds]
        assert len({id(f) for f in functions}) == len(functions) >= 12
    data = np.zeros(8, np.float32)
    offsets = np.array([1, 1, 3], np.int64)
    values = np.array([2.0, -1.0, 5.0], np.float32)
    for code, expected in [(1, [0, 1, 0, 5]), (2, [0, -0.0, 0, 0]), (3, [0, 2, 0, 5]), (4, [0, -1, 0, 0])]:
        dst = data.copy()
        _loops_reduce.reduce_rows_at(dst, offsets, values, 1, code, offsets[:0], 0, 3, None)
        assert dst[:4].tolist() == expected


def test_numpy_paths_compiles_nothing_new_and_counts_nothing(default_rule, monkeypatch):
    # The checker's oracle runs thousands of small random cases under numpy_paths(): a key not
    # compiled yet takes NumPy's path (EAGER or not, however many calls), and counts nothing.
    from gather_scatter.kernels import numpy_paths

    monkeypatch.setattr(_numba, "EAGER", True)
    data, indices = np.zeros((6, 3), np.float32), np.array([[1], [1], [4]])
    updates = np.arange(9, dtype=np.float32).reshape(3, 3)
    with numpy_paths():
        for _ in range(_numba.WARM_CALLS + 5):
            got = gs.scatter_nd(data, indices, updates, reduction="max")
        assert _numba.loops_for(10**9, ("rows", "<f4", Reduction.MAX)) is None  # even huge work
    np.testing.assert_array_equal(got, oracle.scatter_nd(data, indices, updates, "max"))
    assert not _keys("rows") and not _numba._seen
    gs.scatter_nd(data, indices, updates, reduction="max")  # outside: EAGER compiles it
    assert _keys("rows")
    with numpy_paths():  # compiled already: taken, free
        assert _numba.loops_for(1, next(iter(_keys("rows")))) is not None


def test_the_checkers_oracle_compiles_nothing(default_rule, monkeypatch):
    from gather_scatter.check import case_values, runner
    from gather_scatter.rules.versions import REGISTRY

    monkeypatch.setattr(_numba, "EAGER", True)
    case = case_values.Case("ScatterElements", [np.zeros((4, 3), np.float32), np.array([[1, 1, 0]]),
                                                np.ones((1, 3), np.float32)], {"reduction": "add", "axis": 0})
    check = runner.CheckCase(REGISTRY[("", "ScatterElements", 18)], 18, case, "valid")
    for _ in range(_numba.WARM_CALLS + 5):
        out = runner.expected(check)
    np.testing.assert_array_equal(out, [[0, 0, 1], [1, 1, 0], [0, 0, 0], [0, 0, 0]])
    assert not _keys("scatter_elements") and not _numba._seen


def _compiled_signatures() -> int:
    """How many signatures every compiled loop holds in this process."""
    import numba

    from gather_scatter.kernels import _loops, _loops_quantized

    functions = [f for module in (_loops, _loops_reduce, _loops_axis, _loops_quantized) for f in vars(module).values()]
    for table in (_loops_reduce._ROWS_AT, _loops_reduce._COLUMNS, _loops_axis._AXIS, _loops_reduce._ND,
                  _loops._SCATTER_ROWS):
        functions += [f for kinds in table if kinds is not None for f in kinds]
    return sum(len(f.signatures) for f in {id(f): f for f in functions}.values()
               if isinstance(f, numba.core.registry.CPUDispatcher))


def _frozen(*arrays):
    copies = [np.array(a) for a in arrays]
    for copy in copies:
        copy.setflags(write=False)
    return copies


READ_ONLY_CALLS = {  # each kernel family with a compiled loop: (call, inputs)
    "gather_elements": (lambda d, i: gs.gather_elements(d, i, axis=1), 2),
    "gather_elements_rows": (lambda d, i: gs.gather_elements(d, i, axis=0), 2),
    "gather_nd": (lambda d, i: gs.gather_nd(d, i[:, :1, None], batch_dims=1), 2),
    "scatter_elements": (lambda d, i, u: gs.scatter_elements(d, i, u, axis=0), 3),
    "scatter_elements_add": (lambda d, i, u: gs.scatter_elements(d, i, u, axis=1, reduction="add"), 3),
    "scatter_elements_max_f16": (lambda d, i, u: gs.scatter_elements(d.astype(np.float16), i, u.astype(np.float16),
                                                                      axis=0, reduction="max"), 3),
    "scatter_nd": (lambda d, i, u: gs.scatter_nd(d, i[:, :1], u), 3),
    "scatter_nd_mul": (lambda d, i, u: gs.scatter_nd(d, i[:, :1], u, reduction="mul"), 3),
    "scatter_nd_elements_min": (lambda d, i, u: gs.scatter_nd(d, i[:, :2], u[:, 0], reduction="min"), 3),
    "tensor_scatter": (lambda d, i, u: gs.tensor_scatter(d.reshape(1, 6, 8), u[:2].reshape(1, 2, 8), np.array([1])), 3),
}


@pytest.mark.parametrize("planned", [False, True], ids=["kernel", "planned"])
@pytest.mark.parametrize("name", list(READ_ONLY_CALLS))
def test_read_only_inputs_take_the_writable_inputs_compiled_loops(name, planned, monkeypatch):
    # numba types whether an array is writable: a read-only input (an initializer,
    # np.broadcast_to, np.frombuffer) compiled every loop a second time (96 of 378 signatures of
    # one test run), unless the kernels hand every loop its inputs read-only (_numba.read_only).
    from gather_scatter import _calls

    if not planned:  # the kernels' paths, not the small accepted calls' (NumPy's indexing, or a plan)
        monkeypatch.setattr(_calls, "_small", lambda nbytes, most=0: False)
    call, arity = READ_ONLY_CALLS[name]
    rng = np.random.default_rng(5)
    data = rng.standard_normal((6, 8)).astype(np.float32)
    indices = rng.integers(-6, 6, (6, 8))
    updates = rng.standard_normal((6, 8)).astype(np.float32)
    inputs = (data, indices, updates)[:arity]
    expected = call(*inputs)  # EAGER (conftest): compiled here, the first call's checks
    for _ in range(2):  # then the accepted signature's path (and a small one's plan, made then used)
        assert call(*inputs).tobytes() == expected.tobytes()
    before = _compiled_signatures()
    frozen = _frozen(*inputs)
    for _ in range(3):
        assert call(*frozen).tobytes() == expected.tobytes()
    assert _compiled_signatures() == before, "a read-only input compiled a loop of its own"
    assert all(not f.flags.writeable for f in frozen)  # untouched
