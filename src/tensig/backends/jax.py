"""The JAX adapter: ``jax.numpy``; windows as gathers (JAX has no strided views)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tensig.backends._arrayapi import ArrayAPIBackend
from tensig.backends.base import register

__all__ = ["JaxBackend"]


@register
class JaxBackend(ArrayAPIBackend):
    name = "jax"
    modules = ("jax", "jaxlib")
    compiles = True
    has_devices = True

    def __init__(self) -> None:
        import jax.numpy as jnp

        self.jnp = self.xp = jnp

    def fused(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        import jax

        return jax.jit(fn)

    def conv(self, x: Any, w: Any, strides: Sequence[int], dilations: Sequence[int],
             pads: Sequence[tuple[int, int]], channels_last: bool = False) -> Any:
        """``lax.conv_general_dilated``: ``x`` is (N, C, *spatial), ``w`` is (O, C, *kernel),
        as the torch adapter's :meth:`TorchBackend.conv` (XLA chooses the memory layout, so
        ``channels_last`` changes nothing); uneven padding is native."""
        from jax import lax

        return lax.conv_general_dilated(x, w, tuple(strides), [tuple(p) for p in pads],
                                        rhs_dilation=tuple(dilations))

    def conv_accepts(self, x: Any, w: Any) -> bool:
        """XLA's conv takes floating operands of one dtype (integers take the windows path,
        which sums in the operands' dtype as numpy.einsum does)."""
        return bool(x.dtype == w.dtype and self.jnp.issubdtype(x.dtype, self.jnp.floating))

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

        return jax.Array

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

    def device(self, name: str | None) -> Any:
        """A platform and an index (``"gpu"``, ``"cpu:0"``), resolved by :meth:`to_array`;
        ``None``: JAX's default device."""
        return name

    def scatter_add(self, x: Any, index: tuple[Any, ...], v: Any) -> Any:
        return x.at[index].add(v)

    def add_rows(self, n: int, ids: Any, rows: Any) -> Any:
        return self.jnp.zeros((n, rows.shape[1]), dtype=rows.dtype).at[ids].add(rows)

    def on_host(self, x: Any) -> bool:
        return all(d.platform == "cpu" for d in x.devices())
