"""einops on symbolic arrays: einops finds its backend by the tensor's type, so give it one.

:func:`register` defines (once einops is imported) a subclass of einops' ``AbstractBackend``
whose ``framework_name`` is the symbolic module, so einops' own discovery picks it for
:class:`~tensig.check.tracer.SymArray`.  Each backend call is the symbolic operation of the same
meaning, so einops keeps all of verify's checks (a ``(h d)`` split records ``d`` divisible by
``h``).
"""

from __future__ import annotations

import re
import sys
from typing import Any

from tensig.check import sym_functions, tracing
from tensig.check import tracer as S

__all__ = ["register", "reported"]

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

        # einops passes these their arguments as the symbolic functions take them
        reshape = staticmethod(S.reshape)
        transpose = staticmethod(S.permute)
        add_axis = staticmethod(S.expand_dims)
        stack_on_zeroth_dimension = staticmethod(sym_functions.stack)
        concat = staticmethod(sym_functions.concatenate)
        einsum = staticmethod(sym_functions.einsum)
        arange = staticmethod(sym_functions._arange)
        tile = staticmethod(S.tile)

        def reduce(self, x: Any, operation: str, axes: Any) -> S.SymArray:
            kind = "f" if operation == "mean" else None
            return S.reduce_(x, tuple(axes), False, kind)

        def is_float_type(self, x: Any) -> bool:
            return S._sym(x).kind == "f"

        def layers(self) -> Any:
            raise tracing.Unsupported("einops layers built from symbolic arrays")

    _REGISTERED.append(SymbolicBackend)


def reported(e: BaseException, where: tracing.Where) -> bool:
    """Report an ``EinopsError`` raised on symbolic input as an ``op-shape`` finding at
    ``where``: einops checks only sizes that are ints (a rank, the pattern), so it rejects the
    operands at every size.  One raised from another error is not einops' check (``unpack``
    wraps whatever its reshape raised, a trace's ``Unsupported`` too): a note, not an error."""
    einops = sys.modules.get("einops")
    if einops is None or not isinstance(e, einops.EinopsError) or where[0] is None or \
            e.__cause__ is not None:
        return False
    text = re.sub(r"SymSize\(((?:[^()]|\([^()]*\))*)\)", r"\1", str(e))  # the size's name
    text = " ".join(text.replace("Additional info: {}.", "").split())
    tracing.tracer().report("op-shape", f"einops rejects the operands: {text}", where)
    return True
