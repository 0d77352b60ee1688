"""Compiled routines on JAX arrays run as one ``jax.jit`` function (:mod:`tensig.model.staging`):
traced once, equal to the NumPy backend's results, checks of ids made when the function runs,
dropout's mask drawn as NumPy draws it, a refused step leaving no trace, and a step that
cannot be traced falling back to step by step with a warning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from tensig.backends import JaxBackend
from tensig.demos import moons
from tensig.model import blocks as B
from tensig.model import graph as G
from tensig.model.train import NonFiniteLossError

jax = pytest.importorskip("jax")

EPS32 = float(np.finfo(np.float32).eps)


def _data(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    xs = g.standard_normal((n, 2)).astype(np.float32)
    onehot = np.eye(2, dtype=np.float32)[(xs[:, 0] * xs[:, 1] > 0).astype(np.int64)]
    return xs, onehot


def _counted(staged):
    """Wrap each step of a staged routine so that running it in Python is counted."""
    calls = [0]

    def wrap(step):
        def counted(store):
            calls[0] += 1
            step(store)
        return counted

    staged.steps = [wrap(s) for s in staged.steps]
    return calls


def test_the_mlp_trains_as_one_jit_call_and_traces_once():
    """Each trainer step is one call of the compiled function: its Python steps run once
    (the trace), not once per step; the losses are the NumPy backend's up to float32
    rounding carried through ten Adam steps."""
    xs, onehot = _data()
    losses, calls = {}, None
    for backend in ("numpy", "jax"):
        with G.new_graph(backend) as graph:
            trainer = moons.build(xs, onehot).trainer(xs, onehot, lr=0.01)
            staged = trainer.routine.staged
            if backend == "jax":
                assert staged is not None
                calls = _counted(staged)
            else:
                assert staged is None  # NumPy runs step by step
            losses[backend] = [trainer.step(trainer.rows_of(i)) for i in range(10)]
            if backend == "jax":
                assert staged.traces == 1 and staged.refused is None
                assert calls[0] == len(staged.steps)  # the trace only
                params = [graph.store.read(p.val) for p in trainer.opt.params]
                assert all(isinstance(p, jax.Array) for p in params)
                assert trainer.step_count == 10
    assert losses["jax"][-1] < 0.5 * losses["jax"][0]
    np.testing.assert_allclose(losses["jax"], losses["numpy"], rtol=1e-4)


def test_backward_routine_is_staged_and_equals_numpy():
    """``Model.backward`` (forward, gradients) on JAX arrays: one compiled call, traced
    once over two runs, the NumPy backend's gradients up to float32 rounding."""
    xs, onehot = _data(40)
    grads = {}
    for backend in ("numpy", "jax"):
        with G.new_graph(backend) as graph:
            m = moons.build(xs, onehot)
            model = G.grad_update(m.loss)
            model.backward()
            model.backward()
            grads[backend] = [np.asarray(graph.store.read(p.grad)) for p in m.params]
            if backend == "jax":
                assert model.grad_update().staged.traces == 1
    for ours, theirs in zip(grads["jax"], grads["numpy"], strict=True):
        scale = np.abs(theirs).max() + 1.0
        np.testing.assert_allclose(ours, theirs, atol=200 * EPS32 * scale)


def _embedding_model(ids: np.ndarray):
    with G.new_graph("jax"):
        table = G.param("emb", output=[5], input=[2],
                        init=lambda s, r: np.arange(10, dtype=np.float32).reshape(5, 2))
        i = G.leaf("ids", ids, batch=1)
        e = G.embedding(table, i)
        model = G.Model(G.einsum1("b|d => ", e))
    return model, e, i


def test_ids_out_of_range_are_an_error_when_the_compiled_function_runs():
    """JAX's gather clamps an id out of range; the check deferred out of the trace raises
    instead, before anything is written into the store."""
    model, e, i = _embedding_model(np.array([0, 4]))
    model.run()
    before = np.asarray(e.numpy()).copy()
    for bad in (5, -1):
        model.set(i, np.array([1, bad]))
        with pytest.raises(IndexError, match=rf"embedding: id {bad} is outside 0\.\.4"):
            model.run()
        np.testing.assert_array_equal(np.asarray(e.numpy()), before)  # untouched
    model.set(i, np.array([3, 1]))
    model.run()
    np.testing.assert_array_equal(np.asarray(e.numpy()), [[6, 7], [2, 3]])
    assert model.forward.staged.traces == 1 and model.forward.staged.refused is None


def _dropout_values(backend: str, runs: int, train: bool = True):
    x = np.random.default_rng(3).standard_normal((8, 50)).astype(np.float32) + 5
    with G.new_graph(backend) as g:
        h = G.leaf("x", x, batch=1)
        y = B.dropout(h, 0.25, seed=7)
        model = G.Model(G.einsum1("b|d => ", y))
        g.train(train)
        out = []
        for _ in range(runs):
            model.run()
            out.append(np.asarray(y.numpy()).copy())
    return x, out, model


def test_dropout_draws_numpys_masks_inside_the_compiled_function():
    """The mask comes from the host during the call (the counter an input and an output):
    each run draws afresh, and the values are the NumPy backend's."""
    _, ours, model = _dropout_values("jax", 3)
    _, theirs, _ = _dropout_values("numpy", 3)
    assert model.forward.staged.refused is None and model.forward.staged.traces == 1
    assert not np.array_equal(ours[0] != 0, ours[1] != 0)  # a fresh mask each run
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a != 0, b != 0)
        np.testing.assert_allclose(a, b, rtol=2 * EPS32)


def test_eval_mode_compiles_its_own_function():
    """Training mode is fixed per compiled function: out of it, dropout passes its input."""
    x, runs, model = _dropout_values("jax", 2, train=False)
    for y in runs:
        np.testing.assert_array_equal(y, x)
    assert model.forward.staged.traces == 1


def test_a_refused_step_writes_no_update():
    """A non-finite loss under ``on_nonfinite='raise'``: the compiled step's parameters and
    optimizer state are dropped; ``'warn'`` skips that batch and goes on."""
    xs, onehot = _data(80)
    xs[:40] = np.nan  # the first batch
    with G.new_graph("jax") as graph:
        trainer = moons.build(xs, onehot).trainer(xs, onehot, lr=0.01)
        trainer.shuffle = False
        before = [np.asarray(graph.store.read(p.val)).copy() for p in trainer.opt.params]
        with pytest.raises(NonFiniteLossError):
            trainer.step(np.arange(40))
        assert trainer.step_count == 0
        for p, b in zip(trainer.opt.params, before, strict=True):
            np.testing.assert_array_equal(np.asarray(graph.store.read(p.val)), b)
        trainer.on_nonfinite = "warn"
        with pytest.warns(RuntimeWarning, match="skipped"):
            trainer.step(np.arange(40))
        loss = trainer.step(np.arange(40, 80))
        assert np.isfinite(loss) and trainer.step_count == 1
        changed = [not np.array_equal(np.asarray(graph.store.read(p.val)), b)
                   for p, b in zip(trainer.opt.params, before, strict=True)]
        assert any(changed)


def test_a_step_that_reads_values_falls_back_with_a_warning(monkeypatch):
    """A primitive that reads an array's values cannot be traced: the routine warns once,
    naming the assignment, and runs step by step with the same results."""
    original = JaxBackend.softmax

    def reading(self, x, axis):
        float(x.sum())  # a value read: impossible on a tracer
        return original(self, x, axis)

    monkeypatch.setattr(JaxBackend, "softmax", reading)
    x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    values = {}
    for backend in ("numpy", "jax"):
        with G.new_graph(backend):
            y = B.softmax(G.leaf("x", x, batch=1))
            model = G.Model(G.einsum1("b|d => ", y))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model.run()
                model.run()
            values[backend] = np.asarray(y.numpy())
            if backend == "jax":
                msgs = [str(w.message) for w in caught if w.category is RuntimeWarning]
                assert len(msgs) == 1 and "step by step" in msgs[0] and "softmax" in msgs[0]
                assert model.forward.staged.refused is not None
    np.testing.assert_allclose(values["jax"], values["numpy"], rtol=4 * EPS32)
