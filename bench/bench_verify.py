"""How long symbolic verification takes, against the alternatives measured in the same run.

A transformer block (layer norm, attention with a causal and a padding mask, MLP) is verified
for all batch sizes and sequence lengths at once with ``tensig.verify``, and compared with
running the block once on real data (B=8, T=128) and with ``torch.export`` using dynamic
dimensions (which also reasons symbolically, at a much larger cost).

The torch corpus (``tests/verify_corpus/torch_models.py``: realistic models, each with one
injected bug) is timed per function: the first verify in the process (cold: it pays torch's
one-time import of its meta-tensor kernels when an op falls back to them) and the median of
repeated runs (warm; targets: median under 5 ms, none over 100 ms), against ``torch.export``'s
time and verdict on the same modules, correct and buggy, measured in the same run.  Each row's
ratio is to anchors measured in the same run: one call of the function on data at the example
sizes (every symbol a distinct size), and ``torch.export`` where it ran.

The fit cache (:func:`fit_cache`): verify over the NumPy and JAX probes of 2026 with no cache
of fitted ops, with it emptied per verify, and kept, interleaved; with the concrete runs each
makes.

Run: ``.venv/bin/python bench/bench_verify.py`` (``--no-export`` skips torch.export,
``--export-all`` exports every corpus module: minutes; ``--fit-cache``: that part alone).
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch

from tensig.check.verify import verify
from timing import median_time

D, HEADS = 256, 8


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1, self.norm2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        self.qkv, self.out = torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)
        self.up, self.down = torch.nn.Linear(D, 4 * D), torch.nn.Linear(4 * D, D)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        qkv = self.qkv(self.norm1(x))
        q, k, v = qkv[..., :d], qkv[..., d:2 * d], qkv[..., 2 * d:]
        q = q.view(b, t, HEADS, d // HEADS).transpose(1, 2)
        k = k.view(b, t, HEADS, d // HEADS).transpose(1, 2)
        v = v.view(b, t, HEADS, d // HEADS).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // HEADS)
        causal = torch.tril(torch.ones(t, t)) == 0
        scores = scores.masked_fill(causal, float("-inf")) + pad[:, None, None, :]
        att = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.out(att)
        return x + self.down(torch.relu(self.up(self.norm2(x))))


def main() -> None:
    block = Block().eval()
    sig = f"B, T, {D}; B, T => B, T, {D}"
    report = verify(block.forward, sig)
    print(f"verify: {'ok' if report.ok else report}; largest intermediate "
          f"{report.largest_bytes()} bytes (float32)")
    t_verify = median_time(lambda: verify(block.forward, sig))
    x, pad = torch.randn(8, 128, D), torch.zeros(8, 128)
    with torch.no_grad():
        t_run = median_time(lambda: block(x, pad))
    print(f"  tensig.verify (all B, T)         {t_verify * 1e3:9.2f} ms")
    print(f"  one real forward pass (8x128)    {t_run * 1e3:9.2f} ms   "
          f"verify / run = {t_verify / t_run:.2f}")
    try:
        from torch.export import Dim, export

        dyn = {"x": {0: Dim("B"), 1: Dim("T", min=2)}, "pad": {0: Dim("B"), 1: Dim("T", min=2)}}
        t0 = time.perf_counter()
        export(block, (x, pad), dynamic_shapes=dyn)
        t_export = time.perf_counter() - t0
        print(f"  torch.export, dynamic B and T    {t_export * 1e3:9.2f} ms   "
              f"verify / export = {t_verify / t_export:.3f}")
    except Exception as e:  # torch.export is a moving target; report, do not hide
        print(f"  torch.export failed here: {type(e).__name__}: {str(e)[:200]}")


def corpus() -> None:
    """verify's time per corpus function, and torch.export's time and verdict beside it."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from verify_corpus.torch_models import CASES, signature

    rows = []
    for case in CASES:
        sig = signature(case)
        for label, fn in (("ok", case.good), ("bug", case.bad)):
            t0 = time.perf_counter()
            report = verify(fn, sig)
            cold = time.perf_counter() - t0
            warm = median_time(lambda fn=fn, sig=sig: verify(fn, sig), repeat=5)
            errors = sum(1 for f in report if f.severity == "error")
            verdict = "clean" if report.complete and not errors else f"{errors} error(s)"
            wanted = "--export-all" in sys.argv or case.name in _EXPORT_SAMPLE
            export = _export(fn, sig) if wanted and "--no-export" not in sys.argv and \
                isinstance(fn, torch.nn.Module) else None
            with torch.no_grad():
                run = _call_time(fn, _example_args(sig, _torch_array))
            rows.append((f"{case.name} ({label})", cold, warm, verdict, export, run))
    print(f"\ntorch corpus: verify per function (cold = first call in the process; "
          f"load average {os.getloadavg()[0]:.2f}); anchors in the same run: one call of the "
          f"function on data at the example sizes, torch.export")
    print(f"  {'function':38s} {'cold ms':>9s} {'warm ms':>9s} {'/ call':>8s}  verify verdict   "
          f"torch.export   {'/ export':>8s}")
    for name, cold, warm, verdict, export, run in rows:
        ex = "" if export is None else \
            f"{export[0] * 1e3:8.1f} ms  {warm / export[0]:8.4f}x  {export[1]}"
        print(f"  {name:38s} {cold * 1e3:9.2f} {warm * 1e3:9.2f} {_ratio(warm, run):>8s}  "
              f"{verdict:15s}  {ex}")
    warm_times = [r[2] for r in rows]
    exports = [(r[2], r[4][0]) for r in rows if r[4] is not None]
    print(f"  verify warm: median {statistics.median(warm_times) * 1e3:.2f} ms, max "
          f"{max(warm_times) * 1e3:.2f} ms (targets 5 ms, 100 ms); cold: median "
          f"{statistics.median(r[1] for r in rows) * 1e3:.2f} ms, max "
          f"{max(r[1] for r in rows) * 1e3:.0f} ms")
    _print_call_ratios(rows)
    if exports:
        print(f"  torch.export: median {statistics.median(e for _, e in exports) * 1e3:.1f} ms, "
              f"max {max(e for _, e in exports) * 1e3:.0f} ms over {len(exports)} modules; "
              f"verify warm / export: median "
              f"{statistics.median(w / e for w, e in exports):.4f}x")


def _ratio(t: float, anchor: float | None) -> str:
    return "-" if anchor is None else f"{t / anchor:.3g}x"


def _print_call_ratios(rows: list[tuple]) -> None:
    """The median and largest ratio of verify's warm time to one real call of the function."""
    ratios = [r[2] / r[5] for r in rows if r[5] is not None]
    if ratios:
        print(f"  verify warm / one real call: median {statistics.median(ratios):.3g}x, max "
              f"{max(ratios):.3g}x over {len(ratios)} functions that ran at the example sizes")


def _example_sizes(sig) -> dict[str, int]:
    """Distinct sizes for the signature's symbols (a bug that needs two equal never hides)."""
    return {name: 4 * (i + 2) for i, name in enumerate(sig.symbols)}


def _example_args(sig, make) -> list:
    """Arguments at :func:`_example_sizes`, made by ``make(shape, kind)``."""
    sizes = _example_sizes(sig)
    return [make([d.evaluate(sizes) for d in shape], kind)
            for shape, kind in zip(sig.args, sig.kinds or ("f",) * len(sig.args), strict=True)]


def _torch_array(shape: list[int], kind: str) -> torch.Tensor:
    return (torch.randint(0, 2, shape) if kind == "i" else
            torch.zeros(shape, dtype=torch.bool) if kind == "b" else torch.randn(shape))


def _numpy_array(shape: list[int], kind: str) -> np.ndarray:
    rng = np.random.default_rng(0)
    return (rng.integers(0, 2, shape) if kind == "i" else np.zeros(shape, bool) if kind == "b"
            else rng.standard_normal(shape).astype(np.float32))


def _call_time(fn, args: list) -> float | None:
    """The median time of one call on ``args`` (the anchor: running the code once), or
    ``None`` when the function does not run on them (a buggy variant may not)."""
    try:
        _ready(fn(*args))
    except Exception:  # the injected bug, or data the example does not fit
        return None
    return median_time(lambda: _ready(fn(*args)), repeat=5)


def _ready(out: object) -> object:
    """``out`` once computed: JAX dispatches asynchronously, so a call's time without this
    would be the dispatch's alone (NumPy and torch on the CPU return finished arrays)."""
    jax = sys.modules.get("jax")  # imported only by the JAX corpus
    return jax.block_until_ready(out) if jax is not None else out


# torch.export takes seconds per module: by default a sample (``--export-all`` for every one)
_EXPORT_SAMPLE = {"nanogpt_attention", "head_merge", "rmsnorm", "token_pool_head",
                  "squeeze_excitation", "recommender_two_tower"}


def _export(module: torch.nn.Module, sig) -> tuple[float, str]:
    """torch.export with every signature symbol a dynamic dimension, at distinct sizes."""
    import logging

    from torch.export import Dim, export

    logging.disable(logging.ERROR)  # torch logs each refusal at length; the verdict says it

    dims = {name: Dim(name, min=2) for name in sig.symbols}
    args = _example_args(sig, _torch_array)
    dynamic = [{i: dims[str(d)] for i, d in enumerate(shape) if d.constant is None}
               for shape in sig.args]
    t0 = time.perf_counter()
    try:
        export(module, tuple(args), dynamic_shapes=tuple(dynamic))
        verdict = "ok"
    except Exception as e:  # its verdict, whatever form it takes
        verdict = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:60]}"
    return time.perf_counter() - t0, verdict


def numpy_jax_corpus() -> None:
    """verify's time per function of the NumPy and JAX corpus (``tests/verify_corpus``)."""
    import importlib.util

    folder = Path(__file__).resolve().parent.parent / "tests" / "verify_corpus"
    from tensig.check.verify import Signature

    rows = []
    for path in sorted(folder.glob("numpy_*.py")) + sorted(folder.glob("jax_*.py")):
        spec = importlib.util.spec_from_file_location(f"corpus_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name, good, bad, sig in module.CASES:
            args = _example_args(Signature.parse(sig), _numpy_array)
            if path.stem.startswith("jax_"):
                import jax.numpy as jnp

                args = [jnp.asarray(a) for a in args]
            for label, fn in (("ok", good), ("bug", bad)):
                verify(fn, sig)  # the first call pays imports and JAX's wrapping
                warm = median_time(lambda fn=fn, sig=sig: verify(fn, sig), repeat=5)
                rows.append((f"{name} ({label})", None, warm, None, None, _call_time(fn, args)))
    warm = [r[2] for r in rows]
    slowest = max(rows, key=lambda r: r[2])
    print(f"\nNumPy and JAX corpus: {len(rows)} functions, verify warm median "
          f"{statistics.median(warm) * 1e3:.2f} ms, max {slowest[2] * 1e3:.1f} ms ({slowest[0]}) "
          f"(targets 5 ms, 100 ms; load average {os.getloadavg()[0]:.2f})")
    _print_call_ratios(rows)


class _Forgetful(dict):
    """A fit cache that keeps nothing: every fitted call runs the library again."""

    def __setitem__(self, key, value) -> None:
        pass


def _verify_all(fns, fits) -> None:
    """verify each of ``fns``, the fit cache before each ``fits()`` (a new one) or ``fits``."""
    from tensig.check import size_fit

    for fn in fns:
        size_fit._FITS = fits() if callable(fits) else fits
        verify(fn)


def _runs_of(fns, fits) -> int:
    """How many concrete runs of a library :func:`_verify_all` makes (each run converts its
    arguments and its keywords: two top-level calls of ``size_fit.concrete``)."""
    from tensig.check import size_fit

    real, depth, calls = size_fit.concrete, [0], [0]

    def counted(x, env, leaf):
        calls[0] += depth[0] == 0
        depth[0] += 1
        try:
            return real(x, env, leaf)
        finally:
            depth[0] -= 1
    size_fit.concrete = counted
    try:
        _verify_all(fns, fits)
    finally:
        size_fit.concrete = real
    return calls[0] // 2


def fit_cache() -> None:
    """verify over the NumPy and JAX probes of 2026 with no fit cache (as NumPy's and JAX's
    fits were), with the one cache emptied before each verify (reuse within one function:
    loops), and with it kept (verify run again: pytest, an editor), interleaved, CPU time."""
    from tensig.check import size_fit
    from timing import interleaved

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    kept = size_fit._FITS
    configs = {"no cache": _Forgetful, "cache, emptied per verify": dict, "cache, kept": kept}
    print("\nfit cache: verify of every function of a corpus, median CPU ms of interleaved runs "
          "(ratio to no cache), and the concrete library runs made")
    for corpus_name in ("probe_np_2026", "probe_jax_2026"):
        module = __import__(f"verify_corpus.{corpus_name}", fromlist=["CASES"])
        fns = [fn for case in module.CASES for fn in case[1:3]]
        times = interleaved(*(partial(_verify_all, fns, f) for f in configs.values()), repeat=7,
                            clock=time.process_time)
        runs = [_runs_of(fns, f) for f in configs.values()]
        size_fit._FITS = kept
        print(f"  {corpus_name} ({len(fns)} functions)")
        for label, t, n in zip(configs, times, runs, strict=True):
            print(f"    {label:28s} {t * 1e3:8.1f} ms  {t / times[0]:5.2f}x   {n:5d} runs")


if __name__ == "__main__":
    if "--fit-cache" in sys.argv:
        fit_cache()
        sys.exit()
    main()
    corpus()
    numpy_jax_corpus()
    fit_cache()
