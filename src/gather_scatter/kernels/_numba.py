"""Compiled loops for the element-wise family (GatherElements, ScatterElements, Scatter) and
TensorScatter's row writes and ScatterND's reductions on rows.

Their work is one index per element, so NumPy's ``take_along_axis``/``ufunc.at`` spend
most of their time building index tuples. These loops, compiled by numba (imported on first
use, never by ``import gather_scatter``), read each index once, check it, and move one
element: the spec's loop, fused. They release the GIL (``nogil``), so ``_parallel`` runs one
call per chunk on its pool; numba's own threading is not used.

Layout every loop shares: ``data``/``dst`` are the C-contiguous buffers of the data and the
output, flattened; ``indices``/``src`` are C-contiguous with the index shape ``shape``
(``indices.shape`` may be smaller than data's off the axis); ``strides`` are data's C strides
in elements. A call handles the flat index positions ``[lo, hi)`` restricted to last-dim
columns ``[jlo, jhi)``. A bad index stops a loop and returns its flat position (else -1), so
the caller reports it with :func:`gather_scatter.rules.validate.check_bounds`. TensorScatter's
``write_rows`` takes whole cache rows instead (see its docstring).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import warnings
from collections.abc import Iterator
from typing import Any

_module: Any = None  # the _loops module once imported, False when it cannot be
_DISABLED = os.environ.get("GATHER_SCATTER_COMPILED", "1").strip() == "0"


def loops() -> Any:
    """The module of compiled loops (``_loops``), or None where numba is not installed (or
    ``GATHER_SCATTER_COMPILED=0``): the callers then use their NumPy path."""
    global _module
    if _module is None:
        module: Any = False
        if not _DISABLED:
            try:
                from . import _loops as module
            except ImportError:  # numba is not installed here
                pass
            except Exception as exc:  # noqa: BLE001 - e.g. no writable cache directory: run, slower
                warnings.warn(
                    f"gather_scatter: numba's loops failed to load ({type(exc).__name__}: {exc}); "
                    "the element-wise kernels run on NumPy instead",
                    RuntimeWarning,
                    stacklevel=2,
                )
        _module = module
    return _module or None


# Gather's large calls and ScatterND's writes of rows have a NumPy path a few tens of percent
# slower than their compiled loops, but numba's import costs ~0.5 s once per process (~1 s the
# first time ever, compiling): a script making a few such calls would lose. So they take the
# loops once numba is loaded anyway (GatherElements, ScatterElements, TensorScatter or GatherND
# with batch_dims loaded it), or from the WARM_CALLS-th such call in this process, a loop of
# calls that the import then pays back.
WARM_CALLS = 100
_large_calls = 0


# A call whose work (elements reduced or written) reaches this loads numba at once, whatever
# the count: its NumPy path (ufunc.at, ~10-60 ns an element) would cost about the import.
EAGER_ELEMENTS = 1 << 20


def read_only(view: Any) -> Any:
    """``view``, a view this package made for a compiled loop (never the caller's own array),
    marked read-only, and returned: numba's signatures tell a read-only array from a writable
    one, so a loop's inputs would compile twice, once for a caller's read-only array (an
    initializer, ``np.broadcast_to``, ``np.frombuffer``) and once for a writable one: 96 of the
    378 signatures one test run compiled (~2 s each, on every fresh install too). Every
    compiled loop takes its inputs read-only, its outputs writable."""
    view.setflags(write=False)
    return view


def loaded() -> bool:
    """Whether the compiled loops are imported in this process already (no import here)."""
    return bool(_module)


# A kernel's compiled loop is worth its compile once the time its calls spend on NumPy's path
# in this process reaches PAYS_SECONDS (about what a compile costs: 1-3 s for one kernel, dtype
# and reduction the first time on a machine, 0.7 s for numba's import and the cache's load in
# every later process) or its calls reach WARM_CALLS (a loop); before that its calls take
# NumPy's path. The time is estimated from the elements of work, at what each kernel's NumPy
# path costs per element (_NUMPY_NS: ns, 2 cores, bench_first_call.py's large calls run with
# GATHER_SCATTER_COMPILED=0). A script's or a test suite's small calls of many signatures then
# compile nothing (the default conformance export compiled ~100 signatures, minutes on a fresh
# install), nor does a first call that NumPy finishes sooner than numba could compile it, where
# a model's loop of calls, or one call NumPy would take seconds over, compiles at once.
PAYS_SECONDS = 1.0
_NUMPY_NS = {"rows": 8.0, "scatter_elements": 90.0, "gather_elements": 30.0, "gather_nd": 2.0, "tensor_scatter": 2.0}


def pays_elements(kernel: str) -> int:
    """The elements of work after which ``kernel``'s compiled loop pays (see PAYS_SECONDS)."""
    return int(PAYS_SECONDS * 1e9 / _NUMPY_NS.get(kernel, 30.0))


_ready: set = set()  # the kernels' keys whose loops this process uses
_seen: dict = {}  # key -> [calls, elements] taken on NumPy's path so far

# Every keyed call takes the compiled loops where they are here (the tests of the compiled
# loops set this: a small call is then compiled, not NumPy's).
EAGER = os.environ.get("GATHER_SCATTER_COMPILED", "1").strip() == "eager"


# Inside numpy_paths(): calls whose loops are not compiled in this process yet take NumPy's path
# and count nothing toward a compile (a context variable: the thread that sets it).
_NUMPY_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("gather_scatter_numpy_only", default=False)


@contextlib.contextmanager
def numpy_paths() -> Iterator[None]:
    """Within the block, no kernel compiles: a call takes the compiled loops only where its key
    is compiled in this process already (or, unkeyed, where numba is loaded), else NumPy's path,
    with the same bits, without counting toward a compile. For many small calls of many
    signatures that no loop repeats, such as the checker's oracle on thousands of random cases:
    there the default rule compiled every signature met 100 times (216 signatures, ~2.5 s each
    on an empty cache: 9 minutes of a first 2,000-case run), where NumPy's path costs
    microseconds a case. Overrides ``EAGER``."""
    token = _NUMPY_ONLY.set(True)
    try:
        yield
    finally:
        _NUMPY_ONLY.reset(token)


def loops_for(elements: int, key: tuple | None = None) -> Any:
    """The compiled loops for one call of ``elements`` elements of work, or None for NumPy's path.

    With a ``key`` (the kernel family and what fixes its compiled signatures: dtype,
    reduction; ScatterND's three row loops share ``("rows", dtype, reduction)``), the
    loops once that key's work in this process pays for its compile (:func:`pays_elements`
    of ``key[0]``, or ``WARM_CALLS`` calls, this one included; from then on every call), or at
    once under ``EAGER``; inside :func:`numpy_paths`, only where compiled already. Without
    one, :func:`warm_loops`, or :func:`loops` at once where the work is large
    (``EAGER_ELEMENTS``): a script that scatters once into a big table must not pay NumPy's
    path, many times numba's import, for it."""
    if _NUMPY_ONLY.get():
        return (_module or None) if key is None or key in _ready else None
    if key is None:
        if _module is None and elements >= EAGER_ELEMENTS:
            return loops()
        return warm_loops()
    if key in _ready:
        return _module or None
    if not EAGER:
        seen = _seen.setdefault(key, [0, 0])
        seen[0] += 1
        seen[1] += elements
        if seen[0] < WARM_CALLS and seen[1] < pays_elements(key[0]):
            return None
    module = loops()
    if module is not None:
        _ready.add(key)
    return module


def ready_loops(key: tuple) -> Any:
    """The compiled loops where ``key``'s are in use in this process already (a call of that key
    took them: :func:`loops_for`), else None; counts nothing and imports nothing. For a call
    planned once per signature (``_planned``): it plans only what :func:`loops_for` chose."""
    return (_module or None) if key in _ready else None


def warm_loops() -> Any:
    """:func:`loops` for a call of Gather's large path or ScatterND's writes of rows: the loops
    once numba is loaded, or from this process's ``WARM_CALLS``-th such call on (the import
    then); None before that, or where :func:`loops` is None: the NumPy path."""
    global _large_calls
    if _NUMPY_ONLY.get():
        return _module or None
    if _module is None:  # not tried yet: count the calls until the import pays
        _large_calls += 1
        if _large_calls < WARM_CALLS:
            return None
    return loops()
