"""onnxruntime's CUDA execution provider (the ``onnxruntime-gpu`` wheel) as a ``gather-scatter check`` engine.

The ``onnxruntime-gpu`` wheel installs the same ``onnxruntime`` module as the CPU wheel, in its
place: the two never share an environment, so this engine runs from a venv of its own
(``pip install "gather_scatter[onnxruntime-cuda]"``), where the ``onnxruntime`` engine then
runs the GPU wheel's CPU provider.

Each model gets a session with ``providers=["CUDAExecutionProvider"]``, and it is this engine's
only where the session really has that provider. onnxruntime falls back to the CPU silently in
two ways, and neither is let through as CUDA's result:

- the whole session: where the CUDA provider does not load (no GPU, no driver, CUDA or cuDNN
  libraries missing), onnxruntime logs a warning and makes a CPU session, and where creating
  the session on CUDA raises, its Python API retries on the CPU. Every session is made with
  ``enable_fallback=0`` (and ``disable_fallback()``, for ``session.run``'s retry after an EP
  failure) and its ``get_providers()`` checked: the worker's first step (``prepare``) refuses
  the engine (EngineBroken: it cannot run here) where a one-node Gather's session lacks CUDA, and
  a later session without it is an error naming the fallback, never an output;
- single nodes: an operator, version or type that the CUDA provider has no kernel for is assigned
  to the CPU provider inside the session (with copies between them). That is onnxruntime's own
  partitioning and what its users get from a CUDA session, so those nodes' results count as this
  engine's; which provider ran a node is not recorded.

``available()`` answers in the checking process from the installed package alone, without
loading the CUDA provider: ``onnxruntime`` not installed (the extra), or installed without
``CUDAExecutionProvider`` in ``get_available_providers()`` (the CPU build). Whether a GPU is
there is asked in the worker, by that first session. ml_dtypes feeds go in as the CPU engine
passes them (:func:`~gather_scatter.check.engines.onnxruntime.run_session`).
"""

from __future__ import annotations

import contextlib
import io
import sys
from typing import Any

import numpy as np

from ...errors import one_line
from ._protocol import BUILTIN_UNSUPPORTED, EngineBroken, RunOptions, distribution_version, import_engine, installed
from .onnxruntime import options_source, run_session, session_options

name = "onnxruntime-cuda"
unsupported = BUILTIN_UNSUPPORTED

PROVIDER = "CUDAExecutionProvider"
"""The execution provider every session of this engine asks for, and must get."""

OWN_VENV = "in a venv of its own (onnxruntime-gpu replaces the CPU onnxruntime wheel)"


class CPUFallback(RuntimeError):
    """onnxruntime made a session without the CUDA execution provider (its outputs would be the CPU's)."""


def version() -> str:
    """Return the installed onnxruntime-gpu's version (onnxruntime's, where another distribution provides it)."""
    found = distribution_version("onnxruntime-gpu")
    return found if found != "(version unknown)" else distribution_version("onnxruntime")


def available() -> str | None:
    """None where onnxruntime's CUDA build is installed, else why this engine cannot run here.

    Read from the installed package (``onnxruntime.get_available_providers()``, which loads no
    CUDA library): not installed (the extra to install, in a venv of its own), or the CPU build.
    A missing GPU or CUDA library shows when the worker starts (:func:`prepare`).
    """
    missing = installed("onnxruntime", "onnxruntime-cuda", name)
    if missing:
        return f"{missing}, {OWN_VENV}"
    try:
        import onnxruntime

        providers = list(onnxruntime.get_available_providers())
    except Exception as exc:  # noqa: BLE001 - installed but broken
        return f"engine {name!r} cannot run here: import onnxruntime failed: {one_line(exc, with_type=True)}"[:500]
    if PROVIDER in providers:
        return None
    return (
        f"engine {name!r} cannot run here: the installed onnxruntime {version()} is the CPU build (its providers: "
        f'{", ".join(providers)}); it needs onnxruntime-gpu, {OWN_VENV}: pip install "gather_scatter[onnxruntime-cuda]"'
    )


def _session(ort, model: bytes, threads: int | None):
    """Return a session of ``model`` on the CUDA provider, or raise :class:`CPUFallback`.

    onnxruntime's retries on the CPU are turned off where it has the switch; where a retry
    happens anyway (an older onnxruntime), the EP error it printed is in the message.
    """
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):  # an older onnxruntime prints its EP error before retrying on the CPU
        session = ort.InferenceSession(model, session_options(ort, threads), providers=[PROVIDER], enable_fallback=0)
    disable = getattr(session, "disable_fallback", None)
    if disable is not None:
        disable()  # no retry on the CPU after an EP failure in session.run either
    providers = list(session.get_providers())
    if PROVIDER in providers:
        return session
    said = one_line(printed.getvalue())
    raise CPUFallback(
        f"onnxruntime made the session on {', '.join(providers)}, without {PROVIDER}"
        + (f" ({said})" if said else "")
        + ": its outputs would be the CPU's, not CUDA's"
    )


def prepare() -> None:
    """Import onnxruntime and run a one-node Gather on the CUDA provider: EngineBroken where it cannot.

    CUDA and cuDNN from the ``nvidia-*`` wheels are loaded first where onnxruntime can
    (``onnxruntime.preload_dlls``), as onnxruntime's install guide does for them; what it prints
    goes to the worker's log. No GPU, a CUDA library missing, or a session that falls back to the
    CPU: the engine cannot run here (the reason in one line).
    """
    import_engine("onnxruntime")
    import onnxruntime as ort

    if PROVIDER not in ort.get_available_providers():
        raise EngineBroken(f"the installed onnxruntime {version()} is the CPU build: it has no {PROVIDER}")
    preload = getattr(ort, "preload_dlls", None)
    if preload is not None:
        try:
            preload()
        except Exception as exc:  # noqa: BLE001 - the session below says whether CUDA loads
            print(f"onnxruntime.preload_dlls() failed: {one_line(exc, with_type=True)}", file=sys.stderr)
    from ._worker import _smoke_model

    model, feeds = _smoke_model()
    try:
        _session(ort, model, None).run(None, feeds)
    except CPUFallback as exc:
        raise EngineBroken(
            f"{exc} (no usable GPU here, or the CUDA or cuDNN libraries that onnxruntime-gpu {version()} needs are "
            "missing: see the worker's log)"[:500]
        ) from None
    except Exception as exc:  # noqa: BLE001 - no device, a driver too old, ...
        raise EngineBroken(
            f"a one-node Gather on {PROVIDER} failed (no usable GPU here?): {one_line(exc, with_type=True)}"[:500]
        ) from None


def run(model: bytes, feeds: dict[str, np.ndarray], options: RunOptions) -> list[Any]:
    """Return the model's outputs from an onnxruntime session on the CUDA execution provider.

    ``options.threads`` intra-op threads (for the nodes onnxruntime leaves on the CPU); ml_dtypes
    inputs as the CPU engine passes them. A session that onnxruntime made without the CUDA
    provider raises :class:`CPUFallback` (the engine's error, never the CPU's outputs).
    """
    import onnxruntime as ort

    return run_session(ort, _session(ort, model, options.threads), feeds, options)


def repro(model_path: str, inputs_path: str) -> str:
    """Python code that runs the written model on its inputs on onnxruntime's CUDA provider and prints the outputs.

    It fails (AssertionError) where the session is not on the CUDA provider.
    """
    return (
        "import onnxruntime as ort; "
        f"s = ort.InferenceSession({model_path!r}, providers=[{PROVIDER!r}], enable_fallback=0); "
        f"assert {PROVIDER!r} in s.get_providers(), f'not on CUDA: {{s.get_providers()}}'; "
        "print(s.run(None, i))"
    )


standalone_requires = "onnxruntime-gpu (a CUDA GPU)"


def standalone_run_source(threads: int | None) -> str:
    """Return Python source of ``run(model, feeds)`` with onnxruntime's own API on the CUDA provider.

    For a standalone reproduction: ``threads`` intra-op threads as the CPU engine's, CUDA and
    cuDNN preloaded where onnxruntime can, no fallback to the CPU; a session without the CUDA
    provider is the script's "could not run", not a verdict.
    """
    return (
        "import onnxruntime as ort\n\n"
        'if hasattr(ort, "preload_dlls"):  # CUDA and cuDNN from the nvidia-* wheels, where they are\n'
        "    ort.preload_dlls()\n\n\n"
        "def run(model, feeds):\n"
        f"{options_source(threads)}"
        f'    session = ort.InferenceSession(model, options, providers=["{PROVIDER}"], enable_fallback=0)\n'
        f'    if "{PROVIDER}" not in session.get_providers():  # onnxruntime fell back to the CPU\n'
        f'        could_not_run(f"no {PROVIDER} here (the session runs on {{session.get_providers()}})")\n'
        "    session.disable_fallback()\n"
        "    return session.run(None, feeds)\n"
    )
