"""Fuzzers for surfaces the other attack files cover least, and the defects they found.

Seeded and guarded as ``test_attacks_fuzz.py``'s (``TENSIG_FUZZ_EXAMPLES``/``TENSIG_FUZZ_SEED``
search further).  The oracles:

- compiled graphs (``tensig.graph``) of random chains of contractions, reductions, tropical
  products and pointwise operations: the same chain computed with NumPy;
- ``rank.lift`` and reranked lifted functions at random ranks and frames: a loop over the
  frame positions (Remora's prefix agreement written out), or an error for a frame that is
  no prefix;
- ``tensig.checkpoint.load`` of truncated, bit-flipped and re-headed files: the saved values,
  or a ``CheckpointError`` that leaves the model untouched;
- the CLI on odd arguments: an exit status and a one-line message, never a traceback;
- ``verify`` on random small NumPy programs: a report (findings or a note), never an error of
  its own, within the time guard;
- ``@shaped`` with expressions of several names: brute force over the names' sizes.

The defects these found have their regressions beside the modules fixed: test_rank.py
(reranking complementary ranks), test_attacks_checkpoint.py (damaged checksum and format
keys), test_attacks_exec.py (a sum over an empty axis beside inf), test_attacks_cli.py (an
empty path).
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import json
import struct
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from tensig import Shaped, ShapeError, rank, shaped
from tensig.check.decorator import SignatureError
from tensig.check.verify import verify
from tensig.cli import main
from tensig.model import graph as G
from test_attacks_fuzz import fuzz, guard

# -- compiled graphs against NumPy ---------------------------------------------------------------

SIZES = {"a": 2, "b": 3, "c": 1, "d": 4, "e": 0}


def _labels(rnd, sizes):
    return rnd.sample(sorted(sizes), rnd.randint(0, 3))


def _spec(*sides):
    return "; ".join(", ".join(s) for s in sides[:-1]) + " => " + ", ".join(sides[-1])


def _aligned(a, labels, union):
    """``a`` with an axis per label of ``union`` (size 1 where it has none), in that order."""
    order = [labels.index(x) for x in union if x in labels]
    return np.transpose(a, order).reshape([SIZES[x] if x in labels else 1 for x in union])


def _outer(op, la, lb, out):
    """The outer sum or max-plus of operands labelled ``la`` and ``lb``, reduced to ``out``:
    NumPy broadcasting, as a function of the two values."""
    union = list(dict.fromkeys(la + lb))
    gone = tuple(i for i, u in enumerate(union) if u not in out)
    kept = [u for u in union if u in out]

    def run(a, b):
        total = np.broadcast_to(_aligned(a, la, union) + _aligned(b, lb, union),
                                [SIZES[u] for u in union])
        r = total.max(gone, initial=-np.inf) if op == "tropical" else total.sum(gone)
        return np.transpose(r, [kept.index(u) for u in out])

    return run


def _step(rnd, pool):
    """One random operation on tensors of ``pool`` (graph tensors and their labels): the
    tensor, its labels, NumPy's function of the operands' values and the operands' places."""
    kind = rnd.choice(["einsum", "einsum1", "tropical", "outer_sum", "einmax1", "unary", "add"])
    i = rnd.randrange(len(pool))
    t, la = pool[i]
    if kind in ("einsum1", "einmax1"):
        out = rnd.sample(la, rnd.randint(0, len(la)))
        spec = _spec(la, out)
        fn = (functools.partial(np.einsum, _letters(la, out)) if kind == "einsum1" else
              functools.partial(_outer("tropical", la, [], out), b=np.zeros(())))
        return getattr(G, kind)(spec, t), out, fn, (i,), f"{kind}({spec!r})"
    if kind == "unary":
        name = rnd.choice(["relu", "sin", "cos", "neg"])
        fn = {"relu": lambda v: np.maximum(v, 0), "sin": np.sin, "cos": np.cos,
              "neg": np.negative}[name]
        return (-t if name == "neg" else getattr(t, name)()), la, fn, (i,), name
    j = rnd.randrange(len(pool))
    u, lb = pool[j]
    if kind == "add":  # pointwise: of one shape
        return (t + u, la, np.add, (i, j), "add") if la == lb else None
    union = list(dict.fromkeys(la + lb))
    out = rnd.sample(union, rnd.randint(0, len(union)))
    spec = _spec(la, lb, out)
    fn = (functools.partial(np.einsum, _letters(la, lb, out)) if kind == "einsum" else
          _outer(kind, la, lb, out))
    return getattr(G, kind)(spec, t, u), out, fn, (i, j), f"{kind}({spec!r})"


def _letters(*sides):
    """NumPy subscripts for label lists (the last is the result)."""
    return ",".join("".join(s) for s in sides[:-1]) + "->" + "".join(sides[-1])


def _chain(rnd, make, sizes):
    """1-3 tensors ``make(name, shape)`` and a chain of 1-4 random operations on them: the
    last tensor, the leaves' values, and NumPy's function of the leaves' values."""
    leaves = [_labels(rnd, sizes) for _ in range(rnd.randint(1, 3))]
    values = [np.random.default_rng(rnd.randrange(99)).uniform(-2, 2, [SIZES[x] for x in lbl])
              for lbl in leaves]
    pool = [(make(f"x{k}", v.shape), lbl) for k, (v, lbl) in enumerate(zip(values, leaves,
                                                                           strict=True))]
    steps = []
    for _ in range(rnd.randint(1, 4)):
        made = _step(rnd, pool)
        if made is not None:
            pool.append(made[:2])
            steps.append(made[2:])
    note(f"leaves: {leaves}, steps: {[what for _, _, what in steps]}")

    def run(*xs):
        vals = list(xs)
        for fn, places, _ in steps:
            vals.append(fn(*[vals[k] for k in places]))
        return vals[-1]

    return pool[-1][0], values, run


@fuzz(40)
@given(st.randoms(use_true_random=False))
def test_fuzz_compiled_graph_chains_as_numpy(rnd):
    """A chain of random operations on leaves, compiled by ``G.Model``: NumPy's value
    (``einsum``; broadcast sums and maxima, with the neutral element over empty axes) where
    it is a number or an infinity."""
    with G.new_graph():
        made = {}
        t, values, run = _chain(rnd, lambda name, shape: made.setdefault(
            name, G.leaf(name, np.zeros(shape))), SIZES)
        m = G.Model(t)
        for k, v in enumerate(values):
            m.set(made[f"x{k}"], v)
        with guard("graph"):
            got = m.run()
    want = run(*values)
    known = ~np.isnan(want)  # NaN (inf - inf) depends on the order of the sums: any value
    np.testing.assert_allclose(np.asarray(got)[known], want[known], rtol=1e-6, atol=1e-6)


@fuzz(30)
@given(st.randoms(use_true_random=False))
def test_fuzz_compiled_graph_gradients_as_finite_differences(rnd):
    """The same chains on parameters (no empty axes), the loss a weighted sum of the result
    plus each parameter's sum (so each has a use): ``backward``'s gradients are NumPy's
    central differences of the loss (float64)."""
    sizes = {k: v for k, v in SIZES.items() if v}
    with G.new_graph():
        made = {}
        t, values, run = _chain(rnd, lambda name, shape: made.setdefault(
            name, G.param(name, output=list(shape), input=[])), sizes)
        weights = np.random.default_rng(rnd.randrange(99)).uniform(-1, 1, t.shape.int_dims)
        m = G.Model(functools.reduce(lambda s, p: s + G.einsum1("... => ", p), made.values(),
                                     G.einsum1("... => ", t * G.leaf("w", weights))))
        for k, v in enumerate(values):
            m.set(made[f"x{k}"], v)
        with guard("graph backward"):
            m.backward()
        got = [np.asarray(made[f"x{k}"].grad.numpy(), np.float64) for k in range(len(values))]
    for k, v in enumerate(values):
        want = np.zeros_like(v)
        for cell in np.ndindex(v.shape):
            e = np.zeros_like(v)
            e[cell] = 1e-6
            hi, lo = ([x + e * s if j == k else x for j, x in enumerate(values)] for s in (1, -1))
            want[cell] = ((run(*hi) - run(*lo)) * weights).sum() / 2e-6 + 1
        np.testing.assert_allclose(got[k], want, rtol=1e-3, atol=1e-3)


# -- rank.lift against a loop over the frame -----------------------------------------------------


def _cell_rank(r, n):
    return n if r is None else (max(n + r, 0) if r < 0 else r)


def _loop(fn, ranks, args, cell):
    """Remora's application written out: frames by prefix agreement, ``fn`` per position,
    replicated over the frame axes an argument lacks; ``None`` where the frames disagree."""
    if any(r is not None and r > x.ndim for r, x in zip(ranks, args, strict=True)):
        return None
    frames = [x.shape[:x.ndim - _cell_rank(r, x.ndim)] for r, x in zip(ranks, args, strict=True)]
    principal = max(frames, key=len)
    if any(principal[:len(f)] != f for f in frames):
        return None
    out = np.empty(principal + cell)
    for pos in np.ndindex(*principal):
        out[pos] = fn(*[x[pos[:len(f)]] for x, f in zip(args, frames, strict=True)])
    return out


def _total(*xs):
    return np.float64(sum(np.sum(x) * (k + 1) for k, x in enumerate(xs)))


@fuzz(100)
@given(st.randoms(use_true_random=False))
def test_fuzz_lift_and_rerank_as_a_loop_over_the_frame(rnd):
    """``lift(fn, ranks=..., result=())`` at random ranks on random shapes, and lifted
    functions reranked (an eta-expansion: the inner ranks apply inside each new cell): the
    loop's values, or a ``ShapeError`` exactly where the loop finds no frame agreement."""
    n = rnd.randint(1, 3)
    args = [np.random.default_rng(rnd.randrange(99)).integers(
        -3, 4, tuple(rnd.choice([0, 1, 2, 3]) for _ in range(rnd.randint(0, 3)))).astype(float)
        for _ in range(n)]
    ranks = [rnd.choice([0, 1, 2, -1, -2, None]) for _ in range(n)]
    lifted = rank.lift(_total, ranks=ranks, result=())
    outer = [rnd.choice([0, 1, 2, -1, None]) for _ in range(n)] if rnd.random() < 0.5 else None
    note(f"lift(ranks={ranks}) reranked {outer} on {[a.shape for a in args]}")
    if outer is None:
        f, want = lifted, _loop(_total, ranks, args, ())
    else:
        try:
            f = rank.rerank(lifted, *outer)
        except ShapeError:  # a cell rank below the inner one, refused when reranked
            assert any(o is not None and r is not None and 0 <= o < r
                       for o, r in zip(outer, ranks, strict=True))
            return
        want = _nested(ranks, outer, args)
    with guard("lift"):
        try:
            got = f(*args)
        except ShapeError as e:
            assert want is None, f"refused what the loop computes: {e}"
            return
    assert want is not None, f"computed {got!r} where the frames disagree"
    np.testing.assert_array_equal(got, want)


def _loop_fn(ranks):
    return lambda *cells: _loop(_total, ranks, cells, ())


def _nested(ranks, outer, args):
    """The eta-expansion's value: the inner loop on every outer cell (shapes may differ per
    call only in the frame, so the outer result's cell is the inner result's shape)."""
    if any(r is not None and r > x.ndim for r, x in zip(outer, args, strict=True)):
        return None
    cells = [x.shape[x.ndim - _cell_rank(r, x.ndim):] for r, x in zip(outer, args, strict=True)]
    probe = _loop(_total, ranks, [np.zeros(c) for c in cells], ())
    if probe is None:
        return None
    return _loop(_loop_fn(ranks), outer, args, probe.shape)


# -- checkpoints: damaged files ------------------------------------------------------------------


def _model():
    with G.new_graph() as g:
        x = G.leaf("x", np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), batch=1)
        with G.scope("l"):
            w, b = G.param("w", output=[2], seed=0), G.param("b", seed=0)
        m = G.Model(w @ x + b)
    return g, m


def _damaged(raw: bytes, rnd) -> bytes:
    (n,) = struct.unpack("<Q", raw[:8])
    how = rnd.choice(["truncate", "flip", "header", "length", "append"])
    if how == "truncate":
        return raw[:rnd.randrange(len(raw))]
    if how == "flip":
        data = bytearray(raw)
        for _ in range(rnd.randint(1, 3)):
            data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
        return bytes(data)
    if how == "length":
        return struct.pack("<Q", rnd.choice([0, 1, n - 1, n + 1, 2**63, 2**64 - 1])) + raw[8:]
    if how == "append":
        return raw + bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 16)))
    header = json.loads(raw[8:8 + n])
    key = rnd.choice(sorted(header))
    entry = header[key]
    if key == "__metadata__":
        k = rnd.choice(sorted(entry))
        entry[k] = rnd.choice(["", "9" * 30, "-1", "1->", "x", "2,3", "\u00e9", "0" * 8])
    else:
        field = rnd.choice(["dtype", "shape", "data_offsets"])
        entry[field] = rnd.choice({"dtype": ["F16", "F64", "I8", "BOOL", "U64", "XX", 3],
                                   "shape": [[], [0], [2, 3], [3, 2], [-1], [2**40], "2"],
                                   "data_offsets": [[0, 0], [0, 2**40], [8, 4], [0, 24]]}
                                  [field])
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + raw[8 + n:]


@fuzz(60)
@given(st.randoms(use_true_random=False))
def test_fuzz_checkpoint_load_of_damaged_files(rnd):
    """A saved checkpoint, damaged: it loads the saved values (damage that changes no value)
    or raises ``CheckpointError`` and changes nothing; never another exception."""
    pytest.importorskip("safetensors")
    from tensig.model.checkpoint import CheckpointError, load, save

    g, m = _model()
    params = [t for t in m.tensors if t.kind == "param"]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.safetensors"
        save(m, path)
        saved = [np.array(g.store.read(t.val)) for t in params]
        raw = path.read_bytes()
        damaged = _damaged(raw, rnd)
        path.write_bytes(damaged)
        note(f"{len(raw)} -> {len(damaged)} bytes, changed at "
             f"{[k for k, (a, b) in enumerate(zip(raw, damaged, strict=False)) if a != b]}: "
             f"{raw!r}")
        for t, v in zip(params, saved, strict=True):  # a load restores them or keeps these
            g.store.write(t.val, v + 1)
        with guard("load"):
            try:
                load(m, path)
                want = saved
            except CheckpointError as e:
                assert str(path) in str(e)
                want = [v + 1 for v in saved]
    for t, v in zip(params, want, strict=True):
        np.testing.assert_array_equal(g.store.read(t.val), v)


# -- the CLI on odd arguments --------------------------------------------------------------------

CLI_TOKENS = ["spec", "verify", "findings", "--json", "--param", "s=2", "s=x", "2=s", "=",
              "--result", "--use-padding", "--no-padding", "--timeout", "0", "-1", "nan",
              "1e999", "inf", "--strict", "--ignore", "TS999", "TS102", "reorder", "--help",
              "ab;bc=>ac", "i=>i", "o=+k; k => o", "a^b => ", "..v.. => ..v..", "2,3", "3,4",
              "8|3->4", "", " ", ",", "-", "x" * 300, "9" * 40, "T", "T**99", "a=>", "::",
              "nope.py", "nope.py::f", "/dev/null", "/dev/null::f", "\x00", "é", "--"]


@fuzz(150)
@given(st.randoms(use_true_random=False))
def test_fuzz_cli_on_odd_arguments(rnd):
    """Random argument lists: an exit status of 0, 1 or 2 and, on failure, a message without
    a traceback (``verify`` only in-process on paths that hold no code)."""
    argv = [rnd.choice(CLI_TOKENS) for _ in range(rnd.randint(0, 6))]
    if "verify" in argv:
        argv.append("--in-process")
    note(f"tensig {argv!r}")
    out, err = io.StringIO(), io.StringIO()
    with guard(f"tensig {argv!r}"), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        code = main(argv)
    assert code in (0, 1, 2), code
    assert "Traceback" not in out.getvalue() + err.getvalue()
    if code == 1 and argv[:1] == ["spec"] and "--json" not in argv:
        first = err.getvalue().splitlines()[0]
        assert first.split(":")[0] in ("SpecSyntaxError", "ShapeError", "ValueError",
                                       "TypeError"), first


# -- verify on random NumPy programs -------------------------------------------------------------

NP_OPS = [
    "{x}.sum(axis={ax})", "{x}.mean(axis={ax}, keepdims=True)", "{x}.T", "np.transpose({x})",
    "{x}.reshape(-1)", "{x}.reshape({x}.shape[0], -1)", "{x} @ {y}", "{x} + {y}", "{x} * {y}",
    "np.concatenate([{x}, {y}], axis={ax})", "np.stack([{x}, {y}])", "np.expand_dims({x}, 0)",
    "{x}[:, None]", "{x}[..., :1]", "np.maximum({x}, {y})", "{x}.max(axis={ax})",
    "np.where({x} > 0, {x}, {y})", "np.tile({x}, 2)", "np.repeat({x}, 2, axis={ax})",
    "np.einsum('ij,jk->ik', {x}, {y})", "np.swapaxes({x}, 0, -1)", "{x}[{x}.shape[0] // 2:]",
    "np.broadcast_to({x}, (2,) + {x}.shape)", "np.split({x}, 2)[0]", "{x}.squeeze()",
    "np.zeros_like({x})", "np.ones(({x}.shape[-1], 3))", "np.outer({x}, {y})",
    "np.linalg.norm({x}, axis={ax})", "np.cumsum({x}, axis={ax})", "{x}.flatten()[:3]",
    "np.pad({x}, 1)", "np.sort({x}, axis={ax})", "np.argmax({x}, axis={ax})",
]
SIGS = ["B T; T d => B d", "N; N =>", "B T d; B T => B d", "n m; m => n", "T T; T => T",
        "B 3 h w; 3 => B h w", "N 2; 2 N => N N", "K; K K => K"]


def _program(rnd) -> str:
    names = ["x", "y"]
    lines = []
    for k in range(rnd.randint(1, 5)):
        op = rnd.choice(NP_OPS).format(x=rnd.choice(names), y=rnd.choice(names),
                                       ax=rnd.choice([0, 1, -1]))
        lines.append(f"v{k} = {op}")
        names.append(f"v{k}")
    lines.append(f"return {names[-1]}")
    return "def f(x, y):\n" + textwrap.indent("\n".join(lines), "    ")


@fuzz(80)
@given(st.randoms(use_true_random=False))
def test_fuzz_verify_random_numpy_programs(rnd):
    """``verify`` of a random chain of NumPy operations under a random signature: a report
    (findings, or a note where it stopped), never an exception of its own, never past the
    guard."""
    src, sig = _program(rnd), rnd.choice(SIGS)
    note(f"verify({sig!r}) of\n{src}")
    scope = {"np": np}
    exec(compile(src, "<fuzz>", "exec"), scope)
    with guard(f"verify {sig!r}", 30):
        report = verify(scope["f"], sig, timeout=5)
    assert report.function == "f"
    assert all(f.message for f in report.findings)




# -- @shaped with expressions of several names against brute force -------------------------------

EXPRS = ["B*T", "T+S", "2*T - S", "B*T + 1", "(B+T)*S", "T - S", "B**2", "S*S*T", "T//2 + S",
         "(T+S) % 3", "B*(T-1)", "3", "T*S - B"]


@fuzz(150)
@given(st.randoms(use_true_random=False))
def test_fuzz_shaped_expressions_of_several_names_against_brute_force(rnd):
    """An argument binds some of ``B``, ``T``, ``S`` by plain names, another holds expressions
    of them: ``@shaped`` accepts a call when some sizes give every axis (Python's arithmetic
    on the text, names tried up to 40), and refuses it when none does and every name is
    bound by a plain use; a ``SignatureError`` otherwise, never another exception."""
    plain = rnd.sample(["B", "T", "S"], rnd.randint(0, 3))
    exprs = [rnd.choice(EXPRS) for _ in range(rnd.randint(1, 3))]
    forms = [eval(f"lambda B, T, S: {e}") for e in exprs]  # the oracle: the text as Python
    env = {n: rnd.randint(0, 5) for n in "BTS"}
    xs = tuple(env[n] + rnd.choice([0, 0, 0, 1]) for n in plain)
    ys = tuple(max(0, f(**env) + rnd.choice([0, 0, 0, 1, -1])) for f in forms)
    names = sorted({n for e in exprs for n in "BTS" if n in e} | set(plain))
    fits = any(all(f(**sizes) == y for f, y in zip(forms, ys, strict=True))
               for sizes in _bindings(names, dict(zip(plain, xs, strict=True))))
    decided = set(names) <= set(plain)
    note(f"x: {', '.join(plain)!r} {xs}, y: {', '.join(exprs)!r} {ys}: fits {fits}")

    def f(x: Shaped[np.ndarray, ", ".join(plain)], y: Shaped[np.ndarray, ", ".join(exprs)]):
        return x

    for compiled in (True, False):
        with guard(f"@shaped {plain} {exprs}"):
            try:
                shaped(compiled=compiled)(f)(np.zeros(xs), np.zeros(ys))
                got = True
            except SignatureError:
                got = False
        assert got == fits or (got and not decided), f"compiled={compiled}"


def _bindings(names, bound):
    """Every assignment of sizes 0..40 to the names ``bound`` leaves free (the rest 0)."""
    free = [n for n in names if n not in bound]
    for values in itertools.product(range(41), repeat=len(free)):
        yield dict.fromkeys("BTS", 0) | bound | dict(zip(free, values, strict=True))
