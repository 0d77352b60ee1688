"""Fuzzers for the surfaces the other attack files cover least, and the defects they found.

Each fuzzer is small and seeded (``derandomize``): CI runs the same few dozen examples, each
under a per-call time guard, in a few seconds; ``TENSIG_FUZZ_EXAMPLES=n`` runs more and
``TENSIG_FUZZ_SEED=n`` draws others.  The oracles:

- values: the loop interpreter ``tests/reference.py`` (eager operators on coherent random
  problems), ``numpy.einsum`` (mixed dtypes, empty axes, 0-d operands) and the eager function
  for its graph operation (``tensig.model.graph``);
- bad input: one of tensig's errors (or a ``TypeError`` for a wrong argument type, or an
  error of a rank primitive that names the primitive), never another exception, never a call
  over the time guard.

The regressions first: each is a minimal reproduction of a defect the fuzzers found.
"""

from __future__ import annotations

import os
import time
import warnings
from contextlib import suppress

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis import strategies as st

import tensig as ts
from arrays import random_einsum, tolerance
from limits import alarm
from tensig import InconclusiveError, Shape, ShapeError, SpecSyntaxError, rank
from tensig.check.verify import Signature
from tensig.core.annotations import parse_annotation
from tensig.model import graph as G

EXPECTED = (SpecSyntaxError, ShapeError, InconclusiveError, TypeError)
EXAMPLES = os.environ.get("TENSIG_FUZZ_EXAMPLES")
SEED = os.environ.get("TENSIG_FUZZ_SEED")
GUARD_S = 60  # a hang guard, far above any correct call on a slow CI machine


# -- regressions --------------------------------------------------------------------------------


def _libraries():
    libs = [("numpy", np.asarray)]
    for name, make in (("torch", lambda m: m.tensor), ("jax", lambda m: m.numpy.asarray)):
        with suppress(ImportError):
            libs.append((name, make(__import__(name))))
    return libs


@pytest.mark.parametrize("lib, make", _libraries())
def test_max_over_an_empty_axis_is_the_neutral_element(lib, make):
    """A max of no cells is the dtype's neutral element (as a window of padding is), not
    NumPy's 'zero-size array to reduction operation maximum' or torch's IndexError."""
    got = ts.einmax1("i, j => j", make(np.zeros((0, 3))))
    np.testing.assert_array_equal(np.asarray(got), [-np.inf] * 3)
    got = ts.einmax1("i, j => j", make(np.zeros((0, 3), np.int8)))
    np.testing.assert_array_equal(np.asarray(got), [-128] * 3)
    assert np.asarray(ts.tropical("i; i => ", make(np.zeros(0)), make(np.zeros(0)))) == -np.inf


def test_outer_sum_counts_wrap_around_in_narrow_integers():
    """A sum over a label of one operand only is a count times the other's sum: 600 did not
    fit int8 (OverflowError from NumPy 2); the count wraps as the additions would."""
    torch = pytest.importorskip("torch")
    for dt in (np.int8, np.uint8, np.int16):
        a, b = np.ones((2, 300), dt), np.ones(2, dt)
        want = (a.astype(np.int64).sum(1) * 2 + b.astype(np.int64).sum() * 300).astype(dt)
        got = ts.outer_sum("i, k; j => i", a, b)
        assert got.dtype == dt
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(
            ts.outer_sum("i, k; j => i", torch.tensor(a), torch.tensor(b)).numpy(), want)


@pytest.mark.parametrize("da, db", [(np.bool_, np.float64), (np.uint8, np.float64),
                                    (np.uint8, np.int64), (np.bool_, np.int8)])
def test_a_sum_of_one_operand_is_taken_in_the_promoted_dtype(da, db):
    """``j;k=>``: the bool operand was summed alone first in its own dtype (an or: 1, not 3),
    the uint8 one wrapped around, before promotion; numpy.einsum promotes first."""
    a = np.array([1, 1, 1] if da is np.bool_ else [200, 200, 200]).astype(da)
    b = np.array([2], db)
    for spec, theirs, y in (("j;k=>", "j,k->", b), ("j;=>", "j,->", b[0:1].reshape(()))):
        want = np.einsum(theirs, a, y)
        got = ts.einsum(spec, a, y)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("spec, theirs, shapes", [
    ("a; a, b, b => ", "a,abb->", [(3,), (3, 2, 2)]),
    ("a; a, b, b => a", "a,abb->a", [(3,), (3, 2, 2)]),
    ("; b, b => ", ",bb->", [(), (2, 2)]),
])
def test_torch_int8_diagonal_keeps_int8(spec, theirs, shapes):
    """A diagonal is torch.einsum's, which sums it in int64 and then refuses to multiply that
    by int8 ('expected scalar type Char but found Long'), or returns int64."""
    torch = pytest.importorskip("torch")
    xs = [np.arange(100, 100 + np.prod(s)).reshape(s).astype(np.int8) for s in shapes]
    want = np.einsum(theirs, *xs)
    got = ts.einsum(spec, *[torch.tensor(x) for x in xs])
    assert got.dtype == torch.int8
    np.testing.assert_array_equal(got.numpy(), want)


def test_einsum_path_of_a_diagonal_result():
    """opt_einsum refused the repeated output letter ('Output character ... appeared more
    than once'): the path is the contraction's, the diagonal placed after it."""
    path, report = ts.einsum_path("i; i; k => i, i", (3,), (3,), (2,))
    assert path == ts.einsum_path("i; i; k => i", (3,), (3,), (2,))[0]
    assert "a,a,b->a" in report


def test_more_than_52_axes_is_a_shape_error_naming_the_spec():
    """53 distinct axes do not fit einsum's letters: a bare ``ValueError`` that named no
    spec, from ``einsum1`` and ``einsum_path`` alike."""
    axes = ", ".join(f"a{i}" for i in range(53))
    for call in (lambda: ts.einsum1(f"{axes} => a0", np.ones((1,) * 53)),
                 lambda: ts.einsum_path(f"{axes}; a0 => a0", (1,) * 53, (1,))):
        with pytest.raises(ts.ShapeError, match="more than 52 distinct axes") as e:
            call()
        assert e.value.spec is not None and "a52" in e.value.spec and "a52" in str(e.value)


@pytest.mark.parametrize("spec, shapes", [
    ("a; b => ", [(2,), (3,)]), ("a; b => a", [(2,), (3,)]), ("0; a, b => a", [(1,), (3, 3)]),
    ("0, 2; b, a => a", [(1, 4), (3, 3)]),
])
def test_graph_concat_without_a_caret_is_the_eager_product(spec, shapes):
    """The graph took the first operand only (an ``id`` of several values): a wrong value,
    or a reshape error from the generated code."""
    xs = [np.arange(1.0, 1 + np.prod(s)).reshape(s) for s in shapes]
    with G.new_graph():
        ts_ = [G.leaf(f"x{i}", x) for i, x in enumerate(xs)]
        got = G.Model(G.concat(spec, *ts_)).run()
    np.testing.assert_array_equal(np.asarray(got), ts.concat(spec, *xs))


def test_graph_concat_without_a_caret_has_the_product_gradient():
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0])
    with G.new_graph():
        pa, pb = G.param("a", output=[2]), G.param("b", output=[3])
        m = G.Model(G.concat("a; b => ", pa, pb))
        m.set(pa, a)
        m.set(pb, b)
        assert float(m.backward()) == a.sum() * b.sum()
        np.testing.assert_allclose(np.asarray(pa.grad.numpy()), [b.sum()] * 2)
        np.testing.assert_allclose(np.asarray(pb.grad.numpy()), [a.sum()] * 3)


@pytest.mark.parametrize("spec, c, sum_to", [("a; b; c => a^b, c", [7.0], "x, y => "),
                                             ("a; b; c => a^b", [7.0, 1.0], "x => ")])
def test_graph_concat_gradient_of_operands_sharing_a_phase(spec, c, sum_to):
    """Every operand's gradient was the result's alone (a copy), right only when each phase
    has one operand: here ``c`` multiplies ``a`` in one phase and ``b`` in the other."""
    a, b, c = np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0]), np.array(c)
    with G.new_graph():
        pa, pb, pc = (G.param(n, output=[len(v)]) for n, v in (("a", a), ("b", b), ("c", c)))
        m = G.Model(G.einsum1(sum_to, G.concat(spec, pa, pb, pc)))
        for p, v in ((pa, a), (pb, b), (pc, c)):
            m.set(p, v)
        total = (a.sum() + b.sum()) * c.sum()
        assert float(m.backward()) == ts.concat(spec, a, b, c).sum() == total
        np.testing.assert_allclose(pa.grad.numpy(), [c.sum()] * 2)
        np.testing.assert_allclose(pb.grad.numpy(), [c.sum()] * 3)
        np.testing.assert_allclose(pc.grad.numpy(), [a.sum() + b.sum()] * len(c))


def _graph_gradients(op, spec, xs):
    """The graph's gradients of the sum of ``op(spec, *xs)``, and the exact ones (each
    operator is linear in each operand: a unit change per cell)."""
    def total(*vals):
        return float(np.asarray(getattr(ts, op)(spec, *vals)).sum())

    with G.new_graph():
        ps = [G.param(f"p{i}", output=list(x.shape)) for i, x in enumerate(xs)]
        m = G.Model(G.einsum1("... => ", getattr(G, op)(spec, *ps)))
        for p, x in zip(ps, xs, strict=True):
            m.set(p, x)
        assert float(m.backward()) == pytest.approx(total(*xs))
        got = [np.asarray(p.grad.numpy(), np.float64) for p in ps]
    want = []
    for i, x in enumerate(xs):
        w = np.zeros_like(x)
        for cell in np.ndindex(x.shape):
            e = np.zeros_like(x)
            e[cell] = 1
            w[cell] = total(*[x + e if j == i else v for j, v in enumerate(xs)]) - total(*xs)
        want.append(w)
    return got, want


@pytest.mark.parametrize("op, spec, shapes", [
    ("outer_sum", "i; j => i", [(2,), (3,)]),  # d/da_i sum_j (a_i + b_j) is |j|, not 1
    ("outer_sum", "i, k; j => i", [(2, 2), (3,)]),
    ("concat", "a; b, 1^a => a", [(2,), (2, 3)]),  # a fixed component beside a label
    ("concat", "a; 1^a => a", [(2,), (3,)]),
])
def test_graph_gradients_over_axes_of_the_other_operands(op, spec, shapes):
    """A gradient sums over every axis of the operation, the other operands' own ones too:
    outer_sum's copied the result's gradient alone (1 where the count is |j|)."""
    xs = [np.arange(2.0, 2 + np.prod(s)).reshape(s) for s in shapes]
    got, want = _graph_gradients(op, spec, xs)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w)


def test_graph_concat_gradient_in_a_phase_the_result_sits_out():
    """A gradient runs the operation's own phases: the fixed component's, which the result
    sits out, added the third operand's sum to the first's gradient (6, not 4)."""
    got, want = _graph_gradients("concat", "a; c, 1^c; _ => c",
                                 [np.array([2.0]), np.ones((2, 3)), np.ones(2)])
    np.testing.assert_allclose(got[0], want[0])


@pytest.mark.parametrize("spec, shapes", [
    ("a^b; a => b", [(5,), (2,)]),  # the operand's a-phase: b, so the result, inactive
    ("a; b; a^b => a", [(2,), (3,), (5,)]),
    ("a; b; a^b => b, 2^a", [(2,), (3,), (5,)]),  # and a fixed result component
    ("a; b => 1^a^b", [(2,), (3,)]),
    ("a, b; 2^b => a", [(2, 3), (5,)]),
    ("a; b, a^b => b", [(2,), (3, 5)]),
    ("a^b; b; a => a^b", [(5,), (3,), (2,)]),
    ("a^b, c; c^a => b", [(5, 2), (4,)]),
    ("a, 1^b; b => a, b", [(2, 4), (3,)]),
    ("a, b; b^c; c => a", [(2, 3), (7,), (4,)]),
])
def test_graph_concat_gradients_run_the_operations_own_phases(spec, shapes):
    """A concatenation's gradient is written under the operation's projections; it runs the
    phases the result takes part in, not every phase the differentiated operand does: each
    of the first three summed a phase the result sits out into a gradient.  The forward value
    against the loop interpreter, the gradients against unit changes of the eager result."""
    from reference import reference

    xs = [np.arange(2.0, 2 + np.prod(s)).reshape(s) for s in shapes]
    want, _ = reference(spec, xs, [Shape(output=s) for s in shapes], op="concat")
    np.testing.assert_allclose(np.asarray(ts.concat(spec, *xs)), want)
    got, want = _graph_gradients("concat", spec, xs)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w)


@pytest.mark.parametrize("op, spec, shapes", [
    ("einmax1", "i => i, i", [(3,)]),
    ("einmax1", "_, b, b => b, b", [(2, 3, 3)]),
    ("tropical", "i; j => i, i", [(2,), (3,)]),
])
def test_graph_max_on_a_diagonal_result_is_neutral_off_it(op, spec, shapes):
    """Cells of a diagonal result that nothing writes hold max's neutral element, as the
    eager function's: the graph placed the diagonal among zeros."""
    xs = [np.arange(-5.0, -5 + np.prod(s)).reshape(s) for s in shapes]
    with G.new_graph():
        leaves = [G.leaf(f"x{i}", x) for i, x in enumerate(xs)]
        got = G.Model(getattr(G, op)(spec, *leaves)).run()
    np.testing.assert_array_equal(np.asarray(got), getattr(ts, op)(spec, *xs))


@pytest.mark.parametrize("x", [np.array(2.0), 2])
def test_rank_length_of_a_scalar_is_a_shape_error(x):
    """``length``'s type ``[d, ..s..]`` needs a major axis: an IndexError before."""
    with pytest.raises(ShapeError, match=r"length: .*rank is 0, the type needs at least 1"):
        rank.length(x)
    with pytest.raises(ShapeError):
        rank.rerank(rank.length, -2)(x)


def test_rank_index_at_an_empty_position_is_the_whole_cell():
    """Remora's ``index`` at ``[]``: the array itself (NumPy's reshape error before)."""
    m = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(rank.index(m, np.zeros(0, int)), m)
    assert rank.index(np.array(1.5), np.zeros(0, int)) == 1.5
    np.testing.assert_array_equal(rank.index(m, np.zeros((2, 0), int)), [m, m])


@pytest.mark.parametrize("dtype", [np.float64, np.int8, np.bool_])
def test_rank_filter_with_an_empty_mask_of_any_dtype(dtype):
    """An empty mask is no data, so its dtype goes unchecked; NumPy then refused to index
    with an empty float array (IndexError)."""
    b = rank.filter(np.zeros(0, dtype), np.zeros((0, 2)))
    assert b.value.shape == (0, 2)


def test_rank_scan_whose_function_changes_the_shape_is_a_shape_error():
    """``fold`` named it; ``scan`` stacked cells of two shapes (NumPy's ValueError)."""
    with pytest.raises(ShapeError, match=r"scan: the function returned a cell of shape \(2, 1\)"):
        rank.scan(rank.lift(np.add), np.float32(0), np.zeros((2, 2, 1)))
    np.testing.assert_array_equal(rank.scan(np.add, np.zeros(2), np.ones((3, 2))),
                                  [[0, 0], [1, 1], [2, 2], [3, 3]])


# -- the fuzz harness -----------------------------------------------------------------------------


def fuzz(examples: int):
    """Seeded hypothesis settings: ``examples`` by default (sized for CI on two loaded
    cores), ``TENSIG_FUZZ_EXAMPLES``/``TENSIG_FUZZ_SEED`` to search further."""
    def wrap(f):
        n = int(EXAMPLES) if EXAMPLES else examples
        f = settings(max_examples=n, derandomize=SEED is None, database=None, deadline=None,
                     suppress_health_check=list(HealthCheck))(f)
        return seed(int(SEED))(f) if SEED is not None else f
    return wrap


def guard(what: str, seconds: int = GUARD_S):
    """Fail a call that runs over ``seconds`` (a hang, or work no bound stops)."""
    return alarm(seconds, f"{what} ran for more than {seconds} s")


def outcome(fn, *args, **kw):
    """``fn``'s result or the expected error it raised; anything else propagates."""
    try:
        return fn(*args, **kw)
    except EXPECTED as e:
        return e


def _problem(rnd):
    """A coherent random problem (tests/test_attacks_parser.py's generator) with concrete
    sizes only, its operand shapes and memory-order sizes; ``None`` when it is too big."""
    import test_attacks_parser as tap

    symbolic, tap.SYMBOLIC = tap.SYMBOLIC, [1, 2, 3]
    try:
        p = tap.Problem(rnd)
    finally:
        tap.SYMBOLIC = symbolic
    shapes = [s if isinstance(s, Shape) else Shape(output=s) for s in p.operands]
    dims = [tuple(int(d) for d in s.dims) for s in shapes]
    if any(np.prod(d) > 400 for d in dims):
        return None
    return p, shapes, dims


def _rows(arrays, shapes):
    return [ts.rows(a, batch=len(s.batch), input=len(s.input)) for a, s in zip(arrays, shapes,
                                                                              strict=True)]


def _plain(x):
    return np.asarray(x.array if isinstance(x, ts.RowArray) else x)


OPS = ["einsum", "einsum1", "outer_sum", "tropical", "einmax1", "concat"]


# -- eager operators against the loop interpreter -------------------------------------------------


@fuzz(25)
@given(st.randoms(use_true_random=False), st.sampled_from(OPS),
       st.sampled_from([np.float64, np.int64, np.float32]))
def test_fuzz_eager_operators_against_the_reference(rnd, op, dtype):
    """Random multichar specs (row variables, affine and padded axes, strides, fixed indices,
    concatenations) on coherent shapes: ``infer`` and the eager operator agree on success,
    and the value is the loop interpreter's."""
    from reference import reference

    drawn = _problem(rnd)
    if drawn is None:
        return
    p, shapes, dims = drawn
    arrays = [np.random.default_rng(rnd.randrange(99)).integers(-3, 4, d).astype(dtype)
              for d in dims]
    note(f"ts.{op}({p.text!r}, shapes={[str(s) for s in shapes]}, **{p.kw!r})")
    with guard(f"infer {p.text!r}"):
        inferred = outcome(ts.infer, p.text, *shapes, op=op, **p.kw)
    if not isinstance(inferred, Exception):
        try:
            size = np.prod([int(d) for d in inferred.shape.dims])
        except InconclusiveError:
            return
        if size > 2000:
            return
    with guard(f"{op} {p.text!r}"):
        got = outcome(getattr(ts, op), p.text, *_rows(arrays, shapes), **p.kw)
    assert isinstance(got, Exception) == isinstance(inferred, Exception), (inferred, got)
    if isinstance(got, Exception):
        return
    want, _ = reference(p.text, arrays, shapes, op=op, params=p.kw.get("params"),
                        use_padding=p.kw.get("use_padding"), sizes=p.kw.get("sizes"))
    got = _plain(got).astype(np.float64)
    if np.issubdtype(dtype, np.integer):  # the reference's neutral of max is -inf
        got[_plain(outcome(getattr(ts, op), p.text, *_rows(arrays, shapes), **p.kw))
            == np.iinfo(dtype).min] = -np.inf
    tol = tolerance(dtype)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# -- mixed dtypes, empty axes and 0-d operands against numpy.einsum -----------------------------

DTYPES = [np.float64, np.float32, np.float16, np.int8, np.int64, np.uint8, np.bool_,
          np.complex64]


@fuzz(150)
@given(st.randoms(use_true_random=False))
def test_fuzz_einsum_dtypes_and_empty_axes_as_numpy(rnd):
    spec, subscripts, arrays = random_einsum(rnd, DTYPES, least=2)
    note(f"ts.einsum({spec!r}, {[(a.shape, a.dtype.name) for a in arrays]})")
    want = np.einsum(subscripts, *arrays)
    with guard(f"einsum {spec!r}"):
        got = np.asarray(ts.einsum(spec, *arrays))
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = tolerance(want.dtype)
    np.testing.assert_allclose(got.astype(np.complex128), want.astype(np.complex128),
                               rtol=tol, atol=tol)


# -- the graph layer against the eager functions --------------------------------------------------


@fuzz(40)
@given(st.randoms(use_true_random=False), st.sampled_from(OPS))
def test_fuzz_graph_operations_as_eager(rnd, op):
    """``G.<op>`` on leaves of random rows: the eager function's value, or (where the eager
    function refuses) an error too.  The graph may refuse what eager runs, with an error:
    keyword options and diagonals at fixed indices are not written for it."""
    drawn = _problem(rnd)
    if drawn is None or drawn[0].kw:
        return
    p, shapes, dims = drawn
    arrays = [np.random.default_rng(rnd.randrange(99)).integers(-3, 4, d).astype(np.float64)
              for d in dims]
    note(f"G.{op}({p.text!r}, shapes={[str(s) for s in shapes]})")
    with guard(f"{op} {p.text!r}"):
        eager = outcome(getattr(ts, op), p.text, *_rows(arrays, shapes))
    if not isinstance(eager, Exception) and _plain(eager).size > 2000:
        return
    with guard(f"G.{op} {p.text!r}"), G.new_graph():
        try:
            leaves = [G.leaf(f"x{i}", a, batch=len(s.batch), input=len(s.input))
                      for i, (a, s) in enumerate(zip(arrays, shapes, strict=True))]
            got = np.asarray(G.Model(getattr(G, op)(p.text, *leaves)).run())
        except (*EXPECTED, NotImplementedError) as e:
            got = e
    if isinstance(eager, Exception):
        assert isinstance(got, Exception), got
    elif not isinstance(got, Exception):
        np.testing.assert_array_equal(got, _plain(eager))


# -- annotation text, shape strings, signatures and @shaped -------------------------------------

TOKENS = ["B", "T", "d", "n_embd", "*b", "*rows", "...", "..v..", "_", "_x", "#3", "#B", "3", "0",
          "T+1", "(T+1)//2", "2*h", "h*w", "T-1", "n=4", "{n}", "|", "->", ",", ":", "int",
          "float32", "**", "(", ")", "=", "^", "<+", "//", "%", "-", "9" * 30, "α", "é", "²",
          "..", ";", "=>", "*", "#", "T**2", "0*T", "-T", "{", "}", "'", "\\", "\x00", "T//0",
          "T%0", "1/2", "2**64", "T**99"]


def _text(rnd) -> str:
    return "".join(rnd.choice(TOKENS) + rnd.choice(["", " ", ","])
                   for _ in range(rnd.randint(0, 7)))


@fuzz(300)
@given(st.randoms(use_true_random=False))
def test_fuzz_annotation_and_signature_text(rnd):
    """Random annotation text: parsed, refused with a tensig error, never another exception
    (nor a Python SyntaxWarning escaping from the deferred-size check)."""
    a, b = _text(rnd), _text(rnd)
    note(f"{a!r} / {b!r}")
    with guard(f"the texts {a!r} {b!r}"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome(parse_annotation, a)
        outcome(lambda: ts.Float[np.ndarray, a])
        outcome(ts.Shape.parse, a)
        outcome(ts.Dim.parse, a)
        outcome(Signature.parse, f"{a} => {b}")
        outcome(Signature.parse, f"{a}; {b}")
    assert not [w for w in caught if issubclass(w.category, SyntaxWarning)]


@fuzz(120)
@given(st.randoms(use_true_random=False))
def test_fuzz_shaped_calls(rnd):
    """``@shaped`` with random annotations, called on arrays of random shapes and dtypes: the
    call returns or raises a tensig error (a ``SignatureError`` is a ``ShapeError``)."""
    a, b = _text(rnd), _text(rnd)
    note(f"x: {a!r}, y: {b!r}")

    def shape():
        return tuple(rnd.choice([0, 1, 2, 3]) for _ in range(rnd.randint(0, 4)))

    dt = rnd.choice([np.float32, np.float16, np.int8, np.bool_, np.float64])
    with guard(f"@shaped {a!r} {b!r}"):
        try:
            @ts.shaped
            def f(x: ts.Float[np.ndarray, a], y: ts.Shaped[np.ndarray, b]
                  ) -> ts.Float[np.ndarray, a]:
                return x
        except EXPECTED:
            return
        for _ in range(3):
            outcome(f, np.zeros(shape(), dt), np.zeros(shape(), dt))


# -- rank primitives, reranked and lifted -------------------------------------------------------

RANK_DTYPES = [np.float64, np.float32, np.int8, np.int64, np.bool_, np.uint8]


def _array(rnd):
    shape = tuple(rnd.choice([0, 1, 2, 3]) for _ in range(rnd.randint(0, 3)))
    gen = np.random.default_rng(rnd.randrange(99))
    return gen.integers(-3, 4, shape).astype(rnd.choice(RANK_DTYPES))


def _small(rnd):
    return rnd.choice([0, 1, 2, -1, -3, 5, True, 1.5, (2, 3), (), (0,), (3, 0), [1, 0],
                       np.int64(2), np.array(2), np.array([2, 3])])


def _named(name: str, e: Exception) -> bool:
    """A deliberate error of a primitive: its message names it (``iota: a shape has no
    negative sizes``); a raw library error does not."""
    return str(e).startswith(f"{name}:")


@fuzz(200)
@given(st.randoms(use_true_random=False))
def test_fuzz_rank_primitives(rnd):
    """Every primitive on random arguments, at random cell ranks: a value or a named error.
    Folds take lifted functions (a plain function's own errors are its own)."""
    name = rnd.choice(rank._primitives.__all__)
    f = getattr(rank, name)
    if name in ("fold", "fold_right", "reduce", "scan"):
        args = [rnd.choice([rank.lift(np.add), rank.lift(np.maximum)]),
                *([] if name == "reduce" else [_array(rnd)]), _array(rnd)]
    else:
        args = [rnd.choice([_array, _small])(rnd) for _ in range(rnd.randint(1, 3))]
    ranks = [rnd.choice([0, 1, 2, -1, -2, None, 5]) for _ in range(rnd.randint(1, 3))]
    reranked = rnd.random() < 0.4
    note(f"{name} ranks={ranks if reranked else None} args={args!r}")
    with guard(name):
        try:
            (rank.rerank(f, *ranks) if reranked else f)(*args)
        except EXPECTED:
            pass
        except (ValueError, IndexError) as e:
            assert _named(name, e), f"{type(e).__name__}: {e}"


@fuzz(100)
@given(st.randoms(use_true_random=False))
def test_fuzz_lift_at_random_ranks(rnd):
    n = rnd.randint(1, 3)
    ranks = [rnd.choice([0, 1, 2, -1, -2, None, 4]) for _ in range(n)]
    fn = rnd.choice([lambda *a: sum(np.sum(x) for x in a), lambda *a: a[0]])
    args = [_array(rnd) for _ in range(n)]
    vectorized, boxed = rnd.random() < 0.2, rnd.random() < 0.2
    note(f"lift(ranks={ranks}, vectorized={vectorized}, boxed={boxed})"
         f"({[(a.shape, a.dtype.name) for a in args]})")
    with guard("lift"):
        outcome(rank.lift(fn, ranks=ranks, vectorized=vectorized, boxed=boxed), *args)


# -- bounded work ----------------------------------------------------------------------------------


@fuzz(40)
@given(st.randoms(use_true_random=False))
def test_fuzz_many_axes_and_huge_sizes_fail_or_finish_fast(rnd):
    """Specs with many axes, long row variables and sizes up to 2**62: inference answers (it
    never allocates) or refuses, within the guard."""
    n = rnd.randint(1, 40)
    names = [f"a{i}" for i in range(n)]
    axes = []
    for i, nm in enumerate(names):
        kind = rnd.choice(["label", "label", "affine", "concat", "fixed"])
        if kind == "affine" and i + 1 < n:
            axes.append(f"{rnd.choice([1, 2, 7])}*{nm}<+{names[i + 1]}")
        elif kind == "concat" and i + 1 < n:
            axes.append(f"{nm}^{names[i + 1]}")
        elif kind == "fixed":
            axes.append(str(rnd.randint(0, 3)))
        else:
            axes.append(nm)
    if rnd.random() < 0.5:
        axes.insert(rnd.randrange(len(axes) + 1), "..r..")
    spec = ", ".join(axes) + "; " + ", ".join(rnd.sample(names, min(n, 3))) + " => " + \
        ", ".join(rnd.sample(names, rnd.randint(0, n)))
    size = rnd.choice([1, 3, 2**31, 2**62])
    shapes = [tuple(rnd.choice([size, 1, 5]) for _ in range(len(axes) + rnd.randint(0, 30))),
              tuple(size for _ in range(min(n, 3)))]
    note(f"infer({spec!r}, {shapes})")
    with guard(f"infer {spec!r}"):
        outcome(ts.infer, spec, *shapes, sizes={names[-1]: size})


def test_the_harness_reports_a_runaway_call():
    with pytest.raises(AssertionError, match="ran for more than 1 s"), guard("sleep", 1):
        time.sleep(3)


# -- graph gradients of concatenations ----------------------------------------------------------

_SIZE = {"a": 2, "b": 3, "c": 1}
_AXIS = st.one_of(st.sampled_from("abc_"), st.lists(st.sampled_from("abc1"), min_size=2,
                                                    max_size=2, unique=True).map("^".join))


@fuzz(40)
@given(ops=st.lists(st.lists(_AXIS, min_size=1, max_size=2), min_size=1, max_size=3),
       result=st.lists(_AXIS.filter(lambda a: a != "_"), min_size=1, max_size=2))
def test_fuzz_graph_concat_gradients_against_unit_changes(ops, result):
    """Random concatenations (components of labels and skipped cells, fixed components the
    result sits out, several phases): the eager value is the loop interpreter's, and the
    graph's gradients are the eager sum's unit changes.  Before the gradients ran the
    operation's own phases, many got a wrong one (the simplest found: ``a; a^b => b``)."""
    from reference import reference

    spec = "; ".join(", ".join(o) for o in ops) + " => " + ", ".join(result)
    shapes = [tuple(2 if a == "_" else sum(_SIZE.get(p) or int(p) for p in a.split("^"))
                    for a in o) for o in ops]
    xs = [np.arange(2.0, 2 + np.prod(s)).reshape(s) for s in shapes]
    note(f"G.concat({spec!r}, shapes={shapes})")
    with guard(f"reference {spec!r}"):
        want = outcome(reference, spec, xs, [Shape(output=s) for s in shapes], op="concat")
    if isinstance(want, Exception) or "^" not in spec:
        return
    np.testing.assert_allclose(np.asarray(ts.concat(spec, *xs)), want[0])
    got, want = _graph_gradients("concat", spec, xs)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w)
