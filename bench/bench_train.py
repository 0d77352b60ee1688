"""Training-step time of the demo models against hand-written PyTorch code, same run.

The demos (the two-moons MLP, the digits CNN and the character-level GPT) and the digits CNN
with batch norm after each convolution are built with
tensig's model layer on the NumPy and torch backends, and written again as plain ``torch.nn``
code with the same architecture, batch, initialisation scheme and optimizer (Adam).  Two
anchors: that code run eagerly, and the same code under ``torch.compile`` (reported, no target
yet; "unavailable" where compilation fails, e.g. without a C++ compiler).  Prints the median
time per training step (the candidates measured in alternating blocks, twelve rounds), the
median over rounds of the ratio to PyTorch eager within a round with its range (targets:
<= 1.5x with NumPy; <= 1.1x with torch for the MLP and CNN, <= 1.0x for the GPT and the CNN
with batch norm), and the time of graph construction + inference + compilation (target: under
one second).

Run: ``.venv/bin/python bench/bench_train.py`` (``--device cuda`` puts the torch backend and
the PyTorch references on a GPU; the targets are for the CPU; ``--rounds N``, ``--only gpt``;
``--jax``: the MLP on the JAX backend against a hand-written ``jax.jit`` step instead).
"""

from __future__ import annotations

import os

# OpenBLAS's threads spin after each call and starve torch's OpenMP threads when the two
# libraries alternate in one process on a 2-core machine (tensig's torch CNN step measured
# 2.3 or 6.2 ms depending on it, run to run).  One BLAS thread costs the NumPy backend little
# on the small models but its second core on the GPT's products (wall clock, torch keeps two
# threads): `--cpu-time --threads 1` compares both libraries on one thread.  Set before NumPy
# loads OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import copy
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from tensig.demos import digits, gpt, moons
from tensig.demos.common import Built
from tensig.model import blocks as B
from tensig.model import graph as G
from tensig.model.train import Trainer, adam

Step = Callable[[], object]


def per_step(*steps: Step, block: int = 20, rounds: int = 12,
             clock: Callable[[], float] = time.perf_counter) -> list[list[float]]:
    """Median time per step of each, per round of alternating blocks of consecutive steps.

    Blocks keep each library's thread pool warm as in real training (interleaving single
    steps makes torch wake its threads every step, which penalises it unfairly); alternating
    the blocks exposes every candidate to the same load drift, so ratios are taken within a
    round and their median is what counts.  The order rotates each round: a fixed order favours
    a fixed position (two identical models run one after the other measured 0.95x, the later
    one faster), so every candidate runs first, second, ... equally often.  ``clock``:
    ``time.process_time`` counts the process's CPU time instead of the wall clock
    (``--cpu-time``: with one thread per library, the work of a step whatever else loads the
    machine).
    """
    rows: list[list[float]] = []
    for r in range(rounds):
        row = [0.0] * len(steps)
        for k in range(len(steps)):
            i = (k + r) % len(steps)
            step = steps[i]
            for _ in range(3):
                step()  # warm up this block
            times = []
            for _ in range(block):
                t0 = clock()
                step()
                times.append(clock() - t0)
            row[i] = statistics.median(times)
        rows.append(row)
    return rows


def tensig_step(demo: Any, lr: float, backend: str, device: str | None = None
                ) -> tuple[Step, float]:
    """One training step of a classifier demo's model (its own ``build``), and the build
    time."""
    trainer, build = demo_trainer(demo, lr, backend, device)
    rows = np.arange(demo.BATCH)
    return (lambda: trainer.step(rows)), build


def demo_trainer(demo: Any, lr: float, backend: str, device: str | None = None
                 ) -> tuple[Trainer, float]:
    """A classifier demo's trainer, and the time it took to build."""
    xs, ys, _, _ = demo.data()
    onehot = np.eye(demo.CLASSES, dtype=np.float32)[ys]
    with G.new_graph(backend, device):
        t0 = time.perf_counter()
        trainer = demo.build(xs, onehot).trainer(xs, onehot, lr)
        return trainer, time.perf_counter() - t0


def tensig_gpt(backend: str, device: str | None = None) -> tuple[Step, float]:
    """One training step of the GPT demo's model, and the build time."""
    cfg, c = gpt.CONFIG, gpt.corpus(gpt.CONFIG.T)
    with G.new_graph(backend, device):
        t0 = time.perf_counter()
        m = gpt.build(c.train_x, c.train_y, len(c.vocab), cfg)
        trainer = Trainer(m.loss, adam(m.params, lr=cfg.lr), {m.x: c.train_x, m.t: c.train_y})
        build = time.perf_counter() - t0
    rows = np.arange(cfg.batch)
    return (lambda: trainer.step(rows)), build


def kaiming(net: torch.nn.Module) -> None:
    for m in net.modules():
        if isinstance(m, torch.nn.Conv2d | torch.nn.Linear):
            torch.nn.init.kaiming_normal_(m.weight)


def torch_step(net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, lr: float,
               device: str, compiled: bool = False) -> Step:
    """One PyTorch training step (Adam, cross-entropy over every position), eager or with
    the model under ``torch.compile``."""
    net, x, y = net.to(device), x.to(device), y.to(device)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    forward = torch.compile(net) if compiled else net

    def step() -> float:
        opt.zero_grad()
        logits = forward(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss.item()

    return step


def torch_moons() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor, float]:
    xs, ys, _, _ = moons.data()
    b = moons.BATCH
    net = torch.nn.Sequential(torch.nn.Linear(2, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32),
                              torch.nn.ReLU(), torch.nn.Linear(32, 2))
    kaiming(net)
    return net, torch.tensor(xs[:b]), torch.tensor(ys[:b]), 0.01


def torch_digits() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor, float]:
    xs, ys, _, _ = digits.data()
    b = digits.BATCH
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(128, 10))
    kaiming(net)
    x = torch.tensor(xs[:b]).permute(0, 3, 1, 2).contiguous()
    return net, x, torch.tensor(ys[:b]), 0.005


# -- the digits CNN with batch norm (issue 15) --------------------------------------------


class BatchNormCNN:
    """The digits CNN with batch norm after each convolution (:func:`tensig.blocks.batch_norm`,
    torch's ``BatchNorm2d``; no convolution bias, the norm's shift replaces it): data,
    batch, classes and anchor as the demos give them to :func:`tensig_step`."""

    BATCH, CLASSES = digits.BATCH, digits.CLASSES
    data = staticmethod(digits.data)

    @staticmethod
    def build(xs: np.ndarray, onehot: np.ndarray) -> Built:
        x = G.leaf("x", xs[:digits.BATCH], batch=1)                    # 32 | 8, 8, 1
        t = G.leaf("t", onehot[:digits.BATCH], batch=1)                # 32 | 10
        k1 = G.param("k1", output=[16], input=[3, 3, 1], init="kaiming")
        k2 = G.param("k2", output=[32], input=[3, 3, 16], init="kaiming")
        wd = G.param("wd", output=[10], init="kaiming")
        bd = G.param("bd")
        window = G.constant(np.zeros((2, 2), np.float32), name="window")
        h = B.batch_norm(G.einsum(digits.CONV, x, k1), name="bn1").relu()   # 32 | 8, 8, 16
        h = G.tropical(digits.POOL, h, window)                         # 32 | 4, 4, 16
        h = B.batch_norm(G.einsum(digits.CONV, h, k2), name="bn2").relu()   # 32 | 4, 4, 32
        h = G.tropical(digits.POOL, h, window)                         # 32 | 2, 2, 32
        logits = G.einsum(digits.DENSE, h, wd) + bd                    # 32 | 10
        params = [p for p in logits.graph.tensors if p.kind == "param"]
        return Built(x, t, params, logits, B.cross_entropy(logits, t))

    @staticmethod
    def torch() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor, float]:
        xs, ys, _, _ = digits.data()
        b = digits.BATCH
        nn = torch.nn
        net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(128, 10))
        kaiming(net)
        x = torch.tensor(xs[:b]).permute(0, 3, 1, 2).contiguous()
        return net, x, torch.tensor(ys[:b]), 0.005


class TorchBlock(torch.nn.Module):
    """The GPT demo's block, as nanoGPT writes it: one fused q/k/v projection,
    ``scaled_dot_product_attention``, a GELU (tanh) MLP, pre-norm residuals."""

    def __init__(self, cfg: gpt.Config):
        super().__init__()
        d, self.h, self.e = cfg.D, cfg.H, cfg.E
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d, bias=False)
        self.o = torch.nn.Linear(d, d, bias=False)
        self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.h, self.e).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


class TorchGPT(torch.nn.Module):
    """The GPT demo's model: token and position embeddings, blocks, a last layer norm,
    logits from the token table (tied)."""

    def __init__(self, cfg: gpt.Config, vocab: int):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, cfg.D)
        self.pos = torch.nn.Embedding(cfg.T, cfg.D)
        self.blocks = torch.nn.Sequential(*[TorchBlock(cfg) for _ in range(cfg.layers)])
        self.ln = torch.nn.LayerNorm(cfg.D)
        for name, p in self.named_parameters():
            if p.dim() == 2:  # the demo's init: N(0, 0.02), residual outputs scaled down
                std = 0.02 / (2 * cfg.layers) ** 0.5 if name.endswith(("o.weight", "down.weight"))\
                    else 0.02
                torch.nn.init.normal_(p, 0.0, std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.tok(x) + self.pos.weight[: x.shape[1]]
        return self.ln(self.blocks(h)) @ self.tok.weight.T


def torch_gpt() -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor, float]:
    cfg, c = gpt.CONFIG, gpt.corpus(gpt.CONFIG.T)
    return (TorchGPT(cfg, len(c.vocab)), torch.tensor(c.train_x[:cfg.batch]),
            torch.tensor(c.train_y[:cfg.batch]), cfg.lr)


# -- JAX: the MLP on the JAX backend against a hand-written jax.jit step (issue 14) ---------


def jax_moons() -> Step:
    """The two-moons MLP written with ``jax.numpy``: one ``jax.jit`` step (the batch gathered,
    forward, ``jax.grad``, Adam with ``torch.optim``'s arithmetic), its loss read each step
    as tensig's trainer reads it."""
    import jax
    import jax.numpy as jnp

    xs, ys, _, _ = moons.data()
    g = np.random.default_rng(0)
    params = []
    for n_in, n_out in ((2, 32), (32, 32), (32, moons.CLASSES)):
        w = g.standard_normal((n_in, n_out)).astype(np.float32) * np.float32(np.sqrt(2 / n_in))
        params += [jnp.asarray(w), jnp.zeros(n_out, jnp.float32)]
    b1, b2, lr, eps = 0.9, 0.999, 0.01, 1e-8

    def loss_of(params: list[Any], x: Any, y: Any) -> Any:
        h = x
        for i in range(0, len(params) - 2, 2):
            h = jax.nn.relu(h @ params[i] + params[i + 1])
        logp = jax.nn.log_softmax(h @ params[-2] + params[-1])
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    @jax.jit
    def step(params: list[Any], m: list[Any], v: list[Any], t: Any, data_x: Any, data_y: Any,
             rows: Any) -> tuple[Any, ...]:
        loss, grads = jax.value_and_grad(loss_of)(params, data_x[rows], data_y[rows])
        t = t + 1
        m = [b1 * mi + (1 - b1) * gi for mi, gi in zip(m, grads, strict=True)]
        v = [b2 * vi + (1 - b2) * gi * gi for vi, gi in zip(v, grads, strict=True)]
        size, c2 = lr / (1 - b1 ** t), 1 / jnp.sqrt(1 - b2 ** t)
        params = [p - size * mi / (jnp.sqrt(vi) * c2 + eps)
                  for p, mi, vi in zip(params, m, v, strict=True)]
        return params, m, v, t, loss

    zeros = [jnp.zeros_like(p) for p in params]
    state: list[Any] = [params, zeros, list(zeros), jnp.zeros((), jnp.float32)]
    data_x, data_y, rows = jnp.asarray(xs), jnp.asarray(ys.astype(np.int32)), \
        np.arange(moons.BATCH)

    def run() -> float:
        *state[:], loss = step(*state, data_x, data_y, rows)
        return float(loss)

    return run


def main_jax(rounds: int, block: int, clock: Callable[[], float]) -> None:
    """The MLP's step on the JAX backend, compiled as one ``jax.jit`` function and step by
    step (the routine's steps one by one, as before issue 14), against :func:`jax_moons`."""
    import jax

    staged, build = tensig_step(moons, 0.01, "jax")
    trainer, _ = demo_trainer(moons, 0.01, "jax")
    trainer.routine.staged = None  # its steps one by one
    rows = np.arange(moons.BATCH)
    anchor = jax_moons()
    measured = per_step(anchor, staged, lambda: trainer.step(rows), rounds=rounds, block=block,
                        clock=clock)
    t_jax = statistics.median(r[0] for r in measured)
    print(f"two-moons MLP: hand-written jax.jit step (JAX {jax.__version__}) "
          f"{t_jax * 1e3:.2f} ms/step (median of {len(measured)} rounds)")
    for col, what in ((1, "jax, one jit"), (2, "jax, stepwise")):
        t = statistics.median(r[col] for r in measured)
        ratios = sorted(r[col] / r[0] for r in measured)
        print(f"  tensig ({what}) {t * 1e3:7.2f} ms/step   ratio {statistics.median(ratios):5.2f}"
              f" (rounds {ratios[0]:.2f}-{ratios[-1]:.2f})   build+infer+compile "
              f"{build * 1e3:6.1f} ms")


def compiled_step(reference: Callable[[], tuple[Any, ...]], device: str
                  ) -> tuple[Step | None, str]:
    """The reference model under ``torch.compile`` (a fresh copy), compiled by its first
    step; None and the reason when compilation is unavailable here."""
    net, x, y, lr = reference()
    try:
        step = torch_step(copy.deepcopy(net), x, y, lr, device, compiled=True)
        t0 = time.perf_counter()
        step()
        return step, f"compiled in {time.perf_counter() - t0:.0f} s"
    except Exception as e:  # a missing compiler, an unsupported platform: report, go on
        return None, f"unavailable ({type(e).__name__}: {str(e).splitlines()[0][:80]})"


def rows_of(device: str) -> list[tuple[str, Callable[..., tuple[Step, float]],
                                       Callable[[], tuple[Any, ...]], float]]:
    """Each bench row: name, tensig's step (by backend), the PyTorch reference, the torch
    backend's target."""
    return [
        ("two-moons MLP", lambda b: tensig_step(moons, 0.01, b, None if b == "numpy" else
                                                device), torch_moons, 1.1),
        ("digits CNN", lambda b: tensig_step(digits, 0.005, b, None if b == "numpy" else
                                             device), torch_digits, 1.1),
        ("digits CNN + batch norm", lambda b: tensig_step(BatchNormCNN, 0.005, b, None
                                                          if b == "numpy" else device),
         BatchNormCNN.torch, 1.0),
        ("char GPT", lambda b: tensig_gpt(b, None if b == "numpy" else device), torch_gpt,
         1.0),
    ]


def main(device: str = "cpu", rounds: int = 12, only: str | None = None,
         compile_anchor: bool = True, block: int = 20, cpu_time: bool = False) -> None:
    """``device``: where the torch backend and the PyTorch references run (``--device cuda``
    on a machine with a GPU; a step reads its loss, so each step waits for the device)."""
    print(f"load average at start: {os.getloadavg()[0]:.2f}; torch threads "
          f"{torch.get_num_threads()}; {'CPU' if cpu_time else 'wall-clock'} time")
    clock = time.process_time if cpu_time else time.perf_counter
    for name, ours, reference, target in rows_of(device):
        if only and only.lower() not in name.lower():
            continue
        np_step, np_build = ours("numpy")
        tt_step, torch_build = ours("torch")
        net, x, y, lr = reference()
        eager = torch_step(net, x, y, lr, device)
        compiled, how = compiled_step(reference, device) if compile_anchor else (None, "off")
        steps = [eager, np_step, tt_step] + ([compiled] if compiled else [])
        measured = per_step(*steps, rounds=rounds, block=block, clock=clock)
        t_torch = statistics.median(r[0] for r in measured)
        print(f"{name}: PyTorch eager on {device} {t_torch * 1e3:.2f} ms/step "
              f"(median of {len(measured)} rounds)")
        for col, backend, build, goal in ((1, "numpy", np_build, 1.5),
                                          (2, "torch", torch_build, target)):
            t = statistics.median(r[col] for r in measured)
            ratios = sorted(r[col] / r[0] for r in measured)
            # the targets compare CPU with CPU; on a GPU the ratios are for information
            aim = f"target <= {goal}" if device == "cpu" else "CPU targets only"
            print(f"  tensig ({backend:5}) {t * 1e3:7.2f} ms/step   ratio "
                  f"{statistics.median(ratios):5.2f} (rounds {ratios[0]:.2f}-{ratios[-1]:.2f}; "
                  f"{aim})   build+infer+compile {build * 1e3:6.1f} ms (target < 1000)")
        if compiled is None:
            print(f"  torch.compile   {how}")
        else:
            t = statistics.median(r[3] for r in measured)
            ratios = sorted(r[3] / r[0] for r in measured)
            print(f"  torch.compile   {t * 1e3:7.2f} ms/step   ratio "
                  f"{statistics.median(ratios):5.2f} (rounds {ratios[0]:.2f}-{ratios[-1]:.2f}; "
                  f"anchor, no target)   {how}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="torch's device (cpu, cuda, ...)")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--only", default=None, help="rows whose name contains this")
    parser.add_argument("--block", type=int, default=20, help="steps per timed block")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch's intra-op threads (both torch candidates; default torch's)")
    parser.add_argument("--no-compile", action="store_true", help="skip the compile anchor")
    parser.add_argument("--jax", action="store_true",
                        help="only the MLP on the JAX backend against a hand-written jax.jit "
                             "step")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time steps by the process's CPU time (with --threads 1: robust "
                             "to a loaded machine)")
    a = parser.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.jax:
        main_jax(a.rounds, a.block, time.process_time if a.cpu_time else time.perf_counter)
    else:
        main(a.device, a.rounds, a.only, not a.no_compile, a.block, a.cpu_time)
