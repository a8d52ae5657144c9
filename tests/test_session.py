"""gather_scatter.Session: built once (validation and memory sizing at build), run many times
like onnxruntime's InferenceSession, equal to run_model on every shipped model."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import gather_scatter as gs
from gather_scatter import DTypeError, IndexOutOfBoundsError, ModelInputError, Session, ShapeError, run_model

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODELS = sorted([*(ROOT / "tests" / "data").glob("*.onnx"), *(ROOT / "src" / "gather_scatter" / "data").glob("*.onnx")])


def inputs_of(path):
    with np.load(path.with_name(f"{path.stem}_inputs.npz")) as archive:
        return dict(archive)


def one_gather(index_shape=()):
    node = oh.make_node("Gather", ["data", "index"], ["y"], name="pick")
    graph = oh.make_graph(
        [node, oh.make_node("Identity", ["data"], ["same"], name="copy")], "g",
        [oh.make_tensor_value_info("data", onnx.TensorProto.INT64, [3]),
         oh.make_tensor_value_info("index", onnx.TensorProto.INT64, index_shape)],
        [oh.make_tensor_value_info("y", onnx.TensorProto.INT64, None),
         oh.make_tensor_value_info("same", onnx.TensorProto.INT64, ["n"])],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)])


DATA = np.array([10, 20, 30])


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_run_equals_run_model_on_every_shipped_model(path):
    inputs = inputs_of(path)
    expected = run_model(path, inputs)
    external = path.with_name(path.name + ".data").exists()  # bytes hold no external data
    for model in (path, str(path), onnx.load(str(path)), *([] if external else [path.read_bytes()])):
        session = Session(model)
        assert [o.name for o in session.get_outputs()] == list(expected)
        for _ in range(2):  # reused: the same result every time
            got = session.run(None, inputs)
            assert len(got) == len(expected)
            for value, want in zip(got, expected.values()):
                np.testing.assert_array_equal(value, want)


def test_output_names_pick_a_subset_in_the_order_given():
    session = Session(one_gather())
    feeds = {"data": DATA, "index": np.array(2)}
    assert session.run(None, feeds)[0] == 30
    same, y = session.run(["same", "y"], feeds)
    assert y == 30 and same.tolist() == [10, 20, 30]
    assert [v.tolist() for v in session.run(["y", "y"], feeds)] == [30, 30]
    assert session.run([], feeds) == []


def test_metadata_reads_like_onnxruntime_node_args():
    model = one_gather(["b", None])
    model.graph.input[1].type.tensor_type.shape.dim[1].Clear()  # neither a value nor a name
    session = Session(model)
    assert [(i.name, i.type, i.shape) for i in session.get_inputs()] == [
        ("data", "tensor(int64)", [3]), ("index", "tensor(int64)", ["b", None])]
    assert [(o.name, o.type, o.shape) for o in session.get_outputs()] == [
        ("y", "tensor(int64)", None), ("same", "tensor(int64)", ["n"])]
    session.get_inputs().clear()  # a copy each time
    assert len(session.get_inputs()) == 2


def test_an_input_backed_by_an_initializer_is_not_listed_and_may_be_fed():
    model = one_gather()
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array(1, np.int64), "index"))
    session = Session(model)
    assert [i.name for i in session.get_inputs()] == ["data"]
    assert session.run(["y"], {"data": DATA})[0] == 20
    assert session.run(["y"], {"data": DATA, "index": np.array(0)})[0] == 10


@pytest.mark.parametrize(
    "output_names, feeds, error, message",
    [
        (None, {"data": DATA}, ModelInputError, "model input 'index' is missing"),
        (None, {"data": DATA, "index": np.array(0), "other": 1}, ModelInputError, "the model has no input 'other'"),
        (["y", "nope"], {"data": DATA, "index": np.array(0)}, ModelInputError,
         r"the model has no output 'nope' \(outputs: y, same\)"),
        (None, {"data": DATA.astype(np.int32), "index": np.array(0)}, DTypeError, "has NumPy dtype int32"),
        (None, {"data": DATA[:2], "index": np.array(0)}, ShapeError, r"axis 0 must be 3"),
        (None, {"data": DATA, "index": np.array([0])}, ShapeError, "declares rank 0"),
        (None, {"data": DATA, "index": np.array(3)}, IndexOutOfBoundsError, "node 'pick' .Gather.: Gather-13"),
    ],
)
def test_errors_are_typed_and_name_the_culprit(output_names, feeds, error, message):
    session = Session(one_gather())
    with pytest.raises(error, match=message):
        session.run(output_names, feeds)
    assert session.run(["y"], {"data": DATA, "index": np.array(1)})[0] == 20  # still usable after an error


def test_feeds_are_converted_as_run_model_converts_them():
    session = Session(one_gather())
    feeds = {"data": [10, 20, 30], "index": np.array(1).astype(">i8")}  # a list, a non-native byte order
    assert session.run(["y"], feeds)[0] == 20
    strings = onnx.helper.make_graph(
        [oh.make_node("Gather", ["s", "i"], ["y"])], "g",
        [oh.make_tensor_value_info("s", onnx.TensorProto.STRING, [2]),
         oh.make_tensor_value_info("i", onnx.TensorProto.INT64, [])],
        [oh.make_tensor_value_info("y", onnx.TensorProto.STRING, [])])
    session = Session(oh.make_model(strings, opset_imports=[oh.make_opsetid("", 13)]))
    assert session.run(None, {"s": np.array([b"a", b"b"]), "i": np.array(1)})[0] == "b"


def test_reuse_across_many_runs_with_different_inputs():
    path = ROOT / "src" / "gather_scatter" / "data" / "decoder_step.onnx"
    inputs = inputs_of(path)
    session = Session(path)
    rng = np.random.default_rng(16)
    for _ in range(5):
        feeds = {name: (rng.standard_normal(v.shape).astype(v.dtype) if v.dtype.kind == "f" else v)
                 for name, v in inputs.items()}
        got = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
        want = run_model(path, feeds)
        assert got.keys() == want.keys()
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])


def test_validation_and_memory_sizing_run_once_at_build(monkeypatch):
    from gather_scatter.models import _model_check
    from gather_scatter.models.reference import _sizes as _model_memory

    calls = {"check": 0, "sizes": 0}
    check, sizes = _model_check.check_model, _model_memory.static_sizes

    def counting_check(*args, **kwargs):
        calls["check"] += 1
        return check(*args, **kwargs)

    def counting_sizes(*args, **kwargs):
        calls["sizes"] += 1
        return sizes(*args, **kwargs)

    monkeypatch.setattr(_model_check, "check_model", counting_check)
    monkeypatch.setattr(_model_memory, "static_sizes", counting_sizes)
    session = Session(one_gather())
    for i in range(3):
        assert session.run(["y"], {"data": DATA, "index": np.array(i)})[0] == DATA[i]
    assert calls == {"check": 1, "sizes": 1}
    Session(one_gather(), check=False).run(None, {"data": DATA, "index": np.array(0)})
    assert calls == {"check": 1, "sizes": 2}


def test_build_errors_come_at_build():
    with pytest.raises(ModelInputError, match="cannot read model from bytes"):
        Session(b"not a model")
    with pytest.raises(ModelInputError, match="cannot read model"):
        Session(ROOT / "no-such-model.onnx")
    node = oh.make_node("GatherND", ["x", "i"], ["y"], name="read", batch_dims=1)
    f = oh.make_tensor_value_info
    graph = oh.make_graph([node], "g", [f("x", 1, [2, 2]), f("i", 7, [2, 1])], [f("y", 1, None)])
    old = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 11)])
    with pytest.raises(gs.InvalidAttributeError, match="node 'read' .GatherND.: GatherND-11: has no attribute"):
        Session(old)
    with pytest.warns(gs.OffSpecWarning):
        session = Session(old, strict=False)
    x = np.array([[1, 2], [3, 4]], np.float32)
    assert session.run(None, {"x": x, "i": np.array([[1], [0]])})[0].tolist() == [2, 3]  # x[b, i[b]]


def test_the_memory_limit_is_read_at_each_run(monkeypatch):
    # A node that is not ours, sized at build: refused at run once the limit is below its size.
    node = oh.make_node("ConstantOfShape", ["shape"], ["big"], name="fill")
    f = oh.make_tensor_value_info
    graph = oh.make_graph([node], "g", [], [f("big", 1, None)],
                          [onnx.numpy_helper.from_array(np.array([1000, 1000], np.int64), "shape")])
    session = Session(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]))
    assert session.run(None, {})[0].shape == (1000, 1000)
    previous = gs.set_memory_limit(1000)
    try:
        with pytest.raises(gs.OutputTooLargeError, match="node 'fill' .ConstantOfShape.: output 'big'"):
            session.run(None, {})
    finally:
        gs.set_memory_limit(previous)
    assert session.run(None, {})[0].shape == (1000, 1000)


def test_session_is_exported_lazily():
    assert "Session" in gs.__all__ and "Session" in dir(gs)
    from gather_scatter.models.session import Session as from_session
    from gather_scatter.reference import run_model as from_reference

    assert gs.Session is from_session and from_reference is gs.run_model


def test_cli_repeat_runs_one_session_and_reports_the_median(capsys, monkeypatch):
    from gather_scatter.cli import main
    from gather_scatter.models import session

    builds = []
    monkeypatch.setattr(session.Session, "__init__", _counting(session.Session.__init__, builds))
    assert main(["run", "--repeat", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(builds) == 1
    assert out[4].startswith("wall time: ")
    assert out[5].startswith("5 runs of one Session: first ") and " ms, median " in out[5]
    assert out[5].endswith(" ms)") and "ms per run (built in " in out[5]
    with pytest.raises(SystemExit):
        main(["run", "--repeat", "0"])
    assert "--repeat: " in capsys.readouterr().err


def _counting(function, calls):
    def counted(*args, **kwargs):
        calls.append(1)
        return function(*args, **kwargs)

    return counted


def test_an_unchecked_model_reading_an_undefined_value_fails_as_onnx_reference_says():
    node = oh.make_node("Gather", ["data", "nowhere"], ["y"], name="pick")
    f = oh.make_tensor_value_info
    graph = oh.make_graph([node], "g", [f("data", 7, [3])], [f("y", 7, None)])
    session = Session(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]), check=False)
    with pytest.raises(RuntimeError, match="Unable to find input 'nowhere'"):
        session.run(None, {"data": DATA})


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_evaluator_lean_run_equals_reference_evaluators_run(path):
    # run(names, feeds) runs the steps listed at load; any other argument takes onnx.reference's run.
    from gather_scatter.reference import Evaluator

    evaluator, inputs = Evaluator(path), inputs_of(path)
    lean, full = evaluator.run(None, inputs), evaluator.run(None, inputs, intermediate=False)
    for a, b in zip(lean, full, strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(RuntimeError, match="Unable to find output name 'nope'"):
        evaluator.run(["nope"], inputs)


def test_index_add_export_runs_exactly_as_onnxruntime_single_threaded():
    # examples/index_add_pooling.py --rows 2000: torch's index_add, dynamo-exported (ScatterND-18
    # add, 2,000 rows of 8 into 64 segments); onnxruntime at 1 thread sums in row order, as the spec.
    ort = pytest.importorskip("onnxruntime")
    path = ROOT / "tests" / "data" / "index_add_pooling.onnx"
    feeds = inputs_of(path)
    rows, segment = feeds.values()
    expected = np.zeros((64, rows.shape[1]), np.float32)
    np.add.at(expected, segment, rows)  # ufunc.at: the updates in order
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    theirs = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    for _ in range(2):  # the first call's checks, then the accepted path
        (ours,) = Session(path).run(None, feeds)
        assert ours.tobytes() == expected.tobytes() == theirs.tobytes()


# ---- issue 26 item 10: hostile feeds and models are typed errors, never raw ones


def _masked(values, mask):
    return np.ma.MaskedArray(np.array(values), mask=mask)


@pytest.mark.parametrize(
    "output_names, feeds, error, message",
    [
        (None, None, ModelInputError, r"the feeds must be a mapping \(a dict\) of input name to value, not NoneType"),
        (None, [("data", DATA), ("index", np.array(0))], ModelInputError,
         r"not list: pass dict\(feeds\) to make one of these \(name, value\) pairs"),
        (None, (("data", DATA), ("index", np.array(0))), ModelInputError, r"not tuple: pass dict\(feeds\)"),
        (None, [DATA, np.array(0)], ModelInputError, "the feeds must be a mapping .* not list$"),
        (None, "data", ModelInputError, "the feeds must be a mapping .* not str$"),
        ("y", {"data": DATA, "index": np.array(0)}, ModelInputError,
         r"output_names must be a list of output names or None, not a str: pass \['y'\]"),
        (None, {"data": _masked([10, 20, 30], [0, 1, 0]), "index": np.array(1)}, DTypeError,
         r"model input 'data' is a masked array, and masks are not supported .*pass data.filled\(fill_value\)"),
        (None, {"data": DATA, "index": np.ma.masked_array(1, mask=True)}, DTypeError,
         "model input 'index' is a masked array"),
        (None, {"data": _masked([10, 20, 30], False), "index": np.array(1)}, DTypeError,
         "model input 'data' is a masked array"),  # no element masked: still refused, as the kernels do
    ],
    ids=["feeds-none", "feeds-pairs", "feeds-tuple-pairs", "feeds-list", "feeds-str", "output-names-str",
         "masked-data", "masked-0d-index", "masked-nothing"],
)
@pytest.mark.parametrize("engine", ["reference", "onnxruntime"])
def test_hostile_feeds_are_typed_errors(engine, output_names, feeds, error, message):
    if engine == "onnxruntime":
        pytest.importorskip("onnxruntime")
    session = Session(one_gather(), engine=engine)
    with pytest.raises(error, match=message) as info:
        session.run(output_names, feeds)
    if error is DTypeError:
        assert (info.value.input, info.value.value) == (message.split("'")[1], "MaskedArray")
    if output_names is None:
        with pytest.raises(error, match=message):
            run_model(one_gather(), feeds, engine=engine)
    assert session.run(["y"], {"data": DATA, "index": np.array(1)})[0] == 20  # still usable after an error


def test_a_masked_array_in_a_sequence_feed_is_refused():
    node = oh.make_node("SequenceAt", ["s", "i"], ["y"])
    f = oh.make_tensor_value_info
    seq = oh.make_tensor_sequence_value_info("s", onnx.TensorProto.INT64, None)
    graph = oh.make_graph([node], "g", [seq, f("i", 7, [])], [f("y", 7, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)])
    with pytest.raises(DTypeError, match=r"model input 's'\[1\] is a masked array"):
        run_model(model, {"s": [DATA, _masked([1, 2], [1, 0])], "i": np.array(0)})


def _external_bytes():
    path = ROOT / "tests" / "data" / "gather_elements.onnx"
    return path, path.read_bytes()


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: None, r"model must be a path \(str or path-like\), bytes \(bytearray, memoryview\) or an "
                       r"onnx.ModelProto, not NoneType"),
        (lambda: 3, "model must be a path .* not int"),
        (lambda: [b"\x08\x07"], "model must be a path .* not list"),
        (lambda: bytearray(b"not a model"), "cannot read model from bytes"),
        (lambda: memoryview(b"not a model"), "cannot read model from bytes"),
        (lambda: _external_bytes()[1],
         r"tensor '.*' is stored as external data \('gather_elements.onnx.data', a path relative to the model's "
         r"folder\), and a model given as bytes does not say which folder that is: pass the path of the .onnx file"),
        (lambda: bytearray(_external_bytes()[1]), "a model given as bytes does not say which folder"),
    ],
    ids=["none", "int", "list", "bad-bytearray", "bad-memoryview", "external-bytes", "external-bytearray"],
)
@pytest.mark.parametrize("check", [True, False])
def test_hostile_models_are_typed_errors(make, message, check):
    if "cannot read model from bytes" in message and not check:
        pytest.skip("check=False leaves a file that cannot be parsed to onnx (documented)")
    with pytest.raises(ModelInputError, match=message) as info:
        Session(make(), check=check)
    assert "load_external_data=False" not in str(info.value)  # the user never passed it
    if not isinstance(make(), (bytearray, memoryview)):  # run_model takes paths and protos (bytes too)
        with pytest.raises(ModelInputError, match=message):
            run_model(make(), {}, check=check)


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview], ids=lambda w: w.__name__)
def test_model_bytes_in_any_buffer_type(wrap):
    data = one_gather().SerializeToString()
    session = Session(wrap(data))
    assert session.run(["y"], {"data": DATA, "index": np.array(2)})[0] == 30
    from gather_scatter.reference import Evaluator

    assert Evaluator(wrap(data)).run(["y"], {"data": DATA, "index": np.array(0)})[0] == 10


# ---- issue 26 item 14: a Session may be shared by threads


@pytest.mark.parametrize("engine", ["reference", "onnxruntime"])
def test_one_session_shared_by_16_threads_gives_every_run_the_single_threaded_result(engine):
    # 16 threads, 40 runs each on different feeds, all at once through one Session (the decoder
    # step: Gathers, a ScatterND into its cache, onnx.reference's other nodes): each result equals
    # what one thread computes for the same feeds. Nothing a run holds is shared by another.
    import threading

    path = ROOT / "src" / "gather_scatter" / "data" / "decoder_step.onnx"
    base = inputs_of(path)
    if engine == "onnxruntime":
        pytest.importorskip("onnxruntime")
    # 'all': our kernels run inside the onnxruntime plan too (an option of that engine only)
    session = Session(path, engine=engine, route="all" if engine == "onnxruntime" else "needed")
    names = [o.name for o in session.get_outputs()]

    def feeds(k):
        rng = np.random.default_rng(k)
        return {n: (rng.standard_normal(v.shape).astype(v.dtype) if v.dtype.kind == "f" else v) for n, v in base.items()}

    jobs = [feeds(k) for k in range(32)]  # distinct feeds, reused so each expected value is computed once
    expected = [session.run(None, f) for f in jobs]
    threads, runs, start = 16, 40, threading.Barrier(16)
    mismatches, errors = [], []

    def work(t):
        start.wait()
        for r in range(runs):
            k = (t * 7 + r) % len(jobs)
            try:
                got = session.run(None, jobs[k])
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(repr(exc))
                return
            for name, a, b in zip(names, got, expected[k], strict=True):
                if not np.array_equal(a, b):
                    mismatches.append((t, r, name))

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    assert errors == [] and mismatches == []


# ---- issue 36: threads and route='all' are the onnxruntime engine's options, not ignored by the reference one


def test_threads_and_route_all_with_the_reference_engine_are_refused_not_ignored(tmp_path, capsys):
    from gather_scatter.cli import main

    for options, message in [
        ({"threads": 7}, "threads=7 is an option of engine='onnxruntime' (its intra-op thread count), not of "
                         "engine='reference'; pass engine='onnxruntime', or set our kernels' threads with "
                         "gather_scatter.set_num_threads"),
        ({"threads": 1, "engine": "reference"}, "threads=1 is an option of engine='onnxruntime'"),
        ({"route": "all"}, "route='all' is an option of engine='onnxruntime' (which nodes of the family our kernels "
                           "run), not of engine='reference', which runs every one on our kernels"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            Session(one_gather(), **options)
    # the defaults stay accepted with the reference engine, given or not
    session = Session(one_gather(), engine="reference", threads=None, route="needed")
    assert session.run(["y"], {"data": DATA, "index": np.array(2)})[0] == 30
    # the command line: a usage error before anything is read
    for args, message in [
        (["--threads", "7"], "--threads 7 is an option of --engine onnxruntime (its intra-op threads), not of "
                             "--engine reference; add --engine onnxruntime (our kernels' threads: "
                             "GATHER_SCATTER_NUM_THREADS)"),
        (["--route", "all", "--engine", "reference"], "--route all is an option of --engine onnxruntime (which nodes "
                                                      "of the family our kernels run), not of --engine reference, "
                                                      "which runs every one on our kernels; add --engine onnxruntime"),
    ]:
        assert main(["run", str(tmp_path / "absent.onnx"), *args]) == 2
        assert capsys.readouterr().err == f"gather-scatter run: error: {message}\n"
    assert main(["run", "--route", "needed"]) == 0


def test_run_model_refuses_threads_and_route_all_with_the_reference_engine():
    feeds = {"data": DATA, "index": np.array(2)}
    with pytest.raises(ValueError, match=re.escape("threads=7 is an option of engine='onnxruntime'")):
        run_model(one_gather(), feeds, threads=7)
    with pytest.raises(ValueError, match=re.escape("route='all' is an option of engine='onnxruntime'")):
        run_model(one_gather(), feeds, route="all")
