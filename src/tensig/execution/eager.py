"""The eager API: the notation runs on NumPy (default), PyTorch, JAX and Dask arrays.

One function per einsum-family operator of :data:`tensig.execution.ir.OPERATORS` (spec
first, then the arrays; its docstring made from its entry).  Shapes are inferred and checked
before any computation; the call is lowered once per (spec, shapes, options, adapter) as one
assignment (:func:`~tensig.execution.assignment.lower_assignment`, as compiled routines are)
and cached, so a repeated call costs a dictionary lookup plus the backend's own work.

>>> import numpy as np
>>> einsum("ij;jk=>ik", np.ones((2, 3)), np.ones((3, 4))).shape
(2, 4)
>>> einsum1("i => ii", np.array([1., 2.]))
array([[1., 0.],
       [0., 2.]])
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from tensig.backends import backend_for, backend_of
from tensig.core import kept
from tensig.core.errors import ShapeError
from tensig.core.inference import Iter, infer
from tensig.core.shapes import Shape
from tensig.execution.assignment import lower_assignment
from tensig.execution.ir import OPERATORS
from tensig.execution.lowering import Letters, Plan, split_merges

__all__ = ["RowArray", "concat", "einmax1", "einsum", "einsum1", "einsum_path", "numpy_subscripts",
           "outer_sum", "register_tensor_type", "rows", "tropical"]


class RowArray:
    """A backend array together with its three-row tensig :class:`~tensig.Shape`.

    Memory order is batch, output, input.  ``.array`` unwraps; ``.rows`` is the Shape.

    >>> import numpy as np
    >>> x = rows(np.zeros((8, 3, 4)), batch=1, input=1)
    >>> x.rows
    Shape('8|4->3')
    """

    __slots__ = ("array", "rows")

    def __init__(self, array: Any, shape: Shape):
        dims = tuple(array.shape)
        if shape.int_dims != dims:
            raise ValueError(f"array of shape {dims} does not have the sizes of {shape} "
                             f"(memory order batch, output, input: {shape.dims})")
        self.array, self.rows = array, shape

    @property
    def __tensig_shape__(self) -> Shape:
        return self.rows

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    @property
    def dtype(self) -> Any:
        return self.array.dtype

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return np.asarray(self.array, dtype=dtype)

    def __repr__(self) -> str:
        return f"RowArray({self.rows}, {type(self.array).__module__}.{type(self.array).__name__})"


def rows(x: Any, batch: int = 0, input: int = 0) -> RowArray:
    """Say that the first ``batch`` axes of ``x`` are batch axes and the last ``input`` axes
    are input axes (the rest are output axes).

    >>> import numpy as np
    >>> rows(np.zeros((2, 3, 4, 5)), batch=2).rows
    Shape('2,3|4,5')
    """
    if isinstance(x, RowArray):
        x = x.array
    dims = tuple(int(d) for d in x.shape)
    for name, n in (("batch", batch), ("input", input)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"rows(): {name}= must be a nonnegative int, not {n!r}")
    if batch + input > len(dims):
        raise ValueError(f"rows(): batch={batch} + input={input} axes exceed the array's "
                         f"{len(dims)} axes (shape {dims})")
    out_end = len(dims) - input
    return RowArray(x, Shape(batch=dims[:batch], input=dims[out_end:],
                             output=dims[batch:out_end]))


_PLANS: dict[tuple[Any, ...], Plan] = {}

#: tensor types of later layers that answer the eager functions (:func:`register_tensor_type`)
_HANDLERS: dict[type, Callable[..., Any]] = {}


def register_tensor_type(cls: type, handler: Callable[..., Any]) -> None:
    """Route every eager call whose first operand is a ``cls`` to ``handler(op, spec, xs,
    options)`` (``options``: the keywords given that are not None): the model layer's lazy
    tensors build a graph node."""
    _HANDLERS[cls] = handler


def _call(op: str, spec: str, xs: Sequence[Any], params: Mapping[str, int] | None,
          use_padding: bool | None, capture: Sequence[str] | None,
          sizes: Mapping[str, int] | None = None) -> Any:
    """Look the plan up by (op, spec, shapes, adapters, options); build it on a miss.  The hot path
    of every eager call: one pass over the operands, one dict lookup.  Keyed by each operand's
    adapter, not its type: the types one adapter takes share plans."""
    if xs and type(xs[0]) in _HANDLERS:
        options = {"params": params, "use_padding": use_padding, "capture": capture,
                   "sizes": sizes}
        return _HANDLERS[type(xs[0])](op, spec, xs, {k: v for k, v in options.items()
                                                     if v is not None})
    wrapped = False
    arrays = []
    key_parts: list[Any] = [op, spec]
    try:
        for x in xs:
            if type(x) is RowArray:
                wrapped = True
                a = x.array
                key_parts += (x.rows, backend_for(type(a)))
            else:
                a = x
                key_parts += (a.shape, backend_for(type(a)))
            arrays.append(a)
        if params is not None or use_padding is not None or sizes is not None:
            key_parts += (None if params is None else tuple(params.items()), use_padding,
                          None if sizes is None else tuple(sizes.items()))
        key: tuple[Any, ...] | None
        key = tuple(key_parts)  # (declared apart so that mypy narrows it for the lookup)
        plan = _PLANS.get(key)
    except (TypeError, AttributeError):  # not arrays, or unhashable options: checked path
        key, plan = None, None
        xs = [_array_like(x) for x in xs]
        arrays = [x.array if isinstance(x, RowArray) else x for x in xs]
    if plan is None:
        if not xs:
            raise TypeError(f"{op}() needs at least one array after the spec")
        plan = _plan(op, spec, xs, arrays, params, use_padding, sizes)
        if key is not None:
            kept(_PLANS, key, plan, 4096)
    out = plan.run(arrays)
    if wrapped or plan.has_rows:
        out = RowArray(out, plan.shape)
    if capture is not None:
        return out, plan.inferred.capture(capture)
    return out


_SUBSCRIPTS = re.compile(r"[A-Za-z ]*(?:,[A-Za-z ]*)*(?:->[A-Za-z ]*)?|[A-Za-z]*(?:;[A-Za-z]*)+")


def numpy_subscripts(spec: str) -> str | None:
    """A NumPy subscripts string as a tensig spec, or None when ``spec`` is not one.

    Only without ``=>`` (tensig's notation): NumPy's explicit ``"ij,jk->ik"`` and implicit
    ``"ij,jk"`` or ``"ij;jk"`` modes (the result: the labels occurring once, sorted); commas
    separate operands, as in NumPy.

    >>> numpy_subscripts("ij,jk"), numpy_subscripts("ba,ca->bc"), numpy_subscripts("i;j=>ij")
    ('ij;jk=>ik', 'ba;ca=>bc', None)
    """
    if "=>" in spec or not _SUBSCRIPTS.fullmatch(spec):
        return None
    ins, arrow, out = spec.replace(" ", "").partition("->")
    subs = re.split("[,;]", ins)
    if not arrow:
        counts = Counter("".join(subs))
        out = "".join(sorted(c for c, n in counts.items() if n == 1))
    return ";".join(subs) + "=>" + out


def _array_like(x: Any) -> Any:
    """Nested lists and numbers as NumPy arrays, as ``numpy.einsum`` reads them; tuples stay
    refused (a tuple is a shape everywhere else in tensig)."""
    if isinstance(x, list | int | float | complex):
        return np.asarray(x)
    return x


def _plan(op: str, spec: str, xs: Sequence[Any], arrays: list[Any],
          params: Mapping[str, int] | None, use_padding: bool | None,
          sizes: Mapping[str, int] | None) -> Plan:
    if not isinstance(spec, str):
        raise TypeError(f"{op}(): the spec comes first and must be a str, not "
                        f"{type(spec).__name__}")
    for i, a in enumerate(arrays):
        if not hasattr(a, "shape") or isinstance(a, str | tuple | list):
            raise TypeError(f"{op}(): operand {i} is a {type(a).__name__}, not an array")
    backend = backend_of(arrays)
    spec = numpy_subscripts(spec) or spec
    inferred = infer(spec, *xs, op=op, params=params, use_padding=use_padding, sizes=sizes)
    plan = lower_assignment(inferred, OPERATORS[op], backend)
    return _zero_d(plan, backend) if backend.numpy_native and not plan.shape.dims else plan


def _zero_d(plan: Plan, backend: Any) -> Plan:
    """A plan whose 0-d result is an array: NumPy's reductions to no axes give scalars, which
    do not match what a compiled routine stores (other libraries give 0-d arrays)."""
    run, direct = plan.run, plan.direct
    return replace(plan, run=lambda arrays: backend.asarray(run(arrays)),
                   direct=None if direct is None else
                   lambda *xs: backend.asarray(direct(*xs)))


def _documented(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The eager function's docstring from its operator's entry, plus its own."""
    fn.__doc__ = OPERATORS[fn.__name__].docstring(fn.__doc__)
    return fn


@_documented
def einsum(spec: str, *xs: Any, params: Mapping[str, int] | None = None,
           use_padding: bool | None = None, capture: Sequence[str] | None = None,
           sizes: Mapping[str, int] | None = None, out: Any = None, dtype: Any = None,
           optimize: bool | str | None = None) -> Any:
    """For NumPy users: a NumPy subscripts string works as in ``numpy.einsum`` (``"ij,jk->ik"``,
    implicit ``"ij,jk"``: see :func:`numpy_subscripts`); ``dtype=`` converts the operands
    first, ``out=`` receives the result (its shape must be the result's), ``optimize=`` is
    accepted for compatibility (every call is planned; :func:`einsum_path` shows the order).

    >>> x, k = np.arange(5.), np.array([1., 10.])
    >>> einsum("o<+k; k => o", x, k)  # a valid 1-D convolution (correlation)
    array([10., 21., 32., 43.])
    >>> einsum("ij,jk", np.ones((2, 3)), np.ones((3, 4))).shape
    (2, 4)
    """
    if out is not None or dtype is not None or optimize is not None:
        return _numpy_keywords(spec, xs, out, dtype, optimize, params, use_padding, capture,
                               sizes)
    if len(xs) == 2 and params is None and use_padding is None and capture is None \
            and sizes is None:
        # The hottest path (two plain arrays, no options), inlined: the same key _call stores.
        a, b = xs
        if type(a) in _HANDLERS:
            return _call("einsum", spec, xs, params, use_padding, capture, sizes)
        try:
            plan = _PLANS.get(("einsum", spec, a.shape, backend_for(type(a)), b.shape,
                               backend_for(type(b))))
        except (AttributeError, TypeError):
            plan = None
        if plan is not None and plan.direct is not None and not plan.has_rows:
            return plan.direct(a, b)
    return _call("einsum", spec, xs, params, use_padding, capture, sizes)


def _numpy_keywords(spec: str, xs: Sequence[Any], out: Any, dtype: Any, optimize: Any,
                    params: Any, use_padding: Any, capture: Any, sizes: Any) -> Any:
    """``einsum`` with NumPy's ``out=``, ``dtype=`` and ``optimize=`` keywords."""
    if optimize is not None and not isinstance(optimize, bool | str | list):
        raise TypeError(f"einsum(): optimize= is a bool, a strategy name or a path, not "
                        f"{type(optimize).__name__}")
    if dtype is not None:
        xs = [backend_for(type(a)).cast(a, dtype) for a in map(_array_like, xs)]
    result = _call("einsum", spec, xs, params, use_padding, capture, sizes)
    if out is None:
        return result
    value = result[0] if capture is not None else result
    value = value.array if isinstance(value, RowArray) else value
    if not hasattr(out, "shape") or tuple(out.shape) != tuple(value.shape):
        raise ValueError(f"einsum(): out= has shape {getattr(out, 'shape', None)}, the result "
                         f"{tuple(value.shape)}")
    if hasattr(out, "copy_"):  # torch
        out.copy_(value)
    else:
        out[...] = value
    return (out, result[1]) if capture is not None else out


def einsum_path(spec: str, *xs: Any, sizes: Mapping[str, int] | None = None
                ) -> tuple[list[Any], str]:
    """The contraction order for an einsum of three or more operands, as opt_einsum (or
    ``numpy.einsum_path``) chooses it for these shapes (arrays or tuples): ``(path, report)``.

    Merged axes are split first, as the einsum runs them (the report's first line says so);
    other axes must be plain labels (windows, fixed and concatenated axes are not one
    contraction).  ``sizes``: as in :func:`einsum`.

    >>> import numpy as np
    >>> path, _ = einsum_path("ij;jk;kl=>il", (2, 30), (30, 40), (40, 5))
    >>> path
    [(0, 1), (0, 1)]
    >>> path, report = einsum_path("b, (h, e); h, e; e, o => b, o", (2, 12), (3, 4), (4, 5))
    >>> path, report.splitlines()[0]
    ([(0, 1), (0, 1)], 'merged axes split: operand 0 (2, 12) -> (2, 3, 4)')
    """
    shapes = [tuple(x.shape) if hasattr(x, "shape") else x for x in xs]
    inferred = infer(numpy_subscripts(spec) or spec, *shapes, op="einsum", sizes=sizes)
    split = split_merges(inferred)
    layout = inferred.layout if split is None else split.inferred.layout
    letters = Letters(spec)
    subs = []
    for i, uses in enumerate(layout):
        if bad := next((u for u in uses if not isinstance(u.index, Iter)), None):
            who = "the result" if i == len(layout) - 1 else f"operand {i}"
            raise ShapeError(f"einsum_path: {who}'s {bad.kind} axis {bad.position} is "
                             f"{_NOT_ONE_CONTRACTION[type(bad.index).__name__]}, so the "
                             "operation is not one contraction", spec=spec,
                             hint="einsum_path plans label, row-variable and merged axes")
        subs.append("".join(letters[u.index.id] for u in uses
                            if isinstance(u.index, Iter)))  # all are (above)
    # not broadcasts; a diagonal result (``=> i, i``) is the contraction's, then placed
    kept = "".join(dict.fromkeys(c for c in subs[-1] if any(c in x for x in subs[:-1])))
    subscripts = ",".join(subs[:-1]) + "->" + kept
    dims = [tuple(int(u.size) for u in uses) for uses in layout[:-1]]
    path, report = _contraction_path(subscripts, dims)
    if split is None:
        return path, report
    moves = [f"operand {i} {tuple(int(u.size) for u in inferred.layout[i])} -> {s}"
             for i, s in enumerate(split.shapes[:-1]) if s is not None]
    if split.shapes[-1] is not None:
        moves.append(f"the result {split.shapes[-1]} -> {split.merged}")
    return path, "merged axes split: " + "; ".join(moves) + "\n" + report


_NOT_ONE_CONTRACTION = {"FixedIndex": "a fixed index", "AffineIndex": "an affine axis (a "
                        "window or a stride)", "ConcatIndex": "a concatenation"}


def _contraction_path(subscripts: str, dims: list[tuple[int, ...]]) -> tuple[list[Any], str]:
    """opt_einsum's path for ``subscripts`` over shapes ``dims``, else NumPy's greedy one."""
    try:
        import opt_einsum
    except ImportError:
        views = [np.broadcast_to(np.empty(()), d) for d in dims]
        path, report = np.einsum_path(subscripts, *views, optimize="greedy")
        return [tuple(p) for p in path[1:]], report
    path, info = opt_einsum.contract_path(subscripts, *dims, shapes=True)
    return [tuple(p) for p in path], str(info)


@_documented
def einsum1(spec: str, x: Any, *, params: Mapping[str, int] | None = None,
            use_padding: bool | None = None, capture: Sequence[str] | None = None,
            sizes: Mapping[str, int] | None = None) -> Any:
    return _call("einsum1", spec, (x,), params, use_padding, capture, sizes)


@_documented
def outer_sum(spec: str, a: Any, b: Any, *, params: Mapping[str, int] | None = None,
              use_padding: bool | None = None, capture: Sequence[str] | None = None,
              sizes: Mapping[str, int] | None = None) -> Any:
    return _call("outer_sum", spec, (a, b), params, use_padding, capture, sizes)


@_documented
def tropical(spec: str, a: Any, b: Any, *, params: Mapping[str, int] | None = None,
             use_padding: bool | None = None, capture: Sequence[str] | None = None,
             sizes: Mapping[str, int] | None = None) -> Any:
    return _call("tropical", spec, (a, b), params, use_padding, capture, sizes)


@_documented
def einmax1(spec: str, x: Any, *, params: Mapping[str, int] | None = None,
            use_padding: bool | None = None, capture: Sequence[str] | None = None,
            sizes: Mapping[str, int] | None = None) -> Any:
    return _call("einmax1", spec, (x,), params, use_padding, capture, sizes)


@_documented
def concat(spec: str, *xs: Any, params: Mapping[str, int] | None = None,
           use_padding: bool | None = None, capture: Sequence[str] | None = None,
           sizes: Mapping[str, int] | None = None) -> Any:
    return _call("concat", spec, xs, params, use_padding, capture, sizes)

