"""Frames and cells: an argument splits into a *frame* (its leading axes) and a *cell* (the
trailing axes its cell rank names); the frames of one application agree by prefix, and the
longest is the *principal frame*.

A lifted function reaches these helpers as ``lf`` (a :class:`tensig.rank.Lifted`): they read
its name, cell ranks and parameter names only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tensig.core.errors import ShapeError

Rank = int | None


def _fmt(frame: Sequence[Any]) -> str:
    items = ", ".join(str(x) for x in frame)
    return f"({items},)" if len(frame) == 1 else f"({items})"


def _suffix_broadcasts(frames: Sequence[Sequence[Any]]) -> bool:
    try:
        np.broadcast_shapes(*[tuple(int(x) for x in f) for f in frames])
    except (ValueError, TypeError):
        return False
    return True


def principal_frame(fname: str, frames: Sequence[Sequence[Any]], who: Sequence[str]) -> tuple:
    """The longest frame, after checking that every other frame is a prefix of it.

    Sizes compare exactly (a size-1 axis does not stretch); the error names both frames.

    >>> principal_frame("f", [(2,), (2, 3)], ["argument 0", "argument 1"])
    (2, 3)
    >>> principal_frame("f", [(2, 4), (2, 3)], ["argument 0", "argument 1"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tensig.ShapeError: f: frame (2, 3) of argument 1 is not a prefix of the principal ...
    """
    if not frames:
        return ()
    best = 0
    for i, f in enumerate(frames):
        if len(f) > len(frames[best]):
            best = i
    principal = tuple(frames[best])
    for i, f in enumerate(frames):
        if principal[:len(f)] != tuple(f):
            raise _frame_error(fname, frames, who, i, best)
    return principal


def _frame_error(fname: str, frames: Sequence[Sequence[Any]], who: Sequence[str], i: int,
                 best: int) -> ShapeError:
    f, p = frames[i], frames[best]
    hint = "Remora matches frames from the left (prefix agreement) and a size-1 axis does not " \
           "stretch"
    if _suffix_broadcasts(frames):
        hint += ("; NumPy would broadcast these shapes from the right. To pair trailing axes, "
                 "raise the cell rank of the shorter argument (rank.rerank) so those axes are "
                 "part of its cell, or move the shared axes to the front")
    return ShapeError(f"{fname}: frame {_fmt(f)} of {who[i]} is not a prefix of the principal "
                      f"frame {_fmt(p)} from {who[best]}", operand=i, shape=_fmt(f),
                      sizes=(_fmt(f), _fmt(p)), hint=hint)


def _concrete_rank(r: Rank, n: int) -> int:
    """The cell rank of an argument of rank ``n``: ``None`` is all of it, a negative ``-k``
    all but its first ``k`` axes (J's and Remora's complementary rank)."""
    if r is None:
        return n
    return max(n + r, 0) if r < 0 else r


def _check_rank_value(fname: str, r: object) -> Rank:
    if r is None:
        return None
    if isinstance(r, bool) or not isinstance(r, int | np.integer):
        raise TypeError(f"{fname}: a cell rank is an int >= 0 or None (the whole argument), "
                        f"not {r!r}")
    return int(r)  # a negative rank -k is complementary: all but the first k axes


def _who(lf: Any, i: int) -> str:
    return f"argument {i} ({lf.type.param_name(i)})"


def _cell_rank(lf: Any, k: int, shape: tuple[Any, ...]) -> int:
    """The cell rank of ``lf``'s ``k``-th array argument, of shape ``shape``."""
    r = lf.ranks[k]
    if r is None or r < 0:
        return _concrete_rank(r, len(shape))
    if r > len(shape):
        i = lf.arrays[k]
        raise ShapeError(f"{lf.name}: {_who(lf, i)} has shape {_fmt(shape)}, of rank "
                         f"{len(shape)}, less than its cell rank {r}", operand=i,
                         shape=_fmt(shape), sizes=(len(shape), r),
                         hint=f"pass an array with at least {r} axes, or rerank {lf.name}")
    return r


def _split(lf: Any, shapes: Sequence[tuple[Any, ...]]
           ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], tuple[Any, ...]]:
    """The frames and cells of ``lf``'s array arguments of these shapes (sizes, or symbolic
    sizes for typeof), and their principal frame."""
    frames, cells = [], []
    for k, shape in enumerate(shapes):
        split = len(shape) - _cell_rank(lf, k, shape)
        frames.append(shape[:split])
        cells.append(shape[split:])
    return frames, cells, principal_frame(lf.name, frames, lf._who)
