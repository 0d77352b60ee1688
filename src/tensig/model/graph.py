"""The model layer (OCANNL's ``%op``): lazy tensors whose shapes are inferred graph-wide.

A :class:`Tensor` is a leaf (data you feed), a parameter (shape inferred from its uses), a
constant, a buffer (unlearned state: running statistics, dropout's counter) or an operation.
Building a model records nodes and shape constraints; shapes are solved graph-wide before any
memory is allocated.  Every operation is an :class:`OpDef` (shape logic, forward and backward
code in :mod:`tensig.execution.ir`), a user-defined one like a built-in (OCANNL's
``%%extend_dsls``).  This module holds the einsum-family and indexing operations, parameters and
literals, and is the public face (``G.*``) of :mod:`tensig.model.tensor` and
:mod:`tensig.model.captures`.

>>> import numpy as np
>>> x = leaf("x", np.ones((4, 3), np.float32), batch=1)     # 4 | 3
>>> w = param("w", output=[2])                              # 3 -> 2, inferred from use
>>> y = (w @ x).relu()
>>> y.shape, w.shape
(Shape('4|2'), Shape('3->2'))
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensig.core.errors import ShapeError
from tensig.core.inference import ShapeGraph, count_text
from tensig.core.shapes import Shape
from tensig.core.solver import RowNode, SRow
from tensig.execution.eager import register_tensor_type
from tensig.execution.ir import OPERATORS, Code, Expr, Operator
from tensig.execution.ir import prim as _e
from tensig.model.captures import Captured, _capture, dim, variable
from tensig.model.tensor import (
    BINARY_OPS,
    UNARY_OPS,
    Graph,
    Model,
    OpDef,
    Tensor,
    _as_tensor,
    _fwd,
    _grads,
    _op,
    _valued,
    apply,
    binary,
    cast,
    constant,
    current_graph,
    grad_update,
    leaf,
    new_graph,
    scope,
)

__all__ = [
    "BINARY_OPS", "UNARY_OPS", "Captured", "Graph", "Index", "Model", "OpDef", "Shape", "Tensor",
    "apply", "axis", "batch", "batch_slice", "cast", "concat", "constant", "current_graph", "dim",
    "einmax1", "einsum", "einsum1", "embedding", "fma", "grad_update", "index", "leaf",
    "logical_and", "logical_or", "maximum", "minimum", "mod", "ndarray", "new_graph", "one_hot",
    "outer_sum", "param", "range_", "range_of_shape", "scope", "stack", "stop_gradient",
    "stretch", "tropical", "variable", "where"
]


def where(cond: Any, a: Any, b: Any, *, spec: str | None = None) -> Tensor:
    """Pointwise choice (a non-zero condition picks ``a``).  Under an einsum ``spec`` (OCANNL's
    ``where ~spec``) the choice is made in each cell of the product space, then add-reduced."""
    op = OpDef("where", spec or ".", _fwd("where", None if spec is None else "+"), _grads(
        None, lambda t, c, x, y: (_e("where", c.val, t.grad, 0.0), "+"),
        lambda t, c, x, y: (_e("where", c.val, 0.0, t.grad), "+")),
        op=None if spec is None else "einsum")
    return apply(op, cond, a, b)


def _combine(op: Operator, spec: str, n: int) -> str:
    """How ``n`` operands combine: a concatenation without ``^`` (a one-element block) is a copy
    of one operand, a product of several (all in its one phase, as the eager ``concat``)."""
    if op.combine == "concat" and "^" not in spec:
        return "id" if n == 1 else "mul"
    return op.combine


def _combined(op: Operator, spec: str, vals: list[Any]) -> Expr:
    """The operator's ``combine`` of the operands' values; ``mul``: a chain of binary products."""
    combine = _combine(op, spec, len(vals))
    if combine == "mul":
        return functools.reduce(lambda out, v: _e("mul", out, v), vals)
    return Expr(combine, tuple(vals))


def _spec_backward(op: Operator, spec: str, n: int) -> Callable[..., Code]:
    """The backward code of an operator application: under add-reduction the result's gradient times
    the derivative of ``combine``; max-reduction gates it in the product space to the first position
    achieving the max (torch's and JAX's rule for ties; exact when windows overlap)."""
    if op.accum == "max":
        def gate(t: Tensor, *args: Tensor) -> tuple[Any, str]:
            vals = [a.val for a in args]
            value = vals[0] if op.combine == "id" else _combined(op, spec, vals)
            return _e("where", _e("first_max", value, t.val), t.grad, 0.0), "+"

        return _grads(*[gate] * n)
    if op.accum != "+" or op.combine not in ("mul", "add", "id", "concat"):
        raise NotImplementedError(f"{op.name}: no derivative for combining by {op.combine} "
                                  f"and accumulating by {op.accum}")
    combine = _combine(op, spec, n)

    def rule(i: int) -> Callable[..., Any]:
        # a concatenation's phase is a product of the operands taking part in it: the same
        # rule, phase by phase (the lowering runs the phases)
        def grad(t: Tensor, *args: Tensor) -> tuple[Any, str]:
            vals = [a.val if j != i else t.grad for j, a in enumerate(args)]
            if combine in ("mul", "concat"):
                return _combined(op, spec, vals), "+"
            g: Any = t.grad  # a sum's: 1 at every cell of the others' own axes, so summed over them
            for j, a in enumerate(args):
                if j != i:  # where(y, g, g) is g, over y's axes too (NaN-safe, unlike 0*y + g)
                    g = _e("where", a.val, g, g)
            return g, "+"

        return grad

    return _grads(*[rule(i) for i in range(n)])


def _spec_op(name: str, spec: str, *tensors: Tensor, capture: Sequence[str] | None = None
             ) -> Any:
    """Operator ``name`` of :data:`~tensig.execution.ir.OPERATORS` applied to ``tensors``
    under ``spec`` (``capture``: also the named labels' sizes, :class:`Captured`)."""
    op = OPERATORS[name]
    lo, hi = op.operands
    if len(tensors) < lo or (hi is not None and len(tensors) > hi):
        raise TypeError(f"{name} takes {count_text(lo, hi)} tensor(s), got {len(tensors)}")

    def forward(t: Tensor, *args: Tensor) -> Code:
        return Code().assign(t.val, _combined(op, spec, [a.val for a in args]),
                             accum=op.accum, init=True, logic=t.projections)

    opdef = OpDef(name, spec, forward, _spec_backward(op, spec, len(tensors)), op=name)
    return _capture(apply(opdef, *tensors), capture)


def _operation(name: str) -> Callable[..., Any]:
    """The graph function of operator ``name`` (``G.einsum`` ...), documented from its entry."""
    op = OPERATORS[name]

    def operation(spec: str, *tensors: Tensor, capture: Sequence[str] | None = None) -> Any:
        return _spec_op(name, spec, *tensors, capture=capture)

    operation.__name__ = operation.__qualname__ = name
    operation.__doc__ = (f"{op.doc} (OCANNL ``{op.ocannl}``) as a graph node: "
                         f"{count_text(*op.operands)} tensor(s) (arrays run at once, through a "
                         f"throwaway graph; :func:`tensig.{op.name}` is the eager function).  "
                         f"``capture=[names]`` returns ``(tensor, {{name: Captured}})``: the "
                         f"labels' solved sizes (OCANNL's ``capture_dims``).")
    return operation


einsum = _operation("einsum")
einsum1 = _operation("einsum1")
outer_sum = _operation("outer_sum")
tropical = _operation("tropical")
einmax1 = _operation("einmax1")
concat = _operation("concat")


def stack(kind: str, tensors: Sequence[Tensor]) -> Tensor:
    """Stack along a new leading axis of ``kind`` ("batch", "output" or "input"): OCANNL's
    block tensors (each operand gets a size-1 axis, then they are concatenated)."""
    if not tensors:
        raise ValueError("stack needs at least one tensor")
    row = {"batch": "{}...|...->...", "output": "...|...->{}...", "input": "...|{}...->..."}
    if kind not in row:
        raise ValueError(f"stack: kind is 'batch', 'output' or 'input', not {kind!r}")
    pattern = row[kind]
    parts = [einsum1(f"{pattern.format('')} => {pattern.format('0, ')}", t) for t in tensors]
    names = [f"bt{i}" for i in range(len(parts))]
    spec = "; ".join(pattern.format(f"{n}, ") for n in names) + " => " + \
        pattern.format("^".join(names) + ", ")
    return concat(spec, *parts)


def stretch(x: Any) -> Tensor:
    """``x`` broadcast to whatever shape its use needs (OCANNL's ``stretch``): the result
    takes its shape from its consumer, as a parameter does."""
    g = x.graph if isinstance(x, Tensor) else current_graph()
    src = _as_tensor(x, g)
    node = g.shapes.parameter(f"stretch.{src.name}")
    node.rows["batch"] = SRow((), RowNode(f"stretch.{src.name}.batch", closes=True), ())
    op = OpDef("stretch", ".", _fwd("id"), _grads(lambda t, a: (t.grad, "+")))
    return Tensor("op", node, g, ["stretch"], op, (src,), src.differentiable)


def fma(a: Any, b: Any, c: Any) -> Tensor:
    """``a * b + c`` pointwise."""
    return apply(_op("fma", lambda t, x, y, z: (_e("mul", t.grad, y.val), "+"),
                     lambda t, x, y, z: (_e("mul", t.grad, x.val), "+"),
                     lambda t, x, y, z: (t.grad, "+")), a, b, c)


def stop_gradient(x: Tensor) -> Tensor:
    """The same values, with no gradient flowing back (OCANNL's ``stop_gradient``)."""
    return apply(OpDef("stop_gradient", ".", _fwd("id")), x)


def maximum(a: Any, b: Any) -> Tensor:
    """Pointwise maximum (OCANNL's ``@^``; also ``a.max(b)``); the gradient goes to the larger
    operand, the first on ties."""
    return binary("max", a, b)


def minimum(a: Any, b: Any) -> Tensor:
    """Pointwise minimum (OCANNL's ``@-``; also ``a.min(b)``)."""
    return binary("min", a, b)


def mod(a: Any, b: Any) -> Tensor:
    """Pointwise remainder with the sign of ``a`` (C's and OCANNL's ``mod``, ``fmod``: NumPy's
    and Python's ``%`` take the sign of ``b``); also ``a % b`` and ``a.mod(b)``."""
    return binary("mod", a, b)


def logical_and(a: Any, b: Any) -> Tensor:
    """1 where both operands are non-zero, else 0, in their dtype (also ``a & b``)."""
    return binary("and", a, b)


def logical_or(a: Any, b: Any) -> Tensor:
    """1 where either operand is non-zero, else 0, in their dtype (also ``a | b``)."""
    return binary("or", a, b)


#: ``ids`` (batch axes only) gather the rows of a table ``d -> V``: the result's output row
#: is the table's input row
_EMBEDDING = "..d..->v; ..b..|-> => ..b..|->..d.."


def embedding(table: Tensor, ids: Tensor) -> Tensor:
    """Rows of ``table`` picked by integer ``ids``: ``embedding(table, ids)[b, t | d]`` is
    ``table[ids[b, t]]`` (``table.T @ one_hot(ids, V)`` without the one-hots).

    ``table`` is ``d -> V``, laid out as PyTorch's ``(V, d)`` embedding weight, so ``table @ h``
    gives ``V`` logits (weight tying); ``ids`` has batch axes only.  The gradient is a
    scatter-add (repeated ids add up); an id outside ``0..V-1`` is an ``IndexError``.
    """
    if not isinstance(ids, Tensor) or not ids.integer:
        raise TypeError(f"embedding: ids must be integer data (a leaf of integer ids), not "
                        f"{getattr(ids, 'name', type(ids).__name__)}")

    return apply(_gather("embedding", _EMBEDDING, "take"), table, ids)


def _gather(name: str, spec: str, primitive: str) -> OpDef:
    """An operation that reads a table at integer positions with ``primitive`` (an
    ``ir.WHOLE`` gather); its gradient adds back into the cells read (``put_add``)."""
    backward = _grads(lambda t, tab, i: (_e("put_add", i.val, t.grad), "+"), None)
    return OpDef(name, spec, _fwd(primitive), backward, op="einsum", integers=True)


def one_hot(ids: Tensor, n: int | Tensor, *, ignore_index: int = -100) -> Tensor:
    """``ids`` (integer data, ``b | o``) as float32 one-hot rows ``b | o, n``.  ``n``: the number
    of classes, or a tensor ``b | o, n`` (logits) whose solved last axis gives it.  An id equal
    to ``ignore_index`` gives zeros, any other outside ``0..n-1`` an ``IndexError``."""
    if not isinstance(ids, Tensor) or not ids.integer:
        raise TypeError("one_hot: ids must be integer data (a leaf of integer ids)")
    if isinstance(n, Tensor):
        like, spec = n, "..b..|->..o..; ..b..|->..o.., n => ..b..|->..o.., n"
    else:
        like, spec = constant(np.zeros(int(n), np.float32), name="classes"), \
            "..b..|->..o..; n => ..b..|->..o.., n"

    def forward(t: Tensor, i: Tensor, c: Tensor) -> Code:
        return Code().assign(t.val, _e("one_hot", i.val, c.val, ignore_index),
                             logic=t.projections)

    return apply(OpDef("one_hot", spec, forward, None, op="einsum", integers=True), ids, like)


#: the leftmost batch axis ``n`` of the first operand, at the position a scalar gives
_BATCH_SLICE = "n, ..b..|..i..->..o..; |-> => ..b..|..i..->..o.."


class Index(Tensor):
    """A scalar integer leaf that picks a cell of a leftmost batch axis (OCANNL's static
    symbol); made by :func:`index`."""

    __slots__ = ("range",)
    range: int | None


def index(name: str, *, range: int | None = None, value: int = 0) -> Index:
    """A batch index for :func:`batch_slice`, ``value`` until ``model.set(i, k)``.  ``range``:
    the size of the axes it slices (another size is a :class:`ShapeError`)."""
    if range is not None and (isinstance(range, bool) or not isinstance(range, int)
                              or range < 1):
        raise ValueError(f"index {name!r}: range is a positive int, not {range!r}")
    g = current_graph()
    t = Index("leaf", g.shapes.tensor(name, Shape()), g, [name])
    t.range, t.integer = range, True
    t.value_init = np.array(value, np.int64)
    return t


def batch_slice(x: Tensor, i: Tensor) -> Tensor:
    """``x`` at cell ``i`` of its leftmost batch axis (OCANNL's ``x @| i``), that axis dropped.
    ``i`` (:func:`index`) is set before each run, so one routine walks a dataset held whole.
    The slice is a view (OCANNL aliases it too); an ``i`` outside the axis is an ``IndexError``.

    >>> data = leaf("data", np.arange(12.).reshape(3, 2, 2), batch=2)   # 3, 2 | 2
    >>> i = index("i", range=3)
    >>> row = batch_slice(data, i)
    >>> row.shape
    Shape('2|2')
    >>> m = Model(row); m.set(i, 2); m.run().tolist()
    [[8.0, 9.0], [10.0, 11.0]]
    """
    if not isinstance(x, Tensor):
        raise TypeError(f"batch_slice slices a graph tensor, not {type(x).__name__}")
    if not isinstance(i, Tensor) or not i.integer:
        raise TypeError(f"batch_slice: the index must be integer data (G.index(...)), not "
                        f"{getattr(i, 'name', type(i).__name__)}")

    t = apply(_gather("batch_slice", _BATCH_SLICE, "slice_at"), x, i, name="@|")
    t.integer = x.integer  # a slice of ids is ids
    if isinstance(i, Index) and i.range is not None:
        shapes = t.graph.shapes
        n = shapes.label(t.node, "n")
        size = ShapeGraph.value(n)
        if size is not None and size != i.range:
            raise ShapeError(f"batch_slice: {i.name!r} ranges over {i.range} cells, the leftmost "
                             f"batch axis of {x.name!r} has {size}", label=i.name,
                             sizes=(i.range, size))
        shapes.set_dim(n, i.range)  # or sizes that axis, when nothing else does yet
    return t


class batch(list):
    """A batch axis in an :func:`ndarray` literal (OCANNL's ``[| ... |]``)."""


@dataclass(frozen=True)
class axis:
    """An axis of an :func:`ndarray` literal with a basis label: ``axis([1., 2., 3.], "rgb")``
    (OCANNL's ``([1.; 2.; 3.] : rgb)``)."""

    items: Any
    basis: str


#: the axis a level of a literal is (a batch is a list too: it comes first)
_LEVELS = ((batch, "batch"), (list, "output"), (tuple, "input"))


def ndarray(literal: Any, *, name: str = "ndarray") -> Tensor:
    """A constant from a nested literal: a ``list`` is an output axis, a ``tuple`` an input
    axis, a :class:`batch` a batch axis (nested in that order); :class:`axis` adds a label.

    >>> ndarray([(1, 2, 3), (4, 5, 6)]).shape      # converts 3-vectors to 2-vectors
    Shape('3->2')
    >>> ndarray(axis([1., 2., 3.], "rgb")).shape
    Shape('rgb=3')
    """
    kinds: list[str] = []
    bases: list[str | None] = []
    node: Any = literal
    while True:
        basis, node = (node.basis, node.items) if isinstance(node, axis) else (None, node)
        kind = next((k for t, k in _LEVELS if isinstance(node, t)), None)
        if kind is None:
            break
        if not node:
            raise ValueError(f"{name}: an empty {kind} axis in a literal")
        kinds.append(kind)
        bases.append(basis)
        node = node[0]
    if kinds != sorted(kinds, key=["batch", "output", "input"].index):
        raise ValueError(f"{name}: axes nest as batch, then output (list), then input (tuple); "
                         f"got {' > '.join(kinds)}")

    if isinstance(node, Tensor):  # the first leaf
        return _block(literal, name)

    def plain(x: Any) -> Any:
        if isinstance(x, axis):
            x = x.items
        if isinstance(x, list | tuple):
            return [plain(v) for v in x]
        if isinstance(x, Tensor):
            raise TypeError(f"{name}: a literal mixes tensors and numbers; wrap numbers with "
                            "constant()")
        return float(x)

    try:
        arr = np.array(plain(literal), dtype=np.float32)
    except ValueError:
        arr = None
    if arr is None or arr.ndim != len(kinds):
        raise ValueError(f"{name}: a ragged literal: every axis needs equal lengths")
    rows: dict[str, list[Any]] = {"batch": [], "input": [], "output": []}
    for n, kind, basis in zip(arr.shape, kinds, bases, strict=True):
        rows[kind].append((basis, n) if basis else n)
    return _valued("const", name, Shape(**rows), arr)


def _block(literal: Any, name: str) -> Tensor:
    """A literal of tensors stacks them (OCANNL's block tensors), at any depth."""
    kind = next((k for t, k in _LEVELS if isinstance(literal, t)), None)
    if kind is None:
        raise TypeError(f"{name}: a literal mixes tensors and {type(literal).__name__} items; "
                        f"wrap numbers with constant()")
    items = [it if isinstance(it, Tensor) else _block(it, name) for it in literal]
    return stack(kind, items)


def range_(n: int, *, name: str = "range") -> Tensor:
    """``0, 1, ..., n-1`` as one output axis (OCANNL's ``range``)."""
    return constant(np.arange(n, dtype=np.float32), name=name)


def range_of_shape(*sizes: int, name: str = "range_of_shape") -> Tensor:
    """Row-major offsets ``0 .. prod(sizes)-1`` laid out in ``sizes`` (output axes)."""
    return constant(np.arange(math.prod(sizes), dtype=np.float32).reshape(sizes), name=name)


def param(name: str, *, output: Sequence[int] | None = None,
          input: Sequence[int] | None = None,
          init: str | Callable[..., Any] = "uniform", seed: int = 0) -> Tensor:
    """A learned tensor: no batch axes, sizes inferred from its uses unless given.  ``init``:
    ``"uniform"`` (in [-0.25, 0.25), OCANNL's default), ``"kaiming"`` / ``"xavier"`` (normal,
    fans from the inferred shape) or ``(shape, rng) -> array``; the generator is keyed by
    ``(seed, name)``, so values do not depend on creation order."""
    g = current_graph()
    t = Tensor("param", g.shapes.parameter(name, output=output, input=input), g, [name],
               differentiable=True)
    t.init = _initializer(init, seed, t)
    return t


def _initializer(init: str | Callable[..., Any], seed: int, t: Tensor
                 ) -> Callable[[tuple[int, ...]], Any]:
    key = [seed, zlib.crc32(t.name.encode())]

    def rng() -> np.random.Generator:
        return np.random.Generator(np.random.Philox(key=key))

    if callable(init):
        return lambda shape: np.asarray(init(shape, rng()), np.float32)

    def make(shape: tuple[int, ...]) -> Any:
        s = t.shape
        fan_in = max(1, math.prod(int(d) for d in s.input))
        fan_out = max(1, math.prod(int(d) for d in s.output))
        r = rng()
        if init == "uniform":
            return (r.random(shape, np.float32) - 0.5) * 0.5
        if init == "kaiming":
            return r.normal(0, math.sqrt(2.0 / fan_in), shape).astype(np.float32)
        if init == "xavier":
            return r.normal(0, math.sqrt(2.0 / (fan_in + fan_out)), shape).astype(np.float32)
        raise ValueError(f"unknown init {init!r}: 'uniform', 'kaiming', 'xavier' or a callable")

    return make


def _eager_call(op: str, spec: str, xs: Sequence[Any], options: dict[str, Any]) -> Tensor:
    """``tensig.einsum(spec, x, w)`` and its siblings on graph tensors: the graph operation."""
    given = [k for k, v in options.items()
             if k != "capture" and (v or k == "use_padding")]  # {} is no params
    if given:
        raise NotImplementedError(f"{op}() on graph tensors takes no {'/'.join(given)} yet: "
                                  "write them into the spec")
    return _spec_op(op, spec, *xs, capture=options.get("capture"))


register_tensor_type(Tensor, _eager_call)
