"""einops on symbolic arrays: einops finds its backend by the tensor's type, so give it one.

:func:`register` defines (once, and only when einops is already imported) a subclass of
einops' ``AbstractBackend`` whose ``framework_name`` is this package's symbolic module, so
einops' own discovery (``AbstractBackend.__subclasses__`` filtered by ``sys.modules``) picks it
for :class:`~tensig.check.tracer.SymArray`.  Every backend call maps to the symbolic operation of
the same meaning, so ``rearrange``, ``reduce``, ``repeat``, ``einsum`` and einops' layers keep
all of verify's checks (a ``(h d)`` split records ``d`` divisible by ``h``).
"""

from __future__ import annotations

import sys
from typing import Any

from tensig.check import sym_functions, tracing
from tensig.check import tracer as S

__all__ = ["register"]

_REGISTERED: list[type] = []


def register() -> None:
    """Make einops accept symbolic arrays (a no-op without einops or when done before)."""
    if _REGISTERED or "einops" not in sys.modules:
        return
    from einops._backends import AbstractBackend

    class SymbolicBackend(AbstractBackend):
        framework_name = S.__name__

        def is_appropriate_type(self, tensor: Any) -> bool:
            return isinstance(tensor, S.SymArray)

        def shape(self, x: Any) -> list[Any]:
            return list(x.shape)  # a list: einops' shape cache compares sizes, never here

        def reshape(self, x: Any, shape: Any) -> S.SymArray:
            return S.reshape(x, list(shape))

        def transpose(self, x: Any, axes: Any) -> S.SymArray:
            return S.permute(x, list(axes))

        def reduce(self, x: Any, operation: str, axes: Any) -> S.SymArray:
            kind = "f" if operation == "mean" else None
            return S.reduce_(x, tuple(axes), False, kind)

        def stack_on_zeroth_dimension(self, tensors: list[Any]) -> S.SymArray:
            return sym_functions.stack(tensors, 0)

        def add_axis(self, x: Any, new_position: int) -> S.SymArray:
            return S.expand_dims(x, new_position)

        def tile(self, x: Any, repeats: Any) -> S.SymArray:
            return S._sym(x).repeat(*repeats)

        def concat(self, tensors: list[Any], axis: int) -> S.SymArray:
            return sym_functions.concatenate(tensors, axis)

        def is_float_type(self, x: Any) -> bool:
            return S._sym(x).kind == "f"

        def arange(self, start: Any, stop: Any) -> S.SymArray:
            return sym_functions._arange(start, stop)

        def einsum(self, pattern: str, *x: Any) -> S.SymArray:
            return sym_functions.einsum(pattern, *x)

        def layers(self) -> Any:
            raise tracing.Unsupported("einops layers built from symbolic arrays")

    _REGISTERED.append(SymbolicBackend)
