"""Cell signatures in the notation's syntax: ``"n; n => "`` is a function of two n-vectors.

The text is read by :func:`tensig.parse`.  Only the output row of each shape is a cell: an
omitted row is the notation's context ellipsis, which here simply means "no batch or input
axes" (the frame is never written; it comes from the arguments).  Axes may be labels (sizes
shared across the signature), ``_`` (any size), integers (a fixed size -- unlike an einsum spec,
where an integer is an index) and named row variables ``..s..`` (any number of axes: a cell of
unknown rank, which takes the whole argument).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from tensig.core.dims import Dim
from tensig.core.errors import SpecSyntaxError
from tensig.core.notation import Fixed, Label, Placeholder, Row, ShapeSpec, parse
from tensig.core.shape_index import ShapeIndex, ShapeVar

__all__ = ["parse_cells"]


def _where(text: str, token: str) -> int:
    return max(text.find(token), 0)


def _cell(text: str, shape: ShapeSpec, fresh: Iterator[str]) -> ShapeIndex:
    for kind in ("batch", "input"):
        if not shape.row(kind).is_context_ellipsis:
            col = _where(text, "|" if kind == "batch" else "->")
            raise SpecSyntaxError(text, col, f"a cell signature has no {kind} row",
                                  hint="write each cell as plain axes, e.g. 'n; n => '")
    return _row(text, shape.output, fresh)


def _row(text: str, row: Row, fresh: Iterator[str]) -> ShapeIndex:
    items: list[Dim | ShapeVar] = [_axis(text, a, fresh) for a in row.left]
    if row.var is not None:
        if row.var.name is None:
            raise SpecSyntaxError(text, _where(text, "..."), "'...' has no meaning in a cell",
                                  hint="name the row variable (..s..) for a cell of any rank",
                                  end=_where(text, "...") + 3)
        items.append(ShapeVar(row.var.name))
    items += [_axis(text, a, fresh) for a in row.right]
    return ShapeIndex(items)


def _axis(text: str, axis: object, fresh: Iterator[str]) -> Dim:
    if isinstance(axis, Label):
        return Dim.symbol(axis.name)
    if isinstance(axis, Fixed):
        return Dim.const(axis.index)
    if isinstance(axis, Placeholder):
        return Dim.symbol(next(fresh))
    span = getattr(axis, "span", (0, 1))
    raise SpecSyntaxError(text, span[0], f"a cell signature takes labels, '_', sizes and ..s.., "
                          f"not {type(axis).__name__.lower()} axes", end=span[1])


def parse_cells(text: str) -> tuple[tuple[ShapeIndex, ...], ShapeIndex]:
    """Operand cells and the result cell of a cell signature, as shape indices.

    >>> ops, res = parse_cells("n; n => ")
    >>> ops, res
    ((ShapeIndex('[n]'), ShapeIndex('[n]')), ShapeIndex('[]'))
    >>> parse_cells("m, n; n => m, 2")[1]
    ShapeIndex('[m, 2]')
    """
    spec = parse(text)
    fresh = (f"_{k}" for k in itertools.count())
    return tuple(_cell(text, s, fresh) for s in spec.operands), _cell(text, spec.result, fresh)
