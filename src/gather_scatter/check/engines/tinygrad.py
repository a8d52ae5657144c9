"""tinygrad (its ONNX runner, ``tinygrad.nn.onnx.OnnxRunner``) as a ``gather-scatter check`` engine.

tinygrad picks its device from the environment when it is imported. The worker sets ``DEV`` to
``CPU`` where a ``clang`` compiler is on the PATH (tinygrad's CPU backend compiles each kernel
with it) and to ``PYTHON`` (tinygrad's pure-Python emulator of its kernel language: no compiler,
slower, the same lowering) otherwise, unless ``DEV`` is already set; the version it reports
names the device, e.g. ``0.14.0 (PYTHON)``.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import numpy as np

from ._protocol import BUILTIN_UNSUPPORTED, RunOptions, distribution_version, import_engine, installed, is_ml_dtype

name = "tinygrad"
unsupported = (*BUILTIN_UNSUPPORTED, "is not a valid OnnxDataType")
"""tinygrad's messages for an operator, opset or type it lacks (``op='X' is not supported``,
``15 is not a valid OnnxDataType`` for complex types)."""


def available() -> str | None:
    """None when tinygrad is installed, else the pip extra to install."""
    return installed("tinygrad", "tinygrad", name)


def prepare() -> None:
    """Choose tinygrad's device (``DEV``: CPU with clang, else PYTHON) and import it (EngineBroken where that fails)."""
    if not os.environ.get("DEV"):
        os.environ["DEV"] = "CPU" if shutil.which("clang") else "PYTHON"
    import_engine("tinygrad")
    import_engine("tinygrad.nn.onnx")


def version() -> str:
    """Return the installed tinygrad's version and device, e.g. ``0.14.0 (PYTHON)``."""
    from tinygrad import Device

    return f"{distribution_version('tinygrad')} ({Device.DEFAULT})"


def run(model: bytes, feeds: dict[str, np.ndarray], options: RunOptions) -> list[Any]:
    """Return the model's outputs from ``OnnxRunner`` on tinygrad's default device, realized to NumPy.

    ``options.threads`` is not used.

    Raises NotImplementedError for string and ml_dtypes inputs, which tinygrad tensors do not hold.
    """
    from tinygrad import Tensor
    from tinygrad.nn.onnx import OnnxRunner

    if any(a.dtype.kind in "OUS" or is_ml_dtype(a.dtype) for a in feeds.values()):
        raise NotImplementedError(
            "tinygrad tensors hold no string or ml_dtypes (bfloat16 from NumPy, float8, 4-bit) arrays"
        )
    runner = OnnxRunner(Tensor(model))
    outputs = runner({k: np.array(v, order="C") for k, v in feeds.items()})
    return [value.numpy() if isinstance(value, Tensor) else np.asarray(value) for value in outputs.values()]


def repro(model_path: str, inputs_path: str) -> str:
    """Python code that runs the written model on its inputs ``i`` with tinygrad's ONNX runner.

    The code prints the outputs.
    """
    return (
        "import os, shutil; os.environ['DEV'] = os.environ.get('DEV') or "
        "('CPU' if shutil.which('clang') else 'PYTHON'); from tinygrad.nn.onnx import OnnxRunner; "
        f"print([t.numpy() for t in OnnxRunner({model_path!r})(i).values()])"
    )


standalone_requires = "tinygrad"


def standalone_run_source(threads: int | None) -> str:
    """Return Python source of ``run(model, feeds)`` with tinygrad's ONNX runner, for a standalone reproduction.

    ``DEV`` is chosen as the worker chooses it, before tinygrad is imported.
    """
    return (
        "import shutil\n\n"
        'os.environ["DEV"] = os.environ.get("DEV") or ("CPU" if shutil.which("clang") else "PYTHON")\n'
        "from tinygrad import Tensor  # noqa: E402 - after DEV is set\n"
        "from tinygrad.nn.onnx import OnnxRunner  # noqa: E402\n\n\n"
        "def run(model, feeds):\n"
        '    outputs = OnnxRunner(Tensor(model))({k: np.array(v, order="C") for k, v in feeds.items()})\n'
        "    return [v.numpy() if isinstance(v, Tensor) else np.asarray(v) for v in outputs.values()]\n"
    )
