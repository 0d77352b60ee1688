"""Symbolic sizes: what ``x.shape[0]``, ``len(x)`` and ``range(T)`` give during verification.

A :class:`SymSize` does integer arithmetic symbolically and, where Python needs a number
(``math.sqrt``, ``range``), gives a *witness* chosen so that no two sizes collide.  Sizes are at
least 1 (``T == 0`` is False: an empty-input guard is never taken).  A comparison the canonical
forms cannot decide is taken on the witness and recorded as an assumption (a warning), as is an
exact division the code relies on (``D // heads``).  Indexing and slicing a symbolic axis are
in :mod:`tensig.check.sym_indexing`.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tensig.check import findings
from tensig.check.tracing import _TRACER, RESIDUE_CAP, Unsupported, plugin, tracer
from tensig.core.dims import Dim, divide, exact_quotient, grain, period
from tensig.core.errors import InconclusiveError

__all__ = ["ONE", "Drawn", "DrawnSize", "Square", "StandIn", "SymFloat", "SymRange", "SymSize",
           "as_dim", "decide", "require_divisible", "sym_max", "sym_min", "sym_range", "sym_sqrt"]

ONE = Dim.const(1)


def as_dim(x: Any) -> Dim:
    if isinstance(x, SymSize):
        return x.dim
    if isinstance(x, Dim):
        return x
    if isinstance(x, bool):
        raise TypeError("a size cannot be a bool")
    if isinstance(x, Drawn):  # a random number in size arithmetic (H - i): no known size
        return tracer().new_dim("draw")
    t = _TRACER.get()  # a size turned into an int (int(T), int(math.sqrt(S*S))): that size,
    read = t.read_leak(int(x)) if t is not None else int(x)  # an assumption (a literal 11?)
    return read if isinstance(read, Dim) else Dim.const(read)


def _arithmetic(fn: Callable[[Any, Any], Any]) -> Callable[[SymSize, Any], Any]:
    """A :class:`SymSize` operator: symbolic, but a :class:`SymFloat` with a float."""
    def op(self: SymSize, other: Any) -> Any:
        if isinstance(other, float):
            return SymFloat(fn(tracer().value(self.dim), other),
                            _dyadic(self.dim, other) if fn is operator.mul else None)
        if isinstance(other, SymSize | int | Dim) and not isinstance(other, bool):
            return SymSize(fn(self.dim, as_dim(other)))
        return NotImplemented

    return op


def _real(fn: Callable[[Any, Any], Any], shift: Callable[[Dim, int], Dim] | None = None
          ) -> Any:  # Any: float's own are overloaded
    """A :class:`SymFloat` operator; one that adds an int keeps ``exact``, ``shift``-ed by it
    times the divisor (torch's docs' ``floor((L - 3) / 2 + 1)`` is ``(L - 1) // 2``)."""
    def op(self: SymFloat, other: Any) -> Any:
        out = fn(float(self), other)
        exact = self.exact and shift and type(other) is int and \
            (shift(self.exact[0], other * self.exact[1]), self.exact[1])
        return SymFloat(out, exact or None) if type(out) is float else out

    return op


def _dyadic(p: Dim, f: float, over: bool = False) -> tuple[Dim, int] | None:
    """``p * f`` (``p / f`` with ``over``) as a quotient where ``f``, a number, not one of
    sizes, is a small dyadic (0.75 is 3/4): below 2**37 the double product is exact and a
    division is off by less than a quotient's step, so its floor is the quotient's; not 0.7:
    ``int(10 * 0.7)`` is 7, the floor of 10 times the double's exact value 6."""
    a, b = f.as_integer_ratio() if math.isfinite(f) else (0, 0)
    if isinstance(f, SymFloat) or not (0 < abs(a) <= 2 ** 16 and b <= 2 ** 16):
        return None
    return (p * b * (1 if a > 0 else -1), abs(a)) if over else (p * a, b)


class SymFloat(float):
    """A number computed from a size and a float (``N * 0.1``): its value at the witness.
    Rounded (``math.floor``, ``round``, ``int()``) it is a fresh size, or for a size over a
    positive ``int`` or times a small dyadic (``exact``) that quotient (``math.ceil(N / 32)`` is
    ``(N + 31) // 32``, ``int(N * 0.75)`` is ``3*N // 4``): no size is a constant read off the
    witness (``int(N * 0.1)`` was 1 at every ``N``).  ``math.sqrt`` of a size keeps it
    (``root``): rounded, the size whose square it is (:meth:`_root`)."""

    __slots__ = ("exact", "root")
    exact: tuple[Dim, int] | None
    root: Dim | None

    def __new__(cls, value: float, exact: tuple[Dim, int] | None = None,
                root: Dim | None = None) -> SymFloat:
        out = super().__new__(cls, value)
        out.exact, out.root = exact, root
        return out

    __add__ = __radd__ = _real(operator.add, operator.add)
    __sub__ = _real(operator.sub, operator.sub)
    __rsub__ = _real(lambda a, b: b - a, lambda p, c: c - p)
    __mul__ = __rmul__ = _real(operator.mul)
    __truediv__, __rtruediv__ = _real(operator.truediv), _real(lambda a, b: b / a)
    __pow__, __rpow__ = _real(operator.pow), _real(lambda a, b: b ** a)

    def __neg__(self) -> SymFloat:
        return SymFloat(-float(self))

    def _cmp(self, other: Any, name: str, fn: Callable[[Any, Any], bool]) -> Any:
        """Decided at the witness, an assumption, except inside a library, which checks what
        the user did not write (``trunc_normal_(w, std=D ** -0.5)``)."""
        if not isinstance(other, int | float | SymSize):
            return NotImplemented
        witness = fn(float(self), float(other))
        if findings.user_code(sys._getframe(1).f_code.co_filename):  # said in sizes if known
            text = f"{self.exact[0]} / {self.exact[1]}" if self.exact else \
                f"sqrt({self.root})" if self.root is not None else repr(float(self))
            return decide(f"{text} {name} {getattr(other, 'dim', other)}", witness,
                          why="a number computed from sizes with a float (its value at the "
                              "witness sizes), compared there only")
        return witness

    __lt__ = functools.partialmethod(_cmp, name="<", fn=operator.lt)
    __le__ = functools.partialmethod(_cmp, name="<=", fn=operator.le)
    __gt__ = functools.partialmethod(_cmp, name=">", fn=operator.gt)
    __ge__ = functools.partialmethod(_cmp, name=">=", fn=operator.ge)
    __eq__ = functools.partialmethod(_cmp, name="==", fn=operator.eq)
    __ne__ = functools.partialmethod(_cmp, name="!=", fn=operator.ne)
    __hash__ = float.__hash__

    def _rounded(self, up: int) -> SymSize:
        if self.root is not None:
            return SymSize(self._root())
        if self.exact is None:
            return SymSize(tracer().new_dim("n"))
        p, k = self.exact  # floor((p + up) / k), a floor division that needs no exactness
        return SymSize(require_divisible(p + up, k, floor=True))

    def __floor__(self) -> Any:  # a SymSize
        return self._rounded(0)

    def __ceil__(self) -> Any:
        return self._rounded(0 if self.exact is None else self.exact[1] - 1)

    def __trunc__(self) -> Any:
        """Toward 0: a floor where ``exact``'s size is at least 0, minus its negation's where at
        most 0 (``int(L * -0.5)`` is ``-(L // 2)``, not ``(-L) // 2``), else a fresh size."""
        p, k = self.exact or (ONE, 1)
        if _holds(operator.ge, p, ONE * 0):
            return self._rounded(0)
        if _holds(operator.le, p, ONE * 0):
            return -SymFloat(-float(self), (-p, k))._rounded(0)
        return SymSize(tracer().new_dim("n"))

    def __round__(self, ndigits: Any = None) -> Any:  # half to even: not a quotient
        return self._rounded(0) if self.root is not None and ndigits is None else \
            SymSize(tracer().new_dim("n")) if ndigits is None else round(float(self), ndigits)

    def _root(self) -> Dim:
        """The size whose square ``root`` is at every size (``S**2``: ``S``), else
        :class:`Square` (verify traces again with ``root`` a new size's square)."""
        d = self.root
        assert d is not None
        if d.constant is not None:
            return Dim.const(math.isqrt(max(d.constant, 0)))
        ((monomial, c),) = d.terms.items() if len(d.terms) == 1 else (((), 0),)
        if c <= 0 or math.isqrt(c) ** 2 != c or any(p % 2 for _, p in monomial):
            raise Square(d, tracer().where())
        return math.prod((Dim.atom(a) ** (p // 2) for a, p in monomial),
                         start=Dim.const(math.isqrt(c)))

    def __int__(self) -> int:
        """:meth:`__trunc__`'s size, or a root's root, as a number read back (:func:`_read`)."""
        if self.root is not None:
            return tracer().leak(self._root())
        return _read(self.__trunc__().dim, float(self))


def _read(d: Dim, number: float) -> int:
    """``int()`` of size ``d`` (``number`` at the witness): a number that stands for ``d``, read
    back as it (:meth:`Tracer.leak`), an assumption, as a branch on it is taken there only."""
    if d.constant is not None:
        return d.constant
    n = tracer().leak(d, read=True)
    if n > 0 > int(number):  # a fresh size, for a negative number
        raise Unsupported(f"int() of a negative size ({d}, {number!r} at the witness)")
    _assume(f"int({number!r}) is {tracer().leaks[n]}", True, "a number that stands "
            "for that size, read back as it (a branch on it is taken at that number only)")
    return n


class Square(BaseException):
    """``int(math.sqrt(n))`` of a size that is no square at every size (ViT's patch grid):
    verify traces again with ``n`` a new size's square (a ``BaseException``: user code's
    ``except Exception`` must not take it)."""

    def __init__(self, dim: Dim, where: Any):
        super().__init__(f"int() of the square root of {dim}")
        self.dim, self.where = dim, where


def sym_sqrt(x: Any) -> Any:
    """``math.sqrt`` while verifying: of a size, a :class:`SymFloat` that remembers it."""
    return SymFloat(_SQRT(float(x)), root=x.dim) if isinstance(x, SymSize) else _SQRT(x)


_SQRT = math.sqrt


def quotient(n: Dim, d: Dim) -> Dim:
    """``n // d`` of a symbolic size ``d`` (DDIM's ``T // S``), which no floor of the algebra
    is (its divisors are numbers; the witnesses' quotient was wrong at every other size): a
    fresh size ``q`` less one, so that it may be 0 (where T < S: nothing decides it at least
    1), one per ``n`` and ``d`` in a trace, ``n // d`` at the witness.  ``n`` is assumed at
    least 0 and ``d`` at least 1 where that is not known (the witness's quotient then taken
    in that range); a known negative ``n`` is minus a ceiling (``-T // S``: ``-((T + S - 1) //
    S)``), never a size; the multiples of ``d`` in ``n`` come out whole first (``(T + S) // S``
    is ``T // S + 1``, which a broadcast against ``T // S`` must see)."""
    t = tracer()
    whole, n = divide(n, d)
    if whole.constant != 0:
        return whole + quotient(n, d)
    if _positive(-n, t.positive):
        return -quotient(d - 1 - n, d)
    for x, least in ((n, 0), (d, 1)):
        if not _positive(x + 1 - least, t.positive):  # known, or assumed before
            _assume(f"{x} >= {least}", True, f"({n}) // ({d}) taken as a size")
            t.positive.add(x + 1 - least)
    if n.constant == 0:
        return n
    if ("//", n, d) not in t.min_dims:  # the witness's quotient, in the range assumed
        at = max(t.value(n), 0) // max(t.value(d), 1)
        named = f"{n}_over_{d}_" if f"{n}{d}".isidentifier() else "q"  # T_over_S_1 - 1
        q = t.min_dims[("//", n, d)] = t.new_dim(named, at + 1) - 1
        floor = {n - d * q + 1, d * (q + 1) - n}  # d*q <= n < d*(q + 1), the floor's
        t.positive |= floor
        t.quotient_facts |= floor
    return t.min_dims[("//", n, d)]


def _symbolic(o: Any) -> bool:
    """A divisor that is a size not known as a number (``S``, not ``D // H`` bound to 4)."""
    return isinstance(o, SymSize) and o.dim.constant is None


def _divisor(o: Any) -> Any:
    """A divisor that is a size known as a number: that number."""
    return o.dim.constant if isinstance(o, SymSize) else o


def _read_back(o: Any) -> Any:
    """An ``int`` that is a size turned into a number as that size (einops divides ``(h w)``
    by ``h=int(math.sqrt(N))``), any other operand as it is."""
    if type(o) is int and (d := as_dim(o)).constant is None:
        return SymSize(d)
    return o


class SymSize:
    """A size read from a symbolic shape: symbolic in arithmetic, a witness where Python
    needs a number (``range``, ``math.sqrt``, indexing a list)."""

    __slots__ = ("dim",)

    def __init__(self, dim: Dim):
        self.dim = dim

    # numbers Python insists on
    def __index__(self) -> int:
        return tracer().leak(self.dim)

    def __int__(self) -> int:
        """``int(T)`` as :meth:`__index__`, the user's ``int(T // 2)`` as a :class:`SymFloat`'s:
        read back (a library's, tensig's, as :meth:`__index__`: ``np.sqrt(N - 1)``)."""
        d, caller = self.dim, sys._getframe(1).f_code.co_filename
        if d.symbols == {str(d)} or not findings.user_code(caller):
            return self.__index__()
        return _read(d, tracer().value(d))

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        """``np.sqrt(d)``, ``np.log(T)``: NumPy math on a size gives a witness number."""
        return np.asarray(int(self), dtype=dtype)

    def __float__(self) -> float:
        return float(tracer().value(self.dim))

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        """``torch.div(idx, V, rounding_mode="floor")``: torch's argument parser takes a size
        where it takes a tensor, and the symbolic arrays compute the call."""
        return plugin("torch_function")(func, types, args, kwargs)

    def __repr__(self) -> str:
        return f"SymSize({self.dim})"

    def __str__(self) -> str:  # the user's f"got {x.shape[-1]}": "got D"
        return str(self.dim)

    def __hash__(self) -> int:
        return hash(self.dim)

    # arithmetic stays symbolic
    __add__ = __radd__ = _arithmetic(operator.add)  # Dim's canonical form and IEEE + commute
    __sub__, __rsub__ = _arithmetic(operator.sub), _arithmetic(lambda a, b: b - a)
    __mul__ = __rmul__ = _arithmetic(operator.mul)

    def _exact(self, o: Any) -> Dim | None:
        """``self / o`` where a symbolic ``o`` divides it as polynomials (``H*W // W``), else
        None; an ``o`` that can be 0 (``H - 1``) is assumed not to be (a warning)."""
        if not isinstance(o, SymSize) or o.dim.constant is not None:
            return None
        q = exact_quotient(self.dim, o.dim)
        if q is None or not nonzero_size(o.dim, f"a division by {o.dim}, which raises "
                                                "ZeroDivisionError where it is 0"):
            return None
        return q

    def __floordiv__(self, o: Any) -> Any:
        o = _read_back(o)
        if (q := self._exact(o)) is not None:
            return SymSize(q)
        if _symbolic(o):
            return SymSize(quotient(self.dim, o.dim))
        o = _divisor(o)
        if isinstance(o, int) and o > 0:
            return SymSize(require_divisible(self.dim, o, floor=True))
        return SymFloat(float(self) // o) if isinstance(o, float) else int(self) // int(o)

    def __truediv__(self, o: Any) -> float:
        exact = (self.dim, o) if type(o) is int and o > 0 else \
            _dyadic(self.dim, o, over=True) if isinstance(o, float) else None
        return SymFloat(float(self) / float(o), exact)

    def __rtruediv__(self, o: Any) -> float:
        return SymFloat(float(o) / float(self))

    def __mod__(self, o: Any) -> Any:
        o = _read_back(o)
        if self._exact(o) is not None:
            return SymSize(ONE * 0)  # H*W % W, as the // beside it divides
        if _symbolic(o):
            return SymSize(self.dim - o.dim * quotient(self.dim, o.dim))
        o = _divisor(o)
        if isinstance(o, int) and o > 0:
            return SymSize(self.dim % o)
        return int(self) % int(o)

    def __neg__(self) -> Any:
        return SymSize(-self.dim)

    def __pow__(self, o: Any) -> Any:
        if isinstance(o, int) and o >= 0:
            return SymSize(self.dim ** o)
        out = float(self) ** o
        return SymFloat(out) if type(out) is float else out

    def __rpow__(self, o: Any) -> Any:  # gamma ** T: a number at the witness; 2 ** T: a size
        return SymFloat(float(o) ** float(self)) if isinstance(o, float) else \
            SymSize(tracer().new_dim("pow"))

    # comparisons: decided on canonical forms when possible, else an assumption
    def _cmp(self, other: Any, name: str, fn: Callable[[Any, Any], bool]) -> bool:
        if isinstance(other, SymFloat):  # N > D * 0.1: its reflection, at the witness
            return NotImplemented
        if isinstance(other, float) and math.isfinite(other):  # N > 5.5 is N > 5
            other = (math.floor if name in (">", "<=") else math.ceil)(other)
        elif isinstance(other, float):
            return fn(float(self), other)
        if not isinstance(other, SymSize | int | Dim) or isinstance(other, bool):
            return NotImplemented
        a, b = self.dim, as_dim(other)
        tracer().decided(a, b)
        try:
            return fn(a, b)
        except InconclusiveError:
            witness = fn(tracer().value(a), tracer().value(b))
            if _near_end(a, other) or _numbered(self, other):
                return witness  # a first-half loop step against the loop's end (see _LoopInt)
            return decide(f"{a} {name} {b}", witness, (a, name, b))

    def __eq__(self, o: Any) -> bool:
        if isinstance(o, float) and not isinstance(o, SymFloat):
            if not o.is_integer():  # 3.5, inf, nan: no size equals it
                return False
            o = int(o)  # x.shape[0] == 3.0 is N == 3
        return NotImplemented if isinstance(o, float) else self._cmp(o, "==", _eq)

    __lt__ = functools.partialmethod(_cmp, name="<", fn=operator.lt)
    __le__ = functools.partialmethod(_cmp, name="<=", fn=operator.le)
    __gt__ = functools.partialmethod(_cmp, name=">", fn=operator.gt)
    __ge__ = functools.partialmethod(_cmp, name=">=", fn=operator.ge)

    def __bool__(self) -> bool:
        try:
            return bool(self.dim)
        except InconclusiveError:
            return self._cmp(0, "!=", lambda a, b: not _eq(a, b))  # Dim's != is structural


def _extreme(builtin: Callable[..., Any], op: Callable[[Any, Any], bool]) -> Callable[..., Any]:
    """``max``/``min`` of sizes: decided on canonical forms, else assumed on the witness (a tie
    is right either way).  A long list is left to Python's: a scan of it cost 5x the ``max``."""
    def pick(*args: Any, **kw: Any) -> Any:  # every max() while verify runs: checks cheap
        if kw or _TRACER.get() is None:  # other threads, key=, default=
            return builtin(*args, **kw)
        items = args[0] if _LEN(args) == 1 and isinstance(args[0], (list, tuple)) else args
        if not 2 <= _LEN(items) <= 16 or \
                not any(map(isinstance, items, itertools.repeat(SymSize))) or \
                not all(map(isinstance, items, itertools.repeat((SymSize, int)))) or \
                any(map(isinstance, items, itertools.repeat(bool))):
            return builtin(*args)
        best = items[0]
        for x in items[1:]:  # the size on the left of an assumption: "N - 2 >= 0"
            if not _holds(op, as_dim(best), as_dim(x)) and (
                    op(x, best) if isinstance(x, SymSize) else not op(best, x)):
                best = x
        return best

    return functools.wraps(builtin)(pick)


sym_max, sym_min = _extreme(max, operator.ge), _extreme(min, operator.le)


class SymRange:
    """``range(T)`` with a symbolic bound: a loop over the witness, an index like ``arange``."""

    __slots__ = ("start", "step", "stop")

    def __init__(self, *args: Any):
        start, stop, step = (0, args[0], 1) if _LEN(args) == 1 else (*args[:2], *args[2:], 1)[:3]
        self.start, self.stop, self.step = as_dim(start), as_dim(stop), int(step)

    def _concrete(self, count: bool = True) -> range:
        t = tracer()
        if self.step == 1 and count:
            t.begin(self.stop - self.start)  # a list of one item per step: n items
        return _RANGE(t.value(self.start), t.value(self.stop), self.step)

    def _index(self, i: int, ahead: list[Any] | None = None) -> Any:
        """A number in the loop's first half, else counted from the symbolic end (``T - 1``),
        so ``t + 1 < T`` and ``x[t + 1]`` are decided."""
        t = tracer()
        lo, hi = t.value(self.start), t.value(self.stop)
        if self.step != 1 or i - lo <= hi - 1 - i:
            if self.start.constant is None:
                return SymSize(self.start + (i - lo))
            return _LoopInt(i, self.stop, hi - 1 - i, ahead) if self.step == 1 else i
        return _LateStep(self.stop - (hi - i), None if self.start.constant is None else
                         lo + (hi - 1 - lo) // 2)

    def _loop(self, backward: bool) -> Iterator[Any]:
        """Its steps, counted as they begin (:func:`counted_loop`): not if zip pulls them."""
        values = self._concrete(count=False)
        steps = self._steps(reversed(values) if backward else values)
        return counted_loop(self.stop - self.start, steps) if self.step == 1 else steps

    __iter__ = functools.partialmethod(_loop, False)
    __reversed__ = functools.partialmethod(_loop, True)

    def _steps(self, values: Any) -> Any:
        """The loop's steps; ``x[t + 1]`` at a first-half step is in range as the last steps
        check, so a loop left before them (``break``) assumes it."""
        ahead: list[Any] = []
        ended = False
        try:
            for i in values:
                step = self._index(i, ahead)
                ended = ended or not isinstance(step, _LoopInt)
                yield step
        finally:
            t = _TRACER.get()  # None: the collector closed it after its trace
            if t is not None and not ended:
                for where, text in reversed(ahead):  # a line's last step: its largest
                    if where not in t.assumed:
                        t.report("assumption", f"assumes {text}: an index ahead of a loop "
                                 "step, checked at the loop's last steps, which did not run",
                                 where)

    def __len__(self) -> int:
        return _LEN(self._concrete())

    def __getitem__(self, i: Any) -> Any:
        return self._concrete()[i]

    def __contains__(self, x: Any) -> bool:
        return x in self._concrete()

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return np.asarray(self._concrete(), dtype=dtype)

    def __repr__(self) -> str:
        return f"range({self.start}, {self.stop}, {self.step})"


_LEN, _RANGE = len, range


def counted_loop(d: Dim, steps: Iterator[Any]) -> Iterator[Any]:
    """A loop of ``d`` steps, begun and ended on the tracer with, run to its end, where each
    step began (:meth:`Tracer.loop_of`): a list of one item per step joins to ``d``."""
    t = tracer()
    loop, marks = t.begin(d), []
    try:
        for step in steps:
            marks.append(t.steps)
            yield step
        loop.marks = [*marks, t.steps]  # not if left early (break, an error)
    finally:
        loop.end = t.steps


class _LoopInt(int):
    """A loop index over ``range(T)``, that indexes an axis of size ``T`` safely.  A first-half
    step has ``slack``, the steps after it at the witness, so ``t + 1`` still indexes safely and
    ``t == T - 1`` is decided by its position (the last steps count from the symbolic end)."""

    bound: Dim
    slack: int | None
    ahead: list[Any] | None  # its loop's ``x[t + 1]`` taken as in range (see SymRange._steps)
    past: bool  # ``t + 1``, not ``t``

    def __new__(cls, value: int, bound: Dim, slack: int | None = None,
                ahead: list[Any] | None = None, past: bool = False) -> _LoopInt:
        out = super().__new__(cls, value)
        out.bound, out.slack, out.ahead, out.past = bound, slack, ahead, past
        return out

    def __add__(self, o: Any) -> Any:
        if type(o) is int and self.slack is not None and 0 <= o <= self.slack:
            return _LoopInt(int(self) + o, self.bound, self.slack - o, self.ahead, o > 0)
        return int(self) + o

    __radd__ = __add__

    def __sub__(self, o: Any) -> Any:
        if type(o) is int and 0 <= o <= self:
            return _LoopInt(int(self) - o, self.bound,
                            None if self.slack is None else self.slack + o)
        return int(self) - o


def _near_end(end: Dim, k: Any) -> bool:
    """``k`` a first-half loop step and ``end`` its bound less at most its slack: the witness
    decides ``t < T - 1`` as every long loop does (``t > T - 20`` is assumed)."""
    if not isinstance(k, _LoopInt) or k.slack is None:
        return False
    offset = (end - k.bound).constant
    return offset is not None and -offset <= k.slack


class _LateStep(SymSize):
    """A loop step counted from the end (``T - 5``), that knows the loop's last numbered step."""

    __slots__ = ("numbered",)

    def __init__(self, dim: Dim, numbered: int | None):
        super().__init__(dim)
        self.numbered = numbered


def _numbered(k: SymSize, c: Any) -> bool:
    """``k`` a late loop step and ``c`` at most the last numbered step: the witness decides
    ``t > 0`` as every long loop does, since at a size where ``k`` is at most the last numbered
    step it runs as that numbered step ran, and above it as ``k`` ran."""
    last = getattr(k, "numbered", None)
    return last is not None and type(c) is int and c <= last


class StandIn(type):
    """The type of a patched builtin: ``isinstance(r, range)`` stays true for its ``kinds``."""

    kinds: tuple[type, ...]

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, cls.kinds)

    def __subclasscheck__(cls, sub: Any) -> bool:
        return issubclass(sub, cls.kinds)


class sym_range(metaclass=StandIn):  # lower case: it stands in for the builtin
    """``range()`` during verification: a :class:`SymRange` of a symbolic bound; of a loop
    index (``range(j)`` inside ``for j in range(K)``), indices below the outer bound."""

    def __new__(cls, *args: Any) -> Any:
        if _TRACER.get() is not None and any(isinstance(a, SymSize) for a in args):
            return _sized_steps(*args) if _LEN(args) == 3 and isinstance(args[2], SymSize) \
                else SymRange(*args)
        stop = args[0] if _LEN(args) == 1 else args[1] if _LEN(args) == 2 else None
        if _TRACER.get() is not None and isinstance(stop, _LoopInt):
            return _LoopRange(_LoopInt(i, stop.bound) if i >= 0 else i for i in _RANGE(*args))
        out, t = _RANGE(*args), _TRACER.get()
        caller = sys._getframe(1).f_code.co_filename
        if t is not None and out.step == 1 and _LEN(out) >= 8 and findings.user_code(caller):
            t.begin(None, _LEN(out))  # the user's loop of a literal count: no size's
        return out


class _LoopRange(list[Any]):
    """``range(j)`` of a loop index ``j``: its indices, each below ``j``'s bound."""


def _sized_steps(start: Any, stop: Any, step: SymSize) -> Any:
    """``range(0, 4 * mb, mb)``: a step that is a size must not be 0; where it divides the span
    into one count at every size, each step is a size (``2 * mb``), else the witness's."""
    nonzero_size(step.dim, "range() raises ValueError where its step is 0")
    count = exact_quotient(as_dim(stop) - as_dim(start), step.dim)
    if count is None or count.constant is None:
        return SymRange(start, stop, step)
    return _LoopRange(SymSize(as_dim(start) + step.dim * k) for k in _RANGE(count.constant))


sym_range.kinds = (_RANGE, SymRange, _LoopRange)


def _eq(a: Any, b: Any) -> bool:
    """``==`` decided where the sizes differ by a constant or one is below the other."""
    if isinstance(a, Dim) and (a - b).constant is None:
        if _holds(operator.lt, a, b) or _holds(operator.gt, a, b):
            return False
        raise InconclusiveError(f"{a} == {b}")
    return a == b


def _holds(fn: Callable[[Dim, Dim], bool], a: Dim, b: Dim) -> bool:
    """Whether ``fn(a, b)`` holds for all sizes (False where it depends on them)."""
    try:
        return fn(a, b)
    except InconclusiveError:
        return False


def nonzero_size(d: Dim, why: str) -> bool:
    """Whether ``d`` is not 0: decided on canonical forms or as a product of sizes known
    positive (:attr:`Tracer.positive`), else on the witness, assumed."""
    if _positive(d, tracer().positive) or _holds(operator.le, d, -ONE):
        return True
    w = tracer().value(d)
    if w:
        _assume(f"{d} >= 1" if w > 0 else f"{d} <= -1", True, why)
    return w != 0


def _positive(d: Dim, facts: set[Dim]) -> bool:
    """Whether ``d`` is at least 1 canonically or as a known-positive size times such a
    product (``N*(H - K + 1)**2`` where ``H - K + 1`` is: a fact may divide twice), or plus
    a size at least 0 (``T - S*(T // S) + 2``)."""
    return _holds(operator.ge, d, ONE) or any(  # each quotient of lower degree: it ends
        _holds(operator.ge, d, f) or ((q := exact_quotient(d, f)) is not None and
                                      _positive(q, facts))
        for f in facts if f.constant is None and f.symbols <= d.symbols)  # only d's own


def decide(text: str, witness: bool, sides: tuple[Dim, str, Dim] | None = None,
           why: str | None = None) -> bool:
    """A condition the sizes do not decide: taken at the witness, an assumption, or as a
    re-trace forces it (:mod:`tensig.check.guards`: the witness's side reached a user's
    ``raise``), alike wherever the same condition is asked.  Forced to say a remainder is 0
    (``D % 4 == 0``), that division is required (:meth:`Tracer.divisible`).  Only the user's
    own conditions are forced, never a library's (its code paths have guards of its own)."""
    t, caller = tracer(), sys._getframe(1)
    while caller.f_code.co_filename == __file__:  # __bool__ -> _cmp -> decide
        caller = caller.f_back  # type: ignore[assignment]
    if text not in t.forced:
        where = t.where()
        if findings.user_code(caller.f_code.co_filename):
            t.guesses.pop(text, None)  # the latest last
            t.guesses[text] = (witness, where, sides)
        _assume(text, witness, why, where)
        return witness
    value, why = t.forced[text]
    if not (sides and sides[1] in ("==", "!=") and value == (sides[1] == "==")
            and t.divisible(sides[0] - sides[2], f": {why}")):
        _assume(text, value, why)
    return value


def _assume(text: str, witness: bool, why: str | None = None, where: Any = None) -> None:
    """A size condition the code branches on: reported as an assumption (a warning)."""
    cond = text if witness else f"not ({text})"
    why = why or "a shape-dependent branch or size condition, traced for one side only"
    t = tracer()
    where, key = where or t.where(), _NUMBER.sub("#", f"assumes {cond}")
    if any(_NUMBER.sub("#", c) == key for c in t.assumed.get(where, ())):
        return  # once per line and condition: a loop over a witness repeats it, a step apart
    t.report("assumption", f"assumes {cond}: {why}", where)


_NUMBER = re.compile(r"\b\d+\b")  # what a loop's steps change in a condition ("5 < T")


def require_divisible(p: Dim, k: int, floor: bool = False,
                      error: tuple[str, str] | None = None) -> Dim:
    """``p // k``, a division the code relies on being exact (``D // heads``): a requirement
    unless one period shows it exact at every size.  Exact at no size (``2*N + 1`` by 2), an
    operation that fails there reports ``error`` (kind, the operation in words), else (torch's
    ``chunk``) the trace stops: no assumption no size meets.  With ``floor`` (``T // 2``) only
    where a check relies on it (:meth:`Tracer.require`), and not at all where none is exact."""
    if (p % k).constant == 0:
        return p // k  # exact in canonical form
    residues = _residues(p, k)  # None: not told
    never = residues is not None and 0 not in residues
    if never and error is not None:
        tracer().report(error[0], f"{error[1]} needs {p} divisible by {k}, which no size is")
    elif never and not floor:
        raise Unsupported(f"a split of {p} into {k} unequal pieces")
    elif residues != {0} and not never:
        tracer().require(p, k, floor)
    return p // k


@functools.lru_cache(maxsize=4096)  # up to RESIDUE_CAP evaluations: a loop's reshapes ask again
def _residues(p: Dim, k: int) -> frozenset[int] | None:
    """The values of ``p % k`` at all sizes, from one period (None past :data:`RESIDUE_CAP`
    points): Swin's padded ``H + (7 - H % 7) % 7`` is a multiple of 7 at every size."""
    cycle, names = math.lcm(k * grain(p), period(p)), sorted(p.symbols)
    if cycle ** len(names) > RESIDUE_CAP:
        return None
    return frozenset(p.evaluate(dict(zip(names, v, strict=True))) % k
                     for v in itertools.product(range(1, cycle + 1), repeat=len(names)))


class Drawn(int):
    """An integer drawn below a symbolic bound (``rng.integers(0, H - k + 1)``): its least, that
    keeps its largest through ``+``/``-``, so ``x[i:i + k]`` is ``k`` long where that fits."""

    largest: Dim

    def __new__(cls, value: int, largest: Any) -> Drawn:
        out = super().__new__(cls, value)
        out.largest = as_dim(largest)
        return out

    def __add__(self, o: Any) -> Any:
        if isinstance(o, SymSize):  # x[i:i + len(w)]
            return DrawnSize(as_dim(int(self)) + o.dim, self.largest + o.dim)
        return Drawn(int(self) + o, self.largest + o) if type(o) is int else int(self) + o

    __radd__ = __add__

    def __sub__(self, o: Any) -> Any:
        return Drawn(int(self) - o, self.largest - o) if type(o) is int else int(self) - o

    def __mul__(self, o: Any) -> Any:
        return Drawn(int(self) * o, self.largest * o) if type(o) is int and o > 0 else \
            int(self) * o

    __rmul__ = __mul__


class DrawnSize(SymSize):
    """A :class:`Drawn` plus a size (``i + len(w)``), that keeps its largest too."""

    __slots__ = ("largest",)

    def __init__(self, dim: Dim, largest: Dim):
        super().__init__(dim)
        self.largest = largest
