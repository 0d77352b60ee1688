"""Remora's own test cases for reranking and the primitives tensig lacked, ported.

Each case cites its source: jrslepak/Remora's Racket library (``remora/examples``,
``remora/tests``), remora-lang/remora and liam923/remora's tests.  Remora's rerank is an
eta-expansion: ``(rerank (r ...) f)`` is ``(λ ((x r) ...) (f x ...))``, so ``f`` still lifts at
its own ranks inside each new cell.  The oracle here is an explicit loop over the outer frame
that calls the inner function on each cell.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensig
from tensig import rank


def prefix_add(a, b):
    """Remora's scalar ``+`` on two arrays: frames agree by prefix (an explicit loop)."""
    a, b = np.asarray(a), np.asarray(b)
    big, small = (a, b) if a.ndim >= b.ndim else (b, a)
    assert big.shape[:small.ndim] == small.shape
    out = np.empty(big.shape, dtype=np.result_type(a, b))
    for idx in itertools.product(*map(range, big.shape)):
        out[idx] = a[idx[:a.ndim]] + b[idx[:b.ndim]]
    return out


def eta_oracle(inner, ranks, *args):
    """The reranked call by its definition: a loop over the outer principal frame."""
    frames = [x.shape[:x.ndim - r] for x, r in zip(args, ranks, strict=True)]
    frame = max(frames, key=len)
    results = [inner(*[x[idx[:len(f)]] for x, f in zip(args, frames, strict=True)])
               for idx in itertools.product(*map(range, frame))]
    return np.array(results).reshape(frame + np.shape(results[0]))


class TestRerankIsEtaExpansion:
    def test_issue_example_add(self):
        # Remora: ((rerank (1 2) +) [10 20] [[1 2] [3 4]]) = [[11 12] [23 24]]
        add = rank.lift(np.add)
        got = rank.rerank(add, 1, 2)(np.array([10, 20]), np.array([[1, 2], [3, 4]]))
        np.testing.assert_array_equal(got, [[11, 12], [23, 24]])
        # a ufunc lifted at other ranks is the same reranking of the scalar function
        got = rank.lift(np.add, ranks=(1, 2))(np.array([10, 20]), np.array([[1, 2], [3, 4]]))
        np.testing.assert_array_equal(got, [[11, 12], [23, 24]])

    def test_scalar_function_reranked_to_vectors(self):
        # a function of scalars reranked to rank 1 still sees scalars (no TypeError from int())
        even = rank.lift(lambda n: int(n) % 2 == 0, ranks=(0,))
        np.testing.assert_array_equal(rank.rerank(even, 1)(np.arange(4)),
                                      [True, False, True, False])

    def test_matrix_product_from_kernels_rkt(self):
        # remora/examples/kernels.rkt's m*: multiply each row of a (rank 1) with the whole of
        # b (rank 2) by prefix agreement, then add up the major axis of each cell
        mul = rank.lift(np.multiply)
        a = np.array([[1, 2], [3, 4]])
        b = np.array([[5, 6], [7, 8]])
        products = rank.rerank(mul, 1, 2)(a, b)
        got = rank.rerank(rank.reduce, 2)(np.add, products)
        np.testing.assert_array_equal(got, a @ b)
        # the square case is where passing bigger cells to the ufunc went silently wrong
        assert not np.array_equal(np.add.reduce(a[:, None, :] * b[None], axis=1), a @ b)

    def test_rerank_with_all_on_a_fixed_rank_parameter(self):
        # Remora: ((rerank (all 1) filter) mask x): one mask for every row of x
        mask = np.array([True, False, True, True])
        x = np.arange(12).reshape(3, 4)
        boxes = rank.rerank(rank.filter, None, 1)(mask, x)
        assert [b.value.tolist() for b in boxes] == [row[mask].tolist() for row in x]

    def test_function_array_reranked(self):
        # an array of functions applied at new ranks: each still lifts inside its cells
        fs = [rank.lift(np.add), rank.lift(np.subtract)]
        got = rank.apply(fs, np.array([10, 20]), np.array([[1, 2], [3, 4]]), ranks=(1, 2))
        np.testing.assert_array_equal(got[0], prefix_add([10, 20], [[1, 2], [3, 4]]))
        np.testing.assert_array_equal(got[1], [[9, 8], [17, 16]])

    def test_reranked_type_composes_the_inner_frame(self):
        inst = rank.typeof(rank.lift(np.add, ranks=(1, 2)), (5, 2), (5, 2, 3))
        assert inst.result.shape.as_tuple() == (5, 2, 3)

    def test_same_ranks_is_the_function_itself(self):
        add = rank.lift(np.add)
        assert rank.rerank(add, 0, 0) is add

    @settings(max_examples=60)
    @given(st.data())
    def test_against_the_loop_oracle(self, data):
        r0 = data.draw(st.integers(0, 2))
        r1 = data.draw(st.integers(0, 2))
        outer = data.draw(st.lists(st.integers(1, 3), max_size=2))
        cell0 = data.draw(st.lists(st.integers(1, 3), min_size=r0, max_size=r0))
        cell1 = data.draw(st.lists(st.integers(1, 3), min_size=r1, max_size=r1))
        # prefix agreement inside the cells: the shorter cell is a prefix of the longer
        if len(cell0) <= len(cell1):
            cell0 = cell1[:len(cell0)]
        else:
            cell1 = cell0[:len(cell1)]
        keep = data.draw(st.integers(0, len(outer)))  # argument 0 may have a shorter frame
        a = np.arange(int(np.prod(outer[:keep] + cell0))).reshape(outer[:keep] + cell0)
        b = 100 * np.arange(int(np.prod(outer + cell1))).reshape(outer + cell1)
        got = rank.rerank(rank.lift(np.add), r0, r1)(a, b)
        np.testing.assert_array_equal(got, eta_oracle(prefix_add, (r0, r1), a, b))


def test_too_small_a_cell_is_refused_at_rerank():
    with pytest.raises(tensig.ShapeError, match="cannot have cell rank 0"):
        rank.rerank(rank.base, 0, 1)


class TestAtomTypes:
    def test_truth_values_are_not_numbers(self):
        # Remora's (+ #t 5) is a type error; NumPy would answer 6
        with pytest.raises(TypeError, match="holds booleans"):
            rank.lift(np.add)(True, 5)
        with pytest.raises(TypeError, match="holds booleans"):
            rank.check(np.add, np.array([True, False]), np.arange(2))

    def test_strings_and_numbers_do_not_add(self):
        with pytest.raises(TypeError, match="no add of int64 and <U1"):
            rank.check(np.add, np.arange(3), np.array(["a", "b", "c"]))

    def test_result_atom_type_is_resolved_not_copied(self):
        inst = rank.typeof(np.add, np.array([2], np.int64), np.array([1.5]))
        assert inst.result.elem == "float64"  # not the first argument's int64
        inst = rank.typeof(np.less, np.arange(2.0), np.arange(2.0))
        assert inst.result.elem == "bool"

    def test_logical_functions_of_truth_values_still_work(self):
        got = rank.lift(np.logical_and)(np.array([True, False]), np.array([[True], [True]]))
        np.testing.assert_array_equal(got, [[True], [False]])


class TestBoxWitnesses:
    def test_hidden_indices_the_shape_does_not_show(self):
        # Remora: (box (1 2) 100 (Sigma ($d $e) Int)) keeps d = 1, e = 2
        b = rank.Box(np.array(100), (), hidden=("d", "e"), witness={"d": 1, "e": 2})
        assert {k: int(v) for k, v in b.witness.items()} == {"d": 1, "e": 2}
        assert b.type.hidden == ("d", "e")

    def test_explicit_witness_must_agree_with_the_shape(self):
        assert int(rank.Box(np.arange(3), "l", witness={"l": 3}).witness["l"]) == 3
        with pytest.raises(tensig.ShapeError, match="disagrees"):
            rank.Box(np.arange(3), "l", witness={"l": 4})
        with pytest.raises(TypeError, match="not a hidden index"):
            rank.Box(np.arange(3), "l", witness={"q": 4})
        with pytest.raises(TypeError, match="natural number"):
            rank.Box(np.arange(3), "l", witness={"l": -1})


class TestComplementaryRanks:
    # Remora (and J) allow a negative cell rank -k: the frame is the first k axes, whatever
    # the argument's rank (remora-lang/remora's rank tests)
    def test_negative_rank_leaves_k_frame_axes(self):
        m = np.arange(24).reshape(2, 3, 4)
        got = rank.rerank(rank.head, -1)(m)  # cells of rank 2: the first row of each matrix
        np.testing.assert_array_equal(got, m[:, 0])
        got = rank.rerank(rank.head, -2)(m)  # cells of rank 1
        np.testing.assert_array_equal(got, m[:, :, 0])

    def test_negative_rank_on_a_user_function(self):
        total = rank.lift(np.sum, ranks=(-1,))
        m = np.arange(24).reshape(2, 3, 4)
        np.testing.assert_array_equal(total(m), m.reshape(2, -1).sum(1))
        np.testing.assert_array_equal(total(np.arange(5)), np.arange(5))  # cells are scalars

    def test_negative_rank_past_the_argument_is_a_scalar_cell(self):
        got = rank.lift(np.add, ranks=(-5, 0))(np.array([1, 2]), np.array([10, 20]))
        np.testing.assert_array_equal(got, [11, 22])


def first_occurrence_loop(x):
    """nub-sieve by its definition: an item is kept when no earlier item equals it whole."""
    return [not any(np.array_equal(x[i], x[j]) for j in range(i)) for i in range(len(x))]


class TestNubAndEqual:
    # Remora's native primitives nub, nub-sieve and equal (jrslepak/Remora's basis-lib tests)
    def test_nub_sieve_and_nub_of_scalars(self):
        x = np.array([3, 1, 3, 2, 1])
        np.testing.assert_array_equal(rank.nub_sieve(x), [True, True, False, True, False])
        np.testing.assert_array_equal(rank.nub(x).value, [3, 1, 2])

    def test_items_compare_whole(self):
        x = np.array([[1, 2], [1, 3], [1, 2]])
        np.testing.assert_array_equal(rank.nub_sieve(x), [True, True, False])
        assert str(rank.nub(x).type) == "Σ(l). [int64 l, 2]"

    @settings(max_examples=50)
    @given(st.lists(st.lists(st.integers(0, 2), min_size=2, max_size=2), max_size=8))
    def test_against_the_loop(self, rows):
        x = np.array(rows, dtype=np.int64).reshape(len(rows), 2)
        np.testing.assert_array_equal(rank.nub_sieve(x), first_occurrence_loop(x))
        kept = [r for r, k in zip(rows, first_occurrence_loop(x), strict=True) if k]
        assert rank.nub(x).value.tolist() == kept

    def test_reranked_nub_sieve_per_row(self):
        x = np.array([[1, 1, 2], [3, 4, 3]])
        np.testing.assert_array_equal(rank.rerank(rank.nub_sieve, 1)(x),
                                      [first_occurrence_loop(r) for r in x])

    def test_equal(self):
        assert bool(rank.equal(np.array([1, 2]), np.array([1, 2])))
        assert not bool(rank.equal(np.array([1, 2]), np.array([[1, 2]])))  # shapes differ
        np.testing.assert_array_equal(
            rank.rerank(rank.equal, 1, 1)(np.array([[1, 2], [3, 4]]), np.array([[1, 2], [4, 3]])),
            [True, False])

    def test_torch_arrays(self):
        torch = pytest.importorskip("torch")
        x = torch.tensor([[1, 2], [1, 2], [0, 0]])
        assert rank.nub_sieve(x).tolist() == [True, False, True]
        assert rank.nub(x).value.tolist() == [[1, 2], [0, 0]]


class TestTransposeAndBase:
    def test_transpose_with_a_permutation(self):
        x = np.arange(24).reshape(2, 3, 4)
        for perm in itertools.permutations(range(3)):
            np.testing.assert_array_equal(rank.transpose(perm, x), np.transpose(x, perm))
        # reranked: the permutation applies inside each cell
        np.testing.assert_array_equal(rank.rerank(rank.transpose, x=2)((1, 0), x),
                                      np.transpose(x, (0, 2, 1)))
        with pytest.raises(tensig.ShapeError, match="not a permutation"):
            rank.transpose((0, 0, 1), x)

    def test_base_extends_a_single_radix(self):
        # APL's 2 ⊥ 1 1 0 1 is 13: one radix serves every digit
        assert int(rank.base(np.array([2]), np.array([1, 1, 0, 1]))) == 13
        digits = np.array([[1, 0, 1], [0, 1, 1]])
        np.testing.assert_array_equal(rank.base(np.array([2]), digits),
                                      rank.base(np.array([2, 2, 2]), digits))


class TestFunctionArraysAsOperators:
    # Remora applies an array of functions pointwise: (reduce [+ *] x) is two reductions
    def test_reduce_with_two_functions(self):
        x = np.array([[1, 2, 3], [4, 5, 6]])
        got = rank.reduce(np.array([np.add, np.multiply], dtype=object), x)
        np.testing.assert_array_equal(got, [rank.reduce(np.add, x), rank.reduce(np.multiply, x)])

    def test_fold_and_scan(self):
        ops = np.array([np.add, np.subtract], dtype=object)
        x = np.array([1, 2, 3])
        np.testing.assert_array_equal(rank.fold(ops, np.array(0), x), [6, -6])
        np.testing.assert_array_equal(rank.scan(ops, np.array(0), x),
                                      [[0, 1, 3, 6], [0, -1, -3, -6]])

    def test_function_frame_agrees_by_prefix(self):
        ops = np.array([np.add, np.multiply], dtype=object)
        rows = np.array([[1, 2], [3, 4], [5, 6]])  # frame (3,) at rank 1: not a prefix of (2,)
        with pytest.raises(tensig.ShapeError, match="prefix"):
            rank.rerank(rank.reduce, 1)(ops, rows)
        rows = np.array([[1, 2, 3], [4, 5, 6]])  # frame (2,): each function takes its row
        np.testing.assert_array_equal(rank.rerank(rank.reduce, 1)(ops, rows), [6, 120])
