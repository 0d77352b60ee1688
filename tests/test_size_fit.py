"""One fit of result sizes (tensig.check.size_fit) behind the NumPy, torch and JAX fallbacks.

Each library's fallback runs the op its own way (zero arrays, meta tensors, ``eval_shape``);
the sizes are fitted by the same code, so the same size function gives the same expression,
checked here against the real op at sizes the fit never saw.
"""

import re

import numpy as np
import pytest

from tensig.check import size_fit
from tensig.check.tracer import SymArray
from tensig.check.verify import verify
from tensig.core.dims import Dim


def _window(a, k, s):
    """A strided window of length ``k`` (the output length of a valid strided convolution).
    NumPy's former fit read ``(L - 3)//2 + 1`` as ``(B + 1)//2`` and ``(L - 5)//6 + 1`` as 2."""
    return np.lib.stride_tricks.sliding_window_view(a, k, axis=-1)[..., ::s, :].mean(-1)


def _pairs(a):
    """A max-pool of width 2: ``n // 2`` windows, an odd last element dropped."""
    n = a.shape[-1] // 2 * 2
    return a[..., :n].reshape(*a.shape[:-1], -1, 2).max(-1)


_WINDOWS = {"window": (3, 2), "window6": (5, 6)}  # (length, stride)
RUNS: list[tuple] = []  # each concrete run of an op below: its operand's shape, and whether zeros


def _ran(a):
    RUNS.append((tuple(a.shape), isinstance(a, np.ndarray) and not a.any()))


def _numpy(kind):
    from tensig.check.trace_numpy import fitted_numpy

    def fn(a):
        _ran(a)
        return _window(a, *_WINDOWS[kind]) if kind in _WINDOWS else _pairs(a)
    return lambda x: fitted_numpy(fn, (x,), {}, kind), lambda n: fn(np.zeros((2, n))).shape[-1]


def _torch(kind):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    from tensig.check.trace_torch import fallback

    def fn(x):
        _ran(x)
        if kind in _WINDOWS:
            k, s = _WINDOWS[kind]
            return F.avg_pool1d(x, k, stride=s)
        return F.max_pool1d(x, 2)
    return lambda x: fallback(fn, (x,), {}), lambda n: fn(torch.zeros(2, 1, n)).shape[-1]


def _jax(kind):
    pytest.importorskip("jax")
    import jax.numpy as jnp

    from tensig.check.trace_jax import fitted_jax

    def fn(a):
        _ran(a)
        if kind in _WINDOWS:
            k, s = _WINDOWS[kind]
            return a[..., : a.shape[-1] - k + 1 : s]  # each window's first element
        return a[..., : a.shape[-1] // 2 * 2].reshape(*a.shape[:-1], -1, 2).max(-1)
    return lambda x: fitted_jax(fn, (x,), {}, kind), lambda n: fn(jnp.zeros((2, n))).shape[-1]


def _refused_below(message: str, real) -> bool:
    """Whether ``message`` assumes ``k <= L`` where the library refuses ``L = k - 1`` and
    accepts ``L = k`` (a pool's window: the fit's runs are longer)."""
    if (m := re.match(r"assumes (\d+) <= L:", message)) is None:
        return False
    k = int(m.group(1))
    try:
        real(k - 1)
    except (ValueError, RuntimeError):
        return real(k) >= 0
    return False


@pytest.mark.parametrize("kind, expected", [("window", "(L + 1) // 2 - 1"),  # (L - 3)//2 + 1
                                            ("window6", "(L + 1) // 6"),  # (L - 5)//6 + 1
                                            ("pairs", "L // 2")])
@pytest.mark.parametrize("library", [_numpy, _torch, _jax])
def test_every_library_fits_the_same_size_expression(library, kind, expected):
    traced, real = library(kind)
    sig = "B, 1, L =>" if library is _torch else "B, L =>"
    r = verify(traced, sig)
    assert r.complete and all(_refused_below(f.message, real) for f in r), str(r)
    length = r.result[0][-1]
    assert str(length) == expected
    for n in (5, 6, 9, 10, 31, 64, 71):  # odd and even, none of them a sample point
        assert length.evaluate({"L": n, "B": 2}) == real(n)


@pytest.mark.parametrize("library", [_numpy, _torch, _jax])
def test_a_fit_runs_each_size_once_and_each_call_shape_once(library, monkeypatch):
    """NumPy's and JAX's fits were not cached (torch's were), and every fit ran its first
    witnesses twice (once to find sizes the library accepts, once more as the fit's first
    point).  One cache for the three now: a second call of the same shapes, in the same
    verify or the next, runs nothing."""
    monkeypatch.setattr(size_fit, "_FITS", {})  # cold, whatever ran before
    traced, real = library("pairs")
    sig = "B, 1, L =>" if library is _torch else "B, L =>"
    RUNS.clear()
    assert verify(traced, sig).complete
    once = list(RUNS)
    assert once and len(set(once)) == len(once), once  # no size (and fill) run twice
    RUNS.clear()
    assert verify(traced, sig).complete and RUNS == []
    monkeypatch.setattr(size_fit, "_FITS", {})
    RUNS.clear()
    r = verify(lambda x: (traced(x), traced(x + 1)), sig)
    assert r.complete and once == RUNS and all(_refused_below(f.message, real) for f in r), str(r)


def test_a_fit_key_holds_what_the_runs_read_and_refuses_what_it_cannot():
    """The cache is sound only if two calls with one key run alike: values are keyed (a
    NumPy array's contents, -0.0 apart from 0.0, True apart from 1), and a function or an
    object (which may act differently each call) makes no key."""
    x = SymArray((Dim.symbol("N"),))
    key = size_fit.fit_key(np.repeat, (x, np.array([1, 2])), {}, ("N", 8))
    assert key is not None and hash(key) == hash(
        size_fit.fit_key(np.repeat, (x, np.array([1, 2])), {}, ("N", 8)))
    for other in [(np.repeat, (x, np.array([1, 3])), {}, ("N", 8)),
                  (np.repeat, (x, np.array([1, 2])), {}, ("N", 10)),
                  (np.tile, (x, np.array([1, 2])), {}, ("N", 8)),
                  (np.repeat, (SymArray((Dim.symbol("M"),)), np.array([1, 2])), {}, ("N", 8))]:
        assert size_fit.fit_key(*other) != key
    assert size_fit.fit_key(np.full, (x, 0.0), {}) != size_fit.fit_key(np.full, (x, -0.0), {})
    assert size_fit.fit_key(np.full, (x, 1), {}) != size_fit.fit_key(np.full, (x, True), {})
    assert size_fit.fit_key(np.apply_along_axis, (np.sum, 0, x), {}) is None
    assert size_fit.fit_key(np.repeat, (x,), {"repeats": object()}) is None


def test_sample_points_keep_divisibility_and_order():
    """Every offset is a multiple of the unit (divisions assumed exact stay exact) and the
    checks keep the base's order of the symbols (an op valid only for K <= L stays valid)."""
    base = {"K": 10, "L": 30, "X": 7}
    points = size_fit.sample_points(["K", "L"], base, unit=5)
    assert len(points) == 1 + 2 + 2 and all(p["X"] == 7 for p in points)
    assert all(p[n] % 5 == 0 for p in points for n in "KL")
    assert all(p["K"] < p["L"] for p in points)
    checks = points[3:]
    assert {(p["K"] - 10) // 5 % 2 for p in checks} != {0}  # a residue other than the steps'


def test_a_floor_left_open_by_the_points_asks_for_every_residue():
    """``(N + 1) // 4``: the steps and checks alone leave the offset open; runs at the other
    residues of N decide it, through the same evaluate."""
    calls = []

    def evaluate(env):
        calls.append(env)
        return [((env["N"] + 1) // 4,)]

    from tensig.check import tracing

    t = tracing.Tracer(witness={"N": 11})
    token = tracing._TRACER.set(t)
    try:
        from tensig.check.tracer import SymArray

        fits = size_fit.fit_sizes(evaluate, SymArray((Dim.symbol("N"),)), "f", {"N": 44},
                                  unit=4)
    finally:
        tracing._TRACER.reset(token)
    assert fits == [[(Dim.symbol("N") + 1) // 4]]
    assert len(calls) > len(size_fit.sample_points(["N"], {"N": 44}, 4))


def test_a_multiple_of_a_product_needs_a_run_to_check_it():
    """``k*B*T + c`` is solved from two runs: with only two (the rest raised) every pair of
    values fits some ``k`` and ``c``, so none is taken; the product itself still is."""
    envs = [{"B": 12, "T": 12}, {"B": 12, "T": 24}]
    bt = Dim.symbol("B") * Dim.symbol("T")
    assert size_fit.fit_size(["B", "T"], envs, [1, 145], [bt]) is None
    assert size_fit.fit_size(["B", "T"], envs, [144, 288], [bt]) == bt
    envs.append({"B": 24, "T": 24})
    assert size_fit.fit_size(["B", "T"], envs, [1, 145, 433], [bt]) == bt - 143


def test_a_size_that_fits_nothing_is_none_with_a_note():
    notes = []
    fits = size_fit.fit_sizes(lambda env: [(env["N"] ** 2,)], _sym("N"), "square",
                              {"N": 11}, note=notes.append)
    assert fits == [[None]] and "no simple expression" in notes[0]


def test_more_symbols_than_the_bound_are_refused():
    from tensig.check import tracing

    names = [f"s{i}" for i in range(size_fit.MAX_SYMBOLS + 1)]
    with pytest.raises(tracing.Unsupported, match="symbolic sizes"):
        size_fit.fit_sizes(lambda env: [()], _sym(*names), "wide", dict.fromkeys(names, 3))


def _sym(*names):
    from tensig.check.tracer import SymArray

    return SymArray(tuple(Dim.symbol(n) for n in names))


def test_a_message_names_composite_sizes_but_keeps_small_numbers():
    """A rejection's numbers are written as the operands' sizes (``B*T`` for 2080), but one
    under 11 stays a number, as a symbol's does: ``T - 39`` at ``T = 40`` is 1, and every 1 in
    torch's message (an axis, a count) read 'T - 39'."""
    text = size_fit.named("size 1 vs 2080 at 40", {"T": 40, "B": 52}, [Dim("T - 39"), Dim("B*T")])
    assert text == "size 1 vs B*T at T", text


def test_a_cached_fit_s_value_result_is_each_call_s_own():
    """A fitted op's result may hold a value that is no array or size (``find_peaks``' dict of
    properties): a cached fit returned the one object the first call made, so what user
    code wrote into it at one call was there at the next."""
    from tensig.check.trace_numpy import fitted_numpy

    def peaks(a):
        return a[:1], {"widths": a.shape[0]}

    seen = []

    def fn(x):
        for i in range(2):
            _, props = fitted_numpy(peaks, (x,), {}, "peaks")
            seen.append(dict(props))
            props["mine"] = i
        return x

    assert verify(fn, "N =>").complete
    assert seen and all("mine" not in p for p in seen), seen


def test_a_fit_from_a_larger_base_still_finds_the_least_size_the_op_takes():
    """``np.delete(x, 50)`` fails at the witnesses and runs from a base scaled past 50, whose
    assumption ('N >= 50') is one short: NumPy skipped the bisection below the base after a
    failed first base (torch did not), so the least size was never found.  Oracle: NumPy.  The
    size found explains the failure at the witnesses: it is said once."""
    with pytest.raises(IndexError):
        np.delete(np.zeros(50), 50)
    assert np.delete(np.zeros(51), 50).shape == (50,)
    r = verify(lambda x: np.delete(x, 50), "N =>")
    assert str(r.result[0][0]) == "N - 1"
    assert [f.message.split(":")[0] for f in r] == ["assumes 51 <= N"], str(r)


def test_a_failure_found_below_the_base_survives_a_later_run_that_fails_otherwise():
    """The bisection below the base ran until a midpoint raised an error that is not the
    library's (no meta kernel there), then dropped the refusal it had already seen at 1: the
    fit was trusted below the base with no assumption said.  The size that held stays assumed."""
    def shaped(env):
        if env["N"] < 8:
            raise ValueError("a window of 8 is longer than the input")
        if env["N"] < 30:
            raise NotImplementedError("no kernel at this size")
        return [(env["N"] - 7,)]

    x = _sym("N")
    found = size_fit.below_literals(shaped, (x,), {}, {"N": 40}, [[Dim("N - 7")]], (ValueError,))
    assert [(s, k) for s, k, _ in found] == [("N", 40)], found


def test_the_order_of_sizes_is_tried_only_from_the_first_base():
    """``torch.topk(x, 50)`` of ``[B, N]`` fails at the first base (N = 46) and runs from a
    larger one (B = 48, N = 54), where swapping B and N makes N 48 < 50: torch's fit said
    'assumes B <= N', which torch disproves.  Only a fit from the first base asks the order."""
    torch = pytest.importorskip("torch")
    assert torch.topk(torch.zeros(60, 55), 50).values.shape == (60, 50)  # B > N: accepted
    r = verify(lambda x: torch.topk(x, 50), "B, N =>")
    assert r.result[0] == (Dim("B"), Dim("50")) and "B <= N" not in str(r), str(r)


@pytest.mark.parametrize("index", [100, 150])  # 150: refused at the witnesses B = 11, N = 13
def test_least_sizes_found_one_symbol_at_a_time_hold_together(index):
    """``np.delete(x, index)`` of ``[B, N]`` deletes from the flattened array: it needs
    ``B*N > index``.  Each symbol lowered alone, the others at the base, held from 8 (B) and 10
    (N), or from 12 (B, the base scaled to B = 154) and 1 (N): said as 'assumes 8 <= B' and
    'assumes 10 <= N', or as 'assumes 12 <= B' alone (dropping the note that the op fails at
    some sizes), where NumPy refuses B = 8, N = 10 and B = 12, N = 1.  Oracle: NumPy at the
    least sizes the assumptions admit together."""
    r = verify(lambda x: np.delete(x, index), "B, N =>")
    bounds = {"B": 1, "N": 1}
    for f in r:
        m = re.match(r"assumes (\d+) <= (\w+):", f.message)
        assert m, str(r)  # every finding a least size
        bounds[m[2]] = max(bounds[m[2]], int(m[1]))
    got = np.delete(np.zeros((bounds["B"], bounds["N"])), index)  # raises where they do not hold
    assert got.shape == (r.result[0][0].evaluate(bounds),), str(r)


def test_a_least_size_above_another_symbol_s_is_kept_where_it_holds_with_them_larger():
    """``torch.topk(x, 50)`` of ``[B, N]`` runs from B = 48, N = 54, and refuses N below 50: a
    bound not under B = 48, which may be their order (B <= N) and was dropped, leaving only
    'fails at some sizes'.  With B larger than 50 it still holds from N = 50: not their order.
    Oracle: torch at B = 100 (above N) and at N = 49."""
    torch = pytest.importorskip("torch")
    assert torch.topk(torch.zeros(100, 50), 50).values.shape == (100, 50)
    with pytest.raises(RuntimeError):
        torch.topk(torch.zeros(1, 49), 50)
    r = verify(lambda x: torch.topk(x, 50), "B, N =>")
    assert [f.message.split(":")[0] for f in r] == ["assumes 50 <= N"], str(r)


def test_a_size_constant_near_the_base_is_checked_at_larger_sizes():
    """``avg_pool1d(x, 50)`` gives 1 at every size the fit ran (T = 52 to 79): fitted as the
    constant 1, verify accepted ``B, C, T => B, C, 1``, which torch refuses at T = 100.  A run
    at sizes past twice the count shows the size is no constant: a fresh size.  Oracle: torch."""
    torch = pytest.importorskip("torch")
    pool = torch.nn.functional.avg_pool1d
    assert pool(torch.zeros(2, 3, 100), 50).shape == (2, 3, 2)
    r = verify(lambda x: pool(x, 50), "B, C, T => B, C, 1")
    assert r.errors and str(r.result[0][2]) != "1", str(r)


def test_fresh_sizes_equal_only_at_the_sample_stay_distinct():
    """``avg_pool2d(x, (50, 60))`` gives H // 50 and W // 60, both 1 near the fit's base: each
    was keyed by its sample value, so one fresh size, and adding the result to its transpose
    verified though torch refuses it where they differ.  Oracle: torch at H = 150, W = 120."""
    torch = pytest.importorskip("torch")
    pool = torch.nn.functional.avg_pool2d
    y = pool(torch.zeros(2, 3, 150, 120), (50, 60))
    with pytest.raises(RuntimeError):
        y + y.transpose(2, 3)

    def f(x):
        y = pool(x, (50, 60))
        return y + y.transpose(2, 3)
    r = verify(f, "B, C, H, W")
    assert any(f.code == "TS101" for f in r.errors), str(r)
    h, w = verify(lambda x: pool(x, (50, 60)), "B, C, H, W").result[0][2:]
    assert h != w


def test_fresh_sizes_equal_at_every_run_stay_one():
    """``avg_pool2d(x, 50)`` of a square ``[B, C, H, H]`` gives H // 50 on both axes at every
    run: one fresh size, so adding the result to its transpose raises no false alarm.
    Oracle: torch at H = 130."""
    torch = pytest.importorskip("torch")
    pool = torch.nn.functional.avg_pool2d
    y = pool(torch.zeros(2, 3, 130, 130), 50)
    assert (y + y.transpose(2, 3)).shape == (2, 3, 2, 2)

    def f(x):
        y = pool(x, 50)
        return y + y.transpose(2, 3)
    r = verify(f, "B, C, H, H")
    assert not r.errors, str(r)
    h, w = verify(lambda x: pool(x, 50), "B, C, H, H").result[0][2:]
    assert h == w and h.constant is None


@pytest.mark.parametrize("k", [10, 200])
def test_fresh_sizes_equal_at_every_run_but_not_everywhere_stay_distinct(k):
    """``avg_pool2d(x, 10, padding=(0, 1))`` of a square ``[B, C, H, H]`` gives H // 10 and
    (H + 2) // 10 (no fit: a divisor above 8), equal at every size the fit ran (H = 52, 76,
    57, 104, ...), so one fresh size, and adding the result to its transpose verified though
    torch refuses it at H = 48 (4 against 5).  With a window of 200 the sizes differ only at
    H = 198, 199 modulo 200, past the 64 runs one unit apart (H = 1070 .. 1196 by 2).
    Oracle: torch at H = 5*k - 2 and 5*k + 2."""
    torch = pytest.importorskip("torch")
    pool = torch.nn.functional.avg_pool2d

    def f(x):
        y = pool(x, k, padding=(0, 1))
        return y + y.transpose(2, 3)
    assert f(torch.zeros(1, 1, 5 * k + 2, 5 * k + 2)).shape == (1, 1, 5, 5)
    with pytest.raises(RuntimeError):
        f(torch.zeros(1, 1, 5 * k - 2, 5 * k - 2))
    r = verify(f, "B, C, H, H")
    assert any(f.code == "TS101" for f in r.errors), str(r)


def test_a_window_bound_is_not_reported_as_an_order():
    """``avg_pool1d(x, 50)`` run with B, C, T swapped puts T below 50: the refusal was said as
    'assumes B <= C <= T', which it does not need; the swapped run keeps T at its least size
    50, so only 'assumes 50 <= T' is said.  Oracle: torch at B > C > T = 50, and T = 49."""
    torch = pytest.importorskip("torch")
    pool = torch.nn.functional.avg_pool1d
    assert pool(torch.zeros(100, 70, 50), 50).shape == (100, 70, 1)
    with pytest.raises(RuntimeError):
        pool(torch.zeros(1, 1, 49), 50)
    r = verify(lambda x: pool(x, 50), "B, C, T")
    said = [f.message.split(":")[0] for f in r if f.message.startswith("assumes")]
    assert said == ["assumes 50 <= T"], str(r)


def test_no_run_of_a_fit_builds_a_result_past_the_growth_guard(monkeypatch):
    """``np.vander(x, 300)`` is ``[N, 300]``: its fit's far run scales N past twice 300 (x55
    from N = 11), whose result the growth guard, applied to the fit's first runs only, let
    through: with the guard's bound at 128 000 cells, a run of 184 800.  (At ``vander(x,
    30000)`` the far run built 14 GB.)  Every run is now guarded; the fit is still made."""
    monkeypatch.setattr(size_fit, "MAX_ELEMENTS", 2000)  # results up to 64 * 2000 cells
    monkeypatch.setattr(size_fit, "_FITS", {})
    built: list[int] = []
    original = size_fit.shapes

    def shapes(result, arrays):
        out = original(result, arrays)
        built.extend(int(np.prod(s)) for s in out if s is not None)
        return out
    monkeypatch.setattr(size_fit, "shapes", shapes)
    r = verify(lambda x: np.vander(x, 300), "N => N, 300")
    assert built and max(built) <= 64 * 2000, built
    assert r.ok and not r.findings, str(r)
