"""The assignment IR (OCANNL's ``%cd`` layer): ``lhs accum= op(rhs1, rhs2, ...)``.

An :class:`Assign` (``lhs accum= expr``, OCANNL's ``:`` as ``init``) carries its
:class:`Projections`: how the loops index each buffer (:mod:`tensig.core.projections`).
Buffers (:class:`Buf`) are a tensor's value or gradient, a gradient indexed as its tensor.

The builder (:meth:`Code.assign`) relates the left-hand side to the expression's buffers by a
logic (``"."`` pointwise, ``"@"`` compose, ``"T"`` transpose, or an einsum spec).  The
primitives' exact semantics live in :data:`UNARY`, :data:`BINARY`, :data:`TERNARY` and
:data:`WHOLE`, written once over array namespaces; NaN propagates through ``relu`` and passes
``relu_gate`` (as in PyTorch): a diverged value should stay visible.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import math
import operator
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensig.backends import backend_of_namespace, neutral_max, neutral_min, to_numpy
from tensig.backends.base import check_ids, id_message, outside_ids
from tensig.backends.kernels import one_hot_rows
from tensig.core.errors import ShapeError
from tensig.core.inference import (
    LOGICS,
    Inferred,
    count_text,
    infer,
    logic_projections,
    register_operand_counts,
)
from tensig.core.projections import AxisUse

__all__ = ["ACCUMULATORS", "BINARY", "COMPARISONS", "OPERATORS", "RECORDS", "TERNARY", "UNARY",
           "WHOLE", "Assign", "Buf", "Code", "Expr", "Operator", "Projections", "buffers_of",
           "ops_of", "prim"]


def _binary(op: str) -> Callable[[Buf, Any], Expr]:
    return lambda self, o: Expr(op, (self, o))


@dataclass(frozen=True, eq=False)
class Buf:
    """A tensor's value (``field="value"``), gradient (``"grad"``) or merge buffer
    (``"merge"``: where another device's copy arrives, as in ``p.grad =+ p.grad.merge``)."""

    tensor: Any
    field: str = "value"

    def __post_init__(self) -> None:
        if self.field not in ("value", "grad", "merge", "grad.merge"):
            raise ValueError(f"a buffer is a value, grad or merge buffer, not {self.field!r}")

    def __repr__(self) -> str:
        return f"{self.tensor.name}.{self.field}"

    @property
    def key(self) -> tuple[int, str]:
        """Where the buffer's array lives in a store: ``(tensor id, field)``."""
        return (self.tensor.id, self.field)

    @property
    def merge(self) -> Buf:
        """This buffer's merge buffer (``t.grad.merge``)."""
        if self.field in ("merge", "grad.merge"):
            raise ValueError("a merge buffer has no merge buffer")
        return Buf(self.tensor, "merge" if self.field == "value" else "grad.merge")

    # expressions: ``buf <op> other`` is the primitive applied to both
    __add__, __sub__, __mul__ = _binary("add"), _binary("sub"), _binary("mul")
    __truediv__, __pow__ = _binary("div"), _binary("pow")

    def __rmul__(self, o: Any) -> Expr:
        return Expr("mul", (o, self))

    def __neg__(self) -> Expr:
        return Expr("neg", (self,))

    def numpy(self) -> Any:
        """The realized array of this buffer."""
        return self.tensor.graph.store.read(self)


Operand = Any  # Buf | float | int


@dataclass(frozen=True)
class Expr:
    """A primitive applied to buffers or numbers."""

    op: str
    args: tuple[Operand, ...]

    def __post_init__(self) -> None:
        if not any(self.op in table for table in (UNARY, BINARY, TERNARY, STRUCTURAL, WHOLE)):
            raise ValueError(f"unknown primitive {self.op!r}; known: "
                             f"{', '.join(sorted({*UNARY, *BINARY, *TERNARY}))}")

    def __repr__(self) -> str:
        return f"{self.op}({', '.join(map(repr, self.args))})"


def prim(op: str, *args: Operand) -> Expr:
    """``prim("relu_gate", x.val, g)``: any primitive by name."""
    return Expr(op, args)


def ops_of(e: Any) -> set[str]:
    """The primitives an expression applies."""
    if not isinstance(e, Expr):
        return set()
    return {e.op}.union(*(ops_of(x) for x in e.args))


def buffers_of(e: Any) -> list[Buf]:
    """The buffers an expression reads, each once, in order of first appearance."""
    out: dict[tuple[int, str], Buf] = {}

    def walk(x: Any) -> None:
        if isinstance(x, Buf):
            out.setdefault(x.key, x)
        elif isinstance(x, Expr):
            for a in x.args:
                walk(a)

    walk(e)
    return list(out.values())


class Projections:
    """The projections of one operation over its tensors (``args``, then ``result``): from
    ``solve() -> Inferred`` (a graph's), else from ``logic`` and the shapes; resolved once per
    set of shapes."""

    __slots__ = ("_cached", "_solve", "args", "logic", "result")

    def __init__(self, logic: str, result: Any, args: tuple[Any, ...],
                 solve: Callable[[], Inferred] | None = None):
        self.logic, self.result, self.args, self._solve = logic, result, tuple(args), solve
        self._cached: tuple[tuple[Any, ...], Inferred, dict[int, tuple[AxisUse, ...]]] | None \
            = None

    def _resolve(self) -> tuple[Inferred, dict[int, tuple[AxisUse, ...]]]:
        shapes = (*(t.shape for t in self.args), self.result.shape)
        if self._cached is not None and self._cached[0] == shapes:
            return self._cached[1], self._cached[2]
        if self._solve is not None:
            answer = self._solve()
        elif self.logic.strip() in LOGICS:
            answer = logic_projections(self.logic.strip(), shapes[-1], shapes[:-1])
        else:
            answer = infer(self.logic, *shapes[:-1], result=shapes[-1])
        table: dict[int, tuple[AxisUse, ...]] = {}
        for t, uses in zip((*self.args, self.result), answer.layout, strict=True):
            if t.id in table and table[t.id] != uses:
                raise ShapeError(f"{t.name!r} appears twice in one operation with different "
                                 "projections; this is not supported in backward code")
            table[t.id] = uses
        self._cached = (shapes, answer, table)
        return answer, table

    def inferred(self) -> Inferred:
        """The solved answer: :attr:`Inferred.layout` lists the ``args``, then the result."""
        return self._resolve()[0]

    def uses(self, tensor: Any) -> tuple[AxisUse, ...]:
        """``tensor``'s axis uses (a ``KeyError`` when it is not part of the operation)."""
        return self._resolve()[1][tensor.id]

    def __repr__(self) -> str:
        return repr(self.logic)


@dataclass(frozen=True)
class Assign:
    """``lhs accum= op(args)`` under the projections ``proj``."""

    lhs: Buf
    expr: Expr
    accum: str | None = None  # "+", "*", "max", ...; None: plain assignment
    init: bool = False  # set lhs to the accumulator's neutral element first (OCANNL's ':')
    proj: Projections = field(kw_only=True)  # (made by Code.assign)

    def __post_init__(self) -> None:
        if self.accum is not None and self.accum not in ACCUMULATORS:
            raise ValueError(f"unknown accumulation {self.accum!r}; known: "
                             f"{', '.join(ACCUMULATORS)}")
        if self.logic == "@" and self.expr.op in ("div", "pow"):
            raise ValueError(f"logic '@' with {self.expr.op} reads like a matrix "
                             f"{'inverse' if self.expr.op == 'div' else 'power'} but computes "
                             "neither; use logic='.' or an explicit einsum spec")

    @property
    def logic(self) -> str:
        """The logic the projections come from (``"."``, ``"@"``, ``"T"`` or a spec)."""
        return self.proj.logic

    def __repr__(self) -> str:
        op = "=:" if self.accum is None else "=" + (":" if self.init else "") + self.accum
        return f"{self.lhs!r} {op} {self.expr!r} ~logic:{self.logic!r}"


@dataclass
class Code:
    """A sequence of assignments (a routine's body)."""

    items: list[Assign] = field(default_factory=list)

    def assign(self, lhs: Buf, expr: Expr | Buf | float, *, accum: str | None = None,
               init: bool = False, logic: str | Projections = ".") -> Code:
        """Append ``lhs accum= expr`` under ``logic`` (relating ``lhs`` to the expression's
        buffers in order), or an operation's :class:`Projections` as they are."""
        if not isinstance(expr, Expr):
            expr = Expr("id", (expr,))
        proj = logic if isinstance(logic, Projections) else Projections(
            logic, lhs.tensor, tuple(b.tensor for b in buffers_of(expr)))
        self.items.append(Assign(lhs, expr, accum, init, proj=proj))
        return self

    def extend(self, other: Code) -> Code:
        self.items.extend(other.items)
        return self

    def __iter__(self) -> Iterator[Assign]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __repr__(self) -> str:
        return "\n".join(map(repr, self.items)) or "(no code)"


# -- primitive semantics, over an array namespace ``xp`` (numpy, torch, jax.numpy) -------------
def _pow(xp: Any, a: Any, b: Any) -> Any:
    """``a ** b``; an integral ``b`` by squaring, then a reciprocal for a negative one: exponent
    zero gives 1 even for zero or NaN bases; odd powers keep the sign of zero and infinity."""
    if not (isinstance(b, int | float) and float(b).is_integer()):  # not inf, nor NaN
        return a ** b
    magnitude, base = int(abs(b)), a
    result = xp.ones_like(a)  # not a * 0 + 1: NaN and infinite bases too give 1 at exponent 0
    while magnitude:
        if magnitude % 2:
            result = result * base
        magnitude //= 2
        if magnitude:
            base = base * base
    return 1 / result if b < 0 else result


def _relu(xp: Any, v: Any) -> Any:
    """The backend's ``relu`` (NaN propagates, ``relu(-0.0)`` is ``-0.0``), on a number too."""
    if not hasattr(v, "shape"):
        return v if v != v or v >= 0 else 0.0
    return backend_of_namespace(xp).relu(v)


def _relu_gate(xp: Any, a: Any, g: Any) -> Any:
    """``g`` where ``a > 0``, else 0 -- PyTorch's ReLU backward (its kernel where the adapter
    has it, else :func:`select`), NaN ``a`` passing ``g``."""
    if not hasattr(a, "shape") and not hasattr(g, "shape"):
        return 0.0 if a <= 0 else g
    kernel = backend_of_namespace(xp).relu_backward(a, g)
    if kernel is not None:
        return kernel
    closed = a <= 0
    return select(xp, ~closed if hasattr(closed, "shape") else not closed, g, 0)


def select(xp: Any, keep: Any, a: Any, b: Any) -> Any:
    """``where(keep, a, b)`` for a boolean (or 0/1) ``keep``.  ``where`` with a data-dependent mask
    runs at branch-misprediction speed on CPUs (~6 ns an element, 20x a multiply), so ``b == 0``
    multiplies ``a`` by the mask instead: exact for a finite ``a`` (checked), but for the sign of a
    masked-off zero (different only as a divisor)."""
    if isinstance(b, int | float) and b == 0 and hasattr(a, "shape") and _finite(xp, a):
        return a * keep
    return xp.where(keep != 0, a, b)


def _finite(xp: Any, a: Any) -> bool:
    """Whether every element of ``a`` is finite, by its sum (an overflow only costs the slow
    path).  Never on an accelerator, where reading would wait (and ``where`` is fast)."""
    if not backend_of_namespace(xp).on_host(a):
        return False
    return math.isfinite(float(a.sum()))


#: the comparison primitives, each the Python operator it applies (``le`` is its own
#: primitive: ``not (b < a)`` is wrong on NaN); :data:`BINARY` gives them as 1.0 / 0.0
COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "lt": operator.lt, "le": operator.le, "eq": operator.eq, "ne": operator.ne,
}


@functools.lru_cache(maxsize=1024)
def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's broadcast of two shapes, remembered: a compiled step meets the same shapes every
    call (``numpy.broadcast_shapes``: 4.5 us, torch's 38 us, remembered 0.4 us)."""
    return tuple(np.broadcast_shapes(tuple(a), tuple(b)))


def select_where(xp: Any, op: str, x: Any, y: Any, a: Any, b: Any) -> Any:
    """``where(op(x, y), a, b)`` with the comparison's mask used directly.  On the CPU it is
    written in ``a``'s float dtype, which takes the product in place: on torch 4x faster than
    a boolean mask, on NumPy a quarter faster."""
    mask = None
    if hasattr(a, "shape") and hasattr(x, "shape") and hasattr(y, "shape"):
        shape = _broadcast(x.shape, y.shape)
        mask = backend_of_namespace(xp).float_mask(op, x, y, shape, a)
    if mask is None:
        return select(xp, COMPARISONS[op](x, y), a, b)
    if isinstance(b, int | float) and b == 0 and _broadcast(a.shape, shape) == shape and \
            _finite(xp, a):
        return xp.multiply(a, mask, out=mask)  # the mask is ours to overwrite
    return select(xp, mask, a, b)


def first_max(xp: Any, v: Any, m: Any) -> Any:
    """1 where ``v`` equals ``m`` at the first such cell (row-major) of each block that ``m``
    is broadcast over, else 0: a max reduction's gradient gate.  A tie's gradient goes to its
    first maximum only, as torch's and JAX's max pooling route it (gating every tied cell
    would multiply it)."""
    return _f(xp, first_mask(xp, v, m), v, m)


def first_mask(xp: Any, v: Any, m: Any) -> Any:
    """:func:`first_max` as a mask (booleans), which a gradient's ``where`` selects by."""
    hit = v == m
    if not hasattr(hit, "shape"):
        return hit
    shape = tuple(hit.shape)
    own = tuple(getattr(m, "shape", ()))
    own = (1,) * (len(shape) - len(own)) + own
    axes = tuple(k for k, (n, o) in enumerate(zip(shape, own, strict=True)) if o == 1 < n)
    if not axes:
        return hit
    # a block's cells ranked highest first: a hit's rank is the block's highest at its first
    # hit only (by maxima, not a loop over a tiny axis nor a copy; small integers: half the time)
    backend = backend_of_namespace(xp)
    block = [n if k in axes else 1 for k, n in enumerate(shape)]
    cells = math.prod(block)
    ranks = backend.astype(cells - backend.arange(cells, hit),
                           backend.as_dtype("uint8" if cells < 256 else "int32"))
    rank = hit * backend.reshape(ranks, block)
    top = backend.reshape(backend.amax(rank, axes),
                          [1 if k in axes else n for k, n in enumerate(shape)])
    return hit & (rank == top)


def _f(xp: Any, x: Any, *operands: Any) -> Any:
    """Booleans as 1 / 0 in the first non-bool operand's dtype (NumPy's ``bool * 1.0`` is
    float64, which would leak into a float32 graph), by a cast: no array made per call."""
    for o in operands:
        dtype = getattr(o, "dtype", None)
        if dtype is not None and not str(dtype).endswith("bool"):  # booleans become numbers
            return backend_of_namespace(xp).astype(x, dtype)
    return x * 1.0


def _compare(test: Callable[[Any, Any], Any], xp: Any, a: Any, b: Any) -> Any:
    return _f(xp, test(a, b), a, b)


UNARY: dict[str, Callable[[Any, Any], Any]] = {
    "id": lambda xp, v: v,
    "relu": _relu,
    "sat01": lambda xp, v: xp.clip(v, 0, 1),  # NaN stays NaN: neither bound applies
    "exp": lambda xp, v: xp.exp(v),
    "log": lambda xp, v: xp.log(v),
    "exp2": lambda xp, v: 2.0 ** v,
    "log2": lambda xp, v: xp.log(v) / xp.log(v * 0 + 2.0),
    "sin": lambda xp, v: xp.sin(v),
    "cos": lambda xp, v: xp.cos(v),
    "sqrt": lambda xp, v: xp.sqrt(v),
    "recip": lambda xp, v: 1.0 / v,
    # torch's own rsqrt: ``1.0 / tensor`` costs it 14 us more a call on the CPU
    "recip_sqrt": lambda xp, v: xp.rsqrt(v) if hasattr(xp, "rsqrt") else 1.0 / xp.sqrt(v),
    "neg": lambda xp, v: -v,
    "tanh": lambda xp, v: xp.tanh(v),
    "gelu": lambda xp, v: backend_of_namespace(xp).gelu(v),
    "not": lambda xp, v: _f(xp, v == 0, v),
}

BINARY: dict[str, Callable[[Any, Any, Any], Any]] = {
    "fst": lambda xp, a, b: a + b * 0,
    "snd": lambda xp, a, b: b + a * 0,
    "add": lambda xp, a, b: a + b,
    "sub": lambda xp, a, b: a - b,
    "mul": lambda xp, a, b: a * b,
    "div": lambda xp, a, b: a / b,
    "pow": _pow,
    "relu_gate": _relu_gate,
    "sat01_gate": lambda xp, a, b: xp.where((a > 0) & (a < 1), b, 0),
    "gelu_grad": lambda xp, a, g: backend_of_namespace(xp).gelu_backward(a, g),
    "max": lambda xp, a, b: xp.maximum(a, b),
    "min": lambda xp, a, b: xp.minimum(a, b),
    "mod": lambda xp, a, b: xp.fmod(a, b),
    **{name: functools.partial(_compare, test) for name, test in COMPARISONS.items()},
    "first_max": first_max,
    "or": lambda xp, a, b: _f(xp, (a != 0) | (b != 0), a, b),
    "and": lambda xp, a, b: _f(xp, (a != 0) & (b != 0), a, b),
}

TERNARY: dict[str, Callable[[Any, Any, Any, Any], Any]] = {
    "where": lambda xp, c, a, b: xp.where(c != 0, a, b),
    "fma": lambda xp, a, b, c: a * b + c,
}

@dataclass(frozen=True)
class Out:
    """What a :data:`WHOLE` primitive knows of its result: its shape, the training mode."""

    shape: tuple[int, ...]
    training: bool = True


#: while a function is traced (:mod:`tensig.model.staging`), the checks of values its steps
#: defer to when it runs: (any id bad, the first bad id, the error's message with ``{}`` for it)
_DEFERRED: contextvars.ContextVar[list[tuple[Any, Any, str]] | None] = contextvars.ContextVar(
    "tensig_deferred_checks", default=None)


@contextlib.contextmanager
def deferred_checks() -> Iterator[list[tuple[Any, Any, str]]]:
    """Collect the checks traced steps defer (:func:`_check_ids`): the traced function returns
    their flags, and its caller raises for a failed one."""
    checks: list[tuple[Any, Any, str]] = []
    token = _DEFERRED.set(checks)
    try:
        yield checks
    finally:
        _DEFERRED.reset(token)


def _check_ids(xp: Any, ids: Any, n: int, what: str, ignore: int | None = None) -> Any:
    """Integer ids index an axis of ``n`` cells: any other id is an error, not a wrap-around
    (NumPy reads ``-1`` as the last row).  On the host only (reading would wait for an
    accelerator); traced ids are checked when the function runs (:func:`deferred_checks`), a
    lazy library's when it computes (the ids returned, to be used in their place: Dask would
    wrap or drop a bad id)."""
    backend = backend_of_namespace(xp)
    if backend.lazy:
        return ids.map_blocks(check_ids, n, what, ignore)
    if not backend.traced(ids):
        if backend.on_host(ids):
            check_ids(ids, n, what, ignore)
        return ids
    pending = _DEFERRED.get()
    if pending is not None:
        flat = outside_ids(ids, n, ignore).reshape(-1)
        pending.append((flat.any(), ids.reshape(-1)[xp.argmax(flat)],
                        id_message(n, what, ignore)))
    return ids


def _take(xp: Any, out: Out, table: Any, ids: Any) -> Any:
    """Rows of ``table`` (``V`` rows of any cell shape) at ``ids``: ``ids.shape + cell``."""
    ids = _check_ids(xp, ids, table.shape[0], "embedding")
    return backend_of_namespace(xp).take_rows(table, ids, out.shape)


def _put_add(xp: Any, out: Out, ids: Any, g: Any) -> Any:
    """The gradient of :func:`_take`: zeros with each row of ``g`` added into row ``ids``.
    The gather checked the ids in the same routine, so ``add_rows`` does not again."""
    shape = out.shape
    rows = g.reshape(-1, math.prod(shape[1:]))
    added = backend_of_namespace(xp).add_rows(shape[0], ids.reshape(-1), rows, checked=True)
    return added.reshape(shape)


def _slice_at(xp: Any, out: Out, x: Any, i: Any) -> Any:
    """Cell ``i`` (a 0-d integer array) of ``x``'s leading axis (OCANNL's ``x @| i``): a view
    where the index is on the host (as OCANNL's slice aliases), else a gather."""
    backend = backend_of_namespace(xp)
    if not backend.on_host(i):
        i = _check_ids(xp, i, x.shape[0], "batch slice (@|)")  # traced: checked when it runs
        return backend.take_rows(x, i, out.shape)
    k, n = int(i), x.shape[0]
    if not 0 <= k < n:  # _check_ids's test, without its array operations on one number
        raise IndexError(id_message(n, "batch slice (@|)").format(k))
    return x[k]


def _one_hot(xp: Any, out: Out, ids: Any, like: Any, ignore: int) -> Any:
    """One-hot rows (all 0 where the id is ``ignore``) in ``like``'s float dtype."""
    n = out.shape[-1]
    ids = _check_ids(xp, ids, n, "one_hot", ignore)
    return one_hot_rows(backend_of_namespace(xp), ids, n, ignore, like.dtype)[0]


def _keep_mask(xp: Any, out: Out, like: Any, counter: Any, p: float, seed: int,
               key: int) -> Any:
    """Dropout's mask, ``0`` or ``1 / (1 - p)`` per cell, from a Philox generator keyed by
    ``(seed, key)`` at the counter's value: fresh each step, repeatable on every backend."""
    shape = out.shape
    backend = backend_of_namespace(xp)
    draw = functools.partial(_philox_keep, shape, p, seed, key)
    if not out.training or p == 0.0:
        keep = np.ones(shape, np.float32)
    elif backend.traced(counter):  # drawn on the host when the compiled function runs
        return backend.astype(backend.host_call(draw, shape, "float32", counter), like.dtype)
    else:
        keep = draw(counter)
    return backend.astype(backend.asarray(keep, like), like.dtype)


def _philox_keep(shape: tuple[int, ...], p: float, seed: int, key: int, counter: Any) -> Any:
    """:func:`_keep_mask`'s draw, in NumPy, at the counter's value."""
    step = int(to_numpy(counter).reshape(-1)[0])
    gen = np.random.Generator(np.random.Philox(key=[seed, key], counter=[step, 0, 0, 0]))
    return (gen.random(shape, np.float32) >= p) * np.float32(1.0 / (1.0 - p))


def _kernel(name: str) -> Callable[..., Any]:
    """The :data:`WHOLE` primitive that is the adapter's method ``name`` on the operands."""
    return lambda xp, out, *args: getattr(backend_of_namespace(xp), name)(*args)


def _normalize(xp: Any, out: Out, x: Any, start: int, n: int, eps: float) -> Any:
    """Layer normalisation (no affine step) over ``n`` axes from ``start``: a record."""
    return backend_of_namespace(xp).normalize(x, tuple(range(start, start + n)), eps)


def _normalize_grad(xp: Any, out: Out, x: Any, saved: Any, g: Any, start: int, n: int,
                    eps: float) -> Any:
    """The gradient of :func:`_normalize` at ``x`` from its record ``saved``."""
    y, mean, rstd = saved
    axes = tuple(range(start, start + n))
    return backend_of_namespace(xp).normalize_backward(x, y, mean, rstd, g, axes, eps)


def _attention(xp: Any, out: Out, q: Any, k: Any, v: Any, mask: Any, view: Any, causal: bool,
               scale: float) -> tuple[Any, Any]:
    """Attention and each query row's log-sum-exp: a record (``mask`` viewed as ``view``)."""
    m = None if mask is None else mask.reshape(view)
    return backend_of_namespace(xp).attention(q, k, v, m, causal, scale)


def _attention_grad(xp: Any, out: Out, g: Any, q: Any, k: Any, v: Any, saved: Any, mask: Any,
                    view: Any, causal: bool, scale: float) -> tuple[Any, Any, Any]:
    """The gradients of :func:`_attention` for ``q``, ``k``, ``v`` from its record ``saved``."""
    m, (o, lse) = None if mask is None else mask.reshape(view), saved
    return backend_of_namespace(xp).attention_backward(g, q, k, v, o, lse, m, causal, scale)


def _cross_entropy(xp: Any, out: Out, logits: Any, ids: Any, ignore: int) -> tuple[Any, ...]:
    """The mean cross-entropy against checked class ``ids``: a record (loss, log-probs, count)."""
    ids = _check_ids(xp, ids, logits.shape[-1], "cross_entropy", ignore)
    loss, *saved = backend_of_namespace(xp).cross_entropy(logits, ids, ignore)
    return (loss.reshape(1), *saved)


def _cross_entropy_grad(xp: Any, out: Out, g: Any, ids: Any, saved: Any, ignore: int) -> Any:
    """The gradient of :func:`_cross_entropy` for the logits, from its record ``saved``."""
    _, logp, count = saved
    grad = backend_of_namespace(xp).cross_entropy_backward(g, logp, ids, count, ignore)
    return grad.reshape(out.shape)


def _batch_norm(xp: Any, out: Out, x: Any, mean: Any, var: Any, scale: Any, shift: Any,
                kept: tuple[int, ...], momentum: float, eps: float) -> tuple[Any, ...]:
    """Batch normalisation of ``x`` per cell of its ``kept`` axes (the channels): a record."""
    return backend_of_namespace(xp).batch_norm_channels(
        x, kept, mean, var, scale, shift, out.training or mean is None, momentum, eps)


def _batch_norm_grad(xp: Any, out: Out, g: Any, x: Any, mean: Any, var: Any, scale: Any,
                     saved_mean: Any, saved_rstd: Any, kept: tuple[int, ...], eps: float,
                     wanted: tuple[bool, bool]) -> tuple[Any, ...]:
    """The gradients of :func:`_batch_norm` where ``wanted`` (input, affine) says: a record."""
    return backend_of_namespace(xp).batch_norm_channels_backward(
        g, x, kept, mean, var, scale, saved_mean, saved_rstd, out.training or mean is None,
        eps, wanted)


#: primitives on whole arrays, each one step of its own: ``fn(xp, out, *operands)`` with
#: ``out`` an :class:`Out`; their derivatives are declared with the operations using them
WHOLE: dict[str, Callable[..., Any]] = {
    "take": _take,
    "put_add": _put_add,
    "slice_at": _slice_at,
    "one_hot": _one_hot,
    "keep_mask": _keep_mask,
    "softmax": _kernel("softmax"),  # along one axis: (x, axis)
    "softmax_grad": _kernel("softmax_backward"),  # (its value y, the result's gradient, axis)
    "log_softmax": _kernel("log_softmax"),  # along one axis: (x, axis)
    "log_softmax_grad": _kernel("log_softmax_backward"),  # (its value y, the gradient, axis)
    "normalize": _normalize,
    "normalize_grad": _normalize_grad,
    "layer_norm": _kernel("layer_norm"),
    "layer_norm_grad": _kernel("layer_norm_backward"),
    "batch_norm": _batch_norm,
    "batch_norm_grad": _batch_norm_grad,
    "attention": _attention,
    "attention_grad": _attention_grad,
    "cross_entropy": _cross_entropy,
    "cross_entropy_grad": _cross_entropy_grad,
    # item i of a record (RECORDS): each result a code reads is stored by an assignment
    "part": lambda xp, out, record, i: record[i],
}

#: the :data:`WHOLE` primitives whose value is a record, a tuple of arrays by one kernel, kept
#: in a buffer of its own whose arrays ``part(record, i)`` reads
RECORDS = {"normalize", "layer_norm", "layer_norm_grad", "attention", "attention_grad",
           "batch_norm", "batch_norm_grad", "cross_entropy"}

#: casts to a float dtype (an integer leaf enters float arithmetic only through one)
CASTS = ("float32", "float64")


def _cast(xp: Any, v: Any, dtype: str) -> Any:
    return backend_of_namespace(xp).cast(v, dtype)


UNARY.update({f"to_{dtype}": functools.partial(_cast, dtype=dtype) for dtype in CASTS})

#: operations only the einsum lowering runs (concatenation: its operands one phase at a time)
STRUCTURAL = {"concat"}

#: accumulation operator -> (binary primitive, neutral element, reduction name)
ACCUMULATORS: dict[str, tuple[str, float, str]] = {
    "+": ("add", 0.0, "sum"),
    "-": ("sub", 0.0, "sum"),
    "*": ("mul", 1.0, "prod"),
    # dividing (raising) by each value in turn is dividing (raising) by their product
    "/": ("div", 1.0, "prod"),
    "**": ("pow", 1.0, "prod"),
    "max": ("max", float(neutral_max("float64")), "max"),  # a dtype's own: neutral_max(dtype)
    "min": ("min", float(neutral_min("float64")), "min"),
    "or": ("or", 0.0, "max"),
    "and": ("and", 1.0, "min"),
}


# -- the einsum-family operators, declared once ------------------------------------------------
@dataclass(frozen=True)
class Operator:
    """An einsum-family operator (OCANNL's): ``t =:accum combine(operands)`` under a spec's
    projections.  The one declaration the eager function and its docstring, the graph
    operation, the lowering and inference's operand-count check derive from."""

    name: str
    ocannl: str  # OCANNL's syntax for it
    #: the primitive that combines the operands' values in a cell of the product space
    #: (``"concat"``: each operand written in its own phase, as :data:`STRUCTURAL` says)
    combine: str
    accum: str  # the accumulation over the reduced axes: a key of ACCUMULATORS
    operands: tuple[int, int | None]  # the least and most operands (None: no most)
    doc: str  # what it does, one line
    example: str  # a doctest of the eager function on NumPy arrays

    @property
    def neutral(self) -> float:
        """What cells no operand reaches hold: the accumulation's neutral element."""
        return ACCUMULATORS[self.accum][1]

    def docstring(self, body: str | None = None) -> str:
        """The eager function's docstring: what it computes, the example, then ``body``."""
        head = textwrap.fill(f"{self.doc} (OCANNL ``{self.ocannl}``): "
                             f"{count_text(*self.operands)} operand(s); cells no operand "
                             f"reaches hold {self.neutral:g}.", 92)
        example = ">>> import numpy as np\n" + self.example
        return "\n\n".join([head, example, *([inspect.cleandoc(body)] if body else [])]) + "\n"


#: the einsum-family operators by name (the README's checklist says what adding one takes)
OPERATORS: dict[str, Operator] = {o.name: o for o in (
    Operator("einsum", "+*", "mul", "+", (2, None), "Multiply, add-reduce",
             ">>> einsum(\"ij;jk=>ik\", np.ones((2, 3)), np.ones((3, 4))).shape\n(2, 4)"),
    Operator("einsum1", "++", "id", "+", (1, 1),
             "Add-reduce, permute, diagonal, embed, slice, place",
             ">>> einsum1(\"i => i2\", np.array([1., 2.]))\n"
             "array([[0., 0., 1.],\n       [0., 0., 2.]])"),
    Operator("outer_sum", "+++", "add", "+", (2, 2), "Add, add-reduce",
             ">>> outer_sum(\"i; j => ij\", np.array([0., 10.]), np.array([1., 2., 3.]))\n"
             "array([[ 1.,  2.,  3.],\n       [11., 12., 13.]])"),
    Operator("tropical", "@^+", "add", "max", (2, 2),
             "Add, max-reduce: max pooling with a window, the tropical semiring",
             ">>> tropical(\"2*o<+w; w => o\", np.array([1., 5., 2., 3.]), np.zeros(2))\n"
             "array([5., 3.])"),
    Operator("einmax1", "@^^", "id", "max", (1, 1), "Max-reduce",
             ">>> einmax1(\"ij => i\", np.array([[1., 7.], [4., 2.]]))\narray([7., 4.])"),
    Operator("concat", "++^", "concat", "+", (1, None),
             "Concatenation, slicing and block construction",
             ">>> concat(\"a; b => a^b\", np.array([1., 2.]), np.array([3.]))\n"
             "array([1., 2., 3.])\n"
             ">>> concat(\"3^a => a\", np.arange(5.))\narray([3., 4.])"),
)}

register_operand_counts({o.name: o.operands for o in OPERATORS.values()})
