"""Whether a reshape keeps elements in order, and what a ``-1`` in it stands for.

A reshape reinterprets the row-major order; code that reshapes ``[B, T, H*d]`` into
``[B, H, T, d]`` meant a transpose.  :func:`moved_factors` decides it over symbolic sizes and
says what moved; :func:`order_lint` reports it (a reshape straight after a reorder judged with
it, :class:`Skew`); :func:`divide` solves ``total / known`` for a ``-1``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from tensig.check.broadcasting import shape_text
from tensig.check.sym_sizes import ONE, nonzero_size, require_divisible
from tensig.check.tracing import Finding, tracer
from tensig.core.dims import Dim, FloorDiv, exact_quotient

__all__ = ["Skew", "carry_skew", "divide", "moved_factors", "order_lint", "view_strides"]


@dataclass(frozen=True)
class Skew:
    """A reshape that moved factors, as its result carries it: the factorization it left, its
    finding, the first axis it mixed, and the trace's count of arrays when the result was made
    (so that "nothing ran since" is one comparison)."""

    source: tuple[Dim, ...]
    finding: Finding
    lead: int
    step: int
    full: Dim  # the first mixed axis, before a range of it


def order_lint(a: Any, out: Any) -> Skew | None:
    """Report (TS202) a reshape of ``a`` into ``out`` (just made) that moves factors.  When
    ``a`` is a reorder's result (or a range of its first mixed axis) and nothing else ran
    since, the two reshapes are one reinterpretation of the buffer: where the pair keeps the
    order, the first's finding is withdrawn (Transformer-XL's relative shift views ``[Q, K +
    1]`` as ``[K + 1, Q]`` only to drop its first row and view the rest back); a reorder whose
    mixed axes are used (a mean, a matmul) keeps it."""
    t, skew = tracer(), a.skew
    backs = _viewed_back(skew, a.dims, out.dims) if skew and skew.step == t.steps - 1 else []
    if skew and any(moved_factors(skew.source, d) is None for d in backs):
        if skew.finding in t.findings:
            t.findings.remove(skew.finding)
        return None
    moved = moved_factors(a.dims, out.dims)
    if moved is None:
        return None
    finding = t.report("reorder", f"reshape of {shape_text(a)} into {shape_text(out)} {moved}: "
                       "a reshape keeps elements in order, so this mixes them; use a "
                       "transpose/permute if moving axes was meant")
    lead = next((i for i, (p, q) in enumerate(zip(a.dims, out.dims, strict=False)) if p != q),
                0)
    return Skew(tuple(a.dims), finding, lead, t.steps, out.dims[lead] if out.ndim else ONE)


def _viewed_back(skew: Skew, dims: Sequence[Dim], out: Sequence[Dim]) -> list[tuple[Dim, ...]]:
    """``out`` with the range of the first mixed axis grown back to the whole axis, once for
    each axis of ``out`` the range's size divides (rel_shift's ``K`` of ``K + 1``), so that
    the pair is judged as one reshape of the first's source; where none divides, each alone."""
    part = dims[skew.lead]
    if part == skew.full:
        return [tuple(out)]
    quotients = [(j, exact_quotient(d, part)) for j, d in enumerate(out)]
    return [(*out[:j], q * skew.full, *out[j + 1:]) for j, q in quotients if q is not None]


def carry_skew(a: Any, key: Any) -> Skew | None:
    """The skew ``a[key]`` (just made) keeps: ``a``'s, when the key takes a range (step 1) of
    ``a``'s first mixed axis and whole other axes, and nothing else ran (a range of an axis
    before it, ``[1:]`` of the batch, is no part of the reinterpretation)."""
    t, skew = tracer(), a.skew
    keys = key if isinstance(key, tuple) else (key,)
    if skew is None or skew.step != t.steps - 1 or len(keys) > a.ndim or not all(
            isinstance(k, slice) and k.step in (None, 1) and
            (i == skew.lead or k == slice(None)) for i, k in enumerate(keys)):
        return None
    return replace(skew, step=t.steps)

_MINUS_1 = ("reshape", "a reshape's -1")  # what fails where its division is not exact
_Flex = tuple[Fraction, tuple[int, ...]]  # a literal and the atoms (by index) it sits among


def _factors(d: Dim, sums: Sequence[Dim] = ()) -> tuple[list[Dim], list[_Flex]]:
    """An axis as its symbolic factors and its literal factors, each literal with the symbolic
    factors it may sit among: ``4*T`` is ``([T], [(4, (0,))])``; ``C // 4`` is ``([C],
    [(1/4, (0,))])``: a factor 4 of ``C`` lies elsewhere, before or after it (the exact
    division the reshape already required); a sum (``T + 1``) is one opaque factor, and so is
    each of ``sums`` (the reshape's other axes that are sums) that divides a product of them:
    ``N*(H - 2)`` is ``N`` and ``H - 2``."""
    if d.constant is not None:
        return [], [(Fraction(d.constant), ())]
    if len(d.terms) != 1:
        for s in sums:
            q = None if s == d else exact_quotient(d, s)
            if q is not None:
                inner, inner_flex = _factors(q, sums)
                n = len(inner)
                return [*inner, s], [(v, tuple(range(n + 1)) if set(ks) in (set(), set(range(n)))
                                      else ks) for v, ks in inner_flex]  # either side of s
        return [d], []
    ((monomial, coefficient),) = d.terms.items()
    atoms: list[Dim] = []
    flex: list[_Flex] = []
    for atom, power in monomial:
        for _ in range(power):
            if isinstance(atom, FloorDiv):
                inner, inner_flex = _factors(atom.numerator)
                shift = len(atoms)
                atoms += inner
                flex += [(v, tuple(k + shift for k in ks)) for v, ks in inner_flex]
                flex.append((Fraction(1, atom.divisor), tuple(range(shift, len(atoms)))))
            else:
                atoms.append(Dim.atom(atom))
    if coefficient != 1:
        flex.append((Fraction(coefficient), tuple(range(len(atoms)))))
    return atoms, flex


def moved_factors(src: Sequence[Dim], dst: Sequence[Dim]) -> str | None:
    """What a reshape moves, or ``None`` when it keeps elements in order.

    The symbolic factors of the source's axes must appear in the same order in the target's
    (any order within one axis), and between two consecutive ones ("gaps") the literal factors
    of both sides must multiply to the same number.  A literal sharing its axis with symbolic
    factors may sit (split, even) in any gap among them, and the ``k`` that ``X // k`` took
    lies before or after ``X``: whether every gap can agree is a small flow problem per prime.
    When the sides have different symbolic factors (an existential size) nothing is claimed.
    """
    sums = [d for d in (*src, *dst) if d.constant is None and len(d.terms) > 1]
    fa, fb = [_factors(d, sums) for d in src], [_factors(d, sums) for d in dst]
    occ_a = [(i, k, x) for i, (xs, _) in enumerate(fa) for k, x in enumerate(xs)]
    occ_b = [(j, k, x) for j, (xs, _) in enumerate(fb) for k, x in enumerate(xs)]
    if sorted(str(x) for *_, x in occ_a) != sorted(str(x) for *_, x in occ_b):
        return None
    where_b: dict[Dim, list[tuple[int, int]]] = {}
    for j, k, x in occ_b:
        where_b.setdefault(x, []).append((j, k))
    pairs = sorted(((i, k), where_b[x].pop(0), x) for i, k, x in occ_a)  # k-th T to k-th T
    for p, q in itertools.combinations(pairs, 2):
        if p[0][0] < q[0][0] and p[1][0] > q[1][0]:
            return _detail(src, dst, f"moves {q[2]} before {p[2]}")
    chain = [{a: n for n, (a, _, _) in enumerate(pairs)},  # (axis, atom) -> chain position
             {b: n for n, (_, b, _) in enumerate(pairs)}]
    literals: list[tuple[int, int, int, Fraction]] = []  # (side, first gap, last gap, value)
    fixed: list[list[Fraction]] = [[Fraction(1)] * (len(pairs) + 1) for _ in range(2)]
    for side, (factors, pos) in enumerate(zip((fa, fb), chain, strict=True)):
        for axis, (_, flex) in enumerate(factors):
            gap = sum(1 for a, _ in pos if a < axis)
            for value, ks in flex:
                if not ks:
                    fixed[side][gap] *= value
                    literals.append((side, gap, gap, value))
                    continue
                spots = [pos[(axis, k)] for k in ks]
                literals.append((side, min(spots), max(spots) + 1, value))
    names = [str(x) for *_, x in pairs]
    if _placeable(literals, len(pairs) + 1):
        return _literal_runs(literals, names, src, dst)
    for g, (a, b) in enumerate(zip(*fixed, strict=True)):
        if a != b:
            return _detail(src, dst, f"changes the literal factors {_between(names, g, g)}: "
                                     f"{a} in the source, {b} in the target")
    return _detail(src, dst, "moves literal factors past symbolic ones")


def _literal_runs(literals: list[tuple[int, int, int, Fraction]], names: list[str],
                  src: Sequence[Dim], dst: Sequence[Dim]) -> str | None:
    """In a gap that only axes of literal sizes touch, the two runs of sizes must be two
    groupings of one sequence of factors: ``[4, 16]`` and ``[16, 4]`` may both group
    ``4, 4, 4``, but ``[2, 3]`` and ``[3, 2]`` group nothing in common (a transpose was meant).
    They do exactly when the cut points (the products of each run's prefixes) divide each
    other in increasing order."""
    n_gaps = len(names) + 1
    flexible = {g for _, lo, hi, _ in literals if lo != hi for g in range(lo, hi + 1)}
    for g in sorted(set(range(n_gaps)) - flexible):
        runs = [[v for side_, lo, _, v in literals if side_ == side and lo == g and v != 1]
                for side in (0, 1)]
        cuts = sorted({math.prod(run[:k]) for run in runs for k in range(1, len(run))})
        if any(b % a for a, b in itertools.pairwise(cuts)):
            return _detail(src, dst, f"reorders the sizes {_between(names, g, g)}: "
                                     f"{shape_text(runs[0])} into {shape_text(runs[1])}")
    return None


def _placeable(literals: list[tuple[int, int, int, Fraction]], n_gaps: int) -> bool:
    """Whether the literals can be split among their gaps so that, in every gap, the source's
    product equals the target's: per prime, a supply-and-demand flow over the gaps.
    Literals too large to factor quickly give ``True`` (nothing is claimed)."""
    exponents: dict[int, list[tuple[int, int, int]]] = {}  # prime -> (net exponent, lo, hi)
    for side, lo, hi, value in literals:
        for number, sign in ((value.numerator, 1), (value.denominator, -1)):
            if number > 10**12:
                return True
            for prime, e in _prime_factors(number).items():
                net = e * sign * (1 if side == 1 else -1)
                exponents.setdefault(prime, []).append((net, lo, hi))
    return all(_balanced(items, n_gaps) for items in exponents.values())


def _prime_factors(n: int) -> dict[int, int]:
    out: dict[int, int] = {}
    p = 2
    while p * p <= n:
        while n % p == 0:
            out[p] = out.get(p, 0) + 1
            n //= p
        p += 1
    if n > 1:
        out[n] = out.get(n, 0) + 1
    return out


def _balanced(items: list[tuple[int, int, int]], n_gaps: int) -> bool:
    """Items ``(amount, lo, hi)`` each split among gaps ``lo..hi``: can every gap sum to 0?  It
    can when a maximum flow of the positive amounts, through the gaps they may use, into the
    negative ones that may use the same gap takes everything."""
    pos = [(a, lo, hi) for a, lo, hi in items if a > 0]
    neg = [(-a, lo, hi) for a, lo, hi in items if a < 0]
    total = sum(a for a, _, _ in pos)
    if total != sum(a for a, _, _ in neg):
        return False
    n = 2 + len(pos) + n_gaps + len(neg)  # 0 source, 1 sink, items, gaps, items
    cap = [[0] * n for _ in range(n)]
    gap0, neg0 = 2 + len(pos), 2 + len(pos) + n_gaps
    for i, (a, lo, hi) in enumerate(pos):
        cap[0][2 + i] = a
        for g in range(lo, hi + 1):
            cap[2 + i][gap0 + g] = total
    for i, (a, lo, hi) in enumerate(neg):
        cap[neg0 + i][1] = a
        for g in range(lo, hi + 1):
            cap[gap0 + g][neg0 + i] = total
    return _max_flow(cap) == total


def _max_flow(cap: list[list[int]]) -> int:
    """Edmonds-Karp from node 0 to node 1 on a capacity matrix (changed in place)."""
    flow, n = 0, len(cap)
    while True:
        parent = [-1] * n
        parent[0] = 0
        queue = [0]
        for u in queue:
            for v in range(n):
                if parent[v] < 0 and cap[u][v] > 0:
                    parent[v] = u
                    queue.append(v)
        if parent[1] < 0:
            return flow
        path, v = [], 1  # sink to source
        while v != 0:
            path.append(v)
            v = parent[v]
        push = min(cap[parent[v]][v] for v in path)
        for v in path:
            cap[parent[v]][v] -= push
            cap[v][parent[v]] += push
        flow += push


def _detail(src: Sequence[Dim], dst: Sequence[Dim], what: str) -> str:
    """``what`` the reshape does, led by "only reorders the dimensions" when the target merely
    permutes the source's sizes (``[2, 3]`` into ``[3, 2]``): a transpose was meant, even where
    the order of factors cannot tell."""
    a, b = [d for d in src if d != ONE], [d for d in dst if d != ONE]
    if len(a) > 1 and a != b and sorted(map(str, a)) == sorted(map(str, b)):
        return f"only reorders the dimensions ({what})"
    return what


def _between(names: list[str], lo: int, hi: int) -> str:
    """Where gaps ``lo..hi`` of the chain of symbolic factors lie, in words."""
    if lo > 0 and hi < len(names):
        return f"between {names[lo - 1]} and {names[hi]}"
    if hi < len(names):
        return f"before {names[hi]}"
    return f"after {names[lo - 1]}" if lo > 0 else "of the whole array"


def divide(total: Dim, known: Dim) -> Dim:
    """``total / known`` for a ``-1`` in a reshape: ``B*T*d / (4*B*T)`` is ``d // 4``, requiring
    ``d`` divisible by 4; ``[S, 1]`` into ``[S, 3, -1]`` divides at no size, an error.  The
    libraries refuse a ``-1`` among sizes whose product is 0, even of 0 elements (any size
    fits it): ``known`` is assumed not 0 (``[B - 1, -1]``), or an error where it is."""
    if not nonzero_size(known, "a reshape's -1 raises where the other sizes' product is 0"):
        tracer().report("reshape", f"a reshape's -1 among sizes of product {known}: no "
                                   "library infers it")
        return ONE * 0
    if known.constant is not None:
        return require_divisible(total, known.constant, error=_MINUS_1)
    if len(known.terms) == 1 and len(total.terms) == 1:
        ((mk, ck),) = known.terms.items()
        ((mt, ct),) = total.terms.items()
        powers = dict(mt)
        if all(powers.get(atom, 0) >= p for atom, p in mk):
            for atom, p in mk:
                powers[atom] -= p
            rest = math.prod((Dim.atom(atom) ** p for atom, p in powers.items()),
                             start=Dim.const(ct))
            return require_divisible(rest, ck, error=_MINUS_1)
    quotient = exact_quotient(total, known)
    if quotient is not None:
        return quotient
    content = math.gcd(*known.terms.values())  # 4*d*(T + 1): divide by d*(T + 1), then by 4
    if content > 1 and (quotient := exact_quotient(total * content, known)) is not None:
        return require_divisible(quotient, content, error=_MINUS_1)
    t = tracer()
    t.requirement(total, known)  # said once, as every requirement is
    return t.new_dim("n")


def view_strides(dims: list[int], strides: tuple[int, ...], new: list[int]
                 ) -> tuple[int, ...] | None:
    """ATen's ``computeStride``: the strides sizes ``dims`` of ``strides`` have viewed as
    ``new`` without a copy, or None where they cannot be (each run of axes merged or split
    must be contiguous in memory)."""
    view_d, base, t_numel, v_numel = len(new) - 1, strides[-1] if strides else 1, 1, 1
    out = [0] * len(new)
    for d in range(len(dims) - 1, -1, -1):
        t_numel *= dims[d]
        if d == 0 or (dims[d - 1] != 1 and strides[d - 1] != t_numel * base):
            while view_d >= 0 and (v_numel < t_numel or new[view_d] == 1):
                out[view_d] = v_numel * base
                v_numel *= new[view_d]
                view_d -= 1
            if v_numel != t_numel:
                return None
            if d > 0:
                base, t_numel, v_numel = strides[d - 1], 1, 1
    return tuple(out) if view_d == -1 else None
