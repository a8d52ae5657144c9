"""Array libraries besides NumPy: which library a call belongs to, and the backend that runs it.

The rule (one for every operator): the first array input — ``data``, or ``past_cache`` for
TensorScatter — decides the library and the device. The other inputs may be arrays of that
library on that device, or NumPy arrays, lists and Python scalars (converted by NumPy's rules
of :func:`gather_scatter.rules.validate.as_array`, then moved to data's device); an array of any
other library is refused with DTypeError. NumPy data keeps the NumPy kernels.

``array-api-compat``'s ``array_namespace`` decides the library, as in SciPy and scikit-learn.
Nothing here imports torch or JAX: a backend module is imported only when an input already is
one of its arrays (so the library is already loaded).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from ..errors import DTypeError
from ..rules.versions import OpVersion
from ._deferred import _local, get_bounds_check, set_bounds_check, settle, synchronize
from ._library import foreign, library_name

if TYPE_CHECKING:
    from .array_api import ArrayAPIBackend
    from .dask import DaskBackend

__all__ = ["backend_for", "get_bounds_check", "library_name", "set_bounds_check", "synchronize"]


def _compiling() -> bool:
    """Whether torch.compile is tracing this call: deferred checks are then left for the next eager call."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.compiler.is_compiling()


def backend_for(spec: OpVersion, inputs: dict[str, Any]):
    """Return the backend that runs a call on ``inputs``, or None for the NumPy kernels.

    Parameters
    ----------
    spec : OpVersion
        The operator version being called; its name goes into error messages.
    inputs : dict of str to array_like
        The call's array inputs, name -> value, the deciding input first (``data``, or
        ``past_cache`` for TensorScatter). Values are arrays of any shape and dtype, or
        lists and Python scalars.

    Returns
    -------
    TorchBackend, JaxBackend, DaskBackend, ArrayAPIBackend or None
        The backend for the deciding input's library, bound to its device; None when that
        input is NumPy (an ndarray, a list, a scalar, or an ndarray-like NumPy wrapper).

    Raises
    ------
    DTypeError
        When data is NumPy but another input is an array of another library, or when the
        deciding input is an array that no array-API namespace covers.
    IndexOutOfBoundsError
        A bad index an earlier call on this thread had, found on the device after that call
        returned (:mod:`._deferred`: the 'deferred' bounds check on CUDA).
    """
    if _local.checks and not _compiling():  # a deferred check of an earlier call (on CUDA) may have found a bad index
        settle()
    items = iter(inputs.items())
    first_name, first = next(items)
    if not foreign(first):
        for name, value in items:
            if foreign(value):
                raise spec.error(
                    DTypeError,
                    f"{name} is a {library_name(value)} but {first_name} is a {library_name(first)}; "
                    f"{first_name} decides the library of the result, so pass {name} as a NumPy array (or "
                    f"{first_name} as a {library_name(value)})",
                    input=name,
                    value=library_name(value),
                )
        return None
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(first, torch.Tensor):
        # Directly, not through array_api_compat: under torch.compile its lru_cache-wrapped
        # helpers make dynamo warn, and a tensor's backend is known without them.
        from .torch import TorchBackend

        return TorchBackend(spec, None, first, first_name)
    import array_api_compat

    try:
        xp = array_api_compat.array_namespace(first)
    except TypeError as exc:
        raise spec.error(
            DTypeError,
            f"{first_name} is a {library_name(first)}, which is not an array library this package can run on ({exc})",
            input=first_name,
            value=library_name(first),
        ) from None
    backend: type[ArrayAPIBackend] | type[DaskBackend]
    if array_api_compat.is_torch_namespace(xp):
        from .torch import TorchBackend as backend
    elif array_api_compat.is_jax_namespace(xp):
        from .jax import JaxBackend as backend
    elif array_api_compat.is_dask_namespace(xp):
        from .dask import DaskBackend as backend
    elif array_api_compat.is_numpy_namespace(xp):
        return None  # an ndarray-like NumPy wrapper: the NumPy kernels read it
    else:
        from .array_api import ArrayAPIBackend as backend
    return backend(spec, xp, first, first_name)
