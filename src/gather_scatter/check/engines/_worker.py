"""The worker process an engine runs in, restarted after a crash or a hang."""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import one_line
from ._protocol import EngineBroken, EngineMissing, RunOptions
from ._registry import canonical, load, require

__all__ = ["Outcome", "Worker", "run_in_process"]


@dataclass
class Outcome:
    """The engine's answer to one request.

    Attributes
    ----------
    kind : {'ok', 'error', 'unsupported', 'crash', 'timeout'}
    output : numpy.ndarray or None
        The first output where ``kind`` is ``ok`` (None where NumPy cannot hold it).
    message : str
        The engine's error message, or what happened to its process.
    outputs : tuple
        Every output where ``kind`` is ``ok``, in the graph's order.
    """

    kind: str
    output: Any = None
    message: str = ""
    outputs: tuple = ()


def _answer(engine, model: bytes, feeds: dict, options: RunOptions) -> tuple:
    """(kind, outputs, message) of one ``engine.run``: a refusal is an answer, not an error here."""
    try:
        outputs = engine.run(model, feeds, options)
        if isinstance(outputs, np.ndarray) or outputs is None:
            raise TypeError(f"run() returned {type(outputs).__name__}, not a sequence of outputs")
        outputs = tuple(o if isinstance(o, np.ndarray) or o is None else np.asarray(o) for o in outputs)
        return "ok", outputs, ""
    except NotImplementedError as exc:
        return "unsupported", (), str(exc)
    except Exception as exc:  # noqa: BLE001 - the engine's refusal is the answer
        text = f"{type(exc).__name__}: {exc}"
        refused = any(s in text for s in getattr(engine, "unsupported", ()))
        return ("unsupported" if refused else "error"), (), text[:2000]


def _smoke_model() -> tuple[bytes, dict]:
    """A Gather-13 of three floats, which every engine runs: its ``run`` raising here means the
    engine (or plugin) is broken, not that it refuses one case."""
    from onnx import TensorProto, helper

    node = helper.make_node("Gather", ["x0", "x1"], ["y"], axis=0)
    graph = helper.make_graph(
        [node],
        "smoke",
        [
            helper.make_tensor_value_info("x0", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("x1", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString(), {"x0": np.array([1, 2, 3], np.float32), "x1": np.array([2, 0], np.int64)}


def _start_engine(name: str) -> tuple[Any, str]:
    """In the worker: the engine loaded, prepared (imported), its version, and one smoke run.

    Raises
    ------
    EngineBroken
        Any of these steps fails (the message says which).
    """
    engine = load(name)
    try:
        if hasattr(engine, "prepare"):
            engine.prepare()
        version = engine.version()
        if not isinstance(version, str):
            raise TypeError(f"version() returned {type(version).__name__}, not str")
    except EngineMissing:
        raise
    except Exception as exc:  # noqa: BLE001 - a plugin's bug
        raise EngineBroken(one_line(exc, with_type=True)[:500]) from None
    model, feeds = _smoke_model()
    kind, _, message = _answer(engine, model, feeds, RunOptions(output=((2,), np.dtype(np.float32))))
    if kind == "error":
        raise EngineBroken(f"its run() raised on a one-node Gather-13 model: {one_line(message)}"[:500])
    return engine, version


def _serve(conn, name: str, threads: int | None, log: str) -> None:
    """The worker's loop: one request in, one (kind, outputs, message) out, until the pipe closes.
    The engine's own stderr (a panic's message) and stdout go to ``log``, for the crash's detail:
    file descriptors 2 and 1 themselves, so a C library's prints land there too, not in the
    checker's report (which shares the worker's inherited stdout). The answers go back over
    ``conn``, a pipe of its own, never stdout."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the checker's to handle (it then ends the worker)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    for stream in (sys.stdout, sys.stderr):  # nothing of the parent's start left in a buffer
        if stream is not None:
            stream.flush()
    os.dup2(fd, 2)
    os.dup2(fd, 1)
    os.close(fd)
    try:
        engine, version = _start_engine(name)
    except EngineMissing as exc:
        conn.send(("failed", str(exc)))
        return
    conn.send(("ready", version))
    while True:
        try:
            model, feeds, hint = conn.recv()
        except EOFError:
            return
        reply = _answer(engine, model, feeds, RunOptions(threads, hint))
        try:
            conn.send(reply)
        except Exception as exc:  # noqa: BLE001 - an output that cannot be sent back (an odd dtype)
            conn.send(("ok", (None,), f"output not transferable: {exc}"))


@contextlib.contextmanager
def _stdout_to_stderr():
    """This process's stdout (file descriptor 1, and so a C library's prints too) sent to stderr
    meanwhile: a plugin that prints when imported does not write into the checker's report."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):  # where sys.stdout is not fd 1 (a capture)
            yield
    finally:
        try:
            if sys.stdout is not None:
                sys.stdout.flush()
            ctypes.CDLL(None).fflush(None)  # C stdio's buffered prints, before fd 1 is back
        except (OSError, AttributeError, ValueError):
            pass
        os.dup2(saved, 1)
        os.close(saved)


_STARTUP_S = 300  # a worker's start: Python, NumPy and the engine imported, before any case


class Worker:
    """One engine in a child process, restarted after a crash or a timeout.

    Parameters
    ----------
    engine : str
        The engine's name (its entry point in the group ``gather_scatter.engines``; an old
        name, its new one with a FutureWarning: :attr:`engine` is the new one).
    threads : int, optional
        Passed to the engine's ``run`` as ``RunOptions.threads``.
    timeout : float
        Seconds one request may take; it starts once the worker is up, so an engine's slow
        import is no hang.

    Raises
    ------
    EngineMissing, EngineBroken, EngineInvalid
        As ``require(engine)``; :meth:`start` (and the first :meth:`run`) raise EngineBroken
        where the worker cannot start the engine.
    """

    def __init__(self, engine: str, threads: int | None = None, timeout: float = 30.0) -> None:
        engine = canonical(engine)
        with _stdout_to_stderr():  # the engine's module is imported here too, to check it
            require(engine)
        self.engine, self.threads, self.timeout = engine, threads, timeout
        self.version: str | None = None
        self._context = multiprocessing.get_context("spawn")
        self._process: Any = None
        self._conn: Any = None
        self.restarts = 0
        with tempfile.NamedTemporaryFile(prefix=f"gather-scatter-{engine}-", suffix=".log", delete=False) as log:
            self._log = log.name

    def start(self) -> str:
        """Start the worker, unless it runs; return the engine's version (``version()``, asked in the worker).

        Raises
        ------
        EngineBroken
            The worker died or did not answer within 300 s while starting, or the engine's
            ``prepare``, ``version`` or a smoke run of a one-node Gather model raised.
        """
        if self._process is None:
            self._start()
        return str(self.version)

    def _start(self) -> None:
        parent, child = self._context.Pipe()
        with open(self._log, "w"):  # each worker starts a fresh log
            pass
        self._process = self._context.Process(
            target=_serve, args=(child, self.engine, self.threads, self._log), daemon=True
        )
        self._process.start()
        child.close()
        self._conn = parent
        try:
            answer = parent.recv() if parent.poll(_STARTUP_S) else None
        except EOFError:  # the engine's import (or its first run) killed the worker
            self._process.join(5)
            answer = (
                "failed",
                f"its worker died while starting it (exit code {self._process.exitcode}){self._last_words()}",
            )
        if answer is None or answer[0] != "ready":
            self._stop()
            why = f"its worker did not start within {_STARTUP_S} s{self._last_words()}" if answer is None else answer[1]
            raise EngineBroken(f"engine {self.engine!r} is installed but cannot run: {why}")
        self.version = answer[1]

    def _stop(self) -> None:
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join(5)
            self._conn.close()
        self._process = self._conn = None

    def run(self, model: bytes, feeds: dict, out_hint=None) -> Outcome:
        """The engine's answer for one model and its inputs.

        Parameters
        ----------
        model : bytes
            A serialized ``onnx.ModelProto``.
        feeds : dict of str to numpy.ndarray
            Its inputs by name.
        out_hint : tuple of (shape, dtype), optional
            The first output's expected shape and dtype (``RunOptions.output``).

        Returns
        -------
        Outcome
            ``crash`` where the worker died (it restarts at the next request), ``timeout``
            where it did not answer within ``timeout`` seconds (it is killed).
        """
        if self._process is None:
            self._start()
        try:
            self._conn.send((model, feeds, out_hint))
            if not self._conn.poll(self.timeout):
                self._stop()
                self.restarts += 1
                return Outcome("timeout", message=f"no answer within {self.timeout:g} s")
            kind, outputs, message = self._conn.recv()
            return Outcome(kind, outputs[0] if outputs else None, message, outputs)
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
        """Stop the worker and remove its log."""
        self._stop()
        with contextlib.suppress(OSError):
            os.unlink(self._log)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_in_process(name: str, model: bytes, feeds: dict) -> list:
    """Run the engine ``name`` on ``model`` here, in this process, as its worker would (for a
    finding's reproduction, where a crash is what should show).

    Returns
    -------
    list
        The engine's outputs.

    Raises
    ------
    EngineMissing, EngineBroken, EngineInvalid
        As :func:`load`; Exception: whatever the engine raises.
    """
    engine = require(name)
    if hasattr(engine, "prepare"):
        engine.prepare()
    return list(engine.run(model, feeds, RunOptions()))
