"""Bounds checks without a host sync (torch on CUDA, ``backends/_deferred.py``): when a bad index raises.

Without a GPU the deferred path runs on CPU tensors (``_torch_deferred.DEVICES`` patched to take
the CPU, and the torch backend's ``_on_cpu`` to say no, so the CUDA branches run): every case of
tests/test_cuda.py bit for bit as NumPy, every bad index of its BAD list raised with the NumPy
path's error (plus the note) at :func:`gather_scatter.synchronize` or at the next call, ``out=``
untouched by a bad call, the caller's tensors unchanged. On a GPU: no call syncs the host
(``torch.cuda.set_sync_debug_mode('error')``) and a bad index leaves the CUDA context usable.
"""

from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest
from error_check import raised
from test_cuda import BAD, NEWEST_CPU, _bad_case, _jax_failures, _run, _to_jax, _to_torch, _torch_failures

import gather_scatter
from gather_scatter import IndexOutOfBoundsError, gather, gather_nd, scatter_nd, synchronize
from gather_scatter.backends import _deferred

torch = pytest.importorskip("torch", reason="torch not installed")


@pytest.fixture
def deferred(monkeypatch):
    """The deferred path on CPU tensors; nothing left queued after the test."""
    import gather_scatter.backends._torch_deferred as torch_deferred
    import gather_scatter.backends.torch as torch_backend

    monkeypatch.setattr(torch_deferred, "DEVICES", {"cuda", "cpu"})
    monkeypatch.setattr(torch_backend, "_on_cpu", lambda t: False)
    previous = gather_scatter.set_bounds_check("deferred")
    _deferred._local.checks.clear()
    yield
    gather_scatter.set_bounds_check(previous)
    _deferred._local.checks.clear()


def _with_note(expected: BaseException, found: BaseException | None) -> bool:
    return type(found) is type(expected) and str(found) == str(expected) + _deferred.NOTE


def test_every_case_is_bitwise_numpy_through_the_deferred_path(deferred):
    failures, compared = _torch_failures(torch, "cpu", NEWEST_CPU)
    assert not failures, f"{len(failures)} of {compared} differ: {failures[:6]}"
    assert compared > 100
    assert _deferred.pending() > 0  # the tensor-index calls were deferred (NumPy-index ones are eager)
    synchronize()  # every one of them passed
    assert _deferred.pending() == 0


@pytest.mark.parametrize("op, make, attrs", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_a_bad_index_raises_the_numpy_error_at_synchronize(deferred, op, make, attrs):
    spec, expected = _bad_case(op, make, attrs)
    inputs = [_to_torch(torch, "cpu", v) for v in make()]
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    before = [t.clone() for t in tensors]
    result = _run(spec, inputs, attrs)  # returns: the check is queued
    assert isinstance(result, torch.Tensor) and _deferred.pending() == 1
    assert all(torch.equal(a, b) for a, b in zip(before, tensors, strict=True))
    found = raised(synchronize)
    assert _with_note(expected, found), (found, expected)
    assert (found.position, found.value) == (expected.position, expected.value)
    assert _deferred.pending() == 0 and raised(synchronize) is None  # raised once
    # indices given as NumPy go to the device by a copy that waits anyway: checked eagerly
    at = 2 if op == "TensorScatter" else 1
    host = [v if i == at else _to_torch(torch, "cpu", v) for i, v in enumerate(make())]
    assert str(raised(lambda: _run(spec, host, attrs))) == str(expected)


def test_the_next_call_raises_an_earlier_bad_index_and_does_not_run(deferred):
    data = torch.arange(20.0).reshape(5, 4)
    gather(data, torch.tensor([0, 7, -9]))  # two bad: the first is named
    with pytest.raises(IndexOutOfBoundsError) as info:
        gather(data, torch.tensor([1]))
    assert str(info.value).startswith("Gather-13: indices[1] = 7 is out of bounds for data axis 0 of size 5")
    assert info.value.position == (1,) and info.value.value == 7 and info.value.valid_range == (-5, 4)
    assert gather(data, torch.tensor([1])).tolist() == [[4.0, 5.0, 6.0, 7.0]]  # then calls run again
    # a call on another device (here a CPU tensor the check does not defer) raises it too
    gather(data, torch.tensor([[5]]))
    gather_scatter.set_bounds_check("eager")
    with pytest.raises(IndexOutOfBoundsError, match=r"indices\[0, 0\] = 5 .*deferred"):
        gather(torch.zeros(3), torch.tensor([0]))


def test_checks_raise_in_call_order_one_at_a_time():
    """Checks still on the device when the next call comes: synchronize raises them oldest first."""
    _deferred._local.checks.clear()
    for value in (9, -5):
        _deferred.defer(
            _deferred.Pending(ready=lambda: False, wait=lambda: None, read=lambda v=value: (1, 0, v), fail=_fail)
        )
    gather(np.zeros(3), [0])  # the next call: neither is ready, neither raised, the call runs
    with pytest.raises(IndexOutOfBoundsError, match=r"^Gather-13: indices\[0\] = 9 "):
        synchronize()
    with pytest.raises(IndexOutOfBoundsError, match=r"^Gather-13: indices\[0\] = -5 "):
        synchronize()
    synchronize()


def test_a_failed_call_queues_nothing_more(deferred):
    data = torch.zeros(4, 3)
    gather_nd(data, torch.tensor([[0, 2], [9, 0]]))
    with pytest.raises(IndexOutOfBoundsError, match=r"^GatherND-13: indices\[1, 0\] = 9 "):
        scatter_nd(data, torch.tensor([[-5]]), torch.ones(1, 3))  # raises the earlier error: does not run
    assert _deferred.pending() == 0
    synchronize()


def test_out_is_written_only_where_the_check_passed(deferred):
    data = torch.arange(12.0).reshape(4, 3)
    out = torch.full((4, 3), -1.0)
    assert scatter_nd(data, torch.tensor([[1], [4]]), torch.ones(2, 3), out=out) is out
    assert out.eq(-1).all()  # a bad index: out keeps its values
    with pytest.raises(IndexOutOfBoundsError):
        synchronize()
    in_place = data.clone()
    scatter_nd(in_place, torch.tensor([[1], [7]]), torch.ones(2, 3), reduction="add", out=in_place)
    assert torch.equal(in_place, data)  # in place: data untouched
    with pytest.raises(IndexOutOfBoundsError):
        synchronize()
    scatter_nd(in_place, torch.tensor([[1], [-1]]), torch.ones(2, 3), reduction="add", out=in_place)
    assert in_place[1].tolist() == [4.0, 5.0, 6.0] and in_place[3].tolist() == [10.0, 11.0, 12.0]
    synchronize()


def test_a_compiled_call_leaves_an_earlier_bad_index_to_the_next_eager_one(deferred):
    """torch.compile(fullgraph=True) compiles and runs with a failed check queued: a graph cannot raise it."""
    data = torch.arange(6.0).reshape(3, 2)
    gather(data, torch.tensor([4]))  # bad, queued
    compiled = torch.compile(lambda d, i: gather(d, i), fullgraph=True, backend="eager")
    assert compiled(data, torch.tensor([2, 0])).tolist() == [[4.0, 5.0], [0.0, 1.0]]
    assert _deferred.pending() == 1
    with pytest.raises(IndexOutOfBoundsError, match=r"indices\[0\] = 4 .*deferred"):
        synchronize()


def test_the_value_is_read_when_the_call_is_made(deferred):
    """A caller refilling its index buffer after the call does not change what the error says."""
    indices = torch.tensor([2, 8])
    gather(torch.zeros(3), indices)
    indices.fill_(0)
    with pytest.raises(IndexOutOfBoundsError, match=r"indices\[1\] = 8 "):
        synchronize()


def test_eager_mode_raises_from_the_call(deferred):
    gather_scatter.set_bounds_check("eager")
    with pytest.raises(IndexOutOfBoundsError) as info:
        gather(torch.zeros(3), torch.tensor([3]))
    assert _deferred.NOTE not in str(info.value) and _deferred.pending() == 0
    assert gather_scatter.get_bounds_check() == "eager"


def test_a_check_still_on_the_device_is_not_waited_for_but_synchronize_waits():
    waited = []
    check = _deferred.Pending(
        ready=lambda: bool(waited),
        wait=lambda: waited.append(True),
        read=lambda: (1, 0, 9),
        fail=lambda position, value: _fail(position, value),
    )
    _deferred._local.checks.clear()
    _deferred.defer(check)
    _deferred.settle()  # not ready: stays queued, nothing raised, nothing waited for
    assert _deferred.pending() == 1 and not waited
    with pytest.raises(IndexOutOfBoundsError, match=r"indices\[0\] = 9 .*deferred"):
        synchronize()
    assert waited == [True] and _deferred.pending() == 0


def _fail(position, value):
    from gather_scatter.rules.validate import out_of_bounds
    from gather_scatter.rules.versions import REGISTRY

    out_of_bounds(REGISTRY[("", "Gather", 13)], (position,), value, 3, 0)


def test_a_check_belongs_to_the_thread_that_made_the_call(deferred):
    queued = []

    def bad_call():
        gather(torch.zeros(3), torch.tensor([5]))
        queued.append(_deferred.pending())
        with pytest.raises(IndexOutOfBoundsError, match=r"indices\[0\] = 5 "):
            synchronize()

    thread = threading.Thread(target=bad_call)
    thread.start()
    thread.join()
    assert queued == [1] and _deferred.pending() == 0
    synchronize()  # not this thread's


def test_the_mode_setting():
    assert gather_scatter.set_bounds_check("eager") == "deferred"
    assert gather_scatter.set_bounds_check("deferred") == "eager"
    with pytest.raises(ValueError, match=r"mode must be one of \('deferred', 'eager'\), got 'lazy'"):
        gather_scatter.set_bounds_check("lazy")


@pytest.mark.parametrize(
    "value, mode, warns", [("", "deferred", False), ("EAGER", "eager", False), ("lazy", "deferred", True)]
)
def test_the_environment_variable(monkeypatch, value, mode, warns):
    monkeypatch.setenv(_deferred.ENV_VAR, value)
    if warns:
        with pytest.warns(RuntimeWarning, match="GATHER_SCATTER_BOUNDS_CHECK='lazy' is not one of"):
            assert _deferred._mode_from_env() == mode
    else:
        assert _deferred._mode_from_env() == mode


def test_a_bad_index_never_raised_is_reported_at_exit():
    script = (
        "import torch, gather_scatter\n"
        "import gather_scatter.backends._torch_deferred as d, gather_scatter.backends.torch as b\n"
        "d.DEVICES.add('cpu'); b._on_cpu = lambda t: False\n"
        "print(gather_scatter.gather(torch.zeros(3), torch.tensor([0, 4])).shape)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "torch.Size([2])"
    assert "gather_scatter: a bad index was never raised: Gather-13: indices[1] = 4 is out of bounds" in done.stderr


# ---- JAX: eager calls staged, the flag not waited for ---------------------------------------------


@pytest.fixture
def jax_deferred(monkeypatch):
    """JAX's deferred path on the CPU (x64 on, as ONNX's int64); nothing left queued after the test."""
    jax = pytest.importorskip("jax", reason="jax not installed")
    from gather_scatter.backends import _jax_deferred

    monkeypatch.setattr(_jax_deferred, "PLATFORMS", {"gpu", "cpu"})
    previous = gather_scatter.set_bounds_check("deferred")
    _deferred._local.checks.clear()
    with jax.enable_x64(True):
        yield jax, jax.devices("cpu")[0]
    gather_scatter.set_bounds_check(previous)
    _deferred._local.checks.clear()


def test_jax_every_case_is_bitwise_numpy_through_the_deferred_path(jax_deferred, monkeypatch):
    """Three operators' cases (per-component bounds, elements, write indices): the staged computation is
    the CPU's default eager path, whose bits tests/test_backends.py covers for every version; what is new
    here is that its flag is queued, not read."""
    from gather_scatter.backends import _jax_deferred

    jax, cpu = jax_deferred
    deferred, defer = [], _jax_deferred.defer
    monkeypatch.setattr(_jax_deferred, "defer", lambda *args: deferred.append(1) or defer(*args))
    specs = [s for s in NEWEST_CPU if s.op_type in ("GatherND", "ScatterElements", "TensorScatter")]
    failures, compared, _ = _jax_failures(jax, cpu, specs, jit=False)
    assert not failures, f"{len(failures)} of {compared} differ: {failures[:6]}"
    assert len(deferred) > compared / 2  # JAX-array indices were deferred (NumPy ones, a third, checked on the host)
    synchronize()


@pytest.mark.parametrize("op, make, attrs", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
@pytest.mark.parametrize("x64", [False, True], ids=["x64-off", "x64-on"])
def test_jax_bad_index_raises_the_numpy_error_at_synchronize(jax_deferred, op, make, attrs, x64):
    """JAX's default (x64 off: int32 indices, the rerun made with x64 off too) and x64 on."""
    jax, cpu = jax_deferred
    spec, expected = _bad_case(op, make, attrs)
    with jax.enable_x64(x64):
        inputs = [_to_jax(jax, cpu, v) for v in make()]
        assert _run(spec, inputs, attrs).shape is not None and _deferred.pending() == 1
    found = raised(synchronize)  # outside: the rerun takes x64 as it was at the call
    assert _with_note(expected, found), (found, expected)
    assert (found.position, found.value) == (expected.position, expected.value)
    at = 2 if op == "TensorScatter" else 1
    with jax.enable_x64(x64):
        host = [v if i == at else inputs[i] for i, v in enumerate(make())]
        assert str(raised(lambda: _run(spec, host, attrs))) == str(expected)  # NumPy indices: at the call


def test_jax_stages_only_what_is_exact_on_a_gpu(jax_deferred, monkeypatch):
    import jax.numpy as jnp

    from gather_scatter.backends import _jax_deferred, _pallas_scatter

    data, updates = jnp.zeros((4, 3)), {"updates": jnp.ones((2, 3))}
    assert _jax_deferred.stages_exactly("gather", {}, {"axis": 0}, data)
    assert _jax_deferred.stages_exactly("scatter_nd", updates, {"reduction": "none"}, data)
    kernel = _pallas_scatter._pallas() is not None
    assert _jax_deferred.stages_exactly("scatter_nd", updates, {"reduction": "add"}, data) == kernel
    complex_data = jnp.zeros((4, 3), jnp.complex64)
    assert not _jax_deferred.stages_exactly("scatter_elements", updates, {"reduction": "mul"}, complex_data)
    monkeypatch.setenv("GATHER_SCATTER_JAX_GPU_SCATTER", "native")
    assert not _jax_deferred.stages_exactly("scatter_nd", updates, {"reduction": "max"}, data)
    # not staged: op by op, checked at the call
    with pytest.raises(IndexOutOfBoundsError, match=r"indices\[0, 0\] = 4 ") as info:
        scatter_nd(complex_data, jnp.array([[4]]), jnp.ones((1, 3), jnp.complex64), reduction="mul")
    assert _deferred.NOTE not in str(info.value) and _deferred.pending() == 0


# ---- on a GPU ---------------------------------------------------------------------------------


@pytest.fixture
def cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device (torch.cuda.is_available() is False)")
    previous = gather_scatter.set_bounds_check("deferred")
    yield
    gather_scatter.set_bounds_check(previous)
    torch.cuda.synchronize()


def test_cuda_calls_do_not_sync_the_host(cuda):
    """Every operator on CUDA tensors, valid indices: no host sync (torch raises on one in this mode)."""
    data = torch.randn(64, 8, device="cuda")
    rows = torch.randint(-64, 64, (1000,), device="cuda")
    pairs = torch.stack([torch.randint(0, 64, (1000,), device="cuda"), torch.randint(-8, 8, (1000,), device="cuda")], 1)
    cache = torch.zeros(2, 3, 16, 4, device="cuda")
    write = torch.tensor([0, 5], device="cuda")  # (a list to the device: a sync, so made before)
    for _ in range(2):  # the second time with everything warm (Triton compiled, pinned memory cached)
        torch.cuda.set_sync_debug_mode("error")
        try:
            gather(data, rows)
            gather_nd(data, pairs)
            gather_scatter.gather_elements(data, torch.randint(0, 64, (32, 8), device="cuda"))
            scatter_nd(data, rows[:, None], torch.randn(1000, 8, device="cuda"), reduction="add")
            scatter_nd(data, rows[:, None], torch.randn(1000, 8, device="cuda"))
            gather_scatter.scatter_elements(
                data, torch.randint(0, 64, (32, 8), device="cuda"), torch.randn(32, 8, device="cuda"), reduction="max"
            )
            gather_scatter.tensor_scatter(cache, torch.ones(2, 3, 2, 4, device="cuda"), write)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    synchronize()


def test_cuda_bad_index_leaves_the_context_usable(cuda):
    data = torch.randn(64, 8, device="cuda")
    result = gather(data, torch.tensor([3, 64, -65], device="cuda"))
    with pytest.raises(IndexOutOfBoundsError, match=r"indices\[1\] = 64 .*deferred"):
        synchronize()
    assert result.shape == (3, 8)
    assert torch.equal(gather(data, torch.tensor([3], device="cuda")), data[3:4])
    torch.cuda.synchronize()
