"""Neural-network blocks written in the notation (OCANNL's ``nn_blocks``; the README's
"Blocks" section lists them).

Each block is a few graph operations: reductions are einsum specs (:data:`LAST`, :data:`ROW`,
... name what a block reduces), gradients the operations' own backward code.  Sizes a block needs
(``1/D`` in a mean) are read from the solved shapes at initialisation, never written in.

>>> import numpy as np
>>> from tensig import graph as G
>>> from tensig import blocks as B
>>> with G.new_graph():
...     x = G.leaf("x", np.arange(6, dtype=np.float32).reshape(2, 3), batch=1)
...     p = B.softmax(x)
...     np.round(G.Model(p).run().astype(np.float64), 3).tolist()
[[0.09, 0.245, 0.665], [0.09, 0.245, 0.665]]
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from tensig.core.errors import ShapeError
from tensig.core.projections import Iter
from tensig.core.shapes import Shape
from tensig.execution.ir import Code, Projections
from tensig.execution.ir import prim as _e
from tensig.model import graph as G
from tensig.model.graph import OpDef, Tensor
from tensig.model.tensor import _integer_result, _valued

__all__ = [
    "ALL", "CHANNEL", "LAST", "ROW", "batch_norm", "captured", "causal_mask", "cross_entropy",
    "dropout", "gelu", "layer_norm", "log_softmax", "mean", "merge_heads", "multi_head_attention",
    "rms_norm", "rotary", "silu", "softmax", "split_heads",
]

#: reduce the last output axis, keeping it as one cell, so the pointwise step back lines it up
#: with the axis it came from (``b | q, k``: over ``k``, never over ``q``)
LAST = "...|...->..., v => ...|...->..., 0"
#: reduce the whole output row (a row variable)
ROW = "...|..d.. => ...|"
#: reduce everything to one number
ALL = "...|...->... => |->0"
#: reduce the whole batch row and every output axis but the last (the channels): batch
#: normalisation's statistics, one per channel
CHANNEL = "..b..|..s.., c => |c"


def captured(fn: Callable[[], float], *, name: str = "captured") -> Tensor:
    """A number (a constant with no axes: it broadcasts into anything) whose value ``fn()`` is
    computed at initialisation, after the solve: how a block uses a size inference decides."""
    return _valued("const", name, Shape(), lambda: np.array(fn(), np.float32))


def mean(x: Tensor, spec: str = ROW) -> Tensor:
    """The mean over what ``spec`` reduces: its sum times ``1/D``, ``D`` the cells summed into
    each result cell."""
    total = G.einsum1(spec, x)
    return total * captured(lambda: int(total.shape.numel()) / int(x.shape.numel()), name="1/D")


def _shifted(x: Tensor, spec: str) -> Tensor:
    """``x`` minus its detached maximum over ``spec`` (OCANNL's softmax: the shift cancels in
    the value, so no gradient flows through it)."""
    return x - G.stop_gradient(G.einmax1(spec, x))


def softmax(x: Tensor, spec: str = LAST) -> Tensor:
    """``exp(x) / sum exp(x)`` over what ``spec`` reduces, on ``x`` minus its detached maximum.
    Over the last output axis (the default) one primitive and its gradient ``y (g - sum(g y))``
    another: far fewer full-size passes than any other ``spec``'s."""
    if spec == LAST:
        return G.apply(_SOFTMAX_LAST, x)
    e = _shifted(x, spec).exp()
    return e / G.einsum1(spec, e)


def _output_axes(t: Tensor, what: str, doing: str = "reduce") -> tuple[int, int]:
    """Where ``t``'s output row starts in memory and how many axes it has (a row-wise
    primitive's axes); none is a :class:`ShapeError`."""
    s = t.shape
    if not s.output:
        raise ShapeError(f"{what}: {t.name} has no output axis to {doing} (shape {s})")
    return len(s.batch), len(s.output)


def _record(g: G.Graph, name: str) -> Tensor:
    """A state tensor ``name`` holding a kernel's record of results
    (:data:`tensig.execution.ir.RECORDS`), each read by ``part``."""
    return Tensor("state", g.shapes.tensor(name, Shape(output=())), g, [name])


def _recorded(t: Tensor, record: Tensor, kernel: Any) -> Code:
    """``record =: kernel``, then ``t`` its first result."""
    code = Code().assign(record.val, kernel, logic="whole")
    return code.assign(t.val, _e("part", record.val, 0), logic="whole")


def _add_parts(code: Code, record: Tensor, into: tuple[Tensor, ...]) -> Code:
    """Result ``i`` of ``record`` added into the gradient of ``into[i]``, if it has one."""
    for i, x in enumerate(into):
        if x.differentiable:
            code.assign(x.grad, _e("part", record.val, i), accum="+", logic="whole")
    return code


def _row_op(name: str) -> OpDef:
    """Primitive ``name`` over the last output axis, its gradient ``name_grad`` of the value and
    the incoming gradient (softmax, log-softmax)."""

    def last(a: Tensor) -> int:  # the memory axis of a's last output axis: start + count - 1
        return sum(_output_axes(a, name)) - 1

    def forward(t: Tensor, a: Tensor) -> Code:
        return Code().assign(t.val, _e(name, a.val, last(a)), logic=t.projections)

    def backward(t: Tensor, a: Tensor) -> Code:
        return Code().assign(a.grad, _e(f"{name}_grad", t.val, t.grad, last(a)), accum="+",
                             logic=t.projections)

    return OpDef(name, ".", forward, backward, floats=True)


_SOFTMAX_LAST, _LOG_SOFTMAX_LAST = _row_op("softmax"), _row_op("log_softmax")


def log_softmax(x: Tensor, spec: str = LAST) -> Tensor:
    """``x - log sum exp(x)`` over what ``spec`` reduces, the detached maximum subtracted first;
    over the last output axis one primitive and its gradient another, as :func:`softmax`."""
    if spec == LAST:
        return G.apply(_LOG_SOFTMAX_LAST, x)
    z = _shifted(x, spec)
    return z - G.einsum1(spec, z.exp()).log()


def cross_entropy(logits: Tensor, targets: Tensor, *, ignore_index: int = -100) -> Tensor:
    """The mean cross-entropy of ``logits`` (``b | n``) against ``targets``, as
    ``torch.nn.functional.cross_entropy``: integer ``targets`` (``b |``) are class ids, averaged
    over the rows whose id is not ``ignore_index`` (none: NaN, as torch), one primitive forward
    and backward; float ``targets`` (``b | n``) are probabilities, averaged over all rows."""
    if targets.integer:
        return G.apply(_cross_entropy_ids(logits, int(ignore_index)), logits, targets)
    logp = log_softmax(logits)
    total = G.einsum1(ALL, targets * logp)
    rows = G.einsum1(LAST, logits)  # one cell per row: its size is the row count
    return total * captured(lambda: -1.0 / int(rows.shape.numel()), name="-1/N")


#: cross-entropy's operands: logits with the classes last, one id per row
_CROSS_ENTROPY = "..b..|->..o.., n; ..b..|->..o.. => |->0"


def _cross_entropy_ids(logits: Tensor, ignore: int) -> OpDef:
    """Cross-entropy against class ids as one operation: the loss with the log-probabilities
    and the count of ids (a record), the logits' gradient from them."""
    saved = _record(logits.graph, "cross_entropy.saved")

    def forward(t: Tensor, z: Tensor, ids: Tensor) -> Code:
        return _recorded(t, saved, _e("cross_entropy", z.val, ids.val, ignore))

    def backward(t: Tensor, z: Tensor, ids: Tensor) -> Code:
        return Code().assign(z.grad, _e("cross_entropy_grad", t.grad, ids.val, saved.val,
                                        ignore), accum="+", logic="whole")

    return OpDef("cross_entropy", _CROSS_ENTROPY, forward, backward, op="einsum",
                 integers=True)


def _learned(name: str, fill: float) -> Tensor:
    """A learned tensor of ``fill`` (a scale's ones, a shift's zeros), sized by its use."""
    return G.param(name, init=lambda shape, rng: np.full(shape, fill, np.float32))


def _affine(y: Tensor, name: str, shift: bool) -> Tensor:
    """``y * scale (+ shift)``, learned, the operations too in scope ``name``."""
    with G.scope(name):
        y = y * _learned("scale", 1.0)
        return y + _learned("shift", 0.0) if shift else y


def layer_norm(x: Tensor, spec: str = ROW, *, eps: float = 1e-5, name: str = "layer_norm",
               affine: bool = True) -> Tensor:
    """``(x - mean) / sqrt(var + eps)`` over what ``spec`` reduces (the whole output row by
    default), then a learned scale and shift (``affine``), as ``torch.nn.LayerNorm``.  Over the
    output row it is one operation (torch's ``native_layer_norm``, forward and backward)."""
    if spec == ROW and affine:
        with G.scope(name):
            learned = _learned("scale", 1.0), _learned("shift", 0.0)
        return G.apply(_affine_normalizer(x, float(eps), name), x, *learned, name=name)
    if spec == ROW:
        y = G.apply(_normalizer(x, float(eps)), x)
    else:
        c = x - mean(x, spec)
        y = c * (mean(c * c, spec) + eps).recip_sqrt()
    return _affine(y, name, shift=True) if affine else y


def _normalizer(x: Tensor, eps: float) -> OpDef:
    """Layer normalisation over the output row as one primitive and its gradient another, the
    forward's statistics kept for the backward in a record."""
    saved = _record(x.graph, "normalize.saved")

    def axes(a: Tensor) -> tuple[int, int]:
        return _output_axes(a, "layer_norm", "normalise")

    def forward(t: Tensor, a: Tensor) -> Code:
        return _recorded(t, saved, _e("normalize", a.val, *axes(a), eps))

    def backward(t: Tensor, a: Tensor) -> Code:
        return Code().assign(a.grad, _e("normalize_grad", a.val, saved.val, t.grad, *axes(a),
                                        eps), accum="+", logic="whole")

    return OpDef("normalize", ".", forward, backward, floats=True)


def _affine_normalizer(x: Tensor, eps: float, name: str) -> OpDef:
    """:func:`_normalizer` with the learned scale and shift (sized by this pointwise use) as
    operands: the value, then the three gradients, each one kernel call (records)."""
    saved, grads = (_record(x.graph, f"{name}.{w}") for w in ("saved", "grads"))

    def axes(a: Tensor) -> tuple[int, ...]:
        start, n = _output_axes(a, "layer_norm", "normalise")
        return tuple(range(start, start + n))

    def forward(t: Tensor, a: Tensor, scale: Tensor, shift: Tensor) -> Code:
        return _recorded(t, saved, _e("layer_norm", a.val, scale.val, shift.val, axes(a), eps))

    def backward(t: Tensor, a: Tensor, scale: Tensor, shift: Tensor) -> Code:
        code = Code().assign(grads.val, _e("layer_norm_grad", t.grad, a.val, saved.val,
                                           scale.val, shift.val, axes(a), eps,
                                           a.differentiable), logic="whole")
        return _add_parts(code, grads, (a, scale, shift))

    return OpDef("layer_norm", ".", forward, backward, floats=True)


def rms_norm(x: Tensor, spec: str = ROW, *, eps: float = 1e-6, name: str = "rms_norm",
             shift: bool = False) -> Tensor:
    """``x / sqrt(mean(x^2) + eps)`` over what ``spec`` reduces, times a learned scale (and a
    learned shift with ``shift=True``), as ``torch.nn.RMSNorm``."""
    y = x * (mean(x * x, spec) + eps).recip_sqrt()
    return _affine(y, name, shift)


def _buffer(g: G.Graph, node: Any, name: str, fill: float,
            dtype: type[np.floating[Any]] = np.float32, kind: str = "buffer") -> Tensor:
    """A buffer (unlearned state kept from run to run and checkpointed: running statistics,
    dropout's counter), or a parameter (``kind="param"``) on a given node, filled with ``fill``."""
    t = Tensor(kind, node, g, [name], differentiable=kind == "param")
    t.init = lambda shape: np.full(shape, fill, dtype)
    return t


def batch_norm(x: Tensor, spec: str = CHANNEL, *, momentum: float = 0.1, eps: float = 1e-5,
               name: str = "batch_norm", affine: bool = True,
               track_running_stats: bool = True) -> Tensor:
    """``(x - mean) / sqrt(var + eps) * scale + shift`` with per-channel mean and biased
    variance over what ``spec`` reduces (:data:`CHANNEL`: channels last, ``b | h, w, c``), as
    torch's ``BatchNorm1d/2d/3d``; ``spec`` keeps the channels (any order), reduces the rest.

    In training mode the statistics are the batch's, and each run moves the buffers
    ``name.running_mean`` (zeros) and ``name.running_var`` (ones; unbiased by ``N / (N - 1)``)
    toward them by ``momentum``, as torch does; in eval mode the running statistics normalise
    and stay.  ``track_running_stats=False`` always uses the batch's; ``affine`` learns
    ``scale`` and ``shift`` per channel.  One kernel call forward and one backward (torch's
    ``native_batch_norm``); training needs two values per channel, as torch's, checked when the
    code is built.
    """
    if not 0.0 <= momentum <= 1.0:
        raise ValueError(f"batch_norm: momentum is a number in [0, 1], not {momentum!r}")
    _integer_result("batch_norm", (x,), floats=True)  # apply's check, before any buffer
    g = x.graph
    channel = g.shapes.apply(spec, x.node, name=f"{name}.channel")  # one cell per channel

    with G.scope(name):
        stats = [_buffer(g, channel, "running_mean", 0.0),
                 _buffer(g, channel, "running_var", 1.0)] if track_running_stats else []
        learned = [_buffer(g, channel, k, fill, kind="param")
                   for k, fill in (("scale", 1.0), ("shift", 0.0))] if affine else []
        saved = [Tensor("state", channel, g, [w])  # what normalised
                 for w in ("saved_mean", "saved_rstd")]
        pack, grads = (_record(g, w) for w in ("pack", "grad_pack"))  # several results

    def kept(a: Tensor) -> tuple[int, ...]:
        """``a``'s channel axes in the channels' memory order, after checking two values or more
        per channel."""
        if int(a.shape.numel()) // int(saved[0].shape.numel()) < 2:
            raise ValueError(f"batch_norm {name!r}: one value per channel; training "
                             "statistics need at least two (a larger batch)")
        return _channel_axes(spec, a, saved[0], name)

    def vals(ts: list[Tensor]) -> list[Any]:
        return [t.val for t in ts] if ts else [None, None]

    def forward(t: Tensor, a: Tensor, *rest: Tensor) -> Code:
        code = Code().assign(pack.val, _e("batch_norm", a.val, *vals(stats), *vals(learned),
                                          kept(a), momentum, eps), logic="whole")
        for i, out in enumerate((t, *saved, *stats)):
            code.assign(out.val, _e("part", pack.val, i), logic="whole")
        return code

    def backward(t: Tensor, a: Tensor, *rest: Tensor) -> Code:
        wanted = (a.differentiable, bool(learned))
        code = Code().assign(grads.val, _e(
            "batch_norm_grad", t.grad, a.val, *vals(stats), vals(learned)[0],
            *(s.val for s in saved), kept(a), eps, wanted), logic="whole")
        return _add_parts(code, grads, (a, *learned))  # learned: always differentiable

    op = OpDef("batch_norm", ".", forward, backward)
    node = g.shapes.pointwise(x.node, name="batch_norm")
    diff = x.differentiable or bool(learned)
    return Tensor("op", node, g, ["batch_norm"], op, (x, *stats, *learned), diff)


def _channel_axes(spec: str, x: Tensor, channel: Tensor, name: str) -> tuple[int, ...]:
    """The memory axes of ``x`` that ``spec`` keeps in ``channel``, in ``channel``'s memory
    order: what batch normalisation's kernel reads as columns."""
    proj = Projections(spec, channel, (x,))
    reads, keeps = proj.uses(x), proj.uses(channel)
    at = {u.index.id: i for i, u in enumerate(reads) if isinstance(u.index, Iter)}
    ids = [u.index.id if isinstance(u.index, Iter) else None for u in keeps]
    if len(at) != len(reads) or not all(i in at for i in ids):
        raise ShapeError(f"batch_norm {name!r}: the spec {spec!r} must keep some of "
                         f"{x.name}'s axes (the channels) and reduce the others, each axis "
                         f"read once (no fixed index, window or diagonal)")
    return tuple(at[i] for i in ids if i is not None)


def gelu(x: Tensor) -> Tensor:
    """GELU, tanh form (torch's ``gelu(approximate="tanh")``; the exact one needs ``erf``, no
    primitive): one primitive with its own derivative (``x.gelu()``), not a dozen steps."""
    return G.apply(G.UNARY_OPS["gelu"], x)


def silu(x: Tensor) -> Tensor:
    """``x * sigmoid(x)``, the sigmoid as ``(1 + tanh(x/2)) / 2``: no ``exp`` to overflow, in
    the value or its gradient."""
    return x * ((x * 0.5).tanh() * 0.5 + 0.5)


def dropout(x: Tensor, p: float, *, seed: int = 0, name: str = "dropout") -> Tensor:
    """Zero each cell with probability ``p``, scale the rest by ``1/(1-p)``: a fresh mask each
    run from Philox keyed by ``(seed, name)`` at a counter (a buffer, checkpointed) the routine
    advances, so runs repeat from the seed, the same on NumPy and torch.  In eval mode the
    input passes unchanged."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout: p is a probability in [0, 1), not {p!r}")
    _integer_result("dropout", (x,), floats=True)  # apply's check, before any buffer
    g = x.graph
    with G.scope(name):
        counter = _buffer(g, g.shapes.tensor(f"{name}.counter", Shape(output=(1,))),
                          "counter", 0.0, np.float64)
        mask = Tensor("state", x.node, g, ["mask"])  # x's shape
    key = zlib.crc32(name.encode())

    def forward(t: Tensor, a: Tensor, ctr: Tensor, m: Tensor) -> Code:
        code = Code().assign(m.val, _e("keep_mask", a.val, ctr.val, float(p), seed, key),
                             logic="whole")
        code.assign(t.val, _e("mul", a.val, m.val))
        return code.assign(ctr.val, 1.0, accum="+")

    def backward(t: Tensor, a: Tensor, ctr: Tensor, m: Tensor) -> Code:
        return Code().assign(a.grad, _e("mul", t.grad, m.val), accum="+")

    op = OpDef("dropout", ".", forward, backward)
    node = g.shapes.pointwise(x.node, name="dropout")
    return Tensor("op", node, g, ["dropout"], op, (x, counter, mask), x.differentiable)


def _sized_constant(x: Tensor, spec: str, name: str,
                    value: Callable[[tuple[int, ...]], np.ndarray]) -> Tensor:
    """A constant shaped as ``spec`` applied to ``x``, valued ``value(shape)`` at initialisation."""
    g = x.graph
    t = Tensor("const", g.shapes.apply(spec, x.node, name=name), g, [name])
    t.value_init = lambda: value(t.shape.int_dims).astype(np.float32)
    return t


def rotary(x: Tensor, *, base: float = 10000.0) -> Tensor:
    """Rotary position embedding of ``x`` (``..., t | h, e``): pair ``(j, j + E/2)`` of each
    head rotated by ``t * base^(-2j/E)`` at position ``t`` (GPT-NeoX's and Llama's half-split
    form), the tables sized from the solved shapes."""

    def angles(shape: tuple[int, ...]) -> np.ndarray:
        nt, ne = shape
        if ne % 2:
            raise ValueError(f"rotary: the head dimension is {ne}, not even")
        freq = base ** (-np.arange(0, ne, 2, dtype=np.float64) / ne)
        return np.outer(np.arange(nt), np.concatenate([freq, freq]))

    def swap(shape: tuple[int, ...]) -> np.ndarray:  # (e_out, f_in): (-x2, x1)
        half = shape[0] // 2
        m = np.zeros(shape)
        m[np.arange(half), np.arange(half) + half] = -1.0
        m[np.arange(half) + half, np.arange(half)] = 1.0
        return m

    cos = _sized_constant(x, "..., t | h, e => t | e", "rotary.cos",
                          lambda s: np.cos(angles(s)))
    sin = _sized_constant(x, "..., t | h, e => t | e", "rotary.sin",
                          lambda s: np.sin(angles(s)))
    half = _sized_constant(x, "..., t | h, e => | e -> e", "rotary.swap", swap)
    return x * cos + G.einsum("..., t | h, f; | f -> e => ..., t | h, e", x, half) * sin


def causal_mask(scores: Tensor) -> Tensor:
    """``-inf`` where a key comes after the query, else ``0``: a ``q | k`` constant sized from
    ``scores`` (``..., q | h, k``); ``multi_head_attention(mask="causal")`` needs none."""
    return _sized_constant(scores, "..., q | h, k => q | k", "causal",
                           lambda shape: np.triu(np.full(shape, -np.inf), 1))


def split_heads(x: Tensor, heads: int) -> Tensor:
    """``x``'s last output axis cut into ``heads`` heads (``..., t | d`` to ``..., t | h, e``, as
    torch's ``x.view(b, t, h, e)``): attention's queries, keys or values from a projection.
    One view, ``...|(h, e) => ...|h, e`` with ``h`` set; a ``heads`` not dividing ``d`` is a
    :class:`ShapeError`."""
    if isinstance(heads, bool) or not isinstance(heads, int | np.integer) or heads < 1:
        raise ValueError(f"split_heads: heads is a positive number, not {heads!r}")
    y, sizes = G.einsum1("...|(h, e) => ...|h, e", x, capture=["h"])
    sizes["h"].set_dim(int(heads))
    return y


def merge_heads(x: Tensor) -> Tensor:
    """The heads merged back (``..., t | h, e`` to ``..., t | d``, as torch's
    ``a.transpose(1, 2).reshape(b, t, d)``).  A merged axis has no label, so a labelled ``d``
    comes back unlabelled: project it through a ``d -> d`` parameter, as the GPT demo does."""
    return G.einsum1("...|h, e => ...|(h, e)", x)


#: attention's operands: queries and keys share the head size ``e``, values have ``f``;
#: positions the batch row's last axis, heads and head sizes the output row
_ATTENTION = "..., q | -> h, e; ..., k | -> h, e; ..., k | -> h, f"
#: the scores, which a mask (any rows) broadcasts onto
_SCORES = "..., q | -> h, e; ..., k | -> h, e => ..., q | -> h, k"


def multi_head_attention(q: Tensor, k: Tensor, v: Tensor, *, mask: Any = None) -> Tensor:
    """``softmax(q k^T / sqrt(E) + mask) v`` per head, as one primitive.

    ``q``, ``k``, ``v`` are ``..., t | h, e`` (``v``'s head size may differ; :func:`split_heads`
    makes them).  ``mask``: None, ``"causal"`` (query ``i`` sees keys ``j <= i``), or a tensor
    broadcast onto the ``..., q | h, k`` scores (``-inf`` hides a key; no gradient).  A query
    that sees no key gives 0, as torch's kernels do.  The library's fused kernel where it has
    one, else blocks of query rows (:meth:`tensig.backends.Backend.attention`): the scores are
    never stored, the backward recomputes them from each row's log-sum-exp.
    """
    causal = isinstance(mask, str)
    if causal and mask != "causal":
        raise ValueError(f"multi_head_attention: mask is None, 'causal' or a tensor, not "
                         f"{mask!r}")
    if causal or mask is None:
        return G.apply(_attention(q, causal, False), q, k, v)
    if not isinstance(mask, Tensor):
        raise TypeError(f"multi_head_attention: mask is None, 'causal' or a tensor, not "
                        f"{type(mask).__name__}")
    shapes = q.graph.shapes  # the mask broadcasts onto the scores, as scores + mask would
    shapes.pointwise(shapes.apply(_SCORES, q.node, k.node, name="scores"), mask.node,
                     name="masked")
    return G.apply(_attention(q, False, True), q, k, v, mask)


def _attention(q: Tensor, causal: bool, masked: bool) -> OpDef:
    """Attention as one operation: forward one kernel (a record of the result and each query
    row's log-sum-exp), backward another (the three gradients at once)."""
    saved, grads = (_record(q.graph, f"attention.{w}") for w in ("saved", "grads"))

    def options(t: Tensor, q: Tensor, m: tuple[Tensor, ...]) -> tuple[Any, ...]:
        scale = 1.0 / math.sqrt(int(q.shape.output[-1]))
        mask = (m[0].val, _mask_view(m[0], t)) if m else (None, None)
        return (*mask, causal, scale)

    def forward(t: Tensor, q: Tensor, k: Tensor, v: Tensor, *m: Tensor) -> Code:
        return _recorded(t, saved, _e("attention", q.val, k.val, v.val, *options(t, q, m)))

    def backward(t: Tensor, q: Tensor, k: Tensor, v: Tensor, *m: Tensor) -> Code:
        code = Code().assign(grads.val, _e("attention_grad", t.grad, q.val, k.val, v.val,
                                           saved.val, *options(t, q, m)), logic="whole")
        return _add_parts(code, grads, (q, k, v))

    spec = _ATTENTION + ("; ..m.. | -> ..n.." if masked else "") + " => ..., q | -> h, f"
    return OpDef("attention", spec, forward, backward, op="einsum", floats=True)


def _mask_view(mask: Tensor, t: Tensor) -> tuple[int, ...]:
    """The shape laying ``mask``'s array out as the scores ``(..., Tq, H, Tk)``, size-1 where it
    broadcasts: each row right-aligned on the scores', as a pointwise operation aligns them."""
    batch, out = (tuple(int(d) for d in row) for row in (mask.shape.batch, mask.shape.output))
    if len(batch) > len(t.shape.batch) or len(out) > 2 or mask.shape.input:
        raise ShapeError(f"multi_head_attention: the mask {mask.name} ({mask.shape}) does not "
                         f"broadcast onto the scores (batch row {t.shape.batch}, output row "
                         "h, k)")
    return (1,) * (len(t.shape.batch) - len(batch)) + batch + (1,) * (2 - len(out)) + out
