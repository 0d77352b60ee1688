"""The backend adapters: one per library, found from the arrays' type, extensible by register.

A fake library (a NumPy subclass with an adapter of its own, which counts its calls) is
registered and run through the three layers that execute arrays: eager ops, a compiled routine
and ``rank.lift``.  Oracles: ``numpy.einsum`` and plain NumPy on the same values; the counters
prove the fake adapter (not NumPy's) did the work, and results keep the fake array type where
the adapter builds them.
"""

from __future__ import annotations

import collections
import gc
import math
import os
import subprocess
import sys
import weakref
from typing import ClassVar

import numpy as np
import pytest

import tensig
from arrays import BACKENDS, to_backend, to_numpy, tolerance
from tensig import backends, rank
from tensig.backends import NumpyBackend, register, unregister
from tensig.execution import eager
from tensig.execution.ir import Code, Expr
from tensig.model import graph as G
from tensig.model.compile import compile_code


class Tagged(np.ndarray):
    """The fake library's array type."""


class TaggedBackend(NumpyBackend):
    """An adapter for :class:`Tagged`: NumPy's primitives, counted, results tagged."""

    name = "tagged"
    modules = ()
    numpy_native = False  # NumPy's own functions would drop the tag
    calls: ClassVar[collections.Counter[str]] = collections.Counter()

    def contraction(self, subscripts, shapes):
        plan = super().contraction(subscripts, shapes)

        def contract(*xs):
            self.calls["contraction"] += 1
            return np.asarray(plan(*xs)).view(Tagged)

        return contract

    def asarray(self, x, like=None):
        self.calls["asarray"] += 1
        return np.asarray(x).view(Tagged)

    def stack_cells(self, cells, frame, cell):
        self.calls["stack_cells"] += 1
        return np.asarray(super().stack_cells(cells, frame, cell)).view(Tagged)

    def no_autograd(self):
        self.calls["no_autograd"] += 1
        return None


@pytest.fixture
def tagged():
    register(TaggedBackend, Tagged)
    TaggedBackend.calls.clear()
    yield TaggedBackend.calls
    unregister(Tagged)


def _data(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


def test_a_registered_type_gets_its_adapter_and_loses_it_again(tagged):
    assert backends.library_of(Tagged) == "tagged"
    assert isinstance(backends.backend_for(Tagged), TaggedBackend)
    assert backends.library_of(np.ndarray) == "numpy"  # the base keeps its own
    unregister(Tagged)
    assert backends.library_of(Tagged) == "numpy"  # a plain subclass again
    register(TaggedBackend, Tagged)
    assert backends.library_of(Tagged) == "tagged"


def test_eager_ops_run_on_the_registered_backend(tagged):
    a, b = _data((5, 7), (7, 3))
    got = tensig.einsum("ij;jk=>ik", a.view(Tagged), b.view(Tagged))
    assert tagged["contraction"] >= 1
    assert type(got) is Tagged
    eps = np.finfo(np.float64).eps
    np.testing.assert_allclose(np.asarray(got), np.einsum("ij,jk->ik", a, b),
                               rtol=16 * 7 * eps, atol=16 * 7 * eps)
    with pytest.raises(TypeError, match="mix array libraries"):
        tensig.einsum("ij;jk=>ik", a.view(Tagged), b)


def test_a_compiled_routine_runs_on_the_registered_backend(tagged):
    a, b = (x.astype(np.float32) for x in _data((4, 6), (6, 2), seed=1))
    with G.new_graph("numpy"):
        x, y = G.leaf("x", a), G.leaf("y", b)
        out = G.leaf("out", np.zeros((4, 2), np.float32))
        model = G.Model(G.einsum("ij;jk=>ik", x, y) + out)
        code = Code().assign(out.val, Expr("relu", (Expr("mul", (out.val, 2.0)),)))
        store = model.graph.store
        for key in list(store.arrays):
            store.arrays[key] = store.arrays[key].view(Tagged)
        forward = compile_code(model.output.forward_code(), Tagged)
        forward.run(store)
        got = store.read(model.output.val)
        store.write(out.val, np.asarray(got).copy().view(Tagged))
        compile_code(code, Tagged).run(store)
        relu = store.read(out.val)
    assert tagged["contraction"] >= 1 and tagged["no_autograd"] == 2
    eps = np.finfo(np.float32).eps
    want = np.einsum("ij,jk->ik", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(np.asarray(got), want, rtol=16 * 6 * eps, atol=16 * 6 * eps)
    np.testing.assert_allclose(np.asarray(relu), np.maximum(0, 2 * np.asarray(got)))


def test_rank_lift_runs_on_the_registered_backend(tagged):
    m, v = _data((4, 3), (3,), seed=2)
    dot = rank.lift(lambda p, q: float((np.asarray(p) * np.asarray(q)).sum()), "n; n => ")
    got = dot(m.view(Tagged), v)  # a NumPy operand joins the tagged library's call
    assert tagged["asarray"] >= 1 and tagged["stack_cells"] == 1
    assert type(got) is Tagged
    eps = np.finfo(np.float64).eps
    np.testing.assert_allclose(np.asarray(got), m @ v, rtol=16 * 3 * eps, atol=16 * 3 * eps)


def test_an_unknown_array_type_is_refused_with_the_way_to_add_it():
    class Alien:
        shape = (2,)
        dtype = np.dtype(np.float32)

    with pytest.raises(TypeError, match=r"tensig.backends.register"):
        backends.backend_for(Alien)


@pytest.mark.parametrize("name", BACKENDS)
def test_add_rows_adds_repeated_ids_and_refuses_ids_outside_the_rows(name):
    """Every adapter's ``add_rows`` (an embedding's gradient): repeated ids add up, as
    ``numpy.add.at`` adds them; an id outside 0..n-1 is the same IndexError on each (NumPy
    would wrap -1, JAX's scatter and Dask's one-hot product drop it, torch raise its own
    error), Dask's when its graph runs."""
    pytest.importorskip(name)
    adapter = backends.backend_named(name)
    rng = np.random.default_rng(3)
    ids, rows = np.array([4, 0, 4, 2, 4]), rng.standard_normal((5, 3)).astype(np.float32)
    want = np.zeros((6, 3))
    np.add.at(want, ids, rows.astype(np.float64))
    got = to_numpy(name, adapter.add_rows(6, to_backend(name, ids), to_backend(name, rows)))
    bound = 4 * np.finfo(np.float32).eps * 3 * np.abs(want).max()  # sums of up to 3 rows
    np.testing.assert_allclose(got, want, rtol=0, atol=bound)
    for bad in (-1, 6):
        with pytest.raises(IndexError, match=rf"add_rows: id {bad} is outside 0\.\.5"):
            to_numpy(name, adapter.add_rows(6, to_backend(name, np.r_[ids[:-1], bad]),
                                            to_backend(name, rows)))


def test_neutral_elements_have_one_source_per_library():
    import torch

    for dtype, lo, hi in [(np.dtype(np.int8), -128, 127), (np.dtype(np.uint16), 0, 65535),
                          (np.dtype(bool), False, True), (np.dtype(np.float32), -np.inf, np.inf),
                          (torch.int16, -32768, 32767), (torch.bool, False, True),
                          (torch.float64, -np.inf, np.inf)]:
        assert backends.neutral_max(dtype) == lo, dtype
        assert backends.neutral_min(dtype) == hi, dtype


def test_compiled_min_accumulation_starts_from_an_integer_dtypes_maximum():
    """A min accumulation into a buffer nothing wrote starts from the neutral element of min:
    for an integer buffer its dtype's maximum (it was the float ``inf``, which an integer
    array cannot hold)."""
    values = np.array([[5, -3, 7], [2, 9, -8]], np.int32)
    with G.new_graph("numpy") as g:
        x = G.leaf("x", values)
        out = G.leaf("out", np.zeros((2, 3), np.int32))
        model = G.Model(x + out)
        code = Code().assign(out.val, x.val, accum="min")
        del model.graph.store.arrays[out.val.key]  # nothing wrote it: min starts from neutral
        compile_code(code, g.array_type).run(model.graph.store)
        got = model.graph.store.read(out.val)
    np.testing.assert_array_equal(got, values)


def test_importing_tensig_imports_no_array_library_but_numpy():
    """The adapters import their library only when its first array shows up (einops' way):
    importing tensig, and running it on NumPy arrays, loads neither torch, JAX nor Dask."""
    code = ("import sys, numpy as np, tensig; tensig.einsum('ij;jk=>ik', np.ones((2, 3)), "
            "np.ones((3, 4))); print(sorted(m for m in ('torch', 'jax', 'dask') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_importing_tensig_leaves_signal_to_verify_s_time_limit():
    """``signal`` is needed only when verify arms its time limit; imported with tensig it
    cost every ``import tensig`` about a millisecond for nothing."""
    code = "import sys, tensig; print('signal' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_eager_plans_are_keyed_by_adapter_not_array_type(monkeypatch):
    """Two array types of one adapter (an ndarray subclass, which NumPy's adapter takes) share
    one plan; the same type under another registered adapter gets its own."""
    built = []
    build = eager._plan
    monkeypatch.setattr(eager, "_plan", lambda *args: built.append(args) or build(*args))

    class Sub(np.ndarray):
        pass

    a, b = np.ones((2, 3)), np.ones((3, 5))
    spec = "ij;jk=>ik"
    eager._PLANS.clear()
    want = tensig.einsum(spec, a, b)
    got = tensig.einsum(spec, a.view(Sub), b.view(Sub))
    assert len(built) == 1  # found by the NumPy adapter: the plan of plain arrays
    np.testing.assert_array_equal(np.asarray(got), want)
    register(PoolOnly, Sub)
    try:
        tensig.einsum(spec, a.view(Sub), b.view(Sub))
    finally:
        unregister(Sub)
    assert len(built) == 2  # another adapter: a plan of its own


def _pool_windows(x, kernel, strides, dilations, pads, fill):
    """``x`` (N, C, *spatial) padded with ``fill``, each spatial axis cut into its windows
    (stride and dilation applied): (N, C, *outputs, *kernel)."""
    from numpy.lib.stride_tricks import sliding_window_view

    x = np.pad(np.asarray(x), [(0, 0), (0, 0), *pads], constant_values=fill)
    for d, (k, s, dl) in enumerate(zip(kernel, strides, dilations, strict=True)):
        x = sliding_window_view(x, (k - 1) * dl + 1, axis=2 + d)[..., ::dl]
        x = x[(slice(None),) * (2 + d) + (slice(None, None, s),)]
    return x


class PoolOnly(TaggedBackend):
    """A library with its own max pooling and nothing else of the kind (no conv, no
    conv_accepts of its own): the lowering must run it without asking for the others."""

    name = "pool-only"

    def max_pool(self, x, kernel, strides, dilations, pads):
        self.calls["max_pool"] += 1
        w = _pool_windows(x, kernel, strides, dilations, pads, -np.inf)
        return w.max(axis=tuple(range(-len(kernel), 0))).view(Tagged), None  # nothing saved


class PlainPoolOnly(PoolOnly):
    """:class:`PoolOnly` whose ``max_pool`` gives the pooled array alone, not a pair."""

    name = "plain-pool-only"

    def max_pool(self, *args):
        return super().max_pool(*args)[0]


class ConvOnly(TaggedBackend):
    """A library with its own convolution only (no conv_backward, no max_pool)."""

    name = "conv-only"

    def conv(self, x, w, strides, dilations, pads, channels_last=False):
        self.calls["conv"] += 1
        win = _pool_windows(x, w.shape[2:], strides, dilations, pads, 0)
        nd = len(strides)
        outs, ks = "xyz"[:nd], "ijk"[:nd]
        return np.einsum(f"nc{outs}{ks},oc{ks}->no{outs}", win, np.asarray(w)).view(Tagged)


@pytest.mark.parametrize(("adapter", "kernel"), [(PoolOnly, "max_pool"),
                                                  (PlainPoolOnly, "max_pool"),
                                                  (ConvOnly, "conv")])
def test_a_backend_with_some_kernels_runs_every_operation(adapter, kernel):
    """Capabilities are declared on :class:`~tensig.backends.Backend` (``None``: none): an
    adapter with its own pooling but no convolution (or the other way round), and no
    ``conv_accepts`` of its own, runs both operations, its kernel where it has one and the
    generic windows elsewhere.  Oracle: the same operations on plain NumPy arrays."""
    register(adapter, Tagged)
    adapter.calls.clear()
    # no cache clearing: plans are keyed by adapter, so the other adapter's (the previous
    # parameter's, for the same array type) are not found
    try:
        x, k = (a.astype(np.float32) for a in _data((2, 9, 9, 3), (3, 3, 3, 4), seed=3))
        conv = "n, 2*oh<+kh, ow=+kw, c; kh, kw, c, o => n, oh, ow, o"
        pool = "n, 2*oh<+wh, 2*ow<+ww, c; wh, ww => n, oh, ow, c"
        window = np.zeros((2, 2), np.float32)
        got_conv = tensig.einsum(conv, x.view(Tagged), k.view(Tagged))
        y = np.ascontiguousarray(x[:, :8, :8])  # 2x2 windows, stride 2: an even size
        got_pool = tensig.tropical(pool, y.view(Tagged), window.view(Tagged))
    finally:
        unregister(Tagged)
    assert adapter.calls[kernel] == 1
    assert type(got_conv) is Tagged and type(got_pool) is Tagged
    eps = np.finfo(np.float32).eps
    np.testing.assert_allclose(np.asarray(got_conv), tensig.einsum(conv, x, k),
                               rtol=16 * 27 * eps, atol=16 * 27 * eps)
    np.testing.assert_array_equal(np.asarray(got_pool), tensig.tropical(pool, y, window))


def test_an_eager_jax_graph_runs_where_its_operands_live():
    """``JaxBackend.device_of`` names an array's device, so a graph operation applied to JAX
    arrays (an eager graph) computes on their device, not JAX's default: on a second CPU
    device here (two host devices forced in a fresh process)."""
    pytest.importorskip("jax")
    code = """if True:
        import os
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
        import jax, numpy as np
        from tensig.model import graph as G
        cpu1 = jax.devices("cpu")[1]
        a = jax.device_put(np.arange(6.0, dtype=np.float32).reshape(2, 3), cpu1)
        b = jax.device_put(np.ones((3, 4), np.float32), cpu1)
        out = G.einsum("ij;jk=>ik", a, b)
        from tensig.backends import backend_for
        print(backend_for(type(a)).device_of(a), out.devices() == {cpu1},
              np.asarray(out).tolist() == (np.asarray(a) @ np.asarray(b)).tolist())
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["cpu:1", "True", "True"]


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_torch_max_pool_backward_reuses_the_places_only_of_the_same_values(nd):
    """TorchBackend's pooling and its backward against torch's autograd through
    ``max_poolNd`` (ties included: rounded values), for 1-3 spatial axes and padding: with
    the places the pooling saved, without any, with places saved before ``x`` was written
    in place (found again, not reused), and in inference mode."""
    torch = pytest.importorskip("torch")
    from torch.nn import functional as F

    from tensig.backends.torch import TorchBackend

    be = TorchBackend()
    shape, kernel = (2, 3, *[5] * nd), [3] * nd
    geometry = (kernel, [2] * nd, [1] * nd, [(1, 1)] * nd)
    x = torch.tensor(np.round(np.random.default_rng(nd).standard_normal(shape)),
                     dtype=torch.float32)

    def want(x):
        t = x.clone().requires_grad_(True)
        y = getattr(F, f"max_pool{nd}d")(t, kernel, 2, 1)
        (y * y).sum().backward()
        return y.detach(), t.grad

    y, saved = be.max_pool(x, *geometry)
    ty, tg = want(x)
    torch.testing.assert_close(y, ty, rtol=0, atol=0)
    for s in (saved, None):
        torch.testing.assert_close(be.max_pool_backward(2 * y, x, s, *geometry), tg,
                                   rtol=0, atol=0)
    x.mul_(-1)  # the saved places are stale now
    _, tg = want(x)
    g = 2 * be.max_pool(x, *geometry)[0]
    torch.testing.assert_close(be.max_pool_backward(g, x, saved, *geometry), tg, rtol=0,
                               atol=0)
    with torch.inference_mode():  # no version counter: the places are taken as saved
        xi = x.clone()
        y, saved = be.max_pool(xi, *geometry)
        assert saved[1] is None
        torch.testing.assert_close(be.max_pool_backward(2 * y, xi, saved, *geometry), tg,
                                   rtol=0, atol=0)


def test_torch_max_pooling_keeps_no_array_alive_for_its_backward():
    """An eager torch max pooling keeps nothing for a backward (a compiled routine keeps
    the maxima's places in its store, holding the pooled input only weakly), so its input
    (a caller's tensor, an activation on the GPU) is freed once its owner drops it; the
    pooling itself is torch's."""
    torch = pytest.importorskip("torch")
    from torch.nn import functional as F

    x = torch.tensor(np.round(np.random.default_rng(0).standard_normal((2, 3, 8, 8))),
                     dtype=torch.float32)
    alive = weakref.ref(x)
    y = tensig.tropical("n, c, 2*oh<+wh, 2*ow<+ww; wh, ww => n, c, oh, ow", x,
                        torch.zeros(2, 2))
    torch.testing.assert_close(y, F.max_pool2d(x, 2), rtol=0, atol=0)
    del x
    gc.collect()
    assert alive() is None


def test_numpy_row_sums_as_a_product_with_ones_and_their_fallbacks():
    """The NumPy adapter's ``row_sum`` (layer norm's and attention's row sums, computed as a
    product with a column of ones over trailing axes of a C-ordered float array) gives
    NumPy's ``sum`` with the axes kept, and falls back to it for leading axes, a transposed
    view and integers; rows of no cells sum to 0, an axis past the last is refused."""
    ours = NumpyBackend()
    x = np.random.default_rng(3).standard_normal((3, 4, 5)).astype(np.float32)
    x[0, 0, 0] = np.inf
    cases = [(x, (-1,)), (x, (1, 2)), (x, (0,)), (x.transpose(2, 1, 0), (-1,)),
             (np.arange(60).reshape(3, 4, 5), (2,)), (x[:, :, :0].copy(), (-1,)),
             (x[:, :0].copy(), (1, 2))]
    for a, axes in cases:
        got, want = ours.row_sum(a, axes), np.sum(a, axis=axes, keepdims=True)
        assert got.shape == want.shape and got.dtype == want.dtype
        n = math.prod(a.shape[i] for i in axes)  # BLAS and NumPy add in their own orders
        scale = np.sum(np.abs(np.where(np.isfinite(a), a, 0)), axis=axes).max(initial=1.0)
        np.testing.assert_allclose(got, want, rtol=0, atol=tolerance(a.dtype, n, 2) * scale)
    with pytest.raises(np.exceptions.AxisError):
        ours.row_sum(x, (5,))


@pytest.mark.parametrize("name", ["numpy", "torch", "jax"])
@pytest.mark.parametrize("axes", [(1,), (0,)])
def test_layer_norm_statistics_of_float16_rows_past_its_range(name, axes):
    """Layer norm's mean and variance of float16 rows whose sum passes float16's largest
    number (65504: 1024 values near 100, spread 10) are means, as each library's mean takes
    them (its sum of float16 rounds back to float16, inf here): finite, and within a few
    units of float16's rounding of float64's statistics (torch's own kernel along the last
    axis, the generic formula along the first)."""
    if name != "numpy":
        pytest.importorskip(name)
    ours = backends.backend_named(name)
    x = (np.random.default_rng(5).standard_normal((16, 1024)) * 10 + 100).astype(np.float16)
    x = x if axes == (1,) else x.T.copy()
    y, mean, rstd = (ours.to_numpy(a).astype(np.float64)
                     for a in ours.normalize(ours.asarray(x), axes, 1e-5))
    x64 = x.astype(np.float64)
    mean64 = x64.mean(axis=axes, keepdims=True)
    rstd64 = 1 / np.sqrt(x64.var(axis=axes, keepdims=True) + 1e-5)
    eps = float(np.finfo(np.float16).eps)
    np.testing.assert_allclose(mean, mean64, rtol=2 * eps)
    np.testing.assert_allclose(rstd, rstd64, rtol=8 * eps)
    np.testing.assert_allclose(y, (x64 - mean64) * rstd64, atol=16 * eps)


def test_numpy_gelu_and_its_gradient_of_a_0d_array():
    """The NumPy adapter's in-place GELU on a 0-d array (a graph's scalar tensor), whose
    products NumPy returns as scalars that no pass can write into: torch's tanh-form values."""
    torch = pytest.importorskip("torch")
    ours = NumpyBackend()
    for v in (-3.0, 0.5, 2.0):
        x = np.array(v, np.float32)
        t = torch.tensor(v, dtype=torch.float64, requires_grad=True)
        want = torch.nn.functional.gelu(t, approximate="tanh")
        want.backward()
        tol = tolerance(np.float32, 1, 32) * max(1.0, abs(v))  # float32 against float64
        np.testing.assert_allclose(ours.gelu(x), want.item(), rtol=0, atol=tol)
        np.testing.assert_allclose(ours.gelu_backward(x, np.array(0.5, np.float32)),
                                   0.5 * t.grad.item(), rtol=0, atol=tol)


def test_torch_max_over_full_axes_of_an_empty_batch_keeps_its_autograd_graph():
    """A max over non-empty axes of a tensor with an empty kept axis is torch's own amax, in
    its autograd graph (a zero-size gradient), not a detached fill of the neutral element."""
    torch = pytest.importorskip("torch")
    x = torch.zeros(0, 4, requires_grad=True)
    tensig.einmax1("ij => i", x).sum().backward()
    assert x.grad is not None and x.grad.shape == (0, 4)


@pytest.mark.parametrize("name", ["numpy", "torch"])
def test_numpy_and_torch_take_a_pooling_window_s_max_as_a_chain_of_maximums(name, monkeypatch):
    """Their reductions over a 2x2 window loop per output cell (193 us against 50 for torch,
    :func:`small_amax`), so their adapters set ``unrolls_max``: ``amax`` takes the chain."""
    import tensig.backends.base as base

    pytest.importorskip(name)
    calls: list[tuple[int, ...]] = []
    real = base.small_amax
    monkeypatch.setattr(base, "small_amax",
                        lambda x, axes, f: calls.append(axes) or real(x, axes, f))
    a = np.arange(64.0).reshape(4, 4, 2, 2)
    got = backends.backend_named(name).amax(to_backend(name, a), (2, 3))
    np.testing.assert_array_equal(to_numpy(name, got), a.max(axis=(2, 3)))
    assert calls == [(2, 3)]
