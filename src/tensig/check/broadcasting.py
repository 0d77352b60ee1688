"""NumPy's broadcasting rule over symbolic shapes, with the checks it needs.

The rule silently accepts what is usually a bug, so :func:`broadcast` also reports two different
sizes that meet (``B`` against ``T``) and an implicit two-sided broadcast, an outer product
nobody asked for.  A size-1 axis from the outside (``loose``, a signature's ``1``) stretches
implicitly; one the code made (``None``, ``unsqueeze``, ``keepdims``) is an explicit request.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Protocol

from tensig.check.sym_sizes import ONE
from tensig.check.tracing import tracer
from tensig.core.dims import Dim

__all__ = ["broadcast", "differ", "shape_text"]


class Shaped(Protocol):
    """What broadcasting reads of an operand (a :class:`~tensig.check.tracer.SymArray`)."""

    dims: tuple[Dim, ...]
    loose: frozenset[int]

    @property
    def ndim(self) -> int: ...


def differ(a: Dim, b: Dim) -> bool:
    """Different sizes, even where every recorded divisibility assumption holds."""
    return a != b and not tracer().equal_under_assumptions(a, b)


def broadcast(arrays: Sequence[Shaped], what: str) -> tuple[tuple[Dim, ...], frozenset[int]]:
    """NumPy's rule, right-aligned, with three checks the rule itself does not make."""
    n = max((a.ndim for a in arrays), default=0)
    out: list[Dim] = []
    implicit: list[set[int]] = [set() for _ in arrays]
    firm: list[set[int]] = [set() for _ in arrays]
    loose_out: set[int] = set()
    for pos in range(n):
        sizes = [None if (j := pos - n + a.ndim) < 0 else (a.dims[j], j in a.loose)
                 for a in arrays]
        real = [s[0] for s in sizes if s is not None and s[0] != ONE]
        target = real[0] if real else ONE
        other = next((d for d in real[1:] if differ(d, target)), None)
        if other is not None:
            shapes = " and ".join(shape_text(a) for a in arrays if a.ndim)
            tracer().report("broadcast", f"broadcasts {target} against {other} in {what} "
                                         f"(shapes {shapes})")
        out.append(target)
        if target == ONE:  # only 1s meet: the result's 1 is loose when every one of them is
            if all(s[1] for s in sizes if s is not None):
                loose_out.add(pos)
            continue
        for i, s in enumerate(sizes):
            if s is None or (s[0] == ONE and s[1]):
                implicit[i].add(pos)
            elif s[0] != ONE:
                firm[i].add(pos)
    for i, k in itertools.combinations(range(len(arrays)), 2):
        if implicit[i] & firm[k] and implicit[k] & firm[i]:  # both stretched by the rule itself
            tracer().report(
                "outer-product",
                f"implicit two-sided broadcast: {shape_text(arrays[i])} and "
                f"{shape_text(arrays[k])} become {shape_text(out)}, an outer "
                "product (expand one side explicitly with None/unsqueeze if that is meant)")
            break
    return tuple(out), frozenset(loose_out)


def shape_text(a: Shaped | Sequence[Any]) -> str:
    """An array's shape, or sizes', as findings print them: ``[B, T]``."""
    return f"[{', '.join(map(str, a if isinstance(a, Sequence) else a.dims))}]"
