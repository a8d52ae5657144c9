"""NumPy kernels, one module per operator family.

The families: gather, gather_nd, scatter_nd, elements (GatherElements, ScatterElements,
Scatter), tensor_scatter. Shared pieces: ``_offsets``
(index tuples to flat offsets, bounds checked in the same chunked pass), ``_writes`` (copies,
last-wins assignment, reductions, dtype rules), ``_compiled``/``_loops`` (numba loops).

Each ``run_<op>(spec, ...)`` computes the same thing for every version of its operator; the
``spec`` (an OpVersion) only says what that version accepts and names it in errors.

NumPy only: the kernels import nothing above ``_validate`` (``_versions``, ``_shapes``,
``_validate``, ``_buffers``, ``_parallel``, ``_memory``). The public functions are
:mod:`gather_scatter.ops`'s, and the choice of a backend for another library's arrays is
:mod:`gather_scatter._runners`'s; ``backends/`` and ``_runners`` import the kernels, never the
reverse (tests/test_layout.py).
"""
