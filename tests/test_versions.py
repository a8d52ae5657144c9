"""The version table against onnx's schemas, the resolution rule, and version gating.

(a) Every ai.onnx Gather/GatherND/ScatterND schema in ``onnx.defs.get_all_schemas_with_history()``
    has a registry row with the same since_version, attributes and defaults, data types and
    index types, and the registry has no row onnx lacks: a spec drift fails here.
(b) ``resolve`` (and ``run_node``, through the version named in its errors) picks the newest
    version with ``since_version <= opset``, the same one ``onnx.defs.get_schema`` picks.
(c) Each version refuses what it lacks (attributes, reductions, types, ops, domains, opsets)
    with the error class, message and fields of the table; the message names the later
    version that accepts it, if one does.
(d) ``strict=False`` runs an off-spec node as the earliest later version that accepts its
    attributes (the registry's :func:`first_accepting`), with one OffSpecWarning; nothing else
    changes. Node arity (ArityError) and attributes given as ``onnx.AttributeProto``.
"""

from __future__ import annotations

import re
import warnings

import ml_dtypes
import numpy as np
import pytest
from error_check import assert_error
from onnx import defs, helper

from gather_scatter import (
    ArityError,
    DTypeError,
    IndexOutOfBoundsError,
    InvalidAttributeError,
    OffSpecWarning,
    ShapeError,
    UnsupportedOpError,
    gather,
    gather_elements,
    gather_nd,
    infer_shape,
    run_node,
    scatter_elements,
    scatter_nd,
    tensor_scatter,
)
from gather_scatter.rules.versions import LATEST_OPSET, REGISTRY, first_accepting, resolve

OPS = ("Gather", "GatherND", "ScatterND", "GatherElements", "ScatterElements", "Scatter", "TensorScatter")
LATEST = LATEST_OPSET[""]
# Each op's (data, index, data-typed second input) names in its schema.
INPUTS = {op: ("data", "indices", "updates") for op in OPS} | {"TensorScatter": ("past_cache", "write_indices", "update")}

# -- (a) the table against onnx's schemas ---------------------------------------------------

ALL_SCHEMAS = [s for s in defs.get_all_schemas_with_history() if s.domain in ("", "ai.onnx") and s.name in OPS]
# A deprecated schema (Scatter-11) marks where an operator stops existing: no row, a removed_in.
SCHEMAS = {(s.name, s.since_version): s for s in ALL_SCHEMAS if not s.deprecated}
REMOVED = {s.name: s.since_version for s in ALL_SCHEMAS if s.deprecated}
OURS = {(op, since): v for (domain, op, since), v in REGISTRY.items() if domain == "" and op in OPS}


def _type_names(schema, input_name: str) -> frozenset[str]:
    """The element types an input accepts: its type constraint's list, or its fixed type."""
    (type_str,) = [i.type_str for i in schema.inputs if i.name == input_name]
    constraints = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    allowed = constraints.get(type_str, [type_str])
    return frozenset(re.fullmatch(r"tensor\((\w+)\)", t).group(1) for t in allowed)


def _defaults(schema) -> dict:
    values = {}
    for name, attr in schema.attributes.items():
        value = helper.get_attribute_value(attr.default_value)
        values[name] = value.decode() if isinstance(value, bytes) else value
    return values


def test_every_onnx_schema_has_a_registry_row():
    missing = sorted(set(SCHEMAS) - set(OURS))
    assert not missing, f"onnx has versions the registry lacks: {missing}"


def test_every_registry_row_has_an_onnx_schema():
    extra = sorted(set(OURS) - set(SCHEMAS))
    assert not extra, f"registry rows onnx does not define: {extra}"


@pytest.mark.parametrize("key", sorted(SCHEMAS), ids=[f"{op}-{v}" for op, v in sorted(SCHEMAS)])
def test_registry_row_matches_onnx_schema(key):
    schema, ours = SCHEMAS[key], OURS[key]
    assert (ours.op_type, ours.since_version, ours.domain) == (key[0], key[1], "")
    assert dict(ours.attributes) == _defaults(schema)
    data, index, second = INPUTS[key[0]]
    assert ours.data_types == _type_names(schema, data)
    assert ours.index_types == _type_names(schema, index)
    assert ours.removed_in == REMOVED.get(key[0])
    if second in {i.name for i in schema.inputs}:
        assert _type_names(schema, second) == _type_names(schema, data)
    # The accepted values of string attributes are only in their text: "'none': ... 'add': ..."
    # (ScatterND), "`none` (default)... `add`" (ScatterElements), "`linear` and `circular`".
    if "reduction" in schema.attributes:
        described = re.findall(r"['`](none|add|mul|max|min)['`]", schema.attributes["reduction"].description)
        assert set(ours.reductions) == set(described)
    elif key[0] in ("ScatterND", "ScatterElements", "Scatter"):
        assert ours.reductions == ("none",)
    if "mode" in schema.attributes:
        described = re.findall(r"`(\w+)`", schema.attributes["mode"].description)
        assert set(ours.modes) == set(described) - {"max_sequence_length"}


@pytest.mark.parametrize("op", OPS)
def test_resolution_agrees_with_onnx_get_schema_at_every_opset(op):
    first = min(v for name, v in SCHEMAS if name == op)
    for opset in range(first, min(LATEST, defs.onnx_opset_version()) + 1):
        schema = defs.get_schema(op, opset, "")
        if schema.deprecated:  # gone from here on: ours refuses it, naming its replacement
            with pytest.raises(UnsupportedOpError, match="removed at opset"):
                resolve(op, opset)
        else:
            assert resolve(op, opset).since_version == schema.since_version, opset


def test_latest_opset_covers_every_version_and_onnx_knows_it():
    assert LATEST >= max(since for _, since in OURS)
    assert LATEST <= defs.onnx_opset_version()
    assert LATEST_OPSET["com.microsoft"] >= 1


def test_com_microsoft_gathernd_row():
    # com.microsoft-GatherND-1.md.txt: int32 or int64 indices, no attributes (no batch_dims);
    # spec/README.md: T as ai.onnx before bfloat16.
    row = REGISTRY[("com.microsoft", "GatherND", 1)]
    assert row.index_types == {"int32", "int64"}
    assert dict(row.attributes) == {}
    assert row.data_types == OURS[("GatherND", 11)].data_types
    assert sorted(k for k in REGISTRY if k[0] == "com.microsoft") == [
        ("com.microsoft", "GatherBlockQuantized", 1),
        ("com.microsoft", "GatherND", 1),
    ]


def test_com_microsoft_gather_block_quantized_row_matches_onnxruntime_schema():
    """The row's per-input types and attribute defaults are onnxruntime's registry's (issue 27)."""
    pybind = pytest.importorskip("onnxruntime.capi.onnxruntime_pybind11_state")
    from onnx import AttributeProto

    (schema,) = [s for s in pybind.get_all_operator_schema() if (s.domain, s.name) == ("com.microsoft", "GatherBlockQuantized")]
    row = REGISTRY[("com.microsoft", "GatherBlockQuantized", 1)]
    assert schema.since_version == row.since_version == 1
    allowed = {t.type_param_str: {n[len("tensor("):-1] for n in t.allowed_type_strs} for t in schema.type_constraints}
    by_input = {i.name: allowed[i.typeStr] for i in schema.inputs}
    assert by_input == {"data": row.data_types, "indices": row.index_types, "scales": row.input_types["scales"],
                        "zero_points": row.input_types["zero_points"]}
    defaults = {name: AttributeProto.FromString(a._default_value).i for name, a in schema.attributes.items()}
    assert defaults == dict(row.attributes)


# -- (b) resolution ---------------------------------------------------------------------------

# (op, domain, opsets, expected since_version)
RESOLUTION = [
    ("Gather", "", range(1, 11), 1),
    ("Gather", "", range(11, 13), 11),
    ("Gather", "", range(13, LATEST + 1), 13),
    ("GatherND", "", [11], 11),
    ("GatherND", "", [12], 12),
    ("GatherND", "", range(13, LATEST + 1), 13),
    ("ScatterND", "", range(11, 13), 11),
    ("ScatterND", "", range(13, 16), 13),
    ("ScatterND", "", range(16, 18), 16),
    ("ScatterND", "", range(18, LATEST + 1), 18),
    ("GatherND", "com.microsoft", [1], 1),
    ("GatherElements", "", range(11, 13), 11),
    ("GatherElements", "", range(13, LATEST + 1), 13),
    ("ScatterElements", "", range(11, 13), 11),
    ("ScatterElements", "", range(13, 16), 13),
    ("ScatterElements", "", range(16, 18), 16),
    ("ScatterElements", "", range(18, LATEST + 1), 18),
    ("Scatter", "", range(9, 11), 9),
]
RESOLUTION_ROWS = [(op, opset, domain, v) for op, domain, opsets, v in RESOLUTION for opset in opsets]

# One out-of-bounds call per op: the error names the version run_node used.
_OOB_INPUTS = {
    "Gather": [np.arange(3.0), np.array([3], dtype=np.int64)],
    "GatherND": [np.arange(3.0), np.array([[3]], dtype=np.int64)],
    "ScatterND": [np.arange(3.0), np.array([[3]], dtype=np.int64), np.array([1.0])],
    "GatherElements": [np.arange(3.0), np.array([3], dtype=np.int64)],
    "ScatterElements": [np.arange(3.0), np.array([3], dtype=np.int64), np.array([1.0])],
    "Scatter": [np.arange(3.0), np.array([3], dtype=np.int64), np.array([1.0])],
}


@pytest.mark.parametrize(
    ("op", "opset", "domain", "since"),
    RESOLUTION_ROWS,
    ids=[f"{d + '.' if d else ''}{op}@{opset}->{v}" for op, opset, d, v in RESOLUTION_ROWS],
)
def test_resolution(op, opset, domain, since):
    version = resolve(op, opset, domain)
    assert (version.op_type, version.domain, version.since_version) == (op, domain, since)
    if domain == "":
        assert resolve(op, opset, "ai.onnx") is version
    with pytest.raises(IndexOutOfBoundsError) as info:
        run_node(op, _OOB_INPUTS[op], opset=opset, domain=domain)
    prefix = f"{domain}.{op}" if domain else op
    assert str(info.value).startswith(f"{prefix}-{since}: indices[")
    assert (info.value.op, info.value.since_version) == (op, since)


# -- (c) version gating through run_node ------------------------------------------------------

_F = np.arange(4.0)  # float64 data
_BF16 = np.arange(4).astype(ml_dtypes.bfloat16)
_I64_1 = np.array([1], dtype=np.int64)
_I64_11 = np.array([[1]], dtype=np.int64)
_I32_11 = np.array([[1]], dtype=np.int32)
_ALLOWED_NO_BF16 = re.escape(
    "(allowed: tensor(bool), tensor(complex128), tensor(complex64), tensor(double), tensor(float), "
    "tensor(float16), tensor(int16), tensor(int32), tensor(int64), tensor(int8), tensor(string), "
    "tensor(uint16), tensor(uint32), tensor(uint64), tensor(uint8))"
)


def _row(id, op_type, opset, inputs, attrs, cls, pattern, /, domain="", **fields):
    return pytest.param(op_type, opset, domain, inputs, attrs, cls, pattern, fields, id=id)


def _fix(op_type, since):
    """How an attribute error names the way forward: the version that accepts the attribute."""
    return f"re-export the model with opset {since} or later, or pass strict=False to run the node as {op_type}-{since}"


def _no_attr(version, op_type, attr, later=None):
    hint = re.escape(f"; it was added in {op_type}-{later}: {_fix(op_type, later)}") if later else ""
    return rf"{re.escape(version)}: has no attribute '{attr}' \(attributes: none\){hint}"


GATING = [
    _row("batch_dims-on-GatherND-11", "GatherND", 11, [_F.reshape(2, 2), np.array([[1], [0]])],
         {"batch_dims": 1}, InvalidAttributeError, _no_attr("GatherND-11", "GatherND", "batch_dims", 12),
         op="GatherND", since_version=11, input="batch_dims", value=1),
    _row("batch_dims=0-on-GatherND-11", "GatherND", 11, [_F.reshape(2, 2), np.array([[1], [0]])],
         {"batch_dims": 0}, InvalidAttributeError, _no_attr("GatherND-11", "GatherND", "batch_dims", 12),
         op="GatherND", since_version=11, input="batch_dims", value=0),
    _row("batch_dims-on-com.microsoft.GatherND-1", "GatherND", 1, [_F.reshape(2, 2), np.array([[1], [0]])],
         {"batch_dims": 1}, InvalidAttributeError, _no_attr("com.microsoft.GatherND-1", "GatherND", "batch_dims"),
         domain="com.microsoft", op="GatherND", since_version=1, input="batch_dims", value=1),
    _row("reduction-on-ScatterND-11", "ScatterND", 12, [_F, _I64_11, np.array([5.0])], {"reduction": "add"},
         InvalidAttributeError, _no_attr("ScatterND-11", "ScatterND", "reduction", 16),
         op="ScatterND", since_version=11, input="reduction", value="add"),
    _row("reduction-on-ScatterND-13", "ScatterND", 15, [_F, _I64_11, np.array([5.0])], {"reduction": "mul"},
         InvalidAttributeError, _no_attr("ScatterND-13", "ScatterND", "reduction", 16),
         op="ScatterND", since_version=13, input="reduction", value="mul"),
    _row("reduction=none-on-ScatterND-13", "ScatterND", 13, [_F, _I64_11, np.array([5.0])], {"reduction": "none"},
         InvalidAttributeError, _no_attr("ScatterND-13", "ScatterND", "reduction", 16),
         op="ScatterND", since_version=13, input="reduction", value="none"),
    *[
        _row(f"{r}-on-ScatterND-16@{opset}", "ScatterND", opset, [_F, _I64_11, np.array([5.0])], {"reduction": given},
             InvalidAttributeError,
             re.escape(f"ScatterND-16: reduction = '{r}' is not accepted (accepted: 'none', 'add', 'mul'); "
                       f"'{r}' exists from ScatterND-18: {_fix('ScatterND', 18)}"),
             op="ScatterND", since_version=16, input="reduction", value=r)
        for r, given, opset in [("max", "max", 16), ("min", "min", 17), ("max", b"max", 17)]
    ],
    *[
        _row(f"bfloat16-data-on-{op}-{since}", op, opset, inputs, {}, DTypeError,
             re.escape(f"{op}-{since}: data has type tensor(bfloat16), which this version does not allow ")
             + _ALLOWED_NO_BF16,
             op=op, since_version=since, input="data", value="tensor(bfloat16)")
        for op, since, opset, inputs in [
            ("Gather", 1, 10, [_BF16, _I64_1]),
            ("Gather", 11, 12, [_BF16, _I64_1]),
            ("GatherND", 11, 11, [_BF16, _I64_11]),
            ("GatherND", 12, 12, [_BF16, _I64_11]),
            ("ScatterND", 11, 12, [_BF16, _I64_11, _BF16[:1]]),
            ("GatherElements", 11, 12, [_BF16, _I64_1]),
            ("ScatterElements", 11, 12, [_BF16, _I64_1, _BF16[:1]]),
            ("Scatter", 9, 10, [_BF16, _I64_1, _BF16[:1]]),
        ]
    ],
    _row("bfloat16-data-on-com.microsoft.GatherND-1", "GatherND", 1, [_BF16, _I64_11], {}, DTypeError,
         re.escape("com.microsoft.GatherND-1: data has type tensor(bfloat16), which this version does not allow ")
         + _ALLOWED_NO_BF16,
         domain="com.microsoft", op="GatherND", since_version=1, input="data", value="tensor(bfloat16)"),
    *[
        _row(f"int32-indices-on-{op}-{since}", op, since, inputs, {}, DTypeError,
             re.escape(f"{op}-{since}: indices has type tensor(int32), which this version does not allow "
                       "(allowed: tensor(int64))"),
             op=op, since_version=since, input="indices", value="tensor(int32)")
        for op, since, inputs in [
            ("GatherND", 11, [_F, _I32_11]),
            ("GatherND", 12, [_F, _I32_11]),
            ("GatherND", 13, [_F, _I32_11]),
            ("ScatterND", 11, [_F, _I32_11, np.array([5.0])]),
            ("ScatterND", 13, [_F, _I32_11, np.array([5.0])]),
            ("ScatterND", 16, [_F, _I32_11, np.array([5.0])]),
            ("ScatterND", 18, [_F, _I32_11, np.array([5.0])]),
        ]
    ],
    _row("unknown-attribute-axes-on-Gather-13", "Gather", 13, [_F, _I64_1], {"axes": 0}, InvalidAttributeError,
         re.escape("Gather-13: has no attribute 'axes' (attributes: axis)"),
         op="Gather", since_version=13, input="axes", value=0),
    _row("unknown-attribute-batch_dims-on-ScatterND-18", "ScatterND", 18, [_F, _I64_11, np.array([5.0])],
         {"batch_dims": 0}, InvalidAttributeError,
         re.escape("ScatterND-18: has no attribute 'batch_dims' (attributes: reduction)"),
         op="ScatterND", since_version=18, input="batch_dims", value=0),
    _row("unknown-op-Slice", "Slice", 13, [_F, _I64_1], {}, UnsupportedOpError,
         re.escape("operator 'Slice' of domain ai.onnx is not supported (supported: Gather, GatherElements, "
                   "GatherND, Scatter, ScatterElements, ScatterND, TensorScatter)"),
         op="Slice", since_version=None, input="op_type", value="Slice"),
    *[
        _row(f"Scatter-at-opset-{opset}", "Scatter", opset, [_F, _I64_1, np.array([5.0])], {}, UnsupportedOpError,
             re.escape(f"Scatter: opset {opset} of domain ai.onnx has no Scatter: it was removed at opset 11 "
                       "(its last version, Scatter-9, exists at opsets 9-10); use ScatterElements, which replaces it"),
             op="Scatter", since_version=None, input="opset", value=opset, valid_range=(9, 10))
        for opset in (11, 18)
    ],
    *[
        _row(f"reduction-on-ScatterElements-{since}", "ScatterElements", since, [_F, _I64_1, np.array([5.0])],
             {"reduction": "add"}, InvalidAttributeError,
             re.escape(f"ScatterElements-{since}: has no attribute 'reduction' (attributes: axis); "
                       f"it was added in ScatterElements-16: {_fix('ScatterElements', 16)}"),
             op="ScatterElements", since_version=since, input="reduction", value="add")
        for since in (11, 13)
    ],
    _row("max-on-ScatterElements-16", "ScatterElements", 17, [_F, _I64_1, np.array([5.0])], {"reduction": "max"},
         InvalidAttributeError,
         re.escape("ScatterElements-16: reduction = 'max' is not accepted (accepted: 'none', 'add', 'mul'); "
                   f"'max' exists from ScatterElements-18: {_fix('ScatterElements', 18)}"),
         op="ScatterElements", since_version=16, input="reduction", value="max"),
    _row("max-on-ScatterND-13", "ScatterND", 13, [_F, _I64_11, np.array([5.0])], {"reduction": "max"},
         InvalidAttributeError,
         re.escape("ScatterND-13: has no attribute 'reduction' (attributes: none); it was added in ScatterND-16, and "
                   f"reduction = 'max' exists from ScatterND-18: {_fix('ScatterND', 18)}"),
         op="ScatterND", since_version=13, input="reduction", value="max"),
    _row("sum-on-ScatterElements-16-no-version-has-it", "ScatterElements", 17, [_F, _I64_1, np.array([5.0])],
         {"reduction": "sum"}, InvalidAttributeError,
         re.escape("ScatterElements-16: reduction = 'sum' is not accepted (accepted: 'none', 'add', 'mul')"),
         op="ScatterElements", since_version=16, input="reduction", value="sum"),
    _row("reduction-on-Scatter-9", "Scatter", 10, [_F, _I64_1, np.array([5.0])], {"reduction": "add"},
         InvalidAttributeError,
         re.escape("Scatter-9: has no attribute 'reduction' (attributes: axis)"),
         op="Scatter", since_version=9, input="reduction", value="add"),
    _row("mode-on-TensorScatter-24", "TensorScatter", 24, [np.zeros((1, 2, 1)), np.ones((1, 1, 1))],
         {"mode": "ring"}, InvalidAttributeError,
         re.escape("TensorScatter-24: mode = 'ring' is not accepted (accepted: 'linear', 'circular')"),
         op="TensorScatter", since_version=24, input="mode", value="ring"),
    _row("int32-write_indices-on-TensorScatter-24", "TensorScatter", 24,
         [np.zeros((1, 2, 1)), np.ones((1, 1, 1)), np.array([0], dtype=np.int32)], {}, DTypeError,
         re.escape("TensorScatter-24: write_indices has type tensor(int32), which this version does not allow "
                   "(allowed: tensor(int64))"),
         op="TensorScatter", since_version=24, input="write_indices", value="tensor(int32)"),
    _row("float8-data-on-GatherElements-13", "GatherElements", 13,
         [np.zeros(2, ml_dtypes.float8_e4m3fn), _I64_1], {}, DTypeError,
         re.escape("GatherElements-13: data has type tensor(float8e4m3fn), which this version does not allow ")
         + r"\(allowed: tensor\(bfloat16\), .*tensor\(uint8\)\)",
         op="GatherElements", since_version=13, input="data", value="tensor(float8e4m3fn)"),
    _row("unknown-op-Gather-in-com.microsoft", "Gather", 1, [_F, _I64_1], {}, UnsupportedOpError,
         re.escape("operator 'Gather' of domain com.microsoft is not supported (supported: GatherBlockQuantized, "
                   "GatherND)"),
         domain="com.microsoft", op="Gather", since_version=None, input="op_type", value="Gather"),
    _row("unknown-domain-ai.onnx.ml", "Gather", 13, [_F, _I64_1], {}, UnsupportedOpError,
         re.escape("domain 'ai.onnx.ml' is not supported (known: ai.onnx, com.microsoft)"),
         domain="ai.onnx.ml", op="Gather", input="domain", value="ai.onnx.ml"),
    _row("domain-None", "Gather", 13, [_F, _I64_1], {}, UnsupportedOpError,
         re.escape("domain None is not supported (known: ai.onnx, com.microsoft)"),
         domain=None, op="Gather", input="domain", value=None),
    *[
        _row(f"{d + '.' if d else ''}{op}-opset-{opset}-predates-it", op, opset, inputs, {}, UnsupportedOpError,
             re.escape(f"{op}: opset {opset} of domain {d or 'ai.onnx'} predates the operator (first version {first})"),
             domain=d, op=op, since_version=None, input="opset", value=opset, valid_range=(first, latest))
        for op, opset, d, first, latest, inputs in [
            ("Gather", 0, "", 1, LATEST, [_F, _I64_1]),
            ("GatherND", 10, "", 11, LATEST, [_F, _I64_11]),
            ("ScatterND", 10, "", 11, LATEST, [_F, _I64_11, np.array([5.0])]),
            ("GatherND", 0, "com.microsoft", 1, 1, [_F, _I64_11]),
            ("TensorScatter", 23, "", 24, LATEST, [np.zeros((1, 2, 1)), np.ones((1, 1, 1))]),
            ("Scatter", 8, "", 9, LATEST, [_F, _I64_1, np.array([5.0])]),
        ]
    ],
    *[
        _row(f"{d + '.' if d else ''}{op}-opset-{opset}-is-newer-than-latest", op, opset, inputs, {},
             UnsupportedOpError,
             re.escape(f"{op}: opset {opset} of domain {d or 'ai.onnx'} is newer than the newest this library "
                       f"knows ({opset - 1}); an operator may have changed there"),
             domain=d, op=op, since_version=None, input="opset", value=opset, valid_range=(first, opset - 1))
        for op, opset, d, first, inputs in [
            ("Gather", LATEST + 1, "", 1, [_F, _I64_1]),
            ("ScatterND", LATEST + 1, "", 11, [_F, _I64_11, np.array([5.0])]),
            ("GatherND", 2, "com.microsoft", 1, [_F, _I64_11]),
        ]
    ],
    _row("opset-not-an-int", "Gather", "13", [_F, _I64_1], {}, UnsupportedOpError,
         re.escape("Gather: opset must be an int, got '13'"), op="Gather", input="opset", value="13"),
]


@pytest.mark.parametrize(("op", "opset", "domain", "inputs", "attrs", "cls", "pattern", "fields"), GATING)
def test_version_gating(op, opset, domain, inputs, attrs, cls, pattern, fields):
    with pytest.raises(cls) as info:
        run_node(op, inputs, attrs, opset=opset, domain=domain)
    assert_error(info.value, cls, pattern, fields)


# Each gated feature works from the first version that has it (values from numpy indexing).
_X = np.arange(6.0).reshape(2, 3)


@pytest.mark.parametrize(
    ("op", "opset", "domain", "inputs", "attrs", "expected"),
    [
        pytest.param("GatherND", 12, "", [_X, np.array([[2], [0]])], {"batch_dims": 1},
                     np.array([_X[0, 2], _X[1, 0]]), id="batch_dims-from-GatherND-12"),
        pytest.param("ScatterND", 16, "", [_F, np.array([[1], [1]]), np.array([5.0, 6.0])], {"reduction": b"add"},
                     np.array([0.0, 12.0, 2.0, 3.0]), id="add-from-ScatterND-16"),
        pytest.param("ScatterND", 18, "", [_F, np.array([[1], [2]]), np.array([5.0, -1.0])], {"reduction": "max"},
                     np.array([0.0, 5.0, 2.0, 3.0]), id="max-from-ScatterND-18"),
        pytest.param("ScatterND", 18, "", [_F, np.array([[1], [2]]), np.array([5.0, -1.0])], {"reduction": "min"},
                     np.array([0.0, 1.0, -1.0, 3.0]), id="min-from-ScatterND-18"),
        pytest.param("Gather", 13, "", [_BF16, np.array([3, 0])], {},
                     np.array([3, 0]).astype(ml_dtypes.bfloat16), id="bfloat16-from-Gather-13"),
        pytest.param("GatherND", 13, "", [_BF16, np.array([[3]])], {},
                     np.array([3]).astype(ml_dtypes.bfloat16), id="bfloat16-from-GatherND-13"),
        pytest.param("ScatterND", 13, "", [_BF16, np.array([[3]]), np.array([9]).astype(ml_dtypes.bfloat16)], {},
                     np.array([0, 1, 2, 9]).astype(ml_dtypes.bfloat16), id="bfloat16-from-ScatterND-13"),
        pytest.param("Gather", 1, "", [_F, np.array([3, -4], dtype=np.int32)], {},
                     np.array([3.0, 0.0]), id="int32-indices-on-Gather-1"),
        pytest.param("GatherND", 1, "com.microsoft", [_X, np.array([[1, 2]], dtype=np.int32)], {},
                     np.array([5.0]), id="int32-indices-on-com.microsoft.GatherND-1"),
        pytest.param("ScatterElements", 16, "", [_F, np.array([1, 1]), np.array([5.0, 6.0])], {"reduction": "mul"},
                     np.array([0.0, 30.0, 2.0, 3.0]), id="mul-from-ScatterElements-16"),
        pytest.param("ScatterElements", 18, "", [_F, np.array([3, 3]), np.array([5.0, -1.0])], {"reduction": "min"},
                     np.array([0.0, 1.0, 2.0, -1.0]), id="min-from-ScatterElements-18"),
        pytest.param("GatherElements", 13, "", [_BF16, np.array([3, 0])], {},
                     np.array([3, 0]).astype(ml_dtypes.bfloat16), id="bfloat16-from-GatherElements-13"),
        pytest.param("Scatter", 9, "", [_X, np.array([[1], [0]]), np.array([[7.0], [8.0]])], {"axis": 1},
                     np.array([[0.0, 7.0, 2.0], [8.0, 4.0, 5.0]]), id="Scatter-9-at-opset-9"),
        pytest.param("TensorScatter", 24, "", [np.zeros((1, 3), ml_dtypes.int4), np.ones((1, 2), ml_dtypes.int4),
                                               np.array([2])], {"axis": 1, "mode": "circular"},
                     np.array([[1, 0, 1]]).astype(ml_dtypes.int4), id="int4-circular-on-TensorScatter-24"),
    ],
)
def test_gated_feature_works_from_its_first_version(op, opset, domain, inputs, attrs, expected):
    out = run_node(op, inputs, attrs, opset=opset, domain=domain)
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(out, expected, strict=True)


def test_public_kernels_are_the_newest_versions():
    # gather/gather_nd: Gather-13/GatherND-13 (bfloat16, batch_dims); scatter_nd: ScatterND-18;
    # gather_elements/scatter_elements: GatherElements-13/ScatterElements-18; tensor_scatter: TensorScatter-24.
    for call, name in [
        (lambda: gather(np.arange(3.0), np.array([5])), "Gather-13"),
        (lambda: gather_nd(np.arange(3.0), np.array([[5]])), "GatherND-13"),
        (lambda: scatter_nd(np.arange(3.0), np.array([[5]]), np.array([1.0])), "ScatterND-18"),
        (lambda: gather_elements(np.arange(3.0), np.array([5])), "GatherElements-13"),
        (lambda: scatter_elements(np.arange(3.0), np.array([5]), np.array([1.0])), "ScatterElements-18"),
        (lambda: tensor_scatter(np.zeros((1, 3)), np.ones((1, 1)), np.array([-1]), axis=1), "TensorScatter-24"),
    ]:
        with pytest.raises(IndexOutOfBoundsError, match=rf"^{name}: "):
            call()
    out = scatter_nd(np.arange(3.0), np.array([[0]]), np.array([-1.0]), reduction="min")
    np.testing.assert_array_equal(out, [-1.0, 1.0, 2.0], strict=True)


# -- (d) strict=False, arity, attributes as AttributeProto ---------------------------------------------


@pytest.mark.parametrize(
    ("op", "since", "domain", "attrs", "earliest"),
    [
        ("ScatterElements", 16, "", {"reduction": "max"}, 18),
        ("ScatterElements", 16, "", {"reduction": b"min"}, 18),
        ("ScatterElements", 13, "", {"reduction": "add"}, 16),
        ("ScatterElements", 11, "", {"reduction": "max", "axis": 0}, 18),
        ("ScatterND", 11, "", {"reduction": "mul"}, 16),
        ("ScatterND", 13, "", {"reduction": "min"}, 18),
        ("ScatterND", 16, "", {"reduction": "max"}, 18),
        ("GatherND", 11, "", {"batch_dims": 1}, 12),
        ("ScatterElements", 16, "", {"reduction": "sum"}, None),  # no version has it
        ("ScatterND", 18, "", {"reduction": "max"}, None),  # nothing to fix: no later version
        ("Gather", 1, "", {"batch_dims": 0}, None),
        ("Scatter", 9, "", {"reduction": "add"}, None),  # ScatterElements is another operator
        ("GatherND", 1, "com.microsoft", {"batch_dims": 1}, None),  # ai.onnx's GatherND-12 is another domain
        ("TensorScatter", 24, "", {"mode": "ring"}, None),
    ],
)
def test_first_accepting_is_the_earliest_later_version_of_the_same_operator(op, since, domain, attrs, earliest):
    later = first_accepting(REGISTRY[(domain, op, since)], attrs)
    assert (later.since_version if later else None) == earliest
    if later is not None:
        assert (later.domain, later.op_type) == (domain, op)


_SE = [np.zeros(3), np.array([2, 2, 0]), np.array([1.0, 5.0, 2.0])]
_OFF_SPEC = [  # (id, op, opset, inputs, attrs, version in effect, version run)
    ("max-on-ScatterElements-16", "ScatterElements", 17, _SE, {"reduction": "max"}, 16, 18),
    ("min-on-ScatterElements-13", "ScatterElements", 13, _SE, {"reduction": b"min"}, 13, 18),
    ("add-on-ScatterElements-11", "ScatterElements", 11, _SE, {"reduction": "add"}, 11, 16),
    ("max-on-ScatterND-16", "ScatterND", 17, [np.zeros(3), np.array([[2], [2]]), np.array([1.0, 5.0])],
     {"reduction": "max"}, 16, 18),
    ("batch_dims-on-GatherND-11", "GatherND", 11, [np.arange(6.0).reshape(2, 3), np.array([[2], [0]])],
     {"batch_dims": 1}, 11, 12),
]


@pytest.mark.parametrize(("op", "opset", "inputs", "attrs", "resolved", "used"),
                         [pytest.param(*row[1:], id=row[0]) for row in _OFF_SPEC])
def test_not_strict_runs_an_off_spec_node_as_the_earliest_version_that_accepts_it(op, opset, inputs, attrs,
                                                                                   resolved, used):
    with pytest.raises(InvalidAttributeError, match=re.escape(_fix(op, used)) + "$"):
        run_node(op, inputs, attrs, opset=opset)  # strict by default, naming the fix
    with pytest.warns(OffSpecWarning) as record:
        got = run_node(op, inputs, attrs, opset=opset, strict=False)
    (warning,) = record
    w = warning.message
    assert (w.node, w.op, w.domain, w.opset, w.resolved, w.used) == (
        None, op, "ai.onnx", opset, f"{op}-{resolved}", f"{op}-{used}")
    assert str(w).startswith(f"{op} at opset {opset} is {op}-{resolved}, which does not accept ")
    assert str(w).endswith(f"; run as {op}-{used}, the earliest version that does (strict=False)")
    assert warning.filename == __file__  # the warning points at the caller
    want = run_node(op, inputs, attrs, opset=used)  # the semantics of that version
    np.testing.assert_array_equal(got, want, strict=True)
    with pytest.warns(OffSpecWarning):
        shape, _ = infer_shape(op, [x.shape for x in inputs], None, attrs, opset=opset, strict=False)
    assert shape == got.shape


@pytest.mark.parametrize(("op", "opset", "inputs", "attrs", "error"), [
    ("ScatterElements", 17, _SE, {"reduction": "sum"}, InvalidAttributeError),  # no version accepts it
    ("ScatterND", 18, [np.zeros(3), np.array([[2]]), np.array([1.0])], {"reduction": "sum"}, InvalidAttributeError),
    ("Gather", 13, [np.zeros(3), np.array([1])], {"batch_dims": 0}, InvalidAttributeError),
    ("GatherND", 1, [np.zeros((2, 2)), np.array([[1], [0]], np.int32)], {"batch_dims": 1}, InvalidAttributeError),
    ("Scatter", 11, _SE, {}, UnsupportedOpError),  # removed, not off-spec
    ("ScatterElements", 17, _SE, {"reduction": "max", "axis": 1}, InvalidAttributeError),  # run as 18, whose
    # own checks still apply (axis 1 is out of range for data of rank 1)
])
def test_not_strict_loosens_nothing_else(op, opset, inputs, attrs, error):
    domain = "com.microsoft" if opset == 1 else ""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        with pytest.raises(error):
            run_node(op, inputs, attrs, opset=opset, domain=domain, strict=False)
    assert len(record) == (1 if attrs.get("axis") else 0)


def test_not_strict_on_an_on_spec_node_warns_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = run_node("ScatterElements", _SE, {"reduction": "max"}, opset=18, strict=False)
    np.testing.assert_array_equal(got, [2.0, 0.0, 5.0])


@pytest.mark.parametrize(("op", "opset", "inputs", "expected", "given", "missing"), [
    ("ScatterElements", 13, _SE[:2], "3 inputs (data, indices, updates)", 2, "updates"),
    ("ScatterND", 18, [np.zeros(2)], "3 inputs (data, indices, updates)", 1, "indices, updates"),
    ("Gather", 13, [np.zeros(2), np.array([0]), np.array([0])], "2 inputs (data, indices)", 3, None),
    ("TensorScatter", 24, [np.zeros((1, 2))], "2 to 3 inputs (past_cache, update, write_indices, the last 1 optional)",
     1, "update"),
])
def test_a_wrong_input_count_is_an_arity_error(op, opset, inputs, expected, given, missing):
    since = resolve(op, opset).since_version
    for call in (lambda: run_node(op, inputs, opset=opset),
                 lambda: infer_shape(op, [x.shape for x in inputs], opset=opset)):
        with pytest.raises(ArityError) as info:
            call()
        err = info.value
        assert isinstance(err, ValueError) and not isinstance(err, ShapeError)  # a count, not a shape
        tail = f"; missing: {missing}" if missing else ""
        assert str(err) == f"{op}-{since}: takes {expected}, got {given}{tail}"
        takes = {"Gather": (2, 2), "TensorScatter": (2, 3)}.get(op, (3, 3))
        assert (err.op, err.since_version, err.value, err.valid_range) == (op, since, given, takes)
        assert err.input == (missing.split(", ")[0] if missing else None)


def test_attributes_as_attribute_protos_or_a_dict():
    d, i, u = _SE
    protos = [helper.make_attribute("axis", 0), helper.make_attribute("reduction", "max")]
    want = np.array([2.0, 0.0, 5.0])
    for attrs in (protos, tuple(protos), {"axis": 0, "reduction": "max"}, {a.name: a for a in protos}):
        np.testing.assert_array_equal(run_node("ScatterElements", [d, i, u], attrs, opset=18), want, strict=True)
        assert infer_shape("ScatterElements", [(3,), (3,), (3,)], None, attrs, opset=18) == ((3,), None)
    node = helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)
    got = run_node("GatherND", [np.arange(6.0).reshape(2, 3), np.array([[2], [0]])], node.attribute, opset=12)
    np.testing.assert_array_equal(got, [2.0, 3.0])
    with pytest.raises(InvalidAttributeError, match=r"GatherND-11: has no attribute 'batch_dims'"):
        run_node("GatherND", [np.zeros((2, 3)), np.array([[0], [0]])], node.attribute, opset=11)


def test_a_string_attribute_proto_is_read_as_str():
    # onnx's helper gives a STRING attribute's value as bytes; the node reads it as onnx.reference
    # does, a str (the kernels' signature fast path takes reduction="max", not b"max")
    from gather_scatter._nodes import attribute_dict

    protos = [helper.make_attribute("reduction", "max"), helper.make_attribute("mode", "circular")]
    assert attribute_dict(protos) == {"reduction": "max", "mode": "circular"}
    assert type(attribute_dict(protos)["reduction"]) is str
    raw = helper.make_attribute("reduction", b"\xff\xfe")  # not UTF-8: kept as given
    assert attribute_dict([raw]) == {"reduction": b"\xff\xfe"}


@pytest.mark.parametrize(("attrs", "message"), [
    ([("axis", 0)], r"attributes\[0\] is a tuple, not an onnx.AttributeProto"),
    ("axis", r"attributes must be a mapping of name to value or a sequence of onnx.AttributeProto, got str"),
    (3, r"got int"),
    ([helper.make_attribute("axis", 0), helper.make_attribute("axis", 1)], r"attribute 'axis' is given twice"),
])
def test_attributes_of_another_kind_are_refused(attrs, message):
    with pytest.raises(InvalidAttributeError, match=message):
        run_node("Gather", [np.zeros(3), np.array([0])], attrs, opset=13)
