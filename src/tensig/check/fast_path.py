"""The decorator's generated fast path: straight-line Python source for one function.

Read ``.shape``, compare its length, unpack the sizes, bind names to local variables, evaluate
``T + 1`` as ``v1 + 1``, solve ``2*h`` with one ``divmod``: no ``Dim`` and no dict per call.
It only accepts or defers to the interpreter (:mod:`tensig.check.decorator` says how).
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from typing import Any

from tensig.check.interpreter import (
    _ANON,
    _BCAST,
    _EMPTY,
    _FIXED,
    _NAME,
    _VAR,
    _Checker,
    _DeferredExpr,
    _Program,
)
from tensig.core.annotations import _ACCEPT, ShapeSpecMarker
from tensig.core.dimcode import emit as _emit
from tensig.core.dimcode import linear_split, solve_lines
from tensig.core.dims import Dim

_FAST_FRAMES: weakref.WeakKeyDictionary[Any, tuple[tuple[str, str], ...]] = \
    weakref.WeakKeyDictionary()
"""Generated wrappers' code objects -> ``(size name, local variable)``: a checked call's
bindings are read from its frame when asked (``isinstance``), so calls publish nothing."""


_UNBOUND = object()  # the generated code's ``_U``: a local not bound yet


class _Generator:
    """Emits the straight-line check of one function: locals instead of dicts, no calls.  Every
    failure and every case it does not handle (two unknowns, an unseen dtype) hands the call to
    the interpreter (``fail``)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.locals: dict[str, str] = {}
        self.families: dict[str, str] = {}  # dtype family -> the local of its accept cache
        self.defaults: list[Any] = []  # the arguments' defaults, ``_D`` in the generated code
        self.names: tuple[tuple[str, str], ...] = ()  # the bindings of the arguments' checks

    def local(self, key: str) -> str:
        """The local variable holding the binding ``key`` (a size name or a row variable)."""
        return self.locals.setdefault(key, f"v{len(self.locals)}")

    def emit(self, depth: int, *lines: str) -> None:
        self.lines.extend("    " * depth + line for line in lines)

    def value(self, depth: int, program: _Program, marker: ShapeSpecMarker, optional: bool,
              fail: str) -> bool:
        """Emit the check of the value in ``x``; ``False`` when it needs the interpreter."""
        ops = program.ops
        variables = [i for i, (code, _, _) in enumerate(ops) if code & ~_BCAST in (_VAR, _ANON)]
        if len(variables) > 1 or marker.pytree or any(
                isinstance(payload, _DeferredExpr) or code == _VAR | _BCAST
                for code, payload, _ in ops):
            return False
        self.emit(depth, "if x is None:", f"    {'pass' if optional else fail}", "else:")
        depth += 1
        wrapper = getattr(marker, "wrapper", None)  # Padded[...]: the value's type first
        if wrapper is not None:
            self.emit(depth, f"if not isinstance(x, _modules[{wrapper.__module__!r}]."
                             f"{wrapper.__qualname__}):", f"    {fail}")
        self.emit(depth, "try:", "    s = x.shape", "    rank = len(s)")  # no len: interpreted
        if marker.dtype is not None:
            self.emit(depth, "    dt = x.dtype")
        self.emit(depth, "except (AttributeError, TypeError):", f"    {fail}")
        self.unpack(depth, len(ops), variables[0] if variables else None, fail)
        for i, (code, payload, _) in enumerate(ops):
            self.item(depth, code, payload, f"a{i}", fail)
        if marker.dtype is not None:
            cache = self.families.setdefault(marker.dtype, f"_A{len(self.families)}")
            self.emit(depth, f"if {cache}.get(dt) is not True:", f"    {fail}")
        return True

    def unpack(self, depth: int, m: int, var: int | None, fail: str) -> None:
        """Sizes into ``a0, a1, ...`` (a row variable's axes into a tuple)."""
        if var is None:
            self.emit(depth, f"if rank != {m}:", f"    {fail}")
            if m:
                self.emit(depth, ", ".join(f"a{i}" for i in range(m)) + ", = s")
            return
        self.emit(depth, f"if rank < {m - 1}:", f"    {fail}")
        for i in range(m):
            if i < var:
                self.emit(depth, f"a{i} = s[{i}]")
            elif i > var:
                self.emit(depth, f"a{i} = s[{i - m}]")
        stop = f"rank - {m - 1 - var}" if m - 1 - var else ""
        self.emit(depth, f"a{var} = tuple(s[{var}:{stop}])")

    def item(self, depth: int, code: int, payload: Any, size: str, fail: str) -> None:
        """One of :class:`_Program`'s operations on the size in the local ``size``."""
        if code in (-1, _ANON):  # ``_``, ``...``
            return
        if code & _BCAST:  # size 1 fits and binds nothing
            self.emit(depth, f"if {size} != 1:")
            self.item(depth + 1, code & ~_BCAST, payload, size, fail)
            self.emit(depth + 1, "pass")
        elif code in (_NAME, _VAR):
            local = self.local(payload)
            self.emit(depth, f"if {local} is _U:", f"    {local} = {size}",
                      f"elif {local} != {size}:", f"    {fail}")
        elif code == _FIXED:
            self.emit(depth, f"if {size} != {payload}:", f"    {fail}")
        else:
            self.expression(depth, payload.dim, size, fail)

    def expression(self, depth: int, d: Dim, size: str, fail: str) -> None:
        """Evaluate when every name is bound, else solve for the one unbound linear name."""
        names = sorted(d.symbols)
        bound = " and ".join(f"{self.local(n)} is not _U" for n in names)
        self.emit(depth, f"if {bound}:", f"    if {size} != {_emit(d, self.local)}:",
                  f"        {fail}")
        for name in names:
            split = linear_split(d, name)
            if split is None:
                continue
            others = [f"{self.local(n)} is not _U" for n in names if n != name]
            self.emit(depth, f"elif {' and '.join([f'{self.local(name)} is _U', *others])}:")
            self.emit(depth + 1, *solve_lines(size, *split, fail, self.local),
                      f"{self.local(name)} = q")
        self.emit(depth, "else:", f"    {fail}")


def _generate(checker: _Checker, compiled: bool = True) -> Callable[..., Any]:
    """The wrapper of one function: its straight-line check, or one that runs the interpreter
    on every call (``compiled=False``, or a check it cannot write)."""
    g = _Generator()
    fast = compiled and _checks(g, checker)
    if not fast:
        g = _Generator()
        g.emit(2, "return _slow(args, kwargs)")
    header = ["def make(fn, _slow, _slow_result, _modules, _ACC, _U, _EMPTY, _D):",
              *(f"    {v} = _ACC.setdefault({k!r}, {{}})" for k, v in g.families.items()),
              "    def wrapper(*args, **kwargs):"]
    # skipped while torch.compile (dynamo) traces; until something imports dynamo nothing can
    # be tracing, and the membership test saves the call (a tenth of the cost on torch)
    if not fast or checker.single or checker.results or checker.length is not None:
        header += ["        t = _modules.get('torch')",
                   "        if t is not None and 'torch._dynamo' in _modules and "
                   "t.compiler.is_compiling():",
                   "            return fn(*args, **kwargs)"]
    if g.locals:
        header.append("        " + " = ".join(g.locals.values()) + " = _U")
    source = "\n".join([*header, *g.lines, "    return wrapper"])
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<tensig.shaped {checker.sig.name}>", "exec"), namespace)
    wrapper = namespace["make"](checker.fn, checker.call, checker.after, sys.modules,
                                _ACCEPT, _UNBOUND, _EMPTY, tuple(g.defaults))
    if fast:
        _FAST_FRAMES[wrapper.__code__] = g.names
        wrapper.__tensig_source__ = source
    return wrapper


def _checks(g: _Generator, checker: _Checker) -> bool:
    """Emit the checks of the arguments, the call and the checks of its result; ``False`` where
    the function needs the interpreter throughout."""
    if checker.variadic:
        return False
    fail = "return _slow(args, kwargs)"
    if checker.single:
        g.emit(2, "n = len(args)")
    for name, position, default, program, marker, optional in checker.single:
        g.defaults.append(default)
        g.emit(2, f"x = args[{position}] if n > {position} else "
                  f"kwargs.get({name!r}, _D[{len(g.defaults) - 1}])", "if x is not _EMPTY:")
        if not g.value(3, program, marker, optional, fail):
            return False
    g.emit(2, "result = fn(*args, **kwargs)")
    g.names = tuple(g.locals.items())
    fail = "return _slow_result(args, kwargs, result)"
    if checker.length is not None:
        g.emit(2, f"if not isinstance(result, tuple) or len(result) != {checker.length}:",
               f"    {fail}")
    for i, _, program, marker, optional in checker.results:
        g.emit(2, "x = result" if i is None else f"x = result[{i}]")
        if not g.value(2, program, marker, optional, fail):
            return False
    g.emit(2, "return result")
    return True
