"""verify on three ops whose small sizes once passed code that fails there: torch's ``chunk``
(fewer, unequal pieces), in-place writes into an ``expand``ed tensor (memory shared between
elements), and NumPy's ``sliding_window_view`` (a window longer than its axis).  Each oracle is
a concrete run of the same function at several sizes, the smallest among them."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from numpy.lib.stride_tricks import sliding_window_view

from arrays import clean, kinds
from tensig import Bool, Float
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


def odd_halves(x: Float[torch.Tensor, "B 2*T+1"]) -> Float[torch.Tensor, "B T"]:
    a, b = x.chunk(2, -1)
    return a * b


def test_chunk_of_an_axis_odd_at_every_size_stops_the_trace():
    """torch's halves of ``2*T + 1`` are ``T + 1`` and ``T``: it passed with 'requires 2*T + 1
    divisible by 2', an assumption no size meets (at ``T = 1`` the 1 broadcasts)."""
    assert all(_fails(odd_halves, (2, 2 * t + 1)) for t in (2, 3, 5))
    r = verify(odd_halves)
    assert not r.ok and any("unequal pieces" in n for n in r.notes), str(r)


# -- np.array_split: unequal sections, the first n % k one longer ---------------------------


def first_half(x: Float[np.ndarray, "B 5"]) -> Float[np.ndarray, "B 3"]:
    return np.array_split(x, 2, axis=1)[0]


def test_array_split_of_an_odd_literal_axis_is_exact():
    """NumPy's halves of 5 are 3 and 2 (np.split's equal-division error was reported)."""
    assert [p.shape[1] for p in np.array_split(np.zeros((2, 5)), 2, axis=1)] == [3, 2]
    assert first_half(np.zeros((2, 5))).shape == (2, 3)
    assert clean(verify(first_half)), str(verify(first_half))


def k_folds(x: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "N D"]:
    """Cross-validation folds put back together: any ``N`` (a fold may be empty)."""
    folds = np.array_split(x, 3)
    return np.concatenate([*folds[1:], folds[0]])


def test_array_split_of_a_symbolic_axis_needs_no_divisibility():
    assert not any(_fails(k_folds, np.zeros((n, 2))) for n in (1, 2, 4, 5))
    assert clean(verify(k_folds)), str(verify(k_folds))


# -- in-place writes into an expanded tensor -------------------------------------------------


def relative_bias(scores: Float[torch.Tensor, "B H T T"], bias: Float[torch.Tensor, "H T T"]
                  ) -> Float[torch.Tensor, "B H T T"]:
    """A positional bias broadcast over the batch by ``expand``, then written in place: torch
    refuses where the batch is larger than 1 (its rows share one memory)."""
    b = bias[None].expand(scores.shape[0], -1, -1, -1)
    b += scores
    return b


def test_in_place_add_into_an_expanded_batch_is_assumed_single():
    assert not _fails(relative_bias, (1, 2, 3, 3), (2, 3, 3))
    assert _fails(relative_bias, (2, 2, 3, 3), (2, 3, 3))
    r = verify(relative_bias)
    assert [m.split(":")[0] for m in _messages(r, "assumption")] == ["assumes B == 1"], str(r)


def tiled_offsets(x: Float[torch.Tensor, "1 T"]) -> Float[torch.Tensor, "4 T"]:
    return x.expand(4, -1).add_(1.0)


def test_in_place_add_into_a_literal_expansion_is_an_error():
    assert all(_fails(tiled_offsets, (1, t)) for t in (1, 2, 5))
    r = verify(tiled_offsets)
    assert kinds(r) == ["op-shape"] and "add_" in r.findings[0].message, str(r)


def test_expand_as_and_broadcast_to_share_memory_too():
    def via_expand_as(x: Float[torch.Tensor, "1 T"], y: Float[torch.Tensor, "B T"]
                      ) -> Float[torch.Tensor, "B T"]:
        return x.expand_as(y).mul_(y)

    def via_broadcast_to(x: Float[torch.Tensor, "T"], y: Float[torch.Tensor, "B T"]
                         ) -> Float[torch.Tensor, "B T"]:
        return torch.broadcast_to(x, y.shape).sigmoid_()

    for fn, first in ((via_expand_as, (1, 3)), (via_broadcast_to, (3,))):
        assert not _fails(fn, first, (1, 3)) and _fails(fn, first, (2, 3))
        assert kinds(verify(fn)) == ["assumption"], fn.__name__


@pytest.mark.filterwarnings("ignore:Use of masked_fill_ on expanded tensors")
def test_copies_and_overlap_tolerant_writes_of_an_expansion_pass():
    """``clone``/``contiguous`` copy; ``masked_fill_`` and ``zero_`` accept shared memory."""
    def copied(x: Float[torch.Tensor, "1 T"], y: Float[torch.Tensor, "B T"]
               ) -> Float[torch.Tensor, "B T"]:
        return x.expand(y.shape[0], -1).clone().add_(y) + x.expand_as(y).contiguous().mul_(y)

    def filled(x: Float[torch.Tensor, "1 T"], m: Bool[torch.Tensor, "B T"]
               ) -> Float[torch.Tensor, "B T"]:
        return x.expand(m.shape[0], -1).masked_fill_(m, 0.0) + x.expand_as(m).zero_()

    assert not _fails(copied, (1, 3), (2, 3))
    assert not _fails(filled, (1, 3), torch.ones(2, 3, dtype=torch.bool))
    assert clean(verify(copied)) and clean(verify(filled))


def test_jax_in_place_operators_rebind_a_broadcast():
    """JAX's ``+=`` makes a new array: a broadcast one may be added to."""
    def pos_bias(x: Float[jnp.ndarray, "T"], y: Float[jnp.ndarray, "B T"]
                 ) -> Float[jnp.ndarray, "B T"]:
        b = jnp.broadcast_to(x, y.shape)
        b += y
        return b

    assert pos_bias(jnp.zeros(3), jnp.ones((2, 3))).shape == (2, 3)
    assert clean(verify(pos_bias))


# -- sliding_window_view: a window no longer than its axis -----------------------------------


def frames(wave: Float[np.ndarray, "B T"]) -> Float[np.ndarray, "B _ 400"]:
    """Speech framing: 25 ms windows every 10 ms at 16 kHz."""
    return sliding_window_view(wave, 400, axis=-1)[:, ::160]


def test_sliding_window_assumes_the_window_fits():
    """NumPy raises below 400 samples; it passed silently."""
    assert _fails(frames, np.zeros((2, 399))) and not _fails(frames, np.zeros((2, 400)))
    r = verify(frames)
    assert [m.split(":")[0] for m in _messages(r, "assumption")] == ["assumes 400 <= T"], str(r)


def test_sliding_window_longer_than_its_axis_at_every_size_is_an_error():
    def too_long(x: Float[np.ndarray, "B T"]) -> Float[np.ndarray, "B _ _"]:
        return sliding_window_view(x, x.shape[1] + 1, axis=1)

    assert all(_fails(too_long, np.zeros((2, t))) for t in (1, 2, 7))
    assert kinds(verify(too_long)) == ["op-shape"]
