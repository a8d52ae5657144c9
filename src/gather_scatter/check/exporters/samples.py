"""The torch operations that lower to ONNX's indexing family, and their sample inputs.

Each :class:`Operation` names a callable by its Python source (so that a standalone script can
define it the same way) and where its samples come from: PyTorch's own OpInfo samples
(``torch.testing._internal.common_methods_invocations``, where they exist and import: they need
``expecttest``), one OpInfo sample per other dtype the op takes, and our own samples of what users
send and OpInfo leaves out (negative, duplicate, empty and 0-d indices, broadcasting).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["OPERATIONS", "Operation", "Sample", "duplicate_targets", "samples"]

#: dtypes an ONNX graph and our evaluator hold, as torch names them (complex and float8 left out:
#: neither exporter lowers them).
DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


@dataclass(frozen=True)
class Operation:
    """One torch operation of the family.

    Attributes
    ----------
    name : str
        The ``--op`` name (``index_add``, ``getitem``, ``setitem_add``).
    call : str
        Python source that binds ``F``, the callable: an expression (``torch.index_add``) or a
        ``def F(...)`` (for writes, which clone first: an exported module must not mutate its input).
    opinfo : tuple of str
        OpInfo entries (``name`` or ``name.variant``) whose samples it takes.
    reduces : bool
        Its float result sums, multiplies or averages: compared within a tolerance, since torch
        may order the reduction differently from the spec's loop.
    writes : str or None
        How duplicate targets are found for a write without accumulation (torch's result is then
        unspecified): 'scatter', 'index_copy', 'index_put', 'put'; None where none are undefined.
    """

    name: str
    call: str
    opinfo: tuple[str, ...] = ()
    reduces: bool = False
    writes: str | None = None
    own: Callable[[], list[tuple[tuple, dict, str]]] = field(default=lambda: [], repr=False, compare=False)


@dataclass
class Sample:
    """One call: ``F(*args, **kwargs)``, tensors as torch tensors, the rest constants."""

    op: str
    args: tuple
    kwargs: dict
    note: str
    undefined: Any = None  # the elements written twice without accumulating (``duplicate_targets``), or None

    def variant(self) -> str:
        """Return what selects the lowering beside the op: the reduction and flags (``mean, include_self=False``)."""
        parts = [repr(a) for a in self.args if isinstance(a, str)]
        if self.op in ("put", "put_"):
            parts += [f"accumulate={a!r}" for a in self.args if isinstance(a, bool)]  # its positional flag
        parts += [f"{k}={v!r}" for k, v in sorted(self.kwargs.items()) if isinstance(v, str) or k in _FLAGS]
        return ", ".join(parts)


_FLAGS = ("accumulate", "include_self", "include_last_offset", "padding_idx")


def _t(values: Any, dtype: str = "float32") -> Any:
    import torch

    return torch.tensor(values, dtype=getattr(torch, dtype))


def _x(*shape: int, dtype: str = "float32") -> Any:
    """Return a tensor of distinct small values (exact in every dtype: a wrong element shows)."""
    import torch

    n = int(np.prod(shape))
    values = (np.arange(n) % 120 + 1).reshape(shape)
    if dtype == "bool":
        return torch.tensor(values % 2 == 1)
    return torch.tensor(values, dtype=getattr(torch, dtype))


def _setitem_source(op: str) -> str:
    return f"def F(x, index, value):\n    x = x.clone()\n    x[index] {op} value\n    return x\n"


def _own_getitem() -> list:
    i = _t([2, -1, 0, 2], "int64")
    return [
        ((_x(5, 3), i), {}, "x[i], negative and duplicate indices"),
        ((_x(5, 3), (i, _t([[0], [2], [1], [-3]], "int64"))), {}, "x[i, j], broadcast index tensors"),
        ((_x(4, 5), (slice(None), i)), {}, "x[:, i]"),
        ((_x(4, 5), (Ellipsis, _t(-2, "int64"))), {}, "x[..., i], 0-d index"),
        ((_x(4, 5), _t([], "int64")), {}, "x[i], empty index"),
        ((_x(3, 4), _t([[True, False, True, False]] * 3, "bool")), {}, "x[mask]"),
        ((_x(3, 4, 2), (_t([0, 2], "int64"), slice(None), _t([1, -1], "int64"))), {}, "x[i, :, j]"),
    ]


def _own_setitem() -> list:
    return [
        ((_x(5, 3), _t([3, -1, 0], "int64"), _x(3, 3)), {}, "x[i] = v, negative indices"),
        ((_x(5, 3), _t([1, 1, 4], "int64"), _x(3, 3)), {}, "x[i] = v, duplicate indices"),
        ((_x(4, 5), (slice(None), _t([0, -2], "int64")), _x(4, 2)), {}, "x[:, i] = v"),
        ((_x(4, 5), (_t([0, 3], "int64"), _t([1, -1], "int64")), _x(2)), {}, "x[i, j] = v"),
        ((_x(3, 4), _t([[True, False, True, False]] * 3, "bool"), _t(9.0)), {}, "x[mask] = v, 0-d value"),
        ((_x(5, 3), _t(-2, "int64"), _x(3)), {}, "x[i] = v, 0-d index"),
        ((_x(5, 3), _t([], "int64"), _x(0, 3)), {}, "x[i] = v, empty index"),
    ]


def _own_index_select() -> list:
    return [
        ((_x(5, 3), 0, _t([4, 4, 0, 2], "int64")), {}, "duplicate indices"),
        ((_x(3, 5), -1, _t([1, 3], "int64")), {}, "dim=-1"),
        ((_x(5, 3), 0, _t(3, "int64")), {}, "0-d index"),
        ((_x(5, 3), 0, _t([], "int64")), {}, "empty index"),
        ((_x(5, 3), 0, _t([1, 0], "int32")), {}, "int32 index"),
    ]


def _own_gather() -> list:
    return [
        ((_x(4, 3), 0, _t([[3, 3, 0], [1, 1, 1]], "int64")), {}, "duplicate indices, fewer rows"),
        ((_x(4, 3), 1, _t([[2], [0], [1], [2]], "int64")), {}, "dim=1, narrower"),
        ((_x(2, 3, 4), -1, _t([[[3, 0]], [[1, 1]]], "int64")), {}, "dim=-1, smaller other dims"),
    ]


def _own_take() -> list:
    return [
        ((_x(3, 4), _t([[0, -1], [11, -12]], "int64")), {}, "negative indices"),
        ((_x(3, 4), _t(-5, "int64")), {}, "0-d index"),
        ((_x(3, 4), _t([], "int64")), {}, "empty index"),
    ]


def _own_take_along_dim() -> list:
    return [
        ((_x(3, 4), _t([[0], [-1], [2]], "int64"), 1), {}, "negative indices, broadcast"),
        ((_x(3, 4), _t([[1, 1, 0, 2]], "int64"), 0), {}, "broadcast index rows"),
        ((_x(3, 4), _t([5, -1], "int64")), {}, "no dim (flattened)"),
    ]


def _own_scatter() -> list:
    return [
        ((_x(4, 3), 0, _t([[1, 3, 0], [2, 0, 3]], "int64"), _x(2, 3)), {}, "distinct targets"),
        ((_x(4, 3), 0, _t([[1, 1, 0], [1, 0, 3]], "int64"), _x(2, 3)), {}, "duplicate targets"),
        ((_x(4, 3), 1, _t([[2], [0]], "int64"), 7.0), {}, "value, smaller index"),
        ((_x(4, 3), -1, _t([[0, 2]], "int64"), _x(1, 2)), {}, "dim=-1"),
    ]


def _own_scatter_add() -> list:
    return [
        ((_x(4, 3), 0, _t([[1, 1, 0], [1, 0, 3], [1, 1, 1]], "int64"), _x(3, 3)), {}, "duplicate targets"),
        ((_x(4, 3), -1, _t([[2, 2, 2, 0]], "int64"), _x(1, 4)), {}, "dim=-1, wider index than data"),
    ]


def _own_scatter_reduce() -> list:
    index = _t([[1, 1, 0], [1, 0, 3], [1, 1, 1]], "int64")
    out = []
    for reduce, include_self in itertools.product(("sum", "prod", "mean", "amax", "amin"), (True, False)):
        out.append(((_x(4, 3), 0, index, _x(3, 3) - 4, reduce), {"include_self": include_self}, "duplicate targets"))
    out.append(((_x(4, 3, dtype="int64"), 0, index, _x(3, 3, dtype="int64"), "mean"), {}, "int64 mean"))
    return out


def _own_index_add() -> list:
    return [
        ((_x(4, 3), 0, _t([1, 1, 3, 1], "int64"), _x(4, 3)), {}, "duplicate indices"),
        ((_x(3, 4), 1, _t([0, -1], "int64"), _x(3, 2)), {"alpha": 2}, "negative index, alpha=2"),
        ((_x(4, 3), 0, _t([], "int64"), _x(0, 3)), {}, "empty index"),
    ]


def _own_index_copy() -> list:
    return [
        ((_x(4, 3), 0, _t([3, 0], "int64"), _x(2, 3)), {}, "distinct indices"),
        ((_x(4, 3), 0, _t([2, 2], "int64"), _x(2, 3)), {}, "duplicate indices"),
        ((_x(3, 4), 1, _t([1, 3], "int64"), _x(3, 2)), {}, "dim=1"),
    ]


def _own_index_fill() -> list:
    return [
        ((_x(4, 3), 0, _t([3, 3, -1], "int64"), -2.0), {}, "duplicate and negative indices"),
        ((_x(3, 4), -1, _t([1], "int64"), _t(5.0)), {}, "dim=-1, 0-d tensor value"),
    ]


def _own_index_put() -> list:
    i = _t([1, 3, 1], "int64")
    return [
        ((_x(4, 3), (i,), _x(3, 3)), {"accumulate": True}, "duplicate indices, accumulate"),
        ((_x(4, 3), (i,), _x(3, 3)), {"accumulate": False}, "duplicate indices"),
        ((_x(4, 3), (_t([0, -1], "int64"), _t([[2], [0]], "int64")), _x(2, 2)), {"accumulate": True}, "broadcast"),
        ((_x(4, 3), (_t([-1, 0, 2], "int64"),), _t(7.0)), {"accumulate": False}, "negative indices, 0-d value"),
    ]


def _own_index_reduce() -> list:
    index = _t([1, 1, 3, 1], "int64")
    return [
        ((_x(4, 3), 0, index, _x(4, 3) - 5, reduce), {"include_self": include_self}, "duplicate indices")
        for reduce, include_self in itertools.product(("prod", "mean", "amax", "amin"), (True, False))
    ]


def _own_masked() -> list:
    return [
        ((_x(3, 4), _t([True, False, True, True], "bool"), _x(3, 4)), {}, "broadcast mask"),
        ((_x(3, 4), _t(True, "bool"), _x(3, 4)), {}, "0-d mask"),
    ]


def _own_masked_fill() -> list:
    return [
        ((_x(3, 4), _t([True, False, True, True], "bool"), -1.5), {}, "broadcast mask"),
        ((_x(3, 4), _t([[False], [True], [False]], "bool"), _t(4.0)), {}, "0-d tensor value"),
    ]


def _own_embedding() -> list:
    return [
        ((_t([[4, 0, 4], [1, 1, 3]], "int64"), _x(5, 3)), {}, "duplicate ids"),
        ((_t(2, "int64"), _x(5, 3)), {}, "0-d ids"),
        ((_t([0, 2, 0], "int64"), _x(5, 3)), {"padding_idx": 0}, "padding_idx"),
    ]


def _own_embedding_bag() -> list:
    ids = _t([4, 0, 4, 1, 2], "int64")
    offsets = _t([0, 2, 2], "int64")
    return [
        ((ids, _x(5, 3)), {"offsets": offsets, "mode": mode}, f"{mode}, an empty bag")
        for mode in ("sum", "mean", "max")
    ] + [
        ((_t([[4, 0], [1, 1]], "int64"), _x(5, 3)), {"mode": "mean"}, "2-D ids"),
        ((ids, _x(5, 3)), {"offsets": offsets, "mode": "sum", "per_sample_weights": _x(5) / 4}, "weights"),
    ]


def _own_put() -> list:
    index = _t([4, -1, 4], "int64")
    return [
        ((_x(3, 3), index, _x(3)), {"accumulate": True}, "duplicate and negative indices, accumulate"),
        ((_x(3, 3), index, _x(3)), {"accumulate": False}, "duplicate and negative indices"),
        ((_x(3, 3), _t([[0, 8]], "int64"), _x(1, 2)), {}, "2-D index"),
    ]


OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        Operation("getitem", "F = operator.getitem", ("__getitem__",), own=_own_getitem),
        Operation("setitem", _setitem_source("="), ("__getitem__",), writes="setitem", own=_own_setitem),
        Operation("setitem_add", _setitem_source("+="), ("__getitem__",), writes="setitem", own=_own_setitem),
        Operation("index_select", "F = torch.index_select", ("index_select",), own=_own_index_select),
        Operation("gather", "F = torch.gather", ("gather",), own=_own_gather),
        Operation("take", "F = torch.take", ("take",), own=_own_take),
        Operation("take_along_dim", "F = torch.take_along_dim", ("take_along_dim",), own=_own_take_along_dim),
        Operation("scatter", "F = torch.scatter", ("scatter",), writes="scatter", own=_own_scatter),
        Operation("scatter_add", "F = torch.scatter_add", ("scatter_add",), reduces=True, own=_own_scatter_add),
        Operation(
            "scatter_reduce",
            "F = torch.scatter_reduce",
            tuple(f"scatter_reduce.{r}" for r in ("sum", "prod", "mean", "amax", "amin")),
            reduces=True,
            own=_own_scatter_reduce,
        ),
        Operation("index_add", "F = torch.index_add", ("index_add",), reduces=True, own=_own_index_add),
        Operation("index_copy", "F = torch.index_copy", ("index_copy",), writes="index_copy", own=_own_index_copy),
        Operation("index_fill", "F = torch.index_fill", ("index_fill",), own=_own_index_fill),
        Operation(
            "index_put", "F = torch.index_put", ("index_put",), reduces=True, writes="index_put", own=_own_index_put
        ),
        Operation(
            "index_reduce",
            "F = torch.index_reduce",
            tuple(f"index_reduce.{r}" for r in ("prod", "mean", "amax", "amin")),
            reduces=True,
            own=_own_index_reduce,
        ),
        Operation("masked_scatter", "F = torch.masked_scatter", ("masked_scatter",), own=_own_masked),
        Operation("masked_fill", "F = torch.masked_fill", ("masked_fill",), own=_own_masked_fill),
        Operation("embedding", "F = torch.nn.functional.embedding", ("nn.functional.embedding",), own=_own_embedding),
        Operation(
            "embedding_bag",
            "F = torch.nn.functional.embedding_bag",
            ("nn.functional.embedding_bag",),
            reduces=True,
            own=_own_embedding_bag,
        ),
        Operation("put", "F = torch.put", ("put",), reduces=True, writes="put", own=_own_put),
        Operation(
            "put_",
            "def F(x, index, source, accumulate=False):\n    return x.clone().put_(index, source, accumulate)\n",
            ("put",),
            reduces=True,
            writes="put",
            own=_own_put,
        ),
    )
}


def _opinfo(name: str) -> Any:
    """Return the OpInfo ``name`` (``scatter_reduce.mean``), or None where PyTorch's test helpers do not import."""
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except Exception:  # noqa: BLE001 - a private module: absent or changed, our own samples still run
        return None
    for base, variant in ((name, ""), name.rpartition(".")[::2]):
        for info in op_db:
            if info.name == base and info.variant_test_name == variant:
                return info
    return None


def opinfo_available() -> bool:
    """Return whether PyTorch's OpInfo samples import (they need ``expecttest``)."""
    return _opinfo("gather") is not None


def _opinfo_samples(op: Operation, dtype: str) -> Iterator[tuple[tuple, dict, str]]:
    import torch

    for name in op.opinfo:
        info = _opinfo(name)
        if info is None or getattr(torch, dtype) not in info.supported_dtypes("cpu"):
            continue
        for n, sample in enumerate(info.sample_inputs("cpu", getattr(torch, dtype))):
            kwargs = dict(sample.kwargs)
            args = (sample.input, *sample.args)
            if op.name in ("embedding_bag", "embedding"):
                args = (sample.args[0], sample.input, *sample.args[1:])  # OpInfo's input is the weight
            if op.name in ("setitem", "setitem_add"):  # x[index] = value of x[index]'s shape, each element changed
                try:
                    read = sample.input[sample.args[0]]
                except (IndexError, RuntimeError, TypeError):
                    continue
                args = (sample.input, sample.args[0], ~read if read.dtype == torch.bool else read + 1)
            yield args, kwargs, f"OpInfo {name} sample {n}, {dtype}"


def samples(op: Operation, cases: int, seed: int) -> list[Sample]:
    """Return up to ``cases`` samples of ``op``: ours, then OpInfo's first of each dtype, then OpInfo's float32.

    Where there are more than ``cases``, the first ``cases`` in that order are kept, the float32
    ones spread evenly over OpInfo's list. Samples whose eager call fails are dropped by the
    caller (a sample torch refuses is not an exporter's error). ``seed`` seeds torch's
    generator, which OpInfo's samples draw from.
    """
    import torch

    torch.manual_seed(seed)
    rows: list[tuple[tuple, dict, str]] = list(op.own())
    for dtype in DTYPES:
        first = next(_opinfo_samples(op, dtype), None)
        if first is not None:
            rows.append(first)
    rest = list(_opinfo_samples(op, "float32"))[1:]
    room = max(cases - len(rows), 0)
    if len(rest) > room:
        rest = [rest[k * len(rest) // room] for k in range(room)] if room else []
    rows = (rows + rest)[:cases]
    out = []
    for args, kwargs, note in rows:
        sample = Sample(op.name, tuple(args), dict(kwargs), note)
        sample.undefined = duplicate_targets(op, sample)
        out.append(sample)
    return out


# ----------------------------------------------------------------------------- duplicate targets


def _normalized(index: Any, size: int) -> np.ndarray:
    values = np.asarray(index.detach().cpu().numpy(), dtype=np.int64)
    return np.where(values < 0, values + size, values)


def _twice(flat: np.ndarray, shape: tuple) -> np.ndarray | None:
    """Return the mask (of ``shape``) of the elements whose flat position is in ``flat`` more than once, or None."""
    size = int(np.prod(shape))
    counts = np.bincount(flat.reshape(-1), minlength=size)[:size]
    return (counts > 1).reshape(shape) if (counts > 1).any() else None


def duplicate_targets(op: Operation, sample: Sample) -> np.ndarray | None:
    """Return the elements ``sample`` writes twice without accumulating (torch's result there is unspecified).

    Returns
    -------
    numpy.ndarray of bool, shape of the written tensor, or None
        None where no element is written twice with values that may differ (a fill, or a
        scatter of one value, writes the same bits twice).
    """
    import torch

    args, kwargs = sample.args, sample.kwargs
    kind = op.writes
    try:
        data = args[0]
        shape = tuple(data.shape)
        if kind == "scatter":
            dim, index = args[1], args[2]
            src = args[3] if len(args) > 3 else kwargs.get("src", kwargs.get("value"))
            if not isinstance(src, torch.Tensor) or src.ndim == 0 or "reduce" in kwargs:
                return None
            if data.ndim == 0:
                return _twice(np.zeros(index.numel(), np.int64), shape)
            dim = dim % data.ndim
            coords = np.indices(index.shape).reshape(index.ndim, -1)
            coords[dim] = _normalized(index, data.shape[dim]).reshape(-1)
            return _twice(np.ravel_multi_index(tuple(coords), shape), shape)
        if kind == "index_copy":
            dim, index = args[1], args[2]
            if data.ndim == 0:
                return _twice(np.zeros(index.numel(), np.int64), shape)
            dim = dim % data.ndim
            along = _twice(_normalized(index, data.shape[dim]), (data.shape[dim],))
            if along is None:
                return None
            return np.broadcast_to(np.expand_dims(along, [a for a in range(data.ndim) if a != dim]), shape).copy()
        accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
        if kind == "put":
            return None if accumulate else _twice(_normalized(args[1], data.numel()), shape)
        if kind in ("index_put", "setitem"):
            if (kind == "index_put" and accumulate) or (isinstance(args[2], torch.Tensor) and args[2].ndim == 0):
                return None  # accumulated, or one value written
            # Each element's flat position, read through the same index: a position read twice is written twice.
            flat = torch.arange(data.numel()).reshape(shape)
            return _twice(flat[args[1]].numpy(), shape)
    except (IndexError, RuntimeError, TypeError, ValueError, ZeroDivisionError):
        return None  # eager refuses it too: dropped later
    return None
