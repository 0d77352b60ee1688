"""Classic numerics as public implementations write them (written for this corpus, from the
probe of issue 14's verify round): k-means with np.add.at, GMM EM with SciPy's logsumexp and a
flat-view regularizer, an HMM forward pass and Viterbi filling preallocated arrays, cleanrl's
GAE loop, Gram-Schmidt, a strided im2col, a weighted mean, a GP with SciPy's Cholesky, and JAX
versions under vmap and scan.

Each case is (name, correct function, function with one realistic injected bug, the finding
code the bug must give); the signatures are the functions' annotations.
"""

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg
from scipy.spatial.distance import cdist
from scipy.special import logsumexp

from tensig import Float, Int


def kmeans_update(X: Float[np.ndarray, "N, D"], labels: Int[np.ndarray, "N"],
                  C: Float[np.ndarray, "K, D"]) -> Float[np.ndarray, "K, D"]:
    sums = np.zeros_like(C)
    np.add.at(sums, labels, X)
    counts = np.bincount(labels, minlength=C.shape[0]).astype(X.dtype)
    return sums / np.maximum(counts, 1.0)[:, None]


def kmeans_update_bug(X: Float[np.ndarray, "N, D"], labels: Int[np.ndarray, "N"],
                      C: Float[np.ndarray, "K, D"]) -> Float[np.ndarray, "K, D"]:
    sums = np.zeros_like(C)
    np.add.at(sums, labels, X)
    counts = np.bincount(labels, minlength=C.shape[0]).astype(X.dtype)
    return sums / np.maximum(counts, 1.0)  # divides each column, not each centroid


def gmm_estep(X: Float[np.ndarray, "N, D"], means: Float[np.ndarray, "K, D"],
              covs: Float[np.ndarray, "K, D, D"], weights: Float[np.ndarray, "K"]
              ) -> Float[np.ndarray, "N, K"]:
    n, d = X.shape
    log_prob = np.empty((n, len(means)))
    for j in range(len(means)):
        L = np.linalg.cholesky(covs[j])
        sol = np.linalg.solve(L, (X - means[j]).T)
        logdet = 2 * np.sum(np.log(np.diag(L)))
        log_prob[:, j] = -0.5 * (d * np.log(2 * np.pi) + logdet + np.sum(sol ** 2, axis=0))
    weighted = log_prob + np.log(weights)
    return np.exp(weighted - logsumexp(weighted, axis=1)[:, None])


def gmm_estep_bug(X: Float[np.ndarray, "N, D"], means: Float[np.ndarray, "K, D"],
                  covs: Float[np.ndarray, "K, D, D"], weights: Float[np.ndarray, "K"]
                  ) -> Float[np.ndarray, "N, K"]:
    n, d = X.shape
    log_prob = np.empty((n, len(means)))
    for j in range(len(means)):
        L = np.linalg.cholesky(covs[j])
        sol = np.linalg.solve(L, (X - means[j]).T)
        logdet = 2 * np.sum(np.log(np.diag(L)))
        log_prob[:, j] = -0.5 * (d * np.log(2 * np.pi) + logdet + np.sum(sol ** 2, axis=1))
    weighted = log_prob + np.log(weights)  # above: the distances summed over the points
    return np.exp(weighted - logsumexp(weighted, axis=1)[:, None])


def gmm_mstep(X: Float[np.ndarray, "N, D"], resp: Float[np.ndarray, "N, K"], reg: float = 1e-6
              ) -> Float[np.ndarray, "K, D, D"]:
    n_components, n_features = resp.shape[1], X.shape[1]
    nk = resp.sum(axis=0)
    means = np.dot(resp.T, X) / nk[:, np.newaxis]
    covariances = np.empty((n_components, n_features, n_features))
    for k in range(n_components):
        diff = X - means[k]
        covariances[k] = np.dot(resp[:, k] * diff.T, diff) / nk[k]
        covariances[k].flat[:: n_features + 1] += reg
    return covariances


def gmm_mstep_bug(X: Float[np.ndarray, "N, D"], resp: Float[np.ndarray, "N, K"],
                  reg: float = 1e-6) -> Float[np.ndarray, "K, D, D"]:
    n_components, n_features = resp.shape[1], X.shape[1]
    nk = resp.sum(axis=0)
    means = np.dot(resp.T, X) / nk[:, np.newaxis]
    covariances = np.empty((n_components, n_features, n_features))
    for k in range(n_components):
        diff = X - means[k]
        covariances[k] = np.dot(resp[:, k] * diff.T, diff) / nk
        covariances[k].flat[:: n_features + 1] += reg  # above: every component's count
    return covariances


def hmm_forward(pi: Float[np.ndarray, "K"], A: Float[np.ndarray, "K, K"],
                B: Float[np.ndarray, "K, V"], obs: Int[np.ndarray, "T"]
                ) -> Float[np.ndarray, "T, K"]:
    T = len(obs)
    alpha = np.zeros((T, len(pi)))
    alpha[0] = pi * B[:, obs[0]]
    alpha[0] /= alpha[0].sum()
    for t in range(1, T):
        alpha[t] = (alpha[t - 1] @ A) * B[:, obs[t]]
        alpha[t] /= alpha[t].sum()
    return alpha


def hmm_forward_bug(pi: Float[np.ndarray, "K"], A: Float[np.ndarray, "K, K"],
                    B: Float[np.ndarray, "K, V"], obs: Int[np.ndarray, "T"]
                    ) -> Float[np.ndarray, "T, K"]:
    T = len(obs)
    alpha = np.zeros((T, len(pi)))
    alpha[0] = pi * B[obs[0]]  # a row of the emissions where a column was meant
    alpha[0] /= alpha[0].sum()
    for t in range(1, T):
        alpha[t] = (alpha[t - 1] @ A) * B[:, obs[t]]
        alpha[t] /= alpha[t].sum()
    return alpha


def viterbi(log_pi: Float[np.ndarray, "K"], log_A: Float[np.ndarray, "K, K"],
            log_b: Float[np.ndarray, "T, K"]) -> Int[np.ndarray, "T"]:
    T, K = log_b.shape
    delta = np.zeros((T, K))
    psi = np.zeros((T, K), dtype=np.int64)
    delta[0] = log_pi + log_b[0]
    for t in range(1, T):
        scores = delta[t - 1][:, None] + log_A
        psi[t] = np.argmax(scores, axis=0)
        delta[t] = np.max(scores, axis=0) + log_b[t]
    path = np.zeros(T, dtype=np.int64)
    path[-1] = np.argmax(delta[-1])
    for t in range(T - 2, -1, -1):
        path[t] = psi[t + 1, path[t + 1]]
    return path


def viterbi_bug(log_pi: Float[np.ndarray, "K"], log_A: Float[np.ndarray, "K, K"],
                log_b: Float[np.ndarray, "T, K"]) -> Int[np.ndarray, "T"]:
    T, K = log_b.shape
    delta = np.zeros((T, K))
    psi = np.zeros((T, K), dtype=np.int64)
    delta[0] = log_pi + log_b[0]
    for t in range(1, T):
        scores = delta[t - 1][:, None] + log_A
        psi[t] = np.argmax(scores, axis=0)
        delta[t] = np.max(scores, axis=1)[:, None] + log_b[t]  # a column of best scores
    path = np.zeros(T, dtype=np.int64)
    path[-1] = np.argmax(delta[-1])
    for t in range(T - 2, -1, -1):
        path[t] = psi[t + 1, path[t + 1]]
    return path


def gae(rewards: Float[np.ndarray, "T, E"], values: Float[np.ndarray, "T, E"],
        dones: Float[np.ndarray, "T, E"], next_value: Float[np.ndarray, "E"],
        next_done: Float[np.ndarray, "E"], gamma: float = 0.99, lam: float = 0.95
        ) -> Float[np.ndarray, "T, E"]:
    num_steps = rewards.shape[0]
    advantages = np.zeros_like(rewards)
    lastgaelam = 0
    for t in reversed(range(num_steps)):
        if t == num_steps - 1:
            nextnonterminal = 1.0 - next_done
            nextvalues = next_value
        else:
            nextnonterminal = 1.0 - dones[t + 1]
            nextvalues = values[t + 1]
        delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
        advantages[t] = lastgaelam = delta + gamma * lam * nextnonterminal * lastgaelam
    return advantages


def gae_bug(rewards: Float[np.ndarray, "T, E"], values: Float[np.ndarray, "T, E"],
            dones: Float[np.ndarray, "T, E"], next_value: Float[np.ndarray, "E, 1"],
            next_done: Float[np.ndarray, "E"], gamma: float = 0.99, lam: float = 0.95
            ) -> Float[np.ndarray, "T, E"]:
    num_steps = rewards.shape[0]
    advantages = np.zeros_like(rewards)
    lastgaelam = 0
    for t in reversed(range(num_steps)):
        if t == num_steps - 1:
            nextnonterminal = 1.0 - next_done
            nextvalues = next_value  # the critic's [E, 1] output kept as a column
        else:
            nextnonterminal = 1.0 - dones[t + 1]
            nextvalues = values[t + 1]
        delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
        advantages[t] = lastgaelam = delta + gamma * lam * nextnonterminal * lastgaelam
    return advantages


def gram_schmidt(V: Float[np.ndarray, "N, K"]) -> Float[np.ndarray, "N, K"]:
    Q = np.zeros_like(V)
    for j in range(V.shape[1]):
        v = V[:, j].copy()
        for i in range(j):
            v -= (Q[:, i] @ V[:, j]) * Q[:, i]
        Q[:, j] = v / np.linalg.norm(v)
    return Q


def gram_schmidt_bug(V: Float[np.ndarray, "N, K"]) -> Float[np.ndarray, "N, K"]:
    Q = np.zeros_like(V)
    for j in range(V.shape[1]):
        v = V[:, j].copy()
        for i in range(j):
            v -= (Q[:, i] @ V[:, j]) * Q[i]  # a row of Q where a column was meant
        Q[:, j] = v / np.linalg.norm(v)
    return Q


def im2col(x: Float[np.ndarray, "N, C, H, W"], w: Float[np.ndarray, "F, C, K, K"],
           stride: int = 2) -> Float[np.ndarray, "N, F, _, _"]:
    k = w.shape[-1]
    windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))
    windows = windows[:, :, ::stride, ::stride]
    n, _, oh, ow = windows.shape[:4]
    cols = windows.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, -1)
    out = cols @ w.reshape(w.shape[0], -1).T
    return out.reshape(n, oh, ow, -1).transpose(0, 3, 1, 2)


def im2col_bug(x: Float[np.ndarray, "N, C, H, W"], w: Float[np.ndarray, "F, C, K, K"],
               stride: int = 2) -> Float[np.ndarray, "N, F, _, _"]:
    k = w.shape[-1]
    windows = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))
    windows = windows[:, :, ::stride, ::stride]
    n, _, oh, ow = windows.shape[:4]
    cols = windows.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, -1)
    out = cols @ w.reshape(w.shape[0], -1).T
    return out.reshape(n, -1, oh, ow)  # a reshape where the transpose was meant


def linear_fit(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"]) -> Float[np.ndarray, "N"]:
    Xb = np.c_[np.ones(len(X)), X]
    coef, *_ = np.linalg.lstsq(Xb, y, rcond=None)
    return Xb.dot(coef).ravel()


def linear_fit_bug(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"]
                   ) -> Float[np.ndarray, "N"]:
    Xb = np.c_[np.ones(len(X)), X]
    coef, *_ = np.linalg.lstsq(Xb, y, rcond=None)
    return X.dot(coef).ravel()  # the design matrix without its intercept column


def gp_mean(Xtr: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"],
            Xte: Float[np.ndarray, "M, D"]) -> Float[np.ndarray, "M"]:
    K = np.exp(-cdist(Xtr, Xtr, "sqeuclidean")) + 1e-3 * np.eye(len(Xtr))
    alpha = scipy.linalg.cho_solve(scipy.linalg.cho_factor(K, lower=True), y)
    return np.exp(-cdist(Xte, Xtr, "sqeuclidean")) @ alpha


def gp_mean_bug(Xtr: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"],
                Xte: Float[np.ndarray, "M, D"]) -> Float[np.ndarray, "M"]:
    K = np.exp(-cdist(Xtr, Xtr, "sqeuclidean")) + 1e-3 * np.eye(len(Xtr))
    alpha = scipy.linalg.cho_solve(scipy.linalg.cho_factor(K, lower=True), y)
    return np.exp(-cdist(Xtr, Xte, "sqeuclidean")) @ alpha  # the cross kernel transposed


def batched_quad(A: Float[np.ndarray, "B, N, N"], x: Float[np.ndarray, "B, N"]
                 ) -> Float[np.ndarray, "B"]:
    return np.einsum("...i,...ij,...j->...", x, A, x)


def batched_quad_bug(A: Float[np.ndarray, "B, N, N"], x: Float[np.ndarray, "B, N"]
                     ) -> Float[np.ndarray, "B"]:
    return np.einsum("...i,...ij,...j->...", x, A.sum(0), x.T)  # the batch summed away


def hmm_forward_scan(log_pi: Float[jax.Array, "K"], log_A: Float[jax.Array, "K, K"],
                     log_b: Float[jax.Array, "T, K"]) -> Float[jax.Array, "T, K"]:
    def step(carry, lb):
        nxt = jax.nn.logsumexp(carry[:, None] + log_A, axis=0) + lb
        return nxt, nxt

    init = log_pi + log_b[0]
    _, alphas = jax.lax.scan(step, init, log_b[1:])
    return jnp.concatenate([init[None], alphas], axis=0)


def hmm_forward_scan_bug(log_pi: Float[jax.Array, "K"], log_A: Float[jax.Array, "K, K"],
                         log_b: Float[jax.Array, "T, K"]) -> Float[jax.Array, "T, K"]:
    def step(carry, lb):
        nxt = jax.nn.logsumexp(carry[:, None] + log_A, axis=0) + lb
        return nxt, nxt

    init = log_pi + log_b[0]
    _, alphas = jax.lax.scan(step, init, log_b[1:])
    return jnp.concatenate([init, alphas], axis=0)  # the first step lacks its time axis


def adam_bias(w: Float[jax.Array, "D, H"], b: Float[jax.Array, "H"],
              gw: Float[jax.Array, "D, H"], gb: Float[jax.Array, "H"], lr: float = 1e-3
              ) -> Float[jax.Array, "H"]:
    params, grads = {"w": w, "b": b}, {"w": gw, "b": gb}
    mu = jax.tree.map(lambda g: 0.1 * g, grads)
    nu = jax.tree.map(lambda g: 0.001 * g ** 2, grads)
    updates = jax.tree.map(lambda m, v: -lr * m / (jnp.sqrt(v) + 1e-8), mu, nu)
    return jax.tree.map(jnp.add, params, updates)["b"]


def adam_bias_bug(w: Float[jax.Array, "D, H"], b: Float[jax.Array, "H"],
                  gw: Float[jax.Array, "D, H"], gb: Float[jax.Array, "H"], lr: float = 1e-3
                  ) -> Float[jax.Array, "H"]:
    params, grads = {"w": w, "b": b}, {"w": gw, "b": gb[:, None]}  # the bias grad a column
    mu = jax.tree.map(lambda g: 0.1 * g, grads)
    nu = jax.tree.map(lambda g: 0.001 * g ** 2, grads)
    updates = jax.tree.map(lambda m, v: -lr * m / (jnp.sqrt(v) + 1e-8), mu, nu)
    return jax.tree.map(jnp.add, params, updates)["b"]


CASES = [
    ("kmeans np.add.at", kmeans_update, kmeans_update_bug, "TS101"),
    ("gmm e-step scipy logsumexp", gmm_estep, gmm_estep_bug, "TS101"),
    ("gmm m-step flat diagonal", gmm_mstep, gmm_mstep_bug, "TS101"),
    ("hmm forward range(1, T)", hmm_forward, hmm_forward_bug, "TS101"),
    ("viterbi", viterbi, viterbi_bug, "TS101"),
    ("cleanrl gae", gae, gae_bug, "TS201"),
    ("gram-schmidt range(j)", gram_schmidt, gram_schmidt_bug, "TS101"),
    ("strided im2col", im2col, im2col_bug, "TS202", {"strided im2col": "assumes K <= H"}),
    ("np.c_ and lstsq", linear_fit, linear_fit_bug, "TS102"),
    ("gp scipy cholesky + cdist", gp_mean, gp_mean_bug, "TS102"),
    ("einsum ellipsis", batched_quad, batched_quad_bug, "TS102"),
    ("jax hmm scan", hmm_forward_scan, hmm_forward_scan_bug, "TS106"),
    ("jax adam tree_map", adam_bias, adam_bias_bug, "TS103"),
]
