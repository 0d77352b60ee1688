"""Compiling assignment code into straight-line backend calls.

:func:`compile_code` turns a :class:`~tensig.model.ir.Code` into a :class:`Routine`: for each
assignment the projections are made concrete once (:mod:`tensig.projections`) and the
assignment becomes one generated function of array calls (:mod:`tensig.codegen`); one whose
spec has convolution windows or concatenations runs by :mod:`tensig.windowed`, and repeated
pointwise blocks run once over their concatenation (:mod:`tensig.fusion`).  The passes here
drop dead stores and zero contributions and fold zero initialisations first.  Running a
routine does no shape work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tensig.backends import Backend, backend_for
from tensig.core.errors import ShapeError
from tensig.model.codegen import assignment_step, expression_function
from tensig.model.fusion import FusedBlocks, Run, fuse_repeats
from tensig.model.ir import WHOLE, Assign, Buf, Code, Expr, Out, buffers_of
from tensig.model.projections import Labels, OpProjection, WindowedAxes, project
from tensig.model.windowed import windowed_step

__all__ = ["OpProjection", "Routine", "Store", "compile_code"]


class Store:
    """The arrays of a graph: each tensor's value and gradient, by tensor id; ``device``
    (torch only, None for NumPy) is where arrays made from numbers alone go."""

    def __init__(self, device: Any = None) -> None:
        self.arrays: dict[tuple[int, str], Any] = {}
        self.device = device
        #: training mode (dropout draws its masks); :meth:`tensig.graph.Graph.eval` clears it
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


class Routine:
    """A compiled sequence of assignments: ``run(store)`` only calls array functions.

    On torch the steps run under ``torch.inference_mode()``: tensig differentiates by its own
    backward code, so torch's autograd bookkeeping is pure overhead (6-14% of a training
    step).  The arrays a routine makes are then inference tensors; ``.clone()`` one before
    handing it to ``torch.autograd``.
    """

    def __init__(self, steps: list[Callable[[Store], None]], code: Code,
                 mode: Callable[[], Any] | None = None):
        self.steps, self.code, self.mode = steps, code, mode

    def run(self, store: Store) -> None:
        if self.mode is None:
            for step in self.steps:
                step(store)
            return
        with self.mode():
            for step in self.steps:
                step(store)

    def __len__(self) -> int:
        return len(self.steps)

    def __repr__(self) -> str:
        fused = len(self.code) - len(self.steps)
        note = f", {len(self.code)} assignments (runs fused)" if fused else ""
        return f"Routine({len(self.steps)} steps{note})\n{self.code!r}"


def compile_code(code: Code, array_type: type) -> Routine:
    """Compile ``code`` for arrays of ``array_type`` (any type eager ops take: numpy.ndarray,
    torch.Tensor, jax.Array, dask.array.Array)."""
    backend = backend_for(array_type)
    xp = backend.namespace
    code = drop_dead_stores(drop_zero_contributions(fold_zero_init(code)))
    mode = backend.routine_mode()
    steps = []
    for item in fuse_repeats(code):
        if isinstance(item, Assign):
            steps.append(_compile_assign(item, backend, xp))
        else:
            steps.append(_fused_step(item, backend, xp))
    return Routine(steps, code, mode)


def _fused_step(run: Run, backend: Backend, xp: Any) -> Callable[[Store], None]:
    """One step for a run of repeated pointwise blocks (see :mod:`tensig.fusion`)."""
    singles: list[Callable[[Store], None]] = []

    def one_by_one(store: Store) -> None:
        if not singles:  # compiled when first needed: most runs never fall back
            singles.extend(_compile_assign(a, backend, xp) for a in run.assigns)
        for step in singles:
            step(store)

    return FusedBlocks(run, lambda e, slots: expression_function(e, slots, backend, xp),
                       backend, xp, one_by_one)


def drop_dead_stores(code: Code) -> Code:
    """Drop an assignment whose buffer is overwritten whole before anything reads it.

    ``g =: 0`` followed by ``g =: 1`` (the loss seed after zeroing every gradient) costs an
    array fill for nothing.  Only pointwise overwrites count (``=:`` or an initialising
    accumulation under ``"."``): they cover every cell.  The routine's final state is unchanged.
    """
    items = list(code)
    reads = [{b.key for b in buffers_of(a.expr)} for a in items]
    # walking backwards: for each buffer, what the next assignment touching it does to it
    # (linear; a forward scan per assignment was quadratic, most of the 1.45 s a 100-layer
    # MLP's trainer took to build)
    following: dict[tuple[int, str], str] = {}
    dead = set()
    for i in range(len(items) - 1, -1, -1):
        a = items[i]
        if following.get(a.lhs.key) == "overwrite":
            dead.add(i)
        overwrite = a.logic == "." and (a.accum is None or a.init)
        following[a.lhs.key] = "overwrite" if overwrite else "read"
        for key in reads[i]:  # a read comes first, whatever the assignment writes
            following[key] = "read"
    return Code([a for i, a in enumerate(items) if i not in dead])


def drop_zero_contributions(code: Code) -> Code:
    """Drop ``g =+ v`` (or ``=-``) when ``v`` is zero whatever the data: ``v`` reads only
    buffers last set to 0 through operations that keep a zero a zero (``where``, the gates,
    ``id``, negation, sums of zeros).

    A gradient that nothing ever accumulates into (the row maximum in a softmax sits behind
    ``stop_gradient``) is zeroed and then gated back into its operand's gradient: a full
    pass over the data for nothing.  Products are not zero-preserving (0 * inf is NaN), so
    they keep their assignments.
    """
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
    args = e.args
    if e.op in ("id", "neg"):
        return _always_zero(args[0], zero)
    if e.op == "where":
        return _always_zero(args[1], zero) and _always_zero(args[2], zero)
    if e.op in ("relu_gate", "sat01_gate"):
        return _always_zero(args[1], zero)
    if e.op in ("add", "sub"):
        return all(_always_zero(x, zero) for x in args)
    return False


def fold_zero_init(code: Code) -> Code:
    """``g =: 0`` followed (before any read of ``g``) by ``g =+ v`` is ``g =:+ v`` (and
    ``g =- v`` is ``g =:- v``).

    Zeroing every gradient and then adding the first contribution costs two passes; the
    first contribution can initialise instead.  Semantics are unchanged.
    """
    items = list(code)
    zeroed: dict[tuple[int, str], int] = {}  # buffer -> index of its zeroing assignment
    drop: set[int] = set()
    out: list[Assign] = []
    for a in items:
        reads = {b.key for b in buffers_of(a.expr)}
        for k in reads:
            zeroed.pop(k, None)  # read while zero: the zeroing must stay
        key = a.lhs.key
        if _is_zero_fill(a):
            zeroed[key] = len(out)
            out.append(a)
            continue
        if key in zeroed and a.accum in ("+", "-") and not a.init and key not in reads:
            drop.add(zeroed.pop(key))
            a = replace(a, init=True)
        else:
            zeroed.pop(key, None)
        out.append(a)
    return Code([a for i, a in enumerate(out) if i not in drop])


def _labels_for(a: Assign, bufs: list[Buf]) -> tuple[Labels, list[Labels]]:
    if isinstance(a.logic, OpProjection):
        table = a.logic.labels()
        try:
            return table[a.lhs.tensor.id], [table[b.tensor.id] for b in bufs]
        except KeyError as e:
            raise ShapeError(f"{a!r}: a buffer is not part of {a.logic!r}") from e
    return project(a.logic, a.lhs.tensor.shape, [b.tensor.shape for b in bufs])


def _compile_assign(a: Assign, backend: Backend, xp: Any) -> Callable[[Store], None]:
    if a.expr.op in WHOLE:
        return _whole_step(a, xp)
    if any(op in WHOLE for op in _ops(a.expr)):
        raise ShapeError(f"{a!r}: a whole-array primitive ({', '.join(sorted(WHOLE))}) is an "
                         "assignment's whole right-hand side, not part of an expression")
    bufs = buffers_of(a.expr)
    alias = _alias_assign(a)
    if alias is not None:
        return alias
    try:
        lhs_labels, arg_labels = _labels_for(a, bufs)
    except WindowedAxes as e:
        windowed = windowed_step(a, backend, xp)
        if windowed is None:
            raise ShapeError(
                f"{a!r}: its spec has affine or concatenated axes, which run only as an "
                "operation's forward code (einsum, einsum1, outer_sum, tropical, einmax1, "
                "concat, initialising), or under the operation's projections as gradient code "
                "accumulating with + (or storing)") from e
        return windowed
    return assignment_step(a, bufs, lhs_labels, arg_labels, backend, xp)


def _ops(e: Any) -> set[str]:
    """The primitives an expression applies."""
    if not isinstance(e, Expr):
        return set()
    return {e.op}.union(*(_ops(x) for x in e.args))


def _whole_step(a: Assign, xp: Any) -> Callable[[Store], None]:
    """A primitive on whole arrays (:data:`tensig.model.ir.WHOLE`: gathers, scatter-adds, one-hot,
    dropout masks): its value, stored (``=:``, initialising ``=:+``) or added (``=+``)."""
    if a.accum not in (None, "+"):
        raise ShapeError(f"{a!r}: {a.expr.op} stores (=:) or adds (=+), nothing else")
    fn, args, key = WHOLE[a.expr.op], a.expr.args, a.lhs.key
    shape = tuple(a.lhs.tensor.shape.int_dims)
    adds = a.accum == "+" and not a.init
    outs = {mode: Out(shape, mode) for mode in (True, False)}

    def step(store: Store) -> None:
        v = fn(xp, outs[store.training], *(store.read(x) if isinstance(x, Buf) else x
                                          for x in args))
        if tuple(v.shape) != shape:
            raise ShapeError(f"{a!r}: {a.expr.op} gave shape {tuple(v.shape)}, the left-hand "
                             f"side has {shape}")
        old = store.arrays.get(key) if adds else None
        store.arrays[key] = v if old is None else old + v

    return step


def _alias_assign(a: Assign) -> Callable[[Store], None] | None:
    """``y =: id(x)`` pointwise between equal shapes stores ``x``'s array as ``y``'s: no copy.

    Safe because compiled steps never write into an array they did not just create.
    """
    e = a.expr
    if a.accum is not None or a.logic != "." or e.op != "id" or not isinstance(e.args[0], Buf) \
            or tuple(e.args[0].tensor.shape.dims) != tuple(a.lhs.tensor.shape.dims):
        return None
    src, dst = e.args[0], a.lhs.key

    def step(store: Store) -> None:
        store.arrays[dst] = store.read(src)

    return step
