"""``gather-scatter run``'s array files (issue 26 items 8 and 14): every ONNX tensor type written by
``--output`` is read by ``np.load(..., allow_pickle=False)`` and by ``--inputs`` of a next run;
ml_dtypes' types that NumPy stores as raw void are read as the declared type; a file that is not
NumPy's is refused naming it."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnx.helper as oh
import pytest

from gather_scatter.cli import main

ELEM_TYPES = sorted(v for v in onnx.TensorProto.DataType.values() if v != onnx.TensorProto.UNDEFINED)


def _identity(path, elem, source, target, shape=(3,)):
    graph = oh.make_graph([oh.make_node("Identity", [source], [target])], "g",
                          [oh.make_tensor_value_info(source, elem, shape)],
                          [oh.make_tensor_value_info(target, elem, shape)])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 25)]), path)
    return str(path)


def _values(elem):
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))
    if dtype.kind == "O":
        return np.array(["a", "bé", ""], dtype=object)
    if dtype.kind == "c":
        return np.array([1 + 2j, 0, -3j], dtype)
    return np.array([1, 0, 1.5 if dtype.kind in "fV" else 2]).astype(dtype)


def test_every_onnx_tensor_type_is_listed():
    assert len(ELEM_TYPES) >= 28  # onnx 1.23: float ... float6e3m2


@pytest.mark.parametrize("elem", ELEM_TYPES, ids=lambda e: onnx.TensorProto.DataType.Name(e).lower())
def test_output_round_trips_through_np_load_and_a_next_run(tmp_path, elem, capsys):
    first = _identity(tmp_path / "first.onnx", elem, "x", "y")
    second = _identity(tmp_path / "second.onnx", elem, "y", "z")
    x = _values(elem)
    dtype = x.dtype
    # The inputs as a user saves them: np.savez writes ml_dtypes' types as raw void (float8_e5m2 as '<f1').
    np.savez(tmp_path / "in.npz", x=x.astype(str) if dtype.kind == "O" else x)
    out1, out2 = tmp_path / "out1.npz", tmp_path / "out2.npz"
    assert main(["run", first, "--inputs", str(tmp_path / "in.npz"), "--output", str(out1)]) == 0
    with np.load(out1, allow_pickle=False) as saved:  # no pickle: a string output is a unicode array
        y = saved["y"]
    if dtype.kind == "O":
        assert y.dtype.kind == "U" and y.tolist() == x.tolist()
    elif dtype.type.__module__.startswith("ml_dtypes"):  # the documented convention: raw void of its width
        assert y.dtype == np.dtype(f"V{dtype.itemsize}")
        assert y.view(dtype).tobytes() == x.tobytes()
    else:
        assert y.dtype == dtype and y.tobytes() == x.tobytes()
    assert main(["run", second, "--inputs", str(out1), "--output", str(out2)]) == 0  # read back as the declared type
    with np.load(out2, allow_pickle=False) as saved:
        z = saved["z"]
    assert z.dtype == y.dtype and z.tobytes() == y.tobytes() if dtype.kind != "O" else z.tolist() == x.tolist()
    assert "error" not in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "int4", "uint4", "float4_e2m1fn"])
def test_a_npy_file_of_an_ml_dtypes_type_is_read_as_the_declared_type(tmp_path, kind, capsys):
    dtype = np.dtype(getattr(ml_dtypes, kind))
    elem = next(e for e in ELEM_TYPES if np.dtype(onnx.helper.tensor_dtype_to_np_dtype(e)) == dtype)
    model = _identity(tmp_path / "m.onnx", elem, "x", "y")
    x = np.array([1, -1, 2]).astype(dtype) if kind != "uint4" else np.array([1, 15, 2]).astype(dtype)
    np.save(tmp_path / "x.npy", x)  # '|V2' / '|V1', or '<f1' (float8_e5m2), which np.load refuses
    assert main(["run", model, "--input", f"x={tmp_path / 'x.npy'}", "--output", str(tmp_path / "o.npz")]) == 0
    with np.load(tmp_path / "o.npz", allow_pickle=False) as saved:
        assert saved["y"].view(dtype).tobytes() == x.tobytes()
    assert f"  y  {dtype}" in capsys.readouterr().out  # the printed dtype names the type of the void bytes


def test_void_of_another_width_is_refused_naming_the_types(tmp_path, capsys):
    model = _identity(tmp_path / "m.onnx", onnx.TensorProto.BFLOAT16, "x", "y")
    np.save(tmp_path / "x.npy", np.zeros(3, ml_dtypes.float8_e4m3fn))  # |V1 for a bfloat16 (2-byte) input
    assert main(["run", model, "--input", f"x={tmp_path / 'x.npy'}"]) == 2
    err = capsys.readouterr().err
    assert "model input 'x' has NumPy dtype |V1, but the model declares tensor(bfloat16)" in err


@pytest.mark.parametrize("option", ["--inputs", "--input"])
def test_a_file_that_is_not_numpys_is_refused_naming_it(tmp_path, option, capsys):
    # `run --inputs model.onnx` gave NumPy's "Cannot load file containing pickled data when allow_pickle=False".
    model = _identity(tmp_path / "m.onnx", onnx.TensorProto.FLOAT, "x", "y")
    for given, hint in ((model, True), (str(tmp_path / "notes.txt"), False)):
        (tmp_path / "notes.txt").write_text("x = 1, 2, 3\n")
        arg = given if option == "--inputs" else f"x={given}"
        assert main(["run", model, option, arg]) == 2
        err = capsys.readouterr().err
        what = f"cannot read inputs file {given!r}" if option == "--inputs" else f"cannot read input 'x' from {given!r}"
        assert err.startswith(f"gather-scatter run: error: {what}: it is not a .npy or .npz file (it starts with "
                              "neither NumPy's .npy signature nor a zip archive's)")
        assert ("it looks like an ONNX model: the model goes first" in err) == hint
        assert "pickle" not in err


def test_outputs_that_are_no_tensor_or_no_exact_string_are_refused_naming_them(tmp_path, capsys):
    # An empty optional was pickled (None as an object array), a string ending in NUL would lose it.
    optional = oh.make_graph(
        [oh.make_node("Optional", [], ["y"], type=oh.make_tensor_type_proto(onnx.TensorProto.FLOAT, [2]))], "g",
        [], [oh.make_value_info("y", oh.make_optional_type_proto(oh.make_tensor_type_proto(onnx.TensorProto.FLOAT,
                                                                                          [2])))])
    onnx.save(oh.make_model(optional, opset_imports=[oh.make_opsetid("", 18)]), tmp_path / "opt.onnx")
    assert main(["run", str(tmp_path / "opt.onnx"), "--output", str(tmp_path / "o.npz")]) == 2
    assert "output 'y' is an empty optional (None), and an .npz file holds tensors only" in capsys.readouterr().err
    # A string ending in NUL would read back without it: refused (onnx.reference strips them itself, so
    # the rule is checked where it lives).
    from gather_scatter.models import _arrays_io

    with pytest.raises(ValueError, match="output 'y' has a string ending in NUL, which a NumPy string array cannot"):
        _arrays_io.storable("y", np.array(["ok", "nul\x00"], dtype=object))
    with pytest.raises(ValueError, match="output 'y' has a string ending in NUL"):
        _arrays_io.storable("y", np.array([b"nul\x00"], dtype=object))
    assert _arrays_io.storable("y", np.array([b"a", b"bc"], dtype=object)).dtype == np.dtype("S2")
    with pytest.raises(ValueError, match="output 'm' is a map"):
        _arrays_io.storable("m", {1: np.zeros(2)})


def test_run_help_says_how_outputs_are_stored(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "np.load(OUT.npz, allow_pickle=False) reads" in text
    assert "strings as NumPy unicode arrays" in text and "raw void of their width" in text


def test_check_model_reads_void_inputs_as_the_declared_type(tmp_path, capsys):
    # check MODEL --inputs reads the same files as run --inputs: a bfloat16 table saved by np.savez is |V2.
    f = oh.make_tensor_value_info
    graph = oh.make_graph([oh.make_node("Gather", ["d", "i"], ["y"], name="pick")], "g",
                          [f("d", onnx.TensorProto.BFLOAT16, [4]), f("i", onnx.TensorProto.INT64, [2])],
                          [f("y", onnx.TensorProto.BFLOAT16, [2])])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]), tmp_path / "m.onnx")
    np.savez(tmp_path / "in.npz", d=np.arange(4).astype(ml_dtypes.bfloat16), i=np.array([3, 0]))
    assert main(["check", str(tmp_path / "m.onnx"), "--engine", "onnx-reference", "--inputs", str(tmp_path / "in.npz"),
                 "--out", str(tmp_path / "findings"), "--tries", "1"]) == 0
    out = capsys.readouterr().out
    assert "inputs (seed 0): d bfloat16[4] given, i int64[2] given" in out and "no findings" in out


def test_the_output_table_fits_each_column_to_its_widest_entry(tmp_path, capsys):
    """Issue 36: a dtype longer than 8 characters (float8_e4m3fn) or a shape longer than 12 pushed its row's
    later columns right of the others'."""
    f8, f32, i64 = onnx.TensorProto.FLOAT8E4M3FN, onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    graph = oh.make_graph(
        [oh.make_node("TensorScatter", ["cache", "update", "at"], ["cache_out"]),  # float8 since TensorScatter-24
         oh.make_node("Identity", ["f"], ["same"]), oh.make_node("Identity", ["at"], ["ids"])], "g",
        [oh.make_tensor_value_info("cache", f8, [1, 4, 2]), oh.make_tensor_value_info("update", f8, [1, 1, 2]),
         oh.make_tensor_value_info("at", i64, [1]), oh.make_tensor_value_info("f", f32, [1, 2, 3, 4, 5])],
        [oh.make_tensor_value_info("cache_out", f8, [1, 4, 2]), oh.make_tensor_value_info("same", f32, [1, 2, 3, 4, 5]),
         oh.make_tensor_value_info("ids", i64, [1])],
    )
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 24)]), tmp_path / "m.onnx")
    cache = np.arange(8).reshape(1, 4, 2).astype(ml_dtypes.float8_e4m3fn)
    update = np.full((1, 1, 2), 9).astype(ml_dtypes.float8_e4m3fn)
    np.savez(tmp_path / "in.npz", cache=cache, update=update, at=np.array([1]), f=np.zeros((1, 2, 3, 4, 5), np.float32))
    assert main(["run", str(tmp_path / "m.onnx"), "--inputs", str(tmp_path / "in.npz")]) == 0
    lines = capsys.readouterr().out.splitlines()[1:4]
    assert [line.split()[:2] for line in lines] == [["cache_out", "float8_e4m3fn"], ["same", "float32"],
                                                    ["ids", "int64"]]
    assert lines[0].startswith("  cache_out  float8_e4m3fn (1, 4, 2)       [0 1 9 ... 5 6 7]"), lines[0]
    for column in ("(", "["):  # the shapes, then the previews, start at one position in every row
        assert len({line.index(column) for line in lines}) == 1, lines
    assert lines[1].index("[") == lines[1].index("(1, 2, 3, 4, 5)") + len("(1, 2, 3, 4, 5) ")
