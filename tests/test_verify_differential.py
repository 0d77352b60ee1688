"""verify against the strongest oracle there is: running the function.

A strategy writes small straight-line NumPy programs (source text in a real module file, so
findings have lines) over one to three inputs of symbolic sizes, with the ops real code uses:
broadcasting arithmetic, ``@``, ``einsum``, axis moves, reshapes that merge or split adjacent
axes, reductions, ``concatenate``/``stack``, slices, ``None``, ``repeat``/``tile``,
``expand_dims``/``squeeze`` and ``where``.  Some programs are right at every size; others are
wrong at some (two different sizes that broadcast only where they collide, a size taken from
the wrong array, a squeezed axis that is 1 only sometimes).  Each is run at concrete sizes
(all 1, collisions such as ``B == T``, distinct primes, multiples of small divisors), and:

(a) verify returns a report within its ``timeout``, never raises;
(b) soundness: no shape error means every run whose sizes meet the reported assumptions
    (``requires T divisible by 2``, ``assumes 2 <= T``) succeeds and returns the declared
    shape, a note or not (a trace that stops must not stay silent on code that fails);
(c) no false alarm: a shape error (``TS1xx``) means some run at sizes meeting the
    assumptions fails or returns another shape.  ``TS2xx`` findings are lints of code that
    runs (an implicit outer product, a reshape that moves axes): no run can confirm them.

A declared size below 0 at some sizes (``T - 2`` at ``T = 1``) declares that those sizes are
not the contract's.

Known gaps, kept out of the generator:

- a slice from past a shorter axis, ``x[1:][1:]``, is ``T - 2`` long to verify and empty to
  NumPy at ``T = 1``, which matters where the negative size is hidden
  (``concatenate([x[1:][1:], y])`` declared ``T + S - 2``);
- a reshape's -1 beside an axis that may be 0 (``x[1:].reshape(len(x) - 1, -1)`` raises at
  ``T = 1``: NumPy cannot infer it); assuming ``T >= 2`` there would flag every window count
  ``(H - K) // 2 + 1`` of an im2col;
- a fitted function runs only at sizes in the witnesses' order and far above literal sizes:
  ``np.take(x, [0, 1], axis=1)`` is not checked at ``T = 1``, ``np.diag`` of ``[B, T]`` is
  ``B`` (``min(B, T)``), ``np.convolve(v, np.ones(3), "valid")`` is ``T - 2`` at ``T = 2``.

Not a gap but a choice this test leaves alone: a slice past a literal size
(``x[:, None][:, :2]``) is an index error (TS105), though NumPy clips it and the code runs.

The regressions first: each is a minimal program the fuzzer found verify wrong on.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import re
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from tensig.check.verify import Signature, verify

SYMBOLS = ("B", "T", "d", "k", "S")
TIMEOUT = 60.0  # seconds per verify call: a hang guard, far above a trace of five lines on any CPU
_COUNT = itertools.count()


@pytest.fixture(scope="module")
def folder():
    """Where the programs' module files go, removed after the last example (hypothesis runs
    every example in one call of the test: a function-scoped ``tmp_path`` would be shared by
    them all anyway, and hypothesis refuses one)."""
    with tempfile.TemporaryDirectory(prefix="tensig_vfuzz_") as path:
        yield Path(path)


def load(source: str, folder: Path):
    """The function ``f`` of ``source``, loaded from a module file of its own (verify reads
    comments at a finding's line; a real file is what user code is).  The module is not put
    in ``sys.modules``: no example sees another's."""
    path = folder / f"prog_{next(_COUNT)}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.f


# -- the oracle ----------------------------------------------------------------------------------


def _size(expr: str, env: dict[str, int]) -> int:
    return int(eval(expr, {}, dict(env)))  # the signature's size expressions are Python's too


def _dims(operand: str) -> list[str]:
    """An operand's size expressions (this file writes axes separated by commas)."""
    return [p.strip() for p in operand.split(",") if p.strip()]


def run(fn, signature: str, env: dict[str, int]) -> str | None:
    """What goes wrong running ``fn`` at ``env``: an exception, a wrong shape, or ``None``."""
    left, _, right = signature.partition("=>")
    shapes = [tuple(_size(e, env) for e in _dims(op)) for op in left.split(";")]
    want = tuple(_size(e, env) for e in _dims(right))
    if min(want, default=0) < 0:
        return None  # no array has that shape: "T - 2" declares T >= 2
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s) for s in shapes]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            out = fn(*args)
        except Exception as e:
            return f"{type(e).__name__}: {e}"
    got = tuple(np.shape(out))
    return None if got == want else f"returns {got}, declared {want}"


_REQUIRES = re.compile(r"requires (.+?) divisible by (.+)$")
_ASSUMES = re.compile(r"assumes (.+?)(<=|>=|<|>|==|!=)(.+?):")


def meets(report, env: dict[str, int]) -> bool:
    """Whether ``env`` meets every assumption the report states (one it states in a form this
    test cannot read is taken to hold)."""
    for f in report.warnings:
        if m := _REQUIRES.search(f.message):
            try:
                if _size(m.group(1), env) % _size(m.group(2), env):
                    return False
            except (NameError, SyntaxError):
                continue
        elif m := _ASSUMES.search(f.message):
            try:
                if not eval(f"({m.group(1)}) {m.group(2)} ({m.group(3)})", {}, dict(env)):
                    return False
            except (NameError, SyntaxError):
                continue
    return True


def envs(symbols: tuple[str, ...]) -> list[dict[str, int]]:
    """Concrete sizes: all 1, 2 or 6, each pair collided, distinct primes (two sets), distinct
    multiples of 4 and of 6 and multiples of 12 (small divisions exact), powers of 2 (one
    size divisible by another); none above 36."""
    out = [dict.fromkeys(symbols, 1), dict.fromkeys(symbols, 2), dict.fromkeys(symbols, 6)]
    primes = (5, 7, 11, 13, 17, 19, 23)
    out.append(dict(zip(symbols, primes, strict=False)))
    out.append(dict(zip(symbols, reversed(primes), strict=False)))
    for sizes in ((12, 24, 36, 24, 12), (6, 12, 18, 24, 30), (4, 8, 12, 16, 20),
                  (2, 4, 8, 16, 32), (32, 16, 8, 4, 2)):  # last: one size divides another
        out.append(dict(zip(symbols, sizes, strict=False)))
    for a, b in itertools.combinations(symbols, 2):
        env = dict(zip(symbols, primes, strict=False))
        env[b] = env[a]
        out.append(env)
        out.append({s: 1 if s == a else 12 for s in symbols})
    return out


def check(fn, signature: str):
    """verify ``fn`` and hold its report to the runs; the report, for a test to look at."""
    report = verify(fn, signature, torch_style=False, timeout=TIMEOUT)  # the runs are NumPy's
    assert not any("did not finish" in n for n in report.notes), report.notes
    symbols = Signature.parse(signature).symbols
    runs = [(env, run(fn, signature, env)) for env in envs(symbols) if meets(report, env)]
    failures = [(env, why) for env, why in runs if why is not None]
    shape_errors = [f for f in report.errors if f.code.startswith("TS1")]
    if shape_errors:
        assert failures, f"verify: {report}\nbut every run at {len(runs)} sizes succeeds"
    else:
        assert not failures, f"verify: {report}\nbut runs fail: {failures[:3]}"
    return report


# -- regressions ---------------------------------------------------------------------------------


def test_einsum_pairs_sizes_equal_under_an_assumed_division():
    """``3 * (T // 3)`` is ``T`` where the reshape's division is exact, as a broadcast already
    took it: einsum's own pairing called it a contraction error."""
    def pair(x):
        y = x.reshape(3, -1).reshape(-1)
        return np.einsum("a,a->a", x, y)

    report = check(pair, "T => T")
    assert [f.message for f in report] == ["requires T divisible by 3"]


def test_squeezing_an_axis_that_is_not_1_is_an_error():
    """NumPy's ``squeeze(axis)`` raises unless the axis is 1 (torch's keeps it): verify said
    "verified for all B" of a squeeze of a ``B`` axis."""
    def squeezed(x):
        return x.squeeze(0)

    report = check(squeezed, "B, T => T")
    assert report.errors[0].code == "TS108"


def test_numpy_transpose_of_two_axes_is_a_permutation():
    """NumPy's ``x.transpose(0, 1)`` keeps a matrix as it is (torch's swaps the two axes):
    verify read it as torch's and called the unchanged ``[d, B]`` a wrong result."""
    def kept(x):
        return x.transpose(0, 1)

    assert check(kept, "d, B => d, B").ok
    assert check(lambda x: x.transpose(1, 0), "d, B => B, d").ok
    assert verify(lambda x: np.tanh(x).transpose(0, 1), "d, B => d, B").ok  # names NumPy
    assert verify(lambda x: x.transpose(0, 1), "d, B => B, d").ok  # names neither: torch's


def test_numpy_squeeze_is_told_by_the_library_the_code_names():
    """A squeeze of an axis that is not 1 is NumPy's error in code that names NumPy; in a body
    of methods alone it may be torch's, which keeps the axis (assumed not 1)."""
    report = verify(lambda x: np.tanh(x).squeeze(0), "B, T => T")
    assert report.errors[0].code == "TS108"
    report = verify(lambda x: x.squeeze(0), "B, T => B, T")
    assert [f.message.split(":")[0] for f in report] == ["assumes 2 <= B"]


def test_a_reshape_no_size_fits_is_an_error():
    """``[S, 1]`` into ``[S, 3, -1]`` fails at every ``S``: verify warned "requires 1
    divisible by 3", an assumption no size meets, as if the code held under it."""
    def split(x):
        return x[:, None].reshape(x.shape[0], 3, -1)

    report = check(split, "S => S, 3, 1")
    assert report.errors[0].code == "TS104" and not report.warnings


def test_the_last_k_of_an_axis_assume_it_is_that_long():
    """``x[..., -2:]`` is 2 long only where the axis is: at ``T = 1`` it is all 1 of it
    (verify said "verified for all T"; ``x[:, :2]`` already assumed ``2 <= T``)."""
    report = check(lambda x: np.sort(x, axis=1)[:, -2:], "B, T => B, 2")
    assert [f.message.split(":")[0] for f in report] == ["assumes 2 <= T"]


def test_a_negative_index_assumes_the_axis_is_that_long():
    """``x[:, -2]`` needs ``2 <= T``; the assumption read "-2 < T", which every size meets."""
    report = check(lambda x: x[:, -2], "B, T => B")
    assert [f.message.split(":")[0] for f in report] == ["assumes 2 <= T"]


def test_squeeze_without_an_axis_assumes_no_size_is_1():
    """``np.squeeze(x)`` of ``[B, T]`` is ``[T]`` at ``B = 1``: verify said ``[B, T]`` at
    every size."""
    report = check(lambda x: np.squeeze(x[:, None]), "B, T => B, T")
    assert [f.message.split(":")[0] for f in report] == ["assumes 2 <= B", "assumes 2 <= T"]


def test_max_over_an_axis_that_may_be_empty_is_assumed():
    """``x[:, 1:].max(axis=1)`` raises at ``T = 1`` (a maximum of nothing has no value): verify
    said "verified for all B, T".  A sum over it is 0 and needs nothing."""
    report = check(lambda x: x[:, 1:].max(axis=1) + np.argmin(x[:, :-1], axis=1), "B, T => B")
    assert [f.message.split(":")[0] for f in report] == ["assumes 1 <= T - 1"]
    assert check(lambda x: x[:, 1:].sum(axis=1), "B, T => B").ok


def test_a_fitted_size_that_is_a_multiple_of_a_flattening_plus_a_constant():
    """``np.repeat(x, 2)`` flattens ``[B, T]`` into ``2*B*T`` (``np.diff`` of it: ``- 1``): the
    fit tried the products of the argument's sizes but not their multiples or offsets, and
    the fresh size it made instead was called a wrong result."""
    assert check(lambda x: np.repeat(x, 2), "B, T => 2*B*T").ok
    assert check(lambda x: np.diff(np.repeat(x, 2)), "B, T => 2*B*T - 1").ok


def test_an_index_list_assumes_its_indices_are_in_range():
    """``x[:, [0, 1]]`` raises at ``T = 1``: an integer index was checked, a list of them
    was not."""
    report = check(lambda x: x[:, [0, 1]], "B, T => B, 2")
    assert [f.message.split(":")[0] for f in report] == ["assumes 1 < T"]
    assert check(lambda x: x[:, np.array([0, -1])], "B, T => B, 2").ok
    report = check(lambda x: np.diff(x)[[0, 1]], "T => 2")  # not 0 < T - 1: 1 < T - 1
    assert [f.message.split(":")[0] for f in report] == ["assumes 1 < T - 1"]


def test_a_reshape_minus_1_divides_out_a_sum_and_then_a_number():
    """``[2*d, B, T + 1]`` into ``[2*d, -1, 2, T + 1]``: the -1 is ``B // 2``, but the long
    division stopped at the 4 in ``4*d*(T + 1)``, and the fresh size it made instead was
    called a wrong result."""
    report = check(lambda x: x.reshape(x.shape[0], -1, 2, x.shape[2]),
                   "2*d, B, T + 1 => 2*d, B // 2, 2, T + 1")
    assert [f.code for f in report] == ["TS301"]


def test_an_equal_split_of_a_number_it_does_not_divide_is_an_error():
    """``np.split(x[:, None], 2, axis=1)`` fails at every size: verify warned "requires 1
    divisible by 2", an assumption no size meets."""
    report = check(lambda x: np.split(x[:, None], 2, axis=1)[0], "B => B, 1")
    assert report.errors[0].code == "TS107" and not report.warnings


def test_a_note_does_not_excuse_runs_that_fail():
    """The soundness check holds a report with a note to the runs too: a trace stopped at a
    value read from the data (a note, no error) says nothing of the reshape after it, which
    fails at odd ``B*T``, and the check let that pass."""
    def stopped(x):
        n = int(x.sum() * 0)
        return x.reshape(2, -1)[:, n:]

    assert verify(stopped, "B, T => 2, B*T // 2", torch_style=False).notes  # the premise
    with pytest.raises(AssertionError, match="but runs fail"):
        check(stopped, "B, T => 2, B*T // 2")


def test_a_reshape_or_split_of_an_odd_size_into_pairs_is_an_error():
    """``[2*N + 1]`` into ``(-1, 2)`` or into 2 equal sections fails at every ``N``: verify
    warned "requires 2*N + 1 divisible by 2", an assumption no size meets (only a number's
    division, ``[1]`` into pairs, was an error)."""
    def pairs(x):
        return np.concatenate([x, x, x[:1]]).reshape(-1, 2)

    def halves(x):
        return np.split(np.concatenate([x, x, x[:1]]), 2)[0]

    for f, code in ((pairs, "TS104"), (halves, "TS107")):
        report = check(f, "N => N, 2" if f is pairs else "N => N")
        assert [x.code for x in report] == [code], str(report)
        assert all(run(f, "N => N", env) for env in envs(("N",)))  # no size runs


def test_an_odd_size_made_of_a_floor_into_pairs_is_an_error():
    """``[2*(N // 2) + 1]`` (the even part of ``x`` and one more) into ``(-1, 2)`` fails at
    every ``N``: a floor in the size left its remainders untold (an assumption no size meets),
    though they repeat with a period as a remainder's do."""
    def pairs(x):
        return np.concatenate([x[:2 * (len(x) // 2)], x[:1]]).reshape(-1, 2)

    report = check(pairs, "N => N, 2")
    assert "TS104" in [x.code for x in report] and not report.warnings, str(report)
    assert all(run(pairs, "N => N", env) for env in envs(("N",)))  # no size runs


def test_sizes_equal_at_two_points_where_a_division_is_exact_still_differ():
    """With ``T`` divisible by 2 assumed, ``B + 4`` and ``T`` (witnesses 11 and 13) were
    compared at ``B, T = 22, 26`` and ``24, 28`` only, equal at both: verify said ``x`` padded
    by 4 broadcasts against ``y`` (and their halves against each other) at every even ``T``."""
    def padded(x, y):
        y.reshape(-1, 2)
        return np.concatenate([x, np.zeros(4)]) + y

    def halves(x, y):
        return np.concatenate([x, np.zeros(4)]).reshape(-1, 2).sum(1) + \
            y.reshape(-1, 2).sum(1)

    for f, result in ((padded, "T"), (halves, "T // 2")):
        report = check(f, f"B; T => {result}")
        assert report.errors[0].code == "TS101", str(report)


# -- the program generator -----------------------------------------------------------------------


_ENVS = [{"B": 11, "T": 13, "d": 17, "k": 19, "S": 23}, {"B": 29, "T": 31, "d": 37, "k": 41,
                                                          "S": 43}]


def _same(a: str, b: str) -> bool:
    """Two size expressions equal at every size (as far as two prime assignments tell)."""
    return all(_size(a, e) == _size(b, e) for e in _ENVS)


def _wrap(e: str) -> str:
    return f"({e})" if any(c in e for c in "+-") else e


def _mul(a: str, b: str) -> str:
    if a == "1":
        return b
    if b == "1":
        return a
    return f"{_wrap(a)}*{_wrap(b)}"


def _broadcast(x: tuple[str, ...], y: tuple[str, ...]) -> tuple[str, ...]:
    """NumPy's broadcast as the generator models it: equal sizes, or a literal 1 (where two
    sizes differ the left one is kept: the program is wrong where they differ)."""
    n = max(len(x), len(y))
    x, y = ("1",) * (n - len(x)) + x, ("1",) * (n - len(y)) + y
    return tuple(b if a == "1" else a for a, b in zip(x, y, strict=True))


def _fits(x: tuple[str, ...], y: tuple[str, ...]) -> bool:
    return all(a == "1" or b == "1" or _same(a, b) for a, b in zip(x[::-1], y[::-1],
                                                                   strict=False))


@st.composite
def programs(draw) -> tuple[str, str]:
    """A program's source (``def f(x0, ...)``) and its signature."""
    n_inputs = draw(st.integers(1, 3))
    symbols = st.sampled_from(SYMBOLS[:draw(st.integers(2, 5))]) | st.sampled_from(
        ["1", "2*d", "T + 1"])  # a literal 1 (broadcast), sizes as expressions
    shapes = [tuple(draw(st.lists(symbols, min_size=1, max_size=3))) for _ in range(n_inputs)]
    names = [f"x{i}" for i in range(n_inputs)]
    vars_: dict[str, tuple[str, ...]] = dict(zip(names, shapes, strict=True))
    lines: list[str] = []

    def partner(x: str, good) -> str:
        """Another value: one the generator thinks fits (``good``) mostly, any one sometimes."""
        fitting = [v for v, s in vars_.items() if good(s)]
        if fitting and draw(st.integers(0, 4)):
            return draw(st.sampled_from(fitting))
        return draw(st.sampled_from(list(vars_)))

    def axis(shape: tuple[str, ...]) -> int:
        return draw(st.integers(0, len(shape) - 1))

    for _ in range(draw(st.integers(1, 5))):
        x = draw(st.sampled_from(list(vars_)))
        s = vars_[x]
        op = draw(st.sampled_from(OPS))
        made = op(draw, x, s, vars_, partner, axis)
        if made is None or not 1 <= len(made[1]) <= 4 or \
                math.prod(_size(d, dict.fromkeys(SYMBOLS, 36)) for d in made[1]) > 2 ** 21:
            continue  # every array at every assignment of envs() within 16 MB
        code, shape = made
        name = f"v{len(lines)}"
        lines.append(f"    {name} = {code}")
        vars_[name] = shape
    out = list(vars_)[-1] if lines else names[0]
    result = vars_[out]  # every value has an axis: inputs and results of 1 to 4
    if draw(st.integers(0, 9)) == 0 and len(result) >= 2:  # a declared result that is wrong
        i, j = draw(st.sampled_from(list(itertools.combinations(range(len(result)), 2))))
        result = list(result)
        result[i], result[j] = result[j], result[i]
        result = tuple(result)
    source = "import numpy as np\n\n\ndef f({}):\n{}\n    return {}\n".format(
        ", ".join(names), "\n".join(lines) or "    pass", out)
    signature = "; ".join(", ".join(s) for s in shapes) + " => " + ", ".join(result)
    return source, signature


# Each op: (draw, x, x's shape, the values so far, partner, axis) -> (code, shape) or None.


def _binary(draw, x, s, vars_, partner, axis):
    y = partner(x, lambda t: _fits(s, t))
    sym = draw(st.sampled_from(["+", "*", "-"]))
    if draw(st.booleans()):
        return f"{x} {sym} {y}", _broadcast(s, vars_[y])
    return f"np.where({x} > 0, {x}, {y})", _broadcast(s, vars_[y])


def _centred(draw, x, s, vars_, partner, axis):
    a = axis(s)
    red = draw(st.sampled_from(["mean", "sum", "max"]))
    return f"{x} - {x}.{red}(axis={a}, keepdims=True)", s


def _outer(draw, x, s, vars_, partner, axis):
    y = partner(x, lambda t: len(t) == 1)
    t = vars_[y]
    return f"{x}[..., None] * {y}", _broadcast((*s, "1"), t)


def _matmul(draw, x, s, vars_, partner, axis):
    if len(s) < 2:
        return None
    y = partner(x, lambda t: len(t) == 2 and _same(t[0], s[-1]))
    t = vars_[y]
    if len(t) < 2:
        return None
    if draw(st.booleans()) or not _same(t[-2], s[-1]):
        form = f"{x} @ {y}" if draw(st.booleans()) else f"np.matmul({x}, {y})"
        if len(t) == 2:
            return form, s[:-1] + t[-1:]
        return form, (*_broadcast(s[:-2], t[:-2]), s[-2], t[-1])
    return f"{x} @ {y}.swapaxes(-1, -2)", (*_broadcast(s[:-2], t[:-2]), s[-2], t[-2])


def _einsum(draw, x, s, vars_, partner, axis):
    y = partner(x, lambda t: any(_same(a, b) for a in s for b in t))
    t = vars_[y]
    letters = iter("abcdefgh")
    xl = [next(letters) for _ in s]
    yl = []
    for b in t:
        shared = [xl[i] for i, a in enumerate(s) if _same(a, b) and xl[i] not in yl]
        if shared and draw(st.integers(0, 5)):
            yl.append(shared[0])
        elif draw(st.integers(0, 7)) == 0:  # a letter of another size: wrong where they differ
            yl.append(draw(st.sampled_from(xl)) if set(xl) - set(yl) else next(letters))
            if yl.count(yl[-1]) > 1:
                yl[-1] = next(letters)
        else:
            yl.append(next(letters))
    size = {**dict(zip(yl, t, strict=True)), **dict(zip(xl, s, strict=True))}
    keep = [c for c in dict.fromkeys(xl + yl) if not (c in xl and c in yl) or draw(st.booleans())]
    keep = draw(st.permutations(keep))
    return (f"np.einsum('{''.join(xl)},{''.join(yl)}->{''.join(keep)}', {x}, {y})",
            tuple(size[c] for c in keep))


def _move(draw, x, s, vars_, partner, axis):
    if len(s) < 2:
        return None
    kind = draw(st.sampled_from(["transpose", "swapaxes", "moveaxis", "T"]))
    if kind == "T":
        return f"{x}.T", s[::-1]
    if kind == "transpose":
        perm = draw(st.permutations(range(len(s))))
        return f"{x}.transpose({', '.join(map(str, perm))})", tuple(s[i] for i in perm)
    i, j = axis(s), axis(s)
    out = list(s)
    if kind == "swapaxes":
        out[i], out[j] = out[j], out[i]
        return f"np.swapaxes({x}, {i}, {j})", tuple(out)
    out.insert(j, out.pop(i))
    return f"np.moveaxis({x}, {i}, {j})", tuple(out)


def _may_be_empty(shape: tuple[str, ...]) -> bool:
    """An axis of ``T - 1``: beside it a reshape's -1 is a gap (module docstring)."""
    return any("-" in d for d in shape)


def _merge(draw, x, s, vars_, partner, axis):
    if len(s) < 2 or _may_be_empty(s):
        return None
    i = draw(st.integers(0, len(s) - 2))
    terms = [f"{x}.shape[{j}]" for j in range(len(s))]
    merged = "-1" if draw(st.booleans()) else f"{x}.shape[{i}] * {x}.shape[{i + 1}]"
    terms[i:i + 2] = [merged]
    if draw(st.integers(0, 5)) == 0:  # a size read from another value: wrong where they differ
        y = partner(x, lambda t: True)
        j = axis(vars_[y])
        others = [n for n, term in enumerate(terms) if term != "-1"]
        if not others:
            return None
        k = draw(st.sampled_from(others))
        dims = [*s[:i], _mul(s[i], s[i + 1]), *s[i + 2:]]
        if terms[k] == merged:
            return None
        terms[k] = f"{y}.shape[{j}]"
        if "-1" not in terms:
            dims[k] = vars_[y][j]
        return f"{x}.reshape({', '.join(terms)})", tuple(dims)
    return f"{x}.reshape({', '.join(terms)})", (*s[:i], _mul(s[i], s[i + 1]), *s[i + 2:])


def _split(draw, x, s, vars_, partner, axis):
    if _may_be_empty(s):
        return None
    i = axis(s)
    f = draw(st.sampled_from([2, 3]))
    d = s[i]
    m = re.fullmatch(rf"{f}\*(.+)", d)
    rest = m.group(1) if m else f"{_wrap(d)} // {f}"
    terms = [f"{x}.shape[{j}]" for j in range(len(s))]
    terms[i:i + 1] = draw(st.sampled_from([[str(f), "-1"], ["-1", str(f)],
                                           [str(f), f"{x}.shape[{i}] // {f}"]]))
    pieces = (f, rest) if terms[i] == str(f) else (rest, f)
    return f"{x}.reshape({', '.join(terms)})", s[:i] + tuple(map(str, pieces)) + s[i + 1:]


def _reduce(draw, x, s, vars_, partner, axis):
    a = axis(s)
    red = draw(st.sampled_from(["sum", "mean", "max"]))
    keep = draw(st.booleans())
    shape = s[:a] + ("1",) * keep + s[a + 1:]
    if draw(st.booleans()):
        return f"np.{red}({x}, axis={a}{', keepdims=True' * keep})", shape
    return f"{x}.{red}(axis={a}{', keepdims=True' * keep})", shape


def _concat(draw, x, s, vars_, partner, axis):
    a = axis(s)
    y = partner(x, lambda t: len(t) == len(s) and all(
        _same(p, q) for n, (p, q) in enumerate(zip(s, t, strict=True)) if n != a))
    t = vars_[y]
    if draw(st.booleans()):
        joined = _mul("2", s[a]) if y == x else f"{s[a]} + {t[a]}" if len(t) > a else s[a]
        return f"np.concatenate([{x}, {y}], axis={a})", (*s[:a], joined, *s[a + 1:])
    b = draw(st.integers(0, len(s)))
    return f"np.stack([{x}, {y}], axis={b})", (*s[:b], "2", *s[b:])


def _slice(draw, x, s, vars_, partner, axis):
    a = axis(s)
    head = ":, " * a
    kind = draw(st.sampled_from([":1", "1:", "0", "-1", ":2", "None"]))
    if kind == "None":
        return f"{x}[{head}None]", (*s[:a], "1", *s[a:])
    if kind in ("0", "-1"):
        return f"{x}[{head}{kind}]", s[:a] + s[a + 1:]
    if kind == "1:" and not re.fullmatch(r"[\w*]+", s[a]):
        return None  # x[1:][1:] is empty at T = 1, not -1 long: a gap (module docstring)
    if kind == ":2" and s[a].isdigit():
        return None  # past a literal size: TS105, though NumPy clips (module docstring)
    size = {":1": "1", ":2": "2", "1:": f"{s[a]} - 1"}[kind]
    return f"{x}[{head}{kind}]", (*s[:a], size, *s[a + 1:])


def _repeat(draw, x, s, vars_, partner, axis):
    a = axis(s)
    f = draw(st.sampled_from([2, 3]))
    if draw(st.booleans()):
        if draw(st.integers(0, 3)) == 0:  # no axis: the flattened array repeated
            return f"np.repeat({x}, {f})", (_mul(str(f), "*".join(map(_wrap, s))),)
        return f"np.repeat({x}, {f}, axis={a})", (*s[:a], _mul(str(f), s[a]), *s[a + 1:])
    reps = tuple(f if n == a else 1 for n in range(len(s)))
    return f"np.tile({x}, {reps})", (*s[:a], _mul(str(f), s[a]), *s[a + 1:])


def _dims_op(draw, x, s, vars_, partner, axis):
    ones = [n for n, d in enumerate(s) if d == "1"]
    if draw(st.integers(0, 5)) == 0:
        return f"np.squeeze({x})", tuple(d for d in s if d != "1")
    if ones and draw(st.booleans()):
        a = draw(st.sampled_from(ones))
        return f"np.squeeze({x}, axis={a})", s[:a] + s[a + 1:]
    if draw(st.integers(0, 4)) == 0 and len(s) > 1:  # an axis that is 1 only at some sizes
        a = axis(s)
        return f"{x}.squeeze({a})", s[:a] + s[a + 1:]
    a = draw(st.integers(0, len(s)))
    return f"np.expand_dims({x}, {a})", (*s[:a], "1", *s[a:])


def _unary(draw, x, s, vars_, partner, axis):
    return draw(st.sampled_from([f"np.tanh({x})", f"{x} * 2.0", f"np.exp(-{x})"])), s


def _more(draw, x, s, vars_, partner, axis):
    """The long tail: diff, take, pad, ravel, outer, cumsum, argmax, split, a strided slice,
    a reduction over a tuple of axes or a negative axis, a zeros buffer of read sizes."""
    a = axis(s)
    kind = draw(st.sampled_from(["diff", "take", "pad", "ravel", "outer", "cumsum", "argmax",
                                 "split", "stride", "axes", "negative", "zeros"]))
    if kind == "diff" and re.fullmatch(r"[\w*]+", s[a]):
        return f"np.diff({x}, axis={a})", (*s[:a], f"{s[a]} - 1", *s[a + 1:])
    if kind == "take":  # np.take is fitted, at sizes far above 2 (a gap: module docstring)
        return f"{x}[{':, ' * a}[0, 1]]", (*s[:a], "2", *s[a + 1:])
    if kind == "pad":
        pads = tuple((1, 2) if n == a else (0, 0) for n in range(len(s)))
        return f"np.pad({x}, {pads})", (*s[:a], f"{s[a]} + 3", *s[a + 1:])
    if kind == "ravel":
        return f"{x}.ravel()", ("*".join(map(_wrap, s)),)
    if kind == "outer" and len(s) == 1:
        y = partner(x, lambda t: len(t) == 1)
        return f"np.outer({x}, {y})", ("*".join(map(_wrap, s)), "*".join(map(_wrap, vars_[y])))
    if kind == "cumsum":
        return f"np.cumsum({x}, axis={a})", s
    if kind == "argmax":
        return f"{x}.argmax(axis={a})", (*s[:a], *s[a + 1:])
    if kind == "split":
        m = re.fullmatch(r"2\*(.+)", s[a])
        return f"np.split({x}, 2, axis={a})[1]", (*s[:a], m.group(1) if m else
                                                  f"{_wrap(s[a])} // 2", *s[a + 1:])
    if kind == "stride":
        return f"{x}[{':, ' * a}::2]", (*s[:a], f"({s[a]} + 1) // 2", *s[a + 1:])
    if kind == "axes" and len(s) >= 2:
        b = (a + 1) % len(s)
        keep = [n for n in range(len(s)) if n not in (a, b)]
        return f"{x}.sum(axis=({a}, {b}))", tuple(s[n] for n in keep)
    if kind == "negative":
        return f"{x}.mean(axis=-{len(s) - a})", (*s[:a], *s[a + 1:])
    if kind == "zeros":
        y = partner(x, lambda t: True)
        j = axis(vars_[y])
        return (f"{x} + np.zeros(({y}.shape[{j}], 1) + {x}.shape)",
                _broadcast(s, (vars_[y][j], "1", *s)))
    return None


def _tail2(draw, x, s, vars_, partner, axis):
    """More of what real code writes: sizes unpacked from ``.shape`` and ``len``, a matmul
    with a vector, ``tensordot``, ``broadcast_to``, an einsum with ``...``, ``np.ones`` of
    read sizes, ``x.T @ x``, a three-way ``where``, ``keepdims`` over two axes."""
    a = axis(s)
    kind = draw(st.sampled_from(["unpack", "len", "vecmat", "tensordot", "broadcast_to",
                                 "ellipsis", "ones", "gram", "where3", "keep2"]))
    names = ", ".join(f"n{i}" for i in range(len(s)))
    if kind == "unpack" and len(s) >= 2:
        i = draw(st.integers(0, len(s) - 2))
        sizes = [f"n{j}" for j in range(len(s))]
        sizes[i:i + 2] = [f"n{i} * n{i + 1}"]
        return (f"(lambda {names}: {x}.reshape({', '.join(sizes)}))(*{x}.shape)",
                (*s[:i], _mul(s[i], s[i + 1]), *s[i + 2:]))
    if kind == "len" and not _may_be_empty(s):
        return f"{x}.reshape(len({x}), -1)", (s[0], "*".join(map(_wrap, s[1:])) or "1")
    if kind == "vecmat" and len(s) >= 2:
        y = partner(x, lambda t: len(t) == 1 and _same(t[0], s[-1]))
        return (f"{x} @ {y}", (*s[:-1],)) if len(vars_[y]) == 1 else None
    if kind == "tensordot" and len(s) >= 2:
        y = partner(x, lambda t: len(t) >= 1 and _same(t[0], s[-1]))
        return f"np.tensordot({x}, {y}, axes=1)", (*s[:-1], *vars_[y][1:])
    if kind == "broadcast_to":
        y = partner(x, lambda t: True)
        j = axis(vars_[y])
        return (f"np.broadcast_to({x}[None], ({y}.shape[{j}],) + {x}.shape)",
                (vars_[y][j], *s))
    if kind == "ellipsis" and len(s) >= 2:
        y = partner(x, lambda t: len(t) >= 2 and _same(t[-2], s[-1]))
        t = vars_[y]
        if len(t) < 2:
            return None
        return (f"np.einsum('...ij,...jk->...ik', {x}, {y})",
                (*_broadcast(s[:-2], t[:-2]), s[-2], t[-1]))
    if kind == "ones":
        return f"np.ones(({x}.shape[{a}], 2))", (s[a], "2")
    if kind == "gram" and len(s) == 2:
        return f"{x}.T @ {x}", (s[1], s[1])
    if kind == "where3":
        y = partner(x, lambda t: _fits(s, t))
        return f"np.where({y} > 0, {x}, 0.0)", _broadcast(s, vars_[y])
    if kind == "keep2" and len(s) >= 2:
        b = (a + 1) % len(s)
        return (f"{x}.max(axis=({a}, {b}), keepdims=True)",
                tuple("1" if n in (a, b) else d for n, d in enumerate(s)))
    return None


OPS = (_tail2, _tail2, _more, _more, _binary, _binary, _centred, _outer, _matmul, _matmul,
       _einsum, _einsum, _move, _merge, _merge, _split, _reduce, _reduce, _concat, _slice,
       _repeat, _dims_op, _unary)


@settings(max_examples=200)
@given(programs())
def test_verify_agrees_with_running(folder, program):
    source, signature = program
    note(source)
    note(signature)
    note(str(check(load(source, folder), signature)))
