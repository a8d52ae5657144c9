"""The engines of issue 17's second part: Apache TVM (Relax, llvm), tinygrad, onnx2torch, jaxonnxruntime;
and issue 36's: our own, ``gather_scatter`` (our oracle) and ``gather_scatter-hosted`` (onnxruntime
with our kernels where it is wrong), and ``onnx-reference`` (onnx.reference, once ``reference``).

Each has its own extra (``gather_scatter[tvm]``, ...); only tinygrad (pure Python, a 3 MB wheel)
is also in the ``test`` extra: TVM is a 100 MB wheel (320 MB installed), and onnx2torch and
jaxonnxruntime bring torch and JAX, which CI's first step must not have. Each test skips,
naming the extra, where the engine's package is missing. Where it is installed, the
engine runs in its worker as ``gather-scatter check`` runs it: it must answer a valid Gather as
the spec does, report its version, say ``unsupported`` (not a finding) for something it lacks,
and show a defect it has.
"""

from __future__ import annotations

import importlib.util
import re
import sys

import numpy as np
import pytest

from gather_scatter.check import engines, runner
from gather_scatter.check.case_values import Case
from gather_scatter.rules.versions import REGISTRY

# engine -> (module it imports, its extra, the version pattern it reports)
NEW = {
    "tvm": ("tvm", "tvm", r"^\d+\.\d+\S* \(llvm\)$"),
    "tinygrad": ("tinygrad", "tinygrad", r"^\d+\.\d+\S* \((CPU|PYTHON|[A-Z]+)\)$"),
    "onnx2torch": ("onnx2torch", "onnx2torch", r"^\d+\.\d+\S* \(torch \S+(, torchvision stubbed)?\)$"),
    "jaxonnxruntime": ("jaxonnxruntime", "jaxonnxruntime", r"^\d+\.\d+\S* \(jax \S+\)$"),
}


def _check(spec_key, inputs, attrs=None, kind="valid"):
    spec = REGISTRY[spec_key]
    return runner.CheckCase(spec, spec.since_version, Case(spec.op_type, inputs, attrs or {}), kind)


def _need(engine):
    module, extra, _ = NEW[engine]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"the {engine} engine needs its package: pip install \"gather_scatter[{extra}]\"")


def _data():
    return np.arange(6, dtype=np.float32).reshape(2, 3)


# What each engine must refuse as unsupported (its own message) and a defect it has, by kind.
UNSUPPORTED = {
    "tvm": _check(("com.microsoft", "GatherND", 1), [_data(), np.array([[1, 0]], np.int32)]),  # int64 indices only
    "tinygrad": _check(("", "GatherND", 13), [np.array([1 + 2j, 3], np.complex128), np.array([[1]])]),  # no complex
    "onnx2torch": _check(("", "ScatterElements", 18), [_data(), np.array([[0]]), np.array([[9]], np.float32)]),
    "jaxonnxruntime": _check(("", "ScatterND", 18), [_data(), np.array([[1]]), np.ones((1, 3), np.float32)]),
}
DEFECTS = {
    # TVM's GatherElements refuses indices with an empty dimension: "Check failed: indices_dim_i >= 1".
    "tvm": (_check(("", "GatherElements", 13), [_data(), np.zeros((2, 0), np.int64)], {"axis": 1}),
            "rejected_valid", "indices_dim_i"),
    # tinygrad's GatherND with batch_dims returns int32 for bool data.
    "tinygrad": (_check(("", "GatherND", 13), [np.array([[True, False, True]]), np.array([[[-3]]])], {"batch_dims": 1}),
                 "wrong_output", "dtype int32, expected bool"),
    # onnx2torch hands negative GatherElements indices to torch.gather, which refuses them.
    "onnx2torch": (_check(("", "GatherElements", 13), [_data(), np.array([[-1, 0]])], {"axis": 1}),
                   "rejected_valid", "out of bounds"),
    # jaxonnxruntime's Gather clamps an out-of-range index (jnp.take) instead of failing.
    "jaxonnxruntime": (_check(("", "Gather", 13), [_data(), np.array([5])], kind="index out of bounds"),
                       "accepted_invalid", "out of bounds"),
}


@pytest.mark.parametrize("engine", sorted(NEW))
def test_engine_answers_gather_reports_its_version_and_says_unsupported(engine):
    _need(engine)
    valid = _check(("", "Gather", 13), [_data(), np.array([[1, -2]])], {"axis": 0})
    with engines.Worker(engine, timeout=120) as worker:
        version = worker.start()
        assert runner.run_one(worker, valid) == ("agree", "")
        kind, detail = runner.run_one(worker, UNSUPPORTED[engine])
        assert kind == "unsupported", (kind, detail)
        assert worker.restarts == 0
    import re

    assert re.match(NEW[engine][2], version), version
    assert engines.engine_version(engine) == version


@pytest.mark.parametrize("engine", sorted(NEW))
def test_engine_defect_is_found(engine):
    _need(engine)
    check, kind, fragment = DEFECTS[engine]
    with engines.Worker(engine, timeout=120) as worker:
        found, detail = runner.run_one(worker, check)
    assert found == kind and fragment in detail, (found, detail)


@pytest.mark.parametrize("engine", sorted(NEW))
def test_engine_is_registered_and_missing_names_its_extra(engine, monkeypatch):
    assert engine in engines.discover()
    module, extra, _ = NEW[engine]
    real = importlib.util.find_spec

    def hidden(name, *args, **kwargs):
        if name == module or name.startswith(module + "."):
            return None
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", hidden)
    with pytest.raises(engines.EngineMissing, match=rf'pip install "gather_scatter\[{extra}\]"'):
        engines.require(engine)


def test_onnx2torch_imports_with_a_torchvision_that_cannot(monkeypatch):
    _need("onnx2torch")
    from gather_scatter.check.engines import onnx2torch

    monkeypatch.setitem(sys.modules, "torchvision", None)  # None: "import torchvision" raises ImportError
    monkeypatch.delitem(sys.modules, "torchvision.ops", raising=False)
    why = onnx2torch.guard_torchvision()
    assert why.startswith("torchvision cannot be imported here (ModuleNotFoundError")
    import torchvision

    assert torchvision._gather_scatter_stub
    with pytest.raises(NotImplementedError, match="torchvision cannot be imported"):
        torchvision.ops.nms(None, None, 0.5)
    assert onnx2torch.guard_torchvision() == why  # a second call keeps the stand-in


def test_new_engines_print_nothing_into_the_checkers_output(capfd):
    _need("tvm")
    # TVM's ONNX frontend prints "Error converting operator ..." to stdout; the worker must not pass it on.
    check = _check(("", "Scatter", 9), [_data(), np.array([[0]]), np.array([[9]], np.float32)])
    with engines.Worker("tvm", timeout=120) as worker:
        runner.run_one(worker, UNSUPPORTED["tvm"])
        runner.run_one(worker, check)
    assert "Error converting" not in capfd.readouterr().out


ML_DTYPES_TAKEN = {"onnx-reference": "all", "onnxruntime": {"bfloat16"}, "gather_scatter": "all",
                   "gather_scatter-hosted": "all"}
# Taken in, but the kernel is the provider's: onnxruntime-cuda passes bfloat16 as the CPU engine does, and
# TensorScatter on bfloat16 agrees where the CUDA provider (or, for a node it lacks, the CPU one) has it.
ML_DTYPES_MAYBE = {"onnxruntime-cuda": {"bfloat16"}}
# Engines that refuse an ml_dtypes feed themselves, before the model (the others have no
# TensorScatter at all: onnx2torch, jaxonnxruntime, or no kernel for the type: onnxruntime).
OWN_REFUSAL = {"openvino", "tract", "tinygrad", "tvm"}


@pytest.mark.parametrize("engine", sorted(engines.ENGINES))
def test_every_ml_dtype_feed_agrees_or_is_unsupported_by_our_own_refusal(engine):
    """A valid TensorScatter case of each ml_dtypes type (bfloat16, float8 x 5, 4-bit x 3) on each
    built-in engine: it agrees, or the engine module refuses the feed itself as unsupported
    (or, for onnxruntime, its session has no kernel for the type). float8_e5m2 is NumPy kind
    'f', not 'V': a test of the kind alone let it through to the engine's own errors."""
    from gather_scatter.rules.versions import LOW_PRECISION_TYPES, ONNX_TYPES

    try:
        engines.require(engine)
    except engines.EngineMissing as missing:
        pytest.skip(str(missing))
    spec = REGISTRY[("", "TensorScatter", 24)]
    taken = ML_DTYPES_TAKEN.get(engine, set())
    with engines.Worker(engine, timeout=120) as worker:
        worker.start()
        for name in sorted(LOW_PRECISION_TYPES | {"bfloat16"}):
            dtype = ONNX_TYPES[name]
            cache = (np.arange(12).reshape(1, 4, 3) % 7).astype(np.float32).astype(dtype)
            update = np.ones((1, 1, 3), np.float32).astype(dtype)
            case = Case("TensorScatter", [cache, update, np.array([1])], {"axis": 1})
            check = runner.CheckCase(spec, 24, case, "valid")
            kind, detail = runner.run_one(worker, check)
            if taken == "all" or name in taken:
                assert kind == "agree", (name, kind, detail)
            elif name in ML_DTYPES_MAYBE.get(engine, ()):
                assert kind in ("agree", "unsupported"), (name, kind, detail)
            elif engine == "onnxruntime":
                assert kind == "unsupported" and "NOT_IMPLEMENTED" in detail, (name, kind, detail)
            elif engine in OWN_REFUSAL:
                assert kind == "unsupported" and "ml_dtypes" in detail, (name, kind, detail)
            else:  # never a finding
                assert kind == "unsupported", (name, kind, detail)


# Issue 36: our own engines, and onnx.reference's one name.
OURS = ("gather_scatter", "gather_scatter-hosted")


@pytest.fixture(scope="module")
def gather_suite(tmp_path_factory):
    """A small export of our suite: Gather-13, 5 random valid cases plus the targeted and invalid ones."""
    from gather_scatter.conformance import export_tests, load_suite

    folder = tmp_path_factory.mktemp("suite") / "gather"
    export_tests(folder, ops=["Gather-13"], cases_per_version=5)
    cases = load_suite(folder)
    assert any(c.valid for c in cases) and any(not c.valid for c in cases)
    return folder, cases


@pytest.mark.parametrize("engine", OURS)
def test_our_engines_pass_every_valid_test_and_refuse_every_invalid_one(engine, gather_suite):
    import gather_scatter
    from gather_scatter.conformance.run import run_cases

    try:
        engines.require(engine)
    except engines.EngineMissing as missing:  # the hosted one without onnxruntime
        assert engine == "gather_scatter-hosted" and 'pip install "gather_scatter[onnxruntime]"' in str(missing)
        pytest.skip(str(missing))
    _, cases = gather_suite
    result = run_cases(cases, engine, threads=2)
    assert result["engine"] == engine and result["counts"]["pass"] == len(cases), [
        r for r in result["results"] if r["outcome"] != "pass"]
    version = result["engine_version"]
    assert version == gather_scatter.__version__ if engine == "gather_scatter" else version.startswith(
        f"{gather_scatter.__version__} (onnxruntime ")
    for row in result["results"]:
        if not row["valid"]:  # refused by our typed errors (onnxruntime's inside a NodeError), never untyped
            kind = row["detail"].removeprefix("refused: ").split(":")[0]
            assert issubclass(getattr(gather_scatter, kind), gather_scatter.GatherScatterError), row


def test_a_typed_refusal_is_the_engine_refusing_and_a_gap_is_unsupported():
    # UnsupportedOpError holds a fragment of BUILTIN_UNSUPPORTED in its name: a refusal all the same. An
    # operator outside the family that onnx.reference lacks is a gap: unsupported.
    from gather_scatter.check.engines import gather_scatter as ours

    assert ours.unsupported == () and engines.load("gather_scatter-hosted").unsupported == ()
    with engines.Worker("gather_scatter") as worker:
        check = _check(("", "Gather", 13), [_data(), np.array([7])], kind="index out of bounds")
        assert runner.run_one(worker, check)[0] == "agree"  # refused, as the spec requires
        newer = worker.run(*_one_node("GatherND", "com.microsoft", 2))
        gap = worker.run(*_one_node("Foo", "com.example", 1))
    assert newer.kind == "error" and newer.message.startswith("UnsupportedOpError: "), newer
    assert gap.kind == "unsupported" and "NotImplementedError: Node type 'Foo'" in gap.message, gap


def _one_node(op: str, domain: str, version: int) -> tuple[bytes, dict]:
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node(op, ["x", "i"], ["y"], domain=domain)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("i", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(domain, version)])
    return model.SerializeToString(), {"x": _data(), "i": np.array([1])}


def test_hosted_says_what_is_missing_without_onnxruntime(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None if name == "onnxruntime"
                        else real(name, *a, **k))
    with pytest.raises(engines.EngineMissing, match="engine 'gather_scatter-hosted' needs onnxruntime, which is not "
                       r'installed: pip install "gather_scatter\[onnxruntime\]"'):
        engines.require("gather_scatter-hosted")
    assert engines.require("gather_scatter").name == "gather_scatter"  # ours needs nothing more


def test_onnx_reference_is_onnx_reference_where_it_is_wrong(tmp_path):
    # docs/conformance.md's REFERENCE_GAPS: onnx.reference's ScatterElements-18 max/min drops a NaN the loop keeps.
    from gather_scatter.conformance import export_tests, load_suite
    from gather_scatter.conformance.run import run_cases

    export_tests(tmp_path / "suite", ops=["ScatterElements-18"], cases_per_version=0)
    nan = [c for c in load_suite(tmp_path / "suite") if "nan_max_min" in c.tags]
    assert len(nan) >= 5
    theirs = run_cases(nan, "onnx-reference")
    assert theirs["engine"] == "onnx-reference" and theirs["engine_version"] == onnx_version()
    wrong = [r for r in theirs["results"] if r["outcome"] == "fail"]
    assert wrong and all(r["detail"].endswith("expected nan") or ", expected np.float" in r["detail"] for r in wrong)
    assert run_cases(nan, "gather_scatter")["counts"]["pass"] == len(nan)


def onnx_version() -> str:
    import onnx

    return onnx.__version__


def test_the_old_name_reference_is_onnx_reference_with_a_note(gather_suite, tmp_path, capsys):
    import warnings

    from gather_scatter.cli import main
    from gather_scatter.conformance.run import run_cases

    folder, cases = gather_suite
    note = "engine 'reference' is now called 'onnx-reference' (onnx.reference); our own oracle is 'gather_scatter'"
    # The Python API: a FutureWarning, pointing at the caller; the results carry the new name.
    with pytest.warns(FutureWarning, match=re.escape(note)) as caught:
        result = run_cases(cases[:3], "reference")
    assert len(caught) == 1 and caught[0].filename == __file__
    assert result["engine"] == "onnx-reference" and result["engine_version"] == onnx_version()
    with pytest.warns(FutureWarning, match="now called 'onnx-reference'"):
        assert engines.load("reference").name == "onnx-reference"
    assert "reference" not in engines.discover()  # one name per engine: the old one is no entry point
    # The command line: one line on stderr, no warning, the new name in what it prints.
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        assert main(["run-tests", str(folder), "--engine", "reference"]) == 0
        captured = capsys.readouterr()
        assert captured.err == f"note: {note}\n" and captured.out.startswith(f"onnx-reference {onnx_version()} on ")
        assert main(["check", "--engine", "reference", "--op", "Gather-13", "--cases", "2",
                     "--out", str(tmp_path / "f")]) == 0
        captured = capsys.readouterr()
        assert captured.err == f"note: {note}\n" and captured.out.startswith(f"onnx-reference {onnx_version()}: ")
