"""Pieces the demos share: the run itself, a softmax cross-entropy, accuracy, the memory
bill."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tensig import graph as G
from tensig.train import Trainer, adam


@dataclass
class Built:
    """A demo model: its data leaves, parameters, logits and loss."""

    x: G.Tensor
    t: G.Tensor
    params: list[G.Tensor]
    logits: G.Tensor
    loss: G.Tensor

    def trainer(self, xs: np.ndarray, onehot: np.ndarray, lr: float) -> Trainer:
        return Trainer(self.loss, adam(self.params, lr=lr), {self.x: xs, self.t: onehot})


def run_demo(data: Callable[[], tuple[np.ndarray, ...]],
             build: Callable[[np.ndarray, np.ndarray], Built], *, classes: int, batch: int,
             lr: float, epochs: int, backend: str, what: str, target: float,
             device: str | None = None) -> float:
    """Build a demo's model in a fresh graph on its training data, print the parameter
    shapes and the bill, train, and report held-out accuracy (``device``: torch's, e.g.
    ``"cuda"``)."""
    train_x, train_y, test_x, test_y = data()
    onehot = np.eye(classes, dtype=np.float32)[train_y]
    with G.new_graph(backend, device) as g:
        m = build(train_x, onehot)
        print_bill(g, m.params)
        trainer = m.trainer(train_x, onehot, lr)
        print(f"  graph + inference + compilation: {trainer.build_seconds * 1e3:.0f} ms")
        t0 = time.perf_counter()
        losses = trainer.fit(epochs)
        seconds = time.perf_counter() - t0
        acc = accuracy(G.Model(m.logits), m.x, m.logits, test_x, test_y, batch)
    print(f"  {epochs} epochs in {seconds:.1f} s; loss {losses[0]:.3f} -> {losses[-1]:.4f}; "
          f"{what} accuracy {acc:.1%} (target >= {target:.0%})")
    return acc


def cross_entropy(logits: G.Tensor, onehot: G.Tensor, batch: int) -> G.Tensor:
    """Mean softmax cross-entropy over a ``b|o`` batch, with the max subtracted (detached)."""
    top = G.stop_gradient(G.einmax1("b|o => b|0", logits))
    z = logits - top
    lse = G.einsum1("b|o => b|0", z.exp()).log()
    logp = z - lse
    return G.einsum1("...|...->... => |->0", onehot * logp) * (-1.0 / batch)


def accuracy(model: G.Model, x: G.Tensor, logits: G.Tensor, xs: np.ndarray,
             labels: np.ndarray, batch: int) -> float:
    """Accuracy over ``xs`` evaluated in batches of the leaf's size (the rest padded)."""
    correct = 0
    n = len(xs)
    for i in range(0, n, batch):
        chunk = xs[i:i + batch]
        pad = batch - len(chunk)
        if pad:
            chunk = np.concatenate([chunk, np.zeros((pad, *chunk.shape[1:]), chunk.dtype)])
        model.set(x, chunk)
        out = model.run()
        out = out.cpu().numpy() if hasattr(out, "cpu") else np.asarray(out)  # torch, any device
        pred = out.argmax(axis=-1)[:batch - pad]
        correct += int((pred == labels[i:i + batch]).sum())
    return correct / n


def print_bill(graph: G.Graph, params: list[G.Tensor], dtype: str = "float32") -> None:
    """The inferred shape of every parameter and the memory bill, before training."""
    print("  parameters (shapes inferred from use):")
    for p in params:
        print(f"    {p.name:<10} {p.shape!s:<16}")
    bill = graph.memory(dtype)
    total = sum(b for _, _, b in bill)
    biggest = max(bill, key=lambda r: r[2])
    print(f"  memory bill at {dtype}: {len(bill)} buffers, {total / 1024:.1f} KiB in all; "
          f"largest {biggest[0]} {biggest[1]} ({biggest[2] / 1024:.1f} KiB)")
