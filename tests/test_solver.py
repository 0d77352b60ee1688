"""The solver on its own: row unification (equidivisibility), cycles, and graph-wide inference."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensig as ts
from tensig import Shape, ShapeError
from tensig.core.inference import ShapeGraph
from tensig.core.solver import DimVar, Origin, RowNode, Solver, SRow


def dv(value=None, name=None):
    return DimVar(name, value)


def values(S, row):
    return tuple(v.root().value for v in S.resolve(row).axes())


def test_open_row_matches_a_closed_row():
    S = Solver()
    v = RowNode("v")
    a, b = dv(name="a"), dv(name="b")
    S.unify_rows(SRow((a,), v, (b,)), SRow((), None, (dv(2), dv(3), dv(4), dv(5))), Origin())
    assert a.root().value == 2 and b.root().value == 5
    assert values(S, SRow((), v, ())) == (3, 4)


def test_two_open_rows_complete_through_a_fresh_variable():
    # x ++ v = w ++ y  =>  w = x ++ u,  v = u ++ y
    S = Solver()
    v, w = RowNode("v"), RowNode("w")
    x, y = dv(1), dv(9)
    S.unify_rows(SRow((x,), v, ()), SRow((), w, (y,)), Origin())
    S.unify_rows(SRow((), w, ()), SRow((), None, (dv(1), dv(2), dv(3))), Origin())
    assert values(S, SRow((), v, ())) == (2, 3, 9)


def test_self_reference_is_an_error_not_a_hang():
    S = Solver()
    v = RowNode("v")
    with pytest.raises(ShapeError, match="itself"):
        S.unify_rows(SRow((), v, ()), SRow((dv(),), v, ()), Origin())


def test_cycle_through_two_variables_is_an_error():
    S = Solver()
    v, w = RowNode("v"), RowNode("w")
    S.unify_rows(SRow((), v, ()), SRow((dv(),), w, ()), Origin())
    with pytest.raises(ShapeError, match="itself"):
        S.unify_rows(SRow((), w, ()), SRow((), v, ()), Origin())


def test_long_chains_of_row_variables_are_compressed():
    S = Solver()
    nodes = [RowNode(f"v{i}") for i in range(3000)]
    for a, b in itertools.pairwise(nodes):
        S.unify_rows(SRow((), a, ()), SRow((dv(1),), b, ()), Origin())
    S.unify_rows(SRow((), nodes[-1], ()), SRow(), Origin())
    assert len(values(S, SRow((), nodes[0], ()))) == 2999
    assert len(values(S, SRow((), nodes[1500], ()))) == 1499


def test_union_conflict_names_both_origins():
    S = Solver("ij")
    a = DimVar("j", 4, None, Origin(operand=0, shape="3,4", kind="output", position=1))
    b = DimVar(None, 5, None, Origin(operand=1, shape="5,6", kind="output", position=0))
    with pytest.raises(ShapeError) as e:
        S.union(a, b, Origin("ij", (1, 2), 1, "5,6"))
    assert "4: from operand 0 (shape 3,4), output axis 1" in str(e.value)
    assert "5: from operand 1 (shape 5,6), output axis 0" in str(e.value)


# -- graph-wide inference ------------------------------------------------------------------------


def test_parameter_shape_inferred_from_use():
    g = ShapeGraph()
    x = g.tensor("x", "32|->784")
    w1, w2 = g.tensor("w1"), g.tensor("w2")
    h = g.apply("b|->i; |i->o => b|->o", x, w1)
    y = g.apply("b|->i; |i->o => b|->o", h, w2)
    g.tensor_equal(g.apply("b|->o => b|->o", h), g.tensor("h_shape", "32|->128"))
    g.tensor_equal(y, g.tensor("logits", "32|->10"))
    g.solve()
    assert g.shape(w1) == Shape.parse("784->128")
    assert g.shape(w2) == Shape.parse("128->10")


def test_constraints_added_in_any_order():
    g = ShapeGraph()
    a, k = g.tensor("a"), g.tensor("k", "3")
    out = g.apply("2*o<+k; |k => o", a, k)
    g.tensor_equal(out, g.tensor("known", (4,)))
    g.solve()
    # the input size is inferred backwards from the output and the kernel
    assert g.shape(a) == Shape(output=(9,))


def test_under_determined_tensor_is_named():
    g = ShapeGraph()
    x = g.tensor("x", "8|->3")
    w = g.tensor("w")
    g.apply("b|->i; |i->o => b|->o", x, w)
    with pytest.raises(ShapeError, match="'w'"):
        g.solve()


def test_graph_conflict_is_raised_when_added():
    g = ShapeGraph()
    x = g.tensor("x", (3, 4))
    w = g.tensor("w", (5, 6))
    with pytest.raises(ShapeError, match="size mismatch for label 'j': 4 vs 5"):
        g.apply("ij;jk=>ik", x, w)


# -- the broadcasting logics with unknown shapes ---------------------------------------------------


def test_mlp_parameters_inferred_through_compose_and_pointwise():
    # relu(w1 @ x + b1) then w2 @ h + b2: only b1's and b2's sizes and x's are given
    g = ShapeGraph()
    x = g.tensor("x", "32|->784")
    w1, b1 = g.tensor("w1", param=True), g.tensor("b1", "128", param=True)
    w2, b2 = g.tensor("w2", param=True), g.tensor("b2", "10", param=True)
    h = g.pointwise(g.compose(w1, x), b1)
    y = g.pointwise(g.compose(w2, h), b2)
    g.solve()
    assert g.shape(w1) == Shape.parse("784->128")
    assert g.shape(w2) == Shape.parse("128->10")
    assert g.shape(y) == Shape.parse("32|10")


def test_parameter_closes_to_its_pointwise_use():
    g = ShapeGraph()
    x = g.tensor("x", "8|3->4")
    b = g.tensor("b", param=True)
    y = g.pointwise(x, b)
    g.solve()
    assert g.shape(b) == Shape.parse("3->4")  # no batch axes: parameters have none
    assert g.shape(y) == Shape.parse("8|3->4")


def test_forgot_to_specify_the_hidden_size():
    g = ShapeGraph()
    x = g.tensor("x", "32|->784")
    w = g.tensor("w", param=True)
    g.compose(w, x)
    with pytest.raises(ShapeError, match="'w'"):
        g.solve()


def test_parameters_with_batch_axes_are_refused():
    with pytest.raises(ShapeError, match="cannot have batch axes"):
        ShapeGraph().tensor("w", "2|3", param=True)


def test_pointwise_conflict_in_a_graph():
    g = ShapeGraph()
    a, b = g.tensor("a", (3,)), g.tensor("b", (4,))
    g.pointwise(a, b)
    with pytest.raises(ShapeError, match="3 vs 4"):
        g.solve()


# -- linear relations: a size that is a polynomial of other sizes ---------------------------------


def linear(S, target, text, **names):
    from tensig.core.dims import Dim
    from tensig.core.solver import LinearRel
    S.add(LinearRel(target, Dim(text), names, Origin()))
    S.run()


def test_linear_relation_evaluates_when_every_name_is_known():
    S = Solver()
    n, m = dv(), dv(3)
    linear(S, n, "2*m + 1", m=m)
    assert n.root().value == 7


def test_linear_relation_solves_its_one_unknown_backwards():
    S = Solver()
    n, m = dv(11), dv()
    linear(S, n, "2*m + 1", m=m)
    assert m.root().value == 5


def test_linear_relation_waits_for_a_later_binding():
    # h*w = 12 with both unknown waits; h = 3 arriving later solves w (a product of a known size)
    S = Solver()
    size, h, w = dv(12), dv(), dv()
    linear(S, size, "h*w", h=h, w=w)
    assert w.root().value is None
    S.set_value(h, 3, Origin())
    S.run()
    assert w.root().value == 4


def test_linear_relation_values_flow_through_unions():
    S = Solver()
    n, m, other = dv(), dv(), dv()
    linear(S, n, "m + 2", m=m)
    S.union(m, other, Origin())
    S.set_value(other, 5, Origin())
    S.run()
    assert n.root().value == 7


@pytest.mark.parametrize("size", [10, 0])
def test_linear_relation_without_a_whole_solution_is_an_error(size):
    S = Solver()
    with pytest.raises(ShapeError, match=r"no whole m >= 0 gives 2\*m \+ 1"):
        linear(S, dv(size), "2*m + 1", m=dv())


def test_linear_relation_mismatch_names_both_sizes():
    S = Solver()
    with pytest.raises(ShapeError, match=r"2\*m \+ 1 = 7, but the size is 8"):
        linear(S, dv(8), "2*m + 1", m=dv(3))


def test_floor_is_evaluated_not_solved():
    S = Solver()
    size, t = dv(4), dv()
    linear(S, size, "(t + 1) // 2", t=t)  # t is 7 or 8: not determined, so it waits
    assert t.root().value is None and not S.constraints[0].done
    S.set_value(t, 9, Origin())
    with pytest.raises(ShapeError, match="= 5, but the size is 4"):
        S.run()


def test_symbolic_sizes_give_conditions():
    from tensig.core.dims import Dim
    S = Solver()
    m = dv()
    linear(S, dv(Dim("T")), "2*m", m=m)
    assert m.root().value == Dim("T // 2")
    assert [str(c) for c in S.conditions] == ["T % 2 == 0"]


def test_report_words_the_failure_for_the_caller():
    from tensig.core.dims import Dim
    from tensig.core.solver import LinearRel
    seen = []

    def report(kind, facts):
        seen.append((kind, facts))
        return KeyError(kind)

    S = Solver()
    S.add(LinearRel(dv(3), Dim("m + 5"), {"m": dv()}, Origin(), report))
    with pytest.raises(KeyError):
        S.run()
    assert seen == [("no_solution", {"name": "m", "value": -2, "target": 3})]


def test_a_name_only_a_known_value_holds_is_solved():
    """``a == 12`` with ``a`` known as ``b + 1``: ``b``, not in the relation's own form, is
    solved (it raised KeyError looking up ``b``'s compiled solver in ``a``'s form)."""
    from tensig.core.dims import Dim
    from tensig.core.solver import LinearRel
    S, b = Solver(), dv()
    S.add(LinearRel(dv(12), Dim("a"), {"a": dv(Dim("b + 1")), "b": b}, Origin()))
    S.run()
    assert b.root().value == 11


_EXPRS = ["2*m + 1", "m + n", "h*w", "3*m - n", "(t + 1) // 2", "m", "10 - m", "h*w + h"]


@settings(max_examples=300)
@given(st.sampled_from(_EXPRS), st.integers(0, 12), st.data())
def test_concrete_sizes_decide_as_the_symbolic_path_does(text, size, data):
    """LinearRel decides ``int`` sizes with compiled functions; the same problem with the sizes
    as constant ``Dim`` values takes the general path.  Both must agree on every outcome."""
    from tensig.core.dims import Dim
    from tensig.core.solver import LinearRel

    expr = Dim(text)
    given_values = {n: data.draw(st.one_of(st.none(), st.integers(0, 6))) for n in
                    sorted(expr.symbols)}

    def outcome(wrap):
        S = Solver()
        names = {n: dv(None if v is None else wrap(v), n) for n, v in given_values.items()}
        target = dv(wrap(size))
        S.add(LinearRel(target, expr, names, Origin(), lambda kind, facts: KeyError(kind)))
        try:
            S.run()
        except KeyError as e:
            return ("fail", e.args[0])
        return tuple(None if v.root().value is None else int(v.root().value)
                     for v in names.values())

    assert outcome(int) == outcome(Dim.const)


@pytest.mark.parametrize("text, size, solved, error", [
    ("T**2", 9, 3, None), ("T*T - 2*T", 8, 4, None), ("T // 2 + 1", 4, None, None),
    ("T**2", 8, None, r"no whole T >= 0 gives T\*\*2 = 8$"),
    ("T % 3", 4, None, r"no whole T >= 0 gives T % 3 = 4$"),
])
def test_settle_searches_a_relation_nonlinear_in_its_one_unknown(text, size, solved, error):
    """Propagation leaves ``T**2 == 9`` waiting (no linear factor to divide by); the search
    binds its one whole root (``T // 2 + 1 == 4``: T 6 or 7, left unknown), and without a
    ``report`` its failure is the solver's own ShapeError."""
    from tensig.core.dims import Dim
    from tensig.core.search import settle
    S, t = Solver(), dv(name="T")
    linear(S, dv(size), text, T=t)
    assert t.root().value is None
    if error is not None:
        with pytest.raises(ShapeError, match=error):
            settle(S)
        return
    settle(S)
    assert t.root().value == solved
    if solved is not None:  # the oracle: the size the text gives at the root
        assert Dim(text).subs({"T": solved}).constant == size


@pytest.mark.parametrize("spec, shapes, kw", [
    ("o=+k; k => o", [(3,), (0,)], {}),
    ("2*o=+3*k; k => o", [(4,), (0,)], {}),
    ("o+k; k => o", [(3,), (0,)], {"use_padding": True}),
    ("o=+k => o", [(5,)], {"sizes": {"k": 0}}),
    ("b, o=+k; k, b => o", [(2, 3), (0, 2)], {}),  # the kernel known after the window
])
def test_a_padded_window_of_no_cells_is_refused_by_inference_as_by_execution(spec, shapes, kw):
    """``infer`` accepted a padded window over a size-0 kernel (``k=0, o=3``) that every
    backend refuses (README: a size-0 window is a ShapeError); now both refuse it alike."""
    with pytest.raises(ShapeError) as inferred:
        ts.infer(spec, *shapes, **kw)
    assert inferred.value.label == "k" and inferred.value.sizes[0] == 0
    assert "the kernel 'k' has size 0" in inferred.value.reason
    for fn in (ts.einsum, ts.tropical) if len(shapes) > 1 else (ts.einsum1, ts.einmax1):
        with pytest.raises(ShapeError) as ran:
            fn(spec, *[np.ones(s) for s in shapes], **kw)
        assert str(ran.value) == str(inferred.value)
