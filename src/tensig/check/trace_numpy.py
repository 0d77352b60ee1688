"""NumPy's long tail for :mod:`tensig.check.tracer`: hand models and a fitted general mechanism.

By hand (listed in the README's ``tensig.verify`` section): what fitting cannot give (a
concatenation finding, sizes shared by results such as ``svd``'s ``min(m, n)``, square matrices
and matching right-hand sides).  Every other ``__array_function__`` function is fitted
(:func:`fitted`); a size that changes with the data is a fresh size, never a wrong answer.

>>> import numpy as np
>>> from tensig.check.verify import verify
>>> verify(lambda x: np.roll(np.flip(x, 0), 2, axis=1), "B T => B T").ok
True
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import sys
from collections.abc import Callable
from types import FunctionType, ModuleType
from typing import Any

import numpy as np

from tensig.check import size_fit, sym_functions, sym_indexing, sym_sizes, trace_random, tracing
from tensig.check import tracer as S
from tensig.check.broadcasting import broadcast, differ, shape_text
from tensig.check.tracing import tracer
from tensig.core import kept
from tensig.core.dims import Dim
from tensig.core.errors import InconclusiveError

__all__ = ["SCIPY", "asarray", "fitted", "fitted_numpy", "library_targets"]


# -- Hand models -------------------------------------------------------------------------------


def _at_least(x: Any, rank: int) -> S.SymArray:
    """``atleast_2d``/``atleast_3d``: NumPy's padding rules (a vector is a row; 3-d is
    ``[1, n, 1]`` for a vector and ``[m, n, 1]`` for a matrix)."""
    a = S._sym(x)
    one = sym_sizes.ONE
    if a.ndim >= rank:
        return a
    if rank < 3:
        return S.SymArray((one,) * (rank - a.ndim) + a.dims, a.kind)
    dims = {0: (one, one, one), 1: (one, *a.dims, one), 2: (*a.dims, one)}[a.ndim]
    return S.SymArray(dims, a.kind)


def _hstack(tup: Any, **kw: Any) -> S.SymArray:
    xs = [_at_least(x, 1) for x in tup]
    return sym_functions.concatenate(xs, 0 if xs[0].ndim == 1 else 1)


def _stacked(rank: int, axis: int) -> Callable[..., S.SymArray]:
    """``vstack`` (2, 0) and ``dstack`` (3, 2): each operand made ``rank``-d, joined on ``axis``."""
    return lambda tup, **kw: sym_functions.concatenate([_at_least(x, rank) for x in tup], axis)


def _column_stack(tup: Any) -> S.SymArray:
    return sym_functions.concatenate([S.expand_dims(x, 1) if S._sym(x).ndim == 1 else x
                                      for x in tup], 1)


def _unique(ar: Any, return_index: bool = False, return_inverse: bool = False,
            return_counts: bool = False, axis: Any = None, **kw: Any) -> Any:
    """``np.unique`` (and torch's): a fresh count of distinct values, or of distinct slices
    along ``axis`` (the other axes kept); then the index, inverse and counts asked."""
    x = S._sym(ar)
    n = tracer().new_dim("uniq")
    values, inverse = S.SymArray((n,), x.kind), x.dims
    if axis is not None:
        ax = S._axis(axis, x.ndim)
        values, inverse = S.SymArray((*x.dims[:ax], n, *x.dims[ax + 1:]), x.kind), x.dims[ax:ax + 1]
    extra = [S.SymArray(dims, "i") for asked, dims in ((return_index, (n,)),
                                                       (return_inverse, inverse),
                                                       (return_counts, (n,))) if asked]
    return (values, *extra) if extra else values


# -- linear algebra ----------------------------------------------------------------------------


def _square(a: S.SymArray, what: str) -> Dim:
    if a.ndim < 2:
        raise ValueError(f"np.linalg.{what}: needs a matrix, got {shape_text(a)}")
    if differ(a.dims[-1], a.dims[-2]):
        tracer().report("contraction", f"np.linalg.{what} needs square matrices: "
                                       f"{shape_text(a)} is {a.dims[-2]} by {a.dims[-1]}")
    return a.dims[-1]


def _solve(a: Any, b: Any) -> S.SymArray:
    """``solve(A, b)``: ``A`` square, ``b`` a vector (rank 1) or stacked right-hand sides."""
    x, y = S._sym(a), S._sym(b)
    n, vector = _square(x, "solve"), y.ndim == 1
    if differ(y.dims[0 if vector else -2], n):
        tracer().report("contraction", f"np.linalg.solve: right-hand side {shape_text(y)} for a "
                                       f"{n} by {n} system" + ("" if vector else
                                                               f" {shape_text(x)}"))
    if vector:
        return S.SymArray((*x.dims[:-1],), "f")
    batch, _ = broadcast([S.SymArray(x.dims[:-2]), S.SymArray(y.dims[:-2])],
                         "linalg's batch axes")
    return S.SymArray((*batch, n, y.dims[-1]), "f")


def _of_square(what: str, *results: str) -> Callable[..., Any]:
    """A function of square matrices (checked), with one result per shape in ``results``,
    spelled in ``b`` (the batch axes) and ``n`` (the matrix size): ``"bnn"`` is the input's."""
    def model(a: Any, *args: Any, **kw: Any) -> Any:
        x = S._sym(a)
        n = _square(x, what)
        out = [S.SymArray([d for c in r for d in (x.dims[:-2] if c == "b" else (n,))], "f")
               for r in results]
        return tuple(out) if len(out) > 1 else out[0]
    return model


def _min_dim(m: Dim, n: Dim) -> Dim:
    """``min(m, n)`` of two sizes: decided when it can be, else one fresh size per pair."""
    if not differ(m, n):
        return m
    try:
        return m if m <= n else n
    except InconclusiveError:
        pass
    t = tracer()
    if (m, n) not in t.min_dims:
        t.min_dims[(m, n)] = t.new_dim("k")
    return t.min_dims[(m, n)]


def _svd(a: Any, full_matrices: bool = True, compute_uv: bool = True,
         hermitian: bool = False) -> Any:
    *batch, m, n = S._sym(a).dims
    k = _min_dim(m, n)
    s = S.SymArray((*batch, k), "f")
    if not compute_uv:
        return s
    u = S.SymArray((*batch, m, m if full_matrices else k), "f")
    vh = S.SymArray((*batch, n if full_matrices else k, n), "f")
    return u, s, vh


def _qr(a: Any, mode: str = "reduced") -> Any:
    *batch, m, n = S._sym(a).dims
    k = _min_dim(m, n)
    r = S.SymArray((*batch, k if mode != "complete" else m, n), "f")
    if mode == "r":
        return r
    return S.SymArray((*batch, m, k if mode != "complete" else m), "f"), r


def _lstsq(a: Any, b: Any, rcond: Any = None) -> tuple[S.SymArray, ...]:
    x, y = S._sym(a), S._sym(b)
    m, n = x.dims[-2], x.dims[-1]
    if differ(y.dims[0], m):
        tracer().report("contraction", f"np.linalg.lstsq: right-hand side {shape_text(y)} "
                                       f"for {m} equations ({shape_text(x)})")
    sol = S.SymArray((n, *y.dims[1:]), "f")
    return (sol, S.SymArray((tracer().new_dim("res"),), "f"), S.SymArray((), "i"),
            S.SymArray((_min_dim(m, n),), "f"))


def _sliding_window_view(x: Any, window_shape: Any, axis: Any = None, **kw: Any
                         ) -> S.SymArray:
    """Each window axis shortened by the window less one, the windows' axes appended (a
    window no longer than its axis, else assumed so, as for a convolution)."""
    a = S._sym(x)
    shape = window_shape if isinstance(window_shape, tuple | list) else (window_shape,)
    windows = [sym_sizes.as_dim(w) for w in shape]
    axes = range(a.ndim) if axis is None else \
        (axis if isinstance(axis, tuple | list) else (axis,))
    if len(axes) != len(windows):  # NumPy's ValueError (axis=None: a window for every axis)
        tracer().report("op-shape", f"sliding_window_view: window shape {tuple(shape)} for "
                                    f"axes {tuple(axes)} of {shape_text(a)}: give one size "
                                    f"per axis (or axis=)")
        return S.SymArray((*a.dims, *windows), a.kind)
    dims = list(a.dims)
    for ax, w in zip(axes, windows, strict=True):
        ax = S._axis(ax, a.ndim)
        sym_indexing.at_most(w, dims[ax], "op-shape", f"sliding_window_view: a window of {w} "
                             f"on axis {ax} of {shape_text(a)} is longer than the axis",
                             f"sliding_window_view's window of {w} on axis {ax} of "
                             f"{shape_text(a)}, which NumPy refuses where the axis is shorter")
        dims[ax] = dims[ax] - w + 1
    return S.SymArray((*dims, *windows), a.kind)


def _convolve(a: Any, v: Any, mode: str = "full") -> S.SymArray:
    """``full`` ``n + k - 1``, ``same`` the longer, ``valid`` the longer less the shorter plus
    one (NumPy swaps a shorter first operand).  Fitted, the witnesses' order chose the side
    silently (``K - N + 1`` for a window of ``K`` on ``N``); undecided, it is assumed."""
    n, k = (S._sym(x).dims[0] for x in (a, v))
    for d in sorted((n, k), key=tracer().value):  # the shorter first: T // 3 before T // 2
        sym_indexing.at_most(sym_sizes.ONE, d, "op-shape", f"a convolution of an empty operand "
                          f"({d})", "NumPy refuses a convolution of an empty operand")
    if mode == "full":
        return S.SymArray((n + k - 1,), "f")
    try:
        longer, shorter = (n, k) if k <= n else (k, n)
    except InconclusiveError:
        sym_indexing.at_most(k, n, "op-shape", "",
                             "a convolution's kernel no longer than its signal")
        longer, shorter = n, k
    return S.SymArray((longer if mode == "same" else longer - shorter + 1,), "f")


def _as_strided(x: Any, shape: Any = None, strides: Any = None, **kw: Any) -> S.SymArray:
    a = S._sym(x)  # the strides only say where the elements lie: the shape is given
    return S.SymArray(a.dims if shape is None else map(sym_sizes.as_dim, shape), a.kind)


def _kron(a: Any, b: Any) -> S.SymArray:
    x, y = S._sym(a), S._sym(b)
    one = sym_sizes.ONE
    n = max(x.ndim, y.ndim)
    xd, yd = (one,) * (n - x.ndim) + x.dims, (one,) * (n - y.ndim) + y.dims
    return S.SymArray([p * q for p, q in zip(xd, yd, strict=True)], "f")


def _triangle(upper: bool) -> Callable[..., tuple[S.SymArray, S.SymArray]]:
    """``triu_indices(n, k, m)``/``tril_indices``: two index arrays of the triangle's count."""
    def model(n: Any, k: int = 0, m: Any = None) -> tuple[S.SymArray, S.SymArray]:
        count = sym_indexing.triangle(n, k, upper, m)
        return S.SymArray((count,), "i"), S.SymArray((count,), "i")
    return model


def _triangle_from(upper: bool) -> Callable[..., tuple[S.SymArray, S.SymArray]]:
    return lambda arr, k=0: _triangle(upper)(_square(S._sym(arr), "triangle indices"), k)


def _average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False, *,
             keepdims: bool = False) -> Any:
    x = S._sym(a)
    if weights is not None:
        w = S._sym(weights)
        own = w.ndim == x.ndim and not any(map(differ, w.dims, x.dims))
        if not own and (w.ndim != 1 or axis is None  # NumPy: a's shape, or 1-d along the axis
                        or differ(w.dims[0], x.dims[S._axis(axis, x.ndim)])):
            tracer().report("broadcast", f"np.average: weights {shape_text(w)} do not match "
                                         f"axis {axis} of {shape_text(x)}")
    out = S.reduce_(x, axis, keepdims, "f")
    return (out, S.SymArray(out.dims, "f")) if returned else out


def _fft(rank: int | None, half: str = "") -> Callable[..., S.SymArray]:
    """np.fft's (and jnp.fft's) transforms over ``rank`` axes (None: all), sizes from ``s``/``n``
    or kept; a real forward one halves the last (``m // 2 + 1``), an inverse doubles it back
    (``2 * (m - 1)``).  Fitted, ``irfft2(rfft2(x), s=(H, W))`` had required W even."""
    def model(a: Any, s: Any = None, axes: Any = None, norm: Any = None, *, n: Any = None,
              axis: Any = None, **kw: Any) -> S.SymArray:
        x = S._sym(a)
        if rank == 1:
            s, axes = (s if n is None else n), (axes if axis is None else axis)
            s, axes = (None if s is None else (s,)), (-1 if axes is None else axes,)
        count = rank or (len(s) if s is not None else x.ndim)
        axes = tuple(range(-count, 0)) if axes is None else tuple(axes)
        dims = list(x.dims)
        for k, (ax, size) in enumerate(zip(axes, s or (None,) * len(axes), strict=True)):
            i, last = S._axis(ax, x.ndim), k == len(axes) - 1
            d = dims[i] if size is None else sym_sizes.as_dim(size)
            dims[i] = d // 2 + 1 if last and half == "r" else \
                2 * (d - 1) if last and half == "ir" and size is None else d
        return S.SymArray(dims, "f")
    return model


NUMPY_EXTRA: dict[str, Callable[..., Any]] = {
    "sliding_window_view": _sliding_window_view,
    **{f"fft.{p}{w}": _fft(r, p) for p in ("", "i", "r", "ir")  # "i": the last axis kept
       for w, r in (("fft", 1), ("fft2", 2), ("fftn", None))},
    "kron": _kron,
    **dict.fromkeys(("convolve", "correlate"), _convolve),
    "bincount": sym_functions.bincount,
    "average": _average,
    "triu_indices_from": _triangle_from(True),
    "tril_indices_from": _triangle_from(False),
    "hstack": _hstack,
    **dict.fromkeys(("vstack", "row_stack"), _stacked(2, 0)),
    "dstack": _stacked(3, 2),
    "column_stack": _column_stack,
    **{f"atleast_{rank}d": lambda *xs, _r=rank: _at_least(xs[0], _r) if len(xs) == 1 else
       tuple(_at_least(x, _r) for x in xs) for rank in (1, 2, 3)},
    "argwhere": sym_functions.argwhere,
    "unique": _unique,
    "linalg.solve": _solve,
    **{f"linalg.{w}": _of_square(w, "bnn") for w in ("inv", "cholesky", "matrix_power")},
    "linalg.det": _of_square("det", "b"),
    "linalg.slogdet": _of_square("slogdet", "b", "b"),
    **{f"linalg.{w}": _of_square(w, "bn", "bnn") for w in ("eigh", "eig")},
    **{f"linalg.{w}": _of_square(w, "bn") for w in ("eigvalsh", "eigvals")},
    "linalg.svd": _svd,
    "linalg.svdvals": lambda x: _svd(x, compute_uv=False),
    "linalg.qr": _qr,
    "linalg.lstsq": _lstsq,
    "linalg.multi_dot": lambda arrays, *, out=None: S._sym(functools.reduce(S.matmul, arrays)),
}


def asarray(a: Any, dtype: Any = None, *args: Any, **kw: Any) -> S.SymArray:
    """``np.asarray``/``np.array`` of a symbolic array (its dtype changed), or of a list of
    them (stacked); ``np.array``'s ``ndmin`` prepends axes of 1."""
    x = sym_functions.stack(a, 0) if isinstance(a, list | tuple) else S._sym(a)
    if kw.get("ndmin", 0) > x.ndim:
        x = S.SymArray((sym_sizes.ONE,) * (kw["ndmin"] - x.ndim) + x.dims, x.kind)
    return x.astype(dtype) if dtype is not None else x


def _mask_indices(n: Any, mask_func: Any, k: int = 0) -> tuple[S.SymArray, S.SymArray]:
    """``mask_indices(n, np.triu, k)`` is ``triu_indices(n, k)`` (NumPy's own counted a mask of
    the witness: a constant); another mask's count is a fresh size."""
    name = getattr(mask_func, "__name__", None)
    if name in ("triu", "tril") and getattr(np, name) is mask_func:
        return _triangle(name == "triu")(n, k)
    return (S.SymArray((tracer().new_dim("mask"),), "i"),) * 2


def _indices(dimensions: Any, dtype: Any = int, sparse: bool = False) -> Any:
    """A grid's coordinates: stacked ``[n, *dims]``, or (``sparse``) one ``[1.., d, ..1]`` each."""
    dims = [sym_sizes.as_dim(d) for d in dimensions]
    if not sparse:
        return S.SymArray((len(dims), *dims), "i")
    return tuple(S.SymArray([d if j == i else 1 for j in range(len(dims))], "i")
                 for i, d in enumerate(dims))


def _of_list(name: str) -> Callable[..., Any]:
    """``np.mean([pred_a, pred_b], axis=0)``, ``np.min([d0, d1], axis=0)``: NumPy converts a
    list in C, never asking its symbolic items, so the list is stacked first."""
    original = getattr(np, name)

    def impl(a: Any, *args: Any, **kw: Any) -> Any:
        if isinstance(a, list | tuple) and any(isinstance(v, S.SymArray) for v in a):
            a = sym_functions.stack(a)
        return original(a, *args, **kw)
    return impl


CREATION_EXTRA: dict[str, Callable[..., Any]] = {
    **{n: _of_list(n) for n in ("sum", "mean", "min", "max", "std", "var", "prod", "argmin",
                                "argmax", "average")},  # modelled: a list of them too
    "indices": _indices,
    "triu_indices": _triangle(True),
    "tril_indices": _triangle(False),
    "mask_indices": _mask_indices,
    **dict.fromkeys(("asarray", "array", "asanyarray", "ascontiguousarray"), asarray),
    "tri": sym_functions.eye,
    "identity": lambda n, dtype=float, **k: sym_functions.eye(n, dtype=dtype),
    **dict.fromkeys(("linspace", "logspace", "geomspace"),
                    lambda start, stop, num=50, *args, **kw: S.SymArray((num,), "f")),
    **dict.fromkeys(("hanning", "hamming", "blackman", "bartlett", "kaiser"),  # windows of M
                    lambda M, *args, **kw: S.SymArray((M,), "f")),
}


# -- The general mechanism: fit result sizes from witness evaluations --------------------------


def _bases(base: dict[str, int], unit: int, args: Any, kwargs: Any, allocates: bool = True
           ) -> list[size_fit.Base]:
    """The bases a fit may start from, each with the assumption a run only there makes: the
    witnesses (every division the code assumed exact there), their values reversed among the
    symbols (an op valid only for ``K <= L``), then one witness, then all, scaled past the
    call's largest count (``top_k(x, 50)``).  Where the library ``allocates``, one too large to
    build is left out: a call refused at every base left is a shape error, not a note."""
    names = sorted(base, key=base.__getitem__)
    out = [(base, "")]
    if len(names) > 1:
        out.append((size_fit.swapped(base), " <= ".join(reversed(names))))
    count = size_fit.largest_count(args, kwargs)
    if names and count >= base[names[0]]:
        factor = count // base[names[0]] + 1
        out += [({**base, n: base[n] * factor}, f"{n} >= {count}") for n in names]
        out.append(({**base, **{n: base[n] * factor for n in names}},
                    f"sizes of at least {count}"))
    kept = out[:1]
    for env, assumes in out[1:]:
        with contextlib.suppress(tracing.Unsupported):  # too large to build (or fit): not tried
            for point in size_fit.sample_points(names, env, unit) if allocates else ():
                size_fit.size_guard((args, kwargs), point)
            kept.append((env, assumes))
    return [size_fit.Base(env, assumes, unit) for env, assumes in kept]


_ERRORS = (ValueError, IndexError, TypeError)  # NumPy's refusals of shapes (and data's)
_SHAPE_WORDS = ("shape", "broadcast", "dimension", "align", "size", "axis", "length", "ndim",
                "1-d", "2-d", "1d", "2d")  # np.diag: "Input must be 1- or 2-d."


def shape_error(name: str, e: BaseException, errors: tuple[type[BaseException], ...] = _ERRORS,
                words: tuple[str, ...] = _SHAPE_WORDS) -> BaseException:
    """``e`` when the library refused the shapes (one of ``errors``, saying one of ``words``);
    any other failure (a data error such as ``LinAlgError``, an argument refused) stops the
    trace with a note."""
    text = str(e).lower()
    if isinstance(e, errors) and any(w in text for w in words) and \
            "unexpected keyword" not in text and "not a valid" not in text:
        return e
    raise tracing.Unsupported(f"{name} ({type(e).__name__}: {size_fit.short(e)})") from None


def fitted(name: str, args: Any, kwargs: Any, call: Callable[[Any, Any], Any],
           make: Callable[[tuple[int, ...], str], Any], arrays: type[Any] | tuple[type[Any], ...],
           make_data: Callable[[tuple[int, ...], str], Any] | None = None,
           allocates: bool = True, *, op: Any) -> Any:
    """Trace a library function ``op`` by fitting (:func:`tensig.check.size_fit.fit`), once
    per :func:`tensig.check.size_fit.fit_key` with the call's witnesses (the runs start there).

    ``call(args, kwargs)`` runs it on arrays ``make(shape, kind)`` builds (zeros, or JAX's
    shape-only stand-ins); result leaves of the types ``arrays`` are arrays, an int a size.
    ``make_data`` fills distinct values: a size that differs between the fills depends on the
    data (a fresh size), and it is the fill where the library refuses zeros (a singular
    matrix).  Where the library ``allocates``, a run too large to build is refused.  A failure
    at the witnesses is a shape finding when the library's message says so, else a note.
    """
    t = tracer()
    witness, unit = t.assumption_env(), t.unit()
    at = {n: witness[n] for n in size_fit.symbols((args, kwargs))}

    def run(env: dict[str, int], fill: Callable[..., Any] = make) -> Any:
        if allocates:
            size_fit.size_guard((args, kwargs), env)

        def array(v: Any) -> Any:
            if not isinstance(v, S.SymArray):
                return v
            return fill(tuple(d.evaluate(env) for d in v.dims), v.kind)
        return call(size_fit.concrete(args, env, array), size_fit.concrete(kwargs, env, array))

    def leaf(x: Any) -> tuple[Any, ...]:
        return ("array", S.kind_of(x.dtype) or "f") if isinstance(x, arrays) else ("value", x)

    def rejected(error: BaseException) -> size_fit.Fit:
        said = size_fit.named(str(error), at)  # in the symbols
        first = next((a for a in size_fit.leaves(args) if isinstance(a, S.SymArray)), None)
        return ("array", first.dims if first is not None else (), "f"), (tracing.Finding(
            size_fit.failure_kind(said), f"{name} fails on these shapes at every size: "
                                         f"{said}"),), False

    def fit() -> size_fit.Fit:
        bases = _bases(at, unit, args, kwargs, allocates)
        if allocates:
            size_fit.size_guard((args, kwargs), at)
        return size_fit.fit(
            name, run, functools.partial(size_fit.shapes, arrays=arrays), args, kwargs, bases,
            classify=functools.partial(shape_error, name), errors=_ERRORS,
            rejected=rejected, template_of=lambda sample, fits, base: size_fit.template(
                sample, iter(fits), leaf),
            data=None if make_data is None else functools.partial(run, fill=make_data),
            allocates=allocates)


    key = size_fit.fit_key((name, op), args, kwargs, (tuple(at.items()), unit))
    return size_fit.build(size_fit.cached(key, fit, (args, kwargs)))


def fitted_numpy(func: Any, args: Any, kwargs: Any, name: str | None = None) -> Any:
    """A NumPy (or SciPy) function not modelled by hand: fitted from runs on zero arrays."""
    def zeros(shape: tuple[int, ...], kind: str) -> Any:
        return np.zeros(shape, S.DTYPES[kind])

    def distinct(shape: tuple[int, ...], kind: str) -> Any:
        """Distinct nonzero values; floats below 1, so a float read as a count (``np.tile``'s
        reps) is refused, not a result of T! cells."""
        if kind == "b":
            return np.ones(shape, np.bool_)
        ramp = np.arange(math.prod(shape)).reshape(shape) + 1
        return (ramp if kind == "i" else ramp / (ramp.size + 1)).astype(S.DTYPES[kind])

    return fitted(name or f"numpy.{func.__name__}", args, kwargs, lambda a, k: func(*a, **k), zeros,
                  (np.ndarray, np.generic), distinct, op=func)


def _sequence_of_rows(name: str, model: Callable[..., Any]) -> Callable[..., Any]:
    """``np.concatenate(x)`` of one array treats its rows as the sequence: fitted."""
    def impl(arrays: Any, *args: Any, **kw: Any) -> Any:
        if isinstance(arrays, S.SymArray):
            return fitted_numpy(getattr(np, name), (arrays, *args), kw)
        return model(arrays, *args, **kw)
    return impl


# -- SciPy: its functions convert their operands with np.asarray, so they are patched by name --


def _logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False,
               return_sign: bool = False) -> Any:
    out = S.reduce_(a if b is None else S.elementwise([a, b]), axis, keepdims, "f")
    return (out, S.SymArray(out.dims, "f")) if return_sign else out


def _cdist(xa: Any, xb: Any, *args: Any, **kw: Any) -> S.SymArray:
    """SciPy's ``cdist`` and torch's (batched: leading axes broadcast)."""
    a, b = S._sym(xa), S._sym(xb)
    if differ(a.dims[-1], b.dims[-1]):
        tracer().report("contraction", f"cdist compares points of {a.dims[-1]} and "
                                       f"{b.dims[-1]} coordinates ({shape_text(a)} and "
                                       f"{shape_text(b)})")
    batch, _ = broadcast([S.SymArray(a.dims[:-2]), S.SymArray(b.dims[:-2])], "cdist's batch")
    return S.SymArray((*batch, a.dims[-2], b.dims[-2]), "f")


def _solved(a: Any, b: Any, *args: Any, **kw: Any) -> S.SymArray:
    """``solve``, ``solve_triangular``; ``cho_solve((c, lower), b)``, ``lu_solve``."""
    return _solve(a[0] if isinstance(a, tuple) else a, b)


def _scipy_eigh(a: Any, b: Any = None, *args: Any, eigvals_only: bool = False,
                subset_by_index: Any = None, **kw: Any) -> Any:
    """``subset_by_index=[n - k, n - 1]`` (the ``k`` largest): ``hi - lo + 1`` of them."""
    x = S._sym(a)
    n = _square(x, "eigh")
    if subset_by_index is not None:
        n = sym_sizes.as_dim(subset_by_index[1]) - sym_sizes.as_dim(subset_by_index[0]) + 1
    w = S.SymArray((*x.dims[:-2], n), "f")
    return w if eigvals_only else (w, S.SymArray((*x.dims[:-1], n), "f"))


def _pdist(x: Any, *args: Any, **kw: Any) -> S.SymArray:
    """One distance per pair of rows: ``N * (N - 1) / 2``."""
    return S.SymArray((sym_indexing.triangle(S._sym(x).dims[0], 1),), "f")


def _squareform(x: Any, *args: Any, **kw: Any) -> S.SymArray:
    """A matrix's pairs (``[N, N]``: ``N * (N - 1) / 2``), or back: the ``N`` whose pairs a
    vector holds, where its size is written so (``pdist``'s); else a fresh size."""
    a = S._sym(x)
    if a.ndim == 2:
        return _pdist(a)
    d = a.dims[0]
    n = next((Dim.symbol(s) for s in sorted(d.symbols)
              if d == sym_indexing.triangle(Dim.symbol(s), 1)), None)
    return S.SymArray((n, n) if n is not None else (tracer().new_dim("n"),) * 2, "f")


SCIPY: dict[str, Callable[..., Any]] = {
    "special.logsumexp": _logsumexp,
    **dict.fromkeys(("special.softmax", "special.log_softmax"), S.unary("f", axis=True)),
    **{f"linalg.{w}": _of_square(w, "bnn") for w in ("inv", "cholesky", "expm", "sqrtm",
                                                      "logm")},
    "linalg.cho_factor": lambda a, lower=False, **kw: (_of_square("cho_factor", "bnn")(a),
                                                       lower),
    **dict.fromkeys(("linalg.solve", "linalg.solve_triangular", "linalg.cho_solve",
                     "linalg.lu_solve"), _solved),
    "linalg.det": _of_square("det", "b"),
    "linalg.eigh": _scipy_eigh,
    "linalg.eigvalsh": _of_square("eigvalsh", "bn"),
    "linalg.svd": lambda a, full_matrices=True, compute_uv=True, **kw: _svd(
        a, full_matrices, compute_uv),
    "linalg.lstsq": lambda a, b, *args, **kw: _lstsq(a, b),
    "linalg.pinv": lambda a, *args, **kw: S.swapaxes(a, -1, -2),
    "linalg.norm": S.NUMPY["linalg.norm"],
    "spatial.distance.cdist": _cdist,
    "spatial.distance.pdist": _pdist,
    "spatial.distance.squareform": _squareform,
}
"""SciPy functions by hand (``module.name`` below ``scipy``); others are fitted as NumPy's."""


def _scipy_wrapper(name: str, original: Any) -> Any:
    """SciPy's ``name`` on symbolic values: by hand (:data:`SCIPY`), else fitted."""
    return sym_functions.creation_wrapper(original, SCIPY.get(name) or (
        lambda *args, **kw: fitted_numpy(original, args, kw, f"scipy.{name}")))


@functools.cache
def _scipy_wrappers(module_names: tuple[str, ...]
                    ) -> tuple[list[tuple[Any, str, Any]], dict[int, Any]]:
    """The patches ``(module, name, wrapper)`` of the public functions of SciPy's imported
    modules (its ufuncs reach ``__array_ufunc__``), and the wrappers by their original's id
    (for names imported into a function's globals)."""
    patches, by_id = [], {}
    for module_name in module_names:
        module = sys.modules[module_name]
        for name, obj in vars(module).items():
            if not name.startswith("_") and inspect.isfunction(obj):
                wrapper = _scipy_wrapper(f"{module_name.removeprefix('scipy.')}.{name}", obj)
                patches.append((module, name, wrapper))
                by_id[id(obj)] = wrapper
    return patches, by_id


class _Concatenator:
    """``np.r_[a, b]`` (joined on the first axis) and ``np.c_[X, ones]`` (vectors as columns)
    of symbolic arrays; slices and string directives go to NumPy's own."""

    def __init__(self, original: Any, join: Callable[[Any], S.SymArray]):
        self.original, self.join = original, join

    def __getitem__(self, key: Any) -> Any:
        items = key if isinstance(key, tuple) else (key,)
        if tracing._TRACER.get() is None or not sym_functions.has_sym(items) or \
                any(isinstance(x, slice | str) for x in items):
            return self.original[key]
        return self.join(items)


class _Grid:
    """``np.mgrid[0:H, 0:W]`` (the stack ``[2, H, W]``) and ``np.ogrid`` (``[H, 1]`` and
    ``[1, W]``) with symbolic bounds; a stepped one's length is a fresh size."""

    def __init__(self, original: Any, sparse: bool):
        self.original, self.sparse = original, sparse

    def __getitem__(self, key: Any) -> Any:
        items = key if isinstance(key, tuple) else (key,)
        if tracing._TRACER.get() is None or not all(isinstance(s, slice) for s in items) or \
                not sym_functions.has_sym([(s.start, s.stop, s.step) for s in items]):
            return self.original[key]
        n = [tracer().new_dim("grid") if s.step is not None else
             sym_sizes.as_dim(s.stop) - sym_sizes.as_dim(0 if s.start is None else s.start)
             for s in items]
        if not isinstance(key, tuple):
            return S.SymArray(n, "i")
        grid = _indices(n, sparse=self.sparse)
        return list(grid) if self.sparse else grid


_STRIDED = sym_functions.creation_wrapper(np.lib.stride_tricks.as_strided, _as_strided)
_FREQS = [(np.fft, "fftfreq", sym_functions.creation_wrapper(
              np.fft.fftfreq, lambda n, d=1.0, **kw: S.SymArray((n,), "f"))),
          (np.fft, "rfftfreq", sym_functions.creation_wrapper(  # NumPy asks for an int
              np.fft.rfftfreq, lambda n, d=1.0, **kw: S.SymArray((n // 2 + 1,), "f")))]


def library_targets(fn: Any = None) -> list[tuple[Any, str, Any]]:
    """What verification patches besides creation functions: ``np.r_``, ``c_``, ``mgrid``,
    ``ogrid``, ``as_strided`` and ``np.fft``'s frequencies, NumPy's random generators
    (:func:`~tensig.check.trace_random.samplers`), and, when ``fn``'s module uses SciPy, SciPy's
    functions (both also where imported by name into ``fn``'s globals).  About 2 us each."""
    namespace = getattr(fn, "__globals__", None)
    out: list[tuple[Any, str, Any]] = [(np, "r_", _Concatenator(np.r_, _stacked(1, 0))),
                                       (np, "c_", _Concatenator(np.c_, _column_stack)),
                                       (np, "mgrid", _Grid(np.mgrid, False)),
                                       (np, "ogrid", _Grid(np.ogrid, True)),
                                       (np.lib.stride_tricks, "as_strided", _STRIDED),
                                       *_FREQS,
                                       *trace_random.samplers(fn)]
    strided = np.lib.stride_tricks.as_strided  # reads the array's memory in C: by name too
    if isinstance(namespace, dict) and id(strided) in map(id, namespace.values()):  # in C
        out += [(tracing.Namespace(namespace), n, _STRIDED) for n, v in namespace.items()
                if v is strided]
    names = tuple(m for m in ("scipy.special", "scipy.linalg", "scipy.spatial.distance",
                              "scipy.ndimage", "scipy.signal") if m in sys.modules)
    if not names or not isinstance(namespace, dict):
        return out
    uses, imported = _scipy_globals(namespace, names)
    if not uses:
        return out
    patches, by_id = _scipy_wrappers(names)
    globals_ = tracing.Namespace(namespace)
    return out + patches + [(globals_, name, by_id[id(namespace[name])]) for name in imported]


#: per globals dict (its id): its fingerprint and what :func:`_scipy_globals` found in it
_SCANNED: dict[int, tuple[Any, tuple[bool, tuple[str, ...]]]] = {}


def _scipy_globals(namespace: dict[str, Any], names: tuple[str, ...]
                   ) -> tuple[bool, tuple[str, ...]]:
    """Whether a module's globals use SciPy (hold a SciPy module or function), and the names
    bound to SciPy's functions.  The scan is kept while the globals hold the same objects (by
    id: SciPy's are kept alive by :func:`_scipy_wrappers`) under the same names."""
    key = (names, tuple(namespace), tuple(map(id, namespace.values())))
    seen = _SCANNED.get(id(namespace))
    if seen is not None and seen[0] == key:
        return seen[1]
    values = list(namespace.values())
    uses = any(str(getattr(v, "__name__" if module else "__module__", None)).startswith("scipy")
               for v in values  # type(v): isinstance reads a lazy proxy's __class__
               if (module := issubclass(type(v), ModuleType)) or type(v) is FunctionType)
    by_id = _scipy_wrappers(names)[1]
    found = uses, tuple(n for n, v in zip(key[1], values, strict=True) if id(v) in by_id)
    kept(_SCANNED, id(namespace), (key, found), 256)  # one per module (an exec'd namespace)
    return found


for _name in ("concatenate", "concat", "stack", "hstack", "vstack", "dstack", "column_stack"):
    # the model by name, not the table's entry: run again (verifying a folder that holds this
    # file), that is the wrapper already, and each run nested one more
    NUMPY_EXTRA[_name] = _sequence_of_rows(_name, NUMPY_EXTRA.get(_name) or
                                           sym_functions.SHARED[_name])
S.NUMPY.update(NUMPY_EXTRA)
S.CREATION_NUMPY.update(CREATION_EXTRA)
tracing.PLUGINS["numpy_fallback"] = fitted_numpy
