"""The lexical rules every tensig text shares (the README's "The notation in five minutes"):
names, integer literals, characters to refuse, and where the rows of ``batch|input->output``
lie (:func:`row_spans`), so ``"αβ;βγ=>αγ"`` and ``dim("α + 1")`` agree.  Names are not
normalized (precomposed ``é`` and ``e`` + a combining accent differ); a literal's bound
(:data:`MAX_LITERAL`) is checked on its digit count first, so 5,000 digits cost nothing.

>>> identifier_end("αβ, γ", 0), identifier_end("2o", 0)
(2, 0)
>>> int_literal("a, 12 => a", 3, 5)
12
"""

from __future__ import annotations

import unicodedata
from typing import Literal

from tensig.core.errors import SpecSyntaxError

__all__ = ["MAX_LITERAL", "digits_end", "identifier_end", "int_literal", "is_digit", "is_name_char",
           "is_name_start", "join_rows", "row_spans", "unexpected_character"]

#: A row's kind, and a span of text (start, end) that errors put a caret under.
Kind = Literal["batch", "input", "output"]
Span = tuple[int, int]
MAX_LITERAL = 2**63
_MAX_DIGITS = len(str(MAX_LITERAL))


def is_digit(c: str) -> bool:
    """An ASCII digit: the only characters that write numbers."""
    return "0" <= c <= "9"


def is_name_start(c: str) -> bool:
    """Can a name start with ``c``?  (A letter of any script, or ``_``.)"""
    return c.isidentifier()


def is_name_char(c: str) -> bool:
    """Can ``c`` continue a name?  (Letters, digits of any script, ``_``, combining marks.)"""
    return ("_" + c).isidentifier()


def identifier_end(text: str, i: int, end: int | None = None) -> int:
    """Where the name starting at ``text[i]`` ends (``i`` itself when no name starts there)."""
    end = len(text) if end is None else end
    if i >= end or not is_name_start(text[i]):
        return i
    j = i + 1
    while j < end and is_name_char(text[j]):
        j += 1
    return j


def digits_end(text: str, i: int, end: int | None = None) -> int:
    """Where the run of ASCII digits starting at ``text[i]`` ends."""
    end = len(text) if end is None else end
    while i < end and is_digit(text[i]):
        i += 1
    return i


def int_literal(text: str, start: int, end: int) -> int:
    """The value of the ASCII digits ``text[start:end]``, at most :data:`MAX_LITERAL`."""
    digits = text[start:end].lstrip("0") or "0"
    if len(digits) <= _MAX_DIGITS:
        value = int(digits)
        if value <= MAX_LITERAL:
            return value
    shown = digits if len(digits) <= 24 else f"a {len(digits)}-digit number"
    raise SpecSyntaxError(text, start, f"an integer literal is at most 2**63, not {shown}",
                          end=end)


def unexpected_character(c: str) -> tuple[str, str | None]:
    """The reason (and hint) for refusing ``c``; non-ASCII numerals and combining marks are
    named, since they look like something tensig reads."""
    if c.isnumeric() and not is_digit(c):
        name = unicodedata.name(c, "a numeral")
        return (f"{c!r} ({name}) is not a number here: only the ASCII digits 0-9 write numbers",
                None)
    if unicodedata.combining(c):
        return (f"a combining mark {c!r} cannot stand on its own",
                "write the accented letter precomposed (Unicode NFC), e.g. with "
                "unicodedata.normalize('NFC', spec)")
    return f"unexpected character {c!r}", None


def row_spans(text: str, start: int, end: int, what: str) -> dict[Kind, Span]:
    """Where the rows of one ``batch|input->output`` shape lie in ``text[start:end]`` (output
    always, batch and input when written); ``what`` names the thing in errors ("a shape")."""
    pipes = [i for i in range(start, end) if text[i] == "|"]
    arrows = [i for i in range(start, end - 1) if text.startswith("->", i)]
    if len(pipes) > 1:
        raise SpecSyntaxError(text, pipes[1], f"{what} has at most one '|' (batch|input->output)")
    if len(arrows) > 1:
        raise SpecSyntaxError(text, arrows[1], f"{what} has at most one '->' "
                              "(batch|input->output)", end=arrows[1] + 2)
    if pipes and arrows and arrows[0] < pipes[0]:
        raise SpecSyntaxError(text, pipes[0], "the batch row comes first: write "
                              "batch|input->output")
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


def join_rows(batch: str | None, input: str | None, output: str) -> str:
    """The inverse of :func:`row_spans`: ``batch|input->output``, a ``None`` row left out."""
    text = output if input is None else f"{input}->{output}"
    return text if batch is None else f"{batch}|{text}"
