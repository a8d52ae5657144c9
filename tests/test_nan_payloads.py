"""NaN payloads and signs through every library's copies and selections, bit for bit as the NumPy kernels.

The spec's loop, as the NumPy kernels run it, moves a NaN's bits as they are (Gather, GatherND,
GatherElements, reduction 'none', TensorScatter) and in max/min keeps the first NaN it meets
(data's own, else the first NaN update in order). The cases hold quiet and signaling NaNs of
several payloads and both signs, and -0.0/0.0, in every float type the library has. add/mul are
left out: the NaN an addition makes is the hardware's.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from backends import library

from gather_scatter import gather, gather_elements, gather_nd, scatter_elements, scatter_nd, tensor_scatter

# (name, unsigned view, NaNs: quiet, signaling, negative signaling) per float type
FLOATS = {
    "float16": (np.uint16, [0x7E01, 0x7C03, 0xFC05]),
    "bfloat16": (np.uint16, [0x7FC1, 0x7F83, 0xFF85]),
    "float32": (np.uint32, [0x7FC00001, 0x7F800003, 0xFF800005]),
    "float64": (np.uint64, [0x7FF8000000000001, 0x7FF0000000000003, 0xFFF0000000000005]),
}


def _dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def _values(name: str, rng, shape) -> np.ndarray:
    bits, nans = FLOATS[name]
    dtype = _dtype(name)
    special = np.concatenate([np.array(nans, bits).view(dtype), np.array([1.0, -1.0, 0.0, -0.0, 2.0], dtype)])
    return rng.choice(special, shape)


def _calls(name: str, seed: int):
    """(label, function, NumPy inputs, attributes): the copies, and max/min with duplicates."""
    rng = np.random.default_rng(seed)
    data = _values(name, rng, (6, 3))
    yield "gather", gather, (data, rng.integers(-6, 6, 9)), {}
    yield "gather_nd", gather_nd, (data, rng.integers(0, 3, (5, 2))), {}
    yield "gather_elements", gather_elements, (data, rng.integers(-6, 6, (4, 3))), {}
    yield "tensor_scatter", tensor_scatter, (_values(name, rng, (1, 6, 3)), _values(name, rng, (1, 2, 3)),
                                             np.array([2])), {"axis": 1}  # fmt: skip
    for reduction in ("none", "max", "min"):
        attrs = {"reduction": reduction}
        updates = _values(name, rng, (40, 3))
        yield f"scatter_nd {reduction}", scatter_nd, (data, rng.integers(0, 6, (40, 1)), updates), attrs
        updates = _values(name, rng, (20, 3))
        yield f"scatter_elements {reduction}", scatter_elements, (data, rng.integers(0, 6, (20, 3)), updates), attrs


@pytest.mark.parametrize("name", list(FLOATS))
@pytest.mark.parametrize("lib_name", ["torch", "jax"])
def test_nan_bits_as_the_numpy_kernels(lib_name, name):
    """Each library's own traps, all met: ATen's CPU max/min keep the last NaN and its CPU gather of a
    half type quiets a signaling NaN; XLA's max drops a NaN's sign on the CPU and its CPU canonicalizes
    a bfloat16 NaN (0x7F83 -> 0x7FC0) in any float op."""
    bits = FLOATS[name][0]
    differ = []
    with library(lib_name, x64=name == "float64") as lib:  # JAX's default, x64 off, but for float64
        for seed in range(4):
            for label, function, inputs, attrs in _calls(name, seed):
                if not all(lib.supports(a) for a in inputs):
                    pytest.skip(f"{lib_name} has no {name}")
                expected = function(*inputs, **attrs)
                got = lib.to_numpy(function(*(lib.convert(a) for a in inputs), **attrs), expected.dtype)
                if not np.array_equal(expected.view(bits), got.view(bits)):
                    differ.append(f"{label} (seed {seed})")
    assert not differ, differ
