"""torch's side of symbolic arrays: tensor attributes, concrete buffers, and every other op.

Loaded by :mod:`tensig.check.verify` once torch is in use (the README's ``tensig.verify``
section says what torch code gets).  Attributes are real torch objects (``x.device`` is
``cpu``, where module parameters live), so library code that inspects a tensor
(``nn.MultiheadAttention``'s fast-path checks) runs unchanged.  A real tensor indexed by a
symbolic key gives a symbolic array (:func:`buffers_symbolic`).  Every other op runs on meta
tensors and is fitted (:func:`fallback`), cached per op and argument shapes.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable
from functools import cache, lru_cache, partial, wraps
from typing import Any

import torch

from tensig.check import (
    size_fit,
    sym_functions,
    sym_indexing,
    sym_sizes,
    trace_jax,
    trace_numpy,
    tracing,
)
from tensig.check import tracer as S
from tensig.check.broadcasting import broadcast, carry_strides, differ, shape_text, shared
from tensig.check.sym_functions import created
from tensig.check.tracing import tracer

__all__ = ["HAND", "Rejected", "attribute", "buffers_symbolic", "dtype_of", "fallback",
           "looks_like_torch"]

def dtype_of(a: S.SymArray) -> torch.dtype:
    return getattr(torch, S.DTYPES.get(a.kind, "float32"))


def _type(a: S.SymArray, dtype: Any = None, *args: Any, **kw: Any) -> Any:
    """``x.type()`` names the tensor type; ``x.type(dtype)`` converts like ``x.to(dtype)``."""
    if dtype is not None:
        return a.to(dtype)
    return {"f": "torch.FloatTensor", "i": "torch.LongTensor",
            "b": "torch.BoolTensor"}.get(a.kind, "torch.FloatTensor")


_PLAIN: dict[str, Callable[[S.SymArray], Any]] = {
    "device": lambda a: torch.device("cpu"),
    **dict.fromkeys(("is_nested", "requires_grad", "is_cuda", "is_sparse", "is_quantized",
                     "is_meta", "is_mkldnn"), lambda a: False),
    "is_leaf": lambda a: True,
    **dict.fromkeys(("grad", "grad_fn"), lambda a: None),
    "layout": lambda a: torch.strided,
    "data": lambda a: a,
    "itemsize": lambda a: dtype_of(a).itemsize,
}

_METHODS: dict[str, Callable[..., Any]] = {
    "type": _type,
    "element_size": lambda a: dtype_of(a).itemsize,
    "is_floating_point": lambda a: a.kind == "f",
    "is_complex": lambda a: a.kind == "c",
    "get_device": lambda a: -1,
    "requires_grad_": lambda a, *r, **k: a,
    "retain_grad": lambda a: None,
    "nelement": lambda a: a.numel(),
    **dict.fromkeys(("dim", "ndimension"), lambda a: a.ndim),
    "expand_as": lambda a, other: S.broadcast_to(a, S._sym(other).dims),
    "norm": lambda a, p="fro", dim=None, keepdim=False, out=None, dtype=None: S.reduce_(
        a, dim, keepdim, "f"),
    "is_contiguous": lambda a, *r, **k: True,
    **dict.fromkeys(("new_zeros", "new_ones", "new_empty"), lambda a, *size, **k: created(
        *size, **{"dtype": dtype_of(a), **k})),
    "new_full": lambda a, size, fill, **k: created(size, **{"dtype": dtype_of(a), **k}),
    "item": lambda a: _data("item()"),
    "tolist": lambda a: _data("tolist()"),
}


def _data(what: str) -> Any:
    raise tracing.Unsupported(f"{what} (it reads data)")


def attribute(a: S.SymArray, name: str) -> Any:
    """``getattr(a, name)`` for a torch tensor attribute :class:`SymArray` does not define: a
    method is the function of its name (``x.split(k, dim)`` is ``torch.split(x, k, dim)``)."""
    if name in _PLAIN:
        return _PLAIN[name](a)
    member = getattr(torch.Tensor, name, None)  # TORCH's x.linear(w) is no method: an error
    fn = _METHODS.get(name) or HAND.get(name) or (S.TORCH.get(name) if member else None)
    if fn is not None:
        return partial(fn, a)
    if member is None or not callable(member):
        raise AttributeError(f"{type(a).__name__} has no attribute {name!r}")
    return lambda *args, **kw: fallback(member, (a, *args), kw)


# -- Concrete buffers indexed by symbolic sizes ------------------------------------------------


def _symbolic_key(key: Any) -> bool:
    items = key if isinstance(key, tuple) else (key,)
    return any(isinstance(v, sym_sizes.SymSize | S.SymArray) for k in items
               for v in ((k.start, k.stop, k.step) if isinstance(k, slice) else (k,)))


def buffers_symbolic() -> contextlib.AbstractContextManager[None]:
    """While verifying, a real tensor indexed by a symbolic size gives a symbolic array."""
    original = torch.Tensor.__getitem__

    def getitem(self: torch.Tensor, key: Any) -> Any:
        if tracing._TRACER.get() is not None and _symbolic_key(key):
            return S.getitem(S._sym(self), key)
        return original(self, key)

    sized_methods: list[tuple[Any, str, Any]] = [
        (torch.Tensor, n, _sized_method(n, getattr(torch.Tensor, n))) for n in _SIZED]
    distributions = sys.modules.get("torch.distributions")
    if distributions is not None:
        extended = distributions.Distribution._extended_shape

        def extended_shape(self: Any, sample_shape: Any = ()) -> Any:
            """A sample's shape, kept symbolic (``torch.Size`` makes witnesses of sizes)."""
            shape = (*sample_shape, *self._batch_shape, *self._event_shape)
            if sym_functions.has_sym(shape):
                return shape
            return extended(self, sample_shape)
        sized_methods += [(distributions.Distribution, "_extended_shape", extended_shape),
                          # validation checks values (the data), not shapes: off by default
                          (distributions.Distribution, "_validate_args", False)]
    none_or_dtype = getattr(torch.nn.functional, "_none_or_dtype", None)  # private: may go
    if none_or_dtype is not None:  # a mask's dtype, in Transformer layers
        sized_methods.append((torch.nn.functional, "_none_or_dtype", lambda m: dtype_of(m) if
                              isinstance(m, S.SymArray) else none_or_dtype(m)))
    return tracing.patched([(torch.Tensor, "__getitem__", getitem), *sized_methods])


@lru_cache(maxsize=64)  # bounded, as verify's creation wrappers: a mocked method is new
def _sized_method(name: str, original: Any) -> Any:
    """A real tensor's sized method that, given a symbolic size, is the symbolic array's
    (torch's: its ``__getattr__``); one per method, kept rather than made per verify call."""
    return sym_functions.creation_wrapper(
        original, lambda self, *args, **kw: getattr(S._sym(self), name)(*args, **kw))


# real-tensor methods that take sizes: with a symbolic size they give symbolic arrays
_SIZED = ("expand", "repeat", "view", "reshape", "narrow", "new_zeros", "new_ones", "new_empty",
          "new_full", "unflatten", "tile", "split", "roll", "select")


# -- The general mechanism: torch's shape functions on meta tensors, fitted in the symbols -----

class Rejected(Exception):
    """torch refused an op's operands at every size (reported as a finding): tracing stops,
    since no result shape can be trusted past that point."""


def dispatch(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A torch function outside :data:`tensig.check.tracer.TORCH`: modelled by hand here (as
    a function or a tensor method: ``torch.norm``), a :class:`SymArray` method of the same name
    (``torch.Tensor.view(x, ...)``), or fitted."""
    short = getattr(func, "__name__", "")
    by_hand = _BY_FUNCTION.get(func) or HAND.get(short) or _METHODS.get(short)
    if by_hand is not None:
        return by_hand(*args, **kwargs)
    if args and isinstance(args[0], S.SymArray) and hasattr(S.SymArray, short):
        return getattr(args[0], short)(*args[1:], **kwargs)
    return fallback(func, args, kwargs)


def fallback(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run a torch op not modelled by hand on meta tensors and fit its result shapes (once per
    :func:`tensig.check.size_fit.fit_key`: the runs start at fixed sizes)."""
    key = size_fit.fit_key(func, args, kwargs, plain=(torch.dtype, torch.device),
                           shaped=(torch.Tensor,))  # run as meta tensors: values unread
    template = size_fit.cached(key, partial(_fit, func, _name(func), args, kwargs),
                               (args, kwargs))
    if template is None:
        raise Rejected("torch rejected the operands (reported above)")
    return size_fit.build(template, inputs=list(size_fit.leaves(args)))


@cache  # once it has succeeded
def _warm_meta() -> None:
    """torch's first meta-tensor op imports its meta kernels and ``torch._dynamo`` (seconds):
    run once with verify's time limit paused, since an import cut short by the limit leaves
    torch half-imported and every later op failing ('Duplicate dispatch rule')."""
    import signal
    import threading

    pause = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    # the whole timer comes back: someone else's may repeat (its interval)
    left, every = signal.setitimer(signal.ITIMER_REAL, 0) if pause else (0.0, 0.0)
    try:
        torch.empty(1, device="meta") + 1
    finally:
        if left:
            signal.setitimer(signal.ITIMER_REAL, left, every)


def _name(func: Any) -> str:
    qual = str(getattr(func, "__qualname__", None) or getattr(func, "__name__", func))
    owner = getattr(func, "__objclass__", None)
    if owner is not None or qual.startswith(("Tensor.", "TensorBase.", "_TensorBase.")):
        return "Tensor." + qual.rsplit(".", 1)[-1]
    module: str = getattr(func, "__module__", None) or "torch"
    if module.startswith("torch._C") or "_VariableFunctions" in qual:
        qual = qual.rsplit(".", 1)[-1]
        module = "torch"
    return f"{module}.{qual}"


def _run(func: Any, args: Any, kwargs: dict[str, Any], env: dict[str, int]) -> Any:
    """``func`` on meta tensors at ``env`` (real tensors moved there too), and which result
    tensors are the arguments' own (by id, to their place among the arguments' leaves: an
    in-place op returns its input).  A tensor whose elements share memory is expanded there
    too, so a view of it shares (:func:`_leaf`), but for an in-place op: its refusal is
    reported as such (:func:`~tensig.check.broadcasting.write_shared`)."""
    memo: dict[int, Any] = {}
    expand = not getattr(func, "__name__", "").endswith("_")

    def meta(v: Any) -> Any:
        if isinstance(v, torch.device):
            return torch.device("meta")
        if not isinstance(v, S.SymArray | torch.Tensor):
            return v
        got = memo.get(id(v))
        if got is None:
            got = memo[id(v)] = v.to("meta") if isinstance(v, torch.Tensor) else \
                _meta(v, env, expand)
        return got
    margs, mkw = size_fit.concrete(args, env, meta), size_fit.concrete(kwargs, env, meta)
    if "device" in mkw:
        mkw["device"] = "meta"
    inputs: dict[int, int] = {}  # the first place of one passed at several: ``self``'s
    for i, orig in enumerate(size_fit.leaves(args)):
        if (m := memo.get(id(orig))) is not None:
            inputs.setdefault(id(m), i)
    with torch.no_grad():
        result = func(*margs, **mkw)
    return result, inputs


def _meta(a: S.SymArray, env: dict[str, int], expand: bool) -> torch.Tensor:
    """A meta tensor of ``a``'s sizes at ``env``, its shared axes expanded from size 1."""
    sizes, axes = [d.evaluate(env) for d in a.dims], shared(a) if expand else []
    one = torch.empty([1 if i in axes else n for i, n in enumerate(sizes)], dtype=dtype_of(a),
                      device="meta")
    return one.expand(sizes) if axes else one


_SHAPE_ERRORS = (RuntimeError, ValueError, IndexError, TypeError, AssertionError)
_SHAPE_WORDS = ("shape", "size", "dimension", "broadcast", "match", "expected", "length",
                "channel", "rank", "dim", "out of range", "divisible")


def _fit(func: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> size_fit.Fit:
    """(result template, findings to report).  The runs start from sizes 40, 46, 52... (meta
    tensors cost nothing, and these pass most windows and kernels; fixed, so the fit can be
    cached), else 48, 54..., else 1056, 1062... (``stft``'s 400-sample window); steps of 24
    show floors up to 8 (a stride-8 pool), from 1056 steps of 960: a floor by a long hop
    (``stft``'s 160) must change across the runs, or it is fitted as the constant it is near
    the base (a fresh size, never a wrong one)."""
    _warm_meta()
    names = size_fit.symbols((args, kwargs))
    bases = [size_fit.Base({n: 32 + 8 * unit + 6 * i for i, n in enumerate(names)},
                           "sizes divisible by 24 or larger", min(unit, 2), step)
             for unit, step in ((1, 24), (2, 24), (128, 960))]

    def rejected(error: BaseException) -> size_fit.Fit:
        shapes = ", ".join(shape_text(a) if isinstance(a, S.SymArray) else str(list(a.shape))
                           for a in size_fit.leaves(args)
                           if isinstance(a, S.SymArray | torch.Tensor))
        named = size_fit.named(size_fit.short(error), bases[0].env, [
            d for a in size_fit.leaves(args) if isinstance(a, S.SymArray) for d in a.dims])
        return None, (tracing.Finding(size_fit.failure_kind(named),
                                      f"{name} rejects operands of shapes {shapes}: {named}"),
                      ), False

    def template_of(sample: Any, fits: list[list[Any] | None], base: dict[str, int]) -> Any:
        result, inputs = sample

        def leaf(head: Any) -> tuple[Any, ...]:
            if isinstance(head, torch.Tensor):
                i = inputs.get(id(head))
                if i is None:  # its shared axes: a view of an expanded input's
                    return "array", S.kind_of(head) or "f", tuple(
                        j for j, (n, st) in enumerate(zip(head.shape, head.stride(), strict=True))
                        if st == 0 and n != 1)
                orig = list(size_fit.leaves(args))[i]
                if isinstance(orig, S.SymArray) and \
                        list(head.shape) != [d.evaluate(base) for d in orig.dims]:
                    raise tracing.Unsupported(f"{name} (an in-place change of shape)")
                return "input", i
            if isinstance(head, bool | str | float) or head is None:
                return "value", head
            raise tracing.Unsupported(f"{name} returning {type(head).__name__}")
        return size_fit.template(result, iter(fits), leaf)

    return size_fit.fit(name, partial(_run, func, args, kwargs),
                        lambda result: size_fit.shapes(result[0], torch.Tensor), args, kwargs,
                        bases, classify=partial(_shape_error, name), errors=_SHAPE_ERRORS,
                        rejected=rejected, template_of=template_of)


def _shape_error(name: str, e: BaseException) -> BaseException:
    """A run's error that is about shapes (returned), or the reason the trace stops."""
    text = str(e).lower()
    if isinstance(e, NotImplementedError):
        raise tracing.Unsupported(f"{name} (no meta kernel: {size_fit.short(e)})") from None
    if "data-dependent" in text or "data dependent" in text or \
            ("meta" in text and "not implemented" in text):
        raise tracing.Unsupported(f"{name} (its result shape depends on data)") from None
    return trace_numpy.shape_error(name, e, _SHAPE_ERRORS, _SHAPE_WORDS)


# -- Ops modelled by hand: cheaper than meta tensors, and with messages in the signature's terms --


_UNARY = """abs absolute acos acosh angle asin asinh atan atanh bitwise_not ceil celu clamp
clamp_min clamp_max clip cos cosh deg2rad digamma elu erf erfc erfinv exp exp2 expm1 fix floor
frac gelu hardshrink hardsigmoid hardswish hardtanh isfinite isinf isnan leaky_relu lgamma log
log10 log1p log2 logical_not logit mish nan_to_num neg negative positive rad2deg reciprocal
relu relu6 round rrelu rsqrt selu sgn sigmoid sign signbit silu sin sinc sinh softplus
softshrink softsign sqrt square tan tanh tanhshrink threshold trunc alpha_dropout
feature_alpha_dropout dropout1d dropout2d dropout3d clone contiguous"""
_BINARY = """atan2 arctan2 bitwise_and bitwise_or bitwise_xor copysign div divide eq
floor_divide fmax fmin fmod ge greater greater_equal gt heaviside hypot le less less_equal
logaddexp logical_and logical_or logical_xor lt maximum minimum mul multiply ne not_equal
nextafter pow float_power remainder rsub sub subtract true_divide xlogy add"""


def _channels(what: str, a: S.SymArray, params: tuple[Any, ...], axis: int = 1) -> None:
    """Per-channel parameters (running statistics, affine weights) against the input."""
    if a.ndim <= axis:
        tracer().report("contraction", f"{what} of {shape_text(a)}: no channel axis")
        return
    for p in params:
        if p is not None and differ(S._sym(p).dims[0] if S._sym(p).ndim else sym_sizes.ONE,
                                    a.dims[axis]):
            tracer().report("contraction", f"{what}: a per-channel parameter of shape "
                            f"{shape_text(S._sym(p))} for {a.dims[axis]} channels "
                            f"(input {shape_text(a)})")


def _norm(what: str, x: Any, running_mean: Any = None, running_var: Any = None,
          weight: Any = None, bias: Any = None, *args: Any, **kw: Any) -> S.SymArray:
    """``batch_norm`` and ``instance_norm``: per-channel parameters, the input's shape."""
    a = S._sym(x)
    _channels(what, a, (running_mean, running_var, weight, bias))
    return S.SymArray(a.dims, "f")


def group_norm(x: Any, num_groups: int, weight: Any = None, bias: Any = None,
               *args: Any, **kw: Any) -> S.SymArray:
    out = _norm("group_norm", x, weight=weight, bias=bias)
    if out.ndim > 1:
        sym_sizes.require_divisible(out.dims[1], int(num_groups), error=(
            "op-shape", f"group_norm of {out.dims[1]} channels into {num_groups} groups"))
    return out


def sdpa(q: Any, k: Any, v: Any, attn_mask: Any = None, dropout_p: float = 0.0,
         is_causal: bool = False, scale: Any = None, enable_gqa: bool = False) -> S.SymArray:
    """``F.scaled_dot_product_attention``: keys and values of different lengths, which torch's
    CPU kernel accepts silently, are an error; with ``enable_gqa`` the key/value heads must
    divide the query heads."""
    qa, ka, va = S._sym(q), S._sym(k), S._sym(v)
    t = tracer()
    if differ(ka.dims[-2], va.dims[-2]):
        t.report("contraction", f"scaled_dot_product_attention: keys have length "
                 f"{ka.dims[-2]} but values {va.dims[-2]} (keys {shape_text(ka)}, values "
                 f"{shape_text(va)}; torch's CPU kernel accepts this silently)")
    if differ(qa.dims[-1], ka.dims[-1]):
        t.report("contraction", f"scaled_dot_product_attention: queries have {qa.dims[-1]} "
                 f"features but keys {ka.dims[-1]}")
    if enable_gqa and qa.ndim >= 3 and ka.ndim >= 3 and qa.dims[-3] != ka.dims[-3]:
        hq, hk = qa.dims[-3], ka.dims[-3]
        if hk.constant is not None and hk.constant > 0:
            sym_sizes.require_divisible(hq, hk.constant, error=(
                "op-shape", f"attention of {hq} query heads over {hk} key heads"))
        ka = S.SymArray((*ka.dims[:-3], hq, *ka.dims[-2:]), ka.kind)
        va = S.SymArray((*va.dims[:-3], hq, *va.dims[-2:]), va.kind)
    batch, _ = broadcast([S.SymArray(qa.dims[:-2]), S.SymArray(ka.dims[:-2]),
                          S.SymArray(va.dims[:-2])], "attention's batch axes")
    scores = S.SymArray((*batch, qa.dims[-2], ka.dims[-2]), "f")
    if attn_mask is not None:
        S.into(scores, attn_mask, "the attention mask")
    return S.SymArray((*batch, qa.dims[-2], va.dims[-1]), "f")


def _max_or_min(name: str) -> Callable[..., Any]:
    """``torch.max(x)``, ``torch.max(x, dim)`` (values, indices), ``torch.max(x, other)``."""
    def op(x: Any, *args: Any, **kw: Any) -> Any:
        other = args[0] if args else kw.get("other")
        if isinstance(other, S.SymArray | torch.Tensor):
            return S.elementwise([x, other])
        dim = args[0] if args else kw.get("dim", kw.get("axis"))
        keep = bool(args[1] if len(args) > 1 else S._keep(kw))
        values = S.reduce_(x, dim, keep)
        if dim is None:
            return values
        return getattr(torch.return_types, name)((values, S.reduce_(x, dim, keep, "i")))
    return op


# -- results whose size depends on the data: a fresh size each, as NumPy's nonzero has


def _nonzero(x: Any, *, as_tuple: bool = False, **kw: Any) -> Any:
    return (sym_functions.nonzero if as_tuple else sym_functions.argwhere)(x)


def _masked_select(x: Any, mask: Any, **kw: Any) -> S.SymArray:
    out = S.elementwise([x, mask], None, "masked_select")  # the mask must fit the input
    same = out.dims == S._sym(mask).dims  # a broadcast mask selects more
    return S.SymArray((tracer().count_of(mask) if same else tracer().new_dim("nnz"),),
                      S._sym(x).kind)


def _repeat_interleave(x: Any, repeats: Any = None, dim: Any = None, **kw: Any) -> Any:
    """Repeats given per element (a tensor of counts): a fresh length; a number: fitted;
    ``repeat_interleave(counts)`` alone: the indices, each repeated by its count."""
    if repeats is None:
        return S.SymArray((tracer().new_dim("rep"),), "i")
    if not isinstance(repeats, S.SymArray | torch.Tensor) or S._sym(repeats).ndim == 0:
        return fallback(torch.repeat_interleave, (x, repeats), {"dim": dim, **kw})
    a, r = S._sym(x), S._sym(repeats)
    axis = None if dim is None else S._axis(dim, a.ndim)
    along = math.prod(a.dims, start=sym_sizes.ONE) if axis is None else a.dims[axis]
    if r.ndim != 1 or (r.dims[0] != sym_sizes.ONE and differ(r.dims[0], along)):
        tracer().report("op-shape", f"torch.repeat_interleave of {shape_text(a)} on dim {dim}: "
                        f"the repeats {shape_text(r)} must be one count per element along it "
                        f"({along}), or a single count")
    n = tracer().new_dim("rep")
    if axis is None:
        return S.SymArray((n,), a.kind)
    return S.SymArray((*a.dims[:axis], n, *a.dims[axis + 1:]), a.kind)


def _one_hot(x: Any, num_classes: Any = -1) -> S.SymArray:
    """``F.one_hot``: without ``num_classes`` its width is the data's largest value + 1."""
    given = not isinstance(num_classes, int) or num_classes > 0
    width = sym_sizes.as_dim(num_classes) if given else tracer().new_dim("classes")
    return S.SymArray((*S._sym(x).dims, width), "i")


def _unique(x: Any, sorted: bool = True, return_inverse: bool = False,
            return_counts: bool = False, dim: Any = None) -> Any:
    """``torch.unique`` and ``unique_consecutive``: NumPy's, without its index."""
    return trace_numpy._unique(x, False, return_inverse, return_counts, dim)


def _index_add(name: str) -> Callable[..., Any]:
    """``index_add``/``index_copy`` (``_`` in place): source rows, one per index, fit the
    target but on ``dim`` (torch's meta kernel accepts any source; its CPU kernel refuses)."""
    def op(x: Any, dim: int, index: Any, source: Any, **kw: Any) -> S.SymArray:
        a, i, src = S._sym(x), S._sym(index), S._sym(source)
        axis = S._axis(dim, max(a.ndim, 1))
        rows = i.dims[0] if i.ndim else sym_sizes.ONE
        ok = src.ndim == a.ndim and not any(
            differ(s, t) for k, (s, t) in enumerate(zip(src.dims, a.dims, strict=True))
            if k != axis)
        if not ok or (src.ndim and differ(src.dims[axis], rows)):
            tracer().report("op-shape", f"Tensor.{name} on dim {dim} of {shape_text(a)}: the "
                            f"source {shape_text(src)} must be the target's shape but for "
                            f"{rows} on dim {dim} (one row per index, index {shape_text(i)})")
        in_place = name.endswith("_") and isinstance(x, S.SymArray)
        return a if in_place else S.SymArray(a.dims, a.kind)
    return op


def _gather(x: Any, dim: int, index: Any, **kw: Any) -> S.SymArray:
    """``torch.gather``: the index's shape, the index no larger than the input but on ``dim``.
    By hand, since a fit relies on the index's floors: MAE's ``ids_shuffle[:, :L // 4]``
    warned 'requires L divisible by 4'."""
    a, i = S._sym(x), S._sym(index)
    axis = S._axis(dim, max(a.ndim, 1))
    what = f"torch.gather on dim {dim} of {shape_text(a)} by an index {shape_text(i)}"
    if i.ndim != a.ndim:
        tracer().report("op-shape", f"{what}: the index has the input's rank")
        return S.SymArray(i.dims, a.kind)
    for k, (n, m) in enumerate(zip(i.dims, a.dims, strict=True)):
        if k != axis:
            sym_indexing.at_most(n, m, "op-shape", f"{what}: larger on dim {k}",
                              "an index no larger than the input off its dim")
    return S.SymArray(i.dims, a.kind)


def _view_as_complex(x: Any) -> S.SymArray:
    """``torch.view_as_complex``: the last axis, of size 2, as one number."""
    a = S._sym(x)
    if not a.ndim or differ(a.dims[-1], sym_sizes.as_dim(2)):
        tracer().report("op-shape", f"torch.view_as_complex of {shape_text(a)}: the last "
                                    "axis holds (real, imaginary) pairs, size 2")
    return S.SymArray(a.dims[:-1], "c")


def _view_as_real(x: Any) -> S.SymArray:
    """``torch.view_as_real``: each complex number as a (real, imaginary) pair; torch refuses
    a real tensor (one already viewed as real, or a magnitude)."""
    a = S._sym(x)
    if a.kind != "c":
        tracer().report("op-shape", f"torch.view_as_real of a real tensor {shape_text(a)}: "
                                    "torch takes complex tensors only")
    return S.SymArray((*a.dims, sym_sizes.as_dim(2)), "f")


def _unbind(x: Any, dim: int = 0) -> tuple[S.SymArray, ...]:
    """``unbind`` along a symbolic axis: a slice per step at the witness, as a loop over the
    rows gives (stacked back one per step, they join to the axis: ``Tracer.loops``)."""
    a = S._sym(x)
    axis = S._axis(dim, a.ndim)
    n = a.dims[axis]
    tracer().begin(n)
    return tuple(_row(a, axis) for _ in range(tracer().value(n)))


def _row(a: S.SymArray, axis: int) -> S.SymArray:
    """One step of ``a`` along ``axis`` (of ``unbind``): a view of it."""
    origin = [(i, 1) for i in range(a.ndim) if i != axis]
    out = S.SymArray([a.dims[i] for i, _ in origin], a.kind)
    carry_strides(a, out, origin)
    return out


def _pad(x: Any, pad: Any, mode: str = "constant", value: Any = None) -> S.SymArray:
    """``F.pad``: each (left, right) pair, from the last axis back, widens its axis.  By hand,
    since pads computed from sizes (Swin's ``(7 - W % 7) % 7``) fitted as fresh sizes."""
    a = S._sym(x)
    dims = list(a.dims)
    if len(pad) % 2 or len(pad) > 2 * a.ndim:
        tracer().report("op-shape", f"F.pad of {shape_text(a)} by {len(pad)} amounts: a "
                                    "(left, right) pair per padded axis, at most one per axis")
        return S.SymArray(dims, a.kind)
    for i in range(len(pad) // 2):
        n, pair = dims[-1 - i], [sym_sizes.as_dim(p) for p in pad[2 * i:2 * i + 2]]
        crop = -sum(min(p.constant or 0, 0) for p in pair)  # negative pads cut the axis
        needs = [sym_sizes.as_dim(crop)] if crop > 0 else []
        if mode == "reflect":  # an element past each pad
            needs += [p + 1 for p in pair]
        elif mode == "circular":  # wraps around the axis once at most
            needs += pair
        what = f"F.pad(mode={mode!r}) by ({pair[0]}, {pair[1]}) on an axis of size {n}"
        for least in needs:
            sym_indexing.at_most(least, n, "op-shape", what, what)
        dims[-1 - i] = n + pair[0] + pair[1]
    return S.SymArray(dims, a.kind)


def _hop(what: str, n_fft: int, hop_length: Any, win_length: Any, window: Any) -> sym_sizes.Dim:
    """The hop (``n_fft // 4`` by default) of ``stft`` and ``istft``, whose window torch
    refuses unless it is 1-d of ``win_length`` (``n_fft`` by default) samples."""
    w = sym_sizes.as_dim(win_length or n_fft)
    if window is not None and (S._sym(window).ndim != 1
                               or differ(S._sym(window).dims[0], w)):
        tracer().report("op-shape", f"{what}: a window {shape_text(S._sym(window))} where "
                                    f"torch expects one of win_length={w} samples")
    return sym_sizes.as_dim(hop_length or n_fft // 4)


def _stft(x: Any, n_fft: int, hop_length: Any = None, win_length: Any = None,
          window: Any = None, center: bool = True, pad_mode: str = "reflect",
          normalized: bool = False, onesided: Any = None, return_complex: Any = None,
          align_to_window: Any = None) -> S.SymArray:
    """``torch.stft`` of ``[L]`` or ``[B, L]``: ``[..., n_fft // 2 + 1 (onesided) or n_fft,
    1 + (L - n_fft) // hop]``, ``L`` padded by ``n_fft // 2`` each side when centred.  By
    hand, since a fit finds no floor by a hop above 8 (``L // 128 + 1`` was a fresh size)."""
    a = S._sym(x)
    what = f"torch.stft of {shape_text(a)} with n_fft={n_fft}"
    hop = _hop(what, n_fft, hop_length, win_length, window)
    if a.ndim not in (1, 2):
        tracer().report("op-shape", f"{what}: torch takes a 1-d or 2-d input")
        return S.SymArray(a.dims, "c")
    if return_complex is None and a.kind != "c":
        tracer().report("op-shape", f"{what}: torch requires return_complex for a real input")
    if center:
        a = _pad(a, (n_fft // 2, n_fft // 2), pad_mode)
    sym_indexing.at_most(sym_sizes.as_dim(n_fft), a.dims[-1], "op-shape", f"{what}: the "
                      "signal is shorter than a frame", "a signal at least a frame long")
    rows = n_fft // 2 + 1 if (a.kind != "c" if onesided is None else onesided) else n_fft
    dims = (*a.dims[:-1], sym_sizes.as_dim(rows), (a.dims[-1] - n_fft) // hop + 1)
    complex_ = return_complex is not False
    return S.SymArray((*dims, *(() if complex_ else (sym_sizes.as_dim(2),))),
                      "c" if complex_ else "f")


def _istft(x: Any, n_fft: int, hop_length: Any = None, win_length: Any = None,
           window: Any = None, center: bool = True, normalized: bool = False,
           onesided: Any = None, length: Any = None, return_complex: bool = False
           ) -> S.SymArray:
    """``torch.istft`` of ``[..., n_fft // 2 + 1, frames]``, by hand as :func:`_stft` is: one
    hop and window rule for both (:func:`_hop`), and the frequency rows checked by name."""
    a = S._sym(x)
    what = f"torch.istft of {shape_text(a)} with n_fft={n_fft}"
    if onesided is not False and differ(a.dims[-2], sym_sizes.as_dim(n_fft // 2 + 1)):
        tracer().report("op-shape", f"{what}: [..., {n_fft // 2 + 1}, frames] expected")
    hop = _hop(what, n_fft, hop_length, win_length, window)
    n = (a.dims[-1] - 1) * hop + n_fft - (n_fft // 2 * 2 if center else 0)
    return S.SymArray((*a.dims[:-2], n if length is None else sym_sizes.as_dim(length)), "f")


def _triangle(lower: bool) -> Callable[..., S.SymArray]:
    """``tril_indices``/``triu_indices(row, col, offset)``: ``[2, count]``."""
    return lambda row, col, offset=0, **kw: S.SymArray(
        (sym_sizes.as_dim(2), sym_indexing.triangle(row, offset, not lower, col)), "i")


def ctc_loss(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False
             ) -> S.SymArray:
    """``F.ctc_loss``: log-probabilities ``[T, B, C]`` (time first), ``B`` lengths each."""
    lp = S._sym(log_probs)
    batch = lp.dims[1] if lp.ndim == 3 else None
    for what, arr in (("targets", targets), ("input_lengths", input_lengths),
                      ("target_lengths", target_lengths)):
        a = S._sym(arr)
        if batch is not None and a.ndim and (what != "targets" or a.ndim == 2) \
                and differ(a.dims[0], batch):
            tracer().report("op-shape", f"ctc_loss: log_probs {shape_text(lp)} is [T, B, C] "
                            f"(time first) with batch {batch}, but {what} {shape_text(a)} has "
                            f"{a.dims[0]}")
    return S.SymArray((batch,) if reduction == "none" and batch is not None else (), "f")


def im2col(x: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
           ) -> S.SymArray:
    """``F.unfold``: ``[N, C*kh*kw, L]``, ``L`` the product of the blocks along each axis."""
    a = S._sym(x)
    k, d, p, s = ([sym_sizes.as_dim(u) for u in v]  # a size stays one: x.shape[-1]
                  for v in sym_functions.per_axis(2, kernel_size, dilation, padding, stride))
    blocks = [sym_functions.conv_size(a.dims[-2 + i], k[i], s[i], p[i], d[i]) for i in range(2)]
    return S.SymArray((*a.dims[:-3], a.dims[-3] * (k[0] * k[1]), blocks[0] * blocks[1]), a.kind)


def _multinomial(probs: Any, num_samples: Any, replacement: bool = False, **kw: Any
                 ) -> S.SymArray:
    """``num_samples`` ids per row; without replacement at most the categories (its meta
    kernel lets more through, its CPU kernel refuses)."""
    a, k = S._sym(probs), sym_sizes.as_dim(num_samples)
    if not replacement:
        sym_indexing.at_most(k, a.dims[-1], "op-shape", f"multinomial of {k} from {a.dims[-1]} "
                          "without replacement: torch raises", f"a sample of {k} from "
                          f"{a.dims[-1]} without replacement")
    return S.SymArray((*a.dims[:-1], k), "i")


def _recurrent(*args: Any) -> tuple[S.SymArray, ...]:
    """``torch.lstm``/``gru``/``rnn_tanh``/``rnn_relu``, which ``nn.LSTM``... call once their
    Python has checked the sizes: the output's features are the directions times the hidden
    state's (a projection's, for LSTM), the states keep their shapes.  Padded and packed forms
    alike (the packed one has its params fourth); their meta kernels step through time, run
    after run (seconds a call)."""
    packed = isinstance(args[3], list | tuple)
    hx = args[2] if packed else args[1]
    states = hx if isinstance(hx, list | tuple) else (hx,)
    x, h = S._sym(args[0]), S._sym(states[0])
    out = S.SymArray((*x.dims[:-1], h.dims[-1] * (2 if args[8 if packed else 7] else 1)),
                     x.kind)
    return (out, *(S.SymArray(S._sym(t).dims, x.kind) for t in states))


def _combinations(x: Any, r: int = 2, with_replacement: bool = False) -> S.SymArray:
    """``torch.combinations``: a vector's ``r``-element subsets (``n (n - 1) / 2`` pairs, 0 where
    ``n < r``), with replacement its multisets; it has no meta kernel to fit."""
    a = S._sym(x)
    if a.ndim != 1:
        tracer().report("op-shape", f"torch.combinations of {shape_text(a)}: it takes 1-D "
                                    "tensors only")
    top = a.dims[0] + (r - 1 if with_replacement else 0) if a.ndim else sym_sizes.ONE
    return S.SymArray((math.prod((top - i for i in range(r)), start=sym_sizes.ONE)
                       // math.factorial(r), r), a.kind)


def func_targets(fn: Any = None) -> list[tuple[Any, str, Any]]:
    """(module, name, wrapper) patching ``torch.vmap`` (``torch.func.vmap``, one function) and
    torch.func's ``grad``, ``grad_and_value``, ``vjp``, ``jvp`` and Jacobians, each by JAX's
    model of its twin, and ``functional_call``; also where ``fn``'s
    globals name them (``from torch.func import vmap``)."""
    import torch.func

    makers = {"vmap": trace_jax._vmap, "grad": trace_jax._grad,
              "grad_and_value": trace_jax._grad, "vjp": trace_jax._vjp, "jvp": trace_jax._jvp,
              "functional_call": _functional_call,
              **dict.fromkeys(("jacrev", "jacfwd", "hessian"), trace_jax._jacobian)}
    models = {}  # by the id of the original and of the wrapper (another thread's patch)
    out: list[tuple[Any, str, Any]] = []
    for name, make in makers.items():
        f = getattr(torch.func, name)
        f = getattr(f, "__wrapped__", f)
        model = models[id(f)] = _func_model(make, f)
        models[id(model)] = model
        out.append((torch.func, name, model))
    out.append((torch, "vmap", out[0][2]))
    namespace = getattr(fn, "__globals__", None)
    if isinstance(namespace, dict):
        out += [(tracing.Namespace(namespace), n, models[id(v)]) for n, v in namespace.items()
                if id(v) in models]
    return out


def _functional_call(original: Any) -> Any:
    """``torch.func.functional_call``: where a traced value takes part, the module runs with
    the given parameters and buffers (symbolic ones too: MAML's fast weights, a vmapped
    ensemble's rows) put into its own slots, then put back; torch's own takes tensors only."""
    def functional_call(module: Any, parameter_and_buffer_dicts: Any, args: Any = None,
                        kwargs: Any = None, **kw: Any) -> Any:
        dicts = parameter_and_buffer_dicts
        dicts = [dicts] if isinstance(dicts, dict) else dicts
        args = () if args is None else args if isinstance(args, tuple) else (args,)
        if not trace_jax._traced(None, (dicts, args, kwargs)):
            return original(module, parameter_and_buffer_dicts, args, kwargs, **kw)
        saved = []
        try:
            for name, v in ((n, v) for d in dicts for n, v in d.items()):
                path, _, attr = name.rpartition(".")
                owner = module.get_submodule(path)
                for slots in (owner._parameters, owner._buffers):  # a name in neither: unread
                    if attr in slots:
                        saved.append((slots, attr, slots[attr]))
                        slots[attr] = v
            return module(*args, **(kwargs or {}))
        finally:
            for slots, attr, v in reversed(saved):
                slots[attr] = v
    return functional_call


@cache
def _func_model(make: Callable[[Any], Any], original: Any) -> Any:
    """One wrapper per torch.func transformation, kept; ``__wrapped__`` is the original."""
    return wraps(original)(make(original))


# torch functions whose name a tensor method shares with another meaning (x.unfold)
_BY_FUNCTION: dict[Any, Callable[..., Any]] = {torch.nn.functional.unfold: im2col}

HAND: dict[str, Callable[..., Any]] = {
    **{n: _index_add(n) for n in ("index_add", "index_add_", "index_copy", "index_copy_")},
    "ctc_loss": ctc_loss,
    "multinomial": _multinomial,
    "combinations": _combinations,
    **dict.fromkeys(("lstm", "gru", "rnn_tanh", "rnn_relu"), _recurrent),
    "nonzero": _nonzero,
    "argwhere": sym_functions.argwhere,
    "masked_select": _masked_select,
    "bincount": partial(sym_functions.bincount, who="torch", weights_kind="op-shape"),
    "repeat_interleave": _repeat_interleave,
    "one_hot": _one_hot,
    "gather": _gather,
    "cdist": trace_numpy._cdist,
    "unbind": _unbind,
    "pad": _pad,
    "istft": _istft,
    "stft": _stft,
    "view_as_complex": _view_as_complex,
    "view_as_real": _view_as_real,
    "unique": _unique,
    "unique_consecutive": lambda x, return_inverse=False, return_counts=False, dim=None:
        _unique(x, True, return_inverse, return_counts, dim),
    "max": _max_or_min("max"),
    "min": _max_or_min("min"),
    **{n: S.unary(S.RESULT_KIND.get(n)) for n in _UNARY.split()},
    **{n: S.binary(S.RESULT_KIND.get(n)) for n in _BINARY.split()},
    "batch_norm": partial(_norm, "batch_norm"),
    "instance_norm": partial(_norm, "instance_norm"),
    "group_norm": group_norm,
    "rms_norm": lambda x, normalized_shape, weight=None, *args, **kw: sym_functions.layer_norm(
        x, normalized_shape, weight),
    "scaled_dot_product_attention": sdpa,
}


# -- Which framework the verified code uses ----------------------------------------------------


def looks_like_torch(fn: Any) -> bool:
    """A torch module, a method of one, or code whose globals or closure hold one."""
    owner = getattr(fn, "__self__", fn)
    if isinstance(owner, torch.nn.Module):
        return True
    for v in tracing.referenced(fn):
        if isinstance(v, torch.nn.Module | torch.Tensor):
            return True
        if v is not fn and any(x is torch or x is torch.nn.functional
                               for x in tracing.referenced(v)):
            return True
    return False


S.CREATION_TORCH.update(tril_indices=_triangle(True), triu_indices=_triangle(False))
tracing.PLUGINS.update(torch_dispatch=dispatch, torch_attribute=attribute, torch_dtype=dtype_of)
