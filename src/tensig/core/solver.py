"""The constraint solver shared by every layer.

Axis sizes (:class:`DimVar`) live in a union-find whose classes hold the size (``int`` or
:class:`~tensig.core.dims.Dim`), the basis label and an :class:`Origin` for messages.  Row
variables (:class:`RowNode`) follow Remora's free-monoid rules: ``L ..v.. R`` binds ``v`` to the
middle, two open rows complete through a fresh variable (equidivisibility).  Other relations are
:class:`Constraint` objects woken when a size they watch becomes known, so the cost is linear in
axes and constraints (``bench/bench_core.py``); facts true only for some symbolic sizes become
reported :class:`~tensig.core.dims.Condition` values, never assumptions.
"""

from __future__ import annotations

import functools
import itertools
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NoReturn

from tensig.core.dimcode import compile_dim, compile_solve, linear_split
from tensig.core.dims import Condition, Dim
from tensig.core.errors import ShapeError
from tensig.core.shapes import Size, normalize_size

__all__ = ["AffineRel", "AtLeast", "ConcatSum", "Constraint", "DimVar", "LinearRel", "Origin",
           "RowNode", "SRow", "Solver"]

_ids = itertools.count()


@dataclass(frozen=True)
class Origin:
    """Where an axis, a size or a constraint comes from, for messages (``operand``: an index,
    ``"result"`` or ``None``; ``span``: the axis's columns in ``spec``)."""

    spec: str | None = None
    span: tuple[int, int] | None = None
    operand: int | str | None = None
    shape: str | None = None
    kind: str | None = None
    position: int | None = None
    note: str | None = None
    # Rendered only when an error needs them (building strings on the hot path is waste).
    explain: Callable[[], tuple[str, str, str | None]] | None = field(
        default=None, compare=False, repr=False)

    def describe(self) -> str:
        parts = []
        if self.operand is not None:
            who = "the result" if self.operand == "result" else f"operand {self.operand}"
            parts.append(who + (f" (shape {self.shape})" if self.shape is not None else ""))
        if self.kind is not None and self.position is not None:
            parts.append(f"{self.kind} axis {self.position}")
        if self.note:
            parts.append(self.note)
        return ", ".join(parts) if parts else "the spec"


class DimVar:
    """One axis size: a union-find node.  Only roots carry ``value``/``basis``/``watchers``."""

    __slots__ = ("basis", "id", "name", "origin", "parent", "span", "value", "watchers")

    def __init__(self, name: str | None = None, value: Size | None = None,
                 basis: str | None = None, origin: Origin | None = None,
                 span: tuple[int, int] | None = None):
        self.id = next(_ids)
        self.span = span  # the written occurrence in the spec, for carets
        self.name = name
        self.parent: DimVar = self
        self.value = value
        self.basis = basis
        self.origin = origin
        self.watchers: list[Constraint] = []

    def root(self) -> DimVar:
        node = self
        while node.parent is not node:
            node.parent = node.parent.parent
            node = node.parent
        return node

    def __repr__(self) -> str:
        r = self.root()
        return f"DimVar({self.name or '$' + str(self.id)}={r.value})"

    def came_from(self, shown: object) -> str:
        """One side of a conflict for an error's origins: ``"3: from operand 0, ..."``."""
        return f"{shown}: from {self.origin.describe() if self.origin else 'the spec'}"


class RowNode:
    """A row variable; ``value`` is the :class:`SRow` it was bound to, or ``None``.

    ``closes`` marks a parameter's row: it takes whatever shape its uses need (graph-wide
    inference), where any other unknown row must be determined by its own arguments.
    """

    __slots__ = ("closes", "id", "name", "origin", "value")

    def __init__(self, name: str, closes: bool = False):
        self.id = next(_ids)
        self.name = name
        self.value: SRow | None = None
        self.origin: Origin | None = None
        self.closes = closes

    def __repr__(self) -> str:
        return f"RowNode({self.name})"


@dataclass(frozen=True)
class SRow:
    """A row in the solver: ``left`` axes, an optional row variable, ``right`` axes."""

    left: tuple[DimVar, ...] = ()
    var: RowNode | None = None
    right: tuple[DimVar, ...] = ()

    def axes(self) -> tuple[DimVar, ...]:
        return self.left + self.right


class Constraint:
    """A relation among dimension variables that is not a plain equality."""

    origin: Origin
    done: bool = False

    def watched(self) -> tuple[DimVar, ...]:
        """The relation's own axis (the input, total or target) first, then its parts."""
        raise NotImplementedError

    def propagate(self, solver: Solver) -> None:
        """Derive what can be derived; set ``done`` once the relation is fully checked."""
        raise NotImplementedError

    def linked(self) -> tuple[DimVar, ...]:
        """Axes that carry one basis across this relation (see :meth:`Solver.settle_bases`)."""
        return ()


def _val(v: DimVar) -> Size | None:
    return v.root().value


def _simplify(x: int | Dim) -> int | Dim:
    """A constant ``Dim`` as an ``int`` (no sign check: differences may be negative)."""
    if isinstance(x, Dim) and x.constant is not None:
        return x.constant
    return x


class AffineRel(Constraint):
    """``input`` is indexed by ``stride*over + dilation*kernel`` (or ``+ offset``): padded and
    kernel-free axes have ``input = stride*over``, valid ones ``input = stride*(over - 1) + 1 +
    (kernel - 1)*dilation``; any one of the three sizes is inferred from the other two."""

    def __init__(self, inp: DimVar, over: DimVar, kernel: DimVar | None, stride: int,
                 dilation: int, padding: Literal["padded", "valid"] | None, origin: Origin):
        self.inp, self.over, self.kernel = inp, over, kernel
        self.stride, self.dilation, self.padding = stride, dilation, padding
        self.origin = origin

    def watched(self) -> tuple[DimVar, ...]:
        return (self.inp, self.over) + ((self.kernel,) if self.kernel is not None else ())

    # an axis read at ``2*o`` or ``o+k`` is the same basis as its iterator ``o`` and its
    # kernel ``k`` (OCANNL's test_dimension_labels: a y kernel over an x axis is an error)
    linked = watched

    def _found(self, solver: Solver, var: DimVar, size: Size) -> None:
        solver.set_value(var, normalize_size(size), self.origin, "affine")
        self.done = True

    def _nonempty(self, solver: Solver, vk: Size, vi: Size | None) -> None:
        """A window of no elements, padded or valid (every output would reduce nothing)."""
        assert self.kernel is not None
        empty = (f"the kernel {self.kernel.name!r} has size {vk}: a convolution or pooling "
                 "window needs at least one element")
        if isinstance(vk, int) and vk < 1:  # named with the input's size when known
            raise solver.error(
                empty, self.origin, label=self.kernel.name,
                sizes=(vk,) if vi is None else (vk, vi),
                hint="a window of no elements reads nothing; give the kernel at least one "
                     "element")
        solver.require_at_least(vk, 1, self.origin, what=empty)

    def propagate(self, solver: Solver) -> None:
        vi, vo = _val(self.inp), _val(self.over)
        s, d = self.stride, self.dilation
        vk = None if self.kernel is None else _val(self.kernel)
        if vk is not None:
            self._nonempty(solver, vk, vi)
        if self.kernel is None or self.padding == "padded":
            if vo is not None:
                self._found(solver, self.inp, s * vo)
            elif vi is not None:
                self._found(solver, self.over, solver.exact_div(
                    vi, s, self.origin, what=f"a padded strided axis needs its size divisible "
                                             f"by the stride: input size {vi}, stride {s}"))
            self.done = self.done and (self.kernel is None or vk is not None)  # kernel: checked
            return
        if vk is not None:
            span = normalize_size(1 + (vk - 1) * d)
            if vo is not None:
                solver.require_at_least(
                    vo, 1, self.origin,
                    what=f"{vo} outputs: a valid convolution has at least one output (input "
                         f"at least the kernel's span {span})")
                self._found(solver, self.inp, s * (vo - 1) + span)
            elif vi is not None:
                solver.require_at_least(
                    vi, span, self.origin,
                    what=f"input size {vi} is smaller than the kernel's span {span} "
                         f"(kernel {vk}, dilation {d})")
                q = solver.exact_div(
                    _simplify(vi - span), s, self.origin,
                    what=f"incompatible stride: input size {vi} minus kernel span {span} "
                         f"(kernel {vk}, dilation {d}) is not divisible by stride {s}")
                self._found(solver, self.over, q + 1)
        elif vi is not None and vo is not None:
            rest = _simplify(vi - s * (vo - 1) - 1)
            solver.require_at_least(rest, 0, self.origin,
                                    what=f"input size {vi} is too small for {vo} outputs at "
                                         f"stride {s}")
            k = solver.exact_div(rest, d, self.origin,
                                 what=f"no kernel size fits input {vi}, output {vo}, stride "
                                      f"{s}, dilation {d}")
            self._found(solver, self.kernel, k + 1)


class ConcatSum(Constraint):
    """A concatenated axis: ``total = part_0 + part_1 + ...`` (integer parts are fixed)."""

    def __init__(self, total: DimVar, parts: tuple[DimVar | int, ...], origin: Origin):
        self.total, self.parts, self.origin = total, parts, origin

    def watched(self) -> tuple[DimVar, ...]:
        return (self.total, *[p for p in self.parts if isinstance(p, DimVar)])

    linked = watched  # a concatenated axis has its components' basis

    def propagate(self, solver: Solver) -> None:
        vals = [p if isinstance(p, int) else _val(p) for p in self.parts]
        unknown = [i for i, v in enumerate(vals) if v is None]
        vt = _val(self.total)
        if not unknown:
            solver.set_value(self.total, normalize_size(sum(vals)), self.origin, "concat")
            self.done = True
        elif vt is not None and len(unknown) == 1:
            known = normalize_size(sum(v for v in vals if v is not None))
            rest = _simplify(vt - known)
            solver.require_at_least(rest, 0, self.origin,
                                    what=f"the known components add up to {known}, more than "
                                         f"the concatenated axis's size {vt}")
            part = self.parts[unknown[0]]
            assert isinstance(part, DimVar)
            solver.set_value(part, rest, self.origin, "concat")
            self.done = True


class AtLeast(Constraint):
    """A fixed index ``k`` needs its axis to have at least ``k + 1`` elements."""

    def __init__(self, var: DimVar, bound: int, origin: Origin, what: str):
        self.var, self.bound, self.origin, self.what = var, bound, origin, what

    def watched(self) -> tuple[DimVar, ...]:
        return (self.var,)

    def propagate(self, solver: Solver) -> None:
        v = _val(self.var)
        if v is not None:
            solver.require_at_least(v, self.bound, self.origin,
                                    what=self.what.format(size=v, bound=self.bound))
            self.done = True


class LinearRel(Constraint):
    """``target == expr``: a size that is a polynomial of other sizes (``2*m + 1``, ``h*w``).

    ``names`` maps the symbols of ``expr`` that are unknowns to their :class:`DimVar`.  With
    every name known the target is set or checked; with the target and all names but one
    known, that one is solved for where it occurs linearly with a constant factor, as a whole
    number ``>= 0`` (or under a :class:`~tensig.core.dims.Condition`).  ``report(kind, facts)``
    words a failure in the caller's terms: ``"mismatch"`` (``value``, ``target``),
    ``"no_solution"`` (``name``, ``value``: ``None`` where no one value was tried, ``target``)
    or, from :func:`~tensig.core.search.settle`, ``"apart"`` (``value``, ``target``, ``other``:
    the relation of the same names it cannot agree with); default: a :class:`ShapeError`.
    """

    def __init__(self, target: DimVar, expr: Dim, names: Mapping[str, DimVar], origin: Origin,
                 report: Callable[[str, dict[str, Any]], Exception] | None = None):
        self.target, self.expr, self.names = target, expr, names
        self.origin, self.report = origin, report
        # ``n == size`` (a bare name) is an equality: no substitution or division needed
        self.evaluate, _, bare = _int_plan(expr)  # evaluate: ``expr`` at ``int`` sizes
        self.bare = names[bare] if bare is not None and len(names) == 1 else None

    def watched(self) -> tuple[DimVar, ...]:
        return (self.target, *self.names.values())

    def known(self) -> dict[str, Size]:
        """The sizes of the names known so far."""
        return {n: v for n, v in ((n, _val(x)) for n, x in self.names.items()) if v is not None}

    def pending(self) -> tuple[Dim, Size | str]:
        """The relation with what is known substituted: ``(expr, target)``, ``"?"`` for a
        target not yet known (for messages)."""
        vt = _val(self.target)
        return self.expr.subs(self.known()), (vt if vt is not None else "?")

    def propagate(self, solver: Solver) -> None:
        if self.bare is not None:
            vt, vn = _val(self.target), _val(self.bare)
            if vn is not None and vt is not None and vn != vt:
                self.fail(solver, "mismatch", value=vn, target=vt)
            if vn is None and vt is not None:
                solver.set_value(self.bare, vt, self.origin, "linear")
            elif vt is None and vn is not None:
                solver.set_value(self.target, vn, self.origin, "linear")
            self.done = vn is not None or vt is not None
            return
        known = self.known()
        if len(self.names) - len(known) <= 1 and self._concrete(solver, known):
            return
        e = self.expr.subs(known) if known else self.expr
        free = [n for n in self.names if n not in known and n in e.symbols]
        vt = _val(self.target)
        if not free:
            value = _simplify(e)
            if vt is None:
                if isinstance(value, int) and value < 0:
                    self.fail(solver, "mismatch", value=value, target=None)
                solver.set_value(self.target, value, self.origin, "linear")
            elif vt != value:
                self.fail(solver, "mismatch", value=value, target=vt)
            self.done = True
            return
        if vt is None or len(free) > 1:
            return
        name = free[0]
        plans = _int_plan(self.expr)[1]  # a name only a known value holds has none: solved
        if name in plans and plans[name] is None:  # nonlinear: core.search's (no error text)
            return
        try:
            solution, conditions = (e - vt).solve_for(name)
        except ValueError:  # nonlinear in ``name``, or its factor is symbolic: wait
            return
        checks = (Condition.at_least(solution, 0), *conditions)
        decided = [c.decide() for c in checks]
        if False in decided:
            self.fail(solver, "no_solution", name=name, value=_simplify(solution), target=vt)
        for c, d in zip(checks, decided, strict=True):
            if d is None:  # decided once above: recorded, as add_condition would
                solver.conditions.setdefault(c, self.origin)
        solver.set_value(self.names[name], _simplify(solution), self.origin, "linear")
        self.done = True

    def _concrete(self, solver: Solver, known: dict[str, Size]) -> bool:
        """The same rules on ``int`` sizes with compiled functions (no ``Dim`` arithmetic);
        ``False`` hands the case to the general path (symbolic sizes, a failure to word)."""
        vt = _val(self.target)
        ints = {n: v for n, v in known.items() if isinstance(v, int)}
        if not (vt is None or isinstance(vt, int)) or len(ints) < len(known):
            return False
        evaluate, solvers = self.evaluate, _int_plan(self.expr)[1]
        unknown = [n for n in self.names if n not in known]
        if not unknown:
            value = evaluate(ints)
            if vt is None and value >= 0:
                solver.set_value(self.target, value, self.origin, "linear")
            elif vt != value:
                return False
            self.done = True
            return True
        if vt is None:
            return True  # waits for the target
        solve = solvers[unknown[0]]
        q = solve(ints, vt) if solve is not None else None
        if q is None:  # nonlinear, no whole solution, or a zero factor: the general path
            return False
        solver.set_value(self.names[unknown[0]], q, self.origin, "linear")
        self.done = True
        return True

    def fail(self, solver: Solver, kind: str, **facts: Any) -> NoReturn:
        """Raise the failure ``kind`` with ``facts``, worded by ``report`` when given."""
        if self.report is not None:
            raise self.report(kind, facts)
        target = facts["target"]
        if kind == "no_solution":
            would = "" if facts["value"] is None else \
                f" ({facts['name']} would be {facts['value']})"
            reason = f"no whole {facts['name']} >= 0 gives {self.expr} = {target}{would}"
        elif target is None:
            reason = f"{self.expr} = {facts['value']} is negative, not a size"
        else:
            reason = f"{self.expr} = {facts['value']}, but the size is {target}"
        raise solver.error(reason, self.origin, sizes=(facts["value"], target))


class Solver:
    """Collects equalities and relations, solves them incrementally.  ``strict_basis``
    (:meth:`union`, :meth:`unify_rows`): ``False`` (einsum equality) gives an unlabelled axis
    its partner's basis; ``True`` (pointwise broadcasting) never fuses it with a labelled one."""

    def __init__(self, spec: str | None = None):
        self.spec = spec
        self.queue: deque[Constraint] = deque()
        self.constraints: list[Constraint] = []
        self.conditions: dict[Condition, Origin] = {}

    # -- errors ------------------------------------------------------------------------------
    def error(self, reason: str, origin: Origin | None, *, label: str | None = None,
              sizes: tuple[object, ...] = (), origins: tuple[str, ...] = (),
              hint: str | None = None) -> ShapeError:
        """A :class:`ShapeError` placed where ``origin`` says (fields named, so mypy checks
        callers' keywords on error paths that tests rarely run)."""
        o = origin or Origin()
        return ShapeError(reason, spec=o.spec or self.spec, span=o.span, operand=o.operand,
                          shape=o.shape, label=label, sizes=sizes, origins=origins, hint=hint)

    # -- values ------------------------------------------------------------------------------
    def set_value(self, var: DimVar, value: Size, origin: Origin, how: str = "given") -> None:
        """Give ``var``'s class a size, or check it against the one it has."""
        r = var.root()
        if r.value is None:
            r.value, r.origin = value, origin
            self._wake(r)
            return
        if r.value != value:
            given = f"{value}: from {origin.describe()} ({how})"
            raise self.mismatch(r.name or var.name, r.value, value, origin,
                                (r.came_from(r.value), given))

    def mismatch(self, name: str | None, a: Size | None, b: Size | None, origin: Origin | None,
                 origins: tuple[str, ...], detail: str = "", hint: str | None = None
                 ) -> ShapeError:
        """The one wording of two sizes that must agree: ``size mismatch for label 'n': 3 vs 4``."""
        what = f"label {name!r}" if name else "an axis"
        return self.error(f"size mismatch for {what}: {a} vs {b}{detail}", origin, label=name,
                          sizes=(a, b), origins=origins, hint=hint)

    def union(self, a: DimVar, b: DimVar, origin: Origin, *, strict_basis: bool = False) -> None:
        """``a`` and ``b`` are the same axis: same size, same basis."""
        ra, rb = a.root(), b.root()
        if ra is rb:
            return
        name = ra.name or rb.name
        if ra.value is not None and rb.value is not None and ra.value != rb.value:
            if a.span is not None or b.span is not None:
                origin = replace(origin, span=a.span or b.span)
            raise self.mismatch(name, ra.value, rb.value, origin,
                                (ra.came_from(ra.value), rb.came_from(rb.value)))
        basis = self._merge_basis(ra, rb, origin, strict_basis)
        # Union by watcher count keeps merging linear overall.
        if len(ra.watchers) < len(rb.watchers):
            ra, rb = rb, ra
        rb.parent = ra
        ra.watchers.extend(rb.watchers)
        rb.watchers = []
        ra.basis, ra.name = basis, ra.name or rb.name
        if ra.value is None and rb.value is not None:
            ra.value, ra.origin = rb.value, rb.origin
            self._wake(ra)

    def _merge_basis(self, ra: DimVar, rb: DimVar, origin: Origin, strict: bool) -> str | None:
        if ra.basis == rb.basis:
            return ra.basis
        if (ra.basis is not None and rb.basis is not None) or strict:
            name = ra.name or rb.name
            shown = [b if b is not None else "no basis" for b in (ra.basis, rb.basis)]
            raise self.error(
                f"basis mismatch{' for label ' + repr(name) if name else ''}: "
                f"{shown[0]} vs {shown[1]}", origin, label=name,
                origins=(ra.came_from(shown[0]), rb.came_from(shown[1])),
                hint="an unlabelled axis never fuses with a labelled one; label both axes"
                if strict else None)
        return ra.basis if ra.basis is not None else rb.basis

    def _wake(self, root: DimVar) -> None:
        for c in root.watchers:
            if not c.done:
                self.queue.append(c)

    def settle_bases(self) -> None:
        """Carry bases across concatenations and affine axes (OCANNL's bases survive them):
        an unlabelled member takes the relation's basis, two bases in one relation are an
        error.  Each pass fills an unlabelled axis, so it ends within (axes) passes."""
        changed = True
        while changed:
            changed = False
            for c in self.constraints:
                roots = [v.root() for v in c.linked()]
                named: dict[str, DimVar] = {}
                for r in roots:
                    if r.basis is not None:
                        named.setdefault(r.basis, r)
                if len(named) > 1:
                    (b1, r1), (b2, r2) = list(named.items())[:2]
                    what = "a concatenation" if isinstance(c, ConcatSum) else "an affine axis"
                    raise self.error(
                        f"basis mismatch across {what}: {b1} vs {b2}", c.origin,
                        label=r1.name or r2.name,
                        origins=(r1.came_from(b1), r2.came_from(b2)),
                        hint="a concatenation or affine axis keeps one basis; relabel one side")
                if named:
                    basis = next(iter(named))
                    for r in roots:
                        if r.basis is None:
                            r.basis = basis
                            changed = True

    # -- conditions --------------------------------------------------------------------------
    def add_condition(self, cond: Condition, origin: Origin, what: str) -> None:
        decided = cond.decide()
        if decided is True:
            return
        if decided is False:
            raise self.error(what, origin, sizes=(), origins=(f"required: {cond}",))
        self.conditions.setdefault(cond, origin)

    def require_at_least(self, value: Size, bound: Size, origin: Origin, what: str) -> None:
        if isinstance(value, int) and isinstance(bound, int):
            if value < bound:
                raise self.error(what, origin, sizes=(value, bound))
            return
        self.add_condition(Condition.at_least(Dim.const(0) + value, bound), origin, what)

    def exact_div(self, value: Size, divisor: int, origin: Origin, what: str) -> Size:
        """``value / divisor``, which must be exact; symbolic values give a condition."""
        if isinstance(value, int):
            if value % divisor:
                raise self.error(what, origin, sizes=(value, divisor))
            return value // divisor
        self.add_condition(Condition.divisible(value, divisor), origin, what)
        return normalize_size(value // divisor)

    # -- constraints -------------------------------------------------------------------------
    def add(self, c: Constraint) -> None:
        self.constraints.append(c)
        for v in c.watched():
            v.root().watchers.append(c)
        self.queue.append(c)

    def run(self) -> None:
        """Propagate until nothing changes."""
        q = self.queue
        while q:
            c = q.popleft()
            if not c.done:
                c.propagate(self)

    # -- rows --------------------------------------------------------------------------------
    @staticmethod
    def resolve(row: SRow) -> SRow:
        """Splice bound row variables in until the row's variable (if any) is unbound."""
        if row.var is not None and row.var.value is not None:
            v = Solver._expand(row.var)
            row = SRow(row.left + v.left, v.var, v.right + row.right)
        if row.var is None and row.left:
            return SRow((), None, row.left + row.right)
        return row

    @staticmethod
    def _expand(node: RowNode) -> SRow:
        """The full value of a bound row variable; rebinding each variable of the chain to its
        final expansion keeps long chains (graph-wide inference) linear."""
        chain = []
        left: tuple[DimVar, ...] = ()
        right: tuple[DimVar, ...] = ()
        cur: RowNode | None = node
        while cur is not None and cur.value is not None:
            chain.append((cur, left, right))
            v = cur.value
            left, cur, right = left + v.left, v.var, v.right + right
        for n, pl, pr in chain if len(chain) > 1 else ():
            # n's own expansion: strip what the nodes before it contributed
            n.value = SRow(left[len(pl):], cur, right[:len(right) - len(pr)])
        return SRow(left, cur, right)

    def bind_row(self, node: RowNode, value: SRow, origin: Origin) -> None:
        """Bind an unbound ``node``; :meth:`unify_rows` has refused a row that contains it."""
        assert value.var is not node, "a row variable bound to itself"
        node.value = value
        node.origin = origin
        if node.closes and value.var is not None and not value.left and not value.right:
            value.var.closes = True  # the same row as a parameter's: it closes to uses too

    def unify_rows(self, a: SRow, b: SRow, origin: Origin, *, strict_basis: bool = False,
                   describe: tuple[str, str] = ("the spec", "the operand")) -> None:
        """``a`` and ``b`` are the same row (equality, not broadcasting); ``describe`` names
        them in a rank mismatch (``origin.explain``, when set, names them lazily instead)."""
        bound = [r.var for r in (a, b) if r.var is not None and r.var.value is not None]
        a, b = self.resolve(a), self.resolve(b)

        def same(xs: tuple[DimVar, ...], ys: tuple[DimVar, ...]) -> None:
            for x, y in zip(xs, ys, strict=True):
                self.union(x, y, origin, strict_basis=strict_basis)

        if a.var is None and b.var is not None:
            a, b = b, a
            describe = (describe[1], describe[0])
        if b.var is None:  # a's axes match b's ends, a's variable (if any) takes the middle
            need = len(a.left) + len(a.right)
            if len(b.right) < need or (a.var is None and len(b.right) > need):
                raise self._rank_error(a, b, origin, describe, bound)
            axes = b.right
            same(a.left + a.right, axes[:len(a.left)] + axes[len(axes) - len(a.right):])
            if a.var is not None:
                self.bind_row(a.var, SRow((), None, axes[len(a.left):len(axes) - len(a.right)]),
                              origin)
            return
        # Both open: unify the common prefix and suffix, then complete the middle.
        n = min(len(a.left), len(b.left))
        m = min(len(a.right), len(b.right))
        same(a.left[:n] + a.right[len(a.right) - m:], b.left[:n] + b.right[len(b.right) - m:])
        la, lb = a.left[n:], b.left[n:]
        ra, rb = a.right[:len(a.right) - m], b.right[:len(b.right) - m]
        va, vb = a.var, b.var
        assert va is not None and vb is not None
        if va is vb:
            if la or lb or ra or rb:
                raise self.error(
                    f"row variable {_show_var(va)} would have to equal itself with extra axes",
                    origin, label=va.name,
                    hint="a row variable used twice must have the same axes around it")
            return
        if not lb and not rb:  # b's variable absorbs a's extras
            self.bind_row(vb, SRow(la, va, ra), origin)
        elif not la and not ra:
            self.bind_row(va, SRow(lb, vb, rb), origin)
        else:  # a = la ++ va,  b = vb ++ rb  =>  vb = la ++ w,  va = w ++ rb (or a, b swapped)
            w = RowNode(f"{va.name}~{vb.name}")
            if not la:
                (la, va), (rb, vb) = (lb, vb), (ra, va)
            self.bind_row(vb, SRow(la, w, ()), origin)
            self.bind_row(va, SRow((), w, rb), origin)

    def _rank_error(self, a: SRow, b: SRow, origin: Origin, describe: tuple[str, str],
                    bound: list[RowNode]) -> ShapeError:
        def count(r: SRow) -> str:
            n = len(r.axes())
            noun = "axis" if n == 1 else "axes"
            return f"exactly {n} {noun}" if r.var is None else f"at least {n} {noun}"

        def sizes(r: SRow) -> str:
            vals = [str(_val(x)) if _val(x) is not None else "?" for x in r.axes()]
            return "(" + ", ".join(vals) + ")"

        kind = origin.kind or "a"
        hint = origin.note
        if origin.explain is not None:
            first, second, hint = origin.explain()
            describe = (first, second) if describe[0] == "the spec" else (second, first)
        origins = tuple(
            f"{_show_var(v)} was bound to {sizes(v.value)} by {v.origin.describe()}"
            for v in bound if v.value is not None and v.origin is not None)
        return self.error(
            f"rank mismatch in the {kind} row: {describe[0]} has {count(a)} "
            f"{sizes(a)}, {describe[1]} has {count(b)} {sizes(b)}", origin,
            origins=origins, hint=hint)


@functools.lru_cache(maxsize=4096)
def _int_plan(expr: Dim) -> tuple[Callable[[Mapping[str, int]], int],
                                  dict[str, Callable[[Mapping[str, int], int], int | None] | None],
                                  str | None]:
    """Compiled ``int`` functions of a relation's polynomial: its value and, per name, its
    solver (:func:`~tensig.core.dimcode.compile_solve`; ``None`` when the name occurs
    nonlinearly); and the name when ``expr`` is just that name."""
    splits: dict[str, Any] = {}
    for name in expr.symbols:
        split = linear_split(expr, name)
        splits[name] = compile_solve(*split) if split is not None else None
    return compile_dim(expr), splits, next(
        (name for name in expr.symbols if expr == Dim.symbol(name)), None)


def _show_var(node: RowNode) -> str:
    return "..." if node.name.startswith("...") else f"..{node.name}.."
