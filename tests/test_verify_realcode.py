"""verify on PyTorch code written the way public implementations write it (detection, graph
networks, recommenders, speech, RL, vision transformers, beam search): each test is a pattern
that once stopped the trace, raised a false alarm or missed a bug."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from arrays import clean, kinds
from tensig import Bool, Float, Int
from tensig.check.verify import Signature, verify

# -- torch semantics from the annotations ----------------------------------------------------


def dqn_target(q_next: Float[torch.Tensor, "B A"], r: Float[torch.Tensor, "B"],
               done: Float[torch.Tensor, "B"]) -> Float[torch.Tensor, "B"]:
    target_max, _ = q_next.max(dim=1)
    return r.flatten() + 0.99 * target_max * (1 - done.flatten())


def test_torch_tensor_annotations_select_torch_semantics():
    """A body of tensor methods only (no ``torch.`` name in it) is torch code when its
    annotations say ``torch.Tensor``: ``x.max(dim=1)`` gives values and indices (it stopped
    with 'too many values to unpack')."""
    r = verify(dqn_target)
    assert r.ok and not r.notes, str(r)


# -- assignments -----------------------------------------------------------------------------


def gae(rewards: Float[torch.Tensor, "T E"], values: Float[torch.Tensor, "T E"],
        next_value: Float[torch.Tensor, "E"]) -> Float[torch.Tensor, "T E"]:
    """cleanrl's loop: ``next_value`` reshaped to [1, E] is assigned into a row."""
    advantages = torch.zeros_like(rewards)
    nextvalues = next_value.reshape(1, -1)
    delta = rewards[-1] + 0.99 * nextvalues - values[-1]
    advantages[-1] = delta
    return advantages


def gae_bug(rewards: Float[torch.Tensor, "T E"], values: Float[torch.Tensor, "T E"],
            next_value: Float[torch.Tensor, "E"]) -> Float[torch.Tensor, "T E"]:
    advantages = torch.zeros_like(rewards)
    nextvalues = next_value.reshape(-1, 1)  # [E, 1]
    delta = rewards[-1] + 0.99 * nextvalues - values[-1]
    advantages[-1] = delta
    return advantages


def test_an_assigned_value_drops_leading_ones():
    """NumPy and torch both drop a value's leading 1s beyond the target's rank."""
    assert verify(gae).ok, str(verify(gae))
    assert "broadcast" in kinds(verify(gae_bug)) or "outer-product" in kinds(verify(gae_bug))


# -- the command line's time limit -----------------------------------------------------------


def test_torch_first_meta_op_is_not_charged_to_the_time_limit():
    """torch's first meta-tensor op imports torch._dynamo (seconds): under a 1 s limit it was
    cut short, and the half-done import failed every later op ('Duplicate dispatch rule')."""
    import subprocess
    import sys

    code = ("import torch, torch.nn.functional as F\n"
            "from tensig.check.verify import verify\n"
            "r = verify(lambda x: F.logsigmoid(x), 'B K => B K', timeout=0.5)\n"
            "s = verify(lambda x: F.logsigmoid(x).sum(-1), 'B K => B', timeout=0.5)\n"
            "print(r.ok, s.ok, r.notes, s.notes)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.stdout.startswith("True True"), out.stdout + out.stderr


# -- data-dependent sizes: fresh sizes, as NumPy's nonzero and unique have -------------------


def matcher(iou: Float[torch.Tensor, "G A"], low: float = 0.3) -> Int[torch.Tensor, "A"]:
    """torchvision's Matcher: low-quality matches allowed through torch.where(cond)."""
    vals, matches = iou.max(dim=0)
    matches[vals < low] = -1
    best_for_gt, _ = iou.max(dim=1)
    _, pred_idx = torch.where(iou == best_for_gt[:, None])
    matches[pred_idx] = pred_idx
    return matches


def sample_positives(labels: Int[torch.Tensor, "N"], boxes: Float[torch.Tensor, "N 4"]
                     ) -> Float[torch.Tensor, "P 4"]:
    pos = torch.nonzero(labels >= 1).squeeze(1)
    neg = (labels == 0).nonzero(as_tuple=True)[0]
    both = torch.cat([boxes[pos], boxes[neg]])
    return both[torch.argwhere(both[:, 0] > 0)[:, 0]]


def class_counts(batch: Int[torch.Tensor, "N"], x: Float[torch.Tensor, "N D"],
                 graphs: Float[torch.Tensor, "G"]) -> Float[torch.Tensor, "G D"]:
    """A mean pool whose counts come from bincount(minlength=number of graphs)."""
    size = graphs.shape[0]
    out = x.new_zeros(size, x.size(-1)).index_add_(0, batch, x)
    count = torch.bincount(batch, minlength=size).clamp(min=1)
    return out / count.unsqueeze(-1)


def relabel(edge_index: Int[torch.Tensor, "2 E"], x: Float[torch.Tensor, "N D"]
            ) -> Float[torch.Tensor, "U D"]:
    nodes, inverse = torch.unique(edge_index[0], return_inverse=True)
    picked = torch.masked_select(x[:, 0], x[:, 0] > 0)
    assert inverse.shape == edge_index[0].shape and picked.ndim == 1
    return x[nodes]


def test_data_dependent_torch_ops_give_fresh_sizes():
    for fn in (matcher, sample_positives, class_counts, relabel):
        r = verify(fn)
        assert r.ok and not r.notes, f"{fn.__name__}: {r}"


def test_a_fresh_size_still_meets_the_rest_of_the_shape():
    def bad(labels: Int[torch.Tensor, "N"], boxes: Float[torch.Tensor, "N 4"]
            ) -> Float[torch.Tensor, "P 4"]:
        pos = torch.nonzero(labels >= 1)  # [P, 1]: the squeeze forgotten
        return boxes[pos] * boxes[:, None]
    assert "broadcast" in kinds(verify(bad))


# -- ops torch's meta kernels let through or cannot run --------------------------------------


def gcn_layer_bug(x: Float[torch.Tensor, "N D"], edge_index: Int[torch.Tensor, "2 E"],
                  w: Float[torch.Tensor, "D F"]) -> Float[torch.Tensor, "N D"]:
    src, dst = edge_index[0], edge_index[1]
    msg = (x @ w)[src]
    return torch.zeros(x.size(0), x.size(1)).index_add(0, dst, msg)  # D columns, not F


def test_index_add_checks_the_source_against_the_target():
    """torch's meta kernel for index_add accepts any source shape (the real one refuses)."""
    r = verify(gcn_layer_bug)
    assert kinds(r) == ["op-shape"] and "F" in r.findings[0].message, str(r)

    def scatter_sum(src: Float[torch.Tensor, "E D"], index: Int[torch.Tensor, "E"],
                    x: Float[torch.Tensor, "N D"]) -> Float[torch.Tensor, "N D"]:
        out = torch.zeros_like(x)
        out.index_add_(0, index, src)
        return out.index_copy(0, index[:1], src[:1])
    assert verify(scatter_sum).ok, str(verify(scatter_sum))

    def wrong_index(src: Float[torch.Tensor, "E D"], index: Int[torch.Tensor, "N"],
                    x: Float[torch.Tensor, "N D"]) -> Float[torch.Tensor, "N D"]:
        return x.index_add(0, index, src)  # one index per source row
    assert kinds(verify(wrong_index)) == ["op-shape"]


def dlrm_interact(dense: Float[torch.Tensor, "B D"], sparse: Float[torch.Tensor, "B F D"]
                  ) -> Float[torch.Tensor, "B D+(F+1)*F//2"]:
    T = torch.cat([dense.unsqueeze(1), sparse], dim=1)
    Z = torch.bmm(T, T.transpose(1, 2))
    n = T.shape[1]
    li, lj = torch.tril_indices(n, n, offset=-1)
    iu = torch.triu_indices(n, n, 1)
    both = Z[:, li, lj] + Z[:, iu[0], iu[1]]
    return torch.cat([dense, both], dim=1)


def test_triangle_indices_of_a_symbolic_size():
    assert verify(dlrm_interact).ok, str(verify(dlrm_interact))
    for fn in (torch.triu_indices, torch.tril_indices):
        for offset in (-2, -1, 0, 1, 2):
            r = verify(lambda a, f=fn.__name__, k=offset: getattr(torch, f)(
                a.shape[0], a.shape[0], k), "F =>")
            wide = offset == (2 if fn is torch.tril_indices else -2)  # n = 1: one element
            assert kinds(r) == (["assumption"] if wide else []) and not r.notes, str(r)
            for n in (5, 8):  # the count against torch's
                got = [d.evaluate({"F": n}) for d in r.result[0]]
                assert got == list(fn(n, n, offset).shape), (fn, offset, n)


def ctc_head(h: Float[torch.Tensor, "B T D"], w: Float[torch.Tensor, "V D"],
             targets: Int[torch.Tensor, "B S"], in_lens: Int[torch.Tensor, "B"],
             tgt_lens: Int[torch.Tensor, "B"]) -> Float[torch.Tensor, ""]:
    lp = F.linear(h, w).log_softmax(-1).transpose(0, 1)
    return F.ctc_loss(lp, targets, in_lens, tgt_lens, blank=0, zero_infinity=True)


def ctc_head_bug(h: Float[torch.Tensor, "B T D"], w: Float[torch.Tensor, "V D"],
                 targets: Int[torch.Tensor, "B S"], in_lens: Int[torch.Tensor, "B"],
                 tgt_lens: Int[torch.Tensor, "B"]) -> Float[torch.Tensor, ""]:
    lp = F.linear(h, w).log_softmax(-1)  # ctc_loss takes [T, B, V]
    return F.ctc_loss(lp, targets, in_lens, tgt_lens, blank=0, zero_infinity=True)


def test_ctc_loss():
    r = verify(ctc_head)
    assert r.ok and not r.notes, str(r)
    r = verify(ctc_head_bug)
    assert "op-shape" in kinds(r) and not r.notes, str(r)


def patchify_im2col(imgs: Float[torch.Tensor, "B 3 16*H 16*W"]) -> Float[torch.Tensor, "B H*W 768"]:
    return F.unfold(imgs, kernel_size=16, stride=16).transpose(1, 2)


def test_im2col_unfold():
    r = verify(patchify_im2col)
    assert r.ok and not r.findings, str(r)
    r = verify(lambda x: F.unfold(x, (3, 5), padding=1), "B C H W => B C*15 H*(W - 2)")
    assert r.ok and not r.findings, str(r)


def test_a_convolution_padded_by_a_size_of_its_weight():
    """``padding=w.shape[-1] // 2`` is a size (it was the witness number, 11, so the right
    signature was a false error); torch at an odd and an even ``K`` is the oracle."""
    def conv(x, w):
        return F.conv1d(x, w, padding=w.shape[-1] // 2)

    sig = "B C L; O C K => B O L+2*(K//2)-K+1"
    for at in ({"B": 2, "C": 3, "L": 9, "O": 4, "K": 3}, {"B": 1, "C": 2, "L": 7, "O": 3, "K": 4}):
        s = Signature.parse(sig)
        x, w = (torch.zeros([d.evaluate(at) for d in dims]) for dims in s.args)
        assert list(conv(x, w).shape) == [d.evaluate(at) for d in s.results[0]]
    r = verify(conv, sig)
    assert clean(r), str(r)


def test_unfold_takes_a_kernel_size_read_from_a_shape():
    """``F.unfold(x, x.shape[-1])``: a kernel size that is a size stays a size (it was a
    witness number, 19, and the right signature a false error)."""
    for fn, sig, at in ((lambda x: F.unfold(x, x.shape[-1]), "B C H W => B C*W*W H-W+1",
                         {"B": 2, "C": 3, "H": 7, "W": 4}),
                        (lambda x: F.unfold(x, (x.shape[-2], 1)), "B C H W => B C*H W",
                         {"B": 2, "C": 3, "H": 5, "W": 6})):
        s = Signature.parse(sig)
        shape = [d.evaluate(at) for d in s.args[0]]
        assert list(fn(torch.zeros(shape)).shape) == [d.evaluate(at) for d in s.results[0]]
        r = verify(fn, sig)
        assert clean(r), str(r)


# -- torch.distributions (PPO's policies) ----------------------------------------------------


def categorical_policy(logits: Float[torch.Tensor, "N A"], actions: Int[torch.Tensor, "N"]
                       ) -> tuple[Float[torch.Tensor, "N"], Float[torch.Tensor, "N"]]:
    dist = torch.distributions.Categorical(logits=logits)
    return dist.log_prob(actions), dist.entropy()


def gaussian_policy(mean: Float[torch.Tensor, "N A"], logstd: Float[torch.Tensor, "1 A"]
                    ) -> tuple[Float[torch.Tensor, "N A"], Float[torch.Tensor, "N"],
                               Float[torch.Tensor, "N"]]:
    """cleanrl's continuous PPO."""
    probs = torch.distributions.Normal(mean, torch.exp(logstd.expand_as(mean)))
    action = probs.sample()
    return action, probs.log_prob(action).sum(1), probs.entropy().sum(1)


def gaussian_policy_bug(mean: Float[torch.Tensor, "N A"], logstd: Float[torch.Tensor, "1 A"]
                        ) -> tuple[Float[torch.Tensor, "N A"], Float[torch.Tensor, "N"],
                                   Float[torch.Tensor, "N"]]:
    probs = torch.distributions.Normal(mean, torch.exp(logstd))
    action = probs.rsample()
    return action, probs.log_prob(action).sum(0), probs.entropy().sum(1)  # sums over N


def test_distributions_keep_symbolic_shapes():
    """Argument validation checks values, not shapes (it stopped on the truth value of an
    array); a sample's shape stays symbolic (torch.Size made witness numbers of it)."""
    for fn in (categorical_policy, gaussian_policy):
        r = verify(fn)
        assert r.ok and not r.notes, f"{fn.__name__}: {r}"
    assert kinds(verify(gaussian_policy_bug)) == ["return-shape"]


# -- a size where torch's functions take a number --------------------------------------------


def beam_step(logprobs: Float[torch.Tensor, "B*K V"], scores: Float[torch.Tensor, "B K"],
              tokens: Int[torch.Tensor, "B*K L"]
              ) -> tuple[Float[torch.Tensor, "B K"], Int[torch.Tensor, "B*K L+1"]]:
    """Beam search's top-k over the flattened beams (transformers' style)."""
    B, K = scores.shape
    V = logprobs.shape[-1]
    cand = (scores.view(-1, 1) + logprobs).view(B, K * V)
    top, idx = cand.topk(K, dim=1)
    beam = torch.div(idx, V, rounding_mode="floor")
    tok = torch.remainder(idx, V)
    sel = (beam + (torch.arange(B) * K).unsqueeze(1)).view(-1)
    return top, torch.cat([tokens[sel], tok.view(-1, 1)], dim=-1)


def test_torch_functions_take_a_symbolic_size_as_a_number():
    """``torch.div(idx, V, ...)`` with ``V = x.shape[-1]``: torch's argument parser refused
    the size (a TypeError stopped the trace)."""
    r = verify(beam_step)
    assert r.ok and not r.notes, str(r)
    r = verify(lambda x: torch.clamp(torch.add(x, x.shape[0]), 0, x.shape[1] - 1), "N D => N D")
    assert r.ok and not r.notes, str(r)


# -- plain-number parameters -----------------------------------------------------------------


def window_partition(x: Float[torch.Tensor, "B 7*H 7*W C"], window_size: int
                     ) -> Float[torch.Tensor, "B*H*W 7 7 C"]:
    B, H, W, C = x.shape
    x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)


def test_a_number_parameter_without_default_is_named_with_the_fix():
    import functools

    import pytest

    with pytest.raises(TypeError, match=r"'window_size': no shape annotation, no default.*"
                                        r"functools.partial\(window_partition, window_size="):
        verify(window_partition)
    assert verify(functools.partial(window_partition, window_size=7),
                  "B 7*H 7*W C => B*H*W 7 7 C").ok


# -- the regression corpus -------------------------------------------------------------------


def test_probe_corpus_pairs():
    """tests/verify_corpus/probe_torch_more.py: each correct function verifies with no finding
    or note; each planted bug reports its code."""
    from verify_corpus.probe_torch_more import PAIRS

    for good, bad, code in PAIRS:
        r = verify(good)
        assert r.ok, f"{good.__name__}: {r}"
        r = verify(bad)
        assert code in [f.code for f in r.findings] and not r.notes, f"{bad.__name__}: {r}"


# -- ops that stopped the trace or raised a false op-shape error -----------------------------


def log_mel_whisper(audio: Float[torch.Tensor, "L"], filters: Float[torch.Tensor, "80 201"]
                    ) -> Float[torch.Tensor, "80 T"]:
    """Whisper's log-mel spectrogram: torch.stft with a 400-sample window."""
    stft = torch.stft(audio, 400, 160, window=torch.hann_window(400), return_complex=True)
    magnitudes = stft[..., :-1].abs() ** 2
    log_spec = torch.clamp(filters @ magnitudes, min=1e-10).log10()
    return (torch.maximum(log_spec, log_spec.max() - 8.0) + 4.0) / 4.0


def test_an_op_needing_large_sizes_is_no_false_error():
    """torch.stft pads by half its window: the meta runs at sizes 40-60 all failed, and that
    was reported as an op-shape error on correct code."""
    r = verify(log_mel_whisper)
    assert not r.findings or all(f.severity != "error" for f in r.findings), str(r)
    assert not r.notes, str(r)


def test_one_hot_and_repeat_interleave_by_counts():
    def expand_by_counts(x: Float[torch.Tensor, "N D"], counts: Int[torch.Tensor, "N"]
                         ) -> Float[torch.Tensor, "M D"]:
        return torch.repeat_interleave(x, counts, dim=0) + x.repeat_interleave(2, dim=0)[:1]

    def one_hot(y: Int[torch.Tensor, "N"], x: Float[torch.Tensor, "N C"]
                ) -> Float[torch.Tensor, "N C"]:
        return F.one_hot(y, num_classes=x.shape[1]).float() * x + F.one_hot(y).sum()

    for fn in (expand_by_counts, one_hot):
        r = verify(fn)
        assert r.ok, f"{fn.__name__}: {r}"


def test_counts_and_weights_must_fit_their_input():
    """A fresh length is no licence for operands torch refuses: repeats must be one per
    element along ``dim`` (or one for all; the meta kernel's op-shape error before the fresh
    sizes), bincount's weights one per value."""
    def repeats_of_other_rows(x: Float[torch.Tensor, "N D"], counts: Int[torch.Tensor, "M"]):
        return torch.repeat_interleave(x, counts, dim=0)

    def repeats_of_all(x: Float[torch.Tensor, "N D"], counts: Int[torch.Tensor, "M"]):
        return x.repeat_interleave(counts)  # flattened: N * D counts

    def one_count(x: Float[torch.Tensor, "N D"], k: Int[torch.Tensor, "1"]):
        return torch.repeat_interleave(x, k, dim=1)

    def weights_of_other_values(labels: Int[torch.Tensor, "N"], w: Float[torch.Tensor, "M"]):
        return torch.bincount(labels, weights=w)

    def weighted(labels: Int[torch.Tensor, "N"], w: Float[torch.Tensor, "N"]):
        return torch.bincount(labels, weights=w, minlength=3)

    for fn in (repeats_of_other_rows, repeats_of_all, weights_of_other_values):
        assert "op-shape" in kinds(verify(fn)), f"{fn.__name__}: {verify(fn)}"
    for fn in (one_count, weighted):
        assert verify(fn).ok, f"{fn.__name__}: {verify(fn)}"


def test_pausing_the_time_limit_keeps_a_repeating_timer():
    """torch's first meta op runs with the interval timer paused: someone else's timer comes
    back whole, its interval too."""
    import signal

    from tensig.check import trace_torch

    trace_torch._warm_meta.cache_clear()  # as before torch's first meta op
    previous = signal.signal(signal.SIGALRM, lambda *a: None)
    try:
        signal.setitimer(signal.ITIMER_REAL, 100, 50)
        trace_torch._warm_meta()
        left, every = signal.getitimer(signal.ITIMER_REAL)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert 90 < left <= 100 and every == 50


def test_a_long_window_s_frame_count_is_no_constant():
    """Fitted from sizes near 1056, stft's frame count ``L // 160 + 1`` was the same at every
    run and became the constant 7: a signature declaring 7 frames for every ``L`` verified
    (a max pooling by 200: 5).  It is a fresh size now, which no constant matches."""
    def frames(audio: Float[torch.Tensor, "L"]) -> Float[torch.Tensor, "201 7"]:
        return torch.stft(audio, 400, 160, window=torch.hann_window(400), return_complex=True)

    def pooled(x: Float[torch.Tensor, "B C L"]) -> Float[torch.Tensor, "B C 5"]:
        return F.max_pool1d(x, 200)

    for fn in (frames, pooled):
        r = verify(fn)
        assert "but the signature declares" in str(r), f"{fn.__name__}: {r}"


# -- found by the second corpus (verify_corpus/probe_torch_2026.py) ---------------------------


def test_a_depthwise_convolution_takes_its_groups_from_a_size():
    """``groups=x.shape[1]``: the groups were a SymSize the channel check could not compare
    (a false contraction error, 'weight 1 x groups SymSize(D)')."""
    def depthwise(x: Float[torch.Tensor, "B, C, T"], w: Float[torch.Tensor, "C, 1, 3"]
                  ) -> Float[torch.Tensor, "B, C, T"]:
        return F.conv1d(x, w, padding=1, groups=x.shape[1])

    def one_group(x: Float[torch.Tensor, "B, C, T"], w: Float[torch.Tensor, "C, 1, 3"]
                    ) -> Float[torch.Tensor, "B, C, T"]:
        return F.conv1d(x, w, padding=1, groups=w.shape[1])  # one group: 1 input channel

    r = verify(depthwise)
    assert clean(r), str(r)
    r = verify(one_group)
    assert [f.code for f in r] == ["TS102"] and "weight 1 x groups 1" in str(r), str(r)


def test_gather_gives_the_index_shape_without_relying_on_its_floors():
    """MAE's random masking gathers ``ids_shuffle[:, :L // 4]``: fitted, torch.gather warned
    'requires L divisible by 4' on code valid at every L.  The index has the input's rank and
    is no larger off the gathered dim."""
    def keep_quarter(x: Float[torch.Tensor, "B, L, D"], noise: Float[torch.Tensor, "B, L"]
                     ) -> Float[torch.Tensor, "B, L//4, D"]:
        ids = torch.argsort(noise, dim=1)[:, : x.shape[1] // 4]
        return torch.gather(x, 1, ids.unsqueeze(-1).repeat(1, 1, x.shape[2]))

    def picked(q: Float[torch.Tensor, "B, A"], a: Int[torch.Tensor, "B"]
               ) -> Float[torch.Tensor, "B"]:
        return q.gather(1, a.unsqueeze(1)).squeeze(1)

    for fn in (keep_quarter, picked):
        r = verify(fn)
        assert clean(r), str(r)
    for sig in ("B, A; B: int => B", "B, A; B+1, 1: int => B+1, 1"):  # a rank short, a row over
        r = verify(lambda q, a: q.gather(1, a), sig)
        assert "op-shape" in kinds(r) and not r.notes, str(r)
    r = verify(lambda q, a: q.gather(1, a), "B, A; M, 1: int => M, 1")
    assert kinds(r) == ["assumption"] and "M <= B" in str(r), str(r)


def test_torch_cdist_by_hand_batched():
    """torch.cdist of points with different coordinates stopped the trace with a note ('not
    modelled', torch's own error at every fitted size): a contraction error now; its leading
    axes broadcast (Chamfer's [B, N, 3] against [B, M, 3])."""
    def chamfer(a: Float[torch.Tensor, "B, N, 3"], b: Float[torch.Tensor, "B, M, 3"]
                ) -> Float[torch.Tensor, "B, N, M"]:
        return torch.cdist(a, b) + torch.cdist(a[0], b[0], p=1)

    r = verify(chamfer)
    assert clean(r), str(r)
    r = verify(lambda e: torch.cdist(e, e.T), "N, D => N, D")
    assert kinds(r) == ["contraction"] and not r.notes, str(r)


def test_kl_div_is_a_same_shape_loss():
    """Distillation's ``F.kl_div(log_p_student, p_teacher.T)``: fitted, torch's rejection
    stopped the trace (a note); as the other losses, the broadcast is the finding."""
    def distill(s: Float[torch.Tensor, "B, C"], t: Float[torch.Tensor, "B, C"]
                ) -> Float[torch.Tensor, ""]:
        return F.kl_div(F.log_softmax(s / 4, dim=1), F.softmax(t / 4, dim=1),
                        reduction="batchmean", log_target=False) * 16

    r = verify(distill)
    assert clean(r), str(r)
    r = verify(lambda s, t: F.kl_div(s.log_softmax(1), t.softmax(1).T, reduction="batchmean"),
               "B, C; B, C =>")
    assert "broadcast" in kinds(r) and not r.notes, str(r)


def test_view_as_complex_and_back():
    """LLaMA's rotary embedding: complex values are of float kind in the trace, so a fitted
    ``view_as_real`` met a float tensor and stopped ('only supported for complex tensors')."""
    def rotate(x: Float[torch.Tensor, "B, T, H, 2*E"], angles: Float[torch.Tensor, "T, E"]
               ) -> Float[torch.Tensor, "B, T, H, 2*E"]:
        xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
        rot = torch.polar(torch.ones_like(angles), angles)[:, None, :]
        return torch.view_as_real(xc * rot).flatten(3)

    r = verify(rotate)
    assert clean(r), str(r)
    r = verify(lambda x: torch.view_as_complex(x), "B, 3 => B")
    assert kinds(r) == ["op-shape"] and "size 2" in str(r), str(r)


def test_a_concatenation_along_an_axis_a_lower_rank_lacks_is_a_concat_error():
    """MoCo's ``cat([l_pos, l_neg], dim=1)`` with ``l_pos`` left 1-d: the axis was read from
    the first array's rank, and an IndexError stopped the trace with a note."""
    for fn in (lambda p, n: torch.cat([p, n], dim=1), lambda p, n: torch.cat([n, p], dim=-1)):
        r = verify(fn, "N; N, K => N, K+1")
        assert kinds(r)[0] == "concat" and not r.notes and "ranks 2 and 1" in str(r), str(r)


def test_unbind_along_a_symbolic_axis():
    """``for x_t in x.unbind(1)``: its count depends on the size, and it stopped the trace
    ('not modelled'); the steps stacked back join to the axis.  timm's ``q, k, v =
    qkv.unbind(0)`` of a constant axis of 3 stays three."""
    def rnn(x: Float[torch.Tensor, "B, T, D"], w: Float[torch.Tensor, "D, D"]
            ) -> Float[torch.Tensor, "B, T, D"]:
        h, outs = x[:, 0] * 0, []
        for x_t in x.unbind(1):
            h = torch.tanh(x_t @ w + h)
            outs.append(h)
        return torch.stack(outs, 1)

    def vit_qkv(qkv: Float[torch.Tensor, "B, N, 12*E"]) -> Float[torch.Tensor, "B, 4, N, N"]:
        b, n, _ = qkv.shape
        q, k, v = qkv.reshape(b, n, 3, 4, -1).permute(2, 0, 3, 1, 4).unbind(0)
        return q @ k.transpose(-2, -1) + v[..., :1]

    for fn in (rnn, vit_qkv):
        r = verify(fn)
        assert clean(r), f"{fn.__name__}: {r}"
    r = verify(lambda x: torch.stack(x.unbind(0), 1), "T, D => T, D")
    assert kinds(r) == ["return-shape"] and "[D, T]" in str(r), str(r)


def test_conv_transpose_by_hand():
    """torch's meta kernel for a transposed convolution accepts any input channels: DCGAN's
    latent put on the width axis (``z[:, None, None, :]``) ran on to a wrong width.  The
    sizes against torch's own, with every argument."""
    def up(x: Float[torch.Tensor, "B, 64, H, W"], w: Float[torch.Tensor, "64, 32, 2, 2"]
           ) -> Float[torch.Tensor, "B, 32, 2*H, 2*W"]:
        return F.conv_transpose2d(x, w, stride=2)

    r = verify(up)
    assert clean(r), str(r)
    r = verify(lambda z, w: F.conv_transpose2d(z[:, None, None, :], w), "B, 100; 100, 64, 4, 4 =>")
    assert kinds(r) == ["contraction"] and "input channels 1" in str(r), str(r)
    r = verify(lambda x, w: F.conv_transpose1d(x, w, None, 2, 1, 1, 2, 2), "B, 6, L; 6, 4, 3 =>")
    got = [d.evaluate({"B": 2, "L": 5}) for d in r.result[0]]
    assert got == list(F.conv_transpose1d(torch.ones(2, 6, 5), torch.ones(6, 4, 3), None, 2, 1,
                                          1, 2, 2).shape), got


def test_baddbmm_adds_its_input_into_the_product():
    """BLOOM's ``torch.baddbmm(alibi, q, k)``: fitted, torch's rejection of keys left
    transposed stopped the trace (a note, a message with a sample's size 2080 in it); a
    contraction error now, and the bias must fit the product."""
    def scores(q: Float[torch.Tensor, "N, T, D"], k: Float[torch.Tensor, "N, D, S"],
               alibi: Float[torch.Tensor, "N, 1, S"], b: Float[torch.Tensor, "S"]
               ) -> Float[torch.Tensor, "N, T, S"]:
        return torch.baddbmm(alibi, q, k, beta=1.0, alpha=0.5) + torch.addmm(b, q[0], k[0])

    r = verify(scores)
    assert clean(r), str(r)
    r = verify(lambda a, q, k: torch.baddbmm(a, q, k.transpose(1, 2)),
               "N, 1, S; N, T, D; N, D, S =>")
    assert kinds(r)[0] == "contraction" and not r.notes, str(r)
    r = verify(lambda a, q, k: torch.baddbmm(a, q, k), "N, 1, D; N, T, D; N, D, S =>")
    assert set(kinds(r)) == {"broadcast"} and "added input" in str(r), str(r)


def test_cosine_similarity_broadcasts_and_reduces():
    """SimSiam's ``F.cosine_similarity(p, z.T)``: torch's rejection stopped the trace (a note);
    a broadcast error now; ``dim`` is reduced."""
    r = verify(lambda p, z: F.cosine_similarity(p, z, dim=-1), "N, D; N, D => N")
    assert clean(r), str(r)
    r = verify(lambda p, z: F.cosine_similarity(p[:, None], z[None], dim=2), "N, D; M, D => N, M")
    assert clean(r), str(r)
    r = verify(lambda p, z: F.cosine_similarity(p, z.T, dim=-1).mean(), "N, D; N, D =>")
    assert set(kinds(r)) == {"broadcast"} and not r.notes, str(r)


def test_one_mask_selects_as_many_elements_everywhere():
    """A masked LM's ``F.cross_entropy(logits[m], labels[m])``: each selection by the same
    mask was a fresh size of its own, and the loss a false contraction error.  A mask's count
    is one size (its nonzero indices and masked_select too); another mask's is another."""
    def mlm(logits: Float[torch.Tensor, "B, T, V"], labels: Int[torch.Tensor, "B, T"]
            ) -> Float[torch.Tensor, ""]:
        m = labels != -100
        rows = torch.nonzero(m)
        picked = torch.masked_select(labels, m)
        return F.cross_entropy(logits[m], labels[m]) + rows[:, 0].float() @ picked.float()

    r = verify(mlm)
    assert clean(r), str(r)

    def two_masks(logits: Float[torch.Tensor, "B, T, V"], labels: Int[torch.Tensor, "B, T"]
                  ) -> Float[torch.Tensor, ""]:
        return F.cross_entropy(logits[labels != -100], labels[labels > 0])

    assert "contraction" in kinds(verify(two_masks)), str(verify(two_masks))
    r = verify(lambda x, m: torch.masked_select(x, m) - x[:, m].flatten(), "B, T; T: bool =>")
    assert kinds(r) == ["broadcast"], str(r)  # a broadcast mask selects B times as many


def test_pad_by_hand_with_pads_computed_from_sizes():
    """Swin pads its map to a multiple of the window, ``(7 - W % 7) % 7``: fitted, F.pad gave
    fresh sizes, and the window view after it was a false reshape error."""
    def padded(x: Float[torch.Tensor, "B, H, W, C"]) -> Float[torch.Tensor, "B, H+2, W+3, C"]:
        pad_r = (7 - x.shape[2] % 7) % 7
        y = F.pad(x, (0, 0, 0, pad_r))
        assert y.shape[2] == x.shape[2] + pad_r
        return F.pad(x, (0, 0, 1, 2, 1, 1))

    r = verify(padded)
    assert clean(r), str(r)
    r = verify(lambda x: F.pad(x, (1, 2, 3)), "B, C => B, C")
    assert kinds(r) == ["op-shape"] and not r.notes, str(r)


class PaddedEncoderLayer(torch.nn.Module):
    """A batch-first Transformer encoder layer with a causal mask and a key padding mask."""

    def __init__(self, transposed: bool = False) -> None:
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
        self.transposed = transposed

    def forward(self, x: Float[torch.Tensor, "B, T, 32"], pad: Bool[torch.Tensor, "B, T"]
                ) -> Float[torch.Tensor, "B, T, 32"]:
        causal = torch.nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.layer(x, src_mask=causal, src_key_padding_mask=pad.T if self.transposed
                          else pad)


def test_a_transformer_layer_takes_a_symbolic_padding_mask():
    """torch's Transformer layers read a mask's dtype through F._none_or_dtype, which refuses
    anything but a tensor: a padding mask stopped the trace with a RuntimeError."""
    r = verify(PaddedEncoderLayer)
    assert clean(r), str(r)
    r = verify(PaddedEncoderLayer(transposed=True))
    assert "op-shape" in kinds(r) and "key_padd" in str(r), str(r)  # torch's "key_padded_mask"


def test_istft_and_the_parts_of_a_complex_spectrogram():
    """Speech enhancement's round trip: complex values are of float kind in the trace, so
    torch.istft's meta kernel refused its input (a false op-shape error) and ``spec.real``
    was no attribute.  Lengths against torch's, with and without ``length`` and centring."""
    def enhance(x: Float[torch.Tensor, "B, 256*N"], gain: Float[torch.Tensor, "257, 1"]
                ) -> Float[torch.Tensor, "B, 256*N"]:
        w = torch.hann_window(512)
        spec = torch.stft(x, 512, 256, window=w, return_complex=True)
        spec = torch.polar(spec.abs() * gain, spec.angle()) + torch.complex(spec.real, spec.imag)
        return torch.istft(spec, 512, 256, window=w, length=x.shape[-1])

    r = verify(enhance)  # torch's reflect padding refuses N = 1: a warning
    assert kinds(r) == ["assumption"] and "257 <= 256*N" in str(r), str(r)
    for center in (True, False):
        r = verify(lambda s, c=center: torch.istft(s, 64, 16, window=torch.ones(64), center=c),
                   "B, 33, F => B, L")
        got = r.result[0][-1].evaluate({"B": 2, "F": 9})
        real = torch.istft(torch.ones(2, 33, 9, dtype=torch.complex64), 64, 16,
                           window=torch.ones(64), center=center)
        assert got == real.shape[-1], (center, got, real.shape)
    r = verify(lambda s: torch.istft(s, 512, 128), "B, 201, F => B, L")
    assert kinds(r) == ["op-shape"] and "257" in str(r), str(r)


def test_a_like_creation_takes_its_dtype():
    """A scatter mean counts with ``torch.ones_like(idx, dtype=torch.float)``: the ones kept
    the ids' int kind, and scatter_add_'s meta kernel refused the float target (a false
    op-shape error)."""
    def scatter_mean(src: Float[torch.Tensor, "E, D"], idx: Int[torch.Tensor, "E"],
                     x: Float[torch.Tensor, "N, D"]) -> Float[torch.Tensor, "N, D"]:
        out = torch.zeros_like(x).scatter_add_(0, idx[:, None].expand_as(src), src)
        ones = torch.ones_like(idx, dtype=torch.float)
        cnt = torch.zeros(x.shape[0]).scatter_add_(0, idx, ones)
        return out / cnt.clamp(min=1)[:, None]

    r = verify(scatter_mean)
    assert clean(r), str(r)
    r = verify(lambda i, x: np.full_like(i, 0.5, np.float64) @ x, "E: int; E, D => D")
    assert clean(r), str(r)


def test_a_rejection_names_the_operands_composite_sizes():
    """torch's message from a rejected run held a product of sizes as its number at that run
    ('a dimension of length 1840'); it is written as the operand's size, ``B*H``.  torch
    says "broadcast": a broadcast finding, as NumPy's and JAX's refusals saying it are."""
    r = verify(lambda a, b: torch.addcmul(a, a, b), "B*H, T; T, B*H =>")
    assert kinds(r) == ["broadcast"] and "length B*H" in str(r) and "[T, B*H]" in str(r), str(r)
