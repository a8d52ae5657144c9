"""The ``gather-scatter`` command line.

Each subcommand is one ``_add_<name>(subparsers)`` function that defines its arguments and
sets ``func``; adding a subcommand is one such function and one entry in ``_SUBCOMMANDS``.
A failure the user can fix (a bad input, model or index) is one paragraph on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
import zipfile
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from importlib import resources
from typing import Any

import numpy as np

from . import _arrays_io

__all__ = ["main"]

USAGE_ERROR = 2
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a Ctrl-C
DEFAULT_MODEL = "decoder_step.onnx"
DEFAULT_INPUTS = "decoder_step_inputs.npz"


class _UserError(Exception):
    """A failure to report as one paragraph and exit status 2."""


def _paragraph(text: object, limit: int = 600) -> str:
    # onnx and protobuf messages can span many lines and embed whole protos.
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _named_input(spec: str) -> tuple[str, str]:
    name, sep, path = spec.partition("=")
    if not (sep and name and path):
        raise argparse.ArgumentTypeError(f"expected NAME=FILE.npy, got {spec!r}")
    return name, path


def _load_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    problem = _arrays_io.not_numpy(path)
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
            return _arrays_io.read_npz(archive)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's to fix
        raise _UserError(f"cannot read inputs file {os.fspath(path)!r}: {exc}") from None


_FAMILY = "Gather, GatherND, ScatterND, GatherElements, ScatterElements, Scatter and TensorScatter"


def _load_array(name: str, path: str) -> np.ndarray:
    problem = _arrays_io.not_numpy(path)
    if problem:
        raise _UserError(f"cannot read input {name!r} from {path!r}: {problem}")
    try:
        loaded = _arrays_io.load(path)
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
    # What np.savez(path, **arrays) writes, without its own parameters taking outputs by name
    # (an output named 'file' was a TypeError, one named 'allow_pickle' was dropped), and
    # without pickles: np.load reads it with allow_pickle=False, and run --inputs reads it back.
    stored = {name: _arrays_io.storable(name, value) for name, value in arrays.items()}  # every one before writing
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, value in stored.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, value, allow_pickle=False)


def _load_model(path: str | os.PathLike, *, external_data: bool = True):
    import onnx

    try:
        return onnx.load(os.fspath(path), load_external_data=external_data)
    except Exception as exc:  # noqa: BLE001 - missing file, not a protobuf, bad external data
        raise _UserError(f"cannot read model {os.fspath(path)!r}: {type(exc).__name__}: {exc}") from None


def _preview(array: np.ndarray) -> str:
    flat = np.asarray(array).ravel()
    with np.printoptions(threshold=6, edgeitems=3, precision=4, linewidth=10**6):
        return np.array2string(flat, separator=" ")


def _describe(value: Any) -> tuple[str, str, str]:
    """Return the dtype, shape and preview columns of one output.

    An ONNX sequence (a list) is described by its length and the dtype and shape of its first
    tensors.
    """
    if isinstance(value, (list, tuple)):
        items = [f"{np.asarray(v).dtype} {np.asarray(v).shape}" for v in value[:3]] + ["..."] * (len(value) > 3)
        return "sequence", f"[{len(value)}]", f"[{', '.join(items)}]"
    value = np.asarray(value)
    return str(value.dtype), str(value.shape), _preview(value)


def _run(args: argparse.Namespace) -> int:
    import warnings

    from ._dispatch import OffSpecWarning
    from ._feeds import check_inputs
    from ._model_check import check_model
    from .errors import GatherScatterError
    from .session import Session

    output = None
    if args.output:  # checked before the run, not after it
        # As np.savez, .npz is appended to a name without it: say the path really written.
        output = args.output if str(args.output).endswith(".npz") else f"{args.output}.npz"
        _check_destination("--output", output, is_dir=False)
    with ExitStack() as stack:
        if args.model is None:
            data = resources.files(__package__).joinpath("data")
            model_path = stack.enter_context(resources.as_file(data / DEFAULT_MODEL))
            inputs = _load_arrays(stack.enter_context(resources.as_file(data / DEFAULT_INPUTS)))
            shown = f"built-in {DEFAULT_MODEL} (inputs from {DEFAULT_INPUTS})"
        else:
            model_path, inputs, shown = args.model, {}, args.model
        if args.inputs:
            inputs.update(_load_arrays(args.inputs))
        inputs.update({name: _load_array(name, path) for name, path in args.input})
        hosted = args.engine == "onnxruntime"
        model = _load_model(model_path, external_data=not hosted)  # onnxruntime reads the weights itself
        inputs = _arrays_io.typed_inputs(model.graph, inputs)  # bfloat16, float8, int4 ... as .npy stores them: void
        start = time.perf_counter()
        try:
            if args.check:  # by path: a model over 2 GiB is checked from its file
                check_model(model, path=model_path)
            with warnings.catch_warnings(record=True) as caught:  # --no-strict: one line per off-spec node
                warnings.simplefilter("always", OffSpecWarning)
                feeds = check_inputs(model.graph, inputs)  # before the nodes load, as run_model does
                session = Session(
                    model_path if hosted else model,
                    engine=args.engine,
                    threads=args.threads,
                    route=args.route,
                    strict=args.strict,
                    check=False,
                )
                built = time.perf_counter()
                runs = []
                for _ in range(args.repeat):
                    run_start = time.perf_counter()
                    values = session.run(None, feeds)
                    runs.append(time.perf_counter() - run_start)
                outputs = dict(zip([o.name for o in session.get_outputs()], values, strict=False))
        except GatherScatterError as exc:
            raise _UserError(_cli_text(exc)) from None
        except ModuleNotFoundError as exc:  # the engine's package
            raise _UserError(str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - an onnx.reference operator failed
            raise _UserError(f"evaluating {shown} failed: {type(exc).__name__}: {exc}") from None
        elapsed = built - start + runs[0]
        _print_caught("run", caught)

    print(f"model: {shown}")
    if args.explain:
        print(session.plan)
    width = max(map(len, outputs), default=0)
    for name, value in outputs.items():
        dtype, shape, preview = _describe(value)
        print(f"  {name:<{width}}  {dtype:<8} {shape:<12} {preview}")
    print(f"wall time: {elapsed * 1e3:.1f} ms")
    if args.repeat > 1:
        median = statistics.median(runs)
        print(
            f"{args.repeat} runs of one Session: first {runs[0] * 1e3:.3f} ms, median {median * 1e3:.3f} ms per run "
            f"(built in {(built - start) * 1e3:.1f} ms)"
        )
    if output:
        try:
            _save_arrays(output, outputs)
        except (OSError, ValueError) as exc:
            raise _UserError(f"cannot write {output!r}: {exc}") from None
        print(f"outputs saved to {output}")
    return 0


def _add_run(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="evaluate an ONNX model with gather_scatter's indexing kernels",
        description=f"Evaluate an ONNX model: gather_scatter's kernels for {_FAMILY}, "
        "onnx.reference for every other operator. Without MODEL, runs the built-in "
        "decoder step with its stored inputs.",
    )
    parser.add_argument("model", nargs="?", metavar="MODEL", help="an .onnx file (default: the built-in model)")
    parser.add_argument(
        "--input",
        action="append",
        default=[],
        type=_named_input,
        metavar="NAME=FILE.npy",
        help="one model input from a .npy file (repeatable; overrides --inputs)",
    )
    parser.add_argument(
        "--inputs",
        metavar="FILE.npz",
        help="model inputs from an .npz file, by name (an --output file of an earlier run is one); a raw void "
        "array (|V2, |V1, as NumPy stores bfloat16, float8, int4 ...) of the declared type's width is read as "
        "that type",
    )
    parser.add_argument(
        "--output",
        metavar="OUT.npz",
        help="also save the outputs, by name, to an .npz file that np.load(OUT.npz, allow_pickle=False) reads and "
        "--inputs reads back: strings as NumPy unicode arrays; ml_dtypes' types (bfloat16, float8*, int4, uint4, "
        "float4) as NumPy itself stores them, raw void of their width (|V2, |V1), which np.load cannot type: "
        "arr.view(ml_dtypes.bfloat16) restores one (the dtype column run prints names it), and --inputs reads it "
        "as the declared type; a sequence, map or empty optional output cannot be saved",
    )
    parser.add_argument(
        "--repeat",
        type=_int_in(1),
        default=1,
        metavar="N",
        help="run the model N times with one Session and report the first run's time and the median per run",
    )
    _add_no_strict(parser, "run")
    parser.add_argument(
        "--engine",
        choices=("reference", "onnxruntime"),
        default="reference",
        help="reference: our evaluator runs every node (exact, slow outside the family); onnxruntime: onnxruntime "
        "runs the model and our kernels the nodes it gets wrong or cannot load (default: reference)",
    )
    parser.add_argument(
        "--threads",
        type=_int_in(1),
        default=None,
        metavar="N",
        help="onnxruntime's intra-op threads, with --engine onnxruntime (default: the cores this process may use)",
    )
    parser.add_argument(
        "--route",
        choices=("needed", "all"),
        default="needed",
        help="with --engine onnxruntime: 'needed' runs on our kernels only the nodes onnxruntime gets wrong or "
        "cannot load, 'all' every node of the family (default: needed)",
    )
    parser.add_argument(
        "--explain", action="store_true", help="print what runs where (each step's engine, and why each node is routed)"
    )
    _add_no_check(parser)
    parser.set_defaults(func=_run)


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

    from ._dispatch import OffSpecWarning

    for w in caught:
        if issubclass(w.category, OffSpecWarning):
            print(f"gather-scatter {command}: warning: {_paragraph(_cli_text(w.message))}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def _shapes(args: argparse.Namespace) -> int:
    import warnings

    from ._dispatch import OffSpecWarning
    from ._model_check import check_model
    from .errors import GatherScatterError
    from .shape_inference import infer_model_shapes, node_shapes

    model = _load_model(args.model, external_data=False)  # only shapes are read, not weights
    try:
        if args.check:  # external data, not loaded, checked against the files beside the model
            check_model(model, path=args.model)
        with warnings.catch_warnings(record=True) as caught:  # --no-strict: one line per off-spec node
            warnings.simplefilter("always", OffSpecWarning)
            lines = list(node_shapes(infer_model_shapes(model, strict=args.strict, check=False), strict=args.strict))
    except GatherScatterError as exc:
        raise _UserError(_cli_text(exc)) from None
    _print_caught("shapes", caught)
    print("\n".join(lines) if lines else f"{args.model}: no node of {_FAMILY}")
    return 0


def _add_shapes(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "shapes",
        help="infer the output shape and dtype of each indexing node",
        description="Infer shapes over a whole ONNX model (onnx's inference for other nodes) and "
        f"print the output shape and dtype of each {_FAMILY} node, or the error naming "
        "the node.",
    )
    parser.add_argument("model", metavar="MODEL", help="an .onnx file")
    _add_no_strict(parser, "infer")
    _add_no_check(parser)
    parser.set_defaults(func=_shapes)


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


def _op_or_version(text: str) -> str:
    """``--op``: an operator (``ScatterND``) or version (``ScatterND-16``) of the registry, spelled as ONNX does."""
    import difflib

    from ._versions import REGISTRY

    known = sorted({v.op_type for v in REGISTRY.values()} | {v.name for v in REGISTRY.values()})
    if text in known:
        return text
    folded = {name.lower(): name for name in known}
    close = [folded[text.lower()]] if text.lower() in folded else difflib.get_close_matches(text, known, n=3)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    raise argparse.ArgumentTypeError(f"unknown operator or version {text!r}{hint}; choose from {', '.join(known)}")


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


def _check(args: argparse.Namespace) -> int:
    from .check import Interrupted, run_check
    from .check.engines import EngineMissing
    from .check.runner import SelectionError

    if args.list_engines:
        return _list_engines()
    if args.engine is None:
        raise _UserError("one of --engine or --list-engines is required")
    _check_mode_options(args)
    _check_destination("--out", args.out, is_dir=True)
    if args.json:
        _check_destination("--json", args.json, is_dir=False)
    if args.report:
        _check_destination("--report", args.report, is_dir=True, beside=True)
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
    from .check.model import ModelUsageError, run_model_check

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
    from .check.engines import describe

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
    from .check.engines import discover

    found = discover()
    built_in = [n for n, p in found.items() if p.value.startswith("gather_scatter.check.engines.")]
    plugins = [n for n in found if n not in built_in]
    text = f"the {len(built_in)} built in ({', '.join(built_in)}: pip install 'gather_scatter[NAME]')"
    if plugins:
        text += f", the installed plugin{'s' * (len(plugins) != 1)} {', '.join(plugins)}"
    return text + " and any plugin installed later (see --list-engines)"


def _add_check(subparsers: Any) -> None:
    from ._versions import LATEST_OPSET

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
        "runs once with gather_scatter's kernels on its inputs (--input, --inputs; random ones otherwise), each "
        "indexing node is replayed on the engine as a one-node model with the tensors it saw, and the whole "
        "model's outputs are compared; the report names each diverging node. A model that cannot be read, has "
        "no indexing node, or a symbolic input dim without --dim is a usage error.",
    )
    parser.add_argument(
        "model",
        nargs="?",
        metavar="MODEL",
        help="model mode: check each indexing node of this .onnx file on its own tensors, and the "
        "whole model's outputs (default: operator mode, generated cases)",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--engine", metavar="NAME", help="the engine to check (see --list-engines)")
    which.add_argument(
        "--list-engines",
        action="store_true",
        help="list the installed engines, their versions and whether they can run, and exit",
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
        type=_op_or_version,
        metavar="OP",
        help="an operator (ScatterND) or version (ScatterND-16) to check (repeatable; default all)",
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
        default=30.0,
        metavar="SECONDS",
        help="seconds per case (or node, or whole model) before the engine counts as hung (default 30)",
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
    parser.set_defaults(func=_check)
    # The engines are read from their entry points when the help is shown: reading them costs
    # every other command its start-up time.
    plain_help = parser.format_help

    def format_help() -> str:
        if "{engines}" in (parser.description or ""):
            parser.description = (parser.description or "").replace("{engines}", _engines_text())
        return plain_help()

    parser.format_help = format_help


_SUBCOMMANDS: tuple[Callable[[Any], None], ...] = (_add_run, _add_shapes, _add_check)


def _build_parser() -> argparse.ArgumentParser:
    """Build the ``gather-scatter`` argument parser, one subparser per entry in ``_SUBCOMMANDS``."""
    from . import __version__

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
        print(f"gather-scatter {args.command}: error: {_paragraph(exc)}", file=sys.stderr)
        return USAGE_ERROR


if __name__ == "__main__":
    sys.exit(main())
