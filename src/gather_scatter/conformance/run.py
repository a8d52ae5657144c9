"""Running a suite folder on an engine of the checker: each test's outcome, and a score.

Every test runs through the checker's worker (``check.engines.Worker``): the engine in a child
process, restarted after a crash or a hang, so one crash costs one test, not the run. Each test
gets one outcome (:data:`OUTCOMES`):

- ``pass``: a valid test's outputs equal the expected ones (exact, or within ``data.json``'s
  tolerance), or an invalid test's inputs refused;
- ``fail``: a valid test's output differs (the detail names the data set, the output, and the
  shape, dtype or first differing element with both values);
- ``error``: the engine raised on a valid test;
- ``accepted_invalid``: the engine returned a result for an invalid test (``error.json``);
- ``crash`` / ``timeout``: its process died, or did not answer in time;
- ``unsupported``: the engine says it lacks the operator, version or type (not scored).

A test with several data sets runs them in order; its outcome is its first data set's that is
not ``pass``. The score is passed / (tests - unsupported).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, TextIO

import numpy as np

from ..check.engines import EngineBroken, Outcome, Worker, canonical, is_ml_dtype
from ..check.runner import same
from ..errors import one_line
from .load import SuiteTest, load_suite

__all__ = ["FAILURES", "OUTCOMES", "compare", "print_summary", "run_case", "run_cases", "run_tests", "score"]

OUTCOMES = ("pass", "fail", "error", "accepted_invalid", "crash", "timeout", "unsupported")
FAILURES = ("fail", "error", "accepted_invalid", "crash", "timeout")
_SHOWN = 20  # failing tests listed in the printed summary (every one is in --json)


def _is_float(dtype: np.dtype) -> bool:
    """Floating point or complex, ml_dtypes' bfloat16/float8/float4 included (not their int4/uint4)."""
    if dtype.kind in "fc":
        return True
    return is_ml_dtype(dtype) and "int" not in dtype.name


def compare(actual: Any, expected: np.ndarray, rtol: float | None = None, atol: float | None = None) -> str | None:
    """Return None when ``actual`` matches ``expected``, else what differs (one line).

    Parameters
    ----------
    actual : array_like
        The engine's output.
    expected : numpy.ndarray
        The test's ``output_K.pb``.
    rtol, atol : float, optional
        The tolerance for floating-point outputs, as ``numpy.isclose`` applies it
        (``|actual - expected| <= atol + rtol * |expected|``); None: exact, as
        ``check.runner.same`` (bits; any NaN equals any NaN). Shapes and dtypes must match
        either way; integer, bool and string outputs are always exact.

    Returns
    -------
    str or None
    """
    if rtol is None or atol is None or not _is_float(expected.dtype):
        with np.errstate(all="ignore"):  # a cast of float8's NaN in its NaN test: no warning on stderr
            return same(actual, expected)
    actual = np.asarray(actual)
    if actual.shape != expected.shape:
        return f"shape {actual.shape}, expected {expected.shape}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    wide = np.complex128 if expected.dtype.kind == "c" else np.float64
    a, e = actual.astype(wide).reshape(-1), expected.astype(wide).reshape(-1)
    with np.errstate(invalid="ignore", over="ignore"):
        differ = ~np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    if not differ.any():
        return None
    i = int(np.argmax(differ))
    return (
        f"{int(differ.sum())} of {a.size} elements differ beyond rtol={rtol:g}, atol={atol:g}; first at flat "
        f"position {i}: {actual.reshape(-1)[i]!r}, expected {expected.reshape(-1)[i]!r}"
    )


def _signal_named(message: str) -> str:
    """``exit code -8`` as ``exit code -8, SIGFPE``: a worker killed by a signal says which."""

    def name(match: re.Match) -> str:
        try:
            return f"{match.group(0)}, {signal.Signals(-int(match.group(1))).name}"
        except ValueError:
            return match.group(0)

    return re.sub(r"exit code (-\d+)", name, message, count=1)


def _outcome(case: SuiteTest, answer: Outcome, expected: list[np.ndarray]) -> tuple[str, str]:
    """(outcome, detail) of one data set's answer."""
    if answer.kind in ("crash", "timeout", "unsupported"):
        return answer.kind, one_line(
            _signal_named(answer.message) if answer.kind == "crash" else answer.message, limit=600
        )
    if not case.valid:
        if answer.kind == "error":
            return "pass", one_line(f"refused: {answer.message}", limit=600)
        required = case.error.get("error") or case.error.get("kind") or "an error"
        said = f": {case.error['message']}" if case.error.get("message") else ""
        return "accepted_invalid", one_line(
            f"the spec requires {required}{said}; the engine returned a result", limit=600
        )
    if answer.kind == "error":
        return "error", one_line(f"the engine raised on a valid test: {answer.message}", limit=600)
    if len(answer.outputs) < len(expected):
        return "fail", f"{len(answer.outputs)} outputs, expected {len(expected)}"
    for k, want in enumerate(expected):
        name = case.output_names[k] if k < len(case.output_names) else f"#{k}"
        got = answer.outputs[k]
        if got is None:
            return "unsupported", one_line(
                f"output {k} ({name!r}) could not be read back as a NumPy array "
                f"({answer.message or 'None'}): not scored",
                limit=600,
            )
        diff = compare(got, want, case.rtol, case.atol)
        if diff:
            return "fail", one_line(f"output {k} ({name!r}): {diff}", limit=600)
    return "pass", ""


def run_case(worker: Worker, case: SuiteTest) -> tuple[str, str, float]:
    """Run every data set of ``case`` on the engine of ``worker``.

    Returns
    -------
    tuple of (str, str, float)
        The outcome (one of :data:`OUTCOMES`: the first data set's that is not ``pass``), its
        detail (prefixed with ``data set N:`` where the test has several) and the seconds the
        engine took, the transfers to and from its process included.

    Raises
    ------
    SuiteError
        A data set's files cannot be read.
    check.engines.EngineBroken
        The engine's worker cannot be restarted after a crash.
    """
    if case.non_tensor:
        return "unsupported", case.non_tensor, 0.0
    sets = case.data_sets()
    seconds = 0.0
    outcome, detail = "pass", ""
    for n, (feeds, expected) in enumerate(sets):
        hint = (expected[0].shape, expected[0].dtype) if case.valid and expected else None
        start = time.perf_counter()
        answer = worker.run(case.model, feeds, hint)
        seconds += time.perf_counter() - start
        outcome, detail = _outcome(case, answer, expected)
        if len(sets) > 1 and detail:
            detail = f"data set {n}: {detail}"
        if outcome != "pass":
            break
    return outcome, detail, seconds


def score(counts: dict[str, int]) -> dict:
    """Return ``{"passed", "scored", "ratio"}`` of outcome counts.

    Scored tests are those not unsupported; ``ratio`` is None where none is.
    """
    scored = sum(counts.get(o, 0) for o in OUTCOMES if o != "unsupported")
    passed = counts.get("pass", 0)
    return {"passed": passed, "scored": scored, "ratio": passed / scored if scored else None}


def _tally(rows: list[dict]) -> tuple[dict, dict]:
    counts = Counter(r["outcome"] for r in rows)
    families: dict[str, Counter] = {}
    for r in rows:
        families.setdefault(r["family"], Counter())[r["outcome"]] += 1
    total = {o: counts.get(o, 0) for o in OUTCOMES}
    by_family = {f: {"counts": {o: c.get(o, 0) for o in OUTCOMES}, **score(c)} for f, c in sorted(families.items())}
    return total, by_family


def run_cases(
    cases: Sequence[SuiteTest],
    engine: str,
    *,
    threads: int | None = None,
    timeout: float = 30.0,
    progress: bool = False,
    suite: str = "",
) -> dict:
    """Run ``cases`` (from :func:`load_suite`) on ``engine`` and return the results.

    Parameters
    ----------
    cases : sequence of SuiteTest
    engine : str
        An engine of ``check.engines.discover()`` (built in or a plugin). An old name
        (``reference``) runs its new one (``onnx-reference``), with a FutureWarning
        (``check.engines.canonical``); the results carry the new one.
    threads : int, optional
        The engine's intra-op threads, where it has them.
    timeout : float
        Seconds one data set may take before the engine counts as hung.
    progress : bool
        Show a progress bar on stderr.
    suite : str
        The suite's folder, recorded in the results.

    Returns
    -------
    dict
        ``{"suite", "engine", "engine_version", "threads", "timeout", "tests", "planned",
        "interrupted", "restarts", "seconds", "counts": {outcome: n}, "score": {"passed",
        "scored", "ratio"}, "by_family": {family: {"counts", "passed", "scored", "ratio"}},
        "results": [{"name", "group", "family", "op", "domain", "version", "valid", "tags",
        "outcome", "detail", "seconds"}]}`` (``tags`` from our MANIFEST.json; empty elsewhere).
        A Ctrl-C stops the run: ``interrupted`` is True and the results hold the tests run so far.
        Where the engine's worker does not start again after a crash, the test is a ``crash``
        saying so, and the next test tries again.

    Raises
    ------
    check.engines.EngineMissing
        The engine is unknown, not installed, or installed but cannot run (EngineBroken), before any test.
    SuiteError
        A test's data set cannot be read.
    """
    engine = canonical(engine)
    rows: list[dict] = []
    start = time.perf_counter()
    interrupted = False
    with Worker(engine, threads, timeout) as worker:
        version = worker.start()
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(cases), desc=f"run-tests {engine}", unit="test", file=sys.stderr, leave=False)
        try:
            for case in cases:
                try:
                    outcome, detail, seconds = run_case(worker, case)
                except EngineBroken as exc:  # its worker would not start again after a crash: this test's crash
                    outcome, detail, seconds = (
                        "crash",
                        one_line(f"the engine's worker did not restart: {exc}", limit=600),
                        0.0,
                    )
                rows.append(
                    {
                        "name": case.name,
                        "group": case.group,
                        "family": case.family,
                        "op": case.op,
                        "domain": case.domain or "ai.onnx",
                        "version": case.version,
                        "valid": case.valid,
                        "tags": case.tags,
                        "outcome": outcome,
                        "detail": detail,
                        "seconds": round(seconds, 4),
                    }
                )
                if bar is not None:
                    bar.update(1)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            if bar is not None:
                bar.close()
        restarts = worker.restarts
    counts, by_family = _tally(rows)
    return {
        "suite": suite,
        "engine": engine,
        "engine_version": version,
        "threads": threads,
        "timeout": timeout,
        "tests": len(rows),
        "planned": len(cases),
        "interrupted": interrupted,
        "restarts": restarts,
        "seconds": round(time.perf_counter() - start, 2),
        "counts": counts,
        "score": score(counts),
        "by_family": by_family,
        "results": rows,
    }


def _percent(part: dict) -> str:
    return "-" if part["ratio"] is None else f"{100 * part['ratio']:.1f}%"


def print_summary(result: dict, stream: TextIO) -> None:
    """Print the score line, a table per operator family, and the first tests that did not pass."""
    s = result["score"]
    ran = (
        f"{result['tests']} of {result['planned']} tests, interrupted"
        if result["interrupted"]
        else (f"{result['tests']} tests")
    )
    print(
        f"{result['engine']} {result['engine_version']} on {result['suite']} ({ran}): score "
        f"{s['passed']}/{s['scored']} ({_percent(s)}); " + ", ".join(f"{o} {n}" for o, n in result["counts"].items()),
        file=stream,
    )
    header = ("family", "tests", *OUTCOMES, "score")
    rows = [
        (f, str(sum(part["counts"].values())), *(str(part["counts"][o]) for o in OUTCOMES), _percent(part))
        for f, part in result["by_family"].items()
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print(
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))),
            file=stream,
        )
    bad = [r for r in result["results"] if r["outcome"] in FAILURES]
    if not bad:
        print("every supported test passed" if s["scored"] else "no test was supported", file=stream)
        return
    shown = bad[:_SHOWN]
    more = f"first {len(shown)} of {len(bad)}; " if len(bad) > len(shown) else ""
    print(f"not passed ({more}every test's outcome in --json):", file=stream)
    width = max(len(r["outcome"]) for r in shown)
    for r in shown:
        print(f"  {r['outcome'].ljust(width)}  {r['name']}: {r['detail'][:200]}", file=stream)


def run_tests(
    path: str | os.PathLike,
    engine: str,
    *,
    threads: int | None = None,
    timeout: float = 30.0,
    json_path: str | os.PathLike | None = None,
    progress: bool = False,
    stream: TextIO | None = None,
) -> dict:
    """Run every test of the suite folder ``path`` on ``engine``: print the summary, and return the results.

    Parameters
    ----------
    path : str or os.PathLike
        A suite folder, as :func:`load_suite` takes it: ours (``export-tests``) or any in ONNX's
        backend-test layout (onnx's node tests written to disk...).
    engine : str
        An engine of the checker (``gather-scatter check --list-engines``), plugins included; as
        :func:`run_cases` takes it.
    threads, timeout, progress
        As :func:`run_cases`.
    json_path : str or os.PathLike, optional
        Write the results (every test's outcome) there as JSON.
    stream : text stream, optional
        Where the summary goes (default stdout).

    Returns
    -------
    dict
        As :func:`run_cases`.

    Raises
    ------
    SuiteError
        ``path`` holds no test, or a test cannot be read.
    check.engines.EngineMissing
        As :func:`run_cases`, before any test runs.
    check.Interrupted
        Ctrl-C: raised once the summary of the tests run so far is printed and written.
    """
    import json

    from ..check import Interrupted

    cases = load_suite(path)
    result = run_cases(
        cases, engine, threads=threads, timeout=timeout, progress=progress, suite=os.path.abspath(os.fspath(path))
    )
    if json_path is not None:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    print_summary(result, stream if stream is not None else sys.stdout)
    if result["interrupted"]:
        result["cases"] = result["tests"]  # what Interrupted's message reads: "interrupted after 3 of 60 cases"
        raise Interrupted(result)
    return result
