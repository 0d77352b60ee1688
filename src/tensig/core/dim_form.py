"""The canonical form of a symbolic dimension: atoms, monomials, terms, and what is read off them.

A form is a sorted tuple of ``(monomial, coefficient)`` pairs with nonzero coefficients; a
monomial is a sorted tuple of ``(atom, power)`` pairs (the empty one is the constant term); an
atom is a size name (a ``str``), a :class:`FloorDiv` or a :class:`Mod`.  :class:`Form` is the
read-only face of a form; nothing here builds one, so sign decisions
(:mod:`tensig.core.dim_bounds`) and :class:`~tensig.core.dims.Dim` (the algebra) sit above it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from functools import total_ordering
from types import MappingProxyType
from typing import Any, ClassVar, TypeAlias

from tensig.core.errors import InconclusiveError, ShapeError

__all__ = [
    "MAX_BITS", "MAX_EXPONENT", "MAX_POWER", "MAX_TERMS", "Atom", "FloorDiv", "Form", "Frozen",
    "Mod", "Monomial", "Terms", "add_terms", "atom_sort_key", "check_bits", "eval_terms",
    "format_terms", "int_or_none", "mod_upper_bound", "mul_terms", "print_key", "too_large",
]

Atom: TypeAlias = "str | FloorDiv | Mod"
Monomial: TypeAlias = "tuple[tuple[Atom, int], ...]"
Terms: TypeAlias = "tuple[tuple[Monomial, int], ...]"

_setattr = object.__setattr__


class Frozen:
    """Refuses attribute writes: the base of the immutable, hashable values (sizes, atoms and
    shape indices), which build their slots with ``object.__setattr__``."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")


# Bounds on the work one expression can cause (sizes are small polynomials; these are far above
# any real shape and far below what takes a noticeable time): ``(T + 1)**3000`` or ``9**9**9``
# is a clear error, not minutes of expansion.
MAX_EXPONENT = 64  # a written or computed ``**`` exponent
MAX_POWER = 64  # the power of one size in a monomial (``T**64``)
MAX_TERMS = 256  # the terms of one polynomial after a product
MAX_BITS = 512  # the bit length of one coefficient


def too_large(what: str, limit: str) -> ShapeError:
    return ShapeError(f"dimension expression too large: {what} (the limit is {limit})",
                      hint="sizes are small polynomials; check the expression")


def check_bits(c: int) -> int:
    if c.bit_length() > MAX_BITS:
        raise too_large(f"a coefficient of {c.bit_length()} bits", f"{MAX_BITS} bits")
    return c


def int_or_none(x: object) -> int | None:
    """``x`` as an ``int`` when it is integer-like (``int``, NumPy integers), else ``None``."""
    if isinstance(x, int):
        return x
    index = getattr(type(x), "__index__", None)
    if index is None:
        return None
    try:
        return index(x)
    except TypeError:  # e.g. a NumPy array with more than one element
        return None


def _mono_mul(a: Monomial, b: Monomial) -> Monomial:
    if not a:
        return b
    if not b:
        return a
    d = dict(a)
    get = d.get
    for atom, p in b:
        power = d[atom] = get(atom, 0) + p
        if power > MAX_POWER:
            raise too_large(f"{atom}**{power}", f"a power of {MAX_POWER}")
    return tuple(sorted(d.items()))


def add_terms(a: Terms, b: Terms, sign: int = 1) -> dict[Monomial, int]:
    """``a + b`` (``sign=1``) or ``a - b`` (``sign=-1``), merged by monomial (zeros kept)."""
    d = dict(a)
    get = d.get
    for m, c in b:
        d[m] = get(m, 0) + sign * c
    return d


def mul_terms(a: Terms, b: Terms) -> dict[Monomial, int]:
    """``a * b`` expanded, merged by monomial (zeros kept), within the bounds above."""
    if len(a) * len(b) > MAX_TERMS * MAX_TERMS:
        raise too_large(f"a product of {len(a)} by {len(b)} terms", f"{MAX_TERMS} terms")
    d: dict[Monomial, int] = {}
    get = d.get
    for m1, c1 in a:
        for m2, c2 in b:
            m = _mono_mul(m1, m2)
            d[m] = get(m, 0) + check_bits(c1 * c2)
    if len(d) > MAX_TERMS:
        raise too_large(f"a product with {len(d)} terms", f"{MAX_TERMS} terms")
    return d


def mod_upper_bound(terms: Terms) -> int | None:
    """An upper bound of a polynomial with positive coefficients made only of ``Mod`` atoms."""
    total = 0
    for m, c in terms:
        bound = c
        for atom, p in m:
            if type(atom) is not Mod:
                return None
            bound *= (atom.divisor - 1) ** p
        total += bound
    return total


def eval_terms(terms: Terms, size: Callable[[Atom], Any]) -> Any:
    """The value of a form, ``size`` giving each atom's (``None``: its ``//`` or ``%`` taken of
    its numerator's value): int sizes give an int (:meth:`Form.evaluate`), ``Dim`` ones a
    ``Dim`` whose quotients are simplified again (:meth:`~tensig.core.dims.Dim.subs`)."""
    total: Any = 0
    for m, c in terms:
        value: Any = c
        for atom, p in m:
            x = size(atom)
            if x is None and not isinstance(atom, str):  # a name always has a size
                q, r = divmod(eval_terms(atom.numerator._terms, size), atom.divisor)
                x = q if type(atom) is FloorDiv else r
            value *= x if p == 1 else x**p
        total += value
    return total


def print_key(term: tuple[Monomial, int]) -> tuple[Any, ...]:
    m = term[0]
    return (-sum(p for _, p in m), tuple([(a, -p) for a, p in m]))


def _format_factor(atom: Atom, power: int, wrap: bool, name: Callable[[str], str]) -> str:
    if isinstance(atom, str):
        text = name(atom)
    else:
        text = atom.format(name)
        if wrap or power > 1:
            text = f"({text})"
    return text if power == 1 else f"{text}**{power}"


def format_terms(terms: Terms, name: Callable[[str], str] = str) -> str:
    """The text of a form, which is also Python source for its value: ``name`` gives each
    size's text (a size name itself, or code reading it: :func:`tensig.core.dimcode.emit`)."""
    if not terms:
        return "0"
    parts = []
    for i, (m, c) in enumerate(sorted(terms, key=print_key)):
        negative = c < 0
        size = -c if negative else c
        if not m:
            body = str(size)
        else:
            # a lone `x // k` needs no parentheses unless a factor or a leading `-` touches it
            bare = size == 1 and len(m) == 1 and not (negative and i == 0)
            body = "*".join(_format_factor(a, p, not bare, name) for a, p in m)
            if size != 1:
                body = f"{size}*{body}"
        sign = (" - " if negative else " + ") if i else ("-" if negative else "")
        parts.append(sign + body)
    return "".join(parts)


@total_ordering
class _DivAtom(Frozen):
    """Shared machinery of :class:`FloorDiv` and :class:`Mod` (an opaque integer atom)."""

    __slots__ = ("_hash", "_key", "divisor", "numerator")
    _rank: ClassVar[int] = 0
    _op: ClassVar[str] = ""
    numerator: Any  # a Dim (typed here as Any: tensig.core.dims, its class, sits above)
    divisor: int
    _key: tuple[int, Terms, int]
    _hash: int

    def __init__(self, numerator: Form, divisor: int):
        if not isinstance(numerator, Form):
            raise TypeError(f"the numerator must be a Dim, not {type(numerator).__name__}")
        divisor = operator.index(divisor)
        if divisor < 2:
            raise ValueError(f"the divisor must be an integer >= 2, got {divisor}")
        _setattr(self, "numerator", numerator)
        _setattr(self, "divisor", divisor)
        _setattr(self, "_key", (self._rank, numerator._terms, divisor))
        _setattr(self, "_hash", hash((self._op, numerator, divisor)))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.numerator, self.divisor))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self):
            return self._hash == other._hash and self._key == other._key
        return NotImplemented

    def __lt__(self, other: object) -> bool:
        """Atoms sit in tuples that Python sorts, so they compare with size names (first) too."""
        if isinstance(other, str):
            return False
        if isinstance(other, _DivAtom):
            return self._key < other._key
        return NotImplemented

    def format(self, name: Callable[[str], str] = str) -> str:
        """The text of the atom, sizes written by ``name`` (see :func:`format_terms`)."""
        num = format_terms(self.numerator._terms, name)
        if len(self.numerator._terms) > 1:
            num = f"({num})"
        return f"{num} {self._op} {self.divisor}"

    __str__ = format

    def __repr__(self) -> str:
        return f"{type(self).__name__}(Dim({str(self.numerator)!r}), {self.divisor})"


class FloorDiv(_DivAtom):
    """The atom ``numerator // divisor`` that canonical division could not remove (only
    :class:`Dim`'s ``//`` makes canonical ones: numerator coefficients in ``[0, divisor)``).

    >>> from tensig import Dim, dim
    >>> atom = FloorDiv(Dim("T + 1"), 2)
    >>> atom, str(atom)
    (FloorDiv(Dim('T + 1'), 2), '(T + 1) // 2')
    >>> (dim("T") + 1) // 2 == Dim("(T + 1) // 2")
    True
    """

    __slots__ = ()
    _rank: ClassVar[int] = 1
    _op: ClassVar[str] = "//"


class Mod(_DivAtom):
    """The atom ``numerator % divisor``, always in ``[0, divisor - 1]``.

    >>> from tensig import Dim, dim
    >>> str(Mod(Dim("T"), 2)), (dim("T") + 2) % 2
    ('T % 2', Dim('T % 2'))
    """

    __slots__ = ()
    _rank: ClassVar[int] = 2
    _op: ClassVar[str] = "%"


def atom_sort_key(atom: Atom) -> tuple[Any, ...]:
    """The sort key of an atom: names (by name) before ``FloorDiv`` before ``Mod``.

    >>> from tensig import Dim
    >>> sorted(["T", FloorDiv(Dim("B + 1"), 2), "B"], key=atom_sort_key)[:2]
    ['B', 'T']
    """
    if isinstance(atom, str):
        return (0, atom)
    return atom._key


class Form(Frozen):
    """The read-only face of a canonical form; :class:`~tensig.core.dims.Dim` adds the algebra."""

    __slots__ = ("_bnd", "_const", "_hash", "_str", "_syms", "_terms")
    _terms: Terms
    _const: int | None  # the value of a constant form, else None
    _hash: int
    _str: str  # the text, cached on first use
    _syms: frozenset[str]  # the size names, cached on first use
    _bnd: tuple[int | None, int | None]  # proven sign bounds (dim_bounds), cached on first use

    @property
    def is_constant(self) -> bool:
        """Whether the dimension is a plain number (no size names).

        >>> from tensig import Dim
        >>> Dim("2 + 1").is_constant, Dim("B - B + 1").is_constant, Dim("B").is_constant
        (True, True, False)
        """
        return self._const is not None

    @property
    def constant(self) -> int | None:
        """The value of a constant dimension, ``None`` for a symbolic one.

        >>> from tensig import Dim
        >>> Dim("3*2").constant, Dim("B").constant is None
        (6, True)
        """
        return self._const

    @property
    def symbols(self) -> frozenset[str]:
        """Every size name the dimension mentions, including inside ``//`` and ``%``.

        >>> from tensig import Dim
        >>> sorted(Dim("B*T + (d + 1) // 2").symbols)
        ['B', 'T', 'd']
        """
        try:
            return self._syms
        except AttributeError:
            pass
        names: set[str] = set()
        for m, _ in self._terms:
            for atom, _ in m:
                if isinstance(atom, str):
                    names.add(atom)
                else:
                    names |= atom.numerator.symbols
        result = frozenset(names)
        _setattr(self, "_syms", result)
        return result

    @property
    def terms(self) -> Mapping[Monomial, int]:
        """A read-only view of the canonical form: monomial -> nonzero coefficient.

        >>> from tensig import Dim
        >>> dict(Dim("2*B*T - 1").terms)
        {(): -1, (('B', 1), ('T', 1)): 2}
        """
        return MappingProxyType(dict(self._terms))

    @property
    def degree(self) -> int:
        """The total degree (``//`` and ``%`` atoms count as degree 1; ``0`` for constants).

        >>> from tensig import Dim
        >>> Dim("B**2*T + T").degree, Dim("7").degree
        (3, 0)
        """
        return max((sum(p for _, p in m) for m, _ in self._terms), default=0)

    @property
    def is_linear(self) -> bool:
        """Degree at most 1 and no ``//`` / ``%`` atoms: what simple solving handles.

        >>> from tensig import Dim
        >>> Dim("2*B + T - 1").is_linear, Dim("B*T").is_linear, Dim("B // 2").is_linear
        (True, False, False)
        """
        return all(not m or (len(m) == 1 and m[0][1] == 1 and isinstance(m[0][0], str))
                   for m, _ in self._terms)

    def free_of(self, name: str) -> bool:
        """Whether the size ``name`` does not occur (not even inside ``//`` or ``%``).

        >>> from tensig import Dim
        >>> Dim("B + T // 2").free_of("T"), Dim("B + T // 2").free_of("d")
        (False, True)
        """
        return name not in self.symbols

    def evaluate(self, mapping: Mapping[str, int]) -> int:
        """The integer value for concrete sizes; a :class:`ValueError` names missing ones.

        >>> from tensig import Dim
        >>> Dim("(T - 3) // 2 + 1").evaluate({"T": 9})
        4
        """
        c = self._const
        if c is not None:
            return c  # fast: constants are most of what is evaluated
        names = self.symbols
        missing = sorted(n for n in names if n not in mapping)
        if missing:
            raise ValueError(f"cannot evaluate {self}: no size given for {', '.join(missing)}")
        env: dict[Atom, int] = {n: operator.index(mapping[n]) for n in names}
        return eval_terms(self._terms, env.get)  # only names are keys: every other atom divides

    def __int__(self) -> int:
        c = self._const
        if c is None:
            raise InconclusiveError(f"{self} is not a constant: its value depends on the sizes")
        return c

    __index__ = __int__

    def __str__(self) -> str:
        try:
            return self._str
        except AttributeError:
            pass
        text = format_terms(self._terms)
        _setattr(self, "_str", text)
        return text

    def __repr__(self) -> str:
        return f"Dim({str(self)!r})"
