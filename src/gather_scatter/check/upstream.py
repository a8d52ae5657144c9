"""Issue texts ready to file upstream: ``gather-scatter check --report DIR``.

Findings are grouped into classes (one engine, one operator version, one finding kind, one kind
of case: ``ScatterND-18 wrong_output on valid cases``: ``issue_class``), and each class becomes
three files:

- ``NN-ENGINE-OP-VERSION-KIND.py`` (written by ``repro_script``): a standalone script that
  builds the one-node model with ``onnx.helper`` from the class's smallest (shrunk) case, runs it
  with the engine's own API (the engine's ``standalone_run_source``), prints the actual and the
  expected output, and exits with status 1 and ``DEFECT REPRODUCED`` where the defect shows, 0
  where it does not, 125 and ``COULD NOT RUN`` where it could not run the model
  (``repro_script.EXIT_STATUSES``). It imports numpy, onnx and the engine only, never
  gather_scatter. Arrays of up to :data:`LITERAL_LIMIT` elements are literals in the script;
  larger ones are in ``NN-....npz`` beside it, loaded without pickle.
- ``NN-....md``: the issue text: a title, the environment, what happens, the sentence of the
  ONNX operator specification that decides it, the script's own output on this machine (actual
  and expected), and the script inlined.

Everything is written into a temporary folder beside ``DIR`` and renamed into place at the end,
so an interrupted or failed run leaves no report that looks complete; a class whose files fail
(a bug of ours) can be left out as one line, the others written (``write_reports(failures=)``).
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

import numpy as np

from ..errors import GatherScatterError, one_line
from ..models import save_npz
from . import repro_script, runner
from .issue_class import IssueClass, classes, spec_quote, title, topic
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
    detail = one_line(finding.detail)
    expected = runner.expected(check)
    if finding.kind == "accepted_invalid" and isinstance(expected, GatherScatterError):
        detail = f"the spec requires an error ({one_line(expected)}), but the engine returned a result"
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
            "prints `DEFECT REPRODUCED` where the defect shows, 0 where it does not, and 125 with `COULD NOT RUN` "
            "and the reason where it could not run the model).",
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


def _write_class(
    group: IssueClass,
    stem: str,
    folder: str,
    engine: str,
    version: str,
    threads: int | None,
    tries: int,
    timeout: float,
    run_scripts: bool,
) -> None:
    """Write ``stem``.py (and .npz) and ``stem``.md of ``group`` into ``folder``."""
    script_name, archive = stem + ".py", stem + ".npz"
    script, stored = script_source(group, engine, version, threads, tries, timeout, archive)
    with open(os.path.join(folder, script_name), "w") as f:
        f.write(script)
    if stored:
        save_npz(os.path.join(folder, archive), stored, what="array")  # the one codec (repro_script decodes it)
    output = _run_script(os.path.join(folder, script_name), timeout * (tries + 2) + 60) if run_scripts else "(not run)"
    text = issue_text(group, engine, version, threads, script, script_name, archive if stored else None, output)
    with open(os.path.join(folder, stem + ".md"), "w") as f:
        f.write(text)


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
    failures: list[str] | None = None,
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
    failures : list of str, optional
        Where given, a class whose files cannot be made (an error of ours, whatever it is) is
        left out and one line naming it and the error is appended here; the other classes are
        written. Without it, the error is raised and nothing is written.

    Returns
    -------
    list of str
        The issue texts' paths, in ``report_dir``.
    """
    report_dir = os.path.abspath(os.fspath(report_dir))
    parent = os.path.dirname(report_dir)
    try:
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(report_dir)}.partial-", dir=parent)
    except OSError as exc:  # named as the user gave it, not by our temporary name
        raise OSError(exc.errno, exc.strerror, report_dir) from None
    if threads and threads > 1:
        tries = max(tries, 50)
    written = []
    try:
        for number, group in enumerate(classes(findings, nodes=nodes, tolerances=tolerances), 1):
            op, kind, _ = group.key
            stem = f"{number:02d}-{_slug(engine)}-{_slug(op)}-{kind}"
            try:
                _write_class(group, stem, tmp, engine, version, threads, tries, timeout, run_scripts)
            except Exception as exc:  # any bug of ours in one class must not lose the others
                if failures is None:
                    raise
                for suffix in (".py", ".npz", ".md"):
                    if os.path.lexists(os.path.join(tmp, stem + suffix)):
                        os.remove(os.path.join(tmp, stem + suffix))
                reason = one_line(exc, with_type=True)[:300]
                failures.append(f"{stem}.md ({len(group.findings)} finding(s)) could not be written: {reason}")
                continue
            written.append(os.path.join(report_dir, stem + ".md"))
        old = None
        try:
            if os.path.lexists(report_dir):
                old = tempfile.mkdtemp(prefix=f".{os.path.basename(report_dir)}.old-", dir=parent)
                os.rename(report_dir, os.path.join(old, "report"))
            os.rename(tmp, report_dir)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, report_dir) from None
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return written
