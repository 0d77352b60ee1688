"""One einsum spec solved: :class:`SpecInstance` turns a spec's axes into solver variables and
constraints (local to the instance) and packages the solved instance as an :class:`Inferred`;
:func:`~tensig.core.inference.infer` solves one on its own solver, a
:class:`~tensig.core.shape_graph.ShapeGraph` many on one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from tensig.core.dims import Condition, Dim
from tensig.core.errors import ShapeError
from tensig.core.notation import (
    Affine,
    Axis,
    Concat,
    Fixed,
    Kind,
    Label,
    Merge,
    Placeholder,
    Row,
    Spec,
)
from tensig.core.projections import (
    AffineIndex,
    AxisUse,
    ConcatIndex,
    FixedIndex,
    Index,
    Iter,
    MergeIndex,
)
from tensig.core.shapes import MEMORY_ORDER, Shape, Size, normalize_size
from tensig.core.solver import (
    AffineRel,
    AtLeast,
    ConcatSum,
    DimVar,
    LinearRel,
    Origin,
    RowNode,
    Solver,
    SRow,
)

__all__ = ["EINSUM_OPS", "LOGICS", "Inferred", "SpecInstance", "close_placements", "count_text",
           "freeze_params", "register_operand_counts", "solved"]

LOGICS = {".": "pointwise", "@": "compose", "T": "transpose"}
#: op name -> (least, most operands) of the einsum-family operators, for ``infer(op=...)``.
#: Declared by the operator table (:data:`tensig.execution.ir.OPERATORS`, a later layer),
#: which registers them here when it is imported (``import tensig`` does).
EINSUM_OPS: dict[str, tuple[int, int | None]] = {}


def register_operand_counts(counts: Mapping[str, tuple[int, int | None]]) -> None:
    """Let ``infer(..., op=name)`` check the operand count of each operator of ``counts``."""
    EINSUM_OPS.update(counts)


def count_text(lo: int, hi: int | None) -> str:
    """Operand counts in words, for messages: ``"1"``, ``"at least 2"``, ``"1 to 3"``."""
    return str(lo) if lo == hi else f"at least {lo}" if hi is None else f"{lo} to {hi}"


@dataclass(frozen=True)
class Inferred:
    """What inference found: the result ``shape``; ``dims``: label -> size; ``rows``: named row
    variable -> sizes; ``ellipses``: kind -> the sizes of its ``...``; ``conditions``: facts that
    hold only for some symbolic sizes, reported rather than assumed; ``operands``: the operand
    shapes as read; ``layout``: per operand and then the result, each axis (memory order) with
    its projection; ``iterators``: the product space (every :class:`Iter`)."""

    spec: Spec | None
    logic: str
    operands: tuple[Shape, ...]
    shape: Shape
    dims: Mapping[str, Size]
    rows: Mapping[str, tuple[Size, ...]]
    ellipses: Mapping[str, tuple[Size, ...]]
    conditions: tuple[Condition, ...]
    layout: tuple[tuple[AxisUse, ...], ...]
    iterators: tuple[Iter, ...]

    def capture(self, names: Iterable[str]) -> dict[str, Size]:
        """Sizes of the named labels; a row variable captures the product of its axes.

        >>> from tensig.core.inference import infer
        >>> infer("...|h, w, ..c.. => ...|..c..", "2|4,5,3").capture(["h", "w", "c"])
        {'h': 4, 'w': 5, 'c': 3}
        """
        if isinstance(names, str):
            raise TypeError("capture takes a list of names, e.g. capture=['h', 'w']")
        out: dict[str, Size] = {}
        for name in names:
            if name in self.dims:
                out[name] = self.dims[name]
            elif name in self.rows:
                out[name] = normalize_size(math.prod(self.rows[name]))
            else:
                known = sorted(self.dims) + sorted(f"..{r}.." for r in self.rows)
                spec = f" in {self.spec.text!r}" if self.spec is not None else ""
                raise ValueError(f"cannot capture {name!r}: no such label or row variable"
                                 f"{spec}; known: {', '.join(known) or 'none'}")
        return out

    def __str__(self) -> str:
        dims = ", ".join(f"{k}={v}" for k, v in self.dims.items())
        return f"{self.shape} ({dims})" if dims else str(self.shape)

def freeze_params(params: Mapping[str, int] | None) -> tuple[tuple[str, int], ...]:
    if params is None:
        return ()
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping such as {{'stride': 2}}, not "
                        f"{type(params).__name__}")
    return tuple(sorted(params.items()))


class SpecInstance:
    """One spec instance: labels and row variables are local to it."""

    def __init__(self, spec: Spec, op: str | None, params: dict[str, int],
                 use_padding: bool | None, solver: Solver | None = None):
        self.spec, self.op, self.params, self.use_padding = spec, op, params, use_padding
        self.solver = solver if solver is not None else Solver(spec.text)
        self.labels: dict[str, DimVar] = {}
        self.rowvars: dict[str, RowNode] = {}
        # occurrence var id -> the spec axis it came from (for projections)
        self.terms: dict[int, tuple[Axis, Any]] = {}
        self.result_fixed: list[DimVar] = []

    def err(self, reason: str, span: tuple[int, int] | None = None, **kw: Any) -> ShapeError:
        return ShapeError(reason, spec=self.spec.text, span=span, **kw)

    # -- building ------------------------------------------------------------------------------
    def label(self, name: str) -> DimVar:
        return self.labels.get(name) or self.labels.setdefault(name, DimVar(name))

    def occurrence(self, name: str, span: tuple[int, int], origin: Origin) -> DimVar:
        """A fresh node for one written occurrence of a label (so errors can point at it)."""
        v = DimVar(name, span=span)
        self.solver.union(v, self.label(name), origin)
        return v

    def coef(self, c: int | str, what: str, span: tuple[int, int]) -> int:
        if isinstance(c, int):
            return c
        if c not in self.params:
            given = ", ".join(sorted(self.params)) or "none"
            raise self.err(f"the {what} {c!r} is an identifier, but params= does not give it",
                           span, hint=f"pass params={{{c!r}: <positive int>}} "
                                      f"(params given: {given})")
        v = self.params[c]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise self.err(f"params[{c!r}] must be a positive int (the {what}), not {v!r}", span)
        return v

    def axis_var(self, a: Axis, kind: Kind, where: Origin) -> DimVar:
        span = a.span
        o = Origin(where.spec, span, where.operand, where.shape, kind)
        v = self.occurrence(a.name, span, o) if isinstance(a, Label) else DimVar(None, span=span)
        self.terms[v.id] = (a, None)  # a label's, placeholder's, fixed index's; the rest add theirs
        if isinstance(a, Fixed):
            self.solver.add(AtLeast(v, a.index + 1, o,
                                    what=f"fixed index {a.index} needs an axis of at least "
                                         "{bound} elements, but it has {size}"))
            self.check_not_a_factor(a, where.operand == "result")
            if where.operand == "result":
                self.result_fixed.append(v)
        elif isinstance(a, Affine):
            stride = self.coef(a.stride, "stride", span)
            dilation = self.coef(a.dilation, "dilation", span)
            padding = a.padding
            if a.kernel is not None and padding is None:
                if self.use_padding is None:
                    raise self.err(
                        f"{a.render(True)!r} uses a plain '+', which takes its padding from "
                        "use_padding=, and none was given", span,
                        hint=f"pass use_padding=True (padded, like {a.over}=+{a.kernel}) or "
                             f"use_padding=False (valid, like {a.over}<+{a.kernel}), or write "
                             "=+ / <+ in the spec")
                padding = "padded" if self.use_padding else "valid"
            if where.operand == "result" and a.kernel is None and a.offset >= stride:
                raise self.err(
                    f"the result axis {a.render(True)!r} would write past its end: it has "
                    f"{a.over if stride == 1 else f'{stride}*{a.over}'} cells, and offset "
                    f"{a.offset} is not below the stride {stride}", span, label=a.over,
                    hint=f"a result written at {a.render(True)} needs an offset below the "
                         f"stride; to shift, place into a concatenation ({a.offset}^{a.over})")
            over = self.occurrence(a.over, span, o)
            kernel = self.occurrence(a.kernel, span, o) if a.kernel is not None else None
            self.terms[v.id] = (a, (stride, over, dilation, kernel, padding))
            self.solver.add(AffineRel(v, over, kernel, stride, dilation, padding, o))
        elif isinstance(a, Concat):
            parts = tuple(p if isinstance(p, int) else self.occurrence(p, span, o)
                          for p in a.parts)
            self.terms[v.id] = (a, parts)
            self.solver.add(ConcatSum(v, parts, o))
        elif isinstance(a, Merge):
            factors = tuple(self.occurrence(p, span, o) if isinstance(p, str) else
                            DimVar(None, p, None, o, span) for p in a.parts)
            self.terms[v.id] = (a, factors)
            self.solver.add(self.product(v, a, factors, o))
        return v

    def check_not_a_factor(self, a: Fixed, in_result: bool) -> None:
        """``b|(h, 4) => b|h, 4`` reads as keeping the factor 4, but a written ``4`` is a fixed
        index (a placement or a slice) and an integer factor an axis nothing else names:
        refused rather than silently placed or sliced (and ``b|h, 4 => b|(h, 4)`` alike)."""
        other = self.spec.operands if in_result else (self.spec.result,)
        merges = [m for sh in other for _, row in sh.rows() for m in row.axes
                  if isinstance(m, Merge) and a.index in m.parts]
        if merges:
            raise self.err(
                f"'{a.index}' in {'the result' if in_result else 'an operand'} is a fixed "
                f"index ({'a placement into' if in_result else 'a slice at'} cell {a.index}), "
                f"not the factor {a.index} of {merges[0].render(True)!r}: an integer factor "
                "is an axis of its own that nothing else names", a.span,
                hint=f"name the factor to keep it: (h, e) => h, e with sizes={{'e': {a.index}}}"
                     f"; or drop the '{a.index}' to reduce over it" if in_result else
                     "name the axis to merge it: h, e => (h, e)")

    def product(self, v: DimVar, a: Merge, factors: tuple[DimVar, ...], o: Origin
                ) -> LinearRel:
        """``(h, e)``: the axis has ``|h|*|e|`` elements; one unknown factor is the size
        divided by the others' product, which must divide it."""
        names = {f"${j}": f for j, f in enumerate(factors)}
        expr = math.prod(map(Dim.symbol, names), start=Dim.const(1))
        shown = a.render(True)

        def report(kind: str, facts: dict[str, Any]) -> ShapeError:
            size = v.root().value
            known = [(p, f.root().value) for p, f in zip(a.parts, factors, strict=True)]
            given = ", ".join(f"{p}={n}" if isinstance(p, str) else str(p)
                              for p, n in known if n is not None)
            if kind == "no_solution":
                j = int(facts["name"][1:])
                return self.err(
                    f"the merged axis {shown!r} has {size} elements, which the product of "
                    f"its other factors ({given}) does not divide: no size of "
                    f"{a.parts[j]!r} fits", a.span, label=str(a.parts[j]), sizes=(size,),
                    hint="check the sizes: the factors of a merged axis multiply to its size")
            return self.err(
                f"the merged axis {shown!r} has {size} elements, but its factors give "
                f"{' * '.join(str(n) for _, n in known)} = {facts['value']} ({given})",
                a.span, label=next((p for p in a.parts if isinstance(p, str)), None),
                sizes=(size, facts["value"]),
                hint="the factors of a merged axis multiply to its size")

        return LinearRel(v, expr, names, o, report)

    def pattern(self, row: Row, kind: Kind, where: Origin) -> SRow:
        left = tuple(self.axis_var(a, kind, where) for a in row.left)
        right = tuple(self.axis_var(a, kind, where) for a in row.right)
        if row.var is None:
            return SRow(left, None, right)
        key = row.var.name or f"...{kind}"
        return SRow(left, self.rowvars.get(key) or self.rowvars.setdefault(key, RowNode(key)),
                    right)

    @staticmethod
    def given(shape: Shape, where: Origin) -> dict[Kind, SRow]:
        """``shape``'s rows, of known axes that came from ``where``."""
        spec, who, shown, note = where.spec, where.operand, where.shape, where.note
        return {kind: SRow((), None, tuple(
            DimVar(None, size, basis, Origin(spec, None, who, shown, kind, j, note))
            for j, (size, basis) in enumerate(shape.axes(kind)))) for kind in MEMORY_ORDER}

    # -- solving -------------------------------------------------------------------------------
    def instantiate(self, operands: list[dict[Kind, SRow]], shown: list[str | None],
                    result: dict[Kind, SRow] | None = None,
                    result_shown: str | None = None) -> list[dict[Kind, SRow]]:
        """Relate ``operands``' rows (``shown``: their shapes as text, for messages) through
        the spec, and the result's to ``result`` if given; the last pattern is the result's."""
        spec = self.spec
        self.check_arity(len(operands))
        shapes = spec.shapes()  # built once: per operand it would make instantiation quadratic
        whose: list[tuple[int | str, str | None]] = [*enumerate(shown), ("result", result_shown)]
        patterns: list[dict[Kind, SRow]] = []
        for (who, text), sh in zip(whose, shapes, strict=True):
            where = Origin(spec.text, None, who, text)
            patterns.append({k: self.pattern(row, k, where) for k, row in sh.rows()})
        for i, rows in enumerate(operands if result is None else [*operands, result]):
            who, text = whose[i]
            for kind, row in shapes[i].rows():
                def explain(i=i, who=who, kind=kind, row=row) -> tuple[str, str, str | None]:
                    shown = row.render(spec.multichar) or "(empty)"
                    whose = "the result" if who == "result" else f"operand {who}"
                    return (f"the spec's {kind} row {shown!r}", f"{whose}'s {kind} row",
                            _row_hint(spec, i, kind, row))

                o = Origin(spec.text, _row_span(row), who, text, kind, explain=explain)
                self.solver.unify_rows(patterns[i][kind], rows[kind], o)
        return patterns

    def run(self, shapes: tuple[Shape, ...], result: Shape | None,
            sizes: Mapping[str, Any]) -> Inferred:
        """``infer``: operands and the optional result are given shapes."""
        def rows(shape: Shape, who: int | str) -> dict[Kind, SRow]:
            return self.given(shape, Origin(self.spec.text, None, who, str(shape)))

        patterns = self.instantiate(
            [rows(sh, i) for i, sh in enumerate(shapes)], [str(s) for s in shapes],
            rows(result, "result") if result is not None else None,
            str(result) if result is not None else None)
        self.apply_sizes(sizes)
        self.solver.run()
        self.close_result(patterns[-1])
        self.check_determined()
        return self.package(patterns, shapes)

    def check_arity(self, n: int) -> None:
        if n != len(self.spec.operands):
            raise self.err(f"the spec has {len(self.spec.operands)} operand(s) but {n} "
                           f"{'was' if n == 1 else 'were'} given")
        if self.op is None:
            return
        lo, hi = EINSUM_OPS[self.op]
        if n < lo or (hi is not None and n > hi):
            raise self.err(f"{self.op} takes {count_text(lo, hi)} operand(s), got {n}")

    def apply_sizes(self, sizes: Mapping[str, Any]) -> None:
        for name, value in sizes.items():
            origin = Origin(self.spec.text, note=f"sizes[{name!r}]")
            if name in self.labels:
                self.solver.set_value(self.labels[name], normalize_size(value, where=name),
                                      origin, "sizes=")
            elif name in self.rowvars and not name.startswith("..."):
                vals = value if isinstance(value, tuple | list) else (value,)
                row = SRow((), None, tuple(DimVar(None, normalize_size(s), None, origin)
                                           for s in vals))
                self.solver.unify_rows(SRow((), self.rowvars[name], ()), row, origin)
            else:
                known = ", ".join(sorted(self.spec.labels | self.spec.row_vars))
                raise self.err(f"sizes= names {name!r}, which is not a label or row variable"
                               f" of the spec (known: {known or 'none'})", label=name)

    def close_result(self, result: dict[Kind, SRow]) -> None:
        """Fixed result indices default to ``index + 1``; unsolved result rows to empty."""
        close_placements(self.solver, self.result_fixed, self.spec.text)
        self.solver.settle_bases()
        for row in result.values():
            r = self.solver.resolve(row)
            if r.var is not None:
                self.solver.bind_row(r.var, SRow(), Origin(self.spec.text))
        self.solver.run()
        missing: dict[str, tuple[int, int] | None] = {}
        for row in result.values():
            for v in self.solver.resolve(row).axes():
                if v.root().value is None:
                    missing.setdefault(v.root().name or v.name or "_", v.span)
        if missing:
            span = next((sp for sp in missing.values() if sp is not None), None)
            raise self.undetermined(list(missing), " in the result", span,
                                    "pass result=<the result shape>")

    def check_determined(self) -> None:
        """Every label needs a size to iterate over; one only a relation mentions may lack it
        (a padded axis's kernel: ``o=+k`` is ``o`` long; ``a^b``: only the sum is known)."""
        missing = [name for name, v in self.labels.items() if v.root().value is None]
        if missing:
            raise self.undetermined(missing, "", None, "pass it as an operand")

    def undetermined(self, missing: list[str], where: str, span: tuple[int, int] | None,
                     instead: str) -> ShapeError:
        """The sizes nothing determines (``"_"``: an unlabelled axis), why, and the fix."""
        axis, why = self.undetermined_use(missing[0])
        sizes = ", ".join(f"{m!r}: ..." for m in missing if m != "_")
        return self.err(
            f"cannot infer the size of {', '.join(map(repr, missing))}{where}: {why}",
            axis.span if axis is not None else span, label=missing[0],
            hint=f"give it with sizes={{{sizes}}}, or {instead}" if sizes else instead)

    def undetermined_use(self, name: str) -> tuple[Axis | None, str]:
        """The spec axis whose relation mentions label ``name`` without sizing it, and why."""
        if name not in self.labels:
            return None, "no operand determines it"
        root = self.labels[name].root()
        for c in self.solver.constraints:
            axis, *parts = c.watched()  # a relation's axis, then the sizes that make it up
            if not any(p.root() is root for p in parts):
                continue
            a, size = self.terms[axis.id][0], axis.root().value
            if isinstance(c, AffineRel):
                assert isinstance(a, Affine)
                if c.padding == "padded":
                    over = a.over if c.stride == 1 else f"{c.stride}*{a.over}"
                    return a, (f"{a.render(True)!r} is padded, so its input's size is "
                               f"{over} whatever the kernel {a.kernel!r} is")
                return a, (f"{a.render(True)!r} relates the input's size ({size}) to "
                           f"{a.over!r} and {a.kernel!r} together, and nothing gives either alone")
            what = "product of its factors" if isinstance(c, LinearRel) else "sum of its components"
            return a, f"{a.render(True)!r} only gives the {what} ({size})"
        return None, "no operand determines it"

    # -- packaging -----------------------------------------------------------------------------
    def package(self, patterns: list[dict[Kind, SRow]], operands: tuple[Shape, ...]
                ) -> Inferred:
        S = self.solver
        iters: dict[tuple[str, Any], Iter] = {}

        def iter_of(v: DimVar, label: str | None) -> Iter:
            """One iterator per label of this spec and per other axis variable, keyed by the
            spec's names, not solver roots: graph-wide, two labels unified by other uses (a
            tensor against its own copy) still iterate apart."""
            key = ("label", label) if label is not None else ("var", id(v))
            return iters.get(key) or iters.setdefault(
                key, Iter(len(iters), label or v.root().name, solved(v)))

        def index_of(v: DimVar) -> Index:
            term = self.terms.get(v.id)
            if term is None or isinstance(term[0], Placeholder):
                return iter_of(v, None)
            a, extra = term
            if isinstance(a, Label):
                return iter_of(v, a.name)
            if isinstance(a, Fixed):
                return FixedIndex(a.index)
            if isinstance(a, Affine):
                stride, over, dilation, kernel, padding = extra
                return AffineIndex(stride, iter_of(over, over.name), dilation,
                                   iter_of(kernel, kernel.name) if kernel is not None else None,
                                   a.offset, padding == "padded")
            if isinstance(a, Merge):
                return MergeIndex(tuple(iter_of(p, p.name) for p in extra))
            assert isinstance(a, Concat)
            return ConcatIndex(tuple(p if isinstance(p, int) else iter_of(p, p.name)
                                     for p in extra))

        layout = tuple(tuple(AxisUse(kind, j, solved(v), v.root().basis, index_of(v))
                             for kind in MEMORY_ORDER
                             for j, v in enumerate(S.resolve(pat[kind]).axes()))
                       for pat in patterns)
        dims = {n: solved(v) for n, v in sorted(self.labels.items())}
        rows, ellipses = {}, {}
        for key, node in self.rowvars.items():
            vals = tuple(solved(v) for v in S.resolve(SRow((), node, ())).axes())
            if key.startswith("..."):
                ellipses[key[3:]] = vals
            else:
                rows[key] = vals
        return Inferred(
            spec=self.spec, logic="einsum", operands=operands,
            shape=Shape.from_rows({k: [(u.size, u.basis) for u in layout[-1] if u.kind == k]
                                   for k in MEMORY_ORDER}), dims=MappingProxyType(dims),
            rows=MappingProxyType(rows), ellipses=MappingProxyType(ellipses),
            conditions=tuple(S.conditions), layout=layout,
            iterators=tuple(sorted(iters.values(), key=lambda it: it.id)))


def close_placements(S: Solver, fixed: list[DimVar], spec: str | None = None) -> None:
    """Size every unsized placement axis (a fixed index in a result) by OCANNL's at-least rule:
    the largest index any of its uses needs plus one, result placements and operand reads
    alike (``i=>i0`` and ``j=>j1`` meeting on one label give it 2 cells)."""
    need = {r: 0 for r in (v.root() for v in fixed) if r.value is None}
    for c in S.constraints:
        if isinstance(c, AtLeast) and (r := c.var.root()) in need:
            need[r] = max(need[r], c.bound)
    for r, bound in need.items():
        S.set_value(r, bound, Origin(spec, note="placement (at least the largest fixed index "
                                                "any use needs, plus one)"))


def solved(v: DimVar) -> Size:
    """``v``'s size, which a successful solve has determined."""
    size = v.root().value
    assert size is not None, f"{v!r} is unsolved"
    return size


def _row_span(row: Row) -> tuple[int, int] | None:
    spans = [a.span for a in row.axes] + ([row.var.span] if row.var is not None else [])
    spans = [s for s in spans if s != (0, 0)]
    return (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else None


def _row_hint(spec: Spec, i: int, kind: Kind, row: Row) -> str | None:
    """The obvious fix for a rank mismatch in this row, when there is one."""
    if row.is_context_ellipsis and kind != "output":
        return (f"omitted {kind} rows share one '...' across the spec, so they must be equal; "
                f"close the row with '{'|' if kind == 'batch' else '->'}' where an operand "
                f"must have no {kind} axes (e.g. '{'|' if kind == 'batch' else ''}"
                f"{'' if kind == 'batch' else '->'}jk')")
    if row.var is None:
        return (f"add a row variable (e.g. '...' in the {kind} row) to accept any number of "
                "further axes, or check the operand order")
    return None
