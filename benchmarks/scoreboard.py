"""The scoreboard: every installed engine run on the conformance suite, per operator family.

    python benchmarks/scoreboard.py [--seed 0] [--engine NAME ...] [--threads 1] [--timeout 30]
                                    [--sample NAME=N ...] [--suite DIR] [--doc docs/conformance.md]
                                    [--json scoreboard.json] [--quick]

Exports the default suite (``gather-scatter export-tests DIR --seed S``) to a temporary folder
(or takes ``--suite DIR``, one exported before), then runs it on each engine of the entry-point
group ``gather_scatter.engines`` (or those given with ``--engine``; ``reference``, onnx-reference's
old name, runs onnx-reference with a FutureWarning), one after another, as
``gather-scatter run-tests DIR --engine NAME --threads T`` does: each test in the checker's
worker process, restarted after a crash or a hang. An engine given ``--sample NAME=N`` runs a
seeded subset of N tests instead (stratified: the tests of each operator version, valid and
invalid, are shuffled with the seed and taken in turn, so every version keeps its share), for an
engine too slow for the whole suite on the machine at hand; the table says so.

Our own engines are rows like any other, first in name order: ``gather_scatter`` (our oracle,
``Session(engine="reference")``: the expected outputs are its own, so a test it does not pass
is a defect of the suite or the runner) and ``gather_scatter-hosted`` (``Session(engine=
"onnxruntime")``: onnxruntime with our kernels on the nodes it gets wrong, what a user of the
fast engine gets).

Writes Markdown between the markers ``<!-- scoreboard:start -->`` and ``<!-- scoreboard:end -->``
of ``--doc`` (default docs/conformance.md; ``--doc -`` writes none) and prints it: the command,
date, versions and machine; a table of engines (version, tests run, score, each outcome, time);
a grid of engines x operator families (passed / not passed / unsupported); per engine, the
kinds of failures (operator version x outcome) with their count and one example each; the
engines that could not run, with the reason. ``--json`` keeps every test's outcome per engine.
``--quick``: Gather-13 and ScatterND-18 only, 3 random cases per version (a smoke test).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np

START, END = "<!-- scoreboard:start -->", "<!-- scoreboard:end -->"
FAILURES = ("fail", "error", "accepted_invalid", "crash", "timeout")


def _sample_spec(text: str) -> tuple[str, int]:
    name, sep, count = text.partition("=")
    if not (sep and name and count.isdigit() and int(count) > 0):
        raise argparse.ArgumentTypeError(f"expected NAME=N (an engine and a test count > 0), got {text!r}")
    return name, int(count)


def sample(tests: list, count: int, seed: int) -> list:
    """A seeded subset of ``count`` tests, stratified by (family, version, valid), in suite order."""
    if count >= len(tests):
        return list(tests)
    rng = np.random.default_rng(seed)
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, t in enumerate(tests):
        groups[(t.family, t.version or 0, t.valid)].append(i)
    queues = [list(rng.permutation(ids)) for _, ids in sorted(groups.items())]
    chosen: list[int] = []
    while len(chosen) < count:
        for queue in queues:
            if queue and len(chosen) < count:
                chosen.append(int(queue.pop()))
    return [tests[i] for i in sorted(chosen)]


def run_engine(engine: str, tests: list, args: argparse.Namespace, suite_dir: str) -> dict:
    """``run_cases`` on ``engine``: its results, or ``{"engine", "status": why it could not run}``."""
    from gather_scatter.check.engines import EngineMissing
    from gather_scatter.conformance.run import run_cases

    chosen = sample(tests, args.samples[engine], args.seed) if engine in args.samples else tests
    print(f"scoreboard: {engine}: {len(chosen)} tests ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        result = run_cases(chosen, engine, threads=args.threads, timeout=args.timeout, suite=suite_dir,
                           progress=sys.stderr.isatty())
    except EngineMissing as exc:
        return {"engine": engine, "status": " ".join(str(exc).split())}
    result["status"] = "ok"
    result["sampled"] = len(chosen) < len(tests)
    result["wall_seconds"] = round(time.perf_counter() - start, 1)
    print(f"scoreboard: {engine}: {result['score']['passed']}/{result['score']['scored']} in "
          f"{result['wall_seconds']:.0f} s", file=sys.stderr, flush=True)
    return result


def _percent(ratio: float | None) -> str:
    return "-" if ratio is None else f"{100 * ratio:.1f}%"


def _cell(part: dict | None) -> str:
    if part is None:
        return "-"
    counts = part["counts"]
    return f"{counts['pass']} / {sum(counts[o] for o in FAILURES)} / {counts['unsupported']}"


def _escape(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;").replace("`", "'")


def markdown(results: list[dict], suite: dict, args: argparse.Namespace, command: str, date: str) -> str:
    import onnx

    import gather_scatter

    ran = [r for r in results if r["status"] == "ok"]
    total = suite["tests"]
    lines = [
        "Written by `benchmarks/scoreboard.py`: the default suite run on every engine installed here, one after "
        "another, as `gather-scatter run-tests` runs it (each test in the checker's worker process, restarted after "
        "a crash). Ours are rows too: `gather_scatter` (our oracle, whose outputs the suite holds) and "
        "`gather_scatter-hosted` (onnxruntime with our kernels on the nodes it gets wrong). Time: each engine's wall "
        "time for the whole run, its worker's start and restarts included.",
        "",
        f"`{command}` — {date}; gather_scatter {gather_scatter.__version__}, onnx {onnx.__version__}, "
        f"numpy {np.__version__}, Python {platform.python_version()}, {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} CPUs; the engines' threads: {args.threads or 'their default'}, timeout {args.timeout:g} s "
        "per data set.",
        "",
        f"Suite: `gather-scatter export-tests DIR --seed {args.seed}"
        + (" --op Gather-13 --op ScatterND-18 --cases-per-version 3" if args.quick else "")
        + f"`: {total} tests ({suite['valid']} valid, {suite['invalid']} invalid). Score: passed / (tests run - "
        "unsupported).",
        "",
    ]
    if ran:
        outcomes = ("pass", *FAILURES, "unsupported")
        lines += ["| engine | version | tests | score | " + " | ".join(outcomes) + " | time |",
                  "| --- | --- | ---: | ---: | " + " | ".join("---:" for _ in outcomes) + " | ---: |"]
        for r in ran:
            tests = f"{r['tests']} of {total} (seeded sample)" if r["sampled"] else str(r["tests"])
            s = r["score"]
            lines.append(f"| {r['engine']} | {_escape(r['engine_version'])} | {tests} | "
                         f"{s['passed']}/{s['scored']} ({_percent(s['ratio'])}) | "
                         + " | ".join(str(r["counts"][o]) for o in outcomes) + f" | {r['wall_seconds']:.0f} s |")
        families = sorted({f for r in ran for f in r["by_family"]})
        lines += ["", "Per operator family: passed / not passed / unsupported.", "",
                  "| engine | " + " | ".join(families) + " |", "| --- | " + " | ".join("---" for _ in families) + " |"]
        for r in ran:
            lines.append(f"| {r['engine']} | " + " | ".join(_cell(r["by_family"].get(f)) for f in families) + " |")
        sampled = [r for r in ran if r["sampled"]]
        if sampled:
            lines += ["", "Seeded samples (`--sample NAME=N`, seed "
                      f"{args.seed}, stratified by operator version and validity): "
                      + ", ".join(f"{r['engine']} {r['tests']} of {total}" for r in sampled)
                      + " — these engines take too long per test for the whole suite here."]
        lines += ["", "### Kinds of failures", "",
                  "Per engine, operator version and outcome: the count, the tags every one of those tests "
                  "carries (MANIFEST.json), and one example (the test, then what differed or what the engine said)."]
        for r in ran:
            kinds: dict[tuple, list[dict]] = defaultdict(list)
            for row in r["results"]:
                if row["outcome"] in FAILURES:
                    kinds[(row["family"], row["version"] or 0, row["outcome"])].append(row)
            title = f"{r['engine']} {_escape(r['engine_version'])}"
            if not kinds:
                lines += ["", f"**{title}**: every supported test passed."]
                continue
            count = sum(len(rows) for rows in kinds.values())
            lines += ["", f'??? note "{title}: {count} tests not passed, {len(kinds)} kinds"', "",
                      "    | operator | outcome | count | shared tags | example |",
                      "    | --- | --- | ---: | --- | --- |"]
            for (family, version, outcome), rows in sorted(kinds.items()):
                shared = sorted(set.intersection(*(set(row.get("tags") or ()) for row in rows)))
                example = rows[0]
                lines.append(f"    | {family}-{version} | {outcome} | {len(rows)} | {', '.join(shared[:4]) or '-'} | "
                             f"`{example['name']}`: {_escape(example['detail'])[:200]} |")
    missing = [r for r in results if r["status"] != "ok"]
    if missing:
        lines += ["", "Not run:", ""] + [f"- {r['engine']}: {_escape(r['status'])}" for r in missing]
    return "\n".join(lines)


def write_doc(path: str, text: str) -> None:
    """Replace what lies between the scoreboard markers of ``path`` with ``text``."""
    with open(path, encoding="utf-8") as f:
        page = f.read()
    if START not in page or END not in page or page.index(START) > page.index(END):
        raise SystemExit(f"scoreboard: {path} lacks the markers {START} ... {END}")
    head, rest = page.split(START, 1)
    tail = rest.split(END, 1)[1]
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{head}{START}\n{text}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0, help="the suite's seed, and the samples' (default 0)")
    parser.add_argument("--engine", action="append", default=None, metavar="NAME",
                        help="an engine to run (repeatable; default every engine of the entry-point group)")
    parser.add_argument("--threads", type=int, default=1, help="the engines' intra-op threads (default 1)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per data set (default 30)")
    parser.add_argument("--sample", action="append", default=[], type=_sample_spec, metavar="NAME=N",
                        help="run engine NAME on a seeded, stratified subset of N tests (repeatable)")
    parser.add_argument("--suite", default=None, metavar="DIR",
                        help="a suite exported before with the same --seed (default: export one to a temporary folder)")
    parser.add_argument("--doc", default="docs/conformance.md", metavar="PATH",
                        help="the page whose scoreboard markers get the table ('-': none; default docs/conformance.md)")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write every engine's results here")
    parser.add_argument("--quick", action="store_true", help="Gather-13 and ScatterND-18, 3 cases per version")
    args = parser.parse_args(argv)
    from gather_scatter.check.engines import canonical

    args.samples = {canonical(name): count for name, count in args.sample}
    given = [*(f"--engine={e}" for e in args.engine or ()), *(f"--sample={n}={c}" for n, c in args.sample)]
    if args.engine is None:
        from gather_scatter.check.engines import discover

        args.engine = sorted(discover())
    args.engine = list(dict.fromkeys(canonical(name) for name in args.engine))  # reference and onnx-reference: once
    command = "python benchmarks/scoreboard.py " + shlex.join(
        [*given, "--seed", str(args.seed), "--threads", str(args.threads)]
        + (["--quick"] if args.quick else []) + ([f"--timeout={args.timeout:g}"] if args.timeout != 30.0 else []))
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    from gather_scatter.conformance import export_tests, load_suite

    where = args.suite or tempfile.mkdtemp(prefix="scoreboard-suite-")
    try:
        if args.suite is None:
            ops = ["Gather-13", "ScatterND-18"] if args.quick else None
            export_tests(where, seed=args.seed, ops=ops, cases_per_version=3 if args.quick else None)
        tests = load_suite(where)
        suite = {"tests": len(tests), "valid": sum(t.valid for t in tests), "invalid": sum(not t.valid for t in tests)}
        results = [run_engine(engine, tests, args, where) for engine in args.engine]
    finally:
        if args.suite is None:
            shutil.rmtree(where, ignore_errors=True)
    text = markdown(results, suite, args, command, date)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"date": date, "command": command, "suite": suite, "engines": results}, f, indent=1)
    if args.doc != "-":
        write_doc(args.doc, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
