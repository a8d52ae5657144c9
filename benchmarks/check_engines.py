"""The findings table: ``gather-scatter check`` on every installed engine, per operator family.

    python benchmarks/check_engines.py [--seed 0] [--cases 20] [--engine NAME ...] [--family OP ...]
                                       [--timeout 30] [--json check-engines.json] [--out DIR]

For each engine of the entry-point group ``gather_scatter.engines`` (built in, ours included:
``gather_scatter`` and ``gather_scatter-hosted``, or a plugin; or only those given with
``--engine``, where ``reference``, onnx-reference's old name, runs onnx-reference with a
FutureWarning), one after another, and each operator family (Gather,
GatherND, ScatterND, GatherElements, ScatterElements, Scatter, TensorScatter,
GatherBlockQuantized; GatherND includes com.microsoft.GatherND; GatherBlockQuantized is
com.microsoft's), this runs the checker's operator mode as a user would::

    gather-scatter check --engine NAME --op FAMILY --seed S --cases N --json REPORT.json

(a subprocess each, ``python -m gather_scatter``) and reads its JSON report, never its text.
The cases of a version depend only on the seed and the version, so the runs of an engine
check exactly the cases of one ``gather-scatter check --engine NAME --seed S --cases N``; one
run per family gives each family's ``unsupported`` and ``agree`` counts, which the report
sums over all operators. An engine's time is the wall time of its runs, each starting
Python, the checker and the engine's worker, and shrinking each finding.

Prints Markdown: the command line, date and machine; a table per engine (version, cases,
findings by kind: wrong_output, accepted_invalid, rejected_valid, crash, timeout; then
unsupported, not a finding, and agree; and the time); a grid of engines x families with the
findings by kind in each cell; and the engines that did not run, each with the reason (not
installed: the pip extra; installed but broken: why). Writes every run's JSON report, its
exit status and time to ``--json``. Exit status 0, whatever the engines found.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

FAMILIES = ("Gather", "GatherND", "ScatterND", "GatherElements", "ScatterElements", "Scatter", "TensorScatter",
            "GatherBlockQuantized")
FINDING_KINDS = ("wrong_output", "accepted_invalid", "rejected_valid", "crash", "timeout")
KINDS = (*FINDING_KINDS, "unsupported", "agree")
ABBREVIATION = {"wrong_output": "W", "accepted_invalid": "A", "rejected_valid": "R", "crash": "C", "timeout": "T"}


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def run_family(engine: str, family: str, args: argparse.Namespace, out_dir: str) -> dict:
    """One ``gather-scatter check`` run: ``{"family", "returncode", "seconds", "report"}`` with
    the checker's JSON report, or ``"error"`` (its last stderr line) where it wrote none."""
    where = os.path.join(out_dir, engine, family)
    os.makedirs(where, exist_ok=True)
    report_path = os.path.join(where, "report.json")
    command = [sys.executable, "-m", "gather_scatter", "check", "--engine", engine, "--op", family,
               "--seed", str(args.seed), "--cases", str(args.cases), "--timeout", str(args.timeout),
               "--out", os.path.join(where, "findings"), "--json", report_path]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    row = {"family": family, "returncode": done.returncode, "seconds": round(time.perf_counter() - start, 2)}
    if done.returncode in (0, 1) and os.path.exists(report_path):
        with open(report_path) as f:
            row["report"] = json.load(f)
    else:
        row["error"] = _last_line(done.stderr) or f"exit status {done.returncode}, nothing on stderr"
    return row


def run_engine(engine: str, args: argparse.Namespace, out_dir: str) -> dict:
    """Every family on ``engine``: ``{"engine", "version", "status", "seconds", "families"}``;
    ``status`` is ``"ok"`` or why the engine did not run (its first run's usage error: the
    engine is then not run on the other families)."""
    result = {"engine": engine, "version": None, "status": "ok", "seconds": 0.0, "families": []}
    for family in args.family:
        print(f"check_engines: {engine} {family} ...", file=sys.stderr, flush=True)
        row = run_family(engine, family, args, out_dir)
        result["seconds"] = round(result["seconds"] + row["seconds"], 2)
        if row["returncode"] == 2 and not result["families"]:
            result["status"] = row["error"].removeprefix("gather-scatter check: ").removeprefix("error: ")
            break
        result["families"].append(row)
        if "report" in row:
            result["version"] = row["report"]["engine_version"]
    return result


def _summary(rows: list[dict]) -> dict:
    total = dict.fromkeys(KINDS, 0)
    for row in rows:
        for kind, count in row.get("report", {}).get("summary", {}).items():
            total[kind] = total.get(kind, 0) + count
    return total


def _cell(row: dict | None) -> str:
    """One grid cell: findings by kind (W3 A1), then the unsupported and agreeing cases."""
    if row is None:
        return "-"
    if "report" not in row:
        return f"failed ({row['returncode']})"
    summary = row["report"]["summary"]
    found = " ".join(f"{ABBREVIATION[k]}{summary[k]}" for k in FINDING_KINDS if summary.get(k))
    rest = [f"u{summary['unsupported']}"] if summary.get("unsupported") else []
    rest.append(f"ok{summary.get('agree', 0)}")
    return " · ".join([found or "0", *rest])


def markdown(results: list[dict], args: argparse.Namespace, command: str, date: str) -> str:
    ran = [r for r in results if r["status"] == "ok"]
    lines = [f"`{command}` — {date}, seed {args.seed}, {args.cases} cases per operator version, "
             f"timeout {args.timeout:g} s; Python {platform.python_version()}, {platform.system()} "
             f"{platform.machine()}, {os.cpu_count()} CPUs", ""]
    if ran:
        lines += ["| engine | version | cases | " + " | ".join(KINDS) + " | time |",
                  "| --- | --- | ---: | " + " | ".join("---:" for _ in KINDS) + " | ---: |"]
        for r in ran:
            total = _summary(r["families"])
            failed = [row["family"] for row in r["families"] if "report" not in row]
            note = f" (no report for {', '.join(failed)})" if failed else ""
            lines.append(f"| {r['engine']} | {r['version'] or '-'}{note} | {sum(total.values())} | "
                         + " | ".join(str(total[k]) for k in KINDS) + f" | {r['seconds']:.0f} s |")
        lines += ["", "| engine | " + " | ".join(args.family) + " |",
                  "| --- | " + " | ".join("---" for _ in args.family) + " |"]
        for r in ran:
            by_family = {row["family"]: row for row in r["families"]}
            lines.append(f"| {r['engine']} | " + " | ".join(_cell(by_family.get(f)) for f in args.family) + " |")
        lines += ["", "Cells: findings by kind (W wrong_output, A accepted_invalid, R rejected_valid, C crash, "
                  "T timeout; 0 for none) · u unsupported (not a finding) · ok agree."]
    missing = [r for r in results if r["status"] != "ok"]
    if missing:
        lines += ["", "Not run:", ""] + [f"- {r['engine']}: {r['status']}" for r in missing]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0, help="the checker's --seed (default 0)")
    parser.add_argument("--cases", type=int, default=20, help="cases per operator version (default 20)")
    parser.add_argument("--engine", action="append", default=None, metavar="NAME",
                        help="an engine to run (repeatable; default every engine of the entry-point group)")
    parser.add_argument("--family", action="append", default=None, choices=FAMILIES, metavar="OP",
                        help=f"an operator family (repeatable; default all: {', '.join(FAMILIES)})")
    parser.add_argument("--timeout", type=float, default=30.0, help="the checker's --timeout, seconds per case")
    parser.add_argument("--json", default="check-engines.json", metavar="PATH",
                        help="where the raw results go (default check-engines.json)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="keep each run's findings and report under DIR/ENGINE/FAMILY (default: a temporary "
                        "folder, removed)")
    args = parser.parse_args(argv)
    given = [*(f"--engine={e}" for e in args.engine or ()), *(f"--family={f}" for f in args.family or ())]
    args.family = args.family or list(FAMILIES)
    from gather_scatter.check.engines import canonical, discover

    if args.engine is None:
        args.engine = sorted(discover())
    args.engine = list(dict.fromkeys(canonical(name) for name in args.engine))  # reference and onnx-reference: once
    command = "python benchmarks/check_engines.py " + shlex.join(
        [*given, "--seed", str(args.seed), "--cases", str(args.cases)]
        + ([f"--timeout={args.timeout:g}"] if args.timeout != 30.0 else []))
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    out_dir = args.out or tempfile.mkdtemp(prefix="check-engines-")
    try:
        results = [run_engine(engine, args, out_dir) for engine in args.engine]
    finally:
        if args.out is None:
            shutil.rmtree(out_dir, ignore_errors=True)
    raw = {"date": date, "command": command, "seed": args.seed, "cases": args.cases, "timeout": args.timeout,
           "families": args.family, "python": platform.python_version(), "platform": platform.platform(),
           "cpus": os.cpu_count(), "engines": results}
    with open(args.json, "w") as f:
        json.dump(raw, f, indent=1)
    print(markdown(results, args, command, date))
    return 0


if __name__ == "__main__":
    sys.exit(main())
