"""Remora's shape index: a flat sequence of dimensions and shape variables, ``[B, T + 1, ..s..]``.

The rank layer (:mod:`tensig.rank`) types arrays by shape indices: a frame is a prefix of a
shape index, a cell the rest.  Items are :class:`~tensig.core.dims.Dim` values and
:class:`ShapeVar` row variables (any number of axes); nested indices flatten.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from tensig.core.dim_form import Frozen, int_or_none
from tensig.core.dim_syntax import split_items
from tensig.core.dims import Dim, _const, dim, parse_at
from tensig.core.errors import InconclusiveError, SpecSyntaxError

__all__ = ["ShapeIndex", "ShapeVar"]

_new_object = object.__new__
_setattr = object.__setattr__


@dataclass(frozen=True, slots=True)
class ShapeVar:
    """A named shape (row) variable: any number of axes, printed ``..name..``.

    >>> ShapeVar("s"), str(ShapeVar("s")), ShapeVar("s") == ShapeVar("s")
    (ShapeVar('s'), '..s..', True)
    """

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"a shape variable name is a str, not {type(self.name).__name__}")

    def __str__(self) -> str:
        return f"..{self.name}.."

    def __repr__(self) -> str:
        return f"ShapeVar({self.name!r})"


_SHAPE_VAR = re.compile(r"\.\.([^\W\d]\w*)\.\.")
ShapeItem: TypeAlias = "Dim | ShapeVar"


def _flatten(items: Iterable[Any], out: list[ShapeItem]) -> None:
    for x in items:
        if isinstance(x, Dim | ShapeVar):
            out.append(x)
        elif isinstance(x, ShapeIndex):
            out.extend(x._items)
        elif isinstance(x, str):
            match = _SHAPE_VAR.fullmatch(x.strip())
            out.append(ShapeVar(match.group(1)) if match else dim(x))
        elif isinstance(x, tuple | list):
            _flatten(x, out)
        else:
            n = int_or_none(x)
            if n is None:
                raise TypeError(f"a shape item is an int, a Dim or a ShapeVar, not {x!r}")
            out.append(_const(n))


def _shape_index(items: tuple[ShapeItem, ...]) -> ShapeIndex:
    self = _new_object(ShapeIndex)
    _setattr(self, "_items", items)
    _setattr(self, "_hash", hash(items))
    _setattr(self, "_nvars", sum(1 for x in items if type(x) is ShapeVar))
    return self


class ShapeIndex(Frozen):
    """Remora's shape index: a flat, immutable sequence of dimensions and shape variables;
    nested indices, tuples and lists flatten (Remora's canonical ``++``), so equality is
    item-wise.

    >>> s = ShapeIndex([2, Dim("T + 1"), ShapeIndex([ShapeVar("s"), 3])])
    >>> s, s.rank, s + (4,)
    (ShapeIndex('[2, T + 1, ..s.., 3]'), None, ShapeIndex('[2, T + 1, ..s.., 3, 4]'))
    >>> ShapeIndex([3, 4, 5, 6]).prefix_minus([3, 4])
    ShapeIndex('[5, 6]')
    """

    __slots__ = ("_hash", "_items", "_nvars")
    _items: tuple[ShapeItem, ...]
    _hash: int
    _nvars: int

    def __new__(cls, items: Iterable[int | Dim | ShapeVar | ShapeIndex] | str = ()) -> ShapeIndex:
        if isinstance(items, str):
            return cls.parse(items)
        flat: list[ShapeItem] = []
        _flatten(items, flat)
        return _shape_index(tuple(flat))

    def __reduce__(self) -> tuple[Any, ...]:
        return (ShapeIndex, (list(self._items),))

    @classmethod
    def parse(cls, text: str) -> ShapeIndex:
        """Read ``"B, T + 1, ..s.."`` (optionally in brackets; spaces separate without commas).

        >>> ShapeIndex.parse("[B, T+1, ..s..]") == ShapeIndex.parse("B T+1 ..s..")
        True
        """
        start = len(text) - len(text.lstrip())
        end = max(start, len(text.rstrip()))
        if start < end and text[start] == "[":
            if text[end - 1] != "]":
                raise SpecSyntaxError(text, start, "unclosed '['", "add the missing ']'")
            start, end = start + 1, end - 1
        elif start < end and text[end - 1] == "]":
            raise SpecSyntaxError(text, end - 1, "unmatched ']'")
        items: list[ShapeItem] = []
        for s, e in split_items(text, start, end):
            match = _SHAPE_VAR.fullmatch(text, s, e)
            items.append(ShapeVar(match.group(1)) if match else parse_at(text, s, e))
        return _shape_index(tuple(items))

    @property
    def items(self) -> tuple[Dim | ShapeVar, ...]:
        """The items in order (dimensions and shape variables)."""
        return self._items

    def __iter__(self) -> Iterator[Dim | ShapeVar]:
        return iter(self._items)

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return _shape_index(self._items[i])
        return self._items[i]

    def __len__(self) -> int:
        if self._nvars:
            raise TypeError(f"the length of {self} depends on its shape variables")
        return len(self._items)

    def __bool__(self) -> bool:
        if not self._items:
            return False
        if self._nvars == len(self._items):
            raise InconclusiveError(f"cannot decide whether {self} is empty")
        return True

    @property
    def rank(self) -> int | None:
        """The number of axes, or ``None`` when shape variables make it unknown.

        >>> ShapeIndex.parse("B, 3").rank, ShapeIndex.parse("B, ..s..").rank
        (2, None)
        """
        return None if self._nvars else len(self._items)

    @property
    def dims(self) -> tuple[Dim, ...]:
        """The dimension items, in order (shape variables left out).

        >>> ShapeIndex.parse("B, ..s.., 3").dims
        (Dim('B'), Dim('3'))
        """
        return tuple(x for x in self._items if type(x) is Dim)

    @property
    def shape_vars(self) -> tuple[ShapeVar, ...]:
        """The shape variable items, in order.

        >>> ShapeIndex.parse("B, ..s.., ..t..").shape_vars
        (ShapeVar('s'), ShapeVar('t'))
        """
        return tuple(x for x in self._items if type(x) is ShapeVar)

    @property
    def is_concrete(self) -> bool:
        """Whether every item is a constant dimension (a NumPy-style shape).

        >>> ShapeIndex([3, 4]).is_concrete, ShapeIndex(["B"]).is_concrete
        (True, False)
        """
        return not self._nvars and all(isinstance(x, Dim) and x.is_constant for x in self._items)

    def as_tuple(self) -> tuple[int, ...]:
        """The concrete shape as ints (shape variables or symbolic sizes raise).

        >>> ShapeIndex([3, Dim("2*2")]).as_tuple()
        (3, 4)
        """
        if self._nvars:
            raise TypeError(f"{self} has shape variables, so it is not a concrete shape")
        return tuple(int(x) for x in self._items if isinstance(x, Dim))  # Dims only, as checked

    def product(self) -> Dim:
        """The number of elements (``1`` for the empty index); no shape variables allowed.

        >>> ShapeIndex.parse("B, T, 2").product(), ShapeIndex([]).product()
        (Dim('2*B*T'), Dim('1'))
        """
        if self._nvars:
            raise TypeError(f"the size of {self} depends on its shape variables")
        return math.prod(self.dims, start=_const(1))

    def subs(
        self,
        dim_map: Mapping[str, int | Dim],
        shape_map: Mapping[str, ShapeIndex | tuple[Any, ...] | list[Any]] | None = None,
    ) -> ShapeIndex:
        """Replace sizes (``dim_map``) and shape variables (``shape_map``, by name).

        >>> ShapeIndex.parse("B, ..s..").subs({"B": 2}, {"s": (Dim("T"), 3)})
        ShapeIndex('[2, T, 3]')
        """
        out: list[ShapeItem] = []
        for x in self._items:
            if isinstance(x, Dim):
                out.append(x.subs(dim_map))
            elif shape_map is not None and x.name in shape_map:
                _flatten((shape_map[x.name],), out)
            else:
                out.append(x)
        return _shape_index(tuple(out))

    def prefix_minus(self, other: ShapeIndex | Iterable[Any]) -> ShapeIndex | None:
        """Remora's partial prefix subtraction: ``a ∸ b = c`` iff ``b ++ c == a`` (``None``
        when ``b`` is not a prefix of ``a``).

        >>> ShapeIndex([3, 4, 5, 6]).prefix_minus(ShapeIndex([4])) is None
        True
        """
        items = ShapeIndex(other)._items
        if self._items[:len(items)] == items:
            return _shape_index(self._items[len(items):])
        return None

    def __add__(self, other: object) -> ShapeIndex:
        if isinstance(other, ShapeIndex | tuple | list):
            return _shape_index(self._items + ShapeIndex(other)._items)
        return NotImplemented

    def __radd__(self, other: object) -> ShapeIndex:
        if isinstance(other, tuple | list):
            return _shape_index(ShapeIndex(other)._items + self._items)
        return NotImplemented

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ShapeIndex):
            return self._hash == other._hash and self._items == other._items
        if isinstance(other, tuple | list):
            return self._items == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return "[" + ", ".join(str(x) for x in self._items) + "]"

    def __repr__(self) -> str:
        return f"ShapeIndex({str(self)!r})"
