"""Projections (OCANNL's): how the loops of one operation index each axis of each tensor.

An operation iterates over a *product space* (its :class:`Iter` axes); each axis of each tensor
(operands, then the result, in memory order) is an :class:`AxisUse` with an :data:`Index`.
Inference makes them for einsum specs (:attr:`tensig.core.inference.Inferred.layout`),
:func:`logic_layout` for the graph's logics.  A gradient buffer has its tensor's shape, so
backward code reuses the forward projections, as OCANNL's ``%cd`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tensig.core.errors import ShapeError
from tensig.core.notation import Kind
from tensig.core.shapes import MEMORY_ORDER, Shape, Size

__all__ = ["AffineIndex", "AxisUse", "ConcatIndex", "FixedIndex", "Index", "Iter", "Layout",
           "MergeIndex", "logic_layout"]


@dataclass(frozen=True)
class Iter:
    """An iteration axis of the operation's product space."""

    id: int
    name: str | None
    size: Size


@dataclass(frozen=True)
class FixedIndex:
    """The axis is read (operand) or written (result) at one index only."""

    index: int


@dataclass(frozen=True)
class AffineIndex:
    """The axis is read at ``stride*over + dilation*kernel + offset`` (minus the left padding)."""

    stride: int
    over: Iter
    dilation: int
    kernel: Iter | None
    offset: int
    padded: bool


@dataclass(frozen=True)
class ConcatIndex:
    """The axis is the concatenation of ``parts``; an ``int`` part is that many skipped cells."""

    parts: tuple[Iter | int, ...]


@dataclass(frozen=True)
class MergeIndex:
    """The axis is ``parts`` merged row-major (``(h, e)``): cell ``i*|e| + j`` is ``(i, j)``,
    as ``reshape`` lays them out, so the lowering reads and writes it through a reshape."""

    parts: tuple[Iter, ...]


Index = Iter | FixedIndex | AffineIndex | ConcatIndex | MergeIndex


@dataclass(frozen=True)
class AxisUse:
    """One axis of one operand (or of the result), in memory order."""

    kind: Kind
    position: int
    size: Size
    basis: str | None
    index: Index


#: per operand, then the result: each axis's use, in memory order
Layout = tuple[tuple[AxisUse, ...], ...]
Labels = list[str | int]


def logic_layout(logic: str, result: Shape, operands: Sequence[Shape]) -> Layout:
    """The projections of a graph logic (``"."``, ``"@"``, ``"T"``) over solved shapes.

    >>> a, b = Shape(output=(2, 3)), Shape(output=(1, 3))
    >>> [u.index for u in logic_layout(".", a, [a, b])[1]]
    [FixedIndex(index=0), Iter(id=1, name='po1', size=3)]
    """
    shapes = [*operands, result]
    if logic == ".":
        rows = _pointwise(shapes)
    elif logic == "@":
        rows = _compose(result, list(operands))
    elif logic == "T":
        rows = _transpose(result, list(operands))
    else:
        raise ValueError(f"logic_layout takes the logics '.', '@' and 'T', not {logic!r}")
    iters: dict[str, Iter] = {}
    layout = []
    for shape, labels in zip(shapes, rows, strict=True):
        axes = [(kind, j, size, basis) for kind in MEMORY_ORDER
                for j, (size, basis) in enumerate(shape.axes(kind))]
        layout.append(tuple(
            AxisUse(kind, j, size, basis, FixedIndex(lab) if isinstance(lab, int)
                    else iters.setdefault(lab, Iter(len(iters), lab, size)))
            for (kind, j, size, basis), lab in zip(axes, labels, strict=True)))
    return tuple(layout)


def _ints(shape: Shape, kind: Kind) -> tuple[int, ...]:
    return tuple(int(d) for d in shape.row(kind))


def _row_labels(kind: str, shapes: Sequence[tuple[int, ...]], prefix: str) -> list[Labels]:
    """Right-aligned broadcasting of one row kind across ``shapes``: a label per axis, or 0
    for a size-1 axis that meets a wider one."""
    n = max((len(s) for s in shapes), default=0)
    sizes = [1] * n
    for s in shapes:
        for p, d in enumerate(s, n - len(s)):
            if d != 1:
                if sizes[p] not in (1, d):
                    raise ShapeError(f"pointwise {kind} axes do not broadcast: "
                                     f"{' vs '.join(map(str, shapes))}")
                sizes[p] = d
    return [[0 if d == 1 and sizes[p] != 1 else f"{prefix}{kind[0]}{p}"
             for p, d in enumerate(s, n - len(s))] for s in shapes]


def _pointwise(shapes: Sequence[Shape]) -> list[Labels]:
    per = [_row_labels(kind, [_ints(s, kind) for s in shapes], "p") for kind in MEMORY_ORDER]
    return [[label for row in rows for label in row] for rows in zip(*per, strict=True)]


def _compose(result: Shape, args: list[Shape]) -> list[Labels]:
    if len(args) not in (2, 3):
        raise ShapeError(f"logic '@' relates two arguments (a third is pointwise with the "
                         f"result), got {len(args)}")
    a, b = args[:2]
    if len(a.input) != len(b.output):
        raise ShapeError(f"compose: input row {a.input} does not match output row {b.output}")
    batch = _row_labels("batch", [_ints(s, "batch") for s in (a, b, result)], "p")
    # the contracted axes; a size-1 side is read at 0 (OCANNL's broadcast inequality)
    ka, kb = _row_labels("input", [_ints(a, "input"), _ints(b, "output")], "k")
    i: Labels = [f"i{j}" for j in range(len(b.input))]
    o: Labels = [f"o{j}" for j in range(len(a.output))]
    rows = [batch[0] + o + ka, batch[1] + kb + i, batch[2] + o + i]  # batch, output, input
    if len(args) == 3:  # the third argument reads the result's cells, broadcasting
        own, third = _pointwise([result, args[2]])
        rename = dict(zip(own, rows[2], strict=True))
        rows.insert(2, [x if isinstance(x, int) else rename[x] for x in third])
    return rows


def _transpose(result: Shape, args: list[Shape]) -> list[Labels]:
    (a,) = args
    batch = _row_labels("batch", [_ints(a, "batch"), _ints(result, "batch")], "p")
    i: Labels = [f"i{j}" for j in range(len(result.input))]
    o: Labels = [f"o{j}" for j in range(len(result.output))]
    return [batch[0] + i + o, batch[1] + o + i]  # memory order: batch, output, input
