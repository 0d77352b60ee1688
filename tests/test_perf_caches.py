"""The per-call caches of the hot paths keep exact semantics: a call whose signature changed
(types, shapes, dtypes, ranks, static arguments) misses the cache and is checked anew, and what
is checked per call (the result cell a function returned) is never cached away.

Oracles: NumPy's own arithmetic and the errors the uncached path raises.
"""
# ruff reads the multichar annotation specs ("b, t+1, d") as forward references.
# ruff: noqa: F821

from __future__ import annotations

import numpy as np
import pytest
import torch

import arrays
import tensig
from tensig import rank
from tensig.backends import _NumpyGemm
from tensig.backends._plans import small_amax
from tensig.check import decorator, interpreter
from tensig.core.annotations import Float
from tensig.model.train import Trainer, sgd
from tensig.rank import _plans


def dot_cells(x, y):
    return (x * y).sum(-1)


@pytest.fixture
def prepared(monkeypatch):
    """Counts the calls that are prepared anew (cache misses)."""
    misses = []
    real = _plans._prepare

    def counting(lf, args, backend):
        misses.append(tuple(getattr(a, "shape", None) for a in args))
        return real(lf, args, backend)

    monkeypatch.setattr(_plans, "_prepare", counting)
    return misses


class TestLiftPlanCache:
    def test_a_repeated_signature_is_prepared_once(self, prepared):
        dot = rank.lift(dot_cells, "n; n => ", vectorized=True)
        a, b = np.arange(6.0).reshape(2, 3), np.arange(3.0)
        for _ in range(3):
            np.testing.assert_array_equal(dot(a, b), a @ b)
        assert len(prepared) == 1

    def test_a_changed_shape_misses(self, prepared):
        dot = rank.lift(dot_cells, "n; n => ", vectorized=True)
        dot(np.ones(3), np.ones(3))
        with pytest.raises(tensig.ShapeError):
            dot(np.ones(3), np.ones(4))
        assert len(prepared) == 2

    def test_a_changed_rank_misses(self, prepared):
        dot = rank.lift(dot_cells, "n; n => ", vectorized=True)
        v = np.arange(3.0)
        assert dot(v, v) == v @ v
        m = np.arange(12.0).reshape(4, 3)
        got = dot(m, v)
        assert got.shape == (4,)
        np.testing.assert_array_equal(got, m @ v)
        with pytest.raises(tensig.ShapeError, match="prefix"):
            dot(np.ones((2, 3)), np.ones((5, 3)))
        assert len(prepared) == 3

    def test_a_changed_dtype_misses(self):
        add = rank.lift(np.add)
        assert add(np.array([1, 2]), np.array([3, 4])).tolist() == [4, 6]
        with pytest.raises(TypeError, match="booleans"):
            add(np.array([True, False]), np.array([3, 4]))
        x = np.arange(4)
        np.testing.assert_array_equal(rank.rotate(x, np.array(1)), np.roll(x, -1))
        with pytest.raises(TypeError, match="integers"):
            rank.rotate(x, np.array(1.0))

    def test_a_changed_library_misses(self):
        dot = rank.lift(lambda x, y: (x * y).sum(), "n; n => ")
        a = np.arange(6.0).reshape(2, 3)
        assert isinstance(dot(a, a), np.ndarray)
        got = dot(torch.as_tensor(a), torch.as_tensor(a))
        assert isinstance(got, torch.Tensor)
        np.testing.assert_allclose(got.numpy(), (a * a).sum(-1))

    def test_same_shape_and_dtype_in_another_library_misses(self):
        jnp = pytest.importorskip("jax.numpy")
        dot = rank.lift(lambda x, y: (x * y).sum(), "n; n => ")
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        assert isinstance(dot(a, a), np.ndarray)
        j = jnp.asarray(a)
        assert j.dtype == a.dtype and j.shape == a.shape  # only the type tells them apart
        got = dot(j, j)
        assert not isinstance(got, np.ndarray)
        np.testing.assert_allclose(np.asarray(got), (a * a).sum(-1))

    def test_converted_arguments_share_the_plan_of_what_they_convert_to(self, prepared):
        add = rank.lift(np.add)
        for _ in range(2):
            assert add([1, 2], np.array([10, 20])).tolist() == [11, 22]
            assert add(np.array([1, 2]), np.array([10, 20])).tolist() == [11, 22]
        assert len(prepared) == 1  # a list of ints converts to the default int: one signature
        assert add([1.5, 2], np.array([10, 20])).tolist() == [11.5, 22]  # float64: another
        t = torch.tensor([10, 20])
        for x in ([1, 2], np.array([1, 2]), torch.tensor([1, 2])):  # converted to torch
            got = add(x, t)
            assert isinstance(got, torch.Tensor) and got.tolist() == [11, 22]
        assert len(prepared) == 3

    def test_static_arguments_are_part_of_the_signature(self):
        x = np.arange(6)
        np.testing.assert_array_equal(rank.take(2, x), x[:2])
        np.testing.assert_array_equal(rank.take(4, x), x[:4])

    def test_the_returned_cell_is_checked_on_every_call(self):
        width = [3]
        f = rank.lift(lambda x: x[..., :width[0]], "n => n", vectorized=True)
        f(np.ones((2, 3)))
        width[0] = 2
        with pytest.raises(tensig.ShapeError, match="returned a cell"):
            f(np.ones((2, 3)))

    def test_the_cache_is_bounded(self):
        add = rank.lift(np.add)
        for n in range(_plans._CACHE_SIZE + 5):
            add(np.ones(n + 1), 1.0)
            add(np.ones(n + 1), np.ones(n + 1))
        assert 0 < len(add._plans) <= _plans._CACHE_SIZE


# --------------------------------------------------------------------------------------------
# the decorator's interpreter
# --------------------------------------------------------------------------------------------


@decorator.shaped(compiled=False)
def widen(x: Float[np.ndarray, "b t d"],
          y: Float[np.ndarray, "b, t+1, 2*d"]) -> Float[np.ndarray, "b, t+1, 2*d"]:
    return y


@decorator.shaped(compiled=False)
def grow(y: Float[np.ndarray, "b, t+1, 2*d"],
         x: Float[np.ndarray, "b t d"]) -> Float[np.ndarray, "b t d"]:
    return x


@decorator.shaped
def first(x: Float[np.ndarray, "b {n}"], n: int) -> Float[np.ndarray, "b, min(b, 4)"]:
    return x[:, :4]


class NoSolver:
    def __init__(self, *args, **kwargs):
        raise AssertionError("a solver was built")


class TestDecoratorInterpreter:
    def test_bound_expressions_are_evaluated_without_a_solver(self, monkeypatch):
        monkeypatch.setattr(interpreter, "Solver", NoSolver)
        y = np.zeros((2, 4, 8))
        assert widen(np.zeros((2, 3, 4)), y) is y
        with pytest.raises(decorator.SignatureError, match=r"axis 2 \('2\*d'\) has size 6") as e:
            widen(np.zeros((2, 3, 4)), np.zeros((2, 4, 6)))
        assert e.value.argument == "y" and e.value.axis == 2 and e.value.actual == 6
        with pytest.raises(decorator.SignatureError, match=r"t \+ 1"):
            widen(np.zeros((2, 3, 4)), np.zeros((2, 5, 8)))

    def test_unbound_names_are_still_solved(self):
        x = np.zeros((2, 3, 4))
        assert grow(np.zeros((2, 4, 8)), x) is x
        with pytest.raises(decorator.SignatureError, match="t = 3"):
            grow(np.zeros((2, 4, 8)), np.zeros((2, 2, 4)))
        with pytest.raises(decorator.SignatureError, match="2\\*d"):
            grow(np.zeros((2, 4, 7)), x)

    def test_deferred_sizes_follow_each_call(self):
        for n in (5, 6, 7):
            x = np.zeros((6, n))
            assert first(x, n).shape == (6, 4)
            with pytest.raises(decorator.SignatureError, match=r"\{n\}"):
                first(x, n + 1)
        with pytest.raises(decorator.SignatureError, match="min"):
            first(np.zeros((3, 5)), 5)  # min(3, 4) = 3, the result has 4

    def test_deferred_text_is_compiled_once(self):
        first(np.zeros((6, 5)), 5)
        before = interpreter._compiled.cache_info()
        for _ in range(3):
            first(np.zeros((6, 5)), 5)
        after = interpreter._compiled.cache_info()
        assert after.misses == before.misses and after.hits > before.hits


# --------------------------------------------------------------------------------------------
# the adapters' per-shape plans
# --------------------------------------------------------------------------------------------


class TestAdapterPlans:
    @pytest.mark.parametrize("shape, axes", [((4, 6, 2, 2, 3), (2, 3)), ((5, 3, 7), (1,)),
                                             ((3, 2, 9, 2), (1, 3)), ((2, 8, 4), (0,))])
    def test_small_amax_follows_the_shape(self, shape, axes):
        rng = np.random.default_rng(0)
        for s in (shape, tuple(n + 1 for n in shape), shape):  # miss, miss, hit
            x = rng.standard_normal(s)
            got = small_amax(x, axes, np.maximum)
            if np.prod([s[a] for a in axes]) > 8:
                assert got is None
                continue
            np.testing.assert_array_equal(got, x.max(axis=axes))
            t = torch.as_tensor(x)
            np.testing.assert_array_equal(small_amax(t, axes, torch.maximum).numpy(),
                                          x.max(axis=axes))

    def test_gemm_follows_shapes_strides_and_dtypes(self):
        gemm = _NumpyGemm.plan(np, "bij,bjk->kbi")
        rng = np.random.default_rng(1)

        def check(a, b):
            want = np.einsum("bij,bjk->kbi", a.astype(np.float64), b.astype(np.float64))
            got = gemm(a, b)
            assert got.dtype == np.result_type(a, b)
            tol = 8 * np.finfo(got.dtype).eps * a.shape[2] * np.abs(want).max()
            np.testing.assert_allclose(got, want, atol=tol, rtol=0)

        a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
        check(a, b)
        check(np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1), b)  # strides
        check(rng.standard_normal((3, 2, 6)), rng.standard_normal((3, 6, 2)))  # shapes
        a32 = a.astype(np.float32)
        check(a32, b.astype(np.float32))
        check(a32, b)  # only the second operand's dtype changed: float64 result
        assert len(gemm._layouts) == 5


# --------------------------------------------------------------------------------------------
# the optimizer's per-step scalars
# --------------------------------------------------------------------------------------------


def schedule(step):
    return 0.02 if step < 2 else 0.005


class TestOptimizerScalars:
    def problem(self):
        return arrays.quadratic_problem(np.random.default_rng(3))

    def test_a_schedule_still_reaches_the_update(self):
        xs, ys, w0, x, y, w, loss = self.problem()
        opt = sgd([w], lr=1.0, momentum=0.5, schedule=schedule)
        trainer = Trainer(loss, opt, {x: xs, y: ys}, shuffle=False)
        store, lr = trainer.model.graph.store, opt.scalars["lr"].val
        tw = torch.tensor(w0, dtype=torch.float64, requires_grad=True)
        topt = torch.optim.SGD([tw], lr=1.0, momentum=0.5)
        tx, ty = torch.tensor(xs, dtype=torch.float64), torch.tensor(ys, dtype=torch.float64)
        rates = []
        for step in range(5):
            trainer.step(np.arange(6))
            rates.append(store.read(lr))
            for group in topt.param_groups:
                group["lr"] = schedule(step)
            topt.zero_grad()
            ((tx @ tw.T - ty) ** 2).sum().backward()
            topt.step()
        np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-4, atol=1e-5)
        assert [float(a[0]) for a in rates] == [np.float32(schedule(s)) for s in range(5)]
        assert rates[0] is rates[1] and rates[2] is rates[3] is rates[4]  # not rewritten
        assert rates[1] is not rates[2]

    def test_a_scalar_replaced_in_the_store_is_written_again(self):
        xs, ys, _, x, y, w, loss = self.problem()
        opt = sgd([w], lr=0.01)
        trainer = Trainer(loss, opt, {x: xs, y: ys}, shuffle=False)
        store, lr = trainer.model.graph.store, opt.scalars["lr"].val
        trainer.step(np.arange(6))
        store.write(lr, trainer.model.scalar(123.0))  # as a restore or another writer might
        opt.set_step(trainer.model, 1)
        assert float(store.read(lr)[0]) == np.float32(0.01)
