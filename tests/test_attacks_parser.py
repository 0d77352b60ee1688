"""Attacks on the parser and the solver (issue 12, section 2, items 1-8).

Every bad spec or shape must end in ``SpecSyntaxError``, ``ShapeError``, ``InconclusiveError``
or a ``TypeError`` for a wrong argument type, quickly, whatever the input.  Each reproduction of
the issue is a test here; the ones that hung or blew up before run in a child interpreter under
a time and memory limit (``tests/limits.py``), so a regression fails the test instead of taking
the session down.  The last test is a seeded fuzz of random multichar specs *with* random
shapes (concrete and symbolic): ``TENSIG_FUZZ_EXAMPLES=20000`` runs it longer, and
``TENSIG_FUZZ_SEED=n`` draws other examples than the fixed ones CI runs.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, seed, settings
from hypothesis import strategies as st

import tensig as ts
from limits import SRC, alarm, assert_clean_error, run_limited
from tensig import InconclusiveError, Shape, ShapeError, SpecSyntaxError, dim
from tensig.cli import main
from tensig.core import notation
from tensig.core.dims import Dim
from tensig.core.notation import Fixed, Label, Spec

EXPECTED = (SpecSyntaxError, ShapeError, InconclusiveError, TypeError)


def syntax_error(text: str) -> SpecSyntaxError:
    with pytest.raises(SpecSyntaxError) as e:
        ts.parse(text)
    return e.value


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["spec", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_clean_cli_error(capsys, *argv: str, error: str) -> None:
    """``tensig spec`` exits 1 with the error's name and reason first, no traceback."""
    code, _, err = cli(capsys, *argv)
    assert code == 1
    assert "Traceback" not in err
    assert err.startswith(f"{error}: ")


# -- 1. Unicode letters are axis names, in both modes ------------------------------------------


def test_greek_letters_are_axes_in_both_modes():
    single = ts.parse("αβ;βγ=>αγ")
    multi = ts.parse("α, β; β, γ => α, γ")
    assert not is_multichar_text(single) and is_multichar_text(multi)
    assert single == multi
    assert single.labels == {"α", "β", "γ"}
    assert ts.parse(str(single)) == single
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    r = ts.infer("αβ;βγ=>αγ", a.shape, b.shape)
    assert r.shape == Shape(output=np.einsum("ab,bc->ac", a, b).shape)
    assert dict(r.dims) == {"α": 2, "β": 3, "γ": 4}
    np.testing.assert_array_equal(ts.einsum("αβ;βγ=>αγ", a, b), a @ b)


def is_multichar_text(spec: Spec) -> bool:
    return notation.is_multichar(spec.text)


def test_accented_multichar_identifier():
    spec = ts.parse("é, j => j")
    assert spec.labels == {"é", "j"}
    assert ts.infer("é, j => j", (2, 3)).dims == {"é": 2, "j": 3}
    assert ts.parse("énergie, j => énergie").operands[0].output.right[0] == Label("énergie")


def test_accented_spec_through_the_cli(capsys):
    code, out, err = cli(capsys, "é, j => j", "2,3")
    assert code == 0, err
    assert "result shape: 3" in out and "é = 2" in out


NAME_CHARS = st.characters(categories=["Lu", "Ll", "Lo", "Nd", "No", "Mn", "Pc"])


@settings(max_examples=300)
@given(st.text(NAME_CHARS, min_size=1, max_size=4))
def test_multichar_names_follow_python_identifiers(name):
    """``name`` in a multichar row is a label exactly when Python would take it as an
    identifier, a fixed index when it is ASCII digits, and a caret otherwise."""
    text = f"{name}, q => q"
    if name.isidentifier() and name != "_":
        assert ts.parse(text).operands[0].output.right[0] == Label(name)
    elif name.isascii() and name.isdigit():
        assert ts.parse(text).operands[0].output.right[0] == Fixed(int(name))
    elif name != "_":
        e = syntax_error(text)
        assert 0 <= e.column < len(name)


def test_single_char_mode_names_are_identifier_starts():
    assert ts.parse("ΩЖ=>Ж").labels == {"Ω", "Ж"}
    e = syntax_error("e\u0301=>e")  # a decomposed é: the accent alone is no axis
    assert e.column == 1 and "combining" in e.reason and "NFC" in e.hint


def test_dims_read_the_same_names():
    assert dim("α + 1").symbols == {"α"}
    assert Shape.parse("α, β+1").output == (dim("α"), dim("β") + 1)


# -- 2. only ASCII digits are numbers ----------------------------------------------------------


@pytest.mark.parametrize("text, column", [
    ("²=>²", 0), ("i１=>i", 1), ("٣=>٣", 0), ("a, ٣ => a", 3), ("a, 1٣ => a", 4),
    ("a, x => a²", 9),
])
def test_non_ascii_numerals_are_refused_with_a_caret(text, column):
    e = syntax_error(text)
    assert e.column == column
    assert "only the ASCII digits 0-9" in e.reason


@pytest.mark.parametrize("text", ["²", "٣ + 1", "T**²", "１"])
def test_non_ascii_numerals_in_dimensions(text):
    with pytest.raises(SpecSyntaxError, match="ASCII digits"):
        Dim.parse(text)
    with pytest.raises(SpecSyntaxError, match="ASCII digits"):
        ts.infer("i=>i", text)


def test_non_ascii_numeral_through_the_cli(capsys):
    assert_clean_cli_error(capsys, "²=>²", error="SpecSyntaxError")


# -- 3. literal sizes are bounded --------------------------------------------------------------


def test_huge_literal_is_a_syntax_error_before_conversion():
    e = syntax_error("a, " + "9" * 5000 + " => a")
    assert "at most 2**63" in e.reason and "5000-digit" in e.reason
    assert (e.column, e.end) == (3, 5003)


def test_literal_bound_is_2_to_the_63():
    ok = ts.parse(f"a, {2**63} => a")
    assert ok.operands[0].output.right[1] == Fixed(2**63)
    assert ts.parse("a, 000000000000000000000000000007 => a").operands[0].output.right[1] == \
        Fixed(7)
    with pytest.raises(SpecSyntaxError, match=r"at most 2\*\*63"):
        ts.parse(f"a, {2**63 + 1} => a")
    with pytest.raises(SpecSyntaxError, match=r"at most 2\*\*63"):
        Dim.parse(str(2**63 + 1))
    with pytest.raises(SpecSyntaxError, match=r"at most 2\*\*63"):
        ts.infer("i=>i", "9" * 5000)


def test_huge_literal_through_the_cli(capsys):
    assert_clean_cli_error(capsys, "a, " + "9" * 5000 + " => a", error="SpecSyntaxError")


# -- 4. labels nothing sizes: no AssertionError --------------------------------------------------


def test_padded_kernel_nothing_sizes():
    with pytest.raises(ShapeError) as e:
        ts.infer("o=+k => o", (5,))
    assert e.value.label == "k"
    assert "'o=+k' is padded" in e.value.reason and "sizes={'k': ...}" in e.value.hint
    # Given, the kernel is fine: the padded output keeps the input's size.
    assert ts.infer("o=+k => o", (5,), sizes={"k": 3}).shape == Shape(output=(5,))


def test_concatenation_components_nothing_sizes():
    with pytest.raises(ShapeError) as e:
        ts.infer("a^b => ", (6,))
    assert "'a', 'b'" in e.value.reason and "sum of its components (6)" in e.value.reason
    assert e.value.span == (0, 3)
    assert ts.infer("a^b => ", (6,), sizes={"a": 2}).dims == {"a": 2, "b": 4}


def test_valid_convolution_with_neither_part_known():
    with pytest.raises(ShapeError, match=r"'o', 'k'.*together"):
        ts.infer("o<+k => ", (5,))


def test_undetermined_labels_through_the_cli(capsys):
    assert_clean_cli_error(capsys, "o=+k => o", "5", error="ShapeError")
    assert_clean_cli_error(capsys, "a^b => ", "6", error="ShapeError")


# -- 5. a size-0 kernel, or an input too small for the kernel ---------------------------------


def test_size_0_kernel_is_named():
    with pytest.raises(ShapeError) as e:
        ts.infer("o<+2*k; k => o", (4,), (0,))
    msg = str(e.value)
    assert "negative" not in msg
    assert "the kernel 'k' has size 0" in e.value.reason


def test_input_smaller_than_the_kernel_span_gives_the_sizes():
    with pytest.raises(ShapeError) as e:
        ts.infer("o<+2*k; k => o", (4,), (3,))
    assert "input size 4 is smaller than the kernel's span 5 (kernel 3, dilation 2)" in \
        e.value.reason


def test_valid_convolution_with_no_outputs_is_named():
    with pytest.raises(ShapeError, match="0 outputs: a valid convolution"):
        ts.infer("2*o<+k; k => o", ts.Shape(output=(dim("T"),)), (3,), result=(0,))


def test_size_0_kernel_through_the_cli(capsys):
    assert_clean_cli_error(capsys, "o<+2*k; k => o", "4", "0", error="ShapeError")


# -- 6. exponents and polynomial sizes are bounded (run limited: they used to hang) ------------


def test_tower_exponent_shape_string_returns_an_error():
    assert_clean_error("""
        import tensig as ts
        try:
            ts.infer("i=>i", "9**9**9")
        except ts.SpecSyntaxError as e:
            assert "exponent of 387420489" in e.reason, e
            print(type(e).__name__)
    """, "SpecSyntaxError")


def test_tower_exponent_through_the_cli():
    out = run_limited(f"""
        import sys
        sys.path.insert(0, {SRC!r})
        from tensig.cli import main
        sys.exit(main(["spec", "i=>i", "9**9**9"]))
    """)
    assert not out.timed_out
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith("SpecSyntaxError: dimension expression too large")


@pytest.mark.parametrize("text", ["(T+1)**3000", "(A+B+C+1)**64", "T**64*T",
                                  "((((9**64)**64)**64)**64)**64"])
def test_large_polynomials_in_shape_strings(text):
    assert_clean_error(f"""
        import tensig as ts
        try:
            ts.infer("i=>i", {text!r})
        except ts.SpecSyntaxError as e:
            assert "too large" in e.reason, e
            print(type(e).__name__)
    """, "SpecSyntaxError")


def test_large_polynomials_in_dim_arithmetic():
    assert_clean_error("""
        import tensig as ts
        T, A, B = ts.dims("T A B")
        for make in (lambda: (T + 1)**3000, lambda: (A + B + T + 1)**64,
                     lambda: ts.dim(9)**(9**9), lambda: T**64 * T):
            try:
                make()
            except ts.ShapeError as e:
                assert "too large" in e.reason, e
            else:
                raise AssertionError("no error")
        print("ShapeError")
    """, "ShapeError")


def test_bounded_sizes_still_work():
    T = dim("T")
    assert Dim.parse("(T+1)**64") == (T + 1) ** 64
    assert Dim.parse("(T+1)**64").degree == 64
    assert Dim.parse("2**64").constant == 2**64
    assert Shape.parse("B, (T+1)**2").output == (dim("B"), T**2 + 2 * T + 1)


def test_high_degree_comparisons_stay_bounded():
    """Deciding a sign expands every size as ``1 + y``; a product of many high powers is
    undecided rather than expanded into millions of terms."""
    assert_clean_error("""
        import tensig as ts
        from tensig.core.dims import Dim
        d = Dim.parse("(A*B*C*D*E*F*G*H)**8")
        try:
            print(d >= 1)
        except ts.InconclusiveError as e:
            print(type(e).__name__)
    """, "True", "InconclusiveError")


# -- 7. nesting depth --------------------------------------------------------------------------


@pytest.mark.parametrize("text, column", [("(" * 5000 + "3" + ")" * 5000, 64),
                                          ("-" * 5000 + "3", 64), ("T" + "**1" * 5000, 192)])
def test_deep_nesting_is_a_syntax_error(text, column):
    with pytest.raises(SpecSyntaxError, match="nests deeper than 64 levels") as e:
        ts.infer("i=>i", text)
    assert e.value.column == column
    assert Dim.parse("(" * 60 + "3" + ")" * 60) == 3


def test_deep_nesting_through_the_cli(capsys):
    assert_clean_cli_error(capsys, "i=>i", "(" * 5000 + "3" + ")" * 5000,
                           error="SpecSyntaxError")


# -- 8. many operands: linear work ---------------------------------------------------------------


def test_many_operands_build_each_shape_spec_a_bounded_number_of_times(monkeypatch):
    """The work counter: how many operand shape specs inference materializes.  It rebuilt the
    list of all ``n + 1`` shapes once per operand (``n**2`` in all, 4*10**8 at n = 2*10**4)."""
    built = [0]
    shapes = Spec.shapes

    def counting(self):
        out = shapes(self)
        built[0] += len(out)
        return out

    monkeypatch.setattr(Spec, "shapes", counting)
    n = 2000
    r = ts.infer(";".join(["i"] * n) + "=>i", *[(3,)] * n)
    assert r.shape == Shape(output=(3,))
    assert built[0] <= 4 * (n + 1)


def test_twenty_thousand_operands_in_a_limited_child():
    """A bound on damage, not a speed assertion: a linear solve takes a few seconds."""
    assert_clean_error("""
        import tensig as ts
        n = 20_000
        r = ts.infer(";".join(["i"] * n) + "=>i", *[(3,)] * n)
        assert r.shape == ts.Shape(output=(3,))
        print("ok")
    """, "ok", timeout=180)


# -- the fuzz: random multichar specs with random shapes ----------------------------------------
#
# A drawn problem is coherent by construction: every label gets a size (an int or a symbolic
# Dim), every operand axis the size the spec implies (an affine axis ``s*(o - 1) + 1 +
# d*(k - 1)`` or ``s*o``, a concatenation the sum of its parts, a row variable one fill per
# spec), and the expected result shape follows.  Then, often, something is broken: a size
# changed, an axis dropped or added, an operand missing or extra, a character inserted into the
# spec.  An unbroken problem must give exactly the expected shape (the generator is the oracle);
# a broken one a result or one of the four errors.

FUZZ_EXAMPLES = int(os.environ.get("TENSIG_FUZZ_EXAMPLES", "300"))
FUZZ_SEED = os.environ.get("TENSIG_FUZZ_SEED")
LABELS = ["a", "b", "o", "k", "s2", "α", "é"]
SYMBOLIC = [dim("T"), dim("T") + 1, 2 * dim("B"), dim("B") * dim("T"), dim("(T + 1) // 2")]
ODD_TEXT = ["²", "٣", "\u0301", "=", "<", "^", "*", "+", ",", ";", "|", "->", "..", "_", " ",
            "9" * 25, "(", "ø", "0*", "..v.."]
ODD_SIZES = [-1, 0, 1, 2**63, dim("T") - 1, dim("T") ** 2, dim("X")]


class Problem:
    """One drawn problem: the spec's text, the operands, keyword arguments, the oracle."""

    def __init__(self, rnd):
        self.rnd = rnd
        self.kw = {}
        self.seen = set()  # labels the spec mentions
        names = rnd.sample(LABELS, rnd.randint(1, len(LABELS)))
        self.size = {n: self.label_size() for n in names}
        self.fills = {}  # row variable -> its axes' sizes
        self.used_vars = set()
        self.plain = set()  # labels some operand gives as a plain axis
        ops = [self.shape(operand=True) for _ in range(rnd.randint(1, 3))]
        result = self.shape(operand=False)
        # Labels no operand gives as a plain axis (kernels, components, result-only): given.
        sizes = {n: self.size[n] for n in sorted(self.seen - self.plain)}
        if sizes:
            self.kw["sizes"] = sizes
        self.text = "; ".join(t for t, _ in ops) + " => " + result[0]
        if "," not in self.text:
            self.text += ","  # stay in the multichar mode
        self.operands = [Shape(**rows) for _, rows in ops]
        self.expected = Shape(**{k: self.resolve(v) for k, v in result[1].items()})
        self.broken = False

    def label_size(self):
        r = self.rnd.random()
        return self.rnd.randint(1, 5) if r < 0.75 else self.rnd.choice(SYMBOLIC)

    def axis(self, operand: bool) -> tuple[str, object]:
        rnd, size = self.rnd, self.size
        names = list(size)
        kind = rnd.choice(["label"] * 4 + ["_", "int", "affine", "offset", "concat"])
        if kind == "_" and operand:
            return "_", rnd.randint(1, 4)
        if kind == "int":
            i = rnd.randint(0, 3)
            return str(i), (rnd.randint(i + 1, i + 3) if operand else i + 1)
        if kind == "concat":
            parts = [rnd.choice([*names, "1", "2"]) for _ in range(rnd.randint(2, 3))]
            self.seen.update(p for p in parts if p in size)
            total = sum((size[p] if p in size else int(p) for p in parts), 0)
            return "^".join(parts), total
        if kind in ("affine", "offset") and operand:
            o = rnd.choice(names)
            self.seen.add(o)
            stride = rnd.choice([1, 2, "stride"])
            s = 3 if stride == "stride" else stride
            if stride == "stride":
                self.kw["params"] = {"stride": 3}
            out = o if stride == 1 else f"{stride}*{o}"
            if kind == "offset":
                return f"{out}+{rnd.randint(0, 2)}", s * size[o]
            k, d = rnd.choice(names), rnd.choice([1, 2])
            self.seen.add(k)
            ker = k if d == 1 else f"{d}*{k}"
            op = rnd.choice(["<+", "=+", "+"])
            if op == "+":
                self.kw.setdefault("use_padding", rnd.random() < 0.5)
                op = "=+" if self.kw["use_padding"] else "<+"
                text = f"{out}+{ker}"
            else:
                text = f"{out}{op}{ker}"
            if op == "=+":
                return text, s * size[o]
            return text, s * (size[o] - 1) + 1 + (size[k] - 1) * d
        name = rnd.choice(names)
        self.seen.add(name)
        if operand:
            self.plain.add(name)
        return name, size[name]

    def row(self, kind: str, operand: bool) -> tuple[str, list]:
        rnd = self.rnd
        items = [self.axis(operand) for _ in range(rnd.randint(0, 3))]
        var = rnd.choice([None, None, "...", "..v..", "..w.."])
        if var is not None:
            key = var if var != "..." else f"...{kind}"
            if operand:
                self.used_vars.add(key)
                fill = self.fills.setdefault(key, [self.label_size()
                                                   for _ in range(rnd.randint(0, 2))])
            else:
                fill = key
            items.insert(rnd.randint(0, len(items)), (var, fill))
        texts = [t for t, _ in items]
        sizes = []
        for t, v in items:
            if t in ("...", "..v..", "..w.."):
                sizes += v if isinstance(v, list) else [v]
            else:
                sizes.append(v)
        return ", ".join(texts), sizes

    def shape(self, operand: bool) -> tuple[str, dict]:
        rnd = self.rnd
        form = rnd.choice(["output", "output", "input", "full"])
        rows = {}
        out_text, rows["output"] = self.row("output", operand)
        text = out_text
        for kind, sep in (("input", "->"), ("batch", "|")):
            if form == "full" or (form == "input" and kind == "input"):
                t, rows[kind] = self.row(kind, operand)
                text = t + sep + text
            else:  # an omitted row is the context ellipsis of its kind
                key = f"...{kind}"
                if operand:
                    self.used_vars.add(key)
                    rows[kind] = self.fills.setdefault(key, [self.label_size() for _ in
                                                             range(rnd.randint(0, 2))])
                else:
                    rows[kind] = [key]
        return text, rows

    def resolve(self, sizes: list) -> list:
        """A result row's sizes: row variables the operands never bound are empty."""
        out = []
        for v in sizes:
            if isinstance(v, str):
                out += self.fills.get(v, []) if v in self.used_vars else []
            else:
                out.append(v)
        return out

    def break_it(self) -> None:
        """Often, damage one thing; the oracle no longer applies."""
        rnd = self.rnd
        what = rnd.choice(["none"] * 4 + ["size", "axis", "count", "text", "result"])
        if what == "none":
            return
        self.broken = True
        ops = self.operands
        if what == "size" and ops:
            i = rnd.randrange(len(ops))
            rows = {k: list(ops[i].row(k)) for k in ("batch", "input", "output")}
            kind = rnd.choice([k for k in rows if rows[k]] or ["output"])
            if rows[kind]:
                rows[kind][rnd.randrange(len(rows[kind]))] = rnd.choice(ODD_SIZES)
            ops[i] = tuple(rows["output"]) if not rows["batch"] and not rows["input"] and \
                rnd.random() < 0.5 else _shape_or_tuple(rows)
        elif what == "axis" and ops:
            i = rnd.randrange(len(ops))
            rows = {k: list(ops[i].row(k)) for k in ("batch", "input", "output")}
            kind = rnd.choice(list(rows))
            if rows[kind] and rnd.random() < 0.5:
                rows[kind].pop(rnd.randrange(len(rows[kind])))
            else:
                rows[kind].insert(0, rnd.randint(1, 4))
            ops[i] = Shape(**rows)
        elif what == "count":
            if ops and rnd.random() < 0.5:
                ops.pop()
            else:
                ops.append(Shape(output=(rnd.randint(1, 4),)))
        elif what == "text":
            at = rnd.randint(0, len(self.text))
            self.text = self.text[:at] + rnd.choice(ODD_TEXT) + self.text[at:]
        else:
            self.kw["result"] = rnd.choice([(rnd.randint(0, 4),), "T, 2", Shape(input=(1,))])


def _shape_or_tuple(rows: dict):
    try:
        return Shape(**rows)
    except ShapeError:  # a negative size: a tuple carries it to infer as is
        return tuple(rows["output"])


def damage_bound(seconds: int):
    """Fail an example that runs away (a hang would otherwise stop the suite); generous, so
    it never measures speed."""
    return alarm(seconds, f"an inference ran for more than {seconds} s")


def fuzz_settings(f):
    f = settings(max_examples=FUZZ_EXAMPLES, derandomize=FUZZ_SEED is None, database=None,
                 deadline=None, suppress_health_check=list(HealthCheck))(f)
    return seed(int(FUZZ_SEED))(f) if FUZZ_SEED is not None else f


def solve(problem: Problem):
    """``infer`` on the problem, under the damage bound: the answer or the expected error."""
    with damage_bound(20):
        try:
            return ts.infer(problem.text, *problem.operands, **problem.kw)
        except EXPECTED as e:
            return e


@fuzz_settings
@given(st.randoms(use_true_random=False))
def test_fuzz_specs_with_shapes(rnd):
    problem = Problem(rnd)
    problem.break_it()
    note(f"infer({problem.text!r}, *{problem.operands!r}, **{problem.kw!r})")
    r = solve(problem)
    if not problem.broken:
        assert not isinstance(r, Exception), r
        assert r.shape == problem.expected
    if isinstance(r, Exception):
        return
    spec = ts.parse(problem.text)
    assert ts.parse(str(spec)) == spec
    assert len(r.layout) == len(problem.operands) + 1
    for use, op in zip(r.layout, r.operands, strict=False):
        assert len(use) == op.rank


def test_sizes_naming_no_label_is_a_shape_error():
    """Found by the fuzz (a damaged spec no longer names a label ``sizes=`` gives)."""
    with pytest.raises(ShapeError) as e:
        ts.infer("_, 1 => α, oø", (4, 2), sizes={"o": 2})
    assert e.value.label == "o" and "known: oø, α" in e.value.reason


@pytest.mark.parametrize("size", [-1, "-1", " -1 ", "rgb=-1"])
def test_a_negative_size_in_a_shape_is_a_shape_error_written_as_int_or_text(size):
    # a size given as an item is checked as a size, whatever its spelling: except ShapeError
    # catches both (a caret SpecSyntaxError is for sizes inside one shape string)
    with pytest.raises(ShapeError, match="cannot be negative"):
        Shape(output=[size])
