"""NumPy's API as an adapter base, shared by the NumPy, JAX and Dask adapters (``xp`` is
the library's namespace)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensig.backends.base import Backend, _adapter_class, to_numpy


class ArrayAPIBackend(Backend):
    """NumPy's API, shared by NumPy, JAX and Dask: ``xp`` is the library's namespace."""

    def einsum(self, subscripts: str, *xs: Any) -> Any:
        return self.xp.einsum(subscripts, *xs)

    def pad(self, x: Any, widths: Sequence[tuple[int, int]], value: float) -> Any:
        return self.xp.pad(x, list(widths), mode="constant", constant_values=value)

    def windows(self, x: Any, axis: int, size: int, step: int) -> Any:
        w = self._sliding(x, size, axis)
        if step != 1:
            index = [slice(None)] * w.ndim
            index[axis] = slice(None, None, step)
            w = w[tuple(index)]
        return w

    def _sliding(self, x: Any, size: int, axis: int) -> Any:
        raise NotImplementedError

    def amax(self, x: Any, axes: tuple[int, ...]) -> Any:
        return self.xp.max(x, axis=axes) if axes else x

    def broadcast_to(self, x: Any, shape: Sequence[int]) -> Any:
        return self.xp.broadcast_to(x, tuple(shape))

    def flatten(self, xs: Sequence[Any]) -> Any:
        return self.xp.concatenate([x.reshape(-1) for x in xs])

    def full(self, shape: Sequence[int], value: float, like: Any) -> Any:
        return self.xp.full(tuple(shape), value, dtype=like.dtype)

    def eye(self, n: int, like: Any) -> Any:
        return self.xp.eye(n, dtype=like.dtype)

    def eye_mask(self, n: int, like: Any) -> Any:
        import numpy

        return numpy.eye(n, dtype=bool)

    def where(self, mask: Any, a: Any, b: Any) -> Any:
        return self.xp.where(mask, a, b)

    def maximum(self, a: Any, b: Any) -> Any:
        return self.xp.maximum(a, b)

    # -- the rank layer -------------------------------------------------------------------------
    def asarray(self, x: Any, like: Any = None, device: Any = None) -> Any:
        if device not in (None, "cpu"):
            raise ValueError(f"device={device!r}: {self.name} arrays live on the CPU")
        if self.owns(x):
            return self.xp.asarray(x)
        kind: type = type(x)
        if _adapter_class(kind) is None and hasattr(x, "__array_function__"):
            return x  # an array answering NumPy's functions (verify's symbolic ones): as it is
        return self.xp.asarray(to_numpy(x))

    def flip(self, x: Any, axis: int) -> Any:
        return self.xp.flip(x, axis)

    def concat(self, xs: Sequence[Any], axis: int) -> Any:
        return self.xp.concatenate(list(xs), axis=axis)

    def stack(self, xs: Sequence[Any], axis: int = 0) -> Any:
        return self.xp.stack(list(xs), axis=axis)

    def take_along(self, x: Any, index: Any, axis: int) -> Any:
        return self.xp.take_along_axis(x, index, axis=axis)

    def arange(self, n: int, like: Any = None) -> Any:
        return self.xp.arange(n)

    def empty(self, shape: Sequence[int], dtype: Any) -> Any:
        return self.xp.zeros(tuple(shape), dtype=dtype)

    def fill(self, shape: Sequence[int], value: Any, like: Any = None) -> Any:
        return self.xp.full(tuple(shape), value)

    def result_dtype(self, xs: Sequence[Any]) -> Any:
        return self.xp.result_type(*xs) if xs else self.xp.float64

    # -- padded batches (tensig.execution.padding) ----------------------------------------------
    def astype(self, x: Any, dtype: Any) -> Any:
        return x.astype(dtype)

    def as_dtype(self, dtype: Any) -> Any:
        import numpy as np

        return np.dtype(dtype) if isinstance(dtype, str) else dtype

    def is_bool(self, dtype: Any) -> bool:
        import numpy as np

        return bool(dtype == np.bool_)

    def is_float(self, dtype: Any) -> bool:
        return bool(self.xp.issubdtype(dtype, self.xp.floating))

    def default_float(self) -> Any:
        return self.xp.float32

    def finite_min(self, dtype: Any) -> float:
        return float(self.xp.finfo(dtype).min)

    def max_along(self, x: Any, axis: int) -> Any:
        return self.xp.max(x, axis=axis)

    def pad_rows(self, seqs: Sequence[Any], mask: Any, on: Any, trailing: tuple[int, ...],
                 value: Any) -> Any:
        """One concatenation and one masked write, whatever the number of rows."""
        flat = self.concat(seqs, 0)
        out = self.xp.full((*mask.shape, *trailing), value, dtype=flat.dtype)
        return self.masked_set(out, mask, flat)

    def masked_set(self, out: Any, mask: Any, values: Any) -> Any:
        """``out`` with ``values`` written at ``mask`` (in place where the library can)."""
        out[mask] = values
        return out

    # -- the IR's primitives (tensig.execution.ir) ---------------------------------------------
    def relu(self, v: Any) -> Any:
        """``v`` where ``v >= 0``, else 0, NaN passing; the zero goes first because
        ``maximum`` returns its second operand when the two are equal (``relu(-0.0)`` is
        ``-0.0``, as torch's kernel gives)."""
        return self.xp.maximum(0, v)

    def take_rows(self, table: Any, ids: Any, shape: tuple[int, ...]) -> Any:
        return table[ids]

    def add_rows(self, n: int, ids: Any, rows: Any) -> Any:
        acc = self.xp.zeros((n, rows.shape[1]), dtype=rows.dtype)
        self.xp.add.at(acc, ids, rows)
        return acc
