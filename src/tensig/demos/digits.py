"""Handwritten digits (scikit-learn's bundled 8x8 set): a small CNN whose convolution and max
pooling are written in the notation."""

from __future__ import annotations

import numpy as np

from tensig.demos.common import Built, command_line, run_demo
from tensig.model import blocks as B
from tensig.model import graph as G

BATCH = 32
CLASSES = 10
CONV = "b|h=+kh, w=+kw, c; kh, kw, c -> oc => b|h, w, oc"          # 3x3, padded
POOL = "b|2*oh<+wh, 2*ow<+ww, c; wh, ww => b|oh, ow, c"            # 2x2 max pooling
DENSE = "b|h, w, c; h, w, c -> o => b|o"


def data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """1797 images scaled to [0, 1] (N, 8, 8, 1): 1437 to train on, 360 to test."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[..., None]
    order = np.random.default_rng(seed).permutation(len(images))
    images, labels = images[order], digits.target[order].astype(np.int64)
    return images[:1437], labels[:1437], images[1437:], labels[1437:]


def build(xs: np.ndarray, onehot: np.ndarray) -> Built:
    """The CNN in the current graph, for one batch of ``xs`` and one-hot targets."""
    x = G.leaf("x", xs[:BATCH], batch=1)                               # 32 | 8, 8, 1
    t = G.leaf("t", onehot[:BATCH], batch=1)                           # 32 | 10
    k1 = G.param("k1", output=[16], input=[3, 3, 1], init="kaiming")
    b1 = G.param("b1", output=[16])                                    # per channel
    k2 = G.param("k2", output=[32], input=[3, 3, 16], init="kaiming")
    b2 = G.param("b2", output=[32])
    wd = G.param("wd", output=[10], init="kaiming")
    bd = G.param("bd")
    window = G.constant(np.zeros((2, 2), np.float32), name="window")
    h = (G.einsum(CONV, x, k1) + b1).relu()                            # 32 | 8, 8, 16
    h = G.tropical(POOL, h, window)                                    # 32 | 4, 4, 16
    h = (G.einsum(CONV, h, k2) + b2).relu()                            # 32 | 4, 4, 32
    h = G.tropical(POOL, h, window)                                    # 32 | 2, 2, 32
    logits = G.einsum(DENSE, h, wd) + bd                               # 32 | 10
    return Built(x, t, [k1, b1, k2, b2, wd, bd], logits, B.cross_entropy(logits, t))


def main(epochs: int = 15, backend: str = "numpy", device: str | None = None,
         distributed: bool = False) -> float:
    return run_demo(data, build, classes=CLASSES, batch=BATCH, lr=0.005, epochs=epochs,
                    backend=backend, device=device, distributed=distributed,
                    what="test", target=0.97)


if __name__ == "__main__":
    command_line(main)
