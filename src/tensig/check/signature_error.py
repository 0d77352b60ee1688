"""A failed shape check as data (:class:`_Mismatch`) and the error that words it.

The decorator's interpreter (:mod:`tensig.check.interpreter`) raises a :class:`_Mismatch` at the
first item that does not fit; the message is built here, once, from the mismatch and the call's
bindings with their origins: :class:`SignatureError` names the function, the argument, the
axis, the expected item, the size found and where the conflicting name was bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tensig.core.annotations import AnnotationShape, words_hint
from tensig.core.errors import ShapeError

_ARGS = "{}"  # the binding that holds a call's arguments, for deferred ``{name}`` sizes


@dataclass(eq=False, repr=False, kw_only=True)
class SignatureError(ShapeError):
    """A call does not fit its function's shape annotations (a :class:`tensig.ShapeError`).

    Besides :class:`~tensig.ShapeError`'s attributes it carries ``function`` (the qualified
    name), ``argument`` (the parameter name, ``"return"`` or ``"return[i]"``), ``axis`` (the
    array axis, ``None`` for a rank or dtype mismatch), ``expected`` (the annotation's item for
    that axis, or the whole annotation), ``actual`` (the size, sizes or shape found) and
    ``bound_by`` (where the conflicting name was bound first, or ``None``).
    """

    function: str
    argument: str
    axis: int | None
    expected: str
    actual: object
    bound_by: str | None = None


class _Mismatch(Exception):
    """Raised inside a call's check; turned into a :class:`SignatureError` with full context."""

    def __init__(self, kind: str, label: str, ann: AnnotationShape | None, shape: Any,
                 axis: int | None = None, index: int | None = None, **facts: Any):
        super().__init__(kind)
        self.kind = kind
        self.label = label
        self.ann = ann  # the annotation checked (None: the return value is no tuple)
        self.shape = shape
        self.axis = axis
        self.index = index
        self.facts = facts


def _where(label: str) -> str:
    if label == "return":
        return "the return value"
    if label.startswith("return["):
        return f"the return value's element {label[7:-1]}"
    return f"argument {label!r}"


def shape_text(shape: Any) -> str:
    """A shape written as Python writes a tuple, each size (an int or a dim) by ``str``."""
    items = [str(s) for s in shape]
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def _origin_text(origin: tuple[Any, ...]) -> str:
    label, axis, _, via = origin
    if label == "given":
        return "given"
    if isinstance(via, int):  # a row variable of ``via`` axes
        axes = f"axes {axis}..{axis + via - 1}" if via else "(no axes)"
        return f"bound by {_where(label)} {axes}"
    text = f"bound by {_where(label)} axis {axis}"
    if via is not None:
        text += f" (from {via[0]} = {via[1]})"
    return text


def _display(key: str) -> str:
    """How a row variable's binding key reads in a message: ``..v..``, ``... (batch row)``."""
    return f"... ({key[3:]} row)" if key.startswith("...") else f"..{key}.."


def _swap_hint(size: Any, name: str, env: dict[str, Any],
               origins: dict[str, tuple[Any, ...]]) -> str | None:
    other = next((k for k, v in env.items() if v == size and k != name and isinstance(v, int)
                  and not isinstance(v, bool)), None)
    if other is None:
        return None
    return (f"{size} is the size of {other} ({_origin_text(origins[other])}): are {name} and "
            f"{other} mixed up (a wrong axis or a swap)?")


def _rank_hint(m: _Mismatch, ann: AnnotationShape) -> str | None:
    shape = tuple(m.shape)
    if ann.rank is None:
        return None
    if len(shape) == ann.rank + 1 and 1 in shape:
        return (f"axis {shape.index(1)} of size 1 has no place in the annotation: squeeze it, "
                "or annotate it (a fixed 1)")
    if len(shape) + 1 == ann.rank and 1 in ann.items:
        return (f"the annotation has a size-1 axis at {ann.items.index(1)}: insert it "
                "(x[:, None] or x.unsqueeze)")
    return None


def _needed_rank(ann: AnnotationShape, env: dict[str, Any],
                 origins: dict[str, tuple[Any, ...]]) -> tuple[str, str]:
    """How many axes an annotation needs given the bound row variables, and which are bound."""
    if ann.rank is not None:
        return str(ann.rank), ""
    keys = [v.key for v in ann.row_variables]
    known = [k for k in dict.fromkeys(keys) if k in env]
    need = ann.min_rank + sum(len(env[k]) for k in keys if k in env)
    text = str(need) if len(known) == len(set(keys)) else f"at least {need}"
    bound = "".join(f" with {_display(k)} = {shape_text(env[k])} {_origin_text(origins[k])}"
                    for k in known)
    return text, bound


def _reason(fname: str, m: _Mismatch, ann: AnnotationShape, env: dict[str, Any],
            origins: dict[str, tuple[Any, ...]]) -> tuple[str, str, Any, str | None]:
    """``(reason, expected, actual, bound_by)`` for a mismatch."""
    where = _where(m.label)
    item = "" if m.index is None else str(ann.items[m.index]).replace("typing.Any", "_")
    size = None if m.axis is None else m.shape[m.axis]
    head = f"{fname}(): {where} axis {m.axis} ({item!r}) has size {size}, but"
    f = m.facts
    if m.kind == "rank":
        need, bound = _needed_rank(ann, env, origins)
        return (f"{fname}(): {where} has {len(m.shape)} axes (shape {shape_text(m.shape)}), "
                f"but its annotation {ann.text!r} has {need}{bound}", ann.text, tuple(m.shape),
                None)
    if m.kind == "name":
        bound_by = _origin_text(origins[f["name"]])
        return f"{head} {f['name']} = {f['bound']} was {bound_by}", item, size, bound_by
    if m.kind == "fixed":
        return (f"{fname}(): {where} axis {m.axis} has size {size}, but the annotation fixes it "
                f"to {item}", item, size, None)
    if m.kind == "expr":
        expr = f["expr"]
        uses = ", ".join(f"{n} = {env[n]} ({_origin_text(origins[n])})" for n in expr.symbols
                         if n != _ARGS and n in env)
        return f"{head} {expr.text} = {f['value']} with {uses}", item, size, uses
    if m.kind == "apart":  # two expressions no size decides: one fixes the other
        label, _, shape, axis, _ = f["where"]
        other = f"{f['other'].text} has size {shape[axis]} at {_where(label)} axis {axis}"
        return f"{head} {other}, so {f['expr'].text} = {f['value']}", item, size, other
    if m.kind == "solve":
        expr, name = f["expr"], f["name"]
        free = [n for n in sorted(expr.symbols) if n == name or n not in env]  # T + S of 5/2
        uses = "".join(f", {n} = {env[n]}" for n in expr.symbols if n not in free)
        return (f"{head} no whole {', '.join(free)} >= 0 give{'s' * (len(free) == 1)} "
                f"{expr.text} = {size}{uses}", item, size, None)
    if m.kind == "rowvar":
        key, segment = f["name"], f["segment"]
        bound_by = _origin_text(origins[key])
        assert m.axis is not None  # a row variable's mismatch is at its first axis
        return (f"{fname}(): {where} axes {m.axis}..{m.axis + len(segment) - 1} ({item}) have "
                f"sizes {shape_text(segment)}, but {_display(key)} = {shape_text(f['bound'])} "
                f"was {bound_by}", item, segment, bound_by)
    if m.kind == "ambiguous":
        names = " and ".join(_display(k) for k in f["names"])
        return (f"{fname}(): {where} has shape {shape_text(m.shape)}: cannot tell how many "
                f"axes belong to {names}; bind all but one of them in an earlier argument",
                ann.text, tuple(m.shape), None)
    assert m.kind == "dtype", m.kind
    return (f"{fname}(): {where} has dtype {f['dtype']}, but its annotation "
            f"{f['marker']!r} needs {f['marker'].need}", f["marker"].dtype, f["dtype"], None)


_NOT_AN_ARRAY = {  # mismatches that are no shape's: a TypeError
    "noshape": "{where} is a {type}, which has no .shape; its annotation is {marker!r}",
    "badshape": "{where} is a {type} whose .shape is {found!r:.60}, not a tuple of sizes; its "
                "annotation is {marker!r}",
    "wrapper": "{where} is a {type}, but its annotation is {marker!r}",
    "none": "{where} is None, but its annotation {marker!r} is not Optional",
    "notuple": "the return value is a {type}, not a tuple of {length} as annotated",
}


def _error(fname: str, m: _Mismatch, env: dict[str, Any],
           origins: dict[str, tuple[Any, ...]]) -> Exception:
    """The user-facing error for a mismatch (a :class:`SignatureError` or a ``TypeError``)."""
    where = _where(m.label)
    if m.kind in _NOT_AN_ARRAY:
        return TypeError(f"{fname}(): " + _NOT_AN_ARRAY[m.kind].format(
            where=where, type=type(m.shape).__name__, **m.facts))
    ann = m.ann
    assert ann is not None, m.kind  # only "notuple" has no annotation
    reason, expected, actual, bound_by = _reason(fname, m, ann, env, origins)
    spans = ann.item_spans
    span = spans[m.index] if m.index is not None and m.index < len(spans) else (0, len(ann.text))
    lines = [f"{where} has shape {shape_text(m.shape)}"]
    name: str | None = m.facts.get("name")
    if name is not None and m.kind in ("name", "rowvar") and origins[name][0] != "given":
        origin = origins[name]
        shown = _display(name) if m.kind == "rowvar" else name
        value = shape_text(env[name]) if isinstance(env[name], tuple) else env[name]
        lines.append(f"{shown} = {value}: {_origin_text(origin)} "
                     f"(shape {shape_text(origin[2])})")
    hint = words_hint(ann)
    if hint is None and m.kind in ("name", "expr", "solve") and m.axis is not None:
        item = "_" if m.index is None else str(ann.items[m.index])
        hint = _swap_hint(m.shape[m.axis], name or item, env, origins)
    if hint is None and m.kind == "rank":
        hint = _rank_hint(m, ann)
    return SignatureError(reason, function=fname, argument=m.label, axis=m.axis,
                          expected=expected, actual=actual, bound_by=bound_by, spec=ann.text,
                          span=(span[0], max(span[1], span[0] + 1)), label=name,
                          sizes=_sizes(m, env), origins=lines, hint=hint)


def _sizes(m: _Mismatch, env: dict[str, Any]) -> tuple[Any, ...]:
    name = m.facts.get("name")
    if m.axis is None:
        return (tuple(m.shape),)
    actual = m.facts.get("segment", m.shape[m.axis])
    expected = env.get(name) if name is not None else m.facts.get("value")
    return (actual,) if expected is None else (actual, expected)

