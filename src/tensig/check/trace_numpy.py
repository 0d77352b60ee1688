"""NumPy's long tail for :mod:`tensig.check.tracer`: hand models and a fitted general mechanism.

Two layers.  The functions classic NumPy code leans on (``hstack``, ``pad``, ``take``,
``cumsum``, ``outer``, the ``linalg`` solvers and decompositions, ``tri``) are modelled by hand,
with the checks that make them worth modelling (a square matrix where one is needed, a
right-hand side that matches).  Every other function NumPy dispatches through
``__array_function__`` is *fitted*: it runs on small zero arrays at a few witness size
assignments, and each result size is fitted in the symbols from those runs
(:mod:`tensig.check.size_fit`, shared with torch and JAX).  A size that changes with the data
becomes a fresh size with an assumption, never a wrong answer.

>>> import numpy as np
>>> from tensig.check.verify import verify
>>> verify(lambda x: np.roll(np.flip(x, 0), 2, axis=1), "B T => B T").ok
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from tensig.check import size_fit, sym_functions, sym_sizes, tracing
from tensig.check import tracer as S
from tensig.check.broadcasting import broadcast, shape_text
from tensig.check.sym_sizes import as_dim
from tensig.check.tracing import tracer
from tensig.core.dims import Dim
from tensig.core.errors import InconclusiveError

__all__ = ["fitted", "fitted_numpy"]


# --------------------------------------------------------------------------------------------
# Hand models
# --------------------------------------------------------------------------------------------


def _at_least(x: Any, rank: int) -> S.SymArray:
    """``atleast_2d``/``atleast_3d``: NumPy's padding rules (a vector is a row; 3-d is
    ``[1, n, 1]`` for a vector and ``[m, n, 1]`` for a matrix)."""
    a = S._sym(x)
    one = sym_sizes.ONE
    if a.ndim >= rank:
        return a
    if rank == 1:
        return S.SymArray((one,), a.kind)
    if rank == 2:
        return S.SymArray((one,) * (2 - a.ndim) + a.dims, a.kind)
    dims = {0: (one, one, one), 1: (one, *a.dims, one), 2: (*a.dims, one)}[a.ndim]
    return S.SymArray(dims, a.kind)


def _hstack(tup: Any, **kw: Any) -> S.SymArray:
    xs = [_at_least(x, 1) for x in tup]
    return sym_functions.concatenate(xs, 0 if xs[0].ndim == 1 else 1)


def _vstack(tup: Any, **kw: Any) -> S.SymArray:
    return sym_functions.concatenate([_at_least(x, 2) for x in tup], 0)


def _dstack(tup: Any, **kw: Any) -> S.SymArray:
    return sym_functions.concatenate([_at_least(x, 3) for x in tup], 2)


def _column_stack(tup: Any) -> S.SymArray:
    xs = [S._sym(x) for x in tup]
    return sym_functions.concatenate([S.expand_dims(x, 1) if x.ndim == 1 else x for x in xs], 1)


def _flat_size(a: S.SymArray) -> Dim:
    return math.prod(a.dims, start=sym_sizes.ONE)


def _outer(a: Any, b: Any, out: Any = None) -> S.SymArray:
    """``np.outer``: the outer product asked for by name (no finding), of the flattened inputs."""
    x, y = S._sym(a), S._sym(b)
    return S.SymArray((_flat_size(x), _flat_size(y)), "f" if "f" in (x.kind, y.kind) else x.kind)


def _take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise"
          ) -> S.SymArray:
    x, i = S._sym(a), S._sym(indices)
    if axis is None:
        return S.SymArray(i.dims, x.kind)
    ax = S._axis(axis, x.ndim)
    return S.SymArray((*x.dims[:ax], *i.dims, *x.dims[ax + 1:]), x.kind)


def _take_along_axis(a: Any, indices: Any, axis: Any = -1) -> S.SymArray:
    x, i = S._sym(a), S._sym(indices)
    if axis is None:
        return S.SymArray(i.dims, x.kind)
    ax = S._axis(axis, x.ndim)
    if i.ndim != x.ndim:
        tracer().report("broadcast", f"take_along_axis: indices {shape_text(i)} need the "
                                     f"rank of the array {shape_text(x)}")
    others = [S.SymArray(x.dims[:ax] + x.dims[ax + 1:]), S.SymArray(i.dims[:ax] + i.dims[ax + 1:])]
    dims, _ = broadcast(others, "take_along_axis")
    return S.SymArray((*dims[:ax], i.dims[ax], *dims[ax:]), x.kind)


def _along_axis(kind: Callable[[str], str], default_axis: int | None) -> Callable[..., Any]:
    """``cumsum``, ``sort``...: the input's shape, flattened for ``axis=None``; the element
    kind ``kind(input's)``."""
    def model(a: Any, axis: Any = default_axis, *args: Any, **kw: Any) -> S.SymArray:
        x = S._sym(a)
        if axis is None:
            return S.SymArray((_flat_size(x),), kind(x.kind))
        S._axis(axis, x.ndim)
        return S.SymArray(x.dims, kind(x.kind))
    return model


def _pad(array: Any, pad_width: Any, mode: Any = "constant", **kw: Any) -> S.SymArray:
    """``np.pad``: each axis grows by its (before, after) widths, which may be symbolic."""
    x = S._sym(array)
    width = pad_width
    if isinstance(width, int | sym_sizes.SymSize) or (hasattr(width, "__len__") and len(width)
                                                      and not any(hasattr(p, "__len__")
                                                                  for p in width)):
        pair = tuple(width) if hasattr(width, "__len__") else (width,)
        pairs = [(pair[0], pair[-1])] * x.ndim
    else:
        pairs = [tuple(p) if hasattr(p, "__len__") else (p, p) for p in width]
        pairs = [(p[0], p[-1]) for p in pairs]
        if len(pairs) == 1:
            pairs = pairs * x.ndim
    if len(pairs) != x.ndim:
        raise ValueError(f"np.pad: {len(pairs)} (before, after) pairs for an array of rank "
                         f"{x.ndim}")
    return S.SymArray([d + as_dim(lo) + as_dim(hi)
                       for d, (lo, hi) in zip(x.dims, pairs, strict=True)], x.kind)


def _data_sized(hint: str, kind: str = "i") -> Callable[..., Any]:
    """A result whose length depends on the data (``bincount``, ``unique``, ``nonzero``):
    a fresh size, like a Remora box."""
    def model(a: Any, *args: Any, **kw: Any) -> S.SymArray:
        S._sym(a)
        return S.SymArray((tracer().new_dim(hint),), kind)
    return model


def _nonzero(a: Any) -> tuple[S.SymArray, ...]:
    x = S._sym(a)
    n = tracer().new_dim("nnz")
    return tuple(S.SymArray((n,), "i") for _ in range(x.ndim))


def _argwhere(a: Any) -> S.SymArray:
    x = S._sym(a)
    return S.SymArray((tracer().new_dim("nnz"), Dim.const(x.ndim)), "i")


def _unique(ar: Any, return_index: bool = False, return_inverse: bool = False,
            return_counts: bool = False, axis: Any = None, **kw: Any) -> Any:
    x = S._sym(ar)
    n = tracer().new_dim("uniq")
    values = S.SymArray((n,), x.kind)
    extra = [S.SymArray(dims, "i") for asked, dims in ((return_index, (n,)),
                                                       (return_inverse, x.dims),
                                                       (return_counts, (n,))) if asked]
    return (values, *extra) if extra else values


# -- linear algebra ----------------------------------------------------------------------------


def _square(a: S.SymArray, what: str) -> Dim:
    if a.ndim < 2:
        raise ValueError(f"np.linalg.{what}: needs a matrix, got {shape_text(a)}")
    if a.dims[-1] != a.dims[-2]:
        tracer().report("contraction", f"np.linalg.{what} needs square matrices: "
                                       f"{shape_text(a)} is {a.dims[-2]} by {a.dims[-1]}")
    return a.dims[-1]


def _batch(*arrays: S.SymArray) -> tuple[Dim, ...]:
    dims, _ = broadcast([S.SymArray(a.dims) for a in arrays], "linalg's batch axes")
    return dims


def _solve(a: Any, b: Any) -> S.SymArray:
    """``solve(A, b)``: ``A`` square, ``b`` a vector (rank 1) or stacked right-hand sides."""
    x, y = S._sym(a), S._sym(b)
    n, vector = _square(x, "solve"), y.ndim == 1
    if y.dims[0 if vector else -2] != n:
        tracer().report("contraction", f"np.linalg.solve: right-hand side {shape_text(y)} for a "
                                       f"{n} by {n} system" + ("" if vector else
                                                               f" {shape_text(x)}"))
    if vector:
        return S.SymArray((*x.dims[:-1],), "f")
    batch = _batch(S.SymArray(x.dims[:-2]), S.SymArray(y.dims[:-2]))
    return S.SymArray((*batch, n, y.dims[-1]), "f")


def _det(a: Any) -> S.SymArray:
    x = S._sym(a)
    _square(x, "det")
    return S.SymArray(x.dims[:-2], "f")


def _slogdet(a: Any) -> tuple[S.SymArray, S.SymArray]:
    d = _det(a)
    return d, S.SymArray(d.dims, "f")


def _eigh(a: Any, UPLO: str = "L") -> tuple[S.SymArray, S.SymArray]:
    x = S._sym(a)
    n = _square(x, "eigh")
    return S.SymArray((*x.dims[:-1],), "f"), S.SymArray((*x.dims[:-2], n, n), "f")


def _min_dim(m: Dim, n: Dim) -> Dim:
    """``min(m, n)`` of two sizes: decided when it can be, else one fresh size per pair."""
    if m == n:
        return m
    try:
        return m if m <= n else n
    except InconclusiveError:
        pass
    t = tracer()
    cache = t.__dict__.setdefault("_min_dims", {})
    if (m, n) not in cache:
        cache[(m, n)] = t.new_dim("k")
    return cache[(m, n)]


def _svd(a: Any, full_matrices: bool = True, compute_uv: bool = True,
         hermitian: bool = False) -> Any:
    x = S._sym(a)
    m, n = x.dims[-2], x.dims[-1]
    k = _min_dim(m, n)
    batch = x.dims[:-2]
    s = S.SymArray((*batch, k), "f")
    if not compute_uv:
        return s
    u = S.SymArray((*batch, m, m if full_matrices else k), "f")
    vh = S.SymArray((*batch, n if full_matrices else k, n), "f")
    return u, s, vh


def _qr(a: Any, mode: str = "reduced") -> Any:
    x = S._sym(a)
    m, n = x.dims[-2], x.dims[-1]
    k = _min_dim(m, n)
    batch = x.dims[:-2]
    r = S.SymArray((*batch, k if mode != "complete" else m, n), "f")
    if mode == "r":
        return r
    return S.SymArray((*batch, m, k if mode != "complete" else m), "f"), r


def _lstsq(a: Any, b: Any, rcond: Any = None) -> tuple[S.SymArray, ...]:
    x, y = S._sym(a), S._sym(b)
    m, n = x.dims[-2], x.dims[-1]
    if y.dims[0] != m:
        tracer().report("contraction", f"np.linalg.lstsq: right-hand side {shape_text(y)} "
                                       f"for {m} equations ({shape_text(x)})")
    sol = S.SymArray((n, *y.dims[1:]), "f")
    return (sol, S.SymArray((tracer().new_dim("res"),), "f"), S.SymArray((), "i"),
            S.SymArray((_min_dim(m, n),), "f"))


def _pinv(a: Any, *args: Any, **kw: Any) -> S.SymArray:
    x = S._sym(a)
    return S.SymArray((*x.dims[:-2], x.dims[-1], x.dims[-2]), "f")


def _multi_dot(arrays: Any, *, out: Any = None) -> S.SymArray:
    result = arrays[0]
    for b in arrays[1:]:
        result = S.matmul(result, b)
    return S._sym(result)


def _scalar_of_matrix(what: str) -> Callable[..., S.SymArray]:
    def model(a: Any, *args: Any, **kw: Any) -> S.SymArray:
        x = S._sym(a)
        return S.SymArray(x.dims[:-2], "i" if what == "matrix_rank" else "f")
    return model


def _same_square(what: str) -> Callable[..., S.SymArray]:
    def model(a: Any, *args: Any, **kw: Any) -> S.SymArray:
        x = S._sym(a)
        _square(x, what)
        return S.SymArray(x.dims, "f")
    return model


def _trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, **kw: Any) -> S.SymArray:
    x = S._sym(a)
    i, j = S._axis(axis1, x.ndim), S._axis(axis2, x.ndim)
    return S.SymArray([d for k, d in enumerate(x.dims) if k not in (i, j)], x.kind)


NUMPY_EXTRA: dict[str, Callable[..., Any]] = {
    "hstack": _hstack,
    "vstack": _vstack,
    "row_stack": _vstack,
    "dstack": _dstack,
    "column_stack": _column_stack,
    **{f"atleast_{rank}d": lambda *xs, _r=rank: _at_least(xs[0], _r) if len(xs) == 1 else
       tuple(_at_least(x, _r) for x in xs) for rank in (1, 2, 3)},
    **dict.fromkeys(("cumsum", "cumprod", "nancumsum"),
                    _along_axis(lambda k: "i" if k == "b" else k, None)),
    "outer": _outer,
    "take": _take,
    "take_along_axis": _take_along_axis,
    "argsort": _along_axis(lambda k: "i", -1),
    "sort": _along_axis(lambda k: k, -1),
    "pad": _pad,
    "bincount": _data_sized("bins"),
    "flatnonzero": _data_sized("nnz"),
    "nonzero": _nonzero,
    "argwhere": _argwhere,
    "unique": _unique,
    "trace": _trace,
    "linalg.solve": _solve,
    "linalg.inv": _same_square("inv"),
    "linalg.det": _det,
    "linalg.slogdet": _slogdet,
    "linalg.eigh": _eigh,
    "linalg.eig": _eigh,
    "linalg.eigvalsh": lambda a, *args, **kw: _eigh(a)[0],
    "linalg.eigvals": lambda a, *args, **kw: _eigh(a)[0],
    "linalg.svd": _svd,
    "linalg.svdvals": lambda x: _svd(x, compute_uv=False),
    "linalg.qr": _qr,
    "linalg.cholesky": _same_square("cholesky"),
    "linalg.matrix_power": _same_square("matrix_power"),
    "linalg.lstsq": _lstsq,
    "linalg.pinv": _pinv,
    "linalg.multi_dot": _multi_dot,
    "linalg.matrix_rank": _scalar_of_matrix("matrix_rank"),
    "linalg.cond": _scalar_of_matrix("cond"),
}


def _tri(N: Any, M: Any = None, k: int = 0, dtype: Any = float, **kw: Any) -> S.SymArray:
    n = as_dim(N)
    return S.SymArray((n, as_dim(M) if M is not None else n), "b" if dtype is bool else "f")


def _linspace(start: Any, stop: Any, num: Any = 50, *args: Any, **kw: Any) -> S.SymArray:
    return S.SymArray((as_dim(num),), "f")


CREATION_EXTRA: dict[str, Callable[..., Any]] = {
    "tri": _tri,
    "identity": lambda n, *a, **k: S.SymArray((as_dim(n), as_dim(n)), "f"),
    "linspace": _linspace,
}


def _sized(shape: Any, kind: str = "f") -> S.SymArray:
    dims = () if shape is None else (tuple(shape) if isinstance(shape, tuple | list) else (shape,))
    return S.SymArray([as_dim(d) for d in dims], kind)


CREATION_RANDOM: dict[str, Callable[..., Any]] = {
    "randn": lambda *dims: _sized(dims),
    "rand": lambda *dims: _sized(dims),
    "standard_normal": lambda size=None, **k: _sized(size),
    "random": lambda size=None, **k: _sized(size),
    "normal": lambda loc=0.0, scale=1.0, size=None: _sized(size),
    "uniform": lambda low=0.0, high=1.0, size=None: _sized(size),
    "randint": lambda low, high=None, size=None, **k: _sized(size, "i"),
    "choice": lambda a, size=None, *args, **k: _sized(size, "i" if isinstance(
        a, int | sym_sizes.SymSize) else S._sym(a).kind),
    "permutation": lambda x: _sized((x,), "i") if isinstance(x, int | sym_sizes.SymSize)
    else S.SymArray(S._sym(x).dims, S._sym(x).kind),
}
"""``np.random``'s module functions with symbolic sizes (a ``Generator``'s methods cannot be
patched: their sizes are read back from the witness, under an assumption)."""


# --------------------------------------------------------------------------------------------
# The general mechanism: fit result sizes from witness evaluations
# --------------------------------------------------------------------------------------------


def _rebuild(result: Any, leaves: Iterator[Any]) -> Any:
    if isinstance(result, tuple | list):
        items = [_rebuild(r, leaves) for r in result]
        if hasattr(result, "_fields"):
            return type(result)(*items)
        return type(result)(items)
    return next(leaves)


def _bases(t: tracing.Tracer, args: Any) -> list[dict[str, int]]:
    """The witnesses (scaled so that every division the code assumed is exact), then the same
    values in the reverse order among the call's symbols: an operation valid only for
    ``K <= L`` (a window no longer than its input) runs in one."""
    base = t.assumption_envs()[0]
    names = sorted(size_fit.symbols(args), key=base.__getitem__)
    if len(names) < 2:
        return [base]
    flipped = dict(base)
    for n, m in zip(names, reversed(names), strict=True):
        flipped[n] = base[m]
    return [base, flipped]


_SHAPE_WORDS = ("shape", "broadcast", "dimension", "align", "size", "axis")


def fitted(name: str, args: Any, kwargs: Any, call: Callable[[Any, Any], Any],
           make: Callable[[tuple[int, ...], str], Any], arrays: type[Any] | tuple[type[Any], ...],
           make_data: Callable[[tuple[int, ...], str], Any] | None = None) -> Any:
    """Trace a library function by fitting (see :func:`tensig.check.size_fit.fit_sizes`).

    ``call(args, kwargs)`` runs it on concrete arguments, ``make(shape, kind)`` builds one
    concrete array (zeros, or a JAX shape-only stand-in); result leaves of the types
    ``arrays`` are arrays, an int is a size.
    ``make_data`` is a second fill, of distinct values: a size that differs between the two
    fills depends on the data and is a fresh size.  A failure at the witness sizes is a shape
    finding when the library's message says so, else the trace stops with a note.
    """
    t = tracer()

    def run(env: dict[str, int], fill: Callable[..., Any]) -> Any:
        size_fit.size_guard((args, kwargs), env)

        def array(v: Any) -> Any:
            if not isinstance(v, S.SymArray):
                return v
            return fill(tuple(d.evaluate(env) for d in v.dims), v.kind)
        return call(size_fit.concrete(args, env, array), size_fit.concrete(kwargs, env, array))

    def describe(leaf: Any) -> tuple[tuple[int, ...], str] | None:
        """A result leaf's shape and kind (kind ``"size"``: an int that is a size)."""
        if isinstance(leaf, arrays):
            return tuple(leaf.shape), S.kind_of(leaf.dtype) or "f"
        if isinstance(leaf, int) and not isinstance(leaf, bool):
            return (leaf,), "size"
        return None

    def shapes_of(result: Any) -> list[tuple[tuple[int, ...], str] | None]:
        return [describe(leaf) for leaf in size_fit.leaves(result)]

    bases = _bases(t, (args, kwargs))
    size_fit.size_guard((args, kwargs), bases[0])
    error: BaseException | None = None
    said = ""  # the first error, in the symbols
    for base in bases:
        try:
            sample = run(base, make)
        except (ValueError, IndexError, TypeError) as e:
            if not any(w in str(e).lower() for w in _SHAPE_WORDS) or \
                    "unexpected keyword" in str(e) or "not a valid" in str(e):
                raise tracing.Unsupported(f"{name} ({type(e).__name__}: {e})") from None
            error = error or e
            said = size_fit.named(str(error), bases[0])
            continue
        except Exception as e:  # a data error (LinAlgError) or an argument the library rejects
            raise tracing.Unsupported(f"{name} ({type(e).__name__}: {e})") from None
        if error is not None:  # it runs only where the sizes are ordered the other way
            order = " <= ".join(sorted(size_fit.symbols((args, kwargs)), key=base.__getitem__))
            t.report("assumption", f"{name} fails at some sizes ({said}); assumes {order}")
        break
    else:
        assert error is not None
        kind = "broadcast" if "broadcast" in str(error).lower() else "contraction"
        t.report(kind, f"{name} fails on these shapes at every size: {said}")
        first = next((a for a in size_fit.leaves(args) if isinstance(a, S.SymArray)), None)
        return S.SymArray(first.dims if first is not None else (), "f")
    described = shapes_of(sample)
    fits = size_fit.fit_sizes(
        lambda env: [d[0] if d else None for d in shapes_of(run(env, make))], (args, kwargs),
        name, base, t.unit(), errors=(ValueError, IndexError, TypeError),
        note=lambda message: t.report("assumption", message))
    if make_data is not None:
        try:
            data = [d[0] if d else None for d in shapes_of(run(base, make_data))]
        except Exception:  # the data fill is invalid for it (indices out of range): sizes only
            data = None
        if data is not None:
            fits = _boxed(fits, [d[0] if d else None for d in described], data)
    leaves = []
    for leaf, fit, desc in zip(size_fit.leaves(sample), fits, described, strict=True):
        dims = None if fit is None else [t.new_dim("n") if d is None else d for d in fit]
        if dims is None or desc is None:
            leaves.append(leaf)
        elif desc[1] == "size":
            leaves.append(sym_sizes.SymSize(dims[0]))
        else:
            leaves.append(S.SymArray(dims, desc[1]))
    if not isinstance(sample, tuple | list):
        return leaves[0]
    return _rebuild(sample, iter(leaves))


def fitted_numpy(func: Any, args: Any, kwargs: Any) -> Any:
    """A NumPy function not modelled by hand: run on zero arrays at witness sizes and fit."""
    import numpy as np

    dtypes = {"f": np.float64, "i": np.int64, "b": np.bool_}

    def zeros(shape: tuple[int, ...], kind: str) -> Any:
        return np.zeros(shape, dtypes[kind])

    def distinct(shape: tuple[int, ...], kind: str) -> Any:
        if kind == "b":
            return np.ones(shape, np.bool_)
        return (np.arange(math.prod(shape)).reshape(shape) + 1).astype(dtypes[kind])

    return fitted(f"numpy.{func.__name__}", args, kwargs, lambda a, k: func(*a, **k), zeros,
                  (np.ndarray, np.generic), distinct)


def _boxed(fits: list[list[Dim | None] | None], zero_shapes: list[Any],
           data_shapes: list[Any]) -> list[list[Dim | None] | None]:
    """Sizes that change with the data (not with the sizes) are fresh (None): a Remora box."""
    return [dims if dims is None or z is None or d is None or z == d else
            [None if i >= len(d) or z[i] != d[i] else dim for i, dim in enumerate(dims)]
            for dims, z, d in zip(fits, zero_shapes, data_shapes, strict=True)]


def _sequence_of_rows(name: str, model: Callable[..., Any]) -> Callable[..., Any]:
    """``np.concatenate(x)`` of one array treats its rows as the sequence: fitted."""
    def impl(arrays: Any, *args: Any, **kw: Any) -> Any:
        if isinstance(arrays, S.SymArray):
            import numpy as np

            return fitted_numpy(getattr(np, name), (arrays, *args), kw)
        return model(arrays, *args, **kw)
    return impl


def _where(cond: Any, *args: Any, **kw: Any) -> Any:
    if not args:  # where(cond): the indices of the true elements, a data-dependent size
        return _nonzero(cond)
    return sym_functions.where(cond, *args, **kw)


NUMPY_EXTRA["where"] = _where
for _name in ("concatenate", "concat", "stack", "hstack", "vstack", "dstack", "column_stack"):
    NUMPY_EXTRA[_name] = _sequence_of_rows(_name, NUMPY_EXTRA.get(_name) or S.NUMPY[_name])
S.NUMPY.update(NUMPY_EXTRA)
S.CREATION_NUMPY.update(CREATION_EXTRA)
tracing.PLUGINS["numpy_fallback"] = fitted_numpy
