"""Frames and cells (:mod:`tensig.rank` states the rules), and what a lifted call runs: its
:class:`Plan` and the paths that apply a function to every cell.

The paths, fastest first: a NumPy ufunc is called once on the arguments with singleton
axes inserted after their frames (broadcasting then replicates, as views); a batched function
(``vectorized=True``, the primitives, an eta-expansion) is called once on the arrays broadcast
to the principal frame; a torch or JAX function goes through nested ``vmap``; a Python loop
over the frame is the last resort.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensig.backends import Backend
from tensig.check.signature_error import shape_text as _fmt
from tensig.core.errors import ShapeError
from tensig.core.shape_index import ShapeIndex
from tensig.rank._boxes import Box, _objects
from tensig.rank._types import Matcher, Sigma

Rank = int | None
Shape = tuple[int, ...]


def principal_frame(fname: str, frames: Sequence[Sequence[Any]], who: Sequence[str]) -> tuple:
    """The longest frame, after checking that every other frame is a prefix of it (sizes
    compare exactly: a size-1 axis does not stretch).

    >>> principal_frame("f", [(2,), (2, 3)], ["argument 0", "argument 1"])
    (2, 3)
    >>> principal_frame("f", [(2, 4), (2, 3)], ["argument 0", "argument 1"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tensig.ShapeError: f: frame (2, 3) of argument 1 is not a prefix of the principal ...
    """
    if not frames:
        return ()
    best = max(range(len(frames)), key=lambda i: len(frames[i]))  # the first longest
    principal = tuple(frames[best])
    for i, f in enumerate(frames):
        if principal[:len(f)] != tuple(f):
            raise _frame_error(fname, frames, who, i, best)
    return principal


def _frame_error(fname: str, frames: Sequence[Sequence[Any]], who: Sequence[str], i: int,
                 best: int) -> ShapeError:
    f, p = frames[i], frames[best]
    hint = "Remora matches frames from the left (prefix agreement) and a size-1 axis does not " \
           "stretch"
    with contextlib.suppress(ValueError, TypeError):  # when NumPy would broadcast them
        np.broadcast_shapes(*[tuple(int(x) for x in f) for f in frames])
        hint += ("; NumPy would broadcast these shapes from the right. To pair trailing axes, "
                 "raise the cell rank of the shorter argument (rank.rerank) so those axes are "
                 "part of its cell, or move the shared axes to the front")
    return ShapeError(f"{fname}: frame {_fmt(f)} of {who[i]} is not a prefix of the principal "
                      f"frame {_fmt(p)} from {who[best]}", operand=i, shape=_fmt(f),
                      sizes=(_fmt(f), _fmt(p)), hint=hint)


def _concrete_rank(r: Rank, n: int) -> int:
    """The cell rank of an argument of rank ``n``: ``None`` is all of it, a negative ``-k``
    all but its first ``k`` axes (J's and Remora's complementary rank)."""
    if r is None:
        return n
    return max(n + r, 0) if r < 0 else r


def _check_rank_value(fname: str, r: object) -> Rank:
    if r is None:
        return None
    if isinstance(r, bool) or not isinstance(r, int | np.integer):
        raise TypeError(f"{fname}: a cell rank is an int >= 0 or None (the whole argument), "
                        f"not {r!r}")
    return int(r)  # a negative rank -k is complementary: all but the first k axes


def _who(lf: Any, i: int) -> str:
    return f"argument {i} ({lf.type.param_name(i)})"


def _cell_rank(lf: Any, k: int, shape: tuple[Any, ...]) -> int:
    r = lf.ranks[k]
    if r is not None and r > len(shape):
        i = lf.arrays[k]
        raise ShapeError(f"{lf.name}: {_who(lf, i)} has shape {_fmt(shape)}, of rank "
                         f"{len(shape)}, less than its cell rank {r}", operand=i,
                         shape=_fmt(shape), sizes=(len(shape), r),
                         hint=f"pass an array with at least {r} axes, or rerank {lf.name}")
    return _concrete_rank(r, len(shape))


def _split(lf: Any, shapes: Sequence[tuple[Any, ...]]
           ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], tuple[Any, ...]]:
    """The frames and cells of ``lf``'s array arguments of these shapes (sizes, or symbolic
    sizes for typeof), and their principal frame."""
    frames, cells = [], []
    for k, shape in enumerate(shapes):
        split = len(shape) - _cell_rank(lf, k, shape)
        frames.append(shape[:split])
        cells.append(shape[split:])
    return frames, cells, principal_frame(lf.name, frames, lf._who)


# -- the plan --------------------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class Plan:
    """What a call depends on only through its arguments' signature: frames, cells, the
    checked type and the path that runs it (``run(plan, args)``).  ``matcher`` is set only when
    the declared result cell stays symbolic (then it is matched per call; no reuse)."""

    lf: Any
    backend: Backend
    frames: list[Shape]
    cells: list[Shape]
    frame: Shape
    declared: ShapeIndex | None = None
    sigma: Sigma | None = None
    matcher: Matcher | None = None
    expect: Shape | None = field(init=False)  # frame + declared cell, when it is sizes
    reshapes: list[tuple[Shape | None, Shape | None]] | None = field(init=False, default=None)
    op: Any = field(init=False, default=None)  # the library's ufunc
    vmap: Any = field(init=False, default=None)  # the library's vmap, when it has one
    vmapped: Any = field(init=False, default=None)  # fn under one vmap per frame axis
    run: Callable[[Plan, Sequence[Any]], Any] = field(init=False)

    def __post_init__(self) -> None:
        d = self.declared  # boxed results are not checked against it
        self.expect = None if d is None or not d.is_concrete or self.lf.boxed \
            else self.frame + d.as_tuple()
        self.run = _choose(self)


def _choose(plan: Plan) -> Callable[[Plan, Sequence[Any]], Any]:
    """The path of a call, with what it precomputes."""
    lf = plan.lf
    if lf.ufunc is not None:
        _check_elementwise(plan)
        plan.op = plan.backend.ufunc(lf.ufunc)
        plan.reshapes = _reshapes(plan, max((len(c) for c in plan.cells), default=0))
        return _via_ufunc
    if lf.inner is None:
        if 0 in plan.frame:
            return _empty
        if not plan.frame:
            return _on_cells
        plan.vmap = None if lf.boxed else plan.backend.vmap()
        if plan.vmap is not None and lf._plain:
            # made once per plan: making it costs as much as running it on a small frame
            plan.vmapped = lf.fn
            for _ in plan.frame:
                plan.vmapped = plan.vmap(plan.vmapped)
    plan.reshapes = _reshapes(plan, None)
    if lf.batched is not None:
        return _via_batched
    return _via_vmap if plan.vmap is not None else _via_loop


def _check_elementwise(plan: Plan) -> None:
    cells = plan.cells
    try:
        np.broadcast_shapes(*cells)
    except ValueError:
        raise ShapeError(f"{plan.lf.name}: the cells {', '.join(_fmt(c) for c in cells)} do not "
                         f"combine elementwise", sizes=tuple(_fmt(c) for c in cells),
                         hint="give the arguments cells of one shape (or of size 1)") from None


def _reshapes(plan: Plan, k: int | None) -> list[tuple[Shape | None, Shape | None]] | None:
    """Per array argument, the shape it is reshaped to (singleton axes after its frame, up to
    the principal frame's rank, and for a ufunc before its cell, up to ``k`` axes) and the shape
    it is then broadcast to (``k is None``: the principal frame + its cell), ``None`` where
    nothing changes; ``None`` when no argument changes (the common case)."""
    n, out = len(plan.frame), []
    for f, c in zip(plan.frames, plan.cells, strict=True):
        pad = 0 if k is None else k - len(c)
        target = f + (1,) * (n - len(f) + pad) + c
        wide = target if k is not None else plan.frame + c
        out.append((None if target == f + c else target, None if wide == target else wide))
    return out if any(r != (None, None) for r in out) else None


def _reshaped(plan: Plan, arrays: Sequence[Any]) -> Sequence[Any]:
    """The arrays reshaped and broadcast as :func:`_reshapes` planned: views, no copies."""
    if plan.reshapes is None:
        return arrays
    backend, out = plan.backend, []
    for a, (target, wide) in zip(arrays, plan.reshapes, strict=True):
        if target is not None:
            a = backend.reshape(a, target)
        out.append(a if wide is None else backend.broadcast_to(a, wide))
    return out


def _is_object(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.dtype.kind == "O"


def _atom(a: Any) -> Any:
    """A 0-d object array is a wrapped atom (a box): pass the atom itself."""
    return a[()] if _is_object(a) and a.ndim == 0 else a


def _arrays(plan: Plan, args: Sequence[Any]) -> Sequence[Any]:
    return args if plan.lf._plain else [args[i] for i in plan.lf.arrays]


def _merge(lf: Any, args: Sequence[Any], arrays: Sequence[Any]) -> Sequence[Any]:
    """``args`` with ``lf``'s array arguments replaced by ``arrays``."""
    if lf._plain:
        return arrays
    out = list(args)
    for k, i in enumerate(lf.arrays):
        out[i] = arrays[k]
    return out


# -- the paths: each takes the plan and the call's arguments ---------------------------------------


def _via_ufunc(plan: Plan, args: Sequence[Any]) -> Any:
    """One ufunc call: broadcasting of the aligned arrays replicates the cells."""
    return _finish(plan, plan.op(*_reshaped(plan, args)))


def _on_cells(plan: Plan, args: Sequence[Any]) -> Any:
    """An empty principal frame: the function on the cells themselves."""
    lf = plan.lf
    return _finish(plan, lf.fn(*_merge(lf, args, [_atom(a) for a in _arrays(plan, args)])))


def _via_batched(plan: Plan, args: Sequence[Any]) -> Any:
    arrays = _reshaped(plan, _arrays(plan, args))
    out = plan.lf.batched(len(plan.frame), *_merge(plan.lf, args, arrays))
    if out is NotImplemented:  # the batched form declined these arguments
        return _via_vmap(plan, args) if plan.vmap is not None else _via_loop(plan, args)
    return _finish(plan, out)


def _via_vmap(plan: Plan, args: Sequence[Any]) -> Any:
    """Nested ``torch.vmap`` / ``jax.vmap``, one per frame axis; the loop when the function
    cannot be vmapped (data-dependent Python control flow, non-array results)."""
    g = plan.vmapped
    if g is None:  # non-array arguments: the cell function holds this call's
        def cells_fn(*arrays: Any) -> Any:
            return plan.lf.fn(*_merge(plan.lf, args, arrays))

        g = cells_fn
        for _ in plan.frame:
            g = plan.vmap(g)
    try:
        out = g(*_reshaped(plan, _arrays(plan, args)))
    except Exception:
        return _via_loop(plan, args)
    return _finish(plan, out)


def _cell_calls(plan: Plan, args: Sequence[Any]) -> list[Any]:
    """``fn`` on every cell, in row-major frame order (the last resort)."""
    fn, frame = plan.lf.fn, plan.frame
    n = len(frame)
    pairs = [(a, len(f)) for a, f in zip(_arrays(plan, args), plan.frames, strict=True)]
    positions = itertools.product(*map(range, frame))
    if plan.lf._plain:  # no merging
        return [fn(*[a[idx] if k == n else a[idx[:k]] for a, k in pairs]) for idx in positions]
    return [fn(*_merge(plan.lf, args, [a[idx[:k]] for a, k in pairs])) for idx in positions]


def _shape(x: Any) -> Shape:
    return tuple(np.shape(x))  # x.shape where there is one (torch, JAX), without converting


def _via_loop(plan: Plan, args: Sequence[Any]) -> Any:
    results = _cell_calls(plan, args)
    if plan.lf.boxed:
        return _objects([_box(plan, r) for r in results], plan.frame)
    if plan.backend.numpy_native and not _shape(results[0]):
        try:  # all scalars: one conversion, no per-cell shape checks
            flat = np.asarray(results)
        except ValueError:  # ragged: reported below
            flat = np.empty(0, dtype=object)
        if flat.dtype != object and flat.shape == (len(results),):
            _check_cell(plan, ())
            return flat.reshape(plan.frame)
    shapes = set(map(_shape, results))
    if len(shapes) > 1:
        raise _ragged_error(plan, results)
    cell = shapes.pop()
    _check_cell(plan, cell)
    return plan.backend.stack_cells(results, plan.frame, cell)


def _ragged_error(plan: Plan, results: Sequence[Any]) -> ShapeError:
    first, name = _shape(results[0]), plan.lf.name
    idx, other = next((i, _shape(r)) for i, r in zip(np.ndindex(*plan.frame), results,
                                                      strict=True) if _shape(r) != first)
    return ShapeError(
        f"{name}: result cells differ in shape: {_fmt(first)} at frame index "
        f"{_fmt((0,) * len(plan.frame))}, {_fmt(other)} at {_fmt(idx)}",
        sizes=(_fmt(first), _fmt(other)),
        hint=f"an array needs cells of one shape; lift with boxed=True to get an array of "
             f"boxes (rank.lift({name}, ..., boxed=True))")


def _box(plan: Plan, value: Any) -> Box:
    return value if isinstance(value, Box) else Box(value, _sigma=plan.sigma)


def _finish(plan: Plan, out: Any) -> Any:
    """The result, after checking it is the frame + the declared result cell."""
    if plan.expect is not None and getattr(out, "shape", None) == plan.expect:
        return out  # the common case: one comparison of shapes
    if plan.lf.boxed:
        return _box(plan, out) if not plan.frame else out  # batched: arrays of boxes already
    shape, n = _shape(out), len(plan.frame)
    if shape[:n] != plan.frame:
        raise ShapeError(f"{plan.lf.name}: the function returned shape {_fmt(shape)}, which "
                         f"does not start with the frame {_fmt(plan.frame)}",
                         sizes=(_fmt(shape), _fmt(plan.frame)),
                         hint="a vectorized function must keep the leading frame axes")
    _check_cell(plan, shape[n:])
    return out


def _check_cell(plan: Plan, cell: Shape) -> None:
    declared = plan.declared
    if declared is None:
        return
    if plan.expect is not None:
        if plan.frame + cell != plan.expect:
            raise ShapeError(f"{plan.lf.name}: the function returned a cell of shape "
                             f"{_fmt(cell)}, but its declared result cell is {declared}",
                             sizes=(str(declared), _fmt(cell)))
        return
    m = plan.matcher
    assert m is not None  # a symbolic declared cell always has its matcher
    m.match("the result cell the function returned", declared, ShapeIndex(cell))
    m.finish([])


def _empty(plan: Plan, args: Sequence[Any]) -> Any:
    """An empty frame: the function is never called; the declared result cell gives the
    shape (Remora's answer to the "hole" in untyped array languages)."""
    lf, declared = plan.lf, plan.declared
    if lf.boxed:
        return np.empty(plan.frame, dtype=object)
    if declared is None or not declared.is_concrete:
        what = "has no declared result cell" if declared is None else \
            f"declares the result cell {declared}, which the arguments do not determine"
        raise ShapeError(f"{lf.name}: the frame {_fmt(plan.frame)} is empty, so the function "
                         f"is never called, and it {what}",
                         hint="declare the result cell: lift(fn, cells='... => m', "
                              "sizes={'m': ...}) or lift(fn, ranks=..., result=(...))")
    typed = [a for a in _arrays(plan, args) if not _is_object(a)]
    dtype = lf.dtype if lf.dtype is not None else plan.backend.result_dtype(typed)
    return plan.backend.empty(plan.frame + declared.as_tuple(), dtype)


# -- arrays of functions: one application per position ---------------------------------------------


def _per_function(shape: Shape, plan: Plan, args: Sequence[Any], who: str,
                  run: Callable[[int, list[Any]], Any]) -> Any:
    """One application per position of a function array whose shape is one more frame: each
    argument is sliced by the position over the frame axes it has, then lifts over the rest."""
    principal_frame(plan.lf.name, [shape, *plan.frames], [who, *plan.lf._who])
    outs, arrays = [], _arrays(plan, args)
    for flat, pos in enumerate(np.ndindex(*shape)):
        sub = [a[pos[:len(fr)]] for a, fr in zip(arrays, plan.frames, strict=True)]
        outs.append(run(flat, list(_merge(plan.lf, args, sub))))
    if all(isinstance(o, Box) for o in outs):
        return _objects(outs, shape)
    shapes = {_shape(o) for o in outs}
    if len(shapes) > 1:
        a, b = sorted(shapes)[:2]
        raise ShapeError(f"apply: the functions' results differ in shape: {_fmt(a)} and "
                         f"{_fmt(b)}", sizes=(_fmt(a), _fmt(b)),
                         hint="lift the functions with boxed=True to get an array of boxes")
    if not shape:
        return outs[0]
    return plan.backend.stack_cells(outs, shape, shapes.pop())
