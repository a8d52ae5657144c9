"""OpenVINO (CPU plugin) as a ``gather-scatter check`` engine."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._protocol import BUILTIN_UNSUPPORTED, RunOptions, distribution_version, import_engine, installed, is_ml_dtype

name = "openvino"
unsupported = BUILTIN_UNSUPPORTED


def available() -> str | None:
    """None when OpenVINO is installed, else the pip extra to install."""
    return installed("openvino", "openvino", name)


def prepare() -> None:
    """Import openvino (EngineBroken where that fails)."""
    import_engine("openvino")


def version() -> str:
    """Return the installed OpenVINO's version."""
    return distribution_version("openvino")


def run(model: bytes, feeds: dict[str, np.ndarray], options: RunOptions) -> list[Any]:
    """Return the model's outputs, compiled for the CPU with ``options.threads`` inference threads.

    Raises NotImplementedError for ml_dtypes inputs, whose bfloat16 bits it would read as float16.
    """
    import openvino as ov

    if any(is_ml_dtype(a.dtype) for a in feeds.values()):
        raise NotImplementedError("OpenVINO's Python API takes no ml_dtypes (bfloat16, float8, 4-bit) arrays")
    core = ov.Core()
    config = {"INFERENCE_NUM_THREADS": options.threads} if options.threads else {}
    compiled = core.compile_model(core.read_model(model), "CPU", config)
    result = compiled(feeds)
    return [_typed(np.asarray(value), port) for port, value in zip(compiled.outputs, result.values(), strict=False)]


def _typed(array: np.ndarray, port: Any) -> np.ndarray:
    """Return ``array`` as its output's element type.

    A bfloat16 output comes back from OpenVINO's Python API as a float16 array holding bfloat16
    bits (GatherBlockQuantized with bfloat16 scales).
    """
    import openvino as ov

    if array.dtype == np.float16 and port.get_element_type() == ov.Type.bf16:
        import ml_dtypes

        return array.view(ml_dtypes.bfloat16)
    return array


def repro(model_path: str, inputs_path: str) -> str:
    """Python code that runs the written model on its inputs with OpenVINO and prints the outputs."""
    return f"import openvino as ov; print(ov.Core().compile_model({model_path!r}, 'CPU')(i))"


standalone_requires = "openvino"


def standalone_run_source(threads: int | None) -> str:
    """Return Python source of ``run(model, feeds)`` with OpenVINO's own API, for a standalone reproduction.

    The model is compiled for the CPU with ``threads`` inference threads.
    """
    config = f'{{"INFERENCE_NUM_THREADS": {threads}}}' if threads else "{}"
    return (
        "import ml_dtypes\nimport openvino as ov\n\n\n"
        "def run(model, feeds):\n"
        "    core = ov.Core()\n"
        f'    compiled = core.compile_model(core.read_model(model), "CPU", {config})\n'
        "    outputs = [np.asarray(value) for value in compiled(feeds).values()]\n"
        "    # a bfloat16 output comes back as a float16 array holding bfloat16 bits\n"
        "    bf16 = [port.get_element_type() == ov.Type.bf16 for port in compiled.outputs]\n"
        "    return [a.view(ml_dtypes.bfloat16) if b and a.dtype == np.float16 else a for a, b in zip(outputs, bf16)]\n"
    )
