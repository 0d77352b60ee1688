"""The annotation parser, the AnnotationShape data model, Shaped/Float/Int/Bool and signatures."""

from __future__ import annotations

import os
import subprocess
import sys
import typing
from typing import Annotated, Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensig.core.annotations import (
    AnnotationShape,
    Bool,
    Broadcastable,
    Deferred,
    Float,
    Int,
    RowVariable,
    Shaped,
    ShapeSpecMarker,
    dtype_kind,
    parse_annotation,
    signature_of,
    words_hint,
)
from tensig.core.dims import Dim
from tensig.core.errors import SpecSyntaxError
from tensig.core.notation import parse_shape_spec

B, T, d, h, w = (Dim.symbol(n) for n in "BTdhw")


# --------------------------------------------------------------------------------------------
# every syntax form
# --------------------------------------------------------------------------------------------

FORMS = [
    # text, batch, input, output
    ("B T d", (), (), (B, T, d)),
    ("BTd", (), (), (Dim.symbol("BTd"),)),  # one axis, as jaxtyping reads it
    ("n_embd", (), (), (Dim.symbol("n_embd"),)),
    ("B 16", (), (), (B, 16)),
    ("B T, d", (), (), (B, T, d)),
    ("B T+1 2 * h", (), (), (B, T + 1, 2 * h)),
    ("*b T", (), (), (RowVariable("b"), T)),
    ("#4 #T", (), (), (Broadcastable(4), Broadcastable(T))),
    ("*#b T", (), (), (RowVariable("b", broadcast=True), T)),
    ("_b rows=3", (), (), (Any, 3)),
    ("{n} min(T,d)", (), (), (Deferred("{n}"), Deferred("min(T,d)"))),
    ("B, T, d", (), (), (B, T, d)),
    ("", (), (), ()),
    ("B 3 _", (), (), (B, 3, Any)),
    ("B, 16", (), (), (B, 16)),
    ("B, T+1, 2*h", (), (), (B, T + 1, 2 * h)),
    ("h*w, T-1", (), (), (h * w, T - 1)),
    ("(T + 1)//2", (), (), ((T + 1) // 2,)),
    ("2*3, B", (), (), (6, B)),
    ("batch, seq", (), (), (Dim.symbol("batch"), Dim.symbol("seq"))),
    ("batch,", (), (), (Dim.symbol("batch"),)),
    ("batch seq", (), (), (Dim.symbol("batch"), Dim.symbol("seq"))),
    ("B|T->d", (B,), (T,), (d,)),
    ("B|d", (B,), (), (d,)),
    ("T->d", (), (T,), (d,)),
    ("B|->d", (B,), (), (d,)),
    ("B, T|h*w->d", (B, T), (h * w,), (d,)),
    ("... d", (), (), (RowVariable(None, "output"), d)),
    ("...|T d", (RowVariable(None, "batch"),), (), (T, d)),
    ("..b.. T", (), (), (RowVariable("b"), T)),
    ("..b.., T+1", (), (), (RowVariable("b"), T + 1)),
    ("B ..v.. d", (), (), (B, RowVariable("v"), d)),
    ("..a..|..b..->d", (RowVariable("a", "batch"),), (RowVariable("b", "input"),), (d,)),
    ("... _", (), (), (RowVariable(None), Any)),
]


@pytest.mark.parametrize("text, batch, inp, out", FORMS)
def test_every_syntax_form(text, batch, inp, out):
    a = parse_annotation(text)
    assert (a.batch, a.input, a.output) == (batch, inp, out)
    assert a.text == text


@pytest.mark.parametrize("text", [f[0] for f in FORMS])
def test_canonical_text_parses_back_equal(text):
    a = parse_annotation(text)
    assert parse_annotation(str(a)) == a


def test_whitespace_and_commas_separate_axes_and_a_word_is_one_axis():
    assert parse_annotation("B T d") == parse_annotation(" B,T , d ") == parse_annotation("B T,d")
    assert parse_annotation("B T d") != parse_annotation("B T")
    # jaxtyping's reading (issue 13 section 6): tensig once read these letter by letter
    assert parse_annotation("batch seq").rank == 2
    assert parse_annotation("n_embd").rank == 1
    assert parse_annotation("BTd").rank == 1
    # whitespace next to an operator does not separate; brackets hold their commas
    assert parse_annotation("T + 1, (h + 1) // 2").rank == 2
    assert parse_annotation("min(a, b) c").rank == 2


def test_sizes_are_ints_expressions_are_dims_and_placeholders_are_any():
    a = parse_annotation("B, 3, 2*3, T+1, _")
    assert [type(x).__name__ for x in a.output[:4]] == ["Dim", "int", "int", "Dim"]
    assert a.output[4] is Any
    assert a.output[1] == 3 and a.output[2] == 6


def test_data_model_properties():
    a = parse_annotation("B, T|..v.., h*w->d, T+1")
    assert a.items == (B, T, d, T + 1, RowVariable("v", "input"), h * w)  # batch, output, input
    assert [a.text[s:e] for s, e in a.item_spans] == ["B", "T", "d", "T+1", "..v..", "h*w"]
    assert a.names == ("B", "T", "h", "w", "d")
    assert a.row_variables == (RowVariable("v", "input"),)
    assert a.rank is None and a.min_rank == 5
    assert parse_annotation("B T d").rank == 3
    assert a.row("input") == (RowVariable("v", "input"), h * w)
    assert [k for k, _ in a.rows()] == ["batch", "input", "output"]


def test_constants_collect_fixed_sizes_coefficients_offsets_and_divisors():
    assert parse_annotation("3, 2*h + 5, (T + 1) // 4").constants == {1, 2, 3, 4, 5}
    assert parse_annotation("B T").constants == frozenset()


def test_row_variable_keys():
    # named row variables are one variable in every row; `...` is one per row kind
    assert RowVariable("v", "batch").key == RowVariable("v", "output").key == "v"
    assert RowVariable(None, "batch").key == "...batch"
    assert RowVariable(None, "batch").key != RowVariable(None, "output").key
    assert str(RowVariable(None)) == "..." and str(RowVariable("v")) == "..v.."


def test_a_deferred_size_s_repr_is_the_same_under_every_hash_seed():
    """``repr`` of an annotation with ``min(a, b, c)`` (pytest's assertion output, a debugger)
    must not show the names it reads as a frozenset, in ``PYTHONHASHSEED``'s order."""
    code = ("from tensig.core.notation import parse_annotation\n"
            "print(repr(parse_annotation('B, min(a, b, c)')))\n")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True, env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout
            for seed in range(3)}
    assert len(outs) == 1 and "Deferred(text='min(a, b, c)')" in outs.pop(), outs


def test_equality_ignores_text_and_spans_and_the_parse_is_cached():
    assert parse_annotation("B T") == AnnotationShape(output=(B, T))
    assert hash(parse_annotation("B T")) == hash(AnnotationShape(output=(B, T)))
    assert parse_annotation("B T d") is parse_annotation("B T d")


NAMES = ["B", "T", "d", "batch", "h", "w"]
EXPRS = ["T + 1", "2*h", "h*w", "T - 1", "(T + 1) // 2", "3*B + 2"]
item = st.one_of(
    st.sampled_from(NAMES).map(Dim.symbol),
    st.integers(0, 40),
    st.just(Any),
    st.sampled_from(EXPRS).map(Dim.parse),
    st.sampled_from(NAMES + EXPRS).map(lambda t: Broadcastable(Dim.parse(t))),
    st.integers(0, 40).map(Broadcastable),
)


@st.composite
def rows(draw, kind):
    items = draw(st.lists(item, max_size=4))
    if draw(st.booleans()):
        name = draw(st.sampled_from([None, "u", "v"]))
        broadcast = name is not None and draw(st.booleans())
        items.insert(draw(st.integers(0, len(items))), RowVariable(name, kind, broadcast))
    return tuple(items)


@given(rows("batch"), rows("input"), rows("output"))
def test_any_annotation_prints_to_text_that_parses_back_equal(batch, inp, out):
    a = AnnotationShape(batch, inp, out)
    assert parse_annotation(str(a)) == a


# --------------------------------------------------------------------------------------------
# syntax errors: a caret under the problem, and a hint
# --------------------------------------------------------------------------------------------

ERRORS = [
    # text, column (0-based), reason fragment, hint fragment
    ("B ##T", 3, "'#' twice", None),
    ("*4", 0, "a variadic '*' takes a name", None),
    ("#_", 0, "both anonymous and broadcastable", None),
    ("?b", 0, "unexpected character '?'", "PyTree"),
    ("B {n", 2, "unbalanced", None),
    ("B, , T", 2, "empty axis between commas", "remove the extra comma"),
    ("..b.. ..c..", 6, "at most one row variable", "another row"),
    ("a^b", 1, "unexpected character '^'", "concatenation"),
    ("o<+k", 1, "unexpected character '<'", "convolution"),
    ("ij;jk", 2, "unexpected character ';'", "einsum spec"),
    ("i=>j", 1, "'=>' belongs in einsum specs", None),
    ("B, -1", 3, "cannot be negative", None),
    ("..B.., B", 7, "both as a size and as the row variable", "rename"),
    ("B/2", 1, "unexpected character '/'", "//"),
    ("B.", 1, "unexpected character '.'", None),
    (". B", 0, "a lone '.'", "*name"),
    (".._..", 0, "needs a name", "..."),
    ("B->T->d", 4, "at most one '->'", None),
    ("B|T|d", 3, "at most one '|'", None),
    ("T->B|d", 4, "batch row comes first", None),
    ("$x, B", 0, "not a size name", None),
    ("..b..T, d", 5, "a row variable is a whole item", "..b.., T, d"),
    ("B T>", 3, "'>' is only valid", None),
    ("B, T @ d", 5, "unexpected character '@'", None),
]


@pytest.mark.parametrize("text, column, reason, hint", ERRORS)
def test_syntax_errors_point_at_the_problem(text, column, reason, hint):
    with pytest.raises(SpecSyntaxError) as info:
        parse_annotation(text)
    e = info.value
    assert isinstance(e, ValueError)
    assert e.spec == text and e.column == column
    assert reason in e.reason
    if hint is not None:
        assert hint in (e.hint or "")
    lines = str(e).splitlines()
    assert lines[1].strip() == text.strip()
    assert lines[2].index("^") - lines[1].index(text.strip()[0]) == column - (
        len(text) - len(text.lstrip()))


def test_non_string_annotation_is_a_type_error():
    with pytest.raises(TypeError, match="is a str"):
        parse_annotation(3)  # type: ignore[arg-type]


def test_words_hint_explains_a_compact_word_is_one_axis():
    hint = words_hint(parse_annotation("BTd"))
    assert hint is not None and "one axis named BTd" in hint and "'B T d'" in hint
    assert words_hint(parse_annotation("batch")) is None  # a word, plainly meant
    assert words_hint(parse_annotation("B T d")) is None
    assert words_hint(parse_annotation("batch seq")) is None


# --------------------------------------------------------------------------------------------
# Shaped / Float / Int / Bool
# --------------------------------------------------------------------------------------------


def test_shaped_is_an_annotated_alias_of_the_array_type():
    hint = Shaped[np.ndarray, "B T d"]
    assert typing.get_origin(hint) is Annotated
    assert typing.get_args(hint)[0] is np.ndarray
    marker = hint.__metadata__[0]
    assert marker == ShapeSpecMarker(parse_annotation("B T d"), None)
    assert marker.text == "B T d" and repr(marker) == "Shaped['B T d']"


@pytest.mark.parametrize("family, kind", [(Shaped, None), (Float, "float"), (Int, "int"),
                                          (Bool, "bool")])
def test_dtype_families_attach_their_kind(family, kind):
    marker = family[np.ndarray, "B"].__metadata__[0]
    assert marker.dtype == kind


def test_get_type_hints_shows_the_markers_and_hides_them_without_extras():
    def f(x: Float[np.ndarray, "B T d"], mask: Bool[np.ndarray, "B T"]) -> Float[np.ndarray, "B d"]:
        ...

    hints = typing.get_type_hints(f, include_extras=True, localns=locals())
    assert hints["x"].__metadata__[0] == ShapeSpecMarker(parse_annotation("B T d"), "float")
    assert hints["mask"].__metadata__[0].dtype == "bool"
    assert hints["return"].__metadata__[0].shape.output == (B, d)
    assert typing.get_type_hints(f, localns=locals())["x"] is np.ndarray


def test_bad_subscripts_and_bad_specs_fail_at_definition_time():
    with pytest.raises(TypeError, match="array type and a shape string"):
        Float[np.ndarray]  # type: ignore[misc]
    with pytest.raises(SpecSyntaxError):
        Float[np.ndarray, "B, , 16"]


def test_an_annotation_shape_can_be_passed_directly():
    a = parse_annotation("B, T+1")
    assert Float[np.ndarray, a].__metadata__[0].shape is a


# --------------------------------------------------------------------------------------------
# dtype kinds
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, kind", [
    ("float16", "float"), ("float32", "float"), ("float64", "float"), ("int8", "int"),
    ("uint16", "int"), ("int64", "int"), ("bool", "bool"), ("complex64", "complex"),
    ("U3", "other"), ("datetime64[s]", "other"),
])
def test_numpy_dtype_kinds(dtype, kind):
    assert dtype_kind(np.dtype(dtype)) == kind
    assert dtype_kind(np.zeros(1, dtype).dtype) == kind


def test_torch_dtype_kinds():
    torch = pytest.importorskip("torch")
    assert [dtype_kind(t) for t in (torch.float32, torch.bfloat16, torch.float16)] == \
        ["float"] * 3
    assert [dtype_kind(t) for t in (torch.int8, torch.uint8, torch.int64)] == ["int"] * 3
    assert dtype_kind(torch.bool) == "bool" and dtype_kind(torch.complex64) == "complex"


def test_jax_and_ml_dtypes_kinds():
    jnp = pytest.importorskip("jax.numpy")
    assert dtype_kind(jnp.zeros(2, jnp.bfloat16).dtype) == "float"
    assert dtype_kind(jnp.zeros(2, jnp.int32).dtype) == "int"
    assert dtype_kind(jnp.zeros(2, bool).dtype) == "bool"
    assert dtype_kind(jnp.float32) == "float"  # a jax scalar type


# --------------------------------------------------------------------------------------------
# reading a function's signature
# --------------------------------------------------------------------------------------------


def test_signature_of_reads_parameters_positions_and_results():
    def f(self, x: Float[np.ndarray, "B T d"], n: int, /, mask: Bool[Any, "B T"] | None = None,
          *, k: Int[np.ndarray, "B"], z: Shaped[Any, "_"] | None = None
          ) -> tuple[Float[np.ndarray, "B d"], int]:
        ...

    sig = signature_of(f, localns=locals())
    assert [(p.name, p.position, p.optional) for p in sig.parameters] == [
        ("x", 1, False), ("mask", 3, True), ("k", None, False), ("z", None, True)]
    assert sig.result == (ShapeSpecMarker(parse_annotation("B d"), "float"), None)
    assert sig.names == ("B", "T", "d")
    assert [label for label, _ in sig.markers()] == ["x", "mask", "k", "z", "return[0]"]


def test_a_none_default_makes_a_parameter_optional():
    def f(x: Float[np.ndarray, "B"] = None) -> typing.Union[Float[np.ndarray, "B"], None]:  # noqa: UP007
        ...

    sig = signature_of(f)
    assert sig.parameters[0].optional and sig.result_optional


def test_a_name_cannot_be_a_size_in_one_annotation_and_a_row_variable_in_another():
    def f(x: Float[np.ndarray, "B T"], y: Float[np.ndarray, "..B.., d"]): ...

    with pytest.raises(SpecSyntaxError, match=r"'y' uses \.\.B\.\. as a row variable, but 'x'"):
        signature_of(f)


def test_unresolvable_annotations_say_so():
    def f(x: Float[Undefined, "B"]): ...

    with pytest.raises(TypeError, match=r"cannot read the annotations of .*Undefined"):
        signature_of(f)


def test_beartype_sees_the_plain_array_type():
    beartype = pytest.importorskip("beartype").beartype
    roar = pytest.importorskip("beartype.roar")

    @beartype
    def f(x: Float[np.ndarray, "B T"]) -> Float[np.ndarray, "B"]:
        return x.sum(1)

    assert f(np.zeros((2, 3))).shape == (2,)
    with pytest.raises(roar.BeartypeCallHintParamViolation):
        f([1.0])  # not an ndarray: beartype's own check, the shape string is metadata to it


# --------------------------------------------------------------------------------------------
# signature strings for verify (issue 13, section 6): operands read as annotations
# --------------------------------------------------------------------------------------------


def test_signature_strings_take_size_expressions():
    from tensig.check.verify import Signature, verify

    sig = Signature.parse("T, d; d, 3*d => T, 3*d")
    assert sig.args == ((T, d), (d, 3 * d)) and sig.results == ((T, 3 * d),)
    assert verify(lambda x, w: x @ w, sig).ok
    report = verify(lambda x, w: x @ w, "T, d; d, 3*d => T, d")
    assert "returns [T, 3*d] but the signature declares [T, d]" in report.findings[0].message
    # a word is one axis, as in annotations
    assert Signature.parse("n_seq n_embd =>").args == ((Dim.symbol("n_seq"),
                                                         Dim.symbol("n_embd")),)


def test_signature_strings_take_dtypes_and_tuple_results():
    from tensig.check.verify import Signature, verify

    sig = Signature.parse("B T: int; V d => B T d; B")
    assert sig.kinds == ("i", "f") and sig.results == ((B, T, d), (B,))
    assert Signature.parse("B T: bool; V d: float32").kinds == ("b", "f")

    def embed(ids, wte):
        return wte[ids], ids.sum(-1)

    assert verify(embed, sig).ok
    report = verify(embed, "B T: int; V d => B T d; T")
    assert "returns [B] but the signature declares [T]" in report.findings[0].message
    with pytest.raises(SpecSyntaxError) as info:
        Signature.parse("B T: integr; V d")
    assert info.value.column == 5 and "unknown dtype 'integr'" in info.value.reason
    with pytest.raises(SpecSyntaxError) as info:
        Signature.parse("B T; V, , d")
    assert info.value.column == 7  # the caret points into the whole signature


# --------------------------------------------------------------------------------------------
# the layer rule: annotations are core, the checker that answers isinstance is not
# --------------------------------------------------------------------------------------------


def test_annotations_import_nothing_from_a_later_layer():
    """``core/annotations.py`` reads no module above the core, not even inside a function:
    ``isinstance`` reaches the checker through the hook the checker installs."""
    import ast
    import pathlib

    import tensig.core.annotations as mod

    tree = ast.parse(pathlib.Path(mod.__file__).read_text())
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    later = [m for m in imported if m.startswith("tensig") and not m.startswith("tensig.core")]
    assert later == []


def test_isinstance_works_when_only_the_core_module_is_imported():
    """A fresh interpreter importing just ``tensig.core.annotations`` still answers isinstance
    (importing the package installs the checker)."""
    import subprocess
    import sys

    code = ("import numpy as np\nfrom tensig.core.annotations import Float\n"
            "print(isinstance(np.zeros((2, 3)), Float[np.ndarray, 'a b']),"
            " isinstance(np.zeros((2,)), Float[np.ndarray, 'a b']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["True", "False"]


# --------------------------------------------------------------------------------------------
# one parser, two modes: what both read, they read alike
# --------------------------------------------------------------------------------------------

AXIS_NAMES = ["B", "T", "dd", "batch", "n_embd", "αβ"]


@st.composite
def shared_rows(draw):
    """Rows both modes read: comma-separated names and at most one row variable per row."""
    rows = []
    for least in (0, 0, 2):  # batch, input, output
        items = draw(st.lists(st.sampled_from(AXIS_NAMES), min_size=least, max_size=3))
        if draw(st.booleans()):
            var = draw(st.sampled_from(["...", "..u..", "..v..", "..λ.."]))
            items.insert(draw(st.integers(0, len(items))), var)
        rows.append(", ".join(items))
    return "{}|{}->{}".format(*rows)


def _spec_items(row):
    out = [a.name for a in row.left]
    if row.var is not None:
        out.append(("var", row.var.name))
    return out + [a.name for a in row.right]


def _spec_spans(row):
    return [a.span for a in row.left] + ([row.var.span] if row.var else []) + \
        [a.span for a in row.right]


def _annotation_items(row):
    return [("var", x.name) if isinstance(x, RowVariable) else str(x) for x in row]


@settings(max_examples=150)
@given(shared_rows())
def test_annotation_and_spec_modes_read_shared_syntax_alike(text):
    """The same text of names and row variables, read by the notation's parser in its spec
    mode (an independent reading: Labels and RowVars) and in its annotation mode: the same
    items, row by row, at the same columns."""
    spec, ann = parse_shape_spec(text), parse_annotation(text)
    for i, (kind, row) in enumerate(spec.rows()):
        assert _spec_items(row) == _annotation_items(ann.row(kind)), kind
        assert _spec_spans(row) == list(ann.spans[i]), kind


@pytest.mark.parametrize("text, column, reason", [
    ("a, ..u.., ..v..", 10, "at most one row variable"),
    ("..u.., T|..w.., ..x..->d, e", 16, "at most one row variable"),
    ("..u.., T|u->d, e", 9, "both as a"),
    ("..ab.., cd, .._..", 12, "needs a name"),
])
def test_both_modes_refuse_shared_mistakes_at_the_same_column(text, column, reason):
    """The rules both modes share (one row variable per row, a name is a size or a row
    variable, a row variable has a name) raise from one place: same column, same reason."""
    errors = []
    for parse in (parse_shape_spec, parse_annotation):
        with pytest.raises(SpecSyntaxError) as info:
            parse(text)
        errors.append(info.value)
    assert [e.column for e in errors] == [column, column]
    assert all(reason in e.reason for e in errors)
    assert errors[0].hint and errors[1].hint


def test_annotation_row_variables_follow_the_lexical_rules():
    """Names in annotations are the notation's names (any script), row variables included;
    an unterminated one says so."""
    a = parse_annotation("..αβ.., d")
    assert a.output == (RowVariable("αβ"), Dim.symbol("d"))
    assert parse_annotation(str(a)) == a
    with pytest.raises(SpecSyntaxError, match="unterminated row variable") as info:
        parse_annotation("B ..v")
    assert info.value.column == 2 and "*name" in (info.value.hint or "")
