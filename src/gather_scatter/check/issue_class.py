"""Classes of ``gather-scatter check`` findings, and what each one is.

Findings are grouped into classes (one operator version, one finding kind, one kind of case:
``ScatterND-18 wrong_output on valid cases``); each class is one issue text (``upstream``). Here:
the grouping, which part of the spec decides a finding (:func:`topic`, :func:`spec_quote`), and
the issue's one-line :func:`title`. Every function takes a finding of any shape: empty indices,
and indices of any rank, included.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import one_line
from . import runner
from .repro_script import op_name
from .spec_quotes import SPEC_QUOTES

__all__ = ["IssueClass", "classes", "spec_quote", "title", "topic"]


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


def _reduction(check: runner.CheckCase) -> str:
    value = check.case.attrs.get("reduction", "none")
    return value.decode() if isinstance(value, bytes) else str(value)


def _repeats(rows: np.ndarray) -> bool:
    """Whether two rows of the 2-D ``rows`` are equal."""
    if len(rows) < 2:
        return False
    if rows.shape[1] == 0:  # every row is the empty tuple
        return True
    return len(np.unique(rows, axis=0)) < len(rows)


def has_duplicates(check: runner.CheckCase) -> bool:
    """Whether two updates of a scatter target the same element or slice.

    Any shape of indices: empty ones, and of any rank, have no duplicates to find but must not
    fail (a report is written for every finding).
    """
    op = check.spec.op_type
    if op not in ("ScatterND", "ScatterElements", "Scatter"):
        return False
    data, indices = np.asarray(check.case.inputs[0]), np.asarray(check.case.inputs[1])
    if indices.ndim == 0 or (indices.size == 0 and (op != "ScatterND" or indices.shape[-1] != 0)):
        return False
    if op == "ScatterND":  # one update per index tuple (the last axis)
        k = indices.shape[-1]
        if k > data.ndim:  # an invalid case: no element to name
            return False
        tuples = indices.reshape(int(np.prod(indices.shape[:-1])), k).astype(np.int64)
        return _repeats(np.where(tuples < 0, tuples + np.array(data.shape[:k], np.int64), tuples))
    # ScatterElements, Scatter: two positions of one line along the axis naming one element
    if indices.ndim != data.ndim:  # an invalid case: no element to name
        return False
    axis = int(check.case.attrs.get("axis", 0)) % indices.ndim
    wrapped = np.where(indices < 0, indices.astype(np.int64) + data.shape[axis], indices)
    lines = np.sort(np.moveaxis(wrapped, axis, -1).reshape(-1, indices.shape[axis]), axis=1)
    return bool((lines[:, 1:] == lines[:, :-1]).any())


def _negative(check: runner.CheckCase) -> bool:
    return any(a.dtype.kind == "i" and a.size and (a < 0).any() for a in check.case.inputs[1:])


def _out_of_range_ids(check: runner.CheckCase) -> bool:
    """Whether a GatherBlockQuantized case has ids outside ``[-s, s-1]`` (which select zeros)."""
    data, indices = check.case.inputs[0], np.asarray(check.case.inputs[1])
    axis = check.case.attrs.get("gather_axis", 0)
    if indices.dtype.kind != "i" or not indices.size or not -data.ndim <= axis < data.ndim:
        return False
    s = data.shape[axis]
    return bool(((indices < -s) | (indices >= s)).any())


def topic(finding: runner.Finding) -> str:
    """Which part of the spec decides ``finding``: ``bounds``, ``reduction`` or ``output``."""
    check = finding.check
    if check.spec.op_type == "GatherBlockQuantized":  # out-of-range ids are valid: rows of zeros
        out_of_range = check.kind == "valid" and finding.kind != "rejected_valid" and _out_of_range_ids(check)
        return "bounds" if out_of_range else "output"
    if "bound" in check.kind or "write index" in check.kind or "> max" in check.kind:
        return "bounds"
    if check.kind == "valid" and _negative(check) and finding.kind != "wrong_output":
        return "bounds"
    if _reduction(check) != "none" and has_duplicates(check):
        return "reduction"
    return "output"


def spec_quote(finding: runner.Finding) -> tuple[str, str]:
    """Return the sentence of the ONNX spec that decides ``finding``, and where it is from.

    Returns
    -------
    tuple of (str, str)
        The quote, and its source (the operator version and the schema's address).
    """
    op, want = op_name(finding.check), topic(finding)
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
    text = one_line(text)
    return text if len(text) <= width else text[:width].rsplit(" ", 1)[0] + " ..."


def title(group: IssueClass, engine: str, version: str, threads: int | None) -> str:
    """Return a one-line issue title for ``group``.

    For example ``[onnxruntime 1.32.0] ScatterND-18 reduction='add' loses updates to duplicate
    indices on 2 threads``.
    """
    finding = group.smallest
    check = finding.check
    name = check.spec.name  # com.microsoft.GatherND-1: the domain is in the version's name already
    reduction = _reduction(check)
    red = f" reduction='{reduction}'" if reduction != "none" else ""
    if finding.kind == "wrong_output":
        if red and has_duplicates(check):
            what = f"{red} gives a wrong result for duplicate indices{_threads(threads)}"
        elif "dtype" in finding.detail and "expected" in finding.detail:
            what = f" returns the wrong output type ({finding.detail.split(';')[0]})"
        elif "shape" in finding.detail and finding.detail.startswith("shape"):
            what = f" returns the wrong output shape ({finding.detail})"
        elif check.spec.op_type == "GatherBlockQuantized":  # negative ids are ordinary; out-of-range ones give zeros
            far = _out_of_range_ids(check)
            what = " returns a wrong output" + (" for out-of-range indices (zeros expected)" if far else "")
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
        negative = _negative(check) and check.spec.op_type != "GatherBlockQuantized"
        what = (
            " rejects valid negative indices" if negative else " rejects a valid input"
        ) + f": {_shorten(message, 90)}"
    elif finding.kind == "crash":
        on = f"an invalid input ({check.kind})" if check.kind != "valid" else "a valid input"
        what = f" crashes the process on {on}"
    else:
        what = f" hangs on {'an invalid input (' + check.kind + ')' if check.kind != 'valid' else 'a valid input'}"
    return f"[{engine} {version}] {name}{what}"
