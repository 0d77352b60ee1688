"""verify on ``int()`` of a size times a float, the way real code turns a ratio into a size
(MAE's ``int(L * (1 - mask_ratio))``, CutMix's ``int(W * np.sqrt(1 - lam))``).  A small dyadic
ratio (0.25, 0.75, 1/2) gives the floor quotient, any other a fresh size; either is a number at
the witness read back as that size, so the trace states it as an assumption.  Each function that
verifies is also run concretely at every size up to 40 (the oracle)."""

from __future__ import annotations

import math

import numpy as np
import torch

from arrays import kinds
from tensig import Float
from tensig.check.verify import verify


def _verified_assuming_int(report) -> bool:
    """Verified but for assumptions, the int() one among them: no error, no note."""
    return not report.errors and not report.notes and \
        all(f.kind == "assumption" for f in report) and \
        any(f.message.startswith("assumes int(") for f in report)


def mae_numpy(x: Float[np.ndarray, "N L D"]) -> Float[np.ndarray, "N L//4 D"]:
    """MAE's random masking: a quarter of the tokens kept, in a random order."""
    N, L = x.shape[:2]
    len_keep = int(L * (1 - 0.75))
    ids = np.argsort(np.random.rand(N, L), axis=1)[:, :len_keep]
    return x[np.arange(N)[:, None], ids]


def mae_numpy_bug(x: Float[np.ndarray, "N L D"]) -> Float[np.ndarray, "N L//2 D"]:
    N, L = x.shape[:2]
    len_keep = int(L * (1 - 0.75))  # BUG: keeps a quarter, declared a half
    ids = np.argsort(np.random.rand(N, L), axis=1)[:, :len_keep]
    return x[np.arange(N)[:, None], ids]


def test_mae_masking_in_numpy_is_the_floor_quarter_and_its_twin_is_found():
    for n_tokens in range(1, 41):  # the oracle: int(L * 0.25) is L // 4 at every L
        assert mae_numpy(np.ones((2, n_tokens, 3))).shape == (2, n_tokens // 4, 3)
    assert mae_numpy_bug(np.ones((2, 13, 3))).shape != (2, 13 // 2, 3)
    r = verify(mae_numpy)
    assert _verified_assuming_int(r) and "L // 4" in str(r), str(r)
    assert kinds(verify(mae_numpy_bug)).count("return-shape") == 1


def mae_torch(x: Float[torch.Tensor, "N L D"], mask_ratio: float = 0.75
              ) -> tuple[Float[torch.Tensor, "N L//4 D"], Float[torch.Tensor, "N L"]]:
    """MAE's masking in torch: gather the kept tokens, and a mask in the original order."""
    N, L, D = x.shape
    len_keep = int(L * (1 - mask_ratio))
    shuffle = torch.argsort(torch.rand(N, L), dim=1)
    restore = torch.argsort(shuffle, dim=1)
    kept = torch.gather(x, 1, shuffle[:, :len_keep].unsqueeze(-1).repeat(1, 1, D))
    mask = torch.ones(N, L)
    mask[:, :len_keep] = 0
    return kept, torch.gather(mask, 1, restore)


def mae_torch_bug(x: Float[torch.Tensor, "N L D"], mask_ratio: float = 0.75
                  ) -> tuple[Float[torch.Tensor, "N L//2 D"], Float[torch.Tensor, "N L"]]:
    N, L, D = x.shape
    len_keep = int(L * (1 - mask_ratio))  # BUG: a quarter, declared a half
    shuffle = torch.argsort(torch.rand(N, L), dim=1)
    kept = torch.gather(x, 1, shuffle[:, :len_keep].unsqueeze(-1).repeat(1, 1, D))
    return kept, torch.ones(N, L)


def test_mae_masking_in_torch_is_the_floor_quarter_and_its_twin_is_found():
    for n_tokens in range(1, 41):
        kept, mask = mae_torch(torch.ones(2, n_tokens, 3))
        assert kept.shape == (2, n_tokens // 4, 3) and mask.shape == (2, n_tokens)
    r = verify(mae_torch)
    assert _verified_assuming_int(r), str(r)
    assert "return-shape" in kinds(verify(mae_torch_bug))


def halves(x: Float[np.ndarray, "T D"]) -> Float[np.ndarray, "T//2 D"]:
    return x[:int(x.shape[0] / 2)]


def halves_by_float(x: Float[np.ndarray, "T D"]) -> Float[np.ndarray, "T//2 D"]:
    return x[:int(x.shape[0] / 2.0)]


def three_quarters_floor(x: Float[np.ndarray, "T D"]) -> Float[np.ndarray, "(3*T)//4 D"]:
    return x[:math.floor(x.shape[0] * 0.75)]


def three_quarters_ceil(x: Float[np.ndarray, "T D"]) -> Float[np.ndarray, "(3*T+3)//4 D"]:
    return x[:math.ceil(x.shape[0] * 0.75)]


def rounded_three_quarters(x: Float[np.ndarray, "T D"]) -> Float[np.ndarray, "(3*T)//4 D"]:
    return x[:round(x.shape[0] * 0.75)]  # wrong at T = 2: round(1.5) is 2


def test_int_of_a_size_over_two_and_floor_and_ceil_of_a_dyadic_ratio_are_quotients_not_round():
    for t in range(1, 41):
        for fn, want in ((halves, t // 2), (halves_by_float, t // 2),
                         (three_quarters_floor, 3 * t // 4),
                         (three_quarters_ceil, (3 * t + 3) // 4)):
            assert fn(np.ones((t, 2))).shape == (want, 2), (fn.__name__, t)
    for fn in (halves, halves_by_float):
        assert _verified_assuming_int(r := verify(fn)), str(r)
    for fn in (three_quarters_floor, three_quarters_ceil):
        assert verify(fn).ok, str(verify(fn))
    assert rounded_three_quarters(np.ones((2, 1))).shape == (2, 1)  # round(1.5) = 2, not 1
    r = verify(rounded_three_quarters)  # round() stays a fresh size: half to even is no floor
    assert not r.notes and "return-shape" in kinds(r), str(r)


def nine_tenths(x: Float[np.ndarray, "N L D"]) -> Float[np.ndarray, "N L*9//10 D"]:
    return x[:, :int(x.shape[1] * 0.9)]


def seven_tenths(x: Float[np.ndarray, "N L D"]) -> Float[np.ndarray, "N L*7//10 D"]:
    return x[:, :int(x.shape[1] * 0.7)]  # wrong at L = 90: int(62.99999999999999)


def kept_tenth(x: Float[np.ndarray, "N L D"]) -> Float[np.ndarray, "N L//10 D"]:
    return x[:, :int(x.shape[1] * (1 - 0.9))]  # MAE at 0.9, wrong at L = 10: 0.09999999999999998


def test_int_of_a_decimal_ratio_is_a_fresh_size_not_its_quotient():
    """0.7 and 0.9 are no dyadics: their doubles are not 7/10 and 9/10, and int() of 90 * 0.7
    is 62, not 63 = 90*7 // 10; verify claims none equal to the annotation's quotient.  (0.9's
    double is above 9/10, so nine_tenths holds at every L to 10**6: a conservative error.)"""
    assert seven_tenths(np.ones((1, 90, 1))).shape[1] == 62 != 90 * 7 // 10
    assert kept_tenth(np.ones((1, 10, 1))).shape[1] == 0 != 10 // 10
    for fn in (nine_tenths, seven_tenths, kept_tenth):
        r = verify(fn)
        assert not r.ok and not r.notes and "return-shape" in kinds(r), str(r)


def first_half_up(x: Float[np.ndarray, "N L D"]) -> Float[np.ndarray, "N L-L//2 D"]:
    return x[:, :x.shape[1] + int(x.shape[1] * -0.5)]  # int() truncates: L - L // 2


def first_half_as_floor(x: Float[np.ndarray, "N L D"]) -> Float[np.ndarray, "N L//2 D"]:
    return x[:, :x.shape[1] + int(x.shape[1] * -0.5)]  # wrong at odd L: a floor's L//2


def test_int_of_a_negative_ratio_truncates_toward_zero():
    for n in range(1, 41):
        assert first_half_up(np.ones((1, n, 1))).shape == (1, n - n // 2, 1)
    assert first_half_as_floor(np.ones((1, 13, 1))).shape[1] != 13 // 2
    r = verify(first_half_up)
    assert _verified_assuming_int(r), str(r)
    r = verify(first_half_as_floor)  # L - L // 2 is L // 2 only where L is even
    assert not r.ok and not r.notes and "requires L divisible by 2" in str(r), str(r)


def branch_on_keep(x: Float[np.ndarray, "N L D"]) -> Float[np.ndarray, "N L//4 D"]:
    """Wrong below L = 12: the branch is taken on int()'s number, 3 at the witness."""
    len_keep = int(x.shape[1] * 0.25)
    return x[:, :x.shape[1] // 4] if len_keep >= 3 else x[:, :x.shape[1] // 2]


def test_a_branch_on_int_of_a_ratio_is_an_assumption_not_a_proof():
    assert branch_on_keep(np.ones((1, 8, 1))).shape[1] == 4 != 8 // 4
    r = verify(branch_on_keep)
    assert not r.ok and any(f.message.startswith("assumes int(") for f in r), str(r)


def cutmix(x: Float[np.ndarray, "B C H W"], lam: float = 0.5) -> Float[np.ndarray, "B C H W"]:
    """CutMix: a box of side sqrt(1 - lam) of each image pasted from another in the batch."""
    H, W = x.shape[2], x.shape[3]
    cut = np.sqrt(1.0 - np.random.beta(1.0, 1.0))
    cut_h, cut_w = int(H * cut), int(W * cut)
    cy, cx = np.random.randint(H), np.random.randint(W)
    y1, y2 = np.clip(cy - cut_h // 2, 0, H), np.clip(cy + cut_h // 2, 0, H)
    x1, x2 = np.clip(cx - cut_w // 2, 0, W), np.clip(cx + cut_w // 2, 0, W)
    out = x.copy()
    out[:, :, y1:y2, x1:x2] = x[np.random.permutation(x.shape[0])][:, :, y1:y2, x1:x2]
    return out


def test_cutmix_box_is_traced_to_its_end_without_a_false_error():
    for h, w in ((1, 1), (5, 7), (13, 11), (32, 32)):
        assert cutmix(np.ones((2, 3, h, w))).shape == (2, 3, h, w)
    r = verify(cutmix)
    assert _verified_assuming_int(r), str(r)


def count_declared_quarter(x: Float[np.ndarray, "N L D"]) -> Float[np.ndarray, "N L//4 D"]:
    int(x.shape[1] * 0.25)  # 3 at the witness L, as is any data-dependent count
    return x[:, :int(np.flatnonzero(x[0, :, 0] > 0).shape[0])]  # BUG: the positives' count


def literal_declared_quarter(x: Float[np.ndarray, "N L D"]) -> Float[np.ndarray, "N L//4 D"]:
    keep = int(x.shape[1] * 0.25)
    return x[:, :3] if keep else x  # BUG: 3, not keep


def kept_rgb(x: Float[np.ndarray, "N L D"]) -> Float[np.ndarray, "N L//4 3"]:
    keep = int(x.shape[1] * 0.25)
    return np.zeros((x.shape[0], keep, 3))


def test_int_of_a_compound_size_is_a_number_no_literal_or_count_has():
    """L // 4 is 3 at the witness L = 13: a literal 3 (an RGB axis) or a fresh size's number
    (a mask's count) read back as L // 4 verified wrong code and flagged right code."""
    x = np.ones((2, 40, 3))
    x[0, 5:, 0] = 0
    assert count_declared_quarter(x).shape[1] == 5 != 40 // 4
    assert literal_declared_quarter(x).shape[1] == 3 != 40 // 4
    for n_tokens in range(1, 41):
        assert kept_rgb(np.ones((2, n_tokens, 1))).shape == (2, n_tokens // 4, 3)
    for fn in (count_declared_quarter, literal_declared_quarter):
        assert "return-shape" in kinds(r := verify(fn)), str(r)
    assert _verified_assuming_int(r := verify(kept_rgb)), str(r)


def half_steps(x: Float[np.ndarray, "T"]) -> Float[np.ndarray, "2*T"]:
    return np.arange(0, x.shape[0], 0.5)


def half_steps_declared_t(x: Float[np.ndarray, "T"]) -> Float[np.ndarray, "T"]:
    return np.arange(0, x.shape[0], 0.5)  # BUG: 2*T steps


def even_steps_declared_t(x: Float[np.ndarray, "T"]) -> Float[np.ndarray, "T"]:
    return np.arange(0, x.shape[0], step=2)  # BUG: (T + 1) // 2 steps


def test_arange_counts_a_float_step_and_a_step_by_keyword():
    """``np.arange(0, T, 0.5)`` was ``[T]`` (the float step dropped), ``step=2`` too."""
    for t in range(1, 41):
        assert half_steps(np.ones(t)).shape == (2 * t,)
        assert even_steps_declared_t(np.ones(t)).shape == ((t + 1) // 2,)
    assert verify(half_steps).ok, str(verify(half_steps))
    for fn in (half_steps_declared_t, even_steps_declared_t):
        assert "return-shape" in kinds(r := verify(fn)), str(r)


def conv_length(x: Float[np.ndarray, "B L"]) -> Float[np.ndarray, "B (L-3)//2+1"]:
    """torch's Conv1d output length, as its docs write it (padding 0, dilation 1, kernel 3,
    stride 2): a floor of a quotient plus 1."""
    n = math.floor((x.shape[1] + 2 * 0 - 1 * (3 - 1) - 1) / 2 + 1)
    return np.zeros((x.shape[0], n))


def conv_length_declared_half(x: Float[np.ndarray, "B L"]) -> Float[np.ndarray, "B L//2"]:
    return np.zeros((x.shape[0], math.floor((x.shape[1] - 3) / 2 + 1)))  # BUG: not L // 2


def test_a_floor_of_a_quotient_plus_an_int_is_the_quotient_plus_it():
    conv = torch.nn.Conv1d(1, 1, 3, stride=2)
    for n in range(3, 41):
        assert conv(torch.ones(1, 1, n)).shape[-1] == conv_length(np.ones((1, n))).shape[1]
    for n in range(1, 41):
        assert conv_length(np.ones((2, n))).shape == (2, (n - 3) // 2 + 1)
    assert conv_length_declared_half(np.ones((1, 6))).shape[1] == 2 != 6 // 2
    assert verify(conv_length).ok, str(verify(conv_length))
    r = verify(conv_length_declared_half)  # (L - 1) // 2 is L // 2 only at odd L
    assert not r.ok and "requires L - 1 divisible by 2" in str(r), str(r)
