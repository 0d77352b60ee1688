"""JAX for :mod:`tensig.check.tracer`: JAX code runs on the same symbolic arrays as NumPy code.

While verify runs, JAX's public callables are wrapped (:func:`patched`; the README's
``tensig.verify`` section says which): a call on a symbolic value is traced by a hand model
here (control flow, ``vmap``, ``.at[]``, ``jax.nn``), else by NumPy's twin of the same name
(``jnp.tanh`` is ``np.tanh``), else fitted from ``jax.eval_shape`` at witness sizes.  A
function jitted or checkpointed before verification is traced through its Python function
(:func:`python_function`); other code JAX compiled before (held in a container, say) is re-run
under JAX's symbolic dimensions (:func:`jax_shapes_fallback`): its broadcasts and contractions
are checked, but no outer product is found.

>>> import jax.numpy as jnp
>>> from tensig.check.verify import verify
>>> def model(x):
...     return jnp.tanh(x)
>>> verify(lambda x: model(x), "N, D => N, D").ok
True
>>> [f.kind for f in verify(lambda p, y: jnp.sum((p - y) ** 2), "N; N, 1 =>")]
['outer-product']
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from tensig.check import findings, size_fit, sym_functions, tracing
from tensig.check import tracer as S
from tensig.check.broadcasting import shape_text
from tensig.check.sym_sizes import as_dim
from tensig.check.trace_numpy import asarray, fitted
from tensig.check.trace_random import sized
from tensig.check.tracing import tracer
from tensig.core.dims import Dim

__all__ = ["AtIndexer", "jax_shapes_fallback", "patched", "python_function"]

_NAMESPACES = ("numpy", "numpy.linalg", "numpy.fft", "nn", "nn.initializers", "lax", "random",
               "scipy.special", "scipy.linalg", "image")
_DTYPES = {**S.DTYPES, "i": "int32"}  # JAX's integers without x64


# -- Patching JAX's namespaces while verify runs -----------------------------------------------


def _wrap(ns: str, name: str, original: Any) -> Any:
    control = f"{ns}.{name}" in CONTROL

    @functools.wraps(original)
    def wrapper(*args: Any, **kw: Any) -> Any:
        if tracing._TRACER.get() is None or not (control or sym_functions.has_sym((args, kw))):
            out = original(*args, **kw)
            # an initializer factory's init(key, shape) (glorot_uniform()): its shape symbolic
            return _wrap(ns, name, out) if ns == "nn.initializers" and callable(out) else out
        tracer().used_jax = True
        return _symbolic(ns, name, original, args, kw)

    return wrapper


#: each wrapper by the id of the JAX function it stands for (filled by :func:`_targets`), for
#: names imported from JAX's namespaces (``from jax.nn import softmax``)
_BY_ORIGINAL: dict[int, Any] = {}


@functools.cache
def _targets() -> list[tuple[Any, str, Any]]:
    """(module, name, wrapper) for every public callable: built once."""
    import importlib

    import jax

    out: list[tuple[Any, str, Any]] = []
    for ns in _NAMESPACES:
        module = importlib.import_module(f"jax.{ns}")
        for name in dir(module):
            obj = getattr(module, name)
            if name.startswith("_") or inspect.isclass(obj) or inspect.ismodule(obj) or \
                    not callable(obj):
                continue
            out.append((module, name, _wrap(ns, name, obj)))
            _BY_ORIGINAL[id(obj)] = out[-1][2]
    for name, make in (("vmap", _vmap), ("jit", _jit), ("checkpoint", _jit), ("remat", _jit),
                       ("grad", _grad), ("value_and_grad", _grad), ("jacrev", _jacobian),
                       ("jacfwd", _jacobian), ("hessian", _jacobian), ("jvp", _jvp),
                       ("vjp", _vjp)):
        out.append((jax, name, make(getattr(jax, name))))
        _BY_ORIGINAL[id(getattr(jax, name))] = out[-1][2]
    return out


def patched(fn: Any = None) -> contextlib.AbstractContextManager[None]:
    """Route JAX calls on symbolic values to the tracer, also where ``fn`` names them."""
    if "jax" not in sys.modules:
        return contextlib.nullcontext()
    targets = _targets()  # first: it records the originals _globals looks for
    return tracing.patched(targets + _globals(fn))


def _globals(fn: Any, limit: int = 200) -> list[tuple[Any, str, Any]]:
    """(owner, name, wrapper) for each JAX function that ``fn``'s code, or a plain function it
    calls, names as a global or holds in its closure: one imported by name (``softmax``), or
    one jitted, checkpointed or with custom derivatives before verification (compiled, it
    cannot take symbolic arrays: its Python function can)."""
    out: list[tuple[Any, str, Any]] = []
    seen: set[int] = set()
    todo = [fn]
    while todo and len(seen) < limit:
        f = todo.pop()
        code, namespace = getattr(f, "__code__", None), getattr(f, "__globals__", None)
        if code is None or not isinstance(namespace, dict) or id(f) in seen:
            continue
        seen.add(id(f))
        codes = [code]
        for c in codes:  # the function's own code and its nested functions' (lambdas)
            codes += [k for k in c.co_consts if inspect.iscode(k)]
        slots = [(tracing.Namespace(namespace), name, namespace[name])
                 for name in {n for c in codes for n in c.co_names if n in namespace}]
        for cell in getattr(f, "__closure__", None) or ():  # patched as a one-name namespace
            with contextlib.suppress(ValueError):  # an empty cell
                v = cell.cell_contents
                slots.append((tracing.Namespace({"cell_contents": v}, cell), "cell_contents", v))
        for owner, name, v in slots:
            inner = python_function(v)
            if id(v) in _BY_ORIGINAL:
                out.append((owner, name, _BY_ORIGINAL[id(v)]))
            elif inspect.isfunction(inner) and findings.user_code(inner.__code__.co_filename):
                if inner is not v:  # a library's own code is left as it is
                    out.append((owner, name, sym_functions.creation_wrapper(v, inner)))
                todo.append(inner)
    return out


def python_function(fn: Any) -> Any:
    """The Python function under JAX's wrappers that keep its shapes (``jax.jit``,
    ``jax.checkpoint``/``remat``, custom derivatives), or ``fn``: not under ``vmap`` or
    ``grad``, whose wrappers name the function they wrap too."""
    if "jax" not in sys.modules:  # then nothing is JAX's
        return fn
    while hasattr(fn, "__wrapped__") and (type(fn).__name__ in _COMPILED or (
            inspect.isfunction(fn) and _made_by(fn) == _remat())):
        fn = fn.__wrapped__
    return fn


#: JAX's wrappers of a Python function made at import (``jax.jit``, custom derivatives)
_COMPILED = ("PjitFunction", "custom_jvp", "custom_vjp")


def _made_by(fn: Any) -> tuple[Any, ...]:
    """The code of a function and of the functions in its closure: one JAX transformation's
    wrappers share it (``jax.checkpoint``'s, made by one ``def`` in JAX, is a plain function)."""
    out = [fn.__code__]
    for cell in fn.__closure__ or ():
        with contextlib.suppress(ValueError):  # an empty cell
            out.append(getattr(cell.cell_contents, "__code__", None))
    return tuple(out)


@functools.cache
def _remat() -> tuple[Any, ...]:
    """What :func:`_made_by` gives for JAX's own ``jax.checkpoint`` wrappers, built from the
    original: another thread's verify may have it replaced (:func:`_jit`) when this first runs,
    and what this gives is kept for good."""
    import jax

    checkpoint = getattr(jax.checkpoint, "__tensig_original__", jax.checkpoint)
    return _made_by(checkpoint(lambda: None))


# -- Resolving one symbolic call ---------------------------------------------------------------


def _symbolic(ns: str, name: str, original: Any, args: Any, kw: Any) -> Any:
    key = f"{ns}.{name}"
    impl = TABLE.get(key) or CONTROL.get(key)
    if impl is not None:
        return impl(*args, **kw)
    if ns == "numpy" and name in S.CREATION_NUMPY:
        return S.CREATION_NUMPY[name](*args, **kw)
    twin = getattr({"numpy": np, "numpy.linalg": np.linalg, "numpy.fft": np.fft,
                    "lax": np}.get(ns), name, None)  # None has no public attributes
    if twin is not None and (isinstance(twin, np.ufunc) or hasattr(twin, "_implementation")):
        try:
            return twin(*args, **kw)
        except TypeError as e:
            if "keyword" not in str(e):
                raise
    return fitted_jax(original, args, kw, f"jax.{key}")


def fitted_jax(original: Any, args: Any, kw: Any, name: str) -> Any:
    """Fit a JAX function's result sizes from ``jax.eval_shape`` at witness sizes."""
    import jax

    def make(shape: tuple[int, ...], kind: str) -> Any:
        """A stand-in of the kind's dtype; kind ``k`` a typed key (``jax.random.key``'s)."""
        return jax.ShapeDtypeStruct(shape, jax.random.key(0).dtype if kind == "k" else
                                    _DTYPES[kind])

    def call(a: Any, k: Any) -> Any:
        """``eval_shape`` of the call with the stand-ins as its arguments, the rest static."""
        if name.startswith("jax.random.") and a:
            a = (_key_data(a[0]), *a[1:])
        leaves, tree = jax.tree_util.tree_flatten((a, k))
        at = [i for i, x in enumerate(leaves) if isinstance(x, jax.ShapeDtypeStruct)]

        def run(*arrays: Any) -> Any:
            filled = list(leaves)
            for i, x in zip(at, arrays, strict=True):
                filled[i] = x
            inner_a, inner_k = jax.tree_util.tree_unflatten(tree, filled)
            return original(*inner_a, **inner_k)

        token = tracing._TRACER.set(None)  # JAX's own calls inside run JAX, not the wrappers
        try:
            return jax.eval_shape(run, *(leaves[i] for i in at))
        finally:
            tracing._TRACER.reset(token)

    return fitted(name, args, kw, call, make, jax.ShapeDtypeStruct, allocates=False,
                  op=original)


def _key_data(x: Any) -> Any:
    """A symbolic array's stand-in has its kind only, and kind ``i`` holds a key's uint32 (a
    key made in the trace: ``split(key, B)``'s rows under vmap): an int32 one ``[..., 2]`` as
    jax.random's key is uint32 key data.  A real array keeps its dtype (JAX refuses int32)."""
    import jax
    import jax.numpy as jnp

    if isinstance(x, jax.ShapeDtypeStruct) and x.dtype == jnp.int32 and x.shape[-1:] == (2,):
        return jax.ShapeDtypeStruct(x.shape, jnp.uint32)
    return x


# -- Hand models: jax.nn, lax's strict binary operations, jax.random, .at[] --------------------


def _lax_binary(a: Any, b: Any, *args: Any, **kw: Any) -> S.SymArray:
    """lax's binary operations do not broadcast: equal shapes, or a scalar."""
    x, y = S._sym(a), S._sym(b)
    if x.ndim and y.ndim and x.dims != y.dims:
        tracer().report("broadcast", f"lax needs equal shapes: {shape_text(x)} and "
                                     f"{shape_text(y)} (lax does not broadcast)")
    return S.elementwise([x, y])


def _random(shape_at: int, kind: str | None = None) -> Callable[..., S.SymArray]:
    """``jax.random.<name>(key, ...)`` with the shape at argument ``shape_at``."""
    def model(key: Any, *args: Any, **kw: Any) -> S.SymArray:
        shape = kw.get("shape", args[shape_at - 1] if len(args) >= shape_at else ())
        return sized(shape, kind or S.kind_of(kw.get("dtype", "float")) or "f")
    return _one_key(model)


def _one_key(model: Callable[..., S.SymArray]) -> Callable[..., S.SymArray]:
    """A sampler's ``model(key, ...)`` given one key: a raw key's two words ``[2]`` (an integer
    kind) or a typed key ``[]``; a batch of keys (``split(key, B)`` without vmap) JAX refuses
    at every size."""
    def run(key: Any, *args: Any, **kw: Any) -> S.SymArray:
        k = S._sym(key) if isinstance(key, S.SymArray) else S.SymArray(np.shape(key))
        one = (Dim.const(2),) if S.kind_of(key) == "i" else ()
        if k.dims != one:
            tracer().report("op-shape", f"jax.random's samplers take one key, not "
                                        f"{shape_text(k)} (a batch of keys needs jax.vmap)")
        return model(key, *args, **kw)
    return run


class AtIndexer:
    """``x.at``: JAX's indexed update syntax on a symbolic array; ``x.at[idx]`` is the same
    with the update's target slice, whose methods (``set``, ``add``...) check the value."""

    def __init__(self, array: S.SymArray, key: Any = None):
        self.array, self.key = array, key

    def __getitem__(self, key: Any) -> AtIndexer:
        return AtIndexer(self.array, key)

    def _update(self, value: Any, *args: Any, **kw: Any) -> S.SymArray:
        S.into(S.getitem(self.array, self.key), value, "an .at[] update")
        return S.SymArray(self.array.dims, self.array.kind, self.array.loose)

    set = add = multiply = mul = divide = power = min = max = _update

    def get(self, *args: Any, **kw: Any) -> S.SymArray:
        return S.getitem(self.array, self.key)

    def apply(self, fn: Any, *args: Any, **kw: Any) -> S.SymArray:
        return S.SymArray(self.array.dims, self.array.kind, self.array.loose)


TABLE: dict[str, Callable[..., Any]] = {
    **{f"nn.{n}": S.unary("f") for n in (
        "relu", "relu6", "gelu", "silu", "swish", "sigmoid", "tanh", "elu", "celu", "selu",
        "leaky_relu", "softplus", "soft_sign", "log_sigmoid", "hard_tanh", "hard_sigmoid",
        "hard_silu", "hard_swish", "mish", "identity", "squareplus", "sparse_plus")},
    **dict.fromkeys(("nn.softmax", "nn.log_softmax", "nn.standardize"), S.unary("f", axis=True)),
    "nn.one_hot": lambda x, num_classes, *args, axis=-1, **kw: S.SymArray(
        S.expand_dims(x, axis, num_classes).dims, "f"),
    "nn.logsumexp": S.reduction("f"),
    "nn.glu": lambda x, axis=-1: S.elementwise(list(sym_functions.np_split(x, 2, axis))),
    "scipy.special.logsumexp": S.reduction("f"),
    **{f"lax.{n}": S.unary(S.RESULT_KIND.get(n)) for n in (
        "rsqrt", "logistic", "erf", "erf_inv", "neg", "stop_gradient", "integer_pow",
        "exp", "log", "tanh", "sqrt", "abs", "sin", "cos", "sign", "square", "floor", "ceil",
        "round", "cbrt", "log1p", "expm1", "is_finite", "reciprocal")},
    **{f"lax.{n}": _lax_binary for n in ("add", "sub", "mul", "div", "max", "min", "pow",
                                         "rem", "atan2")},
    **dict.fromkeys(("numpy.asarray", "numpy.array"), asarray),
    **dict.fromkeys(("numpy.zeros_like", "numpy.ones_like", "numpy.empty_like"),
                    sym_functions._like(False, 1)),  # (a, dtype, shape), NumPy's with order
    "numpy.full_like": sym_functions._like(True, 1),
    **dict.fromkeys(("numpy.tril", "numpy.triu"), sym_functions.triangle_part(False)),
    **dict.fromkeys(("random.normal", "random.uniform", "random.gumbel"), _random(1)),
    "random.truncated_normal": _random(3),
    "random.randint": _random(1, "i"),
    "random.bernoulli": _one_key(lambda key, p=0.5, shape=None: S.SymArray(
        S._sym(p).dims if shape is None else shape, "b")),
    "random.categorical": _one_key(lambda key, logits, axis=-1, shape=None, **kw: S.reduce_(
        logits, axis, False, "i") if shape is None else S.SymArray(shape, "i")),
}


# -- Function transformations and control flow -------------------------------------------------


def _tree_map(fn: Callable[..., Any], *trees: Any) -> Any:
    """JAX's tree_map, or torch's where JAX is not installed (``torch.vmap``'s model)."""
    try:
        from jax.tree_util import tree_map
    except ImportError:
        from torch.utils._pytree import tree_map
    return tree_map(fn, *trees, is_leaf=lambda x: x is None)


def _same_structure(before: Any, after: Any, what: str) -> Any:
    """Check that a loop's carry (a cond's branches) keeps its shapes, as JAX requires."""
    import jax

    a, b = ([S._sym(leaf).dims for leaf in jax.tree_util.tree_leaves(tree)]
            for tree in (before, after))
    if a != b:
        was, got = ("; ".join("[" + ", ".join(map(str, s)) + "]" for s in side) for side in (a, b))
        tracer().report("broadcast", f"{what}: shapes change from {was} to {got}")
    return after


def _per_axis(fn: Callable[[int, Any], Any], axis: Any, tree: Any) -> Any:
    """``fn(axis, leaf)`` over a pytree, ``axis`` one int for every leaf or a tree of them
    (vmap's ``in_axes``/``out_axes``); ``None`` leaves its subtree as it is."""
    if axis is None:
        return tree
    if isinstance(axis, int):
        return _tree_map(lambda x: fn(axis, x), tree)
    return _tree_map(lambda ax, sub: _per_axis(fn, ax, sub), axis, tree)


def _unbatch(axis: Any, tree: Any, sizes: list[Dim]) -> Any:
    """Drop the mapped axis of every leaf, collecting its size in ``sizes``."""
    def leaf(ax: int, x: Any) -> Any:
        if x is None:
            return x
        if isinstance(x, int | float | bool):  # JAX and torch refuse it (a training flag)
            tracer().report("op-shape", f"a mapped argument is a Python {type(x).__name__} "
                                        f"({x!r}), which has no axis {ax} to map (in_axes or "
                                        f"in_dims None leaves a positional one unmapped, "
                                        f"functools.partial binds JAX's keywords)")
            return x
        a = S._sym(x)
        i = S._axis(ax, a.ndim)
        sizes.append(a.dims[i])
        return S.SymArray(a.dims[:i] + a.dims[i + 1:], a.kind)

    return _per_axis(leaf, axis, tree)


def _batch(axis: Any, tree: Any, n: Dim) -> Any:
    """Insert a mapped axis of size ``n`` into every leaf (a None stays None)."""
    return _per_axis(lambda ax, x: None if x is None else S.expand_dims(x, ax, n), axis, tree)


def _one_size(sizes: list[Dim], what: str) -> None:
    """The mapped axes of every argument have one size: JAX requires it."""
    other = next((d for d in sizes[1:] if d != sizes[0]), None)
    if other is not None:
        tracer().report("broadcast", f"{what} of different sizes: {sizes[0]} and {other}")


def sym_vmap(fun: Any, in_axes: Any, out_axes: Any, args: Any, kwargs: Any,
             kw_axis: int | None = None) -> Any:
    """vmap on symbolic values (JAX's, and torch's with ``in_dims``/``out_dims``): ``fun`` on
    the arguments without their mapped axes, the axis put back into its results.  Keyword
    arguments are mapped over ``kw_axis``: JAX maps them over axis 0 whatever ``in_axes``
    says, torch leaves them unmapped."""
    axes = tuple(in_axes) if isinstance(in_axes, list | tuple) else (in_axes,) * len(args)
    if len(axes) != len(args):
        raise ValueError(f"vmap: in_axes {in_axes} for {len(args)} arguments")
    sizes: list[Dim] = []
    inner = [_unbatch(ax, arg, sizes) for ax, arg in zip(axes, args, strict=True)]
    kwargs = _unbatch(kw_axis, kwargs, sizes)
    if not sizes:
        raise ValueError("vmap: no argument is mapped (every in_axes is None)")
    _one_size(sizes, "vmap maps axes")
    out = fun(*inner, **kwargs)
    plain = isinstance(out_axes, int) or out_axes is None
    return _batch(out_axes if plain else type(out)(out_axes), out, sizes[0])


def _vmap(original: Any) -> Any:
    """``jax.vmap``, and ``torch.vmap`` (``in_dims``, ``out_dims``: JAX's meaning), taking
    its own arguments (:func:`_given`); torch's refuses a list of ``in_dims`` and randomness
    other than its three."""
    def vmap(fun: Any, *a: Any, **kw: Any) -> Any:
        given = _given(original, fun, a, kw)
        in_axes = given.get("in_axes", given.get("in_dims", 0))
        out_axes = given.get("out_axes", given.get("out_dims", 0))
        randomness = given.get("randomness", "error")
        if ("in_dims" in given and isinstance(in_axes, list)) or \
                randomness not in ("error", "different", "same"):
            raise ValueError(f"torch.vmap takes in_dims as an int or a tuple, randomness "
                             f"'error', 'different' or 'same': {in_axes}, {randomness}")

        own = _jax_own(original)  # JAX's, not torch.func's: asked once, not per call
        refused = randomness == "error" and not own  # torch's default

        @functools.wraps(fun)
        def batched(*args: Any, **kwargs: Any) -> Any:
            if _traced(fun, (args, kwargs)):
                t = tracer()
                t.used_jax |= own  # torch.vmap's is torch code
                t.random_refused += refused
                try:
                    return sym_vmap(fun, in_axes, out_axes, args, kwargs, 0 if own else None)
                finally:
                    t.random_refused -= refused
            return original(fun, *a, **kw)(*args, **kwargs)
        return batched
    return vmap


def _traced(fun: Any, args: Any, depth: int = 3) -> bool:
    """Whether a transformation of ``fun`` on ``args`` is traced: the arguments hold symbolic
    values, or the function's closure (a partial's bound values) does, through the functions it
    holds (MAML's loss of a batch, transformed over a module's real parameters: torch's own
    refuses the batch)."""
    if tracing._TRACER.get() is None:
        return False
    if sym_functions.has_sym(args):
        return True
    if isinstance(fun, functools.partial):  # grad(partial(loss, batch=x)): its bound values
        return _traced(fun.func, (fun.args, fun.keywords), depth)
    cells = []
    for cell in getattr(fun, "__closure__", None) or ():
        with contextlib.suppress(ValueError):  # an empty cell
            cells.append(cell.cell_contents)
    return depth > 0 and any(_traced(v, (), depth - 1) if inspect.isfunction(v)
                             else sym_functions.has_sym(v) for v in cells)


def _given(original: Any, fun: Any, a: Any, kw: Any) -> dict[str, Any]:
    """A transformation's arguments by name, bound as ``original`` takes them: one it does not
    take raises the TypeError it would (torch's ``in_axes=``, ``hessian``'s ``has_aux``)."""
    return _signature(original).bind(fun, *a, **kw).arguments


#: a transformation's signature, kept: ~100 us each, and code makes a vmap per call or loop
_signature = functools.lru_cache(maxsize=64)(inspect.signature)


def _jax_own(original: Any) -> bool:
    """JAX's transformation, not torch.func's (whose code stays torch code)."""
    return str(getattr(original, "__module__", "")).partition(".")[0] == "jax"


def _jit(original: Any) -> Any:
    def jit(fun: Any = None, *a: Any, **kw: Any) -> Any:
        if fun is None:
            return lambda f: jit(f, *a, **kw)
        compiled = functools.cache(lambda: original(fun, *a, **kw))  # on the first real call

        @functools.wraps(fun)
        def run(*args: Any, **kwargs: Any) -> Any:
            if tracing._TRACER.get() is not None:
                return fun(*args, **kwargs)
            return compiled()(*args, **kwargs)
        return run

    jit.__tensig_original__ = original  # type: ignore[attr-defined]  # for _remat
    return jit


def _transform(original: Any, model: Callable[..., Any]) -> Any:
    """A JAX transformation ``original(fun, argnums, has_aux, ...)`` (``grad``, ``jacrev``...)
    whose result runs JAX's own on concrete values and, on symbolic ones, ``fun`` itself, then
    ``model(out, argnums, has_aux, args)`` for the transformed result; torch.func's ``grad``,
    ``jacrev``, ``jacfwd`` and ``hessian`` give the same shapes (each takes its own arguments)."""
    def transform(fun: Any, *a: Any, **kw: Any) -> Any:
        given = _given(original, fun, a, kw)
        argnums, has_aux = given.get("argnums", 0), given.get("has_aux", False)

        @functools.wraps(fun)
        def run(*args: Any, **kwargs: Any) -> Any:
            if not _traced(fun, (args, kwargs)):
                return original(fun, *a, **kw)(*args, **kwargs)
            tracer().used_jax |= _jax_own(original)  # torch.func's are torch code
            return model(fun(*args, **kwargs), argnums, has_aux, args)
        return run
    return transform


def _grad(original: Any) -> Any:
    """``jax.grad``/``value_and_grad``, torch.func's ``grad``/``grad_and_value`` (its value
    second: ``(grads, value)``)."""
    with_value = original.__name__ in ("value_and_grad", "grad_and_value")

    def grad(out: Any, argnums: Any, has_aux: bool, args: tuple[Any, ...]) -> Any:
        value = out[0] if has_aux else out
        if S._sym(value).ndim:
            tracer().report("return-shape", f"grad of a non-scalar: the function returns "
                                            f"{shape_text(S._sym(value))}")
        nums = argnums if isinstance(argnums, tuple | list) else (argnums,)
        grads = tuple(_tree_map(S.unary("f"), args[i]) for i in nums)
        g = grads if isinstance(argnums, tuple | list) else grads[0]
        if with_value:  # ((value, aux), grads): the aux rides with the value
            return (g, out) if original.__name__ == "grad_and_value" else (out, g)
        return (g, out[1]) if has_aux else g
    return _transform(original, grad)


def _jacobian(original: Any) -> Any:
    """``jax.jacrev``/``jacfwd``/``hessian``: each output leaf's axes, then the input's
    (twice for a Hessian), nested as JAX nests the pytrees."""
    times = 2 if original.__name__ == "hessian" else 1

    def jacobian(out: Any, argnums: Any, has_aux: bool, args: tuple[Any, ...]) -> Any:
        several = isinstance(argnums, tuple | list)
        nums = argnums if several else (argnums,)

        def of(dims: tuple[Dim, ...], left: int) -> Any:
            """A leaf's Jacobian: a tuple over ``argnums`` (when one was given) of each
            argument's tree, again below each leaf for a Hessian; JAX's nesting, the output's
            tree outermost."""
            per = tuple(_tree_map(
                lambda i: S.SymArray(dims + S._sym(i).dims, "f") if left == 1
                else of(dims + S._sym(i).dims, left - 1), args[n]) for n in nums)
            return per if several else per[0]
        j = _tree_map(lambda o: of(S._sym(o).dims, times), out[0] if has_aux else out)
        return (j, out[1]) if has_aux else j
    return _transform(original, jacobian)


def _jvp(original: Any) -> Any:
    def jvp(fun: Any, primals: Any, tangents: Any, *a: Any, has_aux: bool = False,
            **kw: Any) -> Any:
        if not _traced(fun, (primals, tangents)):
            return original(fun, primals, tangents, *a, has_aux=has_aux, **kw)
        tracer().used_jax |= _jax_own(original)
        _same_structure(primals, tangents, "jvp's tangents against its primals")
        out = fun(*primals)
        value = out[0] if has_aux else out
        tangent = _tree_map(S.unary("f"), value)
        return (value, tangent, out[1]) if has_aux else (value, tangent)
    return jvp


def _vjp(original: Any) -> Any:
    def vjp(fun: Any, *primals: Any, has_aux: bool = False, **kw: Any) -> Any:
        if not _traced(fun, primals):
            return original(fun, *primals, has_aux=has_aux, **kw)
        tracer().used_jax |= _jax_own(original)
        out = fun(*primals)
        value = out[0] if has_aux else out

        def pullback(cotangent: Any) -> tuple[Any, ...]:
            _same_structure(value, cotangent, "vjp's cotangent against the output")
            return tuple(_tree_map(S.unary("f"), p) for p in primals)
        return (value, pullback, out[1]) if has_aux else (value, pullback)
    return vjp


def _scan(f: Any, init: Any, xs: Any = None, length: Any = None, reverse: bool = False,
          unroll: Any = 1, **kw: Any) -> Any:
    sizes: list[Dim] = []
    x0 = _unbatch(0, xs, sizes) if xs is not None else None
    _one_size(sizes, "scan over leading axes")
    n = sizes[0] if sizes else as_dim(length)
    carry, y = f(init, x0)
    _same_structure(init, carry, "scan's carry")
    return carry, _batch(0, y, n)


def _associative_scan(fn: Any, elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """``fn`` combines two pieces of ``elems`` (slices along ``axis``, here the whole arrays:
    the same broadcasts) into one of the same structure and shapes, the scanned axis one size."""
    sizes: list[Dim] = []
    _unbatch(axis, elems, sizes)
    _one_size(sizes, "associative_scan over axes")
    return _same_structure(elems, fn(elems, elems), "associative_scan's combined elements")


def _while_loop(cond_fun: Any, body_fun: Any, init_val: Any) -> Any:
    cond_fun(init_val)
    return _same_structure(init_val, body_fun(init_val), "while_loop's carry")


def _branches(outs: list[Any], what: str) -> Any:
    for o in outs[1:]:
        _same_structure(outs[0], o, what)
    return outs[0]


CONTROL: dict[str, Callable[..., Any]] = {
    "lax.scan": _scan,
    # the index is a traced scalar in JAX (never a Python int to branch on): an int array
    "lax.fori_loop": lambda lower, upper, body, init_val, **kw: _same_structure(
        init_val, body(S.SymArray((), "i"), init_val), "fori_loop's carry"),
    "lax.while_loop": _while_loop,
    "lax.associative_scan": _associative_scan,
    "lax.cond": lambda pred, true_fun, false_fun, *operands, **kw: _branches(
        [true_fun(*operands), false_fun(*operands)], "cond's two branches"),
    "lax.switch": lambda index, branches, *operands, **kw: _branches(
        [b(*operands) for b in branches], "switch's branches"),
    "lax.map": lambda f, xs, **kw: sym_vmap(f, 0, 0, (xs,), {}),
    # collectives over a mapped axis (vmap's axis_name): each example keeps its shape; control,
    # as lax.psum(1, "batch") (the axis size) holds no symbolic value
    **{f"lax.{n}": lambda x, *args, **kw: _tree_map(S.unary(), x) for n in (
        "psum", "pmean", "pmax", "pmin")},
}


# -- The fallback: JAX's own symbolic shapes ---------------------------------------------------


#: JAX's errors that are shape findings; "inconclusive" (``'V' < '5'`` undecided) is not one:
#: JAX's symbolic sizes cannot decide what the code assumes, so it is a note
_JAX_SHAPE_WORDS = ("incompatible shapes", "broadcast", "dot_general requires", "shape",
                    "dimension")


def jax_shapes_fallback(run: Callable[[list[Any], Callable[[Dim], Any]], Any],
                        args: tuple[tuple[Dim, ...], ...], kinds: tuple[str, ...],
                        symbols: tuple[str, ...] = (), at: dict[str, int] | None = None
                        ) -> tuple[list[tracing.Finding], list[str],
                                   tuple[tuple[Dim, ...], ...] | None]:
    """(findings, notes, result shapes) of ``run(arrays, size)`` under ``jax.eval_shape`` with
    JAX's symbolic dimensions, or the sizes ``at`` (JAX's symbolic shapes skip checks: a
    reshape's element count): ``arrays`` stand for ``args``, ``size`` makes a :class:`Dim` over
    ``symbols`` a JAX size (for ``int`` size parameters).  An exception is a shape finding only
    when JAX's message says so (:func:`tensig.check.size_fit.failure_kind`), else a note."""
    import jax
    from jax import export

    names = sorted({n for dims in args for d in dims for n in d.symbols} | set(symbols))
    syms = dict(at) if at is not None else dict(zip(
        names, export.symbolic_shape(", ".join(names)), strict=True)) if names else {}

    def jax_dim(d: Dim) -> Any:
        return eval(str(d), {}, dict(syms))  # a Dim prints as a Python expression

    structs = [jax.ShapeDtypeStruct(tuple(jax_dim(d) for d in dims), _DTYPES.get(k, "float32"))
               for dims, k in zip(args, kinds, strict=True)]
    try:
        out = jax.eval_shape(lambda *arrays: run(list(arrays), jax_dim), *structs)
    except Exception as e:
        file, line = tracing.failure_line(e)
        text = f"{type(e).__name__}: {e}".split("\n")[0]
        if any(w in text.lower() for w in _JAX_SHAPE_WORDS) and not any(
                w in text.lower() for w in ("not a valid jax type", "inconclusive")):
            return [tracing.Finding(size_fit.failure_kind(text), text, file, line)], [], None
        where = f" at {file}:{line}" if file else ""  # none: JAX's own call failed
        return [], [f"under JAX's symbolic shapes, verification stopped{where}: {text}"], None
    items = jax.tree_util.tree_leaves(out)
    try:
        result = tuple(tuple(_from_jax(x) for x in o.shape) for o in items)
    except ValueError as e:
        return [], [f"verification stopped: a JAX size {e} is not a tensig dimension"], None
    return [], [], result


def _from_jax(x: Any) -> Dim:
    """A JAX symbolic size (``floordiv(T, 2) + 1``) as a :class:`Dim`."""
    text = str(x)
    for name, op in (("floordiv", "//"), ("mod", "%")):
        text = re.sub(rf"{name}\(([^(),]+), ([^(),]+)\)", rf"((\1) {op} (\2))", text)
    try:
        return Dim.parse(text)
    except Exception:
        raise ValueError(str(x)) from None


tracing.PLUGINS["jax_at"] = AtIndexer
