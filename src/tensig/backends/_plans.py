"""Contraction plans shared by the adapters: an einsum at fixed shapes as one (batched)
matrix product, a sum and a transpose, worked out once per shape signature; and small max
reductions as chains of elementwise maximums.  Library-neutral: each adapter passes its
library's ``matmul`` / ``maximum``."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any


def gemm_groups(a: str, b: str, out: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """The labels of ``a,b->out`` (every label of an operand kept or contracted) as a batched
    matrix product's groups: batch and rows of ``a`` / columns of ``b`` in the result's order,
    contracted in ``a``'s."""
    batch = [c for c in out if c in a and c in b]
    m = [c for c in out if c in a and c not in b]
    n = [c for c in out if c in b and c not in a]
    k = [c for c in a if c in b and c not in out]
    return batch, m, n, k


def matmul_plan(matmul: Callable[[Any, Any], Any], subscripts: str,
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
        return reduce_plan(subs[0], out, keep_dtype) or (lambda x: x)
    pre, a, b = _presummed(subs[0], subs[1], out, keep_dtype)
    batch, m, n, k = gemm_groups(a, b, out)
    swap = "".join(batch + n + m) == out and "".join(batch + m + n) != out
    if swap:  # compute the transposed product: the result then needs no permutation
        a, b, m, n = b, a, n, m
    bs, ms, ns, ks = (math.prod(size[c] for c in g) for g in (batch, m, n, k))
    xa = [a.index(c) for c in batch + m + k]
    yb = [b.index(c) for c in batch + k + n]
    if not m and not n and (xa != sorted(xa) or yb != sorted(yb)):
        return _product_sum(a, b, out, pre, keep_dtype)
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
    if not swap and pre is None and x_same and y_same and r_same and r_id and xa_id:
        if yb_id:
            return matmul  # a plain (batched) matrix product
        if len(yb) == 2:
            return lambda x, y: matmul(x, y.T)

    def run(x: Any, y: Any) -> Any:
        if pre is not None:
            x, y = pre(x, y)
        if swap:
            x, y = y, x
        if not xa_id:
            x = _permute(x, xa)
        if not yb_id:
            y = _permute(y, yb)
        r = matmul(x if x_same else x.reshape(x_shape), y if y_same else y.reshape(y_shape))
        if not r_same:
            r = r.reshape(r_shape)
        return r if r_id else _permute(r, r_perm)

    return run


def _product_sum(a: str, b: str, out: str, pre: Callable[[Any, Any], tuple[Any, Any]] | None,
                 keep_dtype: bool) -> Callable[[Any, Any], Any]:
    """``einsum(a,b->out)`` with every label in both operands (batched dot products) as an
    elementwise product and a sum.  As a matmul, batch axes that are not the leading ones
    (a per-channel sum of ``b, h, w, c`` products: 16 dot products of 2048) are copied out of
    the way first: 250-420 us in torch on CPU against 27 us for the product and the sum."""
    perm = [b.index(c) for c in a]
    moves = perm != sorted(perm)
    reduce = reduce_plan(a, out, keep_dtype) or (lambda v: v)

    def run(x: Any, y: Any) -> Any:
        if pre is not None:
            x, y = pre(x, y)
        return reduce(x * (_permute(y, perm) if moves else y))

    return run


def tensordot_plan(tensordot: Callable[..., Any], subscripts: str
                   ) -> Callable[[Any, Any], Any] | None:
    """``einsum(a,b->out)`` as one ``tensordot`` and a transpose, labels of one operand only
    summed first (in the operand's dtype); ``None`` when a label repeats within an operand
    or is batched (in both operands and the result), which ``tensordot`` cannot express."""
    ins, out = subscripts.split("->")
    a, b = ins.split(",")
    if len(set(a)) != len(a) or len(set(b)) != len(b) or any(c in b and c in out for c in a):
        return None
    pre, a, b = _presummed(a, b, out, True)
    k = [c for c in a if c in b]
    axes = ([a.index(c) for c in k], [b.index(c) for c in k])
    order = [c for c in a + b if c not in k]
    perm = [order.index(c) for c in out]
    moves = perm != sorted(perm)

    def run(x: Any, y: Any) -> Any:
        if pre is not None:
            x, y = pre(x, y)
        r = tensordot(x, y, axes=axes)
        return r.transpose(perm) if moves else r

    return run


def _presummed(a: str, b: str, out: str, keep_dtype: bool
               ) -> tuple[Callable[[Any, Any], tuple[Any, Any]] | None, str, str]:
    """The labels of one operand only that the result drops, summed away first: ``(x, y) ->
    (x, y)`` (``None``: there are none) and the two operands' labels that are left."""
    pre_a, pre_b = (reduce_plan(s, "".join(c for c in s if c in out or c in other), keep_dtype)
                    for s, other in ((a, b), (b, a)))
    kept = ("".join(c for c in a if c in out or c in b),
            "".join(c for c in b if c in out or c in a))
    if pre_a is None and pre_b is None:
        return None, *kept

    def pre(x: Any, y: Any) -> tuple[Any, Any]:
        return (x if pre_a is None else pre_a(x)), (y if pre_b is None else pre_b(y))

    return pre, *kept


def _permute(x: Any, perm: Sequence[int]) -> Any:
    """``x``'s axes in the order ``perm``, by torch's ``permute`` or NumPy's ``transpose``."""
    return x.permute(*perm) if hasattr(x, "permute") else x.transpose(perm)


def reduce_plan(sub: str, out: str, keep_dtype: bool = False) -> Callable[[Any], Any] | None:
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
        return _permute(x, perm) if moves else x

    return run


#: reductions over at most this many cells run as a chain of elementwise maximums
SMALL_REDUCTION = 8


def small_amax(x: Any, axes: tuple[int, ...], maximum: Callable[[Any, Any], Any]) -> Any:
    """``amax`` over a few cells (a pooling window) as ``maximum`` of slices, or ``None``.

    Library reductions over tiny axes run a generic loop per output cell (193 us for a 2x2
    pool of 8K cells in torch on CPU, against 50 us for three ``maximum`` calls).  NaN
    propagates either way.
    """
    cells = _amax_cells(tuple(x.shape), tuple(axes))
    if cells is None:
        return None
    out = x[cells[0]]
    for index in cells[1:]:
        out = maximum(out, x[index])
    return out


@functools.lru_cache(maxsize=256)
def _amax_cells(shape: tuple[int, ...], axes: tuple[int, ...]
                ) -> tuple[tuple[Any, ...], ...] | None:
    """The index of each cell :func:`small_amax` takes the maximum of, worked out once per
    shape (a training step reduces the same pooling windows every call); ``None``: too many
    cells, or too few elements for slices to pay."""
    sizes = [shape[a] for a in axes]
    if not axes or math.prod(sizes) > SMALL_REDUCTION or 0 in sizes or \
            math.prod(shape) < 4 * math.prod(sizes):
        return None
    cells = []
    for cell in itertools.product(*(range(n) for n in sizes)):
        index: list[Any] = [slice(None)] * len(shape)
        for a, i in zip(axes, cell, strict=True):
            index[a] = i
        cells.append(tuple(index))
    return tuple(cells)


def flops(subscripts: str, shapes: Sequence[tuple[int, ...]]) -> int:
    """The size of the contraction's iteration space (one multiply-add per point)."""
    sizes = {c: n for sub, shape in zip(subscripts.split("->")[0].split(","), shapes,
                                        strict=True)
             for c, n in zip(sub, shape, strict=True)}
    return math.prod(sizes.values())
