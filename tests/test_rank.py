"""Tests of tensig.rank: Remora's frames, cells, boxes, types and primitives on real arrays.

Oracles are independent of the code under test: hand-written loops over frame positions that
replicate cells by prefix (Remora's semantics written out), NumPy's own functions (np.resize for
cyclic reshape, np.unravel_index / np.ravel_multi_index for mixed radices, boolean indexing for
filter), functools.reduce / itertools.accumulate for folds and scans.
"""

from __future__ import annotations

import doctest
import functools
import itertools
import os
import re
import weakref
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tensig
from tensig import rank
from tensig.core.dims import Dim
from tensig.core.shape_index import ShapeIndex

# --------------------------------------------------------------------------------------------
# oracles
# --------------------------------------------------------------------------------------------


def lift_oracle(fn, args, ranks):
    """Remora's lifting written out: principal frame, prefix replication, a loop over cells."""
    args = [np.asarray(a) for a in args]
    frames = [a.shape[:a.ndim - r] for a, r in zip(args, ranks, strict=True)]
    principal = max(frames, key=len)
    for f in frames:
        assert principal[:len(f)] == f, "oracle called on non-agreeing frames"
    cells = []
    for idx in np.ndindex(*principal):
        cells.append(np.asarray(fn(*[a[idx[:len(f)]] for a, f in zip(args, frames, strict=True)])))
    return np.stack(cells).reshape(principal + cells[0].shape)


def counting(fn):
    calls = []

    def wrapped(*args):
        calls.append(args)
        return fn(*args)

    wrapped.calls = calls
    return wrapped


def reason(exc_info) -> str:
    return str(exc_info.value)


# --------------------------------------------------------------------------------------------
# the seed's semantics
# --------------------------------------------------------------------------------------------


class TestSeedSemantics:
    def test_prefix_agreement_example(self):
        # [10 100] + [[1 2][3 4]] gives [[11 12][103 104]] in Remora
        got = rank.lift(np.add)(np.array([10, 100]), np.array([[1, 2], [3, 4]]))
        np.testing.assert_array_equal(got, [[11, 12], [103, 104]])
        # NumPy's suffix broadcasting pairs differently: the documented contrast
        numpy_way = np.array([10, 100]) + np.array([[1, 2], [3, 4]])
        np.testing.assert_array_equal(numpy_way, [[11, 102], [13, 104]])
        assert not np.array_equal(got, numpy_way)

    def test_head_of_matrix_and_first_column(self):
        # mtx = (array (3 2) 0 1 2 3 4 5); head at (Shp 2) -> (0 1); at (Shp) lifts -> (0 2 4)
        mtx = np.arange(6).reshape(3, 2)
        np.testing.assert_array_equal(rank.head(mtx), [0, 1])
        np.testing.assert_array_equal(rank.rerank(rank.head, 1)(mtx), [0, 2, 4])

    def test_head_instantiation_of_the_paper(self):
        # first plane of a 5x6x7 array: d = 4, s = (Shp 6 7); one scalar of a 3-vector: d = 2
        inst = rank.typeof(rank.head, np.zeros((5, 6, 7)))
        assert inst.dims["d"] == 4 and inst.shapes["s"] == ShapeIndex([6, 7])
        assert rank.typeof(rank.head, (3,)).dims["d"] == 2
        assert rank.typeof(rank.head, (3,)).shapes["s"] == ShapeIndex([])

    def test_iota_matrix_and_lifted_boxes(self):
        np.testing.assert_array_equal(rank.iota(np.array([2, 3])).value,
                                      [[0, 1, 2], [3, 4, 5]])
        # iota on (array (2 2) 3 3 4 4) gives a 3x3 and a 4x4 matrix as its two result cells
        boxes = rank.iota(np.array([[3, 3], [4, 4]]))
        assert boxes.shape == (2,) and boxes.dtype == object
        assert [b.shape for b in boxes] == [(3, 3), (4, 4)]
        np.testing.assert_array_equal(boxes[1].value, np.arange(16).reshape(4, 4))

    def test_reshape_cyclic_example(self):
        # shape (3 2) from (array (5) 1 2 3 4 5) -> (array (3 2) 1 2 3 4 5 1)
        got = rank.reshape((3, 2), np.array([1, 2, 3, 4, 5]))
        np.testing.assert_array_equal(got, [[1, 2], [3, 4], [5, 1]])

    def test_sum_of_iota_v_through_unbox(self):
        # (unbox (len nums (iota/v n)) (reduce + (append [0] nums))): a plain scalar result
        def f(n):
            return rank.unbox(rank.iota_v(n),
                              lambda nums: rank.reduce(np.add, rank.append(np.array([0]), nums)),
                              result=())
        assert [int(f(n)) for n in range(6)] == [n * (n - 1) // 2 for n in range(6)]

    def test_box_of_three_by_three_two_ways(self):
        m = np.zeros((3, 3))
        vec_of_3 = rank.Box(m, "n, 3")  # (Sigma ((n Dim)) (Arr Int (Shp n 3)))
        square = rank.Box(m, "n, n")    # (Sigma ((n Dim)) (Arr Int (Shp n n)))
        assert vec_of_3.witness == {"n": 3} and square.witness == {"n": 3}
        with pytest.raises(tensig.ShapeError, match="3 == 4"):
            rank.Box(np.zeros((3, 4)), "n, n")

    def test_canonical_equality_of_indices(self):
        # (+ x y 5 x) = (+ (+ x x) 5 y) is valid; (+ q 5 y) is not
        dot = rank.lift(lambda a, b: (a * b).sum(), "n; n => ")
        inst = rank.typeof(dot, ShapeIndex([Dim("x + y + 5 + x")]),
                           ShapeIndex([Dim("2*x + 5 + y")]))
        assert inst.dims["n"] == Dim("2*x + y + 5")
        with pytest.raises(tensig.ShapeError, match=r"2\*x \+ y \+ 5 == q \+ y \+ 5"):
            rank.typeof(dot, (Dim("x + y + 5 + x"),), (Dim("q + 5 + y"),))

    def test_prefix_subtraction_binds_shape_variables(self):
        f = rank.lift(lambda x: x, "3, 4, ..s.. => ..s..", vectorized=True)
        assert rank.typeof(f, (3, 4, 5, 6)).shapes["s"] == ShapeIndex([5, 6])
        with pytest.raises(tensig.ShapeError, match="3 == 4"):
            rank.typeof(f, (4, 5, 6))  # [4, 5, 6] minus the prefix [3, 4] is undefined

    def test_frames_must_be_totally_ordered(self):
        # the join of frames is the longest one, or top (an error) when they are incomparable
        add = rank.lift(np.add)
        assert add(np.ones(2), np.ones((2, 3))).shape == (2, 3)
        with pytest.raises(tensig.ShapeError, match="not a prefix"):
            add(np.ones((2, 3)), np.ones((3, 2)))

    def test_empty_frame_takes_its_shape_from_the_type(self):
        f = counting(lambda a, b: np.outer(a, b))
        outer = rank.lift(f, "m; n => m, n")
        got = outer(np.zeros((0, 4, 2)), np.zeros(3))
        assert got.shape == (0, 4, 2, 3) and not f.calls

    def test_filter_hides_only_the_major_axis(self):
        b = rank.filter(np.array([True, False, True]), np.arange(6).reshape(3, 2))
        assert b.type.hidden == ("l",)
        assert b.type.body.shape == ShapeIndex([Dim("l"), 2])


# --------------------------------------------------------------------------------------------
# lifting: frames of every relationship
# --------------------------------------------------------------------------------------------


class TestLifting:
    def test_equal_frames(self):
        rng = np.random.default_rng(0)
        a, b = rng.random((3, 4, 5)), rng.random((3, 4, 5))
        dot = rank.lift(lambda x, y: float(np.dot(x, y)), "n; n => ")
        np.testing.assert_allclose(dot(a, b), lift_oracle(np.dot, [a, b], [1, 1]))

    def test_prefix_frames_replicate_trailing(self):
        rng = np.random.default_rng(1)
        a, b = rng.random((3,)), rng.random((3, 4, 2))
        got = rank.lift(np.multiply)(a, b)
        np.testing.assert_allclose(got, a[:, None, None] * b)
        np.testing.assert_allclose(got, lift_oracle(np.multiply, [a, b], [0, 0]))

    def test_vector_cells_with_a_scalar_frame(self):
        m, v = np.arange(6.0).reshape(2, 3), np.array([1.0, 10.0, 100.0])
        dot = rank.lift(lambda x, y: (x * y).sum(), "n; n => ")
        np.testing.assert_allclose(dot(m, v), m @ v)

    def test_non_prefix_frames_name_both(self):
        add = rank.lift(np.add)
        with pytest.raises(tensig.ShapeError) as e:
            add(np.ones((2, 4)), np.ones((2, 3)))
        msg = reason(e)
        assert "frame (2, 3) of argument 1 (arg1)" in msg
        assert "principal frame (2, 4) from argument 0 (arg0)" in msg
        assert e.value.operand == 1 and e.value.sizes == ("(2, 3)", "(2, 4)")

    def test_numpy_suffix_case_gets_the_rerank_hint(self):
        with pytest.raises(tensig.ShapeError) as e:
            rank.lift(np.add)(np.ones(3), np.ones((2, 3)))
        assert "frame (3,) of argument 0 (arg0) is not a prefix of the principal frame (2, 3) " \
               "from argument 1 (arg1)" in reason(e)
        assert e.value.hint.startswith("Remora matches frames from the left (prefix agreement) "
                                       "and a size-1 axis does not stretch; NumPy")
        assert "NumPy would broadcast" in e.value.hint and "rerank" in e.value.hint
        # the hint's fix works: a rank-1 cell for the vector pairs it with each row
        got = rank.lift(np.add, ranks=(1, 1))(np.arange(3), np.ones((2, 3)))
        np.testing.assert_array_equal(got, np.arange(3) + np.ones((2, 3)))

    def test_size_one_does_not_stretch(self):
        with pytest.raises(tensig.ShapeError, match="not a prefix"):
            rank.lift(np.add)(np.ones((1, 3)), np.ones((2, 3)))
        with pytest.raises(tensig.ShapeError, match="3 == 1"):
            rank.lift(lambda a, b: a + b, "n; n => n")(np.ones(3), np.ones(1))

    def test_empty_frame_no_call_with_declared_result(self):
        f = counting(lambda a, b: (a * b).sum())
        dot = rank.lift(f, "n; n => ")
        out = dot(np.zeros((0, 3)), np.zeros(3))
        assert out.shape == (0,) and out.dtype == np.float64 and not f.calls
        out = rank.lift(f, ranks=(1, 1), result=(), dtype=np.int32)(np.zeros((2, 0, 3)),
                                                                    np.zeros(3))
        assert out.shape == (2, 0) and out.dtype == np.int32 and not f.calls

    def test_empty_frame_unknown_result_asks_for_it(self):
        f = counting(lambda a: a.sum())
        with pytest.raises(tensig.ShapeError, match="frame \\(0, 2\\) is empty") as e:
            rank.lift(f, ranks=(1,))(np.zeros((0, 2, 3)))
        assert "result" in e.value.hint and not f.calls
        with pytest.raises(tensig.ShapeError, match="do not determine"):
            rank.lift(f, "n => m")(np.zeros((0, 3)))
        got = rank.lift(f, "n => m", sizes={"m": 5})(np.zeros((0, 3)))
        assert got.shape == (0, 5)

    def test_empty_frame_of_a_ufunc(self):
        out = rank.lift(np.equal)(np.zeros((0, 3)), np.zeros(0))
        assert out.shape == (0, 3) and out.dtype == bool

    def test_result_cells_of_different_shapes_suggest_boxes(self):
        f = rank.lift(lambda n: np.arange(int(n)), ranks=(0,))
        with pytest.raises(tensig.ShapeError, match="result cells differ") as e:
            f(np.array([1, 2]))
        assert "boxed=True" in e.value.hint
        boxed = rank.lift(lambda n: np.arange(int(n)), ranks=(0,), boxed=True)(np.array([1, 3]))
        assert boxed.dtype == object and [b.value.tolist() for b in boxed] == [[0], [0, 1, 2]]

    def test_declared_result_cell_is_checked(self):
        bad = rank.lift(lambda a: np.concatenate([a, a]), "n => n")
        with pytest.raises(tensig.ShapeError, match="result cell"):
            bad(np.ones((2, 3)))
        good = rank.lift(lambda a: np.concatenate([a, a]), "n => m")
        assert good(np.ones((2, 3))).shape == (2, 6)

    def test_label_disagreement_names_the_equality(self):
        dot = rank.lift(lambda a, b: (a * b).sum(), "n; n => ")
        with pytest.raises(tensig.ShapeError, match="3 == 4 does not hold"):
            dot(np.ones((2, 3)), np.ones(4))

    def test_cell_rank_larger_than_the_argument(self):
        with pytest.raises(tensig.ShapeError, match="less than its cell rank 2"):
            rank.lift(np.sum, ranks=(2,))(np.ones(3))

    def test_vectorized_is_called_once_on_views(self):
        seen = []

        def dot(a, b):
            seen.append((a.shape, b.shape, np.shares_memory(a, base_a),
                         np.shares_memory(b, base_b)))
            return (a * b).sum(-1)

        base_a, base_b = np.random.rand(4, 5, 3), np.random.rand(4, 3)
        got = rank.lift(dot, "n; n => ", vectorized=True)(base_a, base_b)
        assert seen == [((4, 5, 3), (4, 5, 3), True, True)]
        np.testing.assert_allclose(got, lift_oracle(lambda x, y: (x * y).sum(),
                                                    [base_a, base_b], [1, 1]))

    def test_ufunc_path_returns_the_same_as_the_loop(self):
        rng = np.random.default_rng(2)
        a, b = rng.random((2, 3, 4)), rng.random((2,))
        fast = rank.lift(np.subtract)(a, b)
        slow = rank.lift(lambda x, y: x - y, ranks=(0, 0))(a, b)
        np.testing.assert_allclose(fast, slow)
        np.testing.assert_allclose(fast, lift_oracle(np.subtract, [a, b], [0, 0]))

    def test_loop_calls_once_per_cell(self):
        f = counting(lambda x: x * 2)
        out = rank.lift(f, ranks=(0,))(np.arange(6).reshape(2, 3))
        assert len(f.calls) == 6
        np.testing.assert_array_equal(out, np.arange(6).reshape(2, 3) * 2)

    def test_ufunc_with_vector_cells(self):
        out = rank.lift(np.add, "n; n => n")(np.ones((2, 3)), np.arange(3))
        np.testing.assert_array_equal(out, np.ones((2, 3)) + np.arange(3))
        # other ranks rerank the scalar add: inside each cell it lifts by prefix agreement
        with pytest.raises(tensig.ShapeError, match="not a prefix"):
            rank.lift(np.add, ranks=(1, 1))(np.ones(2), np.ones(3))

    def test_decorator_form_and_repr(self):
        @rank.lift(cells="n => ")
        def norm1(v):
            return np.abs(v).sum()

        np.testing.assert_array_equal(norm1(np.array([[1, -2], [3, -4]])), [3, 7])
        assert "norm1 : Π(n). [t n] -> [t]" in repr(norm1)

    def test_bad_lift_arguments(self):
        with pytest.raises(TypeError, match="give the cell signature"):
            rank.lift(lambda x: x)
        with pytest.raises(TypeError, match="not both"):
            rank.lift(lambda x: x, "n => n", ranks=(1,))
        with pytest.raises(TypeError, match="returns 2"):
            rank.lift(np.divmod)
        with pytest.raises(TypeError, match="takes 2 arguments"):
            rank.lift(np.add)(1)
        with pytest.raises(tensig.SpecSyntaxError, match="no batch row"):
            rank.lift(lambda x: x, "b|n => n")

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.integers(1, 3), min_size=0, max_size=3), st.data())
    def test_random_prefix_frames_match_the_oracle(self, principal, data):
        """Any frames that are prefixes of one principal frame, scalar and vector cells."""
        k1 = data.draw(st.integers(0, len(principal)))
        k2 = data.draw(st.integers(0, len(principal)))
        n = data.draw(st.integers(1, 3))
        rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
        a = rng.random((*principal[:k1], n))
        b = rng.random(tuple(principal[:k2]))
        def cell(v, s):
            return v * s + v[0]

        f = rank.lift(cell, "n; => n")
        oracle = lift_oracle(cell, [a, b], [1, 0])
        np.testing.assert_allclose(f(a, b), oracle)  # the NumPy loop
        got = f(torch.as_tensor(a), torch.as_tensor(b))  # nested torch.vmap
        np.testing.assert_allclose(got.numpy(), oracle)
        vec = rank.lift(lambda v, s: v * s[..., None] + v[..., :1], "n; => n", vectorized=True)
        np.testing.assert_allclose(vec(a, b), oracle)  # one call on equalised views


# --------------------------------------------------------------------------------------------
# arrays of functions
# --------------------------------------------------------------------------------------------


class TestFunctionArrays:
    def test_functions_pair_with_the_leading_axis(self):
        m = np.array([[1, 2], [3, 4]])
        got = rank.apply([np.add, np.subtract], m, np.array([10, 20]))
        np.testing.assert_array_equal(got, [[11, 12], [3 - 20, 4 - 20]])

    def test_function_frame_longer_than_the_arguments(self):
        got = rank.apply([[np.add, np.subtract], [np.multiply, np.maximum]], 3, 2)
        np.testing.assert_array_equal(got, [[5, 1], [6, 3]])

    def test_function_frame_must_agree(self):
        with pytest.raises(tensig.ShapeError, match="the function array"):
            rank.apply([np.add, np.subtract, np.multiply], np.ones((2, 2)), 1)

    def test_lifted_primitives_in_a_function_array(self):
        m = np.arange(6).reshape(3, 2)
        got = rank.apply([rank.head, rank.tail], m)
        np.testing.assert_array_equal(got, [m[0], m[-1]])

    def test_plain_functions_need_ranks_and_one_type(self):
        got = rank.apply([lambda v: v.sum(), lambda v: v.max()], np.arange(6).reshape(2, 3),
                         ranks=(1,))
        np.testing.assert_array_equal(got, [3, 5])
        with pytest.raises(TypeError, match="need one type"):
            rank.apply([rank.lift(np.sum, ranks=(1,)), rank.lift(np.sum, ranks=(2,))],
                       np.ones((2, 2, 2)))

    def test_function_results_of_different_shapes(self):
        with pytest.raises(tensig.ShapeError, match="differ in shape"):
            rank.apply([rank.head, rank.behead], np.arange(3))

    def test_empty_function_array(self):
        with pytest.raises(tensig.ShapeError, match="empty"):
            rank.apply(np.empty(0, dtype=object), np.ones(3))
        assert rank.apply(np.empty(0, dtype=object), np.ones(3), result=()).shape == (0,)

    def test_torch_arguments(self):
        got = rank.apply([np.add, np.subtract], torch.tensor([[1, 2], [3, 4]]), 10)
        assert isinstance(got, torch.Tensor)
        assert got.tolist() == [[11, 12], [-7, -6]]


# --------------------------------------------------------------------------------------------
# reranking
# --------------------------------------------------------------------------------------------


class TestRerank:
    def test_rerank_primitive_keeps_its_type(self):
        m = np.arange(12).reshape(3, 4)
        np.testing.assert_array_equal(rank.rerank(rank.reverse, 1)(m), m[:, ::-1])
        np.testing.assert_array_equal(rank.rerank(rank.reverse, None)(m), m[::-1])
        assert rank.rerank(rank.head, 1).type == rank.head.type

    def test_rank_the_type_cannot_take(self):
        # a cell smaller than the function's own cells cannot hold them
        with pytest.raises(tensig.ShapeError, match="cannot have cell rank 0"):
            rank.rerank(rank.base, 0, 1)
        with pytest.raises(tensig.ShapeError, match="cannot have cell rank 0"):
            rank.rerank(rank.head, 0)

    def test_bigger_cells_still_lift_inside(self):
        # Remora's rerank is an eta-expansion (kernels.rkt-style): base at radix cells of
        # rank 2 decodes the digits under each radix row, as a loop over the rows does
        radices = np.array([[2, 2, 2], [10, 10, 10]])
        digits = np.array([1, 0, 1])
        got = rank.rerank(rank.base, 2, 1)(radices, digits)
        np.testing.assert_array_equal(got, [rank.base(r, digits) for r in radices])

    def test_by_name_and_single_rank_for_all(self):
        m = np.arange(6).reshape(2, 3)
        r = rank.rerank(rank.append, a=1, b=1)
        assert r.ranks == (1, 1) and rank.rerank(rank.append, 1).ranks == (1, 1)
        np.testing.assert_array_equal(r(m, m), np.concatenate([m, m], axis=1))
        with pytest.raises(TypeError, match="no array parameter 'z'"):
            rank.rerank(rank.append, z=1)

    def test_rerank_user_functions_and_plain_callables(self):
        total = rank.lift(np.sum, ranks=(1,))
        x = np.arange(24).reshape(2, 3, 4)
        np.testing.assert_array_equal(total(x), x.sum(-1))
        # reranking a lifted function keeps its own ranks inside the new cells (Remora);
        # a plain callable has none, so rerank lifts it at the new ranks
        np.testing.assert_array_equal(total.rerank(2)(x), x.sum(-1))
        np.testing.assert_array_equal(rank.rerank(np.sum, 2)(x), x.sum((-1, -2)))
        dot = rank.lift(lambda a, b: (a * b).sum(), "n; n => ")
        assert rank.typeof(dot.rerank(2, 2)).result is None  # the signature no longer applies

    def test_rerank_overloaded_primitive(self):
        m = np.arange(6).reshape(2, 3)
        np.testing.assert_array_equal(rank.rerank(rank.take, x=1)(2, m), m[:, :2])
        # positional ranks follow the data form (n, x): one count per row, boxed results
        boxes = rank.rerank(rank.take, 0, 1)(np.array([1, 3]), m)
        assert [b.value.tolist() for b in boxes] == [[0], [3, 4, 5]]
        # the data form at count cells of rank 1 lifts over a vector of counts (eta-expansion),
        # so a scalar count is too small a cell
        rows = rank.rerank(rank.take, 1)
        np.testing.assert_array_equal(rows(1, m), m[:, :1])
        with pytest.raises(tensig.ShapeError, match="less than its cell rank 1"):
            rows(np.array(1), m)

    @pytest.mark.parametrize("frame", [0, 2])
    def test_complementary_ranks_check_the_cells_as_typeof_does(self, frame):
        """``rerank(index, -1, -1)`` makes ``i``'s cells scalars, which ``index`` (``[Int l]``)
        cannot take, whatever the frame: Remora types the cells, even when there are none.
        An empty frame returned ``[]``, a frame of 2 blamed ``x`` (``l = 2``), typeof refused."""
        f = rank.rerank(rank.index, -1, -1)
        x, i = np.zeros((frame, 3)), np.zeros(frame, int)
        with pytest.raises(tensig.ShapeError) as want:
            rank.typeof(f, x, i)
        with pytest.raises(tensig.ShapeError) as got:
            f(x, i)
        assert str(got.value) == str(want.value) and "less than its cell rank 1" in str(want.value)
        # cells of the right ranks run as a loop over the frame (an empty one never calls index)
        x, i = np.arange(frame * 3.0).reshape(frame, 3), np.arange(frame).reshape(frame, 1)
        got = f(x, i)
        assert got.shape == rank.typeof(f, x, i).result.shape.as_tuple() == (frame,)
        np.testing.assert_array_equal(got, [x[k][i[k, 0]] for k in range(frame)])

    @pytest.mark.parametrize("inner, outer, shape", [(-2, None, (2,)), (-1, None, (2, 3)),
                                                     (-1, 1, (2, 3)), (-1, 2, (2, 3, 4)),
                                                     (-1, -1, (2, 3, 4)), (-1, -1, (1, 1))])
    def test_reranking_a_complementary_rank_lifts_inside_each_cell(self, inner, outer, shape):
        """A lifted function of rank ``-k`` reranked: inside each new cell it takes all but
        that cell's first ``k`` axes.  Pinning ``-k`` in the cell reranked it again, which
        eta-expanded again: a RecursionError on every call; reranked at its own ``-k`` it
        was returned as it is (one ``-k`` split instead of two)."""
        total = rank.lift(lambda c: np.sum(c), ranks=[inner], result=())
        x = np.arange(np.prod(shape), dtype=float).reshape(shape)

        def cell_sums(cell):  # the inner rank written out: the cell's trailing axes summed
            frame = cell.ndim - max(cell.ndim + inner, 0)
            return cell.reshape((*cell.shape[:frame], -1)).sum(-1)

        frame = 0 if outer is None else (-outer if outer < 0 else len(shape) - outer)
        want = np.stack([cell_sums(x[pos]) for pos in np.ndindex(*shape[:frame])]).reshape(
            shape[:frame] + cell_sums(x[(0,) * frame]).shape)
        np.testing.assert_array_equal(rank.rerank(total, outer)(x), want)

    def test_bad_ranks(self):
        with pytest.raises(TypeError, match="cell rank is an int"):
            rank.rerank(rank.head, 1.5)
        with pytest.raises(TypeError, match="3 ranks for 2"):
            rank.rerank(rank.append, 1, 1, 1)


# --------------------------------------------------------------------------------------------
# boxes
# --------------------------------------------------------------------------------------------


class TestBoxes:
    def test_box_type_and_witness(self):
        b = rank.Box(np.zeros((4, 3)), "l, 3")
        assert str(b.type) == "Σ(l). [float64 l, 3]" and b.witness == {"l": 4}
        full = rank.Box(np.zeros((2, 5)))
        assert str(full.type) == "Σ(..s..). [float64 ..s..]"
        assert full.witness == {"s": ShapeIndex([2, 5])}
        partly = rank.Box(np.zeros((2, 5)), "a, b", hidden="a")
        assert partly.witness == {"a": 2}

    @pytest.mark.parametrize("hidden", ["n", (), ("s",)])
    def test_the_default_body_hides_all_whatever_hidden_says(self, hidden):
        # with no shape the body ..s.. hides all (the docstring); hidden="n" had made the
        # ill-formed Σ(n). [t ..s..] with an empty witness once the default took the written path
        b = rank.Box(np.zeros((2, 5)), hidden=hidden)
        assert str(b.type) == "Σ(..s..). [float64 ..s..]"
        assert b.witness == {"s": ShapeIndex([2, 5])}

    def test_box_value_must_fit(self):
        with pytest.raises(tensig.ShapeError, match="3 == 2"):
            rank.Box(np.zeros((4, 2)), "l, 3")

    def test_unbox_array_of_boxes(self):
        boxes = rank.iota(np.array([[2, 2], [3, 1], [1, 1]]))
        got = rank.unbox(boxes, lambda v: v.sum(), result=())
        np.testing.assert_array_equal(got, [6, 3, 0])

    def test_hidden_size_must_not_escape(self):
        b = rank.filter(np.array([True, False, True]), np.arange(3))
        with pytest.raises(tensig.ShapeError, match="must not escape") as e:
            rank.unbox(b, lambda v: v * 2, result="l")
        assert "Box" in e.value.hint
        rebox = rank.unbox(b, lambda v: rank.Box(v * 2, "l"))
        assert isinstance(rebox, rank.Box) and rebox.value.tolist() == [0, 4]

    def test_declared_result_is_checked_and_bound(self):
        boxes = np.array([rank.Box(np.ones((2, 3)), "l, 3"), rank.Box(np.ones((5, 3)), "l, 3")],
                         dtype=object)
        got = rank.unbox(boxes, lambda v: v.sum(0), result="n")  # n is free: bound to 3
        np.testing.assert_array_equal(got, [[2, 2, 2], [5, 5, 5]])
        with pytest.raises(tensig.ShapeError, match="binds n"):
            rank.unbox(boxes, lambda v: v.sum(1), result="n")
        with pytest.raises(tensig.ShapeError, match="does not fit"):
            rank.unbox(boxes, lambda v: v.sum(), result="n")

    def test_without_result_the_shapes_must_agree(self):
        boxes = rank.iota(np.array([[2], [3]]))
        with pytest.raises(tensig.ShapeError, match="cells of shapes"):
            rank.unbox(boxes, lambda v: v)

    def test_empty_array_of_boxes(self):
        empty = rank.iota(np.zeros((0, 2), dtype=int))
        assert empty.shape == (0,) and empty.dtype == object
        with pytest.raises(tensig.ShapeError, match="empty"):
            rank.unbox(empty, lambda v: v.sum())
        assert rank.unbox(empty, lambda v: v.sum(), result=()).shape == (0,)

    def test_boxes_are_atoms_when_lifting(self):
        boxes = rank.iota(np.array([[2, 2], [3, 3]]))
        sizes = rank.lift(lambda b: b.value.size, ranks=(0,))(boxes)
        np.testing.assert_array_equal(sizes, [4, 9])
        assert rank.lift(lambda b: b.value.size, ranks=(0,))(boxes[0]) == 4
        assert str(rank.typeof(boxes)) == "[Σ(..s..). [int64 ..s..] 2]"


# --------------------------------------------------------------------------------------------
# types: typeof, check
# --------------------------------------------------------------------------------------------


class TestTypes:
    @pytest.mark.parametrize("prim, text", [
        (rank.head, "head : Π(d, ..s..). [t d + 1, ..s..] -> [t ..s..]"),
        (rank.append, "append : Π(m, n, ..s..). [t m, ..s..] [t n, ..s..] -> [t m + n, ..s..]"),
        (rank.filter, "filter : Π(d, ..s..). [Bool d] [t d, ..s..] -> Σ(l). [t l, ..s..]"),
        (rank.iota, "iota : Π(d). [Int d] -> Σ(..s..). [Int ..s..]"),
        (rank.iota_s, "iota_s : Π(..s..). {..s..} -> [Int ..s..]"),
        (rank.base, "base : Π(d). [Int d] [Int d] -> [Int]\n"
                    "base : Π(d). [Int 1] [Int d] -> [Int]"),
    ])
    def test_primitive_types_print(self, prim, text):
        assert str(rank.typeof(prim)) == text

    def test_every_primitive_has_a_type_and_a_documented_example(self):
        names = [n for n in rank.__all__ if isinstance(getattr(rank, n),
                                                       rank.Lifted | rank.Overloaded)]
        assert len(names) == 31  # 28 from the paper and the library, nub, nub_sieve, equal
        for n in names:
            prim = getattr(rank, n)
            assert "Type ``" in prim.__doc__ or "``Π(" in prim.__doc__, n
            assert ">>> " in prim.__doc__, n

    def test_instance_reports_frame_cells_and_result(self):
        inst = rank.typeof(rank.rotate, np.zeros((4, 2)), np.array([1, 2, 3]))
        assert inst.frame == ShapeIndex([3])
        assert str(inst.cells[0]) == "[float64 4, 2]" and str(inst.cells[1]) == "[int64]"
        assert inst.result.shape == ShapeIndex([3, 4, 2])
        assert "rotate at principal frame [3]" in str(inst)

    def test_symbolic_shapes_and_conditions(self):
        inst = rank.typeof(rank.take, 2, ("T", 3))
        assert inst.dims["d"] == Dim("T - 2") and inst.result.shape == ShapeIndex([2, 3])
        assert [str(c) for c in inst.conditions] == ["T >= 2"]
        inst = rank.typeof(rank.head, ShapeIndex(["B", "T"]))
        assert inst.dims["d"] == Dim("B - 1") and not inst.conditions  # B >= 1 always

    def test_user_names_that_collide_with_type_variables(self):
        inst = rank.typeof(rank.head, ("d", 3))
        assert inst.dims["d"] == Dim("d - 1")

    def test_check_result_and_failed_equalities(self):
        assert rank.check(rank.append, (2, 3), (4, 3), result=(6, 3)).result.shape == (6, 3)
        with pytest.raises(tensig.ShapeError, match="6 == 7 does not hold"):
            rank.check(rank.append, (2, 3), (4, 3), result=(7, 3))
        with pytest.raises(tensig.ShapeError, match="3 == 4 does not hold"):
            rank.check(rank.append, (2, 3), (4, 4))
        with pytest.raises(tensig.ShapeError, match=r"d \+ 1 == 0 has no solution"):
            rank.check(rank.head, (0,))

    def test_rank_of_relations(self):
        assert rank.typeof(rank.index, (2, 3, 4), (2,)).result.shape == ShapeIndex([4])
        assert rank.typeof(rank.shape_of, (2, 3, 4)).result.shape == ShapeIndex([3])
        assert rank.typeof(rank.transpose, (2, 3, 4)).result.shape == ShapeIndex([4, 3, 2])

    def test_typeof_values(self):
        assert str(rank.typeof(np.zeros((2, 3), dtype=np.float32))) == "[float32 2, 3]"
        assert str(rank.typeof(rank.iota_v(3))) == "Σ(d). [int64 d]"
        assert str(rank.typeof(np.add)) == "add : [t] [t] -> [t]"
        with pytest.raises(TypeError, match="lift it first"):
            rank.typeof(lambda x: x)


# --------------------------------------------------------------------------------------------
# primitives against NumPy and loop oracles
# --------------------------------------------------------------------------------------------

RNG = np.random.default_rng(7)
M = RNG.integers(-9, 9, size=(4, 3, 2))


class TestItems:
    @pytest.mark.parametrize("prim, oracle", [
        (rank.head, lambda x: x[0]), (rank.tail, lambda x: x[-1]),
        (rank.behead, lambda x: x[1:]), (rank.curtail, lambda x: x[:-1]),
        (rank.reverse, lambda x: x[::-1]), (rank.itemize, lambda x: x[None]),
        (rank.length, lambda x: len(x)), (rank.transpose, np.transpose),
        (rank.shape_of, lambda x: np.array(x.shape)),
    ])
    @pytest.mark.parametrize("r", [None, 1, 2])
    def test_against_oracle_at_every_rank(self, prim, oracle, r):
        got = rank.rerank(prim, r)(M)
        want = lift_oracle(oracle, [M], [M.ndim if r is None else r])
        np.testing.assert_array_equal(got, want)

    @pytest.mark.parametrize("prim", [rank.head, rank.tail, rank.behead, rank.curtail])
    def test_empty_major_axis(self, prim):
        with pytest.raises(tensig.ShapeError, match="no solution in the naturals") as e:
            prim(np.zeros((0, 3)))
        assert "nonempty" in e.value.hint

    def test_append(self):
        a, b = np.arange(6).reshape(2, 3), np.arange(9).reshape(3, 3)
        np.testing.assert_array_equal(rank.append(a, b), np.concatenate([a, b]))
        got = rank.rerank(rank.append, 1, 1)(a, np.ones((2, 1), dtype=int))
        np.testing.assert_array_equal(got, np.concatenate([a, np.ones((2, 1), dtype=int)], 1))
        with pytest.raises(tensig.ShapeError, match="3 == 4"):
            rank.append(a, np.ones((2, 4)))

    @pytest.mark.parametrize("n", [-5, -1, 0, 1, 2, 3, 7])
    def test_rotate(self, n):
        x = np.arange(5)
        np.testing.assert_array_equal(rank.rotate(x, n), np.roll(x, -n))

    def test_rotate_lifted_over_amounts_and_rows(self):
        m = np.arange(12).reshape(3, 4)
        amounts = np.array([1, -1, 6])
        got = rank.rerank(rank.rotate, 1, 0)(m, amounts)
        np.testing.assert_array_equal(got, np.stack([np.roll(r, -k) for r, k in zip(m, amounts,
                                                                                      strict=True)]))
        np.testing.assert_array_equal(rank.rotate(np.zeros((0, 2)), 3), np.zeros((0, 2)))
        with pytest.raises(TypeError, match="must hold integers"):
            rank.rotate(m, 1.5)


class TestReductions:
    def test_reduce_left_to_right(self):
        x = np.array([100, 1, 2, 3])
        assert rank.reduce(np.subtract, x) == 94
        assert rank.reduce(lambda a, b: a - b, x) == functools.reduce(lambda a, b: a - b, x)
        np.testing.assert_array_equal(rank.reduce(np.add, M), M.sum(0))

    def test_reduce_reranked(self):
        got = rank.rerank(rank.reduce, 1)(np.subtract, M)
        want = lift_oracle(lambda v: functools.reduce(np.subtract, v), [M], [1])
        np.testing.assert_array_equal(got, want)
        got = rank.rerank(rank.reduce, 1)(lambda a, b: np.maximum(a, b), M)  # not a ufunc: loop
        np.testing.assert_array_equal(got, M.max(-1))

    def test_reduce_needs_an_item(self):
        with pytest.raises(tensig.ShapeError, match="fold takes an initial value"):
            rank.reduce(np.add, np.zeros(0))
        with pytest.raises(TypeError, match="must be a function"):
            rank.reduce(3, np.ones(2))

    def test_fold_and_fold_right_orders(self):
        x = np.array([4, 5, 6])
        assert rank.fold(lambda acc, i: acc * 10 + i, np.array(0), x) == 456
        assert rank.fold(np.subtract, np.array(100), x) == functools.reduce(
            lambda a, b: a - b, x, 100)
        want = functools.reduce(lambda acc, i: i - acc, x[::-1], 0)  # 4 - (5 - (6 - 0))
        assert rank.fold_right(np.subtract, np.array(0), x) == want == 5
        np.testing.assert_array_equal(rank.fold(np.add, np.zeros(3), np.zeros((0, 3))),
                                      np.zeros(3))

    def test_fold_with_accumulator_of_another_shape(self):
        # op: [u r] [t s] -> [u r] with r = (2,) and s = (): a running (sum, count)
        got = rank.fold(lambda acc, v: acc + np.array([v, 1]), np.array([0, 0]), np.arange(5))
        np.testing.assert_array_equal(got, [10, 5])

    def test_scan_includes_the_initial_value(self):
        x = np.array([3, 1, 4, 1, 5])
        got = rank.scan(np.add, np.array(10), x)
        assert got.shape == (6,)
        np.testing.assert_array_equal(got, list(itertools.accumulate(x, initial=10)))
        slow = rank.scan(lambda a, b: a * 2 + b, np.array(1), x)
        np.testing.assert_array_equal(slow, list(itertools.accumulate(
            x, lambda a, b: a * 2 + b, initial=1)))
        rows = M[0].T  # two rows of three
        got = rank.rerank(rank.scan, init=0, x=1)(np.add, np.array([0, 100]), rows)
        np.testing.assert_array_equal(got, np.concatenate(
            [[[0], [100]], np.cumsum(rows, 1) + np.array([[0], [100]])], 1))


class TestIotaReshape:
    def test_iota_family(self):
        assert rank.iota(np.array([2, 3])).value.tolist() == np.arange(6).reshape(2, 3).tolist()
        v = rank.iota_v(4)
        assert v.value.tolist() == [0, 1, 2, 3] and v.witness == {"d": 4}
        np.testing.assert_array_equal(rank.iota_s((2, 2, 2)), np.arange(8).reshape(2, 2, 2))
        np.testing.assert_array_equal(rank.iota_w(np.zeros((3, 2))), np.arange(6).reshape(3, 2))
        with pytest.raises(TypeError, match="must hold integers"):
            rank.iota(np.array([2.0, 3.0]))
        with pytest.raises(ValueError, match="negative"):
            rank.iota(np.array([2, -3]))

    @pytest.mark.parametrize("shape", [(3, 2), (2,), (7,), (2, 2, 2), (0,), ()])
    def test_reshape_static_is_cyclic(self, shape):
        x = np.array([1, 2, 3, 4, 5])
        np.testing.assert_array_equal(rank.reshape(shape, x), np.resize(x, shape))

    def test_reshape_data_is_boxed(self):
        b = rank.reshape([2, 3], np.arange(4))
        assert isinstance(b, rank.Box) and str(b.type) == "Σ(..r..). [int64 ..r..]"
        np.testing.assert_array_equal(b.value, np.resize(np.arange(4), (2, 3)))
        boxes = rank.reshape(np.array([[2], [3]]), np.arange(2))
        assert [x.value.tolist() for x in boxes] == [[0, 1], [0, 1, 0]]
        with pytest.raises(tensig.ShapeError, match="no atoms"):
            rank.reshape((2,), np.zeros(0))

    def test_reshape_static_reranked(self):
        got = rank.rerank(rank.reshape, x=1)((2, 2), np.arange(6).reshape(2, 3))
        np.testing.assert_array_equal(got, [np.resize(r, (2, 2)) for r in
                                            np.arange(6).reshape(2, 3)])

    def test_ravel_and_filter(self):
        b = rank.ravel(M)
        np.testing.assert_array_equal(b.value, M.reshape(-1))
        assert b.witness == {"d": M.size}
        mask = np.array([True, False, True, True])
        f = rank.filter(mask, M)
        np.testing.assert_array_equal(f.value, M[mask])
        masks = np.array([[True, False, False, True], [False] * 4])
        boxes = rank.filter(masks, M)
        assert [x.shape for x in boxes] == [(2, 3, 2), (0, 3, 2)]
        with pytest.raises(TypeError, match="must hold booleans"):
            rank.filter(np.array([1, 0, 1, 1]), M)
        with pytest.raises(tensig.ShapeError, match="3 == 4"):
            rank.filter(np.array([True, False, True]), M)


class TestTakeDrop:
    @pytest.mark.parametrize("n", [-4, -2, 0, 1, 4])
    def test_static(self, n):
        want_take = M[:n] if n >= 0 else M[len(M) + n:]
        want_drop = M[n:] if n >= 0 else M[:len(M) + n]
        np.testing.assert_array_equal(rank.take(n, M), want_take)
        np.testing.assert_array_equal(rank.drop(n, M), want_drop)

    def test_too_many(self):
        with pytest.raises(tensig.ShapeError, match="d \\+ 5 == 4"):
            rank.take(5, M)
        with pytest.raises(tensig.ShapeError, match="more than the 4 items"):
            rank.take(np.array(-5), M)

    def test_data_count_is_boxed_and_lifted(self):
        boxes = rank.drop(np.array([0, 1, 3]), np.arange(4))
        assert [b.value.tolist() for b in boxes] == [[0, 1, 2, 3], [1, 2, 3], [3]]
        assert all(str(b.type) == "Σ(l). [int64 l]" for b in boxes)

    def test_reranked_static_take(self):
        np.testing.assert_array_equal(rank.rerank(rank.take, x=2)(-1, M), M[:, -1:])


class TestIndexSelectBase:
    def test_index(self):
        np.testing.assert_array_equal(rank.index(M, np.array([2, 1])), M[2, 1])
        assert rank.index(M, np.array([3, 2, 1])) == M[3, 2, 1]
        positions = np.array([[0, 0], [3, 2], [1, 1]])
        np.testing.assert_array_equal(rank.index(M, positions),
                                      lift_oracle(lambda p: M[tuple(p)], [positions], [1]))
        with pytest.raises(IndexError, match="out of range"):
            rank.index(M, np.array([4, 0]))
        with pytest.raises(IndexError, match="out of range"):
            rank.index(M, np.array([-1, 0]))
        with pytest.raises(tensig.ShapeError, match="rank"):
            rank.index(M, np.array([0, 0, 0, 0]))

    def test_index_reranked_over_both(self):
        got = rank.rerank(rank.index, 2, 1)(M, np.array([[2, 0], [1, 1], [0, 1], [2, 1]]))
        want = np.stack([M[k][tuple(p)] for k, p in enumerate([[2, 0], [1, 1], [0, 1], [2, 1]])])
        np.testing.assert_array_equal(got, want)

    def test_select(self):
        c = np.array([[True, False], [False, True]])
        a, b = np.arange(4).reshape(2, 2), -np.arange(4).reshape(2, 2)
        np.testing.assert_array_equal(rank.select(c, a, b), np.where(c, a, b))
        rows = rank.rerank(rank.select, 0, 1, 1)(np.array([False, True]), a, b)
        np.testing.assert_array_equal(rows, [b[0], a[1]])
        np.testing.assert_array_equal(rank.select(np.array([True, False]), 1, 2), [1, 2])

    @pytest.mark.parametrize("bases", [(2, 2, 2), (24, 60, 60), (3, 1, 5), (7,)])
    def test_base_antibase_roundtrip(self, bases):
        total = int(np.prod(bases))
        numbers = np.arange(total)
        digits = rank.antibase(np.array(bases), numbers)
        np.testing.assert_array_equal(digits, np.stack(np.unravel_index(numbers, bases), -1))
        np.testing.assert_array_equal(rank.base(np.array(bases), digits), numbers)
        np.testing.assert_array_equal(rank.base(np.array(bases), digits),
                                      np.ravel_multi_index(tuple(digits.T), bases))

    def test_antibase_wraps_and_checks(self):
        np.testing.assert_array_equal(rank.antibase(np.array([10, 10]), 123), [2, 3])
        np.testing.assert_array_equal(rank.antibase(np.array([10, 10]), -1), [9, 9])
        with pytest.raises(ValueError, match="positive"):
            rank.antibase(np.array([10, 0]), 5)
        assert rank.antibase(np.zeros(0, dtype=int), 5).shape == (0,)
        with pytest.raises(tensig.ShapeError, match="3 == 2"):
            rank.base(np.array([2, 2, 2]), np.array([1, 0]))


# --------------------------------------------------------------------------------------------
# torch
# --------------------------------------------------------------------------------------------


class TestTorch:
    def test_lifting_keeps_torch(self):
        t = torch.arange(6.0).reshape(2, 3)
        got = rank.lift(np.add)(torch.tensor([10.0, 100.0]), t)
        assert isinstance(got, torch.Tensor)
        np.testing.assert_allclose(got.numpy(), [[10, 11, 12], [103, 104, 105]])

    def test_vmap_path_is_one_traced_call(self):
        f = counting(lambda a, b: (a * b).sum())
        t = torch.arange(24.0).reshape(2, 3, 4)
        got = rank.lift(f, "n; n => ")(t, torch.ones(4))
        assert isinstance(got, torch.Tensor) and len(f.calls) == 1
        np.testing.assert_allclose(got.numpy(), t.numpy().sum(-1))

    def test_unvmappable_falls_back_to_the_loop(self):
        t = torch.arange(6.0).reshape(2, 3)
        got = rank.lift(lambda v: float(v.max().item()) * 2, "n => ")(t)
        assert isinstance(got, torch.Tensor) and got.tolist() == [4.0, 10.0]

    def test_vectorized_torch_function(self):
        t = torch.arange(6.0).reshape(2, 3)
        got = rank.lift(torch.mul, ranks=(0, 0), vectorized=True)(torch.tensor([1.0, 2.0]), t)
        assert got.tolist() == [[0, 1, 2], [6, 8, 10]]

    def test_a_cache_hit_rebuilds_nothing(self, monkeypatch):
        """A repeat call with a known signature is a key, a lookup and the plan's vmapped call:
        no preparation, no type instantiation, no library lookup, no new vmap; a new shape
        builds one more plan.  Values against torch.vmap of the same function (the same
        kernels: equal up to the rounding of a 16-term float32 sum)."""
        from tensig.rank import _plans

        counts: dict[str, int] = {}

        def count(module, name):
            real = getattr(module, name)

            def counted(*args, **kwargs):
                counts[name] = counts.get(name, 0) + 1
                return real(*args, **kwargs)

            monkeypatch.setattr(module, name, counted)

        for module, name in [(_plans, "_prepare"), (_plans, "instantiate"),
                             (_plans, "backend_among"), (torch, "vmap")]:
            count(module, name)
        f = counting(lambda x, y: (x * y).sum())
        dot = rank.lift(f, "n; n => ")
        gen = torch.Generator().manual_seed(0)
        for _ in range(3):
            a, b = torch.rand(50, 16, generator=gen), torch.rand(50, 16, generator=gen)
            want = torch.func.vmap(lambda x, y: (x * y).sum())(a, b)
            torch.testing.assert_close(dot(a, b), want, rtol=16 * torch.finfo().eps, atol=0)
        assert counts == {"_prepare": 1, "instantiate": 1, "backend_among": 1, "vmap": 1}
        assert len(f.calls) == 3  # one traced call each
        dot(torch.ones(4, 3, 16), torch.ones(4, 16))  # a new signature: a new plan
        assert counts == {"_prepare": 2, "instantiate": 2, "backend_among": 2, "vmap": 3}

    def test_non_prefix_error_on_torch(self):
        with pytest.raises(tensig.ShapeError, match="not a prefix"):
            rank.lift(np.add)(torch.ones(3), torch.ones(2, 3))

    @pytest.mark.parametrize("name, args, r", [
        ("head", (M,), 1), ("tail", (M,), None), ("behead", (M,), 2), ("reverse", (M,), 1),
        ("itemize", (M,), 1), ("transpose", (M,), 2), ("length", (M,), 1),
        ("shape_of", (M,), 2), ("iota_w", (M,), 1),
        ("append", (M, M), 1), ("rotate", (M, np.array(1)), (1, 0)),
        ("select", (M > 0, M, -M), None), ("index", (M, np.array([1, 2])), None),
        ("base", (np.array([3, 3]), np.abs(M[..., 0:2]) % 3), None),
        ("antibase", (np.array([5, 5]), np.abs(M)), None),
    ])
    def test_primitives_match_numpy(self, name, args, r):
        prim = getattr(rank, name)
        if r is not None:
            prim = rank.rerank(prim, *(r if isinstance(r, tuple) else (r,)))
        want = prim(*args)
        got = prim(*[torch.as_tensor(a) for a in args])
        assert isinstance(got, torch.Tensor)
        np.testing.assert_array_equal(got.numpy(), np.asarray(want))

    def test_reductions_and_boxes_on_torch(self):
        t = torch.as_tensor(M)
        assert torch.equal(rank.reduce(np.add, t), t.sum(0))
        assert torch.equal(rank.rerank(rank.reduce, 1)(np.add, t), t.sum(-1))
        assert torch.equal(rank.scan(torch.add, torch.tensor(0), torch.tensor([1, 2, 3])),
                           torch.tensor([0, 1, 3, 6]))
        b = rank.filter(torch.tensor([True, False, True, False]), t)
        assert isinstance(b.value, torch.Tensor) and torch.equal(b.value, t[[0, 2]])
        assert isinstance(rank.iota(torch.tensor([2, 2])).value, torch.Tensor)
        assert torch.equal(rank.reshape((2, 2), torch.arange(3)),
                           torch.tensor([[0, 1], [2, 0]]))


# --------------------------------------------------------------------------------------------
# the README section runs
# --------------------------------------------------------------------------------------------


def test_readme_rank_section_examples():
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = re.search(r"## Rank polymorphism\n(.*?)\n## ", text, re.S)
    assert section is not None
    parser = doctest.DocTestParser()
    test = parser.get_doctest(section.group(1), {}, "README rank", "README.md", 0)
    assert test.examples
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0


# --------------------------------------------------------------------------------------------
# instantiation is a solver problem: relations wait for later arguments, conditions stay
# --------------------------------------------------------------------------------------------


def test_an_equality_with_two_unknowns_waits_for_a_later_argument():
    from tensig.rank._types import FnType, arr, instantiate
    ft = FnType("f", (arr("t", "m + n"), arr("t", "m")), arr("t", "n, m"))
    m = instantiate(ft, "f", [ShapeIndex([7]), ShapeIndex([3])], {})
    assert m.dims == {"m": Dim(3), "n": Dim(4)} and str(m.result()) == "[t 4, 3]"
    with pytest.raises(tensig.ShapeError, match=r"has no solution in the naturals \(n would "
                                                r"be -2\)"):
        instantiate(ft, "f", [ShapeIndex([1]), ShapeIndex([3])], {})
    lone = FnType("g", (arr("t", "m + n"),), arr("t", "m"))
    with pytest.raises(tensig.ShapeError, match=r"cannot solve the index equality m \+ n == 7"):
        instantiate(lone, "g", [ShapeIndex([7])], {})


def test_a_symbolic_cell_gives_the_conditions_it_needs():
    from tensig.rank._types import FnType, arr, instantiate
    ft = FnType("halve", (arr("t", "2*h, ..s.."),), arr("t", "h, ..s.."))
    m = instantiate(ft, "halve", [ShapeIndex(["T", 3])], {})
    assert m.dims == {"h": Dim("T // 2")} and [str(c) for c in m.conditions] == ["T % 2 == 0"]
    with pytest.raises(tensig.ShapeError, match=r"2\*h == 5 has no solution"):
        instantiate(ft, "halve", [ShapeIndex([5, 3])], {})


@pytest.mark.parametrize("pattern, sizes, solved", [
    ("n*n", [9], 3), ("n*n", [2, 9], 3), ("n*n - 2*n", [8], 4), ("n*n - 2*n", [2, 3], 3),
    ("n**3 + n", [30], 3), ("n % 3, n // 2", [2, 2], 5),
])
def test_an_index_equality_nonlinear_in_one_unknown_is_solved(pattern, sizes, solved):
    """``[t n*n]`` at a cell of 9 was refused ("cannot solve the index equality n**2 == 9"):
    the solver's search (``tensig.core.search``) was the decorator's only; the oracle is the
    function run on the concrete cells, its result cell ``n`` long."""
    from tensig.rank._types import FnType, arr
    ft = FnType("f", (arr("t", pattern),), arr("t", "n"))
    frame = sizes[:-pattern.count(",") - 1]
    f = rank.Lifted(lambda a: np.arange(solved), ft)
    assert f(np.zeros(sizes)).shape == (*frame, solved)
    wrong = rank.Lifted(lambda a: np.arange(solved + 1), ft)
    with pytest.raises(tensig.ShapeError, match=rf"declared result cell is \[{solved}\]"):
        wrong(np.zeros(sizes))


@pytest.mark.parametrize("pattern, sizes, why", [
    ("n*n", (8,), r"n\*\*2 == 8 has no solution in the naturals$"),
    ("n*n - 2*n", (5,), r"n\*\*2 - 2\*n == 5 has no solution in the naturals$"),
    ("n*n; n*n*n", (4, 9), r"the index equality n\*\*3 == 9 fails where n\*\*2 == 4 holds "
                           r"\(n\*\*3 is 8 there\)"),
    ("n // 2 + 1", (3,), r"cannot solve the index equality n // 2 \+ 1 == 3"),  # n = 4 or 5
])
def test_an_index_equality_nonlinear_in_one_unknown_fails_by_name(pattern, sizes, why):
    from tensig.rank._types import FnType, arr, instantiate
    ft = FnType("f", tuple(arr("t", p) for p in pattern.split("; ")), arr("t", "n"))
    with pytest.raises(tensig.ShapeError, match=why):
        instantiate(ft, "f", [ShapeIndex([s]) for s in sizes], {})


def test_reduce_and_folds_take_python_objects_as_items():
    # an object array's items are Python ints (no shape): the folds combine them as they are
    x, step = np.array([1, 2, 3], dtype=object), (lambda a, b: a * 10 + b)
    assert rank.reduce(step, x) == functools.reduce(step, [1, 2, 3]) == 123
    assert rank.fold(step, np.array(4), x) == functools.reduce(step, [1, 2, 3], 4) == 4123
    assert rank.fold_right(step, np.array(4), x) == 1 * 10 + (2 * 10 + (3 * 10 + 4))


@pytest.mark.parametrize("fold", ["reduce", "fold", "fold_right"])
def test_folds_hold_only_the_running_result(fold):
    # a fold over n items of big cells holds one accumulator, not all n intermediate results
    # (reduce and fold_right did not keep them before they shared _fold's loop with scan)
    made: list[weakref.ref] = []

    def op(a, b):
        assert all(r() is None for r in made[:-1]), "an earlier intermediate result is alive"
        made.append(weakref.ref(out := a + b))
        return out

    x = np.arange(12.0).reshape(6, 2)
    args = (op, x) if fold == "reduce" else (op, np.zeros(2), x)
    np.testing.assert_array_equal(getattr(rank, fold)(*args), x.sum(0))
    assert len(made) == (5 if fold == "reduce" else 6)


# --------------------------------------------------------------------------------------------
# the package's public names, at run time and for a type checker
# --------------------------------------------------------------------------------------------


def test_a_star_import_gives_the_type_checker_the_public_classes_and_functions(tmp_path):
    """mypy reads only the literal names of a package's ``__all__``: one joined from its
    modules' ``__all__`` (``[*_types.__all__, ...]``) gave ``from tensig.rank import *`` none."""
    from tensig.rank import _boxes, _lifting, _primitives, _types
    modules = (_types, _boxes, _lifting, _primitives)
    assert sorted(rank.__all__) == sorted(n for m in modules for n in m.__all__)
    api = pytest.importorskip("mypy.api")
    names = rank.__all__
    snippet = tmp_path / "star.py"
    snippet.write_text(f"from tensig.rank import *\n\nprint({', '.join(names)})\n")
    files = sorted(str(p) for p in Path(rank.__file__).parent.glob("*.py"))
    out, err, _ = api.run([str(snippet), *files, "--follow-imports=skip",  # fast
                           "--ignore-missing-imports", "--python-version=3.11",
                           "--config-file=", f"--cache-dir={tmp_path / 'cache'}"])
    assert names and str(snippet) not in out + err, out + err


def test_bindings_in_messages_come_in_the_same_order_under_every_hash_seed():
    """``m + n`` binds both names: the message's "with m = 3, n = 4" must not follow set order."""
    import subprocess
    import sys
    code = ("from tensig.core.shape_index import ShapeIndex\n"
            "from tensig.rank._types import FnType, arr, instantiate\n"
            "ft = FnType('f', (arr('t', 'm + n'), arr('t', 'm'), arr('t', 'k')),\n"
            "            arr('t', 'n, m'))\n"
            "try:\n"
            "    instantiate(ft, 'f', [ShapeIndex([7]), ShapeIndex([3]), ShapeIndex([2, 2])], {})\n"
            "except Exception as e:\n"
            "    print(e)\n")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout
            for seed in range(6)}
    assert len(outs) == 1 and "with m = 3, n = 4" in outs.pop(), outs
