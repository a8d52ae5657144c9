"""The values of the checker's random cases.

The ONNX types as NumPy dtypes, arrays of values that break implementations (NaN, -0.0,
infinities, empty and non-ASCII strings), index tuples, and :class:`Case`, one operator call.
The per-operator case makers are ``cases`` and ``quantized_cases``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..rules.versions import LOW_PRECISION_TYPES, ONNX_TYPES

# ONNX type name -> NumPy dtype (strings: object), in the version table's order.
DTYPES: dict[str, np.dtype] = dict(ONNX_TYPES)
CLASSIC = tuple(t for t in DTYPES if t not in LOW_PRECISION_TYPES)  # the 16 of every op but TensorScatter
LOW_PRECISION = tuple(t for t in DTYPES if t in LOW_PRECISION_TYPES)
FLOATS = ("float", "double", "float16", "bfloat16")
COMPLEX = ("complex64", "complex128")
INDEX_DTYPES: dict[str, np.dtype] = {"int32": np.dtype(np.int32), "int64": np.dtype(np.int64)}

STRINGS = (
    "",
    "a",
    "b",
    "ab",
    "abc",
    "Z",
    "zz",
    "é",
    "héllo",
    "日本語",
    "🙂",
    "a🙂b",
    "\u00ff",
    "\x00x",
    "longer string " * 3,
)


def reductions_for(type_name: str, accepted) -> list[str]:
    """Return the reductions of ``accepted`` defined for ``type_name`` (README: no string mul, no complex order)."""
    out = list(accepted)
    if type_name == "string":
        out = [r for r in out if r != "mul"]
    if type_name in COMPLEX:
        out = [r for r in out if r not in ("max", "min")]
    return out


# ----------------------------------------------------------------------------- values


def _float_values(rng: np.random.Generator, n: int, special: bool) -> np.ndarray:
    small = rng.integers(-4, 5, size=n).astype(np.float64)
    wide = rng.standard_normal(n) * 3.0
    values = np.where(rng.random(n) < 0.4, small, wide)
    if special and n:
        specials = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 0.1, 1e-3])
        mask = rng.random(n) < 0.15
        values[mask] = rng.choice(specials, size=int(mask.sum()))
    return values


def values(rng: np.random.Generator, type_name: str, shape: tuple[int, ...], *, special: bool = True) -> np.ndarray:
    """Return a random array of ONNX type ``type_name`` (strings as an object array of str)."""
    dtype = DTYPES[type_name]
    n = math.prod(shape)
    if type_name in LOW_PRECISION:  # small values every one of them holds (e8m0: powers of two)
        if type_name == "float8e8m0":
            flat = np.exp2(rng.integers(-4, 5, size=n)).astype(dtype)
        elif type_name == "uint4":
            flat = rng.integers(0, 16, size=n).astype(dtype)
        else:
            flat = (
                rng.integers(-6, 7, size=n).astype(np.float32).astype(dtype)
                if type_name != "int4"
                else rng.integers(-8, 8, size=n).astype(dtype)
            )
        return flat.reshape(shape)
    if type_name in FLOATS:
        flat = _float_values(rng, n, special).astype(np.float32 if type_name == "bfloat16" else dtype)
        flat = flat.astype(dtype)
    elif type_name in COMPLEX:
        flat = np.empty(n, dtype=dtype)
        flat.real, flat.imag = _float_values(rng, n, special), _float_values(rng, n, special)
    elif type_name == "bool":
        flat = rng.random(n) < 0.5
    elif type_name == "string":
        flat = np.empty(n, dtype=object)
        for i in range(n):
            flat[i] = str(STRINGS[rng.integers(len(STRINGS))])
    else:
        info = np.iinfo(dtype)
        full = rng.integers(info.min, info.max, size=n, dtype=dtype, endpoint=True)
        low = rng.integers(max(info.min, -5), 6, size=n).astype(dtype)
        flat = np.where(rng.random(n) < 0.5, low, full).astype(dtype)
    return flat.reshape(shape)


# ----------------------------------------------------------------------------- indices


def index_tuples(
    rng: np.random.Generator,
    sizes: tuple[int, ...],
    lead: tuple[int, ...],
    index_dtype: str,
    *,
    negative: bool = True,
    duplicates: bool = False,
    unique: bool = False,
) -> np.ndarray:
    """Return indices of shape ``lead + (len(sizes),)``; component j in ``[-sizes[j], sizes[j]-1]``.

    ``duplicates``: tuples drawn from a pool of at most 3, so repeats are the rule.
    ``unique``: no two tuples address the same element (needs ``prod(lead) <= prod(sizes)``).
    The caller guarantees ``prod(lead) == 0`` whenever some size is 0.
    """
    k, n = len(sizes), math.prod(lead)
    total = math.prod(sizes)
    if n and not total:
        raise ValueError("non-empty indices into an empty block")
    if unique:
        flat = rng.choice(total, size=n, replace=False) if n else np.zeros(0, dtype=np.int64)
        rows = np.stack(np.unravel_index(flat, sizes), axis=-1) if k else np.zeros((n, 0), np.int64)
    elif duplicates and n:
        pool = np.stack([rng.integers(0, s, size=3) for s in sizes], axis=-1) if k else np.zeros((3, 0), np.int64)
        rows = pool[rng.integers(0, 3, size=n)]
    else:
        rows = (
            np.stack([rng.integers(0, max(s, 1), size=n) for s in sizes], axis=-1) if k else np.zeros((n, 0), np.int64)
        )
    rows = rows.astype(np.int64).reshape(n, k)
    if negative and rows.size:
        flip = rng.random(rows.shape) < 0.35
        rows = np.where(flip, rows - np.asarray(sizes, dtype=np.int64), rows)
    return rows.reshape((*lead, k)).astype(INDEX_DTYPES[index_dtype])


def gather_indices(rng, size: int, shape: tuple[int, ...], index_dtype: str, negative: bool = True) -> np.ndarray:
    """Gather indices of any shape (rank 0 included) with values in ``[-size, size-1]``."""
    n = math.prod(shape)
    if n and not size:
        raise ValueError("non-empty indices into an empty axis")
    flat = rng.integers(0, max(size, 1), size=n)
    if negative and n:
        flat = np.where(rng.random(n) < 0.35, flat - size, flat)
    return flat.reshape(shape).astype(INDEX_DTYPES[index_dtype])


# ----------------------------------------------------------------------------- cases


@dataclass
class Case:
    """One node evaluation: the op, its inputs and attributes.

    ``constants`` are the positions of the inputs that the one-node model holds as
    initializers rather than feeds (GatherBlockQuantized's data, scales and zero points,
    constants by its spec); the others are the model's inputs.
    """

    op: str
    inputs: list[np.ndarray]
    attrs: dict[str, Any] = field(default_factory=dict)
    constants: tuple[int, ...] = ()

    def describe(self) -> str:
        """Return the op with its inputs' dtypes and shapes and its attributes, for messages."""
        shapes = ", ".join(f"{a.dtype}{a.shape}" for a in self.inputs)
        return f"{self.op}({shapes}, {self.attrs})"


def onnx_name(dtype) -> str:
    """ONNX type name of one of the :data:`DTYPES`."""
    return {v: k for k, v in DTYPES.items()}[np.dtype(dtype)]
