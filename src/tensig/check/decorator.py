"""``@tensig.shaped``: check every call against a function's shape annotations.

At decoration time the annotations are read once (:func:`tensig.core.annotations.signature_of`) and
compiled twice.  The fast path is generated Python source, straight-line for the function at
hand: read ``.shape``, compare its length, unpack the sizes, bind names to local variables,
evaluate ``T + 1`` as ``v1 + 1``, solve ``2*h`` with one ``divmod``.  Anything not plainly right
(a mismatch, an expression with two unknowns, an unseen dtype) hands the call to the
interpreter: per annotation a list of operations over a dict of bindings that records where
each name was bound, so it can say so, with the expression items of a call as one problem for
the solver (:mod:`tensig.core.solver`).  The fast path only accepts or defers, and a
differential test checks that it accepts exactly what the interpreter accepts.  The fast path
builds no ``Dim`` per call: about 1.5 us per call for two numpy arguments and a return value
(``bench/bench_runtime.py``).

>>> import numpy as np
>>> from tensig.core.annotations import Float
>>> @shaped
... def pool(x: Float[np.ndarray, "B T d"]) -> Float[np.ndarray, "B d"]:
...     return x.mean(axis=0)  # the wrong axis: T should go, not B
>>> pool(np.zeros((3, 5, 7))).shape
Traceback (most recent call last):
...
tensig.check.decorator.SignatureError: pool(): the return value axis 0 ('B') has size 5, but B = 3 was bound by argument 'x' axis 0
    B d
    ^
  the return value has shape (5, 7)
  B = 3: bound by argument 'x' axis 0 (shape (3, 5, 7))
hint: 5 is the size of T (bound by argument 'x' axis 1): are B and T mixed up (a wrong axis or a swap)?

What a runtime check cannot do: when two names happen to have the same size (``B == T == 16``)
the wrong-axis ``pool`` above returns ``[16, d]``, which *is* ``[B, d]``; no check of sizes can
see it.  Test with sizes that cannot collide (:func:`tensig.testing.sizes`), or prove the body
with ``tensig.verify``.

Binding rules:

- a name binds at its first occurrence (arguments in signature order, then the return value);
- an expression is a relation for the solver (:class:`~tensig.core.solver.LinearRel`): with one
  unknown name that occurs linearly it solves for it: ``T + 1`` seen first binds
  ``T = size - 1``; ``2*h`` binds ``h = size // 2`` and must divide exactly; ``h*w`` with ``h``
  known binds ``w``.  An expression with several unknowns waits until the other arguments bind
  them; one whose names never decide it cannot be checked and is skipped;
- a named variadic (``*v``, ``..v..``) binds a tuple of sizes; ``...`` binds nothing; at most
  one unbound variadic per argument can be split off (bind the others in earlier arguments);
  ``*#v`` accepts axes that broadcast against its binding (jaxtyping's rule);
- ``#n`` and ``#4`` also accept size 1, which binds nothing;
- ``{n}``/``{self.size}`` read the call's arguments and ``min(a, b)`` the bound sizes, once
  their names are bound (the interpreter does these; the generated path hands them over);
- ``_`` matches any size; a size that is not an integer (a dask array's unknown ``nan``) is
  not checked;
- the dtype families (``Float``, ``Int``, ``UInt``, ``Float32``...) check the dtype; ``None``
  is accepted for ``Optional`` annotations and parameters whose default is ``None``;
- ``isinstance(x, Float[A, "n"])`` inside the call checks against the call's bindings and
  extends them (read from the wrapper's frame, so the fast path publishes nothing).

Compilers: under ``torch.compile`` (``torch.compiler.is_compiling()``) the check is
**skipped**, so dynamo traces only the function body and ``fullgraph=True`` holds; run the
function eagerly (tests) to check it.  Under ``jax.jit`` the check **runs at trace time**:
tracers have static integer shapes and numpy dtypes, so a mismatch raises while tracing, once
per compilation, and costs nothing in the compiled function.
"""  # noqa: E501

from __future__ import annotations

import contextvars
import functools
import inspect
import re
import sys
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar, overload

from tensig.core.annotations import (
    _ACCEPT,
    _PYTHON_DTYPES,
    AnnotationShape,
    Broadcastable,
    Deferred,
    FunctionSignature,
    RowVariable,
    ShapeSpecMarker,
    _is_name,
    dtype_accepts,
    install_instance_check,
    parse_annotation,
    signature_of,
    words_hint,
)
from tensig.core.dimcode import compile_dim, linear_split, solve_lines
from tensig.core.dimcode import emit as _emit
from tensig.core.dims import Dim
from tensig.core.errors import ShapeError
from tensig.core.solver import DimVar, LinearRel, Origin, Solver

__all__ = ["SignatureError", "compile_dim", "instance_check", "match_shape", "print_bindings",
           "shape_scope", "shaped"]

F = TypeVar("F", bound=Callable[..., Any])
_NAME, _FIXED, _EXPR, _VAR, _ANON = 0, 1, 2, 3, 4
_BCAST = 16  # flag: size 1 also fits (jaxtyping's ``#``), and binds nothing
_ARGS = "{}"  # the binding that holds a call's arguments, for deferred ``{name}`` sizes
_EMPTY = inspect.Parameter.empty
_NO_POSITION = sys.maxsize


class SignatureError(ShapeError):
    """A call does not fit its function's shape annotations (a :class:`tensig.ShapeError`).

    Besides :class:`~tensig.ShapeError`'s attributes it carries ``function`` (the qualified
    name), ``argument`` (the parameter name, ``"return"`` or ``"return[i]"``), ``axis`` (the
    array axis, ``None`` for a rank or dtype mismatch), ``expected`` (the annotation's item for
    that axis, or the whole annotation), ``actual`` (the size, sizes or shape found) and
    ``bound_by`` (where the conflicting name was bound first, or ``None``).
    """

    def __init__(self, reason: str, *, function: str, argument: str, axis: int | None,
                 expected: str, actual: object, bound_by: str | None = None,
                 **facts: Any):
        self.function = function
        self.argument = argument
        self.axis = axis
        self.expected = expected
        self.actual = actual
        self.bound_by = bound_by
        super().__init__(reason, **facts)


class _Expr:
    """A compiled expression item: the polynomial, its text, its names (sorted) and its value
    as a compiled function of the bound sizes.

    The interpreter evaluates it when its names are bound and relates it to an axis's size
    through the solver (:class:`~tensig.core.solver.LinearRel`) when they are not; the
    generated path compiles it to Python.
    """

    __slots__ = ("dim", "evaluate", "symbols", "text")

    def __init__(self, d: Dim):
        self.dim = d
        self.text = str(d)
        self.symbols = tuple(sorted(d.symbols))
        self.evaluate = compile_dim(d)


class _DeferredExpr:
    """A :class:`~tensig.core.annotations.Deferred` size: evaluated once its names are bound.

    ``{...}`` parts read the call's arguments (``{n}``, ``{self.size}``), then the text is a
    Python expression of the bound sizes with ``min`` and ``max``: jaxtyping's f-string axes.
    It is never solved for a name.
    """

    __slots__ = ("code", "symbols", "text")

    def __init__(self, item: Deferred):
        self.text = item.text
        self.symbols = tuple(sorted(item.symbols)) + ((_ARGS,) if "{" in item.text else ())
        self.code = item.text

    def evaluate(self, env: dict[str, Any]) -> Any:
        text = self.code
        if "{" in text:
            arguments = env[_ARGS]
            text = _BRACES.sub(lambda m: str(_eval(m.group(1), arguments)), text)
        return _eval(text, env)


def _eval(text: str, names: dict[str, Any]) -> Any:
    try:
        return eval(_compiled(text), {"__builtins__": {}, "min": min, "max": max}, names)
    except Exception as e:
        raise TypeError(f"the deferred size {text!r} cannot be evaluated: "
                        f"{type(e).__name__}: {e}") from None


@functools.lru_cache(maxsize=1024)
def _compiled(text: str) -> Any:
    """A deferred size's code, compiled once per text (compiling it costs more than running
    it; a ``{...}`` part makes one text per argument value, hence the bound)."""
    return compile(text, "<deferred size>", "eval")


_BRACES = re.compile(r"\{([^{}]*)\}")


# --------------------------------------------------------------------------------------------
# matching one shape
# --------------------------------------------------------------------------------------------


class _Mismatch(Exception):
    """Raised inside a call's check; turned into a :class:`SignatureError` with full context."""

    def __init__(self, kind: str, label: str, program: _Program | None, shape: Any,
                 axis: int | None = None, index: int | None = None, **facts: Any):
        super().__init__(kind)
        self.kind = kind
        self.label = label
        self.program = program
        self.shape = shape
        self.axis = axis
        self.index = index
        self.facts = facts


def _is_size(x: object) -> bool:
    return isinstance(x, int) or (hasattr(x, "__index__") and not isinstance(x, float))


class _Program:
    """The precompiled check of one annotation (cached per annotation): the interpreter's unit.

    ``ops`` holds ``(code, payload, item index)`` per item in memory order: a name to bind, a
    fixed size, a compiled expression, a row variable's key, or ``-1`` for ``_``.
    """

    __slots__ = ("keys", "loose", "n_fixed", "ops", "rank", "shape")

    def __init__(self, shape: AnnotationShape):
        self.shape = shape
        ops: list[tuple[int, Any, int]] = []
        for index, item in enumerate(shape.items):
            flag = 0
            if isinstance(item, Broadcastable):
                flag, item = _BCAST, item.item
            if isinstance(item, RowVariable):
                code = _ANON if item.name is None else _VAR | (_BCAST * item.broadcast)
                ops.append((code, item.key, index))
            elif item is Any:
                ops.append((-1, None, index))
            elif isinstance(item, int):
                ops.append((_FIXED | flag, item, index))
            elif isinstance(item, Deferred):
                ops.append((_EXPR | flag, _DeferredExpr(item), index))
            elif _is_name(item):
                ops.append((_NAME | flag, next(iter(item.symbols)), index))
            else:
                ops.append((_EXPR | flag, _Expr(item), index))
        self.ops = tuple(ops)
        self.keys = tuple(p for c, p, _ in ops if c & ~_BCAST in (_VAR, _ANON))
        self.loose = frozenset(p for c, p, _ in ops if c == _VAR | _BCAST)
        self.n_fixed = len(ops) - len(self.keys)
        self.rank = None if self.keys else len(ops)

    def match(self, shape: Any, env: dict[str, Any], origins: dict[str, tuple[Any, ...]],
              label: str, pending: _Relations) -> None:
        """Check ``shape`` against the annotation, binding new names into ``env``."""
        lengths = self.row_lengths(shape, env, label)
        axis = 0
        for code, payload, index in self.ops:
            if code & ~_BCAST in (_VAR, _ANON):
                n = lengths[payload]
                if code != _ANON:
                    _check_row(payload, tuple(shape[axis:axis + n]), env, origins, label, self,
                               shape, axis, index, code & _BCAST)
                axis += n
                continue
            size = shape[axis]
            if code & _BCAST:
                if size == 1:
                    axis += 1
                    continue
                code &= ~_BCAST
            if code == _NAME:
                bound = env.get(payload)
                if bound is None:
                    if size == size:  # not NaN (an unknown dask size)
                        env[payload] = size
                        origins[payload] = (label, axis, shape, None)
                elif bound != size and _is_size(size):
                    raise _Mismatch("name", label, self, shape, axis, index, name=payload,
                                    bound=bound)
            elif code == _FIXED:
                if size != payload and _is_size(size):
                    raise _Mismatch("fixed", label, self, shape, axis, index)
            elif code == _EXPR:
                pending.add(payload, size, env, origins, label, self, shape, axis, index)
            axis += 1

    def row_lengths(self, shape: Any, env: dict[str, Any], label: str) -> dict[str, int]:
        """How many axes each row variable takes in ``shape`` (a rank error if none fits)."""
        free = len(shape) - self.n_fixed
        unknown: dict[str, int] = {}
        lengths: dict[str, int] = {}
        for key in self.keys:
            bound = env.get(key)
            if bound is None or key in self.loose or "#" + key in env:  # *#v: any length
                unknown[key] = unknown.get(key, 0) + 1
            else:
                lengths[key] = len(bound)
                free -= len(bound)
        if len(unknown) > 1:
            raise _Mismatch("ambiguous", label, self, shape, names=tuple(unknown))
        if unknown:
            (key, count), = unknown.items()
            if free < 0 or free % count:
                raise _Mismatch("rank", label, self, shape)
            lengths[key] = free // count
        elif free != 0:
            raise _Mismatch("rank", label, self, shape)
        return lengths


def _check_row(key: str, segment: tuple[Any, ...], env: dict[str, Any],
               origins: dict[str, tuple[Any, ...]], label: str, program: _Program, shape: Any,
               axis: int, index: int, broadcast: int = 0) -> None:
    """Bind a row variable to its axes, or compare them with its binding.

    A broadcastable one (``*#v``) accepts axes that broadcast against its binding, and binds
    the broadcast of both (jaxtyping's rule).
    """
    bound = env.get(key)
    if bound is None:
        env[key] = segment
        origins[key] = (label, axis, shape, len(segment))
        if broadcast:
            env["#" + key] = True
    elif bound != segment and all(_is_size(s) for s in segment):
        loose = env.get("#" + key, False)
        joined = _broadcast(bound, segment) if broadcast or loose else None
        if joined is None or (not broadcast and joined != segment) \
                or (not loose and joined != bound):
            raise _Mismatch("rowvar", label, program, shape, axis, index, name=key,
                            bound=bound, segment=segment)
        if loose:  # jaxtyping: the binding takes this occurrence's broadcastability
            env[key] = joined
            if not broadcast:
                del env["#" + key]


def _broadcast(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """NumPy's broadcast of two shapes, or ``None``."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b, strict=True):
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)
    return tuple(out)


class _Relations:
    """A call's expression items as one solver problem (built on the first one met).

    Each ``2*h``/``T + 1`` item is a :class:`~tensig.core.solver.LinearRel` between its names and
    the axis's size: evaluated once its names are bound, solved for its one unknown linear name
    (``h*w`` with ``h`` known binds ``w``), waiting otherwise.  The names' sizes live in the
    interpreter's ``env`` (where plain names bind, with the origins messages need): each run
    gives the solver the sizes bound since, and writes back what it solved.  Deferred sizes
    (``{n}``, ``min(a, b)``) are Python, not polynomials: they are evaluated once bound.
    """

    __slots__ = ("deferred", "solver", "vars", "where")

    def __init__(self) -> None:  # nothing built until an expression item is met
        self.solver: Solver | None = None
        self.deferred: list[tuple[Any, ...]] = []

    def _start(self) -> Solver:
        self.solver = Solver()
        self.vars: dict[str, DimVar] = {}
        self.where: dict[int, tuple[Any, ...]] = {}  # id(relation origin) -> the item's place
        return self.solver

    def add(self, expr: _Expr | _DeferredExpr, size: Any, env: dict[str, Any],
            origins: dict[str, tuple[Any, ...]], label: str, program: _Program, shape: Any,
            axis: int, index: int) -> None:
        """Relate an expression item to the size it has in this call."""
        if not _is_size(size):  # an unknown (dask ``nan``) size checks and binds nothing
            return
        place = (expr, size, label, program, shape, axis, index)
        if isinstance(expr, _DeferredExpr):
            self.deferred.append(place)
            self._evaluate_deferred(env)
            return
        if all(n in env for n in expr.symbols):  # nothing to solve: no solver is needed
            value = expr.evaluate(env)
            if value != size:
                raise _Mismatch("expr", label, program, shape, axis, index, expr=expr,
                                value=value)
            return
        solver = self.solver if self.solver is not None else self._start()
        names = {n: self.vars.get(n) or self.vars.setdefault(n, DimVar(n)) for n in expr.symbols}
        origin = _origin(label, axis, expr.text)
        self.where[id(origin)] = place

        def report(kind: str, facts: dict[str, Any]) -> Exception:
            if kind == "no_solution":
                return _Mismatch("solve", label, program, shape, axis, index, expr=expr,
                                 name=facts["name"])
            return _Mismatch("expr", label, program, shape, axis, index, expr=expr,
                             value=facts["value"])

        solver.add(LinearRel(DimVar(None, int(size)), expr.dim, names, origin, report))
        self.run(env, origins)

    def run(self, env: dict[str, Any], origins: dict[str, tuple[Any, ...]]) -> None:
        """Propagate the sizes bound so far; bind in ``env`` what the solver solved."""
        solver = self.solver
        if solver is None:
            return
        for name, var in self.vars.items():
            if var.value is None and name in env:
                solver.set_value(var, int(env[name]), _BOUND)
        solver.run()
        for name, var in self.vars.items():
            if var.value is not None and name not in env:
                expr, size, label, _, shape, axis, _ = self.where[id(var.origin)]
                env[name] = var.value
                origins[name] = (label, axis, shape, (expr.text, size))

    def resolve(self, env: dict[str, Any], origins: dict[str, tuple[Any, ...]]) -> None:
        """Settle everything the bindings so far determine; what they do not is skipped."""
        self.run(env, origins)
        self._evaluate_deferred(env)

    def _evaluate_deferred(self, env: dict[str, Any]) -> None:
        waiting = []
        for place in self.deferred:
            expr, size, label, program, shape, axis, index = place
            if any(s not in env for s in expr.symbols):
                waiting.append(place)
                continue
            value = expr.evaluate(env)
            if value != size and _is_size(value):
                raise _Mismatch("expr", label, program, shape, axis, index, expr=expr,
                                value=value)
        self.deferred = waiting


_BOUND = Origin(note="bound by an earlier item")


@functools.lru_cache(maxsize=4096)
def _origin(label: str, axis: int, text: str) -> Origin:
    """One :class:`Origin` per place (building a frozen dataclass per call costs microseconds)."""
    return Origin(operand=label, position=axis, note=text)


@functools.lru_cache(maxsize=1024)
def _program(shape: AnnotationShape) -> _Program:
    return _Program(shape)


def match_shape(shape: Sequence[int], annotation: str | AnnotationShape,
                sizes: dict[str, Any] | None = None) -> dict[str, Any]:
    """Match one concrete shape against an annotation; return every binding (names, row vars).

    ``sizes`` are bindings known beforehand (not modified).  A mismatch raises
    :class:`SignatureError` (function ``match_shape``, argument ``shape``).

    >>> match_shape((3, 6, 4), "B, 2*h, ..v..")
    {'B': 3, 'h': 3, 'v': (4,)}
    >>> match_shape((3, 4), "B T", {"T": 5})
    Traceback (most recent call last):
    ...
    tensig.check.decorator.SignatureError: match_shape(): argument 'shape' axis 1 ('T') has size 4, but T = 5 was given
        B T
          ^
      argument 'shape' has shape (3, 4)
    """  # noqa: E501
    ann = annotation if isinstance(annotation, AnnotationShape) else parse_annotation(annotation)
    env = dict(sizes or {})
    origins = {k: ("given", None, None, None) for k in env}
    pending = _Relations()
    try:
        _program(ann).match(tuple(shape), env, origins, "shape", pending)
        pending.resolve(env, origins)
    except _Mismatch as m:
        raise _error("match_shape", m, env, origins) from None
    return env


# --------------------------------------------------------------------------------------------
# error messages
# --------------------------------------------------------------------------------------------


def _where(label: str) -> str:
    if label == "return":
        return "the return value"
    if label.startswith("return["):
        return f"the return value's element {label[7:-1]}"
    return f"argument {label!r}"


def _shape_text(shape: Any) -> str:
    items = [str(s) for s in shape]
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _origin_text(origin: tuple[Any, ...]) -> str:
    label, axis, _, via = origin
    if label == "given":
        return "given"
    if isinstance(via, int):  # a row variable of ``via`` axes
        axes = f"axes {axis}..{axis + via - 1}" if via else "(no axes)"
        return f"bound by {_where(label)} {axes}"
    text = f"bound by {_where(label)} axis {axis}"
    if via is not None:
        text += f" (from {via[0]} = {via[1]})"
    return text


def _display(key: str) -> str:
    """How a row variable's binding key reads in a message: ``..v..``, ``... (batch row)``."""
    if key.startswith("..."):
        return f"... ({key[3:]} row)"
    return f"..{key}.."


def _swap_hint(size: Any, name: str, env: dict[str, Any],
               origins: dict[str, tuple[Any, ...]]) -> str | None:
    others = [k for k, v in env.items() if v == size and k != name and isinstance(v, int)
              and not isinstance(v, bool)]
    if not others:
        return None
    other = others[0]
    return (f"{size} is the size of {other} ({_origin_text(origins[other])}): are {name} and "
            f"{other} mixed up (a wrong axis or a swap)?")


def _rank_hint(m: _Mismatch) -> str | None:
    ann = m.program.shape
    shape = tuple(m.shape)
    if ann.rank is None:
        return None
    if len(shape) == ann.rank + 1 and 1 in shape:
        return (f"axis {shape.index(1)} of size 1 has no place in the annotation: squeeze it, "
                "or annotate it (a fixed 1)")
    if len(shape) + 1 == ann.rank and 1 in ann.items:
        return (f"the annotation has a size-1 axis at {ann.items.index(1)}: insert it "
                "(x[:, None] or x.unsqueeze)")
    return None


def _needed_rank(ann: AnnotationShape, env: dict[str, Any],
                 origins: dict[str, tuple[Any, ...]]) -> tuple[str, str]:
    """How many axes an annotation needs given the bound row variables, and which are bound."""
    if ann.rank is not None:
        return str(ann.rank), ""
    keys = [v.key for v in ann.row_variables]
    known = [k for k in dict.fromkeys(keys) if k in env]
    need = ann.min_rank + sum(len(env[k]) for k in keys if k in env)
    text = str(need) if len(known) == len(set(keys)) else f"at least {need}"
    bound = "".join(f" with {_display(k)} = {_shape_text(env[k])} {_origin_text(origins[k])}"
                    for k in known)
    return text, bound


def _reason(fname: str, m: _Mismatch, env: dict[str, Any],
            origins: dict[str, tuple[Any, ...]]) -> tuple[str, str, Any, str | None]:
    """``(reason, expected, actual, bound_by)`` for a mismatch."""
    ann = m.program.shape
    where = _where(m.label)
    item = "" if m.index is None else str(ann.items[m.index]).replace("typing.Any", "_")
    head = f"{fname}(): {where} axis {m.axis} ({item!r}) has size"
    f = m.facts
    if m.kind == "rank":
        need, bound = _needed_rank(ann, env, origins)
        return (f"{fname}(): {where} has {len(m.shape)} axes (shape {_shape_text(m.shape)}), "
                f"but its annotation {ann.text!r} has {need}{bound}", ann.text, tuple(m.shape),
                None)
    if m.kind == "name":
        bound_by = _origin_text(origins[f["name"]])
        return (f"{head} {m.shape[m.axis]}, but {f['name']} = {f['bound']} was {bound_by}",
                item, m.shape[m.axis], bound_by)
    if m.kind == "fixed":
        return (f"{fname}(): {where} axis {m.axis} has size {m.shape[m.axis]}, but the "
                f"annotation fixes it to {item}", item, m.shape[m.axis], None)
    if m.kind == "expr":
        expr = f["expr"]
        uses = ", ".join(f"{n} = {env[n]} ({_origin_text(origins[n])})" for n in expr.symbols
                         if n != _ARGS and n in env)
        return (f"{head} {m.shape[m.axis]}, but {expr.text} = {f['value']} with {uses}", item,
                m.shape[m.axis], uses)
    if m.kind == "solve":
        expr, name = f["expr"], f["name"]
        known = [n for n in expr.symbols if n != name]
        uses = "".join(f", {n} = {env[n]}" for n in known)
        return (f"{head} {m.shape[m.axis]}, but no whole {name} >= 0 gives {expr.text} = "
                f"{m.shape[m.axis]}{uses}", item, m.shape[m.axis], None)
    if m.kind == "rowvar":
        key, segment = f["name"], f["segment"]
        origin = origins[key]
        last = m.axis + len(segment) - 1  # type: ignore[operator]
        return (f"{fname}(): {where} axes {m.axis}..{last} ({item}) have sizes "
                f"{_shape_text(segment)}, but {_display(key)} = {_shape_text(f['bound'])} was "
                f"{_origin_text(origin)}", item, segment, _origin_text(origin))
    if m.kind == "ambiguous":
        names = " and ".join(_display(k) for k in f["names"])
        return (f"{fname}(): {where} has shape {_shape_text(m.shape)}: cannot tell how many "
                f"axes belong to {names}; bind all but one of them in an earlier argument",
                ann.text, tuple(m.shape), None)
    if m.kind == "dtype":
        return (f"{fname}(): {where} has dtype {f['dtype']}, but its annotation "
                f"{f['marker']!r} needs {f['marker'].need}", f["marker"].dtype, f["dtype"], None)
    raise AssertionError(m.kind)


def _error(fname: str, m: _Mismatch, env: dict[str, Any],
           origins: dict[str, tuple[Any, ...]]) -> Exception:
    """The user-facing error for a mismatch (a :class:`SignatureError` or a ``TypeError``)."""
    where = _where(m.label)
    if m.kind == "noshape":
        return TypeError(f"{fname}(): {where} is a {type(m.shape).__name__}, which has no "
                         f".shape; its annotation is {m.facts['marker']!r}")
    if m.kind == "wrapper":
        return TypeError(f"{fname}(): {where} is a {type(m.shape).__name__}, but its annotation "
                         f"is {m.facts['marker']!r}")
    if m.kind == "none":
        return TypeError(f"{fname}(): {where} is None, but its annotation "
                         f"{m.facts['marker']!r} is not Optional")
    if m.kind == "notuple":
        return TypeError(f"{fname}(): the return value is a {type(m.shape).__name__}, not a "
                         f"tuple of {m.facts['length']} as annotated")
    reason, expected, actual, bound_by = _reason(fname, m, env, origins)
    ann = m.program.shape
    spans = ann.item_spans
    span = spans[m.index] if m.index is not None and m.index < len(spans) else (0, len(ann.text))
    lines = [f"{where} has shape {_shape_text(m.shape)}"]
    name = m.facts.get("name")
    if m.kind in ("name", "rowvar") and origins[name][0] != "given":
        origin = origins[name]
        shown = _display(name) if m.kind == "rowvar" else name
        lines.append(f"{shown} = {_value_text(env[name])}: {_origin_text(origin)} "
                     f"(shape {_shape_text(origin[2])})")
    hint = words_hint(ann)
    if hint is None and m.kind in ("name", "expr", "solve") and m.axis is not None:
        hint = _swap_hint(m.shape[m.axis], name or _item_name(ann, m.index), env, origins)
    if hint is None and m.kind == "rank":
        hint = _rank_hint(m)
    return SignatureError(reason, function=fname, argument=m.label, axis=m.axis,
                          expected=expected, actual=actual, bound_by=bound_by, spec=ann.text,
                          span=(span[0], max(span[1], span[0] + 1)), label=name,
                          sizes=_sizes(m, env), origins=lines, hint=hint)


def _item_name(ann: AnnotationShape, index: int | None) -> str:
    return "_" if index is None else str(ann.items[index])


def _value_text(value: Any) -> str:
    return _shape_text(value) if isinstance(value, tuple) else str(value)


def _sizes(m: _Mismatch, env: dict[str, Any]) -> tuple[Any, ...]:
    name = m.facts.get("name")
    if m.axis is None:
        return (tuple(m.shape),)
    actual = m.facts.get("segment", m.shape[m.axis])
    expected = env.get(name) if name is not None else m.facts.get("value")
    return (actual,) if expected is None else (actual, expected)


# --------------------------------------------------------------------------------------------
# the bindings of the current call: isinstance, shape_scope, print_bindings
# --------------------------------------------------------------------------------------------

_SCOPE: contextvars.ContextVar[tuple[Any, dict[str, Any]] | None] = \
    contextvars.ContextVar("tensig_shape_scope", default=None)
_FAST_FRAMES: weakref.WeakKeyDictionary[Any, tuple[tuple[str, str], ...]] = \
    weakref.WeakKeyDictionary()
"""Generated wrappers' code objects -> ``(size name, local variable)``: a checked call's
bindings are read from its frame when asked (``isinstance``), so calls publish nothing."""
_EXTRA = threading.local()


class shape_scope:
    """A scope of bindings for ``isinstance`` checks (jaxtyping's ``jaxtyped("context")``).

    Inside, ``isinstance(x, Float[np.ndarray, "B T"])`` binds ``B`` and ``T`` and later checks
    must agree; the dict of bindings is what ``with`` yields.  Every ``@shaped`` call is such
    a scope of its own, holding its arguments' bindings (a nested checked call has its own, as
    jaxtyping's memo).

    >>> import numpy as np
    >>> from tensig.core.annotations import Float
    >>> with shape_scope() as sizes:
    ...     isinstance(np.zeros((2, 3)), Float[np.ndarray, "B T"]), sizes
    (True, {'B': 2, 'T': 3})
    >>> with shape_scope():
    ...     isinstance(np.zeros((2, 3)), Float[np.ndarray, "B T"])
    ...     isinstance(np.zeros((3, 3)), Float[np.ndarray, "B T"])
    True
    False
    """

    def __init__(self) -> None:
        self.env: dict[str, Any] = {}
        self.token: Any = None

    def __enter__(self) -> dict[str, Any]:
        self.token = _SCOPE.set((sys._getframe(1), self.env))
        return self.env

    def __exit__(self, *exc: object) -> None:
        _SCOPE.reset(self.token)


def _scope() -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``(bindings, sink)`` of the innermost checked call or scope around the caller.

    The interpreter's and ``shape_scope``'s bindings are one dict (``sink is bindings``); a
    generated wrapper's are its local variables, read from its frame, and new bindings go to a
    side table for that frame (dropped once the frame is no longer on the stack).
    """
    scope = _SCOPE.get()
    frame = sys._getframe(2)
    live: set[int] = set()
    found: tuple[dict[str, Any], dict[str, Any]] | None = None
    while frame is not None:
        live.add(id(frame))
        code = frame.f_code
        if found is None:
            if scope is not None and frame is scope[0]:
                found = scope[1], scope[1]
            elif code is _CALL_CODE:
                env = frame.f_locals.get("state", ({},))[0]
                found = env, env
            elif code is _UNCHECKED_CODE:
                env = frame.f_locals["bindings"]
                found = env, env
            elif code in _FAST_FRAMES:
                found = _fast_scope(frame, _FAST_FRAMES[code])
        frame = frame.f_back
    table = getattr(_EXTRA, "frames", {})
    for key in [k for k in table if k not in live]:
        del table[key]
    return found


def _fast_scope(frame: Any, names: tuple[tuple[str, str], ...]
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    values = frame.f_locals
    env = {name: values[local] for name, local in names
           if values.get(local, _UNBOUND) is not _UNBOUND}
    table = getattr(_EXTRA, "frames", None)
    if table is None:
        table = _EXTRA.frames = {}
    _, extra = table.setdefault(id(frame), (frame, {}))
    env.update(extra)
    return env, extra


def instance_check(obj: Any, array_type: Any, marker: ShapeSpecMarker) -> bool:
    """``isinstance(obj, Float[ArrayType, "B T"])``: type, dtype and shape, with the current
    call's bindings (inside a checked call or a :func:`shape_scope`), which a fit extends."""
    if isinstance(array_type, type) and not isinstance(obj, array_type) \
            and not (marker.scalar is not None and isinstance(obj, marker.scalar)):
        return False
    scope = _scope()
    env, sink = scope if scope is not None else ({}, {})
    trial: dict[str, Any] = dict(env)
    origins: dict[str, tuple[Any, ...]] = {k: ("given", None, None, None) for k in env}
    try:
        pending = _Relations()
        _check_value(obj, "isinstance", _program(marker.shape), marker, False, trial, origins,
                     pending)
        pending.resolve(trial, origins)
    except _Mismatch:
        return False
    sink.update((k, v) for k, v in trial.items() if k not in env)
    return True


install_instance_check(instance_check)


def print_bindings() -> None:
    """Print the sizes bound so far in the current checked call (jaxtyping's
    ``print_bindings``), for debugging."""
    scope = _scope()
    env = {k: v for k, v in (scope[0] if scope is not None else {}).items()
           if k != _ARGS and not k.startswith("#")}
    if not env:
        print("No sizes are bound here (call print_bindings() inside a @shaped function).")
        return
    print("The current values of each size in the shape annotations:")
    for name, value in env.items():
        shown = f"*{name}" if isinstance(value, tuple) else name
        print(f"{shown}={value}")


# --------------------------------------------------------------------------------------------
# the decorator
# --------------------------------------------------------------------------------------------


def _compiling() -> bool:
    """Whether torch.compile (dynamo) is tracing: then the check is skipped.  Dynamo is not
    imported by ``import torch``; until something imports it nothing can be tracing, and the
    membership test saves the call (a tenth of the decorator's cost on torch)."""
    torch = sys.modules.get("torch")
    return torch is not None and "torch._dynamo" in sys.modules and \
        torch.compiler.is_compiling()


def _slots(sig: FunctionSignature) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """Per parameter ``(label, position, name, default, program, marker, optional)``."""
    single, variadic = [], []
    for p in sig.parameters:
        entry = (p.name, _NO_POSITION if p.position is None else p.position, p.name,
                 p.default, _program(p.marker.shape), p.marker, p.optional)
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            variadic.append((p.kind, *entry))
        else:
            single.append(entry)
    return tuple(single), tuple(variadic)


def _check_value(x: Any, label: str, program: _Program, marker: ShapeSpecMarker,
                 optional: bool, env: dict[str, Any], origins: dict[str, tuple[Any, ...]],
                 pending: _Relations) -> None:
    """Check one value (an argument or the return value) against its compiled annotation."""
    if x is None:
        if optional:
            return
        raise _Mismatch("none", label, program, x, marker=marker)
    if marker.pytree:
        leaf_marker = ShapeSpecMarker(marker.shape, marker.dtype, marker.scalar,
                                      family=marker.family)
        for path, leaf in _leaves(x, label):
            _check_value(leaf, path, program, leaf_marker, False, env, origins, pending)
        return
    wrapper = getattr(marker, "wrapper", None)  # Padded[...] (tensig.execution.padding): its type
    if wrapper is not None and not isinstance(x, wrapper):
        raise _Mismatch("wrapper", label, program, x, marker=marker)
    try:
        shape = x.shape
        dtype = x.dtype if marker.dtype is not None else None
    except AttributeError:
        scalar = marker.scalar
        if scalar is None or not isinstance(x, scalar) or (scalar is int and x is True) \
                or (scalar is int and x is False):
            raise _Mismatch("noshape", label, program, x, marker=marker) from None
        shape, dtype = (), _PYTHON_DTYPES[type(x) if type(x) in _PYTHON_DTYPES else scalar]
    program.match(shape, env, origins, label, pending)
    if marker.dtype is not None and not dtype_accepts(marker.dtype, dtype):
        raise _Mismatch("dtype", label, program, shape, dtype=dtype, marker=marker)


_MAX_LEAVES = 1_000_000


def _leaves(tree: Any, label: str) -> Iterator[tuple[str, Any]]:
    """The leaves of nested dicts, lists and tuples, with their paths (``x['a'][0]``)."""
    stack = [(label, tree)]
    count = 0
    while stack:
        path, node = stack.pop()
        count += 1
        if count > _MAX_LEAVES:
            raise TypeError(f"{label}: a PyTree of more than {_MAX_LEAVES} nodes")
        if isinstance(node, dict):
            stack.extend((f"{path}[{k!r}]", v) for k, v in reversed(node.items()))
        elif isinstance(node, list | tuple):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(node))))
        else:
            yield path, node


def _check_variadic(variadic: tuple[Any, ...], sig: FunctionSignature, args: tuple[Any, ...],
                    kwargs: dict[str, Any], env: dict[str, Any],
                    origins: dict[str, tuple[Any, ...]], pending: _Relations) -> None:
    named = {p.name for p in sig.parameters}
    for kind, label, position, _, _, program, marker, _ in variadic:
        if kind == inspect.Parameter.VAR_POSITIONAL:
            values = [(f"{label}[{i}]", x) for i, x in enumerate(args[position:])]
        else:
            values = [(f"{label}[{k!r}]", x) for k, x in kwargs.items() if k not in named]
        for sub, x in values:
            _check_value(x, sub, program, marker, False, env, origins, pending)


def _check_result(result: Any, sig: FunctionSignature, programs: Any, env: dict[str, Any],
                  origins: dict[str, tuple[Any, ...]], pending: _Relations) -> None:
    if isinstance(sig.result, ShapeSpecMarker):
        _check_value(result, "return", programs, sig.result, sig.result_optional, env, origins,
                     pending)
    else:
        markers = sig.result
        assert markers is not None
        if not isinstance(result, tuple) or len(result) != len(markers):
            raise _Mismatch("notuple", "return", None, result, length=len(markers))
        for i, (x, marker, program) in enumerate(zip(result, markers, programs, strict=True)):
            if marker is not None:
                _check_value(x, f"return[{i}]", program, marker, False, env, origins, pending)
    pending.resolve(env, origins)


class _Checker:
    """The interpreted check of one function: the reference path, and the one that explains.

    The generated fast path (:func:`_generate`) hands a call over to :meth:`call` or
    :meth:`after` whenever anything is not plainly right; they redo the check from the start
    with every binding's origin recorded, so errors name where each size came from.
    """

    def __init__(self, fn: Callable[..., Any], sig: FunctionSignature, check_return: bool):
        self.fn = fn
        self.sig = sig
        self.single, self.variadic = _slots(sig)
        self.deferred = any("{" in str(item) for _, m in sig.markers() for item in m.shape.items)
        self.signature = inspect.signature(fn) if self.deferred else None
        self.result: Any = None
        if check_return and isinstance(sig.result, ShapeSpecMarker):
            self.result = _program(sig.result.shape)
        elif check_return and sig.result is not None:
            self.result = tuple(None if m is None else _program(m.shape) for m in sig.result)

    def check_args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        """Check the arguments; return ``(env, origins, pending)`` for the return value."""
        env: dict[str, Any] = {}
        origins: dict[str, tuple[Any, ...]] = {}
        pending = _Relations()
        if self.signature is not None:
            bound = self.signature.bind_partial(*args, **kwargs)
            bound.apply_defaults()
            env[_ARGS] = dict(bound.arguments)
            origins[_ARGS] = ("given", None, None, None)
        nargs = len(args)
        try:
            for label, position, name, default, program, marker, optional in self.single:
                x = args[position] if position < nargs else kwargs.get(name, default)
                if x is not _EMPTY:  # a missing argument: fn raises its own TypeError
                    _check_value(x, label, program, marker, optional, env, origins, pending)
            if self.variadic:
                _check_variadic(self.variadic, self.sig, args, kwargs, env, origins, pending)
            pending.resolve(env, origins)
        except _Mismatch as m:
            raise _error(self.sig.name, m, env, origins) from None
        return env, origins, pending

    def check_result(self, result: Any, env: dict[str, Any],
                     origins: dict[str, tuple[Any, ...]], pending: _Relations) -> None:
        if self.result is None:
            return
        try:
            _check_result(result, self.sig, self.result, env, origins, pending)
        except _Mismatch as m:
            raise _error(self.sig.name, m, env, origins) from None

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Check the arguments, call the function, check its result."""
        state = self.check_args(args, kwargs)
        result = self.fn(*args, **kwargs)  # isinstance inside reads ``state`` (_scope)
        self.check_result(result, *state)
        return result

    def after(self, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> Any:
        """Check a result the function already returned (the arguments are checked again)."""
        self.check_result(result, *self.check_args(args, kwargs))
        return result


_CALL_CODE = _Checker.call.__code__


def _interpreted(checker: _Checker) -> Callable[..., Any]:
    call, fn = checker.call, checker.fn

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _compiling():
            return fn(*args, **kwargs)
        return call(args, kwargs)

    return wrapper


def _unchecked(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A function with nothing to check still opens a scope, for ``isinstance`` inside."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bindings: dict[str, Any] = {}  # noqa: F841 (read from this frame by _scope)
        return fn(*args, **kwargs)

    return wrapper


_UNCHECKED_CODE = _unchecked(print).__code__


def _wrap(fn: F, check_return: bool, localns: dict[str, Any] | None = None,
          compiled: bool = True) -> F:
    if isinstance(fn, classmethod | staticmethod):  # @shaped above @classmethod
        return type(fn)(_wrap(fn.__func__, check_return, localns, compiled))
    if isinstance(fn, property):
        accessors = (fn.fget, fn.fset, fn.fdel)
        return property(*(None if f is None else _wrap(f, check_return, localns, compiled)
                          for f in accessors), fn.__doc__)
    if isinstance(fn, type):  # a dataclass: its __init__ checks the annotated fields
        fn.__init__ = _wrap(fn.__init__, check_return, localns, compiled)  # type: ignore
        return fn
    if not callable(fn):
        raise TypeError(f"@shaped decorates a function, not {fn!r}")
    sig = signature_of(fn, localns)
    if not sig.parameters and sig.result is None:  # nothing to check: a no-op, as jaxtyping
        wrapper = functools.wraps(fn)(_unchecked(fn))
        wrapper.__tensig_signature__ = sig  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]
    checker = _Checker(fn, sig, check_return)
    wrapper = (_generate(checker) if compiled else None) or _interpreted(checker)
    wrapper = functools.wraps(fn)(wrapper)
    wrapper.__tensig_signature__ = sig  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


# --------------------------------------------------------------------------------------------
# the generated fast path
# --------------------------------------------------------------------------------------------


class _Unbound:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<unbound>"


_UNBOUND = _Unbound()


class _Generator:
    """Emits the straight-line check of one function: locals instead of dicts, no calls.

    Every failure, and every case the straight line does not handle (an expression with two
    unknowns, an unseen dtype, ``None`` for a non-optional argument), hands the call to the
    interpreter (``FAIL``), which decides and explains.
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.locals: dict[str, str] = {}
        self.families: dict[str, str] = {}  # dtype family -> the local of its accept cache

    def local(self, key: str) -> str:
        """The local variable holding the binding ``key`` (a size name or a row variable)."""
        if key not in self.locals:
            self.locals[key] = f"v{len(self.locals)}"
        return self.locals[key]

    def emit(self, depth: int, *lines: str) -> None:
        self.lines.extend("    " * depth + line for line in lines)

    def value(self, depth: int, program: _Program, marker: ShapeSpecMarker, optional: bool,
              fail: str) -> bool:
        """Emit the check of the value in ``x``; ``False`` when it needs the interpreter."""
        items = program.shape.items
        variables = [i for i, item in enumerate(items) if isinstance(item, RowVariable)]
        if len(variables) > 1 or marker.pytree or any(
                isinstance(item, Deferred) or (isinstance(item, RowVariable) and item.broadcast)
                or (isinstance(item, Broadcastable) and isinstance(item.item, Deferred))
                for item in items):
            return False
        self.emit(depth, "if x is None:", f"    {'pass' if optional else fail}", "else:")
        depth += 1
        wrapper = getattr(marker, "wrapper", None)  # Padded[...]: the value's type first
        if wrapper is not None:
            self.emit(depth, f"if not isinstance(x, _modules[{wrapper.__module__!r}]."
                             f"{wrapper.__qualname__}):", f"    {fail}")
        self.emit(depth, "try:", "    s = x.shape")
        if marker.dtype is not None:
            self.emit(depth, "    dt = x.dtype")
        self.emit(depth, "except AttributeError:", f"    {fail}")
        self.unpack(depth, len(items), variables[0] if variables else None, fail)
        for i, item in enumerate(items):
            self.item(depth, item, f"a{i}", fail)
        if marker.dtype is not None:
            cache = self.families.setdefault(marker.dtype, f"_A{len(self.families)}")
            self.emit(depth, f"if {cache}.get(dt) is not True:", f"    {fail}")
        return True

    def unpack(self, depth: int, m: int, var: int | None, fail: str) -> None:
        """Sizes into ``a0, a1, ...`` (a row variable's axes into a tuple)."""
        if var is None:
            self.emit(depth, f"if len(s) != {m}:", f"    {fail}")
            if m:
                self.emit(depth, ", ".join(f"a{i}" for i in range(m)) + ", = s")
            return
        self.emit(depth, f"if len(s) < {m - 1}:", f"    {fail}")
        for i in range(m):
            if i < var:
                self.emit(depth, f"a{i} = s[{i}]")
            elif i > var:
                self.emit(depth, f"a{i} = s[{i - m}]")
        stop = f"len(s) - {m - 1 - var}" if m - 1 - var else ""
        self.emit(depth, f"a{var} = tuple(s[{var}:{stop}])")

    def bind(self, depth: int, local: str, size: str, fail: str) -> None:
        self.emit(depth, f"if {local} is _U:", f"    {local} = {size}",
                  f"elif {local} != {size}:", f"    {fail}")

    def item(self, depth: int, item: Any, size: str, fail: str) -> None:
        if item is Any or (isinstance(item, RowVariable) and item.name is None):
            return
        if isinstance(item, Broadcastable):  # size 1 fits and binds nothing
            self.emit(depth, f"if {size} != 1:")
            self.item(depth + 1, item.item, size, fail)
            self.emit(depth + 1, "pass")
            return
        if isinstance(item, RowVariable):
            self.bind(depth, self.local(item.key), size, fail)
        elif isinstance(item, int):
            self.emit(depth, f"if {size} != {item}:", f"    {fail}")
        elif _is_name(item):
            self.bind(depth, self.local(next(iter(item.symbols))), size, fail)
        else:
            self.expression(depth, item, size, fail)

    def source(self, d: Dim) -> str:
        return _emit(d, lambda name: self.local(name))

    def expression(self, depth: int, d: Dim, size: str, fail: str) -> None:
        """Evaluate when every name is bound, else solve for the one unbound linear name."""
        names = sorted(d.symbols)
        bound = " and ".join(f"{self.local(n)} is not _U" for n in names)
        self.emit(depth, f"if {bound}:", f"    if {size} != {self.source(d)}:", f"        {fail}")
        for name in names:
            split = linear_split(d, name)
            if split is None:
                continue
            others = [f"{self.local(n)} is not _U" for n in names if n != name]
            self.emit(depth, f"elif {' and '.join([f'{self.local(name)} is _U', *others])}:")
            self.emit(depth + 1, *solve_lines(size, *split, fail, self.local),
                      f"{self.local(name)} = q")
        self.emit(depth, "else:", f"    {fail}")


def _generate(checker: _Checker) -> Callable[..., Any] | None:
    """The fast wrapper of one function, or ``None`` when it needs the interpreter throughout."""
    if checker.variadic:
        return None
    g = _Generator()
    fail = "return _slow(args, kwargs)"
    defaults = []
    g.emit(2, "n = len(args)")
    for _, position, name, default, program, marker, optional in checker.single:
        defaults.append(default)
        g.emit(2, f"x = args[{position}] if n > {position} else "
                  f"kwargs.get({name!r}, _D[{len(defaults) - 1}])", "if x is not _EMPTY:")
        if not g.value(3, program, marker, optional, fail):
            return None
    g.emit(2, "result = fn(*args, **kwargs)")
    names = tuple(g.locals.items())
    if not _generate_result(g, checker, "return _slow_result(args, kwargs, result)"):
        return None
    g.emit(2, "return result")
    header = ["def make(fn, _slow, _slow_result, _modules, _ACC, _U, _EMPTY, _D):",
              *(f"    {v} = _ACC.setdefault({k!r}, {{}})" for k, v in g.families.items()),
              "    def wrapper(*args, **kwargs):",
              "        t = _modules.get('torch')",
              "        if t is not None and 'torch._dynamo' in _modules and "
              "t.compiler.is_compiling():",
              "            return fn(*args, **kwargs)"]
    if g.locals:
        header.append("        " + " = ".join(g.locals.values()) + " = _U")
    source = "\n".join([*header, *g.lines, "    return wrapper"])
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<tensig.shaped {checker.sig.name}>", "exec"), namespace)
    wrapper = namespace["make"](checker.fn, checker.call, checker.after, sys.modules,
                                _ACCEPT, _UNBOUND, _EMPTY, tuple(defaults))
    _FAST_FRAMES[wrapper.__code__] = names
    wrapper.__tensig_source__ = source
    return wrapper


def _generate_result(g: _Generator, checker: _Checker, fail: str) -> bool:
    sig, programs = checker.sig, checker.result
    if programs is None:
        return True
    if isinstance(sig.result, ShapeSpecMarker):
        g.emit(2, "x = result")
        return g.value(2, programs, sig.result, sig.result_optional, fail)
    assert sig.result is not None
    g.emit(2, f"if not isinstance(result, tuple) or len(result) != {len(sig.result)}:",
           f"    {fail}")
    for i, (marker, program) in enumerate(zip(sig.result, programs, strict=True)):
        if marker is not None:
            g.emit(2, f"x = result[{i}]")
            if not g.value(2, program, marker, False, fail):
                return False
    return True


@overload
def shaped(fn: F, /) -> F: ...


@overload
def shaped(*, check_return: bool = True, compiled: bool = True) -> Callable[[F], F]: ...


def shaped(fn: F | None = None, /, *, check_return: bool = True,
           compiled: bool = True) -> F | Callable[[F], F]:
    """Check every call of ``fn`` against its ``Shaped``/``Float``/``Int``/``Bool`` annotations.

    Use as ``@shaped`` or ``@shaped(check_return=False)``.  ``compiled=False`` runs the
    interpreter on every call instead of the generated straight-line check (the same answers,
    a few times slower; the generated path hands every failure to the interpreter anyway, which
    words the error).  Names bind across all arguments and
    the return value, per call; a mismatch raises :class:`SignatureError` (a
    :class:`tensig.ShapeError`, so a ``ValueError``) naming the function, the argument, the
    axis, the expected expression, the actual size, and which argument bound the name first.
    A value without ``.shape`` (or ``None`` where the annotation is not ``Optional``) raises
    ``TypeError``.  The parsed signature is kept as ``wrapper.__tensig_signature__``.

    >>> import numpy as np
    >>> from tensig.core.annotations import Float
    >>> @shaped
    ... def attention(q: Float[np.ndarray, "B T d"], k: Float[np.ndarray, "B T d"]):
    ...     return q @ k.transpose(0, 2, 1)
    >>> attention(np.zeros((2, 16, 8)), np.zeros((2, 16, 8))).shape
    (2, 16, 16)
    >>> attention(np.zeros((2, 16, 8)), np.zeros((2, 12, 8)))
    Traceback (most recent call last):
    ...
    tensig.check.decorator.SignatureError: attention(): argument 'k' axis 1 ('T') has size 12, but T = 16 was bound by argument 'q' axis 1
        B T d
          ^
      argument 'k' has shape (2, 12, 8)
      T = 16: bound by argument 'q' axis 1 (shape (2, 16, 8))
    """  # noqa: E501
    # The defining scope: string annotations (PEP 563) may name its local variables.
    localns = dict(sys._getframe(1).f_locals)
    if fn is None:
        return lambda f: _wrap(f, check_return, localns, compiled)
    return _wrap(fn, check_return, localns, compiled)
