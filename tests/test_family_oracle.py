"""GatherElements, ScatterElements, Scatter and TensorScatter against the loop oracle, bit for bit.

Layers (shared/STYLE.md "Tests in layers"), for the family alone:

* sampled cases: every version, every data type its text allows, int32 and int64 indices,
  every reduction the version and the type accept; ranks 1-4 (TensorScatter 2-4), empty
  dims, negative indices, duplicates; through ``run_node`` at its since_version and one later
  opset where it is still in effect (Scatter-9: 9 and 10) and through the public kernel, each
  compared with tests/oracle.py;
* a table of invalid inputs: exact error class (and its builtin), the op and version that
  refused, and the fields that say where (``input``, ``position``, ``value``, ...); the
  oracle must refuse each one with the builtin too;
* generated out-of-bounds indices and write indices at a known first position;
* hypothesis properties: GatherElements inverts ScatterElements on unique positions, the
  README's shape rule is the output shape, inputs are never written, and one thread gives
  the bits two threads give.

The cases are drawn here, not by ``gather_scatter.check.cases``: neither the generator nor the
oracle shares code with the library. Type lists are copied from the spec texts' "Type
constraints" and checked against ``onnx.defs``.
"""

from __future__ import annotations

import math
import warnings
import zlib
from dataclasses import dataclass
from typing import Any, Callable

import ml_dtypes
import numpy as np
import onnx
import oracle
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gather_scatter as gs
from gather_scatter.resources import threads as _parallel

# ----------------------------------------------------------------------------- the versions

DTYPES: dict[str, Any] = {
    "bool": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
    "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
    "float16": np.float16, "float": np.float32, "double": np.float64, "bfloat16": ml_dtypes.bfloat16,
    "complex64": np.complex64, "complex128": np.complex128, "string": object,
    "float8e4m3fn": ml_dtypes.float8_e4m3fn, "float8e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "float8e5m2": ml_dtypes.float8_e5m2, "float8e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
    "float8e8m0": ml_dtypes.float8_e8m0fnu, "int4": ml_dtypes.int4, "uint4": ml_dtypes.uint4,
    "float4e2m1": ml_dtypes.float4_e2m1fn,
}
# "Type constraints" of GatherElements-11, ScatterElements-11 and Scatter-9 ...
TYPES_11 = ("bool", "complex128", "complex64", "double", "float", "float16", "int16", "int32", "int64", "int8",
            "string", "uint16", "uint32", "uint64", "uint8")
TYPES_13 = TYPES_11 + ("bfloat16",)  # ... of GatherElements-13 and ScatterElements-13/16/18 ...
FOUR_AND_EIGHT_BITS = ("float4e2m1", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float8e8m0",
                       "int4", "uint4")
TYPES_24 = TYPES_13 + FOUR_AND_EIGHT_BITS  # ... and of TensorScatter-24
INDEX_DTYPES = (np.int32, np.int64)


@dataclass(frozen=True)
class Version:
    op: str
    since: int
    opsets: tuple[int, ...]  # where this version is the one in effect (the ones we run)
    types: tuple[str, ...]
    reductions: tuple[str, ...] | None  # None: the version has no 'reduction' attribute

    @property
    def name(self) -> str:
        return f"{self.op}-{self.since}"


VERSIONS = [
    Version("GatherElements", 11, (11, 12), TYPES_11, None),
    Version("GatherElements", 13, (13,), TYPES_13, None),
    Version("ScatterElements", 11, (11, 12), TYPES_11, None),
    Version("ScatterElements", 13, (13,), TYPES_13, None),
    Version("ScatterElements", 16, (16,), TYPES_13, ("none", "add", "mul")),
    Version("ScatterElements", 18, (18, 24), TYPES_13, ("none", "add", "mul", "max", "min")),
    Version("Scatter", 9, (9, 10), TYPES_11, None),
    Version("TensorScatter", 24, (24,), TYPES_24, None),
]
ORACLE: dict[str, Callable] = {"GatherElements": oracle.gather_elements, "ScatterElements": oracle.scatter_elements,
                               "Scatter": oracle.scatter, "TensorScatter": oracle.tensor_scatter}
# The public kernels implement the newest version, whose types and reductions include every
# older version's, so each case of every version runs through them too (Scatter-9 is
# ScatterElements without a reduction).
PUBLIC: dict[str, Callable] = {"GatherElements": gs.gather_elements, "ScatterElements": gs.scatter_elements,
                               "Scatter": gs.scatter_elements, "TensorScatter": gs.tensor_scatter}


def test_type_lists_are_the_schemas():
    """The tables above are the texts' type constraints, which are onnx's schemas."""
    names = {"tensor(float4e2m1)": "float4e2m1"}
    for v in VERSIONS:
        schema = onnx.defs.get_schema(v.op, v.since)
        assert schema.since_version == v.since
        (t,) = [c for c in schema.type_constraints if c.type_param_str == "T"]
        assert {names.get(s, s[len("tensor("):-1]) for s in t.allowed_type_strs} == set(v.types), v.name
        for opset in v.opsets:
            assert onnx.defs.get_schema(v.op, opset).since_version == v.since
    assert onnx.defs.get_schema("Scatter", 11).deprecated  # from opset 11 Scatter is gone (README)


def reductions_for(v: Version, type_name: str) -> tuple[str | None, ...]:
    """The reductions to sample: the README refuses string mul and complex max/min."""
    if v.reductions is None:
        return (None,)
    refused = {"string": ("mul",), "complex64": ("max", "min"), "complex128": ("max", "min")}.get(type_name, ())
    return tuple(r for r in v.reductions if r not in refused)


# ----------------------------------------------------------------------------- sampling

Pick = Callable[[int, int], int]  # pick(lo, hi): an int in [lo, hi]; numpy's or hypothesis's


def rng_pick(rng: np.random.Generator) -> Pick:
    return lambda lo, hi: int(rng.integers(lo, hi + 1))


STRINGS = ("", "a", "b", "ab", "ba", "Z", "é", "日本", "🙂", "a\x00b", "zz" * 5)
SPECIAL_FLOATS = (np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e-30)


def _floats(rng: np.random.Generator, n: int) -> np.ndarray:
    x = np.round(rng.standard_normal(n) * 4, 2)
    special = rng.random(n) < 0.1
    x[special] = rng.choice(SPECIAL_FLOATS, size=int(special.sum()))
    return x


def values(rng: np.random.Generator, type_name: str, shape: tuple[int, ...]) -> np.ndarray:
    """Values of one ONNX type: specials (NaN, infinities, signed zeros, extreme integers) included."""
    n, dtype = math.prod(shape), np.dtype(DTYPES[type_name])
    if type_name == "string":
        out = np.empty(n, dtype=object)
        out[:] = [STRINGS[i] for i in rng.integers(len(STRINGS), size=n)]
    elif type_name == "bool":
        out = rng.random(n) < 0.5
    elif type_name in FOUR_AND_EIGHT_BITS:  # every bit pattern (4-bit types: the low nibble)
        out = rng.integers(0, 256 if type_name.startswith("float8") else 16, size=n, dtype=np.uint8).view(dtype)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        small = rng.integers(max(info.min, -3), 4, size=n)
        large = rng.integers(info.min, info.max, size=n, endpoint=True, dtype=dtype)
        out = np.where(rng.random(n) < 0.2, large, small.astype(dtype))
    elif dtype.kind == "c":
        out = np.empty(n, dtype=np.complex128)
        out.real, out.imag = _floats(rng, n), _floats(rng, n)
    else:
        out = _floats(rng, n)
    with np.errstate(over="ignore"):  # 1e30 is inf in float16: meant
        return np.asarray(out).astype(dtype).reshape(shape)


def _dim(pick: Pick, low: int = 1, high: int = 4) -> int:
    return 0 if pick(0, 9) == 9 else pick(low, high)  # one dim in ten is empty


def elements_layout(pick: Pick) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """(data shape, indices shape, axis) by the README's rule: same rank 1-4, indices no larger
    than data off the axis (often equal, sometimes smaller), free on the axis."""
    r = pick(1, 4)
    data_shape = tuple(_dim(pick) for _ in range(r))
    axis = pick(-r, r - 1)
    ax = axis % r
    shape = [pick(0, 4) if d == ax else (data_shape[d] if pick(0, 1) else pick(0, data_shape[d])) for d in range(r)]
    if data_shape[ax] == 0:
        shape[ax] = 0  # an empty axis has no position to name
    return data_shape, tuple(shape), axis


def elements_indices(rng, size: int, shape: tuple[int, ...], index_dtype) -> np.ndarray:
    """Indices in [-size, size-1]: negatives and duplicates included."""
    if size == 0:
        return np.zeros(shape, dtype=index_dtype)
    return rng.integers(-size, size, size=shape).astype(index_dtype)


@dataclass
class Case:
    op: str
    inputs: list[np.ndarray]
    attrs: dict[str, Any]

    def describe(self) -> str:
        shapes = ", ".join(f"{a.dtype}{list(a.shape)}" for a in self.inputs)
        return f"{self.op}({shapes}) {self.attrs}"


def elements_case(pick: Pick, rng, op: str, type_name: str, index_dtype, reduction: str | None) -> Case:
    data_shape, shape, axis = elements_layout(pick)
    data = values(rng, type_name, data_shape)
    indices = elements_indices(rng, data_shape[axis], shape, index_dtype)
    attrs: dict[str, Any] = {"axis": axis} if axis or pick(0, 1) else {}  # the default, left out or not
    if reduction is not None and (reduction != "none" or pick(0, 1)):
        attrs["reduction"] = reduction
    if op == "GatherElements":
        return Case(op, [data, indices], attrs)
    return Case(op, [data, indices, values(rng, type_name, shape)], attrs)


def tensor_scatter_case(pick: Pick, rng, type_name: str, mode: str | None = None,
                        with_write: bool | None = None) -> Case:
    """Cache rank 2-4, the sequence axis 1..r-1 (positive or negative), batch 0-3, other dims
    0-4, max_sequence_length 0-5, sequence_length 0..max; write indices valid for the mode
    (circular ones up to three turns past the end), or absent."""
    r = pick(2, 4)
    ax = pick(1, r - 1)
    axis = ax - r if pick(0, 1) else ax
    mode = mode or ("linear", "circular")[pick(0, 1)]
    past_shape = [_dim(pick, 1, 3) for _ in range(r)]
    past_shape[ax] = pick(0, 5)
    length = pick(0, past_shape[ax])
    update_shape = list(past_shape)
    update_shape[ax] = length
    past, update = values(rng, type_name, tuple(past_shape)), values(rng, type_name, tuple(update_shape))
    inputs = [past, update]
    if with_write if with_write is not None else pick(0, 2) > 0:
        top = past_shape[ax] - length if mode == "linear" else 3 * past_shape[ax] + 1
        inputs.append(rng.integers(0, top + 1, size=past_shape[0]).astype(np.int64))
    attrs: dict[str, Any] = {}
    if axis not in (-2, r - 2) or pick(0, 1):
        attrs["axis"] = axis
    if mode != "linear" or pick(0, 1):
        attrs["mode"] = mode
    return Case("TensorScatter", inputs, attrs)


def sample(v: Version, type_name: str, index_dtype, reduction, rng, mode=None) -> Case:
    if v.op == "TensorScatter":
        return tensor_scatter_case(rng_pick(rng), rng, type_name, mode)
    return elements_case(rng_pick(rng), rng, v.op, type_name, index_dtype, reduction)


def _rng(*key) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # overflow, inf * 0: the answer, not a fault
        return fn(*args, **kwargs)


def _expected(case: Case) -> np.ndarray:
    return _quiet(ORACLE[case.op], *case.inputs, **case.attrs)


def _public(case: Case) -> np.ndarray:
    return _quiet(PUBLIC[case.op], *case.inputs, **case.attrs)


def _copies(inputs):
    return [np.array(a, copy=True) for a in inputs]


def _assert_unchanged(inputs, copies, what: str) -> None:
    for k, (array, copy) in enumerate(zip(inputs, copies)):
        oracle.assert_same(array, copy, f"{what}: input {k} was written")


# ----------------------------------------------------------------------------- sampled cases

CASES_PER_COMBINATION = 3
TS_CASES_PER_TYPE = 12
PARAMS = [(v, t) for v in VERSIONS for t in v.types]


@pytest.mark.parametrize(("v", "type_name"), PARAMS, ids=[f"{v.name}-{t}" for v, t in PARAMS])
def test_sampled_cases_match_the_oracle(v: Version, type_name: str):
    rng = _rng(v.name, type_name)
    if v.op == "TensorScatter":
        combos = [(np.int64, None, ("linear", "circular")[i % 2]) for i in range(TS_CASES_PER_TYPE)]
    else:
        combos = [(ind, red, None) for ind in INDEX_DTYPES for red in reductions_for(v, type_name)
                  for _ in range(CASES_PER_COMBINATION)]
    for index_dtype, reduction, mode in combos:
        case = sample(v, type_name, index_dtype, reduction, rng, mode)
        expected = _expected(case)
        copies = _copies(case.inputs)
        for opset in v.opsets:
            actual = _quiet(gs.run_node, v.op, case.inputs, case.attrs, opset=opset)
            oracle.assert_same(actual, expected, f"{v.name} at opset {opset}: {case.describe()}")
        oracle.assert_same(_public(case), expected, f"public kernel: {case.describe()}")
        _assert_unchanged(case.inputs, copies, case.describe())


def test_sampling_reaches_what_it_should():
    """The sampler itself: over a few hundred draws, every rank, every axis sign, empty dims,
    negative and duplicate indices, smaller-than-data indices, and for TensorScatter both
    modes, absent write indices and circular wrap-around all occur."""
    rng = _rng("reach")
    seen: set[str] = set()
    for _ in range(300):
        case = elements_case(rng_pick(rng), rng, "ScatterElements", "int32", np.int64, None)
        data, indices, _ = case.inputs
        axis = case.attrs.get("axis", 0)
        seen |= {f"rank{data.ndim}", "negative axis" if axis < 0 else "axis >= 0"}
        seen |= {"empty"} if 0 in data.shape or 0 in indices.shape else set()
        seen |= {"negative index"} if (indices < 0).any() else set()
        ax = axis % data.ndim
        off_axis = [(i, d) for k, (i, d) in enumerate(zip(indices.shape, data.shape)) if k != ax]
        seen |= {"smaller"} if any(i < d for i, d in off_axis) else set()
        if indices.size:
            rows = np.moveaxis(indices % data.shape[ax], ax, -1).reshape(-1, indices.shape[ax])
            seen |= {"duplicate"} if any(len(set(row)) < len(row) for row in rows.tolist()) else set()
        ts = tensor_scatter_case(rng_pick(rng), rng, "float")
        past, update, *write = ts.inputs
        seen.add(ts.attrs.get("mode", "linear"))
        seen.add("write" if write else "no write")
        tax = ts.attrs.get("axis", -2) % past.ndim
        if write and ts.attrs.get("mode") == "circular" and (write[0] + update.shape[tax] > past.shape[tax]).any():
            seen.add("wraps")
    assert seen >= {"rank1", "rank2", "rank3", "rank4", "negative axis", "axis >= 0", "empty", "negative index",
                    "smaller", "duplicate", "linear", "circular", "write", "no write", "wraps"}


def _layouts(a: np.ndarray):
    """The same values in other memory layouts: Fortran order, a strided view, negative strides."""
    yield "fortran", np.asfortranarray(a)
    if a.ndim and a.shape[-1]:
        yield "strided", np.repeat(a, 2, axis=-1)[..., ::2]
    yield "reversed", np.flip(np.flip(a).copy())


@pytest.mark.parametrize("v", VERSIONS, ids=lambda v: v.name)
def test_any_memory_layout_gives_the_same_bits(v: Version):
    """Each input in turn as a non-contiguous view (the kernels pick paths by layout)."""
    rng = _rng("layout", v.name)
    for k in range(2 * len(v.types)):
        type_name = v.types[k % len(v.types)]
        reductions = reductions_for(v, type_name)
        case = sample(v, type_name, INDEX_DTYPES[k % 2], reductions[k % len(reductions)], rng,
                      ("linear", "circular")[k % 2])
        expected = _expected(case)
        for which, array in enumerate(case.inputs):
            for layout, view in _layouts(array):
                inputs = [view if j == which else x for j, x in enumerate(case.inputs)]
                what = f"input {which} {layout}: {case.describe()}"
                oracle.assert_same(_quiet(PUBLIC[v.op], *inputs, **case.attrs), expected, what)
                oracle.assert_same(_quiet(gs.run_node, v.op, inputs, case.attrs, opset=v.since), expected, what)


def test_extreme_index_values():
    """int32/int64 minimum and maximum as indices are out of bounds (no wrap-around makes them
    valid), reported with their exact value; huge circular write indices wrap as the text's
    Python arithmetic does (no int64 overflow of write_indices[b] + sequence_idx)."""
    data = np.arange(12, dtype=np.float64).reshape(3, 4)
    for dtype in INDEX_DTYPES:
        for value in (np.iinfo(dtype).min, np.iinfo(dtype).max):
            indices = np.array([[0, 1], [value, 2]], dtype=dtype)
            for call in (lambda: gs.gather_elements(data, indices, axis=1),
                         lambda: gs.scatter_elements(data, indices, np.ones((2, 2)), axis=1, reduction="add"),
                         lambda: gs.run_node("Scatter", [data, indices, np.ones((2, 2))], {"axis": 1}, opset=9)):
                with pytest.raises(gs.IndexOutOfBoundsError) as info:
                    call()
                assert info.value.position == (1, 0) and info.value.value == int(value), str(info.value)
    past = np.arange(30, dtype=np.float32).reshape(2, 5, 3)
    update = -np.ones((2, 3, 3), dtype=np.float32)
    top = np.iinfo(np.int64).max
    for write in ([top, top - 1], [top - 2, 7], [2**62, 0]):
        write = np.array(write, dtype=np.int64)
        expected = oracle.tensor_scatter(past, update, write, axis=1, mode="circular")
        oracle.assert_same(gs.tensor_scatter(past, update, write, axis=1, mode="circular"), expected, str(write))
        with pytest.raises(gs.IndexOutOfBoundsError) as info:  # in linear mode: no room at all
            gs.tensor_scatter(past, update, write, axis=1)
        assert info.value.position == (0,) and info.value.value == int(write[0])


DUPLICATE_GRID = [(t, r) for t in ("float16", "bfloat16", "bool", "string", "int8", "uint64", "float")
                  for r in ("none", "add", "mul", "max", "min") if (t, r) != ("string", "mul")]  # refused: INVALID


@pytest.mark.parametrize(("type_name", "reduction"), DUPLICATE_GRID, ids=[f"{t}-{r}" for t, r in DUPLICATE_GRID])
def test_many_duplicates_on_few_cells(type_name: str, reduction: str):
    """A reduction over long chains of duplicates (row-major order; half types round after
    every update; integers wrap; strings concatenate in order) on both index types."""
    rng = _rng("dups", type_name, reduction)
    data = values(rng, type_name, (3, 2))
    for index_dtype in INDEX_DTYPES:
        indices = rng.integers(-3, 3, size=(40, 2)).astype(index_dtype)
        updates = values(rng, type_name, (40, 2))
        expected = _quiet(oracle.scatter_elements, data, indices, updates, 0, reduction)
        oracle.assert_same(_quiet(gs.scatter_elements, data, indices, updates, reduction=reduction), expected,
                           f"{type_name} {reduction}")
        oracle.assert_same(_quiet(gs.run_node, "ScatterElements", [data, indices, updates], {"reduction": reduction},
                                  opset=18), expected)


# ----------------------------------------------------------------------------- invalid inputs

BUILTIN = {gs.IndexOutOfBoundsError: IndexError, gs.ShapeError: ValueError, gs.InvalidAttributeError: ValueError,
           gs.DTypeError: TypeError, gs.UnsupportedOpError: LookupError}


@dataclass(frozen=True)
class Invalid:
    name: str
    op: str
    opset: int
    inputs: tuple
    attrs: dict
    error: type
    fields: dict  # besides op and since_version
    oracle: bool = True  # the oracle (no versions, no dtype checks of T) refuses it as well
    public: bool = True  # the public kernel (the newest version) refuses it as well


_D = np.arange(12, dtype=np.float32).reshape(3, 4)
_I = np.array([[0, 3], [-4, 1]], dtype=np.int64)
_U = np.array([[7, 8], [9, 10]], dtype=np.float32)
_S = np.array([["a", "b"], ["c", "d"]], dtype=object)
_C = np.array([[1j, 2], [3, 4j]], dtype=np.complex64)
_PAST = np.zeros((3, 2, 5, 4), dtype=np.float32)  # batch 3, heads 2, max_sequence_length 5
_UPD = np.ones((3, 2, 2, 4), dtype=np.float32)  # sequence_length 2
_W = np.array([0, 1, 3], dtype=np.int64)


def _oob(value: int, position: tuple, size: int, axis: int) -> dict:
    return {"input": "indices", "position": position, "value": value, "valid_range": (-size, size - 1), "axis": axis}


INVALID = [
    Invalid("gather_elements_oob_first_of_two", "GatherElements", 13, (_D, np.array([[0, 9], [-5, 1]])), {"axis": 1},
            gs.IndexOutOfBoundsError, _oob(9, (0, 1), 4, 1)),
    Invalid("gather_elements_11_negative_oob_int32", "GatherElements", 11, (_D, np.array([[0, 1], [-5, 0]], np.int32)),
            {"axis": -1}, gs.IndexOutOfBoundsError, _oob(-5, (1, 0), 4, 1)),
    Invalid("gather_elements_oob_axis0", "GatherElements", 13, (_D, np.array([[2, 0, 3, 0]])), {},
            gs.IndexOutOfBoundsError, _oob(3, (0, 2), 3, 0)),
    Invalid("scatter_elements_oob", "ScatterElements", 18, (_D, np.array([[0, 3], [-4, 4]]), _U), {"axis": 1},
            gs.IndexOutOfBoundsError, _oob(4, (1, 1), 4, 1)),
    Invalid("scatter_elements_16_oob_with_add", "ScatterElements", 16, (_D, np.array([[-4, 0], [1, 0]]), _U),
            {"reduction": "add"}, gs.IndexOutOfBoundsError, _oob(-4, (0, 0), 3, 0)),
    Invalid("scatter_9_oob", "Scatter", 9, (_D, np.array([[3, 0]], np.int32), _U[:1]), {},
            gs.IndexOutOfBoundsError, _oob(3, (0, 0), 3, 0)),
    Invalid("scatter_9_oob_at_opset_10", "Scatter", 10, (_D, np.array([[0, 1], [0, -5]]), _U), {"axis": 1},
            gs.IndexOutOfBoundsError, _oob(-5, (1, 1), 4, 1)),
    Invalid("gather_elements_rank_mismatch", "GatherElements", 13, (_D, np.array([0, 1])), {},
            gs.ShapeError, {"input": "indices"}),
    Invalid("scatter_elements_rank_mismatch", "ScatterElements", 11, (_D, _I[None], _U[None]), {},
            gs.ShapeError, {"input": "indices"}),
    Invalid("gather_elements_indices_larger_off_axis", "GatherElements", 13, (_D, np.zeros((4, 2), np.int64)),
            {"axis": 1}, gs.ShapeError, {}),
    Invalid("scatter_elements_updates_shape", "ScatterElements", 18, (_D, _I, np.zeros((2, 3), np.float32)),
            {"axis": 1}, gs.ShapeError, {"input": "updates"}),
    Invalid("scatter_9_updates_rank", "Scatter", 9, (_D, _I % 3, _U[0]), {}, gs.ShapeError, {"input": "updates"}),
    Invalid("gather_elements_axis_out_of_range", "GatherElements", 13, (_D, _I), {"axis": 2},
            gs.InvalidAttributeError, {"input": "axis", "value": 2}),
    Invalid("scatter_elements_axis_out_of_range", "ScatterElements", 11, (_D, _I, _U), {"axis": -3},
            gs.InvalidAttributeError, {"input": "axis", "value": -3}),
    Invalid("scatter_elements_16_has_no_max", "ScatterElements", 16, (_D, _I % 3, _U), {"reduction": "max"},
            gs.InvalidAttributeError, {"input": "reduction", "value": "max"}, oracle=False, public=False),
    Invalid("scatter_elements_13_has_no_reduction", "ScatterElements", 13, (_D, _I % 3, _U), {"reduction": "add"},
            gs.InvalidAttributeError, {"input": "reduction"}, oracle=False, public=False),
    Invalid("scatter_elements_unknown_reduction", "ScatterElements", 18, (_D, _I % 3, _U), {"reduction": "sum"},
            gs.InvalidAttributeError, {"input": "reduction", "value": "sum"}),
    Invalid("scatter_elements_string_mul", "ScatterElements", 18, (_S, np.zeros((2, 2), np.int64), _S),
            {"reduction": "mul"}, gs.DTypeError, {}),
    Invalid("scatter_elements_complex_max", "ScatterElements", 18, (_C, np.zeros((2, 2), np.int64), _C),
            {"reduction": "max"}, gs.DTypeError, {}),
    Invalid("scatter_elements_complex_min_int32", "ScatterElements", 18, (_C, np.zeros((2, 2), np.int32), _C),
            {"reduction": "min"}, gs.DTypeError, {}),
    Invalid("scatter_at_opset_11", "Scatter", 11, (_D, _I % 3, _U), {}, gs.UnsupportedOpError, {},
            oracle=False, public=False),
    Invalid("tensor_scatter_negative_write_index", "TensorScatter", 24, (_PAST, _UPD, np.array([0, -1, -2])), {},
            gs.IndexOutOfBoundsError, {"input": "write_indices", "position": (1,), "value": -1}),
    Invalid("tensor_scatter_negative_write_index_circular", "TensorScatter", 24, (_PAST, _UPD, np.array([9, 0, -3])),
            {"mode": "circular"}, gs.IndexOutOfBoundsError, {"input": "write_indices", "position": (2,), "value": -3}),
    Invalid("tensor_scatter_linear_past_the_cache", "TensorScatter", 24, (_PAST, _UPD, np.array([3, 4, 5])),
            {"mode": "linear"}, gs.IndexOutOfBoundsError, {"input": "write_indices", "position": (1,), "value": 4}),
    Invalid("tensor_scatter_linear_by_default", "TensorScatter", 24, (_PAST, _UPD, np.array([0, 0, 6])), {},
            gs.IndexOutOfBoundsError, {"input": "write_indices", "position": (2,), "value": 6}),
    Invalid("tensor_scatter_axis_0", "TensorScatter", 24, (_PAST, _UPD, _W), {"axis": 0},
            gs.InvalidAttributeError, {"input": "axis", "value": 0}),
    Invalid("tensor_scatter_axis_minus_rank", "TensorScatter", 24, (_PAST, _UPD, _W), {"axis": -4},
            gs.InvalidAttributeError, {"input": "axis", "value": -4}),
    Invalid("tensor_scatter_axis_out_of_range", "TensorScatter", 24, (_PAST, _UPD, _W), {"axis": 4},
            gs.InvalidAttributeError, {"input": "axis", "value": 4}),
    Invalid("tensor_scatter_unknown_mode", "TensorScatter", 24, (_PAST, _UPD, _W), {"mode": "ring"},
            gs.InvalidAttributeError, {"input": "mode", "value": "ring"}),
    Invalid("tensor_scatter_longer_than_cache", "TensorScatter", 24, (_PAST, np.ones((3, 2, 6, 4), np.float32)),
            {}, gs.ShapeError, {"input": "update"}),
    Invalid("tensor_scatter_update_off_axis", "TensorScatter", 24, (_PAST, np.ones((3, 1, 2, 4), np.float32)),
            {}, gs.ShapeError, {"input": "update"}),
    Invalid("tensor_scatter_rank_mismatch", "TensorScatter", 24, (_PAST, _UPD[0]), {}, gs.ShapeError,
            {"input": "update"}),
    Invalid("tensor_scatter_write_indices_shape", "TensorScatter", 24, (_PAST, _UPD, np.zeros(4, np.int64)), {},
            gs.ShapeError, {"input": "write_indices"}),
    Invalid("tensor_scatter_write_indices_int32", "TensorScatter", 24, (_PAST, _UPD, _W.astype(np.int32)), {},
            gs.DTypeError, {"input": "write_indices"}),
]


@pytest.mark.parametrize("row", INVALID, ids=[row.name for row in INVALID])
def test_invalid_input_table(row: Invalid):
    inputs = [np.asarray(x) for x in row.inputs]
    copies = _copies(inputs)
    calls = [("run_node", lambda: gs.run_node(row.op, inputs, row.attrs, opset=row.opset))]
    if row.public:
        calls.append(("public kernel", lambda: PUBLIC[row.op](*inputs, **row.attrs)))
    for how, call in calls:
        with pytest.raises(gs.GatherScatterError) as info:
            call()
        err = info.value
        assert type(err) is row.error, f"{how}: {type(err).__name__}: {err}"
        assert isinstance(err, BUILTIN[row.error])
        if row.error is gs.UnsupportedOpError:
            assert "ScatterElements" in str(err)
            continue
        public_op = {"Scatter": "ScatterElements"}.get(row.op, row.op) if how == "public kernel" else row.op
        since = {"GatherElements": 13, "ScatterElements": 18, "TensorScatter": 24}[public_op] \
            if how == "public kernel" else max(v.since for v in VERSIONS if v.op == row.op and v.since <= row.opset)
        assert (err.op, err.since_version) == (public_op, since), how
        assert str(err).startswith(f"{public_op}-{since}: "), str(err)
        for name, want in row.fields.items():
            got = getattr(err, name)
            assert got == want and type(got) is type(want), f"{how}: field {name}: {got!r} != {want!r} ({err})"
        _assert_unchanged(inputs, copies, how)
    if row.oracle:
        with pytest.raises(BUILTIN[row.error]) as want:
            ORACLE[row.op](*inputs, **row.attrs)
        if "position" in row.fields:
            assert want.value.position == row.fields["position"]


def test_circular_accepts_what_linear_refuses():
    """The write indices of the 'linear past the cache' row are valid in circular mode."""
    write = np.array([3, 4, 5], dtype=np.int64)
    expected = oracle.tensor_scatter(_PAST, _UPD, write, mode="circular")
    oracle.assert_same(gs.run_node("TensorScatter", [_PAST, _UPD, write], {"mode": "circular"}, opset=24), expected)
    assert expected[1, :, 4].all() and expected[1, :, 0].all() and expected[2, :, 0].all() and expected[2, :, 1].all()


def _elements_versions():
    return [v for v in VERSIONS if v.op != "TensorScatter"]


@pytest.mark.parametrize("v", _elements_versions(), ids=lambda v: v.name)
def test_generated_out_of_bounds_first_position(v: Version):
    """One to three indices pushed out of range (above or below): the error names the first in
    row-major order, its value and range, for both index types; the oracle agrees."""
    rng = _rng("oob", v.name)
    reductions = reductions_for(v, "int32")
    checked = 0
    while checked < 16:
        case = sample(v, "int32", INDEX_DTYPES[checked % 2], reductions[checked % len(reductions)], rng)
        data, indices = case.inputs[0], case.inputs[1].copy()
        if indices.size == 0:
            continue
        axis = case.attrs.get("axis", 0)
        size = data.shape[axis]
        flat = indices.reshape(-1)
        spots = sorted(rng.choice(flat.size, size=min(flat.size, int(rng.integers(1, 4))), replace=False))
        for at in spots:
            flat[at] = size + int(rng.integers(0, 3)) if rng.random() < 0.5 else -size - 1 - int(rng.integers(0, 3))
        first = tuple(int(i) for i in np.unravel_index(spots[0], indices.shape))
        inputs = [data, indices, *case.inputs[2:]]
        with pytest.raises(IndexError) as want:
            ORACLE[v.op](*inputs, **case.attrs)
        assert want.value.position == first
        for opset in v.opsets:
            with pytest.raises(gs.IndexOutOfBoundsError) as got:
                gs.run_node(v.op, inputs, case.attrs, opset=opset)
            err = got.value
            assert (err.op, err.since_version, err.input) == (v.op, v.since, "indices"), str(err)
            assert err.position == first and type(err.value) is int and err.value == int(flat[spots[0]]), str(err)
            assert err.valid_range == (-size, size - 1) and err.axis == axis % data.ndim, str(err)
        checked += 1


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_generated_bad_write_index_first_position(mode: str):
    """TensorScatter: negative write indices (both modes) or, in linear mode, one leaving no
    room for the update; the first bad batch entry is named; the oracle agrees."""
    rng = _rng("write", mode)
    checked = 0
    while checked < 20:
        case = tensor_scatter_case(rng_pick(rng), rng, "float16", mode, with_write=True)
        past, update, write = case.inputs
        if write.size == 0:
            continue
        ax = case.attrs.get("axis", -2) % past.ndim
        room = past.shape[ax] - update.shape[ax]
        write = write.copy()
        spots = sorted(rng.choice(write.size, size=min(write.size, int(rng.integers(1, 3))), replace=False))
        for at in spots:
            negative = mode == "circular" or rng.random() < 0.5
            write[at] = -1 - int(rng.integers(0, 5)) if negative else room + 1 + int(rng.integers(0, 3))
        with pytest.raises(IndexError) as want:
            oracle.tensor_scatter(past, update, write, **case.attrs)
        assert want.value.position == (spots[0],)
        for call in (lambda: gs.run_node("TensorScatter", [past, update, write], case.attrs, opset=24),
                     lambda: gs.tensor_scatter(past, update, write, **case.attrs)):
            with pytest.raises(gs.IndexOutOfBoundsError) as got:
                call()
            err = got.value
            assert (err.op, err.since_version, err.input) == ("TensorScatter", 24, "write_indices"), str(err)
            assert err.position == (int(spots[0]),) and err.value == int(write[spots[0]]) and type(err.value) is int
        checked += 1


# ----------------------------------------------------------------------------- properties

PROPERTIES = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CLASSIC = st.sampled_from(TYPES_13)


def _hyp_pick(draw) -> Pick:
    return lambda lo, hi: draw(st.integers(lo, hi))


@st.composite
def unique_scatters(draw) -> Case:
    """ScatterElements whose indices name distinct positions on every line along the axis (a
    prefix of a permutation, some written negative): no two updates meet."""
    pick = _hyp_pick(draw)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    data_shape, shape, axis = elements_layout(pick)
    ax = axis % len(data_shape)
    shape = shape[:ax] + (min(shape[ax], data_shape[ax]),) + shape[ax + 1:]
    window = shape[:ax] + (data_shape[ax],) + shape[ax + 1:]
    order = np.argsort(rng.random(window), axis=ax)
    indices = np.take(order, np.arange(shape[ax]), axis=ax)
    indices = np.where(rng.random(indices.shape) < 0.3, indices - data_shape[ax], indices)
    type_name = draw(CLASSIC)
    indices = indices.astype(draw(st.sampled_from(INDEX_DTYPES)))
    return Case("ScatterElements", [values(rng, type_name, data_shape), indices, values(rng, type_name, shape)],
                {"axis": axis})


@st.composite
def family_cases(draw) -> Case:
    """Any valid case of the family at its newest version."""
    pick = _hyp_pick(draw)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    op = draw(st.sampled_from(["GatherElements", "ScatterElements", "TensorScatter"]))
    if op == "TensorScatter":
        return tensor_scatter_case(pick, rng, draw(st.sampled_from(TYPES_24)))
    type_name = draw(CLASSIC)
    v = VERSIONS[5] if op == "ScatterElements" else VERSIONS[1]
    reduction = draw(st.sampled_from(reductions_for(v, type_name)))
    return elements_case(pick, rng, op, type_name, draw(st.sampled_from(INDEX_DTYPES)), reduction)


@PROPERTIES
@given(unique_scatters())
def test_gather_elements_inverts_scatter_elements_on_unique_positions(case):
    data, indices, updates = case.inputs
    scattered = gs.scatter_elements(data, indices, updates, **case.attrs)
    oracle.assert_same(gs.gather_elements(scattered, indices, **case.attrs), updates, case.describe())
    oracle.assert_same(scattered, oracle.scatter_elements(data, indices, updates, **case.attrs), case.describe())


def _shape_rule(case: Case) -> tuple[int, ...]:
    """README: GatherElements gives indices' shape; the scatters give data's (the cache's)."""
    return case.inputs[1].shape if case.op == "GatherElements" else case.inputs[0].shape


@PROPERTIES
@given(family_cases())
def test_output_shape_is_the_shape_rule(case):
    out = _quiet(gs.run_node, case.op, case.inputs, case.attrs, opset=24)
    assert out.shape == _shape_rule(case), case.describe()
    assert out.dtype == case.inputs[0].dtype
    shapes = [a.shape for a in case.inputs]
    assert gs.infer_shape(case.op, shapes, None, case.attrs, opset=24)[0] == out.shape


def _broken(case: Case) -> Case:
    """The case made invalid by one out-of-range index (write index), keeping everything else."""
    inputs = _copies(case.inputs)
    if case.op == "TensorScatter":
        inputs = inputs[:2] + [np.full(inputs[0].shape[0], -1, dtype=np.int64)]
        if inputs[0].shape[0] == 0:  # no batch entry to hold a bad write index: break the rank
            inputs[1] = inputs[1][..., None]
        return Case(case.op, inputs, case.attrs)
    if inputs[1].size == 0:  # no index to push out: a rank too many
        inputs[1] = inputs[1][..., None]
    else:
        inputs[1].reshape(-1)[-1] = np.iinfo(inputs[1].dtype).max
    return Case(case.op, inputs, case.attrs)


@PROPERTIES
@given(family_cases())
def test_inputs_are_never_written(case):
    copies = _copies(case.inputs)
    _quiet(gs.run_node, case.op, case.inputs, case.attrs, opset=24)
    _quiet(PUBLIC[case.op], *case.inputs, **case.attrs)
    _assert_unchanged(case.inputs, copies, case.describe())
    bad = _broken(case)
    bad_copies = _copies(bad.inputs)
    with pytest.raises(gs.GatherScatterError):
        _quiet(PUBLIC[bad.op], *bad.inputs, **bad.attrs)
    _assert_unchanged(bad.inputs, bad_copies, "error path " + bad.describe())


def _with_threads(n: int, fn):
    """``fn()`` on ``n`` threads, with chunks allowed down to one byte of work, so that the
    small hypothesis cases really split (every threshold in the kernels reads this constant)."""
    before, minimum = gs.get_num_threads(), _parallel.MIN_CHUNK_BYTES
    try:
        gs.set_num_threads(n)
        _parallel.MIN_CHUNK_BYTES = 1
        return fn()
    finally:
        gs.set_num_threads(before)
        _parallel.MIN_CHUNK_BYTES = minimum


@PROPERTIES
@given(family_cases())
def test_one_thread_and_two_give_the_same_bits(case):
    run = lambda: _quiet(PUBLIC[case.op], *case.inputs, **case.attrs)  # noqa: E731
    one, two = _with_threads(1, run), _with_threads(2, run)
    oracle.assert_same(two, one, case.describe())
    if one.dtype != object:
        assert one.tobytes() == two.tobytes(), case.describe()  # not even a NaN payload differs
    oracle.assert_same(one, _expected(case), case.describe())
