"""Pieces the demos share: the run itself, accuracy, the memory bill."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensig.backends import to_numpy
from tensig.model import graph as G
from tensig.model.train import Trainer, adam


@dataclass
class Built:
    """A demo model: its data leaves, parameters, logits and loss."""

    x: G.Tensor
    t: G.Tensor
    params: list[G.Tensor]
    logits: G.Tensor
    loss: G.Tensor

    def trainer(self, xs: np.ndarray, targets: np.ndarray, lr: float,
                distributed: bool = False) -> Trainer:
        """Adam on the parameters, fed ``xs`` and ``targets`` (one-hot rows, or the GPT's
        class ids)."""
        return Trainer(self.loss, adam(self.params, lr=lr), {self.x: xs, self.t: targets},
                       distributed=distributed)


@dataclass(frozen=True)
class Place:
    """Where this process runs a demo: its rank in a data-parallel run (0 when alone) and its
    device.  Only rank 0 prints, plots and writes files; the others train silently."""

    rank: int
    device: str | None

    @property
    def root(self) -> bool:
        return self.rank == 0

    def say(self, *args: object, **kw: Any) -> None:
        """``print`` on rank 0, nothing elsewhere."""
        if self.root:
            print(*args, **kw)

    def start(self, m: Built, xs: np.ndarray, targets: np.ndarray, lr: float,
              distributed: bool) -> Trainer:
        """``m``'s trainer, after printing the parameter shapes and the bill; then the replicas
        and the build time."""
        if self.root:
            print_bill(m.loss.graph, m.params)
        trainer = m.trainer(xs, targets, lr, distributed)
        if trainer.replicas is not None:
            self.say(f"  data-parallel: {trainer.replicas.world} replicas x {trainer.batch} "
                     f"rows = global batch {trainer.global_batch}")
        self.say(f"  graph + inference + compilation: {trainer.build_seconds * 1e3:.0f} ms")
        return trainer


def place(distributed: bool, device: str | None = None) -> Place:
    """This process's :class:`Place` in a demo run; ``distributed``: one replica of a
    ``torchrun`` run (rank ``RANK``; ``device="cuda"`` becomes ``cuda:LOCAL_RANK``)."""
    if not distributed:
        return Place(0, device)
    if device == "cuda":
        device = f"cuda:{os.environ.get('LOCAL_RANK', '0')}"  # one GPU per process
    return Place(int(os.environ.get("RANK", "0")), device)


def run_demo(data: Callable[[], tuple[np.ndarray, ...]],
             build: Callable[[np.ndarray, np.ndarray], Built], *, classes: int, batch: int,
             lr: float, epochs: int, backend: str, what: str, target: float,
             device: str | None = None, distributed: bool = False) -> float:
    """Build a demo's model in a fresh graph, print the parameter shapes and the bill, train,
    and report held-out accuracy; ``distributed``: one replica of a torchrun run."""
    train_x, train_y, test_x, test_y = data()
    onehot = np.eye(classes, dtype=np.float32)[train_y]
    here = place(distributed, device)
    with G.new_graph(backend, here.device):
        m = build(train_x, onehot)
        trainer = here.start(m, train_x, onehot, lr, distributed)
        t0 = time.perf_counter()
        losses = trainer.fit(epochs)
        seconds = time.perf_counter() - t0
        acc = accuracy(G.Model(m.logits), m.x, test_x, test_y, batch)
        if trainer.replicas is not None:
            trainer.replicas.close()
    here.say(f"  {epochs} epochs in {seconds:.1f} s; loss {losses[0]:.3f} -> "
             f"{losses[-1]:.4f}; {what} accuracy {acc:.1%} (target >= {target:.0%})")
    return acc


def command_line(main: Callable[..., float], argv: list[str] | None = None, *,
                 count: str = "epochs", small: Any = None) -> float:
    """A demo's command line: ``--epochs N`` (``count``: the GPT's ``--steps N``) ``--backend
    numpy|torch|jax --device cuda --distributed`` (under ``python -m torch.distributed.run``),
    and ``--small`` where the demo has a smaller config ``small``."""
    import argparse

    demo = sys.modules[main.__module__]  # the demo's module, also when run as __main__
    ap = argparse.ArgumentParser(prog=demo.__spec__.name if demo.__spec__ else None,
                                 description=(demo.__doc__ or "").split("\n\n")[0])
    ap.add_argument(f"--{count}", type=int, default=None)
    ap.add_argument("--backend", default="numpy", choices=["numpy", "torch", "jax"])
    ap.add_argument("--device", default=None)
    ap.add_argument("--distributed", action="store_true",
                    help="one replica of a torchrun data-parallel run")
    if small is not None:
        ap.add_argument("--small", action="store_true", help="make demo's smaller model")
    a = ap.parse_args(argv)
    kw = {} if getattr(a, count) is None else {count: getattr(a, count)}
    if getattr(a, "small", False):
        kw["cfg"] = small
    return main(backend=a.backend, device=a.device, distributed=a.distributed, **kw)


def accuracy(model: G.Model, x: G.Tensor, xs: np.ndarray, labels: np.ndarray,
             batch: int) -> float:
    """Accuracy over ``xs`` evaluated in batches of the leaf's size (the rest padded)."""
    correct = 0
    n = len(xs)
    for i in range(0, n, batch):
        chunk = xs[i:i + batch]
        pad = batch - len(chunk)
        if pad:
            chunk = np.concatenate([chunk, np.zeros((pad, *chunk.shape[1:]), chunk.dtype)])
        model.set(x, chunk)
        pred = to_numpy(model.run()).argmax(axis=-1)[:batch - pad]  # torch: any device
        correct += int((pred == labels[i:i + batch]).sum())
    return correct / n


def print_bill(graph: G.Graph, params: list[G.Tensor], dtype: str = "float32") -> None:
    """The inferred shape of every parameter and the memory bill, before training."""
    print("  parameters (shapes inferred from use):")
    width = max((len(p.name) for p in params), default=0)  # a column, whatever the scopes
    for p in params:
        print(f"    {p.name:<{width}}  {p.shape!s}")
    bill = graph.memory(dtype)
    total = sum(b for _, _, b in bill)
    biggest = max(bill, key=lambda r: r[2])
    print(f"  memory bill at {dtype}: {len(bill)} buffers, {total / 1024:.1f} KiB in all; "
          f"largest {biggest[0]} {biggest[1]} ({biggest[2] / 1024:.1f} KiB)")
