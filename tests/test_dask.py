"""dask arrays: the random cases of every version (but TensorScatter) with data split into
irregular chunks (chunks of one, empty dims), NumPy and dask indices, bit for bit against the
in-memory kernels; the same errors (at the call for NumPy indices, at compute for dask ones);
laziness, blocks read once and only where touched, graph size with 1M indices, zarr ``out=``
writing only the chunks that change, and a ``dask.distributed`` LocalCluster."""

from __future__ import annotations

import os
import pathlib
import threading

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="dask not installed (pip install 'gather_scatter[dask]')")

from backends import same_bits  # noqa: E402
from error_check import raised, same_error  # noqa: E402

from gather_scatter import (  # noqa: E402
    DTypeError,
    IndexOutOfBoundsError,
    InvalidAttributeError,
    ShapeError,
    gather,
    gather_elements,
    gather_nd,
    run_node,
    scatter_elements,
    scatter_nd,
    tensor_scatter,
)
from gather_scatter.check.cases import invalid_cases, valid_cases  # noqa: E402
from gather_scatter.rules.versions import SWEPT

SPECS = sorted((s for s in SWEPT.values() if s.op_type != "TensorScatter"),
               key=lambda s: (s.domain, s.op_type, s.since_version))


def irregular_chunks(shape, rng):
    """Random chunk sizes per axis, chunks of one included; an empty dim is one empty chunk."""
    chunks = []
    for n in shape:
        sizes, left = [], n
        while left > 0:
            size = int(rng.choice([1, rng.integers(1, left + 1)]))
            sizes.append(size)
            left -= size
        chunks.append(tuple(sizes) or (0,))
    return tuple(chunks)


def same(expected, actual):
    """Bitwise for numbers; strings (object arrays of str) by value and type."""
    if expected.dtype == object:
        return (actual.dtype == object and expected.shape == actual.shape
                and all(type(a) is str and a == e for a, e in zip(actual.reshape(-1), expected.reshape(-1))))
    return same_bits(expected, actual)


def _run(spec, inputs, attrs):
    return run_node(spec.op_type, inputs, attrs, opset=spec.since_version, domain=spec.domain)


def _dask_inputs(inputs, rng, dask_indices, dask_updates=False):
    """Data as a dask array of irregular chunks; indices (input 1) and updates (input 2) too if asked."""
    data = inputs[0]
    converted = [da.from_array(data, chunks=irregular_chunks(data.shape, rng))]
    for i, value in enumerate(inputs[1:], start=1):
        if isinstance(value, np.ndarray) and (dask_indices if i == 1 else dask_indices or dask_updates):
            value = da.from_array(value, chunks=irregular_chunks(value.shape, rng))
        converted.append(value)
    return converted


@pytest.mark.parametrize("dask_indices, dask_updates", [(False, False), (True, True), (False, True)],
                         ids=["numpy-indices", "dask-indices", "dask-updates-only"])
def test_valid_cases_are_bitwise_the_in_memory_results(dask_indices, dask_updates):
    compared, failures = 0, []
    for n, spec in enumerate(SPECS):
        if dask_updates and not dask_indices and not spec.op_type.startswith("Scatter"):
            continue
        rng = np.random.default_rng(3000 + n)
        for case in valid_cases(spec, rng, per_combination=2 if dask_updates else 3):
            expected = _run(spec, case.inputs, case.attrs)
            result = _run(spec, _dask_inputs(case.inputs, rng, dask_indices, dask_updates), case.attrs)
            assert isinstance(result, da.Array), type(result)
            compared += 1
            if not same(expected, np.asarray(result.compute(scheduler="sync"))):
                failures.append(f"{spec.name}: {case.describe()}")
    assert not failures, f"{len(failures)} of {compared} differ, e.g. {failures[:3]}"
    assert compared > (600 if dask_updates and not dask_indices else 1000), compared


def test_invalid_cases_raise_the_in_memory_error():
    """NumPy indices: at the call, the same class and message; dask indices: the same class
    and message at compute (shape and type errors still at the call)."""
    compared, failures = 0, []
    for n, spec in enumerate(SPECS):
        rng = np.random.default_rng(4000 + n)
        for type_name in [t for t in ("float", "int64", "bool", "string") if t in spec.data_types]:
            for index_dtype in sorted(spec.index_types):
                for kind, case, cls in invalid_cases(spec, rng, type_name, index_dtype):
                    if not isinstance(case.inputs[0], np.ndarray) or case.inputs[0].ndim == 0:
                        continue
                    expected = raised(lambda: _run(spec, case.inputs, case.attrs))
                    for dask_indices in (False, True):
                        inputs = _dask_inputs(case.inputs, rng, dask_indices)
                        actual = raised(lambda: _run(spec, inputs, case.attrs).compute(scheduler="sync"))
                        compared += 1
                        if not same_error(expected, actual):
                            failures.append(f"{spec.name} {kind} dask_indices={dask_indices}: {expected!r} vs {actual!r}")
    assert not failures, f"{len(failures)} of {compared} differ: {failures[:4]}"
    assert compared > 100, compared


def test_numpy_index_out_of_bounds_raises_before_any_task():
    data = da.from_array(np.arange(20.0).reshape(10, 2), chunks=(3, 1))
    with pytest.raises(IndexOutOfBoundsError, match=r"Gather-13: indices\[2\] = 10 is out of bounds for data axis 0"):
        gather(data, np.array([0, 9, 10]))
    with pytest.raises(IndexOutOfBoundsError, match=r"ScatterND-18: indices\[1, 1\] = -3 is out of bounds"):
        scatter_nd(data, np.array([[0, 0], [1, -3]]), np.ones(2))


def test_other_libraries_and_tensor_scatter_are_refused():
    data = da.zeros((2, 3, 4, 2), chunks=1)
    with pytest.raises(DTypeError, match="TensorScatter-24: past_cache is a dask.array.Array"):
        tensor_scatter(data, np.zeros((2, 3, 1, 2)))
    with pytest.raises(DTypeError, match="Gather-13: indices is a dask.Array but data is a numpy.ndarray"):
        gather(np.zeros(3), da.from_array(np.array([1])))


def test_unknown_chunk_sizes_are_refused():
    values = da.from_array(np.arange(10.0), chunks=3)
    masked = values[values > 4]  # chunk sizes unknown until computed
    with pytest.raises(ShapeError, match=r"Gather-13: data has unknown chunk sizes \(shape \(nan,\)\); call "
                                         r"data.compute_chunk_sizes\(\) first"):
        gather(masked, np.array([0]))
    with pytest.raises(ShapeError, match="ScatterND-18: indices has unknown chunk sizes"):
        indices = da.from_array(np.array([[1], [2], [3]]), chunks=1)
        scatter_nd(values, indices[indices[:, 0] > 1], np.ones(2))


class _Counting:
    """An array-like that counts the blocks dask reads from it."""

    def __init__(self, array):
        self.array, self.shape, self.dtype, self.ndim = array, array.shape, array.dtype, array.ndim
        self.reads: list = []
        self.lock = threading.Lock()

    def __getitem__(self, key):
        with self.lock:
            self.reads.append(tuple((k.start, k.stop) for k in key))
        return self.array[key]


def test_lazy_and_each_touched_block_read_once():
    table = np.arange(40 * 6, dtype=np.float32).reshape(40, 6)
    source = _Counting(table)
    data = da.from_array(source, chunks=(10, 3), asarray=True, fancy=False)
    source.reads.clear()  # dask's own look at an empty slice, for the array's meta
    indices = np.array([35, 1, 36, 2, 39, 0, 1])  # blocks 0 and 3 along axis 0: 1 and 2 never read
    result = gather(data, indices)
    assert source.reads == []  # nothing computed until compute()
    assert np.array_equal(result.compute(scheduler="sync"), table[indices])
    assert sorted(source.reads) == sorted([((0, 10), (0, 3)), ((0, 10), (3, 6)), ((30, 40), (0, 3)),
                                           ((30, 40), (3, 6))])
    source.reads.clear()
    updated = scatter_nd(data, np.array([[2], [2], [31]]), np.ones((3, 6), np.float32), reduction="add")
    assert source.reads == []
    expected = table.copy()
    np.add.at(expected, [2, 2, 31], 1)
    assert np.array_equal(updated.compute(scheduler="sync"), expected)
    assert len(source.reads) == len(set(source.reads)) == 8  # every block once (untouched ones are copied out)


def test_graph_grows_with_blocks_not_indices():
    rng = np.random.default_rng(0)
    data = da.zeros((100_000, 8), chunks=(10_000, 8), dtype=np.float32)
    indices = rng.integers(0, 100_000, 1_000_000)
    result = gather(data, indices)
    layer = result.dask.layers[result.name]
    # one task per touched block (10) and per output block of array.chunk-size bytes (32 MB: one)
    assert len(layer) == 10 + 1, len(layer)
    updated = scatter_nd(data, indices[:, None], np.ones((1_000_000, 8), np.float32), reduction="add")
    assert len(updated.dask.layers[updated.name]) == 10 + 1  # a task per block, and the updates once
    sparse = scatter_nd(data, np.array([[5], [7]]), np.ones((2, 8), np.float32))
    assert len(sparse.dask.layers[sparse.name]) == 10 + 1  # 1 touched block, 9 of data's own


@pytest.mark.parametrize("chunk_size", [None, "4MiB"], ids=["default", "4MiB"])
def test_graph_size_follows_bytes_not_block_length(chunk_size):
    """1M indices into a (1000, 4) table of 100-row blocks: about a task per touched block and
    one per array.chunk-size bytes of output (not one per 100 output rows), bitwise right."""
    import dask
    from dask.utils import parse_bytes

    table = np.arange(4000.0).reshape(1000, 4)
    data = da.from_array(table, chunks=(100, 4))
    rng = np.random.default_rng(18)
    indices = rng.integers(0, 1000, 1_000_000)
    element_indices = rng.integers(0, 1000, (250_000, 4))
    with dask.config.set({"array.chunk-size": chunk_size or dask.config.get("array.chunk-size")}):
        limit = parse_bytes(dask.config.get("array.chunk-size"))
        cases = [(gather(data, indices), table[indices]),
                 (gather_nd(data, indices[:, None]), table[indices]),
                 (gather_elements(data, element_indices), np.take_along_axis(table, element_indices, axis=0))]
    for result, expected in cases:
        bound = len(data.__dask_graph__()) + 10 + -(-expected.nbytes // limit)  # reads, touched, output
        assert len(result.__dask_graph__()) <= bound, (len(result.__dask_graph__()), bound)
        assert len(result.chunks[0]) == -(-expected.nbytes // limit)
        assert same_bits(expected, result.compute())


def test_zarr_out_writes_only_the_changed_chunks(tmp_path: pathlib.Path):
    zarr = pytest.importorskip("zarr", reason="zarr not installed (pip install 'gather_scatter[dask]')")
    table = np.arange(60 * 4, dtype=np.float32).reshape(60, 4)
    z = zarr.open_array(str(tmp_path / "table.zarr"), mode="w", shape=table.shape, chunks=(10, 4), dtype="float32")
    z[...] = table
    files = {p: p.stat().st_mtime_ns for p in (tmp_path / "table.zarr").rglob("*") if p.is_file()}
    chunk_files = [p for p in files if p.parent.name == "c" or p.parent.parent.name == "c"]
    assert len(chunk_files) == 6
    for p in chunk_files:  # an old time, so a rewrite shows whatever the clock's resolution
        os.utime(p, ns=(0, 0))
    files = {p: p.stat().st_mtime_ns for p in chunk_files}
    data = da.from_zarr(z)
    indices = np.array([[12], [15], [12], [55]])
    updates = np.full((4, 4), 2.0, np.float32)
    assert scatter_nd(data, indices, updates, reduction="mul", out=z) is z
    expected = table.copy()
    np.multiply.at(expected, [12, 15, 12, 55], 2.0)
    assert np.array_equal(z[...], expected)
    changed = sorted(p.relative_to(tmp_path).as_posix() for p in chunk_files if p.stat().st_mtime_ns != files[p])
    assert changed == ["table.zarr/c/1/0", "table.zarr/c/5/0"], changed
    # another out: every chunk is written
    other = zarr.open_array(str(tmp_path / "other.zarr"), mode="w", shape=table.shape, chunks=(10, 4), dtype="float32")
    scatter_elements(data, np.array([[0, 1, 2, 3]]), np.zeros((1, 4), np.float32), axis=0, out=other)
    expected[[0, 1, 2, 3], [0, 1, 2, 3]] = 0  # element (0, j) goes to row indices[0, j] = j
    assert np.array_equal(other[...], expected)
    # a gather into zarr
    rows = zarr.open_array(str(tmp_path / "rows.zarr"), mode="w", shape=(3, 4), chunks=(2, 4), dtype="float32")
    gather(da.from_zarr(z), np.array([55, 12, 0]), out=rows)
    assert np.array_equal(rows[...], expected[[55, 12, 0]])


def test_out_that_an_input_is_read_from(tmp_path: pathlib.Path):
    """A scatter may write in place into the array data was read from (each block is written
    after its own block was read); any other overlap with out is refused before any task."""
    zarr = pytest.importorskip("zarr", reason="zarr not installed (pip install 'gather_scatter[dask]')")
    table = np.arange(12 * 3, dtype=np.float64).reshape(12, 3)
    z = zarr.open_array(str(tmp_path / "t.zarr"), mode="w", shape=table.shape, chunks=(5, 3), dtype="float64")
    z[...] = table
    data = da.from_zarr(z)
    with pytest.raises(InvalidAttributeError, match=r"Gather-13: out is an array that data is read from"):
        gather(data, np.arange(12)[::-1], out=z)
    with pytest.raises(InvalidAttributeError, match=r"ScatterND-18: out is an array that data is read from"):
        scatter_nd(data.rechunk((4, 3)) * 2, np.array([[1]]), np.ones((1, 3)), out=z)
    assert np.array_equal(z[...], table)  # nothing written
    # in place with dask indices: every block rewritten from itself
    indices = da.from_array(np.array([[11], [0], [11]]), chunks=2)
    scatter_nd(data, indices, np.ones((3, 3)), reduction="add", out=z)
    expected = table.copy()
    np.add.at(expected, [11, 0, 11], 1.0)
    assert np.array_equal(z[...], expected)



def _read_only_targets(tmp_path: pathlib.Path, table: np.ndarray):
    """Each kind of array that takes ``out[region] = block`` but cannot be written: (name, out, message)."""
    frozen = table.copy()
    frozen.flags.writeable = False
    np.save(tmp_path / "table.npy", table)
    yield "numpy", frozen, r"out is read-only \(a NumPy array whose writeable flag is off"
    yield "memmap", np.load(tmp_path / "table.npy", mmap_mode="r"), r"out is read-only \(a NumPy memmap opened with mode='r'"
    yield ("broadcast", np.broadcast_to(table[:1], table.shape),  # the NumPy path's message: the view is read-only too
           r"out is a broadcast view")
    zarr = pytest.importorskip("zarr", reason="zarr not installed (pip install 'gather_scatter[dask]')")
    z = zarr.open_array(str(tmp_path / "t.zarr"), mode="w", shape=table.shape, chunks=(5, 3), dtype=table.dtype)
    z[...] = table
    yield "zarr", zarr.open_array(str(tmp_path / "t.zarr"), mode="r"), r"out is read-only \(a zarr array opened read-only"
    h5py = pytest.importorskip("h5py", reason="h5py not installed (the [test] extra installs it)")
    with h5py.File(tmp_path / "t.h5", "w") as f:
        f.create_dataset("t", data=table, chunks=(5, 3))
    f = h5py.File(tmp_path / "t.h5", "r")
    yield "hdf5", f["t"], r"out is read-only \(an HDF5 dataset of a file opened with mode='r'"
    f.close()


def test_read_only_out_is_refused_before_any_task(tmp_path: pathlib.Path):
    """issue 26 item 11: a read-only out (a NumPy array, a memmap, a zarr array opened with
    mode="r", an HDF5 dataset of a read-only file) is the NumPy path's typed "out is read-only"
    error at the call: no task runs (data is never read), out is unchanged. (It was the store's
    raw ValueError, raised by the tasks.)"""
    table = np.arange(12 * 3, dtype=np.float64).reshape(12, 3)
    reads = []

    def counted(block):
        reads.append(block.shape)
        return block

    data = da.from_array(table, chunks=(5, 3)).map_blocks(counted, meta=np.empty((0, 0), table.dtype))
    calls = {
        "scatter_nd": lambda out: scatter_nd(data, np.array([[1], [1]]), np.ones((2, 3)), reduction="add", out=out),
        "scatter_elements": lambda out: scatter_elements(data, np.zeros((1, 3), np.int64), np.ones((1, 3)), out=out),
        "gather": lambda out: gather(data, np.arange(12), out=out),
        "scatter_nd-dask-indices": lambda out: scatter_nd(data, da.from_array(np.array([[1]]), chunks=1),
                                                          np.ones((1, 3)), out=out),
    }
    kinds = []
    for kind, out, message in _read_only_targets(tmp_path, table):
        kinds.append(kind)
        for name, call in calls.items():
            with pytest.raises(InvalidAttributeError, match=message) as info:
                call(out)
            assert info.value.input == "out", (kind, name)
            assert info.value.op in {"ScatterND", "ScatterElements", "Gather"}
            assert not reads, f"{kind}, {name}: a task ran before the refusal"
            assert np.array_equal(np.asarray(out[...]), np.broadcast_to(table[:1], table.shape) if kind == "broadcast"
                                  else table), (kind, name)
    assert {"numpy", "memmap", "broadcast", "zarr"} <= set(kinds)
    writable = np.zeros_like(table)  # the same calls into a writable array run
    scatter_nd(data, np.array([[1], [1]]), np.ones((2, 3)), reduction="add", out=writable)
    expected = table.copy()
    expected[1] += 2
    assert np.array_equal(writable, expected)


try:
    from zarr.storage import LocalStore as _LocalStore
except ImportError:  # the zarr tests skip
    _LocalStore = object

_EVENTS: dict = {}  # store root -> [(op, chunk key)], appended under _EVENTS_LOCK
_EVENTS_LOCK = threading.Lock()


class _LoggingStore(_LocalStore):
    """A zarr LocalStore that records, per chunk key, each read once it is done and each write
    as it starts (in a module dict: the distributed scheduler pickles the store)."""

    async def get(self, key, prototype=None, byte_range=None):
        value = await super().get(key, prototype, byte_range)
        self._record("read", key)
        return value

    async def set(self, key, value):
        self._record("write", key)
        await super().set(key, value)

    def _record(self, op, key):
        if key.startswith("c/"):
            with _EVENTS_LOCK:
                _EVENTS.setdefault(str(self.root), []).append((op, key))


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed", reason="distributed not installed (pip install 'gather_scatter[dask]')")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=False, dashboard_address=":0") as local:
        yield local


@pytest.fixture(params=["threads", "distributed"])
def scheduler(request):
    """The threaded scheduler (dask's default), then a distributed Client as the default."""
    if request.param == "threads":
        yield
        return
    distributed = pytest.importorskip("distributed")
    with distributed.Client(request.getfixturevalue("cluster")):
        yield


@pytest.mark.parametrize("unit", ["chunks", "shards", "both-axes"])
def test_out_zarr_of_other_chunks_gets_every_write(tmp_path: pathlib.Path, scheduler, unit):
    """Results whose blocks cut through out's chunks (or shards) on the first axis (and the
    second): every row lands, bitwise the in-memory result, run after run."""
    import dask
    zarr = pytest.importorskip("zarr", reason="zarr not installed (pip install 'gather_scatter[dask]')")
    chunks, shards = {"chunks": ((1000, 8), None), "shards": ((250, 4), (1000, 8)), "both-axes": ((700, 3), None)}[unit]
    table = np.random.default_rng(5).standard_normal((6000, 8)).astype(np.float32)
    data = da.from_array(table, chunks=(300, 8))
    for run in range(3):
        rng = np.random.default_rng(run)
        indices = rng.integers(0, 6000, 4000)
        element_indices = rng.integers(0, 6000, (4000, 8))
        updates = rng.standard_normal((4000, 8)).astype(np.float32)
        cases = {  # name: (NumPy result, the call with out=)
            "gather": (gather(table, indices), lambda o: gather(data, indices, out=o)),
            "gather_nd": (gather_nd(table, indices[:, None]), lambda o: gather_nd(data, indices[:, None], out=o)),
            "gather_elements": (gather_elements(table, element_indices),
                                lambda o: gather_elements(data, element_indices, out=o)),
            "scatter_nd": (scatter_nd(table, indices[:, None], updates, reduction="add"),
                           lambda o: scatter_nd(data, indices[:, None], updates, reduction="add", out=o)),
            "scatter_elements": (scatter_elements(table[:4000], element_indices % 4000, updates),
                                 lambda o: scatter_elements(data[:4000], element_indices % 4000, updates, out=o)),
        }
        for name, (expected, call) in cases.items():
            out = zarr.create_array(str(tmp_path / f"{name}-{run}.zarr"), shape=expected.shape, chunks=chunks,
                                    shards=shards, dtype="float32")
            with dask.config.set({"array.chunk-size": "10KiB"}):  # gathers: blocks of 320 rows
                assert call(out) is out
            assert same_bits(expected, out[...]), f"{name}, run {run}: {int((out[...] != expected).any(1).sum())} rows differ"


@pytest.mark.parametrize("unit", ["chunks", "both-axes"])
def test_in_place_scatter_into_zarr_of_other_chunks(tmp_path: pathlib.Path, scheduler, unit):
    """data read in blocks of 300 rows from a zarr array of 1000-row chunks (or 700 x 3), and
    the scatter written back into it: every update lands, run after run; each chunk that holds
    an update is written once, by one task, after its last read (never read after it is
    rewritten); the others are not written."""
    zarr = pytest.importorskip("zarr", reason="zarr not installed (pip install 'gather_scatter[dask]')")
    chunks = {"chunks": (1000, 8), "both-axes": (700, 3)}[unit]
    for run in range(3):
        rng = np.random.default_rng(10 + run)
        table = rng.standard_normal((6000, 8)).astype(np.float32)
        targets = np.concatenate([rng.integers(0, 2500, 3000), rng.integers(4100, 4300, 500)])  # some chunks untouched
        updates = rng.standard_normal((3500, 8)).astype(np.float32)
        element_targets = np.stack([targets, rng.integers(0, 8, 3500)], axis=1)
        cases = {  # name: (NumPy result, the call with out=, the rows it changes)
            "scatter_nd": (scatter_nd(table, targets[:, None], updates, reduction="add"),
                           lambda d, z: scatter_nd(d, targets[:, None], updates, reduction="add", out=z),
                           targets[:, None]),
            "scatter_elements": (scatter_elements(table, targets.reshape(-1, 1), updates[:, :1], axis=0, reduction="max"),
                                 lambda d, z: scatter_elements(d, targets.reshape(-1, 1), updates[:, :1], axis=0,
                                                               reduction="max", out=z),
                                 np.stack([targets, np.zeros_like(targets)], axis=1)),
            "scatter_nd-dask-indices": (scatter_nd(table, element_targets, updates[:, 0]),
                                        lambda d, z: scatter_nd(d, da.from_array(element_targets, chunks=(900, 2)),
                                                                updates[:, 0], out=z),
                                        None),  # not known before compute: every chunk written
        }
        for name, (expected, call, changed) in cases.items():
            path = tmp_path / f"{name}-{run}.zarr"
            z = zarr.create_array(_LoggingStore(str(path)), shape=table.shape, chunks=chunks, dtype="float32")
            z[...] = table
            _EVENTS.pop(str(z.store.root), None)
            assert call(da.from_zarr(z, chunks=(300, 8)), z) is z
            events = list(_EVENTS[str(z.store.root)])
            assert same_bits(expected, z[...]), f"{name}, run {run}: {int((z[...] != expected).any(1).sum())} rows differ"
            writes = [key for op, key in events if op == "write"]
            assert len(writes) == len(set(writes)), f"{name}, run {run}: a chunk written twice"
            late = {key for i, (op, key) in enumerate(events) if op == "read" and ("write", key) in events[:i]}
            assert not late, f"{name}, run {run}: read after being rewritten: {sorted(late)}"
            grid = (-(-6000 // chunks[0]), -(-8 // chunks[1]))
            every = {f"c/{i}/{j}" for i, j in np.ndindex(*grid)}
            if changed is None:
                assert set(writes) == every
            else:  # the chunks that hold a target, along the axes the targets name
                held = {tuple(c) for c in changed // chunks[:changed.shape[1]]}
                assert set(writes) == {f"c/{i}/{j}" for i, j in np.ndindex(*grid) if (i, j)[:changed.shape[1]] in held}
                assert set(writes) < every


def test_local_cluster_computes_the_same_results(tmp_path: pathlib.Path):
    distributed = pytest.importorskip("distributed", reason="distributed not installed (pip install 'gather_scatter[dask]')")
    rng = np.random.default_rng(8)
    table = rng.standard_normal((50, 6))
    data = da.from_array(table, chunks=((7, 1, 20, 22), (4, 2)))
    indices = rng.integers(-50, 50, (200, 1))
    updates = rng.standard_normal((200, 6))
    element_indices = rng.integers(-6, 6, (50, 5))
    element_updates = rng.standard_normal((50, 5))
    cases = [
        (gather(table, indices[:, 0]), gather(data, indices[:, 0])),
        (gather_nd(table, indices), gather_nd(data, da.from_array(indices, chunks=(64, 1)))),
        (gather_elements(table, element_indices, axis=1), gather_elements(data, element_indices, axis=1)),
        (scatter_nd(table, indices, updates, reduction="add"), scatter_nd(data, indices, updates, reduction="add")),
        (scatter_elements(table, element_indices, element_updates, axis=1, reduction="max"),
         scatter_elements(data, element_indices, element_updates, axis=1, reduction="max")),
    ]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        results = client.compute([lazy for _, lazy in cases], sync=True)
        bad = gather(data, da.from_array(np.array([1, 70]), chunks=1))
        with pytest.raises(IndexOutOfBoundsError, match=r"Gather-13: indices\[1\] = 70 is out of bounds"):
            client.compute(bad, sync=True)
        # out= a plain zarr array, in place, on worker processes: written by the workers as before
        # (no fork: only an icechunk session's array goes through one)
        zarr = pytest.importorskip("zarr", reason="zarr not installed (pip install 'gather_scatter[dask]')")
        z = zarr.open_array(str(tmp_path / "t.zarr"), mode="w", shape=table.shape, chunks=(10, 6), dtype="float64")
        z[...] = table
        assert scatter_nd(da.from_zarr(z), indices, updates, reduction="add", out=z) is z
    for (expected, _), actual in zip(cases, results):
        assert same_bits(expected, np.asarray(actual))
    assert same_bits(cases[3][0], z[...])
