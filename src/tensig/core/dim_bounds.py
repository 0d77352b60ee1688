"""Deciding signs under "every size is a positive integer": a comparison is the sign of a
difference, read from the bounds :func:`bounds` proves.  Sound, not complete: an answer holds
for every positive assignment, ``None`` means "depends" (also past the work bounds
:data:`_MAX_COMBINATIONS`, :data:`_MAX_EXPANSION`).  It reads a canonical form and never builds
one, so it sits below :class:`~tensig.core.dims.Dim`.
"""

from __future__ import annotations

import itertools
from math import comb, prod

from tensig.core.dim_form import Atom, FloorDiv, Form, Mod, Monomial, Terms, mul_terms
from tensig.core.errors import ShapeError

__all__ = ["bounds", "sign_decide", "zero_decide"]

_setattr = object.__setattr__

_MAX_COMBINATIONS = 16
_MAX_EXPANSION = 20_000


def _atom_options(atom: Atom) -> list[tuple[int, int] | None]:
    """Ways to write ``atom`` as ``shift + sign*v`` with ``v >= 0``; ``[None]``: sign unknown."""
    if isinstance(atom, str):
        return [(1, 1)]
    k = atom.divisor
    if type(atom) is Mod:
        return [(0, 1), (k - 1, -1)]
    lo, hi = bounds(atom.numerator)
    options: list[tuple[int, int] | None] = [
        (b // k, sign) for b, sign in ((lo, 1), (hi, -1)) if b is not None]
    return options or [None]


def _bounds_with(terms: Terms, sub: dict[Atom, tuple[int, int] | None]) -> tuple[int | None, ...]:
    acc: dict[Monomial, int] = {}
    for m, c in terms:
        poly: dict[Monomial, int] = {(): c}
        for atom, power in m:
            s = sub[atom]  # None: the atom stays as it is (its sign unknown)
            factor = [(power, 1)] if s is None else [
                (j, comb(power, j) * s[0] ** (power - j) * s[1] ** j) for j in range(power + 1)]
            new: dict[Monomial, int] = {}
            for mono, cc in poly.items():
                for j, fc in factor:
                    if fc:
                        nm = (*mono, (atom, j)) if j else mono
                        new[nm] = new.get(nm, 0) + cc * fc
            poly = new
        for mono, cc in poly.items():
            acc[mono] = acc.get(mono, 0) + cc
    const = acc.pop((), 0)
    rest = [(mono, cc) for mono, cc in acc.items() if cc]
    if any(power % 2 and sub[atom] is None for mono, _ in rest for atom, power in mono):
        return None, None  # an odd power of an atom of unknown sign: no sign to read
    return (None if any(cc < 0 for _, cc in rest) else const,
            None if any(cc > 0 for _, cc in rest) else const)


def _without_quotients(terms: Terms) -> tuple[Terms, int]:
    """``(s*p, s)``: ``p`` times a positive ``s`` with every ``r // k`` written ``(r - r % k)/k``
    (``s`` clears the denominators), so a quotient is read together with its numerator
    (``T // 2 <= T``, ``2*(T // 2) + T % 2 == T``).  Numerators may hold quotients in turn."""
    scale = 1
    while True:
        powers: dict[FloorDiv, int] = {}
        for m, _ in terms:
            for atom, power in m:
                if type(atom) is FloorDiv:
                    powers[atom] = max(powers.get(atom, 0), power)
        if not powers:
            return terms, scale
        exact = {q: (*q.numerator._terms, (((Mod(q.numerator, q.divisor), 1),), -1))
                 for q in powers}  # k*(r // k) == r - r % k
        merged: dict[Monomial, int] = {}
        for m, c in terms:
            held = dict(m)
            c *= prod(q.divisor ** (n - held.get(q, 0)) for q, n in powers.items())
            term: Terms = ((tuple(f for f in m if type(f[0]) is not FloorDiv), c),)
            for q in powers:
                for _ in range(held.get(q, 0)):
                    term = tuple(mul_terms(term, exact[q]).items())
            for mono, cc in term:
                merged[mono] = merged.get(mono, 0) + cc
        terms = tuple((m, c) for m, c in merged.items() if c)
        scale *= prod(atom.divisor ** power for atom, power in powers.items())


def _combined(terms: Terms) -> tuple[int | None, int | None]:
    """The best bounds over the ways each atom may be written (:func:`_atom_options`)."""
    atoms: dict[Atom, list[tuple[int, int] | None]] = {}
    combinations = 1
    for m, _ in terms:
        for atom, _ in m:
            if atom not in atoms:
                options = _atom_options(atom)
                if combinations * len(options) > _MAX_COMBINATIONS:
                    options = options[:1]
                combinations *= len(options)
                atoms[atom] = options
    expansion = sum(prod(power + 1 for _, power in m) for m, _ in terms)  # terms, unmerged
    if combinations * expansion > _MAX_EXPANSION:
        return None, None  # too costly: undecided, always sound
    found = [_bounds_with(terms, dict(zip(atoms, combo, strict=True)))
             for combo in itertools.product(*atoms.values())]
    return (max((lo for lo, _ in found if lo is not None), default=None),
            min((hi for _, hi in found if hi is not None), default=None))


def bounds(p: Form) -> tuple[int | None, int | None]:
    """Proven ``(lower, upper)`` bounds of ``p`` over positive sizes; ``None`` where unknown.

    Each size ``x`` becomes ``1 + y``, a ``Mod(r, k)`` ``v`` or ``k - 1 - v``, a
    ``FloorDiv(r, k)`` ``lo(r)//k + v`` or ``hi(r)//k - v`` (``y, v >= 0``); if every
    nonconstant coefficient of the expansion is ``>= 0`` (``<= 0``) on nonnegative monomials,
    the constant term is a lower (upper) bound.  With quotients, those of ``s*p`` written
    through numerators (:func:`_without_quotients`) count too, divided by ``s``.
    """
    c = p._const
    if c is not None:
        return c, c
    try:
        return p._bnd
    except AttributeError:
        pass
    lo, hi = _combined(p._terms)
    try:
        terms, scale = _without_quotients(p._terms)
    except ShapeError:  # too large to expand: the quotients as atoms only
        scale = 1
    if scale > 1:  # p's bounds are s*p's divided by s, rounded inward (p is an integer)
        slo, shi = _combined(terms)
        if slo is not None:
            slo = -(-slo // scale)
            lo = slo if lo is None else max(lo, slo)
        if shi is not None:
            shi //= scale
            hi = shi if hi is None else min(hi, shi)
    _setattr(p, "_bnd", (lo, hi))
    return lo, hi


def sign_decide(d: Form, strict: bool) -> bool | None:
    """Whether ``d > 0`` (``strict``) or ``d >= 0`` for all positive sizes; ``None``: depends."""
    need = 1 if strict else 0
    lo, hi = bounds(d)
    if lo is not None and lo >= need:
        return True
    if hi is not None and hi < need:
        return False
    return None


def zero_decide(d: Form) -> bool | None:
    """Whether ``d == 0`` (``True``) or ``d != 0`` (``False``) for all positive sizes; ``None``:
    depends."""
    lo, hi = bounds(d)
    if (lo is not None and lo > 0) or (hi is not None and hi < 0):
        return False
    return True if lo == hi == 0 else None
