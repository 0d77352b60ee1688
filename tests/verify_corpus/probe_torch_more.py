"""More realistic PyTorch code for ``tensig.verify``, in pairs: a correct function and the same
with one planted bug (``# BUG``), in the style of public diffusion, detection, graph,
recommender, speech, RL, vision-transformer and beam-search code; nothing is copied.

:data:`PAIRS` lists ``(correct, buggy, expected finding code)``;
``tests/test_verify_realcode.py`` asserts each correct one verifies with no finding or note
and each buggy one reports its code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from tensig import Float, Int

# -- diffusion ---------------------------------------------------------------------------------


def q_sample(x0: Float[torch.Tensor, "B C H W"], t: Int[torch.Tensor, "B"],
             noise: Float[torch.Tensor, "B C H W"], acp: Float[torch.Tensor, "T"]
             ) -> Float[torch.Tensor, "B C H W"]:
    sa = acp[t].sqrt()[:, None, None, None]
    s1 = (1 - acp[t]).sqrt().view(-1, 1, 1, 1)
    return sa * x0 + s1 * noise


def q_sample_bug(x0: Float[torch.Tensor, "B C H W"], t: Int[torch.Tensor, "B"],
                 noise: Float[torch.Tensor, "B C H W"], acp: Float[torch.Tensor, "T"]
                 ) -> Float[torch.Tensor, "B C H W"]:
    sa = acp[t].sqrt()[:, None]  # BUG: [B, 1] meets [.., H, W]
    s1 = (1 - acp[t]).sqrt().view(-1, 1, 1, 1)
    return sa * x0 + s1 * noise


# -- detection ---------------------------------------------------------------------------------


def decode_boxes(rel: Float[torch.Tensor, "N 4*K"], boxes: Float[torch.Tensor, "N 4"]
                 ) -> Float[torch.Tensor, "N 4*K"]:
    widths = boxes[:, 2] - boxes[:, 0]
    heights = boxes[:, 3] - boxes[:, 1]
    cx = rel[:, 0::4] * widths[:, None] + (boxes[:, 0] + 0.5 * widths)[:, None]
    cy = rel[:, 1::4] * heights[:, None] + (boxes[:, 1] + 0.5 * heights)[:, None]
    w = torch.exp(rel[:, 2::4]) * widths[:, None]
    h = torch.exp(rel[:, 3::4]) * heights[:, None]
    return torch.stack((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2), dim=2).flatten(1)


def decode_boxes_bug(rel: Float[torch.Tensor, "N 4*K"], boxes: Float[torch.Tensor, "N 4"]
                     ) -> Float[torch.Tensor, "N 4*K"]:
    widths = boxes[:, 2] - boxes[:, 0]
    heights = boxes[:, 3] - boxes[:, 1]
    cx = rel[:, 0::4] * widths + (boxes[:, 0] + 0.5 * widths)[:, None]  # BUG: widths [N]
    cy = rel[:, 1::4] * heights[:, None] + (boxes[:, 1] + 0.5 * heights)[:, None]
    w = torch.exp(rel[:, 2::4]) * widths[:, None]
    h = torch.exp(rel[:, 3::4]) * heights[:, None]
    return torch.stack((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2), dim=2).flatten(1)


def grid_anchors(base: Float[torch.Tensor, "A 4"], feat: Float[torch.Tensor, "B C H W"]
                 ) -> Float[torch.Tensor, "H*W*A 4"]:
    h, w = feat.shape[-2:]
    sy, sx = torch.meshgrid(torch.arange(0, h) * 16, torch.arange(0, w) * 16, indexing="ij")
    sx, sy = sx.reshape(-1), sy.reshape(-1)
    shifts = torch.stack((sx, sy, sx, sy), dim=1)
    return (shifts.view(-1, 1, 4) + base.view(1, -1, 4)).reshape(-1, 4)


def grid_anchors_bug(base: Float[torch.Tensor, "A 4"], feat: Float[torch.Tensor, "B C H W"]
                     ) -> Float[torch.Tensor, "H*W*A 4"]:
    h = feat.shape[-2]  # BUG: the width never read, the x shifts run over h
    sy, sx = torch.meshgrid(torch.arange(0, h) * 16, torch.arange(0, h) * 16, indexing="ij")
    sx, sy = sx.reshape(-1), sy.reshape(-1)
    shifts = torch.stack((sx, sy, sx, sy), dim=1)
    return (shifts.view(-1, 1, 4) + base.view(1, -1, 4)).reshape(-1, 4)


def matched_targets(iou: Float[torch.Tensor, "G A"], gt: Float[torch.Tensor, "G 4"],
                    low: float = 0.3) -> Float[torch.Tensor, "P 4"]:
    """Matcher with low-quality matches, then the boxes of the positive anchors."""
    vals, matches = iou.max(dim=0)
    matches[vals < low] = -1
    best, _ = iou.max(dim=1)
    _, pred_idx = torch.where(iou == best[:, None])
    matches[pred_idx] = pred_idx
    pos = torch.nonzero(matches >= 0).squeeze(1)
    return gt[matches[pos]]


def matched_targets_bug(iou: Float[torch.Tensor, "G A"], gt: Float[torch.Tensor, "G 4"],
                        low: float = 0.3) -> Float[torch.Tensor, "P 4"]:
    vals, matches = iou.max(dim=0)
    matches[vals < low] = -1
    best, _ = iou.max(dim=1)
    _, pred_idx = torch.where(iou == best[:, None])
    matches[pred_idx] = pred_idx
    pos = torch.nonzero(matches >= 0)  # BUG: [P, 1], the squeeze forgotten
    return gt[matches[pos]]


# -- graph networks ----------------------------------------------------------------------------


def segment_softmax(scores: Float[torch.Tensor, "E H"], index: Int[torch.Tensor, "E"],
                    x: Float[torch.Tensor, "N D"]) -> Float[torch.Tensor, "E H"]:
    n = x.size(0)
    smax = scores.new_full((n, scores.size(1)), float("-inf")).scatter_reduce(
        0, index.unsqueeze(-1).expand_as(scores), scores, reduce="amax", include_self=True)
    out = (scores - smax[index]).exp()
    denom = torch.zeros(n, scores.size(1)).index_add_(0, index, out)
    return out / (denom[index] + 1e-16)


def gat_layer(x: Float[torch.Tensor, "N H C"], edge_index: Int[torch.Tensor, "2 E"],
              att: Float[torch.Tensor, "1 H C"]) -> Float[torch.Tensor, "N H C"]:
    src, dst = edge_index
    alpha = F.leaky_relu((x * att).sum(-1)[src] + (x * att).sum(dim=-1)[dst], 0.2)
    alpha = segment_softmax(alpha, dst, x[:, 0])
    out = torch.zeros_like(x)
    out.index_add_(0, dst, x[src] * alpha.unsqueeze(-1))
    return out


def gat_layer_bug(x: Float[torch.Tensor, "N H C"], edge_index: Int[torch.Tensor, "2 E"],
                  att: Float[torch.Tensor, "1 H C"]) -> Float[torch.Tensor, "N H C"]:
    src, dst = edge_index
    alpha = F.leaky_relu((x * att).sum(-1)[src] + (x * att).sum(dim=-1)[dst], 0.2)
    alpha = segment_softmax(alpha, dst, x[:, 0])
    out = torch.zeros_like(x)
    out.index_add_(0, dst, x[src] * alpha)  # BUG: [E, H, C] * [E, H]
    return out


def gcn_layer(x: Float[torch.Tensor, "N D"], edge_index: Int[torch.Tensor, "2 E"],
              w: Float[torch.Tensor, "D F"]) -> Float[torch.Tensor, "N F"]:
    row, col = edge_index
    deg = torch.bincount(col, minlength=x.size(0)).clamp(min=1).float()
    norm = deg.pow(-0.5)
    msg = (x @ w)[row] * (norm[row] * norm[col]).unsqueeze(-1)
    return torch.zeros(x.size(0), w.size(1)).index_add(0, col, msg)


def gcn_layer_bug(x: Float[torch.Tensor, "N D"], edge_index: Int[torch.Tensor, "2 E"],
                  w: Float[torch.Tensor, "D F"]) -> Float[torch.Tensor, "N F"]:
    row, col = edge_index
    deg = torch.bincount(col, minlength=x.size(0)).clamp(min=1).float()
    norm = deg.pow(-0.5)
    msg = (x @ w)[row] * (norm[row] * norm[col]).unsqueeze(-1)
    return torch.zeros(x.size(0), w.size(1)).index_add(0, row[:1], msg)  # BUG: one index


# -- recommenders ------------------------------------------------------------------------------


def dlrm_interact(dense: Float[torch.Tensor, "B D"], sparse: Float[torch.Tensor, "B F D"]
                  ) -> Float[torch.Tensor, "B D+(F+1)*F//2"]:
    t = torch.cat([dense.unsqueeze(1), sparse], dim=1)
    z = torch.bmm(t, t.transpose(1, 2))
    li, lj = torch.tril_indices(t.shape[1], t.shape[1], offset=-1)
    return torch.cat([dense, z[:, li, lj]], dim=1)


def dlrm_interact_bug(dense: Float[torch.Tensor, "B D"], sparse: Float[torch.Tensor, "B F D"]
                      ) -> Float[torch.Tensor, "B D+(F+1)*F//2"]:
    t = torch.cat([dense.unsqueeze(1), sparse], dim=1)
    z = torch.bmm(t, t.transpose(1, 2))
    li, lj = torch.tril_indices(t.shape[1], t.shape[1])  # BUG: the diagonal included
    return torch.cat([dense, z[:, li, lj]], dim=1)


def bpr_loss(u: Float[torch.Tensor, "B D"], pos: Float[torch.Tensor, "B D"],
             neg: Float[torch.Tensor, "B K D"]) -> Float[torch.Tensor, ""]:
    ps = (u * pos).sum(-1, keepdim=True)
    ns = torch.einsum("bd,bkd->bk", u, neg)
    return -F.logsigmoid(ps - ns).mean()


def bpr_loss_bug(u: Float[torch.Tensor, "B D"], pos: Float[torch.Tensor, "B D"],
                 neg: Float[torch.Tensor, "B K D"]) -> Float[torch.Tensor, ""]:
    ps = (u * pos).sum(-1)  # BUG: [B] against [B, K]
    ns = torch.einsum("bd,bkd->bk", u, neg)
    return -F.logsigmoid(ps - ns).mean()


# -- speech ------------------------------------------------------------------------------------


def log_mel(wav: Float[torch.Tensor, "B 160*T+240"], fb: Float[torch.Tensor, "201 M"]
            ) -> Float[torch.Tensor, "B T M"]:
    frames = wav.unfold(1, 400, 160)
    spec = torch.fft.rfft(frames * torch.hann_window(400), n=400).abs() ** 2
    return torch.log((spec @ fb).clamp(min=1e-10))


def log_mel_bug(wav: Float[torch.Tensor, "B 160*T+240"], fb: Float[torch.Tensor, "201 M"]
                ) -> Float[torch.Tensor, "B T M"]:
    frames = wav.unfold(1, 400, 160)
    spec = torch.fft.rfft(frames * torch.hann_window(400), n=512).abs() ** 2  # BUG: 257 bins
    return torch.log((spec @ fb).clamp(min=1e-10))


def ctc_head(h: Float[torch.Tensor, "B T D"], w: Float[torch.Tensor, "V D"],
             targets: Int[torch.Tensor, "B S"], in_lens: Int[torch.Tensor, "B"],
             tgt_lens: Int[torch.Tensor, "B"]) -> Float[torch.Tensor, ""]:
    lp = F.linear(h, w).log_softmax(-1).transpose(0, 1)
    return F.ctc_loss(lp, targets, in_lens, tgt_lens, zero_infinity=True)


def ctc_head_bug(h: Float[torch.Tensor, "B T D"], w: Float[torch.Tensor, "V D"],
                 targets: Int[torch.Tensor, "B S"], in_lens: Int[torch.Tensor, "B"],
                 tgt_lens: Int[torch.Tensor, "B"]) -> Float[torch.Tensor, ""]:
    lp = F.linear(h, w).log_softmax(-1)  # BUG: batch first
    return F.ctc_loss(lp, targets, in_lens, tgt_lens, zero_infinity=True)


# -- reinforcement learning --------------------------------------------------------------------


def value_loss(v: Float[torch.Tensor, "N 1"], old_v: Float[torch.Tensor, "N"],
               ret: Float[torch.Tensor, "N"], clip: float = 0.2) -> Float[torch.Tensor, ""]:
    newvalue = v.view(-1)
    clipped = old_v + torch.clamp(newvalue - old_v, -clip, clip)
    return 0.5 * torch.max((newvalue - ret) ** 2, (clipped - ret) ** 2).mean()


def value_loss_bug(v: Float[torch.Tensor, "N 1"], old_v: Float[torch.Tensor, "N"],
                   ret: Float[torch.Tensor, "N"], clip: float = 0.2) -> Float[torch.Tensor, ""]:
    clipped = old_v + torch.clamp(v.view(-1) - old_v, -clip, clip)
    return 0.5 * torch.max((v - ret) ** 2, (clipped - ret) ** 2).mean()  # BUG: [N, 1] - [N]


def policy_terms(mean: Float[torch.Tensor, "N A"], logstd: Float[torch.Tensor, "1 A"],
                 logits: Float[torch.Tensor, "N K"], actions: Int[torch.Tensor, "N"]
                 ) -> tuple[Float[torch.Tensor, "N"], Float[torch.Tensor, "N"]]:
    normal = torch.distributions.Normal(mean, logstd.exp().expand_as(mean))
    cat = torch.distributions.Categorical(logits=logits)
    return normal.log_prob(normal.sample()).sum(1) + cat.log_prob(actions), cat.entropy()


def policy_terms_bug(mean: Float[torch.Tensor, "N A"], logstd: Float[torch.Tensor, "1 A"],
                     logits: Float[torch.Tensor, "N K"], actions: Int[torch.Tensor, "N"]
                     ) -> tuple[Float[torch.Tensor, "N"], Float[torch.Tensor, "N"]]:
    normal = torch.distributions.Normal(mean, logstd.exp().expand_as(mean))
    cat = torch.distributions.Categorical(logits=logits)
    return normal.log_prob(normal.sample()) + cat.log_prob(actions), cat.entropy()  # BUG: no sum


def dqn_target(q_next: Float[torch.Tensor, "B A"], r: Float[torch.Tensor, "B"],
               done: Float[torch.Tensor, "B"]) -> Float[torch.Tensor, "B"]:
    target_max, _ = q_next.max(dim=1)
    return r.flatten() + 0.99 * target_max * (1 - done.flatten())


def dqn_target_bug(q_next: Float[torch.Tensor, "B A"], r: Float[torch.Tensor, "B"],
                   done: Float[torch.Tensor, "B"]) -> Float[torch.Tensor, "B"]:
    target_max, _ = q_next.max(dim=1, keepdim=True)  # BUG: [B, 1] against [B]
    return r.flatten() + 0.99 * target_max * (1 - done.flatten())


# -- vision transformers and beam search -------------------------------------------------------


def patchify(imgs: Float[torch.Tensor, "B 3 16*H 16*W"]) -> Float[torch.Tensor, "B H*W 768"]:
    return F.unfold(imgs, kernel_size=16, stride=16).transpose(1, 2)


def patchify_bug(imgs: Float[torch.Tensor, "B 3 16*H 16*W"]) -> Float[torch.Tensor, "B H*W 768"]:
    return F.unfold(imgs, kernel_size=16, stride=8).transpose(1, 2)  # BUG: overlapping


def beam_step(logprobs: Float[torch.Tensor, "B*K V"], scores: Float[torch.Tensor, "B K"],
              tokens: Int[torch.Tensor, "B*K L"]
              ) -> tuple[Float[torch.Tensor, "B K"], Int[torch.Tensor, "B*K L+1"]]:
    B, K = scores.shape
    V = logprobs.shape[-1]
    top, idx = (scores.view(-1, 1) + logprobs).view(B, K * V).topk(K, dim=1)
    beam = torch.div(idx, V, rounding_mode="floor")
    sel = (beam + (torch.arange(B) * K).unsqueeze(1)).view(-1)
    return top, torch.cat([tokens[sel], (idx % V).view(-1, 1)], dim=-1)


def beam_step_bug(logprobs: Float[torch.Tensor, "B*K V"], scores: Float[torch.Tensor, "B K"],
                  tokens: Int[torch.Tensor, "B*K L"]
                  ) -> tuple[Float[torch.Tensor, "B K"], Int[torch.Tensor, "B*K L+1"]]:
    B, K = scores.shape
    V = logprobs.shape[-1]
    top, idx = (scores.view(-1, 1) + logprobs).topk(K, dim=1)  # BUG: per beam, not flattened
    beam = torch.div(idx, V, rounding_mode="floor")
    sel = (beam + (torch.arange(B) * K).unsqueeze(1)).view(-1)
    return top, torch.cat([tokens[sel], (idx % V).view(-1, 1)], dim=-1)


PAIRS: list[tuple[Callable[..., Any], Callable[..., Any], str]] = [
    (q_sample, q_sample_bug, "TS101"),
    (decode_boxes, decode_boxes_bug, "TS101"),
    (grid_anchors, grid_anchors_bug, "TS103"),
    (matched_targets, matched_targets_bug, "TS103"),
    (gat_layer, gat_layer_bug, "TS101"),
    (gcn_layer, gcn_layer_bug, "TS108"),
    (dlrm_interact, dlrm_interact_bug, "TS103"),
    (bpr_loss, bpr_loss_bug, "TS101"),
    (log_mel, log_mel_bug, "TS102"),
    (ctc_head, ctc_head_bug, "TS108"),
    (value_loss, value_loss_bug, "TS201"),
    (policy_terms, policy_terms_bug, "TS101"),
    (dqn_target, dqn_target_bug, "TS103"),
    (patchify, patchify_bug, "TS103"),
    (beam_step, beam_step_bug, "TS101"),
]
