"""A standalone script and an issue text per exporter finding class (``check --exporter torch --report DIR``).

The script (torch, onnx and numpy only; never gather_scatter) defines the same module the check
exported (``program.module_source``), exports it the same way, runs the graph with onnx's own
reference evaluator and compares with torch eager. Exit status 1 and ``EXPORT DEFECT REPRODUCED``
where the defect shows, 0 where it does not, 125 and ``COULD NOT RUN`` where the script could not
get as far as the check. A refused or invalid model shows through onnx's tools (the exporter's
exception, the checker with ``full_check``, the reference evaluator's error); where onnx's tools
accept a model our evaluator refuses, the script says so and exits 0, and the issue text says
that it does not reproduce without gather_scatter.

Each class is written as ``NN-torch-MODE-OP-KIND.py`` and ``.md`` (the issue text: title, the
environment, what happens, the nodes written and the indexing node that writes the wrong output,
what engines do with the model, the script's output here, the script).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile

from .program import leaves, module_source, tensor_source

__all__ = ["issue_text", "script_source", "write_reports"]

_WHERE = {
    "dynamo": "microsoft/onnxscript (torchlib, which lowers aten ops for `torch.onnx.export(dynamo=True)`) "
    "or pytorch/pytorch (label `module: onnx`) where the lowering is torch's own",
    "torchscript": "pytorch/pytorch (label `module: onnx`); the TorchScript exporter is deprecated, so "
    "the fix may be the dynamo exporter's only: say whether it is right there",
}

_HELPERS = '''

def to_numpy(tensor):
    if tensor.dtype == torch.bfloat16:
        import ml_dtypes  # onnx's own dependency

        return tensor.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return tensor.numpy()


def export(model):
    if MODE == "dynamo":
        program = torch.onnx.export(
            model, INPUTS, dynamo=True, opset_version=OPSET, input_names=NAMES, verbose=False
        )
        return program.model_proto
    buffer = io.BytesIO()
    torch.onnx.export(model, INPUTS, buffer, dynamo=False, opset_version=OPSET or 18, input_names=NAMES)
    return onnx.load_from_string(buffer.getvalue())


def differs(got, want):
    """What differs between the graph's outputs and eager's, or None."""
    if len(got) != len(want):
        return f"{len(got)} outputs, eager gives {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        if g.dtype != w.dtype or g.shape != w.shape:
            return f"output {k}: {g.dtype}{list(g.shape)}, eager gives {w.dtype}{list(w.shape)}"
        if w.dtype.kind in "fV":
            a, e = g.astype(np.float64), w.astype(np.float64)
            with np.errstate(invalid="ignore"):
                bad = ~((a == e) | (np.isnan(a) & np.isnan(e)))
                if TOLERANCE is not None:
                    bad &= ~(np.abs(a - e) <= TOLERANCE * np.maximum(1.0, np.abs(e)))
        else:
            bad = g != w
        if bad.any():
            at = np.unravel_index(int(np.argmax(bad.reshape(-1))), w.shape)
            return f"output {k} at {[int(i) for i in at]}: {g[at]!r}, eager gives {w[at]!r}"
    return None


def main():
    warnings.simplefilter("ignore")  # the exporters' deprecation and training-mode warnings
    model = Model().eval()
    if "--export-only" in sys.argv:  # the child that a crashing export kills
        export(model)
        return 0
    with torch.no_grad():
        out = model(*[t.clone() for t in INPUTS])
    want = [to_numpy(o) for o in (out if isinstance(out, (tuple, list)) else [out])]
    print("torch eager:", *want, sep="\\n")
    if KIND == "export_crashed":
        child = subprocess.run([sys.executable, __file__, "--export-only"], capture_output=True, text=True)
        print(f"the export in a child process: exit status {child.returncode}")
        return 1 if child.returncode not in (0, 1) else 0
    try:
        proto = export(model)
    except Exception as exc:
        print(f"the export raised {type(exc).__name__}: {exc}"[:2000])
        return 1 if KIND == "export_refused" else 125
    print("nodes written:", ", ".join(node.op_type for node in proto.graph.node))
    try:
        onnx.checker.check_model(proto, full_check=KIND in ("checker_refused", "evaluator_refused"))
    except Exception as exc:
        print(f"onnx.checker refuses the exported model: {type(exc).__name__}: {exc}"[:2000])
        return 1 if KIND in ("checker_refused", "evaluator_refused") else 125
    by_name = dict(zip(NAMES, INPUTS))
    feeds = {i.name: to_numpy(by_name[i.name]) for i in proto.graph.input if i.name in by_name}
    try:
        got = ReferenceEvaluator(proto).run(None, feeds)
    except Exception as exc:
        print(f"onnx.reference refuses the exported model: {type(exc).__name__}: {exc}"[:2000])
        return 1 if KIND == "evaluator_refused" else 125
    print("the exported graph (onnx.reference):", *got, sep="\\n")
    what = differs(got, want)
    if what is None:
        if KIND != "evaluator_refused":
            return 0
        print("onnx's checker and reference evaluator accept the model; gather_scatter's evaluator refuses it:")
        print(REFUSAL)
        try:
            import onnxruntime
        except ImportError:
            return 0
        try:
            session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
            session.run(None, feeds)
        except Exception as exc:
            print(f"onnxruntime {onnxruntime.__version__} refuses it too: {type(exc).__name__}: {exc}"[:2000])
            return 1
        return 0
    print("differs:", what)
    return 1


if __name__ == "__main__":
    status = main()
    print({1: "EXPORT DEFECT REPRODUCED", 0: "not reproduced", 125: "COULD NOT RUN"}[status])
    sys.exit(status)
'''


def script_source(row: dict, versions: dict, tolerance: float | None) -> str:
    """Return the standalone reproduction of the finding class whose first (shrunk) finding is ``row``."""
    sample = row["_sample"]
    tensors = leaves((sample.args, sample.kwargs))
    inputs = "".join(f"    {tensor_source(t)},\n" for t in tensors)
    names = [f"a{k}" for k in range(len(tensors))]
    return (
        f'"""{_title(row, versions)}\n\n'
        f"Standalone (torch, onnx and numpy only): torch {versions['torch']}'s {row['mode']} exporter, opset "
        f"{row['opset'] or 'default'}. Exit status 1 and EXPORT DEFECT REPRODUCED where the defect shows, 0 where "
        "it does not, 125 and COULD NOT RUN where the script could not get as far as the check.\n"
        'Written by `gather-scatter check --exporter torch --report DIR`.\n"""\n\n'
        "import io\nimport operator  # noqa: F401 - some calls are operator.getitem\n"
        "import subprocess\nimport sys\nimport warnings\n\n"
        "import numpy as np\nimport onnx\nimport torch\nfrom onnx.reference import ReferenceEvaluator\n\n"
        f"KIND = {row['kind']!r}\nMODE = {row['mode']!r}\nOPSET = {row.get('requested_opset')!r}\n"
        f"TOLERANCE = {tolerance!r}  # None: bit for bit\nREFUSAL = {row['detail']!r}\n\n"
        f"{module_source(sample)}\n\nINPUTS = (\n{inputs})\nNAMES = {names!r}\n{_HELPERS}"
    )


def _call(row: dict) -> str:
    from .samples import OPERATIONS

    call = OPERATIONS[row["op"]].call
    name = call.removeprefix("F = ") if call.startswith("F = ") else row["op"].replace("_", " ")
    return f"`{name}`" + (f" ({row['variant']})" if row["variant"] else "")


def _title(row: dict, versions: dict) -> str:
    exporter = {"dynamo": "dynamo exporter", "torchscript": "TorchScript exporter"}[row["mode"]]
    what = {
        "wrong_output": "writes a graph that computes a wrong result",
        "wrong_shape": "writes a graph whose output has the wrong shape",
        "wrong_dtype": "writes a graph whose output has the wrong dtype",
        "wrong_count": "writes a graph with the wrong number of outputs",
        "export_refused": "cannot export it",
        "export_crashed": "kills the Python process exporting it",
        "checker_refused": "writes a model that onnx.checker refuses",
        "evaluator_refused": "writes an invalid ONNX model",
    }[row["kind"]]
    return f"[ONNX] {exporter} {what}: {_call(row)}, {row['sample']} (torch {versions['torch']})"


def issue_text(row: dict, versions: dict, script: str, output: str, status: int | None) -> str:
    """Return the issue text of one finding class: what happens, where, the script's output here, the script."""
    lines = [
        f"# {_title(row, versions)}",
        "",
        f"**File with:** {_WHERE[row['mode']]}.",
        "",
        "**Environment:** "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + f"; Python {platform.python_version()}, {platform.system()} {platform.machine()}; "
        + f"exported at opset {row['opset'] or 'the default'}.",
        "",
        "## What happens",
        "",
        f"The call {_call(row)} on {row['sample']}"
        + (
            f" (shrunk from {row['shrunk_from']} to the smallest tensors that still show it)"
            if row.get("shrunk_from")
            else ""
        )
        + f": {row['detail']}",
        "",
    ]
    if row["nodes"]:
        lines += [f"Nodes written: {', '.join(f'`{n}`' for n in row['nodes'])}.", ""]
    if row.get("carrier"):
        lines += [f"The indexing node that writes the output: `{row['carrier']}`.", ""]
    lines += [
        "## Expected",
        "",
        "torch eager's result. The exported graph was run with gather_scatter's evaluator, which runs each ONNX "
        "indexing operator as its specification's loop, so the difference is the export's: "
        + {
            "export_refused": "the exporter refuses a call that torch runs.",
            "export_crashed": "the exporter kills the process instead of exporting or raising.",
        }.get(row["kind"], "the graph does not compute what the module computes, or is not valid ONNX."),
        "",
    ]
    for engine, verdict in row.get("engines", {}).items():
        lines.append(f"- {engine}: {verdict}")
    if row.get("engines"):
        lines.append("")
    said = {1: "reproduces it", 0: "does not reproduce it with onnx's own tools", 125: "could not run"}
    lines += [
        "## Reproduction",
        "",
        f"The script below {said.get(status, 'did not finish') if status is not None else 'was not run'} on this "
        f"machine (exit status {status}); its output:",
        "",
        "```",
        output.strip()[-4000:],
        "```",
        "",
        "```python",
        script.rstrip(),
        "```",
        "",
    ]
    return "\n".join(lines)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:60]


def _run(path: str, timeout: float) -> tuple[int | None, str]:
    try:
        done = subprocess.run(
            [sys.executable, path], capture_output=True, text=True, timeout=timeout, cwd=os.path.dirname(path)
        )
    except subprocess.TimeoutExpired:
        return None, f"no answer within {timeout:g} s"
    # torch's own log lines (glog: 'W1128 13:57:05.010000 2717 file.py:107] ...') are not the script's output
    lines = [line for line in (done.stdout + done.stderr).splitlines() if not re.match(r"[IWEF]\d{4} ", line)]
    return done.returncode, "\n".join(lines)


def write_reports(rows: list[dict], result: dict, report_dir: str, timeout: float = 300.0) -> list[str]:
    """Write a script and an issue text per finding class into ``report_dir`` (replaced as a whole); return the texts.

    Each script runs once here, and its output and exit status go into its issue text
    (``row["reproduced"]``: the exit status).
    """
    from .export import TOLERANCE
    from .samples import OPERATIONS

    versions = result["versions"]
    parent = os.path.dirname(os.path.abspath(report_dir))
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".exporter-report-", dir=parent)
    written = []
    for number, row in enumerate(rows, 1):
        row["requested_opset"] = result["opset"]
        sample = row["_sample"]
        dtypes = {str(t.dtype).removeprefix("torch.") for t in leaves((sample.args, sample.kwargs))}
        tolerance = max((TOLERANCE[d] for d in dtypes if d in TOLERANCE), default=None)
        script = script_source(row, versions, tolerance if OPERATIONS[row["op"]].reduces else None)
        stem = f"{number:02d}-torch-{row['mode']}-{_slug(row['op'] + ' ' + row['variant'])}-{row['kind']}"
        path = os.path.join(work, stem + ".py")
        with open(path, "w") as f:
            f.write(script)
        status, output = _run(path, timeout)
        row["reproduced"] = status
        with open(os.path.join(work, stem + ".md"), "w") as f:
            f.write(issue_text(row, versions, script, output, status))
        written.append(os.path.join(report_dir, stem + ".md"))
    if os.path.exists(report_dir):
        shutil.rmtree(report_dir)
    os.replace(work, report_dir)
    return written
