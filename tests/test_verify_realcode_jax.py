"""verify on JAX code written the way public JAX code writes it (flax examples, haiku, optax,
cleanrl/purejaxrl, diffusion samplers, jraph): each test is a pattern that verify once stopped
on, false-alarmed on, or missed.

The functions are annotated with jaxtyping-style shape annotations, as verified files are.
"""

from __future__ import annotations

import functools
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import vmap
from jax.nn import one_hot, softmax

from arrays import clean, holds_for_corpus, kinds
from tensig import Float, Int, Key
from tensig.check.verify import verify

# -- number parameters when the trace falls back to JAX's own symbolic shapes -------------------


@jax.jit
def _denoise(x, eps, scale):  # compiled at import: the symbolic trace cannot enter it
    return (x - jnp.sqrt(1.0 - scale) * eps) / jnp.sqrt(scale)


@jax.jit
def _table(pos, freqs):
    return jnp.concatenate([jnp.sin(pos[:, None] * freqs), jnp.cos(pos[:, None] * freqs)], -1)


def test_number_parameters_reach_the_jax_fallback():
    def ddim_step(x: Float[jax.Array, "B, D"], eps: Float[jax.Array, "B, D"], alpha: float
                  ) -> Float[jax.Array, "B, D"]:
        return _denoise(x, eps, alpha)

    def ddim_step_bug(x: Float[jax.Array, "B, D"], eps: Float[jax.Array, "B, D"], alpha: float
                      ) -> Float[jax.Array, "B, D"]:
        return _denoise(x, eps[:, :1].T, alpha)  # [1, B] noise against [B, D] samples

    def pe(T: int, D: int) -> Float[jax.Array, "T, 2*D"]:
        return _table(jnp.arange(T) * 1.0, jnp.ones(D))

    def pe_bug(T: int, D: int) -> Float[jax.Array, "T, D"]:
        return _table(jnp.arange(T) * 1.0, jnp.ones(D))  # sin and cos: twice D wide

    for f in (ddim_step, pe):
        assert clean(verify(f)), str(verify(f))
    r = verify(ddim_step_bug)
    assert kinds(r) == ["broadcast"] and not r.notes, str(r)
    r = verify(pe_bug)
    assert kinds(r) == ["return-shape"] and not r.notes, str(r)


# -- PRNG keys: a parameter named key/rng, or annotated Key[jax.Array, ""] ------------------------


def test_prng_key_parameters_get_a_real_key():
    def dropout(key: jax.Array, x: Float[jax.Array, "B, D"], rate: float = 0.1
                ) -> Float[jax.Array, "B, D"]:
        keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
        return jnp.where(keep, x / (1.0 - rate), 0.0)

    def reparameterize(rng, mean: Float[jax.Array, "B, Z"], logvar: Float[jax.Array, "B, Z"]
                       ) -> Float[jax.Array, "B, Z"]:
        return mean + jax.random.normal(rng, logvar.shape) * jnp.exp(0.5 * logvar)

    def reparameterize_bug(rng, mean: Float[jax.Array, "B, Z"],
                           logvar: Float[jax.Array, "B, Z"]) -> Float[jax.Array, "B, Z"]:
        eps = jax.random.normal(rng, (logvar.shape[0],))  # one draw per row, not per entry
        return mean + eps * jnp.exp(0.5 * logvar)

    def noisy(key: Key[jax.Array, ""], x: Float[jax.Array, "B, D"]) -> Float[jax.Array, "B, D"]:
        k1, k2 = jax.random.split(key)
        return x + jax.random.normal(k1, x.shape) * jax.random.uniform(k2, (x.shape[0], 1))

    def mixup(x: Float[jax.Array, "B, D"], y: Float[jax.Array, "B, C"], dropout_rng: jax.Array
              ) -> tuple[Float[jax.Array, "B, D"], Float[jax.Array, "B, C"]]:
        k1, k2 = jax.random.split(dropout_rng)
        lam = jax.random.beta(k1, 0.2, 0.2, (x.shape[0], 1))
        perm = jax.random.permutation(k2, x.shape[0])
        return lam * x + (1 - lam) * x[perm], lam * y + (1 - lam) * y[perm]

    def attention(query: Float[jax.Array, "T, K"], key: Float[jax.Array, "S, K"]
                  ) -> Float[jax.Array, "T, S"]:  # an array named key stays an array
        return query @ key.T

    def np_attention(query: Float[np.ndarray, "T, K"], key) -> Float[np.ndarray, "T, S"]:
        return query @ key.T  # NumPy code: an unannotated key is no PRNG key

    for f in (dropout, reparameterize, noisy, mixup, attention):
        assert clean(verify(f)), str(verify(f))
    def jax_attention(query: Float[jax.Array, "T, K"], key, value: Float[jax.Array, "S, V"]
                      ) -> Float[jax.Array, "T, V"]:
        return jax.nn.softmax(query @ key.T) @ value  # attention's key: its annotation missing

    with pytest.raises(TypeError, match="'key': no shape annotation"):
        verify(np_attention)
    with pytest.raises(TypeError, match="'key': no shape annotation"):
        verify(jax_attention)  # was traced with a PRNG key: 'matmul contracts K with 2'
    r = verify(reparameterize_bug)
    assert r.findings and set(kinds(r)) == {"broadcast"} and not r.notes, str(r)
    assert "B against Z" in r.findings[0].message, str(r)


def test_a_key_annotated_as_a_typed_key_is_one():
    def step(key: Key[jax.Array, ""], x: Float[jax.Array, "B, D"]
             ) -> tuple[Float[jax.Array, "B, D"], Key[jax.Array, ""]]:
        key, sub = jax.random.split(key)  # the key carried on, as an RL rollout does
        return x + jax.random.normal(sub, x.shape), key

    r = verify(step)  # was a PRNGKey's [2] against the declared typed key's []
    assert clean(r), str(r)


# -- flax/haiku-style weights: a nested dict bound with functools.partial -----------------------


def mlp_block(params, x: Float[jax.Array, "B, T, 32"]) -> Float[jax.Array, "B, T, 32"]:
    h = jax.nn.gelu(x @ params["fc"]["kernel"] + params["fc"]["bias"])
    return h @ params["proj"]["kernel"] + params["proj"]["bias"]


def mlp_block_bug(params, x: Float[jax.Array, "B, T, 32"]) -> Float[jax.Array, "B, T, 32"]:
    h = jax.nn.gelu(x @ params["fc"]["kernel"] + params["proj"]["bias"])  # the other layer's
    return h @ params["proj"]["kernel"] + params["proj"]["bias"]


PARAMS = {"fc": {"kernel": jnp.zeros((32, 128)), "bias": jnp.zeros(128)},
          "proj": {"kernel": jnp.zeros((128, 32)), "bias": jnp.zeros(32)}}


def test_weights_dict_bound_by_partial_verifies_from_the_annotations():
    r = verify(functools.partial(mlp_block, PARAMS))  # the annotations were unreadable
    assert clean(r), str(r)
    r = verify(functools.partial(mlp_block_bug, PARAMS))
    assert kinds(r) == ["broadcast"] and "128 against 32" in r.findings[0].message, str(r)
    with pytest.raises(TypeError, match=r"functools.partial\(mlp_block, params\)"):
        verify(mlp_block)  # the advice binds the leading parameter by position
    with pytest.raises(TypeError, match=r"mlp_block's parameter\(s\) 'x': keyword-only"):
        verify(functools.partial(mlp_block, params=PARAMS))  # x keyword-only: no positional call
    r = verify(functools.partial(mlp_block_bug, PARAMS))
    assert r.function == "mlp_block_bug" and r.line is not None, str(r)  # not "partial"


# -- JAX's symbolic shapes undecided, collectives under vmap ------------------------------------


@functools.partial(jax.jit, static_argnums=(1,))
def _topk_mask(x, k):
    vals, _ = jax.lax.top_k(x, k)
    return x >= vals[..., -1:]


def TOPK_FILTER(logits: Float[jax.Array, "B, V"]) -> Float[jax.Array, "B, V"]:
    return jnp.where(_topk_mask(logits, 5), logits, -jnp.inf)  # needs V >= 5


def test_what_jax_cannot_decide_is_a_note_not_a_shape_error():
    jitted = {"mask": _topk_mask}  # read from a dict as it runs: only JAX's own shapes run it
    r = verify(lambda x: jnp.where(jitted["mask"](x, 5), x, -jnp.inf), "B, V => B, V")
    assert not r.findings and any("'V' < '5'" in n for n in r.notes), str(r)


def test_collectives_over_a_vmapped_axis_keep_shapes():
    def sync_batch_norm(x: Float[jax.Array, "B, D"]) -> Float[jax.Array, "B, D"]:
        def per_example(v):
            mean = jax.lax.pmean(v, axis_name="batch")
            n = jax.lax.psum(1, axis_name="batch")  # the batch size
            var = jax.lax.psum((v - mean) ** 2, axis_name="batch") / n
            return (v - mean) / jnp.sqrt(var + 1e-5)
        return jax.vmap(per_example, axis_name="batch")(x)

    def sync_batch_norm_bug(x: Float[jax.Array, "B, D"]) -> Float[jax.Array, "B, D"]:
        def per_example(v):
            mean = jax.lax.pmean(v, axis_name="batch").mean()
            total = jax.lax.psum(v, axis_name="batch")
            return (v - mean) / total[:, None]  # a [D] total spread as a column: [D, D]
        return jax.vmap(per_example, axis_name="batch")(x)

    r = verify(sync_batch_norm)
    assert clean(r), str(r)
    r = verify(sync_batch_norm_bug)
    assert kinds(r) == ["return-shape"] and "[B, D, D]" in str(r) and not r.notes, str(r)


# -- the corpus ---------------------------------------------------------------------------------


def test_probe_corpus_correct_ones_verify_and_each_bug_gives_its_code():
    from verify_corpus.probe_jax_more import CASES

    holds_for_corpus(CASES, 20)


# -- a count in the call larger than every witness size -----------------------------------------


def test_a_count_larger_than_the_witnesses_is_an_assumption_not_an_error():
    def top_k_sample(logits: Float[jax.Array, "B, V"]) -> Float[jax.Array, "B, 50"]:
        return jax.lax.top_k(logits, 50)[0]  # GPT sampling's k=50: needs V >= 50

    def subsample(key: jax.Array, x: Float[jax.Array, "N, D"]) -> Float[jax.Array, "16, D"]:
        return x[jax.random.choice(key, x.shape[0], (16,), replace=False)]

    def top_k_bug(logits: Float[jax.Array, "B, V"]) -> Float[jax.Array, "B, 50"]:
        return jax.lax.top_k(logits.T, 50)[0]  # top tokens per position of the batch axis

    for f in (top_k_sample, subsample):
        r = verify(f)
        assert not r.errors and not r.notes and kinds(r) == ["assumption"], str(r)
        assert "50" in r.findings[0].message or "16" in r.findings[0].message, str(r)
    r = verify(top_k_bug)
    assert kinds(r) == ["assumption", "return-shape"] and "[V, 50]" in str(r), str(r)


def test_a_large_count_on_many_axes_keeps_its_finding():
    # past the count, all four witnesses scaled are too large to build: one axis at a time
    def sparse_keys(scores: Float[jax.Array, "B, H, T, S"]) -> Float[jax.Array, "B, H, T, 256"]:
        return jax.lax.top_k(scores, 256)[0]  # the 256 best keys of each query: needs S >= 256

    def color_hist_bug(img: Float[np.ndarray, "H, W, C"], mask: Float[np.ndarray, "H, W"]
                       ) -> Float[np.ndarray, "256"]:
        return np.histogram(img, bins=256, range=(0.0, 1.0), weights=mask)[0]  # [H, W] weights

    r = verify(sparse_keys)  # was a note: the scaled witnesses were refused as too large
    assert kinds(r) == ["assumption"] and not r.notes, str(r)
    assert "assumes 256 <= S" in r.findings[0].message, str(r)
    r = verify(color_hist_bug)  # NumPy allocates: a base too large is not tried, the error stays
    assert kinds(r)[0] == "op-shape" and not r.notes, str(r)  # refused: no contraction
    assert "fails on these shapes at every size" in r.findings[0].message, str(r)


# -- helpers jitted at import are traced through their Python functions -------------------------


@jax.jit
def _pairwise(x, y):
    return x[:, None, :] - y[None, :, :]


@functools.partial(jax.jit, static_argnames=("axis",))
def _normalize(x, axis=-1):
    return x / jnp.linalg.norm(x, axis=axis, keepdims=True)


@jax.jit
def _mse(p, y):
    return jnp.mean((p - y) ** 2)


def _scores(q, k):  # a plain helper calling a jitted one
    return jnp.einsum("td,sd->ts", _normalize(q), _normalize(k, axis=-1))


def test_jitted_helpers_are_traced_symbolically():
    def sq_dists(x: Float[jax.Array, "N, D"], y: Float[jax.Array, "M, D"]
                 ) -> Float[jax.Array, "N, M"]:
        return jnp.sum(_pairwise(x, y) ** 2, axis=-1)

    def cosine(q: Float[jax.Array, "T, D"], k: Float[jax.Array, "S, D"]
               ) -> Float[jax.Array, "T, S"]:
        return _scores(q, k)

    def mse(p: Float[jax.Array, "N"], y: Float[jax.Array, "N, 1"]) -> Float[jax.Array, ""]:
        return _mse(p, y)  # [N] - [N, 1] inside the helper: an outer product

    for f in (sq_dists, cosine):
        assert clean(verify(f)), str(verify(f))
    r = verify(mse)  # JAX's own shapes see no outer product: the symbolic trace does
    assert kinds(r) == ["outer-product"] and not r.notes, str(r)
    r = verify(TOPK_FILTER)  # JAX's own shapes cannot decide V >= 5; the fit runs V = 4
    assert kinds(r) == ["assumption"] and "assumes 5 <= V" in str(r), str(r)
    assert _pairwise(jnp.ones((2, 3)), jnp.ones((4, 3))).shape == (2, 4, 3)  # put back after


_remat_mse = jax.checkpoint(lambda p, y: jnp.mean((p - y) ** 2))  # nn.remat style, at import


@jax.jit
@jax.checkpoint
def _remat_pairwise(x, y):
    return x[:, None, :] - y[None, :, :]


def _make_step(model):
    @jax.jit
    def step(p, y):
        return model(p, y)
    return step


def _make_train(wrap):
    loss = wrap(lambda p, y: jnp.mean((p - y) ** 2))  # [N] - [N, 1]: an outer product

    def train(p, y):
        return loss(p, y)
    return train


def test_closure_jitted_and_checkpointed_helpers_are_traced_symbolically():
    def remat_mse(p: Float[jax.Array, "N"], y: Float[jax.Array, "N, 1"]) -> Float[jax.Array, ""]:
        return _remat_mse(p, y)

    def sq_dists(x: Float[jax.Array, "N, D"], y: Float[jax.Array, "M, D"]
                 ) -> Float[jax.Array, "N, M"]:
        return jnp.sum(_remat_pairwise(x, y) ** 2, axis=-1)

    sig = "N; N, 1 =>"
    for f in (remat_mse, _make_step(_mse), _make_step(lambda p, y: _remat_mse(p, y)),
              _make_train(jax.jit), _make_train(jax.checkpoint), _make_train(jax.remat),
              jax.checkpoint(_make_train(jax.jit))):
        r = verify(f, None if f is remat_mse else sig)  # JAX's own shapes see no outer product
        assert kinds(r) == ["outer-product"] and not r.notes, (f, str(r))
    line = _make_train.__code__.co_firstlineno + 1  # in the helper, not at its call
    assert verify(_make_train(jax.jit), sig).findings[0].line == line
    assert verify(remat_mse).findings[0].line == _remat_mse.__wrapped__.__code__.co_firstlineno
    assert clean(verify(sq_dists)), str(verify(sq_dists))
    assert verify(jax.vmap(lambda x: x.sum()), "B, N => B").ok  # vmap's wrapper is kept
    step = _make_train(jax.jit)
    before = step.__closure__[0].cell_contents
    verify(step, sig)
    assert step.__closure__[0].cell_contents is before  # the cell is put back


def test_patched_globals_are_put_back_after_a_failure_or_a_timeout():
    during = []

    def boom(x: Float[jax.Array, "N, D"]) -> Float[jax.Array, "N, N"]:
        softmax(_pairwise(x, x))
        during.append(globals()["_pairwise"])
        raise KeyError("a bug after the patched calls")

    def stuck(x: Float[jax.Array, "N, D"]) -> Float[jax.Array, "N, N"]:
        y = softmax(_pairwise(x, x))
        while True:  # stopped by verify's timeout
            y = y + 0

    before = (globals()["softmax"], globals()["_pairwise"], jax.nn.softmax, jnp.sum)
    assert any("KeyError" in n for n in verify(boom).notes)
    # 2 s, not 0.2: a loaded machine must still reach the patched helper before the stop
    assert any("did not finish" in n for n in verify(stuck, timeout=2.0).notes)
    after = (globals()["softmax"], globals()["_pairwise"], jax.nn.softmax, jnp.sum)
    assert during and during[0] is not before[1]  # the jitted helper was patched while traced
    assert all(a is b for a, b in zip(before, after, strict=True))


def test_patched_closure_cells_are_put_back_after_a_failure_or_a_timeout():
    """A closure's jitted helper is swapped in the user's own cell while traced: a restore
    that a failure or a timeout skipped would change the user's function for good."""
    during = []

    def make(stop):
        pairwise = jax.jit(lambda x, y: x[:, None, :] - y[None, :, :])

        def f(x: Float[jax.Array, "N, D"]) -> Float[jax.Array, "N, N"]:
            y = jnp.sum(pairwise(x, x), axis=-1)
            during.append(pairwise)  # the cell's contents as the trace runs
            return stop(y)
        return f, pairwise

    def boom(y):
        raise KeyError("a bug after the patched calls")

    def stuck(y):
        while True:  # stopped by verify's timeout
            y = y + 0

    for stop, note, timeout in ((boom, "KeyError", None), (stuck, "did not finish", 0.2)):
        f, pairwise = make(stop)
        during.clear()
        assert any(note in n for n in verify(f, timeout=timeout).notes), note
        assert during and during[0] is not pairwise  # the jitted helper was patched
        cell = f.__closure__[f.__code__.co_freevars.index("pairwise")]
        assert cell.cell_contents is pairwise


def test_checkpoint_is_recognised_while_another_thread_verifies():
    """How ``jax.checkpoint``'s wrappers look was first worked out (and then kept) from
    ``jax.checkpoint`` itself, which another thread's verify had replaced: from then on no
    checkpointed function was traced through its Python function."""
    from tensig.check import trace_jax

    def u(x):
        return x

    checkpointed = jax.checkpoint(u)
    inside, release = threading.Event(), threading.Event()

    def waits(x):
        inside.set()
        release.wait(10)
        return jnp.sum(x)

    trace_jax._remat.cache_clear()  # as in a process whose first look is now
    other = threading.Thread(target=verify, args=(waits, "N =>"))
    other.start()
    try:
        assert inside.wait(10)
        during = trace_jax.python_function(checkpointed)
    finally:
        release.set()
        other.join()
    after = trace_jax.python_function(checkpointed)
    trace_jax._remat.cache_clear()  # a wrong look must not outlive this test
    assert during is u and after is u


def test_what_jax_symbolic_shapes_skip_is_checked_at_the_witnesses():
    jitted = {"groups": jax.jit(lambda x: x.reshape(x.shape[0], 4, x.shape[1] // 4)),
              "grow": jax.jit(lambda x: x.reshape(x.shape[0], 3, x.shape[1]))}

    def grouped(x: Float[jax.Array, "B, D"]) -> Float[jax.Array, "B, 4, D//4"]:
        return jitted["groups"](x)  # read from a dict as it runs: only JAX's own shapes run it

    def tile_bug(x: Float[jax.Array, "B, D"]) -> Float[jax.Array, "B, 3, D"]:
        return jitted["grow"](x)  # B*D elements as B*3*D: JAX's symbolic reshape does not count

    r = verify(grouped)  # refused at the witnesses only: D divisible by 4 is assumed
    assert clean(r), str(r)
    r = verify(tile_bug)  # was clean, then a "contraction"
    assert kinds(r) == ["reshape"] and "(B, D)" in str(r) and "(B, 3, D)" in str(r), str(r)


# -- jax.scipy.linalg ---------------------------------------------------------------------------


def test_jax_scipy_linalg_is_traced_symbolically():
    def gp_mean(K: Float[jax.Array, "N, N"], Ks: Float[jax.Array, "M, N"],
                y: Float[jax.Array, "N"]) -> Float[jax.Array, "M"]:
        L = jnp.linalg.cholesky(K + 1e-6 * jnp.eye(K.shape[0]))
        return Ks @ jax.scipy.linalg.cho_solve((L, True), y)

    def gp_mean_bug(K: Float[jax.Array, "N, N"], Ks: Float[jax.Array, "M, N"],
                    y: Float[jax.Array, "N"]) -> Float[jax.Array, "M"]:
        L = jnp.linalg.cholesky(K + 1e-6 * jnp.eye(K.shape[0]))
        return Ks.T @ jax.scipy.linalg.cho_solve((L, True), y)  # the kernel transposed

    def whiten(L: Float[jax.Array, "N, N"], B: Float[jax.Array, "N, K"]
               ) -> Float[jax.Array, "N, K"]:
        return jax.scipy.linalg.solve_triangular(L, B, lower=True)

    for f in (gp_mean, whiten):
        assert clean(verify(f)), str(verify(f))
    r = verify(gp_mean_bug)  # was JAX's fallback: a TypeError reported as a broadcast
    assert kinds(r) == ["contraction", "return-shape"] and "M with N" in str(r), str(r)


# -- transformations applied at import: JAX's fallback names the kind of mismatch ---------------


@functools.partial(jax.vmap, in_axes=(0, None))
def _row_dot(x, w):
    return x @ w


def test_jax_fallback_reports_a_contraction_as_one():
    def proj(x: Float[jax.Array, "B, D"], w: Float[jax.Array, "D, F"]) -> Float[jax.Array, "B, F"]:
        return _row_dot(x, w)

    def proj_bug(x: Float[jax.Array, "B, D"], w: Float[jax.Array, "D, F"]
                 ) -> Float[jax.Array, "B, F"]:
        return _row_dot(x, w.T)  # [D] @ [F, D]

    assert clean(verify(proj)), str(verify(proj))
    r = verify(proj_bug)
    assert kinds(r) == ["contraction"] and "(D,) and (F,)" in str(r), str(r)


@functools.partial(jax.vmap, in_axes=(0, None))
def _with_bias(x, b):
    return jnp.concatenate([x[None], b])


@jax.vmap
def _inverses(x):
    return jnp.linalg.inv(x)


def test_jax_fallback_reports_other_errors_by_their_own_code():
    """JAX's errors that are neither broadcasts nor contractions were all "contraction"
    (TS102): a concatenation is "concat", any other shape JAX refuses is "op-shape"."""
    def biased(x: Float[jax.Array, "B, D"], b: Float[jax.Array, "1, E"]
               ) -> Float[jax.Array, "B, 2, D"]:
        return _with_bias(x, b)  # [1, D] beside [1, E]

    def inverses(x: Float[jax.Array, "B, N, M"]) -> Float[jax.Array, "B, N, M"]:
        return _inverses(x)  # [N, M] is not square

    r = verify(biased)
    assert kinds(r) == ["concat"] and "(B, 1, D), (B, 1, E)" in str(r), str(r)
    r = verify(inverses)
    assert kinds(r) == ["op-shape"] and "(N, M)" in str(r), str(r)


@functools.partial(jax.vmap, in_axes=(0, None))
def _row_einsum(x, w):
    return jnp.einsum("d,fd->f", x, w)


@functools.partial(jax.vmap, in_axes=(0, None))
def _pair(x, y):
    return jnp.stack([x, y[0]])


def test_jax_fallback_names_an_einsum_a_contraction_and_a_stack_a_concat():
    """JAX words these without "dot_general" or "concatenate": an einsum's "Incompatible
    reduction dimensions" was "op-shape", not the contraction it was before the codes split,
    and a stack's "All input arrays must have the same shape" not the "concat" the symbolic
    trace gives ``np.stack``."""
    def proj_bug(x: Float[jax.Array, "B, D"], w: Float[jax.Array, "D, F"]
                 ) -> Float[jax.Array, "B, F"]:
        return _row_einsum(x, w)  # d against w's F

    def pair_bug(x: Float[jax.Array, "B, D"], y: Float[jax.Array, "1, E"]
                 ) -> Float[jax.Array, "B, 2, D"]:
        return _pair(x, y)  # [D] beside [E]

    r = verify(proj_bug)
    assert kinds(r) == ["contraction"], str(r)
    r = verify(pair_bug)
    assert kinds(r) == ["concat"], str(r)


# -- names imported from JAX's namespaces (from jax.nn import softmax) ---------------------------


def test_names_imported_from_jax_are_traced_symbolically():
    def mean_prob(p: Float[jax.Array, "N"], y: Float[jax.Array, "N, 1"]) -> Float[jax.Array, ""]:
        return jnp.mean(softmax(p) - y)  # [N] - [N, 1]: an outer product

    def ce_bug(logits: Float[jax.Array, "B, C"], y: Int[jax.Array, "B"]) -> Float[jax.Array, "B"]:
        return -jnp.sum(one_hot(y, logits.shape[0]) * logits, -1)  # B classes, not C

    def per_row(x: Float[jax.Array, "B, D"], w: Float[jax.Array, "D"]) -> Float[jax.Array, "B"]:
        return vmap(lambda r: softmax(r * w) @ w)(x)

    r = verify(mean_prob)  # JAX's fallback sees no outer product: the symbolic trace does
    assert kinds(r) == ["outer-product"] and not r.notes, str(r)
    r = verify(ce_bug)
    assert kinds(r) == ["broadcast"] and "B against C" in str(r), str(r)
    assert clean(verify(per_row)), str(verify(per_row))
    assert softmax(jnp.zeros(2)).shape == (2,)  # the module's names are put back after


# -- custom derivatives defined at import --------------------------------------------------------


@jax.custom_vjp
def _xent(p, q):
    return -jnp.sum(p * jnp.log(q))


_xent.defvjp(lambda p, q: (_xent(p, q), (p, q)), lambda res, g: (-g * jnp.log(res[1]),
                                                                  -g * res[0] / res[1]))


@jax.jit
@jax.custom_jvp
def _safe_log(x):
    return jnp.log(jnp.maximum(x, 1e-12))


_safe_log.__wrapped__.defjvp(lambda primals, tangents: (_safe_log(primals[0]),
                                                        tangents[0] / primals[0]))


def test_custom_derivative_functions_are_traced_symbolically():
    def xent(p: Float[jax.Array, "N"], q: Float[jax.Array, "N, 1"]) -> Float[jax.Array, ""]:
        return _xent(p, q)  # [N] * [N, 1] inside: an outer product JAX's shapes do not see

    def entropy(p: Float[jax.Array, "B, C"]) -> Float[jax.Array, "B"]:
        return -jnp.sum(p * _safe_log(p), axis=-1)

    r = verify(xent)
    assert kinds(r) == ["outer-product"] and not r.notes, str(r)
    assert clean(verify(entropy)), str(verify(entropy))
    assert float(_safe_log(jnp.ones(()))) == 0.0  # still JAX's own outside verification


_FIRST_ROW = '''
import numpy as np
from tensig import Float

def shift(x: Float[np.ndarray, "B T"]) -> Float[np.ndarray, "B T"]:
    return x + sum(x.tolist()[0])
'''


def test_a_users_folder_named_jax_is_not_jax(tmp_path):
    """verify took any path with '/jax/' in it for JAX's own code: a NumPy function that stopped
    in the user's jax/model.py was re-run under JAX's symbolic shapes, its stop note dropped."""
    import importlib.util

    reports = []
    for folder in ("jax", "mine"):
        path = tmp_path / folder / "model.py"
        path.parent.mkdir()
        path.write_text(_FIRST_ROW)
        spec = importlib.util.spec_from_file_location(f"smalls_{folder}_model", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        reports.append(verify(module.shift))
    for folder, report in zip(("jax", "mine"), reports, strict=True):
        assert not report.findings
        assert len(report.notes) == 1, report.notes
        assert f"verification stopped at {tmp_path / folder / 'model.py'}:6" in report.notes[0]
