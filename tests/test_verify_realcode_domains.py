"""verify on code from domains the other corpora touch little (tests/verify_corpus/
probe_domains_2026.py): detection box ops and NMS, beam search, grid_sample warps, PointNet++
sampling and grouping, normalizing flows, Gaussian processes, HMMs, Sinkhorn, STFT and mel
front ends, TCNs, CTC, NeRF rendering, focal and smoothed losses, mixup, DQN targets and graph
attention, in NumPy, PyTorch and JAX.  Each pair is a correct function and a twin with one
planted bug; an oracle runs each correct one on real arrays of its own library."""

from __future__ import annotations

import inspect
import typing

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from arrays import clean, kinds, pair_holds
from tensig import Float
from tensig.check.testing import shape_for, sizes
from tensig.check.verify import verify
from tensig.core.annotations import signature_of
from verify_corpus.probe_domains_2026 import (
    ASSUMES,
    CASES,
    STOPS,
    greedy_nms,
    greedy_nms_until_break,
)


def test_the_corpus_is_large_and_mixes_the_three_libraries():
    mixes_libraries(CASES, 35, 10)


def mixes_libraries(cases, least: int, each: int) -> None:
    """At least ``least`` pairs, at least ``each`` of them in each of the three libraries."""
    libraries = [_library(good) for _, good, _, _ in cases]
    assert len(cases) >= least
    assert all(libraries.count(lib) >= each for lib in (np.ndarray, torch.Tensor, jax.Array))


@pytest.mark.parametrize(("name", "good", "bad", "code"), CASES, ids=[c[0] for c in CASES])
def test_correct_one_verifies_and_the_bug_gives_its_code(name, good, bad, code):
    pair_holds(name, good, bad, code, ASSUMES, STOPS)


def test_a_loop_until_the_data_says_stop_is_stopped_with_a_note():
    """``while order.size > 0`` over data-dependent counts: each is a fresh size whose witness
    no step shrinks, so the loop ran on until the step budget, minutes later.  Now a line that
    decides conditions on such sizes too often stops the trace (the timeout is a guard)."""
    for fn in (greedy_nms, greedy_nms_until_break):
        r = verify(fn, timeout=120)  # a guard: the stop comes from the decision cap
        assert not r.findings and len(r.notes) == 1 and "until the data says stop" in r.notes[0], \
            str(r)



def lloyd_kmeans(X: Float[np.ndarray, "N D"], C: Float[np.ndarray, "K D"], n_iter: int = 100
                 ) -> Float[np.ndarray, "K D"]:
    """Lloyd's k-means, an empty cluster keeping its centre: a data-dependent size decided
    K * n_iter times at one line, inside loops that end whatever the data."""
    for _ in range(n_iter):
        labels = ((X[:, None, :] - C[None, :, :]) ** 2).sum(-1).argmin(1)
        new = []
        for k in range(C.shape[0]):
            members = X[labels == k]
            new.append(members.mean(0) if members.shape[0] > 0 else C[k])
        C = np.stack(new)
    return C


def test_a_size_decided_often_in_loops_that_end_is_followed():
    """Only a ``while`` loop runs until the data says stop: a finite loop that decides a
    data-dependent size more than the cap times at one line (1100 here) is still verified,
    and the code runs at two sizes to the shape it declares."""
    r = verify(lloyd_kmeans)
    assert clean(r), str(r)
    rng = np.random.default_rng(0)
    for n, d, k in ((20, 3, 4), (31, 2, 7)):
        assert lloyd_kmeans(rng.normal(size=(n, d)), rng.normal(size=(k, d)), 3).shape == (k, d)


def weighted_halves(x: Float[np.ndarray, "T D"]) -> Float[np.ndarray, "T//2 D"]:
    """Wrong at T >= 14: zip stops at the 6 weights, so T // 2 rows are stacked only below."""
    w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    return np.stack([x[i] * a for a, i in zip(w, range(x.shape[0] // 2), strict=False)])


def test_a_loop_cut_short_by_zip_is_not_read_as_its_range():
    assert weighted_halves(np.ones((20, 2))).shape == (6, 2)  # the oracle: 6 rows, not 10
    assert _assumed(weighted_halves) == ["assumes T // 2 <= 6"]


def weighted_steps(x: Float[np.ndarray, "T D"]) -> Float[np.ndarray, "T D"]:
    """Wrong at T > 12: zip stops at the 12 weights (a count >= 8, read as a loop over T)."""
    w = [float(k) for k in range(1, 13)]
    return np.stack([x[i] * a for a, i in zip(w, range(x.shape[0]), strict=False)])


def halves_weighted(x: Float[np.ndarray, "T D"]) -> Float[np.ndarray, "T//2 D"]:
    """``weighted_halves`` with the range first: the list is cut short where T // 2 > 6."""
    w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    return np.stack([x[i] * a for i, a in zip(range(x.shape[0] // 2), w, strict=False)])


def halves_strict(x: Float[np.ndarray, "T D"]) -> Float[np.ndarray, "T//2 D"]:
    """Raises ValueError where T // 2 != 5: strict zip of unequal lengths."""
    w = [1.0, 2.0, 3.0, 4.0, 5.0]
    return np.stack([x[i] * a for i, a in zip(range(x.shape[0] // 2), w, strict=True)])


def _assumed(fn) -> list[str]:
    """What ``verify`` reports on ``fn``: assumptions only, each without its reason."""
    report = verify(fn)
    assert report.result is not None and not report.errors and not report.notes
    return [f.message.split(":")[0] for f in report]


def test_a_zip_that_stops_a_long_range_short_assumes_the_range_is_shorter():
    assert weighted_steps(np.ones((20, 2))).shape == (12, 2)  # the oracle: 12 rows, not 20
    assert _assumed(weighted_steps) == ["assumes T <= 12"]
    assert weighted_halves(np.ones((10, 2))).shape == (5, 2)  # the assumption's side holds
    assert halves_weighted(np.ones((20, 2))).shape == (6, 2)
    assert _assumed(halves_weighted) == ["assumes T // 2 <= 6"]


def test_a_strict_zip_of_lengths_equal_only_at_the_witness_assumes_them_equal():
    with pytest.raises(ValueError, match="shorter"):  # the oracle: T // 2 = 6 against 5
        halves_strict(np.ones((12, 2)))
    assert _assumed(halves_strict) == ["assumes T // 2 == 5"]


def enumerated_steps(x: Float[np.ndarray, "T D"]) -> Float[np.ndarray, "T D"]:
    """``weighted_steps`` with the range inside ``enumerate``: zip cannot see its length."""
    w = [float(k) for k in range(1, 13)]
    steps = enumerate(range(x.shape[0]))
    return np.stack([x[i] * a for a, (_, i) in zip(w, steps, strict=False)])


def test_a_range_hidden_in_a_zip_argument_is_not_read_as_its_loop():
    assert enumerated_steps(np.ones((20, 2))).shape == (12, 2)  # the oracle: 12 rows, not 20
    assert kinds(verify(enumerated_steps)) == ["return-shape"]  # its 11 rows


def pairs_of_rows(x: Float[np.ndarray, "T D"], w: Float[np.ndarray, "T D"]
                  ) -> Float[np.ndarray, "T//2 D"]:
    """zip of a range shorter at every size with rows, then of those T // 2 rows with rows
    again: the shorter runs to its end, and its count is the loop's."""
    firsts = [x[i] * r for i, r in zip(range(x.shape[0] // 2), w, strict=False)]
    return np.stack([a + r for r, a in zip(x, firsts, strict=False)])


def test_a_zip_whose_shortest_is_known_at_every_size_counts_its_loop():
    assert pairs_of_rows(np.ones((20, 2)), np.ones((20, 2))).shape == (10, 2)  # the oracle
    assert verify(pairs_of_rows).ok


def _library(fn) -> type:
    """The array type of ``fn``'s first annotated parameter (the one library it is written
    in)."""
    hints = typing.get_type_hints(fn, include_extras=True)
    return next(typing.get_args(h)[0] for n, h in hints.items()
                if n != "return" and typing.get_origin(h) is typing.Annotated)


def _arguments(fn, env: dict[str, int], seed: int) -> list:
    """Real arguments at the sizes ``env`` in ``fn``'s library: integer arrays zeros (a valid
    index into any axis), floats in (0.5, 1.5), a PRNG key for ``key``, defaults otherwise."""
    rng = np.random.default_rng(seed)
    lib = _library(fn)
    wrap = {np.ndarray: np.asarray, torch.Tensor: torch.as_tensor, jax.Array: jnp.asarray}[lib]
    markers = {p.name: p.marker for p in signature_of(fn).parameters}
    out = []
    for p in inspect.signature(fn).parameters.values():
        if p.name in markers:
            shape = shape_for(markers[p.name].shape, env)
            integer = markers[p.name].dtype in ("Int", "int")
            out.append(wrap(np.zeros(shape, np.int64) if integer else
                            rng.uniform(0.5, 1.5, shape).astype(np.float32)))
        elif p.name == "key":
            out.append(jax.random.PRNGKey(seed))
        else:
            out.append(p.default)
    return out


@pytest.mark.parametrize(("name", "good", "bad", "code"), CASES, ids=[c[0] for c in CASES])
def test_correct_one_runs_and_returns_its_declared_shape(name, good, bad, code):
    returns_declared(name, good)


def returns_declared(name, good):
    """The oracle: the correct code run by its own library at two sets of distinct sizes
    returns the shapes its annotation declares (so the corpus is correct code)."""
    result = signature_of(good).result
    markers = result if isinstance(result, tuple) else (result,)
    for start, seed in ((8, 0), (13, 1)):
        env = sizes(good, start=start)
        out = good(*_arguments(good, env, seed))
        got = tuple(tuple(np.shape(o)) for o in (out if isinstance(out, tuple) else (out,)))
        assert got == tuple(shape_for(m.shape, env) for m in markers), (name, env)


def bug_fails(name, bad):
    """The oracle that a planted bug is one: run by its own library at distinct sizes, it
    raises or returns a shape its annotation does not declare."""
    env = sizes(bad, start=8)
    try:
        out = bad(*_arguments(bad, env, 0))
    except (ValueError, TypeError, RuntimeError, IndexError):  # the library's shape error
        return
    result = signature_of(bad).result
    markers = result if isinstance(result, tuple) else (result,)
    got = tuple(tuple(np.shape(o)) for o in (out if isinstance(out, tuple) else (out,)))
    assert got != tuple(shape_for(m.shape, env) for m in markers), (name, env)


def corpus_tests(cases, assumes, stops):
    """The three per-pair tests of a corpus file, parametrized over its ``cases``: each file
    binds them to module-level ``test_`` names, so pytest collects them under the same ids."""
    each = pytest.mark.parametrize(("name", "good", "bad", "code"), cases,
                                   ids=[c[0] for c in cases])

    @each
    def test_correct_one_verifies_and_the_bug_gives_its_code(name, good, bad, code):
        pair_holds(name, good, bad, code, assumes, stops)

    @each
    def test_correct_one_runs_and_returns_its_declared_shape(name, good, bad, code):
        returns_declared(name, good)

    @each
    def test_each_bug_fails_when_run(name, good, bad, code):
        bug_fails(name, bad)

    return (test_correct_one_verifies_and_the_bug_gives_its_code,
            test_correct_one_runs_and_returns_its_declared_shape, test_each_bug_fails_when_run)


def test_zip_and_range_stay_types_while_verify_patches_them():
    """``zip`` and ``range`` are patched during a trace; code (or a library) that asks
    ``isinstance(z, zip)`` still gets its answer, where a plain function raised TypeError."""
    def pairs(x: Float[np.ndarray, "T D"]) -> Float[np.ndarray, "T D"]:
        z, r = zip([1], [2], strict=True), range(3)
        assert isinstance(z, zip) and isinstance(r, range) and not isinstance(r, zip)
        assert not isinstance(x, zip) and issubclass(type(z), zip)
        return np.stack([row * i for row, i in zip(x, range(x.shape[0]), strict=True)])

    assert pairs(np.ones((4, 2))).shape == (4, 2)
    r = verify(pairs)
    assert clean(r), str(r)


def _weighted_by_a_count(x: Float[np.ndarray, "T D"]) -> Float[np.ndarray, "T D"]:
    n = int(x.shape[0])
    total = 0.0
    for a, b in zip(iter([1.0] * n), [2.0] * n, strict=True):
        total += a * b
    return x * total


def test_a_list_zipped_is_counted_not_read_back_as_a_size():
    """zip's length of a plain list is its count: read back as the size whose witness it
    equals (``int(T)`` was taken), it was a warning no line of the code asked for."""
    assert _weighted_by_a_count(np.ones((3, 2))).shape == (3, 2)
    r = verify(_weighted_by_a_count)
    assert clean(r), str(r)
