"""The few array operations the rank layer needs, for NumPy, PyTorch and JAX.

Chosen by the type of the arrays (the module their type comes from); torch and jax are imported
only when an array of theirs shows up, so importing :mod:`tensig.rank` needs NumPy alone.
Results stay the kind of array that came in.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from tensig.backends import library_of

__all__ = ["Backend", "backend_of", "is_array"]


class Backend:
    """NumPy-like operations over one array library (NumPy itself and ``jax.numpy``)."""

    def __init__(self, name: str, xp: Any):
        self.name = name
        self.xp = xp

    def __repr__(self) -> str:
        return f"Backend({self.name!r})"

    # -- conversions ---------------------------------------------------------------------------
    def asarray(self, x: Any, like: Any = None) -> Any:
        """``x`` as an array of this library (on ``like``'s device when given)."""
        return self.xp.asarray(x)

    def owns(self, x: Any) -> bool:
        """Whether ``x`` is already an array of this library."""
        return library_of(type(x)) == self.name

    def ufunc(self, op: np.ufunc) -> Any:
        """This library's version of a NumPy ufunc, found by name (``np.add`` -> ``torch.add``)."""
        if self.name == "numpy":
            return op
        found = getattr(self.xp, op.__name__, None)
        if found is None:
            raise TypeError(f"{self.name} has no function named {op.__name__!r} to stand in for "
                            f"the NumPy ufunc; pass a {self.name} function with vectorized=True")
        return found

    # -- shape plumbing --------------------------------------------------------------------------
    def reshape(self, x: Any, shape: Sequence[int]) -> Any:
        return x.reshape(tuple(shape))

    def broadcast_to(self, x: Any, shape: Sequence[int]) -> Any:
        shape = tuple(shape)
        return x if tuple(x.shape) == shape else self.xp.broadcast_to(x, shape)

    def permute(self, x: Any, axes: Sequence[int]) -> Any:
        return self.xp.transpose(x, tuple(axes))

    def flip(self, x: Any, axis: int) -> Any:
        return self.xp.flip(x, axis)

    def concat(self, xs: Sequence[Any], axis: int) -> Any:
        return self.xp.concatenate(list(xs), axis=axis)

    def stack(self, xs: Sequence[Any], axis: int = 0) -> Any:
        return self.xp.stack(list(xs), axis=axis)

    def take_along(self, x: Any, index: Any, axis: int) -> Any:
        return self.xp.take_along_axis(x, index, axis=axis)

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        return self.xp.where(cond, a, b)

    # -- constructors ----------------------------------------------------------------------------
    def arange(self, n: int, like: Any = None) -> Any:
        return self.xp.arange(n)

    def empty(self, shape: Sequence[int], dtype: Any) -> Any:
        return self.xp.zeros(tuple(shape), dtype=dtype)

    def full(self, shape: Sequence[int], value: Any, like: Any = None) -> Any:
        return self.xp.full(tuple(shape), value)

    def result_dtype(self, xs: Sequence[Any]) -> Any:
        return self.xp.result_type(*xs) if xs else self.xp.float64

    def stack_cells(self, cells: list[Any], frame: tuple[int, ...], cell: tuple[int, ...]) -> Any:
        """One array of shape ``frame + cell`` from cells listed in row-major frame order."""
        if not cell and self.name == "numpy":
            return np.asarray(cells).reshape(frame)
        like = next((c for c in cells if self.owns(c)), None)
        return self.reshape(self.stack([self.asarray(c, like) for c in cells]), frame + cell)

    def vmap(self) -> Any:
        return None


class _Torch(Backend):
    """PyTorch: the NumPy names that differ, and ``torch.vmap``."""

    def __init__(self) -> None:
        import torch

        super().__init__("torch", torch)

    def asarray(self, x: Any, like: Any = None) -> Any:
        if isinstance(x, self.xp.Tensor):
            return x
        return self.xp.as_tensor(np.asarray(x), device=getattr(like, "device", None))

    def broadcast_to(self, x: Any, shape: Sequence[int]) -> Any:
        shape = tuple(shape)
        return x if tuple(x.shape) == shape else x.expand(shape)

    def permute(self, x: Any, axes: Sequence[int]) -> Any:
        return x.permute(*axes)

    def flip(self, x: Any, axis: int) -> Any:
        return self.xp.flip(x, (axis,))

    def concat(self, xs: Sequence[Any], axis: int) -> Any:
        xs = [self.asarray(x) for x in xs]
        dtype = functools.reduce(self.xp.promote_types, [x.dtype for x in xs])
        return self.xp.cat([x.to(dtype) for x in xs], dim=axis)

    def stack(self, xs: Sequence[Any], axis: int = 0) -> Any:
        return self.xp.stack(list(xs), dim=axis)

    def take_along(self, x: Any, index: Any, axis: int) -> Any:
        return self.xp.take_along_dim(x, index, dim=axis)

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        return self.xp.where(self.asarray(cond), self.asarray(a), self.asarray(b))

    def arange(self, n: int, like: Any = None) -> Any:
        device = getattr(like, "device", None)
        return self.xp.arange(n, device=device)

    def empty(self, shape: Sequence[int], dtype: Any) -> Any:
        return self.xp.zeros(tuple(shape), dtype=dtype)

    def full(self, shape: Sequence[int], value: Any, like: Any = None) -> Any:
        device = getattr(like, "device", None)
        return self.xp.full(tuple(shape), value, device=device)

    def result_dtype(self, xs: Sequence[Any]) -> Any:
        if not xs:
            return self.xp.get_default_dtype()
        return functools.reduce(self.xp.promote_types, [self.asarray(x).dtype for x in xs])

    def vmap(self) -> Any:
        return self.xp.vmap


class _Jax(Backend):
    def __init__(self) -> None:
        import jax.numpy as jnp

        super().__init__("jax", jnp)

    def vmap(self) -> Any:
        import jax

        return jax.vmap


@functools.cache
def _backend_named(name: str) -> Backend:
    if name == "torch":
        return _Torch()
    if name == "jax":
        return _Jax()
    return Backend("numpy", np)


def backend_of(xs: Sequence[Any]) -> Backend:
    """The backend of the first torch or jax array among ``xs``; NumPy otherwise.

    >>> backend_of([np.zeros(2), 3.0])
    Backend('numpy')
    """
    for x in xs:
        lib = library_of(type(x))
        if lib in ("torch", "jax"):
            return _backend_named(lib)
    return _backend_named("numpy")


def is_array(x: Any) -> bool:
    """Whether ``x`` is an array of a supported library (not a list, scalar or box).

    >>> is_array(np.zeros(2)), is_array([1, 2]), is_array(3)
    (True, False, False)
    """
    if isinstance(x, np.ndarray):
        return True
    lib = library_of(type(x))
    return lib in ("torch", "jax") and hasattr(x, "shape")

