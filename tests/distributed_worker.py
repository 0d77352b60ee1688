"""One replica of a data-parallel run, for tests/test_distributed.py and bench_distributed.

``python distributed_worker.py BACKEND OPTIMIZER STEPS OUT [BATCH] [--single] [--resume CKPT]
[--bucket-bytes N]``
trains a small classifier (fixed data and initial parameters, so every replica and the
one-process reference start identical) and writes the per-step losses and final parameters
to ``OUT`` (``.npz``).  Under ``--single`` it runs alone with the batch it is given.
"""

from __future__ import annotations

import sys

import numpy as np

from tensig.model import checkpoint
from tensig.model import graph as G
from tensig.model.blocks import cross_entropy
from tensig.model.distributed import Replicas
from tensig.model.train import Trainer, adam, sgd

ROWS, FEATURES, HIDDEN, CLASSES = 96, 6, 16, 3


def problem():
    rng = np.random.default_rng(7)
    xs = rng.standard_normal((ROWS, FEATURES)).astype(np.float32)
    labels = (xs[:, 0] + 0.5 * xs[:, 1] > 0).astype(int) + (xs[:, 2] > 1).astype(int)
    onehot = np.eye(CLASSES, dtype=np.float32)[labels]
    w1 = (rng.standard_normal((HIDDEN, FEATURES)) * 0.4).astype(np.float32)
    w2 = (rng.standard_normal((CLASSES, HIDDEN)) * 0.4).astype(np.float32)
    return xs, onehot, w1, w2


def trainer(backend: str, optimizer: str, batch: int, distributed: bool | Replicas) -> Trainer:
    xs, onehot, w1_0, w2_0 = problem()
    with G.new_graph(backend):
        x = G.leaf("x", xs[:batch], batch=1)
        t = G.leaf("t", onehot[:batch], batch=1)
        w1 = G.param("w1", output=[HIDDEN], init=lambda s, r: w1_0.copy())
        b1 = G.param("b1", init=lambda s, r: np.zeros(s, np.float32))
        w2 = G.param("w2", output=[CLASSES], init=lambda s, r: w2_0.copy())
        logits = w2 @ (w1 @ x + b1).relu()
        loss = cross_entropy(logits, t)
        params = [w1, b1, w2]
        opt = (sgd(params, lr=0.1, momentum=0.9) if optimizer == "sgd"
               else adam(params, lr=0.01))
        return Trainer(loss, opt, {x: xs, t: onehot}, seed=3, distributed=distributed)


def main(argv: list[str]) -> None:
    backend, optimizer, steps, out = argv[0], argv[1], int(argv[2]), argv[3]
    batch = int(argv[4]) if len(argv) > 4 and not argv[4].startswith("--") else 8
    single = "--single" in argv
    distributed: bool | Replicas = not single
    if "--bucket-bytes" in argv and not single:  # small buckets: several, overlapping backward
        distributed = Replicas(bucket_mb=int(argv[argv.index("--bucket-bytes") + 1]) / 2**20)
    tr = trainer(backend, optimizer, batch, distributed=distributed)
    if "--resume" in argv:
        checkpoint.load(tr, argv[argv.index("--resume") + 1])
    if "--save-at" in argv:
        at, path = int(argv[argv.index("--save-at") + 1]), argv[argv.index("--save-at") + 2]
    else:
        at, path = -1, ""
    losses = []
    while tr.step_count < steps:
        losses.append(tr.step(tr.rows_of(tr.step_count)))
        if tr.step_count == at:
            checkpoint.save(tr, path)
    store = tr.model.graph.store
    params = {p.name: np.asarray(_host(store.read(p.val))) for p in tr.opt.params}
    if tr.replicas is None or tr.replicas.is_root:
        np.savez(out, losses=np.array(losses), sent=tr.replicas.bytes_sent if tr.replicas
                 else 0, **params)
    if tr.replicas is not None:
        tr.replicas.close()


def _host(a):
    return a.detach().cpu().numpy() if hasattr(a, "detach") else a


if __name__ == "__main__":
    main(sys.argv[1:])
