"""The decorator's interpreter: the reference check of a call, and the one that explains.

Per annotation a cached :class:`_Program` runs over a call's :class:`_Bindings`: the sizes bound,
where each was bound, and the expression items as one solver problem.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import operator
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from tensig.check.signature_error import _ARGS, _error, _Mismatch
from tensig.core.annotations import (
    _PYTHON_DTYPES,
    AnnotationShape,
    Broadcastable,
    Deferred,
    FunctionSignature,
    RowVariable,
    ShapeSpecMarker,
    _is_name,
    dtype_accepts,
    parse_annotation,
)
from tensig.core.dimcode import compile_dim
from tensig.core.dims import Dim, Mod
from tensig.core.solver import DimVar, LinearRel, Origin, Solver

_NAME, _FIXED, _EXPR, _VAR, _ANON = 0, 1, 2, 3, 4
_BCAST = 16  # flag: size 1 also fits (jaxtyping's ``#``), and binds nothing
_EMPTY = inspect.Parameter.empty
_NO_POSITION = sys.maxsize
_GIVEN = ("given", None, None, None)  # the origin of a size known before the check

class _Expr:
    """An expression item (``2*h``): its polynomial, text, sorted names and compiled value."""

    __slots__ = ("dim", "evaluate", "symbols", "text")

    def __init__(self, d: Dim):
        self.dim = d
        self.text = str(d)
        self.symbols = tuple(sorted(d.symbols))
        self.evaluate = compile_dim(d)


class _DeferredExpr:
    """A :class:`~tensig.core.annotations.Deferred` size (jaxtyping's f-string axes): Python
    of the bound sizes and the ``{...}`` arguments, evaluated once its names are bound."""

    __slots__ = ("code", "parts", "symbols", "text")

    def __init__(self, item: Deferred):
        self.text = item.text
        self.symbols = tuple(sorted(item.symbols)) + ((_ARGS,) if "{" in item.text else ())
        # each ``{...}`` part is a value the rest reads by a name, never text pasted into the
        # code: an argument's value is data (a string argument is not run)
        self.parts = _BRACES.findall(item.text)
        names = iter(range(len(self.parts)))
        self.code = _BRACES.sub(lambda m: f"__tensig_arg{next(names)}__", item.text)

    def evaluate(self, env: dict[str, Any]) -> int | None:
        """The size as an ``int``; ``None`` (not checked) where it is no whole number."""
        names = env
        if self.parts:
            arguments, names = env[_ARGS], dict(env)
            for i, part in enumerate(self.parts):
                value = names[f"__tensig_arg{i}__"] = _eval(part, self.text, arguments)
                if value is None:  # an optional size not given: not checked, as before
                    return None
                if not _number(value):
                    raise TypeError(f"the deferred size {self.text!r} reads {{{part}}} = "
                                    f"{value!r:.60}, a {type(value).__name__}, not a number: "
                                    "pass the size as an int")
        try:  # an array's ``==`` would answer an array
            return operator.index(_eval(self.code, self.text, names))
        except TypeError:
            return None


def _number(value: Any) -> bool:
    """Whether ``value`` is one number (not a string, not an array of several)."""
    shape: Any = getattr(value, "shape", None)  # () for one number in an array
    if isinstance(value, str | bytes) or shape:
        return False
    return isinstance(value, numbers.Real) or hasattr(value, "__index__")


_BUILTINS = {"__builtins__": {}, "min": min, "max": max, "len": len}


def _eval(code: str, text: str, names: dict[str, Any]) -> Any:
    """``code`` (of the deferred size ``text``) with only ``min``, ``max`` and ``len`` as
    builtins, as jaxtyping's f-string axes read it."""
    try:
        return eval(_compiled(code), _BUILTINS, names)
    except Exception as e:
        raise TypeError(f"the deferred size {text!r} cannot be evaluated: "
                        f"{type(e).__name__}: {e}") from None


@functools.lru_cache(maxsize=1024)
def _compiled(text: str) -> Any:
    """A deferred size's code, compiled once (compiling costs more than running it)."""
    return compile(text, "<deferred size>", "eval")


_BRACES = re.compile(r"\{([^{}]*)\}")


# -- matching one shape ----------------------------------------------------------------------


def _is_size(x: object) -> bool:
    return isinstance(x, int) or (hasattr(x, "__index__") and not isinstance(x, float))


class _Program:
    """The precompiled check of one annotation: ``ops`` holds ``(code, payload, item index)``
    per item in memory order (a name, a fixed size, an expression, a row variable's key, or
    ``-1`` for ``_``)."""

    __slots__ = ("keys", "loose", "n_fixed", "ops", "shape")

    def __init__(self, shape: AnnotationShape):
        self.shape = shape
        ops: list[tuple[int, Any, int]] = []
        for index, item in enumerate(shape.items):
            flag = 0
            if isinstance(item, Broadcastable):
                flag, item = _BCAST, item.item
            if isinstance(item, RowVariable):
                code = _ANON if item.name is None else _VAR | (_BCAST * item.broadcast)
                ops.append((code, item.key, index))
            elif item is Any:
                ops.append((-1, None, index))
            elif isinstance(item, int):
                ops.append((_FIXED | flag, item, index))
            elif isinstance(item, Deferred):
                ops.append((_EXPR | flag, _DeferredExpr(item), index))
            elif _is_name(item):
                ops.append((_NAME | flag, next(iter(item.symbols)), index))
            else:
                ops.append((_EXPR | flag, _Expr(item), index))
        self.ops = tuple(ops)
        self.keys = tuple(p for c, p, _ in ops if c & ~_BCAST in (_VAR, _ANON))
        self.loose = frozenset(p for c, p, _ in ops if c == _VAR | _BCAST)
        self.n_fixed = len(ops) - len(self.keys)

    def match(self, shape: Any, b: _Bindings, label: str) -> None:
        """Check ``shape`` against the annotation, binding new names."""
        env = b.env
        lengths = self.row_lengths(shape, env, label)
        axis = 0
        for code, payload, index in self.ops:
            if code & ~_BCAST in (_VAR, _ANON):
                n = lengths[payload]
                if code != _ANON:
                    _check_row(payload, tuple(shape[axis:axis + n]), b, label, self, shape, axis,
                               index, code & _BCAST)
                axis += n
                continue
            size = shape[axis]
            if code & _BCAST:
                if size == 1:
                    axis += 1
                    continue
                code &= ~_BCAST
            if code == _NAME:
                bound = env.get(payload)
                if bound is None:
                    if size == size:  # not NaN (an unknown dask size)
                        env[payload] = size
                        b.origins[payload] = (label, axis, shape, None)
                elif bound != size and _is_size(size):
                    raise _Mismatch("name", label, self.shape, shape, axis, index, name=payload,
                                    bound=bound)
            elif code == _FIXED:
                if size != payload and _is_size(size):
                    raise _Mismatch("fixed", label, self.shape, shape, axis, index)
            elif code == _EXPR:
                b.add(payload, size, (label, self.shape, shape, axis, index))
            axis += 1

    def row_lengths(self, shape: Any, env: dict[str, Any], label: str) -> dict[str, int]:
        """How many axes each row variable takes in ``shape`` (a rank error if none fits)."""
        free = len(shape) - self.n_fixed
        unknown: dict[str, int] = {}
        lengths: dict[str, int] = {}
        for key in self.keys:
            bound = env.get(key)
            if bound is None or key in self.loose or "#" + key in env:  # *#v: any length
                unknown[key] = unknown.get(key, 0) + 1
            else:
                lengths[key] = len(bound)
                free -= len(bound)
        if len(unknown) > 1:
            raise _Mismatch("ambiguous", label, self.shape, shape, names=tuple(unknown))
        if unknown:
            (key, count), = unknown.items()
            if free < 0 or free % count:
                raise _Mismatch("rank", label, self.shape, shape)
            lengths[key] = free // count
        elif free != 0:
            raise _Mismatch("rank", label, self.shape, shape)
        return lengths


def _check_row(key: str, segment: tuple[Any, ...], b: _Bindings, label: str, program: _Program,
               shape: Any, axis: int, index: int, broadcast: int = 0) -> None:
    """Bind a row variable to its axes, or compare them with its binding (``*#v``: axes that
    broadcast against it fit, and it binds the broadcast of both, as in jaxtyping)."""
    env = b.env
    bound = env.get(key)
    if bound is None:
        env[key] = segment
        b.origins[key] = (label, axis, shape, len(segment))
        if broadcast:
            env["#" + key] = True
    elif bound != segment and all(_is_size(s) for s in segment):
        loose = env.get("#" + key, False)
        try:  # NumPy's broadcast of both, where either broadcasts
            joined = np.broadcast_shapes(bound, segment) if broadcast or loose else None
        except ValueError:
            joined = None
        if joined is None or (not broadcast and joined != segment) \
                or (not loose and joined != bound):
            raise _Mismatch("rowvar", label, program.shape, shape, axis, index, name=key,
                            bound=bound, segment=segment)
        if loose:  # jaxtyping: the binding takes this occurrence's broadcastability
            env[key] = joined
            if not broadcast:
                del env["#" + key]


class _Bindings:
    """One check's bindings: ``env`` (a name's size, a row variable's sizes), ``origins`` (where
    each was bound, for messages) and the expression items, one solver problem of
    :class:`~tensig.core.solver.LinearRel` (built on the first item met)."""

    __slots__ = ("deferred", "env", "origins", "pending", "solver", "vars", "where")
    vars: dict[str, DimVar]
    where: dict[int, tuple[Any, ...]]  # id(relation origin) -> the item's place

    def __init__(self, given: dict[str, Any] | None = None) -> None:
        self.env: dict[str, Any] = dict(given or {})
        self.origins: dict[str, tuple[Any, ...]] = dict.fromkeys(self.env, _GIVEN)
        self.solver: Solver | None = None  # nothing built until an expression item is met
        self.deferred: list[tuple[Any, ...]] = []
        self.pending: list[tuple[Any, ...]] = []  # the places given to the solver

    def add(self, expr: _Expr | _DeferredExpr, size: Any, at: tuple[Any, ...]) -> None:
        """Relate an expression item to the size it has in this call (``at``: the item's place,
        as a mismatch names it)."""
        if not _is_size(size):  # an unknown (dask ``nan``) size checks and binds nothing
            return
        place = (expr, size, at)
        if isinstance(expr, _DeferredExpr):
            self.deferred.append(place)
            self._evaluate_deferred()
            return
        if self._evaluated(place):  # nothing to solve: no solver is needed
            return
        if self.solver is None:
            self.solver, self.vars, self.where = Solver(), {}, {}
        solver = self.solver
        names = {n: self.vars.get(n) or self.vars.setdefault(n, DimVar(n)) for n in expr.symbols}
        label, _, _, axis, _ = at
        origin = _origin(label, axis, expr.text)
        self.where[id(origin)] = place
        self.pending.append(place)

        def report(kind: str, facts: dict[str, Any]) -> Exception:
            if kind == "no_solution":
                return _Mismatch("solve", *at, expr=expr, name=facts["name"])
            return _Mismatch("expr", *at, expr=expr, value=facts["value"])

        solver.add(LinearRel(DimVar(None, int(size)), expr.dim, names, origin, report))
        self.run()

    def run(self) -> None:
        """Propagate the sizes bound so far; bind in ``env`` what the solver solved."""
        solver, env = self.solver, self.env
        if solver is None:
            return
        for name, var in self.vars.items():
            if var.value is None and name in env:
                solver.set_value(var, int(env[name]), _BOUND)
        try:
            solver.run()
        finally:  # also before a mismatch, whose message names the sizes solved
            for name, var in self.vars.items():
                if var.value is not None and name not in env:
                    expr, size, (label, _, shape, axis, _) = self.where[id(var.origin)]
                    env[name] = var.value
                    self.origins[name] = (label, axis, shape, (expr.text, size))

    def resolve(self) -> None:
        """Settle everything the bindings so far determine; what they do not is skipped."""
        self.run()
        self._evaluate_deferred()
        self._solve_growing()
        self._compare_undecided()

    def _solve_growing(self) -> None:
        """A use of one unbound name whose form never decreases with it (``T**2``, ``T//2 + 1``)
        or repeats (``b % 2``) is left alone by the linear solver; a search settles it: the
        whole solutions of a growing use are a run of ``t`` (``T // 2 = 3``: 6 and 7), those of
        every use of the name are intersected, a single one is bound (so the other uses are
        checked against it), none is a mismatch, not a pass."""
        env, grown = self.env, True
        while grown:
            grown = False
            runs: dict[str, tuple[range, tuple[Any, ...] | None]] = {}  # solutions, the use
            periodic: dict[str, list[tuple[Any, ...]]] = {}  # name -> its uses in ``%`` only
            for place in self.pending:
                expr, size, _ = place
                free = [n for n in expr.symbols if n not in env]
                if len(free) != 1:
                    continue
                form = expr.dim.subs({n: env[n] for n in expr.symbols if n in env})
                name, period = free[0], _period(form)
                if period is not None:
                    periodic.setdefault(name, []).append((*place, period))
                elif form.symbols and _grows(form, False):
                    found = _growing_roots(expr, env, name, int(size))
                    runs[name] = self._narrow(runs.get(name), found, place, name)
            for name, uses in periodic.items():
                runs[name] = self._cut(runs.get(name, (range(sys.maxsize), None)), uses, name)
            for name, (found, use) in runs.items():
                if len(found) == 1 and use is not None:
                    expr, size, (label, _, shape, axis, _) = use
                    env[name], grown = found[0], True
                    self.origins[name] = (label, axis, shape, (expr.text, size))
        for place in self.pending:
            self._evaluated(place)

    def _narrow(self, before: tuple[range, Any] | None, found: range, place: tuple[Any, ...],
                name: str) -> tuple[range, tuple[Any, ...]]:
        """``found``, the solutions of the use at ``place``, cut by those of the name's uses
        before (``before``: they and the use that last cut them): none left is a mismatch."""
        expr, _, at = place
        if before is None:
            if not found:
                raise _Mismatch("solve", *at, expr=expr, name=name)
            return found, place
        run, by = before
        both = range(max(found.start, run.start), min(found.stop, run.stop))
        if not both:
            raise self._apart(place, by, name, (run[0], run[-1]))
        return (run, by) if both == run else (both, place)

    def _cut(self, before: tuple[range, Any], uses: list[tuple[Any, ...]], name: str
             ) -> tuple[range, Any]:
        """The solutions ``before`` (a run, and the use that cut it) that every periodic use
        (``b % 2``) holds at too, tried over one period of them all: none is a mismatch, one
        where the run is no longer than the period is bound."""
        run, by = before
        cycle = math.lcm(*(period for *_, period in uses))
        ts: Sequence[int] = run[:cycle]
        for expr, size, at, _ in uses:
            hits = [t for t in ts if expr.evaluate({**self.env, name: t}) == size]
            if not hits:
                if by is None:
                    raise _Mismatch("solve", *at, expr=expr, name=name)
                raise self._apart((expr, size, at), by, name, ts)
            ts, by = hits, by or (expr, size, at)
        return (range(ts[0], ts[0] + 1), uses[0][:3]) if len(run) <= cycle and len(ts) == 1 \
            else before

    def _apart(self, place: tuple[Any, ...], by: tuple[Any, ...], name: str,
               ts: Sequence[int]) -> _Mismatch:
        """The use at ``place`` holds at none of ``ts``, where the use ``by`` holds."""
        expr, _, at = place
        values = [expr.evaluate({**self.env, name: t}) for t in ts]
        low, high = min(values), max(values)
        return _Mismatch("apart", *at, expr=expr, other=by[0], where=by[2],
                         value=low if low == high else f"{low}..{high}")

    def _compare_undecided(self) -> None:
        """Expressions no binding decides are skipped, but their uses must agree: with the
        bound sizes put in, a use is ``a*P + c`` for a form ``P`` whose coefficients share no
        factor (``h*w`` in ``2*h*w + 1``), one unknown its first use solves; a solved ``P`` is
        put into the other uses (:func:`_put`), round after round until none solves more."""
        env = self.env
        uses = [(expr, size, at, expr.dim.subs({n: env[n] for n in expr.symbols if n in env}))
                for expr, size, at in self.pending if any(n not in env for n in expr.symbols)]
        known: dict[Dim, tuple[Fraction, tuple[Any, ...]]] = {}  # P -> its value, its use
        grown = True
        while grown:
            grown = False
            for expr, size, at, form in uses:
                by = None  # the use whose P was put in
                for p, (value, use) in known.items():
                    if value.denominator == 1:
                        put = _put(form, p, int(value))
                        by, form = (use if put != form else by), put
                value = form.constant
                if value is None:
                    const = form.terms.get((), 0)
                    first, *rest = (v for m, v in form.terms.items() if m)
                    a = math.gcd(first, *rest) * (1 if first > 0 else -1)
                    p = (form - const) * (1 if a > 0 else -1) // abs(a)  # Dim divides by a > 0
                    if p not in known:
                        known[p], grown = (Fraction(size - const, a), (expr, size, at)), True
                    value, by = known[p][0] * a + const, known[p][1]
                if by is not None and value != size:
                    raise _Mismatch("apart", *at, expr=expr, value=value, other=by[0],
                                    where=by[2])

    def _evaluate_deferred(self) -> None:
        self.deferred = [place for place in self.deferred if not self._evaluated(place)]

    def _evaluated(self, place: tuple[Any, ...]) -> bool:
        """Check an item whose names are all bound; ``False`` while some are not."""
        expr, size, at = place
        if any(s not in self.env for s in expr.symbols):
            return False
        value = expr.evaluate(self.env)
        # a deferred size that is no whole number (Python of the sizes) is not checked
        if value != size and (isinstance(expr, _Expr) or _is_size(value)):
            raise _Mismatch("expr", *at, expr=expr, value=value)
        return True


_BOUND = Origin(note="bound by an earlier item")


def _grows(form: Dim, nonnegative: bool) -> bool:
    """Whether ``form`` (of one unbound name) never decreases as the name grows from 0: no
    negative coefficient, no ``%``, ``//`` of such forms; inside products and quotients its
    constant is nonnegative too (``nonnegative``), so no factor changes sign."""
    return all((not m or c >= 0) and (c >= 0 or not nonnegative)
               and all(isinstance(atom, str) or (not isinstance(atom, Mod)
                                                 and _grows(atom.numerator, True))
                       for atom, _ in m)
               for m, c in form.terms.items())


def _period(form: Dim) -> int | None:
    """The period of a form whose name occurs only in ``%`` of polynomials (``b % 2``,
    ``(T + 3) % 4 + 1``), which a size then never exceeds; ``None`` for any other form."""
    atoms = [atom for m in form.terms for atom, _ in m]
    mods = [a for a in atoms if isinstance(a, Mod)
            and all(isinstance(b, str) for n in a.numerator.terms for b, _ in n)]
    if not mods or len(mods) < len(atoms):
        return None
    period = math.lcm(*(a.divisor for a in mods))
    return period if period <= 4096 else None


def _growing_roots(expr: _Expr, env: dict[str, Any], name: str, size: int) -> range:
    """The whole ``t >= 0`` where ``expr``, nondecreasing in ``name``, is ``size``: from the
    least ``t`` reaching ``size`` to the least passing it (each a search doubling its bound,
    then bisection); empty where none."""
    def value(t: int) -> int:
        return int(expr.evaluate({**env, name: t}))

    def least(target: int, lo: int) -> int:
        hi = lo + 1
        while value(hi) < target and hi < 2**64:
            hi += hi - lo
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (mid + 1, hi) if value(mid) < target else (lo, mid)
        return lo

    start = least(size, 0)
    return range(start, least(size + 1, start))


@functools.lru_cache(maxsize=4096)
def _origin(label: str, axis: int, text: str) -> Origin:
    """One :class:`Origin` per place (building a frozen dataclass per call costs microseconds)."""
    return Origin(operand=label, position=axis, note=text)


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


_program = functools.lru_cache(maxsize=1024)(_Program)


def match_shape(shape: Sequence[int], annotation: str | AnnotationShape,
                sizes: dict[str, Any] | None = None) -> dict[str, Any]:
    """Match one concrete shape against an annotation; return every binding (names, row vars).

    ``sizes`` are bindings known beforehand (not modified).  A mismatch raises
    :class:`SignatureError` (function ``match_shape``, argument ``shape``).

    >>> match_shape((3, 6, 4), "B, 2*h, ..v..")
    {'B': 3, 'h': 3, 'v': (4,)}
    >>> match_shape((3, 4), "B T", {"T": 5})
    Traceback (most recent call last):
    ...
    tensig.check.signature_error.SignatureError: match_shape(): argument 'shape' axis 1 ('T') has size 4, but T = 5 was given
        B T
          ^
      argument 'shape' has shape (3, 4)
    """  # noqa: E501
    ann = annotation if isinstance(annotation, AnnotationShape) else parse_annotation(annotation)
    b = _Bindings(sizes)
    try:
        _program(ann).match(tuple(shape), b, "shape")
        b.resolve()
    except _Mismatch as m:
        raise _error("match_shape", m, b.env, b.origins) from None
    return b.env


# -- checking one call -----------------------------------------------------------------------


def _check_value(x: Any, label: str, program: _Program, marker: ShapeSpecMarker,
                 optional: bool, b: _Bindings) -> None:
    """Check one value (an argument or the return value) against its compiled annotation."""
    if x is None:
        if optional:
            return
        raise _Mismatch("none", label, program.shape, x, marker=marker)
    if marker.pytree:
        leaf_marker = ShapeSpecMarker(marker.shape, marker.dtype, marker.scalar,
                                      family=marker.family)
        for path, leaf in _leaves(x, label):
            _check_value(leaf, path, program, leaf_marker, False, b)
        return
    wrapper = getattr(marker, "wrapper", None)  # Padded[...] (tensig.execution.padding): its type
    if wrapper is not None and not isinstance(x, wrapper):
        raise _Mismatch("wrapper", label, program.shape, x, marker=marker)
    try:
        shape = x.shape
        dtype = x.dtype if marker.dtype is not None else None
    except AttributeError:
        scalar = marker.scalar
        if scalar is None or not isinstance(x, scalar) or (scalar is int and isinstance(x, bool)):
            raise _Mismatch("noshape", label, program.shape, x, marker=marker) from None
        shape, dtype = (), _PYTHON_DTYPES[type(x) if type(x) in _PYTHON_DTYPES else scalar]
    if isinstance(shape, str | bytes) or not hasattr(shape, "__len__"):  # a duck type's
        raise _Mismatch("badshape", label, program.shape, x, marker=marker, found=shape)
    program.match(shape, b, label)
    if marker.dtype is not None and not dtype_accepts(marker.dtype, dtype):
        raise _Mismatch("dtype", label, program.shape, shape, dtype=dtype, marker=marker)


_MAX_LEAVES = 1_000_000


def _leaves(tree: Any, label: str) -> Iterator[tuple[str, Any]]:
    """The leaves of nested dicts, lists and tuples, with their paths (``x['a'][0]``)."""
    stack = [(label, tree)]
    count = 0
    while stack:
        path, node = stack.pop()
        count += 1
        if count > _MAX_LEAVES:
            raise TypeError(f"{label}: a PyTree of more than {_MAX_LEAVES} nodes")
        if isinstance(node, dict):
            stack.extend((f"{path}[{k!r}]", v) for k, v in reversed(node.items()))
        elif isinstance(node, list | tuple):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(node))))
        else:
            yield path, node


class _Checker:
    """The interpreted check of one function, to which the fast path hands a call it does not
    plainly accept, so errors name where each size came from."""

    def __init__(self, fn: Callable[..., Any], sig: FunctionSignature, check_return: bool):
        self.fn = fn
        self.sig = sig
        # per parameter (name, position, default, program, marker, optional); a variadic's
        # entry starts with its kind
        self.single: list[tuple[Any, ...]] = []
        self.variadic: list[tuple[Any, ...]] = []
        for p in sig.parameters:
            entry = (p.name, _NO_POSITION if p.position is None else p.position, p.default,
                     _program(p.marker.shape), p.marker, p.optional)
            if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                self.variadic.append((p.kind, *entry))
            else:
                self.single.append(entry)
        self.named = frozenset(p.name for p in sig.parameters)
        deferred = any("{" in str(item) for _, m in sig.markers() for item in m.shape.items)
        self.signature = inspect.signature(fn) if deferred else None  # for ``{name}`` sizes
        result = sig.result if check_return else None
        # the checked return values: (index in the returned tuple, label, program, marker,
        # optional), and the tuple's length (``None``: a single value, or nothing checked)
        self.length = len(result) if isinstance(result, tuple) else None
        self.results: tuple[tuple[Any, ...], ...]
        if isinstance(result, ShapeSpecMarker):
            self.results = ((None, "return", _program(result.shape), result, sig.result_optional),)
        else:
            self.results = tuple((i, f"return[{i}]", _program(m.shape), m, False)
                                 for i, m in enumerate(result or ()) if m is not None)

    def check_args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Bindings:
        """Check the arguments; return the bindings, for the return value."""
        b = _Bindings()
        if self.signature is not None:
            bound = self.signature.bind_partial(*args, **kwargs)
            bound.apply_defaults()
            b.env[_ARGS] = dict(bound.arguments)
            b.origins[_ARGS] = _GIVEN
        try:
            for name, position, default, program, marker, optional in self.single:
                x = args[position] if position < len(args) else kwargs.get(name, default)
                if x is not _EMPTY:  # a missing argument: fn raises its own TypeError
                    _check_value(x, name, program, marker, optional, b)
            for kind, name, position, _, program, marker, _ in self.variadic:
                if kind == inspect.Parameter.VAR_POSITIONAL:
                    values = [(f"{name}[{i}]", x) for i, x in enumerate(args[position:])]
                else:
                    values = [(f"{name}[{k!r}]", x) for k, x in kwargs.items()
                              if k not in self.named]
                for label, x in values:
                    _check_value(x, label, program, marker, False, b)
            b.resolve()
        except _Mismatch as m:
            raise _error(self.sig.name, m, b.env, b.origins) from None
        return b

    def check_result(self, result: Any, b: _Bindings) -> None:
        if self.length is None and not self.results:  # nothing to check: nothing to settle
            return
        try:
            if self.length is not None and (not isinstance(result, tuple)
                                            or len(result) != self.length):
                raise _Mismatch("notuple", "return", None, result, length=self.length)
            for i, label, program, marker, optional in self.results:
                x = result if i is None else result[i]
                _check_value(x, label, program, marker, optional, b)
            b.resolve()
        except _Mismatch as m:
            raise _error(self.sig.name, m, b.env, b.origins) from None

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Check the arguments, call the function, check its result."""
        state = self.check_args(args, kwargs)
        result = self.fn(*args, **kwargs)  # isinstance inside reads ``state`` (_scope)
        self.check_result(result, state)
        return result

    def after(self, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> Any:
        """Check a result the function already returned (the arguments are checked again)."""
        self.check_result(result, self.check_args(args, kwargs))
        return result


_CALL_CODE = _Checker.call.__code__
