"""A corpus of realistic PyTorch code for ``tensig.verify``: each item correct, plus one bug.

Written for this project in the style of well-known public implementations (nanoGPT, LLaMA,
ViT, ResNet, diffusion UNets, Whisper, message-passing GNNs, recommenders, torchvision, PPO,
einops-based transformers); nothing is copied.  Every model takes ``bug=True`` to run with one
realistic injected bug, marked ``# BUG`` where it differs.  :data:`CASES` lists them with their
signatures; ``tests/test_verify_torch.py`` runs the corpus and prints the counts.

``silent`` marks bugs that run without an error at the sizes in ``collide`` (often at every
size): the ones a test run does not see.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import einops
import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange

# -- transformers -----------------------------------------------------------------------------


class CausalSelfAttention(nn.Module):
    """nanoGPT-style: one qkv projection, a registered causal mask buffer, fused heads."""

    def __init__(self, n_embd: int = 32, n_head: int = 4, block_size: int = 64,
                 bug: bool = False) -> None:
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head, self.n_embd, self.bug = n_head, n_embd, bug
        mask = torch.tril(torch.ones(block_size, block_size))
        self.register_buffer("bias", mask.view(1, 1, block_size, block_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.bug:
            att = (q @ k) * (1.0 / math.sqrt(k.size(-1)))  # BUG: k not transposed
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class HeadMerge(nn.Module):
    """The output side of multi-head attention: merge heads, project."""

    def __init__(self, n_embd: int = 32, bug: bool = False) -> None:
        super().__init__()
        self.proj, self.bug = nn.Linear(n_embd, n_embd), bug

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        B, H, T, D = y.shape
        if self.bug:  # BUG: heads merged without the transpose
            return self.proj(y.reshape(B, T, H * D))
        return self.proj(y.transpose(1, 2).reshape(B, T, H * D))


class KVCacheAttention(nn.Module):
    """One decoding step with a key/value cache, heads split by view/transpose."""

    def __init__(self, dim: int = 32, n_head: int = 4, bug: bool = False) -> None:
        super().__init__()
        self.wq, self.wk, self.wv = (nn.Linear(dim, dim, bias=False) for _ in range(3))
        self.wo = nn.Linear(dim, dim, bias=False)
        self.n_head, self.head_dim, self.bug = n_head, dim // n_head, bug

    def forward(self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor
                ) -> torch.Tensor:
        bsz, seqlen, _ = x.shape
        q = self.wq(x).view(bsz, seqlen, self.n_head, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(bsz, seqlen, self.n_head, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(bsz, seqlen, self.n_head, self.head_dim).transpose(1, 2)
        keys = torch.cat([k_cache, k], dim=2)
        values = torch.cat([v_cache, k if self.bug else v], dim=1 if self.bug else 2)  # BUG
        scores = torch.matmul(q, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        out = torch.matmul(F.softmax(scores.float(), dim=-1).type_as(q), values)
        out = out.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(out)


class RMSNorm(nn.Module):
    """LLaMA-style RMSNorm."""

    def __init__(self, dim: int = 32, eps: float = 1e-6, bug: bool = False) -> None:
        super().__init__()
        self.eps, self.bug = eps, bug
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ms = x.pow(2).mean(-1) if self.bug else x.pow(2).mean(-1, keepdim=True)  # BUG: keepdim
        return (x.float() * torch.rsqrt(ms + self.eps)).type_as(x) * self.weight


def precompute_rope(head_dim: int, max_len: int, theta: float = 10000.0
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(max_len).float(), freqs)
    return torch.cos(angles), torch.sin(angles)


ROPE_COS, ROPE_SIN = precompute_rope(8, 128)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rotary_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """GPT-NeoX-style rotary embedding of [B, H, T, 8] queries and keys (cached tables), then
    the attention scores."""
    T = q.shape[-2]
    cos = torch.cat([ROPE_COS[:T], ROPE_COS[:T]], dim=-1)[None, None]
    sin = torch.cat([ROPE_SIN[:T], ROPE_SIN[:T]], dim=-1)[None, None]
    q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])


def rotary_scores_bug(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    T = q.shape[-2]
    cos = torch.cat([ROPE_COS[:T], ROPE_COS[:T]], dim=-1)[None, None]
    sin = torch.cat([ROPE_SIN[:T], ROPE_SIN[:T]], dim=-1)[:, None]  # BUG: [T, 1, 8]
    q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
    return q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])


class GroupedQueryAttention(nn.Module):
    """LLaMA-2-style grouped-query attention: fewer key/value heads, repeated to match."""

    def __init__(self, dim: int = 32, n_head: int = 4, n_kv_head: int = 2,
                 bug: bool = False) -> None:
        super().__init__()
        self.n_head, self.n_kv, self.hd, self.bug = n_head, n_kv_head, dim // n_head, bug
        self.wq = nn.Linear(dim, n_head * self.hd, bias=False)
        self.wk = nn.Linear(dim, n_kv_head * self.hd, bias=False)
        self.wv = nn.Linear(dim, n_kv_head * self.hd, bias=False)
        self.wo = nn.Linear(n_head * self.hd, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.n_head, self.hd).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_kv, self.hd).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_kv, self.hd).transpose(1, 2)
        rep = self.n_head // self.n_kv
        k = k.repeat_interleave(rep, dim=1)
        if not self.bug:  # BUG: values left with n_kv heads
            v = v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(B, T, -1))


class SwiGLU(nn.Module):
    """LLaMA feed-forward: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim: int = 32, hidden: int = 88, bug: bool = False) -> None:
        super().__init__()
        self.w1, self.w3 = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.w2, self.bug = nn.Linear(hidden, dim, bias=False), bug

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.bug:
            return self.w2(F.silu(self.w1(x))) * self.w3(x)  # BUG: projected before gating
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class CrossAttention(nn.Module):
    """Decoder-to-encoder attention with the encoder's padding mask over keys."""

    def __init__(self, dim: int = 32, n_head: int = 4, bug: bool = False) -> None:
        super().__init__()
        self.q, self.kv = nn.Linear(dim, dim), nn.Linear(dim, 2 * dim)
        self.o, self.h, self.bug = nn.Linear(dim, dim), n_head, bug

    def forward(self, x: torch.Tensor, memory: torch.Tensor, memory_pad: torch.Tensor
                ) -> torch.Tensor:
        B, T, C = x.shape
        S = memory.shape[1]
        q = self.q(x).view(B, T, self.h, C // self.h).transpose(1, 2)
        k, v = self.kv(memory).view(B, S, 2, self.h, C // self.h).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(C // self.h)
        if self.bug:  # BUG: masks queries, not keys
            scores = scores.masked_fill(memory_pad[:, None, :, None], float("-inf"))
        else:
            scores = scores.masked_fill(memory_pad[:, None, None, :], float("-inf"))
        y = scores.softmax(-1) @ v
        return self.o(y.transpose(1, 2).reshape(B, T, C))


class MHAEncoderLayer(nn.Module):
    """A pre-norm encoder layer around nn.MultiheadAttention with a key padding mask."""

    def __init__(self, dim: int = 32, bug: bool = False) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, 4, batch_first=True)
        self.norm, self.ff = nn.LayerNorm(dim), nn.Sequential(
            nn.Linear(dim, 4 * dim), nn.GELU(), nn.Dropout(0.1), nn.Linear(4 * dim, dim))
        self.bug = bug

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        key_padding_mask = pad.T if self.bug else pad  # BUG: [T, B] where [B, T] is expected
        x = x + self.attn(h, h, h, key_padding_mask=key_padding_mask, need_weights=False)[0]
        return x + self.ff(x)


class TokenPoolHead(nn.Module):
    """Classifier head: mean over tokens, then a linear layer."""

    def __init__(self, dim: int = 32, classes: int = 10, bug: bool = False) -> None:
        super().__init__()
        self.fc, self.bug = nn.Linear(dim, classes), bug

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = x.mean(dim=0) if self.bug else x.mean(dim=1)  # BUG: averages over the batch
        return self.fc(pooled)


# -- vision ------------------------------------------------------------------------------------


class PatchEmbed(nn.Module):
    """ViT patch embedding: strided conv, flatten, class token, learned positions."""

    def __init__(self, img: int = 32, patch: int = 8, dim: int = 48, bug: bool = False) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, dim, patch, stride=patch)
        n = (img // patch) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, n + 1, dim))
        self.bug = bug

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.proj(x).flatten(2)
        if not self.bug:  # BUG: the transpose to [B, N, D] is missing
            x = x.transpose(1, 2)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        return torch.cat((cls, x), dim=1) + self.pos_embed


class BasicBlock(nn.Module):
    """ResNet basic block with batch norm and a projection shortcut when downsampling."""

    def __init__(self, inplanes: int = 16, planes: int = 32, stride: int = 2,
                 bug: bool = False) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=0 if bug else 1, bias=False)  # BUG
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride=stride,
                                                  bias=False), nn.BatchNorm2d(planes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.downsample(x))


class SqueezeExcitation(nn.Module):
    """torchvision-style squeeze-and-excitation with linear layers on pooled channels."""

    def __init__(self, channels: int = 32, squeeze: int = 8, bug: bool = False) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(channels, squeeze), nn.Linear(squeeze, channels)
        self.bug = bug

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = F.adaptive_avg_pool2d(x, 1).flatten(1)
        scale = torch.sigmoid(self.fc2(F.relu(self.fc1(scale))))
        if self.bug:
            return x * scale  # BUG: [B, C] against [B, C, H, W]
        return x * scale[:, :, None, None]


def timestep_embedding(t: torch.Tensor, dim: int = 32, max_period: int = 10000) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class TimestepResBlock(nn.Module):
    """Diffusion UNet residual block: group norm, conv, the timestep embedding added per channel."""

    def __init__(self, channels: int = 32, temb: int = 32, bug: bool = False) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.GroupNorm(8, channels), nn.GroupNorm(8, channels)
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.temb_proj = nn.Sequential(nn.SiLU(), nn.Linear(temb, channels))
        self.bug = bug

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        emb = self.temb_proj(timestep_embedding(t))
        h = h + (emb if self.bug else emb[:, :, None, None])  # BUG: [B, C] on [B, C, H, W]
        h = self.conv2(F.dropout(F.silu(self.norm2(h)), 0.1, self.training))
        return x + h


class AudioFrontEnd(nn.Module):
    """Whisper-style encoder stem: two convolutions (the second strided), learned positions."""

    def __init__(self, n_mels: int = 16, dim: int = 32, n_ctx: int = 1500,
                 bug: bool = False) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(n_mels, dim, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(dim, dim, kernel_size=3, stride=2, padding=1)
        self.register_buffer("positional_embedding", torch.zeros(n_ctx, dim))
        self.bug = bug

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        x = F.gelu(self.conv1(mel))
        x = F.gelu(self.conv2(x))
        x = x.permute(0, 2, 1)
        n = mel.shape[-1] if self.bug else x.shape[1]  # BUG: length before the strided conv
        return x + self.positional_embedding[:n]


class SeqConvEncoder(nn.Module):
    """Temporal convolution over [B, T, C] features (conv wants channels first) and an LSTM."""

    def __init__(self, dim: int = 16, hidden: int = 32, bug: bool = False) -> None:
        super().__init__()
        self.conv = nn.Conv1d(dim, dim, 5, padding=2)
        self.lstm = nn.LSTM(dim, hidden, batch_first=True)
        self.bug = bug

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv(x if self.bug else x.transpose(1, 2))  # BUG: channels-last into conv1d
        out, _ = self.lstm(F.relu(h).transpose(1, 2))
        return out


# -- graphs, recommenders, detection, RL ------------------------------------------------------


class MessagePassing(nn.Module):
    """A GCN-style layer: messages along edges, mean aggregation with index_add, a root term."""

    def __init__(self, in_dim: int = 16, out_dim: int = 32, bug: bool = False) -> None:
        super().__init__()
        self.msg, self.root, self.bug = nn.Linear(in_dim, out_dim), nn.Linear(in_dim, out_dim), bug

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        src, dst = edge_index[0], edge_index[1]
        messages = self.msg(x)[src]
        if self.bug:
            agg = torch.zeros_like(messages).index_add_(0, dst, messages)  # BUG: [E, H] rows
        else:
            agg = torch.zeros(x.size(0), messages.size(1)).index_add_(0, dst, messages)
        deg = torch.zeros(x.size(0)).index_add_(0, dst, torch.ones(dst.size(0)))
        return agg / deg.clamp(min=1).unsqueeze(-1) + self.root(x)


class ScatterPool(nn.Module):
    """Sum node features per graph with scatter_add (a batch vector assigns nodes to graphs)."""

    def __init__(self, dim: int = 16, graphs: int = 4, bug: bool = False) -> None:
        super().__init__()
        self.graphs, self.bug, self.out = graphs, bug, nn.Linear(dim, 1)

    def forward(self, x: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        index = batch.unsqueeze(-1).expand(-1, x.size(1))
        pooled = torch.zeros(self.graphs, x.size(1)).scatter_add_(0, index, x)
        return self.out(pooled) if self.bug else self.out(pooled).squeeze(-1)  # BUG: [G, 1]


class TwoTower(nn.Module):
    """Recommender: an EmbeddingBag over each user's history, an item tower, a dot score."""

    def __init__(self, n_items: int = 1000, dim: int = 16, bug: bool = False) -> None:
        super().__init__()
        self.history = nn.EmbeddingBag(n_items, dim, mode="mean")
        self.items = nn.Embedding(n_items, dim)
        self.bug = bug

    def forward(self, history: torch.Tensor, item: torch.Tensor) -> torch.Tensor:
        u, i = self.history(history), self.items(item)
        if self.bug:
            return torch.sigmoid(u @ i.T)  # BUG: every user against every item
        return torch.sigmoid((u * i).sum(-1))


def box_area(boxes: torch.Tensor) -> torch.Tensor:
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def box_iou(boxes1: torch.Tensor, boxes2: torch.Tensor) -> torch.Tensor:
    """torchvision-style pairwise IoU of [N, 4] and [M, 4] boxes."""
    area1, area2 = box_area(boxes1), box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    return inter / (area1[:, None] + area2 - inter)


def box_iou_bug(boxes1: torch.Tensor, boxes2: torch.Tensor) -> torch.Tensor:
    area1, area2 = box_area(boxes1), box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    return inter / (area1 + area2 - inter)  # BUG: area1 not expanded to [N, 1]


def gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor,
        last_value: torch.Tensor, gamma: float = 0.99, lam: float = 0.95) -> torch.Tensor:
    """PPO's returns from the generalized advantage estimate over [T, N] rollouts (the critic
    gives [T, N, 1]); advantages are assigned into a preallocated tensor step by step."""
    values = values.squeeze(-1)
    next_values = torch.cat([values[1:], last_value.squeeze(-1)[None]], dim=0)
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        delta = rewards[t] + gamma * next_values[t] * (1 - dones[t]) - values[t]
        running = delta + gamma * lam * (1 - dones[t]) * running
        advantages[t] = running
    return advantages + values


def gae_bug(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor,
            last_value: torch.Tensor, gamma: float = 0.99, lam: float = 0.95) -> torch.Tensor:
    next_values = torch.cat([values[1:], last_value[None]], dim=0)  # BUG: critic's [.., 1] kept
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        delta = rewards[t] + gamma * next_values[t] * (1 - dones[t]) - values[t]
        running = delta + gamma * lam * (1 - dones[t]) * running
        advantages[t] = running
    return advantages + values.squeeze(-1)


def value_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Critic regression: [N, 1] head output against [N] returns."""
    return F.mse_loss(pred.squeeze(-1), target)


def value_loss_bug(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(pred, target)  # BUG: [N, 1] against [N] broadcasts to [N, N]


# -- einops ------------------------------------------------------------------------------------


class EinopsPatchEmbed(nn.Module):
    """ViT patches with einops (vit-pytorch style), then a linear projection."""

    def __init__(self, patch: int = 4, channels: int = 3, dim: int = 32, bug: bool = False
                 ) -> None:
        super().__init__()
        self.p, self.bug = patch, bug
        self.norm = nn.LayerNorm(patch * patch * channels)
        self.proj = nn.Linear(patch * patch * channels, dim)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        pattern = "b c (h p1) (w p2) -> b (p1 p2 c) (h w)" if self.bug else \
            "b c (h p1) (w p2) -> b (h w) (p1 p2 c)"  # BUG: tokens and features swapped
        return self.proj(self.norm(rearrange(img, pattern, p1=self.p, p2=self.p)))


class EinopsAttention(nn.Module):
    """Attention written with einops.rearrange and einops.einsum."""

    def __init__(self, dim: int = 32, heads: int = 4, bug: bool = False) -> None:
        super().__init__()
        self.heads, self.scale, self.bug = heads, (dim // heads) ** -0.5, bug
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in (q, k, v))
        dots = einops.einsum(q, k, "b h i d, b h j d -> b h i j") * self.scale
        out = einops.einsum(dots.softmax(dim=-1), v, "b h i j, b h j d -> b h i d")
        merge = "b h n d -> b h (n d)" if self.bug else "b h n d -> b n (h d)"  # BUG: heads kept
        return self.to_out(rearrange(out, merge))


# -- the cases ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One corpus item: the correct code, the buggy code, their shared signature."""

    name: str
    good: Any
    bad: Any
    signature: str
    kinds: str | None = None  # dtype kinds of the arguments: "f" float, "i" int, "b" bool
    silent: bool = False  # the bug runs without an error at the sizes in ``collide``
    collide: dict[str, int] = field(default_factory=dict)
    needs: str | None = None  # a check another part of verify adds (caught once it lands)


def _pair(cls: type, **kw: Any) -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    good = cls(**kw).eval()
    torch.manual_seed(0)
    return good, cls(bug=True, **kw).eval()


CASES: list[Case] = [
    Case("nanogpt_attention", *_pair(CausalSelfAttention), "B, T, 32 => B, T, 32",
         silent=True, collide={"T": 8}),
    Case("head_merge", *_pair(HeadMerge), "B, 4, T, 8 => B, T, 32", silent=True,
         needs="reshape-reorder lint (issue 13, section 5)"),
    Case("kv_cache_step", *_pair(KVCacheAttention),
         "B, T, 32; B, 4, S, 8; B, 4, S, 8 => B, T, 32"),
    Case("rmsnorm", *_pair(RMSNorm), "B, T, 32 => B, T, 32", silent=True,
         collide={"B": 32, "T": 32}),
    Case("rotary", rotary_scores, rotary_scores_bug, "B, 4, T, 8; B, 4, T, 8 => B, 4, T, T",
         silent=True, collide={"B": 1, "T": 4}),
    Case("grouped_query_attention", *_pair(GroupedQueryAttention), "B, T, 32 => B, T, 32"),
    Case("swiglu", *_pair(SwiGLU), "B, T, 32 => B, T, 32"),
    Case("cross_attention_mask", *_pair(CrossAttention), "B, T, 32; B, S, 32; B, S => B, T, 32",
         kinds="ffb", silent=True, collide={"S": 5, "T": 5}),
    Case("mha_encoder_layer", *_pair(MHAEncoderLayer), "B, T, 32; B, T => B, T, 32",
         kinds="fb", silent=True, collide={"B": 5, "T": 5}),
    Case("token_pool_head", *_pair(TokenPoolHead), "B, T, 32 => B, 10", silent=True),
    Case("vit_patch_embed", *_pair(PatchEmbed), "B, 3, 32, 32 => B, 17, 48"),
    Case("resnet_basic_block", *_pair(BasicBlock), "B, 16, H, W => B, 32, H2, W2"),
    Case("squeeze_excitation", *_pair(SqueezeExcitation), "B, 32, H, W => B, 32, H, W",
         silent=True, collide={"B": 4, "H": 4, "W": 32}),
    Case("diffusion_timestep_block", *_pair(TimestepResBlock), "B, 32, H, W; B => B, 32, H, W",
         silent=True, collide={"B": 4, "H": 4, "W": 32}),
    Case("whisper_front_end", *_pair(AudioFrontEnd), "B, 16, T => B, T2, 32"),
    Case("conv_lstm_encoder", *_pair(SeqConvEncoder), "B, T, 16 => B, T, 32", silent=True,
         collide={"T": 16}),
    Case("gnn_message_passing", *_pair(MessagePassing), "N, 16; 2, E => N, 32", kinds="fi",
         silent=True, collide={"N": 5, "E": 5}),
    Case("gnn_scatter_pool", *_pair(ScatterPool), "N, 16; N => 4", kinds="fi", silent=True),
    Case("recommender_two_tower", *_pair(TwoTower), "B, L; B => B", kinds="ii", silent=True),
    Case("box_iou", box_iou, box_iou_bug, "N, 4; M, 4 => N, M", silent=True,
         collide={"N": 5, "M": 5}),
    Case("ppo_gae", gae, gae_bug, "T, N; T, N, 1; T, N; N, 1 => T, N"),
    Case("value_loss", value_loss, value_loss_bug, "N, 1; N =>", silent=True),
    Case("einops_patch_embed", *_pair(EinopsPatchEmbed), "B, 3, H, W => B, P, 32"),
    Case("einops_attention", *_pair(EinopsAttention), "B, N, 32 => B, N, 32", silent=True,
         collide={"N": 4}),
]


def signature(case: Case) -> Any:
    """The case's signature, with its argument dtype kinds when it declares them."""
    import dataclasses

    from tensig.check.verify import Signature

    sig = Signature.parse(case.signature)
    return dataclasses.replace(sig, kinds=tuple(case.kinds)) if case.kinds else sig
