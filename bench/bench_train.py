"""Training-step time of the demo models against hand-written PyTorch eager code, same run.

Both demos (the two-moons MLP and the digits CNN) are built with tensig's model layer on the
NumPy and torch backends, and written again as plain ``torch.nn`` code with the same
architecture, batch, initialisation scheme and optimizer (Adam).  Prints the median time per
training step (the three measured in alternating blocks) and the ratio to PyTorch (targets: <= 1.5x
with NumPy, <= 1.1x with torch), and
the time of graph construction + inference + compilation (target: under one second).

Run: ``.venv/bin/python bench/bench_train.py``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

from tensig import graph as G
from tensig.demos import digits, moons
from tensig.demos.common import cross_entropy
from tensig.train import Trainer, adam


def per_step(*steps: Callable[[], object], block: int = 20, rounds: int = 4) -> list[float]:
    """Median time per step of each, in alternating blocks of consecutive steps.

    Blocks keep each library's thread pool warm as in real training (interleaving single
    steps makes torch wake its threads every step, which penalises it unfairly); alternating
    the blocks spreads load drift over all of them.
    """
    times: list[list[float]] = [[] for _ in steps]
    for _ in range(rounds):
        for i, step in enumerate(steps):
            for _ in range(3):
                step()  # warm up this block
            for _ in range(block):
                t0 = time.perf_counter()
                step()
                times[i].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def tensig_moons(backend: str) -> tuple[Callable[[], object], float]:
    xs, ys = moons.data()
    onehot = np.eye(2, dtype=np.float32)[ys]
    b = moons.BATCH
    with G.new_graph(backend):
        t0 = time.perf_counter()
        x, t = G.leaf("x", xs[:b], batch=1), G.leaf("t", onehot[:b], batch=1)
        w1, b1 = G.param("w1", output=[32], init="kaiming"), G.param("b1")
        w2, b2 = G.param("w2", output=[32], init="kaiming"), G.param("b2")
        w3, b3 = G.param("w3", output=[2], init="kaiming"), G.param("b3")
        logits = w3 @ (w2 @ (w1 @ x + b1).relu() + b2).relu() + b3
        trainer = Trainer(cross_entropy(logits, t, b), adam([w1, b1, w2, b2, w3, b3], lr=0.01),
                          {x: xs, t: onehot})
        build = time.perf_counter() - t0
    rows = np.arange(b)
    return (lambda: trainer.step(rows)), build


def tensig_digits(backend: str) -> tuple[Callable[[], object], float]:
    xs, ys, _, _ = digits.data()
    onehot = np.eye(10, dtype=np.float32)[ys]
    b = digits.BATCH
    with G.new_graph(backend):
        t0 = time.perf_counter()
        x, t = G.leaf("x", xs[:b], batch=1), G.leaf("t", onehot[:b], batch=1)
        k1, b1 = G.param("k1", output=[16], input=[3, 3, 1], init="kaiming"), \
            G.param("b1", output=[16])
        k2, b2 = G.param("k2", output=[32], input=[3, 3, 16], init="kaiming"), \
            G.param("b2", output=[32])
        wd, bd = G.param("wd", output=[10], init="kaiming"), G.param("bd")
        window = G.constant(np.zeros((2, 2), np.float32))
        h = G.tropical(digits.POOL, (G.einsum(digits.CONV, x, k1) + b1).relu(), window)
        h = G.tropical(digits.POOL, (G.einsum(digits.CONV, h, k2) + b2).relu(), window)
        logits = G.einsum(digits.DENSE, h, wd) + bd
        trainer = Trainer(cross_entropy(logits, t, b), adam([k1, b1, k2, b2, wd, bd], lr=0.005),
                          {x: xs, t: onehot})
        build = time.perf_counter() - t0
    rows = np.arange(b)
    return (lambda: trainer.step(rows)), build


def torch_moons() -> Callable[[], object]:
    xs, ys = moons.data()
    b = moons.BATCH
    net = torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                              torch.nn.ReLU(), torch.nn.Linear(32, 2))
    for m in net:
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.kaiming_normal_(m.weight)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    x, y = torch.tensor(xs[:b]), torch.tensor(ys[:b])

    def step() -> float:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def torch_digits() -> Callable[[], object]:
    xs, ys, _, _ = digits.data()
    b = digits.BATCH
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(128, 10))
    for m in net:
        if isinstance(m, torch.nn.Conv2d | torch.nn.Linear):
            torch.nn.init.kaiming_normal_(m.weight)
    opt = torch.optim.Adam(net.parameters(), lr=0.005)
    x = torch.tensor(xs[:b]).permute(0, 3, 1, 2).contiguous()
    y = torch.tensor(ys[:b])

    def step() -> float:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    return step


def main() -> None:
    for name, ours, theirs in (("two-moons MLP", tensig_moons, torch_moons),
                               ("digits CNN", tensig_digits, torch_digits)):
        (np_step, np_build), (torch_step, torch_build) = ours("numpy"), ours("torch")
        t_torch, t_np, t_tt = per_step(theirs(), np_step, torch_step)
        print(f"{name}: PyTorch eager {t_torch * 1e3:.2f} ms/step")
        for backend, t, build, target in (("numpy", t_np, np_build, 1.5),
                                          ("torch", t_tt, torch_build, 1.1)):
            print(f"  tensig ({backend:5}) {t * 1e3:7.2f} ms/step   ratio {t / t_torch:5.2f} "
                  f"(target <= {target})   build+infer+compile {build * 1e3:6.1f} ms "
                  f"(target < 1000)")


if __name__ == "__main__":
    main()
