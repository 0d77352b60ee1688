"""tensig: array shapes as a checked type system.

The core: OCANNL's generalized einsum notation (:func:`parse`), symbolic dimensions
(:mod:`tensig.dims`), three-row shapes (:class:`Shape`) and the shape-inference engine
(:func:`infer`), which every other layer asks instead of re-deriving shapes.
"""

import types as _types

from tensig import dims
from tensig.dims import Condition, Dim, ShapeIndex, ShapeVar, dim
from tensig.errors import InconclusiveError, ShapeError, SpecSyntaxError, TensigError
from tensig.inference import Inferred, infer
from tensig.notation import Spec, parse
from tensig.ops import RowArray, concat, einmax1, einsum, einsum1, outer_sum, rows, tropical
from tensig.shapes import Shape


class _CallableModule(_types.ModuleType):
    """``tensig.dims`` is the module of symbolic dimensions and, called, ``dims.dims``."""

    def __call__(self, text: str) -> tuple[Dim, ...]:
        return self.dims(text)


dims.__class__ = _CallableModule

__all__ = [
    "Condition",
    "Dim",
    "InconclusiveError",
    "Inferred",
    "RowArray",
    "Shape",
    "ShapeError",
    "ShapeIndex",
    "ShapeVar",
    "Spec",
    "SpecSyntaxError",
    "TensigError",
    "concat",
    "dim",
    "dims",
    "einmax1",
    "einsum",
    "einsum1",
    "infer",
    "outer_sum",
    "parse",
    "rows",
    "tropical",
]
__version__ = "0.1.0"
