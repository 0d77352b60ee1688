"""Remora's types on top of :mod:`tensig.core.dims`: array types, boxes, function types, instances.

A type is data: ``head`` is ``FnType("head", (arr("t", "1 + d, ..s.."),), arr("t", "..s.."))``,
the paper's ``[t (++ (Shp (+ 1 d)) s)] -> [t s]``.  Instantiating it against actual cell shapes
is a problem for the one solver (:mod:`tensig.core.solver`), on canonical forms (Remora's
decision procedure): see :class:`Matcher`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tensig.core.dims import Condition, Dim, dim
from tensig.core.errors import ShapeError
from tensig.core.search import settle
from tensig.core.shape_index import ShapeIndex, ShapeVar
from tensig.core.shapes import normalize_size
from tensig.core.solver import DimVar, LinearRel, Origin, Solver

__all__ = ["Arr", "FnType", "Fun", "Instance", "Sigma", "Static"]  # public as tensig.rank.*


@dataclass(frozen=True)
class Arr:
    """An array type ``[elem shape]``.

    >>> str(arr("t", "1 + d, ..s..")), str(arr("Int"))
    ('[t d + 1, ..s..]', '[Int]')
    """

    elem: str
    shape: ShapeIndex

    def __str__(self) -> str:
        inner = ", ".join(map(str, self.shape))
        return f"[{self.elem} {inner}]" if inner else f"[{self.elem}]"


ShapeLike = str | ShapeIndex | Sequence[Any]  # what ShapeIndex() reads


def arr(elem: str, shape: ShapeLike = "") -> Arr:
    return Arr(elem, ShapeIndex(shape))


@dataclass(frozen=True)
class Sigma:
    """A dependent sum ``Σ(l). [t l, 3]``: the type of a box.

    >>> str(Sigma(("l",), arr("t", "l, 3"))), str(Sigma(("s",), arr("Int", "..s..")))
    ('Σ(l). [t l, 3]', 'Σ(..s..). [Int ..s..]')
    """

    hidden: tuple[str, ...]
    body: Arr

    def __str__(self) -> str:
        shape_vars = {v.name for v in self.body.shape.shape_vars}
        names = [f"..{h}.." if h in shape_vars else h for h in self.hidden]
        return f"Σ({', '.join(names)}). {self.body}"


@dataclass(frozen=True)
class Fun:
    """A function-typed parameter (``reduce``'s operator); it is passed through, not lifted."""

    params: tuple[Arr, ...]
    result: Arr

    def __str__(self) -> str:
        return "(" + " ".join(str(p) for p in self.params) + f" -> {self.result})"


@dataclass(frozen=True)
class Static:
    """An index argument given as a Python value (Remora's ``i-app``): it binds ``name``.

    ``sort`` is ``"Dim"`` (an ``int``) or ``"Shape"`` (a tuple); ``convert`` maps the Python
    argument to the index (``take``'s ``n`` binds ``l = abs(n)``).
    """

    name: str
    sort: str = "Dim"
    convert: Callable[[Any], Any] | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{{..{self.name}..}}" if self.sort == "Shape" else f"{{{self.name}}}"

    def index(self, value: Any) -> Dim | ShapeIndex:
        v = self.convert(value) if self.convert is not None else value
        if self.sort == "Shape":
            return ShapeIndex(tuple(v))
        return v if isinstance(v, Dim) else Dim.const(v)


Param = Arr | Fun | Static
Derive = Callable[[Mapping[str, Dim], Mapping[str, ShapeIndex]], dict[str, ShapeIndex]]


def _vars_of(shape: ShapeIndex, dims: dict[str, None], shapes: dict[str, None],
             hidden: Sequence[str] = ()) -> None:
    for item in shape:
        if isinstance(item, ShapeVar):
            if item.name not in hidden:
                shapes.setdefault(item.name)
        else:
            for name in sorted(item.symbols):
                if name not in hidden:
                    dims.setdefault(name)


def index_names(shape: ShapeIndex) -> list[str]:
    """The shape variables of ``shape``, then its dimension variables, in order of appearance."""
    dims: dict[str, None] = {}
    shapes: dict[str, None] = {}
    _vars_of(shape, dims, shapes)
    return [*shapes, *dims]


@dataclass(frozen=True)
class FnType:
    """A Remora function type ``Π(vars). params -> result``.

    ``rank_of`` pairs ``(shape variable, dimension variable)`` whose length and value agree
    (``len(..s..) == l``): beyond Remora's index language, but decided at instantiation, where
    ranks are known; ``derive`` computes result-only shape variables (``transpose``'s reversed
    shape), described by ``note``.

    >>> print(FnType("head", (arr("t", "1 + d, ..s.."),), arr("t", "..s..")))
    head : Π(d, ..s..). [t d + 1, ..s..] -> [t ..s..]
    """

    name: str
    params: tuple[Param, ...]
    result: Arr | Sigma | None
    names: tuple[str, ...] = ()
    rank_of: tuple[tuple[str, str], ...] = ()
    derive: Derive | None = field(default=None, compare=False)
    note: str = ""
    hint: str | None = None

    def param_name(self, i: int) -> str:
        return self.names[i] if i < len(self.names) else f"arg{i}"

    def index_vars(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The Π-bound dimension and shape variables, in order of appearance."""
        dims: dict[str, None] = {}
        shapes: dict[str, None] = {}
        for p in self.params:
            if isinstance(p, Arr):
                _vars_of(p.shape, dims, shapes)
            elif isinstance(p, Fun):
                for q in (*p.params, p.result):
                    _vars_of(q.shape, dims, shapes)
            else:
                (shapes if p.sort == "Shape" else dims).setdefault(p.name)
        if isinstance(self.result, Arr):
            _vars_of(self.result.shape, dims, shapes)
        elif isinstance(self.result, Sigma):  # the visible indices of a box
            _vars_of(self.result.body.shape, dims, shapes, self.result.hidden)
        return tuple(dims), tuple(shapes)

    def __str__(self) -> str:
        dims, shapes = self.index_vars()
        names = [*dims, *(f"..{s}.." for s in shapes)]
        head = f"{self.name} : " + (f"Π({', '.join(names)}). " if names else "")
        params = " ".join(str(p) for p in self.params)
        result = "[?]" if self.result is None else str(self.result)
        text = f"{head}{params} -> {result}" if params else f"{head}{result}"
        return f"{text}  where {self.note}" if self.note else text


def _fmt_bindings(dims: Mapping[str, Dim], shapes: Mapping[str, ShapeIndex]) -> str:
    parts = [f"{k} = {v}" for k, v in dims.items()]
    parts += [f"..{k}.. = {v}" for k, v in shapes.items()]
    return ", ".join(parts)


@dataclass(frozen=True)
class Instance:
    """A function type instantiated at actual argument shapes.

    ``frame`` is the principal frame; ``frames[i]`` / ``cells[i]`` parameter ``i``'s (``None``
    for function and static parameters); ``result`` is ``frame ++ result_cell`` (an array of
    boxes is ``[Σ(...) frame]``).  ``dims`` / ``shapes`` bind the Π variables; ``conditions``
    must still hold for symbolic sizes.
    """

    name: str
    frame: ShapeIndex
    frames: tuple[ShapeIndex | None, ...]
    cells: tuple[Arr | None, ...]
    result_cell: Arr | Sigma | None
    dims: Mapping[str, Dim]
    shapes: Mapping[str, ShapeIndex]
    conditions: tuple[Condition, ...] = ()
    names: tuple[str, ...] = ()

    @property
    def result(self) -> Arr | None:
        cell = self.result_cell
        if cell is None:
            return None
        if isinstance(cell, Sigma):
            return Arr(str(cell), self.frame)
        return Arr(cell.elem, self.frame + cell.shape)

    def __str__(self) -> str:
        lines = [f"{self.name} at principal frame {self.frame}"]
        for i, (frame, cell) in enumerate(zip(self.frames, self.cells, strict=True)):
            if cell is not None:
                name = self.names[i] if i < len(self.names) else f"arg{i}"
                lines.append(f"  argument {i} ({name}): frame {frame}, cell {cell}")
        lines.append(f"  result cell {self.result_cell or '[?]'}, result {self.result or '[?]'}")
        if self.dims or self.shapes:
            lines.append(f"  with {_fmt_bindings(self.dims, self.shapes)}")
        return "\n".join(lines + [f"  provided {c}" for c in self.conditions])


# -- instantiation: match patterns against actual cell shapes on canonical forms -------------------


class Matcher:
    """Binds a type's Π variables from actual cell shapes by building a solver problem.

    Each Π dimension variable is a :class:`~tensig.core.solver.DimVar`, and each pattern
    dimension with an unknown a :class:`~tensig.core.solver.LinearRel` with its actual size: so
    ``1 + d == 5`` solves ``d = 4``, an equation with two unknowns waits until another argument
    binds one, and symbolic sizes leave conditions.  A shape variable takes the axes the fixed
    items leave (prefix subtraction).  A failure is worded as the index equality that fails.
    """

    def __init__(self, ftype: FnType, fname: str, taken: frozenset[str] = frozenset()):
        self.type = ftype
        self.fname = fname
        dims, shapes = ftype.index_vars()
        self.dim_vars = set(dims)
        self.dims: dict[str, Dim] = {}  # solved, in the order they were solved
        self.shapes: dict[str, ShapeIndex] = {}
        self.expanded: dict[str, list[str]] = {}
        self.rename = _renaming(dims + shapes, taken)
        self.inverse = {v: k for k, v in self.rename.items()}
        self.rank_of = {self._var(s): self._var(d) for s, d in ftype.rank_of}  # renamed
        self.solver = Solver()
        self.vars: dict[str, DimVar] = {}
        self.relations: list[tuple[LinearRel, str, ShapeIndex, ShapeIndex]] = []

    @property
    def conditions(self) -> list[Condition]:
        return list(self.solver.conditions)

    # -- helpers -------------------------------------------------------------------------------
    def pattern(self, shape: ShapeIndex, hidden: Sequence[str] = ()) -> ShapeIndex:
        """``shape`` with variables renamed away from the user's names, then substituted;
        ``hidden`` ones (a box's) neither.  Called per argument per call: the maps are copied
        only when something is hidden."""
        rename, dims, shapes = self.rename, self.dims, self.shapes
        if hidden:
            rename = {k: v for k, v in rename.items() if k not in hidden}
            dims = {k: v for k, v in dims.items() if k not in hidden}
            shapes = {k: v for k, v in shapes.items() if k not in hidden}
        if rename:
            shape = shape.subs({k: Dim.symbol(v) for k, v in rename.items()},
                               {k: ShapeIndex([ShapeVar(v)]) for k, v in rename.items()})
        return shape.subs(dims, shapes)

    def _var(self, name: str) -> str:
        return self.rename.get(name, name)

    def _is_dim_var(self, name: str) -> bool:
        return self.inverse.get(name, name) in self.dim_vars or any(
            name in names for names in self.expanded.values())

    def _dim_var(self, name: str) -> DimVar:
        return self.vars.get(name) or self.vars.setdefault(name, DimVar(name))

    def error(self, where: str, pattern: ShapeIndex, actual: ShapeIndex, why: str
              ) -> ShapeError:
        bound = _fmt_bindings(self.dims, self.shapes)
        reason = (f"{self.fname}: {where} is {actual}, which does not fit {pattern}: {why}"
                  + (f" (with {bound})" if bound else ""))
        return ShapeError(reason, shape=str(actual), sizes=(str(pattern), str(actual)),
                          hint=self.type.hint)

    # -- the solver ----------------------------------------------------------------------------
    def _set(self, name: str, value: Dim) -> None:
        self.solver.set_value(self._dim_var(name), normalize_size(value), _GIVEN)
        self._run()

    def _run(self) -> None:
        """Propagate, then record what the solver found (``dims`` keeps the order solved)."""
        self.solver.run()
        for name, var in self.vars.items():
            if name not in self.dims:
                value = var.root().value
                if value is not None:
                    self.dims[name] = dim(value)

    def _relate(self, p: Dim, target: DimVar, where: str, pattern: ShapeIndex,
                actual: ShapeIndex) -> None:
        def report(kind: str, facts: dict[str, Any]) -> Exception:
            q, size = rel.pending()[0], facts["target"]
            if kind == "no_solution":
                why = f"the index equality {q} == {size} has no solution in the naturals" + (
                    "" if facts["value"] is None else f" ({facts['name']} would be "
                                                      f"{facts['value']})")
            elif kind == "apart":
                other, its = facts["other"].pending()
                why = (f"the index equality {q} == {size} fails where {other} == {its} holds "
                       f"({q} is {facts['value']} there)")
            else:
                why = f"the index equality {facts['value']} == {facts['target']} does not hold"
            return self.error(where, pattern, actual, why)

        names = {s: self._dim_var(s) for s in sorted(p.symbols) if self._is_dim_var(s)}
        rel = LinearRel(target, p, names, _GIVEN, report)
        self.relations.append((rel, where, pattern, actual))
        self.solver.add(rel)

    # -- matching ------------------------------------------------------------------------------
    def bind_static(self, p: Static, value: Any) -> None:
        index = p.index(value)
        name = self._var(p.name)
        if isinstance(index, ShapeIndex):
            self.shapes[name] = index
        else:
            self._set(name, index)

    def match(self, where: str, pattern: ShapeIndex, actual: ShapeIndex) -> bool:
        """Match one cell; ``False`` when it must wait for other arguments (two shape vars)."""
        p = self._expand_ranked(self.pattern(pattern))
        svs = p.shape_vars
        if len(svs) > 1:
            return False
        items, sizes, n = p.items, actual.dims, len(actual)  # an argument's cell: no shape vars
        if not svs and len(items) != n:
            raise self.error(where, pattern, actual, f"its rank is {n}, the type's is {len(items)}")
        if svs and n < len(items) - 1:
            raise self.error(where, pattern, actual,
                             f"its rank is {n}, the type needs at least {len(items) - 1}")
        k = next((j for j, x in enumerate(items) if isinstance(x, ShapeVar)), None)
        if k is not None:  # prefix subtraction: the shape variable takes what is left
            tail = n - (len(items) - 1 - k)
            self._bind_shape(svs[0].name, actual[k:tail], where, pattern, actual)
            sizes = sizes[:k] + sizes[tail:]
        for item, size in zip(p.dims, sizes, strict=True):
            if any(self._is_dim_var(s) for s in item.symbols):
                self._relate(item, DimVar(None, normalize_size(size)), where, pattern, actual)
            elif item != size:  # no unknown: nothing to solve, the sizes must be equal
                raise self.error(where, pattern, actual,
                                 f"the index equality {item} == {dim(size)} does not hold")
        self._run()
        return True

    def _bind_shape(self, name: str, value: ShapeIndex, where: str, pattern: ShapeIndex,
                    actual: ShapeIndex) -> None:
        self.shapes[name] = value
        dim_name = self.rank_of.get(name)
        if dim_name is None:
            return
        length = Dim.const(len(value.items))
        known = self._dim_var(dim_name).root().value
        if known is None:
            self._set(dim_name, length)
        elif known != length:
            raise self.error(where, pattern, actual,
                             f"the index equality {known} == {length} (the length of "
                             f"..{name}..) does not hold")

    def _expand_ranked(self, p: ShapeIndex) -> ShapeIndex:
        """Shape variables of known length (``len(..s..) == l``) become that many dimensions."""
        for sv in p.shape_vars:
            dim_name = self.rank_of.get(sv.name)
            value = self.dims.get(dim_name) if dim_name else None
            if value is None or value.constant is None:
                continue
            fresh = [f"{sv.name}[{j}]" for j in range(value.constant)]
            self.expanded[sv.name] = fresh
            p = p.subs({}, {sv.name: [Dim.symbol(f) for f in fresh]})
        return p

    def finish(self, pending: list[tuple[str, ShapeIndex, ShapeIndex]]) -> None:
        """Match ``(where, pattern, actual)`` cells in turn, retrying those that wait for other
        arguments; whatever still cannot be matched fails."""
        while pending:
            left = [item for item in pending if not self.match(*item)]
            if len(left) == len(pending):
                break
            pending = left
        for where, pattern, actual in pending:
            raise self.error(where, pattern, actual, "its shape variables cannot be split")
        settle(self.solver)  # equalities nonlinear in one unknown (``n*n``, ``n // 2 + 1``)
        self._run()
        for rel, where, pattern, actual in self.relations:
            if not rel.done:
                p, c = rel.pending()
                raise self.error(where, pattern, actual,
                                 f"cannot solve the index equality {p} == {c}")
        self.relations.clear()
        for name, fresh in self.expanded.items():
            self.shapes[name] = ShapeIndex([self.dims.pop(f) for f in fresh])
            for f in fresh:
                del self.vars[f]
        self.expanded.clear()

    # -- results -------------------------------------------------------------------------------
    def result(self) -> Arr | Sigma | None:
        r = self.type.result
        if self.type.derive is not None:
            derived = self.type.derive(self.public(self.dims), self.public(self.shapes))
            self.shapes.update({self._var(k): v for k, v in derived.items()})
        if isinstance(r, Arr):
            return Arr(r.elem, self.pattern(r.shape))
        if isinstance(r, Sigma):
            return Sigma(r.hidden, Arr(r.body.elem, self.pattern(r.body.shape, r.hidden)))
        return None

    def public(self, bound: Mapping[str, Any]) -> dict[str, Any]:
        """``bound`` (``dims`` or ``shapes``) under the type's own variable names."""
        return {self.inverse.get(k, k): v for k, v in bound.items()}


_GIVEN = Origin(note="a Remora type's instantiation")


def _renaming(names: Sequence[str], taken: frozenset[str]) -> dict[str, str]:
    """Fresh names (primed) for type variables that collide with the user's size names."""
    out: dict[str, str] = {}
    for name in names:
        if name in taken:
            new = name + "'"
            while new in taken or new in names:
                new += "'"
            out[name] = new
    return out


def instantiate(ftype: FnType, fname: str, cells: Sequence[ShapeIndex | None],
                statics: Mapping[int, Any]) -> Matcher:
    """The matcher of every array parameter's pattern against its cell (``cells[i]``), given
    the values of the :class:`Static` parameters.

    >>> m = instantiate(FnType("head", (arr("t", "1 + d, ..s.."),), arr("t", "..s..")), "head",
    ...                 [ShapeIndex([5, 6, 7])], {})
    >>> m.dims, m.shapes, str(m.result())
    ({'d': Dim('4')}, {'s': ShapeIndex('[6, 7]')}, '[t 6, 7]')
    """
    taken = frozenset[str]().union(*(d.symbols for c in cells if c is not None for d in c.dims))
    m = Matcher(ftype, fname, taken)
    for i, value in statics.items():
        static = ftype.params[i]
        assert isinstance(static, Static), f"argument {i} of {fname} is not an index argument"
        m.bind_static(static, value)
    m.finish([(f"the cell of argument {i} ({ftype.param_name(i)})", p.shape, cell)
              for i, (p, cell) in enumerate(zip(ftype.params, cells, strict=True))
              if isinstance(p, Arr) and cell is not None])
    return m
