"""Checkpoints: exact round trips on both backends and across them, atomic writes under
failures and a crash, and refusals (shapes, names, dtypes, damaged files) that change
nothing."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("safetensors")

import safetensors
import safetensors.numpy

from arrays import host as A
from tensig.model import checkpoint
from tensig.model import graph as G
from tensig.model.checkpoint import CheckpointError, LoadReport, load, save
from tolerance import assert_equal_up_to_rounding

SRC = Path(__file__).resolve().parents[1] / "src"


def build(backend="numpy", *, hidden=4, out=2, seed=0, model=True):
    """A two-layer net whose parameter shapes come from inference: layer1.w 3->hidden,
    layer1.b hidden, layer2.w hidden->out, layer2.b out."""
    with G.new_graph(backend) as g:
        x = G.leaf("x", np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3), batch=1)
        with G.scope("layer1"):
            w1, b1 = G.param("w", output=[hidden], seed=seed), G.param("b", seed=seed)
        with G.scope("layer2"):
            w2, b2 = G.param("w", output=[out], seed=seed), G.param("b", seed=seed)
        y = w2 @ (w1 @ x + b1).relu() + b2
        m = G.Model(y) if model else None
    params = {t.name: t for t in (w1, b1, w2, b2)}
    return g, m, params


def values(params):
    """Each parameter's value as a NumPy array (a copy)."""
    out = {}
    for name, t in params.items():
        v = t.graph.store.read(t.val)
        out[name] = v.detach().cpu().numpy().copy() if isinstance(v, torch.Tensor) else v.copy()
    return out


def assert_aligned(tensors, *, own=True):
    """Each tensor's value starts on a 64-byte boundary (torch's CPU allocator's) and, with
    ``own``, is a torch allocation of its own rather than a view into another array: what a
    BLAS that picks its kernel by alignment sees the same in a resumed and an uninterrupted
    run."""
    for t in tensors:
        v = t.graph.store.read(t.val)
        address = v.data_ptr() if isinstance(v, torch.Tensor) else v.ctypes.data
        assert address % 64 == 0, f"{t.name} starts at {address} % 64 = {address % 64}"
        if own and isinstance(v, torch.Tensor):
            assert v.untyped_storage().data_ptr() == address, f"{t.name} is a view"


def snapshot(g):
    """The store's contents: the same array objects, and their values."""
    return {k: (v, np.array(v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v))
            for k, v in g.store.arrays.items()}


def assert_refused(g, m, path, want, **kw):
    """``load`` refuses with ``want`` in the message and leaves the store as it was."""
    before = snapshot(g)
    with pytest.raises(CheckpointError, match=re.escape(want)):
        load(m, path, **kw)
    assert_unchanged(g, before)


def assert_unchanged(g, before):
    assert g.store.arrays.keys() == before.keys()
    for k, (obj, val) in before.items():
        now = g.store.arrays[k]
        assert now is obj
        now = now.detach().cpu().numpy() if isinstance(now, torch.Tensor) else now
        np.testing.assert_array_equal(now, val)


def header(path):
    with safetensors.safe_open(str(path), framework="numpy") as f:
        return dict(f.metadata() or {}), list(f.keys())


# -- round trips --------------------------------------------------------------------------


@pytest.mark.parametrize(("src", "dst"), [("numpy", "numpy"), ("torch", "torch"),
                                          ("numpy", "torch"), ("torch", "numpy")])
def test_round_trip_is_exact_on_and_across_backends(tmp_path, src, dst):
    _, m1, p1 = build(src, seed=0)
    saved = values(p1)
    path = save(m1, tmp_path / "ckpt.safetensors")
    g2, m2, p2 = build(dst, seed=7)  # same architecture, different initial values
    assert not np.array_equal(values(p2)["layer1.w"], saved["layer1.w"])

    report = load(m2, path)

    assert report == LoadReport(("layer1.w", "layer1.b", "layer2.w", "layer2.b"))
    array_type = torch.Tensor if dst == "torch" else np.ndarray
    for name, t in p2.items():
        v = g2.store.read(t.val)
        assert type(v) is array_type
        got = values({name: t})[name]
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, saved[name])
    out1, out2 = m1.run(), m2.run()
    out1 = out1.numpy() if isinstance(out1, torch.Tensor) else out1
    out2 = out2.numpy() if isinstance(out2, torch.Tensor) else out2
    if src == dst:  # one library, the same calls on equal inputs: the same bits
        np.testing.assert_array_equal(out1, out2)
    else:  # NumPy's BLAS and torch's sum in their own orders (1 ulp apart on some CPUs)
        w1, b1, w2, b2 = (np.abs(saved[n]).astype(np.float64)
                          for n in ("layer1.w", "layer1.b", "layer2.w", "layer2.b"))
        x = np.abs(np.linspace(-1, 1, 15).reshape(5, 3))
        magnitude = (x @ w1.T + b1) @ w2.T + b2  # the forward pass on absolute values
        assert_equal_up_to_rounding(out1, out2, dtype=np.float32, length=(3 + 1) + (4 + 1),
                                    magnitude=magnitude)


def test_loaded_values_are_copies_not_views_of_the_file(tmp_path):
    _, m1, _ = build()
    path = save(m1, tmp_path / "a.safetensors")
    g2, m2, p2 = build(seed=3)
    load(m2, path)
    w = g2.store.read(p2["layer1.w"].val)
    # its own memory (64-byte aligned: a view of the larger buffer it was placed in)
    assert w.flags.writeable and w.base.flags.owndata and w.ctypes.data % 64 == 0
    w += 1.0  # an in-place update (what an optimiser does) must work
    path.unlink()
    assert np.isfinite(w).all()


def test_header_holds_tensig_shapes_and_the_file_is_plain_safetensors(tmp_path):
    _, m, p = build(hidden=4, out=2)
    path = save(m, tmp_path / "ckpt.safetensors", metadata={"step": "12", "note": "hi"})
    meta, keys = header(path)
    assert sorted(keys) == sorted(p)
    assert meta == {
        "tensig.format": "1", "step": "12", "note": "hi",
        "tensig.shape.layer1.w": "3->4", "tensig.shape.layer1.b": "4",
        "tensig.shape.layer2.w": "4->2", "tensig.shape.layer2.b": "2",
        # CRC-32 of each tensor's little-endian bytes, computed independently here
        **{f"tensig.crc32.{n}": f"{zlib.crc32(v.astype('<f4').tobytes()):08x}"
           for n, v in values(p).items()},
    }
    plain = safetensors.numpy.load_file(str(path))
    assert plain["layer1.w"].shape == (4, 3)  # memory order: output, then input
    report = load(m, path)
    assert report.metadata == {"step": "12", "note": "hi"}


def test_load_into_a_graph_before_the_model_is_built_keeps_the_loaded_values(tmp_path):
    _, m1, p1 = build()
    saved = values(p1)
    path = save(m1, tmp_path / "ckpt.safetensors")
    g2, _, p2 = build(seed=5, model=False)
    assert not any(g2.store.has(t.val) for t in p2.values())
    load(g2, path)
    G.Model(g2.tensors[-1])  # the output, created last
    assert values(p2).keys() == saved.keys()
    for name, v in values(p2).items():
        np.testing.assert_array_equal(v, saved[name])


def test_save_from_parameter_tensors_and_from_a_graph(tmp_path):
    g, _, p = build()
    save([p["layer1.w"], p["layer1.w"], p["layer2.b"]], tmp_path / "some.safetensors")
    assert sorted(header(tmp_path / "some.safetensors")[1]) == ["layer1.w", "layer2.b"]
    save(g, tmp_path / "all.safetensors")
    assert sorted(header(tmp_path / "all.safetensors")[1]) == sorted(p)


# -- atomicity ----------------------------------------------------------------------------


def _fail_half_way(monkeypatch):
    """The disk fills up after half of the checkpoint is written."""
    real = os.write

    def write(fd, data):
        real(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", write)


def _fail_fsync(monkeypatch):
    def fsync(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", fsync)


def _fail_replace(monkeypatch):
    def replace(a, b):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(os, "replace", replace)


def _interrupt(monkeypatch):
    def fsync(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.parametrize(("failure", "raises"), [
    (_fail_half_way, OSError), (_fail_fsync, OSError), (_fail_replace, PermissionError),
    (_interrupt, KeyboardInterrupt)])
def test_a_failed_save_leaves_the_previous_checkpoint_and_no_temporary_file(
        tmp_path, monkeypatch, failure, raises):
    _, m, p = build()
    path = save(m, tmp_path / "ckpt.safetensors")
    before = path.read_bytes()
    p["layer1.w"].graph.store.write(p["layer1.w"].val, np.zeros((4, 3), np.float32))

    with monkeypatch.context() as mp:
        failure(mp)
        with pytest.raises(raises):
            save(m, path)

    assert sorted(os.listdir(tmp_path)) == ["ckpt.safetensors"]
    assert path.read_bytes() == before
    save(m, path)  # and the next save works
    assert path.read_bytes() != before


def test_a_failed_first_save_leaves_nothing(tmp_path, monkeypatch):
    _, m, _ = build()
    _fail_half_way(monkeypatch)
    with pytest.raises(OSError, match="No space"):
        save(m, tmp_path / "ckpt.safetensors")
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []


def test_a_crash_mid_write_never_damages_the_checkpoint(tmp_path):
    """The process dies (no cleanup runs) after the new bytes were written to the temporary
    file: the old checkpoint is intact and loads."""
    _, m, p = build()
    path = save(m, tmp_path / "ckpt.safetensors")
    before = path.read_bytes()
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import numpy as np
        from test_checkpoint import build
        from tensig.model.checkpoint import save
        _, m, p = build(seed=9)
        os.fsync = lambda fd: os._exit(3)   # power cut before the data reached the disk
        save(m, {str(path)!r})
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC),
                                                         os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert path.read_bytes() == before
    leftovers = [n for n in os.listdir(tmp_path) if n != "ckpt.safetensors"]
    assert all(n.startswith(".ckpt.safetensors.") and n.endswith(".tmp") for n in leftovers)
    _, m2, p2 = build(seed=4)
    load(m2, path)
    for name, v in values(p2).items():
        np.testing.assert_array_equal(v, values(p)[name])


def test_a_save_that_cannot_serialise_touches_no_file(tmp_path):
    _, m, p = build("torch")
    path = save(m, tmp_path / "ckpt.safetensors")
    before = path.read_bytes()
    t = p["layer1.b"]
    t.graph.store.write(t.val, torch.zeros(4, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match=re.escape("'layer1.b' is a torch torch.bfloat16 tensor")):
        save(m, path)
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]
    assert path.read_bytes() == before


# -- refusals that change nothing ---------------------------------------------------------


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_mismatched_shapes_are_refused_naming_both_shapes(tmp_path, backend):
    _, m1, _ = build(out=2)
    path = save(m1, tmp_path / "ckpt.safetensors")
    g2, m2, _ = build(backend, out=5, seed=1)  # layer1 still matches, layer2 does not
    before = snapshot(g2)

    with pytest.raises(CheckpointError) as info:
        load(m2, path)

    msg = str(info.value)
    assert msg.startswith(f"checkpoint '{path}': 2 problems, nothing was loaded")
    assert ("parameter 'layer2.w' has shape 4->5 in the model but 4->2 in the file"
            in msg)
    assert "parameter 'layer2.b' has shape 5 in the model but 2 in the file" in msg
    assert "layer1" not in msg
    assert info.value.path == str(path) and len(info.value.problems) == 2
    assert_unchanged(g2, before)  # layer1, which matched, was not loaded either


def test_one_mismatch_reads_as_one_sentence(tmp_path):
    _, _, p1 = build(hidden=64)
    save([p1["layer1.w"]], tmp_path / "ckpt.safetensors")
    g2, _, p2 = build(hidden=128, seed=1)
    before = snapshot(g2)
    with pytest.raises(CheckpointError) as info:
        load([p2["layer1.w"]], tmp_path / "ckpt.safetensors")
    assert str(info.value) == (
        f"checkpoint '{tmp_path / 'ckpt.safetensors'}': parameter 'layer1.w' has shape "
        "3->128 in the model but 3->64 in the file (nothing was loaded)")
    assert_unchanged(g2, before)


def test_same_memory_layout_but_other_rows_is_refused(tmp_path):
    """A 4x3 grid of outputs is not a map from 3-vectors to 4-vectors."""
    g, m, p = build()
    tensors = {n: values(p)[n] for n in p}
    meta = {"tensig.format": "1", **{f"tensig.shape.{n}": str(t.shape) for n, t in p.items()}}
    meta["tensig.shape.layer1.w"] = "4,3"
    safetensors.numpy.save_file(tensors, str(tmp_path / "c.safetensors"), metadata=meta)
    assert_refused(g, m, tmp_path / "c.safetensors",
                   "'layer1.w' has shape 3->4 in the model but 4,3 in the file")


def test_a_foreign_file_is_compared_by_memory_order(tmp_path):
    _, _, p1 = build()
    saved = values(p1)
    safetensors.numpy.save_file(saved, str(tmp_path / "foreign.safetensors"),
                                metadata={"origin": "elsewhere"})
    g2, m2, p2 = build(seed=2)
    report = load(m2, tmp_path / "foreign.safetensors")
    assert report.metadata == {"origin": "elsewhere"}
    for name, v in values(p2).items():
        np.testing.assert_array_equal(v, saved[name])

    bad = dict(saved, **{"layer2.w": np.zeros((2, 5), np.float32)})
    safetensors.numpy.save_file(bad, str(tmp_path / "bad.safetensors"))
    before = snapshot(g2)
    with pytest.raises(CheckpointError,
                       match=r"'layer2.w' has shape 4->2 \(memory order \(2, 4\)\) in the "
                             r"model but memory order \(2, 5\) in the file"):
        load(m2, tmp_path / "bad.safetensors")
    assert_unchanged(g2, before)


def test_missing_and_unexpected_parameters_strict_and_not(tmp_path):
    _, _, p1 = build()
    saved = values(p1)
    subset = {k: v for k, v in saved.items() if k != "layer2.b"}
    subset["extra.w"] = np.ones(3, np.float32)
    safetensors.numpy.save_file(subset, str(tmp_path / "c.safetensors"))
    g2, m2, p2 = build(seed=1)
    before = snapshot(g2)
    old_b = values(p2)["layer2.b"]

    with pytest.raises(CheckpointError) as info:
        load(m2, tmp_path / "c.safetensors")
    msg = str(info.value)
    assert "parameter 'layer2.b' is missing from the file" in msg
    assert "the file has 'extra.w', which is no parameter here" in msg
    assert_unchanged(g2, before)

    report = load(m2, tmp_path / "c.safetensors", strict=False)
    assert report.loaded == ("layer1.w", "layer1.b", "layer2.w")
    assert report.missing == ("layer2.b",)
    assert report.unexpected == ("extra.w",)
    now = values(p2)
    for name in report.loaded:
        np.testing.assert_array_equal(now[name], saved[name])
    np.testing.assert_array_equal(now["layer2.b"], old_b)


def test_non_strict_still_refuses_a_shape_mismatch(tmp_path):
    _, m1, _ = build(out=2)
    path = save(m1, tmp_path / "ckpt.safetensors")
    g2, m2, _ = build(out=3, seed=1)
    before = snapshot(g2)
    want = "'layer2.b' has shape 3 in the model but 2 in the file"
    with pytest.raises(CheckpointError, match=re.escape(want)):
        load(m2, path, strict=False)
    assert_unchanged(g2, before)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_a_damaged_file_is_refused(tmp_path, damage):
    _, m, _ = build()
    path = save(m, tmp_path / "ckpt.safetensors")
    data = path.read_bytes()
    path.write_bytes({"garbage": b"not a checkpoint at all" * 10,
                      "truncated": data[: len(data) - 7], "empty": b""}[damage])
    g2, m2, _ = build(seed=1)
    before = snapshot(g2)
    with pytest.raises(CheckpointError, match=r"checkpoint '.*ckpt.safetensors': not a "
                                              r"readable safetensors file"):
        load(m2, path)
    assert_unchanged(g2, before)


def test_a_header_that_contradicts_its_tensor_is_damage(tmp_path):
    _, m, p = build()
    meta = {"tensig.format": "1", **{f"tensig.shape.{n}": str(t.shape) for n, t in p.items()}}
    meta["tensig.shape.layer1.b"] = "5"
    safetensors.numpy.save_file(values(p), str(tmp_path / "c.safetensors"), metadata=meta)
    with pytest.raises(CheckpointError, match=r"'layer1.b': the tensig shape recorded in the "
                                              r"header \('5'\) does not describe"):
        load(m, tmp_path / "c.safetensors")


def test_a_newer_format_is_refused(tmp_path):
    _, m, p = build()
    safetensors.numpy.save_file(values(p), str(tmp_path / "c.safetensors"),
                                metadata={"tensig.format": "2"})
    with pytest.raises(CheckpointError, match="format '2'; this tensig reads format '1'"):
        load(m, tmp_path / "c.safetensors")


def test_a_missing_file(tmp_path):
    _, m, _ = build()
    with pytest.raises(FileNotFoundError, match=r"checkpoint '.*nope\.safetensors' does not"):
        load(m, tmp_path / "nope.safetensors")


def test_dtypes_load_only_when_no_precision_is_lost(tmp_path):
    g, m, p = build()
    saved = values(p)
    safetensors.numpy.save_file({k: v.astype(np.float16) for k, v in saved.items()},
                                str(tmp_path / "half.safetensors"))
    load(m, tmp_path / "half.safetensors")
    for name, t in p.items():
        v = g.store.read(t.val)
        assert v.dtype == np.float32
        np.testing.assert_array_equal(v, saved[name].astype(np.float16).astype(np.float32))

    safetensors.numpy.save_file({k: v.astype(np.float64) for k, v in saved.items()},
                                str(tmp_path / "double.safetensors"))
    assert_refused(g, m, tmp_path / "double.safetensors",
                   "'layer1.w' is float32 in the model but float64 in the file")


# -- names, arguments ---------------------------------------------------------------------


def test_duplicate_names_are_refused_before_writing(tmp_path):
    with G.new_graph() as g:
        x = G.leaf("x", np.ones((2, 3), np.float32), batch=1)
        w_a, w_b = G.param("w", output=[2]), G.param("w", output=[2])
        m = G.Model(w_a @ x + w_b @ x)
    before = snapshot(g)
    with pytest.raises(ValueError, match="two parameters are named 'w'"):
        save(m, tmp_path / "ckpt.safetensors")
    assert os.listdir(tmp_path) == []
    safetensors.numpy.save_file({"w": np.zeros((2, 3), np.float32)},
                                str(tmp_path / "w.safetensors"))
    with pytest.raises(ValueError, match="two parameters are named 'w'"):
        load(m, tmp_path / "w.safetensors")
    assert_unchanged(g, before)


def test_metadata_must_be_strings_outside_the_reserved_prefix(tmp_path):
    _, m, _ = build()
    with pytest.raises(ValueError, match="reserved"):
        save(m, tmp_path / "a.safetensors", metadata={"tensig.shape.x": "3"})
    with pytest.raises(TypeError, match="strings to strings"):
        save(m, tmp_path / "a.safetensors", metadata={"step": 3})
    assert os.listdir(tmp_path) == []


def test_nothing_to_save(tmp_path):
    g, _, p = build(model=False)
    with pytest.raises(ValueError, match="nothing to save"):
        save(g, tmp_path / "a.safetensors")
    with pytest.raises(ValueError, match=re.escape("'layer1.w' has no value yet")):
        save([p["layer1.w"]], tmp_path / "a.safetensors")
    with pytest.raises(TypeError, match=re.escape("'x' is a leaf, not a parameter")):
        save([t for t in g.tensors if t.kind == "leaf"], tmp_path / "a.safetensors")
    with pytest.raises(TypeError, match="not int"):
        save(3, tmp_path / "a.safetensors")
    assert os.listdir(tmp_path) == []


def test_without_safetensors_the_error_names_the_extra(tmp_path, monkeypatch):
    _, m, _ = build()
    monkeypatch.setitem(sys.modules, "safetensors", None)
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    with pytest.raises(ImportError, match=r"pip install tensig\[train\]"):
        save(m, tmp_path / "a.safetensors")
    with pytest.raises(ImportError, match=r"pip install tensig\[train\]"):
        load(m, tmp_path / "a.safetensors")
    assert checkpoint.FORMAT_VERSION == "1"


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_training_resumes_exactly_from_a_trainer_checkpoint(tmp_path, backend):
    """A Trainer's checkpoint holds its parameters, Adam's moments and the step count; a fresh
    trainer loaded from it continues with the same bits as the original: the same code on
    the same state, read from equally aligned arrays (on torch the fused update's arrays
    are allocations of their own, not views into one flat array, and loaded values start
    on torch's 64-byte boundary)."""
    from tensig.demos import moons

    xs, ys, _, _ = moons.data()
    onehot = np.eye(moons.CLASSES, dtype=np.float32)[ys]
    rows = [np.arange(i * moons.BATCH, (i + 1) * moons.BATCH) for i in range(8)]
    with G.new_graph(backend):
        a = moons.build(xs, onehot)
        ta = a.trainer(xs, onehot, 0.01)
        for r in rows[:4]:
            ta.step(r)
        if backend == "torch":
            assert_aligned([*a.params, *ta.opt.state])
        path = save(ta, tmp_path / "ckpt.safetensors")
        state = values({t.name: t for t in [*a.params, *ta.opt.state]})
        after = [ta.step(r) for r in rows[4:]]
        final = values({p.name: p for p in a.params})
    _, names = header(path)
    assert "w1.adam_m" in names and "b3.adam_v" in names and "w1" in names
    with G.new_graph(backend):
        b = moons.build(xs, onehot)
        tb = b.trainer(xs, onehot, 0.01)
        report = load(tb, path)
        assert tb.step_count == 4 and "w1.adam_v" in report.loaded
        assert_aligned([*b.params, *tb.opt.state], own=False)  # NumPy memory shared
        loaded = values({t.name: t for t in [*b.params, *tb.opt.state]})
        resumed = [tb.step(r) for r in rows[4:]]
        got = values({p.name: p for p in b.params})
    # the state is copied: parameters, moments (and the step count above) are the same bits
    assert loaded.keys() == state.keys()
    for name, v in state.items():
        np.testing.assert_array_equal(loaded[name], v, err_msg=name)
    # the same code on the same state: the same bits (a wrong step count would change
    # Adam's bias correction by percents)
    np.testing.assert_array_equal(resumed, after)
    for name, v in final.items():
        np.testing.assert_array_equal(got[name], v, err_msg=name)


def test_a_trainer_needs_the_optimizer_state_unless_not_strict(tmp_path):
    """A parameters-only checkpoint loads into a trainer only with strict=False (the moments
    and the step count then stay as they are), and a damaged step count is refused."""
    from tensig.demos import moons

    xs, ys, _, _ = moons.data()
    onehot = np.eye(moons.CLASSES, dtype=np.float32)[ys]
    with G.new_graph():
        m = moons.build(xs, onehot)
        t = m.trainer(xs, onehot, 0.01)
        t.step(np.arange(moons.BATCH))
        params_only = save(t.model, tmp_path / "params.safetensors")
        with pytest.raises(CheckpointError,
                           match=r"optimizer state 'w1\.adam_m' is missing from the file"):
            load(t, params_only)
        report = load(t, params_only, strict=False)
        assert "w1.adam_m" in report.missing and t.step_count == 1
        full = save(t, tmp_path / "full.safetensors")
        tensors = safetensors.numpy.load_file(str(full))
        meta, _ = header(full)
        meta["tensig.step"] = "three"
        (tmp_path / "bad.safetensors").write_bytes(safetensors.numpy.save(tensors, meta))
        before = snapshot(m.loss.graph)
        with pytest.raises(CheckpointError, match="step count 'three'"):
            load(t, tmp_path / "bad.safetensors")
        assert_unchanged(m.loss.graph, before)


def test_a_load_lands_on_the_graphs_device(tmp_path):
    """Values loaded before any model exists go to the graph's device (torch's meta device
    here, standing in for CUDA), not to the CPU."""
    _, m1, _ = build("torch")
    path = save(m1, tmp_path / "ckpt.safetensors")
    with G.new_graph("torch", device="meta") as g:
        x = G.leaf("x", np.ones((5, 3), np.float32), batch=1)
        with G.scope("layer1"):
            w1, b1 = G.param("w", output=[4]), G.param("b")
        with G.scope("layer2"):
            w2, b2 = G.param("w", output=[2]), G.param("b")
        _ = w2 @ (w1 @ x + b1).relu() + b2
        load(g, path)
        assert {str(g.store.read(t.val).device) for t in (w1, b1, w2, b2)} == {"meta"}


@pytest.mark.parametrize(("backend", "mid_epoch"),
                         [("numpy", False), ("numpy", True), ("torch", True)])
def test_fit_resumes_exactly_through_a_checkpoint(tmp_path, backend, mid_epoch):
    """``a.fit(2); save(a, p); a.fit(2)`` and a loaded copy's ``fit(2)`` take the same batches
    (the order is a function of the seed and the epoch, the position the step count), so they
    follow the same losses; a checkpoint taken mid-epoch resumes with the next batch."""
    from tensig.demos import moons

    xs, ys, _, _ = moons.data()
    onehot = np.eye(moons.CLASSES, dtype=np.float32)[ys]
    with G.new_graph(backend):
        a = moons.build(xs, onehot)
        ta = a.trainer(xs, onehot, 0.01)
        ta.fit(1)
        if mid_epoch:
            for _ in range(3):
                ta.step(ta.rows_of(ta.step_count))
        path = save(ta, tmp_path / "ckpt.safetensors")
        start = len(ta.history)
        ta.fit(2)
        after = ta.history[start:]
    with G.new_graph(backend):
        b = moons.build(xs, onehot)
        tb = b.trainer(xs, onehot, 0.01)
        load(tb, path)
        tb.fit(2)
    # the same code on the same loaded state: the same bits (see the test above)
    np.testing.assert_array_equal(tb.history, after)
    # shuffled batches that differed would differ by far more than rounding
    assert len(after) == 2 * ta.steps_per_epoch - (3 if mid_epoch else 0)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_fit_resumes_exactly_after_skipped_batches(tmp_path, backend):
    """With ``on_nonfinite="warn"`` a batch whose loss is NaN is consumed without a step: the
    position in the epoch is the steps plus the skips, so the checkpoint keeps both (with the
    step count alone a loaded trainer took the skipped batches again and fell behind)."""
    from tensig.model import blocks as B
    from tensig.model.train import Trainer, adam

    rng = np.random.default_rng(7)
    xs = rng.standard_normal((40, 6)).astype(np.float32)
    xs[5, 0] = np.nan  # one batch an epoch is skipped
    ys = rng.integers(0, 3, 40)

    def trainer():
        with G.new_graph(backend) as g:
            x, y = G.leaf("x", xs[:8], batch=1), G.leaf("y", ys[:8], batch=1)
            logits = G.param("w2", output=[3]) @ (G.param("w1", output=[16]) @ x).relu()
            params = [t for t in g.tensors if t.kind == "param"]
            return Trainer(B.cross_entropy(logits, y), adam(params, 0.01), {x: xs, y: ys},
                           seed=3, on_nonfinite="warn")

    with pytest.warns(RuntimeWarning, match="update was skipped"):
        a = trainer()
        a.fit(1)
        path = save(a, tmp_path / "ckpt.safetensors")
        start = len(a.history)
        a.fit(2)
        b = trainer()
        load(b, path)
        assert (b.step_count, b.skipped) == (4, 1)
        b.fit(2)
    np.testing.assert_array_equal(b.history, a.history[start:])
    assert len(b.history) == 8 and (a.skipped, b.skipped) == (3, 3)


# -- buffers: running statistics, dropout's counter ------------------------------------------


def bn_net(backend="numpy", *, p=0.0):
    """A net with batch norm (and dropout when ``p``): ``w2 @ drop(relu(bn(w1 @ x)))``, with
    its SGD trainer on 40 rows of random data, batches of 8."""
    from tensig.model import blocks as B
    from tensig.model.train import Trainer, sgd

    rng = np.random.default_rng(4)
    xs = rng.standard_normal((40, 3)).astype(np.float32)
    ys = rng.integers(0, 2, 40)
    with G.new_graph(backend) as g:
        x, y = G.leaf("x", xs[:8], batch=1), G.leaf("y", ys[:8], batch=1)
        w1, w2 = G.param("w1", output=[5]), G.param("w2", output=[2])
        h = B.batch_norm(w1 @ x, name="bn").relu()
        if p:
            h = B.dropout(h, p, seed=1)
        logits = w2 @ h
        loss = B.cross_entropy(logits, y)
        params = [t for t in g.tensors if t.kind == "param"]
        trainer = Trainer(loss, sgd(params, 0.1), {x: xs, y: ys})
    return g, trainer, logits


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_running_statistics_are_saved_and_restored_with_the_model(tmp_path, backend):
    """A model's checkpoint holds batch norm's running statistics beside its parameters: a
    fresh copy loaded from it evaluates (with those statistics) to the same bits."""
    g1, t1, logits1 = bn_net(backend)
    t1.fit(2)
    path = save(t1.model, tmp_path / "bn.safetensors")
    meta, keys = header(path)
    assert {"bn.running_mean", "bn.running_var", "bn.scale", "bn.shift"} <= set(keys)
    assert meta["tensig.shape.bn.running_var"] == "5"
    saved = values({k: t for t in g1.tensors if (k := t.name) in keys})
    assert not np.array_equal(saved["bn.running_var"], np.ones(5, np.float32))  # it moved
    g1.eval()
    want = A(G.Model(logits1).run())
    g2, t2, logits2 = bn_net(backend)
    report = load(t2.model, path)
    assert {"bn.running_mean", "bn.running_var"} <= set(report.loaded)
    g2.eval()
    np.testing.assert_array_equal(A(G.Model(logits2).run()), want)
    # a trainer's checkpoint holds them too, and a graph's
    path = save(t1, tmp_path / "trainer.safetensors")
    assert "bn.running_mean" in header(path)[1]
    assert "bn.running_mean" in header(save(g1, tmp_path / "graph.safetensors"))[1]


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_dropout_masks_resume_exactly_through_a_checkpoint(tmp_path, backend):
    """Dropout's counter is in a trainer's checkpoint: a resumed run draws the masks an
    uninterrupted one draws, so it follows the same losses (a counter back at zero would
    repeat the first masks and change every loss after the resume)."""
    _, t1, _ = bn_net(backend, p=0.5)
    t1.fit(1)
    path = save(t1, tmp_path / "ckpt.safetensors")
    assert "dropout.counter" in header(path)[1]
    start = len(t1.history)
    t1.fit(2)
    after = t1.history[start:]
    _, t2, _ = bn_net(backend, p=0.5)
    load(t2, path)
    t2.fit(2)
    # the same code on the same loaded state: the same bits (see the trainer test above)
    np.testing.assert_array_equal(t2.history, after)
    want = values({p.name: p for p in t1.opt.params})
    for name, v in values({p.name: p for p in t2.opt.params}).items():
        np.testing.assert_array_equal(v, want[name], err_msg=name)
    if backend == "torch":  # 15, 5, 5 and 10 numbers: in one flat array, three of the four
        assert_aligned(t2.opt.params)  # would start off the 64-byte boundary


def test_a_buffer_loads_into_a_graph_before_its_model_is_built(tmp_path):
    """Dropout's counter is float64: loaded before a model exists it keeps its dtype (not
    refused as float64 into float32), and the model built afterwards keeps the value."""
    g1, t1, _ = bn_net(p=0.5)
    t1.fit(1)
    path = save(g1, tmp_path / "g.safetensors")
    from tensig.model import blocks as B

    with G.new_graph() as g2:
        x = G.leaf("x", np.zeros((8, 3), np.float32), batch=1)
        w1, w2 = G.param("w1", output=[5]), G.param("w2", output=[2])
        out = w2 @ B.dropout(B.batch_norm(w1 @ x, name="bn").relu(), 0.5, seed=1)
        load(g2, path)
        m = G.Model(out)
        counter = next(t for t in g2.tensors if t.name == "dropout.counter")
        assert A(counter.numpy()).dtype == np.float64
        assert A(counter.numpy())[0] == t1.step_count  # one mask a step
        m.run()
        assert A(counter.numpy())[0] == t1.step_count + 1


@pytest.mark.parametrize("saved, built", [((0, True), (5, True)), ((3, True), (3, False)),
                                          ((0, False), (7, True))])
def test_a_loaded_trainer_takes_the_saved_data_order(tmp_path, saved, built):
    """The step count alone resumes on the saved order only when the new trainer was built
    with the same seed and shuffle flag: the checkpoint keeps them, and a trainer built with
    another order takes the saved one with a warning naming both, so its next batches are
    the saved run's (checked against the saved run itself)."""
    from tensig.model.train import Trainer, sgd

    rng = np.random.default_rng(11)
    xs, ys = rng.standard_normal((24, 3)).astype(np.float32), rng.integers(0, 2, 24)

    def trainer(seed, shuffle):
        with G.new_graph():
            x, y = G.leaf("x", xs[:4], batch=1), G.leaf("y", ys[:4], batch=1)
            w = G.param("w", output=[2])
            from tensig.model import blocks as B
            return Trainer(B.cross_entropy(w @ x, y), sgd([w], 0.1), {x: xs, y: ys},
                           seed=seed, shuffle=shuffle)

    a = trainer(*saved)
    a.fit(1)
    a.step(a.rows_of(a.step_count))
    path = save(a, tmp_path / "ckpt.safetensors")
    b = trainer(*built)
    with pytest.warns(UserWarning, match="data order") as caught:
        load(b, path)
    said = str(caught[0].message)
    for seed, shuffle in (saved, built):
        assert (f"shuffle seed {seed}" if shuffle else "no shuffling") in said
    assert b.shuffle == saved[1] and (b.seed == saved[0] or not saved[1])
    for step in range(b.step_count, b.step_count + 2 * b.steps_per_epoch):
        np.testing.assert_array_equal(b.rows_of(step), a.rows_of(step))
    a.fit(1)
    b.fit(1)
    assert len(b.history) == b.steps_per_epoch - 1  # the rest of the epoch
    np.testing.assert_allclose(b.history, a.history[-len(b.history):], rtol=1e-6)


def test_a_trainer_with_the_saved_order_loads_without_a_warning(tmp_path):
    """The same seed and flag: nothing to say (warnings are errors here)."""
    import warnings

    from tensig.demos import moons

    xs, ys, _, _ = moons.data()
    onehot = np.eye(moons.CLASSES, dtype=np.float32)[ys]
    with G.new_graph():
        a = moons.build(xs, onehot).trainer(xs, onehot, 0.01)
        a.step(a.rows_of(0))
        path = save(a, tmp_path / "ckpt.safetensors")
    with G.new_graph():
        b = moons.build(xs, onehot).trainer(xs, onehot, 0.01)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            load(b, path)
    assert (b.step_count, b.seed, b.shuffle) == (1, 0, True)


def test_a_trainer_with_a_seed_over_128_bits_saves_and_loads(tmp_path):
    """NumPy seeds by any non-negative int (``secrets.randbits(256)``, say), and such a
    trainer trains: its checkpoint loads, and the loaded trainer takes that seed."""
    from tensig.model import blocks as B
    from tensig.model.train import Trainer, sgd

    rng = np.random.default_rng(3)
    xs, ys = rng.standard_normal((8, 3)).astype(np.float32), rng.integers(0, 2, 8)
    seed = 2**256 - 1

    def trainer(seed):
        with G.new_graph():
            x, y = G.leaf("x", xs[:4], batch=1), G.leaf("y", ys[:4], batch=1)
            w = G.param("w", output=[2])
            return Trainer(B.cross_entropy(w @ x, y), sgd([w], 0.1), {x: xs, y: ys},
                           seed=seed)

    a = trainer(seed)
    a.step(a.rows_of(0))
    path = save(a, tmp_path / "ckpt.safetensors")
    b = trainer(seed)
    load(b, path)
    assert (b.step_count, b.seed, b.shuffle) == (1, seed, True)
    np.testing.assert_array_equal(b.rows_of(1), a.rows_of(1))
