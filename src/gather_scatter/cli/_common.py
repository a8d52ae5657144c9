"""What every ``gather-scatter`` subcommand shares: the user's errors (one paragraph, exit status
2), reading and writing arrays and models, ``--no-check``/``--no-strict``, the argument types,
and checking a destination before a long run."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import models
from ..errors import one_line

USAGE_ERROR = 2
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C


class _UserError(Exception):
    """A failure to report as one paragraph and exit status 2."""


def _named_input(spec: str) -> tuple[str, str]:
    name, sep, path = spec.partition("=")
    if not (sep and name and path):
        raise argparse.ArgumentTypeError(f"expected NAME=FILE.npy, got {spec!r}")
    return name, path


def _load_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    problem = models.not_numpy(path)
    if problem:
        raise _UserError(f"cannot read inputs file {os.fspath(path)!r}: {problem}")
    try:
        archive = np.load(path, allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):  # np.load reads one .npy array too
            raise ValueError(
                f"it is a .npy file (one array of shape {archive.shape}), not an .npz archive of inputs by "
                "name; pass one array with --input NAME=FILE.npy, or save the inputs with numpy.savez"
            )
        with archive:
            return models.read_npz(archive)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's to fix
        raise _UserError(f"cannot read inputs file {os.fspath(path)!r}: {exc}") from None


_FAMILY = (
    "Gather, GatherND, ScatterND, GatherElements, ScatterElements, Scatter, TensorScatter and com.microsoft "
    "GatherBlockQuantized"
)


def _load_array(name: str, path: str) -> np.ndarray:
    problem = models.not_numpy(path)
    if problem:
        raise _UserError(f"cannot read input {name!r} from {path!r}: {problem}")
    try:
        loaded = models.load(path)
    except Exception as exc:  # noqa: BLE001 - np.load raises OSError, ValueError, BadZipFile, EOFError...: any means an unreadable file
        raise _UserError(f"cannot read input {name!r} from {path!r}: {exc}") from None
    if isinstance(loaded, np.lib.npyio.NpzFile):  # np.load opens archives too: not one array
        keys = ", ".join(loaded.files) or "none"
        loaded.close()
        raise _UserError(
            f"cannot read input {name!r} from {path!r}: it is an .npz archive (arrays: {keys}), not a .npy file; "
            "pass archives with --inputs FILE.npz, or save the one array with numpy.save"
        )
    return loaded


def _save_arrays(path: str, arrays: dict[str, Any]) -> None:
    # The one codec's writer: no pickles (np.load reads it with allow_pickle=False), each
    # ml_dtypes or string array tagged with its ONNX type, which run --inputs reads back.
    models.save_npz(path, arrays)


def _load_model(path: str | os.PathLike, *, external_data: bool = True):
    import onnx

    try:
        return onnx.load(os.fspath(path), load_external_data=external_data)
    except Exception as exc:  # noqa: BLE001 - missing file, not a protobuf, bad external data
        raise _UserError(f"cannot read model {os.fspath(path)!r}: {type(exc).__name__}: {exc}") from None


def _add_no_check(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-check",
        dest="check",
        action="store_false",
        help="skip the validation of the model (well-formed names, graph, initializers, external data and "
        "opsets) before it is used, for a model you trust (default: refuse an invalid model in one line)",
    )


def _add_no_strict(parser: argparse.ArgumentParser, verb: str) -> None:
    """``--no-strict``, one behaviour for every subcommand that takes a model (run, shapes, check MODEL).

    By default an off-spec node is refused with the error naming the fix (see :func:`_cli_text`);
    ``--no-strict`` takes it as the earliest version that accepts it, with a warning, as the
    Python API's ``strict=False``.
    """
    parser.add_argument(
        "--no-strict",
        dest="strict",
        action="store_false",
        help=f"{verb} a node whose attribute or value exists only in a later version of its operator (as PyTorch "
        "writes ScatterElements reduction='max' at opset 17) as the earliest version that accepts it, with a warning "
        "(default: refuse it, naming the fix)",
    )


def _cli_text(message: object) -> str:
    """Our error or warning text with the Python API's fix (``strict=False``) named as the option that does it."""
    return str(message).replace("pass strict=False", "pass --no-strict").replace("(strict=False)", "(--no-strict)")


def _print_caught(command: str, caught: list) -> None:
    """Print each OffSpecWarning of ``caught`` as one stderr line of ``command``; show any other as Python would."""
    import warnings

    from .._nodes import OffSpecWarning

    for w in caught:
        if issubclass(w.category, OffSpecWarning):
            print(f"gather-scatter {command}: warning: {one_line(_cli_text(w.message), limit=600)}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _engine_name(name: str) -> str:
    """``--engine``'s current name: an old one (``reference``) noted in one line on stderr, and its new one."""
    from ..check.engines import RENAMED, renamed_note

    note = renamed_note(name)
    if note is None:
        return name
    print(f"note: {note}", file=sys.stderr)
    return RENAMED[name]


def _int_in(low: int, high: float = math.inf) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            bounds = f"in [{low}, {high}]" if high < math.inf else f">= {low}"
            raise argparse.ArgumentTypeError(f"{value} is not {bounds}")
        return value

    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:  # nan too
        raise argparse.ArgumentTypeError(f"{value} is not > 0")
    return value


def _cannot_create_in(folder: str) -> str | None:
    """Why no file can be created in ``folder``, or None: tried, not guessed.

    ``os.access`` says yes to root everywhere, /sys and /proc included.
    """
    import tempfile

    try:
        handle, probe = tempfile.mkstemp(prefix=".gather-scatter-probe-", dir=folder)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    os.close(handle)
    os.remove(probe)
    return None


def _check_destination(option: str, path: str, *, is_dir: bool, beside: bool = False) -> None:
    """Refuse, before a long run, a destination it could not write at its end.

    That is: a missing folder, a file in the way of a folder or the reverse, a folder or file
    we may not write (tried by creating a file there). ``beside``: the folder is written under a
    temporary name beside ``path`` and renamed into place (``check --report``), so its parent
    must take new files.
    """
    target = existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if existing != target and not is_dir and existing != os.path.dirname(target):
        problem = f"its folder {os.path.dirname(target)!r} does not exist"
    elif not os.path.isdir(existing) and (existing != target or is_dir):
        problem = f"{existing!r} is not a directory"
    elif existing == target and not is_dir and os.path.isdir(existing):
        problem = "it is a directory"
    elif existing == target and not is_dir:  # a file to replace: opened as the run's end would
        try:
            with open(target, "a"):
                problem = ""
        except OSError as exc:
            problem = f"it is not writable ({exc.strerror})"
    elif not os.access(existing, os.W_OK):
        problem = f"{existing!r} is not writable" if existing != target or is_dir else "it is not writable"
    else:
        folder = os.path.dirname(target) if beside and existing == target else existing
        why = _cannot_create_in(folder)
        problem = "" if why is None else f"no file can be created in {folder!r} ({why})"
    if problem:
        raise _UserError(f"cannot write {option} {path!r}: {problem}")
