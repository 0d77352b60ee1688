"""Reshape in the notation (issue 15 section 4): a merged axis ``(h, e)`` splits an operand's
axis and merges a result's, row-major as ``reshape``.  Values against NumPy's reshape and the
loop oracle (``tests/reference.py``, which reads only sizes), on every backend; graph
gradients against torch.autograd and finite differences; the lowering is a view."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tensig as ts
from arrays import oracle_case, to_numpy
from tensig import Shape, ShapeError, SpecSyntaxError
from tensig.core.inference import infer
from tensig.core.notation import Label, Merge, parse
from tensig.core.projections import MergeIndex
from tensig.model import graph as G
from tolerance import assert_equal_up_to_rounding

# -- the syntax ------------------------------------------------------------------------------


@pytest.mark.parametrize("text, canonical", [
    ("b, t|(h, e) => b, t|h, e", "bt|(he) => bt|he"),
    ("bt|(he)=>bt|he", "bt|(he) => bt|he"),
    ("(head, emb) => emb, head", "(head, emb) => emb, head"),
    ("(ab)c => a(bc)", "(ab)c => a(bc)"),
    ("(a, b, c) => c, b, a", "(abc) => cba"),
    ("b|(h, 4) => b|h", "b|(h4) => b|h"),
    ("(h2)(w2) => hw", "(h2)(w2) => hw"),
    ("b, (h, 12) => b, h", "b, (h, 12) => b, h"),
])
def test_a_merged_axis_parses_and_prints_back(text, canonical):
    spec = parse(text)
    assert str(spec) == canonical
    assert parse(str(spec)) == spec


def test_a_merged_axis_is_one_axis_of_its_parts():
    spec = parse("b, (h, e) => b, h, e")
    assert spec.operands[0].output.right == (Label("b"), Merge(("h", "e")))
    assert spec.labels == {"b", "h", "e"}


@pytest.mark.parametrize("text, reason", [
    ("(h, e => h", "unterminated '('"),
    ("h) => h", "')' without a '('"),
    ("() => a", "an empty merged axis"),
    ("((h, e), c) => h", "merged axes do not nest"),
    ("(0, h) => h", "a merged axis has no factor of size 0"),
    ("(h, 2x) => h", "an identifier cannot start with a digit"),
    ("(h, ...) => h", "a row variable cannot be merged: its number of axes is not known"),
    ("b, (h, ..r..) => b, h", "a row variable cannot be merged"),
    ("(h, 2*e) => h", "a merged axis groups labels and sizes, not '*'"),
    ("(h, 123456789012345678901234) => h", "an integer literal is at most 2"),
    ("x(h, e) => h", "nothing can be attached to it"),
    ("2*(h, e) => h", "nothing can be attached to it"),
])
def test_bad_merged_axes_are_syntax_errors(text, reason):
    with pytest.raises(SpecSyntaxError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        parse(text)


# -- inference -------------------------------------------------------------------------------


def test_one_known_factor_gives_the_other():
    r = infer("b, t|(h, e) => b, t|h, e", "2,3|12", sizes={"h": 4})
    assert r.shape == Shape.parse("2,3|4,3") and r.dims["e"] == 3
    # the known factor comes from another operand
    r = infer("(h, e); h => h, e", (12,), (3,))
    assert r.shape == Shape(output=(3, 4))
    # a merge in the result needs no help
    assert infer("b|h, e => b|(h, e)", "2|3,4").shape == Shape.parse("2|12")


def test_symbolic_sizes_split_with_a_condition():
    from tensig.core.dims import dim

    r = infer("(h, e) => h, e", [dim("D")], sizes={"h": 4})
    assert r.dims["e"] == dim("D // 4")
    assert [str(c) for c in r.conditions] == ["D % 4 == 0"]


def test_a_product_that_does_not_divide_is_a_shape_error_naming_the_axis():
    with pytest.raises(ShapeError) as e:
        infer("b|(h, e) => b|h, e", "2|10", sizes={"h": 3})
    msg = str(e.value)
    assert "'(h, e)' has 10 elements" in msg and "(h=3) does not divide" in msg
    assert "'e'" in msg and "^^^^^^" in msg


def test_factors_that_disagree_with_the_size_are_a_shape_error():
    with pytest.raises(ShapeError, match=r"'\(h, e\)' has 12 elements, but its factors give "
                                         r"3 \* 5 = 15"):
        infer("(h, e); h; e => h", (12,), (3,), (5,))


def test_two_unknown_factors_say_only_the_product_is_known():
    with pytest.raises(ShapeError, match=r"cannot infer the size of 'h', 'e' in the result: "
                                         r"'\(h, e\)' only gives the product of its factors "
                                         r"\(12\)"):
        infer("b|(h, e) => b|h, e", "2|12")
    with pytest.raises(ShapeError, match="only gives the product"):
        infer("(h, e); (h, e), o => o", (12,), (12, 5))


# -- integer factors: einops' anonymous axes (h 4) --------------------------------------------


def test_an_integer_factor_sizes_the_other_factor():
    r = infer("b|(h, 4) => b|h", "2|12")
    assert r.shape == Shape.parse("2|3") and r.dims == {"b": 2, "h": 3}
    assert infer("h => (h, 2)", (3,)).shape == Shape(output=(6,))
    assert infer("(2, h, 3) => h", (30,)).dims["h"] == 5
    ix = r.layout[0][1].index
    assert isinstance(ix, MergeIndex) and [(it.name, it.size) for it in ix.parts] == \
        [("h", 3), (None, 4)]


def test_an_integer_factor_of_a_symbolic_size_gives_a_condition():
    from tensig.core.dims import dim

    r = infer("(h, 4) => h", [dim("D")])
    assert r.dims["h"] == dim("D // 4") and [str(c) for c in r.conditions] == ["D % 4 == 0"]


def test_an_integer_factor_that_does_not_divide_is_a_shape_error():
    with pytest.raises(ShapeError) as e:
        infer("b|(h, 5) => b|h", "2|12")
    msg = str(e.value)
    assert "'(h, 5)' has 12 elements, which the product of its other factors (5) does not " \
           "divide: no size of 'h' fits" in msg and "^^^^^^" in msg
    with pytest.raises(ShapeError, match=r"'\(h, 4\)' has 12 elements, but its factors give "
                                         r"4 \* 4 = 16 \(h=4, 4\)"):
        infer("(h, 4); h => h", (12,), (4,))


def test_a_result_fixed_index_equal_to_a_factor_is_refused_with_the_reason():
    """``b|(h, 4) => b|h, 4`` reads as keeping the factor; a result's 4 is a placement."""
    with pytest.raises(ShapeError) as e:
        infer("b, (h, 4) => b, h, 4", (2, 12))
    msg = str(e.value)
    assert "'4' in the result is a fixed index (a placement into cell 4), not the factor 4 " \
           "of '(h, 4)'" in msg and "sizes={'e': 4}" in msg
    assert msg.splitlines()[2].index("^") == len("    b, (h, 4) => b, h, ")
    # the way to keep it: name the factor
    assert infer("b, (h, e) => b, h, e", (2, 12), sizes={"e": 4}).shape == Shape(output=(2, 3, 4))
    # and the other way round: an operand's fixed index is a slice, not an axis to merge
    with pytest.raises(ShapeError, match=r"'2' in an operand is a fixed index \(a slice at cell "
                                         r"2\), not the factor 2 of '\(h, 2\)'.*\n.*\n.*\n"
                                         r"hint: name the axis to merge it: h, e => \(h, e\)"):
        infer("b, h, 2 => b, (h, 2)", (2, 3, 4))
    # a fixed index beside an unrelated factor on the same side is fine
    assert infer("2, (h, 2) => h", (3, 4)).shape == Shape(output=(2,))


@pytest.mark.parametrize("pattern, np_fn", [
    ("b, (h, 4) => b, h", lambda x: x.reshape(2, 3, 4).sum(-1)),
    ("b, (2, h) => b, h", lambda x: x.reshape(2, 2, 6).sum(1)),
    ("b, (3, h, 2) => b, h", lambda x: x.reshape(2, 3, 2, 2).sum((1, 3))),
    ("b, (h, 1) => b, h", lambda x: x),
    ("b, h => b, (h, 3)", lambda x: np.repeat(x, 3, axis=1)),
    ("b, h => (2, b), h", lambda x: np.tile(x, (2, 1))),
])
def test_integer_factors_are_numpy_reshape_sums_and_repeats(pattern, np_fn):
    x = np.arange(24.0).reshape(2, 12)
    np.testing.assert_array_equal(ts.einsum1(pattern, x), np_fn(x))


@pytest.mark.parametrize("ours, op, theirs, reduction, shape", [
    ("b, (h, 2), (w, 2) => b, h, w", "einmax1", "b (h 2) (w 2) -> b h w", "max", (2, 4, 6)),
    ("b, (h, 4) => b, h", "einsum1", "b (h 4) -> b h", "sum", (3, 8)),
    ("(c, 3), h => h, c", "einsum1", "(c 3) h -> h c", "sum", (6, 5)),
    ("h, w => (h, 2), (w, 3)", "einsum1", "h w -> (h 2) (w 3)", None, (2, 3)),
])
def test_integer_factors_agree_with_einops_reduce_and_repeat(ours, op, theirs, reduction,
                                                             shape):
    einops = pytest.importorskip("einops")
    x = np.arange(float(np.prod(shape))).reshape(shape)
    want = einops.repeat(x, theirs) if reduction is None else \
        einops.reduce(x, theirs, reduction)
    np.testing.assert_array_equal(getattr(ts, op)(ours, x), want)


@pytest.mark.parametrize("backend_name", ["numpy", "torch"])
def test_graph_integer_factor_pooling_gradient_against_torch(backend_name):
    """Sum and max pooling ``(h, 2)`` and nearest upsampling ``(h, 2)`` in the result,
    trained through: gradients against torch.autograd."""
    rng = np.random.default_rng(7)
    x0 = rng.standard_normal((2, 8))
    with G.new_graph(backend_name):
        x = G.param("x", output=[2, 8], input=[], init=lambda s, r: x0)
        pooled = G.einsum1("b, (h, 2) => b, h", x)
        up = G.einsum1("b, h => b, (h, 2)", pooled.tanh())
        top = G.einmax1("b, (h, 2) => b, h", x)           # max pooling
        assert pooled.shape == Shape(output=(2, 4)) and up.shape == Shape(output=(2, 8))
        G.grad_update(G.einsum1("... => |->0", up * x) + G.einsum1("... => |->0", top * top)
                      ).backward()
        gx = np.asarray(x.grad.numpy())
    xt = torch.tensor(x0, requires_grad=True)
    upt = torch.tanh(xt.reshape(2, 4, 2).sum(-1)).repeat_interleave(2, dim=1)
    topt = torch.nn.functional.max_pool1d(xt[:, None], 2)[:, 0]
    ((upt * xt).sum() + (topt * topt).sum()).backward()
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-4, atol=1e-5)


# -- einsum_path on merged axes ----------------------------------------------------------------


def test_einsum_path_plans_the_reshaped_operation():
    """The path is opt_einsum's for the split operands (what the einsum runs), and the
    report says which operands were reshaped."""
    opt_einsum = pytest.importorskip("opt_einsum")
    shapes = [(2, 12), (3, 4, 5), (5, 60)]
    path, report = ts.einsum_path("b, (h, e); h, e, o; o, (p, 2) => (b, p)", *shapes)
    want, _ = opt_einsum.contract_path("abc,bcd,def->ae", (2, 3, 4), (3, 4, 5), (5, 30, 2),
                                       shapes=True)
    assert path == [tuple(p) for p in want]
    assert report.splitlines()[0] == ("merged axes split: operand 0 (2, 12) -> (2, 3, 4); "
                                      "operand 2 (5, 60) -> (5, 30, 2); the result (2, 30) -> "
                                      "(60,)")
    assert "abc,bcd,def->ae" in report
    # a factor only the result has is a broadcast after the contraction: the same path
    assert ts.einsum_path("b, (h, e); h, e, o; o, (p, 2) => (b, p, 3)", *shapes)[0] == path
    # sizes= gives a factor no operand determines, as in einsum
    path, _ = ts.einsum_path("b, (h, e); b, (h, e); b, h => b, e", (2, 12), (2, 12), (2, 3))
    assert ts.einsum_path("b, (h, e); b, (h, e); b, e => b, h", (2, 12), (2, 12), (2, 4),
                          sizes={"h": 3})[0] == path


def test_einsum_path_refuses_what_is_not_one_contraction():
    with pytest.raises(ShapeError, match=r"einsum_path: operand 0's output axis 0 is an affine "
                                         r"axis \(a window or a stride\), so the operation is "
                                         r"not one contraction"):
        ts.einsum_path("i<+k; k; i => i", (5,), (3,), (3,))
    with pytest.raises(ShapeError, match="the result's output axis 1 is a fixed index"):
        ts.einsum_path("i; i; i => i, 0", (3,), (3,), (3,))


def test_projections_hold_the_factors_in_order():
    r = infer("(h, e) => e, h", (12,), sizes={"e": 3})
    ix = r.layout[0][0].index
    assert isinstance(ix, MergeIndex)
    assert [(it.name, it.size) for it in ix.parts] == [("h", 4), ("e", 3)]


# -- values on every backend against the loop oracle ----------------------------------------

CASES = [
    ("einsum1", "b, t, (h, e) => b, t, h, e", ["2,3,12"], {"sizes": {"h": 4}}),
    ("einsum1", "b, t, h, e => b, t, (h, e)", ["2,3,4,3"], {}),
    ("einsum1", "(h, e) => (e, h)", ["12"], {"sizes": {"h": 4}}),
    ("einsum1", "(a, b, c) => c, (b, a)", ["24"], {"sizes": {"a": 2, "b": 3}}),
    ("einsum1", "b|(h, e) => b|e", ["2|12"], {"sizes": {"e": 3}}),
    ("einsum1", "b|h, e => h->(b, e)", ["2|3,4"], {}),
    ("einsum1", "(i, i) => i", ["9"], {"sizes": {"i": 3}}),
    ("einsum1", "i => (i, i)", ["3"], {}),
    ("einsum1", "i => (i, j)", ["3"], {"sizes": {"j": 2}}),
    ("einsum", "(h, e); h => e", ["12", "4"], {}),
    ("einsum", "b, (h, e); (h, e), o => b, o", ["2,6", "6,5"], {"sizes": {"h": 2}}),
    ("einsum", "b, (h, e); e, h => b, (e, h)", ["2,6", "3,2"], {}),
    ("einmax1", "(h, e) => e", ["12"], {"sizes": {"h": 3}}),
    ("tropical", "(h, e); h => e", ["12", "4"], {}),
    ("outer_sum", "(h, e); e => h", ["6", "3"], {}),
    ("einsum", "o<+k, (h, e); k => o, (e, h)", ["5,6", "2"], {"sizes": {"h": 2}}),
    ("einsum", "2*o=+k, (h, e); k => (o, h), e", ["6,6", "3"], {"sizes": {"h": 3}}),
    ("concat", "(h, a); (h, b) => h, a^b", ["6", "4"], {"sizes": {"h": 2}}),
    ("einsum1", "b, (h, 4) => b, h", ["2,12"], {}),
    ("einsum1", "b, (h, 3, e) => b, e, h", ["2,12"], {"sizes": {"h": 2}}),
    ("einsum1", "h => (h, 2)", ["3"], {}),
    ("einsum1", "(i, 1) => i", ["5"], {}),
    ("einmax1", "(h, 2), (w, 2) => h, w", ["6,4"], {}),
    ("einsum", "(h, 2); h => h", ["6", "3"], {}),
    ("tropical", "b, (2, h); h => b, h", ["2,8", "4"], {}),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_merged_axes_match_the_loop_oracle(case, backend):
    op, spec, _, kw = case
    args, expected, expected_shape = oracle_case(case, backend)
    fn = {"einsum": ts.einsum, "einsum1": ts.einsum1, "einmax1": ts.einmax1,
          "tropical": ts.tropical, "outer_sum": ts.outer_sum, "concat": ts.concat}[op]
    out = fn(spec, *args, **kw)
    if isinstance(out, ts.RowArray):
        assert out.rows == expected_shape
    got = to_numpy(backend, out)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)  # small integers: exact on every backend


def test_split_and_merge_are_numpy_reshapes_and_views():
    x = np.arange(2 * 3 * 12.0).reshape(2, 3, 12)
    y = ts.einsum1("b, t, (h, e) => b, t, h, e", x, sizes={"h": 4})
    np.testing.assert_array_equal(y, x.reshape(2, 3, 4, 3))
    assert np.shares_memory(y, x)  # a view, not a gather
    z = ts.einsum1("b, t, h, e => b, t, (h, e)", y)
    np.testing.assert_array_equal(z, x)
    assert np.shares_memory(z, x)
    t = torch.arange(24.0).reshape(2, 12)
    u = ts.einsum1("b, (h, e) => b, h, e", t, sizes={"e": 4})
    assert torch.equal(u, t.reshape(2, 3, 4)) and u.data_ptr() == t.data_ptr()


@pytest.mark.parametrize("ours, theirs, shape, sizes", [
    ("b, t, (h, e) => b, t, h, e", "b t (h e) -> b t h e", (2, 3, 12), {"h": 4}),
    ("b, t, h, e => b, t, (h, e)", "b t h e -> b t (h e)", (2, 3, 4, 3), {}),
    ("b, (h, w), c => b, h, w, c", "b (h w) c -> b h w c", (2, 6, 4), {"w": 3}),
    ("(a, b, c) => c, (b, a)", "(a b c) -> c (b a)", (24,), {"a": 2, "b": 3}),
    ("b, h, w, c => (b, h), (w, c)", "b h w c -> (b h) (w c)", (2, 3, 4, 5), {}),
    ("b, (h, 1) => b, h", "b (h 1) -> b h", (2, 3), {}),       # rearrange's one integer factor
    ("b, h, w => b, (h, 1, w)", "b h w -> b (h 1 w)", (2, 3, 4), {}),
])
def test_merged_axes_agree_with_einops_rearrange(ours, theirs, shape, sizes):
    einops = pytest.importorskip("einops")
    x = np.arange(float(np.prod(shape))).reshape(shape)
    np.testing.assert_array_equal(ts.einsum1(ours, x, sizes=sizes or None),
                                  einops.rearrange(x, theirs, **sizes))


def test_merged_heads_match_einops_style_attention_scores():
    """``b, t, (h, e)`` queries and keys: per-head scores as NumPy computes them."""
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 5, 12)), rng.standard_normal((2, 7, 12))
    got = ts.einsum("b, t, (h, e); b, s, (h, e) => b, h, t, s", q, k, sizes={"h": 3})
    q4, k4 = q.reshape(2, 5, 3, 4), k.reshape(2, 7, 3, 4)
    want = np.einsum("bthe,bshe->bhts", q4, k4)
    assert_equal_up_to_rounding(got, want, dtype=np.float64, length=4,
                                magnitude=np.einsum("bthe,bshe->bhts", abs(q4), abs(k4)))


# -- graph einsums and their gradients ------------------------------------------------------


@pytest.mark.parametrize("backend_name", ["numpy", "torch"])
def test_graph_merged_axes_and_gradients_against_torch(backend_name):
    rng = np.random.default_rng(1)
    x0, w0 = rng.standard_normal((2, 12)), rng.standard_normal((4, 3))
    with G.new_graph(backend_name):
        x = G.param("x", output=[2, 12], input=[], init=lambda s, r: x0)
        w = G.param("w", output=[4, 3], input=[], init=lambda s, r: w0)
        y = G.einsum("b, (h, e); h, e => b, h", x, w)     # h, e sized by w
        m = G.tropical("b, (h, e); h, e => b, e", x, w)   # a max over a factor
        z = G.einsum1("b, h => (b, h)", y)                 # a merge in the result
        assert z.shape == Shape(output=(8,))
        loss = G.einsum1("... => |->0", z * z) + G.einsum1("... => |->0", m)
        G.grad_update(loss).backward()
        gx, gw = np.asarray(x.grad.numpy()), np.asarray(w.grad.numpy())
    xt = torch.tensor(x0, requires_grad=True)
    wt = torch.tensor(w0, requires_grad=True)
    yt = (xt.reshape(2, 4, 3) * wt).sum(-1)
    mt = (xt.reshape(2, 4, 3) + wt).amax(1)
    (yt.reshape(-1).pow(2).sum() + mt.sum()).backward()
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gw, wt.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_graph_split_gradient_against_finite_differences():
    rng = np.random.default_rng(2)
    x0, w0 = rng.standard_normal((3, 6)), rng.standard_normal((2, 3))
    with G.new_graph():
        x = G.param("x", output=[3, 6], input=[], init=lambda s, r: x0)
        w = G.constant(w0)
        y = G.einsum("t, (h, e); h, e => t, e, h", x, w).tanh()
        G.grad_update(G.einsum1("... => |->0", y * y)).backward()
        got = np.asarray(x.grad.numpy(), np.float64)

    def f(a):
        return np.tanh(np.einsum("the,he->teh", a.reshape(3, 2, 3), w0)) ** 2

    eps = 1e-3
    want = np.zeros_like(x0)
    for idx in np.ndindex(x0.shape):
        plus, minus = x0.copy(), x0.copy()
        plus[idx] += eps
        minus[idx] -= eps
        want[idx] = (f(plus).sum() - f(minus).sum()) / (2 * eps)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


def test_graph_infers_a_parameter_through_a_merged_axis():
    """Merging heads for an output projection: the parameter's input row is the product."""
    rng = np.random.default_rng(3)
    with G.new_graph():
        o = G.leaf("o", rng.standard_normal((2, 5, 3, 4)).astype(np.float32), batch=2)
        merged = G.einsum1("b, t|h, e => b, t|(h, e)", o)
        wo = G.param("wo", output=[6], seed=0)
        y = wo @ merged
        assert merged.shape == Shape.parse("2,5|12") and wo.shape == Shape.parse("12->6")
        assert y.shape == Shape.parse("2,5|6")


def test_graph_factor_from_a_captured_label():
    """A factor nothing around it sizes is given on the graph's solver (OCANNL's
    ``capture_dims`` + ``set_dim``); a size that does not divide is refused at once."""
    with G.new_graph():
        x = G.leaf("x", np.arange(24.0, dtype=np.float32).reshape(2, 12), batch=1)
        y = G.einsum1("b|(h, e) => b|h, e", x)
        shapes = G.current_graph().shapes
        shapes.set_dim(shapes.label(y.node, "h"), 4)
        assert y.shape == Shape.parse("2|4,3")
        np.testing.assert_array_equal(G.Model(y).run(), np.arange(24.0).reshape(2, 4, 3))
        z = G.einsum1("b|(h, e) => b|h, e", x)
        with pytest.raises(ShapeError, match=r"\(h=5\) does not divide"):
            shapes.set_dim(shapes.label(z.node, "h"), 5)


@pytest.mark.parametrize("backend_name", ["numpy", "torch"])
def test_graph_attention_heads_split_and_merged_in_the_notation_against_torch(backend_name):
    """Issue 15's purpose for reshape: heads come from a ``b, t | d`` projection split as
    ``(h, e)`` (the number of heads set on the captured label), go through causal attention
    and merge back, with no two-axis ``wq @ a`` parameter; value and gradients against
    torch's ``scaled_dot_product_attention`` on the same reshapes, in float64."""
    from arrays import close32
    from arrays import host as A
    from tensig.model import blocks as B

    rng = np.random.default_rng(5)
    xs, r = (rng.standard_normal(s).astype(np.float32) for s in ((2, 5, 8), (2, 5, 6)))
    w0, o0 = (rng.standard_normal(s).astype(np.float32) * 0.4 for s in ((8, 8), (6, 8)))
    with G.new_graph(backend_name):
        x = G.leaf("x", xs, axes="b, t | d")
        w = G.param("w", output=[8], init=lambda s, _: w0.copy())
        q, d = G.einsum1("b, t|(h, e) => b, t|h, e", w @ x, capture=["h"])
        d["h"].set_dim(2)
        a = B.multi_head_attention(q, q, q, mask="causal")
        o = G.param("o", output=[6], init=lambda s, _: o0.copy())
        y = o @ G.einsum1("b, t|h, e => b, t|(h, e)", a)
        loss = G.einsum1(B.ALL, y * G.leaf("R", r, axes="b, t | _"))
        G.grad_update(loss).backward()
        assert str(q.shape) == "b=2,t=5|2,4" and str(y.shape) == "b=2,t=5|6"
        got = [A(t) for t in (y.numpy(), w.grad.numpy(), o.grad.numpy())]
    xt = torch.tensor(xs, dtype=torch.float64)
    wt, ot = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (w0, o0))
    heads = (xt @ wt.T).reshape(2, 5, 2, 4).transpose(1, 2)
    att = torch.nn.functional.scaled_dot_product_attention(heads, heads, heads, is_causal=True)
    yt = att.transpose(1, 2).reshape(2, 5, 8) @ ot.T
    (yt * torch.tensor(r, dtype=torch.float64)).sum().backward()
    for ours, ref in zip(got, (yt, wt.grad, ot.grad), strict=True):
        close32(ours, ref.detach(), 10)


def test_graph_factor_nothing_sizes_says_so():
    with G.new_graph():
        x = G.leaf("x", np.zeros((2, 12), np.float32), batch=1)
        y = G.einmax1("b|(h, e) => b|e", x)
        with pytest.raises(ShapeError, match=r"'e'.*a factor of a merged axis, which gives "
                                             r"only the product"):
            _ = y.shape


def test_graph_factor_that_does_not_divide_is_a_shape_error():
    with G.new_graph():
        x = G.leaf("x", np.zeros((2, 10), np.float32), batch=1)
        w = G.constant(np.zeros((3, 4)))
        with pytest.raises(ShapeError, match="merged axis"):
            _ = G.einsum("b|(h, e); h, e => b|h", x, w).shape


# -- affine axes in the result (issue 16: i => 2*i, OCANNL's interleave) ---------------------

RESULT_CASES = [
    ("einsum1", "i => 2*i", ["3"], {}),
    ("einsum1", "i => 2*i+1", ["3"], {}),
    ("einsum1", "r, i => r, 3*i+2", ["2,3"], {}),
    ("einsum1", "b|i => b|s*i+1", ["2|3"], {"params": {"s": 2}}),
    ("einsum", "o; k => o<+k", ["4", "3"], {}),             # a full (transposed) convolution
    ("einsum", "o; k => 2*o=+k", ["4", "3"], {}),
    ("einsum", "o; k => 2*o<+2*k", ["3", "2"], {}),
    ("einsum1", "c, i => (i, c)", ["2,3"], {}),               # interleave by a merge
    ("einsum1", "(i, c) => c, i", ["6"], {"sizes": {"c": 2}}),  # and back
    ("einsum", "h, i; (h, e) => h, 2*i+1, e", ["2,3", "4"], {}),  # beside a merge
]


@pytest.mark.parametrize("case", RESULT_CASES, ids=[f"{c[0]}:{c[1]}" for c in RESULT_CASES])
def test_affine_result_axes_match_the_loop_oracle(case, backend):
    test_merged_axes_match_the_loop_oracle(case, backend)


def test_interleave_as_ocannl_does():
    """OCANNL test/einsum/test_interleave.ml: interleave [1; 2; 3] [4; 5; 6] is
    [1; 4; 2; 5; 3; 6], written ``i => 2*i`` plus ``i => 2*i + 1`` (tensor/operation.ml)."""
    a, b = np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])
    want = [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    np.testing.assert_array_equal(ts.einsum1("i => 2*i", a) + ts.einsum1("i => 2*i+1", b), want)
    # the same by a merge: stacked, then (i, c) row-major
    np.testing.assert_array_equal(ts.einsum1("c, i => (i, c)", np.stack([a, b])), want)


def test_deinterleave_roundtrip_as_ocannl_does():
    """OCANNL test/operations/rope_test.ml test 1: interleave (deinterleave_even x)
    (deinterleave_odd x) is x."""
    x = np.arange(1.0, 7.0)
    even, odd = ts.einsum1("2*i => i", x), ts.einsum1("2*i+1 => i", x)
    np.testing.assert_array_equal(even, [1, 3, 5])
    np.testing.assert_array_equal(ts.einsum1("i => 2*i", even) + ts.einsum1("i => 2*i+1", odd), x)


def test_a_result_offset_past_the_stride_is_refused():
    with pytest.raises(ShapeError, match=r"'i\+1' would write past its end: it has i cells, "
                                         r"and offset 1 is not below the stride 1"):
        infer("i => i+1", (3,))
    with pytest.raises(ShapeError, match="offset 3 is not below the stride 2"):
        infer("i => 2*i+3", (3,))


def test_a_window_beside_a_placement_in_the_result_is_refused():
    with pytest.raises(ShapeError, match="meets a fixed index or a concatenation"):
        ts.einsum1("i => 2*i, 0", np.ones(3))


def test_a_max_reduction_written_through_a_window_is_refused():
    with pytest.raises(ShapeError, match="einmax1 reduces by max, and a result written "
                                         "through a window"):
        ts.einmax1("i => 2*i", np.ones(3))


@pytest.mark.parametrize("backend_name", ["numpy", "torch"])
def test_graph_interleave_and_its_gradient_against_torch(backend_name):
    """RoPE's pairing in a graph: two halves interleaved, then used; the gradient of a write
    at 2*i (+1) is the read back (OCANNL's deinterleave)."""
    rng = np.random.default_rng(4)
    a0, b0, w0 = (rng.standard_normal(s) for s in ((2, 3), (2, 3), (6,)))
    with G.new_graph(backend_name):
        a = G.param("a", output=[2, 3], input=[], init=lambda s, r: a0)
        b = G.param("b", output=[2, 3], input=[], init=lambda s, r: b0)
        t = G.einsum1("r, i => r, 2*i", a) + G.einsum1("r, i => r, 2*i+1", b)
        assert t.shape == Shape(output=(2, 6))
        y = (t * G.constant(w0)).tanh()
        G.grad_update(G.einsum1("... => |->0", y * y)).backward()
        ga, gb = np.asarray(a.grad.numpy()), np.asarray(b.grad.numpy())
    at = torch.tensor(a0, requires_grad=True)
    bt = torch.tensor(b0, requires_grad=True)
    yt = torch.tanh(torch.stack([at, bt], -1).reshape(2, 6) * torch.tensor(w0))
    (yt * yt).sum().backward()
    np.testing.assert_allclose(ga, at.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gb, bt.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_graph_transposed_convolution_gradient_against_finite_differences():
    """``o; k => o<+k`` writes each input over a window of the result (a full convolution):
    forward against NumPy's convolve, the kernel's gradient against finite differences."""
    rng = np.random.default_rng(5)
    x0, k0, w0 = rng.standard_normal(4), rng.standard_normal(3), rng.standard_normal(6)
    with G.new_graph():
        x = G.constant(x0)
        k = G.param("k", output=[3], input=[], init=lambda s, r: k0)
        y = G.einsum("o; k => o<+k", x, k)
        np.testing.assert_allclose(G.Model(y).run(), np.convolve(x0, k0), rtol=1e-5,
                                   atol=1e-6)
        G.grad_update(G.einsum1("... => |->0", (y * G.constant(w0)).tanh())).backward()
        got = np.asarray(k.grad.numpy(), np.float64)

    def f(kk):
        return np.tanh(np.convolve(x0, kk) * w0)

    eps = 1e-3
    want = np.array([(f(k0 + eps * e).sum() - f(k0 - eps * e).sum()) / (2 * eps)
                     for e in np.eye(3)])
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("backend_name", ["numpy", "torch"])
def test_graph_window_beside_a_merged_axis_and_its_max_gate(backend_name):
    """A max over a window of an operand whose other axis is split: the gradient gate reads
    the operand through a reshape and a window, and writes its gradient through both."""
    rng = np.random.default_rng(6)
    x0, w0 = rng.standard_normal((5, 6)), rng.standard_normal((2, 2, 3))
    with G.new_graph(backend_name):
        x = G.param("x", output=[5, 6], input=[], init=lambda s, r: x0)
        w = G.param("w", output=[2, 2, 3], input=[], init=lambda s, r: w0)
        m = G.tropical("o<+k, (h, e); k, h, e => o, h, e", x, w)
        assert m.shape == Shape(output=(4, 2, 3))
        G.grad_update(G.einsum1("... => |->0", m * m)).backward()
        gx, gw = np.asarray(x.grad.numpy()), np.asarray(w.grad.numpy())
    xt = torch.tensor(x0, requires_grad=True)
    wt = torch.tensor(w0, requires_grad=True)
    mt = (xt.reshape(5, 2, 3).unfold(0, 2, 1) + wt.permute(1, 2, 0)).amax(-1)
    (mt * mt).sum().backward()
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gw, wt.grad.numpy(), rtol=1e-4, atol=1e-5)
