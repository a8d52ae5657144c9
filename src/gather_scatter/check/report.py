"""What ``gather-scatter check`` writes: the findings' files, a table on stdout, and the JSON report.

Each finding is written as ``finding-NNNN.onnx`` + ``.npz`` (inputs by name, in the one codec of
``gather_scatter.models``: ``gather-scatter run finding-NNNN.onnx --inputs finding-NNNN.npz`` runs
it) with a one-line reproduction.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TextIO

import numpy as np

from .. import models
from ..errors import one_line
from .engines import repro_code
from .runner import FINDING_KINDS, Finding, model_bytes


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a check, raised once the partial report (``result``) is printed and written."""

    def __init__(self, result: dict) -> None:
        super().__init__(progress(result))
        self.result = result


def load_inputs(model_path: str, inputs_path: str) -> dict[str, np.ndarray]:
    """Load a finding's inputs by name, in the types the model declares.

    The one codec's reader (``gather_scatter.models.load_npz``): each array tagged with its ONNX
    type is read as that type (ml_dtypes' bfloat16, float8 and 4-bit types, stored as raw void;
    strings, stored as NumPy unicode, as the object arrays of str that engines take). Files of
    older versions carry no tags: their bits (``u2``, ``u1``) and unicode arrays are read as the
    model's declared types. The archive is read without pickle, unless it holds an object array
    (a string ending in NUL, which no NumPy string array holds).

    Parameters
    ----------
    model_path : str
        The finding's ``.onnx`` file, whose inputs' declared types are restored.
    inputs_path : str
        Its ``.npz`` file.

    Returns
    -------
    dict of str to ndarray
    """
    import onnx

    try:
        arrays = models.load_npz(inputs_path)
    except ValueError as exc:  # an object array: pickled by write_inputs
        if "allow_pickle" not in str(exc):
            raise
        arrays = models.load_npz(inputs_path, allow_pickle=True)
    return models.typed_inputs(onnx.load(model_path).graph, arrays)


def write_inputs(path: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Write a finding's inputs to the .npz file ``path`` with the one codec (``gather_scatter.models.save_npz``).

    ml_dtypes' types as raw void and strings as NumPy unicode, each tagged with its ONNX type, so
    that ``gather-scatter run MODEL --inputs path`` and ``np.load(path, allow_pickle=False)`` read
    it; a string ending in NUL, which no NumPy string array holds, is pickled (``np.load`` then
    needs ``allow_pickle=True``; :func:`load_inputs` reads it).
    """
    models.save_npz(path, arrays, what="input", allow_pickle=True)


def write_finding(finding: Finding, number: int, out_dir: str, engine: str) -> None:
    """Write ``finding-NNNN.onnx`` and ``finding-NNNN.npz`` in ``out_dir``.

    The paths and repro (the engine's own code, ``engines.repro_code``) are set on the finding.
    """
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, f"finding-{number:04d}")
    model, inputs = stem + ".onnx", stem + ".npz"
    with open(model, "wb") as f:
        f.write(model_bytes(finding.check))
    write_inputs(inputs, finding.check.feeds())
    finding.files = {"model": model, "inputs": inputs, "repro": f'python -c "{repro_code(engine, model, inputs)}"'}


def report(
    engine: str,
    version: str,
    cases: int,
    summary: Counter,
    findings: list[Finding],
    *,
    planned: int | None = None,
    interrupted: bool = False,
) -> dict:
    """Return the JSON report (see ``gather-scatter check --help``).

    ``cases`` run of ``planned`` (default: all of them), ``interrupted`` by Ctrl-C or not.
    """
    return {
        "engine": engine,
        "engine_version": version,
        "cases": cases,
        "planned": cases if planned is None else planned,
        "interrupted": interrupted,
        "summary": {kind: summary.get(kind, 0) for kind in (*FINDING_KINDS, "unsupported", "agree")},
        "findings": [
            {
                "op": f.check.spec.op_type,
                "domain": f.check.spec.domain or "ai.onnx",
                "since_version": f.check.spec.since_version,
                "opset": f.check.opset,
                "kind": f.kind,
                "case": f.check.kind,
                "model": f.files.get("model"),
                "inputs": f.files.get("inputs"),
                "detail": f.detail,
                "repro": f.files.get("repro"),
            }
            for f in findings
        ],
    }


def progress(result: dict) -> str:
    """Say how far an interrupted check got, in its own unit: generated cases, or a model's nodes.

    One text for the table (stdout) and the Ctrl-C message (stderr): ``interrupted after 3 of
    60 cases``, ``interrupted after 0 of 1 indexing node; the whole model not compared``.
    """
    planned = result["planned"]
    if result.get("mode") != "model":
        return f"interrupted after {result['cases']} of {planned} case{'s' * (planned != 1)}"
    text = f"interrupted after {result['cases']} of {planned} indexing node{'s' * (planned != 1)}"
    return text + ("; the whole model not compared" if result.get("whole_model") is None else "")


def print_table(result: dict, stream: TextIO) -> None:
    """Print a summary line, then one row per (engine, op, version, kind) with its count and one example."""
    rows: dict[tuple, list] = {}
    for f in result["findings"]:
        key = (f["op"] if f["domain"] == "ai.onnx" else f"{f['domain']}.{f['op']}", f["since_version"], f["kind"])
        rows.setdefault(key, []).append(f)
    ran = progress(result) if result.get("interrupted") else f"{result['cases']} cases"
    print(
        f"{result['engine']} {result['engine_version']}: {ran}; "
        + ", ".join(f"{k} {v}" for k, v in result["summary"].items()),
        file=stream,
    )
    if not rows:
        print("no findings", file=stream)
        return
    header = ("engine", "op", "version", "kind", "count", "example")
    lines = [
        (result["engine"], op, str(v), kind, str(len(fs)), one_line(fs[0]["detail"])[:100])
        for (op, v, kind), fs in sorted(rows.items())
    ]
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(5)]
    for row in [header, *lines]:
        print("  ".join(c.ljust(w) for c, w in zip(row[:5], widths, strict=False)) + "  " + row[5], file=stream)


def print_model_report(result: dict, stream: TextIO) -> None:
    """Print model mode's report: a summary line, one row per node, and the whole model's row.

    A row per node gives its name, op version, opset, kind and detail, with the files of each
    finding under it.

    Parameters
    ----------
    result : dict
        As :func:`~gather_scatter.check.run_model_check` returns it.
    stream : text stream
    """
    threads = f" ({result['threads']} threads)" if result.get("threads") else ""
    ran = (
        progress(result) if result["interrupted"] else f"{result['cases']} indexing node{'s' * (result['cases'] != 1)}"
    )
    print(
        f"{result['engine']} {result['engine_version']}{threads}: {result['model']}: {ran}; "
        + ", ".join(f"{k} {v}" for k, v in result["summary"].items()),
        file=stream,
    )
    print(f"inputs (seed {result['seed']}): " + ", ".join(result["inputs"]), file=stream)
    if result.get("foreign_ops"):
        ops = ", ".join(result["foreign_ops"])
        print(f"captured by {result['captured_by']}: our evaluator cannot run {ops}", file=stream)
    if result["our_error"]:
        print(
            f"our kernels raise on these inputs, so the nodes after it did not run: {result['our_error']}", file=stream
        )
    if result["not_run"]:
        print("not run by the model on these inputs: " + ", ".join(result["not_run"]), file=stream)
    for line in result.get("off_spec", ()):
        print(f"off-spec: {line}", file=stream)
    header = ("node", "op", "opset", "kind")
    rows = [
        (
            r["node"],
            f"{r['domain'] + '.' if r['domain'] != 'ai.onnx' else ''}{r['op']}-{r['since_version']}",
            str(r["opset"]),
            r["kind"],
            r,
        )
        for r in result["nodes"]
    ]
    whole = result["whole_model"]
    if whole is not None:
        rows.append(("(whole model)", "-", "-", whole["kind"], whole))
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]
    print("  ".join(c.ljust(w) for c, w in zip(header, widths, strict=False)) + "  detail", file=stream)
    for *cells, r in rows:
        detail = one_line(r["detail"])[:200]
        print(
            ("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=False)) + "  " + detail).rstrip(), file=stream
        )
        if r.get("repro"):
            files = [r["model"], r["inputs"]] if r["node"] else [r["inputs"]]
            if r.get("node_model"):
                files += [r["node_model"], r["node_inputs"]]
            print(f"    files: {', '.join(files)}", file=stream)
            print(f"    repro: {r['repro']}", file=stream)
    findings = result["findings"]
    print(f"{len(findings)} finding{'s' * (len(findings) != 1)}" if findings else "no findings", file=stream)


def write_json(result: dict, path: str) -> None:
    """Write the report ``result`` to ``path`` as indented JSON."""
    with open(path, "w") as f:
        json.dump(result, f, indent=1)


def write_outputs(
    result: dict,
    stream: TextIO,
    *,
    json_path: str | None,
    report_dir: str | None,
    write_reports: Callable[[list[str]], list[str]],
) -> None:
    """Write the JSON report first, then the issue texts, then the JSON again with their paths.

    Whatever fails in the issue texts, the JSON is on disk already; an issue text that cannot be
    written is one line on ``stream`` naming it (and in ``result["reports_not_written"]``), the
    others are written.

    Parameters
    ----------
    result : dict
        The report; ``reports`` (the issue texts' paths) and ``reports_not_written`` are set.
    stream : text stream
        Where the issue texts' count, and each one not written, are printed.
    json_path, report_dir : str or None
        ``--json`` and ``--report``; None where not asked for.
    write_reports : callable
        ``upstream.write_reports`` bound to the findings: takes the list its failures go to,
        returns the paths written.
    """
    if json_path:
        write_json(result, os.fspath(json_path))
    if not report_dir:
        return
    failures: list[str] = []
    result["reports"] = write_reports(failures)
    result["reports_not_written"] = failures
    count = len(result["reports"])
    print(f"{count} issue text{'s' * (count != 1)} in {report_dir}", file=stream)
    for line in failures:
        print(f"not written: {line}", file=stream)
    if json_path:
        write_json(result, os.fspath(json_path))
