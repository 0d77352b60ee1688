"""Checkpoints of the model layer: parameters and buffers (running statistics, dropout's
counter) in safetensors files; the README's "Training" section lists what is checked.

Why safetensors: a JSON header plus raw buffers, so loading runs no code (unlike pickle) and any
safetensors reader opens the file.  Tensors are keyed by parameter name; the header records
each one's three-row shape (``tensig.shape.layer1.w = "784->128"``), as memory order cannot
tell ``3->2`` from ``2,3``.  Arrays travel as NumPy arrays: a file loads into any backend.

Why CRC-32 per tensor (``tensig.crc32.layer1.w``): it detects every single-bit flip and burst
of up to 32 bits, and was the standard library's fastest hash on 100 MB (0.8 GB/s against 0.4
for SHA-256, 0.2 for BLAKE2b); it guards against damage, not malice.  A file without them
loads unchecked (the format stayed ``"1"``: earlier readers ignore the entries); in one with
them, a tensor without one is damage (a flipped bit in its key would leave it unchecked).
Shape texts must match :func:`save`'s canonical form before they are parsed, so a crafted
``9**9**9`` is refused.

>>> import os, tempfile
>>> import numpy as np
>>> from tensig import graph as G
>>> with G.new_graph():
...     x = G.leaf("x", np.ones((4, 3), np.float32), batch=1)
...     with G.scope("layer1"):
...         w = G.param("w", output=[2])
...     model = G.Model((w @ x).relu())
>>> with tempfile.TemporaryDirectory() as d:
...     path = save(model, os.path.join(d, "model.safetensors"), metadata={"step": "100"})
...     report = load(model, path)
>>> report.loaded, report.metadata
(('layer1.w',), {'step': '100'})

safetensors is an optional dependency (``pip install tensig[train]``), imported on first use.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import uuid
import warnings
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tensig.backends import to_numpy
from tensig.core.errors import TensigError
from tensig.core.notation import KINDS
from tensig.core.shapes import Shape
from tensig.model.graph import Graph, Model, Tensor
from tensig.model.train import Trainer

__all__ = ["FORMAT_VERSION", "CheckpointError", "LoadReport", "load", "save"]

#: The version of the tensig metadata written into a checkpoint's header: raised with any new
#: ``tensig.`` key, as load refuses keys it does not know (a damaged key would hide a check).
FORMAT_VERSION = "1"

_FORMAT_KEY = "tensig.format"
_SHAPE_PREFIX = "tensig.shape."
_CRC_PREFIX = "tensig.crc32."  # CRC-32 of a tensor's little-endian bytes, 8 hex digits
_STEP_KEY = "tensig.step"  # a trainer's step count
_SKIPPED_KEY = "tensig.skipped"  # a trainer's batches skipped for a non-finite loss
_SEED_KEY = "tensig.seed"  # a trainer's shuffle seed, or "unshuffled": its data order
_RESERVED_PREFIX = "tensig."
#: tensor names the safetensors format keeps for itself (its header's metadata entry)
_RESERVED_NAMES = frozenset({"__metadata__"})

# what save() writes for a concrete shape (``()``, ``5|``, ``2|3->rgb=4``): no nesting, no
# operators, sizes below 10**19, so linear to match and cheap to parse, whatever the file says
_SIZE = r"(?:[^\W\d]\w*=)?[0-9]{1,19}"
_ROW = rf"(?:{_SIZE}(?:,{_SIZE})*)?"
_SHAPE_TEXT = re.compile(rf"\(\)|(?:{_ROW}\|)?(?:{_ROW}->)?{_ROW}")
_MAX_SHAPE_TEXT = 10_000  # characters: far above any real tensor's rank
_CRC_TEXT = re.compile(r"[0-9a-f]{8}")
_ALIGN = 64  # bytes: where torch's CPU allocator starts every array (MKL asks the same)

# safetensors' dtype codes that NumPy can hold (BF16 and the F8 types it cannot).
_NUMPY_DTYPES = {
    "BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "U16": np.uint16, "I16": np.int16,
    "U32": np.uint32, "I32": np.int32, "U64": np.uint64, "I64": np.int64,
    "F16": np.float16, "F32": np.float32, "F64": np.float64,
}


class CheckpointError(TensigError, ValueError):
    """A checkpoint file cannot be loaded into these parameters (nothing was loaded); ``path``
    and ``problems`` (one line each) spare tools the parsing."""

    def __init__(self, path: str, problems: Iterable[str]):
        self.path = path
        self.problems = tuple(problems)
        if len(self.problems) == 1:
            text = f"checkpoint '{path}': {self.problems[0]} (nothing was loaded)"
        else:
            lines = "\n".join(f"  - {p}" for p in self.problems)
            text = (f"checkpoint '{path}': {len(self.problems)} problems, nothing was "
                    f"loaded:\n{lines}")
        super().__init__(text)


@dataclass(frozen=True)
class LoadReport:
    """What :func:`load` did: parameters written, parameters the file lacked, file entries that
    matched none (both empty after a strict load), and the user metadata ``save`` stored."""

    loaded: tuple[str, ...]
    missing: tuple[str, ...] = ()
    unexpected: tuple[str, ...] = ()
    metadata: dict[str, str] = field(default_factory=dict)


def _safetensors() -> Any:
    """Imported on first use: the core of tensig needs NumPy only."""
    try:
        import safetensors
        import safetensors.numpy
    except ImportError as e:
        raise ImportError("tensig checkpoints need the safetensors package: "
                          "pip install tensig[train] (or pip install safetensors)") from e
    return safetensors


#: what a checkpoint holds of a model: its parameters and buffers (unlearned state it uses)
_SAVED = ("param", "buffer")


def _parameters(source: Any) -> tuple[list[Any], bool]:
    """The parameters and buffers of a Model, Graph, Tensor(s) or Trainer (with its optimizer's
    state), and whether they were named one by one (then each must be saveable)."""
    if isinstance(source, Trainer):
        params, _ = _parameters(source.model)
        return params + source.opt.state, False
    if isinstance(source, Model | Graph):  # creation order (as in the code), not evaluation's
        return sorted((t for t in source.tensors if t.kind in _SAVED), key=lambda t: t.id), False
    items = [source] if isinstance(source, Tensor) else source
    try:
        items = list(items)
    except TypeError:
        raise TypeError(f"expected a tensig Model, Graph or parameter Tensors, not "
                        f"{type(source).__name__}") from None
    for t in items:
        if not isinstance(t, Tensor):
            raise TypeError(f"expected parameter Tensors, got a {type(t).__name__}")
        if t.kind not in _SAVED:
            raise TypeError(f"{t.name!r} is a {t.kind}, not a parameter: checkpoints hold "
                            "parameters (tensig.graph.param) and buffers (running statistics)")
    return list({t.id: t for t in items}.values()), True  # each once, in order


def _kind(t: Any) -> str:
    """How a message names a checkpointed tensor: ``parameter 'layer1.w'``."""
    kind = {"state": "optimizer state", "buffer": "buffer"}.get(t.kind, "parameter")
    return f"{kind} '{t.name}'"


def _check_names(params: list[Any], saving: bool = False) -> None:
    """Names key a checkpoint, so two parameters may not share one; and (``saving``) a tensor
    named ``__metadata__`` would replace the header's metadata and break every reader."""
    names: set[str] = set()
    for t in params:
        if t.name in names:
            raise ValueError(f"two parameters are named {t.name!r}: a checkpoint keys "
                             "parameters by name; give them distinct names (or wrap their "
                             "layers in tensig.graph.scope)")
        names.add(t.name)
        if saving and t.name in _RESERVED_NAMES:
            raise ValueError(f"parameter name {t.name!r} is reserved by the safetensors "
                             "format; rename the parameter (or wrap it in "
                             "tensig.graph.scope)")


def _checksum(array: np.ndarray) -> str:
    """The CRC-32 of the little-endian C-order bytes safetensors stores, as 8 hex digits."""
    data = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    return f"{zlib.crc32(data.reshape(-1).view(np.uint8).data):08x}"


def _concrete_shape(t: Any) -> Shape:
    shape = t.shape
    if not shape.is_concrete:
        raise ValueError(f"parameter {t.name!r} has symbolic shape {shape}: a checkpoint "
                         "holds concrete sizes only")
    return shape


def _to_numpy(name: str, value: Any) -> np.ndarray:
    try:
        return np.ascontiguousarray(to_numpy(value))
    except TypeError as e:  # bfloat16 and other torch dtypes NumPy lacks
        raise TypeError(f"parameter {name!r} is a torch {value.dtype} tensor, which "
                        "NumPy cannot hold; cast it to float32 before saving") from e


def save(params_or_model: Any, path: str | os.PathLike[str], *,
         metadata: Mapping[str, str] | None = None) -> Path:
    """Write the parameters' values to a safetensors file at ``path``, atomically; returns the
    path.  ``params_or_model``: a :class:`tensig.graph.Model` (parameters and buffers), a
    :class:`tensig.train.Trainer` (also optimizer state, step count and data order: training
    resumes exactly), a :class:`tensig.graph.Graph` (what has a value) or tensors.
    ``metadata``: string pairs, ``tensig.`` keys reserved.  All is checked before the file
    system is touched; of a data-parallel trainer, rank 0 writes, every rank waits for it.
    """
    st = _safetensors()
    params, explicit = _parameters(params_or_model)
    user = dict(metadata or {})
    for key, value in user.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"checkpoint metadata maps strings to strings; got {key!r}: "
                            f"{type(value).__name__}")
        if key.startswith(_RESERVED_PREFIX):
            raise ValueError(f"metadata key {key!r}: keys beginning with 'tensig.' are "
                             "reserved for tensig's own entries")

    chosen = []
    for t in params:
        if t.graph.store.has(t.val):
            chosen.append(t)
        elif explicit:
            raise ValueError(f"parameter {t.name!r} has no value yet: build a "
                             "tensig.graph.Model on it (which initialises it) before saving")
    if not chosen:
        raise ValueError("nothing to save: no parameter has a value (a graph's parameters "
                         "get values when a tensig.graph.Model is built on them)")
    _check_names(chosen, saving=True)

    tensors: dict[str, np.ndarray] = {}
    header = {_FORMAT_KEY: FORMAT_VERSION}
    for t in chosen:
        shape = _concrete_shape(t)
        array = _to_numpy(t.name, t.graph.store.read(t.val))
        if tuple(array.shape) != shape.int_dims:
            raise ValueError(f"parameter {t.name!r} has shape {shape} (memory order "
                             f"{shape.int_dims}) but its stored array is {tuple(array.shape)}")
        tensors[t.name] = array
        header[_SHAPE_PREFIX + t.name] = str(shape)
        header[_CRC_PREFIX + t.name] = _checksum(array)
    step = getattr(params_or_model, "step_count", None)  # a Trainer: where to resume
    if step is not None:
        header[_STEP_KEY] = str(step)
        if params_or_model.skipped:  # the position in the epoch is steps plus skips
            header[_SKIPPED_KEY] = str(params_or_model.skipped)
        header[_SEED_KEY] = _order_text(params_or_model)
    data = st.numpy.save(tensors, metadata={**user, **header})
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(f"cannot save a checkpoint to '{os.fspath(path)}': it is a "
                                "directory (give a file name inside it)")
    replicas = getattr(params_or_model, "replicas", None)  # a data-parallel Trainer
    if replicas is None or replicas.is_root:  # replicas are identical: rank 0 writes
        _write_atomic(target, data)
    if replicas is not None:
        replicas.barrier()  # nobody loads before the file is complete
    return target


def _write_atomic(target: Path, data: bytes) -> None:
    """Write ``data`` so that ``target`` is either the old file or the new one.  The
    temporary file is in the target's directory because ``os.replace`` is atomic only within
    one file system, and made by ``os.open(..., 0o666)``, not ``mkstemp`` (mode 0600), so the
    checkpoint gets the umask's permissions; ``O_EXCL`` never clobbers anything."""
    directory = target.parent
    tmp = directory / f".{target.name}.{uuid.uuid4().hex[:16]}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp, flags, 0o666)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)  # may write less than asked (e.g. signals)
                view = view[written:]
            os.fsync(fd)  # the bytes are on disk before the rename makes them the checkpoint
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:  # KeyboardInterrupt too: never leave the temporary file behind
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    # the rename made durable (POSIX); the checkpoint is complete either way, so a file
    # system or platform that cannot sync a directory (Windows) is not an error
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _numpy_dtype(value: Any) -> np.dtype | None:
    """The NumPy dtype of a stored NumPy array or torch tensor (None: NumPy has none)."""
    try:
        return np.dtype(str(value.dtype).removeprefix("torch."))
    except TypeError:
        return None


def load(params_or_model: Any, path: str | os.PathLike[str], *, strict: bool = True
         ) -> LoadReport:
    """Load parameter values from a safetensors file keyed by parameter name, after checking
    that every one fits.  ``params_or_model`` is what :func:`save` takes (a Graph may be loaded
    before a ``Model`` is built on it).  Checks, all before anything is written:

    - names: ``strict=True`` wants every parameter in the file and nothing else; with
      ``strict=False`` the rest is reported in the :class:`LoadReport`.
    - shapes: three-row shapes where recorded (``3->2`` never loads into ``2,3``; labels
      compared where both name an axis), else memory order; a mismatch fails in both modes.
    - dtypes must cast safely (float16 into float32; float64 into float32 is refused).
    - data: the recorded CRC-32s; the step count: at most 19 ASCII digits.

    A :class:`~tensig.model.train.Trainer` also takes the saved data order (warning where its
    own differs).  A failed check or a file that is not what :func:`save` writes raises
    :class:`CheckpointError` and changes nothing; a missing file ``FileNotFoundError``.  Loaded
    values are copies, on the device of the values they replace.
    """
    st = _safetensors()
    params, _ = _parameters(params_or_model)
    _check_names(params)
    shown = os.fspath(path)
    by_name = {t.name: t for t in params}
    with _open(st, shown) as f:
        header = dict(f.metadata() or {})
        keys = list(f.keys())
        version = header.get(_FORMAT_KEY)
        _check_header(shown, header, keys, version)
        checked = any(k.startswith(_CRC_PREFIX) for k in header)
        problems: list[str] = []
        matched: list[tuple[Any, str, str | None]] = []  # (parameter, target dtype, checksum)
        present = set(keys)
        missing = tuple(n for n in by_name if n not in present)
        unexpected = tuple(k for k in keys if k not in by_name)
        if strict:
            problems += [f"{_kind(by_name[n])} is missing from the file (strict=False "
                         "loads the tensors it has)" for n in missing]
            problems += [f"the file has '{k}', which is no parameter here (strict=False "
                         "ignores it)" for k in unexpected]
        for t in params:  # in the model's order, so reports read like the architecture
            key = t.name
            if key not in present:
                continue
            slot = f.get_slice(key)
            file_dims = tuple(int(d) for d in slot.get_shape())
            file_shape: Shape | None = None
            if version is not None:
                text = header.get(_SHAPE_PREFIX + key)
                file_shape = _header_shape(text)
                if file_shape is None or file_shape.int_dims != file_dims:
                    shown_text = text if text is None or len(text) <= 60 else text[:57] + "..."
                    problems.append(f"{_kind(t)}: the tensig shape recorded in the "
                                    f"header ({shown_text!r}) does not describe the stored tensor "
                                    f"{file_dims}: the file is damaged")
                    continue
            model_shape = _concrete_shape(t)
            same = (_fits(file_shape, model_shape) if file_shape is not None
                    else file_dims == model_shape.int_dims)
            if not same:
                where = "" if file_shape is not None else (
                    f" (memory order {model_shape.int_dims})")
                theirs = file_shape if file_shape is not None else f"memory order {file_dims}"
                problems.append(f"{_kind(t)} has shape {model_shape}{where} in the model but "
                                f"{theirs} in the file")
                continue
            code = slot.get_dtype()
            source = _NUMPY_DTYPES.get(code)
            store = t.graph.store
            target = _numpy_dtype(store.read(t.val)) if store.has(t.val) else _initial_dtype(t)
            if source is None:
                problems.append(f"{_kind(t)} is stored as {code}, which NumPy cannot read")
            elif target is None:
                problems.append(f"{_kind(t)} holds a {store.read(t.val).dtype} value, "
                                "which tensig checkpoints cannot load into")
            elif not np.can_cast(source, target, casting="safe"):
                problems.append(f"{_kind(t)} is {target} in the model but {np.dtype(source)} "
                                "in the file (casting would lose precision)")
            else:
                crc = header.get(_CRC_PREFIX + key) if version is not None else None
                bad = (f"the checksum recorded in the header ({crc!r}) is not 8 hex digits"
                       if crc is not None and not _CRC_TEXT.fullmatch(crc) else
                       "no checksum is recorded for it, though the file records them"
                       if crc is None and checked else None)  # (a key's name was damaged)
                if bad is not None:
                    problems.append(f"{_kind(t)}: {bad}: the file is damaged")
                    continue
                matched.append((t, str(target), crc))
        step, skipped, seed = (_count(header, key, what, problems) if version is not None
                               else None for key, what in (
                                   (_STEP_KEY, "step count"),
                                   (_SKIPPED_KEY, "count of skipped batches"),
                                   (_SEED_KEY, "shuffle seed")))
        if problems:
            raise CheckpointError(shown, problems)
        # read everything, compare checksums and convert, still without touching a store
        staged = []
        for t, dtype, crc in matched:
            raw = f.get_tensor(t.name)
            if crc is not None and _checksum(raw) != crc:
                problems.append(f"{_kind(t)}: its data does not match the checksum recorded "
                                f"when it was saved ({_checksum(raw)} instead of {crc}): the "
                                "file is damaged")
            elif not problems:
                staged.append((t, _for_graph(t, _aligned_copy(raw, np.dtype(dtype)))))
        if problems:
            raise CheckpointError(shown, problems)

    for t, value in staged:
        t.graph.store.write(t.val, value)
    if step is not None and hasattr(params_or_model, "step_count"):
        # a Trainer resumes its schedule and Adam's bias corrections where the file left
        # off, and its place in the epoch (the steps plus the batches skipped)
        params_or_model.step_count, params_or_model.skipped = step, skipped or 0
        if _SEED_KEY in header:
            _adopt_order(params_or_model, header[_SEED_KEY], seed)
    user = {k: v for k, v in header.items()
            if version is None or not k.startswith(_RESERVED_PREFIX)}
    # (a strict load that got here had nothing missing and nothing unexpected)
    return LoadReport(tuple(t.name for t, _ in staged), missing, unexpected, user)


def _check_header(shown: str, header: Mapping[str, str], tensors: Iterable[str],
                  version: str | None) -> None:
    """tensig's own header keys, first: a damaged one would leave what it guards unchecked (a
    flipped bit in ``tensig.format`` makes the file foreign, in ``tensig.crc32.w`` leaves ``w``
    without its checksum)."""
    ours = sorted(k for k in header if k.startswith(_RESERVED_PREFIX))
    if version is None and ours:
        raise CheckpointError(shown, [f"the header has tensig entries (such as {ours[0]!r}) "
                                      f"but no {_FORMAT_KEY!r}: the file is damaged"])
    if version is not None and version != FORMAT_VERSION:
        raise CheckpointError(shown, [f"tensig checkpoint format {version!r}; this tensig "
                                      f"reads format {FORMAT_VERSION!r}"])
    known = {_FORMAT_KEY, _STEP_KEY, _SKIPPED_KEY, _SEED_KEY} | {
        prefix + name for prefix in (_SHAPE_PREFIX, _CRC_PREFIX) for name in tensors}
    stray = [k for k in ours if k not in known]
    if stray:
        raise CheckpointError(shown, [f"the header has {k!r}, which this tensig does not write "
                                      "for this file's tensors: the file is damaged (or from a "
                                      "newer tensig)" for k in stray])


def _order_text(trainer: Trainer) -> str:
    """A trainer's data order as the header keeps it: its seed, or ``unshuffled``."""
    return str(trainer.seed) if trainer.shuffle else "unshuffled"


def _adopt_order(trainer: Trainer, text: str, seed: int | None) -> None:
    """Give a loaded trainer the saved run's data order, so its step count points at the batch
    the saved run took next; another order warns, naming both."""
    mine = _order_text(trainer)
    if text == mine:
        return

    def said(order: str) -> str:
        return "no shuffling" if order == "unshuffled" else f"shuffle seed {order}"

    warnings.warn(f"the checkpoint's data order ({said(text)}) replaces this trainer's "
                  f"({said(mine)}), so training goes on with the batches the saved run would "
                  "have taken; set trainer.seed and trainer.shuffle after load() for another "
                  "order", UserWarning, stacklevel=3)
    trainer.shuffle, trainer.seed = seed is not None, seed or 0


def _count(header: Mapping[str, str], key: str, what: str, problems: list[str]) -> int | None:
    """The whole number the header holds at ``key`` (None: none, or an ``unshuffled`` seed);
    other text is a problem naming ``what``."""
    text = header.get(key)
    if text is None or (key == _SEED_KEY and text == "unshuffled"):
        return None
    # a seed may be any non-negative int NumPy takes (secrets.randbits(256), say): as many
    # digits as Python turns into an int by default
    digits = 4300 if key == _SEED_KEY else 19
    if not re.fullmatch(f"[0-9]{{1,{digits}}}", text):
        problems.append(f"the header's {what} {text[:40]!r} is not a whole number of at most "
                        f"{digits} digits: the file is damaged")
        return None
    return int(text)


def _initial_dtype(t: Any) -> np.dtype:
    """The dtype a tensor without a value will get: a buffer's initialiser's (dropout's counter
    is float64), else float32."""
    if t.kind == "buffer" and t.init is not None:
        return np.asarray(t.init(t.shape.int_dims)).dtype
    return np.dtype(np.float32)


def _open(st: Any, shown: str) -> Any:
    """``safe_open`` on a regular file only (a directory gives a bare "No such device", a FIFO
    would block)."""
    try:
        mode = os.stat(shown).st_mode
        if stat.S_ISDIR(mode):
            raise CheckpointError(shown, ["is a directory, not a checkpoint file (give the path "
                                          "of a .safetensors file inside it)"])
        if not stat.S_ISREG(mode):
            raise CheckpointError(shown, ["is not a regular file (a pipe, socket or device)"])
        return st.safe_open(shown, framework="numpy")
    except FileNotFoundError:
        raise FileNotFoundError(f"checkpoint '{shown}' does not exist") from None
    except st.SafetensorError as e:
        raise CheckpointError(shown, [f"not a readable safetensors file ({e})"]) from None
    except OSError as e:
        raise CheckpointError(shown, [f"cannot be read ({e.strerror or e})"]) from None


def _fits(saved: Shape, model: Shape) -> bool:
    """The same rows and sizes, and the same label wherever both name an axis."""
    return all(saved.row(k) == model.row(k) for k in KINDS) and all(
        a is None or b is None or a == b
        for k in KINDS for a, b in zip(saved.row_bases(k), model.row_bases(k), strict=True))


def _header_shape(text: str | None) -> Shape | None:
    """The shape a header records; None when absent or not :func:`save`'s canonical text
    (matched linearly before the dims parser, which evaluates arithmetic, sees it)."""
    if text is None or len(text) > _MAX_SHAPE_TEXT or not _SHAPE_TEXT.fullmatch(text):
        return None
    try:
        return Shape.parse(text)
    except (ValueError, TypeError):
        return None


def _aligned_copy(raw: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``raw`` copied into a ``dtype`` array on a 64-byte boundary, as torch's CPU allocator
    aligns: a torch graph keeps the NumPy memory given, and a BLAS may pick its kernel by
    alignment (:meth:`tensig.backends.torch.TorchBackend.fused_update`)."""
    size = raw.size * dtype.itemsize
    memory = np.empty(size + _ALIGN, np.uint8)
    start = -memory.ctypes.data % _ALIGN
    out = memory[start:start + size].view(dtype).reshape(raw.shape)
    out[...] = raw
    return out


def _for_graph(t: Any, array: np.ndarray) -> Any:
    """The array as the parameter's graph stores it, on the old value's device or the graph's."""
    store = t.graph.store
    old = store.read(t.val) if store.has(t.val) else None
    return t.graph.array(array, device=getattr(old, "device", None))
