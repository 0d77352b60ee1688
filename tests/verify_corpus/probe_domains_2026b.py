"""NumPy, PyTorch and JAX code for ``tensig.verify`` in more domains the other corpora touch
little, in the style of public implementations (DDPM/DDIM noise schedules and samplers, diffusion
U-Net time embeddings, wav2vec2's strided conv feature extractor and its output lengths, DLRM
embedding bags and dot interactions, GraphSAGE and segment softmax, PPO and GAE, Swin windows,
MoE routing with capacity, Perceiver latents, a selective-scan loop, RWKV's WKV recurrence,
segmentation losses, cost volumes, k-means++, PCA, Kalman steps, vmapped scan RNNs, einops ViT
patching): written for this corpus, nothing copied.

Each case is ``(name, correct, buggy, finding code)``; the buggy twin differs by one realistic
bug marked ``# BUG``.  ``tests/test_verify_realcode_domains_b.py`` asserts that each correct one
verifies with no finding or note and each buggy one reports its code.
"""

from __future__ import annotations

import math

import einops
import jax
import jax.numpy as jnp
import numpy as np
import scipy.signal
import torch
import torch.nn.functional as F
from jax import lax

from tensig import Float, Int

# -- DDPM / DDIM noise schedules and samplers ---------------------------------------------------


def q_sample(x0: Float[torch.Tensor, "B C H W"], noise: Float[torch.Tensor, "B C H W"],
             t: Int[torch.Tensor, "B"], betas: Float[torch.Tensor, "T"]
             ) -> Float[torch.Tensor, "B C H W"]:
    """DDPM forward noising: the cumulative product of alphas gathered at each sample's step
    and reshaped to broadcast over the image (the ``extract`` helper)."""
    abar = torch.cumprod(1.0 - betas, dim=0)
    a = abar.gather(-1, t).reshape(t.shape[0], 1, 1, 1)
    return a.sqrt() * x0 + (1.0 - a).sqrt() * noise


def q_sample_bug(x0: Float[torch.Tensor, "B C H W"], noise: Float[torch.Tensor, "B C H W"],
                 t: Int[torch.Tensor, "B"], betas: Float[torch.Tensor, "T"]
                 ) -> Float[torch.Tensor, "B C H W"]:
    abar = torch.cumprod(1.0 - betas, dim=0)
    a = abar.gather(-1, t)  # BUG: [B] against [B, C, H, W]
    return a.sqrt() * x0 + (1.0 - a).sqrt() * noise


def ddpm_sample(x: Float[torch.Tensor, "B D"], W: Float[torch.Tensor, "D D"],
                betas: Float[torch.Tensor, "T"]) -> Float[torch.Tensor, "B D"]:
    """The ancestral sampling loop over reversed(range(T)), a linear map as the noise model,
    fresh noise at each step but the last."""
    alphas = 1.0 - betas
    abar = torch.cumprod(alphas, dim=0)
    for i in reversed(range(betas.shape[0])):
        eps = torch.tanh(x @ W)
        mean = (x - betas[i] / (1.0 - abar[i]).sqrt() * eps) / alphas[i].sqrt()
        noise = torch.randn_like(x) if i > 0 else torch.zeros_like(x)
        x = mean + betas[i].sqrt() * noise
    return x


def ddpm_sample_bug(x: Float[torch.Tensor, "B D"], W: Float[torch.Tensor, "D D"],
                    betas: Float[torch.Tensor, "T"]) -> Float[torch.Tensor, "B D"]:
    alphas = 1.0 - betas
    abar = torch.cumprod(alphas, dim=0)
    for i in reversed(range(betas.shape[0])):
        eps = torch.tanh(x @ W)
        mean = (x - betas[i] / (1.0 - abar[i]).sqrt() * eps) / alphas[i].sqrt()
        noise = torch.randn(x.shape[0]) if i > 0 else torch.zeros_like(x)  # BUG: [B]
        x = mean + betas[i].sqrt() * noise
    return x


def cosine_betas(steps: Float[np.ndarray, "T"], s: float = 0.008) -> Float[np.ndarray, "T"]:
    """Improved-DDPM's cosine schedule: alpha-bar on T + 1 points, betas from the ratio of
    neighbours, clipped."""
    T = steps.shape[0]
    x = np.linspace(0, T, T + 1)
    abar = np.cos(((x / T) + s) / (1 + s) * math.pi * 0.5) ** 2
    abar = abar / abar[0]
    return np.clip(1 - abar[1:] / abar[:-1], 0, 0.999)


def cosine_betas_bug(steps: Float[np.ndarray, "T"], s: float = 0.008) -> Float[np.ndarray, "T"]:
    T = steps.shape[0]
    x = np.linspace(0, T, T + 1)
    abar = np.cos(((x / T) + s) / (1 + s) * math.pi * 0.5) ** 2
    abar = abar / abar[0]
    return np.clip(1 - abar[1:] / abar, 0, 0.999)  # BUG: T against T + 1


def ddim_sample_jax(x: Float[jax.Array, "B D"], W: Float[jax.Array, "D D"],
                    abar: Float[jax.Array, "T"]) -> Float[jax.Array, "B D"]:
    """Deterministic DDIM (eta = 0) under lax.scan over the reversed steps, the previous
    alpha-bar 1 at step 0."""
    prev = jnp.concatenate([jnp.ones(1), abar[:-1]])

    def step(x, a):
        a_t, a_prev = a
        eps = jnp.tanh(x @ W)
        x0 = (x - jnp.sqrt(1 - a_t) * eps) / jnp.sqrt(a_t)
        return jnp.sqrt(a_prev) * x0 + jnp.sqrt(1 - a_prev) * eps, None
    x, _ = lax.scan(step, x, (abar[::-1], prev[::-1]))
    return x


def ddim_sample_jax_bug(x: Float[jax.Array, "B D"], W: Float[jax.Array, "D D"],
                        abar: Float[jax.Array, "T"]) -> Float[jax.Array, "B D"]:
    prev = jnp.concatenate([jnp.ones(1), abar[:-1]])

    def step(x, a):
        a_t, a_prev = a
        eps = jnp.tanh(x @ W)
        x0 = (x - jnp.sqrt(1 - a_t) * eps.mean(-1)) / jnp.sqrt(a_t)  # BUG: [B, D] - [B]
        return jnp.sqrt(a_prev) * x0 + jnp.sqrt(1 - a_prev) * eps, None
    x, _ = lax.scan(step, x, (abar[::-1], prev[::-1]))
    return x


# -- diffusion U-Net time embeddings ------------------------------------------------------------


def time_film(t: Int[torch.Tensor, "B"], h: Float[torch.Tensor, "B E X Y"],
              W: Float[torch.Tensor, "2*K E"]) -> Float[torch.Tensor, "B E X Y"]:
    """The U-Net's sinusoidal timestep embedding, a SiLU and a linear map, added to a
    ResBlock's feature map over its spatial axes."""
    half = W.shape[0] // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
    args = t[:, None].float() * freqs[None]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    emb = F.silu(emb) @ W
    return h + emb[:, :, None, None]


def time_film_bug(t: Int[torch.Tensor, "B"], h: Float[torch.Tensor, "B E X Y"],
                  W: Float[torch.Tensor, "2*K E"]) -> Float[torch.Tensor, "B E X Y"]:
    half = W.shape[0] // 2
    freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
    args = t[:, None].float() * freqs[None]
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    emb = F.silu(emb) @ W
    return h + emb  # BUG: [B, E] against [B, E, X, Y]


def time_film_jax(t: Int[jax.Array, "B"], h: Float[jax.Array, "B X Y C"],
                  W: Float[jax.Array, "2*K C"]) -> Float[jax.Array, "B X Y C"]:
    """Flax-style NHWC: the embedding broadcast over the two spatial axes."""
    half = W.shape[0] // 2
    freqs = jnp.exp(-math.log(10000) * jnp.arange(half) / half)
    args = t[:, None] * freqs[None]
    emb = jax.nn.silu(jnp.concatenate([jnp.sin(args), jnp.cos(args)], axis=-1)) @ W
    return h + emb[:, None, None, :]


def time_film_jax_bug(t: Int[jax.Array, "B"], h: Float[jax.Array, "B X Y C"],
                      W: Float[jax.Array, "2*K C"]) -> Float[jax.Array, "B X Y C"]:
    half = W.shape[0] // 2
    freqs = jnp.exp(-math.log(10000) * jnp.arange(half) / half)
    args = t[:, None] * freqs[None]
    emb = jax.nn.silu(jnp.concatenate([jnp.sin(args), jnp.cos(args)], axis=-1)) @ W
    return h + emb[:, None, :]  # BUG: one spatial axis


# -- wav2vec2 feature extractor -----------------------------------------------------------------


def wav2vec_features(wav: Float[torch.Tensor, "B 10*L"], W1: Float[torch.Tensor, "C 1 10"],
                     W2: Float[torch.Tensor, "C C 3"]) -> Float[torch.Tensor, "B L-1 C"]:
    """The first two conv layers of wav2vec2's extractor (kernel 10 stride 5, kernel 3 stride
    2, GELU), time-major for the transformer."""
    x = F.gelu(F.conv1d(wav[:, None], W1, stride=5))
    x = F.gelu(F.conv1d(x, W2, stride=2))
    return x.transpose(1, 2)


def wav2vec_features_bug(wav: Float[torch.Tensor, "B 10*L"], W1: Float[torch.Tensor, "C 1 10"],
                         W2: Float[torch.Tensor, "C C 3"]) -> Float[torch.Tensor, "B L-1 C"]:
    x = F.gelu(F.conv1d(wav[:, None], W1, stride=5))
    x = F.gelu(F.conv1d(x, W2, stride=2))
    return x  # BUG: channels first


def feature_mask(feats: Float[torch.Tensor, "B N C"], lengths: Int[torch.Tensor, "B"]
                 ) -> Float[torch.Tensor, "B N"]:
    """HF's ``_get_feat_extract_output_lengths`` (floor((L - k) / s) + 1 per layer), then the
    padding mask of the frames."""
    for k, s in ((10, 5), (3, 2), (3, 2), (3, 2), (3, 2), (2, 2), (2, 2)):
        lengths = torch.div(lengths - k, s, rounding_mode="floor") + 1
    frames = torch.arange(feats.shape[1])
    return (frames[None, :] < lengths[:, None]).float()


def feature_mask_bug(feats: Float[torch.Tensor, "B N C"], lengths: Int[torch.Tensor, "B"]
                     ) -> Float[torch.Tensor, "B N"]:
    for k, s in ((10, 5), (3, 2), (3, 2), (3, 2), (3, 2), (2, 2), (2, 2)):
        lengths = torch.div(lengths - k, s, rounding_mode="floor") + 1
    frames = torch.arange(feats.shape[1])
    return (frames < lengths).float()  # BUG: [N] against [B]


# -- DLRM: embedding bags and dot interactions --------------------------------------------------


def dlrm_forward(dense: Float[torch.Tensor, "B 13"], idx: Int[torch.Tensor, "N"],
                 offsets: Int[torch.Tensor, "B"], table: Float[torch.Tensor, "V D"],
                 Wb: Float[torch.Tensor, "13 D"]) -> Float[torch.Tensor, "B D+3"]:
    """Bottom MLP, two sum-pooled embedding bags, the pairwise dots of the three feature
    vectors below the diagonal (tril_indices, offset -1), concatenated to the dense one."""
    x = torch.relu(dense @ Wb)
    e1 = F.embedding_bag(idx, table, offsets, mode="sum")
    e2 = F.embedding_bag(idx, table, offsets, mode="mean")
    T = torch.stack([x, e1, e2], dim=1)
    Z = torch.bmm(T, T.transpose(1, 2))
    li, lj = torch.tril_indices(3, 3, offset=-1)
    return torch.cat([x, Z[:, li, lj]], dim=1)


def dlrm_forward_bug(dense: Float[torch.Tensor, "B 13"], idx: Int[torch.Tensor, "N"],
                     offsets: Int[torch.Tensor, "B"], table: Float[torch.Tensor, "V D"],
                     Wb: Float[torch.Tensor, "13 D"]) -> Float[torch.Tensor, "B D+3"]:
    x = torch.relu(dense @ Wb)
    e1 = F.embedding_bag(idx, table, offsets, mode="sum")
    e2 = F.embedding_bag(idx, table, offsets, mode="mean")
    T = torch.stack([x, e1, e2], dim=1)
    Z = torch.bmm(T, T.transpose(1, 2))
    li, lj = torch.tril_indices(3, 3, offset=-1)
    return torch.cat([x, Z[li, lj]], dim=1)  # BUG: indexes the batch


def dot_interaction(T: Float[torch.Tensor, "B F D"]) -> Float[torch.Tensor, "B F*(F-1)//2"]:
    """TorchRec-style interaction over F sparse features: the strict upper triangle."""
    Z = T @ T.transpose(1, 2)
    i, j = torch.triu_indices(T.shape[1], T.shape[1], offset=1)
    return Z[:, i, j]


def dot_interaction_bug(T: Float[torch.Tensor, "B F D"]) -> Float[torch.Tensor, "B F*(F-1)//2"]:
    Z = T @ T.transpose(1, 2)
    i, _ = torch.triu_indices(T.shape[1], T.shape[1], offset=1)
    return Z[:, i]  # BUG: rows only


def embedding_bag_np(table: Float[np.ndarray, "V D"], idx: Int[np.ndarray, "N"],
                     weights: Float[np.ndarray, "N"]) -> Float[np.ndarray, "4 D"]:
    """Per-sample-weighted sum bags over four equal segments of the flat ids, by reshaping."""
    rows = table[idx] * weights[:, None]
    n = idx.shape[0] // 4 * 4
    return rows[:n].reshape(4, -1, table.shape[1]).sum(axis=1)


def embedding_bag_np_bug(table: Float[np.ndarray, "V D"], idx: Int[np.ndarray, "N"],
                         weights: Float[np.ndarray, "N"]) -> Float[np.ndarray, "4 D"]:
    rows = table[idx] * weights  # BUG: [N, D] * [N]
    n = idx.shape[0] // 4 * 4
    return rows[:n].reshape(4, -1, table.shape[1]).sum(axis=1)


def dot_interaction_np(T: Float[np.ndarray, "B F D"]) -> Float[np.ndarray, "B F*(F-1)//2"]:
    """The same interaction in NumPy with triu_indices."""
    Z = T @ T.transpose(0, 2, 1)
    i, j = np.triu_indices(T.shape[1], k=1)
    return Z[:, i, j]


def dot_interaction_np_bug(T: Float[np.ndarray, "B F D"]) -> Float[np.ndarray, "B F*(F-1)//2"]:
    Z = T @ T.transpose(0, 2, 1)
    i, j = np.triu_indices(T.shape[1], k=0)  # BUG: with the diagonal
    return Z[:, i, j]


# -- GNN message passing --------------------------------------------------------------------------


def sage_mean(x: Float[torch.Tensor, "N D"], edge_index: Int[torch.Tensor, "2 E"],
              W: Float[torch.Tensor, "2*D H"]) -> Float[torch.Tensor, "N H"]:
    """GraphSAGE mean aggregation: neighbour sums and in-degrees by index_add_, the mean
    concatenated to the node's own features."""
    src, dst = edge_index[0], edge_index[1]
    agg = torch.zeros_like(x).index_add_(0, dst, x[src])
    deg = torch.zeros(x.shape[0]).index_add_(0, dst, torch.ones(dst.shape[0])).clamp(min=1)
    return torch.relu(torch.cat([x, agg / deg[:, None]], dim=-1) @ W)


def sage_mean_bug(x: Float[torch.Tensor, "N D"], edge_index: Int[torch.Tensor, "2 E"],
                  W: Float[torch.Tensor, "2*D H"]) -> Float[torch.Tensor, "N H"]:
    src, dst = edge_index[0], edge_index[1]
    agg = torch.zeros_like(x).index_add_(0, dst, x[src])
    deg = torch.zeros(x.shape[0]).index_add_(0, dst, torch.ones(dst.shape[0])).clamp(min=1)
    return torch.relu(torch.cat([x, agg / deg], dim=-1) @ W)  # BUG: [N, D] / [N]


def segment_softmax_np(scores: Float[np.ndarray, "E"], seg: Int[np.ndarray, "E"],
                       x: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "E"]:
    """Softmax of edge scores within each target node: ufunc.at for the max and the sum."""
    top = np.full(x.shape[0], -np.inf)
    np.maximum.at(top, seg, scores)
    e = np.exp(scores - top[seg])
    den = np.zeros(x.shape[0])
    np.add.at(den, seg, e)
    return e / den[seg]


def segment_softmax_np_bug(scores: Float[np.ndarray, "E"], seg: Int[np.ndarray, "E"],
                           x: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "E"]:
    top = np.full(x.shape[0], -np.inf)
    np.maximum.at(top, seg, scores)
    e = np.exp(scores - top[seg])
    den = np.zeros(x.shape[0])
    np.add.at(den, seg, e)
    return e / den  # BUG: per node


def scatter_mean_torch(msg: Float[torch.Tensor, "E D"], dst: Int[torch.Tensor, "E"],
                       x: Float[torch.Tensor, "N D"]) -> Float[torch.Tensor, "N D"]:
    """scatter_reduce with mean, the destination index expanded over the feature axis."""
    out = torch.zeros_like(x)
    return out.scatter_reduce(0, dst[:, None].expand_as(msg), msg, "mean", include_self=False)


def scatter_mean_torch_bug(msg: Float[torch.Tensor, "E D"], dst: Int[torch.Tensor, "E"],
                           x: Float[torch.Tensor, "N D"]) -> Float[torch.Tensor, "N D"]:
    out = torch.zeros_like(x)
    return out.scatter_reduce(0, dst[:, None].expand_as(x), msg, "mean",  # BUG: [N, D]
                              include_self=False)


def gnn_segment_jax(x: Float[jax.Array, "N D"], src: Int[jax.Array, "E"],
                    dst: Int[jax.Array, "E"], a: Float[jax.Array, "D"]
                    ) -> Float[jax.Array, "N D"]:
    """jraph-style attention: segment_max / segment_sum softmax over incoming edges."""
    N = x.shape[0]
    s = x[src] @ a + x[dst] @ a
    s = jnp.exp(s - jax.ops.segment_max(s, dst, num_segments=N)[dst])
    alpha = s / jax.ops.segment_sum(s, dst, num_segments=N)[dst]
    return jax.ops.segment_sum(alpha[:, None] * x[src], dst, num_segments=N)


def gnn_segment_jax_bug(x: Float[jax.Array, "N D"], src: Int[jax.Array, "E"],
                        dst: Int[jax.Array, "E"], a: Float[jax.Array, "D"]
                        ) -> Float[jax.Array, "N D"]:
    N = x.shape[0]
    s = x[src] @ a + x[dst] @ a
    s = jnp.exp(s - jax.ops.segment_max(s, dst, num_segments=N)[dst])
    alpha = s / jax.ops.segment_sum(s, dst, num_segments=N)[dst]
    return jax.ops.segment_sum(alpha * x[src], dst, num_segments=N)  # BUG: [E] * [E, D]


# -- PPO and GAE -----------------------------------------------------------------------------------


def ppo_loss(logp: Float[torch.Tensor, "B"], logp_old: Float[torch.Tensor, "B"],
             adv: Float[torch.Tensor, "B"], values: Float[torch.Tensor, "B 1"],
             returns: Float[torch.Tensor, "B"]) -> Float[torch.Tensor, ""]:
    """The clipped surrogate plus a value loss on the critic's [B, 1] head, squeezed."""
    ratio = torch.exp(logp - logp_old)
    s1 = ratio * adv
    s2 = torch.clamp(ratio, 0.8, 1.2) * adv
    v_loss = ((values.squeeze(-1) - returns) ** 2).mean()
    return -torch.min(s1, s2).mean() + 0.5 * v_loss


def ppo_loss_bug(logp: Float[torch.Tensor, "B"], logp_old: Float[torch.Tensor, "B"],
                 adv: Float[torch.Tensor, "B"], values: Float[torch.Tensor, "B 1"],
                 returns: Float[torch.Tensor, "B"]) -> Float[torch.Tensor, ""]:
    ratio = torch.exp(logp - logp_old)
    s1 = ratio * adv
    s2 = torch.clamp(ratio, 0.8, 1.2) * adv
    v_loss = ((values - returns) ** 2).mean()  # BUG: [B, 1] - [B] is [B, B]
    return -torch.min(s1, s2).mean() + 0.5 * v_loss


def gae_envs(rewards: Float[np.ndarray, "T N"], values: Float[np.ndarray, "T N"],
             dones: Float[np.ndarray, "T N"], next_value: Float[np.ndarray, "N"],
             next_done: Float[np.ndarray, "N"], gamma: float = 0.99, lam: float = 0.95
             ) -> Float[np.ndarray, "T N"]:
    """CleanRL's GAE over vectorised envs: the bootstrap from next_value at the last step,
    from the following row otherwise, each advantage row assigned in reversed(range(T))."""
    T = rewards.shape[0]
    adv = np.zeros_like(rewards)
    last = np.zeros(rewards.shape[1])
    for t in reversed(range(T)):
        if t == T - 1:
            nonterminal, nextv = 1.0 - next_done, next_value
        else:
            nonterminal, nextv = 1.0 - dones[t + 1], values[t + 1]
        delta = rewards[t] + gamma * nextv * nonterminal - values[t]
        last = delta + gamma * lam * nonterminal * last
        adv[t] = last
    return adv


def gae_envs_bug(rewards: Float[np.ndarray, "T N"], values: Float[np.ndarray, "T N"],
                 dones: Float[np.ndarray, "T N"], next_value: Float[np.ndarray, "N"],
                 next_done: Float[np.ndarray, "N"], gamma: float = 0.99, lam: float = 0.95
                 ) -> Float[np.ndarray, "T N"]:
    T = rewards.shape[0]
    adv = np.zeros_like(rewards)
    last = np.zeros(rewards.shape[1])
    for t in reversed(range(T)):
        if t == T - 1:
            nonterminal, nextv = 1.0 - next_done, next_value
        else:
            nonterminal, nextv = 1.0 - dones, values[t + 1]  # BUG: all rows
        delta = rewards[t] + gamma * nextv * nonterminal - values[t]
        last = delta + gamma * lam * nonterminal * last
        adv[t] = last
    return adv


def gae_scan_jax(rewards: Float[jax.Array, "T"], values: Float[jax.Array, "T+1"],
                 dones: Float[jax.Array, "T"], gamma: float = 0.99, lam: float = 0.95
                 ) -> Float[jax.Array, "T"]:
    """PureJaxRL-style GAE: deltas vectorised, then a reverse lax.scan."""
    deltas = rewards + gamma * values[1:] * (1 - dones) - values[:-1]

    def step(carry, inp):
        d, done = inp
        carry = d + gamma * lam * (1 - done) * carry
        return carry, carry
    _, adv = lax.scan(step, jnp.zeros(()), (deltas, dones), reverse=True)
    return adv


def gae_scan_jax_bug(rewards: Float[jax.Array, "T"], values: Float[jax.Array, "T+1"],
                     dones: Float[jax.Array, "T"], gamma: float = 0.99, lam: float = 0.95
                     ) -> Float[jax.Array, "T"]:
    deltas = rewards + gamma * values[1:] * (1 - dones) - values  # BUG: T + 1 values

    def step(carry, inp):
        d, done = inp
        carry = d + gamma * lam * (1 - done) * carry
        return carry, carry
    _, adv = lax.scan(step, jnp.zeros(()), (deltas, dones), reverse=True)
    return adv


# -- Swin windows -------------------------------------------------------------------------------


def swin_roundtrip(x: Float[torch.Tensor, "B 7*M 7*N C"], Wq: Float[torch.Tensor, "C C"]
                   ) -> Float[torch.Tensor, "B 7*M 7*N C"]:
    """Window partition by view/permute, attention within each 7x7 window, window reverse."""
    B, H, W, C = x.shape
    win = x.view(B, H // 7, 7, W // 7, 7, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, 49, C)
    attn = torch.softmax((win @ Wq) @ win.transpose(1, 2) / C ** 0.5, dim=-1)
    out = (attn @ win).view(B, H // 7, W // 7, 7, 7, C)
    return out.permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, C)


def swin_roundtrip_bug(x: Float[torch.Tensor, "B 7*M 7*N C"], Wq: Float[torch.Tensor, "C C"]
                       ) -> Float[torch.Tensor, "B 7*M 7*N C"]:
    B, H, W, C = x.shape
    win = x.view(B, H // 7, 7, W // 7, 7, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, 49, C)
    attn = torch.softmax((win @ Wq) @ win.transpose(1, 2) / C ** 0.5, dim=-1)
    out = (attn @ win).view(B, H // 7, W // 7, 7, 7, C)
    return out.permute(0, 1, 3, 2, 4, 5).reshape(B, W, H, C)  # BUG: W before H


def swin_rel_bias(attn: Float[torch.Tensor, "G K 49 49"], table: Float[torch.Tensor, "169 K"]
                  ) -> Float[torch.Tensor, "G K 49 49"]:
    """The relative position index of a 7x7 window (meshgrid, flatten, pairwise offsets
    shifted to be non-negative), the bias table gathered and moved heads-first."""
    coords = torch.stack(torch.meshgrid(torch.arange(7), torch.arange(7), indexing="ij"))
    flat = coords.flatten(1)
    rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0) + 6
    index = rel[:, :, 0] * 13 + rel[:, :, 1]
    bias = table[index.view(-1)].view(49, 49, -1).permute(2, 0, 1)
    return attn + bias[None]


def swin_rel_bias_bug(attn: Float[torch.Tensor, "G K 49 49"],
                      table: Float[torch.Tensor, "169 K"]) -> Float[torch.Tensor, "G K 49 49"]:
    coords = torch.stack(torch.meshgrid(torch.arange(7), torch.arange(7), indexing="ij"))
    flat = coords.flatten(1)
    rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0) + 6
    index = rel[:, :, 0] * 13 + rel[:, :, 1]
    bias = table[index.view(-1)].view(49, 49, -1)  # BUG: heads last
    return attn + bias[None]


# -- mixture of experts -------------------------------------------------------------------------


def moe_capacity(x: Float[torch.Tensor, "2*S D"], Wg: Float[torch.Tensor, "D 4"],
                 We: Float[torch.Tensor, "4 D D"]) -> Float[torch.Tensor, "2*S D"]:
    """GShard/Switch-style top-2 routing to 4 experts with capacity S (2 * tokens / 4): each
    token's position in its expert by a cumulative sum, overflow dropped, dispatch and combine
    tensors [tokens, experts, capacity] contracted by einsum."""
    T, S = x.shape[0], x.shape[0] // 2
    probs = torch.softmax(x @ Wg, dim=-1)
    gate, idx = probs.topk(2, dim=-1)
    mask = F.one_hot(idx, 4).float()
    pos = (torch.cumsum(mask.reshape(-1, 4), dim=0).reshape(T, 2, 4) - 1) * mask
    keep = mask * (pos < S).float()
    loc = (pos * keep).sum(-1).long()
    combine = ((gate[..., None] * keep)[..., None] * F.one_hot(loc, S)[:, :, None, :]).sum(1)
    expert_in = torch.einsum("tec,td->ecd", (combine > 0).float(), x)
    expert_out = torch.einsum("ecd,edh->ech", expert_in, We)
    return torch.einsum("tec,ech->th", combine, expert_out)


def moe_capacity_bug(x: Float[torch.Tensor, "2*S D"], Wg: Float[torch.Tensor, "D 4"],
                     We: Float[torch.Tensor, "4 D D"]) -> Float[torch.Tensor, "2*S D"]:
    T, S = x.shape[0], x.shape[0] // 2
    probs = torch.softmax(x @ Wg, dim=-1)
    gate, idx = probs.topk(2, dim=-1)
    mask = F.one_hot(idx, 4).float()
    pos = (torch.cumsum(mask.reshape(-1, 4), dim=0).reshape(T, 2, 4) - 1) * mask
    keep = mask * (pos < S).float()
    loc = (pos * keep).sum(-1).long()
    combine = ((gate * keep)[..., None] * F.one_hot(loc, S)[:, :, None, :]).sum(1)  # BUG
    expert_in = torch.einsum("tec,td->ecd", (combine > 0).float(), x)
    expert_out = torch.einsum("ecd,edh->ech", expert_in, We)
    return torch.einsum("tec,ech->th", combine, expert_out)


def moe_topk_jax(x: Float[jax.Array, "T D"], Wg: Float[jax.Array, "D E"],
                 We: Float[jax.Array, "E D H"]) -> Float[jax.Array, "T H"]:
    """Dense-compute top-2 MoE: lax.top_k gates renormalised, one_hot combine weights."""
    gates, idx = lax.top_k(jax.nn.softmax(x @ Wg, axis=-1), 2)
    gates = gates / gates.sum(-1, keepdims=True)
    combine = (jax.nn.one_hot(idx, Wg.shape[1]) * gates[..., None]).sum(1)
    return jnp.einsum("te,eth->th", combine, jnp.einsum("td,edh->eth", x, We))


def moe_topk_jax_bug(x: Float[jax.Array, "T D"], Wg: Float[jax.Array, "D E"],
                     We: Float[jax.Array, "E D H"]) -> Float[jax.Array, "T H"]:
    gates, idx = lax.top_k(jax.nn.softmax(x @ Wg, axis=-1), 2)
    gates = gates / gates.sum(-1, keepdims=True)
    combine = (jax.nn.one_hot(idx, Wg.shape[1]) * gates[:, None]).sum(1)  # BUG: [T, 1, 2]
    return jnp.einsum("te,eth->th", combine, jnp.einsum("td,edh->eth", x, We))


# -- Perceiver latents, selective scan, RWKV ----------------------------------------------------


def perceiver_cross(latents: Float[torch.Tensor, "L D"], data: Float[torch.Tensor, "B M C"],
                    Wq: Float[torch.Tensor, "D K"], Wk: Float[torch.Tensor, "C K"],
                    Wv: Float[torch.Tensor, "C K"], Wo: Float[torch.Tensor, "K D"]
                    ) -> Float[torch.Tensor, "B L D"]:
    """Learned latents query the inputs once; a residual on the latents, broadcast over B."""
    q = latents @ Wq
    k, v = data @ Wk, data @ Wv
    attn = torch.softmax(torch.einsum("lk,bmk->blm", q, k) / q.shape[-1] ** 0.5, dim=-1)
    return latents + torch.einsum("blm,bmk->blk", attn, v) @ Wo


def perceiver_cross_bug(latents: Float[torch.Tensor, "L D"], data: Float[torch.Tensor, "B M C"],
                        Wq: Float[torch.Tensor, "D K"], Wk: Float[torch.Tensor, "C K"],
                        Wv: Float[torch.Tensor, "C K"], Wo: Float[torch.Tensor, "K D"]
                        ) -> Float[torch.Tensor, "B L D"]:
    q = latents @ Wq
    k, v = data @ Wk, data @ Wv
    attn = torch.softmax(torch.einsum("lk,bmk->blm", q, k) / q.shape[-1] ** 0.5, dim=-1)
    return data + torch.einsum("blm,bmk->blk", attn, v) @ Wo  # BUG: residual on the inputs


def selective_scan(x: Float[torch.Tensor, "B L D"], delta: Float[torch.Tensor, "B L D"],
                   A: Float[torch.Tensor, "D N"], Bm: Float[torch.Tensor, "B L N"],
                   C: Float[torch.Tensor, "B L N"]) -> Float[torch.Tensor, "B L D"]:
    """Mamba's reference scan: discretised A and B*x, a Python loop over L, y = h C."""
    dA = torch.exp(delta[..., None] * A)
    dBx = delta[..., None] * Bm[:, :, None, :] * x[..., None]
    h = x.new_zeros(x.shape[0], x.shape[2], A.shape[1])
    ys = []
    for i in range(x.shape[1]):
        h = dA[:, i] * h + dBx[:, i]
        ys.append((h @ C[:, i, :, None])[..., 0])
    return torch.stack(ys, dim=1)


def selective_scan_bug(x: Float[torch.Tensor, "B L D"], delta: Float[torch.Tensor, "B L D"],
                       A: Float[torch.Tensor, "D N"], Bm: Float[torch.Tensor, "B L N"],
                       C: Float[torch.Tensor, "B L N"]) -> Float[torch.Tensor, "B L D"]:
    dA = torch.exp(delta[..., None] * A)
    dBx = delta[..., None] * Bm[:, :, :, None] * x[..., None]  # BUG: N where D goes
    h = x.new_zeros(x.shape[0], x.shape[2], A.shape[1])
    ys = []
    for i in range(x.shape[1]):
        h = dA[:, i] * h + dBx[:, i]
        ys.append((h @ C[:, i, :, None])[..., 0])
    return torch.stack(ys, dim=1)


def rwkv_wkv(k: Float[torch.Tensor, "B T C"], v: Float[torch.Tensor, "B T C"],
             r: Float[torch.Tensor, "B T C"], w: Float[torch.Tensor, "C"],
             u: Float[torch.Tensor, "C"]) -> Float[torch.Tensor, "B T C"]:
    """RWKV-4's numerically stable WKV recurrence (running numerator, denominator and max
    exponent per channel), gated by sigmoid(r)."""
    B, T, C = k.shape
    aa, bb, pp = torch.zeros(B, C), torch.zeros(B, C), torch.full((B, C), -1e38)
    outs = []
    for t in range(T):
        kk, vv = k[:, t], v[:, t]
        ww = u + kk
        p = torch.maximum(pp, ww)
        e1, e2 = torch.exp(pp - p), torch.exp(ww - p)
        outs.append((e1 * aa + e2 * vv) / (e1 * bb + e2))
        ww = pp - torch.exp(w)
        p = torch.maximum(ww, kk)
        e1, e2 = torch.exp(ww - p), torch.exp(kk - p)
        aa, bb, pp = e1 * aa + e2 * vv, e1 * bb + e2, p
    return torch.sigmoid(r) * torch.stack(outs, dim=1)


def rwkv_wkv_bug(k: Float[torch.Tensor, "B T C"], v: Float[torch.Tensor, "B T C"],
                 r: Float[torch.Tensor, "B T C"], w: Float[torch.Tensor, "C"],
                 u: Float[torch.Tensor, "C"]) -> Float[torch.Tensor, "B T C"]:
    B, T, C = k.shape
    aa, bb, pp = torch.zeros(B, C), torch.zeros(B, C), torch.full((B, C), -1e38)
    outs = []
    for t in range(T):
        kk, vv = k[:, t], v[:, t]
        ww = u + kk
        p = torch.maximum(pp, ww)
        e1, e2 = torch.exp(pp - p), torch.exp(ww - p)
        outs.append((e1 * aa + e2 * vv) / (e1 * bb + e2))
        ww = pp - torch.exp(w)
        p = torch.maximum(ww, kk)
        e1, e2 = torch.exp(ww - p), torch.exp(kk - p)
        aa, bb, pp = e1 * aa + e2 * vv, e1 * bb + e2, p
    return torch.sigmoid(r) * torch.stack(outs, dim=0)  # BUG: time first


# -- segmentation losses and flow cost volumes --------------------------------------------------


def multiclass_dice(logits: Float[torch.Tensor, "B K H W"], target: Int[torch.Tensor, "B H W"]
                    ) -> Float[torch.Tensor, "K"]:
    """Per-class soft dice: softmax over classes, one_hot targets moved channels-first."""
    probs = torch.softmax(logits, dim=1)
    onehot = F.one_hot(target, logits.shape[1]).permute(0, 3, 1, 2).float()
    inter = (probs * onehot).sum((0, 2, 3))
    return 1 - (2 * inter + 1) / (probs.sum((0, 2, 3)) + onehot.sum((0, 2, 3)) + 1)


def multiclass_dice_bug(logits: Float[torch.Tensor, "B K H W"],
                        target: Int[torch.Tensor, "B H W"]) -> Float[torch.Tensor, "K"]:
    probs = torch.softmax(logits, dim=1)
    onehot = F.one_hot(target, logits.shape[1]).float()  # BUG: channels last
    inter = (probs * onehot).sum((0, 2, 3))
    return 1 - (2 * inter + 1) / (probs.sum((0, 2, 3)) + onehot.sum((0, 2, 3)) + 1)


def soft_dice_np(pred: Float[np.ndarray, "B H W"], target: Float[np.ndarray, "B H W"]
                 ) -> Float[np.ndarray, "B"]:
    """Binary soft dice per image."""
    inter = (pred * target).sum(axis=(1, 2))
    return 1 - (2 * inter + 1e-6) / (pred.sum(axis=(1, 2)) + target.sum(axis=(1, 2)) + 1e-6)


def soft_dice_np_bug(pred: Float[np.ndarray, "B H W"], target: Float[np.ndarray, "B H W"]
                     ) -> Float[np.ndarray, "B"]:
    inter = (pred * target).sum(axis=(0, 1))  # BUG: over batch and rows
    return 1 - (2 * inter + 1e-6) / (pred.sum(axis=(1, 2)) + target.sum(axis=(1, 2)) + 1e-6)


def focal_seg(logits: Float[torch.Tensor, "B K H W"], target: Int[torch.Tensor, "B H W"]
              ) -> Float[torch.Tensor, "B H W"]:
    """Per-pixel multi-class focal loss: log-softmax gathered at the target class."""
    logp = F.log_softmax(logits, dim=1).gather(1, target[:, None]).squeeze(1)
    return -((1 - logp.exp()) ** 2) * logp


def focal_seg_bug(logits: Float[torch.Tensor, "B K H W"], target: Int[torch.Tensor, "B H W"]
                  ) -> Float[torch.Tensor, "B H W"]:
    logp = F.log_softmax(logits, dim=1).gather(1, target[:, None])  # BUG: kept [B, 1, H, W]
    return -((1 - logp.exp()) ** 2) * logp


def local_cost_volume(f1: Float[torch.Tensor, "B C H W"], f2: Float[torch.Tensor, "B C H W"]
                      ) -> Float[torch.Tensor, "B 49 H W"]:
    """PWC-Net's correlation within a radius of 3: f2 padded, 7x7 shifted windows."""
    H, W = f1.shape[2], f1.shape[3]
    f2p = F.pad(f2, (3, 3, 3, 3))
    costs = [(f1 * f2p[:, :, dy:dy + H, dx:dx + W]).mean(1)
             for dy in range(7) for dx in range(7)]
    return torch.stack(costs, dim=1)


def local_cost_volume_bug(f1: Float[torch.Tensor, "B C H W"], f2: Float[torch.Tensor, "B C H W"]
                          ) -> Float[torch.Tensor, "B 49 H W"]:
    H = f1.shape[2]
    f2p = F.pad(f2, (3, 3, 3, 3))
    costs = [(f1 * f2p[:, :, dy:dy + H, dx:dx + H]).mean(1)  # BUG: H wide
             for dy in range(7) for dx in range(7)]
    return torch.stack(costs, dim=1)


def all_pairs_corr(f1: Float[torch.Tensor, "B C H W"], f2: Float[torch.Tensor, "B C H W"]
                   ) -> Float[torch.Tensor, "B*H*W 1 H W"]:
    """RAFT's all-pairs correlation, one [H, W] map per source pixel for the pyramid."""
    B, C, H, W = f1.shape
    corr = f1.view(B, C, H * W).transpose(1, 2) @ f2.view(B, C, H * W)
    return (corr / C ** 0.5).reshape(B * H * W, 1, H, W)


def all_pairs_corr_bug(f1: Float[torch.Tensor, "B C H W"], f2: Float[torch.Tensor, "B C H W"]
                       ) -> Float[torch.Tensor, "B*H*W 1 H W"]:
    B, C, H, W = f1.shape
    corr = f1.view(B, C, H * W) @ f2.view(B, C, H * W)  # BUG: not transposed
    return (corr / C ** 0.5).reshape(B * H * W, 1, H, W)


# -- classic NumPy: k-means++, PCA, Kalman --------------------------------------------------------


def kmeanspp_init(X: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "4 D"]:
    """k-means++ seeding: each next centre drawn with probability by squared distance to
    the nearest centre chosen so far."""
    rng = np.random.default_rng(0)
    centers = [X[rng.integers(X.shape[0])]]
    for _ in range(3):
        C = np.stack(centers)
        d2 = ((X[:, None, :] - C[None, :, :]) ** 2).sum(-1).min(axis=1)
        centers.append(X[rng.choice(X.shape[0], p=d2 / d2.sum())])
    return np.stack(centers)


def kmeanspp_init_bug(X: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "4 D"]:
    rng = np.random.default_rng(0)
    centers = [X[rng.integers(X.shape[0])]]
    for _ in range(3):
        C = np.stack(centers)
        d2 = ((X[:, None, :] - C[None, :, :]) ** 2).sum(-1).min(axis=0)  # BUG: per centre
        centers.append(X[rng.choice(X.shape[0], p=d2 / d2.sum())])
    return np.stack(centers)


def pca_svd(X: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "N 2"]:
    """PCA by the thin SVD of the centred data: the first two principal scores."""
    Xc = X - X.mean(axis=0)
    _, _, Vt = np.linalg.svd(Xc, full_matrices=False)
    return Xc @ Vt[:2].T


def pca_svd_bug(X: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "N 2"]:
    Xc = X - X.mean(axis=0)
    _, _, Vt = np.linalg.svd(Xc, full_matrices=False)
    return Xc @ Vt[:, :2]  # BUG: rows of Vt are the components; fails where N < D


def pca_scores_us(X: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "N 2"]:
    """The same scores as U * S (sklearn's fit_transform)."""
    U, S, _ = np.linalg.svd(X - X.mean(axis=0), full_matrices=False)
    return U[:, :2] * S[:2]


def pca_scores_us_bug(X: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "N 2"]:
    U, S, _ = np.linalg.svd(X - X.mean(axis=0), full_matrices=False)
    return U[:, :2] * S  # BUG: all min(N, D) singular values


def kalman_step(x: Float[np.ndarray, "S"], P: Float[np.ndarray, "S S"],
                z: Float[np.ndarray, "M"], Fm: Float[np.ndarray, "S S"],
                H: Float[np.ndarray, "M S"], Q: Float[np.ndarray, "S S"],
                R: Float[np.ndarray, "M M"]) -> tuple[Float[np.ndarray, "S"],
                                                      Float[np.ndarray, "S S"]]:
    """Predict and update: the gain K = P H^T S^-1 by a solve of the innovation covariance."""
    x = Fm @ x
    P = Fm @ P @ Fm.T + Q
    y = z - H @ x
    Sm = H @ P @ H.T + R
    K = np.linalg.solve(Sm, H @ P).T
    return x + K @ y, (np.eye(x.shape[0]) - K @ H) @ P


def kalman_step_bug(x: Float[np.ndarray, "S"], P: Float[np.ndarray, "S S"],
                    z: Float[np.ndarray, "M"], Fm: Float[np.ndarray, "S S"],
                    H: Float[np.ndarray, "M S"], Q: Float[np.ndarray, "S S"],
                    R: Float[np.ndarray, "M M"]) -> tuple[Float[np.ndarray, "S"],
                                                          Float[np.ndarray, "S S"]]:
    x = Fm @ x
    P = Fm @ P @ Fm.T + Q
    y = z - H @ x
    Sm = H @ P @ H.T + R
    K = np.linalg.solve(Sm, H @ P)  # BUG: [M, S], not transposed
    return x + K @ y, (np.eye(x.shape[0]) - K @ H) @ P


# -- JAX RNNs, S4, ViT patching -----------------------------------------------------------------


def vmap_scan_rnn(xs: Float[jax.Array, "B T D"], h0: Float[jax.Array, "H"],
                  Wx: Float[jax.Array, "D H"], Wh: Float[jax.Array, "H H"]
                  ) -> Float[jax.Array, "B T H"]:
    """An Elman RNN over one sequence by lax.scan, vmapped over the batch."""
    def run(seq):
        def step(h, x):
            h = jnp.tanh(x @ Wx + h @ Wh)
            return h, h
        return lax.scan(step, h0, seq)[1]
    return jax.vmap(run)(xs)


def vmap_scan_rnn_bug(xs: Float[jax.Array, "B T D"], h0: Float[jax.Array, "H"],
                      Wx: Float[jax.Array, "D H"], Wh: Float[jax.Array, "H H"]
                      ) -> Float[jax.Array, "B T H"]:
    def run(seq):
        def step(h, x):
            h = jnp.tanh(x @ Wx + h @ Wh)
            return h, h
        return lax.scan(step, h0, seq)[1]
    return jax.vmap(run, in_axes=1)(xs)  # BUG: maps over time


def gru_scan(xs: Float[jax.Array, "T B D"], h0: Float[jax.Array, "B H"],
             Wi: Float[jax.Array, "D 3*H"], Wh: Float[jax.Array, "H 3*H"]
             ) -> Float[jax.Array, "B H"]:
    """A GRU cell under lax.scan, the gates split in three from fused projections."""
    def step(h, x):
        r_i, z_i, n_i = jnp.split(x @ Wi, 3, axis=-1)
        r_h, z_h, n_h = jnp.split(h @ Wh, 3, axis=-1)
        r, z = jax.nn.sigmoid(r_i + r_h), jax.nn.sigmoid(z_i + z_h)
        n = jnp.tanh(n_i + r * n_h)
        return (1 - z) * n + z * h, None
    return lax.scan(step, h0, xs)[0]


def gru_scan_bug(xs: Float[jax.Array, "T B D"], h0: Float[jax.Array, "B H"],
                 Wi: Float[jax.Array, "D 3*H"], Wh: Float[jax.Array, "H 3*H"]
                 ) -> Float[jax.Array, "B H"]:
    def step(h, x):
        r_i, z_i, n_i = jnp.split(x @ Wi, 3, axis=0)  # BUG: splits the batch
        r_h, z_h, n_h = jnp.split(h @ Wh, 3, axis=-1)
        r, z = jax.nn.sigmoid(r_i + r_h), jax.nn.sigmoid(z_i + z_h)
        n = jnp.tanh(n_i + r * n_h)
        return (1 - z) * n + z * h, None
    return lax.scan(step, h0, xs)[0]


def s4_recurrent(A: Float[jax.Array, "N N"], Bv: Float[jax.Array, "N 1"],
                 Cv: Float[jax.Array, "1 N"], u: Float[jax.Array, "L"], dt: float = 0.1
                 ) -> Float[jax.Array, "L"]:
    """S4's bilinear discretisation, then the recurrent view as a scan over the inputs."""
    eye = jnp.eye(A.shape[0])
    BL = jnp.linalg.inv(eye - dt / 2.0 * A)
    Ab, Bb = BL @ (eye + dt / 2.0 * A), (BL * dt) @ Bv

    def step(x, uk):
        x = Ab @ x + Bb * uk
        return x, (Cv @ x)[0, 0]
    return lax.scan(step, jnp.zeros((A.shape[0], 1)), u)[1]


def s4_recurrent_bug(A: Float[jax.Array, "N N"], Bv: Float[jax.Array, "N 1"],
                     Cv: Float[jax.Array, "1 N"], u: Float[jax.Array, "L"], dt: float = 0.1
                     ) -> Float[jax.Array, "L"]:
    eye = jnp.eye(A.shape[0])
    BL = jnp.linalg.inv(eye - dt / 2.0 * A)
    Ab, Bb = BL @ (eye + dt / 2.0 * A), (BL * dt) @ Bv

    def step(x, uk):
        x = Ab @ x + Bb * uk
        return x, (Cv @ x)[0, 0]
    return lax.scan(step, jnp.zeros((A.shape[0],)), u)[1]  # BUG: a vector state


def vit_patch_jax(img: Float[jax.Array, "B 4*H 4*W C"], W: Float[jax.Array, "16*C D"],
                  pos: Float[jax.Array, "H*W D"]) -> Float[jax.Array, "B H*W D"]:
    """ViT patch embedding with einops: 4x4 patches flattened, projected, position added."""
    p = einops.rearrange(img, "b (h p1) (w p2) c -> b (h w) (p1 p2 c)", p1=4, p2=4)
    return p @ W + pos[None]


def vit_patch_jax_bug(img: Float[jax.Array, "B 4*H 4*W C"], W: Float[jax.Array, "16*C D"],
                      pos: Float[jax.Array, "H*W D"]) -> Float[jax.Array, "B H*W D"]:
    p = einops.rearrange(img, "b (h p1) (w p2) c -> b (h w) (p1 p2) c", p1=4, p2=4)  # BUG
    return p @ W + pos[None]


def vit_unpatch_torch(tokens: Float[torch.Tensor, "B H*W 16*C"], img: Float[torch.Tensor,
                      "B C 4*H 4*W"]) -> Float[torch.Tensor, "B C 4*H 4*W"]:
    """MAE's unpatchify: tokens back to an image of the reference's size, for the loss."""
    h, w = img.shape[2] // 4, img.shape[3] // 4
    return einops.rearrange(tokens, "b (h w) (p1 p2 c) -> b c (h p1) (w p2)", h=h, w=w,
                            p1=4, p2=4)


def vit_unpatch_torch_bug(tokens: Float[torch.Tensor, "B H*W 16*C"], img: Float[torch.Tensor,
                          "B C 4*H 4*W"]) -> Float[torch.Tensor, "B C 4*H 4*W"]:
    h, w = img.shape[2] // 4, img.shape[3] // 4
    return einops.rearrange(tokens, "b (h w) (p1 p2 c) -> b c (h p1) (w p2)", h=w, w=h,  # BUG
                            p1=4, p2=4)


# -- more samplers, embeddings, routing and scans -------------------------------------------


def ddim_timesteps(abar: Float[np.ndarray, "T"], x: Float[np.ndarray, "S D"]
                   ) -> Float[np.ndarray, "S"]:
    """diffusers' DDIM "leading" spacing: S steps of T // S, largest first."""
    T, S = abar.shape[0], x.shape[0]
    ts = (np.arange(0, S) * (T // S)).round()[::-1].astype(np.int64)
    return abar[ts]


def ddim_timesteps_bug(abar: Float[np.ndarray, "T"], x: Float[np.ndarray, "S D"]
                       ) -> Float[np.ndarray, "S"]:
    T, S = abar.shape[0], x.shape[0]
    ts = np.arange(0, T, T // S)[::-1]  # BUG: ceil(T / (T // S)) steps, not S
    return abar[ts]


def extract_broadcast(a: Float[torch.Tensor, "T"], t: Int[torch.Tensor, "B"],
                      x: Float[torch.Tensor, "B C H W"]) -> Float[torch.Tensor, "B C H W"]:
    """The ``extract`` helper of public DDPM code: a gather reshaped to [B, 1, 1, 1] by a
    tuple of ones as long as the image's other axes."""
    b, *_ = t.shape
    out = a.gather(-1, t)
    return out.reshape(b, *((1,) * (len(x.shape) - 1))) * x


def extract_broadcast_bug(a: Float[torch.Tensor, "T"], t: Int[torch.Tensor, "B"],
                          x: Float[torch.Tensor, "B C H W"]) -> Float[torch.Tensor, "B C H W"]:
    b, *_ = t.shape
    out = a.gather(-1, t)
    return out.reshape(b, *((1,) * (len(x.shape) - 2))) * x  # BUG: one unit axis short


def unet_resblock_emb(h: Float[torch.Tensor, "B 32*G X Y"], emb: Float[torch.Tensor, "B E"],
                      W: Float[torch.Tensor, "E 32*G"]) -> Float[torch.Tensor, "B 32*G X Y"]:
    """GroupNorm(32) and SiLU, the projected time embedding added per channel."""
    return F.silu(F.group_norm(h, 32)) + (emb @ W)[:, :, None, None]


def unet_resblock_emb_bug(h: Float[torch.Tensor, "B 32*G X Y"], emb: Float[torch.Tensor, "B E"],
                          W: Float[torch.Tensor, "E 32*G"]) -> Float[torch.Tensor, "B 32*G X Y"]:
    return F.silu(F.group_norm(h, 32)) + (emb @ W)[:, None, None]  # BUG: channels last


def upsample_skip(x: Float[torch.Tensor, "B C H W"], skip: Float[torch.Tensor, "B D 2*H 2*W"]
                  ) -> Float[torch.Tensor, "B C+D 2*H 2*W"]:
    """The U-Net decoder: nearest upsampling, the encoder's skip joined on channels."""
    return torch.cat([F.interpolate(x, scale_factor=2, mode="nearest"), skip], dim=1)


def upsample_skip_bug(x: Float[torch.Tensor, "B C H W"], skip: Float[torch.Tensor, "B D 2*H 2*W"]
                      ) -> Float[torch.Tensor, "B C+D 2*H 2*W"]:
    return torch.cat([F.interpolate(x, scale_factor=2, mode="nearest"), skip], dim=0)  # BUG


def wav2vec_first_layer(wav: Float[torch.Tensor, "B L"], W1: Float[torch.Tensor, "C 1 10"]
                        ) -> Float[torch.Tensor, "B (L-10)//5+1 C"]:
    """wav2vec2's first conv at any length: floor((L - 10) / 5) + 1 frames."""
    return F.conv1d(wav[:, None], W1, stride=5).transpose(1, 2)


def wav2vec_first_layer_bug(wav: Float[torch.Tensor, "B L"], W1: Float[torch.Tensor, "C 1 10"]
                            ) -> Float[torch.Tensor, "B (L-10)//5+1 C"]:
    return F.conv1d(wav[:, None], W1, stride=5, padding=2).transpose(1, 2)  # BUG: padded


def bag_last_offset(idx: Int[torch.Tensor, "N"], offsets: Int[torch.Tensor, "B+1"],
                    table: Float[torch.Tensor, "V D"], w: Float[torch.Tensor, "N"]
                    ) -> Float[torch.Tensor, "B D"]:
    """TorchRec's KeyedJaggedTensor offsets end with the total: include_last_offset."""
    return F.embedding_bag(idx, table, offsets, mode="sum", per_sample_weights=w,
                           include_last_offset=True)


def bag_last_offset_bug(idx: Int[torch.Tensor, "N"], offsets: Int[torch.Tensor, "B+1"],
                        table: Float[torch.Tensor, "V D"], w: Float[torch.Tensor, "N"]
                        ) -> Float[torch.Tensor, "B D"]:
    return F.embedding_bag(idx, table, offsets, mode="sum", per_sample_weights=w)  # BUG


def mixtral_moe(x: Float[torch.Tensor, "T D"], Wg: Float[torch.Tensor, "D 4"],
                We: Float[torch.Tensor, "4 D D"]) -> Float[torch.Tensor, "T D"]:
    """HF Mixtral's sparse block: top-2 of 4 experts, the expert mask permuted expert-first,
    each expert's tokens found by torch.where and added back with index_add_."""
    w = torch.softmax(x @ Wg, dim=1)
    w, sel = torch.topk(w, 2, dim=-1)
    w = w / w.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(x)
    mask = F.one_hot(sel, num_classes=4).permute(2, 1, 0)
    for e in range(4):
        idx, top_x = torch.where(mask[e])
        cur = x[None, top_x].reshape(-1, x.shape[1])
        out.index_add_(0, top_x, (cur @ We[e]) * w[top_x, idx, None])
    return out


def mixtral_moe_bug(x: Float[torch.Tensor, "T D"], Wg: Float[torch.Tensor, "D 4"],
                    We: Float[torch.Tensor, "4 D D"]) -> Float[torch.Tensor, "T D"]:
    w = torch.softmax(x @ Wg, dim=1)
    w, sel = torch.topk(w, 2, dim=-1)
    w = w / w.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(x)
    mask = F.one_hot(sel, num_classes=4).permute(2, 1, 0)
    for e in range(4):
        idx, top_x = torch.where(mask[e])
        cur = x[None, top_x].reshape(-1, x.shape[1])
        out.index_add_(0, top_x, (cur @ We[e]) * w[top_x, idx])  # BUG: [n, D] * [n]
    return out


def rwkv_token_shift(x: Float[torch.Tensor, "B T C"], mix: Float[torch.Tensor, "C"]
                     ) -> Float[torch.Tensor, "B T C"]:
    """RWKV's ZeroPad2d((0, 0, 1, -1)) time shift: one step down, the last cropped."""
    xx = F.pad(x, (0, 0, 1, -1))
    return x * mix + xx * (1 - mix)


def rwkv_token_shift_bug(x: Float[torch.Tensor, "B T C"], mix: Float[torch.Tensor, "C"]
                         ) -> Float[torch.Tensor, "B T C"]:
    xx = F.pad(x, (0, 0, 1, 0))  # BUG: padded, not cropped
    return x * mix + xx * (1 - mix)


def ssd_segsum(x: Float[torch.Tensor, "B H T"]) -> Float[torch.Tensor, "B H T T"]:
    """Mamba2's stable segment sum: x repeated along a new axis, masked below the diagonal,
    a cumulative sum, -inf above it."""
    T = x.size(-1)
    x = einops.repeat(x, "... d -> ... d e", e=T)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)
    xs = torch.cumsum(x.masked_fill(~mask, 0), dim=-2)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=0)
    return xs.masked_fill(~mask, -torch.inf)


def ssd_segsum_bug(x: Float[torch.Tensor, "B H T"]) -> Float[torch.Tensor, "B H T T"]:
    T = x.size(-1)
    x = einops.repeat(x, "... d -> ... d e", e=T)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)
    xs = torch.cumsum(x.masked_fill(~mask, 0), dim=-2)
    mask = torch.tril(torch.ones(T, dtype=torch.bool), diagonal=0)  # BUG: a vector
    return xs.masked_fill(~mask, -torch.inf)


def ppo_categorical(logits: Float[torch.Tensor, "B A"], actions: Int[torch.Tensor, "B"],
                    old: Float[torch.Tensor, "B"]) -> Float[torch.Tensor, "B"]:
    """The ratio and entropy bonus from torch.distributions.Categorical."""
    dist = torch.distributions.Categorical(logits=logits)
    return torch.exp(dist.log_prob(actions) - old) - 0.01 * dist.entropy()


def ppo_categorical_bug(logits: Float[torch.Tensor, "B A"], actions: Int[torch.Tensor, "B"],
                        old: Float[torch.Tensor, "B"]) -> Float[torch.Tensor, "B"]:
    dist = torch.distributions.Categorical(logits=logits)
    return torch.exp(dist.log_prob(actions[:, None]) - old) - 0.01 * dist.entropy()  # BUG


def sac_squashed_logp(mu: Float[torch.Tensor, "B A"], log_std: Float[torch.Tensor, "B A"]
                      ) -> Float[torch.Tensor, "B"]:
    """SpinningUp's SAC: a reparameterised Normal sample, the tanh correction summed."""
    dist = torch.distributions.Normal(mu, log_std.exp())
    u = dist.rsample()
    logp = dist.log_prob(u).sum(-1)
    return logp - (2 * (math.log(2) - u - F.softplus(-2 * u))).sum(axis=1)


def sac_squashed_logp_bug(mu: Float[torch.Tensor, "B A"], log_std: Float[torch.Tensor, "B A"]
                          ) -> Float[torch.Tensor, "B"]:
    dist = torch.distributions.Normal(mu, log_std.exp())
    u = dist.rsample()
    logp = dist.log_prob(u).sum(-1)
    return logp - (2 * (math.log(2) - u - F.softplus(-2 * u)))  # BUG: not summed


def discount_cumsum(x: Float[np.ndarray, "T"], gamma: float = 0.99) -> Float[np.ndarray, "T"]:
    """SpinningUp's discounted returns by a reversed IIR filter."""
    return scipy.signal.lfilter([1], [1, float(-gamma)], x[::-1], axis=0)[::-1]


def discount_cumsum_bug(x: Float[np.ndarray, "T"], gamma: float = 0.99
                        ) -> Float[np.ndarray, "T"]:
    return scipy.signal.lfilter([1], [1, float(-gamma)], x[::-1], axis=0)[1:]  # BUG: dropped


def ppo_minibatches(obs: Float[np.ndarray, "B O"], adv: Float[np.ndarray, "B"],
                    W: Float[np.ndarray, "O"]) -> Float[np.ndarray, "4"]:
    """CleanRL's update: a permutation cut into 4 minibatches, advantages normalised in each."""
    inds = np.random.default_rng(0).permutation(obs.shape[0])
    mb = obs.shape[0] // 4
    losses = []
    for start in range(0, 4 * mb, mb):
        a = adv[inds[start:start + mb]]
        a = (a - a.mean()) / (a.std() + 1e-8)
        losses.append(-(obs[inds[start:start + mb]] @ W * a).mean())
    return np.array(losses)


def ppo_minibatches_bug(obs: Float[np.ndarray, "B O"], adv: Float[np.ndarray, "B"],
                        W: Float[np.ndarray, "O"]) -> Float[np.ndarray, "4"]:
    inds = np.random.default_rng(0).permutation(obs.shape[0])
    mb = obs.shape[0] // 4
    losses = []
    for start in range(0, obs.shape[0], mb):  # BUG: a fifth minibatch where 4 does not divide
        a = adv[inds[start:start + mb]]
        a = (a - a.mean()) / (a.std() + 1e-8)
        losses.append(-(obs[inds[start:start + mb]] @ W * a).mean())
    return np.array(losses)


def swin_shift_mask(x: Float[torch.Tensor, "7*M 7*N"]) -> Float[torch.Tensor, "M*N 49 49"]:
    """Swin's shifted-window attention mask: nine regions labelled by slices, partitioned
    into windows, -100 between tokens of different regions."""
    H, W = x.shape
    img_mask = torch.zeros((1, H, W, 1))
    cnt = 0
    for h in (slice(0, -7), slice(-7, -3), slice(-3, None)):
        for w in (slice(0, -7), slice(-7, -3), slice(-3, None)):
            img_mask[:, h, w, :] = cnt
            cnt += 1
    mw = img_mask.view(1, H // 7, 7, W // 7, 7, 1).permute(0, 1, 3, 2, 4, 5).reshape(-1, 49)
    am = mw.unsqueeze(1) - mw.unsqueeze(2)
    return am.masked_fill(am != 0, -100.0)


def swin_shift_mask_bug(x: Float[torch.Tensor, "7*M 7*N"]) -> Float[torch.Tensor, "M*N 49 49"]:
    H, W = x.shape
    img_mask = torch.zeros((1, H, W, 1))
    cnt = 0
    for h in (slice(0, -7), slice(-7, -3), slice(-3, None)):
        for w in (slice(0, -7), slice(-7, -3), slice(-3, None)):
            img_mask[:, h, w, :] = cnt
            cnt += 1
    mw = img_mask.view(1, H // 7, 7, W // 7, 7, 1).permute(0, 1, 3, 2, 4, 5).reshape(-1, 49)
    am = mw.unsqueeze(1) - mw  # BUG: [nW, 1, 49] - [nW, 49]
    return am.masked_fill(am != 0, -100.0)


def raft_warp_coords(img: Float[torch.Tensor, "B C H W"], flow: Float[torch.Tensor, "B 2 H W"]
                     ) -> Float[torch.Tensor, "B C H W"]:
    """RAFT's coords_grid plus flow, normalised to [-1, 1] for grid_sample."""
    B, _, H, W = img.shape
    ys, xs = torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij")
    coords = torch.stack([xs, ys], dim=0).float()[None].repeat(B, 1, 1, 1) + flow
    gx = 2 * coords[:, 0] / (W - 1) - 1
    gy = 2 * coords[:, 1] / (H - 1) - 1
    return F.grid_sample(img, torch.stack([gx, gy], dim=-1), align_corners=True)


def raft_warp_coords_bug(img: Float[torch.Tensor, "B C H W"],
                         flow: Float[torch.Tensor, "B 2 H W"]) -> Float[torch.Tensor, "B C H W"]:
    B, _, H, W = img.shape
    ys, xs = torch.meshgrid(torch.arange(H), torch.arange(W), indexing="xy")  # BUG: [W, H]
    coords = torch.stack([xs, ys], dim=0).float()[None].repeat(B, 1, 1, 1) + flow
    gx = 2 * coords[:, 0] / (W - 1) - 1
    gy = 2 * coords[:, 1] / (H - 1) - 1
    return F.grid_sample(img, torch.stack([gx, gy], dim=-1), align_corners=True)


def corr_pyramid(corr: Float[torch.Tensor, "N 1 H W"]) -> Float[torch.Tensor, "N 1 H//4 W//4"]:
    """RAFT's correlation pyramid: two 2x2 average poolings, each rounding down."""
    for _ in range(2):
        corr = F.avg_pool2d(corr, 2, stride=2)
    return corr


def corr_pyramid_bug(corr: Float[torch.Tensor, "N 1 H W"]
                     ) -> Float[torch.Tensor, "N 1 H//4 W//4"]:
    for _ in range(2):
        corr = F.avg_pool2d(corr, 2, stride=2, ceil_mode=True)  # BUG: rounds up
    return corr


def focal_alpha(logits: Float[torch.Tensor, "N K"], target: Int[torch.Tensor, "N"],
                alpha: Float[torch.Tensor, "K"]) -> Float[torch.Tensor, ""]:
    """Multi-class focal loss with a per-class alpha gathered at the target."""
    ce = F.cross_entropy(logits, target, reduction="none")
    return (alpha[target] * (1 - torch.exp(-ce)) ** 2 * ce).mean()


def focal_alpha_bug(logits: Float[torch.Tensor, "N K"], target: Int[torch.Tensor, "N"],
                    alpha: Float[torch.Tensor, "K"]) -> Float[torch.Tensor, ""]:
    ce = F.cross_entropy(logits, target, reduction="none")
    return (alpha * (1 - torch.exp(-ce)) ** 2 * ce).mean()  # BUG: [K] * [N]


def pca_cov(X: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "N 3"]:
    """PCA by eigh of the covariance of the columns, the three largest components."""
    Xc = X - X.mean(0)
    w, V = np.linalg.eigh(np.cov(Xc, rowvar=False))
    return Xc @ V[:, np.argsort(w)[::-1][:3]]


def pca_cov_bug(X: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "N 3"]:
    Xc = X - X.mean(0)
    w, V = np.linalg.eigh(np.cov(Xc))  # BUG: rows as the variables, [N, N]
    return Xc @ V[:, np.argsort(w)[::-1][:3]]


def rts_smoother(ms: Float[np.ndarray, "T S"], Ps: Float[np.ndarray, "T S S"],
                 A: Float[np.ndarray, "S S"], Q: Float[np.ndarray, "S S"]
                 ) -> Float[np.ndarray, "T S"]:
    """The Rauch-Tung-Striebel backward pass over reversed(range(T - 1))."""
    out = ms.copy()
    for t in reversed(range(ms.shape[0] - 1)):
        Pp = A @ Ps[t] @ A.T + Q
        G = Ps[t] @ A.T @ np.linalg.inv(Pp)
        out[t] = ms[t] + G @ (out[t + 1] - A @ ms[t])
    return out


def rts_smoother_bug(ms: Float[np.ndarray, "T S"], Ps: Float[np.ndarray, "T S S"],
                     A: Float[np.ndarray, "S S"], Q: Float[np.ndarray, "S S"]
                     ) -> Float[np.ndarray, "T S"]:
    out = ms.copy()
    for t in reversed(range(ms.shape[0] - 1)):
        Pp = A @ Ps[t] @ A.T + Q
        G = Ps[t] @ A.T @ np.linalg.inv(Pp)
        out[t] = ms[t] + G @ (out[t + 1] - A @ ms)  # BUG: all the means
    return out


def kalman_scan(zs: Float[jax.Array, "T M"], A: Float[jax.Array, "S S"],
                H: Float[jax.Array, "M S"], Q: Float[jax.Array, "S S"],
                R: Float[jax.Array, "M M"]) -> tuple[Float[jax.Array, "T S"],
                                                     Float[jax.Array, "T S S"]]:
    """A Kalman filter under lax.scan, the filtered means and covariances stacked."""
    def step(carry, z):
        m, P = carry
        m, P = A @ m, A @ P @ A.T + Q
        Sm = H @ P @ H.T + R
        K = jnp.linalg.solve(Sm, H @ P).T
        m, P = m + K @ (z - H @ m), P - K @ Sm @ K.T
        return (m, P), (m, P)
    return lax.scan(step, (jnp.zeros(A.shape[0]), jnp.eye(A.shape[0])), zs)[1]


def kalman_scan_bug(zs: Float[jax.Array, "T M"], A: Float[jax.Array, "S S"],
                    H: Float[jax.Array, "M S"], Q: Float[jax.Array, "S S"],
                    R: Float[jax.Array, "M M"]) -> tuple[Float[jax.Array, "T S"],
                                                         Float[jax.Array, "T S S"]]:
    def step(carry, z):
        m, P = carry
        m, P = A @ m, A @ P @ A.T + Q
        Sm = H @ P @ H.T + R
        K = jnp.linalg.solve(Sm, H @ P).T
        m, P = m + K @ (z - H @ m), P - K @ Sm @ K  # BUG: K not transposed
        return (m, P), (m, P)
    return lax.scan(step, (jnp.zeros(A.shape[0]), jnp.eye(A.shape[0])), zs)[1]


def kmeans_while(X: Float[jax.Array, "N D"], C: Float[jax.Array, "K D"]
                 ) -> Float[jax.Array, "K D"]:
    """k-means in JAX until the centres move less than 1e-4: lax.while_loop, one_hot means."""
    def body(s):
        C, _, i = s
        oh = jax.nn.one_hot(jnp.argmin(((X[:, None] - C[None]) ** 2).sum(-1), axis=1),
                            C.shape[0])
        new = (oh.T @ X) / jnp.maximum(oh.sum(0), 1)[:, None]
        return new, jnp.abs(new - C).max(), i + 1
    return lax.while_loop(lambda s: (s[1] > 1e-4) & (s[2] < 50), body, (C, jnp.inf, 0))[0]


def kmeans_while_bug(X: Float[jax.Array, "N D"], C: Float[jax.Array, "K D"]
                     ) -> Float[jax.Array, "K D"]:
    def body(s):
        C, _, i = s
        oh = jax.nn.one_hot(jnp.argmin(((X[:, None] - C[None]) ** 2).sum(-1), axis=1),
                            C.shape[0])
        new = (oh.T @ X) / jnp.maximum(oh.sum(1), 1)[:, None]  # BUG: per point
        return new, jnp.abs(new - C).max(), i + 1
    return lax.while_loop(lambda s: (s[1] > 1e-4) & (s[2] < 50), body, (C, jnp.inf, 0))[0]


def s5_associative(Lam: Float[jax.Array, "P"], Bu: Float[jax.Array, "L P"]
                   ) -> Float[jax.Array, "L P"]:
    """S5's parallel scan of a diagonal linear recurrence by lax.associative_scan."""
    def op(a, b):
        return b[0] * a[0], b[0] * a[1] + b[1]
    return lax.associative_scan(op, (jnp.broadcast_to(Lam, Bu.shape), Bu))[1]


def s5_associative_bug(Lam: Float[jax.Array, "P"], Bu: Float[jax.Array, "L P"]
                       ) -> Float[jax.Array, "L P"]:
    def op(a, b):
        return b[0] * a[0], b[0] * a[1] + b[1]
    return lax.associative_scan(op, (jnp.broadcast_to(Lam, Bu.shape), Bu), axis=1)[1].T  # BUG


def s4_conv_kernel(Ab: Float[jax.Array, "N N"], Bb: Float[jax.Array, "N"],
                   C: Float[jax.Array, "N"], u: Float[jax.Array, "L"]) -> Float[jax.Array, "L"]:
    """S4's convolutional view: the kernel by a scan with no inputs (length=L), then a
    causal convolution cut to L."""
    def step(x, _):
        return Ab @ x, C @ x
    _, K = lax.scan(step, Bb, None, length=u.shape[0])
    return jnp.convolve(u, K)[: u.shape[0]]


def s4_conv_kernel_bug(Ab: Float[jax.Array, "N N"], Bb: Float[jax.Array, "N"],
                       C: Float[jax.Array, "N"], u: Float[jax.Array, "L"]
                       ) -> Float[jax.Array, "L"]:
    def step(x, _):
        return Ab @ x, C @ x
    _, K = lax.scan(step, Bb, None, length=u.shape[0])
    return jnp.convolve(u, K)  # BUG: the full 2L - 1


def gumbel_topk(logits: Float[jax.Array, "B V"], key: jax.Array) -> Int[jax.Array, "B 3"]:
    """Sampling 3 without replacement by the Gumbel top-k trick."""
    return lax.top_k(logits + jax.random.gumbel(key, logits.shape), 3)[1]


def gumbel_topk_bug(logits: Float[jax.Array, "B V"], key: jax.Array) -> Int[jax.Array, "B 3"]:
    return lax.top_k(logits + jax.random.gumbel(key, logits.shape[:1]), 3)[1]  # BUG: [B]


def merge_heads(x: Float[torch.Tensor, "B H T D"], Wo: Float[torch.Tensor, "H*D E"]
                ) -> Float[torch.Tensor, "B T E"]:
    """Attention heads merged back: a transpose, made contiguous, viewed as [B, T, H*D]."""
    B, H, T, D = x.shape
    return x.transpose(1, 2).contiguous().view(B, T, H * D) @ Wo


def merge_heads_bug(x: Float[torch.Tensor, "B H T D"], Wo: Float[torch.Tensor, "H*D E"]
                    ) -> Float[torch.Tensor, "B T E"]:
    B, H, T, D = x.shape
    return x.transpose(1, 2).view(B, T, H * D) @ Wo  # BUG: view of a transposed tensor


def swin_partition_view(x: Float[torch.Tensor, "B 7*M 7*N C"]
                        ) -> Float[torch.Tensor, "B*M*N 7 7 C"]:
    """Swin's window_partition as written upstream: permute, contiguous, view."""
    B, H, W, C = x.shape
    x = x.view(B, H // 7, 7, W // 7, 7, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, 7, 7, C)


def swin_partition_view_bug(x: Float[torch.Tensor, "B 7*M 7*N C"]
                            ) -> Float[torch.Tensor, "B*M*N 7 7 C"]:
    B, H, W, C = x.shape
    x = x.view(B, H // 7, 7, W // 7, 7, C)
    return x.permute(0, 1, 3, 2, 4, 5).view(-1, 7, 7, C)  # BUG: torch raises, not contiguous


def bags_reduceat(table: Float[np.ndarray, "V D"], idx: Int[np.ndarray, "N"],
                  offsets: Int[np.ndarray, "B"]) -> Float[np.ndarray, "B D"]:
    """A sum embedding bag in NumPy: ufunc.reduceat from each offset to the next."""
    return np.add.reduceat(table[idx], offsets, axis=0)


def bags_reduceat_bug(table: Float[np.ndarray, "V D"], idx: Int[np.ndarray, "N"],
                      offsets: Int[np.ndarray, "B"]) -> Float[np.ndarray, "B D"]:
    return np.add.reduceat(table[idx], offsets, axis=1)  # BUG: over the features


CASES = [
    ("ddpm q_sample extract", q_sample, q_sample_bug, "TS101"),
    ("ddpm ancestral loop", ddpm_sample, ddpm_sample_bug, "TS101"),
    ("cosine beta schedule", cosine_betas, cosine_betas_bug, "TS101"),
    ("ddim scan jax", ddim_sample_jax, ddim_sample_jax_bug, "TS101"),
    ("unet time embedding", time_film, time_film_bug, "TS101"),
    ("flax time embedding", time_film_jax, time_film_jax_bug, "TS101"),
    ("wav2vec2 conv extractor", wav2vec_features, wav2vec_features_bug, "TS103"),
    ("wav2vec2 output lengths mask", feature_mask, feature_mask_bug, "TS101"),
    ("dlrm embedding bags", dlrm_forward, dlrm_forward_bug, "TS106"),
    ("torchrec dot interaction", dot_interaction, dot_interaction_bug, "TS103"),
    ("numpy weighted bags", embedding_bag_np, embedding_bag_np_bug, "TS101"),
    ("numpy dot interaction", dot_interaction_np, dot_interaction_np_bug, "TS103"),
    ("graphsage mean", sage_mean, sage_mean_bug, "TS101"),
    ("numpy segment softmax", segment_softmax_np, segment_softmax_np_bug, "TS101"),
    ("scatter_reduce mean", scatter_mean_torch, scatter_mean_torch_bug, "TS108"),
    ("jraph segment attention", gnn_segment_jax, gnn_segment_jax_bug, "TS101"),
    ("ppo clipped loss", ppo_loss, ppo_loss_bug, "TS201"),
    ("cleanrl gae, vectorised envs", gae_envs, gae_envs_bug, "TS101"),
    ("purejaxrl gae scan", gae_scan_jax, gae_scan_jax_bug, "TS101"),
    ("swin window roundtrip", swin_roundtrip, swin_roundtrip_bug, "TS103"),
    ("swin relative bias", swin_rel_bias, swin_rel_bias_bug, "TS101"),
    ("moe capacity routing", moe_capacity, moe_capacity_bug, "TS101"),
    ("jax top-2 moe", moe_topk_jax, moe_topk_jax_bug, "TS101"),
    ("perceiver cross attention", perceiver_cross, perceiver_cross_bug, "TS101"),
    ("selective scan loop", selective_scan, selective_scan_bug, "TS101"),
    ("rwkv wkv", rwkv_wkv, rwkv_wkv_bug, "TS101"),
    ("multiclass dice", multiclass_dice, multiclass_dice_bug, "TS101"),
    ("numpy soft dice", soft_dice_np, soft_dice_np_bug, "TS101"),
    ("focal segmentation", focal_seg, focal_seg_bug, "TS103"),
    ("pwc local cost volume", local_cost_volume, local_cost_volume_bug, "TS101"),
    ("raft all-pairs correlation", all_pairs_corr, all_pairs_corr_bug, "TS102"),
    ("kmeans++ init", kmeanspp_init, kmeanspp_init_bug, "TS108"),
    ("pca by svd", pca_svd, pca_svd_bug, "TS102"),
    ("pca scores u*s", pca_scores_us, pca_scores_us_bug, "TS101"),
    ("kalman step", kalman_step, kalman_step_bug, "TS102"),
    ("vmapped scan rnn", vmap_scan_rnn, vmap_scan_rnn_bug, "TS103"),
    ("gru scan", gru_scan, gru_scan_bug, "TS101"),
    ("s4 recurrence", s4_recurrent, s4_recurrent_bug, "TS101"),
    ("einops vit patches jax", vit_patch_jax, vit_patch_jax_bug, "TS102"),
    ("mae unpatchify", vit_unpatch_torch, vit_unpatch_torch_bug, "TS103"),
    ("ddim leading timesteps", ddim_timesteps, ddim_timesteps_bug, "TS103"),
    ("ddpm extract reshape", extract_broadcast, extract_broadcast_bug, "TS101"),
    ("unet resblock embedding", unet_resblock_emb, unet_resblock_emb_bug, "TS101"),
    ("unet upsample skip", upsample_skip, upsample_skip_bug, "TS106"),
    ("wav2vec2 first conv any length", wav2vec_first_layer, wav2vec_first_layer_bug, "TS103"),
    ("embedding bag last offset", bag_last_offset, bag_last_offset_bug, "TS103"),
    ("mixtral sparse moe", mixtral_moe, mixtral_moe_bug, "TS101"),
    ("rwkv token shift", rwkv_token_shift, rwkv_token_shift_bug, "TS101"),
    ("mamba2 segsum", ssd_segsum, ssd_segsum_bug, "TS108"),
    ("ppo categorical", ppo_categorical, ppo_categorical_bug, "TS103"),
    ("sac squashed log-prob", sac_squashed_logp, sac_squashed_logp_bug, "TS101"),
    ("spinningup discount cumsum", discount_cumsum, discount_cumsum_bug, "TS103"),
    ("cleanrl minibatches", ppo_minibatches, ppo_minibatches_bug, "TS103"),
    ("swin shifted-window mask", swin_shift_mask, swin_shift_mask_bug, "TS103"),
    ("raft coords grid", raft_warp_coords, raft_warp_coords_bug, "TS101"),
    ("raft correlation pyramid", corr_pyramid, corr_pyramid_bug, "TS103"),
    ("focal loss with alpha", focal_alpha, focal_alpha_bug, "TS101"),
    ("pca by covariance eigh", pca_cov, pca_cov_bug, "TS102"),
    ("rts smoother", rts_smoother, rts_smoother_bug, "TS102"),
    ("kalman lax.scan", kalman_scan, kalman_scan_bug, "TS102"),
    ("kmeans while_loop", kmeans_while, kmeans_while_bug, "TS101"),
    ("s5 associative scan", s5_associative, s5_associative_bug, "TS103"),
    ("s4 convolution kernel", s4_conv_kernel, s4_conv_kernel_bug, "TS103"),
    ("gumbel top-k", gumbel_topk, gumbel_topk_bug, "TS101"),
    ("merge heads by view", merge_heads, merge_heads_bug, "TS108"),
    ("swin partition by view", swin_partition_view, swin_partition_view_bug, "TS108"),
    ("numpy reduceat bags", bags_reduceat, bags_reduceat_bug, "TS103"),
]

# the bugs torch rejects: the trace stops there, with the note saying so
STOPS = {"scatter_reduce mean"}
# correct code that needs a size at least some constant: the one warning (top_k of 2 and two
# principal components need two of each; range's step B // 4 must not be 0)
ASSUMES = {"jax top-2 moe": "assumes 2 <= E", "pca by svd": "assumes 2 <= ",
           "pca scores u*s": "assumes 2 <= ", "pca by covariance eigh": "assumes 3 <= D",
           "gumbel top-k": "assumes 3 <= V", "cleanrl minibatches": "assumes B // 4 >= 1",
           # two 2x2 poolings: torch refuses H or W below 4 (the first pooling's 2 is said too)
           "raft correlation pyramid": "assumes 4 <= H"}
