"""The registry of ``tensig.verify`` findings: stable codes, severities, docs, suppressions.

Every kind of finding the tracer can report is declared once here, as ruff declares its rules:
a stable code (``TS101``), a name (the kind call sites report), a default severity, a one-line
doc and an example.  An unregistered kind is a programming error (:func:`rule` raises; a test
scans the source for them); the README's list is :func:`markdown_table`.

Codes are grouped by what the user should do: ``TS1xx`` the code computes a wrong shape (an
error at every size), ``TS2xx`` the code runs but very likely does not do what was meant (a lint
that holds at every size), ``TS3xx`` the proof holds under a condition the code assumes (a
warning).  A code is never reused for another meaning.

Suppressions (``# tensig: ignore[TS101, outer-product]``, ``ignore=``): the README's list.

>>> rule("broadcast").code, rule("TS101").name
('TS101', 'broadcast')
>>> sorted(ignored_on("y = x + m  # tensig: ignore[TS101, outer-product]"))
['TS101', 'TS201']
"""

from __future__ import annotations

import contextlib
import linecache
import os
import re
import site
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

__all__ = ["RULES", "Rule", "ignored_on", "markdown_table", "resolve", "rule", "suppressed",
           "user_code"]


@dataclass(frozen=True)
class Rule:
    """One kind of finding: what the user reads in ``--ignore``, the docs and the output."""

    code: str
    name: str
    severity: str  # "error" or "warning"
    doc: str
    example: str


RULES: tuple[Rule, ...] = (
    Rule("TS101", "broadcast", "error",
         "A broadcast needs two different dimensions to be equal.",
         "scores [B, T, T] + mask [B, T]: broadcasts T against B"),
    Rule("TS102", "contraction", "error",
         "A matmul, einsum, linear layer, convolution or norm pairs two different dimensions.",
         "q [B, T, d] @ k [B, S, e]: contracts d with e"),
    Rule("TS103", "return-shape", "error",
         "The result's shape differs from the declared return shape.",
         "x.mean(axis=0) on [B, T, d] declared => B d: returns [T, d]"),
    Rule("TS104", "reshape", "error",
         "A reshape's target holds a different number of elements than its source.",
         "x.reshape(B, T) of [B, T, d]"),
    Rule("TS105", "index", "error",
         "An index or slice bound is out of range for its axis.",
         "x[:, 5] on [B, 3]"),
    Rule("TS106", "concat", "error",
         "Concatenated arrays differ in rank or in a size other than the joined axis.",
         "concatenate([x [B, d], y [B, e]], axis=0)"),
    Rule("TS107", "split", "error",
         "Explicit split sizes do not add up to the axis being split.",
         "split(x [B, 9], [4, 4], dim=1)"),
    Rule("TS108", "op-shape", "error",
         "An operation the library itself rejects for these operand shapes at every size "
         "(found by running it on shape-only tensors at several sizes).",
         "F.multi_head_attention_forward on [B, T, 6] with embed_dim 8"),
    Rule("TS201", "outer-product", "error",
         "An implicit two-sided broadcast makes an outer product (expand one side explicitly "
         "with None/unsqueeze if that is meant).",
         "pred [N] - target [N, 1] becomes [N, N]"),
    Rule("TS202", "reorder", "error",
         "A reshape moves axes (or literal factors of them) past each other: it mixes elements "
         "where a transpose/permute was meant.",
         "y.reshape(B, T, H * E) of [B, H, T, E]"),
    Rule("TS301", "assumption", "warning",
         "The proof holds under a size condition the code assumes (a branch on a size, an "
         "exact division).",
         "d // heads: requires d divisible by heads"),
)

_BY_NAME = {r.name: r for r in RULES}
_BY_CODE = {r.code: r for r in RULES}
_IGNORE = re.compile(r"#\s*tensig:\s*ignore(?:\[([^\]]*)\])?", re.IGNORECASE)
ALL = "*"  # what a bare ``# tensig: ignore`` suppresses


def rule(kind_or_code: str) -> Rule:
    """The rule of a kind name or code; an unknown one is a programming error (``KeyError``)."""
    found = _BY_NAME.get(kind_or_code) or _BY_CODE.get(kind_or_code.upper())
    if found is None:
        raise KeyError(f"{kind_or_code!r} is not a registered verify finding (tensig.findings."
                       "RULES): register it there with a code, severity, doc and example")
    return found


def resolve(names: Iterable[str]) -> frozenset[str]:
    """Codes for user-given codes or names (``--ignore``); ``ValueError`` names an unknown one."""
    out = set()
    for n in names:
        for part in filter(None, (p.strip() for p in n.split(","))):
            try:
                out.add(rule(part).code)
            except KeyError:
                known = ", ".join(r.code for r in RULES)
                raise ValueError(f"unknown finding code {part!r} (known: {known})") from None
    return frozenset(out)


def ignored_on(source_line: str) -> frozenset[str]:
    """The codes a source line's ``# tensig: ignore[...]`` comment suppresses (``ALL``: all)."""
    m = _IGNORE.search(source_line)
    if m is None:
        return frozenset()
    if m.group(1) is None or not m.group(1).strip():
        return frozenset({ALL})
    codes = set()
    for part in filter(None, (p.strip() for p in m.group(1).split(","))):
        r = _BY_NAME.get(part) or _BY_CODE.get(part.upper())
        codes.add(r.code if r is not None else part)  # an unknown code suppresses nothing
    return frozenset(codes)


def suppressed(code: str, file: str | None, line: int | None,
               ignore: frozenset[str] = frozenset()) -> bool:
    """Whether a finding of ``code`` at ``file:line`` is suppressed (by ``ignore`` or a comment)."""
    if code in ignore:
        return True
    if file is None or line is None:
        return False
    on_line = ignored_on(linecache.getline(file, line))
    return ALL in on_line or code in on_line


@cache
def _library_roots() -> tuple[str, ...]:
    """Folders that hold the standard library and installed packages, never the user's code."""
    roots: set[str] = set()
    for vars_ in ({}, {"base": sys.base_prefix, "platbase": sys.base_prefix}):
        paths = sysconfig.get_paths(vars=vars_)
        roots.update(os.path.abspath(paths[k]) for k in ("stdlib", "platstdlib", "purelib",
                                                          "platlib") if k in paths)
    with contextlib.suppress(AttributeError):  # embedded interpreters may lack it
        roots.update(os.path.abspath(p) for p in site.getsitepackages())
    # tensig itself: the package folder, two levels above this module (tensig/check/)
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return tuple(sorted(r + os.sep for r in roots))


def user_code(filename: str) -> bool:
    """Whether a frame's file is the user's code (not tensig, the stdlib or a package): where a
    finding raised inside a library's own Python code is reported."""
    if filename.startswith("<") and filename != "<stdin>" and not filename.startswith("<ipy"):
        return filename.startswith("<doctest") or filename == "<string>"
    path = os.path.abspath(filename)
    if f"{os.sep}site-packages{os.sep}" in path or f"{os.sep}dist-packages{os.sep}" in path:
        return False
    return not path.startswith(_library_roots())


def markdown_table() -> str:
    """The README's list of findings, generated from :data:`RULES`."""
    lines = ["| code | name | severity | what it means | example |", "|---|---|---|---|---|"]
    lines += [f"| `{r.code}` | `{r.name}` | {r.severity} | {r.doc} | `{r.example}` |"
              for r in RULES]
    return "\n".join(lines)
