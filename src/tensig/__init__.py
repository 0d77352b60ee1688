"""tensig: array shapes as a checked type system.

The core: OCANNL's generalized einsum notation (:func:`parse`), symbolic dimensions
(:func:`dims`, :mod:`tensig.core.dims`), three-row shapes (:class:`Shape`) and the
shape-inference engine (:func:`infer`), which every other layer asks instead of re-deriving shapes.
"""

from tensig import _moved
from tensig.check.decorator import print_bindings, shape_scope, shaped
from tensig.check.verify import Report, verify
from tensig.core.annotations import (
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
from tensig.core.dims import Condition, Dim, dim, dims
from tensig.core.errors import InconclusiveError, ShapeError, SpecSyntaxError, TensigError
from tensig.core.inference import Inferred, infer
from tensig.core.notation import Spec, parse
from tensig.core.shape_index import ShapeIndex, ShapeVar
from tensig.core.shapes import Shape
from tensig.execution.eager import (
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
from tensig.execution.padding import Padded, PaddingError, pad
from tensig.execution.price import price

_moved.install()

__all__ = ["BFloat16", "Bool", "Complex", "Complex64", "Complex128", "Condition", "Dim", "Float",
           "Float16", "Float32", "Float64", "InconclusiveError", "Inexact", "Inferred", "Int",
           "Int8", "Int16", "Int32", "Int64", "Integer", "Key", "Num", "Padded", "PaddingError",
           "PyTree", "Real", "Report", "RowArray", "Shape", "ShapeError", "ShapeIndex", "ShapeVar",
           "Shaped", "Spec", "SpecSyntaxError", "TensigError", "UInt", "UInt8", "UInt16", "UInt32",
           "UInt64", "concat", "dim", "dims", "einmax1", "einsum", "einsum1", "einsum_path",
           "infer", "outer_sum", "pad", "parse", "price", "print_bindings", "rows", "shape_scope",
           "shaped", "tropical", "verify"]
__version__ = "0.2.0.dev0"  # 0.2 moves the modules into layers (see tensig._moved)
