"""Compiled assignments whose spec has convolution windows or concatenations.

One label per axis (:mod:`tensig.projections`) cannot say ``h = 2*oh + kh`` or ``a^b``:
such a projection raises :class:`~tensig.model.projections.WindowedAxes`, and
:func:`windowed_step` compiles the assignment here instead.  Forward code runs through the
eager lowering (torch's own convolution and max pooling where it applies); a convolution's
gradients through the backend's convolution backward, or an einsum to (output position,
kernel position) pairs and a scatter; a concatenation's gradient by the reversed spec; any
other expression under the operation's projections (the max-pooling gradient gate) over the
(output, kernel position) product space, read through the lowering's own window views.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tensig.backends import Backend, all_zero
from tensig.core.errors import ShapeError
from tensig.execution.ir import OPERATORS, Assign, Buf, Expr, buffers_of
from tensig.model.codegen import align_function, expression_function
from tensig.model.projections import OpProjection

if TYPE_CHECKING:
    from tensig.model.compile import Store

__all__ = ["windowed_step"]


def windowed_step(a: Assign, backend: Backend, xp: Any) -> Callable[[Store], None] | None:
    """The step of an assignment under a windowed or concatenating spec, or None when it is
    none of the kinds this module runs (forward code of a spec operation, a concatenation's
    or a convolution's gradient, an expression under an operation's projections)."""
    return _eager_assign(a, backend) or _concat_grad_assign(a, backend) or \
        _affine_grad_assign(a, backend) or _affine_generic_assign(a, backend, xp)


#: (combine, accumulation) of a spec assignment -> the eager operator that lowers it
_EAGER = {(o.combine, o.accum): o for o in OPERATORS.values()}


def _eager_assign(a: Assign, backend: Backend) -> Callable[[Store], None] | None:
    """Convolution and concatenation specs run through the eager lowering (forward)."""
    if not isinstance(a.logic, str) or a.logic in (".", "@", "T") or not a.init:
        return None
    e = a.expr
    op = _EAGER.get((e.op, a.accum or ""))
    if op is None or not all(isinstance(x, Buf) for x in e.args):
        return None
    from tensig.core.inference import infer
    from tensig.execution.lowering import build_plan

    shapes = [x.tensor.shape for x in e.args]
    plan = build_plan(infer(a.logic, *shapes, op=op.name), op, backend)
    lhs = a.lhs

    def step(store: Store) -> None:
        store.write(lhs, plan.run([store.read(x) for x in e.args]))

    return step


def _concat_grad_assign(a: Assign, backend: Backend) -> Callable[[Store], None] | None:
    """Backward of a concatenation: each operand's gradient is its part of the result's
    gradient, extracted by the reversed spec (``a^b => a``) through the eager lowering."""
    from tensig.core.inference import infer
    from tensig.core.notation import Spec, parse
    from tensig.execution.lowering import build_plan

    proj, e = a.logic, a.expr
    if not isinstance(proj, OpProjection) or a.accum != "+" or e.op != "id" or \
            not isinstance(e.args[0], Buf) or e.args[0].tensor is not proj.result:
        return None
    spec = parse(proj.logic)
    try:
        i = [t.id for t in proj.args].index(a.lhs.tensor.id)
    except ValueError:
        return None
    text = str(Spec((spec.result,), spec.operands[i]))
    forward = infer(proj.logic, *[t.shape for t in proj.args])
    labels = parse(text).labels
    r = infer(text, proj.result.shape, sizes={k: v for k, v in forward.dims.items()
                                              if k in labels})
    plan = build_plan(r, OPERATORS["einsum1"], backend)
    lhs, src = a.lhs, e.args[0]
    init = a.init  # the first contribution sets the gradient (see fold_zero_init)

    def step(store: Store) -> None:
        _add_into(store, lhs, plan.run([store.read(src)]), not init)

    return step


def _affine_grad_assign(a: Assign, backend: Backend) -> Callable[[Store], None] | None:
    """Backward of a convolution-style einsum (``g_x += g * w`` under the op's projections).

    The gradient of the kernel is an einsum whose operands still carry the affine axes (the
    eager lowering handles it).  The gradient of the windowed input is the transposed
    operation: an einsum to the (output position, kernel position) pairs, then a scatter-add
    of each kernel position's slice into the strided input positions -- a loop over kernel
    positions only, vectorised over everything else.
    """

    from tensig.core.inference import AffineIndex, infer
    from tensig.core.notation import Affine, Label, Row, ShapeSpec, Spec, parse
    from tensig.execution.lowering import build_plan

    proj, e = a.logic, a.expr
    if not isinstance(proj, OpProjection) or a.accum != "+" or e.op != "mul" or \
            len(e.args) != 2 or not all(isinstance(x, Buf) for x in e.args):
        return None
    spec = parse(proj.logic)
    roles = {proj.result.id: spec.result, **{t.id: sh for t, sh in zip(proj.args,
                                                                        spec.operands,
                                                                        strict=True)}}
    try:
        arg_specs = [roles[x.tensor.id] for x in e.args]
        lhs_spec = roles[a.lhs.tensor.id]
    except KeyError:
        return None
    affine = [ax for _, row in lhs_spec.rows() for ax in row.axes if isinstance(ax, Affine)]

    def split(row: Row) -> Row:
        def parts(ax: Any) -> tuple[Any, ...]:
            if not isinstance(ax, Affine):
                return (ax,)
            if ax.kernel is None:
                return (Label(ax.over),)
            return (Label(ax.over), Label(ax.kernel))

        return Row(tuple(p for ax in row.left for p in parts(ax)), row.var,
                   tuple(p for ax in row.right for p in parts(ax)))

    target = ShapeSpec(*(split(r) for _, r in lhs_spec.rows()))
    text = str(Spec(tuple(arg_specs), target))
    shapes = [x.tensor.shape for x in e.args]
    # sizes the forward operation determined (a padded kernel's size is not implied by the
    # input and output sizes, so the transposed spec needs it given)
    forward = infer(proj.logic, *[t.shape for t in proj.args])
    labels = parse(text).labels
    known = {k: v for k, v in forward.dims.items() if k in labels}
    try:
        r = infer(text, *shapes, op="einsum", sizes=known)
    except ShapeError:
        return None
    plan = build_plan(r, OPERATORS["einsum"], backend)
    lhs = a.lhs
    init = a.init  # the first contribution sets the gradient (see fold_zero_init)
    fast = _conv_grad_assign(a, forward, backend)
    if not affine:
        def step(store: Store) -> None:
            v = fast(store) if fast is not None else None
            if v is None:
                v = plan.run([store.read(x) for x in e.args])
            _add_into(store, lhs, v, not init)

        return step
    # where each affine axis sits in the expanded result (output position, then kernel
    # position), with the geometry the forward operation resolved
    lhs_dims = list(lhs.tensor.shape.int_dims)
    lhs_index = [t.id for t in proj.args].index(lhs.tensor.id)
    specs = []
    pos = 0
    for axis, u in enumerate(forward.layout[lhs_index]):
        ix = u.index
        if isinstance(ix, AffineIndex):
            specs.append(_scatter_spec(axis, pos, pos + 1 if ix.kernel is not None else None,
                                       ix))
            pos += 2 if ix.kernel is not None else 1
        else:
            pos += 1
    pairs = _scatter_pairs(specs, lhs_dims, len(r.layout[-1]))

    def step(store: Store) -> None:
        v = fast(store) if fast is not None else None
        if v is not None:
            _add_into(store, lhs, v, not init)
            return
        p = plan.run([store.read(x) for x in e.args])
        _scatter_into(store, lhs, p, pairs, lhs_dims, backend, not init)

    return step


def _conv_grad_assign(a: Assign, forward: Any, backend: Backend
                      ) -> Callable[[Store], Any] | None:
    """The gradient of a convolution's operand by the backend's own convolution backward
    (torch), when the forward operation is one it convolves: ``store -> gradient``, or
    ``None`` from the callable for operands it does not take (integers)."""
    from tensig.execution.lowering import conv_gradient

    proj, e = a.logic, a.expr
    if len(proj.args) != 2:
        return None
    ids = [t.id for t in proj.args]
    wrt = ids.index(a.lhs.tensor.id)
    g_buf = next((x for x in e.args if x.tensor is proj.result and x.field == "grad"), None)
    other = next((x for x in e.args if x.tensor is proj.args[1 - wrt] and x.field == "value"),
                 None)
    if g_buf is None or other is None or proj.args[0] is proj.args[1]:
        return None
    grad = conv_gradient(forward, backend, wrt)
    if grad is None:
        return None
    accepts = backend.conv_accepts  # type: ignore[attr-defined]

    def compute(store: Store) -> Any:
        g, o = store.read(g_buf), store.read(other)
        return grad(g, o) if accepts(g, o) else None

    return compute


def _affine_generic_assign(a: Assign, backend: Backend, xp: Any
                           ) -> Callable[[Store], None] | None:
    """Any assignment under a convolution-style spec's projections (e.g. the max-pooling
    gradient gate): read windowed operands through the lowering's own views, compute over
    the (output position, kernel position) product space, and scatter into a windowed
    left-hand side over kernel positions -- or, when its windows tile their axes, reshape
    the value into it.
    """

    from tensig.core.inference import infer
    from tensig.execution.lowering import check_windows, operand_view, tiled_view

    proj = a.logic
    if not isinstance(proj, OpProjection) or a.accum not in ("+", None):
        return None
    r = infer(proj.logic, *[t.shape for t in proj.args])
    check_windows(r)
    index = {proj.result.id: len(proj.args), **{t.id: i for i, t in enumerate(proj.args)}}
    bufs = buffers_of(a.expr)
    if a.lhs.tensor.id not in index or any(b.tensor.id not in index for b in bufs):
        return None
    op = getattr(proj.result, "op", None)
    # a max-reducing operation: the views pad each operand with its dtype's neutral_max
    neutral = OPERATORS[op.op].neutral if getattr(op, "op", None) in OPERATORS else 0.0

    def view_of(t: Any) -> tuple[Callable[[Any, float], Any], list[str], list[int]]:
        i = index[t.id]
        fn, keys, sizes = operand_view(r.layout[i], i, {}, backend)
        return fn, [f"e{k}" for k in keys], sizes

    views = [view_of(b.tensor) for b in bufs]
    _, lhs_keys, lhs_sizes = view_of(a.lhs.tensor)
    product = list(dict.fromkeys([*lhs_keys, *(k for _, ks, _ in views for k in ks)]))
    sizes = dict(zip(lhs_keys, lhs_sizes, strict=True))
    for _, ks, ns in views:
        sizes.update(zip(ks, ns, strict=True))
    reduced = tuple(product.index(k) for k in product if k not in lhs_keys)
    kept = [k for k in product if k in lhs_keys]
    perm = [kept.index(k) for k in lhs_keys]
    aligners = [align_function(tuple(ks), product, backend, xp, list(ns))
                for _, ks, ns in views]
    full = tuple(sizes[k] for k in product)
    # the left-hand side's affine axes: scatter positions
    lhs_uses = r.layout[index[a.lhs.tensor.id]]
    lhs_dims = list(a.lhs.tensor.shape.int_dims)
    if any(_is_fixed(u) for u in lhs_uses):
        return None
    # windows that tile their axes: the view split each in place (output, kernel position),
    # so the value is the gradient, reshaped; otherwise a scatter over kernel positions
    tiled = tiled_view(lhs_uses) is not None
    scatter = [] if tiled else _lhs_scatter(lhs_uses)

    slots = {b.key: i for i, b in enumerate(bufs)}
    expr = expression_function(a.expr, slots, backend, xp)
    zero_slots, expr_dropped = _zero_window_variant(a.expr, bufs, slots, backend, xp)
    widen = getattr(backend, "widen", None)
    aligned = [[sizes[k] if k in ks else 1 for k in product] for _, ks, _ in views]
    widths = [_widening(s, aligned) if widen is not None else None for s in aligned]
    # each operand: its view, lined up with the product space, widened (see _widening)
    prepare = [_operand_prep(fn, align, widen, w, neutral)
               for (fn, _, _), align, w in zip(views, aligners, widths, strict=True)]
    keys = [b.key for b in bufs]

    def value(store: Store) -> Any:
        try:
            raw = [store.arrays[k] for k in keys]
        except KeyError:
            raw = [store.read(b) for b in bufs]  # the message
        if zero_slots and all(all_zero(raw[i]) for i in zero_slots):
            e = expr_dropped  # the window's operand is not read
            args = [None if i in zero_slots else prep(x)
                    for i, (x, prep) in enumerate(zip(raw, prepare, strict=True))]
        else:
            e = expr
            args = [prep(x) for x, prep in zip(raw, prepare, strict=True)]
        v = e(args)
        if tuple(v.shape) != full:
            v = backend.broadcast_to(v, full)
        if reduced:
            v = v.sum(reduced)
        if transpose:
            v = backend.transpose(v, perm)
        return v

    transpose = perm != sorted(perm)
    lhs = a.lhs
    # onto the old value: an accumulation, unless it is the first contribution (see
    # fold_zero_init)
    add = a.accum is not None and not a.init
    pairs = _scatter_pairs(scatter, lhs_dims, len(lhs_keys))

    def step(store: Store) -> None:
        p = value(store)
        if tiled:
            _add_into(store, lhs, backend.reshape(p, lhs_dims), add)
        elif scatter:
            _scatter_into(store, lhs, p, pairs, lhs_dims, backend, add)
        else:
            _add_into(store, lhs, p, add)

    return step


def _lhs_scatter(lhs_uses: Any) -> list[tuple[Any, ...]]:
    """Where a windowed left-hand side's value comes from when its windows do not tile: the
    view keeps one axis per left-hand axis (an affine axis as its output position) and
    appends the kernel axes at the end, in order; one scatter spec per affine axis."""
    from tensig.core.inference import AffineIndex

    scatter = []
    kpos = 0
    for axis, u in enumerate(lhs_uses):
        ix = u.index
        if isinstance(ix, AffineIndex):
            scatter.append(_scatter_spec(axis, axis, len(lhs_uses) + kpos
                                         if ix.kernel is not None else None, ix))
            if ix.kernel is not None:
                kpos += 1
    return scatter


def _zero_window_variant(e: Expr, bufs: list[Buf], slots: dict[tuple[int, str], int],
                         backend: Backend, xp: Any
                         ) -> tuple[list[int], Callable[[list[Any]], Any] | None]:
    """A small buffer added to a term (the pooling gate's window: ``x + w == max``) holds
    zeros in max pooling.  The operands that are such buffers, and the expression without
    them (None when there are none); the step picks it per call, by a test of the buffers."""
    small = [i for i, b in enumerate(bufs) if _numel(b.tensor) <= 64]
    dropped = _drop_added(e, {bufs[i].key for i in small})
    if dropped == e:
        return [], None
    kept = {b.key for b in buffers_of(dropped)}
    zero_slots = [i for i in small if bufs[i].key not in kept]
    return zero_slots, expression_function(dropped, slots, backend, xp) if zero_slots else None


def _operand_prep(view: Callable[[Any, float], Any], align: Callable[[Any], Any],
                  widen: Callable[[Any, Any], Any] | None, width: Any, neutral: float
                  ) -> Callable[[Any], Any]:
    """``array -> operand``: the window view, lined up with the product space, widened when
    ``width`` says so -- composed once, one call per operand per step."""
    if widen is None or width is None:
        return lambda x: align(view(x, neutral))
    return lambda x: widen(align(view(x, neutral)), width)


def _numel(t: Any) -> int:
    return math.prod(t.shape.int_dims)


def _drop_added(e: Any, keys: set[tuple[int, str]]) -> Any:
    """``e`` with every ``add(x, w)`` (or ``add(w, x)``) whose ``w`` is one of the buffers
    ``keys`` replaced by ``x``: the expression for when those buffers hold zeros.  (The sign
    of a zero may differ: ``-0.0 + 0.0`` is ``+0.0``; equal to 0 in every comparison.)"""
    if not isinstance(e, Expr):
        return e
    args = tuple(_drop_added(x, keys) for x in e.args)
    if e.op == "add" and len(args) == 2:
        for w, x in (args, args[::-1]):
            if isinstance(w, Buf) and w.key in keys and buffers_of(x):
                return x
    return Expr(e.op, args) if args != e.args else e


def _widening(shape: list[int], aligned: list[list[int]], rows: int = 128) -> list[int] | None:
    """The shape to materialise a broadcast operand at before a windowed elementwise op on
    torch's CPU kernels, or None to leave it as it is.

    An operand broadcast along an axis just outside a short block of inner axes (the pooling
    gate's ``max`` over a 2x2 window: broadcast over the window, 16 channels inside) cuts
    torch's elementwise loops into rows of that block's length, at about 1 ns an element
    against 0.3 for long rows (a 32x8x8x16 comparison: 35 us, 9 us once the max is copied
    along the inner window axis, which takes 4 us).  So copy the operand along such axes,
    innermost first, while the rows are shorter than ``rows`` and the copy stays at most half
    the size of the product space.
    """
    full = [max(s[k] for s in aligned) for k in range(len(shape))]
    total = math.prod(full)
    if math.prod(shape) <= 1 or total < 4096:
        return None
    target = list(shape)
    while True:
        k = next((k for k in reversed(range(len(target))) if target[k] < full[k]), None)
        if k is None or math.prod(full[k + 1:]) >= rows:
            break
        wider = [*target[:k], full[k], *target[k + 1:]]
        if 2 * math.prod(wider) > total:
            break
        target = wider
    return target if target != shape else None


def _scatter_into(store: Store, lhs: Buf, p: Any, pairs: list[tuple[Any, Any]],
                  lhs_dims: list[int], backend: Backend, add: bool) -> None:
    """Scatter-add each kernel position's slice of ``p`` into ``lhs`` (see
    :func:`_scatter_pairs`), onto its old value when ``add`` and it has one, else onto 0."""
    # a fresh array (a copy of the old value): the scatter below writes into it
    grad = store.read(lhs) + 0 if add and store.has(lhs) else backend.full(lhs_dims, 0, p)
    for dst, src in pairs:
        grad[dst] += p[src]
    store.write(lhs, grad)


def _scatter_spec(axis: int, o_pos: int, k_pos: int | None, ix: Any) -> tuple[Any, ...]:
    """One windowed axis of a left-hand side: where its output and kernel positions sit in
    the value, and the geometry (outputs, kernel size, stride, dilation, left pad, offset)."""
    from tensig.execution.lowering import window_pads

    k = int(ix.kernel.size) if ix.kernel is not None else 1
    # the lowering's own padding rule (only the left pad matters here, so no size is needed)
    left = window_pads(ix, 0)[1][0] if ix.kernel is not None else 0
    return (axis, o_pos, k_pos, int(ix.over.size), k, ix.stride, ix.dilation, left, ix.offset)


def _scatter_pairs(specs: list[tuple[Any, ...]], lhs_dims: list[int], p_ndim: int
                   ) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
    """For each kernel position: the strided slice of the windowed axis it reads, and the
    matching slice of the (output position, kernel position) array -- computed once.

    ``specs`` holds, per affine axis: (axis, output-position axis, kernel axis or None,
    outputs, kernel size, stride, dilation, left padding, offset).
    """
    import itertools

    pairs = []
    for ks in itertools.product(*(range(sp[4]) for sp in specs)):
        dst: list[Any] = [slice(None)] * len(lhs_dims)
        src: list[Any] = [slice(None)] * p_ndim
        for (axis, o_pos, k_pos, out_n, _k, stride, dil, left, off), k in zip(
                specs, ks, strict=True):
            start = dil * k - left + off
            o_lo = 0 if start >= 0 else -(start // stride)  # first output reading in range
            o_hi = out_n
            while o_hi > o_lo and start + stride * (o_hi - 1) >= lhs_dims[axis]:
                o_hi -= 1
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


def _is_fixed(u: Any) -> bool:
    from tensig.core.inference import FixedIndex

    return isinstance(u.index, FixedIndex)


def _add_into(store: Store, lhs: Buf, v: Any, add: bool) -> None:
    """``lhs =+ v`` when ``add`` and ``lhs`` has a value, else ``lhs =: v``."""
    store.write(lhs, store.read(lhs) + v if add and store.has(lhs) else v)
