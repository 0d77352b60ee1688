"""PyTorch code for ``tensig.verify`` in the style of public LLM, vision, detection, 3D, audio,
metric-learning, sampling and RL implementations (LLaMA/Mistral, Transformer-XL, BLOOM, Swin,
U-Net, FPN, ESPCN, MobileNet, PointNet, NeRF, VAEs, CLIP, SimCLR, RetinaNet, MAE, VQ-VAE, PPO,
nucleus sampling, EMA teachers): written for this corpus, nothing copied.

Each case is ``(name, correct, buggy, finding code)``; the buggy twin differs by one realistic
bug marked ``# BUG``.  ``tests/test_verify_realcode_torch2.py`` asserts that each correct one
verifies with no finding or note and each buggy one reports its code, with no note but, for
the cases in :data:`STOPS`, the one saying the trace stopped where torch rejected the operands
(fitted, an op torch refuses leaves no result shape to go on with).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange

from tensig import Bool, Float, Int

# -- large language models ---------------------------------------------------------------------


def rope_complex(xq: Float[torch.Tensor, "B T H 2*E"], freqs: Float[torch.Tensor, "T E"]
                 ) -> Float[torch.Tensor, "B T H 2*E"]:
    """LLaMA's rotary embedding through complex numbers: (real, imaginary) pairs, the angles
    of this sequence's positions as unit complex numbers, broadcast over batch and heads."""
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    xc = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    shape = [d if i == 1 or i == xc.ndim - 1 else 1 for i, d in enumerate(xc.shape)]
    out = torch.view_as_real(xc * freqs_cis.view(*shape)).flatten(3)
    return out.type_as(xq)


def rope_complex_bug(xq: Float[torch.Tensor, "B T H 2*E"], freqs: Float[torch.Tensor, "T E"]
                     ) -> Float[torch.Tensor, "B T H 2*E"]:
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    xc = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], 2, -1))  # BUG: halves
    shape = [d if i == 1 or i == xc.ndim - 1 else 1 for i, d in enumerate(xc.shape)]
    out = torch.view_as_real(xc * freqs_cis.view(*shape)).flatten(3)
    return out.type_as(xq)


def rope_half(q: Float[torch.Tensor, "B H T 2*E"], pos: Int[torch.Tensor, "B T"],
              inv_freq: Float[torch.Tensor, "E"]) -> Float[torch.Tensor, "B H T 2*E"]:
    """HF-style: cos/sin from position ids, unsqueezed at the head axis, rotate_half."""
    freqs = pos[:, :, None].float() * inv_freq[None, None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)
    x1, x2 = q[..., : q.shape[-1] // 2], q[..., q.shape[-1] // 2:]
    return q * cos + torch.cat((-x2, x1), dim=-1) * sin


def rope_half_bug(q: Float[torch.Tensor, "B H T 2*E"], pos: Int[torch.Tensor, "B T"],
                  inv_freq: Float[torch.Tensor, "E"]) -> Float[torch.Tensor, "B H T 2*E"]:
    freqs = pos[:, :, None].float() * inv_freq[None, None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()  # BUG: no head axis, [B, T, D] meets [B, H, T, D]
    x1, x2 = q[..., : q.shape[-1] // 2], q[..., q.shape[-1] // 2:]
    return q * cos + torch.cat((-x2, x1), dim=-1) * sin


def repeat_kv(k: Float[torch.Tensor, "B G T D"], q: Float[torch.Tensor, "B 4*G T D"]
              ) -> Float[torch.Tensor, "B 4*G T T"]:
    """Mistral's repeat_kv: expand a new axis, then merge it into the kv heads."""
    b, g, t, d = k.shape
    n_rep = q.shape[1] // g
    k = k[:, :, None, :, :].expand(b, g, n_rep, t, d).reshape(b, g * n_rep, t, d)
    return q @ k.transpose(-2, -1) / math.sqrt(d)


def repeat_kv_bug(k: Float[torch.Tensor, "B G T D"], q: Float[torch.Tensor, "B 4*G T D"]
                  ) -> Float[torch.Tensor, "B 4*G T T"]:
    b, g, t, d = k.shape
    n_rep = q.shape[1] // g
    k = k[:, :, None, :, :].expand(b, g, n_rep, t, d).reshape(b, g * n_rep, t, d)
    return q @ k / math.sqrt(d)  # BUG: keys not transposed


def alibi_bias(scores: Float[torch.Tensor, "B H T T"], slopes: Float[torch.Tensor, "H"]
               ) -> Float[torch.Tensor, "B H T T"]:
    """ALiBi: a per-head slope times the (negative) query-key distance, causal mask on top."""
    T = scores.shape[-1]
    pos = torch.arange(T)
    rel = (pos[None, :] - pos[:, None]).float()
    bias = slopes[:, None, None] * rel[None]
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    return (scores + bias).masked_fill(causal, float("-inf"))


def alibi_bias_bug(scores: Float[torch.Tensor, "B H T T"], slopes: Float[torch.Tensor, "H"]
                   ) -> Float[torch.Tensor, "B H T T"]:
    T = scores.shape[-1]
    pos = torch.arange(T)
    rel = (pos[None, :] - pos[:, None]).float()
    bias = slopes[:, None] * rel[None]  # BUG: [H, 1] against [1, T, T]
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    return (scores + bias).masked_fill(causal, float("-inf"))


def rel_shift(x: Float[torch.Tensor, "B H Q K"]) -> Float[torch.Tensor, "B H Q K"]:
    """Transformer-XL's relative shift: pad a zero column, view it as K+1 rows, drop one.  The
    skewed view mixes elements on purpose, and is only ever viewed back."""
    b, h, q, k = x.size()
    zero_pad = x.new_zeros(b, h, q, 1)
    padded = torch.cat([zero_pad, x], dim=-1).view(b, h, k + 1, q)
    return padded[:, :, 1:].view_as(x)


def rel_shift_bug(x: Float[torch.Tensor, "B H Q K"]) -> Float[torch.Tensor, "B H Q K"]:
    b, h, q, k = x.size()
    zero_pad = x.new_zeros(b, h, q, 1)
    padded = torch.cat([zero_pad, x], dim=-1).view(b, h, k + 1, q)
    return padded[:, :, 1:].view(b, h, q, k + 1)  # BUG: the padded width kept


def kv_cache_append(k_new: Float[torch.Tensor, "B H 1 D"], cache: Float[torch.Tensor, "B H S D"],
                    q: Float[torch.Tensor, "B H 1 D"]) -> Float[torch.Tensor, "B H 1 S+1"]:
    """One decoding step: the new key appended along the sequence, scores against all."""
    keys = torch.cat([cache, k_new], dim=2)
    return torch.softmax(q @ keys.transpose(2, 3) * q.size(-1) ** -0.5, dim=-1)


def kv_cache_append_bug(k_new: Float[torch.Tensor, "B H 1 D"],
                        cache: Float[torch.Tensor, "B H S D"], q: Float[torch.Tensor, "B H 1 D"]
                        ) -> Float[torch.Tensor, "B H 1 S+1"]:
    keys = torch.cat([cache, k_new], dim=1)  # BUG: appended as a head
    return torch.softmax(q @ keys.transpose(2, 3) * q.size(-1) ** -0.5, dim=-1)


class RMSNormSwiGLU(nn.Module):
    """A LLaMA feed-forward block: RMSNorm (weight times normalised x), SwiGLU, residual."""

    def __init__(self, dim: int = 32, hidden: int = 96) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: Float[torch.Tensor, "B T 32"]) -> Float[torch.Tensor, "B T 32"]:
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class RMSNormSwiGLUBug(RMSNormSwiGLU):
    def forward(self, x: Float[torch.Tensor, "B T 32"]) -> Float[torch.Tensor, "B T 32"]:
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        return x + self.w2(F.silu(self.w1(h)) * self.w3(x)[..., :48])  # BUG: half the gate


def moe_route(x: Float[torch.Tensor, "N D"], gate: Float[torch.Tensor, "E D"],
              experts: Float[torch.Tensor, "E D D"]) -> Float[torch.Tensor, "N D"]:
    """Mixtral-style top-2 routing: softmax over the chosen logits, tokens gathered per
    expert with where, weighted outputs added back with index_add_."""
    logits = x @ gate.t()
    weights, chosen = torch.topk(logits, 2, dim=-1)
    weights = F.softmax(weights, dim=-1, dtype=torch.float).to(x.dtype)
    out = torch.zeros_like(x)
    for e in range(experts.shape[0]):
        idx, slot = torch.where(chosen == e)
        y = x[idx] @ experts[e]
        out.index_add_(0, idx, y * weights[idx, slot, None])
    return out


def moe_route_bug(x: Float[torch.Tensor, "N D"], gate: Float[torch.Tensor, "E D"],
                  experts: Float[torch.Tensor, "E D D"]) -> Float[torch.Tensor, "N D"]:
    logits = x @ gate.t()
    weights, chosen = torch.topk(logits, 2, dim=-1)
    weights = F.softmax(weights, dim=-1, dtype=torch.float).to(x.dtype)
    out = torch.zeros_like(x)
    for e in range(experts.shape[0]):
        idx, slot = torch.where(chosen == e)
        y = x[idx] @ experts[e]
        out.index_add_(0, idx, y * weights[idx, slot])  # BUG: [P, D] * [P]
    return out


def moe_load_balance(router_logits: Float[torch.Tensor, "N E"]) -> Float[torch.Tensor, ""]:
    """Switch-Transformer auxiliary loss: fraction routed times mean probability per expert."""
    probs = router_logits.softmax(-1)
    top1 = probs.argmax(-1)
    mask = F.one_hot(top1, num_classes=router_logits.shape[-1]).float()
    return router_logits.shape[-1] * (mask.mean(0) * probs.mean(0)).sum()


def moe_load_balance_bug(router_logits: Float[torch.Tensor, "N E"]) -> Float[torch.Tensor, ""]:
    probs = router_logits.softmax(-1)
    top1 = probs.argmax(-1)
    mask = F.one_hot(top1, num_classes=router_logits.shape[-1]).float()
    return router_logits.shape[-1] * (mask.mean(0) * probs.mean(1)).sum()  # BUG: per token


# -- sampling ----------------------------------------------------------------------------------


def top_p_filter(logits: Float[torch.Tensor, "B V"], top_p: float = 0.9
                 ) -> Float[torch.Tensor, "B V"]:
    """Nucleus filtering: sort, cumulative probability, shift right, scatter the mask back."""
    sorted_logits, sorted_idx = torch.sort(logits, descending=True)
    cum = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
    remove = cum > top_p
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    mask = remove.scatter(1, sorted_idx, remove)
    return logits.masked_fill(mask, float("-inf"))


def top_p_filter_bug(logits: Float[torch.Tensor, "B V"], top_p: float = 0.9
                     ) -> Float[torch.Tensor, "B V"]:
    sorted_logits, sorted_idx = torch.sort(logits, descending=True)
    cum = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
    remove = cum > top_p
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = False
    mask = remove.scatter(1, sorted_idx, remove)
    return logits.masked_fill(mask[:, :1].T, float("-inf"))  # BUG: [1, B] mask


def sample_next(logits: Float[torch.Tensor, "B T V"], temperature: float = 0.8
                ) -> Int[torch.Tensor, "B 1"]:
    """nanoGPT's generate step: the last position, top-k cut at the k-th value, multinomial
    (k fixed: nanoGPT's ``min(top_k, V)`` is a branch on V, traced on one side: a warning)."""
    logits = logits[:, -1, :] / temperature
    v, _ = torch.topk(logits, 5)
    logits[logits < v[:, [-1]]] = -float("inf")
    return torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)


def sample_next_bug(logits: Float[torch.Tensor, "B T V"], temperature: float = 0.8
                    ) -> Int[torch.Tensor, "B 1"]:
    logits = logits[:, -1, :] / temperature
    v, _ = torch.topk(logits, 5)
    logits[logits < v[:, -1]] = -float("inf")  # BUG: [B, V] < [B]
    return torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)


# -- vision backbones --------------------------------------------------------------------------


def window_reverse(windows: Float[torch.Tensor, "B*H*W 7 7 C"], H: int, W: int
                   ) -> Float[torch.Tensor, "B 7*H 7*W C"]:
    """Swin's window_reverse: windows back to the feature map (H, W: windows per side)."""
    B = windows.shape[0] // (H * W)
    x = windows.view(B, H, W, 7, 7, -1)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(B, H * 7, W * 7, -1)


def window_reverse_bug(windows: Float[torch.Tensor, "B*H*W 7 7 C"], H: int, W: int
                       ) -> Float[torch.Tensor, "B 7*H 7*W C"]:
    B = windows.shape[0] // (H * W)
    x = windows.view(B, H, W, 7, 7, -1)
    return x.reshape(B, H * 7, W * 7, -1)  # BUG: windows not permuted back


def patch_merging(x: Float[torch.Tensor, "B 2*H 2*W C"], w: Float[torch.Tensor, "2*C 4*C"]
                  ) -> Float[torch.Tensor, "B H W 2*C"]:
    """Swin's PatchMerging: the four 2x2 neighbours concatenated, normalised, reduced."""
    x0, x1 = x[:, 0::2, 0::2, :], x[:, 1::2, 0::2, :]
    x2, x3 = x[:, 0::2, 1::2, :], x[:, 1::2, 1::2, :]
    x = torch.cat([x0, x1, x2, x3], -1)
    x = F.layer_norm(x, x.shape[-1:])
    return F.linear(x, w)


def patch_merging_bug(x: Float[torch.Tensor, "B 2*H 2*W C"], w: Float[torch.Tensor, "2*C 4*C"]
                      ) -> Float[torch.Tensor, "B H W 2*C"]:
    x0, x1 = x[:, 0::2, 0::2, :], x[:, 1::2, 0::2, :]
    x2, x3 = x[:, 0::2, 1::2, :], x[:, 1::2, 1::2, :]
    x = torch.cat([x0, x1, x2, x3], 1)  # BUG: stacked along the height
    x = F.layer_norm(x, x.shape[-1:])
    return F.linear(x, w)


def relative_position_bias(table: Float[torch.Tensor, "169 H"],
                           attn: Float[torch.Tensor, "B H 49 49"]
                           ) -> Float[torch.Tensor, "B H 49 49"]:
    """Swin's relative position bias: the table indexed by a 49x49 index, heads moved first."""
    coords = torch.stack(torch.meshgrid(torch.arange(7), torch.arange(7), indexing="ij"))
    flat = torch.flatten(coords, 1)
    rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()
    rel[:, :, 0] += 6
    rel[:, :, 1] += 6
    rel[:, :, 0] *= 13
    index = rel.sum(-1)
    bias = table[index.view(-1)].view(49, 49, -1).permute(2, 0, 1).contiguous()
    return attn + bias.unsqueeze(0)


def relative_position_bias_bug(table: Float[torch.Tensor, "169 H"],
                               attn: Float[torch.Tensor, "B H 49 49"]
                               ) -> Float[torch.Tensor, "B H 49 49"]:
    coords = torch.stack(torch.meshgrid(torch.arange(7), torch.arange(7), indexing="ij"))
    flat = torch.flatten(coords, 1)
    rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()
    rel[:, :, 0] += 6
    rel[:, :, 1] += 6
    rel[:, :, 0] *= 13
    index = rel.sum(-1)
    bias = table[index.view(-1)].view(49, 49, -1).contiguous()  # BUG: heads left last
    return attn + bias.unsqueeze(0)


class DepthwiseSeparable(nn.Module):
    """MobileNet's block: a 3x3 depthwise conv (groups = channels), BN, ReLU6, 1x1 pointwise."""

    def __init__(self, cin: int = 16, cout: int = 32, stride: int = 1) -> None:
        super().__init__()
        self.dw = nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False)
        self.bn1 = nn.BatchNorm2d(cin)
        self.pw = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)

    def forward(self, x: Float[torch.Tensor, "B 16 H W"]) -> Float[torch.Tensor, "B 32 H W"]:
        x = F.relu6(self.bn1(self.dw(x)))
        return F.relu6(self.bn2(self.pw(x)))


class DepthwiseSeparableBug(DepthwiseSeparable):
    def forward(self, x: Float[torch.Tensor, "B 16 H W"]) -> Float[torch.Tensor, "B 32 H W"]:
        x = F.relu6(self.bn1(self.dw(x)))
        return F.relu6(self.bn1(self.pw(x)))  # BUG: the 16-channel norm on 32 channels


class InvertedResidual(nn.Module):
    """MobileNetV2: expand 1x1, depthwise 3x3, project 1x1, residual when shapes agree."""

    def __init__(self, c: int = 24, expand: int = 6) -> None:
        super().__init__()
        hidden = c * expand
        self.expand = nn.Conv2d(c, hidden, 1, bias=False)
        self.dw = nn.Conv2d(hidden, hidden, 3, 1, 1, groups=hidden, bias=False)
        self.project = nn.Conv2d(hidden, c, 1, bias=False)
        self.norm = nn.GroupNorm(8, hidden)

    def forward(self, x: Float[torch.Tensor, "B 24 H W"]) -> Float[torch.Tensor, "B 24 H W"]:
        h = F.relu6(self.norm(self.expand(x)))
        h = F.relu6(self.norm(self.dw(h)))
        return x + self.project(h)


class InvertedResidualBug(InvertedResidual):
    def __init__(self) -> None:
        super().__init__()
        self.dw = nn.Conv2d(144, 144, 3, 2, 1, groups=144, bias=False)  # BUG: stride 2

    def forward(self, x: Float[torch.Tensor, "B 24 H W"]) -> Float[torch.Tensor, "B 24 H W"]:
        h = F.relu6(self.norm(self.expand(x)))
        h = F.relu6(self.norm(self.dw(h)))
        return x + self.project(h)


def pixel_shuffle_up(x: Float[torch.Tensor, "B 64 H W"], w: Float[torch.Tensor, "12 64 3 3"]
                     ) -> Float[torch.Tensor, "B 3 2*H 2*W"]:
    """ESPCN's sub-pixel upsampling: a conv to C*r*r channels, then pixel_shuffle(r)."""
    return torch.sigmoid(F.pixel_shuffle(F.conv2d(x, w, padding=1), 2))


def pixel_shuffle_up_bug(x: Float[torch.Tensor, "B 64 H W"], w: Float[torch.Tensor, "12 64 3 3"]
                         ) -> Float[torch.Tensor, "B 3 2*H 2*W"]:
    return torch.sigmoid(F.pixel_shuffle(F.conv2d(x, w), 2))  # BUG: no padding, H-2


def unet_up(x: Float[torch.Tensor, "B 64 H W"], skip: Float[torch.Tensor, "B 32 2*H 2*W"],
            w: Float[torch.Tensor, "32 96 3 3"]) -> Float[torch.Tensor, "B 32 2*H 2*W"]:
    """U-Net decoder step: upsample, concatenate the skip on channels, 3x3 conv."""
    x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
    return F.relu(F.conv2d(torch.cat([skip, x], dim=1), w, padding=1))


def unet_up_bug(x: Float[torch.Tensor, "B 64 H W"], skip: Float[torch.Tensor, "B 32 2*H 2*W"],
                w: Float[torch.Tensor, "32 96 3 3"]) -> Float[torch.Tensor, "B 32 2*H 2*W"]:
    x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
    return F.relu(F.conv2d(torch.cat([skip, x], dim=-1), w, padding=1))  # BUG: joined on width


def unet_up_transpose(x: Float[torch.Tensor, "B 64 H W"], skip: Float[torch.Tensor, "B 32 2*H 2*W"],
                      up: Float[torch.Tensor, "64 32 2 2"]) -> Float[torch.Tensor, "B 64 2*H 2*W"]:
    """The original U-Net's up-convolution: a stride-2 transposed conv, then the skip."""
    return torch.cat([skip, F.conv_transpose2d(x, up, stride=2)], dim=1)


def unet_up_transpose_bug(x: Float[torch.Tensor, "B 64 H W"],
                          skip: Float[torch.Tensor, "B 32 2*H 2*W"],
                          up: Float[torch.Tensor, "64 32 2 2"]
                          ) -> Float[torch.Tensor, "B 64 2*H 2*W"]:
    return torch.cat([skip, F.conv_transpose2d(x, up, stride=1)], dim=1)  # BUG: H+1, not 2*H


def fpn_top_down(c4: Float[torch.Tensor, "B 256 H W"], c3: Float[torch.Tensor, "B 128 2*H 2*W"],
                 lat: Float[torch.Tensor, "256 128 1 1"]) -> Float[torch.Tensor, "B 256 2*H 2*W"]:
    """FPN: the coarser map upsampled (nearest, to the finer one's size) plus the lateral 1x1."""
    lateral = F.conv2d(c3, lat)
    top = F.interpolate(c4, size=lateral.shape[-2:], mode="nearest")
    return lateral + top


def fpn_top_down_bug(c4: Float[torch.Tensor, "B 256 H W"],
                     c3: Float[torch.Tensor, "B 128 2*H 2*W"],
                     lat: Float[torch.Tensor, "256 128 1 1"]
                     ) -> Float[torch.Tensor, "B 256 2*H 2*W"]:
    lateral = F.conv2d(c3, lat)
    top = F.interpolate(c4, size=c4.shape[-2:], mode="nearest")  # BUG: its own size
    return lateral + top


def cbam_spatial(x: Float[torch.Tensor, "B C H W"], w: Float[torch.Tensor, "1 2 7 7"]
                 ) -> Float[torch.Tensor, "B C H W"]:
    """CBAM's spatial attention: channel mean and max stacked as two maps, a 7x7 conv."""
    avg = torch.mean(x, dim=1, keepdim=True)
    mx, _ = torch.max(x, dim=1, keepdim=True)
    return x * torch.sigmoid(F.conv2d(torch.cat([avg, mx], dim=1), w, padding=3))


def cbam_spatial_bug(x: Float[torch.Tensor, "B C H W"], w: Float[torch.Tensor, "1 2 7 7"]
                     ) -> Float[torch.Tensor, "B C H W"]:
    avg = torch.mean(x, dim=1, keepdim=True)
    mx, _ = torch.max(x, dim=1, keepdim=True)
    return x * torch.sigmoid(F.conv2d(torch.cat([avg, mx], dim=1), w, padding=2))  # BUG: H-2


def drop_path(x: Float[torch.Tensor, "B N D"], p: float = 0.1) -> Float[torch.Tensor, "B N D"]:
    """timm's stochastic depth: one Bernoulli draw per sample, shaped (B, 1, 1)."""
    keep = 1 - p
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    mask = x.new_empty(shape).bernoulli_(keep)
    return x * mask / keep


def drop_path_bug(x: Float[torch.Tensor, "B N D"], p: float = 0.1) -> Float[torch.Tensor, "B N D"]:
    keep = 1 - p
    shape = (x.shape[0], 1)  # BUG: (B, 1) meets (B, N, D)
    mask = x.new_empty(shape).bernoulli_(keep)
    return x * mask / keep


def mae_random_masking(x: Float[torch.Tensor, "B L D"], noise: Float[torch.Tensor, "B L"]
                       ) -> tuple[Float[torch.Tensor, "B L//4 D"], Float[torch.Tensor, "B L"]]:
    """MAE: argsort noise, keep the first quarter by gather, a mask unshuffled back."""
    B, L, D = x.shape
    len_keep = L // 4
    ids_shuffle = torch.argsort(noise, dim=1)
    ids_restore = torch.argsort(ids_shuffle, dim=1)
    ids_keep = ids_shuffle[:, :len_keep]
    kept = torch.gather(x, 1, ids_keep.unsqueeze(-1).repeat(1, 1, D))
    mask = torch.ones(B, L)
    mask[:, :len_keep] = 0
    return kept, torch.gather(mask, 1, ids_restore)


def mae_random_masking_bug(x: Float[torch.Tensor, "B L D"], noise: Float[torch.Tensor, "B L"]
                           ) -> tuple[Float[torch.Tensor, "B L//4 D"], Float[torch.Tensor, "B L"]]:
    B, L, D = x.shape
    len_keep = L // 4
    ids_shuffle = torch.argsort(noise, dim=1)
    ids_keep = ids_shuffle[:, :len_keep]
    kept = torch.gather(x, 1, ids_keep.unsqueeze(-1).repeat(1, 1, D))
    mask = torch.ones(B, L)
    mask[:, :len_keep] = 0
    return kept, torch.gather(mask, 1, ids_keep)  # BUG: the kept ids, not the restore order


def vit_tokens(patches: Float[torch.Tensor, "B N D"], cls: Float[torch.Tensor, "1 1 D"],
               pos: Float[torch.Tensor, "1 N+1 D"]) -> Float[torch.Tensor, "B N+1 D"]:
    """ViT: the class token expanded over the batch, prepended, position embedding added."""
    cls_tokens = cls.expand(patches.shape[0], -1, -1)
    return torch.cat((cls_tokens, patches), dim=1) + pos


def vit_tokens_bug(patches: Float[torch.Tensor, "B N D"], cls: Float[torch.Tensor, "1 1 D"],
                   pos: Float[torch.Tensor, "1 N+1 D"]) -> Float[torch.Tensor, "B N+1 D"]:
    cls_tokens = cls.expand(patches.shape[0], -1, -1)
    return torch.cat((cls_tokens, patches), dim=1) + pos[:, 1:]  # BUG: the class slot dropped


# -- point clouds and rendering ----------------------------------------------------------------


class PointNetEncoder(nn.Module):
    """PointNet: shared 1x1 convs over (B, 3, N) points, max over points, a classifier."""

    def __init__(self, k: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(3, 64, 1)
        self.conv2 = nn.Conv1d(64, 128, 1)
        self.fc = nn.Linear(128, k)

    def forward(self, pts: Float[torch.Tensor, "B N 3"]) -> Float[torch.Tensor, "B 10"]:
        x = pts.transpose(2, 1)
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = torch.max(x, 2, keepdim=True)[0].view(-1, 128)
        return F.log_softmax(self.fc(x), dim=1)


class PointNetEncoderBug(PointNetEncoder):
    def forward(self, pts: Float[torch.Tensor, "B N 3"]) -> Float[torch.Tensor, "B 10"]:
        x = pts.transpose(2, 1)
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = torch.max(x, 1, keepdim=True)[0].view(-1, 128)  # BUG: max over the channels
        return F.log_softmax(self.fc(x), dim=1)


def volume_render(rgb: Float[torch.Tensor, "R S 3"], sigma: Float[torch.Tensor, "R S"],
                  z: Float[torch.Tensor, "R S"]) -> Float[torch.Tensor, "R 3"]:
    """NeRF: deltas with a far sample appended, exclusive cumprod of 1 - alpha by a cat."""
    dists = torch.cat([z[..., 1:] - z[..., :-1], torch.full_like(z[..., :1], 1e10)], dim=-1)
    alpha = 1.0 - torch.exp(-F.relu(sigma) * dists)
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1.0 - alpha + 1e-10], -1), -1)
    weights = alpha * trans[:, :-1]
    return torch.sum(weights[..., None] * rgb, dim=-2)


def volume_render_bug(rgb: Float[torch.Tensor, "R S 3"], sigma: Float[torch.Tensor, "R S"],
                      z: Float[torch.Tensor, "R S"]) -> Float[torch.Tensor, "R 3"]:
    dists = torch.cat([z[..., 1:] - z[..., :-1], torch.full_like(z[..., :1], 1e10)], dim=-1)
    alpha = 1.0 - torch.exp(-F.relu(sigma) * dists)
    trans = torch.cumprod(torch.cat([torch.ones_like(alpha[:, :1]), 1.0 - alpha + 1e-10], -1), -1)
    weights = alpha * trans  # BUG: the inclusive product has S+1 entries
    return torch.sum(weights[..., None] * rgb, dim=-2)


def positional_encoding(x: Float[torch.Tensor, "N 3"]) -> Float[torch.Tensor, "N 63"]:
    """NeRF's frequency encoding: the input and sin/cos at 10 octaves, concatenated."""
    freqs = 2.0 ** torch.arange(10)
    xb = x[..., None, :] * freqs[:, None]
    enc = torch.cat([torch.sin(xb), torch.cos(xb)], dim=-1).flatten(-2)
    return torch.cat([x, enc], dim=-1)


def positional_encoding_bug(x: Float[torch.Tensor, "N 3"]) -> Float[torch.Tensor, "N 63"]:
    freqs = 2.0 ** torch.arange(10)
    xb = x[..., None, :] * freqs[:, None]
    enc = torch.cat([torch.sin(xb), torch.cos(xb)], dim=-1).flatten(-2)
    return enc  # BUG: the raw input not included, 60 channels


def chamfer(a: Float[torch.Tensor, "B N 3"], b: Float[torch.Tensor, "B M 3"]
            ) -> Float[torch.Tensor, "B"]:
    """Chamfer distance: nearest neighbours both ways through cdist."""
    d = torch.cdist(a, b)
    return d.min(dim=2).values.mean(-1) + d.min(dim=1).values.mean(-1)


def chamfer_bug(a: Float[torch.Tensor, "B N 3"], b: Float[torch.Tensor, "B M 3"]
                ) -> Float[torch.Tensor, "B"]:
    d = torch.cdist(a, b)
    return d.min(dim=2).values.mean(-1) + d.min(dim=1).values  # BUG: [B] + [B, M]


# -- generative models -------------------------------------------------------------------------


def vae_loss(recon: Float[torch.Tensor, "B 784"], x: Float[torch.Tensor, "B 1 28 28"],
             mu: Float[torch.Tensor, "B Z"], logvar: Float[torch.Tensor, "B Z"],
             eps: Float[torch.Tensor, "B Z"]
             ) -> tuple[Float[torch.Tensor, ""], Float[torch.Tensor, "B Z"]]:
    """The PyTorch-examples VAE: reparameterised sample, BCE on the flattened image, KL."""
    z = mu + eps * torch.exp(0.5 * logvar)
    bce = F.binary_cross_entropy(recon, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld, z


def vae_loss_bug(recon: Float[torch.Tensor, "B 784"], x: Float[torch.Tensor, "B 1 28 28"],
                 mu: Float[torch.Tensor, "B Z"], logvar: Float[torch.Tensor, "B Z"],
                 eps: Float[torch.Tensor, "B Z"]
                 ) -> tuple[Float[torch.Tensor, ""], Float[torch.Tensor, "B Z"]]:
    z = mu + eps * torch.exp(0.5 * logvar)
    bce = F.binary_cross_entropy(recon, x.view(-1, 784), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=1)  # BUG: per sample
    return bce + kld, z


def vq_quantize(z: Float[torch.Tensor, "B D H W"], codebook: Float[torch.Tensor, "K D"]
                ) -> Float[torch.Tensor, "B D H W"]:
    """VQ-VAE: channels-last flatten, squared distances by expansion, argmin, embedding,
    straight-through estimator."""
    zf = z.permute(0, 2, 3, 1).contiguous()
    flat = zf.view(-1, codebook.shape[1])
    d = (flat ** 2).sum(1, keepdim=True) + (codebook ** 2).sum(1) - 2 * flat @ codebook.t()
    idx = torch.argmin(d, dim=1)
    q = F.embedding(idx, codebook).view(zf.shape)
    q = zf + (q - zf).detach()
    return q.permute(0, 3, 1, 2).contiguous()


def vq_quantize_bug(z: Float[torch.Tensor, "B D H W"], codebook: Float[torch.Tensor, "K D"]
                    ) -> Float[torch.Tensor, "B D H W"]:
    zf = z.permute(0, 2, 3, 1).contiguous()
    flat = zf.view(-1, codebook.shape[1])
    d = (flat ** 2).sum(1) + (codebook ** 2).sum(1) - 2 * flat @ codebook.t()  # BUG: [N] + [K]
    idx = torch.argmin(d, dim=1)
    q = F.embedding(idx, codebook).view(zf.shape)
    q = zf + (q - zf).detach()
    return q.permute(0, 3, 1, 2).contiguous()


# -- metric learning and losses ----------------------------------------------------------------


def clip_loss(img: Float[torch.Tensor, "N D"], txt: Float[torch.Tensor, "N D"],
              logit_scale: Float[torch.Tensor, ""]) -> Float[torch.Tensor, ""]:
    """CLIP's symmetric contrastive loss: normalised features, exp(scale), arange labels."""
    img = img / img.norm(dim=-1, keepdim=True)
    txt = F.normalize(txt, dim=-1)
    logits = logit_scale.exp() * img @ txt.t()
    labels = torch.arange(logits.shape[0], device=logits.device)
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2


def clip_loss_bug(img: Float[torch.Tensor, "N D"], txt: Float[torch.Tensor, "N D"],
                  logit_scale: Float[torch.Tensor, ""]) -> Float[torch.Tensor, ""]:
    img = img / img.norm(dim=-1)  # BUG: [N, D] / [N]
    txt = F.normalize(txt, dim=-1)
    logits = logit_scale.exp() * img @ txt.t()
    labels = torch.arange(logits.shape[0], device=logits.device)
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2


def nt_xent(z1: Float[torch.Tensor, "N D"], z2: Float[torch.Tensor, "N D"], tau: float = 0.5
            ) -> Float[torch.Tensor, ""]:
    """SimCLR: both views stacked, self-similarity masked out, positives N apart."""
    n = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2], dim=0), dim=1)
    sim = z @ z.T / tau
    sim = sim.masked_fill(torch.eye(2 * n, dtype=torch.bool), float("-inf"))
    targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return F.cross_entropy(sim, targets)


def nt_xent_bug(z1: Float[torch.Tensor, "N D"], z2: Float[torch.Tensor, "N D"], tau: float = 0.5
                ) -> Float[torch.Tensor, ""]:
    n = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2], dim=0), dim=1)
    sim = z @ z.T / tau
    sim = sim.masked_fill(torch.eye(n, dtype=torch.bool), float("-inf"))  # BUG: [N, N] mask
    targets = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return F.cross_entropy(sim, targets)


def triplet_hard(emb: Float[torch.Tensor, "N D"], labels: Int[torch.Tensor, "N"],
                 margin: float = 0.3) -> Float[torch.Tensor, ""]:
    """Batch-hard triplet loss: pairwise cdist, hardest positive and negative per anchor."""
    dist = torch.cdist(emb, emb, p=2)
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    hardest_pos = (dist * same.float()).max(dim=1).values
    hardest_neg = (dist + 1e5 * same.float()).min(dim=1).values
    return F.relu(hardest_pos - hardest_neg + margin).mean()


def triplet_hard_bug(emb: Float[torch.Tensor, "N D"], labels: Int[torch.Tensor, "N"],
                     margin: float = 0.3) -> Float[torch.Tensor, ""]:
    dist = torch.cdist(emb, emb.T, p=2)  # BUG: [D, N] points of dimension N
    same = labels.unsqueeze(0) == labels.unsqueeze(1)
    hardest_pos = (dist * same.float()).max(dim=1).values
    hardest_neg = (dist + 1e5 * same.float()).min(dim=1).values
    return F.relu(hardest_pos - hardest_neg + margin).mean()


def focal_loss(logits: Float[torch.Tensor, "N C"], targets: Float[torch.Tensor, "N C"],
               alpha: float = 0.25, gamma: float = 2.0) -> Float[torch.Tensor, ""]:
    """RetinaNet's sigmoid focal loss on one-hot targets."""
    p = torch.sigmoid(logits)
    ce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce * ((1 - p_t) ** gamma)
    alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
    return (alpha_t * loss).sum() / max(1, targets.shape[0])


def focal_loss_bug(logits: Float[torch.Tensor, "N C"], targets: Int[torch.Tensor, "N"],
                   alpha: float = 0.25, gamma: float = 2.0) -> Float[torch.Tensor, ""]:
    p = torch.sigmoid(logits)
    ce = F.binary_cross_entropy_with_logits(logits, targets.float(), reduction="none")  # BUG
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce * ((1 - p_t) ** gamma)
    alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
    return (alpha_t * loss).sum() / max(1, targets.shape[0])


def label_smoothing_ce(logits: Float[torch.Tensor, "B T V"], target: Int[torch.Tensor, "B T"],
                       eps: float = 0.1) -> Float[torch.Tensor, ""]:
    """Label-smoothed cross entropy written out: NLL of the target plus the uniform term."""
    logp = F.log_softmax(logits, dim=-1)
    nll = -logp.gather(dim=-1, index=target.unsqueeze(-1)).squeeze(-1)
    smooth = -logp.mean(dim=-1)
    return ((1 - eps) * nll + eps * smooth).mean()


def label_smoothing_ce_bug(logits: Float[torch.Tensor, "B T V"], target: Int[torch.Tensor, "B T"],
                           eps: float = 0.1) -> Float[torch.Tensor, ""]:
    logp = F.log_softmax(logits, dim=-1)
    nll = -logp.gather(dim=-1, index=target.unsqueeze(-1))  # BUG: [B, T, 1] meets [B, T]
    smooth = -logp.mean(dim=-1)
    return ((1 - eps) * nll + eps * smooth).mean()


def seq_ce_flat(logits: Float[torch.Tensor, "B T V"], target: Int[torch.Tensor, "B T"]
                ) -> Float[torch.Tensor, ""]:
    """A GPT training loss: logits and targets flattened over batch and time, ignore_index."""
    return F.cross_entropy(logits.view(-1, logits.size(-1)), target.view(-1), ignore_index=-1,
                           label_smoothing=0.1)


def seq_ce_flat_bug(logits: Float[torch.Tensor, "B T V"], target: Int[torch.Tensor, "B T"]
                    ) -> Float[torch.Tensor, ""]:
    return F.cross_entropy(logits.view(-1, logits.size(-1)), target, ignore_index=-1,  # BUG
                           label_smoothing=0.1)


def distill_kl(student: Float[torch.Tensor, "B C"], teacher: Float[torch.Tensor, "B C"],
               T: float = 4.0) -> Float[torch.Tensor, ""]:
    """Hinton distillation: KL between temperature-softened distributions, times T^2."""
    return F.kl_div(F.log_softmax(student / T, dim=1), F.softmax(teacher / T, dim=1),
                    reduction="batchmean") * T * T


def distill_kl_bug(student: Float[torch.Tensor, "B C"], teacher: Float[torch.Tensor, "B C"],
                   T: float = 4.0) -> Float[torch.Tensor, ""]:
    return F.kl_div(F.log_softmax(student / T, dim=1), F.softmax(teacher / T, dim=1).T,  # BUG
                    reduction="batchmean") * T * T


def dice_loss(logits: Float[torch.Tensor, "B K H W"], target: Int[torch.Tensor, "B H W"]
              ) -> Float[torch.Tensor, ""]:
    """Multi-class soft Dice: one-hot targets moved to channels-first, sums over space."""
    probs = logits.softmax(dim=1)
    onehot = F.one_hot(target, logits.shape[1]).permute(0, 3, 1, 2).float()
    inter = (probs * onehot).sum(dim=(2, 3))
    union = probs.sum(dim=(2, 3)) + onehot.sum(dim=(2, 3))
    return 1 - (2 * inter / union.clamp_min(1e-6)).mean()


def dice_loss_bug(logits: Float[torch.Tensor, "B K H W"], target: Int[torch.Tensor, "B H W"]
                  ) -> Float[torch.Tensor, ""]:
    probs = logits.softmax(dim=1)
    onehot = F.one_hot(target, logits.shape[1]).float()  # BUG: classes left last
    inter = (probs * onehot).sum(dim=(2, 3))
    union = probs.sum(dim=(2, 3)) + onehot.sum(dim=(2, 3))
    return 1 - (2 * inter / union.clamp_min(1e-6)).mean()


def masked_mean_pool(h: Float[torch.Tensor, "B T D"], attention_mask: Int[torch.Tensor, "B T"]
                     ) -> Float[torch.Tensor, "B D"]:
    """sentence-transformers' mean pooling: the mask expanded to the hidden size."""
    m = attention_mask.unsqueeze(-1).expand(h.size()).float()
    return torch.sum(h * m, 1) / torch.clamp(m.sum(1), min=1e-9)


def masked_mean_pool_bug(h: Float[torch.Tensor, "B T D"], attention_mask: Int[torch.Tensor, "B T"]
                         ) -> Float[torch.Tensor, "B D"]:
    m = attention_mask.unsqueeze(-1).expand(h.size()).float()
    return torch.sum(h * m, 1) / torch.clamp(m.sum(2), min=1e-9)  # BUG: [B, D] / [B, T]


# -- reinforcement learning and training loops -------------------------------------------------


def ppo_clip_loss(new_logp: Float[torch.Tensor, "N A"], old_logp: Float[torch.Tensor, "N"],
                  adv: Float[torch.Tensor, "N"], clip: float = 0.2) -> Float[torch.Tensor, ""]:
    """cleanrl's continuous PPO policy loss: per-dimension log-probabilities summed over the
    action, advantages normalised per minibatch."""
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    ratio = (new_logp.sum(1) - old_logp).exp()
    pg1 = -adv * ratio
    pg2 = -adv * torch.clamp(ratio, 1 - clip, 1 + clip)
    return torch.max(pg1, pg2).mean()


def ppo_clip_loss_bug(new_logp: Float[torch.Tensor, "N A"], old_logp: Float[torch.Tensor, "N"],
                      adv: Float[torch.Tensor, "N"], clip: float = 0.2
                      ) -> Float[torch.Tensor, ""]:
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    ratio = (new_logp - old_logp).exp()  # BUG: not summed over the action, [N, A] - [N]
    pg1 = -adv * ratio
    pg2 = -adv * torch.clamp(ratio, 1 - clip, 1 + clip)
    return torch.max(pg1, pg2).mean()


def sac_q_target(r: Float[torch.Tensor, "B 1"], done: Float[torch.Tensor, "B 1"],
                 q1: Float[torch.Tensor, "B 1"], q2: Float[torch.Tensor, "B 1"],
                 logp: Float[torch.Tensor, "B"], alpha: float = 0.2
                 ) -> Float[torch.Tensor, "B 1"]:
    """SAC's soft target: min of twin critics minus alpha log pi, with (B, 1) columns."""
    min_q = torch.min(q1, q2) - alpha * logp.unsqueeze(-1)
    return r + (1 - done) * 0.99 * min_q


def sac_q_target_bug(r: Float[torch.Tensor, "B 1"], done: Float[torch.Tensor, "B 1"],
                     q1: Float[torch.Tensor, "B 1"], q2: Float[torch.Tensor, "B 1"],
                     logp: Float[torch.Tensor, "B"], alpha: float = 0.2
                     ) -> Float[torch.Tensor, "B 1"]:
    min_q = torch.min(q1, q2) - alpha * logp  # BUG: [B, 1] - [B]
    return r + (1 - done) * 0.99 * min_q


class EMATeacher(nn.Module):
    """BYOL/DINO's teacher: a parameter-wise EMA of the student in a no_grad loop, then the
    teacher's projection of the batch."""

    def __init__(self, momentum: float = 0.996) -> None:
        super().__init__()
        self.student = nn.Linear(16, 8)
        self.teacher = nn.Linear(16, 8)
        self.momentum = momentum

    def forward(self, x: Float[torch.Tensor, "B 16"]) -> Float[torch.Tensor, "B 8"]:
        with torch.no_grad():
            for ps, pt in zip(self.student.parameters(), self.teacher.parameters(), strict=True):
                pt.mul_(self.momentum).add_((1 - self.momentum) * ps.detach())
        return self.teacher(x)


class EMATeacherBug(EMATeacher):
    def forward(self, x: Float[torch.Tensor, "B 16"]) -> Float[torch.Tensor, "B 8"]:
        with torch.no_grad():
            for ps, pt in zip(self.student.parameters(), self.teacher.parameters(), strict=True):
                pt.mul_(self.momentum).add_((1 - self.momentum) * ps.detach())
        return self.student(x) + self.teacher(x).mean(1)  # BUG: [B, 8] + [B]


class DinoCenter(nn.Module):
    """DINO's teacher centring: softmax of centred, sharpened outputs; the centre an EMA of
    the batch mean kept as a (1, D) buffer."""

    def __init__(self, dim: int = 64, momentum: float = 0.9) -> None:
        super().__init__()
        self.register_buffer("center", torch.zeros(1, dim))
        self.momentum = momentum

    def forward(self, t: Float[torch.Tensor, "B 64"]) -> Float[torch.Tensor, "B 64"]:
        out = F.softmax((t - self.center) / 0.04, dim=-1)
        batch_center = torch.sum(t, dim=0, keepdim=True) / t.shape[0]
        self.center = self.center * self.momentum + batch_center * (1 - self.momentum)
        return out + 0 * self.center


class DinoCenterBug(DinoCenter):
    def forward(self, t: Float[torch.Tensor, "B 64"]) -> Float[torch.Tensor, "B 64"]:
        out = F.softmax((t - self.center) / 0.04, dim=-1)
        batch_center = torch.sum(t, dim=1) / t.shape[0]  # BUG: a mean over features, [B]
        self.center = self.center * self.momentum + batch_center * (1 - self.momentum)
        return out + 0 * self.center


def causal_conv1d(x: Float[torch.Tensor, "B C T"], w: Float[torch.Tensor, "2*C C 3"]
                  ) -> Float[torch.Tensor, "B C T"]:
    """WaveNet: left padding by (k-1)*dilation, a gated tanh-sigmoid unit via chunk."""
    dilation = 2
    h = F.conv1d(F.pad(x, ((3 - 1) * dilation, 0)), w, dilation=dilation)
    a, b = h.chunk(2, dim=1)
    return x + torch.tanh(a) * torch.sigmoid(b)


def causal_conv1d_bug(x: Float[torch.Tensor, "B C T"], w: Float[torch.Tensor, "2*C C 3"]
                      ) -> Float[torch.Tensor, "B C T"]:
    dilation = 2
    h = F.conv1d(F.pad(x, (3 - 1, 0)), w, dilation=dilation)  # BUG: padding ignores dilation
    a, b = h.chunk(2, dim=1)
    return x + torch.tanh(a) * torch.sigmoid(b)


def glu_conformer_conv(x: Float[torch.Tensor, "B T D"], pw: Float[torch.Tensor, "2*D D 1"],
                       dw: Float[torch.Tensor, "D 1 31"]) -> Float[torch.Tensor, "B T D"]:
    """Conformer's convolution module: pointwise to 2D, GLU over channels, depthwise conv."""
    h = F.glu(F.conv1d(x.transpose(1, 2), pw), dim=1)
    h = F.conv1d(h, dw, padding=15, groups=x.shape[-1])
    return x + F.silu(F.group_norm(h, 1)).transpose(1, 2)


def glu_conformer_conv_bug(x: Float[torch.Tensor, "B T D"], pw: Float[torch.Tensor, "2*D D 1"],
                           dw: Float[torch.Tensor, "D 1 31"]) -> Float[torch.Tensor, "B T D"]:
    h = F.glu(F.conv1d(x.transpose(1, 2), pw), dim=-1)  # BUG: halves time, not channels
    h = F.conv1d(h, dw, padding=15, groups=x.shape[-1])
    return x + F.silu(F.group_norm(h, 1)).transpose(1, 2)


def lengths_mask_attention(x: Float[torch.Tensor, "B T D"], lengths: Int[torch.Tensor, "B"]
                           ) -> Float[torch.Tensor, "B T T"]:
    """A key padding mask from sequence lengths (arange < lengths[:, None]) on scores."""
    mask = torch.arange(x.shape[1])[None, :] < lengths[:, None]
    scores = x @ x.transpose(1, 2)
    return scores.masked_fill(~mask[:, None, :], -1e9).softmax(-1)


def lengths_mask_attention_bug(x: Float[torch.Tensor, "B T D"], lengths: Int[torch.Tensor, "B"]
                               ) -> Float[torch.Tensor, "B T T"]:
    mask = torch.arange(x.shape[1])[None, :] < lengths  # BUG: [1, T] < [B]
    scores = x @ x.transpose(1, 2)
    return scores.masked_fill(~mask[:, None, :], -1e9).softmax(-1)


def mixup(x: Float[torch.Tensor, "B C H W"], y: Int[torch.Tensor, "B"], lam: float = 0.7,
          classes: int = 10
          ) -> tuple[Float[torch.Tensor, "B C H W"], Float[torch.Tensor, "B 10"]]:
    """mixup: a random permutation of the batch, images and one-hot labels mixed alike."""
    perm = torch.randperm(x.size(0))
    yy = F.one_hot(y, classes).float()
    return lam * x + (1 - lam) * x[perm], lam * yy + (1 - lam) * yy[perm]


def mixup_bug(x: Float[torch.Tensor, "B C H W"], y: Int[torch.Tensor, "B"], lam: float = 0.7,
              classes: int = 10
              ) -> tuple[Float[torch.Tensor, "B C H W"], Float[torch.Tensor, "B 10"]]:
    perm = torch.randperm(x.size(1))  # BUG: permutes by channel count
    yy = F.one_hot(y, classes).float()
    return lam * x + (1 - lam) * x[perm], lam * yy + (1 - lam) * yy[perm]


def gumbel_select(logits: Float[torch.Tensor, "B K"], values: Float[torch.Tensor, "K D"]
                  ) -> Float[torch.Tensor, "B D"]:
    """A straight-through Gumbel-softmax choice of one codebook row per sample."""
    onehot = F.gumbel_softmax(logits, tau=0.5, hard=True)
    return onehot @ values


def gumbel_select_bug(logits: Float[torch.Tensor, "B K"], values: Float[torch.Tensor, "K D"]
                      ) -> Float[torch.Tensor, "B D"]:
    onehot = F.gumbel_softmax(logits, tau=0.5, hard=True)
    return onehot @ values.T  # BUG: contracts K with D


def prototypes(support: Float[torch.Tensor, "W S D"], query: Float[torch.Tensor, "Q D"]
               ) -> Float[torch.Tensor, "Q W"]:
    """Prototypical networks: class means of the support set, negative squared distances."""
    protos = support.mean(dim=1)
    return -torch.cdist(query, protos).pow(2)


def prototypes_bug(support: Float[torch.Tensor, "W S D"], query: Float[torch.Tensor, "Q D"]
                   ) -> Float[torch.Tensor, "Q W"]:
    protos = support.mean(dim=0)  # BUG: the mean over classes
    return -torch.cdist(query, protos).pow(2)


# -- a second batch: generators, recurrent cells, detection heads, evaluation -----------------


class DCGANGenerator(nn.Module):
    """DCGAN: a latent (B, 100, 1, 1) up to 3x32x32 by stride-2 transposed convolutions."""

    def __init__(self, nz: int = 100, ngf: int = 16) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z: Float[torch.Tensor, "B 100"]) -> Float[torch.Tensor, "B 3 32 32"]:
        return self.net(z[:, :, None, None])


class DCGANGeneratorBug(DCGANGenerator):
    def forward(self, z: Float[torch.Tensor, "B 100"]) -> Float[torch.Tensor, "B 3 32 32"]:
        return self.net(z[:, None, None, :])  # BUG: the latent on the width axis


def group_norm_by_hand(x: Float[torch.Tensor, "N 4*G H W"], weight: Float[torch.Tensor, "4*G"],
                       bias: Float[torch.Tensor, "4*G"], groups: int = 4
                       ) -> Float[torch.Tensor, "N 4*G H W"]:
    """GroupNorm written out: statistics over each group's channels and pixels."""
    n, c, h, w = x.shape
    g = x.view(n, groups, -1)
    mean = g.mean(-1, keepdim=True)
    var = g.var(-1, keepdim=True, unbiased=False)
    g = (g - mean) / torch.sqrt(var + 1e-5)
    return g.view(n, c, h, w) * weight[None, :, None, None] + bias[None, :, None, None]


def group_norm_by_hand_bug(x: Float[torch.Tensor, "N 4*G H W"],
                           weight: Float[torch.Tensor, "4*G"], bias: Float[torch.Tensor, "4*G"],
                           groups: int = 4) -> Float[torch.Tensor, "N 4*G H W"]:
    n, c, h, w = x.shape
    g = x.view(n, groups, -1)
    mean = g.mean(-1, keepdim=True)
    var = g.var(-1, keepdim=True, unbiased=False)
    g = (g - mean) / torch.sqrt(var + 1e-5)
    return g.view(n, c, h, w) * weight[None, :, None] + bias[None, :, None, None]  # BUG


def film(x: Float[torch.Tensor, "B C H W"], cond: Float[torch.Tensor, "B E"],
         w: Float[torch.Tensor, "2*C E"]) -> Float[torch.Tensor, "B C H W"]:
    """FiLM conditioning: a per-channel scale and shift from a conditioning vector."""
    gamma, beta = F.linear(cond, w).chunk(2, dim=-1)
    return x * (1 + gamma[:, :, None, None]) + beta[:, :, None, None]


def film_bug(x: Float[torch.Tensor, "B C H W"], cond: Float[torch.Tensor, "B E"],
             w: Float[torch.Tensor, "2*C E"]) -> Float[torch.Tensor, "B C H W"]:
    gamma, beta = F.linear(cond, w).chunk(2, dim=-1)
    return x * (1 + gamma[:, None, None, :]) + beta[:, :, None, None]  # BUG: channels last


def fcos_targets(points: Float[torch.Tensor, "P 2"], boxes: Float[torch.Tensor, "M 4"]
                 ) -> tuple[Float[torch.Tensor, "P 4"], Int[torch.Tensor, "P"]]:
    """FCOS: left/top/right/bottom distances of every point to every box; the smallest box
    that contains each point."""
    xs, ys = points[:, 0], points[:, 1]
    left = xs[:, None] - boxes[None, :, 0]
    top = ys[:, None] - boxes[None, :, 1]
    right = boxes[None, :, 2] - xs[:, None]
    bottom = boxes[None, :, 3] - ys[:, None]
    ltrb = torch.stack([left, top, right, bottom], dim=2)
    inside = ltrb.min(dim=2).values > 0
    area = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]))[None].repeat(len(points), 1)
    area[~inside] = float("inf")
    _, idx = area.min(dim=1)
    return ltrb[torch.arange(len(points)), idx], idx


def fcos_targets_bug(points: Float[torch.Tensor, "P 2"], boxes: Float[torch.Tensor, "M 4"]
                     ) -> tuple[Float[torch.Tensor, "P 4"], Int[torch.Tensor, "P"]]:
    xs, ys = points[:, 0], points[:, 1]
    left = xs[:, None] - boxes[None, :, 0]
    top = ys[:, None] - boxes[None, :, 1]
    right = boxes[None, :, 2] - xs[:, None]
    bottom = boxes[None, :, 3] - ys[:, None]
    ltrb = torch.stack([left, top, right, bottom], dim=2)
    inside = ltrb.min(dim=2).values > 0
    area = ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]))[None].repeat(len(points), 1)
    area[~inside] = float("inf")
    _, idx = area.min(dim=0)  # BUG: the closest point per box
    return ltrb[torch.arange(len(points)), idx], idx


def soft_argmax(heatmaps: Float[torch.Tensor, "B K H W"]) -> Float[torch.Tensor, "B K 2"]:
    """Integral pose regression: a softmax over each heatmap's pixels, expected (x, y)."""
    b, k, h, w = heatmaps.shape
    prob = F.softmax(heatmaps.reshape(b, k, -1), dim=-1).view(b, k, h, w)
    xs = torch.linspace(0, 1, w)
    ys = torch.linspace(0, 1, h)
    x = (prob.sum(dim=2) * xs).sum(dim=-1)
    y = (prob.sum(dim=3) * ys).sum(dim=-1)
    return torch.stack([x, y], dim=-1)


def soft_argmax_bug(heatmaps: Float[torch.Tensor, "B K H W"]) -> Float[torch.Tensor, "B K 2"]:
    b, k, h, w = heatmaps.shape
    prob = F.softmax(heatmaps.reshape(b, k, -1), dim=-1).view(b, k, h, w)
    xs = torch.linspace(0, 1, w)
    ys = torch.linspace(0, 1, h)
    x = (prob.sum(dim=2) * xs).sum(dim=-1)
    y = (prob.sum(dim=2) * ys).sum(dim=-1)  # BUG: sums out the rows again, W meets H
    return torch.stack([x, y], dim=-1)


def spatial_transformer(x: Float[torch.Tensor, "B C H W"], theta: Float[torch.Tensor, "B 6"]
                        ) -> Float[torch.Tensor, "B C H W"]:
    """STN: a per-sample affine matrix, a sampling grid of the input's size, grid_sample."""
    grid = F.affine_grid(theta.view(-1, 2, 3), list(x.size()), align_corners=False)
    return F.grid_sample(x, grid, align_corners=False)


def spatial_transformer_bug(x: Float[torch.Tensor, "B C H W"], theta: Float[torch.Tensor, "B 6"]
                            ) -> Float[torch.Tensor, "B C H W"]:
    grid = F.affine_grid(theta.view(-1, 2, 3), [x.size(0), x.size(1), 28, 28],  # BUG: MNIST's
                         align_corners=False)
    return F.grid_sample(x, grid, align_corners=False)


class LSTMClassifier(nn.Module):
    """A text classifier: embeddings, a batch-first 2-layer LSTM, the last layer's final
    hidden state to the logits."""

    def __init__(self, vocab: int = 100, dim: int = 16, hidden: int = 32, classes: int = 5
                 ) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, hidden, num_layers=2, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, tokens: Int[torch.Tensor, "B T"]) -> Float[torch.Tensor, "B 5"]:
        _, (h_n, _) = self.lstm(self.emb(tokens))
        return self.fc(h_n[-1])


class LSTMClassifierBug(LSTMClassifier):
    def forward(self, tokens: Int[torch.Tensor, "B T"]) -> Float[torch.Tensor, "B 5"]:
        out, _ = self.lstm(self.emb(tokens))
        return self.fc(out[-1])  # BUG: batch-first: the last sample's outputs, [T, 5]


def gru_cell(x: Float[torch.Tensor, "B I"], h: Float[torch.Tensor, "B H"],
             w_ih: Float[torch.Tensor, "3*H I"], w_hh: Float[torch.Tensor, "3*H H"]
             ) -> Float[torch.Tensor, "B H"]:
    """A GRU cell by hand: three gates from chunked input and hidden projections."""
    gi, gh = x @ w_ih.t(), h @ w_hh.t()
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = gh.chunk(3, 1)
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return (1 - z) * n + z * h


def gru_cell_bug(x: Float[torch.Tensor, "B I"], h: Float[torch.Tensor, "B H"],
                 w_ih: Float[torch.Tensor, "3*H I"], w_hh: Float[torch.Tensor, "3*H H"]
                 ) -> Float[torch.Tensor, "B H"]:
    gi, gh = x @ w_ih.t(), h @ w_hh.t()
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = gh.chunk(3, 0)  # BUG: chunks the batch
    r = torch.sigmoid(i_r + h_r)
    z = torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return (1 - z) * n + z * h


def bahdanau(enc: Float[torch.Tensor, "B T H"], s: Float[torch.Tensor, "B H"],
             w1: Float[torch.Tensor, "A H"], w2: Float[torch.Tensor, "A H"],
             v: Float[torch.Tensor, "1 A"]) -> Float[torch.Tensor, "B H"]:
    """Additive attention: v^T tanh(W1 h_t + W2 s), softmax over time, context vector."""
    scores = F.linear(torch.tanh(F.linear(enc, w1) + F.linear(s, w2).unsqueeze(1)), v)
    alpha = F.softmax(scores, dim=1)
    return (alpha * enc).sum(dim=1)


def bahdanau_bug(enc: Float[torch.Tensor, "B T H"], s: Float[torch.Tensor, "B H"],
                 w1: Float[torch.Tensor, "A H"], w2: Float[torch.Tensor, "A H"],
                 v: Float[torch.Tensor, "1 A"]) -> Float[torch.Tensor, "B H"]:
    scores = F.linear(torch.tanh(F.linear(enc, w1) + F.linear(s, w2)), v)  # BUG: [B, T, A] + [B, A]
    alpha = F.softmax(scores, dim=1)
    return (alpha * enc).sum(dim=1)


def moco_logits(q: Float[torch.Tensor, "N C"], k: Float[torch.Tensor, "N C"],
                queue: Float[torch.Tensor, "C K"], t: float = 0.07
                ) -> tuple[Float[torch.Tensor, "N 1+K"], Int[torch.Tensor, "N"]]:
    """MoCo: one positive logit per query, negatives against the queue, label 0."""
    l_pos = torch.einsum("nc,nc->n", q, k).unsqueeze(-1)
    l_neg = torch.einsum("nc,ck->nk", q, queue.clone().detach())
    logits = torch.cat([l_pos, l_neg], dim=1) / t
    return logits, torch.zeros(logits.shape[0], dtype=torch.long)


def moco_logits_bug(q: Float[torch.Tensor, "N C"], k: Float[torch.Tensor, "N C"],
                    queue: Float[torch.Tensor, "C K"], t: float = 0.07
                    ) -> tuple[Float[torch.Tensor, "N 1+K"], Int[torch.Tensor, "N"]]:
    l_pos = torch.einsum("nc,nc->n", q, k)  # BUG: the unsqueeze forgotten
    l_neg = torch.einsum("nc,ck->nk", q, queue.clone().detach())
    logits = torch.cat([l_pos, l_neg], dim=1) / t
    return logits, torch.zeros(logits.shape[0], dtype=torch.long)


def moco_enqueue(queue: Float[torch.Tensor, "C 8*N"], keys: Float[torch.Tensor, "N C"],
                 ptr: int = 0) -> Float[torch.Tensor, "C 8*N"]:
    """MoCo's dequeue-and-enqueue: the batch's keys written as columns at the pointer."""
    batch = keys.shape[0]
    queue[:, ptr:ptr + batch] = keys.T
    return queue


def moco_enqueue_bug(queue: Float[torch.Tensor, "C 8*N"], keys: Float[torch.Tensor, "N C"],
                     ptr: int = 0) -> Float[torch.Tensor, "C 8*N"]:
    batch = keys.shape[0]
    queue[:, ptr:ptr + batch] = keys  # BUG: rows are keys, the queue holds columns
    return queue


def topk_accuracy(output: Float[torch.Tensor, "B C"], target: Int[torch.Tensor, "B"]
                  ) -> Float[torch.Tensor, "2"]:
    """The ImageNet example's accuracy@1 and @5: top-5 predictions transposed, compared to
    the expanded targets, the first k rows counted."""
    _, pred = output.topk(5, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    res = [correct[:k].reshape(-1).float().sum(0) * (100.0 / target.size(0)) for k in (1, 5)]
    return torch.stack(res)


def topk_accuracy_bug(output: Float[torch.Tensor, "B C"], target: Int[torch.Tensor, "B"]
                      ) -> Float[torch.Tensor, "2"]:
    _, pred = output.topk(5, 1, True, True)
    correct = pred.eq(target.view(1, -1).expand_as(pred))  # BUG: [1, B] onto [B, 5]
    res = [correct[:k].reshape(-1).float().sum(0) * (100.0 / target.size(0)) for k in (1, 5)]
    return torch.stack(res)


def confusion_matrix(pred: Int[torch.Tensor, "N"], target: Int[torch.Tensor, "N"],
                     logits: Float[torch.Tensor, "N C"]) -> Float[torch.Tensor, "C"]:
    """Segmentation metrics: a confusion matrix by bincount, then per-class IoU."""
    n = logits.shape[1]
    hist = torch.bincount(n * target + pred, minlength=n * n).reshape(n, n).float()
    return torch.diag(hist) / (hist.sum(0) + hist.sum(1) - torch.diag(hist))


def confusion_matrix_bug(pred: Int[torch.Tensor, "N"], target: Int[torch.Tensor, "N"],
                         logits: Float[torch.Tensor, "N C"]) -> Float[torch.Tensor, "C"]:
    n = logits.shape[1]
    hist = torch.bincount(n * target + pred, minlength=n * n).reshape(n, n).float()
    return torch.diag(hist) / (hist.sum() + hist.sum(1) - torch.diag(hist)).unsqueeze(1)  # BUG


def selective_scan(x: Float[torch.Tensor, "B L D"], delta: Float[torch.Tensor, "B L D"],
                   A: Float[torch.Tensor, "D N"], Bm: Float[torch.Tensor, "B L N"],
                   C: Float[torch.Tensor, "B L N"]) -> Float[torch.Tensor, "B L D"]:
    """Mamba's reference scan: discretised A and B per step, a loop over the sequence."""
    dA = torch.exp(torch.einsum("bld,dn->bldn", delta, A))
    dBx = torch.einsum("bld,bln,bld->bldn", delta, Bm, x)
    h = x.new_zeros(x.shape[0], x.shape[2], A.shape[1])
    ys = []
    for i in range(x.shape[1]):
        h = dA[:, i] * h + dBx[:, i]
        ys.append(torch.einsum("bdn,bn->bd", h, C[:, i]))
    return torch.stack(ys, dim=1)


def selective_scan_bug(x: Float[torch.Tensor, "B L D"], delta: Float[torch.Tensor, "B L D"],
                       A: Float[torch.Tensor, "D N"], Bm: Float[torch.Tensor, "B L N"],
                       C: Float[torch.Tensor, "B L N"]) -> Float[torch.Tensor, "B L D"]:
    dA = torch.exp(torch.einsum("bld,dn->bldn", delta, A))
    dBx = torch.einsum("bld,bln,bld->bldn", delta, Bm, x)
    h = x.new_zeros(x.shape[0], x.shape[2], A.shape[1])
    ys = []
    for i in range(x.shape[1]):
        h = dA[:, i] * h + dBx[:, i]
        ys.append(torch.einsum("bdn,bn->bd", h, C[:, i]))
    return torch.stack(ys, dim=2)  # BUG: time last


def yolo_decode(p: Float[torch.Tensor, "B 3*(5+C) H W"], anchors: Float[torch.Tensor, "3 2"]
                ) -> Float[torch.Tensor, "B 3*H*W 5+C"]:
    """YOLOv3's head: (B, A*(5+C), H, W) viewed per anchor, channels last, a cell grid
    added to the sigmoid offsets, anchors times exp of the sizes."""
    b, _, h, w = p.shape
    p = p.view(b, 3, -1, h, w).permute(0, 1, 3, 4, 2).contiguous()
    gy, gx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    grid = torch.stack((gx, gy), 2).view(1, 1, h, w, 2).float()
    xy = (p[..., :2].sigmoid() + grid) * 8
    wh = p[..., 2:4].exp() * anchors.view(1, 3, 1, 1, 2)
    return torch.cat((xy, wh, p[..., 4:].sigmoid()), -1).view(b, -1, p.shape[-1])


def yolo_decode_bug(p: Float[torch.Tensor, "B 3*(5+C) H W"], anchors: Float[torch.Tensor, "3 2"]
                    ) -> Float[torch.Tensor, "B 3*H*W 5+C"]:
    b, _, h, w = p.shape
    p = p.view(b, 3, -1, h, w).permute(0, 1, 3, 4, 2).contiguous()
    gy, gx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    grid = torch.stack((gx, gy), 2).view(1, 1, h, w, 2).float()
    xy = (p[..., :2].sigmoid() + grid) * 8
    wh = p[..., 2:4].exp() * anchors.view(1, 3, 1, 1, 2)
    return torch.cat((xy, wh, p[..., 4:].sigmoid()), -1).view(b, p.shape[-1], -1)  # BUG


def detr_cost(logits: Float[torch.Tensor, "B Q K"], boxes: Float[torch.Tensor, "B Q 4"],
              tgt_ids: Int[torch.Tensor, "T"], tgt_boxes: Float[torch.Tensor, "T 4"]
              ) -> Float[torch.Tensor, "B Q T"]:
    """DETR's matcher cost: batch flattened, class probabilities at the target ids, L1
    distances by cdist, viewed back per image."""
    bs, nq = logits.shape[:2]
    prob = logits.flatten(0, 1).softmax(-1)
    out_bbox = boxes.flatten(0, 1)
    cost = torch.cdist(out_bbox, tgt_boxes, p=1) - prob[:, tgt_ids]
    return cost.view(bs, nq, -1)


def detr_cost_bug(logits: Float[torch.Tensor, "B Q K"], boxes: Float[torch.Tensor, "B Q 4"],
                  tgt_ids: Int[torch.Tensor, "T"], tgt_boxes: Float[torch.Tensor, "T 4"]
                  ) -> Float[torch.Tensor, "B Q T"]:
    bs, nq = logits.shape[:2]
    prob = logits.flatten(0, 1).softmax(-1)
    out_bbox = boxes.flatten(0, 1)
    cost = torch.cdist(out_bbox, tgt_boxes, p=1) - prob[tgt_ids]  # BUG: rows, not columns
    return cost.view(bs, nq, -1)


def bilinear_pool(x: Float[torch.Tensor, "B C H W"]) -> Float[torch.Tensor, "B C*C"]:
    """Bilinear CNN pooling: outer products of features averaged over pixels, signed square
    root, L2 normalisation."""
    b, c, h, w = x.shape
    x = x.view(b, c, h * w)
    g = torch.bmm(x, x.transpose(1, 2)) / (h * w)
    g = g.view(b, -1)
    return F.normalize(torch.sign(g) * torch.sqrt(torch.abs(g) + 1e-10))


def bilinear_pool_bug(x: Float[torch.Tensor, "B C H W"]) -> Float[torch.Tensor, "B C*C"]:
    b, c, h, w = x.shape
    x = x.view(b, c, h * w)
    g = torch.bmm(x.transpose(1, 2), x) / (h * w)  # BUG: the pixel Gram matrix
    g = g.view(b, -1)
    return F.normalize(torch.sign(g) * torch.sqrt(torch.abs(g) + 1e-10))


def local_attention(q: Float[torch.Tensor, "B C H W"], k: Float[torch.Tensor, "B C H W"]
                    ) -> Float[torch.Tensor, "B 9 H W"]:
    """Stand-alone self-attention's 3x3 neighbourhood: unfolded keys against each query."""
    b, c, h, w = k.shape
    kn = F.unfold(k, kernel_size=3, padding=1).view(b, c, 9, h, w)
    return torch.softmax((q.unsqueeze(2) * kn).sum(1), dim=1)


def local_attention_bug(q: Float[torch.Tensor, "B C H W"], k: Float[torch.Tensor, "B C H W"]
                        ) -> Float[torch.Tensor, "B 9 H W"]:
    b, c, h, w = k.shape
    kn = F.unfold(k, kernel_size=3, padding=1).view(b, c, 9, h, w)
    return torch.softmax((q.unsqueeze(1) * kn).sum(1), dim=1)  # BUG: [B, 1, C, H, W]


def sliding_window_mask(scores: Float[torch.Tensor, "B H T T"], window: int = 4
                        ) -> Float[torch.Tensor, "B H T T"]:
    """Mistral/Longformer-style banded causal mask from index differences."""
    t = scores.shape[-1]
    i = torch.arange(t).unsqueeze(1)
    j = torch.arange(t).unsqueeze(0)
    allowed = (j <= i) & (i - j < window)
    return scores.masked_fill(~allowed, float("-inf")).softmax(-1)


def sliding_window_mask_bug(scores: Float[torch.Tensor, "B H T T"], window: int = 4
                            ) -> Float[torch.Tensor, "B H T T"]:
    t = scores.shape[-1]
    i = torch.arange(scores.size(0)).unsqueeze(1)  # BUG: the batch size, not the length
    j = torch.arange(t).unsqueeze(0)
    allowed = (j <= i) & (i - j < window)
    return scores.masked_fill(~allowed, float("-inf")).softmax(-1)


class PerceiverLatents(nn.Module):
    """Perceiver: learned latents expanded over the batch cross-attend to the inputs."""

    def __init__(self, n_latents: int = 16, dim: int = 32) -> None:
        super().__init__()
        self.latents = nn.Parameter(torch.randn(n_latents, dim))
        self.attn = nn.MultiheadAttention(dim, 4, batch_first=True)

    def forward(self, x: Float[torch.Tensor, "B M 32"]) -> Float[torch.Tensor, "B 16 32"]:
        lat = self.latents.unsqueeze(0).expand(x.shape[0], -1, -1)
        out, _ = self.attn(lat, x, x, need_weights=False)
        return out


class PerceiverLatentsBug(PerceiverLatents):
    def forward(self, x: Float[torch.Tensor, "B M 32"]) -> Float[torch.Tensor, "B 16 32"]:
        lat = self.latents.unsqueeze(0).expand(x.shape[0], -1, -1)
        out, _ = self.attn(x, lat, lat, need_weights=False)  # BUG: inputs as the queries
        return out


def sdpa_padding(q: Float[torch.Tensor, "B H T D"], k: Float[torch.Tensor, "B H S D"],
                 v: Float[torch.Tensor, "B H S D"], key_pad: Bool[torch.Tensor, "B S"]
                 ) -> Float[torch.Tensor, "B T H*D"]:
    """A decoder's cross-attention through scaled_dot_product_attention: a key padding mask
    broadcast over heads and queries, heads merged after."""
    mask = ~key_pad[:, None, None, :]
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)


def sdpa_padding_bug(q: Float[torch.Tensor, "B H T D"], k: Float[torch.Tensor, "B H S D"],
                     v: Float[torch.Tensor, "B H S D"], key_pad: Bool[torch.Tensor, "B S"]
                     ) -> Float[torch.Tensor, "B T H*D"]:
    mask = ~key_pad[:, None, :, None]  # BUG: masks queries, [B, 1, S, 1]
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return out.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)


def n_step_returns(rewards: Float[torch.Tensor, "T N"], dones: Float[torch.Tensor, "T N"],
                   bootstrap: Float[torch.Tensor, "N"], gamma: float = 0.99
                   ) -> Float[torch.Tensor, "T N"]:
    """A2C's discounted returns: a reversed loop over time with the bootstrap value."""
    returns = torch.zeros_like(rewards)
    running = bootstrap
    for t in reversed(range(rewards.shape[0])):
        running = rewards[t] + gamma * running * (1.0 - dones[t])
        returns[t] = running
    return returns


def n_step_returns_bug(rewards: Float[torch.Tensor, "T N"], dones: Float[torch.Tensor, "T N"],
                       bootstrap: Float[torch.Tensor, "N"], gamma: float = 0.99
                       ) -> Float[torch.Tensor, "T N"]:
    returns = torch.zeros_like(rewards)
    running = bootstrap
    for t in reversed(range(rewards.shape[0])):
        running = rewards[t] + gamma * running * (1.0 - dones[:, None])  # BUG: whole rollout
        returns[t] = running
    return returns


# -- a third batch: shifted windows, hierarchical sampling, fused ops, self-supervision ---------


def swin_shifted_windows(x: Float[torch.Tensor, "B 7*H 7*W C"]
                         ) -> Float[torch.Tensor, "B*H*W 49 C"]:
    """Swin's SW-MSA input: a cyclic shift by half a window (torch.roll), then the windows."""
    b, hh, ww, c = x.shape
    x = torch.roll(x, shifts=(-3, -3), dims=(1, 2))
    x = x.view(b, hh // 7, 7, ww // 7, 7, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, 49, c)


def swin_shifted_windows_bug(x: Float[torch.Tensor, "B 7*H 7*W C"]
                             ) -> Float[torch.Tensor, "B*H*W 49 C"]:
    b, hh, ww, c = x.shape
    x = torch.roll(x, shifts=(-3, -3), dims=(1, 2))
    x = x.view(b, hh // 7, 7, ww // 7, 7, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, 7, c)  # BUG: a window row, not the window


def sample_pdf(bins: Float[torch.Tensor, "R S+1"], weights: Float[torch.Tensor, "R S"],
               u: Float[torch.Tensor, "R K"]) -> Float[torch.Tensor, "R K"]:
    """NeRF's hierarchical sampling: a CDF over the coarse weights, inverted by searchsorted,
    the neighbouring bins gathered and interpolated."""
    pdf = (weights + 1e-5) / torch.sum(weights + 1e-5, -1, keepdim=True)
    cdf = torch.cat([torch.zeros_like(pdf[..., :1]), torch.cumsum(pdf, -1)], -1)
    inds = torch.searchsorted(cdf, u.contiguous(), right=True)
    below = torch.clamp(inds - 1, min=0)
    above = torch.clamp(inds, max=cdf.shape[-1] - 1)
    g = torch.stack([below, above], -1)
    shape = [g.shape[0], g.shape[1], cdf.shape[-1]]
    cdf_g = torch.gather(cdf.unsqueeze(1).expand(shape), 2, g)
    bins_g = torch.gather(bins.unsqueeze(1).expand(shape), 2, g)
    denom = torch.where(cdf_g[..., 1] - cdf_g[..., 0] < 1e-5, 1.0, cdf_g[..., 1] - cdf_g[..., 0])
    t = (u - cdf_g[..., 0]) / denom
    return bins_g[..., 0] + t * (bins_g[..., 1] - bins_g[..., 0])


def sample_pdf_bug(bins: Float[torch.Tensor, "R S+1"], weights: Float[torch.Tensor, "R S"],
                   u: Float[torch.Tensor, "R K"]) -> Float[torch.Tensor, "R K"]:
    pdf = (weights + 1e-5) / torch.sum(weights + 1e-5, -1, keepdim=True)
    cdf = torch.cumsum(pdf, -1)  # BUG: no leading zero, S entries against S+1 bins
    inds = torch.searchsorted(cdf, u.contiguous(), right=True)
    below = torch.clamp(inds - 1, min=0)
    above = torch.clamp(inds, max=cdf.shape[-1] - 1)
    g = torch.stack([below, above], -1)
    shape = [g.shape[0], g.shape[1], cdf.shape[-1]]
    cdf_g = torch.gather(cdf.unsqueeze(1).expand(shape), 2, g)
    bins_g = torch.gather(bins.unsqueeze(1).expand(shape), 2, g)
    denom = torch.where(cdf_g[..., 1] - cdf_g[..., 0] < 1e-5, 1.0, cdf_g[..., 1] - cdf_g[..., 0])
    t = (u - cdf_g[..., 0]) / denom
    return bins_g[..., 0] + t * (bins_g[..., 1] - bins_g[..., 0])


def bloom_alibi_scores(q: Float[torch.Tensor, "B*H T D"], k: Float[torch.Tensor, "B*H D S"],
                       alibi: Float[torch.Tensor, "B*H 1 S"]) -> Float[torch.Tensor, "B*H T S"]:
    """BLOOM: the ALiBi bias as baddbmm's input, scores added to it in one fused call."""
    return torch.baddbmm(alibi, q, k, beta=1.0, alpha=q.shape[-1] ** -0.5)


def bloom_alibi_scores_bug(q: Float[torch.Tensor, "B*H T D"], k: Float[torch.Tensor, "B*H D S"],
                           alibi: Float[torch.Tensor, "B*H 1 S"]
                           ) -> Float[torch.Tensor, "B*H T S"]:
    return torch.baddbmm(alibi, q, k.transpose(1, 2), beta=1.0,  # BUG: keys already [D, S]
                         alpha=q.shape[-1] ** -0.5)


def simsiam_loss(p1: Float[torch.Tensor, "N D"], z2: Float[torch.Tensor, "N D"],
                 p2: Float[torch.Tensor, "N D"], z1: Float[torch.Tensor, "N D"]
                 ) -> Float[torch.Tensor, ""]:
    """SimSiam: negative cosine similarity, stop-gradient on the targets, symmetrised."""
    return -(F.cosine_similarity(p1, z2.detach(), dim=-1).mean()
             + F.cosine_similarity(p2, z1.detach(), dim=-1).mean()) * 0.5


def simsiam_loss_bug(p1: Float[torch.Tensor, "N D"], z2: Float[torch.Tensor, "N D"],
                     p2: Float[torch.Tensor, "N D"], z1: Float[torch.Tensor, "N D"]
                     ) -> Float[torch.Tensor, ""]:
    return -(F.cosine_similarity(p1, z2.detach().T, dim=-1).mean()  # BUG: [N, D] vs [D, N]
             + F.cosine_similarity(p2, z1.detach(), dim=-1).mean()) * 0.5


class EMALerp(nn.Module):
    """An EMA of a model's weights kept with lerp_ (timm's ModelEmaV3 style)."""

    def __init__(self, decay: float = 0.999) -> None:
        super().__init__()
        self.model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
        self.ema = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
        self.decay = decay

    def forward(self, x: Float[torch.Tensor, "B 16"]) -> Float[torch.Tensor, "B 4"]:
        with torch.no_grad():
            for e, m in zip(self.ema.state_dict().values(), self.model.state_dict().values(),
                            strict=True):
                e.lerp_(m, 1.0 - self.decay)
        return self.ema(x)


class EMALerpBug(EMALerp):
    def forward(self, x: Float[torch.Tensor, "B 16"]) -> Float[torch.Tensor, "B 4"]:
        with torch.no_grad():
            for e, m in zip(self.ema.state_dict().values(), self.model.state_dict().values(),
                            strict=True):
                e.lerp_(m, 1.0 - self.decay)
        return self.ema(x).T  # BUG: [4, B]


def onehot_scatter(labels: Int[torch.Tensor, "N"], logits: Float[torch.Tensor, "N C"],
                   eps: float = 0.1) -> Float[torch.Tensor, ""]:
    """Label smoothing with a one-hot built by scatter_ (the classic ImageNet recipe)."""
    one_hot = torch.zeros_like(logits).scatter_(1, labels.unsqueeze(1), 1)
    smooth = one_hot * (1 - eps) + eps / logits.shape[1]
    return -(smooth * F.log_softmax(logits, dim=1)).sum(dim=1).mean()


def onehot_scatter_bug(labels: Int[torch.Tensor, "N"], logits: Float[torch.Tensor, "N C"],
                       eps: float = 0.1) -> Float[torch.Tensor, ""]:
    one_hot = torch.zeros(len(labels), len(labels)).scatter_(1, labels.unsqueeze(1), 1)  # BUG
    smooth = one_hot * (1 - eps) + eps / logits.shape[1]
    return -(smooth * F.log_softmax(logits, dim=1)).sum(dim=1).mean()


def barlow_twins(z1: Float[torch.Tensor, "N D"], z2: Float[torch.Tensor, "N D"],
                 lambd: float = 0.005) -> Float[torch.Tensor, ""]:
    """Barlow Twins: batch-normalised embeddings, their D x D cross-correlation, the
    diagonal pulled to one and the rest to zero."""
    z1 = (z1 - z1.mean(0)) / z1.std(0)
    z2 = (z2 - z2.mean(0)) / z2.std(0)
    c = z1.T @ z2 / z1.shape[0]
    on_diag = torch.diagonal(c).add(-1).pow(2).sum()
    off_diag = (c - torch.diag(torch.diagonal(c))).pow(2).sum()
    return on_diag + lambd * off_diag


def barlow_twins_bug(z1: Float[torch.Tensor, "N D"], z2: Float[torch.Tensor, "N D"],
                     lambd: float = 0.005) -> Float[torch.Tensor, ""]:
    z1 = (z1 - z1.mean(0)) / z1.std(0)
    z2 = (z2 - z2.mean(0)) / z2.std(0)
    c = z1 @ z2.T / z1.shape[0]  # BUG: N x N, the samples' correlation
    on_diag = torch.diagonal(c).add(-1).pow(2).sum()
    off_diag = (c - torch.diag(torch.diagonal(c))).pow(2).sum()
    return on_diag + lambd * off_diag + c.mean(1) @ z1.mean(0)


def spp(x: Float[torch.Tensor, "B C H W"]) -> Float[torch.Tensor, "B 21*C"]:
    """Spatial pyramid pooling: adaptive max pools of 1, 2 and 4 bins, flattened and joined."""
    return torch.cat([F.adaptive_max_pool2d(x, n).flatten(1) for n in (1, 2, 4)], dim=1)


def spp_bug(x: Float[torch.Tensor, "B C H W"]) -> Float[torch.Tensor, "B 21*C"]:
    return torch.cat([F.adaptive_max_pool2d(x, n).flatten(2) for n in (1, 2, 4)], dim=1)  # BUG


def bag_of_words(ids: Int[torch.Tensor, "N"], offsets: Int[torch.Tensor, "B"],
                 table: Float[torch.Tensor, "V D"], w: Float[torch.Tensor, "K D"]
                 ) -> Float[torch.Tensor, "B K"]:
    """fastText-style: EmbeddingBag's mean over each bag given by offsets, a linear head."""
    return F.linear(F.embedding_bag(ids, table, offsets, mode="mean"), w)


def bag_of_words_bug(ids: Int[torch.Tensor, "N"], offsets: Int[torch.Tensor, "B"],
                     table: Float[torch.Tensor, "V D"], w: Float[torch.Tensor, "K D"]
                     ) -> Float[torch.Tensor, "B K"]:
    return F.linear(F.embedding(ids, table), w)  # BUG: one row per token, not per bag


def gqa_split(x: Float[torch.Tensor, "B T 32"], w: Float[torch.Tensor, "64 32"]
              ) -> Float[torch.Tensor, "B 4 T 8"]:
    """A fused projection split into 4 query heads and 2 key/value heads of 8 (Llama's
    packed qkv), keys repeated to the query heads by repeat_interleave."""
    b, t, _ = x.shape
    q, k, v = F.linear(x, w).split([32, 16, 16], dim=-1)
    q = q.view(b, t, 4, 8).transpose(1, 2)
    k = k.view(b, t, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
    v = v.view(b, t, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def gqa_split_bug(x: Float[torch.Tensor, "B T 32"], w: Float[torch.Tensor, "64 32"]
                  ) -> Float[torch.Tensor, "B 4 T 8"]:
    b, t, _ = x.shape
    q, k, v = F.linear(x, w).split([32, 16, 8], dim=-1)  # BUG: 56 of 64
    q = q.view(b, t, 4, 8).transpose(1, 2)
    k = k.view(b, t, 2, 8).transpose(1, 2).repeat_interleave(2, dim=1)
    v = v.view(b, t, 1, 8).transpose(1, 2).repeat_interleave(4, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def resize_pos_embed(pos: Float[torch.Tensor, "1 1+G*G D"], x: Float[torch.Tensor, "B 1+H*W D"],
                     grid: Float[torch.Tensor, "G G"], hw: Float[torch.Tensor, "H W"]
                     ) -> Float[torch.Tensor, "B 1+H*W D"]:
    """timm's resample_abs_pos_embed: the class token kept, the grid part bicubically
    resized to the new patch grid."""
    g, (h, w) = grid.shape[0], hw.shape
    cls, rest = pos[:, :1], pos[:, 1:]
    rest = rest.reshape(1, g, g, -1).permute(0, 3, 1, 2)
    rest = F.interpolate(rest, size=(h, w), mode="bicubic", align_corners=False)
    rest = rest.permute(0, 2, 3, 1).reshape(1, h * w, -1)
    return x + torch.cat([cls, rest], dim=1)


def resize_pos_embed_bug(pos: Float[torch.Tensor, "1 1+G*G D"],
                         x: Float[torch.Tensor, "B 1+H*W D"], grid: Float[torch.Tensor, "G G"],
                         hw: Float[torch.Tensor, "H W"]) -> Float[torch.Tensor, "B 1+H*W D"]:
    g, (h, w) = grid.shape[0], hw.shape
    cls, rest = pos[:, :1], pos[:, 1:]
    rest = rest.reshape(1, g, g, -1).permute(0, 3, 1, 2)
    rest = F.interpolate(rest, size=(h, w), mode="bicubic", align_corners=False)
    rest = rest.reshape(1, h * w, -1)  # BUG: channels still first
    return x + torch.cat([cls, rest], dim=1)


def bidirectional_merge(fwd: Float[torch.Tensor, "B T H"], bwd: Float[torch.Tensor, "B T H"]
                        ) -> Float[torch.Tensor, "B T 2*H"]:
    """A hand-rolled BiRNN's outputs: the backward pass run on the flipped sequence is
    flipped back before the two are joined."""
    return torch.cat([fwd, torch.flip(bwd, dims=[1])], dim=-1)


def bidirectional_merge_bug(fwd: Float[torch.Tensor, "B T H"], bwd: Float[torch.Tensor, "B T H"]
                            ) -> Float[torch.Tensor, "B T 2*H"]:
    return torch.cat([fwd, torch.flip(bwd, dims=[1])], dim=1)  # BUG: joined along time


def adaptive_head(x: Float[torch.Tensor, "B 512 H W"], w: Float[torch.Tensor, "K 512"]
                  ) -> Float[torch.Tensor, "B K"]:
    """A ResNet head: global average pooling to 1x1, flatten, the classifier."""
    return F.linear(torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1), w)


def adaptive_head_bug(x: Float[torch.Tensor, "B 512 H W"], w: Float[torch.Tensor, "K 512"]
                      ) -> Float[torch.Tensor, "B K"]:
    return F.linear(torch.flatten(F.adaptive_avg_pool2d(x, (2, 2)), 1), w)  # BUG: 2048 features


def cosine_classifier(x: Float[torch.Tensor, "B D"], w: Float[torch.Tensor, "C D"],
                      labels: Int[torch.Tensor, "B"], s: float = 30.0, m: float = 0.35
                      ) -> Float[torch.Tensor, ""]:
    """CosFace: cosine logits of normalised features and weights, a margin at the target."""
    cos = F.linear(F.normalize(x), F.normalize(w))
    onehot = torch.zeros_like(cos).scatter(1, labels.view(-1, 1), 1.0)
    return F.cross_entropy(s * (cos - m * onehot), labels)


def cosine_classifier_bug(x: Float[torch.Tensor, "B D"], w: Float[torch.Tensor, "C D"],
                          labels: Int[torch.Tensor, "B"], s: float = 30.0, m: float = 0.35
                          ) -> Float[torch.Tensor, ""]:
    cos = F.linear(F.normalize(x), F.normalize(w, dim=0))
    onehot = torch.zeros_like(cos).scatter(1, labels.view(-1, 1), 1.0)
    return F.cross_entropy(s * (cos - m * onehot), labels.view(-1, 1))  # BUG: [B, 1] targets


# -- a fourth batch: padding to a multiple, Hugging Face idioms, masked selections -------------


def swin_pad_windows(x: Float[torch.Tensor, "B H W C"]
                     ) -> Float[torch.Tensor, "B*((H+6)//7)*((W+6)//7) 49 C"]:
    """Swin pads the map to a multiple of the window before partitioning it."""
    b, h, w, c = x.shape
    pad_r = (7 - w % 7) % 7
    pad_b = (7 - h % 7) % 7
    x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
    hp, wp = h + pad_b, w + pad_r
    x = x.view(b, hp // 7, 7, wp // 7, 7, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, 49, c)


def swin_pad_windows_bug(x: Float[torch.Tensor, "B H W C"]
                         ) -> Float[torch.Tensor, "B*((H+6)//7)*((W+6)//7) 49 C"]:
    b, h, w, c = x.shape
    pad_r = (7 - w % 7) % 7
    pad_b = (7 - h % 7) % 7
    x = F.pad(x, (0, 0, 0, pad_b, 0, pad_r))  # BUG: the pads swapped
    hp, wp = h + pad_b, w + pad_r
    x = x.view(b, hp // 7, 7, wp // 7, 7, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, 49, c)


def bert_heads(x: Float[torch.Tensor, "B T 768"]) -> Float[torch.Tensor, "B 12 T 64"]:
    """BERT's transpose_for_scores: the shape built as x.size()[:-1] + (heads, head size)."""
    new_shape = x.size()[:-1] + (12, 64)  # noqa: RUF005 (as BERT writes it)
    return x.view(new_shape).permute(0, 2, 1, 3)


def bert_heads_bug(x: Float[torch.Tensor, "B T 768"]) -> Float[torch.Tensor, "B 12 T 64"]:
    new_shape = x.size()[:-1] + (12, 64)  # noqa: RUF005 (as BERT writes it)
    return x.view(new_shape).transpose(1, 3)  # BUG: [B, 64, 12, T]


def extended_mask(mask: Int[torch.Tensor, "B T"], scores: Float[torch.Tensor, "B H T T"]
                  ) -> Float[torch.Tensor, "B H T T"]:
    """Hugging Face's extended attention mask: [B, 1, 1, T], the dtype's minimum where 0."""
    ext = mask[:, None, None, :].to(dtype=scores.dtype)
    return scores + (1.0 - ext) * torch.finfo(scores.dtype).min


def extended_mask_bug(mask: Int[torch.Tensor, "B T"], scores: Float[torch.Tensor, "B H T T"]
                      ) -> Float[torch.Tensor, "B H T T"]:
    ext = mask[:, None, :].to(dtype=scores.dtype)  # BUG: [B, 1, T] meets [.., H, T, T]
    return scores + (1.0 - ext) * torch.finfo(scores.dtype).min


def position_embeddings(ids: Int[torch.Tensor, "B T"], wte: Float[torch.Tensor, "V D"],
                        wpe: Float[torch.Tensor, "1024 D"]) -> Float[torch.Tensor, "B T D"]:
    """GPT-2's embeddings: position ids from arange, expanded over the batch."""
    pos = torch.arange(ids.shape[1], dtype=torch.long, device=ids.device)
    pos = pos.unsqueeze(0).expand(ids.shape[0], -1)
    return F.embedding(ids, wte) + F.embedding(pos, wpe)


def position_embeddings_bug(ids: Int[torch.Tensor, "B T"], wte: Float[torch.Tensor, "V D"],
                            wpe: Float[torch.Tensor, "1024 D"]) -> Float[torch.Tensor, "B T D"]:
    pos = torch.arange(ids.shape[0], dtype=torch.long, device=ids.device)  # BUG: the batch
    pos = pos.unsqueeze(0).expand(ids.shape[0], -1)
    return F.embedding(ids, wte) + F.embedding(pos, wpe)


def t5_relative_bias(q: Float[torch.Tensor, "Q D"], k: Float[torch.Tensor, "K D"],
                     table: Float[torch.Tensor, "32 H"]) -> Float[torch.Tensor, "1 H Q K"]:
    """T5's bidirectional relative position buckets: exact near, logarithmic far."""
    context = torch.arange(q.shape[0], dtype=torch.long)[:, None]
    memory = torch.arange(k.shape[0], dtype=torch.long)[None, :]
    rel = memory - context
    buckets = (rel > 0).to(torch.long) * 16
    n = torch.abs(rel)
    is_small = n < 8
    large = 8 + (torch.log(n.float() / 8) / math.log(128 / 8) * 8).to(torch.long)
    large = torch.min(large, torch.full_like(large, 15))
    buckets += torch.where(is_small, n, large)
    return table[buckets].permute(2, 0, 1).unsqueeze(0)


def t5_relative_bias_bug(q: Float[torch.Tensor, "Q D"], k: Float[torch.Tensor, "K D"],
                         table: Float[torch.Tensor, "32 H"]) -> Float[torch.Tensor, "1 H Q K"]:
    context = torch.arange(q.shape[0], dtype=torch.long)[:, None]
    memory = torch.arange(k.shape[0], dtype=torch.long)[:, None]  # BUG: both as columns
    rel = memory - context
    buckets = (rel > 0).to(torch.long) * 16
    n = torch.abs(rel)
    is_small = n < 8
    large = 8 + (torch.log(n.float() / 8) / math.log(128 / 8) * 8).to(torch.long)
    large = torch.min(large, torch.full_like(large, 15))
    buckets += torch.where(is_small, n, large)
    return table[buckets].permute(2, 0, 1).unsqueeze(0)


def masked_lm_loss(logits: Float[torch.Tensor, "B T V"], labels: Int[torch.Tensor, "B T"]
                   ) -> Float[torch.Tensor, ""]:
    """A masked LM's loss on the masked positions only, selected by one boolean mask."""
    m = labels != -100
    return F.cross_entropy(logits[m], labels[m])


def masked_lm_loss_bug(logits: Float[torch.Tensor, "B T V"], labels: Int[torch.Tensor, "B T"]
                       ) -> Float[torch.Tensor, ""]:
    m = labels != -100
    return F.cross_entropy(logits[m], labels.view(-1))  # BUG: every label, not the masked


def resnet_d_down(x: Float[torch.Tensor, "B 64 H W"], w: Float[torch.Tensor, "128 64 3 3"],
                  ws: Float[torch.Tensor, "128 64 1 1"]
                  ) -> Float[torch.Tensor, "B 128 (H+1)//2 (W+1)//2"]:
    """ResNet-D's downsampling block: a stride-2 3x3 conv beside an average-pooled 1x1
    shortcut; ceil_mode makes the pool's size the conv's at odd sizes too."""
    y = F.conv2d(x, w, stride=2, padding=1)
    s = F.conv2d(F.avg_pool2d(x, 2, 2, ceil_mode=True, count_include_pad=False), ws)
    return y + s


def resnet_d_down_bug(x: Float[torch.Tensor, "B 64 H W"], w: Float[torch.Tensor, "128 64 3 3"],
                      ws: Float[torch.Tensor, "128 64 1 1"]
                      ) -> Float[torch.Tensor, "B 128 (H+1)//2 (W+1)//2"]:
    y = F.conv2d(x, w, stride=2, padding=1)
    s = F.conv2d(F.avg_pool2d(x, 2, 2), ws)  # BUG: floor at odd sizes, the conv's is ceil
    return y + s


# -- a fifth batch: library layers with masks, spectral round trips, graph scatters ------------


class CausalEncoder(nn.Module):
    """A batch-first Transformer encoder layer with a causal mask and a key padding mask."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)

    def forward(self, x: Float[torch.Tensor, "B T 32"], pad: Bool[torch.Tensor, "B T"]
                ) -> Float[torch.Tensor, "B T 32"]:
        causal = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.layer(x, src_mask=causal, src_key_padding_mask=pad)


class CausalEncoderBug(CausalEncoder):
    def forward(self, x: Float[torch.Tensor, "B T 32"], pad: Bool[torch.Tensor, "B T"]
                ) -> Float[torch.Tensor, "B T 32"]:
        causal = nn.Transformer.generate_square_subsequent_mask(x.shape[0])  # BUG: B x B
        return self.layer(x, src_mask=causal, src_key_padding_mask=pad)


def spectral_gate(x: Float[torch.Tensor, "B 256*N"], gain: Float[torch.Tensor, "257 1"]
                  ) -> Float[torch.Tensor, "B 256*N"]:
    """Speech enhancement: STFT, a per-frequency gain on the magnitude, the phase kept,
    inverse STFT to the input's length."""
    w = torch.hann_window(512)
    spec = torch.stft(x, 512, 256, window=w, return_complex=True)
    spec = torch.polar(spec.abs() * gain, spec.angle())
    return torch.istft(spec, 512, 256, window=w, length=x.shape[-1])


def spectral_gate_bug(x: Float[torch.Tensor, "B 256*N"], gain: Float[torch.Tensor, "257 1"]
                      ) -> Float[torch.Tensor, "B 256*N"]:
    w = torch.hann_window(512)
    spec = torch.stft(x, 512, 256, window=w, return_complex=True)
    spec = torch.polar(spec.abs() * gain.T, spec.angle())  # BUG: a gain per frame
    return torch.istft(spec, 512, 256, window=w, length=x.shape[-1])


def stft_power(wav: Float[torch.Tensor, "B 64*N"]) -> Float[torch.Tensor, "B 65 N+1"]:
    """A power spectrogram as code written for both STFT conventions does it: a complex
    result viewed as (real, imaginary) pairs, their squares summed."""
    spec = torch.stft(wav, n_fft=128, hop_length=64, window=torch.hann_window(128),
                      return_complex=True)
    if spec.is_complex():
        spec = torch.view_as_real(spec)
    return spec.pow(2).sum(-1)


def stft_power_bug(wav: Float[torch.Tensor, "B 64*N"]) -> Float[torch.Tensor, "B 65 N+1"]:
    spec = torch.stft(wav, n_fft=128, hop_length=64, window=torch.hann_window(128),
                      return_complex=True)
    spec = torch.view_as_real(spec.abs())  # BUG: the magnitude is real, torch refuses it
    return spec.pow(2).sum(-1)


def scatter_mean(src: Float[torch.Tensor, "E D"], index: Int[torch.Tensor, "E"],
                 x: Float[torch.Tensor, "N D"]) -> Float[torch.Tensor, "N D"]:
    """torch_scatter's mean by hand: scatter_add_ of the messages and of float ones."""
    out = torch.zeros_like(x).scatter_add_(0, index[:, None].expand_as(src), src)
    ones = torch.ones_like(index, dtype=torch.float)
    count = torch.zeros(x.shape[0]).scatter_add_(0, index, ones)
    return out / count.clamp(min=1)[:, None]


def scatter_mean_bug(src: Float[torch.Tensor, "E D"], index: Int[torch.Tensor, "E"],
                     x: Float[torch.Tensor, "N D"]) -> Float[torch.Tensor, "N D"]:
    out = torch.zeros_like(x).scatter_add_(0, index[:, None].expand_as(src), src)
    ones = torch.ones_like(index, dtype=torch.float)
    count = torch.zeros(x.shape[0]).scatter_add_(0, index, ones)
    return out / count.clamp(min=1)  # BUG: [N, D] / [N]


def edge_mlp(x: Float[torch.Tensor, "N D"], edge_index: Int[torch.Tensor, "2 E"],
             w: Float[torch.Tensor, "H 2*D"]) -> Float[torch.Tensor, "E H"]:
    """An edge network: the two endpoints' features concatenated per edge."""
    src, dst = edge_index
    return F.relu(F.linear(torch.cat([x[src], x[dst]], dim=-1), w))


def edge_mlp_bug(x: Float[torch.Tensor, "N D"], edge_index: Int[torch.Tensor, "2 E"],
                 w: Float[torch.Tensor, "H 2*D"]) -> Float[torch.Tensor, "E H"]:
    src, dst = edge_index
    return F.relu(F.linear(torch.cat([x[src], x[dst]], dim=0), w))  # BUG: stacked edges


def roberta_positions(ids: Int[torch.Tensor, "B T"], wpe: Float[torch.Tensor, "514 D"]
                      ) -> Float[torch.Tensor, "B T D"]:
    """RoBERTa's position ids: a cumulative count of non-padding tokens, past the pad index."""
    mask = ids.ne(1).int()
    pos = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + 1
    return F.embedding(pos, wpe, padding_idx=1)


def roberta_positions_bug(ids: Int[torch.Tensor, "B T"], wpe: Float[torch.Tensor, "514 D"]
                          ) -> Float[torch.Tensor, "B T D"]:
    mask = ids.ne(1).int()
    pos = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long().sum(0) + 1  # BUG: summed
    return F.embedding(pos, wpe, padding_idx=1)


def unflatten_heads(x: Float[torch.Tensor, "B T 4*D"], y: Float[torch.Tensor, "B S 4*D"]
                    ) -> Float[torch.Tensor, "B 4 T S"]:
    """Heads split with unflatten (newer code's view), scores by an ellipsis einsum."""
    q = x.unflatten(-1, (4, -1)).transpose(1, 2)
    k = y.unflatten(-1, (4, -1)).transpose(1, 2)
    return torch.einsum("...td,...sd->...ts", q, k)


def unflatten_heads_bug(x: Float[torch.Tensor, "B T 4*D"], y: Float[torch.Tensor, "B S 4*D"]
                        ) -> Float[torch.Tensor, "B 4 T S"]:
    q = x.unflatten(-1, (4, -1)).transpose(1, 2)
    k = y.unflatten(-1, (-1, 4)).transpose(1, 2)  # BUG: [B, D, S, 4]
    return torch.einsum("...td,...sd->...ts", q, k)


def geglu(x: Float[torch.Tensor, "B T D"], w: Float[torch.Tensor, "2*F D"],
          w2: Float[torch.Tensor, "D F"]) -> Float[torch.Tensor, "B T D"]:
    """GEGLU feed-forward: one projection chunked into value and gate."""
    a, g = F.linear(x, w).chunk(2, dim=-1)
    return F.linear(a * F.gelu(g), w2)


def geglu_bug(x: Float[torch.Tensor, "B T D"], w: Float[torch.Tensor, "2*F D"],
              w2: Float[torch.Tensor, "D F"]) -> Float[torch.Tensor, "B T D"]:
    a, g = F.linear(x, w).chunk(2, dim=1)  # BUG: halves the time axis
    return F.linear(a * F.gelu(g), w2)


# -- a sixth batch: blocks of current vision and diffusion backbones ---------------------------


class ViTAttention(nn.Module):
    """timm's Attention: one qkv linear, reshaped and permuted to (3, B, heads, N, d),
    unbound, fused attention, heads merged back."""

    def __init__(self, dim: int = 48, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: Float[torch.Tensor, "B N 48"]) -> Float[torch.Tensor, "B N 48"]:
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


class ViTAttentionBug(ViTAttention):
    def forward(self, x: Float[torch.Tensor, "B N 48"]) -> Float[torch.Tensor, "B N 48"]:
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.reshape(B, N, C))  # BUG: heads merged without the transpose


class ConvNeXtBlock(nn.Module):
    """ConvNeXt: a 7x7 depthwise conv, channels-last LayerNorm and MLP, layer scale."""

    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.pw1 = nn.Linear(dim, 4 * dim)
        self.pw2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(1e-6 * torch.ones(dim))

    def forward(self, x: Float[torch.Tensor, "B 32 H W"]) -> Float[torch.Tensor, "B 32 H W"]:
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(F.gelu(self.pw1(self.norm(y))))
        return x + (self.gamma * y).permute(0, 3, 1, 2)


class ConvNeXtBlockBug(ConvNeXtBlock):
    def forward(self, x: Float[torch.Tensor, "B 32 H W"]) -> Float[torch.Tensor, "B 32 H W"]:
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(F.gelu(self.pw1(self.norm(y))))
        return x + self.gamma * y.permute(0, 3, 1, 2)  # BUG: the scale meets the width


def modulate(x: torch.Tensor, shift: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


class DiTBlock(nn.Module):
    """DiT: adaLN-Zero, six modulation vectors from the condition, chunked."""

    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.n1 = nn.LayerNorm(d, elementwise_affine=False)
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.n2 = nn.LayerNorm(d, elementwise_affine=False)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * d, d))
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(d, 6 * d))

    def forward(self, x: Float[torch.Tensor, "B N 32"], c: Float[torch.Tensor, "B 32"]
                ) -> Float[torch.Tensor, "B N 32"]:
        sm, scm, gm, sp, scp, gp = self.ada(c).chunk(6, dim=1)
        h = modulate(self.n1(x), sm, scm)
        x = x + gm.unsqueeze(1) * self.attn(h, h, h, need_weights=False)[0]
        return x + gp.unsqueeze(1) * self.mlp(modulate(self.n2(x), sp, scp))


class DiTBlockBug(DiTBlock):
    def forward(self, x: Float[torch.Tensor, "B N 32"], c: Float[torch.Tensor, "B 32"]
                ) -> Float[torch.Tensor, "B N 32"]:
        sm, scm, gm, sp, scp, gp = self.ada(c).chunk(6, dim=1)
        h = modulate(self.n1(x), sm, scm)
        x = x + gm * self.attn(h, h, h, need_weights=False)[0]  # BUG: [B, 32] on [B, N, 32]
        return x + gp.unsqueeze(1) * self.mlp(modulate(self.n2(x), sp, scp))


def clip_text_pool(x: Float[torch.Tensor, "B T D"], ids: Int[torch.Tensor, "B T"],
                   proj: Float[torch.Tensor, "D E"]) -> Float[torch.Tensor, "B E"]:
    """CLIP's text features: the hidden state at each sequence's end token (its largest id)."""
    return x[torch.arange(x.shape[0]), ids.argmax(dim=-1)] @ proj


def clip_text_pool_bug(x: Float[torch.Tensor, "B T D"], ids: Int[torch.Tensor, "B T"],
                       proj: Float[torch.Tensor, "D E"]) -> Float[torch.Tensor, "B E"]:
    return x[:, ids.argmax(dim=-1)] @ proj  # BUG: every sequence at every end: [B, B, E]


class UNetResBlock(nn.Module):
    """A diffusion U-Net's residual block: GroupNorm(32), SiLU, the time embedding added as
    per-channel biases, dropout."""

    def __init__(self, c: int = 64, t: int = 32) -> None:
        super().__init__()
        self.n1 = nn.GroupNorm(32, c)
        self.c1 = nn.Conv2d(c, c, 3, padding=1)
        self.emb = nn.Linear(t, c)
        self.n2 = nn.GroupNorm(32, c)
        self.drop = nn.Dropout(0.1)
        self.c2 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x: Float[torch.Tensor, "B 64 H W"], t: Float[torch.Tensor, "B 32"]
                ) -> Float[torch.Tensor, "B 64 H W"]:
        h = self.c1(F.silu(self.n1(x)))
        h = h + self.emb(F.silu(t))[:, :, None, None]
        return x + self.c2(self.drop(F.silu(self.n2(h))))


class UNetResBlockBug(UNetResBlock):
    def forward(self, x: Float[torch.Tensor, "B 64 H W"], t: Float[torch.Tensor, "B 32"]
                ) -> Float[torch.Tensor, "B 64 H W"]:
        h = self.c1(F.silu(self.n1(x)))
        h = h + self.emb(F.silu(t))[:, None, None, :]  # BUG: channels last
        return x + self.c2(self.drop(F.silu(self.n2(h))))


CASES = [
    ("rope via complex polar", rope_complex, rope_complex_bug, "TS108"),
    ("rope rotate_half from position ids", rope_half, rope_half_bug, "TS101"),
    ("gqa repeat_kv expand+reshape", repeat_kv, repeat_kv_bug, "TS102"),
    ("alibi bias", alibi_bias, alibi_bias_bug, "TS101"),
    ("transformer-xl rel_shift", rel_shift, rel_shift_bug, "TS104"),
    ("kv cache append", kv_cache_append, kv_cache_append_bug, "TS106"),
    ("rmsnorm + swiglu block", RMSNormSwiGLU, RMSNormSwiGLUBug, "TS101"),
    ("moe top-2 routing", moe_route, moe_route_bug, "TS101"),
    ("moe load balance loss", moe_load_balance, moe_load_balance_bug, "TS101"),
    ("top-p filter", top_p_filter, top_p_filter_bug, "TS101"),
    ("top-k sample next", sample_next, sample_next_bug, "TS101"),
    ("swin window_reverse", window_reverse, window_reverse_bug, "TS202"),
    ("swin patch merging", patch_merging, patch_merging_bug, "TS102"),
    ("swin relative position bias", relative_position_bias, relative_position_bias_bug, "TS101"),
    ("mobilenet depthwise separable", DepthwiseSeparable, DepthwiseSeparableBug, "TS102"),
    ("mobilenetv2 inverted residual", InvertedResidual, InvertedResidualBug, "TS101"),
    ("espcn pixel shuffle", pixel_shuffle_up, pixel_shuffle_up_bug, "TS103"),
    ("unet interpolate + skip", unet_up, unet_up_bug, "TS106"),
    ("unet conv_transpose + skip", unet_up_transpose, unet_up_transpose_bug, "TS106"),
    ("fpn top-down", fpn_top_down, fpn_top_down_bug, "TS101"),
    ("cbam spatial attention", cbam_spatial, cbam_spatial_bug, "TS101"),
    ("drop path", drop_path, drop_path_bug, "TS101"),
    ("mae random masking", mae_random_masking, mae_random_masking_bug, "TS103"),
    ("vit class token + pos", vit_tokens, vit_tokens_bug, "TS101"),
    ("pointnet max over points", PointNetEncoder, PointNetEncoderBug, "TS103"),
    ("nerf volume rendering", volume_render, volume_render_bug, "TS101"),
    ("nerf positional encoding", positional_encoding, positional_encoding_bug, "TS103"),
    ("chamfer distance", chamfer, chamfer_bug, "TS101"),
    ("vae loss", vae_loss, vae_loss_bug, "TS103"),
    ("vq-vae quantize", vq_quantize, vq_quantize_bug, "TS101"),
    ("clip contrastive loss", clip_loss, clip_loss_bug, "TS101"),
    ("simclr nt-xent", nt_xent, nt_xent_bug, "TS101"),
    ("batch-hard triplet", triplet_hard, triplet_hard_bug, "TS102"),
    ("focal loss", focal_loss, focal_loss_bug, "TS101"),
    ("label smoothing ce", label_smoothing_ce, label_smoothing_ce_bug, "TS101"),
    ("flattened sequence ce", seq_ce_flat, seq_ce_flat_bug, "TS102"),
    ("distillation kl", distill_kl, distill_kl_bug, "TS101"),
    ("dice loss", dice_loss, dice_loss_bug, "TS101"),
    ("masked mean pool", masked_mean_pool, masked_mean_pool_bug, "TS101"),
    ("ppo clipped loss", ppo_clip_loss, ppo_clip_loss_bug, "TS101"),
    ("sac soft q target", sac_q_target, sac_q_target_bug, "TS201"),
    ("ema teacher update", EMATeacher, EMATeacherBug, "TS101"),
    ("dino centring buffer", DinoCenter, DinoCenterBug, "TS101"),
    ("wavenet causal conv", causal_conv1d, causal_conv1d_bug, "TS101"),
    ("conformer glu conv", glu_conformer_conv, glu_conformer_conv_bug, "TS102"),
    ("lengths key padding mask", lengths_mask_attention, lengths_mask_attention_bug, "TS101"),
    ("mixup", mixup, mixup_bug, "TS101"),
    ("gumbel straight-through", gumbel_select, gumbel_select_bug, "TS102"),
    ("prototypical networks", prototypes, prototypes_bug, "TS103"),
    ("dcgan transposed convs", DCGANGenerator, DCGANGeneratorBug, "TS102"),
    ("group norm by hand", group_norm_by_hand, group_norm_by_hand_bug, "TS101"),
    ("film conditioning", film, film_bug, "TS101"),
    ("fcos ltrb targets", fcos_targets, fcos_targets_bug, "TS101"),
    ("soft-argmax keypoints", soft_argmax, soft_argmax_bug, "TS101"),
    ("spatial transformer", spatial_transformer, spatial_transformer_bug, "TS103"),
    ("lstm classifier", LSTMClassifier, LSTMClassifierBug, "TS103"),
    ("gru cell by hand", gru_cell, gru_cell_bug, "TS101"),
    ("bahdanau attention", bahdanau, bahdanau_bug, "TS101"),
    ("moco logits", moco_logits, moco_logits_bug, "TS106"),
    ("moco enqueue", moco_enqueue, moco_enqueue_bug, "TS101"),
    ("top-k accuracy", topk_accuracy, topk_accuracy_bug, "TS101"),
    ("confusion matrix iou", confusion_matrix, confusion_matrix_bug, "TS103"),
    ("mamba selective scan", selective_scan, selective_scan_bug, "TS103"),
    ("yolo head decode", yolo_decode, yolo_decode_bug, "TS202"),
    ("detr matcher cost", detr_cost, detr_cost_bug, "TS101"),
    ("bilinear pooling", bilinear_pool, bilinear_pool_bug, "TS103"),
    ("unfold local attention", local_attention, local_attention_bug, "TS101"),
    ("sliding window mask", sliding_window_mask, sliding_window_mask_bug, "TS101"),
    ("perceiver latents", PerceiverLatents, PerceiverLatentsBug, "TS103"),
    ("sdpa key padding", sdpa_padding, sdpa_padding_bug, "TS101"),
    ("n-step returns", n_step_returns, n_step_returns_bug, "TS101"),
    ("swin shifted windows roll", swin_shifted_windows, swin_shifted_windows_bug, "TS103"),
    ("nerf sample_pdf", sample_pdf, sample_pdf_bug, "TS101"),
    ("bloom baddbmm alibi", bloom_alibi_scores, bloom_alibi_scores_bug, "TS102"),
    ("simsiam cosine similarity", simsiam_loss, simsiam_loss_bug, "TS101"),
    ("ema lerp_", EMALerp, EMALerpBug, "TS103"),
    ("one-hot by scatter_", onehot_scatter, onehot_scatter_bug, "TS101"),
    ("barlow twins", barlow_twins, barlow_twins_bug, "TS102"),
    ("spatial pyramid pooling", spp, spp_bug, "TS106"),
    ("embedding bag", bag_of_words, bag_of_words_bug, "TS103"),
    ("packed qkv split", gqa_split, gqa_split_bug, "TS107"),
    ("resize position embedding", resize_pos_embed, resize_pos_embed_bug, "TS202"),
    ("bidirectional merge flip", bidirectional_merge, bidirectional_merge_bug, "TS103"),
    ("adaptive pool head", adaptive_head, adaptive_head_bug, "TS102"),
    ("cosface margin", cosine_classifier, cosine_classifier_bug, "TS102"),
    ("swin pad to window multiple", swin_pad_windows, swin_pad_windows_bug, "TS104"),
    ("bert transpose_for_scores", bert_heads, bert_heads_bug, "TS103"),
    ("hf extended attention mask", extended_mask, extended_mask_bug, "TS101"),
    ("gpt2 position ids", position_embeddings, position_embeddings_bug, "TS101"),
    ("t5 relative buckets", t5_relative_bias, t5_relative_bias_bug, "TS103"),
    ("masked lm loss", masked_lm_loss, masked_lm_loss_bug, "TS102"),
    ("resnet-d avg-pool shortcut", resnet_d_down, resnet_d_down_bug, "TS101"),
    ("transformer layer causal + padding", CausalEncoder, CausalEncoderBug, "TS108"),
    ("stft gain istft", spectral_gate, spectral_gate_bug, "TS101"),
    ("stft power via view_as_real", stft_power, stft_power_bug, "TS108"),
    ("scatter mean", scatter_mean, scatter_mean_bug, "TS101"),
    ("edge mlp", edge_mlp, edge_mlp_bug, "TS102"),
    ("roberta position ids", roberta_positions, roberta_positions_bug, "TS103"),
    ("unflatten heads", unflatten_heads, unflatten_heads_bug, "TS102"),
    ("geglu", geglu, geglu_bug, "TS103"),
    ("timm vit attention", ViTAttention, ViTAttentionBug, "TS202"),
    ("convnext block", ConvNeXtBlock, ConvNeXtBlockBug, "TS101"),
    ("dit adaln-zero block", DiTBlock, DiTBlockBug, "TS101"),
    ("clip text pooling", clip_text_pool, clip_text_pool_bug, "TS103"),
    ("unet res block", UNetResBlock, UNetResBlockBug, "TS101"),
]

# ViT / DALL-E patch grids read off a token count, ``h = w = int(math.sqrt(n))``: verified
# with the count a new size's square, an assumption stated once (tests: SQUARES)


def tokens_to_map(x: Float[torch.Tensor, "B 1+N C"]) -> Float[torch.Tensor, "B C H W"]:
    """ViT features as a map for a dense head: the class token dropped, the grid's side the
    root of the patch count."""
    b, n, c = x.shape
    h = w = int(math.sqrt(n - 1))
    return x[:, 1:].reshape(b, h, w, c).permute(0, 3, 1, 2)


def tokens_to_map_bug(x: Float[torch.Tensor, "B 1+N C"]) -> Float[torch.Tensor, "B C H W"]:
    b, n, c = x.shape
    h = w = int(math.sqrt(n))  # BUG: the class token counted
    return x[:, 1:].reshape(b, h, w, c).permute(0, 3, 1, 2)


def image_tokens_grid(x: Float[torch.Tensor, "B N D"]) -> Float[torch.Tensor, "B D H W"]:
    """DALL-E's image tokens back to a grid with einops, the side from the token count."""
    h = int(math.sqrt(x.shape[1]))
    return rearrange(x, "b (h w) d -> b d h w", h=h, w=h)


def image_tokens_grid_bug(x: Float[torch.Tensor, "B N D"]) -> Float[torch.Tensor, "B D H W"]:
    h = int(math.sqrt(x.shape[-1]))  # BUG: the side from the channels
    return rearrange(x, "b (h w) d -> b d h w", h=h, w=h)


SQUARES = [("vit tokens to map", tokens_to_map, tokens_to_map_bug, "TS104"),
           ("dall-e token grid", image_tokens_grid, image_tokens_grid_bug, "TS104")]

STOPS = {"transformer layer causal + padding"}
# correct code that needs a size at least its top-k's k: the one warning each verifies with
ASSUMES = {"moe top-2 routing": "assumes 2 <= E", "top-k sample next": "assumes 5 <= V",
           "top-k accuracy": "assumes 5 <= C",
           "stft gain istft": "assumes 257 <= 256*N",  # reflect padding: N = 1 is refused
           "stft power via view_as_real": "assumes 65 <= 64*N"}
