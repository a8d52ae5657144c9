"""Operator versions as data: one frozen value per version, one registry, one resolution rule.

A difference between two versions is a difference in these values (attributes and their
defaults, allowed data types, allowed index types, accepted reductions), never an
``if opset >= N`` inside a kernel. ``tests/test_versions.py`` checks the ai.onnx rows against
``onnx.defs.get_all_schemas_with_history()``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, Mapping

import ml_dtypes
import numpy as np

from .errors import DTypeError, InvalidAttributeError, UnsupportedOpError

__all__ = ["LATEST_OPSET", "OpVersion", "REGISTRY", "Reduction", "onnx_type_name", "resolve"]

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
    }
)
_NAME_OF = {dt: name for name, dt in ONNX_TYPES.items()}

ALL_TYPES = frozenset(ONNX_TYPES)
TYPES_BEFORE_BFLOAT16 = ALL_TYPES - {"bfloat16"}
INT32_INT64 = frozenset({"int32", "int64"})
INT64 = frozenset({"int64"})

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
    return _NAME_OF.get(dtype)


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

    @property
    def name(self) -> str:
        """How messages name this version: ``GatherND-13``, ``com.microsoft.GatherND-1``."""
        prefix = f"{self.domain}." if self.domain else ""
        return f"{prefix}{self.op_type}-{self.since_version}"

    def check_dtype(self, input: str, dtype: Any) -> None:
        """Raise DTypeError unless ``dtype`` is allowed for ``input`` ('data', 'indices', 'updates')."""
        allowed = self.index_types if input == "indices" else self.data_types
        type_name = onnx_type_name(dtype)
        if type_name not in allowed:
            shown = f"tensor({type_name})" if type_name else f"NumPy dtype {np.dtype(dtype)}"
            raise DTypeError(
                f"{self.name}: {input} has type {shown}, which this version does not allow "
                f"(allowed: {', '.join(f'tensor({t})' for t in sorted(allowed))})",
                op=self.op_type,
                since_version=self.since_version,
                input=input,
                value=shown,
            )


def _v(op_type, since_version, data_types, index_types, attributes=None, reductions=(), domain=""):
    return OpVersion(
        op_type,
        since_version,
        data_types,
        index_types,
        MappingProxyType(dict(attributes or {})),
        reductions,
        domain,
    )


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
    _v("ScatterND", 16, ALL_TYPES, INT64, {"reduction": "none"}, ("none", "add", "mul")),
    _v("ScatterND", 18, ALL_TYPES, INT64, {"reduction": "none"}, ("none", "add", "mul", "max", "min")),
)

REGISTRY: Mapping[tuple[str, str, int], OpVersion] = MappingProxyType(
    {(v.domain, v.op_type, v.since_version): v for v in _VERSIONS}
)

# The version each public kernel implements (the newest of its operator).
GATHER = REGISTRY[("", "Gather", 13)]
GATHER_ND = REGISTRY[("", "GatherND", 13)]
SCATTER_ND = REGISTRY[("", "ScatterND", 18)]


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
    return usable[-1]


class Reduction(str, Enum):
    """ScatterND's ``reduction`` attribute, parsed strictly against the version's list."""

    NONE = "none"
    ADD = "add"
    MUL = "mul"
    MAX = "max"
    MIN = "min"

    @classmethod
    def parse(cls, spec: OpVersion, value: Any) -> "Reduction":
        if isinstance(value, bytes):  # onnx string attributes arrive as bytes
            value = value.decode(errors="backslashreplace")
        if isinstance(value, cls):
            value = value.value
        if value not in spec.reductions:
            raise InvalidAttributeError(
                f"{spec.name}: reduction = {value!r} is not accepted "
                f"(accepted: {', '.join(repr(r) for r in spec.reductions)})",
                op=spec.op_type, since_version=spec.since_version, input="reduction", value=value,
            )
        return cls(value)
