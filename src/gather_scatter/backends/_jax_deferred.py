"""The JAX backend's eager calls on a GPU without a host sync (:mod:`._deferred` says when a bad index raises).

An eager call on a GPU ran op by op, its bounds check reading the indices' minimum and maximum
back to the host (a sync, then a dozen small dispatches). In the 'deferred' mode it runs as the
CPU's eager calls do, as one compiled computation (``JaxBackend.staged``) that also returns
whether an index was bad, and does not wait for that flag: it is queued with
:func:`._deferred.defer`, ready when the array is (``jax.Array.is_ready``, which never waits).
When it says an index was bad, the call is run again op by op — JAX arrays are immutable, so
its inputs are as they were — which raises the eager IndexOutOfBoundsError, position and value
included, with x64 as it was at the call. Indices given as NumPy arrays or lists are checked on
the host at the call, as before.

A call is staged only where the compiled computation gives the eager bits on a GPU
(:func:`stages_exactly`): gathers, TensorScatter, reduction 'none', and the reductions the
Pallas kernel takes; complex add/mul (XLA's scatter, in no promised order) and
``GATHER_SCATTER_JAX_GPU_SCATTER=native`` keep the op-by-op path and its eager check.
:data:`PLATFORMS` says where calls defer: GPUs (the tests add ``"cpu"``).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np

from ..rules.versions import Reduction
from . import _deferred, _pallas_scatter

PLATFORMS = {"gpu"}


def defers(first: Any) -> bool:
    """Whether an eager call on concrete ``first`` defers its check: the mode is 'deferred', its devices defer."""
    return _deferred.get_bounds_check() == "deferred" and all(d.platform in PLATFORMS for d in first.devices())


def stages_exactly(op: str, arrays: dict, attrs: dict, data: Any) -> bool:
    """Whether ``op`` compiled as one computation gives the eager bits on a GPU (see the module docstring)."""
    if op not in ("scatter_nd", "scatter_elements"):
        return True
    reduction = attrs.get("reduction", "none")
    if not isinstance(reduction, str) or reduction.lower() == Reduction.NONE.value:
        return True  # 'none' (last update wins under jit too), or an attribute the rules refuse when traced
    updates = arrays.get("updates")
    return (
        _pallas_scatter.enabled(True, data)
        and np.dtype(data.dtype) in _pallas_scatter.SUPPORTED
        and max(math.prod(data.shape), math.prod(getattr(updates, "shape", ()))) < _pallas_scatter._POSITIONS // 2
    )


def defer(any_bad: Any, rerun: Any) -> None:
    """Queue the check of a staged call: ``any_bad`` (a 0-d bool JAX array); ``rerun()`` raises its error."""
    x64 = jax.dtypes.canonicalize_dtype(np.int64) == np.int64  # x64 on at the call

    def fail(position: int, value: int) -> None:
        with jax.enable_x64(x64):
            rerun()

    _deferred.defer(
        _deferred.Pending(
            ready=any_bad.is_ready,
            wait=any_bad.block_until_ready,
            read=lambda: (int(bool(any_bad)), 0, 0),
            fail=fail,
        )
    )
