"""Where the conformance suite compares within a tolerance, and what it expects where the spec has no rule (issue 36).

Complex ``mul``: the spec does not say how a complex product rounds (``ac - bd`` with each
product rounded, or a fused multiply-add), so every complex ``mul`` case has a tolerance
(``data.json``), wide enough for correctly rounded products, and no other case gained one.
0.0 against -0.0 under max/min: the spec has no tie rule, so the cases whose loop compares
zeros of both signs carry the tag ``signed_zero_tie`` (computed here again, one Python float
at a time), and their expected outputs follow the rule docs/conformance.md states.
The scatters' cases at the default size (seed 0) are the ones checked: only they have
reductions.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import gather_scatter as gs
from gather_scatter.check import case_values as C
from gather_scatter.conformance import build_suite
from gather_scatter.conformance.tags import most_hits, reduction_of, tolerance
from gather_scatter.rules.versions import REGISTRY

SCATTERS = ["ScatterND", "ScatterElements", "Scatter"]


@pytest.fixture(scope="module")
def scatters_all():
    """Every case of every scatter version at the default size, seed 0 (as the default export's)."""
    return build_suite(ops=SCATTERS)


@pytest.fixture(scope="module")
def scatters(scatters_all):
    """Their valid cases."""
    return [c for c in scatters_all if c.valid]


def _complex_mul(case) -> bool:
    return reduction_of(case.spec, case.case.attrs) == "mul" and case.case.inputs[0].dtype.kind == "c"


def _writes(spec, case):
    """Yield (element of data, element of updates) in the spec's loop order: row-major over the updates."""
    data, indices = case.inputs[0], case.inputs[1]
    if spec.op_type == "ScatterND":
        k = indices.shape[-1]
        for idx in np.ndindex(indices.shape[:-1]):
            target = tuple(int(indices[(*idx, j)]) % data.shape[j] for j in range(k))
            for rest in np.ndindex(data.shape[k:]):
                yield target + rest, idx + rest
        return
    axis = int(case.attrs.get("axis", 0)) % data.ndim
    for idx in np.ndindex(indices.shape):
        target = list(idx)
        target[axis] = int(indices[idx]) % data.shape[axis]
        yield tuple(target), idx


def _rounded_product(x: complex, y: complex, dtype) -> complex:
    """``x * y`` with each part correctly rounded to ``dtype``'s parts (what a fused multiply-add comes closest to)."""
    if not all(math.isfinite(v) for v in (x.real, x.imag, y.real, y.imag)):
        with np.errstate(invalid="ignore"):  # inf times 0: NaN, as ours
            return complex(np.asarray(x, dtype) * np.asarray(y, dtype))
    a, b, c, d = (Fraction(v) for v in (x.real, x.imag, y.real, y.imag))
    part = np.float32 if np.dtype(dtype) == np.complex64 else np.float64
    return complex(part(float(a * c - b * d)), part(float(a * d + b * c)))  # float64 then float32: exact enough


def _other_engine(spec, case, *, reverse: bool) -> np.ndarray:
    """The scatter's answer with correctly rounded complex products, in the loop's order or in reverse."""
    data, updates = case.inputs[0], case.inputs[2]
    out = data.copy()
    writes = list(_writes(spec, case))
    for target, at in reversed(writes) if reverse else writes:
        out[target] = _rounded_product(complex(out[target]), complex(updates[at]), data.dtype)
    return out


def test_every_complex_mul_case_has_a_tolerance_and_no_other_case_gained_one(scatters):
    complex_mul = [c for c in scatters if _complex_mul(c)]
    versions = {c.spec.name for c in complex_mul}
    assert versions == {"ScatterND-16", "ScatterND-18", "ScatterElements-16", "ScatterElements-18"}
    assert any(most_hits(c.spec, c.case) < 2 for c in complex_mul)  # one update per element (or none) too
    eps = {np.complex64: 2.0**-23, np.complex128: 2.0**-52}
    for c in complex_mul:
        assert c.tolerance is not None, c.name
        rtol, atol = c.tolerance
        k = max(most_hits(c.spec, c.case), 1)
        e = eps[c.result.dtype.type]
        assert 3 * k * e <= rtol <= 3.3 * k * e, (c.name, rtol, k)  # rounded up to 2 digits
        tiny = float(np.finfo(c.result.real.dtype).tiny)  # the parts' smallest normal number, rounded up
        assert tiny <= atol <= 1.05 * tiny, (c.name, atol)
    for c in scatters:
        if _complex_mul(c):
            continue
        name = c.case.inputs[0].dtype
        float_reduction = reduction_of(c.spec, c.case.attrs) in ("add", "mul") and (
            name.kind in "fc" or str(name) == "bfloat16"
        )
        assert (c.tolerance is not None) == (float_reduction and most_hits(c.spec, c.case) >= 2), c.name


def test_the_complex_tolerance_admits_correctly_rounded_products_in_either_order(scatters):
    """An engine whose complex products round once per part (a fused multiply-add's best) passes each case."""
    differ = 0
    for c in [c for c in scatters if _complex_mul(c)]:
        rtol, atol = c.tolerance
        for reverse in (False, True):
            other = _other_engine(c.spec, c.case, reverse=reverse)
            assert np.allclose(other, c.result, rtol=rtol, atol=atol, equal_nan=True), (c.name, reverse)
            differ += not np.array_equal(other, c.result, equal_nan=True)
    assert differ  # the tolerance is needed: some of them differ from ours in the last bit


def test_the_product_that_differs_in_the_last_bit_is_within_the_tolerance():
    x = np.array([-1.8890591397168834 - 1j])
    y = np.array([-1.1628084447487836 - 1.9263099410068292j])
    ours = gs.scatter_nd(x, np.array([[0]]), y, reduction="mul")
    fused = _rounded_product(complex(x[0]), complex(y[0]), np.complex128)
    assert ours[0] != fused  # ac - bd, each product rounded, is not the correctly rounded real part
    spec = REGISTRY[("", "ScatterND", 18)]
    rtol, atol = tolerance(spec, C.Case("ScatterND", [x, np.array([[0]]), y], {"reduction": "mul"}))
    assert (rtol, atol) == (6.7e-16, 2.3e-308)
    assert np.isclose(fused, ours[0], rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------- 0.0 against -0.0 under max/min


def _ties(spec, case) -> bool:
    """Whether the spec's loop compares 0.0 with -0.0 at some element, one Python float at a time."""
    data, updates = case.inputs[0], case.inputs[2]
    if data.dtype.kind != "f" and str(data.dtype) != "bfloat16":  # no signed zero: ints, bool, strings
        return False
    out = {}
    better = (lambda a, b: a > b) if reduction_of(spec, case.attrs) == "max" else (lambda a, b: a < b)
    for target, at in _writes(spec, case):
        a = out.get(target, float(data[target]))
        b = float(updates[at])
        if a == 0 and b == 0 and math.copysign(1, a) != math.copysign(1, b):
            return True
        out[target] = a if a != a or better(a, b) else b  # NaN stays; the first tie ends the walk
    return False


def _numpys_rule(spec, case) -> np.ndarray:
    """The loop with the docs' tie rule: the update wins a tie, except on float16, where the output's value does."""
    data, updates = case.inputs[0], case.inputs[2]
    out = data.copy()
    better = (lambda a, b: a > b) if reduction_of(spec, case.attrs) == "max" else (lambda a, b: a < b)
    keep_on_tie = data.dtype == np.float16
    for target, at in _writes(spec, case):
        a, b = float(out[target]), float(updates[at])
        if b != b:
            out[target] = updates[at]
        elif a != a or better(a, b) or (keep_on_tie and a == b):
            continue
        else:
            out[target] = updates[at]
    return out


def test_signed_zero_tie_is_exactly_the_cases_whose_loop_compares_zeros_of_both_signs(scatters_all):
    tied = []
    for c in scatters_all:
        expected = c.valid and reduction_of(c.spec, c.case.attrs) in ("max", "min") and _ties(c.spec, c.case)
        assert ("signed_zero_tie" in c.tags) == expected, c.name
        if expected:
            tied.append(c)
    assert {c.spec.name for c in tied} == {"ScatterND-18", "ScatterElements-18"}
    for name in ("ScatterND-18", "ScatterElements-18"):  # the targeted ones: every float width, max and min
        have = {(str(c.case.inputs[0].dtype), reduction_of(c.spec, c.case.attrs)) for c in tied if c.spec.name == name}
        assert have >= {(t, r) for t in ("float32", "float64", "float16", "bfloat16") for r in ("max", "min")}, name


def test_a_tie_gives_what_the_docs_say(scatters_all):
    """The suite's expected outputs where zeros tie follow the docs' rule; the issue's example gives 0.0."""
    tied = [c for c in scatters_all if "signed_zero_tie" in c.tags]
    for c in tied:
        want = _numpys_rule(c.spec, c.case)
        assert want.tobytes() == c.result.tobytes(), c.name  # bits: the sign of each zero
    for dtype in (np.float32, np.float64, "bfloat16", np.float16):
        data = np.array([-1.0], C.DTYPES[dtype] if isinstance(dtype, str) else dtype)
        updates = np.array([-0.0, 0.0], data.dtype)
        for out in (
            gs.scatter_nd(data, np.array([[0], [0]]), updates, reduction="max"),
            gs.scatter_elements(data, np.array([0, 0]), updates, reduction="max"),
        ):
            assert out[0] == 0 and bool(np.signbit(out.astype(np.float32))[0]) == (data.dtype == np.float16), dtype
