"""``benchmarks/bench_ops.py --quick`` runs and writes every case with sane fields, and
``benchmarks/bench_sizes.py --quick`` prints its table and writes its plot (no timing asserts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "gather_axis0_embedding", "gather_axis1", "gather_strings", "gather_int32_indices", "gather_nd_elements",
    "gather_nd_rows", "gather_nd_batch_dims1", "gather_middle_axis_int32", "gather_nd_batch_dims2", "gather_nd_ms_int32", "scatter_nd_none_unique",
    "scatter_nd_add_dups", "scatter_nd_mul_dups", "scatter_nd_max_dups", "scatter_nd_kv_cache",
    "scatter_nd_kv_cache_inplace", "scatter_nd_add_float16", "scatter_nd_add_bfloat16",
    "gather_elements_last_axis", "gather_elements_axis0", "scatter_elements_add_dups", "scatter_elements_max_dups",
    "scatter_elements_none_distinct", "tensor_scatter_decode", "tensor_scatter_decode_inplace",
    "tensor_scatter_prefill_circular", "scatter_nd_add_1_elements_1200x900", "scatter_nd_add_1000_elements_1200x900",
    "gbq_4bit_b32_1_id", "gbq_4bit_b32_2048_ids", "gbq_4bit_b128_2048_ids", "gbq_4bit_b32_f16_2048_ids",
    "gbq_8bit_b32_zp_1_id", "gbq_8bit_b32_zp_2048_ids",
}


def test_quick_benchmark_writes_every_case(tmp_path):
    path = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_ops.py"), "--quick", "--json", str(path)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(path.read_text())
    assert result["memcpy_Bps"] > 0 and result["machine"]["threads"] >= 1
    rows = {r["case"]: r for r in result["cases"]}
    assert set(rows) == CASES
    for name, r in rows.items():
        assert r["ours_s"] > 0 and r["ours_repeats"] >= 1, name
        assert r["bandwidth_Bps"] > 0 and r["peak_alloc_bytes"] >= 0, name
        assert isinstance(r["targets"], dict), name
        if "float16" in name or "bfloat16" in name:
            assert r["ort_s"] is None, name  # onnxruntime lacks these: ours alone
        else:
            assert r["ort_s"] > 0 and isinstance(r["ort_correct"], bool), name
            assert r["ratio_vs_ort"] > 0, name
        if "reference_error" not in r:
            assert r["reference_s"] > 0 and r["reference_repeats"] >= 1, name
    for name in ("scatter_nd_add_1_elements_1200x900", "scatter_nd_add_1000_elements_1200x900"):
        assert rows[name]["copy_s"] > 0 and "copy<=1.15" in rows[name]["targets"], name  # the copy-mode bound
    assert rows["scatter_nd_kv_cache_inplace"]["inplace_matches_copy"] is True
    assert rows["tensor_scatter_decode_inplace"]["inplace_matches_copy"] is True
    assert all(rows[name]["ort_correct"] for name in CASES if name.startswith(("gather_elements", "tensor_scatter")))
    assert all(rows[name]["ort_correct"] for name in CASES if name.startswith("gbq_"))  # issue 27: bit for bit
    assert "ours/ort" in proc.stdout


def test_quick_size_sweep_prints_its_table_and_writes_the_plot(tmp_path):
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed (pip install 'gather_scatter[bench]')")
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install 'gather_scatter[bench]')")
    path = tmp_path / "sizes.png"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_sizes.py"), "--quick", "--plot", str(path)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| case | size | ours µs | NumPy µs | ORT µs | ours / ORT |" in proc.stdout
    for sweep in ("gather", "scatter_nd_none", "scatter_nd_add", "scatter_elements", "tensor_scatter"):
        assert f"| {sweep} (" in proc.stdout, sweep
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_quick_reduction_sweep_writes_every_cell_and_the_heatmap(tmp_path):
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed (pip install 'gather_scatter[bench]')")
    pytest.importorskip("matplotlib", reason="matplotlib not installed (pip install 'gather_scatter[bench]')")
    path, plot = tmp_path / "reductions.json", tmp_path / "reductions.png"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_reductions.py"), "--quick", "--json", str(path),
         "--plot", str(plot)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    cells = json.loads(path.read_text())["cells"]
    # --quick: 3 ops x 4 reductions x {float32, int64, float16} x R {16, 1000} x U {10000} x W {1, 8, 64}
    assert len(cells) == 3 * 4 * 3 * 2 * 3
    assert {(c["op"], c["reduction"], c["dtype"]) for c in cells} == {
        (op, r, d) for op in ("scatter_nd_rows", "scatter_nd_elements", "scatter_elements")
        for r in ("add", "mul", "max", "min") for d in ("float32", "int64", "float16")}
    for c in cells:
        assert c["ours_s"] > 0, c
        if c["dtype"] == "float16":  # onnxruntime has none: ours against our float32
            assert "ort1_s" not in c and c["ratio_f32"] > 0, c
        else:  # onnxruntime at 1 thread is exact: it must agree with ours, bit for bit
            assert c["ort1_s"] > 0 and c["ort2_s"] > 0 and c["ort1_equal"] is True, c
            assert isinstance(c["ort2_equal"], bool), c
    assert "| op | reduction | dtype | W | R | U |" in proc.stdout and "Worst cells" in proc.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_reduction_sweep_without_matplotlib_writes_its_table_and_names_the_extra(tmp_path, monkeypatch, capsys):
    # matplotlib is only the heatmap's: without it the sweep still prints and saves, then says what to install
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed (pip install 'gather_scatter[bench]')")
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_reductions", ROOT / "benchmarks" / "bench_reductions.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    path, plot = tmp_path / "reductions.json", tmp_path / "reductions.png"
    assert bench.main(["--quick", "--op", "scatter_nd_rows", "--reduction", "add", "--dtype", "float32",
                       "--width", "8", "--rounds", "1", "--json", str(path), "--plot", str(plot)]) == 0
    out = capsys.readouterr()
    assert "| op | reduction | dtype | W | R | U |" in out.out and len(json.loads(path.read_text())["cells"]) == 2
    assert 'it needs matplotlib: pip install "gather_scatter[bench]"' in out.err and not plot.exists()


def test_quick_quantized_sweep_runs_every_cell_bitwise_against_onnxruntime(tmp_path):
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed (pip install 'gather_scatter[bench]')")
    path = tmp_path / "quantized.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_quantized.py"), "--quick", "--json", str(path)],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]  # each cell asserts ours == onnxruntime's bits first
    rows = json.loads(path.read_text())
    # --quick: 1 shape x 5 tables x 2 output types x 2 thread counts x 2 id counts
    assert len(rows) == 5 * 2 * 2 * 2
    assert {r["table"] for r in rows} == {"4bit", "2bit", "8bit_zp", "int4", "fp8"}
    assert all(r["ours_ms"] > 0 and r["ort_ms"] > 0 for r in rows)
    assert "cells: median ratio" in proc.stdout


def test_ort_race_runs_and_the_docs_give_its_one_figure():
    """Issue 36: onnxruntime's ScatterND race was three figures in three places ('18 of 20' differed, '11 of 20'
    wrong, '9 of 20' exact); now one, measured by one command, the same in README.md and docs/models.md."""
    import re

    pytest.importorskip("onnxruntime")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "ort_race.py"), "--rows", "2000", "--runs", "3"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"2 intra-op threads, index_add export .*2,000 rows of 8 float32 into 64 segments: [0-3] of 3 "
                     r"runs differ from the spec's loop \(gather_scatter\.run_model\), in [0-3] distinct results; "
                     r"Session\(engine='onnxruntime'\): 0 of 3$", proc.stdout.strip()), proc.stdout
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    models = (ROOT / "docs" / "models.md").read_text(encoding="utf-8")
    figures = [re.findall(r"wrong on (\d+) runs of (\d+)", readme), re.findall(r"wrong on (\d+) runs of (\d+)", models),
               re.findall(r"\*\*(\d+) of (\d+) runs\s+differed\*\*", models)]
    assert all(len(found) == 1 for found in figures) and len({found[0] for found in figures}) == 1, figures
    assert "benchmarks/ort_race.py" in readme and "benchmarks/ort_race.py" in models
    assert not re.search(r"\d+ (runs )?of 20\b", readme + models)


def test_importing_a_benchmark_leaves_the_environment_alone():
    # A benchmark sets GATHER_SCATTER_COMPILED=eager for its own runs (a loop's steady state);
    # imported as a module (as these smoke tests do) it must not set it for the importer: the
    # test process's later subprocesses inherited it and loaded numba on their first small call.
    code = (
        "import importlib, os, sys\n"
        "sys.path.insert(0, 'benchmarks')\n"
        "before = dict(os.environ)\n"
        "names = [p[:-3] for p in sorted(os.listdir('benchmarks')) if p.startswith('bench_') and p.endswith('.py')]\n"
        "for name in names:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except ImportError:\n"
        "        pass  # an optional library (torch, dask) missing here\n"
        # torch's: importing torch._dynamo (torch.compiler.disable, at the torch backend's import)
        # sets its cache folder for its own subprocesses, whoever imports it
        "torch_own = {'TORCHINDUCTOR_CACHE_DIR'}\n"
        "changed = sorted(k for k in (set(before) | set(os.environ)) - torch_own if before.get(k) != os.environ.get(k))\n"
        "print(len(names), changed)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    count, changed = proc.stdout.split(" ", 1)
    assert int(count) >= 8 and changed.strip() == "[]"
