"""Fuzzed model files (issue 19): byte and structural mutations of every model the project ships,
through run_model, infer_model_shapes and the CLI's run and shapes. None may raise an error
that is not a GatherScatterError, exit other than 0 or 2, print a traceback, hang, crash the
process or grow past the memory limit.

The cases run in a worker process (tests/model_fuzz.py), restarted after a crash or a hang,
so one bad case is a failure naming its mutation and the file it is saved in, not a dead
pytest. The short run (a few hundred cases, fixed seeds) is part of the suite; the long
run, which also compares every accepted model's outputs with onnxruntime's and prints a
summary, is ``GATHER_SCATTER_FUZZ=3000 pytest tests/test_model_fuzz.py -s``.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import model_fuzz
import numpy as np
import onnx
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

SHORT_CASES = 600
LONG_CASES = int(os.environ.get("GATHER_SCATTER_FUZZ", "0") or 0)
CASE_SECONDS = 30.0  # a case still running after this is a hang


def _cases(root: Path, count: int, *, ort: bool) -> list[dict]:
    """``count`` mutated models, half byte mutations (numpy, seed 19) and half structural
    (hypothesis, derandomized), written under ``root``."""
    sources = {path: path.read_bytes() for path in model_fuzz.SOURCES}
    cases: list[dict] = []
    rng = np.random.default_rng(19)
    for _ in range(count // 2):
        source = list(sources)[int(rng.integers(len(sources)))]
        raw, what = model_fuzz.byte_mutation(sources[source], rng)
        cases.append(model_fuzz.write_case(root, len(cases), source, raw, what, ort=ort))

    @settings(derandomize=True, max_examples=count - count // 2, deadline=None, database=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(st.data())
    def structural(data):
        source = data.draw(st.sampled_from(list(sources)))
        model = onnx.load_model_from_string(sources[source])
        what = [model_fuzz.structural_mutation(model, data.draw) for _ in range(data.draw(st.integers(1, 3)))]
        raw = model.SerializeToString()
        if data.draw(st.integers(0, 9)) == 0:
            names = [n for node in model.graph.node for n in [node.name, *node.input, *node.output]]
            raw, bad = model_fuzz.bad_utf8(raw, names, data.draw(st.integers(0, 1000)))
            what.append(bad)
        cases.append(model_fuzz.write_case(root, len(cases), source, raw, "; ".join(what), ort=ort))

    structural()
    return cases


def _run_all(root: Path, cases: list[dict]) -> tuple[dict[int, dict], list[str]]:
    """Each case's result, by index, and the failures: a worker restarted after a case that
    crashed it or ran past CASE_SECONDS."""
    cases_path, results_path = root / "cases.jsonl", root / "results.jsonl"
    cases_path.write_text("".join(json.dumps(c) + "\n" for c in cases))
    results: dict[int, dict] = {}
    failures: list[str] = []
    start, offset = 0, 0
    while start < len(cases):
        log = open(root / f"worker-{start}.log", "wb")
        worker = subprocess.Popen(
            [sys.executable, model_fuzz.__file__, str(cases_path), str(results_path), str(start)],
            stdout=log, stderr=subprocess.STDOUT, env=model_fuzz.worker_env(),
        )
        current, since, in_ort = None, time.monotonic(), False
        while True:
            time.sleep(0.02)
            exited = worker.poll() is not None  # before the last look, so it sees every line
            with open(results_path, "ab+") as results_file:  # the lines written since the last look
                results_file.seek(offset)
                fresh = results_file.read()
            complete = fresh[: fresh.rfind(b"\n") + 1]  # not a half-written line
            offset += len(complete)
            for line in complete.decode().splitlines():
                record = json.loads(line)
                if "start" in record or "ort_start" in record:
                    current, since = record.get("start", record.get("ort_start")), time.monotonic()
                    in_ort = "ort_start" in record
                elif "ort_of" in record:
                    results[record["ort_of"]]["ort"] = record["ort"]
                    current = None
                else:
                    results[record["i"]] = record
                    current = None
            if exited:
                break
            if current is not None and time.monotonic() - since > CASE_SECONDS:
                worker.kill()
                worker.wait()
                break
        log.close()
        if current is None:  # finished (or died between cases)
            if worker.returncode != 0 and len(results) < len(cases):
                tail = Path(log.name).read_text(errors="replace")[-1500:]
                raise AssertionError(f"the worker died outside a case ({log.name}):\n{tail}")
            break
        case = cases[current]
        start = current + 1
        if in_ort:  # onnxruntime's crash or hang, after ours was recorded: counted, not ours to fail
            results[current]["ort"] = "ort crashed or hung"
            continue
        why = f"ran past {CASE_SECONDS:.0f} s" if worker.returncode in (-9, None) else f"killed the worker " \
            f"(exit {worker.returncode}; see {log.name})"
        failures.append(f"case {current} ({case['what']}) {why}: {case['model']}")
        results[current] = {"i": current, "crash": why, "problems": [why], "seconds": CASE_SECONDS}
    return results, failures


def _outcome(result: dict) -> str:
    if "crash" in result:
        return "crash or hang"
    return "accepted" if result["run_model"] == "accepted" else f"refused: {result['run_model']}"


def _summary(cases: list[dict], results: dict[int, dict], seconds: float) -> str:
    outcomes = collections.Counter(_outcome(r) for r in results.values())
    shapes = collections.Counter(r.get("infer_model_shapes", "crash") for r in results.values())
    ort = collections.Counter(r["ort"] for r in results.values() if "ort" in r)
    slowest = max(results.values(), key=lambda r: r["seconds"])
    rss = max(r.get("rss_mib", 0) for r in results.values())
    lines = [f"{len(cases)} mutated models in {seconds:.1f} s (peak worker RSS {rss} MiB)",
             "run_model: " + ", ".join(f"{k} {v}" for k, v in outcomes.most_common()),
             "infer_model_shapes: " + ", ".join(f"{k} {v}" for k, v in shapes.most_common())]
    if ort:
        lines.append("accepted and run by onnxruntime too: " + ", ".join(f"{k} {v}" for k, v in ort.most_common()))
        differ = [cases[r["i"]]["what"] for r in results.values() if r.get("ort") == "differ"]
        lines += [f"  differs from onnxruntime: {what}" for what in differ[:10]]
    lines.append(f"slowest (run_model, infer_model_shapes, run and shapes together): "
                 f"{slowest['seconds'] * 1e3:.0f} ms, case {slowest['i']} ({cases[slowest['i']]['what']})")
    return "\n".join(lines)


def _fuzz(tmp_path: Path, count: int, *, ort: bool) -> None:
    started = time.perf_counter()
    cases = _cases(tmp_path / "cases", count, ort=ort)
    results, failures = _run_all(tmp_path, cases)
    for result in sorted(results.values(), key=lambda r: r["i"]):
        if result["problems"] and "crash" not in result:
            case = cases[result["i"]]
            failures.append(f"case {case['i']} ({case['what']}), saved as {case['model']}: "
                            + "; ".join(result["problems"]))
    print("\n" + _summary(cases, results, time.perf_counter() - started))
    assert len(results) == len(cases)
    assert not failures, f"{len(failures)} of {len(cases)} mutated models failed:\n" + "\n".join(failures[:20])


def test_mutated_models_are_refused_or_run(tmp_path):
    _fuzz(tmp_path, SHORT_CASES, ort=False)


def test_mutated_models_long_run(tmp_path):
    """GATHER_SCATTER_FUZZ=N: N cases, each accepted model's outputs compared with onnxruntime's."""
    import pytest

    if not LONG_CASES:
        pytest.skip("set GATHER_SCATTER_FUZZ=N for the long run of N cases")
    _fuzz(tmp_path, LONG_CASES, ort=True)


_FAKE_WORKER = '''
import json, os, sys, time
cases = [json.loads(line) for line in open(sys.argv[1])]
with open(sys.argv[2], "a") as out:
    for case in cases[int(sys.argv[3]):]:
        out.write(json.dumps({"start": case["i"]}) + "\\n")
        out.flush()
        if case["what"] == "crash":
            os.abort()
        if case["what"] == "hang":
            time.sleep(60)
        out.write(json.dumps({"i": case["i"], "problems": [], "seconds": 0.0}) + "\\n")
        out.flush()
'''


def test_a_crash_or_a_hang_is_a_failure_naming_the_case(tmp_path, monkeypatch):
    # The harness itself: a worker that aborts on one case and hangs on another is restarted
    # after each, and both cases are reported by name and file.
    script = tmp_path / "worker.py"
    script.write_text(_FAKE_WORKER)
    monkeypatch.setattr(model_fuzz, "__file__", str(script))
    monkeypatch.setattr(sys.modules[__name__], "CASE_SECONDS", 1.0)
    cases = [{"i": i, "what": what, "model": f"m{i}.onnx"} for i, what in enumerate(["ok", "crash", "hang", "ok"])]
    results, failures = _run_all(tmp_path, cases)
    assert sorted(results) == [0, 1, 2, 3]
    assert len(failures) == 2
    assert failures[0].startswith("case 1 (crash) killed the worker (exit -6;") and failures[0].endswith("m1.onnx")
    assert failures[1] == "case 2 (hang) ran past 1 s: m2.onnx"
