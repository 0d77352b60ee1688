"""The blocks (:mod:`tensig.blocks`) and integer data (embedding, one-hot): every block's
value and gradients against torch.autograd in float64, on both backends, within tolerances
derived from float32's epsilon and the length of the block's reductions."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from arrays import close32 as close
from arrays import host as A
from arrays import normal32 as data
from tensig import ShapeError
from tensig.model import blocks as B
from tensig.model import graph as G
from tensig.model.train import Trainer, sgd

BACKENDS = ["numpy", "torch"]
EPS = float(np.finfo(np.float32).eps)


def input_(name, arr, spec):
    """A differentiable input: a parameter holding ``arr`` (output axes), its axes moved into
    rows by ``spec`` (``"b, d => b | d"``)."""
    p = G.param(name, output=list(arr.shape), input=[], init=lambda s, r, a=arr: a)
    return p, G.einsum1(spec, p)


def weighted_loss(y, seed=9):
    """``sum(y * R)`` for a fixed random ``R``: every output cell gets its own gradient (a
    plain sum would give softmax a zero gradient)."""
    r = data(*y.shape.int_dims, seed=seed)
    w = G.leaf("R", r, batch=len(y.shape.batch), input=len(y.shape.input))
    return G.einsum1(B.ALL, y * w), r


def torch_inputs(*arrays):
    return [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]


def check(backend, build, torch_fn, arrays, specs, n, chain=32):
    """``build(*inputs)`` against ``torch_fn(*tensors)``: the value and each input's
    gradient of ``sum(y * R)``."""
    with G.new_graph(backend):
        pairs = [input_(f"in{i}", a, s) for i, (a, s) in enumerate(zip(arrays, specs,
                                                                         strict=True))]
        y = build(*(x for _, x in pairs))
        loss, r = weighted_loss(y)
        m = G.grad_update(loss)
        m.backward()
        ours = A(y.numpy())
        grads = [A(p.grad.numpy()) for p, _ in pairs]
    ts = torch_inputs(*arrays)
    ref = torch_fn(*ts)
    (ref * torch.tensor(r, dtype=torch.float64)).sum().backward()
    close(ours, ref, n, chain)
    for g, t in zip(grads, ts, strict=True):
        close(g, t.grad, n, chain)


# -- softmax, log-softmax, cross-entropy ----------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_and_log_softmax_against_torch(backend):
    x = data(4, 7) * 3
    check(backend, B.softmax, lambda t: torch.softmax(t, -1), [x], ["b, v => b | v"], 7)
    check(backend, B.log_softmax, lambda t: torch.log_softmax(t, -1), [x], ["b, v => b | v"],
          7)


@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_over_a_row_variable_and_over_the_last_axis_only(backend):
    x = data(3, 4, 5)
    # the whole output row (two axes) as one distribution
    check(backend, lambda t: B.softmax(t, B.ROW),
          lambda t: torch.softmax(t.reshape(3, 20), -1).reshape(3, 4, 5), [x],
          ["b, i, j => b | i, j"], 20)
    # the last output axis only: never mixed up with the other output axis (4 != 5 here,
    # and the default spec keeps it as a size-1 axis that lines up with the right one)
    check(backend, B.softmax, lambda t: torch.softmax(t, -1), [x], ["b, i, j => b | i, j"], 5)


def test_softmax_max_row_is_detached_and_huge_logits_stay_finite():
    with G.new_graph():
        x = G.leaf("x", np.array([[1000.0, 0.0, -1000.0]], np.float32), batch=1)
        p = G.Model(B.softmax(x)).run()
        lp = G.Model(B.log_softmax(x)).run()
    np.testing.assert_allclose(p, [[1.0, 0.0, 0.0]])
    assert np.isfinite(lp).all() and lp[0, 0] == 0.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_cross_entropy_with_class_ids_and_ignore_index(backend):
    logits = data(6, 5) * 2
    targets = np.array([1, 4, -100, 0, 4, -100])
    with G.new_graph(backend):
        p, z = input_("z", logits, "b, v => b | v")
        t = G.leaf("t", targets, batch=1)
        loss = B.cross_entropy(z, t)
        m = G.grad_update(loss)
        m.backward()
        ours, grad = A(loss.numpy()), A(p.grad.numpy())
    (zt,) = torch_inputs(logits)
    ref = F.cross_entropy(zt, torch.tensor(targets), ignore_index=-100)
    ref.backward()
    close(ours, ref.reshape(1), 5)
    close(grad, zt.grad, 5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cross_entropy_with_probabilities(backend):
    logits = data(4, 6)
    probs = np.random.default_rng(1).dirichlet(np.ones(6), 4).astype(np.float32)
    with G.new_graph(backend):
        p, z = input_("z", logits, "b, v => b | v")
        t = G.leaf("t", probs, batch=1)
        loss = B.cross_entropy(z, t)
        m = G.grad_update(loss)
        m.backward()
        ours, grad = A(loss.numpy()), A(p.grad.numpy())
    (zt,) = torch_inputs(logits)
    ref = F.cross_entropy(zt, torch.tensor(probs, dtype=torch.float64))
    ref.backward()
    close(ours, ref.reshape(1), 6)
    close(grad, zt.grad, 6)


@pytest.mark.parametrize("backend", [*BACKENDS, "jax", "dask"])
def test_cross_entropy_over_positions_with_an_ignore_index_among_the_classes(backend):
    """Ids on the batch row's positions (``b, t |``, as the GPT's), the ignored id one of the
    classes (2: its rows count for nothing, as torch's), one primitive pair on every
    backend (torch's kernels, the generic ones on NumPy, JAX and Dask)."""
    if backend in ("jax", "dask"):
        pytest.importorskip(backend)
    logits = data(3, 4, 7) * 2
    ids = np.array([[1, 2, 0, 6], [2, 2, 4, 5], [3, 2, 0, 1]])
    with G.new_graph(backend):
        p, z = input_("z", logits, "b, t, v => b, t | v")
        loss = B.cross_entropy(z, G.leaf("ids", ids, batch=2), ignore_index=2)
        G.grad_update(loss).backward()
        ours, grad = A(loss.numpy()), A(p.grad.numpy())
    (zt,) = torch_inputs(logits)
    ref = F.cross_entropy(zt.reshape(-1, 7), torch.tensor(ids).reshape(-1), ignore_index=2)
    ref.backward()
    close(ours, ref.reshape(1), 7)
    close(grad, zt.grad, 7)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # NaN as torch gives it: no 0/0 warning
@pytest.mark.parametrize("backend", BACKENDS)
def test_cross_entropy_with_every_id_ignored_is_nan_with_no_gradient(backend):
    with G.new_graph(backend):
        p, z = input_("z", data(3, 5), "b, v => b | v")
        loss = B.cross_entropy(z, G.leaf("t", np.full(3, -100), batch=1))
        G.grad_update(loss).backward()
        assert np.isnan(A(loss.numpy())).all()
        np.testing.assert_array_equal(A(p.grad.numpy()), np.zeros((3, 5), np.float32))


def test_cross_entropy_generic_kernel_on_torch_equals_torch_kernels():
    """The torch adapter's cross-entropy off the CPU is the generic kernel on torch's
    namespace: checked here on the CPU against the adapter's own (torch's ``nll_loss``)."""
    from tensig.backends.kernels import Kernels
    from tensig.backends.torch import TorchBackend

    be = TorchBackend()
    z = torch.tensor(data(2, 3, 6) * 3)
    ids = torch.tensor([[0, 5, -100], [5, 1, 1]])
    g = torch.tensor([0.7])
    loss, *saved = be.cross_entropy(z, ids, -100)
    want = be.cross_entropy_backward(g, *saved[:1], ids, saved[1], -100).reshape(z.shape)
    gloss, glogp, gcount = Kernels.cross_entropy(be, z, ids, -100)
    close(gloss.reshape(1), loss.reshape(1), 6)
    close(Kernels.cross_entropy_backward(be, g, glogp, ids, gcount, -100), want, 6)


def test_cross_entropy_ids_out_of_range_are_an_error():
    with G.new_graph():
        z = G.leaf("z", data(2, 3), batch=1)
        t = G.leaf("t", np.array([0, 3]), batch=1)
        with pytest.raises(IndexError, match=r"id 3 is outside 0\.\.2"):
            G.Model(B.cross_entropy(z, t)).run()


# -- normalisation ------------------------------------------------------------------------


def _norm_case(backend, block, ref, x, spec, name):
    with G.new_graph(backend) as g:
        p, h = input_("x", x, spec)
        y = block(h)
        loss, r = weighted_loss(y)
        G.grad_update(loss).backward()
        params = {t.name: t for t in g.tensors if t.kind == "param" and t.name != "x"}
        ours = A(y.numpy())
        grads = {k: A(t.grad.numpy()) for k, t in params.items()}
        gx = A(p.grad.numpy())
        shapes = {k: t.shape for k, t in params.items()}
    (xt,) = torch_inputs(x)
    d = x.shape[1:]
    scale = torch.ones(d, dtype=torch.float64, requires_grad=True)
    shift = torch.zeros(d, dtype=torch.float64, requires_grad=True)
    out = ref(xt, scale, shift)
    (out * torch.tensor(r, dtype=torch.float64)).sum().backward()
    n = math.prod(d)
    close(ours, out, n)
    close(gx, xt.grad, n, chain=64)
    close(grads[f"{name}.scale"], scale.grad, x.shape[0] * n)
    assert shapes[f"{name}.scale"] == G.Shape(output=d)  # sized by use: the normalised axes
    if f"{name}.shift" in grads:
        close(grads[f"{name}.shift"], shift.grad, x.shape[0])
    return shapes


@pytest.mark.parametrize("backend", BACKENDS)
def test_layer_norm_over_the_output_row(backend):
    x = data(5, 3, 4) * 2 + 1
    _norm_case(backend, B.layer_norm,
               lambda t, w, b: F.layer_norm(t, (3, 4), w, b, eps=1e-5),
               x, "b, i, j => b | i, j", "layer_norm")


@pytest.mark.parametrize("backend", BACKENDS)
def test_layer_norm_with_a_learned_scale_and_shift_against_torch(backend):
    """Scale and shift away from ones and zeros (the kernel applies them, forward and back):
    the value and all three gradients against torch autograd."""
    x, scale, shift = data(5, 3, 4) * 2 + 1, data(3, 4) + 1, data(3, 4)
    with G.new_graph(backend) as g:
        p, h = input_("x", x, "b, i, j => b | i, j")
        y = B.layer_norm(h, name="ln")
        loss, r = weighted_loss(y)
        model = G.grad_update(loss)
        learned = {t.name: t for t in g.tensors if t.kind == "param" and t.name != "x"}
        model.set(learned["ln.scale"], scale)
        model.set(learned["ln.shift"], shift)
        model.backward()
        ours = [A(t.numpy()) for t in (y, p.grad, learned["ln.scale"].grad,
                                       learned["ln.shift"].grad)]
    xt, st, bt = torch_inputs(x, scale, shift)
    out = F.layer_norm(xt, (3, 4), st, bt, eps=1e-5)
    (out * torch.tensor(r, dtype=torch.float64)).sum().backward()
    for got, want, n in zip(ours, (out, xt.grad, st.grad, bt.grad), (12, 12, 60, 5),
                            strict=True):
        close(got, want, n, chain=64)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rms_norm_over_the_output_row(backend):
    x = data(5, 6) * 2 + 1
    _norm_case(backend, B.rms_norm,
               lambda t, w, b: t * torch.rsqrt((t * t).mean(-1, keepdim=True) + 1e-6) * w,
               x, "b, d => b | d", "rms_norm")


def test_rms_norm_scale_and_shift_operations_carry_its_name():
    """The learned product and sum are made inside the norm's scope, in use order."""
    with G.new_graph() as g:
        B.rms_norm(G.leaf("x", np.ones((2, 3), np.float32), batch=1), shift=True)
    assert [t.name for t in g.tensors][-4:] == ["rms_norm.scale", "rms_norm.mul",
                                                "rms_norm.shift", "rms_norm.add"]


def test_a_mean_divides_by_the_solved_size_not_a_written_one():
    """``w``'s output size is decided by a use that comes after the mean is built."""
    with G.new_graph():
        x = G.leaf("x", np.ones((2, 3), np.float32), batch=1)
        w = G.param("w", init=lambda s, r: np.ones(s, np.float32))  # 3 -> ?
        h = w @ x
        mu = B.mean(h)
        _ = h * G.leaf("target", np.ones((2, 7), np.float32), batch=1)  # sizes w: 3 -> 7
        got = G.Model(mu).run()
    np.testing.assert_allclose(got, np.full((2,), 3.0))  # each of the 7 cells is 3


# -- batch normalisation -------------------------------------------------------------------


def _bn_buffers(g, name="batch_norm"):
    """The running mean and variance of a batch norm, and its scale and shift."""
    by = {t.name: t for t in g.tensors}
    return [by[f"{name}.{k}"] for k in ("running_mean", "running_var", "scale", "shift")]


def _batch_norm_case(backend, x, layout, torch_bn, to_torch, steps=3, channels=None,
                     from_torch=None, **kw):
    """``steps`` training runs of ``batch_norm`` on the same input (the running statistics
    move each time), then one in eval mode, against ``torch_bn`` in float64: values, the
    gradients of ``sum(y * R)`` (input, scale, shift) and the running statistics after each.
    ``layout`` moves ``x``'s axes into rows (``input_``); ``to_torch`` moves an array of
    ours into torch's layout, ``from_torch`` back (by default: ours is channels last);
    ``channels`` is the channel axes' shape (by default ``x``'s last axis).  The scale and
    shift start random so that their gradients and their use are both seen."""
    channels = channels or x.shape[-1:]
    c = math.prod(channels)
    n = x.size // c  # values per channel: the statistics' reduction length
    scale0, shift0 = (v.reshape(channels) for v in (data(c, seed=3) + 1.5, data(c, seed=4)))
    ours = []
    with G.new_graph(backend) as g:
        p, h = input_("x", x, layout)
        y = B.batch_norm(h, **kw)
        loss, r = weighted_loss(y)
        m = G.grad_update(loss)
        rmean, rvar, scale, shift = _bn_buffers(g)
        g.store.write(scale.val, g.array(scale0))
        g.store.write(shift.val, g.array(shift0))
        for mode in [True] * steps + [False]:
            g.train(mode)
            m.backward()
            ours.append([A(t.numpy()).copy() for t in (y, p.grad, scale.grad, shift.grad,
                                                        rmean, rvar)])
    bn = torch_bn(c, **{k: v for k, v in kw.items() if k in ("eps", "momentum")}).double()
    with torch.no_grad():
        bn.weight.copy_(torch.tensor(scale0.reshape(-1)))
        bn.bias.copy_(torch.tensor(shift0.reshape(-1)))
    rt = to_torch(torch.tensor(r, dtype=torch.float64))
    for mode, got in zip([True] * steps + [False], ours, strict=True):
        bn.train(mode)
        bn.zero_grad()
        (xt,) = torch_inputs(x)
        out = bn(to_torch(xt))
        (out * rt).sum().backward()
        want = [out, xt.grad, bn.weight.grad, bn.bias.grad, bn.running_mean, bn.running_var]
        close(got[0], (from_torch or (lambda t: _from_torch(t, x.shape)))(out), 1)
        close(got[1], want[1], n, chain=64)
        for g_, w in zip(got[2:], want[2:], strict=True):
            close(g_.reshape(-1), w.detach(), n)


def _from_torch(t, shape):
    """torch's channels-first layout back to ours (channels last)."""
    return t.movedim(1, -1).reshape(shape)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_2d_against_torch(backend):
    x = data(4, 5, 3, 6) * 2 + 1  # b, h, w, c
    _batch_norm_case(backend, x, "b, i, j, c => b | i, j, c", torch.nn.BatchNorm2d,
                     lambda t: t.movedim(-1, 1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_1d_against_torch(backend):
    x = data(8, 5) * 3 - 2  # b | c
    _batch_norm_case(backend, x, "b, c => b | c", torch.nn.BatchNorm1d, lambda t: t,
                     momentum=0.3, eps=1e-3)
    # a sequence (on the batch row): b, t | c is torch's (b, c, t)
    x = data(3, 7, 4)
    _batch_norm_case(backend, x, "b, t, c => b, t | c", torch.nn.BatchNorm1d,
                     lambda t: t.movedim(-1, 1), steps=2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_channels_first_and_channels_of_two_axes(backend):
    """Channels that are not the trailing memory axes (the kernel reads a transposed copy)
    and channels of two axes (one statistic per pair), against torch."""
    x = data(4, 6, 3, 5) * 2 - 1  # b | c, h, w: torch's own layout
    _batch_norm_case(backend, x, "b, c, i, j => b | c, i, j", torch.nn.BatchNorm2d,
                     lambda t: t, channels=(6,), from_torch=lambda t: t,
                     spec="..b..|c, ..s.. => |c")
    x = data(6, 3, 4) + 0.5  # b | i, c: torch's BatchNorm1d over the 12 pairs
    _batch_norm_case(backend, x, "b, i, c => b | i, c", torch.nn.BatchNorm1d,
                     lambda t: t.reshape(6, 12), channels=(3, 4),
                     from_torch=lambda t: t.reshape(6, 3, 4), spec="..b..|i, c => |i, c")


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_without_affine_in_eval_mode(backend):
    """Running statistics without a scale and shift: the eval-mode value and input gradient
    use the running ones (torch's BatchNorm1d(affine=False))."""
    x = data(8, 5) * 3 + 1
    with G.new_graph(backend) as g:
        p, h = input_("x", x, "b, c => b | c")
        y = B.batch_norm(h, affine=False)
        loss, r = weighted_loss(y)
        m = G.grad_update(loss)
        m.backward()  # training: moves the running statistics once
        g.eval()
        m.backward()
        got = [A(t.numpy()).copy() for t in (y, p.grad)]
    bn = torch.nn.BatchNorm1d(5, affine=False).double()
    bn(torch.tensor(x, dtype=torch.float64))
    bn.eval()
    (xt,) = torch_inputs(x)
    out = bn(xt)
    (out * torch.tensor(r, dtype=torch.float64)).sum().backward()
    close(got[0], out, 8)
    close(got[1], xt.grad, 8)


def test_batch_norm_refuses_a_spec_that_reads_an_axis_twice_or_at_a_fixed_index():
    for spec in ("b|c, c => |c", "b|c, 0 => |c"):
        with G.new_graph():
            x = G.leaf("x", data(4, 3, 3), batch=1)
            y = B.batch_norm(x, spec, name="bn")
            with pytest.raises(ShapeError, match=r"'bn'.*keep some of .*channels"):
                G.Model(y).run()


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_running_statistics_follow_torch_through_training(backend):
    """A linear layer, batch norm, relu and a linear layer trained by SGD on shuffled batches:
    after 12 steps the running statistics and the parameters are torch's (the batch
    statistics of each step feed the running ones, so a wrong momentum, a biased running
    variance or an update out of step would show)."""
    rng = np.random.default_rng(5)
    xs = rng.standard_normal((48, 3)).astype(np.float32)
    ys = rng.integers(0, 2, 48)
    w1 = rng.standard_normal((6, 3)).astype(np.float32)
    w2 = rng.standard_normal((2, 6)).astype(np.float32)
    with G.new_graph(backend) as g:
        x, y = G.leaf("x", xs[:8], batch=1), G.leaf("y", ys[:8], batch=1)
        a = G.param("w1", output=[6], input=[3], init=lambda s, r: w1)
        b = G.param("w2", output=[2], input=[6], init=lambda s, r: w2)
        loss = B.cross_entropy(b @ B.batch_norm(a @ x).relu(), y)
        params = [a, b, *_bn_buffers(g)[2:]]
        trainer = Trainer(loss, sgd(params, 0.1, momentum=0.9), {x: xs, y: ys}, seed=2)
        trainer.fit(2)  # 12 steps
        rows = [trainer.rows_of(i) for i in range(12)]
        ours = [A(t.numpy()) for t in (*_bn_buffers(g)[:2], a, b)]
    ta, tb = (torch.tensor(w, dtype=torch.float64, requires_grad=True) for w in (w1, w2))
    bn = torch.nn.BatchNorm1d(6).double()
    opt = torch.optim.SGD([ta, tb, *bn.parameters()], 0.1, momentum=0.9)
    for r in rows:
        opt.zero_grad()
        logits = torch.relu(bn(torch.tensor(xs[r], dtype=torch.float64) @ ta.T)) @ tb.T
        F.cross_entropy(logits, torch.tensor(ys[r])).backward()
        opt.step()
    # 12 steps of float32 against float64: rounding compounds through the updates
    for got, want in zip(ours, [bn.running_mean, bn.running_var, ta, tb], strict=True):
        np.testing.assert_allclose(got, A(want), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_without_running_statistics_or_affine(backend):
    x = data(6, 4) * 2 + 1
    check(backend, lambda h: B.batch_norm(h, track_running_stats=False, affine=False),
          lambda t: F.batch_norm(t, None, None, training=True), [x], ["b, c => b | c"], 6,
          chain=64)
    with G.new_graph() as g:
        h = G.leaf("x", x, batch=1)
        y = B.batch_norm(h, affine=False, track_running_stats=False)
        assert not [t for t in g.tensors if t.kind in ("param", "buffer")]
        g.eval()  # no running statistics: the batch's in either mode
        want = (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5)
        np.testing.assert_allclose(G.Model(y).run(), want, rtol=64 * EPS * 6, atol=64 * EPS)


def test_batch_norm_refuses_one_value_per_channel_and_a_bad_momentum():
    with G.new_graph():
        x = G.leaf("x", data(1, 4), batch=1)
        y = B.batch_norm(x, name="bn")
        with pytest.raises(ValueError, match="batch_norm 'bn': one value per channel"):
            G.Model(y)
        with pytest.raises(ValueError, match=r"momentum is a number in \[0, 1\]"):
            B.batch_norm(x, momentum=1.5)


def test_a_refused_step_leaves_the_running_statistics_and_the_counter_as_they_were(
        monkeypatch):
    """A batch with a NaN is refused (``on_nonfinite="warn"``) after its forward pass moved
    the buffers: the trainer puts them back, so the skipped batch leaves no trace; so does
    a step interrupted (Ctrl-C) before its update."""
    xs = data(24, 3)
    xs[8] = np.nan  # the second batch
    ys = np.zeros(24, np.int64)
    with G.new_graph() as g:
        x, y = G.leaf("x", xs[:8], batch=1), G.leaf("y", ys[:8], batch=1)
        w = G.param("w", output=[2], input=[3])
        h = B.dropout(B.batch_norm(w @ x, name="bn"), 0.5)
        loss = B.cross_entropy(h, y)
        trainer = Trainer(loss, sgd([w], 0.1), {x: xs, y: ys}, shuffle=False,
                          on_nonfinite="warn")
        buffers = [t for t in g.tensors if t.kind == "buffer"]
        assert {t.name for t in buffers} == {"bn.running_mean", "bn.running_var",
                                             "dropout.counter"}
        trainer.step(np.arange(8))
        before = [A(t.numpy()).copy() for t in buffers]
        with pytest.warns(RuntimeWarning, match="update was skipped"):
            trainer.step(np.arange(8, 16))
        for t, v in zip(buffers, before, strict=True):
            np.testing.assert_array_equal(A(t.numpy()), v, err_msg=t.name)
        run = trainer._gradients.run

        def interrupted(store):
            run(store)
            raise KeyboardInterrupt

        monkeypatch.setattr(trainer._gradients, "run", interrupted)
        with pytest.raises(KeyboardInterrupt):
            trainer.step(np.arange(16, 24))
        for t, v in zip(buffers, before, strict=True):
            np.testing.assert_array_equal(A(t.numpy()), v, err_msg=t.name)
        monkeypatch.undo()
        trainer.step(np.arange(16, 24))
        assert A(buffers[-1].numpy())[0] == 2  # two masks drawn by steps that counted


def test_batch_norm_parameters_and_buffers_are_per_channel():
    with G.new_graph() as g:
        x = G.leaf("x", data(4, 5, 5, 3), batch=1)
        y = B.batch_norm(B.batch_norm(x, name="bn1").relu(), name="bn2")
        G.Model(y)
        kinds = {t.name: (t.kind, t.shape) for t in g.tensors if t.kind in ("param", "buffer")}
    per_channel = G.Shape(output=(3,))
    assert kinds == {f"{n}.{k}": (kind, per_channel) for n in ("bn1", "bn2")
                     for k, kind in (("running_mean", "buffer"), ("running_var", "buffer"),
                                     ("scale", "param"), ("shift", "param"))}


# -- activations ----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_gelu_and_silu_against_torch(backend):
    x = data(4, 9) * 3
    x[0, :3] = [-40.0, 40.0, 0.0]  # the tails: no overflow in value or gradient
    spec = ["b, d => b | d"]
    check(backend, B.gelu, lambda t: F.gelu(t, approximate="tanh"), [x], spec, 1)
    check(backend, B.silu, F.silu, [x], spec, 1)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gelu_in_sigmoid_form_is_torchs_tanh_gelu(backend, dtype):
    """The adapter's GELU (``v sigmoid(2z)``: torch's on the CPU, NumPy's) against the
    function in float64 (which is torch's tanh form to 1e-12 where that form has not rounded
    to 0 yet): within a few units of ``dtype``'s rounding, times the growth of the tail's
    relative error with ``|2z|`` (any evaluation of ``2z`` carries it), or ``|v|`` times the
    smallest normal number where the sigmoid flushes to 0; the same non-finite cells as
    torch's."""
    from tensig.backends import backend_named

    x = torch.tensor(np.concatenate([data(4000) * 4, [0.0, -0.0, 1e-30, -9.0, -40.0, 40.0,
                                                       -1e20, 1e20, np.inf, -np.inf, np.nan]]),
                     dtype=dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # v^3 of +-1e20 in float32, inf - inf
        ours = torch.as_tensor(A(backend_named(backend).gelu(x if backend == "torch"
                                                             else x.numpy())))
    theirs = F.gelu(x, approximate="tanh")
    v = x.double()
    w = 2 * math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)
    want = v * torch.sigmoid(w)
    finite = torch.isfinite(want)
    assert (F.gelu(v, approximate="tanh") - want)[finite].abs().max() < 1e-12
    eps, tiny = torch.finfo(dtype).eps, torch.finfo(dtype).tiny
    bound = 8 * eps * want.abs() * (1 + w.abs()) + tiny * (1 + v.abs())  # s below tiny: 0
    assert ((ours.double() - want).abs() <= bound)[finite].all()
    torch.testing.assert_close(ours[~finite], theirs[~finite], rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_and_min_as_functions_and_methods(backend):
    a, b = data(3, 4), data(3, 4, seed=1)
    spec = ["i, j => i | j"] * 2
    check(backend, G.maximum, torch.maximum, [a, b], spec, 1)
    check(backend, lambda x, y: x.min(y), torch.minimum, [a, b], spec, 1)
    with G.new_graph():
        x = G.leaf("x", np.array([0.0, 1.0, 1.0], np.float32))
        y = G.leaf("y", np.array([0.0, 0.0, 1.0], np.float32))
        np.testing.assert_array_equal(G.Model(x & y).run(), [0, 0, 1])
        np.testing.assert_array_equal(G.Model(x | y).run(), [0, 1, 1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_mod_and_or_as_functions_methods_and_operators_in_the_data_dtype(backend):
    """``G.mod`` / ``a.mod(b)`` / ``a % b`` are C's ``fmod`` (OCANNL's ``mod``: the sign of
    ``a``), ``G.logical_and`` / ``a & b`` and ``G.logical_or`` / ``a | b`` give 1 / 0; all in
    the operands' dtype on both backends (NumPy's ``bool * 1.0`` used to make a float32
    graph's comparisons float64), integers staying integers as the graph marks them."""
    fa = np.array([5.5, -6.0, 7.0, 0.0], np.float32)
    fb = np.array([2.0, 4.0, 0.5, -3.0], np.float32)
    ia, ib = np.array([5, -6, 7, 0]), np.array([2, 4, -3, 3])
    with G.new_graph(backend):
        x, y = G.leaf("x", fa), G.leaf("y", fb)
        i, j = G.leaf("i", ia), G.leaf("j", ib)
        cases = {
            "mod": ([G.mod(x, y), x.mod(y), x % y], np.fmod(fa, fb)),
            "and": ([G.logical_and(x, y), x & y], np.logical_and(fa, fb)),
            "or": ([G.logical_or(x, y), x | y], np.logical_or(fa, fb)),
            "lt": ([x < y], fa < fb),
            "imod": ([G.mod(i, j), i.mod(j), i % j], np.fmod(ia, ib)),
            "iand": ([G.logical_and(i, j), i & j], np.logical_and(ia, ib)),
            "ior": ([G.logical_or(i, j)], np.logical_or(ia, ib)),
        }
        for name, (ts, want) in cases.items():
            integer = name.startswith("i")
            for t in ts:
                got = A(G.Model(t).run())
                assert t.integer == integer, name
                assert got.dtype == (ia.dtype if integer else np.float32), (name, got.dtype)
                np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=name)


# -- dropout -------------------------------------------------------------------------------


def _dropout_runs(backend, runs, seed=0, p=0.25, train=True):
    x = data(8, 50) + 5  # no zeros of its own
    with G.new_graph(backend) as g:
        p_, h = input_("x", x, "b, d => b | d")
        y = B.dropout(h, p, seed=seed)
        loss, r = weighted_loss(y)
        m = G.grad_update(loss)
        g.train(train)
        out = []
        for _ in range(runs):
            m.backward()
            out.append((A(y.numpy()).copy(), A(p_.grad.numpy()).copy()))
    return x, r, out


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_masks_scales_and_redraws_every_step(backend):
    x, r, runs = _dropout_runs(backend, 3)
    for y, g in runs:
        kept = y != 0
        np.testing.assert_allclose(y[kept], x[kept] / 0.75, rtol=4 * EPS)
        np.testing.assert_allclose(g, np.where(kept, r / 0.75, 0.0), rtol=4 * EPS)
        assert 0.15 < 1 - kept.mean() < 0.35  # 400 cells at p = 0.25
    assert not np.array_equal(runs[0][0] != 0, runs[1][0] != 0)  # a fresh mask each step


def test_dropout_is_repeatable_from_its_seed_and_the_same_on_both_backends():
    _, _, a = _dropout_runs("numpy", 2)
    _, _, b = _dropout_runs("numpy", 2)
    _, _, c = _dropout_runs("torch", 2)
    _, _, d = _dropout_runs("numpy", 2, seed=1)
    for i in range(2):
        np.testing.assert_array_equal(a[i][0] != 0, b[i][0] != 0)
        np.testing.assert_array_equal(a[i][0] != 0, c[i][0] != 0)
    assert not np.array_equal(a[0][0] != 0, d[0][0] != 0)


def test_dropout_is_off_in_eval_mode():
    x, r, runs = _dropout_runs("numpy", 2, train=False)
    for y, g in runs:
        np.testing.assert_array_equal(y, x)
        np.testing.assert_allclose(g, r)


# -- attention ------------------------------------------------------------------------------


def _torch_attention(q, k, v, causal):
    # ours is (b, t, h, e); torch's (b, h, t, e)
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                         v.transpose(1, 2), is_causal=causal)
    return out.transpose(1, 2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("causal", [False, True])
def test_multi_head_attention_against_torch(backend, causal):
    q, k, v = data(2, 5, 3, 4), data(2, 5, 3, 4, seed=1), data(2, 5, 3, 4, seed=2)
    spec = "b, t, h, e => b, t | h, e"
    check(backend,
          lambda a, b, c: B.multi_head_attention(a, b, c, mask="causal" if causal else None),
          lambda a, b, c: _torch_attention(a, b, c, causal), [q, k, v], [spec] * 3, 5 * 4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_self_attention_with_one_tensor_as_query_key_and_value(backend):
    x = data(2, 6, 2, 3)
    check(backend, lambda a: B.multi_head_attention(a, a, a, mask="causal"),
          lambda a: _torch_attention(a, a, a, True), [x], ["b, t, h, e => b, t | h, e"], 18)


@pytest.mark.parametrize("backend", BACKENDS)
def test_split_and_merge_heads_are_torchs_views(backend):
    """``split_heads`` is ``x.view(b, t, h, e)`` (the head axis the slower factor of ``d``)
    and ``merge_heads`` its inverse ``reshape(b, t, d)``: values and gradients."""
    x, a = data(2, 5, 12), data(2, 5, 3, 4, seed=1)
    check(backend, lambda t: B.split_heads(t, 3), lambda t: t.view(2, 5, 3, 4), [x],
          ["b, t, d => b, t | d"], 1)
    check(backend, B.merge_heads, lambda t: t.reshape(2, 5, 12), [a],
          ["b, t, h, e => b, t | h, e"], 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_on_heads_split_from_d_to_d_projections_against_torch(backend):
    """The GPT demo's attention: ``d -> d`` projections split into heads, causal attention,
    the heads merged back before the output projection, against nanoGPT's reshapes around
    ``scaled_dot_product_attention``; the gradients of the input and of all four weights
    (attention's result comes back heads-major from some kernels: the merge must copy it
    in the right order)."""
    x = data(2, 6, 8)
    ws = [data(8, 8, seed=s) * 0.5 for s in (1, 2, 3)] + [data(6, 8, seed=4) * 0.5]

    def ours(x, wq, wk, wv, wo):
        q, k, v = (B.split_heads(w @ x, 2) for w in (wq, wk, wv))
        return wo @ B.merge_heads(B.multi_head_attention(q, k, v, mask="causal"))

    def theirs(x, wq, wk, wv, wo):
        q, k, v = ((x @ w.T).view(2, 6, 2, 4).transpose(1, 2) for w in (wq, wk, wv))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return a.transpose(1, 2).reshape(2, 6, 8) @ wo.T

    check(backend, ours, theirs, [x, *ws], ["b, t, d => b, t | d"] + ["o, i => | i -> o"] * 4,
          8 * 6)


def test_split_heads_refuses_a_size_the_heads_do_not_divide_and_a_bad_count():
    with G.new_graph():
        x = G.leaf("x", np.zeros((2, 5, 8), np.float32), axes="b, t | d")
        with pytest.raises(ShapeError, match=r"'\(h, e\)' has 8 elements, which the product "
                                             r"of its other factors \(h=3\) does not divide"):
            B.split_heads(x, 3).shape  # noqa: B018
        for bad in (0, -2, 2.0, True, "2"):
            with pytest.raises(ValueError, match="heads is a positive number"):
                B.split_heads(x, bad)
        with pytest.raises(ShapeError, match="output row"):  # b, t | d has no h, e to merge
            B.merge_heads(x).shape  # noqa: B018


# -- integer data ----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", [*BACKENDS, "dask"])
def test_embedding_gathers_rows_and_scatters_gradients(backend):
    """On Dask too, whose indexing takes a lazy integer array of one axis only (``b, t`` ids
    failed an assertion inside it)."""
    if backend == "dask":
        pytest.importorskip(backend)
    table = data(7, 3)  # V = 7 entries of 3
    ids = np.array([[1, 6, 1], [0, 1, 4]])  # repeated ids: their gradients add up
    with G.new_graph(backend):
        t = G.param("emb", output=[7], input=[3], init=lambda s, r: table)  # 3 -> 7
        i = G.leaf("ids", ids, batch=2)
        e = G.embedding(t, i)
        assert e.shape == G.Shape(batch=(2, 3), output=(3,))
        loss, r = weighted_loss(e.tanh())
        G.grad_update(loss).backward()
        ours, grad = A(e.numpy()), A(t.grad.numpy())
    (tt,) = torch_inputs(table)
    ref = F.embedding(torch.tensor(ids), tt)
    (ref.tanh() * torch.tensor(r, dtype=torch.float64)).sum().backward()
    close(ours, ref, 1)
    close(grad, tt.grad, 3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_embedding_table_read_as_logits_is_weight_tying(backend):
    with G.new_graph(backend):
        t = G.param("emb", output=[5], input=[4], seed=2)
        i = G.leaf("ids", np.array([[0, 3], [2, 2]]), batch=2)
        logits = t @ G.embedding(t, i)  # b, t | 5
        assert logits.shape == G.Shape(batch=(2, 2), output=(5,))
        G.grad_update(B.cross_entropy(logits, i)).backward()


def test_integer_data_never_enters_float_arithmetic_silently():
    with G.new_graph():
        ids = G.leaf("ids", np.zeros((4, 4), np.int64), batch=2)
        emb = G.param("emb", output=[8], input=[2])
        with pytest.raises(TypeError, match="matmul: ids holds integer data"):
            emb @ ids
        with pytest.raises(TypeError, match="add: ids holds integer data"):
            ids + 1.0
        x = G.leaf("x", np.ones((4, 4), np.float32), batch=2)
        with pytest.raises(TypeError, match="mul: ids holds integer data and x does not"):
            x * ids
        y = x * ids.cast("float32")  # explicit: fine
        assert G.Model(y).run().dtype == np.float32
        twice = ids + ids  # integer arithmetic stays integer
        assert twice.integer and G.Model(twice).run().dtype == np.int64
        with pytest.raises(TypeError, match="integer data"):
            G.embedding(emb, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_valued_operations_refuse_integer_data(backend):
    """``exp``, a division, a negative or fractional power, softmax, a norm or dropout of
    integer data computes floats (NumPy float64, torch float32; dropout's scaling truncated to
    int64) that the graph used to mark integer or passed on unchecked: refused by name, like
    integers mixed with floats; ``ids.cast`` first works.  Operations whose value of integers
    is an integer (sums, negation, relu, comparisons, ``ids ** 2``) keep them integer."""
    with G.new_graph(backend):
        ids = G.leaf("ids", np.arange(6).reshape(2, 3), batch=1)
        refused = {"exp": ids.exp, "sqrt": ids.sqrt, "tanh": ids.tanh, "div": lambda: ids / ids,
                   "pow-1": lambda: ids ** -1, "pow0.5": lambda: ids ** 0.5,
                   "softmax": lambda: B.softmax(ids),
                   "normalize": lambda: B.layer_norm(ids, affine=False),
                   "batch_norm": lambda: B.batch_norm(ids), "dropout": lambda: B.dropout(ids, 0.5)}
        for name, build in refused.items():
            with pytest.raises(TypeError, match=rf"{name}: ids holds integer data and {name} "
                                                r"computes floats"):
                build()
        floats = A(G.Model(ids.cast("float32").exp()).run())
        np.testing.assert_allclose(floats, np.exp(np.arange(6.0).reshape(2, 3)), rtol=4 * EPS)
        for kept in (-ids, ids.relu(), ids + ids, G.einsum1("b|i => b|0", ids)):
            assert kept.integer and A(G.Model(kept).run()).dtype == np.int64
        for p in (0, 1, 2, 3):  # a whole power >= 0 of integers is an integer: kept, exact
            kept = ids ** p
            assert kept.integer
            np.testing.assert_array_equal(A(G.Model(kept).run()), np.arange(6).reshape(2, 3) ** p)


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_ints_next_to_integer_data_are_integer_data(backend):
    """A Python int (a bool too, as in NumPy) next to integer data lifts to integer data
    (int64, like the ids): ``ids % 3``, ``3 - ids``, ``ids == 0`` stay integer and exact, where
    they were refused as float constants.  A Python float next to integer data is still
    refused, and an int next to float data is a float32 constant as before."""
    a = np.array([[1, -2, 0], [5, 7, -3]])
    with G.new_graph(backend):
        ids = G.leaf("ids", a, batch=1)
        kept = {"mod": (ids % 3, np.fmod(a, 3)), "add": (ids + 1, a + 1),
                "mul": (ids * 2, a * 2), "rsub": (3 - ids, 3 - a), "eq": (ids == 0, a == 0),
                "max": (G.maximum(ids, 0), np.maximum(a, 0)), "bool": (ids + True, a + True)}
        for name, (t, want) in kept.items():
            got = A(G.Model(t).run())
            assert t.integer and got.dtype == np.int64, (name, got.dtype)
            np.testing.assert_array_equal(got, want.astype(np.int64), err_msg=name)
        with pytest.raises(TypeError, match=r"mul: ids holds integer data and 0\.5 does not"):
            ids * 0.5
        # beyond int64: refused as a float constant is, not an OverflowError
        with pytest.raises(TypeError, match=rf"add: ids holds integer data and {2**70} does"):
            ids + 2**70
        f = np.array([[1.5, -2.0, 0.0], [5.0, 7.25, -3.5]], np.float32)
        x = G.leaf("x", f, batch=1)
        floats = {"mul": (x * 2, f * 2), "mod": (x % 3, np.fmod(f, 3)), "rsub": (3 - x, 3 - f)}
        for name, (t, want) in floats.items():
            got = A(G.Model(t).run())
            assert not t.integer and got.dtype == np.float32, (name, got.dtype)
            np.testing.assert_allclose(got, want, rtol=EPS, err_msg=name)


@pytest.mark.parametrize("backend, dtype", [*((b, d) for b in BACKENDS for d in (
    np.int32, np.uint8)), ("numpy", np.uint64)])
def test_python_ints_keep_the_dtype_of_integer_data(backend, dtype):
    """A Python int next to ids of another integer dtype leaves their dtype, as NumPy's does
    (an int64 constant made int32 ids + 1 int64, and uint64 ids + 1 a float64); torch
    promotes no uint16 (int32 ids + 300 failed when the constant was one)."""
    a = np.array([[1, 2, 0], [5, 7, 3]], dtype)
    with G.new_graph(backend):
        ids = G.leaf("ids", a, batch=1)
        cases = [(ids + 1, a + 1), (ids % 3, np.fmod(a, 3)), (2 * ids, 2 * a)]
        if dtype == np.int32:
            cases += [(ids + 300, a + 300), (ids * -1, a * -1), (ids - 70000, a - 70000)]
        for t, want in cases:
            got = A(G.Model(t).run())
            assert t.integer and got.dtype == want.dtype == dtype, (got.dtype, want.dtype)
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_integer_remainder_by_zero_is_refused(backend):
    """``ids % 0`` has no value: NumPy gave zeros (and a warning), torch a bare
    ``RuntimeError: ZeroDivisionError``; now a ValueError when the graph is built.  A float
    remainder by zero is NaN, as NumPy's ``fmod`` gives it."""
    with G.new_graph(backend):
        ids = G.leaf("ids", np.array([[1, 2, 3]]), batch=1)
        for make in (lambda: ids % 0, lambda: G.mod(ids, 0), lambda: ids % False):
            with pytest.raises(ValueError, match=r"mod: ids % 0 is a remainder of integer "
                                                 r"data by zero.*cast first"):
                make()
        x = G.leaf("x", np.array([[1.0, -2.0]], np.float32), batch=1)
        with np.errstate(invalid="ignore"):
            assert np.isnan(A(G.Model(x % 0).run())).all()


def test_integer_arithmetic_numpy_makes_float_is_refused():
    """NumPy promotes uint64 beside a negative number (or beside int64) to float64: integer
    data turned into floats unnoticed (exact only below 2^53).  The step refuses it, naming
    the assignment and the fix; uint64 arithmetic that stays uint64 runs as before."""
    a = np.array([[1, 2, 3]], np.uint64)
    with G.new_graph("numpy"):
        ids = G.leaf("ids", a, batch=1)
        signed = G.leaf("signed", a.astype(np.int64), batch=1)
        for t in (ids + (-1), ids * -1, ids + signed):
            with pytest.raises(TypeError, match=r"integer arithmetic gave float64: no integer "
                                                r"dtype holds all of its operands.*\(int64\)"):
                G.Model(t).run()
        got = A(G.Model(ids + 1).run())
        assert got.dtype == np.uint64
        np.testing.assert_array_equal(got, a + 1)


def test_feeding_floats_to_an_integer_leaf_is_an_error():
    with G.new_graph():
        ids = G.leaf("ids", np.zeros(3, np.int64), batch=1)
        m = G.Model(G.one_hot(ids, 4))
        with pytest.raises(TypeError, match="ids was built from integer data"):
            m.set(ids, np.zeros(3, np.float32))


@pytest.mark.parametrize("backend", [*BACKENDS, "dask"])
def test_one_hot(backend):
    if backend == "dask":
        pytest.importorskip(backend)
    ids = np.array([[2, 0, -100], [1, 1, 3]])
    with G.new_graph(backend):
        i = G.leaf("ids", ids, batch=1)  # 2 | 3
        h = G.one_hot(i, 4)
        assert h.shape == G.Shape(batch=(2,), output=(3, 4))
        got = A(G.Model(h).run())
    want = np.zeros((2, 3, 4), np.float32)
    for idx in np.ndindex(ids.shape):
        if ids[idx] >= 0:
            want[(*idx, ids[idx])] = 1
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.float32


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_hot_ignore_index_among_the_classes_gives_zero_rows(backend):
    # torch's cross_entropy(ignore_index=0) counts class 0 for nothing: one_hot's ignored id
    # is a row of zeros even when it names a class
    ids = np.array([[2, 0, 1], [0, 3, 3]])
    with G.new_graph(backend):
        h = G.one_hot(G.leaf("ids", ids, batch=1), 4, ignore_index=0)
        got = A(G.Model(h).run())
    want = np.eye(4, dtype=np.float32)[ids] * (ids != 0)[..., None]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", ["numpy", "dask"])
def test_ids_outside_the_table_are_an_error(backend):
    """Dask's gather would wrap or drop a bad id: its ids are checked when the graph
    computes, with the same error, for an embedding, a one-hot and a cross-entropy."""
    if backend == "dask":
        pytest.importorskip(backend)
    with G.new_graph(backend):
        t = G.param("emb", output=[5], input=[2])
        for bad in (5, -1):
            i = G.leaf("ids", np.array([[0, bad], [1, 2]]), batch=2)
            uses = {"embedding": G.embedding(t, i), "one_hot": G.one_hot(i, 5),
                    "cross_entropy": B.cross_entropy(G.leaf("z", data(2, 2, 5), batch=2), i)}
            for name, y in uses.items():
                with pytest.raises(IndexError, match=rf"{name}: id {bad} is outside 0\.\.4"):
                    A(G.Model(y).run())


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_embedding_step_checks_its_ids_once(backend, monkeypatch):
    """A training step checks the embedding's ids in the gather; the scatter of its gradient
    reads the same ids in the same routine and does not check them again.  The gradient still
    matches torch's, and a bad id in a later step is still the gather's error."""
    from tensig.backends import base
    from tensig.execution import ir

    calls, real = [], base.check_ids

    def counted(ids, n, what, ignore=None):
        calls.append(what)
        return real(ids, n, what, ignore)

    table, ids = data(7, 3), np.array([[1, 6, 1], [0, 1, 4]])
    with G.new_graph(backend):
        t = G.param("emb", output=[7], input=[3], init=lambda s, r: table)
        i = G.leaf("ids", ids, batch=2)
        e = G.embedding(t, i)
        loss, r = weighted_loss(e)
        m = G.grad_update(loss)
        monkeypatch.setattr(base, "check_ids", counted)
        monkeypatch.setattr(ir, "check_ids", counted)
        m.backward()
        grad = A(t.grad.numpy())
        assert calls == ["embedding"]
        m.set(i, np.array([[1, 7, 1], [0, 1, 4]]))
        with pytest.raises(IndexError, match=r"embedding: id 7 is outside 0\.\.6"):
            m.backward()
    (tt,) = torch_inputs(table)
    (F.embedding(torch.tensor(ids), tt) * torch.tensor(r, dtype=torch.float64)).sum().backward()
    close(grad, tt.grad, 1)


def test_embedding_refuses_ids_with_output_axes():
    with G.new_graph():
        t = G.param("emb", output=[5], input=[2])
        i = G.leaf("ids", np.zeros((2, 3), np.int64), batch=1)  # 2 | 3: positions misplaced
        with pytest.raises(ShapeError):
            G.embedding(t, i)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_token_model_trains_from_integer_ids(backend):
    """Predict the next token of a cycle 0 1 2 3 4 0 1 ...: embedding, layer norm, tied
    logits, cross-entropy from ids; no one-hot on the host."""
    seq = np.arange(64) % 5
    xs, ys = seq[:-1].reshape(-1, 1), seq[1:].reshape(-1, 1)
    with G.new_graph(backend):
        x = G.leaf("x", xs[:8], batch=2)
        y = G.leaf("y", ys[:8], batch=2)
        emb = G.param("emb", output=[5], input=[8], init="xavier")
        h = B.layer_norm(G.embedding(emb, x))
        w = G.param("w", output=[8], input=[8], init="xavier")
        loss = B.cross_entropy(emb @ (w @ h).tanh(), y)
        trainer = Trainer(loss, sgd([emb, w], 0.5), {x: xs, y: ys}, shuffle=False)
        losses = trainer.fit(30)
    assert losses[-1] < 0.1 * losses[0]


def test_a_trainer_refuses_float_data_for_an_integer_leaf():
    with G.new_graph():
        x = G.leaf("x", np.zeros((4, 1), np.int64), batch=2)
        emb = G.param("emb", output=[3], input=[2])
        loss = G.einsum1(B.ALL, G.embedding(emb, x))
        with pytest.raises(TypeError, match="x was built from integer data"):
            Trainer(loss, sgd([emb], 0.1), {x: np.zeros((8, 1), np.float32)})


def test_a_whole_array_primitive_inside_an_expression_is_refused_by_name():
    from tensig.execution.ir import Code, prim
    from tensig.model.compile import compile_code

    with G.new_graph() as g:
        t = G.param("emb", output=[3], input=[2])
        i = G.leaf("ids", np.zeros(2, np.int64), batch=1)
        e = G.embedding(t, i)
        G.Model(e)
        code = Code().assign(e.val, prim("mul", prim("take", t.val, i.val), 2.0))
        with pytest.raises(ShapeError, match="whole-array primitive"):
            compile_code(code, g.array_type)


def test_a_record_primitive_added_into_its_buffer_is_refused_by_name():
    """Records are the primitives :data:`ir.RECORDS` declares: the compiled step stores one
    whole, and refuses ``=+`` on it rather than keep the new record and drop the old."""
    from dataclasses import replace

    from tensig.execution.ir import RECORDS, Code
    from tensig.model.compile import compile_code

    with G.new_graph() as g:
        x = G.leaf("x", data(4, 3), batch=1)
        m = G.Model(B.layer_norm(x, affine=False))
        code = m.output.forward_code()
        store = next(a for a in code.items if a.expr.op == "normalize")
        assert "normalize" in RECORDS
        compile_code(Code([store]), g.array_type)  # stored (=:): a record
        with pytest.raises(ShapeError, match="normalize gives a record, which is stored"):
            compile_code(Code([replace(store, accum="+")]), g.array_type)


def _torch_rotary(x, base=10000.0):
    t, e = x.shape[1], x.shape[3]
    freq = base ** (-torch.arange(0, e, 2, dtype=torch.float64) / e)
    ang = torch.outer(torch.arange(t, dtype=torch.float64), freq)
    ang = torch.cat([ang, ang], -1)[None, :, None, :]
    x1, x2 = x[..., : e // 2], x[..., e // 2:]
    return x * ang.cos() + torch.cat([-x2, x1], -1) * ang.sin()


@pytest.mark.parametrize("backend", BACKENDS)
def test_rotary_position_embedding_against_torch(backend):
    x = data(2, 7, 3, 6)
    check(backend, B.rotary, _torch_rotary, [x], ["b, t, h, e => b, t | h, e"], 6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_causal_mask_hides_later_keys(backend):
    """``causal_mask`` is ``q | k`` sized from the scores: 0 on and below the diagonal,
    ``-inf`` above it, as ``mask="causal"`` hides keys."""
    with G.new_graph(backend):
        x = G.leaf("x", data(2, 5, 1, 4), batch=2)
        scores = G.einsum("..., q | -> h, e; ..., k | -> h, e => ..., q | -> h, k", x, x)
        mask = B.causal_mask(scores)
        got = A(G.Model(mask).run())
    assert mask.shape.int_dims == (5, 5)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.triu(np.full((5, 5), -np.inf, np.float32), 1))
