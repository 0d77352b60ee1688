"""Data-parallel training throughput: two processes against one, and against PyTorch's DDP.

The digits CNN (``tensig.demos.digits``) at a global batch of 512 (``--batch``): one process
with all the rows a step, or two processes (gloo on 127.0.0.1, one thread each) with half each.
The same model written as plain ``torch.nn`` code runs under
``torch.nn.parallel.DistributedDataParallel`` in the same setting.  Prints steps per second,
the two-process / one-process throughput ratio for tensig on both backends (target >= 1.6 on a
two-core machine with the torch backend), tensig's two-process step time over DDP's (target
<= 1.1x), and the bytes each step sends (the gradient bytes and the loss).

Two processes can only be as fast as the machine lets two processes run, and on a shared
machine other work takes cores too.  So the same run also measures the ceiling: two processes
in one group that never all-reduce (``solo``: each trains alone on half the batch; only the
start and the end are synchronised) -- what compute alone scales to here, now.  A row with
4 KB buckets (``buckets``) measures whether overlapping the all-reduce with backward pays.
Each row also gives the CPU time per step (the process's, all threads, the busier rank), the
time a step waits in the all-reduce (tensig), the voluntary context switches per step, and the load
average while it ran; rows are medians over ``--rounds`` rounds, each configuration in fresh
processes, in turn.

Run: ``.venv/bin/python bench/bench_distributed.py [--rounds 3] [--steps 40] [--batch 512]``
(at a small global batch, e.g. 64, a step is a few milliseconds and the all-reduce's fixed
cost dominates for tensig and DDP alike).
"""

from __future__ import annotations

import argparse
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = [("tensig", "torch", 1), ("tensig", "torch", 2), ("buckets", "torch", 2),
           ("solo", "torch", 2),
           ("ddp", "torch", 1), ("ddp", "torch", 2),
           ("tensig", "numpy", 1), ("tensig", "numpy", 2), ("solo", "numpy", 2)]


def tensig_step(backend: str, local: int, distributed: Any) -> tuple[Any, Any, list[float]]:
    """A digits trainer's step function, its replicas, and the seconds it waited on them."""
    import numpy as np

    from tensig.demos import digits
    from tensig.model import graph as G

    xs, ys, _, _ = digits.data()
    digits.BATCH = local
    onehot = np.eye(digits.CLASSES, dtype=np.float32)[ys]
    with G.new_graph(backend):
        trainer = digits.build(xs, onehot).trainer(xs, onehot, 0.005, distributed)
    waited = [0.0]
    replicas = trainer.replicas
    if replicas is not None:
        finish = replicas.finish

        def timed(*args: Any) -> Any:
            t = time.perf_counter()
            try:
                return finish(*args)
            finally:
                waited[0] += time.perf_counter() - t

        replicas.finish = timed  # type: ignore[method-assign]

    def step() -> None:
        trainer.step(trainer.rows_of(trainer.step_count))

    return step, replicas, waited


def ddp_step(global_batch: int, local: int) -> Any:
    """The same CNN as hand-written torch under DistributedDataParallel, Adam, same batch."""
    import warnings

    import torch
    import torch.distributed as dist

    from tensig.demos import digits

    # DDP notes that conv weight gradients come back in another memory layout than its bucket
    warnings.filterwarnings("ignore", message="Grad strides do not match")
    xs, ys, _, _ = digits.data()
    net = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(128, 10))
    model = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.Adam(model.parameters(), lr=0.005)
    x = torch.tensor(xs).permute(0, 3, 1, 2).contiguous()
    y = torch.tensor(ys)
    rank, count = dist.get_rank(), [0]
    n = (len(x) // global_batch) * global_batch

    def step() -> None:
        i = (count[0] * global_batch) % n + rank * local
        count[0] += 1
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x[i:i + local]), y[i:i + local]).backward()
        opt.step()

    return step


def worker(kind: str, backend: str, world: int, steps: int, batch: int) -> None:
    """One replica (or the single process): warm up, then time ``steps`` steps; prints
    steps/s, CPU ms a step, all-reduce wait ms a step, context switches a step, bytes a
    step."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    local = batch // world
    waited, replicas = [0.0], None
    if kind in ("tensig", "buckets"):
        distributed: Any = world > 1
        if kind == "buckets":  # 4 KB buckets: three, the first two overlapping backward
            from tensig.model.distributed import Replicas

            distributed = Replicas(bucket_mb=4 / 1024)
        step, replicas, waited = tensig_step(backend, local, distributed)
        group = replicas.dist if replicas is not None else None
    else:  # ddp, or solo: a group only to start and stop together
        dist.init_process_group("gloo")
        group = dist
        step = ddp_step(batch, local) if kind == "ddp" else tensig_step(backend, local,
                                                                          False)[0]
    for _ in range(5):
        step()
    if group is not None:
        group.barrier()
    waited[0] = 0.0
    sent0 = replicas.bytes_sent if replicas is not None else 0
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    if group is not None:
        group.barrier()
    sent = (replicas.bytes_sent - sent0) if replicas is not None else 0
    print(f"RESULT {steps / seconds:.3f} {cpu / steps * 1e3:.3f} {waited[0] / steps * 1e3:.3f} "
          f"{(r1.ru_nvcsw - r0.ru_nvcsw) / steps:.1f} {sent / steps:.0f}", flush=True)
    if replicas is not None:
        replicas.close()
    elif group is not None:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(kind: str, backend: str, world: int, steps: int, batch: int) -> dict[str, float]:
    """One fresh group: rank 0's steps/s (the mean over ranks for ``solo``), the busier
    rank's CPU ms and wait ms a step, context switches a step, bytes a step, load average."""
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world),
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, __file__, "--worker", kind, backend, str(world), str(steps),
           str(batch)]
    procs = [subprocess.Popen(cmd, env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                              stdout=subprocess.PIPE, text=True) for r in range(world)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    rows = [list(map(float, next(ln for ln in out.splitlines()
                                 if ln.startswith("RESULT")).split()[1:])) for out in outs]
    rate = statistics.mean(r[0] for r in rows) if kind == "solo" else rows[0][0]
    return {"rate": rate, "cpu": max(r[1] for r in rows), "wait": max(r[2] for r in rows),
            "switches": max(r[3] for r in rows), "sent": rows[0][4], "load": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=512, help="global batch")
    a = ap.parse_args()
    got: dict[tuple[str, str, int], list[dict[str, float]]] = {c: [] for c in CONFIGS}
    for _ in range(a.rounds):
        for c in CONFIGS:
            got[c].append(run(*c, a.steps, a.batch))
    med = {c: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for c, rs in got.items()}
    loads = [r["load"] for rs in got.values() for r in rs]
    print(f"digits CNN, global batch {a.batch}, one thread per process, {a.rounds} rounds of "
          f"{a.steps} steps (medians); 1-minute load average {min(loads):.1f}-{max(loads):.1f}")
    print(f"  {'':<24}{'steps/s':>8}{'CPU ms/step':>13}{'wait ms':>9}{'switches':>10}")
    for c in CONFIGS:
        m = med[c]
        name = f"{c[0]} {c[1]} {c[2]} process{'es' if c[2] > 1 else ''}"
        wait = f"{m['wait']:9.2f}" if c[0] in ("tensig", "buckets") and c[2] > 1 else f"{'':9}"
        print(f"  {name:<24}{m['rate']:8.1f}{m['cpu']:13.2f}{wait}{m['switches']:10.1f}")
    for backend in ("torch", "numpy"):
        one = med[("tensig", backend, 1)]
        two, solo = med[("tensig", backend, 2)], med[("solo", backend, 2)]
        target = " (target >= 1.6)" if backend == "torch" else ""
        print(f"  tensig {backend}: two processes / one: {two['rate'] / one['rate']:.2f}x "
              f"throughput{target}; without the all-reduce (the machine's ceiling now): "
              f"{solo['rate'] / one['rate']:.2f}x; by CPU time a step: "
              f"{one['cpu'] / two['cpu']:.2f}x")
    overlap = med[("buckets", "torch", 2)]["rate"] / med[("tensig", "torch", 2)]["rate"]
    print(f"  tensig torch two processes, 4 KB buckets (3 all-reduces, 2 overlapping backward) "
          f"/ one bucket: {overlap:.2f}x throughput")
    ddp = med[("ddp", "torch", 2)]
    print(f"  tensig torch two-process step time / DDP's: "
          f"{ddp['rate'] / med[('tensig', 'torch', 2)]['rate']:.2f}x (target <= 1.1x); DDP two "
          f"/ one {ddp['rate'] / med[('ddp', 'torch', 1)]['rate']:.2f}x")
    print(f"  bytes sent per step (tensig): {med[('tensig', 'torch', 2)]['sent']:.0f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    else:
        main()
