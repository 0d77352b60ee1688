"""NumPy's random generators under :func:`~tensig.check.verify.verify`: samples of symbolic sizes.

``np.random``'s functions (``randn(*X.shape)``) and a generator's methods (``rng.permutation(N)``)
return symbolic arrays while a trace runs.  NumPy's generators are compiled classes that cannot
be patched, so a trace swaps each one it can reach for a subclass whose methods are these
models, drawing from the same bits (:func:`samplers`).  Sampling without replacement is
checked against its population (``k <= n``).

>>> import numpy as np
>>> from tensig.check.verify import verify
>>> verify(lambda X: X[np.random.default_rng(0).permutation(len(X))], "N D => N D").ok
True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tensig.check import sym_functions, sym_indexing, sym_sizes, tracing
from tensig.check import tracer as S
from tensig.check.broadcasting import differ, shape_text
from tensig.check.tracing import tracer

__all__ = ["CREATION_RANDOM", "sampler_of", "samplers", "sized"]


def sized(shape: Any, kind: str = "f", *params: Any) -> S.SymArray:
    """A sample of ``shape``; without one, a sample per element of the broadcast parameters
    (``normal(mu, sigma)``: ``mu``'s shape), as NumPy draws."""
    if shape is None:
        return S.elementwise(list(params), kind) if params else S.SymArray((), kind)
    return S.SymArray(tuple(shape) if isinstance(shape, tuple | list) else (shape,), kind)


def _drawn(low: Any, high: Any) -> Any:
    """One integer between symbolic bounds: a number, its least, that knows its largest (see
    :class:`~tensig.check.sym_sizes.Drawn`); of a symbolic least, a fresh size."""
    low, high = (0, low) if high is None else (low, high)
    if type(low) is not int:
        return sym_sizes.SymSize(tracer().new_dim("draw"))
    high = sym_sizes.as_dim(high)
    sym_indexing.at_most(sym_sizes.ONE * (low + 1), high, "op-shape", f"integers({low}, {high}): "
                      "NumPy raises (low >= high)", f"a draw from [{low}, {high}), not empty")
    return sym_sizes.Drawn(low, high - 1)


def _choice(a: Any, size: Any = None, replace: bool = True, p: Any = None, axis: int = 0,
            *args: Any, **kw: Any) -> S.SymArray:
    """A ``Generator``'s ``choice(n, k)``: ``k`` indices (``n`` 0-d too); ``choice(X, k)``:
    ``k`` of ``X``'s rows (along ``axis``); without ``replace``, at most ``n`` of them; ``p``
    one probability per member (NumPy raises otherwise)."""
    sample = sized(size, "i")
    counted = isinstance(a, int | sym_sizes.SymSize)
    x = None if counted or S._sym(a).ndim == 0 else S._sym(a)
    ax = 0 if x is None else S._axis(axis, x.ndim)
    n = sym_sizes.as_dim(a) if counted else None if x is None else x.dims[ax]
    if n is not None and p is not None and (S._sym(p).ndim != 1 or differ(S._sym(p).dims[0], n)):
        tracer().report("op-shape", f"choice from {n} with p {shape_text(S._sym(p))}: NumPy "
                        "raises (p must be 1-dimensional, one probability per member)")
    if not replace and n is not None:  # a 0-d array's value is data
        k = math.prod(sample.dims, start=sym_sizes.ONE)
        sym_indexing.at_most(k, n, "op-shape", f"choice of {k} from {n} without replacement: "
                          "NumPy raises (a larger sample than the population); take at most "
                          f"{n}, or pass replace=True", f"a sample of {k} from {n} without "
                          "replacement")
    return sample if x is None else \
        S.SymArray((*x.dims[:ax], *sample.dims, *x.dims[ax + 1:]), x.kind)


def _legacy_choice(a: Any, size: Any = None, replace: bool = True, p: Any = None) -> Any:
    """``np.random.choice`` and a ``RandomState``'s: NumPy raises on an ``a`` of 2-D or more."""
    if not isinstance(a, int | sym_sizes.SymSize) and S._sym(a).ndim > 1:
        tracer().report("op-shape", f"np.random.choice: a must be 1-dimensional, got "
                        f"{shape_text(S._sym(a))}; to pick rows, index with choice(len(X), k) "
                        "or use np.random.default_rng().choice(X, k)")
    return _choice(a, size, replace, p)


CREATION_RANDOM: dict[str, Callable[..., Any]] = {
    **dict.fromkeys(("randn", "rand"), lambda *dims: sized(dims)),
    **dict.fromkeys(("standard_normal", "random"), lambda size=None, **k: sized(size)),
    "normal": lambda loc=0.0, scale=1.0, size=None: sized(size, "f", loc, scale),
    "uniform": lambda low=0.0, high=1.0, size=None: sized(size, "f", low, high),
    "randint": lambda low, high=None, size=None, **k: sized(size, "i", low, high) if
    size is not None or S.SymArray in (type(low), type(high)) else _drawn(low, high),
    "choice": _legacy_choice,
    "shuffle": lambda x, axis=0: None,  # in place
    "permutation": lambda x, axis=0: sized((x,), "i") if isinstance(x, int | sym_sizes.SymSize)
    else S._sym(x)._same(),
}
"""``np.random``'s functions with symbolic sizes, and a generator's (:func:`_sampler`)."""


@functools.cache  # NumPy imports numpy.random on first use, verify's first
def _sampler(real: Any) -> type[Any]:
    """NumPy's ``Generator`` or ``RandomState`` with ``np.random``'s models as methods: the
    compiled class cannot be patched, and ``rng.permutation(len(X))`` read the size as a 0-d
    array (a crash).  A real one is an instance too (``check_random_state``'s question)."""
    models = {**CREATION_RANDOM, "integers": CREATION_RANDOM["randint"],
              "permuted": lambda x, axis=None, out=None: S._sym(x)._same(),
              **({"choice": _choice} if real is np.random.Generator else {})}
    meta = type("Sampler", (type,), {"__instancecheck__": lambda _, obj: isinstance(obj, real)})
    return meta(real.__name__, (real,), {name: sym_functions.creation_wrapper(
        getattr(real, name), lambda _self, *a, _m=model, **k: _m(*a, **k))
        for name, model in models.items() if hasattr(real, name)})


@functools.cache  # NumPy imports numpy.random on first use
def _bits() -> dict[type[Any], str]:
    """NumPy's generator classes, and the attribute that holds their bits."""
    return {np.random.Generator: "bit_generator",
            np.random.mtrand.RandomState: "_bit_generator"}  # never patched, unlike np.random's


def sampler_of(value: Any) -> Any:
    """A NumPy generator as a :func:`_sampler` drawing from its bits; anything else as is."""
    real: Any = type(value)
    bits = _bits().get(real)
    return value if bits is None else _sampler(real)(getattr(value, bits))


def samplers(fn: Any) -> list[tuple[Any, str, Any]]:
    """The patches that make NumPy's random generators take symbolic sizes: ``default_rng``,
    ``RandomState`` (also where imported by name), ``np.random``'s own generator, and those
    ``fn``'s module made (``rng = default_rng(0)``) or its defaults hold; NumPy's own classes
    only (a subclass's methods are the project's).  The globals' types and ids are read in C
    (a loop over a module's 300 names took 200 us per verify call)."""
    bits, mtrand = _bits(), np.random.mtrand
    out: list[tuple[Any, str, Any]] = [
        (np.random, "default_rng", _default_rng_of(np.random.default_rng)),
        (np.random, "RandomState", _sampler(mtrand.RandomState)),
        (mtrand, "_rand", sampler_of(mtrand._rand))]  # check_random_state(None)'s generator
    namespace = getattr(fn, "__globals__", None)
    if isinstance(namespace, dict):  # the module's generators, and the two imported by name
        by_id = {id(getattr(owner, name)): new for owner, name, new in out[:2]}
        values = list(namespace.values())
        if bits.keys() & set(map(type, values)) or by_id.keys() & set(map(id, values)):
            out += [(tracing.Namespace(namespace), name, by_id.get(id(v)) or sampler_of(v))
                    for name, v in list(namespace.items())
                    if type(v) in bits or id(v) in by_id]
    fn = getattr(fn, "__func__", fn)  # a bound method: its function's defaults
    defaults, keywords = getattr(fn, "__defaults__", None), getattr(fn, "__kwdefaults__", None)
    if any(type(v) in bits for v in (*(defaults or ()), *(keywords or {}).values())):
        owner = tracing.Namespace({"__defaults__": defaults, "__kwdefaults__": keywords}, fn)
        out += [(owner, "__defaults__", defaults and tuple(map(sampler_of, defaults))),
                (owner, "__kwdefaults__", keywords and {k: sampler_of(v)
                                                        for k, v in keywords.items()})]
    return out


@functools.lru_cache(maxsize=8)  # bounded: a test's stand-in is a new original each time
def _default_rng_of(real: Any) -> Callable[..., Any]:
    """``np.random.default_rng`` while verify runs: a :func:`_sampler` on NumPy's bits (a
    subclass passed in, ``default_rng(rng)``, is returned as it is, as NumPy returns it)."""
    def default_rng(*args: Any, **kw: Any) -> Any:
        g, plain = real(*args, **kw), np.random.Generator
        return _sampler(plain)(g.bit_generator) if type(g) is plain else g

    return functools.wraps(real)(default_rng)
