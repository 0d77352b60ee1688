"""Concrete projections: which loop (product-space axis) indexes each axis of each buffer.

Once shapes are solved, every operation's projections are made concrete: each tensor involved
gets, per axis in memory order, a product-space label (a string; a label repeated within one
tensor is a diagonal) or a fixed index (an ``int``: a broadcast size-1 axis is read at 0, a
placement writes at that index).  A gradient buffer has its tensor's shape, so it uses its
tensor's labels: backward code reuses the forward projections, as OCANNL's ``%cd`` does.

Logics: ``"."`` pointwise (rows broadcast right-aligned, kind by kind), ``"@"`` compose (the
first argument's input row contracts with the second's output row), ``"T"`` (input and output
rows swapped), or an einsum spec with labels and fixed indices (solved by
:func:`tensig.infer`, whose projections this reuses).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensig.core.errors import ShapeError
from tensig.core.inference import FixedIndex, Iter, infer
from tensig.core.shapes import Shape

__all__ = ["Labels", "OpProjection", "WindowedAxes", "project"]

Labels = tuple[str | int, ...]
ORDER = ("batch", "output", "input")


class WindowedAxes(ShapeError):
    """An einsum spec indexes an axis by an affine term (a convolution window, a stride) or a
    concatenation: one label per axis cannot say that.  Not a user error: the compiler runs
    such assignments by the lowering's windowed paths instead."""


def project(logic: str, lhs: Shape, args: Sequence[Shape]) -> tuple[Labels, list[Labels]]:
    """Labels of ``lhs`` and of each argument, in memory order."""
    if logic == ".":
        return _pointwise(lhs, args)
    if logic == "@":
        return _compose(lhs, args)
    if logic == "T":
        return _transpose(lhs, args)
    return _einsum(logic, lhs, args)


def _row_labels(kind: str, shapes: Sequence[tuple[int, ...]], prefix: str
                ) -> list[list[str | int]]:
    """Right-aligned broadcasting of one row kind across ``shapes``."""
    n = max((len(s) for s in shapes), default=0)
    sizes = [1] * n
    for s in shapes:
        for j, d in enumerate(s):
            p = n - len(s) + j
            if d != 1:
                if sizes[p] not in (1, d):
                    raise ShapeError(f"pointwise {kind} axes do not broadcast: "
                                     f"{' vs '.join(map(str, shapes))}")
                sizes[p] = d
    out = []
    for s in shapes:
        labels: list[str | int] = []
        for j, d in enumerate(s):
            p = n - len(s) + j
            labels.append(0 if d == 1 and sizes[p] != 1 else f"{prefix}{kind[0]}{p}")
        out.append(labels)
    return out


def _concrete(shape: Shape) -> dict[str, tuple[int, ...]]:
    return {k: tuple(int(d) for d in shape.row(k)) for k in ORDER}  # type: ignore[arg-type]


def _assemble(rows: list[dict[str, list[str | int]]]) -> list[Labels]:
    return [tuple(r["batch"] + r["output"] + r["input"]) for r in rows]


def _pointwise(lhs: Shape, args: Sequence[Shape]) -> tuple[Labels, list[Labels]]:
    shapes = [_concrete(s) for s in (lhs, *args)]
    rows: list[dict[str, list[str | int]]] = [{} for _ in shapes]
    for kind in ORDER:
        for r, labels in zip(rows, _row_labels(kind, [s[kind] for s in shapes], "p"),
                             strict=True):
            r[kind] = labels
    out = _assemble(rows)
    return out[0], out[1:]


def _compose(lhs: Shape, args: Sequence[Shape]) -> tuple[Labels, list[Labels]]:
    if len(args) not in (2, 3):
        raise ShapeError(f"logic '@' relates two arguments (a third is pointwise with the "
                         f"result), got {len(args)}")
    c, a, b = (_concrete(s) for s in (lhs, *args[:2]))
    if len(a["input"]) != len(b["output"]):
        raise ShapeError(f"compose: input row {a['input']} does not match output row "
                         f"{b['output']}")
    batch = _row_labels("batch", [c["batch"], a["batch"], b["batch"]], "p")
    # the contracted axes; a size-1 side is read at 0 (OCANNL's broadcast inequality)
    ka, kb = _row_labels("input", [a["input"], b["output"]], "k")
    i = [f"i{j}" for j in range(len(b["input"]))]
    o = [f"o{j}" for j in range(len(a["output"]))]
    rows = [
        {"batch": batch[0], "input": i, "output": o},
        {"batch": batch[1], "input": ka, "output": o},
        {"batch": batch[2], "input": i, "output": kb},
    ]
    out = _assemble(rows)
    if len(args) == 3:  # the third argument reads the result's cells, broadcasting
        own, (_, third) = _pointwise(lhs, [lhs, args[2]])
        rename = dict(zip(own, out[0], strict=True))
        out.append(tuple(x if isinstance(x, int) else rename[x] for x in third))
    return out[0], out[1:]


def _transpose(lhs: Shape, args: Sequence[Shape]) -> tuple[Labels, list[Labels]]:
    (a,) = args
    c, x = _concrete(lhs), _concrete(a)
    batch = _row_labels("batch", [c["batch"], x["batch"]], "p")
    i = [f"i{j}" for j in range(len(c["input"]))]
    o = [f"o{j}" for j in range(len(c["output"]))]
    rows = [{"batch": batch[0], "input": i, "output": o},
            {"batch": batch[1], "input": o, "output": i}]
    out = _assemble(rows)
    return out[0], out[1:]


def _einsum(spec: str, lhs: Shape, args: Sequence[Shape]) -> tuple[Labels, list[Labels]]:
    r = infer(spec, *args, result=lhs)
    out: list[Labels] = []
    for uses in r.layout:
        labels: list[str | int] = []
        for u in uses:
            ix: Any = u.index
            if isinstance(ix, Iter):
                labels.append(f"e{ix.id}")
            elif isinstance(ix, FixedIndex):
                labels.append(ix.index)
            else:
                raise WindowedAxes(f"{spec!r}: affine and concatenated axes are executed by "
                                   "the einsum lowering, not by generic projections")
        out.append(tuple(labels))
    return out[-1], out[:-1]


class OpProjection:
    """The projections of an operation: its result tensor and its argument tensors.

    Backward code uses these (``logic=op_projection``) so that a gradient buffer is indexed
    like its tensor was in the forward operation.
    """

    __slots__ = ("_cached", "args", "logic", "result")

    def __init__(self, logic: str, result: Any, args: tuple[Any, ...]):
        self.logic, self.result, self.args = logic, result, args
        self._cached: tuple[tuple[Any, ...], dict[int, Labels]] | None = None

    def labels(self) -> dict[int, Labels]:
        """Each tensor's labels (by tensor id), projected once for the shapes the tensors have
        now (an operation's backward code asks once per gradient it feeds)."""
        shapes = (self.result.shape, *(a.shape for a in self.args))
        if self._cached is not None and self._cached[0] == shapes:
            return self._cached[1]
        out = self._project(shapes)
        self._cached = (shapes, out)
        return out

    def _project(self, shapes: tuple[Any, ...]) -> dict[int, Labels]:
        lhs, args = project(self.logic, shapes[0], list(shapes[1:]))
        out = {self.result.id: lhs}
        for t, labels in zip(self.args, args, strict=True):
            if t.id in out and out[t.id] != labels:
                raise ShapeError(f"{t.name!r} appears twice in one operation with different "
                                 "projections; this is not supported in backward code")
            out[t.id] = labels
        return out

    def __repr__(self) -> str:
        return f"projections of {self.result.name}"
