"""tensig.testing (sizes that cannot collide, hypothesis strategy, arrays for a signature) and
tensig.price (bytes of a tensor, concrete or symbolic)."""

# ruff reads a string inside a subscript of an annotation it cannot resolve (Float[...]) as a
# forward reference, so multichar specs such as "B, S, d" look like undefined names to it.
# ruff: noqa: F821

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensig.check.decorator import SignatureError, shaped
from tensig.check.testing import arrays_for, collisions, shape_for, sizes, strategy
from tensig.core.annotations import Bool, Float, Int, parse_annotation
from tensig.core.dims import Dim
from tensig.core.shapes import Shape
from tensig.execution.price import itemsize, price


def rule_breaks(values: dict[str, int]) -> list[str]:
    """The rules checked independently of tensig.testing's own code: brute force."""
    out = []
    vals = list(values.values())
    for v in vals:
        if v < 2:
            out.append(f"{v} < 2")
    for a, b in itertools.combinations(vals, 2):
        if abs(a - b) <= 1:
            out.append(f"{a} ~ {b}")
    for i, v in enumerate(vals):
        others = vals[:i] + vals[i + 1:]
        for a, b in itertools.combinations_with_replacement(others, 2):
            if v in (a + b, a * b):
                out.append(f"{v} from {a}, {b}")
    return out


# --------------------------------------------------------------------------------------------
# sizes()
# --------------------------------------------------------------------------------------------


def test_sizes_are_small_distinct_and_deterministic():
    assert sizes("B T d") == {"B": 2, "T": 5, "d": 8}
    assert sizes("B T d") == sizes("B T d")
    assert sizes("B, T, d") == sizes("B T d")
    assert rule_breaks(sizes("B T d h w c k")) == []


def test_a_seed_gives_other_sizes_that_keep_the_rules():
    drawn = {tuple(sizes("B T d", seed=s).values()) for s in range(20)}
    assert len(drawn) > 10
    for s in range(20):
        assert rule_breaks(sizes("B T d", seed=s)) == []
    assert sizes("B T d", seed=3) == sizes("B T d", seed=3)


def test_expressions_get_values_different_from_every_other_size():
    s = sizes("B, T+1, 2*h, h*w, T-1")
    values = [s["B"], s["T"], s["h"], s["w"], s["T"] + 1, 2 * s["h"], s["h"] * s["w"],
              s["T"] - 1]
    assert len(set(values)) == len(values) and min(values) >= 2


def test_constants_of_the_annotation_are_avoided():
    s = sizes("B 3 d; 4 T")
    assert not {3, 4} & set(s.values())
    assert all(v != 3 * x and v not in (x + 3, x - 3) for v in s.values() for x in s.values())
    assert 5 not in sizes("B T", avoid=[5]).values()


def test_sizes_of_a_function_cover_every_annotation():
    @shaped
    def f(x: Float[np.ndarray, "B T d"], mask: Bool[np.ndarray, "B T"]) -> Float[Any, "B, n"]:
        return x.reshape(x.shape[0], -1)

    assert list(sizes(f)) == ["B", "T", "d", "n"]
    assert list(sizes(f.__wrapped__)) == ["B", "T", "d", "n"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from("ABCDEFGHabcdefgh"), min_size=1, max_size=8, unique=True),
       st.one_of(st.none(), st.integers(0, 10_000)))
def test_sizes_never_break_the_rules(names, seed):
    s = sizes(" ".join(names), seed=seed)
    assert list(s) == names
    assert rule_breaks(s) == [] and collisions(s) == []


def test_collisions_names_the_broken_rules():
    assert collisions({"B": 16, "T": 16}) == ["B == T == 16"]
    assert collisions({"B": 3, "T": 5, "d": 7}) == []  # the blog's choice: d != B + T ...
    assert collisions({"B": 3, "T": 5, "d": 8}) == ["d == B + T"]  # ... but 8 would be
    assert collisions({"B": 1, "T": 4, "d": 5}) == [
        "B = 1 is below 2", "T and d are adjacent (4, 5)", "d == B + T"]
    assert "h == B * B" in collisions({"B": 3, "h": 9})


# --------------------------------------------------------------------------------------------
# strategy()
# --------------------------------------------------------------------------------------------


@shaped
def attention(q: Float[np.ndarray, "B T d"], k: Float[np.ndarray, "B, S, d"],
              v: Float[np.ndarray, "B, S, 2*e"]) -> Float[np.ndarray, "B, T, 2*e"]:
    w = q @ k.swapaxes(1, 2)
    return w @ v


@settings(max_examples=40, deadline=None)
@given(strategy(attention))
def test_strategy_draws_sizes_that_cannot_collide(s):
    assert list(s) == ["B", "T", "d", "S", "e"]
    assert rule_breaks(s) == []
    assert len({*s.values(), 2 * s["e"]}) == 6
    out = attention(**arrays_for(attention, s))
    assert out.shape == (s["B"], s["T"], 2 * s["e"])


@settings(max_examples=30, deadline=None)
@given(strategy("B T d"))
def test_sizes_that_cannot_collide_expose_the_wrong_axis_reduce(s):
    @shaped
    def pool_bug(x: Float[np.ndarray, "B T d"]) -> Float[np.ndarray, "B d"]:
        return x.mean(0)  # reduces B instead of T

    with pytest.raises(SignatureError):
        pool_bug(**arrays_for(pool_bug, s))


@settings(max_examples=20, deadline=None)
@given(strategy("B, T+1"))
def test_strategy_of_an_annotation_string(s):
    assert set(s) == {"B", "T"} and rule_breaks(s) == [] and s["T"] + 1 != s["B"]


# --------------------------------------------------------------------------------------------
# shape_for() and arrays_for()
# --------------------------------------------------------------------------------------------


def test_shape_for_evaluates_items_in_memory_order():
    assert shape_for("B|T+1->2*h", {"B": 2, "T": 5, "h": 3}) == (2, 6, 6)  # batch, output, input
    assert shape_for("..v.., d", {"d": 4}, rows={"v": (2, 3)}) == (2, 3, 4)
    assert shape_for("..., d", {"d": 4}) == (4,)  # an unset row variable is empty
    (fill,) = shape_for("_", {"B": 2, "T": 5})
    assert fill not in (2, 5) and rule_breaks({"B": 2, "T": 5, "_": fill}) == []
    assert shape_for("B _", {"B": 2}, fill=9) == (2, 9)


@pytest.mark.parametrize("backend", ["numpy", "torch", "jax"])
def test_arrays_for_builds_zero_arrays_of_each_dtype_kind(backend):
    xp = {"numpy": np, "torch": None, "jax": None}[backend]
    if backend == "torch":
        xp = pytest.importorskip("torch")
    elif backend == "jax":
        xp = pytest.importorskip("jax.numpy")

    @shaped
    def f(x: Float[Any, "B T d"], mask: Bool[Any, "B T"], ids: Int[Any, "B"]) -> Float[Any, "B d"]:
        return x.sum(1)

    s = sizes(f)
    arrays = arrays_for(f, s, xp)
    assert {k: tuple(v.shape) for k, v in arrays.items()} == {
        "x": (2, 5, 8), "mask": (2, 5), "ids": (2,)}
    kinds = {k: str(v.dtype).removeprefix("torch.") for k, v in arrays.items()}
    assert kinds["x"] == "float32" and kinds["mask"] == "bool" and kinds["ids"] == "int32"
    assert tuple(f(**arrays).shape) == (2, 8)


# --------------------------------------------------------------------------------------------
# price()
# --------------------------------------------------------------------------------------------


def test_price_matches_the_blog_numbers():
    # [32, 2048, 4096] activations: 268 million numbers; 1.07 GB fp32, 537 MB bf16, 268 MB int8
    shape = (32, 2048, 4096)
    numel = 32 * 2048 * 4096
    assert numel == 268_435_456
    assert price(shape, "float32") == 4 * numel == 1_073_741_824
    assert price(shape, "bf16") == 2 * numel == 536_870_912
    assert price(shape, "int8") == numel == 268_435_456
    assert round(price(shape, "fp32") / 1e9, 2) == 1.07
    assert round(price(shape, "bfloat16") / 1e6) == 537


@pytest.mark.parametrize("dtype, size", [
    ("float64", 8), ("fp64", 8), ("double", 8), ("float32", 4), ("fp32", 4), ("float16", 2),
    ("fp16", 2), ("half", 2), ("bfloat16", 2), ("bf16", 2), ("float8_e4m3fn", 1), ("fp8", 1),
    ("int64", 8), ("int32", 4), ("int8", 1), ("uint8", 1), ("bool", 1), ("complex64", 8),
    (np.float32, 4), (np.dtype("int16"), 2), (float, 8), (bool, 1),
])
def test_itemsize_of_names_and_numpy_dtypes(dtype, size):
    assert itemsize(dtype) == size


def test_itemsize_of_torch_and_jax_dtypes():
    torch = pytest.importorskip("torch")
    assert [itemsize(t) for t in (torch.float32, torch.bfloat16, torch.float16, torch.int8,
                                  torch.bool, torch.float64)] == [4, 2, 2, 1, 1, 8]
    jnp = pytest.importorskip("jax.numpy")
    assert [itemsize(t) for t in (jnp.float32, jnp.bfloat16, jnp.int8)] == [4, 2, 1]
    assert itemsize(jnp.zeros(1, jnp.bfloat16).dtype) == 2


def test_price_is_symbolic_for_symbolic_sizes():
    B, T, h = Dim.symbol("B"), Dim.symbol("T"), Dim.symbol("h")
    scores = price((B, h, T, T), "float32")
    assert scores == 4 * B * h * T * T and str(scores) == "4*B*T**2*h"
    assert price("B, h, T, T", "float32") == scores
    assert price(("B", "T + 1"), "bf16") == 2 * B * (T + 1)
    assert scores.evaluate({"B": 8, "h": 16, "T": 4096}) == 8 * 16 * 4096 * 4096 * 4


def test_price_accepts_shapes_tuples_and_arrays():
    assert price(Shape(batch=[2], input=[3], output=[4]), "fp16") == 48
    assert price([8, 1024]) == 32768  # float32 by default
    assert price(np.zeros((3, 4), np.float16)) == 24  # the array's own dtype
    assert price(np.zeros((3, 4), np.float16), "float32") == 48
    assert price((), "int8") == 1 and price((0, 5)) == 0
    assert price(parse_annotation("B T").output, "int8") == Dim("B*T")
    torch = pytest.importorskip("torch")
    assert price(torch.zeros(2, 3, dtype=torch.bfloat16)) == 12


def test_price_rejects_what_it_cannot_size():
    with pytest.raises(TypeError, match="cannot tell the size of dtype 'foo'"):
        price((2, 3), "foo")
    with pytest.raises(TypeError):
        price(object())
