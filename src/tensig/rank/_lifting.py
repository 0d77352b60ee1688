"""Lifting: Remora's function application on real arrays (frames, cells, principal frame).

Applying a lifted function splits each argument into a *frame* (leading axes) and *cells*
(the trailing axes its cell rank names), takes the principal frame (the longest frame; every
other frame must be a prefix of it), replicates each cell over the missing trailing frame axes,
applies the function to the cells and assembles ``frame + result cell``.

Execution paths, fastest first: a NumPy ufunc is called once on the arguments with singleton
axes inserted after their frames (NumPy broadcasting then replicates, as views); a function
declared ``vectorized=True`` is called once on the broadcast-equalised arrays (views, no
copies); a torch or jax function goes through nested ``torch.vmap`` / ``jax.vmap``; a Python
loop over the frame is the last resort.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensig.backends import Backend, backend_among, dtype_name, is_array
from tensig.core.annotations import dtype_kind
from tensig.core.dims import Dim
from tensig.core.errors import ShapeError
from tensig.core.shape_index import ShapeIndex, ShapeVar
from tensig.rank._boxes import Box, _elem_name
from tensig.rank._signature import parse_cells
from tensig.rank._types import (
    Arr,
    FnType,
    Fun,
    Instance,
    Matcher,
    Sigma,
    Static,
    _shape_index,
    bindings,
    instantiate,
)

__all__ = ["Lifted", "Overloaded", "apply", "as_lifted", "check", "lift", "rerank", "typeof"]

Rank = int | None
ShapeLike = str | ShapeIndex | Sequence[Any]


# --------------------------------------------------------------------------------------------
# frames
# --------------------------------------------------------------------------------------------


def _fmt(frame: Sequence[Any]) -> str:
    items = ", ".join(str(x) for x in frame)
    return f"({items},)" if len(frame) == 1 else f"({items})"


def _suffix_broadcasts(frames: Sequence[Sequence[Any]]) -> bool:
    try:
        np.broadcast_shapes(*[tuple(int(x) for x in f) for f in frames])
    except (ValueError, TypeError):
        return False
    return True


def principal_frame(fname: str, frames: Sequence[Sequence[Any]], who: Sequence[str]) -> tuple:
    """The longest frame, after checking that every other frame is a prefix of it.

    Sizes compare exactly (a size-1 axis does not stretch); the error names both frames.

    >>> principal_frame("f", [(2,), (2, 3)], ["argument 0", "argument 1"])
    (2, 3)
    >>> principal_frame("f", [(2, 4), (2, 3)], ["argument 0", "argument 1"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tensig.ShapeError: f: frame (2, 3) of argument 1 is not a prefix of the principal ...
    """
    if not frames:
        return ()
    best = 0
    for i, f in enumerate(frames):
        if len(f) > len(frames[best]):
            best = i
    principal = tuple(frames[best])
    for i, f in enumerate(frames):
        if principal[:len(f)] != tuple(f):
            raise _frame_error(fname, frames, who, i, best)
    return principal


def _frame_error(fname: str, frames: Sequence[Sequence[Any]], who: Sequence[str], i: int,
                 best: int) -> ShapeError:
    f, p = frames[i], frames[best]
    hint = "Remora matches frames from the left (prefix agreement) and a size-1 axis does not " \
           "stretch"
    if _suffix_broadcasts(frames):
        hint += ("; NumPy would broadcast these shapes from the right. To pair trailing axes, "
                 "raise the cell rank of the shorter argument (rank.rerank) so those axes are "
                 "part of its cell, or move the shared axes to the front")
    return ShapeError(f"{fname}: frame {_fmt(f)} of {who[i]} is not a prefix of the principal "
                      f"frame {_fmt(p)} from {who[best]}", operand=i, shape=_fmt(f),
                      sizes=(_fmt(f), _fmt(p)), hint=hint)


# --------------------------------------------------------------------------------------------
# types of lifted user functions
# --------------------------------------------------------------------------------------------


def _concrete_rank(r: Rank, n: int) -> int:
    """The cell rank of an argument of rank ``n``: ``None`` is all of it, a negative ``-k``
    all but its first ``k`` axes (J's and Remora's complementary rank)."""
    if r is None:
        return n
    return max(n + r, 0) if r < 0 else r


def _ranks_pattern(i: int, r: Rank) -> ShapeIndex:
    if r is None or r < 0:
        return ShapeIndex([ShapeVar(f"c{i}")])
    letter = chr(ord("a") + i) if i < 26 else f"x{i}_"
    return ShapeIndex([Dim.symbol(f"{letter}{j}") for j in range(r)])


def _check_rank_value(fname: str, r: object) -> Rank:
    if r is None:
        return None
    if isinstance(r, bool) or not isinstance(r, int | np.integer):
        raise TypeError(f"{fname}: a cell rank is an int >= 0 or None (the whole argument), "
                        f"not {r!r}")
    return int(r)  # a negative rank -k is complementary: all but the first k axes


def _ranks_type(name: str, ranks: Sequence[Rank], result: ShapeIndex | None) -> FnType:
    params = tuple(Arr("t", _ranks_pattern(i, r)) for i, r in enumerate(ranks))
    return FnType(name, params, None if result is None else Arr("t", result),
                  names=tuple(f"arg{i}" for i in range(len(ranks))))


def _pattern_rank(p: Arr) -> Rank:
    return None if p.shape.shape_vars else len(p.shape.items)


def _unconstrained(ftype: FnType) -> bool:
    """Whether any cells fit: every parameter item is a distinct bare variable and the result
    is unknown or constant (then a call needs no instantiation)."""
    seen: set[object] = set()
    for p in ftype.params:
        if not isinstance(p, Arr):
            return False
        for item in p.shape:
            if isinstance(item, ShapeVar):
                key: object = item
            else:
                names = item.symbols
                if len(names) != 1 or item != Dim.symbol(next(iter(names))):
                    return False
                key = next(iter(names))
            if key in seen:
                return False
            seen.add(key)
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


# --------------------------------------------------------------------------------------------
# Lifted
# --------------------------------------------------------------------------------------------


class Lifted:
    """A function lifted over frames: call it on arrays of any frame.

    Made by :func:`lift` (user functions) or defined by :mod:`tensig.rank`'s primitives.
    ``type`` is its Remora type (:class:`FnType`), ``ranks`` the cell rank of each array
    parameter (``None``: the whole argument).
    """

    def __init__(self, fn: Callable[..., Any], ftype: FnType, ranks: Sequence[Rank] | None = None,
                 *, name: str | None = None, ufunc: np.ufunc | None = None,
                 batched: Callable[..., Any] | None = None, boxed: bool = False,
                 dtype: Any = None, retypable: bool = False, doc: str | None = None):
        self.fn = fn
        self.type = ftype
        self.name = name or ftype.name
        self.ufunc = ufunc
        self.batched = batched
        self.boxed = boxed
        self.dtype = dtype
        self.retypable = retypable
        self.arrays = tuple(i for i, p in enumerate(ftype.params) if isinstance(p, Arr))
        self.statics = tuple(i for i, p in enumerate(ftype.params) if isinstance(p, Static))
        if ranks is None:
            ranks = [_pattern_rank(ftype.params[i]) for i in self.arrays]  # type: ignore[arg-type]
        self.ranks: tuple[Rank, ...] = tuple(_check_rank_value(self.name, r) for r in ranks)
        if len(self.ranks) != len(self.arrays):
            raise TypeError(f"{self.name}: {len(self.ranks)} cell ranks for "
                            f"{len(self.arrays)} array parameters")
        self._trivial = _unconstrained(ftype)
        self._typed: dict[object, tuple[ShapeIndex | None, Sigma | None]] = {}
        self._plans: dict[tuple[Any, ...], _Plan] = {}  # see _prepare
        self._who = tuple(_who(self, i) for i in self.arrays)  # for frame errors, per call
        self.inner: Lifted | None = None  # set by rerank's eta-expansion
        self._funs = tuple(i for i, p in enumerate(ftype.params) if isinstance(p, Fun))
        self._vmapped: dict[tuple[Any, int], Callable[..., Any]] = {}  # see _via_vmap
        if doc is not None:
            self.__doc__ = doc

    # -- calling -------------------------------------------------------------------------------
    def __call__(self, *args: Any) -> Any:
        for i in self._funs:
            if i < len(args) and _is_function_array(args[i]):
                return _over_functions(self, args, i)
        return _run(_prepare(self, args))

    def rerank(self, *ranks: Rank, **named: Rank) -> Lifted:
        """The same function at other cell ranks (positional, one per array parameter, or by
        parameter name; a single positional rank applies to every array parameter).

        Remora's reranking is an eta-expansion: the new function takes cells of the new ranks
        and applies this one to each, and this one still lifts at its own ranks inside a cell.

        >>> sum_rows = lift(np.sum, ranks=(1,))
        >>> sum_rows(np.arange(6).reshape(2, 3)), sum_rows.rerank(2)(np.ones((2, 2, 2)))
        (array([ 3, 12]), array([[2., 2.],
               [2., 2.]]))
        """
        new = self._ranks_from(ranks, named)
        if new == self.ranks:
            return self
        if not all(r is None or n == r for r, n in zip(self.ranks, new, strict=True)) or any(
                r is not None and r < 0 for r in self.ranks):
            return _eta_expand(self, new)
        ftype = self.type
        fits = all(_fits(ftype.params[i], r)  # type: ignore[arg-type]
                   for i, r in zip(self.arrays, new, strict=True))
        if not fits:
            if not self.retypable:
                raise self._rerank_error(new)
            ftype = _ranks_type(ftype.name, new, None)
        return Lifted(self.fn, ftype, new, name=self.name, ufunc=self.ufunc,
                      batched=self.batched, boxed=self.boxed, dtype=self.dtype,
                      retypable=self.retypable)

    def _ranks_from(self, ranks: Sequence[Rank], named: dict[str, Rank]) -> tuple[Rank, ...]:
        names = [self.type.param_name(i) for i in self.arrays]
        ranks = _spread_ranks(self.name, ranks, names)
        new = list(self.ranks)
        for k, r in enumerate(ranks):
            new[k] = _check_rank_value(self.name, r)
        for key, r in named.items():
            if key not in names:
                raise TypeError(f"{self.name} has no array parameter {key!r} "
                                f"(it has {', '.join(names)})")
            new[names.index(key)] = _check_rank_value(self.name, r)
        return tuple(new)

    def _rerank_error(self, new: Sequence[Rank]) -> ShapeError:
        for i, r in zip(self.arrays, new, strict=True):
            p = self.type.params[i]
            if not _fits(p, r):  # type: ignore[arg-type]
                return ShapeError(f"{self.name}: argument {i} ({self.type.param_name(i)}) has "
                                  f"cell type {p}, which cannot have cell rank {r}",
                                  sizes=(str(p), r))
        return ShapeError(f"{self.name}: ranks {tuple(new)} do not fit {self.type}")

    def typeof(self, *args: Any) -> Instance:
        """The type instantiated at these arguments (arrays, or shapes as tuples/ShapeIndex)."""
        return _typeof_call(self, args)

    def choose(self, args: Sequence[Any]) -> Lifted:
        return self

    def __repr__(self) -> str:
        ranks = ", ".join("all" if r is None else str(r) for r in self.ranks)
        return f"<lifted {self.type}; cell ranks ({ranks})>"


def _eta_expand(inner: Lifted, new: tuple[Rank, ...]) -> Lifted:
    """``inner`` at cells of ranks ``new``: Remora's ``(rerank (r ...) f)`` is
    ``(λ ((x r) ...) (f x ...))``, so ``inner`` still lifts at its own ranks inside each cell.

    Because a lifted function already accepts extra leading frame axes (its frames agree by
    prefix), the whole application is one call of ``inner`` on the arguments broadcast to the
    outer principal frame: no loop over the new cells.
    """
    for k, i in enumerate(inner.arrays):
        r, n = inner.ranks[k], new[k]
        p = inner.type.params[i]
        dynamic = n is None or n < 0 or (r is not None and r < 0)  # known only per call
        too_small = not dynamic and (not _fits(p, n) if r is None else n < r)
        if too_small:
            raise ShapeError(f"{inner.name}: argument {i} ({inner.type.param_name(i)}) has "
                             f"cell type {p}, which cannot have cell rank {n}",
                             sizes=(str(p), n),
                             hint=f"a cell of rank {n} is smaller than the cells "
                                  f"{inner.name} takes; give a rank of at least "
                                  f"{len(p.shape.dims) if r is None else r}")  # type: ignore[union-attr]
    params = list(inner.type.params)
    for k, i in enumerate(inner.arrays):
        params[i] = Arr(params[i].elem, _ranks_pattern(i, new[k]))  # type: ignore[union-attr]
    ftype = FnType(inner.name, tuple(params), None, names=inner.type.names)

    whole = [k for k, r in enumerate(inner.ranks) if r is None or r < 0]
    pinned: dict[tuple[int, ...], Lifted] = {}

    def batched(nf: int, *args: Any) -> Any:
        if not whole:
            return inner(*args)
        # A rank ``inner`` counts from the whole argument (``None``, negative) counts from the
        # new cell, not from the outer frame too.
        ranks = tuple(_concrete_rank(inner.ranks[k], len(args[inner.arrays[k]].shape) - nf)
                      for k in whole)
        f = pinned.get(ranks)
        if f is None:
            f = pinned[ranks] = inner.rerank(**{
                inner.type.param_name(inner.arrays[k]): r
                for k, r in zip(whole, ranks, strict=True)})
        return f(*args)

    out = Lifted(inner, ftype, new, name=inner.name, batched=batched, dtype=inner.dtype)
    out.inner = inner
    return out


class Overloads(tuple):
    """The types of an overloaded primitive's variants; prints one per line."""

    def __str__(self) -> str:
        return "\n".join(str(t) for t in self)


class Overloaded:
    """A primitive with a static and a data form (``take(2, x)`` vs ``take(array(2), x)``).

    ``chooser(args)`` picks the variant; ranks and types are the variants'.
    """

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
        ranks = _spread_ranks(self.name, ranks, names)
        wanted = dict(zip(names, ranks, strict=False)) | named
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


# --------------------------------------------------------------------------------------------
# one call
# --------------------------------------------------------------------------------------------


@dataclass
class _Call:
    lf: Lifted
    args: list[Any]
    arrays: list[Any]
    frames: list[tuple[int, ...]]
    cells: list[tuple[int, ...]]
    frame: tuple[int, ...]
    backend: Backend
    matcher: Matcher | None
    declared: ShapeIndex | None
    sigma: Sigma | None
    fixed: tuple[int, ...] | None  # ``declared`` as sizes when it is concrete


def _is_object(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.dtype.kind == "O"


def _atom(a: Any) -> Any:
    """A 0-d object array is a wrapped atom (a box): pass the atom itself."""
    return a[()] if _is_object(a) and a.ndim == 0 else a


def _coerce(backend: Backend, x: Any, like: Any) -> Any:
    """``x`` as an array of the call's library (on ``like``'s device); boxes stay objects."""
    if is_array(x):
        if backend.owns(x) or _is_object(x):
            return x
        return backend.asarray(x, like)
    a = np.asarray(x)
    return a if a.dtype == object or backend.owns(a) else backend.asarray(a, like)


def _who(lf: Lifted, i: int) -> str:
    return f"argument {i} ({lf.type.param_name(i)})"


def _check_arity(lf: Lifted, args: Sequence[Any]) -> None:
    n = len(lf.type.params)
    if len(args) != n:
        names = ", ".join(lf.type.param_name(i) for i in range(n))
        raise TypeError(f"{lf.name} takes {n} argument{'s' * (n != 1)} ({names}), "
                        f"got {len(args)}")
    for i, p in enumerate(lf.type.params):
        if isinstance(p, Fun) and not callable(args[i]):
            raise TypeError(f"{lf.name}: {_who(lf, i)} must be a function {p}, "
                            f"not {type(args[i]).__name__}")


def _cell_rank(lf: Lifted, k: int, shape: tuple[int, ...]) -> int:
    r = lf.ranks[k]
    if r is None or r < 0:
        return _concrete_rank(r, len(shape))
    if r > len(shape):
        i = lf.arrays[k]
        raise ShapeError(f"{lf.name}: {_who(lf, i)} has shape {_fmt(shape)}, of rank "
                         f"{len(shape)}, less than its cell rank {r}", operand=i,
                         shape=_fmt(shape), sizes=(len(shape), r),
                         hint=f"pass an array with at least {r} axes, or rerank {lf.name}")
    return r


@dataclass(frozen=True)
class _Plan:
    """What preparing a call found that depends only on the arguments' signature: reused by
    every later call with the same one."""

    backend: Backend
    frames: list[tuple[int, ...]]
    cells: list[tuple[int, ...]]
    frame: tuple[int, ...]
    declared: ShapeIndex | None
    sigma: Sigma | None
    fixed: tuple[int, ...] | None


def _signature(lf: Lifted, args: Sequence[Any]) -> tuple[Any, ...] | None:
    """Everything a call's preparation depends on: per array argument its type (which gives
    the library and whether it is converted), shape (rank, frame, cell) and dtype (atom
    checks), the static arguments, and which function arguments are callable.  ``None`` when
    the call cannot share a plan (a wrong arity; an argument without shape or dtype, a list
    or a Python scalar, which is converted anew each call)."""
    if len(args) != len(lf.type.params):
        return None
    key: list[Any] = list(args)
    try:
        for i in lf.arrays:
            x = args[i]
            key[i] = (type(x), x.shape, x.dtype)  # torch.Size hashes as the tuple
    except AttributeError:
        return None
    for i in lf._funs:
        key[i] = callable(args[i])
    return tuple(key)


def _prepare(lf: Lifted, args: Sequence[Any]) -> _Call:
    """The call's frames, cells, principal frame and checked type: cached per argument
    signature (:func:`_signature`), so a repeated call skips the checks its signature has
    already passed (a profile of a dot product lifted over torch rows put them at 14% of it)."""
    key = _signature(lf, args)
    try:
        plan = lf._plans.get(key) if key is not None else None
    except TypeError:  # an unhashable static argument
        key, plan = None, None
    if plan is not None:
        return _Call(lf, list(args), [args[i] for i in lf.arrays], plan.frames, plan.cells,
                     plan.frame, plan.backend, None, plan.declared, plan.sigma, plan.fixed)
    call = _prepare_anew(lf, args)
    declared = call.declared
    if (key is not None and (declared is None or declared.is_concrete)
            and all(call.args[i] is args[i] for i in lf.arrays)):  # no argument was converted
        if len(lf._plans) >= _CACHE_SIZE:
            lf._plans.clear()
        lf._plans[key] = _Plan(call.backend, call.frames, call.cells, call.frame, declared,
                               call.sigma, call.fixed)
    return call


def _prepare_anew(lf: Lifted, args: Sequence[Any]) -> _Call:
    _check_arity(lf, args)
    backend = backend_among([args[i] for i in lf.arrays])
    like = next((args[i] for i in lf.arrays if backend.owns(args[i])), None)
    all_args = list(args)
    for i in lf.arrays:
        all_args[i] = _coerce(backend, all_args[i], like)
    arrays = [all_args[i] for i in lf.arrays]
    frames, cells = [], []
    for k, a in enumerate(arrays):
        shape = tuple(a.shape)
        split = len(shape) - _cell_rank(lf, k, shape)
        frames.append(shape[:split])
        cells.append(shape[split:])
    frame = principal_frame(lf.name, frames, lf._who)
    matcher, declared, sigma = _typecheck(lf, cells, all_args)
    _check_elems(lf, arrays)
    if lf.ufunc is not None:
        _check_atoms(lf, [a.dtype for a in arrays if not _is_object(a)])
    fixed = declared.as_tuple() if declared is not None and declared.is_concrete else None
    return _Call(lf, all_args, arrays, frames, cells, frame, backend, matcher, declared, sigma,
                 fixed)


_CACHE_SIZE = 256


def _typecheck(lf: Lifted, cells: Sequence[tuple[int, ...]], args: Sequence[Any]
               ) -> tuple[Matcher | None, ShapeIndex | None, Sigma | None]:
    """Instantiate the type at the cells; cached per (cells, static arguments) when the
    instantiated result cell is concrete (then no matcher is needed later)."""
    if lf._trivial:
        result = lf.type.result
        return None, (result.shape if isinstance(result, Arr) else None), None
    key = (tuple(cells), tuple(args[i] for i in lf.statics))
    try:
        hit = lf._typed.get(key)
    except TypeError:  # an unhashable static argument
        key, hit = None, None
    if hit is not None:
        return None, hit[0], hit[1]
    m, declared, sigma = _instantiate_cells(lf, cells, args)
    if key is not None and (declared is None or declared.is_concrete):
        if len(lf._typed) >= _CACHE_SIZE:
            lf._typed.clear()
        lf._typed[key] = (declared, sigma)
    return m, declared, sigma


def _instantiate_cells(lf: Lifted, cells: Sequence[tuple[int, ...]], args: Sequence[Any]
                       ) -> tuple[Matcher, ShapeIndex | None, Sigma | None]:
    actual: list[ShapeIndex | None] = [None] * len(lf.type.params)
    for k, i in enumerate(lf.arrays):
        actual[i] = ShapeIndex(cells[k])
    m = instantiate(lf.type, lf.name, actual, {i: args[i] for i in lf.statics})
    result = m.result()
    if isinstance(result, Arr):
        return m, result.shape, None
    return m, None, result


_KINDS = {"Int": ("int", "integers"), "Bool": ("bool", "booleans")}


def _check_elems(lf: Lifted, arrays: Sequence[Any]) -> None:
    for k, i in enumerate(lf.arrays):
        want = _KINDS.get(lf.type.params[i].elem)  # type: ignore[union-attr]
        a = arrays[k]
        if want is None or math.prod(a.shape) == 0:
            continue
        if dtype_kind(a.dtype) != want[0]:
            raise TypeError(f"{lf.name}: {_who(lf, i)} must hold {want[1]}, not "
                            f"{_elem_name(a)}")


def _check_atoms(lf: Lifted, dtypes: Sequence[Any]) -> Any:
    """A scalar function's atoms are of one type, as Remora's: truth values are not numbers,
    and NumPy's own type resolution refuses the rest (strings with numbers).  Returns the
    result's NumPy dtype where NumPy can tell (``None`` otherwise)."""
    key = (lf.ufunc, *dtypes)
    try:
        return _ATOMS[key]
    except (KeyError, TypeError):
        pass
    out = _resolve_atoms(lf, dtypes)
    with contextlib.suppress(TypeError):  # an unhashable dtype is resolved every time
        _ATOMS[key] = out
    return out


_ATOMS: dict[tuple[Any, ...], Any] = {}  # (ufunc, dtypes...) -> result dtype: resolved once


def _resolve_atoms(lf: Lifted, dtypes: Sequence[Any]) -> Any:
    kinds = [dtype_kind(d) for d in dtypes]
    if "bool" in kinds and any(k != "bool" for k in kinds):
        b, n = kinds.index("bool"), next(i for i, k in enumerate(kinds) if k != "bool")
        raise TypeError(f"{lf.name}: {_who(lf, lf.arrays[b])} holds booleans and "
                        f"{_who(lf, lf.arrays[n])} holds {_elem_kind(dtypes[n])}; Remora's "
                        f"atoms do not convert: cast the booleans (x.astype(int))")
    if not all(isinstance(d, np.dtype) for d in dtypes) or len(dtypes) != lf.ufunc.nin:
        return None  # torch/jax dtypes: their libraries' own rules apply when it runs
    try:
        return lf.ufunc.resolve_dtypes((*dtypes, None))[-1]  # type: ignore[union-attr]
    except (TypeError, ValueError) as e:  # numpy's UFuncTypeError is a TypeError
        names = " and ".join(str(d) for d in dtypes)
        raise TypeError(f"{lf.name}: no {lf.name} of {names} atoms ({e})") from None


def _elem_kind(dtype: Any) -> str:
    """How an error names the atoms of ``dtype`` (``integers``; the dtype itself otherwise)."""
    return {"int": "integers", "float": "floats", "complex": "complex numbers"}.get(
        dtype_kind(dtype), dtype_name(dtype))


def _merge(call: _Call, arrays: Sequence[Any]) -> list[Any]:
    args = list(call.args)
    for k, i in enumerate(call.lf.arrays):
        args[i] = arrays[k]
    return args


# --------------------------------------------------------------------------------------------
# execution paths
# --------------------------------------------------------------------------------------------


def _run(call: _Call) -> Any:
    lf = call.lf
    if lf.ufunc is not None:
        return _via_ufunc(call)
    if lf.inner is not None:
        return _via_batched(call)
    if 0 in call.frame:
        return _empty(call)
    if not call.frame:
        return _finish(call, lf.fn(*_merge(call, [_atom(a) for a in call.arrays])))
    if lf.batched is not None:
        out = _via_batched(call)
        if out is not NotImplemented:
            return out
    if not lf.boxed and call.backend.vmap() is not None:
        out = _via_vmap(call)
        if out is not NotImplemented:
            return out
    return _via_loop(call)


def _align(backend: Backend, a: Any, frame: tuple[int, ...], cell: tuple[int, ...], n: int,
           k: int) -> Any:
    """``a`` with singleton axes after its frame (to ``n`` frame axes) and before its cell."""
    target = frame + (1,) * (n - len(frame)) + (1,) * (k - len(cell)) + cell
    return a if tuple(a.shape) == target else backend.reshape(a, target)


def _via_ufunc(call: _Call) -> Any:
    """One ufunc call: NumPy broadcasting of the aligned arrays replicates the cells."""
    lf, backend = call.lf, call.backend
    op = backend.ufunc(lf.ufunc)
    k = max((len(c) for c in call.cells), default=0)
    try:
        if len(set(call.cells)) > 1:
            np.broadcast_shapes(*call.cells)
    except ValueError:
        raise ShapeError(f"{lf.name}: the cells {', '.join(_fmt(c) for c in call.cells)} do not "
                         f"combine elementwise", sizes=tuple(_fmt(c) for c in call.cells),
                         hint="give the arguments cells of one shape (or of size 1)") from None
    n = len(call.frame)
    aligned = [_align(backend, a, f, c, n, k)
               for a, f, c in zip(call.arrays, call.frames, call.cells, strict=True)]
    return _finish(call, op(*_merge(call, aligned)))


def _equalise(call: _Call) -> list[Any]:
    """Every array broadcast to ``principal frame + its cell``: views, no copies."""
    if all(f == call.frame for f in call.frames):  # the common case: nothing to replicate
        return list(call.arrays)
    n, out = len(call.frame), []
    for a, f, c in zip(call.arrays, call.frames, call.cells, strict=True):
        a, target = _align(call.backend, a, f, c, n, len(c)), call.frame + c
        out.append(a if tuple(a.shape) == target else call.backend.broadcast_to(a, target))
    return out


def _via_batched(call: _Call) -> Any:
    out = call.lf.batched(len(call.frame), *_merge(call, _equalise(call)))  # type: ignore[misc]
    if out is NotImplemented:
        return out
    return _finish(call, out)


def _via_vmap(call: _Call) -> Any:
    """Nested ``torch.vmap`` / ``jax.vmap``, one per frame axis; ``NotImplemented`` if the
    function cannot be vmapped (data-dependent Python control flow, non-array results).

    When every argument is an array, the nested function is made once per library and frame
    rank and kept on the lifted function: making it costs as much as running it on a small
    frame (a ``vmap`` wrapper per axis, each copying the function's metadata)."""
    vmap = call.backend.vmap()
    lf = call.lf
    only_arrays = len(call.args) == len(call.arrays)  # else the cells_fn holds this call's
    key = (vmap, len(call.frame))
    g = lf._vmapped.get(key) if only_arrays else None
    if g is None:
        fn = lf.fn

        def cells_fn(*arrays: Any) -> Any:
            return fn(*_merge(call, arrays))

        g = fn if only_arrays else cells_fn
        for _ in call.frame:
            g = vmap(g)
        if only_arrays:
            lf._vmapped[key] = g
    try:
        out = g(*_equalise(call))
    except Exception:
        return NotImplemented
    return _finish(call, out)


def _cell_calls(call: _Call) -> list[Any]:
    """``fn`` on every cell, in row-major frame order (the last resort)."""
    fn, frame = call.lf.fn, call.frame
    n = len(frame)
    pairs = [(a, len(f)) for a, f in zip(call.arrays, call.frames, strict=True)]
    positions = itertools.product(*map(range, frame))
    if len(pairs) == len(call.args):  # only array parameters: no merging
        return [fn(*[a[idx] if k == n else a[idx[:k]] for a, k in pairs]) for idx in positions]
    return [fn(*_merge(call, [a[idx[:k]] for a, k in pairs])) for idx in positions]


def _shape(x: Any) -> tuple[int, ...]:
    s = getattr(x, "shape", None)
    return tuple(s) if s is not None else tuple(np.shape(x))


def _via_loop(call: _Call) -> Any:
    lf = call.lf
    results = _cell_calls(call)
    if lf.boxed:
        out = np.empty(len(results), dtype=object)
        out[:] = [_box(call, r) for r in results]
        return out.reshape(call.frame)
    if call.backend.numpy_native and not _shape(results[0]):
        try:
            out = np.asarray(results)  # all scalars: one conversion, no per-cell shape checks
        except ValueError:  # ragged: reported below
            out = None
        if out is not None and out.dtype != object and out.shape == (len(results),):
            _check_cell(call, ())
            return out.reshape(call.frame)
    shapes = set(map(_shape, results))
    if len(shapes) > 1:
        raise _ragged_error(call, results)
    cell = shapes.pop()
    _check_cell(call, cell)
    return call.backend.stack_cells(results, call.frame, cell)


def _ragged_error(call: _Call, results: Sequence[Any]) -> ShapeError:
    first = tuple(np.shape(results[0]))
    idx, other = (), first
    for idx, r in zip(np.ndindex(*call.frame), results, strict=False):  # noqa: B007
        other = tuple(np.shape(r))
        if other != first:
            break
    return ShapeError(
        f"{call.lf.name}: result cells differ in shape: {_fmt(first)} at frame index "
        f"{_fmt((0,) * len(call.frame))}, {_fmt(other)} at {_fmt(idx)}",
        sizes=(_fmt(first), _fmt(other)),
        hint=f"an array needs cells of one shape; lift with boxed=True to get an array of "
             f"boxes (rank.lift({call.lf.name}, ..., boxed=True))")


def _box(call: _Call, value: Any) -> Box:
    if isinstance(value, Box):
        return value
    if call.sigma is not None:
        return Box(value, _sigma=call.sigma)
    return Box(value)


def _finish(call: _Call, out: Any) -> Any:
    if call.lf.boxed:
        if not call.frame:
            return _box(call, out)
        return out  # batched boxed results are already arrays of boxes
    shape = tuple(np.shape(out))
    n = len(call.frame)
    if shape[:n] != call.frame:
        raise ShapeError(f"{call.lf.name}: the function returned shape {_fmt(shape)}, which "
                         f"does not start with the frame {_fmt(call.frame)}",
                         sizes=(_fmt(shape), _fmt(call.frame)),
                         hint="a vectorized function must keep the leading frame axes")
    _check_cell(call, shape[n:])
    return out


def _check_cell(call: _Call, cell: tuple[int, ...]) -> None:
    declared = call.declared
    if declared is None:
        return
    lf = call.lf
    if call.fixed is not None:
        if cell != call.fixed:
            raise ShapeError(f"{lf.name}: the function returned a cell of shape {_fmt(cell)}, "
                             f"but its declared result cell is {declared}",
                             sizes=(str(declared), _fmt(cell)))
        return
    m = call.matcher
    if m is None:  # pragma: no cover - a symbolic declared cell is never cached
        return
    m.match("the result cell the function returned", declared, ShapeIndex(cell))
    m.finish([])


def _empty(call: _Call) -> Any:
    """An empty frame: the function is never called; the declared result cell gives the
    shape (Remora's answer to the "hole" in untyped array languages)."""
    lf = call.lf
    if lf.boxed:
        return np.empty(call.frame, dtype=object)
    declared = call.declared
    if declared is None or not declared.is_concrete:
        what = "has no declared result cell" if declared is None else \
            f"declares the result cell {declared}, which the arguments do not determine"
        raise ShapeError(f"{lf.name}: the frame {_fmt(call.frame)} is empty, so the function "
                         f"is never called, and it {what}",
                         hint="declare the result cell: lift(fn, cells='... => m', "
                              "sizes={'m': ...}) or lift(fn, ranks=..., result=(...))")
    typed = [a for a in call.arrays if not _is_object(a)]
    dtype = lf.dtype if lf.dtype is not None else call.backend.result_dtype(typed)
    return call.backend.empty(call.frame + declared.as_tuple(), dtype)


# --------------------------------------------------------------------------------------------
# lift, rerank, apply
# --------------------------------------------------------------------------------------------


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def _signature_type(name: str, cells: str, sizes: dict[str, int] | None) -> FnType:
    ops, res = parse_cells(cells)
    if sizes:
        ops = tuple(op.subs(sizes) for op in ops)
        res = res.subs(sizes)
    return FnType(name, tuple(Arr("t", op) for op in ops), Arr("t", res),
                  names=tuple(f"arg{i}" for i in range(len(ops))))


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
    if ufunc is not None and ranks is not None and cells is None and any(
            r != 0 for r in ranks):
        # A ufunc is a scalar function: other ranks are a reranking of it (eta-expansion),
        # so it still combines scalars by prefix agreement inside each cell.
        if len(ranks) != ufunc.nin:
            raise TypeError(f"lift({name}): {len(ranks)} ranks for a ufunc of {ufunc.nin} "
                            f"arguments")
        return lift(fn, dtype=dtype, name=name).rerank(*ranks)
    ftype = _lift_type(fn, name, cells, ranks, result, sizes, ufunc)
    batched = None
    if vectorized and ufunc is None and not boxed:
        def batched(nf: int, *args: Any) -> Any:
            return fn(*args)
    return Lifted(fn, ftype, name=name, ufunc=ufunc, batched=batched, boxed=boxed, dtype=dtype,
                  retypable=True,
                  ranks=None if cells is not None or ranks is None else ranks)


def _lift_type(fn: Any, name: str, cells: str | None, ranks: Sequence[Rank] | None,
               result: ShapeLike | None, sizes: dict[str, int] | None,
               ufunc: np.ufunc | None) -> FnType:
    if cells is not None and ranks is not None:
        raise TypeError(f"lift({name}): give cells= or ranks=, not both")
    if cells is not None:
        if result is not None:
            raise TypeError(f"lift({name}): the cell signature already declares the result")
        if not isinstance(cells, str):
            raise TypeError(f"lift({name}): cells is a signature string like 'n; n => '")
        return _signature_type(name, cells, sizes)
    if ranks is None:
        if ufunc is None:
            raise TypeError(f"lift({name}): give the cell signature (cells='n; n => ') or the "
                            f"cell ranks (ranks=(0, 1)); only NumPy ufuncs default to scalars")
        ranks = (0,) * ufunc.nin
    ranks = tuple(_check_rank_value(f"lift({name})", r) for r in ranks)
    if ufunc is not None and len(ranks) != ufunc.nin:
        raise TypeError(f"lift({name}): {len(ranks)} ranks for a ufunc of {ufunc.nin} arguments")
    if result is None and ufunc is not None and not any(ranks):
        result = ()
    return _ranks_type(name, ranks, None if result is None else _shape_index(result))


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
    if isinstance(fs, np.ndarray) and fs.dtype == object:
        return fs
    if callable(fs):
        out = np.empty((), dtype=object)
        out[()] = fs
        return out
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
        return _apply_empty(funcs, result)
    chosen = [f.choose(args) for f in lifted]
    ranks0 = chosen[0].ranks
    for f in chosen[1:]:
        if f.ranks != ranks0 or len(f.type.params) != len(chosen[0].type.params):
            raise TypeError(f"apply: the functions of an array need one type; {chosen[0].name} "
                            f"has cell ranks {ranks0}, {f.name} has {f.ranks}")
    call = _prepare(chosen[0], args)
    return _per_function(funcs.shape, call, "the function array",
                         lambda pos, sub: lifted[pos](*sub))


def _per_function(shape: tuple[int, ...], call: _Call, who: str,
                  run: Callable[[int, list[Any]], Any]) -> Any:
    """One application per position of a function array whose shape is one more frame: each
    argument is sliced by the position over the frame axes it has, then lifts over the rest."""
    principal_frame(call.lf.name, [shape, *call.frames], [who, *call.lf._who])
    outs = []
    for flat, pos in enumerate(np.ndindex(*shape)):
        sub = [a[pos[:len(fr)]] for a, fr in zip(call.arrays, call.frames, strict=True)]
        outs.append(run(flat, _merge(call, sub)))
    return _assemble_apply(shape, outs, call.backend)


def _is_function_array(x: Any) -> bool:
    return (isinstance(x, np.ndarray) and x.dtype == object and x.ndim > 0
            and all(callable(f) for f in x.flat))


def _over_functions(lf: Lifted, args: Sequence[Any], i: int) -> Any:
    """A function parameter given an array of functions (Remora's ``(reduce [+ *] x)``): the
    array's shape is one more frame; each function runs the primitive on its cells."""
    funcs = args[i]
    if funcs.size == 0:
        raise ShapeError(f"{lf.name}: the array of functions for {_who(lf, i)} is empty, so the "
                         f"result's cells cannot be known")
    probe = list(args)
    probe[i] = funcs.flat[0]
    call = _prepare(lf, probe)
    flat = list(funcs.flat)

    def run(k: int, sub: list[Any]) -> Any:
        sub[i] = flat[k]
        return lf(*sub)

    return _per_function(funcs.shape, call, f"the function array ({lf.type.param_name(i)})", run)


def _assemble_apply(shape: tuple[int, ...], outs: list[Any], backend: Backend) -> Any:
    if all(isinstance(o, Box) for o in outs):
        out = np.empty(len(outs), dtype=object)
        out[:] = outs
        return out.reshape(shape)
    shapes = {tuple(np.shape(o)) for o in outs}
    if len(shapes) > 1:
        a, b = sorted(shapes)[:2]
        raise ShapeError(f"apply: the functions' results differ in shape: {_fmt(a)} and "
                         f"{_fmt(b)}", sizes=(_fmt(a), _fmt(b)),
                         hint="lift the functions with boxed=True to get an array of boxes")
    if not shape:
        return outs[0]
    return backend.stack_cells(outs, shape, shapes.pop())


def _apply_empty(funcs: np.ndarray, result: ShapeLike | None) -> Any:
    if result is None:
        raise ShapeError(f"apply: the function array of shape {_fmt(funcs.shape)} is empty, so "
                         f"no function is called and the result cell cannot be known",
                         hint="declare it with result=(...)")
    return np.zeros(funcs.shape + _shape_index(result).as_tuple())


# --------------------------------------------------------------------------------------------
# typeof / check
# --------------------------------------------------------------------------------------------


def _shape_arg(lf: Lifted, i: int, x: Any) -> ShapeIndex:
    if isinstance(x, ShapeIndex):
        shape = x
    elif isinstance(x, tuple | str):
        shape = _shape_index(x)
    else:
        shape = ShapeIndex(tuple(np.shape(x)))
    if shape.shape_vars:
        raise TypeError(f"typeof({lf.name}): the shape {shape} of {_who(lf, i)} has shape "
                        f"variables; give its axes")
    return shape


def _elem_of(x: Any, p: Arr) -> str:
    if is_array(x) or isinstance(x, list):
        return _elem_name(x if is_array(x) else np.asarray(x))
    return p.elem


def _typeof_call(lf: Lifted, args: Sequence[Any]) -> Instance:
    n = len(lf.type.params)
    if len(args) != n:
        _check_arity(lf, args)
    shapes = {i: _shape_arg(lf, i, args[i]) for i in lf.arrays}
    frames: list[ShapeIndex | None] = [None] * n
    cells: list[ShapeIndex | None] = [None] * n
    for k, i in enumerate(lf.arrays):
        items = shapes[i].items
        r = lf.ranks[k]
        split = 0 if r is None else len(items) - _cell_rank(lf, k, items)
        frames[i], cells[i] = shapes[i][:split], shapes[i][split:]
    real = [frames[i] for i in lf.arrays]
    frame = ShapeIndex(principal_frame(lf.name, [f.items for f in real],  # type: ignore[union-attr]
                                       lf._who))
    m = instantiate(lf.type, lf.name, cells, {i: args[i] for i in lf.statics})
    result = m.result()
    if lf.inner is not None:
        result = _inner_result(lf, cells, args)
    elems = {i: _elem_of(args[i], lf.type.params[i]) for i in lf.arrays}  # type: ignore[arg-type]
    if lf.ufunc is not None:
        result = _ufunc_result(lf, result, [args[i] for i in lf.arrays])
    cell_types = tuple(None if cells[i] is None else Arr(elems[i], cells[i]) for i in range(n))
    dims, shapes_b = bindings(m)
    return Instance(lf.name, frame, tuple(frames), cell_types, _elem_result(lf, result, elems),
                    dims, shapes_b, tuple(m.conditions), lf.type.names)


def _ufunc_result(lf: Lifted, result: Arr | Sigma | None, args: Sequence[Any]
                  ) -> Arr | Sigma | None:
    """A ufunc's result atom type from NumPy's type resolution, not the first argument's."""
    dtypes = [x.dtype if is_array(x) else np.asarray(x).dtype for x in args
              if is_array(x) or isinstance(x, list | int | float | bool | complex)]
    if len(dtypes) != len(args) or not isinstance(result, Arr):
        return result
    out = _check_atoms(lf, dtypes)
    return result if out is None else Arr(str(out), result.shape)


def _inner_result(lf: Lifted, cells: Sequence[ShapeIndex | None], args: Sequence[Any]
                  ) -> Arr | None:
    """An eta-expanded function's result cell: the inner function's whole result on a cell."""
    inner = lf.inner
    assert inner is not None
    at = [cells[i] if i in lf.arrays else args[i] for i in range(len(args))]
    return inner.typeof(*at).result


def _elem_result(lf: Lifted, result: Arr | Sigma | None, elems: dict[int, str]
                 ) -> Arr | Sigma | None:
    body = result.body if isinstance(result, Sigma) else result
    if body is None:
        return None
    for i, e in elems.items():
        if lf.type.params[i].elem == body.elem:  # type: ignore[union-attr]
            body = Arr(e, body.shape)
            break
    return Sigma(result.hidden, body) if isinstance(result, Sigma) else body


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
    if isinstance(x, Lifted | Overloaded):
        return x
    if isinstance(x, np.ufunc):
        return lift(x)
    return None


def check(f: Any, *args: Any, result: ShapeLike | None = None) -> Instance:
    """Type-check an application without running it; with ``result``, also its result shape.

    Returns the :class:`Instance`; an index equality that fails raises
    :class:`tensig.ShapeError` naming it.

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
        _check_expected(inst, _shape_index(result))
    return inst


def _check_expected(inst: Instance, expected: ShapeIndex) -> None:
    got = inst.result
    if got is None:
        raise ShapeError(f"check({inst.name}): the result type is unknown ([?]); it cannot be "
                         f"compared with {expected}")
    a, b = got.shape.items, expected.items
    why = None
    if len(a) != len(b):
        why = f"the ranks differ ({len(a)} vs {len(b)})"
    else:
        for x, y in zip(a, b, strict=True):
            if x != y:
                why = f"the index equality {x} == {y} does not hold"
                break
    if why is not None:
        raise ShapeError(f"check({inst.name}): the result type is {got}, not {expected}: {why}",
                         sizes=(str(got.shape), str(expected)))
