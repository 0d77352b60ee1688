"""verify on three ops whose small sizes once passed code that fails there: torch's ``chunk``
(fewer, unequal pieces), in-place writes into an ``expand``ed tensor (memory shared between
elements), and NumPy's ``sliding_window_view`` (a window longer than its axis).  Each oracle is
a concrete run of the same function at several sizes, the smallest among them."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from arrays import clean, kinds
from tensig import Float
from tensig.check.verify import verify


def _fails(fn, *shapes) -> bool:
    """Whether a concrete run of ``fn`` on zero tensors (or NumPy arrays) of ``shapes`` raises."""
    try:
        fn(*(torch.zeros(s) if isinstance(s, tuple) else s for s in shapes))
    except (RuntimeError, ValueError):
        return True
    return False


def _messages(report, kind: str) -> list[str]:
    return [f.message for f in report if f.kind == kind]


# -- torch.chunk: ceil(n / chunks) per piece, the last shorter or missing --------------------


def swiglu(x: Float[torch.Tensor, "B T 2*D"]) -> Float[torch.Tensor, "B T D"]:
    """LLaMA-style gated MLP: the projection's halves, one gating the other."""
    a, gate = x.chunk(2, -1)
    return a * F.silu(gate)


def test_chunk_of_an_even_axis_is_exact():
    assert clean(verify(swiglu))
    assert not any(_fails(swiglu, (2, 3, 2 * d)) for d in (1, 2, 3))


def ddpm_split(out: Float[torch.Tensor, "B 1 H W"]) -> Float[torch.Tensor, "B 1 H W"]:
    """A DDPM head read as ``eps, var`` where the model was built without learned variance:
    one channel, so torch returns one chunk and the unpacking fails at every size."""
    eps, var = out.chunk(2, dim=1)
    return eps * var.exp()


def test_chunk_of_a_size_one_axis_is_not_ok():
    """It was traced as [B, 0, H, W] halves under 'requires 1 divisible by 2', an assumption
    no size meets; torch's one chunk stops the unpacking, as it does here."""
    assert all(_fails(ddpm_split, (b, 1, h, 3)) for b in (1, 2) for h in (1, 4))
    r = verify(ddpm_split)
    assert not r.ok and any("unpack" in n for n in r.notes), str(r)


def halves_product(x: Float[torch.Tensor, "B 5"]) -> Float[torch.Tensor, "B _"]:
    a, b = torch.chunk(x, 2, dim=1)
    return a * b


def test_chunk_of_an_odd_literal_axis_gives_unequal_pieces():
    """torch's halves of 5 are 3 and 2: their product fails at every ``B`` (it was an
    assumption, 'requires 5 divisible by 2')."""
    assert all(_fails(halves_product, (b, 5)) for b in (1, 2, 3))
    assert "broadcast" in kinds(verify(halves_product))


def first_of_three(x: Float[torch.Tensor, "B 4"]) -> Float[torch.Tensor, "B 2"]:
    return x.chunk(3, dim=-1)[0]


def test_chunk_into_more_pieces_than_fit_is_exact():
    """torch splits 4 into 3 chunks as [2, 2] (ceil(4 / 3) each): the declared [B, 2] holds (a
    false 'returns [B, 1]' before)."""
    assert [c.shape[1] for c in torch.zeros(2, 4).chunk(3, -1)] == [2, 2]
    assert first_of_three(torch.zeros(3, 4)).shape == (3, 2)
    assert clean(verify(first_of_three))


def glu_halves(x: Float[torch.Tensor, "B T"]) -> Float[torch.Tensor, "B _"]:
    a, b = x.chunk(2, -1)
    return a * torch.sigmoid(b)


def test_chunk_of_a_symbolic_axis_assumes_what_excludes_size_one():
    """At ``T = 1`` one chunk comes back (and at odd ``T`` unequal ones): the warning's
    condition must exclude both."""
    assert _fails(glu_halves, (2, 1)) and _fails(glu_halves, (2, 5))
    assert not _fails(glu_halves, (2, 4))
    assert _messages(verify(glu_halves), "assumption") == ["requires T divisible by 2"]
