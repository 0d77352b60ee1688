"""Compiled routines on every backend eager ops run on: ``G.einsum`` on arrays equals
``ts.einsum`` on the same arrays in value (up to rounding), dtype and array type, on NumPy,
torch, JAX and Dask; a model graph of JAX arrays trains as the NumPy one does."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensig as ts
from arrays import BACKENDS, classic_specs, to_backend, to_numpy
from tensig.model import graph as G
from tolerance import assert_equal_up_to_rounding

#: (eager function, graph function, operand count) of each einsum-family operator
FAMILY = {
    "einsum": (ts.einsum, G.einsum, (2, 3)),
    "einsum1": (ts.einsum1, G.einsum1, (1, 1)),
    "outer_sum": (ts.outer_sum, G.outer_sum, (2, 2)),
    "tropical": (ts.tropical, G.tropical, (2, 2)),
    "einmax1": (ts.einmax1, G.einmax1, (1, 1)),
}
FLOATS = ["float16", "float32", "float64"]
INTS = ["int8", "int32", "int64"]


def _library_dtype(y):
    """A result's dtype as NumPy names it (torch's ``torch.float32`` is ``float32``)."""
    return str(y.dtype).removeprefix("torch.")


def _draw_operands(draw, op: str, kind: str):
    """Operands of ``op``: a classic spec, and per operand a dtype of ``kind`` (floats mix
    with floats, integers with integers: a graph refuses to mix the two)."""
    lo, hi = FAMILY[op][2]
    ops, out, sizes = draw(classic_specs(alphabet=5, labels=4, sizes=3, ops=(lo, hi), axes=3))
    dtypes = draw(st.lists(st.sampled_from(FLOATS if kind == "float" else INTS),
                           min_size=len(ops), max_size=len(ops)))
    spec = ";".join("".join(o) for o in ops) + "=>" + "".join(out)
    return spec, ops, out, sizes, dtypes


@st.composite
def cases(draw):
    op = draw(st.sampled_from(sorted(FAMILY)))
    kind = draw(st.sampled_from(["float", "int"]))
    return (op, *_draw_operands(draw, op, kind), draw(st.integers(0, 2**16)))


def _arrays(ops, sizes, dtypes, seed):
    g = np.random.default_rng(seed)
    out = []
    for o, dt in zip(ops, dtypes, strict=True):
        shape = [sizes[c] for c in o]
        x = g.integers(-4, 5, shape) if dt.startswith("int") else g.standard_normal(shape)
        out.append(np.asarray(x).astype(dt))
    return out


def _length(op, ops, out, sizes) -> int:
    """Terms per result cell (rounding accumulates over them), plus the combine's rounding."""
    summed = {c for o in ops for c in o} - set(out)
    return int(np.prod([sizes[c] for c in summed])) + len(ops)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_graph_einsum_agrees_with_eager_in_value_dtype_and_array_type(backend, case):
    """On the same arrays ``G.<op>`` and ``ts.<op>`` give the same kind of array, of the same
    dtype, with values equal up to the rounding of two summation orders."""
    if backend == "jax":
        pytest.importorskip("jax")
    if backend == "dask":
        pytest.importorskip("dask.array")
    op, spec, ops, out, sizes, dtypes, seed = case
    eager, graph, _ = FAMILY[op]
    host = _arrays(ops, sizes, dtypes, seed)
    xs = [to_backend(backend, x) for x in host]
    want = eager(spec, *xs)
    got = graph(spec, *xs)
    assert type(got) is type(want)
    assert _library_dtype(got) == _library_dtype(want), (spec, dtypes)
    w, g = to_numpy(backend, want), to_numpy(backend, got)
    if np.issubdtype(w.dtype, np.integer):
        np.testing.assert_array_equal(g, w)
        return
    # the terms' magnitudes: the same operator on absolute values, in double precision; the
    # unit roundoff of the least precise operand (either path may sum some terms in it)
    absolute = [np.abs(x).astype(np.float64) for x in host]
    magnitude = np.abs(eager(spec, *absolute))
    coarsest = max(dtypes, key=lambda d: np.finfo(d).eps)
    assert_equal_up_to_rounding(g, w, dtype=coarsest, length=_length(op, ops, out, sizes),
                                magnitude=magnitude)


#: specs beyond classic einsum: rows, fixed indices, convolutions, concatenation, max pooling
#: (operator, spec, operand shapes, operand rows as (batch, input) axes)
STRUCTURED = [
    ("einsum", "b|i; i->o => b|o", [(3, 4), (5, 4)], [(1, 0), (0, 1)]),
    ("einsum1", "i => i2", [(3,)], None),
    ("einsum1", "ij => i0", [(3, 2)], None),
    ("einsum", "...|2*oh=+kh, ow<+kw, ic; |kh, kw, ic -> oc => ...|oh, ow, oc",
     [(2, 6, 5, 3), (4, 3, 2, 3)], [(1, 0), (0, 3)]),
    ("tropical", "2*o<+k; k => o", [(7,), (3,)], None),
    ("concat", "a; b => a^b", [(2,), (3,)], None),
    ("concat", "s, a; s, b => s, a^b", [(2, 3), (2, 1)], None),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize(("op", "spec", "shapes", "rows"), STRUCTURED)
def test_structured_specs_agree_on_every_backend(backend, dtype, op, spec, shapes, rows):
    pytest.importorskip({"jax": "jax", "dask": "dask.array"}.get(backend, "numpy"))
    eager, graph = getattr(ts, op), getattr(G, op)
    g = np.random.default_rng(5)
    host = [g.integers(-4, 5, s).astype(dtype) for s in shapes]
    xs = [to_backend(backend, x) for x in host]
    if rows is not None:
        xs = [ts.rows(x, batch=b, input=i) for x, (b, i) in zip(xs, rows, strict=True)]
    want = eager(spec, *xs)
    got = graph(spec, *xs)
    assert type(got) is type(want)
    if rows is not None:
        assert got.rows == want.rows
        got, want = got.array, want.array
    assert _library_dtype(got) == _library_dtype(want)
    # small integers: every sum and product is exact in each dtype
    np.testing.assert_array_equal(to_numpy(backend, got), to_numpy(backend, want))


def test_a_graph_refuses_to_mix_integers_and_floats():
    """The one deliberate difference: ``ts.einsum`` promotes an int32 and a float32 operand
    as NumPy does; a graph keeps integer data out of float arithmetic unless cast."""
    a, b = np.ones((2, 3), np.int32), np.ones((3, 4), np.float32)
    assert ts.einsum("ij;jk=>ik", a, b).dtype == np.float64
    with pytest.raises(TypeError, match="integer data"):
        G.einsum("ij;jk=>ik", a, b)


def _mlp_gradient_magnitudes(params, xs, onehot):
    """Per element of each parameter's gradient in the two-moons MLP, the sum of the
    absolute values of the terms it is computed from (:mod:`tolerance`): the backward pass
    on absolute values (weights, activations, the softmax's and the targets' parts of the
    logits' gradient) under the forward pass's relu gates, in float64."""
    w1, b1, w2, b2, w3, b3 = params
    x = xs.astype(np.float64)
    a1 = x @ w1.T + b1
    h1 = np.maximum(a1, 0)
    a2 = h1 @ w2.T + b2
    h2 = np.maximum(a2, 0)
    logits = h2 @ w3.T + b3
    soft = np.exp(logits - logits.max(axis=1, keepdims=True))
    soft /= soft.sum(axis=1, keepdims=True)
    # the forward values' own magnitudes (their rounding reaches the gradients too)
    m1 = (a1 > 0) * (np.abs(x) @ np.abs(w1).T + np.abs(b1))
    m2 = (a2 > 0) * (m1 @ np.abs(w2).T + np.abs(b2))
    m_logits = m2 @ np.abs(w3).T + np.abs(b3)
    g3 = (soft + onehot + m_logits) / len(x)
    g2 = (g3 @ np.abs(w3)) * (a2 > 0)
    g1 = (g2 @ np.abs(w2)) * (a1 > 0)
    return [g1.T @ np.abs(x), g1.sum(0), g2.T @ m1, g2.sum(0), g3.T @ m2, g3.sum(0)]


def test_the_mlp_demo_trains_on_a_jax_graph():
    """The two-moons MLP (:mod:`tensig.demos.moons`) in a graph of JAX arrays: its gradients
    are the NumPy graph's up to float32 rounding, and training lowers the loss."""
    pytest.importorskip("jax")
    import jax

    from tensig.demos import moons

    g = np.random.default_rng(0)
    xs = g.standard_normal((200, 2)).astype(np.float32)
    onehot = np.eye(2, dtype=np.float32)[(xs[:, 0] * xs[:, 1] > 0).astype(np.int64)]
    grads, losses = {}, {}
    for backend in ("numpy", "jax"):
        with G.new_graph(backend) as graph:
            m = moons.build(xs, onehot)  # parameters drawn from (seed, name): the same values
            G.grad_update(m.loss).backward()
            grads[backend] = [graph.store.read(p.grad) for p in m.params]
            if backend == "numpy":
                params = [np.asarray(graph.store.read(p.val), np.float64) for p in m.params]
            trainer = m.trainer(xs, onehot, lr=0.01)
            losses[backend] = [trainer.step(trainer.rows_of(i)) for i in range(10)]
    assert all(isinstance(x, jax.Array) for x in grads["jax"])
    # rounding adds up along the chain of sums: forward through two hidden layers (with their
    # biases), the classes and the softmax's sum; back through the batch and the layers
    length = (2 + 1) + (32 + 1) + (32 + 1) + 2 * moons.CLASSES + moons.BATCH + 32 + 32
    magnitudes = _mlp_gradient_magnitudes(params, xs[:moons.BATCH], onehot[:moons.BATCH])
    for ours, theirs, mag in zip(grads["jax"], grads["numpy"], magnitudes, strict=True):
        assert ours.dtype == theirs.dtype == np.float32
        assert_equal_up_to_rounding(np.asarray(ours), theirs, dtype=np.float32, length=length,
                                    magnitude=mag.reshape(theirs.shape))
    assert losses["jax"][-1] < 0.5 * losses["jax"][0]
    # ten Adam steps carry the rounding differences along: ~800 float32 ulps
    np.testing.assert_allclose(losses["jax"], losses["numpy"], rtol=1e-4)


def test_a_dask_graph_runs_lazily_and_refuses_to_train():
    """Forward and gradient routines on Dask arrays build task graphs (the result computes
    to the NumPy graph's); a Trainer refuses Dask, whose parameters would chain every step."""
    da = pytest.importorskip("dask.array")
    from tensig.demos import moons
    from tensig.model.train import Trainer, sgd

    g = np.random.default_rng(1)
    xs = g.standard_normal((40, 2)).astype(np.float32)
    onehot = np.eye(2, dtype=np.float32)[(xs[:, 0] > 0).astype(np.int64)]
    values = {}
    for backend in ("numpy", "dask"):
        with G.new_graph(backend) as graph:
            m = moons.build(xs, onehot)
            G.grad_update(m.loss).backward()
            values[backend] = [graph.store.read(p.grad) for p in m.params]
            if backend == "dask":
                with pytest.raises(TypeError, match="lazy arrays of a 'dask' graph"):
                    Trainer(m.loss, sgd(m.params, lr=0.1), {m.x: xs, m.t: onehot})
    assert all(isinstance(x, da.Array) for x in values["dask"])
    length = moons.BATCH + 32 + 32 + 2 * moons.CLASSES
    for ours, theirs in zip(values["dask"], values["numpy"], strict=True):
        assert ours.dtype == theirs.dtype
        assert_equal_up_to_rounding(ours.compute(), theirs, dtype=np.float32, length=length,
                                    magnitude=np.abs(theirs).max())
