"""Every ONNX tensor type in and out of both Session engines (issue 36).

Each of ONNX's 28 element types is fed to a model that echoes it (Identity, outside the family)
and runs a node of the family on it (Gather-13 for the 16 types every operator takes,
TensorScatter-24 for float8, 4-bit and the rest; Identity alone for the 2-bit and 6-bit types
no operator of the family takes), through ``engine="reference"`` and ``engine="onnxruntime"``
(nothing routed, and ``route="all"``, where the family's output crosses into onnxruntime),
with 0-d, empty and ordinary shapes. Every output has the declared type's dtype (strings:
object arrays of ``str``, whatever string dtype was fed), its shape, and the expected bits.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import gather_scatter as gs

pytest.importorskip("onnxruntime", reason="the onnxruntime engine needs onnxruntime")

_TYPES = [(name, elem) for name, elem in onnx.TensorProto.DataType.items() if elem != onnx.TensorProto.UNDEFINED]
_GATHER_TYPES = {
    "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE",
    "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16",
}  # fmt: skip
_TENSOR_SCATTER_TYPES = {
    "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "FLOAT8E8M0", "INT4", "UINT4", "FLOAT4E2M1",
}  # fmt: skip
_ENGINES = [("reference", "needed"), ("onnxruntime", "needed"), ("onnxruntime", "all")]


def test_the_type_lists_cover_every_onnx_type():
    assert len(_TYPES) == 28
    no_family = {"UINT2", "INT2", "FLOAT6E2M3", "FLOAT6E3M2"}
    assert _GATHER_TYPES | _TENSOR_SCATTER_TYPES | no_family == {n for n, _ in _TYPES}


def _values(elem: int, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Values of ``elem``'s NumPy dtype, every one exactly representable (small integers)."""
    size = int(np.prod(shape, dtype=np.int64))
    if elem == onnx.TensorProto.STRING:
        words = np.empty(size, dtype=object)
        words[:] = [f"w{seed}-{k}-é" for k in range(size)]
        return words.reshape(shape)
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    small = np.arange(seed, seed + size) % 2  # 0 and 1: in every type (e8m0 has no 0: 1 and 2)
    if elem == onnx.TensorProto.FLOAT8E8M0:
        small = small + 1
    return small.astype(dtype).reshape(shape)


def _model(elem: int, family: str | None) -> onnx.ModelProto:
    t = oh.make_tensor_value_info
    nodes = [oh.make_node("Identity", ["x"], ["echo"], name="echo")]
    inputs = [t("x", elem, None)]
    outputs = [t("echo", elem, None)]
    if family == "Gather":
        nodes += [oh.make_node("Gather", ["x", "i"], ["g"], name="gather"), oh.make_node("Identity", ["g"], ["y"])]
        inputs.append(t("i", onnx.TensorProto.INT64, None))
        outputs.append(t("y", elem, None))
    elif family == "TensorScatter":
        nodes += [
            oh.make_node("TensorScatter", ["cache", "update", "at"], ["c"], name="write"),
            oh.make_node("Identity", ["c"], ["y"]),
        ]
        inputs += [t("cache", elem, None), t("update", elem, None), t("at", onnx.TensorProto.INT64, None)]
        outputs.append(t("y", elem, None))
    graph = oh.make_graph(nodes, "types", inputs, outputs)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 24)], ir_version=11)


def _cases(name: str, elem: int):
    """(shape label, feeds, expected outputs) for a type."""
    family = "Gather" if name in _GATHER_TYPES else "TensorScatter" if name in _TENSOR_SCATTER_TYPES else None
    for label, shape in (("0-d", ()), ("empty", (0, 2)), ("normal", (3, 2))):
        x = _values(elem, shape, 0)
        feeds, expected = {"x": x}, [x]
        if family == "Gather":
            data = x if shape else _values(elem, (3,), 1)
            feeds["x"], expected[0] = data, data
            i = np.array(1) if label == "0-d" else np.array([], np.int64) if label == "empty" else np.array([2, 0, 2])
            feeds["i"] = i
            expected.append(np.array(np.take(data, i, axis=0), dtype=data.dtype))
        elif family == "TensorScatter":
            rows = {"0-d": 1, "empty": 0, "normal": 2}[label]  # 0-d is no shape of a cache: one row
            cache = _values(elem, (2, 3, rows), 0)
            update = _values(elem, (2, 1, rows), 1)
            at = np.array([2, 0])
            out = cache.copy()
            out[0, 2], out[1, 0] = update[0, 0], update[1, 0]
            feeds.update(cache=cache, update=update, at=at)
            expected.append(out)
        yield label, feeds, expected


def _bits(a: np.ndarray) -> object:
    return a.tolist() if a.dtype == object else np.ascontiguousarray(a).view(np.uint8).tolist()


@pytest.mark.parametrize(("engine", "route"), _ENGINES, ids=[f"{e}-{r}" for e, r in _ENGINES])
@pytest.mark.parametrize(("name", "elem"), _TYPES, ids=[n.lower() for n, _ in _TYPES])
def test_every_type_in_and_out(name, elem, engine, route):
    family = "Gather" if name in _GATHER_TYPES else "TensorScatter" if name in _TENSOR_SCATTER_TYPES else None
    options = {"threads": 1, "route": route} if engine == "onnxruntime" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # onnxruntime refusing a type to load: the node is routed
        session = gs.Session(_model(elem, family), engine=engine, **options)
    want_dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    for label, feeds, expected in _cases(name, elem):
        outputs = session.run(None, feeds)
        assert len(outputs) == len(expected)
        for out, want in zip(outputs, expected, strict=True):
            assert isinstance(out, np.ndarray), (label, type(out))
            assert out.dtype == want_dtype, (label, out.dtype)
            assert out.shape == want.shape, (label, out.shape, want.shape)
            assert _bits(out) == _bits(want), label


@pytest.mark.parametrize(("engine", "route"), _ENGINES, ids=[f"{e}-{r}" for e, r in _ENGINES])
@pytest.mark.parametrize("kind", ["U", "S", "O"])
def test_strings_come_back_as_object_arrays_of_str(engine, route, kind):
    """Whatever string dtype is fed (``'U'``, ``'S'``, object), both engines give object arrays of str."""
    words = np.array(["ab", "c", "d"]).astype(kind if kind != "O" else object)
    options = {"threads": 1, "route": route} if engine == "onnxruntime" else {}
    session = gs.Session(_model(onnx.TensorProto.STRING, "Gather"), engine=engine, **options)
    echo, gathered = session.run(None, {"x": words, "i": np.array([2, 0])})
    for out, want in ((echo, ["ab", "c", "d"]), (gathered, ["d", "ab"])):
        assert out.dtype == object
        assert out.tolist() == want
        assert all(type(v) is str for v in out.tolist())


@pytest.mark.parametrize("engine", ["reference", "onnxruntime"])
def test_an_object_array_of_strings_is_fed_as_it_is(engine):
    """A string input's object array passes the feed check's fast path (issue 38: 43 of the 164 us
    of a Gather of 32 string rows went to check_inputs, which passed it unchanged too); the
    items are still judged where an operator reads them."""
    from gather_scatter.models._feeds import FeedPlan, check_inputs

    model = _model(onnx.TensorProto.STRING, "Gather")
    for value, dims in zip(model.graph.input, ([3], [2]), strict=True):  # declared shapes: the fast path's
        value.type.tensor_type.shape.dim.extend(onnx.TensorShapeProto.Dimension(dim_value=d) for d in dims)
    words = np.array(["ab", "c", "d"], dtype=object)
    feeds = {"x": words, "i": np.array([2, 0])}
    plan = FeedPlan(model.graph)
    assert plan.check(feeds) is feeds
    assert check_inputs(model.graph, feeds)["x"] is words
    options = {"threads": 1} if engine == "onnxruntime" else {}
    session = gs.Session(model, engine=engine, **options)
    with pytest.raises(gs.DTypeError, match="str"):
        session.run(None, {"x": np.array(["ab", 3, "d"], dtype=object), "i": np.array([2, 0])})
    assert words.tolist() == ["ab", "c", "d"]
