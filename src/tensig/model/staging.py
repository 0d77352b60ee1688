"""A compiled routine as one traced function, where the backend compiles (JAX: ``jax.jit``;
the README's "Training" section says what it does and measures).

Step by step, JAX's dispatch costs about 25 ms a step of the two-moons MLP.  :class:`Staged`
traces the steps once into one function from the arrays read to those written, compiled by
the backend (:meth:`tensig.backends.base.Backend.fused`).  What it wrote comes back as a
dictionary, so the caller decides what to keep (a trainer drops a non-finite loss's update).
Value checks (ids in range) are made after the call, before anything is written; a step that
otherwise reads values cannot be traced, and the routine runs step by step.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tensig.backends import Backend
from tensig.execution.ir import WHOLE, Assign, Code, buffers_of, deferred_checks

__all__ = ["Staged", "inputs_of"]

Key = tuple[int, str]


def inputs_of(code: Code) -> list[Key]:
    """The buffers ``code`` may read before writing them whole (an initialising accumulation, a
    store under ``"."`` or of a :data:`~tensig.execution.ir.WHOLE` primitive): the inputs."""
    written: set[Key] = set()
    out: dict[Key, None] = {}
    for a in code:
        for b in buffers_of(a.expr):
            if b.key not in written:
                out[b.key] = None
        key = a.lhs.key
        whole = a.init or (a.accum is None and (a.logic == "." or a.expr.op in WHOLE))
        if key not in written and not whole:
            out[key] = None
        written.add(key)
    return list(out)


class Staged:
    """``steps`` (one per assignment of ``code``) as one compiled function of the store's arrays;
    ``traces`` counts the traces (arrays of the same shapes and dtypes trace once)."""

    def __init__(self, steps: Sequence[Callable[[Any], None]], code: Code, backend: Backend):
        self.steps, self.items, self.backend = list(steps), list(code), backend
        self.keys = inputs_of(code)
        self.traces = 0
        #: why the routine runs step by step (the first step that could not be traced)
        self.refused: str | None = None
        self._compiled: dict[bool, Callable[..., Any]] = {}
        #: per mode, the messages of the checks the traced steps deferred (ids in range)
        self._checks: dict[bool, list[str]] = {}

    def outputs(self, store: Any, given: Mapping[Key, Any] | None = None,
                feeds: Mapping[Key, Any] | None = None, rows: Any = None
                ) -> dict[Key, Any] | None:
        """The arrays the routine writes by key, the store untouched (``None``: untraceable).
        ``given``: arrays in place of the store's; ``feeds``: datasets whose rows ``rows`` are
        gathered in the compiled function.  Both come back among the outputs."""
        if self.refused is not None:
            return None
        given, feeds = given or {}, feeds or {}
        arrays = store.arrays
        inputs = {k: arrays[k] for k in self.keys
                  if k in arrays and k not in given and k not in feeds}
        training = bool(store.training)
        fn = self._compiled.get(training)
        if fn is None:
            fn = self._compiled[training] = self.backend.fused(self._function(store, training))
        try:
            written, flags = fn(inputs, given, feeds, rows)
        except self.backend.trace_errors:
            if self.refused is None:  # not raised by a step: the library's own error
                raise
            return None
        for (failed, value), message in zip(flags, self._checks[training], strict=True):
            if bool(failed):  # nothing written: the store is as it was
                raise IndexError(message.format(int(value)))
        return written

    def run(self, store: Any) -> bool:
        """Run the routine as one compiled call; ``False`` (nothing done) when untraceable."""
        out = self.outputs(store)
        if out is None:
            return False
        store.arrays.update(out)
        return True

    def _function(self, store: Any, training: bool) -> Callable[..., Any]:
        """The traced body: the steps on a scratch store; returns what they wrote and the flags
        of the checks they deferred."""
        make, device = type(store), store.device

        def body(inputs: dict[Key, Any], given: dict[Key, Any], feeds: dict[Key, Any],
                 rows: Any) -> tuple[dict[Key, Any], list[tuple[Any, Any]]]:
            self.traces += 1
            scratch = make(device)
            scratch.training = training
            scratch.arrays.update(inputs)
            scratch.arrays.update(given)
            for k, data in feeds.items():
                scratch.arrays[k] = data[rows]
            with deferred_checks() as checks:
                for step, item in zip(self.steps, self.items, strict=True):
                    try:
                        step(scratch)
                    except self.backend.trace_errors as e:
                        self._refuse(item, e)
                        raise
            self._checks[training] = [message for _, _, message in checks]
            written = {k: v for k, v in scratch.arrays.items() if inputs.get(k) is not v}
            return written, [(failed, value) for failed, value, _ in checks]

        return body

    def _refuse(self, item: Assign, error: BaseException) -> None:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        self.refused = (f"{item!r} reads array values, which {self.backend.name} cannot trace "
                        f"({type(error).__name__}: {first})")
        warnings.warn(f"this routine runs step by step, not as one compiled "
                      f"{self.backend.name} function (slower): {self.refused}",
                      RuntimeWarning, stacklevel=5)
