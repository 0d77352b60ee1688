"""Indexing and slicing a symbolic axis: whether an index is in range, how long a slice is, and
the size bounds (``k <= T``) both rest on, decided on canonical forms or else assumed.

Slices are where a size's sign matters: a bound negative at every size counts from the end, one
whose sign is known only at the witness is an assumption (:func:`_from_end`).
"""

from __future__ import annotations

import operator
from typing import Any

from tensig.check.sym_sizes import (
    ONE,
    Drawn,
    DrawnSize,
    _assume,
    _holds,
    _LoopInt,
    _positive,
    as_dim,
)
from tensig.check.tracing import tracer
from tensig.core.dims import Dim
from tensig.core.errors import InconclusiveError

__all__ = ["at_most", "check_index", "slice_len", "triangle"]


def check_index(size: Dim, k: Any) -> None:
    """Report index ``k`` out of range for an axis of ``size`` (a loop's step below its bound
    and a draw's largest value are in range by construction); undecided, assumed in range."""
    if isinstance(k, _LoopInt) and _holds(operator.le, k.bound, size):
        if k.past and k.ahead is not None:
            k.ahead.append((tracer().where(), f"{int(k)} < {size}"))
        return  # step i of a loop over range(size): i < size, or the step would not run
    if type(k) is int and tracer().rows.get(size) == k:
        return  # the count of a loop over the rows of an axis of this size (enumerate)
    d = k.largest if isinstance(k, Drawn) else as_dim(k)
    back = d.constant is not None and d.constant < 0  # x[-k]: k <= size
    at_most(-d if back else d, size, "index", f"index {d} is out of range for an axis of size "
            f"{size}", None, strict=not back)  # assumed once per line: a loop repeats it


def _drawn_len(size: Dim, s: slice) -> Dim:
    if not (isinstance(s.start, Drawn) and isinstance(s.stop, Drawn | DrawnSize)) or \
            s.step not in (None, 1):
        return tracer().new_dim("s")  # its length depends on the draw
    at_most(s.stop.largest, size, "index", f"slice up to {s.stop.largest} on an axis of size "
            f"{size} (the largest draw)", f"a slice of a random start up to {s.stop.largest}")
    return as_dim(s.stop if isinstance(s.stop, DrawnSize) else int(s.stop)) - int(s.start)


def slice_len(size: Dim, s: slice) -> Dim:
    """The length of slice ``s`` of an axis of ``size``: symbolic where the bounds are, else a
    fresh size (a strided slice from a bound, a random start)."""
    if isinstance(s.start, Drawn) or isinstance(s.stop, Drawn):
        return _drawn_len(size, s)
    step = 1 if s.step is None else int(s.step)
    if step < 1 and s.start is None and s.stop is None:  # x[::-1], x[::-2]
        return (size - step - 1) // -step
    first = None if s.start is None else as_dim(s.start).constant  # None: not known
    if step > 1 and (first or 0) >= 0:
        whole = slice_len(size, slice(s.start, s.stop))
        if whole in tracer().positive:  # a window count [::2]: still one at least
            tracer().positive.add((whole + step - 1) // step)
        return (whole + step - 1) // step
    if step != 1 or (first is not None and first < 0):
        if first is not None and step == 1 and s.stop is None:  # x[-k:]: k of a longer axis
            at_most(Dim.const(-first), size, "index", f"slice of the last {-first} on an axis "
                    f"of size {size}", f"the last {-first} of an axis of size {size} (all "
                    f"{size} where it is shorter)")
            return Dim.const(-first)
        return tracer().new_dim("s")  # other strided slices: a fresh size
    start = ONE * 0 if s.start is None else _from_end(size, as_dim(s.start), True)
    stop = size if s.stop is None else _from_end(size, as_dim(s.stop))
    k = s.stop
    if isinstance(k, _LoopInt) and k.slack is not None and _holds(operator.le, k.bound, size):
        if k.past and k.ahead is not None:  # a loop left early assumes it (SymRange._steps)
            k.ahead.append((tracer().where(), f"{int(k)} <= {size}"))
        return stop - start  # x[:, t:t + 1]: a loop step's t + 1 <= T (its end traced apart)
    if at_most(stop, size, "index", f"slice up to {stop} on an axis of size {size}",
               f"a slice up to {stop} of an axis of size {size} (a buffer or table sized for "
               f"at most {size})"):
        return stop - start
    return size - start


def _from_end(size: Dim, bound: Dim, start: bool = False) -> Dim:
    """A slice bound negative at every size (``c[:-k]``) counts from the end of the axis; a
    start further back than the axis clips to 0 (``x[-k:]``): ``k <= T`` is assumed.  A sign
    known only at the witness is assumed (``x[T // 2 - 3:]``: ``T // 2 - 3 >= 0``)."""
    t = tracer()
    if not _holds(operator.lt, bound, ONE * 0):
        at_least = t.value(bound) >= 0
        if at_least and (_holds(operator.ge, bound, ONE * 0) or t.loops or bound.symbols &
                         t.data_sizes or any(f"assumes {bound} >= 0" in line
                                             for line in t.assumed.values())):
            return bound  # a loop's step, a data size, an assumed sign: no more to say
        _assume(f"{bound} {'>=' if at_least else '<'} 0", True, f"a slice bound "
                f"{'non-' * at_least}negative at the witness sizes only, counted from the "
                f"{'start' if at_least else 'end'} of the axis there")
        if at_least:
            return bound
    if start and bound.constant is None:
        try:
            if not -bound <= size:
                return ONE * 0  # further back at every size: from the axis's start
        except InconclusiveError:
            _assume(f"{-bound} <= {size}", True, f"a slice from {-bound} before the end of an "
                    f"axis of size {size} (all {size} where the axis is shorter)")
    return size + bound


def at_most(a: Dim, b: Dim, kind: str, error: str, why: str | None, strict: bool = False
            ) -> bool:
    """Whether ``a <= b`` (``a < b``, ``strict``): on canonical forms (failing, an ``error`` of
    ``kind``), else from the sizes known positive (``S*(T // S) <= T``), else assumed."""
    t, fact = tracer(), b - a + (0 if strict else 1)
    try:
        holds = a < b if strict else a <= b
    except InconclusiveError:  # 1 - fact >= 1: a > b (a >= b, strict), false at every size
        floors = t.quotient_facts  # only these: searching every fact was quadratic in loops
        holds = not (floors and _positive(1 - fact, floors))
        if holds and not (floors and _positive(fact, floors)):
            _assume(f"{a} {'<' if strict else '<='} {b}", True, why)
    if holds:
        t.positive.add(fact)  # true, or assumed
        return True
    tracer().report(kind, error)
    return False


def triangle(n: Any, k: int = 0, upper: bool = True, m: Any = None) -> Dim:
    """How many elements of an ``n`` by ``m`` matrix lie on or above (``upper``) or below its
    diagonal ``k`` (``triu_indices``' length): of a square one a polynomial in ``n``, exact
    from ``n = k - 1`` on (smaller: assumed, or counted for a known ``n``); else a fresh size."""
    d, offset = as_dim(n), as_dim(k).constant
    if offset is None or not (m is None or tracer().equal_under_assumptions(as_dim(m), d)):
        return tracer().new_dim("tri")
    k = offset if upper else -offset  # below diagonal k is above diagonal -k of the transpose
    least = k - 1 if k >= 0 else -k  # the polynomial's (d - k)(d - k + 1)/2 is 0 at k - 1
    try:
        if d < least:  # a known size: no element on that side (k >= 0), or all of them
            return d * 0 if k >= 0 else d * d
    except InconclusiveError:
        _assume(f"{d} >= {least}", True, f"the triangle from diagonal {offset} of a {d} by {d} "
                f"matrix, counted as for one at least that large")
    return (d - k) * (d - k + 1) // 2 if k >= 0 else d * d - (d + k - 1) * (d + k) // 2
