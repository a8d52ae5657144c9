"""``gather-scatter check``: operator mode (generated cases) and model mode (a model's nodes) on another engine."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ._common import (
    _FAMILY,
    INTERRUPTED,
    _add_no_strict,
    _check_destination,
    _cli_text,
    _engine_name,
    _int_in,
    _load_array,
    _load_arrays,
    _named_input,
    _seconds,
    _UserError,
)


def _op_or_version(text: str) -> str:
    """``--op``: an operator (``ScatterND``) or version (``ScatterND-16``) of the registry, spelled as ONNX does."""
    import difflib

    from ..rules.versions import REGISTRY

    known = sorted({v.op_type for v in REGISTRY.values()} | {v.name for v in REGISTRY.values()})
    if text in known:
        return text
    folded = {name.lower(): name for name in known}
    close = [folded[text.lower()]] if text.lower() in folded else difflib.get_close_matches(text, known, n=3)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    raise argparse.ArgumentTypeError(f"unknown operator or version {text!r}{hint}; choose from {', '.join(known)}")


def _check(args: argparse.Namespace) -> int:
    from ..check import Interrupted, run_check
    from ..check.engines import EngineMissing
    from ..check.runner import SelectionError

    if args.list_engines:
        return _list_engines()
    if args.exporter is not None:
        return _check_exporter(args)
    _refuse_exporter_options(args)
    if args.timeout is None:
        args.timeout = 30.0
    if not args.engine:
        raise _UserError("one of --engine, --exporter or --list-engines is required")
    if len(args.engine) > 1:
        raise _UserError(
            f"--engine is given {len(args.engine)} times: a check runs one engine (--exporter takes several)"
        )
    args.engine = args.engine[0]
    torch_ops = [name for name in args.op if name in _torch_operations()]
    if torch_ops:
        raise _UserError(f"--op {torch_ops[0]} is a torch operation: it selects samples of --exporter torch")
    try:  # --op is read as text (exporter mode takes torch operations) and checked here, as argparse would
        args.op = [_op_or_version(name) for name in args.op]
    except argparse.ArgumentTypeError as exc:
        args.parser.error(f"argument --op: {exc}")
    _check_mode_options(args)
    _check_destinations(args)
    args.engine = _engine_name(args.engine)
    try:
        if args.model is not None:
            result = _check_model(args)
        else:
            result = run_check(
                args.engine,
                ops=args.op or None,
                opsets=args.opset or None,
                cases=args.cases or 20,
                seed=args.seed,
                threads=args.threads,
                timeout=args.timeout,
                out_dir=args.out,
                json_path=args.json,
                report_dir=args.report,
                progress=sys.stderr.isatty(),
            )
    except (EngineMissing, SelectionError) as exc:
        raise _UserError(str(exc)) from None
    except Interrupted as exc:  # the partial report is printed and written
        written = ([f"the findings so far in {args.out!r}"] if exc.result["findings"] else []) + (
            [f"the report in {args.json!r}"] if args.json else []
        )
        print(f"gather-scatter check: {exc}" + (f"; {' and '.join(written)}" if written else ""), file=sys.stderr)
        return INTERRUPTED
    except OSError as exc:
        if exc.filename is None:  # not a file of ours: not the user's to fix
            raise
        raise _UserError(f"{exc.strerror}: {exc.filename!r}") from None
    return 1 if result["findings"] else 0


def _check_destinations(args: argparse.Namespace) -> None:
    """Refuse an unwritable --out, --json or --report before anything runs."""
    _check_destination("--out", args.out, is_dir=True)
    if args.json:
        _check_destination("--json", args.json, is_dir=False)
    if args.report:
        _check_destination("--report", args.report, is_dir=True, beside=True)


def _torch_operations() -> dict:
    from ..check.exporters import OPERATIONS

    return OPERATIONS


def _refuse_exporter_options(args: argparse.Namespace) -> None:
    """Refuse --mode without --exporter (the one option only the exporter check takes)."""
    if args.mode is not None:
        raise _UserError("--mode picks an exporter's mode: gather-scatter check --exporter torch --mode dynamo ...")


def _check_exporter(args: argparse.Namespace) -> int:
    """``check --exporter torch``: torch's exporters on every indexing operation (exit 1 with findings)."""
    from ..check import Interrupted
    from ..check.engines import EngineMissing
    from ..check.exporters import ExporterSelectionError, run_exporter_check

    given = [
        name
        for name, value in (
            ("MODEL", args.model),
            ("--input", args.input),
            ("--inputs", args.inputs),
            ("--dim", args.dim),
            ("--tries", args.tries),
        )
        if value
    ]
    if given:
        raise _UserError(
            f"{', '.join(given)} {'applies' if len(given) == 1 else 'apply'} to a model, not to --exporter"
        )
    if len(args.opset) > 1:
        raise _UserError("--exporter exports at one --opset")
    import importlib.util

    for name in ("torch", "onnxscript"):
        if importlib.util.find_spec(name) is None:
            raise _UserError(
                f"--exporter torch needs {name}: pip install 'gather_scatter[export]' (a CPU build of torch is enough)"
            )
    _check_destinations(args)
    modes = ["dynamo", "torchscript"] if args.mode in (None, "both") else [args.mode]
    try:
        result = run_exporter_check(
            args.exporter,
            modes=modes,
            opset=args.opset[0] if args.opset else None,
            ops=args.op or None,
            cases=args.cases or 24,
            seed=args.seed,
            engines=[_engine_name(name) for name in args.engine or []],
            timeout=120.0 if args.timeout is None else args.timeout,
            out_dir=args.out,
            json_path=args.json,
            report_dir=args.report,
            progress=sys.stderr.isatty(),
        )
    except (ExporterSelectionError, EngineMissing) as exc:
        raise _UserError(str(exc)) from None
    except Interrupted as exc:  # the partial table is printed and the JSON written
        print(f"gather-scatter check: {exc}", file=sys.stderr)
        return INTERRUPTED
    return 1 if result["findings"] else 0


def _check_mode_options(args: argparse.Namespace) -> None:
    """Refuse an option of one mode given in the other.

    Operator mode (no MODEL) generates cases (--op, --opset, --cases); model mode (MODEL)
    takes the model's inputs (--input, --inputs, --dim, --tries).
    """
    if args.model is not None:
        given = [name for name, value in (("--op", args.op), ("--opset", args.opset), ("--cases", args.cases)) if value]
        if given:
            one = len(given) == 1
            raise _UserError(
                f"{', '.join(given)} {'selects' if one else 'select'} generated cases, not a model's nodes: leave out "
                f"MODEL to check operators, or drop {'it' if one else 'them'} to check the model"
            )
    else:
        given = [
            name
            for name, value in (
                ("--input", args.input),
                ("--inputs", args.inputs),
                ("--dim", args.dim),
                ("--tries", args.tries),
                ("--no-strict", not args.strict),
            )
            if value
        ]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise _UserError(f"{', '.join(given)} {verb} to a model: gather-scatter check MODEL.onnx --engine NAME ...")


def _check_model(args: argparse.Namespace) -> dict:
    """``check MODEL``: the model's inputs read, its nodes checked (ModelUsageError: exit 2)."""
    from ..check.model import ModelUsageError, run_model_check

    inputs = _load_arrays(args.inputs) if args.inputs else {}
    inputs.update({name: _load_array(name, path) for name, path in args.input})
    try:
        return run_model_check(
            args.model,
            args.engine,
            inputs=inputs,
            dims=dict(args.dim),
            seed=args.seed,
            threads=args.threads,
            timeout=args.timeout,
            tries=args.tries or 3,
            out_dir=args.out,
            json_path=args.json,
            report_dir=args.report,
            strict=args.strict,
        )
    except ModelUsageError as exc:
        raise _UserError(_cli_text(exc)) from None


def _named_size(spec: str) -> tuple[str, int]:
    name, sep, size = spec.partition("=")
    try:
        value = int(size)
    except ValueError:
        value = -1
    if not (sep and name) or value < 0:
        raise argparse.ArgumentTypeError(f"expected NAME=SIZE (a symbolic dim and a size >= 0), got {spec!r}")
    return name, value


def _list_engines() -> int:
    """``check --list-engines``: each engine of the entry-point group, started once in its worker."""
    from ..check.engines import describe

    rows = [
        (r["engine"], r["version"] or "-", r["source"], "can run" if r["status"] == "ok" else r["status"])
        for r in describe()
    ]
    header = ("engine", "version", "source", "status")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=False)) + "  " + row[3])
    return 0


def _engines_text() -> str:
    """Return the engines ``check --help`` names: the entry-point group's, read from it (not typed in)."""
    from ..check.engines import discover

    found = discover()
    built_in = [n for n, p in found.items() if p.value.startswith("gather_scatter.check.engines.")]
    ours = [n for n in built_in if n.startswith("gather_scatter")]
    others = [n for n in built_in if n not in ours]
    plugins = [n for n in found if n not in built_in]
    own_venv = ", onnxruntime-cuda's in a venv of its own" if "onnxruntime-cuda" in others else ""
    text = (
        f"our own ({', '.join(ours)}: our oracle, and onnxruntime with our kernels where it is wrong), the "
        f"{len(others)} other built-in ones ({', '.join(others)}: pip install 'gather_scatter[NAME]'{own_venv}; "
        "'reference' is onnx-reference's old name)"
    )
    if plugins:
        text += f", the installed plugin{'s' * (len(plugins) != 1)} {', '.join(plugins)}"
    return text + " and any plugin installed later (see --list-engines)"


def _add_check(subparsers: Any) -> None:
    from ..rules.versions import LATEST_OPSET

    parser = subparsers.add_parser(
        "check",
        help="find where another ONNX engine gets these operators wrong",
        description=f"Run generated valid and invalid cases of every version of {_FAMILY} through an "
        "engine (out of process, restarted after a crash), compare with gather_scatter's kernels, shrink "
        "each disagreement to a minimal case and write it out with a one-line reproduction. Exit status: "
        "1 with findings, 0 without, 2 for a usage error (e.g. an engine that is unknown, not installed, does "
        "not import or does not meet the engine protocol), 130 when interrupted (Ctrl-C) once the report of the "
        "cases run so far is written. Engines are found through the entry-point group gather_scatter.engines: "
        "{engines}. With MODEL (model mode), the model "
        "runs once with gather_scatter's kernels on its inputs (--input, --inputs; random ones otherwise; a model "
        "with operators only onnxruntime runs, as LLM exports have, runs in onnxruntime with gather_scatter's "
        "kernels for its indexing nodes), each "
        "indexing node is replayed on the engine as a one-node model with the tensors it saw, and the whole "
        "model's outputs are compared; the report names each diverging node. A model that cannot be read, has "
        "no indexing node, or a symbolic input dim without --dim is a usage error. With --exporter torch "
        "(exporter mode), torch's ONNX exporters are checked instead: see --exporter.",
    )
    parser.add_argument(
        "model",
        nargs="?",
        metavar="MODEL",
        help="model mode: check each indexing node of this .onnx file on its own tensors, and the "
        "whole model's outputs (default: operator mode, generated cases)",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--engine",
        action="append",
        default=[],
        metavar="NAME",
        help="the engine to check (see --list-engines); with --exporter, engines to run each finding's "
        "exported model on too (repeatable), to say whether a runtime shows or hides the export's error",
    )
    which.add_argument(
        "--list-engines",
        action="store_true",
        help="list the installed engines, their versions and whether they can run, and exit",
    )
    parser.add_argument(
        "--exporter",
        choices=["torch"],
        default=None,
        help="exporter mode: export every torch operation that lowers to the family (advanced indexing, "
        "index_select, gather, scatter_reduce, index_put, embedding_bag, ...) on PyTorch's OpInfo samples and "
        "ours, run each graph with gather_scatter's evaluator (the spec's loop) and compare with torch eager; "
        "--op then names torch operations (index_add, getitem, ...), --cases samples per operation (default 24)",
    )
    parser.add_argument(
        "--mode",
        choices=["dynamo", "torchscript", "both"],
        default=None,
        help="with --exporter: torch.onnx.export(dynamo=True), the TorchScript exporter, or both (default)",
    )
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        type=_named_input,
        metavar="NAME=FILE.npy",
        help="model mode: one model input from a .npy file (repeatable; default: random values of "
        "its declared type and shape, from --seed)",
    )
    parser.add_argument("--inputs", metavar="FILE.npz", help="model mode: model inputs from an .npz file, by name")
    parser.add_argument(
        "--dim",
        action="append",
        default=[],
        type=_named_size,
        metavar="NAME=SIZE",
        help="model mode: the size of a symbolic dim of the random inputs (repeatable)",
    )
    parser.add_argument(
        "--tries",
        type=_int_in(1),
        default=None,
        metavar="N",
        help="model mode: runs of each node and of the whole model until the engine disagrees, "
        "for a race that shows on some runs only (default 3)",
    )
    _add_no_strict(parser, "model mode: run, and replay at that version's opset (said in the report),")
    parser.add_argument(
        "--op",
        action="append",
        default=[],
        metavar="OP",
        help="an operator (ScatterND) or version (ScatterND-16) to check (repeatable; default all); with "
        "--exporter, a torch operation (index_add)",
    )
    parser.add_argument(
        "--opset",
        action="append",
        default=[],
        type=_int_in(1, LATEST_OPSET[""]),
        metavar="N",
        help="run each version at opset N where it is in effect (repeatable; default: its own)",
    )
    parser.add_argument(
        "--cases", type=_int_in(1), default=None, metavar="N", help="cases per operator version (default 20)"
    )
    parser.add_argument(
        "--seed",
        type=_int_in(0),
        default=0,
        metavar="S",
        help="seed of the generated cases, or of a model's random inputs (default 0)",
    )
    parser.add_argument("--threads", type=_int_in(1), default=None, metavar="T", help="the engine's intra-op threads")
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="seconds per case (or node, or whole model) before the engine counts as hung (default 30); with "
        "--exporter, per export and evaluation (default 120)",
    )
    parser.add_argument(
        "--out",
        default="check-findings",
        metavar="DIR",
        help="where finding-NNNN.onnx/.npz go (default check-findings)",
    )
    parser.add_argument("--json", default=None, metavar="REPORT.json", help="also write the report as JSON")
    parser.add_argument(
        "--report",
        default=None,
        metavar="DIR",
        help="also write, per class of findings, an issue text ready to file with the engine "
        "(NN-ENGINE-OP-KIND.md) and its standalone reproduction script (.py, numpy, onnx and the "
        "engine only; .npz beside it for larger arrays); DIR is replaced as a whole at the end",
    )
    parser.set_defaults(func=_check, parser=parser)
    # The engines are read from their entry points when the help is shown: reading them costs
    # every other command its start-up time.
    plain_help = parser.format_help

    def format_help() -> str:
        if "{engines}" in (parser.description or ""):
            parser.description = (parser.description or "").replace("{engines}", _engines_text())
        return plain_help()

    parser.format_help = format_help
