"""numba's cache of this package's compiled loops, stamped with all of their sources.

numba keys a cached function on its own file alone (0.68: the file's contents; before: its
time and size). Our loops inline functions of other modules (``_loops_axis``' walks inline
``_loops_reduce``'s steps and ``_loops_half``'s conversions), so an edit of ``_loops_half.py``
alone, or an upgrade of this package that changed only that file (pip
leaves numba's files in ``__pycache__`` behind), would load the walks' old machine code: a
silently wrong answer. Here every loop's cache stamp is one hash of all the compiled modules'
sources (``_loops*.py`` and ``_codes.py``, all they import of this package), so a change to any
of them compiles every loop again, and nothing else changes: the same cache directories
(``NUMBA_CACHE_DIR``, else ``__pycache__`` beside the source, else the user's cache), the
same index files.

Each compiled module imports this one before its first ``@numba.njit(cache=True)``: numba
picks a function's cache locator when the function is decorated. The locators added here
answer only for files of this directory; any other function numba caches as it would.

Processes compiling at once (pytest-xdist's workers, a pool of servers on a fresh install)
must not mix up each other's entries either. numba numbers a function's data files in the
order it compiles signatures: two processes that read the same index and each compile a new
signature both write ``.1.nbc``, and the index that survives maps one signature to the other's
machine code (a float32 GatherElements loaded the uint64 one's: "can't unbox array"). For our
loops the data file is named by a hash of its key instead, so a name only ever holds one
signature's code; a lost index entry (the last writer wins) costs a compile, never a wrong load.
"""

import hashlib
import pathlib
import pickle

from numba.core import caching

__all__ = ["STAMP"]

_HERE = pathlib.Path(__file__).resolve().parent
_SOURCES = sorted([*_HERE.glob("_loops*.py"), _HERE / "_codes.py"])
#: The stamp of every cached loop: the hash of the compiled modules' sources, in name order.
STAMP = hashlib.sha256(b"".join(path.name.encode() + b"\0" + path.read_bytes() for path in _SOURCES)).hexdigest()


def _ours(py_file: str) -> bool:
    try:
        return pathlib.Path(py_file).resolve().parent == _HERE
    except (OSError, ValueError):
        return False


def _stamped(base: type) -> type:
    """``base`` (one of numba's source-file locators) for this directory's files, stamped with :data:`STAMP`."""

    class Stamped(base):
        _gather_scatter = True

        @classmethod
        def from_function(cls, py_func, py_file):
            return super().from_function(py_func, py_file) if _ours(py_file) else None

        def get_source_stamp(self) -> str:
            return STAMP

    Stamped.__name__ = Stamped.__qualname__ = f"GatherScatter{base.__name__.lstrip('_')}"
    return Stamped


def _save(self, key, data, _numba_save=caching.IndexDataCacheFile.save) -> None:
    """numba's ``IndexDataCacheFile.save``, our loops' data files named by their key's hash (see above)."""
    if self._source_stamp != STAMP:  # not one of our loops
        return _numba_save(self, key, data)
    data_name = self._data_name(int(hashlib.sha256(pickle.dumps(key)).hexdigest()[:15], 16))
    self._save_data(data_name, data)  # the data first: the index never names a file not yet whole
    overloads = self._load_index()
    if overloads.get(key) != data_name:
        overloads[key] = data_name
        self._save_index(overloads)
    return None


_save._gather_scatter = True  # type: ignore[attr-defined]


def _install() -> None:
    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")  # noqa: B009 - older numba's name
    mixin = caching._SourceFileBackedLocatorMixin
    classes = impl._locator_classes
    if any(getattr(cls, "_gather_scatter", False) for cls in classes):
        return
    classes[:0] = [_stamped(cls) for cls in classes if issubclass(cls, mixin)]
    if not getattr(caching.IndexDataCacheFile.save, "_gather_scatter", False):
        caching.IndexDataCacheFile.save = _save  # type: ignore[method-assign]


_install()
