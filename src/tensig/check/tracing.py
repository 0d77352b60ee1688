"""The trace in progress: what verification found, its budget, and the library hooks.

The current :class:`Tracer` lives in a context variable, so symbolic arrays made outside
``tensig.verify`` refuse to work instead of recording into nothing.  The per-library models plug
into symbolic arrays through :data:`PLUGINS`, so the array core imports none of them
(``trace_torch`` imports torch, and is loaded only once the user has).
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import functools
import itertools
import linecache
import math
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tensig.check import findings
from tensig.core.dims import Dim, Mod, divisions, exact_quotient, period
from tensig.core.errors import InconclusiveError

__all__ = ["MAX_STEPS", "PLUGINS", "RESIDUE_CAP", "Finding", "Namespace", "TraceLimit", "Tracer",
           "Unsupported", "failure_line", "patched", "plugin", "referenced",
           "residue_search", "tracer"]


RESIDUE_CAP = 4096  # assignments one residue search tries at most
PROOF_CAP = 20_000  # evaluations one equality proof under assumed divisions makes at most


def residue_search(base: dict[str, int], names: list[str], period: int,
                   fits: Callable[[dict[str, int]], bool]) -> dict[str, int] | None:
    """The first of ``base`` shifted by residues (each of ``names`` by one in
    ``range(period)``) that ``fits``, trying at most :data:`RESIDUE_CAP`: sizes modulo a
    period decide a division, and a search over them is one place that bounds its cost."""
    shifts = itertools.islice(itertools.product(range(period), repeat=len(names)), RESIDUE_CAP)
    shifted = ({**base, **{n: base[n] + r for n, r in zip(names, rs, strict=True)}}
               for rs in shifts)
    return next((e for e in shifted if fits(e)), None)


@dataclass(frozen=True)
class Finding:
    """One thing verification found, at a source line of the verified code; ``kind`` is a name
    registered in :mod:`tensig.check.findings` (another raises ``KeyError``)."""

    kind: str
    message: str
    file: str | None = None
    line: int | None = None
    #: the registry's severity of ``kind`` unless given ("error" or "warning")
    severity: str = ""

    def __post_init__(self) -> None:
        rule = findings.rule(self.kind)  # an unregistered kind raises, severity given or not
        object.__setattr__(self, "severity", self.severity or rule.severity)

    @property
    def code(self) -> str:
        return findings.rule(self.kind).code

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}: " if self.file else ""
        return f"{where}{self.severity}: {self.message}  [{self.code}]"


Where = tuple[str | None, int | None]  # a finding's file and line
MAX_STEPS = 1_000_000  # symbolic arrays one trace may make (a bound on a loop's work)
MAX_DATA_DECISIONS = 1000  # conditions on data-dependent sizes one line may decide


class TraceLimit(BaseException):
    """The trace ran past its step or time budget (a ``BaseException``: user code's
    ``except Exception`` must not swallow it)."""


class Unsupported(Exception):
    """An operation that verification does not model (the trace stops there)."""


@dataclass
class Loop:
    """A loop of the trace: ``n`` steps at the witness over the size ``d`` or (None) a literal
    count, begun and ended when so many symbolic arrays had been made (``Tracer.steps``);
    ``marks``, where each step began and then its end, for a loop run to its end."""

    n: int
    d: Dim | None
    begin: int
    end: int | None = None
    marks: list[int] | None = None


@dataclass
class Tracer:
    """Collects findings while a function runs on symbolic arrays."""

    witness: dict[str, int]
    findings: list[Finding] = field(default_factory=list)
    fresh: int = 0
    data_sizes: set[str] = field(default_factory=set)  # new_dim's names
    data_decisions: dict[Where, int] = field(default_factory=dict)  # see decided
    largest: Any = None  # the largest intermediate (a SymArray), for pricing
    divisors: list[tuple[Dim, int]] = field(default_factory=list)  # assumed exact divisions
    exact: set[tuple[Dim, int]] = field(default_factory=set)  # their quotients' divisions
    floors: list[tuple[Dim, int, Where]] = field(default_factory=list)  # not yet relied on
    leaks: dict[int, Dim] = field(default_factory=dict)  # witness -> symbol turned into an int
    steps: int = 0  # symbolic arrays made so far (see made)
    max_steps: int = field(default_factory=lambda: MAX_STEPS)
    used_jax: bool = False  # a JAX function saw symbolic values (verify's JAX fallback)
    rows: dict[Dim, int] = field(default_factory=dict)  # axis size -> row a loop is at
    # one fresh size per function of sizes: an undecided min(m, n), ("//", n, d)
    min_dims: dict[tuple[Any, ...], Dim] = field(default_factory=dict)
    _envs: dict[Any, dict[str, int]] = field(default_factory=dict, repr=False,
                                             compare=False)  # see assumption_env
    masks: dict[int, tuple[Any, Dim]] = field(default_factory=dict)  # id -> (mask, its count)
    loops: list[Loop] = field(default_factory=list)  # see begin
    quiet: int = 0  # zip is pulling its arguments' items: no loop they run counts (begin)
    #: each line's assumptions, by message up to the first colon ("assumes T - 3 >= 0")
    assumed: dict[Where, set[str]] = field(default_factory=dict)
    #: sizes at least 1 wherever the assumptions hold (``H - K + 1`` after ``K <= H``), see
    #: sym_sizes.nonzero_size: a product of them is no size that can be 0
    positive: set[Dim] = field(default_factory=set)
    #: the facts of each floor division by a size (``S*(T // S) <= T < S*(T // S + 1)``), which
    #: sym_indexing.at_most searches where the algebra cannot decide
    quotient_facts: set[Dim] = field(default_factory=set)
    #: torch.vmap calls running whose randomness is "error": a random op there raises
    random_refused: int = 0
    #: the conditions the witnesses decided (sym_sizes.decide), the latest last: text -> (its
    #: value, its line, its sides); a re-trace forces one to its other side (check/guards.py)
    guesses: dict[str, tuple[bool, Where, Any]] = field(default_factory=dict)
    forced: dict[str, tuple[bool, str]] = field(default_factory=dict)  # text -> (value, why)
    raised: tuple[str, Where] | None = None  # the user's raise that ended the trace
    required: set[str] = field(default_factory=set)  # see requirement

    def equal_under_assumptions(self, a: Dim, b: Dim) -> bool:
        """``a == b`` canonically, or at every size where the divisions assumed exact in
        ``a - b`` are (:func:`_zero_where_exact`).  Only ``a - b``'s own: a ``T // 2`` elsewhere
        would leave no size for a ``(T - 1) // 2`` here.  Only the code's (:meth:`rely` reports
        them): ``-> [2 * ((T - 1) // 2)]`` for ``[T - 1]`` is wrong at every even ``T``."""
        if a == b:
            return True
        with contextlib.suppress(InconclusiveError):
            if not a - b:
                return True  # zero at every size, not canonically: 2*(T // 2) + T % 2 == T
        within = divisions(a - b) & self.exact
        if not _zero_where_exact(a - b, frozenset(within)):
            return self._exact_by_size(a - b)
        for d in sorted(within, key=str):  # only those it needs: [N, L // 4, 2, D // 2] is
            if _zero_where_exact(a - b, frozenset(within - {d})):  # [N, L // 4, D] at any L
                within = within - {d}
        self.rely(a - b, within)
        return True

    def _exact_by_size(self, diff: Dim) -> bool:
        """``diff`` a multiple of one remainder ``n % d`` by a size (``B*T*D - B*T*H*(D //
        H)``, sym_sizes.quotient): zero where ``d`` divides ``n``, a requirement (a warning)
        said once, where it is first relied on, as a floor's (:meth:`rely`)."""
        for (n, d), q in self.quotients().items():
            if q.symbols & diff.symbols and exact_quotient(diff, n - d * q) is not None:
                self.requirement(n, d)
                return True
        return False

    def remainder(self, diff: Dim) -> tuple[Dim, Any] | None:
        """The division ``(n, d)`` of which ``diff`` is the remainder times a number (``D % 4``;
        ``D - H*(D // H)`` of a size ``H``): ``diff == 0`` says it is exact."""
        ((monomial, c),) = diff.terms.items() if len(diff.terms) == 1 else (((), 0),)
        if c and len(monomial) == 1 and monomial[0][1] == 1 and isinstance(monomial[0][0], Mod):
            return monomial[0][0].numerator, monomial[0][0].divisor
        return next(((n, d) for (n, d), q in self.quotients().items() if q.symbols & diff.symbols
                     and (exact_quotient(diff, n - d * q) or Dim.const(0)).constant), None)

    def divisible(self, diff: Dim, why: str) -> bool:
        """Whether ``diff == 0``, forced true (a guard ``assert D % 4 == 0``), says a division
        is exact (:meth:`remainder`): then it is required (``why``), and by a number assumed
        exact, so a later ``D // 4`` is too (:meth:`assumption_env`)."""
        division = self.remainder(diff)
        if division is not None:
            self.requirement(*division, why=why)
            if isinstance(division[1], int):
                self.require(*division)
        return division is not None

    def requirement(self, p: Dim, k: Any, where: Where | None = None, why: str = "") -> None:
        """Report ``requires p divisible by k`` once per trace, at the first line that needs it:
        each head's ``D // H`` after it needs no other warning."""
        said = f"requires {p} divisible by {k}"
        if said not in self.required:
            self.required.add(said)
            self.report("assumption", said + why, where)

    def quotients(self) -> dict[tuple[Dim, Dim], Dim]:
        """The floor divisions by a symbolic size made so far (sym_sizes.quotient): ``(n, d)``
        to ``n // d``, a fresh size that only ``n`` and ``d`` decide."""
        return {(k[1], k[2]): q for k, q in self.min_dims.items() if isinstance(k[0], str)}

    def require(self, p: Dim, k: int, floor: bool = False) -> None:
        """Record ``p // k`` as exact: a requirement (a warning), or with ``floor`` (the code's
        ``//``) reported only once a check relies on it (:meth:`rely`): a slice up to ``T // 2``
        is valid at every ``T``, a reshape to ``[2, T // 2]`` is not."""
        if (p, k) not in self.divisors:
            self.divisors.append((p, k))
            self.exact |= divisions(p // k)
        if not floor:
            self.requirement(p, k)
        elif (p, k, where := self.where()) not in self.floors:  # reported at the ``//``'s line
            self.floors.append((p, k, where))

    def rely(self, d: Dim, used: set[tuple[Dim, int]] | None = None) -> None:
        """Report the floor divisions that ``d`` (a size that vanishes only where divisions are
        exact) holds, or those of them ``used``, as requirements, each at the line that
        divided."""
        used = divisions(d) if used is None else used
        for p, k, where in list(self.floors):
            if divisions(p // k) & used:
                self.floors.remove((p, k, where))
                self.requirement(p, k, where)

    def unit(self) -> int:
        """The least common multiple of the divisions assumed exact: a step between sizes
        that keeps every division exact (or inexact) as it was."""
        return math.lcm(1, *(k for _, k in self.divisors))

    def assumption_env(self) -> dict[str, int]:
        """Sizes where every assumed division is exact: the witnesses times :meth:`unit`,
        shifted by the residues that make ``(T - 1) // 2`` exact too (:func:`residue_search`).
        Cached: a search that finds no shift costs tens of milliseconds."""
        key = (tuple(self.divisors), tuple(self.witness.items()))
        if key not in self._envs:
            lcm, names = self.unit(), {*self.witness}
            exact = [(p, k) for p, k in self.divisors if p.symbols <= names]
            divided = sorted({n for p, _ in exact for n in p.symbols})
            base = {n: w * lcm for n, w in self.witness.items()}
            self._envs[key] = residue_search(base, divided, lcm, lambda e: all(
                p.evaluate(e) % k == 0 for p, k in exact)) or base
        return dict(self._envs[key])

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
        """Record a finding of a registered ``kind`` at the user's line running now or at
        ``where``; the finding, for one that a later step may withdraw."""
        file, line = where or self.where()
        finding = Finding(kind, message, file, line)
        if finding not in self.findings:
            self.findings.append(finding)
            if kind == "assumption":
                self.assumed.setdefault((file, line), set()).add(message.split(":")[0])
        return finding

    def made(self, array: Any) -> None:
        """Count a new symbolic array (past ``max_steps`` the trace stops: a long loop is
        reported, never waited for) and keep the largest symbolic one for pricing, compared at
        large sizes, so the degree decides."""
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
        :meth:`leak`), since a literal of the code may equal the witness; its negation as
        the size's (``x[-int(N * 0.1):]``)."""
        d = self.leaks.get(size, -self.leaks[-size] if -size in self.leaks else None)
        if d is None:
            return size
        self.report("assumption", f"the number {size} (a size or a concrete array's axis) is "
                                  f"read as {d}: {d} was turned into a number ({d}'s witness "
                                  f"is {size}); assumes it is {d}, not a constant {size}")
        return d

    def decided(self, *dims: Dim) -> None:
        """Count a size condition decided on ``dims``: past :data:`MAX_DATA_DECISIONS` at one
        line of a ``while`` loop on data-dependent sizes (which no witness shrinks) the trace
        stops, as ``while order.size > 0`` of a greedy NMS would never end; a ``for`` loop ends
        whatever the data (k-means' per-cluster check)."""
        if any(d.symbols & self.data_sizes for d in dims):
            where = self.where()
            if where[1] not in _in_while_loops(where[0] or ""):
                return
            self.data_decisions[where] = count = self.data_decisions.get(where, 0) + 1
            if count > MAX_DATA_DECISIONS:
                raise TraceLimit(f"a condition on data-dependent sizes was decided {count - 1} "
                                 f"times at line {where[1]}: a loop that runs until the data "
                                 "says stop (while x.size > 0) is not followed")

    def new_dim(self, hint: str, witness: int = 3) -> Dim:
        """A fresh existential dimension (a data-dependent size, like a Remora box)."""
        self.fresh += 1
        name = f"{hint}{self.fresh}"
        self.data_sizes.add(name)
        self.witness[name] = witness
        return Dim.symbol(name)

    def count_of(self, mask: Any) -> Dim:
        """How many elements a mask selects (or ``nonzero`` finds): one fresh size per array
        (kept, so its id stays its own), so ``V[m]`` and ``r[m]`` agree, until :meth:`written`."""
        if id(mask) not in self.masks:
            self.masks[id(mask)] = mask, self.new_dim("nnz")
        return self.masks[id(mask)][1]

    def written(self, array: Any) -> None:
        """``array`` changed in place: a boolean one may be a view of any mask (``m[:][0] =
        True``), so every mask's count is another from here; numbers get another count of
        nonzeros; a reorder's view back is no longer one with it (``reshape_order.Skew``)."""
        if getattr(array, "skew", None) is not None:
            array.skew = None
        if getattr(array, "kind", None) == "b":
            self.masks.clear()
        else:
            self.masks.pop(id(array), None)

    def value(self, d: Dim) -> int:
        return d.evaluate(self.witness)

    def begin(self, d: Dim | None, n: int = 0) -> Loop:
        """A loop of ``d`` steps or (None) a literal count ``n`` begins, so a list of one item
        per step joins to its count (:func:`~tensig.check.sym_functions._loop_steps`); not kept
        while zip pulls its arguments (``quiet``): it may stop them short."""
        loop = Loop(n if d is None else self.value(d), d, self.steps)
        if not self.quiet:
            self.loops.append(loop)
        return loop

    def loop_of(self, arrays: list[Any]) -> Dim | None:
        """The size of a loop run to its end that made ``arrays``, the k-th array at its k-th
        step (innermost first): evidence where its count is too small to be any."""
        for loop in reversed(self.loops):
            marks = loop.marks or []
            if len(marks) == len(arrays) + 1 and all(
                    marks[k] < getattr(a, "made_at", -1) <= marks[k + 1]
                    for k, a in enumerate(arrays)):
                return loop.d
        return None

    def leak(self, d: Dim, read: bool = False) -> int:
        """A signature symbol turned into a Python int (``int(T)``, ``pe[:T]`` on a concrete
        array): its witness is remembered, so a concrete axis of exactly that size can be read
        back as the symbol (witnesses are distinct primes, so the reading is unambiguous).
        With ``read`` (``int(L * 0.75)``) any size is, a compound one as a prime no size has
        (``L // 4`` is 3 at the witness: an RGB axis, a mask's count), a fresh one as a fresh
        size of such a prime (each fresh size is 3)."""
        w = self.value(d)
        plain = len(d.symbols) == 1 and d == Dim.symbol(next(iter(d.symbols)))
        if read and (not plain or d.symbols <= self.data_sizes):
            taken = {abs(n) for n in self.leaks} | {*self.witness.values()}
            prime = next(n for n in primes() if n not in taken)
            if plain:
                w, d = prime, self.new_dim("n", prime)
            else:
                w = next((n for n, e in self.leaks.items() if e == d), -prime if w < 0 else prime)
        if read or (plain and w >= 11):
            self.leaks[w] = d
        return w


def primes() -> Iterator[int]:
    """Primes from 11 up: numbers that stand for sizes, which code rarely writes as literals."""
    return (n for n in itertools.count(11) if all(n % k for k in range(2, math.isqrt(n) + 1)))


_TRACER: contextvars.ContextVar[Tracer | None] = contextvars.ContextVar("tensig_tracer",
                                                                       default=None)


@functools.lru_cache(maxsize=4096)  # every broadcast of two different sizes asks
def _zero_where_exact(d: Dim, within: frozenset[tuple[Dim, int]]) -> bool:
    """Whether ``d`` is 0 at every size where the divisions ``within`` are exact (False past
    :data:`PROOF_CAP` points).  On each residue class modulo :func:`period` ``d`` is a
    polynomial, 0 if it is on a grid of its :func:`_degree` plus one values per size.  Two
    points were no proof: with ``T`` even assumed, ``B + 4`` and ``T`` agreed at both."""
    if not divisions(d):
        return False  # a polynomial, canonically not 0
    step, names = period(d), sorted(d.symbols)
    inside = sorted({n for p, _ in divisions(d) for n in p.symbols})
    grid = [range(1, _degree(d, n) + 2) for n in names]
    if step ** len(inside) * math.prod(map(len, grid)) > PROOF_CAP:
        return False
    for residues in itertools.product(range(step), repeat=len(inside)):
        shift = dict(zip(inside, residues, strict=True))

        def at(m: tuple[int, ...], shift: dict[str, int] = shift) -> dict[str, int]:
            return {n: shift[n] + step * v if n in shift else v
                    for n, v in zip(names, m, strict=True)}

        if any(p.evaluate(at((1,) * len(names))) % k for p, k in within):
            continue  # sizes where an assumed division is not exact
        if any(d.evaluate(at(m)) for m in itertools.product(*grid)):
            return False
    return True


def _degree(d: Dim, name: str) -> int:
    """``d``'s degree in the size ``name``, a quotient's as its numerator's, a remainder's 0."""
    return max((sum(p * (a == name if isinstance(a, str) else 0 if isinstance(a, Mod) else
                         _degree(a.numerator, name)) for a, p in m) for m in d.terms), default=0)


@functools.cache
def _in_while_loops(file: str) -> frozenset[int]:
    """The lines of ``file`` inside a ``while`` loop, which ends only when its data says so
    (:meth:`Tracer.decided`): a ``for`` loop ends with its iterable."""
    try:
        tree = ast.parse("".join(linecache.getlines(file)))
    except (SyntaxError, ValueError):
        return frozenset()
    return frozenset(line for node in ast.walk(tree) if isinstance(node, ast.While)
                     for line in range(node.lineno, (node.end_lineno or node.lineno) + 1))


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
    """A function's globals as an object for :func:`patched`, or, with ``owner``, attributes
    read here and set on the owner."""

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
    """Attributes ``(owner, name, value)`` set while a trace runs, each owner's own put back
    after (deleted where it had none).  Callers hold :func:`tensig.check.verify.verify`'s
    lock: interleaved saves and restores left ``builtins.len`` patched for good."""
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
    """The values a function's code names (globals, closure cells): which library it uses."""
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
    """The innermost traceback line in the user's code (or in the files ``keep`` accepts)."""
    tb = e.__traceback__
    file, line = None, None
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if keep(name):
            file, line = name, tb.tb_lineno
        tb = tb.tb_next
    return file, line


#: Library hooks of symbolic arrays, registered by each library's model when imported:
#: ``numpy_fallback``, ``torch_dispatch`` (functions not modelled by hand), ``torch_attribute``,
#: ``torch_dtype``, ``jax_at`` (``x.at[...]``), ``torch_function`` (for a size torch is given).
PLUGINS: dict[str, Callable[..., Any]] = {}


def plugin(name: str) -> Callable[..., Any]:
    """The hook ``name``; missing (its library was imported after verify began), a stop."""
    try:
        return PLUGINS[name]
    except KeyError:
        raise Unsupported(f"{name.split('_')[0]} code met before tensig loaded its model of "
                          f"that library (import it before calling tensig.verify)") from None
