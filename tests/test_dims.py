"""Tests for tensig.dims.

The oracle throughout is evaluation with concrete positive integers: a random expression is
built twice, once as a ``Dim`` and once as plain Python ``int`` arithmetic (and once as text
that Python's own ``eval`` reads), and every symbolic claim (equality, ordering, solutions,
conditions) must agree with the integers.
"""

from __future__ import annotations

import copy
import itertools
import operator
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensig.core.dim_bounds import bounds
from tensig.core.dims import (
    Condition,
    Dim,
    FloorDiv,
    Mod,
    atom_sort_key,
    dim,
    dims,
)
from tensig.core.errors import InconclusiveError, SpecSyntaxError
from tensig.core.shape_index import ShapeIndex, ShapeVar

B, T, D = dims("B T d")
NAMES = ("B", "T", "d")

# --------------------------------------------------------------------------------------------
# random expressions, as trees with three independent readings
# --------------------------------------------------------------------------------------------

leaves = st.one_of(
    st.sampled_from(NAMES).map(lambda n: ("sym", n)),
    st.integers(-4, 6).map(lambda n: ("int", n)),
)


def _extend(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.tuples(st.sampled_from(["+", "-", "*"]), children, children),
        st.tuples(st.just("neg"), children),
        st.tuples(st.sampled_from(["//", "%"]), children, st.integers(1, 4)),
        st.tuples(st.just("**"), children, st.integers(0, 2)),
    )


trees = st.recursive(leaves, _extend, max_leaves=7)
envs = st.fixed_dictionaries({n: st.integers(1, 15) for n in NAMES})
env_lists = st.lists(envs, min_size=4, max_size=10)
# corners where polynomial claims usually break: all ones, small, mixed
FIXED_ENVS = [
    {"B": 1, "T": 1, "d": 1},
    {"B": 2, "T": 1, "d": 3},
    {"B": 1, "T": 5, "d": 2},
    {"B": 7, "T": 4, "d": 1},
    {"B": 13, "T": 17, "d": 9},
]

BINARY = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def to_dim(tree) -> Dim:
    kind = tree[0]
    if kind == "sym":
        return Dim.symbol(tree[1])
    if kind == "int":
        return Dim.const(tree[1])
    if kind == "neg":
        return -to_dim(tree[1])
    if kind in BINARY:
        return BINARY[kind](to_dim(tree[1]), to_dim(tree[2]))
    if kind == "//":
        return to_dim(tree[1]) // tree[2]
    if kind == "%":
        return to_dim(tree[1]) % tree[2]
    return to_dim(tree[1]) ** tree[2]


def to_int(tree, env) -> int:
    kind = tree[0]
    if kind == "sym":
        return env[tree[1]]
    if kind == "int":
        return tree[1]
    if kind == "neg":
        return -to_int(tree[1], env)
    if kind in BINARY:
        return BINARY[kind](to_int(tree[1], env), to_int(tree[2], env))
    if kind == "//":
        return to_int(tree[1], env) // tree[2]
    if kind == "%":
        return to_int(tree[1], env) % tree[2]
    return to_int(tree[1], env) ** tree[2]


def to_text(tree) -> str:
    kind = tree[0]
    if kind in ("sym", "int"):
        return str(tree[1])
    if kind == "neg":
        return f"(-{to_text(tree[1])})"
    if kind == "**":
        return f"({to_text(tree[1])})**{tree[2]}"
    right = tree[2] if isinstance(tree[2], int) else to_text(tree[2])
    return f"({to_text(tree[1])} {kind} {right})"


FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------------------------
# canonical forms and printing
# --------------------------------------------------------------------------------------------


def test_remora_canonical_examples():
    x, y, q = dims("x y q")
    assert x + y + 5 + x == (x + x) + 5 + y  # (+ x y 5 x) == (+ (+ x x) 5 y)
    assert q + 5 + y != 2 * x + 5 + y
    assert hash(x + y + 5 + x) == hash((x + x) + 5 + y)


def test_equality_with_ints_and_hashing():
    assert dim("B") + 1 == 1 + dim("B")
    assert dim("B") != dim("T")
    assert Dim.const(3) == 3 and 3 == Dim.const(3)  # noqa: SIM300 (reflected ==)
    assert Dim.const(3) != 4 and B != 3
    assert hash(Dim.const(3)) == hash(3) and hash(Dim.const(0)) == hash(0)
    assert {3: "three"}[Dim.parse("1 + 2")] == "three"
    assert B - B == 0 and (B - B).is_constant
    assert (B == "B") is False  # strings are not dimensions


def test_expansion_is_canonical():
    assert (B + T) ** 2 == B**2 + 2 * B * T + T**2
    assert B * (T + 1) - T * B == B
    assert (B + 1) * (B - 1) == B**2 - 1
    assert B**0 == 1 and B**1 == B


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (2 * B * T + 1, "2*B*T + 1"),
        (B - 1, "B - 1"),
        (3 - B, "-B + 3"),
        (Dim.const(0), "0"),
        (Dim.const(-7), "-7"),
        ((B + T) ** 2, "B**2 + 2*B*T + T**2"),
        (T % 2, "T % 2"),
        (T // 2, "T // 2"),
        ((B + 1) // 2, "(B + 1) // 2"),
        ((T - 3) // 2, "(T + 1) // 2 - 2"),
        (-(T // 2), "-(T // 2)"),
        (3 * (T // 2), "3*(T // 2)"),
        (B * (T % 3), "B*(T % 3)"),
        ((T // 2) ** 2, "(T // 2)**2"),
        (B - T // 2, "B - T // 2"),
        (Dim.symbol("$12") + 1, "$12 + 1"),
    ],
)
def test_printing(value, text):
    assert str(value) == text
    assert Dim.parse(text) == value
    assert repr(value) == f"Dim({text!r})"


def test_repr_round_trip():
    value = (B * T + 1) // 3 - D % 2
    assert eval(repr(value), {"Dim": Dim}) == value


def test_terms_view_is_read_only_and_canonical():
    terms = (2 * B * T - 1).terms
    assert dict(terms) == {(): -1, (("B", 1), ("T", 1)): 2}
    with pytest.raises(TypeError):
        terms[()] = 5  # type: ignore[index]


def test_immutable_and_picklable():
    value = (T + 1) // 2 + B * D
    with pytest.raises(AttributeError):
        value._terms = ()  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(value)) == value
    assert copy.deepcopy(value) is value
    cond = Condition.divisible(T - 3, 2)
    assert pickle.loads(pickle.dumps(cond)) == cond
    shape = ShapeIndex.parse("B, ..s.., 3")
    assert pickle.loads(pickle.dumps(shape)) == shape


def test_inspection():
    value = Dim.parse("B**2*T + T + (d + 1) // 2")
    assert value.symbols == frozenset({"B", "T", "d"})
    assert value.degree == 3 and Dim.const(5).degree == 0
    assert not value.is_linear and Dim.parse("2*B - T + 1").is_linear
    assert not (B // 2).is_linear
    assert value.free_of("x") and not value.free_of("d")
    assert Dim.const(4).constant == 4 and B.constant is None
    assert Dim.parse("B - B + 2").is_constant


def test_coefficient():
    assert Dim.parse("2*B*T + 3*T + B").coefficient("T") == 2 * B + 3
    assert B.coefficient("T") == 0
    with pytest.raises(ValueError, match="nonlinearly"):
        (T**2 + T).coefficient("T")
    with pytest.raises(ValueError, match="inside"):
        (T + T // 2).coefficient("T")


# --------------------------------------------------------------------------------------------
# floor division and modulo
# --------------------------------------------------------------------------------------------


def test_floordiv_and_mod_simplification():
    assert (2 * B + 4) // 2 == B + 2
    assert (2 * B + 1) // 2 == B
    assert (2 * B + 1) % 2 == 1
    assert (2 * B + 4) % 2 == 0
    half = (B + 1) // 2
    assert not half.is_constant and str(half) == "(B + 1) // 2"
    assert Dim.parse("(B + 1) % 2") == (B + 1) % 2
    assert B // 1 == B and B % 1 == 0
    assert (B + 2) // 2 == B // 2 + 1  # multiples of the divisor leave the atom
    assert Dim.parse("(T - 1) // 2") == (T - 3) // 2 + 1
    assert T // 2 // 3 == T // 6  # nested floor division merges
    assert T % 6 % 3 == T % 3 and T % 2 % 4 == T % 2  # bounded remainders stay put
    assert divmod(2 * B + 3, 2) == (B + 1, 1)


TRICKY = [
    "(T % 3 + 1) // 3",
    "(T % 3 + 1) % 3",
    "(T % 3) % 2",
    "(T % 3) // 2",
    "(T % 6) % 3",
    "(T % 6) // 3",
    "(T // 2) // 3",
    "(T // 2) % 3",
    "(T % 2 + B % 2) // 2",
    "(T % 2 + B % 2) % 3",
    "(2*(T % 2) + 1) // 3",
    "(B*T + T + 1) // 3 - B",
    "((T - 3) // 2 + 1) * (T % 2)",
    "(-T) // 4 + (-B) % 3",
    "(B - T) // 2",
    "(B + 5) % 3 // 2",
]


@pytest.mark.parametrize("text", TRICKY)
def test_tricky_divisions_agree_with_python_on_a_grid(text):
    value = Dim.parse(text)
    assert Dim.parse(str(value)) == value
    for b in range(1, 8):
        for t in range(1, 14):
            expected = eval(text, {}, {"B": b, "T": t})
            assert value.evaluate({"B": b, "T": t}) == expected, (text, b, t)
            assert value.subs({"B": b, "T": t}) == expected


def test_atoms_behave_like_symbols():
    half = T // 2
    assert half * half == half**2
    assert half + half == 2 * half
    assert (half + 1) * B == B * half + B
    assert (B * half) // 1 == B * half
    atom = FloorDiv(Dim.parse("T + 1"), 2)
    assert str(atom) == "(T + 1) // 2" and atom == FloorDiv(T + 1, 2)
    assert hash(atom) == hash(FloorDiv(T + 1, 2)) and atom != Mod(T + 1, 2)
    assert str(Mod(T, 3)) == "T % 3"
    ordered = sorted(["T", Mod(T, 2), FloorDiv(T, 2), "B"], key=atom_sort_key)
    assert ordered == ["B", "T", FloorDiv(T, 2), Mod(T, 2)]
    with pytest.raises(ValueError):
        FloorDiv(T, 1)
    with pytest.raises(TypeError, match="numerator must be a Dim"):
        FloorDiv("T", 2)


def test_a_dim_holds_only_its_canonical_slots():
    """The form's slots live in dim_form.Form; Dim adds none (no per-object __dict__)."""
    assert not hasattr(B, "__dict__") and type(B).__slots__ == ()
    with pytest.raises(AttributeError, match="immutable"):
        B._terms = ()


def test_substitution_resimplifies():
    value = (T + 1) // 2 + B * (T % 3)
    assert value.subs({"T": 5}) == 3 + 2 * B
    assert value.subs({"T": 2 * B + 1}) == B + 1 + B * ((2 * B + 1) % 3)
    assert value.subs({"x": 3}) is value
    assert value.evaluate({"T": 5, "B": 4}) == 3 + 8


def test_division_errors():
    with pytest.raises(ValueError, match="positive"):
        B // 0
    with pytest.raises(ValueError, match="positive"):
        B % -2
    with pytest.raises(TypeError, match="constant"):
        B // T
    with pytest.raises(TypeError, match="//"):
        B / 2  # type: ignore[operator]
    assert B // Dim.const(2) == B // 2
    assert 7 // Dim.const(2) == 3 and 7 % Dim.const(2) == 1
    with pytest.raises(TypeError):
        7 // B  # type: ignore[operator]


def test_type_errors_for_floats_and_exponents():
    with pytest.raises(TypeError):
        B + 1.5  # type: ignore[operator]
    with pytest.raises(TypeError):
        2.0 * B  # type: ignore[operator]
    with pytest.raises(TypeError):
        B**0.5  # type: ignore[operator]
    with pytest.raises(ValueError, match="nonnegative"):
        B**-1
    with pytest.raises(TypeError):
        B**T
    with pytest.raises(TypeError):
        2**B  # type: ignore[operator]
    assert 2 ** Dim.const(3) == 8
    with pytest.raises(TypeError):
        dim(1.0)  # type: ignore[arg-type]


def test_numpy_integers_interoperate():
    assert B + np.int64(2) == B + 2
    assert np.int64(2) + B == B + 2
    assert np.int64(3) * B == 3 * B
    assert Dim.const(3) == np.int64(3) and Dim.const(3) != np.int64(4)
    assert np.int64(3) != B and np.int64(3) == Dim.const(3)
    assert dim(np.int32(4)) == 4
    assert (B == np.array([1, 2])) is False  # noqa: SIM300


def test_int_index_bool():
    assert int(Dim.const(5)) == 5 and operator.index(Dim.const(5)) == 5
    assert list(range(Dim.const(3))) == [0, 1, 2]
    with pytest.raises(InconclusiveError, match="B"):
        int(B)
    assert bool(B) and bool(B + T) and not bool(B - B)
    assert bool(-B - 1)
    with pytest.raises(InconclusiveError, match="B - T"):
        bool(B - T)


# --------------------------------------------------------------------------------------------
# ordering
# --------------------------------------------------------------------------------------------


def test_ordering_decisions():
    assert B + 1 > B
    assert 2 * B >= B
    assert B * T >= B
    assert B >= 1 and B > 0 and not B < 1 and not B <= 0
    assert 0 < B and 1 <= B  # noqa: SIM300 (reflected comparisons)
    assert not (B > B * T)
    assert (B - 1) * (T - 1) >= 0
    assert T % 2 < 2 and T % 2 >= 0 and T % 5 <= 4
    assert B - T % 2 >= 0
    assert (T - 3) // 2 + 1 >= 0  # (T + 1) // 2 >= 1 since T >= 1


def test_quotients_are_bounded_by_their_numerators():
    """``r // k`` is read as ``(r - r % k) / k``, so a quotient compares with its numerator:
    ``T // 2 <= T`` was undecided (verify warned on ``x[:, :T // 2]``).  Each claim is checked
    against evaluation too; ``T // 2 >= 1`` fails at ``T = 1`` and stays undecided."""
    claims = [T // 2 <= T, T // 2 < T, T - T // 2 >= 1, (T + 1) // 2 <= T,
              T // 2 + T % 2 <= T, 2 * (T // 2) <= T, 3 * (T // 3) > T - 3,
              T // 2 >= (T - 1) // 2, T // 7 <= T // 2, B * (T // 2) < B * T,
              (T // 2) // 3 <= T // 2, (B * T + 1) // 2 <= B * T]
    assert all(c is True for c in claims)
    exact = T - 2 * (T // 2) - T % 2  # zero at every size, though not canonically
    assert not exact and exact.terms
    for t in range(1, 40):
        for b in (1, 2, 5):
            assert t // 2 < t and (t // 7) <= t // 2 and b * (t // 2) < b * t
            assert t - 2 * (t // 2) - t % 2 == 0 and (b * t + 1) // 2 <= b * t
    for undecided in (lambda: T // 2 >= 1, lambda: T // 2 <= T // 3, lambda: T // 2 < B):
        with pytest.raises(InconclusiveError):
            undecided()


@st.composite
def _quotient_sums(draw: st.DrawFn) -> Dim:
    """Sums (and a product) of a base expression, its quotients and remainders, nested:
    random trees seldom hold a quotient next to its own numerator, the case bounds read."""
    parts = [to_dim(draw(st.recursive(leaves, _extend, max_leaves=3)))]
    for _ in range(draw(st.integers(1, 3))):
        r, k = draw(st.sampled_from(parts)) + draw(st.integers(-3, 3)), draw(st.integers(2, 5))
        parts.append(r // k if draw(st.booleans()) else r % k)
    out = Dim.const(draw(st.integers(-6, 6)))
    for p in parts:
        out = out + draw(st.integers(-4, 4)) * p
    return out * draw(st.sampled_from(parts)) if draw(st.integers(0, 3)) == 0 else out


_BOX = [dict(zip(NAMES, v, strict=True)) for v in itertools.product(range(1, 9), repeat=3)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_quotient_sums())
def test_quotient_bounds_hold_at_every_small_size(value):
    """The bounds proved through ``k*(r // k) == r - r % k`` against every assignment of
    sizes 1..8: a bound too tight would make verify prove a false size claim silently."""
    lo, hi = bounds(value)
    values = [value.evaluate(env) for env in _BOX]
    assert (lo is None or lo <= min(values)) and (hi is None or max(values) <= hi), \
        (str(value), lo, hi, min(values), max(values))


def test_ordering_inconclusive_names_both_sides():
    with pytest.raises(InconclusiveError) as info:
        _ = B < T
    assert str(info.value) == "cannot decide B < T: it depends on the sizes"
    with pytest.raises(InconclusiveError, match=r"B \+ 1 >= 2\*T"):
        _ = B + 1 >= 2 * T
    with pytest.raises(InconclusiveError):
        _ = B > 3


def test_atoms_of_unknown_sign_are_never_assumed_nonnegative():
    # Canonical division keeps numerators nonnegative, so this guard is unreachable through
    # the public API; build such an atom directly to check that the ordering stays sound.
    from tensig.core.dims import _atom_dim

    u = _atom_dim(FloorDiv(B - T, 2))
    assert u.evaluate({"B": 1, "T": 5}) == -2
    with pytest.raises(InconclusiveError):
        _ = u + 1 > 0
    assert u**2 >= 0 and u * u + 1 > 0 and B * u**2 + B > 0
    with pytest.raises(InconclusiveError):
        _ = u * B >= 0


def test_abs():
    assert abs(B - B * T) == B * T - B
    assert abs(B) == B
    with pytest.raises(InconclusiveError):
        abs(B - T)


# --------------------------------------------------------------------------------------------
# parsing
# --------------------------------------------------------------------------------------------


def test_parse_grammar():
    assert Dim.parse("  2 * ( B+1 ) ") == 2 * B + 2
    assert Dim.parse("-B**2") == -(B**2)
    assert Dim.parse("2**3**2") == 2**9
    assert Dim.parse("-T // 2") == (-T) // 2
    assert Dim.parse("--B") == B and Dim.parse("+B") == B
    assert Dim.parse("B*T % 3 + d") == (B * T) % 3 + D
    assert Dim.parse("$12 + 1") == Dim.symbol("$12") + 1


@pytest.mark.parametrize(
    ("text", "column", "reason"),
    [
        ("", 0, "empty"),
        ("B + * 2", 4, "expected a number"),
        ("(B + 2", 0, "unclosed"),
        ("B + 2)", 5, "unmatched"),
        ("2B", 1, "expected an operator"),
        ("T / 2", 2, "unexpected character"),
        ("B // T", 5, "must be a constant"),
        ("B % 0", 4, "must be positive"),
        ("B ** T", 5, "exponent"),
        ("B ** -1", 5, "exponent"),
        ("B +", 3, "unexpected end"),
        ("B.5", 1, "unexpected character"),
    ],
)
def test_parse_errors_show_a_caret(text, column, reason):
    with pytest.raises(ValueError) as info:
        Dim.parse(text)
    assert isinstance(info.value, SpecSyntaxError)
    assert info.value.column == column
    assert reason in info.value.reason
    lines = str(info.value).splitlines()
    assert lines[1] == "    " + text  # the text, then a caret under the offending column
    assert lines[2].strip(" ").startswith("^") and lines[2].index("^") == 4 + column


def test_dim_and_dims():
    assert dim("B") == Dim.symbol("B") and dim("T + 1") == T + 1 and dim(3) == 3
    assert dim(B) is B and Dim("B + 1") == B + 1 and Dim(4) == 4
    assert dims("B T d") == (B, T, D)
    assert dims("B, T, d") == (B, T, D)
    assert dims("T + 1, B") == (T + 1, B)
    assert dims("T+1 2*B") == (T + 1, 2 * B)
    assert dims("B, T,") == (B, T)
    assert dims("B + T") == (B + T,) and dims("B - T  d") == (B - T, D)  # joined by operators
    assert dims("B -T") == (B, -T) and dims("(B + 1) T") == (B + 1, T)
    assert dims("") == ()
    with pytest.raises(SpecSyntaxError) as info:
        dims("B, T + *, d")
    assert info.value.column == 7 and info.value.spec == "B, T + *, d"
    with pytest.raises(SpecSyntaxError, match="empty item"):
        dims("B,, T")


# --------------------------------------------------------------------------------------------
# solving
# --------------------------------------------------------------------------------------------


def test_solve_valid_convolution():
    o = dim("o")
    kernel, stride, dilation = 3, 2, 1
    equation = T - stride * (o - 1) - 1 - (kernel - 1) * dilation
    solution, conditions = equation.solve_for("o")
    assert solution == (T - 3) // 2 + 1
    assert conditions == (Condition.divisible(T - 3, 2),)
    assert str(conditions[0]) == "(T + 1) % 2 == 0"
    for t in range(1, 30):
        env = {"T": t}
        if conditions[0].holds(env):
            value = solution.evaluate(env)
            assert equation.evaluate({"T": t, "o": value}) == 0
            assert value == (t - 3) // 2 + 1
        else:
            assert (t - 3) % 2 != 0


def test_solve_exact_and_errors():
    assert dim("2*o - 2*B - 4").solve_for("o") == (B + 2, ())
    assert dim("B - o").solve_for("o") == (B, ())
    assert dim("3 - 2*o").solve_for("o") == (Dim.const(1), (Condition.divisible(3, 2),))
    assert Condition.divisible(3, 2).decide() is False
    with pytest.raises(ValueError, match="symbolic"):
        dim("B*o - T").solve_for("o")
    with pytest.raises(ValueError, match="nonlinearly"):
        dim("o**2 - T").solve_for("o")
    with pytest.raises(ValueError, match="does not occur"):
        dim("B - T").solve_for("o")


# --------------------------------------------------------------------------------------------
# conditions
# --------------------------------------------------------------------------------------------


def test_conditions():
    div = Condition.divisible(T - 3, 2)
    assert div == Condition.divisible(T + 1, 2) and hash(div) == hash(Condition.divisible(T + 1, 2))
    assert div.decide() is None and div.holds({"T": 5}) and not div.holds({"T": 4})
    assert div.subs({"T": 7}).decide() is True and div.subs({"T": 6}).decide() is False
    assert Condition.divisible(4 * B + 2, 2).decide() is True
    assert Condition.divisible(T % 2 + 1, 3).decide() is False  # 1 <= T % 2 + 1 <= 2
    assert Condition.divisible(B, 1).decide() is True

    least = Condition.at_least(T, 3)
    assert str(least) == "T >= 3" and least.decide() is None
    assert least.holds({"T": 3}) and not least.holds({"T": 2})
    assert Condition.at_least(B * T, B).decide() is True
    assert Condition.at_least(B, B + 1).decide() is False
    assert str(Condition.at_least(T, B + 2)) == "T >= B + 2"

    eq = Condition.equal(B, T)
    assert str(eq) == "B == T" and eq == Condition.equal(T, B)
    assert eq.decide() is None and eq.holds({"B": 2, "T": 2}) and not eq.holds({"B": 1, "T": 2})
    assert Condition.equal(B + 1, 1 + B).decide() is True
    assert Condition.equal(B + 1, B).decide() is False
    assert Condition.equal(B + T, 1).decide() is False  # B + T >= 2
    assert eval(repr(eq), {"Condition": Condition, "Dim": Dim}) == eq
    with pytest.raises(ValueError):
        Condition.divisible(B, 0)


# --------------------------------------------------------------------------------------------
# shape indices
# --------------------------------------------------------------------------------------------


def test_shape_index_flattening_and_equality():
    s = ShapeVar("s")
    nested = ShapeIndex([3, ShapeIndex([B, ShapeIndex([s])]), (4, [T + 1])])
    assert nested == ShapeIndex([3, B, s, 4, T + 1])
    assert hash(nested) == hash(ShapeIndex([3, B, s, 4, T + 1]))
    assert nested.items == (Dim.const(3), B, s, Dim.const(4), T + 1)
    assert ShapeIndex([3, 4]) == (3, 4) and ShapeIndex([3, 4]) != (3, 5)
    assert hash(ShapeIndex([3, 4])) == hash((3, 4))
    assert ShapeIndex([B + B]) == ShapeIndex([2 * B])
    assert ShapeIndex([3, 4]) + [5] == ShapeIndex([3, 4, 5])  # noqa: RUF005
    assert (1, 2) + ShapeIndex([3]) == ShapeIndex([1, 2, 3])  # noqa: RUF005
    assert ShapeIndex(["B", "..s.."]) == ShapeIndex([B, s])


def test_shape_index_properties():
    sym = ShapeIndex.parse("B, T + 1, ..s..")
    assert str(sym) == "[B, T + 1, ..s..]" and ShapeIndex.parse(str(sym)) == sym
    assert sym.rank is None and sym.shape_vars == (ShapeVar("s"),)
    assert sym.dims == (B, T + 1)
    with pytest.raises(TypeError):
        len(sym)
    with pytest.raises(TypeError):
        sym.product()
    concrete = ShapeIndex([2, 3, Dim.parse("2*2")])
    assert concrete.is_concrete and concrete.as_tuple() == (2, 3, 4) and len(concrete) == 3
    assert concrete.product() == 24 and ShapeIndex([]).product() == 1
    assert ShapeIndex([B, 2]).product() == 2 * B and ShapeIndex([B]).rank == 1
    assert not ShapeIndex([B]).is_concrete
    with pytest.raises(InconclusiveError):
        ShapeIndex([B]).as_tuple()
    assert sym[1] == T + 1 and sym[:2] == ShapeIndex([B, T + 1])
    assert ShapeIndex.parse("B T+1 ..s..") == sym
    assert ShapeIndex.parse("[]") == ShapeIndex([]) and not ShapeIndex([])


def test_shape_index_subs():
    sym = ShapeIndex.parse("B, ..s.., T")
    assert sym.subs({"B": 2}) == ShapeIndex([2, ShapeVar("s"), T])
    assert sym.subs({"T": B}, {"s": (3, 4)}) == ShapeIndex([B, 3, 4, B])
    assert sym.subs({}, {"s": ShapeIndex([])}) == ShapeIndex([B, T])


def test_prefix_minus():
    assert ShapeIndex([3, 4, 5, 6]).prefix_minus(ShapeIndex([3, 4])) == ShapeIndex([5, 6])
    assert ShapeIndex([3, 4, 5, 6]).prefix_minus([4]) is None
    assert ShapeIndex([3, 4]).prefix_minus([3, 4]) == ShapeIndex([])
    assert ShapeIndex([3]).prefix_minus([3, 4]) is None
    frame = ShapeIndex.parse("B, ..s.., T + 1")
    assert frame.prefix_minus(ShapeIndex.parse("B, ..s..")) == ShapeIndex([T + 1])
    assert frame.prefix_minus(ShapeIndex.parse("B, ..t..")) is None
    assert ShapeIndex([B + B, T]).prefix_minus([2 * B]) == ShapeIndex([T])


def test_shape_index_parse_errors():
    with pytest.raises(SpecSyntaxError) as info:
        ShapeIndex.parse("[B, T + /, 3]")
    assert info.value.column == 8
    with pytest.raises(SpecSyntaxError, match="unclosed"):
        ShapeIndex.parse("[B, T")


# --------------------------------------------------------------------------------------------
# properties, against the integer oracle
# --------------------------------------------------------------------------------------------


@FAST
@given(trees, env_lists)
def test_evaluation_matches_integer_arithmetic(tree, env_list):
    value = to_dim(tree)
    for env in FIXED_ENVS + env_list:
        assert value.evaluate(env) == to_int(tree, env)


@FAST
@given(trees, envs)
def test_parse_agrees_with_python_and_round_trips(tree, env):
    text = to_text(tree)
    value = Dim.parse(text)
    assert value == to_dim(tree)
    assert value.evaluate(env) == eval(text, {}, dict(env))
    assert Dim.parse(str(value)) == value
    assert hash(Dim.parse(str(value))) == hash(value)


@FAST
@given(trees, trees, trees)
def test_ring_laws_hold_canonically(ta, tb, tc):
    a, b, c = to_dim(ta), to_dim(tb), to_dim(tc)
    assert a + b == b + a and a * b == b * a
    assert (a + b) + c == a + (b + c)
    assert (a * b) * c == a * (b * c)
    assert a * (b + c) == a * b + a * c
    assert a - a == 0 and a + 0 == a and a * 1 == a and a * 0 == 0
    negated = -a
    assert -negated == a and a - b == -(b - a)


@FAST
@given(trees, envs, st.sampled_from(NAMES))
def test_subs_agrees_with_evaluation(tree, env, name):
    value = to_dim(tree)
    partial = value.subs({name: env[name]})
    assert name not in partial.symbols
    assert partial.evaluate(env) == value.evaluate(env)
    full = value.subs(env)
    assert full.is_constant and full == value.evaluate(env)
    doubled = value.subs({name: 2 * Dim.symbol(name)})
    assert doubled.evaluate(env) == value.evaluate({**env, name: 2 * env[name]})


COMPARISONS = [operator.lt, operator.le, operator.gt, operator.ge]


@settings(max_examples=300, deadline=None)
@given(trees, trees, env_lists)
def test_ordering_is_sound(ta, tb, env_list):
    a, b = to_dim(ta), to_dim(tb)
    for op in COMPARISONS:
        try:
            decided = op(a, b)
        except InconclusiveError as e:
            assert str(a) in str(e) and str(b) in str(e)
            continue
        for env in FIXED_ENVS + env_list:
            assert op(to_int(ta, env), to_int(tb, env)) == decided, (op, a, b, env)


@FAST
@given(trees, env_lists)
def test_bool_and_conditions_are_sound(tree, env_list):
    value = to_dim(tree)
    try:
        nonzero = bool(value)
    except InconclusiveError:
        nonzero = None
    conditions = [
        Condition.at_least(value, 0),
        Condition.equal(value, 0),
        Condition.divisible(value, 2),
        Condition.divisible(value, 3),
    ]
    for env in FIXED_ENVS + env_list:
        actual = to_int(tree, env)
        if nonzero is not None:
            assert (actual != 0) == nonzero
        for cond in conditions:
            decided = cond.decide()
            if cond.kind == "at_least":
                assert cond.holds(env) == (actual >= 0)
            elif cond.kind == "equal":
                assert cond.holds(env) == (actual == 0)
            else:
                assert cond.holds(env) == (actual % cond.modulus == 0)
            if decided is not None:
                assert cond.holds(env) == decided, (cond, env)


@FAST
@given(trees, st.integers(-4, 4).filter(bool), env_lists)
def test_solve_for_solutions_satisfy_the_equation(tree, c, env_list):
    o = Dim.symbol("o")
    rest = to_dim(tree)
    equation = c * o + rest
    solution, conditions = equation.solve_for("o")
    assert solution.free_of("o")
    for env in FIXED_ENVS + env_list:
        rest_value = to_int(tree, env)
        if all(cond.holds(env) for cond in conditions):
            o_value = solution.evaluate(env)
            assert c * o_value + rest_value == 0
            assert equation.evaluate({**env, "o": o_value}) == 0
            assert equation.subs({"o": solution}).evaluate(env) == 0
        else:
            assert rest_value % c != 0  # no integer solution exists at all


@FAST
@given(st.lists(st.one_of(trees.map(to_dim), st.sampled_from("stu").map(ShapeVar)), max_size=5))
def test_shape_index_round_trip(items):
    shape = ShapeIndex(items)
    assert ShapeIndex.parse(str(shape)) == shape
    assert ShapeIndex(items[:2]) + ShapeIndex(items[2:]) == shape
    assert shape.prefix_minus(items[:2]) == ShapeIndex(items[2:])


def test_true_division_of_a_size_is_refused_with_the_operators_to_use():
    """``/`` would make a size a fraction: both ``B / 2`` and ``6 / B`` name ``//`` and ``%``;
    a float divisor is Python's own refusal (no size takes part)."""
    for fn, text in ((lambda: B / 2, "cannot divide B by 2"),
                     (lambda: 6 / B, "cannot divide 6 by B")):
        with pytest.raises(TypeError, match=f"{text} with /: sizes use // and %"):
            fn()
    with pytest.raises(TypeError, match="unsupported operand"):
        B / 2.5
