"""Projections from the solve: every logic has them, the graph keeps them per operation, and
compiled code lowers them without inferring anything again."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tensig import infer
from tensig.core import inference
from tensig.core.projections import FixedIndex, Iter, logic_layout
from tensig.core.shapes import Shape
from tensig.execution import ir
from tensig.model import graph as G

rng = np.random.default_rng(11)


def _indices(layout):
    """Each axis's index with iterators renamed by first appearance (ids and names are the
    solver's own business)."""
    names: dict[int, int] = {}
    out = []
    for uses in layout:
        row = []
        for u in uses:
            ix = u.index
            row.append(("it", names.setdefault(ix.id, len(names)), int(ix.size))
                       if isinstance(ix, Iter) else ix)
        out.append(row)
    return out


def test_every_logic_has_projections():
    # pointwise: a size-1 axis meeting a wider one is read at 0
    r = infer(".", (8, 1, 4), (3, 1))
    assert _indices(r.layout) == [
        [("it", 0, 8), FixedIndex(0), ("it", 1, 4)],
        [("it", 2, 3), FixedIndex(0)],
        [("it", 0, 8), ("it", 2, 3), ("it", 1, 4)]]
    # compose: the first operand's input row contracts with the second's output row
    r = infer("@", "2->3", "4->2")
    assert _indices(r.layout) == [[("it", 0, 3), ("it", 1, 2)], [("it", 1, 2), ("it", 2, 4)],
                                  [("it", 0, 3), ("it", 2, 4)]]
    # transpose swaps the rows: the result's input is the operand's output
    r = infer("T", "5|2->3")
    assert _indices(r.layout) == [[("it", 0, 5), ("it", 1, 3), ("it", 2, 2)],
                                  [("it", 0, 5), ("it", 2, 2), ("it", 1, 3)]]


def test_a_gradient_under_pointwise_projections_reduces_the_broadcast():
    lay = logic_layout(".", Shape(output=(3,)), [Shape(output=(8, 3))])
    assert _indices(lay) == [[("it", 0, 8), ("it", 1, 3)], [("it", 1, 3)]]


def test_graph_projections_equal_those_of_infer():
    spec = "n, 2*oh<+kh, c; kh, c -> o => n, oh, o"
    x = G.leaf("x", rng.standard_normal((2, 9, 3)).astype(np.float32))
    k = G.param("k", output=[4], input=[3, 3])
    y = G.einsum(spec, x, k)
    y.graph.solve()
    ours = y.graph.shapes.projections(y.node)
    theirs = infer(spec, x.shape, k.shape)
    assert _indices(ours.layout) == _indices(theirs.layout)
    assert ours.shape == theirs.shape == y.shape


def test_a_tensor_against_its_own_copy_iterates_apart():
    """``q`` and its copy share solver variables graph-wide (the copy is pointwise with it),
    so all of q's axes unify; the spec's labels still iterate apart (keyed by the spec's
    names, not by solver roots, which would make ``ij;jk=>ik`` a diagonal)."""
    Q = rng.standard_normal((3, 3))
    q = G.param("q", output=[3], input=[3], init=lambda s, r: Q.astype(np.float32))
    y = G.einsum("i->j; j->k => i->k", q, q)
    G.grad_update(G.einsum1("... => |->0", y)).backward()
    tol = 50 * np.finfo(np.float32).eps
    np.testing.assert_allclose(y.numpy(), (Q.T @ Q.T).T, atol=tol)
    tq = torch.tensor(Q.T, requires_grad=True)
    (tq @ tq).sum().backward()
    np.testing.assert_allclose(q.grad.numpy(), tq.grad.numpy().T, atol=tol)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_compiled_code_infers_nothing(monkeypatch, backend):
    """Forward and backward code of convolution, pooling, concatenation, compose, transpose
    and pointwise operations carry the graph's projections: compiling and running them
    never calls inference (it would raise here)."""
    xs = rng.standard_normal((2, 8, 8, 3)).astype(np.float32)
    with G.new_graph(backend):
        x = G.param("x", output=[2, 8, 8, 3], input=[], init=lambda s, r: xs)
        k = G.param("k", output=[4], input=[3, 3, 3])
        h = G.einsum("n, oh=+kh, ow=+kw, c; kh, kw, c -> o => n, oh, ow, o", x, k)
        p = G.tropical("n, 2*oh<+wh, 2*ow<+ww, c; wh, ww => n, oh, ow, c", h.relu(),
                       G.constant(np.zeros((2, 2), np.float32)))
        c = G.concat("n, a, b, c; n, a, b, d => n, a, b, c^d", p, p * 2.0)
        w = G.param("w", output=[5], input=[4, 4, 8])
        z = (w @ G.einsum1("n, a, b, c => n | a, b, c", c)).T
        loss = G.einsum1("... => |->0", z * z)
        model = G.grad_update(loss)
        model.initialize()

        def refuse(*args, **kwargs):
            raise AssertionError("compiled code inferred a spec again")

        monkeypatch.setattr(inference, "_infer_cached", refuse)
        monkeypatch.setattr(ir, "infer", refuse)
        inference._FAST.clear()
        model.backward()
        assert np.isfinite(np.asarray(loss.numpy())).all()
        assert np.abs(np.asarray(x.grad.numpy())).sum() > 0
