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

    # -- compiled routines: JAX arrays are immutable, so every store builds a new array -------
    @property
    def array_type(self) -> type:
        import jax

        return jax.Array  # type: ignore[no-any-return]

    def to_array(self, value: Any, device: Any = None) -> Any:
        if hasattr(value, "detach"):  # a torch tensor
            value = value.detach().cpu().numpy()
        x = self.jnp.asarray(value)
        if device is None:
            return x
        import jax

        if isinstance(device, str):  # "cpu", "gpu:1": a platform and an index
            platform, _, index = device.partition(":")
            device = jax.devices(platform)[int(index or 0)]
        return jax.device_put(x, device)

    def scatter_add(self, x: Any, index: tuple[Any, ...], v: Any) -> Any:
        return x.at[index].add(v)

    def add_rows(self, n: int, ids: Any, rows: Any) -> Any:
        return self.jnp.zeros((n, rows.shape[1]), dtype=rows.dtype).at[ids].add(rows)

    def on_host(self, x: Any) -> bool:
        return all(d.platform == "cpu" for d in x.devices())
