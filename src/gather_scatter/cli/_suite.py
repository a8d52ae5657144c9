"""``gather-scatter export-tests`` and ``run-tests``: the conformance suite as files, and running one on an engine."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import INTERRUPTED, _check_destination, _engine_name, _int_in, _seconds, _UserError


def _unknown_engine_hint(message: str, name: str) -> str:
    """``message`` (EngineMissing's), with the installed engines' names closest to ``name`` where it is unknown.

    An old name (``reference``) is a candidate too, offered as its new one (``onnx-reference``).
    """
    import difflib

    from ..check.engines import RENAMED, discover

    if not message.startswith("unknown engine"):
        return message
    names = [*discover(), *RENAMED]
    folded = {n.lower(): n for n in names}
    close = [folded[name.lower()]] if name.lower() in folded else difflib.get_close_matches(name, names, n=3)
    close = list(dict.fromkeys(RENAMED.get(c, c) for c in close))
    return message + (f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else "")


def _run_tests(args: argparse.Namespace) -> int:
    from ..check.engines import EngineMissing
    from ..conformance import SuiteError, load_suite
    from ..conformance.run import FAILURES, print_summary, run_cases

    if args.json:
        _check_destination("--json", args.json, is_dir=False)
    try:
        cases = load_suite(args.dir)
        args.engine = _engine_name(args.engine)
        result = run_cases(
            cases, args.engine, threads=args.threads, timeout=args.timeout, progress=sys.stderr.isatty(), suite=args.dir
        )
    except EngineMissing as exc:
        raise _UserError(_unknown_engine_hint(str(exc), args.engine)) from None
    except SuiteError as exc:
        raise _UserError(str(exc)) from None
    if args.json:  # first: a reader that stops early (| head) does not lose it
        import json

        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    print_summary(result, sys.stdout)
    if result["interrupted"]:
        written = f"; the outcomes so far in {args.json!r}" if args.json else ""
        print(
            f"gather-scatter run-tests: interrupted after {result['tests']} of {result['planned']} tests{written}",
            file=sys.stderr,
        )
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
        "--engine",
        required=True,
        metavar="NAME",
        help="the engine to run (see 'gather-scatter check --list-engines'): gather_scatter (our oracle), "
        "gather_scatter-hosted (onnxruntime with our kernels where it is wrong), onnx-reference, onnxruntime, ...",
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


def _suite_op(text: str) -> str:
    """``export-tests --op``: an operator (``ScatterND``), version (``ScatterND-16``) or ``com.microsoft.GatherND``."""
    from ..conformance.suite import SuiteSelectionError, select_versions

    try:
        select_versions([text])
    except SuiteSelectionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _export_tests(args: argparse.Namespace) -> int:
    import os
    import time

    from ..conformance import SuiteDirError, export_tests

    if os.path.isdir(args.dir):
        _check_destination("DIR", args.dir, is_dir=True)
    start = time.perf_counter()
    try:
        manifest = export_tests(args.dir, seed=args.seed, ops=args.op or None, cases_per_version=args.cases_per_version)
    except SuiteDirError as exc:
        raise _UserError(str(exc)) from None
    except OSError as exc:
        raise _UserError(f"cannot write the suite in {args.dir!r}: {exc}") from None
    _print_export_summary(manifest, args.dir, time.perf_counter() - start, sys.stdout)
    return 0


def _print_export_summary(manifest: dict, folder: str, seconds: float, out: Any) -> None:
    """One screen: cases per version (valid, invalid), totals, size, where the MANIFEST is."""
    import os

    counts = manifest["counts"]
    rows = counts["by_op"]
    width = max([len(name) for name in rows] + [len("version")])
    print(f"{'version':<{width}}  {'valid':>6}  {'invalid':>7}", file=out)
    for name, row in rows.items():
        print(f"{name:<{width}}  {row['valid']:>6}  {row['invalid']:>7}", file=out)
    print(f"{'total':<{width}}  {counts['valid']:>6}  {counts['invalid']:>7}", file=out)
    print(
        f"seed {manifest['seed']}, {manifest['cases_per_version']} random valid cases per version (plus targeted "
        f"ones); {len(counts['by_tag'])} tags; {manifest['size_bytes'] / 1e6:.1f} MB in {seconds:.1f} s",
        file=out,
    )
    print(
        f"valid cases:   {os.path.join(folder, 'indexing')}  (onnx's load_model_tests(DIR, kind='indexing'))", file=out
    )
    print(f"invalid cases: {os.path.join(folder, 'indexing_invalid')}  (error.json in each)", file=out)
    print(f"manifest:      {os.path.join(folder, 'MANIFEST.json')}", file=out)


def _add_export_tests(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "export-tests",
        help="write the conformance suite as ONNX backend-test folders any runtime's harness reads",
        description="Write the conformance suite of ONNX's indexing operators into DIR, in ONNX's backend-test layout: "
        "DIR/indexing/test_*/ (model.onnx, test_data_set_0/input_K.pb and output_0.pb, data.json with rtol/atol "
        "only where a float reduction's rounding order is left open; elsewhere the comparison is exact), "
        "DIR/indexing_invalid/test_*/ (no output; error.json: the error kind, class, input, our message and the "
        "spec sentence) and DIR/MANIFEST.json (every case's op, version, opset, dtypes, shapes, attributes and "
        "tags; counts; seed). Every version of the registry by default; expected outputs from gather_scatter's "
        "kernels. The same seed writes byte-identical files. DIR must be new, empty, or a suite written by "
        "export-tests (replaced whole). Exit status: 0, or 2 for a usage error.",
    )
    parser.add_argument("dir", metavar="DIR", help="the folder to write (new, empty, or a previous suite)")
    parser.add_argument("--seed", type=_int_in(0), default=0, metavar="S", help="the suite's seed (default 0)")
    parser.add_argument(
        "--op",
        action="append",
        default=[],
        type=_suite_op,
        metavar="OP[-VERSION]",
        help="only this operator (every version: ScatterND; com.microsoft.GatherND) or version (ScatterND-16); "
        "repeatable (default: every version)",
    )
    parser.add_argument(
        "--cases-per-version",
        type=_int_in(0),
        default=None,
        metavar="N",
        help="random valid cases per version (default 150); targeted and invalid cases come on top",
    )
    parser.set_defaults(func=_export_tests)
