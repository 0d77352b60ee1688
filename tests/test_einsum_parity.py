"""Cases ported from NumPy's ``numpy/_core/tests/test_einsum.py`` and opt_einsum's tests
(issue 16): result dtypes as ``numpy.einsum``, array-likes, NumPy subscripts (explicit and
implicit mode), ``out=``/``dtype=``/``optimize=``, and ``einsum_path``.  Each test names the
original it follows; the oracle is ``numpy.einsum`` itself, in the same run."""

from __future__ import annotations

import numpy as np
import pytest

import tensig as ts
from tensig.execution import eager

_INT_DTYPES = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8"]
_FLOAT_DTYPES = ["f2", "f4", "f8"]


def _data(shape, dtype):
    """Small values (as NumPy's ``arange`` data), wrapped into the dtype's range."""
    size = int(np.prod(shape))
    return (np.arange(size) % 100).reshape(shape).astype(dtype)


def _same(got, want):
    """Equal dtypes; equal values for integers and bools, a dtype-derived tolerance else."""
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        eps = np.finfo(want.dtype).eps
        scale = 1 + np.abs(want.astype(np.float64)).max(initial=0)
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=0, atol=64 * eps * scale)


# (tensig spec, NumPy subscripts, operand shapes (n: the loop's size))
_SUMS = [
    ("i=>", "i->", ["n"]),                      # sum(a, axis=-1)
    ("abi=>ab", "...i->...", [(2, 3, "n")]),    # sum(a, axis=-1), batched
    ("ia=>a", "i...->...", [(2, "n")]),         # sum(a, axis=0)
    ("ii=>", "ii", [("n", "n")]),               # trace(a)
    ("ii=>i", "ii->i", [("n", "n")]),           # diagonal
    ("ij=>ji", "ji", [("n", 3)]),               # transpose (implicit mode)
    ("ij;j=>i", "ij,j", [(4, "n"), ("n",)]),    # matvec
    ("ij;jk=>ik", "ij,jk", [(4, "n"), ("n", 3)]),  # matmul
    ("i;i=>", "i,i", ["n", "n"]),               # dot
    ("i;j=>ij", "i,j", [(3,), ("n",)]),         # outer
    ("ijk;jil=>kl", "ijk,jil->kl", [(3, 4, "n"), (4, 3, 2)]),  # tensordot
]


def _shapes(spec_shapes, n):
    out = []
    for s in spec_shapes:
        s = (s,) if not isinstance(s, tuple) else s
        out.append(tuple(n if d == "n" else d for d in s))
    return out


@pytest.mark.parametrize("dtype", _INT_DTYPES + _FLOAT_DTYPES + ["?"])
@pytest.mark.parametrize("spec, theirs, shapes", _SUMS)
def test_einsum_sums(dtype, spec, theirs, shapes):
    """NumPy: TestEinsum.check_einsum_sums via test_einsum_sums_int8 ... _float64 (sums,
    trace, diagonal, matvec, matmul, dot, outer, tensordot at sizes 1-16): the result dtype
    is the operands' (an int8 sum wraps around), a bool reduction is a logical or."""
    for n in (1, 2, 3, 7, 16):
        xs = [_data(s, dtype) for s in _shapes(shapes, n)]
        _same(ts.einsum(spec, *xs) if len(xs) > 1 else ts.einsum1(spec, xs[0]),
              np.einsum(theirs, *xs))


def test_einsum_sums_int8_wraps_and_bool_is_or():
    """The issue's reproductions (the int8 case of check_einsum_sums)."""
    got = ts.einsum1("i=>", np.arange(24, dtype=np.int8))
    assert got.dtype == np.int8 and got == np.einsum("i->", np.arange(24, dtype=np.int8)) == 20
    b = np.array([True, False, True])
    assert ts.einsum1("i=>", b).dtype == np.bool_ and bool(ts.einsum1("i=>", b)) is True


@pytest.mark.parametrize("dtype", ["i1", "?", "f4"])
def test_einsum_sums_on_dask_as_numpy(dtype):
    """check_einsum_sums on Dask: blocks summed in the operands' dtype, as NumPy."""
    da = pytest.importorskip("dask.array")
    a = _data((24,), dtype)
    m = _data((6, 8), dtype)
    _same(ts.einsum1("i=>", da.from_array(a, chunks=5)).compute(), np.einsum("i->", a))
    _same(ts.einsum("ij;j=>i", da.from_array(m, chunks=(2, 3)), da.from_array(m[0], chunks=3))
          .compute(), np.einsum("ij,j->i", m, m[0]))


@pytest.mark.parametrize("da_, db", [("i1", "f4"), ("i2", "i8"), ("u1", "i1"), ("?", "i4"),
                                     ("f2", "f8")])
def test_einsum_mixed_dtypes(da_, db):
    """NumPy: test_einsum_sums_* mixed operand types (e.g. its 'i,i' with one cast operand):
    the result dtype is numpy.result_type of the operands."""
    a, b = _data((3, 4), da_), _data((4, 5), db)
    _same(ts.einsum("ij;jk=>ik", a, b), np.einsum("ij,jk", a, b))
    _same(ts.einsum("ij;jk=>ik", a, b[:, :1]), np.einsum("ij,jk", a, b[:, :1]))


def test_einsum_misc_array_likes():
    """NumPy: test_einsum_misc -- nested lists and Python scalars are operands (ticket #1885's
    'z,mz,zm->' among them)."""
    p = np.arange(2) + 1
    q = np.arange(4).reshape(2, 2) + 3
    r = np.arange(4).reshape(2, 2) + 7
    assert ts.einsum("z,mz,zm->", p, q, r) == np.einsum("z,mz,zm->", p, q, r) == 253
    assert ts.einsum("z;mz;zm=>", p.tolist(), q.tolist(), r.tolist()) == 253
    assert ts.einsum("i,i", [1, 2], [3, 4]) == 11
    np.testing.assert_array_equal(ts.einsum(",i->i", 3, [1.0, 2.0]), [3.0, 6.0])
    np.testing.assert_array_equal(ts.einsum1("ij => ji", [[1, 2], [3, 4]]), [[1, 3], [2, 4]])
    with pytest.raises(TypeError, match="not an array"):  # a tuple is a shape in tensig
        ts.einsum("i;i=>", (1, 2), [3, 4])


def test_einsum_views_implicit_mode():
    """NumPy: test_einsum_views -- implicit mode sorts the free labels ("ji" is a
    transpose), "ii->i" a diagonal, "iii->i", "ijk->jik"."""
    a = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(ts.einsum1("ij", a), a)
    np.testing.assert_array_equal(ts.einsum1("ji", a), a.T)
    a = np.arange(9).reshape(3, 3)
    np.testing.assert_array_equal(ts.einsum1("ii->i", a), np.diag(a))
    a = np.arange(27).reshape(3, 3, 3)
    np.testing.assert_array_equal(ts.einsum1("iii->i", a), [a[i, i, i] for i in range(3)])
    a = np.arange(24).reshape(2, 3, 4)
    np.testing.assert_array_equal(ts.einsum1("ijk->jik", a), a.swapaxes(0, 1))
    # the semicolon form of implicit mode, and NumPy's sorted output (uppercase first)
    b = np.ones((2, 3))
    assert ts.einsum("ij;jk", b, np.ones((3, 4))).shape == (2, 4)
    assert ts.einsum("bA,Ac", b, np.ones((3, 4))).shape == (2, 4)
    assert ts.einsum1("Ba", b).shape == (2, 3)
    assert ts.einsum1("aB", b).shape == (3, 2)  # sorted: B before a


def test_numpy_subscripts_leave_tensig_specs_alone():
    """A spec with '=>' keeps tensig's meaning (commas separate axes there)."""
    assert eager.numpy_subscripts("i,j;j=>i") is None
    assert eager.numpy_subscripts("o<+k; k => o") is None
    assert eager.numpy_subscripts("ij,jk->ik") == "ij;jk=>ik"
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(ts.einsum("i,j;j=>i", x, np.ones(3)), x.sum(1))


def test_einsum_out_and_dtype():
    """NumPy: check_einsum_sums' out= and dtype= calls ('i->' into a given array, computed
    in a given dtype) and test_einsum_specific_errors' out= of the wrong shape."""
    a = np.arange(12, dtype=np.int8).reshape(3, 4) * 20
    out = np.empty(3, np.int64)
    got = ts.einsum("ij;j=>i", a, np.ones(4, np.int8), out=out, dtype="i8")
    assert got is out
    np.testing.assert_array_equal(out, np.einsum("ij,j->i", a, np.ones(4, np.int8),
                                                 dtype="i8", casting="unsafe"))
    f = ts.einsum("ij,jk", a, a.T, dtype=np.float64)
    assert f.dtype == np.float64
    np.testing.assert_allclose(f, a.astype(np.float64) @ a.T.astype(np.float64))
    with pytest.raises(ValueError, match="out= has shape"):
        ts.einsum("ij;j=>i", a, np.ones(4, np.int8), out=np.empty(4))
    assert ts.einsum("ij;jk=>ik", np.ones((2, 3)), np.ones((3, 4)), optimize=True).shape == (2, 4)
    with pytest.raises(TypeError, match="optimize="):
        ts.einsum("ij;jk=>ik", np.ones((2, 3)), np.ones((3, 4)), optimize=1.5)


def test_einsum_out_torch():
    torch = pytest.importorskip("torch")
    out = torch.empty(2, 4)
    got = ts.einsum("ij;jk=>ik", torch.ones(2, 3), torch.ones(3, 4), out=out)
    assert got is out and torch.equal(out, torch.full((2, 4), 3.0))


_CHARS = "abcdefghij"
_SIZES = dict(zip(_CHARS, [2, 3, 4, 5, 4, 3, 2, 6, 5, 4], strict=True))


@pytest.mark.parametrize("subscripts", [
    "ea,fb,abcd,gc,hd->efgh",   # NumPy: test_long_paths / opt_einsum: test_contract_path
    "acdf,jbje,gihb,hfac,gfac,gifabc,hfac->",  # NumPy: test_edge_paths-style long contraction
    "ab,bc,cd,de->ae",          # opt_einsum: a matrix chain
    "abc,bcd,cde->ae",
])
def test_einsum_path(subscripts):
    """NumPy: test_path_type_input / opt_einsum: test_contract_path -- the order opt_einsum
    picks for these shapes; contracting in that order gives numpy.einsum's values."""
    opt_einsum = pytest.importorskip("opt_einsum")
    ins, out = subscripts.split("->")
    subs = ins.split(",")
    shapes = [tuple(_SIZES[c] for c in s) for s in subs]
    path, report = ts.einsum_path(subscripts, *shapes)
    assert len(path) == len(subs) - 1
    assert path == [tuple(p) for p in opt_einsum.contract_path(subscripts, *shapes,
                                                                 shapes=True)[0]]
    assert "Complete contraction" in report
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s) for s in shapes]
    ops = list(zip(xs, subs, strict=True))
    for i, j in path:  # contract pair by pair in that order, keeping the labels still needed
        (x, sx), (y, sy) = ops[i], ops[j]
        rest = [s for k, (_, s) in enumerate(ops) if k not in (i, j)]
        keep = "".join(c for c in dict.fromkeys(sx + sy) if c in out or any(c in r for r in rest))
        ops = [o for k, o in enumerate(ops) if k not in (i, j)] + \
            [(ts.einsum(f"{sx},{sy}->{keep}", x, y), keep)]
    (res, labels), = ops
    want = np.einsum(subscripts, *xs)
    np.testing.assert_allclose(np.einsum(f"{labels}->{out}", res), want,
                               rtol=1e-10, atol=1e-10 * (1 + np.abs(want).max()))


def test_einsum_path_prefers_the_cheap_pair():
    """opt_einsum: test_contract_path's premise -- a chain whose last pair is small is
    contracted there first."""
    path, _ = ts.einsum_path("ij;jk;kl=>il", (100, 100), (100, 100), (100, 1))
    assert path[0] == (1, 2)
