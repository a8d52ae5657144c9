"""The gather-scatter command line, in-process (main) and as a subprocess (python -m)."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnx.helper as oh
import pytest

from gather_scatter import run_model
from gather_scatter.cli import main

DATA = pathlib.Path(__file__).resolve().parent / "data"
SPARSE = DATA / "sparse_update.onnx"
SPARSE_INPUTS = DATA / "sparse_update_inputs.npz"


@pytest.fixture
def sparse_inputs():
    with np.load(SPARSE_INPUTS) as archive:
        return dict(archive)


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "gather_scatter.cli", *map(str, args)], capture_output=True, text=True, timeout=60
    )


def save_inputs(tmp_path, inputs):
    """One .npy per input; the --input arguments for them."""
    args = []
    for name, value in inputs.items():
        np.save(tmp_path / f"{name}.npy", value)
        args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    return args


def assert_one_paragraph_error(stderr, *fragments):
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gather-scatter run: error: "), stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_default_run_prints_each_output_in_process(capsys):
    assert main(["run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "model: built-in decoder_step.onnx (inputs from decoder_step_inputs.npz)"
    rows = [line.split(maxsplit=4) for line in out[1:4]]
    assert [r[:2] for r in rows] == [["logits", "float32"], ["k_cache_out", "float32"], ["v_cache_out", "float32"]]
    assert out[1].split("[", 1)[0].split()[2:] == ["(2,", "16)"]
    assert "-0.3076 -0.1484 -0.2639 ..." in out[1]
    assert out[4].startswith("wall time: ") and out[4].endswith(" ms")


def test_default_run_as_subprocess():
    result = run_cli("run")
    assert result.returncode == 0, result.stderr
    assert "logits       float32  (2, 16)" in result.stdout
    assert "k_cache_out  float32  (2, 6, 8)" in result.stdout


def test_default_run_leaves_numba_unloaded():
    """numba's import (~0.5 s) is for large element-wise and fused scatter calls: the built-in
    model's small nodes run on NumPy alone."""
    code = ("import sys; from gather_scatter.cli import main; main(['run']); "
            "print('numba' in sys.modules, 'torch' in sys.modules, 'jax' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "False False False"


def test_console_script():
    script = shutil.which("gather-scatter", path=str(pathlib.Path(sys.executable).parent))
    if script is None:
        pytest.skip("the gather-scatter console script is not installed beside this Python")
    result = subprocess.run([script, "run"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("model: built-in decoder_step.onnx")


def test_input_files_and_output_npz(tmp_path, sparse_inputs, capsys):
    out_path = tmp_path / "out.npz"
    argv = ["run", str(SPARSE), *save_inputs(tmp_path, sparse_inputs), "--output", str(out_path)]
    assert main(argv) == 0
    stdout = capsys.readouterr().out
    assert "updated  float32  (2, 5, 4)" in stdout and f"outputs saved to {out_path}" in stdout
    with np.load(out_path) as saved:
        assert list(saved) == ["updated"]
        np.testing.assert_array_equal(saved["updated"], run_model(SPARSE, sparse_inputs)["updated"])


def test_inputs_npz_with_an_input_file_overriding_it(tmp_path, sparse_inputs):
    np.save(tmp_path / "dst.npy", np.zeros(7, np.int64))
    out_path = tmp_path / "out.npz"
    result = run_cli("run", SPARSE, "--inputs", SPARSE_INPUTS, "--input", f"dst={tmp_path / 'dst.npy'}",
                     "--output", out_path)
    assert result.returncode == 0, result.stderr
    expected = run_model(SPARSE, {**sparse_inputs, "dst": np.zeros(7, np.int64)})["updated"]
    with np.load(out_path) as saved:
        np.testing.assert_array_equal(saved["updated"], expected)


@pytest.mark.parametrize(
    "change, fragments",
    [
        (lambda f: f.pop("src"), ["model input 'src' is missing"]),
        (lambda f: f.update(dst=f["dst"].astype(np.int32)),
         ["model input 'dst' has NumPy dtype int32, but the model declares tensor(int64)"]),
        (lambda f: f.update(dst=np.array([0, 1, 1, 4, 0, 2, 5])),
         ["node 'node_ScatterND_25' (ScatterND):", "indices[6, 1] = 5 is out of bounds for data axis 1 of size 5"]),
    ],
    ids=["missing", "wrong-dtype", "out-of-bounds"],
)
def test_bad_inputs_exit_2_with_one_paragraph(tmp_path, sparse_inputs, capsys, change, fragments):
    change(sparse_inputs)
    assert main(["run", str(SPARSE), *save_inputs(tmp_path, sparse_inputs)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert_one_paragraph_error(captured.err, *fragments)


def test_out_of_bounds_index_as_subprocess(tmp_path, sparse_inputs):
    sparse_inputs["src"] = np.array([0, 0, 0, 9, 0, 0, 0])
    np.savez(tmp_path / "bad.npz", **sparse_inputs)
    result = run_cli("run", SPARSE, "--inputs", tmp_path / "bad.npz")
    assert result.returncode == 2
    assert_one_paragraph_error(result.stderr, "(GatherND): GatherND-13: indices[3, 1] = 9 is out of bounds")


@pytest.mark.parametrize("content", [None, b"not a protobuf"], ids=["missing-file", "not-onnx"])
def test_unreadable_model_exits_2(tmp_path, content):
    path = tmp_path / "model.onnx"
    if content is not None:
        path.write_bytes(content)
    result = run_cli("run", path)
    assert result.returncode == 2
    assert_one_paragraph_error(result.stderr, f"cannot read model '{path}'")


def test_unreadable_inputs_file_exits_2(tmp_path, capsys):
    (tmp_path / "in.npz").write_text("nope")
    assert main(["run", str(SPARSE), "--inputs", str(tmp_path / "in.npz")]) == 2
    assert_one_paragraph_error(capsys.readouterr().err, "cannot read inputs file")


def test_malformed_input_argument_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", str(SPARSE), "--input", "dst"])
    assert info.value.code == 2
    assert "expected NAME=FILE.npy, got 'dst'" in capsys.readouterr().err


def test_memory_limit_error_is_reported_naming_the_node():
    # The OutputTooLargeError used to be lost inside run_model (in_node failed on a MemoryError
    # subclass) and came out as onnx.reference's "TypeError: Issues with types".
    result = subprocess.run([sys.executable, "-m", "gather_scatter.cli", "run"], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "GATHER_SCATTER_MEMORY_LIMIT": "200"})
    assert result.returncode == 2
    # 200 bytes: the Gemm before it (192 bytes) runs; the limit covers every operator (issue 19).
    assert_one_paragraph_error(result.stderr, "node 'node_ScatterND_20' (ScatterND): ScatterND-18: output of shape",
                               "more than the memory limit of 200 bytes")


def test_shapes_reports_an_output_past_int64_naming_the_node(tmp_path, capsys):
    node = oh.make_node("Gather", ["d", "i"], ["y"], name="huge")
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("d", 1, [2**40, 2**30]),
                                        oh.make_tensor_value_info("i", 7, [2**40])],
                          [oh.make_tensor_value_info("y", 1, None)])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]), tmp_path / "huge.onnx")
    assert main(["shapes", str(tmp_path / "huge.onnx")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert err.startswith("gather-scatter shapes: error: node 'huge' (Gather): Gather-13: output of shape "
                          "(1099511627776, 1073741824) and dtype float32 would take 4722366482869645213696 bytes")


def test_output_without_npz_suffix_names_the_file_written(tmp_path, sparse_inputs, capsys):
    np.savez(tmp_path / "in.npz", **sparse_inputs)
    assert main(["run", str(SPARSE), "--inputs", str(tmp_path / "in.npz"), "--output", str(tmp_path / "result")]) == 0
    assert f"outputs saved to {tmp_path / 'result.npz'}\n" in capsys.readouterr().out
    assert (tmp_path / "result.npz").exists() and not (tmp_path / "result").exists()


def test_input_given_an_npz_archive_says_it_is_not_a_npy_file(tmp_path, sparse_inputs, capsys):
    np.savez(tmp_path / "archive.npz", dst=sparse_inputs["dst"])
    assert main(["run", str(SPARSE), "--input", f"dst={tmp_path / 'archive.npz'}"]) == 2
    assert_one_paragraph_error(capsys.readouterr().err, f"cannot read input 'dst' from '{tmp_path / 'archive.npz'}': "
                               "it is an .npz archive (arrays: dst), not a .npy file")


def test_inputs_given_a_npy_file_says_it_is_not_an_archive(tmp_path, capsys):
    np.save(tmp_path / "one.npy", np.zeros(3))
    assert main(["run", str(SPARSE), "--inputs", str(tmp_path / "one.npy")]) == 2
    assert_one_paragraph_error(capsys.readouterr().err, f"cannot read inputs file '{tmp_path / 'one.npy'}': it is a "
                               ".npy file (one array of shape (3,)), not an .npz archive", "--input NAME=FILE.npy")


@pytest.mark.parametrize("output_name", ["file", "allow_pickle", "kwds"])
def test_output_named_like_a_savez_parameter_is_saved(tmp_path, output_name, capsys):
    # np.savez(path, **outputs) took an output named 'file' as its own argument (a TypeError traceback)
    # and one named 'allow_pickle' as its flag (an empty archive, "saved" all the same).
    node = oh.make_node("Gather", ["d", "i"], [output_name], name="pick")
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info("d", 1, [3, 2]), oh.make_tensor_value_info("i", 7, [2])],
                          [oh.make_tensor_value_info(output_name, 1, None)])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]), tmp_path / "m.onnx")
    d = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.savez(tmp_path / "in.npz", d=d, i=np.array([2, 0]))
    assert main(["run", str(tmp_path / "m.onnx"), "--inputs", str(tmp_path / "in.npz"),
                 "--output", str(tmp_path / "out")]) == 0
    assert f"outputs saved to {tmp_path / 'out.npz'}\n" in capsys.readouterr().out
    with np.load(tmp_path / "out.npz") as saved:
        assert saved.files == [output_name]
        np.testing.assert_array_equal(saved[output_name], d[[2, 0]])


def test_shapes_reads_no_external_data(tmp_path, capsys, monkeypatch):
    # Only shapes are read: 'shapes' used to load every weight (onnx.load's bare error). The data
    # file must be there (issue 26 item 9), but none of its bytes is read.
    shutil.copy(DATA / "gather_elements.onnx", tmp_path / "model.onnx")
    shutil.copy(DATA / "gather_elements.onnx.data", tmp_path / "gather_elements.onnx.data")
    import onnx.external_data_helper

    def no_weights(*args, **kwargs):
        raise AssertionError("shapes read the external data")

    monkeypatch.setattr(onnx.external_data_helper, "load_external_data_for_model", no_weights)
    assert main(["shapes", str(tmp_path / "model.onnx")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "node 'node_gather' (GatherElements-13): bias ('batch', 2, 128, 128) float32"


@pytest.mark.parametrize("args, message", [
    (["--op", "Foo"], "argument --op: unknown operator or version 'Foo'; choose from Gather, Gather-1, Gather-11, "),
    (["--op", "GatherND-99"], "argument --op: unknown operator or version 'GatherND-99' (did you mean 'GatherND' or "),
    (["--opset", "99"], "argument --opset: 99 is not in [1, 28]"),
    (["--opset", "0"], "argument --opset: 0 is not in [1, 28]"),
    (["--cases", "-1"], "argument --cases: -1 is not >= 1"),
    (["--seed", "-1"], "argument --seed: -1 is not >= 0"),
    (["--threads", "0"], "argument --threads: 0 is not >= 1"),
    (["--timeout", "0"], "argument --timeout: 0.0 is not > 0"),
    (["--timeout", "nan"], "argument --timeout: nan is not > 0"),
], ids=["unknown-op", "unknown-version", "opset-too-new", "opset-0", "negative-cases", "negative-seed", "no-threads", "no-time", "nan-time"])
def test_check_refuses_arguments_that_select_nothing_or_cannot_run(args, message, capsys):
    # --op Foo and --cases -1 ran 0 cases and said "no findings" (exit 0); --opset 99 was a
    # ValueError traceback from onnx.helper (--seed -1 one from numpy); --timeout 0 counted every case as hung.
    with pytest.raises(SystemExit) as info:
        main(["check", "--engine", "onnx-reference", *args])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"gather-scatter check: error: {message}" in err


@pytest.mark.parametrize("option", ["--out", "--json"])
def test_check_refuses_an_unwritable_destination_before_running(tmp_path, option, capsys):
    # --out under a file was a NotADirectoryError traceback, after the whole run.
    (tmp_path / "file").write_text("")
    target = tmp_path / "file" / "sub"
    assert main(["check", "--engine", "onnx-reference", "--op", "Gather-13", "--cases", "1", option, str(target)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"gather-scatter check: error: cannot write {option} {str(target)!r}: "
                            f"{str(tmp_path / 'file')!r} is not a directory\n")


def _sequence_model(tmp_path, shapes):
    """Output 's': SequenceConstruct of inputs a, b (float, of ``shapes``); output 'n': Neg(a)."""
    nodes = [oh.make_node("SequenceConstruct", ["a", "b"], ["s"]), oh.make_node("Neg", ["a"], ["n"])]
    graph = oh.make_graph(nodes, "g", [oh.make_tensor_value_info(x, 1, shape) for x, shape in zip("ab", shapes)],
                          [oh.make_tensor_sequence_value_info("s", 1, None), oh.make_tensor_value_info("n", 1, None)])
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]), tmp_path / "seq.onnx")
    np.savez(tmp_path / "in.npz", **{x: np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
                                     for x, shape in zip("ab", shapes)})
    return [str(tmp_path / "seq.onnx"), "--inputs", str(tmp_path / "in.npz")]


@pytest.mark.parametrize("shapes", [[[2], [3]], [[2], [2]]], ids=["ragged", "same-shape"])
def test_a_sequence_output_is_printed_as_a_sequence(tmp_path, shapes, capsys):
    # A ragged sequence was a ValueError traceback out of np.asarray; one of equal shapes was
    # printed as one stacked array.
    assert main(["run", *_sequence_model(tmp_path, shapes)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["s", "sequence", "[2]", "[float32", f"({shapes[0][0]},),", "float32", f"({shapes[1][0]},)]"]
    assert out[2].split()[:3] == ["n", "float32", f"({shapes[0][0]},)"]


def test_a_sequence_output_is_not_saved_to_npz(tmp_path, capsys):
    args = _sequence_model(tmp_path, [[2], [3]])
    assert main(["run", *args, "--output", str(tmp_path / "out.npz")]) == 2
    assert capsys.readouterr().err == (
        f"gather-scatter run: error: cannot write {str(tmp_path / 'out.npz')!r}: output 's' is a sequence of "
        "2 tensors, and an .npz file holds tensors only\n")
    assert not (tmp_path / "out.npz").exists()


def test_version_option_and_python_dash_m(capsys):
    import importlib.metadata

    import gather_scatter

    version = importlib.metadata.version("gather_scatter")
    assert gather_scatter.__version__ == version
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out == f"gather-scatter {version}\n"
    result = subprocess.run([sys.executable, "-m", "gather_scatter", "--version"], capture_output=True, text=True,
                            timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, f"gather-scatter {version}\n", "")
    result = subprocess.run([sys.executable, "-m", "gather_scatter", "run"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("model: built-in decoder_step.onnx"), result.stderr


def test_dir_and_help_list_the_lazy_names():
    # run_model and infer_model_shapes are loaded on first use, so dir() and help() missed them.
    code = ("import pydoc, gather_scatter as gs; names = dir(gs); "
            "assert set(gs.__all__) <= set(names), set(gs.__all__) - set(names); "
            "assert names == sorted(names); "
            "text = pydoc.render_doc(gs); "
            "assert all(n in text for n in ('run_model', 'infer_model_shapes')); print('ok')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout == "ok\n", result.stderr
    import gather_scatter

    assert {"run_model", "infer_model_shapes"} <= set(gather_scatter.__all__)


@pytest.mark.parametrize("case", ["missing-folder", "file-as-folder", "directory", "not-writable"])
def test_run_refuses_an_unwritable_output_before_running(tmp_path, case, monkeypatch, capsys):
    # --output /nonexistent/o.npz ran the whole model first, then failed writing.
    (tmp_path / "file").write_text("")
    (tmp_path / "dir.npz").mkdir()
    output, problem = {
        "missing-folder": (tmp_path / "no" / "o.npz", f"its folder {str(tmp_path / 'no')!r} does not exist"),
        "file-as-folder": (tmp_path / "file" / "o", f"{str(tmp_path / 'file')!r} is not a directory"),
        "directory": (tmp_path / "dir", "it is a directory"),  # .npz is appended: dir.npz, a folder
        "not-writable": (tmp_path / "o.npz", f"{str(tmp_path)!r} is not writable"),
    }[case]
    if case == "not-writable":  # (as root, a chmod would not stop the write)
        access = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: p != str(tmp_path) and access(p, mode, **kw))
    shown = str(output) if str(output).endswith(".npz") else f"{output}.npz"
    assert main(["run", "--output", str(output)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing was run
    assert captured.err == f"gather-scatter run: error: cannot write --output {shown!r}: {problem}\n"


def test_large_gathers_and_scatters_load_numba_only_once_a_loop_pays_for_it():
    """The compiled paths of large Gather/ScatterND calls wait for numba to be loaded (~0.5 s)
    until a process's WARM_CALLS-th large call; their results never depend on it."""
    code = (
        "import sys, numpy as np, gather_scatter as gs\n"
        "from gather_scatter.kernels import _numba as _compiled\n"
        "t = np.arange(400_000, dtype=np.float32).reshape(4000, 100); i = np.arange(3000)[::-1].copy()\n"
        "g = np.zeros((1000, 300), np.float32); r = np.array([[5], [5]]); u = np.ones((2, 300), np.float32)\n"
        "first = [gs.gather(t, i), gs.scatter_nd(g, r, u, 'add')]\n"
        "for _ in range(10):\n"
        "    assert gs.gather(t, i).tobytes() == first[0].tobytes()\n"
        "    assert gs.scatter_nd(g, r, u, 'add').tobytes() == first[1].tobytes()\n"
        "print('numba' in sys.modules)\n"
        "for _ in range(_compiled.WARM_CALLS):\n"
        "    assert gs.gather(t, i).tobytes() == first[0].tobytes()\n"
        "    assert gs.scatter_nd(g, r, u, 'add').tobytes() == first[1].tobytes()\n"
        "print('numba' in sys.modules, _compiled.loops() is not None)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    before, after = result.stdout.splitlines()[-2:]
    assert before == "False"
    assert after in ("True True", "False False")  # numba loaded by WARM_CALLS such calls (or not installed)


def test_shapes_of_an_export_with_onnxruntime_operators_without_onnxruntime_names_its_extra(capsys, monkeypatch):
    # onnxruntime registers SimplifiedLayerNormalization in onnx's domain; shapes accepts it where
    # onnxruntime is installed, and says so where it is not (not the Session's engine='onnxruntime').
    from gather_scatter import ModelInputError
    from gather_scatter.models.shape_inference import infer_model_shapes

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    path = DATA / "quantized" / "qwen2_h64_int4.onnx"
    said = ("node '/model/layers.0/input_layernorm/LayerNorm' (SimplifiedLayerNormalization): "
            "SimplifiedLayerNormalization is an onnxruntime contrib operator registered in onnx's default domain")
    assert main(["shapes", str(path)]) == 2
    err = capsys.readouterr().err
    assert said in err and "where onnxruntime is installed" in err
    assert 'pip install "gather_scatter[onnxruntime]"' in err
    assert "engine=" not in err
    with pytest.raises(ModelInputError, match='pip install "gather_scatter\\[onnxruntime\\]"') as info:
        infer_model_shapes(path)
    assert info.value.node == "/model/layers.0/input_layernorm/LayerNorm" and str(info.value).startswith(said)
