"""The trace in progress: what verification found, its budget, and the library hooks.

A :class:`Tracer` collects :class:`Finding` objects while a function runs on symbolic arrays
(:mod:`tensig.check.tracer`); the current one lives in a context variable, so symbolic arrays
made outside ``tensig.verify`` refuse to work instead of recording into nothing.  This module is
the bottom of the verifier: sizes, arrays and the per-library models all report through it.

The per-library models (:mod:`~tensig.check.trace_numpy`, ``trace_torch``, ``trace_jax``) plug
their long tails into symbolic arrays through :data:`PLUGINS`, so the array core imports no
library model (they import it): ``trace_torch`` imports torch, and is loaded only once the user
has imported torch.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import math
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tensig.check import findings
from tensig.core.dims import Dim
from tensig.core.errors import InconclusiveError

__all__ = ["MAX_STEPS", "PLUGINS", "Finding", "Namespace", "TraceLimit", "Tracer", "Unsupported",
           "failure_line", "patched", "plugin", "referenced", "tracer"]


@dataclass(frozen=True)
class Finding:
    """One thing verification found, at a source line of the verified code.

    ``kind`` is a registered name in :mod:`tensig.check.findings` (``"broadcast"``, ``"reorder"``,
    ...); an unregistered one raises ``KeyError`` at construction (a programming error).
    ``code`` is the kind's stable code (``TS101``).
    """

    kind: str
    message: str
    file: str | None = None
    line: int | None = None
    #: the registry's severity of ``kind`` unless given ("error" or "warning")
    severity: str = ""

    def __post_init__(self) -> None:
        rule = findings.rule(self.kind)
        if not self.severity:
            object.__setattr__(self, "severity", rule.severity)

    @property
    def code(self) -> str:
        return findings.rule(self.kind).code

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}: " if self.file else ""
        return f"{where}{self.severity}: {self.message}  [{self.code}]"


Where = tuple[str | None, int | None]  # a finding's file and line
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
    exact: list[tuple[Dim, int]] = field(default_factory=list)  # shown exact at every size
    floors: list[tuple[Dim, int, Where]] = field(default_factory=list)  # not yet relied on
    leaks: dict[int, Dim] = field(default_factory=dict)  # witness -> symbol turned into an int
    steps: int = 0  # symbolic arrays made so far (see made)
    max_steps: int = field(default_factory=lambda: MAX_STEPS)
    used_jax: bool = False  # a JAX function saw symbolic values (verify's JAX fallback)
    rows: dict[Dim, int] = field(default_factory=dict)  # axis size -> row a loop is at
    min_dims: dict[tuple[Dim, Dim], Dim] = field(default_factory=dict)  # undecided min(m, n)
    _envs: dict[Any, list[dict[str, int]]] = field(default_factory=dict, repr=False,
                                                   compare=False)  # see assumption_envs
    masks: dict[int, tuple[Any, Dim]] = field(default_factory=dict)  # id -> (mask, its count)
    loops: dict[int, Dim | None] = field(default_factory=dict)  # steps -> a loop's size

    def equal_under_assumptions(self, a: Dim, b: Dim) -> bool:
        """``a == b`` canonically, or at sizes where the assumed divisions in ``a - b`` are
        exact.

        Two assignments where they are exact (:meth:`assumption_envs`) stand in for the
        assumption (a heuristic).  Only ``a - b``'s own divisions: a ``T // 2`` elsewhere,
        exact only at even ``T``, would leave no size for a ``(T - 1) // 2`` here.  Only the
        code's (:meth:`rely` reports them): a division the signature declares is no assumption,
        and ``-> [2 * ((T - 1) // 2)]`` for ``[T - 1]`` is wrong at every even ``T``.
        Divisions shown ``exact`` hold at any sizes: they leave the witnesses as they are,
        where a padded ``H + (7 - H % 7) % 7`` keeps its pad, and add sizes along a line on
        which each symbol moves at its own pace, over five periods of their divisors: the two
        assignments alone move every symbol by one, where ``B + 8`` and ``T`` (witnesses 11
        and 19) agree.  The line starts at the first assignment and steps by :meth:`unit`, so
        the assumed divisions stay exact on it (``(T - 1) // 2`` at odd ``T``)."""
        if a == b:
            return True
        with contextlib.suppress(InconclusiveError):
            if not a - b:
                return True  # zero at every size, not canonically: 2*(T // 2) + T % 2 == T
        envs = self._compared_at(_divisions(a - b) & self._assumed())
        try:
            equal = bool(self.divisors or self.exact) and all(
                a.evaluate(env) == b.evaluate(env) for env in envs)
        except ValueError:
            return False
        if equal:
            self.rely(a - b)
        return equal

    def _compared_at(self, within: set[tuple[Dim, int]]) -> list[dict[str, int]]:
        """:meth:`assumption_envs`, and with divisions shown exact the line of sizes
        :meth:`equal_under_assumptions` describes; cached with them (every broadcast of two
        different sizes asks, and the line holds up to ``5 * period`` assignments)."""
        envs = self.assumption_envs(within)
        if not self.exact:
            return envs
        key = ("line", tuple(sorted(within, key=str)), tuple(self.exact),
               tuple(self.witness.items()), self.unit())
        if key not in self._envs:  # any sizes keep them: each symbol at its own pace
            unit, period = self.unit(), math.lcm(*(k for _, k in self.exact))
            self._envs[key] = envs + [
                {n: w + j * (i + 1) * unit for i, (n, w) in enumerate(envs[0].items())}
                for j in range(2, 5 * period)]  # from envs[0]: its residues, steps of unit
        return self._envs[key]

    def require(self, p: Dim, k: int, floor: bool = False) -> None:
        """Record ``p // k`` as exact: a requirement (a warning), or with ``floor`` (a size's
        ``//`` in the code) one reported only once a check relies on it (:meth:`rely`): a slice
        up to ``T // 2`` is valid at every ``T``, a reshape to ``[2, T // 2]`` is not."""
        if (p, k) not in self.divisors:
            self.divisors.append((p, k))
        if not floor:
            self.report("assumption", f"requires {p} divisible by {k}")
        elif (p, k, where := self.where()) not in self.floors:  # reported at the ``//``'s line
            self.floors.append((p, k, where))

    def rely(self, d: Dim) -> None:
        """Report the floor divisions that ``d`` (a size that vanishes only where divisions are
        exact) holds as requirements, each at the line that divided."""
        used = _divisions(d)
        for p, k, where in list(self.floors):
            if _divisions(p // k) & used:
                self.floors.remove((p, k, where))
                self.report("assumption", f"requires {p} divisible by {k}", where)

    def unit(self) -> int:
        """The least common multiple of the divisions assumed exact: a step between sizes
        that keeps every division exact (or inexact) as it was."""
        return math.lcm(1, *(k for _, k in self.divisors))

    def _assumed(self) -> set[tuple[Dim, int]]:
        """The divisions assumed exact, as they appear in a canonical size."""
        return {d for p, k in self.divisors for d in _divisions(p // k)}

    def assumption_envs(self, within: Iterable[tuple[Dim, int]] | None = None
                        ) -> list[dict[str, int]]:
        """Two size assignments where every assumed division (or every one ``within``) is
        exact: multiples of the divisors, each divided symbol then shifted by the residue that
        makes ``(T - 1) // 2`` exact too (the first of at most 4096 shifts that fits all, else
        none).  Cached: a broadcast of two different sizes asks at every operation, and a
        search that finds no shift costs tens of milliseconds."""
        divisions = self.divisors if within is None else sorted(within, key=str)
        key = (tuple(divisions), tuple(self.witness.items()), self.unit())
        if key not in self._envs:
            self._envs[key] = self._shifted(divisions)
        return [dict(env) for env in self._envs[key]]

    def _shifted(self, divisions: list[tuple[Dim, int]]) -> list[dict[str, int]]:
        lcm, names = self.unit(), {*self.witness}
        exact = [(p, k) for p, k in divisions if p.symbols <= names]
        divided = sorted({n for p, _ in exact for n in p.symbols})
        envs = []
        for bump in (0, 1):
            base = {n: (w + bump) * lcm for n, w in self.witness.items()}
            shifts = itertools.islice(itertools.product(range(lcm), repeat=len(divided)), 4096)
            shifted = ({**base, **{n: base[n] + r for n, r in zip(divided, rs, strict=True)}}
                       for rs in shifts)
            envs.append(next((e for e in shifted if all(p.evaluate(e) % k == 0 for p, k in exact)),
                             base))
        return envs

    def where(self) -> Where:
        """The innermost frame in the user's code: a finding raised while NumPy, torch or JAX
        run their own Python code is the user's line that called into the library."""
        f: Any = sys._getframe(1)
        while f is not None:
            if findings.user_code(f.f_code.co_filename):
                return f.f_code.co_filename, f.f_lineno
            f = f.f_back
        return None, None

    def report(self, kind: str, message: str, where: Where | None = None) -> Finding:
        """Record a finding of a registered ``kind``, with the severity the registry gives it
        (:mod:`tensig.check.findings`: declared once, there), at the user's line running now
        or at ``where``; the finding, for one that a later step may withdraw."""
        file, line = where or self.where()
        finding = Finding(kind, message, file, line)
        if finding not in self.findings:
            self.findings.append(finding)
        return finding

    def made(self, array: Any) -> None:
        """Count a new symbolic array (past ``max_steps`` the trace stops: a loop that runs at
        the witness sizes for too long is reported, never waited for) and keep the largest one
        with a symbolic size, for pricing: element counts compared at large sizes, so the
        degree decides."""
        self.steps += 1
        if self.steps > self.max_steps:
            raise TraceLimit(f"the trace passed {self.max_steps} symbolic operations")
        if all(d.constant is not None for d in array.dims):
            return
        big = {name: 1000 * w for name, w in self.witness.items()}
        if self.largest is None or math.prod(d.evaluate(big) for d in array.dims) > \
                math.prod(d.evaluate(big) for d in self.largest.dims):
            self.largest = array

    def read_leak(self, size: int) -> Dim | int:
        """A number that is a symbol's witness came from that symbol (``pe[:T]`` on a concrete
        table, ``x.view(b, int(t), c)``): read it as the symbol, under an assumption (see
        :meth:`leak`), since a literal of the code may equal the witness."""
        d = self.leaks.get(size)
        if d is None:
            return size
        self.report("assumption", f"the number {size} (a size or a concrete array's axis) is "
                                  f"read as {d}: {d} was turned into a number ({d}'s witness "
                                  f"is {size}); assumes it is {d}, not a constant {size}")
        return d

    def new_dim(self, hint: str) -> Dim:
        """A fresh existential dimension (a data-dependent size, like a Remora box)."""
        self.fresh += 1
        name = f"{hint}{self.fresh}"
        self.witness[name] = 3
        return Dim.symbol(name)

    def count_of(self, mask: Any) -> Dim:
        """How many elements a boolean mask selects (or ``nonzero`` finds in numbers): one
        fresh size per array (kept, so its id stays its own), so ``V[m]`` and ``r[m]`` select
        as many rows, until :meth:`written`."""
        if id(mask) not in self.masks:
            self.masks[id(mask)] = mask, self.new_dim("nnz")
        return self.masks[id(mask)][1]

    def written(self, array: Any) -> None:
        """``array`` changed in place (``m[:, 0] = False``, ``m.logical_and_(k)``): a boolean
        array written to may be a mask or a view of one (``m[:][0] = True``), so every mask's
        count is another from here; numbers written to (``a[0] = 1.0``) have another count of
        nonzero elements (``np.nonzero(a)``); a reorder written to has its mixed axes used, so
        a view back is no longer one with it (``reshape_order.Skew``)."""
        if getattr(array, "skew", None) is not None:
            array.skew = None
        if getattr(array, "kind", None) == "b":
            self.masks.clear()
        else:
            self.masks.pop(id(array), None)

    def value(self, d: Dim) -> int:
        return d.evaluate(self.witness)

    def counted(self, d: Dim) -> int:
        """A loop's number of steps (``range(T)``, ``range(1, T)``, the rows of an axis),
        remembered by its value, so a list of one item per step has ``d`` items when stacked.
        A small count (a mask's 3, ``T // 2``'s 5) is no evidence: a list of 3 coordinates has
        as many (witnesses are primes from 11 for that); two sizes of one value, or a loop of a
        literal count in the user's code, leave that value to no size."""
        n = self.value(d)
        if d.constant is None and n >= 8:  # T - 1, T - 3 at T = 11 pass
            self.loops[n] = d if self.loops.get(n, d) == d else None
        return n

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


def _divisions(d: Dim) -> set[tuple[Dim, int]]:
    """The ``(numerator, divisor)`` of every ``//`` and ``%`` in ``d``, nested ones too."""
    out: set[tuple[Dim, int]] = set()
    for m in d.terms:
        for atom, _ in m:
            if not isinstance(atom, str):
                out |= {(atom.numerator, atom.divisor), *_divisions(atom.numerator)}
    return out


def tracer() -> Tracer:
    t = _TRACER.get()
    if t is None:
        raise RuntimeError("symbolic arrays are only usable inside tensig.verify")
    return t


# None: a guess (the function names neither torch nor NumPy): NumPy's reading, except where
# NumPy's is code nobody writes on purpose and torch's is common (x.transpose(0, 1) of a matrix)
_TORCH_STYLE: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "tensig_torch_style", default=False)


_MISSING = object()


class Namespace:
    """A function's globals as an object to patch (``tracing.patched`` sets attributes), or,
    with ``owner``, some of an object's attributes (``tracing.patched`` reads them here and
    sets them on the owner)."""

    __slots__ = ("__dict__", "_owner")
    _owner: Any

    def __init__(self, namespace: dict[str, Any], owner: Any = None):
        object.__setattr__(self, "__dict__", namespace)
        object.__setattr__(self, "_owner", owner)

    def __setattr__(self, name: str, value: Any) -> None:
        if self._owner is None:
            self.__dict__[name] = value
        else:
            setattr(self._owner, name, value)


@contextlib.contextmanager
def patched(replacements: Iterable[tuple[Any, str, Any]]) -> Iterator[None]:
    """Attributes ``(owner, name, value)`` set while a trace runs (library functions that take
    symbolic values); each owner's own value is put back after, or deleted where it had none
    (a method it inherits).  Callers hold :func:`tensig.check.verify.verify`'s lock: two
    threads' saves and restores interleaved left the patches (``builtins.len``, ``max``) in
    place for good."""
    saved: list[tuple[Any, str, Any]] = []
    try:
        for owner, name, value in replacements:
            saved.append((owner, name, vars(owner).get(name, _MISSING)))
            setattr(owner, name, value)
        yield
    finally:
        for owner, name, original in reversed(saved):
            if original is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, original)


def referenced(fn: Any) -> list[Any]:
    """The values a function's code names (the globals it reads, its closure's cells): what
    tells which library it uses."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    g = getattr(fn, "__globals__", {})
    values = [g[n] for n in code.co_names if n in g]
    for cell in getattr(fn, "__closure__", None) or ():
        with contextlib.suppress(ValueError):  # an empty cell
            values.append(cell.cell_contents)
    return values


def failure_line(e: BaseException, keep: Callable[[str], bool] = findings.user_code
                 ) -> tuple[str | None, int | None]:
    """The innermost line of a traceback in the user's code (not tensig's, not a library's), or
    in the files ``keep`` accepts."""
    tb = e.__traceback__
    file, line = None, None
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if keep(name):
            file, line = name, tb.tb_lineno
        tb = tb.tb_next
    return file, line


#: Library hooks of symbolic arrays, registered by the module that models the library when it
#: is imported: ``numpy_fallback`` (a NumPy function not modelled by hand), ``torch_dispatch``
#: (a torch function not in the table), ``torch_attribute``, ``torch_dtype``, ``jax_at``
#: (``x.at[...]``), ``torch_function`` (symbolic arrays' own, for a size torch is given).
PLUGINS: dict[str, Callable[..., Any]] = {}


def plugin(name: str) -> Callable[..., Any]:
    """The hook ``name``; missing when its library's model was never loaded (the library was
    first imported after verification began), which stops the trace with a note."""
    try:
        return PLUGINS[name]
    except KeyError:
        raise Unsupported(f"{name.split('_')[0]} code met before tensig loaded its model of "
                          f"that library (import it before calling tensig.verify)") from None
