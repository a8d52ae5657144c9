"""``gather-scatter check --exporter torch``: every sample through each exporter, findings shrunk and written.

A finding class is one (operation, variant, exporter mode, kind): ``scatter_reduce 'mean'
dynamo wrong_output``. The first finding of each class is shrunk (tensors cut along their axes
while the class still shows, eager still accepting the call) and written out: the exported model
and its inputs (``finding-NNNN.onnx`` / ``.npz``), and with ``--report`` a standalone script and
an issue text (``texts``). With ``engines``, each class's model also runs on those engines (the
engine checker's workers), so the report says whether a runtime shows the export's error or
hides it.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO

import numpy as np

from .. import report as engine_report
from .export import FINDING_KINDS, MODES, Exported, carrier, compare, nodes
from .program import leaves, replace_leaves
from .samples import OPERATIONS, Sample, duplicate_targets, opinfo_available, samples
from .worker import ExportWorker

__all__ = ["ExporterSelectionError", "run_exporter_check"]

#: Counted kinds that are not findings, in the table's order after the findings.
OTHER_KINDS = ("undefined", "not_evaluated", "evaluator_crashed", "ok")


class ExporterSelectionError(ValueError):
    """An unknown exporter, mode or operation (the message lists the valid ones)."""


def _select(exporter: str, modes: Sequence[str], ops: Sequence[str] | None) -> list[str]:
    if exporter != "torch":
        raise ExporterSelectionError(f"unknown exporter {exporter!r}; the one checked is 'torch'")
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise ExporterSelectionError(f"unknown exporter mode {bad or modes!r}; choose from {', '.join(MODES)}")
    unknown = [name for name in ops or () if name not in OPERATIONS]
    if unknown:
        raise ExporterSelectionError(
            f"unknown torch operation{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))}; "
            f"choose from {', '.join(OPERATIONS)}"
        )
    return list(ops) if ops else list(OPERATIONS)


def _size(sample: Sample) -> int:
    return sum(int(np.prod(t.shape)) for t in leaves((sample.args, sample.kwargs)))


def _cut(tensor: Any, axis: int, size: int) -> Any:
    return tensor.narrow(axis, 0, size).clone()


def _candidates(sample: Sample) -> Iterator[Sample]:
    """Smaller samples: every tensor with an axis of one length cut together (to 1, then half), then each alone."""
    tensors = leaves((sample.args, sample.kwargs))

    def rebuilt(new: list) -> Sample:
        args, kwargs = replace_leaves((sample.args, sample.kwargs), list(new))
        smaller = Sample(sample.op, args, kwargs, sample.note)
        smaller.undefined = duplicate_targets(OPERATIONS[sample.op], smaller)
        return smaller

    for axis in range(max((t.ndim for t in tensors), default=0)):
        for length in sorted({t.shape[axis] for t in tensors if t.ndim > axis}, reverse=True):
            for size in (1, length // 2):
                if 1 <= size < length:
                    yield rebuilt(
                        [_cut(t, axis, size) if t.ndim > axis and t.shape[axis] == length else t for t in tensors]
                    )
    for k, t in enumerate(tensors):
        for axis in range(t.ndim):
            for size in (1, t.shape[axis] // 2):
                if 1 <= size < t.shape[axis]:
                    yield rebuilt([_cut(u, axis, size) if j == k else u for j, u in enumerate(tensors)])


def _shrink(worker: ExportWorker, sample: Sample, mode: str, opset: int | None, kind: str, exporter: Any, budget: int):
    """Return the smallest sample (tensor elements) still giving ``kind``, and its outcome (None: not smaller)."""
    best: tuple[Sample, Exported] | None = None
    calls = 0
    improved = True
    while improved and calls < budget:
        improved = False
        for candidate in sorted(_candidates(sample), key=_size):
            if calls >= budget:
                break
            calls += 1
            outcome = worker.run(candidate, mode, opset, exporter)
            if outcome.kind == kind:
                sample, best, improved = candidate, (candidate, outcome), True
                break
    return best


def _engine_verdicts(workers: dict, found: Exported) -> dict[str, str]:
    """Run a finding's exported model on each engine's worker: does it show the error, hide it, or neither."""
    verdicts: dict[str, str] = {}
    if found.model is None:
        return verdicts
    model = found.model.SerializeToString()
    for name, worker in workers.items():
        outcome = worker.run(model, dict(found.feeds))
        if outcome.kind != "ok":
            verdicts[name] = f"{outcome.kind}: {outcome.message[:200]}"
            continue
        got = [np.asarray(o) for o in outcome.outputs]
        kind, detail, _, _ = compare(got, found.eager, None)
        if kind == "ok":
            verdicts[name] = "gives eager's result: it would hide this export's error"
        elif found.ours is not None and compare(got, found.ours, None)[0] == "ok":
            verdicts[name] = "gives the spec's result (ours): it shows this export's error"
        else:
            verdicts[name] = "gives neither eager's nor the spec's result: " + detail
    return verdicts


def _versions() -> dict[str, str]:
    import importlib.metadata as metadata

    out = {}
    for name in ("torch", "onnxscript", "onnx"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def run_exporter_check(
    exporter: str = "torch",
    *,
    modes: Sequence[str] = MODES,
    opset: int | None = None,
    ops: Sequence[str] | None = None,
    cases: int = 24,
    seed: int = 0,
    engines: Sequence[str] = (),
    timeout: float = 120.0,
    out_dir: str = "check-findings",
    json_path: str | None = None,
    report_dir: str | None = None,
    progress: bool = True,
    stream: TextIO | None = None,
    export: Callable | None = None,
    isolate: bool = True,
    shrink_budget: int = 24,
) -> dict:
    """Check torch's ONNX exporters on every indexing operation, and return the report.

    Each sample (:mod:`.samples`: ours, then PyTorch's OpInfo samples, then one per dtype) runs in
    torch eager and through each exporter; the exported graph runs with our evaluator (the spec's
    loop), and any difference is the exporter's (:mod:`.export` says how outputs compare and what
    each kind of outcome means).

    Parameters
    ----------
    exporter : {'torch'}
        The exporter family; ``modes`` picks torch's exporters: ``'dynamo'``
        (``torch.onnx.export(dynamo=True)``, onnxscript's torchlib) and ``'torchscript'``.
    opset : int, optional
        The opset to export at; default: each exporter's own (TorchScript: 18).
    ops : list of str, optional
        Operations of :data:`samples.OPERATIONS` (``index_add``, ``getitem``); default all.
    cases, seed : int
        Samples per operation (ours first, then OpInfo's), and the seed of torch's generator.
    engines : list of str
        Engines of ``gather-scatter check --list-engines`` to run each finding's model on too.
    timeout : float
        Seconds one export and evaluation may take before it counts as hung.
    out_dir, json_path, report_dir : str
        Where the findings' models and inputs, the JSON report, and the scripts and issue texts go.
    export : callable, optional
        Replaces torch's exporters: ``export(module, tensors, names, mode, opset) -> onnx.ModelProto``
        (a plugin's exporter, or a test's deliberately wrong lowering).
    isolate : bool, default True
        Export in a worker process, so an exporter that kills its process is a finding
        (``export_crashed``) rather than the end of the check. False runs in this process (a
        lowering patched into torch here is then what exports).

    Returns
    -------
    dict
        ``{"exporter", "versions", "modes", "opset", "date", "samples", "skipped", "table":
        {op: {mode: {kind: count}}}, "summary": {kind: count}, "findings": [...], "opinfo"}``.

    Raises
    ------
    ExporterSelectionError
        An unknown exporter, mode or operation.
    engines.EngineMissing
        An engine of ``engines`` that is not installed or cannot run.
    """
    names = _select(exporter, modes, ops)
    from .. import engines as engine_registry

    # One worker per engine for the whole run (EngineMissing here, before any sample); each starts at its first model.
    verdict_workers = {w.engine: w for w in (engine_registry.Worker(name, None, timeout) for name in engines)}
    table: dict[str, dict[str, Counter]] = {name: {mode: Counter() for mode in modes} for name in names}
    classes: dict[tuple, dict] = {}
    findings: list[dict] = []
    planned = [(name, s) for name in names for s in samples(OPERATIONS[name], cases, seed)]
    skipped = 0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(planned) * len(modes), desc="check torch export", unit="export", file=sys.stderr)
    interrupted, ran = False, 0
    with ExportWorker(timeout, isolate) as worker, contextlib.ExitStack() as stack:
        for engine_worker in verdict_workers.values():
            stack.enter_context(engine_worker)
        try:
            for name, sample in planned:
                for mode in modes:
                    outcome = worker.run(sample, mode, opset, export)
                    ran += 1
                    if bar is not None:
                        bar.update(1 if outcome.kind != "eager_refused" else len(modes) - modes.index(mode))
                    if outcome.kind == "eager_refused":
                        skipped += 1
                        break
                    table[name][mode][outcome.kind] += 1
                    if outcome.kind in FINDING_KINDS:
                        found = (worker, export, opset, verdict_workers, shrink_budget)
                        findings.append(_finding(name, sample, mode, outcome, classes, found, len(findings), out_dir))
        except KeyboardInterrupt:  # the report of the samples run so far is printed and written
            interrupted = True
    if bar is not None:
        bar.close()
    result = {
        "exporter": exporter,
        "versions": _versions(),
        "modes": list(modes),
        "opset": opset,
        "date": datetime.date.today().isoformat(),
        "opinfo": opinfo_available(),
        "interrupted": interrupted,
        "cases": ran,  # exports run, of
        "planned": len(planned) * len(modes),
        "samples": len(planned) - skipped,
        "skipped": skipped,
        "table": {n: {m: dict(c) for m, c in by_mode.items()} for n, by_mode in table.items()},
        "summary": dict(sum((c for by_mode in table.values() for c in by_mode.values()), Counter())),
        "classes": _classes(classes),
        "findings": [{k: v for k, v in f.items() if not k.startswith("_")} for f in findings],
    }
    out = stream if stream is not None else sys.stdout
    print_table(result, out)
    if json_path:
        engine_report.write_json(result, os.fspath(json_path))
    if interrupted:
        raise engine_report.Interrupted(result)
    if report_dir:
        from .texts import write_reports

        reports = write_reports([c["first"] for c in classes.values()], result, os.fspath(report_dir))
        result["reports"], result["classes"] = reports, _classes(classes)
        print(f"{len(reports)} issue texts in {report_dir}", file=out)
        if json_path:
            engine_report.write_json(result, os.fspath(json_path))
    return result


def _finding(
    name: str, sample: Sample, mode: str, outcome: Exported, classes: dict, how: tuple, done: int, out_dir: str
) -> dict:
    """Return the row of one finding; the first of its class is shrunk and run on the engines first."""
    worker, export, opset, verdict_workers, budget = how
    key = (name, sample.variant(), mode, outcome.kind)
    row = _row(name, sample, mode, outcome)
    if key not in classes:
        small = _shrink(worker, sample, mode, opset, outcome.kind, export, budget)
        if small is not None:
            row = _row(name, small[0], mode, small[1])
            row["shrunk_from"] = _size(sample)
            sample, outcome = small
        row["engines"] = _engine_verdicts(verdict_workers, outcome)
        row["_sample"], row["_outcome"] = sample, outcome
        classes[key] = {"first": row, "count": 0}
    classes[key]["count"] += 1
    _write(row, sample, outcome, done + 1, out_dir)
    return row


def _classes(classes: dict) -> list[dict]:
    return [
        {**{k: v for k, v in c["first"].items() if not k.startswith("_")}, "count": c["count"]}
        for c in classes.values()
    ]


def _row(name: str, sample: Sample, mode: str, outcome: Exported) -> dict:
    model = outcome.model
    opset = None
    if model is not None:
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    return {
        "op": name,
        "variant": sample.variant(),
        "mode": mode,
        "kind": outcome.kind,
        "sample": sample.note,
        "detail": outcome.detail,
        "opset": opset,
        "nodes": nodes(model) if model is not None else [],
        "carrier": carrier(model, outcome.output) if model is not None and outcome.kind.startswith("wrong") else None,
    }


def _write(row: dict, sample: Sample, outcome: Exported, number: int, out_dir: str) -> None:
    """Write the finding's model and inputs (where the export gave a model) as finding-NNNN.onnx / .npz."""
    if outcome.model is None:
        return
    import onnx

    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, f"finding-{number:04d}")
    onnx.save(outcome.model, stem + ".onnx")
    engine_report.write_inputs(stem + ".npz", outcome.feeds)
    row["model"], row["inputs"] = stem + ".onnx", stem + ".npz"


def print_table(result: dict, stream: TextIO) -> None:
    """Print the per-operation table (Markdown: it goes into the docs as is), then one row per finding class."""
    modes = result["modes"]
    v = result["versions"]
    if result.get("interrupted"):
        print(engine_report.progress(result), file=stream)
    print(
        f"torch {v['torch']}, onnxscript {v['onnxscript']}, onnx {v['onnx']}: {result['samples']} samples "
        f"through {' and '.join(modes)} ({result['skipped']} that torch eager refuses left out"
        f"{'' if result['opinfo'] else '; OpInfo samples unavailable: pip install expecttest'})",
        file=stream,
    )
    print("", file=stream)
    print("| operation | " + " | ".join(modes) + " |", file=stream)
    print("|---|" + "---|" * len(modes), file=stream)
    order = list(FINDING_KINDS) + list(OTHER_KINDS)
    for name, by_mode in result["table"].items():
        cells = []
        for mode in modes:
            counts = by_mode[mode]
            cell = ", ".join(f"{counts[k]} {k.replace('_', ' ')}" for k in order if counts.get(k))
            cells.append(f"**{cell}**" if any(counts.get(k) for k in FINDING_KINDS) else cell or "-")
        print(f"| {name} | " + " | ".join(cells) + " |", file=stream)
    print("", file=stream)
    if not result["classes"]:
        print("no findings", file=stream)
        return
    engines = sorted({name for c in result["classes"] for name in c.get("engines", {})})
    print(
        "| exporter | operation | variant | kind | count | first example (shrunk) |"
        + "".join(f" {name} |" for name in engines),
        file=stream,
    )
    print("|---|---|---|---|---:|---|" + "---|" * len(engines), file=stream)
    for c in result["classes"]:
        detail = c["detail"].replace("|", "\\|")[:160]
        verdicts = "".join(f" {_short(c.get('engines', {}).get(name, '-'))} |" for name in engines)
        print(
            f"| {c['mode']} | {c['op']} | {c['variant'] or '-'} | {c['kind']} | {c['count']} | "
            f"{c['sample']}: {detail} |{verdicts}",
            file=stream,
        )


def _short(verdict: str) -> str:
    """Return an engine's verdict on a finding's model in a table cell's words."""
    for start, word in (("gives eager's", "hides it"), ("gives the spec's", "shows it"), ("gives neither", "neither")):
        if verdict.startswith(start):
            return word
    return verdict.split(":")[0]
