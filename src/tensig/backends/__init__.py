"""Backend adapters: one module per array library, each owning what tensig knows about it.

:mod:`tensig.backends.base` holds the adapter interface (:class:`Backend`) and the registry
that picks an adapter by the arrays' type; ``numpy``, ``torch``, ``jax`` and ``dask`` hold one
adapter each.  Importing this package imports none of those libraries: an adapter imports its
library when the first array of it shows up.  :func:`register` adds an adapter (see the
README's "How to add a backend").
"""

from __future__ import annotations

from tensig.backends import base, dask, jax, numpy, torch
from tensig.backends._plans import matmul_plan as _matmul_plan  # noqa: F401 (tests)
from tensig.backends.base import *  # noqa: F403 (the interface and the registry: base.__all__)
from tensig.backends.dask import DaskBackend
from tensig.backends.jax import JaxBackend
from tensig.backends.numpy import NumpyBackend, _NumpyGemm  # noqa: F401 (tests)
from tensig.backends.torch import TorchBackend

__all__ = [*base.__all__, "DaskBackend", "JaxBackend", "NumpyBackend", "TorchBackend", "dask",
           "jax", "numpy", "torch"]
