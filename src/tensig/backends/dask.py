"""The Dask adapter: ``dask.array``, chunks aligned for its blockwise einsum."""

from __future__ import annotations

from typing import Any

from tensig.backends._arrayapi import ArrayAPIBackend
from tensig.backends.base import register

__all__ = ["DaskBackend"]


@register
class DaskBackend(ArrayAPIBackend):
    name = "dask"
    modules = ("dask",)
    lazy = True

    def __init__(self) -> None:
        import dask.array as da

        self.da = self.xp = da

    def einsum(self, subscripts: str, *xs: Any) -> Any:
        # dask contracts block by block: a repeated index (a diagonal) needs its axes chunked
        # alike, and every occurrence of an index across operands too.
        subs = subscripts.split("->")[0].split(",")
        chunks: dict[str, tuple[int, ...]] = {}
        for sub, x in zip(subs, xs, strict=True):
            for c, ch in zip(sub, x.chunks, strict=True):
                chunks.setdefault(c, ch)
        aligned = []
        for sub, x in zip(subs, xs, strict=True):
            want = {i: chunks[c] for i, c in enumerate(sub) if x.chunks[i] != chunks[c]}
            aligned.append(x.rechunk(want) if want else x)
        # in the operands' result dtype, as numpy.einsum (an int8 sum wraps, a bool sum is a
        # logical or): dask sums the blocks' partial results in int64.  Casting the int64
        # total back is exact: integer sums wrap modulo 2^bits either way, and a count is
        # nonzero exactly when the logical or is true
        import numpy as np

        out = self.da.einsum(subscripts, *aligned)
        dtype = np.result_type(*[x.dtype for x in xs])
        return out if out.dtype == dtype else out.astype(dtype)

    def _sliding(self, x: Any, size: int, axis: int) -> Any:
        from dask.array.lib.stride_tricks import sliding_window_view

        return sliding_window_view(x, size, axis=axis)
