"""Symbolic arrays: run array code once with sizes that are symbols, for all sizes at once.

A :class:`SymArray` has a shape of :class:`~tensig.core.dims.Dim` values and no data.  It answers
NumPy's and torch's protocols and the usual array methods, computing each result's symbolic
shape and recording a :class:`Finding` where an operation needs two different sizes equal,
stretches both operands into an outer product, reshapes where a transpose was meant, or assumes
a size condition.  Operations dispatch by name through :data:`NUMPY` and :data:`TORCH`; anything
else goes to the library's model (:data:`~tensig.check.tracing.PLUGINS`), which fits it or stops
the trace with a note (the report is then incomplete, never silently wrong).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

import numpy as np

from tensig.check.broadcasting import (
    broadcast,
    carry_strides,
    differ,
    shape_text,
    strides_of,
    write_shared,
)
from tensig.check.reshape_order import Skew, carry_skew, divide, order_lint, view_strides
from tensig.check.sym_indexing import at_most, check_index, slice_len
from tensig.check.sym_sizes import (
    _LEN,
    _RANGE,
    ONE,
    SymRange,
    SymSize,
    _LoopInt,
    as_dim,
)
from tensig.check.tracing import (
    _TORCH_STYLE,
    _TRACER,
    PLUGINS,
    Finding,
    TraceLimit,
    Tracer,
    Unsupported,
    plugin,
    tracer,
)
from tensig.core.dims import Dim

#: Finding, SymSize, TraceLimit, Tracer and Unsupported are re-exported: their home moved in 0.2.
__all__ = ["CREATION_NUMPY", "CREATION_TORCH", "NUMPY", "TORCH", "Finding", "SymArray", "SymSize",
           "TraceLimit", "Tracer", "Unsupported", "kind_of", "sym_len"]

#: ``numpy.<name>`` (``"linalg.norm"`` for submodules) -> its model on symbolic arrays.
NUMPY: dict[str, Callable[..., Any]] = {}
#: ``torch.<name>`` (functions, ``Tensor`` methods and ``nn.functional``) -> its model.
TORCH: dict[str, Callable[..., Any]] = {}
#: Creation functions verification patches to take symbolic sizes (``np.zeros(B, T)``).
CREATION_NUMPY: dict[str, Callable[..., Any]] = {}
CREATION_TORCH: dict[str, Callable[..., Any]] = {}
#: Each element kind's dtype, by the name NumPy, torch and JAX all give it.
DTYPES = {"c": "complex64", "f": "float32", "i": "int64", "b": "bool"}


def sym_len(x: Any) -> Any:
    """``len()`` during verification: a symbolic array's first size stays a symbol."""
    if _TRACER.get() is not None:
        if isinstance(x, SymArray) and x.dims:
            return x.shape[0]
        if isinstance(x, SymRange) and x.step == 1:
            return SymSize(x.stop - x.start)
    return _LEN(x)


# -- Arrays ------------------------------------------------------------------------------------


def reduction(kind: str | None = None, nonempty: bool = False) -> Callable[..., SymArray]:
    """``sum`` and friends, NumPy's or torch's, of element kind ``kind`` (None: the operand's).
    A positional argument past the axis is torch's ``keepdim`` only as a bool (NumPy's is a
    dtype).  With ``nonempty`` (``max``: no identity) an axis that may be empty is assumed not."""
    def model(a: Any, axis: Any = None, *args: Any, **kw: Any) -> SymArray:
        keep = args[0] if args and isinstance(args[0], bool) else _keep(kw)
        axis = axis if axis is not None else kw.get("dim")
        dims = _sym(a).dims
        for i in _axes(axis, len(dims)) if nonempty else ():  # x[:, 1:].max(1) at T = 1
            at_most(ONE, dims[i], "index", f"a reduction over an empty axis ({dims[i]})",
                    f"a reduction with no identity over an axis of size {dims[i]}")
        return reduce_(_mask(a, kw), axis, keep, kind)

    return model


def unary(kind: str | None = None, axis: bool = False) -> Callable[..., SymArray]:
    """An elementwise function or method, of element kind ``kind`` (:func:`result_kind`); with
    ``axis``, the ``dim``/``axis`` argument (``softmax(x, dim)``) must name an axis."""
    def model(x: Any, *args: Any, **kw: Any) -> SymArray:
        a = _sym(x)
        if axis:  # checked to be in range
            _axes(kw.get("dim", kw.get("axis", args[0] if args else None)), a.ndim)
            _mask(a, kw)
        return SymArray(a.dims, result_kind(kind, {a.kind}), a.loose)

    return model


def result_kind(kind: str | None, kinds: set[str]) -> str:
    """``kind`` where the operation fixes it, else the widest operand's; a complex operand
    keeps a float operation complex (``z / 2``); ``"r"`` (``abs``) is a complex's real kind."""
    widest = next((k for k in "cfib" if k in kinds), "b")
    if kind == "r":
        return "f" if widest == "c" else widest
    return "c" if kind == "f" and widest == "c" else kind or widest


def _mask(a: Any, kw: dict[str, Any]) -> Any:
    """The operand of a reduction or softmax, whose ``where=`` mask must broadcast into it (a
    ``[B, T]`` mask of ``[B, T, D]`` needs ``m[..., None]``), broadcast with logsumexp's ``b=``
    weights, which JAX and SciPy broadcast both ways."""
    if kw.get("where") is not None and not isinstance(kw["where"], bool):
        into(_sym(a), kw["where"], "the where= mask")
    if kw.get("b") is not None:
        return elementwise([a, kw["b"]], _sym(a).kind, "logsumexp's b= weights")
    return a


def binary(kind: str | None = None, reverse: bool = False) -> Callable[..., SymArray]:
    """A broadcasting binary function or operator (``reverse``: reflected) of kind ``kind``."""
    return lambda a, b, *args, **kw: elementwise([b, a] if reverse else [a, b], kind)


def _extreme(name: str) -> Callable[..., Any]:
    """``max``/``min``: a reduction, or in torch code torch's (values and indices)."""
    def method(self: SymArray, *args: Any, **kw: Any) -> Any:
        if _TORCH_STYLE.get():
            return plugin("torch_attribute")(self, name)(*args, **kw)
        return reduction(nonempty=True)(self, *args, **kw)

    return method


#: The element kind of elementwise functions that do not keep their operands' (NumPy's ufuncs,
#: torch's and JAX's functions of the same meaning): ``"b"`` a predicate, ``"f"`` float.
RESULT_KIND: dict[str, str] = {
    **dict.fromkeys(("less", "less_equal", "greater", "greater_equal", "equal", "not_equal",
                     "logical_and", "logical_or", "logical_not", "logical_xor", "isnan", "isinf",
                     "isfinite", "is_finite", "signbit", "eq", "ne", "lt", "le", "gt", "ge"), "b"),
    **dict.fromkeys(("true_divide", "divide", "div", "float_power", "exp", "log", "sqrt", "rsqrt",
                     "tanh", "sin", "cos", "exp2", "log2", "log10", "log1p", "expm1", "reciprocal",
                     "arctan", "power", "erf", "erf_inv", "logistic", "cbrt", "sigmoid"), "f"),
    **dict.fromkeys(("abs", "absolute", "angle"), "r"),  # a complex's: real
}


_NUMPY_METHODS = frozenset(("cumsum", "cumprod", "argsort", "argpartition", "searchsorted",
                            "diagonal", "trace", "nonzero", "take", "conj"))  # NumPy's own


class SymArray:
    """An array with a symbolic shape and no data: ``kind`` is the dtype kind (``"c"``,
    ``"f"``, ``"i"``, ``"b"``), ``loose`` the size-1 axes from the outside (see
    :mod:`~tensig.check.broadcasting`)."""

    __array_priority__ = 1000
    skew: Skew | None = None  # the reorder that made it (reshape_order.Skew)
    # strides at the witness where not C order's: a permute's, an expand's (0: an axis whose
    # elements share one memory), carried through views (broadcasting.carry_strides)
    moved: tuple[int, ...] | None = None

    def __init__(self, dims: Iterable[Dim | int], kind: str = "f",
                 loose: frozenset[int] = frozenset()):
        self.dims = tuple(as_dim(d) for d in dims)
        self.kind = kind
        self.loose = loose
        t = _TRACER.get()
        if t is not None:
            t.made(self)
        self.made_at = 0 if t is None else t.steps  # see Tracer.begin and Tracer.loop_of

    # -- describing ------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[Any, ...]:
        return tuple(SymSize(d) if d.constant is None else d.constant for d in self.dims)

    @property
    def ndim(self) -> int:
        return len(self.dims)

    @property
    def dtype(self) -> Any:
        """torch's dtype in torch code, else NumPy's, so ``np.finfo(x.dtype)`` works."""
        if _TORCH_STYLE.get():
            return plugin("torch_dtype")(self)
        return np.dtype(DTYPES.get(self.kind, "float32"))

    @property
    def strides(self) -> tuple[Any, ...]:
        """C order's, in bytes: code passes them on to ``as_strided`` (``x.strides * 2``)."""
        out = [as_dim(self.dtype.itemsize)]
        for d in reversed(self.dims[1:]):
            out.insert(0, out[0] * d)
        return tuple(SymSize(d) if d.constant is None else d.constant for d in out)

    def __getattr__(self, name: str) -> Any:
        """torch's attributes not defined here, in torch code or where NumPy has none."""
        if name in _NUMPY_METHODS and not _TORCH_STYLE.get():  # x.cumsum(0): np.cumsum(x, 0)
            return lambda *args, **kw: getattr(np, name)(self, *args, **kw)
        if name.startswith("_") or "torch" not in sys.modules or \
                (not _TORCH_STYLE.get() and hasattr(np.ndarray, name)):
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        if name.endswith("_"):  # torch's in-place methods (``m.logical_and_(k)``)
            tracer().written(self)
            write_shared(self, name)
        if name in _DRAWS and tracer().random_refused:  # x.uniform_(), x.bernoulli()
            _refused_draw(name, (self,), {})
        return plugin("torch_attribute")(self, name)

    @property
    def size(self) -> _Size:
        """NumPy's (and JAX's) element count, that called is torch's ``.size(dim)``."""
        return _Size(self)

    def numel(self) -> Any:
        return SymSize(math.prod(self.dims, start=ONE))

    def __len__(self) -> int:
        if not self.dims:
            raise TypeError("len() of a 0-d array")
        return tracer().leak(self.dims[0])

    def __iter__(self) -> Any:
        """Rows along the first axis (``for row in X``, ``k, v = kv``)."""
        if not self.dims:
            raise TypeError("iteration over a 0-d array")
        return _rows(self, self.dims[0])

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        raise Unsupported("converting a symbolic array to a concrete one (np.asarray, or "
                          "assigning it into a concrete array)")

    def __setitem__(self, key: Any, value: Any) -> None:
        """The value must broadcast into the target slice, its leading 1s beyond the target's
        rank dropped, as NumPy and torch do; in torch not into a view whose elements share
        memory (``write_shared``)."""
        target, v = getitem(self, key), _sym(value)
        tracer().written(self)
        write_shared(target, "an assignment")
        while v.ndim > target.ndim and v.dims[0] == ONE:
            v = SymArray(v.dims[1:], v.kind)
        into(target, v, "an assignment")

    def _inplace(self, o: Any) -> SymArray:
        into(self, o, "an in-place operation")
        tracer().written(self)
        write_shared(self, "an in-place operator")
        return self

    __iadd__ = __isub__ = __imul__ = __itruediv__ = __ifloordiv__ = __ipow__ = _inplace

    def __repr__(self) -> str:
        return f"SymArray{shape_text(self)}"

    # -- elementwise -----------------------------------------------------------------------
    _same = unary()
    __add__ = __sub__ = __mul__ = __floordiv__ = __mod__ = __pow__ = binary()
    __and__ = __or__ = __xor__ = binary()
    __radd__ = __rsub__ = __rmul__ = __rpow__ = binary(reverse=True)
    __truediv__, __rtruediv__ = binary("f"), binary("f", reverse=True)
    __lt__ = __le__ = __gt__ = __ge__ = binary("b")
    __eq__ = __ne__ = binary("b")  # type: ignore[assignment]
    __invert__ = __neg__ = __pos__ = _same
    __abs__ = _magnitude = unary("r")

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise Unsupported("the truth value of an array depends on its data")

    def __matmul__(self, o: Any) -> SymArray:
        return matmul(self, o)

    def __rmatmul__(self, o: Any) -> SymArray:
        return matmul(o, self)

    dot = __matmul__  # NumPy's X.dot(w)

    # -- methods shared by numpy and torch ---------------------------------------------------
    def __getitem__(self, key: Any) -> SymArray:
        out = getitem(self, key)
        out.skew = carry_skew(self, key)
        return out

    def reshape(self, *shape: Any, **kw: Any) -> SymArray:
        return reshape(self, _varargs(shape, kw.get("shape")))

    def view(self, *shape: Any, **kw: Any) -> SymArray:
        """torch's view: of a permuted or expanded tensor only where its strides allow it
        (torch raises, reshape copies), decided at the witness, whose sizes are all above 1."""
        out = self.reshape(*shape, **kw)
        if self.moved is not None and out.moved is None and _TORCH_STYLE.get():
            tracer().report("op-shape", f"view of a permuted or expanded {shape_text(self)} as "
                            f"{shape_text(out)}: torch raises (its strides do not allow it); "
                            "use reshape, or contiguous() first")
        return out

    def view_as(self, o: Any) -> SymArray:
        return reshape(self, _sym(o).dims)

    reshape_as = view_as

    def transpose(self, *axes: Any) -> SymArray:
        if len(axes) == 2 and all(isinstance(a, int) for a in axes) and \
                (_TORCH_STYLE.get() is not False or self.ndim != 2):  # NumPy's (0, 1)
            # keeps a matrix; in code that names neither library it is read as torch's swap
            return swapaxes(self, axes[0], axes[1])  # torch's transpose(d0, d1)
        return permute(self, _varargs(axes) or None)

    def permute(self, *axes: Any) -> SymArray:
        return permute(self, _varargs(axes))

    def swapaxes(self, a: int, b: int) -> SymArray:
        return swapaxes(self, a, b)

    @property
    def T(self) -> SymArray:
        return permute(self)

    @property
    def mT(self) -> SymArray:
        return swapaxes(self, -1, -2)

    @property
    def flat(self) -> SymArray:
        """NumPy's flat view (``cov.flat[::d + 1] += reg``: the diagonal)."""
        return SymArray((math.prod(self.dims, start=ONE),), self.kind)

    @property
    def real(self) -> SymArray:
        """A complex array's parts (``np.fft.rfft(x).real``): its shape, of real kind."""
        return SymArray(self.dims, result_kind("r", {self.kind}))

    imag = real

    @property
    def at(self) -> Any:
        """JAX's functional update, ``x.at[idx].set(v)``: ``v`` must fit the slice."""
        return plugin("jax_at")(self)

    def squeeze(self, *axis: Any, **kw: Any) -> SymArray:
        return squeeze(self, axis[0] if axis else kw.get("axis", kw.get("dim")))

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> SymArray:
        s, e = _axis(start_dim, self.ndim), _axis(end_dim, self.ndim)
        merged = math.prod(self.dims[s:e + 1], start=ONE)
        return SymArray((*self.dims[:s], merged, *self.dims[e + 1:]), self.kind)

    def ravel(self, order: str = "C") -> SymArray:
        return self.flatten()

    def expand(self, *sizes: Any) -> SymArray:
        target = _varargs(sizes)
        off = len(target) - self.ndim  # -1 keeps the size
        return broadcast_to(self, [self.dims[i - off] if isinstance(s, int) and s == -1 else
                                   as_dim(s) for i, s in enumerate(target)])

    def repeat(self, *reps: Any, **kw: Any) -> SymArray:
        """NumPy's (each element, along ``axis``) in code that names no torch; in code that names
        neither library ``x.repeat(2, 1)`` may be torch's tile (a tensor passed in): where the
        two differ, an assumption."""
        if _TORCH_STYLE.get():
            return tile(self, _varargs(reps))
        out = cast(SymArray, np.repeat(self, *reps, **kw))
        if _TORCH_STYLE.get() is None and len(reps) == 2 and not kw and len(reps) >= self.ndim:
            torch_s = tile(self, reps)
            if torch_s.dims != out.dims:
                tracer().report("assumption", f"assumes x.repeat{reps} is NumPy's (each element "
                                f"along an axis: {shape_text(out)}), not torch's tile "
                                f"({shape_text(torch_s)}): the code names no torch")
        return out

    def masked_fill(self, mask: Any, value: Any) -> SymArray:
        into(self, mask, "masked_fill's mask")
        return self._same()

    sum = prod = reduction()
    amax = amin = reduction(nonempty=True)
    mean = std = var = logsumexp = reduction("f")
    argmax = argmin = reduction("i", nonempty=True)
    all = any = reduction("b")

    max, min = _extreme("max"), _extreme("min")

    abs = _magnitude
    round = copy = cpu = cuda = numpy = _same  # torch's other methods: __getattr__

    def clip(self, *bounds: Any, **kw: Any) -> SymArray:
        return clip(self, *bounds, **kw)

    def _cast(self, dtype: str, copy: Any = False) -> SymArray:
        """A cast to ``dtype`` (a float's of a complex: its real part).  torch returns the
        tensor itself where it has that dtype, ``detach()`` a view: either shares memory
        (an expand's, written into: :func:`~tensig.check.broadcasting.write_shared`)."""
        out = SymArray(self.dims, kind_of(dtype) or self.kind, self.loose)
        if dtype == DTYPES.get(self.kind) and _TORCH_STYLE.get() and not copy:
            out.moved = self.moved
        return out

    float, double, half, bfloat16, long, bool, detach = (  # detach(): to its own dtype
        lambda self, *a, _t=t, **kw: self._cast(_t or DTYPES.get(self.kind, "float32"))
        for t in ("float32", "float64", "float16", "bfloat16", "int64", "bool", ""))
    int = unary("i")

    def to(self, *args: Any, **kw: Any) -> SymArray:
        dtype = DTYPES.get(self.kind, "float32")
        for a in (*args, kw.get("dtype")):  # a dtype, or an array: its dtype (x.to(other))
            if kind_of(a) is not None:
                dtype = str(getattr(a, "dtype", a)).rpartition(".")[2]
        return self._cast(dtype, kw.get("copy"))  # copy=True: never itself

    type_as = to

    def astype(self, *a: Any, copy: Any = True, **kw: Any) -> SymArray:  # NumPy's: a copy
        return self.to(*a, copy=copy, **kw)

    # -- the protocols -----------------------------------------------------------------------
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if kwargs.get("out") is not None:
            raise Unsupported(f"numpy.{ufunc.__name__}(out=...)")
        kind = RESULT_KIND.get(ufunc.__name__)
        if method == "__call__":
            if ufunc.__name__ == "matmul":
                return matmul(*inputs)
            if ufunc.nout != 1:
                raise Unsupported(f"numpy.{ufunc.__name__} with {ufunc.nout} outputs")
            return elementwise(list(inputs), kind)
        if method == "reduce":
            return reduce_(inputs[0], kwargs.get("axis", 0), kwargs.get("keepdims", False))
        if method == "reduceat":  # np.add.reduceat(x, starts, axis): one per start
            a = _sym(inputs[0])
            ax = _axis(kwargs.get("axis", 0), a.ndim)
            return SymArray(a.dims[:ax] + _sym(inputs[1]).dims + a.dims[ax + 1:], kind or a.kind)
        if method == "accumulate":
            return SymArray(_sym(inputs[0]).dims, _sym(inputs[0]).kind)
        if method == "at":  # np.add.at(a, idx, b): in place, b must fit a[idx]
            if len(inputs) > 2:
                into(getitem(_sym(inputs[0]), inputs[1]), inputs[2], f"numpy.{ufunc.__name__}.at")
            return None
        if method == "outer":  # np.subtract.outer(a, b): an outer product asked for by name
            a, b = _sym(inputs[0]), _sym(inputs[1])
            return SymArray(a.dims + b.dims, kind or a.kind)
        raise Unsupported(f"numpy.{ufunc.__name__}.{method}")

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        sub = str(getattr(func, "__module__", "")).removeprefix("numpy").strip(".")
        impl = NUMPY.get(f"{sub}.{func.__name__}") if sub and "_" not in sub[:1] else None
        impl = impl or NUMPY.get(func.__name__)
        if impl is None:  # not modelled by hand: fit its sizes from witness evaluations
            return plugin("numpy_fallback")(func, args, kwargs)
        return impl(*args, **kwargs)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        if name.endswith("_") and not name.endswith("__") and args:  # torch's in place
            tracer().written(args[0])
            write_shared(args[0], name)
        if name in _DRAWS and tracer().random_refused:
            _refused_draw(name, args, kwargs)
        impl = TORCH.get(name)
        if impl is None:  # torch's long tail: by hand, a SymArray method, or fitted on meta
            return plugin("torch_dispatch")(func, tuple(args), kwargs)
        return impl(*args, **kwargs)


PLUGINS["torch_function"] = SymArray.__torch_function__  # sym_sizes sits below this module

#: torch's ops that draw (a dropout where training, with p > 0), on a tensor or creating one
_DRAWN = """rand randn randint randperm rand_like randn_like randint_like bernoulli bernoulli_
multinomial normal normal_ poisson uniform_ exponential_ geometric_ cauchy_ log_normal_ random_
dropout dropout1d dropout2d dropout3d alpha_dropout feature_alpha_dropout feature_dropout"""
_DRAWS = frozenset(_DRAWN.split())


def _refused_draw(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
    """A random op under a torch.vmap whose randomness is "error" (its default), which torch
    raises on at every size (trace_jax._vmap counts them: Tracer.random_refused)."""
    if "dropout" in name:  # F.dropout(x, p, training); torch.dropout(x, p, train)
        p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
        if not p or not kwargs.get("training", kwargs.get("train", args[2] if len(args) > 2
                                                          else True)):
            return
    tracer().report("op-shape", f"torch.{name} under torch.vmap: vmap: called random operation "
                    "while in randomness error mode (torch.vmap's randomness='different' or "
                    "'same' allows it)")


class _Size(SymSize):
    """``x.size``: the element count, or called, torch's ``x.size(dim)``."""

    __slots__ = ("array",)

    def __init__(self, array: SymArray):
        super().__init__(math.prod(array.dims, start=ONE))
        self.array = array

    def __call__(self, dim: int | None = None) -> Any:
        a = self.array
        return a.shape if dim is None else a.shape[_axis(dim, a.ndim)]


def _rows(x: SymArray, n: Dim) -> Any:
    """``x``'s rows, the current one's index on the tracer: an ``enumerate``'s count over them
    indexes an axis of size ``n`` safely."""
    t = tracer()
    rows, loop = t.rows, t.begin(n)
    try:
        for i in _RANGE(loop.n):
            rows[n] = i
            yield getitem(x, _LoopInt(i, n))
    finally:
        rows.pop(n, None)
        loop.end = t.steps


def _keep(kw: dict[str, Any]) -> bool:
    return bool(kw.get("keepdims", kw.get("keepdim", False)))


def _varargs(args: Sequence[Any], kw: Any = None) -> tuple[Any, ...]:
    if kw is not None:
        return tuple(kw)
    if len(args) == 1 and hasattr(args[0], "__iter__") and not isinstance(args[0], SymArray):
        return tuple(args[0])
    return tuple(args)


def _axis(a: Any, ndim: int) -> int:
    a = int(a)
    if not -ndim <= a < max(ndim, 1):
        raise IndexError(f"axis {a} is out of range for an array of rank {ndim}")
    return a % ndim if ndim else 0


def _axes(axis: Any, ndim: int) -> set[int]:
    """An ``axis``/``dim`` argument (one, several, or None: every axis) as a set of axes."""
    if axis is None:
        return set(range(ndim))
    return {_axis(i, ndim) for i in (axis if isinstance(axis, tuple | list) else (axis,))}


#: kind ``k``: a JAX typed key (``key<fry>``), whose stand-ins are keys (trace_jax)
_KIND_WORDS = (("key<", "k"), ("bool", "b"), ("float", "f"), ("half", "f"), ("double", "f"),
               ("complex", "c"), ("int", "i"), ("long", "i"), ("short", "i"), ("byte", "i"))


def kind_of(dtype: Any) -> str | None:
    """The element kind of any library's dtype, dtype class, dtype name or array
    (``torch.int64``, ``np.float32``, ``"long"``, a tensor); None when it names none."""
    if isinstance(dtype, SymArray):
        return dtype.kind
    if not isinstance(dtype, type) and hasattr(dtype, "shape") and hasattr(dtype, "dtype"):
        dtype = dtype.dtype  # an array (a dtype or a scalar type has no instance .dtype)
    text = str(dtype)
    return next((kind for word, kind in _KIND_WORDS if word in text), None)


def _sym(x: Any) -> SymArray:
    """A symbolic view of any operand: SymArray, real array (constant sizes) or scalar."""
    if isinstance(x, SymArray):
        return x
    if isinstance(x, SymRange):
        return SymArray([x.stop - x.start if x.step == 1 else tracer().new_dim("r")], "i")
    if isinstance(x, SymSize):  # a size in arithmetic with arrays: an integer scalar
        return SymArray((), "i")
    if isinstance(x, int | float | bool | complex) or x is None:
        return SymArray((), "b" if isinstance(x, bool) else "i" if isinstance(x, int) else
                        "c" if isinstance(x, complex) else "f")
    shape = getattr(x, "shape", None)
    if shape is None:
        if isinstance(x, list | tuple | _RANGE):
            return _sym(np.asarray(x))
        raise Unsupported(f"an operand of type {type(x).__name__}")
    kind = kind_of(getattr(x, "dtype", "float")) or "f"
    dims: tuple[Dim | int, ...] = tuple(int(s) for s in shape)
    t = _TRACER.get()
    if t is not None and t.leaks and any(s in t.leaks for s in dims):
        dims = tuple(t.read_leak(int(s)) for s in dims)
    return SymArray(dims, kind)


def clip(a: Any, *bounds: Any, **kw: Any) -> SymArray:
    """``clip(x, lo, hi)`` by any library's keywords: bounds broadcast with ``x``."""
    given = [*bounds, *(kw.get(k) for k in ("min", "max", "a_min", "a_max"))]
    return elementwise([a, *(b for b in given if b is not None)], _sym(a).kind)


def elementwise(operands: list[Any], kind: str | None = None, what: str = "an elementwise "
                "operation") -> SymArray:
    arrays = [_sym(x) for x in operands]
    dims, loose = broadcast(arrays, what)
    return SymArray(dims, result_kind(kind, {a.kind for a in arrays}), loose)


def into(target: SymArray, x: Any, what: str) -> None:
    """``x`` must broadcast into ``target``'s shape without changing it."""
    dims, _ = broadcast([target, _sym(x)], what)
    if dims != target.dims:
        tracer().report("broadcast", f"{what} {shape_text(_sym(x))} does not fit "
                                     f"{shape_text(target)}")


def broadcast_to(x: Any, dims: Sequence[Any]) -> SymArray:
    a = _sym(x)
    target = tuple(as_dim(d) for d in dims)
    off = len(target) - a.ndim
    for i, d in enumerate(a.dims):
        if d != ONE and d != target[i + off]:
            tracer().report("broadcast", f"broadcasts {d} against {target[i + off]} (broadcast_to "
                            f"{shape_text(a)} -> {shape_text(target)})")
    out, strides = SymArray(target, a.kind), strides_of(a)
    out.moved = tuple(0 if i < off or a.dims[i - off] == ONE else strides[i - off]
                      for i in range(len(target)))  # a stride of 0: one element
    return out


# -- Operations --------------------------------------------------------------------------------


def reduce_(x: Any, axis: Any, keepdims: bool = False, kind: str | None = None) -> SymArray:
    a = _sym(x)
    axes = _axes(axis, a.ndim)
    if keepdims:
        dims = [ONE if i in axes else d for i, d in enumerate(a.dims)]
    else:
        dims = [d for i, d in enumerate(a.dims) if i not in axes]
    return SymArray(dims, result_kind(kind, {a.kind}))


def permute(x: Any, axes: Sequence[int] | None = None) -> SymArray:
    """The axes in the order ``axes`` (None: reversed, NumPy's ``transpose``)."""
    a = _sym(x)
    p = [_axis(i, a.ndim) for i in axes] if axes is not None else list(range(a.ndim))[::-1]
    if sorted(p) != list(range(a.ndim)):
        given = p if axes is None else axes  # an array of axes has no truth value
        raise ValueError(f"{list(given)} is not a permutation of the axes of {shape_text(a)}")
    out = SymArray([a.dims[i] for i in p], a.kind, frozenset(p.index(i) for i in a.loose))
    if a.ndim:  # its strides at the witness, for a view of it (SymArray.view)
        out.moved = tuple(strides_of(a)[i] for i in p)
    return out


def swapaxes(x: Any, i: int, j: int) -> SymArray:
    a = _sym(x)
    p = list(range(a.ndim))
    i, j = _axis(i, a.ndim), _axis(j, a.ndim)
    p[i], p[j] = p[j], p[i]
    return permute(a, p)


def moveaxis(x: Any, source: int, destination: int) -> SymArray:
    a = _sym(x)
    p = list(range(a.ndim))
    s = p.pop(_axis(source, a.ndim))
    p.insert(_axis(destination, a.ndim), s)
    return permute(a, p)


def tile(x: SymArray, r: Sequence[Any]) -> SymArray:
    """torch's ``x.repeat(*r)`` (einops' tile): each axis ``r`` times, new leading axes first."""
    dims = (ONE,) * (len(r) - x.ndim) + x.dims
    return SymArray([d * as_dim(n) for d, n in zip(dims, r, strict=True)], x.kind)


def expand_dims(x: Any, axis: int, size: Any = ONE) -> SymArray:
    """A new axis at ``axis`` (counted from the end when negative), of size 1 or ``size``;
    NumPy's tuple of axes counts them in the result."""
    a = _sym(x)
    n = a.ndim + (len(axis) if isinstance(axis, tuple | list) else 1)
    new = {_axis(ax, n) for ax in (axis if isinstance(axis, tuple | list) else (axis,))}
    rest = iter(range(a.ndim))
    origin = [None if i in new else (next(rest), 1) for i in range(n)]
    out = SymArray([as_dim(size) if o is None else a.dims[o[0]] for o in origin], a.kind)
    carry_strides(a, out, origin)
    return out


def squeeze(x: Any, axis: Any = None) -> SymArray:
    a = _sym(x)
    axes = _axes(axis, a.ndim)
    numpy = axis is not None and _TORCH_STYLE.get() is False  # torch keeps an axis not 1
    for i in sorted(axes):  # with no axis, a batch of 1 loses its axis too
        d, call = a.dims[i], "squeeze()" if axis is None else f"squeeze({i})"
        if d.constant is None and not numpy:
            at_most(ONE + 1, d, "index", f"{call} of an axis of size {d}",
                    f"{call} keeps an axis of size {d} only where it is not 1")
        elif d != ONE and numpy:
            tracer().report("op-shape", f"squeezes axis {i} of size {d} out of "
                                        f"{shape_text(a)}: NumPy raises unless it is 1")
    kept = [(i, 1) for i, d in enumerate(a.dims) if not (i in axes and d == ONE)]
    out = SymArray([a.dims[i] for i, _ in kept], a.kind)
    carry_strides(a, out, kept)
    return out


def reshape(x: Any, shape: Sequence[Any]) -> SymArray:
    a = _sym(x)
    total = math.prod(a.dims, start=ONE)
    target: list[Dim | None] = [None if isinstance(s, int) and not isinstance(s, bool) and s == -1
                                else as_dim(s) for s in shape]  # -1: the size inferred
    known = math.prod((part for part in target if part is not None), start=ONE)
    if None in target:
        target[target.index(None)] = divide(total, known)
    elif not tracer().equal_under_assumptions(known, total):
        tracer().report("reshape", f"reshape of {shape_text(a)} ({total} elements) into "
                                   f"{shape_text(target)} ({known} elements)")
        return SymArray([d for d in target if d is not None], a.kind)
    out = SymArray([d for d in target if d is not None], a.kind)
    out.skew = order_lint(a, out)
    if a.moved is not None and a.ndim:  # a view where the strides allow it, else a copy
        value = tracer().value
        out.moved = view_strides([value(d) for d in a.dims], a.moved,
                                 [value(d) for d in out.dims])
    return out


def getitem(x: SymArray, key: Any) -> SymArray:
    if not isinstance(key, tuple):
        key = (key,)
    used = sum(k.ndim if isinstance(k, SymArray) and k.kind == "b" else 1  # a mask: its rank
               for k in key if k is not None and k is not Ellipsis)
    if used > x.ndim:  # NumPy's IndexError, torch's too
        tracer().report("index", f"too many indices: {used} for an array of rank {x.ndim} "
                                 f"({shape_text(x)})")
        return SymArray(x.dims, x.kind)
    # ``...`` is found by identity: an index array's ``==`` is elementwise
    i = next((j for j, k in enumerate(key) if k is Ellipsis), len(key))
    key = key[:i] + (slice(None),) * (x.ndim - used) + key[i + 1:]
    dims: list[Dim] = []
    axis = 0
    advanced: list[SymArray] = []
    adv_pos = None
    origin: list[tuple[int, int] | None] = []  # of a basic index: a view (carry_strides)
    for k in key:
        if k is None:
            dims.append(ONE)
            origin.append(None)
            continue
        if isinstance(k, SymArray) and k.kind == "b":  # a boolean mask: a data-dependent size
            covered = x.dims[axis:axis + k.ndim]  # matched exactly: a mask does not broadcast
            if len(covered) != k.ndim or any(map(differ, k.dims, covered)):
                tracer().report("index", f"a boolean mask {shape_text(k)} indexes axes "
                                         f"{shape_text(SymArray(covered))} (they must match)")
            adv_pos = len(dims) if adv_pos is None else adv_pos
            dims.append(tracer().count_of(k))
            axis += k.ndim - 1
        elif isinstance(k, SymArray | list | _RANGE | SymRange) or \
                (hasattr(k, "shape") and not isinstance(k, SymSize)):
            adv_pos = len(dims) if adv_pos is None else adv_pos
            if (isinstance(k, list) and k and all(type(v) is int for v in k)) or \
                    (isinstance(k, np.ndarray) and k.dtype.kind in "iu" and k.size):
                top, low = int(np.max(k)), int(np.min(k))  # x[:, [0, 1]]: in range
                for v in {top if top >= 0 else low, low if low < 0 else top}:
                    check_index(x.dims[axis], v)
            advanced.append(_sym(k))
        elif isinstance(k, slice):
            dims.append(slice_len(x.dims[axis], k))
            origin.append((axis, int(k.step) if isinstance(k.step, int | np.integer) else 1))
        else:
            check_index(x.dims[axis], k)
        axis += 1
    if advanced:
        adv_dims, _ = broadcast(advanced, "advanced indexing")
        assert adv_pos is not None
        dims[adv_pos:adv_pos] = list(adv_dims)
    out = SymArray(dims, x.kind)
    if adv_pos is None:  # basic indexing: a view (advanced indexing copies)
        carry_strides(x, out, origin)
    return out


def matmul(a: Any, b: Any) -> SymArray:
    x, y = _sym(a), _sym(b)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError("matmul of a scalar")
    xd = list(x.dims) if x.ndim > 1 else [ONE, *x.dims]
    yd = list(y.dims) if y.ndim > 1 else [*y.dims, ONE]
    if differ(xd[-1], yd[-2]):
        tracer().report("contraction", f"matmul contracts {xd[-1]} with {yd[-2]} (shapes "
                                       f"{shape_text(x)} @ {shape_text(y)})")
    batch, _ = broadcast([SymArray(xd[:-2]), SymArray(yd[:-2])], "matmul's batch axes")
    out = list(batch) + ([xd[-2]] if x.ndim > 1 else []) + ([yd[-1]] if y.ndim > 1 else [])
    return SymArray(out, "f" if "f" in (x.kind, y.kind) else x.kind)
