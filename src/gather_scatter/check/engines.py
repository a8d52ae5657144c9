"""Other ONNX engines, each run out of process by a worker that is restarted after a crash.

An engine call never runs in the checking process: a crash (a Rust panic, a segfault, an
abort) or a hang kills only the worker, and is itself the finding. The worker answers each
request with one :class:`Outcome`:

- ``ok``: the engine's first output, as a NumPy array (``None`` when the engine returned one
  that NumPy cannot hold; only whether it accepted the input matters then);
- ``error``: the engine refused the input (its message);
- ``unsupported``: the engine says it does not implement the operator or type (not a bug);
- ``crash`` / ``timeout``: the worker died, or did not answer within the time limit.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import multiprocessing
import os
import signal
import tempfile
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

__all__ = ["ENGINES", "EngineBroken", "EngineMissing", "Outcome", "Worker", "engine_version", "require"]

# engine -> (module that must be importable, distribution whose version is reported, pip extra)
ENGINES: dict[str, tuple[str, str, str]] = {
    "onnxruntime": ("onnxruntime", "onnxruntime", "onnxruntime"),
    "reference": ("onnx.reference", "onnx", "reference"),
    "openvino": ("openvino", "openvino", "openvino"),
    "tract": ("tract", "tract", "tract"),
}

# Messages by which an engine says it lacks an operator version or type, not that the input is bad.
_UNSUPPORTED = (
    "NOT_IMPLEMENTED", "Could not find an implementation", "is not currently registered or supported",
    "not supported", "Unsupported", "unsupported", "No implementation", "is not implemented",
    "Cannot create", "doesn't support", "does not support", "Unknown type", "unknown type",
    "No registered implementation", "is unknown, known functions", "translating to fact", "Unimplemented(",
)


class EngineMissing(Exception):
    """The engine's Python package is not installed."""


class EngineBroken(EngineMissing):
    """The engine is installed but cannot run: its import fails, or its worker does not start."""


def require(engine: str) -> None:
    """EngineMissing (one line, naming the extra to install) unless ``engine`` can run here."""
    if engine not in ENGINES:
        raise EngineMissing(f"unknown engine {engine!r} (engines: {', '.join(ENGINES)})")
    module, _, extra = ENGINES[engine]
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        raise EngineMissing(f"engine {engine!r} is not installed: pip install \"gather_scatter[{extra}]\"")


def engine_version(engine: str) -> str:
    try:
        return importlib.metadata.version(ENGINES[engine][1])
    except importlib.metadata.PackageNotFoundError:  # importable, but not from an installed distribution
        return "(version unknown)"


@dataclass
class Outcome:
    kind: str  # ok, error, unsupported, crash, timeout
    output: Any = None
    message: str = ""


class _Unsupported(Exception):
    pass


# ----------------------------------------------------------------------------- in the worker


def _ort_value(ort, array: np.ndarray):
    if array.dtype.kind == "V" or array.dtype.name.startswith(("float8", "int4", "uint4", "float4")):
        from onnx import helper

        onnx_type = helper.np_dtype_to_tensor_dtype(array.dtype)
        if array.dtype.itemsize != 2 or array.dtype.name != "bfloat16":
            raise _Unsupported(f"onnxruntime's Python API takes no {array.dtype} arrays")
        bits = np.array(array, order="C").view(np.uint16)  # (ascontiguousarray makes a 0-d array 1-d)
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, onnx_type)
    return ort.OrtValue.ortvalue_from_numpy(np.array(array, order="C"))


def _run_onnxruntime(model: bytes, feeds: dict, threads: int | None, out_hint) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4
    if threads:
        options.intra_op_num_threads = threads
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    if not any(a.dtype.kind == "V" for a in feeds.values()):
        return session.run(None, feeds)[0]
    values = {name: _ort_value(ort, a) for name, a in feeds.items()}
    if out_hint is None:  # an input we refuse: only whether it is accepted matters
        session.run_with_ort_values(None, values)
        return None
    shape, dtype = out_hint
    binding = session.io_binding()
    for name, value in values.items():
        binding.bind_ortvalue_input(name, value)
    buffer = np.zeros(shape, dtype=np.uint16)
    from onnx import helper

    binding.bind_ortvalue_output(session.get_outputs()[0].name, ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
        buffer, helper.np_dtype_to_tensor_dtype(np.dtype(dtype))))
    session.run_with_iobinding(binding)
    return buffer.view(dtype)


def _run_reference(model: bytes, feeds: dict, threads: int | None, out_hint) -> Any:
    import onnx
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(onnx.load_from_string(model)).run(None, feeds)[0]


def _run_openvino(model: bytes, feeds: dict, threads: int | None, out_hint) -> Any:
    import openvino as ov

    if any(a.dtype.kind == "V" for a in feeds.values()):  # it would read bfloat16 bits as float16
        raise _Unsupported("OpenVINO's Python API takes no ml_dtypes (bfloat16, float8, 4-bit) arrays")
    core = ov.Core()
    config = {"INFERENCE_NUM_THREADS": threads} if threads else {}
    compiled = core.compile_model(core.read_model(model), "CPU", config)
    result = compiled(feeds)
    return np.asarray(next(iter(result.values())))


def _run_tract(model: bytes, feeds: dict, threads: int | None, out_hint) -> Any:
    import tract

    if any(a.dtype.kind in "OUSV" for a in feeds.values()):
        raise _Unsupported("tract's Python API takes no string or ml_dtypes arrays")

    with tempfile.TemporaryDirectory() as tmp:  # tract reads models from a path
        path = os.path.join(tmp, "model.onnx")
        with open(path, "wb") as f:
            f.write(model)
        runnable = tract.onnx().load(path).into_model().into_runnable()
    return runnable.run(list(feeds.values()))[0].to_numpy()


_RUNNERS: dict[str, Callable[..., Any]] = {
    "onnxruntime": _run_onnxruntime, "reference": _run_reference, "openvino": _run_openvino, "tract": _run_tract,
}


def _serve(conn, engine: str, threads: int | None, log: str) -> None:
    """The worker's loop: one request in, one (kind, output, message) out, until the pipe closes.
    The engine's own stderr (a panic's message) goes to ``log``, for the crash's detail."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the checker's to handle (it then ends the worker)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(fd, 2)
    run = _RUNNERS[engine]
    try:
        importlib.import_module(ENGINES[engine][0])  # the engine's import is not the first case's time
    except Exception as exc:  # noqa: BLE001 - installed but broken (a missing shared library, ...)
        conn.send(("import failed", f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:500]))
        return
    conn.send("ready")
    while True:
        try:
            model, feeds, out_hint = conn.recv()
        except EOFError:
            return
        try:
            output = run(model, feeds, threads, out_hint)
            reply = ("ok", output if isinstance(output, np.ndarray) or output is None else np.asarray(output), "")
        except _Unsupported as exc:
            reply = ("unsupported", None, str(exc))
        except Exception as exc:  # noqa: BLE001 - the engine's refusal is the answer
            text = f"{type(exc).__name__}: {exc}"
            reply = ("unsupported" if any(s in text for s in _UNSUPPORTED) else "error", None, text[:2000])
        try:
            conn.send(reply)
        except Exception as exc:  # noqa: BLE001 - an output that cannot be sent back (an odd dtype)
            conn.send(("ok", None, f"output not transferable: {exc}"))


_STARTUP_S = 300  # a worker's start: Python, NumPy and the engine imported, before any case


class Worker:
    """One engine in a child process; restarted after a crash or a timeout. The per-case
    ``timeout`` starts once the worker is up, so an engine's slow import is no hang."""

    def __init__(self, engine: str, threads: int | None = None, timeout: float = 30.0) -> None:
        require(engine)
        self.engine, self.threads, self.timeout = engine, threads, timeout
        self._context = multiprocessing.get_context("spawn")
        self._process = None
        self._conn = None
        self.restarts = 0
        self._log = tempfile.NamedTemporaryFile(prefix=f"gather-scatter-{engine}-", suffix=".log", delete=False).name

    def _start(self) -> None:
        parent, child = self._context.Pipe()
        with open(self._log, "w"):  # each worker starts a fresh log
            pass
        self._process = self._context.Process(target=_serve, args=(child, self.engine, self.threads, self._log),
                                              daemon=True)
        self._process.start()
        child.close()
        self._conn = parent
        try:
            answer = parent.recv() if parent.poll(_STARTUP_S) else None
        except EOFError:  # the engine's import killed the worker
            self._process.join(5)
            answer = ("died", f"its worker died while importing it (exit code {self._process.exitcode})"
                              f"{self._last_words()}")
        if answer != "ready":
            self._stop()
            module = ENGINES[self.engine][0]
            if answer is None:
                why = f"its worker did not start within {_STARTUP_S} s{self._last_words()}"
            elif answer[0] == "import failed":
                why = f"import {module} failed: {answer[1]}"
            else:
                why = answer[1]
            raise EngineBroken(f"engine {self.engine!r} is installed but cannot run: {why}")

    def _stop(self) -> None:
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join(5)
            self._conn.close()
        self._process = self._conn = None

    def run(self, model: bytes, feeds: dict, out_hint=None) -> Outcome:
        """The engine's answer for one model and its inputs (see the module docstring)."""
        if self._process is None:
            self._start()
        try:
            self._conn.send((model, feeds, out_hint))
            if not self._conn.poll(self.timeout):
                self._stop()
                self.restarts += 1
                return Outcome("timeout", message=f"no answer within {self.timeout:g} s")
            kind, output, message = self._conn.recv()
            return Outcome(kind, output, message)
        except (EOFError, OSError):  # the pipe broke: the worker died
            self._process.join(5)
            code = self._process.exitcode
            self._stop()
            self.restarts += 1
            return Outcome("crash", message=f"the engine's process died (exit code {code}){self._last_words()}")

    def _last_words(self) -> str:
        """What the engine printed last before dying (its panic or abort message), one line."""
        try:
            with open(self._log, errors="replace") as f:
                lines = [line.strip() for line in f.read(1 << 20).splitlines() if line.strip()]
        except OSError:
            return ""
        for i, line in enumerate(lines):  # a Rust panic: where, then what
            if "panicked at" in line:
                return f": {line[:200]} {lines[i + 1][:200] if i + 1 < len(lines) else ''}".rstrip()
        return f": {lines[-1][:300]}" if lines else ""

    def close(self) -> None:
        self._stop()
        try:
            os.unlink(self._log)
        except OSError:
            pass

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
