"""Symbolic verification: the blog's four bugs found at any size (where a runtime check sees
them only when sizes differ), their fixes verified clean, and the other findings."""

from __future__ import annotations

import functools
import itertools
import json
import math
import operator

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from arrays import kinds
from tensig import Shaped
from tensig.check.verify import Report, Signature, verify

pytest_plugins = ["pytester"]


# -- the blog's bugs, NumPy and torch -------------------------------------------------------------


def mask_bug_np(scores, mask):
    return scores + mask  # the dropped None


def mask_fix_np(scores, mask):
    return scores + mask[:, None, :]


def mask_bug_torch(scores, mask):
    return scores + mask


def mask_fix_torch(scores, mask):
    return scores + mask.unsqueeze(1)


@pytest.mark.parametrize("fn", [mask_bug_np, mask_bug_torch])
def test_dropped_none_is_found_for_all_sizes(fn):
    r = verify(fn, "B T T; B T => B T T")
    assert not r.ok and kinds(r) == ["broadcast"]
    assert "broadcasts T against B" in r.findings[0].message
    assert r.findings[0].file == __file__ and r.findings[0].line is not None
    # a runtime check sees it only when the sizes differ: at B == T == 16 the bug runs silently
    scores, mask = np.zeros((16, 16, 16)), np.zeros((16, 16))
    assert fn(scores, mask).shape == (16, 16, 16)


@pytest.mark.parametrize("fn", [mask_fix_np, mask_fix_torch])
def test_masked_scores_fixed(fn):
    assert verify(fn, "B T T; B T => B T T").ok


def squared_error_bug(pred, target):
    return ((pred - target) ** 2).mean()


def squared_error_fix(pred, target):
    return ((pred[:, None] - target) ** 2).mean()


def test_outer_product_squared_error():
    r = verify(squared_error_bug, "N; N 1 =>")
    assert kinds(r) == ["outer-product"]
    assert "[N] and [N, 1] become [N, N]" in r.findings[0].message
    assert verify(squared_error_fix, "N; N 1 =>").ok


def test_a_size_times_a_float_is_a_number():
    """``n * 0.5`` with a traced size ``n`` is the float at the witness size (it stopped the
    verification with a TypeError: a Dim does not take floats)."""
    def scaled(x):
        n = x.shape[0]
        return x * (n * 0.5) + (0.5 * n) + (n - 0.5) + (1.5 - n) + n / 2

    r = verify(scaled, "N => N")
    assert r.ok and not r.notes, r.notes


def test_torch_mse_loss_with_mismatched_shapes():
    def loss(pred, target):
        return F.mse_loss(pred, target)

    r = verify(loss, "N; N 1 =>")
    assert "broadcast" in kinds(r)


def pool_bug(x):
    return x.mean(axis=0)


def pool_fix(x):
    return x.mean(axis=1)


def test_wrong_axis_reduction_even_when_sizes_collide():
    r = verify(pool_bug, "B T d => B d")
    assert kinds(r) == ["return-shape"]
    assert r.findings[0].message == "returns [T, d] but the signature declares [B, d]"
    assert verify(pool_fix, "B T d => B d").ok
    # at B == T both return the same shape: only the symbolic check can tell them apart
    x = np.zeros((16, 16, 64))
    assert pool_bug(x).shape == pool_fix(x).shape


def test_the_control_bug_the_runtime_does_catch():
    def add(x, y):
        return x + y

    r = verify(add, "B T d; B T => B T d")
    assert {f.message.split(" in ")[0] for f in r} == {"broadcasts T against B",
                                                       "broadcasts d against T"}
    with pytest.raises(ValueError):
        add(np.zeros((3, 5, 7)), np.zeros((3, 5)))


def test_blog_pool_with_mask_is_clean():
    def pool(x, mask):
        m = mask[:, :, None].float()
        return (x * m).sum(1) / m.sum(1)

    r = verify(pool, "B T d; B T => B d")
    assert r.ok, str(r)


# -- other findings ------------------------------------------------------------


def test_reshape_used_for_a_transpose():
    def bad(x):
        b, t, d = x.shape
        return x.reshape(b, d, t)

    def good(x):
        return x.transpose(0, 2, 1)

    assert kinds(verify(bad, "B T d => B d T")) == ["reorder"]
    assert verify(good, "B T d => B d T").ok


def test_reshape_with_wrong_element_count():
    def bad(x):
        return x.reshape(x.shape[0], x.shape[1])

    assert kinds(verify(bad, "B T d =>")) == ["reshape"]


def test_np_reshape_takes_one_size_or_a_sequence():
    assert verify(lambda x: np.reshape(x, -1), "B T => B*T").ok
    assert verify(lambda x: np.reshape(x, x.shape[0] * x.shape[1]), "B T => B*T").ok
    assert verify(lambda x: np.reshape(x, shape=(x.shape[0], -1)), "B T d => B T*d").ok


def test_assumptions_are_warnings():
    def branch(x):
        if x.shape[1] > 1:
            return x[:, 1:]
        return x

    r = verify(branch, "B T =>")
    assert [(f.kind, f.severity) for f in r] == [("assumption", "warning")]
    assert "assumes T > 1" in r.findings[0].message

    def heads(x):
        b, t, d = x.shape
        return x.reshape(b, t, 4, d // 4)

    r = verify(heads, "B T d => B T 4 e")
    assert [f.message for f in r] == ["requires d divisible by 4"]


def test_decidable_conditions_are_not_findings():
    def f(x):
        assert x.shape[0] + 1 > x.shape[0]
        assert x.shape[1] == x.shape[1]
        return x

    assert verify(f, "B T => B T").ok


def test_transformer_block_torch_is_clean():
    heads = 4
    lin_q, lin_o = torch.nn.Linear(32, 32), torch.nn.Linear(32, 32)
    norm = torch.nn.LayerNorm(32)

    def block(x, pad):
        b, t, d = x.shape
        h = norm(x)
        q = lin_q(h).view(b, t, heads, d // heads).transpose(1, 2)
        scores = q @ q.transpose(-1, -2) / math.sqrt(d // heads)
        causal = torch.tril(torch.ones(t, t)) == 0
        scores = scores.masked_fill(causal, float("-inf"))
        scores = scores + pad[:, None, None, :]
        att = torch.softmax(scores, dim=-1) @ q
        out = att.transpose(1, 2).reshape(b, t, d)
        return x + lin_o(out)

    r = verify(block, "B, T, 32; B, T => B, T, 32")
    assert r.ok, str(r)
    assert r.largest_bytes() == 4 * 4 * __import__("tensig").dim("B") * \
        __import__("tensig").dim("T") ** 2


def test_contractions():
    def mm(a, b):
        return a @ b

    assert kinds(verify(mm, "B T d; e f =>")) == ["contraction"]
    assert verify(mm, "B T d; d e => B T e").ok

    def es(a, b):
        return np.einsum("btd,de->bte", a, b)

    assert verify(es, "B T d; d e => B T e").ok
    assert kinds(verify(es, "B T d; T e =>")) == ["contraction"]

    lin = torch.nn.Linear(16, 8)
    assert kinds(verify(lambda x: lin(x), "B, 15 =>")) == ["contraction"]


def test_sizes_work_in_ordinary_python():
    def f(x):
        _b, t, d = x.shape
        scale = 1.0 / math.sqrt(d)
        steps = [i for i in range(t)]
        assert len(steps) > 0
        return x.sum(axis=2) * scale

    assert verify(f, "B T d => B T").ok


def test_boolean_mask_gives_an_existential_size():
    def f(x, m):
        return x[m > 0]

    r = verify(f, "B T; B T =>")
    assert r.ok and len(r.result[0]) == 1 and str(r.result[0][0]).startswith("nnz")


def test_an_index_array_before_an_ellipsis_is_traced():
    """``x[idx, ...]``: the ``...`` is found by identity (an index array's ``==`` is
    elementwise, so looking it up by equality stopped the trace)."""
    r = verify(lambda x, idx: x[idx, ...], "N D E; K: int => K D E")
    assert r.ok and [str(d) for d in r.result[0]] == ["K", "D", "E"]
    wrong = verify(lambda x, idx: x[..., idx], "N D E; K: int => K D E")
    assert [f.kind for f in wrong] == ["return-shape"] and wrong.complete


def test_unsupported_operation_is_a_note_not_a_silent_pass():
    def f(x):
        return np.divmod(x, 3)  # a ufunc of two outputs

    r = verify(f, "B T =>")
    assert not r.ok and not r.complete and "divmod" in r.notes[0]


def test_the_numpy_long_tail_is_a_hook_and_a_missing_hook_is_a_note(monkeypatch):
    """Symbolic arrays reach trace_numpy's fitted fallback through tracing.PLUGINS (the core
    imports no library model); without the hook the trace stops with a note, never passes."""
    from tensig.check import tracing

    def f(x):
        return np.roll(x, 1, axis=0)  # not modelled by hand: fitted

    assert verify(f, "B T => B T").ok
    monkeypatch.delitem(tracing.PLUGINS, "numpy_fallback")
    r = verify(f, "B T => B T")
    assert not r.ok and not r.complete and "before tensig loaded its model" in r.notes[0], str(r)


def test_signature_arity_and_syntax():
    with pytest.raises(TypeError, match="takes 1 array argument"):
        verify(lambda x: x, "B; T =>")
    with pytest.raises(TypeError, match="no shape annotations"):
        verify(lambda x: x)
    sig = Signature.parse("B, T, 1; B => B")
    assert [len(a) for a in sig.args] == [3, 1] and sig.symbols == ("B", "T")


def test_report_formats():
    r = verify(pool_bug, "B T d => B d")
    line = str(r)
    assert line.startswith(f"{__file__}:") and ": error: returns [T, d]" in line
    data = json.loads(json.dumps(r.to_dict()))
    assert data["ok"] is False and data["findings"][0]["kind"] == "return-shape"
    ok = verify(pool_fix, "B T d => B d")
    assert "ok: pool_fix verified for all B, T, d" in str(ok)
    assert list(ok) == [] and len(ok) == 0


def test_jax_code_through_jax_symbolic_shapes():
    jnp = pytest.importorskip("jax.numpy")

    def bug(scores, mask):
        return jnp.add(scores, mask)

    def fix(scores, mask):
        return scores + mask[:, None, :]

    def pool(x):
        return jnp.mean(x, axis=0)

    r = verify(bug, "B T T; B T => B T T")
    assert kinds(r) == ["broadcast"] and "broadcasts T against B" in r.findings[0].message
    assert verify(fix, "B T T; B T => B T T").ok
    assert kinds(verify(pool, "B T d => B d")) == ["return-shape"]


def test_split_and_chunk():
    def qkv(x):
        q, k, v = x.split(32, dim=-1)
        return q @ k.transpose(-1, -2) @ v

    assert verify(qkv, "B, T, 96 => B, T, 32").ok

    def bad(x):
        q, k = x.chunk(2, dim=-1)
        return q + k.transpose(-1, -2)

    # d // 2 meets T twice: [B, T, d // 2] + [B, d // 2, T]
    assert kinds(verify(bad, "B T d =>")) == ["assumption", "broadcast", "broadcast"]

    def sections(x):
        a, b = torch.split(x, [3, 5], dim=1)
        return a.sum(1) + b.sum(1)

    assert verify(sections, "B, 8 => B").ok
    assert kinds(verify(sections, "B, 9 => B")) == ["split"]

    def np_halves(x):
        left, right = np.split(x, 2, axis=1)
        return left * right

    r = verify(np_halves, "B T => B e")
    assert [f.message for f in r] == ["requires T divisible by 2"]


# -- the reorder lint (issue 13, section 5): reshapes that move axes ----------------------------


def merge_heads_bug(y):
    B, H, T, E = y.shape
    return y.reshape(B, T, H * E)  # meant y.transpose(1, 2).reshape(...)


def split_heads_bug(x):
    B, T, C = x.shape
    return x.reshape(B, 4, T, C // 4)  # meant view(B, T, 4, -1).transpose(1, 2)


def test_the_issue_reproductions_are_reorders():
    r = verify(merge_heads_bug, "B, H, T, E => B, T, F")
    assert kinds(r) == ["reorder"] and "moves T before H" in r.findings[0].message
    assert r.findings[0].code == "TS202"
    assert r.findings[0].line == merge_heads_bug.__code__.co_firstlineno + 2
    r = verify(split_heads_bug, "B, T, 48 => B, 4, T, 12")
    assert kinds(r) == ["reorder"]
    assert "changes the literal factors between B and T: 1 in the source, 4 in the target" \
        in r.findings[0].message
    # the same bugs with symbolic sizes, and on torch tensors
    assert "reorder" in kinds(verify(split_heads_bug, "B, T, C => B, 4, T, F"))
    assert kinds(verify(merge_heads_bug, "B, 4, T, 16 => B, T, 64")) == ["reorder"]
    assert kinds(verify(lambda y: merge_heads_bug(y), "B, 4, T, 16 => B, T, 64",
                        torch_style=True)) == ["reorder"]


def _patchify_without_permute(x):
    B, C, H, W = x.shape
    return x.reshape(B, (H // 16) * (W // 16), C * 16 * 16)


def _unmerge_wrong_order(x):
    B, T, H, E = x.shape
    return x.reshape(B, T, H * E).reshape(B, H, T, E)


def _channels_by_reshape(x):
    B, T, C = x.shape
    return x.reshape(B, C, T)


def _literal_heads_merge(x):
    return x.reshape(x.shape[0], x.shape[2], 64)


@pytest.mark.parametrize("fn, sig", [
    (_patchify_without_permute, "B, 3, H, W =>"),
    (_unmerge_wrong_order, "B, T, H, E =>"),
    (_channels_by_reshape, "B, T, C => B, C, T"),
    (_literal_heads_merge, "B, 4, T, 16 => B, T, 64"),
])
def test_reorder_bugs_are_found(fn, sig):
    assert "reorder" in kinds(verify(fn, sig))


def _round_trip(x):  # a reorder viewed back at once: the pair keeps every element in place
    B, T, H, E = x.shape
    return x.reshape(B, H, T, E).reshape(B, T, H * E)


def _skewed_range(x):  # a range of the buffer taken through a skewed view (Transformer-XL)
    B, T, H, E = x.shape
    return x.reshape(B, H, T, E)[:, 1:].reshape(B, (H - 1) * T * E)


def _reorder_used_then_viewed_back(x):  # the mixed axes are used (a mean) before the view back:
    # each reshape is judged alone, from its own source
    B, T, H, E = x.shape
    y = x.reshape(B, H, T, E)
    m = y.mean(-1)
    return y.reshape(B, T, H * E), m


def _reorder_regrouped(x):  # viewed again, still out of order
    B, T, H, E = x.shape
    return x.reshape(B, H, T, E).reshape(B * H, T * E)


def test_a_reshape_viewed_again_at_once_is_judged_with_it():
    """A reshape of a reshape, with at most a range of its first mixed axis between and nothing
    else run, is one reinterpretation of the buffer: judged from the first one's source, and
    where the pair still mixes, the finding names the first reshape (the one that moved)."""
    assert kinds(verify(_round_trip, "B, T, H, E =>")) == []
    assert kinds(verify(_skewed_range, "B, T, H, E =>")) == []
    assert kinds(verify(_reorder_used_then_viewed_back, "B, T, H, E =>")) == ["reorder"] * 2
    r = verify(_reorder_regrouped, "B, T, H, E =>")
    assert kinds(r) == ["reorder"] and "[B, T, H, E] into [B, H, T, E] only reorders" in \
        r.findings[0].message


# Legitimate reshapes from real code: none may raise a reorder (zero false alarms is the bar).


def nanogpt_attention(x):
    B, T, C = x.size()
    n_head = 4
    q = torch.ones(3 * C, C)  # stands for c_attn's weight
    qkv = F.linear(x, q)
    q, k, v = qkv.split(C, dim=2)
    q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
    k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
    v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    y = att.softmax(dim=-1) @ v
    return y.transpose(1, 2).reshape(B, T, C)


def nanogpt_loss_views(logits, targets):
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def vit_patchify(x):
    B, C, H, W = x.shape
    p = 16
    x = x.reshape(B, C, H // p, p, W // p, p).transpose(0, 2, 4, 1, 3, 5)
    return x.reshape(B, (H // p) * (W // p), C * p * p)


def vit_unpatchify(x):
    B, h, w, _ = x.shape
    x = x.reshape(B, h, w, 16, 16, 3).transpose(0, 5, 1, 3, 2, 4)
    return x.reshape(B, 3, h * 16, w * 16)


def conv_tokens(x):
    return x.flatten(2).transpose(1, 2)  # [B, D, h, w] -> [B, h*w, D]


def einops_split_rows(x):
    B, _, C = x.shape
    return x.reshape(B, 14, -1, C)  # "b (h w) c -> b h w c" with h=14


def einops_flatten(x):
    return x.reshape(x.shape[0], -1)  # "b c h w -> b (c h w)"


def flat(x):
    return x.reshape(-1)


def repeat_kv(k):
    B, H, T, E = k.shape
    return k[:, :, None].expand(B, H, 2, T, E).reshape(B, H * 2, T, E)


def rotary_pairs(x):
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    return pairs.flatten(3)


def pixel_unshuffle(x):
    B, C, H, W = x.shape
    x = x.reshape(B, C, H // 2, 2, W // 2, 2).permute(0, 1, 3, 5, 2, 4)
    return x.reshape(B, C * 4, H // 2, W // 2)


def pixel_shuffle(x):
    B, _, H, W = x.shape
    x = x.reshape(B, 3, 2, 2, H, W).permute(0, 1, 4, 2, 5, 3)
    return x.reshape(B, 3, H * 2, W * 2)


def merge_adjacent(x):
    B, T, H, E = x.shape
    y = x.reshape(B, T, H * E)
    return y.view(B, T, H, E)


def mlp_rows(x):
    B, T, C = x.shape
    return (x.reshape(-1, C) * 2).reshape(B, T, -1)


def squeeze_by_reshape(x):
    B, _, T = x.shape
    return x.reshape(B, T).reshape(B, 1, T)


def fused_qkv_literal(x):
    B, T, _ = x.shape
    return x.view(B, T, 3, 4, 16).permute(2, 0, 3, 1, 4)


def time_windows(x):
    B, T, C = x.shape
    return x.reshape(B, T // 4, 4, C)


def swin_windows(x):
    B, H, W, C = x.shape
    x = x.reshape(B, H // 7, 7, W // 7, 7, C).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, 7, 7, C)


def gram_flat(x):
    B, N, _ = x.shape
    return x.reshape(B, N * N)


def tuple_shape(x):
    B, T, _ = x.shape
    return x.reshape((B, T, 4, -1))


def batch_heads_fold(q):
    B, H, T, E = q.shape
    return q.reshape(B * H, T, E)


@pytest.mark.parametrize("fn, sig, torch_style", [
    (nanogpt_attention, "B, T, 64 => B, T, 64", True),
    (nanogpt_loss_views, "B, T, V; B, T:int =>", True),
    (vit_patchify, "B, 3, H, W => B, N, 768", False),
    (vit_unpatchify, "B, h, w, 768 =>", False),
    (conv_tokens, "B, D, h, w =>", True),
    (einops_split_rows, "B, N, C =>", False),
    (einops_flatten, "B, C, H, W =>", False),
    (flat, "B, T, C =>", False),
    (repeat_kv, "B, H, T, E =>", True),
    (repeat_kv, "B, 2, T, 16 =>", True),
    (rotary_pairs, "B, T, H, E =>", True),
    (pixel_unshuffle, "B, C, H, W =>", True),
    (pixel_shuffle, "B, 12, H, W =>", True),
    (merge_adjacent, "B, T, H, E => B, T, H, E", True),
    (mlp_rows, "B, T, C => B, T, C", False),
    (squeeze_by_reshape, "B, 1, T => B, 1, T", False),
    (fused_qkv_literal, "B, T, 192 => 3, B, 4, T, 16", True),
    (time_windows, "B, T, C =>", False),
    (swin_windows, "B, H, W, C =>", True),
    (gram_flat, "B, N, N =>", False),
    (tuple_shape, "B, T, C =>", False),
    (batch_heads_fold, "B, H, T, E =>", False),
])
def test_legitimate_reshapes_are_not_reorders(fn, sig, torch_style):
    if ":int" in sig:  # token ids: the signature's kinds by hand where the syntax has none
        sig = Signature.parse(sig.replace(":int", ""))
        sig = Signature(sig.args, sig.results, sig.symbols, sig.text, ("f", "i"))
    r = verify(fn, sig, torch_style=torch_style)
    assert "reorder" not in kinds(r), [str(f) for f in r]
    assert not r.errors and not r.notes, str(r)


def nanogpt_heads_symbolic(x):
    B, T, C = x.shape
    q = x.view(B, T, 4, C // 4).transpose(1, 2)
    y = (q @ q.transpose(-2, -1)).softmax(dim=-1) @ q
    return y.transpose(1, 2).contiguous().view(B, T, C) if hasattr(y, "contiguous") \
        else y.transpose(1, 2).reshape(B, T, C)


def test_nanogpt_heads_with_symbolic_width():
    r = verify(nanogpt_heads_symbolic, "B, T, C => B, T, C", torch_style=True)
    assert not r.errors and not r.notes and kinds(r) == ["assumption"], str(r)


# A property check of the rule itself: the reshapes that keep a sequence of factors in order
# (any grouping of the sequence into axes, on either side) never raise a reorder, and the ones
# that move a symbolic factor always do.  The oracle is the construction: the factor sequence.

_FACTORS = st.lists(st.sampled_from(["B", "T", "C", "H", 2, 3, 4]), min_size=2, max_size=6)


def _groups(draw, n):
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=n - 1))) if n > 1 else []
    bounds = [0, *cuts, n]
    return list(itertools.pairwise(bounds))


def _reshaper(source, target):
    """Reshape the factor axes to ``source``'s grouping, then to ``target``'s."""
    def fn(x):
        sizes = x.shape
        def merge(groups):
            return [functools.reduce(operator.mul, [sizes[k] for k in g], 1) for g in groups]
        return x.reshape(*merge(source)).reshape(*merge(target))
    return fn


@st.composite
def _in_order(draw):
    factors = draw(_FACTORS.filter(lambda fs: len({f for f in fs if isinstance(f, str)}) ==
                                   sum(isinstance(f, str) for f in fs)))
    n = len(factors)
    src = [range(a, b) for a, b in _groups(draw, n)]
    dst = [range(a, b) for a, b in _groups(draw, n)]
    return factors, src, dst


@settings(max_examples=150)
@given(_in_order())
def test_reshapes_that_keep_factor_order_are_never_reorders(case):
    factors, src, dst = case
    sig = ", ".join(map(str, factors)) + " =>"
    r = verify(_reshaper(src, dst), sig)
    assert "reorder" not in kinds(r), (factors, src, dst, [str(f) for f in r])


@st.composite
def _symbol_moved(draw):
    factors, src, _ = draw(_in_order().filter(
        lambda c: sum(isinstance(f, str) for f in c[0]) >= 2))
    order = draw(st.permutations(range(len(factors))))
    n = len(factors)
    dst = [[order[k] for k in range(a, b)] for a, b in _groups(draw, n)]
    axis_of = [{k: i for i, g in enumerate(groups) for k in g} for groups in (src, dst)]
    symbols = [k for k in range(n) if isinstance(factors[k], str)]
    # two symbols in different axes on both sides whose order differs: visible at any size
    assume(any(axis_of[0][x] < axis_of[0][y] and axis_of[1][x] > axis_of[1][y]
               for x in symbols for y in symbols))
    return factors, src, dst


@settings(max_examples=150)
@given(_symbol_moved())
def test_reshapes_that_move_a_symbolic_factor_are_reorders(case):
    factors, src, dst = case
    sig = ", ".join(map(str, factors)) + " =>"
    r = verify(_reshaper(src, dst), sig)
    assert "reorder" in kinds(r), (factors, src, dst, [str(f) for f in r])


def _gap_runs(seq):
    """The runs of literal sizes between consecutive symbols, and the symbols' order."""
    runs, symbols = [[]], []
    for f in seq:
        if isinstance(f, str):
            symbols.append(f)
            runs.append([])
        else:
            runs[-1].append(f)
    return runs, symbols


def _regroupable(a, b):
    """Whether two runs of sizes group one common sequence of factors (two pointers)."""
    a, b = list(a), list(b)
    while a and b:
        x, y = a.pop(0), b.pop(0)
        if x % y == 0 and x != y:
            a.insert(0, x // y)
        elif y % x == 0 and x != y:
            b.insert(0, y // x)
        elif x != y:
            return False
    return not a and not b


@settings(max_examples=200)
@given(_FACTORS.filter(lambda fs: len({f for f in fs if isinstance(f, str)}) ==
                       sum(isinstance(f, str) for f in fs)), st.randoms(use_true_random=False))
def test_literal_factors_moved_across_a_symbol(factors, rng):
    """Every axis its own factor on both sides: a reorder exactly when the symbols' order
    changes or the sizes between two symbols cannot be two groupings of one sequence."""
    order = list(range(len(factors)))
    rng.shuffle(order)
    single = [[k] for k in range(len(factors))]
    r = verify(_reshaper(single, [[k] for k in order]), ", ".join(map(str, factors)) + " =>")
    (runs_a, syms_a), (runs_b, syms_b) = _gap_runs(factors), _gap_runs(
        [factors[k] for k in order])
    moved = syms_a != syms_b or not all(_regroupable(a, b)
                                        for a, b in zip(runs_a, runs_b, strict=True))
    assert ("reorder" in kinds(r)) == moved, (factors, order, [str(f) for f in r])


def test_one_test_finds_symbolic_values_for_every_library_model():
    """torch's creation wrappers and JAX's patched functions ask one question (`has_sym`):
    a symbolic array, size or range anywhere in tuples, lists or dict values."""
    from tensig.check.sym_functions import has_sym
    from tensig.check.sym_sizes import SymRange, SymSize
    from tensig.check.tracer import SymArray
    from tensig.core.dims import Dim

    T = Dim.symbol("T")
    for value in (SymArray([T], "f"), SymSize(T), SymRange(T)):
        assert has_sym(value) and has_sym(([1, (2, {"k": value})], {}))
    assert not has_sym(((1, 2.0, "T", None), {"k": [np.zeros(3)]}))


def test_the_timeout_waits_for_a_module_load_only(tmp_path, monkeypatch):
    """The timer defers inside the loading of a module, not inside every importlib frame: a
    ``from package import name`` of a loaded package runs importlib's ``_handle_fromlist``,
    and an alarm deferred there each time (a signal handled at the next Python call can land
    there every time) let a loop run to the step limit.  Frames are caught with a profiler."""
    import sys

    from tensig.check.verify import _unsafe_to_stop

    (tmp_path / "loading_probe_pkg").mkdir()
    (tmp_path / "loading_probe_pkg" / "__init__.py").write_text(
        "import sys\nfrom tensig.check.verify import _unsafe_to_stop\n"
        "INSIDE = _unsafe_to_stop(sys._getframe())\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "loading_probe_pkg", raising=False)
    seen: list[bool] = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "_handle_fromlist":
            seen.append(_unsafe_to_stop(frame))

    import loading_probe_pkg

    assert loading_probe_pkg.INSIDE is True
    assert _unsafe_to_stop(sys._getframe()) is False
    import email.message  # noqa: F401  (loaded here, not by whatever the process ran before)

    sys.setprofile(profile)
    try:
        from email import message  # noqa: F401  (a loaded package: _handle_fromlist only)
    finally:
        sys.setprofile(None)
    assert seen and not any(seen)


def test_the_timeout_never_stops_patches_being_put_back():
    """A timer that fired while ``tracing.patched`` put its patches back (a trace that ended as
    its time ran out, or the retry after an import) left the rest in place for good
    (``builtins.len``, ``np.zeros``): setting and putting back patches is not stopped."""
    import sys

    from tensig.check import tracing
    from tensig.check.verify import _unsafe_to_stop

    seen: list[bool] = []

    class Owner:
        def __setattr__(self, name, value):
            seen.append(_unsafe_to_stop(sys._getframe()))
            object.__setattr__(self, name, value)

    owner = Owner()
    object.__setattr__(owner, "x", 1)
    with tracing.patched([(owner, "x", 2)]):
        inside = _unsafe_to_stop(sys._getframe())  # the traced call: stoppable
    assert seen == [True, True]  # set, then put back
    assert inside is False and owner.x == 1


def test_the_conftest_leaves_someone_elses_timer_alone(pytester):
    """The suite's check for a test that leaks the interval timer fails only a test that
    started it: pytest-timeout arms ITIMER_REAL around every test (until after teardown), and
    every test failed under ``pytest --timeout``.  A leak is still caught without it."""
    import pathlib
    import signal

    real = pathlib.Path(__file__).resolve().parent / "conftest.py"
    pytester.makeconftest(f"""
        import importlib.util, signal, pytest
        spec = importlib.util.spec_from_file_location("suite_conftest", {str(real)!r})
        suite = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(suite)
        _no_alarm_left_running = suite._no_alarm_left_running

        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_protocol(item):  # as pytest-timeout's signal method
            if "armed" in item.name:
                previous = signal.signal(signal.SIGALRM, lambda *a: None)
                signal.setitimer(signal.ITIMER_REAL, 600)
            yield
            if "armed" in item.name:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
    """)
    pytester.makepyfile("""
        import signal

        def test_armed_plain():
            pass

        def test_leaks():
            signal.signal(signal.SIGALRM, lambda *a: None)
            signal.setitimer(signal.ITIMER_REAL, 600)
    """)
    handler = signal.getsignal(signal.SIGALRM)
    try:
        result = pytester.runpytest("-p", "no:cacheprovider", "-o", "addopts=")
    finally:
        signal.signal(signal.SIGALRM, handler)  # the leaking test's, in this process
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*test_leaks left the interval timer (SIGALRM) running*"])


def test_the_timeout_never_stops_an_import_halfway(tmp_path, monkeypatch):
    """torch imports sympy on its first meta kernel: a ``timeout`` that fired inside that import
    left sympy half-initialised in ``sys.modules``, and every later function failed with
    "module 'sympy' has no attribute 'printing'".  The timer now waits for the import to end.
    (The alarm is raised from inside the import, so the test does not depend on timing.)"""
    import sys

    (tmp_path / "slow_import_pkg").mkdir()
    (tmp_path / "slow_import_pkg" / "__init__.py").write_text(
        "from slow_import_pkg import part\nDONE = part.READY\n")
    (tmp_path / "slow_import_pkg" / "part.py").write_text(
        "import signal\nsignal.raise_signal(signal.SIGALRM)\nREADY = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_import_pkg", raising=False)
    monkeypatch.delitem(sys.modules, "slow_import_pkg.part", raising=False)

    def f(x: Shaped[np.ndarray, "B, D"]) -> Shaped[np.ndarray, "B, D"]:
        import slow_import_pkg

        assert slow_import_pkg.DONE
        while True:  # then a loop the deferred alarm must stop
            x = x + 1

    report = verify(f, timeout=60)
    assert any("did not finish within 60 s" in n for n in report.notes), report
    assert sys.modules["slow_import_pkg"].DONE is True


def test_a_size_equal_to_a_number_it_can_never_be_is_decided():
    """einops' pack/unpack compare sizes with -1 (its "infer this axis" marker): sizes are
    positive, so ``N == -1`` is False for all sizes, not an assumption (a false warning on
    every ``pack``); ``N == D`` still depends on the sizes and stays one."""
    def f(x: Shaped[np.ndarray, "N, D"]) -> Shaped[np.ndarray, "N, D"]:
        if x.shape[0] == -1 or x.shape[1] - 1 == -1 or x.shape[0] + 2 == 1:
            raise ValueError("never")
        return x

    report = verify(f)
    assert report.ok and not report.findings, report

    def g(x: Shaped[np.ndarray, "N, D"]) -> Shaped[np.ndarray, "N, D"]:
        return x if x.shape[0] == x.shape[1] else x * 2

    assert [f.kind for f in verify(g).findings] == ["assumption"]


def test_a_wrong_permutation_given_as_an_array_is_named():
    def f(x: Shaped[np.ndarray, "N, D"]) -> Shaped[np.ndarray, "D, N"]:
        return np.transpose(x, np.array([0, 0]))

    report = verify(f)
    assert any("is not a permutation of the axes of [N, D]" in n for n in report.notes), report


def test_two_threads_verifying_at_once_each_get_their_own_result():
    """verify's patches (``np.zeros``, ``len``...) are process-wide: two threads tracing at once
    installed and restored them interleaved (the second saving the first's replacements as the
    originals).  Traces now run one at a time: the second starts after the first ends."""
    import builtins
    import threading

    zeros, length = np.zeros, builtins.len
    inside, other_traced, overlapped = threading.Event(), threading.Event(), []

    def slow(x):  # keeps its trace open while the other thread has its chance
        inside.set()
        overlapped.append(other_traced.wait(0.5))
        return np.zeros((x.shape[0], 3)) + x[:, :1]

    def fast(x):
        other_traced.set()
        return np.zeros(len(x.T))

    reports: dict[str, Report] = {}
    threads = [threading.Thread(target=lambda f=f, s=s: reports.update(  # a slow machine's wait
        {f.__name__: verify(f, s, timeout=60)}))
               for f, s in ((slow, "B T => B 3"), (fast, "B T => T"))]
    threads[0].start()
    assert inside.wait(30)
    threads[1].start()
    for t in threads:
        t.join(60)
    assert overlapped == [False]
    assert reports["slow"].ok and reports["fast"].ok, (str(reports["slow"]), str(reports["fast"]))
    assert reports["fast"].result == ((Signature.parse("B T").args[0][1],),)
    assert np.zeros is zeros and builtins.len is length  # put back


def test_a_class_without_forward_is_verified_as_its_constructor():
    """verify builds an instance only of a module class (one with a ``forward``): a plain class
    given a signature had its ``__init__`` traced, and raised Unbuilt (or was built, side
    effects and all, and then called) once classes were built for verification."""
    from tensig import Float
    from tensig.check.verify import Unbuilt
    from tensig.core.errors import TensigError

    built = []

    class Pair:
        def __init__(self, x, y):
            self.z = x @ y

    class Counter:
        def __init__(self):
            built.append(self)

    assert verify(Pair, "B T; T D").ok
    assert kinds(verify(Pair, "B T; D D")) == ["contraction"]
    with pytest.raises(TypeError, match="takes 0 array argument"):
        verify(Counter, "B T")
    assert built == []

    class Sized(torch.nn.Module):
        def __init__(self, d: int):
            super().__init__()

        def forward(self, x: Float[torch.Tensor, "B d"]) -> Float[torch.Tensor, "B d"]:
            return x

    with pytest.raises(TensigError, match=r"Sized\(\) needs d"):  # Unbuilt is tensig's
        verify(Sized)
    assert issubclass(Unbuilt, TypeError)


def test_waiting_for_another_threads_trace_is_bounded_by_the_timeout():
    """Traces run one at a time; a verify waiting for another thread's trace that does not end
    (a non-main thread has no timer) waited for it however long, past its own timeout."""
    import threading

    inside, release, reports = threading.Event(), threading.Event(), []

    def stuck(x):  # a trace that ends only when the test lets it
        inside.set()
        release.wait(60)
        return x

    other = threading.Thread(target=lambda: reports.append(verify(stuck, "B => B")))
    other.start()
    try:
        assert inside.wait(30)
        r = verify(lambda x: x + 1, "B => B", timeout=0.2)
        waited = release.is_set()
    finally:
        release.set()
        other.join(60)
    assert not waited and not r.ok and r.result is None, str(r)
    assert "another thread's trace ran all of 0.2 s" in r.notes[0], r.notes
    assert reports[0].ok and verify(lambda x: x + 1, "B => B", timeout=30).ok  # lock released


def test_a_literal_equal_to_a_leaked_witness_is_no_silent_size():
    """A number that equals the witness of a size turned into an int may be a literal of the
    code (here 11, T's witness): read back as T it would verify a reshape that fails at T = 12,
    so the reading is a stated assumption, never a silent one."""
    def regroup(x):
        int(x.shape[0])  # T turned into a number: its witness
        return x.reshape(11, -1)

    regroup(np.zeros((11, 3)))
    with pytest.raises(ValueError):
        regroup(np.zeros((12, 3)))
    r = verify(regroup, "T D => T D")
    assert not r.ok and "assumption" in kinds(r), str(r)


def _reorder_sliced_kept(x):  # a range of a reorder, viewed in the reorder's own axes: mixed
    B, T, H, E = x.shape
    return x.reshape(B, H, T, E)[:, 1:].reshape(B, H - 1, T, E)


def _reorder_sliced_regrouped(x):
    B, T, H, E = x.shape
    return x.reshape(B, H, T, E)[:, 1:].reshape(B * (H - 1), T, E)


def _reorder_batch_range(x):  # a range of an axis before the mixed ones: no view back
    B, T, H, E = x.shape
    return x.reshape(B, H, T, E)[1:].reshape(B - 1, H, T, E)


def test_a_range_of_a_reorder_viewed_on_keeps_the_reorder():
    """A range of a reorder's first mixed axis, reshaped in the reorder's order, is judged
    with the range grown back to the whole axis: still a reorder (the pair's sizes differ, so
    judging the two as one would claim nothing and withdraw the first finding)."""
    x = np.arange(2 * 3 * 5 * 7).reshape(2, 3, 5, 7)
    assert not np.array_equal(_reorder_sliced_kept(x), x.transpose(0, 2, 1, 3)[:, 1:])
    for fn in (_reorder_sliced_kept, _reorder_sliced_regrouped, _reorder_batch_range):
        assert kinds(verify(fn, "B, T, H, E =>")) == ["reorder"], fn.__name__


def test_a_finding_left_out_in_the_square_retrace_is_listed_as_suppressed():
    """verify traces ``int(math.sqrt(N))`` again with N a square: a finding ``ignore`` leaves
    out there is still listed as suppressed (the outer call's own filtering emptied it)."""
    import math

    def grid(x):
        h = int(math.sqrt(x.shape[0]))
        return x.reshape(h, h, x.shape[1]) + np.zeros((5,))

    r = verify(grid, "N D =>", ignore=["TS101"])
    assert "is a square" in str(r) and [f.code for f in r.suppressed] == ["TS101"], str(r)
