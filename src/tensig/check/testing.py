"""Test helpers: sizes that cannot collide, and arrays built from a signature.

A shape bug hides when two axes happen to have the same size: at ``B == T == 16`` a mask added
without ``[:, None, :]`` broadcasts, and a mean over the wrong axis returns the right shape.  A
runtime check of sizes cannot see either.  Tests that use sizes that cannot collide make every
such mix-up produce a size that matches nothing, so the runtime (or ``@tensig.shaped``) raises.

:func:`sizes` picks such sizes deterministically; :func:`strategy` draws them with hypothesis;
:func:`shape_for` and :func:`arrays_for` build shapes and zero arrays for a function's
annotations.

>>> sizes("B T d")
{'B': 2, 'T': 5, 'd': 8}
>>> s = sizes("B, T+1, 2*h")
>>> s, sorted([s["B"], s["T"], s["T"] + 1, s["h"], 2 * s["h"]])
({'B': 3, 'T': 7, 'h': 11}, [3, 7, 8, 11, 22])
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np

from tensig.core.annotations import (
    AnnotationShape,
    FunctionSignature,
    RowVariable,
    _is_name,
    dtype_accepts,
    parse_annotation,
    signature_of,
)
from tensig.core.dims import Dim
from tensig.core.syntax import _plain

__all__ = ["arrays_for", "collisions", "shape_for", "sizes", "strategy"]

Source = str | AnnotationShape | Callable[..., Any] | Iterable[Any]


def _annotations(source: Source) -> list[AnnotationShape]:
    """Every annotation in ``source``: a string, an AnnotationShape, a function, or several."""
    if isinstance(source, AnnotationShape):
        return [source]
    if isinstance(source, str):
        return [parse_annotation(part) for part in source.split(";")]
    if isinstance(source, FunctionSignature) or callable(source):
        sig = source if isinstance(source, FunctionSignature) else \
            getattr(source, "__tensig_signature__", None) or signature_of(source)
        return [m.shape for _, m in sig.markers()]
    if isinstance(source, Iterable):
        return [a for s in source for a in _annotations(s)]
    raise TypeError(f"expected an annotation string, an AnnotationShape or a function, not "
                    f"{type(source).__name__}")


class _Problem:
    """The names to size, the expressions whose values must stay distinct, the taken values."""

    def __init__(self, source: Source, avoid: Iterable[int] = ()):
        annotations = _annotations(source)
        self.names = tuple(dict.fromkeys(n for a in annotations for n in a.names))
        self.exprs = tuple(dict.fromkeys(item for a in annotations for item in a.items
                                         if isinstance(item, Dim) and not _is_name(item)))
        self.constants = frozenset(c for a in annotations for c in a.constants if c > 1)
        self.taken = frozenset({0, 1} | set(avoid) | self.constants)

    def unsatisfiable(self, name: str, chosen: Mapping[str, int]) -> ValueError:
        """The error for a name no candidate fits: the rules and the expressions it is in."""
        exprs = [str(e) for e in self.exprs if name in e.symbols]
        return ValueError(
            f"no size of {name!r} among {_TRIES} candidates keeps the sizes apart (each at "
            f"least 2, none equal or adjacent to another, nor a sum or product of two) with "
            f"{dict(chosen) or 'no other size chosen'}"
            + (f"; the expressions {', '.join(exprs)} must stay at least 2 and apart too"
               if exprs else "")
            + "; hint: an expression that stays below 2 (B % 2, 1 - B) can never be apart: "
              "size it by hand, or pass start= to search larger sizes")

    def acceptable(self, candidate: int, chosen: Mapping[str, int], name: str) -> bool:
        """Whether ``name = candidate`` keeps every rule with the sizes ``chosen`` so far, every
        evaluable expression different from every name, constant and other expression."""
        trial = {**chosen, name: candidate}
        if candidate in self.taken or collisions(trial) or any(
                candidate == k * v or candidate in (v + k, v - k)
                for k in self.constants for v in chosen.values()):
            return False
        seen = set(trial.values()) | self.constants
        for e in self.exprs:
            if e.symbols <= trial.keys():
                value = e.evaluate(trial)
                if value in seen or value < 2:
                    return False
                seen.add(value)
        return True


def _derived(x: int, others: list[int]) -> bool:
    """Whether ``x`` is ``a + b`` or ``a * b`` for ``a``, ``b`` in ``others`` (``a == b`` too)."""
    return any(x in (a + b, a * b) for a, b in itertools.combinations_with_replacement(others, 2))


def collisions(values: Mapping[str, int]) -> list[str]:
    """The rules a size assignment breaks (empty when its sizes cannot collide).

    The rules: no size below 2 (a size-1 axis broadcasts); no two sizes equal or adjacent (so
    ``T + 1`` and ``T - 1`` miss every other size); no size the sum or product of two others
    (``a + a`` and ``a * a`` included).

    >>> collisions({"B": 16, "T": 16}), collisions({"B": 3, "T": 5, "d": 8})
    (['B == T == 16'], ['d == B + T'])
    """
    items = list(values.items())
    out = [f"{name} = {v} is below 2" for name, v in items if v < 2]
    for (a, x), (b, y) in itertools.combinations(items, 2):
        if x == y:
            out.append(f"{a} == {b} == {x}")
        elif abs(x - y) == 1:
            out.append(f"{a} and {b} are adjacent ({x}, {y})")
    for name, v in items:
        others = [(n, w) for n, w in items if n != name]
        for (a, x), (b, y) in itertools.combinations_with_replacement(others, 2):
            if v == x + y:
                out.append(f"{name} == {a} + {b}")
            elif v == x * y:
                out.append(f"{name} == {a} * {b}")
    return out


_TRIES = 1 << 14
"""Candidates tried per name: a rule no size keeps (``B % 2`` is always below 2) is an error
in about a second, not a search that never ends."""


def _candidates(seed: int | None, start: int) -> Iterator[int]:
    """``start``, ``start + 1``, ... (``seed=None``), or the integers from ``start`` up in a
    shuffled order: :data:`_TRIES` of them; then :func:`_beyond`'s."""
    if seed is None:
        yield from range(start, start + _TRIES)
    else:
        rng = random.Random(seed)
        low, high = start, start + 64
        while low < start + _TRIES:
            block = list(range(low, min(high, start + _TRIES)))
            rng.shuffle(block)
            yield from block
            low, high = high, high * 2
    yield from _beyond(start)


def _beyond(start: int) -> Iterator[int]:
    """A few sizes near each doubling past :data:`_TRIES` from ``start``: what a search
    bounded by :data:`_TRIES` tries last (``n // 10000`` is at least 2 from 20000 on)."""
    return (start + (_TRIES << k) + j for k in range(1, 48) for j in range(8))


def sizes(source: Source, seed: int | None = None, *, start: int = 2,
          avoid: Iterable[int] = ()) -> dict[str, int]:
    """Distinct sizes for every name in ``source`` that cannot collide.

    ``source`` is an annotation (``"B T d"``; several joined with ``;``), a parsed
    :class:`~tensig.core.annotations.AnnotationShape`, a function with ``Shaped`` annotations, or a
    list of those.  Rules: :func:`collisions`', none equal to ``avoid`` or to a constant ``k`` of
    the annotations (nor to ``k*x``, ``x + k``, ``x - k``), and every expression (``T+1``,
    ``2*h``) different from every other size.  Deterministic: the smallest such sizes in order
    of appearance, or a seeded shuffle when ``seed`` is given.

    >>> sizes("B T d", seed=7) != sizes("B T d")
    True
    >>> sizes("B 3 d")  # 3 is the fixed axis; 4 = 2 + 2, 5 = 2 + 3, 6 = 2 * 3
    {'B': 2, 'd': 7}
    """
    problem = _Problem(source, avoid)
    chosen: dict[str, int] = {}
    for name in problem.names:
        found = next((c for c in _candidates(seed, start) if problem.acceptable(c, chosen, name)),
                     None)
        if found is None:
            raise problem.unsatisfiable(name, chosen)
        chosen[name] = found
    return chosen


def strategy(source: Source, *, max_size: int = 64) -> Any:
    """A hypothesis strategy drawing :func:`sizes`-like dicts (the same rules) for ``source``.

    Each name draws from the sizes up to ``max_size`` (grown when none remain) that keep the
    rules with the names drawn before it, so no draw is rejected; shrinking goes toward the
    smallest sizes.  Needs ``hypothesis``.
    """
    from hypothesis import strategies as st

    problem = _Problem(source)

    @st.composite
    def draw_sizes(draw: Callable[[Any], Any]) -> dict[str, int]:
        chosen: dict[str, int] = {}
        for name in problem.names:
            low, high = 2, max_size
            options: list[int] = []
            while not options:  # none left up to ``high``: grow it, up to a bound
                if low > max_size + _TRIES:  # then a few near each doubling beyond
                    options = [c for c in _beyond(2) if problem.acceptable(c, chosen, name)]
                    if not options:
                        raise problem.unsatisfiable(name, chosen)
                    break
                options = [c for c in range(low, high + 1) if problem.acceptable(c, chosen, name)]
                low, high = high + 1, high * 2
            chosen[name] = draw(st.sampled_from(options))
        return chosen

    return draw_sizes()


def shape_for(annotation: str | AnnotationShape, sizes: Mapping[str, int],
              rows: Mapping[str, tuple[int, ...]] | None = None,
              fill: int | None = None) -> tuple[int, ...]:
    """The concrete shape (memory order) of an annotation for the given sizes.

    ``rows`` gives row variables by key (``"v"`` for ``..v..``, ``"...output"`` for ``...``;
    missing ones are empty); ``_`` takes ``fill`` (default: a size different from all others).

    >>> shape_for("B, T+1, ..v.., _", {"B": 2, "T": 5}, rows={"v": (3, 4)})
    (2, 6, 3, 4, 13)
    """
    ann = annotation if isinstance(annotation, AnnotationShape) else parse_annotation(annotation)
    rows = rows or {}
    out: list[int | None] = []
    for item in map(_plain, ann.items):
        if isinstance(item, RowVariable):
            out.extend(rows.get(item.key, ()))
        elif isinstance(item, int):
            out.append(item)
        elif isinstance(item, Dim):
            out.append(item.evaluate(sizes))
        else:
            out.append(None)
    if None not in out:
        fill = 0  # no ``_`` to fill
    elif fill is None:
        taken = sorted({*sizes.values(), *(x for x in out if x is not None)})
        fill = next(c for c in range(max(taken, default=0) + 2, 1 << 30)
                    if not _derived(c, taken))
    return tuple(fill if x is None else x for x in out)


def _dtype(xp: Any, family: str | None) -> Any:
    """``xp``'s dtype of a family: float32, int32 and bool first, else the first that fits."""
    name = next(name for name in ("float32", "int32", "bool", "uint8", "complex64", "float64",
                                  "int64", "int8", "int16", "uint16", "uint32", "uint64",
                                  "float16", "complex128")
                if family is None or dtype_accepts(family, np.dtype(name)))
    dtype = getattr(xp, name, None)
    if dtype is None and name == "bool":
        dtype = getattr(xp, "bool_", None)
    if dtype is None:
        raise TypeError(f"{getattr(xp, '__name__', xp)!r} has no dtype {name}")
    return dtype


def arrays_for(fn: Callable[..., Any], sizes: Mapping[str, int], xp: Any = None,
               rows: Mapping[str, tuple[int, ...]] | None = None) -> dict[str, Any]:
    """Zero arrays, one per annotated parameter of ``fn``, keyed by parameter name.

    ``xp`` is an array module with ``zeros(shape, dtype=...)`` (numpy by default; torch and
    jax.numpy work): ``Float`` gives float32, ``Int`` int32 (jax's default integer; no x64
    warning), ``Bool`` bool, ``Shaped`` float32.

    >>> import numpy as np
    >>> from tensig.core.annotations import Bool, Float
    >>> def pool(x: Float[np.ndarray, "B T d"], mask: Bool[np.ndarray, "B T"]): ...
    >>> {k: (v.shape, v.dtype.name) for k, v in arrays_for(pool, sizes(pool)).items()}
    {'x': ((2, 5, 8), 'float32'), 'mask': ((2, 5), 'bool')}
    """
    xp = np if xp is None else xp
    sig = getattr(fn, "__tensig_signature__", None) or signature_of(fn)
    return {p.name: xp.zeros(shape_for(p.marker.shape, sizes, rows),
                             dtype=_dtype(xp, p.marker.dtype))
            for p in sig.parameters}
