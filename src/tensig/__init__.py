"""tensig: array shapes as a checked type system.

The core: OCANNL's generalized einsum notation (:func:`parse`), symbolic dimensions
(:mod:`tensig.dims`), three-row shapes (:class:`Shape`) and the shape-inference engine
(:func:`infer`), which every other layer asks instead of re-deriving shapes.
"""

import types as _types

from tensig import dims, verify
from tensig.annotations import (
    BFloat16,
    Bool,
    Complex,
    Complex64,
    Complex128,
    Float,
    Float16,
    Float32,
    Float64,
    Inexact,
    Int,
    Int8,
    Int16,
    Int32,
    Int64,
    Integer,
    Key,
    Num,
    PyTree,
    Real,
    Shaped,
    UInt,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
)
from tensig.dims import Condition, Dim, ShapeIndex, ShapeVar, dim
from tensig.errors import InconclusiveError, ShapeError, SpecSyntaxError, TensigError
from tensig.inference import Inferred, infer
from tensig.notation import Spec, parse
from tensig.ops import (
    RowArray,
    concat,
    einmax1,
    einsum,
    einsum1,
    einsum_path,
    outer_sum,
    rows,
    tropical,
)
from tensig.padding import Padded, PaddingError, pad
from tensig.price import price
from tensig.runtime import print_bindings, shape_scope, shaped
from tensig.shapes import Shape
from tensig.verify import Report


class _CallableModule(_types.ModuleType):
    """``tensig.dims`` is the module of symbolic dimensions and, called, ``dims.dims``."""

    def __call__(self, text: str) -> tuple[Dim, ...]:
        return self.dims(text)


dims.__class__ = _CallableModule


class _VerifyModule(_types.ModuleType):
    """``tensig.verify`` is the module and, called, :func:`tensig.verify.verify`."""

    def __call__(self, fn, signature=None, **kw):  # type: ignore[no-untyped-def]
        return self.verify(fn, signature, **kw)


verify.__class__ = _VerifyModule

__all__ = [
    "BFloat16",
    "Bool",
    "Complex",
    "Complex64",
    "Complex128",
    "Condition",
    "Dim",
    "Float",
    "Float16",
    "Float32",
    "Float64",
    "InconclusiveError",
    "Inexact",
    "Inferred",
    "Int",
    "Int8",
    "Int16",
    "Int32",
    "Int64",
    "Integer",
    "Key",
    "Num",
    "Padded",
    "PaddingError",
    "PyTree",
    "Real",
    "Report",
    "RowArray",
    "Shape",
    "ShapeError",
    "ShapeIndex",
    "ShapeVar",
    "Shaped",
    "Spec",
    "SpecSyntaxError",
    "TensigError",
    "UInt",
    "UInt8",
    "UInt16",
    "UInt32",
    "UInt64",
    "concat",
    "dim",
    "dims",
    "einmax1",
    "einsum",
    "einsum1",
    "einsum_path",
    "infer",
    "outer_sum",
    "pad",
    "parse",
    "price",
    "print_bindings",
    "rows",
    "shape_scope",
    "shaped",
    "tropical",
    "verify",
]
__version__ = "0.1.0"
