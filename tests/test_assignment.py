"""Lowering one assignment under its projections: a window on the written side (a
convolution's input gradient) is a scatter-add, checked against the loop interpreter; any
expression of the operands (a pooling gradient's gate) is lowered the same way."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from reference import reference
from tensig import Shape, infer
from tensig.backends import backend_for
from tensig.execution.assignment import lower_assignment
from tensig.execution.ir import OPERATORS
from tensig.execution.lowering import Pointwise

rng = np.random.default_rng(5)

SPECS = [
    "n, 2*oh<+kh, c; kh, c -> o => n, oh, o",   # strided, valid
    "n, oh=+kh, c; kh, c -> o => n, oh, o",     # padded
    "n, oh<+2*kh, c; kh, c -> o => n, oh, o",   # dilated
]


def _input_gradient(spec: str, x_shape: Shape, w: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``d sum(g * conv(x, w)) / dx`` by the interpreter: the convolution is linear in ``x``,
    so each cell's gradient is the loss of that cell's basis array."""
    dims = x_shape.int_dims
    out = np.zeros(dims)
    w_shape = Shape(output=w.shape[:1], input=w.shape[1:])
    for index in np.ndindex(*dims):
        e = np.zeros(dims)
        e[index] = 1.0
        y, _ = reference(spec, [e, w], [x_shape, w_shape], op="einsum")
        out[index] = float((np.asarray(y) * g).sum())
    return out


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("spec", SPECS)
def test_a_window_on_the_written_side_is_a_scatter_add(spec, backend):
    x_shape = Shape(output=(2, 9, 3))
    w = rng.standard_normal((4, 3, 3))
    w_shape = Shape(output=(4,), input=(3, 3))
    forward = infer(spec, x_shape, w_shape)
    g = rng.standard_normal(forward.shape.int_dims)
    x_uses, w_uses, y_uses = forward.layout
    # x.grad =+ y.grad * w under the convolution's own projections
    grad = dataclasses.replace(forward, layout=(y_uses, w_uses, x_uses))
    array = (lambda a: torch.tensor(a)) if backend == "torch" else np.asarray
    run = lower_assignment(grad, OPERATORS["einsum"], backend_for(type(array(g)))).run
    got = np.asarray(run([array(g), array(w)]))
    want = _input_gradient(spec, x_shape, w, g)
    tol = 20 * np.finfo(np.float64).eps * 3 * 3 * 4
    np.testing.assert_allclose(got, want, atol=tol * np.abs(want).max())


def test_a_window_written_with_a_max_is_refused():
    forward = infer("2*oh<+kh; kh => oh", (9,), (3,), op="tropical")
    x_uses, w_uses, y_uses = forward.layout
    grad = dataclasses.replace(forward, layout=(y_uses, w_uses, x_uses))
    with pytest.raises(ValueError, match="adding"):
        lower_assignment(grad, OPERATORS["tropical"], backend_for(np.ndarray))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize(("spec", "stride", "left"), [
    ("oh=+kh; kh => oh", 1, 1),       # padded: the edge windows read the pad
    ("2*oh<+kh; kh => oh", 2, 0),     # overlapping: a scatter-add
    ("3*oh<+kh; kh => oh", 3, 0),     # tiled: each cell written once, a reshape
])
def test_an_expression_is_lowered_under_windows_on_both_sides(spec, stride, left, backend):
    """Any expression of the operands (a gradient's gate), not only an operator: ``x.grad =+
    g[o] * tanh(x[stride*o + k - left])`` over (output, kernel position) pairs, windows read
    on one side and written on the other, against a loop over the pairs."""
    forward = infer(spec, Shape(output=(9,)), Shape(output=(3,)))
    x_uses, _, y_uses = forward.layout
    lowered = dataclasses.replace(forward, layout=(y_uses, x_uses, x_uses))
    g, x = rng.standard_normal(forward.shape.int_dims), rng.standard_normal(9)
    array, xp = (torch.tensor, torch) if backend == "torch" else (np.asarray, np)
    op = Pointwise(lambda a: a[0] * xp.tanh(a[1]))
    got = np.asarray(lower_assignment(lowered, op, backend_for(type(array(g)))).run(
        [array(g), array(x)]))
    want = np.zeros(9)
    for o in range(len(g)):
        for k in range(3):
            i = stride * o + k - left
            if 0 <= i < 9:
                want[i] += g[o] * np.tanh(x[i])
    np.testing.assert_allclose(got, want, atol=20 * np.finfo(np.float64).eps)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_padded_max_pooling_gradient_against_torch(backend):
    """The gradient gate of a padded, overlapping max pooling (``o=+k``: an expression under
    the window's projections, lowered as one assignment) against torch's ``max_pool1d``."""
    from tensig.model import graph as G

    xs = rng.standard_normal((3, 7)).astype(np.float32)  # no ties
    with G.new_graph(backend):
        x = G.param("x", output=[3, 7], input=[], init=lambda s, r: xs)
        pooled = G.tropical("b, o=+k; k => b, o", x, G.constant(np.zeros(3, np.float32)))
        G.grad_update(G.einsum1("... => |->0", pooled * pooled)).backward()
        got, grad = (np.asarray(t.numpy()) for t in (pooled, x.grad))
    tx = torch.tensor(xs, dtype=torch.float64, requires_grad=True)
    out = torch.nn.functional.max_pool1d(tx[:, None, :], 3, stride=1, padding=1)[:, 0]
    (out ** 2).sum().backward()
    np.testing.assert_allclose(got, out.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(grad, tx.grad.numpy(), rtol=1e-5, atol=1e-6)
