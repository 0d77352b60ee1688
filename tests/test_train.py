"""Training: optimizer updates equal torch.optim's on the same gradients, a short run lowers
the loss on both backends."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import arrays
from tensig import ShapeError
from tensig.model import graph as G
from tensig.model.train import Trainer, adam, sgd
from tolerance import assert_equal_up_to_rounding

rng = np.random.default_rng(11)


def quadratic_problem(backend="numpy"):
    return arrays.quadratic_problem(rng, backend)


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
    assert trainer.build_seconds > 0  # measured, not asserted against a clock (bench_train)


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
    for 12 steps on the same batches with SGD and momentum, each step from the same state
    (the NumPy trainer's parameters and momenta copied into the torch one): the losses agree
    to float32 rounding, and so do the parameters after the step wherever the gradient is a
    continuous function of the values (the MLP's; the CNN's dense layer).

    Below a max pooling the gradient goes to the first maximum of each window, and values equal
    in exact arithmetic (the digits' blank background) may be equal on one backend and an
    ulp apart on the other, so the CNN's convolution gradients may legitimately differ
    between backends (by percents, measured); the pooling gradient itself is checked
    against torch on controlled ties in test_graph.  Comparing whole trajectories would let
    such a difference grow step after step."""
    from tensig.demos import digits, moons

    mod = {"moons": moons, "digits": digits}[demo]
    xs, ys, _, _ = mod.data()
    onehot = np.eye(mod.CLASSES, dtype=np.float32)[ys]
    runs = []
    for backend in ("numpy", "torch"):
        with G.new_graph(backend):
            m = mod.build(xs, onehot)
            runs.append((m, Trainer(m.loss, sgd(m.params, lr=0.05, momentum=0.9),
                                    {m.x: xs, m.t: onehot})))
    (m_np, t_np), (m_t, t_t) = runs
    compared = m_np.params if demo == "moons" else m_np.params[-2:]  # digits: wd, bd
    assert demo == "moons" or [p.name for p in compared] == ["wd", "bd"]
    # the longest chain of sums to the loss (the digits CNN's: 3*3*1 + 3*3*16 + 2*2*32 terms
    # and a softmax over 10 classes, biases included), so the bound covers both models
    terms = (9 + 1) + (144 + 1) + (128 + 1) + 10
    losses = []
    for i in range(12):
        store = m_t.loss.graph.store
        for a, b in zip([*m_np.params, *t_np.opt.state], [*m_t.params, *t_t.opt.state],
                        strict=True):
            store.write(b.val, m_t.loss.graph.array(np.array(np.asarray(a.numpy()))))
        rows = np.arange(i * mod.BATCH, (i + 1) * mod.BATCH)
        l_np, l_t = t_np.step(rows), t_t.step(rows)
        losses.append(l_np)
        # a cross-entropy is a sum of positive terms: the bound relative to its value
        assert_equal_up_to_rounding(l_t, l_np, dtype=np.float32, length=terms,
                                    magnitude=abs(l_np))
        by_name = {p.name: p for p in m_t.params}
        for p in compared:
            np.testing.assert_allclose(np.asarray(by_name[p.name].numpy()),
                                       np.asarray(p.numpy()), rtol=1e-4, atol=1e-6,
                                       err_msg=f"{p.name} after step {i}")  # measured: 1/250 of it
    assert losses[-1] < losses[0]


@pytest.mark.parametrize("demo", ["moons", "digits"])
def test_every_array_lives_on_the_graphs_device(demo, monkeypatch):
    """``new_graph("torch", device=...)`` puts parameters, fed batches, optimizer state and
    every array a training step computes on that device.  Checked on torch's meta device,
    which like CUDA refuses to mix with CPU arrays; it holds no values, so the pooling
    window's zero test (which reads one) is told the window is zero, as it is."""
    import tensig.execution.native as native
    import tensig.model.compile as compile_
    from tensig.demos import digits, moons

    for module in (native, compile_):
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
    with pytest.raises(ValueError, match="needs a backend with devices"):
        G.Graph("numpy", device="cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on CI's machines
    with pytest.raises(ValueError, match="sees no CUDA device"):
        G.Graph("torch", device="cuda")
    with pytest.raises(ValueError, match=r"backend is .*not 'cupy'") as refused:
        G.Graph("cupy")
    assert all(f"'{name}'" in str(refused.value) for name in ("numpy", "torch", "jax", "dask"))


def _watch_kernel(monkeypatch, kernel: str) -> tuple[list[str], list[str]]:
    """torch's fused optimizer kernel ``kernel`` wrapped to record each call and each refusal
    (torch < 2.4 has no CPU kernel: it raises, the adapter falls back); skips the test where
    this torch has no such kernel."""
    real = getattr(torch, kernel, None)
    if real is None:
        pytest.skip(f"torch {torch.__version__} has no {kernel}")
    calls: list[str] = []
    refused: list[str] = []

    def watched(*args, **kw):
        calls.append(kernel)
        try:
            return real(*args, **kw)
        except (RuntimeError, NotImplementedError):
            refused.append(kernel)
            raise

    monkeypatch.setattr(torch, kernel, watched)
    return calls, refused


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind, kwargs, kernel", [
    ("adam", {"lr": 0.05}, "_fused_adam_"),
    ("adam", {"lr": 0.05, "weight_decay": 0.1}, "_fused_adam_"),
    ("adamw", {"lr": 0.05, "weight_decay": 0.1}, "_fused_adamw_"),
    ("sgd", {"lr": 0.01}, "_fused_sgd_"),
    ("sgd", {"lr": 0.01, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1}, "_fused_sgd_"),
])
@pytest.mark.parametrize("n_params", [1, 3])
def test_torch_fused_optimizer_kernels_equal_torch_optim(kind, kwargs, kernel, dtype,
                                                         n_params, monkeypatch):
    """On torch the update is one fused kernel per step (where this torch has it): the
    numbers are torch.optim's, the old parameter and gradient arrays are left as they were
    (a routine never writes into an array it did not make), state keeps the dtype."""
    calls, refused = _watch_kernel(monkeypatch, kernel)
    g = np.random.default_rng(5)
    xs, ys = g.standard_normal((8, 4)).astype(dtype), g.standard_normal((8, 2)).astype(dtype)
    inits = [g.standard_normal(s).astype(dtype) for s in [(2, 4), (2,), (2, 2)][:n_params]]
    with G.new_graph("torch"):
        x, y = G.leaf("x", xs, batch=1), G.leaf("y", ys, batch=1)
        params = [G.param(f"p{i}", output=list(a.shape[:1]), init=lambda s, r, a=a: a.copy())
                  for i, a in enumerate(inits)]
        z = params[0] @ x
        if n_params == 3:
            z = params[2] @ (z + params[1]).tanh()
        loss = G.einsum1("...|...->... => |->0", (z - y) * (z - y))
        opt = sgd(params, **kwargs) if kind == "sgd" else \
            adam(params, decoupled=kind == "adamw", **kwargs)
        trainer = Trainer(loss, opt, {x: xs, y: ys}, shuffle=False)
    for p, a in zip(params, inits, strict=True):  # float32 unless written otherwise
        trainer.model.set(p, a)
    for t in opt.state:
        trainer.model.set(t, np.zeros(t.shape.int_dims, dtype))
    refs = [torch.tensor(a, requires_grad=True) for a in inits]
    cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
    topt = cls[kind](refs, **kwargs)
    tx, ty = torch.tensor(xs), torch.tensor(ys)
    store, eps = trainer.model.graph.store, np.finfo(dtype).eps
    for step in range(5):
        before = [store.read(p.val) for p in params]
        copies = [b.clone() for b in before]
        trainer.step(np.arange(8))
        if refused:
            pytest.skip(f"torch {torch.__version__} has no CPU {kernel}")
        topt.zero_grad()
        tz = tx @ refs[0].T
        if n_params == 3:
            tz = torch.tanh(tz + refs[1]) @ refs[2].T
        ((tz - ty) ** 2).sum().backward()
        topt.step()
        for b, c in zip(before, copies, strict=True):
            assert torch.equal(b, c), f"step {step} wrote into an old parameter array"
        for p, ref in zip(params, refs, strict=True):  # the kernels leave them as they are
            np.testing.assert_allclose(store.read(p.grad).numpy(), ref.grad.numpy(),
                                       rtol=1e3 * eps, atol=1e3 * eps)
    assert calls == [kernel] * 5
    for p, ref in zip(params, refs, strict=True):
        got = store.read(p.val).numpy()
        assert got.dtype == dtype
        # 5 steps of a few roundings each, on values of size ~1 (Adam's steps are ~lr)
        np.testing.assert_allclose(got, ref.detach().numpy(), rtol=200 * eps, atol=200 * eps)
    assert all(store.read(t.val).dtype == store.read(params[0].val).dtype for t in opt.state)


@pytest.mark.parametrize("kind", ["adam", "sgd"])
def test_torch_fused_update_reads_strided_arrays_and_makes_arrays_of_their_own(kind,
                                                                             monkeypatch):
    """The fused kernels walk an array's memory in order whatever its strides: a transposed
    parameter, gradient or moment gives torch.optim's numbers all the same, and the new
    arrays are allocations of their own (not views of one flat array: see the resume tests
    in test_checkpoint.py), contiguous, with the old ones left as they were."""
    from tensig.backends import TorchBackend

    rng = np.random.default_rng(7)
    shapes = [(3, 5), (5,), (4, 3)]
    hyper = ({"betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.1, "decoupled": False}
             if kind == "adam" else {"momentum": 0.9, "weight_decay": 0.1, "nesterov": False})
    _, refused = _watch_kernel(monkeypatch, "_fused_adam_" if kind == "adam" else "_fused_sgd_")
    update = TorchBackend().fused_update(kind, hyper, shapes)

    def strided(shape):  # the values of a (shape) array, held transposed in memory
        return torch.tensor(rng.standard_normal(shape[::-1]), dtype=torch.float32).permute(
            *range(len(shape))[::-1])

    params, grads = [strided(s) for s in shapes], [strided(s) for s in shapes]
    moments = [strided(s).abs() for s in shapes]  # Adam's second moment must be >= 0
    state = [[strided(s) for s in shapes], moments] if kind == "adam" else [moments]
    inputs = [*params, *grads, *(x for role in state for x in role)]
    before = [x.clone() for x in inputs]
    out = update(params, grads, state, 3, 0.01)
    if refused:
        pytest.skip(f"torch {torch.__version__} has no CPU {refused[0]}")
    assert out is not None
    refs = [p.clone().requires_grad_() for p in params]
    opt = (torch.optim.Adam(refs, lr=0.01, weight_decay=0.1) if kind == "adam"
           else torch.optim.SGD(refs, lr=0.01, momentum=0.9, weight_decay=0.1))
    for r, g, *s in zip(refs, grads, *state, strict=True):
        r.grad = g.clone()
        opt.state[r] = ({"step": torch.tensor(2.0), "exp_avg": s[0].clone(),
                         "exp_avg_sq": s[1].clone()} if kind == "adam"
                        else {"momentum_buffer": s[0].clone()})
    opt.step()  # the third step, as ``update`` was told
    eps = np.finfo(np.float32).eps
    for new, ref in zip(out[0], refs, strict=True):
        assert new.is_contiguous() and new.untyped_storage().data_ptr() == new.data_ptr()
        np.testing.assert_allclose(new.numpy(), ref.detach().numpy(), rtol=20 * eps,
                                   atol=20 * eps)
    for old, kept in zip(inputs, before, strict=True):
        assert torch.equal(old, kept)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_batch_is_the_datasets_rows(backend):
    """Consecutive rows are sliced, any others gathered: either way a step is fed exactly
    the dataset's rows, and rows outside the dataset are an IndexError."""
    xs = np.arange(40, dtype=np.float32).reshape(10, 4)
    ys = np.arange(10, dtype=np.float32)[:, None] * 10
    with G.new_graph(backend):
        x = G.leaf("x", xs[:3], batch=1)
        y = G.leaf("y", ys[:3], batch=1)
        w = G.param("w", output=[1])
        loss = G.einsum1("...|...->... => |->0", (w @ x - y) * (w @ x - y))
        trainer = Trainer(loss, sgd([w], lr=0.0), {x: xs, y: ys})
    for rows in ([0, 1, 2], [7, 8, 9], [3, 4, 6], [5, 4, 3], [2, 2, 2], [9, 0, 1]):
        fed = dict(trainer._batch(np.array(rows)))
        np.testing.assert_array_equal(np.asarray(fed[x.val.key]), xs[rows])
        np.testing.assert_array_equal(np.asarray(fed[y.val.key]), ys[rows])
        trainer.step(np.array(rows))
        np.testing.assert_array_equal(x.numpy(), xs[rows])
    for rows in ([8, 9, 10], [10, 11, 12]):
        with pytest.raises(IndexError):
            trainer.step(np.array(rows))
    with pytest.raises((IndexError, TypeError, RuntimeError)):  # no index: never sliced
        trainer.step(np.array([0.0, 1.0, 2.0]))
