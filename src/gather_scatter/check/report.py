"""What ``gather-scatter check`` writes: the findings' files, a table on stdout, and the JSON report.

Each finding is written as ``finding-NNNN.onnx`` + ``.npz`` (inputs by name) with a one-line
reproduction.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import TextIO

import numpy as np

from .engines import repro_code
from .runner import FINDING_KINDS, Finding, model_bytes


def load_inputs(model_path: str, inputs_path: str) -> dict[str, np.ndarray]:
    """Load a finding's inputs by name, in the types the model declares.

    NumPy's ``.npz`` cannot hold ml_dtypes' bfloat16, float8 and 4-bit types, so they are
    stored as their bits.

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
    from onnx import helper

    declared = {
        i.name: np.dtype(helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type))
        for i in onnx.load(model_path).graph.input
    }
    with np.load(inputs_path, allow_pickle=True) as archive:
        return {
            name: (a.view(declared[name]) if declared[name].kind == "V" and a.dtype != declared[name] else a)
            for name, a in archive.items()
        }


def _storable(array: np.ndarray) -> np.ndarray:
    return array.view(f"u{array.itemsize}") if array.dtype.kind == "V" else array


def write_finding(finding: Finding, number: int, out_dir: str, engine: str) -> None:
    """Write ``finding-NNNN.onnx`` and ``finding-NNNN.npz`` in ``out_dir``.

    The paths and repro (the engine's own code, ``engines.repro_code``) are set on the finding.
    """
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, f"finding-{number:04d}")
    model, inputs = stem + ".onnx", stem + ".npz"
    with open(model, "wb") as f:
        f.write(model_bytes(finding.check))
    np.savez(inputs, **{name: _storable(a) for name, a in finding.check.feeds().items()})  # type: ignore[arg-type]  # numpy stubs: **arrays might fill allow_pickle
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


def print_table(result: dict, stream: TextIO) -> None:
    """Print a summary line, then one row per (engine, op, version, kind) with its count and one example."""
    rows: dict[tuple, list] = {}
    for f in result["findings"]:
        key = (f["op"] if f["domain"] == "ai.onnx" else f"{f['domain']}.{f['op']}", f["since_version"], f["kind"])
        rows.setdefault(key, []).append(f)
    ran = (
        f"interrupted after {result['cases']} of {result['planned']} cases"
        if result.get("interrupted")
        else f"{result['cases']} cases"
    )
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
        (result["engine"], op, str(v), kind, str(len(fs)), " ".join(fs[0]["detail"].split())[:100])
        for (op, v, kind), fs in sorted(rows.items())
    ]
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(5)]
    for row in [header, *lines]:
        print("  ".join(c.ljust(w) for c, w in zip(row[:5], widths, strict=False)) + "  " + row[5], file=stream)


def write_json(result: dict, path: str) -> None:
    """Write the report ``result`` to ``path`` as indented JSON."""
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
