"""dask ``out=`` an array of an icechunk session (issue 26 item 13): in-place writes that are all
or nothing. A committed run equals the in-memory result on the threaded scheduler and on a
``dask.distributed`` LocalCluster (threads and processes: the writes go through forks of the
session, merged back); a process killed before ``commit`` leaves the repository at its last
commit, where the same kill leaves a plain zarr table half updated; a read-only session's array
is refused before any task."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask not installed (pip install 'gather_scatter[dask]')")
zarr = pytest.importorskip("zarr", reason="zarr not installed (pip install 'gather_scatter[dask]')")
icechunk = pytest.importorskip("icechunk", reason="icechunk not installed (pip install 'gather_scatter[icechunk]')")

from backends import same_bits  # noqa: E402

from gather_scatter import InvalidAttributeError, gather, scatter_elements, scatter_nd  # noqa: E402

ROWS, COLS, CHUNK = 64, 16, 8  # a chunk of 1 KiB: icechunk keeps chunks under 512 bytes in the manifest


def _table() -> np.ndarray:
    return np.random.default_rng(26).standard_normal((ROWS, COLS))


def _repo(path: pathlib.Path, table: np.ndarray):
    """A repository whose branch main holds ``table`` as the array "table" (chunks of 8 rows), committed."""
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(path)))
    session = repo.writable_session("main")
    z = zarr.create_array(session.store, name="table", shape=table.shape, chunks=(CHUNK, COLS), dtype=table.dtype)
    z[...] = table
    session.commit("the table")
    return repo


def _committed(repo) -> np.ndarray:
    return zarr.open_array(repo.readonly_session("main").store, path="table", mode="r")[...]


def _cases(table: np.ndarray):
    """(name, the in-memory result, the same call with out=): a scatter-add with duplicates in place,
    an assignment in place, an assignment from a NumPy table into a second array, a gather from
    the table into the second array."""
    rng = np.random.default_rng(3)
    targets = np.concatenate([rng.integers(0, 40, 300), [5, 5, 5]])  # rows 40.. untouched, duplicates
    updates = rng.standard_normal((targets.size, COLS))
    element_indices = rng.permutation(ROWS)[:20].reshape(20, 1).repeat(COLS, axis=1)
    element_updates = rng.standard_normal((20, COLS))
    yield ("scatter_nd add, in place", scatter_nd(table, targets[:, None], updates, reduction="add"),
           lambda z, other: scatter_nd(da.from_zarr(z), targets[:, None], updates, reduction="add", out=z))
    yield ("scatter_elements assignment, in place", scatter_elements(table, element_indices, element_updates),
           lambda z, other: scatter_elements(da.from_zarr(z, chunks=(5, 3)), element_indices, element_updates, out=z))
    yield ("scatter_nd assignment into another array", scatter_nd(table, targets[-20:, None], updates[-20:]),
           lambda z, other: scatter_nd(da.from_array(table, chunks=(10, 6)), targets[-20:, None], updates[-20:],
                                       out=other))
    order = rng.permutation(ROWS)  # the table read from the session (on a cluster: from its fork) into another array
    yield ("gather from the table into another array", gather(table, order),
           lambda z, other: gather(da.from_zarr(z), order, out=other))


def _run_and_commit(repo, call) -> None:
    session = repo.writable_session("main")
    z = zarr.open_array(session.store, path="table", mode="r+")
    other = zarr.open_array(session.store, path="other", mode="r+")
    assert call(z, other) in (z, other)
    session.commit("a scatter")


def _check_every_case(tmp_path: pathlib.Path) -> None:
    table = _table()
    for i, (name, expected, call) in enumerate(_cases(table)):
        repo = _repo(tmp_path / f"repo-{i}", table)
        session = repo.writable_session("main")
        zarr.create_array(session.store, name="other", shape=table.shape, chunks=(16, 3), dtype=table.dtype)
        session.commit("an empty array")
        before = repo.lookup_branch("main")
        _run_and_commit(repo, call)
        assert repo.lookup_branch("main") != before
        store = repo.readonly_session("main").store
        written = zarr.open_array(store, path="other" if "another" in name else "table", mode="r")[...]
        assert same_bits(expected, written), f"{name}: {int((written != expected).any(1).sum())} rows differ"
        if "another" in name:  # the table itself is unchanged
            assert same_bits(table, _committed(repo))


def test_threaded_scheduler_commits_the_in_memory_result(tmp_path: pathlib.Path):
    _check_every_case(tmp_path)


@pytest.mark.parametrize("processes", [False, True])
def test_local_cluster_commits_the_in_memory_result(tmp_path: pathlib.Path, processes: bool):
    """On a LocalCluster the writable session cannot be pickled (it failed with "Could not
    serialize object of type _HLGExprSequence"): the writes go through forks, merged back."""
    distributed = pytest.importorskip("distributed", reason="distributed not installed (pip install 'gather_scatter[dask]')")
    where = {"host": "127.0.0.1"} if processes else {}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=processes, dashboard_address=None,
                                  **where) as cluster, distributed.Client(cluster):
        _check_every_case(tmp_path)
        # A session with uncommitted changes cannot be forked: refused before any task, nothing changed
        table = _table()
        repo = _repo(tmp_path / "dirty", table)
        session = repo.writable_session("main")
        z = zarr.open_array(session.store, path="table", mode="r+")
        z[0] = 0.0
        with pytest.raises(InvalidAttributeError, match=r"ScatterND-18: out is an array of an icechunk session with "
                                                        r"uncommitted changes.*commit them"):
            scatter_nd(da.from_zarr(z), np.array([[1]]), np.ones((1, COLS)), out=z)
        assert same_bits(table[1:], z[1:])


def test_read_only_session_is_refused_before_any_task(tmp_path: pathlib.Path):
    """issue 26 item 11 for icechunk: an array of a read-only session, or of a session already committed."""
    table = _table()
    repo = _repo(tmp_path / "repo", table)
    read_only = zarr.open_array(repo.readonly_session("main").store, path="table", mode="r")
    session = repo.writable_session("main")
    committed = zarr.open_array(session.store, path="table", mode="r+")
    zarr.create_array(session.store, name="other", shape=(1,), dtype="int8")
    session.commit("another array")
    for out in (read_only, committed):
        with pytest.raises(InvalidAttributeError, match=r"ScatterND-18: out is read-only \(an array of a read-only "
                                                        r"icechunk session, or of one already committed"):
            scatter_nd(da.from_array(table, chunks=CHUNK), np.array([[1]]), np.ones((1, COLS)), out=out)
    assert same_bits(table, _committed(repo))


# The killed run: a scatter-add into the table whose updates for the last chunk never arrive
# (that task touches a file, then sleeps), so the other chunks are written while it waits; the
# test kills the process once the writes reached the disk.
_KILLED = textwrap.dedent("""
    import pathlib, sys, time
    import dask, dask.array as da, numpy as np, zarr
    import gather_scatter as gs

    kind, path, ready = sys.argv[1:]
    if kind == "icechunk":
        import icechunk
        repo = icechunk.Repository.open(icechunk.local_filesystem_storage(path))
        session = repo.writable_session("main")
        z = zarr.open_array(session.store, path="table", mode="r+")
    else:
        z = zarr.open_array(path, mode="r+")
    rows, chunk = z.shape[0], z.chunks[0]

    def stall(block, block_info=None):
        if block_info[0]["chunk-location"][0] == rows // chunk - 1:
            pathlib.Path(ready).touch()
            time.sleep(600)
        return block

    indices = np.repeat(np.arange(rows), 2)[:, None]  # each row twice, in order: chunk g of updates is chunk g of z
    updates = da.ones((2 * rows, z.shape[1]), chunks=(2 * chunk, -1)).map_blocks(stall, meta=np.empty((0, 0)))
    with dask.config.set(num_workers=4):
        gs.scatter_nd(da.from_zarr(z), indices, updates, reduction="add", out=z)
    if kind == "icechunk":
        session.commit("never reached")
""")


def _kill_part_way(tmp_path: pathlib.Path, kind: str, path: pathlib.Path, written) -> None:
    """Run _KILLED on ``path``, wait for its stall and for ``written()`` (writes on disk), SIGKILL it."""
    ready = tmp_path / f"{kind}.ready"
    process = subprocess.Popen([sys.executable, "-c", _KILLED, kind, str(path), str(ready)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not (ready.exists() and written()):
            assert process.poll() is None, process.communicate()[0].decode()[-3000:]
            assert time.monotonic() < deadline, "the run never stalled with writes on disk"
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)
    assert process.returncode == -signal.SIGKILL


def test_a_killed_run_leaves_the_last_commit(tmp_path: pathlib.Path):
    """A process killed part way through an in-place scatter-add: into an icechunk session, the
    branch is at its last commit and the table byte-equal to it (the chunks it wrote are in the
    storage but in no snapshot); into plain zarr, the same kill leaves the table half updated."""
    table = _table()
    repo = _repo(tmp_path / "repo", table)
    before = repo.lookup_branch("main")
    objects = set((tmp_path / "repo").rglob("*"))
    _kill_part_way(tmp_path, "icechunk", tmp_path / "repo",
                   lambda: any(p.parent.name == "chunks" for p in set((tmp_path / "repo").rglob("*")) - objects))
    repo = icechunk.Repository.open(icechunk.local_filesystem_storage(str(tmp_path / "repo")))
    assert repo.lookup_branch("main") == before
    assert [s.message for s in repo.ancestry(branch="main")] == ["the table", "Repository initialized"]
    assert _committed(repo).tobytes() == table.tobytes()
    # the run is repeatable: committed, it adds each update once
    indices, updates = np.repeat(np.arange(ROWS), 2)[:, None], np.ones((2 * ROWS, COLS))
    expected = scatter_nd(table, indices, updates, reduction="add")
    session = repo.writable_session("main")
    z = zarr.open_array(session.store, path="table", mode="r+")
    scatter_nd(da.from_zarr(z), indices, updates, reduction="add", out=z)
    session.commit("the scatter")
    assert same_bits(expected, _committed(repo))

    # plain zarr: the chunks written before the kill stay written
    plain = zarr.create_array(str(tmp_path / "plain.zarr"), shape=table.shape, chunks=(CHUNK, COLS), dtype=table.dtype)
    plain[...] = table

    def first_chunk_written() -> bool:
        try:
            return not np.array_equal(zarr.open_array(str(tmp_path / "plain.zarr"), mode="r")[:CHUNK], table[:CHUNK])
        except Exception:  # noqa: BLE001 - a chunk file caught part written
            return False

    _kill_part_way(tmp_path, "zarr", tmp_path / "plain.zarr", first_chunk_written)
    left = zarr.open_array(str(tmp_path / "plain.zarr"), mode="r")[...]
    changed = [bool((left[i : i + CHUNK] != table[i : i + CHUNK]).any()) for i in range(0, ROWS, CHUNK)]
    assert changed[0] and not changed[-1], changed  # half updated: no record of which
    assert np.array_equal(left[:CHUNK], expected[:CHUNK])
