"""The solver's last step, :func:`settle`: a search over what propagation leaves.

A :class:`~tensig.core.solver.LinearRel` is solved by propagation only for a name that occurs
linearly with a constant factor.  A use of one unknown that grows with it (``T**2``,
``T//2 + 1``) has few whole solutions for one size, found here by search, as has any other that
is a polynomial on each residue class of its name (``T*T - 2*T`` goes down and up, ``T//2 -
T//3`` is a line on each class modulo 6) unless it repeats (``b % 2``, constant on each class,
tried against the name's other solutions); those of every use of the name are
intersected, a single one is bound (so propagation checks the other uses against it), none is
a mismatch, several are left undecided.  Uses that no binding decides must still agree
(``h*w`` of size 6 makes ``2*h*w`` 12).  Only concrete sizes are searched: a relation with a
symbolic size is left as it is.  Each failure is worded by the relation's ``report``.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import NamedTuple, NoReturn

from tensig.core.dim_bounds import bounds
from tensig.core.dims import Dim, Mod, period
from tensig.core.solver import DimVar, LinearRel, Solver

__all__ = ["settle"]

_MAX_DEGREE = 8  # a polynomial use of higher degree is left undecided
_LISTED = 4096  # the most solutions a mismatch evaluates a use at (a period is at most this)
_CLASSES = 256  # the most residue classes a use is solved on (a substitution each, cached)


class _Use(NamedTuple):
    """A pending relation on concrete sizes: its size, its form with the known sizes put in
    (``known``), and an unknown of it (the one, where it has one)."""

    rel: LinearRel
    size: int
    form: Dim
    known: dict[str, int]
    name: str

    def at(self, t: int) -> int:
        """The use's value where its one unknown is ``t``."""
        return self.rel.evaluate({**self.known, self.name: t})


_Run = tuple[Sequence[int], _Use | None]  # a name's solutions so far, and the use that cut them


def settle(solver: Solver) -> None:
    """After :meth:`Solver.run`: bind each name of one-unknown uses that the search decides,
    propagate, again until nothing more is bound; then compare the undecided uses."""
    rels = [c for c in solver.constraints if isinstance(c, LinearRel) and not c.done]
    uses = _uses(rels)
    while uses and _bind_one_name(solver, uses):
        solver.run()
        uses = _uses(rels)
    _compare_undecided(solver, uses)


def _uses(rels: list[LinearRel]) -> list[_Use]:
    """The relations not yet done whose size and known names are ``int`` and whose unknowns
    are all the relation's own."""
    out = []
    for rel in rels:
        size = rel.target.root().value
        if rel.done or not isinstance(size, int):
            continue
        known = rel.known()
        ints = {n: v for n, v in known.items() if isinstance(v, int)}
        if len(ints) == len(known):
            form = rel.expr.subs(ints)
            if form.symbols and form.symbols <= rel.names.keys():
                out.append(_Use(rel, size, form, ints, next(iter(form.symbols))))
    return out


def _bind_one_name(solver: Solver, uses: list[_Use]) -> bool:
    """One round over the uses of one unknown: a growing or polynomial use gives the name a
    few solutions, cut by those of its other uses (:func:`_narrow`), then by its periodic
    ones (:func:`_cut`); a single one left is bound.  ``True`` when some name was bound."""
    runs: dict[DimVar, _Run] = {}
    periodic: dict[DimVar, list[tuple[_Use, int]]] = {}
    for use in uses:
        if len(use.form.symbols) != 1:
            continue
        var, classes = use.rel.names[use.name].root(), None
        if all(isinstance(a, Mod) for m in use.form.terms for a, _ in m):  # b % 2: constant
            if (cycle := period(use.form)) <= _LISTED:  # on each class, evaluated by _cut
                periodic.setdefault(var, []).append((use, cycle))
            continue
        if not _grows(use.form, False) and (classes := _classes(use.form, use.name)) is None:
            continue  # a class past _MAX_DEGREE, or more of them than _CLASSES
        found = _growing_roots(use.at, use.size) if classes is None else \
            _class_roots(classes, use.size)
        if found is not None:
            runs[var] = _narrow(solver, runs.get(var), found, use)
    for var, cyclic in periodic.items():
        runs[var] = _cut(solver, runs.get(var, (range(sys.maxsize), None)), cyclic)
    bound = False
    for var, (solutions, by) in runs.items():
        if len(solutions) == 1 and by is not None:
            solver.set_value(var, solutions[0], by.rel.origin, "search")
            bound = True
    return bound


def _narrow(solver: Solver, before: _Run | None, found: Sequence[int], use: _Use) -> _Run:
    """``found``, the solutions of ``use``, cut by those of the name's uses before (``before``:
    they and the use that last cut them): none left is a mismatch."""
    if before is None:
        if not found:
            use.rel.fail(solver, "no_solution", name=use.name, value=None, target=use.size)
        return found, use
    run, by = before
    assert by is not None
    if isinstance(run, range) and isinstance(found, range):
        both: Sequence[int] = range(max(found.start, run.start), min(found.stop, run.stop))
    else:  # a few polynomial roots: each tested for membership in the other (a range's is O(1))
        few, many = (found, run) if isinstance(run, range) else (run, found)
        both = [t for t in few if t in many]
    if not both:
        _apart(solver, use, by, run)
    return (run, by) if len(both) == len(run) else (both, use)


def _cut(solver: Solver, before: _Run, uses: list[tuple[_Use, int]]) -> _Run:
    """The solutions ``before`` (a run, and the use that cut it) that every periodic use
    (``b % 2``) holds at too, tried over one period of them all (all of a polynomial's few
    roots, which need not span one): none is a mismatch, one where all were tried is bound."""
    run, by = before
    cycle = math.lcm(*(period for _, period in uses))
    if cycle > _LISTED and isinstance(run, range) and len(run) > _LISTED:
        return before  # b % 4093 beside b % 4091: 16.7 M sizes to try; left unchecked
    whole = len(run) <= cycle or not isinstance(run, range)
    ts: Sequence[int] = run if whole else run[:cycle]
    for use, _ in uses:
        hits = [t for t in ts if use.at(t) == use.size]
        if not hits:
            if by is None:
                use.rel.fail(solver, "no_solution", name=use.name, value=None, target=use.size)
            _apart(solver, use, by, ts)
        ts, by = hits, by or use
    return (ts, uses[0][0]) if whole and len(ts) == 1 else before


def _apart(solver: Solver, use: _Use, by: _Use, ts: Sequence[int]) -> NoReturn:
    """``use`` holds at none of ``ts``, the solutions of the name's uses up to ``by``: its
    values there are named (a few listed, else their range)."""
    few = len(ts) <= _LISTED
    if few:
        values = sorted({use.at(t) for t in ts})
    else:  # a long run: the use is monotone between its turns, so its extremes are at their ends
        coefficients = _coefficients(use.form)
        pieces = [(ts[0], ts[-1])] if coefficients is None else \
            _pieces(coefficients, ts[0], ts[-1])
        ends = [use.at(t) for piece in pieces for t in piece]
        values = [min(ends), max(ends)]
    low, high = values[0], values[-1]
    shown: int | str = low
    if low != high and (not few or len(values) > 4 or high - low + 1 == len(values)):
        shown = f"{low}..{high}"
    elif low != high:
        shown = ", ".join(map(str, values[:-1])) + f" or {high}"
    use.rel.fail(solver, "apart", value=shown, other=by.rel, target=use.size)


def _compare_undecided(solver: Solver, uses: list[_Use]) -> None:
    """Uses no binding decides are skipped, but they must agree: each is ``a*P + c`` for a
    form ``P`` whose coefficients share no factor (``h*w`` in ``2*h*w + 1``), one unknown its
    first use solves; a solved ``P`` is put into the other uses (:func:`_put`), round after
    round until none solves more."""
    known: dict[Dim, tuple[Fraction, _Use]] = {}  # P -> its value, its use
    grown = True
    while grown:
        grown = False
        for use in uses:
            form, by = use.form, None  # by: the use whose P was put in
            for p, (solved, other) in known.items():
                if solved.denominator == 1:
                    put = _put(form, p, int(solved))
                    by, form = (other if put != form else by), put
            value: Fraction | int | None = form.constant
            if value is None:
                const = form.terms.get((), 0)
                first, *rest = (v for m, v in form.terms.items() if m)
                a = math.gcd(first, *rest) * (1 if first > 0 else -1)
                p = (form - const) * (1 if a > 0 else -1) // abs(a)  # Dim divides by a > 0
                if p not in known:
                    known[p], grown = (Fraction(use.size - const, a), use), True
                    if not _reached(p, known[p][0]):  # ``2*h + 2*w`` of size 5, ``-h - w`` of 1
                        use.rel.fail(solver, "no_solution", name=use.name, value=None,
                                     target=use.size)
                value, by = known[p][0] * a + const, known[p][1]
            if by is not None and value != use.size:
                use.rel.fail(solver, "apart", value=value, other=by.rel, target=use.size)


def _reached(p: Dim, value: Fraction) -> bool:
    """Whether ``p`` (whole coefficients with no common factor: a whole at whole sizes) may be
    ``value`` at sizes ``>= 0``: whole, within the bounds :func:`bounds` proves of ``p`` at
    each size less one (it proves them over sizes ``>= 1``)."""
    low, high = bounds(p.subs({n: Dim.symbol(n) - 1 for n in p.symbols}))
    return value.denominator == 1 and (low is None or low <= value) and \
        (high is None or value <= high)


# -- the forms of one unknown ----------------------------------------------------------------


def _grows(form: Dim, nonnegative: bool) -> bool:
    """Whether ``form`` (of one unknown) never decreases as the name grows from 0: no
    negative coefficient, no ``%``, ``//`` of such forms; inside products and quotients its
    constant is nonnegative too (``nonnegative``), so no factor changes sign."""
    return all((not m or c >= 0) and (c >= 0 or not nonnegative)
               and all(isinstance(atom, str) or (not isinstance(atom, Mod)
                                                 and _grows(atom.numerator, True))
                       for atom, _ in m)
               for m, c in form.terms.items())


def _first(holds: Callable[[int], bool], lo: int, hi: int) -> int:
    """The least ``t`` in ``lo..hi`` where ``holds``, which stays true once true (``hi`` if it
    holds at none before; ``hi`` itself is never tried)."""
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if holds(mid) else (mid + 1, hi)
    return lo


def _growing_roots(value: Callable[[int], int], size: int) -> range:
    """The whole ``t >= 0`` where ``value``, nondecreasing, is ``size``: from the least ``t``
    reaching ``size`` to the least passing it (each a search doubling its bound, then
    bisection); empty where none."""
    def least(target: int, lo: int) -> int:
        hi = lo + 1
        while value(hi) < target and hi < 2**64:
            hi += hi - lo
        return _first(lambda t: value(t) >= target, lo, hi)

    start = least(size, 0)
    return range(start, least(size + 1, start))


def _coefficients(form: Dim) -> list[int] | None:
    """A polynomial of one name's coefficients, the constant's first; ``None`` for any other
    form (``//``, ``%``) or a degree past ``_MAX_DEGREE``."""
    out: list[int] = []
    for m, c in form.terms.items():
        power = m[0][1] if len(m) == 1 and isinstance(m[0][0], str) else 0
        if (m and not power) or power > _MAX_DEGREE:
            return None
        out += [0] * (power + 1 - len(out))
        out[power] = c
    return out


def _at(coefficients: list[int], t: int) -> int:
    """The polynomial at ``t``, exactly (Horner's rule on Python ints)."""
    return functools.reduce(lambda acc, c: acc * t + c, reversed(coefficients), 0)


def _turn(coefficients: list[int], lo: int, hi: int) -> int:
    """The least ``t`` in ``lo..hi`` where the polynomial, monotone there, no longer has its
    sign at ``lo`` (``hi`` if none before it)."""
    sign = _at(coefficients, lo)
    return _first(lambda t: _at(coefficients, t) * sign <= 0, lo, hi)


def _pieces(coefficients: list[int], lo: int, hi: int) -> list[tuple[int, int]]:
    """Whole intervals covering ``lo..hi`` on each of which the polynomial is monotone over the
    reals: its slope, monotone on each piece of its own (the same split, one degree down),
    changes sign at most once in each, between two whole numbers found by bisection."""
    if len(coefficients) <= 2:
        return [(lo, hi)]
    slope = [k * c for k, c in enumerate(coefficients)][1:]
    out = []
    for a, b in _pieces(slope, lo, hi):
        if _at(slope, a) * _at(slope, b) < 0:
            k = _turn(slope, a, b)
            out += [(a, k - 1), (k, b)]
        else:
            out.append((a, b))
    return out


@functools.lru_cache(maxsize=256)  # a call's form, again at the next call of the same sizes
def _classes(form: Dim, name: str) -> list[list[int]] | None:
    """``form`` on each class ``P*t + r`` of its name modulo its :func:`period` ``P`` (on which
    its ``//`` and ``%`` are polynomials, ``T // 2 - T // 3`` at ``6*t + 2`` is ``t + 1``): the
    coefficients of each class's polynomial in ``t``, ``r`` in order; ``None`` where ``P`` is
    past ``_CLASSES`` (``T//61 + T%67``: 4087 substitutions took seconds, and held their
    coefficients in the cache) or a class's degree past ``_MAX_DEGREE``."""
    p = period(form)
    if p > _CLASSES:
        return None
    out = [_coefficients(form.subs({name: Dim.symbol(name) * p + r})) for r in range(p)]
    return None if None in out else out  # type: ignore[return-value]  # None ruled out


def _class_roots(classes: list[list[int]], size: int) -> list[int] | None:
    """The whole ``t >= 0`` where the form of ``classes`` (see :func:`_classes`) is ``size``,
    in order; ``None`` where a constant class is all solutions beside others' few."""
    p, roots = len(classes), []
    for r, coefficients in enumerate(classes):
        if len(coefficients) > 1:
            roots += [p * t + r for t in _polynomial_roots(coefficients, size)]
        elif (coefficients or [0])[0] == size:
            return None
    return sorted(roots)


def _polynomial_roots(coefficients: list[int], size: int) -> list[int]:
    """The whole ``t >= 0`` where the polynomial of ``coefficients`` (degree 1 or more) is
    ``size`` (at most its degree of them): below Cauchy's bound on its roots, one bisection per
    monotone piece, each candidate checked exactly."""
    if len(coefficients) == 2:  # a line (each class of ``T // 2 - T // 3``): one division
        t, rest = divmod(size - coefficients[0], coefficients[1])
        return [t] if t >= 0 and not rest else []
    coefficients = [coefficients[0] - size, *coefficients[1:]]
    lead = abs(coefficients[-1])
    bound = 1 - (-max(map(abs, coefficients[:-1])) // lead)
    roots = []
    for a, b in _pieces(coefficients, 0, bound):
        t = _turn(coefficients, a, b + 1)
        if t <= b and _at(coefficients, t) == 0:
            roots.append(t)
    return roots


@functools.lru_cache(maxsize=1024)  # a step of a loop puts the same sizes in every call
def _put(form: Dim, p: Dim, value: int) -> Dim:
    """``form`` where ``p == value``: a monomial ``p`` (its powers too) replaced by ``value``,
    inside ``//`` and ``%`` as well; a sum solved for a name it holds linearly with a whole
    solution (``h + w = 6`` as ``h = 6 - w``), else unchanged."""
    if len(p.terms) > 1:
        for name in sorted(p.symbols):
            try:
                solution, conditions = (p - value).solve_for(name)
            except ValueError:  # the name in a product, a power, ``//`` or ``%``
                continue
            if not conditions:
                return form.subs({name: solution})
        return form
    ((monomial, _),) = p.terms.items()
    out = Dim(0)
    for m, c in form.terms.items():
        powers = dict(m)
        k = min(powers.get(atom, 0) // n for atom, n in monomial)
        term = Dim(c * value**k)
        for atom, n in m:
            n -= k * dict(monomial).get(atom, 0)
            if isinstance(atom, str):
                term *= Dim.symbol(atom) ** n
            elif n:
                inner = _put(atom.numerator, p, value)
                term *= (inner % atom.divisor if isinstance(atom, Mod)
                         else inner // atom.divisor) ** n
        out += term
    return out
