"""Symbolic verification: the blog's four bugs found at any size (where a runtime check sees
them only when sizes differ), their fixes verified clean, and the other findings."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tensig.verify import Report, Signature, verify


def kinds(report: Report) -> list[str]:
    return [f.kind for f in report]


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

    assert kinds(verify(bad, "B T d => B d T")) == ["reshape"]
    assert verify(good, "B T d => B d T").ok


def test_reshape_with_wrong_element_count():
    def bad(x):
        return x.reshape(x.shape[0], x.shape[1])

    assert kinds(verify(bad, "B T d =>")) == ["reshape"]


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


def test_unsupported_operation_is_a_note_not_a_silent_pass():
    def f(x):
        return np.einsum("...i->...", x)

    r = verify(f, "B T =>")
    assert not r.ok and not r.complete and "einsum" in r.notes[0]


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
