"""onnx.reference (``ReferenceEvaluator``, always installed with onnx) as a ``gather-scatter check`` engine.

Named ``onnx-reference``; its old name ``reference`` still works, with a note
(``_registry.RENAMED``): ``reference`` is our oracle elsewhere, the engine ``gather_scatter`` here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._protocol import BUILTIN_UNSUPPORTED, RunOptions, distribution_version, import_engine, installed

name = "onnx-reference"
unsupported = BUILTIN_UNSUPPORTED


def available() -> str | None:
    """None when onnx.reference can be imported (onnx is a dependency), else why not."""
    return installed("onnx.reference", "onnx-reference", name)


def prepare() -> None:
    """Import onnx.reference (EngineBroken where that fails)."""
    import_engine("onnx.reference")


def version() -> str:
    """Return the installed onnx's version."""
    return distribution_version("onnx")


def run(model: bytes, feeds: dict[str, np.ndarray], options: RunOptions) -> list[Any]:
    """Return the model's outputs from ``onnx.reference.ReferenceEvaluator`` (it has no threads)."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    return list(ReferenceEvaluator(onnx.load_from_string(model)).run(None, feeds))


def repro(model_path: str, inputs_path: str) -> str:
    """Python code that runs the written model on its inputs with onnx.reference and prints the outputs."""
    return (
        "import onnx; from onnx.reference import ReferenceEvaluator as R; "
        f"print(R(onnx.load({model_path!r})).run(None, i))"
    )


standalone_requires = "onnx.reference (part of onnx)"


def standalone_run_source(threads: int | None) -> str:
    """Return Python source of ``run(model, feeds)`` with ``onnx.reference.ReferenceEvaluator``.

    For a standalone reproduction (it has no threads).
    """
    return (
        "from onnx.reference import ReferenceEvaluator\n\n\n"
        "def run(model, feeds):\n"
        "    return ReferenceEvaluator(onnx.load_from_string(model)).run(None, feeds)\n"
    )
