"""The NumPy adapter: NumPy's own calls, with plans that beat ``numpy.einsum``'s per-call
overhead on small problems and a blocked GEMM for big convolution windows."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

from tensig.backends._plans import flops, gemm_groups, matmul_plan, swaps
from tensig.backends.base import GELU_C, GELU_K, Backend, register
from tensig.core import kept

__all__ = ["NumpyBackend"]

#: comparisons by name in NumPy's namespace
_UFUNC_NAMES = {"lt": "less", "le": "less_equal", "eq": "equal", "ne": "not_equal"}


@register
class NumpyBackend(Backend):
    name = "numpy"
    modules = ("numpy",)
    numpy_native = True
    compiles = True
    unrolls_max = True
    #: 1 MiB of float32 scores: the GPT demo's attention (8x4 heads of 256x256) took 5.4 +
    #: 8.4 ms forward + backward, in one block 20.5 + 54.5
    score_cells = 1 << 18

    def __init__(self) -> None:
        import numpy

        self.np = self.xp = numpy

    def ufunc(self, op: Any) -> Any:
        return op

    def gelu(self, v: Any) -> Any:
        """As ``v sigmoid(2z)`` in place on one new array: NumPy's float32 ``exp`` takes 60% of
        its ``tanh``'s time.  Not on 0-d arrays (their products are scalars)."""
        np = self.np
        if not isinstance(v, np.ndarray) or v.dtype.kind != "f" or not v.ndim:
            return super().gelu(v)
        e = self._exp_minus_2z(v)
        return np.divide(v, e, out=e)

    def gelu_backward(self, a: Any, g: Any) -> Any:
        np = self.np
        if not (isinstance(a, np.ndarray) and isinstance(g, np.ndarray)) or \
                a.dtype.kind != "f" or a.shape != g.shape or a.dtype != g.dtype or not a.ndim:
            return super().gelu_backward(a, g)
        # d/da a s(2z) = s (1 + (1 - s) p), s = sigmoid(2z), p = 2 a z' = 2C a (1 + 3k a^2):
        # 15 arithmetic passes and one exp
        s = self._exp_minus_2z(a)
        np.reciprocal(s, out=s)
        a2 = a * a
        a2 *= 6 * GELU_C * GELU_K     # a2 becomes p
        a2 += 2 * GELU_C
        a2 *= a
        d = np.subtract(1.0, s, dtype=a.dtype)
        d *= a2
        d += 1.0
        d *= s
        d *= g
        return d

    def _exp_minus_2z(self, v: Any) -> Any:
        """``1 + exp(-2z)`` of :meth:`gelu` on a new array (``inf`` without a warning)."""
        np = self.np
        e = v * v
        e *= -2 * GELU_C * GELU_K
        e -= 2 * GELU_C
        e *= v
        with np.errstate(over="ignore"):
            np.exp(e, out=e)
        e += 1.0
        return e

    def softmax(self, x: Any, axis: int) -> Any:
        """In place on one new array."""
        np = self.np
        if not isinstance(x, np.ndarray) or x.dtype.kind != "f":
            return super().softmax(x, axis)
        e = x - x.max(axis=axis, keepdims=True)
        np.exp(e, out=e)
        e /= e.sum(axis=axis, keepdims=True)
        return e

    def softmax_backward(self, y: Any, g: Any, axis: int) -> Any:
        np = self.np
        if not (isinstance(y, np.ndarray) and isinstance(g, np.ndarray)) or \
                y.shape != g.shape or y.dtype != g.dtype or y.dtype.kind != "f":
            return super().softmax_backward(y, g, axis)
        d = g * y
        np.subtract(g, d.sum(axis=axis, keepdims=True), out=d)
        d *= y
        return d

    def row_sum(self, x: Any, axes: tuple[int, ...]) -> Any:
        """Over trailing axes of a C-ordered float array as a product with ones: NumPy's
        ``add.reduce`` loops per row (62 us for 2048 rows of 64, the product 14 us)."""
        np, nd = self.np, getattr(x, "ndim", 0)
        if not isinstance(x, np.ndarray) or x.dtype.kind != "f" or not x.flags.c_contiguous \
                or tuple(a + nd * (a < 0) for a in axes) != tuple(range(nd - len(axes), nd)):
            return super().row_sum(x, axes)
        lead, n = x.shape[:nd - len(axes)], math.prod(x.shape[nd - len(axes):])
        return np.matmul(x.reshape(math.prod(lead), n), _ones(n, x.dtype)).reshape(
            lead + (1,) * len(axes))

    def row_mean(self, x: Any, axes: tuple[int, ...]) -> Any:
        """:meth:`row_sum` divided in place (float16: NumPy's mean, which sums in float32)."""
        if not isinstance(x, self.np.ndarray) or x.dtype.char not in "fdg":
            return super().row_mean(x, axes)
        return self.into("divide", self.row_sum(x, axes), math.prod(x.shape[a] for a in axes))

    def layer_norm_backward(self, g: Any, x: Any, saved: tuple[Any, ...], scale: Any,
                            shift: Any, axes: tuple[int, ...], eps: float, dx: bool
                            ) -> tuple[Any, Any, Any]:
        """The generic gradient on ``g`` copied into C order first (a GEMM's gradient arrives
        transposed): the copy costs less than strided passes (2.1 ms a call, 1.2 with it)."""
        np = self.np
        if isinstance(g, np.ndarray) and isinstance(x, np.ndarray) and \
                x.flags.c_contiguous and not g.flags.c_contiguous:
            g = np.ascontiguousarray(g)
        return super().layer_norm_backward(g, x, saved, scale, shift, axes, eps, dx)

    def _add_rows(self, n: int, ids: Any, rows: Any) -> Any:
        """By a stable sort and ``add.reduceat`` per run of equal ids (in ``add.at``'s order):
        2-4x faster than ``add.at``, which goes element by element."""
        np = self.np
        if not (isinstance(ids, np.ndarray) and isinstance(rows, np.ndarray)) or \
                ids.ndim != 1 or rows.ndim != 2 or len(ids) != len(rows) or not len(ids):
            return super()._add_rows(n, ids, rows)
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
        starts = np.flatnonzero(np.concatenate(([True], ids[1:] != ids[:-1])))
        acc = np.zeros((n, rows.shape[1]), dtype=rows.dtype)
        acc[ids[starts]] = np.add.reduceat(rows[order], starts, axis=0)
        return acc

    def into(self, name: str, a: Any, *others: Any) -> Any:
        return getattr(self.np, name)(a, *others, out=a)

    def float_mask(self, op: str, x: Any, y: Any, shape: tuple[int, ...], like: Any) -> Any:
        if getattr(like.dtype, "kind", "") != "f":
            return None
        out = self.np.empty(shape, dtype=like.dtype)
        return getattr(self.np, _UFUNC_NAMES[op])(x, y, out=out, casting="unsafe")

    def stack_cells(self, cells: list[Any], frame: tuple[int, ...], cell: tuple[int, ...]) -> Any:
        if not cell:  # scalars: one conversion
            return self.np.asarray(cells).reshape(frame)
        return super().stack_cells(cells, frame, cell)

    def pad(self, x: Any, widths: Sequence[tuple[int, int]], value: float) -> Any:
        """One fill and one copy: ``numpy.pad`` took 34-56 us on a 32x4x4x16 array, this 9-14."""
        x = self.np.asarray(x)
        out = self.np.full([n + lo + hi for n, (lo, hi) in zip(x.shape, widths, strict=True)],
                           value, dtype=x.dtype)
        out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, widths, strict=True))] = x
        return out

    def contraction(self, subscripts: str, shapes: Sequence[tuple[int, ...]]) -> Any:
        work = flops(subscripts, shapes)
        if work < 1 << 15 or len(shapes) < 2:
            small = matmul_plan(self.np.matmul, subscripts, shapes, self.result_dtype)
            return small or functools.partial(self.np.einsum, subscripts)
        if len(shapes) == 2:
            gemm = _NumpyGemm.plan(self.np, subscripts)
            if gemm is not None:
                return gemm
        try:
            import opt_einsum
        except ImportError:  # the optional extra is missing: numpy's own planner
            return functools.partial(self.np.einsum, subscripts, optimize=True)
        return opt_einsum.contract_expression(subscripts, *shapes)

    def windows(self, x: Any, axis: int, size: int, step: int) -> Any:
        """``sliding_window_view``'s windows at every ``step``-th position from the strides
        (read-only, as it is): it checks arguments in Python (19-22 us a call, this 10-11)."""
        from numpy.lib.stride_tricks import as_strided

        x = self.np.asarray(x)
        if not -x.ndim <= axis < x.ndim or not 1 <= size <= x.shape[axis] + step:
            return super().windows(x, axis, size, step)  # its error message (short of 0 windows)
        axis %= x.ndim
        n = (x.shape[axis] - size) // step + 1
        shape = (*x.shape[:axis], n, *x.shape[axis + 1:], size)
        strides = [*x.strides, x.strides[axis]]
        strides[axis] *= step
        return as_strided(x, shape, strides, writeable=False)


@functools.lru_cache(maxsize=64)
def _ones(n: int, dtype: Any) -> Any:
    """A column of ``n`` ones, shared by every call (never written into)."""
    import numpy

    ones = numpy.ones((n, 1), dtype)
    ones.flags.writeable = False
    return ones


class _NumpyGemm:
    """A two-operand contraction as one batched GEMM, blocked when an operand is a big view.
    ``tensordot`` copies a strided window view whole, in the written order of its axes.  Here the
    contracted axes are ordered by the view's strides (contiguous reads) and the copy goes in blocks
    of the first free axis, each multiplied while in cache, into the output."""

    BLOCK_BYTES = 1 << 21

    def __init__(self, np: Any, a: str, b: str, out: str, swap: bool = False):
        self.np, self.swap = np, swap
        self.a, self.b, self.out = a, b, out
        self.batch, self.m, self.n, self.k = gemm_groups(a, b, out)
        self._layouts: dict[tuple[Any, ...], Callable[[Any, Any], Any]] = {}

    @classmethod
    def plan(cls, np: Any, subscripts: str) -> _NumpyGemm | None:
        ins, out = subscripts.split("->")
        a, b = ins.split(",")
        if len(set(a)) != len(a) or len(set(b)) != len(b) or len(set(out)) != len(out):
            return None  # diagonals: let einsum do them
        if any(c not in out and c not in b for c in a) or \
                any(c not in out and c not in a for c in b):
            return None  # an axis summed within one operand
        return cls(np, b, a, out, True) if swaps(a, b, out) else cls(np, a, b, out)

    def __call__(self, x: Any, y: Any) -> Any:
        if self.swap:
            x, y = y, x
        key = (x.shape, x.strides, x.dtype, y.shape, y.dtype)
        run = self._layouts.get(key)
        if run is None:
            run = kept(self._layouts, key, self._layout(x, y), 64)
        return run(x, y)

    def _layout(self, x: Any, y: Any) -> Callable[[Any, Any], Any]:
        """The call on operands like ``x`` and ``y``, worked out once per layout."""
        np, a, b = self.np, self.a, self.b
        # contracted axes in the order of x's memory: the copy then reads contiguous runs
        k = sorted(self.k, key=lambda c: -abs(x.strides[a.index(c)]))
        size = dict(zip(a, x.shape, strict=True)) | dict(zip(b, y.shape, strict=True))
        batch, m, n = self.batch, self.m, self.n
        bs, ks, ns = (math.prod(size[c] for c in g) for g in (batch, k, n))
        x_perm = tuple(a.index(c) for c in batch + m + k)
        y_perm = tuple(b.index(c) for c in batch + k + n)
        res_shape, dtype = (*(size[c] for c in batch + m), ns), np.result_type(x, y)
        blocks: list[tuple[slice, ...]] = [()]  # one product: ``()`` indexes the whole array
        row_bytes = x.itemsize * ks * math.prod(size[c] for c in m[1:])
        if m and not x.transpose(x_perm).flags.c_contiguous and \
                row_bytes * size[m[0]] > self.BLOCK_BYTES:
            step = max(1, self.BLOCK_BYTES // max(1, row_bytes))
            blocks = [(slice(None),) * len(batch) + (slice(s, s + step),)
                      for s in range(0, size[m[0]], step)]
        order = batch + m + n
        out_shape = tuple(size[c] for c in order)
        out_perm = tuple(order.index(c) for c in self.out)

        def run(x: Any, y: Any) -> Any:
            xt = x.transpose(x_perm)
            y2 = y.transpose(y_perm).reshape(bs, ks, ns)
            res = np.empty(res_shape, dtype=dtype)
            for idx in blocks:  # each block multiplied while it is still in cache
                np.matmul(xt[idx].reshape(bs, -1, ks), y2, out=res[idx].reshape(bs, -1, ns))
            return res.reshape(out_shape).transpose(out_perm)

        return run
