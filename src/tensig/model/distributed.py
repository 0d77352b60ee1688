"""Data-parallel training on ``torch.distributed`` (the README's "Data-parallel training"): one
process per replica, gradients averaged.  PyTorch moves the bytes (``torchrun``, gloo or NCCL).

A step: forward and backward on each replica's rows (the ``r``-th slice of each global batch,
as ``DistributedSampler`` splits); the gradients, in buckets in the order backward finishes
them (:func:`buckets`), one flat buffer per dtype, are all-reduced as soon as a bucket is
complete (overlapping backward) and divided by the world size.  The update then runs on
identical inputs everywhere, so no parameter is sent; the loss rides in the first buffer, so
every replica decides alike about a non-finite one.  NumPy arrays travel as torch views.
"""

from __future__ import annotations

import datetime
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensig.backends import backend_among
from tensig.core.errors import TensigError

__all__ = ["ReplicaError", "Replicas", "buckets", "launched"]

#: ``flat -> views`` (:meth:`tensig.backends.base.Backend.splitter`)
Split = Callable[[Any], list[Any]]

_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class ReplicaError(TensigError, RuntimeError):
    """The replicas disagree (different models), or one of them failed during a step."""


def launched() -> bool:
    """Whether this process was started for a process group (``torchrun`` sets these)."""
    return all(k in os.environ for k in _ENV)


def _dist() -> Any:
    try:
        import torch.distributed as dist
    except ImportError as e:  # pragma: no cover - torch is an extra
        raise ImportError("distributed training needs PyTorch: pip install 'tensig[torch]'"
                          ) from e
    if not dist.is_available():  # pragma: no cover - builds without distributed support
        raise ReplicaError("this PyTorch build has no torch.distributed")
    return dist


class Replicas:
    """This process's rank, the world size, and the collectives a data-parallel trainer needs.

    Joins the default process group, starting it from ``torchrun``'s environment if needed
    (gloo, or NCCL for a CUDA ``device``).  ``timeout`` (seconds) bounds the wait for a silent
    replica.  ``bucket_mb``: a bucket of gradients closes at that size, as DDP's
    ``bucket_cap_mb`` (smaller ones overlap more of backward, each costs an all-reduce).
    """

    def __init__(self, *, device: Any = None, timeout: float = 60.0, bucket_mb: float = 25.0):
        dist = _dist()
        self.owns_group = not dist.is_initialized()
        if self.owns_group:
            if not launched():
                missing = ", ".join(k for k in _ENV if k not in os.environ)
                raise ReplicaError(f"distributed training needs a process group: start the "
                                   f"script with torchrun (python -m torch.distributed.run "
                                   f"--nproc_per_node N ...); missing environment: {missing}")
            backend = "nccl" if str(device or "").startswith("cuda") else "gloo"
            dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout))
        self.dist = dist
        self.rank: int = dist.get_rank()
        self.world: int = dist.get_world_size()
        self.bucket_bytes = max(1, int(bucket_mb * 2**20))
        self.bytes_sent = 0  # per step: the gradient bytes (and the loss), nothing else
        #: each bucket's splitter, made once: the buckets' shapes are the same every step
        self._splitters: dict[tuple[str, tuple[tuple[int, ...], ...]], Split] = {}

    @property
    def is_root(self) -> bool:
        """Rank 0: the replica that writes checkpoints, shows progress and plots."""
        return self.rank == 0

    def check_same(self, described: Sequence[tuple[str, tuple[int, ...], str]]) -> None:
        """Refuse to start unless every replica has the same parameters (name, shape, dtype)."""
        everyone: list[Any] = [None] * self.world
        self.dist.all_gather_object(everyone, list(described))
        root = everyone[0]
        for rank, mine in enumerate(everyone):
            if mine == root:
                continue
            for (n0, s0, d0), (n1, s1, d1) in zip(root, mine, strict=False):
                if (n0, s0, d0) != (n1, s1, d1):
                    raise ReplicaError(
                        f"replica {rank}'s model differs from replica 0's: parameter {n1} has "
                        f"shape {s1} ({d1}) where replica 0's {n0} has shape {s0} ({d0}); every "
                        f"process must build the same model")
            raise ReplicaError(f"replica {rank} has {len(mine)} parameters, replica 0 has "
                               f"{len(root)}; every process must build the same model")

    def start(self, arrays: Sequence[Any], loss: float | None = None) -> _Sent:
        """Start summing ``arrays`` (one bucket; and ``loss``) over the replicas: one flat buffer
        and all-reduce per dtype, not waited for (:meth:`finish`)."""
        groups: dict[Any, list[int]] = {}
        for i, a in enumerate(arrays):
            groups.setdefault(a.dtype, []).append(i)
        buffers, works = [], []
        for n, idxs in enumerate(list(groups.values()) or [[]]):  # the loss alone: no arrays
            flat, wire = _flat([arrays[i] for i in idxs], loss if n == 0 else None)
            buffers.append(([tuple(arrays[i].shape) for i in idxs], idxs, flat, wire))
            self.bytes_sent += wire.numel() * wire.element_size()
            works.append(self.dist.all_reduce(wire, async_op=True))
        return _Sent(len(arrays), buffers, works, loss is not None)

    def finish(self, sent: Sequence[_Sent], step: int) -> tuple[list[Any], float]:
        """Wait for everything ``sent`` (a failed replica: :class:`ReplicaError` naming ``step``);
        the averaged arrays in order (views of the buffers) and the mean loss (NaN: none)."""
        try:
            for work in [w for s in sent for w in s.works]:
                work.wait()
        except RuntimeError as e:
            raise ReplicaError(f"replica {self.rank} of {self.world}: the gradient all-reduce "
                               f"of step {step} failed ({str(e).splitlines()[0]}); another "
                               f"replica has probably stopped") from e
        out: list[Any] = []
        mean_loss = math.nan
        for s in sent:
            mine: list[Any] = [None] * s.count
            for n, (shapes, idxs, flat, wire) in enumerate(s.buffers):
                wire /= self.world
                views = self._splitter(flat, shapes)(flat)  # the loss stays last
                for i, view in zip(idxs, views, strict=True):
                    mine[i] = view
                if n == 0 and s.has_loss:
                    mean_loss = float(flat[-1])
            out += mine
        return out, mean_loss

    def _splitter(self, flat: Any, shapes: Sequence[tuple[int, ...]]) -> Split:
        """``flat -> views`` of arrays of ``shapes`` (the backend's, cached per bucket)."""
        backend = backend_among([flat])
        key = (backend.name, tuple(shapes))
        split = self._splitters.get(key)
        if split is None:
            split = self._splitters[key] = backend.splitter(shapes)
        return split

    def barrier(self) -> None:
        self.dist.barrier()

    def close(self) -> None:
        """Leave the process group if this object started it."""
        if self.owns_group and self.dist.is_initialized():
            self.dist.destroy_process_group()


def buckets(ready: Sequence[int], sizes: Sequence[int], limit: int) -> list[tuple[int, list[int]]]:
    """Gradients grouped into all-reduce buckets, ``(step, gradient indices)`` in start order:
    ``ready[i]`` is the step after which gradient ``i`` is final, ``sizes[i]`` its bytes; a
    bucket closes once it holds ``limit`` bytes (DDP's rule)."""
    out: list[tuple[int, list[int]]] = []
    current: list[int] = []
    held = 0
    for i in sorted(range(len(ready)), key=lambda i: ready[i]):
        current.append(i)
        held += sizes[i]
        if held >= limit:
            out.append((ready[i], current))
            current, held = [], 0
    if current:
        out.append((ready[current[-1]], current))
    return out


@dataclass
class _Sent:
    """What one :meth:`Replicas.start` put on the wire: per dtype the arrays' shapes and
    positions, the flat buffer and its torch view; and the all-reduces."""

    count: int
    buffers: list[tuple[list[tuple[int, ...]], list[int], Any, Any]]
    works: list[Any]
    has_loss: bool


def _flat(arrays: Sequence[Any], loss: float | None) -> tuple[Any, Any]:
    """One contiguous buffer holding ``arrays`` (and the loss after them), and the torch tensor
    that goes over the wire (the buffer itself, or a zero-copy view of NumPy's)."""
    import torch

    extra = [] if loss is None else [loss]
    if arrays and not isinstance(arrays[0], np.ndarray):
        like = arrays[0]
        parts = [a.reshape(-1) for a in arrays]
        if extra:
            parts.append(torch.tensor(extra, dtype=like.dtype, device=like.device))
        flat = torch.cat(parts)
        return flat, flat
    dtype = arrays[0].dtype if arrays else np.float32
    flat = np.concatenate([*(np.ravel(a) for a in arrays), np.asarray(extra, dtype)], dtype=dtype)
    return flat, torch.from_numpy(flat)
