"""The backend's own convolution and pooling kernels, recognised from projections alone.

A two-operand operation whose projections are a convolution's runs by the backend's
convolution and its gradients by its convolution backward; a tropical operation over a window
of zeros is max pooling.  Each recogniser gives ``None`` when the spec is not of its kind, and
each kernel falls back to the generic lowering for arrays it does not take (integer dtypes).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from tensig.backends import Backend, all_zero
from tensig.backends._plans import moves
from tensig.core.inference import AffineIndex, AxisUse, Iter
from tensig.execution.views import window_pads

__all__ = ["conv_gradient", "conv_pair", "conv_step", "pool_gradient", "pool_kernel", "pool_step"]

Layout = tuple[tuple[AxisUse, ...], ...]


def pool_kernel(layout: Layout, backend: Backend
                ) -> Callable[[Sequence[Any]], tuple[Any, Any] | None] | None:
    """Max pooling by the backend's own kernel: ``arrays -> (result, kept)`` (``kept``: what
    :func:`pool_gradient` may reuse for this input, holding it only weakly so that no activation is
    kept alive by it), or ``None`` where the kernel does not apply.  A tropical operation with a
    window of only zeros is max pooling (``max(x + 0)``); the zero test runs on the small window
    each call."""
    pool = backend.max_pool
    if pool is None or (geo := _geometry(layout, backend, pooling=True)) is None:
        return None
    xi, accepts = geo.xi, backend.conv_accepts

    def run(arrays: Sequence[Any]) -> tuple[Any, Any] | None:
        x, w = arrays[xi], arrays[1 - xi]
        if not accepts(x, x) or not all_zero(w):
            return None
        y = pool(geo.x_in(x), geo.kernel, geo.strides, geo.dilations, geo.pads)
        y, saved = y if isinstance(y, tuple) else (y, None)  # a plain result saves nothing
        try:
            kept = None if saved is None else (weakref.ref(x), saved)
        except TypeError:  # an array type without weak references: nothing is reused
            kept = None
        return geo.y_out(y), kept

    return run


def pool_step(layout: Layout, backend: Backend, generic: Callable[..., Any]
              ) -> Callable[..., Any] | None:
    """Max pooling by :func:`pool_kernel`, else ``generic``; ``None`` where it never applies."""
    kernel = pool_kernel(layout, backend)
    if kernel is None:
        return None

    def step(arrays: Sequence[Any]) -> Any:
        out = kernel(arrays)
        return generic(arrays) if out is None else out[0]

    return step


def pool_gradient(layout: Layout, backend: Backend
                  ) -> Callable[[Any, Any, Any], Any | None] | None:
    """The input's gradient of max pooling by the backend's own backward, each window's to its first
    maximum as the graph's gate gives it: ``(result gradient, input, kept) -> gradient`` (``kept``:
    :func:`pool_kernel`'s, reused where it is this input's), ``None`` from it where the kernel
    declines; ``None`` when there is no kernel or no pooling.  A window whose maximum is NaN follows
    torch's: its gradient goes to a NaN cell, where the gate gives it to none (the loss is NaN then,
    as a rule); masking such windows would cost two passes in every training step."""
    back = backend.max_pool_backward
    if back is None or (geo := _geometry(layout, backend, pooling=True)) is None or geo.xi != 0:
        return None
    g_in, (x_out, _) = geo.gradient_moves()
    accepts = backend.conv_accepts

    def grad(g: Any, x: Any, kept: Any) -> Any | None:
        if not accepts(x, g):
            return None
        saved = kept[1] if kept is not None and kept[0]() is x else None
        gx = back(g_in(g), geo.x_in(x), saved, geo.kernel, geo.strides, geo.dilations,
                  geo.pads)
        return None if gx is None else x_out(gx)

    return grad


def conv_step(layout: Layout, backend: Backend, generic: Callable[..., Any]
              ) -> Callable[..., Any] | None:
    """A convolution by the backend's own (:func:`_geometry`), else ``generic`` (integers)."""
    conv = backend.conv
    if conv is None or (geo := _geometry(layout, backend)) is None:
        return None
    xi, accepts = geo.xi, backend.conv_accepts

    def forward(x: Any, w: Any) -> Any:
        return geo.y_out(conv(geo.x_in(x), geo.w_in(w), geo.strides, geo.dilations, geo.pads,
                              channels_last=geo.channels_last))

    # JAX: one compiled kernel, XLA folding the permutes into the conv's layout
    fast = backend.fused(forward)

    def step(arrays: Any) -> Any:
        if accepts(arrays[xi], arrays[1 - xi]):
            return fast(arrays[xi], arrays[1 - xi])
        return generic(arrays)  # e.g. integer dtypes, which conv does not take

    return step


def conv_gradient(layout: Layout, backend: Backend, wrt: int
                  ) -> Callable[[Any, Any], Any] | None:
    """The gradient for operand ``wrt`` of a convolution by the backend's own backward:
    ``(result gradient, other operand) -> gradient``; ``None`` where it does not apply."""
    backward = backend.conv_backward
    if backward is None or (geo := _geometry(layout, backend)) is None:
        return None
    of_input = wrt == geo.xi
    g_in, (x_out, w_out) = geo.gradient_moves()
    other_in, shape = (geo.w_in, geo.x_shape) if of_input else (geo.x_in, geo.w_shape)
    out = x_out if of_input else w_out

    def grad(g: Any, other: Any) -> Any:
        return out(backward(g_in(g), other_in(other), shape, of_input, geo.strides,
                            geo.dilations, geo.pads))

    return grad


def conv_pair(layout: Layout, backend: Backend
              ) -> Callable[[Any, Any, Any], tuple[Any, Any]] | None:
    """Both operands' gradients of a convolution by one backend call, as torch's autograd:
    ``(result gradient, operand 0, operand 1) -> (gradient 0, gradient 1)``, or ``None``."""
    both = backend.conv_gradients
    if both is None or (geo := _geometry(layout, backend)) is None:
        return None
    g_in, (x_out, w_out) = geo.gradient_moves()
    xi = geo.xi

    def grads(g: Any, a: Any, b: Any) -> tuple[Any, Any]:
        x, w = (b, a) if xi else (a, b)
        gx, gw = both(g_in(g), geo.x_in(x), geo.w_in(w), geo.strides, geo.dilations, geo.pads)
        return (w_out(gw), x_out(gx)) if xi else (x_out(gx), w_out(gw))

    return grads


def _geometry(layout: Layout, backend: Backend, pooling: bool = False) -> _Geometry | None:
    """How a spec maps onto the backend's convolution (``pooling``: max pooling), or ``None``.
    Applies when the input has 1-3 affine axes whose kernels are plain axes of the kernel, every
    other axis is a batch axis (input and result), an input channel (both operands, reduced) or an
    output channel (kernel and result), and the result is plain.  A pooling has batch axes only."""
    if len(layout) != 3 or not all(isinstance(u.index, Iter) for u in layout[2]):
        return None
    res_ids = _ids(layout[2])
    for xi in (0, 1):
        x_uses, w_uses = layout[xi], layout[1 - xi]
        idx = [u.index for u in x_uses if isinstance(u.index, AffineIndex)]
        if not 1 <= len(idx) <= 3 or not all(isinstance(u.index, Iter) for u in w_uses):
            continue
        if any(not isinstance(u.index, Iter | AffineIndex) for u in x_uses):
            return None
        w_ids, x_ids = _ids(w_uses), _ids(x_uses)
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
                len(overs) or (pooling and (channels or outs or not batch)):
            return None
        return _Geometry(backend, layout, xi, batch, channels, outs, kernels, idx, pooling)
    return None


class _Geometry:
    """The permutations and reshapes between a spec's operands and the backend's
    (N, C, *spatial) / (O, C, *kernel) convolution, with strides, dilations and padding."""

    def __init__(self, backend: Backend, layout: Layout, xi: int, batch: list[int],
                 channels: list[int], outs: list[int], kernels: list[int],
                 idx: list[AffineIndex], pooling: bool):
        x_uses, w_uses, res = layout[xi], layout[1 - xi], layout[2]

        def pos(uses: tuple[AxisUse, ...], key: int) -> int:
            for p, u in enumerate(uses):
                ix = u.index
                if (isinstance(ix, Iter) and ix.id == key) or \
                        (isinstance(ix, AffineIndex) and ix.over.id == key):
                    return p
            raise KeyError(key)

        self.move, self.xi = backend.transpose, xi
        size = dict(zip(_ids(w_uses) + _ids(res), (int(u.size) for u in (*w_uses, *res)),
                        strict=True))
        overs = [a.over.id for a in idx]
        # N and C of the input and the result: a pooling's last batch axis is its C
        n, c_in, c_out = (batch[:-1], batch[-1:], batch[-1:]) if pooling else \
            (batch, channels, outs)
        self.x_perm = [pos(x_uses, k) for k in n + c_in + overs]
        self.w_perm = [pos(w_uses, k) for k in outs + channels + kernels]
        self.x_sizes = [int(x_uses[p].size) for p in self.x_perm]  # before merging
        self.w_sizes = [int(w_uses[p].size) for p in self.w_perm]
        self.x_shape = [_prod(size, n), _prod(size, c_in), *self.x_sizes[len(n + c_in):]]
        self.w_shape = [_prod(size, outs), _prod(size, channels), *(size[k] for k in kernels)]
        order = n + c_out + overs
        self.y_shape = [size[k] for k in order]
        self.y_perm = [order.index(i) for i in _ids(res)]
        self.y_conv_shape = [_prod(size, n), _prod(size, c_out), *(size[k] for k in overs)]
        self.kernel = [size[k] for k in kernels]
        self.strides = [a.stride for a in idx]
        self.dilations = [a.dilation for a in idx]
        self.pads = [window_pads(a, int(x_uses[pos(x_uses, a.over.id)].size))[1] for a in idx]
        # NHWC results in channels-last memory: the permuted view is contiguous (5x faster)
        self.channels_last = len(batch) == 1 and len(outs) == 1 and self.y_perm == \
            [0, *range(2, 2 + len(overs)), 1]
        self.x_in = moves(self.x_perm, self.x_sizes, self.x_shape, self.move)
        self.w_in = moves(self.w_perm, self.w_sizes, self.w_shape, self.move)
        self.y_out = moves(self.y_perm, self.y_conv_shape, self.y_shape, self.move, False)

    def gradient_moves(self) -> tuple[Callable[[Any], Any], tuple[Callable[[Any], Any], ...]]:
        """The result gradient into the backend's layout, and the two gradients back."""
        g_in = moves(_inverse(self.y_perm), self.y_shape, self.y_conv_shape, self.move)
        return g_in, tuple(moves(_inverse(perm), shape, sizes, self.move, False)
                           for shape, sizes, perm in ((self.x_shape, self.x_sizes, self.x_perm),
                                                      (self.w_shape, self.w_sizes, self.w_perm)))


def _inverse(perm: list[int]) -> list[int]:
    return sorted(range(len(perm)), key=perm.__getitem__)


def _ids(uses: tuple[AxisUse, ...]) -> list[int]:
    """The iterator ids of the plain axes of ``uses``."""
    return [u.index.id for u in uses if isinstance(u.index, Iter)]


def _prod(size: dict[int, int], keys: list[int]) -> int:
    return math.prod(size[k] for k in keys)
