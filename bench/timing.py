"""Timing helpers shared by the benchmarks: medians, and alternation against drift."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_time(fn: Callable[[], object], repeat: int = 7, number: int = 1) -> float:
    """Median over ``repeat`` runs of the mean time of ``number`` calls, in seconds."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return statistics.median(times)


def interleaved(*fns: Callable[[], object], repeat: int = 9, number: int = 1,
                clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Medians of each function's time, measured in alternation (so load drifts hit all).

    ``clock=time.process_time`` counts this process's CPU time instead of wall time: on a
    shared, loaded machine the time other processes hold the cores then does not count."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = clock()
            for _ in range(number):
                fn()
            times[i].append((clock() - t0) / number)
    return [statistics.median(t) for t in times]
