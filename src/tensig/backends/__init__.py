"""Backend adapters: one module per array library (``numpy``, ``torch``, ``jax``, ``dask``)
behind the interface and registry of :mod:`tensig.backends.base`; :func:`register` adds one
(the README's "How to add a backend").
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
