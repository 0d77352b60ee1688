"""The loop oracle in ``tests/reference.py`` checked against independent facts: numpy.einsum,
numpy slicing, np.correlate, torch.nn.functional convolutions and pooling, hand loops and
hand-computed cells.  Arrays are in tensig memory order: batch, output, input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reference import reference
from tensig import Shape

torch = pytest.importorskip("torch")
F = torch.nn.functional


def rand(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def out(*sizes: int) -> Shape:
    return Shape(output=sizes)


def close(actual, expected) -> None:
    np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12)


# -- classic einsum against numpy.einsum ---------------------------------------------------------


def test_matmul():
    a, b = rand(0, 2, 3), rand(1, 3, 4)
    r, s = reference("ij;jk=>ik", [a, b], [out(2, 3), out(3, 4)], op="einsum")
    assert s == out(2, 4)
    close(r, np.einsum("ij,jk->ik", a, b))


def test_transpose():
    a = rand(2, 3, 5)
    r, s = reference("ij => ji", [a], [out(3, 5)], op="einsum1")
    assert s == out(5, 3)
    close(r, a.T)


def test_transpose_passes_batch_and_input_through():
    # Shape 2|3->4,5 is stored as (2, 4, 5, 3); "ij => ji" swaps the two output axes only.
    a = rand(3, 2, 4, 5, 3)
    r, s = reference("ij => ji", [a], [Shape(batch=(2,), input=(3,), output=(4, 5))],
                     op="einsum1")
    assert s == Shape(batch=(2,), input=(3,), output=(5, 4))
    close(r, np.einsum("bijc->bjic", a))


def test_trace():
    a = rand(4, 3, 3)
    r, s = reference("ii => ", [a], [out(3, 3)], op="einsum1")
    assert s == Shape()
    close(r, np.trace(a))


def test_diagonal():
    a = rand(5, 3, 3)
    r, s = reference("ii => i", [a], [out(3, 3)], op="einsum1")
    assert s == out(3)
    close(r, np.diag(a))


def test_outer_product():
    a, b = rand(6, 3), rand(7, 4)
    r, s = reference("i; j => ij", [a, b], [out(3), out(4)], op="einsum")
    assert s == out(3, 4)
    close(r, np.outer(a, b))


def test_dot_product():
    a, b = rand(8, 5), rand(9, 5)
    r, s = reference("i; i => ", [a, b], [out(5), out(5)], op="einsum")
    assert s == Shape()
    close(r, a @ b)


def test_batch_matmul():
    a, b = rand(10, 2, 3, 4), rand(11, 2, 4, 5)
    r, s = reference("b|ij; b|jk => b|ik", [a, b],
                     [Shape(batch=(2,), output=(3, 4)), Shape(batch=(2,), output=(4, 5))],
                     op="einsum")
    assert s == Shape(batch=(2,), output=(3, 5))
    close(r, np.einsum("bij,bjk->bik", a, b))


def test_three_rows_memory_order():
    # Operand 0 is 2|3->4, stored (b, o, i); operand 1 is 4->5, stored (p, o).
    a, b = rand(12, 2, 4, 3), rand(13, 5, 4)
    r, s = reference("b|i->o; o->p => b|i->p", [a, b],
                     [Shape(batch=(2,), input=(3,), output=(4,)), Shape(input=(4,), output=(5,))],
                     op="einsum")
    assert s == Shape(batch=(2,), input=(3,), output=(5,))
    close(r, np.einsum("boi,po->bpi", a, b))


@pytest.mark.parametrize(("spec", "np_spec", "shapes"), [
    ("ijk => kji", "ijk->kji", [(2, 3, 4)]),
    ("ijk => ki", "ijk->ki", [(2, 3, 4)]),
    ("ij; jk; kl => il", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ij; ij => ij", "ij,ij->ij", [(2, 3), (2, 3)]),
    ("ij; ij => ", "ij,ij->", [(2, 3), (2, 3)]),
    ("iij; j => i", "iij,j->i", [(3, 3, 2), (2,)]),
])
def test_einsum_table(spec, np_spec, shapes):
    arrays = [rand(20 + k, *sh) for k, sh in enumerate(shapes)]
    op = "einsum1" if len(arrays) == 1 else "einsum"
    r, _ = reference(spec, arrays, [out(*sh) for sh in shapes], op=op)
    close(r, np.einsum(np_spec, *arrays))


def test_random_einsums_against_numpy():
    rng = np.random.default_rng(7)
    for _ in range(40):
        size = {c: int(rng.integers(1, 4)) for c in "ijkl"}
        ops = ["".join(rng.choice(list("ijkl"), size=int(rng.integers(1, 4))))
               for _ in range(int(rng.integers(1, 4)))]
        used = sorted(set("".join(ops)))
        res = "".join(rng.permutation(used)[: int(rng.integers(0, len(used) + 1))])
        arrays = [rng.standard_normal([size[c] for c in o]) for o in ops]
        spec = f"{';'.join(ops)} => {res}"
        op = "einsum1" if len(ops) == 1 else "einsum"
        r, s = reference(spec, arrays, [out(*a.shape) for a in arrays], op=op)
        assert s == out(*(size[c] for c in res)), spec
        np.testing.assert_allclose(r, np.einsum(f"{','.join(ops)}->{res}", *arrays),
                                   rtol=1e-12, atol=1e-12, err_msg=spec)


def test_placeholder_is_reduced():
    a = rand(30, 3, 4)
    r, s = reference("i_ => i", [a], [out(3, 4)], op="einsum1")
    assert s == out(3)
    close(r, a.sum(axis=1))
    r, s = reference("_i => i", [a], [out(3, 4)], op="einsum1")
    assert s == out(4)
    close(r, a.sum(axis=0))


def test_placeholder_in_result_replicates():
    a = rand(31, 3)
    r, s = reference("i => i_", [a], [out(3)], op="einsum1", result_shape=out(3, 2))
    assert s == out(3, 2)
    close(r, np.stack([a, a], axis=1))


def test_label_only_in_result_replicates():
    a = rand(32, 3)
    r, s = reference("i => ij", [a], [out(3)], op="einsum1", sizes={"j": 2})
    assert s == out(3, 2)
    close(r, np.stack([a, a], axis=1))


# -- diagonal placement, fixed indices, row variables --------------------------------------------


def test_diagonal_embedding_is_np_diag():
    a = rand(40, 4)
    r, s = reference("i => ii", [a], [out(4)], op="einsum1")
    assert s == out(4, 4)
    close(r, np.diag(a))


def test_fixed_index_placement():
    a = rand(41, 4)
    r, s = reference("i => i2", [a], [out(4)], op="einsum1")
    assert s == out(4, 3)
    expected = np.zeros((4, 3))
    expected[:, 2] = a
    close(r, expected)


def test_fixed_index_placement_with_max_leaves_minus_inf():
    a = rand(42, 3)
    r, _ = reference("i => 1i", [a], [out(3)], op="einmax1")
    assert r.shape == (2, 3)
    assert np.all(r[0] == -np.inf)
    close(r[1], a)


def test_fixed_index_slice():
    a = rand(43, 3, 4)
    r, s = reference("2i => i", [a], [out(3, 4)], op="einsum1")
    assert s == out(4)
    close(r, a[2])


def test_slice_batch_reduce_output_row_variable():
    # Shape 3,4|2->5 is stored (3, 4, 5, 2): take batch index 2, keep the other batch axis as
    # the output row ..v.., sum the output axes, let the input axes broadcast through.
    a = rand(44, 3, 4, 5, 2)
    r, s = reference("2..v..|... => ..v..", [a],
                     [Shape(batch=(3, 4), input=(2,), output=(5,))], op="einsum1")
    assert s == Shape(input=(2,), output=(4,))
    close(r, a[2].sum(axis=1))


def test_reduce_everything():
    a = rand(45, 2, 4, 5, 3)
    r, s = reference("... => |->0", [a], [Shape(batch=(2,), input=(3,), output=(4, 5))],
                     op="einsum1")
    assert s == out(1)
    close(r, [a.sum()])


# -- examples from the notation's documentation -----------------------------------------------


def test_doc_reverse_rightmost_output_axes_with_row_variable():
    # 2,3|3->7,4,5,6 is stored (2, 3, 7, 4, 5, 6, 3): batch ..v.. moves to the output row,
    # the extra output axis (7) is reduced, the input axis broadcasts through.
    a = rand(46, 2, 3, 7, 4, 5, 6, 3)
    r, s = reference("..v..|...ijk => ..v..kji", [a],
                     [Shape(batch=(2, 3), input=(3,), output=(7, 4, 5, 6))], op="einsum1")
    assert s == Shape(input=(3,), output=(2, 3, 6, 5, 4))
    close(r, np.einsum("abxijkc->abkjic", a))


def test_doc_place_at_output_index_2():
    a = rand(47, 2, 4, 3)  # 2|3->4
    r, s = reference("...|... => ...|...2", [a], [Shape(batch=(2,), input=(3,), output=(4,))],
                     op="einsum1")
    assert s == Shape(batch=(2,), input=(3,), output=(4, 3))
    expected = np.zeros((2, 4, 3, 3))
    expected[:, :, 2, :] = a
    close(r, expected)


def test_doc_slice_leftmost_batch_axis():
    a = rand(48, 3, 5, 4, 2)  # 3,5|2->4
    r, s = reference("2...|...->... => ...|...->...", [a],
                     [Shape(batch=(3, 5), input=(2,), output=(4,))], op="einsum1")
    assert s == Shape(batch=(5,), input=(2,), output=(4,))
    close(r, a[2])


def test_doc_reduce_batch_axes():
    a = rand(49, 2, 3, 4)  # 2|4->3
    r, s = reference("...|...->... => |...->...", [a],
                     [Shape(batch=(2,), input=(4,), output=(3,))], op="einsum1")
    assert s == Shape(input=(4,), output=(3,))
    close(r, a.sum(axis=0))


def test_doc_closed_batch_row_for_unbatched_operand():
    a, b = rand(50, 2, 3, 4), rand(51, 4, 5)
    r, s = reference("ij;|jk=>ik", [a, b], [Shape(batch=(2,), output=(3, 4)), out(4, 5)],
                     op="einsum")
    assert s == Shape(batch=(2,), output=(3, 5))
    close(r, a @ b)


# -- convolutions -------------------------------------------------------------------------------


def test_valid_conv1d_is_np_correlate():
    x, w = rand(50, 9), rand(51, 3)
    r, s = reference("o<+k; k => o", [x, w], [out(9), out(3)], op="einsum")
    assert s == out(7)
    close(r, np.correlate(x, w, "valid"))


def hand_conv1d(x, w, stride, dilation):
    span = (len(w) - 1) * dilation + 1
    n = (len(x) - span) // stride + 1
    return np.array([sum(x[stride * o + dilation * k] * w[k] for k in range(len(w)))
                     for o in range(n)])


@pytest.mark.parametrize(("spec", "params", "n", "stride", "dilation"), [
    ("2*o<+k; k => o", None, 9, 2, 1),
    ("o<+2*k; k => o", None, 9, 1, 2),
    ("3*o<+2*k; k => o", None, 11, 3, 2),
    ("s*o<+d*k; k => o", {"s": 2, "d": 3}, 11, 2, 3),
])
def test_strided_dilated_valid_conv1d(spec, params, n, stride, dilation):
    x, w = rand(52, n), rand(53, 3)
    r, _ = reference(spec, [x, w], [out(n), out(3)], op="einsum", params=params)
    close(r, hand_conv1d(x, w, stride, dilation))


@pytest.mark.parametrize("k", [1, 3, 5])
def test_padded_conv1d_odd_kernel_is_np_correlate_same(k):
    x, w = rand(54, 7), rand(55, k)
    r, s = reference("o=+k; k => o", [x, w], [out(7), out(k)], op="einsum")
    assert s == out(7)
    close(r, np.correlate(x, w, "same"))


def test_padded_dilated_conv1d_against_zero_padded_valid():
    # k=3, dilation 2: span 5, left pad 5 - 3 = 2, right pad 2.
    x, w = rand(56, 8), rand(57, 3)
    r, s = reference("o=+2*k; k => o", [x, w], [out(8), out(3)], op="einsum")
    assert s == out(8)
    close(r, hand_conv1d(np.pad(x, (2, 2)), w, 1, 2))


def test_padded_even_kernel_pads_more_on_the_left():
    # k=2: span 2, left pad 2 - (3 // 2) = 1: out[o] = x[o-1]*w[0] + x[o]*w[1].
    x, w = np.array([1.0, 2.0, 3.0]), np.array([10.0, 1.0])
    r, _ = reference("o=+k; k => o", [x, w], [out(3), out(2)], op="einsum")
    close(r, [1.0, 12.0, 23.0])


def test_use_padding_decides_plain_plus():
    x, w = rand(58, 7), rand(59, 3)
    padded, s = reference("o+k; k => o", [x, w], [out(7), out(3)], op="einsum",
                          use_padding=True)
    assert s == out(7)
    close(padded, np.correlate(x, w, "same"))
    valid, s = reference("o+k; k => o", [x, w], [out(7), out(3)], op="einsum",
                         use_padding=False)
    assert s == out(5)
    close(valid, np.correlate(x, w, "valid"))


def test_offset_form_shift_reads_zero_outside():
    x = np.arange(1.0, 9.0)
    r, s = reference("o+1 => o", [x], [out(8)], op="einsum1")
    assert s == out(8)
    close(r, [*x[1:], 0.0])
    r, s = reference("2*o+1 => o", [x], [out(8)], op="einsum1")
    assert s == out(4)
    close(r, x[1::2])


CONV2D = "...|{s}oh<+{d}kh, {s}ow<+{d}kw, ic; |kh, kw, ic -> oc => ...|oh, ow, oc"


@pytest.mark.parametrize(("stride", "dilation", "h", "w"), [
    (1, 1, 5, 6), (2, 1, 7, 8), (1, 2, 7, 8), (2, 2, 9, 7),
])
def test_conv2d_is_torch_conv2d(stride, dilation, h, w):
    spec = CONV2D.format(s=f"{stride}*" if stride > 1 else "",
                         d=f"{dilation}*" if dilation > 1 else "")
    n, ic, oc, kh, kw = 2, 3, 4, 3, 2
    # The image is ...|h, w, ic (NHWC); the kernel |kh, kw, ic -> oc has input row (kh, kw, ic)
    # and output row (oc), so it is stored (oc, kh, kw, ic).
    img, ker = rand(60, n, h, w, ic), rand(61, oc, kh, kw, ic)
    r, s = reference(spec, [img, ker],
                     [Shape(batch=(n,), output=(h, w, ic)),
                      Shape(input=(kh, kw, ic), output=(oc,))], op="einsum")
    expected = F.conv2d(torch.from_numpy(img).permute(0, 3, 1, 2),
                        torch.from_numpy(ker).permute(0, 3, 1, 2),
                        stride=stride, dilation=dilation).permute(0, 2, 3, 1).numpy()
    assert s == Shape(batch=(n,), output=expected.shape[1:])
    close(r, expected)


def test_padded_conv2d_is_torch_conv2d_same():
    n, h, w, ic, oc = 1, 5, 4, 2, 3
    img, ker = rand(62, n, h, w, ic), rand(63, oc, 3, 3, ic)
    r, s = reference("...|oh=+kh, ow=+kw, ic; |kh, kw, ic -> oc => ...|oh, ow, oc", [img, ker],
                     [Shape(batch=(n,), output=(h, w, ic)),
                      Shape(input=(3, 3, ic), output=(oc,))], op="einsum")
    assert s == Shape(batch=(n,), output=(h, w, oc))
    expected = F.conv2d(torch.from_numpy(img).permute(0, 3, 1, 2),
                        torch.from_numpy(ker).permute(0, 3, 1, 2),
                        padding=1).permute(0, 2, 3, 1).numpy()
    close(r, expected)


# -- max reductions ------------------------------------------------------------------------------


def test_max_pool_is_torch_max_pool2d():
    n, h, w, c = 2, 4, 6, 3
    img = rand(70, n, h, w, c)
    r, s = reference("...|2*oh<+wh, 2*ow<+ww, c; |wh, ww => ...|oh, ow, c",
                     [img, np.zeros((2, 2))], [Shape(batch=(n,), output=(h, w, c)), out(2, 2)],
                     op="tropical")
    assert s == Shape(batch=(n,), output=(2, 3, c))
    expected = F.max_pool2d(torch.from_numpy(img).permute(0, 3, 1, 2), kernel_size=2,
                            stride=2).permute(0, 2, 3, 1).numpy()
    close(r, expected)


def test_einmax1_row_max():
    a = rand(71, 3, 5)
    r, s = reference("ij => i", [a], [out(3, 5)], op="einmax1")
    assert s == out(3)
    close(r, a.max(axis=1))


def test_tropical_matmul():
    a, b = rand(72, 2, 3), rand(73, 3, 4)
    r, _ = reference("ij; jk => ik", [a, b], [out(2, 3), out(3, 4)], op="tropical")
    close(r, (a[:, :, None] + b[None, :, :]).max(axis=1))


def test_padded_tropical_reads_minus_inf_outside():
    # k=3 padded: out[o] = max over k of x[o + k - 1] + w[k]; x[-1] and x[4] are -inf.
    x, w = np.array([5.0, 1.0, 2.0, 3.0]), np.array([100.0, 0.0, 0.0])
    r, s = reference("o=+k; k => o", [x, w], [out(4), out(3)], op="tropical")
    assert s == out(4)
    # out[0]: max(-inf + 100, 5 + 0, 1 + 0) = 5 (a 0 read would give 100).
    assert r[0] == 5.0
    close(r, [5.0, 105.0, 101.0, 102.0])
    w = np.array([0.0, 0.0, 100.0])
    r, _ = reference("o=+k; k => o", [x, w], [out(4), out(3)], op="tropical")
    assert r[3] == 3.0  # max(2, 3, -inf + 100)


# -- outer sum -----------------------------------------------------------------------------------


def test_outer_sum():
    a, b = rand(80, 3), rand(81, 4)
    r, s = reference("i; j => ij", [a, b], [out(3), out(4)], op="outer_sum")
    assert s == out(3, 4)
    close(r, a[:, None] + b[None, :])


def test_outer_sum_reduced():
    a, b = rand(82, 5), rand(83, 5)
    r, s = reference("i; i => ", [a, b], [out(5), out(5)], op="outer_sum")
    assert s == Shape()
    close(r, (a + b).sum())


# -- concatenation -------------------------------------------------------------------------------


def test_concat_vectors():
    a, b = rand(90, 2), rand(91, 3)
    r, s = reference("a; b => a^b", [a, b], [out(2), out(3)], op="concat")
    assert s == out(5)
    close(r, np.concatenate([a, b]))


def test_concat_prefix_and_suffix():
    x = rand(92, 5)
    r, s = reference("a^b => a", [x], [out(5)], op="concat", result_shape=out(2))
    assert s == out(2)
    close(r, x[:2])
    r, s = reference("a^b => b", [x], [out(5)], op="concat", result_shape=out(2))
    assert s == out(2)
    close(r, x[3:])


def test_concat_skips_integer_components():
    x = rand(93, 10)
    r, s = reference("3^a => a", [x], [out(10)], op="concat")
    assert s == out(7)
    close(r, x[3:])
    r, s = reference("3^a^5 => a", [x], [out(10)], op="concat")
    assert s == out(2)
    close(r, x[3:5])


def test_concat_replace_prefix_and_suffix():
    x = rand(94, 4)
    r, s = reference("a => a^3", [x], [out(4)], op="concat")
    assert s == out(7)
    close(r, [*x, 0.0, 0.0, 0.0])
    r, s = reference("b => a^b", [x], [out(4)], op="concat", result_shape=out(6))
    assert s == out(6)
    close(r, [0.0, 0.0, *x])


def test_concat_middle():
    x = rand(95, 9)
    r, s = reference("a^b^c => b", [x], [out(9)], op="concat", sizes={"a": 2, "c": 3})
    assert s == out(4)
    close(r, x[2:6])
    r, s = reference("b => a^b^c", [x[:4]], [out(4)], op="concat", sizes={"a": 2, "c": 3})
    assert s == out(9)
    close(r, [0.0, 0.0, *x[:4], 0.0, 0.0, 0.0])


def test_concat_with_shared_leading_axis():
    a, b = rand(96, 2, 3), rand(97, 2, 4)
    r, s = reference("s, a; s, b => s, a^b", [a, b], [out(2, 3), out(2, 4)], op="concat")
    assert s == out(2, 7)
    close(r, np.concatenate([a, b], axis=1))


def test_concat_three_operands():
    x, y, z = rand(98, 2, 3), rand(99, 1, 3), rand(100, 4, 3)
    r, s = reference("x, ...; y, ...; z, ... => x^y^z, ...", [x, y, z],
                     [out(2, 3), out(1, 3), out(4, 3)], op="concat")
    assert s == out(7, 3)
    close(r, np.concatenate([x, y, z], axis=0))


def test_concat_in_operand_and_result():
    # Both sides concatenated: the phases pair a with a and b with b.
    x = rand(101, 5)
    r, s = reference("a^b => b^a", [x], [out(5)], op="concat", sizes={"a": 2})
    assert s == out(5)
    close(r, [*x[2:], *x[:2]])


def test_concat_phase_iterates_only_the_tensors_taking_part():
    # In the phase where b is active, operand 0 (which uses a) sits out, so its label c is not
    # iterated: the suffix is exactly y, not c copies of y summed.
    x, y = rand(104, 2, 3), rand(105, 4)
    r, s = reference("a, c; b => a^b", [x, y], [out(2, 3), out(4)], op="concat")
    assert s == out(6)
    close(r, [*x.sum(axis=1), *y])


def test_stack_by_concatenating_unit_axes():
    # The block-tensor desugaring: unsqueeze each operand, then concatenate the unit axes.
    a, b = rand(102, 3), rand(103, 3)
    ua, _ = reference("... => 0, ...", [a], [out(3)], op="einsum1")
    ub, _ = reference("... => 0, ...", [b], [out(3)], op="einsum1")
    r, s = reference("t0, ...; t1, ... => t0^t1, ...", [ua, ub], [out(1, 3), out(1, 3)],
                     op="concat")
    assert s == out(2, 3)
    close(r, np.stack([a, b]))


# -- the oracle's own guards ---------------------------------------------------------------------


def test_rejects_wrong_array_shape():
    with pytest.raises(ValueError, match="memory order"):
        reference("i->j => i->j", [np.zeros((3, 2))], [Shape(input=(3,), output=(2,))],
                  op="einsum1")


def test_result_is_float64_and_neutral_for_max():
    r, _ = reference("i => ii", [np.arange(3)], [out(3)], op="einmax1")
    assert r.dtype == np.float64
    assert r[0, 1] == -math.inf and r[2, 2] == 2.0
