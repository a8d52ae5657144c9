"""NumPy kernels, one module per operator family; shared offsets, bounds and chunking in
``_offsets``, compiled loops in ``_compiled``/``_loops``."""

from .elements import gather_elements, scatter_elements
from .tensor_scatter import tensor_scatter

__all__ = ["gather_elements", "scatter_elements", "tensor_scatter"]
