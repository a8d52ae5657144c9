"""ONNX's own backend test cases for every operator of the family, replayed through run_node;
and those whose inputs are sequences, optionals or maps, replayed through run_model.

The cases come from the installed onnx package's definitions (``onnx.backend.test.case.node``;
the installed package has no ``data/node`` directory of recorded files): each ``export_*``
function builds a node and calls ``expect``, which wraps it in a model whose ``opset_import``
pins the opset. ``collect_testcases(op_type)`` cannot be used once per op in one process (its
filter applies at first import only, and it imports every operator's module), so the export
functions of the modules are re-run here with ``expect``'s registry swapped for a fresh one;
the recorded models are onnx's own.
"""

from __future__ import annotations

import importlib

import numpy as np
import onnx
import oracle
import pytest
from onnx import helper, numpy_helper
from onnx.backend.test.case import node as node_cases
from onnx.backend.test.case.base import Base

from gather_scatter import UnsupportedOpError, run_node
from gather_scatter.reference import run_model

MODULES = {"Gather": "gather", "GatherND": "gathernd", "ScatterND": "scatternd", "GatherElements": "gatherelements",
           "ScatterElements": "scatterelements", "Scatter": "scatter", "TensorScatter": "tensorscatter"}


def _export_functions(module):
    for cls in vars(module).values():
        if isinstance(cls, type) and issubclass(cls, Base) and cls.__module__ == module.__name__:
            for name in sorted(vars(cls)):
                if name.startswith("export"):
                    yield getattr(cls, name)


def _collect(names) -> list:
    """The cases recorded by the export functions of these modules of onnx.backend.test.case.node."""
    # Importing a module runs its exports once (onnx's metaclass), into onnx's own registry.
    modules = [importlib.import_module(f"{node_cases.__name__}.{m}") for m in names]
    saved = (node_cases._NodeTestCases, node_cases._existing_names, node_cases._TargetOpType)
    random_state = np.random.get_state()
    node_cases._NodeTestCases, node_cases._existing_names, node_cases._TargetOpType = [], {}, None
    try:
        for module in modules:
            for export in _export_functions(module):
                np.random.seed(0)  # as onnx's exporter does before each export
                export()
        cases = list(node_cases._NodeTestCases)
    finally:
        node_cases._NodeTestCases, node_cases._existing_names, node_cases._TargetOpType = saved
        np.random.set_state(random_state)
    return cases


CASES = [c for c in _collect(MODULES.values()) if c.model.graph.node[0].op_type in MODULES]
ORACLE = {"Gather": oracle.gather, "GatherND": oracle.gather_nd, "ScatterND": oracle.scatter_nd,
          "GatherElements": oracle.gather_elements, "ScatterElements": oracle.scatter_elements,
          "Scatter": oracle.scatter, "TensorScatter": oracle.tensor_scatter}
# Opsets where the op type is not in effect, so that a case recorded there must be refused:
# Scatter-9 exists at opsets 9-10 only (spec README), from 11 the node is an unsupported op.
NOT_IN_EFFECT = {"Scatter": range(11, 10_000)}


def _as_array(value) -> np.ndarray:
    return numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else value


def _opset(model: onnx.ModelProto, domain: str) -> int:
    wanted = {"", "ai.onnx"} if domain in ("", "ai.onnx") else {domain}
    (version,) = [o.version for o in model.opset_import if o.domain in wanted]
    return version


def test_collection_found_onnx_cases_for_every_op():
    names = {c.name for c in CASES}
    # A floor, not the full list: onnx may add cases, a silent collection failure must not pass.
    assert {
        "test_gather_0", "test_gather_1", "test_gather_2d_indices", "test_gather_negative_indices",
        "test_gathernd_example_int32", "test_gathernd_example_float32",
        "test_gathernd_example_int32_batch_dim1",
        "test_scatternd", "test_scatternd_add", "test_scatternd_multiply",
        "test_scatternd_max", "test_scatternd_min",
        "test_gather_elements_0", "test_gather_elements_negative_indices",
        "test_scatter_elements_with_duplicate_indices", "test_scatter_elements_with_reduction_max",
        "test_scatter_with_axis", "test_scatter_without_axis",
        "test_tensorscatter", "test_tensorscatter_3d", "test_tensorscatter_circular",
    } <= names
    assert len(names) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_onnx_backend_case(case):
    graph = case.model.graph
    assert len(graph.node) == 1
    node = graph.node[0]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    opset = _opset(case.model, node.domain)
    ((inputs, outputs),) = case.data_sets
    inputs = [_as_array(x) for x in inputs]
    (expected,) = [_as_array(y) for y in outputs]
    copies = [np.copy(x) for x in inputs]

    if opset in NOT_IN_EFFECT.get(node.op_type, ()):  # onnx 1.23.2 records none; refused by design
        with pytest.raises(UnsupportedOpError, match="ScatterElements"):
            run_node(node.op_type, inputs, attrs, opset=opset, domain=node.domain)
        return
    actual = run_node(node.op_type, inputs, attrs, opset=opset, domain=node.domain)

    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected, strict=True)
    for before, after in zip(copies, inputs):
        np.testing.assert_array_equal(before, after, strict=True)


def test_family_cases_and_their_opsets():
    """The family's cases in onnx 1.23.2, each at the opset its model pins: Scatter's at 10
    (so none is one we refuse), ScatterElements' at 18, TensorScatter's at 24."""
    family = {}
    for c in CASES:
        node = c.model.graph.node[0]
        if node.op_type in ("GatherElements", "ScatterElements", "Scatter", "TensorScatter"):
            family.setdefault(node.op_type, set()).add((c.name, _opset(c.model, node.domain)))
    assert {op: len(names) for op, names in family.items()} == {
        "GatherElements": 3, "ScatterElements": 7, "Scatter": 2, "TensorScatter": 3}
    assert {opset for _, opset in family["Scatter"]} == {10}
    assert {opset for _, opset in family["TensorScatter"]} == {24}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_loop_oracle_agrees_with_onnx_case(case):
    # onnx's expected outputs come from its own reference code; the oracle is written from the
    # spec text: on every case both must agree (a disagreement is an oracle or an onnx bug).
    node = case.model.graph.node[0]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    attrs = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
    ((inputs, outputs),) = case.data_sets
    expected = _as_array(outputs[0])
    oracle.assert_same(ORACLE[node.op_type](*[_as_array(x) for x in inputs], **attrs), expected, case.name)


# -- inputs of every ONNX type through run_model (issue 15, item 6) ---------------------------------------

TYPED_MODULES = ("identity", "optionalgetelement", "optionalhaselement", "sequence_map", "sequenceinsert")
TYPED_CASES = _collect(TYPED_MODULES)


def test_typed_input_collection_found_the_cases_that_failed():
    names = {c.name for c in TYPED_CASES}
    # These 17 failed in run_model (np.asarray on every feed) and passed in reference.Evaluator.
    assert {
        "test_identity_sequence", "test_identity_opt",
        "test_optional_get_element_optional_sequence", "test_optional_get_element_sequence",
        "test_optional_has_element_empty_optional_input",
        "test_sequence_map_add_1_sequence_1_tensor_expanded", "test_sequence_map_add_2_sequences",
        "test_sequence_map_add_2_sequences_expanded", "test_sequence_map_extract_shapes",
        "test_sequence_map_extract_shapes_expanded", "test_sequence_map_identity_1_sequence_expanded",
        "test_sequence_map_identity_1_sequence_1_tensor", "test_sequence_map_identity_1_sequence_1_tensor_expanded",
        "test_sequence_map_identity_2_sequences", "test_sequence_map_identity_2_sequences_expanded",
        "test_sequence_insert_at_back", "test_sequence_insert_at_front",
    } <= names
    kinds = {i.type.WhichOneof("value") for c in TYPED_CASES for i in c.model.graph.input}
    assert kinds == {"tensor_type", "sequence_type", "optional_type"}


def _assert_same_value(actual, expected, where):
    if expected is None:
        assert actual is None, where
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), where
        for i, (a, e) in enumerate(zip(actual, expected)):
            _assert_same_value(a, e, f"{where}[{i}]")
    else:
        np.testing.assert_array_equal(actual, _as_array(expected), strict=True, err_msg=where)


@pytest.mark.parametrize("case", TYPED_CASES, ids=[c.name for c in TYPED_CASES])
def test_onnx_case_with_typed_inputs_through_run_model(case):
    ((inputs, outputs),) = case.data_sets
    graph = case.model.graph
    got = run_model(case.model, dict(zip([i.name for i in graph.input], inputs)))
    assert list(got) == [o.name for o in graph.output]
    for (name, actual), expected in zip(got.items(), outputs):
        _assert_same_value(actual, expected, name)
