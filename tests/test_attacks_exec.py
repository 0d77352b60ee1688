"""Adversarial execution cases (issue 12, section 2, items 9-14), each a reproduction that
failed before its fix: dtype promotion, empty windows, ndarray subclasses, the neutral element
of max for integers, the pooling fast path's zero test, and concatenation planning."""

from __future__ import annotations

import numpy as np
import pytest
from tests.limits import run_limited

import tensig as ts
from tensig.model import graph as G

torch = pytest.importorskip("torch")


# -- 9: dtypes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("spec, theirs, shapes", [
    ("i;j=>ij", "i,j->ij", [(3,), (4,)]),
    ("ij;jk=>ik", "ij,jk->ik", [(2, 3), (3, 4)]),
    ("i,j;j=>i", "ij,j->i", [(3, 5), (5,)]),
])
def test_torch_mixed_dtypes_promote(spec, theirs, shapes):
    """int8 with float32 is float32, as torch's promotion says (torch.einsum promotes an
    outer product and refuses a contraction; tensig promotes both alike)."""
    rng = np.random.default_rng(0)
    a = torch.tensor(rng.integers(-5, 5, shapes[0]), dtype=torch.int8)
    b = torch.tensor(rng.standard_normal(shapes[1]), dtype=torch.float32)
    out = ts.einsum(spec, a, b)
    assert out.dtype == torch.promote_types(a.dtype, b.dtype) == torch.float32
    want = np.einsum(theirs, a.numpy().astype(np.float64), b.numpy().astype(np.float64))
    n = max(shapes[0][-1], 1)
    np.testing.assert_allclose(out.numpy(), want, rtol=0, atol=8 * n * np.finfo(np.float32).eps
                               * (1 + np.abs(want).max()))


def test_torch_bool_operands():
    """Two bool tensors: the outer product is torch.einsum's (bool); a contraction, which
    torch.einsum refuses (no bool matmul), is NumPy's logical or of ands."""
    a = torch.tensor([True, False, True])
    b = torch.tensor([False, True])
    out = ts.einsum("i;j=>ij", a, b)
    assert out.dtype == torch.bool
    assert torch.equal(out, torch.einsum("i,j->ij", a, b))
    m = torch.tensor([[True, False, False], [False, False, False]])
    n = torch.tensor([[False, True], [False, False], [True, True]])
    got = ts.einsum("ij;jk=>ik", m, n)
    assert got.dtype == torch.bool
    np.testing.assert_array_equal(got.numpy(), np.einsum("ij,jk->ik", m.numpy(), n.numpy()))


@pytest.mark.parametrize("da, db", [(np.int8, np.float32), (np.bool_, np.bool_),
                                    (np.int8, np.int8), (np.int32, np.float64)])
def test_numpy_dtypes_as_numpy_einsum(da, db):
    rng = np.random.default_rng(1)
    a = rng.integers(0, 3, (2, 3)).astype(da)
    b = rng.integers(0, 3, (3, 4)).astype(db)
    want = np.einsum("ij,jk->ik", a, b)
    got = ts.einsum("ij;jk=>ik", a, b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


# -- 10: a window of no cells ----------------------------------------------------------------


def _libraries():
    libs = [("numpy", np.asarray), ("torch", torch.tensor)]
    try:
        import jax.numpy as jnp

        libs.append(("jax", jnp.asarray))
    except ImportError:
        pass
    try:
        import dask.array as da

        libs.append(("dask", da.from_array))
    except ImportError:
        pass
    return libs


@pytest.mark.parametrize("fn", [ts.einsum, ts.tropical])
@pytest.mark.parametrize("lib, make", _libraries())
def test_size_zero_kernel_is_a_shape_error_everywhere(fn, lib, make):
    """Not 5 zeros from 4 inputs (NumPy, JAX), not a raw error (torch, tropical)."""
    with pytest.raises(ts.ShapeError) as e:
        fn("o<+k; k => o", make(np.arange(4.0)), make(np.zeros(0)))
    assert e.value.label == "k" and 0 in e.value.sizes and 4 in e.value.sizes
    assert "o<+k; k => o" in str(e.value) and "size 0" in str(e.value)


def test_size_zero_kernel_in_a_padded_window():
    with pytest.raises(ts.ShapeError, match="'k' has size 0"):
        ts.tropical("o=+k; k => o", np.arange(4.0), np.zeros(0))


@pytest.mark.parametrize("op", ["einsum", "tropical", "outer_sum"])
@pytest.mark.parametrize("spec, shapes", [
    ("b; b, e => ", [(3,), (3, 0)]),
    ("b; b, e => b", [(3,), (3, 0)]),
    ("c, b, a, d; b, a, e => a", [(1, 3, 2, 4), (3, 2, 0)]),
])
@pytest.mark.parametrize("lib, make", _libraries())
def test_a_reduction_over_an_empty_axis_ignores_infinities_elsewhere(op, spec, shapes, lib,
                                                                      make):
    """Found by fuzzing graphs: an operand's inf or NaN met the other operand's sum over its
    empty axis (0, or -inf for max) before the product: NaN, where the sum over the empty
    product space is 0 (the neutral element), as the loop interpreter says."""
    from tests.reference import reference

    xs = [np.full(shapes[0], v) for v in (np.inf, -np.inf, np.nan)]
    y = np.zeros(shapes[1])
    for x in xs:
        want, _ = reference(spec, [x, y], [ts.Shape(output=s) for s in shapes], op=op)
        got = np.asarray(getattr(ts, op)(spec, make(x), make(y)))
        np.testing.assert_array_equal(got, want)
    with G.new_graph():
        got = G.Model(getattr(G, op)(spec, G.leaf("x", xs[0]), G.leaf("y", y))).run()
    np.testing.assert_array_equal(np.asarray(got), want)


# -- 11: ndarray subclasses are NumPy ---------------------------------------------------------


def test_memmap_operand(tmp_path):
    path = tmp_path / "m.npy"
    m = np.arange(12.0).reshape(3, 4)
    np.save(path, m)
    mapped = np.load(path, mmap_mode="r")
    a = np.ones((2, 3))
    np.testing.assert_array_equal(ts.einsum("ij;jk=>ik", a, mapped), a @ m)


class _Tagged(np.ndarray):
    """A user's ndarray subclass (as astropy's Quantity-free subclasses are)."""


def test_custom_ndarray_subclass_operand():
    x = np.arange(6.0).reshape(2, 3).view(_Tagged)
    y = np.arange(3.0)
    np.testing.assert_array_equal(np.asarray(ts.einsum("ij;j=>i", x, y)), np.asarray(x) @ y)
    np.testing.assert_array_equal(np.asarray(ts.einsum1("ij => ji", x)), np.asarray(x).T)
    assert ts.backends.library_of(_Tagged) == "numpy"


@pytest.mark.parametrize("bad, why", [
    (np.matrix(np.ones((3, 4))), "always 2-D"),
    (np.ma.masked_array(np.ones((3, 4)), mask=np.eye(3, 4, dtype=bool)), "ignore the mask"),
])
def test_subclasses_whose_meaning_einsum_drops_are_refused(bad, why):
    with pytest.raises(TypeError, match=why):
        ts.einsum("ij;jk=>ik", np.ones((2, 3)), bad)


# -- 12: the neutral element of max -----------------------------------------------------------


def _tropical_reference(x, k, left):
    """max over the cells a padded window reaches of x + k (padding reached by nothing)."""
    out = []
    for o in range(len(x)):
        vals = [int(x[o + j - left]) + int(k[j]) for j in range(len(k))
                if 0 <= o + j - left < len(x)]
        out.append(max(vals))
    return out


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int64, np.uint8])
def test_tropical_integer_padding_does_not_wrap(dtype):
    x = np.zeros(5, dtype)
    k = np.full(3, -1 if np.issubdtype(dtype, np.signedinteger) else 2, dtype)
    got = ts.tropical("o=+k; k => o", x, k)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, _tropical_reference(x, k, 1))
    t = ts.tropical("o=+k; k => o", torch.tensor(x), torch.tensor(k))
    np.testing.assert_array_equal(t.numpy(), _tropical_reference(x, k, 1))


@pytest.mark.parametrize("spec, x_shape, y_shape", [
    ("i; i => ", (4,), (4,)), ("i, j; i, j => i", (3, 4), (3, 4)), ("i, j; j => i", (3, 4), (4,)),
])
def test_tropical_reduces_an_axis_both_operands_share_once(spec, x_shape, y_shape):
    """max_j (x_j + y_j), not max x + max y: operands with equal one-letter subscripts were
    told apart by identity, and Python interns one-letter strings."""
    rng = np.random.default_rng(0)  # x rises along j, y falls: their maxima are apart
    x = np.arange(4.0) + rng.uniform(0, 0.5, x_shape)
    y = np.arange(4.0)[::-1] + rng.uniform(0, 0.5, y_shape)
    np.testing.assert_array_equal(ts.tropical(spec, x, y), np.max(x + y, axis=-1))


def test_neutral_max_is_the_dtype_minimum():
    from tensig.backends import neutral_max

    assert neutral_max(np.dtype(np.int8)) == -128
    assert neutral_max(np.dtype(np.int64)) == np.iinfo(np.int64).min
    assert neutral_max(np.dtype(np.uint8)) == 0
    assert neutral_max(np.dtype(bool)) is False
    assert neutral_max(np.dtype(np.float16)) == -np.inf
    assert neutral_max(torch.int8) == -128 and neutral_max(torch.bool) is False
    assert neutral_max(torch.int32) == torch.iinfo(torch.int32).min
    assert neutral_max(torch.float64) == -np.inf


def test_max_with_a_fixed_result_index_pads_integers_with_their_minimum():
    got = ts.einmax1("i, j => 1, i", np.array([[3, -7], [2, 5]], np.int16))
    assert got.shape == (2, 2) and got.dtype == np.int16
    np.testing.assert_array_equal(got, [[-32768, -32768], [3, 5]])


# -- 13: the pooling fast path may not serve a stale window -----------------------------------


def test_pool_fast_path_sees_writes_the_version_counter_misses():
    memory = np.zeros(2, np.float32)
    window = torch.from_numpy(memory)
    x = torch.arange(12.0).reshape(1, 12)
    spec = "b, 2*o<+k; k => b, o"
    np.testing.assert_array_equal(ts.tropical(spec, x, window).numpy(),
                                  [[1, 3, 5, 7, 9, 11]])
    memory += 100  # torch's version counter does not see this write
    np.testing.assert_array_equal(ts.tropical(spec, x, window).numpy(),
                                  [[101, 103, 105, 107, 109, 111]])
    window.data.fill_(0)  # nor this one
    np.testing.assert_array_equal(ts.tropical(spec, x, window).numpy(),
                                  [[1, 3, 5, 7, 9, 11]])


def test_pool_fast_path_with_a_read_only_view_of_a_writable_array():
    base = np.zeros(2, np.float32)
    window = base.view()
    window.setflags(write=False)
    x = np.arange(12.0, dtype=np.float32).reshape(1, 12)
    spec = "b, 2*o<+k; k => b, o"
    ts.tropical(spec, x, window)
    base += 100
    np.testing.assert_array_equal(ts.tropical(spec, x, window), [[101, 103, 105, 107, 109, 111]])


# -- 14: concatenation planning is linear in the parts ----------------------------------------

_CONCAT = """
import numpy as np, tensig as ts
n = {n}
a = [f"a{{i}}" for i in range(n)]
b = [f"b{{i}}" for i in range(n)]
axes = ", ".join(f"{{x}}^{{y}}" for x, y in zip(a, b))
x = np.arange(3 ** n, dtype=np.float64).reshape((3,) * n)
# every axis the same concatenation in operand and result: one axis in disguise
same = ts.concat(axes + " => " + axes, x, sizes={{k: 1 for k in a}})
assert np.array_equal(same, x)
# one operand per corner block: the two blocks on the diagonal, zeros elsewhere
p, q = np.ones((1,) * n), np.full((2,) * n, 2.0)
blocks = ts.concat(", ".join(a) + "; " + ", ".join(b) + " => " + axes, p, q)
want = np.zeros((3,) * n)
want[(0,) * n] = 1
want[(slice(1, 3),) * n] = 2
assert np.array_equal(blocks, want)
# summed over a concatenated axis on one side only
s = ts.concat(axes + " => " + ", ".join(a), x, sizes={{k: 1 for k in a}})
assert s.shape == (1,) * n and s.item() == x[(0,) * n]
print("ok")
"""


@pytest.mark.parametrize("n", [11, 14])
def test_concat_with_many_concatenated_axes_plans_quickly(n):
    """11 axes of 2 parts took 29 s (4^n choices); the limit bounds damage, it is no speed
    assertion: a linear plan needs well under a second."""
    out = run_limited(_CONCAT.format(n=n), timeout=120)
    assert not out.timed_out, "concat planning did not finish in 120 s"
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
