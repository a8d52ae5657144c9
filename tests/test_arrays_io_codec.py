"""One .npz codec (issue 37): ml_dtypes' types and strings through every writer and reader.

The writers: ``run --output`` (``cli._common._save_arrays``), a finding's inputs
(``check.report.write_inputs``) and a repro script's archive (``models.save_npz`` of what
``repro_script.build`` returns, as ``upstream`` writes it). The readers: ``run --inputs``
(``cli._common._load_arrays``), a finding's repro line (``check.report.load_inputs``) and plain
``np.load(allow_pickle=False)`` with the repro script's own decoding line. Every one of the 28 ONNX
tensor types comes back with its dtype and bits (strings: the very str objects). The defect this
fixes: a finding's ``.npz`` stored bfloat16/float8/int4 inputs as unsigned bits, which
``gather-scatter run MODEL --inputs finding.npz`` refused ("model input 'x0' has NumPy dtype
uint16, but the model declares tensor(bfloat16)").
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from gather_scatter.check import report, repro_script, runner, upstream
from gather_scatter.check.case_values import Case
from gather_scatter.cli import main
from gather_scatter.cli._common import _load_arrays, _save_arrays
from gather_scatter.models import decode_source, load_npz, onnx_type_of, save_npz
from gather_scatter.rules.versions import ONNX_TYPES, REGISTRY

# Every ONNX tensor type (onnx 1.23: 28) by its lower-case name, as the codec tags them.
TYPES = {
    TensorProto.DataType.Name(number).lower(): (number, np.dtype(helper.tensor_dtype_to_np_dtype(number)))
    for number in TensorProto.DataType.values()
    if number != TensorProto.UNDEFINED
}
SHAPES = [(), (0,), (2, 0, 3), (3,), (2, 3), (3, 40)]  # (3, 40): over LITERAL_LIMIT, a repro script's archive
STRINGS = ["", "é", "日本語", "🙂", "a🙂b", "\x00x", "\u00ff", "longer string"]


def test_the_types_are_onnxs_28_and_include_onnx_types():
    assert len(TYPES) == 28
    assert all(TYPES[name][1] == dtype for name, dtype in ONNX_TYPES.items())


def _sample(type_name: str, shape: tuple[int, ...]) -> np.ndarray:
    """An array of ``type_name`` whose every value the type holds exactly (NaN where it has one)."""
    dtype = TYPES[type_name][1]
    n = math.prod(shape)
    if dtype.kind == "O":
        return np.array([STRINGS[i % len(STRINGS)] for i in range(n)] + [None], dtype=object)[:n].reshape(shape)
    if dtype.kind == "c":
        pool: list = [1 + 2j, 0, -3j, complex(np.nan, 1)]
    elif dtype.kind == "b":
        pool = [True, False]
    else:
        candidates = [0.0, 1.0, -1.0, 0.5, 2.0, 3.0, -0.5, 1.5, np.nan]
        pool = []
        for v in candidates:
            with np.errstate(invalid="ignore", over="ignore"):
                back = np.array([v]).astype(dtype).astype(np.float64)[0]
            if back == v or (np.isnan(v) and np.isnan(back)):
                pool.append(v)
    return np.array([pool[i % len(pool)] for i in range(n)] + [pool[0]])[:n].astype(dtype).reshape(shape)


def _same(got: np.ndarray, want: np.ndarray, where: str) -> None:
    assert isinstance(got, np.ndarray), where
    assert got.dtype == want.dtype and got.shape == want.shape, (where, got.dtype, want.dtype, got.shape, want.shape)
    if want.dtype == object:
        assert got.tolist() == want.tolist(), where
        assert [type(v) for v in got.flat] == [type(v) for v in want.flat], where
    else:
        assert got.tobytes() == want.tobytes(), where


def _identity(path, arrays: dict[str, np.ndarray]) -> str:
    """A model declaring each array as an input of its ONNX type (what load_inputs reads)."""
    nodes = [helper.make_node("Identity", [name], [f"{name}_out"]) for name in arrays]
    elems = {name: TYPES[_type_name(a.dtype)][0] for name, a in arrays.items()}
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(name, elem, None) for name, elem in elems.items()],
        [helper.make_tensor_value_info(f"{name}_out", elem, None) for name, elem in elems.items()],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)]), path)
    return str(path)


def _type_name(dtype: np.dtype) -> str:
    return next(name for name, (_, known) in TYPES.items() if known == dtype)


# The writers, each as the package calls it.
WRITERS = {
    "cli-output": lambda path, arrays: _save_arrays(str(path), arrays),
    "check-report": lambda path, arrays: report.write_inputs(str(path), arrays),
    "repro-archive": lambda path, arrays: save_npz(str(path), arrays, what="array"),  # upstream._write_class's call
}


def _read_by_script(path, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """np.load without pickle, then each array's line as a repro script has it (the codec's decode_source)."""
    scope: dict = {"np": np, "ml_dtypes": __import__("ml_dtypes")}
    with np.load(path, allow_pickle=False) as archive:
        scope["ARRAYS"] = archive
        for name, array in arrays.items():
            if array.size > repro_script.LITERAL_LIMIT:
                line = repro_script._array_source(name, array, {}, "a.npz")
                assert f"ARRAYS[{name!r}]" in line, line  # from the archive, not a literal
            else:  # a small array is a literal in a script: the codec's decoding line all the same
                line = f"{name} = {decode_source(f'ARRAYS[{name!r}]', onnx_type_of(array.dtype))}"
            exec(line, scope)
    return {name: scope[name] for name in arrays}


READERS = {
    "cli-inputs": lambda path, arrays, model: _load_arrays(str(path)),
    "finding-load-inputs": lambda path, arrays, model: report.load_inputs(model, str(path)),
    "np-load-and-script-decode": lambda path, arrays, model: _read_by_script(path, arrays),
}


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize("type_name", list(TYPES))
def test_every_type_round_trips_through_every_writer_and_reader(tmp_path, type_name, writer):
    arrays = {f"x{i}": _sample(type_name, shape) for i, shape in enumerate(SHAPES)}
    path = tmp_path / "a.npz"
    WRITERS[writer](path, arrays)
    with np.load(path, allow_pickle=False) as plain:  # no pickle, exactly the arrays written
        assert plain.files == list(arrays)
        for name, array in arrays.items():
            stored = plain[name]
            if array.dtype.kind == "O":
                assert stored.dtype.kind == "U" and stored.tolist() == array.tolist()
            elif onnx_type_of(array.dtype) is not None:  # ml_dtypes: raw void of its width, its very bytes
                assert stored.dtype == np.dtype(f"V{array.dtype.itemsize}") and stored.tobytes() == array.tobytes()
                assert stored.view(array.dtype).tobytes() == array.tobytes()
            else:
                _same(stored, array, name)
    with zipfile.ZipFile(path) as archive:  # the tag: the member's comment
        tag = onnx_type_of(arrays["x0"].dtype)
        assert archive.getinfo("x0.npy").comment == (f"onnx:{tag}".encode() if tag else b"")
        assert tag in (None, type_name)
    model = _identity(tmp_path / "m.onnx", arrays)
    for reader, read in READERS.items():
        got = read(path, arrays, model)
        assert list(got) == list(arrays), reader
        for name, array in arrays.items():
            _same(got[name], array, f"{writer} -> {reader}: {name} {array.shape}")


@pytest.mark.parametrize("type_name", [t for t, (_, d) in TYPES.items() if d.kind == "O" or onnx_type_of(d)])
def test_the_script_line_is_the_codecs_decode_source(type_name):
    array = _sample(type_name, (3, 40))
    line = repro_script._array_source("X", array, {}, "a.npz")
    assert line.startswith(f"X = {decode_source(repr('X').join(['ARRAYS[', ']']), type_name)}  # ")


def _check(spec_key, inputs):
    spec = REGISTRY[spec_key]
    return runner.CheckCase(spec, spec.since_version, Case(spec.op_type, inputs, {}), "valid")


CASES = {  # a valid case whose finding holds the type: Gather-13 (bfloat16, string), TensorScatter-24 (float8, 4-bit)
    "bfloat16": ("", "Gather", 13),
    "string": ("", "Gather", 13),
    "float8e5m2": ("", "TensorScatter", 24),
    "float8e4m3fn": ("", "TensorScatter", 24),
    "int4": ("", "TensorScatter", 24),
    "float4e2m1": ("", "TensorScatter", 24),
}


def _case(type_name: str, size: int = 4):
    key = CASES[type_name]
    if key[1] == "Gather":
        return _check(key, [_sample(type_name, (3, size)), np.array([2, 0, -1], np.int64)])
    return _check(key, [_sample(type_name, (2, 3, size)), _sample(type_name, (2, 1, size))[::-1].copy(),
                        np.array([1, 0], np.int64)])


@pytest.mark.parametrize("type_name", list(CASES))
def test_a_findings_npz_runs_with_gather_scatter_run(tmp_path, type_name, capsys):
    # The defect: the finding's bfloat16/float8/int4 inputs were stored as uint16/uint8 bits and
    # `gather-scatter run finding.onnx --inputs finding.npz` refused them (exit 2, "model input 'x0'
    # has NumPy dtype uint16, but the model declares tensor(bfloat16) (NumPy bfloat16)").
    check = _case(type_name)
    finding = runner.Finding("wrong_output", check, "as found")
    report.write_finding(finding, 1, str(tmp_path), "onnx-reference")
    out = tmp_path / "out.npz"
    code = main(["run", finding.files["model"], "--inputs", finding.files["inputs"], "--output", str(out)])
    assert code == 0, capsys.readouterr().err
    (got,) = load_npz(out).values()
    _same(got, runner.expected(check), type_name)
    # ... and the finding's own one-line reproduction reads it as before.
    loaded = report.load_inputs(finding.files["model"], finding.files["inputs"])
    for name, array in check.feeds().items():
        _same(loaded[name], np.asarray(array), name)


def test_a_findings_npz_from_gather_scatter_check_runs(tmp_path, capsys):
    # Through the command itself: every finding's inputs load as the model's types (the verdict is
    # the node's own: these cases are invalid ones, refused by the node, not by the input checks).
    assert main(["check", "--engine", "onnx-reference", "--op", "ScatterND", "--cases", "3",
                 "--out", str(tmp_path / "out"), "--seed", "0"]) == 1
    capsys.readouterr()
    npzs = sorted((tmp_path / "out").glob("finding-*.npz"))
    assert npzs
    typed = 0
    for npz in npzs:
        main(["run", str(npz.with_suffix(".onnx")), "--inputs", str(npz)])
        err = capsys.readouterr().err
        assert "has NumPy dtype" not in err, err
        with np.load(npz, allow_pickle=False) as archive:
            typed += any(a.dtype.kind == "V" for a in archive.values())
    assert typed  # at least one finding holds bfloat16 inputs


@pytest.mark.parametrize("type_name", ["bfloat16", "string", "float8e5m2", "int4"])
def test_a_repro_scripts_archive_is_written_by_the_codec(tmp_path, type_name):
    check = _case(type_name, size=40)  # over LITERAL_LIMIT: data, updates and the output go to the archive
    finding = runner.Finding("wrong_output", check, "as found")
    (issue,) = upstream.write_reports([finding], "onnx-reference", "1", str(tmp_path / "issues"), run_scripts=False)
    script = Path(issue).with_suffix(".py")
    archive = script.with_suffix(".npz")
    got = load_npz(archive)  # the CLI's reader: each array as its ONNX type, from the tags
    _same(got["x0"], check.case.inputs[0], "x0")
    _same(got["EXPECTED"], runner.expected(check), "EXPECTED")
    source = script.read_text()
    assert f"x0 = {decode_source(repr('x0').join(['ARRAYS[', ']']), type_name)}  # " in source


def test_old_files_are_read_as_the_declared_types(tmp_path, capsys):
    # Files without tags: NumPy's np.savez writes ml_dtypes as raw void (and float8_e5m2 as
    # '<f1'), strings as unicode; the model's declared types say what they are.
    check = _case("bfloat16")
    data, indices = check.case.inputs
    finding = runner.Finding("wrong_output", check, "as found")
    report.write_finding(finding, 1, str(tmp_path), "onnx-reference")
    model = finding.files["model"]
    np.savez(tmp_path / "old.npz", x0=data, x1=indices)  # np.savez's raw void, untagged
    assert main(["run", model, "--inputs", str(tmp_path / "old.npz"), "--output", str(tmp_path / "o.npz")]) == 0
    _same(load_npz(tmp_path / "o.npz")["y"], runner.expected(check), "V")
    _same(report.load_inputs(model, str(tmp_path / "old.npz"))["x0"], data, "V")
    # unsigned integers are never read as another type's bits: a uint16 array for a bfloat16
    # input is the user's mistake, refused with both dtypes named
    np.savez(tmp_path / "old.npz", x0=data.view(np.uint16), x1=indices)
    assert main(["run", model, "--inputs", str(tmp_path / "old.npz")]) == 2
    assert "has NumPy dtype uint16, but the model declares tensor(bfloat16)" in capsys.readouterr().err
    strings = _case("string")
    finding = runner.Finding("wrong_output", strings, "as found")
    report.write_finding(finding, 2, str(tmp_path), "onnx-reference")
    np.savez(tmp_path / "old.npz", x0=strings.case.inputs[0].astype(str), x1=strings.case.inputs[1])
    _same(report.load_inputs(finding.files["model"], str(tmp_path / "old.npz"))["x0"], strings.case.inputs[0], "U")
    capsys.readouterr()


def test_a_string_ending_in_nul_is_kept_by_a_finding_and_refused_by_run_output(tmp_path):
    tricky = np.array(["a\x00", "b"], dtype=object)
    report.write_inputs(str(tmp_path / "f.npz"), {"x": tricky})  # pickled: no NumPy string array holds it
    model = _identity(tmp_path / "m.onnx", {"x": tricky})
    _same(report.load_inputs(model, str(tmp_path / "f.npz"))["x"], tricky, "x")
    with pytest.raises(ValueError, match="output 'x' has a string ending in NUL"):
        _save_arrays(str(tmp_path / "o.npz"), {"x": tricky})
    assert not (tmp_path / "o.npz").exists()


def _tagged(path, name: str, array: np.ndarray, tag: str) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        info = zipfile.ZipInfo(f"{name}.npy")
        info.comment = tag.encode()
        with archive.open(info, "w") as member:
            np.lib.format.write_array(member, array)


@pytest.mark.parametrize(("array", "tag", "message"), [
    (np.zeros(3, np.uint8).view("V1"), "onnx:float9", "unknown ONNX type 'float9' in its tag onnx:float9"),
    (np.zeros(3, np.uint8).view("V1"), "onnx:bfloat16", "array 'x' is tagged onnx:bfloat16 but holds |V1, not |V2"),
    (np.zeros(3, np.float32), "onnx:string", "array 'x' is tagged onnx:string but holds float32"),
])
def test_a_bad_tag_is_refused_naming_the_array(tmp_path, array, tag, message, capsys):
    _tagged(tmp_path / "bad.npz", "x", array, tag)
    model = _identity(tmp_path / "m.onnx", {"x": np.zeros(3, np.float32)})
    assert main(["run", model, "--inputs", str(tmp_path / "bad.npz")]) == 2
    assert message in capsys.readouterr().err


def test_an_untagged_comment_is_no_tag(tmp_path):
    _tagged(tmp_path / "c.npz", "x", np.arange(3), "written by hand")
    _same(load_npz(tmp_path / "c.npz")["x"], np.arange(3), "x")
