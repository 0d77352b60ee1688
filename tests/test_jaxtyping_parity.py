"""jaxtyping's own test suite, ported: tensig's annotations mean what jaxtyping's mean.

Each test names the jaxtyping test it ports (patrick-kidger/jaxtyping, ``test/test_array.py``,
``test/test_decorator.py``, ``test/test_pytree.py``); the cases are rewritten here for
``tensig.shaped`` on NumPy arrays (JAX where the case is about JAX).  jaxtyping's
``ParamError``/``ReturnError`` are tensig's ``SignatureError`` (a ``ValueError``) naming an
argument or ``return``.  Where tensig deliberately differs, the test says so and asserts
tensig's behaviour; the README lists those differences with their reasons.  Further down:
jaxtyping's *own* annotation objects read by ``@shaped`` and ``verify`` (issue 13, section 6).
"""
# ruff reads annotation strings as forward references (see tensig.annotations)
# ruff: noqa: F821

from __future__ import annotations

import abc
import typing
from typing import Any

import numpy as np
import pytest

import tensig as ts
from tensig.check.decorator import SignatureError, print_bindings, shape_scope, shaped
from tensig.core.annotations import (
    Bool,
    Complex,
    Float,
    Float32,
    Inexact,
    Int,
    Int8,
    Integer,
    Key,
    Num,
    PyTree,
    Real,
    Shaped,
    UInt,
    UInt8,
    dtype_accepts,
    parse_annotation,
    signature_of,
)
from tensig.core.errors import SpecSyntaxError

try:  # jaxtyping's own objects: module level, so postponed annotations can name them
    import jaxtyping as jt
except ImportError:  # pragma: no cover
    jt = None
needs_jaxtyping = pytest.mark.skipif(jt is None, reason="jaxtyping is not installed")
A = np.ndarray


def z(shape, dtype=np.float32):
    return np.zeros(shape, dtype)


def fails(fn, *args, where: str | None = None, **kwargs) -> SignatureError:
    with pytest.raises(SignatureError) as info:
        fn(*args, **kwargs)
    if where is not None:
        assert info.value.argument == where
    return info.value


# --------------------------------------------------------------------------------------------
# test_array.py
# --------------------------------------------------------------------------------------------


def test_basic():  # jaxtyping: test_basic
    @shaped
    def g(x: Shaped[A, "..."]):
        pass

    g(np.array(1.0))


@pytest.mark.parametrize("family, good, bad", [  # jaxtyping: test_dtypes, test_any_dtype
    (Float, ["float16", "float32", "float64"], ["int32", "bool", "complex64", "uint8"]),
    (Int, ["int8", "int16", "int32", "int64"], ["uint8", "float32", "bool"]),
    (UInt, ["uint8", "uint16", "uint32", "uint64"], ["int8", "float32", "bool"]),
    (Integer, ["int8", "uint8", "int64", "uint64"], ["float32", "bool"]),
    (Bool, ["bool"], ["int8", "float32"]),
    (Complex, ["complex64", "complex128"], ["float32", "int8"]),
    (Inexact, ["float32", "complex64"], ["int8", "bool"]),
    (Real, ["float32", "int8", "uint8"], ["complex64", "bool"]),
    (Num, ["float32", "int8", "uint8", "complex64"], ["bool"]),
    (Float32, ["float32"], ["float64", "float16", "int32"]),
    (Int8, ["int8"], ["int16", "uint8"]),
    (UInt8, ["uint8"], ["int8", "uint16"]),
    (Shaped, ["bool", "int8", "uint16", "float32", "complex64"], []),
])
def test_dtype_families(family, good, bad):
    @shaped
    def g(x: family[A, "a b"]) -> family[A, "a b"]:
        return x

    for dtype in good:
        g(z((3, 4), dtype))
    for dtype in bad:
        e = fails(g, z((3, 4), dtype), where="x")
        assert "dtype" in str(e)
    if family is Shaped:
        fails(g, z(1))  # test_any_dtype: the shape is still checked


@needs_jaxtyping
def test_family_names_match_jaxtyping():  # jaxtyping: test_dtypes (names are the classes')
    for name in ["BFloat16", "Bool", "Complex", "Complex64", "Complex128", "Float", "Float16",
                 "Float32", "Float64", "Inexact", "Int", "Int8", "Int16", "Int32", "Int64",
                 "Integer", "Key", "Num", "Real", "Shaped", "UInt", "UInt8", "UInt16",
                 "UInt32", "UInt64", "PyTree"]:
        assert hasattr(jt, name) and hasattr(ts, name), name


def test_bfloat16_is_a_float():  # jaxtyping: test_any_dtype (bfloat16)
    torch = pytest.importorskip("torch")
    assert dtype_accepts("float", torch.bfloat16) and dtype_accepts("bfloat16", torch.bfloat16)
    assert not dtype_accepts("int", torch.bfloat16)
    assert dtype_accepts("int", torch.int64) and not dtype_accepts("int", torch.uint8)


def test_return():  # jaxtyping: test_return
    @shaped
    def g(x: Float[A, "b c"]) -> Float[A, "c b"]:
        return x.T

    @shaped
    def h(x: Float[A, "b c"]) -> Float[A, "b c"]:
        return x.T

    g(z((3, 4)))
    fails(h, z((3, 4)), where="return")


def test_two_args():  # jaxtyping: test_two_args
    @shaped
    def g(x: Shaped[A, "b c"], y: Shaped[A, "c d"]):
        return x @ y

    @shaped
    def h(x: Shaped[A, "b c"], y: Shaped[A, "c d"]) -> Shaped[A, "b d"]:
        return x @ y

    for f in (g, h):
        f(z((3, 4)), z((4, 5)))
        fails(f, z((3, 4)), z((5, 4)), where="y")


def test_nested_checked_calls_have_their_own_bindings():  # jaxtyping: test_nested_jaxtyped
    @shaped
    def g(x: Float32[A, "b c"], transpose: bool) -> Float32[A, "c b"]:
        return h(x, transpose)

    @shaped
    def h(x: Float32[A, "c b"], transpose: bool) -> Float32[A, "b c"]:
        return x.T if transpose else x

    g(z((2, 3)), True)
    g(z((3, 3)), True)
    g(z((3, 3)), False)
    with pytest.raises(SignatureError):
        g(z((2, 3)), False)


def test_isinstance_inside_a_checked_call_uses_its_bindings():  # jaxtyping: test_isinstance
    seen = []

    for compiled in (True, False):
        @shaped(compiled=compiled)
        def g(x: Float32[A, "b c"]) -> Float32[A, "z"]:
            y = x.T
            seen.append(isinstance(y, Float32[A, "c b"]))
            seen.append(not isinstance(y, Float32[A, "b z"]))  # b != c: z stays unbound
            out = z(500)
            seen.append(isinstance(out, Float32[A, "z"]))  # z now bound
            seen.append(not isinstance(z(7), Float32[A, "z"]))  # ... to 500
            return out

        g(z((2, 3)))
    assert seen == [True] * 8


def test_fixed():  # jaxtyping: test_fixed
    @shaped
    def g(x: Float32[A, "4 5 foo"], y: Float32[A, " foo"]) -> Float32[A, "4 5"]:
        return x @ y

    assert g(z((4, 5, 2)), z(2)).shape == (4, 5)
    fails(g, z((3, 5, 2)), z(2), where="x")


def test_anonymous():  # jaxtyping: test_anonymous
    @shaped
    def g(x: Float32[A, "foo _"], y: Float32[A, " _"]):
        pass

    g(z((3, 4)), z(5))


def test_named_variadic():  # jaxtyping: test_named_variadic
    @shaped
    def g(x: Float32[A, "*batch foo"], y: Float32[A, " *batch"], w: Float32[A, " foo"]):
        pass

    c = z(5)
    a1, b1, a2, b2 = z(5), z(()), z((3, 5)), z(3)
    g(a1, b1, c)
    g(a2, b2, c)
    fails(g, a1, b2, c)
    fails(g, a2, b1, c)

    @shaped
    def h(x: Float32[A, " foo *batch"], y: Float32[A, " foo *batch bar"]):
        pass

    a, b, c = z(4), z((4, 3)), z((3, 4))
    h(a, b)
    fails(h, a, c)
    fails(h, b, c)


def test_anonymous_variadic():  # jaxtyping: test_anonymous_variadic
    @shaped
    def g(x: Float32[A, "... foo"], y: Float32[A, " foo"]):
        pass

    for a in (z(5), z((3, 5)), z((3, 4, 5))):
        g(a, z(5))
        fails(g, a, z(1))


def test_broadcast_fixed():  # jaxtyping: test_broadcast_fixed
    @shaped
    def g(x: Float32[A, "#4"]):
        pass

    g(z(4))
    g(z(1))
    fails(g, z(3))


def test_broadcast_named():  # jaxtyping: test_broadcast_named
    @shaped
    def g(x: Float32[A, " #foo"], y: Float32[A, " #foo"]):
        pass

    a, b, c = z(3), z(4), z(1)
    for x, y in [(a, a), (b, b), (c, c), (a, c), (b, c), (c, a), (c, b)]:
        g(x, y)
    fails(g, a, b)
    fails(g, b, a)


def test_broadcast_variadic_named():  # jaxtyping: test_broadcast_variadic_named
    @shaped
    def g(x: Float32[A, " *#foo"], y: Float32[A, " *#foo"]):
        pass

    a, b, c, d = z(3), z(4), z((4, 4)), z((5, 6))
    j, k, l_, m, n, o = z(1), z((1, 4)), z((5, 1)), z((1, 1)), z((2, 1)), z((1, 6))
    for x, y in [(a, a), (b, b), (c, c), (d, d), (b, c), (a, j), (b, j), (c, j), (d, j),
                 (b, k), (c, k), (d, l_), (a, m), (c, m), (d, m), (a, n), (b, n), (o, d)]:
        g(x, y)
    for x, y in [(a, b), (a, c), (d, b), (d, k), (c, l_), (c, n), (d, n), (o, c), (o, a)]:
        fails(g, x, y)


def test_variadic_mixed_broadcast():  # jaxtyping: test_variadic_mixed_broadcast
    @shaped
    def f(x: Float[A, " *foo"], y: Float[A, " #*foo"]):
        pass

    fails(f, z((3, 4)), z(5))
    f(z((7, 3, 2)), z((1, 2)))


def test_variadic_mixed_broadcast2():  # jaxtyping: test_variadic_mixed_broadcast2
    @shaped
    def f(x: Float[A, " *#foo"], y: Float[A, " *foo"]):
        pass

    fails(f, z((3, 4)), z(5))
    f(z((1, 2)), z((7, 3, 2)))


def test_variadic_mixed_broadcast3():  # jaxtyping: test_variadic_mixed_broadcast3
    @shaped
    def f(x: Float[A, "*B L D"], *, y: Float[A, "*#B J d"], w: Bool[A, "*B L J"]
          ) -> Float[A, "*B L D"]:
        return x

    f(z((2, 7, 3, 2, 2)), y=z((2, 7, 1, 2, 2)), w=z((2, 7, 3, 2, 2), bool))


def test_commas_separate_axes_too():  # jaxtyping: test_no_commas (a deliberate difference)
    # jaxtyping refuses "foo, bar"; tensig reads commas as separators, as its own syntax did
    assert parse_annotation("foo, bar") == parse_annotation("foo bar")
    assert parse_annotation("foo, bar").rank == 2


def test_symbolic():  # jaxtyping: test_symbolic
    @shaped
    def make_slice(x: Float32[A, " dim"]) -> Float32[A, " dim-1"]:
        return x[1:]

    @shaped
    def cat(x: Float32[A, " dim"]) -> Float32[A, " 2*dim"]:
        return np.concatenate([x, x])

    @shaped
    def bad_make_slice(x: Float32[A, " dim"]) -> Float32[A, " dim-1"]:
        return x

    @shaped
    def bad_cat(x: Float32[A, " dim"]) -> Float32[A, " 2*dim"]:
        return np.concatenate([x, x, x])

    x = z(5)
    assert make_slice(x).shape == (4,) and cat(x).shape == (10,)
    fails(make_slice, z((3, 4)), where="x")
    fails(cat, z((3, 4)), where="x")
    fails(bad_make_slice, x, where="return")
    fails(bad_cat, x, where="return")


def test_an_unbound_expression_is_solved():  # jaxtyping: test_incomplete_symbolic
    # a deliberate difference: jaxtyping raises AnnotationError for an unbound ``2*dim``;
    # tensig solves it (dim = 2 here) and checks that it divides
    @shaped
    def foo(x: Float32[A, " 2*dim"], y: Float32[A, "dim"]):
        pass

    foo(z(4), z(2))
    fails(foo, z(4), z(3), where="y")
    fails(foo, z(5), z(2), where="x")  # no whole dim gives 2*dim = 5


def test_deferred_symbolic_good():  # jaxtyping: test_deferred_symbolic_good
    @shaped
    def foo(dim: int, fill: Float[A, ""]) -> Float[A, " {dim}"]:
        return np.full((dim,), fill)

    class K:
        size = 5

        @shaped
        def bar(self, fill: Float[A, ""]) -> Float[A, " {self.size}"]:
            return np.full((self.size,), fill)

    foo(3, np.array(0.0))
    K().bar(np.array(0.0))


def test_deferred_symbolic_bad():  # jaxtyping: test_deferred_symbolic_bad
    @shaped
    def foo(dim: int, fill: Float[A, ""]) -> Float[A, " {dim-1}"]:
        return np.full((dim,), fill)

    class K:
        size = 5

        @shaped
        def bar(self, fill: Float[A, ""]) -> Float[A, " {self.size}-1"]:
            return np.full((self.size,), fill)

    fails(foo, 3, np.array(0.0), where="return")
    fails(K().bar, np.array(0.0), where="return")


def test_deferred_symbolic_dataclass():  # jaxtyping: test_deferred_symbolic_dataclass
    import dataclasses

    @shaped
    @dataclasses.dataclass
    class K:
        value: int
        array: Float[A, " {value}"]

    K(3, z(3))
    fails(K, 3, z(4), where="array")


def test_default_bindings():  # jaxtyping: test_decorator.py test_default_bindings
    @shaped
    def f(x: int, y: int = 1) -> Float[A, "x {y}"]:
        return z((x, y))

    f(1)
    f(1, 1)
    f(1, 0)
    f(1, 5)

    @shaped
    def g(x: int, y: int = 1) -> Float[A, "x {y}"]:
        return z((x, y + 1))

    fails(g, 1, where="return")


def test_ignored_names():  # jaxtyping: test_ignored_names
    x = Float[A, "foo=4"]
    assert isinstance(z(4), x)
    assert not isinstance(z(5), x) and not isinstance(z((4, 5)), x)

    y = Float[A, "bar qux foo=bar+qux"]
    assert isinstance(z((2, 3, 5)), y)
    assert not isinstance(z((2, 3, 6)), y)

    for w in (Float[A, "bar #foo=bar"], Float[A, "bar foo=#bar"]):
        assert isinstance(z((3, 3)), w) and isinstance(z((3, 1)), w)
        assert not isinstance(z((3, 4)), w)


def test_symbolic_functions():  # jaxtyping: test_symbolic_functions
    x = Float[A, "foo bar min(foo,bar)"]
    assert isinstance(z((2, 3, 2)), x)
    assert isinstance(z((3, 2, 2)), x)
    assert not isinstance(z((3, 2, 4)), x)


def test_py310_unions():  # jaxtyping: test_py310_unions
    x = Shaped[A | list, "_"]
    assert isinstance(z(3), x)
    assert typing.get_args(x)[0] == A | list


def test_key_dtype():  # jaxtyping: test_key_dtype
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")

    @shaped
    def f(x: Key[jax.Array, ""]):
        pass

    f(jax.random.key(0))
    for bad in (jax.random.PRNGKey(0), jnp.array(3), jnp.array(3.0)):
        fails(f, bad)
    for bad in (object(), 1):
        with pytest.raises(TypeError):
            f(bad)


def test_extension():  # jaxtyping: test_extension
    assert Shaped[Shaped[A, "a b"], "c d"].__metadata__[0].shape == \
        parse_annotation("c d a b")

    X = Float[A, "a"]
    Y = Float[X, "b"]

    @shaped
    def f(a: X, b: Y): ...

    a, b, c = z((3, 4)), z(4), z(3)
    f(b, a)
    fails(f, c, a)
    fails(f, a, a)
    with pytest.raises(TypeError, match="no dtype is both"):
        Bool[Float[A, "a"], "b"]  # jaxtyping: an error too (wrap in Shaped)


def test_scalar_variadic_dim():  # jaxtyping: test_scalar_variadic_dim
    @shaped
    def f(x: Float[float, "..."], y: Float[float, "#*shape"], w: Float[float, ""]
          ) -> Float[float, ""]:
        return x + y + w

    assert f(1.0, 2.0, 3.0) == 6.0
    with pytest.raises(TypeError):
        f(1, 2.0, 3.0)  # an int is not a float (as beartype and jaxtyping see it)


def test_scalar_dtype_mismatch():  # jaxtyping: test_scalar_dtype_mismatch
    # jaxtyping raises ValueError; tensig's bad subscripts are TypeErrors (issue 12, item 23)
    with pytest.raises(TypeError, match="never a floating"):
        Float[bool, "..."]
    with pytest.raises(TypeError, match="has no axes"):
        Float[float, "n"]


@pytest.mark.parametrize("array_type", [Any, typing.TypeVar("T")])
def test_any(array_type):  # jaxtyping: test_any
    class Duck:
        def __init__(self, shape, dtype):
            self.shape, self.dtype = shape, np.dtype(dtype)

    @shaped
    def f(x: Float[array_type, "foo bar"]):
        del x

    f(np.arange(12.0).reshape(3, 4))
    f(Duck((3, 4), np.float32))
    fails(f, np.arange(12.0).reshape(3, 2, 2))
    fails(f, Duck((3, 4, 5), np.float32))
    fails(f, np.arange(12).reshape(3, 4))
    fails(f, Duck((3, 4), np.int32))
    with pytest.raises(TypeError):
        f(1)


def test_non_instantiation():  # jaxtyping: test_non_instantiation
    # jaxtyping raises RuntimeError; tensig a TypeError (calling a type hint is a type misuse)
    with pytest.raises(TypeError, match="cannot be instantiated"):
        Float[A, ""]()


def test_uniontype():  # jaxtyping: test_uniontype
    @shaped
    def f(x: Float[A, ""] | None):
        pass

    f(None)
    f(np.array(1.0))
    fails(f, np.array([1.0, 2.0]))


# --------------------------------------------------------------------------------------------
# test_decorator.py
# --------------------------------------------------------------------------------------------


class M(abc.ABC):
    @shaped
    def f(self):
        return 2

    @shaped
    @classmethod
    def g1(cls):
        return 3

    @classmethod
    @shaped
    def g2(cls):
        return 4

    @shaped
    @staticmethod
    def h1():
        return 3

    @staticmethod
    @shaped
    def h2():
        return 4

    @shaped
    @abc.abstractmethod
    def i1(self): ...

    @abc.abstractmethod
    @shaped
    def i2(self): ...


class N:
    @shaped
    @property
    def j1(self):
        return 3

    @property
    @shaped
    def j2(self):
        return 4

    @shaped
    @property
    def j3(self) -> Float[A, "3"]:
        return z(4)


def test_classmethod_staticmethod_abstractmethod():  # jaxtyping: test_classmethod, ...
    assert M.f is M.f  # test_identity
    assert M.g1() == 3 and M.g2() == 4  # test_classmethod
    assert M.h1() == 3 and M.h2() == 4  # test_staticmethod
    assert M.i1.__isabstractmethod__ and M.i2.__isabstractmethod__  # test_abstractmethod


def test_property():  # jaxtyping: test_property
    assert N().j1 == 3 and N().j2 == 4
    with pytest.raises(SignatureError):
        N().j3  # noqa: B018 (the getter is checked)


def test_context():  # jaxtyping: test_context
    a, b = z((3, 4)), z(5)
    with shape_scope():
        assert isinstance(a, Float[A, "foo bar"])
        assert not isinstance(b, Float[A, "foo"])
    assert isinstance(a, Float[A, "foo bar"])
    assert isinstance(b, Float[A, "foo"])


def test_varargs_varkwargs_defaults():  # jaxtyping: test_varargs, test_varkwargs, test_defaults
    @shaped
    def f(*args) -> None:
        pass

    @shaped
    def g(**kwargs) -> None:
        pass

    @shaped
    def h(x: int, y=1) -> None:
        pass

    f(1, 2)
    g(a=1, b=2)
    h(1)


def test_print_bindings(capsys):  # jaxtyping: test_print_bindings
    for compiled in (True, False):
        @shaped(compiled=compiled)
        def f(x: Float[A, "foo bar"]):
            print_bindings()

        capsys.readouterr()
        f(z((3, 4)))
        text = capsys.readouterr().out
        assert text == ("The current values of each size in the shape annotations:\n"
                        "foo=3\nbar=4\n")


# --------------------------------------------------------------------------------------------
# test_pytree.py
# --------------------------------------------------------------------------------------------


def test_pytree_array():  # jaxtyping: test_pytree_array
    @shaped
    def g(x: PyTree[Float[A, "..."]]):
        pass

    g(np.array(1.0))
    g([np.array(1.0), np.array(1.0), {"a": np.array(1.0)}])
    fails(g, np.array(1))
    with pytest.raises(TypeError):
        g(1.0)


def test_pytree_shaped_array():  # jaxtyping: test_pytree_shaped_array
    @shaped
    def g(x: PyTree[Float[A, "b c"]]):
        pass

    g(np.array([[1.0]]))
    g([z((1, 1)), z((1, 1))])
    g((z((3, 4)), {"k": z((3, 4))}))
    fails(g, np.array(1.0))
    fails(g, np.array([[1]]))
    e = fails(g, [z((3, 4)), z((1, 1))])
    assert e.argument == "x[1]"
    fails(g, {"a": z((1, 1)), "b": z((3, 4))})


# --------------------------------------------------------------------------------------------
# jaxtyping's own annotation objects, read by @shaped and verify (issue 13, section 6)
# --------------------------------------------------------------------------------------------


@needs_jaxtyping
def test_jaxtyping_annotations_are_checked_by_shaped():

    @shaped
    def emb(ids: jt.Int[A, "*batch t"], wte: jt.Float[A, "vocab n_embd"]
            ) -> jt.Float[A, "*batch t n_embd"]:
        return wte[ids]

    assert emb(z((2, 3), np.int64), z((7, 5))).shape == (2, 3, 5)
    assert emb(z(3, np.int64), z((7, 5))).shape == (3, 5)
    e = fails(emb, z((2, 3), np.int64), z(7), where="wte")
    assert "'vocab n_embd' has 2" in str(e)  # n_embd is one axis
    assert "dtype" in str(fails(emb, z((2, 3), np.float32), z((7, 5)), where="ids"))
    sig = signature_of(emb)
    assert sig.names == ("t", "vocab", "n_embd")  # words are axes; *batch is a row variable


@needs_jaxtyping
def test_jaxtyping_annotations_are_verified():
    from tensig.check.verify import verify

    def proj(x: jt.Float[A, "n_seq n_embd"], w: jt.Float[A, "n_embd n_out"]
             ) -> jt.Float[A, "n_seq n_out"]:
        return x @ w

    def bad(x: jt.Float[A, "n_seq n_embd"], w: jt.Float[A, "n_embd n_out"]
            ) -> jt.Float[A, "n_seq n_embd"]:
        return x @ w

    assert verify(proj).ok
    report = verify(bad)
    assert not report.ok and "[n_seq, n_out]" in report.findings[0].message


@needs_jaxtyping
def test_jaxtyping_optional_mask_is_verified_on_both_branches():
    from tensig.check.verify import verify

    def scores(q: jt.Float[A, "t d"], k: jt.Float[A, "s d"],
               mask: jt.Bool[A, "t s"] | None = None) -> jt.Float[A, "t s"]:
        a = q @ k.T
        if mask is not None:
            a = np.where(mask, a, -np.inf)
        return a

    def wrong_when_masked(q: jt.Float[A, "t d"], k: jt.Float[A, "s d"],
                          mask: jt.Bool[A, "t s"] | None = None) -> jt.Float[A, "t s"]:
        a = q @ k.T
        if mask is not None:
            a = a.sum(0)  # a bug on the masked branch only
        return a

    def wrong_when_unmasked(q: jt.Float[A, "t d"], k: jt.Float[A, "s d"],
                            mask: jt.Bool[A, "t s"] | None = None) -> jt.Float[A, "t s"]:
        a = q @ k.T
        if mask is None:
            return a.T  # a bug on the plain branch only
        return a

    assert verify(scores).ok
    assert not verify(wrong_when_masked).ok
    report = verify(wrong_when_unmasked)
    assert not report.ok and "mask=None" in report.findings[0].message


@needs_jaxtyping
def test_torch_jaxtyping_annotation_with_tensig_decorator():
    torch = pytest.importorskip("torch")

    @shaped
    def attn(q: jt.Float[torch.Tensor, "b t d"], k: jt.Float[torch.Tensor, "b s d"]
             ) -> jt.Float[torch.Tensor, "b t s"]:
        return q @ k.transpose(-1, -2)

    assert attn(torch.zeros(2, 3, 4), torch.zeros(2, 5, 4)).shape == (2, 3, 5)
    fails(attn, torch.zeros(2, 3, 4), torch.zeros(3, 5, 4), where="k")


# --------------------------------------------------------------------------------------------
# misuse is a TypeError naming the mistake (issue 12, item 23)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("make, message", [
    (lambda: ts.Float[3, "N"], r"Float\[3, 'N'\]: the first argument is the array type"),
    (lambda: ts.Float[np.ndarray], r"takes an array type and a shape string"),
    (lambda: ts.Float[np.ndarray, 3], r"the second argument is the shape string, not 3"),
    (lambda: ts.Int[np.ndarray, "a", "b"], r"takes an array type and a shape string"),
    (lambda: ts.PyTree[np.ndarray], r"PyTree\[...\] takes a shape annotation"),
])
def test_misuse_is_a_type_error_naming_the_mistake(make, message):
    with pytest.raises(TypeError, match=message):
        make()


def test_bad_annotation_text_is_a_syntax_error_with_a_caret():
    with pytest.raises(SpecSyntaxError, match="'#' twice"):
        Float[A, "##n"]
    with pytest.raises(SpecSyntaxError, match="at most one row variable"):
        Float[A, "*a *b"]  # jaxtyping: one variadic per annotation too
