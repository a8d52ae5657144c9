"""tract (Sonos' Rust ONNX engine, through its Python API) as a ``gather-scatter check`` engine."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

from ._protocol import BUILTIN_UNSUPPORTED, RunOptions, distribution_version, import_engine, installed, is_ml_dtype

name = "tract"
# and, for com.microsoft GatherBlockQuantized, the T1 types its ONNX loader lacks (int4, uint4,
# FP8, FP4; bfloat16 scales) and the widths its importer lacks (uint8 with bits 2 or 8)
unsupported = (*BUILTIN_UNSUPPORTED, "Unknown DatumType", "only bits=4 is supported")


def available() -> str | None:
    """None when tract is installed, else the pip extra to install."""
    return installed("tract", "tract", name)


def prepare() -> None:
    """Import tract (EngineBroken where that fails)."""
    import_engine("tract")


def version() -> str:
    """Return the installed tract's version."""
    return distribution_version("tract")


def run(model: bytes, feeds: dict[str, np.ndarray], options: RunOptions) -> list[Any]:
    """Return the model's outputs from tract's runnable (inputs in the graph's order; no threads).

    Raises NotImplementedError for string and ml_dtypes inputs, which its Python API does not take.
    """
    import tract

    if any(a.dtype.kind in "OUS" or is_ml_dtype(a.dtype) for a in feeds.values()):
        raise NotImplementedError("tract's Python API takes no string or ml_dtypes arrays")
    with tempfile.TemporaryDirectory() as tmp:  # tract reads models from a path
        path = os.path.join(tmp, "model.onnx")
        with open(path, "wb") as f:
            f.write(model)
        runnable = tract.onnx().load(path).into_model().into_runnable()
    return [value.to_numpy() for value in runnable.run(list(feeds.values()))]


def repro(model_path: str, inputs_path: str) -> str:
    """Python code that runs the written model on its inputs with tract and prints the outputs."""
    return (
        "import tract; print([t.to_numpy() for t in "
        f"tract.onnx().load({model_path!r}).into_model().into_runnable().run(list(i.values()))])"
    )


standalone_requires = "tract"


def standalone_run_source(threads: int | None) -> str:
    """Return Python source of ``run(model, feeds)`` with tract's Python API, for a standalone reproduction.

    It reads models from a path; inputs go in the graph's order.
    """
    return (
        "import tempfile\n\n"
        "import tract\n\n\n"
        "def run(model, feeds):\n"
        "    with tempfile.TemporaryDirectory() as tmp:\n"
        '        path = os.path.join(tmp, "model.onnx")\n'
        '        with open(path, "wb") as f:\n'
        "            f.write(model)\n"
        "        runnable = tract.onnx().load(path).into_model().into_runnable()\n"
        "    return [value.to_numpy() for value in runnable.run(list(feeds.values()))]\n"
    )
