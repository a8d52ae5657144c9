"""``gather-scatter check ENGINE``: generated cases of every operator version through one engine.

:func:`run_check` makes the cases (``runner.generate``), runs each in the engine's worker
process, shrinks each finding (``shrink``) and writes the table, the findings and the reports.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from typing import TextIO

from . import engines, report, runner, shrink, upstream
from .report import Interrupted

__all__ = ["run_check"]


def run_check(
    engine: str,
    *,
    ops: list[str] | None = None,
    opsets: list[int] | None = None,
    cases: int = 20,
    seed: int = 0,
    threads: int | None = None,
    timeout: float = 30.0,
    out_dir: str = "check-findings",
    json_path: str | None = None,
    report_dir: str | None = None,
    progress: bool = True,
    stream: TextIO | None = None,
) -> dict:
    """Check ``engine`` against generated cases, and return the report.

    Run ``cases`` generated cases per operator version (and opset) through ``engine``,
    shrink and write out each finding, print the table, and return the report.

    Parameters
    ----------
    engine : str
        An engine of ``engines.discover()``: ``onnxruntime``, ``onnx-reference``, ``openvino``,
        ``tract``, ..., our own ``gather_scatter`` and ``gather_scatter-hosted``, or an installed
        plugin's. An old name (``reference``) runs its new one (``onnx-reference``), with a
        FutureWarning (``engines.canonical``); the report carries the new one.
    ops : list of str, optional
        Operator types (``ScatterND``) or versions (``ScatterND-16``) to check; default all.
    opsets : list of int, optional
        Run each version at these opsets where it is the one in effect; default: each version
        at its own ``since_version``.
    cases, seed : int
        Cases per operator version and opset, and the seed that makes them reproducible.
    threads : int, optional
        The engine's intra-op threads, where it has them.
    timeout : float
        Seconds an engine may take on one case before it counts as hung.
    out_dir, json_path : str
        Where findings (``finding-NNNN.onnx`` + ``.npz``) and the JSON report go.
    report_dir : str, optional
        Where an issue text and a standalone script per class of findings go
        (``upstream.write_reports``); not written when interrupted.

    Returns
    -------
    dict
        ``{"engine", "engine_version", "cases", "planned", "interrupted", "summary": {kind: count},
        "findings": [...]}``: ``cases`` run of the ``planned`` ones.

    Raises
    ------
    runner.SelectionError
        An operator or version of ``ops`` is in effect at none of ``opsets``; a ``seed`` that
        is not an integer >= 0.
    engines.EngineMissing
        The engine is unknown or not installed (the message names the pip extra), or
        (``engines.EngineBroken``) it is but cannot run: its entry point or import fails, its
        ``run`` raises on a one-node Gather model, or (``engines.EngineInvalid``) it does not
        meet the engine protocol. Raised before any case runs or any file is written.
    Interrupted
        Ctrl-C (a KeyboardInterrupt): the report of the cases run so far is printed and
        written first, findings included.
    """
    engine = engines.canonical(engine)
    runner.check_selection(ops, opsets)
    if isinstance(seed, bool) or not hasattr(seed, "__index__") or seed < 0:
        raise runner.SelectionError(f"seed must be an integer >= 0, got {seed!r}")  # NumPy's generators' range
    checks = list(runner.generate(ops, opsets, cases, seed))
    summary: Counter = Counter()
    findings: list[runner.Finding] = []
    with engines.Worker(engine, threads, timeout) as worker:
        version = worker.start()  # an engine that cannot run is refused before any case
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(checks), desc=f"check {engine}", unit="case", file=sys.stderr, leave=False)
        try:
            _run(worker, checks, out_dir, summary, findings, bar)
            interrupted = False
        except KeyboardInterrupt:
            interrupted = True
        finally:
            if bar is not None:
                bar.close()
    result = report.report(
        engine, version, sum(summary.values()), summary, findings, planned=len(checks), interrupted=interrupted
    )
    out = stream if stream is not None else sys.stdout
    report.print_table(result, out)
    report.write_outputs(
        result,
        out,
        json_path=json_path,
        report_dir=None if interrupted else report_dir,
        write_reports=lambda failures: upstream.write_reports(
            findings, engine, version, os.fspath(report_dir or ""), threads=threads, timeout=timeout, failures=failures
        ),
    )
    if interrupted:
        raise Interrupted(result)
    return result


def _run(worker: engines.Worker, checks: list, out_dir: str, summary: Counter, findings: list, bar) -> None:
    """Run ``checks`` through the engine, counting each case's kind in ``summary``.

    A case is counted once it is done (its finding shrunk and written): a Ctrl-C leaves both
    complete up to there.
    """
    shrunk: set = set()
    for check in checks:
        kind, detail = runner.run_one(worker, check)
        if kind in runner.FINDING_KINDS:
            key = (check.spec.name, kind, check.kind)
            if key not in shrunk:  # the first of each (version, kind, case kind) is shrunk
                shrunk.add(key)
                want = runner.signature(check, kind)
                small = shrink.shrink(
                    check, want, lambda c: runner.signature(c, runner.run_one(worker, c)[0]), budget=60
                )
                if small is not check:  # its own detail, if the engine shows it again (heaps corrupt unevenly)
                    again, said = runner.run_one(worker, small)
                    if runner.signature(small, again) == want:
                        check, detail = small, said
            finding = runner.Finding(kind, check, detail)
            report.write_finding(finding, len(findings) + 1, out_dir, worker.engine)
            findings.append(finding)
        summary[kind] += 1
        if bar is not None:
            bar.update(1)
