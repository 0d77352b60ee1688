"""Training: optimizer updates equal torch.optim's on the same gradients, a short run lowers
the loss on both backends."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tensig import ShapeError
from tensig import graph as G
from tensig.train import Trainer, adam, sgd

rng = np.random.default_rng(11)


def quadratic_problem(backend="numpy"):
    """loss = sum((w @ x - y)^2) with known data: the gradient is easy to cross-check."""
    xs = rng.standard_normal((6, 4)).astype(np.float32)
    ys = rng.standard_normal((6, 3)).astype(np.float32)
    w0 = rng.standard_normal((3, 4)).astype(np.float32)
    with G.new_graph(backend):
        x = G.leaf("x", xs, batch=1)
        y = G.leaf("y", ys, batch=1)
        w = G.param("w", output=[3], init=lambda s, r: w0.copy())
        diff = w @ x - y
        loss = G.einsum1("...|...->... => |->0", diff * diff)
    return xs, ys, w0, x, y, w, loss


@pytest.mark.parametrize("kind, kwargs", [
    ("sgd", {"lr": 0.01}),
    ("sgd", {"lr": 0.01, "momentum": 0.9}),
    ("sgd", {"lr": 0.01, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1}),
    ("adam", {"lr": 0.05}),
    ("adam", {"lr": 0.05, "weight_decay": 0.1}),
    ("adamw", {"lr": 0.05, "weight_decay": 0.1}),
])
def test_updates_equal_torch_optim(kind, kwargs):
    xs, ys, w0, x, y, w, loss = quadratic_problem()
    if kind == "sgd":
        opt = sgd([w], **kwargs)
        ref_opt = lambda p: torch.optim.SGD([p], **kwargs)  # noqa: E731
    else:
        opt = adam([w], decoupled=kind == "adamw", **kwargs)
        cls = torch.optim.AdamW if kind == "adamw" else torch.optim.Adam
        ref_opt = lambda p: cls([p], **kwargs)  # noqa: E731
    trainer = Trainer(loss, opt, {x: xs, y: ys}, shuffle=False)
    tw = torch.tensor(w0, dtype=torch.float64, requires_grad=True)
    topt = ref_opt(tw)
    tx, ty = torch.tensor(xs, dtype=torch.float64), torch.tensor(ys, dtype=torch.float64)
    for _ in range(5):
        trainer.step(np.arange(6))
        topt.zero_grad()
        ((tx @ tw.T - ty) ** 2).sum().backward()
        topt.step()
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_short_training_lowers_the_loss(backend):
    xs = rng.standard_normal((64, 2)).astype(np.float32)
    labels = (xs[:, 0] * xs[:, 1] > 0).astype(np.float32)[:, None]  # XOR-like quadrants
    with G.new_graph(backend):
        x = G.leaf("x", xs[:16], batch=1)
        t = G.leaf("t", labels[:16], batch=1)
        w1, b1 = G.param("w1", output=[16], init="kaiming"), G.param("b1")
        w2, b2 = G.param("w2", output=[1], init="kaiming"), G.param("b2")
        z = w2 @ (w1 @ x + b1).relu() + b2
        # logistic loss: log(1 + exp(-s*z)) with s = 2t - 1
        s = t * 2.0 - 1.0
        loss = G.einsum1("...|...->... => |->0", ((-(s * z)).exp() + 1.0).log())
        trainer = Trainer(loss, adam([w1, b1, w2, b2], lr=0.05), {x: xs, t: labels})
        first = trainer.epoch()
        losses = trainer.fit(40)
    assert losses[-1] < first / 3, (first, losses[-1])
    assert trainer.build_seconds < 1.0


def test_progress_bar_and_loss_plot(tmp_path, capsys):
    xs, ys, _w0, x, y, w, loss = quadratic_problem()
    trainer = Trainer(loss, sgd([w], lr=0.01), {x: xs, y: ys}, shuffle=False)
    losses = trainer.fit(3, progress=True)
    assert len(losses) == 3 and len(trainer.history) == 3
    assert "epoch" in capsys.readouterr().err  # tqdm writes to stderr
    path = tmp_path / "loss.png"
    trainer.save_plot(str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_trainer_refuses_bad_data():
    xs, ys, _w0, x, y, w, loss = quadratic_problem()
    with pytest.raises(ValueError, match="different lengths"):
        Trainer(loss, sgd([w], lr=0.01), {x: xs, y: ys[:5]})
    with pytest.raises(ShapeError, match=r"y was built with shape .*rows have shape \(2,\)"):
        Trainer(loss, sgd([w], lr=0.01), {x: xs, y: ys[:, :2]})
    trainer = Trainer(loss, sgd([w], lr=0.01), {x: xs, y: ys})
    with pytest.raises(ValueError, match="takes 6 rows"):
        trainer.step(np.arange(3))


@pytest.mark.parametrize("demo", ["moons", "digits"])
def test_numpy_and_torch_backends_train_alike(demo):
    """The demos' models (the CNN: convolutions, pooling gates, the fused update), trained
    for 12 steps on the same batches from the same initialisation: both backends give the
    same losses and parameters within float32 tolerance.  SGD with momentum, whose update is
    linear in the gradient, so rounding differences stay rounding differences (Adam divides
    by the gradient's size and would amplify them where a gradient is near zero)."""
    from tensig.demos import digits, moons

    mod = {"moons": moons, "digits": digits}[demo]
    xs, ys, _, _ = mod.data()
    onehot = np.eye(mod.CLASSES, dtype=np.float32)[ys]
    runs = []
    for backend in ("numpy", "torch"):
        with G.new_graph(backend):
            m = mod.build(xs, onehot)
            trainer = Trainer(m.loss, sgd(m.params, lr=0.05, momentum=0.9),
                              {m.x: xs, m.t: onehot})
            losses = [trainer.step(np.arange(i * mod.BATCH, (i + 1) * mod.BATCH))
                      for i in range(12)]
            runs.append((losses, [np.array(np.asarray(p.numpy())) for p in m.params]))
    (l_np, p_np), (l_t, p_t) = runs
    assert l_np[-1] < l_np[0]
    np.testing.assert_allclose(l_np, l_t, rtol=1e-5)  # measured: 1e-7 apart
    for a, b in zip(p_np, p_t, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)  # measured: 1.2e-7 at most


@pytest.mark.parametrize("demo", ["moons", "digits"])
def test_every_array_lives_on_the_graphs_device(demo, monkeypatch):
    """``new_graph("torch", device=...)`` puts parameters, fed batches, optimizer state and
    every array a training step computes on that device.  Checked on torch's meta device,
    which like CUDA refuses to mix with CPU arrays; it holds no values, so the pooling
    window's zero test (which reads one) is told the window is zero, as it is."""
    import tensig.lowering as lowering
    import tensig.windowed as windowed
    from tensig.demos import digits, moons

    for module in (lowering, windowed):
        monkeypatch.setattr(module, "all_zero", lambda x: True)
    mod = {"moons": moons, "digits": digits}[demo]
    xs, ys, _, _ = mod.data()
    onehot = np.eye(mod.CLASSES, dtype=np.float32)[ys]
    with G.new_graph("torch", device="meta") as g:
        m = mod.build(xs, onehot)
        trainer = m.trainer(xs, onehot, 0.01)
        index = trainer._rows(np.arange(mod.BATCH))
        for key, arr in trainer._feeds:
            g.store.arrays[key] = arr[index]
        trainer.opt.set_step(trainer.model, 0)
        trainer.routine.run(g.store)  # Trainer.step would also read the loss's value
        devices = {str(v.device) for v in g.store.arrays.values()}
        assert m.loss.val.key in g.store.arrays and all(p.grad.key in g.store.arrays
                                                        for p in m.params)
    assert devices == {"meta"}


def test_a_device_needs_the_torch_backend(monkeypatch):
    with pytest.raises(ValueError, match="needs the torch backend"):
        G.Graph("numpy", device="cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on CI's machines
    with pytest.raises(ValueError, match="sees no CUDA device"):
        G.Graph("torch", device="cuda")
    with pytest.raises(ValueError, match="'numpy' or 'torch'"):
        G.Graph("jax")
