"""The reduction codes the compiled scatter loops take (``_loops``, ``_loops_reduce``) and
``_reductions`` and ``_writes`` pass them: plain integers, since a numba loop cannot take an enum."""

NONE, ADD, MUL, MAX, MIN = range(5)
