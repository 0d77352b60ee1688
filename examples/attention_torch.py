"""Multi-head attention in PyTorch: a correct block, and a reshape that should be a transpose.

``tensig verify examples/attention_torch.py`` proves the first for all B and T and finds the
bug in the second, which runs (and trains) at any size.
"""

from __future__ import annotations

import math

import torch

from tensig import Bool, Float

HEADS = 4
proj = torch.nn.Linear(64, 64)


def attention(x: Float[torch.Tensor, "B, T, 64"], pad: Bool[torch.Tensor, "B, T"]
              ) -> Float[torch.Tensor, "B, T, 64"]:
    b, t, d = x.shape
    q = proj(x).view(b, t, HEADS, d // HEADS).transpose(1, 2)
    scores = q @ q.transpose(-1, -2) / math.sqrt(d // HEADS)
    scores = scores.masked_fill(~pad[:, None, None, :], float("-inf"))
    causal = torch.tril(torch.ones(t, t)) == 0
    weights = torch.softmax(scores.masked_fill(causal, float("-inf")), dim=-1)
    return (weights @ q).transpose(1, 2).reshape(b, t, d)


def merge_heads_bug(att: Float[torch.Tensor, "B, 4, T, 16"]) -> Float[torch.Tensor, "B, T, 64"]:
    """The heads are merged with a reshape where a transpose was meant first."""
    b, h, t, e = att.shape
    return att.reshape(b, t, h, e).reshape(b, t, h * e)
