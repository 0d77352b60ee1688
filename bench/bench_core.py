"""Core benchmarks: parse + infer per call (cold and cached), and graph-wide inference on chains
of 10, 100 and 1000 dependent specs (the growth should be linear).

Run: ``make bench`` or ``.venv/bin/python bench/bench_core.py``.  Prints medians of repeated
runs and ratios (these machines are noisy; compare ratios, not absolute numbers).
"""

from __future__ import annotations

import numpy as np

from tensig import infer, parse
from tensig.core.inference import _FAST, ShapeGraph, _infer_cached
from timing import median_time

SPECS = [
    ("matmul", "ij;jk=>ik", [(32, 64), (64, 16)], {}),
    ("attention", "b, h|q, d; b, h|k, d => b, h|q, k", ["8,12|128,64", "8,12|256,64"], {}),
    ("conv", "...|2*oh<+kh, 2*ow<+kw, ..ic..; |kh, kw, ..ic.. -> oc => ...|oh, ow, oc",
     ["16|65,65,32", "3,3,32->64"], {}),
    ("concat", "s, a; s, b => s, a^b", [(4, 3), (4, 5)], {}),
]


def bench_per_call() -> None:
    print("parse + infer per call (median of 7)")
    print(f"  {'spec':<10} {'cold us':>9} {'cached us':>10} {'numpy.einsum us':>16} "
          f"{'cached/einsum':>14}")
    a, b = np.ones((2, 3, 4)), np.ones((4, 5))
    t_np = median_time(lambda: np.einsum("ijk,kl->ijl", a, b), number=2000)
    for name, spec, shapes, kw in SPECS:
        def cold(spec=spec, shapes=shapes, kw=kw) -> None:
            parse.cache_clear()
            _infer_cached.cache_clear()
            _FAST.clear()
            infer(spec, *shapes, **kw)

        t_cold = median_time(cold, number=50)
        infer(spec, *shapes, **kw)
        t_hot = median_time(lambda spec=spec, shapes=shapes, kw=kw: infer(spec, *shapes, **kw),
                            number=2000)
        print(f"  {name:<10} {t_cold * 1e6:9.1f} {t_hot * 1e6:10.2f} {t_np * 1e6:16.2f} "
              f"{t_hot / t_np:14.2f}")
    print("  (numpy.einsum column: one 2x3x4 by 4x5 contraction, the anchor for 'cheap')")


def chain(n: int, *, backwards: bool) -> ShapeGraph:
    """A chain of ``n`` dependent specs: a strided convolution, then a matmul, alternately.

    Only the first input (or, ``backwards``, only the last output) has a known shape; every
    weight is a known kernel or matrix, every intermediate is inferred through the chain.
    """
    g = ShapeGraph()
    size = 5  # the input is size + 2n long; each valid conv with kernel 3 removes 2
    x = g.tensor("x0", f"4|->{size + 2 * n}, 16") if not backwards else g.tensor("x0")
    for i in range(n):
        if i % 2 == 0:
            k = g.tensor(f"k{i}", "3")
            x = g.apply("...|o<+k, c; |k => ...|o, c", x, k, name=f"x{i + 1}")
        else:
            w = g.tensor(f"w{i}", (16, 16))
            x = g.apply("...|n, c; |c, d => ...|n, d", x, w, name=f"x{i + 1}")
    if backwards:
        n_convs = (n + 1) // 2
        g.tensor_equal(x, g.tensor("y", f"4|->{size + 2 * n - 2 * n_convs}, 16"))
    g.solve()
    return g


def bench_chains() -> None:
    print("\ngraph-wide inference on chains of dependent specs (median of 5)")
    print(f"  {'n':>6} {'forward ms':>11} {'per spec us':>12} {'backward ms':>12} "
          f"{'per spec us':>12} {'vs n=10':>8}")
    base = None
    for n in (10, 100, 1000):
        tf = median_time(lambda n=n: chain(n, backwards=False), repeat=5)
        tb = median_time(lambda n=n: chain(n, backwards=True), repeat=5)
        base = base or tf / n
        print(f"  {n:>6} {tf * 1e3:11.2f} {tf / n * 1e6:12.1f} {tb * 1e3:12.2f} "
              f"{tb / n * 1e6:12.1f} {tf / n / base:8.2f}")
    print("  linear growth means a flat 'per spec' column ('vs n=10': forward per spec, "
          "relative to n=10; near 1.00)")


if __name__ == "__main__":
    bench_per_call()
    bench_chains()
