"""Hypothesis properties of the kernels (shapes and choices shrink; values from a drawn seed)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import oracle
import strategies as S
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import Case

import gather_scatter as gs

PROPERTY_SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
OPSET = 24  # every public kernel's version is the one in effect here (TensorScatter-24, ScatterND-18, ...)
KERNELS = {"Gather": gs.gather, "GatherND": gs.gather_nd, "ScatterND": gs.scatter_nd,
           "GatherElements": gs.gather_elements, "ScatterElements": gs.scatter_elements,
           "TensorScatter": gs.tensor_scatter}


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # inf * 0 -> NaN is the answer, not a fault
        return fn(*args, **kwargs)


@PROPERTY_SETTINGS
@given(S.scatter_nd_cases(reductions=st.just("none"), duplicates=st.just(False), unique=True))
def test_gather_nd_inverts_scatter_nd_for_unique_indices(case):
    data, indices, updates = case.inputs
    assume(indices.shape[-1] >= 1)  # GatherND needs k >= 1; ScatterND also allows k == 0
    scattered = gs.scatter_nd(data, indices, updates)
    oracle.assert_same(gs.gather_nd(scattered, indices), updates, case.describe())


@PROPERTY_SETTINGS
@given(S.scatter_nd_cases(reductions=st.just("none"), duplicates=st.just(True)))
def test_scatter_nd_duplicates_last_update_wins(case):
    data, indices, updates = case.inputs
    expected = oracle.scatter_nd(data, indices, updates, "none")
    oracle.assert_same(gs.scatter_nd(data, indices, updates), expected, case.describe())
    # and 'last wins' is visible: every destination holds the last update addressed to it
    k = indices.shape[-1]
    n = math.prod(indices.shape[:-1])  # (reshape(-1, k) is ambiguous when n or k is 0)
    rows = indices.reshape(n, k).astype(np.int64) + np.asarray(data.shape[:k], dtype=np.int64)
    rows %= np.maximum(np.asarray(data.shape[:k], dtype=np.int64), 1)
    slices = updates.reshape((rows.shape[0],) + data.shape[k:])
    last = {tuple(row): i for i, row in enumerate(rows)}
    for target, i in last.items():
        oracle.assert_same(expected[target], slices[i])


@PROPERTY_SETTINGS
@given(S.scatter_nd_cases())
def test_scatter_nd_every_reduction_matches_the_loop(case):
    expected = oracle.scatter_nd(*case.inputs, **case.attrs)
    oracle.assert_same(_quiet(gs.scatter_nd, *case.inputs, **case.attrs), expected, case.describe())


def _any_case():
    return st.one_of(S.gather_cases(), S.gather_nd_cases(), S.scatter_nd_cases(), S.elements_cases(),
                     S.tensor_scatter_cases())


@PROPERTY_SETTINGS
@given(_any_case())
def test_shape_rule_equals_actual_output_shape(case):
    shapes = [a.shape for a in case.inputs]
    dtypes = [a.dtype for a in case.inputs]
    shape, dtype = gs.infer_shape(case.op, shapes, dtypes, case.attrs, opset=OPSET)
    out = _quiet(gs.run_node, case.op, case.inputs, case.attrs, opset=OPSET)
    assert shape == out.shape, case.describe()
    assert dtype == out.dtype
    # shapes alone (no dtypes) give the same shape
    assert gs.infer_shape(case.op, shapes, None, case.attrs, opset=OPSET)[0] == out.shape


def _copies(inputs):
    return [np.array(a, copy=True) for a in inputs]


def _assert_unchanged(inputs, copies, what):
    for name, array, copy in zip(("input 0", "input 1", "input 2"), inputs, copies):
        oracle.assert_same(array, copy, f"{what}: {name} was modified")


def _broken(case: Case, how: int) -> Case:
    """``case`` made invalid: an index out of bounds, or (ScatterND) updates of the wrong shape."""
    inputs = _copies(case.inputs)
    if case.op == "TensorScatter":  # a negative write index, or an update longer than the cache
        if how == 0:
            inputs = inputs[:2] + [np.full(inputs[0].shape[0], -1, dtype=np.int64)]
        else:
            ax = case.attrs.get("axis", -2) % inputs[0].ndim
            longer = inputs[0].shape[:ax] + (inputs[0].shape[ax] + 1,) + inputs[0].shape[ax + 1:]
            inputs[1] = np.zeros(longer, dtype=inputs[1].dtype)
        if how == 0 and inputs[0].shape[0] == 0:
            inputs[1] = np.zeros(inputs[1].shape + (1,), dtype=inputs[1].dtype)  # no batch: break the rank
        return Case(case.op, inputs, case.attrs)
    if how == 0 or case.op not in ("ScatterND", "ScatterElements"):
        indices = inputs[1]
        if indices.size:
            indices.reshape(-1)[-1] = 1000
        else:  # no index to push out: make a bad one
            inputs[1] = np.full((1,) * max(indices.ndim, 1), 1000, dtype=indices.dtype)
            if case.op in ("GatherND", "ScatterND"):
                inputs[1] = np.full((1, indices.shape[-1] or 1), 1000, dtype=indices.dtype)
            elif case.op != "Gather":  # the Elements ops: one index of data's rank
                inputs[1] = np.full((1,) * inputs[0].ndim, 1000, dtype=indices.dtype)
                if case.op == "ScatterElements":
                    inputs[2] = np.resize(inputs[0], (1,) * inputs[0].ndim)
    else:
        inputs[2] = np.stack([inputs[2], inputs[2]], axis=-1)  # one axis too many, even when empty
    return Case(case.op, inputs, case.attrs)


@PROPERTY_SETTINGS
@given(_any_case(), st.integers(0, 1))
def test_inputs_are_never_mutated(case, how):
    copies = _copies(case.inputs)
    _quiet(KERNELS[case.op], *case.inputs, **case.attrs)
    _assert_unchanged(case.inputs, copies, case.describe())
    bad = _broken(case, how)
    bad_copies = _copies(bad.inputs)
    try:
        _quiet(KERNELS[bad.op], *bad.inputs, **bad.attrs)
    except gs.GatherScatterError:
        pass
    else:
        raise AssertionError(f"no error for {bad.describe()}")
    _assert_unchanged(bad.inputs, bad_copies, "error path " + bad.describe())


@PROPERTY_SETTINGS
@given(S.gather_cases())
def test_gather_equals_numpy_take(case):
    data, indices = case.inputs
    expected = np.take(data, indices.reshape(indices.shape or (1,)), axis=case.attrs["axis"])
    expected = expected.reshape(gs.gather(data, indices, **case.attrs).shape)
    oracle.assert_same(gs.gather(data, indices, **case.attrs), expected, case.describe())


@PROPERTY_SETTINGS
@given(S.unique_scatter_elements_cases())
def test_gather_elements_inverts_scatter_elements_for_unique_positions(case):
    data, indices, updates = case.inputs
    scattered = gs.scatter_elements(data, indices, updates, **case.attrs)
    oracle.assert_same(gs.gather_elements(scattered, indices, **case.attrs), updates, case.describe())


@PROPERTY_SETTINGS
@given(S.elements_cases())
def test_elements_ops_match_the_loop(case):
    reference = oracle.gather_elements if case.op == "GatherElements" else oracle.scatter_elements
    expected = _quiet(reference, *case.inputs, **case.attrs)
    oracle.assert_same(_quiet(KERNELS[case.op], *case.inputs, **case.attrs), expected, case.describe())


@PROPERTY_SETTINGS
@given(S.tensor_scatter_cases())
def test_tensor_scatter_matches_the_loop_and_in_place_equals_the_copy(case):
    past, update, *write = case.inputs
    expected = oracle.tensor_scatter(past, update, *write, **case.attrs)
    oracle.assert_same(gs.tensor_scatter(past, update, *write, **case.attrs), expected, case.describe())
    cache = past.copy()
    assert gs.tensor_scatter(cache, update, *write, **case.attrs, out=cache) is cache
    oracle.assert_same(cache, expected, "in place " + case.describe())
