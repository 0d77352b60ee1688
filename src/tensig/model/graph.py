"""The model layer (OCANNL's ``%op``): lazy tensors whose shapes are inferred graph-wide.

A :class:`Tensor` is a node: a leaf (data you feed), a parameter (learned; shape inferred
from its uses), a constant, a buffer (state the model keeps from run to run without learning
it: batch norm's running statistics, dropout's counter; checkpoints save it), or an operation
on other tensors.  Building a model only records
nodes and shape constraints in the graph's :class:`~tensig.core.inference.ShapeGraph`; shapes are
solved for the whole graph at once, before any memory is allocated.

Every operation is an :class:`OpDef`: its shape logic (pointwise ``"."``, compose ``"@"``,
transpose ``"T"``, or an einsum spec), its forward code and its backward code, both written
in the assignment IR (:mod:`tensig.execution.ir`).  A user-defined operation is one more
``OpDef`` and works like a built-in (OCANNL's ``%%extend_dsls``).  Routines (forward, backprop,
zero grads, a full ``grad_update``) compile once (:mod:`tensig.model.compile`) and then run with
no shape work.

>>> import numpy as np
>>> x = leaf("x", np.ones((4, 3), np.float32), batch=1)     # 4 | 3
>>> w = param("w", output=[2])                              # 3 -> 2, inferred from use
>>> y = (w @ x).relu()
>>> y.shape, w.shape
(Shape('4|2'), Shape('3->2'))
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import math
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensig.backends import backend_for, backend_named, graph_backends, is_integer
from tensig.core.dims import Dim
from tensig.core.errors import ShapeError
from tensig.core.inference import ShapeGraph, TensorNode, count_text
from tensig.core.shapes import Shape
from tensig.core.solver import DimVar, RowNode, SRow
from tensig.execution.eager import RowArray, register_tensor_type
from tensig.execution.ir import CASTS, OPERATORS, Buf, Code, Expr, Operator, Projections
from tensig.execution.ir import prim as _e
from tensig.execution.price import itemsize
from tensig.model.compile import Routine, Store, compile_code

__all__ = [
    "Captured",
    "Graph",
    "Index",
    "OpDef",
    "Tensor",
    "axis",
    "batch",
    "batch_slice",
    "cast",
    "concat",
    "constant",
    "dim",
    "einmax1",
    "einsum",
    "einsum1",
    "embedding",
    "fma",
    "grad_update",
    "index",
    "leaf",
    "maximum",
    "minimum",
    "ndarray",
    "one_hot",
    "outer_sum",
    "param",
    "range_",
    "range_of_shape",
    "scope",
    "stack",
    "stop_gradient",
    "stretch",
    "tropical",
    "variable",
    "where",
]

_ids = itertools.count()


class Graph:
    """Every tensor built in one graph shares one shape inference and one array store."""

    def __init__(self, backend: str = "numpy", device: str | None = None) -> None:
        adapter = backend_named(backend) if backend in graph_backends() else None
        if adapter is None:
            raise ValueError(f"a graph's backend is {' or '.join(map(repr, graph_backends()))},"
                             f" not {backend!r}")
        device = adapter.device(device)
        self.adapter = adapter
        self.shapes = ShapeGraph()
        self.tensors: list[Tensor] = []
        self.store = Store(device)
        self.backend = backend
        self.device = device
        self._solved = 0
        self._shapes: dict[int, Shape] = {}  # solved shapes by tensor id, until the next solve
        #: what is checked after each solve (constraints on captured row variables)
        self.checks: list[Callable[[], None]] = []

    def solve(self) -> None:
        """Solve all shapes recorded so far (idempotent; new tensors re-solve)."""
        if self._solved != len(self.tensors):
            self._shapes.clear()  # new tensors can refine old shapes (a parameter's, say)
            self.shapes.solve()
            for check in self.checks:
                check()
            self._solved = len(self.tensors)

    def array(self, value: Any, device: Any = None) -> Any:
        """``value`` as an array of the graph's backend (its dtype kept), on ``device`` (the
        graph's by default).  Every array entering the store comes through here (initial
        values, fed data, optimizer state, checkpoints)."""
        return self.adapter.asarray(value, device=self.device if device is None else device)

    @property
    def training(self) -> bool:
        """Training mode (the default): dropout draws a fresh mask each step.  Out of it
        (:meth:`eval`) dropout passes its input through; compiled routines read the mode when
        they run, so one routine serves both."""
        return self.store.training

    def train(self, mode: bool = True) -> Graph:
        """Switch training mode on (or off with ``mode=False``); returns the graph."""
        self.store.training = bool(mode)
        return self

    def eval(self) -> Graph:
        """Switch training mode off (dropout off); :meth:`train` switches it back."""
        return self.train(False)

    @property
    def array_type(self) -> type:
        return self.adapter.array_type

    def memory(self, dtype: Any = "float32", sizes: dict[str, int] | None = None
               ) -> list[tuple[str, Shape, int]]:
        """Every tensor's name, shape and bytes at ``dtype`` (gradients counted separately),
        before anything is allocated; ``sizes`` substitutes symbolic dimensions."""
        self.solve()
        size = itemsize(dtype)
        out = []
        for t in self.tensors:
            n = 1
            for d in t.shape.dims:
                d = d.subs(sizes).constant if isinstance(d, Dim) and sizes else d
                n *= int(d) if d is not None else 0
            out.append((t.name, t.shape, n * size))
            if t.differentiable:
                out.append((f"{t.name}.grad", t.shape, n * size))
        return out


_GRAPH: contextvars.ContextVar[Graph | None] = contextvars.ContextVar("tensig_graph",
                                                                     default=None)
_SCOPE: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("tensig_scope",
                                                                         default=())


def current_graph() -> Graph:
    g = _GRAPH.get()
    if g is None:
        g = Graph()
        _GRAPH.set(g)
    return g


@contextlib.contextmanager
def new_graph(backend: str = "numpy", device: str | None = None) -> Iterator[Graph]:
    """Build tensors in a fresh graph (``with tensig.graph.new_graph() as g: ...``).

    ``backend`` is ``"numpy"``, ``"torch"``, ``"jax"`` or ``"dask"``: the library of every
    array of the graph (parameters, fed data, optimizer state and what the routines compute).
    With torch, ``device`` (``"cuda"``, ``"cuda:1"``, ...; the CPU by default) is where they
    live; with JAX, a platform (``"gpu"``, ``"cpu:0"``; JAX's default device by default).
    """
    g = Graph(backend, device)
    token = _GRAPH.set(g)
    try:
        yield g
    finally:
        _GRAPH.reset(token)


@contextlib.contextmanager
def scope(name: str) -> Iterator[None]:
    """Tensors created inside carry ``name`` in their label (OCANNL's name from binding)."""
    token = _SCOPE.set((*_SCOPE.get(), name))
    try:
        yield
    finally:
        _SCOPE.reset(token)


# --------------------------------------------------------------------------------------------
# Operations
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpDef:
    """An operation: shape logic, forward code and backward code.

    ``forward(t, *args) -> Code`` computes ``t.val``; ``backward(t, *args) -> Code`` adds into
    the arguments' gradients (``None``: not differentiable).  ``logic`` is ``"."``, ``"@"``,
    ``"T"`` or an einsum spec; ``op`` names the eager operator for specs (``"einsum"``...).
    """

    name: str
    logic: str
    forward: Callable[..., Code]
    backward: Callable[..., Code] | None = None
    op: str | None = None
    #: whether integer tensors may be operands (a gather's ids, a cast); other operations
    #: refuse them, so integer data never turns into floats unnoticed
    integers: bool = False


class _Id(int):
    """A tensor's number (the key of its arrays in a store) that, called, is the identity
    operation: ``t.id()`` is OCANNL's ``id`` like ``t.relu()`` is ``relu``, which the number's
    attribute would otherwise shadow."""

    tensor: Tensor

    def __call__(self) -> Tensor:
        return apply(UNARY_OPS["id"], self.tensor)


class Tensor:
    """A lazy node of a model graph."""

    __slots__ = ("_projections", "args", "base", "differentiable", "graph", "id", "init",
                 "integer", "kind", "label", "node", "op", "value_init")

    def __init__(self, kind: str, node: TensorNode, graph: Graph, label: Sequence[str],
                 op: OpDef | None = None, args: tuple[Tensor, ...] = (),
                 differentiable: bool = False):
        self.id = _Id(next(_ids))
        self.id.tensor = self
        self.kind, self.node, self.graph = kind, node, graph
        # ``base``: scope and own name; ``label`` adds the names of the operands' labels
        # (OCANNL enriches a result's label from its arguments): relu(w @ x) -> relu.w.x
        self.base = (*_SCOPE.get(), *label)
        extra: list[str] = []
        for a in args:
            # a leaf or parameter contributes its name, an operation what it was built from
            names = a.base[-1:] if a.kind != "op" else a.label[len(a.base):]
            extra += [n for n in names if n not in extra and n not in self.base]
        self.label = (*self.base, *extra)
        self.op, self.args = op, args
        self.differentiable = differentiable
        #: integer data (ids, class labels): only operations that take integers accept it
        self.integer = False
        self.init: Callable[[tuple[int, ...]], Any] | None = None
        self.value_init: Any = None
        self._projections: Projections | None = None
        graph.tensors.append(self)

    @property
    def name(self) -> str:
        return ".".join(self.base) or f"t{self.id}"

    @property
    def shape(self) -> Shape:
        """The solved shape (solving the whole graph if needed)."""
        g = self.graph
        g.solve()
        s = g._shapes.get(self.id)
        if s is None:  # read from the solver once per solve: compiling asks thousands of times
            s = g._shapes[self.id] = g.shapes.shape(self.node)
        return s

    @property
    def projections(self) -> Projections:
        """The projections of the operation computing this tensor, as the graph's solve
        produced them: how its loops index this tensor and each argument (and their
        gradients).  Forward and backward code are written under these."""
        p = self._projections
        if p is None:
            if self.op is None:
                raise ValueError(f"{self.name} is not computed by an operation: it has no "
                                 "projections")
            shapes, node = self.graph.shapes, self.node
            solve = (lambda: shapes.projections(node)) if shapes.made(node) else None
            p = self._projections = Projections(self.op.logic, self, self.args, solve)
        return p

    @property
    def val(self) -> Buf:
        return Buf(self, "value")

    @property
    def grad(self) -> Buf:
        if not self.differentiable:
            raise ValueError(f"{self.name} is not differentiable: it has no gradient buffer")
        return Buf(self, "grad")

    @property
    def merge(self) -> Buf:
        """The value's merge buffer (data-parallel merging: ``p.grad =+ p.grad.merge``)."""
        return Buf(self, "merge")

    def numpy(self) -> Any:
        """The value (after a routine computed it)."""
        return self.graph.store.read(self.val)

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}, {self.kind})"

    # -- operators ---------------------------------------------------------------------------
    def __add__(self, o: Any) -> Tensor:
        return apply(ADD, self, o)

    def __radd__(self, o: Any) -> Tensor:
        return apply(ADD, o, self)

    def __sub__(self, o: Any) -> Tensor:
        return apply(SUB, self, o)

    def __rsub__(self, o: Any) -> Tensor:
        return apply(SUB, o, self)

    def __mul__(self, o: Any) -> Tensor:
        return apply(MUL, self, o)

    def __rmul__(self, o: Any) -> Tensor:
        return apply(MUL, o, self)

    def __truediv__(self, o: Any) -> Tensor:
        return apply(DIV, self, o)

    def __rtruediv__(self, o: Any) -> Tensor:
        return apply(DIV, o, self)

    def __pow__(self, p: float) -> Tensor:
        if not isinstance(p, int | float):
            raise TypeError("a tensor's power is a number (OCANNL's **.)")
        return apply(_pow_op(float(p)), self)

    def __neg__(self) -> Tensor:
        return apply(UNARY_OPS["neg"], self)

    def __matmul__(self, o: Tensor) -> Tensor:
        return apply(COMPOSE, self, o)

    @property
    def T(self) -> Tensor:
        """Input and output rows swapped (OCANNL's ``~logic:"T"``)."""
        return apply(TRANSPOSE, self)

    def __lt__(self, o: Any) -> Tensor:
        return apply(BINARY_OPS["lt"], self, o)

    def __le__(self, o: Any) -> Tensor:
        return apply(BINARY_OPS["le"], self, o)

    def __gt__(self, o: Any) -> Tensor:
        return apply(BINARY_OPS["lt"], o, self)

    def __ge__(self, o: Any) -> Tensor:
        return apply(BINARY_OPS["le"], o, self)

    def __eq__(self, o: Any) -> Tensor:  # type: ignore[override]
        return apply(BINARY_OPS["eq"], self, o)

    def __ne__(self, o: Any) -> Tensor:  # type: ignore[override]
        return apply(BINARY_OPS["ne"], self, o)

    __hash__ = object.__hash__

    def __and__(self, o: Any) -> Tensor:
        return apply(BINARY_OPS["and"], self, o)

    def __or__(self, o: Any) -> Tensor:
        return apply(BINARY_OPS["or"], self, o)

    def __mod__(self, o: Any) -> Tensor:
        return apply(BINARY_OPS["mod"], self, o)

    def cast(self, dtype: str = "float32") -> Tensor:
        """The values as ``dtype`` ("float32" or "float64"): how integer data enters float
        arithmetic."""
        return cast(self, dtype)

    def __getattr__(self, name: str) -> Any:
        if name in UNARY_OPS:
            return lambda: apply(UNARY_OPS[name], self)
        if name in BINARY_OPS:  # t.max(u), t.min(u), t.mod(u), ...
            return lambda o: apply(BINARY_OPS[name], self, o)
        raise AttributeError(name)

    # -- routines ----------------------------------------------------------------------------
    def forward_code(self) -> Code:
        """Code computing this tensor from its leaves and parameters."""
        code = Code()
        for t in _topo(self):
            if t.op is not None:
                code.extend(t.op.forward(t, *t.args))
        return code

    def backprop_code(self) -> Code:
        """Code adding d(self)/d(x) into every differentiable tensor's gradient."""
        code = Code()
        for t in reversed(_topo(self)):
            if t.op is not None and t.differentiable and t.op.backward is not None:
                code.extend(t.op.backward(t, *t.args))
        return code

    def grad_update_code(self) -> Code:
        """Forward, zero grads, seed this tensor's gradient with 1, backprop."""
        code = self.forward_code()
        code.extend(self.zero_grads_code())
        code.assign(self.grad, 1.0)
        return code.extend(self.backprop_code())

    def zero_grads_code(self) -> Code:
        code = Code()
        for t in _topo(self):
            if t.differentiable:
                code.assign(t.grad, 0.0, logic=".")
        return code


def _topo(root: Tensor) -> list[Tensor]:
    order: list[Tensor] = []
    seen: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(root, False)]
    while stack:
        t, done = stack.pop()
        if done:
            order.append(t)
            continue
        if t.id in seen:
            continue
        seen.add(t.id)
        stack.append((t, True))
        stack.extend((a, False) for a in reversed(t.args) if a.id not in seen)
    return order


def _as_tensor(x: Any, g: Graph) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, int | float):  # a number broadcasts onto any axis, labelled or not
        t = constant(np.array([float(x)], np.float32), name=repr(x))
        g.shapes.broadcasts(t.node)
        return t
    if isinstance(x, Captured):
        return dim(x)
    raise TypeError(f"cannot use {type(x).__name__} as a tensor (numbers auto-lift; arrays "
                    "need tensig.graph.constant or leaf)")


def apply(opdef: OpDef, *operands: Any, name: str | None = None) -> Any:
    """Build the node of ``opdef`` applied to ``operands`` and record its shape constraint.

    Applied to arrays instead of tensors, the operation runs eagerly and returns an array: a
    user-defined :class:`OpDef` works like a built-in in both worlds.
    """
    if operands and not any(isinstance(o, Tensor) for o in operands) and \
            any(hasattr(o, "shape") for o in operands):
        return _eager(opdef, operands)
    g = next((o.graph for o in operands if isinstance(o, Tensor)), current_graph())
    args = tuple(_as_tensor(o, g) for o in operands)
    if opdef.logic != "." and len({a.id for a in args}) < len(args):
        args = _distinct(args)
    if any(a.graph is not g for a in args):
        raise ValueError(f"{opdef.name}: operands come from different graphs")
    integer = not opdef.integers and bool(args) and all(a.integer for a in args)
    if not opdef.integers and not integer:  # integers among floats
        for a in args:
            if a.integer:
                other = next(o for o in args if not o.integer)
                raise TypeError(
                    f"{opdef.name}: {a.name} holds integer data and {other.name} does not; "
                    f"integers do not enter float arithmetic silently.  Cast them "
                    f"({a.name}.cast('float32')), or index with them (G.embedding, G.one_hot)")
    nodes = [a.node for a in args]
    label = [name or opdef.name]
    shapes = g.shapes
    if opdef.logic == ".":
        node = shapes.pointwise(*nodes, name=label[0])
    elif opdef.logic == "@":
        node = shapes.compose(*nodes, name=label[0])
    elif opdef.logic == "T":
        node = shapes.transpose(*nodes, name=label[0])
    else:
        node = shapes.apply(opdef.logic, *nodes, name=label[0], op=opdef.op)
    diff = opdef.backward is not None and any(a.differentiable for a in args)
    t = Tensor("op", node, g, label, opdef, args, diff and not integer)
    t.integer = integer  # integer arithmetic stays integer
    return t


def _distinct(args: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """A tensor used twice in one spec (``q`` as query and key) plays two roles whose axes
    have different labels; its second use becomes an identity node (an alias of the same
    array, no copy), so each operand has a buffer of its own and its gradient both parts."""
    seen: set[int] = set()
    out = []
    for a in args:
        out.append(apply(UNARY_OPS["id"], a) if a.id in seen else a)
        seen.add(a.id)
    return tuple(out)


def _eager(opdef: OpDef, operands: Sequence[Any]) -> Any:
    """Run one operation on arrays through a throwaway graph (same shape rules, same code):
    a graph of the arrays' own library, on their device, keeping their dtypes, so the result
    is the array ``tensig.einsum`` and its siblings give (an array with rows gives one)."""
    arrays = [getattr(o, "array", o) for o in operands if hasattr(o, "shape")]
    adapter = backend_for(type(arrays[0]))
    with new_graph(adapter.name, adapter.device_of(arrays[0])):
        args = []
        for i, o in enumerate(operands):
            rows = getattr(o, "rows", None)
            if rows is not None:  # an array with its three rows
                t = leaf(f"x{i}", o.array, batch=len(rows.batch), input=len(rows.input))
            elif hasattr(o, "shape"):
                t = leaf(f"x{i}", o)
            else:  # a number
                t = o
            args.append(t)
        out = apply(opdef, *args)
        value = Model(out).run()
    if any(getattr(o, "rows", None) is not None for o in operands):
        return RowArray(value, out.shape)
    return value


# -- forward and backward code of the built-in operations --------------------------------------


def _fwd(op: str) -> Callable[..., Code]:
    def forward(t: Tensor, *args: Tensor) -> Code:
        return Code().assign(t.val, Expr(op, tuple(a.val for a in args)), logic=t.projections)

    return forward


def _grads(*rules: Callable[..., Any] | None) -> Callable[..., Code]:
    """Backward code from one rule per argument: ``rule(t, *args) -> (expr, accum)``."""
    def backward(t: Tensor, *args: Tensor) -> Code:
        code = Code()
        for a, rule in zip(args, rules, strict=True):
            if rule is None or not a.differentiable:
                continue
            expr, accum = rule(t, *args)
            code.assign(a.grad, expr, accum=accum, logic=t.projections)
        return code

    return backward


LN2 = math.log(2.0)

ADD = OpDef("add", ".", _fwd("add"), _grads(lambda t, a, b: (t.grad, "+"),
                                            lambda t, a, b: (t.grad, "+")))
SUB = OpDef("sub", ".", _fwd("sub"), _grads(lambda t, a, b: (t.grad, "+"),
                                            lambda t, a, b: (t.grad, "-")))
MUL = OpDef("mul", ".", _fwd("mul"), _grads(lambda t, a, b: (_e("mul", t.grad, b.val), "+"),
                                            lambda t, a, b: (_e("mul", t.grad, a.val), "+")))
DIV = OpDef("div", ".", _fwd("div"), _grads(
    lambda t, a, b: (_e("div", t.grad, b.val), "+"),
    lambda t, a, b: (_e("div", _e("mul", t.grad, t.val), b.val), "-")))

BINARY_OPS: dict[str, OpDef] = {
    "add": ADD, "sub": SUB, "mul": MUL, "div": DIV,
    "max": OpDef("max", ".", _fwd("max"), _grads(
        lambda t, a, b: (_e("mul", t.grad, _e("le", b.val, a.val)), "+"),
        lambda t, a, b: (_e("mul", t.grad, _e("lt", a.val, b.val)), "+"))),
    "min": OpDef("min", ".", _fwd("min"), _grads(
        lambda t, a, b: (_e("mul", t.grad, _e("le", a.val, b.val)), "+"),
        lambda t, a, b: (_e("mul", t.grad, _e("lt", b.val, a.val)), "+"))),
    "relu_gate": OpDef("relu_gate", ".", _fwd("relu_gate"), _grads(
        None, lambda t, a, b: (_e("relu_gate", a.val, t.grad), "+"))),
    "sat01_gate": OpDef("sat01_gate", ".", _fwd("sat01_gate"), _grads(
        None, lambda t, a, b: (_e("sat01_gate", a.val, t.grad), "+"))),
}
for _name in ("lt", "le", "eq", "ne", "and", "or", "mod"):
    BINARY_OPS[_name] = OpDef(_name, ".", _fwd(_name))  # not differentiable


def _unary(name: str, rule: Callable[..., Any] | None) -> OpDef:
    return OpDef(name, ".", _fwd(name), _grads(rule) if rule is not None else None)


UNARY_OPS: dict[str, OpDef] = {
    "id": _unary("id", lambda t, a: (t.grad, "+")),
    "relu": _unary("relu", lambda t, a: (_e("relu_gate", a.val, t.grad), "+")),
    "sat01": _unary("sat01", lambda t, a: (_e("sat01_gate", a.val, t.grad), "+")),
    "exp": _unary("exp", lambda t, a: (_e("mul", t.grad, t.val), "+")),
    "exp2": _unary("exp2", lambda t, a: (_e("mul", _e("mul", t.grad, t.val), LN2), "+")),
    "log": _unary("log", lambda t, a: (_e("div", t.grad, a.val), "+")),
    "log2": _unary("log2", lambda t, a: (_e("div", t.grad, _e("mul", a.val, LN2)), "+")),
    "sin": _unary("sin", lambda t, a: (_e("mul", t.grad, _e("cos", a.val)), "+")),
    "cos": _unary("cos", lambda t, a: (_e("mul", t.grad, _e("sin", a.val)), "-")),
    "sqrt": _unary("sqrt", lambda t, a: (_e("div", t.grad, _e("mul", 2.0, t.val)), "+")),
    "recip": _unary("recip", lambda t, a: (_e("mul", t.grad, _e("mul", t.val, t.val)), "-")),
    "recip_sqrt": _unary("recip_sqrt", lambda t, a: (
        _e("mul", _e("mul", 0.5, t.grad), _e("pow", t.val, 3.0)), "-")),
    "neg": _unary("neg", lambda t, a: (t.grad, "-")),
    "tanh": _unary("tanh", lambda t, a: (
        _e("mul", t.grad, _e("sub", 1.0, _e("mul", t.val, t.val))), "+")),
    "gelu": _unary("gelu", lambda t, a: (_e("gelu_grad", a.val, t.grad), "+")),
    "not": _unary("not", None),
}


def _pow_op(p: float) -> OpDef:
    def forward(t: Tensor, a: Tensor) -> Code:
        return Code().assign(t.val, _e("pow", a.val, p))

    def rule(t: Tensor, a: Tensor) -> tuple[Any, str]:
        if p == 1.0:
            return t.grad, "+"
        if p == 2.0:
            return _e("mul", _e("mul", 2.0, a.val), t.grad), "+"
        return _e("mul", _e("mul", p, _e("pow", a.val, p - 1.0)), t.grad), "+"

    return OpDef(f"pow{p:g}", ".", forward, _grads(rule))


def _compose_fwd(t: Tensor, a: Tensor, b: Tensor) -> Code:
    return Code().assign(t.val, _e("mul", a.val, b.val), accum="+", init=True,
                         logic=t.projections)


COMPOSE = OpDef("matmul", "@", _compose_fwd, _grads(
    lambda t, a, b: (_e("mul", t.grad, b.val), "+"),
    lambda t, a, b: (_e("mul", a.val, t.grad), "+")))

TRANSPOSE = OpDef("transpose", "T", _fwd("id"), _grads(lambda t, a: (t.grad, "+")))


def where(cond: Any, a: Any, b: Any, *, spec: str | None = None) -> Tensor:
    """Pointwise choice (a non-zero condition picks ``a``).  Under an einsum ``spec``
    (OCANNL's ``where ~spec``, ``"ij;ij;ij=>i"``) the choice is made in each cell of the
    product space, then add-reduced: select before reduce."""
    def forward(t: Tensor, *args: Tensor) -> Code:
        return Code().assign(t.val, Expr("where", tuple(x.val for x in args)), accum="+",
                             init=True, logic=t.projections)

    op = OpDef("where", spec or ".", _fwd("where") if spec is None else forward, _grads(
        None, lambda t, c, x, y: (_e("where", c.val, t.grad, 0.0), "+"),
        lambda t, c, x, y: (_e("where", c.val, 0.0, t.grad), "+")),
        op=None if spec is None else "einsum")
    return apply(op, cond, a, b)


def _product(vals: list[Any]) -> Any:
    out = vals[0]
    for v in vals[1:]:
        out = _e("mul", out, v)
    return out


def _combined(op: Operator, spec: str, vals: list[Any]) -> Expr:
    """The operator's ``combine`` of the operands' values: a chain of binary products for
    einsum's ``mul``; a concatenation without ``^`` concatenates nothing (a one-element
    block), so it is einsum1's copy."""
    if op.combine == "mul":
        return _product(vals)
    if op.combine == "concat" and "^" not in spec:
        return Expr("id", tuple(vals))
    return Expr(op.combine, tuple(vals))


def _spec_backward(op: Operator, spec: str, n: int) -> Callable[..., Code]:
    """The backward code of an operator application, from its ``combine`` and ``accum``.

    Add-reduction: each operand's gradient is the result's gradient times the derivative of
    ``combine`` (the other operands for a product, 1 for a sum, a copy or a concatenation).
    Max-reduction gates the gradient in the product space: a pair (result cell, reduced
    position) receives it only where its combined value achieved the max, which stays exact
    when windows overlap (OCANNL's product-space gate).
    """
    if op.accum == "max":
        def gate(t: Tensor, *args: Tensor) -> tuple[Any, str]:
            vals = [a.val for a in args]
            value = vals[0] if op.combine == "id" else _combined(op, spec, vals)
            return _e("where", _e("eq", value, t.val), t.grad, 0.0), "+"

        return _grads(*[gate] * n)
    if op.accum != "+" or op.combine not in ("mul", "add", "id", "concat"):
        raise NotImplementedError(f"{op.name}: no derivative for combining by {op.combine} "
                                  f"and accumulating by {op.accum}")
    if op.combine != "mul":
        return _grads(*[lambda t, *args: (t.grad, "+")] * n)

    def rule(i: int) -> Callable[..., Any]:
        return lambda t, *args: (_product(
            [a.val if j != i else t.grad for j, a in enumerate(args)]), "+")

    return _grads(*[rule(i) for i in range(n)])


def _spec_op(name: str, spec: str, *tensors: Tensor, capture: Sequence[str] | None = None
             ) -> Any:
    """Operator ``name`` of :data:`~tensig.execution.ir.OPERATORS` applied to ``tensors``
    under ``spec``: the assignment ``t =:accum combine(args) ~logic:spec`` and its
    derivative.  ``capture``: also the named labels' sizes (:class:`Captured`)."""
    op = OPERATORS[name]
    lo, hi = op.operands
    if len(tensors) < lo or (hi is not None and len(tensors) > hi):
        raise TypeError(f"{name} takes {count_text(lo, hi)} tensor(s), got {len(tensors)}")

    def forward(t: Tensor, *args: Tensor) -> Code:
        return Code().assign(t.val, _combined(op, spec, [a.val for a in args]),
                             accum=op.accum, init=True, logic=t.projections)

    opdef = OpDef(name, spec, forward, _spec_backward(op, spec, len(tensors)), op=name)
    return _capture(apply(opdef, *tensors), capture)


def _documented(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """A graph operation's docstring, from its operator's entry in
    :data:`~tensig.execution.ir.OPERATORS`."""
    op = OPERATORS[fn.__name__]
    fn.__doc__ = (f"{op.doc} (OCANNL ``{op.ocannl}``) as a graph node: "
                  f"{count_text(*op.operands)} tensor(s) (arrays run at once, through a "
                  f"throwaway graph; :func:`tensig.{op.name}` is the eager function).  "
                  f"``capture=[names]`` returns ``(tensor, {{name: Captured}})``: the labels' "
                  f"solved sizes (OCANNL's ``capture_dims``).")
    return fn


@_documented
def einsum(spec: str, *tensors: Tensor, capture: Sequence[str] | None = None) -> Any:
    return _spec_op("einsum", spec, *tensors, capture=capture)


@_documented
def einsum1(spec: str, a: Tensor, capture: Sequence[str] | None = None) -> Any:
    return _spec_op("einsum1", spec, a, capture=capture)


@_documented
def outer_sum(spec: str, a: Tensor, b: Tensor, capture: Sequence[str] | None = None) -> Any:
    return _spec_op("outer_sum", spec, a, b, capture=capture)


@_documented
def tropical(spec: str, a: Tensor, b: Tensor, capture: Sequence[str] | None = None) -> Any:
    return _spec_op("tropical", spec, a, b, capture=capture)


@_documented
def einmax1(spec: str, a: Tensor, capture: Sequence[str] | None = None) -> Any:
    return _spec_op("einmax1", spec, a, capture=capture)


@_documented
def concat(spec: str, *tensors: Tensor, capture: Sequence[str] | None = None) -> Any:
    return _spec_op("concat", spec, *tensors, capture=capture)


def stack(kind: str, tensors: Sequence[Tensor]) -> Tensor:
    """Stack along a new leading axis of ``kind`` ("batch", "output" or "input"): OCANNL's
    block tensors (each operand gets a size-1 axis, then they are concatenated)."""
    if not tensors:
        raise ValueError("stack needs at least one tensor")
    row = {"batch": "{}...|...->...", "output": "...|...->{}...", "input": "...|{}...->..."}
    if kind not in row:
        raise ValueError(f"stack: kind is 'batch', 'output' or 'input', not {kind!r}")
    pattern = row[kind]
    # a size-1 axis on each operand, then one concatenation of those axes
    parts = [einsum1(f"{pattern.format('')} => {pattern.format('0, ')}", t) for t in tensors]
    names = [f"bt{i}" for i in range(len(parts))]
    spec = "; ".join(pattern.format(f"{n}, ") for n in names) + " => " + \
        pattern.format("^".join(names) + ", ")
    return concat(spec, *parts)


def stretch(x: Any) -> Tensor:
    """``x`` broadcast to whatever shape its use needs (OCANNL's ``stretch``): the result
    takes its shape from its consumer, as a parameter does, instead of closing down to ``x``."""
    g = x.graph if isinstance(x, Tensor) else current_graph()
    src = _as_tensor(x, g)
    node = g.shapes.parameter(f"stretch.{src.name}")
    node.rows["batch"] = SRow((), RowNode(f"stretch.{src.name}.batch", closes=True), ())
    op = OpDef("stretch", ".", _fwd("id"), _grads(lambda t, a: (t.grad, "+")))
    return Tensor("op", node, g, ["stretch"], op, (src,), src.differentiable)


def fma(a: Any, b: Any, c: Any) -> Tensor:
    """``a * b + c`` pointwise."""
    op = OpDef("fma", ".", _fwd("fma"), _grads(
        lambda t, x, y, z: (_e("mul", t.grad, y.val), "+"),
        lambda t, x, y, z: (_e("mul", t.grad, x.val), "+"),
        lambda t, x, y, z: (t.grad, "+")))
    return apply(op, a, b, c)


def stop_gradient(x: Tensor) -> Tensor:
    """The same values, with no gradient flowing back (OCANNL's ``stop_gradient``)."""
    return apply(OpDef("stop_gradient", ".", _fwd("id")), x)


def maximum(a: Any, b: Any) -> Tensor:
    """Pointwise maximum (OCANNL's ``@^``; also ``a.max(b)``); the gradient goes to the larger
    operand, to the first on ties."""
    return apply(BINARY_OPS["max"], a, b)


def minimum(a: Any, b: Any) -> Tensor:
    """Pointwise minimum (OCANNL's ``@-``; also ``a.min(b)``)."""
    return apply(BINARY_OPS["min"], a, b)


def cast(x: Tensor, dtype: str = "float32") -> Tensor:
    """``x``'s values as ``dtype`` ("float32" or "float64"; also ``x.cast(dtype)``): how
    integer data enters float arithmetic.  The gradient passes through unchanged."""
    if dtype not in CASTS:
        raise ValueError(f"cast: dtype is one of {', '.join(CASTS)}, not {dtype!r}")
    op = OpDef(f"cast_{dtype}", ".", _fwd(f"to_{dtype}"), _grads(lambda t, a: (t.grad, "+")),
               integers=True)
    return apply(op, x)


#: ``ids`` (batch axes only) gather the rows of a table ``d -> V``: the result's output row
#: is the table's input row
_EMBEDDING = "..d..->v; ..b..|-> => ..b..|->..d.."


def embedding(table: Tensor, ids: Tensor) -> Tensor:
    """Rows of ``table`` picked by integer ``ids``: ``embedding(table, ids)[b, t | d]`` is
    ``table[ids[b, t]]``.

    ``table`` is ``d -> V`` (output row: the ``V`` entries, one axis; input row: an entry's
    axes), laid out as PyTorch's ``(V, d)`` embedding weight, so the same table read as
    ``table @ h`` gives ``V`` logits (weight tying).  ``ids`` is integer data whose axes are
    all batch axes (``b, t |``); the result is ``b, t | d``: what ``table.T @ one_hot(ids, V)``
    computes, without the one-hots.  The gradient adds each position's gradient into its
    id's row (a scatter-add; repeated ids add up).  An id outside ``0..V-1`` is an
    ``IndexError``.
    """
    if not isinstance(ids, Tensor) or not ids.integer:
        raise TypeError(f"embedding: ids must be integer data (a leaf of integer ids), not "
                        f"{getattr(ids, 'name', type(ids).__name__)}")

    return apply(_gather("embedding", _EMBEDDING, "take"), table, ids)


def _gather(name: str, spec: str, primitive: str) -> OpDef:
    """An operation that reads a table at integer positions with ``primitive`` (an
    ``ir.WHOLE`` gather); its gradient adds each read cell's gradient back into the cell it
    came from (``put_add``: repeated positions add up)."""
    def forward(t: Tensor, tab: Tensor, i: Tensor) -> Code:
        return Code().assign(t.val, _e(primitive, tab.val, i.val), logic=t.projections)

    def backward(t: Tensor, tab: Tensor, i: Tensor) -> Code:
        code = Code()
        if tab.differentiable:
            code.assign(tab.grad, _e("put_add", i.val, t.grad), accum="+", logic=t.projections)
        return code

    return OpDef(name, spec, forward, backward, op="einsum", integers=True)


def one_hot(ids: Tensor, n: int | Tensor, *, ignore_index: int = -100) -> Tensor:
    """``ids`` (integer data, ``b | o``) as one-hot rows ``b | o, n`` of float32: 1 at each
    id's position.  ``n`` is the number of classes, or a tensor ``b | o, n`` whose last output
    axis gives it from the solved shapes (logits, say).  An id equal to ``ignore_index`` gives
    a row of zeros; any other id outside ``0..n-1`` is an ``IndexError``.  Not
    differentiable."""
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


# -- OCANNL's batch slicing (@|) and dimension captures ----------------------------------------

#: the leftmost batch axis ``n`` of the first operand, at the position a scalar gives
_BATCH_SLICE = "n, ..b..|..i..->..o..; |-> => ..b..|..i..->..o.."


class Index(Tensor):
    """A scalar integer leaf that picks a cell of a leftmost batch axis (OCANNL's static
    symbol, ``IDX.get_static_symbol ~static_range``); ``range``, when given, is that axis's
    size.  Made by :func:`index`."""

    __slots__ = ("range",)


def index(name: str, *, range: int | None = None, value: int = 0) -> Index:
    """A batch index for :func:`batch_slice`, holding ``value`` until a model sets another
    (``model.set(i, k)``).  ``range``: the number of cells of the axes it slices (a slice of a
    tensor whose leftmost batch axis has another size is a :class:`ShapeError`)."""
    if range is not None and (isinstance(range, bool) or not isinstance(range, int)
                              or range < 1):
        raise ValueError(f"index {name!r}: range is a positive int, not {range!r}")
    g = current_graph()
    t = Index("leaf", g.shapes.tensor(name, Shape()), g, [name])
    t.range, t.integer = range, True
    t.value_init = np.array(value, np.int64)
    return t


def batch_slice(x: Tensor, i: Tensor) -> Tensor:
    """``x`` at cell ``i`` of its leftmost batch axis (OCANNL's ``x @| i``): ``x``'s shape
    without that axis.  ``i`` is a scalar integer leaf (:func:`index`) set before each run,
    so one compiled routine walks the batches of a dataset held whole.  On the host the slice
    is a view of ``x`` (OCANNL aliases it too); its gradient adds into cell ``i`` of ``x``'s
    gradient.  An ``i`` outside the axis is an ``IndexError`` when the routine runs.

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


class Captured:
    """The size of a label (or of a row variable: the product of its axes) in a graph's
    solve: OCANNL's ``capture_dims`` variable reference.

    Made by ``capture=[...]`` on a graph einsum (``y, dims = G.einsum1(spec, x,
    capture=["d"])``) or by :func:`variable`.  ``value`` solves the graph and reads it;
    :func:`dim` (or arithmetic with tensors: ``x / d``, ``x * d``) puts it into the
    model as a number; :meth:`set_dim`, :meth:`set_equal`, :meth:`set_scale` constrain it
    (OCANNL's ``Shape.set_dim``...).  A row variable's size is read after the solve, so its
    constraints are checked there: they cannot size a tensor.
    """

    __slots__ = ("graph", "name", "node", "var")

    def __init__(self, graph: Graph, name: str, node: TensorNode | None, var: DimVar | None):
        self.graph, self.name, self.node, self.var = graph, name, node, var

    def __repr__(self) -> str:
        return f"Captured({self.name!r})"

    @property
    def value(self) -> int:
        """The solved size (solving the graph)."""
        self.graph.solve()
        v = self._size()
        if v is None:
            raise ShapeError(f"variable {self.name!r} has no size: nothing sets it",
                             label=self.name, hint="set_dim it, or set_equal it to a "
                                                   "captured label")
        return v

    def _size(self) -> int | None:
        """The size as the solver has it now (a row variable's: once solved)."""
        if self.node is None:
            v = ShapeGraph.value(self.var) if self.var is not None else None
            return None if v is None else int(v)
        return int(self.graph.shapes.projections(self.node).capture([self.name])[self.name])

    def __int__(self) -> int:
        return self.value

    def set_dim(self, size: int) -> None:
        """This size is ``size``."""
        if self.var is None:
            self._check(lambda: size, f"set_dim({self.name!r}, {size})")
        else:
            self.graph.shapes.set_dim(self.var, size)

    def set_equal(self, other: Captured) -> None:
        """This size and ``other``'s are equal (a row variable: the product of its axes)."""
        if other.graph is not self.graph:
            raise ValueError(f"set_equal({self.name!r}, {other.name!r}): the sizes belong to "
                             "different graphs")
        if self.var is not None and other.var is not None:
            self.graph.shapes.set_equal(self.var, other.var)
        elif self.var is None:
            self._check(other._size, f"set_equal({self.name!r}, {other.name!r})",
                        settle=other)
        else:
            other.set_equal(self)

    def set_scale(self, small: Captured, factor: int) -> None:
        """This size is ``factor`` times ``small``'s (dimension labels only, as OCANNL's)."""
        if self.var is None or small.var is None:
            raise ShapeError(f"set_scale({self.name!r}, {small.name!r}): a row variable takes "
                             "no scale, only dimension labels do (as OCANNL's set_scale)")
        self.graph.shapes.set_scale(self.var, small.var, factor)

    def _check(self, want: Callable[[], int | None], what: str,
               settle: Captured | None = None) -> None:
        """A row variable's constraint, checked after the graph's solve: a free ``settle``
        variable takes the row's size, anything else must equal it."""
        def check() -> None:
            size = self._size()
            assert size is not None  # a row variable's size is known once the graph solved
            if settle is not None and settle.var is not None and \
                    ShapeGraph.value(settle.var) is None:
                settle.set_dim(size)
                return
            other = want()
            if other != size:
                raise ShapeError(f"{what}: the row variable {self.name!r} has {size} elements "
                                 f"(the product of its axes), not {other}", label=self.name,
                                 sizes=(size, other))

        self.graph.checks.append(check)
        self.graph._solved = -1  # checked at the next solve

    def tensor(self) -> Tensor:
        return dim(self)

    def __add__(self, o: Any) -> Tensor:
        return dim(self) + o

    def __radd__(self, o: Any) -> Tensor:
        return o + dim(self)

    def __sub__(self, o: Any) -> Tensor:
        return dim(self) - o

    def __rsub__(self, o: Any) -> Tensor:
        return o - dim(self)

    def __mul__(self, o: Any) -> Tensor:
        return dim(self) * o

    def __rmul__(self, o: Any) -> Tensor:
        return o * dim(self)

    def __truediv__(self, o: Any) -> Tensor:
        return dim(self) / o

    def __rtruediv__(self, o: Any) -> Tensor:
        return o / dim(self)


def variable(name: str) -> Captured:
    """A free size variable of the current graph (OCANNL's ``Shape.get_variable_ref``): tie it
    to captured labels with :meth:`Captured.set_equal`, size it with :meth:`Captured.set_dim`."""
    g = current_graph()
    return Captured(g, name, None, g.shapes.variable(name))


def dim(c: Captured) -> Tensor:
    """A captured size as a number in the model (OCANNL's ``dim`` / ``embed_dim``): a float32
    constant with no axes (it broadcasts into anything), its value taken from the solved
    shapes when a model is initialised.

    >>> x = leaf("x", np.ones((2, 5), np.float32), batch=1)
    >>> total, d = einsum1("...|d => ...|", x, capture=["d"])
    >>> Model(total / d["d"]).run().tolist()     # the mean over d
    [1.0, 1.0]
    """
    g = c.graph
    name = f"dim.{c.name}"
    t = Tensor("const", g.shapes.tensor(name, Shape()), g, [name])
    t.value_init = lambda: np.array(c.value, np.float32)
    return t


def _capture(t: Tensor, names: Sequence[str] | None) -> Any:
    """``t``, or ``(t, {name: Captured})`` for ``capture=names`` (as the eager functions
    return ``(array, sizes)``).  Unknown names fail here, not at the solve."""
    if names is None:
        return t
    if isinstance(names, str):
        raise TypeError("capture takes a list of names, e.g. capture=['h', 'w']")
    shapes, out = t.graph.shapes, {}
    for name in names:
        try:
            var: DimVar | None = shapes.label(t.node, name)
        except ShapeError:  # a row variable: its size is its axes' product, read when solved
            var = None
        out[name] = Captured(t.graph, name, t.node, var)
    return t, out


# --------------------------------------------------------------------------------------------
# Leaves, parameters, constants
# --------------------------------------------------------------------------------------------


def leaf(name: str, value: Any, *, batch: int = 0, input: int = 0,
         axes: str | None = None) -> Tensor:
    """A data tensor (not differentiable): the first ``batch`` axes are batch axes, the last
    ``input`` axes input axes.  Feed new data of the same shape with :meth:`Model.set`.

    ``axes="b, t | d"`` instead names the axes, rows written as in the notation (``_`` for an
    unnamed one): each name is the axis's basis, which inference carries through every
    operation and which never fuses with another name, so broadcasting that would align ``b``
    with ``t`` (equal sizes or not) is a :class:`~tensig.ShapeError` naming both.  Sequence
    positions go on the batch row (``"b, t | d"``), as every block expects; a name on the
    output row is a feature, and ``@`` refuses to contract a named axis together with others.
    """
    g = current_graph()
    dims = tuple(int(d) for d in value.shape)
    if axes is not None:
        if batch or input:
            raise TypeError(f"leaf {name!r}: give the rows either by axes= or by batch=/input=")
        shape = Shape.labelled(dims, axes)
    else:
        out_end = len(dims) - input
        shape = Shape(batch=dims[:batch], input=dims[out_end:], output=dims[batch:out_end])
    t = Tensor("leaf", g.shapes.tensor(name, shape), g, [name])
    t.value_init = value
    t.integer = _is_integer(value)
    return t


def _is_integer(value: Any) -> bool:
    """Whether an array (NumPy or torch) holds integers (booleans are not ids)."""
    dtype = getattr(value, "dtype", None)
    return dtype is not None and is_integer(dtype)


def constant(value: Any, *, name: str = "const") -> Tensor:
    """A constant (output axes only); numbers in expressions become these."""
    g = current_graph()
    arr = np.asarray(value, dtype=np.float32)
    t = Tensor("const", g.shapes.tensor(name, Shape(output=arr.shape)), g, [name])
    t.value_init = arr
    return t


class batch(list):
    """A batch axis in an :func:`ndarray` literal (OCANNL's ``[| ... |]``)."""


@dataclass(frozen=True)
class axis:
    """An axis of an :func:`ndarray` literal with a basis label: ``axis([1., 2., 3.], "rgb")``
    (OCANNL's ``([1.; 2.; 3.] : rgb)``)."""

    items: Any
    basis: str


def ndarray(literal: Any, *, name: str = "ndarray") -> Tensor:
    """A constant from a nested literal: a ``list`` is an output axis, a ``tuple`` an input
    axis, a :class:`batch` a batch axis; :class:`axis` attaches a basis label.

    Axes nest in memory order: batch outermost, then output, then input.

    >>> ndarray([(1, 2, 3), (4, 5, 6)]).shape      # converts 3-vectors to 2-vectors
    Shape('3->2')
    >>> ndarray(axis([1., 2., 3.], "rgb")).shape
    Shape('rgb=3')
    """
    kinds: list[str] = []
    bases: list[str | None] = []
    node: Any = literal
    while True:
        basis = None
        if isinstance(node, axis):
            basis, node = node.basis, node.items
        if isinstance(node, batch):
            kind = "batch"
        elif isinstance(node, list):
            kind = "output"
        elif isinstance(node, tuple):
            kind = "input"
        else:
            break
        if not node:
            raise ValueError(f"{name}: an empty {kind} axis in a literal")
        kinds.append(kind)
        bases.append(basis)
        node = node[0]
    order = {"batch": 0, "output": 1, "input": 2}
    if [order[k] for k in kinds] != sorted(order[k] for k in kinds):
        raise ValueError(f"{name}: axes nest as batch, then output (list), then input (tuple); "
                         f"got {' > '.join(kinds)}")

    if isinstance(_first_leaf(literal), Tensor):
        return _block(literal)

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
    g = current_graph()
    t = Tensor("const", g.shapes.tensor(name, Shape(**rows)), g, [name])
    t.value_init = arr
    return t


def _first_leaf(x: Any) -> Any:
    while isinstance(x, axis | list | tuple):
        x = x.items if isinstance(x, axis) else (x[0] if x else None)
    return x


def _block(literal: Any) -> Tensor:
    """A literal of tensors stacks them (OCANNL's block tensors), nesting at any depth."""
    kind = "batch" if isinstance(literal, batch) else \
        "output" if isinstance(literal, list) else "input"
    items = [it if isinstance(it, Tensor) else _block(it) for it in literal]
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
    """A learned tensor: no batch axes, sizes inferred from its uses unless given.

    ``init``: ``"uniform"`` (centered uniform in [-0.25, 0.25), OCANNL's default),
    ``"kaiming"`` / ``"xavier"`` (normal, fan from the inferred input size), or a callable
    ``(shape, rng) -> array``.  Random numbers come from a counter-based generator keyed by
    ``(seed, name)``, so they do not depend on creation order.
    """
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


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


class Model:
    """Compiled routines around a loss (or any output): initialise, forward, update."""

    def __init__(self, output: Tensor):
        self.output = output
        self.graph = output.graph
        self.graph.solve()
        self.tensors = _topo(output)
        at = self.graph.array_type
        self.forward = compile_code(output.forward_code(), at)
        self._update: Routine | None = None
        self.initialize()

    def scalar(self, value: float) -> Any:
        """A one-element float32 array of the backend (a scalar leaf's value)."""
        return self.graph.array(np.array([value], np.float32))

    def initialize(self) -> None:
        """Parameters from their initialisers; leaves and constants from their values."""
        store = self.graph.store
        for t in self.tensors:
            if t.kind in ("param", "state", "buffer") and t.init is not None \
                    and not store.has(t.val):
                shape = t.shape.int_dims
                store.write(t.val, self.graph.array(t.init(shape)))
            elif t.value_init is not None:
                self.set(t, t.value_init)

    def set(self, t: Tensor, value: Any) -> None:
        """Feed ``value`` to a leaf (same shape as declared; integer data to an integer leaf).
        A callable gives the value when called (a constant captured from solved shapes)."""
        if callable(value):
            value = value()
        if isinstance(value, int) and t.integer:  # an index's position
            value = np.array(value, np.int64)
        if t.kind == "leaf" and t.integer != _is_integer(value):
            raise TypeError(f"{t.name} was built from {'integer' if t.integer else 'float'} "
                            f"data; got an array of dtype {value.dtype}")
        want = t.shape.int_dims
        if tuple(value.shape) != want:
            raise ShapeError(f"{t.name} was built with shape {t.shape} (memory order "
                             f"{want}); got an array of shape {tuple(value.shape)}")
        self.graph.store.write(t.val, self.graph.array(value))

    def run(self) -> Any:
        self.forward.run(self.graph.store)
        return self.output.numpy()

    def grad_update(self) -> Routine:
        """Forward, zero grads, seed 1, backprop: compiled once."""
        if self._update is None:
            self._update = compile_code(self.output.grad_update_code(), self.graph.array_type)
        return self._update

    def backward(self) -> Any:
        self.grad_update().run(self.graph.store)
        return self.output.numpy()


def grad_update(loss: Tensor) -> Model:
    """A model whose ``backward()`` runs forward, zero grads, seed 1 and backprop."""
    return Model(loss)


def _eager_call(op: str, spec: str, xs: Sequence[Any], options: dict[str, Any]) -> Tensor:
    """``tensig.einsum(spec, x, w)`` and the other eager functions on graph tensors: the
    graph operation of the same name (a node, not an array)."""
    given = [k for k, v in options.items()
             if k != "capture" and (v or k == "use_padding")]  # {} is no params
    if given:
        raise NotImplementedError(f"{op}() on graph tensors takes no {'/'.join(given)} yet: "
                                  "write them into the spec")
    return _spec_op(op, spec, *xs, capture=options.get("capture"))


register_tensor_type(Tensor, _eager_call)
