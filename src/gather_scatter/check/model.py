"""Model mode of ``gather-scatter check``.

Which indexing node of *this* model does an engine get wrong, on *its* tensors?

The model runs once with our kernels, each indexing node recording what it saw (``capture``);
a model with operators our evaluator cannot run (onnxruntime's contrib operators) runs in
onnxruntime instead, its indexing nodes on our kernels (``hosted_capture``).
Each recorded node is then replayed on the engine as a one-node model at its opset, in the
engine's worker, and classified, shrunk and written out as operator mode does (``runner``,
``shrink``, ``report``); the whole model runs on the engine too, and its outputs are compared
with ours (:func:`close`).
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Mapping
from typing import Any, TextIO

import numpy as np
import onnx

from ..errors import GatherScatterError, one_line
from . import engines, report, runner, shrink, upstream
from .capture import ModelUsageError, NodeRun, capture, indexing_nodes, load, make_feeds, not_run
from .hosted_capture import HOSTED, OURS, foreign_ops, hosted_capture, left_to_onnxruntime
from .report import Interrupted

__all__ = ["ModelUsageError", "close", "run_model_check"]


# ----------------------------------------------------------------------------- the check


def _order_free(check: runner.CheckCase) -> bool:
    """Tell whether ``check`` is a float scatter that adds or multiplies.

    Duplicate targets summed in another order (as a multi-threaded engine sums them) round
    differently, which is not a defect here.
    """
    reduction = check.case.attrs.get("reduction", "none")
    return reduction in ("add", "mul") and check.case.inputs[0].dtype.kind in "fcV"


def _kind(worker: engines.Worker, check: runner.CheckCase) -> tuple[str, str]:
    """Run ``check`` as ``runner.run_one`` does, but a float add/mul scatter within rounding of ours agrees.

    See :func:`_order_free`; a lost update moves an element by a whole update, far more.
    """
    ours = runner.expected(check)
    hint = (ours.shape, ours.dtype) if isinstance(ours, np.ndarray) else None
    outcome = worker.run(runner.model_bytes(check), check.feeds(), hint)
    kind, detail = runner.classify(check, outcome)
    if kind == "wrong_output" and _order_free(check) and close(outcome.output, ours) is None:
        return "agree", ""
    if kind == "wrong_output" and _order_free(check):
        detail = close(outcome.output, ours) or detail
    return kind, detail


def _replay(worker: engines.Worker, check: runner.CheckCase, tries: int) -> tuple[str, str]:
    """Return the node's kind and detail, replayed up to ``tries`` times until the engine disagrees.

    A race, such as onnxruntime's two-thread ScatterND add, shows only on some runs.
    """
    for _ in range(tries):
        kind, detail = _kind(worker, check)
        if kind != "agree":
            break
    return kind, detail


def _shrunk(worker: engines.Worker, check: runner.CheckCase, kind: str, detail: str) -> tuple[runner.CheckCase, str]:
    """Return the smallest case that still shows the finding, as operator mode shrinks it."""
    want = runner.signature(check, kind)
    small = shrink.shrink(check, want, lambda c: runner.signature(c, _kind(worker, c)[0]), budget=60)
    if small is not check:
        again, said = _kind(worker, small)
        if runner.signature(small, again) == want:
            return small, said
    return check, detail


def _tolerance(dtype: np.dtype) -> float:
    """Return the tolerance for ``dtype``, relative to the output's largest magnitude.

    Other operators (MatMul, Softmax) may round differently in another engine; an indexing
    defect moves whole elements.
    """
    if dtype.kind == "V" or dtype.itemsize <= 2 or dtype.name.startswith("float8"):
        return 2e-2
    return 1e-7 if dtype in (np.float64, np.complex128) else 1e-4


def close(actual: Any, expected: Any) -> str | None:
    """Return None when the engine's model output ``actual`` is ours, ``expected``, else what differs.

    Floats compare within a tolerance of the output's scale, NaN where we have NaN; anything
    else exactly, as ``runner.same``.

    Parameters
    ----------
    actual : array_like or None
        None (an output NumPy cannot hold) is not compared.
    expected : ndarray or other
        Only a tensor (an ndarray) is compared.

    Returns
    -------
    str or None
    """
    if actual is None or not isinstance(expected, np.ndarray):
        return None
    actual = np.asarray(actual)
    inexact = expected.dtype.kind in "fcV"
    if not inexact or actual.shape != expected.shape or actual.dtype != expected.dtype or expected.dtype == object:
        return runner.same(actual, expected)
    wide = np.complex128 if expected.dtype.kind == "c" else np.float64
    a, e = actual.astype(wide).reshape(-1), expected.astype(wide).reshape(-1)
    finite = np.isfinite(e)
    scale = max(1.0, float(np.abs(e[finite]).max())) if finite.any() else 1.0
    tol = _tolerance(expected.dtype) * scale
    with np.errstate(invalid="ignore"):
        ok = (a == e) | (np.isnan(a) & np.isnan(e)) | (np.abs(a - e) <= tol)
    if ok.all():
        return None
    i = int(np.argmin(ok))
    return (
        f"{int((~ok).sum())} of {a.size} elements differ by more than {tol:.3g}; first at flat position {i}: "
        f"{actual.reshape(-1)[i]!r}, expected {expected.reshape(-1)[i]!r}"
    )


def _classify_model(
    outcome: engines.Outcome, names: list[str], ours: list | None, error: GatherScatterError | None
) -> tuple[str, str]:
    if outcome.kind in ("crash", "timeout", "unsupported"):
        return outcome.kind, outcome.message
    if error is not None:
        if outcome.kind == "ok":
            return "accepted_invalid", f"we raise {type(error).__name__}: {error}; the engine returned a result"
        return "agree", ""
    if outcome.kind == "error":
        return "rejected_valid", f"the engine raised: {outcome.message}"
    assert ours is not None  # None only with an error, handled above
    if len(outcome.outputs) != len(ours):
        return "wrong_output", f"{len(outcome.outputs)} outputs, expected {len(ours)}"
    for name, got, want in zip(names, outcome.outputs, ours, strict=False):
        diff = close(got, want)
        if diff:
            return "wrong_output", f"output {name!r}: {diff}"
    return "agree", ""


def _write_node(check: runner.CheckCase, stem: str) -> dict[str, str]:
    """Write the node as the model ran it (before shrinking), beside its finding."""
    with open(stem + ".onnx", "wb") as f:
        f.write(runner.model_bytes(check))
    report.write_inputs(stem + ".npz", check.feeds())
    return {"node_model": stem + ".onnx", "node_inputs": stem + ".npz"}


def _refuse_off_spec(proto: onnx.ModelProto) -> None:
    """ModelUsageError for the first off-spec node of the family (``strict``), naming the fix.

    See ``_model_check.off_spec_nodes``. Run before the model: our run would otherwise report
    the refusal as our kernels raising on these inputs, and the engine's acceptance as a finding.
    """
    from ..models import off_spec_nodes

    for node, _, error in off_spec_nodes(proto):
        said = error.in_node(node.name, node.op_type) if isinstance(error, GatherScatterError) else error
        raise ModelUsageError(one_line(said))


def _is_off_spec(run: NodeRun) -> bool:
    return run.model_opset is not None and run.spec.since_version > run.model_opset


def _off_spec(run: NodeRun) -> str:
    """Say how an off-spec node (``strict=False``) ran and was replayed: as which version, at which opset."""
    from ..rules.versions import choice_value, resolve

    assert run.model_opset is not None  # see _is_off_spec
    in_effect = resolve(run.spec.op_type, run.model_opset, run.spec.domain)
    refused = ", ".join(f"{n} = {choice_value(v)!r}" for n, v in run.attrs.items() if in_effect.refuses({n: v}))
    return (
        f"{run.label}: {run.spec.op_type} at the model's opset {run.model_opset} is {in_effect.name}, which does not "
        f"accept {refused}; run as {run.spec.name} and replayed at opset {run.opset} (--no-strict)"
    )


def _node_row(run: NodeRun, kind: str, detail: str) -> dict:
    spec = run.spec
    return {
        "node": run.label,
        "op": spec.op_type,
        "domain": spec.domain or "ai.onnx",
        "since_version": spec.since_version,
        "opset": run.opset,
        "calls": run.calls,
        "kind": kind,
        "detail": detail,
    }


def run_model_check(
    model_path: str,
    engine: str,
    *,
    inputs: Mapping[str, np.ndarray] | None = None,
    dims: Mapping[str, int] | None = None,
    seed: int = 0,
    threads: int | None = None,
    timeout: float = 30.0,
    tries: int = 3,
    out_dir: str = "check-findings",
    json_path: str | None = None,
    report_dir: str | None = None,
    stream: TextIO | None = None,
    strict: bool = True,
) -> dict:
    """Check each indexing node of a model, on its own tensors, and the whole model, on ``engine``.

    Parameters
    ----------
    model_path : str
        An ``.onnx`` file (external data is read beside it).
    engine : str
        An engine of ``engines.discover()`` (an old name: its new one, with a FutureWarning;
        ``engines.canonical``).
    inputs : mapping of str to ndarray, optional
        Model inputs by name; the others are random (see :func:`make_feeds`).
    dims : mapping of str to int, optional
        Sizes of the symbolic dims of the inputs not given.
    seed : int
        The seed of the random inputs.
    threads : int, optional
        The engine's intra-op threads, where it has them.
    timeout : float
        Seconds the engine may take on one node (or the whole model) before it counts as hung.
    tries : int
        Runs of each node and of the whole model until the engine disagrees (a race shows on
        some runs only).
    out_dir, json_path : str
        Where findings (``finding-NNNN.onnx`` + ``.npz``, the node's own tensors as
        ``finding-NNNN-node.*`` where shrinking made them smaller, ``model-inputs.npz``) and
        the JSON report go.
    report_dir : str, optional
        Where an issue text and a standalone script per class of node findings go
        (``upstream.write_reports``); not written when interrupted.
    stream : text stream, optional
        Where the report is printed (default stdout).
    strict : bool, default True
        As for :func:`~gather_scatter.run_model`: True refuses an off-spec node (an attribute or
        value its version lacks and a later version has, as PyTorch writes ScatterElements
        ``reduction='max'`` at opset 17) as a ModelUsageError naming the fix; False runs and
        replays it as the earliest version that accepts it, at that version's opset, and says
        so (``result["off_spec"]``, one line each in the report).

    Returns
    -------
    dict
        ``{"mode": "model", "model", "engine", "engine_version", "inputs", "captured_by",
        "foreign_ops", "nodes": [...], "whole_model": {...}, "not_run", "summary", "findings",
        "cases", "planned", "interrupted"}``: a row per node that ran (``node``, ``op``,
        ``since_version``, ``opset``, ``kind``, ``detail``), the findings with their files, the
        whole model's comparison; who ran the model to capture the nodes' inputs and compute the
        whole model's expected outputs (our evaluator, or onnxruntime with ``route="all"`` where
        the model has ``foreign_ops``, operators our evaluator cannot run).

    Raises
    ------
    ModelUsageError
        The model cannot be read or checked, has no indexing node, or its inputs cannot be made
        (see :func:`make_feeds`); our run of it fails in an operator that is not ours; with
        ``strict``, an off-spec node; it has operators our evaluator cannot run and onnxruntime
        is not installed (the message names the pip extra), or onnxruntime cannot run them.
    engines.EngineMissing
        As for ``run_check``. Every usage error is raised before anything is printed or written.
    Interrupted
        Ctrl-C: the report of the nodes checked so far is printed and written first.
    """
    engine = engines.canonical(engine)  # the report carries the engine's current name
    worker = engines.Worker(engine, threads, timeout)  # an unknown engine: before the model is read
    try:
        proto = load(model_path, engine_ops=lambda read: left_to_onnxruntime(model_path, foreign_ops(read)))
        foreign = foreign_ops(proto)  # operators our evaluator cannot run: captured through onnxruntime
        if not indexing_nodes(proto):
            raise ModelUsageError(
                f"{model_path!r} has no Gather, GatherND, ScatterND, GatherElements, "
                "ScatterElements, Scatter, TensorScatter or com.microsoft GatherBlockQuantized node: nothing to check"
            )
        if strict:
            _refuse_off_spec(proto)
        feeds, described = make_feeds(proto.graph, dict(inputs or {}), dict(dims or {}), seed)
        if foreign:
            runs, ours, our_error = hosted_capture(proto, model_path, feeds, foreign, strict=strict)
        else:
            runs, ours, our_error = capture(proto, feeds, strict=strict)
        try:
            whole = proto.SerializeToString()
        except ValueError:  # over 2 GiB: protobuf cannot hold it in one message
            whole = None
        version = worker.start()
        result: dict[str, Any] = {
            "mode": "model",
            "model": model_path,
            "engine": engine,
            "engine_version": version,
            "threads": threads,
            "seed": seed,
            "inputs": described,
            "captured_by": HOSTED if foreign else OURS,
            "foreign_ops": foreign,
            "not_run": not_run(proto, runs),
            "off_spec": [_off_spec(run) for run in runs if _is_off_spec(run)],
            "our_error": None if our_error is None else one_line(our_error),
            "nodes": [],
            "whole_model": None,
            "findings": [],
            "cases": 0,
            "planned": len(runs),
            "interrupted": False,
        }
        found: list = []
        try:
            _check_nodes(worker, runs, tries, out_dir, result, found)
            _check_whole(worker, whole, proto, feeds, ours, our_error, tries, out_dir, model_path, result)
        except KeyboardInterrupt:
            result["interrupted"] = True
    finally:
        worker.close()
    counts = Counter(row["kind"] for row in result["nodes"])
    result["summary"] = {kind: counts.get(kind, 0) for kind in (*runner.FINDING_KINDS, "unsupported", "agree")}
    out = stream if stream is not None else sys.stdout
    report.print_model_report(result, out)
    findings, nodes, tolerances = zip(*found, strict=False) if found else ((), (), ())
    report.write_outputs(
        result,
        out,
        json_path=json_path,
        report_dir=None if result["interrupted"] else report_dir,
        write_reports=lambda failures: upstream.write_reports(
            findings,
            engine,
            version,
            os.fspath(report_dir or ""),
            threads=threads,
            tries=tries,
            timeout=timeout,
            nodes=nodes,
            tolerances=tolerances,
            failures=failures,
        ),
    )
    if result["interrupted"]:
        raise Interrupted(result)
    return result


def _check_nodes(
    worker: engines.Worker, runs: list[NodeRun], tries: int, out_dir: str, result: dict, found: list
) -> None:
    """Replay each node, appending its row (and finding) to ``result`` once it is done.

    Also append ``(finding, node, tolerance)`` to ``found`` for the issue texts.
    """
    for run in runs:
        kind, detail = _replay(worker, run.check, tries)
        row = _node_row(run, kind, detail)
        if kind in runner.FINDING_KINDS:
            check, detail = _shrunk(worker, run.check, kind, detail)
            finding = runner.Finding(kind, check, detail)
            number = len(result["findings"]) + 1
            report.write_finding(finding, number, out_dir, worker.engine)
            files = dict(finding.files)
            if check is not run.check:
                files.update(_write_node(run.check, os.path.join(out_dir, f"finding-{number:04d}-node")))
            row.update(detail=detail, shrunk=check is not run.check, **files)
            result["findings"].append(row)
            dtype = check.case.inputs[0].dtype
            found.append((finding, run.label, _tolerance(dtype) if _order_free(check) else 0.0))
        result["nodes"].append(row)
        result["cases"] += 1


def _check_whole(
    worker: engines.Worker,
    whole: bytes | None,
    proto: onnx.ModelProto,
    feeds: Mapping[str, Any],
    ours: list | None,
    our_error: GatherScatterError | None,
    tries: int,
    out_dir: str,
    model_path: str,
    result: dict,
) -> None:
    """Run the whole model on the engine and compare its outputs with ours."""
    if whole is None:
        result["whole_model"] = {"kind": "not_run", "detail": "the model is over 2 GiB"}
        return
    names = [o.name for o in proto.graph.output]
    first = ours[0] if ours else None
    hint = (first.shape, first.dtype) if isinstance(first, np.ndarray) else None
    for _ in range(tries):
        kind, detail = _classify_model(worker.run(whole, dict(feeds), hint), names, ours, our_error)
        if kind != "agree":
            break
    row = {"node": None, "op": None, "kind": kind, "detail": detail}
    if kind in runner.FINDING_KINDS:
        os.makedirs(out_dir, exist_ok=True)
        inputs = os.path.join(out_dir, "model-inputs.npz")
        report.write_inputs(inputs, {name: np.asarray(a) for name, a in feeds.items()})
        path = os.path.abspath(model_path)
        row.update(model=path, inputs=inputs, repro=f'python -c "{engines.repro_code(worker.engine, path, inputs)}"')
        result["findings"].append(row)
    result["whole_model"] = row
