"""Shared fixtures: every backend, and a real dask.distributed cluster for the Dask path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# JAX on a recent GPU multiplies float32 in TF32 by default (relative error ~1e-3); the tests
# derive their bounds from float32 itself, so JAX computes at full precision wherever it runs.
os.environ.setdefault("JAX_DEFAULT_MATMUL_PRECISION", "highest")

# Test helper modules (the loop oracle, array conversions) live beside the tests.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from arrays import BACKENDS

# `make test` draws the same hypothesis examples on every run and machine (no random seed, no
# replay of a local example database); HYPOTHESIS_PROFILE=explore draws new ones each run. No
# deadline: a shared CI machine's timing is no property of the code (tests set only their sizes).
settings.register_profile("deterministic", derandomize=True, database=None, deadline=None)
settings.register_profile("explore", derandomize=False, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


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


@pytest.fixture(autouse=True)
def _no_alarm_left_running(request):
    """A test that leaves the process's interval timer running turns off verify's ``timeout``
    in every later test (verify leaves someone else's timer alone): fail the test that leaked
    it, not a later one that needs the timer.  A timer already running when the test starts
    is someone else's (pytest-timeout arms one around every test) and is left alone."""
    import signal

    watched = hasattr(signal, "getitimer") and signal.getitimer(signal.ITIMER_REAL)[0] == 0
    yield
    if watched and signal.getitimer(signal.ITIMER_REAL)[0] > 0:
        signal.setitimer(signal.ITIMER_REAL, 0)
        pytest.fail(f"{request.node.nodeid} left the interval timer (SIGALRM) running")
