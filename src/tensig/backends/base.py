"""The backend adapter's interface and the registry that picks one by the arrays' type.

Everything tensig knows about one array library lives in its adapter (the README's "How to
add a backend"); no other layer asks which library is in use.  An adapter is chosen as einops
chooses one, by the first class in the array's MRO whose top-level module an adapter claims (or
that :func:`register` names), so tensig never imports a library itself.
"""

from __future__ import annotations

import functools
import itertools
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, Protocol, TypeVar

import numpy as np

from tensig.backends._plans import small_amax
from tensig.backends.kernels import Kernels
from tensig.core.annotations import dtype_name

__all__ = ["Backend", "all_zero", "backend_among", "backend_for", "backend_named", "backend_of",
           "backend_of_namespace", "dtype_name", "graph_backends", "is_array", "is_integer",
           "library_of", "neutral_max", "neutral_min", "register", "to_numpy", "unregister"]


_P = ParamSpec("_P")
_R = TypeVar("_R", covariant=True)


class _Cached(Protocol[_P, _R]):
    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R: ...
    def cache_clear(self) -> None: ...


def _cache(fn: Callable[_P, _R]) -> _Cached[_P, _R]:
    """``functools.cache`` keeping ``fn``'s signature for mypy, which does not count a class
    as the ``Hashable`` typeshed's wrapper takes (``backend_for(type(x))``)."""
    return functools.cache(fn)


#: GELU's (tanh form) ``sqrt(2/pi)`` and the cubic's coefficient
GELU_C, GELU_K = math.sqrt(2.0 / math.pi), 0.044715


class Backend(Kernels):
    """The primitives the lowering uses; one subclass adapts one array library.  Each is written
    once over NumPy's API on the namespace ``xp`` (NumPy, JAX and Dask share it, overriding what
    differs; torch overrides them all).  ``name``: the library's name; ``modules``: the top-level
    modules whose arrays the adapter takes (the library's first)."""

    name = "abstract"
    modules: tuple[str, ...] = ()
    #: the library's namespace (``numpy``, ``torch``, ``jax.numpy``, ``dask.array``), which the
    #: primitives and the IR's generated code are written over
    xp: Any
    #: the name of the library's array type in ``xp``
    array_name = "ndarray"
    #: arrays are task graphs computed later (Dask): per-cell loops cannot read them
    lazy = False
    #: the arrays are ``numpy.ndarray``s: fast paths may call NumPy's ufunc methods on them
    numpy_native = False
    #: compiled routines (tensig.model.compile) run on the arrays
    compiles = False
    #: the array method that permutes axes, called by name in generated code
    permute_method = "transpose"
    #: fused ``x + c*y`` and ``x + c*p*q`` kernels (``add(alpha=)``, ``addcmul``) exist
    fused_axpy = False
    #: arrays can live on devices other than the host (a graph's ``device=``)
    has_devices = False
    #: a routine runs as one traced function compiled by :meth:`fused` (whole programs)
    stages = False
    #: :meth:`amax` over a few cells as a chain of maximums (:func:`small_amax`)
    unrolls_max = False

    # -- the library's own kernels (signatures: the torch adapter's), ``None`` where it has
    # none: the lowering then takes its generic path.  Each is usable without the others.
    conv: Callable[..., Any] | None = None
    conv_backward: Callable[..., Any] | None = None
    #: both gradients of a convolution by one call (:func:`tensig.execution.native.conv_pair`)
    conv_gradients: Callable[..., Any] | None = None
    #: ``(x, w, bias) -> x @ w + bias``, 2-D, the bias added in the product's accumulation
    matmul_bias: Callable[..., Any] | None = None
    #: ``(subscripts, shapes) -> ((old, x, y) -> old + einsum(subscripts, x, y))`` with the
    #: sum in the product's accumulation, or None (:mod:`tensig.model.codegen`)
    summed_contraction: Callable[..., Any] | None = None
    #: ``(x, kernel, strides, dilations, pads) -> y`` or ``(y, saved)``, ``saved`` handed to
    #: ``max_pool_backward`` with the same ``x`` (:func:`tensig.execution.native.pool_kernel`)
    max_pool: Callable[..., Any] | None = None
    #: ``(g, x, saved, kernel, strides, dilations, pads) -> x's gradient`` (each window's to
    #: its first maximum), or None for a padding it does not take
    max_pool_backward: Callable[..., Any] | None = None

    def conv_accepts(self, x: Any, w: Any) -> bool:
        """Whether the conv and pooling kernels take these operands: floating, one dtype."""
        return bool(x.dtype == w.dtype) and self.is_float(x.dtype)

    def __repr__(self) -> str:
        return f"<tensig backend {self.name!r}>"

    # -- library facts --------------------------------------------------------------------------
    def extreme(self, dtype: Any, lowest: bool) -> float | int | bool:
        """``dtype``'s lowest (``lowest``) or highest value, infinities for floats, by the
        library's dtype rules: the neutral elements of max and min (:func:`neutral_max`)."""
        if self.is_bool(dtype):
            return not lowest
        if not self.is_integer(dtype):
            return -math.inf if lowest else math.inf
        info = getattr(self.xp, "iinfo", np.iinfo)(dtype)  # dask.array has none
        return int(info.min if lowest else info.max)

    def is_integer(self, dtype: Any) -> bool:
        """Whether ``dtype`` is an integer type (bool is not)."""
        return bool(np.issubdtype(np.dtype(dtype), np.integer))

    def no_autograd(self) -> Callable[[], Any] | None:
        """A context-manager factory turning the library's autograd off, or ``None``."""
        return None

    def scalar_operand(self, value: int | float) -> Any:
        """A Python number as the operand the library takes fastest (made once by codegen)."""
        return value

    def device_of(self, x: Any) -> str | None:
        """The device an array lives on, by name (``None``: the host, the only one)."""
        return None

    @property
    def array_type(self) -> type:
        """The library's array type (what a graph of this backend stores)."""
        return getattr(self.xp, self.array_name)

    def device(self, name: str | None) -> Any:
        """The device ``name`` names, checked; ``None`` for the default (here: the host)."""
        if name not in (None, "cpu"):
            with_devices = [c.name for c in _adapters() if c.has_devices]
            raise ValueError(f"device={name!r} needs a backend with devices "
                             f"({' or '.join(with_devices)}: new_graph({with_devices[-1]!r}, "
                             f"device=...)); {self.name} arrays live on the CPU")
        return None

    def on_host(self, x: Any) -> bool:
        """Whether reading ``x``'s values is cheap (host memory, not an accelerator's)."""
        return True

    def traced(self, x: Any) -> bool:
        """Whether ``x`` is a tracer (values unknown until the compiled function runs): fast
        paths that read values skip it, and nothing made from it is cached."""
        return False

    def host_call(self, fn: Callable[..., Any], shape: tuple[int, ...], dtype: str,
                  *args: Any) -> Any:
        """``fn(*args)`` computed in NumPy on the host (result of ``shape`` and ``dtype``), as
        this library's array; in a traced function, called each time it runs."""
        return self.asarray(fn(*(to_numpy(a) for a in args)), like=args[0] if args else None)

    @property
    def trace_errors(self) -> tuple[type[BaseException], ...]:
        """The errors of a traced function reading values (then run step by step)."""
        return ()

    # -- primitives -----------------------------------------------------------------------------
    def einsum(self, subscripts: str, *xs: Any) -> Any:
        return self.xp.einsum(subscripts, *xs)

    def contraction(self, subscripts: str, shapes: Sequence[tuple[int, ...]]) -> Any:
        """``einsum(subscripts, *xs)`` at the backend's best speed, planned once per shapes."""
        return functools.partial(self.einsum, subscripts)

    def pad(self, x: Any, widths: Sequence[tuple[int, int]], value: float) -> Any:
        return self.xp.pad(x, list(widths), mode="constant", constant_values=value)

    def windows(self, x: Any, axis: int, size: int, step: int) -> Any:
        """Sliding windows along ``axis`` (stride ``step``), the window axis appended last."""
        w = self.xp.lib.stride_tricks.sliding_window_view(x, size, axis=axis)
        return w if step == 1 else w[(slice(None),) * axis + (slice(None, None, step),)]

    def amax(self, x: Any, axes: tuple[int, ...]) -> Any:
        small = small_amax(x, axes, self.xp.maximum) if self.unrolls_max else None
        if small is not None:
            return small
        # no cells: NumPy, torch and JAX refuse a max over an empty axis (Dask once computed);
        # the neutral element is exact.  An empty kept axis each library reduces itself
        # (torch's autograd graph keeps it), Dask's on NumPy (DaskBackend.amax)
        if 0 in [x.shape[a] for a in axes]:
            return self.full([n for i, n in enumerate(x.shape) if i not in axes],
                             neutral_max(x.dtype), like=x)
        return self.max_along(x, axes) if axes else x

    def transpose(self, x: Any, perm: Sequence[int]) -> Any:
        return x.transpose(*perm)

    def reshape(self, x: Any, shape: Sequence[int]) -> Any:
        return x.reshape(tuple(shape))

    def broadcast_to(self, x: Any, shape: Sequence[int]) -> Any:
        return self.xp.broadcast_to(x, tuple(shape))

    def fused(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` compiled as one kernel where the library compiles (``jax.jit``), else ``fn``."""
        return fn

    def placed(self, like: Any) -> dict[str, Any]:
        """The keywords making a new array on ``like``'s device (none here: the host only)."""
        return {}

    def full(self, shape: Sequence[int], value: float, like: Any) -> Any:
        return self.xp.full(tuple(shape), value, dtype=like.dtype, **self.placed(like))

    def eye(self, n: int, like: Any) -> Any:
        """An ``n x n`` identity in ``like``'s dtype, on its device."""
        return self.xp.eye(n, dtype=like.dtype, **self.placed(like))

    def eye_mask(self, n: int, like: Any) -> Any:
        """An ``n x n`` boolean identity mask on ``like``'s device."""
        return self.xp.eye(n, dtype=bool, **self.placed(like))

    def where(self, mask: Any, a: Any, b: Any) -> Any:
        return self.xp.where(mask, a, b)

    def maximum(self, a: Any, b: Any) -> Any:
        return self.xp.maximum(a, b)

    def flatten(self, xs: Sequence[Any]) -> Any:
        """The arrays' elements, one after another, in one new 1-D array."""
        return self.xp.concatenate([x.reshape(-1) for x in xs])

    def splitter(self, shapes: Sequence[tuple[int, ...]]) -> Callable[[Any], list[Any]]:
        """``flat -> views`` undoing :meth:`flatten` for arrays of ``shapes``."""
        at = list(itertools.accumulate((math.prod(shape) for shape in shapes), initial=0))
        bounds = list(zip(at[:-1], at[1:], map(tuple, shapes), strict=True))
        return lambda flat: [flat[lo:hi].reshape(shape) for lo, hi, shape in bounds]

    def fused_update(self, rule: str, hyper: dict[str, Any],
                     shapes: Sequence[tuple[int, ...]]) -> Callable[..., Any] | None:
        """An optimizer update (``rule``: ``"adam"``, ``"sgd"``; :mod:`tensig.model.train`'s
        hyperparameters) as one library kernel: ``fn(params, grads, state, step, lr) ->
        (params, state)`` (``state``: one list per role, ``step`` from 1; None where it
        declines the arrays), or None: the update runs as IR code."""
        return None

    # -- the rank layer -------------------------------------------------------------------------
    def owns(self, x: Any) -> bool:
        """Whether ``x`` is already an array of this library."""
        return library_of(type(x)) == self.name

    def asarray(self, x: Any, like: Any = None, device: Any = None) -> Any:
        """``x`` (any known library's array, a list, a number) as this library's, on
        ``device`` or else ``like``'s; no copy where none is needed."""
        self.device(device)  # the host only: anything else is refused
        if self.owns(x):
            return self.xp.asarray(x)
        if _adapter_class(type(x)) is None and hasattr(x, "__array_function__"):
            return x  # an array answering NumPy's functions (verify's symbolic ones): as it is
        return self.xp.asarray(to_numpy(x))

    def to_numpy(self, x: Any) -> Any:
        """This library's array as a NumPy array in host memory (:func:`to_numpy`)."""
        return np.asarray(x)

    def stack(self, xs: Sequence[Any], axis: int = 0) -> Any:
        return self.xp.stack(list(xs), axis=axis)

    def stack_cells(self, cells: list[Any], frame: tuple[int, ...], cell: tuple[int, ...]) -> Any:
        """One ``frame + cell`` array from cells in row-major frame order."""
        like = next((c for c in cells if self.owns(c)), None)
        return self.reshape(self.stack([self.asarray(c, like) for c in cells]), frame + cell)

    def vmap(self) -> Any:
        """The library's ``vmap`` (``torch.vmap``, ``jax.vmap``), or ``None``."""
        return getattr(self.xp, "vmap", None)

    # -- compiled routines: the arrays a graph's store holds ----------------------------------
    def scatter_add(self, x: Any, index: tuple[Any, ...], v: Any) -> Any:
        """``x`` (the caller's) plus ``v`` at ``x[index]``, in place where mutable (use the
        returned array)."""
        x[index] += v
        return x

    def ufunc(self, op: Any) -> Any:
        """This library's version of a NumPy ufunc, by name (``np.add`` -> ``torch.add``)."""
        found = getattr(self.xp, op.__name__, None)
        if found is None:
            raise TypeError(f"{self.name} has no function named {op.__name__!r} to stand in for "
                            f"the NumPy ufunc; pass a {self.name} function with vectorized=True")
        return found

    def flip(self, x: Any, axis: int) -> Any:
        return self.xp.flip(x, (axis,))  # a tuple: torch takes no int

    def concat(self, xs: Sequence[Any], axis: int) -> Any:
        return self.xp.concatenate(list(xs), axis=axis)

    def take_along(self, x: Any, index: Any, axis: int) -> Any:
        return self.xp.take_along_axis(x, index, axis=axis)

    def arange(self, n: int, like: Any = None) -> Any:
        """``0 .. n-1`` on ``like``'s device."""
        return self.xp.arange(n, **self.placed(like))

    def empty(self, shape: Sequence[int], dtype: Any) -> Any:
        return self.xp.zeros(tuple(shape), dtype=dtype)

    def fill(self, shape: Sequence[int], value: Any, like: Any = None) -> Any:
        """A new array of ``value`` in the value's own dtype (:meth:`full` takes ``like``'s),
        on ``like``'s device."""
        return self.xp.full(tuple(shape), value, **self.placed(like))

    def result_dtype(self, xs: Sequence[Any]) -> Any:
        return self.xp.result_type(*xs) if xs else self.xp.float64

    def _in_result_dtype(self, out: Any, xs: Sequence[Any]) -> Any:
        """``out`` in the operands' result dtype, as ``numpy.einsum`` gives it, where the
        library summed wider (torch, Dask: int64).  Exact: integer sums wrap modulo 2^bits
        either way, and a count is nonzero exactly when the logical or is true."""
        dtype = self.result_dtype(xs)
        return out if out.dtype == dtype else self.astype(out, dtype)

    # -- dtypes (padded batches, the IR's primitives) --------------------------------------------
    def astype(self, x: Any, dtype: Any) -> Any:
        return x.astype(dtype)

    def as_dtype(self, dtype: Any) -> Any:
        """A dtype given by name (``"float32"``) as this library's dtype."""
        return np.dtype(dtype) if isinstance(dtype, str) else dtype

    def cast(self, x: Any, dtype: Any) -> Any:
        """``x`` in ``dtype`` (this library's or a name): the one cast of ``dtype=`` and the IR."""
        return self.astype(x, self.as_dtype(dtype))

    def is_bool(self, dtype: Any) -> bool:
        try:
            return bool(np.dtype(dtype) == np.bool_)
        except TypeError:  # a dtype NumPy does not know (JAX's PRNG keys): not bool
            return False

    def is_float(self, dtype: Any) -> bool:
        xp = self.xp if hasattr(self.xp, "issubdtype") else np  # dask.array has none
        return bool(xp.issubdtype(dtype, xp.floating))

    def default_float(self) -> Any:
        return self.xp.float32

    def finite_min(self, dtype: Any) -> float:
        """The lowest finite value of a floating dtype."""
        return float(self.xp.finfo(dtype).min)

    def max_along(self, x: Any, axis: int | tuple[int, ...]) -> Any:
        """The max over an axis or axes by one call (:meth:`amax` may unroll a small window,
        reading sizes that are symbolic under ``verify``)."""
        return self.xp.max(x, axis=axis)

    def pad_rows(self, seqs: Sequence[Any], mask: Any, on: Any, trailing: tuple[int, ...],
                 value: Any) -> Any:
        """The rows in one ``[B, T, *trailing]`` array of ``value`` at ``mask``'s cells (``on``:
        the mask in the library): one concatenation and one masked write."""
        flat = self.concat(seqs, 0)
        out = self.xp.full((*mask.shape, *trailing), value, dtype=flat.dtype)
        return self.masked_set(out, mask, flat)

    def masked_set(self, out: Any, mask: Any, values: Any) -> Any:
        """``out`` with ``values`` written at ``mask`` (in place where the library can)."""
        out[mask] = values
        return out

    # -- the IR's primitives (tensig.execution.ir) -----------------------------------------------
    def relu(self, v: Any) -> Any:
        """``max(0, v)``, NaN passing; ``relu(-0.0)`` is ``-0.0`` as in torch (``maximum``
        returns its second operand on a tie)."""
        return self.xp.maximum(0, v)

    def relu_backward(self, a: Any, g: Any) -> Any:
        """The library's ReLU backward kernel on ``g`` at ``a``, or ``None`` when it has none."""
        return None

    def gelu(self, v: Any) -> Any:
        """GELU, tanh form (torch's ``approximate="tanh"``): one primitive, not a dozen
        pointwise steps each storing an array."""
        xp = self.xp
        return 0.5 * v * (1.0 + xp.tanh(GELU_C * (v + GELU_K * v * v * v)))

    def gelu_backward(self, a: Any, g: Any) -> Any:
        """``g`` times the derivative of :meth:`gelu` at ``a``."""
        xp = self.xp
        th = xp.tanh(GELU_C * (a + GELU_K * a * a * a))
        return g * (0.5 * (1.0 + th)
                    + 0.5 * GELU_C * a * (1.0 - th * th) * (1.0 + 3 * GELU_K * a * a))

    def softmax(self, x: Any, axis: int) -> Any:
        """``exp(x - max) / sum exp(x - max)`` along ``axis``."""
        xp = self.xp
        e = xp.exp(x - xp.max(x, axis=axis, keepdims=True))
        return e / xp.sum(e, axis=axis, keepdims=True)

    def softmax_backward(self, y: Any, g: Any, axis: int) -> Any:
        """The gradient of :meth:`softmax` at its value ``y``: ``y (g - sum(g y))``."""
        return y * (g - self.xp.sum(g * y, axis=axis, keepdims=True))

    def log_softmax(self, x: Any, axis: int) -> Any:
        """``x - log sum exp(x)`` along ``axis``, the maximum subtracted first."""
        xp = self.xp
        z = x - xp.max(x, axis=axis, keepdims=True)
        return self.into("subtract", z, xp.log(xp.sum(xp.exp(z), axis=axis, keepdims=True)))

    def log_softmax_backward(self, y: Any, g: Any, axis: int) -> Any:
        """The gradient of :meth:`log_softmax` at its value ``y``: ``g - exp(y) sum(g)``."""
        xp = self.xp
        return g - xp.exp(y) * xp.sum(g, axis=axis, keepdims=True)

    def row_sum(self, x: Any, axes: tuple[int, ...]) -> Any:
        """The sum over ``axes`` (kept): attention's row sums, which an adapter may speed up."""
        return self.xp.sum(x, axis=axes, keepdims=True)

    def row_mean(self, x: Any, axes: tuple[int, ...]) -> Any:
        """The mean over ``axes`` (kept), not a sum divided: a float16 sum rounds back to
        float16, which overflows from 65504."""
        return self.xp.mean(x, axis=axes, keepdims=True)

    def normalize(self, x: Any, axes: tuple[int, ...], eps: float) -> tuple[Any, Any, Any]:
        """Layer norm without scale and shift over ``axes`` (biased variance), with the mean
        and ``1/sqrt(var + eps)`` (axes kept) its gradient reads."""
        mean = self.row_mean(x, axes)
        c = x - mean
        rstd = 1.0 / self.xp.sqrt(self.row_mean(c * c, axes) + eps)
        return self.into("multiply", c, rstd), mean, rstd

    def normalize_backward(self, x: Any, y: Any, mean: Any, rstd: Any, g: Any,
                           axes: tuple[int, ...], eps: float) -> Any:
        """The gradient of :meth:`normalize` (value ``y``): ``rstd (g - mean(g) - y mean(g y))``."""
        into = self.into
        d = into("subtract", y * self.row_mean(g * y, axes), g)  # in place
        d = into("add", d, self.row_mean(g, axes))
        return into("multiply", d, -rstd)

    def layer_norm(self, x: Any, scale: Any, shift: Any, axes: tuple[int, ...], eps: float
                   ) -> tuple[Any, ...]:
        """:meth:`normalize` times ``scale`` plus ``shift`` (shaped as ``axes``, consecutive):
        the record ``(value, mean, rstd, normalised)`` its backward reads."""
        y, mean, rstd = self.normalize(x, axes, eps)
        view = [int(n) if i in axes else 1 for i, n in enumerate(x.shape)]
        out = self.into("add", y * scale.reshape(view), shift.reshape(view))
        return out, mean, rstd, y

    def layer_norm_backward(self, g: Any, x: Any, saved: tuple[Any, ...], scale: Any,
                            shift: Any, axes: tuple[int, ...], eps: float, dx: bool
                            ) -> tuple[Any, Any, Any]:
        """The gradients of :meth:`layer_norm` for ``x`` (None unless ``dx``), ``scale`` and
        ``shift`` from its record (without the normalised value: recomputed)."""
        xp = self.xp
        mean, rstd = saved[1], saved[2]
        y = saved[3] if len(saved) > 3 else (x - mean) * rstd
        others = tuple(i for i in range(len(x.shape)) if i not in axes)
        dshift = xp.sum(g, axis=others) if others else g
        dscale = xp.sum(g * y, axis=others) if others else g * y
        view = [int(n) if i in axes else 1 for i, n in enumerate(x.shape)]
        gx = self.normalize_backward(x, y, mean, rstd, g * scale.reshape(view), axes, eps) \
            if dx else None
        return gx, dscale.reshape(scale.shape), dshift.reshape(shift.shape)

    def float_mask(self, op: str, x: Any, y: Any, shape: tuple[int, ...], like: Any) -> Any:
        """The comparison ``op`` (``lt``, ``le``, ``eq``, ``ne``) written into a new ``shape``
        array of ``like``'s float dtype (1.0 / 0.0), or ``None`` (a boolean mask then)."""
        return None

    def take_rows(self, table: Any, ids: Any, shape: tuple[int, ...]) -> Any:
        """Rows of ``table`` at integer ``ids``, of ``shape`` (``ids.shape + cell``)."""
        return table[ids]

    def add_rows(self, n: int, ids: Any, rows: Any, checked: bool = False) -> Any:
        """``n`` zero rows with each of ``rows`` added into row ``ids`` (repeated ids add).  An
        id outside 0..n-1 is one IndexError on every adapter (NumPy would wrap it, JAX drop
        it), checked here on the host unless ``checked`` (a gather did)."""
        if not checked and not self.traced(ids) and self.on_host(ids):
            check_ids(ids, n, "add_rows")
        return self._add_rows(n, ids, rows)

    def _add_rows(self, n: int, ids: Any, rows: Any) -> Any:
        acc = self.xp.zeros((n, rows.shape[1]), dtype=rows.dtype)
        self.xp.add.at(acc, ids, rows)
        return acc


def outside_ids(ids: Any, n: int, ignore: int | None = None) -> Any:
    """Where ``ids`` (an array) fall outside ``0..n-1`` and are not the ``ignore`` id."""
    bad = (ids < 0) | (ids >= n)
    return bad if ignore is None else bad & (ids != ignore)


def id_message(n: int, what: str, ignore: int | None = None) -> str:
    """The message of an id outside ``0..n-1``, with ``{}`` where the id goes."""
    return f"{what}: id {{}} is outside 0..{n - 1}" + (
        f" (and is not the ignore_index {ignore})" if ignore is not None else "")


def check_ids(ids: Any, n: int, what: str, ignore: int | None = None) -> Any:
    """``ids``, or an IndexError naming the first of them outside 0..n-1 (and not ``ignore``):
    an id is never a wrap-around (NumPy reads ``-1`` as the last row)."""
    bad = outside_ids(ids, n, ignore)
    if bool(bad.any()):
        raise IndexError(id_message(n, what, ignore).format(int(ids[bad].reshape(-1)[0])))
    return ids


def all_zero(x: Any) -> bool:
    """Whether every element of ``x`` (a small pooling window) is zero, tested afresh each call:
    a cache could be stale (torch's version counter misses writes through ``from_numpy``
    memory or ``.data``; a read-only NumPy view can have a writable base), and
    ``count_nonzero`` is one C call (2-6 us on a 2x2 window)."""
    count = getattr(x, "count_nonzero", None)  # torch
    if count is not None:
        return int(count()) == 0
    if _owner(type(x)).traced(x):
        return False  # unknown until the compiled function runs: take the general path
    return int(np.count_nonzero(x)) == 0


def to_numpy(x: Any) -> Any:
    """``x``'s values as a NumPy array in host memory, whichever library holds them (a Dask
    array computed); anything else through ``numpy.asarray``."""
    return _owner(type(x)).to_numpy(x)


# -- the registry ------------------------------------------------------------------------------
#: adapter classes by the top-level module they claim (``jaxlib`` -> the JAX adapter)
_BY_MODULE: dict[str, type[Backend]] = {}
#: adapter classes registered for one array type (and its subclasses)
_BY_TYPE: dict[type, type[Backend]] = {}


def register(adapter: type[Backend], array_type: type | None = None) -> type[Backend]:
    """Make ``adapter`` the backend of its ``modules``' array types (or of ``array_type`` and
    its subclasses, which wins over a module claim).  A class decorator too."""
    if array_type is not None:
        _BY_TYPE[array_type] = adapter
    else:
        for module in adapter.modules:
            _BY_MODULE[module] = adapter
    _clear_caches()
    return adapter


def unregister(array_type: type) -> None:
    """Undo :func:`register` for one array type."""
    _BY_TYPE.pop(array_type, None)
    _clear_caches()


def _clear_caches() -> None:
    for cached in (_adapter_class, library_of, backend_for, backend_of_namespace, _owner,
                   neutral_max, neutral_min, is_integer):
        cached.cache_clear()


@_cache
def _adapter_class(array_type: type) -> type[Backend] | None:
    for cls in array_type.__mro__:
        found = _BY_TYPE.get(cls)
        if found is not None:
            return found
        root = cls.__module__.partition(".")[0]
        found = _BY_MODULE.get(root)
        if found is not None and found.modules[0] in sys.modules:
            return found
    return None


@_cache
def library_of(array_type: type) -> str:
    """The array library of a type, by the first class in its MRO an adapter claims (``jaxlib``
    is ``jax``, a subclass its base's); else the top-level module's name.

    >>> import numpy as np
    >>> library_of(np.ndarray), library_of(np.memmap)
    ('numpy', 'numpy')
    """
    adapter = _adapter_class(array_type)
    return adapter.name if adapter is not None else array_type.__module__.partition(".")[0]


#: ndarray subclasses whose meaning an einsum would silently drop: refused, not converted
_REFUSED = {
    ("numpy", "matrix"): "it is always 2-D (its reshape keeps two axes); pass np.asarray(m)",
    ("numpy.ma", "MaskedArray"): "einsum would ignore the mask; pass m.filled(value) "
                                 "(what masked cells hold) or np.asarray(m)",
}


@_cache
def backend_for(array_type: type) -> Backend:
    """The backend of an array type: one instance per adapter."""
    for cls in array_type.__mro__:
        why = _REFUSED.get((cls.__module__, cls.__qualname__))
        if why is not None:
            raise TypeError(f"tensig does not take {cls.__module__}.{cls.__qualname__} "
                            f"operands: {why}")
    adapter = _adapter_class(array_type)
    if adapter is None:
        raise TypeError(
            f"tensig does not know arrays of type {array_type.__module__}.{array_type.__name__}; "
            "supported: numpy.ndarray, torch.Tensor, jax.Array, dask.array.Array "
            "(tensig.backends.register adds a library)")
    return _instance(adapter)


@_cache
def _instance(cls: type[Backend]) -> Backend:
    return cls()


def backend_of(xs: Sequence[Any]) -> Backend:
    """The one backend of ``xs``; mixing array libraries in one call is a ``TypeError``."""
    first = backend_for(type(xs[0]))
    for i, x in enumerate(xs[1:], 1):
        b = backend_for(type(x))
        if b is not first:
            raise TypeError(
                f"operands mix array libraries: operand 0 is a {first.name} array, operand {i} "
                f"a {b.name} array; convert them to one library first")
    return first


def backend_among(xs: Sequence[Any]) -> Backend:
    """The adapter of the first eager non-NumPy array among ``xs`` (scalars, lists and NumPy
    arrays go with any library), else NumPy's.

    >>> import numpy as np
    >>> backend_among([np.zeros(2), 3.0])
    <tensig backend 'numpy'>
    """
    numpy = _BY_MODULE["numpy"]
    for x in xs:
        cls = _adapter_class(type(x))
        if cls is not None and cls is not numpy and not cls.lazy:
            return _instance(cls)
    return _instance(numpy)


def is_array(x: Any) -> bool:
    """Whether ``x`` is an array of a known, eager library (not a list, scalar or box).

    >>> import numpy as np
    >>> is_array(np.zeros(2)), is_array([1, 2]), is_array(3)
    (True, False, False)
    """
    cls = _adapter_class(type(x))
    return cls is not None and not cls.lazy and hasattr(x, "shape")


def _adapters() -> list[type[Backend]]:
    """The registered adapter classes, each once, in registration order."""
    return list(dict.fromkeys(_BY_MODULE.values()))


def backend_named(name: str) -> Backend | None:
    """The adapter called ``name`` (``new_graph("torch")``), or ``None``."""
    found = next((c for c in _adapters() if c.name == name), None)
    return _instance(found) if found is not None else None


def graph_backends() -> list[str]:
    """The names of the adapters compiled routines run on (a graph's choices)."""
    return [c.name for c in _adapters() if c.compiles]


@_cache
def backend_of_namespace(xp: Any) -> Backend:
    """The adapter of an array namespace (``numpy``, ``torch``, ``jax.numpy``)."""
    return _instance(_BY_MODULE[xp.__name__.partition(".")[0]])


@_cache
def _owner(kind: type) -> Backend:
    """The adapter of an array's or a dtype's type; NumPy's where none claims it (JAX, Dask)."""
    return _instance(_adapter_class(kind) or _BY_MODULE["numpy"])


@_cache
def neutral_max(dtype: Any) -> float | int | bool:
    """The neutral element of max for ``dtype`` (any library's): ``-inf`` for floats, an
    integer dtype's minimum, ``False``; the one definition every padding for a max reads.

    >>> import numpy as np
    >>> neutral_max(np.dtype(np.int8)), neutral_max(np.dtype(bool)), neutral_max(np.float32)
    (-128, False, -inf)
    """
    return _owner(type(dtype)).extreme(dtype, lowest=True)


@_cache
def neutral_min(dtype: Any) -> float | int | bool:
    """The neutral element of min for ``dtype``: ``inf``, an integer dtype's maximum, ``True``.

    >>> import numpy as np
    >>> neutral_min(np.dtype(np.uint8)), neutral_min(np.float64)
    (255, inf)
    """
    return _owner(type(dtype)).extreme(dtype, lowest=False)


@_cache
def is_integer(dtype: Any) -> bool:
    """Whether ``dtype`` (NumPy-like or torch) is an integer type (bool is not)."""
    return _owner(type(dtype)).is_integer(dtype)
