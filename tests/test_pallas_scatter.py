"""The JAX backend's GPU scatter reductions (``backends/_pallas_scatter.py``): one stable sort and
one Pallas kernel, bit for bit against the NumPy kernels (``scatter_nd``/``scatter_elements`` on
NumPy arrays, the spec's loop).

Every test that runs the kernel runs twice: ``interpret`` (Pallas' interpreter on the CPU: CI)
and ``gpu`` (compiled through Triton on a JAX GPU device; skipped with a reason without one).
Each runs eagerly and under ``jax.jit``, with JAX's default ``jax_enable_x64`` off and, for the
64-bit types, on. Shapes are small: the interpreter is slow. ``test_lowers_for_cuda`` lowers the
kernel for CUDA from any machine (no GPU needed), which catches what Triton's lowering refuses.
"""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import pytest
from backends import same_bits, spy_pallas

jax = pytest.importorskip("jax", reason="jax not installed")
pytest.importorskip("jax.experimental.pallas", reason="this JAX has no Pallas")
import jax.numpy as jnp  # noqa: E402

from gather_scatter import scatter_elements, scatter_nd  # noqa: E402
from gather_scatter.backends import _jax_scatter, _pallas_scatter  # noqa: E402
from gather_scatter.rules.versions import Reduction  # noqa: E402

REDUCTIONS = ("add", "mul", "max", "min")
WIDTHS = (1, 5, 64, 300)  # one column, a part block, a whole block (64), three blocks of 128
X64_OFF = ("float32", "float16", "bfloat16", "int32", "int16", "int8", "uint8", "uint32", "bool")
X64_ON = ("float64", "int64", "uint64")
ROWS = 8
DEEP = 200  # target 0's updates; targets 1 and 2 take 3 each, the others 1


def _gpu():
    try:
        return jax.devices("gpu")[0]
    except RuntimeError:
        return None


@pytest.fixture(params=["interpret", "gpu"])
def where(request):
    """(device, interpret): Pallas' interpreter on the CPU, or compiled on a JAX GPU."""
    if request.param == "interpret":
        return jax.devices("cpu")[0], True
    gpu = _gpu()
    if gpu is None:
        pytest.skip("no JAX GPU device (jax.devices('gpu') has none): the kernel ran in interpret mode only")
    return gpu, False


def _dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _case(name: str, reduction: str, width: int, seed: int):
    """(data (ROWS, width), targets (N,), updates (N, width)) with duplicate depths 1, 3 and DEEP.

    Floats: target 0 folds DEEP ordinary values (rounding in the data's type at every step);
    the rows of depth 1 and 3 hold NaN, -0.0, 0.0, +-inf and ties. Integers span the type's
    range (add and mul wrap); bool is random.
    """
    rng = np.random.default_rng(seed)
    dtype = _dtype(name)
    targets = np.concatenate([np.zeros(DEEP, np.int64), [1, 2, 1, 2, 1, 2], np.arange(3, ROWS)])
    targets = targets[rng.permutation(targets.size)]
    n = targets.size
    if dtype == np.bool_:
        return rng.random((ROWS, width)) < 0.5, targets, rng.random((n, width)) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        big = lambda shape: rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)  # noqa: E731
        return big((ROWS, width)), targets, big((n, width))
    if reduction == "mul":
        plain = lambda shape: 1 + rng.standard_normal(shape) / 64  # noqa: E731
    else:
        plain = lambda shape: rng.standard_normal(shape) * 4  # noqa: E731
    special = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1.0, -1.0, 1.0, -0.0, 0.0, 2.0, 0.5])
    data, updates = plain((ROWS, width)), plain((n, width))
    shallow = targets != 0
    updates[shallow] = rng.choice(special, (int(shallow.sum()), width))
    data[1:] = rng.choice(special, (ROWS - 1, width))
    return data.astype(np.float32).astype(dtype), targets, updates.astype(np.float32).astype(dtype)


def _check(name: str, device, interpret: bool, seed: int):
    """Every reduction of ``name``'s case, eagerly and jitted, bitwise against the NumPy kernel.

    Interpreted, each reduction runs one way (eager or jit, by turns): both trace the same
    jitted kernel, and the compiles are the interpreter's whole cost.
    """
    differ = []
    for r, reduction in enumerate(REDUCTIONS):
        width = WIDTHS[(seed + r) % len(WIDTHS)]
        data, targets, updates = _case(name, reduction, width, seed + r)
        expected = scatter_nd(data, targets[:, None], updates, reduction=reduction)
        d, t, u = (jax.device_put(a, device) for a in (data, targets, updates))

        def run(d, t, u, reduction=reduction):
            return _pallas_scatter.scatter_rows(d, t, u, Reduction(reduction), interpret=interpret)

        hows = {"eager": run, "jit": jax.jit(run)}
        if interpret:  # the compiles are the interpreter's cost: eager and jit by turns
            hows.pop("jit" if (seed + r) % 2 else "eager")
        for how, call in hows.items():
            got = np.asarray(call(d, t, u))
            if not same_bits(expected, got):
                bad = np.argwhere(expected.view(f"u{expected.itemsize}") != got.view(f"u{got.itemsize}"))[:3]
                differ.append(
                    f"{name} {reduction} width {width} {how}: at {bad.tolist()} numpy "
                    f"{[expected[tuple(b)] for b in bad]} kernel {[got[tuple(b)] for b in bad]}"
                )
    assert not differ, "\n".join(differ)


@pytest.mark.parametrize("name", X64_OFF)
def test_every_reduction_bitwise_x64_off(where, name):
    """JAX's default configuration (no x64), every reduction, depths 1/3/200, every width class."""
    device, interpret = where
    with jax.enable_x64(False):
        _check(name, device, interpret, seed=X64_OFF.index(name))


@pytest.mark.parametrize("name", X64_ON)
def test_every_reduction_bitwise_x64_on(where, name):
    """float64, int64 and uint64 (JAX holds them only with x64 on); int64 targets."""
    device, interpret = where
    with jax.enable_x64(True):
        _check(name, device, interpret, seed=X64_ON.index(name))


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_max_min_keep_the_first_nan_and_the_tie_rule(where, name):
    """Float max/min are keyed selections, not a fold: NaNs of several payloads and signs in one run
    (the first met wins, data's own first), -0.0/0.0 ties (the last update; float16 the value
    held), in random orders and depths: bitwise the NumPy kernel's."""
    device, interpret = where
    dtype = _dtype(name)
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dtype.itemsize]
    top = dtype.itemsize * 8
    exponent = {"float16": 5, "bfloat16": 8, "float32": 8, "float64": 11}[name]
    quiet = (1 << (top - 1)) - (1 << (top - 1 - exponent))  # exponent all ones: NaN with any fraction
    nans = np.array([quiet | 1 << (top - exponent - 2), quiet | 3, quiet | 5 | 1 << (top - 1)], dtype=bits).view(dtype)
    rng = np.random.default_rng(3)
    special = np.concatenate([nans, np.array([-0.0, 0.0, 1.0, -1.0, 0.0, -0.0], dtype=dtype)])
    with jax.enable_x64(name == "float64"):
        for trial in range(6):
            targets = rng.integers(0, 4, 60)
            data = rng.choice(special, (4, 3)) if trial % 2 else np.zeros((4, 3), dtype)
            updates = rng.choice(special, (60, 3))
            for reduction in ("max", "min"):
                expected = scatter_nd(data, targets[:, None], updates, reduction=reduction)
                d, t, u = (jax.device_put(a, device) for a in (data, targets, updates))
                got = np.asarray(_pallas_scatter.scatter_rows(d, t, u, Reduction(reduction), interpret=interpret))
                assert np.array_equal(expected.view(bits), got.view(bits)), (name, reduction, trial)


def test_half_types_round_every_step(where):
    """float16/bfloat16 'add' rounds after every step: 1 + 200 * 2**-12 stays 1 in float16
    (each 2**-12 is under half an ulp of 1), where a float32 accumulator would give 1.048828125."""
    device, interpret = where
    for dtype in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
        data = np.ones((2, 3), dtype)
        updates = np.full((DEEP, 3), 2.0**-12 if dtype == np.float16 else 2.0**-9, dtype)
        targets = np.zeros(DEEP, np.int32)
        expected = scatter_nd(data, targets[:, None].astype(np.int64), updates, reduction="add")
        assert (expected.astype(np.float32) == 1).all()  # the spec's loop: every step rounds
        with jax.enable_x64(False):
            d, t, u = (jax.device_put(a, device) for a in (data, targets, updates))
            run = lambda d, t, u: _pallas_scatter.scatter_rows(d, t, u, Reduction.ADD, interpret=interpret)  # noqa: E731
            for got in (run(d, t, u), jax.jit(run)(d, t, u)):
                assert same_bits(expected, np.asarray(got)), dtype


def test_targets_out_of_range_are_dropped(where):
    """Under a trace a bad index reaches the kernel as a target outside [0, T): its update is dropped."""
    device, interpret = where
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    targets = np.array([1, 4, -1, 1, 7, 3], np.int32)
    updates = np.arange(18, dtype=np.float32).reshape(6, 3) + 0.5
    keep = (targets >= 0) & (targets < 4)
    expected = scatter_nd(data, targets[keep, None].astype(np.int64), updates[keep], reduction="add")
    with jax.enable_x64(False):
        d, t, u = (jax.device_put(a, device) for a in (data, targets, updates))
        got = jax.jit(lambda d, t, u: _pallas_scatter.scatter_rows(d, t, u, Reduction.ADD, interpret=interpret))(
            d, t, u
        )
    assert same_bits(expected, np.asarray(got))


@pytest.fixture
def routed(where, monkeypatch):
    """The JAX backend's scatters on ``where``, counting the kernel's calls: on the CPU the GPU
    route is patched in (``enabled``) and interpreted; on a GPU nothing is patched."""
    device, interpret = where
    calls = spy_pallas(monkeypatch)
    if interpret:
        monkeypatch.setattr(_pallas_scatter, "enabled", lambda traced, data: True)
        monkeypatch.setattr(_pallas_scatter, "INTERPRET", True)
    return device, calls


def test_operators_take_the_kernel(routed, where):
    """ScatterND (index tuples of 2) and ScatterElements (axis 1) through the backend, eagerly and
    jitted, x64 off (4 types and reductions) and on (int64 indices): the kernel runs and the bits
    are the NumPy kernel's. Interpreted, each call runs one way (eager or jit) by turns."""
    device, calls = routed
    interpret = where[1]
    rng = np.random.default_rng(7)
    combos = [
        (False, np.float32, "add"),
        (False, np.float16, "mul"),
        (False, np.int32, "max"),
        (False, np.dtype(ml_dtypes.bfloat16), "min"),
        (True, np.float32, "add"),
    ]
    turn = 0
    for x64, dtype, reduction in combos:
        with jax.enable_x64(x64):
            data = (rng.standard_normal((3, 4, 5)) * 4 if dtype != np.int32 else rng.integers(-9, 9, (3, 4, 5))).astype(
                dtype
            )
            nd_idx = rng.integers(0, 12, 10)
            nd_idx = np.stack([nd_idx // 4, nd_idx % 4], axis=1)  # duplicate tuples
            el_idx = rng.integers(0, 4, (3, 6, 5))
            nd_upd = (1 + rng.standard_normal((10, 5)) / 8).astype(dtype)
            el_upd = (1 + rng.standard_normal((3, 6, 5)) / 8).astype(dtype)
            index_dtype = np.int64 if x64 else np.int32
            for op, idx, upd, kw in ((scatter_nd, nd_idx, nd_upd, {}), (scatter_elements, el_idx, el_upd, {"axis": 1})):
                expected = op(data, idx, upd, reduction=reduction, **kw)
                d, i, u = (jax.device_put(a, device) for a in (data, idx.astype(index_dtype), upd))
                f = lambda d, i, u, op=op, kw=kw, r=reduction: op(d, i, u, reduction=r, **kw)  # noqa: E731
                hows = {"eager": f, "jit": jax.jit(f)}
                if interpret:
                    hows.pop("jit" if turn % 2 else "eager")
                turn += 1
                for how, call in hows.items():
                    before = len(calls)
                    got = np.asarray(call(d, i, u))
                    assert len(calls) == before + 1, (op.__name__, how, "the Pallas kernel was not taken")
                    assert same_bits(expected, got), (op.__name__, np.dtype(dtype), reduction, how, x64)


def test_gradients_through_the_kernel(routed):
    """``jax.grad`` flows through the kernel (its tangents are XLA's scatter's)."""
    device, calls = routed
    data, updates = np.arange(12.0, dtype=np.float32).reshape(4, 3), np.full((3, 3), 2.0, np.float32)
    indices = np.array([[1], [1], [3]])
    with jax.enable_x64(False):
        d, u = jax.device_put(data, device), jax.device_put(updates, device)
        g_data, g_updates = jax.grad(lambda d, u: scatter_nd(d, indices, u, reduction="mul").sum(), argnums=(0, 1))(
            d, u
        )
    assert calls and np.asarray(g_data).tolist() == [[1, 1, 1], [4, 4, 4], [1, 1, 1], [2, 2, 2]]
    assert np.asarray(g_updates).tolist() == [[6, 8, 10], [6, 8, 10], [9, 10, 11]]


def test_cpu_paths_unchanged(monkeypatch):
    """On the CPU the kernel is never taken, eagerly or under jit, also on a machine whose default
    backend is a GPU (jit's branch is chosen when lowered: XLA's serial scatter for the CPU);
    ``GATHER_SCATTER_JAX_GPU_SCATTER=native`` turns it off on a GPU; a bad value warns."""
    cpu = jax.devices("cpu")[0]
    assert not _pallas_scatter.enabled(False, jax.device_put(np.zeros(3), cpu))
    data, targets = np.arange(12.0, dtype=np.float32).reshape(4, 3), np.array([[1], [1], [3]])
    updates = np.full((3, 3), 0.1, np.float32)
    expected = scatter_nd(data, targets, updates, reduction="add")
    d, u = jax.device_put(data, cpu), jax.device_put(updates, cpu)
    with jax.enable_x64(False):
        f = jax.jit(lambda d, u: scatter_nd(d, targets, u, reduction="add"))
        assert same_bits(expected, np.asarray(f(d, u)))
        assert "triton" not in f.lower(d, u).as_text()  # lowered for the CPU the arguments are on
        assert same_bits(expected, np.asarray(scatter_nd(d, targets, u, reduction="add")))
    monkeypatch.setenv("GATHER_SCATTER_JAX_GPU_SCATTER", "native")
    assert not _pallas_scatter.enabled(True, None)
    gpu = _gpu()
    if gpu is not None:
        assert not _pallas_scatter.enabled(False, jax.device_put(np.zeros(3), gpu))
        monkeypatch.setenv("GATHER_SCATTER_JAX_GPU_SCATTER", "pallas")
        assert _pallas_scatter.enabled(False, jax.device_put(np.zeros(3), gpu))
    monkeypatch.setenv("GATHER_SCATTER_JAX_GPU_SCATTER", "triton?")
    with pytest.warns(RuntimeWarning, match="GATHER_SCATTER_JAX_GPU_SCATTER"):
        _pallas_scatter.enabled(False, jax.device_put(np.zeros(3), cpu))


def test_supports():
    """Reductions of the kernel's types only: 'none', complex and float8 keep their paths."""
    f32 = jnp.zeros((4, 3), jnp.float32)
    assert _pallas_scatter.supports(f32, f32, Reduction.ADD)
    assert not _pallas_scatter.supports(f32, f32, Reduction.NONE)
    assert not _pallas_scatter.supports(f32.astype(jnp.complex64), f32.astype(jnp.complex64), Reduction.ADD)
    assert not _pallas_scatter.supports(f32.astype(jnp.float8_e4m3fn), f32.astype(jnp.float8_e4m3fn), Reduction.MAX)


@pytest.mark.parametrize("name", X64_OFF + X64_ON)
def test_lowers_for_cuda(name):
    """The kernel lowers for CUDA through Pallas' Triton backend, from any machine: what Triton's
    lowering cannot express (a dynamic loop bound, a type, a conversion) fails here, without a GPU.
    Only float add/mul fold in the kernel; float max/min (keyed) and every integer reduction are
    XLA's own scatters, which lower with no Triton call."""
    dtype = _dtype(name)
    with jax.enable_x64(name in X64_ON):
        for reduction in REDUCTIONS:
            f = jax.jit(
                lambda d, t, u, r=reduction: _pallas_scatter.traced_scatter_rows(
                    d, t, u, Reduction(r), functools.partial(_jax_scatter.scatter_rows, reduction=Reduction(r))
                )
            )
            args = (jnp.zeros((5, 130), dtype), jnp.zeros((40,), jnp.int32), jnp.zeros((40, 130), dtype))
            try:
                traced = f.trace(*args)
            except AttributeError:
                pytest.skip(f"jax {jax.__version__} has no jit(...).trace (lowering for another platform)")
            try:
                text = traced.lower(lowering_platforms=("cuda",)).as_text()
            except TypeError as e:
                pytest.skip(f"jax {jax.__version__} cannot lower for another platform here: {e}")
            folds = reduction in ("add", "mul") and np.dtype(dtype).kind not in "biu"
            assert ("xla.gpu.triton" in text) == folds, (name, reduction)
