"""Operator versions as data: one frozen value per version, one registry, one resolution rule.

A difference between two versions is a difference in these values (attributes and their
defaults, allowed data types, allowed index types, accepted reductions), never an
``if opset >= N`` inside a kernel. ``tests/test_versions.py`` checks the ai.onnx rows against
``onnx.defs.get_all_schemas_with_history()``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, TypeVar

import ml_dtypes
import numpy as np

from ..errors import DTypeError, GatherScatterError, InvalidAttributeError, UnsupportedOpError

__all__ = [
    "FAMILY",
    "LATEST_OPSET",
    "REGISTRY",
    "Mode",
    "OpVersion",
    "Reduction",
    "first_accepting",
    "fix_hint",
    "later_versions",
    "onnx_type_name",
    "resolve",
]

_E = TypeVar("_E", bound=GatherScatterError)

# ONNX tensor element type name -> NumPy dtype. Strings are object arrays of str.
ONNX_TYPES: Mapping[str, np.dtype] = MappingProxyType(
    {
        "float": np.dtype(np.float32),
        "double": np.dtype(np.float64),
        "float16": np.dtype(np.float16),
        "bfloat16": np.dtype(ml_dtypes.bfloat16),
        "int8": np.dtype(np.int8),
        "int16": np.dtype(np.int16),
        "int32": np.dtype(np.int32),
        "int64": np.dtype(np.int64),
        "uint8": np.dtype(np.uint8),
        "uint16": np.dtype(np.uint16),
        "uint32": np.dtype(np.uint32),
        "uint64": np.dtype(np.uint64),
        "bool": np.dtype(np.bool_),
        "string": np.dtype(object),
        "complex64": np.dtype(np.complex64),
        "complex128": np.dtype(np.complex128),
        # TensorScatter-24's low-precision types (ml_dtypes stores 4-bit values one per byte).
        "float8e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
        "float8e4m3fnuz": np.dtype(ml_dtypes.float8_e4m3fnuz),
        "float8e5m2": np.dtype(ml_dtypes.float8_e5m2),
        "float8e5m2fnuz": np.dtype(ml_dtypes.float8_e5m2fnuz),
        "float8e8m0": np.dtype(ml_dtypes.float8_e8m0fnu),
        "int4": np.dtype(ml_dtypes.int4),
        "uint4": np.dtype(ml_dtypes.uint4),
        "float4e2m1": np.dtype(ml_dtypes.float4_e2m1fn),
    }
)
# Keyed by the dtype's name, not the dtype: torch.compile cannot compare NumPy dtypes as dict
# keys (ml_dtypes' float8 ones); the dtype is compared too, so only the same type matches. A
# plain dict: dynamo refuses to read a mappingproxy once the traced code has changed any dict.
_NAME_OF = {dt.name: (name, dt) for name, dt in ONNX_TYPES.items()}

LOW_PRECISION_TYPES = frozenset(
    {"float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float8e8m0", "int4", "uint4", "float4e2m1"}
)
ALL_TYPES = frozenset(ONNX_TYPES) - LOW_PRECISION_TYPES  # the 16 of every op but TensorScatter
TYPES_BEFORE_BFLOAT16 = ALL_TYPES - {"bfloat16"}
TENSOR_SCATTER_TYPES = ALL_TYPES | LOW_PRECISION_TYPES
INT32_INT64 = frozenset({"int32", "int64"})
INT64 = frozenset({"int64"})
# com.microsoft GatherBlockQuantized-1: data and zero_points (T1), scales and output (T2).
QUANTIZED_TYPES = frozenset(
    {"int4", "uint4", "uint8", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1"}
)
DEQUANTIZED_TYPES = frozenset({"float", "float16", "bfloat16"})

# The newest opset of each domain whose operator set this table was checked against.
LATEST_OPSET: Mapping[str, int] = MappingProxyType({"": 28, "com.microsoft": 1})


def onnx_type_name(dtype: Any) -> str | None:
    """ONNX element type name of a NumPy dtype (any byte order), or None if it has none.

    Fixed-width NumPy strings (``U``/``S``) count as ``string``, like object arrays.
    """
    dtype = np.dtype(dtype)
    if dtype.kind in "US":
        return "string"
    if dtype.byteorder not in "=|":
        dtype = dtype.newbyteorder("=")
    name, same = _NAME_OF.get(dtype.name, (None, None))
    return name if same == dtype else None


@dataclass(frozen=True)
class OpVersion:
    """One version of one operator: what it accepts, nothing about how it computes."""

    op_type: str
    since_version: int
    data_types: frozenset[str]
    index_types: frozenset[str]
    attributes: Mapping[str, Any] = field(default_factory=dict)  # name -> default value
    reductions: tuple[str, ...] = ()
    domain: str = ""
    modes: tuple[str, ...] = ()  # TensorScatter's accepted ``mode`` values
    removed_in: int | None = None  # the first opset at which the operator no longer exists
    replaced_by: str | None = None  # what a model uses there instead
    # Inputs with a type set of their own (GatherBlockQuantized: scales are T2, zero_points T1)
    input_types: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """How messages name this version: ``GatherND-13``, ``com.microsoft.GatherND-1``."""
        prefix = f"{self.domain}." if self.domain else ""
        return f"{prefix}{self.op_type}-{self.since_version}"

    def error(self, cls: type[_E], message: str, **fields: Any) -> _E:
        """The error ``cls`` about this version: its message is ``"<name>: <message>"``
        (``"GatherND-13: indices[0] = 5 is out of bounds ..."``) and it carries ``op`` and
        ``since_version`` besides ``fields`` (``input``, ``position``, ``value``, ...), so every
        error an operator raises reads and describes itself alike. Returned, not raised:
        ``raise spec.error(ShapeError, "...", input="indices")``.
        """
        return cls(f"{self.name}: {message}", op=self.op_type, since_version=self.since_version, **fields)

    def refuses(self, attrs: Mapping[str, Any]) -> str | None:
        """The first attribute of ``attrs`` (name -> value) this version does not accept: a
        name it lacks, or a string value outside its list (``reduction``, ``mode``); None if
        it accepts them all. Nothing is raised: the caller decides.
        """
        for name, value in attrs.items():
            if name not in self.attributes:
                return name
            choices = _CHOICES.get(name)
            if choices is not None and choice_value(value) not in getattr(self, choices):
                return name
        return None

    def check_dtype(self, input: str, dtype: Any) -> None:
        """Raise DTypeError unless ``dtype`` is allowed for ``input``: an index input
        ('indices', 'write_indices') checks the index types, one of ``input_types`` its own set,
        any other the data types.
        """
        allowed = self.input_types.get(input) or (self.index_types if input in INDEX_INPUTS else self.data_types)
        type_name = onnx_type_name(dtype)
        if type_name not in allowed:
            shown = f"tensor({type_name})" if type_name else f"NumPy dtype {np.dtype(dtype)}"
            raise self.error(
                DTypeError,
                f"{input} has type {shown}, which this version does not allow "
                f"(allowed: {', '.join(f'tensor({t})' for t in sorted(allowed))})",
                input=input,
                value=shown,
            )


INDEX_INPUTS = frozenset({"indices", "write_indices"})
# The string attributes, and the OpVersion field that lists the values each version accepts.
_CHOICES = MappingProxyType({"reduction": "reductions", "mode": "modes"})


def choice_value(value: Any) -> Any:
    """A string attribute's value as str: onnx gives bytes, callers may pass an Enum member."""
    if isinstance(value, bytes):
        return value.decode(errors="backslashreplace")
    if isinstance(value, Enum):
        return value.value
    return value


def _v(op_type, since_version, data_types, index_types, attributes=None, reductions=(), domain="", **more):
    return OpVersion(
        op_type,
        since_version,
        data_types,
        index_types,
        MappingProxyType(dict(attributes or {})),
        reductions,
        domain,
        **more,
    )


_NONE_ADD_MUL = ("none", "add", "mul")
_ALL_REDUCTIONS = ("none", "add", "mul", "max", "min")


_VERSIONS = (
    _v("Gather", 1, TYPES_BEFORE_BFLOAT16, INT32_INT64, {"axis": 0}),
    _v("Gather", 11, TYPES_BEFORE_BFLOAT16, INT32_INT64, {"axis": 0}),
    _v("Gather", 13, ALL_TYPES, INT32_INT64, {"axis": 0}),
    _v("GatherND", 11, TYPES_BEFORE_BFLOAT16, INT64),
    _v("GatherND", 12, TYPES_BEFORE_BFLOAT16, INT64, {"batch_dims": 0}),
    _v("GatherND", 13, ALL_TYPES, INT64, {"batch_dims": 0}),
    _v("GatherND", 1, TYPES_BEFORE_BFLOAT16, INT32_INT64, domain="com.microsoft"),
    _v("ScatterND", 11, TYPES_BEFORE_BFLOAT16, INT64, reductions=("none",)),
    _v("ScatterND", 13, ALL_TYPES, INT64, reductions=("none",)),
    _v("ScatterND", 16, ALL_TYPES, INT64, {"reduction": "none"}, _NONE_ADD_MUL),
    _v("ScatterND", 18, ALL_TYPES, INT64, {"reduction": "none"}, _ALL_REDUCTIONS),
    _v("GatherElements", 11, TYPES_BEFORE_BFLOAT16, INT32_INT64, {"axis": 0}),
    _v("GatherElements", 13, ALL_TYPES, INT32_INT64, {"axis": 0}),
    _v("ScatterElements", 11, TYPES_BEFORE_BFLOAT16, INT32_INT64, {"axis": 0}, ("none",)),
    _v("ScatterElements", 13, ALL_TYPES, INT32_INT64, {"axis": 0}, ("none",)),
    _v("ScatterElements", 16, ALL_TYPES, INT32_INT64, {"axis": 0, "reduction": "none"}, _NONE_ADD_MUL),
    _v("ScatterElements", 18, ALL_TYPES, INT32_INT64, {"axis": 0, "reduction": "none"}, _ALL_REDUCTIONS),
    _v(
        "Scatter",
        9,
        TYPES_BEFORE_BFLOAT16,
        INT32_INT64,
        {"axis": 0},
        ("none",),
        removed_in=11,
        replaced_by="ScatterElements",
    ),
    _v("TensorScatter", 24, TENSOR_SCATTER_TYPES, INT64, {"axis": -2, "mode": "linear"}, modes=("linear", "circular")),
    _v(
        "GatherBlockQuantized",
        1,
        QUANTIZED_TYPES,
        INT32_INT64,
        {"gather_axis": 0, "quantize_axis": 1, "block_size": 128, "bits": 4},
        domain="com.microsoft",
        input_types=MappingProxyType({"scales": DEQUANTIZED_TYPES, "zero_points": QUANTIZED_TYPES}),
    ),
)

REGISTRY: Mapping[tuple[str, str, int], OpVersion] = MappingProxyType(
    {(v.domain, v.op_type, v.since_version): v for v in _VERSIONS}
)
#: The family: ``(domain, op_type)`` of every operator in the registry, domain ``""`` for ai.onnx.
FAMILY: frozenset[tuple[str, str]] = frozenset((v.domain, v.op_type) for v in _VERSIONS)

# The version each public kernel implements (the newest of its operator).
GATHER = REGISTRY[("", "Gather", 13)]
GATHER_ND = REGISTRY[("", "GatherND", 13)]
SCATTER_ND = REGISTRY[("", "ScatterND", 18)]
GATHER_ELEMENTS = REGISTRY[("", "GatherElements", 13)]
SCATTER_ELEMENTS = REGISTRY[("", "ScatterElements", 18)]
TENSOR_SCATTER = REGISTRY[("", "TensorScatter", 24)]
GATHER_BLOCK_QUANTIZED = REGISTRY[("com.microsoft", "GatherBlockQuantized", 1)]

# The versions the family's generic sweeps make cases for (tests/strategies.py and the test
# sweeps: data, indices, updates of one type): every version but GatherBlockQuantized, whose
# inputs differ (T1 data, T2 scales). The checker generates cases for every version of REGISTRY:
# GatherBlockQuantized's come from check/quantized_cases.py (issue 27).
SWEPT: Mapping[tuple[str, str, int], OpVersion] = MappingProxyType(
    {key: v for key, v in REGISTRY.items() if v is not GATHER_BLOCK_QUANTIZED}
)


def normalize_domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


def resolve(op_type: str, opset: int, domain: str = "") -> OpVersion:
    """The version of ``op_type`` in effect at ``opset``: the newest with ``since_version <= opset``.

    Raises
    ------
    UnsupportedOpError
        Unknown domain or operator, an opset below the operator's first version, or an opset
        newer than the newest this table was checked against.
    """
    if type(op_type) is str and type(opset) is int and type(domain) is str:
        key = (op_type, opset, domain)
        spec = _RESOLVED.get(key)
        if spec is None:  # a refusal raises here, and is never remembered
            spec = _RESOLVED[key] = _resolve(op_type, opset, domain)
        return spec
    return _resolve(op_type, opset, domain)


# What resolve answered, by (op_type, opset, domain): a few hundred at most (the registry's
# operators at the opsets it knows), so a node's version costs a dict lookup, not a scan.
_RESOLVED: dict[tuple[str, int, str], OpVersion] = {}


def _resolve(op_type: Any, opset: Any, domain: Any) -> OpVersion:
    domain = normalize_domain(domain)
    shown_domain = domain or "ai.onnx"
    if domain not in LATEST_OPSET:
        known = ", ".join(d or "ai.onnx" for d in LATEST_OPSET)
        raise UnsupportedOpError(
            f"domain {domain!r} is not supported (known: {known})", op=op_type, input="domain", value=domain
        )
    candidates = sorted(
        (v for (d, op, _), v in REGISTRY.items() if d == domain and op == op_type),
        key=lambda v: v.since_version,
    )
    if not candidates:
        ops = sorted({op for (d, op, _) in REGISTRY if d == domain})
        raise UnsupportedOpError(
            f"operator {op_type!r} of domain {shown_domain} is not supported (supported: {', '.join(ops)})",
            op=op_type,
            input="op_type",
            value=op_type,
        )
    if isinstance(opset, bool) or not isinstance(opset, (int, np.integer)):
        raise UnsupportedOpError(
            f"{op_type}: opset must be an int, got {opset!r}", op=op_type, input="opset", value=opset
        )
    latest = LATEST_OPSET[domain]
    if opset > latest:
        raise UnsupportedOpError(
            f"{op_type}: opset {opset} of domain {shown_domain} is newer than the newest this library "
            f"knows ({latest}); an operator may have changed there",
            op=op_type,
            input="opset",
            value=int(opset),
            valid_range=(candidates[0].since_version, latest),
        )
    usable = [v for v in candidates if v.since_version <= opset]
    if not usable:
        raise UnsupportedOpError(
            f"{op_type}: opset {opset} of domain {shown_domain} predates the operator "
            f"(first version {candidates[0].since_version})",
            op=op_type,
            input="opset",
            value=int(opset),
            valid_range=(candidates[0].since_version, latest),
        )
    spec = usable[-1]
    if spec.removed_in is not None and opset >= spec.removed_in:
        raise UnsupportedOpError(
            f"{op_type}: opset {opset} of domain {shown_domain} has no {op_type}: it was removed at "
            f"opset {spec.removed_in} (its last version, {spec.name}, exists at opsets "
            f"{spec.since_version}-{spec.removed_in - 1}); use {spec.replaced_by}, which replaces it",
            op=op_type,
            input="opset",
            value=int(opset),
            valid_range=(spec.since_version, spec.removed_in - 1),
        )
    return spec


def later_versions(spec: OpVersion) -> list[OpVersion]:
    """The versions of ``spec``'s operator (same domain) after it, oldest first."""
    return sorted(
        (
            v
            for v in REGISTRY.values()
            if (v.domain, v.op_type) == (spec.domain, spec.op_type) and v.since_version > spec.since_version
        ),
        key=lambda v: v.since_version,
    )


def first_accepting(spec: OpVersion, attrs: Mapping[str, Any]) -> OpVersion | None:
    """The earliest version of ``spec``'s operator after ``spec`` that accepts every attribute
    and value of ``attrs`` (see :meth:`OpVersion.refuses`), or None if none does.

    This is how an off-spec node is read with ``strict=False``: ScatterElements at opset 17
    (ScatterElements-16) with ``reduction='max'`` runs as ScatterElements-18.
    """
    return next((v for v in later_versions(spec) if v.refuses(attrs) is None), None)


def fix_hint(later: OpVersion) -> str:
    """The way forward an attribute error names when ``later`` (see :func:`first_accepting`)
    accepts what the node's version refuses.
    """
    return (
        f"re-export the model with opset {later.since_version} or later, or pass strict=False "
        f"to run the node as {later.name}"
    )


def _parse_choice(cls, spec: OpVersion, name: str, accepted: tuple[str, ...], value: Any):
    """``value`` (str, bytes as onnx gives string attributes, or a member) as a member of
    ``cls``; InvalidAttributeError listing ``accepted`` for anything else (and naming the
    later version that accepts it, if one does).
    """
    value = choice_value(value)
    if value not in accepted:
        later = first_accepting(spec, {name: value})
        fix = f"; {value!r} exists from {later.name}: {fix_hint(later)}" if later else ""
        raise spec.error(
            InvalidAttributeError,
            f"{name} = {value!r} is not accepted (accepted: {', '.join(map(repr, accepted))}){fix}",
            input=name,
            value=value,
        )
    return cls(value)


class Reduction(str, Enum):
    """The scatters' ``reduction`` attribute, parsed strictly against the version's list."""

    NONE = "none"
    ADD = "add"
    MUL = "mul"
    MAX = "max"
    MIN = "min"

    @classmethod
    def parse(cls, spec: OpVersion, value: Any) -> Reduction:
        return _parse_choice(cls, spec, "reduction", spec.reductions, value)


class Mode(str, Enum):
    """TensorScatter's ``mode`` attribute, parsed strictly against the version's list."""

    LINEAR = "linear"
    CIRCULAR = "circular"

    @classmethod
    def parse(cls, spec: OpVersion, value: Any) -> Mode:
        return _parse_choice(cls, spec, "mode", spec.modes, value)
