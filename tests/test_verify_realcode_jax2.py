"""verify on a second round of JAX code written as public JAX code writes it (scan cells with
pytree carries, associative scans, fori_loop samplers and decoders, vmap with pytree axes,
tree_map optimizers, segment ops, sampling, blockwise attention, FFT convolutions, filters and
GPs): the corpus tests/verify_corpus/probe_jax_2026.py, an oracle that runs each correct
function on real arrays, and one test per pattern verify once got wrong.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from tensig import Float, Int
from tensig.check.verify import verify


def kinds(report):
    return [f.kind for f in report]


def clean(report) -> bool:
    return report.ok and not report.findings and not report.notes


# -- patterns verify got wrong ------------------------------------------------------------------


def test_value_and_grad_with_aux_returns_the_aux_beside_the_value():
    """jax.value_and_grad(f, has_aux=True) returns ((value, aux), grads): verify's model put
    the aux beside the grads as well, so the grads read as a (grads, aux) tuple."""
    def fit(w: Float[jax.Array, "D"], X: Float[jax.Array, "N, D"]
            ) -> tuple[Float[jax.Array, ""], Float[jax.Array, "N"], Float[jax.Array, "D"]]:
        (loss, pred), g = jax.value_and_grad(lambda w: (jnp.mean((X @ w) ** 2), X @ w),
                                             has_aux=True)(w)
        return loss, pred, g

    def fit_grad(w: Float[jax.Array, "D"], X: Float[jax.Array, "N, D"]
                 ) -> tuple[Float[jax.Array, "D"], Float[jax.Array, "N"]]:
        return jax.grad(lambda w: (jnp.mean((X @ w) ** 2), X @ w), has_aux=True)(w)

    for f in (fit, fit_grad):
        assert clean(verify(f)), str(verify(f))


def test_fori_loop_index_is_a_traced_scalar_not_a_python_int():
    """JAX passes fori_loop's body a traced int32 index: a comparison on it is data, not a
    branch.  verify passed the lower bound as a Python int, so jnp.where(t > 0, ...) on
    t = S - 1 - i was an assumption 'S - 1 > 0', and .at[:, i] from 1 one '1 < T'."""
    def sample(x: Float[jax.Array, "B, D"], alphas: Float[jax.Array, "S"]
               ) -> Float[jax.Array, "B, D"]:
        def body(i, x):
            t = alphas.shape[0] - 1 - i
            prev = jnp.where(t > 0, alphas[jnp.maximum(t - 1, 0)], 1.0)
            return jnp.sqrt(prev) * x
        return jax.lax.fori_loop(0, alphas.shape[0], body, x)

    def fill(tokens: Int[jax.Array, "B, T"]) -> Int[jax.Array, "B, T"]:
        return jax.lax.fori_loop(1, tokens.shape[1],
                                 lambda i, t: t.at[:, i].set(t[:, i - 1] + 1), tokens)

    def fill_bug(tokens: Int[jax.Array, "B, T"]) -> Int[jax.Array, "B, T"]:
        return jax.lax.fori_loop(1, tokens.shape[1],
                                 lambda i, t: t.at[i].set(t[:, i - 1] + 1), tokens)  # a row

    for f in (sample, fill):
        assert clean(verify(f)), str(verify(f))
    r = verify(fill_bug)
    assert kinds(r) == ["broadcast"] and not r.notes, str(r)


def test_associative_scan_is_traced_symbolically():
    """lax.associative_scan was fitted through jax.eval_shape: a combine function that fails
    on the elements' shapes was a finding followed by a note (the fallback's single array
    unpacked as the (a, b) pair), and an outer product inside it went unseen."""
    def combine(left, right):
        return left[0] * right[0], right[0] * left[1] + right[1]

    def recurrence(a: Float[jax.Array, "T, D"], b: Float[jax.Array, "T, D"]
                   ) -> Float[jax.Array, "T, D"]:
        return jax.lax.associative_scan(combine, (a, b))[1]

    def recurrence_bug(a: Float[jax.Array, "T"], b: Float[jax.Array, "T, D"]
                       ) -> Float[jax.Array, "T, D"]:
        return jax.lax.associative_scan(combine, (a, b))[1]  # [T] decays against [T, D]

    def outer(a: Float[jax.Array, "T"], b: Float[jax.Array, "T, 1"]) -> Float[jax.Array, "T"]:
        return jax.lax.associative_scan(lambda x, y: (x[0] * y[0], x[1] + y[0]), (a, b))[0]

    def lengths_bug(x: Float[jax.Array, "T, D"], y: Float[jax.Array, "S, D"]
                    ) -> Float[jax.Array, "T, D"]:  # JAX: the same first dimension
        return jax.lax.associative_scan(lambda a, b: (a[0] + b[0], a[1] + b[1]), (x, y))[0]

    assert clean(verify(recurrence)), str(verify(recurrence))
    assert clean(verify(lambda x: jax.lax.associative_scan(jnp.maximum, x, axis=1),
                        "B, T, D => B, T, D"))
    r = verify(recurrence_bug)
    assert kinds(r)[0] == "broadcast" and "T against D" in r.findings[0].message, str(r)
    assert not r.notes, str(r)
    r = verify(outer)
    assert "outer-product" in kinds(r) and not r.notes, str(r)
    r = verify(lengths_bug)
    assert kinds(r) == ["broadcast"] and "T and S" in str(r) and not r.notes, str(r)
