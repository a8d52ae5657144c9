"""An engine that prints (TVM's ONNX frontend did) must not write into the checker's report.

The worker sends its answers over a pipe of its own; the engine's stdout and stderr, file
descriptors 1 and 2 themselves, go to the worker's log; the checker, which imports the
engine's module too (to check it meets the protocol), sends what that prints to stderr. The
engine here, ``loud``, prints at import, in ``prepare``, ``version`` and every ``run``: with
Python's ``print``, with ``os.write(1, ...)`` and with the C library's ``printf`` (through
ctypes). It is "installed" as a distribution's metadata in a temporary folder on the path: an
entry point in the group ``gather_scatter.engines``, no pip needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

LOUD = '''\
import ctypes
import os
import sys

import onnx
from onnx.reference import ReferenceEvaluator

_libc = ctypes.CDLL(None)


def shout(where):
    print(f"LOUD-PY {where}")
    sys.stdout.flush()
    os.write(1, f"LOUD-FD {where}\\n".encode())
    _libc.printf(f"LOUD-C {where}\\n".encode())
    _libc.fflush(None)
    print(f"LOUD-ERR {where}", file=sys.stderr)


shout("import")
name = "loud"


def prepare():
    shout("prepare")


def version():
    shout("version")
    return "1.0"


def run(model, feeds, options):
    shout("run")
    return ReferenceEvaluator(onnx.load_from_string(model)).run(None, feeds)
'''


@pytest.fixture
def loud(tmp_path, monkeypatch):
    """The folder that holds the engine ``loud``, on this process's path (a spawned worker gets
    the parent's ``sys.path``) and, for a subprocess, in ``PYTHONPATH``."""
    site = tmp_path / "site"
    info = site / "gs_loud_engine-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gs-loud-engine\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[gather_scatter.engines]\nloud = gs_loud_engine\n")
    (site / "gs_loud_engine.py").write_text(LOUD)
    monkeypatch.syspath_prepend(str(site))
    return site


def test_the_engines_prints_go_to_the_workers_log_not_to_stdout(loud, capfd):
    from gather_scatter.check.engines import Worker
    from gather_scatter.check.engines._worker import _smoke_model

    model, feeds = _smoke_model()
    with Worker("loud") as worker:
        assert worker.start() == "1.0"
        outcome = worker.run(model, feeds)
        assert outcome.kind == "ok" and outcome.output.tolist() == [3.0, 1.0]
        assert worker.run(model, feeds).kind == "ok"  # the pipe still carries answers after the prints
        with open(worker._log) as f:
            log = f.read()
    out, err = capfd.readouterr()
    assert "LOUD" not in out  # the checker imports the module too, to check it: its prints go to stderr
    assert {line for line in err.splitlines() if "LOUD" in line} <= {f"{how} import" for how in
                                                                   ("LOUD-PY", "LOUD-FD", "LOUD-C", "LOUD-ERR")}
    for where in ("import", "prepare", "version", "run"):
        for how in ("LOUD-PY", "LOUD-FD", "LOUD-C", "LOUD-ERR"):
            assert f"{how} {where}" in log, (how, where, log)


def test_the_checkers_report_stays_clean_with_a_printing_engine(loud, tmp_path):
    path = os.pathsep.join([str(loud), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run([sys.executable, "-m", "gather_scatter", "check", "--engine", "loud", "--op", "Gather-13",
                           "--op", "ScatterND-18", "--cases", "3", "--out", "f", "--json", "r.json"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "LOUD" not in done.stdout
    assert all(line.endswith(" import") for line in done.stderr.splitlines() if "LOUD" in line), done.stderr
    assert done.stdout.splitlines() == ["loud 1.0: 6 cases; wrong_output 0, accepted_invalid 0, rejected_valid 0, "
                                        "crash 0, timeout 0, unsupported 0, agree 6", "no findings"]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["engine_version"] == "1.0" and report["summary"]["agree"] == 6
