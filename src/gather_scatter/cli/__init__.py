"""The ``gather-scatter`` command line.

Each subcommand is one ``_add_<name>(subparsers)`` function that defines its arguments and
sets ``func`` (``run`` and ``shapes`` in :mod:`._run`, ``check`` in :mod:`._check`; what they
share in :mod:`._common`); adding a subcommand is one such function and one entry in
``_SUBCOMMANDS``. A failure the user can fix (a bad input, model or index) is one paragraph on
stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import one_line
from ._check import _add_check
from ._common import _FAMILY, USAGE_ERROR, _UserError
from ._run import _add_run, _add_shapes
from ._suite import _add_export_tests, _add_run_tests

__all__ = ["main"]


_SUBCOMMANDS: tuple[Callable[[Any], None], ...] = (_add_run, _add_shapes, _add_check, _add_export_tests, _add_run_tests)


def _build_parser() -> argparse.ArgumentParser:
    """Build the ``gather-scatter`` argument parser, one subparser per entry in ``_SUBCOMMANDS``."""
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="gather-scatter", description=f"ONNX's indexing operators ({_FAMILY}), every version."
    )
    parser.add_argument("--version", action="version", version=f"gather-scatter {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``gather-scatter`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name; ``sys.argv[1:]`` when None.

    Returns
    -------
    int
        The exit status: 0 on success, 2 for a usage error or a failure the user can fix
        (missing or mistyped input, unreadable model, an error raised by a node), reported
        as one paragraph on stderr.

    Examples
    --------
    >>> main(["run"])  # doctest: +ELLIPSIS
    model: built-in decoder_step.onnx (inputs from decoder_step_inputs.npz)
      logits       float32  (2, 16)      [-0.3076 -0.1484 -0.2639 ... -0.2707  0.394  -1.0883]
    ...
    wall time: ... ms
    0
    """
    args = _build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:  # the reader stopped early (`| head`): not an error of ours to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except _UserError as exc:
        print(f"gather-scatter {args.command}: error: {one_line(exc, limit=600)}", file=sys.stderr)
        return USAGE_ERROR
