"""Shape inference: ``infer(spec, *operands) -> Inferred``.

This module turns a spec and operand shapes into solver constraints (:mod:`tensig.core.solver`),
runs the solver, and packages the answer: the result shape, every label's size, every row
variable's axes, the conditions that hold only for some symbolic sizes, and the *projections*
(:attr:`Inferred.layout`: which iteration axis indexes which array axis), which the execution
layer lowers to backend calls.

Three logics are available (OCANNL's ``~logic``):

- an einsum spec: **equalities** -- labels unify exactly, a size-1 axis does not stretch, a
  shared row variable (including the implicit ``...`` of omitted rows) forces equal rows;
- ``"."`` pointwise broadcasting: each operand is broadcast into the result; only a claim-free
  (basis-free) size-1 axis stretches, and an unlabelled axis never fuses with a labelled one
  (except what is written to broadcast, a number or an einsum's kept cell, which stretches
  onto a labelled axis, and a parameter's given axis, which takes the label it meets);
- ``"@"`` compose: the left operand's input row contracts with the right operand's output row,
  batch rows broadcast; ``"T"`` transposes the input and output rows.

>>> r = infer("ij;jk=>ik", (2, 3), (3, 4))
>>> r.shape, r.dims["j"]
(Shape('2,4'), 3)
>>> infer("...|2*oh<+wh; |wh => ...|oh", "8|9", (3,)).shape
Shape('8|4')
>>> from tensig.core.dims import dim
>>> r = infer("i<+k; k => i", [dim("T")], [3])
>>> r.shape, [str(c) for c in r.conditions]
(Shape('T - 2'), ['T >= 3'])
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
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
    parse,
)
from tensig.core.projections import (
    AffineIndex,
    AxisUse,
    ConcatIndex,
    FixedIndex,
    Index,
    Iter,
    MergeIndex,
    logic_layout,
)
from tensig.core.shapes import MEMORY_ORDER, Shape, Size, as_shape, normalize_size
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

__all__ = [
    "AffineIndex",
    "AxisUse",
    "ConcatIndex",
    "FixedIndex",
    "Inferred",
    "Iter",
    "MergeIndex",
    "ShapeGraph",
    "TensorNode",
    "count_text",
    "infer",
    "logic_projections",
    "register_operand_counts",
]

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


# --------------------------------------------------------------------------------------------
# The answer
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Inferred:
    """What inference found.

    ``shape``: the result :class:`Shape`; ``dims``: label -> size; ``rows``: named row variable
    -> sizes; ``ellipses``: kind -> the sizes of that kind's ``...``; ``conditions``: facts that
    hold only for some symbolic sizes (for example a valid convolution's divisibility), reported
    rather than assumed; ``operands``: the operand shapes as read; ``layout``: per operand and
    then the result, each axis (memory order) with its projection; ``iterators``: the product
    space (every :class:`Iter`).
    """

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
                total: Size = 1
                for s in self.rows[name]:
                    total = normalize_size(total * s)
                out[name] = total
            else:
                known = sorted(self.dims) + sorted(f"..{r}.." for r in self.rows)
                spec = f" in {self.spec.text!r}" if self.spec is not None else ""
                raise ValueError(f"cannot capture {name!r}: no such label or row variable"
                                 f"{spec}; known: {', '.join(known) or 'none'}")
        return out

    def __str__(self) -> str:
        dims = ", ".join(f"{k}={v}" for k, v in self.dims.items())
        return f"{self.shape} ({dims})" if dims else str(self.shape)


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def infer(
    spec: str,
    *operands: Any,
    op: str | None = None,
    params: Mapping[str, int] | None = None,
    use_padding: bool | None = None,
    result: Any = None,
    sizes: Mapping[str, Any] | None = None,
) -> Inferred:
    """Infer the result shape of ``spec`` applied to ``operands``.

    Operands are :class:`Shape` objects, shape strings (``"2|3->4"``), tuples (output axes) or
    arrays.  ``spec`` is an einsum spec, or one of the logics ``"."`` (pointwise broadcasting),
    ``"@"`` (compose) and ``"T"`` (transpose).  ``params`` resolves stride/dilation identifiers,
    ``use_padding`` decides plain ``+`` affine axes, ``op`` (one of ``einsum``, ``einsum1``,
    ``outer_sum``, ``tropical``, ``einmax1``, ``concat``) also checks that operator's arity,
    ``result`` gives a known result shape (for middle concatenation and replicated labels) and
    ``sizes`` gives label sizes directly.

    The answer is cached per (spec, shapes, options): a repeated call costs a dictionary lookup.

    >>> infer("b|i->o; o->p => b|i->p", "8|3->4", "4->5").shape
    Shape('8|3->5')
    >>> infer(".", (8, 1, 4), (3, 1)).shape
    Shape('8,3,4')
    """
    try:
        key = (spec, tuple(map(_raw_key, operands)), op,
               None if params is None else tuple(params.items()), use_padding,
               None if result is None else _raw_key(result),
               None if sizes is None else tuple(sizes.items()))
        hit = _FAST.get(key)
    except (TypeError, AttributeError):  # unhashable pieces: take the checked path
        key, hit = None, None
    if hit is not None:
        return hit
    answer = _infer_checked(spec, operands, op, params, use_padding, result, sizes)
    if key is not None:
        if len(_FAST) >= _FAST_MAX:
            _FAST.clear()
        _FAST[key] = answer
    return answer


# The fast path: raw operand keys (shape tuples, strings) straight to the answer.
_FAST: dict[tuple[Any, ...], Inferred] = {}
_FAST_MAX = 8192


def _raw_key(x: Any) -> Any:
    """A cheap hashable key for an operand: its shape tuple, string or Shape."""
    if isinstance(x, tuple | str | Shape):
        return x
    shape = getattr(x, "__tensig_shape__", None)
    if shape is not None:
        return shape
    shape = x.shape
    return shape if type(shape) is tuple else tuple(shape)


def _infer_checked(spec: Any, operands: tuple[Any, ...], op: str | None,
                   params: Mapping[str, int] | None, use_padding: bool | None, result: Any,
                   sizes: Mapping[str, Any] | None) -> Inferred:
    if not isinstance(spec, str):
        raise TypeError(f"spec must be a str, not {type(spec).__name__}")
    shapes = tuple(as_shape(x, where=f"operand {i}") for i, x in enumerate(operands))
    res = None if result is None else as_shape(result, where="result")
    key_params = _freeze_params(params)
    key_sizes = None if sizes is None else tuple(
        (k, tuple(v) if isinstance(v, list | tuple) else v) for k, v in sizes.items())
    if use_padding is not None and not isinstance(use_padding, bool):
        raise TypeError(f"use_padding must be True, False or None, not {use_padding!r}")
    return _infer_cached(spec, shapes, op, key_params, use_padding, res, key_sizes)


def _freeze_params(params: Mapping[str, int] | None) -> tuple[tuple[str, int], ...]:
    if params is None:
        return ()
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping such as {{'stride': 2}}, not "
                        f"{type(params).__name__}")
    return tuple(sorted(params.items()))


@functools.lru_cache(maxsize=8192)
def _infer_cached(spec: str, shapes: tuple[Shape, ...], op: str | None,
                  params: tuple[tuple[str, int], ...], use_padding: bool | None,
                  result: Shape | None, sizes: tuple[tuple[str, Any], ...] | None) -> Inferred:
    if spec.strip() in LOGICS:
        return _infer_logic(LOGICS[spec.strip()], shapes, result)
    if op in LOGICS.values():
        return _infer_logic(op, shapes, result)
    if op is not None and op not in EINSUM_OPS:
        raise ValueError(f"unknown op {op!r}; expected one of "
                         f"{', '.join([*EINSUM_OPS, *LOGICS.values()])}")
    return _EinsumInference(parse(spec), shapes, op, dict(params), use_padding, result,
                            dict(sizes) if sizes is not None else None).run()


# --------------------------------------------------------------------------------------------
# Einsum specs
# --------------------------------------------------------------------------------------------


class _EinsumInference:
    """One spec instance: labels and row variables are local to it."""

    def __init__(self, spec: Spec, shapes: tuple[Shape, ...], op: str | None,
                 params: dict[str, int],
                 use_padding: bool | None, result: Shape | None, sizes: dict[str, Any] | None,
                 solver: Solver | None = None):
        self.spec, self.shapes, self.op = spec, shapes, op
        self.params, self.use_padding = params, use_padding
        self.result, self.sizes = result, sizes
        self.solver = solver if solver is not None else Solver(spec.text)
        self.labels: dict[str, DimVar] = {}
        self.rowvars: dict[str, RowNode] = {}
        # occurrence var id -> the spec axis it came from (for projections)
        self.terms: dict[int, tuple[Axis, Any]] = {}
        self.result_fixed: list[tuple[DimVar, int]] = []

    def err(self, reason: str, span: tuple[int, int] | None = None, **kw: Any) -> ShapeError:
        return ShapeError(reason, spec=self.spec.text, span=span, **kw)

    # -- building ------------------------------------------------------------------------------
    def label(self, name: str) -> DimVar:
        v = self.labels.get(name)
        if v is None:
            v = self.labels[name] = DimVar(name)
        return v

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
        if isinstance(a, Label):
            v = self.occurrence(a.name, span, o)
            self.terms[v.id] = (a, None)
            return v
        v = DimVar(None, span=span)
        if isinstance(a, Placeholder):
            self.terms[v.id] = (a, None)
        elif isinstance(a, Fixed):
            self.terms[v.id] = (a, None)
            self.solver.add(AtLeast(v, a.index + 1, o,
                                    what=f"fixed index {a.index} needs an axis of at least "
                                         "{bound} elements, but it has {size}"))
            if where.operand == "result":
                self.check_not_a_factor(a)
                self.result_fixed.append((v, a.index))
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

    def check_not_a_factor(self, a: Fixed) -> None:
        """``b|(h, 4) => b|h, 4`` reads as keeping the factor 4, but a result's ``4`` is a
        fixed index (a placement into cell 4 of a 5-cell axis) and an integer factor is
        anonymous (summed away here): refused rather than silently placed."""
        merges = [m for sh in self.spec.operands for _, row in sh.rows() for m in row.axes
                  if isinstance(m, Merge) and a.index in m.parts]
        if merges:
            raise self.err(
                f"'{a.index}' in the result is a fixed index (a placement into cell "
                f"{a.index}), not the factor {a.index} of {merges[0].render(True)!r}: an "
                "integer factor is an axis of its own that nothing else names", a.span,
                hint=f"name the factor to keep it, e.g. (h, e) => h, e with sizes={{'e': "
                     f"{a.index}}}; or drop the '{a.index}' to reduce over it")

    def product(self, v: DimVar, a: Merge, factors: tuple[DimVar, ...], o: Origin
                ) -> LinearRel:
        """``(h, e)``: the axis has ``|h|*|e|`` elements; one unknown factor is the size
        divided by the others' product, which must divide it."""
        names = {f"${j}": f for j, f in enumerate(factors)}
        expr = Dim.const(1)
        for n in names:
            expr = expr * Dim.symbol(n)
        shown = a.render(True)

        def report(kind: str, facts: dict[str, Any]) -> ShapeError:
            size = _val_of(v)
            known = [(p, _val_of(f)) for p, f in zip(a.parts, factors, strict=True)]
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

    def row_node(self, name: str | None, kind: Kind) -> RowNode:
        key = name if name is not None else f"...{kind}"
        node = self.rowvars.get(key)
        if node is None:
            node = self.rowvars[key] = RowNode(key)
        return node

    def pattern(self, row: Row, kind: Kind, where: Origin) -> SRow:
        left = tuple(self.axis_var(a, kind, where) for a in row.left)
        right = tuple(self.axis_var(a, kind, where) for a in row.right)
        node = self.row_node(row.var.name, kind) if row.var is not None else None
        return SRow(left, node, right)

    @staticmethod
    def given(shape: Shape, kind: Kind, where: Origin) -> SRow:
        spec, who, shown, note = where.spec, where.operand, where.shape, where.note
        return SRow((), None, tuple(
            DimVar(None, size, basis, Origin(spec, None, who, shown, kind, j, note))
            for j, (size, basis) in enumerate(shape.axes(kind))))

    # -- solving -------------------------------------------------------------------------------
    def instantiate(self, operands: list[dict[Kind, SRow]], shown: list[str | None],
                    result: dict[Kind, SRow] | None = None,
                    result_shown: str | None = None) -> list[dict[Kind, SRow]]:
        """Relate ``operands``' rows through the spec; the last pattern returned is the result.

        ``shown`` are the operands' shapes as text (for messages); ``result`` optionally gives
        rows the result must equal.
        """
        spec = self.spec
        self.check_arity(len(operands))
        shapes = spec.shapes()  # built once: per operand it would make instantiation quadratic
        patterns: list[dict[Kind, SRow]] = []
        for i, sh in enumerate(shapes):
            who: int | str = "result" if i == len(spec.operands) else i
            text = shown[i] if isinstance(who, int) else result_shown
            where = Origin(spec.text, None, who, text)
            patterns.append({k: self.pattern(row, k, where) for k, row in sh.rows()})
        actual = list(enumerate(operands))
        if result is not None:
            actual.append((len(spec.operands), result))
        for i, rows in actual:
            who = "result" if i == len(spec.operands) else i
            text = shown[i] if isinstance(who, int) else result_shown
            for kind, row in shapes[i].rows():
                def explain(i=i, who=who, kind=kind, row=row) -> tuple[str, str, str | None]:
                    shown = row.render(spec.multichar) or "(empty)"
                    return (f"the spec's {kind} row {shown!r}", _whose(who, kind),
                            _row_hint(spec, i, kind, row))

                o = Origin(spec.text, _row_span(row), who, text, kind, explain=explain)
                self.solver.unify_rows(patterns[i][kind], rows[kind], o)
        return patterns

    def run(self) -> Inferred:
        """``infer``: operands and the optional result are given shapes."""
        def rows(shape: Shape, who: int | str) -> dict[Kind, SRow]:
            where = Origin(self.spec.text, None, who, str(shape))
            return {k: self.given(shape, k, where) for k in MEMORY_ORDER}

        patterns = self.instantiate(
            [rows(sh, i) for i, sh in enumerate(self.shapes)], [str(s) for s in self.shapes],
            rows(self.result, "result") if self.result is not None else None,
            str(self.result) if self.result is not None else None)
        self.apply_sizes()
        self.solver.run()
        self.close_result(patterns[-1])
        self.check_determined()
        return self.package(patterns)

    def check_arity(self, n: int) -> None:
        spec = self.spec
        if n != len(spec.operands):
            raise self.err(f"the spec has {len(spec.operands)} operand(s) but {n} "
                           f"{'was' if n == 1 else 'were'} given")
        if self.op is None:
            return
        lo, hi = EINSUM_OPS[self.op]
        if n < lo or (hi is not None and n > hi):
            raise self.err(f"{self.op} takes {count_text(lo, hi)} operand(s), got {n}")

    def apply_sizes(self) -> None:
        if not self.sizes:
            return
        for name, value in self.sizes.items():
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
        _close_placements(self.solver, self.result_fixed, self.spec.text)
        self.solver.settle_bases()
        for row in result.values():
            r = self.solver.resolve(row)
            if r.var is not None:
                self.solver.bind_row(r.var, SRow(), Origin(self.spec.text))
        self.solver.run()
        missing: list[str] = []
        span = None
        for row in result.values():
            for v in self.solver.resolve(row).axes():
                if v.root().value is None:
                    name = v.root().name or v.name
                    if name not in missing:
                        missing.append(name or "_")
                        span = span or v.span
        if missing:
            names = ", ".join(repr(m) for m in missing)
            hint_sizes = ", ".join(f"{m!r}: ..." for m in missing if m != "_")
            axis, why = (self.undetermined_use(missing[0]) if missing[0] in self.labels
                         else (None, "no operand determines it"))
            raise self.err(
                f"cannot infer the size of {names} in the result: {why}",
                axis.span if axis is not None else span, label=missing[0],
                hint=(f"give it with sizes={{{hint_sizes}}} or pass result=<the result shape>"
                      if hint_sizes else "pass result=<the result shape>"))

    def check_determined(self) -> None:
        """Every label needs a size to iterate over, also one that is not in the result.

        Operand axes take their sizes from the operands and the result's were checked by
        :meth:`close_result`; what can remain is a label that only a relation mentions: the
        kernel of a padded axis (``o=+k``: the input is ``o`` long whatever ``k`` is) or the
        components of a concatenation (``a^b``: only their sum is known).
        """
        missing = [name for name, v in self.labels.items() if v.root().value is None]
        if not missing:
            return
        axis, why = self.undetermined_use(missing[0])
        names = ", ".join(repr(m) for m in missing)
        sizes = ", ".join(f"{m!r}: ..." for m in missing)
        raise self.err(f"cannot infer the size of {names}: {why}",
                       axis.span if axis is not None else None, label=missing[0],
                       hint=f"give it with sizes={{{sizes}}}, or pass it as an operand")

    def undetermined_use(self, name: str) -> tuple[Axis | None, str]:
        """The spec axis whose relation mentions label ``name`` without sizing it, and why."""
        root = self.labels[name].root()
        for c in self.solver.constraints:
            if isinstance(c, AffineRel) and root in (c.over.root(), c.kernel and c.kernel.root()):
                a = self.terms[c.inp.id][0]
                assert isinstance(a, Affine)
                if c.padding == "padded":
                    size = a.over if c.stride == 1 else f"{c.stride}*{a.over}"
                    return a, (f"{a.render(True)!r} is padded, so its input's size is "
                               f"{size} whatever the kernel {a.kernel!r} is")
                return a, (f"{a.render(True)!r} relates the input's size "
                           f"({c.inp.root().value}) to {a.over!r} and {a.kernel!r} together, "
                           "and nothing gives either alone")
            if isinstance(c, LinearRel) and any(f.root() is root for f in c.names.values()):
                a = self.terms[c.target.id][0]
                return a, (f"{a.render(True)!r} only gives the product of its factors "
                           f"({c.target.root().value})")
            if isinstance(c, ConcatSum) and any(
                    isinstance(p, DimVar) and p.root() is root for p in c.parts):
                return self.terms[c.total.id][0], (
                    f"{self.terms[c.total.id][0].render(True)!r} only gives the sum of its "
                    f"components ({c.total.root().value})")
        return None, "no operand determines it"

    # -- packaging -----------------------------------------------------------------------------
    def package(self, patterns: list[dict[Kind, SRow]]) -> Inferred:
        S = self.solver
        iters: dict[tuple[str, Any], Iter] = {}

        def iter_of(v: DimVar, label: str | None) -> Iter:
            """One iterator per label of this spec, and one per other axis variable (a row
            variable's axes are the same variables wherever the row is used).  Keyed by the
            spec's own names, not by solver roots: graph-wide, two labels can be unified by
            other uses (a tensor against its own copy) and must still iterate apart."""
            key = ("label", label) if label is not None else ("var", id(v))
            it = iters.get(key)
            if it is None:
                r = v.root()
                assert r.value is not None
                it = iters[key] = Iter(len(iters), label or r.name, r.value)
            return it

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

        layout = []
        result_rows: dict[Kind, list[tuple[Size, str | None]]] = {}
        for i, pat in enumerate(patterns):
            uses = []
            for kind in MEMORY_ORDER:
                axes = S.resolve(pat[kind]).axes()
                for j, v in enumerate(axes):
                    r = v.root()
                    assert r.value is not None
                    uses.append(AxisUse(kind, j, r.value, r.basis, index_of(v)))
                if i == len(patterns) - 1:
                    result_rows[kind] = [(v.root().value, v.root().basis) for v in axes]
            layout.append(tuple(uses))
        dims = {n: v.root().value for n, v in sorted(self.labels.items())}
        rows, ellipses = {}, {}
        for key, node in self.rowvars.items():
            r = S.resolve(SRow((), node, ()))
            vals = tuple(v.root().value for v in r.axes())
            if key.startswith("..."):
                ellipses[key[3:]] = vals
            else:
                rows[key] = vals
        return Inferred(
            spec=self.spec, logic="einsum", operands=self.shapes,
            shape=Shape.from_rows(result_rows), dims=MappingProxyType(dims),
            rows=MappingProxyType(rows), ellipses=MappingProxyType(ellipses),
            conditions=tuple(S.conditions), layout=tuple(layout),
            iterators=tuple(sorted(iters.values(), key=lambda it: it.id)))


def _close_placements(S: Solver, fixed: list[tuple[DimVar, int]],
                      spec: str | None = None) -> None:
    """Size every unsized placement axis (a fixed index in a result) by OCANNL's at-least rule.

    A fixed index ``k`` only requires ``size >= k + 1``; an axis nothing else sizes takes the
    largest index any of its uses needs, result placements and operand reads alike (``i=>i0``
    and ``j=>j1`` meeting on one label give it 2 cells), not ``k + 1`` of whichever came first.
    """
    need: dict[int, tuple[DimVar, int]] = {}
    for v, _ in fixed:
        r = v.root()
        if r.value is None:
            need[id(r)] = (r, 0)
    for c in S.constraints:
        if isinstance(c, AtLeast):
            r = c.var.root()
            if id(r) in need and c.bound > need[id(r)][1]:
                need[id(r)] = (r, c.bound)
    for r, bound in need.values():
        S.set_value(r, bound, Origin(spec, note="placement (at least the largest fixed index "
                                                "any use needs, plus one)"))


def _val_of(v: DimVar) -> Size | None:
    return v.root().value


def _row_span(row: Row) -> tuple[int, int] | None:
    spans = [a.span for a in row.axes] + ([row.var.span] if row.var is not None else [])
    spans = [s for s in spans if s != (0, 0)]
    if not spans:
        return None
    return (min(s[0] for s in spans), max(s[1] for s in spans))


def _whose(who: int | str, kind: str) -> str:
    return ("the result" if who == "result" else f"operand {who}") + f"'s {kind} row"


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


# --------------------------------------------------------------------------------------------
# Graph-wide inference: many tensors, many specs, one solver
# --------------------------------------------------------------------------------------------


class TensorNode:
    """A tensor in a :class:`ShapeGraph`: a name and three solver rows (possibly unknown).

    A *parameter* has no batch axes and closes to what its uses need: in a pointwise operation
    its unknown rows take the broadcast shape of the other operands.
    """

    __slots__ = ("name", "param", "rows")

    def __init__(self, name: str, rows: dict[Kind, SRow], param: bool = False):
        self.name = name
        self.rows = rows
        self.param = param

    def __repr__(self) -> str:
        return f"TensorNode({self.name!r})"


class ShapeGraph:
    """Shapes of many tensors related by many specs, solved together.

    A tensor's shape may be unknown when it is created; uses constrain it, in any order.  This
    is the engine the model layer's graph-wide inference runs on.

    >>> g = ShapeGraph()
    >>> x = g.tensor("x", "8|->3")
    >>> w = g.tensor("w")                       # a parameter: shape unknown
    >>> h = g.apply("b|->i; |i->o => b|->o", x, w)
    >>> g.tensor_equal(h, g.tensor("target", "8|->5"))
    >>> g.solve()
    >>> g.shape(w)
    Shape('3->5')
    """

    def __init__(self) -> None:
        self.solver = Solver()
        self.tensors: list[TensorNode] = []
        self._apps: list[tuple[_EinsumInference, list[dict[Kind, SRow]]]] = []
        self._broadcasts: list[_Broadcast] = []
        #: how each operation's result was made (by node id): a spec instance (its labels
        #: are captured from it), its operands and patterns, or a logic and its operands --
        #: what its projections are read from
        self._made: dict[int, tuple[Any, ...]] = {}
        self._projections: dict[int, Inferred] = {}  # answered since the last solve
        #: size-1 axes written to broadcast (OCANNL's ``bcast_if_1``): a number's axis and a
        #: placement an einsum keeps where it reduced (``=> ..., 0``); these stretch onto a
        #: labelled axis, where a data array's 1 does not
        self._stretch: list[DimVar] = []
        self._placed: list[DimVar] = []
        #: a parameter's given axes: no data, so no label of their own; each takes the label
        #: of the axis it meets (``wo @ a + h`` with ``h`` labelled ``d``)
        self._sized: list[DimVar] = []

    def tensor(self, name: str, shape: Any = None, *, param: bool = False) -> TensorNode:
        """A tensor with a known ``shape``, or an unknown one (``None``).

        A parameter (``param=True``) has no batch axes; its other rows may stay unknown until
        its uses determine them.
        """
        if shape is None:
            rows = {k: SRow((), RowNode(f"{name}.{k}", closes=param), ()) for k in MEMORY_ORDER}
            if param:
                rows["batch"] = SRow()
        else:
            sh = as_shape(shape, where=name)
            if param and sh.batch:
                raise ShapeError(f"parameter {name!r} cannot have batch axes (shape {sh})",
                                 hint="batch axes belong to data; give the parameter output and "
                                      "input axes only")
            where = Origin(None, None, None, None, note=f"tensor {name!r} (shape {sh})")
            rows = {k: _EinsumInference.given(sh, k, where) for k in MEMORY_ORDER}
        node = TensorNode(name, rows, param)
        self.tensors.append(node)
        return node

    def broadcasts(self, node: TensorNode) -> None:
        """Mark ``node``'s size-1 axes as written to broadcast (a number lifted to a tensor):
        they stretch onto any axis, labelled or not."""
        self._stretch.extend(v for k in MEMORY_ORDER
                             for v in self.solver.resolve(node.rows[k]).axes()
                             if v.root().value == 1)

    def stretches(self, v: DimVar) -> bool:
        """Whether ``v`` is a size-1 axis written to broadcast (see :meth:`broadcasts`)."""
        r = v.root()
        return any(w.root() is r for w in itertools.chain(self._stretch, self._placed))

    def takes_label(self, v: DimVar) -> bool:
        """Whether ``v`` is an unlabelled axis a parameter was given: it takes the label of
        the axis it meets instead of refusing it."""
        r = v.root()
        return r.basis is None and any(w.root() is r for w in self._sized)

    def parameter(self, name: str, output: Any = None, input: Any = None) -> TensorNode:
        """A parameter whose output and/or input axes may be given; the rest is inferred.

        ``output=[8]`` is OCANNL's ``{ b; o = [8] }``: the given rows are fixed, the others
        close to what the parameter's uses need.  Parameters have no batch axes.
        """
        rows: dict[Kind, SRow] = {"batch": SRow()}
        for kind, sizes in (("output", output), ("input", input)):
            if sizes is None:
                rows[kind] = SRow((), RowNode(f"{name}.{kind}", closes=True), ())
            else:
                sh = Shape(output=sizes)
                where = Origin(None, None, None, None, note=f"parameter {name!r} {kind} {sh}")
                given = _EinsumInference.given(sh, "output", where)
                rows[kind] = given
                self._sized.extend(given.axes())
        node = TensorNode(name, rows, True)
        self.tensors.append(node)
        return node

    def pointwise(self, *operands: TensorNode, name: str | None = None) -> TensorNode:
        """Pointwise broadcasting (OCANNL ``+ - *. /.``): each operand broadcasts into the
        result, row by row; only a claim-free size-1 axis stretches."""
        if not operands:
            raise ValueError("pointwise needs at least one operand")
        node = self._new(name or "pointwise", dict.fromkeys(MEMORY_ORDER))
        self._made[id(node)] = (".", operands)
        for kind in MEMORY_ORDER:
            self._broadcasts.append(_Broadcast(
                self, node.rows[kind], [(t.rows[kind], t) for t in operands], kind, node.name))
        return node

    def compose(self, a: TensorNode, b: TensorNode, c: TensorNode | None = None,
                name: str | None = None) -> TensorNode:
        """Compose (OCANNL ``*``, Python ``@``): ``a``'s input row contracts with ``b``'s output
        row; the batch rows broadcast; the result is ``b``'s input to ``a``'s output.

        A third operand ``c`` (OCANNL's ternary compose, as in ``fma``) is pointwise with the
        result: it broadcasts into the result's rows, which it cannot widen.
        """
        o = Origin(None, None, None, None, "input",
                   note=f"compose: {a.name!r}'s input row contracts with {b.name!r}'s output row")
        ra, rb = (self.solver.resolve(a.rows["input"]), self.solver.resolve(b.rows["output"]))
        if ra.var is None and rb.var is None and len(ra.right) == len(rb.right):
            for x, y in zip(ra.right, rb.right, strict=True):
                if x.root().basis != y.root().basis and (self.takes_label(x)
                                                         or self.takes_label(y)):
                    self.solver.union(x, y, o)  # the parameter's axis takes the data's label
        if not _contract_stretched(self.solver, ra, rb, o):
            self.solver.unify_rows(ra, rb, o, strict_basis=True,
                                   describe=(f"{a.name!r}'s input row",
                                             f"{b.name!r}'s output row"))
        node = self._new(name or "compose", {"batch": None, "input": b.rows["input"],
                                             "output": a.rows["output"]})
        self._made[id(node)] = ("@", (a, b) if c is None else (a, b, c))
        self._broadcasts.append(_Broadcast(
            self, node.rows["batch"], [(a.rows["batch"], a), (b.rows["batch"], b)], "batch",
            node.name))
        if c is not None:
            for kind in MEMORY_ORDER:
                self._broadcasts.append(_Broadcast(
                    self, node.rows[kind], [(node.rows[kind], node), (c.rows[kind], c)], kind,
                    node.name))
        return node

    def transpose(self, a: TensorNode, name: str | None = None) -> TensorNode:
        """Swap the input and output rows (OCANNL ``~logic:"T"``)."""
        node = self._new(name or "transpose", {"batch": a.rows["batch"],
                                               "input": a.rows["output"],
                                               "output": a.rows["input"]})
        self._made[id(node)] = ("T", (a,))
        return node

    def _new(self, name: str, rows: dict[Kind, SRow | None]) -> TensorNode:
        full = {k: r if r is not None else SRow((), RowNode(f"{name}.{k}"), ())
                for k, r in rows.items()}
        node = TensorNode(name, full)
        self.tensors.append(node)
        return node

    def apply(self, spec: str, *operands: TensorNode, name: str | None = None,
              op: str | None = None, params: Mapping[str, int] | None = None,
              use_padding: bool | None = None) -> TensorNode:
        """The result of ``spec`` applied to ``operands`` (a new tensor)."""
        inst = _EinsumInference(parse(spec), (), op, dict(_freeze_params(params)), use_padding,
                                None, None, solver=self.solver)
        patterns = inst.instantiate([t.rows for t in operands],
                                    [f"tensor {t.name!r}" for t in operands])
        self._apps.append((inst, patterns))
        node = TensorNode(name or f"{spec!r}#{len(self._apps)}", patterns[-1])
        self.tensors.append(node)
        self._made[id(node)] = (inst, tuple(operands), patterns)
        return node

    def made(self, node: TensorNode) -> bool:
        """Whether an operation of this graph made ``node`` (so it has projections)."""
        return id(node) in self._made

    def projections(self, node: TensorNode) -> Inferred:
        """The projections of the operation that made ``node`` (after :meth:`solve`): its
        operands' and its own axis uses (:attr:`Inferred.layout`), read from this solve --
        a spec's labels, windows and concatenations as its instance solved them, a logic's
        from the solved shapes.  Compiled code lowers these; nothing is inferred again."""
        done = self._projections.get(id(node))
        if done is not None:
            return done
        made = self._made.get(id(node))
        if made is None:
            raise ValueError(f"{node.name!r} was not made by an operation: it has no "
                             "projections")
        shapes = tuple(self.shape(t) for t in made[1])
        if isinstance(made[0], str):
            answer = logic_projections(made[0], self.shape(node), shapes,
                                       tuple(self.solver.conditions))
        else:
            answer = replace(made[0].package(list(made[2])), operands=shapes)
        self._projections[id(node)] = answer
        return answer

    # -- constraints on captured labels (OCANNL's Shape.set_dim / set_equal / set_scale) ----
    def label(self, t: TensorNode, name: str) -> DimVar:
        """The size variable of label ``name`` in the spec that produced ``t`` (OCANNL's
        ``capture_dims``); constrain it with :meth:`set_dim`, :meth:`set_equal`,
        :meth:`set_scale`, read it after :meth:`solve` with :meth:`value`."""
        inst = self._made.get(id(t), (None,))[0]
        if not isinstance(inst, _EinsumInference):
            raise ValueError(f"{t.name!r} was not made by a spec: it has no labels to capture")
        if name not in inst.labels:
            if name in inst.rowvars:
                raise ShapeError(f"{name!r} is a row variable of {inst.spec.text!r}: only "
                                 "dimension labels take set_dim/set_equal/set_scale")
            known = ", ".join(sorted(inst.labels)) or "none"
            raise ValueError(f"{inst.spec.text!r} has no label {name!r} (labels: {known})")
        return inst.labels[name]

    @staticmethod
    def variable(name: str) -> DimVar:
        """A free size variable (OCANNL's ``Shape.get_variable_ref``)."""
        return DimVar(name)

    def set_dim(self, v: DimVar, size: int) -> None:
        """``v`` has ``size`` elements."""
        self.solver.set_value(v, normalize_size(size, where=v.name or "size"),
                              Origin(note=f"set_dim({v.name!r}, {size})"), "set_dim")
        self.solver.run()

    def set_equal(self, a: DimVar, b: DimVar) -> None:
        """``a`` and ``b`` are the same size."""
        self.solver.union(a, b, Origin(note=f"set_equal({a.name!r}, {b.name!r})"))
        self.solver.run()

    def set_scale(self, big: DimVar, small: DimVar, factor: int) -> None:
        """``big == factor * small`` (either side is inferred from the other)."""
        if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
            raise ShapeError(f"set_scale: the factor must be a positive int, not {factor!r}")
        o = Origin(note=f"set_scale({big.name!r} = {factor} * {small.name!r})")
        self.solver.add(AffineRel(big, small, None, factor, 1, None, o))
        self.solver.run()

    @staticmethod
    def value(v: DimVar) -> Size | None:
        """``v``'s size (``None`` while unsolved)."""
        return v.root().value

    def tensor_equal(self, a: TensorNode, b: TensorNode) -> None:
        """``a`` and ``b`` have the same shape."""
        for k in MEMORY_ORDER:
            o = Origin(None, None, None, None, k, note=f"{a.name!r} = {b.name!r}")
            self.solver.unify_rows(a.rows[k], b.rows[k], o,
                                   describe=(f"{a.name!r}", f"{b.name!r}"))

    def solve(self) -> None:
        """Propagate; close what nothing determines; every shape must then be known."""
        S = self.solver
        self._projections.clear()
        S.run()
        # A placement axis nothing else sizes has index + 1 cells; a pointwise use broadcasts
        # it but cannot widen it (a result closes down to its arguments), so this comes first.
        placements = [f for inst, _ in self._apps for f in inst.result_fixed]
        _close_placements(S, placements)
        self._placed = [v for v, _ in placements]
        S.run()
        S.settle_bases()
        self._settle_broadcasts()
        S.run()
        S.settle_bases()
        for t in self.tensors:
            for k in MEMORY_ORDER:
                r = S.resolve(t.rows[k])
                if k == "batch" and r.var is not None and r.var.closes:
                    # only a stretched value's batch row closes to its uses (a parameter has
                    # none): a use whose spec leaves it free needs no batch axes of it
                    S.bind_row(r.var, SRow(), Origin(note=f"closing {t.name!r}"))
                    r = S.resolve(t.rows[k])
                if r.var is not None and r.var.closes:
                    what = f"parameter {t.name!r}" if t.param else \
                        f"shape of {t.name!r} (it shares a parameter's row)"
                    raise ShapeError(
                        f"under-determined {what}: no use determines its {k} axes",
                        label=t.name,
                        hint=f"give the parameter its {k} axes explicitly ({k}=[...]), the "
                             "way OCANNL's { w; o = [hid] } does")
                if r.var is not None:
                    S.bind_row(r.var, SRow(), Origin(note=f"closing {t.name!r}"))
                for j, v in enumerate(S.resolve(t.rows[k]).axes()):
                    if v.root().value is None:
                        label = v.root().name or v.name
                        merged = any(isinstance(c, LinearRel) and any(
                            f.root() is v.root() for f in c.names.values())
                            for c in S.constraints)
                        raise ShapeError(
                            f"cannot infer the size of {k} axis {j} of {t.name!r}"
                            + (f" (label {label!r})" if label else "")
                            + (": it is a factor of a merged axis, which gives only the "
                               "product" if merged else ": nothing in the graph determines it"),
                            label=label,
                            hint=f"give {t.name!r} a shape, or use it where that axis meets a "
                                 "known size" + (" (or set the captured label's size)"
                                                 if merged else ""))
        for t in self.tensors:
            made = self._made.get(id(t))
            if made is not None and made[0] == "@":
                self._check_contracted_labels(t.name, made[1][1])

    def _check_contracted_labels(self, op: str, b: TensorNode) -> None:
        """``@`` contracts a labelled axis only alone.

        A label names one axis, and the convention puts sequence positions on the batch row
        (``b, t | d``); a labelled axis contracted together with others (``b | t, d``: tokens
        on the output row) makes ``@`` a dense layer over all their cells -- a whole-sequence
        layer nothing else would flag.  An error, not a warning: labels are opt-in claims,
        the model trains without complaint when this goes wrong, and the one legitimate use (a
        dense layer over named image axes ``b | h, w``) is an einsum that says so."""
        axes = self.solver.resolve(b.rows["output"]).axes()
        named = [v.root() for v in axes if v.root().basis is not None]
        if len(axes) < 2 or not named:
            return
        shown = ", ".join(f"{r.basis}={r.value}" if r.basis else str(r.value)
                          for r in (v.root() for v in axes))
        raise ShapeError(
            f"{op!r} (@) contracts the labelled axis {named[0].basis}={named[0].value} of "
            f"{b.name!r} together with the rest of its output row ({shown}): a dense layer "
            "over all their cells (a whole sequence, if it holds positions)",
            label=named[0].basis, shape=str(self.shape(b)),
            hint="sequence positions go on the batch row (G.leaf(..., axes='b, t | d')); a dense "
                 "layer over several axes is written as an einsum that names them "
                 "(G.einsum('| h, w -> o; b | h, w => b | o', w, x))")

    def _settle_broadcasts(self) -> None:
        """Resolve pointwise broadcasts as their operands become known (to a fixpoint)."""
        pending = [b for b in self._broadcasts if not b.done]
        while pending:
            progress = False
            for b in pending:
                progress |= b.settle()
                self.solver.run()
            remaining = [b for b in pending if not b.done]
            if not progress:
                # Last resort, OCANNL's closing rule: rows that only parameters reach, with
                # no size anywhere, have no axes.
                for b in remaining:
                    if b.close_empty():
                        progress = True
                        break
                self.solver.run()
                remaining = [b for b in pending if not b.done]
            if not progress:
                stuck = remaining[0]
                names = ", ".join(sorted({t.name for _, t in stuck.operands
                                          if not stuck.known(t)}))
                raise ShapeError(
                    f"cannot infer the {stuck.kind} axes of {names}: a pointwise operation "
                    "needs them, and nothing else determines them",
                    hint="give a shape to one of these tensors, or use them where the shape is "
                         "known (a parameter takes its shape from its uses)")
            pending = remaining

    def shape(self, t: TensorNode) -> Shape:
        """The solved shape of ``t`` (after :meth:`solve`)."""
        return Shape.from_rows({
            k: [(v.root().value, v.root().basis) for v in self.solver.resolve(t.rows[k]).axes()]
            for k in MEMORY_ORDER})


# --------------------------------------------------------------------------------------------
# Broadcasting logics
# --------------------------------------------------------------------------------------------


class _Broadcast:
    """One row of a pointwise operation: waits for its non-parameter operands' rows, then
    broadcasts them; unknown parameter rows take the broadcast shape (they close to their use).
    """

    def __init__(self, graph: ShapeGraph, result: SRow, operands: list[tuple[SRow, TensorNode]],
                 kind: Kind, name: str = "pointwise"):
        self.graph, self.result, self.operands, self.kind = graph, result, operands, kind
        self.name = name
        self.done = False

    def row(self, t: TensorNode) -> SRow:
        return next(self.graph.solver.resolve(r) for r, o in self.operands if o is t)

    def known(self, t: TensorNode) -> bool:
        r = self.row(t)
        return r.var is None and all(v.root().value is not None for v in r.right)

    def close_empty(self) -> bool:
        """Every operand row is an open parameter row: they all have no axes."""
        S = self.graph.solver
        rows = [S.resolve(r) for r, _ in self.operands]
        if not all(r.var is not None and r.var.closes and not r.left and not r.right
                   for r in rows):
            return False
        unsized = [t.name for _, t in self.operands if t.param and all(
            S.resolve(t.rows[k]).var is not None for k in ("output", "input"))]
        if unsized:
            # OCANNL: "You forgot to specify the hidden dimension(s)"; a parameter nothing
            # sizes at all is a forgotten size, not a scalar
            names = ", ".join(repr(n) for n in unsized)
            raise ShapeError(
                f"parameter(s) {names} have hidden dimensions nothing determines: no use "
                f"gives their {self.kind} axes (or any other) a size", label=unsized[0],
                hint="give one of them its axes (output=[...], input=[...]), the way OCANNL's "
                     "{ w; o = [hid] } does, or use it where the sizes are known")
        o = Origin(None, None, None, None, self.kind, note="no use gives these axes a size")
        for r in rows:
            S.unify_rows(r, SRow(), o)
        S.unify_rows(self.result, SRow(), o)
        self.done = True
        return True

    def settle(self) -> bool:
        """Broadcast if possible; returns whether anything changed.

        The fully known rows broadcast into ``R``.  A row that is closed but has sizes no one
        has determined yet takes ``R``'s sizes (its use determines them); a parameter's open
        row takes ``R`` itself.  Any other open row must first be determined elsewhere.
        """
        S = self.graph.solver
        rows = [(S.resolve(r), t) for r, t in self.operands]

        def full(r: SRow) -> bool:
            return r.var is None and all(v.root().value is not None for v in r.right)

        known = [r for r, _ in rows if full(r)]
        partial = [r for r, _ in rows if r.var is None and not full(r)]
        open_rows = [r for r, _ in rows if r.var is not None]
        if not known or any(not r.var.closes for r in open_rows):  # type: ignore[union-attr]
            return False
        out = _broadcast(S, [(list(r.right), t.name) for r, t in rows if full(r)], self.kind,
                         self.name, self.graph)
        if any(len(r.right) > len(out) for r in partial):
            return False
        o = Origin(None, None, None, None, self.kind, note="determined by a pointwise use")
        for r in partial:
            for v, target in zip(r.right, out[len(out) - len(r.right):], strict=True):
                if v.root().value is None:
                    S.union(v, target, o)
                elif v.root().value != 1:
                    S.union(v, target, o, strict_basis=True)
        closed = SRow((), None, tuple(out))
        for r in open_rows:  # parameters close to what this use needs
            S.unify_rows(r, closed, o, describe=("a parameter's row", "the broadcast"))
        S.unify_rows(self.result, closed, o, describe=("the result", "the broadcast"))
        self.done = True
        return True


def _claim_free(v: DimVar) -> bool:
    return v.root().value == 1 and v.root().basis is None


def _contract_stretched(S: Solver, a: SRow, b: SRow, o: Origin) -> bool:
    """Compose's rows when a claim-free 1 meets a wider axis: OCANNL's broadcast inequality
    stretches the 1 (``"3->4" @ "1"`` contracts 3 against the stretched 1: the result is 4).

    Applies to closed rows of equal rank with known sizes; returns False (unify exactly) when
    no axis stretches or the rows are not known yet.
    """
    if a.var is not None or b.var is not None or len(a.right) != len(b.right):
        return False
    pairs = list(zip(a.right, b.right, strict=True))
    if any(v.root().value is None for p in pairs for v in p):
        return False
    stretched = [(x, y) for x, y in pairs if _claim_free(x) != _claim_free(y)]
    if not stretched:
        return False
    for x, y in pairs:
        if (x, y) not in stretched:
            S.union(x, y, o, strict_basis=True)
    return True


def _infer_logic(logic: str, shapes: tuple[Shape, ...], result: Shape | None) -> Inferred:
    """``infer(".")``, ``infer("@")``, ``infer("T")``: the graph's logics on given shapes."""
    want = {"pointwise": (1, None), "compose": (2, 2), "transpose": (1, 1)}[logic]
    n = len(shapes)
    if n < want[0] or (want[1] is not None and n > want[1]):
        raise ShapeError(f"the {logic} logic takes {want[0] if want[1] == want[0] else '2'}"
                         f" operand(s), got {n}")
    g = ShapeGraph()
    ts = [g.tensor(f"operand {i}", sh) for i, sh in enumerate(shapes)]
    out = {"pointwise": lambda: g.pointwise(*ts), "compose": lambda: g.compose(*ts),
           "transpose": lambda: g.transpose(*ts)}[logic]()
    g.solve()
    shape = g.shape(out)
    if result is not None and result != shape:
        raise ShapeError(f"the {logic} result has shape {shape}, not the given {result}")
    return g.projections(out)


def logic_projections(logic: str, result: Shape, operands: tuple[Shape, ...],
                      conditions: tuple[Condition, ...] = ()) -> Inferred:
    """The answer for a graph logic (``"."``, ``"@"``, ``"T"``) over solved shapes: the
    result may be any shape the logic relates to the operands (a gradient reduces a
    broadcast), its projections those of :func:`~tensig.core.projections.logic_layout`."""
    layout = logic_layout(logic, result, operands)
    return Inferred(spec=None, logic=LOGICS[logic], operands=operands, shape=result,
                    dims=MappingProxyType({}), rows=MappingProxyType({}),
                    ellipses=MappingProxyType({}), conditions=conditions, layout=layout,
                    iterators=_iterators(layout))


def _iterators(layout: tuple[tuple[AxisUse, ...], ...]) -> tuple[Iter, ...]:
    """Every iterator a layout reads, by id."""
    found: dict[int, Iter] = {}
    for uses in layout:
        for u in uses:
            ix = u.index
            parts: tuple[Any, ...] = (ix,) if isinstance(ix, Iter) else \
                (ix.over, ix.kernel) if isinstance(ix, AffineIndex) else \
                ix.parts if isinstance(ix, ConcatIndex | MergeIndex) else ()
            found.update((p.id, p) for p in parts if isinstance(p, Iter))
    return tuple(found[k] for k in sorted(found))


def _broadcast(S: Solver, rows: list[tuple[list[DimVar], str]], kind: Kind, op: str,
               graph: ShapeGraph) -> list[DimVar]:
    """Right-aligned broadcasting of ``rows`` (each with its tensor's name) into one row: a
    claim-free size 1 stretches, onto a labelled axis only when written to broadcast
    (:meth:`ShapeGraph.stretches`); axes that meet must agree in size and label
    (:func:`_misaligned`), except that a parameter's axis takes its partner's label."""
    n = max((len(r) for r, _ in rows), default=0)
    out: list[DimVar] = []
    for pos in range(n):
        at = [(r[len(r) - n + pos], who, len(r) - n + pos) for r, who in rows
              if len(r) - n + pos >= 0]
        firm = [a for a in at if not _claim_free(a[0])]
        labelled = next((v for v, _, _ in firm if v.root().basis is not None), None)
        if labelled is not None and len(firm) < len(at):
            one = next((v for v, _, _ in at if _claim_free(v) and not graph.stretches(v)), None)
            if one is not None:
                raise _no_stretch(S, one, labelled)
        if not firm:
            out.append(at[0][0])
            continue
        first = firm[0]
        for other in firm[1:]:
            ra, rb = first[0].root(), other[0].root()
            soft = ra.basis != rb.basis and (graph.takes_label(ra) or graph.takes_label(rb))
            if ra.value != rb.value or (ra.basis != rb.basis and not soft):
                raise _misaligned(S, op, kind, first, other)
            o = other[0].root().origin or Origin()
            o = replace(o, note="pointwise broadcasting: sizes must be equal unless one is a "
                                "claim-free 1")
            S.union(first[0], other[0], o, strict_basis=not soft)
        out.append(first[0].root())
    return out


def _misaligned(S: Solver, op: str, kind: Kind, a: tuple[DimVar, str, int],
                b: tuple[DimVar, str, int]) -> ShapeError:
    """Broadcasting aligned two axes of different sizes or labels (or a label and none): a
    wrong-axis bug, which labels catch even where equal sizes hide it.  Names both axes (each
    with its tensor and position) and ``op``."""
    def axis(x: tuple[DimVar, str, int]) -> str:
        r = x[0].root()
        return f"{kind} axis {x[2]} of {x[1]!r} ({r.basis + '=' if r.basis else ''}{r.value})"

    ra, rb = a[0].root(), b[0].root()
    aligned = f"in {op!r}: broadcasting aligns {axis(a)} with {axis(b)}"
    dropped = ("rows broadcast from the right, so an operand that lost an axis (a reduction "
               "that dropped it) meets its neighbour: keep the axis (a kept cell, '=> b, t|0') "
               "or reduce the one you meant")
    if ra.value != rb.value:
        name = ra.name or rb.name
        shown = [str(ra.value), str(rb.value)]
        reason = (f"size mismatch for {f'label {name!r}' if name else 'an axis'}: "
                  f"{shown[0]} vs {shown[1]} {aligned}")
        hint = f"{dropped}; only an unlabelled size-1 axis stretches"
    else:
        name = ra.basis or rb.basis
        shown = [r.basis or "no label" for r in (ra, rb)]
        reason = f"basis mismatch {aligned}, labelled {shown[0]} vs {shown[1]}"
        hint = dropped if ra.basis and rb.basis else \
            "an unlabelled axis never fuses with a labelled one; label both axes"
    return S.error(reason, ra.origin, label=name, sizes=(ra.value, rb.value), hint=hint,
                   origins=tuple(f"{x}: from {r.origin.describe() if r.origin else 'the spec'}"
                                 for x, r in zip(shown, (ra, rb), strict=True)))


def _no_stretch(S: Solver, one: DimVar, labelled: DimVar) -> ShapeError:
    """A written unlabelled 1 is no claim-free broadcast onto a labelled axis (OCANNL: the
    default basis does not fuse with a named one; only its ``bcast_if_1`` stretches)."""
    r = labelled.root()
    o = one.root().origin or Origin()
    return S.error(
        f"an unlabelled size-1 axis does not stretch onto the labelled axis {r.basis}={r.value}",
        o, label=r.basis, sizes=(1, r.value),
        origins=(f"1: from {o.describe()}",
                 f"{r.basis}={r.value}: from {r.origin.describe() if r.origin else 'the spec'}"),
        hint="wrap the size-1 operand in G.stretch(...) to broadcast it to its use (OCANNL's "
             "bcast_if_1), or give both axes the same label and size")
