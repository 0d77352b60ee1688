"""Data-parallel training throughput: two processes against one, and against PyTorch's DDP.

The digits CNN (``tensig.demos.digits``) at a global batch of 64: one process with 64 rows a
step, or two processes (gloo on 127.0.0.1, one thread each) with 32 rows each.  The same
model written as plain ``torch.nn`` code runs under ``torch.nn.parallel.DistributedDataParallel``
in the same setting.  Prints steps per second, the two-process / one-process throughput
ratio for tensig on both backends (target >= 1.6 on a two-core machine with the torch
backend), tensig's two-process step time over DDP's (target <= 1.1x), and the bytes each
step sends (the gradient bytes and the loss).

Each configuration runs in fresh processes, in turn, ``--rounds`` times; medians are quoted.

Run: ``.venv/bin/python bench/bench_distributed.py [--rounds 3] [--steps 60] [--batch 64]``
(``--batch``: the global batch; at 64 a step is a few milliseconds and the all-reduce's fixed
cost dominates for tensig and DDP alike).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

GLOBAL_BATCH = 64
ROOT = Path(__file__).resolve().parents[1]


def worker(kind: str, backend: str, world: int, steps: int, batch: int) -> None:
    """One replica (or the single process): warm up, then time ``steps`` steps."""
    import numpy as np
    import torch

    torch.set_num_threads(1)
    from tensig.demos import digits
    from tensig.model import graph as G

    global GLOBAL_BATCH
    GLOBAL_BATCH = batch
    local = GLOBAL_BATCH // world
    xs, ys, _, _ = digits.data()
    dist = None
    if kind == "tensig":
        digits.BATCH = local
        onehot = np.eye(digits.CLASSES, dtype=np.float32)[ys]
        with G.new_graph(backend):
            trainer = digits.build(xs, onehot).trainer(xs, onehot, 0.005, world > 1)

        def step() -> None:
            trainer.step(trainer.rows_of(trainer.step_count))

        if trainer.replicas is not None:
            dist = trainer.replicas.dist
    else:
        import torch.distributed as dist

        dist.init_process_group("gloo")
        net = torch.nn.Sequential(
            torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(128, 10))
        model = torch.nn.parallel.DistributedDataParallel(net)
        opt = torch.optim.Adam(model.parameters(), lr=0.005)
        x = torch.tensor(xs).permute(0, 3, 1, 2).contiguous()
        y = torch.tensor(ys)
        rank, count = dist.get_rank(), [0]
        n = (len(x) // GLOBAL_BATCH) * GLOBAL_BATCH

        def step() -> None:
            i = (count[0] * GLOBAL_BATCH) % n + rank * local
            count[0] += 1
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x[i:i + local]), y[i:i + local]).backward()
            opt.step()

    for _ in range(5):
        step()
    if dist is not None:
        dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    if dist is not None:
        dist.barrier()
    seconds = time.perf_counter() - t0
    rank = int(os.environ.get("RANK", "0"))
    if rank == 0:
        sent = trainer.replicas.bytes_sent if kind == "tensig" and trainer.replicas else 0
        print(f"RESULT {steps / seconds:.3f} {sent / max(1, steps + 5):.0f}")
    if kind == "tensig" and trainer.replicas is not None:
        trainer.replicas.close()
    elif kind == "ddp":
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(kind: str, backend: str, world: int, steps: int, batch: int) -> tuple[float, float]:
    """Steps per second of a fresh group (rank 0's view) and bytes sent per step."""
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world),
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, __file__, "--worker", kind, backend, str(world), str(steps),
           str(batch)]
    procs = [subprocess.Popen(cmd, env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                              stdout=subprocess.PIPE, text=True) for r in range(world)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    line = next(ln for ln in outs[0].splitlines() if ln.startswith("RESULT"))
    sps, sent = map(float, line.split()[1:])
    return sps, sent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=GLOBAL_BATCH, help="global batch")
    a = ap.parse_args()
    configs = [("tensig", "torch", 1), ("tensig", "torch", 2), ("ddp", "torch", 1),
               ("ddp", "torch", 2), ("tensig", "numpy", 1), ("tensig", "numpy", 2)]
    rates: dict[tuple[str, str, int], list[float]] = {c: [] for c in configs}
    sent: dict[tuple[str, str, int], float] = {}
    for _ in range(a.rounds):
        for c in configs:
            sps, b = run(*c, a.steps, a.batch)
            rates[c].append(sps)
            sent[c] = b
    med = {c: statistics.median(v) for c, v in rates.items()}
    print(f"digits CNN, global batch {a.batch}, one thread per process, "
          f"{a.rounds} rounds of {a.steps} steps (medians):")
    for c in configs:
        print(f"  {c[0]:<7}{c[1]:<6}{c[2]} process{'es' if c[2] > 1 else '  '}: "
              f"{med[c]:7.1f} steps/s")
    for backend in ("torch", "numpy"):
        ratio = med[("tensig", backend, 2)] / med[("tensig", backend, 1)]
        target = " (target >= 1.6)" if backend == "torch" else ""
        print(f"  tensig {backend}: two processes / one: {ratio:.2f}x throughput{target}")
    ddp = med[("ddp", "torch", 2)]
    print(f"  tensig torch two-process step time / DDP's: "
          f"{ddp / med[('tensig', 'torch', 2)]:.2f}x (target <= 1.1x); DDP two / one "
          f"{ddp / med[('ddp', 'torch', 1)]:.2f}x")
    print(f"  bytes sent per step (tensig): {sent[('tensig', 'torch', 2)]:.0f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    else:
        main()
