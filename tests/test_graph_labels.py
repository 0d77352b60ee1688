"""Labelled leaves (issue 15, section 3): ``G.leaf(name, arr, axes="b, t | d")`` names data
axes with bases, so broadcasting that aligns two different axes is a ShapeError even when their
sizes agree (the blog's ``h - mean`` bug at B == T), ``@`` refuses to contract a named axis
together with others (tokens on the output row), and labels survive every operation, the
blocks, training and checkpoints.  Values are checked against NumPy and torch.autograd in
float64 with tolerances from float32's epsilon; an unlabelled leaf behaves as before."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from arrays import close32
from arrays import host as A
from arrays import normal32 as data
from tensig import ShapeError, SpecSyntaxError
from tensig.core.shapes import Shape
from tensig.model import blocks as B
from tensig.model import graph as G
from tensig.model.train import Trainer, sgd

BACKENDS = ["numpy", "torch"]


#: the blocks' tolerance, allowing chains of 64 operations here
close = functools.partial(close32, chain=64)


# -- the blog's bug ---------------------------------------------------------------------------


def blog(h):
    """The blog's centering with the wrong spec: ``b|0`` drops ``t`` (it means ``b, t|0``)."""
    return h - G.einsum1("b, t|d => b|0", h) * (1 / 64)


@pytest.mark.parametrize("axes", ["b, t | d", "b, t | _"])
def test_the_blogs_bug_is_a_shape_error_naming_both_axes_and_the_operation(axes):
    with G.new_graph(), pytest.raises(ShapeError) as e:
        _ = blog(G.leaf("h", data(16, 16, 64), axes=axes)).shape
    msg = str(e.value)
    assert "'sub'" in msg  # the operation
    assert "batch axis 1 of 'h' (t=16)" in msg  # one axis, its tensor and label
    assert "batch axis 0 of 'mul' (b=16)" in msg  # the other
    assert "t vs b" in msg and e.value.label in ("t", "b")
    assert "rows broadcast from the right" in e.value.hint


def test_a_named_axis_never_fuses_with_unnamed_data_of_the_same_size():
    with G.new_graph(), pytest.raises(ShapeError) as e:
        _ = (G.leaf("h", data(2, 4), axes="b | d") + G.leaf("x", data(2, 4), batch=1)).shape
    assert "labelled b vs no label" in str(e.value) and "label both" in e.value.hint


def test_without_labels_the_same_bug_still_passes_silently():
    """What the labels catch: an unlabelled leaf behaves as before (B aligns with T)."""
    with G.new_graph():
        assert str(blog(G.leaf("h", data(16, 16, 64), batch=2)).shape) == "16,16|64"


@pytest.mark.parametrize("kw", [{"axes": "b, t | d"}, {"batch": 2}])
def test_the_bug_at_different_sizes_is_a_size_mismatch_naming_both_axes(kw):
    with G.new_graph(), pytest.raises(ShapeError) as e:
        _ = blog(G.leaf("h", data(16, 8, 64), **kw)).shape
    msg = str(e.value)
    assert "size mismatch for label 't': 8 vs 16 in 'sub'" in msg
    assert "batch axis 1 of 'h'" in msg and "batch axis 0 of 'mul'" in msg


def test_the_intended_centering_keeps_the_labels_and_the_values():
    x = data(4, 3, 8)
    with G.new_graph():
        h = G.leaf("h", x, axes="b, t | d")
        c = h - G.einsum1("b, t|d => b, t|0", h) * (1 / 8)  # the kept cell stretches onto d
        m = h - B.mean(h)  # the ROW reduction, broadcast back
        assert str(c.shape) == str(m.shape) == "b=4,t=3|d=8"
        want = x - x.mean(-1, keepdims=True)
        close(G.Model(c).run(), want, 8)
        close(G.Model(m).run(), want, 8)


# -- writing the axes -------------------------------------------------------------------------


def test_axes_are_written_in_the_notation():
    assert str(Shape.labelled((2, 3, 4), "b, t | d")) == "b=2,t=3|d=4"
    assert str(Shape.labelled((2, 3, 4), "bt|d")) == "b=2,t=3|d=4"  # single-char mode
    assert str(Shape.labelled((2, 3, 4), "b | _ -> c")) == "b=2|4->c=3"  # memory order
    assert str(Shape.labelled((2, 3), "b, t |")) == "b=2,t=3|"
    assert str(Shape.labelled((5,), "_")) == "5"
    with G.new_graph():
        x = G.leaf("x", data(2, 3, 4), axes="b | _ -> c")
        assert x.shape.row_bases("output") == ("c",) and x.shape.input == (4,)


@pytest.mark.parametrize(("axes", "error", "text"), [
    ("b, t", ShapeError, "name 2 axes, but the array has 3"),
    ("b, t | d, e", ShapeError, "name 4 axes"),
    ("b, b | d", SpecSyntaxError, "the name 'b' is given to two axes"),
    ("b | t -> t", SpecSyntaxError, "the name 't' is given to two axes"),
    ("b, ..x.. | d", SpecSyntaxError, "axis names are names or '_'"),
    ("b, 2 | d", SpecSyntaxError, "axis names are names or '_'"),
    ("b, 2*o<+k | d", SpecSyntaxError, "axis names are names or '_'"),
    ("b; t | d", SpecSyntaxError, "no operands"),
    ("b, t | d ^", SpecSyntaxError, "a concatenation ends with a component"),
])
def test_bad_axes_are_clear_errors(axes, error, text):
    with G.new_graph(), pytest.raises(error, match=text):
        G.leaf("x", data(2, 3, 4), axes=axes)


def test_axes_and_batch_together_are_refused():
    with G.new_graph(), pytest.raises(TypeError, match="either by axes= or by batch="):
        G.leaf("x", data(2, 3), axes="b | d", batch=1)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_batch_names_label_the_batch_axes(backend):
    """``batch=["b", "t"]`` (the issue's other spelling of ``axes=``) names the batch axes
    and leaves the others unnamed: the blog's bug is the same ShapeError, and the intended
    centering runs.  It used to crash with "slice indices must be integers"."""
    with G.new_graph(backend):
        h = G.leaf("h", data(16, 16, 64), batch=["b", "t"])
        assert str(h.shape) == "b=16,t=16|64"
        with pytest.raises(ShapeError, match=r"basis mismatch in 'sub'.*t=16.*b=16"):
            _ = blog(h).shape
    with G.new_graph(backend):  # a new graph: the refused one stays refused
        x = G.leaf("x", data(2, 3, 4, 5), batch=["b"], input=1)
        assert str(x.shape) == "b=2|5->3,4"
        arr = data(2, 3, 4)
        c = G.leaf("c", arr, batch=["b", "t"])
        got = A(G.Model(c - G.einsum1("b, t|d => b, t|0", c) * 0.25).run())
    close32(got, arr - arr.mean(-1, keepdims=True), 4)


@pytest.mark.parametrize("batch", ["bt", [1, 2], ["b", 2]])
def test_batch_names_that_are_not_a_list_of_names_are_refused(batch):
    with G.new_graph(), pytest.raises(TypeError, match="batch= is a number of axes or a list"):
        G.leaf("x", data(2, 3), batch=batch)
    with G.new_graph(), pytest.raises(TypeError, match="either by axes= or by batch="):
        G.leaf("x", data(2, 3), axes="b | d", batch=["b"])


# -- labels survive ---------------------------------------------------------------------------


def test_labels_survive_einsum_arithmetic_and_matmul():
    x = data(2, 3, 4)
    with G.new_graph():
        h = G.leaf("h", x, axes="b, t | d")
        assert str(G.einsum1("b, t|d => t, b|d", h).shape) == "t=3,b=2|d=4"
        assert str((h * 2.0 + 1).relu().shape) == "b=2,t=3|d=4"  # numbers stretch
        w = G.param("w", output=[5])
        y = w @ h
        assert str(y.shape) == "b=2,t=3|5"
        assert str(w.shape) == "d=4->5"  # a parameter's axis takes the label it meets
        bias = G.param("bias", output=[4])
        assert str((h + bias).shape) == "b=2,t=3|d=4"
        assert str(bias.shape) == "d=4"


def test_an_einsum_that_equates_two_names_is_an_error():
    with G.new_graph(), pytest.raises(ShapeError, match="basis mismatch for label 'i': b vs t"):
        x = G.leaf("x", data(4, 4, 3), axes="b, t | d")
        _ = G.einsum1("i, i | d => i | d", x).shape  # a diagonal of b against t


def test_a_written_one_of_data_still_refuses_a_labelled_axis():
    with G.new_graph(), pytest.raises(ShapeError, match="does not stretch onto the labelled"):
        _ = (G.leaf("h", data(2, 4), axes="b | d") + G.ndarray([1.0])).shape


def test_two_labels_never_fuse_through_a_parameter():
    with G.new_graph(), pytest.raises(ShapeError, match="basis mismatch"):
        bias = G.param("bias", output=[4])
        x = G.leaf("x", data(2, 4), axes="b | d") + bias
        _ = (x + G.leaf("y", data(2, 4), axes="b | e")).shape


@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_keeps_labels_and_matches_numpy(backend):
    """The LAST reduction keeps a size-1 cell (a placement) that broadcasts back onto the
    labelled axis it reduced."""
    x = data(3, 5)
    with G.new_graph(backend):
        y = B.softmax(G.leaf("x", x, axes="b | c"))
        assert str(y.shape) == "b=3|c=5"
        out = G.Model(y).run()
        e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
        close(out, e / e.sum(-1, keepdims=True), 5)


def _block(h, r):
    """A pre-norm transformer block (layer norm, causal two-head attention with rotary
    positions, output projection, residual), its output and ``sum(y * r)``."""
    x = B.layer_norm(h)
    wq, wk, wv = (G.param(n, output=[2, 4]) for n in ("wq", "wk", "wv"))
    a = B.multi_head_attention(B.rotary(wq @ x), B.rotary(wk @ x), wv @ x, mask="causal")
    wo = G.param("wo", output=[8])
    y = h + wo @ a
    return y, G.einsum1(B.ALL, y * r), (wq, wk, wv, wo)


def _torch_rotary(x):
    t, e = x.shape[1], x.shape[-1]
    freq = 10000.0 ** (-torch.arange(0, e, 2, dtype=torch.float64) / e)
    ang = torch.outer(torch.arange(t, dtype=torch.float64), torch.cat([freq, freq]))
    x1, x2 = x[..., : e // 2], x[..., e // 2:]
    rot = torch.cat([-x2, x1], -1)
    return x * ang.cos()[None, :, None, :] + rot * ang.sin()[None, :, None, :]


def _torch_block(h, r, wq, wk, wv, wo):
    x = F.layer_norm(h, (h.shape[-1],), eps=1e-5)
    q, k, v = (torch.einsum("hed,btd->bthe", w, x) for w in (wq, wk, wv))
    q, k = _torch_rotary(q), _torch_rotary(k)
    a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                       v.transpose(1, 2), is_causal=True).transpose(1, 2)
    y = h + torch.einsum("ohe,bthe->bto", wo, a)
    return y, (y * r).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_labelled_transformer_block_matches_torch_and_keeps_its_labels(backend):
    h0, r0 = data(2, 6, 8), data(2, 6, 8, seed=1)
    with G.new_graph(backend):
        h = G.leaf("h", h0, axes="b, t | d")
        y, loss, params = _block(h, G.leaf("r", r0, axes="b, t | d"))
        assert str(y.shape) == "b=2,t=6|d=8"
        assert str(params[0].shape) == "d=8->2,4" and str(params[3].shape) == "2,4->d=8"
        G.grad_update(loss).backward()
        ours = [A(y.numpy())] + [A(p.grad.numpy()) for p in params]
        values = [A(p.numpy()) for p in params]
    ws = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in values]
    ref, ref_loss = _torch_block(torch.tensor(h0, dtype=torch.float64),
                                 torch.tensor(r0, dtype=torch.float64), *ws)
    ref_loss.backward()
    for got, want in zip(ours, [ref] + [w.grad for w in ws], strict=True):
        close(got, want, 2 * 6 * 8)


def test_labels_do_not_change_the_values():
    """The same block on an unlabelled leaf gives the same numbers (same parameters: their
    initial values are keyed by name and seed)."""
    h0, r0 = data(2, 5, 8), data(2, 5, 8, seed=1)
    runs = []
    for kw in ({"axes": "b, t | d"}, {"batch": 2}):
        with G.new_graph():
            y, loss, params = _block(G.leaf("h", h0, **kw), G.leaf("r", r0, **kw))
            G.grad_update(loss).backward()
            runs.append([A(y.numpy())] + [A(p.grad.numpy()) for p in params])
    for a, b in zip(*runs, strict=True):
        close(a, b, 2 * 5 * 8)


@pytest.mark.parametrize(("name", "fn"), [
    ("rms_norm", B.rms_norm), ("gelu", B.gelu), ("silu", B.silu),
    ("log_softmax", B.log_softmax), ("mean", lambda x: x - B.mean(x)),
    ("dropout", lambda x: B.dropout(x, 0.5, seed=3)),
    ("max", lambda x: x.max(x * 0.5)),
])
def test_every_block_keeps_the_labels_and_the_values(name, fn):
    """The unlabelled runs are the ones test_blocks checks against torch."""
    x0 = data(3, 4, 6)
    outs = []
    for kw in ({"axes": "b, t | c"}, {"batch": 2}):
        with G.new_graph():
            y = fn(G.leaf("x", x0, **kw))
            outs.append((str(y.shape), A(G.Model(y).run())))
    assert outs[0][0] == "b=3,t=4|c=6" and outs[1][0] == "3,4|6", name
    np.testing.assert_array_equal(outs[0][1], outs[1][1])


def test_cross_entropy_from_labelled_logits_and_ids():
    logits, ids = data(5, 3), np.array([0, 2, 1, 1, 0])
    with G.new_graph():
        loss = B.cross_entropy(G.leaf("z", logits, axes="b | c"), G.leaf("y", ids, axes="b |"))
        got = float(A(G.Model(loss).run()).reshape(-1)[0])
    want = F.cross_entropy(torch.tensor(logits, dtype=torch.float64), torch.tensor(ids))
    close(got, float(want), 3)


# -- tokens on the output row -------------------------------------------------------------------


def test_matmul_refuses_a_labelled_axis_contracted_with_others():
    with G.new_graph(), pytest.raises(ShapeError) as e:
        _ = (G.param("w", output=[5]) @ G.leaf("x", data(2, 3, 4), axes="b | t, d")).shape
    msg = str(e.value)
    assert "'matmul' (@) contracts the labelled axis t=3 of 'x'" in msg
    assert "(t=3, d=4)" in msg and "batch row" in e.value.hint
    with G.new_graph(), pytest.raises(ShapeError, match="labelled axis t=3"):  # t alone named
        _ = (G.param("w", output=[5]) @ G.leaf("x", data(2, 3, 4), axes="b | t, _")).shape


def test_a_dense_layer_over_named_axes_is_an_einsum_and_positions_go_on_the_batch_row():
    with G.new_graph():
        x = G.leaf("x", data(2, 3, 4), axes="b | h, w")
        y = G.einsum("| h, w -> o; b | h, w => b | o", G.param("w", output=[5]), x)
        assert str(y.shape) == "b=2|5"
        z = G.param("v", output=[5]) @ G.leaf("s", data(2, 3, 4), axes="b, t | d")
        assert str(z.shape) == "b=2,t=3|5"
    with G.new_graph():  # unlabelled, as before: @ contracts the whole output row
        x = G.leaf("x", data(2, 3, 4), batch=1)
        assert str((G.param("w", output=[5]) @ x).shape) == "2|5"


# -- training, feeding, checkpoints ---------------------------------------------------------


def _token_model(backend, xs, ys, axes):
    """Next-token prediction from ids: embedding, layer norm, tied logits."""
    kw = {"axes": axes} if axes else {"batch": 2}
    x, y = G.leaf("x", xs[:8], **kw), G.leaf("y", ys[:8], **kw)
    emb = G.param("emb", output=[5], input=[8], init="xavier")
    w = G.param("w", output=[8], input=[8], init="xavier")
    loss = B.cross_entropy(emb @ (w @ B.layer_norm(G.embedding(emb, x))).tanh(), y)
    return x, y, loss, [emb, w]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_labelled_token_model_trains(backend):
    seq = np.arange(64) % 5
    xs, ys = seq[:-1].reshape(-1, 1), seq[1:].reshape(-1, 1)
    with G.new_graph(backend):
        x, y, loss, params = _token_model(backend, xs, ys, "b, t |")
        assert str(G.embedding(params[0], x).shape) == "b=8,t=1|8"
        losses = Trainer(loss, sgd(params, 0.5), {x: xs, y: ys}, shuffle=False).fit(30)
    assert losses[-1] < 0.1 * losses[0]


@pytest.mark.parametrize(("saved", "loaded"), [("b, t | d", None), (None, "b, t | d")])
def test_checkpoints_load_between_labelled_and_unlabelled_models(tmp_path, saved, loaded):
    """The block's parameters take the label ``d`` from labelled data (``d=8->2,4``): a
    checkpoint of either model loads into the other, exactly."""
    from tensig.model.checkpoint import load, save

    h0, r0 = data(2, 5, 8), data(2, 5, 8, seed=1)

    def build(axes):
        kw = {"axes": axes} if axes else {"batch": 2}
        with G.new_graph() as g:
            _, loss, params = _block(G.leaf("h", h0, **kw), G.leaf("r", r0, **kw))
            m = G.Model(loss)
        return g, m, params

    g1, m1, p1 = build(saved)
    assert any(p.shape.row_bases("input") == ("d",) for p in p1) == (saved is not None)
    path = save(g1, tmp_path / "ckpt.safetensors")
    _, m2, p2 = build(loaded)
    for p in p2:  # make the copy differ before loading
        p.graph.store.write(p.val, p.graph.array(np.zeros(p.shape.int_dims, np.float32)))
    load(m2, path)
    for a, b in zip(p1, p2, strict=True):
        np.testing.assert_array_equal(A(a.numpy()), A(b.numpy()))
    np.testing.assert_array_equal(A(m1.run()), A(m2.run()))


def test_a_checkpoint_refuses_a_parameter_whose_label_differs(tmp_path):
    from tensig.model.checkpoint import CheckpointError, load, save

    def build(label):
        with G.new_graph() as g:
            w = G.param("w", output=[2])
            m = G.Model(w @ G.leaf("x", data(3, 4), axes=f"b | {label}"))
        return g, m, w

    _, m1, w1 = build("x")
    assert str(w1.shape) == "x=4->2"
    path = save(m1, tmp_path / "x.safetensors")
    _, m2, _ = build("y")
    with pytest.raises(CheckpointError, match="y=4->2"):
        load(m2, path)


def test_feeding_new_data_to_a_labelled_leaf():
    with G.new_graph():
        h = G.leaf("h", data(2, 3), axes="b | d")
        m = G.Model(h * 2.0)
        new = data(2, 3, seed=4)
        m.set(h, new)
        np.testing.assert_array_equal(A(m.run()), new * 2)
    assert math.isfinite(float(new.sum()))
