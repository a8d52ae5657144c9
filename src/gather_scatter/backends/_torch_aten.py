"""ATen's serial scatters on the CPU, as the torch backend uses them: each target's last update
for ``index_copy`` (whose order with duplicates is not promised), ``index_reduce`` with NumPy's
sign on -0.0/0.0 ties and NumPy's NaN (the first met), and the same picks in fixed shapes for
``torch.compile``.

ATen applies ``index_add``/``index_reduce``/``scatter_reduce`` serially in index order on the CPU
(the spec's row-major order, tested); what it does differently from NumPy is fixed up here.
"""

from __future__ import annotations

import torch

from ..rules.versions import Reduction

REDUCE = {Reduction.MUL: "prod", Reduction.MAX: "amax", Reduction.MIN: "amin"}


def index_reduce(data: torch.Tensor, targets: torch.Tensor, updates: torch.Tensor, reduction: Reduction):
    """Return ``data`` with rows of ``updates`` reduced into rows ``targets`` by ``index_reduce``, in order.

    NumPy's sign for zero ties (:func:`zero_ties`).
    """
    if data.shape[1] == 1:  # as a vector: ATen's half-type prod fails on (n, 1)
        result = (
            data.reshape(-1)
            .index_reduce(0, targets, updates.reshape(-1), REDUCE[reduction], include_self=True)
            .reshape(data.shape)
        )
    else:
        result = data.index_reduce(0, targets, updates, REDUCE[reduction], include_self=True)
    n = targets.shape[0]
    if zero_ties(reduction, updates):
        order = torch.arange(n, device=data.device).reshape(-1, 1).expand(updates.shape)
        last = torch.full(data.shape, -1, dtype=torch.int64, device=data.device)
        last = last.index_reduce(0, targets, torch.where(updates == 0, order, -1), "amax", include_self=True)
        result = last_zero(result, last, torch.gather(updates, 0, last.clamp(min=0)))
    if nans_met(reduction, updates):
        order = torch.arange(n, device=data.device).reshape(-1, 1).expand(updates.shape)
        first = torch.full(data.shape, n, dtype=torch.int64, device=data.device)
        first = first.index_reduce(0, targets, torch.where(updates != updates, order, n), "amin", include_self=True)
        picked = torch.gather(bits(updates), 0, first.clamp(max=n - 1)).view(updates.dtype)
        result = first_nan(result, data, first < n, picked)
    return result


BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
"""The integer type of each width, to move a tensor's bits as they are."""


def bits(x: torch.Tensor) -> torch.Tensor:
    """``x`` viewed as the integer type of its width (:data:`BITS`), its bits moved as they are.

    ATen's CPU gather of a float16/bfloat16 tensor quiets a signaling NaN (0x7C03 -> 0x7E03).
    """
    return x.view(BITS[x.element_size()])


def nans_met(reduction: Reduction, updates: torch.Tensor) -> bool:
    """Whether ATen's max/min may have kept another NaN than NumPy's: the first met.

    ATen's loops give the last NaN met (its payload and sign); NumPy's loops and the NumPy
    kernels keep the first (data's own, else the first NaN update in order). Only a NaN update
    can differ; under ``torch.compile`` it is assumed.
    """
    if reduction not in (Reduction.MAX, Reduction.MIN) or not updates.dtype.is_floating_point:
        return False
    # amax propagates NaN: one reduction, no mask (isnan().any() is 10x slower)
    return torch.compiler.is_compiling() or (updates.numel() > 0 and bool(torch.isnan(updates.amax())))


def first_nan(result: torch.Tensor, data: torch.Tensor, met: torch.Tensor, picked: torch.Tensor) -> torch.Tensor:
    """Return ``result`` with NumPy's NaN: data's own where it is NaN, else the first NaN update met (``picked``)."""
    return torch.where(data != data, data, torch.where(met, picked, result))


def zero_ties(reduction: Reduction, updates: torch.Tensor) -> bool:
    """Whether ATen's max/min may have broken a -0.0/0.0 tie unlike NumPy.

    ATen keeps the value it holds on a tie; NumPy's float32/float64/bfloat16 loops (and the
    NumPy kernels) take the update, so a zero result has the last zero update's sign. float16
    keeps it in both. Only a zero update can tie a zero; under ``torch.compile`` it is assumed.
    """
    if reduction not in (Reduction.MAX, Reduction.MIN) or updates.dtype not in _TIES_TAKE_UPDATE:
        return False
    return torch.compiler.is_compiling() or bool(torch.count_nonzero(updates == 0))


_TIES_TAKE_UPDATE = {torch.float32, torch.float64, torch.bfloat16}


def last_zero(result: torch.Tensor, last: torch.Tensor, picked: torch.Tensor) -> torch.Tensor:
    """Return ``result`` with each zero that a zero update reached (``last`` >= 0) as that update (``picked``)."""
    return torch.where((result == 0) & (last >= 0), picked, result)


def _last_of(targets: torch.Tensor, rows: int) -> torch.Tensor:
    """For each of ``rows`` rows, the position of the last of ``targets`` naming it, or -1."""
    order = torch.arange(targets.shape[0], device=targets.device)
    last = torch.full((rows,), -1, dtype=torch.int64, device=targets.device)
    return last.scatter_reduce_(0, targets, order, "amax")


def last_wins(targets: torch.Tensor, updates: torch.Tensor, rows: int):
    """Only each target's last update (in order), so that index_copy's order cannot matter."""
    order = torch.arange(targets.shape[0], device=targets.device)
    keep = _last_of(targets, rows)[targets] == order
    if bool(keep.all()):  # distinct targets (a KV-cache write): no copy of the updates
        return targets, updates
    return targets[keep], updates[keep]


def pick_last(data: torch.Tensor, targets: torch.Tensor, updates: torch.Tensor) -> torch.Tensor:
    """Return ``data`` with each row that ``targets`` names replaced by its last update.

    In fixed shapes (under torch.compile); the gradient reaches only the updates that win.
    """
    last = _last_of(targets, data.shape[0])
    picked = updates.index_select(0, last.clamp(min=0))
    return torch.where((last >= 0).reshape(-1, 1), picked, data)
