"""What the notation's parser (:mod:`tensig.core.notation`) produces, in rows
``batch|input->output`` (:data:`KINDS`) with source spans kept for carets (never compared):

- a :class:`Spec` (``parse("ij;jk=>ik")``): :class:`ShapeSpec` rows of axes (:class:`Label`,
  :class:`Placeholder`, :class:`Fixed`, :class:`Affine`, :class:`Concat`, :class:`Merge`) and
  at most one :class:`RowVar` each;
- an :class:`AnnotationShape` (``parse_annotation("B T d")``): rows of items (a
  :class:`~tensig.core.dims.Dim`, an ``int``, ``typing.Any``, a :class:`RowVariable`, a
  :class:`Broadcastable` or a :class:`Deferred`).

All are frozen dataclasses whose ``str()`` parses back equal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from tensig.core.dims import Dim
from tensig.core.lexical import Kind, Span, join_rows

__all__ = ["KINDS", "Affine", "AnnotationShape", "Axis", "Broadcastable", "Concat", "Deferred",
           "Fixed", "Item", "Kind", "Label", "Merge", "Placeholder", "Row", "RowVar", "RowVariable",
           "ShapeSpec", "Span", "Spec", "axis_labels", "is_multichar"]

KINDS: tuple[Kind, ...] = ("batch", "input", "output")

_MULTICHAR_TRIGGER = re.compile(r"[,*+^<&]|=(?!>)")


def is_multichar(text: str) -> bool:
    """The mode rule: does ``text`` select the multichar mode?

    >>> is_multichar("ij;jk=>ik"), is_multichar("i, j => j"), is_multichar("o=+k => o")
    (False, True, True)
    """
    return _MULTICHAR_TRIGGER.search(text) is not None


# -- specs: the generalized einsum notation --------------------------------------------------------


@dataclass(frozen=True)
class Label:
    """A dimension variable: every occurrence of the name in a spec has the same size."""

    name: str
    span: Span = field(default=(0, 0), compare=False, repr=False)

    def render(self, multichar: bool) -> str:
        return self.name


@dataclass(frozen=True)
class Placeholder:
    """``_``: an axis that is there but unnamed; two placeholders are unrelated."""

    span: Span = field(default=(0, 0), compare=False, repr=False)

    def render(self, multichar: bool) -> str:
        return "_"


@dataclass(frozen=True)
class Fixed:
    """An integer index: slices an operand at ``index``, places into the result at ``index``."""

    index: int
    span: Span = field(default=(0, 0), compare=False, repr=False)

    def render(self, multichar: bool) -> str:
        return str(self.index)


Coef = int | str  # an integer, or an identifier resolved from ``params=``


@dataclass(frozen=True)
class Affine:
    """An input axis indexed by ``stride*over + dilation*kernel`` (convolution, pooling), or
    ``stride*over + offset`` when ``kernel is None``.  ``padding``: ``"padded"`` (``=+``),
    ``"valid"`` (``<+``), or ``None`` for a plain ``+`` (padding from ``use_padding=``)."""

    stride: Coef
    over: str
    dilation: Coef = 1
    kernel: str | None = None
    offset: int = 0
    padding: Literal["padded", "valid"] | None = None
    span: Span = field(default=(0, 0), compare=False, repr=False)

    def render(self, multichar: bool) -> str:
        out = self.over if self.stride == 1 else f"{self.stride}*{self.over}"
        if self.kernel is None:
            return out if self.offset == 0 else f"{out}+{self.offset}"
        op = {"padded": "=+", "valid": "<+", None: "+"}[self.padding]
        ker = self.kernel if self.dilation == 1 else f"{self.dilation}*{self.kernel}"
        return f"{out}{op}{ker}"


@dataclass(frozen=True)
class Concat:
    """``a^b^c``: one axis iterating over each component in turn; a component is a label name
    (``str``) or an integer size (``int``, skipped elements)."""

    parts: tuple[str | int, ...]
    span: Span = field(default=(0, 0), compare=False, repr=False)

    def render(self, multichar: bool) -> str:
        return "^".join(str(p) for p in self.parts)


@dataclass(frozen=True)
class Merge:
    """``(h, e)``: one axis holding the parts' axes merged row-major, as ``reshape`` lays them
    out (einops' ``(h e)``): ``b|(h, e) => b|h, e`` splits an axis, ``b|h, e => b|(h, e)``
    merges two.  A part is a label or a size (einops' anonymous ``(h 2)``: an axis no other
    shares, reduced where only an operand has it and repeated where only the result does)."""

    parts: tuple[str | int, ...]
    span: Span = field(default=(0, 0), compare=False, repr=False)

    def render(self, multichar: bool) -> str:
        return "(" + (", " if multichar else "").join(map(str, self.parts)) + ")"


Axis = Label | Placeholder | Fixed | Affine | Concat | Merge


@dataclass(frozen=True)
class RowVar:
    """A row variable. ``name is None`` is the reserved ``...`` of the row's kind."""

    name: str | None
    span: Span = field(default=(0, 0), compare=False, repr=False)

    def render(self) -> str:
        return "..." if self.name is None else f"..{self.name}.."


@dataclass(frozen=True)
class Row:
    """One row: ``left`` axes anchored at its start, an optional row variable, ``right`` axes
    anchored at its end; without a variable the row is exactly ``right`` (``left`` empty)."""

    left: tuple[Axis, ...] = ()
    var: RowVar | None = None
    right: tuple[Axis, ...] = ()

    @property
    def axes(self) -> tuple[Axis, ...]:
        return self.left + self.right

    @property
    def is_context_ellipsis(self) -> bool:
        """True for a row that is exactly ``...`` (what an omitted row means)."""
        return not self.left and not self.right and self.var is not None and self.var.name is None

    def render(self, multichar: bool) -> str:
        items = [a.render(multichar) for a in self.left]
        if self.var is not None:
            items.append(self.var.render())
        items += [a.render(multichar) for a in self.right]
        return ", ".join(items) if multichar else "".join(items)


_ELLIPSIS_ROW = Row(var=RowVar(None))


@dataclass(frozen=True)
class ShapeSpec:
    """The three rows of one operand or of the result."""

    batch: Row = _ELLIPSIS_ROW
    input: Row = _ELLIPSIS_ROW
    output: Row = _ELLIPSIS_ROW

    def row(self, kind: Kind) -> Row:
        return getattr(self, kind)

    def rows(self) -> tuple[tuple[Kind, Row], ...]:
        return (("batch", self.batch), ("input", self.input), ("output", self.output))

    def render(self, multichar: bool) -> str:
        batch, inp = (None if r.is_context_ellipsis else r.render(multichar)
                      for r in (self.batch, self.input))
        return join_rows(batch, inp, self.output.render(multichar))

    def __str__(self) -> str:
        return self.render(_needs_multichar((self,)))


@dataclass(frozen=True)
class Spec:
    """A parsed spec: operand and result shape specs (equal whatever the text's layout)."""

    operands: tuple[ShapeSpec, ...]
    result: ShapeSpec
    text: str = field(default="", compare=False, repr=False)

    @property
    def multichar(self) -> bool:
        """Whether the canonical form needs the multichar mode."""
        return _needs_multichar((*self.operands, self.result))

    def shapes(self) -> tuple[ShapeSpec, ...]:
        return (*self.operands, self.result)

    @property
    def labels(self) -> frozenset[str]:
        """Every dimension label (including affine and concat components)."""
        return frozenset(n for a in _axes(self.shapes()) for n in axis_labels(a))

    @property
    def row_vars(self) -> frozenset[str]:
        """Every named row variable (``..v..``); the reserved ``...`` are not listed."""
        return frozenset(row.var.name for shape in self.shapes() for _, row in shape.rows()
                         if row.var is not None and row.var.name is not None)

    @property
    def params(self) -> frozenset[str]:
        """Identifiers used as strides or dilations (resolved from ``params=``)."""
        return frozenset(c for a in _axes(self.shapes()) if isinstance(a, Affine)
                         for c in (a.stride, a.dilation) if isinstance(c, str))

    def __str__(self) -> str:
        multichar = self.multichar
        ops = "; ".join(s.render(multichar) for s in self.operands)
        text = f"{ops} => {self.result.render(multichar)}".rstrip()
        if multichar and not is_multichar(text):
            text += ","  # a trailing comma selects the multichar mode, as in "b => a,"
        return text


def _axes(shapes: tuple[ShapeSpec, ...]) -> Iterator[Axis]:
    return (a for shape in shapes for _, row in shape.rows() for a in row.axes)


def axis_labels(a: Axis) -> tuple[str, ...]:
    """The labels one axis names: an affine axis's iterator and kernel, a concatenation's or a
    merge's named parts."""
    if isinstance(a, Label):
        return (a.name,)
    if isinstance(a, Affine):
        return (a.over,) if a.kernel is None else (a.over, a.kernel)
    if isinstance(a, Concat | Merge):
        return tuple(p for p in a.parts if isinstance(p, str))
    return ()


def _needs_multichar(shapes: tuple[ShapeSpec, ...]) -> bool:
    return any(isinstance(a, Affine | Concat)
               or (isinstance(a, Label) and len(a.name) != 1)
               or (isinstance(a, Merge) and any(len(str(p)) != 1 for p in a.parts))
               or (isinstance(a, Fixed) and a.index > 9) for a in _axes(shapes))


# -- annotations: jaxtyping-style shapes read as types ---------------------------------------------


@dataclass(frozen=True)
class RowVariable:
    """A row variable: any number of axes, the same wherever its :attr:`key` recurs.  ``None``
    is jaxtyping's anonymous ``...``/``*_`` (binds nothing); ``broadcast`` (``*#v``) binds the
    broadcast of every occurrence.

    >>> RowVariable(None, "batch").key, RowVariable("v", "output").key, str(RowVariable(None))
    ('...batch', 'v', '...')
    """

    name: str | None
    kind: Kind = "output"
    broadcast: bool = False

    @property
    def key(self) -> str:
        """The binding key: the name, or ``...`` plus the row kind for the anonymous one."""
        return self.name if self.name is not None else f"...{self.kind}"

    def __str__(self) -> str:
        if self.name is None:
            return "..."
        return f"*#{self.name}" if self.broadcast else f"..{self.name}.."


@dataclass(frozen=True)
class Broadcastable:
    """jaxtyping's ``#`` axis: ``item`` (a name, a size or an expression), or size 1, which
    binds nothing (``#n`` binds ``n`` only from a size other than 1)."""

    item: Any

    def __str__(self) -> str:
        return f"#{_render_item(self.item)}"


@dataclass(frozen=True)
class Deferred:
    """A size known only per call, as jaxtyping's f-string axes: ``{n}``/``{self.size}`` (the
    call's arguments) or an expression Dim cannot hold (``min(a, b)``); ``symbols`` are the
    size names it reads outside braces (not in the repr: a set's order follows the hash seed)."""

    text: str
    symbols: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def __str__(self) -> str:
        return self.text


Item = Any
"""One axis of an annotation: a :class:`~tensig.core.dims.Dim` (a name or an expression with at
least one name), an ``int`` (a fixed size), ``typing.Any`` (``_``: any size), a
:class:`RowVariable` (any number of axes), a :class:`Broadcastable` or a :class:`Deferred`."""


def _render_item(item: Item) -> str:
    return "_" if item is Any else str(item)


def _plain(item: Item) -> Item:
    """The item under a ``#``."""
    return item.item if isinstance(item, Broadcastable) else item


@dataclass(frozen=True)
class AnnotationShape:
    """A parsed annotation: three rows of items (``batch|input->output``; ``"B T d"`` and
    ``"B, T, d"`` are equal), with ``spans`` (per row, per item) into ``text`` for carets.

    >>> from tensig.core.notation import parse_annotation
    >>> a = parse_annotation("B|T+1, ..v..->2*h")
    >>> a.batch, a.input, a.output
    ((Dim('B'),), (Dim('T + 1'), RowVariable(name='v', kind='input', broadcast=False)), (Dim('2*h'),))
    >>> str(a), a.names, a.rank
    ('B|T + 1, ..v..->2*h', ('B', 'T', 'h'), None)
    >>> [str(i) for i in a.items]  # memory order: batch, output, input
    ['B', '2*h', 'T + 1', '..v..']
    """  # noqa: E501

    batch: tuple[Item, ...] = ()
    input: tuple[Item, ...] = ()
    output: tuple[Item, ...] = ()
    text: str = field(default="", compare=False)
    spans: tuple[tuple[Span, ...], ...] = field(default=((), (), ()), compare=False,
                                               repr=False)

    def row(self, kind: Kind) -> tuple[Item, ...]:
        return getattr(self, kind)

    def rows(self) -> tuple[tuple[Kind, tuple[Item, ...]], ...]:
        return (("batch", self.batch), ("input", self.input), ("output", self.output))

    @property
    def items(self) -> tuple[Item, ...]:
        """All items in memory order (batch, output, input): how a plain array's axes match."""
        return self.batch + self.output + self.input

    @property
    def item_spans(self) -> tuple[Span, ...]:
        """The source span of each of :attr:`items`."""
        b, i, o = self.spans
        return b + o + i

    @property
    def names(self) -> tuple[str, ...]:
        """Every size name, in the order it first appears in the text."""
        seen: list[str] = []
        for row, spans in zip((self.batch, self.input, self.output), self.spans, strict=True):
            for i, item in enumerate(map(_plain, row)):
                if isinstance(item, Dim) and i < len(spans):  # in written order, then sorted
                    written = re.finditer(r"[^\W\d]\w*", self.text[slice(*spans[i])])
                    seen += [m.group() for m in written if m.group() in item.symbols]
                if isinstance(item, Dim | Deferred):
                    seen += sorted(item.symbols)
        return tuple(dict.fromkeys(seen))

    @property
    def row_variables(self) -> tuple[RowVariable, ...]:
        """The row variables, in written order."""
        return tuple(x for _, row in self.rows() for x in row if isinstance(x, RowVariable))

    @property
    def rank(self) -> int | None:
        """The number of axes, or ``None`` when a row variable makes it open."""
        return None if self.row_variables else len(self.items)

    @property
    def min_rank(self) -> int:
        """The number of axes that are not row variables."""
        return sum(1 for x in self.items if not isinstance(x, RowVariable))

    @property
    def constants(self) -> frozenset[int]:
        """Every integer the annotation mentions (fixed sizes, coefficients, offsets, divisors).

        >>> from tensig.core.notation import parse_annotation
        >>> sorted(parse_annotation("3, 2*h + 5, (T + 1) // 4").constants)
        [1, 2, 3, 4, 5]
        """
        out: set[int] = set()
        for item in map(_plain, self.items):
            if isinstance(item, int):
                out.add(item)
            elif isinstance(item, Dim):
                _collect_constants(item, out)
        return frozenset(out)

    def __str__(self) -> str:
        batch, inp, out = (", ".join(map(_render_item, row)) for row in
                           (self.batch, self.input, self.output))
        return join_rows(batch if self.batch else None, inp if self.input else None, out)


def _collect_constants(item: Dim, out: set[int]) -> None:
    for monomial, coefficient in item.terms.items():
        if coefficient != 1 or not monomial:  # the implicit 1 of a plain name is no constant
            out.add(abs(coefficient))
        for atom, _ in monomial:
            if not isinstance(atom, str):
                out.add(atom.divisor)
                _collect_constants(atom.numerator, out)


def _is_name(d: Dim) -> bool:
    """Whether ``d`` is a bare size name (``T``), not an expression (``T + 1``, ``2*h``)."""
    return len(d.symbols) == 1 and d == Dim.symbol(next(iter(d.symbols)))
