"""Thin backend adapters: the few array primitives the lowering needs, per array library.

A backend is chosen by the type of the arrays (a dispatch table keyed by the array's top-level
module, as einops does); libraries are imported lazily, only when an array of theirs shows up.
Every primitive is functional (no item assignment), so the same lowering runs on NumPy,
PyTorch, JAX and Dask, and results stay the kind of array that came in.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Backend", "all_zero", "backend_for", "backend_of", "is_integer",
           "library_of", "neutral_max"]


def all_zero(x: Any) -> bool:
    """Whether every element of ``x`` is zero (NaN is not), tested afresh on every call.

    For small arrays tested per call (a pooling window).  There is no cache: a torch
    tensor's version counter misses writes through ``torch.from_numpy`` memory or ``.data``,
    and a read-only NumPy view can have a writable base, so a remembered answer could be
    stale.  ``count_nonzero`` is one C call (2-6 us on a 2x2 window, a ~0-8% difference on
    the digits CNN's training step, within the bench's noise).
    """
    count = getattr(x, "count_nonzero", None)  # torch
    if count is not None:
        return int(count()) == 0
    import numpy as np

    return int(np.count_nonzero(x)) == 0


@functools.cache
def neutral_max(dtype: Any) -> float | int | bool:
    """The neutral element of max for ``dtype`` (NumPy, JAX and Dask dtypes, or a torch dtype):
    ``-inf`` for floats, the dtype's minimum for integers, ``False`` for bool.  The one
    definition every padding for a max reads (lowering, max pooling, compiled routines).

    >>> import numpy as np
    >>> neutral_max(np.dtype(np.int8)), neutral_max(np.dtype(bool)), neutral_max(np.float32)
    (-128, False, -inf)
    """
    if hasattr(dtype, "is_floating_point"):  # a torch dtype
        import torch

        if dtype == torch.bool:
            return False
        if dtype.is_floating_point or dtype.is_complex:
            return -math.inf
        return int(torch.iinfo(dtype).min)
    import numpy as np

    dt = np.dtype(dtype)
    if dt == np.bool_:
        return False
    if np.issubdtype(dt, np.integer):
        return int(np.iinfo(dt).min)
    return -math.inf


@functools.cache
def is_integer(dtype: Any) -> bool:
    """Whether ``dtype`` (NumPy-like or torch) is an integer type (bool is not)."""
    if hasattr(dtype, "is_floating_point"):
        return not (dtype.is_floating_point or dtype.is_complex) and str(dtype) != "torch.bool"
    import numpy as np

    return bool(np.issubdtype(np.dtype(dtype), np.integer))


class Backend:
    """The primitives the lowering uses; subclasses adapt one array library."""

    name = "abstract"

    def einsum(self, subscripts: str, *xs: Any) -> Any:
        raise NotImplementedError

    def contraction(self, subscripts: str, shapes: Sequence[tuple[int, ...]]) -> Any:
        """A callable computing ``einsum(subscripts, *xs)`` at the backend's best speed.

        Planned once per shape signature (the caller caches it); BLAS-backed when it pays.
        """
        return functools.partial(self.einsum, subscripts)

    def pad(self, x: Any, widths: Sequence[tuple[int, int]], value: float) -> Any:
        raise NotImplementedError

    def windows(self, x: Any, axis: int, size: int, step: int) -> Any:
        """Sliding windows along ``axis`` (stride ``step``); the window axis is appended last."""
        raise NotImplementedError

    def amax(self, x: Any, axes: tuple[int, ...]) -> Any:
        raise NotImplementedError

    def transpose(self, x: Any, perm: Sequence[int]) -> Any:
        return x.transpose(*perm)

    def reshape(self, x: Any, shape: Sequence[int]) -> Any:
        return x.reshape(tuple(shape))

    def broadcast_to(self, x: Any, shape: Sequence[int]) -> Any:
        raise NotImplementedError

    def fused(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` (a function of arrays made of this backend's calls) compiled as one kernel
        where the library compiles (``jax.jit``); elsewhere ``fn`` itself."""
        return fn

    def full(self, shape: Sequence[int], value: float, like: Any) -> Any:
        raise NotImplementedError

    def eye_mask(self, n: int, like: Any) -> Any:
        """An ``n x n`` boolean identity mask on ``like``'s device."""
        raise NotImplementedError

    def where(self, mask: Any, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def maximum(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def flatten(self, xs: Sequence[Any]) -> Any:
        """The arrays' elements, one after another, in one new 1-D array."""
        raise NotImplementedError

    def splitter(self, shapes: Sequence[tuple[int, ...]]) -> Callable[[Any], list[Any]]:
        """``flat -> views`` undoing :meth:`flatten` for arrays of ``shapes``."""
        bounds, at = [], 0
        for shape in shapes:
            n = math.prod(shape)
            bounds.append((at, at + n, tuple(shape)))
            at += n
        return lambda flat: [flat[lo:hi].reshape(shape) for lo, hi, shape in bounds]


class _ArrayAPIBackend(Backend):
    """NumPy's API, shared by NumPy, JAX and Dask: ``xp`` is the library's namespace."""

    xp: Any

    def einsum(self, subscripts: str, *xs: Any) -> Any:
        return self.xp.einsum(subscripts, *xs)

    def pad(self, x: Any, widths: Sequence[tuple[int, int]], value: float) -> Any:
        return self.xp.pad(x, list(widths), mode="constant", constant_values=value)

    def windows(self, x: Any, axis: int, size: int, step: int) -> Any:
        w = self._sliding(x, size, axis)
        if step != 1:
            index = [slice(None)] * w.ndim
            index[axis] = slice(None, None, step)
            w = w[tuple(index)]
        return w

    def _sliding(self, x: Any, size: int, axis: int) -> Any:
        raise NotImplementedError

    def amax(self, x: Any, axes: tuple[int, ...]) -> Any:
        return self.xp.max(x, axis=axes) if axes else x

    def broadcast_to(self, x: Any, shape: Sequence[int]) -> Any:
        return self.xp.broadcast_to(x, tuple(shape))

    def flatten(self, xs: Sequence[Any]) -> Any:
        return self.xp.concatenate([x.reshape(-1) for x in xs])

    def full(self, shape: Sequence[int], value: float, like: Any) -> Any:
        return self.xp.full(tuple(shape), value, dtype=like.dtype)

    def eye_mask(self, n: int, like: Any) -> Any:
        import numpy

        return numpy.eye(n, dtype=bool)

    def where(self, mask: Any, a: Any, b: Any) -> Any:
        return self.xp.where(mask, a, b)

    def maximum(self, a: Any, b: Any) -> Any:
        return self.xp.maximum(a, b)


class NumpyBackend(_ArrayAPIBackend):
    name = "numpy"

    def __init__(self) -> None:
        import numpy

        self.np = self.xp = numpy

    def amax(self, x: Any, axes: tuple[int, ...]) -> Any:
        small = _small_amax(x, axes, self.np.maximum)
        return small if small is not None else super().amax(x, axes)

    def pad(self, x: Any, widths: Sequence[tuple[int, int]], value: float) -> Any:
        """A constant pad as one fill and one copy: ``numpy.pad`` took 34-56 us a call on a
        small CNN's 32x4x4x16 activation (its argument handling is Python), this 9-14 us."""
        x = self.np.asarray(x)
        out = self.np.full([n + lo + hi for n, (lo, hi) in zip(x.shape, widths, strict=True)],
                           value, dtype=x.dtype)
        out[tuple(slice(lo, lo + n) for n, (lo, _) in zip(x.shape, widths, strict=True))] = x
        return out

    def contraction(self, subscripts: str, shapes: Sequence[tuple[int, ...]]) -> Any:
        flops = _flops(subscripts, shapes)
        if flops < 1 << 15 or len(shapes) < 2:
            small = _matmul_plan(self.np.matmul, subscripts, shapes, keep_dtype=True)
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

    def _sliding(self, x: Any, size: int, axis: int) -> Any:
        """``sliding_window_view(x, size, axis)``, built directly from the strides: the
        library function normalises and checks its arguments in Python (19-22 us a call on a
        32x6x6x16 array, eight calls in a small CNN's training step), this 10-11 us.
        Read-only, as that view is."""
        from numpy.lib.stride_tricks import as_strided, sliding_window_view

        x = self.np.asarray(x)
        if not -x.ndim <= axis < x.ndim or not 1 <= size <= x.shape[axis]:
            return sliding_window_view(x, size, axis=axis)  # its error message
        axis %= x.ndim
        n = x.shape[axis] - size + 1
        shape = (*x.shape[:axis], n, *x.shape[axis + 1:], size)
        return as_strided(x, shape, (*x.strides, x.strides[axis]), writeable=False)


class _NumpyGemm:
    """A two-operand contraction as one batched GEMM, blocked when an operand is a big view.

    ``tensordot`` copies a strided window view (convolution) into a matrix in the order the
    axes are written, which can read memory against its grain, and copies it whole.  Here the
    contracted axes are ordered by the view's strides (so the copy reads contiguous runs) and
    the copy is done in blocks of the first free axis, each block multiplied while it is still
    in cache and written straight into the output.
    """

    BLOCK_BYTES = 1 << 21

    def __init__(self, np: Any, a: str, b: str, out: str):
        self.np = np
        self.a, self.b, self.out = a, b, out
        self.batch, self.m, self.n, self.k = _gemm_groups(a, b, out)

    @classmethod
    def plan(cls, np: Any, subscripts: str) -> _NumpyGemm | None:
        ins, out = subscripts.split("->")
        a, b = ins.split(",")
        if len(set(a)) != len(a) or len(set(b)) != len(b) or len(set(out)) != len(out):
            return None  # diagonals: let einsum do them
        if any(c not in out and c not in b for c in a) or \
                any(c not in out and c not in a for c in b):
            return None  # an axis summed within one operand
        return cls(np, a, b, out)

    def __call__(self, x: Any, y: Any) -> Any:
        np = self.np
        a, b = self.a, self.b
        # contracted axes in the order of x's memory: the copy then reads contiguous runs
        k = sorted(self.k, key=lambda c: -abs(x.strides[a.index(c)]))
        size = dict(zip(a, x.shape, strict=True)) | dict(zip(b, y.shape, strict=True))
        batch, m, n = self.batch, self.m, self.n
        bs = math.prod(size[c] for c in batch)
        ks = math.prod(size[c] for c in k)
        ns = math.prod(size[c] for c in n)
        xt = x.transpose([a.index(c) for c in batch + m + k])
        y2 = y.transpose([b.index(c) for c in batch + k + n]).reshape(bs, ks, ns)
        res = np.empty([size[c] for c in batch + m] + [ns], dtype=np.result_type(x, y))
        lead = len(batch)
        row_bytes = x.itemsize * ks * math.prod(size[c] for c in m[1:])
        if m and not xt.flags.c_contiguous and row_bytes * size[m[0]] > self.BLOCK_BYTES:
            step = max(1, self.BLOCK_BYTES // max(1, row_bytes))
            for s in range(0, size[m[0]], step):
                idx = (slice(None),) * lead + (slice(s, s + step),)
                blk = xt[idx]
                x2 = blk.reshape(bs, -1, ks)
                np.matmul(x2, y2, out=res[idx].reshape(bs, -1, ns))
        else:
            np.matmul(xt.reshape(bs, -1, ks), y2, out=res.reshape(bs, -1, ns))
        res = res.reshape([size[c] for c in batch + m + n])
        order = batch + m + n
        return res.transpose([order.index(c) for c in self.out])


def _gemm_groups(a: str, b: str, out: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """The labels of ``a,b->out`` (every label of an operand kept or contracted) as a batched
    matrix product's groups: batch and rows of ``a`` / columns of ``b`` in the result's order,
    contracted in ``a``'s."""
    batch = [c for c in out if c in a and c in b]
    m = [c for c in out if c in a and c not in b]
    n = [c for c in out if c in b and c not in a]
    k = [c for c in a if c in b and c not in out]
    return batch, m, n, k


def _matmul_plan(matmul: Callable[[Any, Any], Any], subscripts: str,
                 shapes: Sequence[tuple[int, ...]], keep_dtype: bool = False
                 ) -> Callable[..., Any] | None:
    """``einsum(subscripts)`` at fixed shapes as reshapes around one ``matmul`` (or, for one
    operand, a sum and a transpose), every permutation and size worked out here, once.

    Library einsums re-parse the subscripts and re-plan on every call (~20 us in torch and in
    NumPy's C loop for small problems); the plan costs a few view calls.  ``None`` when a
    label repeats within an operand (a diagonal): the library's einsum does those.
    """
    ins, out = subscripts.split("->")
    subs = ins.split(",")
    if any(len(set(s)) != len(s) for s in subs) or len(subs) > 2:
        return None
    size = {c: n for s, shape in zip(subs, shapes, strict=True)
            for c, n in zip(s, shape, strict=True)}
    if len(subs) == 1:
        return _reduce_plan(subs[0], out, keep_dtype) or (lambda x: x)
    a, b = subs
    # a label in one operand only and absent from the result is summed away first
    pre = [_reduce_plan(s, "".join(c for c in s if c in out or c in other), keep_dtype)
           for s, other in ((a, b), (b, a))]
    a = "".join(c for c in a if c in out or c in b)
    b = "".join(c for c in b if c in out or c in a)
    batch, m, n, k = _gemm_groups(a, b, out)
    swap = "".join(batch + n + m) == out and "".join(batch + m + n) != out
    if swap:  # compute the transposed product: the result then needs no permutation
        a, b, m, n = b, a, n, m
        pre.reverse()
    bs, ms, ns, ks = (math.prod(size[c] for c in g) for g in (batch, m, n, k))
    xa = [a.index(c) for c in batch + m + k]
    yb = [b.index(c) for c in batch + k + n]
    x_shape = (bs, ms, ks) if batch else (ms, ks)
    y_shape = (bs, ks, ns) if batch else (ks, ns)
    order = batch + m + n
    r_shape = tuple(size[c] for c in order)
    r_perm = [order.index(c) for c in out]
    xa_id, yb_id = xa == sorted(xa), yb == sorted(yb)
    r_id = r_perm == sorted(r_perm)
    # reshapes that change nothing are skipped (each is a call, ~1 us)
    x_same = tuple(size[c] for c in batch + m + k) == x_shape
    y_same = tuple(size[c] for c in batch + k + n) == y_shape
    r_same = r_shape == x_shape[:-1] + y_shape[-1:]
    pre_a, pre_b = pre
    if not swap and pre_a is None and pre_b is None and x_same and y_same and r_same and \
            r_id and xa_id:
        if yb_id:
            return matmul  # a plain (batched) matrix product
        if len(yb) == 2:
            return lambda x, y: matmul(x, y.T)

    def run(x: Any, y: Any) -> Any:
        if swap:
            x, y = y, x
        if pre_a is not None:
            x = pre_a(x)
        if pre_b is not None:
            y = pre_b(y)
        if not xa_id:
            x = x.permute(*xa) if hasattr(x, "permute") else x.transpose(xa)
        if not yb_id:
            y = y.permute(*yb) if hasattr(y, "permute") else y.transpose(yb)
        r = matmul(x if x_same else x.reshape(x_shape), y if y_same else y.reshape(y_shape))
        if not r_same:
            r = r.reshape(r_shape)
        if not r_id:
            r = r.permute(*r_perm) if hasattr(r, "permute") else r.transpose(r_perm)
        return r

    return run


def _tensordot_plan(tensordot: Callable[..., Any], subscripts: str
                    ) -> Callable[[Any, Any], Any] | None:
    """``einsum(a,b->out)`` as one ``tensordot`` and a transpose, labels of one operand only
    summed first (in the operand's dtype); ``None`` when a label repeats within an operand
    or is batched (in both operands and the result), which ``tensordot`` cannot express."""
    ins, out = subscripts.split("->")
    a, b = ins.split(",")
    if len(set(a)) != len(a) or len(set(b)) != len(b) or any(c in b and c in out for c in a):
        return None
    pre_a, pre_b = (_reduce_plan(s, "".join(c for c in s if c in out or c in other), True)
                    for s, other in ((a, b), (b, a)))
    a = "".join(c for c in a if c in out or c in b)
    b = "".join(c for c in b if c in out or c in a)
    k = [c for c in a if c in b]
    axes = ([a.index(c) for c in k], [b.index(c) for c in k])
    order = [c for c in a + b if c not in k]
    perm = [order.index(c) for c in out]
    moves = perm != sorted(perm)

    def run(x: Any, y: Any) -> Any:
        if pre_a is not None:
            x = pre_a(x)
        if pre_b is not None:
            y = pre_b(y)
        r = tensordot(x, y, axes=axes)
        return r.transpose(perm) if moves else r

    return run


def _reduce_plan(sub: str, out: str, keep_dtype: bool = False) -> Callable[[Any], Any] | None:
    """``einsum(sub->out)`` without repeated labels: a sum, then a transpose (None: nothing).

    ``keep_dtype``: sum in the operand's dtype, as ``numpy.einsum`` does (an int8 sum wraps
    around, a bool sum is a logical or), where ``ndarray.sum`` would widen to int64."""
    axes = tuple(i for i, c in enumerate(sub) if c not in out)
    kept = [c for c in sub if c in out]
    perm = [kept.index(c) for c in out]
    moves = perm != sorted(perm)
    if not axes and not moves:
        return None

    def run(x: Any) -> Any:
        if axes:
            x = x.sum(axes, dtype=x.dtype) if keep_dtype else x.sum(axes)
        if moves:
            x = x.permute(*perm) if hasattr(x, "permute") else x.transpose(perm)
        return x

    return run


#: reductions over at most this many cells run as a chain of elementwise maximums
SMALL_REDUCTION = 8


def _small_amax(x: Any, axes: tuple[int, ...], maximum: Callable[[Any, Any], Any]) -> Any:
    """``amax`` over a few cells (a pooling window) as ``maximum`` of slices, or ``None``.

    Library reductions over tiny axes run a generic loop per output cell (193 us for a 2x2
    pool of 8K cells in torch on CPU, against 50 us for three ``maximum`` calls).  NaN
    propagates either way.
    """
    import itertools

    sizes = [x.shape[a] for a in axes]
    if not axes or math.prod(sizes) > SMALL_REDUCTION or 0 in sizes or \
            math.prod(x.shape) < 4 * math.prod(sizes):
        return None
    out = None
    for cell in itertools.product(*(range(n) for n in sizes)):
        index: list[Any] = [slice(None)] * len(x.shape)
        for a, i in zip(axes, cell, strict=True):
            index[a] = i
        v = x[tuple(index)]
        out = v if out is None else maximum(out, v)
    return out


class TorchBackend(Backend):
    name = "torch"

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self._templates: dict[tuple[Any, ...], Any] = {}

    def einsum(self, subscripts: str, *xs: Any) -> Any:
        return self.torch.einsum(subscripts, *xs)

    def contraction(self, subscripts: str, shapes: Sequence[tuple[int, ...]]) -> Any:
        # torch.einsum spends ~25 us in Python per call; a planned matmul costs ~3 us
        plan = _matmul_plan(self.torch.matmul, subscripts, shapes)
        einsum = functools.partial(self.torch.einsum, subscripts)
        if plan is None:
            return einsum

        def contract(*xs: Any) -> Any:
            try:  # the try costs nothing on the fast path
                return plan(*xs)
            except (RuntimeError, NotImplementedError):
                return self._promoted(plan, einsum, xs)

        return contract

    def _promoted(self, plan: Callable[..., Any], einsum: Callable[..., Any],
                  xs: Sequence[Any]) -> Any:
        """A contraction that matmul refused: operands of mixed dtypes (int8 with float32)
        in torch's promoted dtype, as ``torch.einsum`` does for products that reduce nothing
        (its contractions refuse them); bool operands as NumPy's logical or of ands (torch
        has no bool matmul).  Anything still refused raises torch's own error."""
        t = self.torch
        dtype = functools.reduce(t.promote_types, [x.dtype for x in xs])
        if dtype == t.bool:
            return plan(*[x.to(t.float32) for x in xs]) > 0  # exact: sums of 0s and 1s
        cast = [x if x.dtype == dtype else x.to(dtype) for x in xs]
        try:
            return plan(*cast)
        except (RuntimeError, NotImplementedError):
            return einsum(*cast)

    def pad(self, x: Any, widths: Sequence[tuple[int, int]], value: float) -> Any:
        flat: list[int] = []
        for lo, hi in reversed(list(widths)):  # torch pads the last axis first
            flat += [lo, hi]
        return self.torch.nn.functional.pad(x, flat, value=value)

    def windows(self, x: Any, axis: int, size: int, step: int) -> Any:
        return x.unfold(axis, size, step)

    def conv(self, x: Any, w: Any, strides: Sequence[int], dilations: Sequence[int],
             pads: Sequence[tuple[int, int]], channels_last: bool = False) -> Any:
        """torch's own convolution: ``x`` is (N, C, *spatial), ``w`` is (O, C, *kernel);
        ``channels_last``: the result in channels-last memory (2-D and 3-D)."""
        F = self.torch.nn.functional
        fn = (F.conv1d, F.conv2d, F.conv3d)[len(strides) - 1]
        if all(lo == hi for lo, hi in pads):
            padding = [lo for lo, _ in pads]
        else:  # torch pads symmetrically: pad the input itself first
            x = self.pad(x, [(0, 0), (0, 0), *pads], 0)
            padding = [0] * len(pads)
        y = fn(x, w, stride=list(strides), dilation=list(dilations), padding=padding)
        if channels_last and y.dim() in (4, 5):
            t = self.torch
            y = y.contiguous(memory_format=t.channels_last if y.dim() == 4
                             else t.channels_last_3d)
        return y

    def conv_backward(self, g: Any, other: Any, shape: Sequence[int], of_input: bool,
                      strides: Sequence[int], dilations: Sequence[int],
                      pads: Sequence[tuple[int, int]]) -> Any:
        """The gradient of :meth:`conv` for the input (``other`` is the kernel) or for the
        kernel (``other`` is the input), from the result's gradient ``g``; ``shape`` is the
        missing operand's, whose values the gradient does not need."""
        t = self.torch
        pads = list(pads)
        symmetric = all(lo == hi for lo, hi in pads)
        nd = len(strides)
        fmt = {4: t.channels_last, 5: t.channels_last_3d}.get(len(shape), t.contiguous_format)
        if of_input:
            full = list(shape) if symmetric else \
                list(shape[:2]) + [n + lo + hi for n, (lo, hi) in zip(shape[2:], pads,
                                                                      strict=True)]
            x, w = self._template(full, g, fmt), other
        else:
            x = other if symmetric else self.pad(other, [(0, 0), (0, 0), *pads], 0)
            w = self._template(list(shape), g, fmt)
        padding = [lo for lo, _ in pads] if symmetric else [0] * nd
        gx, gw, _ = t.ops.aten.convolution_backward(
            g, x, w, None, list(strides), padding, list(dilations), False, [0] * nd, 1,
            [of_input, not of_input, False])
        out = gx if of_input else gw
        if of_input and not symmetric:
            out = out[(slice(None), slice(None),
                       *(slice(lo, lo + n) for (lo, _), n in zip(pads, shape[2:], strict=True)))]
        if len(shape) in (4, 5):
            out = out.contiguous(memory_format=fmt)
        return out

    def _template(self, shape: list[int], like: Any, fmt: Any) -> Any:
        """An array standing for an operand whose values a gradient does not read (only its
        shape and layout): made once per shape, dtype, device and layout."""
        key = (tuple(shape), like.dtype, like.device, fmt)
        t = self._templates.get(key)
        if t is None:
            t = self._templates[key] = self.torch.empty(shape, dtype=like.dtype,
                                                        device=like.device, memory_format=fmt)
        return t

    def max_pool(self, x: Any, kernel: Sequence[int], strides: Sequence[int],
                 dilations: Sequence[int], pads: Sequence[tuple[int, int]]) -> Any:
        """torch's max pooling of ``x`` (N, C, *spatial); padding reads -inf (the neutral
        element of max), uneven padding done by hand first."""
        F = self.torch.nn.functional
        fn = (F.max_pool1d, F.max_pool2d, F.max_pool3d)[len(kernel) - 1]
        padding = [lo for lo, _ in pads]
        if any(lo != hi or 2 * lo > k for (lo, hi), k in zip(pads, kernel, strict=True)):
            x = self.pad(x, [(0, 0), (0, 0), *pads], neutral_max(x.dtype))
            padding = [0] * len(pads)
        return fn(x, list(kernel), list(strides), padding, list(dilations))

    def conv_accepts(self, x: Any, w: Any) -> bool:
        """torch's conv takes floating operands of one dtype on one device."""
        return x.dtype == w.dtype and x.dtype.is_floating_point and x.device == w.device

    def amax(self, x: Any, axes: tuple[int, ...]) -> Any:
        small = _small_amax(x, axes, self.torch.maximum)
        if small is not None:
            return small
        return self.torch.amax(x, dim=axes) if axes else x

    def transpose(self, x: Any, perm: Sequence[int]) -> Any:
        return x.permute(*perm)

    def broadcast_to(self, x: Any, shape: Sequence[int]) -> Any:
        return x.expand(*shape)

    def flatten(self, xs: Sequence[Any]) -> Any:
        # one call for the views and the copy (what DistributedDataParallel's buckets use; a
        # private function, so the public way stays as the fallback)
        fn = getattr(self.torch._C._nn, "flatten_dense_tensors", None)
        return fn(list(xs)) if fn is not None else self.torch.cat([x.reshape(-1) for x in xs])

    def splitter(self, shapes: Sequence[tuple[int, ...]]) -> Callable[[Any], list[Any]]:
        # one call makes every view (2.5x faster than slicing in Python); the templates only
        # lend their sizes, so they live on the meta device and hold no memory
        unflatten = getattr(self.torch._C._nn, "unflatten_dense_tensors", None)
        if unflatten is None:
            return super().splitter(shapes)
        templates = [self.torch.empty(shape, device="meta") for shape in shapes]
        return lambda flat: unflatten(flat, templates)

    def widen(self, x: Any, shape: Sequence[int]) -> Any:
        """``x`` broadcast to ``shape`` as a contiguous copy, on the CPU (see
        :func:`tensig.model.compile._widening`); elsewhere ``x`` as it is.  Copies by ``cat`` of
        ``x`` with itself along each widened axis: 3x faster than ``expand().contiguous()``
        (4 us against 12 for a 32x4x4x16 pooled map doubled)."""
        if not x.is_cpu:
            return x
        if x.dim() < len(shape):
            x = x.reshape((1,) * (len(shape) - x.dim()) + tuple(x.shape))
        for axis in reversed(range(len(shape))):
            if x.shape[axis] != shape[axis]:
                x = self.torch.cat([x] * shape[axis], axis)
        return x

    def full(self, shape: Sequence[int], value: float, like: Any) -> Any:
        return self.torch.full(tuple(shape), value, dtype=like.dtype, device=like.device)

    def eye_mask(self, n: int, like: Any) -> Any:
        return self.torch.eye(n, dtype=self.torch.bool, device=like.device)

    def where(self, mask: Any, a: Any, b: Any) -> Any:
        return self.torch.where(mask, a, b)

    def maximum(self, a: Any, b: Any) -> Any:
        return self.torch.maximum(a, b)


class JaxBackend(_ArrayAPIBackend):
    name = "jax"

    def __init__(self) -> None:
        import jax.numpy as jnp

        self.jnp = self.xp = jnp

    def fused(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        import jax

        return jax.jit(fn)

    def conv(self, x: Any, w: Any, strides: Sequence[int], dilations: Sequence[int],
             pads: Sequence[tuple[int, int]], channels_last: bool = False) -> Any:
        """``lax.conv_general_dilated``: ``x`` is (N, C, *spatial), ``w`` is (O, C, *kernel),
        as the torch adapter's :meth:`TorchBackend.conv` (XLA chooses the memory layout, so
        ``channels_last`` changes nothing); uneven padding is native."""
        from jax import lax

        return lax.conv_general_dilated(x, w, tuple(strides), [tuple(p) for p in pads],
                                        rhs_dilation=tuple(dilations))

    def conv_accepts(self, x: Any, w: Any) -> bool:
        """XLA's conv takes floating operands of one dtype (integers take the windows path,
        which sums in the operands' dtype as numpy.einsum does)."""
        return x.dtype == w.dtype and self.jnp.issubdtype(x.dtype, self.jnp.floating)

    def windows(self, x: Any, axis: int, size: int, step: int) -> Any:
        # A gather: JAX has no strided views; XLA fuses the gather into the consumer.
        n = (x.shape[axis] - size) // step + 1
        jnp = self.jnp
        idx = jnp.arange(n)[:, None] * step + jnp.arange(size)[None, :]
        w = jnp.take(x, idx, axis=axis)  # axis -> (n, size) in place
        return jnp.moveaxis(w, axis + 1, -1)


class DaskBackend(_ArrayAPIBackend):
    name = "dask"

    def __init__(self) -> None:
        import dask.array as da

        self.da = self.xp = da

    def einsum(self, subscripts: str, *xs: Any) -> Any:
        # dask contracts block by block: a repeated index (a diagonal) needs its axes chunked
        # alike, and every occurrence of an index across operands too.
        subs = subscripts.split("->")[0].split(",")
        chunks: dict[str, tuple[int, ...]] = {}
        for sub, x in zip(subs, xs, strict=True):
            for c, ch in zip(sub, x.chunks, strict=True):
                chunks.setdefault(c, ch)
        aligned = []
        for sub, x in zip(subs, xs, strict=True):
            want = {i: chunks[c] for i, c in enumerate(sub) if x.chunks[i] != chunks[c]}
            aligned.append(x.rechunk(want) if want else x)
        # in the operands' result dtype, as numpy.einsum (an int8 sum wraps, a bool sum is a
        # logical or): dask sums the blocks' partial results in int64.  Casting the int64
        # total back is exact: integer sums wrap modulo 2^bits either way, and a count is
        # nonzero exactly when the logical or is true
        import numpy as np

        out = self.da.einsum(subscripts, *aligned)
        dtype = np.result_type(*[x.dtype for x in xs])
        return out if out.dtype == dtype else out.astype(dtype)

    def contraction(self, subscripts: str, shapes: Sequence[tuple[int, ...]]) -> Any:
        """Two operands as one ``da.tensordot`` (``da.matmul`` when an axis is batched), with
        transposes around it: per block a BLAS call, where ``da.einsum`` runs NumPy's einsum
        loop on every block (9x slower on a 4000x3000 @ 3000x2000 float32 product).  The
        result stays lazy, in the operands' result dtype as :meth:`einsum`'s; diagonals, one
        operand and three or more take :meth:`einsum`."""
        if len(shapes) != 2 or any(n != n for shape in shapes for n in shape):  # nan: unknown
            return super().contraction(subscripts, shapes)
        plan = _tensordot_plan(self.da.tensordot, subscripts) or \
            _matmul_plan(self.da.matmul, subscripts, shapes, keep_dtype=True)
        if plan is None:
            return super().contraction(subscripts, shapes)
        import numpy as np

        def contract(x: Any, y: Any) -> Any:
            out = plan(x, y)
            dtype = np.result_type(x.dtype, y.dtype)  # blocks' partial sums may widen
            return out if out.dtype == dtype else out.astype(dtype)

        return contract

    def _sliding(self, x: Any, size: int, axis: int) -> Any:
        from dask.array.lib.stride_tricks import sliding_window_view

        return sliding_window_view(x, size, axis=axis)


_BACKENDS: dict[str, type[Backend]] = {
    "numpy": NumpyBackend,
    "torch": TorchBackend,
    "jax": JaxBackend,
    "dask": DaskBackend,
}


@functools.cache
def library_of(array_type: type) -> str:
    """The array library a type comes from, by the top-level module of the first class in its
    MRO that one of the four libraries defines (``jaxlib`` is ``jax``): the one dispatch key of
    every layer (lowering, compiled routines, the rank layer).  A subclass is its base's
    library, so ``np.memmap`` and a user's ``ndarray`` subclass are ``'numpy'``.

    >>> import numpy as np
    >>> library_of(np.ndarray), library_of(np.memmap)
    ('numpy', 'numpy')
    """
    for cls in array_type.__mro__:
        root = cls.__module__.partition(".")[0]
        root = "jax" if root == "jaxlib" else root
        if root in _BACKENDS:
            return root
    root = array_type.__module__.partition(".")[0]
    return "jax" if root == "jaxlib" else root


#: ndarray subclasses whose meaning an einsum would silently drop: refused, not converted
_REFUSED = {
    ("numpy", "matrix"): "it is always 2-D (its reshape keeps two axes); pass np.asarray(m)",
    ("numpy.ma", "MaskedArray"): "einsum would ignore the mask; pass m.filled(value) "
                                 "(what masked cells hold) or np.asarray(m)",
}


@functools.cache
def backend_for(array_type: type) -> Backend:
    """The backend of an array type: one instance per library (importing it then), shared by
    its subclasses."""
    for cls in array_type.__mro__:
        why = _REFUSED.get((cls.__module__, cls.__qualname__))
        if why is not None:
            raise TypeError(f"tensig does not take {cls.__module__}.{cls.__qualname__} "
                            f"operands: {why}")
    return _backend_named(library_of(array_type), array_type)


def _backend_named(library: str, array_type: type) -> Backend:
    cls = _BACKENDS.get(library)
    if cls is None:
        raise TypeError(
            f"tensig does not know arrays of type {array_type.__module__}.{array_type.__name__}; "
            "supported: numpy.ndarray, torch.Tensor, jax.Array, dask.array.Array")
    return _instance(cls)


@functools.cache
def _instance(cls: type[Backend]) -> Backend:
    return cls()


def backend_of(xs: Sequence[Any]) -> Backend:
    """The one backend of ``xs``; mixing array libraries in one call is a ``TypeError``."""
    first = backend_for(type(xs[0]))
    for i, x in enumerate(xs[1:], 1):
        b = backend_for(type(x))
        if b is not first:
            raise TypeError(
                f"operands mix array libraries: operand 0 is a {first.name} array, operand {i} "
                f"a {b.name} array; convert them to one library first")
    return first


def _flops(subscripts: str, shapes: Sequence[tuple[int, ...]]) -> int:
    """The size of the contraction's iteration space (one multiply-add per point)."""
    sizes = {c: n for sub, shape in zip(subscripts.split("->")[0].split(","), shapes,
                                        strict=True)
             for c, n in zip(sub, shape, strict=True)}
    return math.prod(sizes.values())
