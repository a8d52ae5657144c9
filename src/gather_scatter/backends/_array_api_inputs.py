"""What a call's arrays may be, for any array-API backend: the inputs as arrays of the library on
the first input's device (NumPy values and lists move there; an array of another library, or on
another device, is refused, never moved), their dtypes read as NumPy's for the rules, and the
``out=`` checks that need no result.

:class:`ArrayAPIInputs` is the base of :class:`~gather_scatter.backends.array_api.ArrayAPIBackend`,
which runs the operators on what it lets through; each refusal here is a DTypeError (ShapeError
for a wrong ``out`` shape), raised before any operator's work.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..errors import DTypeError
from ..rules.validate import as_array, check_out_type
from ..rules.versions import OpVersion
from ._library import foreign, library_name

try:  # the low-precision types NumPy reads through ml_dtypes
    import ml_dtypes
except ImportError:  # pragma: no cover - a core dependency
    ml_dtypes = None  # type: ignore[assignment]  # a core dependency: None only in a broken install


@functools.cache
def numpy_dtype(dtype: Any) -> np.dtype:
    """Return a library's dtype as NumPy's (``torch.bfloat16`` -> ``ml_dtypes.bfloat16``, ...).

    The rules in ``_shapes``/``_versions`` are written for NumPy dtypes.

    Parameters
    ----------
    dtype : dtype object
        A dtype of any array library (a ``torch.dtype``, a JAX or CuPy dtype, a NumPy dtype).

    Returns
    -------
    numpy.dtype
        The NumPy dtype of the same name (an ``ml_dtypes`` one for bfloat16, float8, ...).

    Raises
    ------
    TypeError
        When neither NumPy nor ``ml_dtypes`` has a dtype of that name.
    """
    if isinstance(dtype, np.dtype):
        return dtype
    name = str(dtype).rsplit(".", 1)[-1]
    try:
        return np.dtype(name)
    except TypeError:
        if ml_dtypes is not None and hasattr(ml_dtypes, name):
            return np.dtype(getattr(ml_dtypes, name))
        raise


class ArrayAPIInputs:
    """The arrays a call of one array-API namespace ``xp`` takes and gives, on ``first``'s device."""

    #: whether ``out=`` can be written (immutable arrays: no)
    writable = False

    def __init__(self, spec: OpVersion, xp: Any, first: Any, first_name: str):
        self.spec, self.xp, self.kind = spec, xp, type(first)
        self.library = library_name(first)
        self.device = self._device_of(first)
        self.first_name = first_name
        self.host_dtypes: dict[str, np.dtype] = {}

    def dtype(self, name: str, array: Any) -> np.dtype:
        """Return ``array``'s dtype as NumPy's.

        For an input converted from NumPy, the dtype it had there (JAX without x64 narrows int64
        to int32, but the rules judge what was passed). A dtype with no NumPy counterpart raises
        DTypeError (it has no ONNX type).
        """
        if name in self.host_dtypes:
            return self.host_dtypes[name]
        try:
            return numpy_dtype(array.dtype)
        except TypeError:
            spec = self.spec
            raise spec.error(
                DTypeError,
                f"{name} has dtype {array.dtype}, which has no ONNX type",
                input=name,
                value=str(array.dtype),
            ) from None

    def array(self, name: str, value: Any, dtype: Any = None) -> Any:
        """Return ``value`` as an array of this library on this device.

        The rule is in :mod:`gather_scatter.backends`; ``dtype`` is the NumPy dtype a list must
        fit. An array of this library on another device, or an array of another library, raises
        DTypeError; a NumPy value of a dtype the library cannot hold stays a NumPy array, for the
        type rule to refuse.
        """
        spec = self.spec
        if isinstance(value, self.kind):
            if not self.same_device(value):
                raise spec.error(
                    DTypeError,
                    f"{name} is on device {self._device_of(value)} but {self.first_name} is on "
                    f"{self.device}; move it there first",
                    input=name,
                    value=str(self._device_of(value)),
                )
            return value
        if foreign(value):
            raise spec.error(
                DTypeError,
                f"{name} is a {library_name(value)} but {self.first_name} is a {self.library}; pass "
                f"arrays of one library (or NumPy arrays, which move to {self.first_name}'s device)",
                input=name,
                value=library_name(value),
            )
        host = as_array(spec, name, value, dtype)
        self.host_dtypes[name] = host.dtype
        try:
            return self.from_numpy(host)
        except (TypeError, ValueError, RuntimeError):
            # A dtype the library cannot hold (strings, ...) is never one the op accepts for an input
            # that is not data: the type rule, which runs next on host_dtypes, raises the NumPy error.
            return host

    def same_device(self, array: Any) -> bool:
        """Return whether ``array`` is on this backend's device."""
        return self._device_of(array) == self.device

    def _device_of(self, array: Any) -> Any:
        import array_api_compat

        return array_api_compat.device(array)

    def from_numpy(self, host: np.ndarray) -> Any:
        """Return the NumPy array ``host`` as an array of this library on this device."""
        return self.xp.asarray(host, device=self.device)

    def native_dtype(self, dtype: np.dtype) -> Any:
        """Return the namespace's dtype of the same name as the NumPy ``dtype``."""
        return getattr(self.xp, dtype.name)

    def shape(self, array: Any) -> tuple[int, ...]:
        """Return ``array``'s shape as a tuple of Python ints."""
        return tuple(int(d) for d in array.shape)

    def check_out(self, out: Any, shape: tuple[int, ...], dtype: np.dtype) -> None:
        """Run the ``out=`` checks that need no result: its library, type, shape and device.

        Any failure raises DTypeError (ShapeError for a wrong shape); a library whose arrays
        cannot be written refuses every ``out``.
        """
        if out is None:
            return
        spec = self.spec
        if not self.writable:
            raise spec.error(
                DTypeError,
                f"out= cannot be written for {self.library} (immutable arrays); use the returned array",
                input="out",
                value=library_name(out),
            )
        if not isinstance(out, self.kind):
            raise spec.error(
                DTypeError,
                f"out must be a {self.library} like {self.first_name}, got {library_name(out)}",
                input="out",
                value=library_name(out),
            )
        check_out_type(spec, self.dtype("out", out), self.shape(out), dtype, shape)
        if not self.same_device(out):
            raise spec.error(
                DTypeError,
                f"out is on device {self._device_of(out)} but {self.first_name} is on {self.device}",
                input="out",
                value=str(self._device_of(out)),
            )

    def finish(self, result: Any, out: Any, inputs: dict) -> Any:
        """Return ``result``, or ``out`` (checked by :meth:`check_out`) with ``result`` written into it."""
        return result if out is None else self.write_out(result, out, inputs)

    def write_out(self, result: Any, out: Any, inputs: dict) -> Any:  # pragma: no cover - writable backends
        """Write ``result`` into ``out`` and return ``out``: only a writable backend can."""
        raise NotImplementedError
