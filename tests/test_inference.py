"""Shape inference: every construct of the notation with expected result shapes, the error
paths with assertions on their messages, symbolic sizes, and numpy.einsum as an oracle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrays import classic_specs
from tensig import Shape, ShapeError, dim, infer
from tensig.core.inference import AffineIndex, ConcatIndex, FixedIndex, Iter


def shape_of(spec, *ops, **kw):
    return infer(spec, *ops, **kw).shape


def error_of(spec, *ops, **kw) -> ShapeError:
    with pytest.raises(ShapeError) as e:
        infer(spec, *ops, **kw)
    return e.value


# -- plain einsum ------------------------------------------------------------------------------


def test_matmul():
    r = infer("ij;jk=>ik", (2, 3), (3, 4))
    assert r.shape == Shape(output=(2, 4))
    assert dict(r.dims) == {"i": 2, "j": 3, "k": 4}


def test_multichar_attention():
    r = infer("b, h|q, d; b, h|k, d => b, h|q, k", "8,12|128,64", "8,12|256,64")
    assert r.shape == Shape.parse("8,12|128,256")


def test_three_row_matmul_of_doc():
    assert shape_of("b|i->o; o->p => b|i->p", "8|3->4", "4->5") == Shape.parse("8|3->5")


def test_size_one_does_not_stretch_in_einsum():
    e = error_of("ij;jk=>ik", (2, 1), (3, 4))
    assert "size mismatch for label 'j': 1 vs 3" in str(e)


def test_size_mismatch_message_names_both_sides():
    e = error_of("ij;jk=>ik", (3, 4), (5, 6))
    msg = str(e)
    assert e.label == "j" and e.sizes == (4, 5) and e.operand == 1
    assert "size mismatch for label 'j': 4 vs 5" in msg
    assert "4: from operand 0 (shape 3,4), output axis 1" in msg
    assert "5: from operand 1 (shape 5,6), output axis 0" in msg
    # the caret sits under the j of the second operand
    lines = msg.splitlines()
    assert lines[1] == "    ij;jk=>ik"
    assert lines[2] == "       ^"


def test_reduce_and_replicate():
    assert shape_of("ijk => ki", (2, 3, 4)) == Shape(output=(4, 2))
    assert shape_of("i => ij", (2,), sizes={"j": 5}) == Shape(output=(2, 5))


def test_replicated_label_needs_a_size():
    e = error_of("i => ij", (2,))
    assert "cannot infer the size of 'j'" in str(e)
    assert e.hint is not None and "sizes={'j': ...}" in e.hint


def test_diagonal_and_embedding():
    assert shape_of("ii => i", (3, 3)) == Shape(output=(3,))
    assert "size mismatch for label 'i': 3 vs 4" in str(error_of("ii => i", (3, 4)))
    assert shape_of("i => ii", (3,)) == Shape(output=(3, 3))


def test_placeholders_do_not_unify():
    assert shape_of("_i_ => i", (2, 3, 4)) == Shape(output=(3,))
    assert shape_of("_; _ => ", (2,), (3,)) == Shape()


def test_rank_mismatch_names_the_row_and_the_fix():
    e = error_of("ij => ji", (2, 3, 4))
    assert "rank mismatch in the output row" in str(e)
    assert "exactly 2 axes" in str(e) and "exactly 3 axes (2, 3, 4)" in str(e)
    assert e.hint is not None and "row variable" in e.hint


# -- rows and row variables ----------------------------------------------------------------------


def test_omitted_rows_are_shared_between_operands():
    # ij;jk=>ik: both operands' batch rows are the same `...`
    assert shape_of("ij;jk=>ik", "5|2,3", "5|3,4") == Shape.parse("5|2,4")
    e = error_of("ij;jk=>ik", "5|2,3", "3,4")
    msg = str(e)
    assert "rank mismatch in the batch row" in msg
    assert "... was bound to (5) by operand 0" in msg
    assert e.hint is not None and "close the row with '|'" in e.hint
    # closing the second operand's batch row is the documented fix
    assert shape_of("ij;|jk=>ik", "5|2,3", "3,4") == Shape.parse("5|2,4")


def test_reduce_all_axes_into_one_number():
    assert shape_of("...|...->... => |->0", "2|3->4") == Shape(output=(1,))
    assert shape_of("... => |->0", "2|3->4") == Shape(output=(1,))
    # with a plain 0 result the batch and input axes broadcast through
    assert shape_of("... => 0", "2|3->4") == Shape.parse("2|3->1")


def test_reduce_batch_axes_only():
    assert shape_of("...|...->... => |...->...", "2,5|3->4") == Shape.parse("3->4")


def test_named_row_variables():
    r = infer("..v..|...ijk => ..v..kji", "2,3|9,4,5,6")
    assert r.shape == Shape(output=(2, 3, 6, 5, 4))
    assert r.rows["v"] == (2, 3) and r.ellipses["output"] == (9,)


def test_row_variable_on_the_left_anchors_right_axes():
    r = infer("a..v..b => ..v..", (2, 3, 4, 5))
    assert r.shape == Shape(output=(3, 4)) and r.dims["a"] == 2 and r.dims["b"] == 5


def test_fixed_index_slices_and_places():
    assert shape_of("2...|...->... => ...|...->...", "4,5|6") == Shape.parse("5|6")
    # reduces the output axes, keeps the other batch axes as output axes
    assert shape_of("2..v..|... => ..v..", "4,5|6") == Shape(output=(5,))
    assert shape_of("2..v..|... => ..v..", "4,5|3->6") == Shape.parse("3->5")
    assert shape_of("i => i2", (4,)) == Shape(output=(4, 3))
    # axes after a row variable anchor on the right: the placement is the last output axis
    assert shape_of("...|... => ...|...2", "7|4") == Shape.parse("7|4,3")
    assert shape_of("...|... => ...|2...", "7|4") == Shape.parse("7|3,4")
    e = error_of("i5 => i", (2, 3))
    assert "fixed index 5 needs an axis of at least 6 elements, but it has 3" in str(e)


def test_fixed_index_with_symbolic_size_is_a_condition():
    r = infer("i2 => i", [dim("B"), dim("T")])
    assert r.shape == Shape(output=[dim("B")])
    assert [str(c) for c in r.conditions] == ["T >= 3"]


# -- convolutions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, inp, kernel, out",
    [
        ("o=+k; k => o", 8, 3, 8),
        ("2*o=+k; k => o", 8, 3, 4),
        ("o<+k; k => o", 8, 3, 6),
        ("2*o<+k; k => o", 4, 2, 2),
        ("2*o<+k; k => o", 9, 3, 4),
        ("o<+2*k; k => o", 10, 3, 6),
        ("3*o<+2*k; k => o", 12, 2, 4),
    ],
)
def test_convolution_sizes(spec, inp, kernel, out):
    assert shape_of(spec, (inp,), (kernel,)) == Shape(output=(out,))


def test_convolution_agrees_with_the_textbook_formula():
    for n in range(1, 30):
        for k in range(1, 5):
            for s in range(1, 4):
                for d in range(1, 3):
                    span = 1 + (k - 1) * d
                    spec = f"{s}*o<+{d}*k; k => o"
                    if n >= span and (n - span) % s == 0:
                        assert shape_of(spec, (n,), (k,)).output == ((n - span) // s + 1,)
                    else:
                        with pytest.raises(ShapeError):
                            infer(spec, (n,), (k,))


def test_incompatible_stride_message():
    e = error_of("2*o<+k; k => o", (5,), (2,))
    assert "incompatible stride" in str(e)
    assert "input size 5 minus kernel span 2" in str(e) and "stride 2" in str(e)
    e = error_of("2*o<+k; k => o", (10,), (3,))
    assert "incompatible stride" in str(e)


def test_kernel_larger_than_input():
    e = error_of("o<+k; k => o", (2,), (3,))
    assert "smaller than the kernel's span 3" in str(e)


def test_padded_stride_needs_divisibility():
    e = error_of("2*o=+k; k => o", (7,), (3,))
    assert "divisible by the stride" in str(e)


def test_kernel_and_input_inferred_from_the_others():
    # the kernel size from input and output sizes
    assert infer("2*o<+k => o", (9,), result=(4,)).dims["k"] == 3
    # a pooling window with a given size
    assert shape_of("...|2*oh<+wh, 2*ow<+ww, ..c..; |wh, ww => ...|oh, ow, ..c..",
                    "8|6,6,3", (2, 2)) == Shape.parse("8|3,3,3")


def test_plain_plus_needs_use_padding():
    e = error_of("o+k; k => o", (8,), (3,))
    assert "use_padding=" in str(e) and e.hint is not None and "use_padding=True" in e.hint
    assert shape_of("o+k; k => o", (8,), (3,), use_padding=True) == Shape(output=(8,))
    assert shape_of("o+k; k => o", (8,), (3,), use_padding=False) == Shape(output=(6,))


def test_params_resolve_strides_and_dilations():
    spec = "stride*o<+dilation*k; k => o"
    assert shape_of(spec, (12,), (2,), params={"stride": 3, "dilation": 2}) == Shape(output=(4,))
    e = error_of(spec, (11,), (2,), params={"stride": 3})
    assert "'dilation'" in str(e) and e.hint is not None and "params=" in e.hint
    e = error_of(spec, (11,), (2,), params={"stride": 1.5, "dilation": 1})
    assert "must be a positive int" in str(e)


def test_offset_and_pure_stride():
    assert shape_of("2*o+1 => o", (8,)) == Shape(output=(4,))
    assert shape_of("2*o => o", (8,)) == Shape(output=(4,))


def test_symbolic_valid_convolution_reports_its_conditions():
    T = dim("T")
    r = infer("2*o<+k; k => o", [T], [3])
    (o,) = r.shape.output
    assert {str(c) for c in r.conditions} == {"T >= 3", "(T + 1) % 2 == 0"}
    for t in (3, 5, 9, 21):
        assert o.evaluate({"T": t}) == (t - 3) // 2 + 1


def test_padded_symbolic():
    r = infer("2*o=+k; k => o", [2 * dim("T")], [3])
    assert r.shape.output == (dim("T"),) and r.conditions == ()


# -- concatenation -------------------------------------------------------------------------------


def test_concatenation_patterns():
    assert shape_of("a; b => a^b", (3,), (5,)) == Shape(output=(8,))
    assert shape_of("a^b => a", (8,), result=(3,)) == Shape(output=(3,))
    assert infer("a^b => a", (8,), result=(3,)).dims["b"] == 5
    assert infer("a^b => b", (8,), result=(3,)).dims["a"] == 5
    assert shape_of("a => a^b", (3,), result=(8,)) == Shape(output=(8,))
    assert shape_of("3^a => a", (8,)) == Shape(output=(5,))
    assert shape_of("a => a^3", (5,)) == Shape(output=(8,))
    assert shape_of("3^a^5 => a", (10,)) == Shape(output=(2,))
    assert shape_of("a^b^c => b", (10,), sizes={"a": 2, "c": 3}) == Shape(output=(5,))
    assert shape_of("s, a; s, b => s, a^b", (4, 3), (4, 5)) == Shape(output=(4, 8))
    assert shape_of("x, ...; y, ...; z, ... => x^y^z, ...", (2, 4), (3, 4), (1, 4)) == \
        Shape(output=(6, 4))


def test_middle_extraction_needs_sizes():
    e = error_of("a^b^c => b", (10,))
    assert "cannot infer the size of" in str(e)


def test_components_exceeding_the_total():
    e = error_of("3^a => a", (2,))
    assert "more than the concatenated axis's size 2" in str(e)


# -- symbolic sizes --------------------------------------------------------------------------------


def test_symbolic_matmul_and_distinct_symbols():
    B, T, d, S = (dim(n) for n in ["B", "T", "d", "S"])
    assert shape_of("ij;jk=>ik", [B, T], [T, d]) == Shape(output=[B, d])
    e = error_of("ij;jk=>ik", [B, T], [S, d])
    assert "size mismatch for label 'j': T vs S" in str(e)


def test_symbolic_shape_strings():
    assert shape_of("b, t, d; d, e => b, t, e", "B, T, d", "d, 4*d") == \
        Shape.parse("B, T, 4*d")


# -- bases -----------------------------------------------------------------------------------------


def test_bases_propagate_and_conflict():
    r = infer("ij;jk=>ik", Shape(output=[2, "rgb=3"]), (3, 4))
    assert r.layout[1][0].basis == "rgb"
    e = error_of("ij;jk=>ik", Shape(output=[2, "rgb=3"]), Shape(output=["xyz=3", 4]))
    assert "basis mismatch for label 'j': rgb vs xyz" in str(e)
    r = infer("ij => ji", Shape(output=["rgb=3", 2]))
    assert str(r.shape) == "2,rgb=3"


# -- broadcasting logics ---------------------------------------------------------------------------


def test_pointwise_broadcasting():
    assert shape_of(".", (8, 1, 4), (3, 1)) == Shape(output=(8, 3, 4))
    assert shape_of(".", "2|4", "4") == Shape.parse("2|4")
    e = error_of(".", (3,), (4,))
    assert "3 vs 4" in str(e)


def test_pointwise_basis_rules():
    # a labelled size-1 axis makes a claim, so it does not stretch
    e = error_of(".", Shape(output=["q=1"]), (3,))
    assert "size mismatch for an axis: 1 vs 3" in str(e)
    # an unlabelled axis never fuses with a labelled one
    e = error_of(".", Shape(output=["rgb=3"]), (3,))
    assert "basis mismatch" in str(e)
    assert shape_of(".", Shape(output=["rgb=3"]), Shape(output=["rgb=3"])) == \
        Shape(output=["rgb=3"])


def test_compose_and_transpose():
    assert shape_of("@", "2|3->4", "5->3") == Shape.parse("2|5->4")
    assert shape_of("@", "4->2", "7|3->4") == Shape.parse("7|3->2")
    e = error_of("@", "3->4", "5->6")
    assert "3 vs 6" in str(e)
    assert shape_of("T", "2|3->4") == Shape.parse("2|4->3")


# -- arity and options -----------------------------------------------------------------------------


def test_operand_count():
    e = error_of("ij;jk=>ik", (2, 3))
    assert "the spec has 2 operand(s) but 1 was given" in str(e)
    e = error_of("ij => ij", (2, 3), op="tropical")
    assert "tropical takes 2 operand(s), got 1" in str(e)
    with pytest.raises(ValueError, match="unknown op"):
        infer("i => i", (2,), op="frobnicate")


def test_sizes_with_unknown_name():
    with pytest.raises(ValueError, match="not a label or row variable"):
        infer("i => i", (2,), sizes={"q": 3})


def test_capture():
    r = infer("...|h, w, ..c.. => ...|..c..", "2|4,5,3,2")
    assert r.capture(["h", "w", "c"]) == {"h": 4, "w": 5, "c": 6}
    with pytest.raises(ValueError, match="cannot capture 'z'"):
        r.capture(["z"])
    with pytest.raises(TypeError):
        r.capture("h")


def test_inference_is_cached():
    a = infer("ij;jk=>ik", (2, 3), (3, 4))
    b = infer("ij;jk=>ik", Shape(output=(2, 3)), np.zeros((3, 4)))
    assert a is b


# -- projections -----------------------------------------------------------------------------------


def test_layout_for_a_convolution():
    r = infer("2*o<+k; k => o", (9,), (3,))
    (inp,), (ker,), (out,) = r.layout
    assert isinstance(inp.index, AffineIndex) and inp.index.stride == 2
    assert inp.index.kernel == ker.index and inp.index.over == out.index
    assert isinstance(out.index, Iter) and out.index.size == 4 and not inp.index.padded


def test_layout_for_fixed_and_concat():
    r = infer("a^b => a, 2", (8,), result=(3, 3))
    (total,), (a, placed) = r.layout
    assert isinstance(total.index, ConcatIndex) and total.index.parts[0] == a.index
    assert placed.index == FixedIndex(2)


# -- numpy.einsum as an oracle -----------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(classic_specs(alphabet=8, labels=6, sizes=4, ops=(1, 3), axes=4))
def test_classic_specs_match_numpy_einsum(case):
    ops, out, sizes = case
    arrays = [np.zeros([sizes[c] for c in op]) for op in ops]
    expected = np.einsum(",".join("".join(o) for o in ops) + "->" + "".join(out), *arrays).shape
    spec = ";".join("".join(o) for o in ops) + "=>" + "".join(out)
    assert infer(spec, *arrays).shape.output == expected


# -- fuzzing the solver ----------------------------------------------------------------------

ROW_ITEMS = st.sampled_from(["i", "j", "k", "_", "2", "...", "..v..", "..w.."])


@st.composite
def fuzz_case(draw):
    def row():
        items = draw(st.lists(ROW_ITEMS, max_size=3))
        # at most one row variable per row
        seen, out = False, []
        for it in items:
            if it.startswith("."):
                if seen:
                    continue
                seen = True
            out.append(it)
        return "".join(out)

    def shape_spec():
        text = row()
        if draw(st.booleans()):
            text = row() + "|" + text
        return text

    n = draw(st.integers(1, 3))
    spec = "; ".join(shape_spec() for _ in range(n)) + " => " + shape_spec()

    def shape():
        rows = [draw(st.lists(st.integers(1, 4), max_size=3)) for _ in range(3)]
        return Shape(batch=rows[0], input=rows[1], output=rows[2])

    return spec, [shape() for _ in range(n)]


@settings(max_examples=400, deadline=None)
@given(fuzz_case())
def test_solver_fuzz_answers_or_raises_shape_error(case):
    spec, shapes = case  # (no wall-clock bound: hangs are attacked in a limited child)
    try:
        r = infer(spec, *shapes)
    except ShapeError as e:
        assert str(e)  # renders
    else:
        # an answer is consistent: every operand axis size equals its iterator's size
        for uses, shape in zip(r.layout, [*shapes, r.shape], strict=True):
            assert [u.size for u in uses] == list(shape.dims)
