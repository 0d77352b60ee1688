"""Boxes: Remora's dependent sums, an atom that holds an array whose shape is (partly) hidden.

A box is an atom, so arrays of boxes (NumPy object arrays) have frames like any other array,
and lifting passes the boxes themselves to a function of scalar cells.  :func:`unbox` is the
only way in: it maps a body over the boxes and refuses a declared result that mentions a hidden
size, because that size would escape the box.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tensig.backends import backend_among, dtype_name, is_array
from tensig.core.dims import Dim
from tensig.core.errors import ShapeError
from tensig.core.shape_index import ShapeIndex
from tensig.rank._types import Arr, FnType, ShapeLike, Sigma, arr, index_names, instantiate

__all__ = ["Box", "unbox"]


def _sigma_of(shape: ShapeLike | None,
              hidden: str | Sequence[str] | None) -> Sigma:
    body = arr("t", "..s.." if shape is None else shape)
    if hidden is None or shape is None:  # the default body hides all (as it always did)
        return Sigma(tuple(index_names(body.shape)), body)
    return Sigma((hidden,) if isinstance(hidden, str) else tuple(hidden), body)


def _objects(items: Sequence[Any], shape: tuple[int, ...]) -> np.ndarray:
    """``items`` (boxes, functions) as an object array of ``shape``; ``np.array`` would read
    the arrays some of them hold as more axes."""
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out.reshape(shape)


def _elem_name(value: Any) -> str:
    dt = getattr(value, "dtype", None)
    return "t" if dt is None else dtype_name(dt)


class Box:
    """An array with an existentially hidden shape: Remora's ``box`` (a dependent sum).

    ``shape`` is the type's body (default ``..s..``: all hidden); ``hidden`` the names it hides
    (default: all in ``shape``).  The value must fit; ``witness`` holds the hidden values.

    >>> b = Box(np.array([[1, 2, 3], [4, 5, 6]]), "l, 3")
    >>> b.type, b.witness
    (Sigma(hidden=('l',), body=Arr(elem='int64', shape=ShapeIndex('[l, 3]'))), {'l': Dim('2')})
    >>> print(b)
    Box(Σ(l). [int64 l, 3] with l = 2)
    >>> Box(np.arange(4), "l, 3")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tensig.ShapeError: Box: the value's shape is [4], which does not fit [l, 3]: its ...
    """

    __slots__ = ("_sigma", "value", "witness")
    __hash__ = None  # type: ignore[assignment]  # a box holds a mutable array

    def __init__(self, value: Any, shape: ShapeLike | None = None,
                 hidden: str | Sequence[str] | None = None, *,
                 witness: Mapping[str, Any] | None = None, _sigma: Sigma | None = None):
        self.value = value if is_array(value) else np.asarray(value)
        self._sigma = sigma = _sigma if _sigma is not None else _sigma_of(shape, hidden)
        self.witness = _witness(sigma, tuple(self.value.shape))
        if witness:
            self.witness = _explicit_witness(sigma, self.witness, witness)

    @property
    def type(self) -> Sigma:
        """The box's dependent-sum type, with the element type of its value."""
        return Sigma(self._sigma.hidden, Arr(_elem_name(self.value), self._sigma.body.shape))

    @property
    def shape(self) -> tuple[int, ...]:
        """The value's actual shape (what the type hides)."""
        return tuple(self.value.shape)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Box):
            return NotImplemented
        return (self.shape == other.shape and self._sigma.body.shape == other._sigma.body.shape
                and bool(np.array_equal(np.asarray(self.value), np.asarray(other.value))))

    def __repr__(self) -> str:
        return f"Box({self.value!r}, {self.type})"

    def __str__(self) -> str:
        bound = ", ".join(f"{k} = {v}" for k, v in self.witness.items())
        return f"Box({self.type}" + (f" with {bound})" if bound else ")")


def _explicit_witness(sigma: Sigma, derived: dict[str, Dim | ShapeIndex],
                      given: Mapping[str, Any]) -> dict[str, Dim | ShapeIndex]:
    """Remora's ``(box (i ...) e τ)``: hidden indices may be given explicitly, also those the
    value's shape does not determine (``(box (1 2) 100 (Sigma ($d $e) Int))``); where the
    shape does determine one, the two must agree."""
    out = dict(derived)
    for name, w in given.items():
        if name not in sigma.hidden:
            raise TypeError(f"Box: witness {name!r} is not a hidden index of {sigma} (hidden: "
                            f"{', '.join(sigma.hidden) or 'none'})")
        value = _index_value(name, w)
        if name in out and out[name] != value:
            raise ShapeError(f"Box: the witness {name} = {value} disagrees with the value's "
                             f"shape, which gives {name} = {out[name]}",
                             sizes=(str(value), str(out[name])))
        out[name] = value
    return out


def _index_value(name: str, w: Any) -> Dim | ShapeIndex:
    if isinstance(w, Dim | ShapeIndex):
        return w
    if isinstance(w, tuple | list):
        return ShapeIndex(tuple(_index_value(name, x) for x in w))
    if isinstance(w, bool) or not isinstance(w, int | np.integer) or w < 0:
        raise TypeError(f"Box: witness {name} must be a natural number, a shape (a tuple of "
                        f"them) or a tensig Dim, not {w!r}")
    return Dim.const(int(w))


def _witness(sigma: Sigma, shape: tuple[int, ...]) -> dict[str, Dim | ShapeIndex]:
    """Check the value's shape against the Σ body; return the hidden indices' values."""
    ftype = FnType("Box", (sigma.body,), None, names=("value",))
    try:
        m = instantiate(ftype, "Box", [ShapeIndex(shape)], {})
    except ShapeError as e:
        raise ShapeError(e.reason.replace("the cell of argument 0 (value)", "the value's shape"),
                         shape=str(shape), sizes=e.sizes) from None
    found: dict[str, Dim | ShapeIndex] = {**m.shapes, **m.dims}
    return {name: found[name] for name in sigma.hidden if name in found}


# -- unbox -----------------------------------------------------------------------------------------


def _check_escape(box: Box, declared: ShapeIndex | None) -> None:
    if declared is None:
        return
    escaping = sorted(set(index_names(declared)) & set(box.type.hidden))
    if escaping:
        raise ShapeError(
            f"unbox: the declared result cell {declared} mentions {', '.join(escaping)}, hidden "
            f"in the box {box.type}: a hidden size must not escape its box",
            sizes=(str(declared), str(box.type)),
            hint="return a Box from the body (rank.Box(value)) to keep the size hidden, or "
                 "declare a result that does not depend on it")


class _ResultCheck:
    """Checks body results against the declared cell, binding its free names on first sight."""

    def __init__(self, declared: ShapeIndex | None):
        self.declared = declared
        self.seen: tuple[int, ...] | None = None
        self.bound: dict[str, Dim] = {}

    def __call__(self, out: Any, where: str) -> None:
        if isinstance(out, Box):
            return
        shape = tuple(np.shape(out))
        if self.declared is None:
            if self.seen is not None and shape != self.seen:
                raise ShapeError(f"unbox: the body returned cells of shapes {self.seen} and "
                                 f"{shape} ({where})", sizes=(self.seen, shape),
                                 hint="return a Box from the body, or declare result=")
            self.seen = shape
            return
        ftype = FnType("unbox", (Arr("t", self.declared),), None, names=("result",))
        try:
            m = instantiate(ftype, "unbox", [ShapeIndex(shape)], {})
        except ShapeError as e:
            raise ShapeError(f"unbox: the body's result {shape} ({where}) does not fit the "
                             f"declared result cell {self.declared}: {e.reason.split(': ')[-1]}",
                             sizes=(str(self.declared), shape)) from None
        for k, v in m.dims.items():
            if self.bound.setdefault(k, v) != v:
                raise ShapeError(f"unbox: the declared result cell {self.declared} binds {k} to "
                                 f"{self.bound[k]} and to {v} ({where})",
                                 sizes=(self.bound[k], v))


def unbox(boxes: Box | Any, body: Callable[[Any], Any],
          result: ShapeLike | None = None) -> Any:
    """Map ``body`` over the values of a box or an array of boxes: Remora's ``unbox``.

    ``result`` declares the result cell (``()``, ``"n"``): it must not mention a size hidden in
    the box (it would escape), and every result must fit it.  Without it the results must have
    one shape, and an empty array of boxes is an error.  A body may return boxes.

    >>> b = Box(np.array([3, 1, 2]), "l")
    >>> unbox(b, lambda v: v.sum(), result=())
    np.int64(6)
    >>> bs = np.array([Box(np.arange(3), "l"), Box(np.arange(5), "l")], dtype=object)
    >>> unbox(bs, lambda v: v.sum(), result=())
    array([ 3, 10])
    >>> unbox(b, lambda v: v, result="l")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tensig.ShapeError: unbox: the declared result cell [l] mentions l, hidden in the box ...
    """
    declared = None if result is None else ShapeIndex(result)
    check, single = _ResultCheck(declared), isinstance(boxes, Box)
    grid = _objects([boxes], ()) if single else np.asarray(boxes, dtype=object)
    frame, outs = grid.shape, []
    for idx in np.ndindex(*frame):
        box = grid[idx]
        if not isinstance(box, Box):
            raise TypeError(f"unbox: the item at {idx} is a {type(box).__name__}, not a Box")
        _check_escape(box, declared)
        outs.append(body(box.value))
        check(outs[-1], "the box" if single else f"the box at {idx}")
    if single:
        return outs[0]
    if not outs:
        return _no_calls("unbox: the array of boxes", frame, declared)
    if all(isinstance(o, Box) for o in outs):
        return _objects(outs, frame)
    if any(isinstance(o, Box) for o in outs):
        raise TypeError("unbox: the body returned boxes for some items and arrays for others")
    return backend_among(outs).stack_cells(outs, frame, tuple(np.shape(outs[0])))


def _no_calls(what: str, frame: tuple[int, ...], declared: ShapeIndex | None) -> np.ndarray:
    """The result over an empty array (of boxes, of functions): nothing is called, so the
    declared result cell gives its shape."""
    if declared is None or not declared.is_concrete:
        raise ShapeError(f"{what} is empty (frame {frame}), so nothing is called and the "
                         f"result cell cannot be known",
                         hint="declare it with result=, e.g. result=() for scalars")
    return np.zeros(frame + declared.as_tuple())
