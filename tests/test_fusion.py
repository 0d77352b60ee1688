"""Horizontal fusion (``tensig.fusion``): repeated pointwise blocks run once over flat arrays.

The oracle is the same code run one assignment at a time (fusion switched off), and for the
optimizers ``torch.optim`` itself on several parameters of different shapes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tensig.model.fusion as fusion
from arrays import expr_of
from tensig.execution.ir import Code, Expr
from tensig.model import graph as G
from tensig.model.compile import compile_code
from tensig.model.fusion import Run, fuse_repeats
from tensig.model.train import Trainer, adam, sgd

SHAPES = [(3, 2), (4,), (2, 2, 3)]


def test_an_optimizers_blocks_are_found():
    with G.new_graph("numpy"):
        ps = [G.param(f"p{i}", output=list(s), input=[]) for i, s in enumerate(SHAPES)]
        code = adam(ps, lr=0.1).code
    items = fuse_repeats(code)
    assert len(items) == 1 and isinstance(items[0], Run)
    assert [len(b) for b in items[0].blocks] == [3, 3, 3]
    with G.new_graph("numpy"):
        ps = [G.param(f"p{i}", output=list(s), input=[]) for i, s in enumerate(SHAPES)]
        code = sgd(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1).code
    items = fuse_repeats(code)
    assert len(items) == 1 and len(items[0].blocks) == 3


def test_blocks_that_cannot_run_as_one_stay_apart():
    with G.new_graph("numpy"):
        x = G.leaf("x", np.ones((2, 3), np.float32))
        y = G.leaf("y", np.ones((2, 3), np.float32))
        z = G.leaf("z", np.ones((2, 3), np.float32))
        big = G.leaf("big", np.ones((3,), np.float32))      # shared, more than one element
        s = G.leaf("s", np.ones((1,), np.float32))          # shared scalar
        # the second block reads what the first writes
        chained = Code().assign(y.val, Expr("mul", (x.val, s.val))) \
                        .assign(z.val, Expr("mul", (y.val, s.val)))
        assert not any(isinstance(i, Run) for i in fuse_repeats(chained))
        # a shared operand larger than one element does not broadcast over a flat array
        shared_big = Code().assign(y.val, Expr("mul", (x.val, big.val))) \
                           .assign(z.val, Expr("mul", (x.val, big.val)))
        assert not any(isinstance(i, Run) for i in fuse_repeats(shared_big))
        # a buffer the same in some blocks only
        partial = Code().assign(y.val, Expr("add", (x.val, s.val))) \
                        .assign(z.val, Expr("add", (x.val, y.val)))
        assert not any(isinstance(i, Run) for i in fuse_repeats(partial))
        # a block whose buffers differ in shape
        w = G.leaf("w", np.ones((3,), np.float32))
        v = G.leaf("v", np.ones((2, 3), np.float32))
        mixed = Code().assign(y.val, Expr("mul", (x.val, s.val))) \
                      .assign(v.val, Expr("mul", (w.val, s.val)))
        assert not any(isinstance(i, Run) for i in fuse_repeats(mixed))
        # not pointwise
        summed = Code().assign(y.val, Expr("id", (x.val,)), accum="+", init=True,
                               logic="b|i => b|i")
        assert not any(isinstance(i, Run) for i in fuse_repeats(summed))


@pytest.mark.parametrize("kind, kwargs", [
    ("sgd", {"lr": 0.01, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1}),
    ("adam", {"lr": 0.05}),
    ("adamw", {"lr": 0.05, "weight_decay": 0.1}),
])
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_fused_updates_of_several_parameters_equal_torch_optim(kind, kwargs, backend):
    """Three parameters of different shapes, one fused update: torch.optim's numbers."""
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((8, 4)).astype(np.float32)
    ys = rng.standard_normal((8, 2)).astype(np.float32)
    w1_0 = rng.standard_normal((3, 4)).astype(np.float32)
    b1_0 = rng.standard_normal(3).astype(np.float32)
    w2_0 = rng.standard_normal((2, 3)).astype(np.float32)
    with G.new_graph(backend):
        x = G.leaf("x", xs, batch=1)
        y = G.leaf("y", ys, batch=1)
        w1 = G.param("w1", output=[3], init=lambda s, r: w1_0.copy())
        b1 = G.param("b1", output=[3], init=lambda s, r: b1_0.copy())
        w2 = G.param("w2", output=[2], init=lambda s, r: w2_0.copy())
        diff = w2 @ (w1 @ x + b1).tanh() - y
        loss = G.einsum1("...|...->... => |->0", diff * diff)
        params = [w1, b1, w2]
        opt = sgd(params, **kwargs) if kind == "sgd" else \
            adam(params, decoupled=kind == "adamw", **kwargs)
        trainer = Trainer(loss, opt, {x: xs, y: ys}, shuffle=False)
        assert any(isinstance(s, fusion.FusedBlocks) for s in trainer.routine.steps)
        refs = [torch.tensor(a, requires_grad=True) for a in (w1_0, b1_0, w2_0)]
        cls = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
        topt = cls[kind](refs, **kwargs)
        tx, ty = torch.tensor(xs), torch.tensor(ys)
        for _ in range(6):
            trainer.step(np.arange(8))
            topt.zero_grad()
            tw1, tb1, tw2 = refs
            ((torch.tanh(tx @ tw1.T + tb1) @ tw2.T - ty) ** 2).sum().backward()
            topt.step()
        for p, ref in zip(params, refs, strict=True):
            assert tuple(int(d) for d in p.shape.dims) == tuple(ref.shape)
            np.testing.assert_allclose(p.numpy(), ref.detach().numpy(), rtol=2e-5, atol=2e-6)


# A drawn block: each assignment writes one of the block's buffers "p", "q", "r" from an
# expression over them, the shared scalar "s" and numbers, as a store or an accumulation.
OPS = st.sampled_from(["add", "sub", "mul", "max", "div"])
ATOMS = st.sampled_from(["p", "q", "r", "s", 0.5, 2.0])


def exprs(depth: int = 2):
    if depth == 0:
        return ATOMS
    return st.one_of(ATOMS, st.tuples(st.sampled_from(["exp", "neg", "sqrt", "relu"]),
                                      exprs(depth - 1)),
                     st.tuples(OPS, exprs(depth - 1), exprs(depth - 1)))


def reads_a_buffer(tree) -> bool:
    return isinstance(tree, str) or (isinstance(tree, tuple) and
                                     any(reads_a_buffer(a) for a in tree[1:]))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(block=st.lists(st.tuples(st.sampled_from(["p", "q", "r"]),
                                st.sampled_from([None, "+", "-", "*"]), exprs()),
                      min_size=1, max_size=3),
       rounds=st.integers(1, 3), rewrite=st.booleans())
def test_fused_runs_equal_one_assignment_at_a_time(backend, block, rounds, rewrite):
    """Random blocks over three parameters' worth of buffers, run ``rounds`` times (the
    flat-array reuse), with a buffer replaced in the store between runs when ``rewrite``
    (the reuse must notice): fused and unfused stores agree."""
    block = [(lhs, acc, e) for lhs, acc, e in block if reads_a_buffer(e)]
    assume(block)  # assignments of numbers alone are not fused
    results = []
    for fused in (True, False):
        rng = np.random.default_rng(2)
        with G.new_graph(backend) as g:
            s = G.leaf("s", np.array([0.75], np.float32))
            values = [{n: rng.uniform(0.5, 1.5, shape).astype(np.float32) for n in "pqr"}
                      for shape in SHAPES]
            groups = [{n: G.leaf(f"{n}{i}", v) for n, v in vals.items()}
                      for i, vals in enumerate(values)]
            everything = [t for grp in groups for t in grp.values()]
            model = G.Model(s)
            for grp, vals in zip(groups, values, strict=True):
                for n, t in grp.items():
                    model.set(t, vals[n])
            code = Code()
            for grp in groups:
                bufs = {**{n: t.val for n, t in grp.items()}, "s": s.val}
                for lhs, acc, e in block:
                    code.assign(bufs[lhs], expr_of(e, bufs), accum=acc)
            with pytest.MonkeyPatch.context() as m:
                if not fused:
                    m.setattr(fusion, "MAX_BLOCK", 0)
                routine = compile_code(code, g.array_type)
            assert any(isinstance(st_, fusion.FusedBlocks) for st_ in routine.steps) == fused
            store = model.graph.store
            with np.errstate(all="ignore"):
                for k in range(rounds):
                    routine.run(store)
                    if rewrite and k == 0:
                        t = groups[1]["q"]
                        store.write(t.val, model.graph.array(np.full(
                            tuple(int(d) for d in t.shape.dims), 0.25, np.float32)))
            results.append({t.name: (np.array(np.asarray(store.read(t.val))),
                                     tuple(store.read(t.val).shape)) for t in everything})
    fused_r, plain_r = results
    for name, (value, shape) in plain_r.items():
        assert fused_r[name][1] == shape, name
        # The same pointwise ops on one flat array or on each part: a library may take a SIMD
        # lane for an element in one and a scalar tail loop in the other (1-4 ulp apart for
        # exp on some CPUs), and nested exp/div amplify that, so allow ~1000 float32 ulps; a
        # fusion bug (a wrong buffer, a lost write) is off by O(1).
        np.testing.assert_allclose(fused_r[name][0], value, rtol=1000 * np.finfo(np.float32).eps,
                                   atol=1e-6, equal_nan=True, err_msg=name)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_missing_buffer_or_a_different_dtype_runs_one_by_one(backend):
    """The fused step gives the store's own error for a buffer with no array, and leaves
    arrays of another dtype to the unfused steps (no silent promotion)."""
    with G.new_graph(backend) as g:
        ps = [G.leaf(f"p{i}", np.ones(s, np.float32)) for i, s in enumerate(SHAPES)]
        qs = [G.leaf(f"q{i}", np.ones(s, np.float32)) for i, s in enumerate(SHAPES)]
        model = G.Model(ps[0])
        for t in [*ps, *qs]:
            model.set(t, np.ones(tuple(int(d) for d in t.shape.dims), np.float32))
        code = Code()
        for p, q in zip(ps, qs, strict=True):
            code.assign(q.val, Expr("mul", (p.val, 2.0)))
        routine = compile_code(code, g.array_type)
        assert isinstance(routine.steps[0], fusion.FusedBlocks)
        store = model.graph.store
        store.arrays.pop(ps[1].val.key)
        with pytest.raises(KeyError, match=r"p1\.value has no array yet"):
            routine.run(store)
        wide = np.full(SHAPES[1], 3.0, np.float64)
        store.write(ps[1].val, model.graph.array(wide))
        routine.run(store)
        got = [store.read(q.val) for q in qs]
    assert "float64" in str(got[1].dtype) and "float32" in str(got[0].dtype)
    np.testing.assert_array_equal(np.asarray(got[1]), np.full(SHAPES[1], 6.0))
    np.testing.assert_array_equal(np.asarray(got[2]), np.full(SHAPES[2], 2.0))


def test_torch_without_its_private_flatten_falls_back_to_cat(monkeypatch):
    """The torch backend's one-call flatten and split are private torch functions; without
    them the public ``cat`` and slicing give the same views."""
    import torch._C._nn as nn

    for name in ("flatten_dense_tensors", "unflatten_dense_tensors"):
        monkeypatch.delattr(nn, name)
    rng = np.random.default_rng(3)
    values = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    with G.new_graph("torch") as g:
        ps = [G.leaf(f"p{i}", v) for i, v in enumerate(values)]
        qs = [G.leaf(f"q{i}", v) for i, v in enumerate(values)]
        model = G.Model(ps[0])
        for t, v in [*zip(ps, values, strict=True), *zip(qs, values, strict=True)]:
            model.set(t, v)
        code = Code()
        for p, q in zip(ps, qs, strict=True):
            code.assign(q.val, Expr("add", (Expr("mul", (p.val, 3.0)), q.val)))
        routine = compile_code(code, g.array_type)
        assert isinstance(routine.steps[0], fusion.FusedBlocks)
        routine.run(model.graph.store)
        routine.run(model.graph.store)
        got = [np.asarray(model.graph.store.read(q.val)) for q in qs]
    for v, out in zip(values, got, strict=True):
        np.testing.assert_allclose(out, v * 7, rtol=1e-6)
