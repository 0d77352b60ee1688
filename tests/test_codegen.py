"""Generated step functions against the primitives' definitions, evaluated directly.

Hypothesis draws expression trees over a few buffers (a full array, a row vector that
broadcasts, a one-element scalar leaf, numbers), an accumulation operator and whether it
initialises; the compiled step must give what the definitions in ``tensig.ir`` give, applied
by hand with NumPy broadcasting -- on NumPy and on torch, NaN and infinities included.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arrays import expr_of
from tensig import ShapeError
from tensig.execution.ir import ACCUMULATORS, BINARY, TERNARY, UNARY, Code, Expr
from tensig.model import graph as G
from tensig.model.compile import compile_code

# primitives whose results stay well-defined on the drawn values (log of a negative is NaN
# in both; that is compared too)
UNARIES = ["id", "relu", "sat01", "exp", "neg", "tanh", "not", "sqrt", "recip"]
BINARIES = ["add", "sub", "mul", "div", "max", "min", "sat01_gate", "lt", "le", "eq", "ne",
            "or", "and", "fst", "snd"]
LEAVES = ["x", "y", "s"]  # (3, 4), (4,), (1,)
VALUES = st.sampled_from([0.0, -0.0, 1.0, -2.5, 0.5, 3.0, np.inf, -np.inf, np.nan])


def trees(depth: int = 3) -> st.SearchStrategy:
    leaf = st.one_of(st.sampled_from(LEAVES), st.sampled_from([0.0, 1.0, 2.0, -0.5]))
    if depth == 0:
        return leaf
    sub = trees(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(st.sampled_from(UNARIES), sub),
        st.tuples(st.sampled_from(BINARIES), sub, sub),
    )


# ``where(comparison, a, 0)`` and ``relu_gate`` mask by a product: a masked-off cell is a
# zero whose sign is unspecified (documented in ``tensig.execution.ir.select``), equal to 0 but not
# under a division.  So masks are drawn at the root, where only the value counts.
roots = st.one_of(
    trees(),
    st.tuples(st.just("where"), st.tuples(st.sampled_from(["eq", "lt", "ne"]), trees(1),
                                          trees(1)), trees(2), st.sampled_from([0.0, "y"])),
    st.tuples(st.just("relu_gate"), trees(2), trees(2)))


def evaluate(tree, arrays):
    """The same tree by the primitives' definitions, with NumPy broadcasting.

    A number is a weak Python float, as in the compiled step (float32 arrays stay float32:
    a NumPy float64 scalar would promote them); a subexpression of numbers alone is
    computed in double precision with IEEE division by zero, as the compiler folds it."""
    if isinstance(tree, str):
        return arrays[tree]
    if isinstance(tree, float):
        return tree
    op, *args = tree
    vals = [evaluate(a, arrays) for a in args]
    fn = UNARY.get(op) or BINARY.get(op) or TERNARY[op]
    if all(isinstance(v, float) for v in vals):
        return float(fn(np, *map(np.float64, vals)))
    return fn(np, *vals)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree=roots, accum=st.sampled_from([None, "+", "-", "*", "max", "min"]),
       init=st.booleans(), xs=st.lists(VALUES, min_size=12, max_size=12),
       ys=st.lists(VALUES, min_size=4, max_size=4), s=VALUES)
def test_generated_steps_match_the_definitions(backend, tree, accum, init, xs, ys, s):
    arrays = {"x": np.array(xs, np.float32).reshape(3, 4), "y": np.array(ys, np.float32),
              "s": np.array([s], np.float32)}
    old = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    with G.new_graph(backend) as g:
        leaves = {"x": G.leaf("x", arrays["x"]), "y": G.leaf("y", arrays["y"]),
                  "s": G.leaf("s", arrays["s"]), "out": G.leaf("out", old)}
        model = G.Model(leaves["x"] + leaves["y"] + leaves["s"] + leaves["out"])
        code = Code().assign(leaves["out"].val, expr_of(tree, {k: t.val for k, t in
                                                              leaves.items()}),
                             accum=accum, init=init and accum is not None)
        with np.errstate(all="ignore"):
            compile_code(code, g.array_type).run(model.graph.store)
        got = np.asarray(model.graph.store.read(leaves["out"].val))
    with np.errstate(all="ignore"):
        v = np.broadcast_to(np.asarray(evaluate(tree, arrays), np.float32), (3, 4))
        if accum is None:
            want = v
        else:
            combine = BINARY[ACCUMULATORS[accum][0]]
            start = np.full((3, 4), ACCUMULATORS[accum][1], np.float32) if init else old
            want = combine(np, start, v)
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=2e-6, atol=1e-6,
                               equal_nan=True)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_integer_arrays_stay_integers(backend):
    """Integer constants enter integer arithmetic as integers (on torch as int64 0-d tensors,
    which never widen an operand's dtype)."""
    with G.new_graph(backend) as g:
        x = G.leaf("x", np.arange(6, dtype=np.int64).reshape(2, 3))
        out = G.leaf("out", np.zeros((2, 3), np.int64))
        model = G.Model(x + out)
        e = Expr("add", (Expr("mul", (Expr("mod", (x.val, 4)), 2)), 1))
        compile_code(Code().assign(out.val, e), g.array_type).run(model.graph.store)
        got = model.graph.store.read(out.val)
    assert str(got.dtype).endswith("int64")
    np.testing.assert_array_equal(np.asarray(got), (np.arange(6).reshape(2, 3) % 4) * 2 + 1)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_pointwise_copy_stores_the_same_array(backend):
    """``y =: id(x)`` between equal shapes (an optimizer's ``sgd_delta =: p.grad``) stores
    ``x``'s own array, no copy: steps never write into arrays."""
    with G.new_graph(backend) as g:
        x = G.leaf("x", np.arange(6, dtype=np.float32).reshape(2, 3), batch=1)
        y = G.leaf("y", np.zeros((2, 3), np.float32), batch=1)
        model = G.Model(x + y)
        store = model.graph.store
        compile_code(Code().assign(y.val, Expr("id", (x.val,))), g.array_type).run(store)
        assert store.read(y.val) is store.read(x.val)


@pytest.mark.parametrize("op", ["id", "neg"])
def test_a_pointwise_copy_checks_rows_as_any_pointwise_expression(op):
    """``y =: id(x)`` where ``x``'s batch axis is ``y``'s output axis (the same memory shape) is
    refused as ``y =: neg(x)`` is; main's alias step copied it without reading the rows."""
    with G.new_graph("numpy") as g:
        x = G.leaf("x", np.ones((2, 3), np.float32), batch=1)
        y = G.leaf("y", np.zeros((2, 3), np.float32))
        g.store.write(x.val, g.array(np.ones((2, 3), np.float32)))
        with pytest.raises(ShapeError, match="reduces over"):
            compile_code(Code().assign(y.val, Expr(op, (x.val,))), g.array_type).run(g.store)
