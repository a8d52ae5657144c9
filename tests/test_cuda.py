"""Every operator version on a GPU: PyTorch CUDA tensors, and JAX GPU arrays eagerly and under
``jax.jit``, bit for bit against the NumPy path (the package's default on NumPy arrays).

Off the CPU the backends take other paths than CI's: torch checks bounds before any take (a bad
index would be a device-side assert), reduces scatters in the Triton fold where triton imports
(``backends/_torch_triton.py``; its own cases: tests/test_triton_scatter.py) and otherwise, and
for 'none', in the standard rounds of ``ArrayAPIBackend.scatter_rows`` (deterministic, row-major,
unlike ``index_add``'s atomics); JAX's scatter reductions (add/mul/max/min) take the Pallas
kernel of ``backends/_pallas_scatter.py`` (one stable sort, then each target's updates folded in
order), eagerly and under ``jit``; its other eager steps run op by op (reduction 'none' in the
rounds). Each test
needs its device and skips with a reason without one (CI has none: these ran on an H100 by hand).
What is asserted per call: the result's device and dtype, its bits (NaN matches NaN), the
NumPy path's error (class and message) where it raises one, and inputs left unchanged.
Jitted JAX is compared bit for bit too: the one exception left (``backends/jax.py``) is jitted
float 'add'/'mul' of types the kernel does not take (complex; none in these cases) or with
``GATHER_SCATTER_JAX_GPU_SCATTER=native``: XLA's GPU scatters, in no promised order.

``test_gpu_branches_on_the_cpu`` runs the same eager cases through those GPU branches on the
CPU (the backends' ``_on_cpu`` patched), so CI keeps them covered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from backends import Library, same_bits, spy_pallas
from error_check import raised, same_error

from gather_scatter import (
    GatherScatterError,
    IndexOutOfBoundsError,
    run_node,
    scatter_elements,
    scatter_nd,
    tensor_scatter,
)
from gather_scatter.rules.versions import SWEPT

SPECS = sorted(SWEPT.values(), key=lambda s: (s.domain, s.op_type, s.since_version))
NEWEST = [s for s in SPECS if not any(t.op_type == s.op_type and t.domain == s.domain
                                      and t.since_version > s.since_version for t in SPECS)]
BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {"float": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": BF16,
          "int64": np.dtype(np.int64)}
SHAPE = (6, 5, 4)


# ---- the devices -------------------------------------------------------------------------------


def _cuda():
    torch = pytest.importorskip("torch", reason="torch not installed")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device (torch.cuda.is_available() is False)")
    return torch


def _jax_gpu():
    jax = pytest.importorskip("jax", reason="jax not installed")
    try:
        gpus = [d for d in jax.devices() if d.platform == "gpu"]
    except RuntimeError:  # pragma: no cover - a broken plugin
        gpus = []
    if not gpus:
        pytest.skip("no JAX GPU device (jax.devices() has none of platform 'gpu')")
    return jax, gpus[0]


@pytest.fixture
def cuda():
    torch = _cuda()
    yield torch
    torch.cuda.synchronize()  # a failed kernel surfaces in its own test


@pytest.fixture
def jax_gpu():
    jax, gpu = _jax_gpu()
    with jax.enable_x64(True):  # int64 as ONNX has it; restored after the test
        yield jax, gpu


# ---- the cases ---------------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    spec: Any
    inputs: list
    attrs: dict
    index_at: int  # which input holds the indices (TensorScatter: 2)

    @property
    def unordered_on_xla_gpu(self) -> bool:
        """Float 'add'/'mul' into duplicate targets that XLA's GPU scatter runs (in no promised
        order): a type the Pallas kernel does not take (none of DTYPES)."""
        from gather_scatter.backends._pallas_scatter import SUPPORTED

        dtype = self.inputs[0].dtype
        return self.attrs.get("reduction") in ("add", "mul") and dtype.kind in "fVc" and dtype not in SUPPORTED


def _values(rng, shape, dtype, reduction=None, special=True):
    """Values of ``dtype``: small ints, or floats with -0.0, 0.0 and a NaN where ``special``."""
    if dtype == np.int64:
        return rng.integers(-3, 4, shape) if reduction == "mul" else rng.integers(-50, 50, shape)
    x = 1 + rng.standard_normal(shape) / 64 if reduction == "mul" else rng.standard_normal(shape) * 4
    x = x.astype(np.float32).astype(dtype)
    if special and x.size > 3:
        flat = x.reshape(-1)
        flat[1::5] = -0.0  # zeros of both signs, so that max/min meet -0.0 against 0.0
        flat[3::5] = 0.0
        flat[2] = np.nan
    return x


def _indices(rng, low, high, shape, dtype):
    return rng.integers(low, high, shape).astype(dtype)


def cases(specs, seed=0, special=True) -> list[Case]:
    """For each version: float32/float16/bfloat16/int64 data (those it has), each index type, each
    attribute it takes (axis, batch_dims, reduction, mode, write_indices absent), negative indices
    and duplicate targets, on fixed shapes (JAX compiles once per shape)."""
    rng = np.random.default_rng(seed)
    out = []
    for spec in specs:
        name = f"{spec.domain + '.' if spec.domain else ''}{spec.op_type}-{spec.since_version}"
        for type_name, dtype in DTYPES.items():
            if type_name not in spec.data_types:
                continue
            for index_name in sorted(spec.index_types):
                idt = np.dtype(index_name)
                for attrs, inputs in _variants(spec, rng, dtype, idt, special):
                    shown = ",".join(f"{k}={v}" for k, v in attrs.items())
                    index_at = 2 if spec.op_type == "TensorScatter" else 1
                    out.append(Case(f"{name}[{dtype.name},{index_name},{shown}]", spec, inputs, attrs, index_at))
    return out


def _variants(spec, rng, dtype, idt, special):
    op, has = spec.op_type, spec.attributes
    data = _values(rng, SHAPE, dtype, special=special)
    if op == "Gather":
        for axis in (0, 1, -1):
            size = SHAPE[axis]
            yield {"axis": axis}, [data, _indices(rng, -size, size, (3, 2), idt)]
    elif op == "GatherND":
        yield {}, [data, _indices(rng, -6, 6, (3, 2, 1), idt)]
        yield {}, [data, np.stack([_indices(rng, -6, 6, 4, idt), _indices(rng, -5, 5, 4, idt)], axis=1)]
        if "batch_dims" in has:
            yield {"batch_dims": 1}, [data, _indices(rng, -5, 5, (6, 3, 1), idt)]
    elif op == "ScatterND":
        for reduction in spec.reductions:
            attrs = {"reduction": reduction} if "reduction" in has else {}
            yield attrs, [_values(rng, SHAPE, dtype, reduction, special), _indices(rng, -6, 6, (8, 1), idt),
                          _values(rng, (8, 5, 4), dtype, reduction, special)]
            pairs = np.stack([_indices(rng, -3, 3, 10, idt), _indices(rng, -2, 2, 10, idt)], axis=1)
            yield attrs, [_values(rng, SHAPE, dtype, reduction, special), pairs,
                          _values(rng, (10, 4), dtype, reduction, special)]
    elif op == "GatherElements":
        for axis in (0, 1, -1):
            ishape = list(SHAPE)
            ishape[axis] = 3
            size = SHAPE[axis]
            yield {"axis": axis}, [data, _indices(rng, -size, size, tuple(ishape), idt)]
    elif op in ("ScatterElements", "Scatter"):
        for reduction in spec.reductions:
            for axis in (0, 1, -1):
                ishape = list(SHAPE)
                ishape[axis] = 4  # 4 updates per line onto 4 to 6 positions: duplicates
                ishape[0 if axis != 0 else 1] -= 1  # a window smaller than data off the axis
                size = SHAPE[axis]
                attrs = {"axis": axis, **({"reduction": reduction} if "reduction" in has else {})}
                yield attrs, [_values(rng, SHAPE, dtype, reduction, special),
                              _indices(rng, -size, size, tuple(ishape), idt),
                              _values(rng, tuple(ishape), dtype, reduction, special)]
    elif op == "TensorScatter":
        for axis, past_shape, update_shape in ((-2, (2, 3, 8, 4), (2, 3, 2, 4)), (1, (2, 8, 3, 4), (2, 2, 3, 4))):
            for mode, write in (("linear", [0, 6]), ("circular", [7, 3]), ("linear", None)):
                past, update = _values(rng, past_shape, dtype, special=special), _values(rng, update_shape, dtype)
                yield {"axis": axis, "mode": mode}, [past, update, None if write is None else np.array(write, idt)]


def _expected(case: Case):
    """The NumPy path's result, or its GatherScatterError."""
    try:
        return _run(case.spec, case.inputs, case.attrs), None
    except GatherScatterError as exc:
        return None, exc


def _run(spec, inputs, attrs):
    return run_node(spec.op_type, inputs, attrs, opset=spec.since_version, domain=spec.domain)


def _numpy_dtype(dtype) -> np.dtype:
    name = str(dtype).rsplit(".", 1)[-1]
    return BF16 if name == "bfloat16" else np.dtype(name)


# ---- PyTorch on CUDA ---------------------------------------------------------------------------


def _to_torch(torch, device, value):
    if not isinstance(value, np.ndarray):
        return value
    return Library("torch").convert(value).to(device)


def _torch_bits(torch, t):
    """A tensor's bytes on the host, for the unchanged-inputs check."""
    t = t.detach().cpu().contiguous()
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def _check_torch(torch, device, case: Case, numpy_indices: bool) -> str | None:
    """Run ``case`` on tensors on ``device``; return what differs from NumPy, or None."""
    expected, error = _expected(case)
    inputs = [
        value if numpy_indices and i == case.index_at else _to_torch(torch, device, value)
        for i, value in enumerate(case.inputs)
    ]
    before = [_torch_bits(torch, t) for t in inputs if isinstance(t, torch.Tensor)]
    try:
        result = _run(case.spec, inputs, case.attrs)
    except Exception as exc:  # noqa: BLE001 - compared with the NumPy outcome below
        return None if error is not None and same_error(error, exc) else f"raised {exc!r}, numpy {error!r}"
    if error is not None:
        return f"returned, numpy raised {error!r}"
    if [_torch_bits(torch, t) for t in inputs if isinstance(t, torch.Tensor)] != before:
        return "an input changed"
    if result.device != inputs[0].device:
        return f"result on {result.device}"
    if _numpy_dtype(result.dtype) != expected.dtype:
        return f"dtype {result.dtype}, numpy {expected.dtype}"
    if not same_bits(expected, Library("torch").to_numpy(result, expected.dtype)):
        return "bits differ"
    return None


def _torch_failures(torch, device, specs, special=True):
    failures, compared = [], 0
    for n, case in enumerate(cases(specs, special=special)):
        problem = _check_torch(torch, device, case, numpy_indices=n % 3 == 2)  # some NumPy indices
        compared += 1
        if problem:
            failures.append(f"{case.id}: {problem}")
    return failures, compared


def _spy_rounds(monkeypatch):
    """Count calls of the standard rounds (ArrayAPIBackend.scatter_rows)."""
    from gather_scatter.backends.array_api import ArrayAPIBackend

    calls = []
    rounds = ArrayAPIBackend.scatter_rows

    def counted(self, *args, **kwargs):
        calls.append(type(self).__name__)
        return rounds(self, *args, **kwargs)

    monkeypatch.setattr(ArrayAPIBackend, "scatter_rows", counted)
    return calls


@pytest.mark.parametrize("op", sorted({s.op_type for s in SPECS}))
def test_torch_cuda_every_version_is_bitwise_numpy(cuda, op, monkeypatch):
    torch = cuda
    calls = _spy_rounds(monkeypatch)
    # The deterministic paths (the Triton fold, the rounds for 'none'): torch raises if a
    # nondeterministic CUDA kernel (index_add's or scatter_reduce's atomics) runs under this mode.
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        failures, compared = _torch_failures(torch, "cuda", [s for s in SPECS if s.op_type == op])
    finally:
        torch.use_deterministic_algorithms(was)
    assert not failures, f"{len(failures)} of {compared} differ: {failures[:6]}"
    if "Scatter" in op:
        assert calls and set(calls) == {"TorchBackend"}, calls


@pytest.mark.parametrize("op", ["ScatterND", "ScatterElements"])
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_torch_cuda_many_duplicates_in_row_major_order(cuda, op, reduction):
    """2400 updates onto 6 rows (400 rounds): sums and products are order-dependent in floats."""
    torch = cuda
    for dtype in (np.float16, BF16, np.float32, np.int64):
        inputs = _duplicates(op, reduction, np.dtype(dtype))
        expected = (scatter_nd if op == "ScatterND" else scatter_elements)(*inputs, reduction=reduction)
        got = (scatter_nd if op == "ScatterND" else scatter_elements)(
            *[_to_torch(torch, "cuda", a) for a in inputs], reduction=reduction)
        assert got.device.type == "cuda"
        assert same_bits(expected, Library("torch").to_numpy(got, expected.dtype)), (op, reduction, dtype)


def _duplicates(op, reduction, dtype, seed=7):
    rng = np.random.default_rng(seed)
    data = _values(rng, (6, 3), dtype, reduction, special=False)
    values = _values(rng, (2400, 3), dtype, reduction, special=False)
    if dtype.kind != "i":
        values[::37] = -0.0
    shape = (2400, 1) if op == "ScatterND" else (2400, 3)
    return [data, rng.integers(-6, 6, size=shape), values]


BAD = [  # (op, NumPy inputs, attributes): one index out of bounds each, negative or past the end
    ("Gather", lambda: [np.zeros(SHAPE, np.float32), np.array([[0, 6]])], {"axis": 0}),
    ("Gather", lambda: [np.zeros(SHAPE, np.float32), np.array([-6, 0], np.int32)], {"axis": -1}),
    ("GatherND", lambda: [np.zeros(SHAPE, np.float32), np.array([[0, 1], [2, -6]])], {}),
    ("GatherND", lambda: [np.zeros(SHAPE, np.float32), np.array([[[0]], [[5]]] * 3)], {"batch_dims": 1}),
    ("ScatterND", lambda: [np.zeros(SHAPE, np.float32), np.array([[1], [-7]]), np.ones((2, 5, 4), np.float32)],
     {"reduction": "add"}),
    ("GatherElements", lambda: [np.zeros(SHAPE, np.float32), np.full((2, 5, 4), 6)], {"axis": 0}),
    ("ScatterElements", lambda: [np.zeros(SHAPE, np.float32), np.full((6, 5, 1), -5, np.int32),
                                 np.ones((6, 5, 1), np.float32)], {"axis": 2, "reduction": "max"}),
    ("TensorScatter", lambda: [np.zeros((2, 3, 8, 4), np.float32), np.ones((2, 3, 2, 4), np.float32),
                               np.array([0, 7])], {}),
    ("TensorScatter", lambda: [np.zeros((2, 3, 8, 4), np.float32), np.ones((2, 3, 2, 4), np.float32),
                               np.array([-1, 0])], {"mode": "circular"}),
]


def _bad_case(op, make, attrs):
    spec = next(s for s in NEWEST if s.op_type == op)
    expected = raised(lambda: _run(spec, make(), attrs))
    assert isinstance(expected, IndexOutOfBoundsError), expected
    return spec, expected


@pytest.mark.parametrize("op, make, attrs", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_torch_cuda_bad_index_raises_the_numpy_error(cuda, op, make, attrs):
    """Eagerly from the call; deferred (the default on CUDA) from gather_scatter.synchronize()."""
    import gather_scatter
    from gather_scatter.backends._deferred import NOTE

    torch = cuda
    spec, expected = _bad_case(op, make, attrs)
    at = 2 if op == "TensorScatter" else 1
    previous = gather_scatter.set_bounds_check("eager")
    try:
        for numpy_indices in (False, True):
            inputs = [v if numpy_indices and i == at else _to_torch(torch, "cuda", v) for i, v in enumerate(make())]
            assert same_error(expected, raised(lambda inputs=inputs: _run(spec, inputs, attrs)))
    finally:
        gather_scatter.set_bounds_check(previous)
    inputs = [v if i == at else _to_torch(torch, "cuda", v) for i, v in enumerate(make())]
    assert same_error(expected, raised(lambda: _run(spec, inputs, attrs)))  # NumPy indices: checked eagerly
    inputs = [_to_torch(torch, "cuda", v) for v in make()]
    result = _run(spec, inputs, attrs)  # returns: the check is on the device
    assert result.device.type == "cuda"
    found = raised(gather_scatter.synchronize)
    assert type(found) is type(expected) and str(found) == str(expected) + NOTE
    torch.cuda.synchronize()  # no device-side assert behind it
    assert float(torch.ones(1, device="cuda").sum()) == 1.0


def test_torch_cuda_out_and_in_place(cuda):
    torch = cuda
    rng = np.random.default_rng(1)
    data, updates = rng.standard_normal((6, 4)).astype(np.float32), rng.standard_normal((5, 4)).astype(np.float32)
    indices = np.array([[1], [-1], [1], [0], [5]])
    expected = scatter_nd(data, indices, updates, reduction="mul")
    d = _to_torch(torch, "cuda", data)
    out = torch.empty((6, 4), dtype=torch.float32, device="cuda")
    assert scatter_nd(d, indices, updates, reduction="mul", out=out) is out
    assert same_bits(expected, out.cpu().numpy()) and same_bits(data, d.cpu().numpy())
    assert scatter_nd(d, torch.from_numpy(indices).cuda(), updates, reduction="mul", out=d) is d  # in place
    assert same_bits(expected, d.cpu().numpy())
    from gather_scatter import DTypeError

    with pytest.raises(DTypeError, match=r"out is on device cpu but data is on cuda"):
        scatter_nd(d, indices, updates, out=torch.empty((6, 4)))
    with pytest.raises(DTypeError, match=r"indices is on device cpu but data is on cuda"):
        scatter_nd(d, torch.from_numpy(indices), updates)


def test_torch_cuda_gradients(cuda):
    torch = cuda
    table = torch.arange(12.0, device="cuda").reshape(4, 3).requires_grad_()
    updates = torch.ones(3, 3, device="cuda", requires_grad=True)
    out = scatter_nd(table, np.array([[1], [1], [3]]), updates, reduction="add")
    out.sum().backward()
    assert table.grad.device.type == "cuda" and torch.equal(table.grad, torch.ones(4, 3, device="cuda"))
    assert torch.equal(updates.grad, torch.ones(3, 3, device="cuda"))


# ---- JAX on the GPU ------------------------------------------------------------------------------


def _to_jax(jax, gpu, value):
    return jax.device_put(value, gpu) if isinstance(value, np.ndarray) else value


def _on(result, gpu) -> bool:
    return set(result.devices()) == {gpu}


def _check_jax(jax, gpu, case: Case, jit: bool, numpy_indices: bool) -> tuple[str | None, bool]:
    """Run ``case`` on JAX arrays on ``gpu``; return (what differs, whether only within tolerance)."""
    expected, error = _expected(case)
    inputs = [
        value if numpy_indices and i == case.index_at else _to_jax(jax, gpu, value)
        for i, value in enumerate(case.inputs)
    ]
    spec, attrs = case.spec, case.attrs
    if jit:
        arrays = [i for i, v in enumerate(inputs) if v is not None and not isinstance(v, np.ndarray)]

        def call(*given):
            full = list(inputs)
            for i, value in zip(arrays, given, strict=True):
                full[i] = value
            return _run(spec, full, attrs)

        run = lambda: jax.jit(call)(*[inputs[i] for i in arrays])  # noqa: E731
    else:
        run = lambda: _run(spec, inputs, attrs)  # noqa: E731
    try:
        result = run()
    except Exception as exc:  # noqa: BLE001 - compared with the NumPy outcome below
        return (None if error is not None and same_error(error, exc) else f"raised {exc!r}, numpy {error!r}"), False
    if error is not None:
        return f"returned, numpy raised {error!r}", False
    if not _on(result, gpu):
        return f"result on {result.devices()}", False
    if _numpy_dtype(result.dtype) != expected.dtype:
        return f"dtype {result.dtype}, numpy {expected.dtype}", False
    return _compare(expected, np.asarray(result), tolerant=jit and case.unordered_on_xla_gpu)


def _compare(expected, got, tolerant) -> tuple[str | None, bool]:
    """(what differs or None, whether equal only within tolerance); ``tolerant``: XLA's GPU
    scatter order for float add/mul under jit (documented), the only inexact case."""
    if same_bits(expected, got):
        return None, False
    e, g = expected.astype(np.float64), got.astype(np.float64)
    nan = np.isnan(e) | np.isnan(g)
    if not np.array_equal(np.isnan(e), np.isnan(g)):
        return f"bits differ (NaN at other places: {np.argwhere(np.isnan(e) != np.isnan(g)).tolist()[:4]})", False
    if tolerant:
        tol = {"float32": 1e-5, "float16": 4e-3, "bfloat16": 3e-2}[expected.dtype.name]
        if np.all((np.abs(g - e) <= tol * 8 * (1 + np.abs(e))) | nan):
            return None, True
    worst = float(np.max(np.abs(g - e)[~nan], initial=0.0))
    signs = int(np.sum((e == 0) & (g == 0) & (np.signbit(e) != np.signbit(g))))
    count = int(np.sum((e != g) & ~nan))
    return f"bits differ (largest difference {worst:g} in {count} elements, {signs} zero signs)", False


def _jax_failures(jax, gpu, specs, jit, special=True):
    failures, compared, within = [], 0, 0
    for n, case in enumerate(cases(specs, special=special)):
        index = case.inputs[case.index_at]
        if jit and index is not None and index.dtype == np.int32 and case.spec.op_type != "Gather":
            continue  # a compilation each: int32 indices run eagerly, and jitted in Gather
        problem, tolerated = _check_jax(jax, gpu, case, jit, numpy_indices=n % 3 == 2)
        compared += 1
        within += tolerated
        if problem:
            failures.append(f"{case.id}: {problem}")
    return failures, compared, within


@pytest.mark.parametrize("op", sorted({s.op_type for s in SPECS}))
def test_jax_gpu_eager_every_version_is_bitwise_numpy(jax_gpu, op, monkeypatch):
    """Op by op with the eager bounds check, and staged as one computation with the deferred one (the default)."""
    import gather_scatter

    jax, gpu = jax_gpu
    calls, kernel = _spy_rounds(monkeypatch), spy_pallas(monkeypatch)
    previous = gather_scatter.set_bounds_check("eager")
    try:
        failures, compared, _ = _jax_failures(jax, gpu, [s for s in SPECS if s.op_type == op], jit=False)
    finally:
        gather_scatter.set_bounds_check(previous)
    assert not failures, f"{len(failures)} of {compared} differ: {failures[:6]}"
    if "Scatter" in op:  # reduction 'none' in the rounds, the reductions in the Pallas kernel
        assert calls and set(calls) == {"JaxBackend"}, calls
    if op in ("ScatterND", "ScatterElements"):
        assert kernel, "the Pallas kernel was not taken"
    failures, compared, _ = _jax_failures(jax, gpu, [s for s in SPECS if s.op_type == op], jit=False)
    assert not failures, f"deferred: {len(failures)} of {compared} differ: {failures[:6]}"
    gather_scatter.synchronize()


@pytest.mark.parametrize("op", sorted({s.op_type for s in NEWEST}))
def test_jax_gpu_jit_newest_versions(jax_gpu, op, monkeypatch):
    """Under jit the scatter reductions are the Pallas kernel's on the GPU: bit for bit."""
    jax, gpu = jax_gpu
    kernel = spy_pallas(monkeypatch)
    specs = [s for s in NEWEST if s.op_type == op]
    failures, compared, within = _jax_failures(jax, gpu, specs, jit=True)
    assert not failures, f"{len(failures)} of {compared} differ: {failures[:6]}"
    assert within == 0, f"{within} jitted cases equal only within tolerance"
    if op in ("ScatterND", "ScatterElements"):
        assert kernel, "the Pallas kernel was not traced"


def test_jax_gpu_jit_signed_zeros_and_nan(jax_gpu):
    """-0.0, +0.0 and NaN through jitted max/min/add/mul scatters with distinct targets: one
    update per element, so no order is involved and NumPy's bits are the spec's."""
    jax, gpu = jax_gpu
    data = np.array([-0.0, 0.0, -0.0, 0.0, np.nan, 1.0, -0.0, 2.0], np.float32)
    updates = np.array([0.0, -0.0, -0.0, 0.0, 1.0, np.nan, np.nan, -0.0], np.float32)
    indices = np.arange(8)[:, None]
    differ = []
    for reduction in ("none", "add", "mul", "max", "min"):
        expected = scatter_nd(data, indices, updates, reduction=reduction)
        f = jax.jit(lambda d, i, u, r=reduction: scatter_nd(d, i, u, reduction=r))
        got = f(*[jax.device_put(a, gpu) for a in (data, indices, updates)])
        if not same_bits(expected, np.asarray(got)):
            differ.append(f"{reduction}: numpy {expected.tolist()} jit {np.asarray(got).tolist()}")
    assert not differ, differ


@pytest.mark.parametrize("op", ["ScatterND", "ScatterElements"])
def test_jax_gpu_eager_many_duplicates_in_row_major_order(jax_gpu, op):
    jax, gpu = jax_gpu
    kernel = scatter_nd if op == "ScatterND" else scatter_elements
    for reduction in ("none", "add", "mul", "max", "min"):
        for dtype in (np.float16, BF16, np.float32, np.int64):
            inputs = _duplicates(op, reduction, np.dtype(dtype))
            expected = kernel(*inputs, reduction=reduction)
            got = kernel(*[_to_jax(jax, gpu, a) for a in inputs], reduction=reduction)
            assert _on(got, gpu)
            assert same_bits(expected, np.asarray(got)), (op, reduction, dtype)


@pytest.mark.parametrize("op, make, attrs", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_jax_gpu_bad_index_raises_the_numpy_error(jax_gpu, op, make, attrs):
    """Eagerly and under jit with the indices known at trace time: IndexOutOfBoundsError; traced
    indices under jit: checkify's error carries the eager message."""
    jax, gpu = jax_gpu
    from jax.experimental import checkify

    import gather_scatter
    from gather_scatter.backends._deferred import NOTE

    spec, expected = _bad_case(op, make, attrs)
    at = 2 if op == "TensorScatter" else 1
    inputs = make()
    on_gpu = [_to_jax(jax, gpu, v) for v in inputs]
    previous = gather_scatter.set_bounds_check("eager")
    try:
        assert same_error(expected, raised(lambda: _run(spec, on_gpu, attrs)))
    finally:
        gather_scatter.set_bounds_check(previous)
    _run(spec, on_gpu, attrs)  # deferred (the default): returns, the check queued
    found = raised(gather_scatter.synchronize)
    assert type(found) is type(expected) and str(found) == str(expected) + NOTE
    host = [v if i == at else on_gpu[i] for i, v in enumerate(inputs)]
    assert same_error(expected, raised(lambda: _run(spec, host, attrs)))
    others = [i for i in range(len(inputs)) if i != at]

    def closed(*given):
        full = list(inputs)
        for i, v in zip(others, given, strict=True):
            full[i] = v
        return _run(spec, full, attrs)

    assert same_error(expected, raised(lambda: jax.jit(closed)(*[on_gpu[i] for i in others])))
    err, _ = checkify.checkify(jax.jit(lambda *a: _run(spec, list(a), attrs)))(*on_gpu)
    assert err.get() == str(expected) + " (`check` failed)"


def test_jax_gpu_x64_off_int32_indices(jax_gpu):
    """JAX as users run it (no x64): int32 JAX indices count as ONNX's int64, on the GPU too."""
    jax, gpu = jax_gpu
    rng = np.random.default_rng(4)
    data = rng.standard_normal(SHAPE).astype(np.float32)
    updates = rng.standard_normal((8, 5, 4)).astype(np.float32)
    indices = rng.integers(-6, 6, (8, 1))
    with jax.enable_x64(False):
        d, i, u = (jax.device_put(a, gpu) for a in (data, indices.astype(np.int32), updates))
        assert i.dtype == np.int32
        for reduction in ("none", "max", "add"):
            expected = scatter_nd(data, indices, updates, reduction=reduction)
            for got in (scatter_nd(d, i, u, reduction=reduction),
                        jax.jit(lambda d, i, u, r=reduction: scatter_nd(d, i, u, reduction=r))(d, i, u)):
                assert _on(got, gpu)
                assert same_bits(expected, np.asarray(got)), reduction  # duplicates: the Pallas kernel
        expected = tensor_scatter(np.zeros((2, 3, 8, 4), np.float32), np.ones((2, 3, 2, 4), np.float32),
                                  np.array([7, 2]), mode="circular")
        got = tensor_scatter(jax.device_put(np.zeros((2, 3, 8, 4), np.float32), gpu),
                             jax.device_put(np.ones((2, 3, 2, 4), np.float32), gpu),
                             jax.device_put(np.array([7, 2], np.int32), gpu), mode="circular")
        assert _on(got, gpu) and same_bits(expected, np.asarray(got))


def test_jax_gpu_inputs_unchanged_and_gradients(jax_gpu):
    jax, gpu = jax_gpu
    rng = np.random.default_rng(5)
    data, updates = rng.standard_normal((4, 3)), rng.standard_normal((3, 3))
    indices = np.array([[1], [1], [-1]])
    d, i, u = (jax.device_put(a, gpu) for a in (data, indices, updates))
    for reduction in ("none", "add", "mul", "max", "min"):
        scatter_nd(d, i, u, reduction=reduction)
        jax.jit(lambda d, i, u, r=reduction: scatter_nd(d, i, u, reduction=r))(d, i, u)
    assert same_bits(data, np.asarray(d)) and same_bits(updates, np.asarray(u))
    grad = jax.grad(lambda d, u: scatter_nd(d, i, u, reduction="mul").sum(), argnums=(0, 1))(d, u)
    assert all(_on(g, gpu) for g in grad)
    # d/d_updates of data[t] * u1 * u2: data[t] times the other update; rows without updates: 1
    assert np.allclose(np.asarray(grad[0])[0], 1.0) and np.allclose(np.asarray(grad[1])[0], data[1] * updates[1])


# ---- the GPU branches, on the CPU (CI) ---------------------------------------------------------


NEWEST_CPU = [s for s in NEWEST if s.op_type != "Scatter"]  # Scatter-9 is ScatterElements' code


def test_gpu_branches_on_the_cpu(monkeypatch):
    torch = pytest.importorskip("torch", reason="torch not installed")
    jax = pytest.importorskip("jax", reason="jax not installed")
    import gather_scatter.backends.jax as jax_backend
    import gather_scatter.backends.torch as torch_backend

    calls = _spy_rounds(monkeypatch)
    monkeypatch.setattr(torch_backend, "_on_cpu", lambda t: False)
    failures, compared = _torch_failures(torch, "cpu", NEWEST_CPU)
    assert not failures, f"torch: {len(failures)} of {compared} differ: {failures[:6]}"
    assert "TorchBackend" in calls
    monkeypatch.setattr(jax_backend, "_on_cpu", lambda a: False)
    cpu = jax.devices("cpu")[0]
    with jax.enable_x64(True):
        failures, compared, _ = _jax_failures(jax, cpu, NEWEST_CPU, jit=False)
    assert not failures, f"jax: {len(failures)} of {compared} differ: {failures[:6]}"
    assert "JaxBackend" in calls
    for op in ("ScatterND", "ScatterElements"):
        inputs = _duplicates(op, "add", np.dtype(np.float16))
        kernel = scatter_nd if op == "ScatterND" else scatter_elements
        expected = kernel(*inputs, reduction="add")
        with jax.enable_x64(True):
            got = kernel(*[_to_jax(jax, cpu, a) for a in inputs], reduction="add")
        assert same_bits(expected, np.asarray(got))
        got = kernel(*[_to_torch(torch, "cpu", a) for a in inputs], reduction="add")
        assert same_bits(expected, Library("torch").to_numpy(got, expected.dtype))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_signed_zero_ties_as_numpy_on_the_cpu(dtype, monkeypatch):
    """-0.0 against 0.0 in max/min: NumPy's loops (and the NumPy kernels) take the update on a
    tie, float16's keeps the held value. The libraries' own max/min keep the held value (ATen)
    or order -0.0 below 0.0 (XLA), and the rounds kept it too: each path, on the CPU, must give
    NumPy's bits (the GPU runs above meet these ties in their random cases)."""
    torch = pytest.importorskip("torch", reason="torch not installed")
    jax = pytest.importorskip("jax", reason="jax not installed")
    import gather_scatter.backends.jax as jax_backend
    import gather_scatter.backends.torch as torch_backend

    dt = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    data = np.array([-0.0, 0.0, -0.0, 0.0, -1.0, 1.0, -0.0, 0.0], dt)
    # element e gets updates[e] and, for e < 4, a second one: zeros of each sign after ties
    updates = np.array([0.0, -0.0, -0.0, 0.0, 0.0, -0.0, 1.0, -1.0, -0.0, 0.0, 0.0, -0.0], dt)
    indices = np.array([0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3])
    cpu = jax.devices("cpu")[0]
    for reduction in ("max", "min"):
        for op in ("ScatterND", "ScatterElements"):
            kernel = scatter_nd if op == "ScatterND" else scatter_elements
            idx = indices[:, None] if op == "ScatterND" else indices
            expected = kernel(data, idx, updates, reduction=reduction)
            for rounds in (False, True):
                with monkeypatch.context() as m:
                    if rounds:
                        m.setattr(torch_backend, "_on_cpu", lambda t: False)
                        m.setattr(jax_backend, "_on_cpu", lambda a: False)
                    got = kernel(*[_to_torch(torch, "cpu", a) for a in (data, idx, updates)], reduction=reduction)
                    assert same_bits(expected, Library("torch").to_numpy(got, dt)), ("torch", op, reduction, rounds)
                    with jax.enable_x64(True):
                        arrays = [jax.device_put(a, cpu) for a in (data, idx, updates)]
                        got = kernel(*arrays, reduction=reduction)
                        assert same_bits(expected, np.asarray(got)), ("jax", op, reduction, rounds)
                        jitted = jax.jit(lambda d, i, u, k=kernel, r=reduction: k(d, i, u, reduction=r))
                        assert same_bits(expected, np.asarray(jitted(*arrays))), ("jax jit", op, reduction)
            if dt.name in ("float32", "float64"):
                strict = pytest.importorskip("array_api_strict", reason="array-api-strict not installed")
                got = kernel(*[strict.asarray(a) for a in (data, idx, updates)], reduction=reduction)
                assert same_bits(expected, np.asarray(got._array)), ("strict", op, reduction)


def test_case_matrix_covers_every_version():
    made = cases(SPECS)
    assert {c.spec.name for c in made} == {s.name for s in SPECS}
    reductions = {c.attrs.get("reduction") for c in made}
    assert reductions >= {"none", "add", "mul", "max", "min"}
    assert {c.inputs[0].dtype for c in made} == set(DTYPES.values())
    assert {c.inputs[c.index_at].dtype.name for c in made if c.inputs[c.index_at] is not None} == {"int32", "int64"}
    assert any(c.attrs.get("batch_dims") for c in made) and any(c.attrs.get("mode") == "circular" for c in made)


def test_comparison_tolerates_only_the_documented_order():
    expected = np.array([1.0, np.nan, -0.0, 3.0], np.float16)
    near = expected.copy()
    near[0] = np.nextafter(near[0], np.float16(2))
    assert _compare(expected, expected.copy(), tolerant=False) == (None, False)
    assert _compare(expected, near, tolerant=True) == (None, True)
    assert _compare(expected, near, tolerant=False)[0].startswith("bits differ (largest difference 0.000976")
    far = near.copy()
    far[3] = 4.0
    assert _compare(expected, far, tolerant=True)[0] is not None
    moved = expected.copy()
    moved[1], moved[3] = 3.0, np.nan
    assert "NaN at other places" in _compare(expected, moved, tolerant=True)[0]
    signed = expected.copy()
    signed[2] = 0.0
    assert _compare(expected, signed, tolerant=False)[0].endswith("1 zero signs)")
