"""Rank-polymorphism benchmarks: lifting against the hand-written expression, in one run.

- a vectorisable scalar function (``np.add``, scalar cells) lifted over a 1000x1000 frame,
  against ``a + b``; and with prefix replication (frames (1000,) and (1000, 1000)) against
  ``a[:, None] + b``.  Target: lifting within 1.5x of the hand-written NumPy expression.
- a ``vectorized=True`` function of vector cells (row dot products over a 1000-frame of
  1000-vectors) against ``np.einsum``;
- for information: a non-vectorised Python function of scalars through the loop path (against
  a hand-written loop over ``np.ndindex``) and through ``torch.vmap`` (against the torch
  expression); a dot product lifted over a 1000-row torch frame against ``torch.vmap`` of the
  same function (target <= 1.2x); a reranked primitive (``rerank(reduce, 1)``) against
  ``ufunc.reduce``.

Prints medians of interleaved runs and ratios (lifted time / anchor time: at most 1.5 meets the
target).
Run: ``.venv/bin/python bench/bench_rank.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tensig import rank
from timing import interleaved


def paired(lifted: Callable[[], object], anchor: Callable[[], object], repeat: int = 21
           ) -> tuple[float, float]:
    """Medians of interleaved runs (lifted, anchor, lifted, ...), so that load and frequency
    changes during the run hit both alike."""
    t_lift, t_anchor = interleaved(lifted, anchor, repeat=repeat)
    return t_lift, t_anchor


def row(name: str, times: tuple[float, float], anchor: str, target: str = "") -> float:
    t_lift, t_anchor = times
    ratio = t_lift / t_anchor
    if target:
        verdict = "ok" if ratio <= float(target) else "MISSED"
        target = f"  (target <= {target}x) {verdict}"
    print(f"  {name:<40} {t_lift * 1e3:9.3f} ms   {anchor:<26} {t_anchor * 1e3:9.3f} ms   "
          f"ratio {ratio:5.2f}{target}")
    return ratio


def bench_vectorisable() -> list[float]:
    print("vectorisable scalar function over a 1000x1000 frame (medians of 21 interleaved runs)")
    rng = np.random.default_rng(0)
    a, b = rng.random((1000, 1000)), rng.random((1000, 1000))
    v = rng.random(1000)
    add = rank.lift(np.add, ranks=(0, 0))
    ratios = [
        row("lift(np.add, ranks=(0, 0))(a, b)", paired(lambda: add(a, b), lambda: a + b),
            "a + b", "1.5"),
        row("lift(np.add)(v, b)  [prefix frame]",
            paired(lambda: add(v, b), lambda: v[:, None] + b), "v[:, None] + b", "1.5"),
    ]
    dot = rank.lift(lambda x, y: (x * y).sum(-1), "n; n => ", vectorized=True)
    row("lift(dot, 'n; n => ', vectorized=True)",
        paired(lambda: dot(a, b), lambda: (a * b).sum(-1)), "(a * b).sum(-1)")
    rsum = rank.rerank(rank.reduce, 1)
    row("rerank(reduce, 1)(np.add, a)",
        paired(lambda: rsum(np.add, a), lambda: np.add.reduce(a, axis=1)),
        "np.add.reduce(a, axis=1)")
    return ratios


def bench_loop_and_vmap() -> None:
    print("\nnon-vectorised Python function of scalars (for information)")
    rng = np.random.default_rng(1)
    a, b = rng.random((200, 200)), rng.random((200, 200))

    def f(x: object, y: object) -> object:
        return x * 2 + y

    lifted = rank.lift(f, ranks=(0, 0))

    def hand_loop() -> np.ndarray:
        out = np.empty(a.shape)
        for idx in np.ndindex(*a.shape):
            out[idx] = f(a[idx], b[idx])
        return out

    row("loop path, 200x200 frame", paired(lambda: lifted(a, b), hand_loop, repeat=3),
        "hand loop over np.ndindex")
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a test extra
        print("  torch not installed: vmap path skipped")
        return
    ta, tb = torch.as_tensor(rng.random((1000, 1000))), torch.as_tensor(rng.random((1000, 1000)))
    row("torch.vmap path, 1000x1000 frame", paired(lambda: lifted(ta, tb), lambda: ta * 2 + tb),
        "ta * 2 + tb")
    bench_vmap_dot(torch)


def bench_vmap_dot(torch: object) -> float:
    """A dot product of 16-vectors lifted over a 1000-row frame of torch arrays, against
    ``torch.vmap`` of the same function: the lifting's own cost per call (type check, frame
    agreement, the result cell's check) on top of the library's vmap.  Target <= 1.2x."""
    rng = np.random.default_rng(2)
    a = torch.as_tensor(rng.random((1000, 16), dtype=np.float32))  # type: ignore[attr-defined]
    b = torch.as_tensor(rng.random((1000, 16), dtype=np.float32))  # type: ignore[attr-defined]

    def dot(x: object, y: object) -> object:
        return (x * y).sum()  # type: ignore[operator]

    lifted = rank.lift(dot, "n; n => ")
    vmapped = torch.vmap(dot)  # type: ignore[attr-defined]
    times = interleaved(lambda: lifted(a, b), lambda: vmapped(a, b), repeat=21, number=50)
    return row("lift(dot, 'n; n => ') on torch, 1000x16", (times[0], times[1]),
               "torch.vmap(dot)", "1.2")


def main() -> None:
    ratios = bench_vectorisable()
    bench_loop_and_vmap()
    worst = max(ratios)
    print(f"\nworst vectorisable ratio {worst:.2f} (target <= 1.5): "
          f"{'met' if worst <= 1.5 else 'MISSED'}")


if __name__ == "__main__":
    main()
