"""``gather-scatter run`` (a model on its inputs, or the built-in one) and ``gather-scatter shapes``."""

from __future__ import annotations

import argparse
import statistics
import time
from contextlib import ExitStack
from importlib import resources
from typing import Any

import numpy as np

from .. import models
from ._common import (
    _FAMILY,
    _add_no_check,
    _add_no_strict,
    _check_destination,
    _cli_text,
    _int_in,
    _load_array,
    _load_arrays,
    _load_model,
    _named_input,
    _print_caught,
    _save_arrays,
    _UserError,
)

DEFAULT_MODEL = "decoder_step.onnx"
DEFAULT_INPUTS = "decoder_step_inputs.npz"


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

    from .._nodes import OffSpecWarning
    from ..errors import GatherScatterError
    from ..models import Session, check_inputs, check_model
    from ..models.hosted import onnxruntime_only_ops

    if args.engine != "onnxruntime" and args.threads is not None:  # not ignored: the user meant onnxruntime's
        raise _UserError(
            f"--threads {args.threads} is an option of --engine onnxruntime (its intra-op threads), not of --engine "
            f"{args.engine}; add --engine onnxruntime (our kernels' threads: GATHER_SCATTER_NUM_THREADS)"
        )
    if args.engine != "onnxruntime" and args.route != "needed":
        raise _UserError(
            f"--route {args.route} is an option of --engine onnxruntime (which nodes of the family our kernels run), "
            f"not of --engine {args.engine}, which runs every one on our kernels; add --engine onnxruntime"
        )
    output = None
    if args.output:  # checked before the run, not after it
        # As np.savez, .npz is appended to a name without it: say the path really written.
        output = args.output if str(args.output).endswith(".npz") else f"{args.output}.npz"
        _check_destination("--output", output, is_dir=False)
    with ExitStack() as stack:
        if args.model is None:
            data = resources.files("gather_scatter").joinpath("data")
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
        inputs = models.typed_inputs(model.graph, inputs)  # bfloat16, float8, int4 ... as .npy stores them: void
        start = time.perf_counter()
        try:
            if args.check:  # by path: a model over 2 GiB is checked from its file
                # onnxruntime judges the operators it registers in onnx's domain (genai's layer norm)
                engine_ops = onnxruntime_only_ops() if hosted else frozenset()
                check_model(model, path=model_path, engine_ops=engine_ops)
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
    rows = [(name, *_describe(value)) for name, value in outputs.items()]
    # each column as wide as its widest entry (float8_e4m3fn, a rank-5 shape), never narrower than before
    width = max((len(r[0]) for r in rows), default=0)
    dtype_width = max([8, *(len(r[1]) for r in rows)])
    shape_width = max([12, *(len(r[2]) for r in rows)])
    for name, dtype, shape, preview in rows:
        print(f"  {name:<{width}}  {dtype:<{dtype_width}} {shape:<{shape_width}} {preview}")
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
        help="model inputs from an .npz file, by name (an --output file of an earlier run, or a finding's .npz "
        "of gather-scatter check, is one); an array tagged with its ONNX type (as --output writes them) is read "
        "as that type, and an untagged raw void array (|V2, |V1, as NumPy stores bfloat16, float8, int4 ...) or "
        "unsigned bits (uint16, uint8) of the declared type's width as that type",
    )
    parser.add_argument(
        "--output",
        metavar="OUT.npz",
        help="also save the outputs, by name, to an .npz file that np.load(OUT.npz, allow_pickle=False) reads and "
        "--inputs reads back: strings as NumPy unicode arrays; ml_dtypes' types (bfloat16, float8*, int4, uint4, "
        "float4) as NumPy itself stores them, raw void of their width (|V2, |V1), which np.load cannot type: "
        "arr.view(ml_dtypes.bfloat16) restores one (the dtype column run prints names it; the archive member's "
        "comment, onnx:bfloat16, names it too), and --inputs reads it as that type; a sequence, map or empty "
        "optional output cannot be saved",
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
        help="onnxruntime's intra-op threads, with --engine onnxruntime only (default: the cores this process may use)",
    )
    parser.add_argument(
        "--route",
        choices=("needed", "all"),
        default="needed",
        help="with --engine onnxruntime only: 'needed' runs on our kernels only the nodes onnxruntime gets wrong "
        "or cannot load, 'all' every node of the family (default: needed)",
    )
    parser.add_argument(
        "--explain", action="store_true", help="print what runs where (each step's engine, and why each node is routed)"
    )
    _add_no_check(parser)
    parser.set_defaults(func=_run)


def _shapes(args: argparse.Namespace) -> int:
    import warnings

    from .._nodes import OffSpecWarning
    from ..errors import GatherScatterError
    from ..models import check_for_inference, infer_model_shapes, node_shapes

    model = _load_model(args.model, external_data=False)  # only shapes are read, not weights
    try:
        if args.check:  # external data, not loaded, checked against the files beside the model
            check_for_inference(model, args.model)  # onnxruntime's default-domain operators left to it
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
