"""What an engine is: the protocol every engine meets, built-in or plugin, and its errors."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ...errors import one_line

__all__ = [
    "Engine",
    "EngineBroken",
    "EngineInvalid",
    "EngineMissing",
    "RunOptions",
    "distribution_version",
    "import_engine",
    "installed",
    "is_ml_dtype",
]


def is_ml_dtype(dtype: np.dtype) -> bool:
    """Tell whether ``dtype`` is one of ml_dtypes' (bfloat16, float8, 4-bit), which few engines' Python APIs take.

    Most are kind ``V``, but float8_e5m2 is kind ``f`` (``<f1``): a test of the kind alone
    misses it.
    """
    return dtype.kind == "V" or dtype.type.__module__.startswith("ml_dtypes")


class EngineMissing(Exception):
    """The engine cannot be used: its name is unknown, or its Python package is not installed."""


class EngineBroken(EngineMissing):
    """The engine is installed but cannot run: its import fails, its worker does not start, or
    its ``run`` raises on the simplest model."""


class EngineInvalid(EngineBroken):
    """The object an entry point names does not meet the engine protocol (:class:`Engine`)."""


@dataclass(frozen=True)
class RunOptions:
    """How the checker asks an engine to run one model.

    Attributes
    ----------
    threads : int or None
        The engine's intra-op threads, where it has them (``--threads``); None: its default.
    output : tuple of (tuple of int, numpy.dtype), or None
        The first output's expected shape and dtype, where the spec gives one (None for an
        input the spec refuses). Only an engine that must allocate its outputs needs it
        (onnxruntime, for bfloat16).
    """

    threads: int | None = None
    output: tuple[tuple[int, ...], np.dtype] | None = None


class Engine(Protocol):
    """An ONNX engine that ``gather-scatter check`` can run (a module, a class or an instance).

    Only ``name``, ``version`` and ``run`` are required; the checker calls everything but
    ``available`` and ``repro`` in a worker process, never in its own.

    Attributes
    ----------
    name : str
        The ``--engine`` name; the same as the name of its entry point.
    unsupported : tuple of str, optional
        Fragments of the engine's error messages that mean it lacks the operator or type (not
        that the input is bad). Default: none; raising ``NotImplementedError`` always means it.
    """

    name: str

    def version(self) -> str:
        """The engine's version, as the report shows it."""

    def run(self, model: bytes, feeds: dict[str, np.ndarray], options: RunOptions) -> Sequence[Any]:
        """Run ``model`` (a serialized ``onnx.ModelProto``) on ``feeds`` (inputs by name).

        Returns
        -------
        sequence
            The outputs in the graph's order, each a NumPy array (or anything ``np.asarray``
            takes; None where the engine's output cannot be held by NumPy).

        Raises
        ------
        NotImplementedError
            The engine lacks the operator version or a type of the inputs (counted as
            ``unsupported``, not a finding); so does any exception whose message holds one of
            ``unsupported``.
        Exception
            Any other: the engine refuses the input (``rejected_valid`` where the spec accepts it).
        """

    # Optional: def available(self) -> str | None  (in the checking process: None, or why it cannot
    #   run here, e.g. the pip extra to install); def prepare(self) -> None  (once per worker, before
    #   the first model: import the engine); def repro(self, model_path, inputs_path) -> str  (Python
    #   code that reproduces a finding from its written files); def standalone_run_source(self, threads)
    #   -> str  (Python source, for ``--report``'s standalone scripts, that defines ``run(model, feeds)``
    #   -> outputs with the engine's own API only, never gather_scatter; it may use ``os``, ``sys``,
    #   ``np`` and ``onnx``, which the script imports first) and ``standalone_requires`` (what the
    #   script needs installed besides numpy and onnx, e.g. ``"onnxruntime"``).


def installed(module: str, extra: str, engine: str) -> str | None:
    """None when ``module`` can be imported, else the one-line reason naming the pip extra.

    Parameters
    ----------
    module : str
        The module the engine imports (``onnxruntime``, ``onnx.reference``).
    extra : str
        The ``gather_scatter`` extra that installs it.
    engine : str
        The engine's name, for the message.

    Returns
    -------
    str or None
    """
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        found = False
    return None if found else f'engine {engine!r} is not installed: pip install "gather_scatter[{extra}]"'


def import_engine(module: str) -> None:
    """Import ``module`` (a worker's first step, so the import is not the first case's time).

    Raises
    ------
    EngineBroken
        The import fails (a missing shared library, ...): ``import MODULE failed: ERROR``.
    """
    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - installed but broken
        raise EngineBroken(f"import {module} failed: {one_line(exc, with_type=True)}"[:500]) from None


def distribution_version(distribution: str) -> str:
    """The installed version of ``distribution``, or ``(version unknown)`` where it is importable
    but not from an installed distribution."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


# Messages by which the built-in engines say they lack an operator version or type.
BUILTIN_UNSUPPORTED = (
    "NOT_IMPLEMENTED",
    "Could not find an implementation",
    "is not currently registered or supported",
    "not supported",
    "Unsupported",
    "unsupported",
    "No implementation",
    "is not implemented",
    "Cannot create",
    "doesn't support",
    "does not support",
    "Unknown type",
    "unknown type",
    "No registered implementation",
    "is unknown, known functions",
    "translating to fact",
    "Unimplemented(",
)
