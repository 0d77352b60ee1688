"""Rank polymorphism: Remora's frames, cells, boxes and primitives on real arrays.

A function expects arguments of some *cell* shape (``dot`` expects two n-vectors).  Applied to
bigger arrays, each argument splits into a *frame* (its leading axes) and cells (its trailing
axes); the function runs on every cell and the results are assembled in the frame.  The
frames must agree by **prefix**: the longest frame is the *principal frame*, every other frame
must be a prefix of it (sizes equal exactly; a size-1 axis does not stretch), and an argument
with a shorter frame has its cells replicated over the missing trailing frame axes.  So in
Remora's ``[10 100] + [[1 2][3 4]]`` the vector's frame ``(2,)`` is a prefix of the matrix's
``(2, 2)``: ``10`` pairs with the first *row*, where NumPy, aligning trailing axes, pairs it
with each row's first *column*:

>>> import numpy as np
>>> import tensig
>>> from tensig import rank
>>> add = rank.lift(np.add)                 # scalar cells: both frames are the full shapes
>>> add(np.array([10, 100]), np.array([[1, 2], [3, 4]]))
array([[ 11,  12],
       [103, 104]])
>>> try:
...     add(np.array([1, 2, 3]), np.ones((2, 3)))
... except tensig.ShapeError as e:
...     print(*e.reason.split(" is "), sep="\\nis ")
...     print(e.hint[:96])
add: frame (3,) of argument 0 (arg0)
is not a prefix of the principal frame (2, 3) from argument 1 (arg1)
Remora matches frames from the left (prefix agreement) and a size-1 axis does not stretch; NumPy

The pieces:

- :func:`lift`, :func:`rerank`, :func:`apply` (arrays of functions) -- application;
- :class:`Box`, :func:`unbox` -- dependent sums (arrays whose shape is hidden);
- :func:`typeof`, :func:`check` -- types written with :mod:`tensig.core.dims` indices, instantiated
  at actual or symbolic shapes (:class:`FnType`, :class:`Instance`, :class:`Arr`,
  :class:`Sigma`);
- the primitives (``head`` ... ``antibase``), each a lifted function with its Remora type.

Cell ranks are naturals, ``None`` (the whole argument: an empty frame) or a complementary
``-k`` (all but the first ``k`` axes).  Reranking is Remora's eta-expansion: a reranked
function still lifts at its own ranks inside each new cell.
"""

from tensig.rank import _primitives
from tensig.rank._boxes import Box, unbox
from tensig.rank._lifting import (
    Lifted,
    Overloaded,
    apply,
    as_lifted,
    check,
    lift,
    principal_frame,
    rerank,
    typeof,
)
from tensig.rank._primitives import *  # noqa: F403 (the primitives, listed in their __all__)
from tensig.rank._types import Arr, FnType, Fun, Instance, Sigma, Static

__all__ = [
    "Arr",
    "Box",
    "FnType",
    "Fun",
    "Instance",
    "Lifted",
    "Overloaded",
    "Sigma",
    "Static",
    "apply",
    "as_lifted",
    "check",
    "lift",
    "principal_frame",
    "rerank",
    "typeof",
    "unbox",
    *_primitives.__all__,
]
