"""NumPy, PyTorch and JAX code for ``tensig.verify`` in idioms the other corpora use least, in
the style of public implementations: RoIAlign's bilinear box sampling, Hugging Face's RoPE cache
sliced by position ids, speculative decoding's acceptance test, DeepSets pooling under a length
mask, LightGCN propagation with ``torch.sparse.mm``, two-tower retrieval with in-batch negatives
and a logQ correction, TD3's smoothed twin-Q target, YOLO's anchor assignment by shape IoU,
a factorization machine's pairs by ``torch.combinations``, a Q ensemble by ``torch.func.vmap``,
overlap-add with ``F.fold``, bucketized feature embeddings, motion features by ``torch.diff``;
S4D's discretised convolution kernel, sklearn-style standardisation with one-hot columns,
tensor regression by ``np.tensordot``, K-FAC's preconditioned gradient, Gray-Scott's periodic
Laplacian, a robust scaler by percentiles, top-k gradient sparsification with
``np.put_along_axis``, Gaussian conditioning on a block, Rodrigues rotations by ``np.cross``;
VQ-VAE with a straight-through estimator, Flax-style einsum cross-attention with a key mask,
NFNets' adaptive gradient clipping over a pytree, grouped-query attention with
``jax.nn.dot_product_attention``, SchNet's radial basis filters under ``vmap``, an RK4 neural
ODE under ``fori_loop``, SigLIP's pairwise sigmoid loss and random crops by
``lax.dynamic_slice``: written for this corpus, nothing copied.

Each case is ``(name, correct, buggy, finding code)``; the buggy twin differs by one realistic
bug marked ``# BUG``.  ``tests/test_verify_realcode_2026c.py`` asserts that each correct one
verifies and each buggy one reports its code.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch
import torch.nn.functional as F
from jax import lax

from tensig import Float, Int

# -- detection: RoIAlign, YOLO anchors ----------------------------------------------------------


def roi_align(feat: Float[torch.Tensor, "B C H W"], rois: Float[torch.Tensor, "K 5"],
              scale: float = 0.25) -> Float[torch.Tensor, "K C 7 7"]:
    """torchvision's RoIAlign with one sample per bin (aligned=True): each box's 7 x 7 bin
    centres, the four neighbouring pixels gathered by advanced indexing and blended."""
    idx = rois[:, 0].long()
    x1, y1, x2, y2 = (rois[:, 1:] * scale - 0.5).unbind(1)
    grid = (torch.arange(7, dtype=feat.dtype) + 0.5) / 7
    ys = (y1[:, None] + grid[None] * (y2 - y1)[:, None]).clamp(0, feat.shape[2] - 1)
    xs = (x1[:, None] + grid[None] * (x2 - x1)[:, None]).clamp(0, feat.shape[3] - 1)
    y0, x0 = ys.floor().long(), xs.floor().long()
    y1i, x1i = (y0 + 1).clamp(max=feat.shape[2] - 1), (x0 + 1).clamp(max=feat.shape[3] - 1)
    ly, lx = (ys - y0)[:, None, :, None], (xs - x0)[:, None, None, :]
    f = feat[idx]  # [K, C, H, W]
    k = torch.arange(rois.shape[0])[:, None, None]

    def at(yy, xx):
        return f[k, :, yy[:, :, None], xx[:, None, :]].permute(0, 3, 1, 2)
    return ((1 - ly) * (1 - lx) * at(y0, x0) + (1 - ly) * lx * at(y0, x1i)
            + ly * (1 - lx) * at(y1i, x0) + ly * lx * at(y1i, x1i))


def roi_align_bug(feat: Float[torch.Tensor, "B C H W"], rois: Float[torch.Tensor, "K 5"],
                  scale: float = 0.25) -> Float[torch.Tensor, "K C 7 7"]:
    idx = rois[:, 0].long()
    x1, y1, x2, y2 = (rois[:, 1:] * scale - 0.5).unbind(1)
    grid = (torch.arange(7, dtype=feat.dtype) + 0.5) / 7
    ys = (y1[:, None] + grid[None] * (y2 - y1)[:, None]).clamp(0, feat.shape[2] - 1)
    xs = (x1[:, None] + grid[None] * (x2 - x1)[:, None]).clamp(0, feat.shape[3] - 1)
    y0, x0 = ys.floor().long(), xs.floor().long()
    y1i, x1i = (y0 + 1).clamp(max=feat.shape[2] - 1), (x0 + 1).clamp(max=feat.shape[3] - 1)
    ly, lx = (ys - y0)[:, None, :, None], (xs - x0)[:, None, None, :]
    f = feat[idx]
    k = torch.arange(rois.shape[0])[:, None, None]

    def at(yy, xx):
        return f[k, :, yy[:, :, None], xx[:, None, :]]  # BUG: [K, 7, 7, C], no permute
    return ((1 - ly) * (1 - lx) * at(y0, x0) + (1 - ly) * lx * at(y0, x1i)
            + ly * (1 - lx) * at(y1i, x0) + ly * lx * at(y1i, x1i))


def yolo_anchor_match(gt_wh: Float[torch.Tensor, "B M 2"], anchors: Float[torch.Tensor, "A 2"]
                      ) -> tuple[Float[torch.Tensor, "B M A"], Int[torch.Tensor, "B M"]]:
    """YOLOv3's target assignment: the IoU of each ground-truth box's width and height with
    each anchor's (both centred), and the best anchor per box."""
    inter = torch.min(gt_wh[:, :, None, :], anchors[None, None]).prod(-1)
    union = gt_wh.prod(-1)[..., None] + anchors.prod(-1) - inter
    iou = inter / union
    return iou, iou.argmax(-1)


def yolo_anchor_match_bug(gt_wh: Float[torch.Tensor, "B M 2"],
                          anchors: Float[torch.Tensor, "A 2"]
                          ) -> tuple[Float[torch.Tensor, "B M A"], Int[torch.Tensor, "B M"]]:
    inter = torch.min(gt_wh[..., None], anchors).prod(-1)  # BUG: [B, M, 2, 1] against [A, 2]
    union = gt_wh.prod(-1)[..., None] + anchors.prod(-1) - inter
    iou = inter / union
    return iou, iou.argmax(-1)


# -- language models: RoPE by position ids, speculative decoding --------------------------------


def _rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope_position_ids(q: Float[torch.Tensor, "B H T 2*D"], cos: Float[torch.Tensor, "P 2*D"],
                      sin: Float[torch.Tensor, "P 2*D"], position_ids: Int[torch.Tensor, "B T"]
                      ) -> Float[torch.Tensor, "B H T 2*D"]:
    """Hugging Face Llama's ``apply_rotary_pos_emb``: the cached cos/sin rows picked by each
    token's position id, unsqueezed over the heads."""
    c = cos[position_ids].unsqueeze(1)
    s = sin[position_ids].unsqueeze(1)
    return q * c + _rotate_half(q) * s


def rope_position_ids_bug(q: Float[torch.Tensor, "B H T 2*D"],
                          cos: Float[torch.Tensor, "P 2*D"], sin: Float[torch.Tensor, "P 2*D"],
                          position_ids: Int[torch.Tensor, "B T"]
                          ) -> Float[torch.Tensor, "B H T 2*D"]:
    c = cos[position_ids]  # BUG: [B, T, 2D] against [B, H, T, 2D]
    s = sin[position_ids].unsqueeze(1)
    return q * c + _rotate_half(q) * s


def speculative_accept(p: Float[torch.Tensor, "B K+1 V"], q: Float[torch.Tensor, "B K V"],
                       draft: Int[torch.Tensor, "B K"]
                       ) -> tuple[Int[torch.Tensor, "B"], Float[torch.Tensor, "B K V"]]:
    """Speculative sampling's acceptance: each draft token kept with probability
    min(1, p / q), the run of leading accepts counted, and the residual distribution
    norm(max(0, p - q)) to resample from; the target's last row is the bonus token's."""
    tok = draft[..., None]
    ratio = (p[:, :-1].gather(-1, tok) / q.gather(-1, tok)).squeeze(-1).clamp(max=1.0)
    accept = torch.rand_like(ratio) < ratio
    n = torch.cumprod(accept.long(), dim=1).sum(1)
    resid = (p[:, :-1] - q).clamp(min=0)
    return n, resid / resid.sum(-1, keepdim=True).clamp(min=1e-9)


def speculative_accept_bug(p: Float[torch.Tensor, "B K+1 V"], q: Float[torch.Tensor, "B K V"],
                           draft: Int[torch.Tensor, "B K"]
                           ) -> tuple[Int[torch.Tensor, "B"], Float[torch.Tensor, "B K V"]]:
    tok = draft[..., None]
    ratio = (p[:, :-1].gather(-1, tok) / q.gather(-1, tok)).squeeze(-1).clamp(max=1.0)
    accept = torch.rand_like(ratio) < ratio
    n = torch.cumprod(accept.long(), dim=1).sum(1)
    resid = (p - q).clamp(min=0)  # BUG: K + 1 rows against K
    return n, resid / resid.sum(-1, keepdim=True).clamp(min=1e-9)


# -- sets and graphs: DeepSets, LightGCN ----------------------------------------------------


def deepsets_pool(x: Float[torch.Tensor, "B N D"], lengths: Int[torch.Tensor, "B"],
                  w1: Float[torch.Tensor, "D E"], w2: Float[torch.Tensor, "E C"]
                  ) -> Float[torch.Tensor, "B C"]:
    """DeepSets / PointNet: a shared per-element map, a max over the set with the padding
    masked to -inf, and a readout."""
    mask = torch.arange(x.shape[1])[None, :] < lengths[:, None]
    h = F.relu(x @ w1).masked_fill(~mask[..., None], float("-inf"))
    return h.max(dim=1).values.clamp(min=0) @ w2


def deepsets_pool_bug(x: Float[torch.Tensor, "B N D"], lengths: Int[torch.Tensor, "B"],
                      w1: Float[torch.Tensor, "D E"], w2: Float[torch.Tensor, "E C"]
                      ) -> Float[torch.Tensor, "B C"]:
    mask = torch.arange(x.shape[1])[None, :] < lengths[:, None]
    h = F.relu(x @ w1).masked_fill(~mask, float("-inf"))  # BUG: [B, N] against [B, N, E]
    return h.max(dim=1).values.clamp(min=0) @ w2


def lightgcn(emb: Float[torch.Tensor, "N D"], edges: Int[torch.Tensor, "2 E"],
             layers: int = 3) -> Float[torch.Tensor, "N D"]:
    """LightGCN: a symmetric-normalised sparse adjacency applied ``layers`` times by
    torch.sparse.mm, the layers' embeddings averaged."""
    n = emb.shape[0]
    deg = torch.zeros(n).index_add_(0, edges[0], torch.ones(edges.shape[1]))
    norm = deg.clamp(min=1).rsqrt()
    adj = torch.sparse_coo_tensor(edges, norm[edges[0]] * norm[edges[1]], (n, n))
    out = [emb]
    for _ in range(layers):
        out.append(torch.sparse.mm(adj, out[-1]))
    return torch.stack(out, dim=1).mean(dim=1)


def lightgcn_bug(emb: Float[torch.Tensor, "N D"], edges: Int[torch.Tensor, "2 E"],
                 layers: int = 3) -> Float[torch.Tensor, "N D"]:
    n = emb.shape[0]
    deg = torch.zeros(n).index_add_(0, edges[0], torch.ones(edges.shape[1]))
    norm = deg.clamp(min=1).rsqrt()
    adj = torch.sparse_coo_tensor(edges, norm[edges[0]] * norm[edges[1]], (n, n))
    out = [emb]
    for _ in range(layers):
        out.append(torch.sparse.mm(adj, out[-1]))
    return torch.stack(out, dim=0).mean(dim=1)  # BUG: [L + 1, D]


# -- retrieval and RL: two towers, TD3 ---------------------------------------------------------


def two_tower_loss(user: Float[torch.Tensor, "B F"], items: Float[torch.Tensor, "I G"],
                   ids: Int[torch.Tensor, "B"], logq: Float[torch.Tensor, "I"],
                   wu: Float[torch.Tensor, "F D"], wi: Float[torch.Tensor, "G D"]
                   ) -> Float[torch.Tensor, ""]:
    """Two-tower retrieval: in-batch negatives, each column's logit corrected by its item's
    log sampling probability (sampled softmax's logQ), the diagonal the positives."""
    u = F.normalize(user @ wu, dim=-1)
    v = F.normalize(items[ids] @ wi, dim=-1)
    logits = u @ v.T / 0.05 - logq[ids][None, :]
    return F.cross_entropy(logits, torch.arange(user.shape[0]))


def two_tower_loss_bug(user: Float[torch.Tensor, "B F"], items: Float[torch.Tensor, "I G"],
                       ids: Int[torch.Tensor, "B"], logq: Float[torch.Tensor, "I"],
                       wu: Float[torch.Tensor, "F D"], wi: Float[torch.Tensor, "G D"]
                       ) -> Float[torch.Tensor, ""]:
    u = F.normalize(user @ wu, dim=-1)
    v = F.normalize(items[ids] @ wi, dim=-1)
    logits = u @ v.T / 0.05 - logq[None, :]  # BUG: every item's logQ, [1, I] against [B, B]
    return F.cross_entropy(logits, torch.arange(user.shape[0]))


def td3_target(s2: Float[torch.Tensor, "B S"], r: Float[torch.Tensor, "B"],
               done: Float[torch.Tensor, "B"], wa: Float[torch.Tensor, "S A"],
               wq1: Float[torch.Tensor, "S+A 1"], wq2: Float[torch.Tensor, "S+A 1"],
               gamma: float = 0.99) -> Float[torch.Tensor, "B 1"]:
    """TD3's critic target: the target actor's action smoothed by clipped noise, the smaller
    of the twin target critics, bootstrapped unless done."""
    a2 = torch.tanh(s2 @ wa)
    a2 = (a2 + (0.2 * torch.randn_like(a2)).clamp(-0.5, 0.5)).clamp(-1, 1)
    sa = torch.cat([s2, a2], dim=1)
    q = torch.min(sa @ wq1, sa @ wq2)
    return r[:, None] + gamma * (1 - done[:, None]) * q


def td3_target_bug(s2: Float[torch.Tensor, "B S"], r: Float[torch.Tensor, "B"],
                   done: Float[torch.Tensor, "B"], wa: Float[torch.Tensor, "S A"],
                   wq1: Float[torch.Tensor, "S+A 1"], wq2: Float[torch.Tensor, "S+A 1"],
                   gamma: float = 0.99) -> Float[torch.Tensor, "B 1"]:
    a2 = torch.tanh(s2 @ wa)
    a2 = (a2 + (0.2 * torch.randn_like(a2)).clamp(-0.5, 0.5)).clamp(-1, 1)
    sa = torch.cat([s2, a2], dim=1)
    q = torch.min(sa @ wq1, sa @ wq2)
    return r + gamma * (1 - done[:, None]) * q  # BUG: [B] against [B, 1], a [B, B] outer


def fm_pairs(emb: Float[torch.Tensor, "B Q E"], w: Float[torch.Tensor, "Q*(Q-1)//2"]
             ) -> Float[torch.Tensor, "B"]:
    """A field-weighted factorization machine: every pair of field embeddings by
    torch.combinations, their dot products weighted per pair."""
    i, j = torch.combinations(torch.arange(emb.shape[1])).unbind(1)
    return ((emb[:, i] * emb[:, j]).sum(-1) * w).sum(-1)


def fm_pairs_bug(emb: Float[torch.Tensor, "B Q E"], w: Float[torch.Tensor, "Q*(Q-1)//2"]
                 ) -> Float[torch.Tensor, "B"]:
    i, j = torch.combinations(torch.arange(emb.shape[1])).unbind(1)
    return ((emb[:, i] * emb[:, j]).sum(1) * w).sum(-1)  # BUG: sums the pairs, not E


def ensemble_q(s: Float[torch.Tensor, "B S"], w1: Float[torch.Tensor, "M S H"],
               w2: Float[torch.Tensor, "M H"]) -> Float[torch.Tensor, "M B"]:
    """An ensemble of M Q-heads (REDQ / EDAC) evaluated by torch.func.vmap over the stacked
    weights, the states shared."""
    def head(a, b, x):
        return torch.relu(x @ a) @ b
    return torch.func.vmap(head, in_dims=(0, 0, None))(w1, w2, s)


def ensemble_q_bug(s: Float[torch.Tensor, "B S"], w1: Float[torch.Tensor, "M S H"],
                   w2: Float[torch.Tensor, "M H"]) -> Float[torch.Tensor, "M B"]:
    def head(a, b, x):
        return torch.relu(x @ a) @ b
    return torch.func.vmap(head, in_dims=(0, None, None))(w1, w2, s)  # BUG: all heads' b


# -- signals and features: overlap-add, buckets, motion -----------------------------------------


def overlap_add(frames: Float[torch.Tensor, "B W F"], window: Float[torch.Tensor, "W"],
                hop: int = 4) -> Float[torch.Tensor, "B 1 1 4*F-4+W"]:
    """istft's overlap-add by ``F.fold``: windowed frames as column blocks of a 1-row image,
    summed into a signal (F - 1) * hop + W long."""
    n = (frames.shape[2] - 1) * hop + frames.shape[1]
    return F.fold(frames * window[:, None], output_size=(1, n), kernel_size=(1, frames.shape[1]),
                  stride=(1, hop))


def overlap_add_bug(frames: Float[torch.Tensor, "B W F"], window: Float[torch.Tensor, "W"],
                    hop: int = 4) -> Float[torch.Tensor, "B 1 1 4*F-4+W"]:
    n = frames.shape[2] * hop + frames.shape[1]  # BUG: one hop too long for F frames
    return F.fold(frames * window[:, None], output_size=(1, n), kernel_size=(1, frames.shape[1]),
                  stride=(1, hop))


def bucket_embed(x: Float[torch.Tensor, "N Q"], bounds: Float[torch.Tensor, "K"],
                 table: Float[torch.Tensor, "K+1 E"]) -> Float[torch.Tensor, "N E"]:
    """Numeric features bucketized by shared boundaries and embedded (a DLRM / wide-and-deep
    dense feature), the features' embeddings summed."""
    return F.embedding(torch.bucketize(x, bounds), table).sum(dim=1)


def bucket_embed_bug(x: Float[torch.Tensor, "N Q"], bounds: Float[torch.Tensor, "K"],
                     table: Float[torch.Tensor, "K+1 E"]) -> Float[torch.Tensor, "N E"]:
    return F.embedding(torch.bucketize(x, bounds), table).sum(dim=2)  # BUG: sums the embedding


def motion_features(pose: Float[torch.Tensor, "B T J 3"]) -> Float[torch.Tensor, "B T J 9"]:
    """Skeleton action recognition's input: positions, velocities and accelerations by
    torch.diff, each padded at the start back to T frames."""
    vel = F.pad(torch.diff(pose, dim=1), (0, 0, 0, 0, 1, 0))
    acc = F.pad(torch.diff(vel, dim=1), (0, 0, 0, 0, 1, 0))
    return torch.cat([pose, vel, acc], dim=-1)


def motion_features_bug(pose: Float[torch.Tensor, "B T J 3"]) -> Float[torch.Tensor, "B T J 9"]:
    vel = F.pad(torch.diff(pose, dim=1), (0, 0, 0, 0, 1, 0))
    acc = torch.diff(vel, dim=1)  # BUG: T - 1 frames, not padded
    return torch.cat([pose, vel, acc], dim=-1)


# -- NumPy: state spaces, preprocessing, tensors, optimisers -----------------------------------


def s4d_conv(u: Float[np.ndarray, "H L"], log_dt: Float[np.ndarray, "H"],
             a_re: Float[np.ndarray, "H N"], a_im: Float[np.ndarray, "H N"],
             c: Float[np.ndarray, "H N"]) -> Float[np.ndarray, "H L"]:
    """S4D: the diagonal state matrix discretised by zero-order hold, the convolution kernel
    by a Vandermonde product over the L steps, applied by FFT."""
    L = u.shape[1]
    A = -np.exp(a_re) + 1j * a_im
    dtA = np.exp(log_dt)[:, None] * A
    B = (np.exp(dtA) - 1.0) / A
    K = 2 * np.einsum("hn,hnl->hl", c * B, np.exp(dtA[..., None] * np.arange(L))).real
    y = np.fft.irfft(np.fft.rfft(u, n=2 * L) * np.fft.rfft(K, n=2 * L), n=2 * L)
    return y[:, :L]


def s4d_conv_bug(u: Float[np.ndarray, "H L"], log_dt: Float[np.ndarray, "H"],
                 a_re: Float[np.ndarray, "H N"], a_im: Float[np.ndarray, "H N"],
                 c: Float[np.ndarray, "H N"]) -> Float[np.ndarray, "H L"]:
    L = u.shape[1]
    A = -np.exp(a_re) + 1j * a_im
    dtA = np.exp(log_dt) * A  # BUG: [H] against [H, N]
    B = (np.exp(dtA) - 1.0) / A
    K = 2 * np.einsum("hn,hnl->hl", c * B, np.exp(dtA[..., None] * np.arange(L))).real
    y = np.fft.irfft(np.fft.rfft(u, n=2 * L) * np.fft.rfft(K, n=2 * L), n=2 * L)
    return y[:, :L]


def standardize_onehot(X: Float[np.ndarray, "N Q"], cat: Int[np.ndarray, "N"],
                       levels: Int[np.ndarray, "K"]) -> Float[np.ndarray, "N Q+K"]:
    """sklearn's StandardScaler beside a OneHotEncoder (a ColumnTransformer's output): columns
    centred and scaled, the category matched against the fitted levels."""
    Z = (X - X.mean(axis=0)) / np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)
    onehot = (cat[:, None] == levels[None, :]).astype(X.dtype)
    return np.hstack([Z, onehot])


def standardize_onehot_bug(X: Float[np.ndarray, "N Q"], cat: Int[np.ndarray, "N"],
                           levels: Int[np.ndarray, "K"]) -> Float[np.ndarray, "N Q+K"]:
    Z = (X - X.mean(axis=1)) / np.where(X.std(axis=0) > 0, X.std(axis=0), 1.0)  # BUG: axis
    onehot = (cat[:, None] == levels[None, :]).astype(X.dtype)
    return np.hstack([Z, onehot])


def tensor_regression(X: Float[np.ndarray, "N R C"], W: Float[np.ndarray, "R C K"],
                      b: Float[np.ndarray, "K"]) -> Float[np.ndarray, "N K"]:
    """Multilinear (tensor) regression: each matrix-valued sample contracted with the weight
    tensor over both its axes by np.tensordot."""
    return np.tensordot(X, W, axes=([1, 2], [0, 1])) + b


def tensor_regression_bug(X: Float[np.ndarray, "N R C"], W: Float[np.ndarray, "R C K"],
                          b: Float[np.ndarray, "K"]) -> Float[np.ndarray, "N K"]:
    return np.tensordot(X, W, axes=([1, 2], [1, 0])) + b  # BUG: R against C


def kfac_precondition(grad: Float[np.ndarray, "O I"], acts: Float[np.ndarray, "B I"],
                      gouts: Float[np.ndarray, "B O"], damping: float = 1e-3
                      ) -> Float[np.ndarray, "O I"]:
    """K-FAC: a linear layer's Fisher as the Kronecker product of the input and output-gradient
    covariances, the gradient preconditioned as G^-1 grad A^-1 without forming the product."""
    A = acts.T @ acts / acts.shape[0] + damping * np.eye(acts.shape[1])
    G = gouts.T @ gouts / gouts.shape[0] + damping * np.eye(gouts.shape[1])
    return np.linalg.solve(G, np.linalg.solve(A, grad.T).T)


def kfac_precondition_bug(grad: Float[np.ndarray, "O I"], acts: Float[np.ndarray, "B I"],
                          gouts: Float[np.ndarray, "B O"], damping: float = 1e-3
                          ) -> Float[np.ndarray, "O I"]:
    A = acts.T @ acts / acts.shape[0] + damping * np.eye(acts.shape[1])
    G = gouts.T @ gouts / gouts.shape[0] + damping * np.eye(gouts.shape[1])
    return np.linalg.solve(G, np.linalg.solve(A, grad).T)  # BUG: A is [I, I], grad [O, I]


def gray_scott_step(u: Float[np.ndarray, "X Y"], v: Float[np.ndarray, "X Y"],
                    f: float = 0.037, k: float = 0.06) -> Float[np.ndarray, "2 X Y"]:
    """A Gray-Scott reaction-diffusion step on a periodic grid: the five-point Laplacian by
    np.roll along both axes."""
    def lap(z):
        return (np.roll(z, 1, 0) + np.roll(z, -1, 0) + np.roll(z, 1, 1) + np.roll(z, -1, 1)
                - 4 * z)
    uvv = u * v * v
    return np.stack([u + 0.16 * lap(u) - uvv + f * (1 - u), v + 0.08 * lap(v) + uvv - (f + k) * v])


def gray_scott_step_bug(u: Float[np.ndarray, "X Y"], v: Float[np.ndarray, "X Y"],
                        f: float = 0.037, k: float = 0.06) -> Float[np.ndarray, "2 X Y"]:
    def lap(z):
        return np.diff(z, 2, axis=0)[:, :] + np.roll(z, 1, 1) + np.roll(z, -1, 1) - 2 * z  # BUG
    uvv = u * v * v
    return np.stack([u + 0.16 * lap(u) - uvv + f * (1 - u), v + 0.08 * lap(v) + uvv - (f + k) * v])


def robust_scale(X: Float[np.ndarray, "N Q"]) -> Float[np.ndarray, "N Q"]:
    """sklearn's RobustScaler: each column centred by its median and scaled by its
    interquartile range."""
    q1, q3 = np.percentile(X, [25, 75], axis=0)
    iqr = np.where(q3 - q1 > 0, q3 - q1, 1.0)
    return (X - np.median(X, axis=0)) / iqr


def robust_scale_bug(X: Float[np.ndarray, "N Q"]) -> Float[np.ndarray, "N Q"]:
    q1, q3 = np.percentile(X, [25, 75], axis=1)  # BUG: each row's quartiles, [N]
    iqr = np.where(q3 - q1 > 0, q3 - q1, 1.0)
    return (X - np.median(X, axis=0)) / iqr


def topk_sparsify(g: Float[np.ndarray, "N D"], k: int = 4
                  ) -> tuple[Float[np.ndarray, "N D"], Float[np.ndarray, "N D"]]:
    """Deep gradient compression: each row keeps its k largest-magnitude entries (sent), the
    rest accumulates as the residual for the next step."""
    idx = np.argpartition(-np.abs(g), k - 1, axis=1)[:, :k]
    sent = np.zeros_like(g)
    np.put_along_axis(sent, idx, np.take_along_axis(g, idx, axis=1), axis=1)
    return sent, g - sent


def topk_sparsify_bug(g: Float[np.ndarray, "N D"], k: int = 4
                      ) -> tuple[Float[np.ndarray, "N D"], Float[np.ndarray, "N D"]]:
    idx = np.argpartition(-np.abs(g), k - 1, axis=1)[:, :k]
    sent = np.zeros_like(g)
    np.put_along_axis(sent, idx, np.take_along_axis(g, idx, axis=1).T, axis=1)  # BUG: [k, N]
    return sent, g - sent


def gaussian_condition(mu: Float[np.ndarray, "A+O"], S: Float[np.ndarray, "A+O A+O"],
                       xo: Float[np.ndarray, "O"]
                       ) -> tuple[Float[np.ndarray, "A"], Float[np.ndarray, "A A"]]:
    """A joint Gaussian conditioned on its last block being observed (GP regression and
    Kalman updates): the Schur complement by a solve."""
    a = S.shape[0] - xo.shape[0]
    Sao = S[:a, a:]
    gain = np.linalg.solve(S[a:, a:], Sao.T).T
    return mu[:a] + gain @ (xo - mu[a:]), S[:a, :a] - gain @ Sao.T


def gaussian_condition_bug(mu: Float[np.ndarray, "A+O"], S: Float[np.ndarray, "A+O A+O"],
                           xo: Float[np.ndarray, "O"]
                           ) -> tuple[Float[np.ndarray, "A"], Float[np.ndarray, "A A"]]:
    a = S.shape[0] - xo.shape[0]
    Sao = S[a:, :a]  # BUG: the [O, A] block
    gain = np.linalg.solve(S[a:, a:], Sao.T).T
    return mu[:a] + gain @ (xo - mu[a:]), S[:a, :a] - gain @ Sao.T


def rodrigues(pts: Float[np.ndarray, "B N 3"], omega: Float[np.ndarray, "B 3"]
              ) -> Float[np.ndarray, "B N 3"]:
    """Rodrigues' rotation of each batch's point cloud about its axis-angle vector, by
    np.cross."""
    theta = np.linalg.norm(omega, axis=-1, keepdims=True)
    k = (omega / np.maximum(theta, 1e-12))[:, None, :]
    cos, sin = np.cos(theta)[:, None], np.sin(theta)[:, None]
    kv = (k * pts).sum(-1, keepdims=True)
    return pts * cos + np.cross(k, pts) * sin + k * kv * (1 - cos)


def rodrigues_bug(pts: Float[np.ndarray, "B N 3"], omega: Float[np.ndarray, "B 3"]
                  ) -> Float[np.ndarray, "B N 3"]:
    theta = np.linalg.norm(omega, axis=-1)  # BUG: [B] against [B, 3]
    k = (omega / np.maximum(theta, 1e-12))[:, None, :]
    cos, sin = np.cos(theta)[:, None], np.sin(theta)[:, None]
    kv = (k * pts).sum(-1, keepdims=True)
    return pts * cos + np.cross(k, pts) * sin + k * kv * (1 - cos)


# -- JAX: VQ-VAE, Flax attention, AGC, GQA, SchNet, neural ODE, SigLIP, crops -------------------


def vq_straight_through(z: Float[jax.Array, "B N D"], codebook: Float[jax.Array, "K D"]
                        ) -> tuple[Float[jax.Array, "B N D"], Float[jax.Array, ""]]:
    """VQ-VAE's quantiser: the nearest code by squared distance, the straight-through
    estimator, and the codebook and commitment losses."""
    d = (z ** 2).sum(-1, keepdims=True) - 2 * z @ codebook.T + (codebook ** 2).sum(-1)
    q = codebook[jnp.argmin(d, axis=-1)]
    loss = jnp.mean((lax.stop_gradient(z) - q) ** 2) + 0.25 * jnp.mean(
        (z - lax.stop_gradient(q)) ** 2)
    return z + lax.stop_gradient(q - z), loss


def vq_straight_through_bug(z: Float[jax.Array, "B N D"], codebook: Float[jax.Array, "K D"]
                            ) -> tuple[Float[jax.Array, "B N D"], Float[jax.Array, ""]]:
    d = (z ** 2).sum(-1, keepdims=True) - 2 * z @ codebook.T + (codebook ** 2).sum(-1)
    q = codebook[jnp.argmin(d, axis=1)]  # BUG: over the tokens, [B, K, D]
    loss = jnp.mean((lax.stop_gradient(z) - q) ** 2) + 0.25 * jnp.mean(
        (z - lax.stop_gradient(q)) ** 2)
    return z + lax.stop_gradient(q - z), loss


def flax_cross_attention(q: Float[jax.Array, "B T H D"], k: Float[jax.Array, "B S H D"],
                         v: Float[jax.Array, "B S H D"], key_mask: Int[jax.Array, "B S"]
                         ) -> Float[jax.Array, "B T H D"]:
    """Flax's ``dot_product_attention_weights``: einsum logits, a key padding mask broadcast
    over heads and queries, softmax over the keys."""
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(q.shape[-1])
    logits = jnp.where(key_mask[:, None, None, :] > 0, logits, jnp.finfo(logits.dtype).min)
    return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, axis=-1), v)


def flax_cross_attention_bug(q: Float[jax.Array, "B T H D"], k: Float[jax.Array, "B S H D"],
                             v: Float[jax.Array, "B S H D"], key_mask: Int[jax.Array, "B S"]
                             ) -> Float[jax.Array, "B T H D"]:
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(q.shape[-1])
    logits = jnp.where(key_mask[:, None, :, None] > 0, logits,  # BUG: keys on the query axis
                       jnp.finfo(logits.dtype).min)
    return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, axis=-1), v)


def _unitwise_norm(x):
    return jnp.sqrt((x ** 2).sum(axis=0, keepdims=True)) if x.ndim > 1 else jnp.abs(x)


def agc(w: Float[jax.Array, "I O"], b: Float[jax.Array, "O"], gw: Float[jax.Array, "I O"],
        gb: Float[jax.Array, "O"], clip: float = 0.01
        ) -> tuple[Float[jax.Array, "I O"], Float[jax.Array, "O"]]:
    """NFNets' adaptive gradient clipping over a parameter pytree: each output unit's gradient
    norm capped at ``clip`` times its weight norm (optax's ``adaptive_grad_clip``)."""
    def one(g, p):
        cap = jnp.maximum(_unitwise_norm(p), 1e-3) * clip
        gn = _unitwise_norm(g)
        return jnp.where(gn > cap, g * cap / jnp.maximum(gn, 1e-6), g)
    out = jax.tree_util.tree_map(one, {"w": gw, "b": gb}, {"w": w, "b": b})
    return out["w"], out["b"]


def _rowwise_norm(x):
    return jnp.sqrt((x ** 2).sum(axis=-1)) if x.ndim > 1 else jnp.abs(x)


def agc_bug(w: Float[jax.Array, "I O"], b: Float[jax.Array, "O"], gw: Float[jax.Array, "I O"],
            gb: Float[jax.Array, "O"], clip: float = 0.01
            ) -> tuple[Float[jax.Array, "I O"], Float[jax.Array, "O"]]:
    def one(g, p):
        cap = jnp.maximum(_rowwise_norm(p), 1e-3) * clip  # BUG: [I] against [I, O]
        gn = _unitwise_norm(g)
        return jnp.where(gn > cap, g * cap / jnp.maximum(gn, 1e-6), g)
    out = jax.tree_util.tree_map(one, {"w": gw, "b": gb}, {"w": w, "b": b})
    return out["w"], out["b"]


def gqa_jax(q: Float[jax.Array, "B T G*R D"], k: Float[jax.Array, "B S G D"],
            v: Float[jax.Array, "B S G D"]) -> Float[jax.Array, "B T G*R D"]:
    """Grouped-query attention: each key/value head repeated for its R query heads, then
    ``jax.nn.dot_product_attention`` (BTNH layout)."""
    r = q.shape[2] // k.shape[2]
    return jax.nn.dot_product_attention(q, jnp.repeat(k, r, axis=2), jnp.repeat(v, r, axis=2))


def gqa_jax_bug(q: Float[jax.Array, "B T G*R D"], k: Float[jax.Array, "B S G D"],
                v: Float[jax.Array, "B S G D"]) -> Float[jax.Array, "B T G*R D"]:
    r = q.shape[2] // k.shape[2]
    return jax.nn.dot_product_attention(q, jnp.repeat(k, r, axis=1),  # BUG: repeats the keys
                                        jnp.repeat(v, r, axis=2))


def schnet_filter(pos: Float[jax.Array, "N 3"], h: Float[jax.Array, "N F"],
                  centers: Float[jax.Array, "K"], w: Float[jax.Array, "K F"]
                  ) -> Float[jax.Array, "N F"]:
    """SchNet's continuous-filter convolution: pairwise distances by a nested vmap, expanded
    in Gaussian radial basis functions, a filter per pair, messages summed over neighbours."""
    dist = jax.vmap(jax.vmap(lambda a, b: jnp.linalg.norm(a - b + 1e-9), (None, 0)),
                    (0, None))(pos, pos)
    rbf = jnp.exp(-10.0 * (dist[..., None] - centers) ** 2)
    return jnp.einsum("ijf,jf->if", jax.nn.softplus(rbf @ w), h)


def schnet_filter_bug(pos: Float[jax.Array, "N 3"], h: Float[jax.Array, "N F"],
                      centers: Float[jax.Array, "K"], w: Float[jax.Array, "K F"]
                      ) -> Float[jax.Array, "N F"]:
    dist = jax.vmap(jax.vmap(lambda a, b: jnp.linalg.norm(a - b + 1e-9), (None, 0)),
                    (0, None))(pos, pos)
    rbf = jnp.exp(-10.0 * (dist - centers[None, :]) ** 2)  # BUG: [N, N] against [1, K]
    return jnp.einsum("ijf,jf->if", jax.nn.softplus(rbf @ w), h)


def ode_rk4(y: Float[jax.Array, "B D"], W: Float[jax.Array, "D D"], b: Float[jax.Array, "D"],
            steps: int = 8) -> Float[jax.Array, "B D"]:
    """A neural ODE integrated by classic Runge-Kutta 4 under ``lax.fori_loop``."""
    dt = 1.0 / steps

    def f(y):
        return jnp.tanh(y @ W + b)

    def body(_, y):
        k1 = f(y)
        k2 = f(y + dt / 2 * k1)
        k3 = f(y + dt / 2 * k2)
        k4 = f(y + dt * k3)
        return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return lax.fori_loop(0, steps, body, y)


def ode_rk4_bug(y: Float[jax.Array, "B D"], W: Float[jax.Array, "D D"], b: Float[jax.Array, "D"],
                steps: int = 8) -> Float[jax.Array, "B D"]:
    dt = 1.0 / steps

    def f(y):
        return jnp.tanh(y @ W + b)

    def body(_, y):
        k1 = f(y)
        k2 = f(y + dt / 2 * k1.mean(-1))  # BUG: [B] against [B, D]
        k3 = f(y + dt / 2 * k2)
        k4 = f(y + dt * k3)
        return y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return lax.fori_loop(0, steps, body, y)


def siglip_loss(img: Float[jax.Array, "B D"], txt: Float[jax.Array, "B D"],
                t: Float[jax.Array, ""], bias: Float[jax.Array, ""]) -> Float[jax.Array, ""]:
    """SigLIP's pairwise sigmoid loss: every image-text pair a binary label, +1 on the
    diagonal, -1 elsewhere."""
    img = img / jnp.linalg.norm(img, axis=-1, keepdims=True)
    txt = txt / jnp.linalg.norm(txt, axis=-1, keepdims=True)
    logits = img @ txt.T * jnp.exp(t) + bias
    labels = 2 * jnp.eye(img.shape[0]) - 1
    return -jnp.sum(jax.nn.log_sigmoid(labels * logits)) / img.shape[0]


def siglip_loss_bug(img: Float[jax.Array, "B D"], txt: Float[jax.Array, "B D"],
                    t: Float[jax.Array, ""], bias: Float[jax.Array, ""]) -> Float[jax.Array, ""]:
    img = img / jnp.linalg.norm(img, axis=-1, keepdims=True)
    txt = txt / jnp.linalg.norm(txt, axis=-1, keepdims=True)
    logits = img @ txt.T * jnp.exp(t) + bias
    labels = 2 * jnp.eye(img.shape[1]) - 1  # BUG: [D, D] against [B, B]
    return -jnp.sum(jax.nn.log_sigmoid(labels * logits)) / img.shape[0]


def random_crops(images: Float[jax.Array, "B X Y C"], key: jax.Array
                 ) -> Float[jax.Array, "B 8 8 C"]:
    """A batch of random 8 x 8 crops: one key per image, the corner drawn in range and the
    patch cut by ``lax.dynamic_slice`` under vmap."""
    def crop(img, k):
        ky, kx = jax.random.split(k)
        y = jax.random.randint(ky, (), 0, img.shape[0] - 8 + 1)
        x = jax.random.randint(kx, (), 0, img.shape[1] - 8 + 1)
        return lax.dynamic_slice(img, (y, x, 0), (8, 8, img.shape[2]))
    return jax.vmap(crop)(images, jax.random.split(key, images.shape[0]))


def random_crops_bug(images: Float[jax.Array, "B X Y C"], key: jax.Array
                     ) -> Float[jax.Array, "B 8 8 C"]:
    def crop(img, k):
        ky, kx = jax.random.split(k)
        y = jax.random.randint(ky, (), 0, img.shape[0] - 8 + 1)
        x = jax.random.randint(kx, (), 0, img.shape[1] - 8 + 1)
        return lax.dynamic_slice(img, (y, x, 0), (8, 8, img.shape[2]))
    return jax.vmap(crop)(images, jax.random.split(key, images.shape[-1]))  # BUG: C keys


CASES = [
    ("torchvision roi align", roi_align, roi_align_bug, "TS101"),
    ("yolo anchor iou match", yolo_anchor_match, yolo_anchor_match_bug, "TS101"),
    ("llama rope by position ids", rope_position_ids, rope_position_ids_bug, "TS101"),
    ("speculative acceptance", speculative_accept, speculative_accept_bug, "TS101"),
    ("deepsets masked max", deepsets_pool, deepsets_pool_bug, "TS101"),
    ("lightgcn sparse mm", lightgcn, lightgcn_bug, "TS103"),
    ("two tower logq", two_tower_loss, two_tower_loss_bug, "TS101"),
    ("td3 twin target", td3_target, td3_target_bug, "TS103"),
    ("fm combinations", fm_pairs, fm_pairs_bug, "TS101"),
    ("vmap q ensemble", ensemble_q, ensemble_q_bug, "TS102"),
    ("fold overlap-add", overlap_add, overlap_add_bug, "TS108"),
    ("bucketized embedding", bucket_embed, bucket_embed_bug, "TS103"),
    ("motion diff features", motion_features, motion_features_bug, "TS106"),
    ("s4d kernel", s4d_conv, s4d_conv_bug, "TS101"),
    ("standardize one-hot", standardize_onehot, standardize_onehot_bug, "TS101"),
    ("tensordot regression", tensor_regression, tensor_regression_bug, "TS102"),
    ("k-fac precondition", kfac_precondition, kfac_precondition_bug, "TS102"),
    ("gray-scott roll laplacian", gray_scott_step, gray_scott_step_bug, "TS101"),
    ("robust scaler", robust_scale, robust_scale_bug, "TS101"),
    ("top-k sparsify", topk_sparsify, topk_sparsify_bug, "TS101"),
    ("gaussian conditioning", gaussian_condition, gaussian_condition_bug, "TS102"),
    ("rodrigues cross", rodrigues, rodrigues_bug, "TS101"),
    ("vq straight-through", vq_straight_through, vq_straight_through_bug, "TS101"),
    ("flax cross attention mask", flax_cross_attention, flax_cross_attention_bug, "TS101"),
    ("adaptive grad clip", agc, agc_bug, "TS101"),
    ("gqa dot_product_attention", gqa_jax, gqa_jax_bug, "TS108"),
    ("schnet rbf filter", schnet_filter, schnet_filter_bug, "TS101"),
    ("rk4 neural ode", ode_rk4, ode_rk4_bug, "TS101"),
    ("siglip sigmoid loss", siglip_loss, siglip_loss_bug, "TS101"),
    ("dynamic_slice crops", random_crops, random_crops_bug, "TS101"),
]
# torch refused the buggy operands itself (verify's note says so)
STOPS = {"fold overlap-add"}
# correct code that needs a size at least some constant: the one warning
ASSUMES: dict[str, str] = {"top-k sparsify": "assumes 4 <= D",
                           "dynamic_slice crops": "assumes 8 <= X"}
