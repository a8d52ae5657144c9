"""Differential tests against onnxruntime (CPU), bit for bit.

One-node models for every version in the REGISTRY at its own opset (ai.onnx, and
com.microsoft GatherND-1, an ORT contrib op; Scatter-9 also at opset 10, and refused by both
at 11), random valid inputs compared with ``run_node``, and random invalid inputs (from
``check.cases.invalid_cases`` and ``strategies.more_invalid_cases``) that ORT must reject
while we raise the matching GatherScatterError subclass, for every data type of the version.
The pytest summary reports the cases compared per op and the cases each row skipped.

Known divergences are data: ``DIVERGENCES`` rows of (op, condition, reason, example). A
random case that meets a row's condition is skipped *and counted*; each row's example runs
in a strict-xfail test asserting ORT agrees with us, so a fixed divergence fails loudly.
Sessions use ``intra_op_num_threads=1``: ORT's ScatterND reductions race on more threads
(its own row and test below).
"""

from __future__ import annotations

import itertools
import math
import warnings
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: the differential tests need it")
onnx = pytest.importorskip("onnx", reason="onnx builds the models for the onnxruntime tests")
import oracle  # noqa: E402
import strategies as S  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from strategies import Case  # noqa: E402

import gather_scatter as gs  # noqa: E402
from gather_scatter.rules.versions import REGISTRY, SWEPT

VERSIONS = sorted(SWEPT.values(), key=lambda v: (v.op_type, v.domain, v.since_version))
NAMES = ("data", "indices", "updates")
TENSOR_TYPES = {
    "float": TensorProto.FLOAT, "double": TensorProto.DOUBLE, "float16": TensorProto.FLOAT16,
    "bfloat16": TensorProto.BFLOAT16, "int8": TensorProto.INT8, "int16": TensorProto.INT16,
    "int32": TensorProto.INT32, "int64": TensorProto.INT64, "uint8": TensorProto.UINT8,
    "uint16": TensorProto.UINT16, "uint32": TensorProto.UINT32, "uint64": TensorProto.UINT64,
    "bool": TensorProto.BOOL, "string": TensorProto.STRING, "complex64": TensorProto.COMPLEX64,
    "complex128": TensorProto.COMPLEX128,
    "float8e4m3fn": TensorProto.FLOAT8E4M3FN, "float8e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ,
    "float8e5m2": TensorProto.FLOAT8E5M2, "float8e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ,
    "float8e8m0": TensorProto.FLOAT8E8M0, "int4": TensorProto.INT4, "uint4": TensorProto.UINT4,
    "float4e2m1": TensorProto.FLOAT4E2M1,
}
CASES_PER_COMBINATION = 4  # per (version, data type, index type, reduction)
COUNTS: Counter = Counter()


# ----------------------------------------------------------------------------- running ORT


def _model(spec, case: Case, opset: int | None = None) -> bytes:
    types = [TENSOR_TYPES[S.onnx_name(a.dtype)] for a in case.inputs]
    names = NAMES[: len(case.inputs)]
    node = helper.make_node(spec.op_type, list(names), ["out"], domain=spec.domain, **case.attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, t, None) for n, t in zip(names, types)],
        [helper.make_tensor_value_info("out", types[0], None)],
    )
    opset = opset or spec.since_version
    if spec.domain:
        opsets = [helper.make_opsetid("", 13), helper.make_opsetid(spec.domain, opset)]
    else:
        opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8 if opset < 21 else 11  # the oldest IR that has the opset
    return model.SerializeToString()


_SESSIONS: dict = {}


def _session(spec, case: Case, threads: int = 1, opset: int | None = None):
    key = (spec.name, tuple(a.dtype.str for a in case.inputs), tuple(sorted(case.attrs.items())), threads, opset)
    if key not in _SESSIONS:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 4
        _SESSIONS[key] = ort.InferenceSession(_model(spec, case, opset), options, providers=["CPUExecutionProvider"])
    return _SESSIONS[key]


def _ort_value(array: np.ndarray):
    array = np.array(array, order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
    if S.onnx_name(array.dtype) == "bfloat16":  # ORT's numpy bridge has no bfloat16: pass the bits
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(np.uint16), TensorProto.BFLOAT16)
    return ort.OrtValue.ortvalue_from_numpy(array)


def run_ort(spec, case: Case, threads: int = 1, out_shape=None, opset: int | None = None) -> np.ndarray:
    """ORT's output for ``case`` (a model at ``opset``, by default the version's own); any ORT
    failure (load or run) propagates."""
    session = _session(spec, case, threads, opset)
    if S.onnx_name(case.inputs[0].dtype) != "bfloat16":
        return session.run(None, dict(zip(NAMES, case.inputs)))[0]
    feeds = {name: _ort_value(array) for name, array in zip(NAMES, case.inputs)}
    if out_shape is None:  # (invalid inputs: only whether ORT refuses matters)
        return session.run_with_ort_values(["out"], feeds)[0]
    # bfloat16 out: bind a preallocated uint16 buffer typed as bfloat16 (shape from our rule).
    binding = session.io_binding()
    for name, value in feeds.items():
        binding.bind_ortvalue_input(name, value)
    buffer = np.zeros(out_shape, dtype=np.uint16)
    binding.bind_ortvalue_output("out", ort.OrtValue.ortvalue_from_numpy_with_onnx_type(buffer, TensorProto.BFLOAT16))
    session.run_with_iobinding(binding)
    return buffer.view(S.DTYPES["bfloat16"])


def run_ours(spec, case: Case, opset: int | None = None) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # inf * 0 and the like: NaN is the answer
        return gs.run_node(spec.op_type, case.inputs, case.attrs, opset=opset or spec.since_version,
                           domain=spec.domain)


def assert_ort_agrees(spec, case: Case, threads: int = 1, opset: int | None = None) -> None:
    """Same bits out; or, where we raise a GatherScatterError, ORT refuses the input too."""
    try:
        ours = run_ours(spec, case, opset)
    except gs.GatherScatterError as error:
        try:
            run_ort(spec, case, threads, opset=opset)
        except Exception:
            return
        pytest.fail(f"ORT accepted what we reject ({type(error).__name__}: {error}): {case.describe()}")
    theirs = run_ort(spec, case, threads, ours.shape, opset)
    oracle.assert_same(np.asarray(theirs), ours, f"ORT vs ours, {spec.name} {case.describe()}")


# ----------------------------------------------------------------------------- divergences


def _type(case: Case) -> str:
    return S.onnx_name(case.inputs[0].dtype)


def _reduction(case: Case) -> str:
    return case.attrs.get("reduction", "none")


def _gather_wide_string_slices(spec, case, threads):
    data = case.inputs[0]
    axis = case.attrs.get("axis", 0) % data.ndim
    return _type(case) == "string" and math.prod(data.shape[axis + 1 :]) > 1


def _batch_dims_differ_but_divide(spec, case, threads):
    data, indices = case.inputs[:2]
    b = case.attrs.get("batch_dims", 0)
    return (b > 0 and data.shape[:b] != indices.shape[:b]
            and math.prod(indices.shape[:-1]) % max(math.prod(data.shape[:b]), 1) == 0)


def _max_min_nan(spec, case, threads):
    """max/min on floats with a NaN in data or in the updates (a NaN that an update brings in is
    then lost by ORT to a later update of the same element)."""
    data, updates = case.inputs[0], case.inputs[2]
    return (_reduction(case) in ("max", "min") and _type(case) in S.FLOATS
            and any(bool(np.isnan(a.astype(np.float64)).any()) for a in (data, updates)))


@dataclass(frozen=True)
class Divergence:
    """A known way ORT differs: for ``op`` (or '*'), when ``condition(spec, case, threads)``."""

    name: str
    op: str
    condition: Callable
    reason: str
    example: Callable[[], tuple]  # () -> (spec, case, threads): a case where ORT differs


def _spec(op, version, domain=""):
    return REGISTRY[(domain, op, version)]


def _scatter_example(type_name, reduction, data, updates, version=18):
    dtype = S.DTYPES[type_name]
    case = Case("ScatterND", [np.array(data, dtype=dtype), np.array([[1], [0], [1]], dtype=np.int64),
                              np.array(updates, dtype=dtype)], {"reduction": reduction})
    return _spec("ScatterND", version), case, 1


def _elements_example(op, type_name, reduction, data, updates, version=18):
    dtype = S.DTYPES[type_name]
    attrs = {"reduction": reduction} if reduction else {}
    case = Case(op, [np.array(data, dtype=dtype), np.array([1, 0, 1], dtype=np.int64),
                     np.array(updates, dtype=dtype)], attrs)
    return _spec(op, version), case, 1


def _tensor_scatter_example(type_name):
    dtype = S.DTYPES[type_name]
    past = np.zeros((1, 3, 2)).astype(dtype) if type_name != "string" else np.full((1, 3, 2), "", dtype=object)
    update = np.ones((1, 1, 2)).astype(dtype) if type_name != "string" else np.full((1, 1, 2), "x", dtype=object)
    return _spec("TensorScatter", 24), Case("TensorScatter", [past, update, np.array([2])], {"axis": 1}), 1


def _race_example():
    n, width = 64, 20000
    case = Case("ScatterND", [np.zeros((4, width), np.int64), np.zeros((n, 1), np.int64),
                              np.ones((n, width), np.int64)], {"reduction": "add"})
    return _spec("ScatterND", 16), case, 2


DIVERGENCES = (
    Divergence(
        "gather-string-wide-slices", "Gather", _gather_wide_string_slices,
        "ORT 1.31 CPU Gather returns empty strings (after the first) when each gathered slice of a "
        "string tensor is wider than one element",
        lambda: (_spec("Gather", 13), Case("Gather", [np.array([["a", "b"], ["c", "d"]], dtype=object),
                                                       np.array([1], np.int64)], {"axis": 0}), 1),
    ),
    Divergence(
        "no-complex", "*", lambda spec, case, threads: _type(case) in S.COMPLEX,
        "ORT registers no complex64/complex128 kernels for these ops: the model fails to load",
        lambda: (_spec("Gather", 13), Case("Gather", [np.array([1 + 2j, 3j], np.complex64),
                                                       np.array([1], np.int64)], {"axis": 0}), 1),
    ),
    Divergence(
        "scatterelements-float16-add-mul", "ScatterElements",
        lambda spec, case, threads: _type(case) == "float16" and _reduction(case) in ("add", "mul"),
        "ORT CPU ScatterElements refuses float16 add/mul ('MLFloat16 data type is not supported with "
        "ScatterElements opset 16 when reduction is 'add''); we round after every update, as the spec's "
        "loop does. (ORT's float16 max/min run and agree with us)",
        lambda: _elements_example("ScatterElements", "float16", "add", [1.0, 2.0], [0.5, 0.25, 0.125]),
    ),
    Divergence(
        "scatterelements-bfloat16-reduction", "ScatterElements",
        lambda spec, case, threads: _type(case) == "bfloat16" and _reduction(case) != "none",
        "ORT CPU ScatterElements refuses bfloat16 with any reduction ('BFloat16 data type is not supported "
        "with ScatterElements opset 16/18'); we round after every update, as the spec's loop does",
        lambda: _elements_example("ScatterElements", "bfloat16", "max", [1.0, 2.0], [0.5, 0.25, 3.0]),
    ),
    Divergence(
        "scatterelements-bool-string-max-min", "ScatterElements",
        lambda spec, case, threads: _type(case) in ("bool", "string") and _reduction(case) in ("max", "min"),
        "ORT CPU ScatterElements-18 refuses bool and string max/min; we define them (README: or/and, "
        "code-point order)",
        lambda: _elements_example("ScatterElements", "bool", "max", [False, True], [True, False, False]),
    ),
    Divergence(
        "scatterelements-string-mul-no-updates", "ScatterElements",
        lambda spec, case, threads: _type(case) == "string" and _reduction(case) == "mul" and case.inputs[1].size == 0,
        "ORT accepts ScatterElements 'mul' on strings when there are no updates (it checks the type per "
        "update); the reduction is undefined for strings, so we refuse it whatever the indices",
        lambda: (_spec("ScatterElements", 18),
                 Case("ScatterElements", [np.array(["a", "b"], dtype=object), np.zeros(0, np.int64),
                                          np.zeros(0, dtype=object)], {"reduction": "mul"}), 1),
    ),
    Divergence(
        "tensorscatter-string", "TensorScatter", lambda spec, case, threads: _type(case) == "string",
        "ORT 1.31 has no CPU TensorScatter kernel for tensor(string) (NOT_IMPLEMENTED at load)",
        lambda: _tensor_scatter_example("string"),
    ),
    Divergence(
        "tensorscatter-float8-4bit", "TensorScatter", lambda spec, case, threads: _type(case) in S.LOW_PRECISION,
        "ORT 1.31 has no CPU TensorScatter kernel for the float8 and 4-bit types (NOT_IMPLEMENTED at load)",
        lambda: _tensor_scatter_example("float8e4m3fn"),
    ),
    Divergence(
        "scatternd-float16-reduction", "ScatterND",
        lambda spec, case, threads: _type(case) == "float16" and _reduction(case) != "none",
        "ORT CPU ScatterND: 'MLFloat16 data type is not supported ... when reduction is add/mul/max/min'",
        lambda: _scatter_example("float16", "add", [1.0, 2.0], [0.5, 0.25, 0.125]),
    ),
    Divergence(
        "scatternd-bfloat16-reduction", "ScatterND",
        lambda spec, case, threads: _type(case) == "bfloat16" and _reduction(case) != "none",
        "ORT CPU ScatterND: 'BFloat16 data type is not supported ... when reduction is add/mul/max/min'",
        lambda: _scatter_example("bfloat16", "mul", [1.0, 2.0], [0.5, 0.25, 3.0]),
    ),
    Divergence(
        "scatternd-bool-max-min", "ScatterND",
        lambda spec, case, threads: _type(case) == "bool" and _reduction(case) in ("max", "min"),
        "ORT CPU ScatterND-18: 'bool data type is not supported ... when reduction is max/min' "
        "(we define them as or/and, README)",
        lambda: _scatter_example("bool", "max", [False, True], [True, False, False]),
    ),
    Divergence(
        "scatternd-string-max-min", "ScatterND",
        lambda spec, case, threads: _type(case) == "string" and _reduction(case) in ("max", "min"),
        "ORT CPU ScatterND-18: 'string data type is not supported ... when reduction is max/min' "
        "(we compare by code point, README)",
        lambda: _scatter_example("string", "min", ["b", "é"], ["a", "z", "日本"]),
    ),
    Divergence(
        "scatterelements-max-min-nan", "ScatterElements", _max_min_nan,
        "ORT ScatterElements max/min keep the update when the current value is NaN (also a NaN that an "
        "earlier update brought); we propagate NaN as np.maximum/np.minimum do",
        lambda: _elements_example("ScatterElements", "float", "max", [np.nan, 2.0], [1.0, 5.0, 3.0]),
    ),
    Divergence(
        "scatternd-max-min-nan", "ScatterND", _max_min_nan,
        "ORT max/min keep the update when the current value is NaN (max(NaN, 1) = 1), also a NaN an "
        "earlier update brought in; we propagate NaN as np.maximum/np.minimum do (the spec's loop in NumPy terms)",
        lambda: _scatter_example("float", "max", [np.nan, 2.0], [1.0, 5.0, 3.0]),
    ),
    Divergence(
        "scatter-unknown-reduction-as-none", "*",
        lambda spec, case, threads: _reduction(case) not in ("none", "add", "mul", "max", "min"),
        "ORT CPU ScatterND and ScatterElements (16, 18) run a reduction string the spec does not define "
        "('sum', 'MAX', '') as 'none' (later updates overwrite); we raise InvalidAttributeError listing "
        "the accepted values",
        lambda: (_spec("ScatterElements", 18),
                 Case("ScatterElements", [np.array([0.0, 1.0], np.float32), np.array([1, 1], np.int64),
                                          np.array([2.0, 3.0], np.float32)], {"reduction": "sum"}), 1),
    ),
    Divergence(
        "scatter-max-min-before-18", "*",
        lambda spec, case, threads: _reduction(case) in ("max", "min") and _reduction(case) not in spec.reductions,
        "ORT CPU ScatterND-16 and ScatterElements-16 apply reduction 'max'/'min', which those versions do not "
        "define (added in 18); we raise InvalidAttributeError",
        lambda: _scatter_example("float", "max", [1.0, 2.0], [0.5, 7.0, 3.0], version=16),
    ),
    Divergence(
        "gathernd-batch-dims-not-checked", "GatherND", _batch_dims_differ_but_divide,
        "ORT GatherND with batch_dims > 0 does not check that data and indices have the same batch "
        "dims: it only requires prod(indices.shape[:-1]) to be divisible by the data batch size, and "
        "then returns a result; the spec requires equal batch dims (we raise ShapeError)",
        lambda: (_spec("GatherND", 13), Case("GatherND", [np.arange(12).reshape(2, 3, 2),
                                                           np.zeros((4, 1, 1), np.int64)], {"batch_dims": 1}), 1),
    ),
    Divergence(
        "scatternd-reduction-race", "ScatterND",
        lambda spec, case, threads: threads > 1 and _reduction(case) != "none",
        "ORT CPU ScatterND with a reduction and duplicate indices loses updates when "
        "intra_op_num_threads > 1 (slices for the same destination are reduced concurrently)",
        _race_example,
    ),
)


def divergence_for(spec, case: Case, threads: int = 1) -> Divergence | None:
    for row in DIVERGENCES:
        if row.op in ("*", spec.op_type) and row.condition(spec, case, threads):
            return row
    return None


@pytest.mark.parametrize(
    "row",
    [pytest.param(row, id=row.name, marks=pytest.mark.xfail(strict=True, reason=row.reason)) for row in DIVERGENCES],
)
def test_known_divergence_still_diverges(row):
    """Asserts ORT agrees with us on the row's example: expected to fail while the divergence lasts."""
    spec, case, threads = row.example()
    assert divergence_for(spec, case, threads) is row  # the example meets its own condition
    if row.name == "scatternd-reduction-race":  # a race: give it many chances to show (it stops at
        # the first difference; 20 missed it once on a loaded 2-core machine, 2026-11-24)
        for _ in range(200):
            assert_ort_agrees(spec, case, threads)
    else:
        assert_ort_agrees(spec, case, threads)


def test_divergence_examples_are_real_disagreements_not_test_bugs():
    """Each row's example passes our own oracle, so a failing xfail above is ORT's doing."""
    for row in DIVERGENCES:
        spec, case, _ = row.example()
        if "reduction" in case.attrs and _reduction(case) not in spec.reductions:
            # Not defined by the version (the oracle knows no versions): we must refuse the attribute.
            with pytest.raises(gs.InvalidAttributeError):
                run_ours(spec, case)
            continue
        reference = ORACLE[case.op]
        try:
            expected = reference(*case.inputs, **case.attrs)
        except (IndexError, ValueError, TypeError):  # an invalid input: we must refuse it as well
            with pytest.raises(gs.GatherScatterError):
                run_ours(spec, case)
            continue
        oracle.assert_same(run_ours(spec, case), expected, row.name)


ORACLE = {"Gather": oracle.gather, "GatherND": oracle.gather_nd, "ScatterND": oracle.scatter_nd,
          "GatherElements": oracle.gather_elements, "ScatterElements": oracle.scatter_elements,
          "Scatter": oracle.scatter, "TensorScatter": oracle.tensor_scatter}


# ----------------------------------------------------------------------------- valid inputs

# Each version at its own opset; Scatter-9 also at opset 10, the last that has it.
RUNS = [(spec, None) for spec in VERSIONS] + [(_spec("Scatter", 9), 10)]
# The family gets more: GatherElements/ScatterElements/Scatter draw empty indices often, and
# TensorScatter has no index-type or reduction axis to multiply its cases.
PER_COMBINATION = {"GatherElements": 8, "ScatterElements": 8, "Scatter": 8, "TensorScatter": 16}


def _run_id(run) -> str:
    spec, opset = run
    return spec.name if opset is None else f"{spec.name}@opset{opset}"


@pytest.fixture(scope="module", autouse=True)
def _report_counts(request):
    yield
    reporter = request.config.pluginmanager.getplugin("terminalreporter")
    total = Counter()
    for (what, _), n in COUNTS.items():
        total[what] += n
    ops = sorted({op for what, op in COUNTS if what != "row"})
    lines = [
        f"onnxruntime {ort.__version__}: {total['valid']} valid cases compared, {total['invalid']} invalid cases "
        f"compared, {total['skipped']} divergent cases skipped",
        "  per op: " + ", ".join(f"{op} {COUNTS['valid', op]} valid + {COUNTS['invalid', op]} invalid "
                                 f"({COUNTS['skipped', op]} skipped)" for op in ops),
        "  per divergence row: " + ", ".join(f"{name}: {n}" for (what, name), n in sorted(COUNTS.items())
                                              if what == "row"),
    ]
    capture = request.config.pluginmanager.getplugin("capturemanager")
    if reporter is None or capture is None:
        print("\n".join(lines))
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line("")
        for line in lines:
            reporter.write_line(line)


def _skip(spec, case, row) -> bool:
    """Count ``case`` as skipped if it meets ``row``."""
    if row is None:
        return False
    COUNTS["skipped", spec.op_type] += 1
    COUNTS["row", row.name] += 1
    return True


@pytest.mark.parametrize("run", RUNS, ids=_run_id)
def test_valid_inputs_match_onnxruntime(run):
    spec, opset = run
    rng = np.random.default_rng(zlib.crc32(_run_id(run).encode()))
    compared = 0
    for case in S.valid_cases(spec, rng, PER_COMBINATION.get(spec.op_type, CASES_PER_COMBINATION)):
        if _skip(spec, case, divergence_for(spec, case)):
            continue
        assert_ort_agrees(spec, case, opset=opset)
        compared += 1
    COUNTS["valid", spec.op_type] += compared
    assert compared >= 30, compared


# ----------------------------------------------------------------------------- invalid inputs


def _rng_for(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


@pytest.mark.parametrize("run", RUNS, ids=_run_id)
def test_invalid_inputs_rejected_by_both(run):
    """Every data type and index type of the version: we raise the expected class (also where
    ORT cannot run the type at all); ORT must refuse every case no divergence row covers."""
    spec, opset = run
    rng = _rng_for("invalid", _run_id(run))
    compared = 0
    kinds = set()
    for type_name in sorted(spec.data_types):
        for index_dtype in sorted(spec.index_types):
            cases = itertools.chain(S.invalid_cases(spec, rng, type_name, index_dtype),
                                    S.more_invalid_cases(spec, rng, type_name, index_dtype))
            for kind, case, error in cases:
                with pytest.raises(error) as ours:
                    run_ours(spec, case, opset)
                assert ours.value.op == spec.op_type and ours.value.since_version == spec.since_version
                if _skip(spec, case, divergence_for(spec, case)):
                    continue
                try:  # at load or at run: ORT must refuse it somewhere
                    run_ort(spec, case, opset=opset)
                except Exception:
                    pass
                else:
                    pytest.fail(f"ORT accepted {kind}: {case.describe()}")
                compared += 1
                kinds.add(kind)
    COUNTS["invalid", spec.op_type] += compared
    assert compared >= 20 and len(kinds) >= 2, (compared, kinds)


def test_scatter_is_refused_from_opset_11_by_both():
    """Scatter-9 runs at opsets 9 and 10; at 11 it is gone: ORT refuses the model, we raise."""
    spec = _spec("Scatter", 9)
    case = Case("Scatter", [np.zeros((2, 3), np.float32), np.array([[1, 0, -1]], np.int64),
                            np.ones((1, 3), np.float32)], {"axis": 1})
    for opset in (9, 10):
        assert_ort_agrees(spec, case, opset=opset)
    with pytest.raises(gs.UnsupportedOpError):
        run_ours(spec, case, opset=11)
    with pytest.raises(Exception, match="INVALID_GRAPH"):
        run_ort(spec, case, opset=11)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements_duplicates_agree_on_two_threads(reduction):
    """Unlike ScatterND (its race row), ORT's ScatterElements gives our bits on 2 threads with
    64 updates to every destination, for every reduction: measured, so no row."""
    spec = _spec("ScatterElements", 18)
    rng = np.random.default_rng(64)
    n, width = 64, 20000
    data = rng.integers(-3, 4, size=(4, width)).astype(np.int64)
    indices = rng.choice([-4, -3, 0, 1], size=(n, width)).astype(np.int64)  # rows 0 and 1 only
    updates = rng.choice([-1, 1, 2] if reduction == "mul" else [-3, -2, 0, 1, 5], size=(n, width)).astype(np.int64)
    case = Case("ScatterElements", [data, indices, updates], {"axis": 0, "reduction": reduction})
    assert divergence_for(spec, case, threads=2) is None
    for _ in range(5):
        assert_ort_agrees(spec, case, threads=2)


def test_undefined_reduction_rows_say_what_ort_computes():
    """The two reduction rows' reasons, measured: ORT's answer for 'sum' is ours for 'none', and
    ScatterND-16's for 'max' is ScatterND-18's."""
    for name, defined in (("scatter-unknown-reduction-as-none", lambda spec: (spec, "none")),
                          ("scatter-max-min-before-18", lambda spec: (_spec(spec.op_type, 18), "max"))):
        (row,) = [r for r in DIVERGENCES if r.name == name]
        spec, case, threads = row.example()
        other, reduction = defined(spec)
        ours = run_ours(other, Case(case.op, case.inputs, {**case.attrs, "reduction": reduction}))
        oracle.assert_same(run_ort(spec, case, threads, ours.shape), ours, name)


def test_race_example_agrees_on_one_thread():
    """The race row's example is right with intra_op_num_threads=1: its xfail is the threads' doing."""
    spec, case, threads = _race_example()
    assert threads == 2
    assert_ort_agrees(spec, case, threads=1)
    assert int(run_ours(spec, case)[0, 0]) == 64


def test_gather_strings_agree_when_slices_are_single_elements():
    """ORT's string Gather is right for one-element slices: the divergence row is narrow."""
    spec = _spec("Gather", 13)
    case = Case("Gather", [np.array([["a", "é"], ["日本", ""]], dtype=object), np.array([1, 0, -1], np.int64)],
                {"axis": 1})
    assert divergence_for(spec, case) is None
    assert_ort_agrees(spec, case)
