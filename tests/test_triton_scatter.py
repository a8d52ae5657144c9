"""The Triton scatter fold of the torch backend (backends/_torch_triton.py), bitwise the NumPy kernels.

Every case of ``triton_cases.cases()`` (each dtype, reduction, row width 1/5/64/300, duplicate
depth 1/3/200, ScatterND and ScatterElements, NaN payloads, -0.0/0.0, +-inf, ties) runs on two
devices, each skipping with a reason where it cannot:

- ``interpreter``: CPU tensors through Triton's interpreter, in one subprocess for all cases
  (Triton chooses its interpreter for a whole process, when it is first imported:
  ``triton_cases.py`` says why), so no other test's process is affected;
- ``cuda``: the compiled kernel, in this process, where ``torch.cuda.is_available()``.

Each goes through the whole torch backend (``scatter_nd``/``scatter_elements``; on the CPU with
``_on_cpu`` patched to False so that the GPU branch runs) and asserts that the fold ran, its
bits (NaN matches NaN for add/mul, whose NaN payload is the hardware's; max/min only select, so
their NaN payloads must match too) and the dispatch rules (the rounds where an input requires
grad, for complex, reduction 'none', or when chosen).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import triton_cases
from backends import same_bits

torch = pytest.importorskip("torch", reason="torch not installed (pip install 'gather_scatter[torch]')")
pytest.importorskip("triton", reason="triton not installed (pip install triton)")

import gather_scatter.backends.torch as torch_backend  # noqa: E402 (after the skips)
from gather_scatter import scatter_elements, scatter_nd  # noqa: E402
from gather_scatter.backends import _torch_triton  # noqa: E402

CASES = triton_cases.cases()
HERE = pathlib.Path(__file__).parent


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    """Every case's result from Triton's interpreter, run once in a subprocess (~20 s), and which path ran."""
    path = tmp_path_factory.mktemp("triton") / "results.npz"
    src = pathlib.Path(torch_backend.__file__).parents[2]
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(src), str(HERE)])}
    done = subprocess.run(
        [sys.executable, "-W", "ignore", str(HERE / "triton_cases.py"), str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(path) as saved:
        return {name: saved[name] for name in saved.files}


def _result(device, case, interpreted_results):
    if device == "interpreter":
        expected = triton_cases.expected(case)
        key = triton_cases.case_id(case)
        return interpreted_results[key].view(expected.dtype).reshape(expected.shape), key in interpreted_results["ran"]
    return triton_cases.run(case, "cuda")


@pytest.mark.parametrize("case", CASES, ids=triton_cases.case_id)
@pytest.mark.parametrize("device", ["interpreter", "cuda"])
def test_fold_is_bitwise_numpy(device, case, request):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device (torch.cuda.is_available() is False)")
    results = request.getfixturevalue("interpreted") if device == "interpreter" else None
    expected = triton_cases.expected(case)
    got, ran = _result(device, case, results)
    assert ran, "the Triton fold did not run"
    assert same_bits(expected, got), (expected, got)
    if case[2] in ("max", "min") or expected.dtype.kind not in "fV":  # only selections: NaN payloads too
        width = f"u{expected.dtype.itemsize}"
        assert np.array_equal(expected.view(width), got.view(width)), (expected, got)


def test_torch_compile_runs_the_fold_as_a_custom_op(interpreted):
    """fullgraph=True compiles (no graph break): the fold is gather_scatter::triton_scatter, run on
    the real tensors; its bits are eager's. (In the interpreter's process; on CUDA the same op.)"""
    expected = triton_cases.expected(triton_cases.COMPILED)
    got = interpreted["compiled"].view(expected.dtype).reshape(expected.shape)
    assert "compiled" in interpreted["ran"] and same_bits(expected, got)


def test_rows_wider_than_a_launch_take_several(interpreted):
    """Columns past CUDA's 65,535 programs a launch go in more launches (here one block of 512 each)."""
    for name, case in (("split", triton_cases.SPLIT), ("split_max", triton_cases.SPLIT_MAX)):
        expected = triton_cases.expected(case)
        got = interpreted[name].view(expected.dtype).reshape(expected.shape)
        assert name in interpreted["ran"] and same_bits(expected, got), name


def test_order_free_reductions_take_atomics_the_others_fold(interpreted):
    """Max/min and integer add take _torch_triton_atomics (flat in the depth); float add/mul and integer mul the
    ordered fold (bool's add/mul are uint8's max/min)."""
    selected = set(interpreted["selected"].tolist())
    for case in CASES:
        integer = np.dtype(triton_cases.np_dtype(case[1])).kind in "iub"
        atomic = case[2] in ("max", "min") or case[1] == "bool" or (case[2] == "add" and integer)
        assert (triton_cases.case_id(case) in selected) == atomic, case


def test_the_cases_meet_what_they_test():
    """Duplicates of every depth, and the special values, are really in the inputs."""
    depths = {case[4] for case in CASES}
    assert {1, 3, 200} <= depths and {1, 5, 64, 300} <= {case[3] for case in CASES}
    for name in ("float16", "bfloat16", "float32"):
        for reduction in ("max", "add"):
            data, _, updates = triton_cases.inputs(("ScatterND", name, reduction, 64, 3))
            values = np.concatenate([data.reshape(-1), updates.reshape(-1)])
            bits = values.view(f"u{values.dtype.itemsize}")
            zero, negative_zero = bits == 0, bits == 1 << (8 * values.dtype.itemsize - 1)
            assert np.isinf(values).any() and zero.any() and negative_zero.any(), name
            assert len({int(b) for b in bits[np.isnan(values)]}) > 2, name  # NaNs of several payloads and signs


# ---- which path runs ---------------------------------------------------------------------------


@pytest.fixture
def spied(monkeypatch):
    """The GPU branch on CPU tensors, with the fold replaced by a spy that records its calls and runs the rounds."""
    calls = []
    monkeypatch.setattr(torch_backend, "_on_cpu", lambda t: False)
    monkeypatch.setattr(_torch_triton, "runs_on", lambda t: True)

    def fold(data, targets, updates, reduction):
        calls.append((data.dtype, reduction))
        backend = torch_backend.TorchBackend.__mro__[1]  # ArrayAPIBackend: the rounds
        from gather_scatter.rules.versions import Reduction

        return backend.scatter_rows(_backend(data), data, targets, updates, Reduction(reduction))

    monkeypatch.setattr(_torch_triton, "_scatter", fold)
    return calls


def _backend(data):
    from gather_scatter.rules.versions import REGISTRY

    return torch_backend.TorchBackend(REGISTRY[("", "ScatterND", 18)], None, data, "data")


def _inputs(dtype=torch.float32):
    data = torch.arange(8, dtype=torch.float32).reshape(4, 2).to(dtype)
    return data, torch.tensor([[1], [3], [1]]), torch.ones(3, 2).to(dtype)


def test_reductions_take_the_fold_none_and_complex_the_rounds(spied):
    data, indices, updates = _inputs()
    assert torch.equal(scatter_nd(data, indices, updates, reduction="add"), torch.tensor(
        [[0.0, 1], [4, 5], [4, 5], [7, 8]]))  # fmt: skip
    assert spied == [(torch.float32, "add")]
    scatter_nd(data, indices, updates, reduction="none")
    scatter_nd(data.to(torch.complex64), indices, updates.to(torch.complex64), reduction="add")
    assert spied == [(torch.float32, "add")]
    scatter_elements(torch.zeros(3), torch.tensor([2, 2, 0]), torch.tensor([1.0, 0, 1]), reduction="max")
    assert spied[-1] == (torch.float32, "max")


def test_bool_and_unsigned_take_the_fold_through_their_transforms(spied):
    data, updates = torch.tensor([False, True, False]), torch.tensor([True, False, False])
    got = scatter_nd(data, torch.tensor([[0], [0], [2]]), updates, reduction="mul")
    assert got.tolist() == [False, True, False] and spied[-1] == (torch.uint8, "min")
    data = torch.tensor([1, 65535, 7], dtype=torch.uint16)
    got = scatter_nd(data, torch.tensor([[1], [2]]), torch.tensor([3, 65534], dtype=torch.uint16), reduction="max")
    assert got.to(torch.int32).tolist() == [1, 65535, 65534] and spied[-1] == (torch.int16, "max")


def test_grad_or_the_setting_takes_the_rounds(spied, monkeypatch):
    data, indices, updates = _inputs()
    table = data.clone().requires_grad_()
    scatter_nd(table, indices, updates, reduction="mul").sum().backward()
    assert spied == [] and torch.equal(table.grad[1], torch.ones(2))  # d/d data[1] of data[1] * 1 * 1
    with torch.no_grad():
        scatter_nd(table, indices, updates, reduction="mul")
    assert len(spied) == 1
    assert torch_backend.set_gpu_scatter("rounds") == "triton"
    try:
        scatter_nd(data, indices, updates, reduction="add")
        assert len(spied) == 1
    finally:
        assert torch_backend.set_gpu_scatter("triton") == "rounds"
    with pytest.raises(ValueError, match="method must be one of"):
        torch_backend.set_gpu_scatter("atomics")


def test_the_cpu_path_never_takes_the_fold(monkeypatch):
    monkeypatch.setattr(_torch_triton, "runs_on", lambda t: True)
    monkeypatch.setattr(_torch_triton, "_scatter", lambda *a: pytest.fail("the fold ran on the CPU path"))
    data, indices, updates = _inputs()
    assert torch.equal(scatter_nd(data, indices, updates, reduction="max")[1], torch.tensor([2.0, 3]))


def test_the_environment_variable_chooses_the_rounds():
    code = "import gather_scatter.backends._torch_triton as t; print(t._gpu_scatter[0])"
    env = {**os.environ, "GATHER_SCATTER_GPU_SCATTER": "rounds",
           "PYTHONPATH": str(pathlib.Path(torch_backend.__file__).parents[2])}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "rounds", done.stderr


def test_without_triton_nothing_takes_the_fold(monkeypatch):
    monkeypatch.setattr(_torch_triton, "triton", None)
    assert not _torch_triton.runs_on(torch.zeros(1)) and not _torch_triton.covers(torch.float32, "add")
    with pytest.raises(RuntimeError, match="needs triton"):
        _torch_triton.scatter_reduce_rows(torch.zeros(2, 1), torch.zeros(1, dtype=torch.int64), torch.ones(1, 1), "+")


def test_what_the_fold_refuses_and_its_launch_shapes():
    one = torch.zeros(1, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"got 'none' on torch\.float32"):
        _torch_triton.scatter_reduce_rows(torch.zeros(2, 1), one, torch.ones(1, 1), "none")
    assert not _torch_triton.covers(torch.complex64, "add") and _torch_triton.covers(torch.bfloat16, "min")
    assert [_torch_triton.launch_shape(w) for w in (1, 5, 64, 300, 4096)] == [
        (1024, 1), (128, 8), (16, 64), (2, 512), (2, 512)]  # fmt: skip
