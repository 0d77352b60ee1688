"""Shape annotations: ``Shaped[ArrayType, "B T d"]``, their dtype families and signatures.

An annotation is a shape read as a *type*: every argument (and the return value) that mentions
``T`` must agree on it.  :data:`Shaped`, :data:`Float`, :data:`Int`, :data:`Bool` (and the other
dtype families) wrap the parsed text in ``typing.Annotated``, so type checkers still see the
plain ``ArrayType`` while ``tensig.shaped`` and ``tensig.verify`` read the marker; jaxtyping's
own annotations are read too.

>>> import numpy as np
>>> hint = Float[np.ndarray, "B T d"]
>>> hint.__origin__ is np.ndarray, hint.__metadata__[0]
(True, Float['B T d'])
>>> parse_annotation("batch n_embd").output
(Dim('batch'), Dim('n_embd'))

Syntax: jaxtyping's, with the notation's rows (an omitted row is empty here, where a spec's is
``...``), row variables and size expressions; the README's "Shape annotations" section lists it
whole.  Arrays without row information match in memory order (:attr:`AnnotationShape.items`).

Linters: ruff and pyflakes cannot tell that ``Float`` is ``typing.Annotated`` (pyright and
mypy can: they see the ``TYPE_CHECKING`` alias below), so they read the string in
``Float[np.ndarray, "B, T+1"]`` as a forward reference and report ``F821`` (undefined name) for
strings that are valid Python, ``F722`` for the others.  Ignore those codes where annotations
live, or bind the hint once at module level (``Tokens = Float[np.ndarray, "B, T"]``), where
linters do not read it as a type.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Annotated, Any

from tensig.core.dims import Dim
from tensig.core.errors import SpecSyntaxError
from tensig.core.notation import parse_annotation
from tensig.core.syntax import AnnotationShape, Broadcastable, Deferred, Item, RowVariable, _is_name

__all__ = ["AnnotationShape", "BFloat16", "Bool", "Broadcastable", "Complex", "Complex64",
           "Complex128", "Deferred", "DtypeKind", "Float", "Float16", "Float32", "Float64",
           "FunctionSignature", "Inexact", "Int", "Int8", "Int16", "Int32", "Int64", "Integer",
           "Item", "Key", "Num", "ParameterSpec", "PyTree", "Real", "RowVariable",
           "ShapeSpecMarker", "Shaped", "UInt", "UInt8", "UInt16", "UInt32", "UInt64",
           "dtype_accepts", "dtype_kind", "family_kind", "install_instance_check", "known_family",
           "parse_annotation", "signature_of", "words_hint"]

DtypeKind = str
"""A dtype family's key: ``"float"``, ``"int"`` (signed), ``"uint"``, ``"integer"``, ``"bool"``,
``"complex"``, ``"inexact"``, ``"real"``, ``"num"``, ``"key"``, or one exact dtype name
(``"float32"``, ``"int8"``...)."""


# -- hints about the text (the parser is the notation's annotation mode) ---------------------------


def words_hint(shape: AnnotationShape) -> str | None:
    """The hint for an annotation such as ``"BTd"``: one axis here (as in jaxtyping).

    >>> print(words_hint(parse_annotation("BTd")))
    'BTd' is one axis named BTd (axes are separated by spaces or commas); for one axis per letter write 'B T d'
    >>> words_hint(parse_annotation("B T d")) is None
    True
    """  # noqa: E501
    word = shape.text.strip()
    items = shape.items
    if not (len(items) == 1 and isinstance(items[0], Dim) and _is_name(items[0])
            and re.fullmatch(r"[A-Za-z]{2,5}", word) and re.search("[A-Z]", word)):
        return None  # only a short mixed-case word, which tensig once read letter by letter
    return (f"{word!r} is one axis named {word} (axes are separated by spaces or commas); for "
            f"one axis per letter write {' '.join(word)!r}")


# -- dtype families: Shaped / Float / Int / Bool / UInt / ... / Float32 / ... ----------------------

_FLOAT = re.compile(r"(b?float\d+\w*|half|double)$")
_SIGNED = re.compile(r"int\d+$")
_UNSIGNED = re.compile(r"uint\d+$")
_COMPLEX = re.compile(r"complex\d+$")


_FAMILIES: dict[str, tuple[str, tuple[re.Pattern[str], ...]]] = {
    # family key -> the description errors use, the patterns of its dtype names
    "float": ("a floating", (_FLOAT,)), "int": ("a signed integer", (_SIGNED,)),
    "uint": ("an unsigned integer", (_UNSIGNED,)),
    "integer": ("an integer", (_SIGNED, _UNSIGNED)), "bool": ("a bool", (re.compile("bool$"),)),
    "complex": ("a complex", (_COMPLEX,)), "inexact": ("a floating or complex", (_FLOAT, _COMPLEX)),
    "real": ("a floating or integer", (_FLOAT, _SIGNED, _UNSIGNED)),
    "num": ("a numeric", (_FLOAT, _SIGNED, _UNSIGNED, _COMPLEX)),
    "key": ("a PRNG key", (re.compile("key<"),)),
}


def _family_test(family: str) -> Callable[[str], bool]:
    """The test of a dtype name for one family (a kind above, or exact dtype names)."""
    if family in _FAMILIES:
        patterns = _FAMILIES[family][1]
        return lambda name: any(p.match(name) for p in patterns)
    if family.startswith("{"):  # an exact set of names: jaxtyping's dtype lists
        names = frozenset(family[1:-1].split(","))
        return lambda name: name in names
    return lambda name: name == family


_ACCEPT: dict[str, dict[Any, bool]] = {}
"""Per family, dtype -> accepted; filled by :func:`dtype_accepts`, read by generated checks."""


def dtype_accepts(family: str, dtype: Any) -> bool:
    """Whether ``dtype`` (numpy, torch, jax or ml_dtypes) belongs to a dtype family.

    >>> import numpy as np
    >>> dtype_accepts("int", np.dtype("int8")), dtype_accepts("int", np.dtype("uint8"))
    (True, False)
    >>> dtype_accepts("inexact", np.complex64), dtype_accepts("float32", np.dtype("float64"))
    (True, False)
    """
    cache = _ACCEPT.setdefault(family, {})
    try:
        return cache[dtype]
    except (KeyError, TypeError):
        pass
    ok = dtype is not None and _family_test(family)(dtype_name(dtype))
    with contextlib.suppress(TypeError):  # an unhashable dtype-like object is not cached
        cache[dtype] = ok
    return ok


def _family_text(family: str) -> str:
    """``a floating dtype``, ``a float32 dtype``, ``a dtype among int8, int16``."""
    if family.startswith("{"):
        return "a dtype among " + ", ".join(sorted(family[1:-1].split(",")))
    return f"{_FAMILIES[family][0] if family in _FAMILIES else 'a ' + family} dtype"


@dataclass(frozen=True)
class ShapeSpecMarker:
    """The ``typing.Annotated`` metadata that :data:`Shaped` and friends attach: ``dtype`` is
    ``None`` (any) or a :data:`DtypeKind`; ``scalar`` the Python type whose plain values also
    fit (``Float[float, ""]``); ``pytree``: every array leaf is checked (``PyTree[...]``);
    ``family``: the name ``repr`` shows.

    >>> ShapeSpecMarker(parse_annotation("B T"), "bool")
    Bool['B T']
    """

    shape: AnnotationShape
    dtype: DtypeKind | None = None
    scalar: type | None = field(default=None, compare=False)
    pytree: bool = False
    family: str = field(default="", compare=False)

    @property
    def text(self) -> str:
        """The annotation as written."""
        return self.shape.text

    @property
    def need(self) -> str:
        """The dtype requirement in words, for errors."""
        return _family_text(self.dtype) if self.dtype else "any dtype"

    def __repr__(self) -> str:
        name = self.family or _DEFAULT_NAMES.get(self.dtype, "Shaped")
        inner = f"{name}[{self.shape.text!r}]"
        return f"PyTree[{inner}]" if self.pytree else inner


_DEFAULT_NAMES = {None: "Shaped", "float": "Float", "int": "Int", "bool": "Bool"}


InstanceCheck = Callable[[Any, Any, ShapeSpecMarker], bool]
"""``(obj, array_type, marker) -> bool``: what ``isinstance(obj, Float[...])`` asks."""
_INSTANCE_CHECK: InstanceCheck | None = None


def install_instance_check(check: InstanceCheck) -> None:
    """Install the check behind ``isinstance(x, Float[ArrayType, "B T"])`` (the later layer's
    :func:`tensig.check.decorator.instance_check`, on ``import tensig``)."""
    global _INSTANCE_CHECK
    _INSTANCE_CHECK = check


class _ShapedAlias(typing._AnnotatedAlias, _root=True):  # type: ignore[name-defined, call-arg]
    """``Annotated[ArrayType, marker]`` that also answers ``isinstance`` (as jaxtyping's types),
    within a checked call (``@shaped``, ``with shape_scope():``) against its bindings."""

    def __instancecheck__(self, obj: Any) -> bool:
        if _INSTANCE_CHECK is None:  # pragma: no cover - tensig/__init__ installs it
            raise TypeError(f"isinstance(x, {self.__metadata__[-1]!r}) needs the shape checker "
                            "of tensig.check: import tensig")
        return _INSTANCE_CHECK(obj, self.__origin__, self.__metadata__[-1])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{self.__metadata__[-1]!r} is an annotation: it cannot be "
                        "instantiated (create the array with its library)")

    def __reduce__(self) -> Any:
        return _ShapedAlias, (self.__origin__, self.__metadata__)


@dataclass(frozen=True, slots=True)
class _ShapedFamily:
    """``Family[ArrayType, "spec"]`` -> ``Annotated[ArrayType, ShapeSpecMarker(...)]``."""

    _name: str
    _dtype: DtypeKind | None

    def __getitem__(self, params: tuple[Any, str | AnnotationShape]) -> Any:
        usage = f'e.g. {self._name}[np.ndarray, "B T d"]'
        if not isinstance(params, tuple) or len(params) != 2:
            raise TypeError(f"{self._name}[...] takes an array type and a shape string, {usage}"
                            f"; got {self._name}[{_args_text(params)}]")
        array_type, spec = params
        if not (isinstance(array_type, type | typing.TypeVar | str | typing.ForwardRef)
                or array_type is Any or typing.get_origin(array_type) is not None
                or isinstance(array_type, _ShapedAlias)):
            raise TypeError(f"{self._name}[{_args_text(params)}]: the first argument is the "
                            f"array type (np.ndarray, torch.Tensor, jax.Array, float...), not "
                            f"{array_type!r} (of type {type(array_type).__name__}); {usage}")
        if not isinstance(spec, str | AnnotationShape):
            raise TypeError(f"{self._name}[{_args_text(params)}]: the second argument is the "
                            f"shape string, not {spec!r} (of type {type(spec).__name__}); {usage}")
        shape = spec if isinstance(spec, AnnotationShape) else parse_annotation(spec)
        dtype = self._dtype
        inner = _marker_of(array_type)[0] if isinstance(array_type, _ShapedAlias) else None
        if inner is not None:  # Shaped[Shaped[Array, "a b"], "c d"] is "c d a b"
            shape = _nest(shape, inner.shape)
            dtype = _meet(self._name, dtype, inner.dtype)
            array_type = array_type.__origin__
        scalar = array_type if array_type in _PYTHON_DTYPES else None
        if scalar is not None and shape.min_rank:
            raise TypeError(f"{self._name}[{array_type.__name__}, {shape.text!r}]: a Python "
                            f"{array_type.__name__} has no axes (write \"\")")
        if scalar is not None and dtype is not None \
                and not dtype_accepts(dtype, _PYTHON_DTYPES[scalar]):
            raise TypeError(f"{self._name}[{array_type.__name__}, ...]: a Python "
                            f"{array_type.__name__} is never {_family_text(dtype)}")
        name = self._name if self._dtype is not None or inner is None else inner.family
        marker = ShapeSpecMarker(shape, dtype, scalar, family=name)
        return _ShapedAlias(array_type, (marker,))

    def __repr__(self) -> str:
        return f"tensig.{self._name}"


def _args_text(params: Any) -> str:
    items = params if isinstance(params, tuple) else (params,)
    return ", ".join(getattr(x, "__name__", None) or repr(x) for x in items)


def _nest(outer: AnnotationShape, inner: AnnotationShape) -> AnnotationShape:
    """jaxtyping's nesting: the outer axes come first."""
    if outer.batch or outer.input or inner.batch or inner.input:
        raise TypeError("nested annotations take output axes only (no '|' or '->')")
    if outer.row_variables and inner.row_variables:
        raise TypeError("a variadic in both the inner and the outer annotation")
    return parse_annotation(f"{outer.text}, {inner.text}" if outer.text.strip()
                            and inner.text.strip() else outer.text + inner.text)


def _meet(name: str, outer: str | None, inner: str | None) -> str | None:
    if outer is None or inner is None or outer == inner:
        return outer or inner
    test_outer, test_inner = _family_test(outer), _family_test(inner)
    names = [n for n in _KNOWN_DTYPES if test_outer(n) and test_inner(n)]
    if not names:
        raise TypeError(f"{name}[...] around a {inner!r} annotation: no dtype is both "
                        "(wrap in Shaped instead)")
    return "{" + ",".join(names) + "}"


_PYTHON_DTYPES = {float: "float64", int: "int64", bool: "bool", complex: "complex128"}
"""The dtype a plain Python scalar stands for (``Float[float, ""]``)."""
_SIZED = ("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64", "Float16",
          "BFloat16", "Float32", "Float64", "Complex64", "Complex128")  # family: the name, lower
_KNOWN_DTYPES = ("bool", *(name.lower() for name in _SIZED))


class _PyTree:
    """``PyTree[Float[Array, "n"]]``: every leaf of nested dicts, lists and tuples is an array
    of that annotation, all sharing one set of bindings (jaxtyping's ``PyTree``)."""

    def __getitem__(self, hint: Any) -> Any:
        marker, _ = _marker_of(hint)
        if marker is None:
            raise TypeError(f"PyTree[...] takes a shape annotation such as "
                            f'PyTree[Float[np.ndarray, "n"]], not {hint!r}')
        return Annotated[Any, replace(marker, pytree=True)]

    def __repr__(self) -> str:
        return "tensig.PyTree"


if TYPE_CHECKING:  # static checkers see Annotated: Shaped[np.ndarray, "B T"] is an np.ndarray
    from typing import Annotated as BFloat16
    from typing import Annotated as Bool
    from typing import Annotated as Complex
    from typing import Annotated as Complex64
    from typing import Annotated as Complex128
    from typing import Annotated as Float
    from typing import Annotated as Float16
    from typing import Annotated as Float32
    from typing import Annotated as Float64
    from typing import Annotated as Inexact
    from typing import Annotated as Int
    from typing import Annotated as Int8
    from typing import Annotated as Int16
    from typing import Annotated as Int32
    from typing import Annotated as Int64
    from typing import Annotated as Integer
    from typing import Annotated as Key
    from typing import Annotated as Num
    from typing import Annotated as PyTree
    from typing import Annotated as Real
    from typing import Annotated as Shaped
    from typing import Annotated as UInt
    from typing import Annotated as UInt8
    from typing import Annotated as UInt16
    from typing import Annotated as UInt32
    from typing import Annotated as UInt64
else:
    # Shaped takes any dtype; every other family is its name in lower case ("int": signed, as
    # jaxtyping's Int; "float": bfloat16 included)
    Shaped = _ShapedFamily("Shaped", None)
    for _name in ("Float", "Int", "Bool", "UInt", "Integer", "Complex", "Inexact", "Real", "Num",
                  "Key", *_SIZED):
        globals()[_name] = _ShapedFamily(_name, _name.lower())
    del _name
    PyTree = _PyTree()


_KINDS = (("bool", "bool"), ("float", "float"), ("int", "integer"), ("complex", "complex"))


def dtype_kind(dtype: Any) -> str:
    """Classify a numpy, torch or jax dtype: ``float``, ``int``, ``bool``, ``complex``, ``other``
    (by its name, as the families do: no torch or jax import).

    >>> import numpy as np
    >>> dtype_kind(np.dtype("float16")), dtype_kind(np.dtype("uint8")), dtype_kind(np.bool_)
    ('float', 'int', 'bool')
    """
    return next((kind for kind, family in _KINDS if dtype_accepts(family, dtype)), "other")


def dtype_name(dtype: Any) -> str:
    """A dtype's short name (``float32``, not ``torch.float32``), whatever its library.

    >>> import numpy as np
    >>> dtype_name(np.dtype(np.int8)), dtype_name(np.float32)
    ('int8', 'float32')
    """
    if type(dtype).__module__.startswith("torch"):
        return str(dtype).removeprefix("torch.")
    import numpy as np

    try:
        return np.dtype(dtype).name
    except TypeError:
        return str(dtype)


# -- reading a function's annotations --------------------------------------------------------------


@dataclass(frozen=True)
class ParameterSpec:
    """One annotated parameter: ``position`` among positional arguments (``None`` for
    keyword-only and ``**``), :class:`inspect.Parameter` ``kind``, ``optional`` (``None`` is
    accepted: ``Optional[...]`` or a ``None`` default) and ``default``."""

    name: str
    position: int | None
    kind: inspect._ParameterKind
    marker: ShapeSpecMarker
    optional: bool = False
    default: Any = field(default=inspect.Parameter.empty, compare=False)


@dataclass(frozen=True)
class FunctionSignature:
    """The shape annotations of a function: what ``@shaped`` checks and ``verify`` reasons about.
    ``result`` is ``None``, a marker, or one per element of a ``tuple[...]`` return.

    >>> import numpy as np
    >>> def f(x: Float[np.ndarray, "B T d"], k: int) -> Float[np.ndarray, "B d"]: ...
    >>> sig = signature_of(f)
    >>> [p.name for p in sig.parameters], sig.result, sig.names
    (['x'], Float['B d'], ('B', 'T', 'd'))
    """

    name: str
    parameters: tuple[ParameterSpec, ...]
    result: ShapeSpecMarker | tuple[ShapeSpecMarker | None, ...] | None = None
    result_optional: bool = False

    def markers(self) -> Iterator[tuple[str, ShapeSpecMarker]]:
        """``(label, marker)`` for every parameter, then ``return`` (``return[i]`` in tuples)."""
        for p in self.parameters:
            yield p.name, p.marker
        if isinstance(self.result, ShapeSpecMarker):
            yield "return", self.result
        elif self.result is not None:
            for i, m in enumerate(self.result):
                if m is not None:
                    yield f"return[{i}]", m

    @property
    def names(self) -> tuple[str, ...]:
        """Every size name of the signature, in order of first appearance."""
        return tuple(dict.fromkeys(name for _, m in self.markers() for name in m.shape.names))


def _marker_of(hint: Any) -> tuple[ShapeSpecMarker | None, bool]:
    """The marker of an annotation, and whether it admits ``None`` (``Optional[...]``)."""
    if typing.get_origin(hint) is Annotated:
        found = [m for m in hint.__metadata__ if isinstance(m, ShapeSpecMarker)]
        return (found[-1] if found else None), False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        optional = type(None) in args
        for arg in args:
            marker, _ = _marker_of(arg)
            if marker is not None:
                return marker, optional
    return _jaxtyping_marker(hint), False


def _jaxtyping_marker(hint: Any) -> ShapeSpecMarker | None:
    """The marker of a jaxtyping annotation (``jaxtyping.Float[Array, "b n"]``), whose class
    carries the shape string and dtype names (looked at only when jaxtyping is imported)."""
    jaxtyping = sys.modules.get("jaxtyping")
    abstract = getattr(jaxtyping, "AbstractArray", None)
    if abstract is None or not isinstance(hint, type) or not issubclass(hint, abstract) \
            or hint is abstract:
        return None
    array: Any = hint  # a jaxtyping class: dtypes, dtype and dim_str are jaxtyping's (untyped)
    dtypes = array.dtypes
    family = "{" + ",".join(sorted(dtypes)) + "}" if isinstance(dtypes, list | tuple) else None
    name = getattr(array.dtype, "__name__", "Shaped")
    return ShapeSpecMarker(parse_annotation(array.dim_str), family, family=f"jaxtyping.{name}")


def known_family(name: str) -> str | None:
    """The family key a dtype word names (``int``, ``Float32``, ``uint8``...), or ``None``.

    >>> known_family("Int"), known_family("float32"), known_family("Float32"), known_family("x")
    ('int', 'float32', 'float32', None)
    """
    key = name.strip().lower()
    if key in ("any", "shaped"):
        return "num"
    return key if key in _FAMILIES or key in _KNOWN_DTYPES else None


def family_kind(family: str | None) -> str:
    """The symbolic kind (``"c"``, ``"f"``, ``"i"``, ``"b"``) of a dtype family, for
    ``tensig.verify``.

    >>> family_kind("int"), family_kind("{int32,uint8}"), family_kind("complex"), family_kind(None)
    ('i', 'i', 'c', 'f')
    """
    if family is None:
        return "f"
    test = _family_test(family)
    kinds = {dtype_kind(n) for n in _KNOWN_DTYPES if test(n)}
    if kinds in ({"bool"}, {"complex"}):
        return kinds.pop()[0]
    return "i" if kinds == {"int"} or family == "key" else "f"


def _result_of(hint: Any) -> tuple[ShapeSpecMarker | tuple[ShapeSpecMarker | None, ...] | None,
                                    bool]:
    marker, optional = _marker_of(hint)
    if marker is not None:
        return marker, optional
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if args and args[-1] is not Ellipsis:
            elements = tuple(_marker_of(a)[0] for a in args)
            if any(m is not None for m in elements):
                return elements, False
    return None, False


def signature_of(fn: Callable[..., Any],
                 localns: dict[str, Any] | None = None) -> FunctionSignature:
    """Read the shape annotations of ``fn``; ``localns`` resolves string annotations naming
    locals of its defining scope.  A name that is a size in one annotation and a row variable
    in another raises :class:`tensig.SpecSyntaxError`."""
    func = fn.func if isinstance(fn, functools.partial) else fn  # a partial: its function's
    try:                                                         # hints, its own parameters
        hints = typing.get_type_hints(func, localns=localns, include_extras=True)
    except Exception as e:  # an unresolvable forward reference, typically
        name = getattr(func, "__qualname__", repr(func))
        raise TypeError(f"cannot read the annotations of {name}(): {e}; with `from __future__ "
                        "import annotations`, names in annotations must be visible from the "
                        "function's module (or its defining scope, when decorated there)") from e
    params: list[ParameterSpec] = []
    position = 0
    for p in inspect.signature(fn).parameters.values():
        positional = p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        marker, optional = _marker_of(hints.get(p.name))
        if marker is not None:
            params.append(ParameterSpec(p.name, position if positional else None, p.kind, marker,
                                        optional or p.default is None, p.default))
        position += positional
    result, result_optional = _result_of(hints.get("return"))
    qualname = getattr(func, "__qualname__", getattr(func, "__name__", "function"))
    sig = FunctionSignature(qualname.rsplit("<locals>.", 1)[-1], tuple(params), result,
                            result_optional)
    _check_signature_names(sig)
    return sig


def _check_signature_names(sig: FunctionSignature) -> None:
    """A name is a size everywhere in a signature or a row variable everywhere."""
    sizes: dict[str, str] = {}
    for label, m in sig.markers():
        for name in m.shape.names:
            sizes.setdefault(name, label)
    for label, m in sig.markers():
        spans = m.shape.item_spans
        for item, span in zip(m.shape.items, spans or [(0, 0)] * len(m.shape.items),
                              strict=True):
            if isinstance(item, RowVariable) and item.name in sizes:
                raise SpecSyntaxError(
                    m.shape.text, span[0], f"{sig.name}(): {label!r} uses ..{item.name}.. as a "
                    f"row variable, but {sizes[item.name]!r} uses {item.name!r} as a size",
                    hint="rename one of them", end=span[1])
