"""verify on idioms the other corpora use least (tests/verify_corpus/probe_2026c.py): RoIAlign,
YOLO anchors, RoPE by position ids, speculative decoding, DeepSets, LightGCN's sparse products,
two towers, TD3, F.fold, bucketize, torch.diff; S4D, sklearn-style scalers, tensordot, K-FAC,
np.roll stencils, put_along_axis, Gaussian conditioning, np.cross; VQ-VAE, Flax attention, AGC
over pytrees, GQA, SchNet under vmap, RK4 under fori_loop, SigLIP and dynamic_slice crops, in
NumPy, PyTorch and JAX.  Each pair is a correct function and a twin with one planted bug; the
oracles run each correct one, and each bug, on real arrays of its own library."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from jax import lax
from torch.func import grad, vmap

from arrays import clean, kinds
from tensig import Float
from tensig.check.verify import verify
from test_verify_realcode_domains import corpus_tests, mixes_libraries
from verify_corpus.probe_2026c import (
    ASSUMES,
    CASES,
    STOPS,
    random_crops,
    tensor_regression_bug,
)


def test_the_corpus_mixes_the_three_libraries():
    mixes_libraries(CASES, 24, 8)


(test_correct_one_verifies_and_the_bug_gives_its_code,
 test_correct_one_runs_and_returns_its_declared_shape,
 test_each_bug_fails_when_run) = corpus_tests(CASES, ASSUMES, STOPS)


# -- defects the corpus found, each fixed in src/tensig/check -----------------------------------


def _kv_per_query_head(k: Float[np.ndarray, "B S G D"], q: Float[np.ndarray, "B T G*R D"]
                       ) -> Float[np.ndarray, "B S G*R D"]:
    return np.repeat(k, q.shape[2] // k.shape[2], axis=2)


def test_a_count_that_is_a_size_repeats_to_a_product_of_sizes():
    """GQA's ``repeat(k, H // G, axis=2)``: the fitted result G * R is a product of an axis and
    the count, which the fit did not try; it was a fresh size with a warning, and the
    attention after it stopped the trace."""
    assert _kv_per_query_head(np.ones((2, 3, 5, 4)), np.ones((2, 7, 15, 4))).shape == (2, 3, 15, 4)
    r = verify(_kv_per_query_head)
    assert clean(r), str(r)
    r = verify(lambda x, n: np.tile(x, n.shape[0]), "B D; N => B N*D")
    assert clean(r), str(r)
    assert np.repeat(np.ones((2, 3)), repeats=5, axis=1).shape == (2, 15)
    r = verify(lambda x, n: np.repeat(x, repeats=n.shape[0], axis=1), "B D; N => B D*N")
    assert clean(r), str(r)  # the count by keyword: it was a fresh size, a false return-shape
    r = verify(lambda x, n: np.repeat(x, n.shape[0], axis=0), "B D; N => B N")
    assert kinds(r) == ["return-shape"] and "[B*N, D]" in str(r), str(r)


def test_tensordot_pairs_its_axes_as_a_contraction():
    """``np.tensordot`` over the wrong pairing of axes was fitted: 'fails at every size:
    shape-mismatch for sum', and the trace went on with its first operand's shape, two more
    findings that were no bugs.  Now the pairs are a contraction named by their sizes, in
    NumPy, torch (``dims=``) and JAX, the count form (``axes=2``) too."""
    with pytest.raises(ValueError, match="shape-mismatch"):
        tensor_regression_bug(np.ones((2, 3, 4)), np.ones((3, 4, 5)), np.ones(5))
    r = verify(tensor_regression_bug)
    assert set(kinds(r)) == {"contraction"} and "R with C" in str(r), str(r)
    spec = "N R C; R C K => N K"
    assert clean(verify(lambda x, w: torch.tensordot(x, w, dims=2), spec))
    assert clean(verify(lambda x, w: jnp.tensordot(x, w, axes=([1, 2], [0, 1])), spec))
    assert clean(verify(lambda x, w: np.tensordot(x, w, 2), spec))
    r = verify(lambda x, w: torch.tensordot(x, w, dims=([2], [0])), "N R C; R C K => N R C K")
    assert kinds(r) == ["contraction"] and "C with R" in str(r), str(r)
    r = verify(lambda x, w: np.tensordot(x, w, axes=([1, 2], [0])), spec)
    assert "op-shape" in kinds(r), str(r)
    with pytest.raises(ValueError, match="duplicate"):  # an axis twice: at every size
        np.tensordot(np.ones((2, 3)), np.ones((3, 2)), ([0, 0], [1, 1]))
    r = verify(lambda a, b: np.tensordot(a, b, ([0, 0], [1, 1])), "N M; M N => M M")
    assert kinds(r) == ["op-shape"] and "twice" in str(r), str(r)


def _shuffled_windows(x: Float[jax.Array, "B T D"], key: jax.Array) -> Float[jax.Array, "B 4 D"]:
    def row(r, k):
        k1, k2 = jax.random.split(k)
        start = jax.random.randint(jax.random.fold_in(k1, 7), (), 0, r.shape[0] - 4 + 1)
        w = lax.dynamic_slice(r, (start, 0), (4, r.shape[1]))
        return w[jax.random.permutation(k2, 4)]
    return jax.vmap(row)(x, jax.random.split(key, x.shape[0]))


def test_keys_split_by_a_size_stay_keys_under_vmap():
    """One key per row (``vmap(f)(x, split(key, B))``), each split again inside: split was
    fitted as an int32 array, and JAX refused its rows as keys; the trace stopped (under JAX's
    own symbolic shapes, ``min`` and the crop's corner bound are inconclusive)."""
    assert _shuffled_windows(jnp.ones((3, 5, 2)), jax.random.PRNGKey(0)).shape == (3, 4, 2)
    for f in (_shuffled_windows, random_crops):
        r = verify(f)
        assert set(kinds(r)) == {"assumption"} and "assumes " in str(r) and not r.notes, str(r)


def _int32_key(x: Float[jax.Array, "B T"]) -> Float[jax.Array, "B T"]:
    return x[:, jax.random.permutation(np.array([0, 1], np.int32), x.shape[1])]


def test_a_real_int32_array_is_no_key():
    """Only a symbolic array's stand-in has lost its dtype (kind ``i`` holds a key's uint32): a
    real int32 array given as a key keeps its own, and JAX refuses it at every size; it was
    bitcast to a key, and verified."""
    with pytest.raises(TypeError, match="uint32"):
        _int32_key(jnp.ones((2, 3)))
    r = verify(_int32_key)
    assert not clean(r) and "uint32" in str(r), str(r)


def _typed_shuffle(x: Float[jax.Array, "B T"]) -> Float[jax.Array, "B T"]:
    keys = jax.random.split(jax.random.key(0), x.shape[0])  # typed keys: shape [B]
    return jax.vmap(lambda r, k: r[jax.random.permutation(k, r.shape[0])])(x, keys)


def test_typed_keys_stay_keys_under_vmap():
    """A typed key (``jax.random.key``) has no integer kind: split's result was a float array,
    its rows float stand-ins JAX refused ('fails at every size'), a false error and a false
    return shape."""
    assert _typed_shuffle(jnp.ones((3, 5))).shape == (3, 5)
    r = verify(_typed_shuffle)
    assert clean(r), str(r)


def _noise(x: Float[jax.Array, "B T"], key: jax.Array) -> Float[jax.Array, "B T"]:
    return jax.vmap(lambda r, k: r + jax.random.normal(k, r.shape))(
        x, jax.random.split(key, x.shape[0]))


def _noise_bug(x: Float[jax.Array, "B T"], key: jax.Array) -> Float[jax.Array, "B T"]:
    return x + jax.random.normal(jax.random.split(key, x.shape[0]), x.shape)  # no vmap


def test_a_sampler_takes_one_key():
    """A batch of keys given to a sampler modelled by hand (normal, bernoulli...) without
    vmap: JAX refuses it at every size, and the model, which read the shape only, verified
    it (raw keys ``[B, 2]`` and typed keys ``[B]`` alike)."""
    x, key = jnp.ones((3, 5)), jax.random.PRNGKey(0)
    assert _noise(x, key).shape == (3, 5)
    with pytest.raises(ValueError, match="single key"):
        _noise_bug(x, key)
    assert clean(verify(_noise)), str(verify(_noise))
    r = verify(_noise_bug)
    assert kinds(r) == ["op-shape"] and "one key" in str(r), str(r)
    typed = lambda x: jax.random.bernoulli(jax.random.split(  # noqa: E731
        jax.random.key(0), x.shape[0]), 0.5, x.shape)
    with pytest.raises(ValueError, match="single key"):
        typed(x)
    r = verify(typed, "B T => B T")
    assert kinds(r) == ["op-shape"] and "one key" in str(r), str(r)


def test_a_size_fits_a_product_of_two_operands_sizes():
    """``torch.kron`` (K-FAC's Fisher block) and ``torch.cartesian_prod`` (a grid of pairs) give
    products of sizes from different operands, which the fit did not try: fresh sizes, a
    warning and a false return-shape error."""
    assert torch.kron(torch.ones(2, 3), torch.ones(5, 7)).shape == (10, 21)
    assert clean(verify(lambda a, b: torch.kron(a, b), "N M; P Q => N*P M*Q"))
    assert clean(verify(lambda a, b: torch.cartesian_prod(a, b), "N; M => N*M 2"))
    r = verify(lambda a, b: torch.kron(a, b.T), "N M; P Q => N*P M*Q")
    assert kinds(r) == ["return-shape"] and "[N*Q, M*P]" in str(r), str(r)


def _pair_products(x: Float[torch.Tensor, "N D"]) -> Float[torch.Tensor, "N*(N-1)//2 D"]:
    """A factorization machine's pairwise interactions, the pairs by torch.combinations."""
    i = torch.combinations(torch.arange(x.shape[0]))
    return x[i[:, 0]] * x[i[:, 1]]


def test_combinations_counts_the_subsets():
    """torch.combinations has no meta kernel: the trace stopped with a note."""
    assert _pair_products(torch.ones(5, 3)).shape == (10, 3)
    assert clean(verify(_pair_products)), str(verify(_pair_products))
    spec = "N => N*(N+1)*(N+2)//6 3"
    assert torch.combinations(torch.arange(4), 3, with_replacement=True).shape == (20, 3)
    assert clean(verify(lambda v: torch.combinations(v, 3, with_replacement=True), spec))
    r = verify(lambda m: torch.combinations(m), "N D => N*(N-1)//2 2")
    assert kinds(r) == ["op-shape"] and "1-D" in str(r), str(r)


def _per_row(x: Float[torch.Tensor, "B D"], w: Float[torch.Tensor, "D E"]
             ) -> Float[torch.Tensor, "B E"]:
    return torch.vmap(lambda r: torch.tanh(r @ w))(x)


def _ensemble(x: Float[torch.Tensor, "B D"], ws: Float[torch.Tensor, "M D E"]
              ) -> Float[torch.Tensor, "B M E"]:
    """An ensemble of M linear heads by torch.func.vmap over the stacked weights."""
    return torch.func.vmap(lambda w, v: v @ w, in_dims=(0, None), out_dims=1)(ws, x)


def _ensemble_bug(x: Float[torch.Tensor, "B D"], ws: Float[torch.Tensor, "M D E"]
                  ) -> Float[torch.Tensor, "B M E"]:
    return torch.func.vmap(lambda w, v: v @ w, in_dims=(0, 0), out_dims=1)(ws, x)  # maps x too


def test_torch_vmap_is_traced_as_jax_vmap_is():
    """torch.vmap (torch.func.vmap) refused symbolic tensors: the trace stopped with a note.
    Its ``in_dims``/``out_dims`` are JAX's ``in_axes``/``out_axes``; one model serves both."""
    assert _per_row(torch.ones(3, 2), torch.ones(2, 5)).shape == (3, 5)
    assert _ensemble(torch.ones(3, 2), torch.ones(4, 2, 5)).shape == (3, 4, 5)
    with pytest.raises(ValueError):
        _ensemble_bug(torch.ones(3, 2), torch.ones(4, 2, 5))
    for f in (_per_row, _ensemble):
        r = verify(f)
        assert clean(r), str(r)
    r = verify(_ensemble_bug)
    assert "broadcast" in kinds(r) and "M and B" in str(r), str(r)


def test_torch_vmap_and_func_take_torch_s_arguments_only():
    """torch's names and forms, not JAX's: ``in_axes=``, a list of ``in_dims``, ``has_aux``
    given to ``hessian`` raise in torch at every size; the models ignored or took them, and
    verified the code (or blamed the wrong axes).  And torch's own ran with JAX's positional
    ``has_aux``, which ``jacrev`` refused: a stopped trace."""
    x, w = torch.ones(3, 2), torch.ones(2, 5)
    spec = "B D; D E => B E"
    wrong = [lambda a, b: torch.vmap(lambda r, m: r @ m, in_axes=(0, None))(a, b),
             lambda a, b: torch.vmap(lambda r, m: r @ m, in_dims=[0, None])(a, b),
             lambda a, b: torch.vmap(lambda r, m: r @ m, (0, None), 0, "sometimes")(a, b),
             lambda a, b: torch.func.hessian(lambda u: ((u @ b) ** 2).sum(), has_aux=False)(a)]
    for f in wrong:
        with pytest.raises((TypeError, ValueError, RuntimeError)):
            f(x, w)
        r = verify(f, spec)
        assert not clean(r), str(r)
    ok = lambda a, b: torch.vmap(lambda r, m: r @ m, (0, None), chunk_size=2)(a, b)  # noqa: E731
    assert ok(x, w).shape == (3, 5) and clean(verify(ok, spec))
    # on real tensors torch's own runs, given what it takes (not JAX's has_aux positionally)
    ok = lambda a, b: a @ b + torch.func.jacrev(torch.tanh)(torch.ones(3)).sum()  # noqa: E731
    assert ok(x, w).shape == (3, 5) and clean(verify(ok, spec)), str(verify(ok, spec))


def _per_sample_grads(w: Float[torch.Tensor, "D E"], x: Float[torch.Tensor, "B D"],
                      y: Float[torch.Tensor, "B E"]) -> Float[torch.Tensor, "B D E"]:
    """Opacus-style per-sample gradients: torch.func.grad of one example's loss, vmapped."""
    def loss(w, xi, yi):
        return ((xi @ w - yi) ** 2).sum()
    return torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))(w, x, y)


def test_torch_func_grad_and_jacobians_are_traced_as_jax_s():
    """torch.func.grad, jacrev, jacfwd and hessian refused symbolic tensors; they take JAX's
    models, and the code stays torch code (a squeeze keeps torch's meaning)."""
    w, x, y = torch.ones(2, 3), torch.ones(4, 2), torch.ones(4, 3)
    assert _per_sample_grads(w, x, y).shape == (4, 2, 3)
    assert clean(verify(_per_sample_grads)), str(verify(_per_sample_grads))
    spec = "N D => N N D"
    assert torch.func.jacrev(lambda v: torch.tanh(v).sum(1))(torch.ones(2, 3)).shape == (2, 2, 3)
    assert clean(verify(lambda v: torch.func.jacrev(lambda u: torch.tanh(u).sum(1))(v), spec))
    assert clean(verify(lambda v: torch.func.jacfwd(lambda u: torch.tanh(u).sum(1))(v), spec))
    assert clean(verify(lambda v: torch.func.hessian(lambda u: (u ** 3).sum())(v),
                        "D => D D"))
    with pytest.raises(RuntimeError):
        torch.func.grad(lambda u: u ** 2)(torch.ones(3))
    r = verify(lambda v: torch.func.grad(lambda u: u ** 2)(v), "D => D")
    assert kinds(r) == ["return-shape"] and "non-scalar" in str(r), str(r)
    r = verify(lambda v: torch.func.grad(lambda u: u.squeeze(0).sum())(v), "N D => N D")
    assert kinds(r) == ["assumption"], str(r)  # torch's squeeze(0): N == 1 or not


def _ensemble_by_name(x: Float[torch.Tensor, "B D"], ws: Float[torch.Tensor, "M D E"]
                      ) -> Float[torch.Tensor, "M B E"]:
    """functorch's style: ``from torch.func import vmap, grad`` names them in the globals."""
    return vmap(lambda w: x @ w)(ws) + vmap(grad(lambda w: (x @ w).sum()))(ws)[:, :1, :1]


def test_torch_func_names_imported_by_name_are_traced():
    """The module's own names for torch.func's functions were left as torch's: the trace
    stopped."""
    assert _ensemble_by_name(torch.ones(3, 2), torch.ones(4, 2, 5)).shape == (4, 3, 5)
    r = verify(_ensemble_by_name)
    assert clean(r), str(r)
    assert vmap is torch.func.vmap is torch.vmap and grad is torch.func.grad  # put back
    assert not hasattr(vmap, "__wrapped__")
