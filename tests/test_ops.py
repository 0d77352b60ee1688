"""The eager operations on every backend, against independent oracles: numpy.einsum,
np.correlate, torch's conv2d / max_pool2d / avg_pool2d, and hand-written numpy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import tensig as ts
from arrays import classic_specs, to_backend, to_numpy
from tensig import ShapeError
from tensig.execution.eager import RowArray


def run(backend: str, fn, spec: str, *xs, rows=None, **kw) -> np.ndarray:
    args = [to_backend(backend, x) for x in xs]
    if rows is not None:
        args = [ts.rows(a, batch=b, input=i) if (b or i) else a
                for a, (b, i) in zip(args, rows, strict=True)]
    return to_numpy(backend, fn(spec, *args, **kw))


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64), b, rtol=tol, atol=tol)


rng = np.random.default_rng(7)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# -- einsum family on every backend ---------------------------------------------------------------


def test_matmul_and_friends(backend):
    a, b = rand(3, 4), rand(4, 5)
    close(run(backend, ts.einsum, "ij;jk=>ik", a, b), a @ b)
    close(run(backend, ts.einsum1, "ij=>ji", a), a.T)
    close(run(backend, ts.einsum1, "ij=>", a), a.sum())
    sq = rand(4, 4)
    close(run(backend, ts.einsum1, "ii=>i", sq), np.diag(sq))
    close(run(backend, ts.einsum1, "ii=>", sq), np.trace(sq))
    v = rand(3)
    close(run(backend, ts.einsum1, "i=>ii", v), np.diag(v))
    placed = np.zeros((3, 3), np.float32)
    placed[:, 2] = v
    close(run(backend, ts.einsum1, "i=>i2", v), placed)
    close(run(backend, ts.einsum1, "i2=>i", a), a[:, 2])


def test_batched_rows(backend):
    # x: 8 | 4 -> 3 stored (b, o, i); w: 3 -> 5 stored (p, o); result 8 | 4 -> 5 as (b, p, i)
    xb, w = rand(8, 3, 4), rand(5, 3)
    got = run(backend, ts.einsum, "b|i->o; o->p => b|i->p", xb, w, rows=[(1, 1), (0, 1)])
    close(got, np.einsum("boi,po->bpi", xb, w))


def test_reduce_batch_and_slice(backend):
    x = rand(4, 5, 6)
    close(run(backend, ts.einsum1, "... => |->0", x, rows=[(1, 0)]), [x.sum()])
    close(run(backend, ts.einsum1, "...|...->... => |...->...", x, rows=[(2, 0)]),
          x.sum(axis=(0, 1)))
    close(run(backend, ts.einsum1, "2..v..|... => ..v..", x, rows=[(2, 0)]),
          x[2].sum(axis=1))


def test_replication(backend):
    v = rand(3)
    close(run(backend, ts.einsum1, "i => ij", v, sizes={"j": 2}), np.repeat(v[:, None], 2, 1))
    x = rand(3, 2)
    close(run(backend, ts.einsum, "i; ij => ij", v, x), v[:, None] * x)


def test_outer_sum_and_max(backend):
    a, b = rand(3), rand(4)
    close(run(backend, ts.outer_sum, "i; j => ij", a, b), a[:, None] + b[None, :])
    close(run(backend, ts.outer_sum, "i; j => i", a, b), 4 * a + b.sum())
    c = rand(3)
    close(run(backend, ts.outer_sum, "i; i => ", a, c), (a + c).sum())
    m = rand(3, 5)
    close(run(backend, ts.einmax1, "ij => i", m), m.max(axis=1))
    close(run(backend, ts.einmax1, "ij => ", m), m.max())
    n = rand(5, 2)
    close(run(backend, ts.tropical, "ij; jk => ik", m, n), (m[:, :, None] + n[None]).max(axis=1))


# -- convolution and pooling ----------------------------------------------------------------------


@pytest.mark.parametrize("spec, stride, dilation, n", [
    ("o<+k; k => o", 1, 1, 10),
    ("2*o<+k; k => o", 2, 1, 9),
    ("o<+2*k; k => o", 1, 2, 11),
    ("3*o<+2*k; k => o", 3, 2, 14),
])
def test_1d_valid_convolution(backend, spec, stride, dilation, n):
    x, k = rand(n), rand(3)
    span = (3 - 1) * dilation + 1
    ref = np.array([sum(x[stride * o + dilation * j] * k[j] for j in range(3))
                    for o in range((n - span) // stride + 1)])
    close(run(backend, ts.einsum, spec, x, k), ref)


def test_1d_padded_convolution(backend):
    x, k = rand(10), rand(3)
    close(run(backend, ts.einsum, "o=+k; k => o", x, k), np.correlate(x, k, "same"))
    close(run(backend, ts.einsum, "o+k; k => o", x, k, use_padding=True),
          np.correlate(x, k, "same"))


def test_padded_convolution_of_an_empty_axis_is_empty(backend):
    """A padded axis of size 0 has no windows: ``o = 0``, an empty result.  NumPy's and
    torch's window views (and Dask's overlap, torch's conv) refused the padded axis, shorter
    than the kernel, with their own errors."""
    x, k = np.zeros((2, 0)), rand(3)
    assert run(backend, ts.einsum1, "i, o+k => i, o", x, sizes={"k": 3},
               use_padding=True).shape == (2, 0)
    assert run(backend, ts.einsum, "i, o+k; k => i, o", x, k, use_padding=True).shape == (2, 0)
    assert run(backend, ts.einsum, "i, 2*o=+k; k => i, o", x, k).shape == (2, 0)


@pytest.mark.parametrize("stride, dilation, padded", [(1, 1, False), (2, 1, False),
                                                     (1, 2, False), (1, 1, True),
                                                     (2, 2, False)])
def test_2d_convolution_against_torch(backend, stride, dilation, padded):
    n, h, w, ic, oc, k = 2, 9, 11, 3, 4, 3
    op = "=+" if padded else "<+"
    spec = (f"...|{stride}*oh{op}{dilation}*kh, {stride}*ow{op}{dilation}*kw, ic; "
            "|kh, kw, ic -> oc => ...|oh, ow, oc")
    x, weight = rand(n, h, w, ic), rand(oc, k, k, ic)
    if stride == 2 and not padded:
        x = rand(n, 9, 11, ic)
    if dilation == 2 and stride == 2:
        x = rand(n, 9, 13, ic)
    got = run(backend, ts.einsum, spec, x, weight, rows=[(1, 0), (0, 3)])
    ref = F.conv2d(torch.tensor(x).permute(0, 3, 1, 2), torch.tensor(weight).permute(0, 3, 1, 2),
                   stride=stride, dilation=dilation, padding=1 if padded else 0)
    close(got, ref.permute(0, 2, 3, 1).numpy(), tol=1e-4)


def test_max_and_avg_pooling_against_torch(backend):
    x = rand(2, 8, 6, 3)
    spec = "...|2*oh<+wh, 2*ow<+ww, c; |wh, ww => ...|oh, ow, c"
    got = run(backend, ts.tropical, spec, x, np.zeros((2, 2), np.float32), rows=[(1, 0), (0, 0)])
    ref = F.max_pool2d(torch.tensor(x).permute(0, 3, 1, 2), 2).permute(0, 2, 3, 1)
    close(got, ref.numpy())
    got = run(backend, ts.einsum, spec, x, np.full((2, 2), 0.25, np.float32),
              rows=[(1, 0), (0, 0)])
    ref = F.avg_pool2d(torch.tensor(x).permute(0, 3, 1, 2), 2).permute(0, 2, 3, 1)
    close(got, ref.numpy())


def test_padded_max_pool_reads_minus_infinity(backend):
    x = -np.abs(rand(1, 5, 5, 2)) - 1.0  # all negative: a zero pad would win the max
    spec = "...|oh=+wh, ow=+ww, c; |wh, ww => ...|oh, ow, c"
    got = run(backend, ts.tropical, spec, x, np.zeros((3, 3), np.float32), rows=[(1, 0), (0, 0)])
    ref = F.max_pool2d(torch.tensor(x).permute(0, 3, 1, 2), 3, stride=1, padding=1)
    close(got, ref.permute(0, 2, 3, 1).numpy())


def test_offset_form(backend):
    x = rand(8)
    close(run(backend, ts.einsum1, "2*o+1 => o", x), x[1::2])
    close(run(backend, ts.einsum1, "2*o => o", x), x[::2])


# -- concatenation --------------------------------------------------------------------------------


def test_concatenation(backend):
    a, b, c = rand(2), rand(3), rand(4)
    close(run(backend, ts.concat, "a; b => a^b", a, b), np.concatenate([a, b]))
    close(run(backend, ts.concat, "a; b; c => a^b^c", a, b, c), np.concatenate([a, b, c]))
    x = rand(6)
    close(run(backend, ts.concat, "3^a => a", x), x[3:])
    close(run(backend, ts.concat, "a => a^3", a), np.concatenate([a, np.zeros(3)]))
    close(run(backend, ts.concat, "3^a^1 => a", x), x[3:5])
    s1, s2 = rand(2, 2), rand(2, 3)
    close(run(backend, ts.concat, "s, a; s, b => s, a^b", s1, s2), np.concatenate([s1, s2], 1))
    y = [rand(1, 2), rand(2, 2), rand(1, 2)]
    close(run(backend, ts.concat, "x, ...; y, ...; z, ... => x^y^z, ...", *y), np.concatenate(y))


# -- captures, rows, errors -----------------------------------------------------------------------


def test_capture_returns_sizes():
    y, sizes = ts.einsum1("...|h, w, ..c.. => ...|..c..", ts.rows(np.ones((2, 3, 4, 5)), batch=1),
                          capture=["h", "w", "c"])
    assert sizes == {"h": 3, "w": 4, "c": 5}
    assert isinstance(y, RowArray) and y.rows == ts.Shape.parse("2|5")
    with pytest.raises(ValueError, match="cannot capture 'q'"):
        ts.einsum1("ij => i", np.ones((2, 3)), capture=["q"])


def test_rows_wrapper():
    x = ts.rows(np.zeros((2, 3, 4)), batch=1, input=1)
    assert x.rows == ts.Shape.parse("2|4->3") and x.shape == (2, 3, 4)
    assert np.asarray(x).shape == (2, 3, 4)
    with pytest.raises(ValueError, match="exceed"):
        ts.rows(np.zeros((2, 3)), batch=2, input=1)
    with pytest.raises(ValueError):
        ts.rows(np.zeros((2, 3)), batch=-1)


def test_errors_before_computation():
    with pytest.raises(ShapeError, match="rank mismatch"):
        ts.einsum("ij;jk=>ik", np.ones((2, 3, 4)), np.ones((3, 4)))
    with pytest.raises(ShapeError, match="size mismatch for label 'j': 3 vs 4"):
        ts.einsum("ij;jk=>ik", np.ones((2, 3)), np.ones((4, 4)))
    with pytest.raises(ShapeError, match="must be a positive int"):
        ts.einsum("s*o<+k; k => o", np.ones(9), np.ones(3), params={"s": 1.5})
    with pytest.raises(TypeError, match="mix array libraries"):
        ts.einsum("ij;jk=>ik", np.ones((2, 3)), torch.ones(3, 4))
    with pytest.raises(TypeError, match="not an array"):
        ts.einsum("ij;jk=>ik", np.ones((2, 3)), {"j": 1.0})
    with pytest.raises(TypeError, match="does not know arrays"):
        ts.einsum1("i => i", _FakeArray())
    with pytest.raises(ShapeError, match="einsum takes at least 2"):
        ts.einsum("i => i", np.ones(3))


class _FakeArray:
    shape = (3,)


def test_results_keep_the_array_kind_and_dtype():
    a = torch.ones(2, 3, dtype=torch.float64)
    assert ts.einsum1("ij => ji", a).dtype == torch.float64
    r = ts.einmax1("ij => i", np.arange(6, dtype=np.int64).reshape(2, 3))
    assert r.dtype == np.int64 and list(r) == [2, 5]
    # integer max pooling with padding uses the dtype's minimum as neutral
    r = ts.tropical("o=+w; w => o", np.array([-5, -7, -9], dtype=np.int64),
                    np.zeros(3, dtype=np.int64))
    assert list(r) == [-5, -5, -7]


def test_repeated_calls_use_the_plan_cache(monkeypatch):
    from tensig.execution import eager as ops
    from tensig.execution.eager import _PLANS

    built = []
    build = ops._plan
    monkeypatch.setattr(ops, "_plan", lambda *args: built.append(args) or build(*args))
    a, b = np.ones((2, 3)), np.ones((3, 4))
    _PLANS.clear()  # so the first call below builds its plan, whatever ran before
    ts.einsum("ij;jk=>ik", a, b)
    n = len(_PLANS)
    for _ in range(3):
        ts.einsum("ij;jk=>ik", a, b)
    assert len(_PLANS) == n
    assert len(built) == 1  # built once, then found in the cache


# -- numpy.einsum as an oracle for random classic specs -------------------------------------------


@settings(max_examples=150, deadline=None)
@given(classic_specs(alphabet=6, labels=5, sizes=3, ops=(2, 3), axes=3),
       st.integers(0, 2**16))
def test_random_classic_specs_match_numpy_einsum(case, seed):
    ops, out, sizes = case
    g = np.random.default_rng(seed)
    arrays = [g.standard_normal([sizes[c] for c in op]) for op in ops]
    ref = np.einsum(",".join("".join(o) for o in ops) + "->" + "".join(out), *arrays)
    got = ts.einsum(";".join("".join(o) for o in ops) + "=>" + "".join(out), *arrays)
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9)


def test_torch_convolution_lowering_matches_the_generic_path():
    # torch uses its own conv for floats; integers take the windows + einsum path
    x = torch.randint(-3, 4, (2, 8, 6, 3))
    w = torch.randint(-3, 4, (4, 3, 3, 3))
    spec = "...|2*oh=+kh, ow<+kw, ic; |kh, kw, ic -> oc => ...|oh, ow, oc"
    ints = ts.einsum(spec, ts.rows(x, batch=1), ts.rows(w, input=3)).array
    floats = ts.einsum(spec, ts.rows(x.double(), batch=1), ts.rows(w.double(), input=3)).array
    assert ints.dtype == torch.int64
    assert torch.equal(ints.double(), floats)


def test_numpy_blocked_gemm_matches_einsum(monkeypatch):
    from numpy.lib.stride_tricks import sliding_window_view

    from tensig.backends import _NumpyGemm

    monkeypatch.setattr(_NumpyGemm, "BLOCK_BYTES", 64)  # force many blocks
    x = rng.standard_normal((3, 8, 7, 4))
    w = rng.standard_normal((5, 3, 2, 4))
    view = sliding_window_view(sliding_window_view(x, 3, axis=1), 2, axis=2)
    gemm = _NumpyGemm.plan(np, "nabicd,ocdi->nabo")
    assert gemm is not None
    close(gemm(view, w), np.einsum("nabicd,ocdi->nabo", view, w), tol=1e-10)
    # batch axes shared by both operands go through matmul's batch dimension
    a, b = rng.standard_normal((4, 3, 5)), rng.standard_normal((4, 5, 2))
    close(_NumpyGemm.plan(np, "bij,bjk->kbi")(a, b), np.einsum("bij,bjk->kbi", a, b), tol=1e-10)
    assert _NumpyGemm.plan(np, "ii,ij->j") is None  # diagonals stay with einsum


def test_numpy_gemm_leaves_the_result_in_its_order():
    """A weight applied to activations (``ab,cdb->cda``: the weight's rows last in the result)
    is computed with the operands exchanged, so the result is C-ordered, not a transposed
    view that every later pass reads against its grain."""
    from tensig.backends import _NumpyGemm

    w, x = rng.standard_normal((6, 5)), rng.standard_normal((3, 4, 5))
    got = _NumpyGemm.plan(np, "ab,cdb->cda")(w, x)
    close(got, np.einsum("ab,cdb->cda", w, x), tol=1e-10)
    assert got.flags.c_contiguous


@st.composite
def two_operand_subscripts(draw):
    """Einsum subscripts of two operands without repeated labels: batch, free, contracted
    and summed-alone labels in any order, any result order."""
    labels = list("abcdef")[:draw(st.integers(1, 6))]
    a = [c for c in labels if draw(st.booleans())]
    b = [c for c in labels if draw(st.booleans())]
    present = list(dict.fromkeys(a + b))
    out = [c for c in present if draw(st.booleans())]
    a = draw(st.permutations(a))
    b = draw(st.permutations(b))
    out = draw(st.permutations(out))
    sizes = {c: draw(st.integers(1, 4)) for c in labels}
    return f"{''.join(a)},{''.join(b)}->{''.join(out)}", sizes


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@settings(max_examples=80, deadline=None)
@given(two_operand_subscripts())
def test_planned_matmul_contractions_match_einsum(lib, case):
    """The compiled routines' contraction plans (reshapes around one matmul, every
    permutation worked out at plan time) against numpy.einsum."""
    from tensig.backends import _matmul_plan

    subscripts, sizes = case
    ins = subscripts.split("->")[0].split(",")
    rng = np.random.default_rng(len(subscripts))
    xs = [rng.standard_normal([sizes[c] for c in s]).astype(np.float32) for s in ins]
    matmul = np.matmul if lib == "numpy" else torch.matmul
    plan = _matmul_plan(matmul, subscripts, [x.shape for x in xs])
    args = xs if lib == "numpy" else [torch.tensor(x) for x in xs]
    got = np.asarray(plan(*args))
    want = np.einsum(subscripts, *xs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("subscripts", ["bhwc,bhwc->c", "bhc,hcb->cb", "bc,cb->c"])
def test_batched_dot_products_plan_as_a_product_and_a_sum(lib, subscripts):
    """Every label in both operands, the batch ones not leading (batch norm's per-channel
    sums): planned as a product and a sum, not a matmul over copied-out batches; the same
    values and dtype as einsum (an int8 sum stays int8, wrapping as NumPy's does)."""
    from tensig.backends import _matmul_plan, backend_for

    ins = subscripts.split("->")[0].split(",")
    sizes = {"b": 3, "h": 4, "w": 2, "c": 5}
    rng = np.random.default_rng(7)
    matmul = np.matmul if lib == "numpy" else torch.matmul
    promote = backend_for(np.ndarray if lib == "numpy" else torch.Tensor).result_dtype
    for dtype in (np.float32, np.int8):
        xs = [rng.integers(-9, 9, [sizes[c] for c in s]).astype(dtype) for s in ins]
        plan = _matmul_plan(matmul, subscripts, [x.shape for x in xs], promote)
        assert plan.__qualname__.startswith("_product_sum")
        got = plan(*(xs if lib == "numpy" else [torch.tensor(x) for x in xs]))
        got = got.numpy() if lib == "torch" else got
        want = np.einsum(subscripts, *xs)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)  # small integers: exact in float32 too


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=4), data=st.data(),
       dtype=st.sampled_from([np.float32, np.float64, np.int64]),
       value=st.sampled_from([0, 1.5, -np.inf]))
def test_numpy_backends_pad_is_numpys_pad(shape, data, dtype, value):
    """The NumPy backend pads by a fill and a copy (numpy.pad is slow); same result, same
    dtype, empty axes included."""
    from tensig.backends import NumpyBackend

    if value == -np.inf and dtype is np.int64:
        value = int(np.iinfo(np.int64).min)  # what the max's neutral element is for ints
    widths = [data.draw(st.tuples(st.integers(0, 3), st.integers(0, 3))) for _ in shape]
    x = (np.arange(int(np.prod(shape))) - 3).reshape(shape).astype(dtype)
    got = NumpyBackend().pad(x, widths, value)
    want = np.pad(x, widths, mode="constant", constant_values=value)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data(),
       layout=st.sampled_from(["c", "f", "reversed", "strided"]))
def test_numpy_backends_windows_are_sliding_window_view(shape, data, layout):
    """The NumPy backend builds window views from the strides itself (numpy's
    sliding_window_view checks its arguments in Python on every call): the same view at
    every step-th position, as read-only, for C, Fortran, reversed and strided arrays."""
    from numpy.lib.stride_tricks import sliding_window_view

    from tensig.backends import NumpyBackend

    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    x = {"c": x, "f": np.asfortranarray(x), "reversed": x[::-1],
         "strided": np.repeat(x, 2, axis=0)[::2]}[layout]
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    size, step = data.draw(st.integers(1, x.shape[axis])), data.draw(st.integers(1, 3))
    got = NumpyBackend().windows(x, axis, size, step)
    every = (slice(None),) * (axis % x.ndim) + (slice(None, None, step),)
    want = sliding_window_view(x, size, axis=axis)[every]
    assert got.shape == want.shape and not got.flags.writeable
    np.testing.assert_array_equal(got, want)


def test_registered_tensor_types_answer_the_eager_functions(monkeypatch):
    # a later layer's tensor type (the model layer's graph Tensor) answers the eager
    # functions through the hook it registers: eager imports nothing above it
    from tensig.execution import eager

    class Lazy:
        shape = (2, 2)

    calls = []
    monkeypatch.setitem(eager._HANDLERS, Lazy, lambda *a: calls.append(a) or "node")
    x = np.ones((2, 2))
    assert ts.einsum("ij;jk=>ik", Lazy(), x) == "node"
    assert ts.einmax1("ij => i", Lazy(), sizes={"i": 2}) == "node"
    assert [(op, spec, len(xs), options) for op, spec, xs, options in calls] == [
        ("einsum", "ij;jk=>ik", 2, {}), ("einmax1", "ij => i", 1, {"sizes": {"i": 2}})]
    assert ts.einsum("ij;jk=>ik", x, x).shape == (2, 2)  # arrays still run
