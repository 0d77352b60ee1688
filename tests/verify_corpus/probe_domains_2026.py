"""NumPy, PyTorch and JAX code for ``tensig.verify`` in domains the other corpora touch little,
in the style of public implementations (torchvision's box ops and batched NMS, YOLACT's fast
NMS, fairseq/HF beam search, RAFT's flow warp, PointNet++ sampling and grouping, RealNVP and
Glow couplings, GPML-style Gaussian processes, HMM forward/Viterbi, Sinkhorn and its log-domain
form, librosa-style STFT and mel filterbanks, TCN blocks, CTC alignment tables, NeRF rendering,
optax-style losses, mixup/cutmix, DQN targets, GAT over edge_index): written for this corpus,
nothing copied.

Each case is ``(name, correct, buggy, finding code)``; the buggy twin differs by one realistic
bug marked ``# BUG``.  ``tests/test_verify_realcode_domains.py`` asserts that each correct one
verifies with no finding or note (or only the warning in :data:`ASSUMES`) and each buggy one
reports its code.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import torch
import torch.nn.functional as F
from jax import lax

from tensig import Float, Int

# -- detection: box IoU and non-maximum suppression (torch) -------------------------------------


def box_iou(a: Float[torch.Tensor, "N 4"], b: Float[torch.Tensor, "M 4"]
            ) -> Float[torch.Tensor, "N M"]:
    """torchvision's box_iou: corner max/min broadcast to [N, M, 2], clamped, over the union."""
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt = torch.max(a[:, None, :2], b[:, :2])
    rb = torch.min(a[:, None, 2:], b[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    return inter / (area_a[:, None] + area_b - inter)


def box_iou_bug(a: Float[torch.Tensor, "N 4"], b: Float[torch.Tensor, "M 4"]
                ) -> Float[torch.Tensor, "N M"]:
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt = torch.max(a[:, None, :2], b[:, :2])
    rb = torch.min(a[:, None, 2:], b[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    return inter / (area_a + area_b - inter)  # BUG: [N] + [M]


def fast_nms_keep(boxes: Float[torch.Tensor, "N 4"], scores: Float[torch.Tensor, "N"],
                  classes: Int[torch.Tensor, "N"]) -> Float[torch.Tensor, "N"]:
    """Batched NMS by the coordinate-offset trick (each class moved apart by more than the
    largest coordinate), then YOLACT's fast NMS: boxes in score order, the upper triangle of
    their IoU, a box kept when no better box overlaps it; the kept scores, in place."""
    offsets = classes.to(boxes) * (boxes.max() + 1)
    shifted = boxes + offsets[:, None]
    order = scores.argsort(descending=True)
    b = shifted[order]
    lt = torch.max(b[:, None, :2], b[:, :2])
    rb = torch.min(b[:, None, 2:], b[:, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    area = (b[:, 2:] - b[:, :2]).prod(-1)
    iou = (inter / (area[:, None] + area - inter)).triu(diagonal=1)
    keep = iou.max(dim=0).values <= 0.5
    out = torch.zeros_like(scores)
    out[order[keep]] = scores[order[keep]]
    return out


def fast_nms_keep_bug(boxes: Float[torch.Tensor, "N 4"], scores: Float[torch.Tensor, "N"],
                      classes: Int[torch.Tensor, "N"]) -> Float[torch.Tensor, "N"]:
    offsets = classes.to(boxes) * (boxes.max() + 1)
    shifted = boxes + offsets  # BUG: [N, 4] + [N]
    order = scores.argsort(descending=True)
    b = shifted[order]
    lt = torch.max(b[:, None, :2], b[:, :2])
    rb = torch.min(b[:, None, 2:], b[:, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    area = (b[:, 2:] - b[:, :2]).prod(-1)
    iou = (inter / (area[:, None] + area - inter)).triu(diagonal=1)
    keep = iou.max(dim=0).values <= 0.5
    out = torch.zeros_like(scores)
    out[order[keep]] = scores[order[keep]]
    return out


def box_decode(deltas: Float[torch.Tensor, "N 4"], anchors: Float[torch.Tensor, "N 4"]
               ) -> Float[torch.Tensor, "N 4"]:
    """torchvision's BoxCoder.decode: centre/size from the anchors, deltas clamped in log
    space, corners stacked back."""
    w = anchors[:, 2] - anchors[:, 0]
    h = anchors[:, 3] - anchors[:, 1]
    cx = anchors[:, 0] + 0.5 * w
    cy = anchors[:, 1] + 0.5 * h
    dx, dy, dw, dh = deltas.unbind(-1)
    pcx, pcy = dx * w + cx, dy * h + cy
    pw = torch.exp(dw.clamp(max=4.135)) * w
    ph = torch.exp(dh.clamp(max=4.135)) * h
    return torch.stack([pcx - pw / 2, pcy - ph / 2, pcx + pw / 2, pcy + ph / 2], dim=1)


def box_decode_bug(deltas: Float[torch.Tensor, "N 4"], anchors: Float[torch.Tensor, "N 4"]
                   ) -> Float[torch.Tensor, "N 4"]:
    w = anchors[:, 2] - anchors[:, 0]
    h = anchors[:, 3] - anchors[:, 1]
    cx = anchors[:, 0] + 0.5 * w
    cy = anchors[:, 1] + 0.5 * h
    dx, dy, dw, dh = deltas.unbind(-1)
    pcx, pcy = dx * w + cx, dy * h + cy
    pw = torch.exp(dw.clamp(max=4.135)) * w
    ph = torch.exp(dh.clamp(max=4.135)) * h
    return torch.stack([pcx - pw / 2, pcy - ph / 2, pcx + pw / 2, pcy + ph / 2], dim=0)  # BUG


# Not in CASES: py-faster-rcnn's greedy NMS loops until the data leaves no box (``while
# order.size > 0``); no size shrinks the witness of a data-dependent count, so verify stops it
# with a note (tests/test_verify_realcode_domains.py) where it once ran on without end.
def greedy_nms(dets: Float[np.ndarray, "N, 5"], thresh: float = 0.5) -> Int[np.ndarray, "K"]:
    """py-faster-rcnn's py_cpu_nms: the best remaining box kept, those overlapping it more
    than the threshold dropped, until none remain."""
    x1, y1, x2, y2, scores = dets[:, 0], dets[:, 1], dets[:, 2], dets[:, 3], dets[:, 4]
    areas = (x2 - x1 + 1) * (y2 - y1 + 1)
    order = scores.argsort()[::-1]
    keep = []
    while order.size > 0:
        i = order[0]
        keep.append(i)
        w = np.maximum(0.0, np.minimum(x2[i], x2[order[1:]]) - np.maximum(x1[i], x1[order[1:]]))
        h = np.maximum(0.0, np.minimum(y2[i], y2[order[1:]]) - np.maximum(y1[i], y1[order[1:]]))
        inter = w * h
        ovr = inter / (areas[i] + areas[order[1:]] - inter)
        order = order[np.where(ovr <= thresh)[0] + 1]
    return np.array(keep)


def greedy_nms_until_break(dets: Float[np.ndarray, "N, 5"], thresh: float = 0.5
                           ) -> Int[np.ndarray, "K"]:
    """greedy_nms as ``while True`` left by a ``break`` (its size decided in the loop's body)."""
    order = dets[:, 4].argsort()[::-1]
    keep = []
    while True:
        if order.size == 0:
            break
        keep.append(order[0])
        ovr = np.minimum(dets[order[0], 2], dets[order[1:], 2]) - dets[order[1:], 0]
        order = order[np.where(ovr <= thresh)[0] + 1]
    return np.array(keep)


# -- beam search (torch, JAX) -------------------------------------------------------------------


def beam_step(seqs: Int[torch.Tensor, "B K T"], beam_scores: Float[torch.Tensor, "B K"],
              logits: Float[torch.Tensor, "B*K V"]) -> Int[torch.Tensor, "B K T+1"]:
    """One beam-search step: log-probs plus the running beam scores, flattened to K*V per
    sentence, top-K, back-pointers (ix // V) gathered from the sequences, new tokens appended."""
    B, K, T = seqs.shape
    V = logits.shape[-1]
    lp = F.log_softmax(logits, dim=-1).view(B, K, V) + beam_scores[:, :, None]
    _, ix = lp.view(B, K * V).topk(K, dim=-1)
    beam, token = ix // V, ix % V
    prev = seqs.gather(1, beam[:, :, None].expand(B, K, T))
    return torch.cat([prev, token[:, :, None]], dim=-1)


def beam_step_bug(seqs: Int[torch.Tensor, "B K T"], beam_scores: Float[torch.Tensor, "B K"],
                  logits: Float[torch.Tensor, "B*K V"]) -> Int[torch.Tensor, "B K T+1"]:
    B, K, T = seqs.shape
    V = logits.shape[-1]
    lp = F.log_softmax(logits, dim=-1).view(B, K, V) + beam_scores[:, :, None]
    _, ix = lp.view(B, K * V).topk(K, dim=-1)
    beam, token = ix // V, ix % V
    prev = seqs.gather(1, beam[:, :, None].expand(B, K, T))
    return torch.cat([prev, token], dim=-1)  # BUG: token has no step axis


def beam_step_jax(log_probs: Float[jax.Array, "B, K, V"], alive: Float[jax.Array, "B, K"],
                  seqs: Int[jax.Array, "B, K, T"]) -> Int[jax.Array, "B, K, T+1"]:
    """flax's beam search: candidate scores flattened per sentence, lax.top_k of 2K (so K of
    them can finish), the best K kept, back-pointers gathered with take_along_axis."""
    B, K, V = log_probs.shape
    cand = (alive[..., None] + log_probs).reshape(B, K * V)
    _, ix = lax.top_k(cand, 2 * K)
    ix = ix[:, :K]
    prev = jnp.take_along_axis(seqs, (ix // V)[..., None], axis=1)
    return jnp.concatenate([prev, (ix % V)[..., None]], axis=-1)


def beam_step_jax_bug(log_probs: Float[jax.Array, "B, K, V"], alive: Float[jax.Array, "B, K"],
                      seqs: Int[jax.Array, "B, K, T"]) -> Int[jax.Array, "B, K, T+1"]:
    B, K, V = log_probs.shape
    cand = (alive[..., None] + log_probs).reshape(B, K * V)
    _, ix = lax.top_k(cand, 2 * K)
    prev = jnp.take_along_axis(seqs, (ix // V)[..., None], axis=1)  # BUG: 2K beams kept
    return jnp.concatenate([prev, (ix % V)[..., None]], axis=-1)


# -- warping with grid_sample (torch) -----------------------------------------------------------


def flow_warp(img: Float[torch.Tensor, "B C H W"], flow: Float[torch.Tensor, "B 2 H W"]
              ) -> Float[torch.Tensor, "B C H W"]:
    """RAFT/PWC-style backward warp: a pixel grid plus the flow, scaled to [-1, 1], channels
    last for grid_sample."""
    _, _, H, W = img.shape
    ys, xs = torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij")
    grid = torch.stack([xs, ys], dim=0).float()[None] + flow
    gx = 2.0 * grid[:, 0] / (W - 1) - 1.0
    gy = 2.0 * grid[:, 1] / (H - 1) - 1.0
    return F.grid_sample(img, torch.stack([gx, gy], dim=-1), align_corners=True)


def flow_warp_bug(img: Float[torch.Tensor, "B C H W"], flow: Float[torch.Tensor, "B 2 H W"]
                  ) -> Float[torch.Tensor, "B C H W"]:
    _, _, H, W = img.shape
    ys, xs = torch.meshgrid(torch.arange(H), torch.arange(W), indexing="ij")
    grid = torch.stack([xs, ys], dim=0).float()[None] + flow
    gx = 2.0 * grid[:, 0] / (W - 1) - 1.0
    gy = 2.0 * grid[:, 1] / (H - 1) - 1.0
    return F.grid_sample(img, torch.stack([gx, gy], dim=1), align_corners=True)  # BUG


def stn_crop(img: Float[torch.Tensor, "B C H W"], theta: Float[torch.Tensor, "B 6"]
             ) -> Float[torch.Tensor, "B C 16 16"]:
    """A spatial transformer's sampler: the localisation output as [B, 2, 3], a 16x16 grid."""
    grid = F.affine_grid(theta.view(-1, 2, 3), [img.shape[0], img.shape[1], 16, 16],
                         align_corners=False)
    return F.grid_sample(img, grid, align_corners=False)


def stn_crop_bug(img: Float[torch.Tensor, "B C H W"], theta: Float[torch.Tensor, "B 6"]
                 ) -> Float[torch.Tensor, "B C 16 16"]:
    grid = F.affine_grid(theta.view(-1, 3, 2), [img.shape[0], img.shape[1], 16, 16],  # BUG
                         align_corners=False)
    return F.grid_sample(img, grid, align_corners=False)


# -- point clouds: PointNet++ (torch, NumPy) ----------------------------------------------------


def farthest_point_sample(xyz: Float[torch.Tensor, "B N 3"], npoint: int = 8
                          ) -> Int[torch.Tensor, "B 8"]:
    """PointNet++ FPS: the running minimum distance to the chosen set, argmax as the next."""
    B, N, _ = xyz.shape
    centroids = torch.zeros(B, npoint, dtype=torch.long)
    distance = torch.full((B, N), 1e10)
    farthest = torch.zeros(B, dtype=torch.long)
    batch = torch.arange(B)
    for i in range(npoint):
        centroids[:, i] = farthest
        centroid = xyz[batch, farthest, :].view(B, 1, 3)
        dist = torch.sum((xyz - centroid) ** 2, -1)
        distance = torch.min(distance, dist)
        farthest = torch.max(distance, -1)[1]
    return centroids


def farthest_point_sample_bug(xyz: Float[torch.Tensor, "B N 3"], npoint: int = 8
                              ) -> Int[torch.Tensor, "B 8"]:
    B, N, _ = xyz.shape
    centroids = torch.zeros(B, npoint, dtype=torch.long)
    distance = torch.full((B, N), 1e10)
    farthest = torch.zeros(B, dtype=torch.long)
    batch = torch.arange(B)
    for i in range(npoint):
        centroids[:, i] = farthest
        centroid = xyz[batch, farthest, :]  # BUG: [B, 3] against [B, N, 3]
        dist = torch.sum((xyz - centroid) ** 2, -1)
        distance = torch.min(distance, dist)
        farthest = torch.max(distance, -1)[1]
    return centroids


def knn_group(xyz: Float[torch.Tensor, "B N 3"], new_xyz: Float[torch.Tensor, "B S 3"],
              feats: Float[torch.Tensor, "B N C"]) -> Float[torch.Tensor, "B S 4 C+3"]:
    """PointNet++ grouping: square distances by the expansion, the 4 nearest with topk,
    index_points through a batch index, relative coordinates concatenated to the features."""
    B, S, _ = new_xyz.shape
    d = -2 * new_xyz @ xyz.transpose(1, 2)
    d = d + (new_xyz ** 2).sum(-1)[:, :, None] + (xyz ** 2).sum(-1)[:, None, :]
    idx = d.topk(4, dim=-1, largest=False).indices
    batch = torch.arange(B).view(B, 1, 1).repeat(1, S, 4)
    rel = xyz[batch, idx] - new_xyz[:, :, None, :]
    return torch.cat([rel, feats[batch, idx]], dim=-1)


def knn_group_bug(xyz: Float[torch.Tensor, "B N 3"], new_xyz: Float[torch.Tensor, "B S 3"],
                  feats: Float[torch.Tensor, "B N C"]) -> Float[torch.Tensor, "B S 4 C+3"]:
    B, S, _ = new_xyz.shape
    d = -2 * new_xyz @ xyz.transpose(1, 2)
    d = d + (new_xyz ** 2).sum(-1)[:, :, None] + (xyz ** 2).sum(-1)[:, None, :]
    idx = d.topk(4, dim=-1, largest=False).indices
    batch = torch.arange(B).view(B, 1, 1).repeat(1, S, 4)
    rel = xyz[batch, idx] - new_xyz  # BUG: centres without the neighbour axis
    return torch.cat([rel, feats[batch, idx]], dim=-1)


def ball_query_torch(xyz: Float[torch.Tensor, "B N 3"], new_xyz: Float[torch.Tensor, "B S 3"]
                     ) -> Int[torch.Tensor, "B S 8"]:
    """PointNet++'s query_ball_point in torch: ids past the radius set to N by a mask, sorted,
    the first 8, the misses filled with each group's first id through a second mask."""
    B, N, _ = xyz.shape
    S = new_xyz.shape[1]
    group_idx = torch.arange(N).view(1, 1, N).repeat([B, S, 1])
    sq = torch.cdist(new_xyz, xyz) ** 2
    group_idx[sq > 0.2 ** 2] = N
    group_idx = group_idx.sort(dim=-1)[0][:, :, :8]
    group_first = group_idx[:, :, 0].view(B, S, 1).repeat([1, 1, 8])
    mask = group_idx == N
    group_idx[mask] = group_first[mask]
    return group_idx


def ball_query_torch_bug(xyz: Float[torch.Tensor, "B N 3"], new_xyz: Float[torch.Tensor, "B S 3"]
                         ) -> Int[torch.Tensor, "B S 8"]:
    B, N, _ = xyz.shape
    S = new_xyz.shape[1]
    group_idx = torch.arange(N).view(1, 1, N).repeat([B, S, 1])
    sq = torch.cdist(new_xyz, xyz) ** 2
    group_idx[sq > 0.2 ** 2] = N
    group_idx = group_idx.sort(dim=-1)[0][:, :, :8]
    group_first = group_idx[:, :, 0].repeat([1, 1, 8])  # BUG: [1, B, 8*S], no group axis
    mask = group_idx == N
    group_idx[mask] = group_first[mask]
    return group_idx


def ball_query_np(xyz: Float[np.ndarray, "N, 3"], centers: Float[np.ndarray, "S, 3"],
                  radius: float = 0.2) -> Int[np.ndarray, "S, 8"]:
    """PointNet++ ball query in NumPy: point ids, those outside the radius set to N, sorted,
    the first 8 kept, and the empty slots filled with each group's first point."""
    N = xyz.shape[0]
    sq = ((centers[:, None, :] - xyz[None, :, :]) ** 2).sum(-1)
    idx = np.broadcast_to(np.arange(N), sq.shape).copy()
    idx[sq > radius ** 2] = N
    idx = np.sort(idx, axis=-1)[:, :8]
    first = np.repeat(idx[:, :1], 8, axis=1)
    return np.where(idx == N, first, idx)


def ball_query_np_bug(xyz: Float[np.ndarray, "N, 3"], centers: Float[np.ndarray, "S, 3"],
                      radius: float = 0.2) -> Int[np.ndarray, "S, 8"]:
    N = xyz.shape[0]
    sq = ((centers[:, None, :] - xyz[None, :, :]) ** 2).sum(-1)
    idx = np.broadcast_to(np.arange(N), sq.shape).copy()
    idx[sq > radius ** 2] = N
    idx = np.sort(idx, axis=-1)[:, :8]
    first = idx[:, 0]  # BUG: [S] against [S, 8]
    return np.where(idx == N, first, idx)


# -- normalizing flows (torch, JAX) -------------------------------------------------------------


def realnvp_coupling(x: Float[torch.Tensor, "B D"], mask: Float[torch.Tensor, "D"],
                     w_s: Float[torch.Tensor, "D D"], w_t: Float[torch.Tensor, "D D"]
                     ) -> tuple[Float[torch.Tensor, "B D"], Float[torch.Tensor, "B"]]:
    """RealNVP's affine coupling: scale and shift from the masked half, applied to the rest,
    the log-determinant the sum of the scales over the features."""
    xm = x * mask
    s = torch.tanh(xm @ w_s) * (1 - mask)
    t = (xm @ w_t) * (1 - mask)
    y = xm + (1 - mask) * (x * torch.exp(s) + t)
    return y, s.sum(dim=1)


def realnvp_coupling_bug(x: Float[torch.Tensor, "B D"], mask: Float[torch.Tensor, "D"],
                         w_s: Float[torch.Tensor, "D D"], w_t: Float[torch.Tensor, "D D"]
                         ) -> tuple[Float[torch.Tensor, "B D"], Float[torch.Tensor, "B"]]:
    xm = x * mask
    s = torch.tanh(xm @ w_s) * (1 - mask)
    t = (xm @ w_t) * (1 - mask)
    y = xm + (1 - mask) * (x * torch.exp(s) + t)
    return y, s.sum(dim=0)  # BUG: summed over the batch


def glow_coupling(x: Float[jax.Array, "B, H, W, 2*C"], w: Float[jax.Array, "C, 2*C"]
                  ) -> tuple[Float[jax.Array, "B, H, W, 2*C"], Float[jax.Array, "B"]]:
    """Glow's affine coupling in JAX: split the channels, a 1x1 net on one half gives shift and
    log-scale (interleaved, so [..., 0::2] and [..., 1::2]), log-det summed over H, W, C."""
    xa, xb = jnp.split(x, 2, axis=-1)
    h = xa @ w
    shift, raw = h[..., 0::2], h[..., 1::2]
    scale = jax.nn.sigmoid(raw + 2.0)
    yb = (xb + shift) * scale
    return jnp.concatenate([xa, yb], axis=-1), jnp.log(scale).sum(axis=(1, 2, 3))


def glow_coupling_bug(x: Float[jax.Array, "B, H, W, 2*C"], w: Float[jax.Array, "C, 2*C"]
                      ) -> tuple[Float[jax.Array, "B, H, W, 2*C"], Float[jax.Array, "B"]]:
    xa, xb = jnp.split(x, 2, axis=-1)
    h = xa @ w
    shift, raw = h[..., 0::2], h[..., 1::2]
    scale = jax.nn.sigmoid(raw + 2.0)
    yb = (xb + shift) * scale
    return jnp.concatenate([xa, yb], axis=-1), jnp.log(scale).sum(axis=(1, 2))  # BUG: C kept


# -- Gaussian processes (NumPy) -----------------------------------------------------------------


def _rbf(a: np.ndarray, b: np.ndarray, ell: float) -> np.ndarray:
    sq = (a ** 2).sum(1)[:, None] + (b ** 2).sum(1)[None, :] - 2 * a @ b.T
    return np.exp(-0.5 * sq / ell ** 2)


def gp_predict(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"],
               Xs: Float[np.ndarray, "M, D"], noise: float = 0.1
               ) -> tuple[Float[np.ndarray, "M"], Float[np.ndarray, "M"]]:
    """GPML algorithm 2.1: Cholesky of K + s^2 I, alpha by two triangular solves, the mean
    K*^T alpha and the variance k** - v^T v with v = L \\ K*."""
    K = _rbf(X, X, 1.0) + noise ** 2 * np.eye(X.shape[0])
    L = np.linalg.cholesky(K)
    alpha = np.linalg.solve(L.T, np.linalg.solve(L, y))
    Ks = _rbf(X, Xs, 1.0)
    v = np.linalg.solve(L, Ks)
    return Ks.T @ alpha, 1.0 - np.sum(v ** 2, axis=0)


def gp_predict_bug(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"],
                   Xs: Float[np.ndarray, "M, D"], noise: float = 0.1
                   ) -> tuple[Float[np.ndarray, "M"], Float[np.ndarray, "M"]]:
    K = _rbf(X, X, 1.0) + noise ** 2 * np.eye(X.shape[0])
    L = np.linalg.cholesky(K)
    alpha = np.linalg.solve(L.T, np.linalg.solve(L, y))
    Ks = _rbf(Xs, X, 1.0)  # BUG: [M, N], then solved against L [N, N]
    v = np.linalg.solve(L, Ks)
    return Ks.T @ alpha, 1.0 - np.sum(v ** 2, axis=0)


def gp_log_marginal(X: Float[np.ndarray, "N, D"], Y: Float[np.ndarray, "N, P"],
                    ell: float = 1.0) -> Float[np.ndarray, "P"]:
    """The log marginal likelihood of P independent outputs sharing a kernel: the data fit
    per output, log|K| from the Cholesky diagonal, the constant."""
    N = X.shape[0]
    L = np.linalg.cholesky(_rbf(X, X, ell) + 1e-2 * np.eye(N))
    A = np.linalg.solve(L, Y)
    return -0.5 * np.sum(A ** 2, axis=0) - np.log(np.diag(L)).sum() - 0.5 * N * np.log(2 * np.pi)


def gp_log_marginal_bug(X: Float[np.ndarray, "N, D"], Y: Float[np.ndarray, "N, P"],
                        ell: float = 1.0) -> Float[np.ndarray, "P"]:
    N = X.shape[0]
    L = np.linalg.cholesky(_rbf(X, X, ell) + 1e-2 * np.eye(N))
    A = np.linalg.solve(L, Y)
    return -0.5 * np.sum(A ** 2, axis=1) - np.log(np.diag(L)).sum() - 0.5 * N * np.log(2 * np.pi)


def mvn_log_prob(mu: Float[torch.Tensor, "B D"], L: Float[torch.Tensor, "D D"],
                 x: Float[torch.Tensor, "B D"]) -> Float[torch.Tensor, "B"]:
    """A Gaussian's log density through torch.distributions (as GPyTorch-style code scores
    samples): one Cholesky factor shared by the batch of means, whose batch shape
    MultivariateNormal finds with torch.broadcast_shapes."""
    return torch.distributions.MultivariateNormal(mu, scale_tril=torch.tril(L)).log_prob(x)


def mvn_log_prob_bug(mu: Float[torch.Tensor, "B D"], L: Float[torch.Tensor, "D D"],
                     x: Float[torch.Tensor, "B D"]) -> Float[torch.Tensor, "B"]:
    return torch.distributions.MultivariateNormal(mu.T, scale_tril=torch.tril(L)  # BUG: [D, B]
                                                  ).log_prob(x)


# -- hidden Markov models (NumPy, JAX) ----------------------------------------------------------


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    m = a.max(axis=axis, keepdims=True)
    return np.squeeze(m, axis) + np.log(np.exp(a - m).sum(axis=axis))


def hmm_forward(log_pi: Float[np.ndarray, "S"], log_A: Float[np.ndarray, "S, S"],
                log_B: Float[np.ndarray, "T, S"]) -> Float[np.ndarray, "T, S"]:
    """The forward algorithm in log space: alpha_t(j) = B_t(j) + logsumexp_i(alpha_{t-1}(i) +
    A(i, j)), one row per step."""
    T, S = log_B.shape
    alpha = np.zeros((T, S))
    alpha[0] = log_pi + log_B[0]
    for t in range(1, T):
        alpha[t] = log_B[t] + _logsumexp(alpha[t - 1][:, None] + log_A, axis=0)
    return alpha


def hmm_forward_bug(log_pi: Float[np.ndarray, "S"], log_A: Float[np.ndarray, "S, S"],
                    log_B: Float[np.ndarray, "T, S"]) -> Float[np.ndarray, "T, S"]:
    T, S = log_B.shape
    alpha = np.zeros((T, S))
    alpha[0] = log_pi + log_B[0]
    for t in range(1, T):
        alpha[t] = log_B[:, t] + _logsumexp(alpha[t - 1][:, None] + log_A, axis=0)  # BUG
    return alpha


def viterbi(log_pi: Float[np.ndarray, "S"], log_A: Float[np.ndarray, "S, S"],
            log_B: Float[np.ndarray, "T, S"]) -> Int[np.ndarray, "T"]:
    """Viterbi: max and argmax over the previous state, back-pointers, then a backward pass."""
    T, S = log_B.shape
    delta = log_pi + log_B[0]
    back = np.zeros((T, S), dtype=int)
    for t in range(1, T):
        cand = delta[:, None] + log_A
        back[t] = cand.argmax(axis=0)
        delta = cand.max(axis=0) + log_B[t]
    path = np.zeros(T, dtype=int)
    path[-1] = delta.argmax()
    for t in range(T - 1, 0, -1):
        path[t - 1] = back[t, path[t]]
    return path


def viterbi_bug(log_pi: Float[np.ndarray, "S"], log_A: Float[np.ndarray, "S, S"],
                log_B: Float[np.ndarray, "T, S"]) -> Int[np.ndarray, "T"]:
    T, S = log_B.shape
    delta = log_pi + log_B[0]
    back = np.zeros((T, S), dtype=int)
    for t in range(1, T):
        cand = delta[:, None] + log_A
        back[t] = cand.argmax(axis=0)
        delta = cand.max(axis=0) + log_B[t]
    path = np.zeros(T, dtype=int)
    path[-1] = delta.argmax()
    for t in range(T - 1, 0, -1):
        path[t - 1] = back[t]  # BUG: the whole row of back-pointers
    return path


def hmm_forward_scan(log_pi: Float[jax.Array, "S"], log_A: Float[jax.Array, "S, S"],
                     log_B: Float[jax.Array, "T, S"]) -> Float[jax.Array, ""]:
    """The log-likelihood of a sequence by lax.scan over the emissions, logsumexp over the
    previous state, logsumexp over the last."""
    def step(alpha, lb):
        alpha = lb + jax.nn.logsumexp(alpha[:, None] + log_A, axis=0)
        return alpha, None
    alpha, _ = lax.scan(step, log_pi + log_B[0], log_B[1:])
    return jax.nn.logsumexp(alpha)


def hmm_forward_scan_bug(log_pi: Float[jax.Array, "S"], log_A: Float[jax.Array, "S, S"],
                         log_B: Float[jax.Array, "T, S"]) -> Float[jax.Array, ""]:
    def step(alpha, lb):
        alpha = lb + jax.nn.logsumexp(alpha[:, None] + log_A, axis=0)
        return alpha, None
    alpha, _ = lax.scan(step, log_pi + log_B[0], log_B.T[1:])  # BUG: scans over the states
    return jax.nn.logsumexp(alpha)


# -- optimal transport (NumPy, JAX) -------------------------------------------------------------


def sinkhorn(a: Float[np.ndarray, "N"], b: Float[np.ndarray, "M"], C: Float[np.ndarray, "N, M"],
             eps: float = 0.1, iters: int = 50) -> Float[np.ndarray, "N, M"]:
    """POT-style Sinkhorn-Knopp: the Gibbs kernel, alternating marginal scalings, the plan
    diag(u) K diag(v)."""
    K = np.exp(-C / eps)
    u = np.ones_like(a)
    v = np.ones_like(b)
    for _ in range(iters):
        u = a / (K @ v)
        v = b / (K.T @ u)
    return u[:, None] * K * v[None, :]


def sinkhorn_bug(a: Float[np.ndarray, "N"], b: Float[np.ndarray, "M"],
                 C: Float[np.ndarray, "N, M"], eps: float = 0.1, iters: int = 50
                 ) -> Float[np.ndarray, "N, M"]:
    K = np.exp(-C / eps)
    u = np.ones_like(a)
    v = np.ones_like(b)
    for _ in range(iters):
        u = a / (K @ v)
        v = b / (K @ u)  # BUG: K not transposed
    return u[:, None] * K * v[None, :]


def sinkhorn_log(x: Float[jax.Array, "N, D"], y: Float[jax.Array, "M, D"], eps: float = 0.05
                 ) -> Float[jax.Array, ""]:
    """OTT-style log-domain Sinkhorn under fori_loop: uniform marginals, potentials f, g
    updated by logsumexp of (potential - cost) / eps, the transport cost <P, C>."""
    C = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    la = -jnp.log(x.shape[0]) * jnp.ones(x.shape[0])
    lb = -jnp.log(y.shape[0]) * jnp.ones(y.shape[0])

    def body(_, fg):
        f, g = fg
        f = -eps * jax.nn.logsumexp((g[None, :] - C) / eps + lb[None, :], axis=1)
        g = -eps * jax.nn.logsumexp((f[:, None] - C) / eps + la[:, None], axis=0)
        return f, g
    f, g = lax.fori_loop(0, 30, body, (jnp.zeros(x.shape[0]), jnp.zeros(y.shape[0])))
    P = jnp.exp((f[:, None] + g[None, :] - C) / eps + la[:, None] + lb[None, :])
    return jnp.sum(P * C)


def sinkhorn_log_bug(x: Float[jax.Array, "N, D"], y: Float[jax.Array, "M, D"],
                     eps: float = 0.05) -> Float[jax.Array, ""]:
    C = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    la = -jnp.log(x.shape[0]) * jnp.ones(x.shape[0])
    lb = -jnp.log(y.shape[0]) * jnp.ones(y.shape[0])

    def body(_, fg):
        f, g = fg
        f = -eps * jax.nn.logsumexp((g[None, :] - C) / eps + lb[None, :], axis=1)
        g = -eps * jax.nn.logsumexp((f[:, None] - C) / eps + la[:, None], axis=1)  # BUG
        return f, g
    f, g = lax.fori_loop(0, 30, body, (jnp.zeros(x.shape[0]), jnp.zeros(y.shape[0])))
    P = jnp.exp((f[:, None] + g[None, :] - C) / eps + la[:, None] + lb[None, :])
    return jnp.sum(P * C)


# -- audio: STFT and mel filterbanks (NumPy, JAX) -----------------------------------------------


def stft_frames(x: Float[np.ndarray, "16*F+48"]) -> Float[np.ndarray, "F, 33"]:
    """librosa-style STFT without centring: frames of 64 every 16 samples by an index grid,
    a Hann window, rfft's 33 bins, the power."""
    n_fft, hop = 64, 16
    n_frames = 1 + (len(x) - n_fft) // hop
    idx = np.arange(n_fft)[None, :] + hop * np.arange(n_frames)[:, None]
    frames = x[idx] * np.hanning(n_fft)
    return np.abs(np.fft.rfft(frames, axis=-1)) ** 2


def stft_frames_bug(x: Float[np.ndarray, "16*F+48"]) -> Float[np.ndarray, "F, 33"]:
    n_fft, hop = 64, 16
    n_frames = 1 + (len(x) - n_fft) // hop
    idx = np.arange(n_fft)[None, :] + hop * np.arange(n_frames)[:, None]
    frames = x[idx] * np.hanning(n_fft)
    return np.abs(np.fft.rfft(frames, axis=0)) ** 2  # BUG: the transform over the frames


def stft_centered(x: Float[np.ndarray, "L"]) -> Float[np.ndarray, "129, L//64+1"]:
    """librosa's centred STFT by a loop: reflect-padded by n_fft // 2, one frame per hop,
    stacked as columns."""
    n_fft, hop = 256, 64
    y = np.pad(x, n_fft // 2, mode="reflect")
    n = 1 + (len(y) - n_fft) // hop
    frames = np.stack([y[i * hop: i * hop + n_fft] for i in range(n)], axis=1)
    return np.abs(np.fft.rfft(frames * np.hanning(n_fft)[:, None], axis=0))


def stft_centered_bug(x: Float[np.ndarray, "L"]) -> Float[np.ndarray, "129, L//64+1"]:
    n_fft, hop = 256, 64
    y = np.pad(x, n_fft // 2, mode="reflect")
    n = 1 + (len(y) - n_fft) // hop
    frames = np.stack([y[i * hop: i * hop + n_fft] for i in range(n)], axis=1)
    return np.abs(np.fft.rfft(frames * np.hanning(n_fft), axis=0))  # BUG: window on the frames


def _mel_filters(n_mels: int, n_fft: int, sr: float) -> np.ndarray:
    """Triangular filters between mel-spaced edges on the rfft bins: [n_mels, n_fft//2+1]."""
    bins = np.linspace(0, sr / 2, n_fft // 2 + 1)
    mel = np.linspace(0, 2595 * np.log10(1 + sr / 2 / 700), n_mels + 2)
    hz = 700 * (10 ** (mel / 2595) - 1)
    lower = (bins[None, :] - hz[:-2, None]) / (hz[1:-1] - hz[:-2])[:, None]
    upper = (hz[2:, None] - bins[None, :]) / (hz[2:] - hz[1:-1])[:, None]
    return np.maximum(0, np.minimum(lower, upper))


def log_mel(power: Float[np.ndarray, "B, F, 257"]) -> Float[np.ndarray, "B, F, 40"]:
    """A log-mel spectrogram from a power spectrogram (frames, bins) by the filterbank."""
    fb = _mel_filters(40, 512, 16000.0)
    return np.log(power @ fb.T + 1e-6)


def log_mel_bug(power: Float[np.ndarray, "B, F, 257"]) -> Float[np.ndarray, "B, F, 40"]:
    fb = _mel_filters(40, 512, 16000.0)
    return np.log(power @ fb + 1e-6)  # BUG: [.., 257] @ [40, 257]


def mel_frontend_jax(frames: Float[jax.Array, "B, F, 400"], fb: Float[jax.Array, "257, M"]
                     ) -> Float[jax.Array, "B, M, F"]:
    """A JAX front end: frames zero-padded to 512, windowed rfft, power, mel, per-utterance
    mean over time removed, channels first."""
    win = jnp.hanning(400)
    spec = jnp.fft.rfft(frames * win, n=512, axis=-1)
    mel = jnp.log(jnp.abs(spec) ** 2 @ fb + 1e-6)
    mel = mel - mel.mean(axis=1, keepdims=True)
    return jnp.transpose(mel, (0, 2, 1))


def mel_frontend_jax_bug(frames: Float[jax.Array, "B, F, 400"], fb: Float[jax.Array, "257, M"]
                         ) -> Float[jax.Array, "B, M, F"]:
    win = jnp.hanning(400)
    spec = jnp.fft.rfft(frames * win, axis=-1)  # BUG: 201 bins without n=512
    mel = jnp.log(jnp.abs(spec) ** 2 @ fb + 1e-6)
    mel = mel - mel.mean(axis=1, keepdims=True)
    return jnp.transpose(mel, (0, 2, 1))


def torch_log_mel(x: Float[torch.Tensor, "B, L"], fb: Float[torch.Tensor, "M, 257"]
                  ) -> Float[torch.Tensor, "B, M, L//128+1"]:
    """A torchaudio-style front end: torch.stft centred by zero padding (any length has a
    frame), power, mel filterbank over the onesided bins, log."""
    spec = torch.stft(x, n_fft=512, hop_length=128, window=torch.hann_window(512),
                      center=True, pad_mode="constant", return_complex=True)
    return torch.log(fb @ spec.abs() ** 2 + 1e-6)


def torch_log_mel_bug(x: Float[torch.Tensor, "B, L"], fb: Float[torch.Tensor, "M, 257"]
                      ) -> Float[torch.Tensor, "B, M, L//128"]:  # BUG: a centred stft's +1
    spec = torch.stft(x, n_fft=512, hop_length=128, window=torch.hann_window(512),
                      center=True, pad_mode="constant", return_complex=True)
    return torch.log(fb @ spec.abs() ** 2 + 1e-6)


# -- temporal convolutional networks (torch, JAX) ----------------------------------------------


def tcn_block(x: Float[torch.Tensor, "B C T"], w1: Float[torch.Tensor, "H C 3"],
              w2: Float[torch.Tensor, "H H 3"], wd: Float[torch.Tensor, "H C 1"],
              dilation: int = 4) -> Float[torch.Tensor, "B H T"]:
    """The TCN TemporalBlock: two dilated convs padded (k-1)*d on both sides and chomped back
    to causal, a 1x1 downsample on the residual."""
    pad = 2 * dilation
    h = F.relu(F.conv1d(x, w1, padding=pad, dilation=dilation)[:, :, :-pad])
    h = F.relu(F.conv1d(h, w2, padding=pad, dilation=dilation)[:, :, :-pad])
    return F.relu(h + F.conv1d(x, wd))


def tcn_block_bug(x: Float[torch.Tensor, "B C T"], w1: Float[torch.Tensor, "H C 3"],
                  w2: Float[torch.Tensor, "H H 3"], wd: Float[torch.Tensor, "H C 1"],
                  dilation: int = 4) -> Float[torch.Tensor, "B H T"]:
    pad = 2 * dilation
    h = F.relu(F.conv1d(x, w1, padding=pad, dilation=dilation)[:, :, :-pad])
    h = F.relu(F.conv1d(h, w2, padding=pad, dilation=dilation))  # BUG: not chomped
    return F.relu(h + F.conv1d(x, wd))


def causal_conv_jax(x: Float[jax.Array, "B, T, C"], w: Float[jax.Array, "3, C, H"]
                    ) -> Float[jax.Array, "B, T, H"]:
    """A dilated causal conv in JAX: lax.conv_general_dilated in NWC/WIO, left padding only."""
    d = 2
    return lax.conv_general_dilated(x, w, window_strides=(1,), padding=[(2 * d, 0)],
                                    rhs_dilation=(d,), dimension_numbers=("NWC", "WIO", "NWC"))


def causal_conv_jax_bug(x: Float[jax.Array, "B, T, C"], w: Float[jax.Array, "3, C, H"]
                        ) -> Float[jax.Array, "B, T, H"]:
    d = 2
    return lax.conv_general_dilated(x, w, window_strides=(1,), padding=[(2, 0)],  # BUG: d lost
                                    rhs_dilation=(d,), dimension_numbers=("NWC", "WIO", "NWC"))


def tcn_stack_jax(x: Float[jax.Array, "B, T, C"], ws: Float[jax.Array, "4, 2, C, C"]
                  ) -> Float[jax.Array, "B, T, C"]:
    """WaveNet/TCN dilations 1, 2, 4, 8 in a Python loop: each causal conv left-pads by its
    dilation (kernel 2), residual added."""
    for i in range(4):
        d = 2 ** i
        y = lax.conv_general_dilated(x, ws[i], (1,), [(d, 0)], rhs_dilation=(d,),
                                     dimension_numbers=("NWC", "WIO", "NWC"))
        x = x + jax.nn.relu(y)
    return x


def tcn_stack_jax_bug(x: Float[jax.Array, "B, T, C"], ws: Float[jax.Array, "4, 2, C, C"]
                      ) -> Float[jax.Array, "B, T, C"]:
    for i in range(4):
        d = 2 ** i
        y = lax.conv_general_dilated(x, ws[i], (1,), [(1, 0)], rhs_dilation=(d,),  # BUG: pad 1
                                     dimension_numbers=("NWC", "WIO", "NWC"))
        x = x + jax.nn.relu(y)
    return x


# -- CTC alignment tables (NumPy) ---------------------------------------------------------------


def ctc_alpha(log_probs: Float[np.ndarray, "T, V"], labels: Int[np.ndarray, "L"]
              ) -> Float[np.ndarray, "T, 2*L+1"]:
    """The CTC forward table: labels interleaved with blanks (2L+1 states), each state from
    itself, its left neighbour and, between different labels, the one two back."""
    S = 2 * len(labels) + 1
    ext = np.zeros(S, dtype=int)
    ext[1::2] = labels
    lp = log_probs[:, ext]
    alpha = np.full((log_probs.shape[0], S), -np.inf)
    alpha[0, :2] = lp[0, :2]
    skip = np.zeros(S, dtype=bool)
    skip[2:] = (ext[2:] != 0) & (ext[2:] != ext[:-2])
    for t in range(1, log_probs.shape[0]):
        prev = alpha[t - 1]
        one = np.concatenate([[-np.inf], prev[:-1]])
        two = np.where(skip, np.concatenate([[-np.inf, -np.inf], prev[:-2]]), -np.inf)
        alpha[t] = np.logaddexp(np.logaddexp(prev, one), two) + lp[t]
    return alpha


def ctc_alpha_bug(log_probs: Float[np.ndarray, "T, V"], labels: Int[np.ndarray, "L"]
                  ) -> Float[np.ndarray, "T, 2*L+1"]:
    S = 2 * len(labels) + 1
    ext = np.zeros(S, dtype=int)
    ext[1::2] = labels
    lp = log_probs[:, ext]
    alpha = np.full((log_probs.shape[0], S), -np.inf)
    alpha[0, :2] = lp[0, :2]
    skip = np.zeros(S, dtype=bool)
    skip[2:] = (ext[2:] != 0) & (ext[2:] != ext[:-2])
    for t in range(1, log_probs.shape[0]):
        prev = alpha[t - 1]
        one = np.concatenate([[-np.inf], prev[:-1]])
        two = np.where(skip, np.concatenate([[-np.inf], prev[:-2]]), -np.inf)  # BUG: one short
        alpha[t] = np.logaddexp(np.logaddexp(prev, one), two) + lp[t]
    return alpha


def ctc_alpha_scan(logits: Float[jax.Array, "B, T, V"], lab: Int[jax.Array, "B, L"]
                   ) -> Float[jax.Array, "B, T, 2*L+1"]:
    """The CTC forward table in JAX for a batch: blanks interleaved by .at[].set, the label
    log-probs by take_along_axis, lax.scan over time with the one- and two-back shifts as
    pads (the two-back term kept for every state here, as blank-free label sets allow)."""
    B, L = lab.shape
    S = 2 * L + 1
    ext = jnp.zeros((B, S), jnp.int32).at[:, 1::2].set(lab)
    idx = jnp.broadcast_to(ext[:, None, :], (B, logits.shape[1], S))
    lp = jnp.take_along_axis(jax.nn.log_softmax(logits), idx, axis=2)

    def step(alpha, lpt):
        one = jnp.pad(alpha, ((0, 0), (1, 0)), constant_values=-jnp.inf)[:, :-1]
        two = jnp.pad(alpha, ((0, 0), (2, 0)), constant_values=-jnp.inf)[:, :-2]
        a = jnp.logaddexp(jnp.logaddexp(alpha, one), two) + lpt
        return a, a
    a0 = jnp.full((B, S), -jnp.inf).at[:, :2].set(lp[:, 0, :2])
    _, alphas = lax.scan(step, a0, jnp.swapaxes(lp[:, 1:], 0, 1))
    return jnp.concatenate([a0[:, None], jnp.swapaxes(alphas, 0, 1)], axis=1)


def ctc_alpha_scan_bug(logits: Float[jax.Array, "B, T, V"], lab: Int[jax.Array, "B, L"]
                       ) -> Float[jax.Array, "B, T, 2*L+1"]:
    B, L = lab.shape
    S = 2 * L + 1
    ext = jnp.zeros((B, S), jnp.int32).at[:, 1::2].set(lab)
    idx = jnp.broadcast_to(ext[:, None, :], (B, logits.shape[1], S))
    lp = jnp.take_along_axis(jax.nn.log_softmax(logits), idx, axis=2)

    def step(alpha, lpt):
        one = jnp.pad(alpha, ((0, 0), (1, 0)), constant_values=-jnp.inf)[:, :-1]
        two = jnp.pad(alpha, ((0, 0), (1, 0)), constant_values=-jnp.inf)[:, :-2]  # BUG: pad 1
        a = jnp.logaddexp(jnp.logaddexp(alpha, one), two) + lpt
        return a, a
    a0 = jnp.full((B, S), -jnp.inf).at[:, :2].set(lp[:, 0, :2])
    _, alphas = lax.scan(step, a0, jnp.swapaxes(lp[:, 1:], 0, 1))
    return jnp.concatenate([a0[:, None], jnp.swapaxes(alphas, 0, 1)], axis=1)


def ctc_loss_torch(h: Float[torch.Tensor, "B T D"], w: Float[torch.Tensor, "V D"],
                   targets: Int[torch.Tensor, "B L"]) -> Float[torch.Tensor, ""]:
    """CTC training: log-softmax over the vocabulary, time-major [T, B, V] as ctc_loss wants."""
    lp = F.log_softmax(h @ w.T, dim=-1).transpose(0, 1)
    in_lens = torch.full((h.shape[0],), h.shape[1], dtype=torch.long)
    tgt_lens = torch.full((h.shape[0],), targets.shape[1], dtype=torch.long)
    return F.ctc_loss(lp, targets + 1, in_lens, tgt_lens, zero_infinity=True)


def ctc_loss_torch_bug(h: Float[torch.Tensor, "B T D"], w: Float[torch.Tensor, "V D"],
                       targets: Int[torch.Tensor, "B L"]) -> Float[torch.Tensor, ""]:
    lp = F.log_softmax(h @ w.T, dim=-1)  # BUG: batch-major
    in_lens = torch.full((h.shape[0],), h.shape[1], dtype=torch.long)
    tgt_lens = torch.full((h.shape[0],), targets.shape[1], dtype=torch.long)
    return F.ctc_loss(lp, targets + 1, in_lens, tgt_lens, zero_infinity=True)


def ctc_module(logits: Float[torch.Tensor, "T B C"], targets: Int[torch.Tensor, "B L"]
               ) -> Float[torch.Tensor, ""]:
    """nn.CTCLoss as PyTorch's documentation calls it: lengths built with torch.full and
    torch.randint, every size passed by keyword."""
    ctc = torch.nn.CTCLoss(blank=0, zero_infinity=True)
    in_lens = torch.full(size=(logits.shape[1],), fill_value=logits.shape[0], dtype=torch.long)
    tgt_lens = torch.randint(low=1, high=targets.shape[1], size=(logits.shape[1],))
    return ctc(logits.log_softmax(2), targets, in_lens, tgt_lens)


def ctc_module_bug(logits: Float[torch.Tensor, "T B C"], targets: Int[torch.Tensor, "B L"]
                   ) -> Float[torch.Tensor, ""]:
    ctc = torch.nn.CTCLoss(blank=0, zero_infinity=True)
    in_lens = torch.full(size=(logits.shape[0],), fill_value=logits.shape[0],  # BUG: T of them
                         dtype=torch.long)
    tgt_lens = torch.randint(low=1, high=targets.shape[1], size=(logits.shape[1],))
    return ctc(logits.log_softmax(2), targets, in_lens, tgt_lens)


# -- NeRF rendering (JAX) -----------------------------------------------------------------------


def nerf_render(rgb: Float[jax.Array, "R, S, 3"], sigma: Float[jax.Array, "R, S"],
                t: Float[jax.Array, "R, S"]) -> tuple[Float[jax.Array, "R, 3"],
                                                       Float[jax.Array, "R"]]:
    """NeRF's quadrature: deltas with a far last interval, alpha, transmittance as an
    exclusive cumprod, weights, colour and depth."""
    delta = jnp.concatenate([t[:, 1:] - t[:, :-1], jnp.full_like(t[:, :1], 1e10)], axis=-1)
    alpha = 1.0 - jnp.exp(-sigma * delta)
    trans = jnp.cumprod(jnp.concatenate([jnp.ones_like(alpha[:, :1]), 1.0 - alpha + 1e-10],
                                        axis=-1), axis=-1)[:, :-1]
    w = alpha * trans
    return (w[..., None] * rgb).sum(axis=1), (w * t).sum(axis=-1)


def nerf_render_bug(rgb: Float[jax.Array, "R, S, 3"], sigma: Float[jax.Array, "R, S"],
                    t: Float[jax.Array, "R, S"]) -> tuple[Float[jax.Array, "R, 3"],
                                                           Float[jax.Array, "R"]]:
    delta = jnp.concatenate([t[:, 1:] - t[:, :-1], jnp.full_like(t[:, :1], 1e10)], axis=-1)
    alpha = 1.0 - jnp.exp(-sigma * delta)
    trans = jnp.cumprod(jnp.concatenate([jnp.ones_like(alpha[:, :1]), 1.0 - alpha + 1e-10],
                                        axis=-1), axis=-1)  # BUG: [:, :-1] dropped, S+1
    w = alpha * trans
    return (w[..., None] * rgb).sum(axis=1), (w * t).sum(axis=-1)


def nerf_render_np(raw: Float[np.ndarray, "R, S, 4"], z: Float[np.ndarray, "S"],
                   dirs: Float[np.ndarray, "R, 3"]) -> Float[np.ndarray, "R, 3"]:
    """NumPy raw2outputs: shared depths, deltas scaled by the ray direction's norm, white
    background by the leftover weight."""
    dists = np.concatenate([z[1:] - z[:-1], [1e10]])[None, :] * \
        np.linalg.norm(dirs, axis=-1, keepdims=True)
    alpha = 1.0 - np.exp(-np.maximum(raw[..., 3], 0) * dists)
    T = np.cumprod(1.0 - alpha + 1e-10, axis=-1)
    T = np.concatenate([np.ones((alpha.shape[0], 1)), T[:, :-1]], axis=-1)
    w = alpha * T
    rgb = (w[..., None] * raw[..., :3]).sum(-2)
    return rgb + (1.0 - w.sum(-1, keepdims=True))


def nerf_render_np_bug(raw: Float[np.ndarray, "R, S, 4"], z: Float[np.ndarray, "S"],
                       dirs: Float[np.ndarray, "R, 3"]) -> Float[np.ndarray, "R, 3"]:
    dists = np.concatenate([z[1:] - z[:-1], [1e10]])[None, :] * \
        np.linalg.norm(dirs, axis=-1, keepdims=True)
    alpha = 1.0 - np.exp(-np.maximum(raw[..., 3], 0) * dists)
    T = np.cumprod(1.0 - alpha + 1e-10, axis=-1)
    T = np.concatenate([np.ones((alpha.shape[0], 1)), T[:, :-1]], axis=-1)
    w = alpha * T
    rgb = (w[..., None] * raw[..., :3]).sum(-2)
    return rgb + (1.0 - w.sum(-1))  # BUG: [R, 3] + [R]


# -- losses: label smoothing and focal loss (JAX, NumPy) ----------------------------------------


def smooth_ce(logits: Float[jax.Array, "B, C"], labels: Int[jax.Array, "B"], alpha: float = 0.1
              ) -> Float[jax.Array, ""]:
    """optax-style: one-hot, smooth_labels ((1 - a) y + a / C), softmax cross-entropy."""
    C = logits.shape[-1]
    y = jax.nn.one_hot(labels, C)
    y = (1.0 - alpha) * y + alpha / C
    return -(y * jax.nn.log_softmax(logits, axis=-1)).sum(-1).mean()


def smooth_ce_bug(logits: Float[jax.Array, "B, C"], labels: Int[jax.Array, "B"],
                  alpha: float = 0.1) -> Float[jax.Array, ""]:
    C = logits.shape[-1]
    y = jax.nn.one_hot(labels, logits.shape[0])  # BUG: as many classes as the batch
    y = (1.0 - alpha) * y + alpha / C
    return -(y * jax.nn.log_softmax(logits, axis=-1)).sum(-1).mean()


def sigmoid_focal(logits: Float[jax.Array, "B, A, C"], labels: Int[jax.Array, "B, A"],
                  gamma: float = 2.0) -> Float[jax.Array, "B"]:
    """RetinaNet's sigmoid focal loss in JAX: class 0 is background (no one-hot column),
    (1 - p_t)^gamma, alpha weighting, summed per image and normalised by its positives."""
    C = logits.shape[-1]
    y = jax.nn.one_hot(labels - 1, C)
    p = jax.nn.sigmoid(logits)
    ce = -(y * jax.nn.log_sigmoid(logits) + (1 - y) * jax.nn.log_sigmoid(-logits))
    p_t = p * y + (1 - p) * (1 - y)
    a_t = 0.25 * y + 0.75 * (1 - y)
    loss = (a_t * (1 - p_t) ** gamma * ce).sum(axis=(1, 2))
    return loss / jnp.maximum(1.0, (labels > 0).sum(axis=1))


def sigmoid_focal_bug(logits: Float[jax.Array, "B, A, C"], labels: Int[jax.Array, "B, A"],
                      gamma: float = 2.0) -> Float[jax.Array, "B"]:
    C = logits.shape[-1]
    y = jax.nn.one_hot(labels - 1, C)
    p = jax.nn.sigmoid(logits)
    ce = -(y * jax.nn.log_sigmoid(logits) + (1 - y) * jax.nn.log_sigmoid(-logits))
    p_t = p * y + (1 - p) * (1 - y)
    a_t = 0.25 * y + 0.75 * (1 - y)
    loss = (a_t * (1 - p_t) ** gamma * ce).sum(axis=(1, 2))
    return loss / jnp.maximum(1.0, (labels > 0).sum(axis=0))  # BUG: per anchor


def focal_np(probs: Float[np.ndarray, "N, C"], y: Int[np.ndarray, "N"], gamma: float = 2.0
             ) -> Float[np.ndarray, "N"]:
    """The multi-class focal loss in NumPy: p of the true class by fancy indexing."""
    p_t = probs[np.arange(len(y)), y]
    return -((1 - p_t) ** gamma) * np.log(p_t + 1e-12)


def focal_np_bug(probs: Float[np.ndarray, "N, C"], y: Int[np.ndarray, "N"], gamma: float = 2.0
                 ) -> Float[np.ndarray, "N"]:
    p_t = probs[:, y]  # BUG: every row at every label, [N, N]
    return -((1 - p_t) ** gamma) * np.log(p_t + 1e-12)


# -- data augmentation: mixup and cutmix (JAX, NumPy) -------------------------------------------


def mixup_jax(key: jax.Array, x: Float[jax.Array, "B, H, W, C"], y: Int[jax.Array, "B"],
              num_classes: int = 10) -> tuple[Float[jax.Array, "B, H, W, C"],
                                              Float[jax.Array, "B, 10"]]:
    """mixup: one Beta(0.2, 0.2) weight, a permutation of the batch, inputs and one-hot
    targets mixed alike."""
    k1, k2 = jax.random.split(key)
    lam = jax.random.beta(k1, 0.2, 0.2)
    perm = jax.random.permutation(k2, x.shape[0])
    t = jax.nn.one_hot(y, num_classes)
    return lam * x + (1 - lam) * x[perm], lam * t + (1 - lam) * t[perm]


def mixup_jax_bug(key: jax.Array, x: Float[jax.Array, "B, H, W, C"], y: Int[jax.Array, "B"],
                  num_classes: int = 10) -> tuple[Float[jax.Array, "B, H, W, C"],
                                                  Float[jax.Array, "B, 10"]]:
    k1, k2 = jax.random.split(key)
    lam = jax.random.beta(k1, 0.2, 0.2, (x.shape[0],))  # BUG: per example, not broadcastable
    perm = jax.random.permutation(k2, x.shape[0])
    t = jax.nn.one_hot(y, num_classes)
    return lam * x + (1 - lam) * x[perm], lam * t + (1 - lam) * t[perm]


# Not in CASES: the box side ``int(H * np.sqrt(1 - lam))``, as CutMix's reference code writes
# it, is a fresh size whose number at the witness is read back, under stated assumptions.
def cutmix_np(x: Float[np.ndarray, "B, C, H, W"], t: Float[np.ndarray, "B, K"], seed: int = 0
              ) -> tuple[Float[np.ndarray, "B, C, H, W"], Float[np.ndarray, "B, K"]]:
    """CutMix: a box of area (1 - lam) pasted from a shuffled batch, lam corrected by the
    clipped box's area, the targets mixed by it."""
    rng = np.random.default_rng(seed)
    B, _, H, W = x.shape
    lam = rng.beta(1.0, 1.0)
    perm = rng.permutation(B)
    rh, rw = int(H * np.sqrt(1 - lam)), int(W * np.sqrt(1 - lam))
    cy, cx = rng.integers(H), rng.integers(W)
    y0, y1 = np.clip(cy - rh // 2, 0, H), np.clip(cy + rh // 2, 0, H)
    x0, x1 = np.clip(cx - rw // 2, 0, W), np.clip(cx + rw // 2, 0, W)
    out = x.copy()
    out[:, :, y0:y1, x0:x1] = x[perm, :, y0:y1, x0:x1]
    lam = 1 - (y1 - y0) * (x1 - x0) / (H * W)
    return out, lam * t + (1 - lam) * t[perm]


def cutmix_np_bug(x: Float[np.ndarray, "B, C, H, W"], t: Float[np.ndarray, "B, K"],
                  seed: int = 0) -> tuple[Float[np.ndarray, "B, C, H, W"],
                                          Float[np.ndarray, "B, K"]]:
    rng = np.random.default_rng(seed)
    B, _, H, W = x.shape
    lam = rng.beta(1.0, 1.0)
    perm = rng.permutation(B)
    rh, rw = int(H * np.sqrt(1 - lam)), int(W * np.sqrt(1 - lam))
    cy, cx = rng.integers(H), rng.integers(W)
    y0, y1 = np.clip(cy - rh // 2, 0, H), np.clip(cy + rh // 2, 0, H)
    x0, x1 = np.clip(cx - rw // 2, 0, W), np.clip(cx + rw // 2, 0, W)
    out = x.copy()
    out[:, :, y0:y1, x0:x1] = x[perm, :, y0:y1, x0:x1]
    lam = 1 - (y1 - y0) * (x1 - x0) / (H * W)
    return out, lam * t + (1 - lam) * t[:, perm]  # BUG: permutes the classes


# -- reinforcement learning: replay buffer and TD targets (NumPy, torch, JAX) -------------------


def replay_sample(obs: Float[np.ndarray, "N, D"], act: Int[np.ndarray, "N"],
                  rew: Float[np.ndarray, "N"], batch: int = 4
                  ) -> tuple[Float[np.ndarray, "4, D"], Float[np.ndarray, "4, D"],
                             Float[np.ndarray, "4"]]:
    """A circular replay buffer's sample: indices below the filled size, the next observation
    at (i + 1) % N, actions one-hot weighted into the reward."""
    idx = np.random.default_rng(0).integers(0, len(obs), size=batch)
    nxt = (idx + 1) % obs.shape[0]
    return obs[idx], obs[nxt], rew[idx] * (act[idx] >= 0)


def replay_sample_bug(obs: Float[np.ndarray, "N, D"], act: Int[np.ndarray, "N"],
                      rew: Float[np.ndarray, "N"], batch: int = 4
                      ) -> tuple[Float[np.ndarray, "4, D"], Float[np.ndarray, "4, D"],
                                 Float[np.ndarray, "4"]]:
    idx = np.random.default_rng(0).integers(0, len(obs), size=batch)
    nxt = (idx + 1) % obs.shape[0]
    return obs[idx], obs[nxt], rew[idx] * (act >= 0)  # BUG: every action in the buffer


def dqn_td_loss(q: Float[torch.Tensor, "B A"], q_next: Float[torch.Tensor, "B A"],
                q_next_online: Float[torch.Tensor, "B A"], a: Int[torch.Tensor, "B"],
                r: Float[torch.Tensor, "B"], done: Float[torch.Tensor, "B"]
                ) -> Float[torch.Tensor, ""]:
    """Double DQN: the online net picks the next action, the target net values it, the taken
    action's Q by gather, Huber loss."""
    q_sa = q.gather(1, a.unsqueeze(1)).squeeze(1)
    best = q_next_online.argmax(dim=1, keepdim=True)
    target = r + 0.99 * (1 - done) * q_next.gather(1, best).squeeze(1)
    return F.smooth_l1_loss(q_sa, target.detach())


def dqn_td_loss_bug(q: Float[torch.Tensor, "B A"], q_next: Float[torch.Tensor, "B A"],
                    q_next_online: Float[torch.Tensor, "B A"], a: Int[torch.Tensor, "B"],
                    r: Float[torch.Tensor, "B"], done: Float[torch.Tensor, "B"]
                    ) -> Float[torch.Tensor, ""]:
    q_sa = q.gather(1, a.unsqueeze(1))  # BUG: [B, 1] against a [B] target
    best = q_next_online.argmax(dim=1, keepdim=True)
    target = r + 0.99 * (1 - done) * q_next.gather(1, best).squeeze(1)
    return F.smooth_l1_loss(q_sa, target.detach())


def dqn_target_jax(q_next: Float[jax.Array, "B, A"], q: Float[jax.Array, "B, A"],
                   a: Int[jax.Array, "B"], r: Float[jax.Array, "B"],
                   discount: Float[jax.Array, "B"]) -> Float[jax.Array, "B"]:
    """rlax-style Q-learning TD error: the taken action's value by take_along_axis, a
    stop-gradient bootstrap of the next state's max."""
    q_sa = jnp.take_along_axis(q, a[:, None], axis=1)[:, 0]
    target = r + discount * lax.stop_gradient(q_next.max(axis=-1))
    return target - q_sa


def dqn_target_jax_bug(q_next: Float[jax.Array, "B, A"], q: Float[jax.Array, "B, A"],
                       a: Int[jax.Array, "B"], r: Float[jax.Array, "B"],
                       discount: Float[jax.Array, "B"]) -> Float[jax.Array, "B"]:
    q_sa = jnp.take_along_axis(q, a[:, None], axis=1)[:, 0]
    target = r + discount * lax.stop_gradient(q_next.max(axis=0))  # BUG: over the batch
    return target - q_sa


# -- graph attention over edge_index (torch) ----------------------------------------------------


def gat_layer(x: Float[torch.Tensor, "N D"], edge_index: Int[torch.Tensor, "2 E"],
              W: Float[torch.Tensor, "D 4*F"], a_src: Float[torch.Tensor, "4 F"],
              a_dst: Float[torch.Tensor, "4 F"]) -> Float[torch.Tensor, "N 4*F"]:
    """PyG-style GATConv with 4 heads: per-edge scores from both ends, a softmax over each
    target's incoming edges (scatter_reduce amax, index_add of the exponentials), messages
    weighted and added at the targets, heads concatenated."""
    N = x.shape[0]
    h = (x @ W).view(N, 4, -1)
    src, dst = edge_index
    e = F.leaky_relu((h * a_src).sum(-1)[src] + (h * a_dst).sum(-1)[dst], 0.2)
    emax = torch.full((N, 4), -1e9).scatter_reduce(0, dst[:, None].expand_as(e), e, "amax")
    p = torch.exp(e - emax[dst])
    denom = torch.zeros(N, 4).index_add_(0, dst, p)
    alpha = p / (denom[dst] + 1e-16)
    out = torch.zeros_like(h).index_add_(0, dst, alpha[..., None] * h[src])
    return out.reshape(N, -1)


def gat_layer_bug(x: Float[torch.Tensor, "N D"], edge_index: Int[torch.Tensor, "2 E"],
                  W: Float[torch.Tensor, "D 4*F"], a_src: Float[torch.Tensor, "4 F"],
                  a_dst: Float[torch.Tensor, "4 F"]) -> Float[torch.Tensor, "N 4*F"]:
    N = x.shape[0]
    h = (x @ W).view(N, 4, -1)
    src, dst = edge_index
    e = F.leaky_relu((h * a_src).sum(-1)[src] + (h * a_dst).sum(-1)[dst], 0.2)
    emax = torch.full((N, 4), -1e9).scatter_reduce(0, dst[:, None].expand_as(e), e, "amax")
    p = torch.exp(e - emax[dst])
    denom = torch.zeros(N, 4).index_add_(0, dst, p)
    alpha = p / (denom + 1e-16)  # BUG: per node, not gathered per edge
    out = torch.zeros_like(h).index_add_(0, dst, alpha[..., None] * h[src])
    return out.reshape(N, -1)


def gcn_norm_np(A: Float[np.ndarray, "N, N"], X: Float[np.ndarray, "N, D"],
                W: Float[np.ndarray, "D, H"]) -> Float[np.ndarray, "N, H"]:
    """Kipf & Welling's propagation in NumPy: self-loops, symmetric degree normalisation."""
    A_hat = A + np.eye(A.shape[0])
    d = 1.0 / np.sqrt(A_hat.sum(axis=1))
    return np.maximum(0, (d[:, None] * A_hat * d[None, :]) @ X @ W)


def gcn_norm_np_bug(A: Float[np.ndarray, "N, N"], X: Float[np.ndarray, "N, D"],
                    W: Float[np.ndarray, "D, H"]) -> Float[np.ndarray, "N, H"]:
    A_hat = A + np.eye(A.shape[0])
    d = 1.0 / np.sqrt(A_hat.sum(axis=1))
    return np.maximum(0, (d[:, None] * A_hat * d[None, :]) @ W @ X)  # BUG: order


# -- point clouds in JAX ------------------------------------------------------------------------


def fps_jax(xyz: Float[jax.Array, "N, 3"]) -> Int[jax.Array, "16"]:
    """Farthest point sampling under fori_loop: the chosen ids and running distances as the
    carry, dynamic updates at step i."""
    def body(i, carry):
        idx, dist = carry
        d = jnp.sum((xyz - xyz[idx[i - 1]]) ** 2, axis=-1)
        dist = jnp.minimum(dist, d)
        return idx.at[i].set(jnp.argmax(dist)), dist
    idx0 = jnp.zeros(16, dtype=jnp.int32)
    idx, _ = lax.fori_loop(1, 16, body, (idx0, jnp.full(xyz.shape[0], jnp.inf)))
    return idx


def fps_jax_bug(xyz: Float[jax.Array, "N, 3"]) -> Int[jax.Array, "16"]:
    def body(i, carry):
        idx, dist = carry
        d = jnp.sum((xyz - xyz[idx[i - 1]]) ** 2, axis=0)  # BUG: over the points
        dist = jnp.minimum(dist, d)
        return idx.at[i].set(jnp.argmax(dist)), dist
    idx0 = jnp.zeros(16, dtype=jnp.int32)
    idx, _ = lax.fori_loop(1, 16, body, (idx0, jnp.full(xyz.shape[0], jnp.inf)))
    return idx


CASES = [
    ("torchvision box_iou", box_iou, box_iou_bug, "TS101"),
    ("batched fast nms", fast_nms_keep, fast_nms_keep_bug, "TS101"),
    ("box coder decode", box_decode, box_decode_bug, "TS103"),
    ("beam search step", beam_step, beam_step_bug, "TS106"),
    ("flax beam search step", beam_step_jax, beam_step_jax_bug, "TS103"),
    ("raft flow warp", flow_warp, flow_warp_bug, "TS108"),
    ("stn affine_grid crop", stn_crop, stn_crop_bug, "TS108"),
    ("pointnet++ fps", farthest_point_sample, farthest_point_sample_bug, "TS101"),
    ("pointnet++ knn group", knn_group, knn_group_bug, "TS101"),
    ("pointnet++ ball query torch", ball_query_torch, ball_query_torch_bug, "TS105"),
    ("pointnet++ ball query", ball_query_np, ball_query_np_bug, "TS101"),
    ("realnvp coupling", realnvp_coupling, realnvp_coupling_bug, "TS103"),
    ("glow coupling", glow_coupling, glow_coupling_bug, "TS103"),
    ("gp predict", gp_predict, gp_predict_bug, "TS102"),
    ("gp log marginal", gp_log_marginal, gp_log_marginal_bug, "TS103"),
    ("mvn log_prob, broadcast_shapes", mvn_log_prob, mvn_log_prob_bug, "TS101"),
    ("hmm forward", hmm_forward, hmm_forward_bug, "TS101"),
    ("viterbi", viterbi, viterbi_bug, "TS101"),
    ("hmm forward scan", hmm_forward_scan, hmm_forward_scan_bug, "TS101"),
    ("sinkhorn", sinkhorn, sinkhorn_bug, "TS102"),
    ("log-domain sinkhorn", sinkhorn_log, sinkhorn_log_bug, "TS101"),
    ("stft frames", stft_frames, stft_frames_bug, "TS103"),
    ("centred stft by a loop", stft_centered, stft_centered_bug, "TS101"),
    ("log mel", log_mel, log_mel_bug, "TS102"),
    ("jax mel front end", mel_frontend_jax, mel_frontend_jax_bug, "TS102"),
    ("tcn temporal block", tcn_block, tcn_block_bug, "TS101"),
    ("jax dilated causal conv", causal_conv_jax, causal_conv_jax_bug, "TS103"),
    ("jax tcn dilation stack", tcn_stack_jax, tcn_stack_jax_bug, "TS101"),
    ("ctc alpha table", ctc_alpha, ctc_alpha_bug, "TS101"),
    ("jax ctc table by scan", ctc_alpha_scan, ctc_alpha_scan_bug, "TS101"),
    ("ctc loss time-major", ctc_loss_torch, ctc_loss_torch_bug, "TS108"),
    ("ctc loss module, sizes by keyword", ctc_module, ctc_module_bug, "TS108"),
    ("nerf render jax", nerf_render, nerf_render_bug, "TS101"),
    ("nerf raw2outputs", nerf_render_np, nerf_render_np_bug, "TS101"),
    ("label smoothing", smooth_ce, smooth_ce_bug, "TS101"),
    ("sigmoid focal", sigmoid_focal, sigmoid_focal_bug, "TS101"),
    ("focal fancy index", focal_np, focal_np_bug, "TS103"),
    ("torch stft frames", torch_log_mel, torch_log_mel_bug, "TS103"),
    ("mixup jax", mixup_jax, mixup_jax_bug, "TS101"),
    ("replay sample", replay_sample, replay_sample_bug, "TS101"),
    ("double dqn loss", dqn_td_loss, dqn_td_loss_bug, "TS101"),
    ("rlax q-learning", dqn_target_jax, dqn_target_jax_bug, "TS101"),
    ("gat edge softmax", gat_layer, gat_layer_bug, "TS101"),
    ("gcn normalisation", gcn_norm_np, gcn_norm_np_bug, "TS102"),
    ("fps fori_loop", fps_jax, fps_jax_bug, "TS101"),
]

# the bugs torch rejects: the trace stops there, with the note saying so
STOPS = {"raft flow warp", "stn affine_grid crop"}
# correct code that needs a size at least its k nearest / its group size: the one warning
ASSUMES = {"pointnet++ knn group": "assumes 4 <= N", "pointnet++ ball query": "assumes 8 <= N",
           "pointnet++ ball query torch": "assumes 8 <= N",
           "flax beam search step": "assumes 2 <= V"}  # top_k of 2K of K*V
