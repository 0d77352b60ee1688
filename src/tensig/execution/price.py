"""Price a tensor before allocating it: shape times bytes per element.

The bill needs nothing about the model: the sizes at the batch you will serve and the width of
one number.  Activations of shape ``[32, 2048, 4096]`` are 268 million numbers: 1.07 GB in fp32,
537 MB in bf16, 268 MB in int8.

>>> price((32, 2048, 4096), "float32"), price((32, 2048, 4096), "bf16"), price((32, 2048, 4096), "int8")
(1073741824, 536870912, 268435456)

With symbolic sizes the price is a symbolic byte count, a :class:`tensig.core.dims.Dim`:

>>> price("B, h, T, T", "float32")
Dim('4*B*T**2*h')
>>> price("B, h, T, T", "float32").evaluate({"B": 8, "h": 16, "T": 4096}) / 1e9
8.589934592
"""  # noqa: E501

from __future__ import annotations

from typing import Any

import numpy as np

from tensig.core.shapes import as_shape

__all__ = ["itemsize", "price"]

_ALIASES = {
    "fp64": "float64", "double": "float64", "fp32": "float32", "float": "float32",
    "single": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16",
    "fp8": "float8_e4m3fn", "long": "int64", "int": "int64", "byte": "uint8",
}
_NOT_IN_NUMPY = {"bfloat16": 2}  # ml_dtypes/torch/jax types numpy itself does not name


def itemsize(dtype: Any) -> int:
    """Bytes per element of a numpy, torch or jax dtype, a dtype name or a scalar type.

    Names: numpy's (``"float32"``, ``"int8"``, ``"bool"``) plus ``fp32``, ``fp16``, ``bf16``,
    ``bfloat16``, ``fp8``/``float8_*`` (1 byte), ``half``, ``double``.

    >>> import numpy as np
    >>> itemsize("bf16"), itemsize(np.float64), itemsize(np.dtype("int16")), itemsize("bool")
    (2, 8, 2, 1)
    """
    if isinstance(getattr(dtype, "itemsize", None), int):
        return int(dtype.itemsize)  # a dtype object: NumPy's, JAX's, torch's (torch >= 2.1)
    if isinstance(dtype, str):
        name = dtype.strip().lower().removeprefix("torch.").removeprefix("jnp.")
        name = _ALIASES.get(name, name)
        if name in _NOT_IN_NUMPY:
            return _NOT_IN_NUMPY[name]
        if name.startswith("float8"):
            return 1
        dtype = name
    try:
        return int(np.dtype(dtype).itemsize)
    except TypeError:  # (a dtype object with an ``itemsize`` was answered above)
        raise TypeError(f"price(): cannot tell the size of dtype {dtype!r}") from None


def price(shape: Any, dtype: Any = None) -> Any:
    """Bytes of a tensor of ``shape`` with ``dtype``: an ``int``, or a ``Dim`` when symbolic.

    ``shape``: a :class:`tensig.Shape`, a tuple of sizes, a shape string or an array;
    ``dtype`` as :func:`itemsize` takes it (``None``: the array's own, else float32).  A
    :class:`tensig.Padded` batch gets a ``PaddedPrice``, with the bytes spent on padding.

    >>> import numpy as np
    >>> price(np.zeros((3, 4), np.float16)), price([8, 1024], "float32")
    (24, 32768)
    """
    if callable(getattr(type(shape), "price", None)):  # a Padded batch prices itself
        return shape.price(dtype)
    if dtype is None:
        dtype = getattr(shape, "dtype", "float32")
    return as_shape(shape, where="price()").numel() * itemsize(dtype)  # numel: int if it can
