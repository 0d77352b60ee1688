"""verify at the small sizes its witnesses (primes >= 11) never reach: a fitted op that refuses
short axes (a pool of window 4 needs ``T >= 4``) and a slice bound non-negative at the witness
but negative at small sizes each state the size they hold from.  Concrete runs are the oracle."""

from __future__ import annotations

import numpy as np
import scipy.signal
import torch

from tensig import Float
from tensig.check import tracing
from tensig.check.sym_indexing import _from_end
from tensig.check.verify import verify
from tensig.core.dims import Dim


def _heads(report) -> list[str]:
    return [f.message.split(":")[0] for f in report]


def pool4(x: Float[torch.Tensor, "B C T"]) -> Float[torch.Tensor, "B C T//4"]:
    return torch.nn.functional.avg_pool1d(x, 4)


def _refuses(fn, make, shape) -> bool:
    try:
        fn(make(shape))
    except (RuntimeError, ValueError, IndexError):
        return True
    return False


def pool_ok(x: Float[torch.Tensor, "B C T"]) -> Float[torch.Tensor, "B C T"]:
    return torch.nn.functional.avg_pool1d(x, 1)


def test_a_fitted_op_refusing_short_axes_assumes_the_size_it_accepts_from():
    for t in range(1, 12):  # the oracle: avg_pool1d of window 4 refuses T < 4 only, of 1 none
        assert _refuses(pool4, torch.ones, (2, 3, t)) == (t < 4)
        assert not _refuses(pool_ok, torch.ones, (2, 3, t))
    for _ in range(2):  # the second time from the fit's cache, reported as the first
        r = verify(pool4)
        assert not r.errors and _heads(r) == ["assumes 4 <= T"], str(r)
    assert not list(verify(pool_ok)), str(verify(pool_ok))  # no floor: nothing said


def smooth_np(x: Float[np.ndarray, "B T"]) -> Float[np.ndarray, "B T"]:
    return scipy.signal.savgol_filter(x, 5, 2)


def test_a_fitted_numpy_op_refusing_short_axes_assumes_it_too():
    for t in range(1, 12):  # the oracle: a window of 5 needs 5 samples
        assert _refuses(smooth_np, np.ones, (2, t)) == (t < 5)
    r = verify(smooth_np)
    assert not r.errors and _heads(r) == ["assumes 5 <= T"], str(r)


def tail_after_half(x: Float[np.ndarray, "T D"]) -> Float[np.ndarray, "T-T//2+3 D"]:
    return x[x.shape[0] // 2 - 3:]


def test_a_slice_start_negative_at_small_sizes_is_assumed_non_negative():
    for t in range(1, 24):  # the oracle: T - T//2 + 3 long from T = 6 on only
        n = len(tail_after_half(np.ones((t, 2))))
        assert (n == t - t // 2 + 3) == (t >= 6), t
    r = verify(tail_after_half)
    assert not r.errors and _heads(r) == ["assumes T // 2 - 3 >= 0"], str(r)


class _Unscannable(list):
    """A findings list that refuses a scan: a look-up by the assumption must not need one."""

    def __iter__(self):
        raise AssertionError("the findings were scanned")


def test_a_slice_bound_assumed_non_negative_is_looked_up_without_scanning_findings():
    t = tracing.Tracer({"T": 11})
    token = tracing._TRACER.set(t)
    try:
        bound = Dim.symbol("T") // 2 - 3  # 2 at the witness, -3 at T = 1
        assert _from_end(Dim.symbol("T"), bound) == bound
        assert _heads(t.findings) == ["assumes T // 2 - 3 >= 0"]
        t.findings = _Unscannable(t.findings)  # each later bound: no scan, no second finding
        assert _from_end(Dim.symbol("T"), bound) == bound and len(t.findings) == 1
    finally:
        tracing._TRACER.reset(token)


def convolve_parts(x: Float[np.ndarray, "T D"]) -> Float[np.ndarray, "T//2+T//3-1 1"]:
    return np.convolve(x[:x.shape[0] // 2, 0], x[:x.shape[0] // 3, 0])[:, None]


def test_a_convolution_of_an_operand_empty_at_small_sizes_assumes_it_is_not():
    for t in range(1, 24):  # the oracle: NumPy refuses an empty operand, T // 3 = 0 at T < 3
        assert _refuses(convolve_parts, np.ones, (t, 2)) == (t // 3 < 1), t
    r = verify(convolve_parts)  # the shorter operand non-empty: the longer is too
    assert not r.errors and _heads(r) == ["assumes 1 <= T // 3"], str(r)
