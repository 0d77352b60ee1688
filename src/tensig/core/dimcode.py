"""Sizes as Python code: a :class:`~tensig.core.dims.Dim` compiled once to an ``int`` function,
for checks that run on every call (the decorator's generated path, the solver's relations on
concrete sizes), and ``size == d`` solved for one linear name by one rule (:func:`linear_split`,
:func:`solve_lines`; the symbolic case is :meth:`~tensig.core.dims.Dim.solve_for`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tensig.core.dim_form import format_terms
from tensig.core.dims import Dim

__all__ = ["compile_dim", "compile_solve", "emit", "linear_split", "solve_lines"]


def emit(d: Dim, name: Callable[[str], str] = lambda n: f"e[{n!r}]") -> str:
    """Python source evaluating ``d``; ``name`` gives the source of each size (a dict ``e``).

    >>> emit(Dim.parse("2*h + 1"))
    "(2*e['h'] + 1)"
    """
    return f"({format_terms(d._terms, name)})"


def compile_dim(d: Dim) -> Callable[[Mapping[str, int]], int]:
    """An int function of a sizes dict that evaluates ``d`` (compiled once, no ``Dim`` per call).

    >>> compile_dim(Dim.parse("(T + 1) // 2 + 3*B"))({"T": 8, "B": 2})
    10
    """
    return eval(f"lambda e: {emit(d)}", {"__builtins__": {}})


def linear_split(d: Dim, name: str) -> tuple[Dim, Dim] | None:
    """``(factor, rest)`` with ``d == factor*name + rest``, both free of ``name``; ``None``
    when ``name`` occurs nonlinearly (a power, inside ``//`` or ``%``): never solved for."""
    try:
        factor = d.coefficient(name)
    except ValueError:
        return None
    return factor, d - factor * Dim.symbol(name)


def solve_lines(size: str, factor: Dim, rest: Dim, fail: str,
                name: Callable[[str], str] = lambda n: f"e[{n!r}]") -> list[str]:
    """Python lines leaving in ``q`` the whole number ``>= 0`` with ``factor*q + rest ==
    size`` (source; ``name`` as :func:`emit`'s), else running ``fail`` (a statement that
    leaves): one subtraction or one ``divmod`` (a symbolic factor into ``c``; zero fails)."""
    c = factor.constant
    if c == 1:
        return [f"q = {size} - {emit(rest, name)}", "if q < 0:", f"    {fail}"]
    lines = [] if c is not None else [f"c = {emit(factor, name)}", "if not c:", f"    {fail}"]
    return [*lines, f"q, r = divmod({size} - {emit(rest, name)}, {c if c is not None else 'c'})",
            "if r or q < 0:", f"    {fail}"]


def compile_solve(factor: Dim, rest: Dim) -> Callable[[Mapping[str, int], int], int | None]:
    """:func:`solve_lines` as a function ``(sizes, size) -> q``, ``None`` where no whole
    number ``>= 0`` solves the relation.

    >>> solve = compile_solve(Dim.parse("h"), Dim(0))  # h*w == size, for w
    >>> solve({"h": 4}, 12), solve({"h": 5}, 12)
    (3, None)
    """
    lines = ["def solve(e, size):", *solve_lines("size", factor, rest, "return None"), "return q"]
    env: dict[str, Any] = {"__builtins__": {"divmod": divmod}}
    exec("\n    ".join(lines), env)
    solve: Callable[[Mapping[str, int], int], int | None] = env["solve"]
    return solve
