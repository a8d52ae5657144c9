"""What ``torch.compile`` needs of the torch backend (:mod:`gather_scatter.backends.torch`).

- The bounds checks as custom ops (``gather_scatter::bounds``,
  ``gather_scatter::write_positions``). They read the indices' values on the host, which a
  graph cannot; as custom ops they are opaque to the compiler: each runs
  :class:`~gather_scatter.backends.array_api.ArrayAPIBackend`'s eager check on the real
  tensors when the compiled function runs (raising our IndexOutOfBoundsError, eager's
  message) and returns a new tensor (a custom op may not return its input). So a call needs
  no graph break for them, and ``fullgraph=True`` compiles.
- Why what is left cannot stay in a graph: the reasons ``torch.compiler.disable`` gives, which
  ``fullgraph=True`` prints in its refusal.
- The NumPy dtype of each torch dtype, as a dict keyed by torch dtype: dynamo traces the
  lookup as a constant, where :func:`~gather_scatter.backends.array_api.numpy_dtype`'s
  ``functools.cache`` made it warn.
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import torch

from ..rules.versions import REGISTRY, Mode
from .array_api import ArrayAPIBackend, numpy_dtype

# Why a call cannot stay in one torch.compile graph (fullgraph=True shows the reason).
HOST_CHECK = (
    "gather_scatter: an index bounds check reads the indices' values on the host, so it runs eagerly outside "
    "the graph (a graph break) and raises IndexOutOfBoundsError there"
)
HOST_INPUT = (
    "gather_scatter: an input given as a list or NumPy array is read by NumPy's rules on the host, outside "
    "the graph (a graph break); to compile with fullgraph=True, pass it as a torch.Tensor"
)
OUT_ADDRESSES = (
    "gather_scatter: out= is checked against the inputs' memory addresses, which only real tensors have, so "
    "that check runs eagerly outside the graph (a graph break); to compile with fullgraph=True, call without "
    "out= and use the returned tensor"
)


def _numpy_dtypes() -> dict[torch.dtype, np.dtype]:
    """Every torch dtype that has a NumPy (or ml_dtypes) dtype of the same name, mapped to it."""
    table = {}
    for value in vars(torch).values():
        if isinstance(value, torch.dtype) and value not in table:
            with contextlib.suppress(TypeError):  # no NumPy counterpart (quantized types, ...): refused later
                table[value] = numpy_dtype(value)
    return table


NUMPY_DTYPES = _numpy_dtypes()


def _spend_beta_warning() -> None:
    """Spend, silenced, the warning ATen gives once per process that index_reduce is in beta.

    Eager calls silence it around each call; a ``torch.compile`` graph runs index_reduce
    without that (dynamo cannot trace ``warnings.catch_warnings``), so the first run of a
    compiled scatter would show it.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        torch.ones(1).index_reduce(0, torch.zeros(1, dtype=torch.int64), torch.ones(1), "prod")


_spend_beta_warning()


def register_ops(backend_class: type[ArrayAPIBackend]) -> None:
    """Register the custom ops ``gather_scatter::bounds`` and ``gather_scatter::write_positions``
    (:data:`torch.ops.gather_scatter`), which build a ``backend_class`` (the torch backend, whose module
    calls this once on import) for the operator version they are given.

    Opaque to the compiler: each runs ArrayAPIBackend's eager check on the real tensors when the
    compiled function runs (raising our IndexOutOfBoundsError from it) and returns a new tensor
    (a custom op may not return its input), so the graph needs no break for it.
    """
    if hasattr(torch.ops.gather_scatter, "bounds"):  # registered already (a module reload)
        return

    @torch.library.custom_op("gather_scatter::bounds", mutates_args=())
    def _bounds_op(
        indices: torch.Tensor,
        sizes: list[int],
        axes: list[int],
        per_component: bool,
        domain: str,
        op_type: str,
        since_version: int,
    ) -> torch.Tensor:
        """:meth:`ArrayAPIBackend.bounds` of ``indices`` for the operator version named, eagerly."""
        backend = backend_class(REGISTRY[(domain, op_type, since_version)], None, indices, "indices")
        checked = ArrayAPIBackend.bounds(
            backend,
            indices,
            tuple(sizes) if per_component else sizes[0],
            tuple(axes) if per_component else axes[0],
        )
        return checked.clone() if checked is indices else checked

    @_bounds_op.register_fake
    def _bounds_shape(indices, sizes, axes, per_component, domain, op_type, since_version):
        return torch.empty_like(indices, dtype=torch.int64)

    @torch.library.custom_op("gather_scatter::write_positions", mutates_args=())
    def _write_positions_op(
        write: torch.Tensor,
        capacity: int,
        length: int,
        mode: str,
        axis: int,
        domain: str,
        op_type: str,
        since_version: int,
    ) -> torch.Tensor:
        """:meth:`ArrayAPIBackend.checked_writes` of TensorScatter's ``write`` for the version named, eagerly."""
        backend = backend_class(REGISTRY[(domain, op_type, since_version)], None, write, "write_indices")
        checked = ArrayAPIBackend.checked_writes(backend, write, capacity, length, Mode(mode), axis)
        return checked.clone() if checked is write else checked

    @_write_positions_op.register_fake
    def _write_positions_shape(write, capacity, length, mode, axis, domain, op_type, since_version):
        return torch.empty_like(write, dtype=torch.int64)
