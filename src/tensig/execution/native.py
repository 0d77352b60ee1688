"""The backend's own convolution and pooling kernels, recognised from projections alone.

A two-operand operation whose projections are a convolution's (an input with 1-3 windowed
axes, a kernel, batch and channel axes) runs by the backend's convolution (torch's
``conv1/2/3d``, JAX's ``conv_general_dilated``) and its gradients by the backend's
convolution backward; a tropical operation over a window of zeros is max pooling.  Each
recogniser gives ``None`` when the spec is not of its kind, and each kernel falls back to the
generic lowering for arrays it does not take (integer dtypes).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from tensig.backends import Backend, all_zero
from tensig.core.inference import AffineIndex, AxisUse, Iter
from tensig.execution.views import window_pads

__all__ = ["conv_gradient", "conv_pair", "conv_step", "pool_step"]


def pool_step(layout: tuple[tuple[AxisUse, ...], ...], backend: Backend,
               generic: Callable[..., Any]) -> Callable[..., Any] | None:
    """Max pooling by the backend's own kernel (``torch.nn.functional.max_pool1/2/3d``).

    A tropical operation whose second operand is a window holding only zeros is max pooling:
    ``max over the window of (x + 0)`` is ``max of x``.  Applies when one operand has 1-3
    windowed axes whose kernels are exactly the other operand's axes, and every other axis
    passes through to the result; the zero test runs on the (small) window each call, and
    any other window (or a dtype the kernel does not take) runs ``generic``.
    """
    pool = backend.max_pool
    res = layout[2]
    if pool is None or not all(isinstance(u.index, Iter) for u in res):
        return None
    xi = next((i for i in (0, 1) if any(isinstance(u.index, AffineIndex) for u in layout[i])),
              None)
    if xi is None:
        return None
    x_uses, w_uses = layout[xi], layout[1 - xi]
    idx = [u.index for u in x_uses if isinstance(u.index, AffineIndex)]
    kernels = [a.kernel for a in idx if a.kernel is not None]
    if len(idx) > 3 or len(kernels) != len(idx) or any(a.offset for a in idx) or \
            any(not isinstance(u.index, Iter | AffineIndex) for u in x_uses) or \
            not all(isinstance(u.index, Iter) for u in w_uses) or \
            _ids(w_uses) != [k.id for k in kernels]:
        return None
    res_ids = _ids(res)
    through = [u.index.id for u in x_uses if isinstance(u.index, Iter)]
    overs = [a.over.id for a in idx]
    if not through or sorted(res_ids) != sorted(through + overs) or \
            len(set(res_ids)) != len(res_ids):
        return None
    order = through + overs
    x_perm = [p for p, u in enumerate(x_uses) if isinstance(u.index, Iter)] + \
        [p for p, u in enumerate(x_uses) if isinstance(u.index, AffineIndex)]
    sizes = dict(zip(res_ids, (int(u.size) for u in res), strict=True))
    # (N, C, *spatial): the pass-through axes but the last merge into N, the last is C
    x_shape = [_prod_sizes(sizes, through[:-1]), sizes[through[-1]]] + \
        [int(x_uses[p].size) for p in x_perm[len(through):]]
    y_shape = [sizes[k] for k in order]
    y_perm = [order.index(i) for i in res_ids]
    kernel = [int(k.size) for k in kernels]
    strides = [a.stride for a in idx]
    dilations = [a.dilation for a in idx]
    pads = [window_pads(a, int(x_uses[p].size))[1]
            for a, p in zip(idx, x_perm[len(through):], strict=True)]
    accepts = backend.conv_accepts
    move = backend.transpose
    x_in = _permute_reshape(x_perm, [int(x_uses[p].size) for p in x_perm], x_shape, move)
    y_out = _reshape_permute([*x_shape[:2], *(sizes[k] for k in overs)], y_shape, y_perm, move)

    def step(arrays: Any, neutral: float = 0) -> Any:
        x, w = arrays[xi], arrays[1 - xi]
        if not accepts(x, x) or not all_zero(w):
            return generic(arrays, neutral)
        return y_out(pool(x_in(x), kernel, strides, dilations, pads))

    return step


def conv_step(layout: tuple[tuple[AxisUse, ...], ...], backend: Backend,
               generic: Callable[..., Any]) -> Callable[..., Any] | None:
    """A convolution lowered to the backend's own conv (``torch.nn.functional.conv1/2/3d``),
    when :func:`_conv_geometry` finds one; other dtypes (integers) take ``generic``."""
    geometry = _conv_geometry(layout, backend)
    if geometry is None:
        return None
    # JAX: the permutes, reshapes and the conv compiled as one kernel (XLA then folds the
    # permutes into the conv's layout instead of copying the operands in eager steps)
    fast, xi = backend.fused(geometry.forward), geometry.xi
    accepts = backend.conv_accepts

    def step(arrays: Any, neutral: float = 0) -> Any:
        if accepts(arrays[xi], arrays[1 - xi]):
            return fast(arrays[xi], arrays[1 - xi])
        return generic(arrays, neutral)  # e.g. integer dtypes, which conv does not take

    return step


def conv_gradient(layout: tuple[tuple[AxisUse, ...], ...], backend: Backend, wrt: int
                  ) -> Callable[[Any, Any], Any] | None:
    """The gradient of a two-operand convolution with respect to operand ``wrt``, by the
    backend's own convolution backward: a callable ``(result gradient, other operand)``.
    ``layout`` is the convolution's projections (:attr:`Inferred.layout`).

    ``None`` when the spec is not one the backend's convolution runs (see
    :func:`_conv_geometry`) or the backend has no convolution backward.
    """
    if len(layout) != 3 or backend.conv_backward is None:
        return None
    geometry = _conv_geometry(layout, backend)
    if geometry is None:
        return None
    return geometry.gradient(wrt == geometry.xi)


def conv_pair(layout: tuple[tuple[AxisUse, ...], ...], backend: Backend
              ) -> Callable[[Any, Any, Any], tuple[Any, Any]] | None:
    """Both operands' gradients of a two-operand convolution by one call of the backend's
    convolution backward (torch's autograd does the same): ``(result gradient, operand 0,
    operand 1) -> (gradient 0, gradient 1)``; ``layout`` is the convolution's projections.
    ``None`` where :func:`conv_gradient` would be, or the backend has no such call."""
    if len(layout) != 3 or backend.conv_gradients is None:
        return None
    geometry = _conv_geometry(layout, backend)
    return None if geometry is None else geometry.gradients()


def _conv_geometry(layout: tuple[tuple[AxisUse, ...], ...], backend: Backend
                   ) -> _ConvGeometry | None:
    """How a spec maps onto the backend's convolution, or ``None``.

    Applies when one operand (the input) has 1-3 affine axes whose kernels are plain axes of
    the other operand (the kernel), every other axis is a batch axis (input and result), an
    input channel (both operands, reduced) or an output channel (kernel and result), and the
    result is plain.  Anything else takes the generic windows-then-contraction path.
    """
    if backend.conv is None:
        return None
    res = layout[2]
    if not all(isinstance(u.index, Iter) for u in res):
        return None
    res_ids = _ids(res)
    for xi, wi in ((0, 1), (1, 0)):
        x_uses, w_uses = layout[xi], layout[wi]
        affine = [u for u in x_uses if isinstance(u.index, AffineIndex)]
        if not 1 <= len(affine) <= 3 or not all(isinstance(u.index, Iter) for u in w_uses):
            continue
        if any(not isinstance(u.index, Iter | AffineIndex) for u in x_uses):
            return None
        w_ids, x_ids = _ids(w_uses), _ids(x_uses)
        idx = [u.index for u in x_uses if isinstance(u.index, AffineIndex)]
        kernels = [a.kernel.id for a in idx if a.kernel is not None]
        overs = [a.over.id for a in idx]
        if len(kernels) != len(idx) or any(k not in w_ids for k in kernels) or \
                any(o not in res_ids for o in overs):
            return None
        channels = [i for i in x_ids if i in w_ids and i not in res_ids]
        batch = [i for i in x_ids if i in res_ids and i not in w_ids]
        outs = [i for i in w_ids if i in res_ids and i not in x_ids]
        if sorted(x_ids) != sorted(channels + batch) or \
                sorted(w_ids) != sorted(channels + outs + kernels) or \
                sorted(res_ids) != sorted(batch + overs + outs) or \
                len(set(res_ids)) != len(res_ids) or len(set(x_ids + overs)) != len(x_ids) + \
                len(overs):
            return None
        return _ConvGeometry(backend, x_uses, w_uses, res, xi, batch, channels, outs, kernels,
                             idx)
    return None


class _ConvGeometry:
    """The permutations and reshapes between a spec's operands and the backend's
    (N, C, *spatial) / (O, C, *kernel) convolution, with strides, dilations and padding."""

    def __init__(self, backend: Backend, x_uses: tuple[AxisUse, ...],
                 w_uses: tuple[AxisUse, ...], res: tuple[AxisUse, ...], xi: int,
                 batch: list[int], channels: list[int], outs: list[int], kernels: list[int],
                 idx: list[AffineIndex]):
        def pos(uses: tuple[AxisUse, ...], key: int) -> int:
            for p, u in enumerate(uses):
                ix = u.index
                if (isinstance(ix, Iter) and ix.id == key) or \
                        (isinstance(ix, AffineIndex) and ix.over.id == key):
                    return p
            raise KeyError(key)

        self.backend, self.xi = backend, xi
        overs = [a.over.id for a in idx]
        self.x_perm = [pos(x_uses, k) for k in batch + channels + overs]
        self.w_perm = [pos(w_uses, k) for k in outs + channels + kernels]
        size = dict(zip(_ids(w_uses) + _ids(res), (int(u.size) for u in (*w_uses, *res)),
                        strict=True))
        self.x_sizes = [int(x_uses[p].size) for p in self.x_perm]  # before merging
        self.w_sizes = [int(w_uses[p].size) for p in self.w_perm]
        self.x_shape = [_prod_sizes(size, batch), _prod_sizes(size, channels)] + \
            [int(x_uses[pos(x_uses, k)].size) for k in overs]
        self.w_shape = [_prod_sizes(size, outs), _prod_sizes(size, channels)] + \
            [size[k] for k in kernels]
        self.y_shape = [size[k] for k in batch + outs + overs]
        order = batch + outs + overs
        self.y_perm = [order.index(i) for i in _ids(res)]
        self.y_conv_shape = [_prod_sizes(size, batch), _prod_sizes(size, outs)] + \
            [size[k] for k in overs]
        self.strides = [a.stride for a in idx]
        self.dilations = [a.dilation for a in idx]
        # a valid axis is exactly as long as its windows need: no padding
        self.pads = [window_pads(a, int(x_uses[pos(x_uses, a.over.id)].size))[1]
                     if a.padded else (0, 0) for a in idx]
        # a result with its channels last (NHWC) is asked for in channels-last memory, so the
        # permuted view handed on is contiguous (elementwise ops on it run 5x faster)
        self.channels_last = len(batch) == 1 and len(outs) == 1 and self.y_perm == \
            [0, *range(2, 2 + len(overs)), 1]

        assert backend.conv is not None  # _conv_geometry asked
        self.conv = backend.conv
        move = backend.transpose
        self.x_in = _permute_reshape(self.x_perm, self.x_sizes, self.x_shape, move)
        self.w_in = _permute_reshape(self.w_perm, self.w_sizes, self.w_shape, move)
        self.y_out = _reshape_permute(self.y_conv_shape, self.y_shape, self.y_perm, move)

    def forward(self, x: Any, w: Any) -> Any:
        y = self.conv(self.x_in(x), self.w_in(w), self.strides, self.dilations, self.pads,
                      channels_last=self.channels_last)
        return self.y_out(y)

    def gradient(self, of_input: bool) -> Callable[[Any, Any], Any]:
        """``(result gradient, other operand) -> gradient`` of the input or the kernel."""
        backward = self.backend.conv_backward
        assert backward is not None  # conv_gradient asked
        g_in, (x_out, w_out) = self._gradient_moves()
        other_in, shape = (self.w_in, self.x_shape) if of_input else (self.x_in, self.w_shape)
        out = x_out if of_input else w_out
        strides, dilations, pads = self.strides, self.dilations, self.pads

        def grad(g: Any, other: Any) -> Any:
            return out(backward(g_in(g), other_in(other), shape, of_input, strides, dilations,
                                pads))

        return grad

    def gradients(self) -> Callable[[Any, Any, Any], tuple[Any, Any]]:
        """``(result gradient, operand 0, operand 1) -> their gradients`` by one call."""
        both = self.backend.conv_gradients
        assert both is not None  # conv_pair asked
        g_in, (x_out, w_out) = self._gradient_moves()
        x_in, w_in, xi = self.x_in, self.w_in, self.xi
        strides, dilations, pads = self.strides, self.dilations, self.pads

        def grads(g: Any, a: Any, b: Any) -> tuple[Any, Any]:
            x, w = (b, a) if xi else (a, b)
            gx, gw = both(g_in(g), x_in(x), w_in(w), strides, dilations, pads)
            return (w_out(gw), x_out(gx)) if xi else (x_out(gx), w_out(gw))

        return grads

    def _gradient_moves(self) -> tuple[Callable[[Any], Any], tuple[Callable[[Any], Any], ...]]:
        """The result gradient into the backend's layout, and the input's and the kernel's
        gradients back into the spec's."""
        move = self.backend.transpose
        g_in = _permute_reshape(_inverse(self.y_perm), self.y_shape, self.y_conv_shape, move)
        return g_in, tuple(_reshape_permute(shape, sizes, _inverse(perm), move)
                           for shape, sizes, perm in ((self.x_shape, self.x_sizes, self.x_perm),
                                                      (self.w_shape, self.w_sizes, self.w_perm)))


def _permute_reshape(perm: list[int], sizes: list[int], shape: list[int],
                     move: Callable[[Any, list[int]], Any]) -> Callable[[Any], Any]:
    """``x -> move(x, perm).reshape(shape)`` (``move``: the backend's transpose; ``sizes``:
    the permuted sizes), without the steps that change nothing -- each is a call of its own
    on every run."""
    moves, merges = perm != sorted(perm), list(sizes) != list(shape)
    if moves and merges:
        return lambda x: move(x, perm).reshape(shape)
    if moves:
        return lambda x: move(x, perm)
    if merges:
        return lambda x: x.reshape(shape)
    return lambda x: x


def _reshape_permute(sizes: list[int], shape: list[int], perm: list[int],
                     move: Callable[[Any, list[int]], Any]) -> Callable[[Any], Any]:
    """``x -> move(x.reshape(shape), perm)`` (``sizes``: x's), likewise pruned."""
    moves, splits = perm != sorted(perm), list(sizes) != list(shape)
    if moves and splits:
        return lambda x: move(x.reshape(shape), perm)
    if moves:
        return lambda x: move(x, perm)
    if splits:
        return lambda x: x.reshape(shape)
    return lambda x: x


def _inverse(perm: list[int]) -> list[int]:
    return sorted(range(len(perm)), key=perm.__getitem__)


def _ids(uses: tuple[AxisUse, ...]) -> list[int]:
    """The iterator ids of the plain axes of ``uses`` (of every axis, where all are plain)."""
    return [u.index.id for u in uses if isinstance(u.index, Iter)]


def _prod_sizes(size: dict[int, int], keys: list[int]) -> int:
    return math.prod(size[k] for k in keys)
