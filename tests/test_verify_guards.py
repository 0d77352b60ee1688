"""verify past the user's own shape guards (tensig.check.guards): ``assert C % n_head == 0``
(nanoGPT), ``if hidden % heads != 0: raise ValueError`` (Hugging Face), torchvision's input
checks, timm's patch grid, ``assert H == W``, a NumPy k-means that checks its centroids.  No
witness (distinct primes) passes such a guard, so the trace took the raising side; now the
guard's condition is forced to its other side and the rest is verified under it, said as
a warning.  Each correct function verifies with that assumption; its twin with a planted bug
after the guard still gives the bug's code.  Oracle: torch and NumPy run each correct one at
sizes that meet the guard (the declared shapes come back) and raise at sizes that do not.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tensig import Float, Int
from tensig.check import guards
from tensig.check.verify import verify

N_HEAD = 4
PATCH = 16


def gpt_attention(x: Float[torch.Tensor, "B T C"], w: Float[torch.Tensor, "C 3*C"]
                  ) -> Float[torch.Tensor, "B T C"]:
    """nanoGPT's CausalSelfAttention.forward, weights passed in."""
    B, T, C = x.size()
    assert C % N_HEAD == 0
    q, k, v = (x @ w).split(C, dim=2)
    q = q.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
    k = k.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
    v = v.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    y = att.softmax(dim=-1) @ v
    return y.transpose(1, 2).contiguous().view(B, T, C)


def gpt_attention_bug(x: Float[torch.Tensor, "B T C"], w: Float[torch.Tensor, "C 3*C"]
                      ) -> Float[torch.Tensor, "B T C"]:
    B, T, C = x.size()
    assert C % N_HEAD == 0
    q, k, v = (x @ w).split(C, dim=2)
    q = q.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
    k = k.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
    v = v.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    y = att.softmax(dim=-1) @ v
    return y.reshape(B, T, C)  # bug: heads before time, no transpose back


def hf_split_heads(x: Float[torch.Tensor, "B T D"], heads: int = 8
                   ) -> Float[torch.Tensor, "B 8 T D//8"]:
    """Hugging Face's attention: the hidden size checked against the heads, then split."""
    if x.shape[-1] % heads != 0:
        raise ValueError(f"The hidden size ({x.shape[-1]}) is not a multiple of the number "
                         f"of attention heads ({heads})")
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).permute(0, 2, 1, 3)


def hf_split_heads_bug(x: Float[torch.Tensor, "B T D"], heads: int = 8
                       ) -> Float[torch.Tensor, "B 8 T D//8"]:
    if x.shape[-1] % heads != 0:
        raise ValueError("hidden size is not a multiple of the heads")
    B, T, D = x.shape
    return x.view(B, T, heads, D // heads).permute(0, 2, 3, 1)  # bug: heads last


def normalize_rgb(img: Float[torch.Tensor, "B C H W"]) -> Float[torch.Tensor, "B C H W"]:
    """torchvision-style input checks: a batch of RGB images, normalised per channel."""
    if img.dim() != 4:
        raise ValueError(f"expected a batch of images, got {img.dim()} dimensions")
    if img.shape[1] != 3:
        raise ValueError(f"expected 3 channels, got {img.shape[1]}")
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    return (img - mean) / std


def normalize_rgb_bug(img: Float[torch.Tensor, "B C H W"]) -> Float[torch.Tensor, "B C H W"]:
    if img.shape[1] != 3:
        raise ValueError(f"expected 3 channels, got {img.shape[1]}")
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 1, 1, 3)  # bug: on the width axis
    return img - mean


def patch_embed(x: Float[torch.Tensor, "B C H W"], w: Float[torch.Tensor, "E C*256"]
                ) -> Float[torch.Tensor, "B H//16*(W//16) E"]:
    """timm's PatchEmbed: the image must tile into 16 x 16 patches."""
    B, C, H, W = x.shape
    assert H % PATCH == 0 and W % PATCH == 0, f"image {H}x{W} does not tile into patches"
    p = x.reshape(B, C, H // PATCH, PATCH, W // PATCH, PATCH).permute(0, 2, 4, 1, 3, 5)
    return p.reshape(B, (H // PATCH) * (W // PATCH), C * PATCH * PATCH) @ w.T


def patch_embed_bug(x: Float[torch.Tensor, "B C H W"], w: Float[torch.Tensor, "E C*256"]
                    ) -> Float[torch.Tensor, "B H//16*(W//16) E"]:
    B, C, H, W = x.shape
    assert H % PATCH == 0 and W % PATCH == 0
    p = x.reshape(B, C, H // PATCH, PATCH, W // PATCH, PATCH).permute(0, 2, 4, 1, 3, 5)
    return p.reshape(B, (H // PATCH) * (W // PATCH), C * PATCH * PATCH) @ w  # bug: w not w.T


def square_pool(x: Float[torch.Tensor, "B C H W"]) -> Float[torch.Tensor, "B C H*W"]:
    """A model for square images only, flattened to tokens after a check."""
    assert x.shape[2] == x.shape[3], "square images only"
    return x.flatten(2) + x.transpose(2, 3).flatten(2)  # the transpose fits a square only


def square_pool_bug(x: Float[torch.Tensor, "B C H W"]) -> Float[torch.Tensor, "B C H*W"]:
    assert x.shape[2] == x.shape[3], "square images only"
    return x.flatten(2) + x.mean(1)  # bug: [B, H*W] against [B, C, H*W]... a channel mean


def kmeans_assign(X: Float[np.ndarray, "N D"], C: Float[np.ndarray, "K E"]
                  ) -> Int[np.ndarray, "N"]:
    """NumPy k-means' assignment step, with its input checks."""
    assert X.ndim == 2, "X must be a matrix"
    assert C.shape[1] == X.shape[1], "centroids and points differ in dimension"
    d = ((X[:, None, :] - C[None, :, :]) ** 2).sum(-1)
    return d.argmin(axis=1)


def kmeans_assign_bug(X: Float[np.ndarray, "N D"], C: Float[np.ndarray, "K E"]
                      ) -> Int[np.ndarray, "N"]:
    assert X.ndim == 2
    assert C.shape[1] == X.shape[1]
    d = ((X[:, None, :] - C[None, :, :]) ** 2).sum(-1)
    return d.argmin(axis=0)  # bug: the nearest point of each centroid


CASES = [  # correct, twin, the assumption said (its start), the twin's finding code
    (gpt_attention, gpt_attention_bug, "requires C divisible by 4: the code raises "
     "AssertionError otherwise", "TS202"),
    (hf_split_heads, hf_split_heads_bug, "requires D divisible by 8: the code raises "
     "ValueError otherwise", "TS103"),
    (normalize_rgb, normalize_rgb_bug, "assumes C == 3: the code raises ValueError otherwise",
     "TS101"),
    (patch_embed, patch_embed_bug, "requires H divisible by 16: the code raises "
     "AssertionError otherwise", "TS102"),
    (square_pool, square_pool_bug, "assumes H == W: the code raises AssertionError otherwise",
     "TS101"),
    (kmeans_assign, kmeans_assign_bug, "assumes E == D: the code raises AssertionError "
     "otherwise", "TS103"),
]


@pytest.mark.parametrize(("good", "bad", "said", "code"), CASES,
                         ids=[c[0].__name__ for c in CASES])
def test_a_guarded_function_verifies_under_its_guard_and_its_twin_bug_is_found(
        good, bad, said, code):
    r = verify(good)
    assert not r.notes and not r.errors, str(r)
    assert any(f.message.startswith(said) for f in r.warnings), str(r)
    assert all(f.code == "TS301" for f in r.findings), str(r)
    twin = verify(bad)
    assert not twin.notes, str(twin)
    assert code in {f.code for f in twin.errors}, str(twin)


def test_an_equality_guard_is_verified_with_the_signature_substituted():
    r = verify(square_pool)
    (said,) = r.findings
    assert said.message.endswith("verified with W = H") and said.line is not None
    assert [str(d) for d in r.result[0]] == ["B", "C", "H**2"]
    r = verify(kmeans_assign)
    assert r.findings[0].message.endswith("verified with E = D"), str(r)
    r = verify(normalize_rgb)
    assert r.findings[0].message.endswith("verified with C = 3"), str(r)
    assert [str(d) for d in r.result[0]] == ["B", "3", "H", "W"]


def test_two_guards_on_one_line_are_each_said():
    r = verify(patch_embed)
    heads = [f.message.split(":")[0] for f in r]
    assert heads == ["requires H divisible by 16", "requires W divisible by 16"], str(r)


def test_the_oracle_runs_each_correct_one_where_its_guard_holds_and_raises_where_not():
    g = torch.Generator().manual_seed(0)

    def t(*shape):
        return torch.rand(*shape, generator=g)

    assert gpt_attention(t(2, 5, 12), t(12, 36)).shape == (2, 5, 12)
    with pytest.raises(AssertionError):
        gpt_attention(t(2, 5, 13), t(13, 39))
    assert hf_split_heads(t(2, 5, 24)).shape == (2, 8, 5, 3)
    with pytest.raises(ValueError, match=r"hidden size \(20\)"):
        hf_split_heads(t(2, 5, 20))
    assert normalize_rgb(t(2, 3, 7, 5)).shape == (2, 3, 7, 5)
    with pytest.raises(ValueError, match="got 4"):
        normalize_rgb(t(2, 4, 7, 5))
    assert patch_embed(t(2, 3, 32, 48), t(7, 3 * 256)).shape == (2, 2 * 3, 7)
    with pytest.raises(AssertionError):
        patch_embed(t(2, 3, 32, 40), t(7, 3 * 256))
    assert square_pool(t(2, 3, 6, 6)).shape == (2, 3, 36)
    with pytest.raises(AssertionError):
        square_pool(t(2, 3, 6, 5))
    rng = np.random.default_rng(0)
    assert kmeans_assign(rng.random((9, 4)), rng.random((3, 4))).shape == (9,)
    with pytest.raises(AssertionError):
        kmeans_assign(rng.random((9, 4)), rng.random((3, 5)))
    with pytest.raises(RuntimeError):  # the twins' bugs are real: torch rejects them
        patch_embed_bug(t(2, 3, 32, 48), t(7, 3 * 256))
    with pytest.raises(RuntimeError):
        normalize_rgb_bug(t(2, 3, 7, 5))


def test_the_guards_verification_matches_torch_at_a_size_that_meets_it():
    """The result verify reports, evaluated where the guard holds, is what torch returns."""
    r = verify(patch_embed)  # H = 32 and W = 48: H as 16*H_over16, W as 16*W_over16
    sizes = {"B": 2, "C": 3, "H_over16": 2, "W_over16": 3, "E": 7}
    assert tuple(d.evaluate(sizes) for d in r.result[0]) == (2, 6, 7)


def _counted(calls: list[int]):
    def ten_guards(x: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "N D"]:
        calls.append(1)
        D = x.shape[1]
        for k in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29):
            assert D % k == 0, f"D must be divisible by {k}"
        return x
    return ten_guards


def test_the_retraces_are_bounded_and_a_guard_too_many_keeps_the_stop_note():
    calls: list[int] = []
    r = verify(_counted(calls))
    assert len(calls) == 1 + guards.TRIES
    (note,) = r.notes
    assert "verification stopped at" in note and "D must be divisible by 2" in note, note
    assert "assumes not (D % 2 == 0)" in str(r)  # the first trace's report, as before


def always_raises(x: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "N D"]:
    if x.shape[1] % 4:
        raise ValueError("D must be a multiple of 4")
    raise NotImplementedError(f"no kernel for {x.shape[1]} features yet")


def plain_raise(x: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "N D"]:
    raise ValueError(f"unsupported width {x.shape[-1]}")


def library_raise(x: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "N D"]:
    if x.shape[1] > 20:
        x = x[:, :20]
    np.ones(3).reshape(2, 2)  # NumPy raises (from the user's line): no guard of the user's
    return x


def test_a_raise_no_flip_avoids_keeps_todays_stop_note():
    r = verify(always_raises)
    (note,) = r.notes
    assert note.endswith("ValueError: D must be a multiple of 4"), note
    r = verify(plain_raise)
    (note,) = r.notes  # a SymSize formats as its size's text
    assert note.endswith("ValueError: unsupported width D"), note
    r = verify(library_raise)
    (note,) = r.notes
    assert "cannot reshape array of size 3" in note, note
    assert "assumes not (D > 20)" in str(r), str(r)


def test_a_guard_the_witness_passes_is_not_traced_again():
    calls: list[int] = []

    def short(x: Float[torch.Tensor, "B T"]) -> Float[torch.Tensor, "B T"]:
        calls.append(1)
        assert x.shape[1] <= 1024, "Cannot forward sequence longer than the block size"
        return x
    r = verify(short)
    assert len(calls) == 1 and not r.notes and not r.errors, str(r)


def heads16(x: Float[torch.Tensor, "B T D"]) -> Float[torch.Tensor, "B T D"]:
    B, T, D = x.shape
    q = x.view(B, T, 16, D // 16).transpose(1, 2)
    att = (q @ q.transpose(-2, -1)) / math.sqrt(D // 16)
    return (att.softmax(-1) @ q).transpose(1, 2).reshape(B, T, D)


def test_a_requirement_is_said_once_per_function_at_its_first_line():
    r = verify(heads16)
    said = [f for f in r if f.message.startswith("requires D divisible by 16")]
    assert len(said) == 1 and said[0].line == heads16.__code__.co_firstlineno + 2, str(r)


def test_a_library_check_after_a_guard_still_fails_and_the_right_guard_passes_it():
    def conv_after_guard(x: Float[torch.Tensor, "B C L"], w: Float[torch.Tensor, "O 4 3"]
                         ) -> Float[torch.Tensor, "B O L-2"]:
        assert x.shape[1] % 2 == 0, "channels come in pairs"
        return F.conv1d(x, w)  # C channels against the weight's 4: C == 4 only

    def conv_four(x: Float[torch.Tensor, "B C L"], w: Float[torch.Tensor, "O 4 3"]
                  ) -> Float[torch.Tensor, "B O L-2"]:
        assert x.shape[1] == 4, "expected 4 channels"
        return F.conv1d(x, w)

    r = verify(conv_after_guard)
    assert [f.code for f in r.errors] == ["TS102"] and not r.notes, str(r)
    with pytest.raises(RuntimeError):  # torch agrees, at a C the guard accepts
        conv_after_guard(torch.ones(2, 6, 9), torch.ones(5, 4, 3))
    r = verify(conv_four)
    assert not r.errors and not r.notes, str(r)
    assert r.findings[0].message.endswith("verified with C = 4"), str(r)
    assert conv_four(torch.ones(2, 4, 9), torch.ones(5, 4, 3)).shape == (2, 5, 7)


def checked_twice(x: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "N 4 D//4"]:
    assert x.shape[1] % 4 == 0, "D must split into 4 groups"
    if x.shape[1] % 4 == 0:  # the same condition: decided as the guard was forced
        return x.reshape(len(x), 4, -1)
    raise ValueError("unreachable")


def test_a_forced_condition_decides_alike_wherever_it_is_asked():
    r = verify(checked_twice)
    assert [f.message for f in r] == ["requires D divisible by 4: the code raises "
                                      "AssertionError otherwise; verified with D = 4*D_over4"] \
        and not r.notes, str(r)
    assert checked_twice(np.ones((3, 8))).shape == (3, 4, 2)
    with pytest.raises(AssertionError):
        checked_twice(np.ones((3, 6)))


def test_jax_guards_are_traced_past_too():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def square(x):
        if x.shape[1] != x.shape[2]:
            raise ValueError("square only")
        return x + jnp.swapaxes(x, 1, 2)

    r = verify(square, "B H W => B H W")
    assert not r.notes and not r.errors and "verified with W = H" in str(r), str(r)
    assert square(jnp.ones((2, 5, 5))).shape == (2, 5, 5)
    with pytest.raises(ValueError):
        square(jnp.ones((2, 5, 4)))


def first_64(x: Float[torch.Tensor, "B D"]) -> Float[torch.Tensor, "B 64"]:
    """An order guard, then a branch the guard's side decides: ``D > 64`` must not be taken
    at a witness below 64 (the forced side and the witnesses would disagree)."""
    if x.shape[1] < 64:
        raise ValueError(f"need at least 64 features, got {x.shape[1]}")
    if x.shape[1] > 64:
        x = x[:, :64]
    return x


def first_64_bug(x: Float[torch.Tensor, "B D"]) -> Float[torch.Tensor, "B 64"]:
    if x.shape[1] < 64:
        raise ValueError("need at least 64 features")
    return x[:, 1:65] + x[:, :1].T  # bug: [B, 64] against [1, B]


def test_an_order_guard_is_substituted_so_later_branches_agree_with_it():
    for d in (64, 65, 100):
        assert first_64(torch.zeros(3, d)).shape == (3, 64)
    with pytest.raises(ValueError):
        first_64(torch.zeros(3, 63))
    r = verify(first_64)
    assert not r.errors and not r.notes, str(r)
    assert "assumes not (D < 64): the code raises ValueError otherwise" in str(r), str(r)
    assert "verified with D = D_more + 63" in str(r), str(r)
    assert verify(first_64_bug).errors


def timm_patch_embed(x: Float[torch.Tensor, "B 3 H W"], w: Float[torch.Tensor, "32 3 4 4"]
                     ) -> Float[torch.Tensor, "B H*W//16 32"]:
    """timm's style: torch._assert / torch._check, which raise inside torch on a False."""
    _, _, h, wd = x.shape
    torch._assert(h % 4 == 0, f"height {h} not divisible by the patch size")
    torch._check(wd % 4 == 0, lambda: "width not divisible by the patch size")
    return F.conv2d(x, w, stride=4).flatten(2).transpose(1, 2)


def timm_patch_embed_bug(x: Float[torch.Tensor, "B 3 H W"], w: Float[torch.Tensor, "32 3 4 4"]
                         ) -> Float[torch.Tensor, "B H*W//16 32"]:
    _, _, h, wd = x.shape
    torch._assert(h % 4 == 0, f"height {h} not divisible by the patch size")
    torch._check(wd % 4 == 0, lambda: "width not divisible by the patch size")
    return F.conv2d(x, w, stride=4).flatten(2)  # the transpose forgotten


def test_torch_assert_and_check_are_the_users_guards():
    r = verify(timm_patch_embed)
    said = sorted(f.message for f in r.findings)
    assert len(said) == 2 and not r.notes, str(r)
    assert said[0].startswith("requires H divisible by 4: the code raises AssertionError"), said
    assert said[1].startswith("requires W divisible by 4: the code raises RuntimeError"), said
    assert any(f.code == "TS103" for f in verify(timm_patch_embed_bug).findings)
    w = torch.randn(32, 3, 4, 4)
    assert timm_patch_embed(torch.randn(2, 3, 8, 12), w).shape == (2, 6, 32)
    with pytest.raises(AssertionError):
        timm_patch_embed(torch.randn(2, 3, 7, 12), w)
    with pytest.raises(RuntimeError):
        timm_patch_embed(torch.randn(2, 3, 8, 13), w)


def twelve_groups(x: Float[torch.Tensor, "B D"]) -> Float[torch.Tensor, "B D"]:
    """Two divisibility guards whose factors share 2 (D % 4, then D % 6: D a multiple of 12),
    then a branch on D % 3 that they decide and 12 groups of D // 12."""
    d = x.shape[1]
    assert d % 4 == 0
    assert d % 6 == 0
    if d % 3 != 0:
        return x[:, :1]
    return x.view(x.shape[0], 12, d // 12).reshape(x.shape[0], d)


def in_steps(x: Float[torch.Tensor, "B D"]) -> Float[torch.Tensor, "B D"]:
    """A loop of guards on the same size: D % 2, 4, 8 (D a multiple of 8)."""
    for k in (2, 4, 8):
        if x.shape[1] % k != 0:
            raise ValueError(f"the size is not a multiple of {k}")
        x = x.view(x.shape[0], k, -1).reshape(x.shape[0], -1)
    return x


def test_a_second_divisibility_is_substituted_with_the_factor_it_shares():
    for d in (12, 24, 36):
        assert twelve_groups(torch.zeros(2, d)).shape == (2, d)
        assert in_steps(torch.zeros(2, 2 * d)).shape == (2, 2 * d)
    with pytest.raises(AssertionError):
        twelve_groups(torch.zeros(2, 8))
    with pytest.raises(ValueError):
        in_steps(torch.zeros(2, 12))
    r = verify(twelve_groups)  # was: D % 6 required at D = 4*11, D % 3 decided false: TS103
    assert not r.errors and not r.notes, str(r)
    assert "verified with D_over4 = 3*D_over12" in str(r), str(r)
    r = verify(in_steps)  # was: D = 4*D_over8, then 8*D_over64 (the names not the quotients)
    assert not r.errors and not r.notes, str(r)
    assert "verified with D_over4 = 2*D_over8" in str(r), str(r)


def three_widths(x: Float[torch.Tensor, "B D"]) -> Float[torch.Tensor, "B D"]:
    """Three ways past one guard, a bug at the first only."""
    if x.shape[1] not in (32, 64, 128):
        raise ValueError("the width must be 32, 64 or 128")
    return x[:, :1] if x.shape[1] == 32 else x  # bug at 32


def test_every_way_past_a_guard_is_traced_not_only_two():
    assert three_widths(torch.zeros(2, 64)).shape == (2, 64)
    assert three_widths(torch.zeros(2, 32)).shape != (2, 32)  # the bug, at a size it accepts
    r = verify(three_widths)  # was: traced at 128 and 64 only, no error
    assert [f.kind for f in r.errors] == ["return-shape"], str(r)
    assert "assumes D == 32: one way past" in str(r), str(r)


def width_table(x: Float[torch.Tensor, "B D"]) -> Float[torch.Tensor, "B D"]:
    """A kernel that supports a table of widths: more ways past its guard than are traced."""
    if x.shape[1] not in (2, 3, 5, 7, 9, 17):
        raise ValueError("unsupported width")
    return x * 2


def test_ways_past_a_guard_beyond_the_cap_are_said_not_traced():
    r = verify(width_table)
    traced = {f.message.split(":")[0] for f in r.findings}
    assert len(traced) == guards.TRIES + 1 and not r.ok, str(r)
    assert r.notes == [f"1 more way(s) past the guard that raises ValueError at "
                       f"test_verify_guards.py:{width_table.__code__.co_firstlineno + 3} not "
                       f"traced ({guards.TRIES + 1} are)"], r.notes
    for d in (2, 3, 5, 7, 9, 17):  # every way the guard lets past runs and keeps its shape
        assert width_table(torch.ones(4, d)).shape == (4, d)
    with pytest.raises(ValueError):
        width_table(torch.ones(4, 4))
