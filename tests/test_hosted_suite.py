"""The hosted Session passes the whole conformance suite, and its routing table is the suite's (issue 36).

``Session(model, engine="onnxruntime", threads=T)`` for T = 1 and 2 runs every test of the
default suite (seed 0) and of a second seed: every valid test equals its ``output_*.pb`` (the
suite's tolerance rule), every invalid test raises a :class:`~gather_scatter.GatherScatterError`.

The routing table (``_ort_routes.RULES``) is checked against the suite run on the installed
onnxruntime itself: every test onnxruntime does not pass (a wrong value or shape, an invalid
input accepted, a valid one refused at load or at run time) is one the hosted Session routes to
our kernels or refuses at build, and every rule the suite can show is shown by one such test.
A future onnxruntime that fixes a rule fails the second check: give the rule its ``fixed_in``.
"""

from __future__ import annotations

import warnings

import pytest

import gather_scatter as gs
from gather_scatter.conformance import export_tests, load_suite
from gather_scatter.conformance.run import compare, run_cases
from gather_scatter.kernels import numpy_paths
from gather_scatter.models.hosted import _routes as _ort_routes

onnxruntime = pytest.importorskip(
    "onnxruntime", reason="the hosted Session runs onnxruntime (pip install 'gather_scatter[test]')"
)

OTHER_SEED = 2027  # a seed no published suite uses


@pytest.fixture(scope="module")
def other_suite(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hosted-suite") / "suite"
    export_tests(folder, seed=OTHER_SEED)
    return folder


def _session(case, threads):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # off-spec nodes the suite's invalid tests hold
        return gs.Session(case.model, engine="onnxruntime", threads=threads)


def _failures(folder, threads) -> list[str]:
    """Every test of the suite at ``folder`` that the hosted Session does not pass, one line each.

    The kernels on their NumPy paths (numpy_paths: the same bits, which the kernels' own tests
    check against the compiled loops): under the suite process's EAGER, each of ~2,000 small
    models compiled its routed kernel's signature, dozens of compiles, minutes of CI."""
    failures = []
    with numpy_paths():
        for case in load_suite(folder):
            for feeds, expected in case.data_sets():
                try:
                    outputs = _session(case, threads).run(None, {k: v.copy() for k, v in feeds.items()})
                except gs.GatherScatterError as exc:
                    if case.valid:
                        failures.append(f"{case.name}: raised on a valid test: {type(exc).__name__}: {exc}")
                    continue
                except Exception as exc:  # noqa: BLE001 - anything else is the failure to report
                    failures.append(f"{case.name}: not a GatherScatterError: {type(exc).__name__}: {exc}")
                    continue
                if not case.valid:
                    failures.append(f"{case.name}: accepted an invalid test ({case.error.get('error', '')})")
                    continue
                for k, (out, want) in enumerate(zip(outputs, expected, strict=True)):
                    differs = compare(out, want, case.rtol, case.atol)
                    if differs:
                        failures.append(f"{case.name}: output {k}: {differs}")
    return failures


@pytest.mark.parametrize("threads", [1, 2])
def test_the_hosted_session_passes_the_default_suite(default_suite, threads):
    folder, manifest = default_suite
    failures = _failures(folder, threads)
    assert not failures, f"{len(failures)} of {len(manifest['cases'])} tests:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("threads", [1, 2])
def test_the_hosted_session_passes_a_suite_of_another_seed(other_suite, threads):
    failures = _failures(other_suite, threads)
    assert not failures, f"{len(failures)} tests:\n" + "\n".join(failures[:40])


# The checker's onnxruntime engine cannot feed these types through onnxruntime's Python API
# (the hosted Session can): such a test says nothing of onnxruntime's kernels.
_NOT_ONNXRUNTIMES = "Python API takes no"


@pytest.fixture(scope="module")
def onnxruntime_outcomes(default_suite):
    """The default suite run on onnxruntime itself, at 1 and 2 threads: {threads: [(case, outcome, detail)]}."""
    folder, _ = default_suite
    cases = load_suite(folder)
    found = {}
    for threads in (1, 2):
        rows = run_cases(cases, "onnxruntime", threads=threads)["results"]
        by_name = {case.name: case for case in cases}
        found[threads] = [(by_name[r["name"]], r["outcome"], r["detail"]) for r in rows]
    return found


def _off(outcome: str, detail: str) -> bool:
    """Whether onnxruntime's outcome departs from the spec."""
    return outcome != "pass" and not (outcome == "unsupported" and _NOT_ONNXRUNTIMES in detail)


@pytest.mark.parametrize("threads", [1, 2])
def test_every_test_onnxruntime_gets_wrong_is_routed_or_refused_at_build(onnxruntime_outcomes, threads):
    unhandled = []
    off = [(case, outcome, detail) for case, outcome, detail in onnxruntime_outcomes[threads] if _off(outcome, detail)]
    assert len(off) > 30  # the suite shows onnxruntime's departures, not a handful of them
    for case, outcome, detail in off:
        try:
            session = _session(case, threads)
        except gs.GatherScatterError:
            continue  # refused at build: an invalid attribute, an off-spec node
        if not session.plan.routed:
            unhandled.append(f"{case.name}: onnxruntime's outcome {outcome} ({detail[:160]}), and nothing is routed")
    assert not unhandled, "\n".join(unhandled)


def test_every_rule_the_suite_can_show_is_shown_by_a_test_onnxruntime_gets_wrong(onnxruntime_outcomes):
    shown = set()
    for threads, rows in onnxruntime_outcomes.items():
        for case, outcome, detail in rows:
            if not _off(outcome, detail):
                continue
            try:
                routed = _session(case, threads).plan.routed
            except gs.GatherScatterError:
                continue
            shown.update(rule.kind for rule in _ort_routes.RULES for reason in routed.values() if rule.reason in reason)
    unshown = [rule.kind for rule in _ort_routes.RULES if rule.suite and rule.kind not in shown]
    assert not unshown, (
        f"rules no test of the suite shows on onnxruntime {onnxruntime.__version__}: {unshown}: "
        "fixed in this release (give the rule its fixed_in), or the suite lacks the case"
    )


def test_the_docs_table_of_routes_is_current():
    """docs/models.md's table is written from the rules (python scripts/routes_doc.py)."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "scripts" / "routes_doc.py"
    done = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, check=False)
    assert done.returncode == 0, "docs/models.md's routing table is stale: run python scripts/routes_doc.py"
