"""Remora's primitives, each a lifted function with its type written in :mod:`tensig.core.dims`.

Every primitive works on its argument's *major axis* (the first axis of its cell).  With the
default cell ranks a shape-polymorphic argument is taken whole (its cell is the whole array, the
frame is empty), so ``head(m)`` is the first row of a matrix; :func:`rerank` picks smaller
cells, so ``rerank(head, 1)(m)`` is the first column.  Scalar arguments (``rotate``'s ``n``,
``select``'s condition) have rank-0 cells and lift over their frames.

Each implementation ``_name(nf, *args)`` works on arrays carrying ``nf`` leading frame axes
(all frames equalised), so a reranked primitive runs as one vectorised call; with ``nf == 0``
it is the cell function itself.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from tensig.backends import backend_among, to_numpy
from tensig.core.errors import ShapeError
from tensig.rank._lifting import Lifted, Overloaded, rerank  # noqa: F401 (doctests)
from tensig.rank._types import FnType, Fun, Sigma, Static, arr

__all__ = [
    "antibase", "append", "base", "behead", "curtail", "drop", "equal", "filter", "fold",
    "fold_right", "head", "index", "iota", "iota_s", "iota_v", "iota_w", "itemize", "length",
    "nub", "nub_sieve", "ravel", "reduce", "reshape", "reverse", "rotate", "scan", "select",
    "shape_of", "tail", "take", "transpose",
]


def _at(nf: int, k: Any) -> tuple[Any, ...]:
    """An index selecting ``k`` on the major axis of cells behind ``nf`` frame axes."""
    return (slice(None),) * nf + (k,)


def _prim(name: str, impl: Callable[..., Any], params: Sequence[Any], result: Any,
          names: Sequence[str], doc: str, *, ranks: Sequence[Any] | None = None,
          batched: bool = True, boxed: bool = False, **type_kw: Any) -> Lifted:
    ftype = FnType(name, tuple(params), result, names=tuple(names), **type_kw)
    return Lifted(partial(impl, 0), ftype, ranks, batched=impl if batched else None,
                  boxed=boxed, doc=_typed(doc, ftype))


def _overload(name: str, forms: Sequence[Lifted], chooser: Callable[[Sequence[Any]], int],
              doc: str) -> Overloaded:
    return Overloaded(name, forms, chooser, doc=_typed(doc, *(f.type for f in forms)))


def _typed(doc: str, *ftypes: FnType) -> str:
    """``doc`` with the type of each form, printed from its one declaration, after the first
    paragraph."""
    summary, _, rest = doc.partition("\n\n")
    types = " and ".join(f"``{str(t).partition(' : ')[2]}``" for t in ftypes)
    return f"{summary}\n\n    Type{'s' * (len(ftypes) > 1)} {types}.\n\n{rest}"


# -- items of the major axis -----------------------------------------------------------------------

_NONEMPTY = arr("t", "1 + d, ..s..")


def _item(name: str, k: Any, result: str, doc: str) -> Lifted:
    """The primitive that reads ``k`` (a position or a slice) of a nonempty major axis."""
    def impl(nf: int, x: Any) -> Any:
        return x[_at(nf, k)]

    return _prim(name, impl, [_NONEMPTY], arr("t", result), ["x"], doc,
                 hint=f"{name} needs a nonempty major axis (1 + d items)")


head = _item("head", 0, "..s..", """The first item.

    The major axis has ``1 + d >= 1`` items.

    >>> head(np.array([[0, 1], [2, 3], [4, 5]]))
    array([0, 1])
    >>> rerank(head, 1)(np.array([[0, 1], [2, 3], [4, 5]]))  # first scalar of each row
    array([0, 2, 4])
    """)

tail = _item("tail", -1, "..s..", """The last item.

    >>> tail(np.array([[0, 1], [2, 3], [4, 5]]))
    array([4, 5])
    """)

behead = _item("behead", slice(1, None), "d, ..s..", """All but the first item.

    >>> behead(np.array([1, 2, 3]))
    array([2, 3])
    """)

curtail = _item("curtail", slice(None, -1), "d, ..s..", """All but the last item.

    >>> curtail(np.array([1, 2, 3]))
    array([1, 2])
    """)


def _reverse(nf: int, x: Any) -> Any:
    return backend_among([x]).flip(x, nf)


reverse = _prim("reverse", _reverse, [arr("t", "d, ..s..")], arr("t", "d, ..s.."), ["x"],
                """The items in reverse order.

    >>> reverse(np.array([[1, 2], [3, 4]]))
    array([[3, 4],
           [1, 2]])
    """)


def _rotate(nf: int, x: Any, n: Any) -> Any:
    m = x.shape[nf]
    if m == 0:
        return x
    xp = backend_among([x, n])
    if nf == 0:
        k = operator.index(int(n)) % m
        return xp.concat([x[k:], x[:k]], 0)
    idx = (xp.reshape(n, (*tuple(n.shape), 1)) + xp.arange(m, like=x)) % m
    idx = xp.reshape(idx, tuple(idx.shape) + (1,) * (x.ndim - nf - 1))
    return xp.take_along(x, xp.broadcast_to(idx, tuple(x.shape)), nf)


rotate = _prim("rotate", _rotate, [arr("t", "d, ..s.."), arr("Int")], arr("t", "d, ..s.."),
               ["x", "n"], """The items rotated left by ``n`` (negative ``n`` rotates right).

    ``n`` is a scalar cell, so an array of amounts gives one rotation each.

    >>> rotate(np.array([1, 2, 3, 4]), 1)
    array([2, 3, 4, 1])
    >>> rotate(np.array([1, 2, 3, 4]), np.array([0, -1]))
    array([[1, 2, 3, 4],
           [4, 1, 2, 3]])
    """)


def _append(nf: int, a: Any, b: Any) -> Any:
    return backend_among([a, b]).concat([a, b], nf)


append = _prim("append", _append, [arr("t", "m, ..s.."), arr("t", "n, ..s..")],
               arr("t", "m + n, ..s.."), ["a", "b"],
               """The items of ``a`` followed by those of ``b``.

    The items' shapes must be equal.

    >>> append(np.array([1, 2]), np.array([3, 4, 5]))
    array([1, 2, 3, 4, 5])
    """)


def _length(nf: int, x: Any) -> Any:
    return backend_among([x]).fill(tuple(x.shape[:nf]), x.shape[nf], like=x)


length = _prim("length", _length, [arr("t", "d, ..s..")], arr("Int"), ["x"], """The number of items.

    >>> length(np.zeros((4, 2)))
    array(4)
    """)


def _shape_of(nf: int, x: Any) -> Any:
    xp = backend_among([x])
    cell = tuple(int(v) for v in x.shape[nf:])
    v = xp.asarray(np.array(cell, dtype=np.int64), like=x)
    return xp.broadcast_to(v, (*tuple(x.shape[:nf]), len(cell)))


shape_of = _prim("shape_of", _shape_of, [arr("t", "..s..")], arr("Int", "k"), ["x"],
                 """The shape as a vector.

    The ``where`` relation is beyond Remora's index language; it is decided at
    instantiation, where ranks are known.

    >>> shape_of(np.zeros((2, 3)))
    array([2, 3])
    """, rank_of=(("s", "k"),), note="len(..s..) == k")


def _itemize(nf: int, x: Any) -> Any:
    return backend_among([x]).reshape(x, (*tuple(x.shape[:nf]), 1, *tuple(x.shape[nf:])))


itemize = _prim("itemize", _itemize, [arr("t", "..s..")], arr("t", "1, ..s.."), ["x"],
                """The cell as a one-item array (a new major axis of length 1).

    >>> itemize(np.array([1, 2]))
    array([[1, 2]])
    """)


def _transpose(nf: int, x: Any) -> Any:
    # the cell's axes reversed, here and not by _permute: its int() per axis cost 1 µs a call
    return backend_among([x]).transpose(x, [*range(nf), *range(x.ndim - 1, nf - 1, -1)])


def _reversed_shape(dims: Any, shapes: Any) -> dict[str, Any]:
    return {"r": shapes["s"][::-1]}


def _permute(nf: int, perm: Any, x: Any) -> Any:
    return backend_among([x]).transpose(x, [*range(nf), *(nf + int(p) for p in perm)])


def _permuted_shape(dims: Any, shapes: Any) -> dict[str, Any]:
    perm, s = [int(p) for p in shapes["p"]], shapes["s"]
    if sorted(perm) != list(range(len(s))):
        raise ShapeError(f"transpose: {tuple(perm)} is not a permutation of the {len(s)} axes "
                         f"of a cell of shape {s}", sizes=(str(tuple(perm)), len(s)),
                         hint=f"give each of 0 .. {len(s) - 1} once")
    return {"r": type(s)([s[i] for i in perm])}


_TRANSPOSE_DOC = """The axes in reverse order (APL's monadic transpose), or in a given order.

    ``transpose(perm, x)`` takes a static permutation (a tuple): axis ``i`` of the result is
    axis ``perm[i]`` of the cell (NumPy's ``transpose(x, perm)``).  ``..r..`` is outside
    Remora's index language; it is computed at instantiation.

    >>> transpose(np.arange(6).reshape(2, 3)).shape
    (3, 2)
    >>> transpose((1, 2, 0), np.zeros((2, 3, 4))).shape
    (3, 4, 2)
    """

transpose = _overload("transpose", [
    _prim("transpose", _transpose, [arr("t", "..s..")], arr("t", "..r.."), ["x"],
          _TRANSPOSE_DOC, derive=_reversed_shape, note="..r.. is ..s.. reversed"),
    _prim("transpose", _permute, [Static("p", "Shape"), arr("t", "..s..")],
          arr("t", "..r.."), ["perm", "x"], _TRANSPOSE_DOC, derive=_permuted_shape,
          note="..r.. is ..s.. permuted by ..p.."),
], lambda args: 1 if len(args) == 2 else 0, _TRANSPOSE_DOC)


# -- reductions: reduce, fold, fold_right, scan ----------------------------------------------------


def _elementwise(op: Any, *xs: Any) -> Any:
    """``op``'s version for the arrays' library when it is elementwise (a ufunc), else None."""
    if isinstance(op, np.ufunc):
        return backend_among(xs).ufunc(op)
    return None


def _reduce(nf: int, op: Any, x: Any) -> Any:
    """A fold from the first item (NumPy's ufuncs: their own ``reduce``, no copy)."""
    if _elementwise(op, x) is op and backend_among([x]).numpy_native:
        return op.reduce(x, axis=nf)
    return _fold(nf, op, x[_at(nf, 0)], x[_at(nf, slice(1, None))])


_CELL_OP = Fun((arr("t", "..s.."), arr("t", "..s..")), arr("t", "..s.."))
_FOLD_OP = Fun((arr("u", "..r.."), arr("t", "..s..")), arr("u", "..r.."))
_FOLD_R_OP = Fun((arr("t", "..s.."), arr("u", "..r..")), arr("u", "..r.."))

reduce = _prim("reduce", _reduce, [_CELL_OP, _NONEMPTY], arr("t", "..s.."), ["op", "x"],
               """Combine the items left to right: ``op(op(x0, x1), x2) ...``.

    At least one item (use :func:`fold` with an initial value for possibly empty arrays).
    ``op`` receives whole item cells; a NumPy ufunc runs as ``op.reduce``.

    >>> reduce(np.add, np.array([[1, 2], [3, 4], [5, 6]]))
    array([ 9, 12])
    >>> rerank(reduce, 1)(np.subtract, np.array([[10, 1, 2], [5, 5, 5]]))
    array([ 7, -5])
    """, hint="reduce needs at least one item; fold takes an initial value for empty arrays")


def _fold(nf: int, op: Any, init: Any, x: Any, scan: bool = False, right: bool = False) -> Any:
    """A left fold from ``init`` (``right``: a right fold to it); with ``scan``, every
    intermediate result too."""
    f = _elementwise(op, init, x)
    xp = backend_among([init, x])
    if f is op and xp.numpy_native and not right and \
            tuple(init.shape) == tuple(x.shape[:nf]) + tuple(x.shape[nf + 1:]):  # same items
        whole = np.concatenate([_itemize(nf, init), x], axis=nf)
        return (op.accumulate if scan else op.reduce)(whole, axis=nf)
    if nf and f is None:
        return NotImplemented
    f, acc = f or op, init
    out = [acc]  # every intermediate result for a scan only: a fold holds one
    for i in reversed(range(x.shape[nf])) if right else range(x.shape[nf]):
        acc = f(x[_at(nf, i)], acc) if right else f(acc, x[_at(nf, i)])
        if scan:
            out.append(acc)
            if tuple(getattr(acc, "shape", ())) != tuple(init.shape):  # stack would refuse
                raise ShapeError(f"scan: the function returned a cell of shape "
                                 f"{tuple(getattr(acc, 'shape', ()))[nf:]}, but the initial "
                                 f"value's cell is {tuple(init.shape)[nf:]}")
    return xp.stack([xp.asarray(o, like=x) for o in out], nf) if scan else acc


fold = _prim("fold", _fold, [_FOLD_OP, arr("u", "..r.."), arr("t", "d, ..s..")], arr("u", "..r.."),
             ["op", "init", "x"], """Left fold from ``init``: ``op(op(op(init, x0), x1), x2) ...``.

    An empty major axis gives ``init``.

    >>> fold(np.subtract, np.array(100), np.array([1, 2, 3]))
    np.int64(94)
    >>> fold(lambda acc, item: acc * 10 + item, np.array(0), np.array([4, 5, 6]))
    np.int64(456)
    """)

fold_right = _prim("fold_right", partial(_fold, right=True),
                   [_FOLD_R_OP, arr("u", "..r.."), arr("t", "d, ..s..")], arr("u", "..r.."),
                   ["op", "init", "x"], """Right fold to ``init``: ``op(x0, op(x1, op(x2, init)))``.

    >>> fold_right(np.subtract, np.array(0), np.array([1, 2, 3]))  # 1 - (2 - (3 - 0))
    np.int64(2)
    """)

scan = _prim("scan", partial(_fold, scan=True), [_FOLD_OP, arr("u", "..r.."), arr("t", "d, ..s..")],
             arr("u", "1 + d, ..r.."), ["op", "init", "x"],
             """Every intermediate result of :func:`fold`, starting with ``init`` (``1 + d`` items).

    >>> scan(np.add, np.array(0), np.array([1, 2, 3]))
    array([0, 1, 3, 6])
    """)


# -- iota and reshape ------------------------------------------------------------------------------


def _naturals(name: str, v: Any) -> tuple[int, ...]:
    dims = tuple(int(d) for d in np.asarray(v).reshape(-1).tolist())
    if any(d < 0 for d in dims):
        raise ValueError(f"{name}: a shape has no negative sizes, got {dims}")
    return dims


def _iota_array(shape: tuple[int, ...], like: Any = None) -> Any:
    xp = backend_among([like])
    return xp.reshape(xp.arange(math.prod(shape), like=like), shape)


def _iota(nf: int, shape: Any, name: str = "iota") -> Any:
    return _iota_array(_naturals(name, shape), shape)


def _iota_w(nf: int, w: Any) -> Any:
    return backend_among([w]).broadcast_to(_iota_array(tuple(w.shape[nf:]), w), tuple(w.shape))


iota = _prim("iota", _iota, [arr("Int", "d")], Sigma(("s",), arr("Int", "..s..")), ["shape"],
             """Successive naturals in an array of the given shape, boxed (the shape is data).

    Lifted over a frame of shape vectors it gives an array of boxes of different shapes.

    >>> iota(np.array([2, 3])).value
    array([[0, 1, 2],
           [3, 4, 5]])
    >>> [b.shape for b in iota(np.array([[2, 2], [3, 1]]))]
    [(2, 2), (3, 1)]
    """, batched=False, boxed=True)

iota_v = _prim("iota_v", partial(_iota, name="iota_v"), [arr("Int")],
               Sigma(("d",), arr("Int", "d")), ["n"],
               """The vector ``0 .. n-1``, boxed as a vector of unknown length.

    >>> b = iota_v(4)
    >>> b.value, str(b.type)
    (array([0, 1, 2, 3]), 'Σ(d). [int64 d]')
    """, batched=False, boxed=True)

iota_s = _prim("iota_s", partial(_iota, name="iota_s"), [Static("s", "Shape")],
               arr("Int", "..s.."), ["shape"],
               """Successive naturals at a static shape (an index argument): unboxed.

    >>> iota_s((2, 2))
    array([[0, 1],
           [2, 3]])
    """, batched=False)

iota_w = _prim("iota_w", _iota_w, [arr("t", "..s..")], arr("Int", "..s.."), ["witness"],
               """Successive naturals shaped like the witness array (a shape witness): unboxed.

    >>> iota_w(np.zeros((2, 3)))
    array([[0, 1, 2],
           [3, 4, 5]])
    """)


def _reshape(nf: int, shape: Any, x: Any) -> Any:
    """``x``'s atoms, cyclically, in cells of ``shape``."""
    shape, xp = _naturals("reshape", shape), backend_among([x])
    frame = tuple(x.shape[:nf])
    flat = xp.reshape(x, (*frame, -1)) if x.ndim > nf else xp.reshape(x, (*frame, 1))
    have, need = flat.shape[-1], math.prod(shape)
    if need and not have:
        raise ShapeError(f"reshape: cannot fill shape {shape} from a cell with no atoms",
                         sizes=(need, have))
    if need == have:
        return xp.reshape(flat, frame + shape)
    idx = xp.arange(need, like=x) % max(have, 1)
    return xp.reshape(flat[(slice(None),) * nf + (idx,)], frame + shape)


_RESHAPE_DOC = """A new array of the given shape, its atoms taken from ``x`` cyclically.

    The shape is static (a Python tuple, an index argument) or data (a list or an array:
    the result is boxed).

    >>> reshape((3, 2), np.array([1, 2, 3, 4, 5]))
    array([[1, 2],
           [3, 4],
           [5, 1]])
    >>> reshape(np.array([2, 2]), np.array([7, 8, 9])).value
    array([[7, 8],
           [9, 7]])
    """

reshape = _overload("reshape", [
    _prim("reshape", _reshape, [Static("r", "Shape"), arr("t", "..s..")],
          arr("t", "..r.."), ["shape", "x"], _RESHAPE_DOC),
    _prim("reshape", _reshape, [arr("Int", "d"), arr("t", "..s..")],
          Sigma(("r",), arr("t", "..r..")), ["shape", "x"], _RESHAPE_DOC, batched=False,
          boxed=True),
], lambda args: 0 if isinstance(args[0], tuple) else 1, _RESHAPE_DOC)


def _ravel(nf: int, x: Any) -> Any:
    return backend_among([x]).reshape(x, (-1,))


ravel = _prim("ravel", _ravel, [arr("t", "..s..")], Sigma(("d",), arr("t", "d")), ["x"],
              """The atoms in row-major order, boxed (their number is a product of sizes,
    outside Presburger arithmetic).

    >>> ravel(np.array([[1, 2], [3, 4]])).value
    array([1, 2, 3, 4])
    """, batched=False, boxed=True)


def _filter(nf: int, mask: Any, x: Any) -> Any:
    return x[mask] if mask.shape[0] else x  # no items: an empty mask of any dtype selects none


filter = _prim("filter", _filter, [arr("Bool", "d"), arr("t", "d, ..s..")],
               Sigma(("l",), arr("t", "l, ..s..")), ["mask", "x"],
               """The items where ``mask`` is true, boxed (their number is data).

    Only the major axis is hidden.

    >>> b = filter(np.array([True, False, True]), np.array([[1, 2], [3, 4], [5, 6]]))
    >>> b.value, str(b.type)
    (array([[1, 2],
           [5, 6]]), 'Σ(l). [int64 l, 2]')
    """, batched=False, boxed=True)


# -- nub, nub_sieve, equal -------------------------------------------------------------------------


def _nub_sieve(nf: int, x: Any) -> Any:
    """True at the first occurrence of each distinct item of the major axis (sort-based:
    ``O(d log d)`` comparisons of whole items)."""
    items = to_numpy(x).reshape(x.shape[0], math.prod(x.shape[1:]))
    sieve = np.zeros(items.shape[0], dtype=bool)
    if items.shape[0]:
        _, first = np.unique(items, axis=0, return_index=True)
        sieve[first] = True
    return backend_among([x]).asarray(sieve, like=x)


def _nub(nf: int, x: Any) -> Any:
    return x[_nub_sieve(nf, x)]


nub_sieve = _prim("nub_sieve", _nub_sieve, [arr("t", "d, ..s..")], arr("Bool", "d"), ["x"],
                  """Whether each item of the major axis is the first of its kind.

    Remora's ``nub-sieve``; items compare whole, so a row is a duplicate only when all of
    it repeats an earlier row.

    >>> nub_sieve(np.array([3, 1, 3, 2, 1]))
    array([ True,  True, False,  True, False])
    """, batched=False)

nub = _prim("nub", _nub, [arr("t", "d, ..s..")], Sigma(("l",), arr("t", "l, ..s..")), ["x"],
            """The distinct items of the major axis in order of first appearance, boxed.

    Remora's ``nub``: how many items are distinct is data.

    >>> nub(np.array([[1, 2], [3, 4], [1, 2]])).value
    array([[1, 2],
           [3, 4]])
    """, batched=False, boxed=True)


def _equal(nf: int, a: Any, b: Any) -> Any:
    same = tuple(a.shape) == tuple(b.shape) and bool(np.array_equal(to_numpy(a), to_numpy(b)))
    return backend_among([a, b]).asarray(np.bool_(same), like=a)


equal = _prim("equal", _equal, [arr("t", "..s.."), arr("u", "..r..")], arr("Bool"), ["a", "b"],
              """Whether two arrays are the same: equal shapes and equal atoms.

    Remora's ``equal``; arrays of different shapes are simply unequal.  Rerank it to compare
    cells:

    >>> equal(np.array([1, 2]), np.array([1, 2])), equal(np.array([1, 2]), np.array([1]))
    (array(True), array(False))
    >>> rerank(equal, 1, 1)(np.array([[1, 2], [3, 4]]), np.array([[1, 2], [4, 3]]))
    array([ True, False])
    """, batched=False)


# -- take and drop ---------------------------------------------------------------------------------


def _count(name: str, n: Any) -> int:
    try:
        return operator.index(n)
    except TypeError:
        raise TypeError(f"{name}: n must be an integer, not {type(n).__name__}") from None


def _take(nf: int, n: Any, x: Any, keep: bool = True, name: str = "take") -> Any:
    k, m = int(n), x.shape[nf]  # n: checked by its type
    if abs(k) > m:
        raise ShapeError(f"{name}: |n| = {abs(k)} is more than the {m} items of the major axis",
                         sizes=(abs(k), m))
    if keep:
        return x[_at(nf, slice(0, k) if k >= 0 else slice(m + k, m))]
    return x[_at(nf, slice(k, m) if k >= 0 else slice(0, m + k))]


def _is_static(args: Sequence[Any]) -> int:
    n = args[0] if args else None
    return 0 if isinstance(n, int | np.integer) and not isinstance(n, bool) else 1


_TAKE_DOC = """The first ``n`` items (the last ``-n`` when ``n < 0``).

    ``n`` is static (a Python int, an index argument: ``l = |n|``) or data (an array, lifted
    over its frame: the result is boxed).

    >>> take(2, np.array([1, 2, 3])), take(-2, np.array([1, 2, 3]))
    (array([1, 2]), array([2, 3]))
    >>> [b.value.tolist() for b in take(np.array([1, 3]), np.array([1, 2, 3]))]
    [[1], [1, 2, 3]]
    """

_DROP_DOC = """All but the first ``n`` items (all but the last ``-n`` when ``n < 0``).

    ``n`` is static (``l = |n|``) or data (the result boxed), as :func:`take`'s.

    >>> drop(1, np.array([1, 2, 3])), drop(-1, np.array([1, 2, 3]))
    (array([2, 3]), array([1, 2]))
    """


def _take_or_drop(name: str, keep: bool, doc: str) -> Overloaded:
    impl = partial(_take, keep=keep, name=name)
    kept = "l, ..s.." if keep else "d, ..s.."
    static = _prim(name, impl, [Static("l", convert=lambda n: abs(_count(name, n))),
                                arr("t", "l + d, ..s..")], arr("t", kept), ["n", "x"], doc,
                   hint=f"{name}: |n| must not exceed the number of items")
    data = _prim(name, impl, [arr("Int"), arr("t", "d, ..s..")],
                 Sigma(("l",), arr("t", "l, ..s..")), ["n", "x"], doc, batched=False, boxed=True)
    return _overload(name, [static, data], _is_static, doc)


take = _take_or_drop("take", True, _TAKE_DOC)
drop = _take_or_drop("drop", False, _DROP_DOC)


# -- index, select, base, antibase -----------------------------------------------------------------


def _check_bounds(i: Any, bounds: tuple[int, ...]) -> None:
    if not bounds:  # an empty position: the whole cell
        return
    idx = to_numpy(i).reshape(-1, len(bounds))
    bad = (idx < 0) | (idx >= np.asarray(bounds, dtype=np.int64))
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        raise IndexError(f"index: position {tuple(idx[row].tolist())} is out of range for "
                         f"leading axes {bounds} (positions are naturals below the sizes)")


def _index(nf: int, x: Any, i: Any) -> Any:
    n = i.shape[-1]
    bounds = tuple(int(v) for v in x.shape[nf:nf + n])
    _check_bounds(i, bounds)
    xp = backend_among([x, i])
    frame = tuple(x.shape[:nf])
    grids = tuple(xp.reshape(xp.arange(frame[k], like=x), (1,) * k + (frame[k],)
                             + (1,) * (nf - k - 1)) for k in range(nf))
    return x[grids + tuple(i[..., j] for j in range(n))]


index = _prim("index", _index, [arr("t", "..s.., ..r.."), arr("Int", "l")], arr("t", "..r.."),
              ["x", "i"], """The cell of ``x`` at position ``i`` along its leading axes.

    Positions are naturals (no negative indices).

    >>> m = np.array([[1, 2], [3, 4]])
    >>> index(m, np.array([1, 0])), index(m, np.array([1]))
    (np.int64(3), array([3, 4]))
    >>> index(m, np.array([[0, 1], [1, 1]]))  # a frame of positions
    array([2, 4])
    """, rank_of=(("s", "l"),), note="len(..s..) == l")


def _select(nf: int, cond: Any, a: Any, b: Any) -> Any:
    xp = backend_among([cond, a, b])
    c = xp.reshape(cond, tuple(cond.shape) + (1,) * (max(a.ndim, b.ndim) - nf))
    return xp.where(c, a, b)


select = _prim("select", _select, [arr("Bool"), arr("t", "..s.."), arr("t", "..s..")],
               arr("t", "..s.."), ["cond", "a", "b"], """``a`` where ``cond`` holds, else ``b``.

    At cell ranks ``(0, 0, 0)`` by default (pointwise); ``rerank(select, 0, 1, 1)`` picks
    whole rows.

    >>> select(np.array([True, False]), np.array([1, 2]), np.array([10, 20]))
    array([ 1, 20])
    """, ranks=(0, 0, 0))


def _base(nf: int, bases: Any, digits: Any) -> Any:
    acc = backend_among([bases, digits]).fill(tuple(digits.shape[:-1]), 0, like=digits)
    one = bases.shape[-1] == 1  # a single radix serves every digit (APL's 2 ⊥ 1 0 1)
    for k in range(digits.shape[-1]):
        acc = acc * bases[..., 0 if one else k] + digits[..., k]
    return acc


def _antibase(nf: int, bases: Any, n: Any) -> Any:
    xp = backend_among([bases, n])
    if bool((to_numpy(bases) <= 0).any()):
        raise ValueError("antibase: radices must be positive")
    d = bases.shape[-1]
    if d == 0:
        return xp.fill((*tuple(n.shape), 0), 0, like=n)
    digits, rest = [], n
    for k in reversed(range(d)):
        digits.append(rest % bases[..., k])
        rest = rest // bases[..., k]
    return xp.stack(digits[::-1], -1)


_BASE_DOC = """The number that mixed-radix ``digits`` denote (APL's decode).

    A single radix extends to every digit, as APL's decode extends a length-1 left argument.

    >>> base(np.array([24, 60, 60]), np.array([1, 2, 3]))  # 1h 2min 3s in seconds
    np.int64(3723)
    >>> base(np.array([2, 2, 2]), np.array([[1, 0, 1], [0, 1, 1]]))
    array([5, 3])
    >>> base(np.array([2]), np.array([1, 1, 0, 1]))
    np.int64(13)
    """


def _one_radix(args: Sequence[Any]) -> int:
    shape = getattr(args[0] if args else None, "shape", None)  # of the bases
    return 1 if shape is not None and len(shape) and shape[-1] == 1 else 0


base = _overload("base", [  # one radix per digit, or a single one for all
    _prim("base", _base, [arr("Int", radices), arr("Int", "d")], arr("Int"), ["bases", "digits"],
          _BASE_DOC) for radices in ("d", "1")], _one_radix, _BASE_DOC)

antibase = _prim("antibase", _antibase, [arr("Int", "d"), arr("Int")], arr("Int", "d"),
                 ["bases", "n"], """The mixed-radix digits of ``n`` (APL's encode).

    ``n`` is taken modulo the product of the radices, which must be positive.

    >>> antibase(np.array([24, 60, 60]), 3723)
    array([1, 2, 3])
    >>> antibase(np.array([2, 2, 2]), np.array([5, 3]))
    array([[1, 0, 1],
           [0, 1, 1]])
    """)


__test__ = {name: globals()[name].__doc__ for name in __all__}
