"""Issue texts ready to file upstream: ``gather-scatter check --report DIR``.

Findings are grouped into classes (one engine, one operator version, one finding kind, one kind
of case: ``ScatterND-18 wrong_output on valid cases``), and each class becomes three files:

- ``NN-ENGINE-OP-VERSION-KIND.py``: a standalone script that builds the one-node model with
  ``onnx.helper`` from the class's smallest (shrunk) case, runs it with the engine's own API
  (the engine's ``standalone_run_source``), prints the actual and the expected output, and exits
  with status 1 and ``DEFECT REPRODUCED`` where the defect shows (0 where it does not). It
  imports numpy, onnx and the engine only, never gather_scatter. Arrays of up to
  :data:`LITERAL_LIMIT` elements are literals in the script; larger ones are in
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
from typing import Any

import numpy as np
from onnx import TensorProto

from ..errors import GatherScatterError
from . import engines, runner

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

LITERAL_LIMIT = 64
"""Arrays of at most this many elements are written into the script as literals."""

SPEC_FILES = {
    "Gather": "Gather-1-11-13.rst.txt",
    "GatherND": "GatherND-11-12-13.rst.txt",
    "GatherElements": "GatherElements-11-13.md.txt",
    "ScatterND": "ScatterND-11-13-16.rst.txt",
    "ScatterElements": "ScatterElements-11-13-16-18.md.txt",
    "Scatter": "Scatter-9-11.md.txt",
    "TensorScatter": "TensorScatter-24.md.txt",
    "com.microsoft.GatherND": "com.microsoft-GatherND-1.md.txt",
}
"""The schema text (as the onnx package carries it, ``onnx.defs``) each quote is taken from."""

_BOUNDS = (
    "All index values are expected to be within bounds [-s, s-1] along axis of size s. "
    "It is an error if any of the index values are out of bounds."
)
_ELEMENTS_OUTPUT = (
    "For each entry in `updates`, the target index in `data` is obtained by combining the "
    "corresponding entry in `indices` with the index of the entry itself: the index-value for "
    "dimension = axis is obtained from the value of the corresponding entry in `indices` and the "
    "index-value for dimension != axis is obtained from the index of the entry itself."
)
_REDUCTION = (
    "`reduction` allows specification of an optional reduction operation, which is applied to all values "
    "in `updates` tensor into `output` at the specified `indices`."
)

SPEC_QUOTES: dict[tuple[str, str], str] = {
    ("Gather", "bounds"): _BOUNDS,
    ("Gather", "output"): (
        "Given `data` tensor of rank r >= 1, and `indices` tensor of rank q, gather entries of the axis dimension "
        "of `data` (by default outer-most one as axis=0) indexed by `indices`, and concatenates them in an output "
        "tensor of rank q + (r - 1)."
    ),
    ("GatherND", "bounds"): (
        "All values in `indices` are expected to be within bounds [-s, s-1] along axis of size `s` (i.e.) "
        "`-data_shape[i] <= indices[...,i] <= data_shape[i] - 1`. It is an error if any of the index values are "
        "out of bounds."
    ),
    ("GatherND", "output"): (
        "The output tensor is obtained by mapping each index-tuple in the `indices` tensor to "
        "the corresponding slice of the input `data`."
    ),
    ("GatherElements", "bounds"): _BOUNDS,
    ("GatherElements", "output"): (
        "Its output shape is the same as the shape of `indices` and consists of one "
        "value (gathered from the `data`) for each element in `indices`."
    ),
    ("ScatterND", "bounds"): (
        "`indices` is treated as a (q-1)-dimensional tensor of k-tuples, where each k-tuple is a partial-index "
        "into `data`."
    ),
    ("ScatterND", "output"): (
        "The output of the operation is produced by creating a copy of the input `data`, and then updating its "
        "value to values specified by `updates` at specific index positions specified by `indices`. Its output "
        "shape is the same as the shape of `data`."
    ),
    ("ScatterND", "reduction-add"): _REDUCTION
    + (
        '\n\nWhen `reduction` is set to "add", `output` is calculated as follows:\n\n'
        "    output = np.copy(data)\n    update_indices = indices.shape[:-1]\n"
        "    for idx in np.ndindex(update_indices):\n        output[indices[idx]] += updates[idx]"
    ),
    ("ScatterND", "reduction-mul"): _REDUCTION
    + (
        '\n\nWhen `reduction` is set to "mul", `output` is calculated as follows:\n\n'
        "    output = np.copy(data)\n    update_indices = indices.shape[:-1]\n"
        "    for idx in np.ndindex(update_indices):\n        output[indices[idx]] *= updates[idx]"
    ),
    ("ScatterND", "reduction"): _REDUCTION,
    ("ScatterElements", "bounds"): _BOUNDS,
    ("ScatterElements", "output"): _ELEMENTS_OUTPUT,
    ("ScatterElements", "reduction"): _REDUCTION,
    ("Scatter", "bounds"): _BOUNDS,
    ("Scatter", "output"): _ELEMENTS_OUTPUT,
    ("TensorScatter", "bounds"): "`linear` mode requires write_indices+sequence_length<=max_sequence_length.",
    ("TensorScatter", "output"): (
        "The optional `write_indices` input indicates the write index for each sample in the batch, assumed to "
        'be zero if not provided. When the `mode` attribute is set to "circular", the write index is modulo '
        "max_sequence_length."
    ),
    ("com.microsoft.GatherND", "output"): (
        "Given data tensor of rank r >= 1, and indices tensor of rank q >= 1, gather slices of data into an "
        "output tensor of rank q - 1 + r - indices[-1]."
    ),
}
"""The sentences of the ONNX operator specification that decide a finding, by operator and topic:
``bounds`` (which index values are valid), ``output`` (what the output is), ``reduction`` (every
update applied; ``reduction-add`` with the spec's loop); each paragraph is checked against the
schema text in a test."""


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


def _op(check: runner.CheckCase) -> str:
    spec = check.spec
    return f"{spec.domain}.{spec.op_type}" if spec.domain else spec.op_type


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
    op, want = _op(finding.check), topic(finding)
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


def _number(value: Any, kind: str) -> str:
    if kind == "b":
        return "True" if value else "False"
    if kind in "iu":
        return str(int(value))
    if kind == "c":
        return f"complex({_number(value.real, 'f')}, {_number(value.imag, 'f')})"
    value = float(value)
    if np.isnan(value):
        return "np.nan"
    if np.isinf(value):
        return "np.inf" if value > 0 else "-np.inf"
    return repr(value)


def _nested(values: np.ndarray, kind: str) -> str:
    if values.ndim == 0:
        item = values.item() if kind not in "OUS" else values.reshape(()).item()
        if kind in "OUS":
            return repr(item.decode() if isinstance(item, bytes) else str(item))
        return _number(item, kind)
    return "[" + ", ".join(_nested(v, kind) for v in values) + "]"


def _dtype_expr(dtype: np.dtype) -> str:
    if dtype.kind in "OUS":
        return "object"
    if dtype.kind == "V":  # ml_dtypes (bfloat16, float8, 4-bit): an onnx dependency
        return f"ml_dtypes.{dtype.name}"
    return "np.bool_" if dtype.kind == "b" else f"np.{dtype.name}"


def _literal(array: np.ndarray) -> str:
    """Python source of ``array``: a nested list with its dtype (and shape where it has a zero)."""
    array = np.asarray(array)
    if array.dtype.kind == "V":
        bits = array.view(f"u{array.dtype.itemsize}")
        return (
            f"np.array({_nested(bits, 'u')}, dtype=np.uint{8 * array.dtype.itemsize}).view({_dtype_expr(array.dtype)})"
        )
    body = _nested(array, array.dtype.kind)
    text = f"np.array({body}, dtype={_dtype_expr(array.dtype)})"
    return text + f".reshape({tuple(array.shape)!r})" if 0 in array.shape else text


def _storable(array: np.ndarray) -> np.ndarray:
    return array.view(f"u{array.dtype.itemsize}") if array.dtype.kind == "V" else array


def _array_source(name: str, array: np.ndarray, stored: dict[str, np.ndarray], archive: str) -> str:
    """``NAME = <array>``: a literal, or (over :data:`LITERAL_LIMIT` elements) from the archive."""
    array = np.asarray(array)
    if array.size <= LITERAL_LIMIT:
        return f"{name} = {_literal(array)}"
    stored[name] = _storable(array)
    view = f".view({_dtype_expr(array.dtype)})" if array.dtype.kind == "V" else ""
    return f"{name} = ARRAYS[{name!r}]{view}  # {array.dtype} {list(array.shape)}, from {archive}"


def _elem_name(array: np.ndarray) -> str:
    return TensorProto.DataType.Name(runner._elem(array))


def _attr_source(value: Any) -> str:
    if isinstance(value, bytes):
        return repr(value.decode())
    if isinstance(value, np.generic):
        return repr(value.item())
    return repr(value)


_DIFFERS = '''
def differs(actual, expected):
    """None where actual is expected (shape, dtype, every element; any two NaNs equal), else what differs."""
    actual = np.asarray(actual)
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return f"{actual.dtype} {list(actual.shape)}, expected {expected.dtype} {list(expected.shape)}"
    if expected.dtype == object:
        got = [v.decode() if isinstance(v, bytes) else str(v) for v in actual.reshape(-1).tolist()]
        bad = [i for i, (g, w) in enumerate(zip(got, expected.reshape(-1).tolist())) if g != w]
    else:
        a, e = actual.reshape(-1), expected.reshape(-1)
        if TOLERANCE and e.dtype.kind == "f":
            finite = np.isfinite(e)
            scale = max(1.0, float(np.abs(e[finite]).max())) if finite.any() else 1.0
            with np.errstate(invalid="ignore"):
                ok = (a == e) | (np.isnan(a) & np.isnan(e)) | (np.abs(a.astype(np.float64) - e) <= TOLERANCE * scale)
        else:  # bit for bit
            ok = (a.view(np.uint8).reshape(a.size, -1) == e.view(np.uint8).reshape(e.size, -1)).all(axis=1)
            if e.dtype.kind in "fc":
                ok |= np.isnan(a) & np.isnan(e)
        bad = np.flatnonzero(~ok).tolist()
    if not bad:
        return None
    first = ", ".join(f"[{i}] {actual.reshape(-1)[i]!r} (expected {expected.reshape(-1)[i]!r})" for i in bad[:3])
    return f"{len(bad)} of {expected.size} elements differ; flat positions {first}"
'''

_SHOW = """
def show(label, array):
    array = np.asarray(array)
    print(f"{label}: {array.dtype} {list(array.shape)}")
    print(np.array2string(array, threshold=60, edgeitems=3))
"""


def _check_block(
    finding: runner.Finding,
    expected: Any,
    also: np.ndarray | None,
    tries: int,
    timeout: float,
    tolerance: float,
    stored: dict,
    archive: str,
) -> str:
    """Return the part of the script that runs the model and says whether the defect shows."""
    if isinstance(expected, GatherScatterError):
        lines = [f"EXPECTED_ERROR = {' '.join(str(expected).split())!r}  # the spec requires an error"]
    else:
        lines = [_array_source("EXPECTED", expected, stored, archive) + "  # the spec's loop (see the issue)"]
    if finding.kind == "wrong_output":
        lines += [
            "ALSO_RIGHT = None"
            if also is None
            else _array_source("ALSO_RIGHT", also, stored, archive)
            + "  # the first of each duplicate winning: the spec leaves the winner open",
            f"TOLERANCE = {tolerance!r}  # of the largest expected magnitude: 0 is exact",
            f"TRIES = {tries}  # runs until it shows (a race shows on some runs only)",
            _DIFFERS + _SHOW,
            "for attempt in range(1, TRIES + 1):",
            "    actual = np.asarray(run(MODEL, FEEDS)[0])",
            "    problem = differs(actual, EXPECTED)",
            "    if problem and ALSO_RIGHT is not None and differs(actual, ALSO_RIGHT) is None:",
            "        problem = None",
            "    if problem:",
            "        break",
            "show('actual', actual)",
            "show('expected', EXPECTED)",
            "if problem:",
            "    print(f'DEFECT REPRODUCED (run {attempt} of {TRIES}): {problem}')",
            "    sys.exit(1)",
            "print(f'not reproduced in {TRIES} runs: the output is as expected')",
        ]
    elif finding.kind == "accepted_invalid":
        lines += [
            _SHOW,
            "try:",
            "    outputs = run(MODEL, FEEDS)",
            "except Exception as exc:  # what the spec requires",
            "    print(f'actual: the engine raised {type(exc).__name__}: {exc}')",
            "    print('not reproduced: the engine refuses the input, as the spec requires')",
            "    sys.exit(0)",
            "show('actual', outputs[0])",
            "print(f'expected: an error: {EXPECTED_ERROR}')",
            "print('DEFECT REPRODUCED: the engine returned a result for an input the spec refuses')",
            "sys.exit(1)",
        ]
    elif finding.kind == "rejected_valid":
        lines += [
            _SHOW,
            "try:",
            "    outputs = run(MODEL, FEEDS)",
            "except Exception as exc:",
            "    print(f'actual: the engine raised {type(exc).__name__}: {exc}')",
            "    show('expected', EXPECTED)",
            "    print('DEFECT REPRODUCED: the engine refused a valid input')",
            "    sys.exit(1)",
            "show('actual', outputs[0])",
            "show('expected', EXPECTED)",
            "print('not reproduced: the engine accepted the input')",
        ]
    else:  # crash, timeout: in a child process, so that this one can say what happened
        wanted = (
            "print(f'expected: an error: {EXPECTED_ERROR}')"
            if isinstance(expected, GatherScatterError)
            else "show('expected', EXPECTED)"
        )
        lines += [
            _SHOW,
            f"TIMEOUT = {max(timeout, 1.0)!r}  # seconds",
            "if sys.argv[1:] == ['--child']:",
            "    try:",
            "        show('actual', run(MODEL, FEEDS)[0])",
            "    except Exception as exc:",
            "        print(f'actual: the engine raised {type(exc).__name__}: {exc}')",
            "    sys.exit(0)",
            "try:",
            "    child = subprocess.run([sys.executable, os.path.abspath(__file__), '--child'], timeout=TIMEOUT)",
            "except subprocess.TimeoutExpired:",
            "    " + wanted,
            "    print(f'DEFECT REPRODUCED: no answer within {TIMEOUT} s')",
            "    sys.exit(1)",
            wanted,
            "if child.returncode != 0:",
            "    print(f'DEFECT REPRODUCED: the process running the model died (exit code {child.returncode})')",
            "    sys.exit(1)",
            "print('not reproduced: the engine answered')",
        ]
    return "\n".join(lines) + "\n"


def _engine_source(engine: str, threads: int | None) -> tuple[str, str]:
    """Return the engine's standalone run source and what the script needs installed."""
    loaded = engines.load(engine)
    standalone = getattr(loaded, "standalone_run_source", None)
    if standalone is not None:
        return standalone(threads), getattr(loaded, "standalone_requires", engine)
    source = (
        "import importlib.metadata\n"
        "import types\n\n"
        f"_ENGINE = next(p for p in importlib.metadata.entry_points(group={engines.GROUP!r})"
        f" if p.name == {engine!r}).load()\n"
        "_ENGINE = _ENGINE() if isinstance(_ENGINE, type) else _ENGINE\n\n\n"
        "def run(model, feeds):\n"
        f"    options = types.SimpleNamespace(threads={threads!r}, output=None)\n"
        "    return list(_ENGINE.run(model, feeds, options))\n"
    )
    return source, f"the package registering the {engine!r} engine"


def script_source(
    group: IssueClass, engine: str, version: str, threads: int | None, tries: int, timeout: float, archive: str
) -> tuple[str, dict[str, np.ndarray]]:
    """Return the standalone reproduction of ``group``: its source, and the arrays it loads from ``archive``.

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
    finding = group.smallest
    check = finding.check
    spec = check.spec
    stored: dict[str, np.ndarray] = {}
    inputs = [_array_source(name, a, stored, archive) for name, a in zip(check.names, check.case.inputs, strict=False)]
    expected = runner.expected(check)
    also = runner._first_wins(check) if finding.kind == "wrong_output" and runner._first_wins_allowed(check) else None
    if also is not None and isinstance(expected, np.ndarray) and runner.same(also, expected) is None:
        also = None
    block = _check_block(finding, expected, also, tries, timeout, group.tolerance, stored, archive)
    run_source, requires = _engine_source(engine, threads)
    attrs = "".join(f", {k}={_attr_source(v)}" for k, v in check.case.attrs.items())
    domain = f", domain={spec.domain!r}" if spec.domain else ""
    opsets = [f'helper.make_opsetid("", {check.opset if not spec.domain else 13})']
    if spec.domain:
        opsets.append(f"helper.make_opsetid({spec.domain!r}, {check.opset})")
    ir = max(
        8,
        __import__("onnx").helper.find_min_ir_version_for(
            [__import__("onnx").helper.make_opsetid("", check.opset if not spec.domain else 13)]
        ),
    )
    value_infos = ",\n        ".join(
        f"helper.make_tensor_value_info({n!r}, TensorProto.{_elem_name(a)}, {list(a.shape)!r})"
        for n, a in zip(check.names, check.case.inputs, strict=False)
    )
    needs_ml = any(
        np.asarray(a).dtype.kind == "V"
        for a in [*check.case.inputs, *([expected] if isinstance(expected, np.ndarray) else [])]
    )
    head = [
        f'"""{title(group, engine, version, threads)}',
        "",
        f"Standalone reproduction (generated by gather-scatter check --report): needs numpy, onnx and {requires}.",
        "Prints the engine's output and the one the ONNX spec gives; exit status 1 and",
        '"DEFECT REPRODUCED" where the defect shows, 0 where it does not.',
        '"""',
        "import os",
        "import subprocess",
        "import sys",
        "",
        "import numpy as np",
        "import onnx",
        "from onnx import TensorProto, helper",
    ]
    if needs_ml:
        head.append("import ml_dtypes  # installed with onnx")
    head.append("")
    if stored:
        head += [
            "HERE = os.path.dirname(os.path.abspath(__file__))",
            f"ARRAYS = np.load(os.path.join(HERE, {archive!r}), allow_pickle=True)",
            "",
        ]
    body = [
        "# The inputs (the smallest case found).",
        *inputs,
        "",
        f"# The model: one {_op(check)} node at opset {check.opset}.",
        f'node = helper.make_node({spec.op_type!r}, {check.names!r}, ["y"]{domain}{attrs})',
        "graph = helper.make_graph(",
        '    [node], "repro",',
        f"    [{value_infos}],",
        f'    [helper.make_tensor_value_info("y", TensorProto.{_elem_name(check.case.inputs[0])}, None)],',
        ")",
        f"model = helper.make_model(graph, opset_imports=[{', '.join(opsets)}])",
        f"model.ir_version = {ir}",
        "MODEL = model.SerializeToString()",
        f"FEEDS = {{{', '.join(f'{n!r}: {n}' for n in check.names)}}}",
        "",
        f"# How {engine} runs a model, with its own API: run(model bytes, feeds) -> outputs.",
        run_source.rstrip(),
        "",
        "",
        block,
    ]
    return "\n".join(head + body), stored


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
    attrs = ", ".join(f"{k}={_attr_source(v)}" for k, v in check.case.attrs.items())
    shapes = ", ".join(f"{n}: {a.dtype} {list(a.shape)}" for n, a in zip(check.names, check.case.inputs, strict=False))
    case = "a valid input" if check.kind == "valid" else f"an invalid input ({check.kind})"
    detail = " ".join(finding.detail.split())
    expected = runner.expected(check)
    if finding.kind == "accepted_invalid" and isinstance(expected, GatherScatterError):
        detail = f"the spec requires an error ({' '.join(str(expected).split())}), but the engine returned a result"
    text = (
        f"A model of one `{_op(check)}` node (opset {check.opset}{', ' + attrs if attrs else ''}), run on "
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
