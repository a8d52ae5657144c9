"""What the array libraries do to a function besides calling it: PyTorch autograd and JAX's
``grad`` (checked against finite differences in float64), and ``jax.jit`` (the same bits as
eager, shape and type errors at trace time, index bounds through ``checkify``)."""

from __future__ import annotations

import numpy as np
import pytest
from backends import Library, same_bits

from gather_scatter import (
    GatherScatterError,
    IndexOutOfBoundsError,
    ShapeError,
    gather,
    gather_elements,
    gather_nd,
    scatter_elements,
    scatter_nd,
    tensor_scatter,
)

REDUCTIONS = ["none", "add", "mul", "max", "min"]
rng = np.random.default_rng(11)
DATA = rng.standard_normal((5, 4))
ND_INDICES = np.array([[1], [3], [-4], [1], [1]])  # duplicates: the order matters for every reduction
ND_UPDATES = rng.standard_normal((5, 4))
EL_INDICES = np.array([[1, 2, 1], [-1, 0, 0], [1, 1, 2]])  # duplicates along axis 1
EL_UPDATES = rng.standard_normal((3, 3))
CACHE = rng.standard_normal((2, 3, 6, 4))
STEP = rng.standard_normal((2, 3, 2, 4))
WRITE = np.array([5, 1])


def _ops():
    """(name, function of the differentiable inputs, those inputs as NumPy float64 arrays)."""
    ops = [
        ("gather", lambda d: gather(d, np.array([[1, -1], [0, 0]]), axis=1), [DATA]),
        ("gather_nd", lambda d: gather_nd(d, np.array([[1, 2], [0, -1], [1, 2]])), [DATA]),
        ("gather_nd_batch", lambda d: gather_nd(d, np.array([[2], [0], [3], [1], [2]]), batch_dims=1), [DATA]),
        ("gather_elements", lambda d: gather_elements(d, EL_INDICES, axis=1), [DATA]),
        ("tensor_scatter", lambda c, u: tensor_scatter(c, u, WRITE, mode="circular"), [CACHE, STEP]),
    ]
    for r in REDUCTIONS:
        ops.append((f"scatter_nd_{r}", lambda d, u, r=r: scatter_nd(d, ND_INDICES, u, reduction=r),
                    [DATA, ND_UPDATES]))
        ops.append((f"scatter_elements_{r}",
                    lambda d, u, r=r: scatter_elements(d, EL_INDICES, u, axis=1, reduction=r), [DATA, EL_UPDATES]))
    return ops


OPS = _ops()


@pytest.mark.parametrize("name, fn, inputs", OPS, ids=[o[0] for o in OPS])
def test_torch_gradients_match_finite_differences(name, fn, inputs):
    torch = Library("torch").mod
    args = tuple(torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in inputs)
    assert torch.autograd.gradcheck(fn, args, eps=1e-6, atol=1e-6)


def test_torch_gradient_skips_overwritten_updates():
    """'none' with duplicates: only the last update to a row reaches the output, so only it has
    a gradient (torch's own scatter would give the overwritten ones one too)."""
    torch = Library("torch").mod
    d = torch.tensor(DATA, requires_grad=True)
    u = torch.tensor(ND_UPDATES, requires_grad=True)
    scatter_nd(d, ND_INDICES, u).sum().backward()
    # rows 1 (updates 0, 3, 4: the last wins), 3 (update 1) and -4 = 1 again (update 2, overwritten)
    assert u.grad.sum(dim=1).tolist() == [0.0, 4.0, 0.0, 0.0, 4.0]
    assert d.grad.sum(dim=1).tolist() == [4.0, 0.0, 4.0, 0.0, 4.0]


@pytest.fixture
def jax():
    """JAX with x64 on (float64 finite differences), held by its context manager and restored
    after the test; tests/test_jax_defaults.py runs jit, checkify and eager bounds with x64 off."""
    jax = pytest.importorskip("jax", reason="jax not installed (pip install 'gather_scatter[jax]')")
    with jax.enable_x64(True):
        yield jax


@pytest.mark.parametrize("name, fn, inputs", OPS, ids=[o[0] for o in OPS])
def test_jax_gradients_match_finite_differences(jax, name, fn, inputs):
    from jax.test_util import check_grads

    args = tuple(jax.numpy.asarray(a) for a in inputs)
    check_grads(fn, args, order=1, modes=["rev"], eps=1e-6)
    check_grads(jax.jit(fn), args, order=1, modes=["rev", "fwd"], eps=1e-6)


@pytest.mark.parametrize("name, fn, inputs", OPS, ids=[o[0] for o in OPS])
def test_jax_jit_gives_the_eager_bits(jax, name, fn, inputs):
    args = tuple(jax.numpy.asarray(a) for a in inputs)
    eager = np.asarray(fn(*args))
    assert same_bits(eager, np.asarray(jax.jit(fn)(*args)))
    numpy_result = fn(*inputs)
    assert same_bits(numpy_result, eager)


def test_jax_jit_with_traced_indices(jax):
    jnp = jax.numpy
    f = jax.jit(lambda d, i, u: scatter_nd(d, i, u, reduction="mul"))
    expected = scatter_nd(DATA, ND_INDICES, ND_UPDATES, reduction="mul")
    assert same_bits(expected, np.asarray(f(jnp.asarray(DATA), jnp.asarray(ND_INDICES), jnp.asarray(ND_UPDATES))))


def test_jax_jit_shape_and_type_errors_raise_at_trace_time(jax):
    jnp = jax.numpy
    f = jax.jit(lambda d, i: gather_nd(d, i))
    with pytest.raises(ShapeError, match=r"GatherND-13: indices.shape\[-1\] = 3 must be in \[1, 2\]"):
        f.trace(jnp.asarray(DATA), jnp.zeros((2, 3), jnp.int64))
    g = jax.jit(lambda d, i: gather(d, i))
    with pytest.raises(GatherScatterError, match=r"Gather-13: .*indices.*tensor\(float"):
        g.trace(jnp.asarray(DATA), jnp.zeros((2,), jnp.float32))


def test_jax_jit_bounds_through_checkify(jax):
    from jax.experimental import checkify

    jnp = jax.numpy
    data = jnp.asarray(DATA)
    f = jax.jit(lambda d, i: gather_nd(d, i))
    bad = jnp.asarray([[1, 2], [0, 9]])
    err, _ = checkify.checkify(f)(data, bad)
    assert err.get() == ("GatherND-13: indices[1, 1] = 9 is out of bounds for data axis 1 of size 4 "
                         "(valid range [-4, 3]) (`check` failed)")
    err, _ = checkify.checkify(f)(data, jnp.asarray([[1, 2], [0, -4]]))
    assert err.get() is None
    # Without checkify: the bad read is the fill value (NaN), never another element.
    result = np.asarray(f(data, bad))
    assert result[0] == DATA[1, 2] and np.isnan(result[1])
    # A scatter drops the bad update and keeps the others.
    s = jax.jit(lambda d, i, u: scatter_nd(d, i, u, reduction="add"))
    indices = jnp.asarray([[1], [7], [1]])
    err, out = checkify.checkify(s)(data, indices, jnp.ones((3, 4)))
    assert "ScatterND-18: indices[1, 0] = 7 is out of bounds for data axis 0 of size 5" in err.get()
    expected = DATA.copy()
    expected[1] += 1  # the two good updates, one after the other
    expected[1] += 1
    assert np.array_equal(np.asarray(out), expected)
    w = jax.jit(lambda c, u, i: tensor_scatter(c, u, i))
    err, _ = checkify.checkify(w)(jnp.asarray(CACHE), jnp.asarray(STEP), jnp.asarray([5, 1]))
    assert "TensorScatter-24: write_indices[0] = 5 is out of bounds" in err.get()


def test_jax_eager_bounds_raise_the_numpy_error(jax):
    jnp = jax.numpy
    with pytest.raises(IndexOutOfBoundsError) as numpy_error:
        gather_elements(DATA, np.array([[0, 4]]), axis=1)
    with pytest.raises(IndexOutOfBoundsError) as jax_error:
        gather_elements(jnp.asarray(DATA), np.array([[0, 4]]), axis=1)
    assert str(jax_error.value) == str(numpy_error.value)
    assert jax_error.value.position == (0, 1) and jax_error.value.value == 4
