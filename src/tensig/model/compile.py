"""Compiling assignment code into straight-line backend calls.

:func:`compile_code` turns a :class:`~tensig.execution.ir.Code` into a :class:`Routine`: an
assignment whose axes are all iterators or fixed indices becomes one generated function
(:mod:`tensig.model.codegen`), one with windows or concatenations is lowered
(:func:`_lowered_step`), repeated pointwise blocks run once over their concatenation
(:mod:`tensig.model.fusion`), after passes that drop dead stores and zero contributions and
fold zero initialisations.  Running a routine does no shape work.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import replace
from functools import partial
from typing import Any

from tensig.backends import Backend, all_zero, backend_for, is_integer
from tensig.core.errors import ShapeError
from tensig.core.projections import AxisUse, FixedIndex, Iter
from tensig.core.shapes import Shape
from tensig.execution.assignment import lower_assignment
from tensig.execution.ir import (
    OPERATORS,
    RECORDS,
    WHOLE,
    Assign,
    Buf,
    Code,
    Expr,
    Operator,
    Out,
    buffers_of,
    ops_of,
)
from tensig.execution.lowering import Pointwise
from tensig.execution.native import conv_pair, pool_gradient, pool_kernel
from tensig.model.codegen import Labels, assignment_step, expression_function
from tensig.model.fusion import FusedBlocks, Run, fuse_repeats
from tensig.model.staging import Staged

__all__ = ["Routine", "Store", "compile_code"]


class Store:
    """The arrays of a graph by (tensor id, field); ``device``: where arrays made from numbers
    alone go (None for NumPy)."""

    def __init__(self, device: Any = None) -> None:
        self.arrays: dict[tuple[int, str], Any] = {}
        #: what a kernel keeps for its own gradient step (torch's max-pooling maxima)
        self.saved: dict[tuple[int, str], Any] = {}
        self.device = device
        #: training mode; :meth:`tensig.graph.Graph.eval` clears it
        self.training = True

    def read(self, buf: Buf) -> Any:
        key = buf.key
        if key not in self.arrays:
            raise KeyError(f"{buf!r} has no array yet: run the routine that computes it first")
        return self.arrays[key]

    def write(self, buf: Buf, value: Any) -> None:
        self.arrays[buf.key] = value

    def has(self, buf: Buf) -> bool:
        return buf.key in self.arrays


#: one compiled step of a routine
Step = Callable[[Store], None]
#: two adjacent steps rewritten to run together, or None (see :func:`_pair_steps`)
Pairing = Callable[[Assign, Assign, Step, Step], tuple[Step, Step] | None]


class Routine:
    """A compiled sequence of assignments: ``run(store)`` only calls array functions.

    On torch the steps run under ``torch.inference_mode()``: tensig differentiates by its own
    code, so autograd's bookkeeping is pure overhead (6-14% of a training step); ``.clone()`` a
    routine's array before handing it to ``torch.autograd``.  On JAX ``staged`` runs the steps
    as one compiled function (:mod:`tensig.model.staging`).
    """

    def __init__(self, steps: list[Step], code: Code,
                 mode: Callable[[], Any] | None = None, staged: Staged | None = None,
                 items: list[Assign | Run] | None = None):
        self.steps, self.code, self.mode, self.staged = steps, code, mode, staged
        #: what each step runs (an assignment or a fused run); ``None`` for steps put by hand
        self.items = items

    def run(self, store: Store) -> None:
        if self.staged is not None and self.staged.run(store):
            return
        with self.mode() if self.mode is not None else nullcontext():
            for step in self.steps:
                step(store)

    def __len__(self) -> int:
        return len(self.steps)

    def __repr__(self) -> str:
        fused = len(self.code) - len(self.steps)
        note = f", {len(self.code)} assignments (runs fused)" if fused else ""
        return f"Routine({len(self.steps)} steps{note})\n{self.code!r}"


def compile_code(code: Code, array_type: type) -> Routine:
    """Compile ``code`` for arrays of ``array_type`` (a backend's array type)."""
    backend = backend_for(array_type)
    code = drop_dead_stores(drop_zero_contributions(fold_zero_init(code)))
    mode = backend.no_autograd()
    # staged as one compiled function, the library fuses, not fusion.py
    items: list[Assign | Run] = list(code) if backend.stages else fuse_repeats(code)
    steps = [_compile_assign(item, backend) if isinstance(item, Assign)
             else _fused_step(item, backend) for item in items]
    if backend.stages:
        return Routine(steps, code, mode, Staged(steps, code, backend), items)
    if backend.conv_gradients is not None:
        _pair_steps(items, steps, partial(_conv_pair_steps, backend=backend))
    if backend.matmul_bias is not None:
        reads = Counter(buf.key for assign in code for buf in buffers_of(assign.expr))
        _pair_steps(items, steps, partial(_bias_fold, backend=backend, reads=reads))
    return Routine(steps, code, mode, items=items)


def _pair_steps(items: list[Assign | Run], steps: list[Step], pairing: Pairing) -> None:
    """Replace the steps of each two adjacent assignments that ``pairing`` runs together."""
    for i in range(len(items) - 1):
        a, b = items[i], items[i + 1]
        if isinstance(a, Assign) and isinstance(b, Assign):
            pair = pairing(a, b, steps[i], steps[i + 1])
            if pair is not None:
                steps[i], steps[i + 1] = pair


def _skip(store: Store) -> None:
    """A step folded into the next one."""


def _bias_fold(a: Assign, b: Assign, step_a: Step, step_b: Step, backend: Backend,
               reads: Counter[tuple[int, str]]) -> tuple[Step, Step] | None:
    """``t =:+ w * x ~'@'`` then ``s =: t + b`` (``b`` along the last axis, or shaped as ``t``),
    nothing else reading ``t``, as one product with ``b`` added in its accumulation (torch's
    ``addmm``, as ``nn.Linear``): one pass and one array fewer.  ``x``'s trailing axes are
    contracted in ``w``'s order.  The product's step becomes :func:`_skip`; the sum's drops any
    older ``t`` and falls back to both steps for arrays the kernel does not take."""
    e, f = a.expr, b.expr
    if reads[a.lhs.key] != 1 or e.op != "mul" or a.accum != "+" or not a.init or \
            b.accum is not None or \
            f.op != "add" or b.logic != "." or len(e.args) != 2 or len(f.args) != 2 or \
            not all(isinstance(v, Buf) and v.field == "value" for v in (*e.args, *f.args)):
        return None
    t = a.lhs
    bias = [v for v in f.args if v.key != t.key]
    if len(bias) != 1:
        return None
    try:
        r, s_uses, t_uses, b_uses = (_iter_ids(u) for u in (
            a.proj.uses(t.tensor), b.proj.uses(b.lhs.tensor), b.proj.uses(t.tensor),
            b.proj.uses(bias[0].tensor)))
        operands = [_iter_ids(a.proj.uses(v.tensor)) for v in e.args]
    except (KeyError, ValueError):  # not part of the operation, an axis not an iterator
        return None
    if not r or s_uses != t_uses or b_uses not in (s_uses[-1:], s_uses):
        return None
    for xi in (0, 1):
        x_ids, w_ids = operands[xi], operands[1 - xi]
        k = x_ids[len(r) - 1:]  # contracted: x's trailing axes (attention's heads: two)
        if x_ids[:len(r) - 1] == r[:-1] and k and not set(k) & set(r) and \
                w_ids in ([r[-1], *k], [*k, r[-1]]):
            return _skip, _bias_step(b, [e.args[xi].key, e.args[1 - xi].key, bias[0].key],
                                     t.key, w_ids[0] == r[-1], step_a, step_b, backend)
    return None


def _iter_ids(uses: tuple[AxisUse, ...]) -> list[int]:
    """The iterator ids of ``uses``; ``ValueError`` when an axis is not a plain iterator."""
    ids = [u.index.id for u in uses if isinstance(u.index, Iter)]
    if len(ids) != len(uses):
        raise ValueError("an axis that is not a plain iterator")
    return ids


def _bias_step(b: Assign, keys: list[tuple[int, str]], product: tuple[int, str],
               transposed: bool, step_a: Step, step_b: Step, backend: Backend) -> Step:
    """``s = x @ w (.T) + bias`` by one call; the product's array is not made (an old dropped)."""
    fn = backend.matmul_bias
    assert fn is not None  # compile_code asked
    shape, key = tuple(b.lhs.tensor.shape.int_dims), b.lhs.key
    rows_of_x = math.prod(shape[:-1])

    def step(store: Store) -> None:
        arrays = store.arrays
        x, w, c = (arrays.get(k) for k in keys)
        if x is None or w is None or c is None or not x.dtype == w.dtype == c.dtype or \
                tuple(c.shape) not in (shape[-1:], shape):
            step_a(store)
            step_b(store)
            return
        rows = c if len(c.shape) == 1 else c.reshape(-1, shape[-1])
        w2 = w.reshape(shape[-1], -1).T if transposed else w.reshape(-1, shape[-1])
        arrays[key] = fn(x.reshape(rows_of_x, -1), w2, rows).reshape(shape)
        arrays.pop(product, None)

    return step


def _conv_pair_steps(a: Assign, b: Assign, step_a: Step, step_b: Step, backend: Backend
                     ) -> tuple[Step, Step] | None:
    """``x.grad =+ y.grad * w`` and ``w.grad =+ x * y.grad`` (any order) under one convolution's
    projections as one backend call (:func:`~tensig.execution.native.conv_pair`): the first step
    computes both and keeps the second's value for the next, which falls back to its own step
    when nothing is kept."""
    proj = a.proj
    if b.proj is not proj or len(proj.args) != 2 or a.lhs.key == b.lhs.key:
        return None
    x, w, y = (*proj.args, proj.result)
    reads = [Buf(y, "grad").key, Buf(x, "value").key, Buf(w, "value").key]
    g, xv, wv = reads
    wants = {Buf(x, "grad").key: {g, wv}, Buf(w, "grad").key: {g, xv}}
    for c in (a, b):
        e = c.expr
        if e.op != "mul" or c.accum != "+" or len(e.args) != 2 or \
                not all(isinstance(v, Buf) for v in e.args) or \
                {v.key for v in e.args} != wants.get(c.lhs.key):
            return None
    try:
        both = conv_pair(proj.inferred().layout, backend)
    except (KeyError, ValueError):
        return None
    if both is None:
        return None
    first = 0 if a.lhs.tensor is x else 1  # which gradient ``a`` writes
    kept: list[Any] = []

    def run_a(store: Store) -> None:
        arrays = [store.arrays.get(k) for k in reads]
        if any(v is None for v in arrays) or not backend.conv_accepts(arrays[1], arrays[2]):
            kept.clear()
            step_a(store)
            return
        grads = both(*arrays)
        _put(store, a, grads[first])
        kept[:] = [grads[1 - first]]

    def run_b(store: Store) -> None:
        if not kept:
            step_b(store)
            return
        _put(store, b, kept.pop())

    return run_a, run_b


def _put(store: Store, a: Assign, v: Any) -> None:
    """Store ``v`` as ``a``'s left-hand side, or add it (a non-initialising accumulation)."""
    add = a.accum is not None and not a.init and store.has(a.lhs)
    store.write(a.lhs, store.read(a.lhs) + v if add else v)


def _fused_step(run: Run, backend: Backend) -> Step:
    """One step for a run of repeated pointwise blocks (see :mod:`tensig.model.fusion`)."""
    singles: list[Step] = []

    def one_by_one(store: Store) -> None:
        if not singles:  # compiled when first needed: most runs never fall back
            singles.extend(_compile_assign(a, backend) for a in run.assigns)
        for step in singles:
            step(store)

    return FusedBlocks(run, backend, one_by_one)


def drop_dead_stores(code: Code) -> Code:
    """Drop an assignment whose buffer is overwritten whole (pointwise ``=:`` or an initialising
    accumulation) before anything reads it: ``g =: 0`` then the loss seed ``g =: 1``."""
    items = list(code)
    # walking backwards (linear, not quadratic): what the next assignment does to each buffer
    following: dict[tuple[int, str], str] = {}
    dead = set()
    for i, a in reversed(list(enumerate(items))):
        if following.get(a.lhs.key) == "overwrite":
            dead.add(i)
        overwrite = a.logic == "." and (a.accum is None or a.init)
        following[a.lhs.key] = "overwrite" if overwrite else "read"
        for b in buffers_of(a.expr):  # a read comes first, whatever the assignment writes
            following[b.key] = "read"
    return Code([a for i, a in enumerate(items) if i not in dead])


def drop_zero_contributions(code: Code) -> Code:
    """Drop ``g =+ v`` (or ``=-``) when ``v`` reads only buffers last set to 0 through
    zero-preserving operations (``where``, the gates, ``id``, negation, sums): a softmax's
    detached maximum's gradient, zeroed then gated back, is a full pass for nothing.  Products
    keep their assignments (0 * inf is NaN)."""
    zero: set[tuple[int, str]] = set()
    out = []
    for a in code:
        key = a.lhs.key
        if a.accum in ("+", "-") and not a.init and _always_zero(a.expr, zero):
            continue
        zero.discard(key)
        if _is_zero_fill(a):
            zero.add(key)
        out.append(a)
    return Code(out)


def _is_zero_fill(a: Assign) -> bool:
    """``g =: 0`` pointwise: every cell of ``g`` set to zero."""
    return a.accum is None and a.logic == "." and a.expr.op == "id" and a.expr.args == (0.0,)


def _always_zero(e: Any, zero: set[tuple[int, str]]) -> bool:
    if isinstance(e, Buf):
        return e.key in zero
    if not isinstance(e, Expr):
        return isinstance(e, int | float) and e == 0
    if e.op in ("id", "neg", "add", "sub"):
        return all(_always_zero(x, zero) for x in e.args)
    if e.op in ("where", "relu_gate", "sat01_gate"):  # whatever the condition, the gate's input
        return all(_always_zero(x, zero) for x in e.args[1:])
    return False


def fold_zero_init(code: Code) -> Code:
    """``g =: 0`` then (before any read of ``g``) ``g =+ v`` is ``g =:+ v``: one pass, not two."""
    zeroed: dict[tuple[int, str], int] = {}  # buffer -> index of its zeroing assignment
    drop: set[int] = set()
    out: list[Assign] = []
    for a in code:
        for b in buffers_of(a.expr):
            zeroed.pop(b.key, None)  # read while zero: the zeroing must stay
        key = a.lhs.key
        if key in zeroed and a.accum in ("+", "-") and not a.init:
            drop.add(zeroed.pop(key))
            a = replace(a, init=True)
        elif _is_zero_fill(a):
            zeroed[key] = len(out)
        else:
            zeroed.pop(key, None)
        out.append(a)
    return Code([a for i, a in enumerate(out) if i not in drop])


def _labels(uses: tuple[AxisUse, ...]) -> Labels | None:
    """One label per axis (an iterator's name, or a fixed index); ``None`` for a window."""
    out: list[str | int] = []
    for u in uses:
        ix = u.index
        if isinstance(ix, Iter):
            out.append(f"e{ix.id}")
        elif isinstance(ix, FixedIndex):
            out.append(ix.index)
        else:
            return None
    return tuple(out)


def _compile_assign(a: Assign, backend: Backend) -> Step:
    """The step of ``a``; of integer data, one that refuses a value the library's promotion made
    a float (NumPy: uint64 ids beside int64 ids), as integers never become floats silently."""
    step = _assign_step(a, backend)
    if not getattr(a.lhs.tensor, "integer", False) or a.lhs.field != "value":
        return step
    key = a.lhs.key

    def integer(store: Store) -> None:
        step(store)
        dtype = store.arrays[key].dtype
        if not is_integer(dtype):
            raise TypeError(f"{a!r}: integer arithmetic gave {dtype}: no integer dtype holds "
                            "all of its operands (NumPy's uint64 with a negative number or "
                            "int64, say); cast the ids to one dtype that holds them (int64)")

    return integer


def _assign_step(a: Assign, backend: Backend) -> Step:
    if a.expr.op in WHOLE:
        return _whole_step(a, backend.xp)
    if any(op in WHOLE for op in ops_of(a.expr)):
        raise ShapeError(f"{a!r}: a whole-array primitive ({', '.join(sorted(WHOLE))}) is an "
                         "assignment's whole right-hand side, not part of an expression")
    bufs = buffers_of(a.expr)
    try:  # the axis uses of the left-hand side and of each buffer
        lhs_labels = _labels(a.proj.uses(a.lhs.tensor))
        arg_uses = [a.proj.uses(b.tensor) for b in bufs]
    except KeyError as e:
        raise ShapeError(f"{a!r}: a buffer is not part of the operation {a.logic!r}") from e
    arg_labels = [lb for u in arg_uses if (lb := _labels(u)) is not None]
    if lhs_labels is None or len(arg_labels) != len(arg_uses):
        windowed = _lowered_step(a, backend)
        if windowed is None:
            raise ShapeError(
                f"{a!r}: its spec has affine or concatenated axes, which run only as an "
                "operation's forward code (einsum, einsum1, outer_sum, tropical, einmax1, "
                "concat, initialising), or under the operation's projections as gradient code "
                "accumulating with + (or storing)")
        return windowed
    return assignment_step(a, bufs, lhs_labels, arg_labels, backend)


#: (combine, accumulation) of an assignment -> the einsum-family operator it is
_FAMILY: dict[tuple[str, str | None], Operator] = {(o.combine, o.accum): o
                                                   for o in OPERATORS.values()}


def _lowered_step(a: Assign, backend: Backend) -> Step | None:
    """An assignment with windows or concatenations, lowered as one operation under its
    projections (:func:`~tensig.execution.assignment.lower_assignment`): an einsum-family
    expression of buffers with its operator (forward code, a concatenation's or convolution's
    gradients), any other (the max-pooling gate) as a :class:`Pointwise` expression summed over
    the product space.  ``None`` for what neither takes (a window written by a max, ...).

    The pooling gate ``where(first_max(x + w, y), g, 0)`` reads a window ``w`` of zeros: when
    every such small buffer holds zeros (checked per call) the expression without them runs,
    by the backend's own pooling backward where it has one, which reuses what the pooling's
    kernel (:func:`~tensig.execution.native.pool_kernel`) left in ``store.saved``."""
    e = a.expr
    family = _FAMILY.get((e.op, a.accum))
    pool = native = None
    if family is not None and all(isinstance(x, Buf) for x in e.args) and \
            (a.accum != "max" or a.init):
        op: Operator | Pointwise = family
        args = list(e.args)
        if (e.op, a.accum) == ("add", "max") and len(args) == 2:
            pool = pool_kernel(tuple(a.proj.uses(t) for t in (*(b.tensor for b in args),
                                                                a.lhs.tensor)), backend)
    elif a.accum in ("+", None) and buffers_of(e):
        op, args = _pointwise(a, e, backend)
    else:
        return None
    keys = [b.key for b in args]
    small = {k for k, b in zip(keys, args, strict=True) if b.tensor.shape.numel() <= 64}
    dropped = _drop_added(e, small) if isinstance(op, Pointwise) else e
    try:
        run = _lowered(a, args, op, backend)
        fast = None
        if dropped != e:
            fewer, kept = _pointwise(a, dropped, backend)
            picks = [keys.index(b.key) for b in kept]
            zero = [i for i, k in enumerate(keys) if k in small and i not in picks]
            fast = _lowered(a, kept, fewer, backend)
            native = _pool_backward(a, dropped, kept, [args[i] for i in zero], backend)
    except ValueError:  # a window written with a max, a fixed index beside a window
        return None
    saved_at = _pooled(a.lhs.tensor)

    def step(store: Store) -> None:
        try:
            arrays = [store.arrays[k] for k in keys]
        except KeyError:
            arrays = [store.read(x) for x in args]  # the message
        out = None if pool is None else pool(arrays)
        if out is not None:
            v, store.saved[saved_at] = out
        elif fast is not None and all(all_zero(arrays[i]) for i in zero):
            some = [arrays[i] for i in picks]
            v = None if native is None else native(some, store)
            if v is None:
                v = fast(some)
        else:
            v = run(arrays)
        _put(store, a, v)

    return step


def _pooled(result: Any) -> tuple[int, str]:
    """Where in ``store.saved`` a kernel's max pooling of ``result`` leaves its maxima's places."""
    return (result.id, "pooled")


def _pool_backward(a: Assign, e: Any, kept: list[Buf], windows: list[Buf], backend: Backend
                   ) -> Callable[[Sequence[Any], Store], Any | None] | None:
    """The max-pooling gate ``e`` = ``where(first_max(x, y), y.grad, 0)`` (the zero window
    dropped) as the backend's pooling backward, ``(kept's arrays, store) -> gradient or None``;
    ``None`` when ``e`` is no such gate."""
    if e.op != "where" or e.args[2] != 0 or len(windows) != 1 or \
            not isinstance(cond := e.args[0], Expr) or cond.op != "first_max":
        return None
    (x, y), g = cond.args, e.args[1]
    if not all(isinstance(b, Buf) for b in (x, y, g)) or x.field != "value" or \
            x.tensor is not a.lhs.tensor or g.field != "grad" or g.tensor is not y.tensor:
        return None
    grad = pool_gradient(tuple(a.proj.uses(t) for t in (x.tensor, windows[0].tensor,
                                                          y.tensor)), backend)
    if grad is None:
        return None
    gi, xi, saved_at = kept.index(g), kept.index(x), _pooled(y.tensor)
    return lambda arrays, store: grad(arrays[gi], arrays[xi], store.saved.get(saved_at))


def _pointwise(a: Assign, e: Expr, backend: Backend) -> tuple[Pointwise, list[Buf]]:
    """``e`` as a :class:`Pointwise` operator of its buffers (and those buffers): windows read
    the operation's neutral element (-inf under a max); a ``first_max`` gate's NaN, which equals
    no maximum, so padding gets no gradient (as torch's max pooling does)."""
    bufs = buffers_of(e)
    name = getattr(getattr(a.proj.result, "op", None), "op", None)  # a graph tensor's OpDef
    family = OPERATORS.get(name) if isinstance(name, str) else None
    evaluate = expression_function(e, {b.key: i for i, b in enumerate(bufs)}, backend)
    gate = "first_max" in ops_of(e)
    pad = family.neutral if family is not None else 0.0
    return Pointwise(evaluate, math.nan if gate and pad == -math.inf else pad, not gate), bufs


def _drop_added(e: Any, keys: set[tuple[int, str]]) -> Any:
    """``e`` with every ``add(x, w)`` (either order), ``w`` among ``keys``, replaced by ``x``: the
    expression for those buffers holding zeros (a zero's sign may differ: ``-0.0 + 0.0``)."""
    if not isinstance(e, Expr):
        return e
    args = tuple(_drop_added(x, keys) for x in e.args)
    if e.op == "add" and len(args) == 2:
        for w, x in (args, args[::-1]):
            if isinstance(w, Buf) and w.key in keys and buffers_of(x):
                return x
    return Expr(e.op, args) if args != e.args else e


def _lowered(a: Assign, args: list[Buf], op: Operator | Pointwise, backend: Backend
             ) -> Callable[[Any], Any]:
    """``arrays -> value`` of the assignment's projections read as one operation from ``args``
    to its left-hand side: a gradient lowered under the forward's own iterators and phases of
    concatenation."""
    proj, operands = a.proj, [x.tensor for x in args]
    anchor = next((i for i, t in enumerate(operands) if t is proj.result), None)
    uses = proj.uses(a.lhs.tensor)
    inferred = replace(proj.inferred(), layout=(*(proj.uses(t) for t in operands), uses),
                       operands=tuple(t.shape for t in operands),
                       shape=Shape(output=tuple(int(u.size) for u in uses)))
    return lower_assignment(inferred, op, backend, anchor).run


def _whole_step(a: Assign, xp: Any) -> Step:
    """A primitive on whole arrays (:data:`tensig.execution.ir.WHOLE`: gathers, one-hot, dropout
    masks), stored or added.  A :data:`~tensig.execution.ir.RECORDS` primitive's tuple is kept
    whole; ``part`` stores one item by a step of its own, without the generic reads and
    ``_put`` (0.5 us against 1.8; a batch norm stores eight parts a step)."""
    if a.accum not in (None, "+"):
        raise ShapeError(f"{a!r}: {a.expr.op} stores (=:) or adds (=+), nothing else")
    fn, args, key = WHOLE[a.expr.op], a.expr.args, a.lhs.key
    shape = tuple(a.lhs.tensor.shape.int_dims)

    def mismatch(v: Any) -> ShapeError:
        return ShapeError(f"{a!r}: {a.expr.op} gave shape {tuple(v.shape)}, the left-hand "
                          f"side has {shape}")

    if a.expr.op == "part" and (a.accum is None or a.init) and isinstance(args[0], Buf):
        whole, src, i = args[0], args[0].key, args[1]

        def part(store: Store) -> None:
            arrays = store.arrays
            v = (arrays[src] if src in arrays else store.read(whole))[i]  # the message
            if v.shape != shape:
                raise mismatch(v)
            arrays[key] = v

        return part
    record = a.expr.op in RECORDS
    if record and a.accum == "+" and not a.init:
        raise ShapeError(f"{a!r}: {a.expr.op} gives a record, which is stored (=:), never added")
    outs = {mode: Out(shape, mode) for mode in (True, False)}
    # operands read by key, numbers as they are: the step runs every training step
    reads = [(x.key, None) if isinstance(x, Buf) else (None, x) for x in args]

    def step(store: Store) -> None:
        arrays = store.arrays
        try:
            operands = [v if k is None else arrays[k] for k, v in reads]
        except KeyError:
            operands = [store.read(x) if isinstance(x, Buf) else x for x in args]  # the message
        v = fn(xp, outs[store.training], *operands)
        if record:  # each item stored by a ``part``
            arrays[key] = v
            return
        if tuple(v.shape) != shape:
            raise mismatch(v)
        _put(store, a, v)

    return step

