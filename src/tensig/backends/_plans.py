"""Contraction plans shared by the adapters: an einsum at fixed shapes as one (batched) matrix
product, a sum and a transpose, worked out once per shapes; small max reductions as chains of
maximums.  Each adapter passes its library's ``matmul`` / ``maximum`` and, to sum in the
operands' dtype as ``numpy.einsum`` does, its ``result_dtype`` (``promote``)."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


def gemm_groups(a: str, b: str, out: str) -> tuple[list[str], list[str], list[str], list[str]]:
    """The labels of ``a,b->out`` as a batched matrix product's: batch, rows, columns, summed."""
    batch = [c for c in out if c in a and c in b]
    m = [c for c in out if c in a and c not in b]
    n = [c for c in out if c in b and c not in a]
    k = [c for c in a if c in b and c not in out]
    return batch, m, n, k


def swaps(a: str, b: str, out: str) -> bool:
    """Whether ``einsum(a,b->out)`` is best computed as ``einsum(b,a->out)``: the product then
    comes out in the result's order (no permuted view for later passes to read)."""
    batch, m, n, _ = gemm_groups(a, b, out)
    return "".join(batch + n + m) == out and "".join(batch + m + n) != out


@dataclass(frozen=True)
class Gemm:
    """``einsum(a,b->out)`` at fixed shapes as one (batched) ``x @ y``: one operand's own
    labels summed first (``pre``), the operands exchanged (``swap``: :func:`swaps`), each made
    a matrix (``x``, ``y``: :func:`_as_matrix`), the product reshaped to ``shape`` and
    permuted by ``perm`` (``None``: no need).  The groups are the exchanged operands'."""

    pre: Callable[[Any, Any], tuple[Any, Any]] | None
    swap: bool
    x: Callable[[Any], Any] | None
    y: Callable[[Any], Any] | None
    product: tuple[int, ...]
    shape: tuple[int, ...] | None
    perm: list[int] | None
    groups: tuple[list[str], list[str], list[str], list[str]]  # batch, rows, cols, contracted
    copies: bool  # an operand's axes interleave: made a matrix by a copy


#: a backend's dtype promotion (``Backend.result_dtype``): the operands -> their dtype
Promote = Callable[[Sequence[Any]], Any]


def gemm(subscripts: str, shapes: Sequence[tuple[int, ...]], promote: Promote | None = None
         ) -> Gemm | None:
    """The matrix product computing a two-operand ``einsum(subscripts)``; ``None`` for a
    diagonal, or every label in both operands with batch ones not leading (:func:`_product_sum`)."""
    ins, out = subscripts.split("->")
    subs = ins.split(",")
    if len(subs) != 2 or any(len(set(s)) != len(s) for s in subs):
        return None
    size = {c: n for s, shape in zip(subs, shapes, strict=True)
            for c, n in zip(s, shape, strict=True)}
    pre, a, b = _presummed(subs[0], subs[1], out, promote)
    batch, m, n, k = gemm_groups(a, b, out)
    swap = swaps(a, b, out)
    if swap:  # compute the transposed product: the result then needs no permutation
        a, b, m, n = b, a, n, m
    if not m and not n and not a == b == "".join(batch + k):
        return None
    to_x, x_copies = _as_matrix(a, batch, m, k, size)
    to_y, y_copies = _as_matrix(b, batch, k, n, size)
    bs, ms, ns = (math.prod(size[c] for c in g) for g in (batch, m, n))
    product = (bs, ms, ns) if batch else (ms, ns)
    order = batch + m + n
    shape = tuple(size[c] for c in order)
    perm = [order.index(c) for c in out]
    return Gemm(pre, swap, to_x, to_y, product, None if shape == product else shape,
                None if perm == sorted(perm) else perm, (batch, m, n, k), x_copies or y_copies)


def _as_matrix(labels: str, lead: list[str], rows: list[str], cols: list[str],
               size: dict[str, int]) -> tuple[Callable[[Any], Any] | None, bool]:
    """An operand on ``labels`` as (``lead``, ``rows``, ``cols``) matrices, and whether that
    copies: ``None`` when it is one; a reshape (and a swap of the last two axes, which matmul
    takes as it is) when its labels come in order (or rows and columns swapped); else a
    permutation and a reshape, which copies."""
    bs, r, c = (math.prod(size[x] for x in g) for g in (lead, rows, cols))
    shape = (bs, r, c) if lead else (r, c)
    perm = [labels.index(x) for x in lead + rows + cols]
    sizes = [size[x] for x in labels]
    permutes = perm != sorted(perm)
    if not permutes and tuple(sizes) == shape:
        return None, False
    if permutes and labels == "".join(lead + cols + rows):
        swap = [*range(len(shape) - 2), len(shape) - 1, len(shape) - 2]
        return moves(swap, sizes, (*shape[:-2], c, r), permute_first=False), False
    return moves(perm, [sizes[p] for p in perm], shape), permutes


def matmul_plan(matmul: Callable[[Any, Any], Any], subscripts: str,
                 shapes: Sequence[tuple[int, ...]], promote: Promote | None = None
                 ) -> Callable[..., Any] | None:
    """``einsum(subscripts)`` at fixed shapes as reshapes around one ``matmul`` (one operand:
    a sum and a transpose), planned once: library einsums re-plan every call (~20 us for
    small problems).  ``None`` for a diagonal.  ``promote``: sum in the operands' dtype."""
    ins, out = subscripts.split("->")
    subs = ins.split(",")
    if any(len(set(s)) != len(s) for s in subs) or len(subs) > 2:
        return None
    if len(subs) == 1:
        return reduce_plan(subs[0], out, promote is not None) or (lambda x: x)
    g = gemm(subscripts, shapes, promote)
    if g is None:
        return _product_sum(subs[0], subs[1], out, promote)
    pre, swap, to_x, to_y, shape, perm = g.pre, g.swap, g.x, g.y, g.shape, g.perm
    if pre is None and not swap and to_x is None and shape is None and perm is None:
        # a plain (batched) matrix product, or one of a transposed matrix: each call counts
        return matmul if to_y is None else lambda x, y: matmul(x, to_y(y))

    def run(x: Any, y: Any) -> Any:
        if pre is not None:
            x, y = pre(x, y)
        if swap:
            x, y = y, x
        r = matmul(x if to_x is None else to_x(x), y if to_y is None else to_y(y))
        if shape is not None:
            r = r.reshape(shape)
        return r if perm is None else _permute(r, perm)

    return run


def _product_sum(a: str, b: str, out: str, promote: Promote | None
                 ) -> Callable[[Any, Any], Any]:
    """``einsum(a,b->out)`` with every label in both operands as a product and a sum: a matmul
    would copy non-leading batch axes away first (250-420 us in torch against 27)."""
    pre, a, b = _presummed(a, b, out, promote)
    perm = [b.index(c) for c in a]
    moves = perm != sorted(perm)
    reduce = reduce_plan(a, out, promote is not None) or (lambda v: v)

    def run(x: Any, y: Any) -> Any:
        if pre is not None:
            x, y = pre(x, y)
        return reduce(x * (_permute(y, perm) if moves else y))

    return run


def tensordot_plan(tensordot: Callable[..., Any], subscripts: str, promote: Promote
                   ) -> Callable[[Any, Any], Any] | None:
    """``einsum(a,b->out)`` as one ``tensordot`` and a transpose, one operand's own labels
    summed first; ``None`` for a diagonal or a batched label (``tensordot`` has neither)."""
    ins, out = subscripts.split("->")
    a, b = ins.split(",")
    if len(set(a)) != len(a) or len(set(b)) != len(b) or any(c in b and c in out for c in a):
        return None
    pre, a, b = _presummed(a, b, out, promote)
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


def _presummed(a: str, b: str, out: str, promote: Promote | None
               ) -> tuple[Callable[[Any, Any], tuple[Any, Any]] | None, str, str]:
    """One operand's own labels that the result drops, summed first: ``(x, y) -> (x, y)``
    (``None``: none) and the labels left; with ``promote``, in the promoted dtype."""
    keep_dtype = promote is not None
    pre_a, pre_b = (reduce_plan(s, "".join(c for c in s if c in out or c in other), keep_dtype)
                    for s, other in ((a, b), (b, a)))
    kept = ("".join(c for c in a if c in out or c in b),
            "".join(c for c in b if c in out or c in a))
    if pre_a is None and pre_b is None:
        return None, *kept

    def pre(x: Any, y: Any) -> tuple[Any, Any]:
        # two dtypes: numpy.einsum promotes first (a bool sum is then a count, not an or)
        dtype = promote((x, y)) if promote is not None and x.dtype != y.dtype else None
        return (x if pre_a is None else pre_a(x, dtype)), (y if pre_b is None else pre_b(y, dtype))

    return pre, *kept


def _permute(x: Any, perm: Sequence[int]) -> Any:
    """``x``'s axes in the order ``perm``, by torch's ``permute`` or NumPy's ``transpose``."""
    return x.permute(*perm) if hasattr(x, "permute") else x.transpose(perm)


def moves(perm: list[int], before: Sequence[int], after: Sequence[int],
          move: Callable[[Any, list[int]], Any] = _permute, permute_first: bool = True
          ) -> Callable[[Any], Any]:
    """``x -> move(x, perm).reshape(after)`` (``permute_first``) or ``x ->
    move(x.reshape(after), perm)`` (``before``: the sizes reshaped), without the steps that
    change nothing (each a call per run).  The one builder of permute-and-reshape plans."""
    permutes, reshapes, shape = perm != sorted(perm), list(before) != list(after), tuple(after)
    if permutes and reshapes:
        if permute_first:
            return lambda x: move(x, perm).reshape(shape)
        return lambda x: move(x.reshape(shape), perm)
    if permutes:
        return lambda x: move(x, perm)
    if reshapes:
        return lambda x: x.reshape(shape)
    return lambda x: x


def reduce_plan(sub: str, out: str, keep_dtype: bool = False) -> Callable[..., Any] | None:
    """``einsum(sub->out)`` without repeated labels: a sum, then a transpose (None: nothing).
    ``keep_dtype``: sum in the operand's (or the given) dtype as ``numpy.einsum`` does, where
    ``ndarray.sum`` widens to int64."""
    axes = tuple(i for i, c in enumerate(sub) if c not in out)
    kept = [c for c in sub if c in out]
    perm = [kept.index(c) for c in out]
    moves = perm != sorted(perm)
    if not axes and not moves:
        return None

    def run(x: Any, dtype: Any = None) -> Any:
        if axes:
            x = x.sum(axes, dtype=x.dtype if dtype is None else dtype) if keep_dtype else \
                x.sum(axes)
        return _permute(x, perm) if moves else x

    return run


#: reductions over at most this many cells run as a chain of elementwise maximums
SMALL_REDUCTION = 8


def small_amax(x: Any, axes: tuple[int, ...], maximum: Callable[[Any, Any], Any]) -> Any:
    """``amax`` over a few cells (a pooling window) as ``maximum`` of slices, or ``None``:
    library reductions over tiny axes loop per output cell (193 us for a 2x2 pool of 8K cells
    in torch, three ``maximum`` calls 50 us).  NaN propagates either way."""
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
    """The index of each cell :func:`small_amax` reads (None: too many, or too few elements)."""
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
