"""Errors that carry data, and the one formatter that renders them: :class:`SpecSyntaxError`
(the parser), :class:`ShapeError` (the solver), :class:`InconclusiveError` (undecidable
symbolic comparisons).  Their facts are attributes, so tools (the CLI's ``--json``, the
checker's reports) need not parse messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

__all__ = ["InconclusiveError", "ShapeError", "SpecSyntaxError", "TensigError", "caret_block"]


def caret_block(text: str, start: int, end: int | None = None) -> str:
    """Render ``text`` with carets under the half-open column range ``[start, end)``.

    >>> print(caret_block("ij;jk=>ik", 3, 4))
        ij;jk=>ik
           ^
    """
    start = max(0, min(start, len(text)))
    end = start + 1 if end is None or end <= start else min(end, max(len(text), start + 1))
    return f"    {text}\n    {' ' * start}{'^' * (end - start)}"


class TensigError(Exception):
    """Base class of every error tensig raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Unpickled from its message and attributes, not by calling ``__init__`` again (whose
        parameters differ per class), so it crosses to a worker process and back (verify's,
        multiprocessing's, pytest-xdist's)."""
        return type(self).__new__, (type(self), *self.args), self.__dict__


class SpecSyntaxError(TensigError, ValueError):
    """A spec string does not follow the notation: ``spec``, ``column`` (0-based), ``end``
    (of the offending span), ``reason`` (one line), ``hint`` (the fix, or ``None``)."""

    def __init__(
        self, spec: str, column: int, reason: str, hint: str | None = None, end: int | None = None
    ):
        self.spec = spec
        self.column = column
        self.end = end if end is not None else column + 1
        self.reason = reason
        self.hint = hint
        lines = [f"{reason} (column {column + 1})", caret_block(spec, column, self.end)]
        if hint:
            lines.append(f"hint: {hint}")
        super().__init__("\n".join(lines))


@dataclass(eq=False, repr=False)
class ShapeError(TensigError, ValueError):
    """Shapes do not fit a spec, or cannot be inferred from it.  Facts (``None`` where they do
    not apply): ``spec``, ``span`` (the axis's columns), ``operand`` (an index or ``"result"``),
    ``shape`` (its text), ``label``, ``sizes`` (in conflict), ``origins`` (of each), ``hint``."""

    reason: str
    _: KW_ONLY
    spec: str | None = None
    span: tuple[int, int] | None = None
    operand: int | str | None = None
    shape: str | None = None
    label: str | None = None
    sizes: Sequence[object] = ()
    origins: Sequence[str] = ()
    hint: str | None = None

    def __post_init__(self) -> None:
        self.sizes, self.origins = tuple(self.sizes), tuple(self.origins)
        lines = [self.reason]
        if self.spec is not None:
            lines.append(caret_block(self.spec, *self.span) if self.span is not None
                         else f"    {self.spec}")
        if self.operand is not None:
            which = "result" if self.operand == "result" else f"operand {self.operand}"
            lines.append(f"  in {which}" + (f" with shape {self.shape}" if self.shape else ""))
        lines += [f"  {origin}" for origin in self.origins]
        if self.hint:
            lines.append(f"hint: {self.hint}")
        super().__init__("\n".join(lines))

    def to_dict(self) -> dict[str, object]:
        """The error's facts as plain data (for ``--json`` output and reports)."""
        facts = ("reason", "spec", "span", "operand", "shape", "label", "sizes", "origins", "hint")
        return {"error": "ShapeError", **{k: getattr(self, k) for k in facts},
                "span": list(self.span) if self.span else None,
                "sizes": [str(s) for s in self.sizes], "origins": list(self.origins)}


class InconclusiveError(TensigError, ValueError):
    """A comparison of symbolic dimensions that depends on the sizes (``B < T``): tensig
    refuses to guess."""


# Tracebacks and doctests show the public name (``tensig.ShapeError``), not the module that
# happens to define it; pickling finds the class there too.
for _cls in (TensigError, SpecSyntaxError, ShapeError, InconclusiveError):
    _cls.__module__ = "tensig"
del _cls
