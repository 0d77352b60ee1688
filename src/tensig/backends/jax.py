"""The JAX adapter: ``jax.numpy``; windows as gathers (JAX has no strided views)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tensig.backends.base import Backend, register, to_numpy

__all__ = ["JaxBackend"]


@register
class JaxBackend(Backend):
    name = "jax"
    modules = ("jax", "jaxlib")
    compiles = True
    has_devices = True
    stages = True

    def __init__(self) -> None:
        import jax
        import jax.numpy as jnp

        self.jax = jax
        self.jnp = self.xp = jnp

    def einsum(self, subscripts: str, *xs: Any) -> Any:
        """``jnp.einsum`` on operands promoted first (as ``numpy.einsum``): ``dot_general``
        refuses mixed integer and float16 operands."""
        if len({x.dtype for x in xs}) > 1:
            dtype = self.result_dtype(xs)
            xs = tuple(x.astype(dtype) for x in xs)
        return self.jnp.einsum(subscripts, *xs)

    def fused(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        return self.jax.jit(fn)

    def conv(self, x: Any, w: Any, strides: Sequence[int], dilations: Sequence[int],
             pads: Sequence[tuple[int, int]], channels_last: bool = False) -> Any:
        """``lax.conv_general_dilated`` (XLA picks the layout: ``channels_last`` is moot)."""
        return self.jax.lax.conv_general_dilated(x, w, tuple(strides), [tuple(p) for p in pads],
                                                 rhs_dilation=tuple(dilations))

    def windows(self, x: Any, axis: int, size: int, step: int) -> Any:
        # a gather (JAX has no strided views), which XLA fuses into the consumer
        n = (x.shape[axis] - size) // step + 1
        jnp = self.jnp
        idx = jnp.arange(n)[:, None] * step + jnp.arange(size)[None, :]
        w = jnp.take(x, idx, axis=axis)  # axis -> (n, size) in place
        return jnp.moveaxis(w, axis + 1, -1)

    def vmap(self) -> Any:
        return self.jax.vmap

    def masked_set(self, out: Any, mask: Any, values: Any) -> Any:
        return out.at[mask].set(values)  # JAX arrays are immutable

    # -- compiled routines: JAX arrays are immutable, so every store builds a new array -------
    def asarray(self, x: Any, like: Any = None, device: Any = None) -> Any:
        if self.owns(x):
            x = self.jnp.asarray(x)
        else:  # another library's values: to the host, then onto like's device
            x = self.jnp.asarray(to_numpy(x))
            if device is None and like is not None and self.owns(like) and \
                    not self.traced(like):
                device = self.device_of(like)
        if device is None:
            return x
        if isinstance(device, str):  # "cpu", "gpu:1": a platform and an index
            platform, _, index = device.partition(":")
            device = self.jax.devices(platform)[int(index or 0)]
        return self.jax.device_put(x, device)

    def device(self, name: str | None) -> Any:
        """A platform and an index (``"cpu:0"``), resolved by :meth:`asarray`."""
        return name

    def device_of(self, x: Any) -> str | None:
        """``x``'s device as :meth:`device` names it; ``None`` for one spread over several."""
        devices = x.devices()
        if len(devices) != 1:
            return None
        (d,) = devices
        return f"{d.platform}:{self.jax.devices(d.platform).index(d)}"

    def scatter_add(self, x: Any, index: tuple[Any, ...], v: Any) -> Any:
        return x.at[index].add(v)

    def _add_rows(self, n: int, ids: Any, rows: Any) -> Any:
        return self.jnp.zeros((n, rows.shape[1]), dtype=rows.dtype).at[ids].add(rows)

    def on_host(self, x: Any) -> bool:
        return not self.traced(x) and all(d.platform == "cpu" for d in x.devices())

    def traced(self, x: Any) -> bool:
        return isinstance(x, self.jax.core.Tracer)

    def host_call(self, fn: Callable[..., Any], shape: tuple[int, ...], dtype: str,
                  *args: Any) -> Any:
        return self.jax.pure_callback(fn, self.jax.ShapeDtypeStruct(shape, dtype), *args)

    @property
    def trace_errors(self) -> tuple[type[BaseException], ...]:
        return (self.jax.errors.JAXTypeError, self.jax.errors.JAXIndexError)
