"""verify on views of an ``expand``ed tensor: a transpose, slice, unsqueeze, view, narrow,
select, diagonal... of one still shares memory between elements, and torch refuses most writes
into it where the expanded size is above 1; an index that drops the shared axis, a slice of
length 1 along it, advanced indexing and a copy (clone, arithmetic, a reshape torch cannot
view) end the sharing.  Each oracle is a concrete torch run at B = 1 and B = 3."""

from __future__ import annotations

import pytest
import torch

from arrays import clean
from tensig import Float
from tensig.check.verify import verify

B_T = Float[torch.Tensor, "B T"]


def _fails(fn, b: int) -> bool:
    """Whether a concrete run of ``fn`` with a batch of ``b`` (and T = 6) raises."""
    try:
        fn(torch.zeros(1, 6), torch.zeros(b, 6))
    except RuntimeError:
        return True
    return False


def _e(b, x):
    return b.expand(x.shape[0], -1)  # [1, T] -> [B, T]: rows share one memory


SHARED = {  # a write into each fails where B > 1
    "t": lambda b, x: _e(b, x).t().add_(1.0),
    "mT": lambda b, x: _e(b, x).mT.add_(1.0),
    "transpose": lambda b, x: _e(b, x).transpose(0, 1).mul_(2.0),
    "permute": lambda b, x: _e(b, x).permute(1, 0).mul_(2.0),
    "slice": lambda b, x: _e(b, x)[:, :4].mul_(2.0),
    "strided slice": lambda b, x: _e(b, x)[::2].mul_(2.0),
    "none index": lambda b, x: _e(b, x)[None, :, 1:].mul_(2.0),
    "unsqueeze": lambda b, x: _e(b, x).unsqueeze(0).add_(1.0),
    "view": lambda b, x: _e(b, x).view(x.shape[0], x.shape[1]).add_(1.0),
    "reshape split": lambda b, x: _e(b, x).reshape(x.shape[0], x.shape[1], 1).add_(1.0),
    "expand again": lambda b, x: _e(b, x)[None].expand(1, -1, -1).add_(1.0),
    "narrow": lambda b, x: _e(b, x).narrow(1, 0, 2).add_(1.0),
    "select": lambda b, x: _e(b, x).select(1, 0).add_(1.0),
    "movedim": lambda b, x: _e(b, x).movedim(0, 1).add_(1.0),
    "diagonal": lambda b, x: _e(b, x)[:, None].expand(-1, x.shape[1], -1).diagonal(0, 1, 2)
    .add_(1.0),
    "split": lambda b, x: _e(b, x).split([1, x.shape[1] - 1], 1)[1].add_(1.0),
    "chunk": lambda b, x: _e(b, x).chunk(2, 1)[0].add_(1.0),
    "unbind": lambda b, x: _e(b, x).unbind(1)[0].add_(1.0),
    "in-place op": lambda b, x: _e(b, x).t().add_(1.0).mul_(2.0),
    "iadd": lambda b, x: _e(b, x).t().__iadd__(1.0),
    "setitem column": lambda b, x: _e(b, x).__setitem__((slice(None), 0), 1.0),
    "setitem all": lambda b, x: _e(b, x).__setitem__(slice(None), x),
}

COPIED = {  # each ends the sharing (or never had it): a write holds at every size
    "integer index": lambda b, x: _e(b, x)[0].add_(1.0),
    "slice of one": lambda b, x: _e(b, x)[:1].add_(1.0),
    "advanced index": lambda b, x: _e(b, x)[[0, 0]].add_(1.0),
    "clone": lambda b, x: _e(b, x).t().clone().add_(1.0),
    "contiguous": lambda b, x: _e(b, x).t().contiguous().add_(1.0),
    "arithmetic": lambda b, x: (_e(b, x).t() * 2).add_(1.0),
    "reshape merge": lambda b, x: _e(b, x).reshape(-1).add_(1.0),
    "diagonal of the other": lambda b, x: _e(b, x)[:, :1].diagonal().add_(1.0),
    "select the axis": lambda b, x: _e(b, x).select(0, 0).add_(1.0),
    "setitem row": lambda b, x: _e(b, x).__setitem__(0, 1.0),
}


def _traced(fn):
    def f(b: Float[torch.Tensor, "1 T"], x: B_T) -> torch.Tensor:
        return fn(b, x)
    return f


@pytest.mark.parametrize("name", sorted(SHARED))
def test_a_write_into_a_view_of_an_expansion_is_found(name):
    fn = SHARED[name]
    assert not _fails(fn, 1) and _fails(fn, 3)
    r = verify(_traced(fn))
    assert any(f.kind == "assumption" and "share memory" in f.message and "B" in f.message
               for f in r.findings), str(r)


@pytest.mark.parametrize("name", sorted(COPIED))
def test_a_write_into_a_copy_of_an_expansion_passes(name):
    fn = COPIED[name]
    assert not _fails(fn, 1) and not _fails(fn, 3)
    r = verify(_traced(fn))
    assert not any("share memory" in f.message for f in r.findings), str(r)


def test_a_view_torch_cannot_make_of_an_expansion_is_found():
    def merged(b: Float[torch.Tensor, "1 T"], x: B_T) -> torch.Tensor:
        return _e(b, x).view(-1)

    assert not _fails(merged, 1) and _fails(merged, 3)
    r = verify(merged)
    assert any("view of" in f.message for f in r.findings), str(r)


def test_a_copied_expansion_verifies_clean():
    def copied(b: Float[torch.Tensor, "1 T"], x: B_T) -> B_T:
        return _e(b, x).t().clone().add_(1.0).t() + x

    assert not _fails(copied, 3)
    assert clean(verify(copied)), str(verify(copied))
