"""Steps that compiling on torch runs as one kernel call: a convolution's input and kernel
gradients (one ``convolution_backward``) and a matrix product with its bias (``addmm``).
Each gives the values of the unpaired path and of torch's autograd (in float64 from the
same float32 values): for convolutions, the geometries torch's kernels take (strides,
dilations, uneven padding, the kernel as the first operand)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from arrays import conv_by_autograd  # noqa: E402
from tensig.backends import backend_for  # noqa: E402
from tensig.model import graph as G  # noqa: E402

rng = np.random.default_rng(7)

N, H, W, IC, OC = 2, 7, 9, 3, 4


def _run(spec_axes: str, size: int, kernel_first: bool, xs: np.ndarray, ks: np.ndarray
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The convolution's value and both gradients of ``sum(y * y)`` on the torch backend."""
    with G.new_graph("torch"):
        x = G.param("x", output=[N, H, W, IC], input=[], init=lambda s, r: xs)
        k = G.param("k", output=[OC], input=[size, size, IC], init=lambda s, r: ks)
        xspec, kspec = f"bn, {spec_axes}, ic", "kh, kw, ic -> oc"
        if kernel_first:
            y = G.einsum(f"{kspec}; {xspec} => bn, oh, ow, oc", k, x)
        else:
            y = G.einsum(f"{xspec}; {kspec} => bn, oh, ow, oc", x, k)
        G.grad_update(G.einsum1("... => |->0", y * y)).backward()
        return tuple(np.asarray(v.numpy()) for v in (y, x.grad, k.grad))


def counting(monkeypatch, cls, name: str) -> list[int]:
    """Patch the adapter method ``cls.name`` to record each call; the list of calls."""
    method = getattr(cls, name)
    calls: list[int] = []

    def counted(self, *args):
        calls.append(1)
        return method(self, *args)

    monkeypatch.setattr(cls, name, counted)
    return calls


@pytest.mark.parametrize("kernel_first", [False, True])
@pytest.mark.parametrize("spec_axes, size, stride, dil, pads", [
    ("oh<+kh, ow<+kw", 3, 1, 1, (0, 0)),
    ("2*oh<+kh, 2*ow<+kw", 3, 2, 1, (0, 0)),
    ("oh<+2*kh, ow<+2*kw", 2, 1, 2, (0, 0)),
    ("oh=+kh, ow=+kw", 3, 1, 1, (1, 1)),
    ("oh=+kh, ow=+kw", 2, 1, 1, (1, 0)),  # an even kernel pads one side only
])
def test_paired_gradients_equal_unpaired_and_autograd(monkeypatch, kernel_first, spec_axes,
                                                      size, stride, dil, pads):
    # parameters are float32: the reference starts from the same rounded values
    xs = rng.standard_normal((N, H, W, IC)).astype(np.float32).astype(np.float64)
    ks = rng.standard_normal((OC, size, size, IC)).astype(np.float32).astype(np.float64)
    cls = type(backend_for(torch.Tensor))
    calls = counting(monkeypatch, cls, "conv_gradients")
    paired = _run(spec_axes, size, kernel_first, xs, ks)
    assert calls, "the two gradients did not run as one call"
    monkeypatch.setattr(cls, "conv_gradients", None)
    unpaired = _run(spec_axes, size, kernel_first, xs, ks)
    reference = conv_by_autograd(xs, ks, stride, dil, pads)
    # float32 sums of at most (oh * ow * oc) products of 2 * y by x or k (each a sum of
    # kh * kw * ic terms): two evaluation orders differ by a few eps per term at most
    terms = H * W * OC * size * size * IC
    for name, ours, theirs, ref in zip(("y", "x.grad", "k.grad"), paired, unpaired,
                                       reference, strict=True):
        bound = 4 * np.finfo(np.float32).eps * terms * np.abs(ref).max()
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=bound, err_msg=name)
        np.testing.assert_allclose(ours, ref, rtol=0, atol=bound, err_msg=name)



def test_bias_folded_into_its_matrix_product(monkeypatch):
    """``w @ x + c`` (x ``b, t | d``) runs as one ``addmm``; the value and the gradients as
    unfolded and as torch's ``nn.functional.linear``."""
    bt, t, d, o = 3, 5, 6, 7
    xs, ss, ws, cs = (rng.standard_normal(n).astype(np.float32)
                      for n in ((bt, t, d), d, (o, d), o))
    cls = type(backend_for(torch.Tensor))

    def run() -> tuple[np.ndarray, ...]:
        with G.new_graph("torch"):
            sp = G.param("s", output=[d], init=lambda sh, r: ss)
            x = G.leaf("x", xs, batch=2) * sp
            w = G.param("w", output=[o], input=[d], init=lambda sh, r: ws)
            c = G.param("c", output=[o], init=lambda sh, r: cs)
            y = w @ x + c
            G.grad_update(G.einsum1("... => |->0", y * y)).backward()
            return tuple(np.asarray(v.numpy()) for v in (y, sp.grad, w.grad, c.grad))

    calls = counting(monkeypatch, cls, "matmul_bias")
    folded = run()
    assert calls, "the bias was not folded into the product"
    monkeypatch.setattr(cls, "matmul_bias", None)
    unfolded = run()
    ts, tw, tc = (torch.tensor(v.astype(np.float64), requires_grad=True) for v in (ss, ws, cs))
    ty = torch.nn.functional.linear(torch.tensor(xs.astype(np.float64)) * ts, tw, tc)
    (ty ** 2).sum().backward()
    reference = [v.detach().numpy() for v in (ty, ts.grad, tw.grad, tc.grad)]
    terms = bt * t * o * (d + 1)  # the longest chain: s.grad sums over b, t, o of d-long sums
    for name, ours, theirs, ref in zip(("y", "s.grad", "w.grad", "c.grad"), folded, unfolded,
                                       reference, strict=True):
        bound = 4 * np.finfo(np.float32).eps * terms * np.abs(ref).max()
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=bound, err_msg=name)
        np.testing.assert_allclose(ours, ref, rtol=0, atol=bound, err_msg=name)


def test_residual_added_to_a_two_axis_contraction_folded_into_its_product(monkeypatch):
    """``r + w @ a`` with ``a`` of two contracted axes (attention's heads, ``b, t | h, e``)
    and ``r`` shaped as the product (a residual) runs as one ``addmm`` starting from ``r``;
    the value and the gradients as unfolded and as torch's autograd."""
    bt, t, h, e, o = 3, 5, 2, 3, 4
    xs, ws, rs, ss = (rng.standard_normal(n).astype(np.float32)
                      for n in ((bt, t, h, e), (o, h, e), (bt, t, o), o))
    cls = type(backend_for(torch.Tensor))

    def run() -> tuple[np.ndarray, ...]:
        with G.new_graph("torch"):
            sp = G.param("s", output=[o], init=lambda sh, r: ss)
            w = G.param("w", output=[o], input=[h, e], init=lambda sh, r: ws)
            y = G.leaf("r", rs, batch=2) * sp + w @ G.leaf("x", xs, batch=2)
            G.grad_update(G.einsum1("... => |->0", y * y)).backward()
            return tuple(np.asarray(v.numpy()) for v in (y, sp.grad, w.grad))

    calls = counting(monkeypatch, cls, "matmul_bias")
    folded = run()
    assert calls, "the residual was not folded into the product"
    monkeypatch.setattr(cls, "matmul_bias", None)
    unfolded = run()
    ts, tw = (torch.tensor(v.astype(np.float64), requires_grad=True) for v in (ss, ws))
    ty = torch.tensor(rs.astype(np.float64)) * ts + torch.einsum(
        "bthe,ohe->bto", torch.tensor(xs.astype(np.float64)), tw)
    (ty ** 2).sum().backward()
    reference = [v.detach().numpy() for v in (ty, ts.grad, tw.grad)]
    terms = bt * t * (h * e + 1)  # the longest chain: w.grad sums over b, t of h*e-long sums
    for name, ours, theirs, ref in zip(("y", "s.grad", "w.grad"), folded, unfolded, reference,
                                       strict=True):
        bound = 4 * np.finfo(np.float32).eps * terms * np.abs(ref).max()
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=bound, err_msg=name)
        np.testing.assert_allclose(ours, ref, rtol=0, atol=bound, err_msg=name)


def test_a_folded_product_is_never_read_stale():
    """A product folded into its bias add is not stored: a handle on it that an earlier
    routine filled reads "no array yet" after a folded step, not the older value."""
    xs, ws, cs = (rng.standard_normal(n).astype(np.float32) for n in ((3, 4), (5, 4), 5))
    with G.new_graph("torch"):
        x = G.leaf("x", xs, batch=1)
        w = G.param("w", output=[5], input=[4], init=lambda sh, r: ws)
        c = G.param("c", output=[5], init=lambda sh, r: cs)
        h = w @ x
        y = h + c
        G.Model(h).run()  # h stored, from the first weights
        store = h.graph.store
        store.write(w.val, torch.tensor(2 * ws))
        G.grad_update(G.einsum1("... => |->0", y * y)).backward()  # folded: h not made
        np.testing.assert_allclose(y.numpy().numpy(), xs @ (2 * ws).T + cs, rtol=1e-5, atol=1e-5)
        with pytest.raises(KeyError, match="no array yet"):
            h.numpy()


def test_products_added_into_one_gradient_accumulate_in_the_product(monkeypatch):
    """``x`` (``b, t | d``) read by two projections: the second product adds into ``x.grad``
    by one ``addmm`` (torch's ``summed_contraction``); the values as summed separately and
    as torch's autograd.  Contractions it cannot do as one 2-D product give None."""
    bt, t, d, o = 3, 5, 6, 7
    xs, ws, vs = (rng.standard_normal(n).astype(np.float32) for n in ((bt, t, d), (o, d),
                                                                        (o, 2, d)))
    cls = type(backend_for(torch.Tensor))
    plan = cls.summed_contraction
    calls: list[int] = []

    def counted(self, *args):
        made = plan(self, *args)
        if made is None:
            return None
        return lambda *xs: calls.append(1) or made(*xs)

    def run() -> tuple[np.ndarray, ...]:
        with G.new_graph("torch"):
            x = G.param("x", output=[bt, t, d], input=[], init=lambda sh, r: xs)
            h = G.einsum1("b, t, d => b, t | d", x)
            w = G.param("w", output=[o], input=[d], init=lambda sh, r: ws)
            v = G.param("v", output=[o, 2], input=[d], init=lambda sh, r: vs)
            y = G.einsum1("... => |->0", (w @ h) * (w @ h)) + G.einsum1("... => |->0",
                                                                       (v @ h).tanh())
            G.grad_update(y).backward()
            return tuple(np.asarray(p.grad.numpy()) for p in (x, w, v))

    monkeypatch.setattr(cls, "summed_contraction", counted)
    summed = run()
    assert calls, "no product was added into its gradient"
    monkeypatch.setattr(cls, "summed_contraction", None)
    separate = run()
    tx, tw, tv = (torch.tensor(a.astype(np.float64), requires_grad=True) for a in (xs, ws, vs))
    ((tx @ tw.T) ** 2).sum().add(torch.einsum("btd,ead->btea", tx, tv).tanh().sum()).backward()
    for name, ours, theirs, ref in zip("xwv", summed, separate, (tx.grad, tw.grad, tv.grad),
                                       strict=True):
        ref = ref.numpy()
        bound = 8 * np.finfo(np.float32).eps * bt * t * o * d * max(np.abs(ref).max(), 1)
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=bound, err_msg=name)
        np.testing.assert_allclose(ours, ref, rtol=0, atol=bound, err_msg=name)
    adapter = backend_for(torch.Tensor)
    assert plan(adapter, "abd,bc->acd", [(2, 3, 4), (3, 5)]) is None  # axes interleave
    assert plan(adapter, "ab,ab->a", [(2, 3), (2, 3)]) is None  # a batch axis


@pytest.mark.parametrize(("subscripts", "made"), [
    ("a,a->", True),             # a dot product onto a scalar
    ("ik,kj->ij", True),         # a plain matrix product
    ("ik,jk->ij", True),         # a transposed operand: a view
    ("kij,kl->lij", True),       # the transposed product, rows of two labels
    ("ikj,kl->ijl", False),      # the axes of an operand interleave: a copy
    ("bik,bkj->bij", False),     # batched
    ("i,j->ij", False),          # nothing summed
    ("ik,kj->i", False),         # a label of one operand summed on its own
])
def test_summed_contraction_is_the_old_value_plus_the_product(subscripts, made, monkeypatch):
    """torch's ``summed_contraction`` (from the contraction plans' matrix-product analysis,
    :func:`tensig.backends._plans.gemm`): where it is made, ``old + einsum`` by one
    ``addmm``, in the output's shape, against torch's einsum in float64; None for what is
    not one 2-D product of views."""
    sizes = {"a": 5, "i": 3, "j": 4, "k": 6, "l": 2, "b": 2}
    ins, out = subscripts.split("->")
    shapes = [tuple(sizes[c] for c in s) for s in ins.split(",")]
    calls: list[int] = []
    addmm = torch.addmm
    monkeypatch.setattr(torch, "addmm", lambda *a: calls.append(1) or addmm(*a))
    summed = backend_for(torch.Tensor).summed_contraction(subscripts, shapes)
    assert (summed is not None) == made
    if summed is None:
        return
    x, y = (torch.tensor(rng.standard_normal(s), dtype=torch.float32) for s in shapes)
    old = torch.tensor(rng.standard_normal([sizes[c] for c in out]), dtype=torch.float32)
    got = summed(old, x, y)
    want = old.double() + torch.einsum(subscripts, x.double(), y.double())
    assert got.shape == want.shape and got.dtype == torch.float32 and calls == [1]
    bound = 8 * np.finfo(np.float32).eps * sizes["k"] * max(float(want.abs().max()), 1)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=0, atol=bound)
