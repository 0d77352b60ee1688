"""verify on real-style code that validates its inputs (tests/verify_corpus/probe_2026e.py):
Whisper's positional-table assert, Hugging Face attention's size checks, LLaMA-style rotary
heads checked in helpers, timm's patch embedding ``_assert``s, a torchvision-style box check, a
diffusers-style UNet whose sides must halve twice, S4's ``assert L <= l_max``, a stack checking
every block, PPO's rollout assert, scikit-learn's ``X has %d features`` and ``len(X) ==
len(y)``, framing's minimum length, Flax's attention asserts, a JAX GAE and patchify.  Each
correct one verifies under the assumptions its guards make (said as warnings); each twin's bug,
planted after the guards, is found.  Oracles: each correct one, run by its own library at sizes
that meet its guards, returns the declared shape, and the shape verify derived (in the
substituted sizes) evaluates to it; each guard raises at sizes that do not meet it; each bug
fails at sizes that do."""

from __future__ import annotations

import dis
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from arrays import pair_holds
from tensig import Float
from tensig.check.testing import shape_for
from tensig.check.verify import verify
from tensig.core.annotations import signature_of
from test_verify_realcode_domains import _arguments, mixes_libraries
from verify_corpus.probe_2026e import (
    ASSUMES,
    BREAKS,
    CASES,
    MEETS,
    STOPS,
    rotary_heads,
    weighted_features,
    weighted_features_bug,
)

IDS = [c[0] for c in CASES]


def test_the_corpus_mixes_the_three_libraries():
    mixes_libraries(CASES, 20, 4)
    assert set(MEETS) == set(IDS)


@pytest.mark.parametrize(("name", "good", "bad", "code"), CASES, ids=IDS)
def test_correct_one_verifies_and_the_bug_gives_its_code(name, good, bad, code):
    pair_holds(name, good, bad, code, ASSUMES, STOPS)


def _shapes(out) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(np.shape(o)) for o in (out if isinstance(out, tuple) else (out,)))


def _declared(fn, env: dict[str, int]) -> tuple[tuple[int, ...], ...]:
    result = signature_of(fn).result
    return tuple(shape_for(m.shape, env) for m in (result if isinstance(result, tuple)
                                                   else (result,)))


def _substituted(verified, shapes: list[tuple[int, ...]], env: dict[str, int]
                 ) -> dict[str, int] | None:
    """``env`` extended to the sizes verify substituted for the guards (``D`` as
    ``4*D_over4``, ``T`` as ``T_more + 15``): each new size solved from an axis of the real
    arguments' ``shapes`` that it alone leaves unknown; then every axis of the substituted
    signature ``verified`` must be the real one."""
    env = dict(env)
    axes = [(n, e) for shape, sub in zip(shapes, verified.args, strict=True)
            for n, e in zip(shape, sub, strict=True)]
    for _ in range(3):
        for n, e in axes:
            unknown = sorted(e.symbols - set(env))
            if len(unknown) == 1:
                hit = [v for v in range(1, 200) if e.evaluate({**env, unknown[0]: v}) == n]
                if len(hit) == 1:
                    env[unknown[0]] = hit[0]
    # None where these sizes take another way past a guard (``E in (D, 1)``: E = D, not 1)
    return env if all(e.evaluate(env) == n for n, e in axes if e.symbols <= set(env)) and \
        all(e.symbols <= set(env) for _, e in axes) else None


@pytest.mark.parametrize(("name", "good", "bad", "code"), CASES, ids=IDS)
def test_correct_one_runs_where_its_guards_hold_as_verify_derived(name, good, bad, code):
    """The oracle: run at sizes meeting its guards, the correct code returns its declared
    shapes, and the result verify derived under the guards' substitutions is that shape."""
    report = verify(good)
    checked = 0
    for seed, env in enumerate(MEETS[name]):
        args = _arguments(good, env, seed)
        got = _shapes(good(*args))
        assert got == _declared(good, env), (name, env)
        full = _substituted(report.signature, [tuple(a.shape) for a in args
                                               if hasattr(a, "shape")], env)
        if full is not None:
            derived = tuple(tuple(d.evaluate(full) for d in r) for r in report.result)
            assert derived == got, (name, env, report.result)
            checked += 1
    assert checked, name  # one size set at least on the way verify reports


def _raised_by_user(e: BaseException) -> bool:
    """Whether the innermost frame raised ``e`` by a ``raise`` statement (a guard's) rather
    than an operator or a library call that refused its operands."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and any(i.offset == tb.tb_lasti and i.opname == "RAISE_VARARGS"
                                  for i in dis.get_instructions(tb.tb_frame.f_code))


@pytest.mark.parametrize(("name", "good", "bad", "code"), CASES, ids=IDS)
def test_each_bug_fails_where_the_guards_hold(name, good, bad, code):
    """The planted bug is one after the guards: at sizes meeting them, its own library
    raises (never the user's guard), or it returns a shape not declared, or (a reshape that
    mixes axes, TS202) values the correct code does not give on the same arguments."""
    failed = 0
    for seed, env in enumerate(MEETS[name]):
        args = _arguments(bad, env, seed)
        try:
            out = bad(*args)
        except (ValueError, TypeError, RuntimeError, IndexError) as e:
            assert not _raised_by_user(e), (name, e)
            failed += 1
            continue
        failed += _shapes(out) != _declared(bad, env) or (
            code == "TS202" and not np.allclose(np.asarray(good(*args)), np.asarray(out)))
    assert failed, name  # at one size set at least (E == D, not E == 1, for a [D, 1] weight)


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_each_guard_raises_where_it_fails(name):
    """The guards are real: at sizes that miss one, the correct code raises (so the
    assumption verify states is the code's own requirement)."""
    good = next(g for n, g, _, _ in CASES if n == name)
    for env in BREAKS[name]:
        with pytest.raises((AssertionError, ValueError, RuntimeError)):
            good(*_arguments(good, env, 0))


# -- the gaps the corpus closed, each fixed in src/tensig/check/guards.py ----------------------


def test_a_forced_division_is_substituted_so_a_later_parity_check_agrees():
    """``D % 4`` forced to 0 kept the prime witness (D = 11): the helper's ``(D // 4) % 2``
    was decided at 11 // 4 = 2, against nothing the guard said, and ``arange(0, hd, 2)``
    repeated twice was ``2*((D // 4 + 1) // 2)``, a false TS101.  Now D is ``4*D_over4``, the
    helper's check a guard of its own: ``D_over4 = 2*D_over8``, and the shapes agree."""
    r = verify(rotary_heads)
    said = [f.message for f in r.findings]
    assert len(said) == 2 and not r.errors and not r.notes, str(r)
    assert said[0].startswith("requires D divisible by 4: the code raises ValueError") and \
        said[0].endswith("verified with D = 4*D_over4"), said
    assert said[1].startswith("requires D_over4 divisible by 2") and \
        said[1].endswith("verified with D_over4 = 2*D_over8"), said
    assert [str(d) for d in r.result[0]] == ["B", "4", "T", "2*D_over8"]
    for d in (8, 16, 24):
        assert rotary_heads(torch.ones(2, 3, d)).shape == (2, 4, 3, d // 4)
    for d in (12, 10):  # a head of 3; no 4 heads
        with pytest.raises(ValueError):
            rotary_heads(torch.ones(2, 3, d))


def deferred_check(x: Float[torch.Tensor, "B C H W"]
                   ) -> Float[torch.Tensor, "B C H//2 W//2"]:
    """The sides' check made first and raised on after a branch that only warns (a wide
    input's slow path): the raise is the check's, not the branch's."""
    _, _, H, W = x.shape
    even = H % 2 == 0 and W % 2 == 0
    if W > 64:
        x = x.contiguous(memory_format=torch.channels_last)
    if not even:
        raise ValueError(f"sides must be even, got {H}x{W}")
    return F.avg_pool2d(x, 2)


def test_a_flip_that_meets_the_same_raise_is_undone():
    """The latest condition before the raise was ``W > 64``; forced and substituted (W as
    W_more + 64), the trace met the same raise and no new condition, yet the flip stayed:
    the report said 'assumes W > 64: the code raises ValueError otherwise', false (torch runs
    it at W = 10), and nothing below 64 was traced.  Now that flip is undone."""
    assert deferred_check(torch.ones(1, 2, 4, 10)).shape == (1, 2, 2, 5)
    assert deferred_check(torch.ones(1, 2, 4, 100)).shape == (1, 2, 2, 50)
    with pytest.raises(ValueError):
        deferred_check(torch.ones(1, 2, 4, 9))
    r = verify(deferred_check)
    assert not r.errors and not r.notes, str(r)
    said = [f.message for f in r.findings]
    assert not any("W > 64: the code raises" in s for s in said), said
    assert any(s.startswith("requires H divisible by 2") for s in said), said
    assert any(s.startswith("requires W divisible by 2") for s in said), said
    assert any("traced for one side only" in s and "64" in s for s in said), said


def test_each_way_past_a_disjunctive_guard_is_traced():
    """``w.shape[0] not in (D, 1)``: the witnesses fail both, the latest (E == 1) was forced
    and said as 'the code raises otherwise', false (E == D runs), and the twin's ``w[:, None]``
    bug, a [1, 1] at E = 1, went unseen: verified.  Now both ways are traced, said as one way
    past each, and the bug at E == D is found; NumPy agrees on all three."""
    X = np.ones((4, 3))
    assert weighted_features(X, np.ones(1)).shape == weighted_features(X, np.ones(3)).shape
    with pytest.raises(ValueError, match="expected 3 or 1"):
        weighted_features(X, np.ones(2))
    with pytest.raises(ValueError, match="broadcast"):
        weighted_features_bug(X, np.ones(3))
    r = verify(weighted_features)
    said = sorted(f.message.split(";")[0] for f in r.findings if "one way past" in f.message)
    assert said == ["assumes D == E: one way past the code's ValueError (probe_2026e.py:"
                    f"{weighted_features.__code__.co_firstlineno + 5})",
                    "assumes E == 1: one way past the code's ValueError (probe_2026e.py:"
                    f"{weighted_features.__code__.co_firstlineno + 5})"], str(r)
    assert not r.errors and not r.notes, str(r)
    rb = verify(weighted_features_bug)
    assert [f.code for f in rb.errors] == ["TS101"] and "[D, 1]" in str(rb), str(rb)


def narrow_guard(x: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "N D"]:
    if x.shape[1] * 0.75 < 6:
        raise ValueError("too few features after dropping a quarter")
    if math.sqrt(x.shape[1]) > 8:
        x = x / math.sqrt(x.shape[1])
    return x


def test_a_float_condition_is_said_in_sizes_not_at_the_witness():
    """A number computed from a size with a float is compared at the witness; its condition
    printed that value (``assumes not (8.25 < 6)``), which names no size.  Now the size's
    expression where one is known: ``3*D / 4``, ``sqrt(D)``."""
    assert narrow_guard(np.ones((2, 8))).shape == (2, 8)
    with pytest.raises(ValueError):
        narrow_guard(np.ones((2, 7)))
    said = [f.message for f in verify(narrow_guard).findings]
    assert any(s.startswith("assumes not (3*D / 4 < 6)") for s in said), said
    assert any(s.startswith("assumes not (sqrt(D) > 8)") for s in said), said
