"""The decorator's interpreter: the reference check of a call, and the one that explains.

Per annotation a cached :class:`_Program` runs over a call's :class:`_Bindings`: the sizes bound,
where each was bound, and the expression items as one solver problem.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import operator
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from tensig.check.signature_error import _ARGS, _error, _Mismatch
from tensig.core import search
from tensig.core.annotations import (
    _PYTHON_DTYPES,
    AnnotationShape,
    Broadcastable,
    Deferred,
    FunctionSignature,
    RowVariable,
    ShapeSpecMarker,
    _is_name,
    dtype_accepts,
    parse_annotation,
)
from tensig.core.dimcode import compile_dim
from tensig.core.dims import Dim
from tensig.core.solver import DimVar, LinearRel, Origin, Solver

_NAME, _FIXED, _EXPR, _VAR, _ANON = 0, 1, 2, 3, 4
_BCAST = 16  # flag: size 1 also fits (jaxtyping's ``#``), and binds nothing
_EMPTY = inspect.Parameter.empty
_NO_POSITION = sys.maxsize
_GIVEN = ("given", None, None, None)  # the origin of a size known before the check

class _Expr:
    """An expression item (``2*h``): its polynomial, text, sorted names and compiled value."""

    __slots__ = ("dim", "evaluate", "symbols", "text")

    def __init__(self, d: Dim):
        self.dim = d
        self.text = str(d)
        self.symbols = tuple(sorted(d.symbols))
        self.evaluate = compile_dim(d)


class _DeferredExpr:
    """A :class:`~tensig.core.annotations.Deferred` size (jaxtyping's f-string axes): Python
    of the bound sizes and the ``{...}`` arguments, evaluated once its names are bound."""

    __slots__ = ("code", "parts", "symbols", "text")

    def __init__(self, item: Deferred):
        self.text = item.text
        self.symbols = tuple(sorted(item.symbols)) + ((_ARGS,) if "{" in item.text else ())
        # each ``{...}`` part is a value the rest reads by a name, never text pasted into the
        # code: an argument's value is data (a string argument is not run)
        self.parts = _BRACES.findall(item.text)
        names = iter(range(len(self.parts)))
        self.code = _BRACES.sub(lambda m: f"__tensig_arg{next(names)}__", item.text)

    def evaluate(self, env: dict[str, Any]) -> int | None:
        """The size as an ``int``; ``None`` (not checked) where it is no whole number."""
        names = env
        if self.parts:
            arguments, names = env[_ARGS], dict(env)
            for i, part in enumerate(self.parts):
                value = names[f"__tensig_arg{i}__"] = _eval(part, self.text, arguments)
                if value is None:  # an optional size not given: not checked, as before
                    return None
                if not _number(value):
                    raise TypeError(f"the deferred size {self.text!r} reads {{{part}}} = "
                                    f"{value!r:.60}, a {type(value).__name__}, not a number: "
                                    "pass the size as an int")
        try:  # an array's ``==`` would answer an array
            return operator.index(_eval(self.code, self.text, names))
        except TypeError:
            return None


def _number(value: Any) -> bool:
    """Whether ``value`` is one number (not a string, not an array of several)."""
    shape: Any = getattr(value, "shape", None)  # () for one number in an array
    if isinstance(value, str | bytes) or shape:
        return False
    return isinstance(value, numbers.Real) or hasattr(value, "__index__")


_BUILTINS = {"__builtins__": {}, "min": min, "max": max, "len": len}


def _eval(code: str, text: str, names: dict[str, Any]) -> Any:
    """``code`` (of the deferred size ``text``) with only ``min``, ``max`` and ``len`` as
    builtins, as jaxtyping's f-string axes read it."""
    try:
        return eval(_compiled(code), _BUILTINS, names)
    except Exception as e:
        raise TypeError(f"the deferred size {text!r} cannot be evaluated: "
                        f"{type(e).__name__}: {e}") from None


@functools.lru_cache(maxsize=1024)
def _compiled(text: str) -> Any:
    """A deferred size's code, compiled once (compiling costs more than running it)."""
    return compile(text, "<deferred size>", "eval")


_BRACES = re.compile(r"\{([^{}]*)\}")


# -- matching one shape ----------------------------------------------------------------------


def _is_size(x: object) -> bool:
    return isinstance(x, int) or (hasattr(x, "__index__") and not isinstance(x, float))


class _Program:
    """The precompiled check of one annotation: ``ops`` holds ``(code, payload, item index)``
    per item in memory order (a name, a fixed size, an expression, a row variable's key, or
    ``-1`` for ``_``)."""

    __slots__ = ("keys", "loose", "n_fixed", "ops", "shape")

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

    def match(self, shape: Any, b: _Bindings, label: str) -> None:
        """Check ``shape`` against the annotation, binding new names."""
        env = b.env
        lengths = self.row_lengths(shape, env, label)
        axis = 0
        for code, payload, index in self.ops:
            if code & ~_BCAST in (_VAR, _ANON):
                n = lengths[payload]
                if code != _ANON:
                    _check_row(payload, tuple(shape[axis:axis + n]), b, label, self, shape, axis,
                               index, code & _BCAST)
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
                        b.origins[payload] = (label, axis, shape, None)
                elif bound != size and _is_size(size):
                    raise _Mismatch("name", label, self.shape, shape, axis, index, name=payload,
                                    bound=bound)
            elif code == _FIXED:
                if size != payload and _is_size(size):
                    raise _Mismatch("fixed", label, self.shape, shape, axis, index)
            elif code == _EXPR:
                b.add(payload, size, (label, self.shape, shape, axis, index))
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
            raise _Mismatch("ambiguous", label, self.shape, shape, names=tuple(unknown))
        if unknown:
            (key, count), = unknown.items()
            if free < 0 or free % count:
                raise _Mismatch("rank", label, self.shape, shape)
            lengths[key] = free // count
        elif free != 0:
            raise _Mismatch("rank", label, self.shape, shape)
        return lengths


def _check_row(key: str, segment: tuple[Any, ...], b: _Bindings, label: str, program: _Program,
               shape: Any, axis: int, index: int, broadcast: int = 0) -> None:
    """Bind a row variable to its axes, or compare them with its binding (``*#v``: axes that
    broadcast against it fit, and it binds the broadcast of both, as in jaxtyping)."""
    env = b.env
    bound = env.get(key)
    if bound is None:
        env[key] = segment
        b.origins[key] = (label, axis, shape, len(segment))
        if broadcast:
            env["#" + key] = True
    elif bound != segment and all(_is_size(s) for s in segment):
        loose = env.get("#" + key, False)
        try:  # NumPy's broadcast of both, where either broadcasts
            joined = np.broadcast_shapes(bound, segment) if broadcast or loose else None
        except ValueError:
            joined = None
        if joined is None or (not broadcast and joined != segment) \
                or (not loose and joined != bound):
            raise _Mismatch("rowvar", label, program.shape, shape, axis, index, name=key,
                            bound=bound, segment=segment)
        if loose:  # jaxtyping: the binding takes this occurrence's broadcastability
            env[key] = joined
            if not broadcast:
                del env["#" + key]


class _Bindings:
    """One check's bindings: ``env`` (a name's size, a row variable's sizes), ``origins`` (where
    each was bound, for messages) and the expression items, one solver problem of
    :class:`~tensig.core.solver.LinearRel` (built on the first item met)."""

    __slots__ = ("deferred", "env", "origins", "solver", "vars", "where")
    vars: dict[str, DimVar]
    where: dict[int, tuple[Any, ...]]  # id(relation origin) -> the item's place

    def __init__(self, given: dict[str, Any] | None = None) -> None:
        self.env: dict[str, Any] = dict(given or {})
        self.origins: dict[str, tuple[Any, ...]] = dict.fromkeys(self.env, _GIVEN)
        self.solver: Solver | None = None  # nothing built until an expression item is met
        self.deferred: list[tuple[Any, ...]] = []

    def add(self, expr: _Expr | _DeferredExpr, size: Any, at: tuple[Any, ...]) -> None:
        """Relate an expression item to the size it has in this call (``at``: the item's place,
        as a mismatch names it)."""
        if not _is_size(size):  # an unknown (dask ``nan``) size checks and binds nothing
            return
        place = (expr, size, at)
        if isinstance(expr, _DeferredExpr):
            self.deferred.append(place)
            self._evaluate_deferred()
            return
        if self._evaluated(place):  # nothing to solve: no solver is needed
            return
        if self.solver is None:
            self.solver, self.vars, self.where = Solver(), {}, {}
        solver = self.solver
        names = {n: self.vars.get(n) or self.vars.setdefault(n, DimVar(n)) for n in expr.symbols}
        label, _, _, axis, _ = at
        origin = _origin(label, axis, expr.text)
        self.where[id(origin)] = place

        def report(kind: str, facts: dict[str, Any]) -> Exception:
            if kind == "no_solution":
                return _Mismatch("solve", *at, expr=expr, name=facts["name"])
            if kind == "apart":
                other, _, where = self.where[id(facts["other"].origin)]
                return _Mismatch("apart", *at, expr=expr, value=facts["value"], other=other,
                                 where=where)
            return _Mismatch("expr", *at, expr=expr, value=facts["value"])

        solver.add(LinearRel(DimVar(None, int(size)), expr.dim, names, origin, report))
        self.run()

    def run(self, settle: bool = False) -> None:
        """Propagate the sizes bound so far (then ``settle``); bind in ``env`` what the solver
        solved."""
        solver, env = self.solver, self.env
        if solver is None:
            return
        for name, var in self.vars.items():
            if var.value is None and name in env:
                solver.set_value(var, int(env[name]), _BOUND)
        try:
            solver.run()
            if settle:
                search.settle(solver)
        finally:  # also before a mismatch, whose message names the sizes solved
            for name, var in self.vars.items():
                if var.value is not None and name not in env:
                    expr, size, (label, _, shape, axis, _) = self.where[id(var.origin)]
                    env[name] = var.value
                    self.origins[name] = (label, axis, shape, (expr.text, size))

    def resolve(self) -> None:
        """Settle everything the bindings so far determine (the solver's search too: ``T**2``,
        ``b % 2``, uses that must agree); what they do not is skipped.  Deferred sizes are
        checked before the search (a failing one is named before a later ``T*T``) and after."""
        for settle in (False, True):
            self.run(settle)
            self._evaluate_deferred()

    def _evaluate_deferred(self) -> None:
        self.deferred = [place for place in self.deferred if not self._evaluated(place)]

    def _evaluated(self, place: tuple[Any, ...]) -> bool:
        """Check an item whose names are all bound; ``False`` while some are not."""
        expr, size, at = place
        if any(s not in self.env for s in expr.symbols):
            return False
        value = expr.evaluate(self.env)
        # a deferred size that is no whole number (Python of the sizes) is not checked
        if value != size and (isinstance(expr, _Expr) or _is_size(value)):
            raise _Mismatch("expr", *at, expr=expr, value=value)
        return True


_BOUND = Origin(note="bound by an earlier item")


@functools.lru_cache(maxsize=4096)
def _origin(label: str, axis: int, text: str) -> Origin:
    """One :class:`Origin` per place (building a frozen dataclass per call costs microseconds)."""
    return Origin(operand=label, position=axis, note=text)


_program = functools.lru_cache(maxsize=1024)(_Program)


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
    tensig.check.signature_error.SignatureError: match_shape(): argument 'shape' axis 1 ('T') has size 4, but T = 5 was given
        B T
          ^
      argument 'shape' has shape (3, 4)
    """  # noqa: E501
    ann = annotation if isinstance(annotation, AnnotationShape) else parse_annotation(annotation)
    b = _Bindings(sizes)
    try:
        _program(ann).match(tuple(shape), b, "shape")
        b.resolve()
    except _Mismatch as m:
        raise _error("match_shape", m, b.env, b.origins) from None
    return b.env


# -- checking one call -----------------------------------------------------------------------


def _check_value(x: Any, label: str, program: _Program, marker: ShapeSpecMarker,
                 optional: bool, b: _Bindings) -> None:
    """Check one value (an argument or the return value) against its compiled annotation."""
    if x is None:
        if optional:
            return
        raise _Mismatch("none", label, program.shape, x, marker=marker)
    if marker.pytree:
        leaf_marker = ShapeSpecMarker(marker.shape, marker.dtype, marker.scalar,
                                      family=marker.family)
        for path, leaf in _leaves(x, label):
            _check_value(leaf, path, program, leaf_marker, False, b)
        return
    wrapper = getattr(marker, "wrapper", None)  # Padded[...] (tensig.execution.padding): its type
    if wrapper is not None and not isinstance(x, wrapper):
        raise _Mismatch("wrapper", label, program.shape, x, marker=marker)
    try:
        shape = x.shape
        dtype = x.dtype if marker.dtype is not None else None
    except AttributeError:
        scalar = marker.scalar
        if scalar is None or not isinstance(x, scalar) or (scalar is int and isinstance(x, bool)):
            raise _Mismatch("noshape", label, program.shape, x, marker=marker) from None
        shape, dtype = (), _PYTHON_DTYPES[type(x) if type(x) in _PYTHON_DTYPES else scalar]
    if isinstance(shape, str | bytes) or not hasattr(shape, "__len__"):  # a duck type's
        raise _Mismatch("badshape", label, program.shape, x, marker=marker, found=shape)
    program.match(shape, b, label)
    if marker.dtype is not None and not dtype_accepts(marker.dtype, dtype):
        raise _Mismatch("dtype", label, program.shape, shape, dtype=dtype, marker=marker)


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


class _Checker:
    """The interpreted check of one function, to which the fast path hands a call it does not
    plainly accept, so errors name where each size came from."""

    def __init__(self, fn: Callable[..., Any], sig: FunctionSignature, check_return: bool):
        self.fn = fn
        self.sig = sig
        # per parameter (name, position, default, program, marker, optional); a variadic's
        # entry starts with its kind
        self.single: list[tuple[Any, ...]] = []
        self.variadic: list[tuple[Any, ...]] = []
        for p in sig.parameters:
            entry = (p.name, _NO_POSITION if p.position is None else p.position, p.default,
                     _program(p.marker.shape), p.marker, p.optional)
            if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                self.variadic.append((p.kind, *entry))
            else:
                self.single.append(entry)
        self.named = frozenset(p.name for p in sig.parameters)
        deferred = any("{" in str(item) for _, m in sig.markers() for item in m.shape.items)
        self.signature = inspect.signature(fn) if deferred else None  # for ``{name}`` sizes
        result = sig.result if check_return else None
        # the checked return values: (index in the returned tuple, label, program, marker,
        # optional), and the tuple's length (``None``: a single value, or nothing checked)
        self.length = len(result) if isinstance(result, tuple) else None
        self.results: tuple[tuple[Any, ...], ...]
        if isinstance(result, ShapeSpecMarker):
            self.results = ((None, "return", _program(result.shape), result, sig.result_optional),)
        else:
            self.results = tuple((i, f"return[{i}]", _program(m.shape), m, False)
                                 for i, m in enumerate(result or ()) if m is not None)

    def check_args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Bindings:
        """Check the arguments; return the bindings, for the return value."""
        b = _Bindings()
        if self.signature is not None:
            bound = self.signature.bind_partial(*args, **kwargs)
            bound.apply_defaults()
            b.env[_ARGS] = dict(bound.arguments)
            b.origins[_ARGS] = _GIVEN
        try:
            for name, position, default, program, marker, optional in self.single:
                x = args[position] if position < len(args) else kwargs.get(name, default)
                if x is not _EMPTY:  # a missing argument: fn raises its own TypeError
                    _check_value(x, name, program, marker, optional, b)
            for kind, name, position, _, program, marker, _ in self.variadic:
                if kind == inspect.Parameter.VAR_POSITIONAL:
                    values = [(f"{name}[{i}]", x) for i, x in enumerate(args[position:])]
                else:
                    values = [(f"{name}[{k!r}]", x) for k, x in kwargs.items()
                              if k not in self.named]
                for label, x in values:
                    _check_value(x, label, program, marker, False, b)
            b.resolve()
        except _Mismatch as m:
            raise _error(self.sig.name, m, b.env, b.origins) from None
        return b

    def check_result(self, result: Any, b: _Bindings) -> None:
        if self.length is None and not self.results:  # nothing to check: nothing to settle
            return
        try:
            if self.length is not None and (not isinstance(result, tuple)
                                            or len(result) != self.length):
                raise _Mismatch("notuple", "return", None, result, length=self.length)
            for i, label, program, marker, optional in self.results:
                x = result if i is None else result[i]
                _check_value(x, label, program, marker, optional, b)
            b.resolve()
        except _Mismatch as m:
            raise _error(self.sig.name, m, b.env, b.origins) from None

    def call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Check the arguments, call the function, check its result."""
        state = self.check_args(args, kwargs)
        result = self.fn(*args, **kwargs)  # isinstance inside reads ``state`` (_scope)
        self.check_result(result, state)
        return result

    def after(self, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> Any:
        """Check a result the function already returned (the arguments are checked again)."""
        self.check_result(result, self.check_args(args, kwargs))
        return result


_CALL_CODE = _Checker.call.__code__
