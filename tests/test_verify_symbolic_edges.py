"""verify on the edges of symbolic sizes, in code written the way public implementations write
it: a size clamped with ``max``, a size's truth value, an empty-input guard, a NumPy
``Generator``'s sampling methods, ``np.mask_indices``, and cleanrl's PyTorch GAE loop.  Each
test is a pattern that once gave a false warning, crashed the trace or a silent wrong size."""

from __future__ import annotations

import collections.abc
import linecache
import os
import subprocess
import sys
import typing

import numpy as np
import pytest
import torch
from numpy.random import RandomState, default_rng

from arrays import clean, kinds
from tensig import Float, Int
from tensig.check.verify import _witnesses, verify
from tensig.core.dims import Dim

N, T = Dim.symbol("N"), Dim.symbol("T")


# -- cleanrl's GAE, as its PyTorch PPO writes it ---------------------------------------------


def ppo_gae(rewards: Float[torch.Tensor, "T, E"], values: Float[torch.Tensor, "T, E"],
            dones: Float[torch.Tensor, "T, E"], next_value: Float[torch.Tensor, "1, E"],
            next_done: Float[torch.Tensor, "E"], gamma: float = 0.99, gae_lambda: float = 0.95
            ) -> tuple[Float[torch.Tensor, "T, E"], Float[torch.Tensor, "T, E"]]:
    num_steps = rewards.shape[0]
    with torch.no_grad():
        advantages = torch.zeros_like(rewards)
        lastgaelam = 0
        for t in reversed(range(num_steps)):
            if t == num_steps - 1:
                nextnonterminal = 1.0 - next_done
                nextvalues = next_value
            else:
                nextnonterminal = 1.0 - dones[t + 1]
                nextvalues = values[t + 1]
            delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
            advantages[t] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
        returns = advantages + values
    return advantages, returns


def ppo_gae_bug(rewards: Float[torch.Tensor, "T, E"], values: Float[torch.Tensor, "T, E"],
                dones: Float[torch.Tensor, "T, E"], next_value: Float[torch.Tensor, "E, 1"],
                next_done: Float[torch.Tensor, "E"], gamma: float = 0.99,
                gae_lambda: float = 0.95) -> Float[torch.Tensor, "T, E"]:
    advantages = torch.zeros_like(rewards)
    lastgaelam = 0
    for t in reversed(range(rewards.shape[0])):
        if t == rewards.shape[0] - 1:
            nextnonterminal = 1.0 - next_done
            nextvalues = next_value  # the critic's [E, 1] kept: [E, E] below
        else:
            nextnonterminal = 1.0 - dones[t + 1]
            nextvalues = values[t + 1]
        delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
        advantages[t] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
    return advantages


def test_cleanrl_torch_gae_assumes_nothing():
    """The last step's branch (``t == num_steps - 1``) and ``values[t + 1]`` in the others are
    decided by the loop's position (it gave three TS301 warnings: ``not (T - 1 == 5)``,
    ``6 < T``); the critic's column kept is still an outer product."""
    assert clean(verify(ppo_gae)), str(verify(ppo_gae))
    assert "outer-product" in kinds(verify(ppo_gae_bug)), str(verify(ppo_gae_bug))


# -- max/min of sizes ------------------------------------------------------------------------


def test_max_of_one_and_a_size_is_the_size():
    """``max(1, N)``: Python compares ``N > 1`` strictly, which depends on the sizes, but both
    answers agree at the tie: it is ``N``, with no assumption (it warned "assumes N > 1")."""
    def warmup(lr: Float[np.ndarray, "N"]) -> Float[np.ndarray, "N"]:
        steps = max(1, len(lr))
        return lr[:steps] * min(steps, steps + 10) * max([1, steps])

    r = verify(warmup)
    assert clean(r) and r.result == ((N,),), str(r)


def test_max_that_depends_on_the_sizes_is_one_assumption_on_the_size():
    """``max(T - 2, 0)`` is ``T - 2`` only where ``T >= 2``: assumed, worded on the size."""
    def trim(x: Float[np.ndarray, "T, D"]) -> Float[np.ndarray, "D"]:
        keep = max(x.shape[0] - 2, 0)
        return x[:keep].sum(axis=0)

    r = verify(trim)
    assert [f.message.split(":")[0] for f in r] == ["assumes T - 2 >= 0"], str(r)


# -- a size's truth value and comparisons with 0 ---------------------------------------------


def test_truth_value_of_a_size_that_depends_on_the_sizes_is_assumed():
    """``if T - 3:`` and ``if T % 2:`` are true at the witness but zero at some sizes: the branch
    is an assumption, as ``if N > M:`` is (it was taken with no finding)."""
    def odd(x: Float[np.ndarray, "T, D"]) -> Float[np.ndarray, "T, D"]:
        if x.shape[0] % 2:
            return x
        return x + 1

    def pick(X: Float[np.ndarray, "N, D"], Y: Float[np.ndarray, "M, D"]
             ) -> Float[np.ndarray, "N, D"]:
        return X if len(X) > len(Y) else X * 2

    for f, text in ((odd, "T % 2 != 0"), (pick, "not (N > M)")):
        assert [x.message.split(":")[0] for x in verify(f)] == [f"assumes {text}"], f

    def nonempty(x: Float[np.ndarray, "T, D"]) -> Float[np.ndarray, "T, D"]:
        return x if x.shape[0] and x.shape[0] + 1 else x * 2  # sizes are positive: decided

    assert clean(verify(nonempty)), str(verify(nonempty))


def test_sizes_are_positive_so_an_empty_guard_is_decided():
    """verify proves for sizes >= 1 (the convention of tensig's size algebra, and why ``x[0]``
    and ``x[-1]`` are in range): ``T == 0`` is False, not an assumption."""
    def mean_or_zero(x: Float[np.ndarray, "T, D"]) -> Float[np.ndarray, "D"]:
        if x.shape[0] == 0:
            return np.zeros(x.shape[1])
        return x[0] + x[-1]

    assert clean(verify(mean_or_zero)), str(verify(mean_or_zero))


# -- NumPy's Generator -----------------------------------------------------------------------


_RNG = np.random.default_rng(0)  # a module's own generators, made before verify runs
_RS = np.random.RandomState(0)


def _check_random_state(seed):
    """scikit-learn's way to accept a seed or a generator."""
    if isinstance(seed, int):
        return np.random.RandomState(seed)
    if isinstance(seed, np.random.RandomState):
        return seed
    raise ValueError(f"{seed!r} cannot seed a RandomState")


def test_generator_methods_take_symbolic_sizes():
    """``rng.permutation(len(X))`` read the size as a 0-d array and crashed the trace; a
    ``Generator``'s and a ``RandomState``'s methods now follow ``np.random``'s functions."""
    def shuffled(X: Float[np.ndarray, "N, D"], y: Int[np.ndarray, "N"]
                 ) -> tuple[Float[np.ndarray, "N, D"], Int[np.ndarray, "N"]]:
        rng = np.random.default_rng(0)
        perm = rng.permutation(len(X))
        return X[perm], y[perm]

    def batches(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "32, D"]:
        return X[_RNG.integers(0, X.shape[0], size=32)]

    def init_centers(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "4, D"]:
        rng = np.random.default_rng(0)
        return rng.choice(X, 4, replace=False)

    def noisy(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        rng = np.random.default_rng(0)
        X = X.copy()
        rng.shuffle(X)
        return X + rng.normal(0.0, 0.1, size=X.shape) + rng.normal(X, 1.0)

    def legacy(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        order = _check_random_state(0).permutation(len(X))
        np.random.shuffle(order)  # it warned "assumes 8 < N" (NumPy's loop over the witness)
        return X[order][_check_random_state(_RS).randint(0, len(X), size=len(X))]

    for f in (shuffled, batches, noisy, legacy):
        assert clean(verify(f)), (f.__name__, str(verify(f)))
    r = verify(init_centers)  # 4 rows without replacement: as x[:4] does, assumes N >= 4
    assert [x.message.split(":")[0] for x in r] == ["assumes 4 <= N"], str(r)
    assert type(_RNG) is np.random.Generator and type(_RS) is np.random.RandomState
    assert np.random.RandomState.__module__.startswith("numpy")  # NumPy's own, put back

    def init_bug(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "4, D"]:
        rng = np.random.default_rng(0)
        return X[:, rng.permutation(X.shape[0])[:4]]  # columns picked by row indices

    assert "return-shape" in kinds(verify(init_bug)), str(verify(init_bug))


def _random_state(seed=None):
    """scikit-learn's check_random_state: ``None`` is NumPy's global generator."""
    if seed is None or seed is np.random:
        return np.random.mtrand._rand
    return RandomState(seed) if isinstance(seed, int) else seed


def test_the_global_generator_and_default_rng_by_name_take_symbolic_sizes():
    """``check_random_state(None)`` (NumPy's global ``RandomState``) and ``default_rng`` or
    ``RandomState`` imported by name were not the patched generators: the trace stopped inside
    NumPy ('x must be an integer or at least 1-dimensional')."""
    def by_global(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        return X[_random_state().permutation(len(X))]

    def by_name(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        return X[default_rng(0).permutation(X.shape[0])][RandomState(0).permutation(len(X))]

    def by_global_bug(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        return X[:, _random_state().permutation(len(X))]  # columns picked by row indices

    def by_name_bug(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        return X[:, default_rng(0).permutation(X.shape[0])]

    global_rand = np.random.mtrand._rand
    for f in (by_global, by_name):
        assert clean(verify(f)), (f.__name__, str(verify(f)))
    for f in (by_global_bug, by_name_bug):
        r = verify(f)
        assert kinds(r) == ["return-shape"] and not r.notes, str(r)
    assert np.random.mtrand._rand is global_rand and default_rng is np.random.default_rng
    assert RandomState is np.random.RandomState


def test_random_parameters_give_the_sample_shape():
    """``np.random.normal(mu, 0.1)`` draws one sample per element of ``mu`` (it was a
    scalar: a false return-shape error)."""
    def jitter(mu: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        return np.random.normal(mu, 0.1) + np.random.uniform(-mu, mu)

    assert clean(verify(jitter)), str(verify(jitter))


# -- np.mask_indices -------------------------------------------------------------------------


def test_mask_indices_count_is_symbolic():
    """NumPy builds ``mask_indices``' mask with its own ``ones`` at the witness: the count was
    the constant 66 (a silent wrong size).  ``np.triu`` at ``k`` counts as ``triu_indices``;
    another mask is a fresh size."""
    def upper(A: Float[np.ndarray, "N, N"]) -> Float[np.ndarray, "M"]:
        return A[np.mask_indices(A.shape[0], np.triu)]

    def strict_lower(A: Float[np.ndarray, "N, N"]) -> Float[np.ndarray, "N*(N-1)//2"]:
        return A[np.mask_indices(A.shape[0], np.tril, -1)]

    r = verify(upper)
    assert clean(r) and r.result == ((N * (N + 1) // 2,),), str(r)
    assert clean(verify(strict_lower)), str(verify(strict_lower))

    def anti(A: Float[np.ndarray, "N, N"]) -> Float[np.ndarray, "M"]:
        return A[np.mask_indices(A.shape[0], lambda m, k: np.fliplr(np.triu(m, k)))]

    r = verify(anti)
    (count,), = r.result
    assert count.constant is None and count.symbols.isdisjoint({"N"}), str(r)


# -- review of the generator patches ---------------------------------------------------------


class _RowJitter(np.random.Generator):
    """A project's generator whose ``normal`` draws one value per row: a subclass is the
    project's code, which verify must trace as written, not as NumPy's ``normal``."""

    def normal(self, loc=0.0, scale=1.0, size=None):
        return super().normal(loc, scale, (size[0], 1))


_JITTER = _RowJitter(np.random.PCG64(0))


def test_a_generator_subclass_is_traced_as_written():
    """The module's generators were swapped by ``isinstance``, and ``default_rng(rng)`` made a
    new one: a subclass's own ``normal`` was replaced by NumPy's model, and its ``[N, 1]``
    passed as ``[N, D]``."""
    def noise(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        return _JITTER.normal(size=X.shape)

    def normalised(X: Float[np.ndarray, "N, D"], rng: object = None) -> Float[np.ndarray, "N, D"]:
        return np.random.default_rng(rng or _JITTER).normal(size=X.shape)  # sklearn's idiom

    for f in (noise, normalised):
        assert f(np.ones((4, 3))).shape == (4, 1)
        r = verify(f)
        assert "return-shape" in kinds(r) and type(_JITTER) is _RowJitter, (f.__name__, str(r))


class _Unconfigured:
    """A lazy proxy (Django's ``settings``, werkzeug's ``request``): reading ``__class__``
    outside its context raises, and ``isinstance`` reads it."""

    @property
    def __class__(self):
        raise RuntimeError("settings are not configured")


def test_a_module_with_a_lazy_proxy_global_verifies():
    """The scan for a module's generators crashed verify on any function of such a module."""
    namespace = {"np": np, "settings": _Unconfigured()}
    exec("def double(X):\n    return X * 2\n", namespace)
    r = verify(namespace["double"], "N, D => N, D")
    assert clean(r) and r.result == ((N, Dim.symbol("D")),), str(r)


def test_legacy_choice_needs_a_1d_population():
    """``np.random.choice(X, k)`` and a ``RandomState``'s raise on a 2-D ``X`` (only a
    ``Generator``'s picks rows): the rows model passed code that crashes at every size."""
    def legacy(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "4, D"]:
        return np.random.choice(X, 4)

    def seeded(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "4, D"]:
        return np.random.RandomState(0).choice(X, 4)

    def rows(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "4, D"]:
        last = X[:, 0].argmax() + 1  # a 0-d array is a population size, as an int is
        picks = np.random.choice(last, 4) * np.random.RandomState(0).choice(last, 4) % last
        return X[np.random.choice(len(X), 4)] + np.random.default_rng(0).choice(X, 4) + X[picks]

    for f in (legacy, seeded):
        r = verify(f)
        assert kinds(r) == ["op-shape"] and "1-dimensional, got [N, D]" in str(r), str(r)
    assert rows(np.arange(12.0).reshape(4, 3)).shape == (4, 3)
    assert clean(verify(rows)), str(verify(rows))


def test_a_replaced_default_rng_is_not_kept():
    """verify wraps ``np.random.default_rng`` per original; a test's stand-in is a new original
    each time, and an unbounded cache kept every one alive (as ``np.zeros``' bounded one does
    not)."""
    import gc
    import weakref
    from unittest import mock

    def double(X: Float[np.ndarray, "N"]) -> Float[np.ndarray, "N"]:
        return X * 2

    real, alive = np.random.default_rng, []
    for seed in range(40):
        def stand_in(*args, _seed=seed, **kw):
            return real(_seed)

        alive.append(weakref.ref(stand_in))
        with mock.patch("numpy.random.default_rng", stand_in):
            assert clean(verify(double))
        del stand_in
    gc.collect()
    assert sum(r() is not None for r in alive) <= 16


def test_verify_in_threads_puts_every_patch_back():
    """Two threads' traces saved and restored the same process-wide patches interleaved: the
    one that finished last put back the other's patch, and ``max``, ``len`` and NumPy's
    generators stayed tensig's after verify returned."""
    import builtins
    import threading
    import time

    def slow(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        time.sleep(0.002)  # another thread's verify starts meanwhile
        return X[:max(1, len(X))] + np.random.default_rng(0).normal(size=X.shape)

    before = (builtins.max, builtins.len, builtins.range, np.random.default_rng,
              np.random.RandomState, np.zeros)
    reports: list = []
    threads = [threading.Thread(target=lambda: reports.extend(verify(slow) for _ in range(5)))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = (builtins.max, builtins.len, builtins.range, np.random.default_rng,
             np.random.RandomState, np.zeros)
    assert [a is b for a, b in zip(before, after, strict=True)] == [True] * 6
    assert len(reports) == 15 and all(clean(r) for r in reports), [str(r) for r in reports]


# -- floor division of a size: halves, heads ---------------------------------------------------


def rotate_half(x: Float[torch.Tensor, "B, H, T, D"]) -> Float[torch.Tensor, "B, H, T, D"]:
    """Rotary embeddings' half rotation, as Llama-style attention writes it."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def halves(x: Float[np.ndarray, "B, T, D"]
           ) -> tuple[Float[np.ndarray, "B, T // 2, D"], Float[np.ndarray, "B, T - T // 2, D"]]:
    half = x.shape[1] // 2
    return x[:, :half], x[:, half:]


def frame_pairs(x: Float[torch.Tensor, "B, T, D"]) -> Float[torch.Tensor, "B, T // 2, 2*D"]:
    """Pairs of frames, an odd last one dropped first: ``T - T % 2`` is ``2*(T // 2)``."""
    B, T, D = x.shape
    return x[:, : T - T % 2].reshape(B, T // 2, 2 * D)


def test_slices_at_half_a_size_are_valid_at_every_size():
    """``x[:, :T // 2]`` is valid for any ``T``: it warned "requires T divisible by 2" (and,
    hidden behind it on the same line, "assumes T // 2 <= T"); a reshape whose element counts
    agree at every size (``2*(T // 2) == T - T % 2``) needs no divisibility either."""
    for f in (rotate_half, halves, frame_pairs):
        assert clean(verify(f)), (f.__name__, str(verify(f)))


def test_a_slice_bound_negative_at_every_size_counts_from_the_end():
    """``c[:-k]`` and ``x[-k:]`` with ``k = len(w)`` count from the end, as ``x[:-3]`` does: a
    cumulative-sum moving average's ``c[k:] - c[:-k]`` was ``[-K]`` against ``[T - K + 1]``."""
    def windows(x: Float[np.ndarray, "T, D"], w: Float[np.ndarray, "K"]
                ) -> Float[np.ndarray, "T-K+1, D"]:
        c = np.cumsum(np.vstack([np.zeros((1, x.shape[1])), x]), axis=0)
        return c[len(w):] - c[:-len(w)]

    assert clean(verify(windows)), str(verify(windows))
    r = verify(lambda x, w: x[1:-len(w)], "T; K => T - K - 1")
    assert clean(r), str(r)
    assert kinds(verify(lambda x, w: x[:-len(w)], "T; K => T")) == ["return-shape"]


def test_a_start_from_the_end_longer_than_the_axis_is_assumed_shorter():
    """``x[-k:]`` is ``[K]`` only where ``K <= T`` (NumPy clips: all ``T`` of them where the
    axis is shorter): verified silently, ``K`` was wrong at ``T = 3, K = 5``."""
    for body, out in (("x[-len(w):]", "K"), ("x[-len(w):-1]", "K - 1")):
        r = verify(eval(f"lambda x, w: {body}"), f"T; K => {out}")
        assert kinds(r) == ["assumption"] and "assumes K <= T" in str(r), (body, str(r))
    assert clean(verify(lambda x: x[-(len(x) + 2):], "T => T"))


def test_floor_division_warns_where_a_check_relies_on_it():
    """Heads of ``D // H`` in a view, equal pieces, and the two halves of a GLU multiplied
    are right only where the division is exact: still the warning, at the line that divides
    (the check that relies on it may run outside the function: the return check)."""
    def heads(x: Float[torch.Tensor, "B, T, D"], n_head: int = 4
              ) -> Float[torch.Tensor, "B, 4, T, E"]:
        B, T, D = x.shape
        return x.view(B, T, n_head, D // n_head).transpose(1, 2)

    def glu(x: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, E"]:
        d = x.shape[-1] // 2
        a, b = x[:, :d], x[:, d:]
        return a * (1 / (1 + np.exp(-b)))

    def pairs(x: Float[np.ndarray, "T, D"]) -> Float[np.ndarray, "P, E"]:
        return x.reshape(x.shape[0] // 2, 2 * x.shape[1])  # two frames per row

    for f, text, use in ((heads, "D divisible by 4", ".view("), (glu, "D divisible by 2", "// 2"),
                         (pairs, "T divisible by 2", ".reshape(")):
        r = verify(f)
        assert [x.message for x in r] == [f"requires {text}"], (f.__name__, str(r))
        assert use in linecache.getline(r.findings[0].file, r.findings[0].line), str(r)


def test_a_floor_of_a_shifted_size_is_an_assumption_not_an_error():
    """``x[:, :T - 1].reshape(B, 2, (T - 1) // 2)`` is right at every odd ``T``: it was an
    error, the division tried only at even ``T`` (multiples of 2, where ``T - 1`` is odd).
    A reshape that fails at every ``T`` stays an error."""
    def odd(x: Float[np.ndarray, "B, T"]):
        B, T = x.shape
        return x[:, :T - 1].reshape(B, 2, (T - 1) // 2)

    def wrong(x: Float[np.ndarray, "B, T"]):
        B, T = x.shape
        return x[:, :T - 1].reshape(B, 3, (T - 1) // 2)

    r = verify(odd)
    assert [x.message for x in r] == ["requires T - 1 divisible by 2"], str(r)
    assert ".reshape(" in linecache.getline(r.findings[0].file, r.findings[0].line)
    assert not verify(wrong).ok and "reshape" in kinds(verify(wrong)), str(verify(wrong))


def test_a_floor_of_a_shifted_size_beside_another_floor_is_an_assumption():
    """The reshape relies on ``(T - 1) // 2`` alone: a ``T // 2`` elsewhere (a slice, valid at
    every ``T``) must not ask for sizes where both are exact (none: ``T`` even and odd), which
    made the reshape an error again."""
    def halves(x: Float[np.ndarray, "B, T"]):
        B, T = x.shape
        first = x[:, :T // 2]
        return first, x[:, :T - 1].reshape(B, 2, (T - 1) // 2)

    r = verify(halves)
    assert [x.message for x in r] == ["requires T - 1 divisible by 2"], str(r)
    assert ".reshape(" in linecache.getline(r.findings[0].file, r.findings[0].line)


def test_a_declared_floor_is_no_division_to_shift_for():
    """Only the code's divisions are assumptions (reported where a check relies on them):
    ``2 * ((T - 1) // 2)`` declared for ``[T - 1]`` is wrong at every even ``T``, and sizes
    shifted to odd ``T`` for it said verified without a word."""
    def declared(x: Float[np.ndarray, "B, T"]) -> Float[np.ndarray, "B, 2*((T-1)//2)"]:
        _ = x[:, :x.shape[1] // 2]  # a floor of the code's, valid at every T
        return x[:, :x.shape[1] - 1]

    assert kinds(verify(declared)) == ["return-shape"], str(verify(declared))


def test_a_fit_or_the_return_check_relying_on_a_floor_warns_at_its_line():
    """A library function verify fits (``np.repeat``, ``np.tile``) runs at sizes where every
    division is exact, so ``np.repeat(x[:T // 2], 2)`` fitted as ``[T]``: "verified for all
    T", though it is ``[T - 1]`` at odd ``T``.  And a return check that relied on a floor
    reported it at the line that called verify, not in the function."""
    def repeated(x: Float[np.ndarray, "T"]) -> Float[np.ndarray, "T"]:
        half = x.shape[0] // 2
        return np.repeat(x[:half], 2)

    def tiled(x: Float[np.ndarray, "T, D"]) -> Float[np.ndarray, "T, D"]:
        half = len(x) // 2
        return np.tile(x[:half], (2, 1))

    def trimmed(x: Float[torch.Tensor, "B, T"]) -> Float[torch.Tensor, "B, T"]:
        usable = x.shape[1] // 4 * 4  # whole blocks of 4
        return x[:, :usable]

    assert np.repeat(np.ones(5)[:2], 2).shape == (4,)  # not [T] at T = 5
    for f in (repeated, tiled, trimmed):
        r = verify(f)
        assert [x.message for x in r] in (["requires T divisible by 2"],
                                          ["requires T divisible by 4"]), (f.__name__, str(r))
        assert "//" in linecache.getline(r.findings[0].file, r.findings[0].line), str(r)


def test_a_sample_without_replacement_larger_than_its_population_is_an_error():
    """``choice(N, N + 1, replace=False)`` raises at every ``N``: an error naming both sizes and
    the fix; with replacement the same sample is valid."""
    def pick(X: Float[np.ndarray, "N, D"], rng: np.random.Generator) -> Float[np.ndarray, "M, D"]:
        return X[rng.choice(len(X), len(X) + 1, replace=False)]

    def rows(X: Float[np.ndarray, "N, 3"], rng: np.random.Generator) -> Float[np.ndarray, "N, 5"]:
        return rng.choice(X, 5, replace=False, axis=1)  # 5 of 3 columns

    for f, text in ((pick, "choice of N + 1 from N"), (rows, "choice of 5 from 3")):
        r = verify(f)
        assert kinds(r) == ["op-shape"] and text in str(r) and "replace=True" in str(r), str(r)
    with pytest.raises(ValueError):
        np.random.default_rng(0).choice(4, 5, replace=False)

    def bootstrap(X: Float[np.ndarray, "N, D"], rng: np.random.Generator
                  ) -> Float[np.ndarray, "N + 1, D"]:
        return X[rng.choice(len(X), len(X) + 1)]

    assert clean(verify(bootstrap)), str(verify(bootstrap))


def test_a_python_generator_parameter_is_no_numpy_generator():
    """``typing.Generator`` and ``collections.abc.Generator`` share NumPy's class name: such a
    parameter was traced with a NumPy generator (the note: "'Generator' object is not an
    iterator"); it has no stand-in, and verify says so."""
    def scaled(X: Float[np.ndarray, "N"], g: collections.abc.Generator) -> Float[np.ndarray, "N"]:
        return X * next(g)

    def typed(X: Float[np.ndarray, "N"], g: typing.Generator[float, None, None]
              ) -> Float[np.ndarray, "N"]:
        return X * next(g)

    for f in (scaled, typed):
        with pytest.raises(TypeError, match="'g': no shape annotation"):
            verify(f)


def test_a_default_generator_before_an_array_parameter_samples_symbolically():
    """A default in a gap before a later array is passed explicitly, so the patched defaults
    did not reach it: the real generator turned ``N`` and ``D`` into numbers (two warnings)."""
    def noisy(X: Float[np.ndarray, "N, D"], rng=_RNG,
              Y: Float[np.ndarray, "N, D"] = None) -> Float[np.ndarray, "N, D"]:
        return X + rng.normal(size=X.shape) + Y

    r = verify(noisy)
    assert clean(r) and type(noisy.__defaults__[0]) is np.random.Generator, str(r)


# -- a fraction of a size --------------------------------------------------------------------


def test_a_float_fraction_of_a_size_is_never_a_witness_constant():
    """``int(N * 0.1)`` was ``1`` (the witness's tenth): a ``[1, D]`` validation set at every
    ``N``.  Rounded with ``math.floor``/``round`` it is a fresh size (``math.ceil(N / 32)``, a
    size over an int, is ``(N + 31) // 32``); ``int()`` must return a plain int: a fresh
    size's number, read back as it (negated too) under stated assumptions."""
    import math

    def split(X: Float[np.ndarray, "N, D"]) -> tuple[Float[np.ndarray, "V, D"],
                                                     Float[np.ndarray, "M, D"]]:
        n_val = math.floor(X.shape[0] * 0.1)
        n_batches = math.ceil(len(X) / 32)
        return X[len(X) - n_val:], np.zeros((n_batches, X.shape[1]))

    r = verify(split)
    (val, _), (batches, _) = r.result
    assert clean(r) and val.constant is None and not {"N", "D"} & val.symbols, str(r)
    assert batches == (N + 31) // 32, str(r)

    def train(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "M, D"]:
        return X[:round(0.8 * len(X))]

    r = verify(train)
    (m, _), = r.result
    assert m.constant is None and [x.message.split(":")[0] for x in r] == [f"assumes {m} <= N"]

    def split_int(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "V, D"]:
        n_val = int(len(X) * 0.1)
        return X[-n_val:]

    r = verify(split_int)
    (val, _), = r.result
    assert val.constant is None and not {"N", "D"} & val.symbols and not r.errors, str(r)
    assert r.findings[0].message.startswith(f"assumes int(1.1) is {val}:"), str(r)


def test_a_float_fraction_of_a_size_compared_is_an_assumption():
    """``if N * 0.1 > 5`` (and ``N > 5.5``) were decided at the witness without a word:
    "verified for all N" though only one branch ran.  Now each is an assumption, as a size's
    own branch is; ``N > 5.5`` is ``N > 5``, a bound that can hold at every size."""
    def big_batch(x: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "M, D"]:
        if x.shape[0] * 0.1 > 5:
            return x[:5]
        return x

    def half(x: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "M, D"]:
        return x[:3] if x.shape[0] > 5.5 else x

    def positive(x: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        return x if x.shape[0] > 0.5 else x[:0]

    r = verify(big_batch)
    assert kinds(r) == ["assumption"] and "> 5)" in r.findings[0].message, str(r)
    assert "if x.shape[0] * 0.1" in linecache.getline(r.findings[0].file, r.findings[0].line)
    r = verify(half)
    assert r.findings[0].message.split(":")[0] in ("assumes N > 5", "assumes not (N > 5)"), str(r)
    assert clean(verify(positive)), str(verify(positive))


def test_a_size_compared_with_a_float_fraction_of_a_size_is_that_assumption():
    """``N > D * 0.1`` took the float's floor, a fresh size: "assumes N > n1", a size the
    user never wrote, decided at its own witness (3), not at ``D * 0.1``'s value."""
    def few(x: Float[np.ndarray, "N, D"]):
        return x[:1] if x.shape[0] > x.shape[1] * 0.1 else x

    r = verify(few)
    assert kinds(r) == ["assumption"] and "< N" in r.findings[0].message, str(r)
    assert "n1" not in r.findings[0].message, str(r)


def test_a_size_equal_to_a_float_is_decided_as_its_integer():
    """``x.shape[0] == 3.0`` was False at every N (float's own comparison, by identity), so a
    branch taken at N = 3 was never seen; and ``N / 2 == 3`` was decided at the witness
    without a word.  The first is ``N == 3``, the second an assumption; ``N != 3.5`` holds at
    every size."""
    def three(x: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        return x[:3] if x.shape[0] == 3.0 else x

    def half_three(x: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        return x[:3] if x.shape[0] / 2 == 3 else x

    def never(x: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        return x if x.shape[0] != 3.5 else x[:1]

    r = verify(three)
    assert kinds(r) == ["assumption"] and "N == 3" in r.findings[0].message, str(r)
    r = verify(half_three)
    assert kinds(r) == ["assumption"] and "== 3" in r.findings[0].message, str(r)
    assert clean(verify(never)), str(verify(never))


# -- a generator passed in -------------------------------------------------------------------


_SEEDED, _KEEP = np.random.default_rng(0), np.random.RandomState(1)  # defaults below


def kmeans_init(X: Float[np.ndarray, "N, D"], k: int = 3, rng=_SEEDED
                ) -> Float[np.ndarray, "3, D"]:
    return X[rng.permutation(X.shape[0])[:k]]


def kmeans_pp(X: Float[np.ndarray, "N, D"], rng: np.random.Generator, *,
              keep=_KEEP) -> Float[np.ndarray, "N, D"]:
    first = X[rng.integers(X.shape[0])]
    return X[keep.permutation(len(X))] - first


def test_generators_given_as_arguments_or_defaults_take_symbolic_sizes():
    """A generator in a default or as a ``np.random.Generator`` parameter crashed
    ``rng.permutation(N)`` (or could not be verified): it is a sampler, as a module's are."""
    default = kmeans_init.__defaults__[1]
    r = verify(kmeans_init)
    assert r.complete and [x.message.split(":")[0] for x in r] == ["assumes 3 <= N"], str(r)
    assert clean(verify(kmeans_pp)), str(verify(kmeans_pp))
    assert kmeans_init.__defaults__[1] is default and type(default) is np.random.Generator
    assert type(kmeans_pp.__kwdefaults__["keep"]) is np.random.RandomState


def test_sampling_without_replacement_needs_enough_items():
    """``choice(n, k, replace=False)`` is valid only for ``k <= n``: assumed, or an error where
    it fails at every size (it was taken with no finding)."""
    def subsample(X: Float[np.ndarray, "N, D"], Y: Float[np.ndarray, "M, D"]
                  ) -> Float[np.ndarray, "M, D"]:
        rng = np.random.default_rng(0)
        return X[rng.choice(len(X), len(Y), replace=False)]

    def too_many(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N + 1, D"]:
        return X[np.random.choice(len(X), len(X) + 1, replace=False)]

    def with_replacement(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N + 1, D"]:
        return X[np.random.choice(len(X), len(X) + 1)]

    assert [x.message.split(":")[0] for x in verify(subsample)] == ["assumes M <= N"]
    assert kinds(verify(too_many)) == ["op-shape"], str(verify(too_many))
    assert clean(verify(with_replacement)), str(verify(with_replacement))


# -- one line, two conditions ----------------------------------------------------------------


def test_two_conditions_on_one_line_are_both_reported():
    """Assumptions were kept once per line (a loop over a witness repeats one per step), so
    ``X[:len(Y)], X[:len(Z)]`` reported ``M <= N`` and hid ``K <= N``."""
    def heads_of(X: Float[np.ndarray, "N, D"], Y: Float[np.ndarray, "M, D"],
                 Z: Float[np.ndarray, "K, D"]) -> tuple[Float[np.ndarray, "M, D"],
                                                       Float[np.ndarray, "K, D"]]:
        return X[:len(Y)], X[:len(Z)]

    def loop(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "D"]:
        total = X[0]
        for i in range(1, 8):
            total = total + X[i]  # one condition per step: reported once
        return total

    assert [x.message.split(":")[0] for x in verify(heads_of)] == ["assumes M <= N",
                                                                   "assumes K <= N"]
    assert len(verify(loop).findings) == 1, str(verify(loop))


# -- a division by a size ------------------------------------------------------------------------


def split_heads(x: Float[torch.Tensor, "B, T, D"], q: Float[torch.Tensor, "B, H, T, K"]
                ) -> Float[torch.Tensor, "B, H, T, K"]:
    B, T, D = x.shape
    H = q.shape[1]
    return x.view(B, T, H, D // H).transpose(1, 2) + q


def split_by_a_declared_width(x: Float[torch.Tensor, "B, T, D"], w: Float[torch.Tensor, "4, K"]
                              ) -> Float[torch.Tensor, "B, 4, T, D // 4"]:
    B, T, D = x.shape
    H = w.shape[0]  # declared 4: a number, not a symbol
    return x.view(B, T, H, D // H).transpose(1, 2)


def _heads_and_back(x: Float[torch.Tensor, "B, T, D"], w: Float[torch.Tensor, "H, K"]
                    ) -> Float[torch.Tensor, "B, T, D"]:
    B, T, D = x.shape
    return x.view(B, T, w.shape[0], D // w.shape[0]).transpose(1, 2).reshape(B, T, D)


def test_a_division_by_a_symbolic_size_is_exact_where_a_check_relies_on_it():
    """``D // H`` with ``H`` a size of another argument was the witnesses' quotient, a constant
    (0 at D=8, H=12): the multi-head split failed as a reshape into ``[B, T, H, 0]``; then it
    stopped the trace with a note.  It is a size of its own (sym_sizes.quotient), ``H`` times
    it ``D`` where H divides D: the view requires that (a warning), and the heads' width meets
    ``K``, which the signature leaves free (torch raises where K != D // H)."""
    x = torch.ones(2, 3, 8)
    assert _heads_and_back(x, torch.ones(4, 1)).shape == (2, 3, 8)
    with pytest.raises(RuntimeError):
        _heads_and_back(torch.ones(2, 3, 7), torch.ones(2, 1))  # 2 does not divide 7
    assert split_heads(x, torch.ones(2, 4, 3, 2)).shape == (2, 4, 3, 2)
    with pytest.raises(RuntimeError):
        split_heads(x, torch.ones(2, 4, 3, 3))  # K = 3, D // H = 2
    r = verify(_heads_and_back)
    assert r.complete and [f.message for f in r] == ["requires D divisible by H"], str(r)
    r = verify(split_heads)
    assert r.complete and "requires D divisible by H" in str(r) and "TS101" in \
        [f.code for f in r], str(r)


def _heads_of_a_bias(x: Float[np.ndarray, "B, T, D"], bias: Float[np.ndarray, "H, T, T"]
                     ) -> Float[np.ndarray, "B, T, D"]:
    B, T, D = x.shape
    H = bias.shape[0]
    q = x.reshape(B, T, H, D // H).transpose(0, 2, 1, 3)
    s = q @ q.transpose(0, 1, 3, 2) + bias
    return (s @ q).transpose(0, 2, 1, 3).reshape(B, T, D)


def test_a_division_by_a_symbolic_size_is_required_once():
    """Attention heads of a size read from a per-head bias: the split and the merge back, on
    two lines, both rely on H dividing D; the requirement is said once, as ``D // 4``'s is.
    Oracle: NumPy at D = 8, H = 4 (runs) and D = 7, H = 2 (raises)."""
    assert _heads_of_a_bias(np.ones((2, 3, 8)), np.ones((4, 3, 3))).shape == (2, 3, 8)
    with pytest.raises(ValueError):
        _heads_of_a_bias(np.ones((2, 3, 7)), np.ones((2, 3, 3)))
    r = verify(_heads_of_a_bias)
    assert r.complete and [f.message for f in r] == ["requires D divisible by H"], str(r)


def test_a_division_by_a_declared_size_is_its_number():
    """A divisor read from an axis declared as a number (``4``) divides as that number: the
    usual floor-division rules, no note."""
    r = verify(split_by_a_declared_width)
    assert r.complete and not r.notes and kinds(r) == ["assumption"], str(r)
    assert "divisible by 4" in str(r), str(r)


def test_a_division_by_a_factor_of_the_dividend_is_the_quotient():
    """``4*G // G`` (Mistral's ``n_rep``) and ``B*H*W // (H*W)`` (Swin's batch back from its
    windows) divide as polynomials: the quotient, no note; a size that is no factor is a size
    of its own, required to divide where the view needs it (7 rows of width 1, at B = 2 and
    H = 3, are no 2 rows): ``(B*H + 1) // H`` is ``B + 1 // H``, at least ``B``, so the
    view's -1 needs no assumption that it is not 0."""
    def repeat_kv(k: Float[torch.Tensor, "B, G, T, D"], q: Float[torch.Tensor, "B, 4*G, T, D"]
                  ) -> Float[torch.Tensor, "B, 4*G, T, D"]:
        b, g, t, d = k.shape
        n_rep = q.shape[1] // g
        assert q.shape[1] % g == 0
        return k[:, :, None].expand(b, g, n_rep, t, d).reshape(b, g * n_rep, t, d)

    def batch_of_windows(w: Float[torch.Tensor, "B*H*W, C"], h: Float[torch.Tensor, "H, W"]
                         ) -> Float[torch.Tensor, "B, H*W, C"]:
        return w.view(w.shape[0] // (h.shape[0] * h.shape[1]), -1, w.shape[-1])

    for fn in (repeat_kv, batch_of_windows):
        r = verify(fn)
        assert clean(r), str(r)
    r = verify(lambda x, y: x.view(x.shape[0] // y.shape[0], -1), "B*H+1, C; H => n, m")
    assert r.complete and kinds(r) == ["assumption"] and "divisible by B + " in str(r), str(r)


def test_a_list_of_one_array_per_loop_step_stacks_to_the_loop_s_size():
    """An RNN unrolled by hand appends one output per step of ``range(T)`` and stacks them:
    the list held the witness's number of arrays, and the stack was a constant (``returns
    [B, 13, D]``, a false error on every such loop).  One array per step of a loop over a
    symbolic range (or over an array's rows) stacks to that size; another count stays one."""
    def rnn(x: Float[torch.Tensor, "B, T, D"], w: Float[torch.Tensor, "D, D"]
            ) -> Float[torch.Tensor, "B, T, D"]:
        h = x.new_zeros(x.shape[0], x.shape[2])
        outs = []
        for t in range(x.shape[1]):
            h = torch.tanh(x[:, t] @ w + h)
            outs.append(h)
        return torch.stack(outs, dim=1)

    def rows(x: Float[np.ndarray, "T, D"]) -> Float[np.ndarray, "3*T, D"]:
        return np.concatenate([np.stack([r, r, r]) for r in x])

    def pairs(x: Float[np.ndarray, "T, D"]) -> Float[np.ndarray, "T - 1, D"]:
        return np.stack([x[i] + x[i - 1] for i in range(1, x.shape[0])])

    for fn in (rnn, rows, pairs):
        r = verify(fn)
        assert clean(r), f"{fn.__name__}: {r}"

    def twice(x: Float[np.ndarray, "T, D"]) -> Float[np.ndarray, "T, D"]:
        out = []
        for t in range(x.shape[0]):
            out += [x[t], x[t]]
        return np.stack(out)  # 2*T rows: no longer one per step

    assert "return-shape" in kinds(verify(twice)), str(verify(twice))


def test_a_slice_up_to_a_loop_step_plus_one_is_in_range():
    """``x[:, t:t + 1]`` in a loop over ``range(T)``: its first steps' stops (2, 3, ...) were
    assumed ``<= T`` ('assumes 2 <= T'), though a step's ``t + 1`` never passes ``T``; an
    index ``x[:, t]`` was already decided so."""
    def steps(x: Float[torch.Tensor, "B, T, D"]) -> Float[torch.Tensor, "B, T, D"]:
        return torch.cat([x[:, t:t + 1] * 2 for t in range(x.shape[1])], dim=1)
    r = verify(steps)
    assert clean(r), str(r)


def test_a_size_padded_to_a_multiple_divides_without_a_requirement():
    """Swin pads to a multiple of its window: ``H + (7 - H % 7) % 7`` is divisible by 7 at every
    ``H``, which the canonical form cannot show ('requires H + 6*(H % 7) % 7 divisible by 7' on
    correct code); one period of its remainders does.  ``H + H % 7`` still requires it."""
    def windows(x: Float[torch.Tensor, "B, H, C"]) -> Float[torch.Tensor, "B*((H+6)//7), 7, C"]:
        b, h, c = x.shape
        pad = (7 - h % 7) % 7
        x = torch.nn.functional.pad(x, (0, 0, 0, pad))
        return x.view(b, (h + pad) // 7, 7, c).reshape(-1, 7, c)

    r = verify(windows)
    assert clean(r), str(r)
    r = verify(lambda x: x.view((x.shape[0] + x.shape[0] % 7) // 7, 7), "H => n, 7")
    assert "requires H + H % 7 divisible by 7" in str(r), str(r)


def test_a_division_shown_exact_compares_at_sizes_that_keep_the_pads():
    """Sizes that are multiples of every divisor make ``(7 - H % 7) % 7`` vanish: with the
    pads swapped (the height's on the width), the window view compared equal there and
    passed silently; a division shown exact holds at any size, so the witnesses decide."""
    def swapped(x: Float[torch.Tensor, "B, H, W"]) -> Float[torch.Tensor, "n, 49"]:
        b, h, w = x.shape
        pad_r, pad_b = (7 - w % 7) % 7, (7 - h % 7) % 7
        x = torch.nn.functional.pad(x, (0, pad_b, 0, pad_r))  # the pads swapped
        return x.view(b, (h + pad_b) // 7, 7, (w + pad_r) // 7, 7).reshape(-1, 49)

    assert "reshape" in kinds(verify(swapped)), str(verify(swapped))


def test_a_mask_written_in_place_between_two_selections_counts_anew():
    """``logits[m]`` and ``labels[m]`` share one count while ``m`` is unchanged; a write into
    ``m`` between them (``m[:, 0] = False``, ``m.logical_and_(k)``) changes how many elements
    it selects, so the second selection is a size of its own, not silently the first's."""
    def assigned(logits: Float[torch.Tensor, "B, T, V"], labels: Int[torch.Tensor, "B, T"]
                 ) -> Float[torch.Tensor, ""]:
        m = labels != -100
        picked = logits[m]
        m[:, 0] = False
        return torch.nn.functional.cross_entropy(picked, labels[m])

    def anded(logits: Float[torch.Tensor, "B, T, V"], labels: Int[torch.Tensor, "B, T"]
              ) -> Float[torch.Tensor, ""]:
        m = labels != -100
        picked = logits[m]
        m.logical_and_(labels > 0)
        return torch.nn.functional.cross_entropy(picked, labels[m])

    def numpy_assigned(x: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"]
                       ) -> Float[np.ndarray, "n, D"]:
        m = y > 0
        picked = x[m]
        m[0] = False
        return picked + x[m]

    for fn in (assigned, anded, numpy_assigned):
        r = verify(fn)
        assert not r.ok and {"contraction", "broadcast"} & set(kinds(r)), f"{fn.__name__}: {r}"


def test_numbers_written_in_place_between_two_nonzeros_count_anew():
    """``nonzero`` and ``argwhere`` of numbers count their nonzero elements, and a write into
    the numbers between two of them (``a[0] = 1.0``, ``a.add_(1.0)``) changes that count: the
    two were one size, and ``x[i] + x[j]`` verified though NumPy refuses [2] + [3]."""
    def numpy_set(a: Float[np.ndarray, "N"], x: Float[np.ndarray, "N"]) -> Float[np.ndarray, "K"]:
        i = np.nonzero(a)[0]
        a[0] = 1.0
        return x[i] + x[np.nonzero(a)[0]]

    def torch_added(a: Float[torch.Tensor, "N"]) -> Int[torch.Tensor, "K, 1"]:
        i = torch.nonzero(a)
        a.add_(1.0)
        return i + torch.nonzero(a)

    for fn in (numpy_set, torch_added):
        r = verify(fn)
        assert "broadcast" in kinds(r), f"{fn.__name__}: {r}"
    with pytest.raises(ValueError):
        numpy_set(np.array([0.0, 1.0, 1.0, 0.0]), np.ones(4))


def test_a_literal_list_is_no_loop_s_steps():
    """Stacking joins a list to a loop's size by its count at the witnesses: a loop over a
    mask's rows (3 at the witness) or over ``range(T // 2)`` (5) must not turn a list of 3 or
    5 arrays into that size, and two loops of one count at the witnesses but of different
    sizes (``T`` and ``S - 6`` at 13) leave a list of that many to its count."""
    def coordinates(x: Float[torch.Tensor, "B, D"]) -> Float[torch.Tensor, "3, D"]:
        idx = (x[:, 0] > 0).nonzero()
        acc = x[0]
        for i in range(idx.shape[0]):
            acc = acc + x[idx[i, 0]]
        return torch.stack([acc, acc * 2, acc * 3])

    def halves(x: Float[torch.Tensor, "T, D"]) -> Float[torch.Tensor, "5, D"]:
        acc = x[0]
        for i in range(x.shape[0] // 2):
            acc = acc + x[2 * i]
        return torch.stack([acc] * 5)

    for fn, n in ((coordinates, 3), (halves, 5)):
        r = verify(fn)
        assert r.result == ((Dim.const(n), Dim.symbol("D")),), str(r)
        assert "return-shape" not in kinds(r), str(r)

    def two(x: Float[torch.Tensor, "A, T, D"], y: Float[torch.Tensor, "S, D"]
            ) -> Float[torch.Tensor, "S - 6, D"]:
        outs = []
        for t in range(x.shape[1]):
            outs.append(x[0, t])
        for _ in range(y.shape[0] - 6):
            pass
        return torch.stack(outs)  # T rows, not S - 6

    w = _witnesses("ATDS")  # the premise: S - 6 and T of one count at the witnesses
    assert w["S"] - 6 == w["T"], w
    r = verify(two)
    assert "return-shape" in kinds(r), str(r)


def test_loops_of_a_list_s_count_are_named_in_the_same_order_under_every_hash_seed():
    """A list of 11 items after loops over ``range(T)`` (11 at the witness) and ``range(11)``
    stops verification naming both loops' sizes: in one order, not the set's, which follows
    ``PYTHONHASHSEED`` (seeds 0 and 1 gave the two orders)."""
    code = ("import numpy as np\n"
            "from tensig.check.verify import verify\n"
            "def f(x):\n"
            "    items = [x[0]]\n"
            "    for _ in range(x.shape[0]):\n"
            "        pass\n"
            "    for _ in range(11):\n"
            "        pass\n"
            "    return np.stack(items + [x[k] for k in range(1, 11)])\n"
            "print(verify(f, 'T, D => T, D').notes)\n")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout
            for seed in range(4)}
    assert len(outs) == 1 and "steps over T and a literal count" in outs.pop(), outs


def test_a_division_by_a_size_that_can_be_0_is_the_quotient_where_it_is_not():
    """``(G*T - G) // (T - 1)`` is ``G`` as polynomials, but at ``T = 1`` the code divides by
    zero: not verified for all sizes, but for those where ``T - 1`` is not 0 (an assumption,
    as ``D // heads`` is)."""
    r = verify(lambda q, k: q.view(q.shape[0] // (k.shape[0] - 1), -1),
               "G*T - G, D; T => G, T*D - D")
    assert kinds(r) == ["assumption"] and "T - 1 >= 1" in r.findings[0].message, str(r)
    assert not r.notes, str(r)


def test_a_pad_that_reflects_or_crops_requires_its_axis_long_enough():
    """``F.pad`` by hand widens each axis by its pair; a reflection needs an element past each
    pad, a circular pad wraps once at most, and negative pads crop no more than the axis:
    torch refuses the call otherwise, so each is a requirement ('assumes 21 <= W'), not a
    shape verified for all ``W``.  A constant pad needs none."""
    def reflect(x: Float[torch.Tensor, "B, C, W"]) -> Float[torch.Tensor, "B, C, W + 40"]:
        return torch.nn.functional.pad(x, (20, 20), mode="reflect")

    def circular(x: Float[torch.Tensor, "B, C, W"]) -> Float[torch.Tensor, "B, C, W + 16"]:
        return torch.nn.functional.pad(x, (16, 0), mode="circular")

    def crop(x: Float[torch.Tensor, "B, W"]) -> Float[torch.Tensor, "B, W - 40"]:
        return torch.nn.functional.pad(x, (-20, -20))

    def constant(x: Float[torch.Tensor, "B, W"]) -> Float[torch.Tensor, "B, W + 40"]:
        return torch.nn.functional.pad(x, (20, 20))

    for fn, need in ((reflect, "21 <= W"), (circular, "16 <= W"), (crop, "40 <= W")):
        r = verify(fn)
        assert kinds(r) == ["assumption"] and need in str(r), f"{fn.__name__}: {r}"
    r = verify(constant)
    assert r.ok and not r.findings, str(r)


def test_a_fitted_op_s_constant_size_is_compared_with_the_sizes_below_the_fit():
    """``topk(x, 5)`` is fitted at sizes from 40 up, where every ``V`` holds 5 elements: it
    verified for all ``V``, though torch refuses ``V < 5``.  A constant the op is given and
    returns as a size is run at that constant less 1: refused there, it is a requirement.  A
    top-1 needs none, nor a constant the code computes otherwise (``amax``'s keepdim 1)."""
    def top5(x: Float[torch.Tensor, "B, V"]) -> Float[torch.Tensor, "B, 5"]:
        return torch.topk(x, 5, dim=-1).values

    def narrowed(x: Float[torch.Tensor, "B, V"]) -> Float[torch.Tensor, "B, 3"]:
        return x.narrow(1, 0, 3)

    for fn, need in ((top5, "assumes 5 <= V"), (narrowed, "assumes 3 <= V")):
        r = verify(fn)
        assert kinds(r) == ["assumption"] and need in str(r), f"{fn.__name__}: {r}"

    def top1(x: Float[torch.Tensor, "B, V"]) -> Float[torch.Tensor, "B, 1"]:
        return torch.topk(x, 1).values

    r = verify(top1)
    assert r.ok and not r.findings, str(r)


def test_a_fitted_torch_op_is_also_run_with_the_sizes_in_the_other_order():
    """torch's fit ran only at sizes ordered as the symbols are (``B`` 40, ``T`` 46): the
    diagonal of ``[B, T]``, ``min(B, T)``, was ``B`` for every size.  Run once with the sizes
    the other way round, as NumPy's and JAX's fits are, the difference is the assumption."""
    assert torch.diagonal(torch.zeros(5, 3)).shape == (3,)  # the oracle: min, not B
    for fn in (torch.diagonal, torch.diag):
        r = verify(lambda x, fn=fn: fn(x), "B, T => B")
        assert kinds(r) == ["assumption"] and "assumes B <= T" in str(r), str(r)
    r = verify(lambda x: torch.diagonal(x), "B, B => B")  # one symbol: no other order
    assert r.ok and not r.findings, str(r)


def test_a_slice_ahead_of_a_loop_step_left_early_is_assumed():
    """``x[:, t:t + 3]`` at a loop's first steps is in range because its last steps check it;
    a loop left before them (``break`` at ``t == 2``) never checks it, and torch clamps the
    slice (2 elements at ``T = 4``): like an index ahead, it is an assumption, of the largest
    stop the loop reached ('assumes 5 <= T'), not a shape verified for all ``T``."""
    def early(x: Float[torch.Tensor, "B, T, D"]) -> Float[torch.Tensor, "B, 3, D"]:
        for t in range(x.shape[1]):
            y = x[:, t:t + 3]
            if t == 2:
                break
        return y

    r = verify(early)
    assert kinds(r) == ["assumption"] and "assumes 5 <= T" in str(r), str(r)


def test_a_division_shown_exact_leaves_other_sizes_unequal():
    """With a division shown exact in the trace (Swin's padded window view), sizes were
    compared at the witnesses and at each plus one: ``B + 8`` and ``T`` (11 + 8 and 19, then
    12 + 8 and 20) compared equal, and a result of ``B + 8`` rows verified as ``T``."""
    def padded(x: Float[torch.Tensor, "B, H, C"], y: Float[torch.Tensor, "T"]
               ) -> Float[torch.Tensor, "T, C"]:
        b, h, c = x.shape
        pad = (7 - h % 7) % 7
        x = torch.nn.functional.pad(x, (0, 0, 0, pad))
        windows = x.view(b, (h + pad) // 7, 7, c)
        return windows.new_zeros(b + 8, c)

    w = _witnesses("BHCT")  # the premise: B + 8 and T equal at the witnesses
    assert w["B"] + 8 == w["T"], w
    assert "return-shape" in kinds(verify(padded)), str(verify(padded))


def test_a_division_shown_exact_keeps_an_assumed_division_exact():
    """The sizes along that line were multiples of every divisor, so an assumed ``(T - 1) //
    2`` was inexact on all of them: ``2 * ((T - 1) // 2)`` rows, verified as ``T - 1`` under
    the assumption, were a false error once an unrelated padded division was in the trace."""
    def halves(x: Float[np.ndarray, "T"]) -> Float[np.ndarray, "T - 1"]:
        return np.zeros(2 * ((x.shape[0] - 1) // 2))

    def halves_padded(x: Float[np.ndarray, "T"], y: Float[np.ndarray, "H"]
                      ) -> Float[np.ndarray, "T - 1"]:
        h = y.shape[0]
        np.zeros((h + (7 - h % 7) % 7) // 7)  # a division exact at every size
        return np.zeros(2 * ((x.shape[0] - 1) // 2))

    for fn in (halves, halves_padded):
        r = verify(fn)
        assert kinds(r) == ["assumption"] and "requires T - 1 divisible by 2" in str(r), str(r)


def test_a_convolution_s_bias_has_one_number_per_output_channel():
    """conv and conv_transpose by hand took the bias and did not look at it: a bias of 4 for 8
    output channels verified, though torch refuses it.  A module's own bias is right."""
    def conv(x: Float[torch.Tensor, "B, 16, H, W"], w: Float[torch.Tensor, "8, 16, 3, 3"],
             b: Float[torch.Tensor, "4"]) -> Float[torch.Tensor, "B, 8, H, W"]:
        return torch.nn.functional.conv2d(x, w, b, padding=1)

    def transposed(x: Float[torch.Tensor, "B, 16, H, W"], w: Float[torch.Tensor, "16, 8, 4, 4"],
                   b: Float[torch.Tensor, "4"]) -> Float[torch.Tensor, "B, 8, 2*H, 2*W"]:
        return torch.nn.functional.conv_transpose2d(x, w, b, stride=2, padding=1)

    for fn in (conv, transposed):
        r = verify(fn)
        assert kinds(r) == ["op-shape"] and "bias [4] for 8 output channels" in str(r), str(r)

    def module(x: Float[torch.Tensor, "B, 16, H, W"]) -> Float[torch.Tensor, "B, 8, 2*H, 2*W"]:
        return torch.nn.ConvTranspose2d(16, 8, 4, 2, 1)(torch.nn.Conv2d(16, 16, 3, padding=1)(x))

    r = verify(module)
    assert r.ok and not r.findings, str(r)


def test_a_boolean_mask_matches_the_axes_it_indexes():
    """A boolean mask does not broadcast: ``x[m]`` with ``m`` of ``[1, T]`` on ``[B, T]`` is
    refused by NumPy and torch alike; it was accepted (broadcast into the axes), and its count
    shared with selections the mask does fit."""
    def lone(x: Float[torch.Tensor, "B, T"], y: Float[torch.Tensor, "1, T"]
             ) -> Float[torch.Tensor, "n"]:
        return x[y > 0]

    def numpy_lone(x: Float[np.ndarray, "B, T"], y: Float[np.ndarray, "1, T"]
                   ) -> Float[np.ndarray, "n"]:
        return x[y > 0]

    for fn in (lone, numpy_lone):
        r = verify(fn)
        assert kinds(r) == ["index"] and "must match" in str(r), f"{fn.__name__}: {r}"


# -- a floor division by a size (DDIM's "leading" spacing: T // S) ----------------------------


def _steps_of(x: Float[np.ndarray, "T"], y: Float[np.ndarray, "S"]) -> Float[np.ndarray, "S"]:
    return np.arange(y.shape[0]) * (x.shape[0] // y.shape[0])


def _stride_range(x: Float[np.ndarray, "T"], y: Float[np.ndarray, "S"]) -> np.ndarray:
    return np.arange(0, x.shape[0], x.shape[0] // y.shape[0])


def _one_quotient(x: Float[np.ndarray, "T"], y: Float[np.ndarray, "S"]
                  ) -> Float[np.ndarray, "T"]:
    T, S = x.shape[0], y.shape[0]
    pairs = np.zeros((T // S, 2)) + np.ones((T // S, 2))
    return np.zeros(T % S + T // S * S) + x + pairs.sum()


def test_a_floor_division_by_a_size_is_a_size_that_may_be_zero():
    """``T // S`` stopped the trace.  It is a size, one per numerator and divisor (two
    computations of it broadcast; ``T % S + T // S * S`` is ``T``), not taken to be at least
    1: ``arange(0, T, T // S)`` raises where T < S, said as an assumption.  Oracle: NumPy."""
    assert _steps_of(np.ones(7), np.ones(2)).shape == (2,)
    assert _one_quotient(np.ones(7), np.ones(2)).shape == (7,)
    assert _stride_range(np.ones(7), np.ones(2)).shape == (3,)
    with pytest.raises(ZeroDivisionError):
        _stride_range(np.ones(2), np.ones(7))
    assert clean(verify(_steps_of)), str(verify(_steps_of))
    assert clean(verify(_one_quotient)), str(verify(_one_quotient))
    r = verify(_stride_range)
    assert kinds(r) == ["assumption"] and "arange" in str(r) and not r.notes, str(r)


def _ceil_pieces(x: Float[np.ndarray, "T"], y: Float[np.ndarray, "S"]) -> np.ndarray:
    T, S = x.shape[0], y.shape[0]
    n = -(-T // S)  # pieces of S, the last padded
    return np.concatenate([x, np.zeros(n * S - T)]).reshape(n, S) + y


def _ceil_rows(x: Float[np.ndarray, "T"], y: Float[np.ndarray, "S"]) -> np.ndarray:
    T, S = x.shape[0], y.shape[0]
    return np.zeros(-(-T // S)) + x  # BUG: ceil(T / S) rows against T


def test_a_floor_division_of_a_negative_size_is_minus_a_ceiling():
    """``-(-T // S)`` (the ceiling idiom) divides ``-T``, never at least 0: it was taken as a
    size under the assumption ``-T >= 0``, which no size meets (every finding after it
    vacuous).  It is ``-((T + S - 1) // S)``, the ceiling's own size.  Oracle: NumPy at every
    T, S up to 12 (the correct one runs; the buggy one raises at T = 3, S = 2)."""
    for T in range(1, 13):
        for S in range(1, 13):
            assert _ceil_pieces(np.ones(T), np.ones(S)).shape == (-(-T // S), S)
    with pytest.raises(ValueError):
        _ceil_rows(np.ones(3), np.ones(2))
    assert clean(verify(_ceil_pieces)), str(verify(_ceil_pieces))
    r = verify(_ceil_rows)
    assert kinds(r) == ["broadcast"] and "-T" not in str(r), str(r)


def _padded_to_pieces(x: Float[np.ndarray, "T"], y: Float[np.ndarray, "S"]) -> np.ndarray:
    T, S = x.shape[0], y.shape[0]
    n = (T + S - 1) // S
    return np.pad(x, (0, n * S - T)).reshape(n, S) + y


def test_a_fitted_op_of_a_quotient_of_sizes_is_not_fitted_apart_from_them():
    """``np.pad`` by ``n * S - T``, ``n = ceil(T / S)``: the fit varied the quotient's fresh
    size apart from T and S, so the pad went negative at its runs (NumPy refuses), its result
    was a fresh size and the reshape into ``[n, S]`` an error, on code correct at every size.
    A fit cannot vary a quotient of sizes apart from them: the trace stops with a note, as
    before the quotient was modelled.  Oracle: NumPy at every T, S up to 12."""
    for T in range(1, 13):
        for S in range(1, 13):
            assert _padded_to_pieces(np.ones(T), np.ones(S)).shape == (-(-T // S), S)
    r = verify(_padded_to_pieces)
    assert not r.errors and not r.complete and "numpy.pad" in r.notes[0], str(r)


def _whole_pieces(x: Float[np.ndarray, "T"], y: Float[np.ndarray, "S"]) -> np.ndarray:
    T, S = x.shape[0], y.shape[0]
    return x[: T // S * S].reshape(T // S, S) + y  # the whole pieces of S, the rest dropped


def _one_piece_more(x: Float[np.ndarray, "T"], y: Float[np.ndarray, "S"]) -> np.ndarray:
    T, S = x.shape[0], y.shape[0]
    return x[: (T // S + 1) * S].reshape(T // S + 1, S) + y  # BUG: S*(T // S + 1) > T


def test_a_floor_division_by_a_size_bounds_its_numerator():
    """``T // S`` is a fresh size that nothing tied to ``T`` and ``S``: ``x[: T // S * S]`` was
    said to assume ``S*(T // S) <= T``, which holds at every size.  The quotient's floor
    facts (``S*(T // S) <= T < S*(T // S + 1)``) decide the slice: no warning, and a slice
    past ``T`` at every size an error.  Oracle: NumPy at every T, S up to 9 (T < S too)."""
    for T in range(1, 10):
        for S in range(1, 10):
            assert _whole_pieces(np.ones(T), np.ones(S)).shape == (T // S, S)
            with pytest.raises(ValueError):
                _one_piece_more(np.ones(T), np.ones(S))
    r = verify(_whole_pieces)
    assert clean(r) and r.complete, str(r)
    r = verify(_one_piece_more)
    assert "index" in kinds(r) and "assumes" not in str(r), str(r)


# -- a symbolic size's multiples come out of a floor division whole --------------------------


def chunk_pools(x: Float[torch.Tensor, "B, T, D"], w: Float[torch.Tensor, "S, D"]
                ) -> torch.Tensor:
    b, t, d = x.shape
    s = w.shape[0]
    n, m = t // s, (t + s) // s - 1  # one count of whole chunks, written two ways
    mean = x[:, : n * s].reshape(b, n, s, d).mean(2)
    return mean + x[:, : m * s].reshape(b, m, s, d).amax(2) * w[0]


def chunk_pools_bug(x: Float[torch.Tensor, "B, T, D"], w: Float[torch.Tensor, "S, D"]
                    ) -> torch.Tensor:
    b, t, d = x.shape
    s = w.shape[0]
    n, m = t // s, (t + s - 1) // s  # a ceiling: one chunk more where S does not divide T
    mean = x[:, : n * s].reshape(b, n, s, d).mean(2)
    return mean + x[:, : m * s].reshape(b, m, s, d).amax(2) * w[0]


def gqa_scores(q: Float[torch.Tensor, "B, G*R, T, D"], k: Float[torch.Tensor, "B, G, T, D"]
               ) -> Float[torch.Tensor, "B, G*R, T, T"]:
    k = k.repeat_interleave(q.shape[1] // k.shape[1], dim=1)  # G*R // G is R
    return q @ k.transpose(-2, -1)


def test_a_floor_division_by_a_size_takes_its_multiples_out_whole():
    """``(T + S) // S - 1`` is ``T // S``: it was a size of its own, so two poolings of the
    same chunks broadcast with a false TS101; the ceiling ``(T + S - 1) // S`` is not, and
    still is one (torch agrees: the twin raises where S does not divide T).  GQA's ``G*R //
    G`` divides whole."""
    assert clean(verify(chunk_pools)), str(verify(chunk_pools))
    assert "broadcast" in kinds(verify(chunk_pools_bug), "error")
    for t, s in [(7, 3), (6, 3), (2, 5), (9, 1)]:
        x, w = torch.randn(2, t, 4), torch.randn(s, 4)
        assert chunk_pools(x, w).shape == (2, t // s, 4)
        if t % s:
            with pytest.raises(RuntimeError):
                chunk_pools_bug(x, w)
    assert clean(verify(gqa_scores)), str(verify(gqa_scores))
    assert gqa_scores(torch.randn(2, 6, 5, 4), torch.randn(2, 3, 5, 4)).shape == (2, 6, 5, 5)
