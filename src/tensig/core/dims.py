"""Symbolic array dimensions: integer polynomials in named sizes, in one canonical form.

A :class:`Dim` is an integer polynomial over named sizes (``B``, ``T``, ...) that may also
contain exact floor-division and modulo terms (``(T + 1) // 2``, ``T % 2``).  Its canonical form
(:mod:`tensig.core.dim_form`) expands sums and products fully, so two dimensions are equal
exactly when their forms are the same tuple: ``==`` and ``hash`` never solve an algebra problem.

>>> B, T = dims("B T")
>>> B * (T + 1) == B*T + B
True
>>> (B + T) ** 2
Dim('B**2 + 2*B*T + T**2')

Floor division by a positive integer ``k`` splits every coefficient ``c`` into
``k*(c // k) + c % k``: the multiples of ``k`` leave the division, and only the remainder
polynomial (coefficients in ``[0, k)``) stays inside an opaque :class:`FloorDiv` / :class:`Mod`
atom.  That keeps Python's floor semantics exactly and makes equal quotients print alike:

>>> (2*B + 4) // 2, (2*B + 1) // 2, (2*B + 1) % 2
(Dim('B + 2'), Dim('B'), Dim('1'))
>>> (T - 3) // 2
Dim('(T + 1) // 2 - 2')

Comparisons ``< <= > >=`` assume **every size name denotes a positive integer**; a decided
answer is right for every positive assignment (:mod:`tensig.core.dim_bounds`), and what depends
on the sizes raises :class:`~tensig.InconclusiveError` rather than guess:

>>> B*T >= B
True
>>> B < T
Traceback (most recent call last):
...
tensig.InconclusiveError: cannot decide B < T: it depends on the sizes

:class:`Condition` is a side condition a solver attaches to an answer (``(T + 1) % 2 == 0``).
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tensig.core.dim_bounds import bounds, sign_decide, zero_decide
from tensig.core.dim_form import (
    MAX_BITS,
    MAX_EXPONENT,
    Atom,
    FloorDiv,
    Form,
    Mod,
    Monomial,
    Terms,
    add_terms,
    atom_sort_key,
    check_bits,
    eval_terms,
    int_or_none,
    mod_upper_bound,
    mul_terms,
    print_key,
    too_large,
)
from tensig.core.dim_syntax import Parser, split_items
from tensig.core.errors import InconclusiveError, SpecSyntaxError

__all__ = ["Condition", "Dim", "FloorDiv", "Mod", "atom_sort_key", "dim", "dims"]

_new_object = object.__new__
_setattr = object.__setattr__


def _make(terms: Terms) -> Dim:
    """Wrap an already canonical (sorted, nonzero) terms tuple; also the unpickler."""
    self = _new_object(Dim)
    if not terms:
        const: int | None = 0
    elif len(terms) == 1 and not terms[0][0]:
        const = terms[0][1]
    else:
        const = None
    _set_terms(self, terms)
    _set_const(self, const)
    _set_hash(self, hash(terms) if const is None else hash(const))
    return self


def _from_dict(d: dict[Monomial, int]) -> Dim:
    items = [item for item in d.items() if item[1]]
    items.sort()  # monomials are unique, so coefficients are never compared
    return _make(tuple(items))


def _const(n: int) -> Dim:
    cached = _CONSTS.get(n)  # the small constants, 0 among them
    return _make((((), n),)) if cached is None else cached


def _atom_dim(atom: Atom) -> Dim:
    return _make(((((atom, 1),), 1),))


def _add_const(p: Dim, n: int) -> Dim:
    if not n:
        return p
    c = p._const
    if c is not None:
        return _const(c + n)
    terms = p._terms
    if not terms[0][0]:
        c = terms[0][1] + n
        return _make((((), c), *terms[1:]) if c else terms[1:])
    return _make((((), n), *terms))


def _scale(p: Dim, n: int) -> Dim:
    if n == 1:
        return p
    if not n:
        return _ZERO
    c = p._const
    if c is not None:
        return _const(check_bits(c * n))  # a cached small constant, without building one
    return _make(tuple([(m, check_bits(c * n)) for m, c in p._terms]))


@functools.lru_cache(maxsize=8192)
def _divmod(p: Dim, k: int) -> tuple[Dim, Dim]:
    """``(p // k, p % k)`` in canonical form, for an ``int`` ``k >= 1`` (see the module doc)."""
    q: list[tuple[Monomial, int]] = []
    r: list[tuple[Monomial, int]] = []
    for m, c in p._terms:
        qc, rc = divmod(c, k)
        if qc:
            q.append((m, qc))
        if rc:
            r.append((m, rc))
    quotient = _make(tuple(q))
    rest = _make(tuple(r))
    bound = mod_upper_bound(rest._terms)
    if bound is not None and bound < k:  # 0 <= rest < k (a constant rest too): nothing to divide
        return quotient, rest
    if len(r) == 1 and r[0][1] == 1 and len(r[0][0]) == 1 and r[0][0][0][1] == 1:
        inner = r[0][0][0][0]
        if type(inner) is FloorDiv:  # (x // a) // k == x // (a*k)
            return (quotient + _divmod(inner.numerator, inner.divisor * k)[0],
                    _atom_dim(Mod(rest, k)))
        if type(inner) is Mod and inner.divisor % k == 0:  # (x % (j*k)) % k == x % k
            return quotient + _atom_dim(FloorDiv(rest, k)), _divmod(inner.numerator, k)[1]
    return quotient + _atom_dim(FloorDiv(rest, k)), _atom_dim(Mod(rest, k))


def _int_operand(x: object, symbolic: str, self: Dim) -> int | None:
    """``x`` as an ``int`` (``None``: not integer-like); a symbolic ``Dim`` raises ``TypeError``."""
    if isinstance(x, Dim):
        if x._const is None:
            raise TypeError(symbolic.format(self, x))
        return x._const
    return int_or_none(x)


def _reflected(op: Callable[[Dim, Dim], Dim]) -> Callable[[Dim, object], Dim]:
    """``other op dim`` for an integer-like ``other``: the constant dimension on the left."""
    def method(self: Dim, other: object) -> Dim:
        n = int_or_none(other)
        return NotImplemented if n is None else op(_const(n), self)

    return method


def _compare(a: Dim, other: object, op: str) -> bool:
    b = other if isinstance(other, Dim) else int_or_none(other)
    if b is None:
        return NotImplemented
    d = b - a if op in ("<", "<=") else a - b
    decided = sign_decide(d, strict=len(op) == 1)
    if decided is None:
        raise InconclusiveError(f"cannot decide {a} {op} {b}: it depends on the sizes")
    return decided


def _binary(with_const: Callable[[Dim, int], Dim], with_terms: Callable[[Terms, Terms], Any]
            ) -> Callable[[Dim, object], Dim]:
    """``+`` or ``*`` (either side): a constant operand takes the cheap ``with_const`` path."""
    def method(self: Dim, other: object) -> Dim:
        if isinstance(other, Dim):
            if other._const is not None:
                return with_const(self, other._const)
            if self._const is not None:
                return with_const(other, self._const)
            return _from_dict(with_terms(self._terms, other._terms))
        n = int_or_none(other)
        return NotImplemented if n is None else with_const(self, n)

    return method


def _division(part: int) -> Callable[[Dim, object], Dim]:
    """``//`` (``part=0``) or ``%`` (``1``): that part of ``divmod``."""
    def method(self: Dim, other: object) -> Dim:
        both = self.__divmod__(other)
        return both if both is NotImplemented else both[part]

    return method


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> Dim:
    return Parser(text, Dim).parse()


def parse_at(text: str, start: int, end: int) -> Dim:
    """Parse ``text[start:end]``, reporting errors at their columns in the whole ``text``."""
    try:
        return _parse(text[start:end])
    except SpecSyntaxError as e:
        raise SpecSyntaxError(text, e.column + start, e.reason, e.hint, e.end + start) from None


class Dim(Form):
    """A symbolic dimension: an immutable, hashable integer polynomial in canonical form.

    >>> B, T = Dim("B"), Dim("T")
    >>> B + T + 5 + B == (B + B) + 5 + T
    True
    >>> 2*B*T + 1, B - 1, 3 - B, Dim(0)
    (Dim('2*B*T + 1'), Dim('B - 1'), Dim('-B + 3'), Dim('0'))
    """

    __slots__ = ()  # the form's slots (dim_form.Form) are all a Dim holds
    __array_ufunc__ = None  # NumPy scalars defer to our reflected operators

    def __new__(cls, value: str | int | Dim = 0) -> Dim:
        return dim(value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_make, (self._terms,))

    def __copy__(self) -> Dim:
        return self

    def __deepcopy__(self, memo: object) -> Dim:
        return self

    # -- constructors -----------------------------------------------------------------------
    @classmethod
    def symbol(cls, name: str) -> Dim:
        """The size named ``name``; unvalidated so solvers can use internal names like ``$12``.

        >>> Dim.symbol("B"), Dim.symbol("$12") + 1
        (Dim('B'), Dim('$12 + 1'))
        """
        if not isinstance(name, str):
            raise TypeError(f"a size name is a str, not {type(name).__name__}")
        return _atom_dim(name)

    @classmethod
    def atom(cls, atom: Atom) -> Dim:
        """One atom of a canonical term (a name, :class:`FloorDiv` or :class:`Mod`) as a
        dimension: for rebuilding a monomial of :attr:`terms` factor by factor.

        >>> ((monomial, _),) = Dim("3*B*(T // 2)").terms.items()
        >>> [Dim.atom(a) for a, _ in monomial]
        [Dim('B'), Dim('T // 2')]
        """
        return _atom_dim(atom)

    @classmethod
    def const(cls, n: int) -> Dim:
        """The constant dimension ``n`` (equal to, and hashing like, the ``int``).

        >>> Dim.const(3) == 3, hash(Dim.const(3)) == hash(3)
        (True, True)
        """
        if type(n) is not int:
            value = n._const if isinstance(n, Dim) else int_or_none(n)
            if value is None:
                raise TypeError(f"a constant dimension is an int, not {n!r}")
            n = value
        return _const(n)

    @classmethod
    def parse(cls, text: str) -> Dim:
        """Read a dimension expression: ints, names, ``+ - * // % **``, parentheses, with
        Python's precedence; bad text raises :class:`~tensig.SpecSyntaxError` with a caret.

        >>> Dim.parse("2*(T - 1) // 2 + B**2")
        Dim('B**2 + T - 1')
        >>> Dim.parse("T / 2")
        Traceback (most recent call last):
        ...
        tensig.SpecSyntaxError: unexpected character '/' in a dimension (column 3)
            T / 2
              ^
        hint: floor division is written //
        """
        if not isinstance(text, str):
            raise TypeError(f"Dim.parse reads a str, not {type(text).__name__}")
        return _parse(text)

    # -- solving ------------------------------------------------------------------------------
    def coefficient(self, name: str) -> Dim:
        """``c`` in ``self == c*name + rest`` with ``c`` and ``rest`` free of ``name``;
        :class:`ValueError` when ``name`` occurs nonlinearly (a power, inside ``//`` or ``%``).

        >>> Dim("2*B*T + 3*T + B").coefficient("T"), Dim("B").coefficient("T")
        (Dim('2*B + 3'), Dim('0'))
        """
        d: dict[Monomial, int] = {}
        for m, c in self._terms:
            rest = []
            found = False
            for atom, p in m:
                if atom == name:
                    if p != 1:
                        raise ValueError(f"{name} occurs nonlinearly (as {name}**{p}) in {self}")
                    found = True
                else:
                    if not isinstance(atom, str) and name in atom.numerator.symbols:
                        raise ValueError(f"{name} occurs inside {atom} in {self}")
                    rest.append((atom, p))
            if found:
                d[tuple(rest)] = c
        return _from_dict(d)

    def subs(self, mapping: Mapping[str, int | Dim]) -> Dim:
        """Replace sizes by ints or dims; ``//`` and ``%`` atoms are simplified again.

        >>> Dim("(T + 1) // 2 + B").subs({"T": 5}), Dim("B*T").subs({"T": Dim("B + 1")})
        (Dim('B + 3'), Dim('B**2 + B'))
        """
        if self._const is not None or not mapping:
            return self  # fast: nothing to replace
        names = self.symbols
        values = {k: dim(v) for k, v in mapping.items() if k in names}
        if not values:
            return self

        def size(atom: Atom) -> Dim | None:  # None: a quotient to take again, of its new numerator
            if isinstance(atom, str):
                return values[atom] if atom in values else _atom_dim(atom)
            return _atom_dim(atom) if atom.numerator.symbols.isdisjoint(values) else None

        return eval_terms(self._terms, size)

    def solve_for(self, name: str) -> tuple[Dim, tuple[Condition, ...]]:
        """Solve ``self == 0`` for ``name`` (linear, with a constant factor): ``(solution,
        conditions)``, the floor quotient and the divisibility it needs when it is not exact.

        >>> sol, conds = Dim("T - 2*(o - 1) - 1 - (3 - 1)*1").solve_for("o")
        >>> sol == Dim("(T - 3) // 2 + 1"), [str(c) for c in conds]
        (True, ['(T + 1) % 2 == 0'])
        >>> Dim("2*o - 2*B").solve_for("o")
        (Dim('B'), ())
        """
        coeff = self.coefficient(name)
        c = coeff._const
        if c is None:
            raise ValueError(f"cannot solve {self} == 0 for {name}: its factor {coeff} is symbolic")
        if not c:
            raise ValueError(f"cannot solve {self} == 0 for {name}: {name} does not occur")
        numerator = _scale(self, -1) + _atom_dim(name) * c  # -rest
        if c < 0:
            c, numerator = -c, -numerator
        quotient, remainder = _divmod(numerator, c)
        return quotient, () if remainder._const == 0 else (Condition.divisible(numerator, c),)

    def __bool__(self) -> bool:
        zero = zero_decide(self)
        if zero is None:
            raise InconclusiveError(f"cannot decide whether {self} is zero: it depends on the "
                                    "sizes")
        return not zero

    def __hash__(self) -> int:  # beside ``__eq__``, else Python would drop it
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Dim):
            return self is other or (self._hash == other._hash and self._terms == other._terms)
        if isinstance(other, int):
            return self._const == other
        n = int_or_none(other)
        if n is None:
            return NotImplemented
        return self._const == n

    __lt__ = functools.partialmethod(_compare, op="<")
    __le__ = functools.partialmethod(_compare, op="<=")
    __gt__ = functools.partialmethod(_compare, op=">")
    __ge__ = functools.partialmethod(_compare, op=">=")

    __add__ = __radd__ = _binary(_add_const, add_terms)

    def __sub__(self, other: object) -> Dim:
        if isinstance(other, Dim) and other._const is None:
            return _from_dict(add_terms(self._terms, other._terms, -1))
        n = other._const if isinstance(other, Dim) else int_or_none(other)
        return NotImplemented if n is None else _add_const(self, -n)

    __rsub__ = _reflected(operator.sub)
    __mul__ = __rmul__ = _binary(_scale, mul_terms)

    def __neg__(self) -> Dim:
        return _scale(self, -1)

    def __pos__(self) -> Dim:
        return self

    def __abs__(self) -> Dim:
        """The dimension itself when provably ``>= 0``, its negation when provably ``<= 0``."""
        lo, hi = bounds(self)
        if lo is not None and lo >= 0:
            return self
        if hi is not None and hi <= 0:
            return _scale(self, -1)
        raise InconclusiveError(f"cannot decide the sign of {self}: it depends on the sizes")

    def __pow__(self, exponent: object, modulo: None = None) -> Dim:
        if modulo is not None:
            return NotImplemented
        e = _int_operand(exponent, "an exponent must be a constant, not {1}", self)
        if e is None:
            return NotImplemented
        if e < 0:
            raise ValueError(f"an exponent must be nonnegative, got {e}")
        if e > MAX_EXPONENT:
            raise too_large(f"an exponent of {e}", f"an exponent of {MAX_EXPONENT}")
        c = self._const
        if c is not None:
            if (abs(c).bit_length() - 1) * e > MAX_BITS:
                raise too_large(f"a {abs(c).bit_length()}-bit constant to the power {e}",
                                 f"{MAX_BITS} bits")
            return _const(check_bits(c**e))
        result, base = _ONE, self
        while e:  # by squaring: fewer products than e - 1 multiplications
            if e & 1:
                result = result * base
            e >>= 1
            if e:
                base = base * base
        return result

    __rpow__ = _reflected(operator.pow)

    def __divmod__(self, other: object) -> tuple[Dim, Dim]:
        k = _int_operand(other, "cannot divide {0} by {1}: the divisor must be a constant", self)
        if k is None:
            return NotImplemented
        if k <= 0:
            raise ValueError(f"cannot divide {self} by {k}: the divisor must be positive")
        return _divmod(self, k)

    __floordiv__, __mod__ = _division(0), _division(1)
    __rfloordiv__ = _reflected(operator.floordiv)
    __rmod__ = _reflected(operator.mod)

    def __truediv__(self, other: object) -> Dim:
        if isinstance(other, Dim | int):
            raise TypeError(f"cannot divide {self} by {other} with /: sizes use // and %")
        return NotImplemented

    def __rtruediv__(self, other: object) -> Dim:
        if isinstance(other, int):
            raise TypeError(f"cannot divide {other} by {self} with /: sizes use // and %")
        return NotImplemented


# Slot descriptors: faster than object.__setattr__ for the constructor above.
_set_terms = vars(Form)["_terms"].__set__
_set_const = vars(Form)["_const"].__set__
_set_hash = vars(Form)["_hash"].__set__
_CONSTS: dict[int, Dim] = {n: _make((((), n),) if n else ()) for n in range(-8, 65)}
_ZERO, _ONE = _CONSTS[0], _CONSTS[1]


def dim(x: str | int | Dim) -> Dim:
    """Coerce a name, an expression, an ``int`` or a :class:`Dim` to a :class:`Dim`.

    >>> dim("B"), dim("T + 1"), dim(3), dim(dim("B")) == dim("B")
    (Dim('B'), Dim('T + 1'), Dim('3'), True)
    """
    if isinstance(x, Dim):
        return x
    if isinstance(x, str):
        return _atom_dim(x) if x.isidentifier() else _parse(x)
    n = int_or_none(x)
    if n is None:
        raise TypeError(f"a dimension is a str, an int or a Dim, not {type(x).__name__}")
    return _const(n)


def dims(text: str) -> tuple[Dim, ...]:
    """Several dimensions at once: ``dims("B T d")`` or ``dims("T + 1, B")`` (items split as
    :func:`~tensig.core.dim_syntax.split_items` does, each read by :meth:`Dim.parse`).

    >>> dims("B T d")
    (Dim('B'), Dim('T'), Dim('d'))
    >>> dims("T + 1, 2*B")
    (Dim('T + 1'), Dim('2*B'))
    """
    return tuple(parse_at(text, s, e) for s, e in split_items(text, 0, len(text)))


@dataclass(frozen=True, slots=True)
class Condition:
    """A fact that holds only for some sizes (``(T + 1) % 2 == 0``, ``T >= 3``), returned by a
    solver beside the answers that need it.  Stored canonically, so equivalent ones are equal:
    ``divisible`` reduces coefficients modulo ``k``; ``at_least`` and ``equal`` keep one
    difference ``expr`` (``expr >= 0`` / ``expr == 0``).

    >>> c = Condition.divisible(Dim("T - 3"), 2)
    >>> str(c), c.holds({"T": 9}), c.decide() is None
    ('(T + 1) % 2 == 0', True, True)
    >>> str(Condition.at_least(Dim("T"), 3)), Condition.equal(Dim("B"), Dim("T"))
    ('T >= 3', Condition.equal(Dim('B - T'), 0))
    """

    kind: Literal["divisible", "at_least", "equal"]
    expr: Dim  # an int is read as a constant Dim
    modulus: int = 0

    def __post_init__(self) -> None:
        kind, expr, modulus = self.kind, dim(self.expr), self.modulus
        if kind == "divisible":
            modulus = operator.index(modulus)
            if modulus < 1:
                raise ValueError(f"a divisor must be positive, got {modulus}")
            # coefficients modulo k: the same divisibility, one form per condition
            expr = _make(tuple([(m, c % modulus) for m, c in expr._terms if c % modulus]))
        elif kind in ("at_least", "equal"):
            modulus = 0
            if kind == "equal" and expr._terms:
                first = min(expr._terms, key=print_key)
                if first[1] < 0:
                    expr = _scale(expr, -1)
        else:
            raise ValueError(f"unknown condition kind {kind!r}")
        _setattr(self, "expr", expr)
        _setattr(self, "modulus", modulus)

    @classmethod
    def divisible(cls, p: Dim | int, k: int) -> Condition:
        """``p % k == 0``: a size must split evenly (strides, reshapes, solved divisions).

        >>> Condition.divisible(Dim("2*B"), 2).decide(), Condition.divisible(Dim("2*B + 1"), 2)
        (True, Condition.divisible(Dim('1'), 2))
        """
        return cls("divisible", dim(p), k)

    @classmethod
    def at_least(cls, p: Dim | int, bound: Dim | int) -> Condition:
        """``p >= bound``: e.g. a window must fit inside its input.

        >>> Condition.at_least(Dim("T + 1"), 1).decide(), str(Condition.at_least("T", "B + 2"))
        (True, 'T >= B + 2')
        """
        return cls("at_least", dim(p) - dim(bound))

    @classmethod
    def equal(cls, a: Dim | int, b: Dim | int) -> Condition:
        """``a == b``: two sizes the solver could not unify symbolically.

        >>> str(Condition.equal(Dim("T"), Dim("B"))), Condition.equal(2, 3).decide()
        ('B == T', False)
        """
        return cls("equal", dim(a) - dim(b))

    def holds(self, mapping: Mapping[str, int]) -> bool:
        """Whether the condition holds for these concrete sizes.

        >>> Condition.at_least(Dim("T"), 3).holds({"T": 2})
        False
        """
        value = self.expr.evaluate(mapping)
        if self.kind == "divisible":
            return value % self.modulus == 0
        if self.kind == "at_least":
            return value >= 0
        return value == 0

    def decide(self) -> bool | None:
        """``True``/``False`` when it holds for all / no positive sizes; ``None``: it depends.

        >>> Condition.at_least(Dim("B*T"), Dim("B")).decide(), Condition.equal("B", "T").decide()
        (True, None)
        """
        if self.kind == "divisible":
            return zero_decide(_divmod(self.expr, self.modulus)[1])
        if self.kind == "at_least":
            return sign_decide(self.expr, strict=False)
        return zero_decide(self.expr)

    def subs(self, mapping: Mapping[str, int | Dim]) -> Condition:
        """The condition with sizes replaced (see :meth:`Dim.subs`).

        >>> str(Condition.at_least(Dim("T"), Dim("B")).subs({"B": 3}))
        'T >= 3'
        """
        return Condition(self.kind, self.expr.subs(mapping), self.modulus)

    def _sides(self) -> tuple[Dim, Dim]:
        """Split ``expr`` into ``lhs - rhs`` with positive terms on the left, for printing."""
        expr = self.expr
        pos = {m: c for m, c in expr._terms if m and c > 0}
        neg = {m: -c for m, c in expr._terms if m and c < 0}
        const = dict(expr._terms).get((), 0)
        if pos:
            return _from_dict(pos), _add_const(_from_dict(neg), -const)
        return _const(const), _from_dict(neg)

    def __str__(self) -> str:
        if self.kind == "divisible":
            num = str(self.expr)
            if len(self.expr._terms) > 1:
                num = f"({num})"
            return f"{num} % {self.modulus} == 0"
        lhs, rhs = self._sides()
        return f"{lhs} {'>=' if self.kind == 'at_least' else '=='} {rhs}"

    def __repr__(self) -> str:
        return f"Condition.{self.kind}({self.expr!r}, {self.modulus})"  # at_least/equal: 0


def exact_quotient(total: Dim, known: Dim) -> Dim | None:
    """``total / known`` where it divides exactly as polynomials (``N*oh*ow*C / (N*oh*ow)`` of
    sums ``oh = (H - K) // 2 + 1``), else None."""
    quotient, rest = divide(total, known)
    return quotient if rest.constant == 0 else None


def divide(total: Dim, known: Dim) -> tuple[Dim, Dim]:
    """``(q, r)`` with ``total == q*known + r``: polynomial long division (graded lexicographic)
    whose ``r`` keeps the terms ``known``'s lead does not divide, so ``total // known`` is ``q +
    r // known`` (``(T + S) // S`` is ``T // S + 1``)."""
    atoms = sorted({a for d in (total, known) for m in d.terms for a, _ in m}, key=repr)

    def order(m: Any) -> tuple[int, tuple[int, ...]]:  # graded lexicographic
        powers = dict(m)
        exps = tuple(powers.get(a, 0) for a in atoms)
        return sum(exps), exps

    lead = max(known.terms, key=order)
    quotient, rest, kept = Dim.const(0), total, Dim.const(0)
    for _ in range(4 * len(total.terms) + 4):
        if rest.constant == 0:
            break
        top = max(rest.terms, key=order)
        powers = dict(top)
        coeff, remainder = divmod(rest.terms[top], known.terms[lead])
        whole = not remainder and all(powers.get(a, 0) >= p for a, p in lead)
        term = math.prod((Dim.atom(a) ** (q - whole * dict(lead).get(a, 0))
                          for a, q in powers.items()),
                         start=Dim.const(coeff if whole else rest.terms[top]))
        if whole:
            quotient, rest = quotient + term, rest - term * known
        else:  # a term no lead divides: the ones after it still may (T + S over S)
            kept, rest = kept + term, rest - term
    return quotient, rest + kept


def divisions(d: Dim) -> set[tuple[Dim, int]]:
    """The ``(numerator, divisor)`` of every ``//`` and ``%`` in ``d``, nested ones too."""
    out: set[tuple[Dim, int]] = set()
    for m in d.terms:
        for atom, _ in m:
            if not isinstance(atom, str):
                out |= {(atom.numerator, atom.divisor), *divisions(atom.numerator)}
    return out


def period(d: Dim) -> int:
    """A modulus of the sizes that keeps every remainder in ``d`` (nested ones too): a
    division's divisor times its numerator's :func:`grain`."""
    return math.lcm(1, *(k * grain(p) for p, k in divisions(d)))


def grain(q: Dim) -> int:
    """What a quotient in ``q`` multiplies the sizes' modulus by: ``T // 2 + 1`` steps by 1
    where ``T`` steps by 2, so ``(T // 2 + 1) // 3`` keeps its remainder modulo 6, not 3; a
    remainder (``H % 7``) is constant there and adds nothing."""
    return math.lcm(1, *(a.divisor * grain(a.numerator) for m in q.terms for a, _ in m
                         if isinstance(a, FloorDiv)))
