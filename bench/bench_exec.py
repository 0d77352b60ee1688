"""Execution benchmarks: tensig's eager ops against the backends' own primitives, in one run.

- per-call time on tiny arrays (2x3x4 by 4x5) against numpy.einsum and einops.einsum
  (target: no slower than einops.einsum);
- a large contraction (64x512x512 by 512x512, float32) against numpy.matmul (target: >= 0.9x
  its throughput);
- a 3x3 convolution, stride 1 and 2, NHWC 16x64x64x32 -> 64 channels, against
  torch.nn.functional.conv2d on the CPU (targets: >= 0.5x with NumPy, >= 0.9x with torch);
  2x2 max pooling against torch.nn.functional.max_pool2d.

- the padded 3x3 convolution (stride 1) on JAX arrays against ``lax.conv_general_dilated``
  on the same NHWC data, jitted (target: >= 0.83x, a time within 1.2x); skipped without jax;
- a chunked float32 4000x3000 @ 3000x2000 contraction on Dask (a ``LocalCluster`` of two
  workers, one thread each) against ``da.tensordot`` and ``da.matmul`` (target: >= 0.83x, a
  time within 1.2x); skipped without dask.distributed.

Prints medians and ratios (anchor time / tensig time: above 1 means tensig is faster).
Run: ``.venv/bin/python bench/bench_exec.py`` (all rows), or name the rows to run:
``bench/bench_exec.py dask`` (``dask --size 1000`` for a quick check at a smaller size).
"""

from __future__ import annotations

import numpy as np

import tensig as ts
from timing import interleaved


def row(name: str, t_ours: float, t_anchor: float, anchor: str, target: str) -> None:
    ratio = t_anchor / t_ours
    print(f"  {name:<34} {t_ours * 1e3:10.3f} ms  {anchor:<22} {t_anchor * 1e3:10.3f} ms  "
          f"speed ratio {ratio:5.2f}  (target {target})")


def bench_tiny() -> None:
    import einops

    print("tiny arrays, per call (median of 9 x 2000 calls, measured in alternation)")
    a, b = np.random.rand(2, 3, 4), np.random.rand(4, 5)
    t_np, t_eo, t_ts = interleaved(lambda: np.einsum("ijk,kl->ijl", a, b),
                                   lambda: einops.einsum(a, b, "i j k, k l -> i j l"),
                                   lambda: ts.einsum("ijk;kl=>ijl", a, b), number=2000)
    print(f"  numpy.einsum {t_np * 1e6:6.2f} us   einops.einsum {t_eo * 1e6:6.2f} us   "
          f"tensig.einsum {t_ts * 1e6:6.2f} us")
    print(f"  tensig / einops = {t_ts / t_eo:.2f} (target <= 1.00);  "
          f"tensig / numpy.einsum = {t_ts / t_np:.2f}")


def bench_large() -> None:
    print("\nlarge contraction 64x512x512 @ 512x512 float32 (median of 7, alternating)")
    a = np.random.rand(64, 512, 512).astype(np.float32)
    b = np.random.rand(512, 512).astype(np.float32)
    t_mm, t_ts = interleaved(lambda: np.matmul(a, b), lambda: ts.einsum("bij;jk=>bik", a, b),
                             repeat=7)
    row("tensig.einsum (numpy)", t_ts, t_mm, "numpy.matmul", ">= 0.9")


def bench_conv() -> None:
    import torch
    import torch.nn.functional as F

    print("\n3x3 convolution NHWC 16x64x64x32 -> 64 channels, and 2x2 max pooling "
          "(median of 7, alternating)")
    x = np.random.rand(16, 64, 64, 32).astype(np.float32)
    w = np.random.rand(64, 3, 3, 32).astype(np.float32)  # |kh, kw, ic -> oc: (oc, kh, kw, ic)
    xt = torch.from_numpy(x)
    wt = torch.from_numpy(w)
    x_nchw = xt.permute(0, 3, 1, 2).contiguous()
    w_oihw = wt.permute(0, 3, 1, 2).contiguous()
    for stride in (1, 2):
        size = 64 if stride == 1 else 65
        xs = x if stride == 1 else np.random.rand(16, size, size, 32).astype(np.float32)
        xs_t = torch.from_numpy(xs)
        xs_nchw = xs_t.permute(0, 3, 1, 2).contiguous()
        spec = f"...|{stride}*oh<+kh, {stride}*ow<+kw, ic; |kh, kw, ic -> oc => ...|oh, ow, oc"
        xr, wr = ts.rows(xs, batch=1), ts.rows(w, input=3)
        xr_t, wr_t = ts.rows(xs_t, batch=1), ts.rows(wt, input=3)
        t_torch, t_torch_cl, t_np, t_tt = interleaved(
            lambda xs_nchw=xs_nchw, stride=stride: F.conv2d(xs_nchw, w_oihw, stride=stride),
            # the same data in the layout tensig reads it (NHWC = channels-last), for reference
            lambda xs_t=xs_t, stride=stride: F.conv2d(xs_t.permute(0, 3, 1, 2),
                                                      wt.permute(0, 3, 1, 2), stride=stride),
            lambda xr=xr, wr=wr, spec=spec: ts.einsum(spec, xr, wr),
            lambda xr_t=xr_t, wr_t=wr_t, spec=spec: ts.einsum(spec, xr_t, wr_t), repeat=7)
        row(f"conv stride {stride}, numpy backend", t_np, t_torch, "torch conv2d (NCHW)",
            ">= 0.5")
        row(f"conv stride {stride}, torch backend", t_tt, t_torch, "torch conv2d (NCHW)",
            ">= 0.9")
        row(f"conv stride {stride}, torch backend", t_tt, t_torch_cl,
            "torch conv2d (NHWC view)", "report")
    pool = "...|2*oh<+wh, 2*ow<+ww, c; |wh, ww => ...|oh, ow, c"
    window = np.zeros((2, 2), np.float32)
    window_t = torch.from_numpy(window)
    t_torch, t_np, t_tt = interleaved(
        lambda: F.max_pool2d(x_nchw, 2),
        lambda: ts.tropical(pool, ts.rows(x, batch=1), window),
        lambda: ts.tropical(pool, ts.rows(xt, batch=1), window_t), repeat=7)
    row("max pool 2x2, numpy backend", t_np, t_torch, "torch max_pool2d", "report")
    row("max pool 2x2, torch backend", t_tt, t_torch, "torch max_pool2d", "report")


def bench_jax_conv() -> None:
    try:
        import jax
        from jax import lax
    except ImportError:
        print("\njax not installed: the JAX convolution row is skipped")
        return
    print("\npadded 3x3 convolution NHWC 16x64x64x32 -> 64 channels on JAX arrays "
          "(median of 7, alternating)")
    rng = np.random.default_rng(0)
    x = jax.numpy.asarray(rng.random((16, 64, 64, 32), dtype=np.float32))
    w = jax.numpy.asarray(rng.random((64, 3, 3, 32), dtype=np.float32))  # (oc, kh, kw, ic)
    conv = jax.jit(lambda x, w: lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "OHWI", "NHWC")))
    spec = "...|oh=+kh, ow=+kw, ic; |kh, kw, ic -> oc => ...|oh, ow, oc"
    xr, wr = ts.rows(x, batch=1), ts.rows(w, input=3)
    t_lax, t_ts = interleaved(lambda: conv(x, w).block_until_ready(),
                              lambda: ts.einsum(spec, xr, wr).array.block_until_ready(),
                              repeat=7)
    row("conv stride 1, jax backend", t_ts, t_lax, "lax.conv_general_dilated", ">= 0.83")


def bench_dask(size: int = 1000) -> None:
    try:
        import dask.array as da
        from dask.distributed import Client, LocalCluster
    except ImportError:
        print("\ndask.distributed not installed: the Dask row is skipped")
        return
    m, k, n = 4 * size, 3 * size, 2 * size
    print(f"\nDask contraction {m}x{k} @ {k}x{n} float32, chunks of {size}x{size}, a "
          "LocalCluster of 2 workers x 1 thread (median of 3, alternating)")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None, host="127.0.0.1") as cluster, Client(cluster):
        rng = da.random.default_rng(0)
        a = rng.random((m, k), dtype=np.float32, chunks=size).persist()
        b = rng.random((k, n), dtype=np.float32, chunks=size).persist()
        lazy = ts.einsum("ij;jk=>ik", a, b)
        assert isinstance(lazy, da.Array), type(lazy)  # the result stays lazy
        t_td, t_mm, t_ts = interleaved(
            lambda: da.tensordot(a, b, axes=1).compute(), lambda: (a @ b).compute(),
            lambda: ts.einsum("ij;jk=>ik", a, b).compute(), repeat=3)
    row("tensig.einsum (dask)", t_ts, t_td, "da.tensordot", ">= 0.83")
    row("tensig.einsum (dask)", t_ts, t_mm, "da.matmul (A @ B)", ">= 0.83")


ROWS = {"tiny": bench_tiny, "large": bench_large, "conv": bench_conv,
        "jaxconv": bench_jax_conv, "dask": bench_dask}


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rows", nargs="*", choices=[[], *ROWS], default=[],
                        help="the rows to run (default: all)")
    parser.add_argument("--size", type=int, default=1000,
                        help="the Dask row's unit: (4u x 3u) @ (3u x 2u) in u x u chunks")
    args = parser.parse_args()
    for name in args.rows or ROWS:
        ROWS[name](args.size) if name == "dask" else ROWS[name]()
