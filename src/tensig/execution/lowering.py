"""Lowering: solved projections (:attr:`tensig.Inferred.layout`) to backend calls.

A :class:`Plan` is built once per (operation, spec, shapes, options, backend): a short list
of vectorised backend calls, no Python loop over elements:

1. **operand views** (:mod:`tensig.execution.views`): slices, and windows for affine axes;
2. **the core**: one contraction for the add-reducing operations, ``amax`` for the
   max-reducing ones, and for the add-combining ones (``outer_sum``, ``tropical``) a reduction
   of each operand before they meet, so the product space is materialised only over the axes
   both share -- or the backend's own convolution or pooling (:mod:`tensig.execution.native`);
3. **placement**: result-only labels broadcast, repeated ones written on the diagonal, fixed
   indices and concatenation components padded into place with the neutral element.

A merged axis (``(h, e)``) is a reshape around all of this (:func:`split_merges`).
Concatenation is a sum type: each *phase* picks one component of every concatenated axis; a
tensor takes part in the phases whose components it uses.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import string
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from tensig.backends import Backend, is_integer, neutral_max
from tensig.backends._plans import moves
from tensig.core.errors import ShapeError
from tensig.core.inference import (
    AffineIndex,
    AxisUse,
    ConcatIndex,
    FixedIndex,
    Inferred,
    Iter,
    MergeIndex,
)
from tensig.core.shapes import Shape
from tensig.execution.ir import Operator
from tensig.execution.native import conv_step, pool_step
from tensig.execution.views import Key, active_part, components, fill, operand_view

__all__ = ["Letters", "Plan", "Pointwise", "Split", "build_plan", "spec_text", "split_merges"]


@dataclass
class Plan:
    """A compiled operation: ``run(arrays)`` does only backend calls."""

    run: Callable[[Sequence[Any]], Any]
    shape: Shape
    inferred: Inferred
    #: ``direct(*arrays)``: the whole operation as one backend call, when it is one
    direct: Callable[..., Any] | None = None

    def __post_init__(self) -> None:
        #: whether the result has batch or input axes (then it is returned as a RowArray)
        self.has_rows = bool(self.shape.batch or self.shape.input)


@dataclass(frozen=True)
class Pointwise:
    """Any expression of the operands as what an operation combines them by (a max-pooling
    gradient's gate): ``evaluate`` (``views -> value``) runs on the operands' views lined up with
    the product space, and the value is summed over the reduced axes.  ``pad``: what a window reads
    beyond its operand's edge (NaN for a ``first_max`` gate: a padded cell never equals the
    maximum).  ``result_first``: the product space's axes are the result's, then the reduced
    ones (not under ``first_max``, which ranks a block's cells in the operands' order)."""

    evaluate: Callable[[list[Any]], Any]
    pad: float = 0.0
    result_first: bool = True
    name: ClassVar[str] = "an expression"
    combine: ClassVar[str] = "expression"
    accum: ClassVar[str] = "+"
    neutral: ClassVar[float] = 0.0


# -- phases of concatenation -------------------------------------------------------------------
def _iters_of(ix: Any) -> list[Iter]:
    """The iterators a non-concatenated index reads."""
    if isinstance(ix, Iter):
        return [ix]
    if isinstance(ix, AffineIndex):
        return [ix.over] + ([ix.kernel] if ix.kernel is not None else [])
    return []


def _reduces_nothing(layout: tuple[tuple[AxisUse, ...], ...], members: list[int]) -> bool:
    """Whether a phase reduces over an axis of no cells: its product space is empty, so it
    gives the neutral element (computed, an operand's inf or NaN met another's sum over that
    axis, 0 or -inf, and made NaN)."""
    kept = {it.id for u in layout[-1] for it in _iters_of(u.index) + _parts(u.index)}
    return any(int(it.size) == 0 and it.id not in kept
               for t in members for u in layout[t] for it in _iters_of(u.index))


def _neutral(step: Callable[..., Any], op: Operator | Pointwise, backend: Backend
             ) -> Callable[..., Any]:
    """``step``'s result (its dtype, shape and device) filled with the neutral element."""
    def run(arrays: Sequence[Any]) -> Any:
        out = step(arrays)
        return backend.full(tuple(out.shape), fill(op.neutral, out), out)

    return run


def _parts(ix: Any) -> list[Iter]:
    return [p for p in ix.parts if isinstance(p, Iter)] if isinstance(
        ix, ConcatIndex | MergeIndex) else []


def collapse_concats(inferred: Inferred) -> Inferred:
    """Concatenations that are one axis in disguise, made one iterator: when every use of
    ``a`` and ``b`` is the same ``a^b``, nothing tells the parts apart.  Otherwise each such
    axis doubles the phases (11 axes: 29 s of planning)."""
    seq_of: dict[int, tuple[int, ...]] = {}
    size_of: dict[tuple[int, ...], int] = {}  # a concatenation's ids -> the axis's size
    mixed: set[int] = set()
    for uses in inferred.layout:
        for u in uses:
            ix = u.index
            if not isinstance(ix, ConcatIndex):
                mixed.update(it.id for it in _iters_of(ix))
                continue
            ids = tuple(p.id if isinstance(p, Iter) else -1 for p in ix.parts)
            if -1 in ids or len(set(ids)) != len(ids):  # a skipped range, or a label twice
                mixed.update(i for i in ids if i != -1)
                continue
            size_of[ids] = int(u.size)
            for i in ids:
                if seq_of.setdefault(i, ids) != ids:
                    mixed.add(i)
    fresh = max((it.id for it in inferred.iterators), default=-1) + 1
    merged: dict[tuple[int, ...], Iter] = {}
    for ids in dict.fromkeys(seq_of.values()):
        if not any(i in mixed for i in ids):
            merged[ids] = Iter(fresh + len(merged), None, size_of[ids])
    if not merged:
        return inferred

    def new_use(u: AxisUse) -> AxisUse:
        ix = u.index
        if isinstance(ix, ConcatIndex):
            it = merged.get(tuple(p.id if isinstance(p, Iter) else -1 for p in ix.parts))
            if it is not None:
                return dataclasses.replace(u, index=it)
        return u

    layout = tuple(tuple(new_use(u) for u in uses) for uses in inferred.layout)
    return dataclasses.replace(inferred, layout=layout,
                               iterators=inferred.iterators + tuple(merged.values()))


def _phases(layout: tuple[tuple[AxisUse, ...], ...], anchor: int | None = None
            ) -> list[tuple[dict[tuple[int, int], int], list[int]]]:
    """Consistent choices of one active component per concatenated axis in which the result,
    operand ``anchor`` if given and some operand take part, each with the operands that do,
    by a depth-first search pruning dead partial choices."""
    axes = [(t, p) for t, uses in enumerate(layout) for p, u in enumerate(uses)
            if isinstance(u.index, ConcatIndex)]
    comps = {ax: components(layout[ax[0]], *ax) for ax in axes}
    reads = [{it.id for u in uses for it in _iters_of(u.index)} for uses in layout]
    result, operands = reads[-1], reads[:-1]
    phases: list[tuple[dict[tuple[int, int], int], list[int]]] = []
    chosen: dict[tuple[int, int], int] = {}
    state: dict[Key, bool] = {}  # label -> active

    def members() -> list[int]:
        off = {k for k, on in state.items() if not on}
        out = [] if result & off else [t for t, r in enumerate(operands) if not r & off]
        return out if anchor is None or anchor in out else []

    def visit(i: int) -> None:
        if i == len(axes):
            phases.append((dict(chosen), members()))
            return
        ax = axes[i]
        labels = [k for k, _ in comps[ax] if isinstance(k, int)]
        for j, (key, _) in enumerate(comps[ax]):
            want = {k: k == key for k in labels}
            if any(state.get(k, on) != on for k, on in want.items()):
                continue
            new = [k for k in want if k not in state]
            state.update((k, want[k]) for k in new)
            if members():
                chosen[ax] = j
                visit(i + 1)
                del chosen[ax]
            for k in new:
                del state[k]

    visit(0)
    return phases


# -- building a plan ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Split:
    """An answer with its merged axes split: ``shapes`` per operand and then the result (``None``
    without merged axes), ``merged`` the result's own shape."""

    inferred: Inferred
    shapes: tuple[tuple[int, ...] | None, ...]
    merged: tuple[int, ...]


def split_merges(inferred: Inferred) -> Split | None:
    """The answer with every merged axis split into its factors, or ``None`` when it has none:
    a row-major reshape, so operands become views and the result is reshaped back."""
    def merged(uses: tuple[AxisUse, ...]) -> bool:
        return any(isinstance(u.index, MergeIndex) for u in uses)

    def factors(u: AxisUse) -> list[AxisUse]:
        ix = u.index
        return [dataclasses.replace(u, size=it.size, basis=None, index=it)
                for it in ix.parts] if isinstance(ix, MergeIndex) else [u]

    if not any(merged(uses) for uses in inferred.layout):
        return None
    layout = tuple(tuple(v for u in uses for v in factors(u)) for uses in inferred.layout)
    shapes = [tuple(int(u.size) for u in uses) for uses in layout]
    return Split(dataclasses.replace(inferred, layout=layout, shape=Shape(output=shapes[-1])),
                 tuple(s if merged(uses) else None
                       for uses, s in zip(inferred.layout, shapes, strict=True)),
                 tuple(int(u.size) for u in inferred.layout[-1]))


def build_plan(inferred: Inferred, op: Operator | Pointwise, backend: Backend,
               anchor: int | None = None) -> Plan:
    """Compile ``inferred`` (merged axes split) for ``backend``; the entry point is
    :func:`~tensig.execution.assignment.lower_assignment`.  ``anchor``: the operand that is
    the operation's own result when another tensor is written (a gradient, ``x.grad =+
    concat(t.grad, y)``): only the phases it takes part in run."""
    answer, inferred = inferred, collapse_concats(inferred)
    layout = inferred.layout
    steps = []
    native = {("mul", "+"): conv_step, ("add", "max"): pool_step}.get((op.combine, op.accum))
    for phase, members in _phases(layout, anchor):
        if isinstance(op, Pointwise) and len(members) != len(layout) - 1:
            raise ShapeError("an expression of the operands (not an einsum-family operator) "
                             "reads each of them in every cell, and a concatenation leaves "
                             "some out of some parts of the result", spec=spec_text(inferred),
                             hint="write the concatenation as an operation of its own")
        try:
            step = _phase_step(inferred, op, backend, phase, members)
        except ShapeError as e:  # Letters' limit: it knows no spec
            raise dataclasses.replace(e, spec=e.spec or spec_text(inferred)) from None
        if native is not None and not phase and len(members) == 2:
            step = native(layout, backend, step) or step
        steps.append(_neutral(step, op, backend) if _reduces_nothing(layout, members) else step)
    full_shape = tuple(int(u.size) for u in layout[-1])
    meet = operator.add if op.accum == "+" else backend.maximum

    def run(arrays: Sequence[Any]) -> Any:
        if not steps:  # no phase writes the result: all of it is the neutral element
            return backend.full(full_shape, fill(op.neutral, arrays[0]), arrays[0])
        return functools.reduce(meet, (step(arrays) for step in steps))

    direct = getattr(steps[0], "direct", None) if len(steps) == 1 else None
    if direct is not None:  # a bare contraction: one backend call, nothing around it
        def run(arrays: Sequence[Any]) -> Any:
            return direct(*arrays)
    elif len(steps) == 1:
        run = steps[0]
    return Plan(run, inferred.shape, answer, direct)


def spec_text(inferred: Inferred) -> str:
    """What a lowering error names as the spec: its text, or the logic (``compose``, ...)."""
    return inferred.spec.text if inferred.spec is not None else inferred.logic


class Letters(dict[Hashable, str]):
    """Einsum letters for keys, in order of first use: the one source of einsum subscripts,
    with the 52-letter limit as a clear error naming ``spec``."""

    def __init__(self, spec: str | None = None) -> None:
        super().__init__()
        self.spec = spec

    def __missing__(self, key: Hashable) -> str:
        if len(self) >= len(string.ascii_letters):
            raise ShapeError("an operation with more than 52 distinct axes cannot be lowered "
                             "to an einsum call", spec=self.spec)
        self[key] = letter = string.ascii_letters[len(self)]
        return letter


def _phase_step(inferred: Inferred, op: Operator | Pointwise, backend: Backend,
                phase: dict[tuple[int, int], int], members: list[int]) -> Callable[..., Any]:
    """One phase: operand views, one core computation, placement into the full result."""
    layout = inferred.layout
    views = [operand_view(layout[t], t, phase, backend) for t in members]
    res_axes = _result_axes(layout[-1], len(layout) - 1, phase)
    res_keys = list(dict.fromkeys(k for k, _, _ in res_axes if k is not None))
    covered = {k for _, ks, _ in views for k in ks} & set(res_keys)
    core = _core(op, backend, [v[1] for v in views], [v[2] for v in views], res_keys)
    place = _placement(backend, covered, res_axes, op.neutral)  # None: nothing to do
    reads = [(t, v[0]) for t, v in zip(members, views, strict=True)]  # None: as it is
    # one operand's padding meets no other's: only two or more need max's integer mask
    pad = op.pad if isinstance(op, Pointwise) else op.neutral
    masked = getattr(core, "masked", None) if len(members) > 1 else None

    def step(arrays: Sequence[Any]) -> Any:
        xs = [arrays[t] if f is None else f(arrays[t], pad) for t, f in reads]
        if masked is not None and any(is_integer(arrays[t].dtype) for t in members):
            ones = [(backend.full(arrays[t].shape, 1, arrays[t]), f) for t, f in reads]
            v = masked(xs, [x if f is None else f(x, pad) for x, f in ones])
        else:
            v = core(xs)
        return v if place is None else place(v)

    contract = getattr(core, "contract", None)
    if contract is not None and place is None and all(f is None for _, f in reads) and \
            members == list(range(len(layout) - 1)):  # a bare contraction
        step.direct = contract  # type: ignore[attr-defined]
    return step


def _result_axes(uses: tuple[AxisUse, ...], t: int, phase: dict[tuple[int, int], int]
                 ) -> list[tuple[Key | None, int, tuple[int, int]]]:
    """Per result axis: the key it reads (``None``: a fixed index), how many cells of it the
    phase writes, and the (before, after) padding that places them."""
    axes: list[tuple[Key | None, int, tuple[int, int]]] = []
    for p, u in enumerate(uses):
        ix, size = u.index, int(u.size)
        if isinstance(ix, FixedIndex):
            axes.append((None, 1, (ix.index, size - ix.index - 1)))
        elif isinstance(ix, ConcatIndex):
            key, off, n = active_part(uses, t, p, phase)
            axes.append((key, n, (off, size - off - n)))
        else:
            assert isinstance(ix, Iter)
            axes.append((ix.id, size, (0, 0)))
    return axes


# -- the core computation of a phase -----------------------------------------------------------
def _core(op: Operator | Pointwise, backend: Backend, keys: list[list[Key]],
          sizes: list[list[int]], res_keys: list[Key]) -> Callable[[list[Any]], Any]:
    """Combine the operand views into an array over the result keys they cover (in order)."""
    letters = Letters()
    subs = ["".join(letters[k] for k in ks) for ks in keys]
    out = "".join(letters[k] for k in res_keys if k in letters)
    by_letter = {letters[k]: n for ks, ns in zip(keys, sizes, strict=True)
                 for k, n in zip(ks, ns, strict=True)}
    if isinstance(op, Pointwise):
        return _evaluated(op.evaluate, backend, subs, out, by_letter, op.result_first)
    if op.accum == "+" and (len(keys) == 1 or op.combine in ("mul", "concat")):
        # one operand is read as it is; a concatenation's operands that share a phase multiply
        if len(keys) == 1 and subs[0] == out:
            return lambda xs: xs[0]
        contract = backend.contraction(",".join(subs) + "->" + out,
                                       [tuple(ns) for ns in sizes])

        def core(xs: list[Any]) -> Any:
            return contract(*xs)

        core.contract = contract  # type: ignore[attr-defined]
        return core
    if op.accum == "+":  # outer_sum: sum of (a + b) over the reduced axes
        return _sum_of_sums(backend, subs, out, by_letter)
    return _max_of_sums(backend, subs, out, by_letter)


def _unique(s: str) -> str:
    return "".join(dict.fromkeys(s))


def _evaluated(evaluate: Callable[[list[Any]], Any], backend: Backend, subs: list[str],
               out: str, by_letter: dict[str, int], result_first: bool
               ) -> Callable[[list[Any]], Any]:
    """A :class:`Pointwise` expression: each operand (diagonals taken) lined up with the
    product space (the result's axes, then the reduced ones; without ``result_first``, the
    operands' in order), evaluated, then summed."""
    order = out + "".join(c for c in _unique("".join(subs)) if c not in out)
    if not result_first:  # first_max ranks a block's cells in this order: the operands', the
        order = _unique("".join(subs) + out)  # same for each operand's gradient
    full = tuple(by_letter[c] for c in order)
    reduced = tuple(k for k, c in enumerate(order) if c not in out)
    kept = [c for c in order if c in out]
    # the sum's axes into the result's order: planned once, not tested on every call
    finish = moves([kept.index(c) for c in out], (), (), backend.transpose)
    preps = [_lined_up(backend, sub, order, by_letter) for sub in subs]

    def core(xs: list[Any]) -> Any:
        v = evaluate([x if p is None else p(x) for x, p in zip(xs, preps, strict=True)])
        if tuple(v.shape) != full:
            v = backend.broadcast_to(v, full)
        return finish(v.sum(reduced) if reduced else v)

    return core


def _lined_up(backend: Backend, sub: str, order: str, by_letter: dict[str, int]
              ) -> Callable[[Any], Any] | None:
    """``x`` (axes ``sub``) on its diagonals, lined up with ``order``, composed once; ``None``
    when that changes nothing."""
    mine = _unique(sub)
    align = _aligner(backend, mine, order, by_letter)
    if mine == sub:
        return None if mine and order.endswith(mine) else align  # (align: the identity)
    diag = f"{sub}->{mine}"
    return lambda x: align(backend.einsum(diag, x))


def _aligner(backend: Backend, sub: str, order: str, by_letter: dict[str, int]
             ) -> Callable[[Any], Any]:
    """``x`` (unique axes ``sub``) transposed and expanded to broadcast over ``order``."""
    if sub and order.endswith(sub):  # the trailing axes, in order: broadcasting lines it up
        return lambda x: x
    perm = sorted(range(len(sub)), key=lambda i: order.index(sub[i]))
    return moves(perm, [by_letter[sub[i]] for i in perm],
                 [by_letter[c] if c in sub else 1 for c in order], backend.transpose, True)


def _times(y: Any, count: int) -> Any:
    """``y * count`` wrapping as additions in a narrow integer dtype would (NumPy 2 and JAX
    refuse a Python int the dtype cannot hold)."""
    try:
        return y * count
    except OverflowError:
        span = 2 ** (8 * y.dtype.itemsize)
        try:
            return y * (count % span)
        except OverflowError:  # a signed dtype: the same residue, negative
            return y * (count % span - span)


def _sum_of_sums(backend: Backend, subs: list[str], out: str, by_letter: dict[str, int]
                 ) -> Callable[[list[Any]], Any]:
    """sum_R (a + b) = (sum_R∩a a) * |R \\ a| + (sum_R∩b b) * |R \\ b|, broadcast together."""
    reduced = set("".join(subs)) - set(out)
    parts = []
    for sub in subs:
        kept = "".join(c for c in _unique(sub) if c in out)
        count = math.prod(by_letter[c] for c in reduced - set(sub))
        parts.append((f"{sub}->{kept}", _aligner(backend, kept, out, by_letter), count))

    def term(x: Any, subscripts: str, align: Callable[[Any], Any], count: int) -> Any:
        y = backend.einsum(subscripts, x)
        return align(y if count == 1 else _times(y, count))

    def core(xs: list[Any]) -> Any:
        return functools.reduce(operator.add, (term(x, *p) for x, p in zip(xs, parts,
                                                                              strict=True)))

    return core


def _max_of_sums(backend: Backend, subs: list[str], out: str, by_letter: dict[str, int]
                 ) -> Callable[[list[Any]], Any]:
    """max_R (a + b), or max_R a: each operand reduced over its own reduced axes, then met."""
    all_subs = [_unique(s) for s in subs]
    shared_reduced = "".join(
        c for c in dict.fromkeys("".join(all_subs))
        if c not in out and sum(c in s for s in all_subs) > 1)
    order = out + shared_reduced
    preps = []
    for n, (sub, mine) in enumerate(zip(subs, all_subs, strict=True)):
        # by position: two operands' subscripts may be one (interned) string
        others = set("".join(s for j, s in enumerate(all_subs) if j != n))
        diag = f"{sub}->{mine}" if mine != sub else None
        own = tuple(i for i, c in enumerate(mine) if c not in out and c not in others)
        kept = "".join(c for c in mine if c in out or c in others)
        preps.append((diag, own, _aligner(backend, kept, order, by_letter)))
    final_axes = tuple(range(len(out), len(order)))

    def met(xs: list[Any]) -> list[Any]:
        return [align(backend.amax(x if diag is None else backend.einsum(diag, x), own))
                for x, (diag, own, align) in zip(xs, preps, strict=True)]

    def core(xs: list[Any]) -> Any:
        total = functools.reduce(operator.add, met(xs))
        return backend.amax(total, final_axes) if final_axes else total

    def masked(xs: list[Any], valid: list[Any]) -> Any:
        """``core`` for integer operands, whose padding (the minimum) plus -1 wraps to the
        maximum: ``valid`` (views of ones) says where every operand reads a real cell."""
        total = functools.reduce(operator.add, met(xs))
        ok = functools.reduce(operator.and_, (v == 1 for v in met(valid)))
        lo = backend.full((), neutral_max(total.dtype), total)
        return backend.amax(backend.where(ok, total, lo), final_axes)

    core.masked = masked  # type: ignore[attr-defined]
    return core


# -- placement into the result -----------------------------------------------------------------
def _placement(backend: Backend, covered: set[Key],
               res_axes: list[tuple[Key | None, int, tuple[int, int]]], neutral: float
               ) -> Callable[[Any], Any] | None:
    """From the core (covered result keys, in order) to the full result; ``None``: it is."""
    seen: dict[Key, int] = {}  # key -> its first result axis
    # one axis per result axis: the core's reshaped to size 1 where it has none (a fixed
    # index, a key repeated or not covered), then broadcast over the keys' first occurrences
    core_dims: list[int] = []  # the core's shape
    core_shape: list[int] = []
    full: list[int] = []
    diagonals: list[tuple[int, int, int]] = []  # (first position, duplicate position, size)
    for pos, (key, n, _) in enumerate(res_axes):
        first = pos if key is None else seen.setdefault(key, pos)
        if first != pos:
            diagonals.append((first, pos, n))
        full.append(n if first == pos else 1)
        core_shape.append(full[-1] if key in covered else 1)
        if first == pos and key in covered:
            core_dims.append(n)
    pads = [pad for _, _, pad in res_axes]
    reshape, replicate = core_shape != core_dims, core_shape != full
    any_pad = any(p != (0, 0) for p in pads)
    if not replicate and not reshape and not diagonals and not any_pad:
        return None

    def place(x: Any) -> Any:
        if reshape:
            x = backend.reshape(x, core_shape)
        if replicate:
            x = backend.broadcast_to(x, full)
        for first, dup, n in diagonals:
            target = list(x.shape)
            target[dup] = n
            x = backend.broadcast_to(x, target)
            mask_shape = [1] * len(target)
            mask_shape[first] = mask_shape[dup] = n
            mask = backend.reshape(backend.eye_mask(n, x), mask_shape)
            x = backend.where(mask, x, backend.full((), fill(neutral, x), x))
        if any_pad:
            x = backend.pad(x, pads, fill(neutral, x))
        return x

    return place
