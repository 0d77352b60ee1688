"""Moving test data between NumPy and each backend."""

from __future__ import annotations

import numpy as np
import torch

from tensig.ops import RowArray

BACKENDS = ["numpy", "torch", "jax", "dask"]


def to_backend(name: str, x: np.ndarray):
    if name == "numpy":
        return x
    if name == "torch":
        return torch.tensor(x)
    if name == "jax":
        import jax.numpy as jnp

        return jnp.asarray(x)
    import dask.array as da

    # two chunks along the first axis: enough to make the cluster combine partial results
    chunks = tuple(max(1, (n + 1) // 2) if i == 0 else n for i, n in enumerate(x.shape))
    return da.from_array(x, chunks=chunks)


def to_numpy(name: str, y) -> np.ndarray:
    if isinstance(y, RowArray):
        y = y.array
    if name == "numpy":
        assert isinstance(y, np.ndarray | np.generic)  # numpy's einsum gives scalars for ()
        return np.asarray(y)
    if name == "torch":
        assert isinstance(y, torch.Tensor)
        return y.numpy()
    if name == "jax":
        import jax

        assert isinstance(y, jax.Array)
        return np.asarray(y)
    import dask.array as da

    assert isinstance(y, da.Array)
    return y.compute()
