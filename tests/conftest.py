"""Shared fixtures: every backend, and a real dask.distributed cluster for the Dask path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Test helper modules (the loop oracle, array conversions) live beside the tests.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from arrays import BACKENDS


@pytest.fixture(scope="module")
def dask_client():
    """A real dask.distributed cluster: two worker processes on loopback."""
    distributed = pytest.importorskip("dask.distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, host="127.0.0.1")
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(params=BACKENDS)
def backend(request):
    if request.param == "jax":
        pytest.importorskip("jax")
    if request.param == "dask":
        request.getfixturevalue("dask_client")
    return request.param


