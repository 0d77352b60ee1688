"""Training with the model layer: optimizers written in the assignment IR, and a loop (the
README's "Training" section).

:func:`sgd` (OCANNL's ``sgd_one``) and :func:`adam` return :class:`~tensig.execution.ir.Code`
compiled with the gradient routine; optimizer state are tensors of the graph.

A :class:`Trainer` step is atomic: the gradients first, then the loss is checked
(``on_nonfinite``), then the update with Ctrl-C held back, the step count advancing last; a step
refused or interrupted before its update puts back the buffers its forward pass moved.  So
parameters, buffers, optimizer state and ``step_count`` always agree, and a checkpoint saved
after an interrupt resumes without repeating or skipping a step.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from tensig.core.errors import ShapeError, TensigError
from tensig.core.shapes import Shape
from tensig.execution.ir import Code
from tensig.execution.ir import prim as _e
from tensig.model.compile import Routine, compile_code
from tensig.model.distributed import Replicas, buckets
from tensig.model.fusion import Run
from tensig.model.staging import Staged
from tensig.model.tensor import Model, Tensor, _is_integer, _valued

# The signal module's C functions: its wrappers convert handlers to and from an enum through a
# caught exception, 15-30 us a call against 1.6 us, twice a training step.
try:
    _sig: Any = importlib.import_module("_signal")
except ImportError:  # pragma: no cover - not CPython
    _sig = signal

__all__ = ["NonFiniteLossError", "Trainer", "adam", "sgd"]


def _state(p: Tensor, what: str) -> Tensor:
    """A non-differentiable buffer with ``p``'s shape (optimizer state)."""
    return Tensor("state", p.node, p.graph, [*p.label, what])


def _scalar(like: Tensor, name: str, value: float) -> Tensor:
    """A one-number leaf in ``like``'s graph (a per-step hyperparameter)."""
    return _valued("leaf", name, Shape(output=(1,)), np.array([value], np.float32), like.graph)


class Optimizer:
    """Update code, the per-step scalars it reads (learning rate, bias corrections) and the state
    tensors it keeps (what a trainer's checkpoint saves).  ``rule``: the update for an adapter's
    one-kernel form (:meth:`tensig.backends.base.Backend.fused_update`): name, hyperparameters,
    learning rate by step, state tensors by role (each parallel to ``params``)."""

    def __init__(self, params: Sequence[Tensor], code: Code,
                 scalars: Mapping[str, Tensor], per_step: Callable[[int], Mapping[str, float]],
                 state: Sequence[Tensor] = (),
                 rule: tuple[str, dict[str, Any], Callable[[int], float],
                             list[list[Tensor]]] | None = None):
        self.params, self.code, self.scalars = list(params), code, scalars
        self.per_step, self.state, self.rule = per_step, list(state), rule
        self._bufs = {name: t.val for name, t in scalars.items()}
        self._written: dict[str, tuple[float, Any]] = {}  # name -> (value, its array)

    def fused_step(self, adapter: Any) -> Callable[[Any, int], bool] | None:
        """``run(store, step) -> bool``: the update by the adapter's kernel (new arrays, as every
        routine makes), False where it declines these arrays; None without such a kernel."""
        if self.rule is None:
            return None
        name, hyper, rate, roles = self.rule
        kernel = adapter.fused_update(name, hyper, [p.shape.int_dims for p in self.params])
        if kernel is None:
            return None
        params, grads = [p.val.key for p in self.params], [p.grad.key for p in self.params]
        state = [[t.val.key for t in role] for role in roles]

        def run(store: Any, step: int) -> bool:
            arrays = store.arrays
            try:
                out = kernel([arrays[k] for k in params], [arrays[k] for k in grads],
                             [[arrays[k] for k in role] for role in state], step + 1,
                             rate(step))
            except KeyError:  # a buffer not written yet: the compiled code's message
                return False
            if out is None:
                return False
            arrays.update(zip(params, out[0], strict=True))
            for keys, new in zip(state, out[1], strict=True):
                arrays.update(zip(keys, new, strict=True))
            return True

        return run

    def arrays(self, step: int) -> dict[tuple[int, str], np.ndarray]:
        """This step's scalars as NumPy arrays by buffer key (a staged step's inputs)."""
        return {self._bufs[name].key: np.array([value], np.float32)
                for name, value in self.per_step(step).items()}

    def set_step(self, model: Model, step: int) -> None:
        """Write this step's scalars, except one still holding the array last written for the
        same value (a constant rate: each write makes an array, on the device under torch)."""
        store = model.graph.store
        for name, value in self.per_step(step).items():
            buf, last = self._bufs[name], self._written.get(name)
            if last is not None and last[0] == value and store.arrays.get(buf.key) is last[1]:
                continue
            array = model.scalar(value)
            store.write(buf, array)
            self._written[name] = (value, array)


def sgd(params: Iterable[Tensor], lr: float, *, momentum: float = 0.0,
        weight_decay: float = 0.0, nesterov: bool = False,
        schedule: Callable[[int], float] | None = None) -> Optimizer:
    """OCANNL's ``sgd_one`` for each parameter ``p``::

        sgd_delta =: p.grad + weight_decay * p
        if momentum > 0:
            sgd_momentum =: momentum * sgd_momentum + sgd_delta
            if nesterov: sgd_delta =+ momentum * sgd_momentum
            else:        sgd_delta =: sgd_momentum
        p =- learning_rate * sgd_delta

    ``schedule(step) -> lr`` changes the learning rate per step (a scalar leaf).
    """
    params = list(params)
    if not params:
        raise ValueError("sgd: no parameters")
    lr_t = _scalar(params[0], "sgd.lr", lr)
    code = Code()
    state = []
    for p in params:
        delta = _state(p, "sgd_delta")  # recomputed every step: not state to keep
        code.assign(delta.val, _e("add", p.grad, _e("mul", weight_decay, p.val))
                    if weight_decay else _e("id", p.grad))
        if momentum > 0:
            mom = _state(p, "sgd_momentum")
            state.append(mom)
            # state starts at zero, so the first step gives grad, as torch's buffer does
            code.assign(mom.val, _e("add", _e("mul", momentum, mom.val), delta.val))
            if nesterov:
                code.assign(delta.val, _e("mul", momentum, mom.val), accum="+")
            else:
                code.assign(delta.val, _e("id", mom.val))
        code.assign(p.val, _e("mul", lr_t.val, delta.val), accum="-")
    rate = schedule or (lambda step: lr)  # the learning rate by step
    hyper = {"momentum": momentum, "weight_decay": weight_decay, "nesterov": nesterov}
    return Optimizer(params, code, {"lr": lr_t}, lambda step: {"lr": rate(step)}, state,
                     ("sgd", hyper, rate, [state] if momentum > 0 else []))


def adam(params: Iterable[Tensor], lr: float = 1e-3, *, betas: tuple[float, float] = (0.9, 0.999),
         eps: float = 1e-8, weight_decay: float = 0.0, decoupled: bool = False,
         schedule: Callable[[int], float] | None = None) -> Optimizer:
    """Adam (``decoupled=True``: AdamW) with ``torch.optim``'s arithmetic::

        g = p.grad (+ weight_decay * p for Adam's L2 form)
        p =* (1 - lr * weight_decay)                      (AdamW)
        m =: b1 * m + (1 - b1) * g
        v =: b2 * v + (1 - b2) * g * g
        p =- (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)

    The step-dependent factors are scalar leaves set before each step.
    """
    params = list(params)
    if not params:
        raise ValueError("adam: no parameters")
    b1, b2 = betas
    s_lr = _scalar(params[0], "adam.step_size", lr)
    s_c2 = _scalar(params[0], "adam.inv_sqrt_bias2", 1.0)
    s_decay = _scalar(params[0], "adam.decay", 1.0)
    code = Code()
    state = []
    for p in params:
        m, v = _state(p, "adam_m"), _state(p, "adam_v")
        state += [m, v]
        g: Any = p.grad
        if weight_decay and not decoupled:
            g = _e("add", p.grad, _e("mul", weight_decay, p.val))
        if weight_decay and decoupled:
            code.assign(p.val, _e("mul", p.val, s_decay.val))
        code.assign(m.val, _e("add", _e("mul", b1, m.val), _e("mul", 1.0 - b1, g)))
        code.assign(v.val, _e("add", _e("mul", b2, v.val), _e("mul", 1.0 - b2, _e("mul", g, g))))
        denom = _e("add", _e("mul", _e("sqrt", v.val), s_c2.val), eps)
        code.assign(p.val, _e("div", _e("mul", s_lr.val, m.val), denom), accum="-")

    decays, rate = bool(weight_decay and decoupled), schedule or (lambda step: lr)

    def per_step(step: int) -> dict[str, float]:
        t, r = step + 1, rate(step)
        values = {"step_size": r / (1 - b1 ** t), "inv_sqrt_bias2": 1 / math.sqrt(1 - b2 ** t)}
        if decays:  # the only code that reads it
            values["decay"] = 1 - r * weight_decay
        return values

    hyper = {"betas": betas, "eps": eps, "weight_decay": weight_decay, "decoupled": decoupled}
    return Optimizer(params, code, {"step_size": s_lr, "inv_sqrt_bias2": s_c2,
                                    "decay": s_decay}, per_step, state,
                     ("adam", hyper, rate, [state[0::2], state[1::2]]))


class NonFiniteLossError(TensigError, FloatingPointError):
    """A training step's loss is NaN or infinite; its update was not applied.  Attributes:
    ``loss``, ``step`` (the parameters are those after ``step`` updates), ``rows`` (the batch's
    dataset rows), ``epoch`` and ``batch`` (0-based, inside :meth:`Trainer.fit` / ``epoch``)."""

    def __init__(self, loss: float, step: int, rows: np.ndarray):
        self.loss, self.step, self.rows = loss, step, np.asarray(rows)
        self.epoch: int | None = None
        self.batch: int | None = None
        super().__init__()

    def __str__(self) -> str:
        where = [f"epoch {self.epoch}"] if self.epoch is not None else []
        where += [f"batch {self.batch}"] if self.batch is not None else []
        rows = self.rows.tolist()
        shown = ", ".join(map(str, rows[:8])) + (", ..." if len(rows) > 8 else "")
        return (f"the loss is {self.loss} at step {self.step}"
                f"{' (' + ', '.join(where) + ')' if where else ''}, dataset rows [{shown}]: the "
                f"update was not applied, the parameters are those after step {self.step}.  "
                "Look for NaN or inf in those rows or a learning rate too high; "
                "Trainer(on_nonfinite='warn') skips such batches instead")


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Hold SIGINT (Ctrl-C) for a ``with`` block, then deliver it: a ``KeyboardInterrupt`` could
    otherwise land between any two bytecodes of an update.  Off the main thread, or where Python
    does not own the handler (``getsignal`` gives None), nothing interrupts and nothing is
    installed."""
    main = threading.current_thread() is threading.main_thread()
    previous = _sig.getsignal(signal.SIGINT) if main else None
    if previous is None:
        yield
        return
    received: list[int] = []
    _sig.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        _sig.signal(signal.SIGINT, previous)
        if received:
            signal.raise_signal(signal.SIGINT)


_NONFINITE = ("raise", "warn", "ignore")


class Trainer:
    """Compiled training: one routine runs forward, gradients and the optimizer update.

    ``data`` maps each data leaf to the full dataset array; a leaf's batch size is the batch
    size (the last partial batch dropped, the order reshuffled every epoch when ``shuffle``).

    ``on_nonfinite``: what a step with a NaN or infinite loss does, before the update touches
    anything: ``"raise"`` :class:`NonFiniteLossError` (naming step, epoch, batch and rows; the
    last finite step's state kept), ``"warn"`` (a ``RuntimeWarning``) and skip the batch's
    update, or ``"ignore"`` it (NaN then spreads to the parameters).
    """

    def __init__(self, loss: Tensor, optimizer: Optimizer, data: Mapping[Tensor, Any],
                 *, shuffle: bool = True, seed: int = 0, on_nonfinite: str = "raise",
                 distributed: bool | Replicas = False):
        if on_nonfinite not in _NONFINITE:
            raise ValueError(f"on_nonfinite must be one of {', '.join(map(repr, _NONFINITE))}, "
                             f"not {on_nonfinite!r}")
        if loss.graph.adapter.lazy:
            raise TypeError(
                f"a Trainer computes each step's parameters from the last ones; on the lazy "
                f"arrays of a {loss.graph.backend!r} graph every parameter would be a task "
                "graph of all the steps before it.  Train on NumPy (or torch, JAX); Dask "
                "graphs run forward and gradient routines lazily (Model.run, backward)")
        self.on_nonfinite = on_nonfinite
        self.loss, self.opt = loss, optimizer
        t0 = time.perf_counter()
        self.model = Model(loss)
        # Two routines so the loss is checked before the update, whose last step advances the
        # step count: the count moves exactly when the parameters do.
        grads, update = (compile_code(c, self.model.graph.array_type)
                         for c in (loss.grad_update_code(), optimizer.code))
        steps, code = grads.steps + update.steps, Code([*grads.code, *update.code])
        # on JAX a step is one compiled function of both (see _staged_step)
        staged = None if grads.staged is None else Staged(steps, code, grads.staged.backend)
        self._update_writes = {a.lhs.key for a in update.code}
        #: both, as one routine (to inspect, or to run a step by hand)
        self.routine = Routine(steps, code, grads.mode, staged,
                               [*(grads.items or []), *(update.items or [])])
        # a step enters the routines' mode (torch's inference mode) once for both
        self._mode = grads.mode or contextlib.nullcontext
        self._gradients = Routine(grads.steps, grads.code, items=grads.items)
        self._update_steps = update.steps
        self._fused = optimizer.fused_step(self.model.graph.adapter)
        self._update = Routine([self._apply_update, self._count_step], update.code)
        self._loss_now = math.nan
        g = self.model.graph
        for t in g.tensors:  # scalar leaves the optimizer added after Model(); its state at 0
            if g.store.has(t.val):
                continue
            if t.value_init is not None:
                self.model.set(t, t.value_init)
            elif t.kind == "state":
                g.store.write(t.val, g.array(np.zeros(t.shape.int_dims, np.float32)))
        #: buffers the forward pass moves: put back when a step is refused
        self._buffers = [t.val.key for t in self.model.tensors if t.kind == "buffer"]
        self.build_seconds = time.perf_counter() - t0
        self.data = dict(data)
        sizes = {len(v) for v in self.data.values()}
        if len(sizes) != 1:
            raise ValueError(f"dataset arrays have different lengths: {sorted(sizes)}")
        self.n = sizes.pop()
        batch = {int(t.shape.batch[0]) if t.shape.batch else None for t in self.data}
        if len(batch) != 1 or None in batch:
            raise ValueError("every data leaf needs the same leading batch axis")
        self.batch: int = next(b for b in batch if b is not None)
        if self.batch > self.n:
            raise ValueError(f"batch size {self.batch} exceeds the dataset ({self.n} rows)")
        # each dataset becomes the backend's array once, checked once: a step only slices
        self._feeds = []
        for t, arr in self.data.items():
            want = t.shape.int_dims
            if tuple(arr.shape[1:]) != want[1:]:
                raise ShapeError(f"{t.name} was built with shape {t.shape} (memory order "
                                 f"{want}); the dataset's rows have shape {tuple(arr.shape[1:])}")
            if t.integer != _is_integer(arr):
                raise TypeError(f"{t.name} was built from {'integer' if t.integer else 'float'} "
                                f"data; its dataset has dtype {arr.dtype}")
            self._feeds.append((t.val.key, self.model.graph.array(arr)))
        self._rows = self.model.graph.array
        self._datasets = dict(self._feeds)
        self.seed, self.shuffle = seed, shuffle
        self._order: tuple[tuple[int, int, bool], np.ndarray] | None = None
        self.step_count = self.skipped = 0
        self.history: list[float] = []
        self.replicas = self._join(distributed)
        world = self.replicas.world if self.replicas is not None else 1
        #: rows per step over all replicas; each replica takes ``batch`` of them
        self.global_batch = self.batch * world
        if self.global_batch > self.n:
            raise ValueError(f"the global batch ({world} replicas x {self.batch} rows) exceeds "
                             f"the dataset ({self.n} rows)")
        self.steps_per_epoch = self.n // self.global_batch

    def _join(self, distributed: bool | Replicas) -> Replicas | None:
        """The process group (``True``: from torchrun's environment), after checking that every
        replica built the same parameters."""
        if distributed is False:
            return None
        replicas = distributed if isinstance(distributed, Replicas) else Replicas(
            device=self.model.graph.store.device)
        store = self.model.graph.store
        replicas.check_same([(p.name, tuple(store.read(p.val).shape), str(store.read(p.val).dtype))
                             for p in self.opt.params])
        self._launch = self._plan_buckets(replicas)
        return replicas

    def _plan_buckets(self, replicas: Replicas) -> dict[int, list[list[Any]]]:
        """After which step of the gradient routine each bucket of gradients goes out: the one
        writing the last of them, not before the loss (which rides in the first bucket)."""
        items, store = self._gradients.items or [], self.model.graph.store
        end = len(self._gradients.steps) - 1
        last: dict[Any, int] = {}
        for i, item in enumerate(items):
            for a in item.assigns if isinstance(item, Run) else [item]:
                last[a.lhs.key] = i
        loss_ready = last.get(self.loss.val.key, end)
        keys = [p.grad.key for p in self.opt.params]
        ready = [max(last.get(k, end), loss_ready) for k in keys]
        sizes = [int(store.read(p.val).nbytes) for p in self.opt.params]
        launch: dict[int, list[list[Any]]] = {}
        for step, idxs in buckets(ready, sizes, replicas.bucket_bytes):
            launch.setdefault(step, []).append([keys[i] for i in idxs])
        return launch

    def step(self, rows: np.ndarray) -> float:
        """One atomic update on the dataset rows ``rows`` (a batch); returns its loss."""
        if len(rows) != self.batch:
            raise ValueError(f"a step takes {self.batch} rows (the batch size), got {len(rows)}")
        store = self.model.graph.store
        arrays = store.arrays
        if self.replicas is None and self.routine.staged is not None:
            # one compiled call: the rows gathered and the scalars stored inside it
            written = self.routine.staged.outputs(store, self.opt.arrays(self.step_count),
                                                  self._datasets, rows)
            if written is not None:
                return self._staged_step(written, rows)
        arrays.update(self._batch(rows))
        # routines replace arrays, never write into them: the old ones are the old values
        kept = [(k, arrays[k]) for k in self._buffers]
        with self._mode():
            try:
                if self.replicas is None:
                    self._gradients.run(store)
                    loss = self._local_loss()
                else:  # every replica continues with the mean gradients
                    loss = self._averaged_gradients(store, self.replicas)
            except BaseException:  # Ctrl-C or an error before the update: no trace
                arrays.update(kept)
                raise
            # the update routine's last step is _count_step
            return self._finish(loss, rows, kept, lambda: self._update.run(store))

    def _batch(self, rows: np.ndarray) -> list[tuple[Any, Any]]:
        """Each dataset's rows ``rows`` by buffer key: a view where they run consecutively (no
        copy: routines never write into an array), else gathered."""
        rows = np.asarray(rows)
        n, first = len(rows), int(rows[0])
        # integers only: float or boolean rows go to the gather, which refuses them as before
        if rows.dtype.kind in "iu" and first >= 0 and first + n <= self.n and \
                rows.tolist() == list(range(first, first + n)):
            return [(key, arr[first:first + n]) for key, arr in self._feeds]
        index = self._rows(rows)
        return [(key, arr[index]) for key, arr in self._feeds]

    def _staged_step(self, written: dict[Any, Any], rows: np.ndarray) -> float:
        """Keep what one compiled step wrote: all of it, or, its loss refused, the gradients'
        part without the buffers it moved."""
        arrays = self.model.graph.store.arrays
        key = self.loss.val.key
        value = written[key] if key in written else arrays[key]
        loss = float(self.model.graph.adapter.to_numpy(value).reshape(-1)[0])
        kept = ((k, v) for k, v in written.items()  # read only when the loss is refused
                if k not in self._update_writes and k not in self._buffers)

        def update() -> None:
            arrays.update(written)
            self._count_step(self.model.graph.store)

        return self._finish(loss, rows, kept, update)

    def _local_loss(self) -> float:
        return float(self.loss.numpy().reshape(-1)[0])

    def _averaged_gradients(self, store: Any, replicas: Replicas) -> float:
        """The gradient routine, each bucket's all-reduce started once its last gradient is
        written, then the mean gradients stored; returns the global mean loss."""
        arrays, launch = store.arrays, self._launch
        sent: list[Any] = []
        keys: list[Any] = []
        for i, run in enumerate(self._gradients.steps):
            run(store)
            for bucket in launch.get(i, ()):
                sent.append(replicas.start([arrays[k] for k in bucket],
                                           None if sent else self._local_loss()))
                keys += bucket
        if not sent:  # no parameters with gradients: the loss alone
            sent.append(replicas.start([], self._local_loss()))
        grads, loss = replicas.finish(sent, self.step_count)
        for k, g in zip(keys, grads, strict=True):
            arrays[k] = g
        return loss

    def _finish(self, loss: float, rows: np.ndarray, kept: Iterable[tuple[Any, Any]],
                update: Callable[[], None]) -> float:
        """A step's end: ``update()`` with Ctrl-C held back; or, the loss refused, the arrays
        ``kept`` stored back and an error raised or a warning given.  Returns the loss."""
        if math.isfinite(loss) or self.on_nonfinite == "ignore":
            self._loss_now = loss
            with _interrupts_held():
                update()
            return loss
        self.model.graph.store.arrays.update(kept)
        error = NonFiniteLossError(loss, self.step_count, rows)
        if self.on_nonfinite == "raise":
            raise error
        self.skipped += 1  # the batch is consumed: the position in the epoch moves on
        warnings.warn(str(error).replace("the update was not applied",
                                         "this batch's update was skipped"),
                      RuntimeWarning, stacklevel=3)
        return loss

    def _apply_update(self, store: Any) -> None:
        """The optimizer's update: the adapter's one-kernel form where it takes these arrays, else
        the compiled code after this step's scalars."""
        if self._fused is None or not self._fused(store, self.step_count):
            self.opt.set_step(self.model, self.step_count)
            for run in self._update_steps:
                run(store)

    def _count_step(self, store: Any) -> None:
        """The update routine's last step: the count and history move with the parameters."""
        self.step_count += 1
        self.history.append(self._loss_now)

    def order(self, epoch: int) -> np.ndarray:
        """The rows in epoch ``epoch``'s order, a function of the seed and the epoch only, so a
        resumed run (on any number of replicas) sees the same batches."""
        key, cached = (epoch, self.seed, self.shuffle), self._order
        if cached is not None and cached[0] == key:
            return cached[1]
        rows = (np.random.default_rng([self.seed, epoch]).permutation(self.n) if self.shuffle
                else np.arange(self.n))
        self._order = (key, rows)
        return rows

    def rows_of(self, step: int) -> np.ndarray:
        """This replica's rows at step ``step``: its slice of that step's global batch."""
        epoch, k = divmod(step, self.steps_per_epoch)
        rank = self.replicas.rank if self.replicas is not None else 0
        i = self.global_batch * k + self.batch * rank
        return self.order(epoch)[i:i + self.batch]

    @property
    def position(self) -> int:
        """Batches consumed: steps taken plus batches skipped for a non-finite loss (a checkpoint
        keeps both)."""
        return self.step_count + self.skipped

    def epoch(self) -> float:
        """The rest of the current epoch (from :attr:`position`, so a trainer loaded mid-epoch
        goes on with its next batch); returns the mean loss of the batches run."""
        epoch, start = divmod(self.position, self.steps_per_epoch)
        losses = []
        for batch in range(start, self.steps_per_epoch):
            try:
                losses.append(self.step(self.rows_of(epoch * self.steps_per_epoch + batch)))
            except NonFiniteLossError as e:
                e.batch = batch
                raise
        return float(np.mean(losses))

    def fit(self, epochs: int, *, progress: bool = False) -> list[float]:
        """Train for ``epochs`` epochs; returns the mean loss of each."""
        means = []
        shown = progress and (self.replicas is None or self.replicas.is_root)
        bar = _progress(epochs, "epoch") if shown else None
        with bar if bar is not None else contextlib.nullcontext():  # tqdm is falsy at total=0
            for epoch in range(epochs):
                try:
                    means.append(self.epoch())
                except NonFiniteLossError as e:
                    e.epoch = epoch
                    raise
                if bar is not None:
                    bar.set_postfix(loss=f"{means[-1]:.4f}")
                    bar.update(1)
        return means

    def save_plot(self, path: str) -> None:
        """The loss curve as a PNG (needs matplotlib); only rank 0 writes it (the losses are
        global means)."""
        if self.replicas is not None and not self.replicas.is_root:
            return
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3))
        ax.plot(self.history)
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)


def _progress(total: int, unit: str) -> Any:
    """A tqdm bar over ``total`` ``unit``s, or None without tqdm (an optional dependency)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit=unit)
