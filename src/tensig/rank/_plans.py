"""The plan cache: a lifted call is checked once per argument signature, then replayed.

:func:`signature` holds all that a call's checks and path depend on (per array argument its
type, shape and dtype; the static arguments; which function arguments are callable), so a
known call is a key, a lookup and the plan's path.  Also: :func:`_typeof_call`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from tensig.backends import Backend, backend_among, dtype_name, is_array
from tensig.core import kept
from tensig.core.annotations import dtype_kind
from tensig.core.shape_index import ShapeIndex
from tensig.rank._boxes import _elem_name
from tensig.rank._cells import Plan, _is_object, _merge, _split, _who
from tensig.rank._types import Arr, Fun, Instance, Matcher, Sigma, instantiate

_CACHE_SIZE = 256  # plans per lifted function; the cache starts over when full


def signature(lf: Any, args: Sequence[Any]) -> tuple[Any, ...] | None:
    """The key of a call's plan; ``None`` for a wrong arity.  ``AttributeError`` for an array
    argument without shape or dtype (a list, a number: see :func:`plan`)."""
    if lf._plain:
        return tuple([(type(x), x.shape, x.dtype) for x in args])  # torch.Size hashes as tuple
    if len(args) != len(lf.type.params):
        return None
    key = list(args)  # static arguments by value
    for i in lf.arrays:
        key[i] = (type(args[i]), args[i].shape, args[i].dtype)
    for i in lf._funs:
        key[i] = callable(args[i])
    return tuple(key)


def plan(lf: Any, args: Sequence[Any]) -> tuple[Plan, Sequence[Any]]:
    """The plan of ``lf`` on ``args`` and the arguments it runs on, converted to the call's
    library (lists, numbers, NumPy arrays among torch tensors)."""
    _check_arity(lf, args)
    backend = backend_among([args[i] for i in lf.arrays])
    like = next((args[i] for i in lf.arrays if backend.owns(args[i])), None)
    converted = _merge(lf, args, [_coerce(backend, args[i], like) for i in lf.arrays])
    try:
        key = signature(lf, converted)
        hit = lf._plans.get(key)
    except TypeError:  # an unhashable static argument: prepared on every call
        key, hit = None, None
    if hit is None:
        hit = _prepare(lf, converted, backend)
        if key is not None and hit.matcher is None:  # a symbolic result cell: matched per call
            kept(lf._plans, key, hit, _CACHE_SIZE)
    return hit, converted


def _prepare(lf: Any, args: Sequence[Any], backend: Backend) -> Plan:
    """A call's checks (frames, the type instantiated at the cells, element types); its plan."""
    arrays = [args[i] for i in lf.arrays]
    frames, cells, frame = _split(lf, [tuple(a.shape) for a in arrays])
    matcher, declared, sigma = _typecheck(lf, cells, args)
    if lf.inner is not None:  # checked even for an empty frame, where it never runs
        _inner_type(lf, args, cells)
    _check_elems(lf, arrays)
    if lf.ufunc is not None:
        _check_atoms(lf, [a.dtype for a in arrays if not _is_object(a)])
    return Plan(lf, backend, frames, cells, frame, declared, sigma, matcher)


def _coerce(backend: Backend, x: Any, like: Any) -> Any:
    """``x`` as an array of the call's library (on ``like``'s device); boxes stay objects."""
    a = x if is_array(x) else np.asarray(x)
    return a if backend.owns(a) or _is_object(a) else backend.asarray(a, like)


def _check_arity(lf: Any, args: Sequence[Any]) -> None:
    n = len(lf.type.params)
    if len(args) != n:
        names = ", ".join(lf.type.param_name(i) for i in range(n))
        raise TypeError(f"{lf.name} takes {n} argument{'s' * (n != 1)} ({names}), "
                        f"got {len(args)}")
    for i, p in enumerate(lf.type.params):
        if isinstance(p, Fun) and not callable(args[i]):
            raise TypeError(f"{lf.name}: {_who(lf, i)} must be a function {p}, "
                            f"not {type(args[i]).__name__}")


def _typecheck(lf: Any, cells: Sequence[tuple[int, ...]], args: Sequence[Any]
               ) -> tuple[Matcher | None, ShapeIndex | None, Sigma | None]:
    """The type instantiated at the cells: the declared result cell (or the box type), and the
    matcher when the cell is symbolic (the returned cell is then matched against it)."""
    m = None if lf._trivial else _instantiate(lf, cells, args)[1]  # trivial: nothing to solve
    result = lf.type.result if m is None else m.result()
    if isinstance(result, Arr):
        return (None if result.shape.is_concrete else m), result.shape, None
    return None, None, result


def _instantiate(lf: Any, cells: Sequence[Sequence[Any]], args: Sequence[Any]
                 ) -> tuple[Sequence[ShapeIndex | None], Matcher]:
    """Per parameter its cell (``None`` but for arrays), and the type instantiated there."""
    at = _merge(lf, [None] * len(lf.type.params), [ShapeIndex(c) for c in cells])
    return at, instantiate(lf.type, lf.name, at, {i: args[i] for i in lf.statics})


_KINDS = {"Int": "int", "Bool": "bool"}  # the atoms a parameter's element type needs
_PLURAL = {"int": "integers", "bool": "booleans", "float": "floats", "complex": "complex numbers"}


def _check_elems(lf: Any, arrays: Sequence[Any]) -> None:
    for i, a in zip(lf.arrays, arrays, strict=True):
        want = _KINDS.get(lf.type.params[i].elem)
        if want is not None and math.prod(a.shape) and dtype_kind(a.dtype) != want:  # not empty
            raise TypeError(f"{lf.name}: {_who(lf, i)} must hold {_PLURAL[want]}, not "
                            f"{_elem_name(a)}")


def _check_atoms(lf: Any, dtypes: Sequence[Any]) -> Any:
    """A scalar function's atoms are of one type, as Remora's: truth values are not numbers,
    and NumPy's type resolution refuses the rest (strings with numbers).  Returns the result's
    NumPy dtype where NumPy can tell (else ``None``)."""
    kinds = [dtype_kind(d) for d in dtypes]
    if "bool" in kinds and any(k != "bool" for k in kinds):
        b, n = kinds.index("bool"), next(i for i, k in enumerate(kinds) if k != "bool")
        other = _PLURAL.get(kinds[n], dtype_name(dtypes[n]))
        raise TypeError(f"{lf.name}: {_who(lf, lf.arrays[b])} holds booleans and "
                        f"{_who(lf, lf.arrays[n])} holds {other}; Remora's "
                        f"atoms do not convert: cast the booleans (x.astype(int))")
    if not all(isinstance(d, np.dtype) for d in dtypes) or len(dtypes) != lf.ufunc.nin:
        return None  # torch/jax dtypes: their libraries' own rules apply when it runs
    try:
        return lf.ufunc.resolve_dtypes((*dtypes, None))[-1]
    except (TypeError, ValueError) as e:  # numpy's UFuncTypeError is a TypeError
        names = " and ".join(str(d) for d in dtypes)
        raise TypeError(f"{lf.name}: no {lf.name} of {names} atoms ({e})") from None


# -- a call's type from shapes alone (typeof / check) ----------------------------------------------


def _shape_arg(lf: Any, i: int, x: Any) -> ShapeIndex:
    shape = ShapeIndex(x if isinstance(x, ShapeIndex | tuple | str) else tuple(np.shape(x)))
    if shape.shape_vars:
        raise TypeError(f"typeof({lf.name}): the shape {shape} of {_who(lf, i)} has shape "
                        f"variables; give its axes")
    return shape


def _elem_of(x: Any, p: Arr) -> str:
    if is_array(x) or isinstance(x, list):
        return _elem_name(x if is_array(x) else np.asarray(x))
    return p.elem


def _typeof_call(lf: Any, args: Sequence[Any]) -> Instance:
    """``lf``'s type instantiated at these arguments (arrays, or shapes), without running."""
    _check_arity(lf, args)
    real, cell_items, frame = _split(lf, [_shape_arg(lf, i, args[i]).items for i in lf.arrays])
    cells, m = _instantiate(lf, cell_items, args)
    frames = tuple(_merge(lf, [None] * len(lf.type.params), [ShapeIndex(f) for f in real]))
    result = m.result()
    if lf.inner is not None:  # an eta-expansion's result cell: the inner function's result
        result = _inner_type(lf, args, [cells[i] for i in lf.arrays]).result
    elems = {i: _elem_of(args[i], lf.type.params[i]) for i in lf.arrays}
    if lf.ufunc is not None:
        result = _ufunc_result(lf, result, [args[i] for i in lf.arrays])
    cell_types = tuple(None if c is None else Arr(elems[i], c) for i, c in enumerate(cells))
    return Instance(lf.name, ShapeIndex(frame), frames, cell_types,
                    _elem_result(lf, result, elems), MappingProxyType(m.public(m.dims)),
                    MappingProxyType(m.public(m.shapes)), tuple(m.conditions),
                    lf.type.names)


def _inner_type(lf: Any, args: Sequence[Any], cells: Sequence[Any]) -> Instance:
    """An eta-expansion's inner function typed at the new cells (Remora types the cells, not
    the data: a cell too small for the inner function is an error even with no cells)."""
    return lf.inner.typeof(*_merge(lf, args, cells))


def _ufunc_result(lf: Any, result: Arr | Sigma | None, args: Sequence[Any]
                  ) -> Arr | Sigma | None:
    """A ufunc's result atom type from NumPy's type resolution, not the first argument's."""
    dtypes = [x.dtype if is_array(x) else np.asarray(x).dtype for x in args
              if is_array(x) or isinstance(x, list | int | float | bool | complex)]
    if len(dtypes) != len(args) or not isinstance(result, Arr):
        return result
    out = _check_atoms(lf, dtypes)
    return result if out is None else Arr(str(out), result.shape)


def _elem_result(lf: Any, result: Arr | Sigma | None, elems: dict[int, str]
                 ) -> Arr | Sigma | None:
    body = result.body if isinstance(result, Sigma) else result
    if body is None:
        return None
    for i, e in elems.items():
        if lf.type.params[i].elem == body.elem:
            body = Arr(e, body.shape)
            break
    return Sigma(result.hidden, body) if isinstance(result, Sigma) else body
