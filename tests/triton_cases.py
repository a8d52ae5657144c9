"""The cases of tests/test_triton_scatter.py, and their runner for Triton's interpreter.

A case is (operator, dtype, reduction, width, depth): ``depth`` updates onto each of a few
targets, rows of ``width`` elements (ScatterND) or a ``(targets, width)`` data with elements
scattered along axis 0 (ScatterElements), inputs made from a seed of the case's name, floats
with NaN (payloads of both signs), -0.0/0.0, +-inf and ties among them.

Triton picks its interpreter when it decorates its own library (``TRITON_INTERPRET=1`` before
triton's first import), for the whole process: so the CPU runs happen here, in a process of
their own, ``python tests/triton_cases.py OUT.npz`` with that variable set. They go through
the whole torch backend (``scatter_nd``/``scatter_elements`` on CPU tensors, its ``_on_cpu``
patched to False, so that the GPU branch runs), and each result is saved with whether the
Triton fold ran for it.
"""

from __future__ import annotations

import contextlib
import sys
import zlib

import ml_dtypes
import numpy as np

DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "int32", "int64", "uint8", "bool",
          "uint16", "uint32", "uint64"]  # fmt: skip
REDUCTIONS = ["add", "mul", "max", "min"]
# (width, depth): every width class and duplicate depth, not their whole product (the interpreter is slow)
SHAPES = [(1, 1), (5, 3), (64, 3), (300, 3)]
DEEP = {"float32", "float16", "bfloat16", "int8", "uint64"}  # also (1, 200): 200 updates on each target
TARGETS = 3


def cases() -> list[tuple[str, str, str, int, int]]:
    """Every (op, dtype, reduction, width, depth) tested."""
    out = []
    for dtype in DTYPES:
        for reduction in REDUCTIONS:
            for width, depth in SHAPES + ([(1, 200)] if dtype in DEEP else []):
                out.append(("ScatterND", dtype, reduction, width, depth))
            out.append(("ScatterElements", dtype, reduction, 4, 20))
    return out


def case_id(case) -> str:
    return "-".join(map(str, case))


def np_dtype(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name) if name == "bfloat16" else name)


_NANS = np.array([0x7FC00000, 0x7FC00123, 0xFFC00077, 0x7F800001], np.uint32).view(np.float32)
_SPECIAL = np.concatenate([_NANS, np.array([0.0, -0.0, np.inf, -np.inf, 1.0, 1.0], np.float32)])


def inputs(case) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, indices, updates) of ``case``, the same in every process."""
    op, name, reduction, width, depth = case
    rng = np.random.default_rng(zlib.crc32(case_id(case).encode()))
    dt = np_dtype(name)
    n = TARGETS * depth
    rows, targets = (TARGETS, width), rng.permutation(np.repeat(np.arange(TARGETS), depth))
    ushape = (n, width)
    if op == "ScatterElements":  # each column's elements get depth updates, in a shuffled order
        targets = np.stack([rng.permutation(targets) for _ in range(width)], axis=1)
    if dt.kind == "b":
        data, updates = rng.random(rows) < 0.5, rng.random(ushape) < 0.5
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        data = rng.integers(info.min, info.max, rows, dtype=dt, endpoint=True)
        updates = rng.integers(info.min, info.max, ushape, dtype=dt, endpoint=True)
        if reduction in ("max", "min"):
            updates[rng.random(ushape) < 0.2] = info.max if reduction == "max" else info.min
    else:
        scale = 0.05 if reduction == "mul" else 3.0
        data = rng.standard_normal(rows).astype(np.float32)
        updates = rng.standard_normal(ushape).astype(np.float32) * scale + (1.0 if reduction == "mul" else 0.0)
        for array, share in ((data, 0.1), (updates, 0.03 if depth > 10 else 0.2)):
            hit = rng.random(array.shape) < share
            array[hit] = rng.choice(_SPECIAL, hit.sum())
        updates[rng.random(ushape) < 0.1] = 0.0
        updates[rng.random(ushape) < 0.1] = -0.0
        data, updates = _cast(data, dt), _cast(updates, dt)
    indices = targets[:, None] if op == "ScatterND" else targets
    return data, indices, updates


def _cast(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """float32 ``x`` as ``dt``; a NaN keeps its sign and, in float16, low payload bits (NumPy's cast may not)."""
    with np.errstate(invalid="ignore"):
        out = x.astype(dt)
    if dt.itemsize == 2:
        bits, nan = x.view(np.uint32), np.isnan(x)
        # float16: sign, quiet, low payload bits; bfloat16: the top bits, quiet, and low payload bits
        half = (bits >> 16) & 0x8000 | 0x7E00 | bits & 0x1FF if dt == np.float16 else bits >> 16 | 0x40 | bits & 0x3F
        out.view(np.uint16)[nan] = half[nan].astype(np.uint16)
    return out


def expected(case) -> np.ndarray:
    """The NumPy kernel's result (on its NumPy path: the compiled loops' bits, with no compile)."""
    from gather_scatter import scatter_elements, scatter_nd
    from gather_scatter.kernels import numpy_paths

    data, indices, updates = inputs(case)
    with numpy_paths():
        if case[0] == "ScatterND":
            return scatter_nd(data, indices, updates, reduction=case[2])
        return scatter_elements(data, indices, updates, axis=0, reduction=case[2])


@contextlib.contextmanager
def _folds():
    """The dtypes of the Triton fold's calls within the block (``_torch_triton._scatter`` spied)."""
    from gather_scatter.backends import _torch_triton

    calls: list = []
    fold = _torch_triton._scatter

    def spy(*args):
        calls.append(args[0].dtype)
        return fold(*args)

    _torch_triton._scatter = spy
    try:
        yield calls
    finally:
        _torch_triton._scatter = fold


def run(case, device: str):
    """The torch backend's result on ``device`` (numpy), and whether the Triton fold ran for it."""
    import torch

    from gather_scatter import scatter_elements, scatter_nd

    with _folds() as calls:
        data, indices, updates = (_torch(a, device) for a in inputs(case))
        if case[0] == "ScatterND":
            got = scatter_nd(data, indices, updates, reduction=case[2])
        else:
            got = scatter_elements(data, indices, updates, axis=0, reduction=case[2])
    assert got.device.type == torch.device(device).type
    got = got.cpu()
    if got.dtype == torch.bfloat16:
        return got.view(torch.int16).numpy().view(np_dtype("bfloat16")), bool(calls)
    return got.numpy(), bool(calls)


def _torch(a: np.ndarray, device: str):
    import torch

    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16).to(device)
    return torch.from_numpy(a.copy()).to(device)


def main(path: str) -> None:
    """Run every case on CPU tensors through the GPU branch (in Triton's interpreter); save them to ``path``."""
    import gather_scatter.backends.torch as torch_backend
    from gather_scatter.backends import _torch_triton

    assert _torch_triton.interpreting(), "run with TRITON_INTERPRET=1"
    torch_backend._on_cpu = lambda t: False
    results, ran, selected = {}, [], []
    select = _torch_triton.reduce_by_atomics
    selects: list = []
    _torch_triton.reduce_by_atomics = lambda *args: selects.append(args[7]) or select(*args)  # the order-free reductions
    for case in cases():
        del selects[:]
        results[case_id(case)], fold = run(case, "cpu")
        if fold:
            ran.append(case_id(case))
        if selects:
            selected.append(case_id(case))
    _torch_triton.MAX_COLUMN_PROGRAMS = 1  # rows wider than a program's block: one launch per block
    for name, case in (("split", SPLIT), ("split_max", SPLIT_MAX)):
        results[name], fold = run(case, "cpu")
        if fold:
            ran.append(name)
    results["compiled"], fold = compiled()
    if fold:
        ran.append("compiled")
    np.savez(path, ran=np.array(ran), selected=np.array(selected), **{k: v.view(np.uint8) for k, v in results.items()})


COMPILED = ("ScatterND", "float32", "add", 5, 3)  # the case run under torch.compile too
SPLIT = ("ScatterND", "bfloat16", "add", 1100, 3)  # run in launches of one column block each
SPLIT_MAX = ("ScatterND", "float16", "max", 1100, 3)  # the same for max's keyed atomics


def compiled():
    """``COMPILED`` under ``torch.compile(fullgraph=True)`` (backend 'eager': dynamo's graph, no
    compiler), as numpy, and whether the fold ran (as the custom op gather_scatter::triton_scatter)."""
    import torch

    from gather_scatter import scatter_nd

    with _folds() as calls:
        run = torch.compile(lambda d, i, u: scatter_nd(d, i, u, reduction="add"), fullgraph=True, backend="eager")
        got = run(*(_torch(a, "cpu") for a in inputs(COMPILED)))
    return got.numpy(), bool(calls)


if __name__ == "__main__":
    main(sys.argv[1])
