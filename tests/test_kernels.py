"""Each backend runs on its library's own kernels: Dask contractions as ``da.tensordot`` /
``da.matmul`` (lazy), JAX convolutions as ``lax.conv_general_dilated``, lifted functions of
torch and JAX arrays through the library's ``vmap``.  Values against an independent oracle
(``numpy.einsum``, the library's own op), within rounding bounds derived from the dtype."""

from __future__ import annotations

import numpy as np
import pytest

import tensig as ts
from tolerance import assert_equal_up_to_rounding

# (spec, operand shapes, the Dask kernel expected in the graph)
DASK_CASES = [
    ("ij,jk->ik", [(6, 5), (5, 4)], "tensordot"),
    ("ij,jk->ki", [(6, 5), (5, 4)], "tensordot"),
    ("ijk,kl->il", [(4, 3, 5), (5, 2)], "tensordot"),  # j summed within the first operand
    ("ij,ij->", [(6, 5), (6, 5)], "tensordot"),
    ("i,j->ji", [(6,), (5,)], "tensordot"),  # an outer product
    ("bij,bjk->bik", [(3, 6, 5), (3, 5, 4)], "matmul"),
    ("bij,bjk->kib", [(3, 6, 5), (3, 5, 4)], "matmul"),
]


def _dask_operands(shapes, dtype, rng):
    da = pytest.importorskip("dask.array")
    if np.dtype(dtype) == np.bool_:
        xs = [rng.random(s) < 0.3 for s in shapes]
    elif np.issubdtype(dtype, np.integer):
        xs = [rng.integers(-100, 100, s).astype(dtype) for s in shapes]
    else:
        xs = [rng.standard_normal(s).astype(dtype) for s in shapes]
    # uneven chunks, different on each operand: the kernels must align them
    return xs, [da.from_array(x, chunks=tuple(max(1, n // 2) + i for n in x.shape))
                for i, x in enumerate(xs)]


@pytest.mark.parametrize("spec, shapes, kernel", DASK_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dask_contraction_is_a_lazy_tensordot(spec, shapes, kernel, dtype):
    """A two-operand contraction on Dask builds a graph of the library's BLAS-backed kernel
    (not ``da.einsum``, which runs NumPy's einsum loop per block) and stays lazy."""
    da = pytest.importorskip("dask.array")
    xs, ds = _dask_operands(shapes, dtype, np.random.default_rng(0))
    got = ts.einsum(spec, *ds)
    assert isinstance(got, da.Array)
    layers = [name.rpartition("-")[0] for name in got.dask.layers]
    assert kernel in layers and "einsum" not in layers, layers
    assert got.dtype == np.dtype(dtype)
    value = got.compute()
    ins, out = spec.split("->")
    size = dict(zip(ins.replace(",", ""), [n for s in shapes for n in s], strict=True))
    length = int(np.prod([n for c, n in size.items() if c not in out]))
    assert_equal_up_to_rounding(value, np.einsum(spec, *xs), dtype=dtype, length=length,
                                magnitude=np.einsum(spec, *map(np.abs, xs)))


@pytest.mark.parametrize("spec, shapes, kernel", DASK_CASES)
@pytest.mark.parametrize("dtype", ["int8", "bool"])
def test_dask_contraction_sums_in_the_operands_dtype(spec, shapes, kernel, dtype):
    """As ``numpy.einsum``: an int8 contraction wraps around, a bool one is a logical or of
    ands (Dask's block sums widen; the result is cast back, exactly)."""
    xs, ds = _dask_operands(shapes, dtype, np.random.default_rng(1))
    got = ts.einsum(spec, *ds).compute()
    want = np.einsum(spec, *xs)
    assert got.dtype == want.dtype and np.array_equal(got, want)


# (spec, operand shapes): 1-D to 3-D, strides, dilations, even and uneven padding, the
# kernel operand first
JAX_CONVS = [
    ("b, oh=+kh, ow=+kw, ic; oc, kh, kw, ic => b, oh, ow, oc", (2, 9, 11, 3), (4, 3, 3, 3)),
    ("b, 2*oh<+kh, ow<+2*kw, ic; oc, kh, kw, ic => b, oh, ow, oc", (2, 9, 11, 3), (4, 3, 3, 3)),
    ("b, 2*oh=+kh, ow=+kw, ic; oc, kh, kw, ic => b, oh, ow, oc", (2, 8, 6, 3), (4, 2, 2, 3)),
    ("o=+k; k => o", (10,), (3,)),
    ("b, 2*o<+k, c; k, c, d => b, o, d", (3, 11, 2), (3, 2, 5)),
    ("k, c, d; b, o<+k, c => d, o, b", (3, 2, 5), (3, 10, 2)),
    ("b, x<+i, y=+j, z<+k, c; i, j, k, c, d => b, x, y, z, d", (2, 5, 4, 6, 2), (2, 3, 2, 2, 3)),
]


@pytest.mark.parametrize("spec, xs, ws", JAX_CONVS)
def test_jax_convolution_runs_on_lax_conv(spec, xs, ws):
    """A convolution of JAX floats is one ``lax.conv_general_dilated`` (XLA's own kernel, not
    gathered windows), equal to the loop interpreter's answer (the oracle)."""
    jax = pytest.importorskip("jax")
    from reference import reference

    rng = np.random.default_rng(2)
    x, w = rng.standard_normal(xs), rng.standard_normal(ws)
    xj, wj = jax.numpy.asarray(x, np.float32), jax.numpy.asarray(w, np.float32)

    def f(a, b):
        return ts.einsum(spec, a, b)

    jaxpr = str(jax.make_jaxpr(f)(xj, wj))
    assert "conv_general_dilated" in jaxpr and "gather" not in jaxpr, jaxpr
    got = f(xj, wj)
    assert isinstance(got, jax.Array) and got.dtype == np.float32
    shapes = [ts.Shape(output=x.shape), ts.Shape(output=w.shape)]
    want, _ = reference(spec, [x, w], shapes, op="einsum")
    length = int(min(np.prod(xs), np.prod(ws)))  # at most the kernel's cells per sum
    absolute, _ = reference(spec, [np.abs(x), np.abs(w)], shapes, op="einsum")
    assert_equal_up_to_rounding(got, want, dtype=np.float32, length=length, magnitude=absolute)


def test_jax_convolution_of_integers_sums_in_their_dtype():
    """XLA's conv takes floats only: integer operands take the windows path, and wrap around
    in int8 as numpy.einsum's sums do."""
    jax = pytest.importorskip("jax")
    spec = "b, 2*oh=+kh, ow<+kw, ic; oc, kh, kw, ic => b, oh, ow, oc"
    rng = np.random.default_rng(3)
    x = rng.integers(-100, 100, (2, 8, 6, 3)).astype(np.int8)
    w = rng.integers(-100, 100, (4, 3, 3, 3)).astype(np.int8)
    got = ts.einsum(spec, jax.numpy.asarray(x), jax.numpy.asarray(w))
    want = ts.einsum(spec, x, w)
    assert got.dtype == want.dtype == np.int8 and np.array_equal(np.asarray(got), want)


@pytest.mark.parametrize("library", ["torch", "jax"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_lift_runs_through_the_library_vmap(library, dtype, monkeypatch):
    """A lifted function of torch / JAX arrays runs as the library's own nested ``vmap``, made
    once per frame rank (not per call), with Remora's prefix agreement; values against
    ``numpy.einsum`` within the rounding of a sum of 16 terms."""
    from tensig import rank

    lib = pytest.importorskip(library)
    vmaps = []
    real = lib.vmap

    def counting(f, *args, **kwargs):
        vmaps.append(f)
        return real(f, *args, **kwargs)

    monkeypatch.setattr(lib, "vmap", counting)
    to = (lambda x: lib.tensor(x)) if library == "torch" else lib.numpy.asarray
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((1000, 16)).astype(dtype), rng.standard_normal(16).astype(dtype)
    c = rng.standard_normal((7, 5, 16)).astype(dtype)
    dot = rank.lift(lambda x, y: (x * y).sum(), "n; n => ")
    for _ in range(3):
        x = to(a)  # JAX without x64 holds float64 data as float32
        got = dot(x, to(b))
        assert got.shape == (1000,) and got.dtype == x.dtype
        dtype = np.dtype(str(x.dtype).removeprefix("torch."))
        assert_equal_up_to_rounding(np.asarray(got), np.einsum("in,n->i", a, b), dtype=dtype,
                                    length=16, magnitude=np.abs(a) @ np.abs(b))
    assert len(vmaps) == 1, vmaps  # one frame axis: one vmap, kept across calls
    # a frame of rank 2 whose second argument's frame (7,) is a prefix: replicated
    got = dot(to(c), to(c[:, 0]))
    assert_equal_up_to_rounding(np.asarray(got), np.einsum("ijn,in->ij", c, c[:, 0]),
                                dtype=dtype, length=16,
                                magnitude=np.einsum("ijn,in->ij", np.abs(c), np.abs(c[:, 0])))
    assert len(vmaps) == 3
