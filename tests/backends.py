"""The array libraries the backend tests run through, each a converter from NumPy and back.

A library that is not installed is skipped with a reason (CI installs them all:
``.ci/run`` installs torch's CPU wheel; the test extra has jax and array-api-strict).

JAX comes two ways, each only inside ``library(...)`` (or a test's own ``jax.enable_x64``), which
restores the setting afterwards, so no test leaves ``jax_enable_x64`` on for the tests after it:
``library("jax")`` holds it on (int64 and float64 as NumPy has them); ``library("jax", x64=False)``
is JAX as users run it by default (no 64-bit types: int64 is held as int32, when the values fit;
tests/test_jax_defaults.py runs the shared backend tests that way).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import pytest


class Library:
    def __init__(self, name: str, x64: bool = True):
        self.name, self.x64 = name, x64
        if name == "torch":
            self.mod = pytest.importorskip("torch", reason="torch not installed (pip install 'gather_scatter[torch]')")
        elif name == "jax":
            jax = pytest.importorskip("jax", reason="jax not installed (pip install 'gather_scatter[jax]')")
            assert bool(jax.config.jax_enable_x64) == x64, f"hold jax.enable_x64({x64}) around the test: library()"
            self.mod = jax
        else:
            self.mod = pytest.importorskip("array_api_strict", reason="array-api-strict not installed")

    def supports(self, array: np.ndarray) -> bool:
        dtype = np.asarray(array).dtype
        if dtype.kind in "OUS":
            return False
        if self.name == "torch":
            return dtype.name in _TORCH
        if self.name == "strict":
            return dtype.name in _STRICT
        if self.name == "jax" and not self.x64:  # int64 as JAX holds it: int32, when the values fit
            return dtype.name not in _WIDE or dtype.name == "int64" and _fits_int32(array)
        return True

    def convert(self, array):
        """``array`` (NumPy) as this library's array; None stays None."""
        if array is None or not isinstance(array, (np.ndarray, np.generic)):
            return array
        array = np.asarray(array)
        if self.name == "torch":
            torch = self.mod
            host = array if array.flags.c_contiguous else array.copy()
            if host.dtype.name == "bfloat16" or host.dtype.name.startswith("float8"):
                bits = torch.from_numpy(host.view(np.uint8 if host.itemsize == 1 else np.int16))
                return bits.view(getattr(torch, host.dtype.name))
            return torch.from_numpy(host.copy())
        if self.name == "jax":
            import jax.numpy as jnp

            if not self.x64 and array.dtype == np.int64 and _fits_int32(array):
                return jnp.asarray(array.astype(np.int32))  # what jnp.asarray gives, without its warning
            return jnp.asarray(array)
        return self.mod.asarray(array)

    def to_numpy(self, result, dtype: np.dtype) -> np.ndarray:
        if self.name == "torch":
            torch = self.mod
            assert isinstance(result, torch.Tensor), type(result)
            result = result.detach().cpu()
            if dtype.name not in _NUMPY_FROM_TORCH:
                return result.view(torch.uint8 if dtype.itemsize == 1 else torch.int16).numpy().view(dtype)
            return result.numpy()
        if self.name == "jax":
            assert isinstance(result, self.mod.Array), type(result)
            if not self.x64 and dtype == np.int64 and result.dtype == np.int32:
                return np.asarray(result).astype(np.int64)  # int64 data as JAX holds it without x64
            return np.asarray(result)
        assert isinstance(result, self.mod._array_object.Array), type(result)
        return np.asarray(result._array)


_TORCH = {"bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "float16", "bfloat16",
          "float32", "float64", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
          "float8_e5m2fnuz"}
_NUMPY_FROM_TORCH = _TORCH - {"bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"}
_STRICT = {"bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "float32", "float64",
           "complex64", "complex128"}
_WIDE = {"int64", "uint64", "float64", "complex128"}  # JAX without x64 holds none of these
NAMES = ("torch", "jax", "strict")


@contextlib.contextmanager
def library(name: str, x64: bool = True) -> Iterator[Library]:
    """``Library(name, x64)`` for the block; for JAX, ``jax_enable_x64`` held at ``x64`` and restored after."""
    if name != "jax":
        yield Library(name)
        return
    jax = pytest.importorskip("jax", reason="jax not installed (pip install 'gather_scatter[jax]')")
    with jax.enable_x64(x64):
        yield Library(name, x64)


def _fits_int32(array) -> bool:
    array = np.asarray(array)
    return not array.size or -(2**31) <= int(array.min()) and int(array.max()) < 2**31


def same_bits(expected: np.ndarray, actual: np.ndarray) -> bool:
    """Equal shape, dtype and bits; NaN matches NaN whatever its payload (README: NaN payloads
    are the hardware's)."""
    if expected.dtype != actual.dtype or expected.shape != actual.shape:
        return False
    expected, actual = np.array(expected, order="C").reshape(-1), np.array(actual, order="C").reshape(-1)
    if expected.dtype.kind == "c":  # as (real, imag) pairs
        part = np.float32 if expected.dtype.itemsize == 8 else np.float64
        return same_bits(expected.view(part), actual.view(part))
    width = f"u{expected.dtype.itemsize}"
    same = expected.view(width) == actual.view(width)
    if not same.all() and (expected.dtype.kind == "f" or expected.dtype.name.startswith(("bfloat16", "float8"))):
        same |= np.isnan(expected.astype(np.float32)) & np.isnan(actual.astype(np.float32))
    return bool(same.all())


def spy_pallas(monkeypatch) -> list:
    """Count calls of the Pallas scatter kernel (backends/_pallas_scatter.py)."""
    from gather_scatter.backends import _pallas_scatter

    calls = []
    kernel = _pallas_scatter.scatter_rows

    def counted(*args, **kwargs):
        calls.append(args[3])
        return kernel(*args, **kwargs)

    monkeypatch.setattr(_pallas_scatter, "scatter_rows", counted)
    return calls
