"""verify on floor-divided sizes through a fitted op (one verify runs the library to fit), and
on ``int()`` of a compound size.  A fit runs at sizes where the floors are exact, so it reports
them as requirements unless runs off the divisors agree with it.  Each verdict is checked
against concrete runs at every size up to 24 (the oracle)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch

from arrays import clean, kinds
from tensig import Float
from tensig.check import size_fit, trace_torch
from tensig.check.verify import verify


def _requires(report, text: str) -> bool:
    return [f.message for f in report] == [f"requires {text}"]


def keep_quarter_np(x: Float[np.ndarray, "N L D"]) -> Float[np.ndarray, "N L//4 D"]:
    _, L, D = x.shape
    ids = x[:, :L // 4, :1]
    return np.repeat(ids, D, axis=2)


def mae_np(x: Float[np.ndarray, "N L D"]) -> Float[np.ndarray, "N L//4 D"]:
    """MAE's masking: the first quarter of a random order, each id repeated along D."""
    N, L, D = x.shape
    ids = np.argsort(np.random.rand(N, L), axis=1)[:, :L // 4]
    return np.take_along_axis(x, ids[:, :, None].repeat(D, axis=2), axis=1)


def keep_quarter_torch(x: Float[torch.Tensor, "N L D"]) -> Float[torch.Tensor, "N L//4 D"]:
    _, L, D = x.shape
    return x[:, :L // 4, :1].repeat_interleave(D, dim=2)


def keep_quarter_jax(x: Float[jax.Array, "N L D"]) -> Float[jax.Array, "N L//4 D"]:
    _, L, D = x.shape
    return jnp.repeat(x[:, :L // 4, :1], D, axis=2)


def test_a_quarter_repeated_by_a_fitted_op_verifies_in_numpy_torch_and_jax(monkeypatch):
    for n_tokens in range(1, 25):  # the oracle: [N, L // 4, D] at every L
        for f, make in ((keep_quarter_np, np.ones), (mae_np, np.ones),
                        (keep_quarter_torch, torch.ones), (keep_quarter_jax, jnp.ones)):
            assert tuple(f(make((2, n_tokens, 3))).shape) == (2, n_tokens // 4, 3), f
    fitted = []
    monkeypatch.setattr(trace_torch, "fallback", lambda func, *a, f=trace_torch.fallback:
                        fitted.append(func) or f(func, *a))
    for f in (keep_quarter_np, mae_np, keep_quarter_torch, keep_quarter_jax):
        assert clean(verify(f)), (f.__name__, str(verify(f)))
    assert fitted == [torch.repeat_interleave]  # torch's through the fitted fallback


def repeat_half(x: Float[np.ndarray, "T"]) -> Float[np.ndarray, "T"]:
    return np.repeat(x[:x.shape[0] // 2], 2)


def diff_third(x: Float[np.ndarray, "T"]) -> Float[np.ndarray, "T//3 - 1"]:
    return np.diff(x[:x.shape[0] // 3])


def test_a_fit_that_holds_only_where_the_floor_is_exact_still_requires_it():
    for t in range(1, 25):  # the oracle: T at even T only; T // 3 - 1 from T = 3 on only
        assert (repeat_half(np.ones(t)).shape == (t,)) == (t % 2 == 0)
        assert (diff_third(np.ones(t)).shape == (t // 3 - 1,)) == (t >= 3)
    for _ in range(2):  # the second time from the cache, reported as the first
        fits = len(size_fit._FITS)
        assert _requires(verify(repeat_half), "T divisible by 2"), str(verify(repeat_half))
        assert _requires(verify(diff_third), "T divisible by 3"), str(verify(diff_third))
    assert len(size_fit._FITS) == fits


def half(x: Float[np.ndarray, "T"]) -> Float[np.ndarray, "T//2"]:
    n = int(x.shape[0] // 2)
    return np.zeros(n)


def half_declared_third(x: Float[np.ndarray, "T"]) -> Float[np.ndarray, "T//3"]:
    n = int(x.shape[0] // 2)  # BUG: a half, declared a third
    return np.zeros(n)


def test_int_of_a_compound_size_is_that_size_and_its_buggy_twin_is_found():
    for t in range(1, 25):
        assert half(np.ones(t)).shape == (t // 2,)
    assert half_declared_third(np.ones(5)).shape != (5 // 3,)
    r = verify(half)
    assert not r.errors and all(f.kind == "assumption" for f in r), str(r)
    assert any(f.message.startswith("assumes int(") for f in r), str(r)
    assert kinds(verify(half_declared_third)).count("return-shape") == 1


def last_half(x: Float[np.ndarray, "T"]) -> Float[np.ndarray, "T//2"]:
    return x[int(-(x.shape[0] // 2)):]


def last_half_declared_more(x: Float[np.ndarray, "T"]) -> Float[np.ndarray, "T + T//2"]:
    return x[-(x.shape[0] // 2):]  # BUG: the last half, declared longer


def test_a_slice_from_a_size_negative_at_the_witness_counts_from_the_end():
    for t in range(1, 25):  # the oracle: T // 2 where -(T // 2) < 0 (T >= 2), all of T = 1
        assert last_half(np.ones(t)).shape == ((t // 2,) if t >= 2 else (1,))
        assert (last_half_declared_more(np.ones(t)).shape == (t + t // 2,)) == (t == 1)
    r = verify(last_half)
    assert not r.errors and "assumes -(T // 2) < 0" in str(r), str(r)
    assert kinds(verify(last_half_declared_more)).count("return-shape") == 1


def kept_heads(x: Float[np.ndarray, "N L D"]) -> Float[np.ndarray, "N 2 L//4 D//2"]:
    """A quarter of the tokens split into 2 heads: D must be even, L need not be a multiple."""
    N, L, D = x.shape
    return x[:, :L // 4].reshape(N, L // 4, 2, D // 2).transpose(0, 2, 1, 3)


def test_a_reshape_requires_only_the_floors_its_element_count_needs():
    for n_tokens in range(1, 25):
        assert kept_heads(np.ones((2, n_tokens, 6))).shape == (2, 2, n_tokens // 4, 3)
    assert _requires(verify(kept_heads), "D divisible by 2"), str(verify(kept_heads))
