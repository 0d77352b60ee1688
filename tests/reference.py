"""A deliberately slow, obviously-correct loop interpreter of the generalized einsum notation.

This is a test oracle: it walks every point of the iteration space with ``itertools.product``
and reads / writes one cell at a time.  It uses :func:`tensig.infer` only for *sizes*
(``shape``, ``dims``, ``rows``, ``ellipses``) and never looks at ``Inferred.layout`` or
``Inferred.iterators``, so it is independent of the projection code it checks.

Arrays are in tensig memory order: batch, output, input.

>>> import numpy as np
>>> from tensig import Shape
>>> a = np.arange(6.0).reshape(2, 3)
>>> out, shape = reference("ij => ji", [a], [Shape(output=(2, 3))], op="einsum1")
>>> shape, bool((out == a.T).all())
(Shape('3,2'), True)

Semantics (see the OCANNL einsum notation):

* Iterators: one per label; one per element of each row variable (the ``...`` of a kind is
  that kind's reserved row variable); one fresh iterator per ``_`` occurrence; one fresh
  iterator per integer component of a concatenation and per integer factor of a merged axis.
* An axis is indexed by its label's iterator, its row-variable element's iterator, a fixed
  index (operand: slice; result: placement), an affine expression
  ``stride*over + dilation*kernel + offset - left_pad`` (a result is written there), for a
  concatenated axis ``offset_of_active_component + iterator_of_active_component``, or, for a
  merged axis ``(a, b, c)``, ``(i_a*|b| + i_b)*|c| + i_c`` (row-major, as a reshape).
* Reads outside ``[0, size)`` yield the accumulator's neutral element; writes there (a padded
  window of the result) write nothing.
* Concatenation is a sum type: the computation runs once per *phase*, a consistent choice of
  one active component for every concatenated axis; a tensor takes part in a phase iff every
  label it uses directly is active.  A phase iterates over the iterators of the tensors that
  take part in it (operands and result); it writes nothing if the result or every operand
  sits it out.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

import tensig
from tensig.core.notation import (
    KINDS,
    Affine,
    Concat,
    Fixed,
    Label,
    Merge,
    Placeholder,
    ShapeSpec,
)

__all__ = ["ACCUMULATE", "OPS", "reference"]

# op -> (how participating operand values combine, accumulation, number of operands or None)
OPS: dict[str, tuple[str, str, int | None]] = {
    "einsum": ("mul", "add", None),
    "einsum1": ("mul", "add", 1),
    "outer_sum": ("add", "add", 2),
    "tropical": ("add", "max", 2),
    "einmax1": ("mul", "max", 1),
    "concat": ("mul", "add", None),
}
ACCUMULATE = {"add": (0.0, lambda acc, v: acc + v), "max": (-math.inf, max)}

MEMORY_ORDER = ("batch", "output", "input")


# --------------------------------------------------------------------------------------------
# How one axis of one tensor is indexed
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class It:
    """Indexed by one iterator."""

    key: tuple


@dataclass(frozen=True)
class At:
    """Indexed by a constant (an operand slice, or a result placement)."""

    index: int


@dataclass(frozen=True)
class Aff:
    """Indexed by ``stride*over + dilation*kernel + offset - left_pad``."""

    stride: int
    over: tuple
    dilation: int
    kernel: tuple | None
    offset: int
    left_pad: int
    valid: bool


@dataclass(frozen=True)
class Cat:
    """A concatenated axis: ``parts`` are (component name or None, iterator key, size)."""

    parts: tuple[tuple[str | None, tuple, int], ...]


@dataclass(frozen=True)
class Shifted:
    """A concatenated axis within a phase: ``offset`` plus the active component's iterator."""

    offset: int
    key: tuple


@dataclass(frozen=True)
class Mrg:
    """A merged axis: the iterators ``keys`` (sizes ``sizes``) combined row-major."""

    keys: tuple[tuple, ...]
    sizes: tuple[int, ...]


Axis = It | At | Aff | Cat | Shifted | Mrg


@dataclass
class Tensor:
    """One operand (or the result): its axes in memory order and the labels it uses directly."""

    sizes: tuple[int, ...]
    axes: list[Axis]
    direct: set[str]


def _int(x: object, what: str) -> int:
    if not isinstance(x, int):
        raise TypeError(f"the reference interpreter needs concrete sizes; {what} is {x!r}")
    return x


def _coef(c: int | str, params: Mapping[str, int] | None) -> int:
    if isinstance(c, int):
        return c
    if params is None or c not in params:
        raise KeyError(f"the coefficient {c!r} is not given in params")
    return int(params[c])


def _left_pad(kernel_size: int, dilation: int) -> int:
    span = (kernel_size - 1) * dilation + 1
    return span - (span + 1) // 2


def _build_tensor(who: int | str, sspec: ShapeSpec, shape: tensig.Shape,
                  inferred: tensig.Inferred, params: Mapping[str, int] | None,
                  use_padding: bool | None) -> Tensor:
    """Describe how each axis of one tensor (``who``: operand number or "result") is indexed."""
    dims = inferred.dims
    per_kind: dict[str, list[Axis]] = {}
    direct: set[str] = set()
    for kind in KINDS:
        row = sspec.row(kind)
        sizes = [_int(s, f"{who} {kind} axis") for s in shape.row(kind)]
        n_var = len(sizes) - len(row.left) - len(row.right)
        if row.var is None:
            assert n_var == 0 and not row.left, (who, kind, row, sizes)
            written = list(row.right)
            var_axes: list[It] = []
        else:
            assert n_var >= 0, (who, kind, row, sizes)
            if row.var.name is None:
                var_sizes = tuple(inferred.ellipses[kind])
                base: tuple = ("ellipsis", kind)
            else:
                var_sizes = tuple(inferred.rows[row.var.name])
                base = ("rowvar", row.var.name)
            assert len(var_sizes) == n_var, (who, kind, row, sizes, var_sizes)
            got = tuple(sizes[len(row.left):len(row.left) + n_var])
            assert got == var_sizes, (who, kind, row, got, var_sizes)
            written = [*row.left, None, *row.right]
            var_axes = [It((*base, j)) for j in range(n_var)]
        out: list[Axis] = []
        pos = 0
        for a in written:
            if a is None:  # the row variable's elements
                out += var_axes
                pos += n_var
                continue
            size = sizes[pos]
            if isinstance(a, Label):
                direct.add(a.name)
                assert dims[a.name] == size, (who, kind, a, dims[a.name], size)
                out.append(It(("label", a.name)))
            elif isinstance(a, Placeholder):
                out.append(It(("placeholder", who, kind, pos)))
            elif isinstance(a, Fixed):
                assert a.index < size, (who, kind, a, size)
                out.append(At(a.index))
            elif isinstance(a, Affine):
                stride = _coef(a.stride, params)
                dilation = _coef(a.dilation, params)
                direct.add(a.over)
                kernel = None
                left_pad = 0
                # The offset form has no padding but may read outside: it is not "valid".
                valid = False
                if a.kernel is not None:
                    direct.add(a.kernel)
                    kernel = ("label", a.kernel)
                    padding = a.padding
                    if padding is None:
                        if use_padding is None:
                            raise ValueError(f"{a.render(True)!r} needs use_padding")
                        padding = "padded" if use_padding else "valid"
                    valid = padding == "valid"
                    if not valid:
                        left_pad = _left_pad(_int(dims[a.kernel], a.kernel), dilation)
                out.append(Aff(stride, ("label", a.over), dilation, kernel, a.offset, left_pad,
                               valid))
            elif isinstance(a, Concat):
                parts = []
                for j, p in enumerate(a.parts):
                    if isinstance(p, int):
                        parts.append((None, ("component", who, kind, pos, j), p))
                    else:
                        parts.append((p, ("label", p), _int(dims[p], p)))
                assert sum(s for _, _, s in parts) == size, (who, kind, a, parts, size)
                out.append(Cat(tuple(parts)))
            elif isinstance(a, Merge):
                # an integer factor is an anonymous axis of that size, its own iterator
                direct.update(p for p in a.parts if isinstance(p, str))
                factors = tuple(_int(dims[p], p) if isinstance(p, str) else p for p in a.parts)
                assert math.prod(factors) == size, (who, kind, a, factors, size)
                out.append(Mrg(tuple(("label", p) if isinstance(p, str) else
                                     ("factor", who, kind, pos, j)
                                     for j, p in enumerate(a.parts)), factors))
            else:  # pragma: no cover
                raise TypeError(a)
            pos += 1
        assert pos == len(sizes)
        per_kind[kind] = out
    all_sizes = tuple(_int(s, str(who)) for s in shape.dims)
    axes = [ax for kind in MEMORY_ORDER for ax in per_kind[kind]]
    assert len(axes) == len(all_sizes)
    return Tensor(all_sizes, axes, direct)


# --------------------------------------------------------------------------------------------
# Phases of concatenation
# --------------------------------------------------------------------------------------------


def _phases(tensors: list[Tensor]) -> list[list[list[Axis] | None]]:
    """Each phase: for each tensor, its axes resolved for the phase, or None if it sits out.

    A phase chooses one active component for every concatenated axis (of any tensor).  The
    choice is consistent when each label that is a concatenation component is chosen in every
    concatenated axis it is a component of, or in none (then it is inactive).  A tensor takes
    part iff every label it uses directly is active.
    """
    cats = [(ti, ai) for ti, t in enumerate(tensors) for ai, ax in enumerate(t.axes)
            if isinstance(ax, Cat)]
    member: dict[str, set[tuple[int, int]]] = {}
    for ti, ai in cats:
        for name, _, _ in tensors[ti].axes[ai].parts:
            if name is not None:
                member.setdefault(name, set()).add((ti, ai))
    phases = []
    for choice in itertools.product(*(range(len(tensors[ti].axes[ai].parts))
                                      for ti, ai in cats)):
        active = dict(zip(cats, choice, strict=True))
        chosen: dict[str, set[tuple[int, int]]] = {}
        for (ti, ai), k in active.items():
            name = tensors[ti].axes[ai].parts[k][0]
            if name is not None:
                chosen.setdefault(name, set()).add((ti, ai))
        if any(chosen.get(name, set()) not in (set(), where) for name, where in member.items()):
            continue
        inactive = set(member) - set(chosen)
        phase: list[list[Axis] | None] = []
        for ti, t in enumerate(tensors):
            if t.direct & inactive:
                phase.append(None)
                continue
            axes: list[Axis] = []
            for ai, ax in enumerate(t.axes):
                if isinstance(ax, Cat):
                    k = active[(ti, ai)]
                    axes.append(Shifted(sum(s for _, _, s in ax.parts[:k]), ax.parts[k][1]))
                else:
                    axes.append(ax)
            phase.append(axes)
        phases.append(phase)
    return phases


# --------------------------------------------------------------------------------------------
# The interpreter
# --------------------------------------------------------------------------------------------


def reference(spec: str, arrays: Sequence[np.ndarray], shapes: Sequence[tensig.Shape], *,
              op: str, params: Mapping[str, int] | None = None,
              use_padding: bool | None = None, result_shape: tensig.Shape | None = None,
              sizes: Mapping[str, int] | None = None) -> tuple[np.ndarray, tensig.Shape]:
    """Evaluate ``spec`` on ``arrays`` (memory order batch, output, input) by brute force.

    Returns the result array (float64, memory order batch, output, input) and its Shape.
    """
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; expected one of {', '.join(OPS)}")
    combine, accumulation, arity = OPS[op]
    if len(arrays) != len(shapes):
        raise ValueError("one shape per array")
    if arity is not None and len(arrays) != arity:
        raise ValueError(f"{op} takes {arity} operand(s), got {len(arrays)}")
    neutral, accumulate = ACCUMULATE[accumulation]
    parsed = tensig.parse(spec)
    if len(parsed.operands) != len(arrays):
        raise ValueError(f"{spec!r} has {len(parsed.operands)} operands, got {len(arrays)}")

    inferred = tensig.infer(spec, *shapes, op=op, params=params, use_padding=use_padding,
                            result=result_shape, sizes=sizes)
    out_shape = inferred.shape

    values = []
    for i, (arr, shape) in enumerate(zip(arrays, shapes, strict=True)):
        arr = np.asarray(arr, dtype=np.float64)
        want = tuple(_int(s, f"operand {i}") for s in shape.dims)
        if arr.shape != want:
            raise ValueError(f"operand {i}: array shape {arr.shape} is not {shape} "
                             f"in memory order {want}")
        values.append(arr)

    operands = [_build_tensor(i, s, shape, inferred, params, use_padding)
                for i, (s, shape) in enumerate(zip(parsed.operands, shapes, strict=True))]
    result = _build_tensor("result", parsed.result, out_shape, inferred, params, use_padding)
    out = np.full(result.sizes, neutral, dtype=np.float64)

    # Iterator sizes.
    extent: dict[tuple, int] = {}
    for name, size in inferred.dims.items():
        extent[("label", name)] = _int(size, name)
    for t in [*operands, result]:
        for ax, size in zip(t.axes, t.sizes, strict=True):
            if isinstance(ax, It) and ax.key[0] != "label":
                extent[ax.key] = size
            elif isinstance(ax, Cat):
                for _, key, s in ax.parts:
                    extent.setdefault(key, s)
            elif isinstance(ax, Mrg):
                extent.update((k, n) for k, n in zip(ax.keys, ax.sizes, strict=True)
                              if k[0] == "factor")

    for phase in _phases([*operands, result]):
        *op_axes, res_axes = phase
        if res_axes is None:
            continue  # the result sits this phase out: nothing is written
        live = [i for i, axes in enumerate(op_axes) if axes is not None]
        if not live:
            continue  # no operand takes part: the cells keep the neutral element

        # The phase iterates over the iterators of the tensors taking part in it.
        keys: list[tuple] = []
        for axes in [*(op_axes[i] for i in live), res_axes]:
            for ax in axes:
                used = ()
                if isinstance(ax, It):
                    used = (ax.key,)
                elif isinstance(ax, Aff):
                    used = (ax.over,) if ax.kernel is None else (ax.over, ax.kernel)
                elif isinstance(ax, Shifted):
                    used = (ax.key,)
                elif isinstance(ax, Mrg):
                    used = ax.keys
                for k in used:
                    if k not in keys:
                        keys.append(k)

        for point in itertools.product(*(range(extent[k]) for k in keys)):
            env = dict(zip(keys, point, strict=True))
            where = tuple(_index(ax, env) for ax in res_axes)
            if not all(0 <= j < n for j, n in zip(where, result.sizes, strict=True)):
                continue  # a window of the result reaching into its padding writes nothing
            vals = []
            for i in live:
                idx = tuple(_index(ax, env) for ax in op_axes[i])
                inside = all(0 <= j < n for j, n in zip(idx, operands[i].sizes, strict=True))
                if not inside:
                    for ax, j, n in zip(op_axes[i], idx, operands[i].sizes, strict=True):
                        assert not (isinstance(ax, Aff) and ax.valid and not 0 <= j < n), (
                            f"a valid affine axis read index {j} of {n} in operand {i}")
                vals.append(float(values[i][idx]) if inside else neutral)
            value = math.prod(vals) if combine == "mul" else sum(vals)
            out[where] = accumulate(out[where], value)
    return out, out_shape


def _index(ax: Axis, env: dict[tuple, int]) -> int:
    if isinstance(ax, It):
        return env[ax.key]
    if isinstance(ax, At):
        return ax.index
    if isinstance(ax, Aff):
        i = ax.stride * env[ax.over] + ax.offset - ax.left_pad
        if ax.kernel is not None:
            i += ax.dilation * env[ax.kernel]
        return i
    if isinstance(ax, Mrg):
        i = 0
        for key, n in zip(ax.keys, ax.sizes, strict=True):
            i = i * n + env[key]
        return i
    assert isinstance(ax, Shifted), ax
    return ax.offset + env[ax.key]
