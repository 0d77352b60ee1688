"""Symbolic arrays: run array code once with sizes that are symbols, for all sizes at once.

A :class:`SymArray` has a shape made of :class:`~tensig.core.dims.Dim` values and no data.  It
answers NumPy's protocols (``__array_ufunc__``, ``__array_function__``), torch's
(``__torch_function__``) and the usual array methods, computing each result's symbolic shape
and recording a :class:`Finding` whenever an operation needs two different dimensions to be
equal, stretches both operands of a broadcast into an outer product, reshapes where a transpose
was meant, or silently assumes a size condition.  Sizes read from ``.shape`` are
:class:`SymSize` objects: they do integer arithmetic symbolically and, where Python needs a real
number (``math.sqrt``, ``range``), give a *witness* value chosen so that no two dimensions
collide.

Supported operations are listed in :data:`SUPPORTED`; anything else stops the trace with a
note naming the operation (the report is then incomplete, never silently wrong).
"""

from __future__ import annotations

import contextvars
import itertools
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from tensig.check import findings
from tensig.core.dims import Dim, FloorDiv
from tensig.core.errors import InconclusiveError

__all__ = ["SUPPORTED", "Finding", "SymArray", "SymSize", "TraceLimit", "Tracer", "Unsupported"]

ONE = Dim.const(1)
_TENSIG_DIR = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class Finding:
    """One thing verification found, at a source line of the verified code.

    ``kind`` is a registered name in :mod:`tensig.findings` (``"broadcast"``, ``"reorder"``,
    ...); an unregistered one raises ``KeyError`` at construction (a programming error).
    ``code`` is the kind's stable code (``TS101``).
    """

    kind: str
    message: str
    file: str | None = None
    line: int | None = None
    severity: str = "error"  # or "warning" (assumptions)

    def __post_init__(self) -> None:
        findings.rule(self.kind)

    @property
    def code(self) -> str:
        return findings.rule(self.kind).code

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}: " if self.file else ""
        return f"{where}{self.severity}: {self.message}  [{self.code}]"


MAX_STEPS = 1_000_000  # symbolic arrays one trace may make (a bound on a loop's work)


class TraceLimit(BaseException):
    """The trace ran past its step or time budget (a ``BaseException``: user code's
    ``except Exception`` must not swallow it)."""


class Unsupported(Exception):
    """An operation that verification does not model (the trace stops there)."""


@dataclass
class Tracer:
    """Collects findings while a function runs on symbolic arrays."""

    witness: dict[str, int]
    findings: list[Finding] = field(default_factory=list)
    fresh: int = 0
    largest: Any = None  # the largest intermediate (a SymArray), for pricing
    divisors: list[tuple[Dim, int]] = field(default_factory=list)  # assumed exact divisions
    leaks: dict[int, Dim] = field(default_factory=dict)  # witness -> symbol turned into an int
    steps: int = 0  # symbolic arrays made so far (see step)
    max_steps: int = field(default_factory=lambda: MAX_STEPS)

    def equal_under_assumptions(self, a: Dim, b: Dim) -> bool:
        """``a == b`` canonically, or at sizes where every assumed division is exact.

        Two assignments that make each divided symbol a multiple of all divisors stand in for
        the assumption (a heuristic: exact for divisions of single symbols, the usual case).
        """
        if a == b:
            return True
        if not self.divisors:
            return False
        for env in self.assumption_envs():
            try:
                if a.evaluate(env) != b.evaluate(env):
                    return False
            except ValueError:
                return False
        return True

    def assumption_envs(self) -> list[dict[str, int]]:
        """Two size assignments where every assumed division is exact."""
        lcm = 1
        for _, k in self.divisors:
            lcm = lcm * k // math.gcd(lcm, k)
        return [{n: (w + bump) * lcm for n, w in self.witness.items()} for bump in (0, 1)]

    def where(self) -> tuple[str | None, int | None]:
        """The innermost frame in the user's code: a finding raised while NumPy, torch or JAX
        run their own Python code is the user's line that called into the library."""
        f = sys._getframe(1)
        while f is not None:
            if findings.user_code(f.f_code.co_filename):
                return f.f_code.co_filename, f.f_lineno
            f = f.f_back
        return None, None

    def report(self, kind: str, message: str, severity: str | None = None) -> None:
        """Record a finding of a registered ``kind`` (its default severity unless given)."""
        file, line = self.where()
        finding = Finding(kind, message, file, line,
                          severity or findings.rule(kind).severity)
        if finding not in self.findings:
            self.findings.append(finding)

    def step(self) -> None:
        """Count one symbolic operation; past ``max_steps`` the trace stops (a loop that runs
        at the witness sizes for too long is reported, never waited for)."""
        self.steps += 1
        if self.steps > self.max_steps:
            raise TraceLimit(f"the trace passed {self.max_steps} symbolic operations")

    def new_dim(self, hint: str) -> Dim:
        """A fresh existential dimension (a data-dependent size, like a Remora box)."""
        self.fresh += 1
        name = f"{hint}{self.fresh}"
        self.witness[name] = 3
        return Dim.symbol(name)

    def value(self, d: Dim) -> int:
        return d.evaluate(self.witness)

    def leak(self, d: Dim) -> int:
        """A signature symbol turned into a Python int (``int(T)``, ``pe[:T]`` on a concrete
        array): its witness is remembered, so a concrete axis of exactly that size can be read
        back as the symbol (witnesses are distinct primes, so the reading is unambiguous)."""
        w = self.value(d)
        if len(d.symbols) == 1 and d == Dim.symbol(next(iter(d.symbols))) and w >= 11:
            self.leaks[w] = d
        return w


_TRACER: contextvars.ContextVar[Tracer | None] = contextvars.ContextVar("tensig_tracer",
                                                                       default=None)


def tracer() -> Tracer:
    t = _TRACER.get()
    if t is None:
        raise RuntimeError("symbolic arrays are only usable inside tensig.verify")
    return t


# --------------------------------------------------------------------------------------------
# Sizes
# --------------------------------------------------------------------------------------------


def as_dim(x: Any) -> Dim:
    if isinstance(x, SymSize):
        return x.dim
    if isinstance(x, Dim):
        return x
    if isinstance(x, bool):
        raise TypeError("a size cannot be a bool")
    return Dim.const(int(x))


class SymSize:
    """A size read from a symbolic shape: symbolic in arithmetic, a witness where Python
    needs a number (``range``, ``math.sqrt``, indexing a list)."""

    __slots__ = ("dim",)

    def __init__(self, dim: Dim):
        self.dim = dim

    # numbers Python insists on
    def __index__(self) -> int:
        return tracer().leak(self.dim)

    __int__ = __index__

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        """``np.sqrt(d)``, ``np.log(T)``: NumPy math on a size gives a witness number."""
        import numpy as np

        return np.asarray(int(self), dtype=dtype)

    def __float__(self) -> float:
        return float(tracer().value(self.dim))

    def __repr__(self) -> str:
        return f"SymSize({self.dim})"

    __str__ = __repr__

    def __hash__(self) -> int:
        return hash(self.dim)

    # arithmetic stays symbolic
    def _op(self, other: Any, fn: Callable[[Dim, Any], Dim]) -> Any:
        if isinstance(other, float):
            return fn(Dim.const(tracer().value(self.dim)), other)  # a float: leave symbols
        if isinstance(other, SymSize | int | Dim) and not isinstance(other, bool):
            return SymSize(fn(self.dim, as_dim(other)))
        return NotImplemented

    def __add__(self, o: Any) -> Any:
        return self._op(o, lambda a, b: a + b)

    def __radd__(self, o: Any) -> Any:
        return self._op(o, lambda a, b: b + a)

    def __sub__(self, o: Any) -> Any:
        return self._op(o, lambda a, b: a - b)

    def __rsub__(self, o: Any) -> Any:
        return self._op(o, lambda a, b: b - a)

    def __mul__(self, o: Any) -> Any:
        return self._op(o, lambda a, b: a * b)

    def __rmul__(self, o: Any) -> Any:
        return self._op(o, lambda a, b: b * a)

    def __floordiv__(self, o: Any) -> Any:
        if isinstance(o, int) and o > 0:
            if (self.dim % o).constant != 0:
                require_divisible(self.dim, o)
            return SymSize(self.dim // o)
        return float(self) // o if isinstance(o, float) else int(self) // int(o)

    def __truediv__(self, o: Any) -> float:
        return float(self) / float(o)

    def __rtruediv__(self, o: Any) -> float:
        return float(o) / float(self)

    def __mod__(self, o: Any) -> Any:
        if isinstance(o, int) and o > 0:
            return SymSize(self.dim % o)
        return int(self) % int(o)

    def __neg__(self) -> Any:
        return SymSize(-self.dim)

    def __pow__(self, o: Any) -> Any:
        if isinstance(o, int) and o >= 0:
            return SymSize(self.dim ** o)
        return float(self) ** o

    # comparisons: decided on canonical forms when possible, else an assumption
    def _cmp(self, other: Any, name: str, fn: Callable[[Any, Any], bool]) -> bool:
        if isinstance(other, float):
            return fn(float(self), other)
        if not isinstance(other, SymSize | int | Dim) or isinstance(other, bool):
            return NotImplemented
        a, b = self.dim, as_dim(other)
        try:
            decided: bool | None = fn(a, b)
        except InconclusiveError:
            decided = None
        witness = fn(tracer().value(a), tracer().value(b))
        if decided is None:
            _assume(f"{a} {name} {b}", None, witness)
            return witness
        return decided

    def __eq__(self, o: Any) -> bool:  # type: ignore[override]
        if isinstance(o, SymSize | int | Dim) and not isinstance(o, bool):
            a, b = self.dim, as_dim(o)
            if a == b:
                return True
            diff = a - b
            if diff.constant is not None:
                return False
            return self._cmp(o, "==", lambda x, y: _undecided_eq(x, y))
        return NotImplemented

    def __ne__(self, o: Any) -> bool:  # type: ignore[override]
        r = self.__eq__(o)
        return r if r is NotImplemented else not r

    def __lt__(self, o: Any) -> bool:
        return self._cmp(o, "<", lambda a, b: a < b)

    def __le__(self, o: Any) -> bool:
        return self._cmp(o, "<=", lambda a, b: a <= b)

    def __gt__(self, o: Any) -> bool:
        return self._cmp(o, ">", lambda a, b: a > b)

    def __ge__(self, o: Any) -> bool:
        return self._cmp(o, ">=", lambda a, b: a >= b)

    def __bool__(self) -> bool:
        try:
            return bool(self.dim)
        except InconclusiveError:
            return self._cmp(0, "!=", lambda a, b: a != b)


class SymRange:
    """``range(T)`` with a symbolic bound: a loop runs over the witness; as an index it is
    ``arange(T)``, so ``wpe[range(len(ids))]`` is ``[T, d]``."""

    __slots__ = ("start", "step", "stop")

    def __init__(self, *args: Any):
        start, stop, step = (0, args[0], 1) if _LEN(args) == 1 else (*args[:2], *args[2:], 1)[:3]
        self.start, self.stop, self.step = as_dim(start), as_dim(stop), int(step)

    def _concrete(self) -> range:
        t = tracer()
        return _RANGE(t.value(self.start), t.value(self.stop), self.step)

    def _index(self, i: int) -> Any:
        """Loop indices in the first half are numbers; in the second half they count from the
        symbolic end (``T - 1``, ``T - 2``), so ``t + 1 < T`` and ``x[t + 1]`` are decided."""
        t = tracer()
        lo, hi = t.value(self.start), t.value(self.stop)
        if self.step != 1 or i - lo <= hi - 1 - i:
            if self.start.constant is None:
                return SymSize(self.start + (i - lo))
            return _LoopInt(i, self.stop) if self.step == 1 else i
        return SymSize(self.stop - (hi - i))

    def __iter__(self) -> Any:
        return (self._index(i) for i in self._concrete())

    def __reversed__(self) -> Any:
        return (self._index(i) for i in reversed(self._concrete()))

    def __len__(self) -> int:
        return _LEN(self._concrete())

    def __getitem__(self, i: Any) -> Any:
        return self._concrete()[i]

    def __contains__(self, x: Any) -> bool:
        return x in self._concrete()

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy as np

        return np.asarray(self._concrete(), dtype=dtype)

    def __repr__(self) -> str:
        return f"range({self.start}, {self.stop}, {self.step})"

    def as_array(self) -> SymArray:
        if self.step == 1:
            return SymArray([self.stop - self.start], "i")
        return SymArray([tracer().new_dim("r")], "i")


_LEN, _RANGE = len, range


class _LoopInt(int):
    """A loop index over ``range(T)``: a number, that indexes an axis of size ``T`` safely."""

    bound: Dim

    def __new__(cls, value: int, bound: Dim) -> _LoopInt:
        out = super().__new__(cls, value)
        out.bound = bound
        return out


def sym_len(x: Any) -> Any:
    """``len()`` during verification: a symbolic array's first size stays a symbol."""
    if _TRACER.get() is not None:
        if isinstance(x, SymArray) and x.dims:
            return SymSize(x.dims[0]) if x.dims[0].constant is None else x.dims[0].constant
        if isinstance(x, SymRange) and x.step == 1:
            return SymSize(x.stop - x.start)
    return _LEN(x)


class _RangeType(type):
    """``isinstance(r, range)`` stays true while ``range`` is patched (library code asks)."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _RANGE | SymRange)

    def __subclasscheck__(cls, sub: Any) -> bool:
        return issubclass(sub, _RANGE | SymRange)


class sym_range(metaclass=_RangeType):  # lower case: it stands in for the builtin
    """``range()`` during verification: a symbolic bound gives a :class:`SymRange`."""

    def __new__(cls, *args: Any) -> Any:  # type: ignore[misc]
        if _TRACER.get() is not None and any(isinstance(a, SymSize) for a in args):
            return SymRange(*args)
        return _RANGE(*args)


def _undecided_eq(a: Any, b: Any) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    raise InconclusiveError(f"{a} == {b}")


def _assume(text: str, decided: bool | None, witness: bool, why: str | None = None) -> None:
    """A size condition the code branches on: reported as an assumption (a warning)."""
    if decided is True:
        return
    cond = text if witness else f"not ({text})"
    why = why or "a shape-dependent branch or size condition, traced for one side only"
    t = tracer()
    where = t.where()
    if any(f.kind == "assumption" and (f.file, f.line) == where for f in t.findings):
        return  # one assumption per line: a loop over a witness would repeat it per step
    t.report("assumption", f"assumes {cond}: {why}", severity="warning")


def require_divisible(p: Dim, k: int) -> None:
    """Exact division the code relies on (``D // heads``): reported once as a requirement."""
    t = tracer()
    t.divisors.append((p, k))
    t.report("assumption", f"requires {p} divisible by {k}", severity="warning")


# --------------------------------------------------------------------------------------------
# Arrays
# --------------------------------------------------------------------------------------------


class SymArray:
    """An array with a symbolic shape and no data.

    ``dims`` are canonical dimensions; ``kind`` is the dtype kind (``"f"``, ``"i"``, ``"b"``);
    ``loose`` marks size-1 axes that came from the outside (a signature's ``1``): stretching
    them is *implicit*, while a size-1 axis the code made itself (``None``, ``unsqueeze``,
    ``keepdims``) is an explicit request to broadcast.
    """

    __array_priority__ = 1000

    def __init__(self, dims: Iterable[Dim | int], kind: str = "f",
                 loose: frozenset[int] = frozenset(), name: str | None = None):
        self.dims = tuple(as_dim(d) for d in dims)
        self.kind = kind
        self.loose = loose
        self.name = name
        t = _TRACER.get()
        if t is not None:
            t.step()
        if t is not None and any(d.constant is None for d in self.dims):
            biggest = t.largest
            if biggest is None or _bigger(self, biggest, t):
                t.largest = self

    # -- describing ------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[Any, ...]:
        return tuple(SymSize(d) if d.constant is None else d.constant for d in self.dims)

    @property
    def ndim(self) -> int:
        return len(self.dims)

    @property
    def dtype(self) -> Any:
        """The library's own dtype object: torch's in torch code, else NumPy's (JAX uses
        NumPy's), so ``np.finfo(x.dtype)`` and ``F.linear(x, w.to(x.dtype))`` work."""
        if _TORCH_STYLE.get():
            from tensig.check import trace_torch as symbolic_torch
            return symbolic_torch.dtype_of(self)
        import numpy as np

        return np.dtype({"f": "float32", "i": "int64", "b": "bool"}.get(self.kind, "float32"))

    def __getattr__(self, name: str) -> Any:
        """torch tensor attributes and methods not defined here (torch code only)."""
        if name.startswith("_") or "torch" not in sys.modules or \
                not (_TORCH_STYLE.get() or _torch_only(name)):
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        from tensig.check import trace_torch as symbolic_torch
        return symbolic_torch.attribute(self, name)

    def size(self, dim: int | None = None) -> Any:  # torch's .size(); numpy's is .size attr
        if dim is None:
            return self.shape
        return self.shape[_axis(dim, self.ndim)]

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> Any:
        total = ONE
        for d in self.dims:
            total = total * d
        return SymSize(total)

    def __len__(self) -> int:
        if not self.dims:
            raise TypeError("len() of a 0-d array")
        return tracer().leak(self.dims[0])

    def __iter__(self) -> Any:
        """Rows along the first axis (``for row in X``, ``k, v = kv``): as many as its size,
        or its witness."""
        if not self.dims:
            raise TypeError("iteration over a 0-d array")
        n = self.dims[0]
        return (getitem(self, _LoopInt(i, n)) for i in _RANGE(tracer().value(n)))

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise Unsupported("converting a symbolic array to a concrete one (np.asarray, or "
                          "assigning it into a concrete array)")

    def __setitem__(self, key: Any, value: Any) -> None:
        """``out[t] = v``, ``x[:, 0] += v``: the value must broadcast into the target slice."""
        into(getitem(self, key), value, "an assignment")

    def _inplace(self, o: Any) -> SymArray:
        into(self, o, "an in-place operation")
        return self

    __iadd__ = __isub__ = __imul__ = __itruediv__ = __ifloordiv__ = __ipow__ = _inplace

    def __repr__(self) -> str:
        return f"SymArray[{', '.join(map(str, self.dims))}]"

    def _like(self, dims: Iterable[Dim | int], kind: str | None = None,
              loose: frozenset[int] = frozenset()) -> SymArray:
        return SymArray(dims, kind or self.kind, loose)

    # -- elementwise -----------------------------------------------------------------------
    def _binary(self, other: Any, kind: str | None = None, reverse: bool = False) -> SymArray:
        a, b = (other, self) if reverse else (self, other)
        return elementwise([a, b], kind)

    def __add__(self, o: Any) -> SymArray:
        return self._binary(o)

    def __radd__(self, o: Any) -> SymArray:
        return self._binary(o, reverse=True)

    def __sub__(self, o: Any) -> SymArray:
        return self._binary(o)

    def __rsub__(self, o: Any) -> SymArray:
        return self._binary(o, reverse=True)

    def __mul__(self, o: Any) -> SymArray:
        return self._binary(o)

    def __rmul__(self, o: Any) -> SymArray:
        return self._binary(o, reverse=True)

    def __truediv__(self, o: Any) -> SymArray:
        return self._binary(o, "f")

    def __rtruediv__(self, o: Any) -> SymArray:
        return self._binary(o, "f", reverse=True)

    def __floordiv__(self, o: Any) -> SymArray:
        return self._binary(o)

    def __mod__(self, o: Any) -> SymArray:
        return self._binary(o)

    def __pow__(self, o: Any) -> SymArray:
        return self._binary(o)

    def __rpow__(self, o: Any) -> SymArray:
        return self._binary(o, reverse=True)

    def __lt__(self, o: Any) -> SymArray:  # type: ignore[override]
        return self._binary(o, "b")

    def __le__(self, o: Any) -> SymArray:
        return self._binary(o, "b")

    def __gt__(self, o: Any) -> SymArray:
        return self._binary(o, "b")

    def __ge__(self, o: Any) -> SymArray:
        return self._binary(o, "b")

    def __eq__(self, o: Any) -> SymArray:  # type: ignore[override]
        return self._binary(o, "b")

    def __ne__(self, o: Any) -> SymArray:  # type: ignore[override]
        return self._binary(o, "b")

    def __and__(self, o: Any) -> SymArray:
        return self._binary(o)

    def __or__(self, o: Any) -> SymArray:
        return self._binary(o)

    def __xor__(self, o: Any) -> SymArray:
        return self._binary(o)

    def __invert__(self) -> SymArray:
        return self._like(self.dims, loose=self.loose)

    def __neg__(self) -> SymArray:
        return self._like(self.dims, loose=self.loose)

    def __pos__(self) -> SymArray:
        return self

    def __abs__(self) -> SymArray:
        return self._like(self.dims, loose=self.loose)

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise Unsupported("the truth value of an array depends on its data")

    def __matmul__(self, o: Any) -> SymArray:
        return matmul(self, o)

    def __rmatmul__(self, o: Any) -> SymArray:
        return matmul(o, self)

    # -- methods shared by numpy and torch ---------------------------------------------------
    def __getitem__(self, key: Any) -> SymArray:
        return getitem(self, key)

    def reshape(self, *shape: Any, **kw: Any) -> SymArray:
        return reshape(self, _varargs(shape, kw.get("shape")))

    view = reshape

    def transpose(self, *axes: Any) -> SymArray:
        if len(axes) == 2 and all(isinstance(a, int) for a in axes) and \
                not (self.ndim == 2 and axes == (1, 0)):
            return swapaxes(self, axes[0], axes[1])  # torch's transpose(d0, d1)
        perm = _varargs(axes, None)
        return permute(self, perm if perm else tuple(reversed(range(self.ndim))))

    def permute(self, *axes: Any) -> SymArray:
        return permute(self, _varargs(axes, None))

    def swapaxes(self, a: int, b: int) -> SymArray:
        return swapaxes(self, a, b)

    @property
    def T(self) -> SymArray:
        return permute(self, tuple(reversed(range(self.ndim))))

    @property
    def mT(self) -> SymArray:
        return swapaxes(self, -1, -2)

    @property
    def at(self) -> Any:
        """JAX's functional update, ``x.at[idx].set(v)``: ``v`` must fit the slice."""
        from tensig.check.trace_jax import AtIndexer

        return AtIndexer(self)

    def unsqueeze(self, dim: int) -> SymArray:
        return expand_dims(self, dim)

    def squeeze(self, *axis: Any, **kw: Any) -> SymArray:
        ax = axis[0] if axis else kw.get("axis", kw.get("dim"))
        return squeeze(self, ax)

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> SymArray:
        s, e = _axis(start_dim, self.ndim), _axis(end_dim, self.ndim)
        merged = ONE
        for d in self.dims[s:e + 1]:
            merged = merged * d
        return self._like((*self.dims[:s], merged, *self.dims[e + 1:]))

    def expand(self, *sizes: Any) -> SymArray:
        target = [as_dim(s) if not (isinstance(s, int) and s == -1) else None
                  for s in _varargs(sizes, None)]
        off = len(target) - self.ndim
        dims = [self.dims[i - off] if t is None else t for i, t in enumerate(target)]
        return broadcast_to(self, dims)

    def expand_as(self, other: SymArray) -> SymArray:
        return broadcast_to(self, other.dims)

    def repeat(self, *reps: Any) -> SymArray:
        r = _varargs(reps, None)
        dims = (ONE,) * (len(r) - self.ndim) + self.dims
        return self._like([d * as_dim(n) for d, n in zip(dims, r, strict=True)])

    def masked_fill(self, mask: Any, value: Any) -> SymArray:
        into(self, mask, "masked_fill's mask")
        return self._like(self.dims, loose=self.loose)

    def sum(self, axis: Any = None, *args: Any, **kw: Any) -> SymArray:
        return reduce_(self, axis if axis is not None else kw.get("dim"), _keep(kw))

    def mean(self, axis: Any = None, *args: Any, **kw: Any) -> SymArray:
        return reduce_(self, axis if axis is not None else kw.get("dim"), _keep(kw), "f")

    def prod(self, axis: Any = None, **kw: Any) -> SymArray:
        return reduce_(self, axis if axis is not None else kw.get("dim"), _keep(kw))

    def std(self, axis: Any = None, **kw: Any) -> SymArray:
        return reduce_(self, axis if axis is not None else kw.get("dim"), _keep(kw), "f")

    var = std

    def max(self, axis: Any = None, *args: Any, **kw: Any) -> Any:
        return _minmax(self, axis if axis is not None else kw.get("dim"), _keep(kw))

    min = max

    def amax(self, axis: Any = None, **kw: Any) -> SymArray:
        return reduce_(self, axis if axis is not None else kw.get("dim"), _keep(kw))

    amin = amax

    def argmax(self, axis: Any = None, **kw: Any) -> SymArray:
        return reduce_(self, axis if axis is not None else kw.get("dim"), _keep(kw), "i")

    argmin = argmax

    def all(self, axis: Any = None, **kw: Any) -> SymArray:
        return reduce_(self, axis if axis is not None else kw.get("dim"), _keep(kw), "b")

    any = all

    def logsumexp(self, dim: Any, keepdim: bool = False) -> SymArray:
        return reduce_(self, dim, keepdim, "f")

    def norm(self, *args: Any, **kw: Any) -> SymArray:
        dim = kw.get("dim", args[1] if len(args) > 1 else None)
        return reduce_(self, dim, _keep(kw), "f")

    def softmax(self, dim: int, *args: Any, **kw: Any) -> SymArray:
        _axis(dim, self.ndim)
        return self._like(self.dims, "f", self.loose)

    log_softmax = softmax

    def split(self, size_or_sections: Any, dim: int = 0) -> tuple[SymArray, ...]:
        return split(self, size_or_sections, dim)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[SymArray, ...]:
        return chunk(self, chunks, dim)

    def _same(self, *args: Any, **kw: Any) -> SymArray:
        return self._like(self.dims, loose=self.loose)

    exp = log = sqrt = tanh = sigmoid = relu = abs = clamp = clip = contiguous = _same
    clone = detach = cpu = cuda = round = floor = ceil = sin = cos = rsqrt = _same
    copy = numpy = square = neg = _same

    def _to_float(self, *args: Any, **kw: Any) -> SymArray:
        return self._like(self.dims, "f", self.loose)

    float = double = half = bfloat16 = _to_float

    def long(self, *args: Any, **kw: Any) -> SymArray:
        return self._like(self.dims, "i", self.loose)

    int = long

    def bool(self, *args: Any, **kw: Any) -> SymArray:
        return self._like(self.dims, "b", self.loose)

    def to(self, *args: Any, **kw: Any) -> SymArray:
        kind = self.kind
        for a in (*args, kw.get("dtype")):
            # x.to(other): its dtype (a numpy dtype has a .shape too, but no .dtype)
            if isinstance(a, SymArray) or (hasattr(a, "shape") and hasattr(a, "dtype")):
                a = a.kind if isinstance(a, SymArray) else a.dtype
                a = {"f": "float", "i": "int", "b": "bool"}.get(a, a)
            text = str(a)
            if "float" in text or "half" in text:
                kind = "f"
            elif "int" in text or "long" in text:
                kind = "i"
            elif "bool" in text:
                kind = "b"
        return self._like(self.dims, kind, self.loose)

    def astype(self, dtype: Any, **kw: Any) -> SymArray:
        return self.to(dtype)

    type_as = _same

    # -- the protocols -----------------------------------------------------------------------
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if kwargs.get("out") is not None:
            raise Unsupported(f"numpy.{ufunc.__name__}(out=...)")
        if method == "__call__":
            if ufunc.__name__ == "matmul":
                return matmul(*inputs)
            kind = "b" if ufunc.__name__ in _BOOL_UFUNCS else \
                ("f" if ufunc.__name__ in _FLOAT_UFUNCS else None)
            if ufunc.nout != 1:
                raise Unsupported(f"numpy.{ufunc.__name__} with {ufunc.nout} outputs")
            return elementwise(list(inputs), kind)
        if method == "reduce":
            (x,) = inputs
            return reduce_(_sym(x), kwargs.get("axis", 0), kwargs.get("keepdims", False))
        if method == "accumulate":
            return SymArray(_sym(inputs[0]).dims, _sym(inputs[0]).kind)
        if method == "outer":  # np.subtract.outer(a, b): an outer product asked for by name
            a, b = _sym(inputs[0]), _sym(inputs[1])
            return SymArray(a.dims + b.dims, "b" if ufunc.__name__ in _BOOL_UFUNCS else a.kind)
        raise Unsupported(f"numpy.{ufunc.__name__}.{method}")

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        sub = str(getattr(func, "__module__", "")).removeprefix("numpy").strip(".")
        impl = NUMPY.get(f"{sub}.{func.__name__}") if sub and "_" not in sub[:1] else None
        impl = impl or NUMPY.get(func.__name__)
        if impl is None:  # not modelled by hand: fit its sizes from witness evaluations
            from tensig.check.trace_numpy import fitted_numpy

            return fitted_numpy(func, args, kwargs)
        return impl(*args, **kwargs)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        impl = TORCH.get(name)
        if impl is None:  # torch's long tail: by hand, a SymArray method, or fitted on meta
            from tensig.check import trace_torch as symbolic_torch
            return symbolic_torch.dispatch(func, tuple(args), kwargs)
        return impl(*args, **kwargs)


def _torch_only(name: str) -> bool:
    """A torch tensor attribute NumPy arrays lack (``x.type()``), read even in NumPy style."""
    import numpy as np

    return not hasattr(np.ndarray, name)


def _differ(a: Dim, b: Dim) -> bool:
    """Different sizes, even where every recorded divisibility assumption holds."""
    return a != b and not tracer().equal_under_assumptions(a, b)


def _bigger(a: SymArray, b: SymArray, t: Tracer) -> bool:
    """Compare element counts at large sizes, so the symbolic degree decides."""
    big = {name: 1000 * w for name, w in t.witness.items()}

    def n(x: SymArray) -> int:
        total = 1
        for d in x.dims:
            total *= d.evaluate(big)
        return total

    return n(a) > n(b)


_BOOL_UFUNCS = {"less", "less_equal", "greater", "greater_equal", "equal", "not_equal",
                "logical_and", "logical_or", "logical_not", "logical_xor", "isnan", "isinf",
                "isfinite", "signbit"}
_FLOAT_UFUNCS = {"true_divide", "divide", "exp", "log", "sqrt", "tanh", "sin", "cos",
                 "exp2", "log2", "log10", "log1p", "expm1", "reciprocal", "arctan", "power"}


def _keep(kw: dict[str, Any]) -> bool:
    return bool(kw.get("keepdims", kw.get("keepdim", False)))


def _varargs(args: Sequence[Any], kw: Any) -> tuple[Any, ...]:
    if kw is not None:
        return tuple(kw)
    if len(args) == 1 and isinstance(args[0], tuple | list):
        return tuple(args[0])
    if len(args) == 1 and hasattr(args[0], "__iter__") and not isinstance(args[0], SymArray):
        return tuple(args[0])
    return tuple(args)


def _axis(a: Any, ndim: int) -> int:
    a = int(a)
    if not -ndim <= a < max(ndim, 1):
        raise IndexError(f"axis {a} is out of range for an array of rank {ndim}")
    return a % ndim if ndim else 0


def _sym(x: Any) -> SymArray:
    """A symbolic view of any operand: SymArray, real array (constant sizes) or scalar."""
    if isinstance(x, SymArray):
        return x
    if isinstance(x, SymRange):
        return x.as_array()
    if isinstance(x, SymSize):  # a size in arithmetic with arrays: an integer scalar
        return SymArray((), "i")
    if isinstance(x, int | float | bool | complex) or x is None:
        kind = "b" if isinstance(x, bool) else ("i" if isinstance(x, int) else "f")
        return SymArray((), kind)
    shape = getattr(x, "shape", None)
    if shape is None:
        if isinstance(x, list | tuple | _RANGE):
            import numpy as np

            return _sym(np.asarray(x))
        raise Unsupported(f"an operand of type {type(x).__name__}")
    dtype = str(getattr(x, "dtype", "float"))
    kind = "b" if "bool" in dtype else ("i" if "int" in dtype else "f")
    dims: tuple[Dim | int, ...] = tuple(int(s) for s in shape)
    t = _TRACER.get()
    if t is not None and t.leaks and any(s in t.leaks for s in dims):
        dims = tuple(_read_leak(t, int(s)) for s in dims)
    return SymArray(dims, kind, frozenset())


def _read_leak(t: Tracer, size: int) -> Dim | int:
    """A concrete axis whose size is a symbol's witness came from that symbol (``pe[:T]`` on
    a concrete table, ``np.zeros(int(T))``): read it as the symbol, under an assumption."""
    d = t.leaks.get(size)
    if d is None:
        return size
    t.report("assumption", f"a concrete array's axis of size {size} is read as {d}: {d} was "
                           "turned into a number (a concrete buffer sliced or built by it); "
                           f"assumes {d} is within the concrete array's bounds",
             severity="warning")
    return d


# --------------------------------------------------------------------------------------------
# Broadcasting and the checks it carries
# --------------------------------------------------------------------------------------------


def elementwise(operands: list[Any], kind: str | None = None, what: str = "an elementwise "
                "operation") -> SymArray:
    arrays = [_sym(x) for x in operands]
    dims, loose = broadcast([a for a in arrays], what)
    if kind is None:
        kinds = {a.kind for a in arrays if a.dims or isinstance(a, SymArray)}
        kind = "f" if "f" in kinds else ("i" if "i" in kinds else "b")
    return SymArray(dims, kind, loose)


def broadcast(arrays: list[SymArray], what: str) -> tuple[tuple[Dim, ...], frozenset[int]]:
    """NumPy's rule, right-aligned, with three checks the rule itself does not make."""
    n = max((a.ndim for a in arrays), default=0)
    out: list[Dim] = []
    implicit: list[set[int]] = [set() for _ in arrays]
    firm: list[set[int]] = [set() for _ in arrays]
    loose_out: set[int] = set()
    for pos in range(n):
        sizes = []
        for a in arrays:
            j = pos - (n - a.ndim)
            sizes.append(None if j < 0 else (a.dims[j], j in a.loose))
        real = [s[0] for s in sizes if s is not None and s[0] != ONE]
        target = real[0] if real else ONE
        for d in real[1:]:
            if _differ(d, target):
                shapes = " and ".join(_shape_text(a) for a in arrays if a.ndim)
                tracer().report("broadcast", f"broadcasts {target} against {d} in {what} "
                                             f"(shapes {shapes})")
                break
        if target == ONE and all(s is None or s[1] for s in sizes if s is not None) and \
                any(s is not None and s[1] for s in sizes):
            loose_out.add(pos)
        for i, s in enumerate(sizes):
            if target == ONE:
                continue
            if s is None or (s[0] == ONE and s[1]):
                implicit[i].add(pos)
            elif s[0] != ONE:
                firm[i].add(pos)
        out.append(target)
    _two_sided(arrays, implicit, firm, out)
    return tuple(out), frozenset(loose_out)


def _two_sided(arrays: list[SymArray], implicit: list[set[int]], firm: list[set[int]],
               out: list[Dim]) -> None:
    """Both operands stretched by the rule itself: an outer product nobody asked for."""
    for i in range(len(arrays)):
        for k in range(len(arrays)):
            if i != k and implicit[i] & firm[k] and implicit[k] & firm[i]:
                tracer().report(
                    "outer-product",
                    f"implicit two-sided broadcast: {_shape_text(arrays[i])} and "
                    f"{_shape_text(arrays[k])} become [{', '.join(map(str, out))}], an outer "
                    "product (expand one side explicitly with None/unsqueeze if that is meant)")
                return


def _shape_text(a: SymArray) -> str:
    return "[" + ", ".join(map(str, a.dims)) + "]"


def into(target: SymArray, x: Any, what: str) -> None:
    """``x`` must broadcast into ``target``'s shape without changing it."""
    dims, _ = broadcast([target, _sym(x)], what)
    if dims != target.dims:
        tracer().report("broadcast", f"{what} {_shape_text(_sym(x))} does not fit "
                                     f"{_shape_text(target)}")


def broadcast_to(x: Any, dims: Sequence[Any]) -> SymArray:
    a = _sym(x)
    target = tuple(as_dim(d) for d in dims)
    off = len(target) - a.ndim
    for i, d in enumerate(a.dims):
        if d != ONE and d != target[i + off]:
            tracer().report("broadcast", f"broadcasts {d} against {target[i + off]} "
                                         f"(broadcast_to {_shape_text(a)} -> "
                                         f"[{', '.join(map(str, target))}])")
    return SymArray(target, a.kind)


# --------------------------------------------------------------------------------------------
# Operations
# --------------------------------------------------------------------------------------------


def reduce_(x: Any, axis: Any, keepdims: bool = False, kind: str | None = None) -> SymArray:
    a = _sym(x)
    if axis is None:
        axes = set(range(a.ndim))
    elif isinstance(axis, tuple | list):
        axes = {_axis(i, a.ndim) for i in axis}
    else:
        axes = {_axis(axis, a.ndim)}
    if keepdims:
        dims = [ONE if i in axes else d for i, d in enumerate(a.dims)]
    else:
        dims = [d for i, d in enumerate(a.dims) if i not in axes]
    return SymArray(dims, kind or a.kind)


def _minmax(x: SymArray, axis: Any, keepdims: bool) -> Any:
    values = reduce_(x, axis, keepdims)
    if axis is not None and _TORCH_STYLE.get():
        return _MaxResult(values, reduce_(x, axis, keepdims, "i"))
    return values


_TORCH_STYLE: contextvars.ContextVar[bool] = contextvars.ContextVar("tensig_torch_style",
                                                                    default=False)


class _MaxResult(tuple):
    """torch's (values, indices) result of ``max(dim=...)``."""

    def __new__(cls, values: SymArray, indices: SymArray) -> _MaxResult:
        return super().__new__(cls, (values, indices))

    @property
    def values(self) -> SymArray:
        return self[0]

    @property
    def indices(self) -> SymArray:
        return self[1]


def permute(x: Any, perm: Sequence[int]) -> SymArray:
    a = _sym(x)
    p = [_axis(i, a.ndim) for i in perm]
    if sorted(p) != list(range(a.ndim)):
        raise ValueError(f"{list(perm)} is not a permutation of the axes of {_shape_text(a)}")
    return SymArray([a.dims[i] for i in p], a.kind, frozenset(p.index(i) for i in a.loose))


def swapaxes(x: Any, i: int, j: int) -> SymArray:
    a = _sym(x)
    p = list(range(a.ndim))
    i, j = _axis(i, a.ndim), _axis(j, a.ndim)
    p[i], p[j] = p[j], p[i]
    return permute(a, p)


def moveaxis(x: Any, source: int, destination: int) -> SymArray:
    a = _sym(x)
    p = list(range(a.ndim))
    s = p.pop(_axis(source, a.ndim))
    p.insert(_axis(destination, a.ndim), s)
    return permute(a, p)


def expand_dims(x: Any, axis: int) -> SymArray:
    a = _sym(x)
    ax = int(axis)
    ax = ax + a.ndim + 1 if ax < 0 else ax
    dims = list(a.dims)
    dims.insert(ax, ONE)
    return SymArray(dims, a.kind)


def squeeze(x: Any, axis: Any = None) -> SymArray:
    a = _sym(x)
    if axis is None:
        return SymArray([d for d in a.dims if d != ONE], a.kind)
    axes = {_axis(i, a.ndim) for i in (axis if isinstance(axis, tuple | list) else (axis,))}
    return SymArray([d for i, d in enumerate(a.dims) if not (i in axes and d == ONE)], a.kind)


def reshape(x: Any, shape: Sequence[Any]) -> SymArray:
    a = _sym(x)
    total = ONE
    for d in a.dims:
        total = total * d
    target: list[Dim | None] = []
    for s in shape:
        if isinstance(s, int) and not isinstance(s, bool) and s == -1:
            target.append(None)
        else:
            target.append(as_dim(s))
    known = ONE
    for d in target:
        if d is not None:
            known = known * d
    if None in target:
        q = total // known if known.constant is not None else None
        if q is not None and known.constant is not None and (total % known.constant).constant != 0:
            require_divisible(total, known.constant)
        elif q is None or q * known != total:
            q = _divide(total, known)
        target[target.index(None)] = q
    elif not tracer().equal_under_assumptions(known, total):
        tracer().report("reshape", f"reshape of {_shape_text(a)} ({total} elements) into "
                                   f"[{', '.join(map(str, target))}] ({known} elements)")
        return SymArray([d for d in target if d is not None], a.kind)
    dims = [d for d in target if d is not None]
    moved = _moved(a.dims, dims)
    if moved is not None:
        tracer().report("reorder", f"reshape of {_shape_text(a)} into "
                                   f"[{', '.join(map(str, dims))}] {moved}: a reshape keeps "
                                   "elements in order, so this mixes them; use a "
                                   "transpose/permute if moving axes was meant")
    return SymArray(dims, a.kind)


_Flex = tuple[Fraction, tuple[int, ...]]  # a literal and the atoms (by index) it sits among


def _factors(d: Dim) -> tuple[list[Dim], list[_Flex]]:
    """An axis as its symbolic factors and its literal factors, each literal with the symbolic
    factors it may sit among: ``4*T`` is ``([T], [(4, (0,))])``; ``C // 4`` is ``([C],
    [(1/4, (0,))])``: a factor 4 of ``C`` lies elsewhere, before or after it (the exact
    division the reshape already required); a sum (``T + 1``) is one opaque factor."""
    if d.constant is not None:
        return [], [(Fraction(d.constant), ())]
    if len(d.terms) != 1:
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
                atoms.append(Dim.symbol(atom) if isinstance(atom, str) else _atom_dim(atom))
    if coefficient != 1:
        flex.append((Fraction(coefficient), tuple(range(len(atoms)))))
    return atoms, flex


def _moved(src: Sequence[Dim], dst: Sequence[Dim]) -> str | None:
    """What a reshape moves, or ``None`` when it keeps elements in order.

    A reshape reinterprets the row-major order, so the symbolic factors of the source's axes
    must appear in the same order in the target's (within one axis their order is unknown,
    so any order is allowed), and between two consecutive symbolic factors ("gaps") the
    literal factors of source and target must multiply to the same number.  A literal that
    shares its axis with symbolic factors may sit (split, even) in any gap among them, and the
    factor ``k`` that ``X // k`` took from ``X`` lies before or after ``X``: whether the
    literals can be placed so that every gap agrees is a small flow problem per prime.  When
    the two sides do not have the same symbolic factors (an existential size) nothing is
    claimed: this lint never guesses.  Cost: a few dozen nodes, once per reshape.
    """
    fa, fb = [_factors(d) for d in src], [_factors(d) for d in dst]
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
                                     f"[{', '.join(map(str, runs[0]))}] into "
                                     f"[{', '.join(map(str, runs[1]))}]")
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
    """Items ``(amount, lo, hi)`` each split among gaps ``lo..hi``: can every gap sum to 0?

    Positive amounts flow from a source through the gaps they may use into the negative
    amounts that may use the same gap; it balances when the maximum flow takes everything.
    """
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
        push, v = min(cap[parent[v]][v] for v in _path(parent)), 1
        while v != 0:
            u = parent[v]
            cap[u][v] -= push
            cap[v][u] += push
            v = u
        flow += push


def _path(parent: list[int]) -> Iterator[int]:
    v = 1
    while v != 0:
        yield v
        v = parent[v]


def _detail(src: Sequence[Dim], dst: Sequence[Dim], what: str) -> str:
    only = _only_permuted(src, dst)
    return f"{only} ({what})" if only else what


def _between(names: list[str], lo: int, hi: int) -> str:
    """Where gaps ``lo..hi`` of the chain of symbolic factors lie, in words."""
    if lo > 0 and hi < len(names):
        return f"between {names[lo - 1]} and {names[hi]}"
    if hi < len(names):
        return f"before {names[hi]}"
    return f"after {names[lo - 1]}" if lo > 0 else "of the whole array"


def _only_permuted(src: Sequence[Dim], dst: Sequence[Dim]) -> str | None:
    """A target that merely permutes the source's sizes (``[2, 3]`` into ``[3, 2]``): a
    transpose was meant, even where the order of factors cannot tell."""
    a, b = [d for d in src if d != ONE], [d for d in dst if d != ONE]
    if len(a) > 1 and a != b and sorted(map(str, a)) == sorted(map(str, b)):
        return "only reorders the dimensions"
    return None


def _divide(total: Dim, known: Dim) -> Dim:
    """``total / known`` for a ``-1`` in a reshape: cancel common factors, then divide.

    ``B*T*d / (4*B*T)`` is ``d // 4`` with the requirement that ``d`` is divisible by 4.
    """
    if len(known.terms) == 1 and len(total.terms) == 1:
        ((mk, ck),) = known.terms.items()
        ((mt, ct),) = total.terms.items()
        powers = dict(mt)
        if all(powers.get(atom, 0) >= p for atom, p in mk):
            for atom, p in mk:
                powers[atom] -= p
            rest = Dim.const(ct)
            for atom, p in powers.items():
                for _ in range(p):
                    rest = rest * (Dim.symbol(atom) if isinstance(atom, str) else _atom_dim(atom))
            if ck == 1:
                return rest
            if (rest % ck).constant != 0:
                require_divisible(rest, ck)
            return rest // ck
    t = tracer()
    t.report("assumption", f"requires {total} divisible by {known}", severity="warning")
    return t.new_dim("n")


def _atom_dim(atom: Any) -> Dim:
    """A FloorDiv/Mod atom as a Dim of its own."""
    num, k = atom.numerator, atom.divisor
    return num // k if type(atom).__name__ == "FloorDiv" else num % k


def getitem(x: SymArray, key: Any) -> SymArray:
    if not isinstance(key, tuple):
        key = (key,)
    n_ellipsis = sum(1 for k in key if k is Ellipsis)
    used = sum(1 for k in key if k is not None and k is not Ellipsis and
               not (isinstance(k, SymArray) and k.kind == "b"))
    used += sum(k.ndim for k in key if isinstance(k, SymArray) and k.kind == "b")
    if n_ellipsis:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (x.ndim - used) + key[i + 1:]
    else:
        key = key + (slice(None),) * (x.ndim - used)
    dims: list[Dim] = []
    axis = 0
    advanced: list[SymArray] = []
    adv_pos = None
    for k in key:
        if k is None:
            dims.append(ONE)
            continue
        if isinstance(k, SymArray) and k.kind == "b":  # a boolean mask: a data-dependent size
            into(SymArray(x.dims[axis:axis + k.ndim]), k, "a boolean mask")
            adv_pos = len(dims) if adv_pos is None else adv_pos
            dims.append(tracer().new_dim("nnz"))
            axis += k.ndim
            continue
        if isinstance(k, SymArray) or (hasattr(k, "shape") and not isinstance(k, SymSize)) or \
                isinstance(k, list | _RANGE | SymRange):
            adv_pos = len(dims) if adv_pos is None else adv_pos
            advanced.append(_sym(k))
            axis += 1
            continue
        if isinstance(k, slice):
            dims.append(_slice_len(x.dims[axis], k))
            axis += 1
            continue
        _check_index(x.dims[axis], k)
        axis += 1
    if advanced:
        adv_dims, _ = broadcast(advanced, "advanced indexing")
        assert adv_pos is not None
        dims[adv_pos:adv_pos] = list(adv_dims)
    return SymArray(dims, x.kind)


def _check_index(size: Dim, k: Any) -> None:
    if isinstance(k, _LoopInt) and k.bound == size:
        return  # step i of a loop over range(size): i < size, or the step would not run
    d = as_dim(k)
    try:
        ok = (d < size) if d.constant is None or d.constant >= 0 else (-d <= size)
    except InconclusiveError:
        if not _assumed_here(f"< {size}:"):  # a loop over range(T) assumes once per line
            _assume(f"{d} < {size}", None, True)
        return
    if not ok:
        tracer().report("index", f"index {d} is out of range for an axis of size {size}")


def _assumed_here(text: str) -> bool:
    t = tracer()
    file, line = t.where()
    return any(f.file == file and f.line == line and f.kind == "assumption" and text in f.message
               for f in t.findings)


def _slice_len(size: Dim, s: slice) -> Dim:
    step = 1 if s.step is None else int(s.step)
    if step != 1 and s.start is None and s.stop is None:  # x[::-1], x[::2]
        return size if abs(step) == 1 else (size + abs(step) - 1) // abs(step)
    if step > 1 and (s.start is None or (as_dim(s.start).constant or 0) >= 0):
        return (_slice_len(size, slice(s.start, s.stop)) + step - 1) // step
    if step != 1 or (s.start is not None and as_dim(s.start).constant is not None and \
            as_dim(s.start).constant < 0):
        if step == 1 and s.stop is None:
            return Dim.const(-as_dim(s.start).constant)  # x[-k:]
        start_at = 0 if s.start is None else as_dim(s.start).constant
        if step > 1 and s.stop is None and start_at is not None and start_at >= 0:
            return (size - start_at + step - 1) // step  # x[::2], x[1::2]: exact floors
        return tracer().new_dim("s")  # other strided slices: a fresh size
    start = ONE * 0 if s.start is None else as_dim(s.start)
    stop = size if s.stop is None else as_dim(s.stop)
    if stop.constant is not None and stop.constant < 0:
        stop = size + stop
    length = stop - start
    try:
        if stop > size:
            tracer().report("index", f"slice up to {stop} on an axis of size {size}")
            length = size - start
    except InconclusiveError:
        _assume(f"{stop} <= {size}", None, True, f"a slice up to {stop} of an axis of size "
                f"{size} (a buffer or table sized for at most {size})")
    return length


def matmul(a: Any, b: Any) -> SymArray:
    x, y = _sym(a), _sym(b)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError("matmul of a scalar")
    xd = list(x.dims) if x.ndim > 1 else [ONE, *x.dims]
    yd = list(y.dims) if y.ndim > 1 else [*y.dims, ONE]
    if _differ(xd[-1], yd[-2]):
        tracer().report("contraction", f"matmul contracts {xd[-1]} with {yd[-2]} (shapes "
                                       f"{_shape_text(x)} @ {_shape_text(y)})")
    batch, _ = broadcast([SymArray(xd[:-2]), SymArray(yd[:-2])], "matmul's batch axes")
    out = list(batch) + ([xd[-2]] if x.ndim > 1 else []) + ([yd[-1]] if y.ndim > 1 else [])
    return SymArray(out, "f" if "f" in (x.kind, y.kind) else x.kind)


def einsum(subscripts: str, *operands: Any, **kw: Any) -> SymArray:
    arrays = [_sym(o) for o in operands]
    spec = subscripts.replace(" ", "")
    ins, _, out = spec.partition("->")
    subs = ins.split(",")
    if "..." in spec:
        raise Unsupported("einsum with '...'")
    sizes: dict[str, Dim] = {}
    for sub, a in zip(subs, arrays, strict=True):
        if len(sub) != a.ndim:
            tracer().report("contraction", f"einsum operand {sub!r} has rank {a.ndim}")
            continue
        for c, d in zip(sub, a.dims, strict=True):
            if c in sizes and sizes[c] != d:
                if sizes[c] == ONE:
                    sizes[c] = d
                elif d != ONE:
                    tracer().report("contraction", f"einsum index {c!r} is {sizes[c]} in one "
                                                   f"operand and {d} in another")
            else:
                sizes.setdefault(c, d)
    if not _:
        out = "".join(sorted(c for c in sizes if "".join(subs).count(c) == 1))
    return SymArray([sizes[c] for c in out], "f")


def concatenate(arrays: Sequence[Any], axis: int = 0, **kw: Any) -> SymArray:
    xs = [_sym(a) for a in arrays]
    axis = kw.get("dim", axis)
    ax = _axis(axis, xs[0].ndim)
    total = ONE * 0
    for a in xs:
        if a.ndim != xs[0].ndim:
            tracer().report("concat", f"concatenates arrays of ranks {xs[0].ndim} and {a.ndim}")
            continue
        for i, (d, e) in enumerate(zip(a.dims, xs[0].dims, strict=True)):
            if i != ax and _differ(d, e):
                tracer().report("concat", f"concatenation along axis {ax} needs equal sizes "
                                          f"on axis {i}: {e} vs {d}")
        total = total + a.dims[ax]
    dims = list(xs[0].dims)
    dims[ax] = total
    return SymArray(dims, xs[0].kind)


def stack(arrays: Sequence[Any], axis: int = 0, **kw: Any) -> SymArray:
    axis = kw.get("dim", axis)
    xs = [expand_dims(_sym(a), axis) for a in arrays]
    return concatenate(xs, axis)


def where(cond: Any, a: Any = None, b: Any = None) -> SymArray:
    if a is None:
        raise Unsupported("where(cond) with one argument (data-dependent indices)")
    out = elementwise([cond, a, b], None, "where")
    kinds = {_sym(a).kind, _sym(b).kind}
    return SymArray(out.dims, "f" if "f" in kinds else out.kind, out.loose)


def linear(x: Any, weight: Any, bias: Any = None) -> SymArray:
    a, w = _sym(x), _sym(weight)
    if _differ(a.dims[-1], w.dims[-1]):
        tracer().report("contraction", f"linear layer: input features {a.dims[-1]} vs "
                                       f"weight in_features {w.dims[-1]} (weight "
                                       f"{_shape_text(w)})")
    out = SymArray((*a.dims[:-1], w.dims[0]), "f")
    if bias is not None:
        into(out, bias, "the bias")
    return out


def conv(x: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
         dilation: Any = 1, groups: int = 1) -> SymArray:
    a, w = _sym(x), _sym(weight)
    nd = w.ndim - 2
    def per(v: Any) -> list[Any]:
        return list(v) if isinstance(v, tuple | list) else [v] * nd
    st, pd, dl = per(stride), per(padding), per(dilation)
    if a.dims[-nd - 1] != w.dims[1] * groups:
        tracer().report("contraction", f"convolution: input channels {a.dims[-nd - 1]} vs "
                                       f"weight {w.dims[1]} x groups {groups}")
    spatial = []
    for i in range(nd):
        n, k = a.dims[-nd + i], w.dims[2 + i]
        if pd[i] == "same":
            spatial.append(n)
            continue
        p = 0 if pd[i] == "valid" else int(pd[i])
        span = (k - 1) * int(dl[i]) + 1
        num = n + 2 * p - span
        spatial.append(num // int(st[i]) + 1)  # torch's floor: no divisibility needed
    return SymArray((*a.dims[:-nd - 1], w.dims[0], *tuple(spatial)), "f")


def same_shape_loss(input: Any, target: Any, *args: Any, reduction: str = "mean",
                    **kw: Any) -> SymArray:
    a, b = _sym(input), _sym(target)
    if a.dims != b.dims:
        tracer().report("broadcast", f"loss between {_shape_text(a)} and {_shape_text(b)}: "
                                     "the shapes differ, so the loss broadcasts")
    dims, _ = broadcast([a, b], "a loss")
    return SymArray(() if reduction != "none" else dims, "f")


def cross_entropy(input: Any, target: Any, *args: Any, reduction: str = "mean",
                  **kw: Any) -> SymArray:
    a, t = _sym(input), _sym(target)
    if t.kind == "f":
        batch = t.dims
        if a.dims != t.dims:
            tracer().report("broadcast", f"cross_entropy with probabilities {_shape_text(t)} "
                                         f"for logits {_shape_text(a)}")
    else:
        batch = a.dims[:1] + a.dims[2:]
        if t.dims != batch:
            tracer().report("contraction", f"cross_entropy: targets {_shape_text(t)} for "
                                           f"logits {_shape_text(a)} (expected "
                                           f"[{', '.join(map(str, batch))}])")
    return SymArray(() if reduction != "none" else batch, "f")


def layer_norm(x: Any, normalized_shape: Any, weight: Any = None, bias: Any = None,
               *args: Any, **kw: Any) -> SymArray:
    a = _sym(x)
    ns = tuple(as_dim(d) for d in (normalized_shape if isinstance(normalized_shape, tuple | list)
                                   else (normalized_shape,)))
    if a.dims[len(a.dims) - len(ns):] != ns:
        tracer().report("contraction", f"layer_norm over [{', '.join(map(str, ns))}] of "
                                       f"{_shape_text(a)}")
    for p in (weight, bias):
        if p is not None and _sym(p).dims != ns:
            tracer().report("broadcast", f"layer_norm parameter {_shape_text(_sym(p))} for "
                                         f"normalized shape [{', '.join(map(str, ns))}]")
    return SymArray(a.dims, "f")


def sdpa(*args: Any, **kw: Any) -> SymArray:
    from tensig.check import trace_torch as symbolic_torch
    return symbolic_torch.sdpa(*args, **kw)


def embedding(idx: Any, weight: Any, *args: Any, **kw: Any) -> SymArray:
    i, w = _sym(idx), _sym(weight)
    return SymArray(i.dims + w.dims[1:], "f")


def _same_as(x: Any, *args: Any, **kw: Any) -> SymArray:
    a = _sym(x)
    dim = kw.get("dim", args[0] if args and isinstance(args[0], int) else None)
    if dim is not None:
        _axis(dim, a.ndim)
    return SymArray(a.dims, "f" if a.kind != "b" else a.kind, a.loose)


def _created(*shape: Any, **kw: Any) -> SymArray:
    dims = _varargs(shape, kw.get("size", kw.get("shape")))
    dtype = str(kw.get("dtype", "float"))
    kind = "b" if "bool" in dtype else ("i" if "int" in dtype or "long" in dtype else "f")
    return SymArray([as_dim(d) for d in dims], kind)


def _full(shape: Any, fill_value: Any, *args: Any, **kw: Any) -> SymArray:
    return _created(shape, **kw)


def _like(x: Any, *args: Any, **kw: Any) -> SymArray:
    a = _sym(x)
    return SymArray(a.dims, a.kind)


def _arange(*args: Any, **kw: Any) -> SymArray:
    nums = [as_dim(a) for a in args if not isinstance(a, float)]
    if len(nums) == 1:
        return SymArray([nums[0]], "i")
    if len(nums) >= 2 and (len(nums) == 2 or nums[2] == ONE):
        return SymArray([nums[1] - nums[0]], "i")
    if len(nums) == 3 and nums[2].constant is not None and nums[2].constant > 0:
        k = nums[2].constant
        return SymArray([(nums[1] - nums[0] + k - 1) // k], "i")
    raise Unsupported("arange with a symbolic or negative step")


def _eye(n: Any, m: Any = None, *args: Any, **kw: Any) -> SymArray:
    return SymArray([as_dim(n), as_dim(m if m is not None else n)], "f")


def split(x: Any, size_or_sections: Any, dim: int = 0, **kw: Any) -> tuple[SymArray, ...]:
    """torch's ``split(size_or_sections, dim)``: equal pieces of a size, or given sizes."""
    a = _sym(x)
    ax = _axis(kw.get("axis", dim), a.ndim)
    n = a.dims[ax]
    if isinstance(size_or_sections, list | tuple):
        sizes = [as_dim(v) for v in size_or_sections]
        total = ONE * 0
        for v in sizes:
            total = total + v
        if not tracer().equal_under_assumptions(total, n):
            tracer().report("split", f"split into [{', '.join(map(str, sizes))}] "
                                     f"({total} in all) of an axis of size {n}")
    else:
        size = as_dim(size_or_sections)
        count = n // size if size.constant is not None else _pieces(n, size)
        if count is None or count.constant is None:
            raise Unsupported("split into a symbolic number of pieces")
        if size.constant is not None and (n % size).constant != 0:
            require_divisible(n, int(size.constant))
        sizes = [size] * int(count.constant)
    return tuple(SymArray((*a.dims[:ax], v, *a.dims[ax + 1:]), a.kind) for v in sizes)


def _pieces(n: Dim, size: Dim) -> Dim | None:
    """``n / size`` when it is one constant wherever the recorded divisions are exact."""
    t = tracer()
    if not t.divisors:
        return None
    counts = set()
    for env in t.assumption_envs():
        total, piece = n.evaluate(env), size.evaluate(env)
        if piece <= 0 or total % piece:
            return None
        counts.add(total // piece)
    return Dim.const(counts.pop()) if len(counts) == 1 else None


def chunk(x: Any, chunks: int, dim: int = 0, **kw: Any) -> tuple[SymArray, ...]:
    """torch's ``chunk(n, dim)``: ``n`` equal pieces (the axis must divide evenly here)."""
    a = _sym(x)
    ax = _axis(kw.get("axis", dim), a.ndim)
    n = a.dims[ax]
    if (n % int(chunks)).constant != 0:
        require_divisible(n, int(chunks))
    piece = n // int(chunks)
    return tuple(SymArray((*a.dims[:ax], piece, *a.dims[ax + 1:]), a.kind)
                 for _ in range(int(chunks)))


def np_split(x: Any, indices_or_sections: Any, axis: int = 0) -> tuple[SymArray, ...]:
    """numpy's ``split``: a number of equal sections, or split indices."""
    if isinstance(indices_or_sections, int):
        return chunk(x, indices_or_sections, axis)
    a = _sym(x)
    ax = _axis(axis, a.ndim)
    cuts = [ONE * 0, *[as_dim(i) for i in indices_or_sections], a.dims[ax]]
    return tuple(SymArray((*a.dims[:ax], hi - lo, *a.dims[ax + 1:]), a.kind)
                 for lo, hi in itertools.pairwise(cuts))


NUMPY: dict[str, Callable[..., Any]] = {
    "sum": lambda a, axis=None, keepdims=False, **k: reduce_(a, axis, keepdims),
    "mean": lambda a, axis=None, keepdims=False, **k: reduce_(a, axis, keepdims, "f"),
    "std": lambda a, axis=None, keepdims=False, **k: reduce_(a, axis, keepdims, "f"),
    "var": lambda a, axis=None, keepdims=False, **k: reduce_(a, axis, keepdims, "f"),
    "max": lambda a, axis=None, keepdims=False, **k: reduce_(a, axis, keepdims),
    "min": lambda a, axis=None, keepdims=False, **k: reduce_(a, axis, keepdims),
    "amax": lambda a, axis=None, keepdims=False, **k: reduce_(a, axis, keepdims),
    "amin": lambda a, axis=None, keepdims=False, **k: reduce_(a, axis, keepdims),
    "prod": lambda a, axis=None, keepdims=False, **k: reduce_(a, axis, keepdims),
    "argmax": lambda a, axis=None, keepdims=False, **k: reduce_(a, axis, keepdims, "i"),
    "argmin": lambda a, axis=None, keepdims=False, **k: reduce_(a, axis, keepdims, "i"),
    "all": lambda a, axis=None, keepdims=False, **k: reduce_(a, axis, keepdims, "b"),
    "any": lambda a, axis=None, keepdims=False, **k: reduce_(a, axis, keepdims, "b"),
    "reshape": lambda a, shape=None, newshape=None, **k: reshape(
        a, shape if shape is not None else newshape
        if isinstance(shape if shape is not None else newshape, tuple | list)
        else (shape if shape is not None else newshape,)),
    "transpose": lambda a, axes=None: permute(a, axes if axes is not None
                                              else tuple(reversed(range(_sym(a).ndim)))),
    "permute_dims": lambda a, axes=None: permute(a, axes),
    "swapaxes": swapaxes,
    "moveaxis": moveaxis,
    "expand_dims": expand_dims,
    "squeeze": squeeze,
    "concatenate": concatenate,
    "concat": concatenate,
    "stack": stack,
    "where": where,
    "matmul": matmul,
    "dot": matmul,
    "einsum": einsum,
    "broadcast_to": lambda a, shape: broadcast_to(a, shape),
    "zeros_like": _like,
    "ones_like": _like,
    "empty_like": _like,
    "full_like": lambda a, fill_value, **k: _like(a),
    "clip": lambda a, *args, **k: _same_as(a),
    "round": lambda a, *args, **k: _same_as(a),
    "copy": lambda a, *args, **k: _same_as(a),
    "tril": lambda a, k=0: _same_as(a),
    "triu": lambda a, k=0: _same_as(a),
    "isclose": lambda a, b, **k: elementwise([a, b], "b"),
    "allclose": lambda a, b, **k: SymArray((), "b"),
    "shape": lambda a: _sym(a).shape,
    "ndim": lambda a: _sym(a).ndim,
    "size": lambda a: _sym(a).numel(),
    "linalg.norm": lambda a, ord=None, axis=None, keepdims=False: reduce_(a, axis, keepdims,
                                                                           "f"),
    "norm": lambda a, ord=None, axis=None, keepdims=False: reduce_(a, axis, keepdims, "f"),
    "split": np_split,
    "array_split": np_split,
}

TORCH: dict[str, Callable[..., Any]] = {
    "matmul": matmul,
    "bmm": matmul,
    "mm": matmul,
    "einsum": lambda eq, *ops: einsum(eq, *(ops[0] if len(ops) == 1 and
                                          isinstance(ops[0], list | tuple) else ops)),
    "cat": concatenate,
    "concat": concatenate,
    "concatenate": concatenate,
    "stack": stack,
    "where": where,
    "linear": linear,
    "conv1d": conv,
    "conv2d": conv,
    "conv3d": conv,
    "mse_loss": same_shape_loss,
    "l1_loss": same_shape_loss,
    "smooth_l1_loss": same_shape_loss,
    "huber_loss": same_shape_loss,
    "binary_cross_entropy": same_shape_loss,
    "binary_cross_entropy_with_logits": same_shape_loss,
    "cross_entropy": cross_entropy,
    "nll_loss": cross_entropy,
    "layer_norm": layer_norm,
    "scaled_dot_product_attention": sdpa,
    "embedding": embedding,
    "softmax": _same_as,
    "log_softmax": _same_as,
    "relu": _same_as,
    "gelu": _same_as,
    "silu": _same_as,
    "sigmoid": _same_as,
    "tanh": _same_as,
    "dropout": _same_as,
    "exp": _same_as,
    "log": _same_as,
    "sqrt": _same_as,
    "rsqrt": _same_as,
    "abs": _same_as,
    "tril": lambda a, diagonal=0: _same_as(a),
    "triu": lambda a, diagonal=0: _same_as(a),
    "zeros_like": _like,
    "ones_like": _like,
    "empty_like": _like,
    "rand_like": _like,
    "randn_like": _like,
    "full_like": lambda a, fill_value, **k: _like(a),
    "sum": lambda a, dim=None, keepdim=False, **k: reduce_(a, dim, keepdim),
    "mean": lambda a, dim=None, keepdim=False, **k: reduce_(a, dim, keepdim, "f"),
    "amax": lambda a, dim=None, keepdim=False, **k: reduce_(a, dim, keepdim),
    "amin": lambda a, dim=None, keepdim=False, **k: reduce_(a, dim, keepdim),
    "logsumexp": lambda a, dim, keepdim=False: reduce_(a, dim, keepdim, "f"),
    "argmax": lambda a, dim=None, keepdim=False: reduce_(a, dim, keepdim, "i"),
    "transpose": swapaxes,
    "permute": lambda a, dims: permute(a, dims),
    "reshape": lambda a, shape: reshape(a, shape),
    "unsqueeze": expand_dims,
    "squeeze": lambda a, dim=None: squeeze(a, dim),
    "flatten": lambda a, start_dim=0, end_dim=-1: _sym(a).flatten(start_dim, end_dim),
    "broadcast_to": lambda a, size: broadcast_to(a, size),
    "maximum": lambda a, b: elementwise([a, b]),
    "minimum": lambda a, b: elementwise([a, b]),
    "add": lambda a, b, alpha=1: elementwise([a, b]),
    "sub": lambda a, b, alpha=1: elementwise([a, b]),
    "mul": lambda a, b: elementwise([a, b]),
    "div": lambda a, b, **k: elementwise([a, b], "f"),
    "masked_fill": lambda a, mask, value: _sym(a).masked_fill(mask, value),
    "split": split,
    "chunk": chunk,
}

# torch's Tensor dunder methods reach __torch_function__ under their own names
for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__matmul__", "__getitem__"):
    TORCH.setdefault(_name, lambda a, *r, _n=_name: getattr(_sym(a), _n)(*r))

SUPPORTED = sorted(set(NUMPY) | set(TORCH))

CREATION_NUMPY: dict[str, Callable[..., Any]] = {
    "zeros": _created, "ones": _created, "empty": _created, "full": _full,
    "arange": _arange, "eye": _eye,
}
CREATION_TORCH: dict[str, Callable[..., Any]] = {
    "zeros": _created, "ones": _created, "empty": _created, "full": _full,
    "randn": _created, "rand": _created, "arange": _arange, "eye": _eye,
}


def _has_sym(args: Iterable[Any]) -> bool:
    for a in args:
        if isinstance(a, SymSize | SymArray):
            return True
        if isinstance(a, tuple | list) and _has_sym(a):
            return True
    return False


def creation_wrapper(original: Callable[..., Any], symbolic: Callable[..., Any]
                     ) -> Callable[..., Any]:
    """Creation functions called with symbolic sizes build symbolic arrays."""
    def wrapper(*args: Any, **kw: Any) -> Any:
        if _TRACER.get() is not None and (_has_sym(args) or _has_sym(kw.values())):
            return symbolic(*args, **kw)
        return original(*args, **kw)

    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    return wrapper


def set_tracer(t: Tracer | None) -> contextvars.Token[Tracer | None]:
    return _TRACER.set(t)


def reset_tracer(token: contextvars.Token[Tracer | None]) -> None:
    _TRACER.reset(token)


def set_torch_style(flag: bool) -> contextvars.Token[bool]:
    return _TORCH_STYLE.set(flag)



# NumPy's long tail (hand models and the fitted fallback) registers itself in the tables above.
from tensig.check import trace_numpy as _symbolic_numpy  # noqa: E402, F401
