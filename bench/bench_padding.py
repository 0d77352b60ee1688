"""Padded batches (``tensig.pad``, ``Padded.last``, ``Padded.mean``) against hand-written torch.

Three measurements, each against the torch code a user writes by hand, in the same run:

- ``pad`` of 10,000 token sequences (lengths 1..256, int64) against ``pad_sequence`` plus the
  lengths and the mask built from them (what ``Padded`` also holds);
- ``last()`` on a right-padded ``[64, 512, 768]`` float32 batch against ``gather`` at
  ``lengths - 1``;
- ``mean()`` on the same batch against the masked sum ``(x * m).sum(1) / m.sum(1)``.

The target (issue 17) is within 1.2x of the hand-written code.  Run:
``.venv/bin/python bench/bench_padding.py`` (a few seconds).  Prints medians of interleaved runs
and ratios (these machines are noisy: compare ratios, not absolute numbers).  Needs torch.
"""

from __future__ import annotations

import numpy as np

import tensig
from timing import interleaved

TARGET = 1.2


def report(name: str, ours: float, theirs: float, anchor: str) -> None:
    ratio = ours / theirs
    verdict = "meets" if ratio <= TARGET else "MISSES"
    print(f"  {name:<10} tensig {ours * 1e3:9.3f} ms   {anchor:<32} {theirs * 1e3:9.3f} ms   "
          f"{ratio:5.2f}x  {verdict} <= {TARGET}x")


def main() -> None:
    try:
        import torch
        from torch.nn.utils.rnn import pad_sequence
    except ImportError:
        print("bench_padding: torch is not installed; nothing to compare against")
        return
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    seqs = [torch.randint(0, 50_000, (int(n),)) for n in rng.integers(1, 257, 10_000)]

    def by_hand() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        data = pad_sequence(seqs, batch_first=True)
        lengths = torch.tensor([len(s) for s in seqs])
        return data, torch.arange(data.shape[1]) < lengths[:, None], lengths

    ours_pad = tensig.pad(seqs)
    hand = by_hand()
    assert torch.equal(ours_pad.data, hand[0]) and torch.equal(ours_pad.mask, hand[1])
    times = interleaved(lambda: tensig.pad(seqs), by_hand, repeat=5)
    print("padded batches, median of interleaved runs (torch, CPU)")
    report("pad", *times, "pad_sequence + lengths + mask")

    B, T, d = 64, 512, 768
    lengths = torch.as_tensor(rng.integers(1, T + 1, B))
    x = torch.randn(B, T, d)
    mask = torch.arange(T) < lengths[:, None]
    batch = tensig.Padded(x, mask, side="right")

    def last_by_hand() -> torch.Tensor:
        return x.gather(1, (lengths - 1).view(B, 1, 1).expand(B, 1, d)).squeeze(1)

    def mean_by_hand() -> torch.Tensor:
        m = mask[:, :, None].to(x.dtype)
        return (x * m).sum(1) / m.sum(1)

    assert torch.equal(batch.last(), last_by_hand())
    torch.testing.assert_close(batch.mean(), mean_by_hand())
    report("last()", *interleaved(batch.last, last_by_hand, repeat=9, number=20), "gather")
    report("mean()", *interleaved(batch.mean, mean_by_hand, repeat=5), "masked sum")


if __name__ == "__main__":
    main()
