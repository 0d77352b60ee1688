"""Lifting: Remora's function application on real arrays.  A call is checked once per argument
signature (:mod:`tensig.rank._plans`), then runs the fastest path that fits (:mod:`_cells`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensig.backends import is_array
from tensig.core.dims import Dim
from tensig.core.errors import ShapeError
from tensig.core.shape_index import ShapeIndex, ShapeVar
from tensig.rank._boxes import Box, _elem_name, _no_calls, _objects
from tensig.rank._cells import (
    Plan,
    Rank,
    _check_rank_value,
    _concrete_rank,
    _is_object,
    _per_function,
    _who,
    principal_frame,
)
from tensig.rank._plans import _typeof_call, plan, signature
from tensig.rank._signature import parse_cells
from tensig.rank._types import Arr, FnType, Fun, Instance, ShapeLike, Static

__all__ = ["Lifted", "Overloaded", "apply", "as_lifted", "check", "lift", "principal_frame",
           "rerank", "typeof"]

# -- types of lifted user functions ----------------------------------------------------------------

def _ranks_pattern(i: int, r: Rank) -> ShapeIndex:
    if r is None or r < 0:
        return ShapeIndex([ShapeVar(f"c{i}")])
    letter = chr(ord("a") + i) if i < 26 else f"x{i}_"
    return ShapeIndex([Dim.symbol(f"{letter}{j}") for j in range(r)])


def _ranks_type(name: str, ranks: Sequence[Rank], result: ShapeIndex | None) -> FnType:
    params = tuple(Arr("t", _ranks_pattern(i, r)) for i, r in enumerate(ranks))
    return FnType(name, params, None if result is None else Arr("t", result),
                  names=tuple(f"arg{i}" for i in range(len(ranks))))


def _unconstrained(ftype: FnType) -> bool:
    """Whether any cells fit: every parameter item is a distinct bare variable, no parameter
    needs a least rank (a shape variable beside dims: ``[d, ..s..]`` refuses a scalar) and the
    result is unknown or constant (then a call needs no instantiation)."""
    seen: set[object] = set()
    for p in ftype.params:
        if not isinstance(p, Arr) or (p.shape.shape_vars and len(list(p.shape)) > 1):
            return False
        for item in p.shape:
            bare = isinstance(item, ShapeVar) or (
                len(item.symbols) == 1 and item == Dim.symbol(next(iter(item.symbols))))
            if not bare or item in seen:
                return False
            seen.add(item)
    result = ftype.result
    return result is None or (isinstance(result, Arr) and result.shape.is_concrete)


def _spread_ranks(name: str, ranks: Sequence[Rank], names: Sequence[str]) -> Sequence[Rank]:
    """Positional ranks for the array parameters ``names``: one rank applies to all of them."""
    if len(ranks) == 1 and len(names) > 1:
        ranks = tuple(ranks) * len(names)
    if len(ranks) > len(names):
        raise TypeError(f"{name}: {len(ranks)} ranks for {len(names)} array parameters "
                        f"({', '.join(names)})")
    return ranks


def _fits(p: Arr, r: Rank) -> bool:
    n_dims = len(p.shape.dims)
    if not p.shape.shape_vars:
        return r == n_dims
    return r is None or r < 0 or r >= n_dims  # a complementary rank is checked per call


# -- Lifted ----------------------------------------------------------------------------------------


class Lifted:
    """A function lifted over frames: call it on arrays of any frame.

    Made by :func:`lift` (user functions) or defined by :mod:`tensig.rank`'s primitives.
    ``type`` is its Remora type (:class:`FnType`), ``ranks`` the cell rank of each array
    parameter (``None``: the whole argument).
    """

    def __init__(self, fn: Callable[..., Any], ftype: FnType, ranks: Sequence[Rank] | None = None,
                 *, ufunc: np.ufunc | None = None, inner: Lifted | None = None,
                 batched: Callable[..., Any] | None = None, boxed: bool = False,
                 dtype: Any = None, retypable: bool = False, doc: str | None = None):
        self.fn = fn
        self.type = ftype
        self.name = ftype.name
        self.ufunc = ufunc
        self.batched = batched
        self.boxed = boxed
        self.dtype = dtype
        self.retypable = retypable
        self.arrays = tuple(i for i, p in enumerate(ftype.params) if isinstance(p, Arr))
        self.statics = tuple(i for i, p in enumerate(ftype.params) if isinstance(p, Static))
        self.cell_types = tuple(p for p in ftype.params if isinstance(p, Arr))  # per array
        if ranks is None:
            ranks = [None if p.shape.shape_vars else len(p.shape) for p in self.cell_types]
        self.ranks: tuple[Rank, ...] = tuple(_check_rank_value(self.name, r) for r in ranks)
        if len(self.ranks) != len(self.arrays):
            raise TypeError(f"{self.name}: {len(self.ranks)} cell ranks for "
                            f"{len(self.arrays)} array parameters")
        self._trivial = _unconstrained(ftype)
        self._plain = len(self.arrays) == len(ftype.params)  # array parameters only
        self._plans: dict[Any, Plan] = {}  # per argument signature: see _plans
        self._who = tuple(_who(self, i) for i in self.arrays)  # for frame errors, per call
        self.inner = inner  # the function an eta-expansion (a reranking) calls
        self._funs = tuple(i for i, p in enumerate(ftype.params) if isinstance(p, Fun))
        if doc is not None:
            self.__doc__ = doc

    # -- calling -------------------------------------------------------------------------------
    def __call__(self, *args: Any) -> Any:
        try:  # a call with a signature seen before: a key, a lookup and the plan's path
            known = self._plans[signature(self, args)]
        except (KeyError, TypeError, AttributeError):  # new, to convert, unhashable: see plan
            for i in self._funs:
                if i < len(args) and _is_function_array(args[i]):
                    return _over_functions(self, args, i)
            known, converted = plan(self, args)
            return known.run(known, converted)
        return known.run(known, args)

    def rerank(self, *ranks: Rank, **named: Rank) -> Lifted:
        """The same function at other cell ranks (positional, one per array parameter, or by
        parameter name; a single positional rank applies to every array parameter).

        >>> sum_rows = lift(np.sum, ranks=(1,))
        >>> sum_rows(np.arange(6).reshape(2, 3)), sum_rows.rerank(2)(np.ones((2, 2, 2)))
        (array([ 3, 12]), array([[2., 2.],
               [2., 2.]]))
        """
        new = self._ranks_from(ranks, named)
        relative = any(r is not None and r < 0 for r in self.ranks)  # splits again in a cell
        if new == self.ranks and not relative:
            return self
        if relative or not all(r is None or n == r for r, n in zip(self.ranks, new, strict=True)):
            return _eta_expand(self, new)
        return self._pinned(new)

    def _pinned(self, new: tuple[Rank, ...]) -> Lifted:
        """The function itself at ranks ``new`` (no eta-expansion): a whole or complementary
        rank made the cell rank it resolves to in a given cell."""
        misfit = next(((i, p, r) for i, p, r in zip(self.arrays, self.cell_types, new,
                                                    strict=True) if not _fits(p, r)), None)
        if misfit is not None and not self.retypable:
            raise _rank_error(self, *misfit)
        ftype = self.type if misfit is None else _ranks_type(self.name, new, None)  # retyped
        return Lifted(self.fn, ftype, new, ufunc=self.ufunc, batched=self.batched,
                      boxed=self.boxed, dtype=self.dtype, retypable=self.retypable)

    def _ranks_from(self, ranks: Sequence[Rank], named: dict[str, Rank]) -> tuple[Rank, ...]:
        names = [self.type.param_name(i) for i in self.arrays]
        new = list(self.ranks)
        for k, r in enumerate(_spread_ranks(self.name, ranks, names)):
            new[k] = _check_rank_value(self.name, r)
        for key, r in named.items():
            if key not in names:
                raise TypeError(f"{self.name} has no array parameter {key!r} "
                                f"(it has {', '.join(names)})")
            new[names.index(key)] = _check_rank_value(self.name, r)
        return tuple(new)

    def typeof(self, *args: Any) -> Instance:
        """The type instantiated at these arguments (arrays, or shapes as tuples/ShapeIndex)."""
        return _typeof_call(self, args)

    def choose(self, args: Sequence[Any]) -> Lifted:
        return self

    def __repr__(self) -> str:
        ranks = ", ".join("all" if r is None else str(r) for r in self.ranks)
        return f"<lifted {self.type}; cell ranks ({ranks})>"


def _rank_error(lf: Lifted, i: int, p: Arr, r: Rank, hint: str | None = None) -> ShapeError:
    return ShapeError(f"{lf.name}: {_who(lf, i)} has cell type {p}, which cannot have cell "
                      f"rank {r}", sizes=(str(p), r), hint=hint)


def _eta_expand(inner: Lifted, new: tuple[Rank, ...]) -> Lifted:
    """``inner`` at cells of ranks ``new``: Remora's ``(rerank (r ...) f)`` is
    ``(λ ((x r) ...) (f x ...))``, so ``inner`` still lifts at its own ranks inside each cell.
    A lifted function accepts extra leading frame axes anyway, so this is one call of
    ``inner`` on the arguments broadcast to the outer principal frame, not a loop over cells.
    """
    params = list(inner.type.params)
    for i, p, r, n in zip(inner.arrays, inner.cell_types, inner.ranks, new, strict=True):
        params[i] = Arr(p.elem, _ranks_pattern(i, n))
        if n is None or n < 0 or (r is not None and r < 0):
            continue  # known only per call
        if (not _fits(p, n)) if r is None else n < r:
            raise _rank_error(inner, i, p, n, hint=f"a cell of rank {n} is smaller than the "
                              f"cells {inner.name} takes; give a rank of at least "
                              f"{len(p.shape.dims) if r is None else r}")
    ftype = FnType(inner.name, tuple(params), None, names=inner.type.names)

    whole = [k for k, r in enumerate(inner.ranks) if r is None or r < 0]
    pinned: dict[tuple[int, ...], Lifted] = {}

    def batched(nf: int, *args: Any) -> Any:
        if not whole:
            return inner(*args)
        # a rank counted from the whole argument (None, negative) counts within the new cell
        ranks = tuple(_concrete_rank(inner.ranks[k], len(args[inner.arrays[k]].shape) - nf)
                      for k in whole)
        f = pinned.get(ranks)
        if f is None:
            at = dict(zip(whole, ranks, strict=True))
            f = pinned[ranks] = inner._pinned(tuple(at.get(k, r) for k, r in
                                                    enumerate(inner.ranks)))
        return f(*args)

    return Lifted(inner, ftype, new, inner=inner, batched=batched, dtype=inner.dtype)


class Overloads(tuple):
    """The types of an overloaded primitive's variants; prints one per line."""

    def __str__(self) -> str:
        return "\n".join(str(t) for t in self)


class Overloaded:
    """A primitive with a static and a data form (``take(2, x)`` vs ``take(array(2), x)``);
    ``chooser(args)`` picks the variant."""

    def __init__(self, name: str, variants: Sequence[Lifted | ShapeError],
                 chooser: Callable[[Sequence[Any]], int], doc: str | None = None):
        self.name = name
        self.variants = tuple(variants)  # an error stands for a variant reranked out of its type
        self.chooser = chooser
        if doc is not None:
            self.__doc__ = doc

    @property
    def type(self) -> Overloads:
        return Overloads(v.type for v in self.variants if isinstance(v, Lifted))

    @property
    def ranks(self) -> tuple[Rank, ...]:
        return next(v for v in self.variants if isinstance(v, Lifted)).ranks

    def choose(self, args: Sequence[Any]) -> Lifted:
        chosen = self.variants[self.chooser(args)]
        if isinstance(chosen, ShapeError):
            raise chosen
        return chosen

    def __call__(self, *args: Any) -> Any:
        return self.choose(args)(*args)

    def typeof(self, *args: Any) -> Instance:
        return self.choose(args).typeof(*args)

    def rerank(self, *ranks: Rank, **named: Rank) -> Overloaded:
        """Rerank every variant; positional ranks follow the variant with the most array
        parameters.  A variant whose type cannot take the ranks fails when it is chosen."""
        live = [v for v in self.variants if isinstance(v, Lifted)]
        widest = max(live, key=lambda v: len(v.arrays))
        names = [widest.type.param_name(i) for i in widest.arrays]
        wanted = dict(zip(names, _spread_ranks(self.name, ranks, names), strict=False)) | named
        variants: list[Lifted | ShapeError] = []
        for v in self.variants:
            if isinstance(v, ShapeError):
                variants.append(v)
                continue
            own = {v.type.param_name(i) for i in v.arrays}
            try:
                variants.append(v.rerank(**{k: r for k, r in wanted.items() if k in own}))
            except ShapeError as e:
                variants.append(e)
        if not any(isinstance(v, Lifted) for v in variants):
            raise next(v for v in variants if isinstance(v, ShapeError))
        return Overloaded(self.name, variants, self.chooser)

    def __repr__(self) -> str:
        return f"<overloaded {self.name}: " + " | ".join(str(t) for t in self.type) + ">"

# -- lift, rerank, apply ---------------------------------------------------------------------------


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def lift(fn: Callable[..., Any] | None = None, cells: str | None = None, *,
         ranks: Sequence[Rank] | None = None, result: ShapeLike | None = None,
         sizes: dict[str, int] | None = None, vectorized: bool = False, boxed: bool = False,
         dtype: Any = None, name: str | None = None) -> Any:
    """Lift ``fn`` over frames: Remora's implicit iteration for a Python function.

    ``cells`` is a cell signature in the notation's syntax (``"n; n => "``: two n-vectors to a
    scalar; labels agree across cells; ``sizes`` fixes labels only the result mentions), or
    ``ranks`` gives each argument's cell rank (``None``: the whole argument) with an optional
    ``result`` cell shape.  A NumPy ufunc needs neither (scalar cells).

    ``vectorized=True`` promises that ``fn`` accepts extra leading frame axes, like a gufunc:
    called with arrays of shape ``frame + cell`` it returns ``frame + result cell``.  It is then
    called once.  ``boxed=True`` wraps each result cell in a :class:`Box`, for functions whose
    result shapes differ from cell to cell.  ``dtype`` is the element type of an empty result
    (in the arrays' own library; default: the arguments' promoted type).

    >>> dot = lift(lambda a, b: (a * b).sum(), "n; n => ")
    >>> dot(np.array([[1, 2], [3, 4]]), np.array([10, 100]))
    array([210, 430])
    >>> add = lift(np.add)
    >>> add(np.array([10, 100]), np.array([[1, 2], [3, 4]]))
    array([[ 11,  12],
           [103, 104]])
    """
    if fn is None:
        return lambda f: lift(f, cells, ranks=ranks, result=result, sizes=sizes,
                              vectorized=vectorized, boxed=boxed, dtype=dtype, name=name)
    if not callable(fn):
        raise TypeError(f"lift: fn must be callable, not {type(fn).__name__}")
    name = name or _fn_name(fn)
    ufunc = fn if isinstance(fn, np.ufunc) else None
    if ufunc is not None and ufunc.nout != 1:
        raise TypeError(f"lift({name}): a lifted function returns one array; {name} returns "
                        f"{ufunc.nout}")
    if ufunc is not None and ranks is not None and cells is None:
        if len(ranks) != ufunc.nin:
            raise TypeError(f"lift({name}): {len(ranks)} ranks for a ufunc of {ufunc.nin} "
                            f"arguments")
        if any(r != 0 for r in ranks):  # a scalar function: other ranks are a reranking
            return lift(fn, dtype=dtype, name=name).rerank(*ranks)  # (an eta-expansion)
    ftype = _lift_type(name, cells, ranks, result, sizes, ufunc)
    batched = None
    if vectorized and ufunc is None and not boxed:
        def batched(nf: int, *args: Any) -> Any:
            return fn(*args)
    return Lifted(fn, ftype, None if cells is not None or ranks is None else ranks,
                  ufunc=ufunc, batched=batched, boxed=boxed, dtype=dtype, retypable=True)


def _lift_type(name: str, cells: str | None, ranks: Sequence[Rank] | None,
               result: ShapeLike | None, sizes: dict[str, int] | None,
               ufunc: np.ufunc | None) -> FnType:
    if cells is not None and ranks is not None:
        raise TypeError(f"lift({name}): give cells= or ranks=, not both")
    if cells is not None:
        if result is not None:
            raise TypeError(f"lift({name}): the cell signature already declares the result")
        if not isinstance(cells, str):
            raise TypeError(f"lift({name}): cells is a signature string like 'n; n => '")
        ops, res = parse_cells(cells)
        if sizes:
            ops, res = tuple(op.subs(sizes) for op in ops), res.subs(sizes)
        return FnType(name, tuple(Arr("t", op) for op in ops), Arr("t", res),
                      names=tuple(f"arg{i}" for i in range(len(ops))))
    if ranks is None:
        if ufunc is None:
            raise TypeError(f"lift({name}): give the cell signature (cells='n; n => ') or the "
                            f"cell ranks (ranks=(0, 1)); only NumPy ufuncs default to scalars")
        ranks = (0,) * ufunc.nin
    ranks = tuple(_check_rank_value(f"lift({name})", r) for r in ranks)
    if result is None and ufunc is not None and not any(ranks):
        result = ()
    return _ranks_type(name, ranks, None if result is None else ShapeIndex(result))


def as_lifted(f: Any, ranks: Sequence[Rank] | None = None, cells: str | None = None
              ) -> Lifted | Overloaded:
    """``f`` itself when lifted already (reranked if ``ranks`` is given), else ``lift(f, ...)``.

    >>> as_lifted(np.add).ranks
    (0, 0)
    """
    if isinstance(f, Lifted | Overloaded):
        if cells is not None:
            raise TypeError(f"{f.name} is lifted already; rerank it instead of giving cells")
        return f.rerank(*ranks) if ranks is not None else f
    return lift(f, cells, ranks=ranks)


def rerank(f: Any, *ranks: Rank, **named: Rank) -> Lifted | Overloaded:
    """``f`` at other cell ranks: Remora's reranking (J's rank conjunction ``f"r``).

    Works on lifted functions, primitives and plain callables (then it is ``lift(f,
    ranks=ranks)``).  A primitive keeps its type, so a rank its type cannot take is an error.

    >>> from tensig import rank
    >>> m = np.array([[0, 1], [2, 3], [4, 5]])
    >>> rank.head(m), rerank(rank.head, 1)(m)
    (array([0, 1]), array([0, 2, 4]))
    """
    if isinstance(f, Lifted | Overloaded):
        return f.rerank(*ranks, **named)
    if named:
        raise TypeError("rerank: a plain function has no parameter names; give ranks by position")
    return lift(f, ranks=ranks)


def _function_array(fs: Any) -> np.ndarray:
    if _is_object(fs):
        return fs
    if callable(fs):
        return _objects([fs], ())
    arr = np.array(fs, dtype=object)
    if not all(callable(f) for f in arr.flat):
        raise TypeError("apply: every item of the function array must be callable")
    return arr


def apply(fs: Any, *args: Any, ranks: Sequence[Rank] | None = None, cells: str | None = None,
          result: ShapeLike | None = None) -> Any:
    """Apply an array of functions: its shape is one more frame in the principal frame.

    Each function is applied to the cells at its own position (Remora's application of a
    function array).  All functions need the same cell ranks; plain callables are lifted with
    ``ranks`` / ``cells`` (ufuncs default to scalar cells).

    >>> apply([np.add, np.subtract], np.array([10, 20]), 1)
    array([11, 19])
    >>> apply([np.add, np.subtract], np.array([[1, 2], [3, 4]]), 10)
    array([[11, 12],
           [-7, -6]])
    """
    funcs = _function_array(fs)
    lifted = [as_lifted(f, ranks, cells) for f in funcs.flat]
    if not lifted:
        return _no_calls("apply: the function array", funcs.shape,
                         None if result is None else ShapeIndex(result))
    chosen = [f.choose(args) for f in lifted]
    ranks0 = chosen[0].ranks
    for f in chosen[1:]:
        if f.ranks != ranks0 or len(f.type.params) != len(chosen[0].type.params):
            raise TypeError(f"apply: the functions of an array need one type; {chosen[0].name} "
                            f"has cell ranks {ranks0}, {f.name} has {f.ranks}")
    first, cell_args = plan(chosen[0], args)
    return _per_function(funcs.shape, first, cell_args, "the function array",
                         lambda pos, sub: lifted[pos](*sub))


def _is_function_array(x: Any) -> bool:
    return _is_object(x) and x.ndim > 0 and all(callable(f) for f in x.flat)


def _over_functions(lf: Lifted, args: Sequence[Any], i: int) -> Any:
    """A function parameter given an array of functions (Remora's ``(reduce [+ *] x)``): the
    array's shape is one more frame; each function runs the primitive on its cells."""
    funcs = args[i]
    if funcs.size == 0:
        raise ShapeError(f"{lf.name}: the array of functions for {_who(lf, i)} is empty, so the "
                         f"result's cells cannot be known")
    flat = list(funcs.flat)
    first, probe_args = plan(lf, [flat[0] if j == i else a for j, a in enumerate(args)])

    def run(k: int, sub: list[Any]) -> Any:
        sub[i] = flat[k]
        return lf(*sub)

    return _per_function(funcs.shape, first, probe_args,
                         f"the function array ({lf.type.param_name(i)})", run)


# -- typeof / check --------------------------------------------------------------------------------

def typeof(x: Any, *args: Any) -> Any:
    """Remora's type of a function, a box or an array; of an application when ``args`` are given.

    ``typeof(f)`` is ``f``'s (polymorphic) type; ``typeof(f, *args)`` instantiates it at the
    arguments (arrays, or shapes written as tuples / :class:`ShapeIndex`, symbolic sizes
    allowed) and reports the principal frame, each cell type and the result
    (:class:`Instance`); a failed index equality raises :class:`tensig.ShapeError` naming it.

    >>> from tensig import rank
    >>> print(typeof(rank.head))
    head : Π(d, ..s..). [t d + 1, ..s..] -> [t ..s..]
    >>> print(typeof(rank.head, np.zeros((5, 6, 7))))
    head at principal frame []
      argument 0 (x): frame [], cell [float64 5, 6, 7]
      result cell [float64 6, 7], result [float64 6, 7]
      with d = 4, ..s.. = [6, 7]
    >>> str(typeof(np.zeros((2, 3), dtype=np.int32)))
    '[int32 2, 3]'
    """
    lf = _lifted_or_none(x)
    if lf is not None:
        return lf.typeof(*args) if args else lf.type
    if args:
        raise TypeError("typeof: only a lifted function takes arguments")
    if isinstance(x, Box):
        return x.type
    if callable(x):
        raise TypeError(f"typeof: {_fn_name(x)} has no Remora type yet; lift it first")
    a = x if is_array(x) else np.asarray(x)
    if _is_object(a) and a.size and all(isinstance(b, Box) for b in a.flat):
        kinds = {str(b.type) for b in a.flat}
        return Arr(kinds.pop() if len(kinds) == 1 else "Box", ShapeIndex(tuple(a.shape)))
    return Arr(_elem_name(a), ShapeIndex(tuple(a.shape)))


def _lifted_or_none(x: Any) -> Lifted | Overloaded | None:
    return as_lifted(x) if isinstance(x, Lifted | Overloaded | np.ufunc) else None


def check(f: Any, *args: Any, result: ShapeLike | None = None) -> Instance:
    """Type-check an application without running it (its :class:`Instance`, as
    :func:`typeof`'s); with ``result``, also its result shape.

    >>> from tensig import rank
    >>> check(rank.append, (2, 3), (4, 3), result=(6, 3)).result.shape
    ShapeIndex('[6, 3]')
    >>> try:
    ...     check(rank.head, (0, 3))
    ... except ShapeError as e:
    ...     print(*e.reason.split(": "), sep="\\n")
    head
    the cell of argument 0 (x) is [0, 3], which does not fit [d + 1, ..s..]
    the index equality d + 1 == 0 has no solution in the naturals (d would be -1) (with ..s.. = [3])
    """
    lf = _lifted_or_none(f)
    if lf is None:
        raise TypeError(f"check: {_fn_name(f)} is not a lifted function")
    inst = lf.typeof(*args)
    if result is not None:
        _check_expected(inst, ShapeIndex(result))
    return inst


def _check_expected(inst: Instance, expected: ShapeIndex) -> None:
    got = inst.result
    if got is None:
        raise ShapeError(f"check({inst.name}): the result type is unknown ([?]); it cannot be "
                         f"compared with {expected}")
    a, b = got.shape.items, expected.items
    why = f"the ranks differ ({len(a)} vs {len(b)})" if len(a) != len(b) else next(
        (f"the index equality {x} == {y} does not hold"
         for x, y in zip(a, b, strict=True) if x != y), None)
    if why is not None:
        raise ShapeError(f"check({inst.name}): the result type is {got}, not {expected}: {why}",
                         sizes=(str(got.shape), str(expected)))
