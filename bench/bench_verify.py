"""How long symbolic verification takes, against the alternatives measured in the same run.

A transformer block (layer norm, attention with a causal and a padding mask, MLP) is verified
for all batch sizes and sequence lengths at once with ``tensig.verify``, and compared with
running the block once on real data (B=8, T=128) and with ``torch.export`` using dynamic
dimensions (which also reasons symbolically, at a much larger cost).

Run: ``.venv/bin/python bench/bench_verify.py``.
"""

from __future__ import annotations

import math
import time

import torch

from tensig.verify import verify
from timing import median_time

D, HEADS = 256, 8


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1, self.norm2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        self.qkv, self.out = torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)
        self.up, self.down = torch.nn.Linear(D, 4 * D), torch.nn.Linear(4 * D, D)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        qkv = self.qkv(self.norm1(x))
        q, k, v = qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:]
        q = q.view(b, t, HEADS, d // HEADS).transpose(1, 2)
        k = k.view(b, t, HEADS, d // HEADS).transpose(1, 2)
        v = v.view(b, t, HEADS, d // HEADS).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // HEADS)
        causal = torch.tril(torch.ones(t, t)) == 0
        scores = scores.masked_fill(causal, float("-inf")) + pad[:, None, None, :]
        att = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.out(att)
        return x + self.down(torch.relu(self.up(self.norm2(x))))


def main() -> None:
    block = Block().eval()
    sig = f"B, T, {D}; B, T => B, T, {D}"
    report = verify(block.forward, sig)
    print(f"verify: {'ok' if report.ok else report}; largest intermediate "
          f"{report.largest_bytes()} bytes (float32)")
    t_verify = median_time(lambda: verify(block.forward, sig))
    x, pad = torch.randn(8, 128, D), torch.zeros(8, 128)
    with torch.no_grad():
        t_run = median_time(lambda: block(x, pad))
    print(f"  tensig.verify (all B, T)         {t_verify * 1e3:9.2f} ms")
    print(f"  one real forward pass (8x128)    {t_run * 1e3:9.2f} ms   "
          f"verify / run = {t_verify / t_run:.2f}")
    try:
        from torch.export import Dim, export

        dyn = {"x": {0: Dim("B"), 1: Dim("T", min=2)}, "pad": {0: Dim("B"), 1: Dim("T", min=2)}}
        t0 = time.perf_counter()
        export(block, (x, pad), dynamic_shapes=dyn)
        t_export = time.perf_counter() - t0
        print(f"  torch.export, dynamic B and T    {t_export * 1e3:9.2f} ms   "
              f"verify / export = {t_verify / t_export:.3f}")
    except Exception as e:  # torch.export is a moving target; report, do not hide
        print(f"  torch.export failed here: {type(e).__name__}: {str(e)[:200]}")


if __name__ == "__main__":
    main()
