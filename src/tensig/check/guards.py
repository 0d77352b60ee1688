"""Guards: a shape check the user's code makes and raises on (``assert D % H == 0``, ``if
x.shape[-1] != self.dim: raise ValueError``, ``assert H == W``).

Verify decides a condition the sizes do not decide at the witnesses (distinct primes), which
no guard accepts: no prime is divisible by 4 and no two are equal, so the trace took the
raising side and stopped there.  Where a trace ends in the user's own ``raise`` (or
``assert``) after such decisions, :func:`retraced` traces again with the latest one forced to
its other side, keyed by its text so that it decides alike wherever it is asked
(:func:`tensig.check.sym_sizes.decide`), a few times at most.  An equality forced true is
substituted into the signature instead (``W`` as ``H``, ``D`` as 64), as verify's squares are:
``x @ w`` of a ``[64, 64]`` weight then checks; so is an order (``D >= 64``: ``D`` as
``D_more + 63``), whose witnesses would otherwise decide later conditions on its other
side.  The assumption is reported as what the code requires (``requires D divisible by 4:
the code raises AssertionError otherwise``).
"""

from __future__ import annotations

import dis
import functools
import itertools
import math
import os
import re
from collections.abc import Callable
from typing import Any

from tensig.check import findings, tracing
from tensig.core.dims import Dim
from tensig.core.errors import InconclusiveError

__all__ = ["TRIES", "retraced", "user_raise"]

TRIES = 4  # re-traces at most, after the first trace (all within verify's time limit)
#: torch's asserts for traced code (timm's ``_assert(H == self.img_size[0], ...)``), which
#: raise on a False the user's code passed them
_TORCH_ASSERTS = frozenset({"_assert", "_check_with"})
_ORDER = {"<": (1, 1), "<=": (1, 0), ">": (-1, 1), ">=": (-1, 0)}  # a < b: (b - a) - 1 >= 0


def user_raise(e: BaseException) -> tuple[str, tracing.Where] | None:
    """The exception's type and line where the user's code raised it itself (a ``raise``
    statement or an ``assert``: the innermost frame is the user's, at a ``RAISE_VARARGS``;
    or ``torch._assert``/``torch._check`` called from the user's line);
    None for one a library raised (an operation that rejects its operands: a finding)."""
    frames = []
    tb = e.__traceback__
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    if frames and frames[-1].tb_frame.f_code.co_name in _TORCH_ASSERTS and \
            frames[-1].tb_frame.f_globals.get("__name__") == "torch":
        while frames and frames[-1].tb_frame.f_globals.get("__name__") == "torch":
            frames.pop()  # torch._assert / torch._check: the user's line that called it
        raised = bool(frames)
    else:
        raised = bool(frames) and any(
            i.offset == frames[-1].tb_lasti and i.opname == "RAISE_VARARGS"
            for i in dis.get_instructions(frames[-1].tb_frame.f_code))
    if not raised or not findings.user_code(frames[-1].tb_frame.f_code.co_filename):
        return None
    return type(e).__name__, (frames[-1].tb_frame.f_code.co_filename, frames[-1].tb_lineno)


def _solved(sig: Any, diff: Dim, fresh: Callable[[str], Dim] | None = None
            ) -> tuple[Any, str] | None:
    """The signature with ``diff == 0`` solved for one of its symbols, the last first
    (``H == W``: ``W`` as ``H``), or with ``diff == fresh(name)``, a new size at least 1
    (``D >= 64``: ``D`` as ``D_more + 63``; ``D % 4 == 0``: ``D`` as ``4*D_over4``), so that
    every later decision at the witnesses is on the forced side; in its other symbols and
    numbers only; and the substitution in words.  None where no symbol solves."""
    for name in reversed([s for s in sig.symbols if s in diff.symbols]):
        new = fresh(name) if fresh else Dim.const(0)
        try:
            value, conditions = (diff - new).solve_for(name)
            if conditions or not value.symbols <= (set(sig.symbols) - {name}) | new.symbols \
                    or (fresh and not value >= 1):
                continue
        except (ValueError, InconclusiveError):
            continue
        return sig.subs(name, value), f"{name} = {value}"
    return None


def _quotient(n: Dim, k: int, name: str) -> Dim:
    """``n`` divisible by ``k`` as a multiple of a new size: ``4*D_over4``.  A common factor of
    ``n``'s coefficients counts (``4*D_over4`` divisible by 6 is ``D_over4`` by 3: ``12*
    D_over12``, not a requirement left at a prime witness); of a quotient, named by the
    product (``D_over4`` as ``2*D_over8``)."""
    g = math.gcd(*n.terms.values())
    k //= math.gcd(k, g)
    m = re.fullmatch(r"(.+)_over(\d+)", name)
    return g * k * Dim.symbol(f"{m[1]}_over{int(m[2]) * k}" if m else f"{name}_over{k}")


_State = tuple[Any, tracing.Tracer, Any, dict[str, tuple[bool, str]], list[tracing.Finding],
               set[str]]  # report, tracer, signature, forced, said, tried


def retraced(trace: Callable[[Any, dict[str, tuple[bool, str]]], tuple[Any, tracing.Tracer]],
             sig: Any) -> Any:
    """The report of ``trace(signature, forced)`` (verify's trace of the function), traced
    again while it stops at a user's raise, with the latest condition decided at the
    witnesses forced to its other side or, an equality, substituted; at most :data:`TRIES`
    more times.  A flip that reaches the same raise and decides no new condition on the way is
    undone (the raise was not its: ``ok = D % 4 == 0`` before an ``if D > 64`` and ``if not
    ok: raise``), and the one before it tried.  A guard with another way past it on its line
    (``E in (D, 1)``) is traced past that way too, and what it finds is added: a bug at
    ``E == D`` is not hidden by a trace at ``E == 1`` (:data:`TRIES` other ways at most, so
    ``1 + TRIES * (1 + TRIES)`` traces in all).  Where none gets past the raises, the
    first report (its note says where it stopped)."""
    first = trace(sig, {})
    others: list[_State] = []
    report, tracer, said = _past(trace, (*first, sig, {}, [], set()), others)
    if tracer.raised is not None and report.notes:
        return first[0]
    # the other ways past (``D in (32, 64, 128)``: each found on the way, TRIES at most, each
    # costing up to TRIES traces)
    for state in itertools.islice(others, TRIES):  # sees those appended on the way
        other, t, more = _past(trace, state, others)
        if t.raised is None or not other.notes:
            report.findings += [f for f in more + other.findings
                                if f not in said and f not in report.findings]
    if len(others) > TRIES:  # not traced: say so, the contract is proved on some ways only
        kind, (file, line) = others[TRIES][1].raised or ("", (None, None))
        report.notes.append(f"{len(others) - TRIES} more way(s) past the guard that raises "
                            f"{kind} at {os.path.basename(file or '')}:{line} not traced "
                            f"({TRIES + 1} are)")
    report.findings[:0] = said
    return report


def _past(trace: Callable[[Any, dict[str, tuple[bool, str]]], tuple[Any, tracing.Tracer]],
          state: _State, others: list[_State]) -> tuple[Any, tracing.Tracer,
                                                         list[tracing.Finding]]:
    """:func:`retraced`'s flips from ``state``: the last report, its tracer and what it
    assumed; each flip with another way past its guard noted in ``others``."""
    report, tracer, sig, forced, said, tried = state
    said, tried = list(said), set(tried)
    for _ in range(TRIES):
        text = next((t for t in reversed(tracer.guesses) if t not in tried), None)
        if tracer.raised is None or not report.notes or text is None:
            break
        kind, (file, line) = tracer.raised
        value, where, sides = tracer.guesses[text]
        # another condition undecided on the guard's line (``D in (64, 128)``, ``E == D or E
        # == 1``): this side gets past the raise, the code may accept the others' too
        alternative = any(w == where for t, (_, w, _) in tracer.guesses.items() if t != text)
        why = (f"one way past the code's {kind}" if alternative else
               f"the code raises {kind} otherwise") + ("" if (file, line) == where else
                                                     f" ({os.path.basename(file or '')}:{line})")
        a, op, b = sides or (Dim.const(0), "", Dim.const(0))
        order = _ORDER.get(op)
        equal = op in ("==", "!=") and value != (op == "==")  # forced: a == b
        division = tracer.remainder(a - b) if equal else None  # D % 4 == 0: D as 4*D_over4
        if division is not None and isinstance(division[1], int):
            n, k = division
            solved = _solved(sig, n, functools.partial(_quotient, n, k))
            cond = f"requires {n} divisible by {k}"
        elif order or (equal and division is None):
            # an order forced to the side the witnesses are not on: b - a - 1 >= 0 for a < b
            sign, strict = order or (1, 0)
            diff = sign * (b - a) - strict if not value else sign * (a - b) - (1 - strict)
            solved = _solved(sig, diff, lambda s: Dim.symbol(f"{s}_more") - 1) if order \
                else _solved(sig, a - b)
            if solved is None:
                break  # forced, a condition the algebra would not know: wrong checks after it
            cond = "assumes " + (f"not ({text})" if value else text)
        else:
            solved = None
        tried.add(text)
        before = report, tracer, sig, forced, list(said), set(tried)
        others += [before] if alternative else []
        if solved is None:  # a division in a product of sizes (H*W % 4 == 0): required
            forced = {**forced, text: (not value, why)}
        else:
            sig, words = solved
            said.append(tracing.Finding("assumption", f"{cond}: {why}; verified with {words}",
                                        *where))
        report, tracer = trace(sig, forced)
        if tracer.raised == before[1].raised and \
                tracer.guesses.keys() <= before[1].guesses.keys():
            # the same raise, and no condition it had not met: not this one's; undone
            report, tracer, sig, forced, said, _ = before
    return report, tracer, said
