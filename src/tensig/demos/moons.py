"""The two-moons classifier: an MLP whose parameters get their shapes from their uses."""

from __future__ import annotations

import time

import numpy as np

from tensig import graph as G
from tensig.demos.common import accuracy, cross_entropy, print_bill
from tensig.train import Trainer, adam

BATCH = 40


def data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_moons

    xs, ys = make_moons(n_samples=1000, noise=0.1, random_state=seed)
    return xs.astype(np.float32), ys.astype(np.int64)


def main(epochs: int = 60, backend: str = "numpy") -> float:
    xs, ys = data()
    train_x, train_y, test_x, test_y = xs[:800], ys[:800], xs[800:], ys[800:]
    onehot = np.eye(2, dtype=np.float32)[train_y]
    with G.new_graph(backend) as g:
        x = G.leaf("x", train_x[:BATCH], batch=1)          # 40 | 2
        t = G.leaf("t", onehot[:BATCH], batch=1)           # 40 | 2
        w1, b1 = G.param("w1", output=[32], init="kaiming"), G.param("b1")
        w2, b2 = G.param("w2", output=[32], init="kaiming"), G.param("b2")
        w3, b3 = G.param("w3", output=[2], init="kaiming"), G.param("b3")
        h = (w1 @ x + b1).relu()
        h = (w2 @ h + b2).relu()
        logits = w3 @ h + b3
        loss = cross_entropy(logits, t, BATCH)
        params = [w1, b1, w2, b2, w3, b3]
        print_bill(g, params)
        trainer = Trainer(loss, adam(params, lr=0.01), {x: train_x, t: onehot})
        print(f"  graph + inference + compilation: {trainer.build_seconds * 1e3:.0f} ms")
        t0 = time.perf_counter()
        losses = trainer.fit(epochs)
        seconds = time.perf_counter() - t0
        evaluate = G.Model(logits)
        acc = accuracy(evaluate, x, logits, test_x, test_y, BATCH)
    print(f"  {epochs} epochs in {seconds:.1f} s; loss {losses[0]:.3f} -> {losses[-1]:.4f}; "
          f"held-out accuracy {acc:.1%} (target >= 98%)")
    return acc


if __name__ == "__main__":
    main()
