"""``gather-scatter export-tests`` and ``run-tests``: the conformance suite as files, and running one on an engine."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import INTERRUPTED, _check_destination, _int_in, _seconds, _UserError


def _unknown_engine_hint(message: str, name: str) -> str:
    """``message`` (EngineMissing's), with the installed engines' names closest to ``name`` where it is unknown."""
    import difflib

    from ..check.engines import discover

    if not message.startswith("unknown engine"):
        return message
    names = list(discover())
    folded = {n.lower(): n for n in names}
    close = [folded[name.lower()]] if name.lower() in folded else difflib.get_close_matches(name, names, n=3)
    return message + (f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else "")


def _run_tests(args: argparse.Namespace) -> int:
    from ..check import Interrupted
    from ..check.engines import EngineMissing
    from ..conformance import SuiteError, load_suite
    from ..conformance.run import FAILURES, print_summary, run_cases

    if args.json:
        _check_destination("--json", args.json, is_dir=False)
    try:
        cases = load_suite(args.dir)
        result = run_cases(
            cases, args.engine, threads=args.threads, timeout=args.timeout, progress=sys.stderr.isatty(), suite=args.dir
        )
    except EngineMissing as exc:
        raise _UserError(_unknown_engine_hint(str(exc), args.engine)) from None
    except SuiteError as exc:
        raise _UserError(str(exc)) from None
    print_summary(result, sys.stdout)
    if args.json:
        import json

        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    if result["interrupted"]:
        result["cases"] = result["tests"]
        written = f"; the outcomes so far in {args.json!r}" if args.json else ""
        print(f"gather-scatter run-tests: {Interrupted(result)}{written}", file=sys.stderr)
        return INTERRUPTED
    return 1 if any(result["counts"][o] for o in FAILURES) else 0


def _add_run_tests(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run-tests",
        help="run a conformance suite folder (ours, or onnx's backend-test layout) on an engine",
        description="Run every test of a suite folder on an engine of 'gather-scatter check' (built in or a "
        "plugin), each in the checker's worker process (restarted after a crash or a hang), and score it. DIR is "
        "a folder written by 'gather-scatter export-tests' (indexing/, indexing_invalid/, MANIFEST.json), any "
        "folder in ONNX's backend-test layout (test_*/model.onnx with test_data_set_N/input_K.pb and "
        "output_K.pb, e.g. onnx's node tests written to disk), a folder of such folders, or one test folder. "
        "Valid tests compare every output of every data set: exactly (bits; NaN equals NaN) in our suite, "
        "within data.json's rtol/atol where it gives one (onnx's loader defaults, rtol 1e-3 and atol 1e-7 for "
        "floating-point outputs, in a folder without MANIFEST.json). A test in indexing_invalid/ (with "
        "error.json) passes when the engine refuses its inputs. Outcomes: pass, fail (wrong output), error "
        "(raised on a valid test), accepted_invalid, crash, timeout, unsupported (the engine lacks the "
        "operator, version or type; not scored). Score: passed / (tests - unsupported). Prints the score, a "
        "table per operator family and the first tests that did not pass. Exit status: 0 when every supported "
        "test passed, 1 when one did not, 2 for a usage error (no test in DIR, an unknown or not installed "
        "engine), 130 when interrupted (Ctrl-C) once the outcomes so far are printed and written.",
    )
    parser.add_argument("dir", metavar="DIR", help="the suite folder, a folder of tests, or one test folder")
    parser.add_argument(
        "--engine", required=True, metavar="NAME", help="the engine to run (see 'gather-scatter check --list-engines')"
    )
    parser.add_argument("--threads", type=_int_in(1), default=None, metavar="N", help="the engine's intra-op threads")
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="seconds per data set before the engine counts as hung (default 30)",
    )
    parser.add_argument(
        "--json",
        default=None,
        metavar="PATH",
        help="also write every test's outcome (name, op, version, outcome, detail, seconds) and the counts as JSON",
    )
    parser.set_defaults(func=_run_tests)
