"""numba's cache of the compiled loops (``kernels/_loops_cache``): a loop inlines functions of
other modules, so its cached machine code must go stale when any compiled module's source
changes, not only its own file (numba's own stamp), or an edit, or an upgrade of the package
that changed only that other module, would run the old code: a silently wrong answer."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gather_scatter.kernels import _numba

pytestmark = pytest.mark.skipif(_numba.loops() is None, reason="numba's loops are off here (GATHER_SCATTER_COMPILED=0)")


def _dispatchers():
    """Every numba dispatcher of the compiled modules: their globals, the tables of loops
    (``by_reduction``'s tuples), and the walks made on first use (one made here)."""
    import numba

    from gather_scatter.kernels import _codes, _loops_axis

    modules = [m for name, m in sys.modules.items() if name.startswith("gather_scatter.kernels._loops")]
    walk = _loops_axis._AXIS[_codes.MAX][1]
    found = []

    def visit(value, depth=0):
        if isinstance(value, numba.core.registry.CPUDispatcher):
            found.append(value)
        elif isinstance(value, tuple | list) and depth < 3:
            for item in value:
                visit(item, depth + 1)

    for module in modules:
        for value in vars(module).values():
            visit(value)
    if hasattr(walk, "walk"):  # F16C here: _LanesAxis makes its walks on first use
        visit(walk.walk("held1"))
    return found


def test_every_cached_loop_is_stamped_with_all_compiled_sources():
    from gather_scatter.kernels import _loops_cache

    dispatchers = [d for d in _dispatchers() if d._cache is not None and hasattr(d._cache, "_impl")]
    assert len(dispatchers) > 20
    for dispatcher in dispatchers:
        locator = dispatcher._cache._impl.locator
        assert getattr(type(locator), "_gather_scatter", False), dispatcher
        assert locator.get_source_stamp() == _loops_cache.STAMP


_MAX_TIE = """
import numpy as np, gather_scatter as gs
from gather_scatter.kernels import _numba
_numba.EAGER = True
data = np.zeros((64, 1), np.float16)  # +0, a table larger than the updates: the element walk
updates = np.full((8, 1), -0.0, np.float16)  # -0 ties +0: float16 max keeps the data's +0
out = gs.scatter_elements(data, np.zeros((8, 1), np.int64), updates, axis=0, reduction="max")
print(hex(out.view(np.uint16)[0, 0]))
"""


def test_an_edit_of_an_inlined_module_alone_compiles_the_loops_again(tmp_path):
    """A copy of the package, its loops compiled into its own ``__pycache__``; then only
    ``_loops_reduce.py`` changes (float16 max's tie rule, ``_tie``, which ``_loops_axis``' walks inline):
    the next process must run the new rule, not load the walk compiled before."""
    package = Path(__import__("gather_scatter").__file__).parent
    copy = tmp_path / "gather_scatter"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "GATHER_SCATTER_COMPILED")}
    env["PYTHONPATH"] = str(tmp_path)

    def run():
        out = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(_MAX_TIE)], env=env, capture_output=True, text=True, timeout=600
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.split()[-1]

    assert run() == "0x0"  # compiled and cached
    assert list((copy / "kernels" / "__pycache__").glob("_loops_axis.*.nbi"))
    inlined = copy / "kernels" / "_loops_reduce.py"
    source = inlined.read_text()
    rule = "return lambda p, q, half: (half == 1) & (p == q)"
    assert rule in source
    inlined.write_text(source.replace(rule, "return lambda p, q, half: False"))  # float16 ties now give -0
    assert run() == "0x8000"


def test_processes_compiling_at_once_never_share_a_data_file(tmp_path, monkeypatch):
    """Two processes that read the same index and each save a new signature (xdist's workers on a
    fresh install): numba numbered both data files ``.1.nbc``, so the surviving index could map one
    signature to the other's code. Ours are named by the key: two files, each loading its own data."""
    from numba.core import caching

    from gather_scatter.kernels._loops_cache import STAMP

    writers = [caching.IndexDataCacheFile(str(tmp_path), "_loops.gather-81.py311", STAMP) for _ in range(2)]
    keys = [("float32 signature", "magic"), ("uint64 signature", "magic")]
    monkeypatch.setattr(caching.IndexDataCacheFile, "_load_index", lambda self: {})  # both read it before either wrote
    for writer, key in zip(writers, keys, strict=True):
        writer.save(key, {"code for": key})
    monkeypatch.undo()
    files = sorted(path.name for path in tmp_path.glob("*.nbc"))
    assert len(files) == 2, files
    reader = caching.IndexDataCacheFile(str(tmp_path), "_loops.gather-81.py311", STAMP)
    for key in keys:  # the index kept one of them (the last writer's); what it names is that key's code
        assert reader.load(key) in (None, {"code for": key})
    assert reader.load(keys[1]) == {"code for": keys[1]}
    (tmp_path / "elsewhere").mkdir()
    other = caching.IndexDataCacheFile(str(tmp_path / "elsewhere"), "f-1.py311", "another stamp")
    other.save(keys[0], "numba's own")  # a function not ours: numba's numbering, unchanged
    assert [path.name for path in (tmp_path / "elsewhere").glob("*.nbc")] == ["f-1.py311.1.nbc"]
