"""einops-heavy PyTorch code for ``tensig.verify``, in pairs: a correct function or module and
the same with one planted bug (``# BUG``), written the way lucidrains-style public code writes
it (vision transformers, diffusion U-Nets, perceivers, linear and axial attention, local and
window attention, token learners, conformers); nothing is copied.

:data:`CASES` lists ``Case(name, correct, buggy, expected finding code, sizes)``;
``tests/test_verify_realcode_einops.py`` asserts each correct one verifies with no finding or
note and returns its declared shape on real tensors, and each buggy one reports its code.
``sizes``, where given, are the concrete sizes the correct one runs at (otherwise small
distinct ones).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import einops
import torch
import torch.nn.functional as F
from einops import pack, parse_shape, rearrange, reduce, repeat, unpack
from einops.layers.torch import EinMix, Rearrange, Reduce
from torch import Tensor, einsum, nn

from tensig import Bool, Float, Int

# -- vision transformers -------------------------------------------------------------------------


class PatchEmbed(nn.Module):
    """vit-pytorch's to_patch_embedding: Rearrange into patches, LayerNorm, Linear, LayerNorm."""

    def __init__(self, patch: int = 4, channels: int = 3, dim: int = 32) -> None:
        super().__init__()
        patch_dim = channels * patch * patch
        self.to_patch_embedding = nn.Sequential(
            Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=patch, p2=patch),
            nn.LayerNorm(patch_dim),
            nn.Linear(patch_dim, dim),
            nn.LayerNorm(dim),
        )

    def forward(self, img: Float[Tensor, "B 3 4*H 4*W"]) -> Float[Tensor, "B H*W 32"]:
        return self.to_patch_embedding(img)


class PatchEmbedBug(PatchEmbed):
    def __init__(self, patch: int = 4, channels: int = 3, dim: int = 32) -> None:
        super().__init__(patch, channels, dim)
        patch_dim = channels * patch * patch
        self.to_patch_embedding = nn.Sequential(
            Rearrange("b c (h p1) (w p2) -> b (p1 p2 c) (h w)", p1=patch, p2=patch),  # BUG
            nn.LayerNorm(patch_dim),
            nn.Linear(patch_dim, dim),
            nn.LayerNorm(dim),
        )


class ViTClassifier(nn.Module):
    """A cls token repeated over the batch, learned positions, a pool and the head."""

    def __init__(self, dim: int = 32, num_patches: int = 16, classes: int = 10,
                 pool: str = "cls") -> None:
        super().__init__()
        self.patch = PatchEmbed(dim=dim)
        self.pos_embedding = nn.Parameter(torch.randn(1, num_patches + 1, dim))
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.pool = pool
        self.mlp_head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, classes))

    def embed(self, img: Tensor) -> Tensor:
        x = self.patch(img)
        b, n, _ = x.shape
        cls_tokens = repeat(self.cls_token, "() n d -> b n d", b=b)
        x = torch.cat((cls_tokens, x), dim=1)
        return x + self.pos_embedding[:, :(n + 1)]

    def forward(self, img: Float[Tensor, "B 3 16 16"]) -> Float[Tensor, "B 10"]:
        x = self.embed(img)
        x = x.mean(dim=1) if self.pool == "mean" else x[:, 0]
        return self.mlp_head(x)


class ViTClassifierBug(ViTClassifier):
    def forward(self, img: Float[Tensor, "B 3 16 16"]) -> Float[Tensor, "B 10"]:
        x = self.embed(img)
        x = x.mean(dim=1) if self.pool == "mean" else x[:, :1]  # BUG: [B, 1, D], the token kept
        return self.mlp_head(x)


def posemb_sincos_2d(patches: Float[Tensor, "B H W 4*K"], temperature: int = 10000
                     ) -> Float[Tensor, "H*W 4*K"]:
    """simple_vit's fixed 2d positions: a quarter of the features for each of sin/cos x/y."""
    _, h, w, dim = patches.shape
    y, x = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    omega = torch.arange(dim // 4) / (dim // 4 - 1)
    omega = 1.0 / (temperature ** omega)
    y = y.flatten()[:, None] * omega[None, :]
    x = x.flatten()[:, None] * omega[None, :]
    return torch.cat((x.sin(), x.cos(), y.sin(), y.cos()), dim=1)


def posemb_sincos_2d_bug(patches: Float[Tensor, "B H W 4*K"], temperature: int = 10000
                         ) -> Float[Tensor, "H*W 4*K"]:
    _, h, w, dim = patches.shape
    y, x = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
    omega = torch.arange(dim // 4) / (dim // 4 - 1)
    omega = 1.0 / (temperature ** omega)
    y = y.flatten()[:, None] * omega[:, None]  # BUG: positions against frequencies
    x = x.flatten()[:, None] * omega[None, :]
    return torch.cat((x.sin(), x.cos(), y.sin(), y.cos()), dim=1)


class Attention(nn.Module):
    """vit-pytorch's attention: one qkv projection, heads split and merged with rearrange."""

    def __init__(self, dim: int = 32, heads: int = 4, dim_head: int = 8) -> None:
        super().__init__()
        inner = heads * dim_head
        self.heads, self.scale = heads, dim_head ** -0.5
        self.norm = nn.LayerNorm(dim)
        self.to_qkv = nn.Linear(dim, inner * 3, bias=False)
        self.to_out = nn.Linear(inner, dim)

    def scores(self, q: Tensor, k: Tensor) -> Tensor:
        return torch.matmul(q, k.transpose(-1, -2)) * self.scale

    def forward(self, x: Float[Tensor, "B N 32"]) -> Float[Tensor, "B N 32"]:
        qkv = self.to_qkv(self.norm(x)).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=self.heads), qkv)
        attn = self.scores(q, k).softmax(dim=-1)
        out = torch.matmul(attn, v)
        return self.to_out(rearrange(out, "b h n d -> b n (h d)"))


class AttentionBug(Attention):
    def scores(self, q: Tensor, k: Tensor) -> Tensor:
        return torch.matmul(q, k) * self.scale  # BUG: keys not transposed


class RegisterTokens(nn.Module):
    """Vision transformers need registers: learned tokens packed beside the patches with
    einops.pack, the patches taken back out with unpack."""

    def __init__(self, dim: int = 32, registers: int = 4) -> None:
        super().__init__()
        self.register_tokens = nn.Parameter(torch.randn(registers, dim))
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim))

    def forward(self, x: Float[Tensor, "B N 32"]) -> Float[Tensor, "B N 32"]:
        r = repeat(self.register_tokens, "n d -> b n d", b=x.shape[0])
        x, ps = pack([x, r], "b * d")
        x = self.net(x)
        x, _ = unpack(x, ps, "b * d")
        return x


class RegisterTokensBug(RegisterTokens):
    def forward(self, x: Float[Tensor, "B N 32"]) -> Float[Tensor, "B N 32"]:
        r = repeat(self.register_tokens, "n d -> b n d", b=x.shape[0])
        x, ps = pack([x, r], "b * d")
        x = self.net(x)
        _, x = unpack(x, ps, "b * d")  # BUG: the registers returned, not the patches
        return x


def pack_cls(x: Float[Tensor, "B N D"], cls: Float[Tensor, "D"]) -> Float[Tensor, "B D"]:
    """A cls token packed in front, then unpacked: pack's ``b d`` part is one token."""
    cls_tokens = repeat(cls, "d -> b d", b=x.shape[0])
    x, ps = pack([cls_tokens, x], "b * d")
    x = x.softmax(dim=-1)
    cls_tokens, _ = unpack(x, ps, "b * d")
    return cls_tokens


def pack_cls_bug(x: Float[Tensor, "B N D"], cls: Float[Tensor, "D"]) -> Float[Tensor, "B D"]:
    cls_tokens = repeat(cls, "d -> b d", b=x.shape[0])
    x, ps = pack([cls_tokens, x], "b n *")  # BUG: packs along the features
    x = x.softmax(dim=-1)
    cls_tokens, _ = unpack(x, ps, "b n *")
    return cls_tokens


class MeanPoolHead(nn.Module):
    """A Reduce layer as the pool of a classifier head."""

    def __init__(self, dim: int = 32, classes: int = 10) -> None:
        super().__init__()
        self.head = nn.Sequential(Reduce("b n d -> b d", "mean"), nn.LayerNorm(dim),
                                  nn.Linear(dim, classes))

    def forward(self, x: Float[Tensor, "B N 32"]) -> Float[Tensor, "B 10"]:
        return self.head(x)


class MeanPoolHeadBug(MeanPoolHead):
    def __init__(self, dim: int = 32, classes: int = 10) -> None:
        super().__init__(dim, classes)
        self.head = nn.Sequential(Reduce("b n d -> b n", "mean"), nn.LayerNorm(dim),  # BUG
                                  nn.Linear(dim, classes))


class MlpMixer(nn.Module):
    """mlp-mixer: token mixing as a 1x1 Conv1d over the patches, channel mixing as Linear."""

    def __init__(self, dim: int = 32, patches: int = 16, expansion: int = 2,
                 token_dim: int | None = None) -> None:
        super().__init__()
        token_dim = patches if token_dim is None else token_dim
        self.embed = PatchEmbed(dim=dim)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.token_mix = nn.Sequential(nn.Conv1d(token_dim, token_dim * expansion, 1), nn.GELU(),
                                       nn.Conv1d(token_dim * expansion, token_dim, 1))
        self.channel_mix = nn.Sequential(nn.Linear(dim, dim * expansion), nn.GELU(),
                                         nn.Linear(dim * expansion, dim))
        self.head = nn.Sequential(nn.LayerNorm(dim), Reduce("b n c -> b c", "mean"),
                                  nn.Linear(dim, 10))

    def forward(self, img: Float[Tensor, "B 3 16 16"]) -> Float[Tensor, "B 10"]:
        x = self.embed(img)
        x = x + self.token_mix(self.norm1(x))
        x = x + self.channel_mix(self.norm2(x))
        return self.head(x)


class MlpMixerBug(MlpMixer):
    def __init__(self) -> None:
        super().__init__(token_dim=32)  # BUG: token mixing built over the features


class TokenLearner(nn.Module):
    """vit-pytorch's TokenLearner: pack to a batch, grouped convolutions give one attention map
    per output token, a weighted mean pools each, unpack restores the leading axes."""

    def __init__(self, dim: int = 16, ff_mult: int = 2, num_output_tokens: int = 4) -> None:
        super().__init__()
        inner = dim * ff_mult * num_output_tokens
        self.num_output_tokens = num_output_tokens
        self.net = nn.Sequential(
            nn.Conv2d(dim * num_output_tokens, inner, 1, groups=num_output_tokens), nn.GELU(),
            nn.Conv2d(inner, num_output_tokens, 1, groups=num_output_tokens))

    def attention(self, x: Tensor) -> Tensor:
        return rearrange(self.net(x), "b g h w -> b 1 g h w")

    def forward(self, x: Float[Tensor, "B 16 H W"]) -> Float[Tensor, "B 16 4"]:
        x, ps = pack([x], "* c h w")
        x = repeat(x, "b c h w -> b (g c) h w", g=self.num_output_tokens)
        attn = self.attention(x)
        x = rearrange(x, "b (g c) h w -> b c g h w", g=self.num_output_tokens)
        x = reduce(x * attn, "b c g h w -> b c g", "mean")
        [x] = unpack(x, ps, "* c n")
        return x


class TokenLearnerBug(TokenLearner):
    def attention(self, x: Tensor) -> Tensor:
        return rearrange(self.net(x), "b g h w -> b g 1 h w")  # BUG: maps meet the channels


# -- diffusion U-Nets ------------------------------------------------------------------------


class SinusoidalPosEmb(nn.Module):
    """denoising-diffusion's timestep embedding."""

    def __init__(self, dim: int = 32, theta: int = 10000) -> None:
        super().__init__()
        self.dim, self.theta = dim, theta

    def freqs(self, x: Tensor, emb: Tensor) -> Tensor:
        return x[:, None] * emb[None, :]

    def forward(self, x: Float[Tensor, "B"]) -> Float[Tensor, "B 32"]:
        half_dim = self.dim // 2
        emb = math.log(self.theta) / (half_dim - 1)
        emb = torch.exp(torch.arange(half_dim) * -emb)
        emb = self.freqs(x, emb)
        return torch.cat((emb.sin(), emb.cos()), dim=-1)


class SinusoidalPosEmbBug(SinusoidalPosEmb):
    def freqs(self, x: Tensor, emb: Tensor) -> Tensor:
        return x * emb  # BUG: [B] against [16]


class RandomFourierPosEmb(nn.Module):
    """Learned or random sinusoidal embedding: the time itself concatenated in front."""

    def __init__(self, dim: int = 32, is_random: bool = False) -> None:
        super().__init__()
        self.weights = nn.Parameter(torch.randn(dim // 2), requires_grad=not is_random)

    def column(self, x: Tensor) -> Tensor:
        return rearrange(x, "b -> b 1")

    def forward(self, x: Float[Tensor, "B"]) -> Float[Tensor, "B 33"]:
        x = self.column(x)
        freqs = x * rearrange(self.weights, "d -> 1 d") * 2 * math.pi
        fouriered = torch.cat((freqs.sin(), freqs.cos()), dim=-1)
        return torch.cat((x, fouriered), dim=-1)


class RandomFourierPosEmbBug(RandomFourierPosEmb):
    def column(self, x: Tensor) -> Tensor:
        return x  # BUG: the time not made a column


class ResnetBlock(nn.Module):
    """A U-Net block whose time embedding becomes a per-channel scale and shift."""

    def __init__(self, dim: int = 16, time_dim: int = 32) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.SiLU(), nn.Linear(time_dim, dim * 2))
        self.proj = nn.Conv2d(dim, dim, 3, padding=1)
        self.norm = nn.GroupNorm(4, dim)
        self.res_conv = nn.Conv2d(dim, dim, 1)

    def to_map(self, t: Tensor) -> Tensor:
        return rearrange(t, "b c -> b c 1 1")

    def forward(self, x: Float[Tensor, "B 16 H W"], time_emb: Float[Tensor, "B 32"]
                ) -> Float[Tensor, "B 16 H W"]:
        scale, shift = self.to_map(self.mlp(time_emb)).chunk(2, dim=1)
        h = self.norm(self.proj(x))
        h = F.silu(h * (scale + 1) + shift)
        return h + self.res_conv(x)


class ResnetBlockBug(ResnetBlock):
    def to_map(self, t: Tensor) -> Tensor:
        return rearrange(t, "b c -> b c 1")  # BUG: one spatial axis short


class Downsample(nn.Module):
    """The U-Net's downsample without strided convs: space to depth, then a 1x1 conv."""

    def __init__(self, dim: int = 8, dim_out: int = 16, factor: int = 4) -> None:
        super().__init__()
        self.net = nn.Sequential(Rearrange("b c (h p1) (w p2) -> b (c p1 p2) h w", p1=2, p2=2),
                                 nn.Conv2d(dim * factor, dim_out, 1))

    def forward(self, x: Float[Tensor, "B 8 2*H 2*W"]) -> Float[Tensor, "B 16 H W"]:
        return self.net(x)


class DownsampleBug(Downsample):
    def __init__(self) -> None:
        super().__init__(factor=2)  # BUG: four pixels per channel, not two


def upsample_nearest(x: Float[Tensor, "B C H W"]) -> Float[Tensor, "B C 2*H 2*W"]:
    """Nearest upsampling written as an einops repeat."""
    return repeat(x, "b c h w -> b c (h 2) (w 2)")


def upsample_nearest_bug(x: Float[Tensor, "B C H W"]) -> Float[Tensor, "B C 2*H 2*W"]:
    return repeat(x, "b c h w -> b c (2 h) w")  # BUG: only the rows doubled


class LinearAttention2d(nn.Module):
    """denoising-diffusion's linear attention over a feature map: softmax over features for
    queries and positions for keys, a [d, e] context per head."""

    def __init__(self, dim: int = 16, heads: int = 4, dim_head: int = 8) -> None:
        super().__init__()
        hidden = heads * dim_head
        self.heads, self.scale = heads, dim_head ** -0.5
        self.to_qkv = nn.Conv2d(dim, hidden * 3, 1, bias=False)
        self.to_out = nn.Sequential(nn.Conv2d(hidden, dim, 1), nn.GroupNorm(1, dim))

    def merge(self, out: Tensor, h: int, w: int) -> Tensor:
        return rearrange(out, "b h c (x y) -> b (h c) x y", h=self.heads, x=h, y=w)

    def forward(self, x: Float[Tensor, "B 16 H W"]) -> Float[Tensor, "B 16 H W"]:
        _, _, h, w = x.shape
        qkv = self.to_qkv(x).chunk(3, dim=1)
        q, k, v = map(lambda t: rearrange(t, "b (h c) x y -> b h c (x y)", h=self.heads), qkv)
        q = q.softmax(dim=-2) * self.scale
        k = k.softmax(dim=-1)
        context = torch.einsum("b h d n, b h e n -> b h d e", k, v)
        out = torch.einsum("b h d e, b h d n -> b h e n", context, q)
        return self.to_out(self.merge(out, h, w))


class LinearAttention2dBug(LinearAttention2d):
    def merge(self, out: Tensor, h: int, w: int) -> Tensor:
        return rearrange(out, "b h c (x y) -> b (h c) x y", h=self.heads, x=w, y=h)  # BUG


class Attention2d(nn.Module):
    """denoising-diffusion's full attention over a feature map."""

    def __init__(self, dim: int = 16, heads: int = 4, dim_head: int = 8) -> None:
        super().__init__()
        hidden = heads * dim_head
        self.heads, self.scale = heads, dim_head ** -0.5
        self.to_qkv = nn.Conv2d(dim, hidden * 3, 1, bias=False)
        self.to_out = nn.Conv2d(hidden, dim, 1)

    def attend(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        sim = einsum("b h d i, b h d j -> b h i j", q * self.scale, k)
        return einsum("b h i j, b h d j -> b h i d", sim.softmax(dim=-1), v)

    def forward(self, x: Float[Tensor, "B 16 H W"]) -> Float[Tensor, "B 16 H W"]:
        _, _, h, w = x.shape
        qkv = self.to_qkv(x).chunk(3, dim=1)
        q, k, v = map(lambda t: rearrange(t, "b (h c) x y -> b h c (x y)", h=self.heads), qkv)
        out = self.attend(q, k, v)
        out = rearrange(out, "b h (x y) d -> b (h d) x y", x=h, y=w)
        return self.to_out(out)


class Attention2dBug(Attention2d):
    def attend(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        sim = einsum("b h d i, b h d j -> b h i j", q * self.scale, k)
        return einsum("b h i j, b h d j -> b h d i", sim.softmax(dim=-1), v)  # BUG: [.., d, i]


# -- attention variants ------------------------------------------------------------------------


def linear_attention(q: Float[Tensor, "B H N D"], k: Float[Tensor, "B H N D"],
                     v: Float[Tensor, "B H N E"]) -> Float[Tensor, "B H N E"]:
    """linear-attention-transformer's global linear attention (Shen et al.)."""
    q = q.softmax(dim=-1) * q.shape[-1] ** -0.5
    k = k.softmax(dim=-2)
    context = einsum("bhnd,bhne->bhde", k, v)
    return einsum("bhnd,bhde->bhne", q, context)


def linear_attention_bug(q: Float[Tensor, "B H N D"], k: Float[Tensor, "B H N D"],
                         v: Float[Tensor, "B H N E"]) -> Float[Tensor, "B H N E"]:
    q = q.softmax(dim=-1) * q.shape[-1] ** -0.5
    k = k.softmax(dim=-2)
    context = einsum("bhnd,bhne->bhde", k, v)
    return einsum("bhnd,bhde->bhnd", q, context)  # BUG: the value features summed away


def softmax_kernel(data: Float[Tensor, "B H N D"], projection: Float[Tensor, "M D"],
                   is_query: bool = True, eps: float = 1e-4) -> Float[Tensor, "B H N M"]:
    """performer's FAVOR+ positive random features (ellipsis einsum over the batch axes)."""
    normalizer = data.shape[-1] ** -0.25
    ratio = projection.shape[0] ** -0.5
    data_dash = torch.einsum("...id,...jd->...ij", normalizer * data, projection)
    diag = ((data ** 2).sum(dim=-1) / 2.0 * normalizer ** 2).unsqueeze(dim=-1)
    if is_query:
        stab = torch.amax(data_dash, dim=-1, keepdim=True).detach()
    else:
        stab = torch.amax(data_dash, dim=(-1, -2), keepdim=True).detach()
    return ratio * (torch.exp(data_dash - diag - stab) + eps)


def softmax_kernel_bug(data: Float[Tensor, "B H N D"], projection: Float[Tensor, "M D"],
                       is_query: bool = True, eps: float = 1e-4) -> Float[Tensor, "B H N M"]:
    normalizer = data.shape[-1] ** -0.25
    ratio = projection.shape[0] ** -0.5
    data_dash = torch.einsum("...id,...dj->...ij", normalizer * data, projection)  # BUG
    diag = ((data ** 2).sum(dim=-1) / 2.0 * normalizer ** 2).unsqueeze(dim=-1)
    if is_query:
        stab = torch.amax(data_dash, dim=-1, keepdim=True).detach()
    else:
        stab = torch.amax(data_dash, dim=(-1, -2), keepdim=True).detach()
    return ratio * (torch.exp(data_dash - diag - stab) + eps)


def favor_attention(q: Float[Tensor, "B H N M"], k: Float[Tensor, "B H N M"],
                    v: Float[Tensor, "B H N E"]) -> Float[Tensor, "B H N E"]:
    """performer's linear attention on the random features, with its normaliser."""
    k_cumsum = k.sum(dim=-2)
    d_inv = 1.0 / torch.einsum("...nd,...d->...n", q, k_cumsum.type_as(q))
    context = torch.einsum("...nd,...ne->...de", k, v)
    return torch.einsum("...de,...nd,...n->...ne", context, q, d_inv)


def favor_attention_bug(q: Float[Tensor, "B H N M"], k: Float[Tensor, "B H N M"],
                        v: Float[Tensor, "B H N E"]) -> Float[Tensor, "B H N E"]:
    k_cumsum = k.sum(dim=-1)  # BUG: summed over the features, not the positions
    d_inv = 1.0 / torch.einsum("...nd,...d->...n", q, k_cumsum.type_as(q))
    context = torch.einsum("...nd,...ne->...de", k, v)
    return torch.einsum("...de,...nd,...n->...ne", context, q, d_inv)


def axial_attention(x: Float[Tensor, "B C H W"]) -> Float[Tensor, "B C H W"]:
    """axial-attention: attention along the height, each column its own batch row."""
    b = x.shape[0]
    t = rearrange(x, "b c h w -> (b w) h c")
    attn = torch.einsum("n i c, n j c -> n i j", t, t).softmax(dim=-1)
    out = torch.einsum("n i j, n j c -> n i c", attn, t)
    return rearrange(out, "(b w) h c -> b c h w", b=b)


def axial_attention_bug(x: Float[Tensor, "B C H W"]) -> Float[Tensor, "B C H W"]:
    b = x.shape[0]
    t = rearrange(x, "b c h w -> (b h) w c")
    attn = torch.einsum("n i c, n j c -> n i j", t, t).softmax(dim=-1)
    out = torch.einsum("n i j, n j c -> n i c", attn, t)
    return rearrange(out, "(b w) h c -> b c h w", b=b)  # BUG: folded over h, unfolded over w


def token_shift(x: Float[Tensor, "B N 2*D"]) -> Float[Tensor, "B N 2*D"]:
    """Token shifting: half the features moved one position along the sequence."""
    x, x_shift = x.chunk(2, dim=-1)
    x_shift = F.pad(x_shift, (0, 0, 1, -1), value=0.0)
    return torch.cat((x, x_shift), dim=-1)


def token_shift_bug(x: Float[Tensor, "B N 2*D"]) -> Float[Tensor, "B N 2*D"]:
    x, x_shift = x.chunk(2, dim=-1)
    x_shift = F.pad(x_shift, (0, 0, 1, 0), value=0.0)  # BUG: grows by one, nothing cut
    return torch.cat((x, x_shift), dim=-1)


def causal_mask_sim(sim: Float[Tensor, "B H I J"]) -> Float[Tensor, "B H I J"]:
    """x-transformers' causal mask for queries that end the key sequence."""
    i, j = sim.shape[-2:]
    causal_mask = torch.ones((i, j), dtype=torch.bool).triu(j - i + 1)
    return sim.masked_fill(causal_mask, -torch.finfo(sim.dtype).max).softmax(dim=-1)


def causal_mask_sim_bug(sim: Float[Tensor, "B H I J"]) -> Float[Tensor, "B H I J"]:
    i, j = sim.shape[-2:]
    causal_mask = torch.ones((j, i), dtype=torch.bool).triu(j - i + 1)  # BUG: [J, I]
    return sim.masked_fill(causal_mask, -torch.finfo(sim.dtype).max).softmax(dim=-1)


def alibi_bias(sim: Float[Tensor, "B 8 I J"]) -> Float[Tensor, "B 8 I J"]:
    """x-transformers' ALiBi: slopes per head times the query-key distance."""
    h, i, j = sim.shape[-3:]
    slopes = torch.tensor([2 ** (-8 * (n + 1) / h) for n in range(h)])
    i_arange = torch.arange(j - i, j)
    j_arange = torch.arange(j)
    bias = -torch.abs(rearrange(j_arange, "j -> 1 1 j") - rearrange(i_arange, "i -> 1 i 1"))
    return sim + bias * rearrange(slopes, "h -> h 1 1")


def alibi_bias_bug(sim: Float[Tensor, "B 8 I J"]) -> Float[Tensor, "B 8 I J"]:
    h, i, j = sim.shape[-3:]
    slopes = torch.tensor([2 ** (-8 * (n + 1) / h) for n in range(h)])
    i_arange = torch.arange(j - i, j)
    j_arange = torch.arange(j)
    bias = -torch.abs(rearrange(j_arange, "j -> 1 1 j") - rearrange(i_arange, "i -> 1 1 i"))  # BUG
    return sim + bias * rearrange(slopes, "h -> h 1 1")


def talking_heads(dots: Float[Tensor, "B H I J"], mix: Float[Tensor, "H K"]
                  ) -> Float[Tensor, "B K I J"]:
    """Talking-heads attention: the heads mixed before the softmax."""
    return einsum("b h i j, h k -> b k i j", dots, mix).softmax(dim=-1)


def talking_heads_bug(dots: Float[Tensor, "B H I J"], mix: Float[Tensor, "H K"]
                      ) -> Float[Tensor, "B K I J"]:
    return einsum("b h i j, h k -> b h i j", dots, mix).softmax(dim=-1)  # BUG: k summed away


def rotate_half(x: Tensor) -> Tensor:
    x = rearrange(x, "... (j d) -> ... j d", j=2)
    x1, x2 = x.unbind(dim=-2)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(t: Float[Tensor, "B H N 2*D"]) -> Float[Tensor, "B H N 2*D"]:
    """x-transformers' rotary embedding: frequencies from an outer einsum, rotate_half with an
    einops split of the features."""
    n, dim = t.shape[-2:]
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    freqs = einsum("i , j -> i j", torch.arange(n).type_as(inv_freq), inv_freq)
    freqs = torch.cat((freqs, freqs), dim=-1)
    return t * freqs.cos() + rotate_half(t) * freqs.sin()


def apply_rotary_bug(t: Float[Tensor, "B H N 2*D"]) -> Float[Tensor, "B H N 2*D"]:
    n, dim = t.shape[-2:]
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    freqs = einsum("i , j -> i j", torch.arange(n).type_as(inv_freq), inv_freq)
    freqs = torch.cat((freqs, freqs), dim=0)  # BUG: [2N, D] in place of [N, 2D]
    return t * freqs.cos() + rotate_half(t) * freqs.sin()


# -- perceivers --------------------------------------------------------------------------------


def fourier_encode(x: Float[Tensor, "B N"], max_freq: float = 10.0, num_bands: int = 4
                   ) -> Float[Tensor, "B N 9"]:
    """perceiver's Fourier features: the input kept beside its sines and cosines."""
    x = x.unsqueeze(-1)
    orig_x = x
    scales = torch.linspace(1.0, max_freq / 2, num_bands, dtype=x.dtype)
    scales = scales[(*((None,) * (len(x.shape) - 1)), Ellipsis)]
    x = x * scales * math.pi
    x = torch.cat([x.sin(), x.cos()], dim=-1)
    return torch.cat((x, orig_x), dim=-1)


def fourier_encode_bug(x: Float[Tensor, "B N"], max_freq: float = 10.0, num_bands: int = 4
                       ) -> Float[Tensor, "B N 9"]:
    orig_x = x  # BUG: taken before the unsqueeze
    x = x.unsqueeze(-1)
    scales = torch.linspace(1.0, max_freq / 2, num_bands, dtype=x.dtype)
    scales = scales[(*((None,) * (len(x.shape) - 1)), Ellipsis)]
    x = x * scales * math.pi
    x = torch.cat([x.sin(), x.cos()], dim=-1)
    return torch.cat((x, orig_x), dim=-1)


def masked_cross_attention(latents: Float[Tensor, "B*4 L 8"], data: Float[Tensor, "B*4 N 8"],
                           mask: Bool[Tensor, "B N"]) -> Float[Tensor, "B*4 L 8"]:
    """perceiver's cross attention with heads folded into the batch: the mask repeated over
    the heads with '(b h) () j'."""
    sim = einsum("b i d, b j d -> b i j", latents, data) * 8 ** -0.5
    mask = rearrange(mask, "b ... -> b (...)")
    mask = repeat(mask, "b j -> (b h) () j", h=4)
    sim = sim.masked_fill(~mask, -torch.finfo(sim.dtype).max)
    return einsum("b i j, b j d -> b i d", sim.softmax(dim=-1), data)


def masked_cross_attention_bug(latents: Float[Tensor, "B*4 L 8"],
                               data: Float[Tensor, "B*4 N 8"], mask: Bool[Tensor, "B N"]
                               ) -> Float[Tensor, "B*4 L 8"]:
    sim = einsum("b i d, b j d -> b i j", latents, data) * 8 ** -0.5
    mask = rearrange(mask, "b ... -> b (...)")
    mask = rearrange(mask, "b j -> b () j")  # BUG: not repeated over the heads
    sim = sim.masked_fill(~mask, -torch.finfo(sim.dtype).max)
    return einsum("b i j, b j d -> b i d", sim.softmax(dim=-1), data)


class PerceiverEncoder(nn.Module):
    """Learned latents repeated over the batch attend to the data, then a feedforward."""

    def __init__(self, num_latents: int = 8, latent_dim: int = 32, input_dim: int = 16,
                 heads: int = 2, dim_head: int = 16) -> None:
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.latents = nn.Parameter(torch.randn(num_latents, latent_dim))
        self.to_q = nn.Linear(latent_dim, inner, bias=False)
        self.to_kv = nn.Linear(input_dim, inner * 2, bias=False)
        self.to_out = nn.Linear(inner, latent_dim)
        self.ff = nn.Sequential(nn.LayerNorm(latent_dim), nn.Linear(latent_dim, latent_dim))

    def queries(self, b: int) -> Tensor:
        return repeat(self.latents, "n d -> b n d", b=b)

    def forward(self, data: Float[Tensor, "B N 16"]) -> Float[Tensor, "B 8 32"]:
        x = self.queries(data.shape[0])
        q, (k, v) = self.to_q(x), self.to_kv(data).chunk(2, dim=-1)
        q, k, v = map(lambda t: rearrange(t, "b n (h d) -> (b h) n d", h=self.heads), (q, k, v))
        attn = einsum("b i d, b j d -> b i j", q, k).softmax(dim=-1)
        out = rearrange(einsum("b i j, b j d -> b i d", attn, v), "(b h) n d -> b n (h d)",
                        h=self.heads)
        x = self.to_out(out) + x
        return self.ff(x) + x


class PerceiverEncoderBug(PerceiverEncoder):
    def queries(self, b: int) -> Tensor:
        return repeat(self.latents, "n d -> n b d", b=b)  # BUG: the batch second


def decoder_queries(queries: Float[Tensor, "M D"], latents: Float[Tensor, "B L D"]
                    ) -> Float[Tensor, "B M D"]:
    """perceiver-io's decoder: queries given once are repeated over the batch."""
    if queries.ndim == 2:
        queries = repeat(queries, "n d -> b n d", b=latents.shape[0])
    attn = einsum("b i d, b j d -> b i j", queries, latents).softmax(dim=-1)
    return einsum("b i j, b j d -> b i d", attn, latents)


def decoder_queries_bug(queries: Float[Tensor, "M D"], latents: Float[Tensor, "B L D"]
                        ) -> Float[Tensor, "B M D"]:
    if queries.ndim == 2:
        queries = repeat(queries, "n d -> n b d", b=latents.shape[0])  # BUG
    attn = einsum("b i d, b j d -> b i j", queries, latents).softmax(dim=-1)
    return einsum("b i j, b j d -> b i d", attn, latents)


# -- efficient attention -----------------------------------------------------------------------


def moore_penrose_pinv(x: Tensor, iters: int = 6) -> Tensor:
    abs_x = torch.abs(x)
    col = abs_x.sum(dim=-1)
    row = abs_x.sum(dim=-2)
    z = rearrange(x, "... i j -> ... j i") / (torch.max(col) * torch.max(row))
    eye = rearrange(torch.eye(x.shape[-1]), "i j -> () i j")
    for _ in range(iters):
        xz = x @ z
        z = 0.25 * z @ (13 * eye - (xz @ (15 * eye - (xz @ (7 * eye - xz)))))
    return z


def nystrom_attention(q: Float[Tensor, "B H 4*L D"], k: Float[Tensor, "B H 4*L D"],
                      v: Float[Tensor, "B H 4*L E"], m: int = 4) -> Float[Tensor, "B H 4*L E"]:
    """nystrom-attention: landmarks as sums over groups of positions, the middle kernel's
    inverse by Moore-Penrose iterations."""
    n = q.shape[-2]
    l = n // m  # noqa: E741
    q_landmarks = reduce(q, "... (n l) d -> ... n d", "sum", l=l) / l
    k_landmarks = reduce(k, "... (n l) d -> ... n d", "sum", l=l) / l
    sim1 = einsum("... i d, ... j d -> ... i j", q, k_landmarks)
    sim2 = einsum("... i d, ... j d -> ... i j", q_landmarks, k_landmarks)
    sim3 = einsum("... i d, ... j d -> ... i j", q_landmarks, k)
    attn1, attn2, attn3 = (t.softmax(dim=-1) for t in (sim1, sim2, sim3))
    return (attn1 @ moore_penrose_pinv(attn2)) @ (attn3 @ v)


def nystrom_attention_bug(q: Float[Tensor, "B H 4*L D"], k: Float[Tensor, "B H 4*L D"],
                          v: Float[Tensor, "B H 4*L E"], m: int = 4
                          ) -> Float[Tensor, "B H 4*L E"]:
    n = q.shape[-2]
    l = n // m  # noqa: E741
    q_landmarks = reduce(q, "... (n l) d -> ... n d", "sum", l=l) / l
    k_landmarks = reduce(k, "... (n l) d -> ... n d", "sum", l=l) / l
    sim1 = einsum("... i d, ... j d -> ... i j", q, k_landmarks)
    sim2 = einsum("... i d, ... j d -> ... i j", q_landmarks, k_landmarks)
    sim3 = einsum("... i d, ... j d -> ... i j", q_landmarks, k_landmarks)  # BUG: not k
    attn1, attn2, attn3 = (t.softmax(dim=-1) for t in (sim1, sim2, sim3))
    return (attn1 @ moore_penrose_pinv(attn2)) @ (attn3 @ v)


def look_around(x: Tensor, backward: int = 1, forward: int = 0, pad_value: float = -1.0
                ) -> Tensor:
    t = x.shape[1]
    dims = (len(x.shape) - 2) * (0, 0)
    padded_x = F.pad(x, (*dims, backward, forward), value=pad_value)
    tensors = [padded_x[:, ind:(ind + t), ...] for ind in range(forward + backward + 1)]
    return torch.cat(tensors, dim=2)


def local_attention(q: Float[Tensor, "B 16*W D"], k: Float[Tensor, "B 16*W D"],
                    v: Float[Tensor, "B 16*W D"], window_size: int = 16
                    ) -> Float[Tensor, "B 16*W D"]:
    """local-attention: queries bucketed in windows attend to their own and the previous
    window's keys."""
    windows = q.shape[1] // window_size
    bq, bk, bv = (rearrange(t, "b (w n) d -> b w n d", w=windows) for t in (q, k, v))
    bk, bv = look_around(bk), look_around(bv)
    sim = einsum("b w i e, b w j e -> b w i j", bq, bk) * q.shape[-1] ** -0.5
    out = einsum("b w i j, b w j e -> b w i e", sim.softmax(dim=-1), bv)
    return rearrange(out, "b w n d -> b (w n) d")


def local_attention_bug(q: Float[Tensor, "B 16*W D"], k: Float[Tensor, "B 16*W D"],
                        v: Float[Tensor, "B 16*W D"], window_size: int = 16
                        ) -> Float[Tensor, "B 16*W D"]:
    windows = q.shape[1] // window_size
    bq, bk, bv = (rearrange(t, "b (w n) d -> b w n d", w=windows) for t in (q, k, v))
    bk = look_around(bk)  # BUG: the values not looked around
    sim = einsum("b w i e, b w j e -> b w i j", bq, bk) * q.shape[-1] ** -0.5
    out = einsum("b w i j, b w j e -> b w i e", sim.softmax(dim=-1), bv)
    return rearrange(out, "b w n d -> b (w n) d")


def chunked_attention(q: Float[Tensor, "B H N D"], k: Float[Tensor, "B H 2*S D"],
                      v: Float[Tensor, "B H 2*S E"]) -> Float[Tensor, "B H N E"]:
    """memory-efficient-attention's idea with a fixed number of key chunks: partial softmax
    sums combined by their running maximum."""
    outs, sums, maxes = [], [], []
    for k_chunk, v_chunk in zip(k.chunk(2, dim=-2), v.chunk(2, dim=-2), strict=True):
        sim = einsum("b h i d, b h j d -> b h i j", q, k_chunk)
        block_max = sim.amax(dim=-1, keepdim=True).detach()
        exp_weights = (sim - block_max).exp()
        outs.append(einsum("b h i j, b h j d -> b h i d", exp_weights, v_chunk))
        sums.append(exp_weights.sum(dim=-1, keepdim=True))
        maxes.append(block_max)
    global_max = torch.stack(maxes).amax(dim=0)
    scales = [(m - global_max).exp() for m in maxes]
    out = sum(o * s for o, s in zip(outs, scales, strict=True))
    total = sum(w * s for w, s in zip(sums, scales, strict=True))
    return out / total


def chunked_attention_bug(q: Float[Tensor, "B H N D"], k: Float[Tensor, "B H 2*S D"],
                          v: Float[Tensor, "B H 2*S E"]) -> Float[Tensor, "B H N E"]:
    outs, sums, maxes = [], [], []
    for k_chunk, v_chunk in zip(k.chunk(2, dim=-2), v.chunk(2, dim=-2), strict=True):
        sim = einsum("b h i d, b h j d -> b h i j", q, k_chunk)
        block_max = sim.amax(dim=-1, keepdim=True).detach()
        exp_weights = (sim - block_max).exp()
        outs.append(einsum("b h i j, b h j d -> b h i d", exp_weights, v_chunk))
        sums.append(exp_weights.sum(dim=-1))  # BUG: [B, H, N] against [B, H, N, E]
        maxes.append(block_max)
    global_max = torch.stack(maxes).amax(dim=0)
    scales = [(m - global_max).exp() for m in maxes]
    out = sum(o * s for o, s in zip(outs, scales, strict=True))
    total = sum(w * s for w, s in zip(sums, scales, strict=True))
    return out / total


# -- windows, grids and feature maps -----------------------------------------------------------


class WindowAttention(nn.Module):
    """MaxViT's block attention: windows of the map as batch rows, a learned bias per
    relative position, windows folded back."""

    def __init__(self, dim: int = 32, heads: int = 4, window: int = 4) -> None:
        super().__init__()
        self.heads, self.window, self.scale = heads, window, (dim // heads) ** -0.5
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.to_out = nn.Linear(dim, dim)
        self.rel_pos_bias = nn.Embedding((2 * window - 1) ** 2, heads)
        pos = torch.arange(window)
        grid = torch.stack(torch.meshgrid(pos, pos, indexing="ij"))
        grid = rearrange(grid, "c i j -> (i j) c")
        rel_pos = rearrange(grid, "i ... -> i 1 ...") - rearrange(grid, "j ... -> 1 j ...")
        rel_pos += window - 1
        self.register_buffer("rel_pos_indices", (rel_pos * torch.tensor([2 * window - 1, 1])
                                                  ).sum(dim=-1), persistent=False)

    def unfold(self, out: Tensor, x: int, y: int) -> Tensor:
        return rearrange(out, "(b x y) ... -> b x y ...", x=x, y=y)

    def forward(self, fmap: Float[Tensor, "B 32 4*X 4*Y"]) -> Float[Tensor, "B 32 4*X 4*Y"]:
        w = self.window
        t = rearrange(fmap, "b d (x w1) (y w2) -> b x y w1 w2 d", w1=w, w2=w)
        x, y = t.shape[1:3]
        t = rearrange(t, "b x y w1 w2 d -> (b x y) (w1 w2) d")
        q, k, v = self.to_qkv(t).chunk(3, dim=-1)
        q, k, v = map(lambda z: rearrange(z, "b n (h d) -> b h n d", h=self.heads), (q, k, v))
        sim = einsum("b h i d, b h j d -> b h i j", q * self.scale, k)
        bias = self.rel_pos_bias(self.rel_pos_indices)
        sim = sim + rearrange(bias, "i j h -> h i j")
        out = einsum("b h i j, b h j d -> b h i d", sim.softmax(dim=-1), v)
        out = rearrange(out, "b h (w1 w2) d -> b w1 w2 (h d)", w1=w, w2=w)
        out = self.unfold(self.to_out(out), x, y)
        return rearrange(out, "b x y w1 w2 d -> b d (x w1) (y w2)")


class WindowAttentionBug(WindowAttention):
    def unfold(self, out: Tensor, x: int, y: int) -> Tensor:
        return rearrange(out, "(b x y) ... -> b x y ...", x=y, y=x)  # BUG: rows and columns


def tokens_to_map(tokens: Float[Tensor, "B H*W C"], fmap: Float[Tensor, "B C H W"]
                  ) -> Float[Tensor, "B C H W"]:
    """SegFormer-style: tokens back to a map, the height taken from the feature map."""
    h = fmap.shape[-2]
    return rearrange(tokens, "b (h w) c -> b c h w", h=h) + fmap


def tokens_to_map_bug(tokens: Float[Tensor, "B H*W C"], fmap: Float[Tensor, "B C H W"]
                      ) -> Float[Tensor, "B C H W"]:
    h = fmap.shape[-1]  # BUG: the width read as the height
    return rearrange(tokens, "b (h w) c -> b c h w", h=h) + fmap


def restore_map(y: Float[Tensor, "B H*W C"], x: Float[Tensor, "B C H W"]
                ) -> Float[Tensor, "B C H W"]:
    """parse_shape names the sizes of the map; rearrange takes them back."""
    return rearrange(y, "b (h w) c -> b c h w", **parse_shape(x, "b _ h w")) * x


def restore_map_bug(y: Float[Tensor, "B H*W C"], x: Float[Tensor, "B C H W"]
                    ) -> Float[Tensor, "B C H W"]:
    return rearrange(y, "b (h w) c -> b c h w", **parse_shape(x, "b _ w h")) * x  # BUG


def flatten_video(video: Float[Tensor, "B T H W D"]) -> Float[Tensor, "B T*H*W D"]:
    """An ellipsis over the space-time axes."""
    return rearrange(video, "b ... d -> b (...) d")


def flatten_video_bug(video: Float[Tensor, "B T H W D"]) -> Float[Tensor, "B T*H*W D"]:
    return rearrange(video, "b ... d -> (b ...) d")  # BUG: the batch flattened in


def max_pool_2x2(x: Float[Tensor, "B C 2*H 2*W"]) -> Float[Tensor, "B C H W"]:
    return reduce(x, "b c (h h2) (w w2) -> b c h w", "max", h2=2, w2=2)


def max_pool_2x2_bug(x: Float[Tensor, "B C 2*H 2*W"]) -> Float[Tensor, "B C H W"]:
    return reduce(x, "b c (h h2) (w w2) -> b h w", "max", h2=2, w2=2)  # BUG: channels pooled


def split_heads_ellipsis(x: Float[Tensor, "B N 4*D"]) -> Float[Tensor, "B 4 N D"]:
    """Heads split with an ellipsis over the leading axes, then moved forward."""
    t = rearrange(x, "... (h d) -> ... h d", h=4)
    return rearrange(t, "b n h d -> b h n d")


def split_heads_ellipsis_bug(x: Float[Tensor, "B N 4*D"]) -> Float[Tensor, "B 4 N D"]:
    t = rearrange(x, "... (h d) -> ... h d", d=4)  # BUG: the head size given as 4
    return rearrange(t, "b n h d -> b h n d")


def layer_mean(x: Float[Tensor, "B N D"]) -> Float[Tensor, "B N D"]:
    """x-transformers' intermediates: a list of layer outputs reduced as one stacked tensor."""
    return reduce([x, x.tanh(), x.sigmoid()], "l b n d -> b n d", "mean")


def layer_mean_bug(x: Float[Tensor, "B N D"]) -> Float[Tensor, "B N D"]:
    return reduce([x, x.tanh(), x.sigmoid()], "l b n d -> l n d", "mean")  # BUG: the batch


class MemoryTokens(nn.Module):
    """x-transformers' memory tokens: packed in front, attended over, unpacked."""

    def __init__(self, dim: int = 32, num_memory: int = 2) -> None:
        super().__init__()
        self.memory_tokens = nn.Parameter(torch.randn(num_memory, dim))
        self.attn = Attention(dim)

    def forward(self, x: Float[Tensor, "B N 32"]) -> Float[Tensor, "B N 32"]:
        mem = repeat(self.memory_tokens, "n d -> b n d", b=x.shape[0])
        x, mem_ps = pack((mem, x), "b * d")
        x = self.attn(x) + x
        mem, x = unpack(x, mem_ps, "b * d")
        return x


class MemoryTokensBug(MemoryTokens):
    def forward(self, x: Float[Tensor, "B N 32"]) -> Float[Tensor, "B N 32"]:
        mem = repeat(self.memory_tokens, "n d -> b n d", b=x.shape[0])
        x, mem_ps = pack((mem, x), "b * d")
        x = self.attn(x) + x
        x, mem = unpack(x, mem_ps, "b * d")  # BUG: the memory taken as the output
        return x


class ConformerConv(nn.Module):
    """conformer's convolution module: Rearrange to channels first, GLU, a depthwise conv
    with 'same' padding for an even kernel, back to tokens."""

    def __init__(self, dim: int = 16, expansion: int = 2, kernel_size: int = 4) -> None:
        super().__init__()
        inner = dim * expansion
        self.padding = self.same_padding(kernel_size)
        self.norm = nn.LayerNorm(dim)
        self.pre = nn.Sequential(Rearrange("b n c -> b c n"), nn.Conv1d(dim, inner * 2, 1),
                                 nn.GLU(dim=1))
        self.depthwise = nn.Conv1d(inner, inner, kernel_size, groups=inner)
        self.post = nn.Sequential(nn.SiLU(), nn.Conv1d(inner, dim, 1),
                                  Rearrange("b c n -> b n c"))

    @staticmethod
    def same_padding(kernel_size: int) -> tuple[int, int]:
        pad = kernel_size // 2
        return pad, pad - (kernel_size + 1) % 2

    def forward(self, x: Float[Tensor, "B N 16"]) -> Float[Tensor, "B N 16"]:
        h = self.pre(self.norm(x))
        h = self.depthwise(F.pad(h, self.padding))
        return self.post(h) + x


class ConformerConvBug(ConformerConv):
    @staticmethod
    def same_padding(kernel_size: int) -> tuple[int, int]:
        pad = kernel_size // 2
        return pad, pad  # BUG: one too many for an even kernel


class EinMixChannels(nn.Module):
    """einops' EinMix as a per-token channel mixer with a bias, behind a Rearrange."""

    def __init__(self, c_in: int = 16) -> None:
        super().__init__()
        self.net = nn.Sequential(
            Rearrange("b c h w -> b (h w) c"),
            EinMix("b t c -> b t c_out", weight_shape="c c_out", bias_shape="c_out",
                   c=c_in, c_out=32),
            nn.LayerNorm(32))

    def forward(self, x: Float[Tensor, "B 16 H W"]) -> Float[Tensor, "B H*W 32"]:
        return self.net(x)


class EinMixChannelsBug(EinMixChannels):
    def __init__(self) -> None:
        super().__init__(c_in=8)  # BUG: built for 8 channels


def einops_einsum_attention(q: Float[Tensor, "B H N D"], k: Float[Tensor, "B H S D"],
                            v: Float[Tensor, "B H S E"]) -> Float[Tensor, "B N H*E"]:
    """einops.einsum with its named axes, heads merged at the end."""
    sim = einops.einsum(q, k, "b h i d, b h j d -> b h i j") * q.shape[-1] ** -0.5
    out = einops.einsum(sim.softmax(dim=-1), v, "b h i j, b h j e -> b h i e")
    return rearrange(out, "b h n e -> b n (h e)")


def einops_einsum_attention_bug(q: Float[Tensor, "B H N D"], k: Float[Tensor, "B H S D"],
                                v: Float[Tensor, "B H S E"]) -> Float[Tensor, "B N H*E"]:
    sim = einops.einsum(q, k, "b h i d, b h j d -> b h i j") * q.shape[-1] ** -0.5
    out = einops.einsum(sim.softmax(dim=-1), v, "b h i j, b h i e -> b h j e")  # BUG
    return rearrange(out, "b h n e -> b n (h e)")


# -- diffusion losses, video and fused projections -----------------------------------------------


def extract(a: Float[Tensor, "T"], t: Int[Tensor, "B"], x: Float[Tensor, "B C H W"]
            ) -> Float[Tensor, "B 1 1 1"]:
    """denoising-diffusion's extract: a schedule value per sample, shaped to broadcast."""
    b, *_ = t.shape
    out = a.gather(-1, t)
    return out.reshape(b, *((1,) * (len(x.shape) - 1)))


def extract_bug(a: Float[Tensor, "T"], t: Int[Tensor, "B"], x: Float[Tensor, "B C H W"]
                ) -> Float[Tensor, "B 1 1 1"]:
    b, *_ = t.shape
    out = a.gather(-1, t)
    return out.reshape(b, *((1,) * len(x.shape)))  # BUG: one axis too many


def p_losses(pred: Float[Tensor, "B C H W"], target: Float[Tensor, "B C H W"],
             weight: Float[Tensor, "B"]) -> Float[Tensor, ""]:
    """A per-sample loss reduced over all its other axes with 'b ... -> b', then weighted."""
    loss = F.mse_loss(pred, target, reduction="none")
    loss = reduce(loss, "b ... -> b", "mean")
    return (loss * weight).mean()


def p_losses_bug(pred: Float[Tensor, "B C H W"], target: Float[Tensor, "B C H W"],
                 weight: Float[Tensor, "B"]) -> Float[Tensor, ""]:
    loss = F.mse_loss(pred, target, reduction="none")
    loss = reduce(loss, "b c ... -> b c", "mean")  # BUG: [B, C] weighted by [B]
    return (loss * weight).mean()


def fused_qkv(x: Float[Tensor, "B N 3*4*D"]) -> Float[Tensor, "B N 4*D"]:
    """One projection split into q, k, v by rearrange and unpacked along its first axis."""
    q, k, v = rearrange(x, "b n (qkv h d) -> qkv b h n d", qkv=3, h=4)
    attn = einops.einsum(q, k, "... i d, ... j d -> ... i j").softmax(dim=-1)
    return rearrange(attn @ v, "b h n d -> b n (h d)")


def fused_qkv_bug(x: Float[Tensor, "B N 3*4*D"]) -> Float[Tensor, "B N 4*D"]:
    q, k, v = rearrange(x, "b n (qkv h d) -> qkv b h n d", qkv=3, h=4)
    attn = einops.einsum(q, k, "... i d, ... j d -> ... i j").softmax(dim=-1)
    return rearrange(attn @ v, "b h n d -> b n h d")  # BUG: heads not merged


def video_frames(x: Float[Tensor, "B*T C H W"], cond: Float[Tensor, "B D"]
                 ) -> Float[Tensor, "B C T H W"]:
    """Frames batched as images, folded back into videos by the batch of the conditioning."""
    return rearrange(x, "(b t) c h w -> b c t h w", b=cond.shape[0])


def video_frames_bug(x: Float[Tensor, "B*T C H W"], cond: Float[Tensor, "B D"]
                     ) -> Float[Tensor, "B C T H W"]:
    return rearrange(x, "(t b) c h w -> b t c h w", b=cond.shape[0])  # BUG: channels after


def pack_video_text(video: Float[Tensor, "B T H W D"], text: Float[Tensor, "B N D"]
                    ) -> tuple[Float[Tensor, "B T H W D"], Float[Tensor, "B N D"]]:
    """Video and text tokens packed into one sequence, attended jointly, unpacked."""
    x, ps = pack([video, text], "b * d")
    attn = einsum("b i d, b j d -> b i j", x, x).softmax(dim=-1)
    video, text = unpack(attn @ x, ps, "b * d")
    return video, text


def pack_video_text_bug(video: Float[Tensor, "B T H W D"], text: Float[Tensor, "B N D"]
                        ) -> tuple[Float[Tensor, "B T H W D"], Float[Tensor, "B N D"]]:
    x, ps = pack([video, text], "b * d")
    attn = einsum("b i d, b j d -> b i j", x, x).softmax(dim=-1)
    text, video = unpack(attn @ x, ps, "b * d")  # BUG: the parts swapped
    return video, text


def key_padding_mask(sim: Float[Tensor, "B 4 I J"], mask: Bool[Tensor, "B J"]
                     ) -> Float[Tensor, "B 4 I J"]:
    """A key mask repeated to the full attention shape with named sizes."""
    m = repeat(mask, "b j -> b h i j", h=sim.shape[1], i=sim.shape[2])
    return sim.masked_fill(~m, -torch.finfo(sim.dtype).max).softmax(dim=-1)


def key_padding_mask_bug(sim: Float[Tensor, "B 4 I J"], mask: Bool[Tensor, "B J"]
                         ) -> Float[Tensor, "B 4 I J"]:
    m = repeat(mask, "b j -> b h j i", h=sim.shape[1], i=sim.shape[2])  # BUG: [.., J, I]
    return sim.masked_fill(~m, -torch.finfo(sim.dtype).max).softmax(dim=-1)


# -- the cases ---------------------------------------------------------------------------------


class Case(NamedTuple):
    name: str
    good: Callable[..., Any]
    bad: Callable[..., Any]
    code: str
    sizes: tuple[dict[str, int], ...] = ()  # concrete sizes for the correct one (else chosen)


def _mod(cls: type) -> nn.Module:
    torch.manual_seed(0)
    return cls().eval()


CASES: list[Case] = [
    Case("vit patch embedding", _mod(PatchEmbed), _mod(PatchEmbedBug), "TS102"),
    Case("vit cls token + pool", _mod(ViTClassifier), _mod(ViTClassifierBug), "TS103"),
    Case("simple_vit 2d sincos", posemb_sincos_2d, posemb_sincos_2d_bug, "TS101",
         ({"B": 2, "H": 3, "W": 5, "K": 2}, {"B": 1, "H": 4, "W": 2, "K": 3})),
    Case("vit attention", _mod(Attention), _mod(AttentionBug), "TS102"),
    Case("vit registers pack/unpack", _mod(RegisterTokens), _mod(RegisterTokensBug), "TS103"),
    Case("pack cls token", pack_cls, pack_cls_bug, "TS106"),
    Case("Reduce pool head", _mod(MeanPoolHead), _mod(MeanPoolHeadBug), "TS102"),
    Case("mlp-mixer", _mod(MlpMixer), _mod(MlpMixerBug), "TS102"),
    Case("token learner", _mod(TokenLearner), _mod(TokenLearnerBug), "TS101"),
    Case("sinusoidal time embedding", _mod(SinusoidalPosEmb), _mod(SinusoidalPosEmbBug),
         "TS101"),
    Case("random fourier time embedding", _mod(RandomFourierPosEmb),
         _mod(RandomFourierPosEmbBug), "TS101"),
    Case("unet resnet block scale-shift", _mod(ResnetBlock), _mod(ResnetBlockBug), "TS101"),
    Case("unet Rearrange downsample", _mod(Downsample), _mod(DownsampleBug), "TS102"),
    Case("repeat nearest upsample", upsample_nearest, upsample_nearest_bug, "TS103"),
    Case("unet linear attention", _mod(LinearAttention2d), _mod(LinearAttention2dBug),
         "TS103"),
    Case("unet attention", _mod(Attention2d), _mod(Attention2dBug), "TS104"),
    Case("linear attention", linear_attention, linear_attention_bug, "TS103"),
    Case("performer softmax kernel", softmax_kernel, softmax_kernel_bug, "TS102"),
    Case("performer favor attention", favor_attention, favor_attention_bug, "TS102"),
    Case("axial attention", axial_attention, axial_attention_bug, "TS103"),
    Case("token shift", token_shift, token_shift_bug, "TS106"),
    Case("causal mask", causal_mask_sim, causal_mask_sim_bug, "TS101",
         ({"B": 2, "H": 3, "I": 4, "J": 6}, {"B": 1, "H": 2, "I": 5, "J": 5})),
    Case("alibi", alibi_bias, alibi_bias_bug, "TS101",
         ({"B": 2, "I": 4, "J": 6}, {"B": 1, "I": 3, "J": 3})),
    Case("talking heads", talking_heads, talking_heads_bug, "TS103"),
    Case("rotary", apply_rotary, apply_rotary_bug, "TS101"),
    Case("perceiver fourier features", fourier_encode, fourier_encode_bug, "TS106"),
    Case("perceiver masked cross attention", masked_cross_attention,
         masked_cross_attention_bug, "TS101"),
    Case("perceiver encoder latents", _mod(PerceiverEncoder), _mod(PerceiverEncoderBug),
         "TS102"),
    Case("perceiver-io decoder queries", decoder_queries, decoder_queries_bug, "TS102"),
    Case("nystrom attention", nystrom_attention, nystrom_attention_bug, "TS102"),
    Case("local attention look-around", local_attention, local_attention_bug, "TS102"),
    Case("chunked attention", chunked_attention, chunked_attention_bug, "TS101",
         ({"B": 2, "H": 3, "N": 5, "S": 3, "D": 4, "E": 7},
          {"B": 1, "H": 2, "N": 3, "S": 4, "D": 2, "E": 3})),
    Case("maxvit window attention", _mod(WindowAttention), _mod(WindowAttentionBug), "TS103"),
    Case("tokens to map", tokens_to_map, tokens_to_map_bug, "TS103"),
    Case("parse_shape restore", restore_map, restore_map_bug, "TS101"),
    Case("ellipsis flatten", flatten_video, flatten_video_bug, "TS103"),
    Case("reduce max pool", max_pool_2x2, max_pool_2x2_bug, "TS103"),
    Case("ellipsis split heads", split_heads_ellipsis, split_heads_ellipsis_bug, "TS103"),
    Case("reduce a list of layers", layer_mean, layer_mean_bug, "TS103"),
    Case("memory tokens pack/unpack", _mod(MemoryTokens), _mod(MemoryTokensBug), "TS103"),
    Case("conformer conv module", _mod(ConformerConv), _mod(ConformerConvBug), "TS101"),
    Case("EinMix channel mixer", _mod(EinMixChannels), _mod(EinMixChannelsBug), "TS102"),
    Case("einops.einsum attention", einops_einsum_attention, einops_einsum_attention_bug,
         "TS102"),
    Case("diffusion extract", extract, extract_bug, "TS103",
         ({"T": 7, "B": 2, "C": 3, "H": 4, "W": 5}, {"T": 3, "B": 4, "C": 1, "H": 2, "W": 6})),
    Case("per-sample loss 'b ... -> b'", p_losses, p_losses_bug, "TS101"),
    Case("fused qkv unpacked", fused_qkv, fused_qkv_bug, "TS103"),
    Case("video frames", video_frames, video_frames_bug, "TS103"),
    Case("pack video and text", pack_video_text, pack_video_text_bug, "TS103"),
    Case("key padding mask repeat", key_padding_mask, key_padding_mask_bug, "TS101"),
]
