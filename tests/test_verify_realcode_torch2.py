"""verify on a second PyTorch corpus (tests/verify_corpus/probe_torch_2026.py): LLM blocks
(RoPE, GQA, ALiBi, Transformer-XL's shift, MoE routing), sampling, vision backbones (Swin,
MobileNet, U-Net, FPN, ESPCN, MAE), point clouds and NeRF, generative and metric losses, RL
targets and training-loop updates.  Each pair is a correct function and a twin with one
planted bug."""

from __future__ import annotations

import pytest

from arrays import pair_holds, real_tensors
from tensig.check.verify import verify
from verify_corpus.probe_torch_2026 import ASSUMES, CASES, SQUARES, STOPS


def test_the_corpus_is_large():
    assert len(CASES) >= 40


@pytest.mark.parametrize(("name", "good", "bad", "code"), CASES, ids=[c[0] for c in CASES])
def test_correct_one_verifies_and_the_bug_gives_its_code(name, good, bad, code):
    pair_holds(name, good, bad, code, ASSUMES, STOPS)



def _run(fn, sizes: dict[str, int]):
    """The oracle for the corpus itself: torch runs the correct code on real tensors at
    distinct concrete sizes (:func:`arrays.real_tensors`); the
    shapes it returns and the signature's at those sizes."""
    import inspect

    f = fn() if inspect.isclass(fn) else fn
    sig = verify(fn).signature
    args = real_tensors(sig, sizes)
    rest = list(inspect.signature(getattr(f, "forward", f)).parameters.values())[len(args):]
    sized = {p.name: sizes[p.name] for p in rest if p.default is inspect.Parameter.empty}
    out = f(*args, **sized)
    got = [tuple(o.shape) for o in (out if isinstance(out, tuple) else (out,))]
    return got, [tuple(d.evaluate(sizes) for d in r) for r in sig.results]


@pytest.mark.parametrize(("name", "good", "bad", "code"), CASES, ids=[c[0] for c in CASES])
def test_correct_one_runs_and_returns_its_declared_shape(name, good, bad, code):
    names = "ABCDEFGHIKLMNPQRSTVWZ"
    got, declared = _run(good, {n: 8 + 4 * i for i, n in enumerate(names)})
    assert got == declared, name


@pytest.mark.parametrize(("name", "good", "bad", "code"), SQUARES, ids=[c[0] for c in SQUARES])
def test_a_grid_side_from_a_square_root_verifies_under_that_assumption(name, good, bad, code):
    """``int(math.sqrt(n))`` of a token count: verified with the count a new size's square
    (stated assumptions), the traced result torch's at such a count; the bug still fails."""
    import torch

    r = verify(good)
    assert {f.kind for f in r} == {"assumption"} and "is a square" in str(r) and not r.notes
    assert "read as N_root" in str(r), str(r)  # the side's number, a stated reading
    assert code in [f.code for f in verify(bad)], name
    sizes = {"B": 2, "C": 12, "D": 12, "N_root": 7}
    shape = [d.evaluate(sizes) for d in r.signature.args[0]]
    assert shape[1] in (49, 50)  # the count is a square, 7 * 7 (and a class token)
    got = good(torch.rand(shape, generator=torch.Generator().manual_seed(0))).shape
    assert tuple(got) == tuple(d.evaluate(sizes) for d in r.result[0]), name
