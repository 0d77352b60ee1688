"""PyTorch, NumPy and JAX code for ``tensig.verify`` whose forward validates its inputs, in the
style of public implementations: Whisper's audio encoder checking its positional table, Hugging
Face attention checking its weights' size, timm's patch embedding and ViT position table, a
torchvision-style detection transform, a diffusers-style UNet that needs its sides to halve, an
S4 long convolution with ``assert L <= self.l_max``, a residual stack that checks every block's
output, a guard inside a helper; scikit-learn-style NumPy estimators (``if X.ndim != 2``,
``X has %d features``, ``assert len(X) == len(y)``), framing, PCA; Flax-style attention with its
asserts, a JAX GAE and patchify: written for this corpus, nothing copied.

Each case is ``(name, correct, buggy, finding code)``; the buggy twin differs by one realistic
bug marked ``# BUG``, placed after the guards, so that only a trace past them finds it.
``MEETS`` gives, per case, sizes meeting its guards at which the oracle runs both;
``tests/test_verify_realcode_2026e.py`` asserts that each correct one verifies (under the
assumptions ``ASSUMES`` names) and each buggy one reports its code.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from tensig import Float, Int

torch.manual_seed(0)

# -- speech: Whisper-style audio encoder -------------------------------------------------------


class AudioEncoder(nn.Module):
    """Two convolutions (the second halves time), then a fixed positional table that the
    frames must match exactly (Whisper pads every clip to 30 s)."""

    def __init__(self, n_mels: int = 8, n_ctx: int = 6, d: int = 16):
        super().__init__()
        self.conv1 = nn.Conv1d(n_mels, d, 3, padding=1)
        self.conv2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
        self.register_buffer("positional_embedding", torch.randn(n_ctx, d))

    def forward(self, x):
        x = F.gelu(self.conv1(x))
        x = F.gelu(self.conv2(x)).permute(0, 2, 1)
        assert x.shape[1:] == self.positional_embedding.shape, "incorrect audio shape"
        return x + self.positional_embedding


class AudioEncoderBug(AudioEncoder):
    def forward(self, x):
        x = F.gelu(self.conv1(x))
        x = F.gelu(self.conv2(x)).permute(0, 2, 1)
        assert x.shape[1:] == self.positional_embedding.shape, "incorrect audio shape"
        return x.transpose(1, 2) + self.positional_embedding  # BUG: channels first again


audio_encoder, audio_encoder_bug = AudioEncoder(), AudioEncoderBug()


def whisper_encode(mel: Float[torch.Tensor, "B 8 12"]) -> Float[torch.Tensor, "B 6 16"]:
    return audio_encoder(mel)


def whisper_encode_bug(mel: Float[torch.Tensor, "B 8 12"]) -> Float[torch.Tensor, "B 6 16"]:
    return audio_encoder_bug(mel)


def whisper_pos(x: Float[torch.Tensor, "B T 16"]) -> Float[torch.Tensor, "B T 16"]:
    """The table check alone, on frames of any length: only T == 6 gets past it."""
    assert x.shape[1:] == audio_encoder.positional_embedding.shape, "incorrect audio shape"
    return x + audio_encoder.positional_embedding


def whisper_pos_bug(x: Float[torch.Tensor, "B T 16"]) -> Float[torch.Tensor, "B T 16"]:
    assert x.shape[1:] == audio_encoder.positional_embedding.shape, "incorrect audio shape"
    return x + audio_encoder.positional_embedding.mean(0)[:, None]  # BUG: [16, 1] on [T, 16]


# -- NLP: Hugging Face-style attention with its size checks ------------------------------------

HEADS = 4


def _shape(t, seq_len: int, bsz: int):
    return t.view(bsz, seq_len, HEADS, t.shape[-1] // HEADS).transpose(1, 2)


def hf_attention(q: Float[torch.Tensor, "B T D"], kv: Float[torch.Tensor, "B S D"],
                 mask: Float[torch.Tensor, "B 1 T S"]) -> Float[torch.Tensor, "B T D"]:
    """BART-style attention: the heads split by a helper, the weights' and the mask's sizes
    checked against what they should be, raising ValueError otherwise."""
    bsz, tgt_len, embed_dim = q.size()
    if embed_dim % HEADS != 0:
        raise ValueError(f"embed_dim must be divisible by num_heads (got {embed_dim})")
    src_len = kv.shape[1]
    qh, kh, vh = _shape(q, tgt_len, bsz), _shape(kv, src_len, bsz), _shape(kv, src_len, bsz)
    attn_weights = qh @ kh.transpose(-1, -2) / math.sqrt(embed_dim // HEADS)
    if attn_weights.size() != (bsz, HEADS, tgt_len, src_len):
        raise ValueError(f"Attention weights should be of size {(bsz, HEADS, tgt_len, src_len)}"
                         f", but is {attn_weights.size()}")
    if mask.size() != (bsz, 1, tgt_len, src_len):
        raise ValueError(f"Attention mask should be of size {(bsz, 1, tgt_len, src_len)}")
    attn = (attn_weights + mask).softmax(-1) @ vh
    return attn.transpose(1, 2).reshape(bsz, tgt_len, embed_dim)


def hf_attention_bug(q: Float[torch.Tensor, "B T D"], kv: Float[torch.Tensor, "B S D"],
                     mask: Float[torch.Tensor, "B 1 T S"]) -> Float[torch.Tensor, "B T D"]:
    bsz, tgt_len, embed_dim = q.size()
    if embed_dim % HEADS != 0:
        raise ValueError(f"embed_dim must be divisible by num_heads (got {embed_dim})")
    src_len = kv.shape[1]
    qh, kh, vh = _shape(q, tgt_len, bsz), _shape(kv, src_len, bsz), _shape(kv, src_len, bsz)
    attn_weights = qh @ kh.transpose(-1, -2) / math.sqrt(embed_dim // HEADS)
    if attn_weights.size() != (bsz, HEADS, tgt_len, src_len):
        raise ValueError("Attention weights have the wrong size")
    if mask.size() != (bsz, 1, tgt_len, src_len):
        raise ValueError("Attention mask has the wrong size")
    attn = (attn_weights + mask).softmax(-1) @ vh
    return attn.reshape(bsz, tgt_len, embed_dim)  # BUG: heads before time, no transpose


def _check_rotary(head_dim: int) -> None:
    if head_dim % 2 != 0:
        raise ValueError(f"rotary embeddings need an even head dimension, got {head_dim}")


def rotary_heads(x: Float[torch.Tensor, "B T D"]) -> Float[torch.Tensor, "B 4 T D//4"]:
    """LLaMA-style rotary embedding per head; the checks in helpers: the width splits into
    heads, and each head's width into halves."""
    B, T, D = x.shape
    if D % HEADS != 0:
        raise ValueError(f"hidden size {D} is not a multiple of {HEADS} heads")
    hd = D // HEADS
    _check_rotary(hd)
    h = x.view(B, T, HEADS, hd).transpose(1, 2)
    inv = 1.0 / 10000 ** (torch.arange(0, hd, 2).float() / hd)
    ang = torch.arange(T).float()[:, None] * inv[None, :]
    cos, sin = ang.cos().repeat(1, 2), ang.sin().repeat(1, 2)
    x1, x2 = h[..., :hd // 2], h[..., hd // 2:]
    return h * cos + torch.cat([-x2, x1], -1) * sin


def rotary_heads_bug(x: Float[torch.Tensor, "B T D"]) -> Float[torch.Tensor, "B 4 T D//4"]:
    B, T, D = x.shape
    if D % HEADS != 0:
        raise ValueError(f"hidden size {D} is not a multiple of {HEADS} heads")
    hd = D // HEADS
    _check_rotary(hd)
    h = x.view(B, T, HEADS, hd).transpose(1, 2)
    inv = 1.0 / 10000 ** (torch.arange(0, hd, 2).float() / hd)
    ang = torch.arange(T).float()[:, None] * inv[None, :]
    cos, sin = ang.cos(), ang.sin()  # BUG: [T, hd/2], not repeated to the head's width
    x1, x2 = h[..., :hd // 2], h[..., hd // 2:]
    return h * cos + torch.cat([-x2, x1], -1) * sin


def flash_heads(q: Float[torch.Tensor, "B T H D"], k: Float[torch.Tensor, "B S H D"]
                ) -> Float[torch.Tensor, "B H T S"]:
    """A fused-attention wrapper's head-width check (FlashAttention's kernels come in a few
    widths), then scaled scores in the heads-first layout."""
    if q.shape[-1] not in (64, 128):
        raise ValueError(f"only head dimensions 64 and 128 are supported, got {q.shape[-1]}")
    return q.transpose(1, 2) @ k.permute(0, 2, 3, 1) * q.shape[-1] ** -0.5


def flash_heads_bug(q: Float[torch.Tensor, "B T H D"], k: Float[torch.Tensor, "B S H D"]
                    ) -> Float[torch.Tensor, "B H T S"]:
    if q.shape[-1] not in (64, 128):
        raise ValueError(f"only head dimensions 64 and 128 are supported, got {q.shape[-1]}")
    return q.transpose(1, 2) @ k.transpose(1, 2) * q.shape[-1] ** -0.5  # BUG: k not transposed

# -- vision: timm-style patch embedding, ViT position table, detection transform, UNet --------


class PatchEmbed(nn.Module):
    """timm's PatchEmbed with a strict image size: ``_assert`` on both sides, then a strided
    convolution flattened to tokens, and the ViT's position table added."""

    def __init__(self, img: int = 32, patch: int = 8, dim: int = 24):
        super().__init__()
        self.img_size, self.patch = (img, img), patch
        self.proj = nn.Conv2d(3, dim, patch, stride=patch)
        self.pos_embed = nn.Parameter(torch.zeros(1, (img // patch) ** 2, dim))

    def forward(self, x):
        _, _, h, w = x.shape
        torch._assert(h == self.img_size[0], f"Input height ({h}) doesn't match model.")
        torch._assert(w == self.img_size[1], f"Input width ({w}) doesn't match model.")
        return self.proj(x).flatten(2).transpose(1, 2) + self.pos_embed


class PatchEmbedBug(PatchEmbed):
    def forward(self, x):
        _, _, h, w = x.shape
        torch._assert(h == self.img_size[0], f"Input height ({h}) doesn't match model.")
        torch._assert(w == self.img_size[1], f"Input width ({w}) doesn't match model.")
        return self.proj(x).flatten(2) + self.pos_embed  # BUG: [B, 24, 16], no transpose


patch_embed, patch_embed_bug = PatchEmbed(), PatchEmbedBug()


def vit_tokens(x: Float[torch.Tensor, "B 3 H W"]) -> Float[torch.Tensor, "B 16 24"]:
    return patch_embed(x)


def vit_tokens_bug(x: Float[torch.Tensor, "B 3 H W"]) -> Float[torch.Tensor, "B 16 24"]:
    return patch_embed_bug(x)


def resize_pos_embed(pos: Float[torch.Tensor, "1 N D"], gh: int = 3, gw: int = 5
                     ) -> Float[torch.Tensor, "1 15 D"]:
    """ViT's position table resized to a new grid: the old one must be a square grid of
    tokens (``int(math.sqrt(N)) ** 2 == N``), interpolated to ``gh x gw``."""
    n = pos.shape[1]
    side = int(math.sqrt(n))
    if side * side != n:
        raise ValueError(f"position table of {n} tokens is not a square grid")
    grid = pos.reshape(1, side, side, -1).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(gh, gw), mode="bilinear", align_corners=False)
    return grid.permute(0, 2, 3, 1).reshape(1, gh * gw, -1)


def resize_pos_embed_bug(pos: Float[torch.Tensor, "1 N D"], gh: int = 3, gw: int = 5
                         ) -> Float[torch.Tensor, "1 15 D"]:
    n = pos.shape[1]
    side = int(math.sqrt(n))
    if side * side != n:
        raise ValueError(f"position table of {n} tokens is not a square grid")
    grid = pos.reshape(1, side, side, -1).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(gh, gw), mode="bilinear", align_corners=False)
    return grid.reshape(1, gh * gw, -1)  # BUG: channels first, D before the grid


def detection_targets(image: Float[torch.Tensor, "C H W"], boxes: Float[torch.Tensor, "N K"],
                      size: int = 20) -> tuple[Float[torch.Tensor, "C 20 20"],
                                               Float[torch.Tensor, "N 4"]]:
    """torchvision's GeneralizedRCNNTransform style: check the image and its boxes, resize the
    image to a fixed side, scale the boxes by the same ratios."""
    if image.dim() != 3:
        raise ValueError(f"images is expected to be a list of 3d tensors, got {image.dim()}d")
    if boxes.dim() != 2 or boxes.shape[-1] != 4:
        raise ValueError(f"Expected target boxes to be a tensor of shape [N, 4], got "
                         f"{tuple(boxes.shape)}")
    h, w = image.shape[-2:]
    out = F.interpolate(image[None], size=(size, size), mode="bilinear", align_corners=False)[0]
    ratios = torch.tensor([size / w, size / h, size / w, size / h])
    return out, boxes * ratios


def detection_targets_bug(image: Float[torch.Tensor, "C H W"],
                          boxes: Float[torch.Tensor, "N K"], size: int = 20
                          ) -> tuple[Float[torch.Tensor, "C 20 20"], Float[torch.Tensor, "N 4"]]:
    if image.dim() != 3:
        raise ValueError("images is expected to be a list of 3d tensors")
    if boxes.dim() != 2 or boxes.shape[-1] != 4:
        raise ValueError("Expected target boxes to be a tensor of shape [N, 4]")
    h, w = image.shape[-2:]
    out = F.interpolate(image[None], size=(size, size), mode="bilinear", align_corners=False)[0]
    ratios = torch.tensor([size / w, size / h])  # BUG: two ratios for four coordinates
    return out, boxes * ratios


class TinyUNet(nn.Module):
    """diffusers' UNet2DModel check, made strict: each side must halve twice; a skip
    concatenation at each level then lines up."""

    def __init__(self, c: int = 4):
        super().__init__()
        self.down1, self.down2 = nn.Conv2d(c, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1)
        self.up2, self.up1 = nn.Conv2d(16, 8, 3, padding=1), nn.Conv2d(8 + c, c, 3, padding=1)

    def forward(self, sample):
        factor = 2 ** 2
        for dim in sample.shape[-2:]:
            if dim % factor != 0:
                raise ValueError(f"sample sides must be multiples of {factor}, got {dim}")
        h1 = F.avg_pool2d(F.silu(self.down1(sample)), 2)
        h2 = F.avg_pool2d(F.silu(self.down2(h1)), 2)
        u2 = F.interpolate(h2, scale_factor=2.0, mode="nearest")
        u2 = F.silu(self.up2(torch.cat([u2, h1], 1)))
        u1 = F.interpolate(u2, scale_factor=2.0, mode="nearest")
        return self.up1(torch.cat([u1, sample], 1))


class TinyUNetBug(TinyUNet):
    def forward(self, sample):
        factor = 2 ** 2
        for dim in sample.shape[-2:]:
            if dim % factor != 0:
                raise ValueError(f"sample sides must be multiples of {factor}, got {dim}")
        h1 = F.avg_pool2d(F.silu(self.down1(sample)), 2)
        h2 = F.avg_pool2d(F.silu(self.down2(h1)), 2)
        u2 = F.interpolate(h2, scale_factor=2.0, mode="nearest")
        u2 = F.silu(self.up2(torch.cat([u2, h1], 1)))
        return self.up1(torch.cat([u2, sample], 1))  # BUG: the half-size map, not upsampled


unet, unet_bug = TinyUNet(), TinyUNetBug()


def unet_denoise(x: Float[torch.Tensor, "B 4 H W"]) -> Float[torch.Tensor, "B 4 H W"]:
    return unet(x)


def unet_denoise_bug(x: Float[torch.Tensor, "B 4 H W"]) -> Float[torch.Tensor, "B 4 H W"]:
    return unet_bug(x)


# -- sequence models: S4 long convolution, a residual stack checking every block --------------


class S4Conv(nn.Module):
    """An S4/Hyena-style long convolution: a kernel of ``l_max`` taps per channel, cut to the
    input's length (``assert L <= self.l_max``), applied by FFT at twice the length."""

    def __init__(self, h: int = 6, l_max: int = 64):
        super().__init__()
        self.l_max = l_max
        self.kernel = nn.Parameter(torch.randn(h, l_max) / l_max)
        self.D = nn.Parameter(torch.randn(h))

    def forward(self, u):  # [B, H, L]
        n = u.shape[-1]
        assert n <= self.l_max, f"input length {n} exceeds l_max {self.l_max}"
        k = self.kernel[:, :n]
        y = torch.fft.irfft(torch.fft.rfft(u, n=2 * n) * torch.fft.rfft(k, n=2 * n), n=2 * n)
        return y[..., :n] + u * self.D[:, None]


class S4ConvBug(S4Conv):
    def forward(self, u):
        n = u.shape[-1]
        assert n <= self.l_max, f"input length {n} exceeds l_max {self.l_max}"
        k = self.kernel[:, :n]
        y = torch.fft.irfft(torch.fft.rfft(u, n=2 * n) * torch.fft.rfft(k, n=2 * n), n=2 * n)
        return y + u * self.D[:, None]  # BUG: the circular tail kept, [B, H, 2L]


s4, s4_bug = S4Conv(), S4ConvBug()


def s4_layer(u: Float[torch.Tensor, "B 6 L"]) -> Float[torch.Tensor, "B 6 L"]:
    return s4(u)


def s4_layer_bug(u: Float[torch.Tensor, "B 6 L"]) -> Float[torch.Tensor, "B 6 L"]:
    return s4_bug(u)


class Block(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.norm, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class CheckedStack(nn.Module):
    """A residual stack that checks every block's output against the input's shape (a
    debugging habit of research code), then pools over time."""

    def __init__(self, d: int = 12, depth: int = 3):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d) for _ in range(depth))
        self.d = d

    def forward(self, x):
        if x.ndim != 3 or x.shape[-1] != self.d:
            raise ValueError(f"expected [B, T, {self.d}], got {tuple(x.shape)}")
        for i, blk in enumerate(self.blocks):
            y = blk(x)
            assert y.shape == x.shape, f"block {i} changed the shape"
            x = y
        return x.mean(1)


class CheckedStackBug(CheckedStack):
    def forward(self, x):
        if x.ndim != 3 or x.shape[-1] != self.d:
            raise ValueError(f"expected [B, T, {self.d}], got {tuple(x.shape)}")
        for i, blk in enumerate(self.blocks):
            y = blk(x)
            assert y.shape == x.shape, f"block {i} changed the shape"
            x = y
        return x.mean(-1)  # BUG: the features pooled, [B, T]


stack, stack_bug = CheckedStack(), CheckedStackBug()


def checked_stack(x: Float[torch.Tensor, "B T D"]) -> Float[torch.Tensor, "B 12"]:
    return stack(x)


def checked_stack_bug(x: Float[torch.Tensor, "B T D"]) -> Float[torch.Tensor, "B 12"]:
    return stack_bug(x)


# -- RL and recsys (torch) --------------------------------------------------------------------


def ppo_loss(logp: Float[torch.Tensor, "T N"], old_logp: Float[torch.Tensor, "T N"],
             adv: Float[torch.Tensor, "T M"], clip: float = 0.2) -> Float[torch.Tensor, ""]:
    """PPO's clipped surrogate, advantages normalised over the batch; the rollout's arrays
    must agree (``assert adv.shape == logp.shape``)."""
    assert logp.shape == old_logp.shape == adv.shape, "rollout arrays disagree"
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    ratio = (logp - old_logp).exp()
    return -torch.min(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv).mean()


def ppo_loss_bug(logp: Float[torch.Tensor, "T N"], old_logp: Float[torch.Tensor, "T N"],
                 adv: Float[torch.Tensor, "T M"], clip: float = 0.2) -> Float[torch.Tensor, ""]:
    assert logp.shape == old_logp.shape == adv.shape, "rollout arrays disagree"
    adv = (adv - adv.mean(0)) / (adv.std(1) + 1e-8)  # BUG: [T, N] / [T]
    ratio = (logp - old_logp).exp()
    return -torch.min(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv).mean()


def two_tower_scores(users: Float[torch.Tensor, "B D"], items: Float[torch.Tensor, "N E"],
                     k: int = 5) -> Int[torch.Tensor, "B 5"]:
    """A two-tower retrieval step: both towers must embed to one width, then each user's
    top-k items by dot product (in-batch candidates)."""
    if users.shape[-1] != items.shape[-1]:
        raise ValueError(f"tower widths differ: {users.shape[-1]} vs {items.shape[-1]}")
    if items.shape[0] < k:
        raise ValueError(f"need at least {k} candidates")
    scores = F.normalize(users, dim=-1) @ F.normalize(items, dim=-1).T
    return scores.topk(k, dim=-1).indices


def two_tower_scores_bug(users: Float[torch.Tensor, "B D"], items: Float[torch.Tensor, "N E"],
                         k: int = 5) -> Int[torch.Tensor, "B 5"]:
    if users.shape[-1] != items.shape[-1]:
        raise ValueError(f"tower widths differ: {users.shape[-1]} vs {items.shape[-1]}")
    if items.shape[0] < k:
        raise ValueError(f"need at least {k} candidates")
    scores = F.normalize(users, dim=-1) @ F.normalize(items, dim=-1).T
    return scores.topk(k, dim=0).indices  # BUG: top users per item, [5, N]


# -- classic NumPy: scikit-learn-style checks -------------------------------------------------

SCALER_MEAN, SCALER_SCALE = np.linspace(0.0, 1.0, 5), np.linspace(1.0, 2.0, 5)


def scaler_transform(X: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "N D"]:
    """StandardScaler.transform: a matrix with as many features as it was fitted on."""
    if X.ndim != 2:
        raise ValueError(f"Expected 2D array, got {X.ndim}D array instead")
    if X.shape[1] != SCALER_MEAN.shape[0]:
        raise ValueError(f"X has {X.shape[1]} features, but StandardScaler is expecting "
                         f"{SCALER_MEAN.shape[0]} features as input.")
    return (X - SCALER_MEAN) / SCALER_SCALE


def scaler_transform_bug(X: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "N D"]:
    if X.ndim != 2:
        raise ValueError(f"Expected 2D array, got {X.ndim}D array instead")
    if X.shape[1] != SCALER_MEAN.shape[0]:
        raise ValueError(f"X has {X.shape[1]} features, but StandardScaler is expecting "
                         f"{SCALER_MEAN.shape[0]} features as input.")
    return (X - SCALER_MEAN) / SCALER_SCALE[:, None]  # BUG: [5, 1] against [N, 5]


def weighted_features(X: Float[np.ndarray, "N D"], w: Float[np.ndarray, "E"]
                      ) -> Float[np.ndarray, "N D"]:
    """Per-feature weights, or one shared weight (scikit-learn's sample-weight style check:
    as many entries as features, or 1)."""
    if w.shape[0] not in (X.shape[1], 1):
        raise ValueError(f"w has {w.shape[0]} entries, expected {X.shape[1]} or 1")
    return X * w / np.abs(w).sum()


def weighted_features_bug(X: Float[np.ndarray, "N D"], w: Float[np.ndarray, "E"]
                          ) -> Float[np.ndarray, "N D"]:
    if w.shape[0] not in (X.shape[1], 1):
        raise ValueError(f"w has {w.shape[0]} entries, expected {X.shape[1]} or 1")
    return X * w[:, None] / np.abs(w).sum()  # BUG: [E, 1], weights down the samples

def ridge_fit(X: Float[np.ndarray, "N D"], y: Float[np.ndarray, "M"], lam: float = 0.1
              ) -> Float[np.ndarray, "D"]:
    """Ridge regression by its normal equations; samples and targets must pair up."""
    assert len(X) == len(y), "X and y have different numbers of samples"
    A = X.T @ X + lam * np.eye(X.shape[1])
    return np.linalg.solve(A, X.T @ y)


def ridge_fit_bug(X: Float[np.ndarray, "N D"], y: Float[np.ndarray, "M"], lam: float = 0.1
                  ) -> Float[np.ndarray, "D"]:
    assert len(X) == len(y), "X and y have different numbers of samples"
    A = X.T @ X + lam * np.eye(X.shape[1])
    return np.linalg.solve(A, X @ y)  # BUG: X, not X.T


def frame_signal(x: Float[np.ndarray, "T"], frame: int = 16, hop: int = 4
                 ) -> Float[np.ndarray, "1+(T-16)//4 16"]:
    """A speech front end's framing: overlapping Hann-windowed frames by fancy indexing;
    a clip shorter than one frame is refused."""
    if len(x) < frame:
        raise ValueError(f"signal of {len(x)} samples is shorter than a frame ({frame})")
    n = 1 + (len(x) - frame) // hop
    idx = np.arange(frame)[None, :] + hop * np.arange(n)[:, None]
    return x[idx] * np.hanning(frame)


def frame_signal_bug(x: Float[np.ndarray, "T"], frame: int = 16, hop: int = 4
                     ) -> Float[np.ndarray, "1+(T-16)//4 16"]:
    if len(x) < frame:
        raise ValueError(f"signal of {len(x)} samples is shorter than a frame ({frame})")
    n = 1 + (len(x) - frame) // hop
    idx = np.arange(frame)[None, :] + hop * np.arange(n)[:, None]
    return x[idx] * np.hanning(hop)  # BUG: a window of the hop's length


def pca_project(X: Float[np.ndarray, "N D"], k: int = 3) -> Float[np.ndarray, "N 3"]:
    """PCA by SVD of the centred data, projected onto the first k components; k may not
    exceed min(n_samples, n_features) (scikit-learn's check)."""
    if k > min(X.shape):
        raise ValueError(f"n_components={k} must be between 0 and min(n_samples, n_features)")
    Xc = X - X.mean(0)
    _, _, Vt = np.linalg.svd(Xc, full_matrices=False)
    return Xc @ Vt[:k].T


def pca_project_bug(X: Float[np.ndarray, "N D"], k: int = 3) -> Float[np.ndarray, "N 3"]:
    if k > min(X.shape):
        raise ValueError(f"n_components={k} must be between 0 and min(n_samples, n_features)")
    Xc = X - X.mean(0)
    _, _, Vt = np.linalg.svd(Xc, full_matrices=False)
    return Xc @ Vt[:k]  # BUG: [N, D] @ [3, D]


def fm_predict(X: Float[np.ndarray, "B F"], V: Float[np.ndarray, "G K"],
               w: Float[np.ndarray, "H"]) -> Float[np.ndarray, "B"]:
    """A factorization machine's prediction (Rendle's O(FK) form); the factor table and the
    linear weights must cover the same features as X."""
    assert X.shape[1] == V.shape[0] == w.shape[0], "feature counts disagree"
    pair = 0.5 * ((X @ V) ** 2 - (X ** 2) @ (V ** 2)).sum(1)
    return X @ w + pair


def fm_predict_bug(X: Float[np.ndarray, "B F"], V: Float[np.ndarray, "G K"],
                   w: Float[np.ndarray, "H"]) -> Float[np.ndarray, "B"]:
    assert X.shape[1] == V.shape[0] == w.shape[0], "feature counts disagree"
    pair = 0.5 * ((X @ V) ** 2 - (X ** 2) @ (V ** 2)).sum(0)  # BUG: over the batch, [K]
    return X @ w + pair


def paired_cosine(a: Float[np.ndarray, "N D"], b: Float[np.ndarray, "M E"]
                  ) -> Float[np.ndarray, "N"]:
    """scikit-learn's paired distances: the two sets must have one shape."""
    if a.shape != b.shape:
        raise ValueError(f"X and Y should be of same shape. They were respectively "
                         f"{a.shape} and {b.shape} long.")
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    return (a * b).sum(1) / (na * nb)


def paired_cosine_bug(a: Float[np.ndarray, "N D"], b: Float[np.ndarray, "M E"]
                      ) -> Float[np.ndarray, "N"]:
    if a.shape != b.shape:
        raise ValueError("X and Y should be of same shape.")
    na, nb = np.linalg.norm(a, axis=0), np.linalg.norm(b, axis=0)  # BUG: per feature, [D]
    return (a * b).sum(1) / (na * nb)


# -- JAX: Flax-style attention asserts, multi-head split, GAE by scan, patchify ---------------


def flax_attention(q: Float[jax.Array, "B T H D"], k: Float[jax.Array, "B S G E"],
                   v: Float[jax.Array, "B S G F"]) -> Float[jax.Array, "B T H F"]:
    """flax.linen's dot_product_attention checks, then its einsums."""
    assert k.ndim == q.ndim == v.ndim, "q, k, v must have same rank."
    assert q.shape[:-3] == k.shape[:-3] == v.shape[:-3], "q, k, v batch dims must match."
    assert q.shape[-2] == k.shape[-2] == v.shape[-2], "q, k, v num_heads must match."
    assert k.shape[-3] == v.shape[-3], "k, v lengths must match."
    assert q.shape[-1] == k.shape[-1], "q, k depths must match."
    w = jax.nn.softmax(jnp.einsum("...qhd,...khd->...hqk", q, k) / jnp.sqrt(q.shape[-1]), -1)
    return jnp.einsum("...hqk,...khd->...qhd", w, v)


def flax_attention_bug(q: Float[jax.Array, "B T H D"], k: Float[jax.Array, "B S G E"],
                       v: Float[jax.Array, "B S G F"]) -> Float[jax.Array, "B T H F"]:
    assert k.ndim == q.ndim == v.ndim, "q, k, v must have same rank."
    assert q.shape[:-3] == k.shape[:-3] == v.shape[:-3], "q, k, v batch dims must match."
    assert q.shape[-2] == k.shape[-2] == v.shape[-2], "q, k, v num_heads must match."
    assert k.shape[-3] == v.shape[-3], "k, v lengths must match."
    assert q.shape[-1] == k.shape[-1], "q, k depths must match."
    w = jax.nn.softmax(jnp.einsum("...qhd,...khd->...hqk", q, k) / jnp.sqrt(q.shape[-1]), -1)
    return jnp.einsum("...hqk,...khd->...hqd", w, v)  # BUG: the value width as the key's


def jax_self_attention(x: Float[jax.Array, "B T D"], wqkv: Float[jax.Array, "D 3*D"],
                       heads: int = 4) -> Float[jax.Array, "B T D"]:
    """A Flax-style self-attention module's call, its parameters passed in."""
    B, T, D = x.shape
    assert D % heads == 0, f"features ({D}) must be divisible by the number of heads"
    q, k, v = jnp.split(x @ wqkv, 3, axis=-1)
    q, k, v = (t.reshape(B, T, heads, D // heads) for t in (q, k, v))
    w = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(D // heads), -1)
    return jnp.einsum("bhqk,bkhd->bqhd", w, v).reshape(B, T, D)


def jax_self_attention_bug(x: Float[jax.Array, "B T D"], wqkv: Float[jax.Array, "D 3*D"],
                           heads: int = 4) -> Float[jax.Array, "B T D"]:
    B, T, D = x.shape
    assert D % heads == 0, f"features ({D}) must be divisible by the number of heads"
    q, k, v = jnp.split(x @ wqkv, 3, axis=-1)
    q, k, v = (t.reshape(B, T, heads, D // heads) for t in (q, k, v))
    w = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(D // heads), -1)
    return jnp.einsum("bhqk,bkhd->bhqd", w, v).reshape(B, T, D)  # BUG: heads before time


def gae(rewards: Float[jax.Array, "T N"], values: Float[jax.Array, "U N"],
        dones: Float[jax.Array, "T N"], gamma: float = 0.99, lam: float = 0.95
        ) -> Float[jax.Array, "T N"]:
    """Generalised advantage estimation by a reversed ``lax.scan``; values carry the
    bootstrap step (one more row than the rewards)."""
    assert values.shape[0] == rewards.shape[0] + 1, "values need the bootstrap step"
    deltas = rewards + gamma * values[1:] * (1 - dones) - values[:-1]

    def step(carry, inp):
        d, done = inp
        carry = d + gamma * lam * (1 - done) * carry
        return carry, carry

    _, adv = jax.lax.scan(step, jnp.zeros(rewards.shape[1:]), (deltas, dones), reverse=True)
    return adv


def gae_bug(rewards: Float[jax.Array, "T N"], values: Float[jax.Array, "U N"],
            dones: Float[jax.Array, "T N"], gamma: float = 0.99, lam: float = 0.95
            ) -> Float[jax.Array, "T N"]:
    assert values.shape[0] == rewards.shape[0] + 1, "values need the bootstrap step"
    deltas = rewards + gamma * values[1:] * (1 - dones) - values  # BUG: the bootstrap row kept

    def step(carry, inp):
        d, done = inp
        carry = d + gamma * lam * (1 - done) * carry
        return carry, carry

    _, adv = jax.lax.scan(step, jnp.zeros(rewards.shape[1:]), (deltas, dones), reverse=True)
    return adv


def patchify(img: Float[jax.Array, "B H W C"], p: int = 4
             ) -> Float[jax.Array, "B H//4*(W//4) 16*C"]:
    """big_vision-style patch extraction by reshape and transpose."""
    B, H, W, C = img.shape
    assert H % p == 0 and W % p == 0, f"image {H}x{W} does not tile into {p}x{p} patches"
    x = img.reshape(B, H // p, p, W // p, p, C).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(B, (H // p) * (W // p), p * p * C)


def patchify_bug(img: Float[jax.Array, "B H W C"], p: int = 4
                 ) -> Float[jax.Array, "B H//4*(W//4) 16*C"]:
    B, H, W, C = img.shape
    assert H % p == 0 and W % p == 0, f"image {H}x{W} does not tile into {p}x{p} patches"
    x = img.reshape(B, H // p, p, W // p, p, C).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(B, -1, p * p)  # BUG: the channels folded into the patches


CASES = [
    ("whisper encoder", whisper_encode, whisper_encode_bug, "TS101"),
    ("whisper position table", whisper_pos, whisper_pos_bug, "TS101"),
    ("hf attention checks", hf_attention, hf_attention_bug, "TS202"),
    ("rotary helper guards", rotary_heads, rotary_heads_bug, "TS101"),
    ("flash head dims", flash_heads, flash_heads_bug, "TS102"),
    ("timm patch embed", vit_tokens, vit_tokens_bug, "TS101"),
    ("vit pos-embed resize", resize_pos_embed, resize_pos_embed_bug, "TS202"),
    ("detection transform", detection_targets, detection_targets_bug, "TS101"),
    ("unet sides", unet_denoise, unet_denoise_bug, "TS106"),
    ("s4 l_max", s4_layer, s4_layer_bug, "TS101"),
    ("checked residual stack", checked_stack, checked_stack_bug, "TS103"),
    ("ppo rollout assert", ppo_loss, ppo_loss_bug, "TS101"),
    ("two-tower retrieval", two_tower_scores, two_tower_scores_bug, "TS103"),
    ("standard scaler", scaler_transform, scaler_transform_bug, "TS101"),
    ("per-feature or shared weight", weighted_features, weighted_features_bug, "TS101"),
    ("ridge len assert", ridge_fit, ridge_fit_bug, "TS102"),
    ("framing min length", frame_signal, frame_signal_bug, "TS101"),
    ("pca min check", pca_project, pca_project_bug, "TS102"),
    ("factorization machine", fm_predict, fm_predict_bug, "TS101"),
    ("paired cosine", paired_cosine, paired_cosine_bug, "TS101"),
    ("flax attention asserts", flax_attention, flax_attention_bug, "TS103"),
    ("jax heads assert", jax_self_attention, jax_self_attention_bug, "TS202"),
    ("jax gae bootstrap", gae, gae_bug, "TS101"),
    ("jax patchify", patchify, patchify_bug, "TS103"),
]
# sizes meeting each case's guards (two sets), at which the oracle runs both functions
MEETS: dict[str, list[dict[str, int]]] = {
    "whisper encoder": [{"B": 2}, {"B": 3}],
    "whisper position table": [{"B": 2, "T": 6}, {"B": 5, "T": 6}],
    "hf attention checks": [{"B": 2, "T": 5, "S": 7, "D": 8}, {"B": 3, "T": 4, "S": 2, "D": 12}],
    "rotary helper guards": [{"B": 2, "T": 5, "D": 16}, {"B": 3, "T": 7, "D": 24}],
    "flash head dims": [{"B": 2, "T": 3, "H": 2, "D": 64, "S": 5},
                        {"B": 1, "T": 4, "H": 3, "D": 128, "S": 2}],
    "per-feature or shared weight": [{"N": 4, "D": 3, "E": 1}, {"N": 5, "D": 6, "E": 6}],
    "timm patch embed": [{"B": 2, "H": 32, "W": 32}, {"B": 3, "H": 32, "W": 32}],
    "vit pos-embed resize": [{"N": 9, "D": 6}, {"N": 16, "D": 5}],
    "detection transform": [{"C": 3, "H": 7, "W": 9, "N": 5, "K": 4},
                            {"C": 1, "H": 11, "W": 6, "N": 2, "K": 4}],
    "unet sides": [{"B": 2, "H": 8, "W": 12}, {"B": 1, "H": 16, "W": 4}],
    "s4 l_max": [{"B": 2, "L": 7}, {"B": 3, "L": 64}],
    "checked residual stack": [{"B": 2, "T": 5, "D": 12}, {"B": 3, "T": 2, "D": 12}],
    "ppo rollout assert": [{"T": 5, "N": 3, "M": 3}, {"T": 2, "N": 7, "M": 7}],
    "two-tower retrieval": [{"B": 3, "D": 4, "N": 6, "E": 4}, {"B": 2, "D": 7, "N": 9, "E": 7}],
    "standard scaler": [{"N": 4, "D": 5}, {"N": 9, "D": 5}],
    "ridge len assert": [{"N": 7, "D": 3, "M": 7}, {"N": 4, "D": 6, "M": 4}],
    "framing min length": [{"T": 16}, {"T": 45}],
    "pca min check": [{"N": 5, "D": 4}, {"N": 4, "D": 9}],
    "factorization machine": [{"B": 4, "F": 6, "G": 6, "K": 3, "H": 6},
                              {"B": 2, "F": 3, "G": 3, "K": 5, "H": 3}],
    "paired cosine": [{"N": 4, "D": 3, "M": 4, "E": 3}, {"N": 6, "D": 2, "M": 6, "E": 2}],
    "flax attention asserts": [{"B": 2, "T": 3, "H": 4, "D": 5, "S": 6, "G": 4, "E": 5, "F": 7},
                               {"B": 1, "T": 2, "H": 3, "D": 4, "S": 5, "G": 3, "E": 4, "F": 2}],
    "jax heads assert": [{"B": 2, "T": 3, "D": 8}, {"B": 1, "T": 5, "D": 12}],
    "jax gae bootstrap": [{"T": 5, "N": 3, "U": 6}, {"T": 2, "N": 4, "U": 3}],
    "jax patchify": [{"B": 2, "H": 8, "W": 12, "C": 3}, {"B": 1, "H": 4, "W": 16, "C": 2}],
}
# correct code that verifies under the assumptions its guards make: a warning starting so
ASSUMES: dict[str, str] = {
    "whisper position table": "assumes T == 6: the code raises AssertionError otherwise; "
                              "verified with T = 6",
    "hf attention checks": "requires D divisible by 4: the code raises ValueError otherwise",
    "rotary helper guards": "requires D_over4 divisible by 2: the code raises ValueError",
    "flash head dims": "assumes D == 128: one way past the code's ValueError",
    "per-feature or shared weight": "assumes E == 1: one way past the code's ValueError",
    "timm patch embed": "assumes W == 32: the code raises AssertionError otherwise; verified "
                        "with W = 32",
    "vit pos-embed resize": "assumes N is a square, N_root**2",
    "detection transform": "assumes K == 4: the code raises ValueError otherwise",
    "unet sides": "verified with W = 4*W_over4",
    "s4 l_max": "assumes L <= 64",
    "checked residual stack": "assumes D == 12: the code raises ValueError otherwise",
    "ppo rollout assert": "assumes N == M: the code raises AssertionError otherwise; "
                          "verified with M = N",
    "two-tower retrieval": "assumes D == E: the code raises ValueError otherwise",
    "standard scaler": "assumes D == 5: the code raises ValueError otherwise",
    "ridge len assert": "assumes N == M: the code raises AssertionError otherwise",
    "framing min length": "verified with T = T_more + 15",
    "pca min check": "assumes not (N < 3)",
    "factorization machine": "assumes F == H: the code raises AssertionError otherwise",
    "paired cosine": "assumes D == E: the code raises ValueError otherwise",
    "flax attention asserts": "assumes D == E: the code raises AssertionError otherwise",
    "jax heads assert": "requires D divisible by 4: the code raises AssertionError otherwise; "
                        "verified with D = 4*D_over4",
    "jax gae bootstrap": "assumes U == T + 1: the code raises AssertionError otherwise; "
                         "verified with U = T + 1",
    "jax patchify": "requires W divisible by 4: the code raises AssertionError otherwise; "
                    "verified with W = 4*W_over4",
}
# torch refused the buggy operands itself (verify's note says so)
STOPS: set[str] = set()
# sizes at which a guard of the correct function fails: it raises there
BREAKS: dict[str, list[dict[str, int]]] = {
    "whisper position table": [{"B": 2, "T": 7}],
    "hf attention checks": [{"B": 2, "T": 5, "S": 7, "D": 10}],
    "rotary helper guards": [{"B": 2, "T": 5, "D": 12}, {"B": 2, "T": 5, "D": 10}],
    "flash head dims": [{"B": 2, "T": 3, "H": 2, "D": 96, "S": 5}],
    "per-feature or shared weight": [{"N": 4, "D": 3, "E": 2}],
    "timm patch embed": [{"B": 2, "H": 32, "W": 24}, {"B": 2, "H": 40, "W": 32}],
    "vit pos-embed resize": [{"N": 10, "D": 6}],
    "detection transform": [{"C": 3, "H": 7, "W": 9, "N": 5, "K": 5}],
    "unet sides": [{"B": 2, "H": 6, "W": 8}, {"B": 2, "H": 8, "W": 10}],
    "s4 l_max": [{"B": 2, "L": 65}],
    "checked residual stack": [{"B": 2, "T": 5, "D": 11}],
    "ppo rollout assert": [{"T": 5, "N": 3, "M": 4}],
    "two-tower retrieval": [{"B": 3, "D": 4, "N": 6, "E": 5}, {"B": 3, "D": 4, "N": 4, "E": 4}],
    "standard scaler": [{"N": 4, "D": 6}],
    "ridge len assert": [{"N": 7, "D": 3, "M": 6}],
    "framing min length": [{"T": 15}],
    "pca min check": [{"N": 2, "D": 9}, {"N": 9, "D": 2}],
    "factorization machine": [{"B": 4, "F": 6, "G": 5, "K": 3, "H": 6},
                              {"B": 4, "F": 6, "G": 6, "K": 3, "H": 7}],
    "paired cosine": [{"N": 4, "D": 3, "M": 5, "E": 3}, {"N": 4, "D": 3, "M": 4, "E": 2}],
    "flax attention asserts": [{"B": 2, "T": 3, "H": 4, "D": 5, "S": 6, "G": 3, "E": 5, "F": 7},
                               {"B": 2, "T": 3, "H": 4, "D": 5, "S": 6, "G": 4, "E": 6, "F": 7}],
    "jax heads assert": [{"B": 2, "T": 3, "D": 10}],
    "jax gae bootstrap": [{"T": 5, "N": 3, "U": 5}],
    "jax patchify": [{"B": 2, "H": 8, "W": 10, "C": 3}],
}
