"""Padded batches: the padding side and the mask as one checked decision (the README's
"Padding" section says what a :class:`Padded` computes and why the side matters).

>>> import numpy as np
>>> p = pad([np.arange(5), np.arange(3), np.arange(1)])
>>> p.lengths, p.padding_fraction
(array([5, 3, 1]), 0.4)
>>> p.last_index(), pad([np.arange(5), np.arange(3), np.arange(1)], side="left").last_index()
(array([4, 2, 0]), array([4, 4, 4]))

NumPy, PyTorch and JAX arrays alike (the library found from the arrays' type).  Every check
reads sizes and the mask before any new array is built.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np

from tensig.backends import Backend, backend_for, is_array, library_of, neutral_max, to_numpy
from tensig.core.annotations import ShapeSpecMarker, dtype_name
from tensig.core.errors import ShapeError, SpecSyntaxError
from tensig.execution.price import itemsize

__all__ = ["Padded", "PaddedMarker", "PaddedPrice", "PaddingError", "pad", "symbolic_batch"]

Side = Literal["left", "right"]


class PaddingError(ShapeError):
    """A padded batch whose mask, lengths or side disagree, or sequences that cannot be padded;
    beyond :class:`tensig.ShapeError`'s facts, the offending ``row`` and the declared ``side``."""

    def __init__(self, reason: str, *, row: int | None = None, side: str | None = None,
                 **facts: Any):
        self.row = row
        self.side = side
        super().__init__(reason, **facts)

    def to_dict(self) -> dict[str, object]:
        return super().to_dict() | {"error": "PaddingError", "row": self.row, "side": self.side}


def _ops_for(array_type: type) -> Backend:
    """The adapter of an array type's library, which must hold values (not be lazy)."""
    backend = backend_for(array_type)  # raises a TypeError naming the supported libraries
    if backend.lazy:
        raise TypeError(f"padded batches support NumPy, PyTorch and JAX arrays, not "
                        f"{backend.name} arrays ({array_type.__module__}.{array_type.__name__}):"
                        f" their checks read the mask's values")
    return backend


# -- checks on plain Python values: they run before any array is built -------------------------
def _check_value(value: Any, dtype: Any) -> None:
    """Refuse a padding ``value`` that ``dtype`` does not hold (-1 in uint8, 1e40 in float32):
    the cast would wrap, saturate or fail.  A dtype NumPy does not know is not checked."""
    try:
        name = dtype_name(dtype)
        kind = np.dtype(name).kind
    except TypeError:
        return
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # a 0-d array, a tensor
        value = value.item()
    try:  # None: no real number, or one too large for a float (``10**400``)
        number = None if isinstance(value, str | bytes) else float(value)
    except (TypeError, ValueError, OverflowError):
        number = None
    if kind in "iu":
        info = np.iinfo(name)
        name += f" ({info.min}..{info.max})"
        whole = value if isinstance(value, int | np.integer) else \
            int(number) if number is not None and number.is_integer() else None
        fits = whole is not None and info.min <= whole <= info.max
    elif kind == "f":  # what rounds to the largest finite value fits (-3.4028235e38 in float32)
        with np.errstate(over="ignore"):
            fits = number is not None and (not math.isfinite(number) or
                                           bool(np.isfinite(np.asarray(number, name))))
    elif kind == "b":
        fits = number in (0, 1)
    else:
        fits = isinstance(value, int | float | complex | np.number)
    if not fits:
        raise PaddingError(f"value={value!r:.60} does not fit the rows' dtype {name}: the "
                           "padding cells would not hold it",
                           hint="pass a value of that dtype's range")


def _check_side(side: Any) -> Side:
    if side not in ("left", "right"):
        raise PaddingError(f"side must be 'left' or 'right', not {side!r}", side=str(side),
                           hint="right padding: real positions first; left: padding first")
    return side


def _check_count(name: str, value: Any, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise PaddingError(f"{name}= must be an integer >= {least}, not {value!r}")
    return int(value)


def _runs(row: Sequence[bool]) -> str:
    """A mask row as its runs: ``[0, 1, 1, 0]`` reads ``1 padding, 2 real, 1 padding``."""
    if not row:
        return "nothing (T = 0)"
    return ", ".join(f"{len(list(g))} {'real' if real else 'padding'}"
                     for real, g in itertools.groupby(row))


def _row_mask(lengths: Sequence[int], T: int, side: Side) -> np.ndarray:
    """The ``[B, T]`` mask of rows of ``lengths`` padded at ``side`` (built in NumPy)."""
    n = np.asarray(lengths, dtype=np.int64).reshape(-1, 1)
    positions = np.arange(T)
    return positions < n if side == "right" else positions >= T - n


# -- pad -----------------------------------------------------------------------------------------
def pad(sequences: Iterable[Any], side: Side = "right", value: Any = 0,
        length: int | None = None, multiple_of: int | None = None) -> Padded:
    """Pad sequences of different lengths into one :class:`Padded` batch ``[B, T, ...]``.

    ``sequences``: arrays of one library, each ``[length, ...]`` of one trailing shape and
    dtype, or Python lists (which become NumPy arrays).  ``T`` is the longest length, or
    ``length`` (at least that), rounded up to a multiple of ``multiple_of``.

    >>> p = pad([[1, 2, 3], [4]], side="left", value=-1)
    >>> p.data
    array([[ 1,  2,  3],
           [-1, -1,  4]])
    >>> p.mask.tolist(), p.side
    ([[True, True, True], [False, False, True]], 'left')
    """
    side = _check_side(side)
    seqs = list(sequences)
    if not seqs:
        raise PaddingError("pad() got no sequences: a batch needs at least one row to know its "
                           "trailing shape and dtype")
    if is_array(seqs[0]):
        lengths, trailing = _array_sizes(seqs)
    else:
        if hasattr(seqs[0], "shape"):  # a lazy library's array (Dask), or an unknown one:
            _ops_for(type(seqs[0]))  # raises, naming the libraries padded batches take
        seqs, lengths, trailing = _list_sizes(seqs)  # one NumPy array
    ops = _ops_for(type(seqs[0]))
    _check_value(value, seqs[0].dtype)
    T = _padded_length(lengths, length, multiple_of,
                       itemsize(seqs[0].dtype) * math.prod(trailing, start=len(lengths)))
    mask = _row_mask(lengths, T, side)
    on = ops.asarray(mask, seqs[0])
    data = ops.pad_rows(seqs, mask, on, trailing, value)
    return Padded._trusted(data, on, ops.asarray(np.asarray(lengths, dtype=np.int64), data),
                           side, tuple(lengths))


def _array_sizes(seqs: list[Any]) -> tuple[list[int], tuple[int, ...]]:
    """The rows' lengths and trailing shape: a few set comprehensions when the rows agree,
    else row by row, naming the first that disagrees."""
    shapes = [s.shape for s in seqs] if len({type(s) for s in seqs}) == 1 else None
    if shapes is not None and len(shapes[0]) >= 1 and len({s.dtype for s in seqs}) == 1 and \
            len({(len(s), tuple(s[1:])) for s in shapes}) == 1:  # one rank, one trailing shape
        return [s[0] for s in shapes], tuple(shapes[0][1:])
    lib, first = library_of(type(seqs[0])), tuple(seqs[0].shape)
    for i, s in enumerate(seqs):
        _check_row(i, s, lib, first, seqs[0])
    return [s.shape[0] for s in seqs], first[1:]


def _check_row(i: int, s: Any, lib: str, first: tuple[int, ...], first_row: Any) -> None:
    """Raise for row ``i`` if it cannot join a batch whose row 0 has shape ``first``."""
    if not is_array(s) or library_of(type(s)) != lib:
        raise PaddingError(f"row {i} is a {type(s).__module__}.{type(s).__name__}, row 0 a "
                           f"{lib} array: pad() takes arrays of one library, or lists alone",
                           row=i)
    if len(s.shape) == 0 or len(first) == 0:
        j = i if len(s.shape) == 0 else 0
        raise PaddingError(f"row {j} is a scalar (shape ()): each sequence needs a length axis",
                           row=j, shape="()")
    if tuple(s.shape[1:]) != first[1:]:
        raise PaddingError(
            f"row {i} has items of shape {tuple(s.shape[1:])}, row 0 of shape {first[1:]}: "
            "every sequence of a batch needs one trailing shape", row=i,
            shape=str(tuple(s.shape)), sizes=(tuple(s.shape[1:]), first[1:]))
    if s.dtype != first_row.dtype:
        raise PaddingError(f"row {i} has dtype {s.dtype}, row 0 {first_row.dtype}: convert "
                           "the sequences to one dtype first", row=i)


def _list_sizes(seqs: list[Any]) -> tuple[list[Any], list[int], tuple[int, ...]]:
    """Python sequences as one NumPy array of their items, their lengths and the items' shape;
    a row that is not a list, or ragged items, named."""
    for i, s in enumerate(seqs):
        if is_array(s) or not isinstance(s, (list, tuple, range)):
            row0 = "" if i == 0 else f", row 0 a {type(seqs[0]).__name__}"
            raise PaddingError(f"row {i} is a {type(s).__name__}{row0}: pad() takes a list of "
                               "sequences (arrays of one library, or lists)", row=i)
    lengths = [len(s) for s in seqs]
    try:
        flat = np.array(list(itertools.chain.from_iterable(seqs)))
    except ValueError:
        flat = None
    if flat is None or flat.dtype == object:  # the ragged row, named
        first: tuple[int, tuple[int, ...]] | None = None  # the first row with items
        for i, s in enumerate(seqs):
            if not len(s):
                continue
            try:
                items = np.asarray(s)
            except ValueError:  # NumPy refuses ragged items
                items = np.empty(0, dtype=object)
            if items.dtype == object:
                raise PaddingError(f"row {i}'s items are not numbers of one shape", row=i)
            if first is None:
                first = (i, items.shape[1:])
            elif items.shape[1:] != first[1]:
                raise PaddingError(f"row {i}'s items do not share row {first[0]}'s shape "
                                   f"{first[1]}", row=i)
        raise PaddingError("the sequences' items are not numbers of one shape")
    return [flat], lengths, flat.shape[1:]


def _padded_length(lengths: Sequence[int], length: int | None, multiple_of: int | None,
                   step: int) -> int:
    """``T``; a batch no array can address (``step`` bytes a position) is refused here."""
    longest = max(lengths)
    T = longest
    if length is not None:
        T = _check_count("length", length, 0)
        if longest > T:
            row = lengths.index(longest)
            raise PaddingError(f"row {row} has length {longest}, over length={T}", row=row,
                               sizes=(longest, T), hint="pass a larger length=, or truncate")
    if multiple_of is not None:
        m = _check_count("multiple_of", multiple_of, 1)
        T = -(-T // m) * m
    if T * step > sys.maxsize:
        raise PaddingError(f"pad() would make a batch [{len(lengths)}, {T}, ...] of {T * step} "
                           f"bytes, over the {sys.maxsize} an array can address",
                           sizes=(T, longest), hint="check length= and multiple_of=")
    return T


# -- the batch -----------------------------------------------------------------------------------
class Padded:
    """A batch of padded sequences: ``data`` ``[B, T, ...]``, ``mask`` ``[B, T]`` bool (True where
    real), ``lengths`` ``[B]`` and ``side`` (``"right"``: real positions first).  ``Padded(data,
    mask, side)`` checks that every mask row is one contiguous run of real positions at ``side``
    (``None``: :meth:`infer_side`), else a :class:`PaddingError` names the first row that is not.
    An empty row has no last item (:meth:`last` raises)."""

    __slots__ = ("_data", "_lengths", "_mask", "_ops", "_side", "_sizes")

    def __init__(self, data: Any, mask: Any, side: Side | None = None):
        if side is not None:
            side = _check_side(side)
        _check_mask(data, mask)
        side = Padded.infer_side(mask) if side is None else _check_rows(mask, side)
        lengths = mask.sum(axis=1)
        self._data, self._mask, self._lengths, self._side = data, mask, lengths, side
        self._sizes: tuple[int, ...] | None = tuple(int(n) for n in lengths.tolist())
        self._ops = _ops_for(type(data))

    @classmethod
    def _trusted(cls, data: Any, mask: Any, lengths: Any, side: Side,
                 sizes: tuple[int, ...] | None, ops: Backend | None = None) -> Padded:
        """A batch whose mask was built here from ``sizes`` (``None``: symbolic): unchecked."""
        self = cls.__new__(cls)
        self._data, self._mask, self._lengths, self._side = data, mask, lengths, side
        self._sizes, self._ops = sizes, ops or _ops_for(type(data))
        return self

    def __class_getitem__(cls, annotation: Any) -> Any:
        """``Padded[Float[ArrayType, "B T d"]]``: a padded batch whose data has that shape and
        dtype, for ``@tensig.shaped`` and ``tensig.verify`` (see :class:`PaddedMarker`)."""
        found = [m for m in getattr(annotation, "__metadata__", ())
                 if isinstance(m, ShapeSpecMarker)]
        if not found or isinstance(found[-1], PaddedMarker):
            raise TypeError('Padded[...] takes a shape annotation, e.g. '
                            'Padded[Float[np.ndarray, "B T d"]]')
        marker = found[-1]
        if marker.shape.rank is not None and marker.shape.rank < 2:
            raise SpecSyntaxError(marker.text, 0, f"a padded batch is [B, T, ...]: "
                                  f"{marker.text!r} has {marker.shape.rank} axis(es)",
                                  end=len(marker.text))
        return Annotated[Padded, PaddedMarker(marker.shape, marker.dtype)]

    # read-only: the data, mask, lengths and side were checked together
    data = property(lambda self: self._data, doc="``[B, T, ...]``: the padded sequences.")
    mask = property(lambda self: self._mask, doc="``[B, T]`` bool: True where real.")
    lengths = property(lambda self: self._lengths, doc="``[B]``: the rows' lengths.")
    side = property(lambda self: self._side, doc="``'right'`` or ``'left'``.")
    sizes = property(lambda self: self._sizes, doc="The lengths as Python ints.")

    @staticmethod
    def infer_side(mask: Any) -> Side:
        """The side a ``[B, T]`` boolean mask is padded on; refuses a row padded on neither
        side, mixed sides, and a mask that shows no side (every row full or empty).

        >>> import numpy as np
        >>> Padded.infer_side(np.array([[True, True], [False, True]]))
        'left'
        """
        _check_mask(None, mask)
        right, left = (_bad_rows(mask, s) for s in ("right", "left"))
        neither = np.flatnonzero(right & left)
        if neither.size:
            r = int(neither[0])
            raise PaddingError(f"mask row {r} is padded on neither side: it reads "
                               f"{_runs(_row(mask, r))}; a row must be one contiguous run of "
                               "real positions", row=r)
        only_right, only_left = np.flatnonzero(left), np.flatnonzero(right)
        if only_right.size and only_left.size:
            r, q = int(only_right[0]), int(only_left[0])
            raise PaddingError(f"the mask mixes sides: row {r} is right-padded "
                               f"({_runs(_row(mask, r))}), row {q} left-padded "
                               f"({_runs(_row(mask, q))})", row=q)
        if only_right.size or only_left.size:
            return "right" if only_right.size else "left"
        raise PaddingError("every mask row is full or empty: the mask does not show the side",
                           hint="pass side='left' or side='right'")

    # -- sizes -----------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The data's shape, ``(B, T, ...)`` (what ``@tensig.shaped`` checks)."""
        return tuple(self.data.shape)

    @property
    def dtype(self) -> Any:
        """The data's dtype."""
        return self.data.dtype

    @property
    def padding_fraction(self) -> float:
        """The share of the ``B x T`` cells that are padding."""
        cells = len(self.sizes) * self.data.shape[1]
        return 1 - sum(self.sizes) / cells if cells else 0.0

    def __repr__(self) -> str:
        return (f"Padded(side={self.side!r}, shape={self.shape}, lengths={list(self.sizes)}, "
                f"library={self._ops.name!r})")

    def price(self, dtype: Any = None) -> PaddedPrice:
        """The batch's bytes and those spent on padding (with ``dtype``: as if stored in it)."""
        per_cell = math.prod(self.shape[2:]) * itemsize(self.data.dtype if dtype is None
                                                         else dtype)
        cells = len(self.sizes) * self.shape[1]
        return PaddedPrice(data=cells * per_cell, mask=cells,
                           lengths=len(self.sizes) * itemsize(self.lengths.dtype),
                           padding=(cells - sum(self.sizes)) * per_cell)

    # -- reading through the mask -----------------------------------------------------------------
    def last_index(self) -> Any:
        """``[B]``: each row's last real index: ``length - 1`` right-padded, ``T - 1`` left."""
        self._need_items("last_index()")
        if self.side == "left":
            return self.lengths * 0 + (self.data.shape[1] - 1)
        return self.lengths - 1

    def last(self) -> Any:
        """``[B, ...]``: each row's last real item."""
        self._need_items("last()")
        if self.side == "left":
            return self.data[:, -1]
        rows = self._ops.asarray(np.arange(self.data.shape[0]), self.data)
        return self.data[rows, self.lengths - 1]

    def sum(self) -> Any:
        """``[B, ...]``: the sum over ``T`` of the real items (0 for an empty row)."""
        return self._ops.where(self._cell_mask(), self.data, 0).sum(axis=1)

    def mean(self) -> Any:
        """``[B, ...]``: the mean over ``T`` of the real items (NaN for an empty row)."""
        ops = self._ops
        dtype = self.data.dtype if ops.is_float(self.data.dtype) else ops.default_float()
        counts = ops.astype(self.lengths, dtype).reshape((-1,) + (1,) * (self.data.ndim - 2))
        with np.errstate(invalid="ignore", divide="ignore"):  # an empty row's 0 / 0
            return self.sum() / counts

    def max(self) -> Any:
        """``[B, ...]``: the maximum over ``T`` of the real items; an empty row gets the
        neutral element of max (-inf, or an integer dtype's minimum)."""
        ops = self._ops
        neutral = neutral_max(self.data.dtype)
        if self.sizes is not None and self.data.shape[1] == 0:  # (not asked under verify)
            return ops.full((self.data.shape[0], *self.shape[2:]), neutral, self.data)
        return ops.max_along(ops.where(self._cell_mask(), self.data, neutral), 1)

    def _cell_mask(self) -> Any:
        return self.mask.reshape(self.mask.shape + (1,) * (self.data.ndim - 2))

    def _need_items(self, what: str) -> None:
        if self.sizes is not None and 0 in self.sizes:  # None: symbolic (tensig.verify)
            r = self.sizes.index(0)
            raise PaddingError(f"{what}: row {r} is empty (length 0): it has no last item",
                               row=r, side=self.side,
                               hint="drop empty rows first, or read sum()/mean()/max()")

    # -- attention masks ---------------------------------------------------------------------------
    def key_mask(self, causal: bool = False) -> Any:
        """``[B, 1, T]`` bool, True where a key is real, broadcasting over the query axis of
        ``[B, T, T]`` scores (``mask[:, :, None]`` would mask queries); ``causal=True``:
        ``[B, T, T]``, False for keys after the query."""
        keys = self.mask[:, None, :]
        if not causal:
            return keys
        return keys & self._ops.asarray(np.tri(self.data.shape[1], dtype=bool), self.data)

    def causal_key_mask(self) -> Any:
        """``[B, T, T]`` bool: query ``i`` may attend to key ``j <= i`` where ``j`` is real."""
        return self.key_mask(causal=True)

    def additive_key_mask(self, dtype: Any = None, causal: bool = False,
                          finite: bool = False) -> Any:
        """:meth:`key_mask` as 0 (attend) and -inf, to add to scores before a softmax.  ``dtype``:
        the data's when floating, else the default float.  ``finite=True``: the dtype's lowest
        finite value instead, so a row with no real key softmaxes to a uniform row instead of
        NaN."""
        ops = self._ops
        if dtype is None:
            dtype = self.data.dtype if ops.is_float(self.data.dtype) else ops.default_float()
        dtype = ops.as_dtype(dtype)
        if not ops.is_float(dtype):  # -inf cast to an integer is no number; a minimum wraps
            raise PaddingError(f"additive_key_mask(dtype={dtype_name(dtype)}): an additive "
                               "mask is added to floating scores", hint="pass a floating "
                               "dtype, or use key_mask(), a bool mask, with integer data")
        fill = ops.finite_min(dtype) if finite else -math.inf
        return ops.astype(ops.where(self.key_mask(causal), 0.0, fill), dtype)

    # -- repacking ---------------------------------------------------------------------------------
    def to_side(self, side: Side, value: Any = 0) -> Padded:
        """The same sequences padded on ``side`` (padding cells hold ``value``)."""
        side = _check_side(side)
        if side == self.side:
            return self
        _check_value(value, self.data.dtype)
        ops, T = self._ops, self.data.shape[1]
        # both masks NumPy: concrete under jax.jit, where a boolean index must be
        old, mask = _row_mask(self.sizes, T, self.side), _row_mask(self.sizes, T, side)
        data = ops.masked_set(ops.full(self.shape, value, self.data), mask, self.data[old])
        return Padded._trusted(data, ops.asarray(mask, self.data), self.lengths, side,
                               self.sizes, ops)

    def unpad(self) -> list[Any]:
        """The sequences, each ``[length, ...]`` (views of ``data``)."""
        T = self.data.shape[1]
        if self.side == "left":
            return [self.data[b, T - n:] for b, n in enumerate(self.sizes)]
        return [self.data[b, :n] for b, n in enumerate(self.sizes)]


@dataclass(frozen=True)
class PaddedPrice:
    """The bytes of a padded batch; ``padding``: the part of ``data`` that holds padding."""

    data: int
    mask: int
    lengths: int
    padding: int

    @property
    def total(self) -> int:
        return self.data + self.mask + self.lengths

    @property
    def padding_fraction(self) -> float:
        return self.padding / self.data if self.data else 0.0


# -- mask checks -----------------------------------------------------------------------------------
def _check_mask(data: Any, mask: Any) -> None:
    """The mask's kind, rank, dtype and (with ``data``) sizes, before anything is computed."""
    if not is_array(mask):
        raise PaddingError(f"the mask must be an array, not a {type(mask).__name__}",
                           operand="mask")
    ops = _ops_for(type(mask))
    shape = tuple(mask.shape)
    if len(shape) != 2:
        raise PaddingError(f"the mask must be [B, T], not of shape {shape}", operand="mask",
                           shape=str(shape), hint="one row per sequence, one column per position")
    if not ops.is_bool(mask.dtype):
        raise PaddingError(f"the mask must be bool, not {mask.dtype}", operand="mask",
                           hint="True where a position is real: pass mask != 0")
    if data is None:
        return
    if not is_array(data) or library_of(type(data)) != library_of(type(mask)):
        raise PaddingError(f"data is a {type(data).__module__}.{type(data).__name__}, the mask a "
                           f"{ops.name} array: give both in one library", operand="data")
    if len(data.shape) < 2 or tuple(data.shape[:2]) != shape:
        raise PaddingError(f"data of shape {tuple(data.shape)} does not start with the mask's "
                           f"[B, T] = {list(shape)}", operand="data",
                           shape=str(tuple(data.shape)), sizes=(tuple(data.shape[:2]), shape))


def _bad_rows(mask: Any, side: Side) -> np.ndarray:
    """A NumPy bool ``[B]``: the rows that are not one run of real positions at ``side``."""
    before, after = mask[:, :-1], mask[:, 1:]
    wrong = (~before & after) if side == "right" else (before & ~after)
    return np.asarray(to_numpy(wrong.any(axis=1)), dtype=bool)


def _row(mask: Any, r: int) -> list[bool]:
    return [bool(v) for v in to_numpy(mask[r]).tolist()]


def _check_rows(mask: Any, side: Side) -> Side:
    """``side``, when every row of ``mask`` is padded on it."""
    bad = np.flatnonzero(_bad_rows(mask, side))
    if bad.size:
        r = int(bad[0])
        row = _row(mask, r)
        other: Side = "left" if side == "right" else "right"
        fits_other = not _bad_rows(mask[r:r + 1], other)[0]
        first = "real positions first, then padding" if side == "right" else \
            "padding first, then real positions"
        raise PaddingError(
            f"mask row {r} is not {side}-padded: it reads {_runs(row)}; side={side!r} needs "
            f"{first}", row=r, side=side,
            hint=f"this row is {other}-padded: pass side={other!r}" if fits_other else
            "each row must be one contiguous run of real positions")
    return side


# -- annotations: Padded[Float[ArrayType, "B T d"]] ------------------------------------------------
@dataclass(frozen=True, repr=False)
class PaddedMarker(ShapeSpecMarker):
    """The marker of ``Padded[Float[ArrayType, "B T d"]]``: a :class:`Padded` whose data has
    that shape and dtype (its read-only mask and lengths agree by construction).

    >>> import numpy as np
    >>> from tensig import Float
    >>> Padded[Float[np.ndarray, "B T d"]].__metadata__
    (Padded[Float['B T d']],)
    """

    wrapper = Padded

    def __repr__(self) -> str:
        return f"Padded[{ShapeSpecMarker.__repr__(self)}]"


def symbolic_batch(data: Any) -> Padded:
    """The padded batch ``tensig.verify`` passes for a ``Padded[...]`` parameter: symbolic
    ``data``, mask and lengths (``to_side`` and ``unpad``, which read lengths, stop the trace)."""
    mask = type(data)(data.dims[:2], "b")
    return Padded._trusted(data, mask, type(data)(data.dims[:1], "i"), "right", None,
                           _ops_for(np.ndarray))
