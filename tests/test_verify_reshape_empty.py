"""verify on a reshape's ``-1`` where the other sizes' product can be 0: NumPy, torch and JAX all
refuse it, even for an array of 0 elements (any size would fit), so ``np.diff(x, axis=0)``
reshaped to ``(len - 1, -1)`` fails at ``B = 1``.  A product of sizes known to be at least 1
(signature sizes, window counts after ``K <= H``) stays silent.  Oracles: concrete runs at
``B`` (or ``T``) = 1, 2, 3."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch

from arrays import clean
from tensig import Float
from tensig.check.verify import verify


def _fails(fn, shape, make=np.zeros) -> bool:
    """Whether ``fn`` raises on zeros of ``shape`` made by ``make``."""
    try:
        fn(make(shape))
    except (ValueError, RuntimeError, TypeError, ZeroDivisionError):
        return True
    return False


def diff_rows(x: Float[np.ndarray, "B T d"]):
    """Row differences flattened per row: 0 rows at B = 1, and reshape(0, -1) raises."""
    y = np.diff(x, axis=0)
    return y.reshape(y.shape[0], -1)


def diff_rows_torch(x: Float[torch.Tensor, "B T d"]):
    return torch.diff(x, dim=0).reshape(x.shape[0] - 1, -1)


def diff_rows_jax(x: Float[jnp.ndarray, "B T d"]):
    return jnp.diff(x, axis=0).reshape(x.shape[0] - 1, -1)


def diff_steps(x: Float[np.ndarray, "B T d"]):
    """The -1 first: the other sizes' product (T - 1)*d is 0 at T = 1."""
    y = np.diff(x, axis=1)
    return y.reshape(-1, y.shape[1], x.shape[2])


def test_diff_then_minus_one_among_a_size_that_can_be_0_is_not_verified():
    for fn, make in ((diff_rows, np.zeros), (diff_rows_torch, torch.zeros),
                     (diff_rows_jax, jnp.zeros)):
        assert _fails(fn, (1, 3, 4), make) and not _fails(fn, (2, 3, 4), make)
        assert not _fails(fn, (3, 3, 4), make)
        r = verify(fn)
        assert not clean(r) and "assumes B - 1 >= 1" in str(r), str(r)
    assert _fails(diff_steps, (2, 1, 4)) and not _fails(diff_steps, (2, 2, 4))
    r = verify(diff_steps)
    assert not clean(r) and "assumes T*d - d >= 1" in str(r), str(r)


def test_minus_one_beside_a_literal_0_is_an_error():
    def zero(x: Float[np.ndarray, "B T"]):
        return x.reshape(0, -1)

    assert all(_fails(zero, (b, 3)) for b in (1, 2, 3))
    r = verify(zero)
    assert not r.ok and "-1 among sizes of product 0" in str(r), str(r)


def flatten(x: Float[np.ndarray, "B T d"]):
    return x.reshape(x.shape[0], -1)


def diff_flat(x: Float[np.ndarray, "B T d"]):
    """0 rows at B = 1 but the -1 leads and T*d is never 0: NumPy gives (0, T*d)."""
    return np.diff(x, axis=0).reshape(-1, x.shape[1] * x.shape[2])


def windows(x: Float[np.ndarray, "N C H W"], w: Float[np.ndarray, "F C K K"]):
    """im2col with a stride: the window counts are at least 1 once K <= H, K <= W hold."""
    k = w.shape[-1]
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::2, ::2]
    n, _, oh, ow = win.shape[:4]
    return win.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, -1)


def test_products_of_sizes_at_least_1_stay_silent():
    assert all(not _fails(fn, (b, 3, 4)) for fn in (flatten, diff_flat) for b in (1, 2, 3))
    assert clean(verify(flatten)) and clean(verify(diff_flat))
    x = np.zeros((2, 3, 5, 4))
    assert all(windows(x, np.zeros((2, 3, k, k))).shape[1] == 3 * k * k for k in (1, 2, 3, 4))
    r = verify(windows)
    assert [f.message.split(":")[0] for f in r.findings] == ["assumes K <= H", "assumes K <= W"], \
        str(r)


def square_windows(x: Float[np.ndarray, "N C H H"], w: Float[np.ndarray, "F C K K"]):
    """im2col of square images: both window counts are ``H - K + 1``, one fact used twice."""
    k = w.shape[-1]
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))
    n, _, oh, ow = win.shape[:4]
    return win.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, -1)


def test_a_square_of_a_window_count_known_at_least_1_stays_silent():
    """``N*(H - K + 1)**2`` after ``K <= H``: a known-positive size may divide a product twice;
    it was assumed again, as a polynomial, once its one use was spent."""
    x = np.zeros((2, 3, 5, 5))
    assert all(square_windows(x, np.zeros((2, 3, k, k))).shape[1] == 3 * k * k
               for k in (1, 2, 3, 4, 5))
    r = verify(square_windows)
    assert [f.message.split(":")[0] for f in r.findings] == ["assumes K <= H"], str(r)
