"""Backend adapters: one module per array library, each owning what tensig knows about it.

:mod:`tensig.backends.base` holds the adapter interface (:class:`Backend`) and the registry
that picks an adapter by the arrays' type; ``numpy``, ``torch``, ``jax`` and ``dask`` hold one
adapter each.  Importing this package imports none of those libraries: an adapter imports its
library when the first array of it shows up.  :func:`register` adds an adapter (see the
README's "How to add a backend").
"""

from __future__ import annotations

from tensig.backends import dask, jax, numpy, torch
from tensig.backends._plans import matmul_plan as _matmul_plan  # noqa: F401 (tests)
from tensig.backends.base import (
    Backend,
    all_zero,
    backend_among,
    backend_for,
    backend_named,
    backend_of,
    backend_of_namespace,
    dtype_name,
    graph_backends,
    is_array,
    is_integer,
    library_of,
    neutral_max,
    neutral_min,
    register,
    to_numpy,
    unregister,
)
from tensig.backends.dask import DaskBackend
from tensig.backends.jax import JaxBackend
from tensig.backends.numpy import NumpyBackend, _NumpyGemm  # noqa: F401 (tests)
from tensig.backends.torch import TorchBackend

__all__ = [
    "Backend",
    "DaskBackend",
    "JaxBackend",
    "NumpyBackend",
    "TorchBackend",
    "all_zero",
    "backend_among",
    "backend_for",
    "backend_named",
    "backend_of",
    "backend_of_namespace",
    "dask",
    "dtype_name",
    "graph_backends",
    "is_array",
    "is_integer",
    "jax",
    "library_of",
    "neutral_max",
    "neutral_min",
    "numpy",
    "register",
    "to_numpy",
    "torch",
    "unregister",
]
