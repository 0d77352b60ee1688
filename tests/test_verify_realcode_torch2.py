"""verify on a second PyTorch corpus (tests/verify_corpus/probe_torch_2026.py): LLM blocks
(RoPE, GQA, ALiBi, Transformer-XL's shift, MoE routing), sampling, vision backbones (Swin,
MobileNet, U-Net, FPN, ESPCN, MAE), point clouds and NeRF, generative and metric losses, RL
targets and training-loop updates.  Each pair is a correct function and a twin with one
planted bug."""

from __future__ import annotations

import pytest

from tensig.check.verify import verify
from verify_corpus.probe_torch_2026 import CASES


def test_the_corpus_is_large():
    assert len(CASES) >= 40


@pytest.mark.parametrize(("name", "good", "bad", "code"), CASES, ids=[c[0] for c in CASES])
def test_correct_one_verifies_and_the_bug_gives_its_code(name, good, bad, code):
    r = verify(good)
    assert r.ok and not r.findings and not r.notes, f"{name}: {r}"
    rb = verify(bad)
    assert code in [f.code for f in rb] and not rb.notes, f"{name}: {rb}"

