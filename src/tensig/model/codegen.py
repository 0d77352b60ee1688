"""Python source for compiled assignments: one generated function per assignment.

A training step runs dozens of small assignments, each array call a few microseconds; closures
nested per primitive, alignment and accumulation cost as much again.  So every decision is taken at
compile time and written out as straight-line Python (read, align, the expression inlined, reduce,
transpose, store): running a step is only its array calls.  :func:`assignment_step` writes the step
of an assignment whose axes are iterators and fixed indices; :func:`expression_function` the
expression alone (for :class:`~tensig.execution.lowering.Pointwise`).
"""

from __future__ import annotations

import functools
import itertools
import linecache
import math
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from tensig.backends import Backend, neutral_max, neutral_min
from tensig.core.errors import ShapeError
from tensig.execution import ir
from tensig.execution.ir import ACCUMULATORS, BINARY, TERNARY, UNARY, Assign, Buf, Expr
from tensig.execution.lowering import Letters

__all__ = ["Labels", "assignment_step", "expression_function"]

#: one label per axis in memory order: an iterator (a label repeated within one buffer is a
#: diagonal) or a fixed index
Labels = tuple[str | int, ...]

#: primitives written as Python operators (their definitions in :mod:`tensig.execution.ir`);
#: ``id`` is its operand: ``y =: id(x)`` stores x's array, safe as steps never write into arrays
_INLINE = {"add": "({} + {})", "sub": "({} - {})", "mul": "({} * {})", "div": "({} / {})",
           "neg": "(-{})", "id": "{}"}
_serial = itertools.count()


class _Source:
    """Lines of one generated function and the objects its names refer to."""

    def __init__(self, backend: Backend):
        self.lines: list[str] = []
        self.env: dict[str, Any] = {"xp": backend.xp, "backend": backend}
        self.backend = backend

    def bind(self, value: Any, prefix: str = "c") -> str:
        name = f"_{prefix}{len(self.env)}"
        self.env[name] = value
        return name

    def literal(self, value: Any) -> str:
        """A number as source (infinities and NaN by name)."""
        if isinstance(value, float) and not math.isfinite(value):
            return self.bind(value)
        return repr(value)

    def operand(self, value: float) -> str:
        """A number as an arithmetic operand: the adapter's ``scalar_operand``, made once (torch
        would otherwise wrap the number into a 0-d tensor on every call)."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            made = self.backend.scalar_operand(value)
            if made is not value:
                return self.bind(made, "k")
        return self.literal(value)

    def emit(self, line: str) -> None:
        self.lines.append(line)

    def fixed(self, x: str, labels: Labels) -> str:
        """``x`` read at the fixed positions of ``labels`` (their integers)."""
        if not any(isinstance(lab, int) for lab in labels):
            return x
        index = tuple(lab if isinstance(lab, int) else slice(None) for lab in labels)
        return f"{x}[{self.bind(index, 'index')}]"

    def transpose(self, x: str, perm: list[int]) -> str:
        return f"{x}.{self.backend.permute_method}({tuple(perm)!r})"

    def function(self, signature: str, name: str) -> Callable[..., Any]:
        text = f"def {name}({signature}):\n" + "".join(f"    {line}\n" for line in self.lines)
        filename = f"<tensig: {name} {next(_serial)}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)  # tracebacks
        namespace = dict(self.env)
        exec(compile(text, filename, "exec"), namespace)
        fn = namespace[name]
        fn.source = text
        return fn


def _expression(src: _Source, e: Any, names: dict[tuple[int, str], str]) -> str:
    """The source of an expression over operands already bound to ``names``."""
    if isinstance(e, Buf):
        return names[e.key]
    if not isinstance(e, Expr):
        return src.literal(e)
    if not _reads_buffers(e):
        return src.literal(_fold(e))
    cond = e.args[0]
    if e.op == "where" and not _reads_buffers(cond):  # a constant condition picks a branch
        return _expression(src, e.args[1] if _fold(cond) != 0 else e.args[2], names)
    if e.op == "where" and isinstance(cond, Expr) and \
            (cond.op in ir.COMPARISONS or cond.op == "first_max"):
        # a comparison's (a max gate's) mask selects directly (no 1.0/0.0 numbers and back)
        x, y, a, b = (_expression(src, c, names) for c in (*cond.args, *e.args[1:]))
        if cond.op == "first_max":
            mask = f"{src.bind(ir.first_mask, 'first_mask')}(xp, {x}, {y})"
            return f"{src.bind(ir.select, 'select')}(xp, {mask}, {a}, {b})"
        return f"{src.bind(ir.select_where, 'select')}(xp, {cond.op!r}, {x}, {y}, {a}, {b})"
    fused = _fused(src, e, names) if src.backend.fused_axpy else None
    if fused is not None:
        return fused
    # numbers enter as operands (torch's functions take tensors, not numbers); a power's
    # exponent stays a number: an integral one is computed by squaring
    args = [src.operand(_fold(x)) if not _reads_buffers(x) and not (e.op == "pow" and i == 1)
            else _expression(src, x, names) for i, x in enumerate(e.args)]
    if e.op in _INLINE:
        return _INLINE[e.op].format(*args)
    fn = src.bind(_definition(e.op), e.op)
    return f"{fn}(xp, {', '.join(args)})"


def _scaled(e: Any) -> tuple[float, Any] | None:
    """``mul(number, x)`` (either order) as ``(number, x)``."""
    if isinstance(e, Expr) and e.op == "mul" and len(e.args) == 2:
        for c, x in (e.args, e.args[::-1]):
            if not _reads_buffers(c) and _reads_buffers(x):
                return _fold(c), x
    return None


def _fused(src: _Source, e: Expr, names: dict[tuple[int, str], str]) -> str | None:
    """torch's fused kernels: ``x + c * y`` is one ``add`` (``alpha``), ``x + c * (p * q)`` one
    ``addcmul`` (an optimizer's moments in two kernels, not four; the last bit may differ);
    integer operands take the plain operators."""
    if e.op != "add" or len(e.args) != 2:
        return None
    for first, second in (e.args, e.args[::-1]):
        scaled = _scaled(second)
        if scaled is None or not _reads_buffers(first):
            continue
        c, y = scaled
        x = _expression(src, first, names)
        if isinstance(y, Expr) and y.op == "mul" and len(y.args) == 2 and \
                all(map(_reads_buffers, y.args)):
            p, q = (_expression(src, t, names) for t in y.args)
            return f"{src.bind(_addcmul, 'addcmul')}(xp, {x}, {p}, {q}, {src.literal(c)})"
        return f"{src.bind(_axpy, 'axpy')}(xp, {x}, {_expression(src, y, names)}, " \
               f"{src.literal(c)})"
    return None


def _axpy(xp: Any, x: Any, y: Any, c: float) -> Any:
    if getattr(y, "is_floating_point", lambda: False)() and hasattr(x, "shape"):
        return xp.add(x, y, alpha=c)
    return x + c * y


def _addcmul(xp: Any, x: Any, p: Any, q: Any, c: float) -> Any:
    if all(getattr(t, "is_floating_point", lambda: False)() for t in (x, p, q)):
        return xp.addcmul(x, p, q, value=c)
    return x + c * (p * q)


def _definition(op: str) -> Callable[..., Any]:
    """A primitive's definition (:mod:`tensig.execution.ir`) by name."""
    return UNARY.get(op) or BINARY.get(op) or TERNARY[op]


def _reads_buffers(e: Any) -> bool:
    return isinstance(e, Buf) or (isinstance(e, Expr) and any(map(_reads_buffers, e.args)))


def _fold(e: Any) -> float:
    """A subexpression of numbers only, evaluated once in double precision."""
    if not isinstance(e, Expr):
        return e
    fn = _definition(e.op)
    with np.errstate(all="ignore"):
        return float(fn(np, *(np.float64(_fold(a)) for a in e.args)))


def expression_function(e: Any, slots: dict[tuple[int, str], int], backend: Backend
                        ) -> Callable[[list[Any]], Any]:
    """``args -> value`` of an expression whose buffers are ``args[slots[key]]``."""
    src = _Source(backend)
    src.emit(f"return {_expression(src, e, {k: f'args[{i}]' for k, i in slots.items()})}")
    return src.function("args", "expression")


def _align(src: _Source, x: str, labels: Labels, product: list[str],
           dims: list[int]) -> tuple[str, int]:
    """Source lining ``x`` (sizes ``dims``) up with the product space, and the result's rank."""
    if not labels and product:  # 0-d: torch's give way in promotion (float16 * 0-d float32 is
        # float16); a size-1 array promotes as NumPy and the eager API do
        return f"{x}.reshape({(1,) * len(product)!r})", len(product)
    # already lined up with the product space's trailing axes (a size-1 axis at a fixed
    # index 0, standing where a product axis it lacks is, broadcasts)
    offset = len(product) - len(labels)
    if offset >= 0 and all(lab == at or (lab == 0 and n == 1 and at not in labels)
                           for lab, n, at in zip(labels, dims, product[offset:], strict=True)):
        return x, len(labels)
    x = src.fixed(x, labels)
    names = [lab for lab in labels if isinstance(lab, str)]
    uniq = list(dict.fromkeys(names))
    if len(uniq) != len(names):
        letters = Letters()
        diag = "".join(letters[n] for n in names) + "->" + "".join(letters[n] for n in uniq)
        x = f"backend.einsum({diag!r}, {x})"
    order = sorted(range(len(uniq)), key=lambda i: product.index(uniq[i]))
    ranked = [uniq[i] for i in order]
    if order != sorted(order):
        x = src.transpose(x, order)
    if ranked == product[len(product) - len(ranked):] and not any(isinstance(lab, int)
                                                                   for lab in labels):
        return x, len(ranked)  # missing leading axes broadcast
    # the remaining axes are ``ranked``, in product order: size-1 axes go in between
    size_of = {lab: n for lab, n in zip(labels, dims, strict=True) if isinstance(lab, str)}
    shape = tuple(size_of.get(lab, 1) for lab in product)
    return f"{x}.reshape({shape!r})", len(product)


def assignment_step(a: Assign, bufs: list[Buf], lhs_labels: Labels, arg_labels: list[Labels],
                    backend: Backend) -> Callable[[Any], None]:
    """The generated ``step(store)`` of a generic assignment."""
    tensors = [a.lhs.tensor, *(b.tensor for b in bufs)]
    # each iterator's size, in the product space's order: the lhs's labels, then the others
    sizes = {lab: int(d) for t, labels in zip(tensors, (lhs_labels, *arg_labels), strict=True)
             for lab, d in zip(labels, t.shape.dims, strict=True) if isinstance(lab, str)}
    product = list(sizes)
    if "first_max" in ir.ops_of(a.expr):  # its cells ranked alike for every operand's gradient
        product = list(dict.fromkeys([lab for labels in arg_labels for lab in labels
                                      if isinstance(lab, str)] + product))
    lhs_order = [lab for lab in lhs_labels if isinstance(lab, str)]
    reduced = [lab for lab in product if lab not in lhs_order]
    if reduced and a.accum is None:
        raise ShapeError(f"{a!r} reduces over {', '.join(reduced)} but has no accumulation "
                         "operator (write accum='+', 'max', ...)")
    diagonal = None
    if len(set(lhs_order)) != len(lhs_order):  # ``i => ii``: computed on ``i``, then placed
        if len(lhs_order) != len(lhs_labels):
            raise ShapeError(f"{a!r}: a diagonal of the left-hand side with fixed indices is "
                             "not supported")
        diagonal = _diagonal(lhs_order, sizes)
        lhs_order = list(dict.fromkeys(lhs_order))
    src = _Source(backend)
    keys = [b.key for b in bufs]
    src.emit("A = store.arrays")
    if keys:
        src.emit("try:")
        for i, k in enumerate(keys):
            src.emit(f"    x{i} = A[{k!r}]")
        src.emit("except KeyError:")
        src.emit(f"    [store.read(b) for b in {src.bind(bufs, 'bufs')}]  # the message")
        src.emit("    raise")
    # a product added into an array (a gradient several products add into) as one call
    onto = a.accum == "+" and not a.init and diagonal is None and \
        len(lhs_order) == len(lhs_labels)
    # a label of the left-hand side that no operand has: the generic path broadcasts it
    replicated = any(not any(lab in lb for lb in arg_labels) for lab in lhs_order)
    summed = None if replicated else \
        _contraction(src, a, bufs, keys, arg_labels, lhs_order, sizes, backend, onto)
    if summed is None:
        _pointwise(src, a, bufs, arg_labels, product, lhs_order, reduced, sizes, replicated)
    if diagonal is not None:
        src.emit(f"v = {src.bind(diagonal, 'diagonal')}(backend, v, {_neutral(src, a.accum)})")
    _store(src, a, lhs_labels, sizes, bool(summed))
    return src.function("store", re.sub(r"\W", "_", f"step_{a.lhs.tensor.name}_{a.lhs.field}"))


def _diagonal(labels: list[str], sizes: dict[str, int]
              ) -> Callable[[Backend, Any, Any], Any]:
    """``v`` (on the distinct ``labels``) placed on the diagonal of an array on ``labels``,
    ``fill`` elsewhere: one einsum with an identity per repeated label (``a, ab -> ab``)."""
    letters = Letters()
    out = "".join(letters[i] for i in range(len(labels)))
    first: dict[str, str] = {}
    for lab, letter in zip(labels, out, strict=True):
        first.setdefault(lab, letter)
    eyes = [(first[lab] + letter, sizes[lab]) for lab, letter in zip(labels, out, strict=True)
            if first[lab] != letter]  # a repeated label: one more identity
    spec = ",".join(["".join(first.values()), *(s for s, _ in eyes)]) + "->" + out

    def place(backend: Backend, v: Any, fill: Any) -> Any:
        eye = [backend.eye(n, v) for _, n in eyes]
        placed = backend.einsum(spec, v, *eye)
        if fill == 0:
            return placed
        on = backend.einsum(spec, backend.full(tuple(v.shape), 1, v), *eye) != 0
        return backend.where(on, placed, fill)

    return place


def _contraction(src: _Source, a: Assign, bufs: list[Buf], keys: list[tuple[int, str]],
                 arg_labels: list[Labels], lhs_order: list[str], sizes: dict[str, int],
                 backend: Backend, onto: bool) -> bool | None:
    """A sum of products (or a bare sum) as one planned contraction ``v = plan(x0, x1)``; with
    ``onto`` the backend's ``summed_contraction`` adds it into the array there (then True).
    None: not a contraction."""
    e = a.expr
    bare_product = e.op == "mul" and len(e.args) == 2 and all(isinstance(x, Buf) for x in e.args)
    bare_id = e.op == "id" and len(e.args) == 1 and isinstance(e.args[0], Buf)
    if not (bare_product or bare_id) or a.accum not in ("+", None):
        return None
    summed_labels = {lab for lb in arg_labels for lab in lb if isinstance(lab, str)} - set(
        lhs_order)
    if not summed_labels:
        return None  # nothing summed: an elementwise product is cheaper than a matmul
    if any(sizes[lab] == 0 for lab in summed_labels):
        return None  # a sum of no terms: 0 from the empty product space, even beside inf
    letters = Letters()
    idx = [keys.index(x.key) for x in e.args]
    subs = ",".join("".join(letters[x] for x in arg_labels[i] if isinstance(x, str))
                    for i in idx)
    spec = f"{subs}->{''.join(letters[x] for x in lhs_order)}"
    shapes = [tuple(sizes[x] for x in arg_labels[i] if isinstance(x, str)) for i in idx]
    plan = src.bind(backend.contraction(spec, shapes), "contract")
    operands = ", ".join(src.fixed(f"x{i}", arg_labels[i]) for i in idx)
    summed = backend.summed_contraction(spec, shapes) if onto and bare_product and \
        backend.summed_contraction is not None else None
    if summed is None:
        src.emit(f"v = {plan}({operands})")
        return False
    src.emit(f"old = A.get({a.lhs.key!r})")
    src.emit(f"v = {plan}({operands}) if old is None else "
             f"{src.bind(summed, 'summed')}(old, {operands})")
    return True


def _pointwise(src: _Source, a: Assign, bufs: list[Buf], arg_labels: list[Labels],
               product: list[str], lhs_order: list[str], reduced: list[str],
               sizes: dict[str, int], replicated: bool) -> None:
    """Align the operands with the product space, evaluate, reduce, order as the lhs."""
    names: dict[tuple[int, str], str] = {}
    ranks = []
    for i, (b, lb) in enumerate(zip(bufs, arg_labels, strict=True)):
        expr, rank = _align(src, f"x{i}", lb, product, list(b.tensor.shape.int_dims))
        if expr != f"x{i}":
            src.emit(f"x{i} = {expr}")
        names[b.key] = f"x{i}"
        ranks.append(rank)
    expr = _expression(src, a.expr, names)
    src.emit(f"v = {expr}")
    full = tuple(sizes[lab] for lab in product)
    used = [r for i, r in enumerate(ranks) if re.search(rf"\bx{i}\b", expr)]
    if not used:  # a number (its operands folded away): an array of the product space
        like = "x0" if bufs else "None"
        src.emit(f"v = {src.bind(_number_array, 'number')}(xp, v, {full!r}, {like}, "
                 "store.device)")
    elif replicated or max(used) != len(full):  # a rank-deficient value spans the space
        src.emit(f"v = backend.broadcast_to(v, {full!r})")
    if reduced:
        axes = tuple(product.index(lab) for lab in reduced)
        how = ACCUMULATORS[a.accum or "+"][2]
        if how == "sum":  # in v's dtype, as einsum sums (an int8 ``sum`` widens to int64)
            src.emit(f"v = v.sum({axes!r}, dtype=v.dtype)")
        else:
            src.emit(f"v = {src.bind(_reduce, 'reduce')}(v, {how!r}, {axes!r}, backend)")
    kept = [lab for lab in product if lab not in reduced]
    perm = [kept.index(lab) for lab in lhs_order]
    if perm != sorted(perm):
        src.emit(f"v = {src.transpose('v', perm)}")


def _number_array(xp: Any, v: float, shape: tuple[int, ...], like: Any,
                  device: Any = None) -> Any:
    """A number as an array of ``shape``: a floating operand's dtype and device, or float32."""
    dtype = getattr(like, "dtype", None)
    floating = dtype is not None and (getattr(dtype, "is_floating_point", False) or
                                      getattr(dtype, "kind", "") == "f")
    dtype = dtype if floating else xp.float32
    device = like.device if hasattr(like, "device") else device
    return xp.full(shape, v, dtype=dtype, **({} if device is None else {"device": device}))


def _reduce(v: Any, how: str, axes: tuple[int, ...], backend: Backend) -> Any:
    if how == "max":
        return backend.amax(v, axes)
    if how == "min":
        return -backend.amax(-v, axes)
    return functools.reduce(lambda out, ax: out.prod(ax), sorted(axes, reverse=True), v)


def _neutral(src: _Source, accum: str | None) -> str:
    """The accumulator's neutral element as source (``=``: 0)."""
    neutral = ACCUMULATORS[accum][1] if accum is not None else 0.0
    # max's and min's neutral elements depend on the dtype (an integer's minimum, maximum)
    dtyped = {"max": neutral_max, "min": neutral_min}.get(ACCUMULATORS[accum][0]) \
        if accum is not None else None
    return src.literal(neutral) if dtyped is None else f"{src.bind(dtyped, 'neutral')}(v.dtype)"


def _store(src: _Source, a: Assign, lhs_labels: Labels, sizes: dict[str, int],
           summed: bool = False) -> None:
    """Combine ``v`` with the left-hand side: place at fixed indices, accumulate (from the
    neutral element when initialising or nothing is there yet: ``0 - v``, ``1 / v``).
    ``summed``: ``v`` already holds the sum with ``old`` when there is one."""
    accum, key, shape = a.accum, a.lhs.key, a.lhs.tensor.shape.int_dims
    first = _neutral(src, accum)
    if any(isinstance(x, int) for x in lhs_labels):  # the value fills the fixed positions
        expand = tuple(1 if isinstance(x, int) else sizes[x] for x in lhs_labels)
        pads = [(x, shape[i] - x - 1) if isinstance(x, int) else (0, 0)
                for i, x in enumerate(lhs_labels)]
        pad = f"backend.pad({{}}.reshape({expand!r}), {pads!r}, {{}})"
        # padded with the neutral element; with no pad (size-1 axes) v covers the whole lhs
        padded = any(p != (0, 0) for p in pads)
        src.emit("v = " + (pad.format("v", first) if padded else f"v.reshape({expand!r})"))
        if accum is None and padded:  # other cells keep their values
            src.emit(f"if {key!r} in A:")
            src.emit("    mask = " + pad.format("(v * 0 + 1)", "0") + " != 0")
            src.emit(f"    v = backend.where(mask, v, A[{key!r}])")
    if accum is not None:
        op = ACCUMULATORS[accum][0]
        combine = _INLINE.get(op) or f"{src.bind(BINARY[op], op)}(xp, {{}}, {{}})"
        start = combine.format(f"backend.full({shape!r}, {first}, v)", "v")
        if a.init:
            if accum == "-":
                src.emit("v = -v")
            elif accum in ("/", "**", "or", "and"):  # 1 / v, 0 || v: not v itself
                src.emit(f"v = {start}")
        elif summed:
            src.emit(f"v = {start} if old is None else v")
        else:
            src.emit(f"old = A.get({key!r})")
            src.emit(f"v = {start} if old is None else {combine.format('old', 'v')}")
    if not shape:  # NumPy's operations on 0-d arrays give scalars: a store holds arrays
        src.emit("v = backend.asarray(v)")
    src.emit(f"A[{key!r}] = v if v.shape == {shape!r} else backend.broadcast_to(v, {shape!r})")
