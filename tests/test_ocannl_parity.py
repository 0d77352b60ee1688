"""OCANNL's own shape tests (``ahrefs/ocannl``, ``test/``), ported case by case.

Each test names the OCANNL test it comes from.  The deliberate differences from OCANNL are
listed in the README ("Differences from OCANNL"); tests of those check tensig's side and the
way to write OCANNL's behaviour.  Values are checked against NumPy written independently.
"""

from __future__ import annotations

import numpy as np
import pytest

from tensig import ShapeError
from tensig import graph as G
from tensig.inference import infer


@pytest.fixture(autouse=True)
def fresh_graph():
    with G.new_graph() as g:
        yield g


# -- placement axes: OCANNL's at-least constraint ---------------------------------------------


def test_placement_takes_the_largest_index_any_use_needs():
    # test/einsum/einsum_trivia.ml, "outer_sum simulating axis concatenation": ti places at
    # 0, tj at 1, tk at 2 on the shared label l, which therefore has 3 cells (not 1, as the
    # first spec alone would say)
    ti = G.einsum1("i=>i0", G.range_(3))
    tj = G.einsum1("j=>j1", G.range_(4))
    tk = G.einsum1("k=>k2", G.range_(5))
    positions = G.outer_sum("ijl;kl=>ijkl", G.outer_sum("il;jl=>ijl", ti, tj), tk)
    assert str(positions.shape) == "3,4,5,3"
    i, j, k = np.meshgrid(np.arange(3), np.arange(4), np.arange(5), indexing="ij")
    np.testing.assert_array_equal(G.Model(positions).run(), np.stack([i, j, k], axis=-1))


def test_placement_two_uses_issue_reproduction():
    # the issue's reproduction of the same OCANNL test, two operands
    ti = G.einsum1("i=>i0", G.range_(4))
    tj = G.einsum1("j=>j1", G.range_(5))
    y = G.outer_sum("il;jl=>ijl", ti, tj)
    assert str(y.shape) == "4,5,2"
    i, j = np.meshgrid(np.arange(4), np.arange(5), indexing="ij")
    np.testing.assert_array_equal(G.Model(y).run(), np.stack([i, j], axis=-1))


def test_placement_alone_is_index_plus_one():
    # test/einsum/einsum_trivia.ml: a lone placement "i=>i2" has 3 cells, the others zero
    y = G.einsum1("i=>i2", G.range_(3))
    want = np.zeros((3, 3))
    want[:, 2] = np.arange(3)
    np.testing.assert_array_equal(G.Model(y).run(), want)
    assert str(infer("i => i2", "3").shape) == "3,3"


# -- bases through concatenation and affine axes ----------------------------------------------


def test_bases_survive_concatenation():
    # test/einsum/test_concat_dim_solver.ml and test_dimension_labels.ml: a concatenation of
    # two x axes is an x axis
    r = infer("a; b => a^b", "x=2", "x=3")
    assert str(r.shape) == "x=5"
    assert r.shape.row_bases("output") == ("x",)
    # an unlabelled component takes the other's basis (einsum equality)
    assert str(infer("a; b => a^b", "x=2", "3").shape) == "x=5"
    # slicing keeps the basis too
    assert str(infer("a^b; b => a", "x=5", "3").shape) == "x=2"


def test_conflicting_bases_in_a_concatenation_name_both():
    with pytest.raises(ShapeError) as e:
        infer("a; b => a^b", "x=2", "y=3")
    msg = str(e.value)
    assert "basis mismatch" in msg and "x" in msg and "y" in msg


def test_bases_survive_affine_axes():
    # test/einsum/test_dimension_labels.ml (convolution over a labelled axis): the output
    # iterator is the input's basis
    assert str(infer("o<+k; k => o", "x=6", "x=3").shape) == "x=4"
    assert str(infer("2*o => o", "x=8").shape) == "x=4"
    with pytest.raises(ShapeError, match="basis mismatch"):
        infer("2*o; o => o", "x=8", "y=4")


# -- broadcasting: a written unlabelled 1 vs a labelled axis ----------------------------------


def test_unlabelled_size1_does_not_stretch_onto_labelled_axis():
    # test/einsum/test_dimension_labels.ml / OCANNL's syntax doc: the default basis does not
    # fuse with a named one; only bcast_if_1 stretches
    rgb = G.axis([1., 2., 3., 4., 5.], "rgb")
    with pytest.raises(ShapeError, match="does not stretch onto the labelled axis rgb=5"):
        _ = (G.ndarray([1.0]) + G.ndarray(rgb)).shape
    with G.new_graph():  # OCANNL's bcast_if_1, written with stretch: broadcasts
        y = G.stretch(G.ndarray([1.0])) + G.ndarray(rgb)
        assert str(y.shape) == "rgb=5"
        np.testing.assert_array_equal(G.Model(y).run(), np.arange(1, 6) + 1.0)
    with G.new_graph():  # unlabelled onto unlabelled broadcasts (NumPy's rule; a difference)
        z = G.ndarray([1.0]) + G.ndarray([1., 2., 3.])
        np.testing.assert_array_equal(G.Model(z).run(), np.array([2., 3., 4.]))


# -- parameters nothing sizes ------------------------------------------------------------------


def test_parameters_nothing_sizes_are_an_error_naming_them():
    # test/einsum/test_closing_order.ml / OCANNL's "You forgot to specify the hidden
    # dimension(s)": two unsized parameters meeting only each other are not a scalar
    with pytest.raises(ShapeError, match=r"'x', 'y' have hidden dimensions"):
        _ = (G.param("x") + G.param("y")).shape


def test_a_parameter_with_given_outputs_still_closes_its_input_row():
    # OCANNL's closing rule for a row only parameters reach: { a; o = [3] } has no input axes
    a = G.param("a", output=[3], init=lambda s, r: np.ones(s, np.float32))
    assert str((G.stop_gradient(a) * a).shape) == "3"


# -- compose follows the broadcast inequality --------------------------------------------------


def test_compose_contracts_against_a_stretched_size1_axis():
    # test/einsum/einsum_trivia.ml (matmul of a broadcast vector) via the issue's reproduction:
    # the right operand's output 1 stretches to the left's input 3
    assert str(infer("@", "3->4", "1").shape) == "4"
    assert str(infer("@", "1->4", "3").shape) == "4"
    assert str(infer("@", "2|3->4", "2|1").shape) == "2|4"
    with pytest.raises(ShapeError):
        infer("@", "3->4", "2")


def test_compose_with_a_stretched_axis_runs_and_differentiates():
    wv = np.arange(6.0).reshape(2, 3)
    w = G.param("w", output=[2], input=[3], init=lambda s, r: wv.astype(np.float32))
    x = G.param("x", output=[1], input=[], init=lambda s, r: np.full(s, 10.0, np.float32))
    y = w @ x
    np.testing.assert_allclose(G.Model(y).run(), wv.sum(axis=1) * 10.0)
    G.grad_update(G.einsum1("... => |->0", y)).backward()
    # d sum_o sum_k w[o,k] x[0] / dw = x[0]; / dx = sum(w)
    np.testing.assert_allclose(w.grad.numpy(), np.full((2, 3), 10.0))
    np.testing.assert_allclose(x.grad.numpy(), [wv.sum()])
