"""The two-moons classifier: an MLP whose parameters get their shapes from their uses."""

from __future__ import annotations

import numpy as np

from tensig.demos.common import Built, command_line, run_demo
from tensig.model import blocks as B
from tensig.model import graph as G

BATCH = 40
CLASSES = 2


def data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """1000 noisy two-moons points: 800 to train on, 200 held out."""
    from sklearn.datasets import make_moons

    xs, ys = make_moons(n_samples=1000, noise=0.1, random_state=seed)
    xs, ys = xs.astype(np.float32), ys.astype(np.int64)
    return xs[:800], ys[:800], xs[800:], ys[800:]


def build(xs: np.ndarray, onehot: np.ndarray) -> Built:
    """The MLP in the current graph, for one batch of ``xs`` and one-hot targets."""
    x = G.leaf("x", xs[:BATCH], batch=1)                               # 40 | 2
    t = G.leaf("t", onehot[:BATCH], batch=1)                           # 40 | 2
    w1, b1 = G.param("w1", output=[32], init="kaiming"), G.param("b1")
    w2, b2 = G.param("w2", output=[32], init="kaiming"), G.param("b2")
    w3, b3 = G.param("w3", output=[2], init="kaiming"), G.param("b3")
    h = (w1 @ x + b1).relu()
    h = (w2 @ h + b2).relu()
    logits = w3 @ h + b3
    return Built(x, t, [w1, b1, w2, b2, w3, b3], logits, B.cross_entropy(logits, t))


def main(epochs: int = 60, backend: str = "numpy", device: str | None = None,
         distributed: bool = False) -> float:
    return run_demo(data, build, classes=CLASSES, batch=BATCH, lr=0.01, epochs=epochs,
                    backend=backend, device=device, distributed=distributed,
                    what="held-out", target=0.98)


if __name__ == "__main__":
    command_line(main)
