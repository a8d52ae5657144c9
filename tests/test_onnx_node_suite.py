"""ONNX's whole node test suite (every operator, not only the family) through ``run_model``.

``run_model`` runs every operator outside the family on onnx.reference, with the operators
onnx.reference gets wrong replaced (``gather_scatter.models.reference._fixes``): each of the ~1,900
cases of the installed onnx (``onnx.backend.test.loader.load_model_tests(kind="node")``, built
in memory since onnx #7959) must give onnx's expected outputs within the case's tolerance. A
case whose answer cannot be compared is in ``RANDOM`` (its shape, type and the values' range
are checked instead); a divergence we keep is in ``DIVERGENCES`` with its reason, run as a
strict xfail so that a fix shows. Both lists name cases; a name that no longer exists fails
``test_listed_cases_exist`` so a list cannot rot.
"""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from gather_scatter.reference import run_model

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # onnx's case builders overflow casts on purpose
    from onnx.backend.test.loader import load_model_tests

    CASES = load_model_tests(kind="node")

#: Cases whose outputs are random draws: the spec fixes their distribution, not their values
#: (onnx's expected values are NumPy's draws, even with ``seed``: "implementation-defined").
RANDOM = {
    "test_bernoulli",
    "test_bernoulli_double",
    "test_bernoulli_double_expanded",
    "test_bernoulli_expanded",
    "test_bernoulli_seed",
    "test_bernoulli_seed_expanded",
}
#: Cases where run_model's answer differs from onnx's, with the reason (none today).
DIVERGENCES: dict[str, str] = {}
#: Operators whose onnx.reference implementation needs a package of its own.
NEEDS = {"ImageDecoder": "PIL"}


def _value(x):
    return numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else x


def _assert_close(actual, expected, rtol: float, atol: float, where: str) -> None:
    expected = _value(expected)
    if isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), where
        for k, (a, e) in enumerate(zip(actual, expected, strict=True)):
            _assert_close(a, e, rtol, atol, f"{where}[{k}]")
        return
    if expected is None:
        assert actual is None, where
        return
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), where
        return
    expected, actual = np.asarray(expected), np.asarray(actual)
    assert actual.shape == expected.shape, f"{where}: shape {actual.shape} != {expected.shape}"
    if expected.dtype.kind in "OUS":  # tensor(string): an object or a 'U' array, as onnx.reference gives it
        assert actual.dtype.kind in "OUS", f"{where}: dtype {actual.dtype} is not a string tensor"
        assert actual.tolist() == expected.tolist(), where
        return
    assert actual.dtype == expected.dtype, f"{where}: dtype {actual.dtype} != {expected.dtype}"
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected, err_msg=where)
    else:  # float, complex and ml_dtypes' types, compared as their float64 values
        wide = np.complex128 if expected.dtype.kind == "c" else np.float64
        np.testing.assert_allclose(
            actual.astype(wide), expected.astype(wide), rtol=rtol, atol=atol, equal_nan=True, err_msg=where
        )


def test_suite_is_whole():
    # A floor: a silent loader failure must not pass as an empty suite.
    assert len(CASES) >= 1800
    assert {
        "test_loop11",
        "test_scan9_sum",
        "test_range_float_type_positive_delta_expanded",
        "test_cumsum_1d",
        "test_if_opt",
        "test_scan_sum",
    } <= {c.name for c in CASES}


def test_listed_cases_exist():
    names = {c.name for c in CASES}
    assert names >= RANDOM and set(DIVERGENCES) <= names


def _params():
    for case in CASES:
        marks = []
        if case.name in DIVERGENCES:
            marks.append(pytest.mark.xfail(reason=DIVERGENCES[case.name], strict=True))
        yield pytest.param(case, id=case.name, marks=marks)


@pytest.mark.parametrize("case", list(_params()))
def test_node_case(case):
    ops = {n.op_type for n in case.model.graph.node}
    for op, module in NEEDS.items():
        if op in ops and importlib.util.find_spec(module) is None:
            pytest.skip(f"onnx.reference's {op} needs {module} (pip install pillow)")
    names = [i.name for i in case.model.graph.input]
    for n, (inputs, outputs) in enumerate(case.data_sets):
        feeds = dict(zip(names, [_value(x) for x in inputs], strict=False))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the cases' own inf and nan arithmetic
            got = list(run_model(case.model, feeds).values())
        assert len(got) == len(outputs)
        for k, (actual, expected) in enumerate(zip(got, outputs, strict=True)):
            where = f"{case.name} data set {n} output {k}"
            if case.name in RANDOM:
                expected = np.asarray(_value(expected))
                assert actual.shape == expected.shape and actual.dtype == expected.dtype, where
                assert set(np.unique(actual).tolist()) <= {0, 1}, where
            else:
                _assert_close(actual, expected, case.rtol, case.atol, where)
