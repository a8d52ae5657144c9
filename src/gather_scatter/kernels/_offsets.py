"""Flat offsets of index tuples, with the bounds check in the same chunked pass (shared by
GatherND and ScatterND; Gather's take and the element-wise loops map indices themselves)."""

from __future__ import annotations

from typing import overload

import numpy as np

from ..resources import threads as _parallel
from ..rules import dims as _dims
from ..rules.validate import check_bounds, linear_offsets
from ..rules.versions import OpVersion

__all__ = ["STEP", "TakeInto", "nd_offsets", "slices_shape"]


def slices_shape(shape: tuple[int, ...], lead: int) -> tuple[int, ...]:
    # Explicit, since reshape(-1, ...) is ambiguous when a trailing dim is 0.
    return (_dims.size(shape[:lead]), *shape[lead:])


# Index tuples per step of a chunk. Each NumPy call hands the GIL between the threads, and a
# contended hand-off costs tens of microseconds here: 128k tuples (1 MiB temporaries) per step
# keeps those few (1M element tuples: GatherND 10.5-12 ms at 32k per step, 7.8-8.3 ms at 128k).


STEP = 1 << 17


@overload
def nd_offsets(
    spec: OpVersion,
    indices: np.ndarray,
    dims: tuple[int, ...],
    batch_dims: int,
    per_batch: int,
    emit: None = None,
    checked: bool = False,
) -> np.ndarray: ...


@overload
def nd_offsets(
    spec: OpVersion,
    indices: np.ndarray,
    dims: tuple[int, ...],
    batch_dims: int,
    per_batch: int,
    emit: TakeInto,
    checked: bool = False,
) -> None: ...


def nd_offsets(
    spec: OpVersion,
    indices: np.ndarray,
    dims: tuple[int, ...],
    batch_dims: int,
    per_batch: int,
    emit: TakeInto | None = None,
    checked: bool = False,
) -> np.ndarray | None:
    """Flat offsets into ``data.reshape(-1, *data.shape[b + k:])`` of the index tuples
    (``indices.shape[-1] == k``), computed in steps on the pool with the bounds check in the same pass.

    With ``emit`` (a :class:`TakeInto`: called per step, and its ``bytes_per_row`` sizes the
    chunks), each step's offsets go to ``emit(lo, hi, offsets)``, which writes the output,
    and nothing is kept; else they are returned, shape ``(N,)``. On a bad index,
    :func:`check_bounds` raises with the first bad position; with ``emit`` a fresh output may
    then hold partial results, so callers writing a caller's buffer pass ``checked=True``
    after validating everything first.
    """
    rows: np.ndarray = indices.reshape(slices_shape(indices.shape, indices.ndim - 1))
    n, k = rows.shape
    if emit is None and not batch_dims and n <= STEP:  # one step: no pool, no copy
        offsets = linear_offsets(rows, dims, check=not checked)
        if offsets is None:
            check_bounds(spec, indices, dims, np.arange(k))
            raise AssertionError("linear_offsets found a bad index that check_bounds did not")  # pragma: no cover
        return offsets
    offsets = None if emit is not None else np.empty(n, dtype=np.int64)
    block = _dims.size(dims)

    def work(lo: int, hi: int) -> bool:
        step: np.ndarray | None
        for s in range(lo, hi, STEP):
            e = min(hi, s + STEP)
            if k == 1 and not batch_dims and emit is not None:
                step = rows[s:e, 0]  # take's 'wrap' maps negatives: no offsets to build
                if not checked and (int(step.min()) < -dims[0] or int(step.max()) >= dims[0]):
                    return False
            else:
                step = linear_offsets(rows[s:e], dims, check=not checked)
                if step is None:
                    return False
                if batch_dims:
                    base = np.arange(s, e, dtype=np.int64)  # in place: one temporary, not three
                    base //= per_batch
                    base *= block
                    step += base
            if emit is not None:
                emit(s, e, step)
            else:
                assert offsets is not None  # allocated above when there is no emit
                offsets[s:e] = step
        return True

    width = k * rows.itemsize + (emit.bytes_per_row if emit is not None else 8)
    if not all(_parallel.run(work, _parallel.ranges(n, n * width))):
        check_bounds(spec, indices, dims, np.arange(batch_dims, batch_dims + k))
        raise AssertionError("a step found a bad index that check_bounds did not")  # pragma: no cover
    return offsets


class TakeInto:
    """``emit`` for GatherND: take each step's slices into its rows of the output."""

    def __init__(self, src: np.ndarray, dst: np.ndarray) -> None:
        self.src, self.dst = src, dst
        self.bytes_per_row = dst.strides[0] if dst.ndim else dst.itemsize

    def __call__(self, lo: int, hi: int, offsets: np.ndarray) -> None:
        np.take(self.src, offsets, 0, self.dst[lo:hi], "wrap")
