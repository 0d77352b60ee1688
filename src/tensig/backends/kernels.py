"""The model layer's fused kernels in their generic form (attention, cross-entropy, batch
norm) on a library's namespace, which every adapter inherits and an adapter with its own
kernels overrides.  Each is one primitive of the IR (:data:`tensig.execution.ir.WHOLE`), its
gradient another.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

__all__ = ["ATTENTION_CELLS", "Kernels", "one_hot_rows"]

#: the most attention scores one block of query rows holds unless an adapter sets its own
#: (:attr:`Kernels.score_cells`, :meth:`Kernels.attention`)
ATTENTION_CELLS = 1 << 21


class Kernels:
    """The generic kernels of :class:`tensig.backends.base.Backend`."""

    #: the most attention scores one block holds here (a CPU adapter's block fits its cache)
    score_cells = ATTENTION_CELLS

    if TYPE_CHECKING:
        xp: Any
        def pad(self, x: Any, widths: Sequence[tuple[int, int]], value: float) -> Any: ...
        def asarray(self, x: Any, like: Any = None, device: Any = None) -> Any: ...
        def astype(self, x: Any, dtype: Any) -> Any: ...
        def transpose(self, x: Any, perm: Sequence[int]) -> Any: ...
        def arange(self, n: int, like: Any = None) -> Any: ...
        def log_softmax(self, x: Any, axis: int) -> Any: ...
        def row_sum(self, x: Any, axes: tuple[int, ...]) -> Any: ...

    # -- attention: one primitive and its gradient (tensig.model.blocks.multi_head_attention) --
    def attention(self, q: Any, k: Any, v: Any, mask: Any, causal: bool, scale: float
                  ) -> tuple[Any, Any]:
        """``softmax(q k^T scale + mask) v`` per head, and each query row's log-sum-exp (from
        which the backward recomputes the probabilities): ``q`` ``(..., Tq, H, E)``, ``k``
        ``(..., Tk, H, E)``, ``v`` ``(..., Tk, H, F)``; results ``(..., Tq, H, F)`` and
        ``(..., Tq, H)``.  ``mask`` (None or added) broadcasts onto ``(..., Tq, H, Tk)``;
        ``causal``: query ``i`` sees keys ``j <= i``; a query seeing no key gives 0 (torch's).
        By blocks of query rows: the scores are never held whole, nor stored."""
        xp, into = self.xp, self.into
        outs, lses = [], []
        vh = _heads(xp, v)
        for _, s, keys in self._score_blocks(q, k, mask, causal, scale):
            top = xp.amax(s, axis=-1, keepdims=True)
            top = xp.where(top == -math.inf, 0.0, top)  # no key seen: every exp is 0
            p = into("exp", into("subtract", s, top))
            total = self.row_sum(p, (-1,))
            total = xp.where(total == 0, 1.0, total)
            outs.append(into("divide", p @ vh[..., keys, :], total))
            lses.append(into("add", into("log", total), top))
        return _heads(xp, _joined(xp, outs)), _heads(xp, _joined(xp, lses))[..., 0]

    def attention_backward(self, g: Any, q: Any, k: Any, v: Any, out: Any, lse: Any,
                           mask: Any, causal: bool, scale: float) -> tuple[Any, Any, Any]:
        """The gradients of :meth:`attention` (results ``out``, ``lse``) by the same blocks,
        the probabilities recomputed from ``lse``: ``ds = p (g v^T - sum(g out))``."""
        xp, into = self.xp, self.into
        qh, kh, vh, gh = (_heads(xp, x) for x in (q, k, v, g))
        dot = _heads(xp, self.row_sum(g * out, (-1,)))
        lh = _heads(xp, lse[..., None])
        dqs, dk, dv, n = [], None, None, k.shape[-3]
        for rows, s, keys in self._score_blocks(q, k, mask, causal, scale):
            p = into("exp", into("subtract", s, lh[..., rows, :]))
            gr = gh[..., rows, :]
            ds = into("subtract", gr @ xp.swapaxes(vh[..., keys, :], -1, -2), dot[..., rows, :])
            ds = into("multiply", ds, p)
            dqs.append(ds @ kh[..., keys, :])
            dk = self._add_keys(dk, xp.swapaxes(ds, -1, -2) @ qh[..., rows, :], n)
            dv = self._add_keys(dv, xp.swapaxes(p, -1, -2) @ gr, n)
        return (_heads(xp, into("multiply", _joined(xp, dqs), scale)),
                _heads(xp, into("multiply", dk, scale)), _heads(xp, dv))

    def _score_blocks(self, q: Any, k: Any, mask: Any, causal: bool, scale: float
                      ) -> Iterator[tuple[slice, Any, slice]]:
        """Per block of query rows: the rows, their masked scores and the keys they see."""
        xp = self.xp
        nq, nk = q.shape[-3], k.shape[-3]
        qh, kt = _heads(xp, q), xp.swapaxes(_heads(xp, k), -1, -2)
        m = None if mask is None else _heads(xp, mask)
        step = max(1, self.score_cells // max(1, math.prod(q.shape[:-3]) * q.shape[-2] * nk))
        for a in range(0, nq, step):
            rows = slice(a, min(a + step, nq))
            keys = slice(0, min(rows.stop, nk) if causal else nk)
            s = (qh[..., rows, :] * scale) @ kt[..., keys]
            if m is not None:
                s = self.into("add", s, m[..., rows if m.shape[-2] > 1 else slice(None),
                                          keys if m.shape[-1] > 1 else slice(None)])
            if causal:
                hidden = self.asarray(_hidden(a, rows.stop, keys.stop), like=s)
                s = self.into("add", s, self.astype(hidden, s.dtype))
            yield rows, s, keys

    def into(self, name: str, a: Any, *others: Any) -> Any:
        """NumPy's elementwise ``name`` of ``a`` and ``others``, into ``a`` where mutable."""
        return getattr(self.xp, name)(a, *others)

    # -- cross-entropy against class ids: one primitive and its gradient (blocks.cross_entropy)
    def cross_entropy(self, logits: Any, ids: Any, ignore: int) -> tuple[Any, Any, Any]:
        """The mean cross-entropy of ``logits`` against checked ``ids`` that are not ``ignore``
        (none: NaN, as torch): the record ``(loss, log-probabilities, count)``."""
        xp = self.xp
        logp = self.log_softmax(logits, len(logits.shape) - 1)
        hot, valid = one_hot_rows(self, ids, logits.shape[-1], ignore, logp.dtype)
        count = xp.sum(valid)
        total = -xp.sum(xp.where(hot > 0, logp, 0.0))  # -inf logits: no NaN
        # no counted id: NaN as torch gives, without a 0/0 (NumPy would warn)
        return xp.where(count > 0, total / (count + (count == 0)), xp.nan), logp, count

    def cross_entropy_backward(self, g: Any, logp: Any, ids: Any, count: Any, ignore: int
                               ) -> Any:
        """The logits' gradient: ``(softmax - one-hot) g / count`` on counted rows, else 0."""
        hot, valid = one_hot_rows(self, ids, logp.shape[-1], ignore, logp.dtype)
        scale = g.reshape(()) / (count + (count == 0))  # no counted row: no gradient (torch's)
        return (self.xp.exp(logp) - hot) * (valid[..., None] * scale)

    def _add_keys(self, acc: Any, part: Any, n: int) -> Any:
        """``acc + part``, ``part`` covering the first of ``n`` keys (axis -2)."""
        if part.shape[-2] < n:
            part = self.pad(part, [(0, 0)] * (part.ndim - 2) + [(0, n - part.shape[-2]), (0, 0)],
                            0.0)
        return part if acc is None else acc + part

    def batch_norm_channels(self, x: Any, kept: tuple[int, ...], mean: Any, var: Any,
                            scale: Any, shift: Any, training: bool, momentum: float,
                            eps: float) -> tuple[Any, ...]:
        """:meth:`batch_norm` of ``x`` per cell of its ``kept`` axes (the channels)."""
        rows, back = _channel_columns(self, x, kept)
        mean, var, scale, shift = _shaped(kept, (-1,), mean, var, scale, shift)
        y, *stats = self.batch_norm(rows, mean, var, scale, shift, training, momentum, eps)
        return (back(y), *_shaped(kept, tuple(x.shape[i] for i in kept), *stats))

    def batch_norm_channels_backward(self, g: Any, x: Any, kept: tuple[int, ...], mean: Any,
                                     var: Any, scale: Any, saved_mean: Any, saved_rstd: Any,
                                     training: bool, eps: float, wanted: tuple[bool, bool]
                                     ) -> tuple[Any, ...]:
        """The gradient of :meth:`batch_norm_channels` (:meth:`batch_norm_backward`)."""
        rows, back = _channel_columns(self, x, kept)
        grows, _ = _channel_columns(self, g, kept)
        mean, var, scale, saved_mean, saved_rstd = _shaped(kept, (-1,), mean, var, scale,
                                                           saved_mean, saved_rstd)
        dx, *learned = self.batch_norm_backward(grows, rows, mean, var, scale, saved_mean,
                                                saved_rstd, training, eps, wanted)
        return (None if dx is None else back(dx),
                *_shaped(kept, tuple(x.shape[i] for i in kept), *learned))

    def batch_norm(self, x: Any, mean: Any, var: Any, scale: Any, shift: Any, training: bool,
                   momentum: float, eps: float) -> tuple[Any, ...]:
        """Batch normalisation of the matrix ``x`` per column, ``scale`` and ``shift`` None or
        per column: ``(y, mean used, 1/sqrt(var used + eps), running mean, running var)``.
        In ``training`` the batch's statistics are used and the running ones (None: not
        tracked) move toward them by ``momentum`` (the variance unbiased, as torch), as new
        arrays; out of it the running ones are used and kept."""
        xp = self.xp
        if training:
            n = x.shape[0]
            used = xp.mean(x, axis=0)
            c = x - used
            v = xp.mean(c * c, axis=0)
            if mean is not None:
                mean = mean * (1.0 - momentum) + used * momentum
                var = var * (1.0 - momentum) + v * (momentum * n / (n - 1))
        else:
            used, v = mean, var
            c = x - used
        rstd = 1.0 / xp.sqrt(v + eps)
        k = rstd if scale is None else rstd * scale
        y = c * k if shift is None else c * k + shift
        return y, used, rstd, mean, var

    def batch_norm_backward(self, g: Any, x: Any, mean: Any, var: Any, scale: Any,
                            saved_mean: Any, saved_rstd: Any, training: bool, eps: float,
                            wanted: tuple[bool, bool]) -> tuple[Any, ...]:
        """The gradient of :meth:`batch_norm` (``saved_*``: its statistics): ``(dx, dscale,
        dshift)``, None unless ``wanted`` (input, affine).  In training ``dx = k (g - mean(g) -
        xhat mean(g xhat))``, else ``k g``, ``k = scale / sqrt(var + eps)``."""
        xp = self.xp
        xhat = (x - saved_mean) * saved_rstd
        gs, gq = xp.sum(g, axis=0), xp.sum(g * xhat, axis=0)
        dx = None
        if wanted[0]:
            k = saved_rstd if scale is None else saved_rstd * scale
            n = x.shape[0]
            dx = k * (g - gs / n - xhat * (gq / n)) if training else g * k
        return (dx, gq, gs) if wanted[1] else (dx, None, None)


def _channel_columns(backend: Kernels, x: Any, kept: tuple[int, ...]
                     ) -> tuple[Any, Callable[[Any], Any]]:
    """``x`` as a matrix, a column per cell of its ``kept`` axes, and the function putting such
    a matrix back in ``x``'s layout: a view when the kept axes trail in order, else a copy."""
    shape, nd = tuple(x.shape), len(x.shape)
    cols = math.prod(shape[i] for i in kept)
    if kept == tuple(range(nd - len(kept), nd)):
        return x.reshape(-1, cols), lambda m: m.reshape(shape)
    perm = tuple(i for i in range(nd) if i not in kept) + kept
    moved = tuple(shape[i] for i in perm)
    inverse = tuple(perm.index(i) for i in range(nd))
    return (backend.transpose(x, perm).reshape(-1, cols),
            lambda m: backend.transpose(m.reshape(moved), inverse))


def _shaped(kept: tuple[int, ...], shape: tuple[int, ...], *per_channel: Any) -> list[Any]:
    """Per-channel arrays (``None`` passing) reshaped to ``shape``; as they are for one
    channel axis (a reshape is a call on torch)."""
    if len(kept) == 1:
        return list(per_channel)
    return [None if v is None else v.reshape(shape) for v in per_channel]


def one_hot_rows(backend: Kernels, ids: Any, n: int, ignore: int, dtype: Any
                 ) -> tuple[Any, Any]:
    """One-hot rows of ``ids`` over ``n`` classes in ``dtype`` (zeros where the id is
    ``ignore``), and the counted ids as 1/0: the IR's and cross-entropy's one one-hot."""
    valid = ids != ignore
    hot = (ids[..., None] == backend.arange(n, like=ids)) & valid[..., None]
    return backend.astype(hot, dtype), backend.astype(valid, dtype)


def _heads(xp: Any, x: Any) -> Any:
    """``(..., T, H, E)`` as ``(..., H, T, E)`` and back: a view."""
    return xp.swapaxes(x, -3, -2)


def _joined(xp: Any, blocks: list[Any]) -> Any:
    """Blocks of query rows (axis -2) as one array (one block: itself, no copy)."""
    return blocks[0] if len(blocks) == 1 else xp.concatenate(blocks, axis=-2)


@functools.lru_cache(maxsize=64)
def _hidden(first: int, last: int, keys: int) -> Any:
    """``-inf`` where key ``j`` comes after query ``i`` (rows ``first..last-1``), else 0."""
    after = np.arange(keys)[None, :] > np.arange(first, last)[:, None]
    return np.where(after, -np.inf, 0.0)  # shared by every call: never written into
