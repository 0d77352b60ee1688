"""The character-level GPT demo (:mod:`tensig.demos.gpt`): the shipped corpus, training on both
backends, the memory bill against the measured peak, and sampling."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from tensig.demos import gpt
from tensig.model import graph as G
from tensig.model.train import Trainer, adam

CFG = gpt.SMALL


def test_the_shipped_corpus_is_what_compose_writes():
    text = gpt.TEXT.read_text(encoding="utf-8")
    assert text == gpt.compose()
    assert 100_000 < len(text.encode()) < 300_000  # a few hundred KB at most


def test_corpus_windows_are_next_character_pairs():
    c = gpt.corpus(16, "abcabcabca\n" * 20)
    assert c.vocab == "\nabc"
    assert c.train_x.shape[1] == c.train_y.shape[1] == 16
    np.testing.assert_array_equal(c.train_x[:, 1:], c.train_y[:, :-1])
    assert c.decode(c.train_x[0]) == ("abcabcabca\n" * 2)[:16]


@pytest.mark.parametrize("backend, steps, bound", [("numpy", 60, 2.6), ("torch", 40, 2.9)])
def test_the_demo_trains_below_a_stated_validation_loss(backend, steps, bound, capsys,
                                                        tmp_path):
    """A short run of the small model (fixed seeds): the validation loss falls well below
    the uniform guess's ln(38) = 3.64 nats per character."""
    if backend == "torch":
        pytest.importorskip("torch")
    val = gpt.main(steps=steps, backend=backend, cfg=CFG, plot=str(tmp_path / "loss.png"),
                   samples=2)
    out = capsys.readouterr().out
    assert val < bound, out
    assert "memory bill at float32" in out and "tokens" in out
    assert f"validation loss {val:.3f}" in out


def test_the_memory_bill_agrees_with_the_measured_peak():
    """The bill (``graph.memory()``: every tensor and gradient, before anything is allocated)
    against the peak of NumPy's traced allocations (NumPy reports its buffers to
    ``tracemalloc``) while the graph is built, compiled, initialised and trained for two
    steps: within 20%."""
    c = gpt.corpus(gpt.CONFIG.T)
    tracemalloc.start()
    try:
        with G.new_graph() as g:
            m = gpt.build(c.train_x, c.train_y, len(c.vocab), gpt.CONFIG)
            bill = sum(b for _, _, b in g.memory("float32"))
            trainer = Trainer(m.loss, adam(m.params, lr=1e-3), {m.x: c.train_x, m.t: c.train_y})
            for s in range(2):
                trainer.step(trainer.rows_of(s))
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert abs(bill / peak - 1) <= 0.2, (bill, peak)


def test_samples_come_from_the_vocabulary_and_keep_their_prompts():
    c = gpt.corpus(CFG.T)
    with G.new_graph():
        m = gpt.build(c.train_x, c.train_y, len(c.vocab), CFG)
        lines = gpt.sample(G.Model(m.logits), m, c, ["One day,", "Later, M"], length=20)
    assert [ln[:8] for ln in lines] == ["One day,", "Later, M"]
    assert all(len(ln) == 20 and set(ln) <= set(c.vocab) for ln in lines)


def test_sampling_reads_only_earlier_positions():
    """Causal attention: the logits at a position do not change when later positions do (what
    lets ``sample`` fill the context one character at a time)."""
    c = gpt.corpus(CFG.T)
    with G.new_graph():
        m = gpt.build(c.train_x, c.train_y, len(c.vocab), CFG)
        model = G.Model(m.logits)
        xs = c.train_x[:CFG.batch].copy()
        model.set(m.x, xs)
        before = np.array(model.run())
        xs[:, 10:] = (xs[:, 10:] + 1) % len(c.vocab)
        model.set(m.x, xs)
        after = np.array(model.run())
    np.testing.assert_array_equal(before[:, :10], after[:, :10])
    assert not np.allclose(before[:, 10:], after[:, 10:])


@pytest.mark.parametrize("name", ["numpy", "torch"])
def test_the_step_primitives_agree_with_the_generic_formulas(name):
    """GELU, (log-)softmax and normalisation with their gradients: NumPy's in-place code and
    torch's kernels against the generic formulas of ``Backend`` on NumPy (what JAX and Dask
    run), in float64, over trailing and leading axes."""
    from tensig.backends import backend_named
    from tensig.backends.base import Backend

    if name == "torch":
        pytest.importorskip("torch")
    ours, ref = backend_named(name), backend_named("numpy")
    rng = np.random.default_rng(3)
    x, y, g = (rng.standard_normal((3, 5, 7)) * 3 for _ in range(3))
    a = ours.asarray
    host = ours.to_numpy
    eps = 64 * np.finfo(np.float64).eps * 7 * 9  # a few passes over rows of 7
    p = Backend.softmax(ref, y, 2)
    pairs = [
        (ours.gelu(a(x)), Backend.gelu(ref, x)),
        (ours.gelu_backward(a(x), a(g)), Backend.gelu_backward(ref, x, g)),
        (ours.softmax(a(y), 2), p),
        (ours.softmax_backward(a(p), a(g), 2), Backend.softmax_backward(ref, p, g, 2)),
        (ours.log_softmax(a(y), 2), np.log(p)),
        (ours.log_softmax_backward(a(np.log(p)), a(g), 2),
         Backend.log_softmax_backward(ref, np.log(p), g, 2)),
    ]
    for axes in [(2,), (1, 2), (0,)]:
        n = Backend.normalize(ref, x, axes, 1e-5)  # value, mean, 1/sqrt(var + eps)
        got = ours.normalize(a(x), axes, 1e-5)
        pairs += [*zip(got, n, strict=True),
                  (ours.normalize_backward(a(x), *got, a(g), axes, 1e-5),
                   Backend.normalize_backward(ref, x, *n, g, axes, 1e-5))]
        # with a learned scale and shift (one cell per normalised cell): value, gradients
        cells = tuple(x.shape[i] for i in axes)
        scale, shift = rng.standard_normal(cells), rng.standard_normal(cells)
        n = Backend.layer_norm(ref, x, scale, shift, axes, 1e-5)
        got = ours.layer_norm(a(x), a(scale), a(shift), axes, 1e-5)
        pairs += [(got[0], n[0]), *zip(ours.layer_norm_backward(
            a(g), a(x), got, a(scale), a(shift), axes, 1e-5, True), Backend.layer_norm_backward(
            ref, g, x, n, scale, shift, axes, 1e-5, True), strict=True)]
        # the gradient laid out against x's order (as a GEMM's transposed result arrives)
        gf = np.asfortranarray(g)
        pairs += zip(ours.layer_norm_backward(a(gf), a(x), got, a(scale), a(shift), axes,
                                              1e-5, True), Backend.layer_norm_backward(
            ref, g, x, n, scale, shift, axes, 1e-5, True), strict=True)
    # an embedding's gradient: repeated ids added (unsorted, some rows never hit)
    ids = rng.integers(0, 9, 40)
    rows = rng.standard_normal((40, 4))
    want = np.zeros((11, 4))
    np.add.at(want, ids, rows)
    pairs.append((ours.add_rows(11, a(ids), a(rows)), want))
    for got, want in pairs:
        np.testing.assert_allclose(host(got), want, rtol=eps, atol=eps)
    assert np.all(host(a(x)) == x)  # the in-place code leaves its inputs alone
