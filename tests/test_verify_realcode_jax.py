"""verify on JAX code written the way public JAX code writes it (flax examples, haiku, optax,
cleanrl/purejaxrl, diffusion samplers, jraph): each test is a pattern that verify once stopped
on, false-alarmed on, or missed.

The functions are annotated with jaxtyping-style shape annotations, as verified files are.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from tensig import Float
from tensig.check.verify import verify


def kinds(report):
    return [f.kind for f in report]


def clean(report) -> bool:
    return report.ok and not report.findings and not report.notes


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
