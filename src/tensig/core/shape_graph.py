"""Graph-wide inference: many tensors related by many specs and by the graph's logics
(pointwise broadcasting, compose, transpose), solved together on one solver
(:class:`ShapeGraph`, the engine the model layer's graphs run on), and the logics' projections
(:func:`logic_projections`).  ``infer(".")``, ``infer("@")`` and ``infer("T")`` run the logics
on given shapes through a small graph (:func:`infer_logic`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from tensig.core.dims import Condition
from tensig.core.errors import ShapeError
from tensig.core.notation import Kind, parse
from tensig.core.projections import Iter, logic_layout
from tensig.core.shapes import MEMORY_ORDER, Shape, Size, as_shape, normalize_size
from tensig.core.solver import AffineRel, DimVar, LinearRel, Origin, RowNode, Solver, SRow
from tensig.core.spec_instance import (
    LOGICS,
    Inferred,
    SpecInstance,
    close_placements,
    count_text,
    freeze_params,
    solved,
)

__all__ = ["ShapeGraph", "TensorNode", "infer_logic", "logic_projections"]


@dataclass(eq=False, slots=True)
class TensorNode:
    """A tensor in a :class:`ShapeGraph`: a name and three solver rows (possibly unknown).  A
    *parameter* has no batch axes, and its unknown rows close to what its uses need."""

    name: str
    rows: dict[Kind, SRow] = field(repr=False)
    param: bool = field(default=False, repr=False)


class ShapeGraph:
    """Shapes of many tensors related by many specs, solved together: a tensor's shape may be
    unknown when it is created, and its uses constrain it, in any order.

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
        self._apps: list[SpecInstance] = []
        self._broadcasts: list[_Broadcast] = []
        #: per result node id: (spec instance, operands, patterns) or (logic, operands), what
        #: its labels and projections are read from
        self._made: dict[int, tuple[Any, ...]] = {}
        self._projections: dict[int, Inferred] = {}  # answered since the last solve
        #: size-1 axes written to broadcast (OCANNL's ``bcast_if_1``: a number's axis, a kept
        #: placement ``=> ..., 0``): they stretch onto a labelled axis, a data array's 1 does not
        self._stretch: list[DimVar] = []
        self._placed: list[DimVar] = []
        #: a parameter's given axes: no label of their own, each takes the one it meets
        self._sized: list[DimVar] = []
        #: parameter rows the last solve read as no axes, unbound until :meth:`commit`
        self._open: dict[int, RowNode] = {}

    def tensor(self, name: str, shape: Any = None, *, param: bool = False) -> TensorNode:
        """A tensor with a known ``shape``, or an unknown one (``None``); a parameter
        (``param=True``) as :meth:`parameter` makes it."""
        if shape is None:
            return self.parameter(name) if param else self._new(name, dict.fromkeys(MEMORY_ORDER))
        sh = as_shape(shape, where=name)
        if param and sh.batch:
            raise ShapeError(f"parameter {name!r} cannot have batch axes (shape {sh})",
                             hint="batch axes belong to data; give the parameter output and "
                                  "input axes only")
        where = Origin(note=f"tensor {name!r} (shape {sh})")
        return self._new(name, SpecInstance.given(sh, where), param)

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
        """A parameter (no batch axes) whose output and/or input axes may be given, as OCANNL's
        ``{ b; o = [8] }``; the other rows close to what its uses need."""
        rows: dict[Kind, SRow | None] = {"batch": SRow(), "output": None, "input": None}
        given_rows: tuple[tuple[Kind, Any], ...] = (("output", output), ("input", input))
        for kind, sizes in given_rows:
            if sizes is not None:
                sh = Shape(output=sizes)
                given = SpecInstance.given(sh, Origin(note=f"parameter {name!r} {kind} {sh}"))
                rows[kind] = given["output"]
                self._sized.extend(given["output"].axes())
        return self._new(name, rows, param=True)

    def pointwise(self, *operands: TensorNode, name: str | None = None) -> TensorNode:
        """Pointwise broadcasting (OCANNL ``+ - *. /.``): each operand broadcasts into the
        result, row by row; only a claim-free size-1 axis stretches."""
        if not operands:
            raise ValueError("pointwise needs at least one operand")
        node = self._new(name or "pointwise", dict.fromkeys(MEMORY_ORDER), made=(".", operands))
        self._broadcasts += [_Broadcast(self, node, operands, kind) for kind in MEMORY_ORDER]
        return node

    def compose(self, a: TensorNode, b: TensorNode, c: TensorNode | None = None,
                name: str | None = None) -> TensorNode:
        """Compose (OCANNL ``*``, Python ``@``): ``a``'s input row contracts with ``b``'s output
        row, the batch rows broadcast, the result is ``b``'s input to ``a``'s output.  A third
        operand (OCANNL's ternary compose, as in ``fma``) broadcasts into the result's rows."""
        o = Origin(kind="input",
                   note=f"compose: {a.name!r}'s input row contracts with {b.name!r}'s output row")
        ra, rb = (self.solver.resolve(a.rows["input"]), self.solver.resolve(b.rows["output"]))
        if not self._contract_stretched(ra, rb, o):
            self.solver.unify_rows(ra, rb, o, strict_basis=True,
                                   describe=(f"{a.name!r}'s input row",
                                             f"{b.name!r}'s output row"))
        node = self._new(name or "compose", {"batch": None, "input": b.rows["input"],
                                             "output": a.rows["output"]},
                         made=("@", (a, b) if c is None else (a, b, c)))
        self._broadcasts.append(_Broadcast(self, node, (a, b), "batch"))
        if c is not None:
            self._broadcasts += [_Broadcast(self, node, (node, c), kind) for kind in MEMORY_ORDER]
        return node

    def transpose(self, a: TensorNode, name: str | None = None) -> TensorNode:
        """Swap the input and output rows (OCANNL ``~logic:"T"``)."""
        return self._new(name or "transpose", {"batch": a.rows["batch"], "input": a.rows["output"],
                                               "output": a.rows["input"]}, made=("T", (a,)))

    def _new(self, name: str, rows: Mapping[Kind, SRow | None], param: bool = False,
             made: tuple[Any, ...] | None = None) -> TensorNode:
        """A tensor of ``rows``, a ``None`` row unknown (a parameter's closes to its uses);
        ``made``: the operation that made it (see ``_made``)."""
        full = {k: r if r is not None else SRow((), RowNode(f"{name}.{k}", closes=param), ())
                for k, r in rows.items()}
        node = TensorNode(name, full, param)
        self.tensors.append(node)
        if made is not None:
            self._made[id(node)] = made
        return node

    def apply(self, spec: str, *operands: TensorNode, name: str | None = None,
              op: str | None = None, params: Mapping[str, int] | None = None,
              use_padding: bool | None = None) -> TensorNode:
        """The result of ``spec`` applied to ``operands`` (a new tensor)."""
        inst = SpecInstance(parse(spec), op, dict(freeze_params(params)), use_padding, self.solver)
        patterns = inst.instantiate([t.rows for t in operands],
                                    [f"tensor {t.name!r}" for t in operands])
        self._apps.append(inst)
        return self._new(name or f"{spec!r}#{len(self._apps)}", patterns[-1],
                         made=(inst, tuple(operands), patterns))

    def made(self, node: TensorNode) -> bool:
        """Whether an operation of this graph made ``node`` (so it has projections)."""
        return id(node) in self._made

    def projections(self, node: TensorNode) -> Inferred:
        """The projections (:attr:`Inferred.layout`) of the operation that made ``node``, read
        from the last :meth:`solve`: compiled code lowers these, nothing is inferred again."""
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
            answer = made[0].package(list(made[2]), shapes)
        self._projections[id(node)] = answer
        return answer

    # -- constraints on captured labels (OCANNL's Shape.set_dim / set_equal / set_scale) ----
    def label(self, t: TensorNode, name: str) -> DimVar:
        """The size variable of label ``name`` in the spec that produced ``t`` (OCANNL's
        ``capture_dims``), for :meth:`set_dim`, :meth:`set_equal`, :meth:`set_scale`."""
        inst = self._made.get(id(t), (None,))[0]
        if not isinstance(inst, SpecInstance):
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
            o = Origin(kind=k, note=f"{a.name!r} = {b.name!r}")
            self.solver.unify_rows(a.rows[k], b.rows[k], o,
                                   describe=(f"{a.name!r}", f"{b.name!r}"))

    def solve(self) -> None:
        """Propagate; close what nothing determines; every shape must then be known."""
        S = self.solver
        self._projections.clear()
        S.run()
        # A placement axis nothing else sizes has index + 1 cells; a pointwise use broadcasts
        # it but cannot widen it (a result closes down to its arguments), so this comes first.
        self._placed = [v for inst in self._apps for v in inst.result_fixed]
        close_placements(S, self._placed)
        S.run()
        S.settle_bases()
        self._settle_broadcasts()
        S.run()
        S.settle_bases()
        self._open = {}
        # a spec's operand that is itself the parameter: a row a compose hands through
        # (``w`` of ``w @ x``) is w's hidden row even where a spec later sums the result
        spec_rows = {S.resolve(t.rows[k]).var for made in self._made.values()
                     if isinstance(made[0], SpecInstance) for t in made[1] if t.param
                     for k in MEMORY_ORDER}
        for t in self.tensors:
            for k in MEMORY_ORDER:
                r = S.resolve(t.rows[k])
                # OCANNL's closing rule: an open row (a parameter's only a spec reaches, a
                # stretched value's batch row) has no further axes (an omitted kind is "..."
                # here, no axes there); a parameter's row no spec reaches (w @ x, w's output
                # free) is OCANNL's "forgot to specify the hidden dimension(s)".
                if r.var is not None and r.var.closes and k != "batch":
                    if r.var not in spec_rows:
                        what = f"parameter {t.name!r}" if t.param else \
                            f"shape of {t.name!r} (it shares a parameter's row)"
                        raise ShapeError(
                            f"under-determined {what}: no use determines its {k} axes",
                            label=t.name,
                            hint=f"give the parameter its {k} axes explicitly ({k}=[...]), "
                                 "the way OCANNL's { w; o = [hid] } does")
                    # unbound: no axes now, but a later use may still size it
                    self._open[id(r.var)] = r.var
                elif r.var is not None:
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
                            hint=(f"capture {label!r} and set its size (capture=[{label!r}], "
                                  f"then d[{label!r}].set_dim(n)), " if label else "")
                            + f"give {t.name!r} a shape, or use it where that axis meets a "
                              "known size")
        for t in self.tensors:
            made = self._made.get(id(t))
            if made is not None and made[0] == "@":
                self._check_contracted_labels(t.name, made[1][1])

    def commit(self) -> None:
        """Bind the rows the last :meth:`solve` read as no axes: arrays are about to be made at
        these shapes (a model compiled), so a later use can no longer size them."""
        for node in self._open.values():
            if node.value is None:
                self.solver.bind_row(node, SRow(), Origin(note="no axes: a model was built "
                                                                "with this row closed"))
        self._open = {}

    def _check_contracted_labels(self, op: str, b: TensorNode) -> None:
        """``@`` contracts a labelled axis only alone: contracted with others (``b | t, d``:
        tokens on the output row, where the convention puts them on the batch row) it makes a
        dense layer over all their cells, which nothing else would flag.  An error, not a
        warning: labels are opt-in claims, the model trains without complaint when this goes
        wrong, and the one legitimate use (``b | h, w`` image axes) is an einsum that says so."""
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

    def _contract_stretched(self, a: SRow, b: SRow, o: Origin) -> bool:
        """Compose's closed rows of equal rank: a parameter's axis takes the data's label it
        meets; where all sizes are known and a claim-free 1 meets a wider axis, OCANNL's
        broadcast inequality stretches the 1 (``"3->4" @ "1"`` is 4).  False (unify exactly)
        when no axis stretches or the rows are not known yet."""
        if a.var is not None or b.var is not None or len(a.right) != len(b.right):
            return False
        pairs = list(zip(a.right, b.right, strict=True))
        for x, y in pairs:
            if x.root().basis != y.root().basis and (self.takes_label(x) or self.takes_label(y)):
                self.solver.union(x, y, o)
        if any(v.root().value is None for p in pairs for v in p):
            return False
        stretched = [(x, y) for x, y in pairs if _claim_free(x) != _claim_free(y)]
        if not stretched:
            return False
        for x, y in pairs:
            if (x, y) not in stretched:
                self.solver.union(x, y, o, strict_basis=True)
        return True

    def _settle_broadcasts(self) -> None:
        """Resolve pointwise broadcasts as their operands become known (to a fixpoint)."""
        pending = [b for b in self._broadcasts if not b.done]
        while pending:
            progress = False
            for b in pending:
                progress |= b.settle()
                self.solver.run()
            # Last resort, OCANNL's closing rule: rows that only parameters reach, with no
            # size anywhere, have no axes (the first that can).
            if not progress and not any(b.close_empty() for b in pending if not b.done):
                stuck = next(b for b in pending if not b.done)
                names = ", ".join(sorted({t.name for r, t in stuck.operands
                                          if not _full(self.solver.resolve(r))}))
                raise ShapeError(
                    f"cannot infer the {stuck.kind} axes of {names}: a pointwise operation "
                    "needs them, and nothing else determines them",
                    hint="give a shape to one of these tensors, or use them where the shape is "
                         "known (a parameter takes its shape from its uses)")
            self.solver.run()
            pending = [b for b in pending if not b.done]

    def shape(self, t: TensorNode) -> Shape:
        """The solved shape of ``t`` (after :meth:`solve`)."""
        return Shape.from_rows({
            k: [(solved(v), v.root().basis) for v in self.solver.resolve(t.rows[k]).axes()]
            for k in MEMORY_ORDER})


# -- broadcasting logics ---------------------------------------------------------------------


class _Broadcast:
    """One row of a pointwise operation: waits for its non-parameter operands' rows, then
    broadcasts them; unknown parameter rows take the broadcast shape."""

    def __init__(self, graph: ShapeGraph, node: TensorNode, operands: tuple[TensorNode, ...],
                 kind: Kind):
        self.graph, self.result, self.kind, self.name = graph, node.rows[kind], kind, node.name
        self.operands = [(t.rows[kind], t) for t in operands]
        self.done = False

    def close_empty(self) -> bool:
        """Every operand row is an open parameter row: they all have no axes."""
        S = self.graph.solver
        rows = [S.resolve(r) for r, _ in self.operands]
        if not all(r.var is not None and r.var.closes and not r.axes() for r in rows):
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
        o = Origin(kind=self.kind, note="no use gives these axes a size")
        for r in [*rows, self.result]:
            S.unify_rows(r, SRow(), o)
        self.done = True
        return True

    def settle(self) -> bool:
        """Broadcast the fully known rows into one row ``R``, if possible (returns whether it
        did): a closed row with sizes not yet determined takes ``R``'s sizes, a parameter's
        open row ``R`` itself; any other open row must first be determined elsewhere."""
        S = self.graph.solver
        rows = [(S.resolve(r), t) for r, t in self.operands]
        known = [(list(r.right), t.name) for r, t in rows if _full(r)]
        if not known or any(r.var is not None and not r.var.closes for r, _ in rows):
            return False
        out = _broadcast(S, known, self.kind, self.name, self.graph)
        partial = [r for r, _ in rows if r.var is None and not _full(r)]
        open_rows = [r for r, _ in rows if r.var is not None]
        if any(len(r.right) > len(out) for r in partial):
            return False
        o = Origin(kind=self.kind, note="determined by a pointwise use")
        for r in partial:
            for v, target in zip(r.right, out[len(out) - len(r.right):], strict=True):
                if v.root().value != 1:  # a size not yet known takes the target's label too
                    S.union(v, target, o, strict_basis=v.root().value is not None)
        closed = SRow((), None, tuple(out))
        for r in open_rows:  # parameters close to what this use needs
            S.unify_rows(r, closed, o, describe=("a parameter's row", "the broadcast"))
        S.unify_rows(self.result, closed, o, describe=("the result", "the broadcast"))
        self.done = True
        return True


def _full(r: SRow) -> bool:
    """A closed row whose sizes are all known."""
    return r.var is None and all(v.root().value is not None for v in r.right)


def _claim_free(v: DimVar) -> bool:
    return v.root().value == 1 and v.root().basis is None


def infer_logic(logic: str, shapes: tuple[Shape, ...], result: Shape | None) -> Inferred:
    """``infer(".")``, ``infer("@")``, ``infer("T")``: the graph's logics on given shapes."""
    lo, hi = {"pointwise": (1, None), "compose": (2, 2), "transpose": (1, 1)}[logic]
    if len(shapes) < lo or (hi is not None and len(shapes) > hi):
        raise ShapeError(f"the {logic} logic takes {count_text(lo, hi)} operand(s), got "
                         f"{len(shapes)}")
    g = ShapeGraph()
    ts = [g.tensor(f"operand {i}", sh) for i, sh in enumerate(shapes)]
    out = g.pointwise(*ts) if logic == "pointwise" else \
        g.compose(ts[0], ts[1]) if logic == "compose" else g.transpose(ts[0])
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
    iterators = {u.index for uses in layout for u in uses if isinstance(u.index, Iter)}
    return Inferred(spec=None, logic=LOGICS[logic], operands=operands, shape=result,
                    dims=MappingProxyType({}), rows=MappingProxyType({}),
                    ellipses=MappingProxyType({}), conditions=conditions, layout=layout,
                    iterators=tuple(sorted(iterators, key=lambda it: it.id)))


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
            o = replace(rb.origin or Origin(), note="pointwise broadcasting: sizes must be "
                                                     "equal unless one is a claim-free 1")
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
        return S.mismatch(ra.name or rb.name, ra.value, rb.value, ra.origin,
                          (ra.came_from(ra.value), rb.came_from(rb.value)), f" {aligned}",
                          f"{dropped}; only an unlabelled size-1 axis stretches")
    shown = [r.basis or "no label" for r in (ra, rb)]
    return S.error(f"basis mismatch {aligned}, labelled {shown[0]} vs {shown[1]}", ra.origin,
                   label=ra.basis or rb.basis, sizes=(ra.value, rb.value),
                   origins=(ra.came_from(shown[0]), rb.came_from(shown[1])),
                   hint=dropped if ra.basis and rb.basis else
                   "an unlabelled axis never fuses with a labelled one; label both axes")


def _no_stretch(S: Solver, one: DimVar, labelled: DimVar) -> ShapeError:
    """A written unlabelled 1 is no claim-free broadcast onto a labelled axis (OCANNL: the
    default basis does not fuse with a named one; only its ``bcast_if_1`` stretches)."""
    r = labelled.root()
    o = one.root().origin or Origin()
    return S.error(
        f"an unlabelled size-1 axis does not stretch onto the labelled axis {r.basis}={r.value}",
        o, label=r.basis, sizes=(1, r.value),
        origins=(f"1: from {o.describe()}", r.came_from(f"{r.basis}={r.value}")),
        hint="wrap the size-1 operand in G.stretch(...) to broadcast it to its use (OCANNL's "
             "bcast_if_1), or give both axes the same label and size")
