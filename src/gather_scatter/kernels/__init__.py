"""NumPy kernels, one module per operator family.

The families: gather, gather_nd, scatter_nd, elements (GatherElements, ScatterElements,
Scatter), tensor_scatter. Shared pieces: ``_offsets``
(index tuples to flat offsets, bounds checked in the same chunked pass), ``_writes`` (outputs,
copies, last-wins assignment, dtype rules), ``_reductions`` (reductions into rows, NumPy's and
compiled), ``_codes`` (the reduction codes), ``_numba``/``_loops`` (numba loops, loaded lazily).

Each ``run_<op>(spec, ...)`` computes the same thing for every version of its operator; the
``spec`` (an OpVersion) only says what that version accepts and names it in errors.

NumPy only: the kernels import nothing above the rules and the resources (``rules/``,
``resources/``). The public functions are
:mod:`gather_scatter.ops`'s, and the choice of a backend for another library's arrays is
:mod:`gather_scatter._calls`'s; ``backends/`` and ``_calls`` import the kernels, never the
reverse (tests/test_layout.py).
"""

from __future__ import annotations

from typing import Any

from . import _numba
from ._numba import numpy_paths
from ._reductions import UFUNCS, reduce_rows
from ._writes import assign_last_wins, strings_as_objects

__all__ = [
    "UFUNCS",
    "assign_last_wins",
    "compiled_loaded",
    "compiled_loops",
    "numpy_paths",
    "reduce_rows",
    "strings_as_objects",
]


def compiled_loops() -> Any:
    """Return the module of numba-compiled loops, imported on the first call.

    None where numba is not installed or ``GATHER_SCATTER_COMPILED=0``: the callers then take
    their NumPy path.
    """
    return _numba.loops()


def compiled_loaded() -> bool:
    """Return whether the compiled loops are imported in this process already (imports nothing)."""
    return _numba.loaded()
