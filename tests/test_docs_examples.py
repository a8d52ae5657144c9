"""The documentation pages' examples run as they say, and the versions table says what the registry holds.

Each test takes a page's Python code block, runs it, and checks what its comments claim: the
NumPy examples (getting started, one per operator page) through ``doc_examples.run_with_claims``,
the others (PyTorch, JAX, dask, Session) by their own assertions. The README's own tour is
tested in ``tests/test_readme.py``.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re

import numpy as np
import pytest
from doc_examples import python_block, python_blocks, run_with_claims

from gather_scatter.rules.versions import ALL_TYPES, REGISTRY, TENSOR_SCATTER_TYPES, TYPES_BEFORE_BFLOAT16

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"
DATA_TYPES = {"all 16": ALL_TYPES, "all but bfloat16": TYPES_BEFORE_BFLOAT16, "all 24": TENSOR_SCATTER_TYPES}


def _block(page: str, marker: str) -> str:
    """The Python code block of ``docs/<page>`` that contains ``marker``."""
    return python_block(DOCS / page, marker)


# The self-contained NumPy examples: they import gather_scatter and NumPy and nothing else
# (the spec's loops quoted on the operator pages import nothing and are not run).
NUMPY_EXAMPLES = [
    pytest.param(block, id=f"{page.relative_to(DOCS).as_posix()}-{n}")
    for page in sorted(DOCS.rglob("*.md"))
    for n, block in enumerate(python_blocks(page))
    if "import gather_scatter as gs" in block
    and not re.search(r"^(import|from) (torch|jax|dask|onnx)|^f = oh\.", block, flags=re.M)
]


def test_the_numpy_examples_are_found():
    pages = {p.id.rsplit("-", 1)[0] for p in NUMPY_EXAMPLES}
    assert pages == {"getting-started.md", "operators/gather.md", "operators/gather-nd.md",
                     "operators/scatter-nd.md", "operators/elements.md", "operators/tensor-scatter.md",
                     "operators/gather-block-quantized.md"}


@pytest.mark.parametrize("block", NUMPY_EXAMPLES)
def test_numpy_example_runs_as_its_comments_say(block):
    assert run_with_claims(block) >= 1


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _types(cell: str) -> frozenset[str]:
    """The data types a table cell names: one of the named sets, or the types listed."""
    return DATA_TYPES.get(cell) or frozenset(cell.split(", "))


def _attributes_cell(version) -> str:
    if not version.attributes:
        return "—"
    choices = {"reduction": version.reductions, "mode": version.modes}  # string attributes list their values
    return ", ".join(
        f"{name} ({default!r}: {', '.join(choices[name])})" if name in choices else f"{name} ({default})"
        for name, default in version.attributes.items()
    )


def test_versions_table_matches_the_registry():
    # docs/versions.md's table (rendered by docs/hooks.py at build time): every registered
    # version once, with its attributes, data types and index types.
    table = _hooks().versions_table([])
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table.splitlines()
            if line.startswith("| ")][2:]  # after the header and its rule
    listed = {
        ("" if domain == "ai.onnx" else domain, op, int(since)): (attributes, types, set(index.split(", ")))
        for op, domain, since, _opsets, attributes, types, index in rows
    }
    assert set(listed) == set(REGISTRY) and len(rows) == len(REGISTRY)
    for key, version in REGISTRY.items():
        attributes, types, index = listed[key]
        data, *others = types.split("; ")  # inputs of other types than data's: "; scales: float, float16"
        per_input = {name: _types(cell) for name, cell in (other.split(": ") for other in others)}
        assert (attributes, _types(data), per_input, index) == (
            _attributes_cell(version), version.data_types, dict(version.input_types), version.index_types), key


def test_torch_example_runs_as_it_says():
    pytest.importorskip("torch", reason="torch not installed (pip install 'gather_scatter[torch]')")
    scope: dict = {}
    exec(_block("array-libraries.md", "import torch"), scope)
    assert scope["out"][:, 0].tolist() == [0.0, 2.0, 0.0, 1.0]
    assert scope["updates"].grad.tolist() == [[1.0] * 3] * 3 and scope["data"].grad.tolist() == [[1.0] * 3] * 4


def test_jax_example_runs_as_it_says():
    pytest.importorskip("jax", reason="jax not installed (pip install 'gather_scatter[jax]')")
    scope: dict = {}
    exec(_block("array-libraries.md", "import jax"), scope)
    import gather_scatter as gs

    table = np.arange(12.0).reshape(3, 4)
    expected = gs.scatter_elements(table, np.array([[3, 3]]), np.array([[9.0, 7.0]]), axis=1, reduction="max")
    assert np.array_equal(np.asarray(scope["updated"]), expected)
    assert np.asarray(scope["grads"]).tolist() == [[0.0] * 4, [0.0] * 4, [2.0] * 4]
    assert scope["err"].get().startswith("Gather-13: indices[0] = 5 is out of bounds for data axis 0 of size 3")


def test_dask_example_runs_as_it_says(tmp_path, monkeypatch):
    pytest.importorskip("dask.array", reason="dask not installed (pip install 'gather_scatter[dask]')")
    pytest.importorskip("zarr", reason="zarr not installed (pip install 'gather_scatter[dask]')")
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(_block("array-libraries.md", "import dask.array as da"), scope)
    ids, table = scope["ids"], scope["table"]
    assert scope["rows"].shape == (10_000, 64)
    counts = np.bincount(ids, minlength=1_000_000).astype(np.float32)
    assert np.array_equal(table[:, 0], counts) and np.array_equal(table[:, 63], counts)


def test_icechunk_example_commits_all_or_nothing(tmp_path, monkeypatch):
    pytest.importorskip("icechunk", reason="icechunk not installed (pip install 'gather_scatter[icechunk]')")
    pytest.importorskip("dask.array", reason="dask not installed (pip install 'gather_scatter[dask]')")
    import icechunk
    import zarr

    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(_block("array-libraries.md", "icechunk.Repository.create"), scope)
    repo = icechunk.Repository.open(icechunk.local_filesystem_storage("embeddings.icechunk"))
    history = [snapshot.message for snapshot in repo.ancestry(branch="main")]
    assert history[:2] == ["10,000 updates added", "an empty table"]
    table = zarr.open_array(repo.readonly_session("main").store, path="table", mode="r")[:]
    counts = np.bincount(scope["ids"], minlength=100_000).astype(np.float32)
    assert np.array_equal(table[:, 0], counts) and np.array_equal(table[:, 63], counts)


def test_session_example_runs_as_it_says():
    scope: dict = {}
    exec(_block("models.md", "gs.Session("), scope)
    assert scope["inputs"] == [("table", "tensor(float)", [4, 2]), ("ids", "tensor(int64)", ["n"])]
    assert scope["rows"].tolist() == [[2.0, 3.0]] and scope["rows"].dtype == np.float32


def test_hosted_session_example_runs_as_it_says(capsys):
    pytest.importorskip("onnxruntime", reason="onnxruntime not installed (pip install 'gather_scatter[onnxruntime]')")
    import gather_scatter as gs

    scope: dict = {}
    code = _block("models.md", 'engine="onnxruntime", threads=2')
    exec(code, scope)
    printed = capsys.readouterr().out.splitlines()
    # the plan printed is the one the comment shows (its first lines, up to the reason's cut)
    shown = [line[2:] for line in code.splitlines() if line.startswith("#")]
    assert len(printed) == len(shown)
    version = re.compile(r"onnxruntime \d+\.\d+\.\d+")  # the installed release's, wherever it runs
    for got, want in zip(printed, shown, strict=True):
        got, want = version.sub("onnxruntime X", got), version.sub("onnxruntime X", want)
        assert got.startswith(want.removesuffix(" ...")), (got, want)
    expected = gs.run_model(scope["model"], scope["feeds"])["out"]
    assert scope["out"].tobytes() == expected.tobytes()
    assert list(scope["session"].plan.routed) == ["pool"]
