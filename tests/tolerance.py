"""How far apart two float computations of the same value may be: derived from the dtype and
the length of the sums, never measured on one machine.

Two libraries (or two kernels of one: a BLAS on another CPU, a fused and an unfused path) sum
in different orders, with or without FMA, and may differ in the last bits.  Each evaluation of
a sum of ``n`` terms is within ``gamma_n * sum(|term|)`` of the exact sum, ``gamma_n = n*u /
(1 - n*u)`` with ``u`` the unit roundoff (Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., section 3.1), whatever the order; through a chain of matrix products,
bias additions and 1-Lipschitz pointwise maps (relu) the lengths add up and ``sum(|term|)``
is the same computation on absolute values.  So two evaluations are within twice that.
"""

from __future__ import annotations

import numpy as np


def rounding_bound(dtype, length: int, magnitude) -> np.ndarray:
    """The largest difference two evaluation orders can give: ``2 * gamma_length *
    magnitude``, where ``magnitude`` is the sum of the absolute values of the terms (per
    element: ``|A| @ |B|`` for ``A @ B``) and ``length`` the number of terms (summed along a
    chain of reductions)."""
    u = np.finfo(dtype).eps / 2
    n = max(int(length), 1)
    gamma = n * u / (1 - n * u)
    return 2 * gamma * np.asarray(magnitude, dtype=np.float64)


def assert_equal_up_to_rounding(actual, expected, *, dtype, length: int, magnitude) -> None:
    """``actual`` and ``expected`` differ by no more than two evaluation orders can (see
    :func:`rounding_bound`); the message names the worst element."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    bound = np.broadcast_to(rounding_bound(dtype, length, magnitude), actual.shape)
    excess = np.abs(actual - expected) - bound
    if excess.size and excess.max() > 0:
        at = np.unravel_index(int(np.argmax(excess)), excess.shape)
        raise AssertionError(
            f"differ by more than rounding at {tuple(int(i) for i in at)}: {actual[at]!r} vs "
            f"{expected[at]!r}, bound {bound[at]:.3g} ({np.dtype(dtype)}, {length} terms)")
