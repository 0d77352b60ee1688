"""Shape annotations: ``Shaped[ArrayType, "B T d"]`` and the parser behind it.

An annotation is the notation's shape syntax, read as a *type*: the sizes an array must have,
named so that every argument of a function (and its return value) that mentions ``T`` must
agree on it.  :func:`parse_annotation` turns the text into an :class:`AnnotationShape`;
:data:`Shaped`, :data:`Float`, :data:`Int` and :data:`Bool` wrap it into a
``typing.Annotated`` alias, so static checkers (pyright, mypy) and runtime type checkers
(beartype) still see the plain ``ArrayType``, while ``tensig.shaped`` and ``tensig.verify``
read the marker.

>>> import numpy as np
>>> hint = Float[np.ndarray, "B T d"]
>>> hint.__origin__ is np.ndarray, hint.__metadata__[0]
(True, Float['B T d'])
>>> parse_annotation("B T d").output
(Dim('B'), Dim('T'), Dim('d'))

Syntax (the notation's, with two differences noted below):

- **single-char mode** (no comma and no arithmetic operator anywhere): every letter is one
  axis and whitespace is ignored, so ``"B T d"`` and ``"BTd"`` are the same three axes.  A digit
  is a fixed size (``"B 3"``); two adjacent digits are an error (write ``"B, 16"``).
  A multi-letter word is *several axes*: ``"batch seq"`` is eight axes, by the notation's mode
  rule.  Errors about such annotations carry a hint to write ``"batch, seq"``.
- **multichar mode** (a comma, or one of ``+ - * // % ( )``): items are comma-separated, and each
  item is ``...``, ``..name..``, ``_``, an integer, or a dimension expression read by
  :meth:`tensig.dims.Dim.parse`: ``T+1``, ``2*h``, ``h*w``, ``T-1``, ``(T+1)//2``.
- **rows**: ``batch|input->output`` as in the notation.  *Difference 1*: an omitted row is
  **empty** here (in an einsum spec it is the context ellipsis ``...``).  A plain ``"B T d"``
  is output axes only, which is what a plain array has.  Arrays without tensig row information
  are matched in tensig's memory order: batch, output, input (see :attr:`AnnotationShape.items`).
- **row variables**: at most one per row.  ``..name..`` binds across every annotation of a
  signature; ``...`` is the anonymous row variable of its row kind, *also shared across the
  signature* (as in the notation, where ``...`` is one per row kind for the whole spec).
  *Difference 2* from jaxtyping, where ``...`` is never bound across arguments: write distinct
  names (``..a..``, ``..b..``) for leading axes that are unrelated.
- ``_`` is any size (two ``_`` are unrelated); ``""`` is a scalar (no axes).

Linters: ruff and pyflakes cannot tell that ``Float`` is ``typing.Annotated`` (pyright and
mypy can: they see the ``TYPE_CHECKING`` alias below), so they read the string in
``Float[np.ndarray, "B, T+1"]`` as a forward reference and report ``F821`` (undefined name) for
strings that are valid Python, ``F722`` for the others.  Ignore those codes where annotations
live, or bind the hint once at module level (``Tokens = Float[np.ndarray, "B, T"]``), where
linters do not read it as a type.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal

from tensig.dims import Dim
from tensig.errors import SpecSyntaxError
from tensig.notation import KINDS, Kind, Span, row_spans

__all__ = [
    "AnnotationShape",
    "Bool",
    "DtypeKind",
    "Float",
    "FunctionSignature",
    "Int",
    "Item",
    "ParameterSpec",
    "RowVariable",
    "ShapeSpecMarker",
    "Shaped",
    "dtype_kind",
    "parse_annotation",
    "signature_of",
    "words_hint",
]

DtypeKind = Literal["float", "int", "bool"]

_MULTICHAR = re.compile(r"[,+*/%()]|-(?!>)")
_ROW_VAR = re.compile(r"\.\.([A-Za-z_][A-Za-z0-9_]*)\.\.")
_UNSUPPORTED = {
    "^": "concatenation (a^b) belongs in einsum specs, not in annotations",
    "<": "convolution axes (o<+k) belong in einsum specs, not in annotations",
    "=": "an annotation is one shape: '=' and '=>' belong in einsum specs",
    ";": "an annotation is one shape: ';' separates operands of an einsum spec",
    "&": "'&' is reserved in the notation and has no meaning yet",
}


# --------------------------------------------------------------------------------------------
# the data model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RowVariable:
    """A row variable: any number of axes, the same axes wherever its :attr:`key` recurs.

    ``name is None`` is the anonymous ``...``; it belongs to the row ``kind`` it sits in, so the
    ``...`` of the batch row and the ``...`` of the output row are different variables.  A named
    ``..v..`` is one variable in every row.

    >>> RowVariable(None, "batch").key, RowVariable("v", "output").key, str(RowVariable(None))
    ('...batch', 'v', '...')
    """

    name: str | None
    kind: Kind = "output"

    @property
    def key(self) -> str:
        """The binding key: the name, or ``...`` plus the row kind for the anonymous one."""
        return self.name if self.name is not None else f"...{self.kind}"

    def __str__(self) -> str:
        return "..." if self.name is None else f"..{self.name}.."


Item = Any
"""One axis of an annotation: a :class:`~tensig.dims.Dim` (a name or an expression with at
least one name), an ``int`` (a fixed size), ``typing.Any`` (``_``: any size), or a
:class:`RowVariable` (any number of axes)."""


def _render_item(item: Item) -> str:
    if item is Any:
        return "_"
    return str(item)


@dataclass(frozen=True)
class AnnotationShape:
    """A parsed annotation: three rows of items (``batch|input->output``).

    Equality is structural: ``"B T d"``, ``"BTd"`` and ``"B, T, d"`` are equal; ``str()`` is a
    canonical text that parses back to an equal value.  ``spans`` (per row, per item) point
    into ``text`` for error carets; ``words`` lists whitespace-separated multi-letter words that
    single-char mode split into letters (for the "write commas" hint).

    >>> a = parse_annotation("B|T+1, ..v..->2*h")
    >>> a.batch, a.input, a.output
    ((Dim('B'),), (Dim('T + 1'), RowVariable(name='v', kind='input')), (Dim('2*h'),))
    >>> str(a), a.names, a.rank
    ('B|T + 1, ..v..->2*h', ('B', 'T', 'h'), None)
    >>> [str(i) for i in a.items]  # memory order: batch, output, input
    ['B', '2*h', 'T + 1', '..v..']
    """

    batch: tuple[Item, ...] = ()
    input: tuple[Item, ...] = ()
    output: tuple[Item, ...] = ()
    text: str = field(default="", compare=False)
    spans: tuple[tuple[Span, ...], ...] = field(default=((), (), ()), compare=False,
                                               repr=False)
    words: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def row(self, kind: Kind) -> tuple[Item, ...]:
        """The items of one row."""
        return getattr(self, kind)  # type: ignore[no-any-return]

    def rows(self) -> tuple[tuple[Kind, tuple[Item, ...]], ...]:
        """``(kind, items)`` for the three rows, in written order (batch, input, output)."""
        return (("batch", self.batch), ("input", self.input), ("output", self.output))

    @property
    def items(self) -> tuple[Item, ...]:
        """All items in memory order (batch, output, input): how a plain array's axes match."""
        return self.batch + self.output + self.input

    @property
    def item_spans(self) -> tuple[Span, ...]:
        """The source span of each of :attr:`items` (same order)."""
        b, i, o = self.spans
        return b + o + i

    @property
    def names(self) -> tuple[str, ...]:
        """Every size name, in the order it first appears in the text."""
        seen: dict[str, None] = {}
        for kind, row in self.rows():
            spans = self.spans[KINDS.index(kind)]
            for i, item in enumerate(row):
                if isinstance(item, Dim):
                    text = self.text[slice(*spans[i])] if i < len(spans) else ""
                    for name in _ordered_symbols(item, text):
                        seen.setdefault(name, None)
        return tuple(seen)

    @property
    def row_variables(self) -> tuple[RowVariable, ...]:
        """The row variables, in written order."""
        return tuple(x for _, row in self.rows() for x in row if isinstance(x, RowVariable))

    @property
    def rank(self) -> int | None:
        """The number of axes, or ``None`` when a row variable makes it open."""
        if self.row_variables:
            return None
        return len(self.items)

    @property
    def min_rank(self) -> int:
        """The number of axes that are not row variables."""
        return sum(1 for x in self.items if not isinstance(x, RowVariable))

    @property
    def constants(self) -> frozenset[int]:
        """Every integer the annotation mentions (fixed sizes, coefficients, offsets, divisors).

        >>> sorted(parse_annotation("3, 2*h + 5, (T + 1) // 4").constants)
        [1, 2, 3, 4, 5]
        """
        out: set[int] = set()
        for item in self.items:
            if isinstance(item, int):
                out.add(item)
            elif isinstance(item, Dim):
                _collect_constants(item, out)
        return frozenset(out)

    def __str__(self) -> str:
        def render(row: tuple[Item, ...]) -> str:
            return ", ".join(_render_item(x) for x in row)

        parts = [render(self.batch), render(self.input), render(self.output)]
        if not any(_MULTICHAR.search(p) for p in parts) and _needs_multichar(self.items):
            first = next(i for i, p in enumerate(parts) if p)
            parts[first] += ","  # a trailing comma selects the multichar mode
        out = parts[2]
        if self.input:
            out = f"{parts[1]}->{out}"
        if self.batch:
            out = f"{parts[0]}|{out}"
        return out


def _ordered_symbols(item: Dim, text: str) -> list[str]:
    """The names of ``item`` in the order they appear in its source ``text`` (else sorted)."""
    names = item.symbols
    order = [m.group() for m in re.finditer(r"[A-Za-z_][A-Za-z0-9_]*", text)
             if m.group() in names]
    return list(dict.fromkeys(order)) + sorted(names.difference(order))


def _collect_constants(item: Dim, out: set[int]) -> None:
    for monomial, coefficient in item.terms.items():
        if coefficient != 1 or not monomial:  # the implicit 1 of a plain name is no constant
            out.add(abs(coefficient))
        for atom, _ in monomial:
            if not isinstance(atom, str):
                out.add(atom.divisor)
                _collect_constants(atom.numerator, out)


def _is_name(d: Dim) -> bool:
    """Whether ``d`` is a bare size name (``T``), not an expression (``T + 1``, ``2*h``)."""
    return len(d.symbols) == 1 and d == Dim.symbol(next(iter(d.symbols)))


def _needs_multichar(items: tuple[Item, ...]) -> bool:
    for x in items:
        if isinstance(x, int) and x > 9:
            return True
        if isinstance(x, Dim) and not (len(x.symbols) == 1 and str(x) in x.symbols
                                       and len(str(x)) == 1):
            return True
    return False


# --------------------------------------------------------------------------------------------
# the parser
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def parse_annotation(text: str) -> AnnotationShape:
    """Parse an annotation string (cached); bad text raises :class:`tensig.SpecSyntaxError`.

    >>> parse_annotation("B T d") == parse_annotation("B, T, d") == parse_annotation("BTd")
    True
    >>> parse_annotation("..b.., T+1, 2*h").output
    (RowVariable(name='b', kind='output'), Dim('T + 1'), Dim('2*h'))
    >>> parse_annotation("B, 16").output, parse_annotation("B _ 3").output
    ((Dim('B'), 16), (Dim('B'), typing.Any, 3))
    >>> parse_annotation("B 16")
    Traceback (most recent call last):
    ...
    tensig.errors.SpecSyntaxError: a size of more than one digit needs the multichar mode (column 3)
        B 16
          ^^
    hint: separate axes with commas: B, 16
    """
    if not isinstance(text, str):
        raise TypeError(f"a shape annotation is a str, not {type(text).__name__}")
    return _AnnotationParser(text).parse()


class _AnnotationParser:
    """A scanner over one annotation; every error carries a column and a caret."""

    def __init__(self, text: str):
        self.text = text
        self.multichar = _MULTICHAR.search(text) is not None

    def fail(self, col: int, reason: str, hint: str | None = None, end: int | None = None):
        raise SpecSyntaxError(self.text, col, reason, hint, end)

    def parse(self) -> AnnotationShape:
        self.check_characters()
        bounds = self.row_bounds()
        rows: dict[Kind, list[tuple[Item, Span]]] = {k: [] for k in KINDS}
        for kind, (start, end) in bounds.items():
            rows[kind] = self.row(kind, start, end)
        self.check_names(rows)
        return AnnotationShape(
            batch=tuple(x for x, _ in rows["batch"]),
            input=tuple(x for x, _ in rows["input"]),
            output=tuple(x for x, _ in rows["output"]),
            text=self.text,
            spans=tuple(tuple(s for _, s in rows[k]) for k in KINDS),
            words=self.words(),
        )

    def check_characters(self) -> None:
        for i, c in enumerate(self.text):
            if c == ">" and not (i > 0 and self.text[i - 1] == "-"):
                self.fail(i, "'>' is only valid as part of '->'")
            if c in _UNSUPPORTED:
                self.fail(i, f"unexpected character {c!r}", _UNSUPPORTED[c])

    def row_bounds(self) -> dict[Kind, Span]:
        return row_spans(self.text, 0, len(self.text), "an annotation", self.fail)

    def row(self, kind: Kind, start: int, end: int) -> list[tuple[Item, Span]]:
        if self.multichar:
            items = self.items_multichar(kind, start, end)
        else:
            items = self.items_single(kind, start, end)
        variables = [(x, s) for x, s in items if isinstance(x, RowVariable)]
        if len(variables) > 1:
            span = variables[1][1]
            self.fail(span[0], "a row holds at most one row variable", end=span[1],
                      hint="bind one of them in another row (batch|input->output) or merge "
                           "them into one row variable")
        return items

    # -- single-char mode ---------------------------------------------------------------------

    def items_single(self, kind: Kind, start: int, end: int) -> list[tuple[Item, Span]]:
        text = self.text
        items: list[tuple[Item, Span]] = []
        i = start
        while i < end:
            c = text[i]
            if c.isspace():
                i += 1
            elif c == ".":
                var, i2 = self.row_variable(kind, i, end)
                items.append((var, (i, i2)))
                i = i2
            elif c == "_":
                items.append((Any, (i, i + 1)))
                i += 1
            elif c.isdigit() and c.isascii():
                if i + 1 < end and text[i + 1].isdigit():
                    j = i
                    while j < end and text[j].isdigit():
                        j += 1
                    self.fail(i, "a size of more than one digit needs the multichar mode",
                              hint=self.commas_hint(), end=j)
                items.append((int(c), (i, i + 1)))
                i += 1
            elif c.isalpha() and c.isascii():
                items.append((Dim.symbol(c), (i, i + 1)))
                i += 1
            else:
                self.fail(i, f"unexpected character {c!r} in an annotation")
        return items

    def row_variable(self, kind: Kind, i: int, end: int) -> tuple[RowVariable, int]:
        text = self.text
        if text.startswith("...", i) and i + 3 <= end:
            if text.startswith("....", i):
                self.fail(i, "a row variable is '...' or '..name..'", end=i + 4)
            return RowVariable(None, kind), i + 3
        m = _ROW_VAR.match(text, i, end)
        if m is None:
            self.fail(i, "a lone '.': row variables are '...' or '..name..'",
                      hint="a size is an integer; a row variable is written ..name..")
        assert m is not None
        if m.group(1) == "_":
            self.fail(i, "a row variable needs a name", end=m.end(),
                      hint="write ... for the anonymous row variable")
        return RowVariable(m.group(1), kind), m.end()

    # -- multichar mode -----------------------------------------------------------------------

    def items_multichar(self, kind: Kind, start: int, end: int) -> list[tuple[Item, Span]]:
        text = self.text
        pieces = text[start:end].split(",")
        items: list[tuple[Item, Span]] = []
        pos = start
        for n, piece in enumerate(pieces):
            stripped = piece.strip()
            lead = len(piece) - len(piece.lstrip())
            s, e = pos + lead, pos + lead + len(stripped)
            if stripped:
                items.append((self.item(kind, s, e), (s, e)))
            elif len(pieces) > 1 and not (n == len(pieces) - 1 and items):
                # an empty row is fine; one trailing comma after an item is too
                self.fail(pos, "an empty axis between commas", hint="remove the extra comma")
            pos += len(piece) + 1
        return items

    def item(self, kind: Kind, s: int, e: int) -> Item:
        text = self.text
        piece = text[s:e]
        if piece.startswith("."):
            var, end = self.row_variable(kind, s, e)
            if end != e:
                fixed = f"{text[:end]}, {text[end:]}"
                self.fail(end, "a row variable is a whole item", end=e,
                          hint=f"separate axes with commas: {fixed}")
            return var
        if piece == "_":
            return Any
        try:
            value = Dim.parse(piece)
        except SpecSyntaxError as err:
            hint = err.hint
            if err.reason.startswith("expected an operator") and piece[err.column - 1].isspace():
                hint = self.commas_hint()
            raise SpecSyntaxError(text, s + err.column, err.reason, hint, s + err.end) from None
        for name in value.symbols:
            if not name.isidentifier():
                col = s + piece.find(name)
                self.fail(col, f"{name!r} is not a size name", end=col + len(name))
        if value.constant is not None:
            if value.constant < 0:
                self.fail(s, f"a size cannot be negative ({value.constant})", end=e)
            return value.constant
        return value

    # -- whole-annotation checks ----------------------------------------------------------------

    def check_names(self, rows: dict[Kind, list[tuple[Item, Span]]]) -> None:
        variables = {x.name for k in KINDS for x, _ in rows[k]
                     if isinstance(x, RowVariable) and x.name is not None}
        for k in KINDS:
            for x, (s, e) in rows[k]:
                if isinstance(x, Dim) and (both := x.symbols & variables):
                    name = sorted(both)[0]
                    self.fail(s, f"{name!r} is used both as a size and as the row variable "
                                 f"..{name}..", end=e, hint="rename one of them")

    def words(self) -> tuple[str, ...]:
        """Multi-letter words that single-char mode reads letter by letter.

        Flagged when the text has several whitespace-separated words, or a word with two
        lowercase letters in a row (``"batch"``); ``"BTd"`` is taken as the intended letters.
        """
        if self.multichar:
            return ()
        runs = re.findall(r"[A-Za-z0-9]+", self.text)
        words = tuple(w for w in runs if len(w) > 1)
        if len(runs) > 1 or any(re.search("[a-z]{2}", w) for w in words):
            return words
        return ()

    def commas_hint(self) -> str:
        """The annotation with commas between whitespace-separated items."""
        fixed = re.sub(r"(?<=[A-Za-z0-9_.)])[ \t]+(?=[A-Za-z0-9_.(])", ", ", self.text)
        return f"separate axes with commas: {fixed}"


def words_hint(shape: AnnotationShape) -> str | None:
    """The hint for an annotation whose multi-letter words single-char mode split up.

    >>> print(words_hint(parse_annotation("batch seq")))
    'batch seq' is read in single-char mode: every letter is an axis (8 here); for multi-letter names write 'batch, seq'
    >>> words_hint(parse_annotation("B T d")) is None
    True
    """  # noqa: E501
    if not shape.words:
        return None
    fixed = re.sub(r"(?<=[A-Za-z0-9_.])[ \t]+(?=[A-Za-z0-9_.])", ", ", shape.text.strip())
    if "," not in fixed:
        fixed += ","
    return (f"{shape.text!r} is read in single-char mode: every letter is an axis "
            f"({shape.min_rank} here); for multi-letter names write {fixed!r}")


# --------------------------------------------------------------------------------------------
# Shaped / Float / Int / Bool
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShapeSpecMarker:
    """The ``typing.Annotated`` metadata that :data:`Shaped` and friends attach.

    ``shape`` is the parsed annotation; ``dtype`` is ``None`` (any dtype) or a dtype kind:
    ``"float"`` (any floating dtype: float16/32/64, bfloat16, float8 of numpy, torch or jax),
    ``"int"`` (signed or unsigned integers, not bool) or ``"bool"``.

    >>> ShapeSpecMarker(parse_annotation("B T"), "bool")
    Bool['B T']
    """

    shape: AnnotationShape
    dtype: DtypeKind | None = None

    @property
    def text(self) -> str:
        """The annotation as written."""
        return self.shape.text

    def __repr__(self) -> str:
        family = {None: "Shaped", "float": "Float", "int": "Int", "bool": "Bool"}[self.dtype]
        return f"{family}[{self.shape.text!r}]"


class _ShapedFamily:
    """``Family[ArrayType, "spec"]`` -> ``Annotated[ArrayType, ShapeSpecMarker(...)]``."""

    __slots__ = ("_dtype", "_name")

    def __init__(self, name: str, dtype: DtypeKind | None):
        self._name = name
        self._dtype = dtype

    def __getitem__(self, params: tuple[Any, str | AnnotationShape]) -> Any:
        if not isinstance(params, tuple) or len(params) != 2:
            raise TypeError(f"{self._name}[...] takes an array type and a shape string, "
                            f'e.g. {self._name}[np.ndarray, "B T d"]')
        array_type, spec = params
        shape = spec if isinstance(spec, AnnotationShape) else parse_annotation(spec)
        return Annotated[array_type, ShapeSpecMarker(shape, self._dtype)]

    def __repr__(self) -> str:
        return f"tensig.{self._name}"


if TYPE_CHECKING:  # static checkers see Annotated: Shaped[np.ndarray, "B T"] is an np.ndarray
    from typing import Annotated as Bool
    from typing import Annotated as Float
    from typing import Annotated as Int
    from typing import Annotated as Shaped
else:
    Shaped = _ShapedFamily("Shaped", None)
    """``Shaped[ArrayType, "B T d"]``: an array of that shape, any dtype."""
    Float = _ShapedFamily("Float", "float")
    """``Float[ArrayType, "B T d"]``: floating dtype (numpy, torch or jax; bfloat16 included)."""
    Int = _ShapedFamily("Int", "int")
    """``Int[ArrayType, "B T"]``: signed or unsigned integer dtype."""
    Bool = _ShapedFamily("Bool", "bool")
    """``Bool[ArrayType, "B T"]``: boolean dtype."""


_KIND_CACHE: dict[Any, str] = {}


def dtype_kind(dtype: Any) -> str:
    """Classify a numpy, torch or jax dtype: ``float``, ``int``, ``bool``, ``complex``, ``other``.

    Read from the dtype's name, so numpy, ml_dtypes (jax's bfloat16, float8) and torch dtypes
    classify alike without importing torch or jax.

    >>> import numpy as np
    >>> dtype_kind(np.dtype("float16")), dtype_kind(np.dtype("uint8")), dtype_kind(np.bool_)
    ('float', 'int', 'bool')
    """
    try:
        return _KIND_CACHE[dtype]
    except (KeyError, TypeError):
        pass
    name = _dtype_name(dtype)
    if name.startswith("bool"):
        kind = "bool"
    elif name.startswith(("float", "bfloat", "half", "double")):
        kind = "float"
    elif name.startswith(("int", "uint", "long", "short")):
        kind = "int"
    elif name.startswith("complex"):
        kind = "complex"
    else:
        kind = "other"
    with contextlib.suppress(TypeError):  # an unhashable dtype-like object is not cached
        _KIND_CACHE[dtype] = kind
    return kind


def _dtype_name(dtype: Any) -> str:
    """``float32``, ``bfloat16``, ``int64``... for numpy, ml_dtypes, jax and torch dtypes."""
    if type(dtype).__module__.startswith("torch"):
        return str(dtype).removeprefix("torch.")
    import numpy as np

    try:
        return np.dtype(dtype).name
    except TypeError:
        return str(dtype)


# --------------------------------------------------------------------------------------------
# reading a function's annotations
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParameterSpec:
    """One annotated parameter: its name, position, kind and marker.

    ``position`` is the index in positional arguments (``None`` for keyword-only and ``**``
    parameters); ``kind`` is the :class:`inspect.Parameter` kind; ``optional`` says ``None`` is
    accepted (an ``Optional[...]`` annotation or a ``None`` default); ``default`` is the default
    value or :data:`inspect.Parameter.empty`.
    """

    name: str
    position: int | None
    kind: inspect._ParameterKind
    marker: ShapeSpecMarker
    optional: bool = False
    default: Any = field(default=inspect.Parameter.empty, compare=False)


@dataclass(frozen=True)
class FunctionSignature:
    """The shape annotations of a function: what ``@shaped`` checks and ``verify`` reasons about.

    ``result`` is ``None`` (no shape annotation on the return), a marker, or a tuple with one
    entry per element of a ``tuple[...]`` return annotation (``None`` for elements without one).

    >>> import numpy as np
    >>> def f(x: Float[np.ndarray, "B T d"], k: int) -> Float[np.ndarray, "B d"]: ...
    >>> sig = signature_of(f)
    >>> [p.name for p in sig.parameters], sig.result, sig.names
    (['x'], Float['B d'], ('B', 'T', 'd'))
    """

    name: str
    parameters: tuple[ParameterSpec, ...]
    result: ShapeSpecMarker | tuple[ShapeSpecMarker | None, ...] | None = None
    result_optional: bool = False

    def markers(self) -> Iterator[tuple[str, ShapeSpecMarker]]:
        """``(label, marker)`` for every parameter, then ``return`` (``return[i]`` in tuples)."""
        for p in self.parameters:
            yield p.name, p.marker
        if isinstance(self.result, ShapeSpecMarker):
            yield "return", self.result
        elif self.result is not None:
            for i, m in enumerate(self.result):
                if m is not None:
                    yield f"return[{i}]", m

    @property
    def names(self) -> tuple[str, ...]:
        """Every size name of the signature, in order of first appearance."""
        seen: dict[str, None] = {}
        for _, m in self.markers():
            for name in m.shape.names:
                seen.setdefault(name, None)
        return tuple(seen)


def _marker_of(hint: Any) -> tuple[ShapeSpecMarker | None, bool]:
    """The marker of an annotation, and whether it admits ``None`` (``Optional[...]``)."""
    if typing.get_origin(hint) is Annotated:
        found = [m for m in hint.__metadata__ if isinstance(m, ShapeSpecMarker)]
        return (found[-1] if found else None), False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        optional = type(None) in args
        for arg in args:
            marker, _ = _marker_of(arg)
            if marker is not None:
                return marker, optional
    return None, False


def _result_of(hint: Any) -> tuple[ShapeSpecMarker | tuple[ShapeSpecMarker | None, ...] | None,
                                    bool]:
    marker, optional = _marker_of(hint)
    if marker is not None:
        return marker, optional
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if args and args[-1] is not Ellipsis:
            elements = tuple(_marker_of(a)[0] for a in args)
            if any(m is not None for m in elements):
                return elements, False
    return None, False


def _hints(fn: Callable[..., Any], localns: dict[str, Any] | None) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, localns=localns, include_extras=True)
    except Exception as e:  # an unresolvable forward reference, typically
        name = getattr(fn, "__qualname__", repr(fn))
        raise TypeError(f"cannot read the annotations of {name}(): {e}; with `from __future__ "
                        "import annotations`, names in annotations must be visible from the "
                        "function's module (or its defining scope, when decorated there)") from e


def signature_of(fn: Callable[..., Any],
                 localns: dict[str, Any] | None = None) -> FunctionSignature:
    """Read the shape annotations of ``fn`` (``Shaped``/``Float``/``Int``/``Bool`` hints).

    Parameters without a shape annotation are left out.  ``localns`` resolves string
    annotations (``from __future__ import annotations``) that name local variables of the
    scope ``fn`` was defined in.  A name used as a size in one annotation and as a row variable
    in another raises :class:`tensig.SpecSyntaxError`.
    """
    hints = _hints(fn, localns)
    params: list[ParameterSpec] = []
    position = 0
    for p in inspect.signature(fn).parameters.values():
        positional = p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        marker, optional = _marker_of(hints.get(p.name))
        if marker is not None:
            params.append(ParameterSpec(p.name, position if positional else None, p.kind, marker,
                                        optional or p.default is None, p.default))
        position += positional
    result, result_optional = _result_of(hints.get("return"))
    qualname = getattr(fn, "__qualname__", getattr(fn, "__name__", "function"))
    sig = FunctionSignature(qualname.rsplit("<locals>.", 1)[-1], tuple(params), result,
                            result_optional)
    _check_signature_names(sig)
    return sig


def _check_signature_names(sig: FunctionSignature) -> None:
    """A name is a size everywhere in a signature or a row variable everywhere."""
    sizes: dict[str, str] = {}
    for label, m in sig.markers():
        for name in m.shape.names:
            sizes.setdefault(name, label)
    for label, m in sig.markers():
        spans = m.shape.item_spans
        for item, span in zip(m.shape.items, spans or [(0, 0)] * len(m.shape.items),
                              strict=True):
            if isinstance(item, RowVariable) and item.name in sizes:
                raise SpecSyntaxError(
                    m.shape.text, span[0], f"{sig.name}(): {label!r} uses ..{item.name}.. as a "
                    f"row variable, but {sizes[item.name]!r} uses {item.name!r} as a size",
                    hint="rename one of them", end=span[1])
