"""The grammar of a dimension expression (``T + 1``, ``(T - 3) // 2 + 1``) with its errors,
not its algebra: the parser combines the values its :class:`Algebra` gives with their own
operators, so :class:`~tensig.core.dims.Dim` sits above it.  :func:`split_items` cuts a list of
expressions (``B T+1``) into items.  Tokens follow :mod:`tensig.core.lexical`.
"""

from __future__ import annotations

import operator
import re
from typing import Any, NoReturn, Protocol, TypeAlias

from tensig.core.errors import ShapeError, SpecSyntaxError
from tensig.core.lexical import (
    digits_end,
    int_literal,
    is_digit,
    is_name_char,
    is_name_start,
    unexpected_character,
)

__all__ = ["MAX_NESTING", "Algebra", "Parser", "split_items"]

MAX_NESTING = 64  # parentheses and unary signs in one parsed expression

_OPERATOR = re.compile(r"\*\*|//|[-+*%()]")
_Token: TypeAlias = "tuple[str, str, int, int]"
_HINTS = {"/": "floor division is written //", ".": "sizes are integers",
          "^": "a power is written **"}  # for characters that look like dimension syntax


def _tokenize(text: str) -> list[_Token]:
    """Tokens (plus ``$name``, the solver's fresh names); a literal's holds canonical digits."""
    tokens: list[_Token] = []
    pos, n = 0, len(text)
    while pos < n:
        ch = text[pos]
        if ch.isspace():
            pos += 1
            continue
        if is_digit(ch):
            end = digits_end(text, pos)
            tokens.append(("int", str(int_literal(text, pos, end)), pos, end))
        elif is_name_start(ch) or (ch == "$" and pos + 1 < n and is_name_char(text[pos + 1])):
            end = pos + 1
            while end < n and is_name_char(text[end]):
                end += 1
            tokens.append(("name", text[pos:end], pos, end))
        elif (match := _OPERATOR.match(text, pos)) is not None:
            end = match.end()
            tokens.append(("op", match.group(), pos, end))
        else:
            reason, hint = unexpected_character(ch)
            raise SpecSyntaxError(text, pos, f"{reason} in a dimension", _HINTS.get(ch, hint))
        pos = end
    tokens.append(("end", "", n, n))
    return tokens


class Algebra(Protocol):
    """What the parser needs of the type of the values it builds (:class:`~tensig.core.dims.Dim`
    gives it): two constructors; ``+ - * ** divmod`` and ``.constant`` are the values' own."""

    def const(self, n: int) -> Any: ...

    def symbol(self, name: str) -> Any: ...


class Parser:
    """Recursive descent over Python's precedence: ``+ -`` < ``* // %`` < unary ``-`` < ``**``.
    Every recursion passes :meth:`unary` (depth bound ``MAX_NESTING``), every operation
    :meth:`apply` (an expression past the algebra's bounds: a caret under its operator)."""

    __slots__ = ("algebra", "depth", "i", "text", "tokens")

    def __init__(self, text: str, algebra: Algebra):
        self.text = text
        self.algebra = algebra
        self.tokens = _tokenize(text)
        self.i = 0
        self.depth = 0

    def fail(self, start: int, reason: str, hint: str | None = None,
             end: int | None = None) -> NoReturn:
        raise SpecSyntaxError(self.text, start, reason, hint, end)

    def apply(self, op: _Token, f: Any, a: Any, b: Any) -> Any:
        try:
            return f(a, b)
        except ShapeError as e:
            self.fail(op[2], e.reason, e.hint, op[3])

    def parse(self) -> Any:
        if self.tokens[0][0] == "end":
            self.fail(0, "empty dimension expression")
        value = self.expr()
        kind, tok, start, end = self.tokens[self.i]
        if tok == ")":
            self.fail(start, "unmatched ')'")
        if kind != "end":
            self.fail(start, f"expected an operator before {tok!r}",
                      "write * for a product, e.g. 2*B" if tok not in ("*", "**") else None, end)
        return value

    def expr(self) -> Any:
        value = self.term()
        while (op := self.tokens[self.i])[1] in ("+", "-"):
            self.i += 1
            value = self.apply(op, operator.add if op[1] == "+" else operator.sub, value,
                               self.term())
        return value

    def term(self) -> Any:
        value = self.unary()
        while (op := self.tokens[self.i])[1] in ("*", "//", "%"):
            self.i += 1
            if op[1] == "*":
                value = self.apply(op, operator.mul, value, self.unary())
                continue
            start = self.tokens[self.i][2]
            k = self.unary().constant
            if k is None or k <= 0:
                self.fail(start, f"the divisor of {op[1]} must be "
                          f"{'a constant' if k is None else 'positive'}",
                          None, self.tokens[self.i - 1][3])
            quotient, remainder = divmod(value, k)
            value = quotient if op[1] == "//" else remainder
        return value

    def unary(self) -> Any:
        _kind, tok, start, end = self.tokens[self.i]
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.fail(start, f"the expression nests deeper than {MAX_NESTING} levels "
                             "(parentheses, signs and powers)", None, end)
        if tok == "-":
            self.i += 1
            value = self.apply(self.tokens[self.i - 1], operator.mul, self.unary(), -1)
        elif tok == "+":
            self.i += 1
            value = self.unary()
        else:
            value = self.power()
        self.depth -= 1
        return value

    def power(self) -> Any:
        base = self.primary()
        op = self.tokens[self.i]
        if op[1] != "**":
            return base
        self.i += 1
        start = self.tokens[self.i][2]
        e = self.unary().constant
        if e is None or e < 0:
            self.fail(start, "an exponent must be a nonnegative integer", None,
                      self.tokens[self.i - 1][3])
        return self.apply(op, operator.pow, base, e)

    def primary(self) -> Any:
        kind, tok, start, end = self.tokens[self.i]
        if kind in ("int", "name"):
            self.i += 1
            return self.algebra.const(int(tok)) if kind == "int" else self.algebra.symbol(tok)
        if tok == "(":
            self.i += 1
            value = self.expr()
            if self.tokens[self.i][1] != ")":
                self.fail(start, "unclosed '('", "add the missing ')'")
            self.i += 1
            return value
        if kind == "end":
            self.fail(start, "unexpected end of the dimension expression")
        self.fail(start, f"expected a number, a name or '(', found {tok!r}", None, end)


def split_items(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Item spans of ``text[start:end]``: comma-separated if it has a comma, else by spaces.

    Without commas, pieces that an operator or an open parenthesis joins stay one item, so
    ``"B + T"`` is one item while ``"B T+1"`` is two (and ``"B -T"`` is ``B`` and ``-T``).
    """
    segment = text[start:end]
    spans: list[tuple[int, int]] = []
    if "," not in segment:
        depth = 0
        joined = False  # the previous piece asks for the next one
        for m in re.finditer(r"\S+", segment):
            piece = m.group()
            operator_only = not piece.strip("+-*/%")
            if spans and (joined or operator_only or piece[0] in "*/%)"):
                spans[-1] = (spans[-1][0], start + m.end())
            else:
                spans.append((start + m.start(), start + m.end()))
            depth += piece.count("(") - piece.count(")")
            joined = depth > 0 or piece[-1] in "+-*/%("
        return spans
    pieces = segment.split(",")
    pos = start
    for i, piece in enumerate(pieces):
        stripped = piece.strip()
        if stripped:
            lead = len(piece) - len(piece.lstrip())
            spans.append((pos + lead, pos + lead + len(stripped)))
        elif not (i == len(pieces) - 1 and i > 0):  # a single trailing comma is allowed
            raise SpecSyntaxError(text, pos, "empty item between commas")
        pos += len(piece) + 1
    return spans
