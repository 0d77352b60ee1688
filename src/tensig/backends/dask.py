"""The Dask adapter: ``dask.array``, chunks aligned for its blockwise einsum."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tensig.backends._plans import matmul_plan, tensordot_plan
from tensig.backends.base import Backend, backend_for, check_ids, register, to_numpy

__all__ = ["DaskBackend"]


@register
class DaskBackend(Backend):
    name = "dask"
    modules = ("dask",)
    array_name = "Array"
    lazy = True
    compiles = True

    def __init__(self) -> None:
        import dask.array as da

        self.da = self.xp = da

    def einsum(self, subscripts: str, *xs: Any) -> Any:
        # dask contracts block by block: every occurrence of an index needs the chunks of
        # its first (``rechunk`` returns an array already chunked so as it is)
        subs = subscripts.split("->")[0].split(",")
        chunks: dict[str, tuple[int, ...]] = {}
        for sub, x in zip(subs, xs, strict=True):
            for c, ch in zip(sub, x.chunks, strict=True):
                chunks.setdefault(c, ch)
        aligned = [x.rechunk({i: chunks[c] for i, c in enumerate(sub)})
                   for sub, x in zip(subs, xs, strict=True)]
        return self._in_result_dtype(self.da.einsum(subscripts, *aligned), xs)

    def contraction(self, subscripts: str, shapes: Sequence[tuple[int, ...]]) -> Any:
        """Two operands as one ``da.tensordot`` (``da.matmul`` when batched): a BLAS call per
        block, where ``da.einsum`` loops (9x slower on a 4000x3000 @ 3000x2000 product)."""
        if len(shapes) != 2 or not all(n > 0 for shape in shapes for n in shape):
            return super().contraction(subscripts, shapes)  # nan: unknown; 0: dask's reshape
            # of an empty array fails (a reduce of no sizes) where its einsum does not
        plan = tensordot_plan(self.da.tensordot, subscripts, self.result_dtype) or \
            matmul_plan(self.da.matmul, subscripts, shapes, self.result_dtype)
        if plan is None:
            return super().contraction(subscripts, shapes)
        return lambda x, y: self._in_result_dtype(plan(x, y), (x, y))

    def windows(self, x: Any, axis: int, size: int, step: int) -> Any:
        if 0 in x.shape or x.shape[axis] < size:  # no cells, or no window (an empty axis padded)
            return self._no_cells("windows", x, axis, size, step)
        return super().windows(x, axis, size, step)

    def pad(self, x: Any, widths: Sequence[tuple[int, int]], value: float) -> Any:
        if 0 in x.shape:
            return self._no_cells("pad", x, widths, value)
        return super().pad(x, widths, value)

    def amax(self, x: Any, axes: tuple[int, ...]) -> Any:
        # Dask's (2, 5, 4, 0) over (0, 1) computes (2, 0), not (4, 0): an empty kept axis, so
        # NumPy's empty result; an empty reduced axis alone: the base's lazy fill of the rest
        if axes and 0 in [n for i, n in enumerate(x.shape) if i not in axes]:
            return self._no_cells("amax", x, axes)
        return super().amax(x, axes)

    def _no_cells(self, method: str, x: Any, *args: Any) -> Any:
        """The NumPy adapter's ``method`` on an empty array of ``x``'s shape, as a Dask array:
        Dask's windows, pad and max go wrong on an axis of size 0, NumPy's do not."""
        empty = np.empty(x.shape, x.dtype)
        return self.da.from_array(getattr(backend_for(np.ndarray), method)(empty, *args), chunks=-1)

    # -- compiled routines: lazy arrays; a store's assignments build the task graph ----------
    def asarray(self, x: Any, like: Any = None, device: Any = None) -> Any:
        if device is not None:
            raise ValueError(f"device={device!r}: Dask places chunks by its scheduler")
        return x if self.owns(x) else self.da.from_array(to_numpy(x))

    def scatter_add(self, x: Any, index: tuple[Any, ...], v: Any) -> Any:
        # dask's item assignment records a task on the same object: the sum is built first
        x = x.copy()
        x[index] = x[index] + v
        return x

    def take_rows(self, table: Any, ids: Any, shape: tuple[int, ...]) -> Any:
        """By flat ids: Dask indexes by a lazy integer array of one axis only (2-d ids fail an
        assertion inside it)."""
        return table[self.da.asarray(ids).reshape(-1)].reshape(shape)

    def _add_rows(self, n: int, ids: Any, rows: Any) -> Any:
        """A one-hot product (no scatter kernel; exact), the ids checked when the graph runs."""
        ids = self.da.asarray(ids).reshape(-1).map_blocks(check_ids, n, "add_rows")
        hot = ids[:, None] == self.da.arange(n)[None, :]
        return self.einsum("iv,in->vn", hot.astype(rows.dtype), rows)

    def on_host(self, x: Any) -> bool:
        return False  # reading a value computes the task graph
