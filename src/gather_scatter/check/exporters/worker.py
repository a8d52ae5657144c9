"""The process the exporter runs in, restarted after a crash or a hang.

torch's exporters can kill their process (a SIGFPE in the TorchScript exporter's reshape of an
empty index, torch 2.13), so each sample is exported and evaluated in a worker, and the crash is
the finding.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

from .export import Exported, check_sample, eager

__all__ = ["ExportWorker", "run_sample"]

_STARTUP_S = 300.0


def run_sample(sample: Any, mode: str, opset: int | None, exporter: Any = None, phase: Any = None) -> Exported:
    """Return the outcome of ``sample`` through ``mode``: eager first (``eager_refused`` where torch refuses it)."""
    if phase is not None:
        phase("eager")
    try:
        want = eager(sample)
    except Exception as exc:  # noqa: BLE001 - a sample torch refuses is not the exporter's
        return Exported("eager_refused", f"{type(exc).__name__}: {exc}"[:300])
    if phase is not None:
        phase("export")
    return check_sample(sample, mode, opset, want, exporter, phase)


def _serve(conn: Any) -> None:
    import os

    # The exporters print from C++ too (the TorchScript graph at an exception): not the user's output.
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    import torch  # noqa: F401 - imported once, before the first request

    conn.send(("ready", None))
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        sample, mode, opset, exporter = request
        result = run_sample(sample, mode, opset, exporter, phase=lambda p: conn.send(("phase", p)))
        if result.model is not None:
            result.model = result.model.SerializeToString()
        conn.send(("done", result))


class ExportWorker:
    """A spawned process that runs :func:`run_sample`; ``isolate=False`` runs it in this process."""

    def __init__(self, timeout: float = 120.0, isolate: bool = True) -> None:
        self.timeout, self.isolate = timeout, isolate
        self._context = multiprocessing.get_context("spawn")
        self._process: Any = None
        self._conn: Any = None
        self.restarts = 0

    def _start(self) -> None:
        parent, child = self._context.Pipe()
        self._process = self._context.Process(target=_serve, args=(child,), daemon=True)
        self._process.start()
        child.close()
        self._conn = parent
        if not parent.poll(_STARTUP_S):
            self._stop()
            raise RuntimeError(f"the exporter's worker process did not start within {_STARTUP_S:g} s")
        parent.recv()

    def _stop(self) -> None:
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join(5)
            self._conn.close()
        self._process = self._conn = None

    def run(self, sample: Any, mode: str, opset: int | None, exporter: Any = None) -> Exported:
        """Return the outcome of one sample; ``export_crashed`` where the worker died or hung while exporting."""
        if not self.isolate:
            return run_sample(sample, mode, opset, exporter)
        import onnx

        if self._process is None:
            self._start()
        phase = "eager"
        try:
            self._conn.send((sample, mode, opset, exporter))
            while True:
                if not self._conn.poll(self.timeout):
                    self._stop()
                    self.restarts += 1
                    return _died(phase, f"no answer within {self.timeout:g} s")
                tag, value = self._conn.recv()
                if tag == "phase":
                    phase = value
                    continue
                if value.model is not None:
                    value.model = onnx.load_from_string(value.model)
                return value
        except (EOFError, OSError):
            self._process.join(5)
            code = self._process.exitcode
            self._stop()
            self.restarts += 1
            return _died(phase, f"the process died (exit code {code})")

    def close(self) -> None:
        """Stop the worker: its pipe closed, it returns (and releases what it holds); killed after 10 s."""
        if self._process is not None and self._process.is_alive():
            self._conn.close()
            self._process.join(10)
        self._stop()

    def __enter__(self) -> ExportWorker:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _died(phase: str, what: str) -> Exported:
    kind = {"eager": "eager_refused", "export": "export_crashed", "evaluate": "evaluator_crashed"}[phase]
    doing = {"eager": "running torch eager", "export": "exporting", "evaluate": "evaluating (our defect)"}[phase]
    return Exported(kind, f"{what} while {doing}")
