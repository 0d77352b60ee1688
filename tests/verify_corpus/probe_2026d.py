"""PyTorch, JAX and NumPy code for ``tensig.verify`` through the transformations and modules
the other corpora left out, in the style of public implementations: a MAML inner loop by
``torch.func.functional_call``, Opacus-style per-sample gradients by ``vmap(grad(...))``, a
Hessian-vector product by ``jvp(grad(...))``, an SGD step by ``grad_and_value``, input
saliency by ``vjp``, GRU and bidirectional LSTM encoders, dropout-like noise under
``torch.vmap``, a decay table written through ``detach()``; JAX's ``vmap`` with keyword
arguments; SciPy's ``expm`` discretization and ``cho_solve`` GP regression: written for this
corpus, nothing copied.

Each case is ``(name, correct, buggy, finding code)``; the buggy twin differs by one realistic
bug marked ``# BUG``.  ``tests/test_verify_realcode_2026d.py`` asserts that each correct one
verifies and each buggy one reports its code.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg as sla
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, grad_and_value, jvp, vjp, vmap

from tensig import Float, Int

torch.manual_seed(0)
learner = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
head = nn.Linear(8, 4)
gru = nn.GRU(16, 32, batch_first=True)
bilstm = nn.LSTM(16, 32, num_layers=2, batch_first=True, bidirectional=True)
classifier = nn.Linear(64, 5)

# -- torch.func: MAML, per-sample gradients, HVP, grad_and_value, vjp ---------------------------


def maml_adapt(xs: Float[torch.Tensor, "K 8"], ys: Float[torch.Tensor, "K 4"],
               xq: Float[torch.Tensor, "Q 8"]) -> Float[torch.Tensor, "Q 4"]:
    """MAML's inner loop: one gradient step on the support set by ``functional_call`` with
    the fast weights, then the query set through the adapted network."""
    params = dict(learner.named_parameters())
    g = grad(lambda p: F.mse_loss(functional_call(learner, p, (xs,)), ys))(params)
    fast = {k: w - 0.1 * g[k] for k, w in params.items()}
    return functional_call(learner, fast, (xq,))


def maml_adapt_bug(xs: Float[torch.Tensor, "K 8"], ys: Float[torch.Tensor, "K 4"],
                   xq: Float[torch.Tensor, "Q 8"]) -> Float[torch.Tensor, "Q 4"]:
    params = dict(learner.named_parameters())
    g = grad(lambda p: F.mse_loss(functional_call(learner, p, (xs,)), ys))(params)
    fast = {k: w - 0.1 * g[k] for k, w in params.items()}
    return functional_call(learner, fast, (xs,))  # BUG: the support set, [K, 4]


def _example_loss(p, xi, yi):
    return F.cross_entropy(functional_call(head, p, (xi[None],)), yi[None])


def per_sample_grads(x: Float[torch.Tensor, "B 8"], y: Int[torch.Tensor, "B"]
                     ) -> Float[torch.Tensor, "B 4 8"]:
    """Opacus-style per-sample gradients: one example's loss by ``functional_call``, its
    gradient vmapped over the batch with the parameters shared."""
    params = {k: v.detach() for k, v in head.named_parameters()}
    return vmap(grad(_example_loss), in_dims=(None, 0, 0))(params, x, y)["weight"]


def per_sample_grads_bug(x: Float[torch.Tensor, "B 8"], y: Int[torch.Tensor, "B"]
                         ) -> Float[torch.Tensor, "B 4 8"]:
    params = {k: v.detach() for k, v in head.named_parameters()}
    return vmap(grad(_example_loss), in_dims=(0, 0, 0))(params, x, y)["weight"]  # BUG: maps p


def logistic_hvp(w: Float[torch.Tensor, "D"], x: Float[torch.Tensor, "N D"],
                 y: Float[torch.Tensor, "N"]) -> Float[torch.Tensor, "D"]:
    """A Hessian-vector product of the logistic loss, forward over reverse
    (``jvp(grad(f))``), along the mean feature direction (a Newton-CG step's probe)."""
    def loss(w):
        return F.binary_cross_entropy_with_logits(x @ w, y)
    return jvp(grad(loss), (w,), (x.mean(0),))[1]


def logistic_hvp_bug(w: Float[torch.Tensor, "D"], x: Float[torch.Tensor, "N D"],
                     y: Float[torch.Tensor, "N"]) -> Float[torch.Tensor, "D"]:
    def loss(w):
        return F.binary_cross_entropy_with_logits(x @ w, y)
    return jvp(grad(loss), (w,), (x.mean(1),))[1]  # BUG: [N], the primal is [D]


def sgd_step(w: Float[torch.Tensor, "D E"], x: Float[torch.Tensor, "B D"],
             y: Float[torch.Tensor, "B E"]
             ) -> tuple[Float[torch.Tensor, ""], Float[torch.Tensor, "D E"]]:
    """A least-squares SGD step by ``grad_and_value``: torch's order, gradient first."""
    g, loss = grad_and_value(lambda w: ((x @ w - y) ** 2).mean())(w)
    return loss, w - 0.1 * g


def sgd_step_bug(w: Float[torch.Tensor, "D E"], x: Float[torch.Tensor, "B D"],
                 y: Float[torch.Tensor, "B E"]
                 ) -> tuple[Float[torch.Tensor, ""], Float[torch.Tensor, "D E"]]:
    loss, g = grad_and_value(lambda w: ((x @ w - y) ** 2).mean())(w)  # BUG: JAX's order
    return loss, w - 0.1 * g


def saliency(x: Float[torch.Tensor, "B 8"]) -> Float[torch.Tensor, "B 8"]:
    """Input-gradient saliency: the pullback of the network's summed logits by ``vjp``."""
    out, pull = vjp(learner, x)
    (gx,) = pull(torch.ones_like(out))
    return gx.abs()


def saliency_bug(x: Float[torch.Tensor, "B 8"]) -> Float[torch.Tensor, "B 8"]:
    _, pull = vjp(learner, x)
    (gx,) = pull(torch.ones_like(x))  # BUG: a cotangent of the input's shape
    return gx.abs()


# -- recurrent modules ------------------------------------------------------------------------


def gru_encode(x: Float[torch.Tensor, "B T 16"], h0: Float[torch.Tensor, "1 B 32"]
               ) -> tuple[Float[torch.Tensor, "B T 32"], Float[torch.Tensor, "B 32"]]:
    """A GRU encoder from a given state: every step's output and the last state."""
    out, h = gru(x, h0)
    return out, h[-1]


def gru_encode_bug(x: Float[torch.Tensor, "B T 16"], h0: Float[torch.Tensor, "1 B 32"]
                   ) -> tuple[Float[torch.Tensor, "B T 32"], Float[torch.Tensor, "B 32"]]:
    out, h = gru(x, h0)
    return out, h  # BUG: the layers axis kept, [1, B, 32]


def bilstm_tagger(x: Float[torch.Tensor, "B T 16"]) -> Float[torch.Tensor, "B T 5"]:
    """A BiLSTM tagger: two directions' features, concatenated, to the tag logits."""
    out, _ = bilstm(x)
    return classifier(out)


def bilstm_tagger_bug(x: Float[torch.Tensor, "B T 16"]) -> Float[torch.Tensor, "B T 5"]:
    _, (h, _) = bilstm(x)
    return classifier(h[-1])[:, None].expand(-1, x.shape[1], -1)  # BUG: one direction, 32


# -- torch.vmap's randomness, writes through detach() -----------------------------------------


def noisy_ensemble(x: Float[torch.Tensor, "M B 3"]) -> Float[torch.Tensor, "M B 3"]:
    """Each ensemble member's inputs jittered by its own noise: vmap with randomness."""
    return torch.vmap(lambda r: r + 0.1 * torch.randn(3), randomness="different")(x)


def noisy_ensemble_bug(x: Float[torch.Tensor, "M B 3"]) -> Float[torch.Tensor, "M B 3"]:
    return torch.vmap(lambda r: r + 0.1 * torch.randn(3))(x)  # BUG: randomness 'error'


def decay_table(gamma: Float[torch.Tensor, "H"], x: Float[torch.Tensor, "H T"]
                ) -> Float[torch.Tensor, "H T"]:
    """RetNet-style per-head decays: each head's rate over the steps, the first step 1."""
    table = gamma[:, None].expand(-1, x.shape[1]).detach().clone()
    table[:, 0] = 1.0
    return x * table.cumprod(1)


def decay_table_bug(gamma: Float[torch.Tensor, "H"], x: Float[torch.Tensor, "H T"]
                    ) -> Float[torch.Tensor, "H T"]:
    table = gamma[:, None].expand(-1, x.shape[1]).detach()  # BUG: a view, no clone()
    table[0] = 1.0
    return x * table.cumprod(1)


# -- JAX: vmap with keyword arguments ---------------------------------------------------------


def _scaled_layer(x, w, *, scale):
    return jnp.tanh(x @ w) * scale


def film_per_example(x: Float[jax.Array, "B D"], w: Float[jax.Array, "D E"],
                     gamma: Float[jax.Array, "B E"]) -> Float[jax.Array, "B E"]:
    """FiLM-style conditioning per example: the scale by keyword, which JAX maps too."""
    return jax.vmap(_scaled_layer, in_axes=(0, None))(x, w, scale=gamma)


def film_per_example_bug(x: Float[jax.Array, "B D"], w: Float[jax.Array, "D E"],
                         gamma: Float[jax.Array, "E"]) -> Float[jax.Array, "B E"]:
    return jax.vmap(_scaled_layer, in_axes=(0, None))(x, w, scale=gamma)  # BUG: [E] mapped


def _masked_mean(x, *, mask):
    return jnp.sum(x * mask[:, None], 0) / jnp.maximum(jnp.sum(mask), 1.0)


def masked_pool(x: Float[jax.Array, "B T D"], mask: Float[jax.Array, "B T"]
                ) -> Float[jax.Array, "B D"]:
    """A padded batch's mean over its valid steps, one sequence at a time."""
    return jax.vmap(_masked_mean)(x, mask=mask)


def masked_pool_bug(x: Float[jax.Array, "B T D"], mask: Float[jax.Array, "B T"]
                    ) -> Float[jax.Array, "B D"]:
    return jax.vmap(_masked_mean)(x, mask=mask.T)  # BUG: [T, B] mapped over T


# -- SciPy ------------------------------------------------------------------------------------


def zoh_discretize(A: Float[np.ndarray, "N N"], B: Float[np.ndarray, "N M"], dt: float = 0.1
                   ) -> tuple[Float[np.ndarray, "N N"], Float[np.ndarray, "N M"]]:
    """Zero-order-hold discretization of x' = Ax + Bu by one matrix exponential of the
    block matrix [[A, B], [0, 0]] dt."""
    n, m = B.shape
    blk = np.zeros((n + m, n + m))
    blk[:n, :n], blk[:n, n:] = A * dt, B * dt
    E = sla.expm(blk)
    return E[:n, :n], E[:n, n:]


def zoh_discretize_bug(A: Float[np.ndarray, "N N"], B: Float[np.ndarray, "N M"],
                       dt: float = 0.1
                       ) -> tuple[Float[np.ndarray, "N N"], Float[np.ndarray, "N M"]]:
    n = A.shape[0]
    E = sla.expm(np.hstack([A, B]) * dt)  # BUG: [N, N + M], no zero rows
    return E[:n, :n], E[:n, n:]


def _rbf(a, b):
    return np.exp(-0.5 * ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1))


def gp_posterior_mean(X: Float[np.ndarray, "N D"], Xs: Float[np.ndarray, "S D"],
                      y: Float[np.ndarray, "N"]) -> Float[np.ndarray, "S"]:
    """A GP's posterior mean under an RBF kernel by a Cholesky solve (with jitter)."""
    c = sla.cho_factor(_rbf(X, X) + 1e-2 * np.eye(X.shape[0]))
    return _rbf(Xs, X) @ sla.cho_solve(c, y)


def gp_posterior_mean_bug(X: Float[np.ndarray, "N D"], Xs: Float[np.ndarray, "S D"],
                          y: Float[np.ndarray, "N"]) -> Float[np.ndarray, "S"]:
    c = sla.cho_factor(_rbf(X, X) + 1e-2 * np.eye(X.shape[0]))
    return sla.cho_solve(c, _rbf(Xs, X)) @ y  # BUG: [S, N] rows as the right-hand side


CASES = [
    ("maml functional_call", maml_adapt, maml_adapt_bug, "TS103"),
    ("per-sample grads", per_sample_grads, per_sample_grads_bug, "TS101"),
    ("jvp of grad hvp", logistic_hvp, logistic_hvp_bug, "TS101"),
    ("grad_and_value sgd", sgd_step, sgd_step_bug, "TS103"),
    ("vjp saliency", saliency, saliency_bug, "TS101"),
    ("gru encoder", gru_encode, gru_encode_bug, "TS103"),
    ("bilstm tagger", bilstm_tagger, bilstm_tagger_bug, "TS102"),
    ("vmap randomness", noisy_ensemble, noisy_ensemble_bug, "TS108"),
    ("detach decay table", decay_table, decay_table_bug, "TS301"),
    ("vmap keyword scale", film_per_example, film_per_example_bug, "TS101"),
    ("vmap keyword mask", masked_pool, masked_pool_bug, "TS101"),
    ("expm discretization", zoh_discretize, zoh_discretize_bug, "TS102"),
    ("cho_solve gp mean", gp_posterior_mean, gp_posterior_mean_bug, "TS102"),
]
# torch refused the buggy operands itself (verify's note says so)
STOPS: set[str] = set()
# correct code that needs a size at least some constant: the one warning
ASSUMES: dict[str, str] = {}
