"""NumPy's broadcasting rule over symbolic shapes, with the checks it needs.

The rule silently accepts what is usually a bug, so :func:`broadcast` also reports two different
sizes that meet (``B`` against ``T``) and an implicit two-sided broadcast, an outer product
nobody asked for.  A size-1 axis from the outside (``loose``, a signature's ``1``) stretches
implicitly; one the code made (``None``, ``unsqueeze``, ``keepdims``) is an explicit request.
A view broadcast so (``expand``) shares memory between elements: torch refuses most writes to it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any, Protocol

from tensig.check.sym_sizes import ONE
from tensig.check.tracing import _TORCH_STYLE, tracer
from tensig.core.dims import Dim
from tensig.core.errors import InconclusiveError

__all__ = ["broadcast", "carry_strides", "differ", "shape_text", "shared", "strides_of",
           "write_shared"]


class Shaped(Protocol):
    """What broadcasting reads of an operand (a :class:`~tensig.check.tracer.SymArray`)."""

    dims: tuple[Dim, ...]
    loose: frozenset[int]
    moved: tuple[int, ...] | None

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


# torch's in-place methods that accept a written tensor whose elements share memory (run)
_SHARED_OK = frozenset(("fill_", "zero_", "masked_fill_", "index_fill_", "index_put_", "tril_",
                        "triu_", "fill_diagonal_", "requires_grad_", "squeeze_", "unsqueeze_",
                        "t_", "transpose_", "swapaxes_", "resize_", "set_", "as_strided_",
                        "share_memory_", "map_", "apply_", "detach_"))


def strides_of(a: Shaped) -> tuple[int, ...]:
    """``a``'s strides at the witness, in elements: ``moved``, or C order's."""
    if a.moved is not None:
        return a.moved
    value = tracer().value
    return tuple(math.prod(value(d) for d in a.dims[i + 1:]) for i in range(a.ndim))


def carry_strides(a: Shaped, out: Shaped, origin: Sequence[tuple[int, int] | None]) -> None:
    """``out`` views ``a``'s memory: its axis ``j`` is ``a``'s axis ``origin[j][0]`` stepped
    by ``origin[j][1]`` (a slice's step), or (None) a new one, of size 1 or expanded (stride
    0).  Only strides that are not C order's are kept (``moved``): a permute's, an expand's."""
    if a.moved is not None:
        out.moved = tuple(0 if o is None else a.moved[o[0]] * o[1] for o in origin)


def shared(x: Shaped) -> list[int]:
    """The axes of ``x`` whose elements share one memory (stride 0: an expand's)."""
    return [i for i, s in enumerate(getattr(x, "moved", None) or ()) if s == 0 and x.dims[i] != ONE]


def write_shared(x: Shaped, op: str) -> None:
    """torch refuses most writes in place into a view whose elements share memory (a size-1
    axis expanded, and any view of it): an error where that size is above 1 at every size, else
    the assumption that it is 1 (``clone()`` copies).  Not in NumPy or JAX code: JAX's ``+=``
    rebinds."""
    if op in _SHARED_OK or _TORCH_STYLE.get() is False:
        return
    for d in (x.dims[i] for i in shared(x)):
        what = (f"{op} writes into {shape_text(x)}, broadcast from size 1 to {d}: its "
                f"elements share memory, which torch refuses")
        try:
            if d > ONE:
                tracer().report("op-shape", f"{what} (clone() it first)")
        except InconclusiveError:
            tracer().report("assumption", f"assumes {d} == 1: {what} where {d} > 1 (clone() "
                                          f"it first)")
