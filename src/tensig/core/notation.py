"""The notation's parser: einsum specs (``parse(text) -> Spec``) and, in its annotation mode,
jaxtyping-style annotations (``parse_annotation(text) -> AnnotationShape``), values of
:mod:`tensig.core.syntax`.  The grammar and the mode rule (:func:`is_multichar`: axes separated
by commas, or one per letter or digit) are the README's "The notation in five minutes".

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
import warnings
from collections.abc import Iterable
from typing import Any, Literal, NoReturn

from tensig.core.dims import Dim, parse_at
from tensig.core.errors import SpecSyntaxError
from tensig.core.lexical import (
    digits_end,
    identifier_end,
    int_literal,
    is_digit,
    is_name_start,
    row_spans,
    unexpected_character,
)
from tensig.core.syntax import (
    KINDS,
    Affine,
    AnnotationShape,
    Axis,
    Broadcastable,
    Coef,
    Concat,
    Deferred,
    Fixed,
    Item,
    Kind,
    Label,
    Merge,
    Placeholder,
    Row,
    RowVar,
    RowVariable,
    ShapeSpec,
    Span,
    Spec,
    _plain,
    axis_labels,
    is_multichar,
)

__all__ = ["KINDS", "Affine", "AnnotationShape", "Axis", "Concat", "Fixed", "Kind", "Label",
           "Merge", "Mode", "Placeholder", "Row", "RowVar", "ShapeSpec", "Span", "Spec",
           "is_multichar", "parse", "parse_annotation", "parse_shape_spec", "row_spans"]

Mode = Literal["spec", "annotation"]
"""The parser's two modes: an einsum spec, or a shape annotation (one shape read as a type)."""

_UNSUPPORTED = {  # spec syntax that an annotation refuses, and why
    "^": "concatenation (a^b) belongs in einsum specs, not in annotations",
    "<": "convolution axes (o<+k) belong in einsum specs, not in annotations",
    ";": "an annotation is one shape: ';' separates operands of an einsum spec",
    "&": "'&' is reserved in the notation and has no meaning yet",
    "?": "jaxtyping's '?' (sizes that depend on the place in a PyTree) is not supported",
}
_JOIN_AFTER = "+-*/%(=<>"  # an annotation word ending so needs the next word as its operand
_JOIN_BEFORE = "+-/%)="  # and one starting so continues the previous word
_DEFERRED_CALL = re.compile(r"\b(min|max)\s*\(")
_SPEC_OPERATOR = re.compile(r"[=<]\+|[,*+^]")
_WORD = re.compile(r"[^\s,]+|,")  # the words and commas of an annotation row


# -- The parser: entry points ----------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def parse(text: str) -> Spec:
    """Parse an einsum spec ``op1; op2; ... => result`` (errors: :class:`tensig.SpecSyntaxError`).

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


@functools.lru_cache(maxsize=1024)
def parse_annotation(text: str) -> AnnotationShape:
    """Parse a shape annotation (cached): jaxtyping's syntax with the notation's rows, row
    variables and size expressions (:mod:`tensig.core.annotations`).

    >>> parse_annotation("B T d") == parse_annotation("B, T, d")
    True
    >>> parse_annotation("*b T+1 2*h").output
    (RowVariable(name='b', kind='output', broadcast=False), Dim('T + 1'), Dim('2*h'))
    >>> parse_annotation("B 16").output, parse_annotation("B _ #3").output
    ((Dim('B'), 16), (Dim('B'), typing.Any, Broadcastable(item=3)))
    >>> parse_annotation("B, , T")
    Traceback (most recent call last):
    ...
    tensig.SpecSyntaxError: an empty axis between commas (column 3)
        B, , T
          ^
    hint: remove the extra comma
    """
    if not isinstance(text, str):
        raise TypeError(f"a shape annotation is a str, not {type(text).__name__} ({text!r})")
    if len(text) > 100_000:
        raise SpecSyntaxError(text[:60] + "...", 0, "an annotation of more than 100000 "
                              "characters")
    return _Parser(text, "annotation").annotation()


class _Parser:
    """One hand-written scanner for the notation's two modes (:meth:`spec`, :meth:`annotation`),
    sharing the rules of rows, row variables and name clashes; every error carries a column."""

    def __init__(self, text: str, mode: Mode = "spec"):
        self.text = text
        self.mode = mode
        self.multichar = mode == "spec" and is_multichar(text)

    def fail(self, col: int, reason: str, hint: str | None = None,
             end: int | None = None) -> NoReturn:
        raise SpecSyntaxError(self.text, col, reason, hint, end)

    def one_row_variable(self, spans: list[Span]) -> None:
        """A row holds at most one row variable (``spans``: the row's row variables)."""
        if len(spans) > 1:
            self.fail(spans[1][0], "a row holds at most one row variable", end=spans[1][1],
                      hint="merge them into one, or move one to another row (batch|input->output)")

    def check_clashes(self, row_variables: Iterable[str],
                      sized: Iterable[tuple[Iterable[str], Span]]) -> None:
        """A name cannot be both a size (``sized``: the names of each axis) and a row variable."""
        variables = set(row_variables)
        for names, (s, e) in sized:
            if both := sorted(set(names) & variables):
                name = both[0]
                size, var = (("a dimension", f"..{name}..") if self.mode == "spec"
                             else ("a size", f"*{name}"))
                self.fail(s, f"{name!r} is used both as {size} and as the row variable {var}",
                          end=e, hint="rename one of them")

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
        cuts = [-1, *(i for i in range(arrow) if text[i] == ";"), arrow]
        operands = [self.shape(a + 1, b) for a, b in itertools.pairwise(cuts)]
        result = self.shape(arrow + 2, len(text))
        self.check_names((*operands, result))
        return Spec(tuple(operands), result, text)

    def check_mode_and_misspellings(self) -> None:
        text = self.text
        for m in re.finditer(r"\.\.\.(\w+)\.\.(?!\.)", text):
            name = m.group(1)
            if name.isidentifier():  # \w also takes '²', '₁', '½': no name holds them
                # In single-char mode "...ab.." cannot be an ellipsis followed by axes and a
                # dangling "..", so this is always the misspelling of a named row variable.
                self.fail(m.start(), f"'...{name}..' is not a row variable",
                          hint=f"write ..{name}.. (two dots on each side); '...' alone is the "
                               "context ellipsis", end=m.end())
        if (amp := text.find("&")) >= 0:
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

    def shape(self, start: int, end: int) -> ShapeSpec:
        text = self.text
        for i in range(start, end):
            if text[i] == "-" and not text.startswith("->", i):
                self.fail(i, "'-' is only valid as part of '->'")
            if text[i] == ">" and not (i > 0 and text[i - 1] in "-="):
                self.fail(i, "'>' is only valid as part of '->' or '=>'")
        spans = row_spans(text, start, end, "a shape")  # an omitted row: ShapeSpec's default ...
        return ShapeSpec(**{k: self.row(*span) for k, span in spans.items()})

    def row(self, start: int, end: int) -> Row:
        """Commas separate axes (in single-char mode every token is one); a row variable is
        self-delimiting, the rest of a group is one axis."""
        axes: list[Axis] = []
        variables: list[tuple[RowVar, int]] = []  # each with the number of axes before it
        run: list[tuple[str, str, int, int]] = []
        prev = ("", "", 0, 0)
        for tok in [*self.tokens(start, end), ("end", "", end, end)]:
            comma = tok[:2] == ("op", ",")
            if comma and prev[:2] == ("op", ","):
                self.fail(tok[2], "an empty axis between two commas")
            if comma or tok[0] in ("var", "end"):
                if run:
                    axes.append(self.axis(run))
                    run = []
                if tok[0] == "var":
                    name = None if tok[1] == "..." else tok[1][2:-2]
                    variables.append((RowVar(name, (tok[2], tok[3])), len(axes)))
            elif self.multichar:
                run.append(tok)
            else:
                axes.append(self.axis([tok]))
            prev = tok
        self.one_row_variable([v.span for v, _ in variables])
        var, k = variables[0] if variables else (None, 0)
        return Row(tuple(axes[:k]), var, tuple(axes[k:]))

    def row_var_at(self, i: int, end: int) -> tuple[RowVar, int] | None:
        """A row variable starting at ``i`` (``...`` or ``..name..``), and where it ends."""
        text = self.text
        if text.startswith("...", i) and i + 3 <= end:
            return RowVar(None, (i, i + 3)), i + 3
        if text.startswith("..", i):
            j = identifier_end(text, i + 2, end)
            if j > i + 2 and text.startswith("..", j) and j + 2 <= end:
                if text[i + 2:j] == "_":
                    nameless = "the context ellipsis" if self.mode == "spec" else "a nameless one"
                    self.fail(i, "a row variable needs a name", end=j + 2,
                              hint=f"write ... for {nameless}")
                return RowVar(text[i + 2:j], (i, j + 2)), j + 2
            written = ("..name.., and the context ellipsis ..." if self.mode == "spec"
                       else "*name or ..name.., and any axes ...")
            self.fail(i, "unterminated row variable", hint=f"a row variable is written {written}",
                      end=min(end, max(j, i + 2)))
        return None

    def merge_at(self, i: int, end: int) -> Merge:
        """A merged axis ``(h, e)`` or ``(h, 4)`` at ``i``: labels and positive sizes, at least
        one, no nesting, no row variable (its number of axes is unknown)."""
        text, close = self.text, self.text.find(")", i, end)
        if text[i] == ")" or close < 0:
            self.fail(i, "')' without a '(' before it" if text[i] == ")" else
                      "unterminated '(': a merged axis is written (h, e)", end=max(i + 1, end))
        parts: list[str | int] = []
        j = i + 1
        while j < close:
            c, mc = text[j], self.multichar
            k = identifier_end(text, j, close) if mc and is_name_start(c) else \
                digits_end(text, j, close) if mc and is_digit(c) else j + 1
            if is_name_start(c) and c != "_":
                parts.append(text[j:k])
            elif is_digit(c):
                if mc and k < close and is_name_start(text[k]):
                    self.fail(j, "an identifier cannot start with a digit", end=k + 1)
                if (n := int_literal(text, j, k)) == 0:
                    self.fail(j, "a merged axis has no factor of size 0", end=k)
                parts.append(n)
            elif c == "." and (var := self.row_var_at(j, close)) is not None:
                self.fail(j, "a row variable cannot be merged: its number of axes is not "
                             "known from the spec", end=var[1],
                          hint="merge labelled axes (h, e), with sizes such as (h, 4)")
            elif not (c.isspace() or (c == "," and mc)):
                self.fail(j, "merged axes do not nest" if c == "(" else
                          f"a merged axis groups labels and sizes, not {c!r}",
                          hint="list its factors as labels or sizes in one group: (h, e)")
            j = k
        if not parts:
            self.fail(i, "an empty merged axis '()'", end=close + 1)
        return Merge(tuple(parts), (i, close + 1))

    def tokens(self, start: int, end: int) -> list[tuple[str, str, int, int]]:
        """Tokens (kind, text, start, end) of a row; whitespace is dropped.  In single-char
        mode a name or a number is one character (and the mode rule leaves no operators)."""
        text, mc = self.text, self.multichar
        out: list[tuple[str, str, int, int]] = []
        i = start
        while i < end:
            c, j = text[i], i + 1
            if c.isspace():
                i = j
                continue
            if c == ".":
                found = self.row_var_at(i, end)
                if found is None:
                    self.fail(i, "a lone '.': row variables are '...' or '..name..'")
                kind, j = "var", found[1]
            elif is_digit(c):
                kind, j = "int", digits_end(text, i, end) if mc else j
                if mc and j < end and is_name_start(text[j]):
                    self.fail(i, "an identifier cannot start with a digit",
                              hint="write a coefficient with '*', e.g. 2*o", end=j + 1)
            elif is_name_start(c):
                kind, j = "ident", identifier_end(text, i, end) if mc else j
            elif (op := _SPEC_OPERATOR.match(text, i)) is not None:
                kind, j = "op", op.end()
            elif c in "()":
                kind, j = "merge", self.merge_at(i, end).span[1]
            elif c == "<":
                self.fail(i, "'<' must be followed by '+' (valid convolution: o<+k)")
            elif c == "=":
                self.fail(i, "'=' must be followed by '+' (padded convolution: o=+k) or '>'")
            else:
                self.fail(i, *unexpected_character(c))
            # a literal is bounded before any conversion; its token holds the canonical digits
            out.append((kind, str(int_literal(text, i, j)) if kind == "int" else text[i:j], i, j))
            i = j
        return out

    def axis(self, toks: list[tuple[str, str, int, int]]) -> Axis:
        """One axis: ``label | int | _ | affine | concat``."""
        span = (toks[0][2], toks[-1][3])
        if any(t[0] == "merge" for t in toks):
            if len(toks) > 1:
                self.fail(span[0], "a merged axis (h, e) is a whole axis: nothing can be "
                                   "attached to it", end=span[1], hint="separate axes with commas")
            return self.merge_at(*span)
        # Two atoms in a row without an operator: whitespace used as a separator.
        for a, b in itertools.pairwise(toks):
            if a[0] != "op" and b[0] != "op":
                fixed = re.sub(r"(?<=[\w.])[ \t]+(?=[\w.])", ", ", self.text)
                self.fail(b[2], "whitespace does not separate axes in multichar mode",
                          hint=f"separate axes with commas: {fixed}", end=b[3])
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
        for j, (kind, val, s, e) in enumerate(toks):  # components at even places, '^' between
            if j % 2 and val != "^":
                self.fail(s, f"{val!r} cannot be mixed with '^' in one axis", end=e)
            if not j % 2 and kind == "op":
                self.fail(s, f"expected a concatenation component before {val!r}", end=e)
            if not j % 2 and val == "_":
                self.fail(s, "'_' cannot be a concatenation component",
                          hint="use an integer size (skipped elements) or a label")
        if len(toks) % 2 == 0:
            self.fail(toks[-1][2], "a concatenation ends with a component, not '^'")
        return Concat(tuple(int(val) if kind == "int" else val for kind, val, _, _ in toks[::2]),
                      span)

    def affine(self, toks: list[tuple[str, str, int, int]], span: Span) -> Axis:
        pos = 0

        def peek(k: int = 0):
            return toks[pos + k] if pos + k < len(toks) else None

        def term(what: str) -> tuple[Coef, str | int, int]:
            """``[coef '*'] (ident | int)``; returns (coef, atom, column of atom)."""
            nonlocal pos
            t, star, a = peek(), peek(1), peek(2)
            if t is None:
                self.fail(toks[-1][3], f"expected the {what} after {toks[-1][1]!r}")
            if t[0] == "op":
                self.fail(t[2], f"expected the {what}, found {t[1]!r}", end=t[3])
            if star is None or star[1] != "*":
                pos += 1
                return 1, (int(t[1]) if t[0] == "int" else t[1]), t[2]
            if a is None or a[0] == "op":
                self.fail(a[2] if a else star[3], f"expected the {what} after '*'")
            pos += 3
            coef: Coef = int(t[1]) if t[0] == "int" else t[1]
            if t[1] == "_":
                self.fail(t[2], "'_' cannot be a coefficient")
            if isinstance(coef, int) and coef < 1:
                self.fail(t[2], f"a {'stride' if what == 'output axis' else 'dilation'} "
                                f"must be a positive integer, not {coef}", end=t[3])
            return coef, (int(a[1]) if a[0] == "int" else a[1]), a[2]

        stride, over, over_col = term("output axis")
        if not isinstance(over, str) or over == "_":
            self.fail(over_col, "the output part of an affine axis must be a label, "
                                "e.g. 2*o<+k", end=over_col + len(str(over)))
        t = peek()
        if t is None:
            return self.offset_axis(stride, over, 0, span)
        if t[1] not in ("+", "=+", "<+"):
            self.fail(t[2], f"expected '+', '=+' or '<+' after the output part, found {t[1]!r}",
                      end=t[3])
        padding: Literal["padded", "valid"] | None = \
            None if t[1] == "+" else "padded" if t[1] == "=+" else "valid"
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
    def offset_axis(stride: Coef, over: str, offset: int, span: Span) -> Affine | Label:
        """``stride*over + offset``; ``1*o`` and ``o+0`` index exactly like the label ``o``,
        so they are that label (the canonical form must parse back equal)."""
        if stride == 1 and offset == 0:
            return Label(over, span)
        return Affine(stride, over, offset=offset, span=span)

    def check_names(self, shapes: tuple[ShapeSpec, ...]) -> None:
        """A name cannot be both a dimension label and a row variable."""
        rows = [row for shape in shapes for _, row in shape.rows()]
        self.check_clashes(
            (row.var.name for row in rows if row.var is not None and row.var.name is not None),
            ((axis_labels(a), a.span) for row in rows for a in row.axes))

    def annotation(self) -> AnnotationShape:
        """The whole text as one shape: rows of items and their spans."""
        self.check_annotation_characters()
        rows: dict[Kind, list[tuple[Item, Span]]] = {k: [] for k in KINDS}
        for k, (start, end) in row_spans(self.text, 0, len(self.text), "an annotation").items():
            rows[k] = [(self.annotation_item(k, s, e), (s, e)) for s, e in self.split(start, end)]
            self.one_row_variable([s for x, s in rows[k] if isinstance(x, RowVariable)])
        every = [pair for k in KINDS for pair in rows[k]]
        self.check_clashes(
            (x.name for x, _ in every if isinstance(x, RowVariable) and x.name is not None),
            ((x.symbols, span) for x, span in ((_plain(x), s) for x, s in every)
             if isinstance(x, Dim | Deferred)))
        items = {k: tuple(x for x, _ in rows[k]) for k in KINDS}
        return AnnotationShape(
            items["batch"], items["input"], items["output"], text=self.text,
            spans=tuple(tuple(s for _, s in rows[k]) for k in KINDS))

    def check_annotation_characters(self) -> None:
        """Spec-only syntax (``=>``, ``;``, ``^``, ``<``...) is refused, with the reason."""
        depth = 0
        for i, c in enumerate(self.text):
            if c == ">" and not (i > 0 and self.text[i - 1] == "-"):
                self.fail(i, "'>' is only valid as part of '->'")
            if c == "=" and self.text.startswith("=>", i):
                self.fail(i, "an annotation is one shape: '=>' belongs in einsum specs",
                          end=i + 2)
            if c in _UNSUPPORTED and depth == 0:
                self.fail(i, f"unexpected character {c!r}", _UNSUPPORTED[c])
            depth += (c in "({") - (c in ")}")

    def split(self, start: int, end: int) -> list[Span]:
        """Item spans: commas and whitespace separate (not inside brackets), words join where
        an operator needs its operand; an empty row and one trailing comma are fine."""
        spans: list[Span] = []
        depth, piece, fresh = 0, start, True  # fresh: no word since the comma at ``piece - 1``
        for m in _WORD.finditer(self.text, start, end):
            word = m.group()
            if word == "," and depth == 0:
                if fresh:
                    self.fail(piece, "an empty axis between commas", hint="remove the extra comma")
                piece, fresh = m.end(), True
            elif not fresh and (depth != 0 or self.joins(spans[-1], m.span())):
                spans[-1] = (spans[-1][0], m.end())
            else:
                spans.append(m.span())
                fresh = False
            depth += sum(map(word.count, "({[")) - sum(map(word.count, ")}]"))
        if depth != 0:  # an unclosed bracket holds the rest of the row
            spans[-1] = (spans[-1][0], end)
        return spans

    def joins(self, previous: Span, word: Span) -> bool:
        before, after = self.text[slice(*previous)], self.text[slice(*word)]
        if before[-1] in _JOIN_AFTER or after[0] in _JOIN_BEFORE:
            return True
        # ``2 * h`` and ``h **2`` are expressions; ``*batch`` starts a variadic
        return after[0] == "*" and (len(after) == 1 or after[1] in "*0123456789(")

    def annotation_item(self, kind: Kind, s: int, e: int) -> Item:
        """One word: ``_``, a row variable, or modifiers (``#``, ``*``, ``_``, ``name=``)
        before a size."""
        text = self.text
        piece = text[s:e]
        if piece == "_":
            return Any
        if piece.startswith(".") or "..." in piece:
            return self.annotation_row_variable(kind, s, e)
        modifiers: set[str] = set()
        i = s
        while i < e:
            j = identifier_end(text, i, e)
            if text[i] in "#*_" and not (text[i] == "_" and i + 1 == e):
                if text[i] in modifiers:
                    self.fail(i, f"{text[i]!r} twice in one axis", end=i + 1)
                modifiers.add(text[i])
                i += 1
            elif j > i and text.startswith("=", j) and not text.startswith("==", j):
                i = j + 1  # jaxtyping's ``rows=4``: the size is 4, the name documents it
            else:
                break
        broadcast, variadic, anonymous = "#" in modifiers, "*" in modifiers, "_" in modifiers
        rest = text[i:e]
        if rest == "_":  # ``*_`` and ``#_``
            anonymous, rest = True, ""
        if variadic and (anonymous or not rest):
            if broadcast:
                self.fail(s, "an anonymous variadic cannot be broadcastable ('*#_')", end=e)
            return RowVariable(None, kind)
        if variadic:
            if not rest.isidentifier():
                self.fail(s, f"a variadic '*' takes a name, not {rest!r}", end=e,
                          hint="write *name for any number of axes, or ... for unrelated ones")
            return RowVariable(rest, kind, broadcast)
        if anonymous:
            if broadcast:
                self.fail(s, "an axis cannot be both anonymous and broadcastable ('#_')", end=e)
            if rest and not rest.isidentifier():
                self.fail(s, "'_' before a name makes an unchecked axis: '_' and a name",
                          end=e)
            return Any
        if not rest:
            self.fail(s, f"{piece!r} needs a size after its modifiers", end=e)
        value = self.size(rest, i, e)
        return Broadcastable(value) if broadcast else value

    def annotation_row_variable(self, kind: Kind, s: int, e: int) -> RowVariable:
        """``...`` or ``..name..`` (the notation's row variables), a whole item."""
        text = self.text
        if text.startswith("....", s):
            self.fail(s, "a row variable is '...' or '..name..'", end=s + 4)
        found = self.row_var_at(s, e)
        if found is None:
            self.fail(s, "a lone '.': row variables are '...', '*name' or '..name..'",
                      hint="a size is an integer; a row variable is written *name")
        var, stop = found
        if stop != e and var.name is None:
            self.fail(s, "'...' is a whole item", end=e,
                      hint=f"separate axes with spaces or commas: {text[:stop]} {text[stop:]}")
        if stop != e:
            self.fail(stop, "a row variable is a whole item", end=e,
                      hint=f"separate axes with commas: {text[:stop]}, {text[stop:]}")
        return RowVariable(var.name, kind)

    def size(self, piece: str, s: int, e: int) -> Item:
        """An integer, a name, an expression, or a :class:`Deferred` one."""
        if "{" in piece or _DEFERRED_CALL.search(piece):
            return self.deferred(piece, s, e)
        value = parse_at(self.text, s, e)
        for name in value.symbols:
            if not name.isidentifier():
                col = s + piece.find(name)
                self.fail(col, f"{name!r} is not a size name", end=col + len(name))
        if value.constant is not None:
            if value.constant < 0:
                self.fail(s, f"a size cannot be negative ({value.constant})", end=e)
            return value.constant
        return value

    def deferred(self, piece: str, s: int, e: int) -> Deferred:
        """jaxtyping's f-string axes: ``{n}``, ``{self.size}``, ``min(a, b)``."""
        outside = re.sub(r"\{[^{}]*\}", "0", piece)
        if "{" in outside or "}" in outside:
            self.fail(s, "unbalanced '{' '}' in a deferred size", end=e)
        try:
            with warnings.catch_warnings():  # "1x": Python's SyntaxWarning is no user's
                warnings.simplefilter("ignore", SyntaxWarning)
                compile(outside, "<annotation>", "eval")
        except SyntaxError:
            self.fail(s, f"{piece!r} is not a Python expression", end=e)
        names = frozenset(re.findall(r"[^\W\d]\w*", outside)) - {"min", "max"}
        return Deferred(piece, names)
