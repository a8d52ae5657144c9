"""NumPy kernels, one module per operator family: gather, gather_nd, scatter_nd, elements
(GatherElements, ScatterElements, Scatter), tensor_scatter. Shared pieces: ``_offsets``
(index tuples to flat offsets, bounds checked in the same chunked pass), ``_writes`` (copies,
last-wins assignment, reductions, dtype rules), ``_compiled``/``_loops`` (numba loops).

Each ``run_<op>(spec, ...)`` computes the same thing for every version of its operator; the
``spec`` (an OpVersion) only says what that version accepts and names it in errors.
"""

from .elements import gather_elements, scatter_elements
from .gather import gather
from .gather_nd import gather_nd
from .scatter_nd import scatter_nd
from .tensor_scatter import tensor_scatter

__all__ = ["gather", "gather_elements", "gather_nd", "scatter_elements", "scatter_nd", "tensor_scatter"]
