"""Sampled shapes x dtypes x index dtypes x versions against the slow loop oracle, bit for bit.

Every version in the REGISTRY is run through ``run_node`` at ``opset = since_version`` of its
domain and at the last opset where it is still in effect (Scatter-9: 10; TensorScatter-24: the
newest opset known); the newest versions also through the public kernels. The oracle (tests/oracle.py)
shares no code with the library.
"""

from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np
import oracle
import pytest
import strategies as S

import gather_scatter as gs
from gather_scatter.rules.versions import LATEST_OPSET, REGISTRY, SWEPT

CASES_PER_VERSION = 32
VERSIONS = sorted(SWEPT.values(), key=lambda v: (v.op_type, v.domain, v.since_version))


def _last_opset(spec) -> int:
    """The last opset of its domain at which ``spec`` is the version in effect."""
    later = [v.since_version for v in REGISTRY.values()
             if (v.domain, v.op_type) == (spec.domain, spec.op_type) and v.since_version > spec.since_version]
    if later:
        return min(later) - 1
    return spec.removed_in - 1 if spec.removed_in else LATEST_OPSET[spec.domain]


RUNS = [(v, opset) for v in VERSIONS for opset in sorted({v.since_version, _last_opset(v)})]
NEWEST = {"Gather": 13, "GatherND": 13, "ScatterND": 18, "GatherElements": 13, "ScatterElements": 18,
          "TensorScatter": 24}
PUBLIC = {"Gather": gs.gather, "GatherND": gs.gather_nd, "ScatterND": gs.scatter_nd,
          "GatherElements": gs.gather_elements, "ScatterElements": gs.scatter_elements,
          "TensorScatter": gs.tensor_scatter}
ORACLE = {"Gather": oracle.gather, "GatherND": oracle.gather_nd, "ScatterND": oracle.scatter_nd,
          "GatherElements": oracle.gather_elements, "ScatterElements": oracle.scatter_elements,
          "Scatter": oracle.scatter, "TensorScatter": oracle.tensor_scatter}


def _rng(*key) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def version_cases(spec, count: int = CASES_PER_VERSION, seed: int = 0):
    """``count`` valid cases for ``spec``, cycling through every data type and index type it allows."""
    rng = _rng(spec.name, seed)
    types, index_types = sorted(spec.data_types), sorted(spec.index_types)
    cases = []
    for i in range(count):
        type_name, index_dtype = types[i % len(types)], index_types[(i // len(types)) % len(index_types)]
        if spec.op_type == "Gather":
            case = S.gather_case(rng, type_name, index_dtype)
        elif spec.op_type == "GatherND":
            case = S.gather_nd_case(rng, type_name, index_dtype, batch_dims="batch_dims" in spec.attributes)
        elif spec.op_type == "TensorScatter":
            case = S.tensor_scatter_case(rng, type_name, ("linear", "circular")[i % 2])
        elif spec.op_type in ("GatherElements", "ScatterElements", "Scatter"):
            reductions = S.reductions_for(type_name, spec.reductions)
            reduction = reductions[i % len(reductions)] if "reduction" in spec.attributes else None
            case = S.elements_case(rng, spec.op_type, type_name, index_dtype, reduction)
        else:
            reductions = S.reductions_for(type_name, spec.reductions)
            reduction = reductions[i % len(reductions)] if "reduction" in spec.attributes else None
            case = S.scatter_nd_case(rng, type_name, index_dtype, reduction)
        cases.append(case)
    return cases


def _expected(case):
    return ORACLE[case.op](*case.inputs, **case.attrs)


@pytest.mark.parametrize("spec, opset", RUNS, ids=[f"{v.name}@opset{opset}" for v, opset in RUNS])
def test_run_node_matches_oracle(spec, opset):
    compared = 0
    types_seen = set()
    for case in version_cases(spec, seed=opset):
        expected = _expected(case)
        with np.errstate(all="ignore"):
            actual = gs.run_node(spec.op_type, case.inputs, case.attrs, opset=opset, domain=spec.domain)
        oracle.assert_same(actual, expected, f"{spec.name} at opset {opset}: {case.describe()}")
        compared += 1
        types_seen.add(S.onnx_name(case.inputs[0].dtype))
    assert compared == CASES_PER_VERSION
    assert types_seen == set(spec.data_types)  # every allowed type was exercised


@pytest.mark.parametrize("op", sorted(PUBLIC))
def test_public_kernels_match_oracle(op):
    spec = REGISTRY[("", op, NEWEST[op])]
    for case in version_cases(spec, seed=1):
        with np.errstate(all="ignore"):
            actual = PUBLIC[op](*case.inputs, **case.attrs)
        oracle.assert_same(actual, _expected(case), f"{op} {case.describe()}")


@pytest.mark.parametrize("spec", [v for v in VERSIONS if v.op_type != "TensorScatter"], ids=lambda v: v.name)
def test_first_out_of_bounds_position_matches_oracle(spec):
    """One index pushed out of bounds: both raise, at the same first bad position (row-major)."""
    rng = _rng("oob", spec.name)
    checked = 0
    for case in version_cases(spec, count=24, seed=2):
        data, indices = case.inputs[0], case.inputs[1].copy()
        if indices.size == 0:
            continue
        flat = indices.reshape(-1)
        for _ in range(int(rng.integers(1, 3))):  # one or two bad values; the first one counts
            at = int(rng.integers(flat.size))
            flat[at] = rng.choice([100, -100])
        inputs = [data, indices] + case.inputs[2:]
        with pytest.raises(IndexError) as want:
            ORACLE[case.op](*inputs, **case.attrs)
        with pytest.raises(gs.IndexOutOfBoundsError) as got:
            gs.run_node(spec.op_type, inputs, case.attrs, opset=spec.since_version, domain=spec.domain)
        assert got.value.position == want.value.position, case.describe()
        assert got.value.value == int(indices[want.value.position])
        checked += 1
    assert checked >= 8


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_first_bad_write_index_matches_oracle(mode):
    """TensorScatter: a negative write index (either mode) or one leaving no room (linear)."""
    spec = REGISTRY[("", "TensorScatter", 24)]
    rng = _rng("bad-write", mode)
    checked = 0
    for i in range(40):
        case = S.tensor_scatter_case(rng, "float", mode, with_write=True, zero=0.0)
        past, update, write = case.inputs
        capacity, length = past.shape[case.attrs.get("axis", -2)], update.shape[case.attrs.get("axis", -2)]
        write = write.copy()
        bad = int(rng.integers(write.size))
        write[bad] = -1 - int(rng.integers(3)) if mode == "circular" or i % 2 else capacity - length + 1
        with pytest.raises(IndexError) as want:
            oracle.tensor_scatter(past, update, write, **case.attrs)
        with pytest.raises(gs.IndexOutOfBoundsError) as got:
            gs.run_node("TensorScatter", [past, update, write], case.attrs, opset=24)
        assert got.value.position == want.value.position and got.value.input == "write_indices"
        assert got.value.value == int(write[want.value.position]) and got.value.op == spec.op_type
        checked += 1
    assert checked == 40


# ----------------------------------------------------------------------------- rounding


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("reduction", ["add", "mul"])
def test_half_precision_reductions_round_after_every_update(dtype, reduction):
    """400 updates into 3 slots: the answer is the per-update rounded chain, which differs from
    accumulating in float32 and rounding once (checked, so this test can tell the two apart)."""
    rng = np.random.default_rng(18)
    data = np.array([1.0, -2.0, 3.0], dtype=dtype)
    indices = rng.integers(-3, 3, size=(400, 1)).astype(np.int64)
    if reduction == "add":
        updates = rng.uniform(0.1, 1.3, size=400).astype(dtype)
    else:
        updates = rng.uniform(0.93, 1.08, size=400).astype(dtype)
    expected = oracle.scatter_nd(data, indices, updates, reduction)
    actual = gs.scatter_nd(data, indices, updates, reduction=reduction)
    oracle.assert_same(actual, expected, f"{np.dtype(dtype)} {reduction}")
    for opset in (16, 18):
        oracle.assert_same(
            gs.run_node("ScatterND", [data, indices, updates], {"reduction": reduction}, opset=opset), expected
        )
    # Rounding once at the end gives a different answer, so bitwise equality above is meaningful.
    wide = data.astype(np.float32)
    ufunc = np.add if reduction == "add" else np.multiply
    ufunc.at(wide, indices[:, 0] % 3, updates.astype(np.float32))
    assert oracle.first_difference(wide.astype(dtype), expected) is not None


def test_rank0_gather_index_into_string_vector():
    """Regression: np.take gave back a bare str here (no .reshape) before the fix."""
    data = np.array(["x", "", "日本"], dtype=object)
    for index, want in ((0, "x"), (-1, "日本"), (1, "")):
        for dtype in (np.int32, np.int64):
            out = gs.gather(data, np.array(index, dtype=dtype))
            oracle.assert_same(out, np.array(want, dtype=object))
            assert out.shape == () and out.dtype == object


def test_scatter_nd_whole_tensor_updates_when_k_is_zero():
    data = np.array([[1, 2], [3, 4]], dtype=np.int16)
    indices = np.zeros((3, 0), dtype=np.int64)
    updates = np.array([[[1, 1], [1, 1]], [[2, 0], [5, 1]], [[7, 7], [0, 9]]], dtype=np.int16)
    for reduction, want in (
        ("none", [[7, 7], [0, 9]]),
        ("add", [[11, 10], [9, 15]]),
        ("mul", [[14, 0], [0, 36]]),
        ("max", [[7, 7], [5, 9]]),
        ("min", [[1, 0], [0, 1]]),
    ):
        expected = oracle.scatter_nd(data, indices, updates, reduction)
        oracle.assert_same(expected, np.array(want, dtype=np.int16))
        oracle.assert_same(gs.scatter_nd(data, indices, updates, reduction), expected, reduction)


def test_assert_same_detects_what_it_should():
    """The comparison helper itself: NaN == NaN, but -0.0 != 0.0, dtype and str type matter."""
    nan = np.array([np.nan, 1.0])
    assert oracle.first_difference(nan, nan.copy()) is None
    assert oracle.first_difference(np.array([-0.0]), np.array([0.0])) is not None
    assert oracle.first_difference(np.array([1], np.int32), np.array([1], np.int64)) is not None
    assert oracle.first_difference(np.array(["a"], object), np.array(["b"], object)) is not None
    assert oracle.first_difference(np.array([b"a"], object), np.array(["a"], object)) is not None
    assert oracle.first_difference(np.float16(1.0).reshape(()), np.float16(1.0).reshape(())) is None
