"""Per-call overhead of ``@tensig.shaped`` against jaxtyping + beartype, measured in one run.

The function: two arguments annotated ``"b t d"`` (floating dtype) and a return annotated the
same; small arrays, so the call itself costs almost nothing and the overhead is the check.
Also shown: arithmetic items (``t+1``, ``2*h``, solved per call) and the interpreter alone
(``shaped(compiled=False)``, the path that explains errors), and ``@tensig.shaped`` reading
jaxtyping's own ``Float[...]`` objects (the same generated check).  The target (issue 16) is
<= 3 microseconds per call on an idle machine; the anchor is
``jaxtyped(typechecker=beartype)`` with ``jaxtyping.Float[np.ndarray, "b t d"]``.

Run: ``.venv/bin/python bench/bench_runtime.py``.  Prints medians of repeated runs, the load
average, and each row's ratio to the anchor measured in the same run (these machines are noisy:
compare ratios, not absolute numbers): ``jaxtyping`` with ``beartype``, else with
``typeguard``, else (neither installed) the undecorated call.
"""
# ruff reads strings in annotation subscripts it cannot resolve as forward references, so the
# multichar specs ("b, t+1, d") look like undefined names to it (see tensig.annotations).
# ruff: noqa: F821


from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tensig.check.decorator import shaped
from tensig.core.annotations import Float
from timing import interleaved

TARGET_US = 3.0


def functions(array_type: Any) -> dict[str, Callable[..., Any]]:
    """The same two-argument function: plain, tensig, and (when installed) jaxtyping+beartype."""

    def plain(x: Any, y: Any) -> Any:
        return x

    @shaped
    def tensig_fn(x: Float[array_type, "b t d"],
                  y: Float[array_type, "b t d"]) -> Float[array_type, "b t d"]:
        return x

    @shaped
    def tensig_arith(x: Float[array_type, "b, t+1, d"],
                     y: Float[array_type, "b, t, 2*h"]) -> Float[array_type, "b, t+1, d"]:
        return x

    @shaped(compiled=False)
    def tensig_interpreted(x: Float[array_type, "b t d"],
                           y: Float[array_type, "b t d"]) -> Float[array_type, "b t d"]:
        return x

    @shaped(compiled=False)
    def interpreted_arith(x: Float[array_type, "b, t+1, d"],
                          y: Float[array_type, "b, t, 2*h"]) -> Float[array_type, "b, t+1, d"]:
        return x

    out = {"undecorated": plain, "tensig.shaped": tensig_fn, "tensig (T+1, 2*h)": tensig_arith,
           "tensig interpreted": tensig_interpreted,
           "interpreted (T+1, 2*h)": interpreted_arith}
    try:
        from jaxtyping import Float as JFloat
        from jaxtyping import jaxtyped
    except ImportError:
        return out

    @shaped
    def tensig_jaxtyping_hints(x: JFloat[array_type, "b t d"],
                               y: JFloat[array_type, "b t d"]) -> JFloat[array_type, "b t d"]:
        return x

    out["tensig on jaxtyping"] = tensig_jaxtyping_hints
    for checker, decorator in ANCHORS.items():
        try:
            typechecker = getattr(importlib.import_module(checker), decorator)
        except ImportError:
            continue

        @jaxtyped(typechecker=typechecker)
        def jaxtyping_fn(x: JFloat[array_type, "b t d"],
                         y: JFloat[array_type, "b t d"]) -> JFloat[array_type, "b t d"]:
            return x

        out[f"jaxtyping+{checker}"] = jaxtyping_fn
    return out


#: the anchors (the first one installed is the ratios' denominator): jaxtyping with each
#: runtime type checker, by module and decorator name
ANCHORS = {"beartype": "beartype", "typeguard": "typechecked"}


def bench(label: str, array_type: Any, x: Any, y: Any, y_arith: Any, x_arith: Any) -> None:
    fns = functions(array_type)
    calls = []
    for name, fn in fns.items():
        args = (x_arith, y_arith) if "T+1" in name else (x, y)
        fn(*args)  # warm caches, and fail loudly if a check is wrong
        calls.append(lambda fn=fn, args=args: fn(*args))
    # measured in alternation, so that load drifts hit the anchors and tensig alike
    medians = interleaved(*calls, repeat=9, number=20000)
    times = {name: t * 1e6 for name, t in zip(fns, medians, strict=True)}
    base = times["undecorated"]
    anchor = next((f"jaxtyping+{c}" for c in ANCHORS if f"jaxtyping+{c}" in times),
                  "undecorated")
    load = os.getloadavg()[0]
    print(f"{label}: per-call time, median of 9 interleaved runs of 20000 calls "
          f"(load average {load:.2f}); anchor: {anchor}")
    print(f"  {'function':<22} {'call us':>8} {'overhead us':>12} {'call / anchor':>14} "
          f"{'overhead / anchor':>18}")
    for name, t in times.items():
        overhead = t - base
        per_overhead = "" if anchor == "undecorated" or name == "undecorated" else \
            f"{overhead / (times[anchor] - base):17.3f}x"
        print(f"  {name:<22} {t:8.2f} {overhead:12.2f} {t / times[anchor]:13.3f}x "
              f"{per_overhead:>18}")
    ours = times["tensig.shaped"] - base
    verdict = "meets" if ours <= TARGET_US else "MISSES"
    line = (f"  tensig.shaped overhead {ours:.2f} us {verdict} the <= {TARGET_US:.0f} us target "
            f"(at load {load:.2f} on {os.cpu_count()} cores); a call is "
            f"{times['tensig.shaped'] / base:.1f}x an undecorated one")
    if anchor != "undecorated":
        line += f"; {anchor}'s overhead is {(times[anchor] - base) / ours:.1f}x tensig's"
    print(line)
    # CPU time is what an idle machine's wall time would be, near enough: the target's measure
    plain, ours_cpu = (t * 1e6 for t in interleaved(calls[0], calls[1], repeat=9, number=20000,
                                                     clock=time.process_time))
    verdict = "meets" if ours_cpu - plain <= TARGET_US else "MISSES"
    print(f"  in CPU time (the load does not count): tensig.shaped overhead "
          f"{ours_cpu - plain:.2f} us {verdict} the <= {TARGET_US:.0f} us target")


def main() -> None:
    x = np.zeros((2, 3, 4), np.float32)
    bench("numpy", np.ndarray, x, x.copy(), np.zeros((2, 3, 10), np.float32),
          np.zeros((2, 4, 4), np.float32))
    try:
        import torch
    except ImportError:
        return
    t = torch.zeros(2, 3, 4)
    bench("torch", torch.Tensor, t, t.clone(), torch.zeros(2, 3, 10), torch.zeros(2, 4, 4))


if __name__ == "__main__":
    main()
