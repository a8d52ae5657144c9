"""Which library an array belongs to, read without importing any library: the one test every
backend uses to refuse another library's array beside its own."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

# What the NumPy kernels take: ndarrays and what np.asarray reads without a library of its own.
_NUMPY_LIKE = (np.ndarray, np.generic, list, tuple, int, float, complex, bool, str, bytes)
# The array libraries whose arrays carry no __array_namespace__ of their own (read by array-api-compat).
_LIBRARIES = ("torch", "jax", "jaxlib", "cupy", "dask", "sparse")


def foreign(value: Any) -> bool:
    """Whether ``value`` is an array of a library other than NumPy (never imports one)."""
    if isinstance(value, _NUMPY_LIKE) or value is None:
        return False
    if hasattr(value, "__array_namespace__"):
        return True
    # Any class in the MRO: a subclass defined elsewhere (torch.nn.Parameter, a user's Tensor
    # subclass in __main__) is still its library's array.
    roots = {kind.__module__.split(".", 1)[0] for kind in type(value).__mro__}
    return any(root in _LIBRARIES and root in sys.modules for root in roots)


def library_name(value: Any) -> str:
    """``value``'s type as the user knows it, e.g. ``torch.Tensor``, ``numpy.ndarray``."""
    kind = type(value)
    root = kind.__module__.split(".", 1)[0]
    return f"{root}.{kind.__name__}" if root != "builtins" else kind.__name__
