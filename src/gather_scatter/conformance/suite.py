"""Which cases the conformance suite holds, and what each one expects.

For every operator version of the registry (``_versions.REGISTRY``) the suite holds:

- ``cases_per_version`` random valid cases from the checker's generators (``check/cases.py``,
  ``check/quantized_cases.py``), cycling through every (data type, index type, reduction) the
  version allows, in an order where the first few dozen already cover every data type and
  index type;
- the targeted cases of :mod:`.targeted` (negative indices, empty indices, rank 5,
  ``batch_dims`` 2, duplicates under each reduction and float width, NaN under max/min,
  TensorScatter's circular wrap...);
- invalid cases from ``cases.invalid_cases`` / ``quantized_cases.invalid_cases`` (every kind
  of fault each version has, over its data types in turn), plus attribute values a version
  does not accept (a reduction before the version that added it, ``batch_dims`` on
  GatherND-11, an unknown TensorScatter mode).

Expected outputs are our kernels' (``run_node`` at the version's opset and domain); an invalid
case is kept only if ``run_node`` raises the error class its generator declares. No valid case
is one the spec leaves undefined (a scatter with reduction none whose updates meet). Each
version draws from its own generator, seeded by (seed, version name): a version's cases are
the same whichever other versions are selected.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from .. import errors
from ..check import case_values as V
from ..check import cases as C
from ..check import quantized_cases as Q
from ..check.runner import CheckCase, expected
from ..rules.versions import REGISTRY, OpVersion, onnx_type_name
from . import tags as T
from .targeted import _undefined, draw, targeted_cases

__all__ = [
    "DEFAULT_CASES_PER_VERSION",
    "ERROR_KINDS",
    "SuiteCase",
    "SuiteSelectionError",
    "build_suite",
    "select_versions",
]

DEFAULT_CASES_PER_VERSION = 150
"""Random valid cases per version at the default size (the targeted ones come on top)."""

RANDOM_ZERO_DIM = 0.03
"""The chance of each dim of a random case being 0 (the checker draws 0.08; here the targeted cases
hold the empty ones, and most random cases compute something)."""

ERROR_KINDS: dict[type, str] = {
    errors.IndexOutOfBoundsError: "bounds",
    errors.ShapeError: "shape",
    errors.DTypeError: "type",
    errors.InvalidAttributeError: "attribute",
    errors.ArityError: "arity",
}
"""The error.json ``kind`` of each error class an invalid case can raise."""


class SuiteSelectionError(ValueError):
    """An ``ops`` entry that names no operator or version of the registry, or a ``seed`` that is not an integer >= 0."""


def _check_seed(seed: object) -> int:
    """Return ``seed`` as an int; raise :class:`SuiteSelectionError` for anything but an integer >= 0.

    The suite seeds NumPy's generators with it, which take non-negative integers only (of any size).
    """
    import contextlib
    import operator

    value = None
    if not isinstance(seed, (bool, np.bool_)):
        with contextlib.suppress(TypeError):
            value = operator.index(seed)  # type: ignore[arg-type]
    if value is None or value < 0:
        raise SuiteSelectionError(f"seed must be an integer >= 0, got {seed!r}")
    return value


@dataclass
class SuiteCase:
    """One case of the suite: a version's case at its opset, with what it expects.

    Attributes
    ----------
    spec : OpVersion
        The operator version it tests.
    opset : int
        The opset of the version's domain the model imports (its ``since_version``).
    case : cases.Case
        The op, inputs (``case.constants`` are initializers) and attributes.
    kind : str
        ``valid``, or what the generator broke (``index out of bounds``...).
    result : ndarray or GatherScatterError
        Our kernel's output for a valid case, the error it raises for an invalid one.
    tags : list of str
        What it covers (:func:`.tags.tags_of`).
    tolerance : tuple of float, optional
        ``(rtol, atol)`` where a float reduction's rounding order, or a complex product's
        rounding, is left open (:func:`.tags.tolerance`); None: exact.
    name : str
        ``test_<op>_<version>_<what>_<n>``, unique in the suite.
    """

    spec: OpVersion
    opset: int
    case: V.Case
    kind: str
    result: np.ndarray | errors.GatherScatterError
    tags: list[str] = field(default_factory=list)
    tolerance: tuple[float, float] | None = None
    name: str = ""

    @property
    def valid(self) -> bool:
        """Whether the case has a result (else our kernel raises, and the spec requires it)."""
        return self.kind == "valid"

    @property
    def error_kind(self) -> str | None:
        """``bounds``, ``shape``, ``type``, ``attribute`` or ``arity`` for an invalid case; None for a valid one."""
        return None if self.valid else ERROR_KINDS[type(self.result)]


def _known() -> list[str]:
    names = set()
    for v in REGISTRY.values():
        names |= {v.op_type, v.name}
        if v.domain:
            names.add(f"{v.domain}.{v.op_type}")
    return sorted(names)


def select_versions(ops: Iterable[str] | None = None) -> list[OpVersion]:
    """Return the versions ``ops`` names, in the suite's order (domain, operator, version).

    Parameters
    ----------
    ops : iterable of str, optional
        Operators (``ScatterND``: every version, of every domain that has it), versions
        (``ScatterND-16``, ``com.microsoft.GatherND-1``) or domain-qualified operators
        (``com.microsoft.GatherND``). None or empty: every version of the registry.

    Raises
    ------
    SuiteSelectionError
        A name matching none of them; the message suggests the nearest names.
    """
    versions = sorted(REGISTRY.values(), key=lambda v: (v.domain, v.op_type, v.since_version))
    wanted = list(ops or [])
    if not wanted:
        return versions
    known = _known()
    for name in wanted:
        if name not in known:
            import difflib

            folded = {k.lower(): k for k in known}
            close = [folded[name.lower()]] if name.lower() in folded else difflib.get_close_matches(name, known, n=3)
            hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
            raise SuiteSelectionError(f"unknown operator or version {name!r}{hint}; choose from {', '.join(known)}")
    return [
        v for v in versions if {v.op_type, v.name, f"{v.domain}.{v.op_type}" if v.domain else v.op_type} & set(wanted)
    ]


def _combinations(spec: OpVersion) -> list[tuple[str, str, str | None]]:
    """Return the (data type, index type, reduction) the version allows, round-robin over data types.

    Any ``len(data types) * len(index types)`` consecutive entries hold every data type and
    every index type, so a small ``cases_per_version`` still covers all of them.
    """
    per_type = {}
    for t in sorted(spec.data_types):
        reductions = V.reductions_for(t, spec.reductions) if "reduction" in spec.attributes else [None]
        index_types = sorted(spec.index_types)
        per_type[t] = [
            (t, index_types[(i + j) % len(index_types)], r)
            for j, r in enumerate(reductions)
            for i in range(len(index_types))
        ]
    rounds = max(len(v) for v in per_type.values())
    return [per_type[t][i] for i in range(rounds) for t in per_type if i < len(per_type[t])]


def _random_valid(spec: OpVersion, rng: np.random.Generator, count: int) -> Iterable[V.Case]:
    if spec.op_type == "GatherBlockQuantized":
        for i in range(count):
            (t1, bits), t2, index = Q.COMBINATIONS[i % len(Q.COMBINATIONS)]
            yield Q.valid_case(rng, t1, bits, t2, index)
        return
    combos = _combinations(spec)
    for i in range(count):
        type_name, index, reduction = combos[i % len(combos)]
        for _ in range(3):  # an empty input most of the time drawn again: the targeted cases hold those
            case = draw(spec, rng, type_name, index, reduction, zero=RANDOM_ZERO_DIM)
            if all(a.size for a in case.inputs):
                break
        yield case


def _attribute_invalid(spec: OpVersion, rng: np.random.Generator) -> Iterable[tuple[str, V.Case, type]]:
    """Attribute values the version does not accept, though a later version (or none) does."""
    IAE = errors.InvalidAttributeError
    op = spec.op_type
    if op in T.SCATTERS:
        refused = [r for r in ("add", "mul", "max", "min") if r not in spec.reductions] + ["sum"]
        for r in refused[:2]:
            case = draw(spec, rng, "float", sorted(spec.index_types)[0], None, zero=0.0)
            yield f"reduction {r}", V.Case(op, case.inputs, {**case.attrs, "reduction": r}), IAE
    if op == "GatherND" and "batch_dims" not in spec.attributes:
        case = draw(spec, rng, "float", sorted(spec.index_types)[0], zero=0.0)
        yield "batch_dims on a version without it", V.Case(op, case.inputs, {"batch_dims": 0}), IAE
    if op in ("GatherElements", "ScatterElements", "Scatter"):
        case = draw(spec, rng, "float", sorted(spec.index_types)[-1], None, zero=0.0)
        rank = case.inputs[0].ndim
        yield "axis out of range", V.Case(op, case.inputs, {**case.attrs, "axis": rank}), IAE
    if op == "TensorScatter":
        case = C.tensor_scatter_case(rng, "float", "linear", with_write=True, zero=0.0)
        yield "mode wrap", V.Case(op, case.inputs, {**case.attrs, "mode": "wrap"}), IAE


def _invalid(spec: OpVersion, rng: np.random.Generator, count: int) -> Iterable[tuple[str, V.Case, type]]:
    """About ``count`` invalid cases: every fault the checker's generator has, over the data types in turn."""
    yield from _attribute_invalid(spec, rng)
    types, index_types = sorted(spec.data_types), sorted(spec.index_types)
    made, j = 0, 0
    while made < count:
        options = list(C.invalid_cases(spec, rng, types[j % len(types)], index_types[j % len(index_types)]))
        take = options if j == 0 else options[: count - made]
        yield from take
        made += len(take)
        j += 1


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


_FEATURES = (
    ("circular_wrap_batch_ge_max_seq", "circular_wrap"),
    ("nan_max_min", "nan"),
    ("duplicates_with_reduction", "duplicates"),
    ("batch_dims_2", "batch_dims_2"),
    ("rank_5", "rank_5"),
    ("empty_indices", "empty_indices"),
    ("out_of_range_zero_rows", "out_of_range"),
    ("partial_block", "partial_block"),
    ("negative_indices", "negative_indices"),
    ("batch_dims_1", "batch_dims_1"),
    ("empty_data", "empty_data"),
    ("rank_0_indices", "rank_0_indices"),
)


def _what(suite_case: SuiteCase) -> str:
    """Return the name's short description: data type, reduction, the most specific feature."""
    data = suite_case.case.inputs[0]
    parts = [onnx_type_name(data.dtype) or _slug(str(data.dtype))]
    if not suite_case.valid:
        return "_".join([*parts, _slug(suite_case.kind)])
    reduction = T.reduction_of(suite_case.spec, suite_case.case.attrs)
    if reduction not in (None, "none"):
        parts.append(reduction)
    for tag, word in _FEATURES:
        if tag in suite_case.tags:
            parts.append(word)
            break
    return "_".join(parts)


def _file_op(spec: OpVersion) -> str:
    return (f"{spec.domain}_{spec.op_type}" if spec.domain else spec.op_type).replace(".", "_").lower()


def _version_cases(spec: OpVersion, seed: int, per_version: int) -> list[SuiteCase]:
    rng = np.random.default_rng([seed, zlib.crc32(f"conformance:{spec.name}".encode())])
    opset = spec.since_version
    made: list[SuiteCase] = []
    valid = list(_random_valid(spec, rng, per_version)) + list(targeted_cases(spec, rng))
    for case in valid:
        if _undefined(spec, case):  # a generator's slip; never a valid case
            continue
        result = expected(CheckCase(spec, opset, case, "valid"))
        if not isinstance(result, np.ndarray):
            raise AssertionError(f"{spec.name}: a generated valid case raised {result!r}: {case.describe()}")
        suite_case = SuiteCase(spec, opset, case, "valid", result, T.tags_of(spec, case))
        suite_case.tolerance = T.tolerance(spec, case)
        if suite_case.tolerance is not None and not _order_free_within(suite_case):
            continue  # overflow or NaN that depends on the order of the updates: no tolerance says it
        made.append(suite_case)
    invalid_count = max(12, math.ceil(per_version / 6))
    for kind, case, error_class in _invalid(spec, rng, invalid_count):
        result = expected(CheckCase(spec, opset, case, kind))
        if type(result) is not error_class:
            continue  # the generator's fault is not the one run_node reports: not a case to publish
        assert isinstance(result, errors.GatherScatterError)
        made.append(
            SuiteCase(
                spec, opset, case, kind, result, T.tags_of(spec, case, valid=False, error_kind=ERROR_KINDS[error_class])
            )
        )
    for n, suite_case in enumerate(made):
        suite_case.name = f"test_{_file_op(spec)}_{spec.since_version}_{_what(suite_case)}_{n}"
    return made


def _order_free_within(suite_case: SuiteCase) -> bool:
    """Whether the updates applied in reverse order land within the case's tolerance of our output.

    A case where they do not (an overflow to infinity one order avoids) has no answer a
    tolerance can state, and is left out.
    """
    from ..check.runner import first_wins

    assert suite_case.tolerance is not None and isinstance(suite_case.result, np.ndarray)
    reverse = first_wins(CheckCase(suite_case.spec, suite_case.opset, suite_case.case, "valid"))
    if reverse is None:
        return False
    rtol, atol = suite_case.tolerance
    ours = suite_case.result.astype(np.complex128 if suite_case.result.dtype.kind == "c" else np.float64)
    other = reverse.astype(ours.dtype)
    return bool(np.allclose(other, ours, rtol=rtol, atol=atol, equal_nan=True))


def build_suite(
    *, seed: int = 0, ops: Iterable[str] | None = None, cases_per_version: int | None = None
) -> list[SuiteCase]:
    """Return the suite's cases: per version, its valid cases then its invalid ones.

    Parameters
    ----------
    seed : int, default 0
        The seed; the same seed gives the same cases (and files) every time.
    ops : iterable of str, optional
        The operators or versions to include (:func:`select_versions`); None: all.
    cases_per_version : int, optional
        Random valid cases per version (default :data:`DEFAULT_CASES_PER_VERSION`); the
        targeted cases come on top, and ``max(12, cases_per_version / 6)`` invalid ones (at
        least every fault kind of the version once).

    Returns
    -------
    list of SuiteCase
        Ordered by version (domain, operator, since_version), valid cases first.

    Raises
    ------
    SuiteSelectionError
        An ``ops`` entry names nothing in the registry, or ``seed`` is not an integer >= 0.
    ValueError
        ``cases_per_version`` below 0.
    """
    seed = _check_seed(seed)
    per_version = DEFAULT_CASES_PER_VERSION if cases_per_version is None else int(cases_per_version)
    if per_version < 0:
        raise ValueError(f"cases_per_version must be >= 0, got {per_version}")
    out: list[SuiteCase] = []
    for spec in select_versions(ops):
        out.extend(_version_cases(spec, seed, per_version))
    return out
