"""onnxruntime (CPU execution provider) as a ``gather-scatter check`` engine."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._protocol import BUILTIN_UNSUPPORTED, RunOptions, distribution_version, import_engine, installed, is_ml_dtype

name = "onnxruntime"
unsupported = BUILTIN_UNSUPPORTED


def available() -> str | None:
    """None when onnxruntime is installed, else the pip extra to install."""
    return installed("onnxruntime", "onnxruntime", name)


def prepare() -> None:
    """Import onnxruntime (EngineBroken where that fails)."""
    import_engine("onnxruntime")


def version() -> str:
    """Return the installed onnxruntime's version."""
    return distribution_version("onnxruntime")


def _value(ort, array: np.ndarray):
    if array.dtype.kind == "V" or array.dtype.name.startswith(("float8", "int4", "uint4", "float4")):
        from onnx import helper

        onnx_type = helper.np_dtype_to_tensor_dtype(array.dtype)
        if array.dtype.itemsize != 2 or array.dtype.name != "bfloat16":
            raise NotImplementedError(f"onnxruntime's Python API takes no {array.dtype} arrays")
        bits = np.array(array, order="C").view(np.uint16)  # (ascontiguousarray makes a 0-d array 1-d)
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, onnx_type)
    return ort.OrtValue.ortvalue_from_numpy(np.array(array, order="C"))


def session_options(ort, threads: int | None):
    """Return onnxruntime ``SessionOptions``: silent, ``threads`` intra-op threads without spinning.

    Parameters
    ----------
    ort : module
        The imported ``onnxruntime``.
    threads : int or None
        Intra-op threads (``--threads``); None: onnxruntime's default.

    Returns
    -------
    onnxruntime.SessionOptions
    """
    options = ort.SessionOptions()
    options.log_severity_level = 4
    if threads:
        options.intra_op_num_threads = threads
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def run_session(ort, session, feeds: dict[str, np.ndarray], options: RunOptions) -> list[Any]:
    """Return ``session``'s outputs on ``feeds``, ml_dtypes inputs as OrtValues.

    Plain arrays go through ``session.run``. ml_dtypes inputs go in as OrtValues (bfloat16 only:
    NotImplementedError for the others), and a bfloat16 output into a host buffer of
    ``options.output``'s shape (bound with ``io_binding``, so any execution provider copies into it).

    Parameters
    ----------
    ort : module
        The imported ``onnxruntime``.
    session : onnxruntime.InferenceSession
        The session of the model, on whatever providers.
    feeds : dict of str to numpy.ndarray
        The inputs by name.
    options : RunOptions
        Its ``output`` gives the first output's shape and dtype (None: the input is one the spec
        refuses, and only whether it is accepted matters).

    Returns
    -------
    list
    """
    if not any(is_ml_dtype(a.dtype) for a in feeds.values()):
        return session.run(None, feeds)
    values = {key: _value(ort, a) for key, a in feeds.items()}
    if options.output is None:  # an input we refuse: only whether it is accepted matters
        session.run_with_ort_values(None, values)
        return [None]
    shape, dtype = options.output
    binding = session.io_binding()
    for key, value in values.items():
        binding.bind_ortvalue_input(key, value)
    buffer = np.zeros(shape, dtype=np.uint16)
    from onnx import helper

    binding.bind_ortvalue_output(
        session.get_outputs()[0].name,
        ort.OrtValue.ortvalue_from_numpy_with_onnx_type(buffer, helper.np_dtype_to_tensor_dtype(np.dtype(dtype))),
    )
    session.run_with_iobinding(binding)
    return [buffer.view(dtype)]


def run(model: bytes, feeds: dict[str, np.ndarray], options: RunOptions) -> list[Any]:
    """Return the model's outputs from an onnxruntime CPU session.

    The session has ``options.threads`` intra-op threads (no spinning); ml_dtypes inputs as
    :func:`run_session` takes them.
    """
    import onnxruntime as ort

    session = ort.InferenceSession(model, session_options(ort, options.threads), providers=["CPUExecutionProvider"])
    return run_session(ort, session, feeds, options)


def repro(model_path: str, inputs_path: str) -> str:
    """Python code that runs the written model on its inputs with onnxruntime and prints the outputs."""
    return (
        "import onnxruntime as ort; "
        f"print(ort.InferenceSession({model_path!r}, providers=['CPUExecutionProvider']).run(None, i))"
    )


standalone_requires = "onnxruntime"


def options_source(threads: int | None) -> str:
    """Return the lines of a standalone ``run`` that make its ``options`` (``threads`` intra-op threads, no spinning).

    Parameters
    ----------
    threads : int or None
        As :func:`session_options` takes them.

    Returns
    -------
    str
        Python source, indented for a function body.
    """
    config = (
        ""
        if not threads
        else (
            f"    options.intra_op_num_threads = {threads}\n"
            '    options.add_session_config_entry("session.intra_op.allow_spinning", "0")\n'
        )
    )
    return "    options = ort.SessionOptions()\n" + config


def standalone_run_source(threads: int | None) -> str:
    """Return Python source of ``run(model, feeds)`` with onnxruntime's own API, for a standalone reproduction.

    A CPU session with ``threads`` intra-op threads, no spinning.
    """
    return (
        "import onnxruntime as ort\n\n\n"
        "def run(model, feeds):\n"
        f"{options_source(threads)}"
        '    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])\n'
        "    return session.run(None, feeds)\n"
    )
