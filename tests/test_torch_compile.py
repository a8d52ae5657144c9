"""``torch.compile`` of functions that call every operator (issue 26 item 12).

Compiling warns about nothing of ours (dynamo warned about the ``functools.lru_cache``
helpers our dispatch went through: array-api-compat's namespace lookup and our dtype table),
``fullgraph=True`` compiles (the bounds checks are custom ops, not graph breaks; a dtype table
keyed by NumPy dtypes made dynamo refuse with "cannot determine the equality comparison ...
float8_e4m3fn"), results are eager's bit for bit, and a bad index raises our
IndexOutOfBoundsError from the compiled function with eager's message.

torch.compile is slow on a small machine: one function holds every operator, so each
(dtype, backend) pair is one compilation; ``eager``/``aot_eager`` test dynamo and autograd's
tracing, one ``inductor`` case the generated code.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch not installed (pip install 'gather_scatter[torch]')")

from error_check import raised  # noqa: E402

import gather_scatter as gs  # noqa: E402


def _all_ops(d, g, nd, snd, ge, se, ts):
    """Every public operator, reductions with duplicate targets, in one function (one compilation)."""
    u2 = d[:2] * 2
    row = d[:1, :2] + 1
    return (
        gs.gather(d, g, axis=1),
        gs.gather_nd(d, nd),
        gs.scatter_nd(d, snd, u2),  # duplicates: the last update wins
        gs.scatter_nd(d, snd, u2, reduction="add"),
        gs.scatter_nd(d, snd, u2, reduction="mul"),
        gs.scatter_nd(d, snd, -u2, reduction="max"),
        gs.scatter_nd(d, snd, -u2, reduction="min"),
        gs.gather_elements(d, ge, axis=1),
        gs.scatter_elements(d, se, row, axis=1),
        gs.scatter_elements(d, se, row, axis=1, reduction="add"),
        gs.scatter_elements(d, se, row, axis=1, reduction="mul"),
        gs.scatter_elements(d, se, -row, axis=1, reduction="max"),
        gs.scatter_elements(d, se, -row, axis=1, reduction="min"),
        gs.tensor_scatter(d[None], d[None, :1] * 3, ts, axis=1, mode="circular"),
        gs.tensor_scatter(d[None], d[None, :2] * 3, ts + 1, axis=1),
    )


# Valid indices, negative ones included; snd and se name one target twice.
_GOOD = {"g": [[-1, 0]], "nd": [[-1, 0], [2, 3]], "snd": [[1], [-2]], "ge": [[-1, 0], [2, 2]],
         "se": [[-4, 0]], "ts": [-0]}
_BAD = {  # one bad index per operator (the same shapes: no recompilation), and eager's message
    "g": ([[4, 0]], "Gather-13: indices[0, 0] = 4 is out of bounds"),
    "nd": ([[-1, 0], [2, 4]], "GatherND-13: indices[1, 1] = 4 is out of bounds"),
    "snd": ([[1], [-4]], "ScatterND-18: indices[1, 0] = -4 is out of bounds"),
    "ge": ([[-1, 0], [2, -5]], "GatherElements-13: indices[1, 1] = -5 is out of bounds"),
    "se": ([[0, 4]], "ScatterElements-18: indices[0, 1] = 4 is out of bounds"),
    "ts": ([-1], "TensorScatter-24: write_indices[0] = -1 is out of bounds"),
}


def _data(dtype):
    return torch.arange(12, dtype=dtype).reshape(3, 4) - 5


def _ours(caught) -> list[str]:
    """The warnings a compilation gave that come from our code or our calls.

    Left out: only warnings from torch's own files that name nothing of ours (the inductor's
    import of torch.jit gives DeprecationWarnings of its own). Dynamo's lru_cache warning is
    issued from dynamo's file and names the wrapped function's file by its base name only, so
    it always counts; so does one from a graph's code (``<eval_with_key>``, our ops at run time).
    """
    torch_files = os.path.dirname(torch.__file__)
    found = []
    for w in caught:
        text = str(w.message)
        if not w.filename.startswith(torch_files) or "gather_scatter" in text or "lru_cache" in text:
            found.append(f"{w.category.__name__} {w.filename}:{w.lineno}: {text[:200]}")
    return found


def _compile_and_compare(dtype, backend, fullgraph):
    """Compile _all_ops; return the warnings it gave. Asserts eager's bits and eager's errors."""
    torch._dynamo.reset()
    d = _data(dtype)
    good = {k: torch.tensor(v) for k, v in _GOOD.items()}
    compiled = torch.compile(_all_ops, backend=backend, fullgraph=fullgraph)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = compiled(d, **good)
    expected = _all_ops(d, **good)
    assert len(results) == len(expected)
    for n, (e, c) in enumerate(zip(expected, results, strict=True)):
        assert c.dtype == e.dtype and c.shape == e.shape, n
        assert torch.equal(c.view(torch.uint8 if c.dtype == torch.bool else c.dtype), e), (n, e, c)
        if dtype.is_floating_point:  # bitwise, the signs of zeros included
            assert torch.equal(c.view(torch.int32), e.view(torch.int32)), n
    # the expected values themselves, for a few: the duplicates applied in order
    assert expected[2][1].tolist() == (d[1] * 2).tolist()  # [1] and [-2] name row 1: the last wins
    assert expected[3][1].tolist() == (d[1] + d[0] * 2 + d[1] * 2).tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (bad, message) in _BAD.items():
            args = {**good, name: torch.tensor(bad)}
            err = raised(lambda args=args: compiled(d, **args))
            assert isinstance(err, gs.IndexOutOfBoundsError) and str(err).startswith(message), err
            assert str(err) == str(raised(lambda args=args: _all_ops(d, **args)))
    return caught


@pytest.mark.parametrize(
    "dtype, backend, fullgraph",
    [
        (torch.float32, "eager", True),
        (torch.int64, "eager", True),
        (torch.float32, "aot_eager", False),
    ],
    ids=["float32-eager-fullgraph", "int64-eager-fullgraph", "float32-aot_eager"],
)
def test_compiled_ops_equal_eager_raise_our_errors_and_warn_nothing(dtype, backend, fullgraph):
    caught = _compile_and_compare(dtype, backend, fullgraph)
    assert _ours(caught) == []


def test_inductor_fullgraph():
    """The default backend generates code around the custom-op checks: the same bits and errors."""
    caught = _compile_and_compare(torch.float32, "inductor", True)
    assert _ours(caught) == []


def test_one_graph_and_no_break():
    """The bounds checks are custom ops: a call compiles to one graph with no break."""
    torch._dynamo.reset()
    d = _data(torch.float32)
    good = {k: torch.tensor(v) for k, v in _GOOD.items()}
    explained = torch._dynamo.explain(_all_ops)(d, **good)
    assert explained.graph_break_count == 0 and explained.graph_count == 1, explained.break_reasons


def test_out_under_fullgraph_refuses_naming_why():
    """``out=`` compares memory addresses, which a graph cannot: fullgraph=True refuses saying so,
    fullgraph=False breaks the graph there and writes out as eagerly."""
    torch._dynamo.reset()
    d = _data(torch.float32)

    def write(d, i, out):
        return gs.gather(d, i, axis=1, out=out)

    i = torch.tensor([[1, -1]])
    with pytest.raises(Exception, match=r"out= is checked against the inputs' memory addresses") as info:
        torch.compile(write, backend="eager", fullgraph=True)(d, i, torch.empty(3, 1, 2))
    assert "call without out=" in str(info.value)
    out = torch.empty(3, 1, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.compile(write, backend="eager")(d, i, out)
    assert torch.equal(out, gs.gather(d, i, axis=1)) and _ours(caught) == []


def test_host_index_lists_and_numpy_indices_compile():
    """Indices given as a list or a NumPy array are read on the host, outside the graph: the
    results are eager's; fullgraph=True refuses saying so."""
    d = _data(torch.int64)

    def fn(d):
        return gs.gather(d, [2, -3]), gs.scatter_nd(d, np.array([[0], [0]]), d[:2], reduction="add")

    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(fn, backend="eager")(d)
    assert torch.equal(got[0], d[[2, 0]]) and torch.equal(got[1][0], d[0] + d[0] + d[1]) and _ours(caught) == []
    torch._dynamo.reset()
    with pytest.raises(Exception, match=r"an input given as a list or NumPy array is read by NumPy's rules"):
        torch.compile(fn, backend="eager", fullgraph=True)(d)


def test_first_compile_in_a_fresh_process_warns_nothing():
    """The issue's case, in a process where nothing ran before: not one warning of any source
    (ATen's once-per-process "index_reduce() is in beta" included: a graph runs it unsilenced)."""
    script = textwrap.dedent("""
        import warnings
        import torch
        import gather_scatter as gs

        def fn(d, i, j):
            return (gs.scatter_nd(d, i, d[:2], reduction="mul"), gs.gather(d, j),
                    gs.scatter_elements(d, j[None], d[:1, :2], axis=1, reduction="max"))

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            d = torch.arange(12.0).reshape(3, 4)
            torch.compile(fn, backend="eager", fullgraph=True)(d, torch.tensor([[1], [1]]), torch.tensor([0, -1]))
        for w in caught:
            print(w.category.__name__, w.filename, w.lineno, str(w.message)[:200])
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "", done.stdout
