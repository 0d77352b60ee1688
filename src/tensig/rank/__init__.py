"""Rank polymorphism: Remora's frames, cells, boxes and primitives on real arrays.

A function expects arguments of some *cell* shape; applied to bigger arrays, each argument
splits into a *frame* (its leading axes) and cells, the function runs on every cell and the
results are assembled in the frame.  Frames agree by **prefix**, not by NumPy's suffix
broadcasting: README.md's "Rank polymorphism" section states the rules, with examples.  Types
(:func:`typeof`, :func:`check`) are written with :mod:`tensig.core.dims` indices and instantiate
at actual or symbolic shapes.

Cell ranks are naturals, ``None`` (the whole argument: an empty frame) or a complementary
``-k`` (all but the first ``k`` axes).  Reranking is Remora's eta-expansion: a reranked
function still lifts at its own ranks inside each new cell.
"""

from tensig.rank._boxes import *  # noqa: F403 (each module lists its public names in __all__)
from tensig.rank._lifting import *  # noqa: F403
from tensig.rank._primitives import *  # noqa: F403
from tensig.rank._types import *  # noqa: F403

# ruff: noqa: F405 (the names below come from the star imports)
# written out, not joined from the modules' __all__: a type checker reads only literal names
# here, and gives a client's ``from tensig.rank import *`` no others
__all__ = ["Arr", "Box", "FnType", "Fun", "Instance", "Lifted", "Overloaded", "Sigma", "Static",
           "antibase", "append", "apply", "as_lifted", "base", "behead", "check", "curtail", "drop",
           "equal", "filter", "fold", "fold_right", "head", "index", "iota", "iota_s", "iota_v",
           "iota_w", "itemize", "length", "lift", "nub", "nub_sieve", "principal_frame", "ravel",
           "reduce", "rerank", "reshape", "reverse", "rotate", "scan", "select", "shape_of", "tail",
           "take", "transpose", "typeof", "unbox"]
