"""``@tensig.shaped``: check every call against a function's shape annotations.

At decoration time the annotations are read once (:func:`tensig.core.annotations.signature_of`)
and compiled twice: to straight-line Python (:mod:`tensig.check.fast_path`: about 1.5 us per call
for two numpy arguments and a return value, ``bench/bench_runtime.py``) that only accepts or
defers, and for the interpreter (:mod:`tensig.check.interpreter`), which decides every call the
fast path does not plainly accept and says where each size was bound
(:mod:`tensig.check.signature_error`).  A differential test checks that both accept the same calls.

>>> import numpy as np
>>> from tensig.core.annotations import Float
>>> @shaped
... def pool(x: Float[np.ndarray, "B T d"]) -> Float[np.ndarray, "B d"]:
...     return x.mean(axis=0)  # the wrong axis: T should go, not B
>>> pool(np.zeros((3, 5, 7))).shape
Traceback (most recent call last):
...
tensig.check.signature_error.SignatureError: pool(): the return value axis 0 ('B') has size 5, but B = 3 was bound by argument 'x' axis 0
    B d
    ^
  the return value has shape (5, 7)
  B = 3: bound by argument 'x' axis 0 (shape (3, 5, 7))
hint: 5 is the size of T (bound by argument 'x' axis 1): are B and T mixed up (a wrong axis or a swap)?

The annotation syntax is the README's ("Shape annotations"); the binding rules it leaves to
here: a name binds at its first occurrence (arguments in signature order, then the return
value); an expression with several unknowns waits for later arguments, and one they never
decide is skipped; at most one unbound variadic per argument can be split off; a size that is
not an integer (a dask array's ``nan``) is not checked; ``None`` passes for ``Optional``
annotations and ``None`` defaults.

Under ``torch.compile`` the check is **skipped**, so dynamo traces only the body and
``fullgraph=True`` holds (run the function eagerly in tests to check it).  Under ``jax.jit`` it
**runs at trace time** (tracers have static shapes): once per compilation, free afterwards.
"""  # noqa: E501

from __future__ import annotations

import contextvars
import functools
import inspect
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar, overload

from tensig.check.fast_path import _FAST_FRAMES, _UNBOUND, _generate
from tensig.check.interpreter import (
    _CALL_CODE,
    _Bindings,
    _check_value,
    _Checker,
    _program,
    match_shape,
)
from tensig.check.signature_error import _ARGS, SignatureError, _Mismatch
from tensig.core.annotations import ShapeSpecMarker, install_instance_check, signature_of
from tensig.core.dimcode import compile_dim

__all__ = ["SignatureError", "compile_dim", "instance_check", "match_shape", "print_bindings",
           "shape_scope", "shaped"]

F = TypeVar("F", bound=Callable[..., Any])


#: the bindings of the current call (isinstance, shape_scope, print_bindings)
_SCOPE: contextvars.ContextVar[tuple[Any, dict[str, Any]] | None] = \
    contextvars.ContextVar("tensig_shape_scope", default=None)
_EXTRA = threading.local()


class shape_scope:
    """A scope of bindings for ``isinstance`` checks (jaxtyping's ``jaxtyped("context")``).

    Inside, ``isinstance(x, Float[np.ndarray, "B T"])`` binds ``B`` and ``T`` and later checks
    must agree; ``with`` yields the dict of bindings.  Every ``@shaped`` call is a scope of its
    own (as jaxtyping's memo).

    >>> import numpy as np
    >>> from tensig.core.annotations import Float
    >>> with shape_scope() as sizes:
    ...     isinstance(np.zeros((2, 3)), Float[np.ndarray, "B T"]), sizes
    (True, {'B': 2, 'T': 3})
    >>> with shape_scope():
    ...     isinstance(np.zeros((2, 3)), Float[np.ndarray, "B T"])
    ...     isinstance(np.zeros((3, 3)), Float[np.ndarray, "B T"])
    True
    False
    """

    def __init__(self) -> None:
        self.env: dict[str, Any] = {}
        self.token: Any = None

    def __enter__(self) -> dict[str, Any]:
        self.token = _SCOPE.set((sys._getframe(1), self.env))
        return self.env

    def __exit__(self, *exc: object) -> None:
        _SCOPE.reset(self.token)


def _scope() -> tuple[dict[str, Any], dict[str, Any]]:
    """``(bindings, sink)`` of the innermost checked call or scope around the caller (empty
    dicts outside any).

    The interpreter's and ``shape_scope``'s bindings are one dict (``sink is bindings``); a
    generated wrapper's are its local variables, read from its frame, and new bindings go to a
    side table for that frame (dropped once the frame is no longer on the stack).
    """
    scope = _SCOPE.get()
    table = _EXTRA.__dict__.setdefault("frames", {})  # id(frame) -> (frame, its new bindings)
    frame: FrameType | None = sys._getframe(2)
    live: set[int] = set()
    found: tuple[dict[str, Any], dict[str, Any]] | None = None
    while frame is not None:
        live.add(id(frame))
        code = frame.f_code
        if found is None:
            if scope is not None and frame is scope[0]:
                found = scope[1], scope[1]
            elif code is _CALL_CODE:
                env = getattr(frame.f_locals.get("state"), "env", {})
                found = env, env
            elif code in _FAST_FRAMES:
                values = frame.f_locals
                env = {name: values[local] for name, local in _FAST_FRAMES[code]
                       if values.get(local, _UNBOUND) is not _UNBOUND}
                _, extra = table.setdefault(id(frame), (frame, {}))
                found = {**env, **extra}, extra
        frame = frame.f_back
    for key in [k for k in table if k not in live]:
        del table[key]
    return found or ({}, {})


def instance_check(obj: Any, array_type: Any, marker: ShapeSpecMarker) -> bool:
    """``isinstance(obj, Float[ArrayType, "B T"])``: type, dtype and shape, with the current
    call's bindings (inside a checked call or a :func:`shape_scope`), which a fit extends."""
    if isinstance(array_type, type) and not isinstance(obj, array_type) \
            and not (marker.scalar is not None and isinstance(obj, marker.scalar)):
        return False
    env, sink = _scope()
    trial = _Bindings(env)
    try:
        _check_value(obj, "isinstance", _program(marker.shape), marker, False, trial)
        trial.resolve()
    except _Mismatch:
        return False
    sink.update((k, v) for k, v in trial.env.items() if k not in env)
    return True


install_instance_check(instance_check)


def print_bindings() -> None:
    """Print the sizes bound so far in the current checked call (jaxtyping's
    ``print_bindings``), for debugging."""
    env = {k: v for k, v in _scope()[0].items() if k != _ARGS and not k.startswith("#")}
    if not env:
        print("No sizes are bound here (call print_bindings() inside a @shaped function).")
        return
    print("The current values of each size in the shape annotations:")
    for name, value in env.items():
        shown = f"*{name}" if isinstance(value, tuple) else name
        print(f"{shown}={value}")


def _wrap(fn: Any, check_return: bool, localns: dict[str, Any] | None = None,
          compiled: bool = True) -> Any:
    if isinstance(fn, classmethod | staticmethod):  # @shaped above @classmethod
        return type(fn)(_wrap(fn.__func__, check_return, localns, compiled))
    if isinstance(fn, property):
        get, put, delete = (None if f is None else _wrap(f, check_return, localns, compiled)
                            for f in (fn.fget, fn.fset, fn.fdel))
        return property(get, put, delete, fn.__doc__)
    if inspect.isclass(fn):  # a dataclass: its __init__ checks the annotated fields
        fn.__init__ = _wrap(fn.__init__, check_return, localns, compiled)  # type: ignore[method-assign]
        return fn
    if not callable(fn):
        raise TypeError(f"@shaped decorates a function, not {fn!r}")
    sig = signature_of(fn, localns)
    # nothing to check is a no-op, as jaxtyping's, that still opens a scope for isinstance
    wrapper = functools.wraps(fn)(_generate(_Checker(fn, sig, check_return), compiled))
    wrapper.__dict__["__tensig_signature__"] = sig
    return wrapper


@overload
def shaped(fn: F, /) -> F: ...


@overload
def shaped(*, check_return: bool = True, compiled: bool = True) -> Callable[[F], F]: ...


def shaped(fn: F | None = None, /, *, check_return: bool = True,
           compiled: bool = True) -> F | Callable[[F], F]:
    """Check every call of ``fn`` against its ``Shaped``/``Float``/``Int``/``Bool`` annotations.

    Use as ``@shaped`` or ``@shaped(check_return=False)``; ``compiled=False`` runs the
    interpreter on every call (the same answers, a few times slower).  Names bind across the
    arguments and the return value, per call; a mismatch raises :class:`SignatureError` (a
    :class:`tensig.ShapeError`, so a ``ValueError``) naming the function, argument, axis,
    expected item, actual size and where the name was bound.  A value without ``.shape`` (or
    ``None`` where the annotation is not ``Optional``) raises ``TypeError``.  The parsed
    signature is kept as ``wrapper.__tensig_signature__``.

    >>> import numpy as np
    >>> from tensig.core.annotations import Float
    >>> @shaped
    ... def attention(q: Float[np.ndarray, "B T d"], k: Float[np.ndarray, "B T d"]):
    ...     return q @ k.transpose(0, 2, 1)
    >>> attention(np.zeros((2, 16, 8)), np.zeros((2, 16, 8))).shape
    (2, 16, 16)
    >>> attention(np.zeros((2, 16, 8)), np.zeros((2, 12, 8)))
    Traceback (most recent call last):
    ...
    tensig.check.signature_error.SignatureError: attention(): argument 'k' axis 1 ('T') has size 12, but T = 16 was bound by argument 'q' axis 1
        B T d
          ^
      argument 'k' has shape (2, 12, 8)
      T = 16: bound by argument 'q' axis 1 (shape (2, 16, 8))
    """  # noqa: E501
    # The defining scope: string annotations (PEP 563) may name its local variables.
    localns = dict(sys._getframe(1).f_locals)
    if fn is None:
        return lambda f: _wrap(f, check_return, localns, compiled)
    return _wrap(fn, check_return, localns, compiled)
