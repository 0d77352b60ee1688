"""Shape inference: ``infer(spec, *operands) -> Inferred``, cached: the answer holds the sizes,
the conditions and the *projections* the execution layer lowers.  Graph-wide inference is
:class:`ShapeGraph` (:mod:`tensig.core.shape_graph`).  The logics (OCANNL's ``~logic``):

- an einsum spec: **equalities** -- labels unify exactly, a size-1 axis does not stretch, a
  shared row variable (including the implicit ``...`` of omitted rows) forces equal rows;
- ``"."`` pointwise broadcasting: each operand is broadcast into the result; only a claim-free
  (basis-free) size-1 axis stretches, and an unlabelled axis never fuses with a labelled one
  (except what is written to broadcast, a number or an einsum's kept cell, which stretches
  onto a labelled axis, and a parameter's given axis, which takes the label it meets);
- ``"@"`` compose: the left operand's input row contracts with the right operand's output row,
  batch rows broadcast; ``"T"`` transposes the input and output rows.

>>> r = infer("ij;jk=>ik", (2, 3), (3, 4))
>>> r.shape, r.dims["j"]
(Shape('2,4'), 3)
>>> infer("...|2*oh<+wh; |wh => ...|oh", "8|9", (3,)).shape
Shape('8|4')
>>> from tensig.core.dims import dim
>>> r = infer("i<+k; k => i", [dim("T")], [3])
>>> r.shape, [str(c) for c in r.conditions]
(Shape('T - 2'), ['T >= 3'])
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from tensig.core import kept
from tensig.core.notation import parse
from tensig.core.projections import AffineIndex, AxisUse, ConcatIndex, FixedIndex, Iter, MergeIndex
from tensig.core.shape_graph import ShapeGraph, TensorNode, infer_logic, logic_projections
from tensig.core.shapes import Shape, as_shape
from tensig.core.spec_instance import (
    EINSUM_OPS,
    LOGICS,
    Inferred,
    SpecInstance,
    count_text,
    freeze_params,
    register_operand_counts,
)

__all__ = ["AffineIndex", "AxisUse", "ConcatIndex", "FixedIndex", "Inferred", "Iter", "MergeIndex",
           "ShapeGraph", "TensorNode", "count_text", "infer", "logic_projections",
           "register_operand_counts"]


def infer(
    spec: str,
    *operands: Any,
    op: str | None = None,
    params: Mapping[str, int] | None = None,
    use_padding: bool | None = None,
    result: Any = None,
    sizes: Mapping[str, Any] | None = None,
) -> Inferred:
    """Infer the result shape of ``spec`` applied to ``operands``.

    Operands are :class:`Shape` objects, shape strings (``"2|3->4"``), tuples (output axes) or
    arrays; ``spec`` is an einsum spec or a logic (``"."``, ``"@"``, ``"T"``).  ``params``
    resolves stride/dilation identifiers, ``use_padding`` decides plain ``+`` affine axes,
    ``op`` (``einsum``, ``einsum1``, ``outer_sum``, ``tropical``, ``einmax1``, ``concat``)
    checks that operator's arity, ``result`` gives the result shape (for middle concatenation
    and replicated labels), ``sizes`` label sizes.  A repeated call is a dictionary lookup.

    >>> infer("b|i->o; o->p => b|i->p", "8|3->4", "4->5").shape
    Shape('8|3->5')
    >>> infer(".", (8, 1, 4), (3, 1)).shape
    Shape('8,3,4')
    """
    try:
        key = (spec, tuple(map(_raw_key, operands)), op,
               None if params is None else tuple(params.items()), use_padding,
               None if result is None else _raw_key(result),
               None if sizes is None else tuple(sizes.items()))
        hit = _FAST.get(key)
    except (TypeError, AttributeError):  # unhashable pieces: take the checked path
        key, hit = None, None
    if hit is not None:
        return hit
    if not isinstance(spec, str):
        raise TypeError(f"spec must be a str, not {type(spec).__name__}")
    shapes = tuple(as_shape(x, where=f"operand {i}") for i, x in enumerate(operands))
    res = None if result is None else as_shape(result, where="result")
    key_params = freeze_params(params)
    if sizes is not None and not isinstance(sizes, Mapping):
        raise TypeError(f"sizes must be a mapping such as {{'h': 4}}, not {type(sizes).__name__}")
    key_sizes = None if sizes is None else tuple(
        (k, tuple(v) if isinstance(v, list | tuple) else v) for k, v in sizes.items())
    if use_padding is not None and not isinstance(use_padding, bool):
        raise TypeError(f"use_padding must be True, False or None, not {use_padding!r}")
    answer = _infer_cached(spec, shapes, op, key_params, use_padding, res, key_sizes)
    if key is not None:
        kept(_FAST, key, answer, 8192)
    return answer


# The fast path: raw operand keys (shape tuples, strings) straight to the answer.
_FAST: dict[tuple[Any, ...], Inferred] = {}


def _raw_key(x: Any) -> Any:
    """A cheap hashable key for an operand: its shape tuple, string or Shape."""
    if isinstance(x, tuple | str | Shape):
        return x
    shape = getattr(x, "__tensig_shape__", None)
    if shape is not None:
        return shape
    shape = x.shape
    return shape if type(shape) is tuple else tuple(shape)


@functools.lru_cache(maxsize=8192)
def _infer_cached(spec: str, shapes: tuple[Shape, ...], op: str | None,
                  params: tuple[tuple[str, int], ...], use_padding: bool | None,
                  result: Shape | None, sizes: tuple[tuple[str, Any], ...] | None) -> Inferred:
    logic = LOGICS.get(spec.strip(), op if op in LOGICS.values() else None)
    if logic is not None:
        return infer_logic(logic, shapes, result)
    if op is not None and op not in EINSUM_OPS:
        raise ValueError(f"unknown op {op!r}; expected one of "
                         f"{', '.join([*EINSUM_OPS, *LOGICS.values()])}")
    return SpecInstance(parse(spec), op, dict(params), use_padding).run(
        shapes, result, dict(sizes or ()))
