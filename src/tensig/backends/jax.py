"""The JAX adapter: ``jax.numpy``; windows as gathers (JAX has no strided views)."""

from __future__ import annotations

from typing import Any

from tensig.backends._arrayapi import ArrayAPIBackend
from tensig.backends.base import register

__all__ = ["JaxBackend"]


@register
class JaxBackend(ArrayAPIBackend):
    name = "jax"
    modules = ("jax", "jaxlib")

    def __init__(self) -> None:
        import jax.numpy as jnp

        self.jnp = self.xp = jnp

    def windows(self, x: Any, axis: int, size: int, step: int) -> Any:
        # A gather: JAX has no strided views; XLA fuses the gather into the consumer.
        n = (x.shape[axis] - size) // step + 1
        jnp = self.jnp
        idx = jnp.arange(n)[:, None] * step + jnp.arange(size)[None, :]
        w = jnp.take(x, idx, axis=axis)  # axis -> (n, size) in place
        return jnp.moveaxis(w, axis + 1, -1)

    def vmap(self) -> Any:
        import jax

        return jax.vmap

    def masked_set(self, out: Any, mask: Any, values: Any) -> Any:
        return out.at[mask].set(values)  # JAX arrays are immutable
