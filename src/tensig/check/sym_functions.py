"""The library functions symbolic arrays model by hand (contractions, concatenation, layers,
losses, creation), filling :mod:`tensig.check.tracer`'s tables; the long tails are in
:mod:`~tensig.check.trace_numpy` and ``trace_torch``."""

from __future__ import annotations

import functools
import itertools
import math
import numbers
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tensig.check.broadcasting import broadcast, carry_strides, differ, shape_text
from tensig.check.sym_indexing import at_most
from tensig.check.sym_sizes import (
    ONE,
    StandIn,
    SymRange,
    SymSize,
    _assume,
    _eq,
    _holds,
    as_dim,
    counted_loop,
    require_divisible,
)
from tensig.check.tracer import (
    _DRAWS,
    CREATION_NUMPY,
    CREATION_TORCH,
    NUMPY,
    TORCH,
    SymArray,
    _axis,
    _refused_draw,
    _sym,
    _varargs,
    broadcast_to,
    clip,
    elementwise,
    expand_dims,
    into,
    kind_of,
    matmul,
    moveaxis,
    permute,
    reduce_,
    reduction,
    result_kind,
    squeeze,
    swapaxes,
    unary,
)
from tensig.check.tracing import _TRACER, Unsupported, tracer
from tensig.core.dims import Dim

__all__ = ["SHARED", "bincount", "concatenate", "conv", "cross_entropy", "einsum", "layer_norm",
           "linear", "nonzero", "stack", "where"]


def einsum(subscripts: str, *operands: Any, **kw: Any) -> SymArray:
    arrays = [_sym(o) for o in operands]
    spec = subscripts.replace(" ", "")
    ins, arrow, out = spec.partition("->")
    subs, whole = ins.split(","), ""
    if "..." in spec:  # each operand's ``...`` axes, right-aligned: one letter per position
        subs = [s.replace("...", _ellipsis(a.ndim - len(s) + 3)) if "..." in s else s
                for s, a in zip(subs, arrays, strict=True)]
        whole = _ellipsis(max(a.ndim - len(s) + 3 for s, a in zip(ins.split(","), arrays,
                                                                  strict=True) if "..." in s))
        out = out.replace("...", whole)
    joined = "".join(subs)
    if not arrow:  # NumPy's implicit output: the ``...`` axes, then the indices used once
        out = whole + "".join(sorted(c for c in set(joined) - set(whole) if joined.count(c) == 1))
    sizes: dict[str, Dim] = {}
    for sub, a in zip(subs, arrays, strict=True):
        if len(sub) != a.ndim:
            tracer().report("contraction", f"einsum operand {sub!r} has rank {a.ndim}")
            continue
        for c, d in zip(sub, a.dims, strict=True):
            if c in sizes and differ(sizes[c], d):
                if sizes[c] == ONE:
                    sizes[c] = d
                elif d != ONE:
                    index = f"index {c!r}" if c.isascii() else "'...' axis"  # see _ellipsis
                    shapes = ", ".join(map(shape_text, arrays))  # a layer's letters: EinMix
                    tracer().report("contraction", f"einsum {index} is {sizes[c]} in one "
                                    f"operand and {d} in another ({subscripts!r} of {shapes})")
            else:
                sizes.setdefault(c, d)
    for c in out:
        if c not in joined:  # NumPy's ValueError; an operand of the wrong rank is told
            tracer().report("contraction", f"einsum output index {c!r} is in no operand "
                                           f"({subscripts!r})")
    return SymArray([sizes[c] if c in sizes else tracer().new_dim("e") for c in out],
                    result_kind("f", {_sym(a).kind for a in operands}))


def _ellipsis(n: int) -> str:
    """``n`` axes of an einsum's ``...``, named by letters no subscript uses, right-aligned."""
    return "".join(chr(0x3B1 + i) for i in range(-n, 0)) if n > 0 else ""


def _loop_steps(arrays: Sequence[Any]) -> Dim | None:
    """The size of a loop that made ``arrays``, one item per step: one whose k-th step made the
    k-th (:meth:`~tensig.check.tracing.Tracer.loop_of`), else the last loop of their count (8
    or more steps) running when the first was made, one begun while they were (an inner one),
    or with none running any begun before; None for a list as long as no loop over a size, or
    one item repeated (``[x] * 11``).  Where those differ in size, which made them is unknown."""
    if len(set(map(id, arrays))) != len(arrays):
        return None
    ran = tracer().loop_of(list(arrays))  # one per step of a loop over range(d): d
    if ran is not None:
        return ran
    made = [a.made_at for a in arrays if isinstance(a, SymArray)]
    n = len(arrays)  # T - 1, T - 3 at T = 11 pass; a mask's 3 or T // 2's 5 is no evidence
    loops = [lp for lp in tracer().loops
             if lp.n == n >= 8 and (lp.d is None or lp.d.constant is None)]
    if made:
        first = min(made)
        inner = {lp.d for lp in loops if first <= lp.begin < max(made)}
        begun = [lp for lp in loops if lp.begin < first and lp.d not in inner]
        running = [lp.d for lp in begun if lp.end is None or lp.end >= first]
        sizes = inner | (set(running[-1:]) if running or inner else {lp.d for lp in begun})
    else:  # no array's time: every loop of their count
        sizes = {lp.d for lp in loops}
    if len(sizes) > 1:
        named = sorted("a literal count" if d is None else str(d) for d in sizes)  # not set order
        raise Unsupported(f"a list of {n} items after loops of as many steps over "
                          f"{' and '.join(named)}")
    return next(iter(sizes), None)


_ZIP = zip  # the builtin, which verification patches with sym_zip
_LONG = (SymRange, SymArray)  # of a symbolic length


class sym_zip(metaclass=StandIn):  # lower case: it stands in for the builtin
    """``zip()`` during verification (``isinstance(z, zip)`` still holds): it stops at its
    shortest argument (six weights with ``range(T // 2)``: ``T // 2 <= 6``), decided on
    canonical forms, else at the witness and assumed; the loop counts as one of that length,
    never as a range it may stop short.  ``strict=True`` lengths equal at the witness are
    assumed equal."""

    kinds = (_ZIP,)

    def __new__(cls, *iterables: Any, strict: bool = False) -> Any:
        if _TRACER.get() is None or all(hasattr(x, "__len__") and not isinstance(x, _LONG)
                                        for x in iterables):  # every zip() while verify runs
            return _ZIP(*iterables, strict=strict)
        args = [_quietly(x) for x in iterables]
        sizes = [d for d in map(_length, iterables) if d is not None]
        if len(sizes) < len(args):  # an iterator's length is not known, nor the loop's
            return _ZIP(*args, strict=strict)
        t = tracer()
        n = min(sizes, key=t.value)
        same, word = (_eq, "==") if strict else (operator.le, "<=")
        for d in sizes:
            if not _holds(same, n, d) and (not strict or t.value(d) == t.value(n)):
                _assume(f"{n} {word} {d}", True, "zip(strict=True) raises ValueError where the "
                        "lengths differ" if strict else "zip() stops at its shortest argument")
        zipped = _ZIP(*args, strict=strict)
        return zipped if n.constant is not None else counted_loop(n, zipped)


def _quietly(x: Any) -> Iterator[Any]:
    """``x``'s items, no loop that gives them counted (``Tracer.quiet``): zip may stop it."""
    t, it = tracer(), iter(x)
    while True:
        t.quiet += 1
        try:
            item = next(it)
        except StopIteration:
            return
        finally:
            t.quiet -= 1
        yield item


def _length(x: Any) -> Dim | None:
    """How many items iterating ``x`` gives (a list of one array per step of a loop over a
    size: that size); None where not known."""
    if isinstance(x, SymRange):
        return x.stop - x.start if x.step == 1 else None
    if isinstance(x, SymArray):
        return x.dims[0] if x.dims else None
    if isinstance(x, list | tuple) and x and all(isinstance(a, SymArray) for a in x):
        steps = _loop_steps(x)
        if steps is not None:
            return steps
    try:
        n = len(x)
    except TypeError:  # an iterator, a generator
        return None
    return as_dim(n) if isinstance(n, SymSize) else Dim.const(n)  # a count, never read back


def concatenate(arrays: Sequence[Any], axis: int = 0, **kw: Any) -> SymArray:
    return _join([_sym(a) for a in arrays], kw.get("dim", axis), _loop_steps(arrays))


def _join(xs: list[SymArray], axis: int, steps: Dim | None) -> SymArray:
    """Concatenate; one array per step of a loop over ``T``, each ``k`` long, joins to ``T*k``
    (``torch.cat(outs)``), not the witness's count."""
    ref = max(xs, key=lambda a: a.ndim)  # the axis of the highest rank: a lower one is reported
    ax = _axis(axis, ref.ndim)
    total = ONE * 0
    for a in xs:
        if a.ndim != ref.ndim:
            tracer().report("concat", f"concatenates arrays of ranks {ref.ndim} and {a.ndim}")
            continue
        for i, (d, e) in enumerate(zip(a.dims, ref.dims, strict=True)):
            if i != ax and differ(d, e):
                tracer().report("concat", f"concatenation along axis {ax} needs equal sizes "
                                          f"on axis {i}: {e} vs {d}")
        total = total + a.dims[ax]
    sizes = {a.dims[ax] for a in xs if a.ndim == ref.ndim}
    if steps is not None and len(sizes) == 1 and (each := sizes.pop()).constant is not None:
        total = steps * each
    dims = list(ref.dims)
    dims[ax] = total
    return SymArray(dims, ref.kind)


def stack(arrays: Sequence[Any], axis: int = 0, **kw: Any) -> SymArray:
    axis = kw.get("dim", axis)
    return _join([expand_dims(a, axis) for a in arrays], axis, _loop_steps(arrays))


def nonzero(a: Any) -> tuple[SymArray, ...]:
    """One index array per axis, all of one data-dependent length."""
    n = tracer().count_of(a)
    return tuple(SymArray((n,), "i") for _ in range(_sym(a).ndim))


def argwhere(a: Any) -> SymArray:
    """:func:`nonzero`'s indices as rows, one per element found: ``[count, ndim]``."""
    return SymArray((tracer().count_of(a), _sym(a).ndim), "i")


def where(cond: Any, *args: Any) -> Any:
    """``where(cond, a, b)``; ``where(cond)`` alone is :func:`nonzero`."""
    if not args:
        return nonzero(cond)
    a, b = args
    out = elementwise([cond, a, b], None, "where")
    return SymArray(out.dims, result_kind(None, {_sym(a).kind, _sym(b).kind}), out.loose)


def linear(x: Any, weight: Any, bias: Any = None) -> SymArray:
    a, w = _sym(x), _sym(weight)
    if differ(a.dims[-1], w.dims[-1]):
        tracer().report("contraction", f"linear layer: input features {a.dims[-1]} vs "
                                       f"weight in_features {w.dims[-1]} (weight "
                                       f"{shape_text(w)})")
    out = SymArray((*a.dims[:-1], w.dims[0]), "f")
    if bias is not None:
        into(out, bias, "the bias")
    return out


def per_axis(nd: int, *params: Any) -> list[list[Any]]:
    """Each convolution parameter as one value per spatial axis: torch takes one for all."""
    return [list(v) if isinstance(v, tuple | list) else [v] * nd for v in params]


def conv_size(n: Dim, k: Dim, stride: Dim | int, padding: Dim | int, dilation: Dim | int
              ) -> Dim:
    """A convolution's output size along an axis of ``n`` (``conv``, ``F.unfold``'s blocks):
    torch's floor, so no divisibility is needed."""
    return (n + 2 * padding - dilation * (k - 1) - 1) // stride + 1


def conv(x: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
         dilation: Any = 1, groups: Any = 1) -> SymArray:
    a, w = _sym(x), _sym(weight)
    nd = w.ndim - 2
    st, pd, dl = per_axis(nd, stride, padding, dilation)
    groups = as_dim(groups)  # a depthwise conv's groups=x.shape[1]: a size
    if a.dims[-nd - 1] != w.dims[1] * groups:
        tracer().report("contraction", f"convolution: input channels {a.dims[-nd - 1]} vs "
                                       f"weight {w.dims[1]} x groups {groups}")
    spatial = [a.dims[-nd + i] if pd[i] == "same" else conv_size(
        a.dims[-nd + i], w.dims[2 + i], as_dim(st[i]), as_dim(0 if pd[i] == "valid" else pd[i]),
        as_dim(dl[i])) for i in range(nd)]  # a size stays one: padding=w.shape[-1] // 2
    _conv_bias(bias, w.dims[0])
    return SymArray((*a.dims[:-nd - 1], w.dims[0], *tuple(spatial)), "f")


def _conv_bias(bias: Any, channels: Dim) -> None:
    """A convolution's bias is one number per output channel (torch refuses any other)."""
    b = None if bias is None else _sym(bias)
    if b is not None and (b.ndim != 1 or differ(b.dims[0], channels)):
        tracer().report("op-shape", f"convolution bias {shape_text(b)} for {channels} output "
                                    f"channels (expected [{channels}])")


def conv_transpose(x: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
                   output_padding: Any = 0, groups: Any = 1, dilation: Any = 1) -> SymArray:
    """By hand: torch's meta kernel lets any input channels through (its CPU kernel refuses)."""
    a, w = _sym(x), _sym(weight)
    nd = w.ndim - 2
    st, pd, op, dl = ([as_dim(u) for u in v]
                      for v in per_axis(nd, stride, padding, output_padding, dilation))
    if differ(a.dims[-nd - 1], w.dims[0]):
        tracer().report("contraction", f"transposed convolution: input channels "
                                       f"{a.dims[-nd - 1]} vs weight {shape_text(w)}'s "
                                       f"{w.dims[0]} (weight [in, out / groups, ...])")
    spatial = [(a.dims[-nd + i] - 1) * st[i] - 2 * pd[i] + dl[i] * (w.dims[2 + i] - 1) + op[i]
               + 1 for i in range(nd)]
    _conv_bias(bias, w.dims[1] * as_dim(groups))
    return SymArray((*a.dims[:-nd - 1], w.dims[1] * as_dim(groups), *spatial), "f")


def added_product(input: Any, a: Any, b: Any, *args: Any, **kw: Any) -> SymArray:
    """``baddbmm``/``addmm``: ``input`` (BLOOM's ALiBi bias) added into ``a @ b``."""
    out = matmul(a, b)
    into(out, input, "the added input")
    return out


def same_shape_loss(input: Any, target: Any, *args: Any, reduction: str = "mean",
                    **kw: Any) -> SymArray:
    a, b = _sym(input), _sym(target)
    if a.dims != b.dims:
        tracer().report("broadcast", f"loss between {shape_text(a)} and {shape_text(b)}: "
                                     "the shapes differ, so the loss broadcasts")
    dims, _ = broadcast([a, b], "a loss")
    return SymArray(() if reduction != "none" else dims, "f")


def cross_entropy(input: Any, target: Any, *args: Any, reduction: str = "mean",
                  **kw: Any) -> SymArray:
    a, t = _sym(input), _sym(target)
    if t.kind == "f":
        batch = t.dims
        if a.dims != t.dims:
            tracer().report("broadcast", f"cross_entropy with probabilities {shape_text(t)} "
                                         f"for logits {shape_text(a)}")
    else:
        batch = a.dims[:1] + a.dims[2:]
        if t.dims != batch:
            tracer().report("contraction", f"cross_entropy: targets {shape_text(t)} for logits "
                            f"{shape_text(a)} (expected {shape_text(batch)})")
    return SymArray(() if reduction != "none" else batch, "f")


def layer_norm(x: Any, normalized_shape: Any, weight: Any = None, bias: Any = None,
               *args: Any, **kw: Any) -> SymArray:
    a = _sym(x)
    ns = tuple(as_dim(d) for d in (normalized_shape if isinstance(normalized_shape, tuple | list)
                                   else (normalized_shape,)))
    if a.dims[len(a.dims) - len(ns):] != ns:
        tracer().report("contraction", f"layer_norm over {shape_text(ns)} of {shape_text(a)}")
    for p in (weight, bias):
        if p is not None and _sym(p).dims != ns:
            tracer().report("broadcast", f"layer_norm parameter {shape_text(_sym(p))} for "
                                         f"normalized shape {shape_text(ns)}")
    return SymArray(a.dims, "f")


def embedding(idx: Any, weight: Any, *args: Any, **kw: Any) -> SymArray:
    return SymArray(_sym(idx).dims + _sym(weight).dims[1:], "f")


def bincount(x: Any, weights: Any = None, minlength: Any = 0, *, who: str = "np",
              weights_kind: str = "broadcast") -> SymArray:
    """``bincount``: ``minlength`` bins where given (the idiom's values lie below it), else a
    fresh count; a 1-d input, one weight per value."""
    a = _sym(x)
    w = a if weights is None else _sym(weights)
    weighted = "" if weights is None else f" weighted by {shape_text(w)}"
    if a.ndim != 1 or w.ndim != 1:
        tracer().report("op-shape", f"{who}.bincount of {shape_text(a)}{weighted}: a 1-d "
                                    "input and 1-d weights")
    elif differ(w.dims[0], a.dims[0]):
        tracer().report(weights_kind, f"{who}.bincount of {shape_text(a)}{weighted}: as many "
                                      "weights as values")
    none = type(minlength) is int and minlength == 0
    n = tracer().new_dim("bins") if none else as_dim(minlength)
    return SymArray((n,), "i" if weights is None else "f")


def created(*shape: Any, **kw: Any) -> SymArray:
    dtype = kw.get("dtype", "float")
    if len(shape) > 1 and not isinstance(shape[1], numbers.Integral | SymSize):  # (shape, dtype)
        shape, dtype = shape[:1], shape[1]
    dims = _varargs(shape, kw.get("size", kw.get("shape")))
    return SymArray(dims, kind_of(dtype) or "f")


def broadcast_shapes(*shapes: Any) -> tuple[Any, ...]:
    """``broadcast_shapes`` of symbolic shapes by the one broadcasting rule, so no size is a
    witness read as a number (``[B, D]`` expanded to ``[11, D]``)."""
    dims, _ = broadcast([created(s) for s in shapes], "broadcast_shapes")
    return SymArray(dims, "f").shape


def _arange(*args: Any, **kw: Any) -> SymArray:
    """``arange([start,] stop[, step])``, bounds by keyword too: ``ceil((stop - start) / step)``
    steps, a float step's quotient where it is exact (``0.5``: ``2*T``), else a fresh size; a
    step that is a size (``T // S``) at least 1 (NumPy raises on 0), assumed where not known."""
    names = ("start", "stop", "step") if len(args) > 1 or "stop" in kw else ("stop", "step")
    given = {**dict(zip(names, args, strict=False)), **{k: v for k, v in kw.items() if k in names}}
    start, stop, step = given.get("start", 0), given["stop"], given.get("step", 1)
    if isinstance(step, SymSize) and step.dim.constant is None and not isinstance(start, float) \
            and not isinstance(stop, float):
        at_most(ONE, step.dim, "op-shape", f"arange with a step of {step.dim}, never positive",
                f"arange's step {step.dim} at least 1 (it raises on a step of 0)")
        return SymArray([(SymSize(as_dim(stop) - as_dim(start) + step.dim - 1) // step).dim], "i")
    k = step if isinstance(step, float) else as_dim(step).constant
    if isinstance(start, float) or isinstance(stop, float) or k is None or not k > 0:
        raise Unsupported("arange with a float bound or a symbolic or negative step")
    span = as_dim(stop) - as_dim(start)
    if isinstance(k, int):
        return SymArray([(span + k - 1) // k], "i")
    n = math.ceil((SymSize(span) if span.constant is None else span.constant) / k)  # NumPy's
    return SymArray([n.dim if isinstance(n, SymSize) else Dim.const(n)], "f")


def eye(n: Any, m: Any = None, k: int = 0, dtype: Any = float, **kw: Any) -> SymArray:
    """``eye`` and NumPy's ``tri`` (the same signature): ``[n, m]``, ``m`` by default ``n``."""
    return SymArray([n, m if m is not None else n], kind_of(dtype) or "f")


def split(x: Any, size_or_sections: Any, dim: int = 0, **kw: Any) -> tuple[SymArray, ...]:
    """torch's ``split(size_or_sections, dim)``: pieces of a size (the last one shorter where
    they do not fill the axis), or given sizes."""
    a = _sym(x)
    ax = _axis(kw.get("axis", dim), a.ndim)
    n = a.dims[ax]
    if isinstance(size_or_sections, list | tuple):
        sizes = [as_dim(v) for v in size_or_sections]
        total = sum(sizes, ONE * 0)
        if not tracer().equal_under_assumptions(total, n):
            tracer().report("split", f"split into {shape_text(sizes)} "
                                     f"({total} in all) of an axis of size {n}")
    else:
        size = as_dim(size_or_sections)
        count = n // size if size.constant is not None else _pieces(n, size)
        if count is None or count.constant is None:
            raise Unsupported("split into a symbolic number of pieces")
        rest = (n - count * size).constant  # of a number: torch's last piece is shorter
        sizes = [size] * int(count.constant) + ([ONE * rest] if rest else [])
    return tuple(_piece(a, ax, v) for v in sizes)


def _pieces(n: Dim, size: Dim) -> Dim | None:
    """``n / size`` when it is one constant wherever the recorded divisions are exact: the
    count at one such point, then shown at all (:meth:`Tracer.equal_under_assumptions`)."""
    t = tracer()
    env = t.assumption_env()
    total, piece = n.evaluate(env), size.evaluate(env)
    if piece <= 0 or total % piece:
        return None
    count = Dim.const(total // piece)
    return count if t.equal_under_assumptions(n, count * size) else None


def chunk(x: Any, chunks: int, dim: int = 0, error: tuple[str, str] | None = None,
          **kw: Any) -> tuple[SymArray, ...]:
    """torch's ``chunk(n, dim)``: ``n`` equal pieces (a symbolic axis must divide evenly here;
    a literal one is split as torch does, in pieces of ``ceil(size / n)``: fewer where they
    run out), and NumPy's ``split`` into ``n``, which fails where it does not (``error``: see
    :func:`~tensig.check.sym_sizes.require_divisible`)."""
    a = _sym(x)
    ax = _axis(kw.get("axis", dim), a.ndim)
    size = a.dims[ax].constant
    if error is None and size:  # torch's 4 in 3 chunks: [2, 2]; 1 in 2: [1]
        return split(a, -(-size // int(chunks)), ax)
    piece = require_divisible(a.dims[ax], int(chunks), error=error)
    return tuple(_piece(a, ax, piece) for _ in range(int(chunks)))


def np_split(x: Any, indices_or_sections: Any, axis: int = 0, equal: bool = True
             ) -> tuple[SymArray, ...]:
    """numpy's ``split``: a number of equal sections, or split indices; ``array_split``
    (not ``equal``) cuts ``n`` in ``k`` at ``i*(n//k) + min(i, n%k)`` (section ``i`` is
    ``(n + k - 1 - i) // k``), so its sections need no divisibility."""
    a = _sym(x)
    ax = _axis(axis, a.ndim)
    if isinstance(indices_or_sections, int):
        k = indices_or_sections
        if equal:
            return chunk(x, k, axis, error=("split", f"a split into {k} equal sections"))
        indices_or_sections = itertools.accumulate((a.dims[ax] + k - 1 - i) // k
                                                   for i in range(k - 1))
    cuts = [ONE * 0, *[as_dim(i) for i in indices_or_sections], a.dims[ax]]
    return tuple(_piece(a, ax, hi - lo) for lo, hi in itertools.pairwise(cuts))


def _piece(a: SymArray, ax: int, n: Dim) -> SymArray:
    """A piece of ``a``, ``n`` long on axis ``ax`` (of a split, a chunk): a view of it."""
    out = SymArray((*a.dims[:ax], n, *a.dims[ax + 1:]), a.kind)
    carry_strides(a, out, [(i, 1) for i in range(a.ndim)])
    return out


_REDUCTIONS = {"sum": None, "prod": None, "max": None, "min": None, "amax": None, "amin": None,
               "mean": "f", "std": "f", "var": "f", "argmax": "i", "argmin": "i", "all": "b",
               "any": "b"}


def _like(full: bool, shape_at: int = 3) -> Callable[..., SymArray]:
    """``np.zeros_like(x, bool)``: positional as NumPy's ``(a, [fill_value,] dtype, order,
    subok, shape)`` (JAX's shape at ``shape_at`` 1), or ``dtype=`` (``ones_like(ids,
    dtype=torch.float)`` had kept the ids' int kind)."""
    def like(x: Any, *args: Any, dtype: Any = None, shape: Any = None, **kw: Any) -> SymArray:
        args, a = args[full:], _sym(x)
        dtype = args[0] if args else dtype
        shape = args[shape_at] if len(args) > shape_at else shape
        kind = a.kind if dtype is None else kind_of(dtype) or a.kind
        if shape is None:
            return SymArray(a.dims, kind, a.loose)
        return SymArray(shape if isinstance(shape, tuple | list) else (shape,), kind)
    return like


#: NumPy's and torch's functions of one name and meaning.
def tensordot(a: Any, b: Any, axes: Any = 2, *, dims: Any = None, **kw: Any) -> SymArray:
    """``np.tensordot``/``torch.tensordot(dims=)``: each of ``a``'s listed axes contracted with
    ``b``'s in order (a count ``n``: ``a``'s last ``n`` with ``b``'s first ``n``), the rest of
    ``a``'s axes then the rest of ``b``'s."""
    x, y = _sym(a), _sym(b)
    axes = axes if dims is None else dims
    if isinstance(axes, int):
        pairs = [list(range(x.ndim - axes, x.ndim)), list(range(axes))]
    else:
        pairs = [[v] if isinstance(v, int) else list(v) for v in axes]
    ia, ib = ([_axis(i, t.ndim) for i in p] for p, t in zip(pairs, (x, y), strict=True))
    if len(ia) != len(ib):
        tracer().report("op-shape", f"tensordot pairs {len(ia)} axes of {shape_text(x)} with "
                                    f"{len(ib)} of {shape_text(y)}")
    if len(set(ia)) < len(ia) or len(set(ib)) < len(ib):
        tracer().report("op-shape", f"tensordot contracts an axis twice: {ia} of "
                                    f"{shape_text(x)}, {ib} of {shape_text(y)}")
    for i, j in zip(ia, ib, strict=False):
        if differ(x.dims[i], y.dims[j]):
            tracer().report("contraction", f"tensordot contracts {x.dims[i]} with {y.dims[j]} "
                                           f"(shapes {shape_text(x)} and {shape_text(y)})")
    rest = [d for i, d in enumerate(x.dims) if i not in ia] + \
        [d for j, d in enumerate(y.dims) if j not in ib]
    return SymArray(rest, result_kind("f", {x.kind, y.kind}))


SHARED: dict[str, Callable[..., Any]] = {
    "reshape": lambda a, shape=None, newshape=None, **k: _sym(a).reshape(
        shape if shape is not None else newshape),
    "concatenate": concatenate,
    "concat": concatenate,
    "stack": stack,
    "where": where,
    "matmul": matmul,
    "tensordot": tensordot,
    **dict.fromkeys(("zeros_like", "ones_like", "empty_like"), _like(False)),
    "full_like": _like(True),
}


def _matrices(rank: int) -> Callable[..., SymArray]:
    """torch's ``mm`` (``rank`` 2) and ``bmm`` (3): a matmul of operands of that rank only."""
    def model(a: Any, b: Any, *args: Any, **kw: Any) -> SymArray:
        for x in (_sym(a), _sym(b)):
            if x.ndim != rank:
                tracer().report("op-shape", f"{'bmm' if rank == 3 else 'mm'} of "
                                f"{shape_text(x)}: it takes {rank}-D tensors only")
        return matmul(a, b)
    return model


def dot(a: Any, b: Any, out: Any = None) -> SymArray:
    """``np.dot``: ``a``'s last axis with ``b``'s second to last, every pair of the other
    axes (``[B, N, D]`` by ``[B, D, M]`` is ``[B, N, B, M]``: no batch broadcast); a scalar
    multiplies; of a ``b`` up to 2-D, matmul's."""
    x, y = _sym(a), _sym(b)
    if x.ndim == 0 or y.ndim == 0:
        return elementwise([x, y])
    if y.ndim <= 2:
        return matmul(x, y)
    pairs = matmul(x, SymArray(y.dims[-2:], y.kind))
    return SymArray((*pairs.dims[:-1], *y.dims[:-2], pairs.dims[-1]), pairs.kind)


def partition(arg: bool) -> Callable[..., SymArray]:
    """``np.partition``/``argpartition``: the input's shape (flat for ``axis=None``); NumPy
    raises unless each ``kth`` lies on the axis (``kth = 5`` needs 6 elements, ``-5`` five)."""
    def model(a: Any, kth: Any, axis: Any = -1, *args: Any, **kw: Any) -> SymArray:
        x = _sym(a) if axis is not None else _sym(a).ravel()
        n = x.dims[_axis(0 if axis is None else axis, x.ndim)]
        for k in kth if isinstance(kth, list | tuple) else [kth]:
            d = as_dim(k)
            need = -d if d.constant is not None and d.constant < 0 else d + 1
            at_most(need, n, "index", f"partition at kth = {d} of an axis of size {n}: NumPy "
                    "raises", f"kth = {d} on an axis of size {n}")
        return SymArray(x.dims, "i" if arg else x.kind)
    return model


def triangle_part(square: bool) -> Callable[..., SymArray]:
    """``tril``/``triu`` keep a matrix's (or a stack's) shape; of a vector, NumPy's mask
    broadcasts it to a square (``square``), torch and JAX raise."""
    def model(x: Any, *args: Any, **kw: Any) -> SymArray:
        a = _sym(x)
        if a.ndim == 1 and square:
            return SymArray((a.dims[0], a.dims[0]), a.kind)
        if a.ndim < 2:
            tracer().report("op-shape", f"tril/triu of {shape_text(a)}: the library raises "
                            "(it needs at least 2 dimensions)")
        return SymArray(a.dims, a.kind, a.loose)
    return model


NUMPY.update({name: reduction(kind, name.startswith(("max", "min", "am", "arg")))
              for name, kind in _REDUCTIONS.items()}, **SHARED,
             tril=triangle_part(True), triu=triangle_part(True))
NUMPY.update({
    **dict.fromkeys(("transpose", "permute_dims"), permute),
    "swapaxes": swapaxes,
    "moveaxis": moveaxis,
    "expand_dims": expand_dims,
    "squeeze": squeeze,
    "dot": dot,
    "partition": partition(False),
    "argpartition": partition(True),
    "einsum": einsum,
    "nonzero": nonzero,
    "broadcast_to": lambda a, shape: broadcast_to(a, shape),
    "clip": clip,
    **dict.fromkeys(("round", "copy"), unary()),
    "isclose": lambda a, b, **k: elementwise([a, b], "b"),
    "allclose": lambda a, b, **k: SymArray((), "b"),
    "shape": lambda a: _sym(a).shape,
    "ndim": lambda a: _sym(a).ndim,
    "size": lambda a: _sym(a).numel(),
    **dict.fromkeys(("linalg.norm", "norm"), lambda a, ord=None, axis=None, keepdims=False:
                    reduce_(a, axis, keepdims, "f")),
    "split": np_split,
    "array_split": functools.partial(np_split, equal=False),
})

TORCH.update(SHARED)
TORCH.update({
    **dict.fromkeys(("tril", "triu"), triangle_part(False)),
    "mm": _matrices(2),
    "bmm": _matrices(3),
    "einsum": lambda eq, *ops: einsum(eq, *_varargs(ops)),  # operands, or one list of them
    "cat": concatenate,
    "linear": linear,
    **dict.fromkeys(("conv1d", "conv2d", "conv3d"), conv),
    **dict.fromkeys(("conv_transpose1d", "conv_transpose2d", "conv_transpose3d"), conv_transpose),
    **dict.fromkeys(("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
                     "binary_cross_entropy_with_logits", "kl_div"), same_shape_loss),
    **dict.fromkeys(("cross_entropy", "nll_loss"), cross_entropy),
    "layer_norm": layer_norm,
    **dict.fromkeys(("baddbmm", "addmm"), added_product),
    "cosine_similarity": lambda a, b, dim=1, eps=1e-8: reduce_(elementwise([a, b], "f"), dim),
    "embedding": embedding,
    **dict.fromkeys(("softmax", "log_softmax"), unary("f", axis=True)),
    "dropout": unary(),
    **dict.fromkeys(("rand_like", "randn_like"), _like(False)),
    **{name: reduction(_REDUCTIONS[name]) for name in ("sum", "mean", "amax", "amin", "argmax")},
    "logsumexp": reduction("f"),
    "transpose": swapaxes,
    "permute": lambda a, dims: permute(a, dims),
    "unsqueeze": lambda a, dim: expand_dims(a, dim),  # torch names its axis dim
    "squeeze": lambda a, dim=None: squeeze(a, dim),
    "flatten": lambda a, start_dim=0, end_dim=-1: _sym(a).flatten(start_dim, end_dim),
    "broadcast_to": lambda a, size: broadcast_to(a, size),
    "masked_fill": lambda a, mask, value: _sym(a).masked_fill(mask, value),
    "split": split,
    "chunk": chunk,
})

# torch's Tensor dunder methods reach __torch_function__ under their own names
for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__truediv__", "__rtruediv__", "__matmul__", "__getitem__"):
    TORCH.setdefault(_name, lambda a, *r, _n=_name: getattr(_sym(a), _n)(*r))

# both libraries' by name; a copy of CREATION_NUMPY would take what trace_numpy adds to it when
# this file runs again (verifying a folder that holds it): np.average, looked up in torch
_CREATION_SHARED: dict[str, Callable[..., Any]] = dict(
    zeros=created, ones=created, empty=created, arange=_arange, eye=eye,
    broadcast_shapes=broadcast_shapes,
    full=lambda *args, **kw: created(*args[:1], **kw))  # torch: size=
CREATION_NUMPY.update(_CREATION_SHARED)
CREATION_TORCH.update(_CREATION_SHARED, randn=created, rand=created,
                      randperm=lambda n, **kw: SymArray([as_dim(n)], "i"),
                      randint=lambda *args, **kw: created(kw["size"] if "size" in kw else args[-1],
                                                          dtype="int"))


def sym_leaves(x: Any) -> Iterator[SymArray | SymSize | SymRange]:
    """The symbolic arrays, sizes and ranges in ``x`` (nested in tuples, lists, dict values)."""
    if isinstance(x, SymArray | SymSize | SymRange):
        yield x
        return
    for v in x.values() if isinstance(x, dict) else x if isinstance(x, list | tuple) else ():
        yield from sym_leaves(v)


def sym_dims(x: Any) -> Iterator[Dim]:
    """The sizes of the symbolic leaves in ``x``: arrays' axes, sizes, ranges' bounds."""
    for leaf in sym_leaves(x):
        yield from leaf.dims if isinstance(leaf, SymArray) else (leaf.dim,) if \
            isinstance(leaf, SymSize) else (leaf.start, leaf.stop)


def has_sym(x: Any) -> bool:
    """Whether ``x`` holds a symbolic leaf, so a patched library function traces it."""
    return next(sym_leaves(x), None) is not None


def creation_wrapper(original: Callable[..., Any], symbolic: Callable[..., Any]
                     ) -> Callable[..., Any]:
    """``original`` that runs ``symbolic`` instead when called with symbolic values (creation
    functions, real tensors' sized methods, JAX functions jitted at import)."""
    draws = getattr(original, "__module__", None) == "torch" and original.__name__ in _DRAWS

    @functools.wraps(original)  # the library's name, doc and signature, and __wrapped__
    def wrapper(*args: Any, **kw: Any) -> Any:
        t = _TRACER.get()
        if t is not None and draws and t.random_refused:  # torch.randn(3) under torch.vmap
            _refused_draw(original.__name__, args, kw)
        if t is not None and has_sym((args, kw)):
            return symbolic(*args, **kw)
        return original(*args, **kw)

    return wrapper
