"""The public kernels' type hints: an array of any library in, one of the same type out.

Each kernel is two overloads: ``data`` that the NumPy kernels read (:data:`NumPyInput`: an
ndarray, a NumPy scalar, nested lists or Python scalars) returns, and takes as ``out``, an
ndarray of any shape and dtype (:data:`NDArray`); ``data`` an array of another library
(anything with a ``shape`` and a ``dtype``: ``torch.Tensor``, ``jax.Array``, a dask or
array-API array) returns, and takes as ``out``, that array type (:data:`ArrayT`). Indices
and updates are ``Any``: arrays of data's library, NumPy arrays, lists or scalars. Nothing
here imports an array library, so a user's ``mypy --strict`` checks whichever it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["Array", "ArrayT", "NDArray", "NumPyInput", "ReductionName"]


class Array(Protocol):
    """What every array library's array has (the array API's two attributes the rules read)."""

    @property
    def shape(self) -> Any: ...

    @property
    def dtype(self) -> Any: ...


#: The type of ``data``, which is also the result's and ``out``'s type.
ArrayT = TypeVar("ArrayT", bound=Array)
#: ``data`` that the NumPy kernels read (bool, int and float are complex to a type checker).
NumPyInput = np.ndarray | np.generic | Sequence[Any] | complex | bytes | str
#: A NumPy result of any shape and dtype.
NDArray = npt.NDArray[Any]
#: A scatter's ``reduction``.
ReductionName = Literal["none", "add", "mul", "max", "min"]
