"""verify on code from more domains the other corpora touch little (tests/verify_corpus/
probe_domains_2026b.py): diffusion schedules and samplers, U-Net time embeddings, wav2vec2's
extractor, DLRM, GNN aggregation, PPO and GAE, Swin windows, MoE routing, Perceiver latents,
selective scans, RWKV, segmentation losses, cost volumes, k-means++, PCA, Kalman steps and JAX
RNNs, in NumPy, PyTorch and JAX.  Each pair is a correct function and a twin with one planted
bug; an oracle runs each correct one on real arrays of its own library."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from arrays import clean, kinds
from tensig import Float, Int
from tensig.check.verify import verify
from test_verify_realcode_domains import corpus_tests, mixes_libraries
from verify_corpus.probe_domains_2026b import ASSUMES, CASES, STOPS


def test_the_corpus_is_large_and_mixes_the_three_libraries():
    mixes_libraries(CASES, 60, 12)


# this corpus has no test that its bugs fail when run: its third test is left uncollected
(test_correct_one_verifies_and_the_bug_gives_its_code,
 test_correct_one_runs_and_returns_its_declared_shape, _) = corpus_tests(CASES, ASSUMES, STOPS)


# -- defects the corpus found, each fixed in src/tensig/check -----------------------------------


def _weighted_pick(X: Float[np.ndarray, "N D"], w: Float[np.ndarray, "D"]
                   ) -> Float[np.ndarray, "D"]:
    """Draws a row with probabilities of the wrong length (one per column)."""
    return X[np.random.default_rng(0).choice(X.shape[0], p=w / w.sum())]


def _legacy_weighted_pick(X: Float[np.ndarray, "N D"], w: Float[np.ndarray, "D"]
                          ) -> Float[np.ndarray, "D"]:
    return X[np.random.choice(len(X), p=w / w.sum())]


def test_choice_checks_its_probabilities_against_the_population():
    """NumPy raises "a and p must have same size" where N != D: verify said verified."""
    with pytest.raises(ValueError, match="same size"):
        _weighted_pick(np.ones((5, 3)), np.ones(3))
    assert _weighted_pick(np.ones((3, 3)), np.ones(3)).shape == (3,)  # N == D: it runs
    for f in (_weighted_pick, _legacy_weighted_pick):
        r = verify(f)
        assert kinds(r) == ["op-shape"] and "p" in str(r), str(r)
    assert clean(verify(lambda X: X[np.random.choice(len(X), p=X[:, 0])], "N D => D"))


def _first_step_apart(x: Float[np.ndarray, "T D"]) -> Float[np.ndarray, "D"]:
    h = np.zeros(x.shape[1])
    for i in range(x.shape[0]):
        h = h + (x[i - 1] if i > 0 else x[i])
    return h


def _last_step_apart(x: Float[np.ndarray, "T D"]) -> Float[np.ndarray, "D"]:
    h = np.zeros(x.shape[1])
    for i in reversed(range(x.shape[0])):
        h = h + (x[i] if i != 0 else np.ones(x.shape[1]))
    return h


def _far_step_apart(x: Float[np.ndarray, "T D"]) -> Float[np.ndarray, "D"]:
    """Wrong where T > 100: the branch past step 100 returns a wrong shape."""
    h = np.zeros(x.shape[1])
    for i in range(x.shape[0]):
        h = h + (x[i] if i <= 100 else x[i, :1].repeat(2))
    return h


def test_a_loop_step_against_a_step_the_loop_numbers_is_decided():
    """``if i > 0`` in a loop over ``range(T)`` (DDPM's ``noise if i > 0``): the steps counted
    from the end (``T - 5``) were compared with 0 and the branch assumed ``T - 5 > 0``, though
    the loop's numbered first steps trace the other side.  A constant past the numbered steps
    (100) still leaves a side untraced."""
    for f in (_first_step_apart, _last_step_apart):
        assert f(np.ones((1, 3))).shape == (3,) and f(np.ones((9, 3))).shape == (3,)
        r = verify(f)
        assert clean(r), str(r)
    with pytest.raises(ValueError):
        _far_step_apart(np.ones((102, 3)))
    assert kinds(verify(_far_step_apart)) == ["assumption"]


def _vector_tril_np(x: Float[np.ndarray, "T"]) -> Float[np.ndarray, "T"]:
    return np.triu(x)  # NumPy: a vector's mask broadcast, [T, T]


def test_tril_of_a_vector_is_a_square_in_numpy_and_refused_by_torch_and_jax():
    """Mamba2's segsum with ``torch.tril(torch.ones(T))`` (one size too few): torch and JAX
    raise on fewer than 2 dimensions, NumPy makes a [T, T] square; all three were verified
    as if tril kept the vector's shape."""

    def vector_tril(x: Float[torch.Tensor, "T"]) -> Float[torch.Tensor, "T"]:
        return torch.tril(x) + x.triu()

    def vector_tril_jax(x: Float[jax.Array, "T"]) -> Float[jax.Array, "T"]:
        return jnp.tril(x)

    assert np.triu(np.ones(3)).shape == (3, 3)
    for f, real in ((vector_tril, torch.ones(3)), (vector_tril_jax, jnp.ones(3))):
        with pytest.raises(Exception, match="at least 2"):
            f(real)
        r = verify(f)
        assert "op-shape" in kinds(r) and "at least 2 dimensions" in str(r), str(r)
    assert kinds(verify(_vector_tril_np)) == ["return-shape"]
    assert clean(verify(lambda m: torch.tril(m) + np.triu(m.numpy()).sum(), "B N N => B N N"))


def _quarters(x: Float[np.ndarray, "B D"]) -> Float[np.ndarray, "4 D"]:
    """CleanRL's minibatch loop: ``range(0, 4 * mb, mb)`` with ``mb = B // 4``."""
    mb = x.shape[0] // 4
    return np.stack([x[s:s + mb].sum(0) for s in range(0, 4 * mb, mb)])


def test_a_range_whose_step_is_a_size_assumes_the_step_is_not_zero():
    """range() raises ValueError on a step of 0 (here at B < 4): the sizes its loop read were
    assumed (``B // 4 + 2 <= B``, which holds at B = 3), but not the step's own.  Its steps
    were the witness's numbers (2, 4, 6), so that assumption was in them: a step that divides
    the span into 4 at every size makes steps that are sizes (``2 * (B // 4)``)."""
    with pytest.raises(ValueError, match="must not be zero"):
        _quarters(np.ones((3, 2)))
    assert _quarters(np.ones((9, 2))).shape == (4, 2)
    r = verify(_quarters)
    assert [f.message.split(":")[0] for f in r] == ["assumes B // 4 >= 1"], str(r)


def _heads_bmm(a: Float[torch.Tensor, "B H N D"], b: Float[torch.Tensor, "B H D M"]
               ) -> Float[torch.Tensor, "B H N M"]:
    return torch.bmm(a, b)  # bmm takes 3-D tensors only


def _tokens_mm(a: Float[torch.Tensor, "B N D"], b: Float[torch.Tensor, "D M"]
               ) -> Float[torch.Tensor, "B N M"]:
    return a.mm(b)  # mm takes matrices only


def _batched_dot(a: Float[np.ndarray, "B N D"], b: Float[np.ndarray, "B D M"]
                 ) -> Float[np.ndarray, "B N M"]:
    return np.dot(a, b)  # every pair of a's and b's rows: [B, N, B, M]


def test_bmm_mm_and_dot_are_not_matmul():
    """torch.bmm and mm refuse other ranks and np.dot pairs N-D operands' other axes (no
    batch broadcast): all three were modelled as matmul and verified."""
    a, b = torch.ones(2, 3, 4, 5), torch.ones(2, 3, 5, 6)
    for f, args in ((_heads_bmm, (a, b)), (_tokens_mm, (a[0], b[0, 0]))):
        with pytest.raises(RuntimeError):
            f(*args)
        r = verify(f)
        assert "op-shape" in kinds(r) and "-D tensors only" in str(r), str(r)
    assert _batched_dot(np.ones((2, 3, 4)), np.ones((2, 4, 5))).shape == (2, 3, 2, 5)
    assert kinds(verify(_batched_dot)) == ["return-shape"] and "[B, N, B, M]" in str(
        verify(_batched_dot))
    assert kinds(verify(lambda x, y: np.dot(x, y.transpose(0, 2, 1)), "B N D; B D M => B N B D"
                        )) == ["contraction"]  # D against M
    spec = "B H N D; B H D M => B H N M"
    assert clean(verify(lambda x, y: torch.bmm(x.flatten(0, 1), y.flatten(0, 1)).view(
        x.shape[0], x.shape[1], x.shape[2], -1), spec))
    assert clean(verify(lambda x, w: np.dot(x, w) + np.dot(x[0, 0], w), "B N D; D M => B N M"))


def _sample_four(p: Float[torch.Tensor, "B V"]) -> Float[torch.Tensor, "B 4"]:
    return torch.multinomial(p, 4).float() + p.multinomial(4).float()


def test_multinomial_without_replacement_needs_as_many_categories():
    """torch's meta kernel samples 4 of 3 without complaint, its CPU kernel raises: the fit on
    meta tensors verified it.  With replacement any count is fine."""
    with pytest.raises(RuntimeError, match="without replacement"):
        _sample_four(torch.rand(2, 3))
    assert [f.message.split(":")[0] for f in verify(_sample_four)] == ["assumes 4 <= V"]
    assert clean(verify(lambda p: torch.multinomial(p, 9, replacement=True), "B V => B 9"))


def _five_smallest(x: Float[np.ndarray, "B V"]) -> Float[np.ndarray, "B 5"]:
    """sklearn-style k nearest by argpartition at kth = 5: NumPy raises unless 5 < V."""
    idx = np.argpartition(x, 5, axis=-1)[:, :5]
    return np.take_along_axis(x, idx, axis=-1) + np.partition(x, -5)[:, -5:]


def test_partition_needs_its_kth_on_the_axis():
    """The slice [:, :5] assumed 5 <= V, where NumPy's kth = 5 needs 6: wrong at V = 5."""
    with pytest.raises(ValueError, match="out of bounds"):
        _five_smallest(np.ones((2, 5)))
    assert _five_smallest(np.ones((2, 6))).shape == (2, 5)
    r = verify(_five_smallest)  # and 5 <= V, of the last five (implied)
    assert [f.message.split(":")[0] for f in r] == ["assumes 6 <= V", "assumes 5 <= V"], str(r)
    r = verify(lambda x: x.argpartition(5)[:, :5], "B V => B 5")
    assert [f.message.split(":")[0] for f in r][:1] == ["assumes 6 <= V"], str(r)
    assert clean(verify(lambda x: np.argpartition(x, [0, 1]), "B V => B V")) is False  # V >= 2
    assert clean(verify(lambda x: np.argpartition(x, 0, axis=None)[:3], "B V => 3")) is False


def _squeezed_back(x: Float[jax.Array, "B N D"]) -> Float[jax.Array, "B N D"]:
    return jnp.squeeze(x, axis=1).reshape(x.shape)


def test_jax_code_reads_numpy_semantics():
    """JAX's arrays follow NumPy's: ``jnp.squeeze(x, axis=1)`` raises unless the axis is 1.
    Code naming only jax was read as torch's (a squeeze that keeps the axis), verified with
    'assumes 2 <= N', where JAX raises at every N >= 2."""
    with pytest.raises(ValueError):
        _squeezed_back(jnp.ones((2, 3, 4)))
    assert _squeezed_back(jnp.ones((2, 1, 4))).shape == (2, 1, 4)
    r = verify(_squeezed_back)
    assert "op-shape" in kinds(r) and "raises unless it is 1" in str(r), str(r)


def test_a_view_of_a_permuted_tensor_follows_its_strides():
    """``x.transpose(1, 2).view(B, T, H * D)`` raises in torch (merged axes not contiguous):
    verify modelled no strides and verified it.  A split of one axis, or a view after
    ``contiguous()``, is fine, as in torch."""
    def merged(x):
        return x.transpose(1, 2).view(x.shape[0], x.shape[2], -1)

    def split(x):
        return x.transpose(1, 2).view(x.shape[0], x.shape[2], x.shape[1], 2, -1)

    x = torch.ones(2, 3, 5, 8)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        merged(x)
    assert split(x).shape == (2, 5, 3, 2, 4)
    assert x.transpose(1, 2).contiguous().view(2, 5, -1).shape == (2, 5, 24)
    r = verify(merged, "B H T D => B T H*D", torch_style=True)
    assert kinds(r) == ["op-shape"] and "torch raises" in str(r), str(r)
    assert clean(verify(split, "B H T 2*D => B T H 2 D", torch_style=True))
    assert clean(verify(lambda x: x.transpose(1, 2).contiguous().view(
        x.shape[0], x.shape[2], -1), "B H T D => B T H*D", torch_style=True))


def _bag_sums(table: Float[np.ndarray, "V D"], idx: Int[np.ndarray, "N"],
              offsets: Int[np.ndarray, "B"]) -> Float[np.ndarray, "B D"]:
    """An embedding bag in NumPy: the rows' sums from each offset to the next."""
    return np.add.reduceat(table[idx], offsets, axis=0)


def test_reduceat_gives_one_reduction_per_start():
    """``np.add.reduceat`` stopped the trace as not modelled."""
    assert _bag_sums(np.ones((7, 3)), np.zeros(5, np.int64), np.array([0, 2])).shape == (2, 3)
    assert clean(verify(_bag_sums)), str(verify(_bag_sums))
    r = verify(lambda x, s: np.maximum.reduceat(x, s, axis=1), "N D; K => N D")
    assert kinds(r) == ["return-shape"] and "[N, K]" in str(r), str(r)
