"""The PyTorch adapter: torch's names, its own convolution, pooling and convolution
backward, planned matmuls instead of ``torch.einsum``'s ~25 us of Python per call."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from tensig.backends._plans import gemm, matmul_plan
from tensig.backends.base import GELU_C, GELU_K, Backend, neutral_max, register, to_numpy

__all__ = ["TorchBackend"]


@register
class TorchBackend(Backend):
    name = "torch"
    modules = ("torch",)
    array_name = "Tensor"
    compiles = True
    permute_method = "permute"
    fused_axpy = True
    has_devices = True
    unrolls_max = True

    def __init__(self) -> None:
        import torch

        self.torch = self.xp = torch

    def no_autograd(self) -> Any:
        return self.torch.inference_mode

    def scalar_operand(self, value: int | float) -> Any:
        """A 0-d tensor: torch wraps a number in a new tensor every call (~2 us); a 0-d
        tensor promotes as the number does."""
        t = self.torch
        return t.tensor(value, dtype=t.get_default_dtype() if isinstance(value, float)
                        else t.int64)

    def device_of(self, x: Any) -> str | None:
        return str(x.device)

    def placed(self, like: Any) -> dict[str, Any]:
        return {"device": getattr(like, "device", None)}

    def device(self, name: str | None) -> Any:
        t = self.torch
        device = t.device(name if name is not None else "cpu")
        if device.type == "cuda" and not t.cuda.is_available():
            raise ValueError(f"device={str(device)!r}: this torch sees no CUDA device "
                             f"(torch {t.__version__}, built for CUDA "
                             f"{t.version.cuda or 'none'}); use device='cpu'")
        return device

    def is_integer(self, dtype: Any) -> bool:
        return not (dtype.is_floating_point or dtype.is_complex) and dtype != self.torch.bool

    def einsum(self, subscripts: str, *xs: Any) -> Any:
        """``torch.einsum`` in the operands' promoted dtype, as ``numpy.einsum`` (torch sums
        int8 in int64; mixed dtypes: :meth:`_promoted`)."""
        t = self.torch
        try:
            out = t.einsum(subscripts, *xs)
        except (RuntimeError, NotImplementedError):
            einsum = functools.partial(t.einsum, subscripts)
            return self._promoted(einsum, einsum, xs)
        return self._in_result_dtype(out, xs)

    def contraction(self, subscripts: str, shapes: Sequence[tuple[int, ...]]) -> Any:
        # torch.einsum spends ~25 us in Python per call, a planned matmul ~3 us; sums in the
        # operands' dtype (torch's ``sum`` widens int8); a diagonal is :meth:`einsum`
        einsum = functools.partial(self.torch.einsum, subscripts)
        plan = matmul_plan(self.torch.matmul, subscripts, shapes, self.result_dtype) or \
            functools.partial(self.einsum, subscripts)

        def contract(*xs: Any) -> Any:
            try:  # the try costs nothing on the fast path
                out = plan(*xs)
            except (RuntimeError, NotImplementedError):
                return self._promoted(plan, einsum, xs)
            if len(xs) == 2 and xs[0].dtype != xs[1].dtype:  # a batched matmul of no cells
                return self._in_result_dtype(out, xs)  # skips torch's dtype check: y's dtype
            return out

        return contract

    def summed_contraction(self, subscripts: str, shapes: Sequence[tuple[int, ...]]
                           ) -> Callable[..., Any] | None:
        """``(old, x, y) -> old + einsum(subscripts, x, y)`` by one ``addmm`` (no pass of its
        own for the sum), when the contraction is one 2-D matrix product of views in the
        output's layout; else None.  Other dtypes take the plain sum."""
        g = gemm(subscripts, shapes)
        if g is None or g.pre is not None or g.perm is not None or g.copies or \
                g.groups[0] or not g.groups[3]:
            return None  # summed within an operand, permuted, copied, batched or no sum
        swap, flat = g.swap, g.product
        shape = flat if g.shape is None else g.shape
        x2, y2 = g.x or (lambda x: x), g.y or (lambda y: y)
        plain, addmm = self.contraction(subscripts, shapes), self.torch.addmm

        def summed(old: Any, x: Any, y: Any) -> Any:
            if not (old.dtype == x.dtype == y.dtype and old.dtype.is_floating_point) or \
                    tuple(old.shape) != shape:
                return old + plain(x, y)
            if swap:
                x, y = y, x
            return addmm(old.reshape(flat), x2(x), y2(y)).reshape(shape)

        return summed

    def _promoted(self, plan: Callable[..., Any], einsum: Callable[..., Any],
                  xs: Sequence[Any]) -> Any:
        """A contraction matmul refused: mixed dtypes in torch's promoted dtype (as
        ``torch.einsum`` does for products that reduce nothing); bool operands as NumPy's or
        of ands (torch has no bool matmul).  Else torch's own error."""
        t, dtype = self.torch, self.result_dtype(xs)
        if dtype == t.bool:
            return plan(*[x.to(t.float32) for x in xs]) > 0  # exact: sums of 0s and 1s
        cast = [x if x.dtype == dtype else x.to(dtype) for x in xs]
        try:
            return plan(*cast)
        except (RuntimeError, NotImplementedError):
            try:
                return einsum(*cast)
            except (RuntimeError, NotImplementedError):
                if dtype.is_floating_point or dtype.is_complex:
                    raise
                # an int8 diagonal: torch.einsum sums it in int64, then refuses to mix the two;
                # in int64 and back is the same arithmetic modulo 2**8
                return einsum(*[x.to(t.int64) for x in cast]).to(dtype)

    def pad(self, x: Any, widths: Sequence[tuple[int, int]], value: float) -> Any:
        flat = [n for pair in reversed(list(widths)) for n in pair]  # the last axis first
        return self.torch.nn.functional.pad(x, flat, value=value)

    def windows(self, x: Any, axis: int, size: int, step: int) -> Any:
        if (x.shape[axis] - size) // step == -1:  # no window (an empty axis padded): unfold refuses
            shape = (*x.shape[:axis], 0, *x.shape[axis + 1:], size)
            return x.narrow(axis, 0, 0).unsqueeze(-1).expand(shape)
        return x.unfold(axis, size, step)

    def conv(self, x: Any, w: Any, strides: Sequence[int], dilations: Sequence[int],
             pads: Sequence[tuple[int, int]], channels_last: bool = False) -> Any:
        """``x`` (N, C, *spatial), ``w`` (O, C, *kernel); ``channels_last``: the result's layout."""
        F = self.torch.nn.functional
        fn = (F.conv1d, F.conv2d, F.conv3d)[len(strides) - 1]
        x, padding = self._padded(x, pads)
        y = fn(x, w, stride=list(strides), dilation=list(dilations), padding=padding)
        if channels_last and y.dim() in (4, 5):
            y = y.contiguous(memory_format=self._format(y.dim()))
        return y

    def conv_backward(self, g: Any, other: Any, shape: Sequence[int], of_input: bool,
                      strides: Sequence[int], dilations: Sequence[int],
                      pads: Sequence[tuple[int, int]]) -> Any:
        """The gradient of :meth:`conv` for the input (``other``: the kernel) or the kernel
        from ``g``; ``shape``: the missing operand's, whose values are not needed."""
        fmt = self._format(len(shape))
        if of_input:  # the template has the shape of the input as the kernel reads it
            x_shape = list(shape)
            full = x_shape if _even(pads) is not None else \
                x_shape[:2] + [n + lo + hi for n, (lo, hi) in zip(x_shape[2:], pads, strict=True)]
            x, w = _template(tuple(full), g.dtype, g.device, fmt), other
        else:
            x_shape, x, w = list(other.shape), self._padded(other, pads)[0], \
                _template(tuple(shape), g.dtype, g.device, fmt)
        gx, gw = self._conv_grads(g, x, w, x_shape, (of_input, not of_input), strides,
                                  dilations, pads)
        return gx if of_input else gw

    def conv_gradients(self, g: Any, x: Any, w: Any, strides: Sequence[int],
                       dilations: Sequence[int], pads: Sequence[tuple[int, int]]
                       ) -> tuple[Any, Any]:
        """Both gradients of :meth:`conv` by one backward call (cheaper than two), as autograd."""
        return self._conv_grads(g, self._padded(x, pads)[0], w, list(x.shape), (True, True),
                                strides, dilations, pads)

    def _conv_grads(self, g: Any, x: Any, w: Any, x_shape: list[int], mask: tuple[bool, bool],
                    strides: Sequence[int], dilations: Sequence[int],
                    pads: Sequence[tuple[int, int]]) -> tuple[Any, Any]:
        """``convolution_backward`` for the gradients ``mask`` asks (``x`` padded where the
        pads are uneven, cut back to ``x_shape``), in the forward's memory layout."""
        nd, even = len(strides), _even(pads)
        gx, gw, _ = self.torch.ops.aten.convolution_backward(
            g, x, w, None, list(strides), even or [0] * nd, list(dilations), False, [0] * nd, 1,
            [*mask, False])
        if mask[0] and even is None:
            gx = gx[(slice(None), slice(None),
                     *(slice(lo, lo + n) for (lo, _), n in zip(pads, x_shape[2:], strict=True)))]
        if len(x_shape) in (4, 5):
            fmt = self._format(len(x_shape))
            gx = gx.contiguous(memory_format=fmt) if mask[0] else gx
            gw = gw.contiguous(memory_format=fmt) if mask[1] else gw
        return gx, gw

    def matmul_bias(self, x: Any, w: Any, bias: Any) -> Any:
        """``x @ w + bias`` by ``addmm``: the bias is the product's starting value."""
        return self.torch.addmm(bias, x, w)

    def _padded(self, x: Any, pads: Sequence[tuple[int, int]], value: float = 0,
                uneven: bool = False) -> tuple[Any, list[int]]:
        """``x`` and the padding torch's kernels then take: ``pads`` where even (torch pads
        symmetrically) unless ``uneven``, else none after padding ``x`` by hand."""
        even = None if uneven else _even(pads)
        if even is not None:
            return x, even
        return self.pad(x, [(0, 0), (0, 0), *pads], value), [0] * len(pads)

    def _format(self, ndim: int) -> Any:
        t = self.torch
        return {4: t.channels_last, 5: t.channels_last_3d}.get(ndim, t.contiguous_format)

    def max_pool(self, x: Any, kernel: Sequence[int], strides: Sequence[int],
                 dilations: Sequence[int], pads: Sequence[tuple[int, int]]
                 ) -> tuple[Any, Any]:
        """torch's max pooling of ``x`` (N, C, *spatial), uneven padding done by hand; with the
        maxima's places and ``x``'s version for :meth:`max_pool_backward` (None where padded
        by hand)."""
        wide = any(2 * lo > k for (lo, _), k in zip(pads, kernel, strict=True))  # torch refuses
        padded, padding = self._padded(x, pads, neutral_max(x.dtype), uneven=wide)
        y, where = self._pooling(len(kernel))(padded, list(kernel), list(strides), padding,
                                              list(dilations), return_indices=True)
        return y, None if padded is not x else (where, _version(x))

    def max_pool_backward(self, g: Any, x: Any, saved: Any, kernel: Sequence[int],
                          strides: Sequence[int], dilations: Sequence[int],
                          pads: Sequence[tuple[int, int]]) -> Any | None:
        """The gradient of :meth:`max_pool` for ``x`` by torch's kernel, at the places
        ``saved`` (found again where none were or ``x`` was written since; an inference
        tensor has no version, and a routine writes none in place between the two); ``None``
        for a padding torch does not take."""
        pad = _even(pads)
        if pad is None or any(2 * p > k for p, k in zip(pad, kernel, strict=True)):
            return None
        geometry = [list(kernel), list(strides), pad, list(dilations)]
        if saved is None or saved[1] != _version(x):
            saved = (self._pooling(len(kernel))(x, *geometry, return_indices=True)[1],)
        t, where = self.torch, saved[0]
        if len(kernel) == 1:  # as a 2-D pooling over a size-1 axis
            x, g, where = x.unsqueeze(-2), g.unsqueeze(-2), where.unsqueeze(-2)
            geometry = [[1 if i != 2 else 0, *v] for i, v in enumerate(geometry)]
        back = t.ops.aten.max_pool3d_with_indices_backward if len(kernel) == 3 else \
            t.ops.aten.max_pool2d_with_indices_backward
        gx = back(g, x, *geometry, False, where)
        return gx.squeeze(-2) if len(kernel) == 1 else gx

    def _pooling(self, n: int) -> Callable[..., Any]:
        F = self.torch.nn.functional
        return (F.max_pool1d, F.max_pool2d, F.max_pool3d)[n - 1]

    def conv_accepts(self, x: Any, w: Any) -> bool:
        """Floating operands of one dtype on one device, with cells (torch refuses no windows)."""
        return x.dtype == w.dtype and x.dtype.is_floating_point and x.device == w.device and \
            x.numel() > 0

    def transpose(self, x: Any, perm: Sequence[int]) -> Any:
        return x.permute(*perm)

    def flatten(self, xs: Sequence[Any]) -> Any:
        # one call (DistributedDataParallel's; private, so the public way is the fallback)
        fn = getattr(self.torch._C._nn, "flatten_dense_tensors", None)
        return fn(list(xs)) if fn is not None else self.torch.cat([x.reshape(-1) for x in xs])

    def splitter(self, shapes: Sequence[tuple[int, ...]]) -> Callable[[Any], list[Any]]:
        # one call makes every view (2.5x faster); templates on the meta device hold no memory
        unflatten = getattr(self.torch._C._nn, "unflatten_dense_tensors", None)
        if unflatten is None:
            return super().splitter(shapes)
        templates = [self.torch.empty(shape, device="meta") for shape in shapes]
        return lambda flat: unflatten(flat, templates)

    def fused_update(self, rule: str, hyper: dict[str, Any],
                     shapes: Sequence[tuple[int, ...]]) -> Callable[..., Any] | None:
        """torch's fused optimizer kernels (one pass, where tensig's code takes ten) on copies
        of the parameters and state, each its own allocation as a loaded array is (a BLAS
        may round by alignment, so a view into one flat copy could resume otherwise).  Their
        arithmetic is ``torch.optim``'s (equal to tensig's up to rounding).  Declines mixed
        or non-float dtypes; a kernel missing for the device declines for good."""
        t = self.torch
        name = {"sgd": "_fused_sgd_", "adam": "_fused_adamw_" if hyper.get("decoupled")
                else "_fused_adam_"}.get(rule)
        kernel = getattr(t, name, None) if name is not None else None
        if kernel is None:
            return None
        if rule == "adam":
            b1, b2 = hyper["betas"]
            options = {"beta1": b1, "beta2": b2, "weight_decay": hyper["weight_decay"],
                       "eps": hyper["eps"], "amsgrad": False, "maximize": False}
        else:  # the momentum buffer starts at zero, so the first step needs no special case
            options = {"weight_decay": hyper["weight_decay"], "momentum": hyper["momentum"],
                       "nesterov": hyper["nesterov"], "dampening": 0.0, "maximize": False,
                       "is_first_step": False}
        broken: list[bool] = []  # set once the kernel refused to run here
        clone = getattr(t, "_foreach_clone", None) or (lambda xs: [x.clone() for x in xs])
        contiguous = t.Tensor.is_contiguous

        def dense(xs: list[Any]) -> list[Any]:  # the kernels read any array as contiguous
            return xs if all(map(contiguous, xs)) else [x.contiguous() for x in xs]

        def update(params: list[Any], grads: list[Any], state: list[list[Any]], step: int,
                   lr: float) -> tuple[list[Any], list[list[Any]]] | None:
            dtypes = {x.dtype for xs in (params, grads, *state) for x in xs}
            if broken or len(dtypes) != 1 or not params[0].dtype.is_floating_point:
                return None
            n = len(params)  # one clone of all roles: each call costs more than its copies
            new = clone([x for xs in (params, *state) for x in dense(xs)])
            p, g, kept = new[:n], dense(grads), [new[i:i + n] for i in range(n, len(new), n)]
            try:
                if rule == "adam":
                    steps = t.full((), float(step), dtype=t.float32, device=p[0].device)
                    kernel(p, g, kept[0], kept[1], [], [steps] * len(p), lr=lr, **options)
                else:  # the momentum buffers, if any
                    kernel(p, g, kept[0] if kept else [], lr=lr, **options)
            except (RuntimeError, NotImplementedError):  # not built for this device
                broken.append(True)
                return None
            return p, kept

        return update

    def where(self, mask: Any, a: Any, b: Any) -> Any:
        """``torch.where``; NumPy operands become tensors, scalars stay (keeping the dtype)."""
        a, b = (v if isinstance(v, int | float) else self.asarray(v) for v in (a, b))
        return self.torch.where(self.asarray(mask), a, b)

    # -- the rank layer -------------------------------------------------------------------------
    def asarray(self, x: Any, like: Any = None, device: Any = None) -> Any:
        if isinstance(x, self.torch.Tensor):
            return x if device is None else x.to(device)
        return self.torch.as_tensor(to_numpy(x), device=device if device is not None
                                    else getattr(like, "device", None))

    def to_numpy(self, x: Any) -> Any:
        return x.detach().cpu().numpy()

    def concat(self, xs: Sequence[Any], axis: int) -> Any:
        return self.torch.cat([self.asarray(x) for x in xs], dim=axis)  # it promotes dtypes

    def take_along(self, x: Any, index: Any, axis: int) -> Any:
        return self.torch.take_along_dim(x, index, dim=axis)

    def result_dtype(self, xs: Sequence[Any]) -> Any:
        if not xs:
            return self.torch.get_default_dtype()
        t = self.torch
        return functools.reduce(t.promote_types, [x.dtype if isinstance(x, t.Tensor)
                                                  else self.asarray(x).dtype for x in xs])

    # -- padded batches (tensig.execution.padding) ----------------------------------------------
    def astype(self, x: Any, dtype: Any) -> Any:
        return x.to(dtype)

    def as_dtype(self, dtype: Any) -> Any:
        return getattr(self.torch, dtype) if isinstance(dtype, str) else dtype

    def is_bool(self, dtype: Any) -> bool:
        return bool(dtype == self.torch.bool)

    def is_float(self, dtype: Any) -> bool:
        return bool(dtype.is_floating_point)

    def default_float(self) -> Any:
        return self.torch.get_default_dtype()

    def max_along(self, x: Any, axis: int | tuple[int, ...]) -> Any:
        return self.torch.amax(x, dim=axis)

    def pad_rows(self, seqs: Sequence[Any], mask: Any, on: Any, trailing: tuple[int, ...],
                 value: Any) -> Any:
        """``masked_scatter_``: 1.5x faster than ``pad_sequence`` on 10,000 rows."""
        flat = self.torch.cat(list(seqs))
        out = self.full((*mask.shape, *trailing), value, like=flat)
        return out.masked_scatter_(on.reshape(on.shape + (1,) * len(trailing)), flat)

    # -- the IR's primitives (tensig.execution.ir) ---------------------------------------------
    def on_host(self, x: Any) -> bool:
        return bool(x.device.type == "cpu")

    def relu(self, v: Any) -> Any:
        return self.torch.relu(v)

    def relu_backward(self, a: Any, g: Any) -> Any:
        if not (hasattr(a, "shape") and hasattr(g, "shape")):
            return None
        return self.torch.ops.aten.threshold_backward(g, a, 0)  # it broadcasts

    def gelu(self, v: Any) -> Any:
        """On the CPU as ``v sigmoid(2z)`` (``(1 + tanh z) / 2`` is ``sigmoid(2z)``) in place:
        torch's CPU tanh is slow (2.4 ms for the GPT's 2048x256, this 1.6 ms)."""
        if not hasattr(v, "shape"):
            return super().gelu(v)
        if v.device.type != "cpu" or not v.dtype.is_floating_point or v.requires_grad:
            return self.torch.nn.functional.gelu(v, approximate="tanh")
        t = v * v
        t.mul_(2 * GELU_C * GELU_K).add_(2 * GELU_C).mul_(v).sigmoid_()
        return t.mul_(v)

    def gelu_backward(self, a: Any, g: Any) -> Any:
        if not (hasattr(a, "shape") and hasattr(g, "shape")):
            return super().gelu_backward(a, g)
        return self.torch.ops.aten.gelu_backward(g, a, approximate="tanh")

    def softmax(self, x: Any, axis: int) -> Any:
        return self.torch.softmax(x, axis)

    def softmax_backward(self, y: Any, g: Any, axis: int) -> Any:
        return self.torch._softmax_backward_data(g, y, axis, y.dtype)

    def log_softmax(self, x: Any, axis: int) -> Any:
        return self.torch.log_softmax(x, axis)

    def log_softmax_backward(self, y: Any, g: Any, axis: int) -> Any:
        return self.torch._log_softmax_backward_data(g, y, axis, y.dtype)

    def normalize(self, x: Any, axes: tuple[int, ...], eps: float) -> tuple[Any, Any, Any]:
        rows = self._rows(x, None, None, axes)
        if rows is None:
            return super().normalize(x, axes, eps)
        return self.torch.ops.aten.native_layer_norm(x, rows, None, None, eps)  # y, mean, rstd

    def normalize_backward(self, x: Any, y: Any, mean: Any, rstd: Any, g: Any,
                           axes: tuple[int, ...], eps: float) -> Any:
        rows = self._rows(x, None, None, axes)
        if rows is None or x.shape != g.shape:
            return super().normalize_backward(x, y, mean, rstd, g, axes, eps)
        return self.torch.ops.aten.native_layer_norm_backward(  # the kernel: a third less
            g, x, rows, mean, rstd, None, None, [True, False, False])[0]

    def layer_norm(self, x: Any, scale: Any, shift: Any, axes: tuple[int, ...], eps: float
                   ) -> tuple[Any, ...]:
        """``native_layer_norm`` with its weight and bias: the affine step in the kernel."""
        rows = self._rows(x, scale, shift, axes)
        if rows is None:
            return super().layer_norm(x, scale, shift, axes, eps)
        return tuple(self.torch.ops.aten.native_layer_norm(
            x, rows, scale.reshape(rows), shift.reshape(rows), eps))

    def layer_norm_backward(self, g: Any, x: Any, saved: tuple[Any, ...], scale: Any,
                            shift: Any, axes: tuple[int, ...], eps: float, dx: bool
                            ) -> tuple[Any, Any, Any]:
        """``native_layer_norm_backward``: the three gradients in one kernel."""
        rows = self._rows(x, scale, shift, axes)
        if rows is None or len(saved) != 3 or g.shape != x.shape:
            return super().layer_norm_backward(g, x, saved, scale, shift, axes, eps, dx)
        gx, gs, gb = self.torch.ops.aten.native_layer_norm_backward(
            g, x, rows, saved[1], saved[2], scale.reshape(rows), shift.reshape(rows),
            [dx, True, True])
        return gx, gs.reshape(scale.shape), gb.reshape(shift.shape)

    def _rows(self, x: Any, scale: Any, shift: Any, axes: tuple[int, ...]) -> list[int] | None:
        """The normalised shape where torch's layer-norm kernels take these arrays, else None."""
        if not axes or axes != tuple(range(x.dim() - len(axes), x.dim())) or \
                not x.dtype.is_floating_point or any(
                    t is not None and (t.dtype != x.dtype or t.device != x.device)
                    for t in (scale, shift)):
            return None
        return list(x.shape[axes[0]:])

    def attention(self, q: Any, k: Any, v: Any, mask: Any, causal: bool, scale: float
                  ) -> tuple[Any, Any]:
        """torch's fused CPU flash attention on views; elsewhere the base class's blocked math."""
        kernels = self._attention_kernels(q, v, mask)
        if kernels is None:
            return super().attention(q, k, v, mask, causal, scale)
        out, lse = kernels[0](_heads4(q), _heads4(k), _heads4(v), 0.0, causal,
                              attn_mask=_mask4(mask, q), scale=scale)
        return (out.transpose(1, 2).reshape(q.shape[:-1] + v.shape[-1:]),
                lse.transpose(1, 2).reshape(q.shape[:-1]))

    def attention_backward(self, g: Any, q: Any, k: Any, v: Any, out: Any, lse: Any,
                           mask: Any, causal: bool, scale: float) -> tuple[Any, Any, Any]:
        kernels = self._attention_kernels(q, v, mask)
        if kernels is None:
            return super().attention_backward(g, q, k, v, out, lse, mask, causal, scale)
        lse3 = lse.reshape((-1, *lse.shape[-2:])).transpose(1, 2)
        grads = kernels[1](_heads4(g), _heads4(q), _heads4(k), _heads4(v), _heads4(out), lse3,
                           0.0, causal, attn_mask=_mask4(mask, q), scale=scale)
        dq, dk, dv = (d.transpose(1, 2).reshape(x.shape) for d, x in zip(grads, (q, k, v),
                                                                         strict=True))
        return dq, dk, dv

    def into(self, name: str, a: Any, *others: Any) -> Any:
        return getattr(self.torch, name)(a, *others, out=a)

    def cross_entropy(self, logits: Any, ids: Any, ignore: int) -> tuple[Any, Any, Any]:
        """``log_softmax`` and ``nll_loss`` as ``F.cross_entropy`` runs them, on the CPU only
        (an id out of range would stop an accelerator)."""
        if logits.device.type != "cpu" or not logits.dtype.is_floating_point:
            return super().cross_entropy(logits, ids, ignore)
        logp = self.torch.log_softmax(logits.reshape(-1, logits.shape[-1]), 1)
        flat = ids.reshape(-1).long()
        loss, count = self.torch.ops.aten.nll_loss_forward(logp, flat, None, 1, ignore)
        return loss, logp, count

    def cross_entropy_backward(self, g: Any, logp: Any, ids: Any, count: Any, ignore: int
                               ) -> Any:
        """``nll_loss_backward`` and ``_log_softmax_backward_data``, as torch's autograd."""
        if logp.device.type != "cpu":  # the generic kernel's record
            return super().cross_entropy_backward(g, logp, ids, count, ignore)
        flat = ids.reshape(-1).long()
        d = self.torch.ops.aten.nll_loss_backward(g.reshape(()), logp, flat, None, 1, ignore,
                                                  count)
        return self.torch._log_softmax_backward_data(d, logp, 1, logp.dtype)

    def _attention_kernels(self, q: Any, v: Any, mask: Any) -> tuple[Any, Any] | None:
        """torch's CPU flash-attention kernels when they take these arrays, else None."""
        if q.device.type != "cpu" or q.dtype not in (self.torch.float32, self.torch.float64) \
                or v.shape[-1] != q.shape[-1] or (mask is not None and mask.dtype != q.dtype):
            return None
        aten = self.torch.ops.aten
        return (aten._scaled_dot_product_flash_attention_for_cpu,
                aten._scaled_dot_product_flash_attention_for_cpu_backward)

    def batch_norm(self, x: Any, mean: Any, var: Any, scale: Any, shift: Any, training: bool,
                   momentum: float, eps: float) -> tuple[Any, ...]:
        """torch's kernel; the functional form gives the moved running statistics as new
        tensors (a routine never writes into an array it did not make: a refused step puts the
        old ones back), 10 us faster than two copies and the in-place kernel."""
        aten = self.torch.ops.aten
        if not training:
            y = aten.native_batch_norm(x, scale, shift, mean, var, False, momentum, eps)[0]
            return y, mean, self.torch.rsqrt(var + eps), mean, var
        if mean is not None:
            return tuple(aten._native_batch_norm_legit_functional(x, scale, shift, mean, var,
                                                                   True, momentum, eps))
        y, used, rstd = aten.native_batch_norm(x, scale, shift, None, None, True, momentum, eps)
        return y, used, rstd, None, None

    def batch_norm_backward(self, g: Any, x: Any, mean: Any, var: Any, scale: Any,
                            saved_mean: Any, saved_rstd: Any, training: bool, eps: float,
                            wanted: tuple[bool, bool]) -> tuple[Any, ...]:
        return tuple(self.torch.ops.aten.native_batch_norm_backward(
            g, x, scale, mean, var, saved_mean, saved_rstd, training, eps,
            [wanted[0], wanted[1], wanted[1]]))

    def float_mask(self, op: str, x: Any, y: Any, shape: tuple[int, ...], like: Any) -> Any:
        """On the CPU only (elsewhere a boolean mask is as fast)."""
        if not (like.dtype.is_floating_point and like.device.type == "cpu"):
            return None
        out = self.torch.empty(shape, dtype=like.dtype)
        return getattr(self.torch, op)(x, y, out=out)

    def take_rows(self, table: Any, ids: Any, shape: tuple[int, ...]) -> Any:
        flat = table.reshape(table.shape[0], -1)
        return self.torch.nn.functional.embedding(ids, flat).reshape(shape)

    def _add_rows(self, n: int, ids: Any, rows: Any) -> Any:
        acc = self.full((n, rows.shape[1]), 0, like=rows)
        return acc.index_add_(0, ids, rows)


@functools.lru_cache(maxsize=64)
def _template(shape: tuple[int, ...], dtype: Any, device: Any, fmt: Any) -> Any:
    """An operand whose values a gradient does not read, made once (bounded: each holds memory)."""
    import torch

    return torch.empty(shape, dtype=dtype, device=device, memory_format=fmt)


def _version(x: Any) -> int | None:
    """``x``'s count of in-place writes, or None for an inference tensor (which has none)."""
    return None if x.is_inference() else int(x._version)


def _even(pads: Sequence[tuple[int, int]]) -> list[int] | None:
    """The padding torch's kernels take for ``pads``, or None where they are uneven."""
    return [lo for lo, _ in pads] if all(lo == hi for lo, hi in pads) else None


def _heads4(x: Any) -> Any:
    """tensig's ``(..., T, H, E)`` as the ``(N, H, T, E)`` torch's kernels take (views)."""
    return x.reshape((-1, *x.shape[-3:])).transpose(1, 2)


def _mask4(mask: Any, q: Any) -> Any:
    """A mask broadcasting onto ``(..., Tq, H, Tk)`` as one onto ``(N, H, Tq, Tk)``."""
    if mask is None:
        return None
    m = mask.transpose(-3, -2)
    lead, cell = tuple(m.shape[:-3]), tuple(m.shape[-3:])
    if all(n == 1 for n in lead):
        return m.reshape((1, *cell))
    return m.expand(tuple(q.shape[:-3]) + cell).reshape((-1, *cell))
