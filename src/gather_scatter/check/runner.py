"""Run generated cases through an engine and classify every disagreement with our kernels.

For each case our kernel (``run_node`` at the case's opset) gives the expected output or the
error the spec requires; the engine's answer (``engines.Outcome``) is then:

- ``wrong_output``: both return, but the values, shape or dtype differ (bit for bit; two
  NaNs are equal; for a scatter without reduction, where ONNX leaves the winner among
  duplicate targets open, the first update winning is as right as the last);
- ``accepted_invalid``: the engine returned a result where we raise;
- ``rejected_valid``: the engine raised on an input we accept, for an operator and type it
  does not call unsupported;
- ``crash`` / ``timeout``: the engine's process died or hung;
- ``unsupported``: the engine says it lacks the operator version or type (counted, no finding).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from onnx import helper

from .._nodes import run_node
from ..errors import GatherScatterError
from ..kernels import numpy_paths
from ..rules.versions import LATEST_OPSET, REGISTRY, OpVersion
from . import case_values as V
from . import cases as C
from .engines import Outcome, Worker, is_ml_dtype

__all__ = [
    "FINDING_KINDS",
    "CheckCase",
    "Finding",
    "SelectionError",
    "check_selection",
    "classify",
    "expected",
    "generate",
    "is_ml_dtype",
    "model_bytes",
    "run_one",
    "same",
    "signature",
]

FINDING_KINDS = ("wrong_output", "accepted_invalid", "rejected_valid", "crash", "timeout")


@dataclass
class CheckCase:
    """One case to run through an engine: an operator version's case at an opset.

    Attributes
    ----------
    spec : OpVersion
        The operator version the case is for.
    opset : int
        The opset its one-node model imports (:func:`model_bytes`).
    case : cases.Case
        The op, its inputs and attributes.
    kind : str
        ``valid``, or what makes it invalid (as :func:`cases.invalid_cases` names it).
    """

    spec: OpVersion
    opset: int
    case: V.Case
    kind: str  # "valid", or what makes it invalid

    @property
    def names(self) -> list[str]:
        """The node's input names: ``x0``, ``x1`` (, ``x2``), one per input (feed or initializer)."""
        return [f"x{i}" for i in range(len(self.case.inputs))]

    def feeds(self) -> dict[str, np.ndarray]:
        """Return the case's inputs that the model takes as inputs (not ``case.constants``), by name."""
        constants = set(self.case.constants)
        return {n: a for i, (n, a) in enumerate(zip(self.names, self.case.inputs, strict=False)) if i not in constants}

    def initializers(self) -> dict[str, np.ndarray]:
        """Return the case's inputs that the model holds as initializers (``case.constants``), by name."""
        constants = set(self.case.constants)
        return {n: a for i, (n, a) in enumerate(zip(self.names, self.case.inputs, strict=False)) if i in constants}


@dataclass
class Finding:
    """A case on which the engine disagrees with our kernels.

    Attributes
    ----------
    kind : str
        One of :data:`FINDING_KINDS`.
    check : CheckCase
        The case (shrunk, where shrinking kept the finding).
    detail : str
        What differs, or what the engine said.
    files : dict of str to str
        Where it was written: ``model``, ``inputs`` and the one-line ``repro``
        (``report.write_finding``); empty until then.
    """

    kind: str
    check: CheckCase
    detail: str
    files: dict[str, str] = field(default_factory=dict)


def _elem(array: np.ndarray) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(object) if array.dtype.kind in "OUS" else array.dtype)


def output_input(check: CheckCase) -> int:
    """Return the position of the input whose type the output has: data's, but scales' (T2) for GatherBlockQuantized."""
    return 2 if check.spec.op_type == "GatherBlockQuantized" and len(check.case.inputs) > 2 else 0


def model_bytes(check: CheckCase) -> bytes:
    """Return a one-node model of the case: inputs x0, x1(, x2), output y, the case's opset.

    The inputs of ``case.constants`` are initializers (not graph inputs), the others graph inputs.
    """
    from onnx import numpy_helper

    spec, case = check.spec, check.case
    node = helper.make_node(spec.op_type, check.names, ["y"], domain=spec.domain, **case.attrs)
    inputs = [helper.make_tensor_value_info(n, _elem(a), a.shape) for n, a in check.feeds().items()]
    initializers = [numpy_helper.from_array(np.asarray(a), n) for n, a in check.initializers().items()]
    output = helper.make_tensor_value_info("y", _elem(case.inputs[output_input(check)]), None)
    opsets = [helper.make_opsetid("", check.opset if not spec.domain else 13)]
    if spec.domain:
        opsets.append(helper.make_opsetid(spec.domain, check.opset))
    graph = helper.make_graph([node], "check", inputs, [output], initializer=initializers)
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = max(8, helper.find_min_ir_version_for(opsets[:1]))
    return model.SerializeToString()


def same(actual: Any, expected: np.ndarray) -> str | None:
    """Return None when ``actual`` equals ``expected``, else what differs.

    Equal means: dtype, shape, bits; any two NaNs equal; strings by value; complex components
    within 4 ulps, the freedom a fused multiply-add gives a product.
    """
    actual = np.asarray(actual)
    if actual.shape != expected.shape:
        return f"shape {actual.shape}, expected {expected.shape}"
    if expected.dtype == object:
        if actual.dtype.kind not in "OUS":
            return f"dtype {actual.dtype}, expected strings"
        got = [v.decode() if isinstance(v, bytes) else str(v) for v in actual.reshape(-1).tolist()]
        want = expected.reshape(-1).tolist()
        bad = next((i for i, (g, w) in enumerate(zip(got, want, strict=False)) if g != w), None)
        return None if bad is None else f"at flat position {bad}: {got[bad]!r}, expected {want[bad]!r}"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    if actual.size == 0:
        return None
    a, e = np.ascontiguousarray(actual).reshape(-1), np.ascontiguousarray(expected).reshape(-1)
    a_bits, e_bits = a.view(np.uint8).reshape(a.size, -1), e.view(np.uint8).reshape(e.size, -1)
    differ = (a_bits != e_bits).any(axis=1)
    if differ.any() and (a.dtype.kind in "fc" or a.dtype.kind == "V"):
        try:
            both_nan = np.isnan(a.astype(np.complex128)) & np.isnan(e.astype(np.complex128))
            differ &= ~both_nan
        except (TypeError, ValueError):
            pass
    if differ.any() and a.dtype.kind == "c":
        # A complex product may be rounded with or without a fused multiply-add (NumPy itself does
        # both, in its scalar and SIMD loops): components within 4 ulps are the same answer.
        eps = np.finfo(a.real.dtype).eps
        far = np.zeros(a.size, dtype=bool)
        for part in (np.real, np.imag):
            x, y = part(a).astype(np.float64), part(e).astype(np.float64)
            with np.errstate(invalid="ignore"):  # inf - inf: NaN, not near; not NumPy's warning on stderr
                near = np.abs(x - y) <= 4 * eps * np.maximum(np.abs(x), np.abs(y))
            far |= ~(near | (x == y)) & ~(np.isnan(x) & np.isnan(y))
        differ &= far
    if not differ.any():
        return None
    i = int(np.argmax(differ))
    return f"{int(differ.sum())} of {a.size} elements differ; first at flat position {i}: {a[i]!r}, expected {e[i]!r}"


def expected(check: CheckCase) -> np.ndarray | GatherScatterError:
    """Return our kernel's output for ``check`` at its opset, or the error it raises (returned, not raised).

    On the kernels' NumPy paths unless compiled already (:func:`gather_scatter.kernels.numpy_paths`,
    the same bits): thousands of small cases of a hundred signatures would compile each one.
    """
    try:
        with np.errstate(all="ignore"), numpy_paths():
            return run_node(
                check.spec.op_type, check.case.inputs, check.case.attrs, opset=check.opset, domain=check.spec.domain
            )
    except GatherScatterError as exc:
        return exc


def classify(check: CheckCase, outcome: Outcome) -> tuple[str, str]:
    """Return (kind, detail) for the engine's ``outcome``: a finding kind, ``unsupported`` or ``agree``."""
    ours = expected(check)
    if outcome.kind in ("crash", "timeout", "unsupported"):
        return outcome.kind, outcome.message
    if isinstance(ours, GatherScatterError):
        if outcome.kind == "ok":
            return "accepted_invalid", f"we raise {type(ours).__name__}: {ours}; the engine returned a result"
        return "agree", ""
    if outcome.kind == "error":
        return "rejected_valid", f"the engine raised: {outcome.message}"
    if outcome.output is None:
        return "agree", ""  # accepted, but its output cannot be compared here
    diff = same(outcome.output, ours)
    if diff and first_wins_allowed(check):
        first = first_wins(check)
        if first is not None and same(outcome.output, first) is None:
            return "agree", ""
    return ("wrong_output", diff) if diff else ("agree", "")


def first_wins_allowed(check: CheckCase) -> bool:
    """ONNX leaves the winner among duplicate targets unspecified for reduction 'none'."""
    return check.spec.op_type in ("ScatterND", "ScatterElements", "Scatter") and check.case.attrs.get(
        "reduction", "none"
    ) in ("none", b"none")


def first_wins(check: CheckCase) -> np.ndarray | None:
    """Return the scatter with its updates applied in reverse order (the first of each duplicate wins).

    It is an answer as valid as ours where the text leaves the order open.
    """
    data, indices, updates = check.case.inputs
    if check.spec.op_type == "ScatterND":
        k = indices.shape[-1]
        n = indices.size // k if k else int(np.prod(indices.shape[:-1]))
        indices = indices.reshape(n, k)[::-1]
        updates = updates.reshape((n, *data.shape[k:]))[::-1]
    else:  # duplicates share every coordinate off the axis: reverse along it
        axis = check.case.attrs.get("axis", 0) % data.ndim
        indices, updates = np.flip(indices, axis), np.flip(updates, axis)
    flipped = CheckCase(
        check.spec, check.opset, V.Case(check.case.op, [data, indices, updates], check.case.attrs), check.kind
    )
    first = expected(flipped)
    return first if isinstance(first, np.ndarray) else None


def signature(check: CheckCase, kind: str) -> tuple:
    """Return what a shrunk case must keep to show the same finding.

    That is its kind and, where the spec requires an error, which error on which input (a
    smaller case with another fault is another finding).
    """
    ours = expected(check)
    return (kind, type(ours).__name__, ours.input) if isinstance(ours, GatherScatterError) else (kind,)


def run_one(worker: Worker, check: CheckCase) -> tuple[str, str]:
    """Run ``check`` on the engine of ``worker`` and return its (kind, detail), as :func:`classify`."""
    ours = expected(check)
    hint = (ours.shape, ours.dtype) if isinstance(ours, np.ndarray) else None
    return classify(check, worker.run(model_bytes(check), check.feeds(), hint))


def _versions(ops: list[str] | None) -> list[OpVersion]:
    chosen = [v for v in REGISTRY.values() if ops is None or v.op_type in ops or v.name in ops]
    return sorted(chosen, key=lambda v: (v.op_type, v.domain, v.since_version))


def _opsets(spec: OpVersion, opsets: list[int] | None) -> list[int]:
    """Return the opsets to run ``spec`` at.

    Its own, or each of the ai.onnx ``opsets`` where it is the version in effect (a version of
    another domain runs at its own).
    """
    if not opsets or spec.domain:
        return [spec.since_version]
    return [o for o in opsets if spec.since_version <= o <= _end(spec)]


class SelectionError(ValueError):
    """An operator or version that is in effect at none of the opsets asked for."""


def _end(spec: OpVersion) -> int:
    """Return the last opset at which ``spec`` is the version in effect."""
    newer = [
        v.since_version
        for v in REGISTRY.values()
        if (v.domain, v.op_type) == (spec.domain, spec.op_type) and v.since_version > spec.since_version
    ]
    return min([*newer, spec.removed_in or LATEST_OPSET[spec.domain] + 1]) - 1


def check_selection(ops: list[str] | None, opsets: list[int] | None) -> None:
    """Check that each of ``ops`` (an operator or version of ai.onnx) is in effect at one of ``opsets`` at least.

    Without this check, ``--op GatherND --opset 8`` ran nothing, silently.

    Raises
    ------
    SelectionError
        One of ``ops`` is in effect at none of ``opsets``; the message names the opsets where
        it is, and the versions there are at ``opsets``.
    """
    if not ops or not opsets:
        return
    for op in ops:
        specs = [v for v in _versions([op]) if not v.domain]  # other domains run at their own opsets
        if not specs or any(_opsets(spec, opsets) for spec in specs):
            continue
        names = "" if len(specs) == 1 and specs[0].name == op else f" ({', '.join(v.name for v in specs)})"
        low, high = specs[0].since_version, _end(specs[-1])
        where = f"opset {low}" if low == high else f"opsets {low} to {high}"
        present = "; ".join(
            f"opset {o} has {', '.join(v.name for v in _versions(None) if not v.domain and _opsets(v, [o]))}"
            for o in sorted(set(opsets))
        )
        shown = ", ".join(map(str, sorted(set(opsets))))
        raise SelectionError(
            f"--op {op} selects nothing at --opset {shown}: {op} is in effect at {where}{names}; {present}"
        )


def generate(ops: list[str] | None, opsets: list[int] | None, per_version: int, seed: int) -> Iterator[CheckCase]:
    """Yield ``per_version`` cases per operator version and opset, reproducible from ``seed``.

    They cycle through the data, index types and reductions it allows, every third one invalid.
    """
    for spec in _versions(ops):
        for opset in _opsets(spec, opsets):
            rng = np.random.default_rng([seed, zlib.crc32(f"{spec.name}@{opset}".encode())])
            types, index_types = sorted(spec.data_types), sorted(spec.index_types)
            valid = C.valid_cases(spec, rng, 1)
            for i in range(per_version):
                if i % 3 == 2:
                    j = i // 3
                    options = list(C.invalid_cases(spec, rng, types[j % len(types)], index_types[j % len(index_types)]))
                    # GatherBlockQuantized's rules taken in turn, so a few cases cover many
                    pick = j if spec.op_type == "GatherBlockQuantized" else int(rng.integers(len(options)))
                    kind, case, _ = options[pick % len(options)]
                    yield CheckCase(spec, opset, case, kind)
                    continue
                case = next(valid, None)
                if case is None:  # every combination drawn once: start over
                    valid = C.valid_cases(spec, rng, 1)
                    case = next(valid)
                yield CheckCase(spec, opset, case, "valid")
