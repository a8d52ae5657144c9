"""ONNX engines, found through the entry-point group ``gather_scatter.engines``.

Each is run out of process by a worker that is restarted after a crash.

Every engine, the built-in ones (our own ``gather_scatter`` and ``gather_scatter-hosted``, and
``onnxruntime``, ``onnxruntime-cuda``, ``onnx-reference``, ``openvino``, ``tract``, ``tvm``,
``tinygrad``, ``onnx2torch``, ``jaxonnxruntime``: one module each in this package, named as the
engine with ``_`` for ``-``, registered in gather_scatter's own ``pyproject.toml``, each other
engine installed by the extra of its name, ``onnxruntime-cuda``'s in a venv of its own) and any
installed plugin, meets one protocol (:class:`Engine`): a ``name``, a ``version()``, and
``run(model, feeds, options)`` that runs a serialized ONNX model on inputs by name and returns
its outputs. An engine call never runs in the checking process: a crash (a Rust panic, a
segfault, an abort) or a hang kills only the worker, and is itself the finding. The worker
answers each request with one :class:`Outcome`:

- ``ok``: the engine's outputs, as NumPy arrays (``None`` for one that NumPy cannot hold;
  only whether it accepted the input matters then);
- ``error``: the engine refused the input (its message);
- ``unsupported``: the engine says it does not implement the operator or type (not a bug):
  its ``run`` raised ``NotImplementedError``, or a message holding one of its ``unsupported``;
- ``crash`` / ``timeout``: the worker died, or did not answer within the time limit.

A plugin is an installed distribution with an entry point in the group, naming a module, a
class or an object::

    [project.entry-points."gather_scatter.engines"]
    theirs = "theirs_engine"

and ``gather-scatter check --engine theirs`` runs it (docs/checker.md, "Your engine as a plugin",
shows a complete one). An old name (:data:`RENAMED`: ``reference``, now ``onnx-reference``) still
works wherever a name is taken, with a FutureWarning (:func:`canonical`).
"""

from __future__ import annotations

from ._protocol import Engine, EngineBroken, EngineInvalid, EngineMissing, RunOptions, is_ml_dtype
from ._registry import ENGINES, GROUP, RENAMED, canonical, discover, load, renamed_note, repro_code, require
from ._worker import Outcome, Worker, run_in_process

__all__ = [
    "ENGINES",
    "GROUP",
    "RENAMED",
    "Engine",
    "EngineBroken",
    "EngineInvalid",
    "EngineMissing",
    "Outcome",
    "RunOptions",
    "Worker",
    "canonical",
    "describe",
    "discover",
    "engine_version",
    "is_ml_dtype",
    "load",
    "renamed_note",
    "repro_code",
    "require",
    "run_in_process",
]


def engine_version(engine: str) -> str:
    """Return the version of ``engine`` as its worker reports it (the worker is started for it).

    Raises
    ------
    EngineMissing, EngineBroken, EngineInvalid
        As :class:`Worker` and :meth:`Worker.start`.
    """
    with Worker(engine) as worker:
        return worker.start()


def describe() -> list[dict]:
    """Every discovered engine, each started once in a worker: what ``--list-engines`` shows.

    Returns
    -------
    list of dict
        ``{"engine", "version", "source", "status"}`` per engine, sorted by name: ``version`` as
        the engine reports it (None where it cannot run), ``source`` the distribution registering
        it (its entry point's value where none), ``status`` ``"ok"`` or the one-line reason it cannot run.
    """
    rows = []
    for name, point in discover().items():
        version, status = None, "ok"
        try:
            with Worker(name) as worker:
                version = worker.start()
        except EngineMissing as exc:
            status = str(exc)
        dist = getattr(point, "dist", None)
        source = f"{dist.name} {dist.version}" if dist is not None else point.value
        rows.append({"engine": name, "version": version, "source": source, "status": status})
    return rows
