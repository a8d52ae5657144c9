"""jaxonnxruntime as a ``gather-scatter check`` engine.

jaxonnxruntime is Google's ONNX interpreter in JAX (``jaxonnxruntime.backend.Backend``).

The worker runs JAX on the CPU (``JAX_PLATFORMS=cpu`` unless set) with 64-bit types enabled
(``jax_enable_x64``): without it JAX silently truncates int64 indices and float64 data to 32
bits, and every such case would be a finding of the configuration, not of the engine. The
version it reports names JAX's, e.g. ``0.3.0 (jax 0.10.2)``.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ._protocol import BUILTIN_UNSUPPORTED, RunOptions, distribution_version, import_engine, installed

name = "jaxonnxruntime"
unsupported = BUILTIN_UNSUPPORTED
"""jaxonnxruntime says it lacks an operator or version with NotImplementedError
(``ScatterND is not implemented.``, ``GatherElements version 11 is not implemented. Only have
those versions: [...]``), and an attribute with ``Unsupported ONNX attribute``."""


def available() -> str | None:
    """None when jaxonnxruntime (and JAX) are installed, else the pip extra to install."""
    return installed("jaxonnxruntime", "jaxonnxruntime", name) or installed("jax", "jaxonnxruntime", name)


def prepare() -> None:
    """Import JAX on the CPU with 64-bit types, then jaxonnxruntime's backend (EngineBroken where that fails)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import_engine("jax")
    import jax

    jax.config.update("jax_enable_x64", True)
    import_engine("jaxonnxruntime.backend")


def version() -> str:
    """Return the installed jaxonnxruntime's and JAX's versions, e.g. ``0.3.0 (jax 0.10.2)``."""
    return f"{distribution_version('jaxonnxruntime')} (jax {distribution_version('jax')})"


def run(model: bytes, feeds: dict[str, np.ndarray], options: RunOptions) -> list[Any]:
    """Return the model's outputs from ``Backend.prepare(model, "CPU").run(feeds)``.

    XLA runs on its CPU threads: ``options.threads`` is not used.

    Raises NotImplementedError for string inputs, which JAX arrays do not hold.
    """
    import onnx
    from jaxonnxruntime.backend import Backend

    if any(a.dtype.kind in "OUS" for a in feeds.values()):
        raise NotImplementedError("JAX arrays hold no strings")
    outputs = Backend.prepare(onnx.load_from_string(model), "CPU").run(dict(feeds))
    return [np.asarray(value) for value in outputs]


def repro(model_path: str, inputs_path: str) -> str:
    """Python code that runs the written model on its inputs ``i`` with jaxonnxruntime (x64 on).

    The code prints the outputs.
    """
    return (
        "import jax; jax.config.update('jax_enable_x64', True); import onnx; "
        "from jaxonnxruntime.backend import Backend; "
        f"print(Backend.prepare(onnx.load({model_path!r}), 'CPU').run(i))"
    )


standalone_requires = "jaxonnxruntime and jax"


def standalone_run_source(threads: int | None) -> str:
    """Return Python source of ``run(model, feeds)`` with jaxonnxruntime, for a standalone reproduction.

    It runs on JAX's CPU with 64-bit types on, as the worker runs it.
    """
    return (
        'os.environ.setdefault("JAX_PLATFORMS", "cpu")\n'
        "import jax  # noqa: E402\n\n"
        'jax.config.update("jax_enable_x64", True)  # without it JAX truncates int64/float64 to 32 bits\n'
        "from jaxonnxruntime.backend import Backend  # noqa: E402\n\n\n"
        "def run(model, feeds):\n"
        '    outputs = Backend.prepare(onnx.load_from_string(model), "CPU").run(dict(feeds))\n'
        "    return [np.asarray(value) for value in outputs]\n"
    )
