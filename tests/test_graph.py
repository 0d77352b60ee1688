"""The model layer: graph-wide inference, each operation's forward against NumPy, each
gradient against finite differences and torch.autograd, on shapes that cannot collide."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

from arrays import conv_by_autograd
from tensig import Shape, ShapeError
from tensig.execution.ir import Code, prim
from tensig.model import blocks as B
from tensig.model import graph as G
from tensig.model.compile import compile_code
from tolerance import assert_equal_up_to_rounding

rng = np.random.default_rng(3)


def rand(*shape, positive=False):
    x = rng.standard_normal(shape).astype(np.float64)
    return np.abs(x) + 0.5 if positive else x


@pytest.fixture(autouse=True)
def fresh_graph():
    with G.new_graph() as g:
        yield g


# -- inference ----------------------------------------------------------------------


def test_inline_parameters_inferred_through_matmul():
    x = G.leaf("x", rand(5, 7), batch=1)  # 5 | 7
    w1 = G.param("w1", output=[11])
    w2 = G.param("w2", output=[3])
    b1 = G.param("b1")
    y = w2 @ (w1 @ x + b1).relu()
    assert w1.shape == Shape.parse("7->11")
    assert b1.shape == Shape.parse("11")
    assert w2.shape == Shape.parse("11->3")
    assert y.shape == Shape.parse("5|3")


def test_parameters_inferred_through_einsum():
    x = G.leaf("x", rand(5, 7), batch=1)
    w = G.param("w")
    G.einsum("b|i; i->o => b|o", x, w)
    out = G.leaf("target", rand(5, 4), batch=1)
    G.einsum1("b|o => b|o", G.einsum("b|i; i->o => b|o", x, w) - out)
    assert w.shape == Shape.parse("7->4")


def test_forgot_to_specify_the_hidden_size():
    x = G.leaf("x", rand(5, 7), batch=1)
    w = G.param("w")
    y = w @ x
    with pytest.raises(ShapeError, match="under-determined parameter 'w'"):
        _ = y.shape


def test_memory_bill_before_allocation():
    x = G.leaf("x", rand(32, 784).astype(np.float32), batch=1)
    w = G.param("w", output=[128])
    h = (w @ x).relu()
    bill = {name: (shape, nbytes) for name, shape, nbytes in h.graph.memory("float32")}
    assert bill["w"] == (Shape.parse("784->128"), 784 * 128 * 4)
    assert bill["w.grad"][1] == 784 * 128 * 4
    assert bill["relu"] == (Shape.parse("32|128"), 32 * 128 * 4)
    bf16 = {n: b for n, _, b in h.graph.memory("bfloat16")}
    assert bf16["w"] == 784 * 128 * 2


def test_scope_labels():
    with G.scope("layer1"):
        w = G.param("w", output=[3], input=[2])
    assert w.name == "layer1.w"


# -- forward values ----------------------------------------------------------------------


def run(y):
    return G.Model(y).run()


@pytest.mark.parametrize("name, fn", [
    ("relu", lambda v: np.maximum(v, 0)),
    ("exp", np.exp),
    ("tanh", np.tanh),
    ("sin", np.sin),
    ("cos", np.cos),
    ("neg", lambda v: -v),
    ("sat01", lambda v: np.clip(v, 0, 1)),
])
def test_unary_forward(name, fn):
    a = rand(3, 4)
    x = G.constant(a)
    np.testing.assert_allclose(run(getattr(x, name)()), fn(a.astype(np.float32)), rtol=1e-6)


def test_positive_domain_unary_forward():
    a = rand(3, 4, positive=True)
    x = G.constant(a)
    np.testing.assert_allclose(run(x.log()), np.log(a.astype(np.float32)), rtol=1e-6)
    np.testing.assert_allclose(run(x.sqrt()), np.sqrt(a.astype(np.float32)), rtol=1e-6)
    np.testing.assert_allclose(run(x.recip()), 1 / a.astype(np.float32), rtol=1e-6)


def test_binary_forward_with_broadcasting():
    a, b = rand(2, 3, 4), rand(4)
    x = G.leaf("x", a.astype(np.float32), batch=1)  # 2 | 3 4
    c = G.constant(b)
    np.testing.assert_allclose(run(x + c), (a + b).astype(np.float32), rtol=1e-6)
    np.testing.assert_allclose(run(x * c), (a * b).astype(np.float32), rtol=1e-6)
    np.testing.assert_allclose(run(x - 1.0), (a - 1).astype(np.float32), rtol=1e-6)
    np.testing.assert_allclose(run(x < c), (a < b).astype(np.float32))


def test_integer_power_semantics():
    a = np.array([0.0, -0.0, 2.0, -3.0, np.nan, np.inf, -np.inf], np.float32)
    x = G.constant(a)
    r0 = run(x ** 0)
    assert np.all(r0 == 1)  # exponent zero gives 1, even for zero and NaN
    r3 = run(x ** 3)
    np.testing.assert_array_equal(np.signbit(r3), np.signbit(a))  # odd powers keep the sign
    with np.errstate(divide="ignore"):  # 0 ** -2 is inf, as it should be
        np.testing.assert_allclose(run(x ** -2)[2:4], [0.25, 1 / 9], rtol=1e-6)


SPECIAL = np.array([np.nan, -np.inf, -3.0, -0.0, 0.0, 0.5, 2.0, np.inf], np.float32)


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_relu_and_gates_on_special_values(lib):
    """NaN propagates through relu and passes relu_gate (PyTorch's convention), infinities
    under a closed gate give 0 (not 0 * inf), and both backends agree element by element."""
    from tensig.execution.ir import BINARY, UNARY

    xp = pytest.importorskip(lib)
    arr = (lambda a: a) if lib == "numpy" else xp.asarray
    v = arr(SPECIAL)
    relu = np.asarray(UNARY["relu"](xp, v))
    np.testing.assert_array_equal(relu, [np.nan, 0, 0, 0, 0, 0.5, 2, np.inf])
    # v where v >= 0: -0.0 stays -0.0, a negative becomes +0.0 (1 / relu would show it)
    np.testing.assert_array_equal(np.signbit(relu[1:5]), [False, False, True, False])
    sat = np.asarray(UNARY["sat01"](xp, v))
    np.testing.assert_array_equal(sat, [np.nan, 0, 0, 0, 0, 0.5, 1, 1])
    # the gate: a gradient of inf, NaN or finite values under every kind of pre-activation
    for g in (np.full(8, np.inf, np.float32), np.full(8, np.nan, np.float32),
              np.arange(8, dtype=np.float32) + 1):
        gate = np.asarray(BINARY["relu_gate"](xp, v, arr(g)))
        expected = np.where(SPECIAL <= 0, 0.0, g).astype(np.float32)  # NaN > 0 is false...
        expected[0] = g[0]  # ...but a NaN pre-activation passes the gradient
        np.testing.assert_array_equal(gate, expected)
    sat_gate = np.asarray(BINARY["sat01_gate"](xp, v, arr(np.full(8, np.inf, np.float32))))
    np.testing.assert_array_equal(sat_gate, [0, 0, 0, 0, 0, np.inf, 0, 0])


def test_le_is_its_own_primitive_for_nan():
    a = G.constant(np.array([np.nan, 1.0]))
    b = G.constant(np.array([1.0, 1.0]))
    assert list(run(a <= b)) == [0.0, 1.0]
    assert list(run(a > b)) == [0.0, 0.0]


def test_matmul_forward_three_rows():
    xs, ws = rand(5, 7), rand(3, 7)  # x: 5 | 7 (output), w: 7 -> 3 stored (3, 7)
    x = G.leaf("x", xs.astype(np.float32), batch=1)
    w = G.leaf("w", ws.astype(np.float32), input=1)
    np.testing.assert_allclose(run(w @ x), (xs @ ws.T).astype(np.float32), rtol=1e-5)


# -- gradients ----------------------------------------------------------------------


def grads_by_torch(fn_torch, arrays):
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    fn_torch(*ts).sum().backward()
    return [t.grad.numpy() for t in ts]


def grads_by_tensig(build, arrays):
    params = []
    for i, a in enumerate(arrays):
        p = G.param(f"p{i}", output=list(a.shape), input=[], init=lambda shape, r, a=a: a)
        params.append(p)
    y = build(*params)
    loss = G.einsum1("...|...->... => |->0", y)
    m = G.grad_update(loss)
    m.backward()
    return [p.grad.numpy() for p in params]


def finite_difference(f, arrays, i, eps=1e-3):
    base = [a.astype(np.float64) for a in arrays]
    out = np.zeros_like(base[i])
    for idx in np.ndindex(base[i].shape):
        plus = [a.copy() for a in base]
        minus = [a.copy() for a in base]
        plus[i][idx] += eps
        minus[i][idx] -= eps
        out[idx] = (f(*plus).sum() - f(*minus).sum()) / (2 * eps)
    return out


CASES = [
    ("add", lambda a, b: a + b, lambda a, b: a + b, [(3, 4), (4,)]),
    ("sub", lambda a, b: a - b, lambda a, b: a - b, [(3, 4), (3, 4)]),
    ("mul", lambda a, b: a * b, lambda a, b: a * b, [(3, 4), (4,)]),
    ("div", lambda a, b: a / b, lambda a, b: a / b, [(3, 4), (4,)]),
    ("pow2", lambda a: a ** 2, lambda a: a ** 2, [(3, 5)]),
    ("pow3", lambda a: a ** 3, lambda a: a ** 3, [(3, 5)]),
    ("relu", lambda a: a.relu(), lambda a: torch.relu(a), [(4, 5)]),
    ("tanh", lambda a: a.tanh(), lambda a: torch.tanh(a), [(4, 5)]),
    ("exp", lambda a: a.exp(), lambda a: torch.exp(a), [(4, 5)]),
    ("sin", lambda a: a.sin(), lambda a: torch.sin(a), [(4, 5)]),
    ("cos", lambda a: a.cos(), lambda a: torch.cos(a), [(4, 5)]),
    ("max", lambda a, b: G.apply(G.BINARY_OPS["max"], a, b),
     lambda a, b: torch.maximum(a, b), [(3, 4), (3, 4)]),
    ("chain", lambda a, b: ((a * b).tanh() + a).relu() * b, lambda a, b:
     torch.relu(torch.tanh(a * b) + a) * b, [(3, 4), (3, 4)]),
    ("einsum", lambda a, b: G.einsum("ij;jk=>ik", a, b), lambda a, b: a @ b,
     [(3, 4), (4, 5)]),
    ("einsum1", lambda a: G.einsum1("ij => j", a), lambda a: a.sum(0), [(3, 4)]),
    ("where", lambda a, b: G.where(a > b, a, b), lambda a, b: torch.where(a > b, a, b),
     [(3, 4), (3, 4)]),
]


@pytest.mark.parametrize("name, build, ref, shapes", CASES, ids=[c[0] for c in CASES])
def test_gradients_against_torch_autograd(name, build, ref, shapes):
    arrays = [rand(*s) for s in shapes]
    if name == "div":
        arrays[1] = np.abs(arrays[1]) + 0.5
    ours = grads_by_tensig(build, [a.astype(np.float32) for a in arrays])
    theirs = grads_by_torch(ref, arrays)
    for o, t in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(o, t, rtol=2e-4, atol=2e-4)


def test_gradient_of_matmul_against_finite_differences():
    xs, ws = rand(5, 7), rand(3, 7)
    x = G.leaf("x", xs.astype(np.float32), batch=1)
    w = G.param("w", output=[3], init=lambda shape, r: ws.astype(np.float32))
    y = (w @ x).tanh()
    m = G.grad_update(G.einsum1("...|...->... => |->0", y * y))
    m.backward()

    def f(W):
        return np.tanh(xs @ W.T) ** 2

    np.testing.assert_allclose(w.grad.numpy(), finite_difference(f, [ws], 0), rtol=1e-3,
                               atol=1e-3)


def test_stop_gradient_cuts_the_graph():
    a = G.param("a", output=[3], init=lambda s, r: np.ones(s, np.float32))
    y = G.stop_gradient(a) * a
    G.grad_update(G.einsum1("... => |->0", y)).backward()
    np.testing.assert_allclose(a.grad.numpy(), np.ones(3))


def test_user_defined_operation_works_like_a_builtin():
    # softplus written once with its forward and backward code in the IR
    def forward(t, a):
        return Code().assign(t.val, prim("log", prim("add", 1.0, prim("exp", a.val))))

    def backward(t, a):
        sig = prim("recip", prim("add", 1.0, prim("exp", prim("neg", a.val))))
        return Code().assign(a.grad, prim("mul", t.grad, sig), accum="+", logic=".")

    softplus = G.OpDef("softplus", ".", forward, backward)
    arr = rand(3, 4)
    ours = grads_by_tensig(lambda a: G.apply(softplus, a), [arr.astype(np.float32)])
    theirs = grads_by_torch(lambda a: torch.nn.functional.softplus(a), [arr])
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-4, atol=1e-5)


def test_torch_backend_gives_the_same_results():
    xs = rand(5, 7).astype(np.float32)
    results = []
    for backend in ("numpy", "torch"):
        with G.new_graph(backend):
            x = G.leaf("x", xs, batch=1)
            w = G.param("w", output=[3], seed=1)
            loss = G.einsum1("...|...->... => |->0", (w @ x).relu())
            m = G.grad_update(loss)
            m.backward()
            results.append((np.asarray(m.output.numpy()), np.asarray(w.grad.numpy()),
                            np.array(np.asarray(w.numpy()), np.float64)))
    # two BLAS paths: equal up to rounding (sums of 7 products, then of 15 relus; the
    # gradient sums 5 rows of x), bounded by the same sums of absolute values
    ws, ax = results[0][2], np.abs(xs.astype(np.float64))
    assert_equal_up_to_rounding(results[1][0], results[0][0], dtype=np.float32, length=7 + 15,
                                magnitude=(ax @ np.abs(ws).T).sum())
    assert_equal_up_to_rounding(results[1][1], results[0][1], dtype=np.float32, length=5,
                                magnitude=ax.sum(0))


def test_ir_refuses_matrix_looking_division():
    a = G.param("a", output=[2], input=[2])
    with pytest.raises(ValueError, match="matrix inverse"):
        Code().assign(a.val, prim("div", a.val, a.val), accum="+", logic="@")


def test_eager_functions_build_graph_nodes_on_tensors():
    import tensig as ts

    a, b = rand(3, 4), rand(4, 5)
    x, w = G.constant(a), G.param("w", output=[4, 5], init=lambda s, r: b.astype(np.float32))
    y = ts.einsum("ij;jk=>ik", x, w)
    assert isinstance(y, G.Tensor) and y.shape == Shape(output=(3, 5))
    np.testing.assert_allclose(run(y), (a @ b).astype(np.float32), rtol=1e-5)
    assert isinstance(ts.tropical("ij;jk=>ik", x, w), G.Tensor)
    with pytest.raises(NotImplementedError, match=r"einsum1\(\) on graph tensors takes no "
                                                  "params/sizes"):
        ts.einsum1("ij => ji", x, params={"s": 2}, sizes={"i": 3})
    with pytest.raises(NotImplementedError, match="use_padding"):
        ts.einsum("ij;jk=>ik", x, w, use_padding=False)


def test_max_pooling_forward_and_gradient_gate():
    # windows that do not overlap: each max position gets the whole gradient
    xs = rand(1, 4, 4, 2)
    x = G.param("x", output=[4, 4, 2], init=lambda s, r: xs[0].astype(np.float32))
    window = G.constant(np.zeros((2, 2)))
    pooled = G.tropical("2*oh<+wh, 2*ow<+ww, c; wh, ww => oh, ow, c", x, window)
    tx = torch.tensor(xs, requires_grad=True)
    ref = torch.nn.functional.max_pool2d(tx.permute(0, 3, 1, 2), 2)
    np.testing.assert_allclose(run(pooled), ref.permute(0, 2, 3, 1)[0].detach().numpy(),
                               rtol=1e-6)
    G.grad_update(G.einsum1("... => |->0", pooled)).backward()
    ref.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad[0].numpy())


def test_tropical_and_einmax1_gradients_against_torch():
    arrays = [rand(3, 4), rand(4, 5)]
    ours = grads_by_tensig(lambda a, b: G.tropical("ij; jk => ik", a, b),
                           [a.astype(np.float32) for a in arrays])
    theirs = grads_by_torch(lambda a, b: (a[:, :, None] + b[None]).amax(dim=1), arrays)
    for o, t in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(o, t, rtol=1e-5, atol=1e-6)
    ours = grads_by_tensig(lambda a: G.einmax1("ij => i", a), [arrays[0].astype(np.float32)])
    theirs = grads_by_torch(lambda a: a.amax(dim=1), [arrays[0]])
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)
    ours = grads_by_tensig(lambda a, b: G.outer_sum("ij; jk => ik", a, b),
                           [a.astype(np.float32) for a in arrays])
    theirs = grads_by_torch(lambda a, b: (a[:, :, None] + b[None]).sum(dim=1), arrays)
    for o, t in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(o, t, rtol=1e-5)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("spec_axes, size, stride, dil, pads", [
    ("oh<+kh, ow<+kw", 3, 1, 1, (0, 0)),
    ("2*oh<+kh, 2*ow<+kw", 3, 2, 1, (0, 0)),
    ("oh<+2*kh, ow<+2*kw", 3, 1, 2, (0, 0)),
    ("oh=+kh, ow=+kw", 3, 1, 1, (1, 1)),
    ("oh=+kh, ow=+kw", 2, 1, 1, (1, 0)),  # an even kernel pads one side only
])
def test_convolution_gradients_against_torch(backend, spec_axes, size, stride, dil, pads):
    """Both backends (torch runs its own convolution and convolution backward)."""
    n, h, w, ic, oc = 2, 9, 9, 3, 4
    xs, ks = rand(n, h, w, ic), rand(oc, size, size, ic)
    with G.new_graph(backend):
        xp = G.param("xp", output=[n, h, w, ic], input=[],
                     init=lambda s, r: xs.astype(np.float32))
        k = G.param("k", output=[oc], input=[size, size, ic],
                    init=lambda s, r: ks.astype(np.float32))
        spec = f"bn, {spec_axes}, ic; kh, kw, ic -> oc => bn, oh, ow, oc"
        y = G.einsum(spec, xp, k)
        loss = G.einsum1("... => |->0", y * y)
        G.grad_update(loss).backward()
        ours = np.asarray(y.numpy()), np.asarray(xp.grad.numpy()), np.asarray(k.grad.numpy())
    y, dx, dk = conv_by_autograd(xs, ks, stride, dil, pads)
    np.testing.assert_allclose(ours[0], y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ours[1], dx, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(ours[2], dk, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("stride, size", [(2, 6), (1, 6), (1, 5)])
def test_max_pooling_gradient_against_torch(backend, stride, size):
    # stride 1 overlaps the windows: the product-space gate keeps the gradient exact;
    # stride 2 tiles the axes: the gate scatters back by a reshape
    xs = rand(2, size, size, 3)
    with G.new_graph(backend):
        x = G.param("x", output=[2, size, size, 3], input=[],
                    init=lambda s, r: xs.astype(np.float32))
        window = G.constant(np.zeros((2, 2)))
        spec = f"n, {stride}*oh<+wh, {stride}*ow<+ww, c; wh, ww => n, oh, ow, c"
        pooled = G.tropical(spec, x, window)
        G.grad_update(G.einsum1("... => |->0", pooled * pooled)).backward()
        ours = np.asarray(pooled.numpy()), np.asarray(x.grad.numpy())
    tx = torch.tensor(xs, requires_grad=True)
    out = torch.nn.functional.max_pool2d(tx.permute(0, 3, 1, 2), 2, stride=stride)
    (out ** 2).sum().backward()
    np.testing.assert_allclose(ours[0], out.permute(0, 2, 3, 1).detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(ours[1], tx.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("stride", [2, 1])
def test_pooling_sees_a_window_that_stops_being_zero(backend, stride):
    """A zero window runs max pooling, and a gradient gate without the window's add; after
    the window changes (in place on torch, replaced on NumPy: the zero test runs each
    call) the same compiled routine must add it, forward and backward."""
    xs, bias = rand(4, 8, 8, 16), rand(2, 2)
    spec = f"n, {stride}*oh<+wh, {stride}*ow<+ww, c; wh, ww => n, oh, ow, c"
    with G.new_graph(backend) as g:
        x = G.param("x", output=[4, 8, 8, 16], input=[], init=lambda s, r: xs.astype(np.float32))
        window = G.constant(np.zeros((2, 2), np.float32))
        pooled = G.tropical(spec, x, window)
        model = G.grad_update(G.einsum1("... => |->0", pooled * pooled))
        results = []
        for step in range(2):
            if step == 1:
                w = g.store.read(window.val)
                if backend == "torch":
                    w.add_(torch.tensor(bias, dtype=torch.float32))
                else:
                    g.store.write(window.val, bias.astype(np.float32))
            model.backward()
            results.append((np.array(np.asarray(pooled.numpy())),
                            np.array(np.asarray(x.grad.numpy()))))
    for (got, grad), w in zip(results, [np.zeros((2, 2)), bias], strict=True):
        tx = torch.tensor(xs, requires_grad=True)
        windows = tx.unfold(1, 2, stride).unfold(2, 2, stride)  # n, oh, ow, c, wh, ww
        out = (windows + torch.tensor(w)).amax(dim=(-2, -1))
        (out ** 2).sum().backward()
        np.testing.assert_allclose(got, out.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grad, tx.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_learned_window_changed_between_steps_is_seen(backend):
    """A learned window has two gradient steps besides its pooling (the input's and its own),
    each choosing a path by the window's zero test: a window changed between steps (in place
    on torch) takes the general path from then on, in the pooling and both gradients."""
    xs, bias = rand(2, 6, 6, 3), rand(2, 2)
    spec = "n, 2*oh<+wh, 2*ow<+ww, c; wh, ww => n, oh, ow, c"
    with G.new_graph(backend) as g:
        x = G.param("x", output=[2, 6, 6, 3], input=[], init=lambda s, r: xs.astype(np.float32))
        w = G.param("w", output=[2, 2], input=[], init=lambda s, r: np.zeros((2, 2), np.float32))
        pooled = G.tropical(spec, x, w)
        model = G.grad_update(G.einsum1("... => |->0", pooled * pooled))
        for step, window in enumerate([np.zeros((2, 2)), bias]):
            if step == 1 and backend == "torch":
                g.store.read(w.val).add_(torch.tensor(bias, dtype=torch.float32))
            elif step == 1:
                g.store.write(w.val, bias.astype(np.float32))
            model.backward()
            tx = torch.tensor(xs, requires_grad=True)
            tw = torch.tensor(window, requires_grad=True)
            out = (tx.unfold(1, 2, 2).unfold(2, 2, 2) + tw).amax(dim=(-2, -1))
            (out ** 2).sum().backward()
            np.testing.assert_allclose(np.asarray(x.grad.numpy()), tx.grad.numpy(), rtol=1e-4,
                                       atol=1e-5)
            np.testing.assert_allclose(np.asarray(w.grad.numpy()), tw.grad.numpy(), rtol=1e-4,
                                       atol=1e-5)


def test_a_pooling_step_that_failed_leaves_no_zero_test_behind(monkeypatch):
    """A pooling step that raised after its window's zero test (torch's kernel out of memory)
    must not hand that answer to a later step's gradients: the window, made nonzero in place
    meanwhile, was dropped from them (silently wrong gradients)."""
    from tensig.backends.torch import TorchBackend

    pool, failing = TorchBackend.max_pool, [True]

    def flaky(self, *args, **kwargs):
        if failing and failing.pop():
            raise RuntimeError("out of memory (simulated)")
        return pool(self, *args, **kwargs)

    monkeypatch.setattr(TorchBackend, "max_pool", flaky)
    xs, bias = rand(2, 6, 6, 3), rand(2, 2)
    spec = "n, 2*oh<+wh, 2*ow<+ww, c; wh, ww => n, oh, ow, c"
    with G.new_graph("torch") as g:
        x = G.param("x", output=[2, 6, 6, 3], input=[], init=lambda s, r: xs.astype(np.float32))
        w = G.param("w", output=[2, 2], input=[], init=lambda s, r: np.zeros((2, 2), np.float32))
        model = G.grad_update(G.einsum1("... => |->0", G.tropical(spec, x, w) ** 2))
        with pytest.raises(RuntimeError, match="simulated"):
            model.backward()
        g.store.read(w.val).add_(torch.tensor(bias, dtype=torch.float32))
        model.backward()
    tx, tw = (torch.tensor(v, requires_grad=True) for v in (xs, bias))
    ((tx.unfold(1, 2, 2).unfold(2, 2, 2) + tw).amax(dim=(-2, -1)) ** 2).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad.numpy()), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(w.grad.numpy()), tw.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_a_windowed_assignment_no_path_runs_is_refused_by_name():
    """Hand-written IR under a convolution spec with an accumulation no windowed path takes:
    a ShapeError naming the assignment, not a crash or a generic projection error."""
    with G.new_graph("numpy") as g:
        x = G.leaf("x", np.ones((6, 2), np.float32))
        k = G.leaf("k", np.ones((3, 2), np.float32))
        y = G.einsum("h=+kh, c; kh, c => h", x, k)
        code = Code().assign(y.val, prim("mul", x.val, k.val), accum="max",
                             logic="h=+kh, c; kh, c => h")
        with pytest.raises(ShapeError, match=r"einsum.value =max .*affine or concatenated axes"):
            compile_code(code, g.array_type)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 4), outs=st.integers(1, 5), channels=st.sampled_from([1, 3, 16]),
       stride=st.integers(1, 3), window=st.integers(1, 3), zero=st.booleans(),
       ties=st.booleans(), seed=st.integers(0, 2**16))
def test_windowed_max_and_its_gradient_against_torch(backend, n, outs, channels, stride,
                                                     window, zero, ties, seed):
    """Drawn geometries (tiled, overlapping, gapped windows; one to 16 channels), zero or
    random windows, and values rounded to make ties: the tropical value and its gradient
    against torch's autograd through its window max (unfold, then ``max`` over each window,
    which routes a tie to the first maximum) and, for a window of zeros, through torch's
    ``max_pool2d``: the same cells get the gradient."""
    size = stride * (outs - 1) + window  # "<+": every window inside the input
    r = np.random.default_rng(seed)
    xs = r.standard_normal((n, size, size, channels))
    if ties:
        xs = np.round(xs)  # many equal values per window
    ws = np.zeros((window, window)) if zero else r.standard_normal((window, window))
    spec = f"n, {stride}*oh<+wh, {stride}*ow<+ww, c; wh, ww => n, oh, ow, c"
    with G.new_graph(backend):
        x = G.param("x", output=[n, size, size, channels], input=[],
                    init=lambda s, rr: xs.astype(np.float32))
        w = G.constant(ws.astype(np.float32))
        pooled = G.tropical(spec, x, w)
        G.grad_update(G.einsum1("... => |->0", pooled * pooled)).backward()
        got, grad = (np.array(np.asarray(t)) for t in (pooled.numpy(), x.grad.numpy()))
    tx = torch.tensor(xs.astype(np.float32), dtype=torch.float64, requires_grad=True)
    cells = tx.unfold(1, window, stride).unfold(2, window, stride)   # n, oh, ow, c, wh, ww
    summed = cells + torch.tensor(ws.astype(np.float32), dtype=torch.float64)
    out = summed.flatten(-2).max(-1).values  # the first maximum of each window
    (out * out).sum().backward()
    np.testing.assert_allclose(got, out.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(grad, tx.grad.numpy(), rtol=1e-5, atol=1e-5)
    if zero:  # torch's own max pooling routes each window's gradient to the same cell
        tp = tx.detach().permute(0, 3, 1, 2).clone().requires_grad_(True)
        y = F.max_pool2d(tp, window, stride)
        (y * y).sum().backward()
        np.testing.assert_array_equal(grad != 0, tp.grad.permute(0, 2, 3, 1).numpy() != 0)


@pytest.mark.parametrize("backend", ["numpy", "torch", "jax"])
@pytest.mark.parametrize("result", ["n, oh, ow, c", "c, ow, oh, n"])
def test_tiled_pooling_gate_with_ties_in_any_result_order(backend, result, monkeypatch):
    """Tiled 2x2 pooling of rounded values (many ties), its result in the input's axis order
    (the gate on the tiled view on NumPy and JAX) or permuted (the lowering's general path),
    by torch's own pooling backward on torch: each window's gradient goes to its first
    maximum only, the cell torch's ``max_pool2d`` gives it to."""
    from tensig.backends.torch import TorchBackend

    if backend == "jax":
        pytest.importorskip("jax")
    xs = np.round(rand(3, 6, 4, 5))
    spec = f"n, 2*oh<+wh, 2*ow<+ww, c; wh, ww => {result}"
    calls = []
    kernel = TorchBackend.max_pool_backward
    monkeypatch.setattr(TorchBackend, "max_pool_backward",
                        lambda self, *a: calls.append(1) or kernel(self, *a))
    with G.new_graph(backend):
        x = G.param("x", output=[3, 6, 4, 5], input=[], init=lambda s, r: xs.astype(np.float32))
        pooled = G.tropical(spec, x, G.constant(np.zeros((2, 2), np.float32)))
        G.grad_update(G.einsum1("... => |->0", pooled * pooled)).backward()
        got, grad = (np.array(np.asarray(t)) for t in (pooled.numpy(), x.grad.numpy()))
    tx = torch.tensor(xs, dtype=torch.float64).permute(0, 3, 1, 2).requires_grad_(True)
    out = F.max_pool2d(tx, 2)                                        # n, c, oh, ow
    (out * out).sum().backward()
    perm = [["n", "c", "oh", "ow"].index(a.strip()) for a in result.split(",")]
    np.testing.assert_allclose(got, out.detach().permute(*perm).numpy(), rtol=1e-6)
    np.testing.assert_allclose(grad, tx.grad.permute(0, 2, 3, 1).numpy(), rtol=1e-6)
    cells = tx.detach().unfold(2, 2, 2).unfold(3, 2, 2)             # n, c, oh, ow, wh, ww
    tied = (cells == out.detach()[..., None, None]).sum((-2, -1))
    assert int((tied > 1).sum()) > 0  # some maxima do tie
    assert int((grad != 0).sum()) == int((out != 0).sum())  # one cell a window
    assert len(calls) == (backend == "torch")


def test_zero_test_reads_the_values_every_call():
    """No cache: a write the version counter misses (through NumPy memory) is seen."""
    from tensig.backends import all_zero

    a = np.zeros((2, 2), np.float32)
    t = torch.from_numpy(a)
    assert all_zero(t) and all_zero(a)
    a[0, 0] = 1
    assert not all_zero(t) and not all_zero(a)
    assert not all_zero(np.array([np.nan])) and all_zero(np.array([-0.0]))


def test_ndarray_literals_and_bases():
    m = G.ndarray([(1, 2, 3), (4, 5, 6)])
    assert m.shape == Shape.parse("3->2")
    np.testing.assert_array_equal(run(m), [[1, 2, 3], [4, 5, 6]])
    b = G.ndarray(G.batch([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    assert b.shape == Shape.parse("3|2")
    rgb = G.ndarray(G.axis([1.0, 2.0, 3.0], "rgb"))
    assert str(rgb.shape) == "rgb=3"
    with pytest.raises(ValueError, match="nest as batch"):
        G.ndarray([G.batch([1.0])])
    with pytest.raises(ValueError, match="ragged"):
        G.ndarray([[1.0, 2.0], [3.0]])


def test_bases_propagate_and_refuse_to_fuse():
    rgb = G.ndarray(G.axis([1.0, 2.0, 3.0], "rgb"))
    w = G.param("w")
    y = rgb * w
    assert str(w.shape) == "rgb=3" and str(y.shape) == "rgb=3"
    with pytest.raises(ShapeError, match="basis mismatch"):
        _ = (rgb + G.ndarray([1.0, 2.0, 3.0])).shape


def test_ranges():
    np.testing.assert_array_equal(run(G.range_(4)), [0, 1, 2, 3])
    np.testing.assert_array_equal(run(G.range_of_shape(2, 3)), [[0, 1, 2], [3, 4, 5]])
    # the per-axis index-grid idiom of the doc: range n => i0 and range n => 0j
    rows = G.einsum1("i => i0", G.range_(3))
    cols = G.einsum1("j => 0j", G.range_(3))
    assert rows.shape == Shape(output=(3, 1)) and cols.shape == Shape(output=(1, 3))
    np.testing.assert_array_equal(run(rows <= cols), np.triu(np.ones((3, 3))))


def test_concat_forward_and_gradients():
    a0, b0 = rand(2, 3), rand(2, 4)
    a = G.param("a", output=[2, 3], input=[], init=lambda s, r: a0.astype(np.float32))
    b = G.param("b", output=[2, 4], input=[], init=lambda s, r: b0.astype(np.float32))
    c = G.concat("s, x; s, y => s, x^y", a, b)
    assert c.shape == Shape(output=(2, 7))
    np.testing.assert_allclose(run(c), np.concatenate([a0, b0], axis=1).astype(np.float32))
    weights = G.constant(rand(2, 7))
    G.grad_update(G.einsum1("... => |->0", c * c * weights)).backward()
    w = np.asarray(weights.numpy())
    full = 2 * np.concatenate([a0, b0], axis=1) * w
    np.testing.assert_allclose(a.grad.numpy(), full[:, :3], rtol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), full[:, 3:], rtol=1e-5)


def test_prefix_slice_gradient_lands_in_the_prefix():
    v0 = rand(6)
    v = G.param("v", output=[6], input=[], init=lambda s, r: v0.astype(np.float32))
    head = G.concat("2^x => x", v)          # skip 2
    assert head.shape == Shape(output=(4,))
    G.grad_update(G.einsum1("... => |->0", head)).backward()
    np.testing.assert_allclose(v.grad.numpy(), [0, 0, 1, 1, 1, 1])


def test_block_tensors_stack_along_new_axes():
    a0, b0 = rand(3), rand(3)
    a = G.param("a", output=[3], input=[], init=lambda s, r: a0.astype(np.float32))
    b = G.param("b", output=[3], input=[], init=lambda s, r: b0.astype(np.float32))
    rows = G.ndarray([a, b])                # a new output axis: 2, 3
    cols = G.ndarray((a, b))                # a new input axis: 2 -> 3
    assert rows.shape == Shape(output=(2, 3))
    assert cols.shape == Shape.parse("2->3")
    np.testing.assert_allclose(run(rows), np.stack([a0, b0]).astype(np.float32))
    np.testing.assert_allclose(run(cols), np.stack([a0, b0], axis=1).astype(np.float32))
    G.grad_update(G.einsum1("... => |->0", rows * rows)).backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * a0, rtol=1e-5)
    grid = G.ndarray([[a, b], [b, a]])      # nested: 2, 2, 3
    assert grid.shape == Shape(output=(2, 2, 3))


@pytest.mark.parametrize("other", [1.0, [1.0, 2.0, 3.0], None])
def test_block_literals_mixing_tensors_and_numbers_are_refused(other):
    # a TypeError naming the mix (since _block read its levels from _LEVELS, StopIteration)
    a = G.param("a", output=[3], input=[], init=lambda s, r: np.zeros(3, np.float32))
    with pytest.raises(TypeError, match=r"a literal mixes tensors and .*wrap numbers"):
        G.ndarray([a, other])


def test_stretch_takes_its_shape_from_its_use():
    xs = rand(4, 3)
    x = G.leaf("x", xs.astype(np.float32), batch=1)   # 4 | 3
    s = G.stretch(2.0)
    y = x * s
    assert s.shape == Shape.parse("4|3") and y.shape == Shape.parse("4|3")
    np.testing.assert_allclose(run(y), (2 * xs).astype(np.float32), rtol=1e-6)
    # without stretch the constant keeps its own shape: it is broadcast, not widened
    assert G.constant(np.array([2.0])).shape == Shape(output=(1,))


def test_merge_buffers():
    a = G.param("a", output=[3], input=[], init=lambda s, r: np.ones(s, np.float32))
    code = Code().assign(a.grad, a.grad.merge, accum="+")
    assert repr(code) == "a.grad =+ id(a.grad.merge) ~logic:'.'"
    with pytest.raises(ValueError):
        _ = a.grad.merge.merge


def test_user_operation_runs_eagerly_on_arrays():
    def forward(t, a):
        return Code().assign(t.val, prim("log", prim("add", 1.0, prim("exp", a.val))))

    softplus = G.OpDef("softplus", ".", forward)
    x = rand(3, 4).astype(np.float32)
    out = G.apply(softplus, x)
    # log(1 + exp(x)) in float32 rounds 1 + exp(x) first: an absolute error of about 6e-8
    want = np.log1p(np.exp(x.astype(np.float64)))
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-7)
    tout = G.apply(softplus, torch.tensor(x))
    assert isinstance(tout, torch.Tensor)
    np.testing.assert_allclose(tout.numpy(), want, rtol=1e-6, atol=1e-7)


def test_labels_are_enriched_from_operands():
    x = G.leaf("x", rand(2, 3).astype(np.float32), batch=1)
    with G.scope("layer1"):
        w = G.param("w", output=[4])
        h = (w @ x).relu()
    assert w.name == "layer1.w" and h.name == "layer1.relu"
    assert h.label == ("layer1", "relu", "w", "x")


def test_every_accumulation_operator():
    a0, b0 = rand(3, positive=True), rand(3, 4, positive=True)
    a = G.constant(a0)
    b = G.constant(b0)
    G.Model(a).run()
    G.Model(b).run()
    store = a.graph.store
    expected = {
        "+": a0 + b0.sum(1), "-": a0 - b0.sum(1), "*": a0 * b0.prod(1),
        "/": a0 / b0.prod(1), "**": a0 ** b0.prod(1), "max": np.maximum(a0, b0.max(1)),
        "min": np.minimum(a0, b0.min(1)),
    }
    for accum, want in expected.items():
        store.write(a.val, a0.astype(np.float32))
        code = Code().assign(a.val, b.val, accum=accum, logic="ij => i")
        compile_code(code, np.ndarray).run(store)
        np.testing.assert_allclose(store.read(a.val), want.astype(np.float32), rtol=1e-4,
                                   err_msg=accum)


def test_concatenation_component_inferred_from_the_result():
    x = G.leaf("x", rand(2, 3).astype(np.float32))             # output 2, 3
    p = G.param("p", input=[])                                 # size from use
    c = G.concat("s, a; s, b => s, a^b", x, p)
    out = G.leaf("target", rand(2, 8).astype(np.float32))
    G.concat("s, a => s, a", c - out)  # ties c to the target's shape
    assert p.shape == Shape(output=(2, 5))


def test_zeroing_folds_into_the_first_gradient_contribution():
    from tensig.model.compile import fold_zero_init

    a = G.param("a", output=[3], input=[], init=lambda s, r: np.ones(s, np.float32))
    y = a * a + a
    loss = G.einsum1("... => |->0", y)
    m = G.grad_update(loss)
    code = Code().extend(loss.forward_code()).extend(loss.zero_grads_code())
    code.assign(loss.grad, 1.0).extend(loss.backprop_code())
    folded = fold_zero_init(code)
    assert len(folded) < len(code)  # zeroing assignments disappeared
    m.backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * np.ones(3) + 1)  # d(a^2 + a) = 2a + 1


@pytest.mark.parametrize("accum, expected", [
    ("+", lambda v: v), ("-", lambda v: -v), ("*", lambda v: v), ("/", lambda v: 1 / v),
    ("**", lambda v: v ** 0), ("max", lambda v: v), ("min", lambda v: v),
    ("or", lambda v: (v != 0) * 1.0), ("and", lambda v: (v != 0) * 1.0)])
def test_initialising_accumulation_starts_from_the_neutral_element(accum, expected):
    """``y =:- v`` is ``0 - v``, ``y =:/ v`` is ``1 / v``: whatever y held before is ignored."""
    v = rand(3, positive=True).astype(np.float32)
    x = G.leaf("x", v)
    y = G.leaf("y", np.full(3, 7.0, np.float32))
    store = G.Model(x).graph.store
    store.write(y.val, np.full(3, 7.0, np.float32))
    compile_code(Code().assign(y.val, x.val, accum=accum, init=True), np.ndarray).run(store)
    np.testing.assert_allclose(store.read(y.val), expected(v), rtol=1e-6)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("gs", [[1.0, 2.0, 3.0, 4.0], [np.inf, np.nan, -np.inf, 4.0]])
def test_where_of_a_comparison_selects_exactly(backend, gs):
    """``where(eq(x, y), g, 0)`` masks by multiplication when g is finite, and still gives 0
    (not 0 * inf = NaN) where g is infinite or NaN."""
    with G.new_graph(backend) as graph:
        x = G.leaf("x", np.array([1.0, 2.0, 3.0, 5.0], np.float32))
        y = G.leaf("y", np.array([1.0, 0.0, 3.0, 4.0], np.float32))
        g = G.leaf("g", np.array(gs, np.float32))
        out = G.leaf("out", np.zeros(4, np.float32))
        store = G.Model(x + y + g + out).graph.store
        for cmp, keep in (("eq", [1, 0, 1, 0]), ("lt", [0, 0, 0, 0]), ("ne", [0, 1, 0, 1])):
            code = Code().assign(out.val, prim("where", prim(cmp, x.val, y.val), g.val, 0.0))
            compile_code(code, graph.array_type).run(store)
            want = np.where(np.array(keep, bool), np.array(gs, np.float32), 0.0)
            np.testing.assert_array_equal(np.asarray(store.read(out.val)), want, err_msg=cmp)


def test_dead_stores_and_copies_are_dropped_without_changing_results():
    from tensig.model.compile import drop_dead_stores

    x = G.leaf("x", rand(3).astype(np.float32))
    y = G.leaf("y", rand(3).astype(np.float32))
    code = Code().assign(y.val, 0.0).assign(y.val, 1.0)      # the zero is never read
    code.assign(y.val, x.val, accum="+")                     # reads y: keeps the 1.0
    assert [repr(a) for a in drop_dead_stores(code)] == [repr(a) for a in list(code)[1:]]
    store = G.Model(x).graph.store
    compile_code(code, np.ndarray).run(store)
    np.testing.assert_allclose(store.read(y.val), 1.0 + np.asarray(x.numpy()), rtol=1e-6)
    # y =: id(x) pointwise stores x's own array
    compile_code(Code().assign(y.val, x.val), np.ndarray).run(store)
    assert store.read(y.val) is store.read(x.val)


_ASSIGNS = st.lists(st.tuples(
    st.sampled_from("abc"),                                        # left-hand side
    st.sampled_from([None, "+", "-", "max"]), st.booleans(),       # accumulation, init
    st.one_of(st.sampled_from(["a", "b", "c", 0.0, 1.5]),          # expression
              st.tuples(st.sampled_from(["add", "mul", "sub"]),
                        st.sampled_from(["a", "b", "c", 2.0]), st.sampled_from(["a", "b", "c"])))),
    min_size=1, max_size=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(assigns=_ASSIGNS)
def test_compile_passes_keep_what_running_one_assignment_at_a_time_gives(assigns):
    """Random pointwise code over three buffers, compiled whole (dead stores dropped, zero
    initialisations folded, copies aliased, repeats fused) against each assignment compiled
    and run alone: the same final values."""
    from arrays import expr_of

    stores = []
    for whole in (True, False):
        with G.new_graph("numpy") as g:
            ts = {n: G.leaf(n, np.array([0.5, -1.0, 2.0], np.float32) * (i + 1))
                  for i, n in enumerate("abc")}
            model = G.Model(ts["a"] + ts["b"] + ts["c"])
            code = Code()
            for lhs, accum, init, e in assigns:
                code.assign(ts[lhs].val, expr_of(e, {n: t.val for n, t in ts.items()}),
                            accum=accum, init=init and accum is not None)
            if whole:
                compile_code(code, g.array_type).run(model.graph.store)
            else:
                for a in code:
                    compile_code(Code([a]), g.array_type).run(model.graph.store)
            stores.append({n: np.array(model.graph.store.read(t.val)) for n, t in ts.items()})
    for n in "abc":
        np.testing.assert_array_equal(stores[0][n], stores[1][n], err_msg=n)


def test_contributions_of_a_zeroed_buffer_are_dropped():
    from tensig.model.compile import drop_zero_contributions

    a = G.leaf("a", np.array([1.0, np.inf, 3.0], np.float32))
    z = G.leaf("z", np.zeros(3, np.float32))
    y = G.leaf("y", np.ones(3, np.float32))
    code = Code().assign(z.val, 0.0)
    code.assign(y.val, prim("where", prim("eq", a.val, a.val), z.val, 0.0), accum="+")  # zero
    code.assign(y.val, prim("relu_gate", a.val, prim("neg", z.val)), accum="-")          # zero
    code.assign(y.val, z.val * a.val, accum="+")  # 0 * inf is NaN: kept
    items = list(code)
    kept = list(drop_zero_contributions(code))
    assert [repr(x) for x in kept] == [repr(items[0]), repr(items[3])]
    store = G.Model(a + z + y).graph.store
    compile_code(code, np.ndarray).run(store)
    np.testing.assert_array_equal(store.read(y.val), [1.0, np.nan, 1.0])
    # once the buffer is written again it is no longer known to be zero
    code.assign(z.val, a.val).assign(y.val, prim("id", z.val), accum="+")
    assert len(drop_zero_contributions(code)) == 4


def test_transpose_swaps_input_and_output_rows():
    ws = rand(3, 4)  # stored (output 3, input 4)
    w = G.param("w", output=[3], input=[4], init=lambda s, r: ws.astype(np.float32))
    wt = w.T
    assert wt.shape == Shape.parse("3->4")
    np.testing.assert_allclose(run(wt), ws.T.astype(np.float32))
    weights = G.leaf("weights", rand(4, 3).astype(np.float32), input=1)  # 3 -> 4, like wt
    G.grad_update(G.einsum1("... => |->0", wt * weights)).backward()
    np.testing.assert_allclose(w.grad.numpy(), np.asarray(weights.numpy()).T, rtol=1e-6)


# -- fixes: diagonals, t.id() ---------------------------------------------------------


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_writing_a_diagonal_and_its_gradient(backend):
    """``i => ii`` places a vector on a diagonal (eager einsum1 does; now a graph too), and
    the gradient of ``ii => i`` is the diagonal placement of the incoming gradient."""
    xs, ws = rand(3), rand(3, 3)
    with G.new_graph(backend):
        x = G.param("x", output=[3], input=[], init=lambda s, r: xs.astype(np.float32))
        y = G.einsum1("i => ii", x)
        w = G.leaf("w", ws.astype(np.float32))
        m = G.grad_update(G.einsum1("... => 0", y * w))
        m.backward()
        got_y, got_gx = np.asarray(y.numpy()), np.asarray(x.grad.numpy())
        z = G.param("z", output=[3, 3], input=[], init=lambda s, r: ws.astype(np.float32))
        d = G.einsum1("ii => i", z)
        m = G.grad_update(G.einsum1("... => 0", d * G.leaf("u", xs.astype(np.float32))))
        m.backward()
        got_d, got_gz = np.asarray(d.numpy()), np.asarray(z.grad.numpy())
    np.testing.assert_allclose(got_y, np.diag(xs), rtol=1e-6)
    np.testing.assert_allclose(got_gx, np.diag(ws), rtol=1e-6)
    np.testing.assert_allclose(got_d, np.diag(ws), rtol=1e-6)
    np.testing.assert_allclose(got_gz, np.diag(xs), rtol=1e-6)


def test_id_method_is_not_shadowed_by_the_tensor_number():
    a = G.param("a", output=[3], init=lambda s, r: np.arange(3, dtype=np.float32))
    b = a.id()
    assert isinstance(b, G.Tensor) and b.op.name == "id" and b.args == (a,)
    assert isinstance(a.id, int) and a.val.key == (a.id, "value")
    np.testing.assert_array_equal(G.Model(b * 2.0).run(), [0.0, 2.0, 4.0])


def test_one_tensor_twice_in_a_spec_plays_both_roles():
    """``a`` as both operands of ``ij;jk=>ik`` (its axes labelled differently in each role):
    the value is ``a @ a`` and the gradient has both parts."""
    arr = rand(3, 3)
    ours = grads_by_tensig(lambda a: G.einsum("ij;jk=>ik", a, a), [arr.astype(np.float32)])
    theirs = grads_by_torch(lambda a: a @ a, [arr])
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-5)


# -- issue 15, section 5: the remaining traps ----------------------------------------------


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_stretched_window_takes_its_size_from_its_use_in_a_batched_spec(backend):
    """A max-pooling window written as ``G.stretch(0.0)`` (OCANNL's idiom for a kernel whose
    shape comes from its use) in a spec with a batch row: the window is sized by the
    pooled output's use, its batch row (which the spec leaves free) has no axes.  It used to
    be "under-determined parameter 'stretch.0.0' ... (batch=[...])", a keyword neither
    stretch nor param takes.  The gradient goes to each window's maximum."""
    xs = rand(2, 8).astype(np.float32)
    with G.new_graph(backend):
        p = G.param("x", output=[2, 8], input=[], init=lambda s, r: xs)
        x = G.einsum1("b, i => b | i", p)
        y = G.tropical("b|2*o<+k; k => b|o", x, G.stretch(0.0))
        target = G.leaf("t", np.ones((2, 4), np.float32), batch=1)  # sizes o, hence k
        G.grad_update(G.einsum1("... => |->0", y * target)).backward()
        got, grad = np.asarray(y.numpy()), np.asarray(p.grad.numpy())
    pairs = xs.reshape(2, 4, 2)
    np.testing.assert_array_equal(got, pairs.max(-1))
    want = (pairs == pairs.max(-1, keepdims=True)).astype(np.float32).reshape(2, 8)
    np.testing.assert_array_equal(grad, want)


def test_a_window_nothing_sizes_is_an_error_naming_its_label():
    """The error names the window's label and its hint says how to size it (a stretch takes
    no shape keyword); following the hint pools."""
    xs = rand(2, 8).astype(np.float32)
    with G.new_graph():
        x = G.leaf("x", np.zeros((2, 8), np.float32), batch=1)
        y = G.tropical("b|2*o<+k; k => b|o", x, G.stretch(0.0))
        with pytest.raises(ShapeError, match=r"cannot infer the size of output axis 0 of "
                                              r"'stretch\.0\.0' \(label 'k'\)") as err:
            _ = y.shape
        assert "capture=['k'], then d['k'].set_dim(n)" in str(err.value)
    with G.new_graph():
        x = G.leaf("x", xs, batch=1)
        y, d = G.tropical("b|2*o<+k; k => b|o", x, G.stretch(0.0), capture=["k"])
        d["k"].set_dim(2)
        np.testing.assert_array_equal(G.Model(y).run(), xs.reshape(2, 4, 2).max(-1))


def test_one_label_for_query_and_key_positions_writes_a_diagonal():
    """``b, t | e; b, t | e => b, t | t`` uses one label for both positions: by the
    notation's rules that is one axis, so the scores are written on the diagonal (each
    position with itself) -- defined, not the internal "writing a diagonal ... not
    supported" error it used to be.  Attention needs two labels (``q`` and ``k``, as
    ``blocks.multi_head_attention`` writes them)."""
    qs = rand(2, 5, 4).astype(np.float32)
    with G.new_graph():
        q = G.leaf("q", qs, batch=2)
        s = G.einsum("b, t | e; b, t | e => b, t | t", q, q)
        got = G.Model(s).run()
        full = G.Model(G.einsum("b, q | e; b, k | e => b, q | k", q, q)).run()
    dots = np.einsum("bte,bte->bt", qs.astype(np.float64), qs)
    size = np.einsum("bqe,bke->bqk", np.abs(qs), np.abs(qs))
    assert_equal_up_to_rounding(got, dots[:, :, None] * np.eye(5), dtype=np.float32, length=4,
                                magnitude=size)
    assert_equal_up_to_rounding(full, np.einsum("bqe,bke->bqk", qs.astype(np.float64), qs),
                                dtype=np.float32, length=4, magnitude=size)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_parameter_summed_whole_closes_its_input_row(backend):
    """``einsum1("i => |->0", G.param("p", output=[4]))``: only the spec's ``...`` reaches the
    parameter's input row, and nothing sizes it, so it has no axes (OCANNL's closing rule; it
    used to be "under-determined").  The value is the sum, each cell's gradient is the
    upstream gradient (here the target's weight)."""
    vals = rand(4).astype(np.float32)
    with G.new_graph(backend):
        p = G.param("p", output=[4], init=lambda s, r: vals)
        y = G.einsum1("i => |->0", p)
        loss = G.einsum1("... => |->0", y * 3.0)
        G.grad_update(loss).backward()
        assert p.shape == Shape(output=(4,)) and y.shape == Shape(output=(1,))
        got, grad = np.asarray(y.numpy()), np.asarray(p.grad.numpy())
    assert_equal_up_to_rounding(got, [vals.astype(np.float64).sum()], dtype=np.float32,
                                length=4, magnitude=np.abs(vals).sum())
    np.testing.assert_array_equal(grad, np.full(4, 3.0, np.float32))


def test_a_row_that_only_a_spec_reaches_closes_but_its_sizes_must_be_known():
    """The closing gives a row no axes; an axis the spec writes whose size nothing gives is
    still an error naming it, and a parameter no spec reaches (``w @ x`` with ``w``'s output
    free) is still under-determined (OCANNL's "you forgot to specify the hidden dimension")."""
    with G.new_graph():
        y = G.einsum1("i => |->0", G.param("p"))
        with pytest.raises(ShapeError, match=r"cannot infer the size of output axis 0 of 'p' "
                                             r"\(label 'i'\)"):
            _ = y.shape
    with G.new_graph():
        y = G.param("w") @ G.leaf("x", rand(5, 7), batch=1)
        with pytest.raises(ShapeError, match="under-determined parameter 'w': no use "
                                             "determines its output axes"):
            _ = y.shape


@pytest.mark.parametrize("total", [lambda y: G.einsum1("... => |->0", y), B.mean,
                                   lambda y: G.einsum1("...|... => ...|...", y)])
def test_a_spec_after_a_compose_does_not_close_the_parameters_hidden_row(total):
    """``w @ x`` with ``w``'s output free, the result then summed (a loss) or passed through a
    spec: the spec's ``...`` reaches ``w``'s output row only through the compose, so it is
    still the forgotten hidden row, not a row that closes to no axes (``w`` was ``7->``)."""
    with G.new_graph():
        w = G.param("w")
        y = total(w @ G.leaf("x", rand(5, 7), batch=1))
        with pytest.raises(ShapeError, match="under-determined parameter 'w': no use "
                                             "determines its output axes"):
            _ = y.shape


def test_reading_a_closed_row_mid_build_does_not_commit_it():
    """``einsum1("i => |->0", p)`` reads ``p``'s free input row as no axes, but a solve made
    before a later use sizes it (``y.shape``, a captured size's ``.value``: each solves the
    whole graph so far) must not fix it at no axes: ``p @ x`` afterwards gives ``p`` x's
    7 input cells, as one solve at the end does (it was a rank mismatch naming 0 axes).  A
    compiled model does fix it (its arrays are made)."""
    x = rand(5, 7)
    for read in (lambda y, d: y.shape, lambda y, d: d["i"].value):
        with G.new_graph():
            p = G.param("p", output=[4])
            y, d = G.einsum1("i => |->0", p, capture=["i"])
            assert read(y, d) is not None and y.shape == Shape(output=(1,))
            z = p @ G.leaf("x", x, batch=1)
            assert p.shape == Shape(input=(7,), output=(4,))
            assert z.shape == Shape(batch=(5,), output=(4,)) and y.shape == Shape(output=(1,))
    # a model compiled in between made p's array at no input axes: the row is fixed there,
    # and the later use is the rank mismatch, not a run on a stale array
    with G.new_graph():
        p = G.param("p", output=[4], init=lambda s, r: np.arange(4, dtype=np.float32))
        y = G.einsum1("i => |->0", p)
        np.testing.assert_array_equal(G.Model(y).run(), [6.0])
        with pytest.raises(ShapeError, match=r"rank mismatch in the input row: 'p''s input row "
                                             r"has exactly 0 axes"):
            p @ G.leaf("x", x, batch=1)


def test_compose_and_transpose_logic_count_their_operands():
    # a user OpDef under "@" or "T" logic with the wrong number of operands is refused by name
    with G.new_graph():
        x = G.leaf("x", np.ones((2, 3), np.float32), batch=1)
        ident = G.UNARY_OPS["id"].forward
        with pytest.raises(TypeError, match=r"logic '@' takes 2 or 3 operand\(s\), got 1"):
            G.apply(G.OpDef("my_matmul", "@", ident), x)
        with pytest.raises(TypeError, match=r"my_T: logic 'T' takes 1 operand\(s\), got 2"):
            G.apply(G.OpDef("my_T", "T", ident), x, x * 2)
        assert str(G.apply(G.OpDef("my_T", "T", ident), x).shape) == "2|3->"


@pytest.mark.parametrize("backend", ["numpy", "torch", "jax"])
@pytest.mark.parametrize("spec", ["i, j, k => i", "i, j, k => k", "i, j; k, l => i, k"])
def test_max_reduction_gradient_goes_to_the_first_maximum_against_torch(backend, spec):
    """einmax1 and tropical without windows, over small integers (every block ties): the
    whole gradient of each result cell goes to its first maximum in row-major order of the
    reduced axes, as torch's ``max`` over one axis (the reduced axes moved last and
    flattened) routes it through autograd; a tropical's second operand gets it there too."""
    if backend == "jax":
        pytest.importorskip("jax")
    xs = np.random.default_rng(0).integers(0, 3, (3, 4, 5)).astype(np.float32)
    two = ";" in spec
    ws = np.zeros((5, 2), np.float32) + np.arange(2, dtype=np.float32)
    with G.new_graph(backend):
        x = G.param("x", output=list(xs.shape[:2 if two else 3]), input=[],
                    init=lambda s, r: xs[:, :, 0].copy() if two else xs)
        w = G.param("w", output=[5, 2], input=[], init=lambda s, r: ws)
        y = G.tropical(spec, x, w) if two else G.einmax1(spec, x)
        G.grad_update(G.einsum1("... => |->0", y * y)).backward()
        got, gx, *gw = (np.array(np.asarray(t.numpy()))
                        for t in (y, x.grad, *([w.grad] if two else [])))
    tx = torch.tensor(xs[:, :, 0] if two else xs, dtype=torch.float64, requires_grad=True)
    tw = torch.tensor(ws, dtype=torch.float64, requires_grad=True)
    if two:  # i, j, k, l: (x[i, j] + w[k, l]), the reduced j and l last
        cells = (tx[:, :, None, None] + tw[None]).permute(0, 2, 1, 3).reshape(3, 5, 8)
        out = cells.max(-1).values                                       # i, k
    else:
        keep = "ijk".index(spec[-1])
        cells = tx.movedim(keep, 0).reshape(tx.shape[keep], -1)
        out = cells.max(-1).values
    (out * out).sum().backward()
    np.testing.assert_allclose(got, out.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-6)
    if two:
        np.testing.assert_allclose(gw[0], tw.grad.numpy(), rtol=1e-6)
    assert int((gx != 0).sum()) <= out.numel()  # one cell a block
    assert int((cells == out[..., None]).sum(-1).max()) > 1  # and blocks tie


def test_first_max_keeps_the_first_hit_of_each_broadcast_block():
    """The gate primitive alone: ``m`` broadcast over axes 1 and 2 (a block of 6 cells,
    row-major), ties and a block without its maximum (NaN) included; numbers compare."""
    from tensig.execution.ir import first_max

    v = np.array([[[1., 3.], [3., 0.], [3., 3.]], [[2., 2.], [2., 2.], [2., 2.]],
                  [[np.nan, 1.], [1., 1.], [0., 0.]]], np.float32)
    m = np.array([3., 2., np.nan], np.float32)[:, None, None]
    want = np.zeros_like(v)
    want[0, 0, 1] = want[1, 0, 0] = 1  # NaN equals nothing: no cell of block 2
    for xp, cast in ((np, np.asarray), (torch, torch.tensor)):
        got = first_max(xp, cast(v), cast(m))
        np.testing.assert_array_equal(np.asarray(got), want)
        assert got.dtype == cast(v).dtype
    assert first_max(np, 2.0, 2.0) == 1 and first_max(np, 1.0, 2.0) == 0


@pytest.mark.parametrize("backend", ["numpy", "torch", "jax"])
@pytest.mark.parametrize("spec", ["i, j, k; k, j => i",
                                  "i, 2*oh<+wh, 2*ow<+ww; ww, wh => i, oh, ow"])
def test_a_tie_gives_both_operands_their_gradient_at_the_same_cell(backend, spec):
    """A max reduction whose second operand lists the reduced axes in another order than the
    first (a transposed window included), each block's maximum tied between the cells at
    reduced positions (0, 1) and (1, 0): both operands' gradients come from the same first
    maximum, row-major in the first operand's axes, as torch's autograd through ``max`` over
    ``x + w``'s flattened cells routes them, not each from the first in its own gradient's
    layout (the second operand's from the other cell)."""
    if backend == "jax":
        pytest.importorskip("jax")
    pooled = "oh" in spec
    xs = np.random.default_rng(1).integers(-3, 0, (3, 4, 4)).astype(np.float32)
    xs[:, 1::2, 0::2] = xs[:, 0::2, 1::2] = 1  # within each 2x2 block: (0, 1) and (1, 0)
    ws = np.zeros((2, 2) if pooled else (4, 4), np.float32)
    with G.new_graph(backend):
        x = G.param("x", output=[3, 4, 4], input=[], init=lambda s, r: xs)
        w = G.param("w", output=list(ws.shape), input=[], init=lambda s, r: ws)
        y = G.tropical(spec, x, w)
        G.grad_update(G.einsum1("... => |->0", y * y)).backward()
        gx, gw = (np.array(np.asarray(t.numpy())) for t in (x.grad, w.grad))
    tx = torch.tensor(xs, dtype=torch.float64, requires_grad=True)
    tw = torch.tensor(ws, dtype=torch.float64, requires_grad=True)
    if pooled:  # i, oh, ow, wh, ww
        out = (tx.unfold(1, 2, 2).unfold(2, 2, 2) + tw.t()).flatten(-2).max(-1).values
    else:  # i, j, k
        out = (tx + tw.t()).flatten(1).max(-1).values
    (out * out).sum().backward()
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=1e-6)


def _pooling_model(backend, xs, graphs):
    """Two 2x2 max poolings of one layout (on equal maps ``x`` and ``2 - x``: in one graph,
    or one a graph): each graph's gradient routine and store."""
    spec = "n, 2*oh<+wh, 2*ow<+ww, c; wh, ww => n, oh, ow, c"
    out = []
    for names in (["a", "b"],) if graphs == 1 else (["a"], ["b"]):
        with G.new_graph(backend) as g:
            losses, params = [], []
            for name in names:
                init = xs if name == "a" else 2 - xs
                x = G.param(name, output=list(xs.shape), input=[],
                            init=lambda s, r, v=init: v.astype(np.float32))
                pooled = G.tropical(spec, x, G.constant(np.zeros((2, 2), np.float32)))
                losses.append(G.einsum1("... => |->0", pooled * pooled))
                params.append(x)
            loss = losses[0] if len(losses) == 1 else losses[0] + losses[1]
            out.append((G.grad_update(loss).grad_update(), g.store, params))
    return out


@pytest.mark.parametrize("graphs", [1, 2])
def test_each_pooling_backward_reuses_its_own_pooling_places(graphs, monkeypatch):
    """Two max poolings of one layout (in one graph; or in two graphs whose steps run
    interleaved, as two threads may): each one's backward gets the places its own forward
    saved (no pooling run again to find them), and the gradients are the generic NumPy
    path's."""
    from tensig.backends.torch import TorchBackend

    calls = {"max_pool": 0, "_pooling": 0, "max_pool_backward": 0}

    def counted(name, f):
        return lambda self, *a, **k: calls.__setitem__(name, calls[name] + 1) or f(self, *a, **k)

    for name in calls:  # _pooling: torch's forward, also run by a backward that finds the places
        monkeypatch.setattr(TorchBackend, name, counted(name, getattr(TorchBackend, name)))
    xs = rand(4, 8, 8, 16)
    models = _pooling_model("torch", xs, graphs)
    with models[0][0].mode():
        for steps in zip(*(routine.steps for routine, _, _ in models), strict=True):
            for step, (_, store, _) in zip(steps, models, strict=True):
                step(store)
    assert calls == {"max_pool": 2, "_pooling": 2, "max_pool_backward": 2}
    (routine, store, params), = _pooling_model("numpy", xs, 1)
    routine.run(store)
    want = [p.grad.numpy() for p in params]
    got = [np.asarray(p.grad.numpy()) for _, _, ps in models for p in ps]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("spec, window, stride, pad", [
    ("2*oh<+wh, 2*ow<+ww", 2, 2, 0),
    ("oh=+wh, ow=+ww", 3, 1, 1),  # the all -inf corner window reaches into the padding
])
def test_max_pooling_of_infinite_and_nan_windows(backend, spec, window, stride, pad,
                                                 monkeypatch):
    """Windows of -inf only (one beside the padding), of NaN and of +inf: both backends
    (torch: its own pooling and backward) give ``max_pool2d``'s values, and its gradient (a
    window of -inf only to its first real cell, never to the padding); a window whose
    maximum is NaN gives its gradient to a NaN cell by torch's kernel, as ``max_pool2d``,
    and to none by the generic gate (``first_max``: NaN equals nothing), so the two differ
    at the input's NaN cells only."""
    from tensig.backends.torch import TorchBackend

    calls = []
    kernel = TorchBackend.max_pool_backward
    monkeypatch.setattr(TorchBackend, "max_pool_backward",
                        lambda self, *a: calls.append(1) or kernel(self, *a))
    xs = np.round(rand(2, 6, 6, 8) * 4)
    xs[0, :2, :2, 0] = -np.inf  # the first window's cells
    xs[0, 0, 3, 1] = xs[0, 1, 2, 1] = xs[1, 4, 4, 2] = np.nan
    xs[1, 5, 5, 3] = np.inf
    with G.new_graph(backend):
        x = G.param("x", output=list(xs.shape), input=[],
                    init=lambda s, r: xs.astype(np.float32))
        w = G.constant(np.zeros((window, window), np.float32))
        pooled = G.tropical(f"n, {spec}, c; wh, ww => n, oh, ow, c", x, w)
        G.grad_update(G.einsum1("... => |->0", pooled)).backward()
        got, grad = (np.array(np.asarray(t)) for t in (pooled.numpy(), x.grad.numpy()))
    tx = torch.tensor(xs, dtype=torch.float32).permute(0, 3, 1, 2).requires_grad_(True)
    out = F.max_pool2d(tx, window, stride, pad)
    out.sum().backward()
    want = tx.grad.permute(0, 2, 3, 1).numpy()
    np.testing.assert_array_equal(got, out.detach().permute(0, 2, 3, 1).numpy())
    assert want[np.isnan(xs)].sum() > 0 and grad[0, 0, 0, 0] == want[0, 0, 0, 0] == 1
    if backend == "numpy":
        want[np.isnan(xs)] = 0
    np.testing.assert_array_equal(grad, want)
    assert len(calls) == (backend == "torch")


def test_pointwise_functions_keep_their_parameter_names_for_the_type_checker(tmp_path):
    """``G.maximum`` and its siblings share one body (``tensor.binary``); mypy sees ``(a, b)``,
    so a call by keyword type-checks as it runs."""
    api = pytest.importorskip("mypy.api")
    snippet = tmp_path / "calls.py"
    snippet.write_text("from tensig.model import graph as G\n"
                       "def f(x: G.Tensor, y: G.Tensor) -> list[G.Tensor]:\n"
                       "    return [g(a=x, b=y) for g in (G.maximum, G.minimum, G.mod,\n"
                       "                                  G.logical_and, G.logical_or)]\n")
    out, err, status = api.run([str(snippet), G.__file__, "--follow-imports=skip",  # fast
                                "--ignore-missing-imports", "--python-version=3.11",
                                "--config-file=", f"--cache-dir={tmp_path / 'cache'}"])
    assert status == 0, out + err
