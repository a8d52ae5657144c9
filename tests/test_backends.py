"""Every operator version through PyTorch, JAX and the generic array-API backend (array-api-strict):
the random cases of ``check.cases`` bit for bit against the NumPy path, duplicates and
reductions included; the same errors (class, message, fields) for the invalid cases and the
error table; the library rule for mixed inputs; ``out=``; and the NumPy path untouched."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from backends import NAMES, Library, library, same_bits
from error_check import assert_error, raised, same_error
from strategies import more_invalid_cases

from gather_scatter import (
    DTypeError,
    GatherScatterError,
    ShapeError,
    gather,
    gather_nd,
    run_node,
    scatter_elements,
    scatter_nd,
    tensor_scatter,
)
from gather_scatter.check.cases import invalid_cases, valid_cases
from gather_scatter.kernels import numpy_paths
from gather_scatter.rules.versions import SWEPT


@pytest.fixture(params=NAMES)
def lib(request):
    with library(request.param) as held:  # JAX: x64 on for this test only
        yield held


SPECS = sorted(SWEPT.values(), key=lambda s: (s.domain, s.op_type, s.since_version))


def _run(spec, inputs, attrs):
    return run_node(spec.op_type, inputs, attrs, opset=spec.since_version, domain=spec.domain)


def _converted(lib, inputs, keep_numpy_indices=False):
    out = []
    for i, value in enumerate(inputs):
        if keep_numpy_indices and i == 1:
            out.append(value)
        else:
            out.append(lib.convert(value))
    return out


def test_valid_cases_are_bitwise_the_numpy_results(lib):
    # The kernels on their NumPy paths (numpy_paths: the same bits, which the kernels' own tests
    # check against the compiled loops): under the test process's EAGER, these ~1,500 small
    # cases of every operator and type compiled ~100 signatures (221 of this test's 225 s in CI)
    with numpy_paths():
        compared, failures = _compare_valid_cases(lib)
    assert not failures, f"{len(failures)} of {compared} differ, e.g. {failures[:3]}"
    assert compared > {"strict": 300, "jax": 500}.get(lib.name, 1500), compared


def _compare_valid_cases(lib) -> tuple[int, list[str]]:
    compared, failures = 0, []
    for n, spec in enumerate(SPECS):
        rng = np.random.default_rng(1000 + n)
        # JAX compiles each operator once per shape (~0.1 s): one case per type x attribute combination
        per_combination = 1 if lib.name == "jax" else 3
        for i, case in enumerate(valid_cases(spec, rng, per_combination=per_combination)):
            if not all(lib.supports(a) for a in case.inputs if a is not None):
                continue
            expected = _run(spec, case.inputs, case.attrs)
            inputs = _converted(lib, case.inputs, keep_numpy_indices=i % 2 == 1)  # mixed: NumPy indices
            actual = lib.to_numpy(_run(spec, inputs, case.attrs), expected.dtype)
            compared += 1
            if expected.dtype.kind == "c" and case.attrs.get("reduction") == "mul":
                # NumPy multiplies complex numbers with fused multiply-adds where the CPU has them
                # (so its own bits depend on the machine); the libraries round each product.
                if not np.allclose(expected, actual, rtol=1e-6, equal_nan=True):
                    failures.append(f"{spec.name}: {case.describe()}")
            elif not same_bits(expected, actual):
                failures.append(f"{spec.name}: {case.describe()}")
    return compared, failures


@pytest.mark.parametrize("op", ["ScatterND", "ScatterElements"])
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_many_duplicates_apply_in_row_major_order(lib, op, reduction):
    """400 updates on each of a few targets: float sums and products depend on the order."""
    rng = np.random.default_rng(7)
    dtypes = ["float32", "float64"] if lib.name == "strict" else ["float16", "bfloat16", "float32", "float64"]
    import ml_dtypes

    for name in dtypes:
        dtype = np.dtype(getattr(ml_dtypes, name, None) or name)
        data = rng.standard_normal((6, 3)).astype(np.float32).astype(dtype)
        if reduction == "mul":  # products that neither overflow nor vanish
            values = (1 + rng.standard_normal((2400, 3)) / 64).astype(np.float32).astype(dtype)
        else:
            values = rng.standard_normal((2400, 3)).astype(np.float32).astype(dtype)
        values[::37] = -0.0
        if op == "ScatterND":
            inputs = [data, rng.integers(-6, 6, size=(2400, 1)), values]
        else:
            inputs = [data, rng.integers(-6, 6, size=(2400, 3)), values]
        kernel = scatter_nd if op == "ScatterND" else scatter_elements
        expected = kernel(*inputs, reduction=reduction)
        actual = lib.to_numpy(kernel(*_converted(lib, inputs), reduction=reduction), dtype)
        assert same_bits(expected, actual), name


def test_standard_rounds_match_on_torch(monkeypatch):
    """The deterministic rounds that scatters use on CUDA/MPS, run on the CPU: same bits."""
    torch_lib = Library("torch")
    from gather_scatter.backends.array_api import ArrayAPIBackend
    from gather_scatter.backends.torch import TorchBackend

    monkeypatch.setattr(TorchBackend, "scatter_rows", ArrayAPIBackend.scatter_rows)
    rng = np.random.default_rng(3)
    for reduction in ["none", "add", "mul", "max", "min"]:
        for dtype in [np.float16, np.float32, np.int32]:
            data = (rng.standard_normal((5, 4)) * 4).astype(dtype)
            indices = rng.integers(-5, 5, size=(300, 1))
            updates = (rng.standard_normal((300, 4)) * (0.05 if reduction == "mul" else 4) + (reduction == "mul")
                       ).astype(dtype)
            expected = scatter_nd(data, indices, updates, reduction=reduction)
            got = scatter_nd(*_converted(torch_lib, [data, indices, updates]), reduction=reduction)
            assert same_bits(expected, torch_lib.to_numpy(got, expected.dtype)), (reduction, dtype)


def test_invalid_cases_raise_the_numpy_error(lib):
    compared, failures = 0, []
    for n, spec in enumerate(SPECS):
        rng = np.random.default_rng(2000 + n)
        # JAX compiles per shape and reruns a failing call op by op to name the position: two types
        chosen = ("float", "int64") if lib.name == "jax" else ("float", "int64", "bool", "float16")
        types = [t for t in chosen if t in spec.data_types]
        for type_name in types:
            for index_dtype in sorted(spec.index_types):
                for source in (invalid_cases, more_invalid_cases):
                    for kind, case, cls in source(spec, rng, type_name, index_dtype):
                        arrays = [a for a in case.inputs if isinstance(a, np.ndarray)]
                        if not all(lib.supports(a) for a in arrays) or not isinstance(case.inputs[0], np.ndarray):
                            continue
                        expected = raised(lambda: _run(spec, case.inputs, case.attrs))
                        actual = raised(lambda: _run(spec, _converted(lib, case.inputs), case.attrs))
                        compared += 1
                        if not same_error(expected, actual):
                            failures.append(f"{spec.name} {kind}: numpy {expected!r} vs {actual!r}")
    assert not failures, f"{len(failures)} of {compared} differ: {failures[:4]}"
    assert compared > (100 if lib.name == "jax" else 150), compared


def _error_rows():
    from test_errors import TABLE

    return TABLE


@pytest.mark.parametrize("row", [pytest.param(r.values, id=r.id) for r in _error_rows()])
def test_error_table(lib, row):
    op, inputs, attrs, cls, pattern, fields = row
    if not isinstance(inputs[0], np.ndarray) or inputs[0].ndim == 0 and lib.name != "torch":
        pytest.skip("data is not an array of the library")
    if not all(lib.supports(a) for a in inputs if isinstance(a, np.ndarray)):
        pytest.skip(f"{lib.name} has no such dtype")
    try:
        converted = _converted(lib, inputs)
    except (TypeError, ValueError) as exc:
        pytest.skip(f"{lib.name} cannot hold this input: {exc}")
    kernel = {"Gather": gather, "GatherND": gather_nd, "ScatterND": scatter_nd}[op]
    with pytest.raises(GatherScatterError) as info:
        kernel(*converted, **attrs)
    assert_error(info.value, cls, pattern, fields)


def test_mixed_libraries_follow_data(lib):
    data = np.arange(12.0).reshape(3, 4)
    indices = np.array([2, 0])
    # NumPy indices, lists and scalars go to data's library and device.
    for idx in (indices, [2, 0]):
        assert same_bits(gather(data, indices), lib.to_numpy(gather(lib.convert(data), idx), data.dtype))
    # An array of another library is refused, either way round.
    with pytest.raises(DTypeError, match=r"Gather-13: indices is a .* but data is a numpy\.ndarray; data decides"):
        gather(data, lib.convert(indices))
    converted = lib.convert(data)
    message = r"Gather-13: indices is a .* but data is a .*; pass arrays of one library"
    with library("jax" if lib.name != "jax" else "torch", x64=False) as other:  # JAX as users run it
        with pytest.raises(DTypeError, match=message):
            gather(converted, other.convert(indices))


def test_list_updates_must_fit_data_type(lib):
    data = lib.convert(np.zeros(4, dtype=np.int32))
    with pytest.raises(DTypeError, match=r"updates\[1\] = 2\.5 does not fit exactly in int32"):
        scatter_nd(data, np.array([[0], [1]]), [1, 2.5])


def test_out_is_written_for_torch_and_refused_for_immutable_arrays(lib):
    data = np.arange(6.0).reshape(2, 3)
    indices = np.array([[1], [0]])
    updates = np.full((2, 3), 7.0)
    expected = scatter_nd(data, indices, updates, reduction="add")
    d = lib.convert(data)
    if lib.name != "torch":
        with pytest.raises(DTypeError, match=r"ScatterND-18: out= cannot be written for .* \(immutable arrays\)"):
            scatter_nd(d, indices, updates, out=d)
        return
    torch = lib.mod
    out = torch.empty((2, 3), dtype=torch.float64)
    assert scatter_nd(d, indices, updates, reduction="add", out=out) is out
    assert same_bits(expected, out.numpy())
    assert scatter_nd(d, indices, updates, reduction="add", out=d) is d  # in place
    assert same_bits(expected, d.numpy())
    with pytest.raises(ShapeError, match=r"out has shape \(3, 2\) but the result has shape \(2, 3\)"):
        scatter_nd(d, indices, updates, out=torch.empty((3, 2), dtype=torch.float64))
    with pytest.raises(DTypeError, match=r"out has dtype float32 but the result has dtype float64"):
        scatter_nd(d, indices, updates, out=torch.empty((2, 3), dtype=torch.float32))
    with pytest.raises(GatherScatterError, match="out shares memory with indices"):
        g = torch.arange(4)
        gather(torch.arange(10), g, out=g)


def test_inputs_are_never_changed(lib):
    rng = np.random.default_rng(5)
    data = rng.standard_normal((4, 3))
    indices = np.array([[1], [1], [-1]])
    updates = rng.standard_normal((3, 3))
    d, i, u = _converted(lib, [data, indices, updates])
    for reduction in ("none", "add", "mul", "max", "min"):
        scatter_nd(d, i, u, reduction=reduction)
    tensor_scatter(d[None] if lib.name != "strict" else lib.mod.reshape(d, (1, 4, 3)), u[None] if lib.name != "strict"
                   else lib.mod.reshape(u, (1, 3, 3)), mode="circular", axis=1)
    assert same_bits(data, lib.to_numpy(d, data.dtype)) and same_bits(updates, lib.to_numpy(u, updates.dtype))


def test_importing_and_numpy_calls_load_no_backend():
    code = ("import sys, numpy as np, gather_scatter as gs; gs.gather(np.arange(3), np.array([1]));"
            "gs.scatter_nd(np.zeros(3), np.array([[1]]), np.ones(1)); "
            "print(sorted(m for m in ('torch', 'jax', 'array_api_compat', 'array_api_strict', 'dask', 'zarr') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
