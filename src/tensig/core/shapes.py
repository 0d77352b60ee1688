"""Shapes with three rows: ``batch|input->output``.

Each row is a tuple of sizes (``int`` or :class:`~tensig.core.dims.Dim`), each with an optional
*basis* label (``rgb=3``) that inference propagates and refuses to fuse with another.  A plain
tuple or array shape is output axes only; memory order (:attr:`Shape.dims`) is batch, output,
input (OCANNL's).

>>> s = Shape.parse("2|3->rgb=4")
>>> s.batch, s.input, s.output, str(s)
((2,), (3,), (4,), '2|3->rgb=4')
>>> Shape.parse("B, T|->d").dims
(Dim('B'), Dim('T'), Dim('d'))
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from tensig.core.dim_form import int_or_none
from tensig.core.dim_syntax import split_items
from tensig.core.dims import Dim, parse_at
from tensig.core.errors import ShapeError, SpecSyntaxError
from tensig.core.lexical import join_rows
from tensig.core.notation import KINDS, Kind, Label, Placeholder, parse_shape_spec, row_spans

__all__ = ["MEMORY_ORDER", "Shape", "Size", "as_shape", "normalize_size"]

Size = int | Dim
#: the rows in the order an array holds their axes (OCANNL's): what :attr:`Shape.dims` reads
MEMORY_ORDER: tuple[Kind, ...] = ("batch", "output", "input")
_BASIS = re.compile(r"\s*(\w+)\s*=(?!=)\s*(.+)$")


def normalize_size(x: Any, *, where: str = "size") -> Size:
    """An ``int`` for every constant size (NumPy integers and constant ``Dim`` included).

    >>> normalize_size(Dim.parse("2 + 1")), normalize_size("T + 1")
    (3, Dim('T + 1'))
    """
    if isinstance(x, bool):
        raise TypeError(f"{where}: a size cannot be a bool")
    if isinstance(x, str):
        x = Dim.parse(x)
    if isinstance(x, Dim) and x.constant is None:
        return x
    value = int_or_none(x)  # a constant Dim too, through its __index__
    if value is None:
        raise TypeError(f"{where}: a size is an int or a tensig Dim, not {type(x).__name__}")
    if value < 0:
        raise ShapeError(f"{where}: a size cannot be negative ({value})")
    return int(value)


def _axis_at(text: str, start: int, end: int, where: str) -> tuple[Size, str | None]:
    """One axis ``text[start:end]`` (``3``, ``T + 1``, ``rgb=3``), errors placed in ``text``."""
    basis = None
    m = _BASIS.match(text, start, end)
    if m and m.group(1).isidentifier():
        basis, start = m.group(1), m.start(2)
    size = parse_at(text, start, end)
    try:
        return normalize_size(size, where=where), basis
    except ShapeError as e:
        raise SpecSyntaxError(text, start, e.reason, end=end) from None


def _axis(item: Any, where: str) -> tuple[Size, str | None]:
    """One axis from ``3``, ``Dim``, ``"B"``, ``"rgb=3"`` or a ``(basis, size)`` pair."""
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str | type(None)):
        return normalize_size(item[1], where=where), item[0]
    if isinstance(item, str):  # a size error stays a ShapeError, as for an int (not a caret)
        m = _BASIS.match(item)
        if m and m.group(1).isidentifier():
            return normalize_size(m.group(2), where=where), m.group(1)
        return normalize_size(item.strip(), where=where), None
    return normalize_size(item, where=where), None


class Shape:
    """An immutable three-row shape; sizes are ints or symbolic dims, bases optional.

    >>> Shape(batch=[8], input=[3], output=["rgb=3"])
    Shape('8|3->rgb=3')
    >>> Shape(output=(2, 3)) == Shape.parse("2, 3")
    True
    """

    __slots__ = ("_bases", "_hash", "_rows")
    _rows: tuple[tuple[Size, ...], ...]
    _bases: tuple[tuple[str | None, ...], ...]

    def __init__(self, batch: Iterable[Any] = (), input: Iterable[Any] = (),
                 output: Iterable[Any] = ()):
        self._fill({kind: [_axis(it, f"{kind} axis {i}") for i, it in enumerate(items)]
                    for kind, items in zip(KINDS, (batch, input, output), strict=True)})

    @classmethod
    def from_rows(cls, rows: Mapping[Kind, Iterable[tuple[Size, str | None]]]) -> Shape:
        """Build from ``{kind: [(size, basis), ...]}``."""
        self = cls.__new__(cls)
        self._fill(rows)
        return self

    def _fill(self, rows: Mapping[Kind, Iterable[tuple[Size, str | None]]]) -> None:
        axes = [tuple(rows.get(k, ())) for k in KINDS]
        self._rows = tuple(tuple(normalize_size(s) for s, _ in row) for row in axes)
        self._bases = tuple(tuple(b for _, b in row) for row in axes)
        self._hash = hash((self._rows, self._bases))

    # -- rows ------------------------------------------------------------------------------
    @property
    def batch(self) -> tuple[Size, ...]:
        return self._rows[0]

    @property
    def input(self) -> tuple[Size, ...]:
        return self._rows[1]

    @property
    def output(self) -> tuple[Size, ...]:
        return self._rows[2]

    def row(self, kind: Kind) -> tuple[Size, ...]:
        return self._rows[KINDS.index(kind)]

    def row_bases(self, kind: Kind) -> tuple[str | None, ...]:
        return self._bases[KINDS.index(kind)]

    def axes(self, kind: Kind) -> tuple[tuple[Size, str | None], ...]:
        """``(size, basis)`` pairs of one row."""
        i = KINDS.index(kind)
        return tuple(zip(self._rows[i], self._bases[i], strict=True))

    @property
    def dims(self) -> tuple[Size, ...]:
        """All sizes in memory order: batch, output, input."""
        return self.batch + self.output + self.input

    @property
    def int_dims(self) -> tuple[int, ...]:
        """``dims`` as Python ints, as compiled code uses them (a symbolic size raises)."""
        return tuple(int(d) for d in self.dims)

    @property
    def rank(self) -> int:
        return sum(len(r) for r in self._rows)

    @property
    def is_concrete(self) -> bool:
        return all(isinstance(s, int) for r in self._rows for s in r)

    def numel(self) -> Size:
        """The number of elements (symbolic when a size is)."""
        return normalize_size(math.prod(self.dims))

    @classmethod
    def labelled(cls, dims: Iterable[Any], axes: str) -> Shape:
        """An array's sizes ``dims`` (memory order) with rows and axis names in the notation
        (``"b, t | d"``: two batch axes and an output axis), each name its axis's basis (``_``:
        none; an omitted row: no axes).  One name per axis: a claim, never a pattern.

        >>> Shape.labelled((16, 8, 64), "b, t | d")
        Shape('b=16,t=8|d=64')
        >>> Shape.labelled((2, 3, 4), "b | _ -> c")     # memory order: batch, output, input
        Shape('b=2|4->c=3')
        """
        dims = tuple(normalize_size(d) for d in dims)
        spec = parse_shape_spec(axes)
        names: dict[Kind, list[str | None]] = {k: [] for k in KINDS}  # an omitted row: none
        seen: dict[str, Label] = {}
        for kind, row in spec.rows():
            if row.is_context_ellipsis:
                continue
            bad = row.var or next((a for a in row.axes
                                   if not isinstance(a, Label | Placeholder)), None)
            if bad is not None:
                raise SpecSyntaxError(axes, bad.span[0], "axis names are names or '_' (a row "
                                      "variable, index or convolution axis is no name)",
                                      end=bad.span[1])
            for a in row.axes:
                if isinstance(a, Label) and seen.setdefault(a.name, a) is not a:
                    raise SpecSyntaxError(axes, a.span[0], f"the name {a.name!r} is given to "
                                          "two axes: each name labels one axis", end=a.span[1])
            names[kind] = [a.name if isinstance(a, Label) else None for a in row.axes]
        written = sum(len(names[k]) for k in MEMORY_ORDER)
        if written != len(dims):
            raise ShapeError(f"axes {axes!r} name {written} axes, but the array has "
                             f"{len(dims)} (shape {dims})", shape=str(dims),
                             hint="write one name (or '_') per axis, rows as batch | output "
                                  "or batch | input -> output")
        sizes = iter(dims)
        return cls.from_rows({k: [(next(sizes), n) for n in names[k]] for k in MEMORY_ORDER})

    # -- text ------------------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> Shape:
        """Read ``"2,3|4->5"`` (omitted rows empty; without commas, whitespace separates axes
        unless an operator joins them: ``"B T+1 d"`` has three); bad text raises
        :class:`~tensig.SpecSyntaxError` with a caret; no item can cause unbounded work (the bounds
        of :mod:`tensig.core.dim_form`).

        >>> Shape.parse("3->2").input, Shape.parse("()").rank
        ((3,), 0)
        """
        if not isinstance(text, str):
            raise TypeError(f"a shape string is a str, not {type(text).__name__}")
        if text.strip() in ("", "()"):
            return cls()
        rows = {}
        for kind, (start, stop) in row_spans(text, 0, len(text), "a shape").items():
            rows[kind] = [_axis_at(text, s, e, f"{kind} axis {i}")
                          for i, (s, e) in enumerate(split_items(text, start, stop))]
        return cls.from_rows(rows)

    def __str__(self) -> str:
        if self.rank == 0:
            return "()"
        row = {k: ",".join(f"{b}={s}" if b else str(s) for s, b in self.axes(k)) for k in KINDS}
        return join_rows(row["batch"] or None, row["input"] or None, row["output"])

    def __repr__(self) -> str:
        return f"Shape({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Shape):
            return NotImplemented
        return self._rows == other._rows and self._bases == other._bases

    def __hash__(self) -> int:
        return self._hash


def as_shape(x: Any, *, where: str = "operand") -> Shape:
    """Coerce a ``Shape``, shape string, tuple/list of sizes or array to a :class:`Shape`:
    output axes only, unless the object has rows in a ``__tensig_shape__`` attribute.

    >>> as_shape((2, 3)), as_shape("4|5")
    (Shape('2,3'), Shape('4|5'))
    """
    if isinstance(x, Shape):
        return x
    if isinstance(x, str):
        return Shape.parse(x)
    tensig_shape = getattr(x, "__tensig_shape__", None)
    if tensig_shape is not None:
        return as_shape(tensig_shape, where=where)
    if isinstance(x, tuple | list):
        return Shape(output=x)
    shape = getattr(x, "shape", None)
    if shape is not None and not callable(shape):
        return Shape(output=tuple(shape))
    raise TypeError(
        f"{where}: expected a Shape, a shape string, a tuple of sizes or an array, "
        f"not {type(x).__name__}"
    )
