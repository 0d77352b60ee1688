"""The operator table (``tensig.execution.ir.OPERATORS``) is the one declaration of the
einsum-family operators: the eager functions, the graph operations and their gradients, the
lowering and inference's operand check all follow it.  Each operator is checked against the
slow loop interpreter (``tests/reference.py``, which declares the semantics independently) and
its gradient against finite differences of that interpreter.

The data are small integers (and the finite-difference step a quarter), so every sum, product
and maximum here is exact in float32 and float64 in any order: results are compared exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensig.graph as G

import tensig
from reference import ACCUMULATE, reference
from reference import OPS as REFERENCE_OPS
from tensig import Shape
from tensig.core.inference import EINSUM_OPS, count_text
from tensig.execution import eager
from tensig.execution.ir import ACCUMULATORS, OPERATORS, Operator

#: one application per operator: spec and operand shapes (output axes only)
CASES = {
    "einsum": ("ij;jk=>ik", [(2, 3), (3, 4)]),
    "einsum1": ("ij => j", [(2, 3)]),
    "outer_sum": ("i; j => ij", [(2,), (3,)]),
    "tropical": ("2*o<+w; w => o", [(6,), (2,)]),
    "einmax1": ("ij => i", [(2, 3)]),
    "concat": ("a; b => a^b", [(2,), (3,)]),
}


def distinct_integers(shapes, seed=0):
    """Integer-valued float64 arrays, all values distinct (so no maximum is tied)."""
    rng = np.random.default_rng(seed)
    total = sum(int(np.prod(s)) for s in shapes)
    values = rng.permutation(np.arange(-total, total, 2)[:total]).astype(np.float64)
    out, at = [], 0
    for s in shapes:
        n = int(np.prod(s))
        out.append(values[at:at + n].reshape(s))
        at += n
    return out


def by_reference(name, spec, arrays):
    out, _ = reference(spec, arrays, [Shape(output=a.shape) for a in arrays], op=name)
    return out


def graph_value_and_grads(fn, spec, arrays):
    with G.new_graph():
        params = [G.param(f"p{i}", output=list(a.shape), input=[],
                          init=lambda s, r, a=a: a.astype(np.float32))
                  for i, a in enumerate(arrays)]
        y = fn(spec, *params)
        value = G.Model(y).run()
        G.grad_update(G.einsum1("... => |->0", y)).backward()
        return value, [p.grad.numpy() for p in params]


def finite_differences(name, spec, arrays, step=0.25):
    """The gradient of the sum of the interpreter's result, by central differences: exact
    here (each operator is linear in each element away from ties, and no maximum ties)."""
    grads = []
    for i, a in enumerate(arrays):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            hi = [b.copy() for b in arrays]
            lo = [b.copy() for b in arrays]
            hi[i][idx] += step
            lo[i][idx] -= step
            g[idx] = (by_reference(name, spec, hi).sum() -
                      by_reference(name, spec, lo).sum()) / (2 * step)
        grads.append(g)
    return grads


def test_every_operator_has_a_case():
    assert set(CASES) == set(OPERATORS)


def test_the_table_agrees_with_the_independent_oracle():
    # reference.py declares the semantics on its own (a second, deliberately separate source)
    assert set(REFERENCE_OPS) == set(OPERATORS)
    accum_of = {"add": "+", "max": "max"}
    for name, op in OPERATORS.items():
        combine, accumulation, arity = REFERENCE_OPS[name]
        assert op.accum == accum_of[accumulation]
        assert op.neutral == ACCUMULATE[accumulation][0] == ACCUMULATORS[op.accum][1]
        # one operand is read as it is; a phase's operands multiply (concatenation too)
        assert {"id": "mul", "concat": "mul"}.get(op.combine, op.combine) == combine
        assert arity is None or op.operands == (arity, arity)


@pytest.mark.parametrize("name", OPERATORS)
def test_eager_and_graph_follow_the_table(name):
    op = OPERATORS[name]
    spec, shapes = CASES[name]
    arrays = distinct_integers(shapes)
    expected = by_reference(name, spec, arrays)
    np.testing.assert_array_equal(getattr(tensig, name)(spec, *arrays), expected)
    value, grads = graph_value_and_grads(getattr(G, name), spec, arrays)
    np.testing.assert_array_equal(value, expected)
    for got, want in zip(grads, finite_differences(name, spec, arrays), strict=True):
        np.testing.assert_array_equal(got, want)
    # the docstrings are made from the entry
    for fn in (getattr(tensig, name), getattr(G, name)):
        assert fn.__doc__.startswith(f"{op.doc} (OCANNL ``{op.ocannl}``)"), fn.__doc__
    # inference's operand check is the entry's
    assert EINSUM_OPS[name] == op.operands
    lo, hi = op.operands
    for n in ([lo - 1] if lo > 1 else []) + ([hi + 1] if hi is not None else []):
        with pytest.raises(tensig.ShapeError, match=rf"{name} takes {count_text(lo, hi)} "
                                                    rf"operand\(s\), got {n}"):
            tensig.infer(";".join(["i"] * n) + "=>i", *[(2,)] * n, op=name)

def test_a_new_table_entry_is_an_eager_and_a_graph_operation(monkeypatch):
    # one declaration: a max-plus operator under another name, with nothing else written
    # for it, runs eagerly, builds graph nodes with gradients and checks its operand count
    op = Operator("maxplus", "@^+", "add", "max", (2, 2), "Add, max-reduce", ">>> 1\n1")
    monkeypatch.setitem(OPERATORS, "maxplus", op)
    monkeypatch.setitem(EINSUM_OPS, "maxplus", op.operands)
    spec, shapes = CASES["tropical"]
    arrays = distinct_integers(shapes, seed=1)
    expected = by_reference("tropical", spec, arrays)
    run = eager._call("maxplus", spec, arrays, None, None, None)
    np.testing.assert_array_equal(run, expected)
    value, grads = graph_value_and_grads(lambda s, *ts: G._spec_op("maxplus", s, *ts), spec,
                                         arrays)
    np.testing.assert_array_equal(value, expected)
    for got, want in zip(grads, finite_differences("tropical", spec, arrays), strict=True):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(tensig.ShapeError, match="maxplus takes 2 operand"):
        tensig.infer("i=>i", (2,), op="maxplus")
