"""Neural-network blocks written in the notation (OCANNL's ``nn_blocks``; the README's
"Blocks" section lists them).

Each block is a few graph operations (:mod:`tensig.graph`): reductions are einsum specs
(:data:`LAST`, :data:`ROW`, ... name what a block reduces), the broadcasting back is
pointwise, gradients come from the operations' own backward code.  Sizes a block needs
(``1/D`` in a mean, ``1/sqrt(E)`` in attention) are read from the solved shapes when the model
is initialised, never written in: :func:`captured`.

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
    "ALL",
    "CHANNEL",
    "LAST",
    "ROW",
    "batch_norm",
    "captured",
    "causal_mask",
    "cross_entropy",
    "dropout",
    "gelu",
    "layer_norm",
    "log_softmax",
    "mean",
    "merge_heads",
    "multi_head_attention",
    "rms_norm",
    "rotary",
    "silu",
    "softmax",
    "split_heads",
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
    """A number (a constant with no axes: it broadcasts into anything without adding one)
    whose value ``fn()`` is computed when a model is initialised, after shapes are solved:
    how a block uses a size (``1/D``) that inference decides."""
    return _valued("const", name, Shape(), lambda: np.array(fn(), np.float32))


def mean(x: Tensor, spec: str = ROW) -> Tensor:
    """The mean over what ``spec`` reduces: its sum times ``1/D``, ``D`` the number of cells
    summed into each result cell (from the solved shapes)."""
    total = G.einsum1(spec, x)
    return total * captured(lambda: int(total.shape.numel()) / int(x.shape.numel()), name="1/D")


def _shifted(x: Tensor, spec: str) -> Tensor:
    """``x`` minus its maximum over ``spec``, the maximum detached (OCANNL's softmax: the
    shift cancels in the value, so no gradient flows through it)."""
    return x - G.stop_gradient(G.einmax1(spec, x))


def softmax(x: Tensor, spec: str = LAST) -> Tensor:
    """``exp(x) / sum exp(x)`` over what ``spec`` reduces (the last output axis by default),
    computed on ``x`` minus its detached maximum.  Over the last output axis it is one
    primitive (the library's kernel) and its gradient ``y (g - sum(g y))`` another: far
    fewer full-size passes than the primitives any other ``spec`` is built from."""
    if spec == LAST:
        return G.apply(_SOFTMAX_LAST, x)
    e = _shifted(x, spec).exp()
    return e / G.einsum1(spec, e)


def _output_axes(t: Tensor, what: str, doing: str = "reduce") -> tuple[int, int]:
    """Where ``t``'s output row starts in memory (memory order: batch, output, input) and how
    many axes it has: a row-wise primitive's axes.  No output axis is a :class:`ShapeError`."""
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
    """The primitive ``name`` over the last output axis, its gradient ``name_grad`` of the
    value and the incoming gradient (softmax, log-softmax)."""

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
    """``x - log sum exp(x)`` over what ``spec`` reduces, with the detached maximum
    subtracted first.  Over the last output axis one primitive and its gradient
    ``g - exp(y) sum(g)`` another, as :func:`softmax`."""
    if spec == LAST:
        return G.apply(_LOG_SOFTMAX_LAST, x)
    z = _shifted(x, spec)
    return z - G.einsum1(spec, z.exp()).log()


def cross_entropy(logits: Tensor, targets: Tensor, *, ignore_index: int = -100) -> Tensor:
    """The mean cross-entropy of ``logits`` (``b | n``: classes on the last output axis)
    against ``targets``, as ``torch.nn.functional.cross_entropy`` computes it.

    Integer ``targets`` (``b |``) are class ids: the mean is over the rows whose id is not
    ``ignore_index`` (no such row: NaN, as torch gives).  Float ``targets`` (``b | n``) are
    probabilities: the mean is over all rows.

    With class ids it is one primitive, forward and backward (torch's ``log_softmax`` with
    ``nll_loss`` and their backward kernels, as ``F.cross_entropy``).
    """
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
    and the count of ids (a record, :data:`tensig.execution.ir.RECORDS`), the logits'
    gradient from them."""
    saved = _record(logits.graph, "cross_entropy.saved")

    def forward(t: Tensor, z: Tensor, ids: Tensor) -> Code:
        return _recorded(t, saved, _e("cross_entropy", z.val, ids.val, ignore))

    def backward(t: Tensor, z: Tensor, ids: Tensor) -> Code:
        return Code().assign(z.grad, _e("cross_entropy_grad", t.grad, ids.val, saved.val,
                                        ignore), accum="+", logic="whole")

    return OpDef("cross_entropy", _CROSS_ENTROPY, forward, backward, op="einsum",
                 integers=True)


def _affine(y: Tensor, name: str, shift: bool) -> Tensor:
    """``y * scale (+ shift)`` with learned ``scale`` (ones) and ``shift`` (zeros) whose
    shapes come from their use (the normalised axes)."""
    with G.scope(name):
        y = y * G.param("scale", init=lambda shape, rng: np.ones(shape, np.float32))
        if shift:
            y = y + G.param("shift", init=lambda shape, rng: np.zeros(shape, np.float32))
    return y


def layer_norm(x: Tensor, spec: str = ROW, *, eps: float = 1e-5, name: str = "layer_norm",
               affine: bool = True) -> Tensor:
    """``(x - mean) / sqrt(var + eps)`` over what ``spec`` reduces (the whole output row by
    default: a row variable), then a learned scale and shift (``affine``), as
    ``torch.nn.LayerNorm`` (the biased variance).  Over the output row with ``affine`` it is
    one operation of ``x``, ``scale`` and ``shift`` (the kernel applies them: torch's
    ``native_layer_norm`` with its weight and bias, forward and backward)."""
    if spec == ROW and affine:
        with G.scope(name):
            scale = G.param("scale", init=lambda shape, rng: np.ones(shape, np.float32))
            shift = G.param("shift", init=lambda shape, rng: np.zeros(shape, np.float32))
        return G.apply(_affine_normalizer(x, float(eps), name), x, scale, shift, name=name)
    if spec == ROW:
        y = G.apply(_normalizer(x, float(eps)), x)
    else:
        c = x - mean(x, spec)
        y = c * (mean(c * c, spec) + eps).recip_sqrt()
    return _affine(y, name, shift=True) if affine else y


def _normalizer(x: Tensor, eps: float) -> OpDef:
    """Layer normalisation over the output row as one primitive and its gradient another
    (torch's kernels on the torch backend), the forward's statistics kept for the backward
    in a record."""
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
    """:func:`_normalizer` with the learned scale and shift as operands of the one primitive
    (``scale`` and ``shift`` are sized by this pointwise use: the normalised axes): the
    value, then the three gradients, each one kernel call (records, read by ``part``)."""
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
    """A buffer: state of the model that is not learned (running statistics, dropout's
    counter), kept from run to run and saved by checkpoints with the parameters; or
    (``kind="param"``) a parameter on a node of the block's own, filled with ``fill``."""
    t = Tensor(kind, node, g, [name], differentiable=kind == "param")
    t.init = lambda shape: np.full(shape, fill, dtype)
    return t


def batch_norm(x: Tensor, spec: str = CHANNEL, *, momentum: float = 0.1, eps: float = 1e-5,
               name: str = "batch_norm", affine: bool = True,
               track_running_stats: bool = True) -> Tensor:
    """``(x - mean) / sqrt(var + eps) * scale + shift`` with the mean and the biased variance
    per channel, over what ``spec`` reduces (by default :data:`CHANNEL`: the last output axis
    is the channel, the batch row and the other output axes are reduced), as torch's
    ``BatchNorm1d/2d/3d`` compute it (channels last here: ``b | h, w, c``).  ``spec`` keeps
    some of ``x``'s axes (the channels, in any order) and reduces the others.

    In training mode (the graph's default, :meth:`tensig.graph.Graph.train`) the statistics
    are the batch's, and each run moves the running mean and running variance (buffers
    ``name.running_mean``, zeros, and ``name.running_var``, ones; the variance unbiased, by
    ``N / (N - 1)``) toward them by ``momentum``, as torch does; out of it
    (:meth:`~tensig.graph.Graph.eval`) the running statistics normalise and stay as they are.
    ``track_running_stats=False`` always uses the batch's.  ``scale`` (ones) and ``shift``
    (zeros) are learned per channel (``affine``).  The running statistics are buffers:
    checkpoints of a model or a trainer save and restore them with the parameters.

    One operation, forward and backward each one call of the backend's kernel (torch's own
    ``native_batch_norm`` and its backward; a few whole-array passes elsewhere).  At least
    two values per channel are needed in training, as torch requires: a model with fewer
    is refused when its code is built.
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
        """``a``'s memory axes that are channels, in the channels' memory order; and the
        check that training statistics have two values or more per channel."""
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
    """The memory axes of ``x`` that ``spec`` keeps in ``channel`` (one cell per channel),
    in ``channel``'s memory order: what batch normalisation's kernel reads as columns."""
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
    """GELU, tanh form: ``x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` (torch's
    ``gelu(approximate="tanh")``; the exact form needs ``erf``, which is no primitive).  One
    primitive with its own derivative (``x.gelu()``), not a dozen stored steps."""
    return G.apply(G.UNARY_OPS["gelu"], x)


def silu(x: Tensor) -> Tensor:
    """``x * sigmoid(x)``, the sigmoid as ``(1 + tanh(x/2)) / 2``: no ``exp`` to overflow, in
    the value or its gradient."""
    return x * ((x * 0.5).tanh() * 0.5 + 0.5)


def dropout(x: Tensor, p: float, *, seed: int = 0, name: str = "dropout") -> Tensor:
    """Zero each cell with probability ``p`` and scale the rest by ``1/(1-p)``; a fresh mask
    every run, drawn by a counter-based generator (Philox keyed by ``(seed, name)``, at a
    counter the routine advances), so a run is repeatable from its seed, and the same on
    NumPy and torch.  Out of training mode (``graph.eval()``) the input passes unchanged.
    The counter is a buffer of the graph (``graph.memory()`` lists it; checkpoints save it)."""
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
    """A constant whose shape is ``spec`` applied to ``x``'s (inferred with the graph) and
    whose value ``value(shape)`` is computed from that solved shape at initialisation."""
    g = x.graph
    t = Tensor("const", g.shapes.apply(spec, x.node, name=name), g, [name])
    t.value_init = lambda: value(t.shape.int_dims).astype(np.float32)
    return t


def rotary(x: Tensor, *, base: float = 10000.0) -> Tensor:
    """Rotary position embedding of ``x`` (``..., t | h, e``, as attention's ``q`` and ``k``):
    each head's ``e`` cells are ``E/2`` pairs ``(j, j + E/2)``, pair ``j`` rotated by the angle
    ``t * base^(-2j/E)`` at position ``t`` (the half-split form of GPT-NeoX and Llama).  The
    angle tables and the half swap are sized from the solved shapes."""

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
    """``-inf`` where a key position comes after the query position, else ``0``: a ``q | k``
    constant sized from ``scores``'s solved shape (``..., q | h, k``) when the model is
    initialised (a mask for attention written out; :func:`multi_head_attention` hides the
    same keys with ``mask="causal"`` without one)."""
    return _sized_constant(scores, "..., q | h, k => q | k", "causal",
                           lambda shape: np.triu(np.full(shape, -np.inf), 1))


def split_heads(x: Tensor, heads: int) -> Tensor:
    """``x``'s last output axis cut into ``heads`` heads (``..., t | d`` to ``..., t | h, e``,
    ``e = d / heads``, as torch's ``x.view(b, t, h, e)``): a ``d -> d`` projection made into
    the queries, keys or values of :func:`multi_head_attention`.  The notation's
    ``...|(h, e) => ...|h, e`` with the number of heads set on the captured ``h`` (one graph
    operation: a view, its gradient merged back); a ``d`` that ``heads`` does not divide is a
    :class:`ShapeError`."""
    if isinstance(heads, bool) or not isinstance(heads, int | np.integer) or heads < 1:
        raise ValueError(f"split_heads: heads is a positive number, not {heads!r}")
    y, sizes = G.einsum1("...|(h, e) => ...|h, e", x, capture=["h"])
    sizes["h"].set_dim(int(heads))
    return y


def merge_heads(x: Tensor) -> Tensor:
    """The heads merged back (``..., t | h, e`` to ``..., t | d``, ``d = h e``, as torch's
    ``a.transpose(1, 2).reshape(b, t, d)``): attention's result ready for the ``d -> d``
    output projection.  Undoes :func:`split_heads` up to the label: a merged axis has none,
    so a labelled ``d`` (``axes="b, t | d"``) comes back unlabelled and will not add to the
    labelled one; project it through a ``d -> d`` parameter first, as the GPT demo does."""
    return G.einsum1("...|h, e => ...|(h, e)", x)


#: attention's operands: queries and keys share the head size ``e``, values have theirs
#: (``f``); positions are the batch row's last axis (``q`` for queries, ``k`` for keys),
#: heads and head sizes the whole output row, no input axes
_ATTENTION = "..., q | -> h, e; ..., k | -> h, e; ..., k | -> h, f"
#: the scores, which a mask (any rows) broadcasts onto
_SCORES = "..., q | -> h, e; ..., k | -> h, e => ..., q | -> h, k"


def multi_head_attention(q: Tensor, k: Tensor, v: Tensor, *, mask: Any = None) -> Tensor:
    """``softmax(q k^T / sqrt(E) + mask) v`` per head, as one primitive.

    ``q``, ``k``, ``v`` are ``..., t | h, e`` (``v``'s head size may differ): positions the
    last batch axis, heads and head dimensions the output row (:func:`split_heads` of a
    ``d -> d`` projection makes one; :func:`merge_heads` joins the result's heads back for
    the output projection).  ``mask``: None, ``"causal"`` (query ``i`` sees the keys ``j <=
    i``), or a tensor added to the ``..., q | h, k`` scores, onto which it broadcasts
    (``-inf`` hides a key: a padded batch's ``b, 1 | k``, say, its size-1 axis stretching over
    the queries; it gets no gradient).  A query that sees no key gives 0, as
    torch's kernels do.  The result is ``..., q | h, e``; ``E`` comes from the solved
    shapes.

    The library's fused kernel where it has one (torch on the CPU: flash attention), else
    blocks of query rows (:meth:`tensig.backends.Backend.attention`): the ``q, k`` scores
    are never stored, the backward recomputes them from each row's log-sum-exp.
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
    """Attention as one operation: its forward one kernel (a record of the result and each
    query row's log-sum-exp, :data:`tensig.execution.ir.RECORDS`), its backward another
    (the three gradients at once).  The scale ``1/sqrt(E)`` is read from the solved shapes
    when the code is built."""
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
    """The shape that lays ``mask``'s array out as the scores ``..., q | h, k`` (memory
    order ``(..., Tq, H, Tk)``) with size-1 axes where it broadcasts: each of its rows
    right-aligned on the scores', as a pointwise operation aligns them."""
    batch, out = (tuple(int(d) for d in row) for row in (mask.shape.batch, mask.shape.output))
    if len(batch) > len(t.shape.batch) or len(out) > 2 or mask.shape.input:
        raise ShapeError(f"multi_head_attention: the mask {mask.name} ({mask.shape}) does not "
                         f"broadcast onto the scores (batch row {t.shape.batch}, output row "
                         "h, k)")
    return (1,) * (len(t.shape.batch) - len(batch)) + batch + (1,) * (2 - len(out)) + out
