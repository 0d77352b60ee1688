"""Test data: moving arrays between NumPy and each backend, random classic einsum specs,
drawn expression trees as IR, a small least-squares problem for the trainer, and verify's side:
real tensors for a signature, a report's kinds and whether it is clean, a corpus of bugs held."""

from __future__ import annotations

import string
import zlib
from collections.abc import Iterable

import numpy as np
import torch
from hypothesis import strategies as st

from tensig import Shape, rows
from tensig.execution.eager import RowArray
from tensig.execution.ir import Expr
from tensig.model import graph as G

BACKENDS = ["numpy", "torch", "jax", "dask"]


def host(x) -> np.ndarray:
    """A torch tensor (detached, on the CPU) or any array as a NumPy array."""
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def normal32(*shape: int, seed: int = 0) -> np.ndarray:
    """Standard normal float32 data of ``shape``, drawn from ``seed``."""
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def kinds(report, severity: str | None = None) -> list[str]:
    """The kinds of a verify report's findings (of one ``severity``, or all), in order."""
    return [f.kind for f in report if severity is None or f.severity == severity]


def clean(report) -> bool:
    """Verified: no finding and no note (a stopped trace claims nothing)."""
    return report.ok and not report.findings and not report.notes


def holds_for_corpus(cases, least: int) -> None:
    """A corpus of ``(name, correct, buggy, code)`` cases, at least ``least`` of them, each
    holding (:func:`pair_holds`)."""
    assert len(cases) >= least
    for case in cases:
        pair_holds(*case)


def pair_holds(name: str, good, bad, code: str, assumes: dict[str, str] | None = None,
               stops: Iterable[str] = ()) -> None:
    """One corpus pair: the correct function verified clean (or, named in ``assumes``, with
    warnings only, one of them stating that requirement of the sizes), the twin's bug
    found under its code with no note (a trace that stops catches nothing), or, named in
    ``stops``, with the one note that torch rejected the operands."""
    from tensig.check.verify import verify

    r = verify(good)
    if name in (assumes or {}):
        assert {f.kind for f in r} == {"assumption"} and assumes[name] in str(r) and \
            not r.notes, f"{name}: {r}"
    else:
        assert clean(r), f"{name}: {r}"
    rb = verify(bad)
    stopped = ["torch rejected the operands (reported above)" in n for n in rb.notes]
    assert code in [f.code for f in rb] and stopped == ([True] if name in stops else []), \
        f"{name}: {rb}"


def real_tensors(sig, sizes: dict[str, int]) -> list[torch.Tensor]:
    """Real tensors for a verify signature's arguments at concrete ``sizes``, the same on
    every call: integers zeros (an id, label or offset in range on any axis), booleans random
    masks, floats in (0.05, 0.95) (a log, a square root or a division of them is finite)."""
    g = torch.Generator().manual_seed(0)

    def real(dims, kind: str) -> torch.Tensor:
        shape = [d.evaluate(sizes) for d in dims]
        return torch.zeros(shape, dtype=torch.long) if kind == "i" else \
            torch.rand(shape, generator=g) > 0.5 if kind == "b" else \
            torch.rand(shape, generator=g) * 0.9 + 0.05

    return [real(dims, kind) for dims, kind in
            zip(sig.args, sig.kinds or ("f",) * len(sig.args), strict=True)]


def tolerance(dtype, n: int = 1, chain: int = 8) -> float:
    """The rounding ``dtype`` allows over ``chain`` operations on sums of ``n`` terms
    (``chain * eps * n``); 0 for integer and bool dtypes, which compute exactly.  Derived
    from the dtype so that a comparison across libraries never depends on their summation
    order, nor on a constant that fits one dtype only."""
    dt = np.dtype(dtype)
    return chain * float(np.finfo(dt).eps) * max(n, 1) if dt.kind in "fc" else 0.0


def close32(ours, ref, n: int, chain: int = 32) -> None:
    """Equal up to float32 rounding over a block of ``chain`` operations on sums of ``n``
    terms (``chain * eps * n``, relative and absolute), compared in float64."""
    ours, ref = host(ours).astype(np.float64), host(ref).astype(np.float64)
    assert ours.shape == ref.shape, (ours.shape, ref.shape)
    t = tolerance(np.float32, n, chain)
    np.testing.assert_allclose(ours, ref, rtol=t, atol=t)


def to_backend(name: str, x: np.ndarray):
    if name == "numpy":
        return x
    if name == "torch":
        return torch.tensor(x)
    if name == "jax":
        import jax.numpy as jnp

        return jnp.asarray(x)
    import dask.array as da

    # two chunks along the first axis: enough to make the cluster combine partial results
    chunks = tuple(max(1, (n + 1) // 2) if i == 0 else n for i, n in enumerate(x.shape))
    return da.from_array(x, chunks=chunks)


def to_numpy(name: str, y) -> np.ndarray:
    if isinstance(y, RowArray):
        y = y.array
    if name == "numpy":
        assert isinstance(y, np.ndarray | np.generic)  # numpy's einsum gives scalars for ()
        return np.asarray(y)
    if name == "torch":
        assert isinstance(y, torch.Tensor)
        return y.numpy()
    if name == "jax":
        import jax

        assert isinstance(y, jax.Array)
        return np.asarray(y)
    import dask.array as da

    assert isinstance(y, da.Array)
    return y.compute()


@st.composite
def classic_specs(draw, alphabet: int, labels: int, sizes: int, ops: tuple[int, int],
                  axes: int):
    """A classic einsum (one letter per axis, repeats allowed): operand labels, result labels
    (distinct, a prefix of a permutation of those used) and a size per label.

    1 to ``labels`` letters from the first ``alphabet`` of a-z, sizes 1 to ``sizes``, an
    operand count in the range ``ops``, at most ``axes`` axes per operand.
    """
    letters = draw(st.lists(st.sampled_from(string.ascii_lowercase[:alphabet]), min_size=1,
                            max_size=labels, unique=True))
    size = {c: draw(st.integers(1, sizes)) for c in letters}
    n = draw(st.integers(*ops))
    operands = [draw(st.lists(st.sampled_from(letters), max_size=axes)) for _ in range(n)]
    used = sorted({c for op in operands for c in op})
    out = draw(st.permutations(used).flatmap(lambda p: st.integers(0, len(p)).map(
        lambda k: p[:k])))
    return operands, out, size


def expr_of(tree, bufs):
    """The IR expression of a drawn tree: a name is ``bufs[name]``, a float a number,
    ``(op, *args)`` a primitive applied."""
    if isinstance(tree, str):
        return bufs[tree]
    if isinstance(tree, float):
        return tree
    op, *args = tree
    return Expr(op, tuple(expr_of(a, bufs) for a in args))


def quadratic_problem(rng: np.random.Generator, backend: str = "numpy"):
    """loss = sum((w @ x - y)^2) on data drawn from ``rng``: the gradient is easy to
    cross-check.  Returns the data, the initial ``w`` and the graph tensors."""
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


def oracle_case(case, backend: str):
    """A loop-oracle case ``(op, spec, shapes' texts, keywords)`` made concrete: the operands
    (small integers, seeded by the spec, rows wrapped where a shape has batch or input rows)
    on ``backend``, and the oracle's value and result shape (``tests/reference.py``)."""
    from reference import reference

    op, spec, texts, kw = case
    shapes = [Shape.parse(t) for t in texts]
    g = np.random.default_rng(zlib.crc32(spec.encode()))
    arrays = [g.integers(-4, 5, size=tuple(int(d) for d in s.dims)).astype(np.float64)
              for s in shapes]
    expected, expected_shape = reference(spec, arrays, shapes, op=op, **kw)
    args = []
    for a, s in zip(arrays, shapes, strict=True):
        x = to_backend(backend, a)
        args.append(rows(x, batch=len(s.batch), input=len(s.input)) if s.batch or s.input
                    else x)
    return args, expected, expected_shape


def conv_by_autograd(xs: np.ndarray, ks: np.ndarray, stride: int, dil: int,
                     pads: tuple[int, int]) -> tuple[np.ndarray, ...]:
    """torch autograd's NHWC convolution (``ks`` as ``oc, kh, kw, ic``, ``pads`` low and high
    on both spatial axes) and the gradients of the sum of its squares: ``(y, dx, dk)``."""
    tx = torch.tensor(xs, requires_grad=True)
    tk = torch.tensor(ks, requires_grad=True)
    lo, hi = pads
    padded = torch.nn.functional.pad(tx.permute(0, 3, 1, 2), (lo, hi, lo, hi))
    out = torch.nn.functional.conv2d(padded, tk.permute(0, 3, 1, 2), stride=stride,
                                     dilation=dil)
    (out ** 2).sum().backward()
    return out.permute(0, 2, 3, 1).detach().numpy(), tx.grad.numpy(), tk.grad.numpy()


def random_einsum(rnd, dtypes, least: int = 1) -> tuple[str, str, list[np.ndarray]]:
    """A random contraction for the fuzzers: up to 4 letters of sizes 0-3 (empty axes too),
    ``least`` to 3 operands of random ``dtypes`` holding small integers (from 0 for bool and
    unsigned dtypes).  Returns tensig's spec, NumPy's subscripts and the arrays."""
    letters = "ijkl"[:rnd.randint(1, 4)]
    size = {c: rnd.choice([0, 1, 2, 3]) for c in letters}
    subs = ["".join(rnd.choice(letters) for _ in range(rnd.randint(0, 3)))
            for _ in range(rnd.randint(least, 3))]
    used = sorted(set("".join(subs)))
    out = "".join(rnd.sample(used, rnd.randint(0, len(used))))
    gen = np.random.default_rng(rnd.randrange(99))
    arrays = []
    for s in subs:
        dt = np.dtype(rnd.choice(dtypes))
        arrays.append(gen.integers(0 if dt.kind in "bu" else -3, 4,
                                   tuple(size[c] for c in s)).astype(dt))
    return ";".join(subs) + "=>" + out, ",".join(subs) + "->" + out, arrays
