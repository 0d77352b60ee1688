"""Lowering one assignment: ``result accum= combine(operands)`` under its projections.

Read-side views are :func:`tensig.execution.lowering.build_plan`'s; this module adds the
written side: a result axis written through a window (``x`` of ``oh<+kh`` receiving a
convolution's gradient) is computed over (output position, kernel position) pairs, then
scatter-added into the strided positions (a loop over kernel positions only).  So a
convolution's gradients are its own projections read backwards (OCANNL's way), or the
backend's own convolution backward (:func:`_conv_backward`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from tensig.backends import Backend
from tensig.core.errors import ShapeError
from tensig.core.inference import Inferred
from tensig.core.projections import AffineIndex, AxisUse, Iter
from tensig.core.shapes import Shape
from tensig.execution.ir import Operator
from tensig.execution.lowering import Plan, Pointwise, build_plan, spec_text, split_merges
from tensig.execution.native import conv_gradient
from tensig.execution.views import tiled_view, window_pads

__all__ = ["lower_assignment"]


def lower_assignment(inferred: Inferred, op: Operator | Pointwise, backend: Backend,
                     anchor: int | None = None) -> Plan:
    """The plan of one operation under ``inferred``'s projections, windows on the written side
    included: what eager calls and compiled routines run.  ``op``: an einsum-family operator
    or a :class:`~tensig.execution.lowering.Pointwise`; ``anchor``: as ``build_plan``'s."""
    split = split_merges(inferred)
    if split is not None:  # merged axes: reshapes around the plan of their factors
        inner = lower_assignment(split.inferred, op, backend, anchor).run
        ins, out = split.shapes[:-1], split.merged if split.shapes[-1] is not None else None

        def merged(arrays: Sequence[Any]) -> Any:  # operands split before, the result merged after
            y = inner([x if s is None else backend.reshape(x, s)
                       for x, s in zip(arrays, ins, strict=True)])
            return y if out is None else backend.reshape(y, out)

        return Plan(merged, inferred.shape, inferred)
    layout = inferred.layout
    result = layout[-1]
    conv = _conv_backward(layout, op, backend)
    if not any(isinstance(u.index, AffineIndex) for u in result):
        plan = build_plan(inferred, op, backend, anchor)
        return plan if conv is None else replace(plan, run=_or(conv, plan.run), direct=None)
    if op.accum != "+":
        raise ShapeError(f"{op.name} reduces by max, and a result written through a window "
                         "(an affine result axis) accumulates by adding",
                         spec=spec_text(inferred),
                         hint="write the affine axis with einsum1/einsum (adding), or take the "
                              "max first and place it with a second einsum1")
    expanded: list[AxisUse] = []
    for u in result:
        ix = u.index
        if isinstance(ix, AffineIndex):
            expanded += [AxisUse(u.kind, u.position, it.size, None, it)
                         for it in (ix.over, ix.kernel) if it is not None]
        elif isinstance(ix, Iter):
            expanded.append(u)
        else:
            raise ShapeError("a result axis written through a window (an affine result axis) "
                             "meets a fixed index or a concatenation in the same result, which "
                             "is not supported", spec=spec_text(inferred),
                             hint="write the window and the placement as two operations")
    sizes = tuple(int(u.size) for u in expanded)
    plan = build_plan(replace(inferred, layout=(*layout[:-1], tuple(expanded)),
                              shape=Shape(output=sizes)), op, backend, anchor)
    dims = [int(u.size) for u in result]
    if tiled_view(result) is not None:  # windows back to back: each cell written once
        def run(arrays: Sequence[Any]) -> Any:
            return backend.reshape(plan.run(arrays), dims)
    else:
        pairs = _scatter_pairs(result, dims, len(expanded))

        def run(arrays: Sequence[Any]) -> Any:  # each kernel position's slice added at its cells
            p = plan.run(arrays)
            out = backend.full(dims, 0, p)
            for dst, src in pairs:
                out = backend.scatter_add(out, dst, p[src])  # in place where arrays are mutable
            return out

    return Plan(run if conv is None else _or(conv, run), inferred.shape, inferred)


def _or(fast: Callable[[Sequence[Any]], Any | None], slow: Callable[[Sequence[Any]], Any]
        ) -> Callable[[Sequence[Any]], Any]:
    def run(arrays: Sequence[Any]) -> Any:
        v = fast(arrays)
        return slow(arrays) if v is None else v

    return run


def _conv_backward(layout: tuple[tuple[AxisUse, ...], ...], op: Operator | Pointwise,
                   backend: Backend) -> Callable[[Sequence[Any]], Any | None] | None:
    """The assignment as a convolution's gradient by the backend's own backward, where the
    result and one operand are a convolution's input and kernel and the other its output:
    ``arrays -> value``, ``None`` from it for arrays the backend does not take."""
    if op.combine != "mul" or op.accum != "+" or len(layout) != 3:
        return None
    result = layout[2]
    for g in (0, 1):  # the operand that is the convolution's output (its gradient)
        other = 1 - g
        # the input's gradient (the result is the windowed input), then the kernel's
        for forward, wrt in (((result, layout[other], layout[g]), 0),
                             ((layout[other], result, layout[g]), 1)):
            grad = conv_gradient(forward, backend, wrt)
            if grad is not None:
                def run(arrays: Sequence[Any], grad: Any = grad, g: int = g,
                        other: int = other) -> Any | None:
                    x, y = arrays[g], arrays[other]
                    return grad(x, y) if backend.conv_accepts(x, y) else None

                return run
    return None


def _scatter_pairs(uses: tuple[AxisUse, ...], dims: list[int], p_ndim: int
                   ) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
    """For each kernel position of a written side ``uses``: the strided slice it writes, and
    the value's matching slice (a window's kernel axis right after its own)."""
    specs, pos = [], 0  # (axis, output and kernel positions in the value, window geometry)
    for axis, u in enumerate(uses):
        ix = u.index
        if isinstance(ix, AffineIndex):
            windowed = ix.kernel is not None
            k = int(ix.kernel.size) if ix.kernel is not None else 1
            # the read side's own padding rule (only the left pad matters: no size is needed)
            left = window_pads(ix, 0)[1][0] if windowed else 0
            specs.append((axis, pos, pos + 1 if windowed else None, int(ix.over.size), k,
                          ix.stride, ix.dilation, left, ix.offset))
            pos += windowed
        pos += 1
    pairs = []
    for ks in itertools.product(*(range(sp[4]) for sp in specs)):
        dst: list[Any] = [slice(None)] * len(dims)
        src: list[Any] = [slice(None)] * p_ndim
        for (axis, o_pos, k_pos, out_n, _k, stride, dil, left, off), k in zip(
                specs, ks, strict=True):
            start = dil * k - left + off
            o_lo = 0 if start >= 0 else -(start // stride)  # first output reading in range
            o_hi = min(out_n, -(-(dims[axis] - start) // stride))  # one past the last
            if o_hi <= o_lo:
                break
            first = start + stride * o_lo
            dst[axis] = slice(first, first + stride * (o_hi - o_lo - 1) + 1, stride)
            src[o_pos] = slice(o_lo, o_hi)
            if k_pos is not None:
                src[k_pos] = k
        else:
            pairs.append((tuple(dst), tuple(src)))
    return pairs
