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
from tolerance import assert_equal_up_to_rounding

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


def _conv_pool_concat_oracle(x, k, w, gates=None):
    """The loss and ``x``'s gradient of the model below, in float64 NumPy by hand: a padded
    3x3 convolution (left pad 1), relu, 2x2 max pooling, ``p^2p`` on channels, a dense layer,
    the sum of squares.  ``gates`` (relu's and the pools' masks) come from a first call; with
    absolute values and those gates it gives the magnitudes of the terms (for the bound)."""
    n, hh, ww, _ = x.shape
    xp = np.pad(x, [(0, 0), (1, 1), (1, 1), (0, 0)])
    h = sum(np.einsum("nhwc,oc->nhwo", xp[:, i:i + hh, j:j + ww], k[:, i, j])
            for i in range(3) for j in range(3))
    windows = h.reshape(n, hh // 2, 2, ww // 2, 2, -1)
    if gates is None:
        relu = h > 0
        r = np.where(relu, windows.reshape(h.shape), 0).reshape(windows.shape)
        pooled = r.max(axis=(2, 4))
        pick = r == pooled[:, :, None, :, None]  # every maximum of a window passes
        gates = relu, pick
    relu, pick = gates
    r = (h * relu).reshape(windows.shape)
    p = (r * pick).max(axis=(2, 4)) if x.min() >= 0 else r.max(axis=(2, 4))
    c = np.concatenate([p, 2 * p], axis=-1)
    z = np.einsum("oabc,nabc->no", w, c)
    dc = np.einsum("no,oabc->nabc", 2 * z, w)
    dp = dc[..., :p.shape[-1]] + 2 * dc[..., p.shape[-1]:]
    dh = (pick * dp[:, :, None, :, None]).reshape(h.shape) * relu
    dxp = np.zeros_like(xp)
    for i in range(3):
        for j in range(3):
            dxp[:, i:i + hh, j:j + ww] += np.einsum("nhwo,oc->nhwc", dh, k[:, i, j])
    return (z * z).sum(), dxp[:, 1:-1, 1:-1], gates


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_compiled_code_infers_nothing(monkeypatch, backend):
    """Forward and backward code of convolution, pooling, concatenation, compose, transpose
    and pointwise operations carry the graph's projections: compiling and running them
    never calls inference (the guard is the cache every ``infer`` call goes through; it
    would raise here), and what they compute is the NumPy oracle's loss and gradient."""
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
        got_loss, got_dx = (np.asarray(t.numpy(), np.float64) for t in (loss, x.grad))
        ks, ws = (np.asarray(t.numpy(), np.float64) for t in (k, w))
    want_loss, want_dx, gates = _conv_pool_concat_oracle(xs.astype(np.float64), ks, ws)
    mag_loss, mag_dx, _ = _conv_pool_concat_oracle(np.abs(xs.astype(np.float64)), np.abs(ks),
                                                   np.abs(ws), gates)
    # the longest chain of sums: the convolution's 27 terms, the dense layer's 128, the
    # loss's 10 (forward), and back through them
    length = 2 * (27 + 128 + 10)
    assert_equal_up_to_rounding(got_loss.reshape(()), want_loss, dtype=np.float32,
                                length=length, magnitude=mag_loss)
    assert_equal_up_to_rounding(got_dx, want_dx, dtype=np.float32, length=length,
                                magnitude=mag_dx)
    assert np.abs(want_dx).max() > 0  # the oracle is not vacuous
