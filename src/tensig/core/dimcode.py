"""Sizes as Python code: a :class:`~tensig.core.dims.Dim` compiled to an ``int`` function.

Checks that run on every call (the decorator's generated path, the solver's linear relations on
concrete sizes) evaluate a polynomial without building a ``Dim`` per call: the polynomial is
turned into Python source once and compiled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tensig.core.dims import Dim, FloorDiv

__all__ = ["compile_dim", "emit"]


def emit(d: Dim, name: Callable[[str], str] = lambda n: f"e[{n!r}]") -> str:
    """Python source evaluating ``d``; ``name`` gives the source of each size (a dict ``e``).

    >>> emit(Dim.parse("2*h + 1"))
    "(1 + 2*e['h'])"
    """
    parts = []
    for monomial, coefficient in d.terms.items():
        factors = [] if coefficient == 1 and monomial else [str(coefficient)]
        for atom, power in monomial:
            if isinstance(atom, str):
                factor = name(atom)
            else:
                op = "//" if isinstance(atom, FloorDiv) else "%"
                factor = f"({emit(atom.numerator, name)} {op} {atom.divisor})"
            factors.append(factor if power == 1 else f"{factor}**{power}")
        parts.append("*".join(factors))
    return "(" + (" + ".join(parts) or "0") + ")"


def compile_dim(d: Dim) -> Callable[[Mapping[str, int]], int]:
    """An int function of a sizes dict that evaluates ``d`` (compiled once, no ``Dim`` per call).

    >>> compile_dim(Dim.parse("(T + 1) // 2 + 3*B"))({"T": 8, "B": 2})
    10
    """
    return eval(f"lambda e: {emit(d)}", {"__builtins__": {}})
