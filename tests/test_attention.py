"""Attention as one primitive (:func:`tensig.model.blocks.multi_head_attention`): the kernels
(torch's fused CPU kernel, the blocked math of ``Backend`` on NumPy and on torch) against
torch.autograd of the unfused math in float64, and the graph operation's values and
gradients on both backends, causal, masked (a padded batch) and plain."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from arrays import close32, host
from tensig import ShapeError
from tensig.backends import backend_named
from tensig.backends.base import Backend
from tensig.model import blocks as B
from tensig.model import graph as G

EPS64 = float(np.finfo(np.float64).eps)


def unfused(q, k, v, mask, causal, scale):
    """``softmax(q k^T scale + mask) v`` written out in torch (tensig's layout ``(..., T, H,
    E)``), a query that sees no key giving 0; and each seen row's log-sum-exp."""
    qh, kh, vh = (x.transpose(-3, -2) for x in (q, k, v))
    s = qh @ kh.transpose(-1, -2) * scale
    if mask is not None:
        s = s + mask.transpose(-3, -2)
    if causal:
        nq, nk = s.shape[-2:]
        s = s.masked_fill(torch.ones(nq, nk, dtype=torch.bool).triu(1), -math.inf)
    seen = (s > -math.inf).any(-1, keepdim=True)
    p = torch.softmax(s.masked_fill(~seen, 0.0), -1) * seen
    lse = torch.logsumexp(s.masked_fill(~seen, 0.0), -1).masked_fill(~seen[..., 0], 0.0)
    return (p @ vh).transpose(-3, -2), lse.transpose(-1, -2)


def kernel(name):
    """The implementation under test: ``(attention, attention_backward)`` on arrays of its
    library, and the conversion to that library."""
    if name == "torch-math":  # what CUDA tensors (and a torch without the kernel) run
        ours = backend_named("torch")
        return (lambda *a: Backend.attention(ours, *a),
                lambda *a: Backend.attention_backward(ours, *a), ours.asarray)
    ours = backend_named(name)
    return ours.attention, ours.attention_backward, ours.asarray


CASES = {  # q, k, v shapes (tensig's layout)
    "self": ((2, 7, 3, 4), (2, 7, 3, 4), (2, 7, 3, 4)),
    "cross": ((2, 3, 2, 4), (2, 6, 2, 4), (2, 6, 2, 4)),
    "value heads of another size": ((2, 5, 2, 4), (2, 5, 2, 4), (2, 5, 2, 3)),
    "two leading axes": ((2, 3, 5, 2, 4), (2, 3, 5, 2, 4), (2, 3, 5, 2, 4)),
}


@pytest.mark.parametrize("name", ["numpy", "torch", "torch-math"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("masked", [False, True])
def test_the_kernels_against_autograd_of_the_unfused_math(name, causal, case, masked):
    rng = np.random.default_rng(len(case) + causal)
    shapes = CASES[case]
    q, k, v = (rng.standard_normal(s) for s in shapes)
    g = rng.standard_normal(shapes[0][:-1] + shapes[2][-1:])
    mask = None
    if masked:  # a padded batch: each sequence hides its last keys (a `b | k` mask)
        nk = shapes[1][-3]
        mask = np.zeros((2,) + (1,) * (len(shapes[0]) - 2) + (nk,))
        mask[0, ..., nk - 2:] = -np.inf
        mask[1, ..., nk - 1:] = -np.inf
    scale = 1 / math.sqrt(shapes[0][-1])
    forward, backward, a = kernel(name)
    m = None if mask is None else a(mask)
    out, lse = forward(a(q), a(k), a(v), m, causal, scale)
    dq, dk, dv = backward(a(g), a(q), a(k), a(v), out, lse, m, causal, scale)

    ts = [torch.tensor(x, requires_grad=True) for x in (q, k, v)]
    ref, ref_lse = unfused(*ts, None if mask is None else torch.tensor(mask), causal, scale)
    ref.backward(torch.tensor(g))
    tol = 16 * EPS64 * shapes[1][-3] * shapes[0][-1]
    np.testing.assert_allclose(host(out), ref.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(host(lse), ref_lse.detach().numpy(), rtol=tol, atol=tol)
    for got, t in zip((dq, dk, dv), ts, strict=True):
        assert tuple(got.shape) == tuple(t.shape)
        np.testing.assert_allclose(host(got), t.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["numpy", "torch-math"])
@pytest.mark.parametrize("causal", [False, True])
def test_blocks_of_query_rows_give_the_whole_answer(name, causal, monkeypatch):
    """With room for two query rows' scores at a time the math runs in blocks (a causal
    block reading only the keys it sees) and agrees with one block."""
    rng = np.random.default_rng(5)
    q, k, v, g = (rng.standard_normal((2, 9, 3, 4)) for _ in range(4))
    forward, backward, a = kernel(name)
    whole = forward(a(q), a(k), a(v), None, causal, 0.5)
    whole_grads = backward(a(g), a(q), a(k), a(v), *whole, None, causal, 0.5)
    sizes = _block_sizes(monkeypatch)
    adapter = type(backend_named("torch" if name == "torch-math" else name))
    monkeypatch.setattr(adapter, "score_cells", 2 * 2 * 3 * 9)
    parts = forward(a(q), a(k), a(v), None, causal, 0.5)
    grads = backward(a(g), a(q), a(k), a(v), *parts, None, causal, 0.5)
    assert len(sizes) == 2 * 5 and max(sizes) <= 2 * 2 * 3 * 9
    if causal:  # the first block sees two keys
        assert sizes[0] == 2 * 3 * 2 * 2
    for got, want in zip((*parts, *grads), (*whole, *whole_grads), strict=True):
        np.testing.assert_allclose(host(got), host(want), rtol=64 * EPS64, atol=64 * EPS64)


def test_numpy_attention_in_cache_sized_blocks(monkeypatch):
    """On NumPy a block holds at most ``score_cells`` scores (one block of the GPT demo's
    32x4 heads of 64x64 scores ran a third slower), and the blocks give the unfused math's
    results."""
    rng = np.random.default_rng(7)
    q, k, v, g = (rng.standard_normal((32, 64, 4, 16)).astype(np.float32) for _ in range(4))
    ours = backend_named("numpy")
    sizes = _block_sizes(monkeypatch)
    out, lse = ours.attention(q, k, v, None, True, 0.25)
    dq, dk, dv = ours.attention_backward(g, q, k, v, out, lse, None, True, 0.25)
    assert len(sizes) > 2 and max(sizes) <= type(ours).score_cells
    ts = [torch.tensor(x, requires_grad=True) for x in (q, k, v)]
    ref, ref_lse = unfused(*ts, None, True, 0.25)
    ref.backward(torch.tensor(g))
    for got, want in zip((out, lse, dq, dk, dv), (ref, ref_lse, *(t.grad for t in ts)),
                         strict=True):
        close32(got, want.detach().numpy(), 64 * 16)


def _block_sizes(monkeypatch) -> list[int]:
    """The number of scores in each block the attention kernels compute from now on."""
    sizes: list[int] = []
    real = Backend._score_blocks

    def spy(self, *args):
        for rows, s, keys in real(self, *args):
            sizes.append(math.prod(s.shape))
            yield rows, s, keys

    monkeypatch.setattr(Backend, "_score_blocks", spy)
    return sizes


# -- the graph operation ----------------------------------------------------------------------


def graph_attention(backend, arrays, mask=None, causal=False):
    """``multi_head_attention`` of parameters holding ``arrays`` (``b, t, h, e``), its value,
    and the gradients of ``sum(y * R)`` for a fixed random ``R``; ``mask`` a ``b, 1 | k``
    leaf (its size-1 axis stretches over the queries)."""
    with G.new_graph(backend):
        ps = [G.param(f"in{i}", output=list(x.shape), input=[], init=lambda s, r, x=x: x)
              for i, x in enumerate(arrays)]
        q, k, v = (G.einsum1("b, t, h, e => b, t | h, e", p) for p in ps)
        m = "causal" if causal else None
        if mask is not None:
            m = G.leaf("mask", mask[:, None], batch=2)  # b, 1 | k: over queries and heads
        y = B.multi_head_attention(q, k, v, mask=m)
        r = np.random.default_rng(9).standard_normal(y.shape.int_dims).astype(np.float32)
        loss = G.einsum1(B.ALL, y * G.leaf("R", r, batch=2))
        model = G.grad_update(loss)
        model.backward()
        stored = list(model.graph.store.arrays.values())
        return host(y.numpy()), [host(p.grad.numpy()) for p in ps], r, stored


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("how", ["padded", "causal", "none"])
def test_multi_head_attention_against_torch(backend, how):
    """Values and ``q``/``k``/``v`` gradients against torch's ``scaled_dot_product_attention``
    in float64; the padded batch hides the last keys of its shorter sequences."""
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((3, 6, 2, 4)).astype(np.float32) for _ in range(3)]
    mask = None
    if how == "padded":
        mask = np.zeros((3, 6), np.float32)
        mask[0, 4:] = -np.inf
        mask[2, 5:] = -np.inf
    y, grads, r, _ = graph_attention(backend, arrays, mask, causal=how == "causal")
    ts = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in arrays]
    hidden = None if mask is None else torch.tensor(mask, dtype=torch.float64)[:, None, None]
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(t.transpose(1, 2) for t in ts), attn_mask=hidden, is_causal=how == "causal"
    ).transpose(1, 2)
    (ref * torch.tensor(r, dtype=torch.float64)).sum().backward()
    close32(y, ref, 6 * 4)
    for got, t in zip(grads, ts, strict=True):
        close32(got, t.grad, 6 * 4)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_the_scores_are_never_stored(backend):
    """No array the step keeps (values, gradients, records) has the ``q, k`` scores' two
    position axes (11 positions: no other axis is 11)."""
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((2, 11, 3, 4)).astype(np.float32) for _ in range(3)]
    *_, stored = graph_attention(backend, arrays, causal=True)
    flat = [x for a in stored for x in (a if isinstance(a, tuple) else (a,))]
    assert flat and all(tuple(x.shape).count(11) <= 1 for x in flat)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_query_that_sees_no_key_gives_zero(backend):
    """As torch's kernels: a row whose keys are all hidden is 0, with 0 gradients (the
    unfused softmax gave NaN)."""
    arrays = [np.random.default_rng(i).standard_normal((2, 4, 1, 2)).astype(np.float32)
              for i in range(3)]
    mask = np.zeros((2, 4), np.float32)
    mask[1] = -np.inf
    y, grads, *_ = graph_attention(backend, arrays, mask)
    assert np.isfinite(y).all() and np.all(y[1] == 0) and np.any(y[0] != 0)
    assert all(np.isfinite(g).all() and np.all(g[1] == 0) for g in grads)


def test_wrong_masks_and_layouts_are_refused():
    with G.new_graph():
        x = G.leaf("x", np.zeros((2, 5, 2, 4), np.float32), batch=2)  # b, t | h, e
        with pytest.raises(ValueError, match="'causal' or a tensor"):
            B.multi_head_attention(x, x, x, mask="upper")
        with pytest.raises(TypeError, match="'causal' or a tensor"):
            B.multi_head_attention(x, x, x, mask=np.zeros((5, 5)))
        flat = G.leaf("flat", np.zeros((2, 5, 8), np.float32), batch=2)  # b, t | d
        with pytest.raises(ShapeError):
            B.multi_head_attention(flat, flat, flat).shape  # noqa: B018
        big = G.leaf("big", np.zeros((3, 2, 5, 5), np.float32), batch=3)  # more batch axes
        with pytest.raises(ShapeError):
            y = B.multi_head_attention(x, x, x, mask=big)
            G.Model(y).run()
