"""Issue texts ready to file upstream: ``gather-scatter check --report DIR``.

Findings are grouped into classes (one engine, one operator version, one finding kind, one kind
of case: ``ScatterND-18 wrong_output on valid cases``), and each class becomes three files:

- ``NN-ENGINE-OP-VERSION-KIND.py`` (written by ``repro_script``): a standalone script that
  builds the one-node model with ``onnx.helper`` from the class's smallest (shrunk) case, runs it
  with the engine's own API (the engine's ``standalone_run_source``), prints the actual and the
  expected output, and exits with status 1 and ``DEFECT REPRODUCED`` where the defect shows (0
  where it does not). It imports numpy, onnx and the engine only, never gather_scatter. Arrays
  of up to :data:`LITERAL_LIMIT` elements are literals in the script; larger ones are in
  ``NN-....npz`` beside it.
- ``NN-....md``: the issue text: a title, the environment, what happens, the sentence of the
  ONNX operator specification that decides it, the script's own output on this machine (actual
  and expected), and the script inlined.

Everything is written into a temporary folder beside ``DIR`` and renamed into place at the end,
so an interrupted or failed run leaves no report that looks complete.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import GatherScatterError
from . import repro_script, runner
from .repro_script import LITERAL_LIMIT, attr_source, op_name
from .spec_quotes import SPEC_FILES, SPEC_QUOTES

__all__ = [
    "LITERAL_LIMIT",
    "SPEC_FILES",
    "SPEC_QUOTES",
    "IssueClass",
    "classes",
    "issue_text",
    "script_source",
    "spec_quote",
    "title",
    "topic",
    "write_reports",
]


@dataclass
class IssueClass:
    """One class of findings: the issue text's subject.

    Attributes
    ----------
    key : tuple
        ``(op name, kind, case kind)``: what makes two findings the same defect.
    findings : list of runner.Finding
        Its findings; ``smallest`` is the one the script reproduces.
    tolerance : float
        0 for an exact comparison; else how far (relative to the expected output's largest
        magnitude) a float may be off, for a reduction whose order is free.
    nodes : list of str
        Model mode: the nodes of the model that show it.
    """

    key: tuple
    findings: list = field(default_factory=list)
    tolerance: float = 0.0
    nodes: list = field(default_factory=list)

    @property
    def smallest(self) -> runner.Finding:
        """The class's finding with the fewest input elements, the one its issue shows."""
        return min(self.findings, key=lambda f: sum(a.size for a in f.check.case.inputs))


def classes(
    findings: Sequence[runner.Finding],
    *,
    nodes: Sequence[str | None] | None = None,
    tolerances: Sequence[float] | None = None,
) -> list[IssueClass]:
    """Group findings into classes: the same operator version, kind and kind of case.

    Parameters
    ----------
    findings : sequence of runner.Finding
    nodes : sequence of str or None, optional
        The model node of each finding (model mode).
    tolerances : sequence of float, optional
        Each finding's tolerance (see :class:`IssueClass`); default exact.

    Returns
    -------
    list of IssueClass
        In the order their first finding came.
    """
    grouped: dict[tuple, IssueClass] = {}
    for i, finding in enumerate(findings):
        key = (finding.check.spec.name, finding.kind, finding.check.kind)
        group = grouped.setdefault(key, IssueClass(key))
        group.findings.append(finding)
        if tolerances is not None:
            group.tolerance = max(group.tolerance, tolerances[i])
        if nodes is not None and nodes[i]:
            group.nodes.append(nodes[i])
    return list(grouped.values())


# ----------------------------------------------------------------------------- what the finding is


def _reduction(check: runner.CheckCase) -> str:
    value = check.case.attrs.get("reduction", "none")
    return value.decode() if isinstance(value, bytes) else str(value)


def _has_duplicates(check: runner.CheckCase) -> bool:
    """Whether two updates of a scatter target the same element or slice."""
    op = check.spec.op_type
    if op == "ScatterND":
        data, indices = check.case.inputs[:2]
        k = indices.shape[-1]
        tuples = indices.reshape(-1, k) if k else np.zeros((0, 0), np.int64)
        tuples = np.where(tuples < 0, tuples + np.array(data.shape[:k]), tuples)
        return len({tuple(t) for t in tuples.tolist()}) < len(tuples)
    if op in ("ScatterElements", "Scatter"):
        data, indices = check.case.inputs[:2]
        axis = int(check.case.attrs.get("axis", 0)) % max(data.ndim, 1)
        wrapped = np.where(indices < 0, indices + data.shape[axis], indices)
        moved = np.moveaxis(wrapped, axis, -1).reshape(-1, indices.shape[axis]) if indices.size else wrapped
        return any(len(set(row)) < len(row) for row in moved.tolist())
    return False


def _negative(check: runner.CheckCase) -> bool:
    return any(a.dtype.kind == "i" and a.size and (a < 0).any() for a in check.case.inputs[1:])


def topic(finding: runner.Finding) -> str:
    """Which part of the spec decides ``finding``: ``bounds``, ``reduction`` or ``output``."""
    check = finding.check
    if "bound" in check.kind or "write index" in check.kind or "> max" in check.kind:
        return "bounds"
    if check.kind == "valid" and _negative(check) and finding.kind != "wrong_output":
        return "bounds"
    if _reduction(check) != "none" and _has_duplicates(check):
        return "reduction"
    return "output"


def spec_quote(finding: runner.Finding) -> tuple[str, str]:
    """Return the sentence of the ONNX spec that decides ``finding``, and where it is from.

    Returns
    -------
    tuple of (str, str)
        The quote, and its source (the operator version and the schema's address).
    """
    op, want = op_name(finding.check), topic(finding)
    if want == "reduction":
        want = (
            f"reduction-{_reduction(finding.check)}"
            if (op, f"reduction-{_reduction(finding.check)}") in SPEC_QUOTES
            else want
        )
    quote = (
        SPEC_QUOTES.get((op, want))
        or SPEC_QUOTES.get((op, "reduction" if want.startswith("reduction") else "output"))
        or SPEC_QUOTES.get((op, "output"), "")
    )
    spec = finding.check.spec
    if spec.domain:
        where = "https://github.com/microsoft/onnxruntime/blob/main/docs/ContribOperators.md"
    else:
        where = f"https://onnx.ai/onnx/operators/onnx__{spec.op_type}.html"
    return quote, f"ONNX operator schema {op}-{spec.since_version} ({where})"


def _threads(threads: int | None) -> str:
    return f" on {threads} threads" if threads and threads > 1 else ""


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width].rsplit(" ", 1)[0] + " ..."


def title(group: IssueClass, engine: str, version: str, threads: int | None) -> str:
    """Return a one-line issue title for ``group``.

    For example ``[onnxruntime 1.32.0] ScatterND-18 reduction='add' loses updates to duplicate
    indices on 2 threads``.
    """
    finding = group.smallest
    check = finding.check
    name = check.spec.name if not check.spec.domain else f"{check.spec.domain}.{check.spec.name}"
    reduction = _reduction(check)
    red = f" reduction='{reduction}'" if reduction != "none" else ""
    if finding.kind == "wrong_output":
        if red and _has_duplicates(check):
            what = f"{red} gives a wrong result for duplicate indices{_threads(threads)}"
        elif "dtype" in finding.detail and "expected" in finding.detail:
            what = f" returns the wrong output type ({finding.detail.split(';')[0]})"
        elif "shape" in finding.detail and finding.detail.startswith("shape"):
            what = f" returns the wrong output shape ({finding.detail})"
        else:
            what = (
                f"{red} returns a wrong output"
                + (" with negative indices" if _negative(check) else "")
                + _threads(threads)
            )
    elif finding.kind == "accepted_invalid":
        what = f" returns a result for an invalid input ({check.kind}) instead of raising an error"
    elif finding.kind == "rejected_valid":
        message = finding.detail.removeprefix("the engine raised: ")
        what = (
            " rejects valid negative indices" if _negative(check) else " rejects a valid input"
        ) + f": {_shorten(message, 90)}"
    elif finding.kind == "crash":
        on = f"an invalid input ({check.kind})" if check.kind != "valid" else "a valid input"
        what = f" crashes the process on {on}"
    else:
        what = f" hangs on {'an invalid input (' + check.kind + ')' if check.kind != 'valid' else 'a valid input'}"
    return f"[{engine} {version}] {name}{what}"


# ----------------------------------------------------------------------------- the script


def script_source(
    group: IssueClass, engine: str, version: str, threads: int | None, tries: int, timeout: float, archive: str
) -> tuple[str, dict[str, np.ndarray]]:
    """Return the standalone reproduction of ``group``: its source, and the arrays it loads from ``archive``.

    The script is :func:`repro_script.build`'s, of the class's smallest finding, titled as its issue.

    Parameters
    ----------
    group : IssueClass
        The class; its smallest finding is reproduced.
    engine, version : str
        The engine's name and version.
    threads : int or None
        The engine's intra-op threads, as the check ran it.
    tries : int
        Runs of the model until a wrong output shows (for a race).
    timeout : float
        Seconds a run may take (crash and timeout findings run in a child process).
    archive : str
        The file name of the ``.npz`` beside the script that holds arrays too large for literals.

    Returns
    -------
    tuple of (str, dict of str to ndarray)
        The script, and the arrays for ``archive`` (empty: no archive needed).
    """
    return repro_script.build(
        group.smallest,
        engine=engine,
        title=title(group, engine, version, threads),
        threads=threads,
        tries=tries,
        timeout=timeout,
        tolerance=group.tolerance,
        archive=archive,
    )


# ----------------------------------------------------------------------------- the issue text


def _environment(engine: str, version: str, threads: int | None) -> list[str]:
    import onnx

    return [
        f"- {engine} {version}" + (f", {threads} intra-op threads" if threads else ""),
        f"- Python {platform.python_version()} ({platform.python_implementation()}), {platform.platform()}",
        f"- numpy {np.__version__}, onnx {onnx.__version__}",
    ]


def _what(group: IssueClass) -> str:
    finding = group.smallest
    check = finding.check
    attrs = ", ".join(f"{k}={attr_source(v)}" for k, v in check.case.attrs.items())
    shapes = ", ".join(f"{n}: {a.dtype} {list(a.shape)}" for n, a in zip(check.names, check.case.inputs, strict=False))
    case = "a valid input" if check.kind == "valid" else f"an invalid input ({check.kind})"
    detail = " ".join(finding.detail.split())
    expected = runner.expected(check)
    if finding.kind == "accepted_invalid" and isinstance(expected, GatherScatterError):
        detail = f"the spec requires an error ({' '.join(str(expected).split())}), but the engine returned a result"
    text = (
        f"A model of one `{op_name(check)}` node (opset {check.opset}{', ' + attrs if attrs else ''}), run on "
        f"{case} ({shapes}): {detail}"
    )
    extra = []
    if len(group.findings) > 1:
        extra.append(f"{len(group.findings)} cases of this kind were found; the script shows the smallest")
    if group.nodes:
        extra.append(
            "found at node"
            + "s" * (len(set(group.nodes)) > 1)
            + " "
            + ", ".join(f"`{n}`" for n in dict.fromkeys(group.nodes))
            + " of the model checked"
        )
    return text + ("" if text.endswith(".") else ".") + "".join(f" {e[0].upper()}{e[1:]}." for e in extra)


def issue_text(
    group: IssueClass,
    engine: str,
    version: str,
    threads: int | None,
    script: str,
    script_name: str,
    archive: str | None,
    output: str,
) -> str:
    """Return the Markdown issue text of ``group``.

    Parameters
    ----------
    group : IssueClass
    engine, version : str
    threads : int or None
    script : str
        The standalone script's source (inlined).
    script_name, archive : str
        Its file name, and the ``.npz`` beside it (None where it needs none).
    output : str
        What the script printed on this machine.

    Returns
    -------
    str
    """
    finding = group.smallest
    quote, source = spec_quote(finding)
    quoted = (
        "\n".join(f"> {line}".rstrip() for line in quote.splitlines()) if quote else "> (no sentence of the spec found)"
    )
    files = f"`{script_name}`" + (f" with `{archive}` beside it (the larger arrays)" if archive else "")
    return "\n".join(
        [
            f"# {title(group, engine, version, threads)}",
            "",
            "## Environment",
            "",
            *_environment(engine, version, threads),
            "",
            "## What happens",
            "",
            _what(group),
            "",
            "## What the ONNX specification says",
            "",
            quoted,
            "",
            f"— {source}",
            "",
            "## Actual and expected output",
            "",
            "The script below, run on the machine above:",
            "",
            "```text",
            output.rstrip() or "(no output)",
            "```",
            "",
            "## Reproduction",
            "",
            f"Standalone: numpy, onnx and {engine} only ({files}; `python {script_name}` exits with status 1 and "
            "prints `DEFECT REPRODUCED` where the defect shows).",
            "",
            "```python",
            script.rstrip(),
            "```",
            "",
        ]
    )


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-")


def _run_script(path: str, timeout: float) -> str:
    """Run the script here and return what it prints (its output shows in the issue text)."""
    try:
        done = subprocess.run(
            [sys.executable, path], capture_output=True, text=True, timeout=timeout, cwd=os.path.dirname(path)
        )
    except subprocess.TimeoutExpired:
        return f"(the script did not finish within {timeout:.0f} s)"
    text = done.stdout + (("\n" + done.stderr.strip()[-1500:]) if done.returncode not in (0, 1) and done.stderr else "")
    lines = text.rstrip().splitlines()
    return "\n".join(lines[:60] + (["..."] if len(lines) > 60 else [])) + f"\n(exit status {done.returncode})"


def write_reports(
    findings: Sequence[runner.Finding],
    engine: str,
    version: str,
    report_dir: str,
    *,
    threads: int | None = None,
    tries: int = 1,
    timeout: float = 30.0,
    nodes: Sequence[str | None] | None = None,
    tolerances: Sequence[float] | None = None,
    run_scripts: bool = True,
) -> list[str]:
    """Write an issue text, a standalone script and its arrays per class of ``findings``.

    One issue text (``.md``), standalone script (``.py``) and, where needed, arrays (``.npz``)
    per class go into ``report_dir``, atomically.

    Parameters
    ----------
    findings : sequence of runner.Finding
        The findings of one check (one engine).
    engine, version : str
        The engine and its version as the check reported it.
    report_dir : str
        The folder; replaced as a whole (written beside it under a temporary name, then renamed).
    threads : int or None
        The engine's intra-op threads.
    tries : int
        Runs of the model in a script until a wrong output shows; at least 50 with two or more
        threads (a race).
    timeout : float
        Seconds one engine run may take.
    nodes, tolerances : sequence, optional
        Model mode: each finding's node, and its tolerance (see :func:`classes`).
    run_scripts : bool
        Run each script here and put its output into the issue text (default).

    Returns
    -------
    list of str
        The issue texts' paths, in ``report_dir``.
    """
    report_dir = os.path.abspath(os.fspath(report_dir))
    parent = os.path.dirname(report_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(report_dir)}.partial-", dir=parent)
    if threads and threads > 1:
        tries = max(tries, 50)
    written = []
    try:
        for number, group in enumerate(classes(findings, nodes=nodes, tolerances=tolerances), 1):
            op, kind, _ = group.key
            stem = f"{number:02d}-{_slug(engine)}-{_slug(op)}-{kind}"
            script_name, archive = stem + ".py", stem + ".npz"
            script, stored = script_source(group, engine, version, threads, tries, timeout, archive)
            with open(os.path.join(tmp, script_name), "w") as f:
                f.write(script)
            if stored:
                np.savez(os.path.join(tmp, archive), **stored)  # type: ignore[arg-type]  # numpy stubs: **arrays might fill allow_pickle
            output = (
                _run_script(os.path.join(tmp, script_name), timeout * (tries + 2) + 60) if run_scripts else "(not run)"
            )
            text = issue_text(group, engine, version, threads, script, script_name, archive if stored else None, output)
            with open(os.path.join(tmp, stem + ".md"), "w") as f:
                f.write(text)
            written.append(os.path.join(report_dir, stem + ".md"))
        old = None
        if os.path.lexists(report_dir):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(report_dir)}.old-", dir=parent)
            os.rename(report_dir, os.path.join(old, "report"))
        os.rename(tmp, report_dir)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return written
