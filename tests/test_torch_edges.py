"""Where PyTorch users meet the kernels and the main suite did not look: 0-d indices (on
every library, against the NumPy kernel), ``nn.Parameter`` and other Tensor subclasses,
``torch.compile``, and the type hints under ``mypy --strict``."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import warnings

import ml_dtypes
import numpy as np
import pytest
from backends import NAMES, Library, library, same_bits
from error_check import raised

import gather_scatter as gs

# ---- 0-d indices and scalar-ish inputs, every library against NumPy -----------------------

_BF16 = np.dtype(ml_dtypes.bfloat16)
SCALAR_CASES = [  # (id, op, NumPy inputs, attributes): valid and invalid, each op's rank rule
    ("gather_int8_axis_last", "gather", (np.arange(3, dtype=np.int8), np.array(1)), {"axis": -1}),
    ("gather_bf16_axis2", "gather", (np.arange(48).reshape(3, 4, 4).astype(_BF16), np.array(1)), {"axis": 2}),
    ("gather_negative", "gather", (np.arange(48.0).reshape(3, 4, 4), np.array(-1)), {"axis": 1}),
    ("gather_int32_index", "gather", (np.arange(3.0), np.array(2, np.int32)), {}),
    ("gather_shape_component", "gather", (np.array([2, 5, 7], np.int64), np.array(0)), {}),
    ("gather_out_of_bounds", "gather", (np.arange(3.0), np.array(3)), {}),
    ("gather_0d_data", "gather", (np.array(3.0), np.array(0)), {}),
    ("gather_nd_to_0d", "gather_nd", (np.arange(3.0), np.array([1])), {}),
    ("gather_nd_2d_to_0d", "gather_nd", (np.arange(6.0).reshape(2, 3), np.array([1, -1])), {}),
    ("gather_nd_0d_indices", "gather_nd", (np.arange(3.0), np.array(1)), {}),
    ("gather_nd_bad_component", "gather_nd", (np.arange(6.0).reshape(2, 3), np.array([0, 3])), {}),
    ("scatter_nd_0d_update", "scatter_nd", (np.arange(3.0), np.array([1]), np.array(9.0)), {}),
    ("scatter_nd_0d_update_max", "scatter_nd", (np.arange(6.0).reshape(2, 3), np.array([1, -1]), np.array(9.0)),
     {"reduction": "max"}),
    ("scatter_nd_0d_indices", "scatter_nd", (np.arange(3.0), np.array(1), np.array(9.0)), {}),
    ("gather_elements_0d", "gather_elements", (np.arange(3.0), np.array(1)), {}),
    ("gather_elements_0d_data", "gather_elements", (np.array(3.0), np.array(0)), {}),
    ("scatter_elements_0d", "scatter_elements", (np.arange(3.0), np.array(1), np.array(9.0)), {}),
    ("scatter_elements_0d_data", "scatter_elements", (np.array(3.0), np.array(0), np.array(9.0)), {}),
    ("tensor_scatter_0d_write", "tensor_scatter", (np.zeros((2, 3)), np.ones((2, 1)), np.array(1)), {}),
    ("tensor_scatter_rank1", "tensor_scatter", (np.zeros(3), np.ones(1), np.array([1])), {"axis": -1}),
]


def _outcome(call, to_numpy=None):
    """('ok', shape, dtype, array) or (error class, message)."""
    try:
        result = call()
    except gs.GatherScatterError as exc:
        return type(exc), str(exc)
    result = to_numpy(result) if to_numpy else result
    return "ok", result.shape, result.dtype, result


LIBRARIES = [(name, True) for name in NAMES] + [("jax", False)]  # JAX both ways: x64 off is its default


@pytest.fixture(params=LIBRARIES, ids=[f"{n}-x64off" if not x64 else n for n, x64 in LIBRARIES])
def lib(request):
    with library(*request.param) as held:
        yield held


@pytest.mark.parametrize("case", SCALAR_CASES, ids=[c[0] for c in SCALAR_CASES])
def test_0d_indices_give_the_numpy_result(lib, case):
    lib_name = lib.name
    _, op, inputs, attrs = case
    if not all(lib.supports(a) for a in inputs):
        pytest.skip(f"{lib_name} has no {inputs[0].dtype}")
    fn = getattr(gs, op)
    expected = _outcome(lambda: fn(*inputs, **attrs))
    actual = _outcome(lambda: fn(*[lib.convert(a) for a in inputs], **attrs),
                      lambda r: lib.to_numpy(r, np.asarray(inputs[0]).dtype))
    assert actual[:-1] == expected[:-1] if expected[0] == "ok" else actual == expected
    if expected[0] == "ok":
        assert same_bits(expected[-1], actual[-1])


def test_0d_index_shape_as_the_issue_reported_it():
    torch = Library("torch").mod
    assert gs.gather(torch.from_numpy(np.arange(3, dtype=np.int8)), torch.from_numpy(np.array(1)),
                     axis=-1).shape == ()
    cache = torch.zeros((3, 4, 4), dtype=torch.bfloat16)
    assert gs.gather(cache, torch.tensor(1), axis=2).shape == (3, 4)
    assert gs.gather(cache, torch.tensor(1), axis=2, out=torch.empty((3, 4), dtype=torch.bfloat16)).shape == (3, 4)


# ---- nn.Parameter and other Tensor subclasses ----------------------------------------------

rng = np.random.default_rng(5)
TABLE = rng.standard_normal((6, 4))
CACHE = rng.standard_normal((2, 3, 6, 4))

# name -> (op, data, indices, updates or None, attributes); updates, where given, are float
SUBCLASS_OPS = {
    "gather": (gs.gather, TABLE, np.array([[1, -1], [5, 5]]), None, {"axis": 0}),
    "gather_nd": (gs.gather_nd, TABLE, np.array([[1, 2], [-1, 0]]), None, {}),
    "scatter_nd": (gs.scatter_nd, TABLE, np.array([[1], [1], [-2]]), rng.standard_normal((3, 4)),
                   {"reduction": "add"}),
    "gather_elements": (gs.gather_elements, TABLE, np.array([[1, 3], [0, -1]]), None, {"axis": 1}),
    "scatter_elements": (gs.scatter_elements, TABLE, np.array([[1, 3], [0, -1]]), rng.standard_normal((2, 2)),
                         {"axis": 1, "reduction": "mul"}),
    "tensor_scatter": (gs.tensor_scatter, CACHE, np.array([5, 1]), rng.standard_normal((2, 3, 2, 4)),
                       {"mode": "circular"}),
}


def _call(name, data, indices, updates):
    fn, _, _, _, attrs = SUBCLASS_OPS[name]
    if name == "tensor_scatter":
        return fn(data, updates, indices, **attrs)
    return fn(data, indices, **attrs) if updates is None else fn(data, indices, updates, **attrs)


def _tagged(torch):
    class Tagged(torch.Tensor):  # a user's subclass, defined outside torch
        pass

    return Tagged


@pytest.mark.parametrize("kind", ["parameter", "subclass"])
@pytest.mark.parametrize("name", list(SUBCLASS_OPS))
def test_tensor_subclasses_are_torch_tensors(name, kind):
    torch = Library("torch").mod
    _, data, indices, updates, _ = SUBCLASS_OPS[name]
    plain = [None if a is None else torch.from_numpy(a.copy()) for a in (data, indices, updates)]
    expected = _call(name, *plain)
    if kind == "parameter":
        wrap = lambda t: None if t is None else torch.nn.Parameter(t.clone(), requires_grad=t.is_floating_point())
    else:
        tagged = _tagged(torch)
        wrap = lambda t: None if t is None else t.clone().as_subclass(tagged)
    # each input a subclass alone (the others plain), then all of them
    for i in range(3):
        if plain[i] is None:
            continue
        args = list(plain)
        args[i] = wrap(plain[i])
        result = _call(name, *args)
        assert isinstance(result, torch.Tensor) and torch.equal(result.detach(), expected)
    result = _call(name, *[wrap(t) for t in plain])
    assert torch.equal(result.detach(), expected)


@pytest.mark.parametrize("name", list(SUBCLASS_OPS))
def test_gradients_reach_parameters(name):
    torch = Library("torch").mod
    _, data, indices, updates, _ = SUBCLASS_OPS[name]
    weights = rng.standard_normal(_call(name, data, indices, updates).shape)

    def grads(make):
        d = make(torch.from_numpy(data.copy()))
        u = None if updates is None else make(torch.from_numpy(updates.copy()))
        (_call(name, d, torch.from_numpy(indices), u) * torch.from_numpy(weights)).sum().backward()
        return d.grad, None if u is None else u.grad

    expected = grads(lambda t: t.requires_grad_())
    actual = grads(torch.nn.Parameter)
    for e, a in zip(expected, actual):
        assert (e is None) == (a is None)
        if e is not None:
            assert torch.equal(a, e)


def test_embedding_weight_is_a_gather_table():
    torch = Library("torch").mod
    embedding = torch.nn.Embedding(10, 4)
    rows = gs.gather(embedding.weight, torch.tensor([1, 2]))
    assert torch.equal(rows, embedding(torch.tensor([1, 2])))
    rows.sum().backward()
    assert embedding.weight.grad[1:3].eq(1).all() and embedding.weight.grad[[0, *range(3, 10)]].eq(0).all()
    # a Parameter with a NumPy or plain-tensor out; a Parameter out only under no_grad
    out = torch.empty(2, 4)
    assert gs.gather(embedding.weight, [3, 4], out=out) is out
    err = raised(lambda: gs.scatter_nd(embedding.weight, [[0]], torch.ones(1, 4), out=embedding.weight))
    assert isinstance(err, gs.InvalidAttributeError) and "torch.no_grad()" in str(err)
    with torch.no_grad():
        gs.scatter_nd(embedding.weight, [[0]], torch.ones(1, 4), out=embedding.weight)
    assert embedding.weight[0].eq(1).all()


def test_mixing_a_parameter_with_another_library_names_both():
    torch = Library("torch").mod
    weight = torch.nn.Parameter(torch.zeros(3, 2))
    err = raised(lambda: gs.gather(np.zeros((3, 2)), weight))
    assert isinstance(err, gs.DTypeError)
    assert "indices is a torch.Parameter but data is a numpy.ndarray" in str(err)


# ---- torch.compile -----------------------------------------------------------------------

def _all_ops(d, g, nd, snd, ge, se, ts):
    """Every operator in one function, so that one compilation covers them all."""
    return (
        gs.gather(d, g, axis=1),
        gs.gather_nd(d, nd),
        gs.scatter_nd(d, snd, d[:2] * 2),  # duplicates: the last update wins
        gs.gather_elements(d, ge, axis=1),
        gs.scatter_elements(d, se, d[:1, :2] + 1, axis=1, reduction="add"),
        gs.tensor_scatter(d[None], d[None, :1] * 3, ts, axis=1, mode="circular"),
    )


_GOOD = {"g": [[-1, 0]], "nd": [[-1, 0], [2, 3]], "snd": [[1], [1]], "ge": [[-1, 0], [2, 2]],
         "se": [[-4, 0]], "ts": [-0]}
_BAD = {  # one bad index per operator (the same shapes: no recompilation), and the message
    "g": ([[4, 0]], "Gather-13: indices[0, 0] = 4 is out of bounds"),
    "nd": ([[-1, 0], [2, 4]], "GatherND-13: indices[1, 1] = 4 is out of bounds"),
    "snd": ([[1], [-4]], "ScatterND-18: indices[1, 0] = -4 is out of bounds"),
    "ge": ([[-1, 0], [2, -5]], "GatherElements-13: indices[1, 1] = -5 is out of bounds"),
    "se": ([[0, 4]], "ScatterElements-18: indices[0, 1] = 4 is out of bounds"),
    "ts": ([-1], "TensorScatter-24: write_indices[0] = -1 is out of bounds"),
}


def test_compile_gives_eager_results_and_our_errors():
    torch = Library("torch").mod
    d = torch.arange(12.0).reshape(3, 4)
    good = {k: torch.tensor(v) for k, v in _GOOD.items()}
    compiled = torch.compile(_all_ops, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dynamo's notes on the functions it traces
        for e, c in zip(_all_ops(d, **good), compiled(d, **good)):
            assert torch.equal(e, c)
        for name, (bad, message) in _BAD.items():
            args = {**good, name: torch.tensor(bad)}
            err = raised(lambda: compiled(d, **args))
            assert isinstance(err, gs.IndexOutOfBoundsError) and str(err).startswith(message), err
            assert str(err) == str(raised(lambda: _all_ops(d, **args)))


def test_compile_on_inductor_as_the_issue_reported_it():
    torch = Library("torch").mod
    d = torch.arange(12.0).reshape(3, 4)
    compiled = torch.compile(lambda d, i: gs.gather_elements(d, i, axis=1))  # the default backend
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.equal(compiled(d, torch.tensor([[-1, 0]])), torch.tensor([[3.0, 0.0]]))
        err = raised(lambda: compiled(d, torch.tensor([[4, 0]])))
    assert isinstance(err, gs.IndexOutOfBoundsError), err
    assert str(err) == ("GatherElements-13: indices[0, 0] = 4 is out of bounds for data axis 1 of size 4 "
                        "(valid range [-4, 3])")


# ---- type hints: a user's script under mypy --strict --------------------------------------

USER_SCRIPT = """
    import numpy as np
    import numpy.typing as npt
    import torch
    import gather_scatter as gs

    t = torch.arange(12.0).reshape(3, 4)
    i = torch.tensor([1, 2])
    rows: torch.Tensor = gs.gather(t, i)
    into: torch.Tensor = gs.gather(t, i, out=torch.empty(2, 4))
    nd: torch.Tensor = gs.gather_nd(t, [[0, 1]], batch_dims=0)
    sc: torch.Tensor = gs.scatter_nd(t, torch.tensor([[0]]), torch.ones(1, 4), reduction="add", out=t)
    ge: torch.Tensor = gs.gather_elements(t, torch.tensor([[0, 1]]), axis=1)
    se: torch.Tensor = gs.scatter_elements(t, [[0]], torch.ones(1, 1), axis=1, reduction="max")
    ts: torch.Tensor = gs.tensor_scatter(torch.zeros(2, 8, 4), torch.ones(2, 1, 4), [1, 2], mode="circular")
    emb: torch.Tensor = gs.gather(torch.nn.Embedding(10, 4).weight, i)

    a = np.arange(12.0).reshape(3, 4)
    r: npt.NDArray[np.float64] = gs.gather(a, np.array([1, 2]))
    o: np.ndarray = gs.scatter_nd(a, np.array([[0]]), np.ones((1, 4)), out=a)
    listed: npt.NDArray[np.float64] = gs.gather([1.0, 2.0], [0])
    kv: np.ndarray = gs.tensor_scatter(np.zeros((2, 8, 4)), np.ones((2, 1, 4)), np.array([1, 2]))
"""
WRONG_SCRIPT = """
    import numpy as np
    import torch
    import gather_scatter as gs

    tensor: torch.Tensor = gs.gather(np.arange(3), [1])
    gs.scatter_nd(torch.zeros(3), [[0]], [1.0], reduction="sum")
"""


def _mypy(tmp_path, name, script):
    path = tmp_path / name
    path.write_text(textwrap.dedent(script))
    # A cache shared by runs: torch's stubs take a minute to read the first time.
    cache = os.path.join(tempfile.gettempdir(), "gather_scatter_mypy_cache")
    run = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", cache, "--no-error-summary",
                          str(path)], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    return run.returncode, run.stdout + run.stderr


def test_user_script_passes_mypy_strict(tmp_path):
    pytest.importorskip("mypy", reason="mypy not installed (pip install 'gather_scatter[test]')")
    pytest.importorskip("torch", reason="torch not installed (pip install 'gather_scatter[torch]')")
    code, output = _mypy(tmp_path, "user.py", USER_SCRIPT)
    assert code == 0, output
    # and the hints are not Any: a NumPy result is no tensor, and reduction is a Literal
    code, output = _mypy(tmp_path, "wrong.py", WRONG_SCRIPT)
    assert code == 1
    assert 'wrong.py:6: error: Incompatible types in assignment (expression has type "ndarray[' in output
    assert 'wrong.py:7: error: No overload variant of "scatter_nd" matches' in output
