"""Fuzzers for the public surfaces ``test_attacks_fuzz.py`` leaves out, and the defects they found.

Seeded as there (``TENSIG_FUZZ_EXAMPLES``/``TENSIG_FUZZ_SEED`` search further), each call
under the shared hang guard.  The oracles:

- eager ``einsum`` on torch, JAX and Dask arrays of mixed dtypes (bool, integers, float16,
  complex) with empty axes: ``numpy.einsum`` in complex128 for the values, the library's own
  promotion rule for the dtype, tolerances from the result dtype;
- ``@shaped``: an independent backtracking matcher of jaxtyping's rules (names, literals,
  ``_``, ``_name``, ``#``, ``*name``, ``...``, ``*_``, one-name expressions), both the
  generated check and the interpreter;
- ``tensig.testing.sizes``: ``collisions`` and the expressions' values, or a clear error;
- ``tensig verify`` on a pipe, a folder named like a module and a call it cannot make.

The regressions first: each is a minimal reproduction of a defect the fuzzers found.
"""

from __future__ import annotations

import decimal
import fractions
import functools
import os
import re
from contextlib import suppress

import numpy as np
import pytest
from hypothesis import Phase, given, note, settings
from hypothesis import strategies as st
from tensig.testing import collisions, sizes, strategy

import tensig as ts
from arrays import clean, random_einsum, tolerance
from limits import run_limited
from tensig import Shaped
from tensig.check.decorator import SignatureError
from tensig.check.verify_files import verify_path
from tensig.cli import main
from test_attacks_fuzz import fuzz, guard


def _module(name):
    with suppress(ImportError):
        return __import__(name)
    return None


torch, jax, dask = _module("torch"), _module("jax"), _module("dask")
needs = {name: pytest.mark.skipif(m is None, reason=f"needs {name}")
         for name, m in (("torch", torch), ("jax", jax), ("dask", dask))}


def _torch(a):
    return torch.from_numpy(a.copy())


def _jax(a):
    return jax.numpy.asarray(a)


def _dask(a):
    import dask.array as da

    return da.from_array(a, chunks=2)


def _numpy(x) -> np.ndarray:
    if torch is not None and isinstance(x, torch.Tensor):
        return x.numpy()
    return np.asarray(x.compute() if hasattr(x, "compute") else x)


def _promoted(lib: str, xs) -> str:
    """The result dtype by the library's own rule (torch and JAX widen int64 with float16 to
    float16; NumPy and Dask to float64)."""
    if lib == "torch":
        return str(functools.reduce(torch.promote_types, [x.dtype for x in xs]))[6:]
    if lib == "jax":
        return str(functools.reduce(jax.numpy.promote_types, [x.dtype for x in xs]))
    return str(np.result_type(*xs))


# -- regressions --------------------------------------------------------------------------------


@needs["torch"]
@pytest.mark.parametrize("spec, shapes", [
    ("jil;jk=>iljk", [(2, 3, 0), (2, 1)]),   # a batched outer product with no cells
    ("bij;bjk=>bik", [(2, 3, 0), (2, 0, 4)]),  # a batched sum of no terms: zeros, not empty
    ("ji;ji=>ji", [(0, 1), (0, 1)]),
])
def test_torch_contraction_of_no_cells_keeps_the_promoted_dtype(spec, shapes):
    """torch's batched matmul skips its dtype check when there are no cells and answers in
    the second operand's dtype: complex64 with uint8 came back uint8."""
    x = torch.zeros(shapes[0], dtype=torch.complex64)
    y = torch.ones(shapes[1], dtype=torch.uint8)
    got = ts.einsum(spec, x, y)
    assert got.dtype == torch.complex64
    want = np.einsum(spec.replace(";", ",").replace("=>", "->"), x.numpy(), y.numpy())
    np.testing.assert_array_equal(got.numpy(), want)


@needs["dask"]
def test_dask_contraction_with_an_empty_operand():
    """dask's reshape of an empty array fails inside it (``reduce() of empty iterable``)."""
    x, y = np.zeros((2, 3, 0), np.complex64), np.ones((2, 1), np.uint8)
    got = ts.einsum("jil;jk=>iljk", _dask(x), _dask(y))
    assert got.dtype == np.complex64
    assert got.compute().shape == (3, 0, 2, 1)


@needs["jax"]
@pytest.mark.parametrize("shape", [(2, 0), (2, 3)])
def test_jax_integers_with_float16(shape):
    """jnp.einsum hands int32 and float16 operands to dot_general, which refuses them
    (``preferred_element_type must not be narrower``); numpy.einsum promotes first."""
    jnp = jax.numpy
    xs = [jnp.ones(shape, jnp.int32), jnp.ones(2, jnp.uint8), jnp.ones(2, jnp.float16)]
    got = ts.einsum("ji;j;j=>i", *xs)
    assert got.dtype == jnp.float16
    np.testing.assert_array_equal(np.asarray(got), np.full(shape[1], 2.0))


@pytest.mark.parametrize("text", ["B, B % 2", "B, 1 - B", "B T, (T + 1) % 2"])
def test_sizes_no_size_can_keep_apart_is_an_error_not_a_hang(text):
    """An expression that stays below 2 can never be apart from the other sizes: the search
    for a size ran forever (``sizes`` and ``strategy`` alike)."""
    for seed in (None, 3):
        with guard(f"sizes({text!r})"), pytest.raises(ValueError, match=r"no size of .* hint"):
            sizes(text, seed=seed)

    @settings(max_examples=1, database=None, phases=[Phase.generate])
    @given(strategy(text))
    def draw(_):
        pass

    with guard(f"strategy({text!r})"), pytest.raises(ValueError, match="no size of"):
        draw()


@pytest.mark.parametrize("seed", [None, 3])
def test_sizes_far_from_the_start_are_found_without_start(seed):
    """A rule only large sizes keep (``n // 10000`` at least 2) found 20000 before the search
    was bounded; past the bound, sizes near each doubling are tried (not a ValueError)."""
    for text, d in [("n, n // 10000", 10_000), ("B n, n // 40000", 40_000)]:
        got = sizes(text, seed=seed)
        assert got["n"] // d >= 2 and got["n"] // d not in {got["n"], got.get("B")}, got
    assert sizes("n, n // 10000", start=20_000) == {"n": 20_000}


def test_strategy_finds_sizes_only_large_ones_keep():
    """``strategy`` grew its range until a size fitted (80000 here) before it was bounded at
    ``max_size + 16384``; past the bound it draws from sizes near each doubling."""
    drawn = []

    @settings(max_examples=3, database=None, phases=[Phase.generate])
    @given(strategy("n, n // 40000"))
    def draw(got):
        drawn.append(got)

    draw()
    assert drawn and all(got["n"] // 40_000 >= 2 for got in drawn), drawn


# -- eager einsum on torch, JAX and Dask against numpy.einsum -----------------------------------

DTYPES = ["bool", "int8", "uint8", "int32", "int64", "float16", "float32", "float64",
          "complex64"]
LIBS = [pytest.param(name, make, marks=needs[name])
        for name, make in (("torch", _torch), ("jax", _jax), ("dask", _dask))]


@pytest.mark.parametrize("lib, make", LIBS)
@fuzz(40)
@given(rnd=st.randoms(use_true_random=False))
def test_fuzz_einsum_of_mixed_dtypes_and_empty_axes(lib, make, rnd):
    spec, subscripts, arrays = random_einsum(rnd, DTYPES)
    note(f"ts.einsum({spec!r}, {[(a.shape, a.dtype.name) for a in arrays]}) on {lib}")
    want = np.einsum(subscripts, *[a.astype(np.complex128) for a in arrays])
    xs = [make(a) for a in arrays]
    with guard(f"einsum {spec!r} on {lib}"):
        got = _numpy((ts.einsum1 if len(xs) == 1 else ts.einsum)(spec, *xs))
    assert got.shape == want.shape
    if len(xs) > 1:  # one operand keeps its dtype
        assert got.dtype.name == _promoted(lib, xs)
    if got.dtype == bool:  # NumPy's logical or of ands
        np.testing.assert_array_equal(got, want != 0)
    elif np.issubdtype(got.dtype, np.integer):  # exact, wrapped as the dtype wraps
        np.testing.assert_array_equal(got, want.real.astype(np.int64).astype(got.dtype))
    else:
        tol = tolerance(got.dtype, chain=16)
        scale = 1 + max((np.abs(a).astype(np.float64).sum() for a in arrays), default=0)
        np.testing.assert_allclose(got.astype(np.complex128),
                                   want if np.iscomplexobj(got) else want.real,
                                   rtol=tol, atol=tol * scale)


# -- @shaped against an independent matcher ------------------------------------------------------

NAMES = ["A", "B", "C"]


def _item(rnd) -> tuple[str, tuple]:
    """One axis: its text and what the matcher reads."""
    n, c = rnd.choice(NAMES), rnd.randint(1, 3)
    kind = rnd.choice(["name"] * 4 + ["int", "_", "_n", "#name", "#int", "+", "-", "*", "#+"])
    return {"name": (n, ("name", n)), "int": (str(c - 1), ("int", c - 1)),
            "_": ("_", ("any",)), "_n": ("_" + n, ("any",)),
            "#name": ("#" + n, ("#", ("name", n))), "#int": (f"#{c}", ("#", ("int", c))),
            "+": (f"{n}+{c}", ("lin", n, 1, c)), "-": (f"{n}-{c}", ("lin", n, 1, -c)),
            "*": (f"{c + 1}*{n}", ("lin", n, c + 1, 0)),
            "#+": (f"#({n}+{c})", ("#", ("lin", n, 1, c)))}[kind]


def _annotation(rnd) -> tuple[str, list[tuple]]:
    items = [_item(rnd) for _ in range(rnd.randint(0, 3))]
    if rnd.random() < 0.5:  # at most one variadic, as jaxtyping allows
        v = rnd.choice(["*V", "*W", "...", "*_"])
        items.insert(rnd.randint(0, len(items)), (v, ("var", v[1:] if v[1].isupper() else None)))
    return rnd.choice([" ", ", "]).join(t for t, _ in items), [i for _, i in items]


def _axis(item: tuple, size: int, env: dict):
    """The bindings under which ``size`` fits ``item`` (none, one, or both for ``#``)."""
    kind = item[0]
    if kind == "any":
        yield env
    elif kind == "int":
        if size == item[1]:
            yield env
    elif kind == "name":
        if item[1] not in env:
            yield {**env, item[1]: size}
        elif env[item[1]] == size:
            yield env
    elif kind == "lin":
        _, n, a, c = item
        if n in env:
            if a * env[n] + c == size:
                yield env
        elif (size - c) % a == 0 and size >= c:
            yield {**env, n: (size - c) // a}
    elif size == 1:  # '#': a size-1 axis fits and binds nothing
        yield env
    else:
        yield from _axis(item[1], size, env)


def _fits(items: list[tuple], shape: tuple[int, ...], env: dict):
    fixed = [i for i in items if i[0] != "var"]
    var = [k for k, i in enumerate(items) if i[0] == "var"]
    if len(shape) < len(fixed) or (not var and len(shape) != len(fixed)):
        return
    if var:
        k, n = var[0], len(shape) - len(fixed)
        name, cells = items[k][1], shape[k:k + n]
        if name is not None:
            if env.get("*" + name, cells) != cells:
                return
            env = {**env, "*" + name: cells}
        shape = shape[:k] + shape[k + n:]

    def go(i: int, env: dict):
        if i == len(fixed):
            yield env
        else:
            for e in _axis(fixed[i], shape[i], env):
                yield from go(i + 1, e)

    yield from go(0, env)


def _accepts(annotations: list[list[tuple]], shapes: list[tuple[int, ...]]) -> bool:
    def go(i: int, env: dict) -> bool:
        return i == len(shapes) or any(go(i + 1, e) for e in _fits(annotations[i], shapes[i],
                                                                     env))
    return go(0, {})


def _shape(items: list[tuple], rnd, env: dict) -> tuple[int, ...]:
    """A shape that mostly fits ``items`` under the sizes drawn so far, sometimes one off."""
    out: list[int] = []
    for item in items:
        if item[0] == "var":
            key = f"*{item[1]}"
            cells = env.get(key) if item[1] and rnd.random() < 0.8 else None
            if cells is None:
                cells = tuple(rnd.choice([0, 1, 2, 3]) for _ in range(rnd.randint(0, 2)))
                env.setdefault(key, cells)
            out += cells
            continue
        if item[0] == "#" and rnd.random() < 0.3:
            out.append(1)
            continue
        base = item[1] if item[0] == "#" else item
        if base[0] in ("int", "any"):
            out.append(base[1] if base[0] == "int" else rnd.randint(0, 4))
        else:
            v = env.setdefault(base[1], rnd.randint(0, 4))
            out.append(v if base[0] == "name" else max(0, base[2] * v + base[3]))
    if out and rnd.random() < 0.3:
        out[rnd.randrange(len(out))] = rnd.randint(0, 5)
    if rnd.random() < 0.1:
        out.append(rnd.randint(1, 3))
    return tuple(out)


@fuzz(300)
@given(st.randoms(use_true_random=False))
def test_fuzz_shaped_against_a_matcher(rnd):
    """Two arguments and a return value: ``@shaped`` (generated and interpreted) accepts a
    call exactly when some sizes fit every shape, and refuses it with a SignatureError."""
    texts, items = zip(*[_annotation(rnd) for _ in range(3)], strict=True)
    env: dict = {}
    shapes = [_shape(i, rnd, env) for i in items]
    want = _accepts(list(items), shapes)
    note(f"x: {texts[0]!r}, y: {texts[1]!r} -> {texts[2]!r}; shapes {shapes}; fits: {want}")

    def f(x: Shaped[np.ndarray, texts[0]], y: Shaped[np.ndarray, texts[1]], out
          ) -> Shaped[np.ndarray, texts[2]]:
        return out

    x, y, out = (np.broadcast_to(np.zeros(()), s) for s in shapes)
    for compiled in (True, False):
        g = ts.shaped(compiled=compiled)(f)
        with guard(f"@shaped {texts}"):
            try:
                g(x, y, out=out)
                got = True
            except SignatureError:
                got = False
        assert got == want, f"compiled={compiled}"


# -- tensig.testing.sizes on random annotations ---------------------------------------------------


@fuzz(60)
@given(st.randoms(use_true_random=False))
def test_fuzz_sizes_keep_apart_or_refuse(rnd):
    """``sizes`` of random names and one-name expressions: sizes that break no rule of
    ``collisions``, with every expression at least 2 and apart, or a ValueError."""
    texts = [_annotation(rnd)[0] for _ in range(rnd.randint(1, 3))]
    source = "; ".join(texts)
    note(source)
    with guard(f"sizes({source!r})"):
        try:
            got = sizes(source, seed=rnd.choice([None, rnd.randrange(9)]))
        except ValueError as e:
            assert "no size of" in str(e)
            return
    assert collisions(got) == []
    values = list(got.values())
    for text in texts:
        for word in text.replace(",", " ").split():
            if any(c in word for c in "+-*") and not word.startswith(("*", "#")):
                value = ts.Dim.parse(word).evaluate(got)
                assert value >= 2 and value not in values, (word, got)


# -- tensig verify on odd paths ------------------------------------------------------------------

GOOD = '''
import numpy as np
from tensig import Float

def pool(x: Float[np.ndarray, "B T d"]) -> Float[np.ndarray, "B d"]:
    return x.mean(axis=1)
'''


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_verify_skips_pipes_and_folders_named_like_modules(tmp_path, capsys):
    """A pipe named ``*.py`` blocked the import until the time limit (then a note blaming
    compiled code), and a folder named ``*.py`` was imported as a file (``IsADirectoryError``);
    a pipe given by name is a usage error at once."""
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "pkg.py").mkdir()
    (tmp_path / "pkg.py" / "good.py").write_text(GOOD)
    with guard("verify of a folder with a pipe", 20):
        reports = verify_path(str(tmp_path))
    assert [(r.function, r.notes) for r in reports] == [("pool", [])]
    with guard("verify of a pipe", 20):
        assert main(["verify", "--in-process", str(tmp_path / "pipe.py")]) == 2
    assert "not a file or a folder" in capsys.readouterr().err


def test_a_call_verify_cannot_make_is_a_note_naming_the_function():
    """A required keyword-only argument without an annotation fails at the call itself, in
    no line of the user's: the note said ``stopped at None:None``."""
    def f(x: ts.Float[np.ndarray, "B T"], *, k: int) -> ts.Float[np.ndarray, "T"]:
        return x[0]

    (note_,) = ts.verify(f).notes
    assert "None" not in note_ and "calling f()" in note_ and "'k'" in note_



def test_a_fitted_result_growing_faster_than_its_inputs_is_not_built_at_large_witnesses():
    """``np.outer`` of a half-sliced (B, T, d) array was fitted from runs whose results grow
    as the square of the inputs: 275 million cells at the second run, 1.1 billion at the
    third (17 GB: a MemoryError note under a limit, the machine's memory without one)."""
    out = run_limited("""
        import numpy as np, tensig as ts
        def f(x):
            x = x[:-1]
            return np.outer(x[x.shape[0] // 2:], x[x.shape[0] // 2:])
        print(ts.verify(f, "B T d => B T d").notes)
    """, timeout=120, memory_mb=3000)
    assert not out.timed_out and out.returncode == 0, out.stderr[-2000:]
    assert "a result too large" in out.stdout and "MemoryError" not in out.stdout, out.stdout


def test_a_fitted_op_tiling_by_a_float_array_stops_with_a_note():
    """``np.tile(a, b)`` by a (T,) float array: zeros were refused as counts, so the fit ran
    the distinct fill (1 .. T) as reps, T! * B cells (20 GB: the machine's memory).  The
    fill's floats are below 1 now: refused as counts too, a note."""
    out = run_limited("""
        import numpy as np, tensig as ts
        print(ts.verify(lambda a, b: np.tile(a, b), "B; T =>").notes)
        print(ts.verify(lambda a: np.tile(a, 3), "B => 3*B").notes)
        print(ts.verify(lambda a, b: np.repeat(a, b.shape[0]), "B; T => B*T").notes)
    """, timeout=120, memory_mb=3000)
    assert not out.timed_out and out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert "numpy.tile (TypeError" in lines[0] and "MemoryError" not in out.stdout, out.stdout
    assert lines[1:] == ["[]", "[]"], out.stdout


def test_a_fitted_result_a_constant_times_its_inputs_is_still_verified():
    """``np.outer`` of a flattened (B, T, d) array with 2000 fixed cells grows linearly: the
    guard's power law through one run (2431 cells to 4.9 million: ``n**1.98``) stopped it
    at witnesses where its result is 67 million cells, under the limit."""
    report = ts.verify(lambda x: np.outer(x.ravel(), np.ones(2000)), "B T d => (B*T*d) 2000")
    assert clean(report), report

# -- deferred sizes read argument values, never run them ------------------------------------------


def test_a_deferred_size_never_runs_an_argument():
    """``{n}`` pasted the argument's text into code and ran it: a string argument executed
    (builtins removed, but reachable through ``().__class__``), an array's text was a
    SyntaxError.  A value that is no number is a TypeError naming it; a float is not checked
    (no whole number), as before."""
    @ts.shaped
    def f(x: ts.Float[np.ndarray, "{n}"], n):
        return x

    code = "[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_'] or 3"
    for value in (code, "3", np.zeros(4)):
        with pytest.raises(TypeError, match=r"reads \{n\} = .*not a number"):
            f(np.zeros(3), value)
    for value in (3, np.int64(3), np.array(3), 3.5):
        assert f(np.zeros(3), value).shape == (3,)
    with pytest.raises(SignatureError, match="has size 3"):
        f(np.zeros(3), 4)


def test_a_deferred_size_reads_the_length_of_an_argument():
    """jaxtyping's ``{len(tokens)}``: ``len`` was no name a deferred size could call."""
    @ts.shaped
    def f(x: ts.Float[np.ndarray, "{len(tokens)} d"], tokens: list[int]):
        return x

    assert f(np.zeros((3, 2)), [5, 6, 7]).shape == (3, 2)
    with pytest.raises(SignatureError, match=r"has size 2, but \{len\(tokens\)\} = 3"):
        f(np.zeros((2, 2)), [5, 6, 7])


def test_a_deferred_size_of_an_optional_argument_not_given_is_not_checked():
    """``n=None`` (the size not given) was skipped before deferred sizes read values; since,
    a TypeError ('None, a NoneType, not a number') refused the call."""
    @ts.shaped
    def f(x: ts.Float[np.ndarray, "{n} {n}+1"], n=None):
        return x

    assert f(np.zeros((3, 5))).shape == f(np.zeros((3, 5)), None).shape == (3, 5)
    with pytest.raises(SignatureError, match="has size 5"):
        f(np.zeros((3, 5)), 3)


# -- options of the wrong type ---------------------------------------------------------------------


@pytest.mark.parametrize("fn, kw", [
    (fn, kw) for fn in ("infer", "einsum1", "einsum_path")
    for kw in ({"sizes": [1]}, {"sizes": 3}, {"sizes": "i=2"}, {"params": [1]},
               {"use_padding": "yes"})
    if fn != "einsum_path" or "sizes" in kw])  # einsum_path takes sizes= only
def test_options_of_the_wrong_type_are_a_type_error(fn, kw):
    """``sizes=[1]`` raised ``AttributeError: 'list' object has no attribute 'items'``."""
    x = (2,) if fn == "infer" else np.zeros(2)
    with pytest.raises(TypeError, match="must be"):
        getattr(ts, fn)("i => i", x, **kw)


# -- padding values a dtype cannot hold ------------------------------------------------------------


@pytest.mark.parametrize("dtype, value", [
    (np.uint8, 300), (np.uint8, -1),      # OverflowError from NumPy
    (np.int64, float("nan")),             # the cast's garbage (int64 minimum), a warning only
    (np.int8, 1e10),                      # silently 0
    (np.float32, 1e40),                   # silently inf
    (np.float64, "x"),                    # NumPy's "could not convert string to float"
    (np.bool_, 2),
])
def test_a_padding_value_the_dtype_cannot_hold_is_refused(dtype, value):
    rows = [np.zeros(3, dtype), np.zeros(1, dtype)]
    with pytest.raises(ts.PaddingError, match=re.escape(f"value={value!r} does not fit")):
        ts.pad(rows, value=value)
    with pytest.raises(ts.PaddingError, match="does not fit"):
        ts.pad(rows).to_side("left", value=value)


@pytest.mark.parametrize("dtype, value", [(np.float32, 0.1), (np.float32, -np.inf),
                                          (np.uint8, 255), (np.int8, np.array(-128)),
                                          (np.bool_, True), (np.float64, np.float32(2.5)),
                                          # float32's minimum as printed (rounds to it)
                                          (np.float32, -3.4028235e38),
                                          (np.float32, fractions.Fraction(1, 2)),
                                          (np.float16, decimal.Decimal("0.5")),
                                          (np.int16, np.float64(-2.0))])
def test_padding_values_the_dtype_holds_still_pad(dtype, value):
    got = ts.pad([np.zeros(2, dtype), np.zeros(1, dtype)], value=value).data
    assert got.dtype == dtype and got[1, 1] == np.asarray(value).astype(dtype)


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
def test_a_padding_value_no_float_holds_is_a_padding_error(dtype):
    """10**400 raised OverflowError ('int too large to convert to float') from the check."""
    with pytest.raises(ts.PaddingError, match=r"value=1000.* does not fit"):
        ts.pad([np.zeros(2, dtype), np.zeros(1, dtype)], value=10**400)


@pytest.mark.parametrize("dtype", [np.int32, bool])
def test_an_additive_mask_of_an_integer_dtype_is_refused(dtype):
    """-inf cast to int32 was the int32 minimum (with a RuntimeWarning), which wraps when
    added to integer scores."""
    batch = ts.pad([np.zeros(2), np.zeros(1)])
    with pytest.raises(ts.PaddingError, match="floating"):
        batch.additive_key_mask(dtype)
    assert batch.additive_key_mask(np.float32).dtype == np.float32


def test_a_first_row_that_is_no_sequence_is_named_once():
    """``pad([1, 2])`` said ``row 0 is a int, row 0 a int``."""
    with pytest.raises(ts.PaddingError, match="row 0 is a int: pad") as e:
        ts.pad([1, 2])
    assert str(e.value).count("row 0") == 1
    with pytest.raises(ts.PaddingError, match="row 1 is a int, row 0 a list"):
        ts.pad([[1], 2])


# -- expressions no size decides -------------------------------------------------------------------


def _two_uses(compiled, a, b, sizes):
    """``f(x: a, y: b)`` checked by ``@shaped``, with zero vectors of ``sizes``."""
    def f(x: Shaped[np.ndarray, a], y: Shaped[np.ndarray, b]):
        return x

    return ts.shaped(compiled=compiled)(f), np.zeros(sizes[0]), np.zeros(sizes[1])


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("a, b, sizes, fits", [
    ("h*w", "h*w", (6, 5), False), ("h*w", "w*h", (6, 6), True), ("h + w", "h + w", (6, 5), False),
    ("h*w", "h*w + 1", (6, 6), False), ("h*w", "h*w + 1", (6, 7), True),
    ("(h*w + 1) // 2", "(h*w + 1) // 2", (3, 4), False), ("h*w", "h*w - 2", (1, 0), False),
])
def test_one_expression_no_size_decides_has_one_size(compiled, a, b, sizes, fits):
    """``h*w`` of size 6 in one argument and 5 in another was accepted: an expression with
    two unknown names is skipped, and so was the contradiction between its two uses."""
    g, x, y = _two_uses(compiled, a, b, sizes)
    if fits:
        assert g(x, y) is x
    else:
        with pytest.raises(SignatureError, match=r"at argument 'x' axis 0, so"):
            g(x, y)


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("a, b, sizes, error", [
    ("T**2", "_", (5, 1), r"no whole T >= 0 gives T\*\*2 = 5"),
    ("(T + 1)**2", "_", (0, 1), r"no whole T >= 0 gives T\*\*2 \+ 2\*T \+ 1 = 0"),
    ("T**2", "T**3", (4, 9), r"'y' axis 0 .* size 9, but T\*\*2 has size 4 at argument 'x' axis 0, "
                             r"so T\*\*3 = 8"),
    ("T // 2 + 1", "_", (0, 1), r"no whole T >= 0 gives T // 2 \+ 1 = 0"),
    ("T // 2", "T", (3, 8), r"'x' axis 0 .* has size 3, but T // 2 = 4 with T = 8"),
    ("T**2", "T**3", (4, 8), None), ("T**3 + T", "T + 1", (10, 3), None),
    ("T // 2", "T", (3, 7), None), ("(T - 5) // 2 * T", "_", (0, 1), None),
    ("b % 2", "_", (4, 1), r"no whole b >= 0 gives b % 2 = 4"),
    ("T + b % 2", "T", (5, 2), r"no whole b >= 0 gives T \+ b % 2 = 5, T = 2"),
    ("T**2 % 5", "_", (2, 1), r"no whole T >= 0 gives T\*\*2 % 5 = 2"),
    ("T**2 % 5", "_", (4, 1), None), ("T + b % 2", "T", (3, 2), None),
    ("T // 2", "T // 3", (3, 3), r"T // 2 has size 3 at argument 'x' axis 0, so T // 3 = 2"),
    ("T // 2", "T // 3", (3, 2), None), ("T // 2", "T // 7", (3, 1), None),
    ("T // 4", "T // 2", (1, 0), r"T // 4 has size 1 at argument 'x' axis 0, so T // 2 = 2..3"),
    ("T // 2", "T % 4", (3, 0), r"T // 2 has size 3 at argument 'x' axis 0, so T % 4 = 2..3"),
    ("T // 2", "T % 4", (3, 3), None), ("T // 2", "T % 2", (3, 0), None),
])
def test_a_nonlinear_use_of_one_unbound_name_is_solved(compiled, a, b, sizes, error):
    """``T**2`` of size 5 was accepted (no whole T gives it), ``T**2`` of size 4 beside
    ``T**3`` of size 9 too, and ``b % 2`` of size 4: a use nonlinear in its one unknown was
    skipped as undecided; ``T // 2`` of size 3 (T 6 or 7) beside ``T // 3`` of size 3 (T 9 to
    11) too, where each use alone has several solutions."""
    g, x, y = _two_uses(compiled, a, b, sizes)
    if error is None:
        assert g(x, y) is x
    else:
        with pytest.raises(SignatureError, match=error):
            g(x, y)


NONLINEAR = ["T**2", "T//2", "T//3 + 1", "(T+1)//2", "T*(T//2)", "T % 4", "T % 2", "T**2 % 5",
             "T//2 + T//3", "2*T + 1", "(T % 3) + 2", "T**2 // 3", "T//4", "T*T - 2*T",
             "(T - 3)*(T - 3)", "T**3 - 6*T**2 + 9*T"]


@fuzz(150)
@given(st.randoms(use_true_random=False))
def test_fuzz_shaped_nonlinear_uses_of_one_name_against_brute_force(rnd):
    """Three uses of ``T`` that grow with it, repeat or go down and up: ``@shaped`` accepts
    exactly when some ``T`` gives every size (Python's arithmetic on the text, tried up to 3000,
    past where any size here is reached); the solutions of each use alone were checked, not
    their common one, and a use that goes down and up not at all."""
    texts = [rnd.choice(NONLINEAR) for _ in range(3)]
    forms = [eval(f"lambda T: {t}") for t in texts]  # the oracle: the text as Python
    t = rnd.randint(0, 12)
    shapes = [max(0, form(t) + rnd.choice([0, 0, 1, -1])) for form in forms]
    want = any(all(form(u) == s for form, s in zip(forms, shapes, strict=True))
               for u in range(3000))
    note(f"{texts} of sizes {shapes}: fits {want}")

    def f(x: Shaped[np.ndarray, texts[0]], y: Shaped[np.ndarray, texts[1]],
          z: Shaped[np.ndarray, texts[2]]):
        return x

    for compiled in (True, False):
        try:
            ts.shaped(compiled=compiled)(f)(*(np.zeros(s) for s in shapes))
            got = True
        except SignatureError:
            got = False
        assert got == want, f"compiled={compiled}"


# -- Dask with axes of size 0 ----------------------------------------------------------------------


@needs["dask"]
def test_dask_max_keeping_an_empty_axis_computes_the_inferred_shape():
    """Dask's max over (0, 1) of a (2, 5, 4, 0) array is lazily (4, 0) but computes (2, 0);
    a max over an empty axis failed only once computed ("zero-size array to reduction")."""
    x = np.zeros((2, 5, 4, 0), np.float16)
    got = ts.einmax1("..w.. => ,", ts.rows(_dask(x), input=2))
    assert got.array.compute().shape == got.array.shape == (4, 0)
    got = ts.einmax1("i, j => i", _dask(np.zeros((3, 0))))
    np.testing.assert_array_equal(got.compute(), [-np.inf] * 3)


@needs["dask"]
def test_dask_max_over_an_empty_axis_stays_a_graph():
    """The neutral elements of a max over an empty axis are a Dask ``full``, computed later:
    the host NumPy fill of the whole result (32 MiB here) was made at the call."""
    import tracemalloc

    import dask.array as da

    x = da.from_array(np.zeros((1 << 22, 0)), chunks=-1)  # one chunk: a graph of one task
    tracemalloc.start()
    try:
        got = ts.einmax1("i, j => i", x)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 22, f"{peak >> 20} MiB allocated at the call"
    assert got[:3].compute().tolist() == [-np.inf] * 3


@needs["dask"]
@pytest.mark.parametrize("spec, shape, kw", [
    ("i, o<+k => i, o", (0, 5), {"sizes": {"k": 2}}),            # windows: dask's overlap
    ("i, o+k => i, o", (0, 5), {"sizes": {"k": 3}, "use_padding": True}),  # dask's pad
])
def test_dask_windows_and_padding_of_an_empty_operand(spec, shape, kw):
    """Dask's overlap ("overlapping depth 1 is larger than your array 0") and pad
    (ZeroDivisionError) fail on an array with an axis of size 0."""
    x = np.zeros(shape)
    want = ts.einsum1(spec, x, **kw)
    got = ts.einsum1(spec, _dask(x), **kw)
    assert got.compute().shape == got.shape == want.shape


def _empty_problem(rnd):
    """tests/test_attacks_parser.py's coherent problems with sizes 0, 1 and 2 (axes of no
    cells everywhere); ``None`` where a size would be negative or the operands are big."""
    import test_attacks_parser as tap

    symbolic, tap.SYMBOLIC = tap.SYMBOLIC, [0, 1, 2]
    try:
        p = tap.Problem(rnd)
    except ts.ShapeError:  # a size the generator derived below 0
        return None
    finally:
        tap.SYMBOLIC = symbolic
    shapes = [s if isinstance(s, ts.Shape) else ts.Shape(output=s) for s in p.operands]
    dims = [tuple(int(d) for d in s.dims) for s in shapes]
    return None if any(np.prod(d) > 400 for d in dims) else (p, shapes, dims)


@pytest.mark.parametrize("lib, make", [p for p in LIBS if p.values[0] != "jax"])
@fuzz(40)
@given(rnd=st.randoms(use_true_random=False))
def test_fuzz_operators_with_empty_axes_as_numpy(lib, make, rnd):
    """Every eager operator on random specs whose sizes include 0, on torch and Dask: the
    NumPy answer (itself checked against the loop interpreter), or an error where NumPy
    raises one; the shape before and after computing agree."""
    from test_attacks_fuzz import EXPECTED, OPS, _plain, _rows

    op = rnd.choice(OPS)
    dtype = rnd.choice([np.float64, np.float32, np.int64, np.int8, np.bool_])
    drawn = _empty_problem(rnd)
    if drawn is None:
        return
    p, shapes, dims = drawn
    gen = np.random.default_rng(rnd.randrange(99))
    arrays = [gen.integers(0 if dtype == np.bool_ else -3, 4, d).astype(dtype) for d in dims]
    note(f"ts.{op}({p.text!r}, {[str(s) for s in shapes]}, {np.dtype(dtype).name}, **{p.kw})")

    def run(conv):
        try:
            return getattr(ts, op)(p.text, *_rows([conv(a) for a in arrays], shapes), **p.kw)
        except EXPECTED as e:
            return e

    with guard(f"{op} {p.text!r}"):
        want = run(lambda a: a)
        got = run(make)
        if isinstance(want, Exception) or isinstance(got, Exception):
            assert isinstance(got, Exception) == isinstance(want, Exception), (want, got)
            return
        lazy = got.array if isinstance(got, ts.RowArray) else got
        value = _numpy(lazy)
    assert value.shape == tuple(lazy.shape) == _plain(want).shape
    tol = tolerance(dtype)
    np.testing.assert_allclose(value.astype(np.float64), _plain(want).astype(np.float64),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("a, b, sizes, value", [
    ("h*w", "2*h*w", (6, 10), "12"), ("h*w", "2*h*w", (6, 12), None),
    ("2*h*w", "3*h*w + 1", (4, 8), "7"), ("2*h*w", "3*h*w + 1", (4, 7), None),
    ("h*w", "(h*w + 1) // 2", (6, 4), "3"), ("h*w", "(h*w + 1) // 2", (6, 3), None),
    ("h*w", "h**2*w**2", (3, 10), "9"), ("h*w", "h**2*w**2", (3, 9), None),
    ("2*h*w", "h*w", (6, 2), "3"), ("h*w", "20 - h*w", (6, 13), "14"),
])  # 2*h*w of size 5 is itself a mismatch now: test_runtime's two unknowns no sizes reach
def test_uses_of_one_undecided_product_related_by_a_factor_agree(compiled, a, b, sizes, value):
    """``h*w`` of size 6 and ``2*h*w`` of size 10 were accepted: only uses that differ by a
    constant were compared, not by a factor or through a power or ``//`` of the product."""
    g, x, y = _two_uses(compiled, a, b, sizes)
    if value is None:
        assert g(x, y) is x
    else:
        with pytest.raises(SignatureError, match=rf"argument 'y' axis 0 .* has size {sizes[1]}, "
                           rf"but .* has size {sizes[0]} at argument 'x' axis 0, .* = {value}\n"):
            g(x, y)


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("a, b, sizes, value", [
    ("h + w", "(h + w)**2", (6, 35), "36"), ("h + w", "(h + w)**2", (6, 36), None),
    ("(h + w)**2", "h + w", (35, 6), "36"), ("(h + w)**2", "h + w", (36, 6), None),
    ("h + w", "h + w + 1", (6, 8), "7"), ("h + w", "(h + w) // 2", (6, 4), "3"),
    ("h + w", "(h + w)*(h + w + 1)", (6, 43), "42"), ("h - w", "(h - w)**2", (2, 5), "4"),
    ("2*h + w", "(2*h + w)**2 + 1", (3, 9), "10"), ("2*h + w", "(2*h + w)**2 + 1", (3, 10), None),
    ("h + w", "h*w + h", (6, 9), None),  # h = 1, w = 5 (or h = 3, w = 3): no one value
])
def test_uses_of_one_undecided_sum_agree(compiled, a, b, sizes, value):
    """``h + w`` of size 6 and ``(h + w)**2`` of size 35 were accepted: a solved sum was put
    into no other use (only a product was), so no size of ``h + w`` compared the two."""
    g, x, y = _two_uses(compiled, a, b, sizes)
    if value is None:
        assert g(x, y) is x
    else:
        bad, other = (0, 1) if "**" in a else (1, 0)  # the use compared second
        with pytest.raises(SignatureError, match=rf"argument '{'xy'[bad]}' axis 0 .* has size "
                           rf"{sizes[bad]}, but .* has size {sizes[other]} at argument "
                           rf"'{'xy'[other]}' axis 0, so .* = {value}\n"):
            g(x, y)


@pytest.mark.parametrize("compiled", [True, False])
def test_a_use_no_whole_size_solves_names_a_size_solved_in_the_same_run(compiled):
    """``w + 1`` solved ``w = 16`` in the run that found ``h*w + h = 2`` unsolvable, and the
    message, which names ``w``, raised KeyError: the solved sizes were written back only after
    a run that succeeded."""
    def f(x: Shaped[np.ndarray, "h*w + h"], y: Shaped[np.ndarray, "w + 1"]):
        return x

    with pytest.raises(SignatureError, match=r"argument 'x' axis 0 .* has size 2, but no whole "
                       r"h >= 0 gives h\*w \+ h = 2, w = 16\n"):
        ts.shaped(compiled=compiled)(f)(np.zeros(2), np.zeros(17))


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("sizes, value", [((2,), None), ((2, 6), None), ((2, 7), "6")])
def test_an_undecided_use_led_by_a_negative_term_is_compared_not_a_crash(compiled, sizes, value):
    """``w - h`` (canonically ``-h + w``) raised 'cannot divide -h + w by -1' from inside the
    check: its form was divided by its leading coefficient, negative."""
    def f(x: Shaped[np.ndarray, "w - h"], *ys: Shaped[np.ndarray, "3*w - 3*h"]):
        return x

    g = ts.shaped(compiled=compiled)(f)
    x, ys = np.zeros(sizes[0]), [np.zeros(n) for n in sizes[1:]]
    if value is None:
        assert g(x, *ys) is x
    else:
        with pytest.raises(SignatureError, match=rf"argument 'ys\[0\]' axis 0 .* has size "
                           rf"{sizes[1]}, but .* has size 2 at argument 'x' axis 0, "
                           rf".* = {value}\n"):
            g(x, *ys)


# -- duck types whose .shape is no tuple -----------------------------------------------------------


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("found", [None, 5])
@pytest.mark.parametrize("dtype", [False, True])
def test_a_shape_that_is_no_tuple_is_named(compiled, found, dtype):
    """A duck type with ``.shape = None`` or ``5`` raised 'object of type ... has no len()'
    from inside the check."""
    class Duck:
        shape, dtype = found, np.dtype("float32")

    def f(x: Shaped[np.ndarray, "a b"]):
        return x

    def g(x: ts.Float[np.ndarray, "a b"]):
        return x

    with pytest.raises(TypeError, match=rf"^[fg]\(\): argument 'x' is a Duck whose \.shape is "
                       rf"{found}, not a tuple of sizes"):
        ts.shaped(compiled=compiled)(g if dtype else f)(Duck())


@pytest.mark.parametrize("size", [dict(multiple_of=2**62), dict(length=2**61),
                                  dict(length=2**63 // 16)])
def test_pad_refuses_a_batch_no_array_can_address(size):
    """``multiple_of=2**62`` raised NumPy's 'array is too big' from the allocator."""
    with pytest.raises(ts.PaddingError, match=r"would make a batch \[2, \d+, \.\.\.\] of \d+ "
                       r"bytes, over the \d+ an array can address"):
        ts.pad([[1, 2, 3], [4]], **size)
    assert ts.pad([[1, 2, 3], [4]], multiple_of=2**10).data.shape == (2, 2**10)
