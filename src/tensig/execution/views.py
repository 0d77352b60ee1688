"""Operand views: an operand's axis uses turned into an array whose axes are iterators, by a
few backend calls fixed at plan time.  A fixed index or a concatenation component slices; an
affine axis pads with the neutral element and becomes sliding windows whose window axis is the
kernel iterator (a reshape where windows tile their axis).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tensig.backends import Backend, neutral_max
from tensig.core.inference import AffineIndex, AxisUse, ConcatIndex, FixedIndex, Iter

__all__ = ["Key", "active_part", "components", "fill", "operand_view", "tiled_view",
           "window_pads"]


# an Iter id, or ("part", tensor, position, j) for an integer component of a concatenated axis
Key = int | tuple[str, int, int, int]


def components(uses: tuple[AxisUse, ...], t: int, pos: int) -> list[tuple[Key, int]]:
    """The key and size of each component of tensor ``t``'s concatenated axis ``pos``."""
    idx = uses[pos].index
    assert isinstance(idx, ConcatIndex)
    return [(part.id, int(part.size)) if isinstance(part, Iter) else (("part", t, pos, j), part)
            for j, part in enumerate(idx.parts)]


def active_part(uses: tuple[AxisUse, ...], t: int, pos: int, phase: dict[tuple[int, int], int]
                ) -> tuple[Key, int, int]:
    """The component of that axis a phase reads or writes: its key, offset and size."""
    comps = components(uses, t, pos)
    j = phase[(t, pos)]
    return comps[j][0], sum(n for _, n in comps[:j]), comps[j][1]


def fill(neutral: float, x: Any) -> float | int | bool:
    """The value padding ``x`` for an operation of neutral element ``neutral``: 0, or max's for
    ``x``'s own dtype (an int8 operand pads with -128); NaN pads a float ``x`` with NaN."""
    if neutral == 0:
        return neutral
    low = neutral_max(x.dtype)
    return neutral if neutral != neutral and isinstance(low, float) else low


def operand_view(uses: tuple[AxisUse, ...], t: int, phase: dict[tuple[int, int], int],
                  backend: Backend) -> tuple[Callable[[Any, float], Any] | None, list[Key],
                                             list[int]]:
    """How to view operand ``t``: ``(array, padding value) -> view`` (``None``: as it is),
    and the view's iterator keys and sizes (merged axes split before)."""
    tiled = tiled_view(uses)
    if tiled is not None:
        return tiled
    index: list[Any] = []  # basic indexing: fixed indices and concatenation components
    keys: list[Key] = []
    sizes: list[int] = []
    pads: list[tuple[int, int]] = []
    steps: list[slice] = []  # an offset axis's strided slice, per axis of the view
    # per window: (axis, span, stride, the index that keeps its output positions and takes
    # every ``dilation``-th cell of the window axis the view appends last); fixed by the plan
    windows: list[tuple[int, int, int, tuple[Any, ...]]] = []
    kernel_keys: list[tuple[Key, int]] = []
    for p, u in enumerate(uses):
        ix, size, pad, step = u.index, int(u.size), (0, 0), slice(None)
        if isinstance(ix, FixedIndex):
            index.append(ix.index)
            continue
        if isinstance(ix, ConcatIndex):
            key, off, size = active_part(uses, t, p, phase)
            index.append(slice(off, off + size))
        elif isinstance(ix, Iter):
            key = ix.id
            index.append(slice(None))
        else:
            assert isinstance(ix, AffineIndex)
            key, out = ix.over.id, int(ix.over.size)
            index.append(slice(None))
            if ix.kernel is None:
                need = ix.stride * (out - 1) + ix.offset + 1
                pad, step = (0, max(0, need - size)), slice(ix.offset, need, ix.stride)
            else:
                span, pad = window_pads(ix, size)
                windows.append((len(keys), span, ix.stride, (*[slice(None)] * len(keys),
                                slice(0, out), ..., slice(None, None, ix.dilation))))
                kernel_keys.append((ix.kernel.id, int(ix.kernel.size)))
            size = out
        keys.append(key)
        sizes.append(size)
        pads.append(pad)
        steps.append(step)
    keys += [kk for kk, _ in kernel_keys]
    sizes += [n for _, n in kernel_keys]
    basic = tuple(index)
    trivial_index = all(isinstance(i, slice) and i == slice(None) for i in basic)
    any_pad = any(p != (0, 0) for p in pads)
    strided_index = tuple(steps) if any(s != slice(None) for s in steps) else None

    def view(x: Any, neutral: float) -> Any:
        if not trivial_index:
            x = x[basic]
        if any_pad:
            x = backend.pad(x, pads, fill(neutral, x))
        if strided_index is not None:
            x = x[strided_index]
        for axis, span, stride, index in windows:
            x = backend.windows(x, axis, span, stride)[index]
        return x

    if trivial_index and not any_pad and strided_index is None and not windows:
        return None, keys, sizes
    return view, keys, sizes


def window_pads(ix: AffineIndex, size: int) -> tuple[int, tuple[int, int]]:
    """A windowed axis of ``size`` cells (``ix.kernel`` set): the window's span, and the
    (left, right) padding that makes every window fit -- left only when ``ix.padded``."""
    assert ix.kernel is not None
    span = (int(ix.kernel.size) - 1) * ix.dilation + 1
    left = span - (span + 1) // 2 if ix.padded else 0
    need = ix.stride * (int(ix.over.size) - 1) + span
    return span, (left, max(0, need - left - size))


def tiled_view(uses: tuple[AxisUse, ...]) -> tuple[Callable[[Any, float], Any], list[Key],
                                                      list[int]] | None:
    """An operand whose windowed axes are all tiled (back to back, nothing padded or left over)
    viewed by a reshape, which stays contiguous (5x a strided window view in torch); ``None``
    when some axis is not of that kind."""
    keys: list[Key] = []
    shape: list[int] = []
    if not any(isinstance(u.index, AffineIndex) for u in uses):
        return None
    for u in uses:
        ix, size = u.index, int(u.size)
        if isinstance(ix, Iter):
            keys.append(ix.id)
            shape.append(size)
        elif isinstance(ix, AffineIndex) and ix.kernel is not None and not ix.padded and \
                not ix.offset and ix.stride == (k := int(ix.kernel.size)) and \
                (ix.dilation == 1 or k == 1) and int(ix.over.size) * k == size:
            keys += [ix.over.id, ix.kernel.id]
            shape += [int(ix.over.size), k]
        else:
            return None

    def view(x: Any, neutral: float) -> Any:
        return x.reshape(shape)

    return view, keys, shape
