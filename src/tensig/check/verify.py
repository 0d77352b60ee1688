"""``tensig.verify(fn, signature)``: prove a function's shape contract for all sizes at once
(the README's "Proving a function's shape contract").

The function runs once on :class:`~tensig.check.tracer.SymArray` arguments whose sizes are the
signature's dimension variables, each a distinct symbol, so ``B`` never equals ``T`` by
accident and no full-size data is allocated.  Findings are reported at source lines of ``fn``
with their stable codes (:mod:`tensig.check.findings`).
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import functools
import importlib
import inspect
import itertools
import math
import os
import re
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensig.check import findings, sym_functions, sym_sizes, trace_einops, trace_jax, tracing
from tensig.check import tracer as S
from tensig.check.guards import retraced, user_raise
from tensig.check.size_fit import named
from tensig.check.trace_numpy import CREATION_EXTRA, NUMPY_EXTRA, SCIPY, library_targets
from tensig.check.trace_random import CREATION_RANDOM, sampler_of
from tensig.core.annotations import (
    Deferred,
    RowVariable,
    family_kind,
    known_family,
    parse_annotation,
    signature_of,
)
from tensig.core.dims import Dim
from tensig.core.errors import SpecSyntaxError, TensigError
from tensig.core.syntax import _plain
from tensig.execution.padding import symbolic_batch

__all__ = ["DEFAULT_TIMEOUT", "Report", "Signature", "Unbuilt", "modelled_operations", "verify"]

DEFAULT_TIMEOUT = 5.0  # seconds per function (``tensig verify --timeout``)


@dataclass(frozen=True)
class Signature:
    """Argument shapes and the declared result shapes (``None``: nothing declared; several
    for a tuple result), as symbolic dimensions.  ``optional`` marks the arguments that may be
    ``None`` (:func:`verify` traces both branches); ``absent``, those ``None`` in one branch.
    """

    args: tuple[tuple[Dim, ...], ...]
    results: tuple[tuple[Dim, ...], ...] | None
    symbols: tuple[str, ...]
    text: str = ""
    kinds: tuple[str, ...] | None = None  # the arguments' dtype kinds ("c", "f", "i", "b")
    optional: tuple[bool, ...] = ()
    absent: frozenset[int] = frozenset()
    #: each array's parameter position (None: the first ``len(args)`` parameters), and the
    #: required number parameters (position, name, ``int``/``float``/``bool``) in between
    positions: tuple[int, ...] | None = None
    scalars: tuple[tuple[int, str, str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> Signature:
        """Read ``"B T d; B T => B d"``: operands separated by ``;``, each an annotation
        optionally followed by ``: dtype`` (``float`` by default), results after ``=>`` (several:
        a tuple; none: nothing declared).  A variadic (``*rows``) is one axis of its own symbol.

        >>> Signature.parse("T, d; d, 3*d => T, 3*d").args
        ((Dim('T'), Dim('d')), (Dim('d'), Dim('3*d')))
        >>> sig = Signature.parse("B T: int; V d => B T d; B")
        >>> sig.kinds, len(sig.results), sig.symbols
        (('i', 'f'), 2, ('B', 'T', 'V', 'd'))
        """
        if not isinstance(text, str):
            raise TypeError(f"a signature is a str, not {type(text).__name__}")
        left, arrow, right = text.partition("=>")

        def side(part: str, offset: int) -> list[tuple[Any, str]]:
            out = []
            for operand in part.split(";") if part.strip() else []:
                out.append(_operand(text, operand, offset))
                offset += len(operand) + 1
            return out

        args = side(left, 0)
        results = [s for s, _ in side(right, len(left) + 2)] if arrow and right.strip() else None
        return _signature([s for s, _ in args], results, text, tuple(k for _, k in args))

    def subs(self, name: str, value: Dim) -> Signature:
        """The signature with symbol ``name`` replaced by ``value`` (a square's ``N_root**2``,
        a guard's ``W`` as ``H``): its new symbols, if any, in ``name``'s place."""
        new = sorted(value.symbols - set(self.symbols))
        return dataclasses.replace(
            self, args=tuple(tuple(x.subs({name: value}) for x in a) for a in self.args),
            results=self.results and tuple(tuple(x.subs({name: value}) for x in r)
                                           for r in self.results),
            symbols=tuple(n for s in self.symbols for n in (new if s == name else [s])))


def _operand(text: str, operand: str, offset: int) -> tuple[Any, str]:
    """One operand of a signature string: its shape and its dtype kind."""
    body, colon, dtype = operand.partition(":")
    kind = "f"
    if colon:
        name = dtype.strip()
        if not known_family(name):
            col = offset + len(body) + 1 + len(dtype) - len(dtype.lstrip())
            raise SpecSyntaxError(text, col, f"unknown dtype {name!r} after ':'",
                                  hint="write a dtype family: float, int, uint, bool, complex, "
                                       "float32, int64, ...", end=col + len(name))
        kind = family_kind(known_family(name))
    try:
        return parse_annotation(body), kind
    except SpecSyntaxError as e:
        raise SpecSyntaxError(text, offset + e.column, e.reason, e.hint,
                              offset + e.end) from None


def _signature(args: Sequence[Any], results: Sequence[Any] | None, text: str,
               kinds: tuple[str, ...], optional: tuple[bool, ...] = ()) -> Signature:
    """The signature of annotation shapes (a result ``None``: an undeclared tuple element), its
    axes as dimensions (memory order): a variadic is one axis of its own symbol, ``_`` and a
    deferred size (``{n}``) fresh sizes.  Its symbols are in order of appearance."""
    names: dict[str, None] = {}
    fresh = itertools.count()

    def axes(shape: Any) -> tuple[Dim, ...]:
        out: list[Dim] = []
        for item in map(_plain, () if shape is None else shape.items):
            if isinstance(item, RowVariable):
                d = Dim.symbol(item.name if item.name is not None else f"rows_{next(fresh)}")
            elif isinstance(item, Dim | int):
                d = Dim(item)
            else:  # typing.Any or Deferred: a size of its own
                assert item is Any or isinstance(item, Deferred)
                d = Dim.symbol(f"_{next(fresh)}")
            names.update(dict.fromkeys(sorted(d.symbols)))
            out.append(d)
        return tuple(out)

    return Signature(tuple(map(axes, args)), None if results is None else
                     tuple(map(axes, results)), tuple(names), text, kinds, optional)


def _witnesses(names: Sequence[str]) -> dict[str, int]:
    """Distinct primes from 11 up: none 1, none the sum or product of two others (no accidental
    fits), and none a size code writes as a literal (8, 10, 16, 64), so a concrete axis of a
    witness size can be read back as its symbol."""
    return dict(zip(names, tracing.primes(), strict=False))


@dataclass
class Report:
    """What verification found; ``ok`` when the contract holds for all sizes."""

    function: str
    signature: Signature
    findings: list[tracing.Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    result: tuple[tuple[Dim, ...], ...] | None = None
    largest: tuple[Dim, ...] | None = None
    file: str | None = None
    line: int | None = None
    suppressed: list[tracing.Finding] = field(default_factory=list)  # by a comment or ``ignore``

    @property
    def errors(self) -> list[tracing.Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[tracing.Finding]:
        return [f for f in self.findings if f.severity != "error"]

    @property
    def ok(self) -> bool:
        """No finding, and the whole function was traced."""
        return not self.findings and not self.notes

    @property
    def complete(self) -> bool:
        return not self.notes

    def __iter__(self) -> Iterator[tracing.Finding]:
        return iter(self.findings)

    def __len__(self) -> int:
        return len(self.findings)

    def largest_bytes(self, dtype: Any = "float32") -> Dim | None:
        """The largest intermediate array's size in bytes, symbolically (``4*B*T*T*h``)."""
        if self.largest is None:
            return None
        itemsize = Dim.const(np.dtype(str(dtype).replace("torch.", "")).itemsize)
        return math.prod(self.largest, start=itemsize)

    def __str__(self) -> str:
        lines = [str(f) for f in self.findings]
        where = f"{self.file}:{self.line}: " if self.file else ""
        lines += [f"{where}note: {n}" for n in self.notes]
        if not lines:
            syms = ", ".join(self.signature.symbols) or "its sizes"
            lines.append(f"{where}ok: {self.function} verified for all {syms}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "signature": self.signature.text,
            "ok": self.ok,
            "findings": [{"code": f.code, "kind": f.kind, "severity": f.severity,
                          "message": f.message, "file": f.file, "line": f.line}
                         for f in self.findings],
            "suppressed": [{"code": f.code, "file": f.file, "line": f.line}
                           for f in self.suppressed],
            "notes": self.notes,
            "result": None if self.result is None else [[str(d) for d in r]
                                                        for r in self.result],
            "largest": None if self.largest is None else [str(d) for d in self.largest],
        }


@contextlib.contextmanager
def _creation_patched() -> Iterator[None]:
    """Creation functions (``np.zeros(B, T)``, ``torch.ones(T, T)``) take symbolic sizes, and
    ``len(x)``, ``range(T)``, ``zip``, ``max(1, T)`` keep them symbolic.

    Compiled (Cython) modules see NumPy as it is before patching: their ``np.empty(size)``
    (``rng.normal(size=x.shape)`` of a generator passed in) must stay a real array, as
    their C code then writes into it (a symbolic one was a segfault).  The sizes become
    witnesses, read back as the signature's symbols (``Tracer.leak``).
    """
    targets = [(builtins, "len", S.sym_len), (builtins, "range", sym_sizes.sym_range),
               (math, "sqrt", sym_sizes.sym_sqrt),
               (builtins, "max", sym_sizes.sym_max), (builtins, "min", sym_sizes.sym_min),
               (builtins, "zip", sym_functions.sym_zip)]
    buffers: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    tables = [(np, S.CREATION_NUMPY),  # NumPy imports numpy.random on first use
              (importlib.import_module("numpy.random"), CREATION_RANDOM)]
    if "torch" in sys.modules:  # its module also adds torch's creation functions to the table
        from tensig.check import trace_torch as symbolic_torch
        buffers = symbolic_torch.buffers_symbolic()
        tables.append((sys.modules["torch"], S.CREATION_TORCH))
    real = types.ModuleType("numpy", np.__doc__)
    vars(real).update(vars(np))
    users = _compiled_numpy_users(len(sys.modules), next(reversed(sys.modules)))
    targets += [(module, name, real) for module, name in users]
    targets += [(module, name, _creation_wrapper(getattr(module, name), fn))
                for module, table in tables for name, fn in table.items()]
    trace_einops.register()
    with tracing.patched(targets), buffers:
        yield


def _torch_targets(fn: Any) -> list[tuple[Any, str, Any]]:
    """torch.func's transformations, where torch is loaded (:func:`trace_torch.func_targets`)."""
    if "torch" not in sys.modules:
        return []
    from tensig.check import trace_torch as symbolic_torch
    return symbolic_torch.func_targets(fn)


#: one wrapper per library function and model, kept: ~30 made afresh per call took 25 us
#: (bounded: a test's mock of np.zeros is a new original)
_creation_wrapper = functools.lru_cache(maxsize=256)(sym_functions.creation_wrapper)


@functools.lru_cache(maxsize=1)
def _compiled_numpy_users(count: int, last: str) -> list[tuple[Any, str]]:
    """The compiled modules' globals that hold NumPy, scanned again only when a module was
    imported since (``count`` and ``last`` of ``sys.modules``): a scan takes 0.7 ms."""
    return [(module, name) for module in list(sys.modules.values())
            if type(module) is types.ModuleType
            and str(vars(module).get("__file__")).endswith((".so", ".pyd"))
            for name in ("np", "numpy") if vars(module).get(name) is np]


def _libraries(fn: Callable[..., Any]) -> set[str]:
    """Top-level modules the function's code refers to (globals it names, closure cells)."""
    modules = (v.__name__ if inspect.ismodule(v) else getattr(v, "__module__", None)
               for v in tracing.referenced(fn))
    return {m.split(".")[0] for m in modules if isinstance(m, str)}


def _uses_torch(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` is torch code: it refers to torch, looks like it, or its annotations name
    torch's tensor (``Float[torch.Tensor, "B A"]``: a body of tensor methods alone,
    ``q.max(dim=1)``, is torch code then)."""
    if "torch" not in sys.modules:  # then nothing of torch's can be referenced
        return False
    from tensig.check import trace_torch as symbolic_torch
    if "torch" in _libraries(fn) or symbolic_torch.looks_like_torch(fn):
        return True
    fn = getattr(fn, "__wrapped__", fn)
    notes = getattr(fn, "__annotations__", None) or getattr(
        getattr(fn, "forward", None), "__annotations__", None) or {}
    return any("torch" in (a if isinstance(a, str) else repr(a)) for a in notes.values())


def _style(fn: Callable[..., Any]) -> bool | None:
    """Torch's semantics, NumPy's (JAX's arrays follow them), or None where the function names
    none of them (a body of array methods alone: ``x.transpose(0, 1)`` is then torch's)."""
    return True if _uses_torch(fn) else False if {"numpy", "jax"} & _libraries(fn) else None


def verify(fn: Callable[..., Any], signature: str | Signature | None = None, *,
           torch_style: bool | None = None, ignore: Iterable[str] = (),
           timeout: float | None = None) -> Report:
    """Run ``fn`` once on symbolic arrays and report shape findings.

    ``signature`` is a spec-style string (``"B T d; B T => B d"``) or a :class:`Signature`;
    without it the function's annotations are read (``tensig.Shaped[...]``).  ``torch_style``
    selects torch semantics where NumPy and torch differ (``x.max(dim)`` returns values and
    indices); by default it is guessed from the modules the function's globals use.
    ``ignore`` lists finding codes or names to leave out (as ``# tensig: ignore[CODE]`` does
    on a line); ``timeout`` (seconds, main thread only) stops a trace that does not finish
    and reports it as a note.  A module class (torch's, its ``forward`` annotated) is verified
    on an instance built without arguments (:class:`Unbuilt` where it needs some).

    Traces run one at a time (a lock, waited for ``timeout`` at most): one replaces
    ``np.zeros``, ``torch.ones``, SciPy's functions, ``len`` and ``range`` process-wide, so
    code in another thread meanwhile calls the replacements (they hand its real arrays to the
    originals, more slowly).

    >>> def bad_mean(x):
    ...     return x.mean(axis=0)          # meant axis=1
    >>> print(verify(bad_mean, "B T d => B d").findings[0].message)
    returns [T, d] but the signature declares [B, d]
    """
    fn = trace_jax.python_function(fn)  # jitted or checkpointed before: its Python function
    if inspect.isclass(fn) and hasattr(fn, "forward"):  # a module class; another: its __init__
        fn = _instance(fn)
    if signature is None:
        signature = _signature_from_annotations(fn)
        if signature is None:
            raise TypeError(f"verify: {getattr(fn, '__name__', fn)} has no shape annotations; "
                            "pass a signature such as 'B T d; B T => B d'")
    sig = signature if isinstance(signature, Signature) else Signature.parse(signature)
    if any(sig.optional):
        return _verify_branches(fn, sig, torch_style, ignore, timeout)
    skip = findings.resolve(ignore)
    func = fn.func if isinstance(fn, functools.partial) else fn  # a partial: its function's
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or \
        type(fn).__name__  # a module: its class (its repr would print its weights)
    code = getattr(func, "__code__", None) or getattr(getattr(fn, "forward", None),
                                                      "__code__", None)
    report = Report(name, sig, file=code.co_filename if code else None,
                    line=code.co_firstlineno if code else None)
    positional, any_number, keywords = _positional(fn)
    if keywords and func is not fn:  # a partial's; verify passes arguments by position
        raise TypeError(f"verify: {name}'s parameter(s) {', '.join(map(repr, keywords))}: "
                        "keyword-only with no default, and verify passes arguments by "
                        "position; give them defaults, or bind them with functools.partial "
                        "(a keyword it binds, params=..., makes the parameters after it "
                        "keyword-only: bind leading weights by position, partial(f, params))")
    least = sum(p.default is p.empty for p in positional)
    arrays = range(len(sig.args)) if sig.positions is None else sig.positions
    given = {*arrays, *(i for i, _, _ in sig.scalars)}
    unknown = [p.name for i, p in enumerate(positional) if p.default is p.empty and i not in given]
    if not any_number and sig.positions is not None and unknown:
        lead = [p.name for p in positional[:len(unknown)]] == unknown  # bound by position then
        raise TypeError(f"verify: {name}'s parameter(s) {', '.join(map(repr, unknown))}: no "
                        "shape annotation, no default, and not a number or PRNG key verify "
                        "stands in for (a float, a bool, an int named like a size of the "
                        "signature, a NumPy Generator); give them defaults, or verify "
                        f"functools.partial({name}, "
                        f"{', '.join(unknown if lead else (f'{r}=...' for r in unknown))}) "
                        "(weights such as flax's params fix their sizes: declare those, "
                        "'B, T, 32', not 'B, T, D')")
    if not any_number and not least <= len(given) <= len(positional):
        rest = [p.name for p in positional[len(sig.args):] if p.default is p.empty]
        hint = f" ({', '.join(rest)}: no shape annotation and no default; give them defaults, " \
               f"or verify functools.partial({name}, {', '.join(f'{r}=...' for r in rest)}))" \
            if rest and len(sig.args) < least else ""
        raise TypeError(f"verify: {name} takes {least} array argument(s) but the signature "
                        f"{sig.text!r} describes {len(sig.args)}{hint}")
    if not _ONE_AT_A_TIME.acquire(timeout=-1 if timeout is None else timeout):
        report.notes.append(f"not verified: another thread's trace ran all of {timeout:g} s "
                            "(--timeout; traces run one at a time)")
        return report
    try:
        with _time_limit(timeout):  # traced again past the user's guards (check/guards.py)
            report = retraced(lambda s, forced: _verify_traced(
                fn, s, report if s is sig and not forced else dataclasses.replace(
                    report, signature=s, findings=[], notes=[]), torch_style, forced), sig)
    except tracing.TraceLimit as e:
        report.notes.append(f"verification stopped: {e}")
    except sym_sizes.Square as e:
        squared = _verify_square(fn, sig, e, torch_style, ignore, timeout)
        if squared is None:
            report.notes.append(f"verification stopped: {e} (no size of it solved to a "
                                "square) is not modelled")
        report = squared or report
    finally:
        _ONE_AT_A_TIME.release()
    kept = [f for f in report.findings if not findings.suppressed(f.code, f.file, f.line, skip)]
    report.suppressed += [f for f in report.findings if f not in kept]  # a retrace's too
    report.findings = kept
    return report


_ONE_AT_A_TIME = threading.RLock()  # the patches a trace installs are process-wide


def _verify_square(fn: Callable[..., Any], sig: Signature, square: sym_sizes.Square,
                   torch_style: bool | None, ignore: Iterable[str], timeout: float | None
                   ) -> Report | None:
    """``int(math.sqrt(n))`` of a size ``n`` no square at every size: verified again with a
    symbol of ``n`` solved so that ``n`` is a new size's square (ViT's ``N`` as
    ``N_root**2``), under that stated assumption; None (a note) where no symbol solves."""
    d = square.dim
    for name in sorted(set(d.symbols) & set(sig.symbols)):
        root = Dim.symbol(f"{name}_root")
        with contextlib.suppress(ValueError):
            value, conditions = (d - root ** 2).solve_for(name)
            if conditions:
                continue
            report = verify(fn, sig.subs(name, value), torch_style=torch_style, ignore=ignore,
                            timeout=timeout)
            report.findings.insert(0, tracing.Finding(
                "assumption", f"assumes {d} is a square, {root}**2 (int(math.sqrt({d})) "
                              "rounds down where it is not)" +
                              ("" if d == Dim.symbol(name) else f"; {name} = {value}"),
                *square.where))
            return report
    return None


class Unbuilt(TensigError, TypeError):
    """A module class :func:`verify` cannot build without arguments; the message names them.
    ``tensig verify`` notes it, ``pytest --tensig`` skips it (fails it under --tensig-strict)."""


def _instance(cls: type) -> Any:
    """An instance of a module class for verifying its ``forward``, built without arguments."""
    positional, _, keywords = _positional(cls)
    needed = [p.name for p in positional if p.default is p.empty] + keywords
    if needed:
        raise Unbuilt(f"not verified: {cls.__name__}() needs {', '.join(needed)}; call "
                      f"tensig.verify({cls.__name__}(...)) in a test, or give them defaults")
    try:
        return cls()
    except Exception as e:
        raise Unbuilt(f"not verified: {cls.__name__}() raised {type(e).__name__}: {e}") from None


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`~tensig.check.tracer.TraceLimit` in the main thread after ``seconds``.

    A ``SIGALRM`` timer interrupts a Python loop wherever it is; one stuck C call is the
    command line's watchdog's business.  Without a timer (another thread, someone else's) the
    trace's step limit still bounds the work.
    """
    import signal  # here, not at the top: it costs every ``import tensig`` a millisecond

    if seconds is None or not hasattr(signal, "setitimer") or \
            threading.current_thread() is not threading.main_thread() or \
            signal.getitimer(signal.ITIMER_REAL)[0] > 0:  # someone else's timer (pytest-timeout)
        yield
        return

    stopped = False

    def expire(signum: int, frame: Any) -> None:
        if stopped:
            return
        # again in 50 ms: once the import (restore) is complete, or should this stop be lost
        # (raised in a finalizer or a weakref callback, where Python only prints it)
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        if not _unsafe_to_stop(frame):
            raise tracing.TraceLimit(f"the function did not finish within {seconds:g} s "
                                     "(--timeout)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        stopped = True
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _unsafe_to_stop(frame: Any) -> bool:
    """Whether ``frame`` runs inside the loading of a module (importlib's ``_find_and_load``)
    or inside :func:`~tensig.check.tracing.patched` setting or putting back its patches.

    A stopped load leaves a half-initialised module in ``sys.modules`` (torch imports sympy on
    first use), a stopped restore (a trace that ends as its time runs out) leaves patches
    (``builtins.len``, ``np.zeros``) in place for good: either breaks every later function.
    Not any importlib frame: a loaded package's ``from package import name`` runs
    ``_handle_fromlist`` too, and a signal that arrives in C work is handled at the next Python
    call, in a traced op often that one (the timer, always deferred, then never stopped a loop).
    """
    while frame is not None:
        name, file = frame.f_code.co_name, frame.f_code.co_filename
        if (name == "_find_and_load" and file.startswith("<frozen importlib")) or \
                (name == "patched" and file == tracing.__file__):
            return True
        frame = frame.f_back
    return False


def _verify_traced(fn: Callable[..., Any], sig: Signature, report: Report,
                   torch_style: bool | None, forced: dict[str, tuple[bool, str]]
                   ) -> tuple[Report, tracing.Tracer]:
    tracer = tracing.Tracer(_witnesses(sig.symbols), forced=forced)
    token = tracing._TRACER.set(tracer)
    style = tracing._TORCH_STYLE.set(_style(fn) if torch_style is None else torch_style)
    try:
        kinds = sig.kinds or ("f",) * len(sig.args)
        args: list[Any] = [None if i in sig.absent else
                S.SymArray(dims, kind[-1],
                           frozenset(i for i, d in enumerate(dims) if d == sym_sizes.ONE))
                for i, (dims, kind) in enumerate(zip(sig.args, kinds, strict=True))]
        # a Padded[...] parameter ("P" kind): data, a [B, T] bool mask and [B] lengths
        args = [symbolic_batch(a) if a is not None and k[0] == "P" else a
                for a, k in zip(args, kinds, strict=True)]
        args = _call(fn, sig, args)
        out = None
        with _creation_patched(), trace_jax.patched(fn), \
                tracing.patched(library_targets(fn) + _torch_targets(fn)):
            try:
                out = fn(*args)
            except tracing.Unsupported as e:
                report.notes.append(f"verification stopped: {e} is not modelled "
                                    f"(see tensig.check.verify.modelled_operations())")
            except Exception as e:  # the function failed on symbolic input: say where
                file, line = tracing.failure_line(e)  # none: the call itself failed
                # inside JAX (code it compiled before verification): JAX's fallback below
                tracer.used_jax |= tracing.failure_line(e, _in_jax)[0] is not None
                where = f" at {file}:{line}" if file else \
                    f" calling {getattr(fn, '__name__', 'the function')}()"
                what = "einops rejected the operands (reported above)" if \
                    trace_einops.reported(e, (file, line)) else f"{type(e).__name__}: {e}"
                report.notes.append(f"verification stopped{where}: {what}")
                tracer.raised = user_raise(e)
        if out is not None:
            report.result = _result_dims(out)
            _check_result(report, sig, tracer)
        if report.notes and "jax" in sys.modules and (
                tracer.used_jax or {"jax", "jaxlib"} & _libraries(fn)
                or "JAX" in report.notes[0]):
            _jax_fallback(fn, sig, kinds, report, tracer)
        if tracer.largest is not None:
            report.largest = tracer.largest.dims
    finally:  # a TraceLimit too keeps what was found
        report.findings = list(tracer.findings)
        tracing._TRACER.reset(token)
        tracing._TORCH_STYLE.reset(style)
    return report, tracer


def _in_jax(filename: str) -> bool:
    """Whether a frame's file is the installed JAX's (a user's own folder named jax is not)."""
    root = os.path.dirname(getattr(sys.modules.get("jax"), "__file__", None) or "")
    return bool(root) and os.path.abspath(filename).startswith(root + os.sep)


def _jax_fallback(fn: Callable[..., Any], sig: Signature, kinds: tuple[str, ...],
                  report: Report, tracer: tracing.Tracer) -> None:
    """A trace that stopped inside JAX (code JAX compiled before verification) is re-run under
    JAX's own symbolic shapes; findings made before the stop are kept."""
    def fallback(at: dict[str, int] | None = None) -> Any:
        return trace_jax.jax_shapes_fallback(
            lambda arrays, size: fn(*_call(fn, sig, arrays, size)), sig.args, kinds,
            sig.symbols, at)

    findings, notes, result = fallback()
    if notes:  # what stopped JAX too (a size it cannot decide) says more than the trace's
        report.notes += [n for n in notes if "inconclusive" in n.lower()]
        return
    if not findings:  # JAX's symbolic shapes skip checks (a reshape's element count): refused
        base = tracer.assumption_env()  # at the witnesses and where small divisors divide
        refused = fallback(base)[0]
        if refused and fallback({n: v * _DIVISIBLE for n, v in base.items()})[0]:
            findings = [dataclasses.replace(f, message=named(f.message, base))
                        for f in refused]
    report.notes = []
    tracer.findings += [f for f in findings if f not in tracer.findings]
    report.result = result
    _check_result(report, sig, tracer)


def _signature_from_annotations(fn: Callable[..., Any]) -> Signature | None:
    """A signature from shape annotations (tensig's or jaxtyping's), when there are any; items
    map as in :meth:`Signature.parse`, optional arguments (``| None``, a ``None`` default) are
    marked, so :func:`verify` traces both branches."""
    forward = getattr(fn, "forward", None)
    if not inspect.isroutine(fn) and inspect.ismethod(forward):
        fn = forward  # a module (torch's nn.Module): its forward's annotations
    fs = getattr(fn, "__tensig_signature__", None) or signature_of(getattr(fn, "__wrapped__", fn))
    if not fs.parameters and fs.result is None:
        return None
    keys = {p.position for p in fs.parameters if p.marker.dtype == "key" and p.position
            is not None and not p.marker.shape.items}  # Key[jax.Array, ""]: a real key below
    positional = sorted((p for p in fs.parameters if p.position is not None
                         and p.position not in keys), key=lambda p: p.position or 0)
    markers = fs.result if isinstance(fs.result, tuple) else (fs.result,)
    results = None if fs.result is None else [None if m is None else m.shape for m in markers]
    kinds = tuple(("P" if getattr(p.marker, "wrapper", None) else "")  # Padded[...]
                  + family_kind(p.marker.dtype) for p in positional)
    sig = _signature([p.marker.shape for p in positional], results,
                     "; ".join(str(p.marker.shape) for p in positional), kinds,
                     tuple(p.optional for p in positional))
    positions = tuple(p.position or 0 for p in positional)
    params = _positional(fn)[0]
    jax_code = "jax" in sys.modules and "jax" in _libraries(fn) and not {
        "query", "value"} & {p.name for p in params}  # beside them a key is attention's array
    scalars = tuple((i, p.name, kind) for i, p in enumerate(params)
                    if p.default is p.empty and i not in positions
                    and (kind := "Key" if i in keys else _scalar_kind(p, jax_code))
                    and (kind != "int" or p.name in sig.symbols))  # a count, a seed: unknown
    return dataclasses.replace(sig, scalars=scalars, positions=positions)


def _branches(sig: Signature) -> list[frozenset[int]]:
    """The ``None`` patterns to trace: every subset of up to 3 optional arguments, else all
    given, all absent and each one absent alone."""
    optional = [i for i, o in enumerate(sig.optional) if o]
    if len(optional) <= 3:
        return [frozenset(c) for n in range(len(optional) + 1)
                for c in itertools.combinations(optional, n)]
    return [frozenset(), frozenset(optional), *(frozenset({i}) for i in optional)]


def _verify_branches(fn: Callable[..., Any], sig: Signature, torch_style: bool | None,
                     ignore: Iterable[str], timeout: float | None) -> Report:
    """Verify once per ``None`` pattern of the optional arguments; merge the reports."""
    reports = [(absent, verify(fn, dataclasses.replace(sig, absent=absent, optional=()),
                               torch_style=torch_style, ignore=ignore, timeout=timeout))
               for absent in _branches(sig)]
    reports[0][1].signature = sig
    report = reports[0][1]
    seen = set(report.findings)
    names = [p.name for p in _positional(fn)[0]]
    for absent, other in reports[1:]:
        where = ", ".join(f"{names[i] if i < len(names) else i}=None" for i in sorted(absent))
        fresh = [f for f in dict.fromkeys(other.findings) if f not in seen]
        seen.update(fresh)
        report.findings += [dataclasses.replace(f, message=f"{f.message} (with {where})")
                            for f in fresh]
        report.notes += [f"with {where}: {n}" for n in other.notes if n not in report.notes]
    return report


#: what a required number parameter is traced with: an ``int`` named like a size of the
#: signature is that size (``def pe(T: int, D: int) -> Float[..., "T, D"]``), a ``float``
#: a value no formula divides by zero at (``1 - alpha``), a ``bool`` the branch it enables;
#: a JAX PRNG key a real key (its shape says nothing about the arrays): a typed one, shape
#: ``()``, where annotated ``Key[jax.Array, ""]``, else a ``PRNGKey``'s two ``uint32``; a
#: NumPy generator (``rng: np.random.Generator``) a seeded one that takes symbolic sizes
_STAND_INS: dict[str, Callable[[], Any]] = {
    "float": lambda: 0.5, "bool": lambda: True,
    "key": lambda: importlib.import_module("jax.random").PRNGKey(0),
    "Key": lambda: importlib.import_module("jax.random").key(0),
    "Generator": lambda: sampler_of(np.random.default_rng(0)),
    "RandomState": lambda: sampler_of(np.random.RandomState(0))}
#: a multiple of every divisor code commonly assumes (heads, patches: up to 64, and 3, 5, 7)
_DIVISIBLE = 2 ** 6 * 3 ** 2 * 5 * 7
#: a JAX PRNG key's usual parameter names (``key``, ``rng``, ``subkey``, ``dropout_rng``)
_KEY_NAME = re.compile(r"(\w+_)?(sub)?(key|rng)|prng\w*")


def _call(fn: Callable[..., Any], sig: Signature, arrays: list[Any],
          size: Callable[[Dim], Any] = S.SymSize) -> list[Any]:
    """The positional arguments of the traced call: each array at its parameter's position,
    a stand-in for each required number (an ``int`` size as ``size`` makes it: symbolic, or
    JAX's own symbolic size in its fallback), defaults in the gaps."""
    if sig.positions is None:
        return arrays
    slots: dict[int, Any] = dict(zip(sig.positions, arrays, strict=True))
    for i, name, kind in sig.scalars:
        slots[i] = size(Dim.symbol(name)) if kind == "int" else _STAND_INS[kind]()
    params = _positional(fn)[0]
    return [slots[i] if i in slots else sampler_of(params[i].default)  # as patched defaults
            for i in range(max(slots, default=-1) + 1)]


def _scalar_kind(p: inspect.Parameter, jax_code: bool = False) -> str | None:
    """``int``, ``float``, ``bool`` (or a NumPy generator's class name) for a parameter
    annotated as that (the class or, under ``from __future__ import annotations``, its
    name); ``key`` for a JAX PRNG key in JAX code: named like one, annotated as JAX's
    (``key: jax.Array``, ``rng: PRNGKey``) or not."""
    a = p.annotation
    name = a if isinstance(a, str) else getattr(a, "__name__", None)
    name = name and name.rsplit(".", 1)[-1]
    home = a.rpartition(".")[0] if isinstance(a, str) else str(getattr(a, "__module__", ""))
    numpy_generator = name in ("Generator", "RandomState") and (
        home in ("", "np") or home.startswith(("numpy", "np.random")))  # not torch's, typing's
    if name in ("int", "float", "bool") or numpy_generator:
        return name
    return "key" if jax_code and _KEY_NAME.fullmatch(p.name) and (
        a is p.empty or any(w in str(a) for w in ("jax", "Array", "Key"))) else None


def _positional(fn: Callable[..., Any]) -> tuple[list[inspect.Parameter], bool, list[str]]:
    """``fn``'s positional parameters, whether it takes any number (``*args``, unknown), and
    its keyword-only parameters without a default (which no positional call fills)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return [], True, []
    return ([p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)],
            any(p.kind is p.VAR_POSITIONAL for p in params),
            [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty])


def _result_dims(out: Any) -> tuple[tuple[Dim, ...], ...]:
    items = out if isinstance(out, tuple) else (out,)
    return tuple(S._sym(o).dims if isinstance(o, S.SymArray | int | float) or
                 (hasattr(o, "shape") and not isinstance(o, type))
                 else () for o in items)  # a size, a string, None: no shape


def _check_result(report: Report, sig: Signature, tracer: tracing.Tracer) -> None:
    """The result against the declared shape; symbols only in the result bind to anything."""
    if sig.results is None or report.result is None:
        return
    in_args = {name for dims in sig.args for d in dims for name in d.symbols}
    in_args |= {name for _, name, kind in sig.scalars if kind == "int"}  # sizes given as ints
    bound: dict[str, Dim] = {}
    for got, want in zip(report.result, sig.results, strict=False):
        ok = len(got) == len(want)
        for g, w in zip(got, want, strict=False) if ok else ():
            w = w.subs(bound) if bound else w
            free = w.symbols - in_args - set(bound)
            if len(free) == 1 and w == Dim.symbol(next(iter(free))):
                bound[next(iter(free))] = g
            elif not tracer.equal_under_assumptions(g, w):
                ok = False
                break
        if not ok:
            tracer.findings.append(tracing.Finding(
                "return-shape",
                f"returns [{', '.join(map(str, got))}] but the signature declares "
                f"[{', '.join(map(str, want))}]", report.file, report.line))


def modelled_operations() -> dict[str, list[str]]:
    """The operations verify models by hand, by library (the README's list is generated from
    this).  Everything else is fitted where a library can tell shapes without data (every
    other NumPy array function on small zero arrays, torch ops on meta tensors, JAX through
    ``jax.eval_shape``) or stops the trace with a note."""
    out = {"NumPy": sorted(set(S.NUMPY) | set(S.CREATION_NUMPY) | set(NUMPY_EXTRA)
                           | set(CREATION_EXTRA) | {f"random.{n}" for n in CREATION_RANDOM})}
    with contextlib.suppress(ImportError):
        from tensig.check import trace_torch as symbolic_torch
        out["PyTorch"] = sorted(set(S.TORCH) | set(S.CREATION_TORCH) | set(symbolic_torch.HAND))
    out["JAX"] = sorted(set(trace_jax.TABLE) | set(trace_jax.CONTROL))
    out["SciPy"] = sorted(SCIPY)
    return out
