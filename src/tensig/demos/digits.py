"""Handwritten digits (scikit-learn's bundled 8x8 set): a small CNN whose convolution and max
pooling are written in the notation."""

from __future__ import annotations

import time

import numpy as np

from tensig import graph as G
from tensig.demos.common import accuracy, cross_entropy, print_bill
from tensig.train import Trainer, adam

BATCH = 32
CONV = "b|h=+kh, w=+kw, c; kh, kw, c -> oc => b|h, w, oc"          # 3x3, padded
POOL = "b|2*oh<+wh, 2*ow<+ww, c; wh, ww => b|oh, ow, c"            # 2x2 max pooling
DENSE = "b|h, w, c; h, w, c -> o => b|o"


def data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[..., None]   # N, 8, 8, 1
    order = np.random.default_rng(seed).permutation(len(images))
    images, labels = images[order], digits.target[order].astype(np.int64)
    return images[:1437], labels[:1437], images[1437:], labels[1437:]


def main(epochs: int = 15, backend: str = "numpy") -> float:
    train_x, train_y, test_x, test_y = data()
    onehot = np.eye(10, dtype=np.float32)[train_y]
    with G.new_graph(backend) as g:
        x = G.leaf("x", train_x[:BATCH], batch=1)                     # 32 | 8, 8, 1
        t = G.leaf("t", onehot[:BATCH], batch=1)                      # 32 | 10
        k1 = G.param("k1", output=[16], input=[3, 3, 1], init="kaiming")
        b1 = G.param("b1", output=[16])                                # per channel
        k2 = G.param("k2", output=[32], input=[3, 3, 16], init="kaiming")
        b2 = G.param("b2", output=[32])
        wd = G.param("wd", output=[10], init="kaiming")
        bd = G.param("bd")
        window = G.constant(np.zeros((2, 2), np.float32), name="window")
        h = (G.einsum(CONV, x, k1) + b1).relu()                        # 32 | 8, 8, 16
        h = G.tropical(POOL, h, window)                                # 32 | 4, 4, 16
        h = (G.einsum(CONV, h, k2) + b2).relu()                        # 32 | 4, 4, 32
        h = G.tropical(POOL, h, window)                                # 32 | 2, 2, 32
        logits = G.einsum(DENSE, h, wd) + bd                           # 32 | 10
        loss = cross_entropy(logits, t, BATCH)
        params = [k1, b1, k2, b2, wd, bd]
        print_bill(g, params)
        trainer = Trainer(loss, adam(params, lr=0.005), {x: train_x, t: onehot})
        print(f"  graph + inference + compilation: {trainer.build_seconds * 1e3:.0f} ms")
        t0 = time.perf_counter()
        losses = trainer.fit(epochs)
        seconds = time.perf_counter() - t0
        acc = accuracy(G.Model(logits), x, logits, test_x, test_y, BATCH)
    print(f"  {epochs} epochs in {seconds:.1f} s; loss {losses[0]:.3f} -> {losses[-1]:.4f}; "
          f"test accuracy {acc:.1%} (target >= 97%)")
    return acc


if __name__ == "__main__":
    main()
