"""The generalized einsum notation: ``parse(text) -> Spec``.

A spec is ``operand; operand; ... => result``; each shape is ``batch|input->output``; each row
is a sequence of axes with at most one row variable (``...`` or ``..name..``).  A row whose
separator is omitted reads as the context ellipsis of its kind, so ``x`` means ``...|...->x``;
a written separator with nothing closes the row (``|->x``).

Two modes (the mode rule): a comma, ``*``, ``+``, ``^``, ``<``, ``&`` or an ``=`` that does not
start ``=>`` anywhere in the text selects the *multichar* mode, where axes are comma-separated
identifiers; otherwise every letter and digit is an axis (*single-char* mode).  Whitespace never
separates axes.  Names and numbers follow :mod:`tensig.lexical` in both modes: a letter of any
script is an axis name (``"αβ;βγ=>αγ"``), only ASCII digits write numbers.

Axis kinds (all frozen dataclasses with structural equality; source spans are kept for error
carets but do not take part in equality):

- :class:`Label` -- a dimension variable, shared by every occurrence in the spec;
- :class:`Placeholder` -- ``_``, aligns axes but is not a variable (two ``_`` do not unify);
- :class:`Fixed` -- an integer: slices an operand, places into the result;
- :class:`Affine` -- ``stride*over+dilation*kernel`` with ``=+`` (padded), ``<+`` (valid) or
  ``+`` (padding from ``use_padding=``); ``2*o+1`` is the offset form, ``2*o`` a pure stride;
- :class:`Concat` -- ``a^b^3``: components are labels or integer sizes.

>>> spec = parse("ij;jk=>ik")
>>> str(spec)
'ij; jk => ik'
>>> parse("b|i->o; o->p => b|i->p") == parse("b|i->o;o->p=>b|i->p")
True
>>> str(parse("...|...->2*oh<+wh, ..c..; |wh => ...|...->oh, ..c.."))
'2*oh<+wh, ..c..; |wh => oh, ..c..'
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, NoReturn

from tensig.core.errors import SpecSyntaxError
from tensig.core.lexical import (
    digits_end,
    identifier_end,
    int_literal,
    is_digit,
    is_name_start,
    unexpected_character,
)

__all__ = [
    "KINDS",
    "Affine",
    "Axis",
    "Concat",
    "Fixed",
    "Label",
    "Placeholder",
    "Row",
    "RowVar",
    "ShapeSpec",
    "Spec",
    "parse",
    "parse_shape_spec",
    "row_spans",
]

Kind = Literal["batch", "input", "output"]
KINDS: tuple[Kind, ...] = ("batch", "input", "output")
Span = tuple[int, int]

_MULTICHAR_TRIGGER = re.compile(r"[,*+^<&]|=(?!>)")


# --------------------------------------------------------------------------------------------
# The data model
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Label:
    """A dimension variable: every occurrence of the name in a spec has the same size."""

    name: str
    span: Span = field(default=(0, 0), compare=False, repr=False)

    def render(self, multichar: bool) -> str:
        return self.name


@dataclass(frozen=True)
class Placeholder:
    """``_``: an axis that is there but unnamed; two placeholders are unrelated."""

    span: Span = field(default=(0, 0), compare=False, repr=False)

    def render(self, multichar: bool) -> str:
        return "_"


@dataclass(frozen=True)
class Fixed:
    """An integer index: slices an operand at ``index``, places into the result at ``index``."""

    index: int
    span: Span = field(default=(0, 0), compare=False, repr=False)

    def render(self, multichar: bool) -> str:
        return str(self.index)


Coef = int | str  # an integer, or an identifier resolved from ``params=``


@dataclass(frozen=True)
class Affine:
    """An input axis indexed by ``stride*over + dilation*kernel`` (convolution, pooling).

    ``kernel is None`` means the offset form ``stride*over + offset`` (``offset`` may be 0: a
    pure stride).  ``padding`` is ``"padded"`` (``=+``), ``"valid"`` (``<+``), or ``None`` for a
    plain ``+`` whose padding comes from the ``use_padding=`` argument.
    """

    stride: Coef
    over: str
    dilation: Coef = 1
    kernel: str | None = None
    offset: int = 0
    padding: Literal["padded", "valid"] | None = None
    span: Span = field(default=(0, 0), compare=False, repr=False)

    def render(self, multichar: bool) -> str:
        out = self.over if self.stride == 1 else f"{self.stride}*{self.over}"
        if self.kernel is None:
            return out if self.offset == 0 else f"{out}+{self.offset}"
        op = {"padded": "=+", "valid": "<+", None: "+"}[self.padding]
        ker = self.kernel if self.dilation == 1 else f"{self.dilation}*{self.kernel}"
        return f"{out}{op}{ker}"


@dataclass(frozen=True)
class Concat:
    """``a^b^c``: one axis iterating over each component in turn.

    Components are label names (``str``) or integer sizes (``int``, skipped elements).
    """

    parts: tuple[str | int, ...]
    span: Span = field(default=(0, 0), compare=False, repr=False)

    def render(self, multichar: bool) -> str:
        return "^".join(str(p) for p in self.parts)


Axis = Label | Placeholder | Fixed | Affine | Concat


@dataclass(frozen=True)
class RowVar:
    """A row variable. ``name is None`` is the reserved ``...`` of the row's kind."""

    name: str | None
    span: Span = field(default=(0, 0), compare=False, repr=False)

    def render(self) -> str:
        return "..." if self.name is None else f"..{self.name}.."


@dataclass(frozen=True)
class Row:
    """One row: ``left`` axes, an optional row variable, ``right`` axes.

    Without a variable the row is closed: exactly ``right`` (``left`` is then empty).  With a
    variable, ``left`` anchors at the start of the row and ``right`` at its end.
    """

    left: tuple[Axis, ...] = ()
    var: RowVar | None = None
    right: tuple[Axis, ...] = ()

    @property
    def axes(self) -> tuple[Axis, ...]:
        return self.left + self.right

    @property
    def is_context_ellipsis(self) -> bool:
        """True for a row that is exactly ``...`` (what an omitted row means)."""
        return not self.left and not self.right and self.var is not None and self.var.name is None

    def render(self, multichar: bool) -> str:
        items = [a.render(multichar) for a in self.left]
        if self.var is not None:
            items.append(self.var.render())
        items += [a.render(multichar) for a in self.right]
        return ", ".join(items) if multichar else "".join(items)


_ELLIPSIS_ROW = Row(var=RowVar(None))


@dataclass(frozen=True)
class ShapeSpec:
    """The three rows of one operand or of the result."""

    batch: Row = _ELLIPSIS_ROW
    input: Row = _ELLIPSIS_ROW
    output: Row = _ELLIPSIS_ROW

    def row(self, kind: Kind) -> Row:
        return getattr(self, kind)

    def rows(self) -> tuple[tuple[Kind, Row], ...]:
        return (("batch", self.batch), ("input", self.input), ("output", self.output))

    def render(self, multichar: bool) -> str:
        out = self.output.render(multichar)
        if self.batch.is_context_ellipsis and self.input.is_context_ellipsis:
            return out
        if self.input.is_context_ellipsis:
            return f"{self.batch.render(multichar)}|{out}"
        inp = f"{self.input.render(multichar)}->{out}"
        if self.batch.is_context_ellipsis:
            return inp
        return f"{self.batch.render(multichar)}|{inp}"

    def __str__(self) -> str:
        return self.render(_needs_multichar((self,)))


@dataclass(frozen=True)
class Spec:
    """A parsed spec: operand shape specs and the result shape spec.

    Equality is structural (mode, whitespace and spans do not matter); ``str()`` prints the
    canonical form, which parses back to an equal ``Spec``.
    """

    operands: tuple[ShapeSpec, ...]
    result: ShapeSpec
    text: str = field(default="", compare=False, repr=False)

    @property
    def multichar(self) -> bool:
        """Whether the canonical form needs the multichar mode."""
        return _needs_multichar((*self.operands, self.result))

    def shapes(self) -> tuple[ShapeSpec, ...]:
        return (*self.operands, self.result)

    @property
    def labels(self) -> frozenset[str]:
        """Every dimension label (including affine and concat components)."""
        return frozenset(_axis_labels_of(self.shapes()))

    @property
    def row_vars(self) -> frozenset[str]:
        """Every named row variable (``..v..``); the reserved ``...`` are not listed."""
        return frozenset(
            row.var.name
            for shape in self.shapes()
            for _, row in shape.rows()
            if row.var is not None and row.var.name is not None
        )

    @property
    def params(self) -> frozenset[str]:
        """Identifiers used as strides or dilations (resolved from ``params=``)."""
        return frozenset(
            c
            for shape in self.shapes()
            for _, row in shape.rows()
            for a in row.axes
            if isinstance(a, Affine)
            for c in (a.stride, a.dilation)
            if isinstance(c, str)
        )

    def __str__(self) -> str:
        multichar = self.multichar
        ops = "; ".join(s.render(multichar) for s in self.operands)
        text = f"{ops} => {self.result.render(multichar)}".rstrip()
        if multichar and not is_multichar(text):
            text += ","  # a trailing comma selects the multichar mode, as in "b => a,"
        return text


def _axis_labels_of(shapes: tuple[ShapeSpec, ...]) -> list[str]:
    names: list[str] = []
    for shape in shapes:
        for _, row in shape.rows():
            for a in row.axes:
                if isinstance(a, Label):
                    names.append(a.name)
                elif isinstance(a, Affine):
                    names.append(a.over)
                    if a.kernel is not None:
                        names.append(a.kernel)
                elif isinstance(a, Concat):
                    names += [p for p in a.parts if isinstance(p, str)]
    return names


def _needs_multichar(shapes: tuple[ShapeSpec, ...]) -> bool:
    for shape in shapes:
        for _, row in shape.rows():
            for a in row.axes:
                if isinstance(a, Affine | Concat):
                    return True
                if isinstance(a, Label) and len(a.name) != 1:
                    return True
                if isinstance(a, Fixed) and a.index > 9:
                    return True
    return False


# --------------------------------------------------------------------------------------------
# The parser
# --------------------------------------------------------------------------------------------


def is_multichar(text: str) -> bool:
    """The mode rule: does ``text`` select the multichar mode?

    >>> is_multichar("ij;jk=>ik"), is_multichar("i, j => j"), is_multichar("o=+k => o")
    (False, True, True)
    """
    return _MULTICHAR_TRIGGER.search(text) is not None


@functools.lru_cache(maxsize=4096)
def parse(text: str) -> Spec:
    """Parse an einsum spec ``op1; op2; ... => result``.

    Raises :class:`tensig.SpecSyntaxError` with the column, a caret and a hint.

    >>> parse("ii => i").operands[0].output.right
    (Label(name='i'), Label(name='i'))
    """
    if not isinstance(text, str):
        raise TypeError(f"a spec must be a str, not {type(text).__name__}")
    return _Parser(text).spec()


def parse_shape_spec(text: str) -> ShapeSpec:
    """Parse one shape spec (no ``;`` or ``=>``), e.g. ``"b|i->o"``.

    >>> str(parse_shape_spec("b|h, w, ..c.."))
    'b|hw..c..'
    """
    if not isinstance(text, str):
        raise TypeError(f"a shape spec must be a str, not {type(text).__name__}")
    parser = _Parser(text)
    parser.check_mode_and_misspellings()
    if (pos := text.find("=>")) >= 0 or (pos := text.find(";")) >= 0:
        raise SpecSyntaxError(text, pos, "a shape spec has no operands or result",
                              hint="use parse() for a full spec")
    shape = parser.shape(0, len(text))
    parser.check_names((shape,))
    return shape


def row_spans(text: str, start: int, end: int, what: str,
              fail: Callable[..., NoReturn]) -> dict[Kind, Span]:
    """Where the rows of one ``batch|input->output`` shape lie in ``text[start:end]``: the
    output row always, the batch and input rows when their ``|`` and ``->`` are there.  The
    einsum parser and the annotation parser share it; ``what`` names the thing in errors
    ("a shape", "an annotation"), and ``fail(column, reason, end=...)`` raises them."""
    pipes = [i for i in range(start, end) if text[i] == "|"]
    arrows = [i for i in range(start, end - 1) if text.startswith("->", i)]
    if len(pipes) > 1:
        fail(pipes[1], f"{what} has at most one '|' (batch|input->output)")
    if len(arrows) > 1:
        fail(arrows[1], f"{what} has at most one '->' (batch|input->output)",
             end=arrows[1] + 2)
    if pipes and arrows and arrows[0] < pipes[0]:
        fail(pipes[0], "the batch row comes first: write batch|input->output")
    spans: dict[Kind, Span] = {}
    pos = start
    if pipes:
        spans["batch"] = (pos, pipes[0])
        pos = pipes[0] + 1
    if arrows:
        spans["input"] = (pos, arrows[0])
        pos = arrows[0] + 2
    spans["output"] = (pos, end)
    return spans


class _Parser:
    """A hand-written scanner over the spec text; every error carries a column."""

    def __init__(self, text: str):
        self.text = text
        self.multichar = is_multichar(text)

    def fail(self, col: int, reason: str, hint: str | None = None, end: int | None = None):
        raise SpecSyntaxError(self.text, col, reason, hint, end)

    # -- top level ---------------------------------------------------------------------------

    def spec(self) -> Spec:
        text = self.text
        self.check_mode_and_misspellings()
        arrow = text.find("=>")
        if arrow < 0:
            self.missing_arrow()
        second = text.find("=>", arrow + 2)
        if second >= 0:
            self.fail(second, "a spec has exactly one '=>'", end=second + 2)
        if (semi := text.find(";", arrow)) >= 0:
            self.fail(semi, "the result comes after '=>' and is a single shape",
                      hint="list every operand before '=>', separated by ';'")
        operands: list[ShapeSpec] = []
        start = 0
        for i in range(arrow + 1):
            if i == arrow or text[i] == ";":
                operands.append(self.shape(start, i))
                start = i + 1
        result = self.shape(arrow + 2, len(text))
        self.check_result(result)
        self.check_names((*operands, result))
        return Spec(tuple(operands), result, text)

    def check_mode_and_misspellings(self) -> None:
        text = self.text
        for m in re.finditer(r"\.\.\.(\w+)\.\.(?!\.)", text):
            name = m.group(1)
            if not name.isidentifier():
                continue
            # In single-char mode "...ab.." cannot be an ellipsis followed by axes and a
            # dangling "..", so this is always the misspelling of a named row variable.
            self.fail(m.start(), f"'...{name}..' is not a row variable",
                      hint=f"write ..{name}.. (two dots on each side); '...' alone is the "
                           "context ellipsis", end=m.end())
        amp = text.find("&")
        if amp >= 0:
            self.fail(amp, "'&' is reserved in the notation and has no meaning yet")

    def missing_arrow(self) -> None:
        text = self.text
        if "->" in text and ("," in text or ";" not in text):
            # Looks like numpy's einsum syntax "ij,jk->ik".
            pos = text.find("->")
            lhs, rhs = text[:pos], text[pos + 2:]
            fixed = ";".join(p.strip() for p in lhs.split(",")) + "=>" + rhs.strip()
            self.fail(pos, "no '=>' in the spec: '->' separates the input row from the output "
                           "row here, it does not introduce the result", end=pos + 2,
                      hint=f"tensig separates operands with ';' and the result with '=>': "
                           f"{fixed}")
        self.fail(len(text), "a spec needs '=>' before its result",
                  hint="write operands separated by ';', then '=>' and the result, e.g. ij;jk=>ik")

    # -- shapes and rows ---------------------------------------------------------------------

    def shape(self, start: int, end: int) -> ShapeSpec:
        text = self.text
        for i in range(start, end):
            if text[i] == "-" and not text.startswith("->", i):
                self.fail(i, "'-' is only valid as part of '->'")
            if text[i] == ">" and not (i > 0 and text[i - 1] in "-="):
                self.fail(i, "'>' is only valid as part of '->' or '=>'")
        spans = row_spans(text, start, end, "a shape", self.fail)
        batch, inp = (self.row(*spans[k]) if k in spans else None for k in ("batch", "input"))
        return ShapeSpec(batch or _ELLIPSIS_ROW, inp or _ELLIPSIS_ROW, self.row(*spans["output"]))

    def row(self, start: int, end: int) -> Row:
        items = self.row_items_multichar(start, end) if self.multichar else \
            self.row_items_single(start, end)
        left: list[Axis] = []
        right: list[Axis] = []
        var: RowVar | None = None
        for item in items:
            if isinstance(item, RowVar):
                if var is not None:
                    self.fail(item.span[0], "a row holds at most one row variable",
                              hint="merge them into one row variable, or move one to another "
                                   "row (batch|input->output)", end=item.span[1])
                var = item
            elif var is None:
                left.append(item)
            else:
                right.append(item)
        if var is None:
            return Row((), None, tuple(left))
        return Row(tuple(left), var, tuple(right))

    def row_var_at(self, i: int, end: int) -> tuple[RowVar, int] | None:
        """A row variable starting at ``i`` (``...`` or ``..name..``), and where it ends."""
        text = self.text
        if text.startswith("...", i) and i + 3 <= end:
            return RowVar(None, (i, i + 3)), i + 3
        if text.startswith("..", i):
            j = identifier_end(text, i + 2, end)
            if j > i + 2 and text.startswith("..", j) and j + 2 <= end:
                if text[i + 2:j] == "_":
                    self.fail(i, "a row variable needs a name", end=j + 2)
                return RowVar(text[i + 2:j], (i, j + 2)), j + 2
            self.fail(i, "unterminated row variable",
                      hint="a row variable is written ..name.., and the context ellipsis ...",
                      end=min(end, max(j, i + 2)))
        return None

    def row_items_single(self, start: int, end: int) -> list[Axis | RowVar]:
        text = self.text
        items: list[Axis | RowVar] = []
        i = start
        while i < end:
            c = text[i]
            if c.isspace():
                i += 1
            elif c == ".":
                found = self.row_var_at(i, end)
                if found is None:
                    self.fail(i, "a lone '.': row variables are '...' or '..name..'")
                assert found is not None
                items.append(found[0])
                i = found[1]
            elif c == "_":
                items.append(Placeholder((i, i + 1)))
                i += 1
            elif is_digit(c):
                items.append(Fixed(int(c), (i, i + 1)))
                i += 1
            elif is_name_start(c):
                items.append(Label(c, (i, i + 1)))
                i += 1
            else:
                self.fail(i, *unexpected_character(c))
        return items

    # -- multichar mode ----------------------------------------------------------------------

    def tokens(self, start: int, end: int) -> list[tuple[str, str, int, int]]:
        """Tokens (kind, text, start, end) of a multichar row; whitespace is dropped."""
        text = self.text
        out: list[tuple[str, str, int, int]] = []
        i = start
        while i < end:
            c = text[i]
            if c.isspace():
                i += 1
                continue
            if c == ".":
                found = self.row_var_at(i, end)
                if found is None:
                    self.fail(i, "a lone '.': row variables are '...' or '..name..'")
                assert found is not None
                out.append(("var", text[i:found[1]], i, found[1]))
                i = found[1]
            elif is_digit(c):
                j = digits_end(text, i, end)
                if j < end and is_name_start(text[j]):
                    self.fail(i, "an identifier cannot start with a digit",
                              hint="write a coefficient with '*', e.g. 2*o", end=j + 1)
                # Bounded before any conversion; the token holds the canonical digits.
                out.append(("int", str(int_literal(text, i, j)), i, j))
                i = j
            elif is_name_start(c):
                j = identifier_end(text, i, end)
                out.append(("ident", text[i:j], i, j))
                i = j
            elif text.startswith("=+", i) or text.startswith("<+", i):
                out.append(("op", text[i:i + 2], i, i + 2))
                i += 2
            elif c in ",*+^":
                out.append(("op", c, i, i + 1))
                i += 1
            elif c == "<":
                self.fail(i, "'<' must be followed by '+' (valid convolution: o<+k)")
            elif c == "=":
                self.fail(i, "'=' must be followed by '+' (padded convolution: o=+k) or '>'")
            else:
                self.fail(i, *unexpected_character(c))
        return out

    def row_items_multichar(self, start: int, end: int) -> list[Axis | RowVar]:
        toks = self.tokens(start, end)
        items: list[Axis | RowVar] = []
        group: list[tuple[str, str, int, int]] = []

        def flush() -> None:
            if group:
                items.extend(self.group(group))
                group.clear()

        prev_comma: int | None = None
        for tok in toks:
            if tok[0] == "op" and tok[1] == ",":
                if not group and prev_comma is not None:
                    self.fail(tok[2], "an empty axis between two commas")
                flush()
                prev_comma = tok[2]
            else:
                group.append(tok)
                prev_comma = None
        flush()
        return items

    def group(self, toks: list[tuple[str, str, int, int]]) -> list[Axis | RowVar]:
        """One comma-delimited group: row variables are self-delimiting, the rest is one axis."""
        out: list[Axis | RowVar] = []
        run: list[tuple[str, str, int, int]] = []
        for tok in toks:
            if tok[0] == "var":
                if run:
                    out.append(self.axis(run))
                    run = []
                name = tok[1]
                out.append(RowVar(None if name == "..." else name[2:-2], (tok[2], tok[3])))
            else:
                run.append(tok)
        if run:
            out.append(self.axis(run))
        return out

    def whitespace_hint(self) -> str:
        """The spec with commas between whitespace-separated axes."""
        text = self.text
        fixed = re.sub(r"(?<=[\w.])[ \t]+(?=[\w.])", ", ", text)
        return f"separate axes with commas: {fixed}"

    def axis(self, toks: list[tuple[str, str, int, int]]) -> Axis:
        """One axis: ``label | int | _ | affine | concat``."""
        span = (toks[0][2], toks[-1][3])
        # Two atoms in a row without an operator: whitespace used as a separator.
        for a, b in itertools.pairwise(toks):
            if a[0] != "op" and b[0] != "op":
                self.fail(b[2], "whitespace does not separate axes in multichar mode",
                          hint=self.whitespace_hint(), end=b[3])
        ops = {t[1] for t in toks if t[0] == "op"}
        if "^" in ops:
            return self.concat(toks, span)
        if ops & {"*", "+", "=+", "<+"}:
            return self.affine(toks, span)
        (kind, val, _s, _e) = toks[0]
        if kind == "int":
            return Fixed(int(val), span)
        if val == "_":
            return Placeholder(span)
        return Label(val, span)

    def concat(self, toks: list[tuple[str, str, int, int]], span: Span) -> Concat:
        parts: list[str | int] = []
        expect_part = True
        for kind, val, s, e in toks:
            if expect_part:
                if kind == "op":
                    self.fail(s, f"expected a concatenation component before {val!r}", end=e)
                if val == "_":
                    self.fail(s, "'_' cannot be a concatenation component",
                              hint="use an integer size (skipped elements) or a label")
                parts.append(int(val) if kind == "int" else val)
                expect_part = False
            else:
                if val != "^":
                    self.fail(s, f"{val!r} cannot be mixed with '^' in one axis", end=e)
                expect_part = True
        if expect_part:
            self.fail(toks[-1][2], "a concatenation ends with a component, not '^'")
        return Concat(tuple(parts), span)

    def affine(self, toks: list[tuple[str, str, int, int]], span: Span) -> Affine:
        pos = 0

        def peek(k: int = 0):
            return toks[pos + k] if pos + k < len(toks) else None

        def term(what: str) -> tuple[Coef, str | int, int]:
            """``[coef '*'] (ident | int)``; returns (coef, atom, column of atom)."""
            nonlocal pos
            t = peek()
            if t is None:
                self.fail(toks[-1][3], f"expected the {what} after {toks[-1][1]!r}")
            assert t is not None
            if t[0] == "op":
                self.fail(t[2], f"expected the {what}, found {t[1]!r}", end=t[3])
            nxt = peek(1)
            if nxt is not None and nxt[1] == "*":
                pos += 2
                a = peek()
                if a is None or a[0] == "op":
                    col = a[2] if a else nxt[3]
                    self.fail(col, f"expected the {what} after '*'")
                assert a is not None
                pos += 1
                coef: Coef = int(t[1]) if t[0] == "int" else t[1]
                if t[1] == "_":
                    self.fail(t[2], "'_' cannot be a coefficient")
                if isinstance(coef, int) and coef < 1:
                    self.fail(t[2], f"a {'stride' if what == 'output axis' else 'dilation'} "
                                    f"must be a positive integer, not {coef}", end=t[3])
                return coef, (int(a[1]) if a[0] == "int" else a[1]), a[2]
            pos += 1
            return 1, (int(t[1]) if t[0] == "int" else t[1]), t[2]

        stride, over, over_col = term("output axis")
        if not isinstance(over, str) or over == "_":
            self.fail(over_col, "the output part of an affine axis must be a label, "
                                "e.g. 2*o<+k", end=over_col + len(str(over)))
        assert isinstance(over, str)
        t = peek()
        if t is None:
            return self.offset_axis(stride, over, 0, span)
        if t[1] not in ("+", "=+", "<+"):
            self.fail(t[2], f"expected '+', '=+' or '<+' after the output part, found {t[1]!r}",
                      end=t[3])
        padding = {"+": None, "=+": "padded", "<+": "valid"}[t[1]]
        op_col = t[2]
        pos += 1
        dilation, kernel, ker_col = term("kernel")
        if (extra := peek()) is not None:
            self.fail(extra[2], f"unexpected {extra[1]!r} after the kernel part", end=extra[3])
        if isinstance(kernel, int):
            if dilation != 1:
                self.fail(ker_col, "an offset is an integer, not a product",
                          hint=f"write {toks[0][1]}*{over}+{kernel}" if stride != 1 else None)
            if padding is not None:
                self.fail(op_col, "an offset has no kernel, so it takes a plain '+'",
                          hint=f"write {Affine(stride, over, offset=kernel).render(True)}",
                          end=op_col + 2)
            return self.offset_axis(stride, over, kernel, span)
        if kernel == "_":
            self.fail(ker_col, "the kernel part must be a label or an integer offset")
        return Affine(stride, over, dilation, kernel, 0, padding, span)

    @staticmethod
    def offset_axis(stride: Coef, over: str, offset: int, span: Span) -> Axis:
        """``stride*over + offset``; ``1*o`` and ``o+0`` index exactly like the label ``o``,
        so they are that label (the canonical form must parse back equal)."""
        if stride == 1 and offset == 0:
            return Label(over, span)
        return Affine(stride, over, offset=offset, span=span)

    # -- whole-spec checks -------------------------------------------------------------------

    def check_result(self, result: ShapeSpec) -> None:
        for _, row in result.rows():
            for a in row.axes:
                if isinstance(a, Affine):
                    self.fail(a.span[0], "affine (convolution) axes belong in operands, "
                                         "not in the result", end=a.span[1],
                              hint="put the input axis in the operand and its output label "
                                   "in the result")

    def check_names(self, shapes: tuple[ShapeSpec, ...]) -> None:
        """A name cannot be both a dimension label and a row variable."""
        rowvars: dict[str, Span] = {}
        for shape in shapes:
            for _, row in shape.rows():
                if row.var is not None and row.var.name is not None:
                    rowvars.setdefault(row.var.name, row.var.span)
        if not rowvars:
            return
        for shape in shapes:
            for _, row in shape.rows():
                for a in row.axes:
                    for name in _axis_labels_of((ShapeSpec(output=Row((), None, (a,))),)):
                        if name in rowvars:
                            self.fail(a.span[0], f"{name!r} is used both as a dimension and as "
                                                 f"the row variable ..{name}..", end=a.span[1],
                                      hint="rename one of them")
