"""A model graph (:mod:`tensig.model.graph` has the whole story), its tensors, and running them:
:func:`apply`, the pointwise operations behind a tensor's operators (``+``, ``@``, ``.T``,
``t.relu()``) with their derivatives, leaves, constants and :class:`Model`.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensig.backends import backend_for, backend_named, graph_backends, is_integer
from tensig.core.dims import Dim
from tensig.core.errors import ShapeError
from tensig.core.inference import ShapeGraph, TensorNode
from tensig.core.shapes import Shape
from tensig.execution.eager import RowArray
from tensig.execution.ir import CASTS, Buf, Code, Expr, Projections
from tensig.execution.ir import prim as _e
from tensig.execution.price import itemsize
from tensig.model.compile import Routine, Store, compile_code

_ids = itertools.count()


class Graph:
    """Every tensor built in one graph shares one shape inference and one array store."""

    def __init__(self, backend: str = "numpy", device: str | None = None) -> None:
        adapter = backend_named(backend) if backend in graph_backends() else None
        if adapter is None:
            raise ValueError(f"a graph's backend is {' or '.join(map(repr, graph_backends()))},"
                             f" not {backend!r}")
        self.adapter, self.backend, self.device = adapter, backend, adapter.device(device)
        self.shapes = ShapeGraph()
        self.tensors: list[Tensor] = []
        self.store = Store(self.device)
        self._solved = 0
        self._shapes: dict[int, Shape] = {}  # solved shapes by tensor id, until the next solve
        #: checked after each solve (constraints on captured row variables)
        self.checks: list[Callable[[], None]] = []

    def solve(self) -> None:
        """Solve all shapes recorded so far (new tensors re-solve)."""
        if self._solved != len(self.tensors):
            self._shapes.clear()  # new tensors can refine old shapes (a parameter's, say)
            self.shapes.solve()
            for check in self.checks:
                check()
            self._solved = len(self.tensors)

    def array(self, value: Any, device: Any = None) -> Any:
        """``value`` as the backend's array on ``device``: how every array enters the store."""
        return self.adapter.asarray(value, device=self.device if device is None else device)

    @property
    def training(self) -> bool:
        """Training mode (the default: dropout's masks, batch statistics), read as routines run."""
        return self.store.training

    def train(self, mode: bool = True) -> Graph:
        """Switch training mode on (or off with ``mode=False``); returns the graph."""
        self.store.training = bool(mode)
        return self

    def eval(self) -> Graph:
        """Switch training mode off; :meth:`train` switches it back."""
        return self.train(False)

    @property
    def array_type(self) -> type:
        return self.adapter.array_type

    def memory(self, dtype: Any = "float32", sizes: dict[str, int] | None = None
               ) -> list[tuple[str, Shape, int]]:
        """Every tensor's (and gradient's) name, shape and bytes at ``dtype``, before anything is
        allocated; ``sizes`` substitutes symbolic dimensions."""
        self.solve()
        size = itemsize(dtype)
        out = []
        for t in self.tensors:
            dims = (d.subs(sizes).constant if isinstance(d, Dim) and sizes else d
                    for d in t.shape.dims)
            n = math.prod(int(v) if v is not None else 0 for v in dims) * size
            out.append((t.name, t.shape, n))
            if t.differentiable:
                out.append((f"{t.name}.grad", t.shape, n))
        return out


_GRAPH: ContextVar[Graph | None] = ContextVar("tensig_graph", default=None)
_SCOPE: ContextVar[tuple[str, ...]] = ContextVar("tensig_scope", default=())


def current_graph() -> Graph:
    g = _GRAPH.get()
    if g is None:
        g = Graph()
        _GRAPH.set(g)
    return g


@contextlib.contextmanager
def new_graph(backend: str = "numpy", device: str | None = None) -> Iterator[Graph]:
    """Build tensors in a fresh graph (``with tensig.graph.new_graph() as g: ...``) whose every
    array is ``backend``'s (``"numpy"``, ``"torch"``, ``"jax"`` or ``"dask"``), on ``device``:
    torch's (``"cuda:1"``; the CPU by default) or a JAX platform (``"gpu"``; JAX's default)."""
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


@dataclass(frozen=True)
class OpDef:
    """An operation: shape ``logic`` (``"."``, ``"@"``, ``"T"`` or an einsum spec of eager
    operator ``op``), ``forward(t, *args) -> Code`` computing ``t.val`` and ``backward`` adding
    into the arguments' gradients (``None``: not differentiable)."""

    name: str
    logic: str
    forward: Callable[..., Code]
    backward: Callable[..., Code] | None = None
    op: str | None = None
    #: integer operands taken as such (a gather's ids, a cast): others refuse integer data, so
    #: it never turns into floats unnoticed
    integers: bool = False
    #: a float value even of integer operands (``exp``, a division): integer operands refused
    floats: bool = False


class _Id(int):
    """A tensor's number (its arrays' key in a store) that, called, is the identity operation:
    ``t.id()`` is OCANNL's ``id`` as ``t.relu()`` is ``relu``, which ``t.id`` would shadow."""

    tensor: Tensor

    def __call__(self) -> Tensor:
        return apply(UNARY_OPS["id"], self.tensor)


def binary(name: str, a: Any, b: Any) -> Tensor:
    """``BINARY_OPS[name]`` of ``a`` and ``b``: what ``a + b``, ``a.max(b)`` and ``G.maximum``
    (:mod:`tensig.model.graph`) all build."""
    return apply(BINARY_OPS[name], a, b)


def _binary(name: str, reflected: bool = False) -> Callable[[Any, Any], Tensor]:
    """An operator method for ``BINARY_OPS[name]`` (``reflected``: ``self`` is the right
    operand, as in ``__radd__`` or ``a > b`` read as ``b < a``)."""
    def method(self: Any, o: Any) -> Tensor:
        x = self if isinstance(self, Tensor) else self.tensor()  # a captured size: dim() of it
        return binary(name, o, x) if reflected else binary(name, x, o)

    return method


class Arithmetic:
    """``+ - * /`` (and reflected) of a tensor, or of a captured size as its ``tensor()``."""

    __slots__ = ()
    __add__ = _binary("add")
    __radd__ = _binary("add", reflected=True)
    __sub__ = _binary("sub")
    __rsub__ = _binary("sub", reflected=True)
    __mul__ = _binary("mul")
    __rmul__ = _binary("mul", reflected=True)
    __truediv__ = _binary("div")
    __rtruediv__ = _binary("div", reflected=True)


class Tensor(Arithmetic):
    """A lazy node of a model graph."""

    __slots__ = ("_projections", "args", "base", "differentiable", "graph", "id", "init",
                 "integer", "kind", "label", "node", "op", "value_init")

    def __init__(self, kind: str, node: TensorNode, graph: Graph, label: Sequence[str],
                 op: OpDef | None = None, args: tuple[Tensor, ...] = (),
                 differentiable: bool = False):
        self.id = _Id(next(_ids))
        self.id.tensor = self
        self.kind, self.node, self.graph = kind, node, graph
        # ``base``: scope and own name; ``label`` adds the operands' names or, of an operation,
        # what it was built from (OCANNL enriches a label so): relu(w @ x) -> relu.w.x
        self.base: tuple[str, ...] = (*_SCOPE.get(), *label)
        extra: list[str] = []
        for a in args:
            names = a.base[-1:] if a.kind != "op" else a.label[len(a.base):]
            extra += [n for n in names if n not in extra and n not in self.base]
        self.label: tuple[str, ...] = (*self.base, *extra)
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
        """How the loops of the operation computing this tensor index it and each argument."""
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

    def numpy(self) -> Any:
        """The value (after a routine computed it)."""
        return self.graph.store.read(self.val)

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}, {self.kind})"

    # operators: BINARY_OPS (the arithmetic ones: Arithmetic) and the structural ones
    __lt__ = _binary("lt")
    __gt__ = _binary("lt", reflected=True)
    __le__ = _binary("le")
    __ge__ = _binary("le", reflected=True)
    __eq__ = _binary("eq")  # type: ignore[assignment]  # a node, as NumPy's == gives an array
    __ne__ = _binary("ne")  # type: ignore[assignment]
    __hash__ = object.__hash__
    __and__ = _binary("and")
    __or__ = _binary("or")
    __mod__ = _binary("mod")

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

    def cast(self, dtype: str = "float32") -> Tensor:
        """:func:`cast` of this tensor."""
        return cast(self, dtype)

    def __getattr__(self, name: str) -> Any:
        if name in UNARY_OPS:
            return lambda: apply(UNARY_OPS[name], self)
        if name in BINARY_OPS:  # t.max(u), t.min(u), t.mod(u), ...
            return lambda o: binary(name, self, o)
        raise AttributeError(name)

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


def _as_tensor(x: Any, g: Graph, integer: bool = False) -> Tensor:
    """``x`` as an operand: a number a float32 constant that broadcasts onto any axis; a Python
    int beside ``integer`` data integer data too (``ids % 3``, as in NumPy), of the smallest
    dtype holding it so the ids' dtype wins (an int64 constant made uint64 ids + 1 a float64)."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, int | float):
        t = constant(np.array([float(x)], np.float32), name=repr(x))
        if integer and isinstance(x, int) and -2**63 < x < 2**63:  # else refused as a float
            n = int(x)  # a bool too; signed above uint8: torch promotes no uint16/32/64
            small = np.min_scalar_type(n if 0 <= n < 256 else -abs(n) - 1)
            t.value_init, t.integer = np.array([n], small), True
        g.shapes.broadcasts(t.node)
        return t
    if callable(getattr(x, "tensor", None)):  # a captured size (captures.Captured)
        return x.tensor()
    raise TypeError(f"cannot use {type(x).__name__} as a tensor (numbers auto-lift; arrays "
                    "need tensig.graph.constant or leaf)")


def apply(opdef: OpDef, *operands: Any, name: str | None = None) -> Any:
    """Build the node of ``opdef`` applied to ``operands`` and record its shape constraint; on
    arrays, run it eagerly and return an array (a user-defined :class:`OpDef` as a built-in)."""
    if operands and not any(isinstance(o, Tensor) for o in operands) and \
            any(hasattr(o, "shape") for o in operands):
        return _eager(opdef, operands)
    g = next((o.graph for o in operands if isinstance(o, Tensor)), current_graph())
    ids = any(isinstance(o, Tensor) and o.integer for o in operands)
    args = tuple(_as_tensor(o, g, ids) for o in operands)
    if opdef.logic != "." and len({a.id for a in args}) < len(args):
        args = _distinct(args)
    if any(a.graph is not g for a in args):
        raise ValueError(f"{opdef.name}: operands come from different graphs")
    integer = _integer_result(opdef.name, args, integers=opdef.integers, floats=opdef.floats)
    if integer and opdef.name == "mod" and isinstance(operands[1], int) and not operands[1]:
        raise ValueError(f"mod: {args[0].name} % 0 is a remainder of integer data by zero, "
                         "which has no value (NumPy gives 0 and a warning, torch an error); "
                         f"divide by a nonzero number, or cast first ({args[0].name}"
                         ".cast('float32') % 0 is NaN)")
    nodes, label, shapes = [a.node for a in args], name or opdef.name, g.shapes
    if opdef.logic == ".":
        node = shapes.pointwise(*nodes, name=label)
    elif opdef.logic == "@" and len(nodes) in (2, 3):  # binary, or ternary as in fma
        node = shapes.compose(nodes[0], nodes[1], nodes[2] if nodes[2:] else None, name=label)
    elif opdef.logic == "T" and len(nodes) == 1:
        node = shapes.transpose(nodes[0], name=label)
    elif opdef.logic in ("@", "T"):
        raise TypeError(f"{opdef.name}: logic {opdef.logic!r} takes "
                        f"{'2 or 3' if opdef.logic == '@' else '1'} operand(s), got {len(args)}")
    else:
        node = shapes.apply(opdef.logic, *nodes, name=label, op=opdef.op)
    diff = opdef.backward is not None and any(a.differentiable for a in args)
    t = Tensor("op", node, g, [label], opdef, args, diff and not integer)
    t.integer = integer  # integer arithmetic stays integer
    return t


def _integer_result(name: str, args: Sequence[Tensor], *, integers: bool = False,
                    floats: bool = False) -> bool:
    """Whether operation ``name`` of ``args`` is integer arithmetic; integers among floats, or in
    one that computes floats, are a ``TypeError`` unless it takes integers as such."""
    integer = not integers and bool(args) and all(a.integer for a in args)
    ints = [a for a in args if a.integer]
    if ints and not integers and (floats or not integer):  # integers among floats
        other = next((f"{o.name} does not" for o in args if not o.integer),
                     f"{name} computes floats")
        raise TypeError(
            f"{name}: {ints[0].name} holds integer data and {other}; integers do not "
            f"enter float arithmetic silently.  Cast them ({ints[0].name}.cast('float32')), "
            "or index with them (G.embedding, G.one_hot)")
    return integer


def _distinct(args: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """A tensor used twice in one spec (``q`` as query and key) plays two roles with different
    axis labels: its second use becomes an identity node (an alias, no copy), so each operand
    has a buffer of its own and its gradient both parts."""
    ids = [a.id for a in args]
    return tuple(apply(UNARY_OPS["id"], a) if a.id in ids[:i] else a for i, a in enumerate(args))


def _leaf_of(name: str, o: Any) -> Any:
    """An eager operand as a leaf (an array with rows keeps them); a number stays one."""
    rows = getattr(o, "rows", None)
    if rows is not None:
        return leaf(name, o.array, batch=len(rows.batch), input=len(rows.input))
    return leaf(name, o) if hasattr(o, "shape") else o


def _eager(opdef: OpDef, operands: Sequence[Any]) -> Any:
    """Run one operation on arrays through a throwaway graph of their library, device and dtypes
    (same shape rules, same code): what ``tensig.einsum`` and its siblings give."""
    arrays = [getattr(o, "array", o) for o in operands if hasattr(o, "shape")]
    adapter = backend_for(type(arrays[0]))
    with new_graph(adapter.name, adapter.device_of(arrays[0])):
        out = apply(opdef, *(_leaf_of(f"x{i}", o) for i, o in enumerate(operands)))
        value = Model(out).run()
    if any(getattr(o, "rows", None) is not None for o in operands):
        return RowArray(value, out.shape)
    return value


def _fwd(op: str, accum: str | None = None) -> Callable[..., Code]:
    """Forward code ``t =accum op(args)`` under the operation's projections."""
    def forward(t: Tensor, *args: Tensor) -> Code:
        return Code().assign(t.val, Expr(op, tuple(a.val for a in args)), accum=accum,
                             init=accum is not None, logic=t.projections)

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
#: pointwise operations whose value is a float even of integer operands
_FLOAT_VALUED = frozenset({"div", "exp", "exp2", "log", "log2", "sin", "cos", "sqrt", "recip",
                           "recip_sqrt", "tanh", "gelu"})


def _op(name: str, *rules: Callable[..., Any] | None) -> OpDef:
    """Pointwise ``name`` with one derivative rule per operand (none: not differentiable)."""
    return OpDef(name, ".", _fwd(name), _grads(*rules) if rules else None,
                 floats=name in _FLOAT_VALUED)


BINARY_OPS: dict[str, OpDef] = {
    "add": _op("add", lambda t, a, b: (t.grad, "+"), lambda t, a, b: (t.grad, "+")),
    "sub": _op("sub", lambda t, a, b: (t.grad, "+"), lambda t, a, b: (t.grad, "-")),
    "mul": _op("mul", lambda t, a, b: (_e("mul", t.grad, b.val), "+"),
               lambda t, a, b: (_e("mul", t.grad, a.val), "+")),
    "div": _op("div", lambda t, a, b: (_e("div", t.grad, b.val), "+"),
               lambda t, a, b: (_e("div", _e("mul", t.grad, t.val), b.val), "-")),
    "max": _op("max", lambda t, a, b: (_e("mul", t.grad, _e("le", b.val, a.val)), "+"),
               lambda t, a, b: (_e("mul", t.grad, _e("lt", a.val, b.val)), "+")),
    "min": _op("min", lambda t, a, b: (_e("mul", t.grad, _e("le", a.val, b.val)), "+"),
               lambda t, a, b: (_e("mul", t.grad, _e("lt", b.val, a.val)), "+")),
    # gate(x, g): g where x passes; x gets no gradient
    **{g: _op(g, None, lambda t, a, b, g=g: (_e(g, a.val, t.grad), "+"))
       for g in ("relu_gate", "sat01_gate")},
    **{name: _op(name) for name in ("lt", "le", "eq", "ne", "and", "or", "mod")},
}

UNARY_OPS: dict[str, OpDef] = {
    "id": _op("id", lambda t, a: (t.grad, "+")),
    "relu": _op("relu", lambda t, a: (_e("relu_gate", a.val, t.grad), "+")),
    "sat01": _op("sat01", lambda t, a: (_e("sat01_gate", a.val, t.grad), "+")),
    "exp": _op("exp", lambda t, a: (_e("mul", t.grad, t.val), "+")),
    "exp2": _op("exp2", lambda t, a: (_e("mul", _e("mul", t.grad, t.val), LN2), "+")),
    "log": _op("log", lambda t, a: (_e("div", t.grad, a.val), "+")),
    "log2": _op("log2", lambda t, a: (_e("div", t.grad, _e("mul", a.val, LN2)), "+")),
    "sin": _op("sin", lambda t, a: (_e("mul", t.grad, _e("cos", a.val)), "+")),
    "cos": _op("cos", lambda t, a: (_e("mul", t.grad, _e("sin", a.val)), "-")),
    "sqrt": _op("sqrt", lambda t, a: (_e("div", t.grad, _e("mul", 2.0, t.val)), "+")),
    "recip": _op("recip", lambda t, a: (_e("mul", t.grad, _e("mul", t.val, t.val)), "-")),
    "recip_sqrt": _op("recip_sqrt", lambda t, a: (
        _e("mul", _e("mul", 0.5, t.grad), _e("pow", t.val, 3.0)), "-")),
    "neg": _op("neg", lambda t, a: (t.grad, "-")),
    "tanh": _op("tanh", lambda t, a: (
        _e("mul", t.grad, _e("sub", 1.0, _e("mul", t.val, t.val))), "+")),
    "gelu": _op("gelu", lambda t, a: (_e("gelu_grad", a.val, t.grad), "+")),
    "not": _op("not"),
}


def _pow_op(p: float) -> OpDef:
    def forward(t: Tensor, a: Tensor) -> Code:
        return Code().assign(t.val, _e("pow", a.val, p))

    def rule(t: Tensor, a: Tensor) -> tuple[Any, str]:
        if p == 2.0:
            return _e("mul", _e("mul", 2.0, a.val), t.grad), "+"
        return _e("mul", _e("mul", p, _e("pow", a.val, p - 1.0)), t.grad), "+"

    # a whole power >= 0 of integers is an integer (int64 on both backends)
    return OpDef(f"pow{p:g}", ".", forward, _grads(rule), floats=p < 0 or not p.is_integer())


COMPOSE = OpDef("matmul", "@", _fwd("mul", "+"), _grads(
    lambda t, a, b: (_e("mul", t.grad, b.val), "+"),
    lambda t, a, b: (_e("mul", a.val, t.grad), "+")))

TRANSPOSE = OpDef("transpose", "T", _fwd("id"), _grads(lambda t, a: (t.grad, "+")))


def cast(x: Tensor, dtype: str = "float32") -> Tensor:
    """``x``'s values as ``dtype`` (the gradient unchanged): how integer data enters float math."""
    if dtype not in CASTS:
        raise ValueError(f"cast: dtype is one of {', '.join(CASTS)}, not {dtype!r}")
    op = OpDef(f"cast_{dtype}", ".", _fwd(f"to_{dtype}"), _grads(lambda t, a: (t.grad, "+")),
               integers=True)
    return apply(op, x)


def leaf(name: str, value: Any, *, batch: int | Sequence[str] = 0, input: int = 0,
         axes: str | None = None) -> Tensor:
    """A data tensor (not differentiable): the first ``batch`` axes are batch axes, the last
    ``input`` axes input axes; :meth:`Model.set` feeds new data of the same shape.

    ``axes="b, t | d"`` instead names the axes as the notation writes rows (``_``: unnamed):
    inference carries each name and never fuses it with another, so broadcasting ``b`` onto
    ``t`` is a :class:`~tensig.ShapeError` naming both.  Sequence positions go on the batch row,
    as every block expects; ``@`` refuses to contract a named axis with others.
    ``batch=["b", "t"]`` names the batch axes only.
    """
    dims = tuple(int(d) for d in value.shape)
    if axes is not None and (not isinstance(batch, int) or batch or input):
        raise TypeError(f"leaf {name!r}: give the rows either by axes= or by batch=/input=")
    if not isinstance(batch, int):
        axes, batch = _batch_names(name, batch, len(dims), input), 0
    if axes is not None:
        shape = Shape.labelled(dims, axes)
    else:
        out_end = len(dims) - input
        shape = Shape(batch=dims[:batch], input=dims[out_end:], output=dims[batch:out_end])
    t = _valued("leaf", name, shape, value)
    t.integer = _is_integer(value)
    return t


def _batch_names(name: str, names: Sequence[str], ndim: int, input: int) -> str:
    """``batch=["b", "t"]`` written as ``axes=`` (``"b, t | _"``): one checker, one error."""
    if isinstance(names, str) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"leaf {name!r}: batch= is a number of axes or a list of axis names, "
                        f"not {names!r}")
    unnamed = ["_"] * max(ndim - len(names) - input, 0)
    inputs = ", ".join(["_"] * input) + " -> " if input else ""
    return f"{', '.join(names)} | {inputs}{', '.join(unnamed)}"


def _is_integer(value: Any) -> bool:
    """Whether an array holds integers (booleans are not ids)."""
    dtype = getattr(value, "dtype", None)
    return dtype is not None and is_integer(dtype)


def constant(value: Any, *, name: str = "const") -> Tensor:
    """A constant (output axes only); numbers in expressions become these."""
    arr = np.asarray(value, dtype=np.float32)
    return _valued("const", name, Shape(output=arr.shape), arr)


def _valued(kind: str, name: str, shape: Shape, value: Any, g: Graph | None = None) -> Tensor:
    """A tensor of ``kind`` and ``shape`` valued ``value`` (or its call) at initialisation."""
    g = g or current_graph()
    t = Tensor(kind, g.shapes.tensor(name, shape), g, [name])
    t.value_init = value
    return t


class Model:
    """Compiled routines around a loss (or any output): initialise, forward, update."""

    def __init__(self, output: Tensor):
        self.output = output
        self.graph = output.graph
        self.graph.solve()
        self.graph.shapes.commit()  # its arrays are made at these shapes
        self.tensors = _topo(output)
        self.forward = compile_code(output.forward_code(), self.graph.array_type)
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
                store.write(t.val, self.graph.array(t.init(t.shape.int_dims)))
            elif t.value_init is not None:
                self.set(t, t.value_init)

    def set(self, t: Tensor, value: Any) -> None:
        """Feed ``value`` (of the declared shape and kind; a callable gives it)."""
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
