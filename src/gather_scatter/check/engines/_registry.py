"""Finding engines: the entry-point group ``gather_scatter.engines``, the built-in ones included."""

from __future__ import annotations

import importlib.metadata
import inspect
import os
import sys
import types
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from ...errors import one_line
from ._protocol import Engine, EngineBroken, EngineInvalid, EngineMissing

__all__ = ["ENGINES", "GROUP", "RENAMED", "canonical", "discover", "load", "renamed_note", "repro_code", "require"]

GROUP = "gather_scatter.engines"

RENAMED = {"reference": "onnx-reference"}
"""Old engine names that still work, each with its new name.

``reference`` was onnx.reference's engine; it is now ``onnx-reference``, because elsewhere
``reference`` names our oracle (``Session(engine="reference")``, ``gather-scatter run --engine
reference``), which the checker runs as ``gather_scatter``.
"""


def renamed_note(name: str) -> str | None:
    """The one-line note that ``name`` is an old engine name, or None where it is not.

    Examples
    --------
    >>> renamed_note("reference")
    "engine 'reference' is now called 'onnx-reference' (onnx.reference); our own oracle is 'gather_scatter'"
    >>> renamed_note("onnxruntime") is None
    True
    """
    new = RENAMED.get(name)
    if new is None:
        return None
    return f"engine {name!r} is now called {new!r} (onnx.reference); our own oracle is 'gather_scatter'"


_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _caller_level() -> int:
    """``warnings.warn``'s stacklevel, from :func:`canonical`'s caller, of the first frame outside gather_scatter."""
    frame: types.FrameType | None = sys._getframe(2)  # canonical's caller (stacklevel 2; 1 is canonical itself)
    level = 2
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def canonical(name: str) -> str:
    """The engine's current name: ``name`` itself, or the new name of an old one (:data:`RENAMED`).

    An old name gives a FutureWarning (not a DeprecationWarning: Python hides those outside
    ``__main__``, and the user of a script, a notebook or a scoreboard is the one to tell that
    ``reference`` here means onnx.reference, not our oracle), attributed to the first caller
    outside gather_scatter. Every function of the checker and the suite runner that takes an
    engine's name calls it first, so results and reports carry the new name.

    Parameters
    ----------
    name : str
        An engine name, as given.

    Returns
    -------
    str

    Warns
    -----
    FutureWarning
        ``name`` is an old name: :func:`renamed_note`'s text.
    """
    note = renamed_note(name)
    if note is None:
        return name
    warnings.warn(note, FutureWarning, stacklevel=_caller_level())
    return RENAMED[name]


def _origin(point: importlib.metadata.EntryPoint) -> str:
    dist = getattr(point, "dist", None)
    return f"{point.value} from {dist.name} {dist.version}" if dist is not None else point.value


def discover() -> dict[str, importlib.metadata.EntryPoint]:
    """The engines installed in this environment, by name, sorted.

    Returns
    -------
    dict of str to importlib.metadata.EntryPoint
        Each entry point of the group ``gather_scatter.engines`` (loaded by :func:`load`, not here).
        Where two distributions register one name with different objects, the first found is kept
        and :func:`load` refuses the name.
    """
    found: dict[str, importlib.metadata.EntryPoint] = {}
    for point in importlib.metadata.entry_points(group=GROUP):
        found.setdefault(point.name, point)
    return dict(sorted(found.items()))


def _conflict(name: str) -> str | None:
    values: dict[str, str] = {}
    for point in importlib.metadata.entry_points(group=GROUP):
        if point.name == name:
            values.setdefault(point.value, _origin(point))
    return None if len(values) < 2 else " and ".join(values.values())


class _Discovered(Mapping):
    """``ENGINES``: the installed engines' entry points by name, read afresh at each use."""

    def __getitem__(self, name: str) -> importlib.metadata.EntryPoint:
        return discover()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(discover())

    def __len__(self) -> int:
        return len(discover())

    def __repr__(self) -> str:
        return f"ENGINES({', '.join(discover())})"


ENGINES: Mapping[str, importlib.metadata.EntryPoint] = _Discovered()


def _check_protocol(name: str, engine: Any) -> str | None:
    """What ``engine`` lacks of the protocol (:class:`Engine`), or None."""
    if getattr(engine, "name", None) != name:
        return f"its name is {getattr(engine, 'name', None)!r}, not {name!r} (the entry point's name)"
    for method, arguments in (("version", ()), ("run", (b"", {}, None))):
        function = getattr(engine, method, None)
        if not callable(function):
            return f"it has no {method}() method"
        try:
            inspect.signature(function).bind(*arguments)
        except TypeError:
            return f"its {method}() does not take ({', '.join(('model', 'feeds', 'options')[: len(arguments)])})"
        except ValueError:  # no signature to inspect (a builtin): let the call tell
            pass
    for method in ("available", "prepare", "repro"):
        if hasattr(engine, method) and not callable(getattr(engine, method)):
            return f"its {method} is not callable"
    unsupported = getattr(engine, "unsupported", ())
    if isinstance(unsupported, str) or not all(isinstance(s, str) for s in unsupported):
        return "its unsupported is not a tuple of str"
    return None


def load(name: str) -> Engine:
    """The engine registered as ``name``, loaded from its entry point and checked against the protocol.

    Parameters
    ----------
    name : str
        An engine name (``--engine``), e.g. ``onnxruntime`` or a plugin's; an old name
        (:data:`RENAMED`) loads its new one, with a FutureWarning.

    Returns
    -------
    Engine
        The object the entry point names; a class is instantiated without arguments.

    Raises
    ------
    EngineMissing
        No installed distribution registers ``name`` (the message lists those that do).
    EngineBroken
        Two distributions register ``name``, or its entry point fails to import.
    EngineInvalid
        The object does not meet the protocol (the message says what it lacks).
    """
    name = canonical(name)
    found = discover()
    if name not in found:
        raise EngineMissing(f"unknown engine {name!r} (engines: {', '.join(found) or 'none installed'})")
    point = found[name]
    conflict = _conflict(name)
    if conflict:
        raise EngineBroken(f"engine {name!r} is registered twice: {conflict}")
    try:
        engine = point.load()
        if isinstance(engine, type):
            engine = engine()
    except Exception as exc:  # noqa: BLE001 - a plugin's import error, whatever it is
        failure = one_line(exc, with_type=True)
        raise EngineBroken(
            f"engine {name!r} cannot be loaded: entry point {_origin(point)!r} failed: {failure}"[:500]
        ) from None
    problem = _check_protocol(name, engine)
    if problem:
        raise EngineInvalid(f"engine {name!r} ({_origin(point)}) does not meet the engine protocol: {problem}")
    return engine


def require(name: str) -> Engine:
    """The engine ``name``, where it can run here (its ``available()`` says nothing against it).

    Raises
    ------
    EngineMissing, EngineBroken, EngineInvalid
        As :func:`load`; EngineMissing also where ``available()`` gives a reason (one line,
        naming the extra to install for a built-in engine), EngineBroken where it raises.
    """
    name = canonical(name)
    engine = load(name)
    available = getattr(engine, "available", None)
    if available is not None:
        try:
            why = available()
        except Exception as exc:  # noqa: BLE001 - a plugin's bug
            raise EngineBroken(f"engine {name!r}: available() raised {type(exc).__name__}: {exc}") from None
        if why:
            raise EngineMissing(one_line(why))
    return engine


def repro_code(name: str, model_path: str, inputs_path: str) -> str:
    """Python code that reproduces a finding from its written files: the inputs loaded as ``i``,
    then the engine's own ``repro`` code, or else the engine run through its entry point.

    Parameters
    ----------
    name : str
        The engine (an old name: its new one, with a FutureWarning).
    model_path, inputs_path : str
        The finding's ``.onnx`` and ``.npz``.

    Returns
    -------
    str
        One line of Python (for ``python -c "..."``).
    """
    name = canonical(name)
    engine = load(name)
    load_inputs = (
        f"from gather_scatter.check.report import load_inputs; i = load_inputs({model_path!r}, {inputs_path!r}); "
    )
    repro = getattr(engine, "repro", None)
    if repro is not None:
        return load_inputs + repro(model_path, inputs_path)
    return (
        load_inputs + "from gather_scatter.check.engines import run_in_process; "
        f"print(run_in_process({name!r}, open({model_path!r}, 'rb').read(), i))"
    )
