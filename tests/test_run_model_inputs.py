"""run_model feeds each graph input by its declared type (issue 15, item 6).

A tensor is an array (element type, rank and fixed dims checked), a sequence a list of its
checked elements (ragged or not), an optional None or its checked element, a map a dict (key
type checked). ``np.asarray`` on every feed used to stack a sequence into one array, turn a
ragged one into a ValueError and an empty optional into a tensor holding None.
"""

from __future__ import annotations

import numpy as np
import onnx.helper as oh
import pytest
from onnx import TensorProto

from gather_scatter import DTypeError, IndexOutOfBoundsError, ModelInputError, ShapeError
from gather_scatter.reference import run_model

FLOAT, INT64, STRING = TensorProto.FLOAT, TensorProto.INT64, TensorProto.STRING


def tensor(elem=FLOAT, shape=None):
    return oh.make_tensor_type_proto(elem, shape)


def seq(elem):
    return oh.make_sequence_type_proto(elem)


def optional(elem):
    return oh.make_optional_type_proto(elem)


def map_of(key, value):
    return oh.make_map_type_proto(key, value)


def model(nodes, inputs, outputs, opset=18, ml=False):
    """A model of ``nodes`` whose graph inputs and outputs are ``{name: TypeProto}``."""
    graph = oh.make_graph(nodes, "g", [oh.make_value_info(n, t) for n, t in inputs.items()],
                          [oh.make_value_info(n, t) for n, t in outputs.items()])
    opsets = [oh.make_opsetid("", opset)] + ([oh.make_opsetid("ai.onnx.ml", 3)] if ml else [])
    return oh.make_model(graph, opset_imports=opsets, ir_version=9)


A = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
B = np.array([[5.0, 6.0], [7.0, 8.0]], np.float32)
SEQ = seq(tensor(FLOAT))


# -- tensors ------------------------------------------------------------------------------------------


def test_a_tensor_is_an_array_and_a_list_is_read_as_one():
    m = model([oh.make_node("Gather", ["x", "i"], ["y"])], {"x": tensor(FLOAT, [2, 2]), "i": tensor(INT64, [1])},
              {"y": tensor(FLOAT)})
    np.testing.assert_array_equal(run_model(m, {"x": A, "i": [1]})["y"], A[[1]])
    with pytest.raises(DTypeError, match=r"^model input 'x' has NumPy dtype float64, but the model declares "
                                         r"tensor\(float\)"):
        run_model(m, {"x": A.tolist(), "i": [0]})  # a list of Python floats is float64: checked as before


def test_none_for_a_tensor_is_a_missing_input():
    m = model([oh.make_node("Identity", ["x"], ["y"])], {"x": tensor(FLOAT, [2, 2])}, {"y": tensor(FLOAT)})
    with pytest.raises(ModelInputError, match=r"^model input 'x' is None, but the model declares tensor\(float\), "
                                              r"which is not optional$") as info:
        run_model(m, {"x": None})
    assert info.value.input == "x"


# -- sequences -----------------------------------------------------------------------------------------


def test_identity_over_a_sequence_returns_a_list_of_its_tensors():
    m = model([oh.make_node("Identity", ["s"], ["y"])], {"s": SEQ}, {"y": SEQ})
    for given in ([A, B], (A, B)):
        got = run_model(m, {"s": given})["y"]
        assert isinstance(got, list) and len(got) == 2  # was one stacked (2, 2, 2) array
        for g, want in zip(got, (A, B)):
            np.testing.assert_array_equal(g, want, strict=True)


def test_a_ragged_sequence_is_fed_as_is():
    nodes = [oh.make_node("SequenceLength", ["s"], ["n"]), oh.make_node("ConcatFromSequence", ["s"], ["c"], axis=0)]
    m = model(nodes, {"s": seq(tensor(FLOAT, ["L"]))}, {"n": tensor(INT64), "c": tensor(FLOAT)})
    parts = [np.array([1.0, 2.0], np.float32), np.array([3.0], np.float32), np.zeros(0, np.float32)]
    got = run_model(m, {"s": parts})  # was "ValueError: setting an array element with a sequence"
    assert int(got["n"]) == 3
    np.testing.assert_array_equal(got["c"], [1.0, 2.0, 3.0])


def test_an_empty_sequence():
    m = model([oh.make_node("SequenceLength", ["s"], ["n"])], {"s": SEQ}, {"n": tensor(INT64)})
    assert int(run_model(m, {"s": []})["n"]) == 0


def test_our_kernels_take_a_tensor_out_of_a_sequence_input():
    nodes = [oh.make_node("SequenceAt", ["s", "k"], ["t"]), oh.make_node("GatherND", ["t", "i"], ["y"], name="pick")]
    m = model(nodes, {"s": SEQ, "k": tensor(INT64, []), "i": tensor(INT64, [1, 2])}, {"y": tensor(FLOAT)})
    feeds = {"s": [A, np.arange(6, dtype=np.float32).reshape(2, 3)], "k": np.array(1)}
    np.testing.assert_array_equal(run_model(m, {**feeds, "i": np.array([[1, 2]])})["y"], [5.0])
    with pytest.raises(IndexOutOfBoundsError, match=r"^node 'pick' \(GatherND\): GatherND-13: indices\[0, 1\] = 3"):
        run_model(m, {**feeds, "i": np.array([[1, 3]])})


def test_sequence_elements_are_checked_against_the_element_type():
    m = model([oh.make_node("Identity", ["s"], ["y"])], {"s": seq(tensor(FLOAT, [2, None]))}, {"y": SEQ})
    with pytest.raises(DTypeError, match=r"^model input 's'\[1\] has NumPy dtype int64, but the model declares "
                                         r"tensor\(float\)") as info:
        run_model(m, {"s": [A, np.zeros((2, 2), np.int64)]})
    assert (info.value.input, info.value.position) == ("s", (1,))
    with pytest.raises(ShapeError, match=r"^model input 's'\[0\] has shape \(3, 2\), but the model declares "
                                         r"\(2, '\?'\) \(axis 0 must be 2\)$"):
        run_model(m, {"s": [np.zeros((3, 2), np.float32)]})
    with pytest.raises(ShapeError, match=r"^model input 's'\[0\] has rank 1"):
        run_model(m, {"s": [np.zeros(2, np.float32)]})


@pytest.mark.parametrize("given", [np.stack([A, B]), A, {"a": A}], ids=["ndarray", "one-tensor", "dict"])
def test_a_sequence_must_be_a_list(given):
    m = model([oh.make_node("Identity", ["s"], ["y"])], {"s": SEQ}, {"y": SEQ})
    with pytest.raises(DTypeError, match=rf"^model input 's' is a {type(given).__name__}, but the model declares "
                                         r"seq\(tensor\(float\)\): feed a list of its elements$"):
        run_model(m, {"s": given})


def test_a_sequence_of_sequences():
    m = model([oh.make_node("Identity", ["s"], ["y"])], {"s": seq(SEQ)}, {"y": seq(SEQ)})
    got = run_model(m, {"s": [[A], [A, B]]})["y"]
    assert [len(inner) for inner in got] == [1, 2]
    np.testing.assert_array_equal(got[1][1], B)


# -- optionals -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("elem, value", [(tensor(FLOAT, [2, 2]), A), (SEQ, [A, B])], ids=["tensor", "sequence"])
def test_an_optional_input_is_none_or_its_element(elem, value):
    has = model([oh.make_node("OptionalHasElement", ["o"], ["h"])], {"o": optional(elem)},
                {"h": tensor(TensorProto.BOOL)})
    assert not run_model(has, {"o": None})["h"]  # was True: np.asarray(None) is a tensor
    assert run_model(has, {"o": value})["h"]
    get = model([oh.make_node("OptionalGetElement", ["o"], ["y"])], {"o": optional(elem)}, {"y": elem})
    got = run_model(get, {"o": value})["y"]
    if isinstance(value, list):
        assert isinstance(got, list) and len(got) == 2
        np.testing.assert_array_equal(got[1], B)
    else:
        np.testing.assert_array_equal(got, A, strict=True)


def test_an_optional_element_is_checked_and_an_empty_optional_output_is_none():
    o = optional(tensor(FLOAT, [2, 2]))
    assert run_model(model([], {"o": o}, {"o": o}), {"o": None}) == {"o": None}  # an input that is an output
    ident = model([oh.make_node("Identity", ["o"], ["y"])], {"o": o}, {"y": o})
    with pytest.raises(DTypeError, match=r"^model input 'o' has NumPy dtype int64, but the model declares "):
        run_model(ident, {"o": np.zeros((2, 2), np.int64)})
    with pytest.raises(ShapeError, match=r"^model input 'o' has shape \(3, 2\)"):
        run_model(ident, {"o": np.zeros((3, 2), np.float32)})


def test_an_optional_input_must_still_be_given():
    m = model([oh.make_node("OptionalHasElement", ["o"], ["h"])], {"o": optional(SEQ)}, {"h": tensor(TensorProto.BOOL)})
    with pytest.raises(ModelInputError, match=r"model input 'o' is missing"):
        run_model(m, {})


# -- maps ------------------------------------------------------------------------------------------------


def _vectorizer(key, vocabulary, input_type):
    name = "string_vocabulary" if key == STRING else "int64_vocabulary"
    node = oh.make_node("DictVectorizer", ["m"], ["v"], domain="ai.onnx.ml", **{name: vocabulary})
    return model([node], {"m": input_type}, {"v": tensor(FLOAT)}, ml=True)


def test_a_map_is_a_dict():
    m = _vectorizer(STRING, ["a", "b", "c"], map_of(STRING, tensor(FLOAT)))
    np.testing.assert_array_equal(run_model(m, {"m": {"c": 3.0, "a": 1.0}})["v"], [1.0, 0.0, 3.0])
    m = _vectorizer(INT64, [7, 8], map_of(INT64, tensor(FLOAT)))
    np.testing.assert_array_equal(run_model(m, {"m": {8: 2.5, np.int64(7): 1.5}})["v"], [1.5, 2.5])


def test_a_sequence_of_maps():
    m = _vectorizer(STRING, ["a", "b"], seq(map_of(STRING, tensor(FLOAT))))
    got = run_model(m, {"m": [{"a": 1.0}, {"b": 2.0, "a": 3.0}]})["v"]
    np.testing.assert_array_equal(got, [[1.0, 0.0], [3.0, 2.0]])


@pytest.mark.parametrize("key, given, message", [
    (STRING, [("a", 1.0)], r"^model input 'm' is a list, but the model declares map\(string, tensor\(float\)\): "
                           r"feed a dict$"),
    (STRING, {1: 1.0}, r"^model input 'm' has key 1 of type int, but the model declares "
                       r"map\(string, tensor\(float\)\)$"),
    (INT64, {"a": 1.0}, r"^model input 'm' has key 'a' of type str, but the model declares "
                        r"map\(int64, tensor\(float\)\)$"),
    (INT64, {True: 1.0}, r"key True of type bool"),
], ids=["list", "int-key-for-string", "str-key-for-int64", "bool-key"])
def test_a_map_must_be_a_dict_with_keys_of_the_declared_type(key, given, message):
    m = _vectorizer(key, ["a"] if key == STRING else [1], map_of(key, tensor(FLOAT)))
    with pytest.raises(DTypeError, match=message) as info:
        run_model(m, {"m": given})
    assert info.value.input == "m"


def test_inputs_of_every_kind_in_one_model():
    nodes = [oh.make_node("SequenceInsert", ["s", "t"], ["s2"]), oh.make_node("OptionalHasElement", ["o"], ["h"]),
             oh.make_node("DictVectorizer", ["m"], ["v"], domain="ai.onnx.ml", string_vocabulary=["k"])]
    m = model(nodes, {"s": SEQ, "t": tensor(FLOAT, [2, 2]), "o": optional(SEQ), "m": map_of(STRING, tensor(FLOAT))},
              {"s2": SEQ, "h": tensor(TensorProto.BOOL), "v": tensor(FLOAT)}, ml=True)
    got = run_model(m, {"s": [np.zeros(3, np.float32)], "t": A, "o": None, "m": {"k": 4.0}})
    assert [x.shape for x in got["s2"]] == [(3,), (2, 2)] and not got["h"]
    np.testing.assert_array_equal(got["v"], [4.0])


def _fixed_and_partial_model():
    """x: float (2, 3), every dim fixed; i: int64 ('n', 2), one dim fixed; w: float (3,), backed
    by an initializer (may be fed or left out)."""
    f = oh.make_tensor_value_info
    nodes = [oh.make_node("Add", ["x", "w"], ["y"]), oh.make_node("Identity", ["i"], ["j"])]
    graph = oh.make_graph(
        nodes,
        "g",
        [f("x", TensorProto.FLOAT, [2, 3]), f("i", TensorProto.INT64, ["n", 2]), f("w", TensorProto.FLOAT, [3])],
        [f("y", TensorProto.FLOAT, [2, 3]), f("j", TensorProto.INT64, ["n", 2])],
        [oh.make_tensor("w", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])


@pytest.mark.parametrize(
    "bad",
    [
        {"x": np.zeros((3, 2), np.float32)},  # fixed dims differ (declared shape compared whole)
        {"x": np.zeros((2, 3, 1), np.float32)},  # rank
        {"x": np.zeros((2, 3), np.float64)},  # dtype
        {"i": np.zeros((4, 3), np.int64)},  # a fixed dim of a partly fixed shape
        {"i": np.zeros((4,), np.int64)},  # rank of a partly fixed shape
        {"i": None},  # missing
        {"z": np.zeros(1)},  # not an input
    ],
    ids=["fixed-dims", "rank", "dtype", "partial-dim", "partial-rank", "missing", "unknown"],
)
def test_the_feed_check_after_good_feeds_raises_what_check_inputs_raises(bad):
    """The Session's feed check (``FeedPlan``: the declared shape compared whole where every dim
    is fixed, the feeds counted where no initializer backs an input) passes good feeds as they
    are, and a bad feed after good ones of its signature raises check_inputs' error, word for word."""
    from gather_scatter.models._feeds import FeedPlan, check_inputs
    from gather_scatter import Session

    model = _fixed_and_partial_model()
    plan = FeedPlan(model.graph)
    good = {"x": np.ones((2, 3), np.float32), "i": np.zeros((5, 2), np.int64)}
    session = Session(model)
    for _ in range(3):
        assert plan.check(good) is good
        assert plan.check({**good, "w": np.zeros(3, np.float32)}).keys() == {"x", "i", "w"}
        y, j = session.run(None, good)
        assert y.tolist() == [[2.0, 3.0, 4.0]] * 2 and j.shape == (5, 2)
    feeds = {**good, **bad}
    feeds = {k: v for k, v in feeds.items() if v is not None}
    with pytest.raises((ModelInputError, DTypeError, ShapeError)) as expected:
        check_inputs(model.graph, feeds)
    for check in (plan.check, lambda f: session.run(None, f)):
        with pytest.raises(type(expected.value)) as raised:
            check(feeds)
        assert str(raised.value) == str(expected.value)


def test_the_feed_check_counts_feeds_only_where_no_initializer_backs_an_input():
    """Where no initializer backs an input, as many passing feeds as inputs are every input; a
    missing one is still found where one does (the count is not used there)."""
    from gather_scatter.models._feeds import FeedPlan

    model = _fixed_and_partial_model()
    plan = FeedPlan(model.graph)
    assert plan.count is None
    with pytest.raises(ModelInputError, match="model input 'i' is missing"):
        plan.check({"x": np.ones((2, 3), np.float32), "w": np.zeros(3, np.float32)})
    del model.graph.initializer[:]
    plan = FeedPlan(model.graph)
    assert plan.count == 3
    with pytest.raises(ModelInputError, match="model input 'w' is missing"):
        plan.check({"x": np.ones((2, 3), np.float32), "i": np.zeros((5, 2), np.int64)})
