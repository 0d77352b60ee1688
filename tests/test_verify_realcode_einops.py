"""verify on einops-heavy PyTorch code (tests/verify_corpus/probe_einops_2026.py): each correct
function or module verifies with no finding or note, and runs on real tensors at two concrete
sizes returning its declared shape (the oracle: a clean verification of code that fails or
returns another shape would be a false proof); each planted bug reports its code."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import Tensor

from arrays import clean, real_tensors
from tensig import Float
from tensig.check.verify import Signature, verify
from verify_corpus.probe_einops_2026 import CASES, Case


def _assignments(case: Case, sig: Signature) -> tuple[dict[str, int], ...]:
    """The case's own sizes, or two sets of small distinct ones (no two symbols equal)."""
    if case.sizes:
        return case.sizes
    return ({s: n for s, n in zip(sig.symbols, (2, 3, 5, 7, 4, 6), strict=False)},
            {s: n for s, n in zip(sig.symbols, (3, 5, 2, 4, 7, 1), strict=False)})


def _run_concretely(case: Case, sig: Signature) -> None:
    for at in _assignments(case, sig):
        assert set(sig.symbols) <= set(at), (case.name, sig.symbols, at)
        with torch.no_grad():
            out = case.good(*real_tensors(sig, at))
        outs = out if isinstance(out, tuple) else (out,)
        assert sig.results is not None and len(outs) == len(sig.results), case.name
        for o, dims in zip(outs, sig.results, strict=True):
            assert list(o.shape) == [d.evaluate(at) for d in dims], (case.name, at, o.shape)


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 35
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_correct_one_verifies_and_runs_at_its_declared_shape(case: Case):
    r = verify(case.good)
    assert clean(r), f"{case.name}: {r}"
    _run_concretely(case, r.signature)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_planted_bug_reports_its_code(case: Case):
    r = verify(case.bad)
    assert case.code in [f.code for f in r.findings] and not r.notes, f"{case.name}: {r}"


# -- einops infers an axis by dividing by the sizes it knows -----------------------------------


def test_an_exact_quotient_of_sizes_is_a_size():
    """einops infers ``w`` of ``(h w)`` given ``h`` as ``length // h``: ``H*W // H`` divides
    exactly as polynomials and is ``W`` (it stopped the trace as a division by a size)."""
    from einops import rearrange

    r = verify(lambda t, f: rearrange(t, "b (h w) c -> b c h w", h=f.shape[2]),
               "B, H*W, C; B, C, H, W => B, C, H, W")
    assert clean(r), str(r)
    r = verify(lambda t, f: rearrange(t, "b (h w) c -> b c h w", h=f.shape[3]),
               "B, H*W, C; B, C, H, W => B, C, H, W")  # the width given as the height
    assert [f.code for f in r.findings] == ["TS103"] and "[B, C, W, H]" in str(r), str(r)
    r = verify(lambda x: x.shape[0] * (x.shape[1] + 1) // (x.shape[1] + 1) * x[0], "N, D => D")
    assert r.ok and not r.notes, str(r)
    r = verify(lambda x: (x.shape[0] + 1) // x.shape[1] * x[0], "N, D => D")
    assert clean(r), str(r)  # no polynomial: a size of its own (a number times the row)


def _rows_after_the_first(x: np.ndarray) -> np.ndarray:
    a = x[1:]
    if a.size % a.shape[0]:
        raise ValueError("ragged")
    return a.reshape(a.shape[0], a.size // a.shape[0])


def _first_half(x: np.ndarray) -> np.ndarray:
    a = x[: x.shape[0] // 2]
    return a.reshape(a.shape[0], a.size // a.shape[0])


def test_an_exact_divisor_that_can_be_0_is_assumed_not_to_be():
    """``(H - 1)*W // (H - 1)`` is ``W`` only where ``H - 1`` is not 0: at ``H = 1`` Python
    raises ZeroDivisionError, so the quotient holds under an assumption (it was proved for all
    sizes); ``%`` by an exact divisor is 0 under the same one, where it stopped the trace."""
    for fn, d in ((_rows_after_the_first, "H - 1"), (_first_half, "H // 2")):
        r = verify(fn, f"H, W => {d}, W")
        assert r.complete and not r.notes and {f.code for f in r.findings} == {"TS301"}, str(r)
        assert f"assumes {d} >= 1: a division by {d}, which raises ZeroDivisionError" in str(r)
        with pytest.raises(ZeroDivisionError):
            fn(np.zeros((1, 3)))
        assert fn(np.zeros((5, 3))).shape == ((4, 3) if d == "H - 1" else (2, 3))
    r = verify(lambda x: x if x.size % x.shape[1] == 0 else x[0], "N, D => N, D")
    assert r.complete and not r.findings and not r.notes, str(r)  # D >= 1: nothing to assume


def test_an_einsum_mismatch_shows_the_subscripts_and_shapes():
    """EinMix calls torch.einsum with letters of its own ('b' for the user's 'c'): the index
    alone named an axis the user never wrote."""
    from einops.layers.torch import EinMix

    mix = EinMix("b t c -> b t c_out", weight_shape="c c_out", c=8, c_out=32)
    r = verify(mix, "B, T, 16 => B, T, 32")
    assert [f.code for f in r.findings] == ["TS102"], str(r)
    assert "('adb,bc->adc' of [B, T, 16], [8, 32])" in r.findings[0].message, str(r)


def test_a_pattern_einops_rejects_is_an_op_shape_error():
    """einops checks the rank and the axes declared as numbers, which hold at every size: its
    EinopsError was a note (verification stopped), not a finding at the line."""
    from einops import rearrange

    def wrong_rank(x: Float[Tensor, "B C H W"]) -> Float[Tensor, "B C H W"]:
        return rearrange(x, "b n d -> b d n")  # a sequence pattern on a feature map

    def wrong_axis(x: Float[Tensor, "B 3 H W"]) -> Float[Tensor, "B H W 3"]:
        return rearrange(x, "b 1 h w -> b h w 1")  # the channel axis is 3, not 1

    for fn, says in ((wrong_rank, "expected 3 dims"), (wrong_axis, "3 != 1")):
        r = verify(fn)
        assert [f.code for f in r.findings] == ["TS108"], str(r)
        assert says in str(r) and any(s in str(r) for s in ("[B, C, H, W]", "[B, 3, H, W]")), r
        assert "SymSize" not in str(r) and r.findings[0].line == fn.__code__.co_firstlineno + 1
        assert r.notes == [f"verification stopped at {__file__}:{r.findings[0].line}: einops "
                           "rejected the operands (reported above)"], str(r)


def test_a_trace_limit_inside_unpack_is_a_note_not_an_error(monkeypatch: pytest.MonkeyPatch):
    """einops' unpack wraps any error of its reshapes in an EinopsError: where the trace's own
    reshape stops (Unsupported), that is a limit of the trace, not operands einops rejects."""
    from einops import pack, unpack

    from tensig.check import trace_einops
    from tensig.check.tracing import Unsupported

    trace_einops.register()
    backend, in_unpack = trace_einops._REGISTERED[0], []
    reshape = backend.reshape

    def limited(*args: object) -> object:
        if in_unpack:
            raise Unsupported("a reshape the trace cannot model")
        return reshape(*args)

    def with_registers(x: Float[Tensor, "B N D"], r: Float[Tensor, "B 4 D"]
                       ) -> Float[Tensor, "B N D"]:
        y, ps = pack([x, r], "b * d")
        in_unpack.append(True)
        out, _ = unpack(y, ps, "b * d")
        return out

    monkeypatch.setattr(backend, "reshape", staticmethod(limited))
    r = verify(with_registers)
    assert not r.findings and len(r.notes) == 1 and "EinopsError" in r.notes[0], str(r)
