"""Classic NumPy numerics as textbooks and public implementations write them (written for this
corpus, the NumPy probe of 2026): HMM forward-backward and Baum-Welch counts in log space, GMM
M-steps with einsum, GP regression with np.linalg.solve, Newton's logistic regression, ridge,
PCA whitening, FastICA, t-SNE, DBSCAN, spectral clustering, kNN with argpartition, softmax
regression, stride-trick convolutions, FFT convolution, smoothing windows, particle filters,
tabular RL (Q-learning, value and policy iteration, n-step returns, TD(lambda)), a Kalman RTS
smoother, histogram equalisation, Monte-Carlo paths, bootstrap intervals, mean-shift,
Vandermonde fits, image resizing by np.interp, and cs231n-style layers.

Each case is (name, correct function, function with one realistic injected bug, the finding
code the bug must give); the signatures are the functions' annotations.  The bug is on the line
marked ``# BUG``.  ``ASSUMING`` holds the correct functions that hold only where one size bounds
another (the ``k`` smallest of ``N``, a window of ``K`` on ``N`` samples), with that condition:
their one finding is that warning.
"""

import numpy as np
from numpy.lib.stride_tricks import as_strided, sliding_window_view
from scipy.special import logsumexp

from tensig import Float, Int

# -- hidden Markov models in log space ------------------------------------------------------------


def hmm_posteriors(log_pi: Float[np.ndarray, "K"], log_A: Float[np.ndarray, "K, K"],
                   log_B: Float[np.ndarray, "K, V"], obs: Int[np.ndarray, "T"]
                   ) -> Float[np.ndarray, "T, K"]:
    T, K = len(obs), len(log_pi)
    log_b = log_B[:, obs].T
    log_alpha = np.zeros((T, K))
    log_beta = np.zeros((T, K))
    log_alpha[0] = log_pi + log_b[0]
    for t in range(1, T):
        log_alpha[t] = logsumexp(log_alpha[t - 1][:, None] + log_A, axis=0) + log_b[t]
    for t in range(T - 2, -1, -1):
        log_beta[t] = logsumexp(log_A + (log_b[t + 1] + log_beta[t + 1])[None, :], axis=1)
    log_gamma = log_alpha + log_beta
    return np.exp(log_gamma - logsumexp(log_gamma, axis=1, keepdims=True))


def hmm_posteriors_bug(log_pi: Float[np.ndarray, "K"], log_A: Float[np.ndarray, "K, K"],
                       log_B: Float[np.ndarray, "K, V"], obs: Int[np.ndarray, "T"]
                       ) -> Float[np.ndarray, "T, K"]:
    T, K = len(obs), len(log_pi)
    log_b = log_B[:, obs].T
    log_alpha = np.zeros((T, K))
    log_beta = np.zeros((T, K))
    log_alpha[0] = log_pi + log_b[0]
    for t in range(1, T):
        log_alpha[t] = logsumexp(log_alpha[t - 1][:, None] + log_A, axis=0) + log_b[t]
    for t in range(T - 2, -1, -1):
        log_beta[t] = logsumexp(log_A + (log_b[t + 1] + log_beta[t + 1])[None, :], axis=1)
    log_gamma = log_alpha + log_beta
    return np.exp(log_gamma - logsumexp(log_gamma, axis=1))  # BUG: the normalizer is [T]


def baum_welch_xi(log_alpha: Float[np.ndarray, "T, K"], log_beta: Float[np.ndarray, "T, K"],
                  log_A: Float[np.ndarray, "K, K"], log_b: Float[np.ndarray, "T, K"]
                  ) -> Float[np.ndarray, "K, K"]:
    log_xi = (log_alpha[:-1, :, None] + log_A[None, :, :]
              + (log_b[1:] + log_beta[1:])[:, None, :])
    log_xi -= logsumexp(log_xi, axis=(1, 2), keepdims=True)
    expected = np.exp(logsumexp(log_xi, axis=0))
    return expected / expected.sum(axis=1, keepdims=True)


def baum_welch_xi_bug(log_alpha: Float[np.ndarray, "T, K"], log_beta: Float[np.ndarray, "T, K"],
                      log_A: Float[np.ndarray, "K, K"], log_b: Float[np.ndarray, "T, K"]
                      ) -> Float[np.ndarray, "K, K"]:
    log_xi = (log_alpha[:, :, None] + log_A[None, :, :]  # BUG: alpha of every step, T not T-1
              + (log_b[1:] + log_beta[1:])[:, None, :])
    log_xi -= logsumexp(log_xi, axis=(1, 2), keepdims=True)
    expected = np.exp(logsumexp(log_xi, axis=0))
    return expected / expected.sum(axis=1, keepdims=True)


def viterbi_log(log_pi: Float[np.ndarray, "K"], log_A: Float[np.ndarray, "K, K"],
                log_b: Float[np.ndarray, "T, K"]) -> Int[np.ndarray, "T"]:
    T, K = log_b.shape
    delta = log_pi + log_b[0]
    back = np.empty((T, K), dtype=np.intp)
    for t in range(1, T):
        cand = delta[:, None] + log_A
        back[t] = cand.argmax(axis=0)
        delta = cand[back[t], np.arange(K)] + log_b[t]
    states = np.empty(T, dtype=np.intp)
    states[T - 1] = delta.argmax()
    for t in range(T - 1, 0, -1):
        states[t - 1] = back[t, states[t]]
    return states


def viterbi_log_bug(log_pi: Float[np.ndarray, "K"], log_A: Float[np.ndarray, "K, K"],
                    log_b: Float[np.ndarray, "T, K"]) -> Int[np.ndarray, "T"]:
    T, K = log_b.shape
    delta = log_pi + log_b[0]
    back = np.empty((T, K), dtype=np.intp)
    for t in range(1, T):
        cand = delta[:, None] + log_A
        back[t] = cand.argmax(axis=0)
        delta = cand[back[t], np.arange(T)] + log_b[t]  # BUG: one column per time step
    states = np.empty(T, dtype=np.intp)
    states[T - 1] = delta.argmax()
    for t in range(T - 1, 0, -1):
        states[t - 1] = back[t, states[t]]
    return states


# -- mixtures, regression, kernels ----------------------------------------------------------------


def gmm_mstep_einsum(X: Float[np.ndarray, "N, D"], resp: Float[np.ndarray, "N, K"],
                     reg: float = 1e-6) -> Float[np.ndarray, "K, D, D"]:
    nk = resp.sum(axis=0) + 10 * np.finfo(resp.dtype).eps
    means = resp.T @ X / nk[:, None]
    diff = X[:, None, :] - means[None, :, :]
    covs = np.einsum("nk,nkd,nke->kde", resp, diff, diff) / nk[:, None, None]
    return covs + reg * np.eye(X.shape[1])[None]


def gmm_mstep_einsum_bug(X: Float[np.ndarray, "N, D"], resp: Float[np.ndarray, "N, K"],
                         reg: float = 1e-6) -> Float[np.ndarray, "K, D, D"]:
    nk = resp.sum(axis=0) + 10 * np.finfo(resp.dtype).eps
    means = resp.T @ X / nk[:, None]
    diff = X[:, None, :] - means[None, :, :]
    covs = np.einsum("nk,nkd,nke->kde", resp, diff, diff) / nk[:, None]  # BUG: over [D, D]
    return covs + reg * np.eye(X.shape[1])[None]


def gp_predict(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"],
               Xs: Float[np.ndarray, "M, D"], noise: float = 1e-2
               ) -> Float[np.ndarray, "M, 2"]:
    def rbf(a, b, ell=1.0):
        sq = (a ** 2).sum(1)[:, None] + (b ** 2).sum(1)[None, :] - 2 * a @ b.T
        return np.exp(-0.5 * sq / ell ** 2)

    K = rbf(X, X) + noise * np.eye(len(X))
    Ks = rbf(X, Xs)
    mean = Ks.T @ np.linalg.solve(K, y)
    var = np.diag(rbf(Xs, Xs)) - np.sum(Ks * np.linalg.solve(K, Ks), axis=0)
    return np.stack([mean, var], axis=1)


def gp_predict_bug(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"],
                   Xs: Float[np.ndarray, "M, D"], noise: float = 1e-2
                   ) -> Float[np.ndarray, "M, 2"]:
    def rbf(a, b, ell=1.0):
        sq = (a ** 2).sum(1)[:, None] + (b ** 2).sum(1)[None, :] - 2 * a @ b.T
        return np.exp(-0.5 * sq / ell ** 2)

    K = rbf(X, X) + noise * np.eye(len(X))
    Ks = rbf(X, Xs)
    mean = Ks.T @ np.linalg.solve(K, y)
    var = np.diag(rbf(Xs, Xs)) - np.sum(Ks * np.linalg.solve(K, Ks), axis=1)  # BUG: over M
    return np.stack([mean, var], axis=1)


def logistic_newton(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"], n_iter: int = 5,
                    l2: float = 1e-4) -> Float[np.ndarray, "D"]:
    w = np.zeros(X.shape[1])
    for _ in range(n_iter):
        p = 1.0 / (1.0 + np.exp(-X @ w))
        grad = X.T @ (p - y) + l2 * w
        s = p * (1 - p)
        H = X.T @ (s[:, None] * X) + l2 * np.eye(X.shape[1])
        w -= np.linalg.solve(H, grad)
    return w


def logistic_newton_bug(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"],
                        n_iter: int = 5, l2: float = 1e-4) -> Float[np.ndarray, "D"]:
    w = np.zeros(X.shape[1])
    for _ in range(n_iter):
        p = 1.0 / (1.0 + np.exp(-X @ w))
        grad = X.T @ (p - y) + l2 * w
        s = p * (1 - p)
        H = X.T @ (s * X) + l2 * np.eye(X.shape[1])  # BUG: the weights along D
        w -= np.linalg.solve(H, grad)
    return w


def ridge(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"], alpha: float = 1.0
          ) -> Float[np.ndarray, "D+1"]:
    x_mean, y_mean = X.mean(axis=0), y.mean()
    Xc, yc = X - x_mean, y - y_mean
    coef = np.linalg.solve(Xc.T @ Xc + alpha * np.identity(X.shape[1]), Xc.T @ yc)
    intercept = y_mean - x_mean @ coef
    return np.r_[intercept, coef]


def ridge_bug(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"], alpha: float = 1.0
              ) -> Float[np.ndarray, "D+1"]:
    x_mean, y_mean = X.mean(axis=0), y.mean()
    Xc, yc = X - x_mean, y - y_mean
    coef = np.linalg.solve(Xc.T @ Xc + alpha * np.identity(X.shape[0]), Xc.T @ yc)  # BUG
    intercept = y_mean - x_mean @ coef
    return np.r_[intercept, coef]


def pca_whiten(X: Float[np.ndarray, "N, D"], eps: float = 1e-8) -> Float[np.ndarray, "N, D"]:
    Xc = X - X.mean(axis=0)
    _, S, Vt = np.linalg.svd(Xc, full_matrices=False)
    W = Vt.T / (S + eps) * np.sqrt(len(X) - 1)
    return Xc @ W @ Vt


def pca_whiten_bug(X: Float[np.ndarray, "N, D"], eps: float = 1e-8) -> Float[np.ndarray, "N, D"]:
    Xc = X - X.mean(axis=0)
    _, S, Vt = np.linalg.svd(Xc, full_matrices=False)
    W = Vt / (S + eps) * np.sqrt(len(X) - 1)  # BUG: Vt where its transpose was meant
    return Xc @ W @ Vt


def fastica(X: Float[np.ndarray, "C, N"], W: Float[np.ndarray, "C, C"], n_iter: int = 3
            ) -> Float[np.ndarray, "C, N"]:
    for _ in range(n_iter):
        gwx = np.tanh(W @ X)
        g_wx = (1 - gwx ** 2).mean(axis=-1)
        W1 = gwx @ X.T / X.shape[1] - g_wx[:, np.newaxis] * W
        s, u = np.linalg.eigh(W1 @ W1.T)
        W = np.linalg.multi_dot([u * (1.0 / np.sqrt(s)), u.T, W1])
    return W @ X


def fastica_bug(X: Float[np.ndarray, "C, N"], W: Float[np.ndarray, "C, C"], n_iter: int = 3
                ) -> Float[np.ndarray, "C, N"]:
    for _ in range(n_iter):
        gwx = np.tanh(W @ X)
        g_wx = (1 - gwx ** 2).mean(axis=0)  # BUG: the mean over components, not samples
        W1 = gwx @ X.T / X.shape[1] - g_wx[:, np.newaxis] * W
        s, u = np.linalg.eigh(W1 @ W1.T)
        W = np.linalg.multi_dot([u * (1.0 / np.sqrt(s)), u.T, W1])
    return W @ X


def tsne_grad(P: Float[np.ndarray, "N, N"], Y: Float[np.ndarray, "N, E"]
              ) -> Float[np.ndarray, "N, E"]:
    sum_Y = np.sum(np.square(Y), axis=1)
    num = 1.0 / (1.0 + np.add(np.add(-2.0 * Y @ Y.T, sum_Y).T, sum_Y))
    num[range(len(Y)), range(len(Y))] = 0.0
    Q = np.maximum(num / np.sum(num), 1e-12)
    PQ = P - Q
    return 4.0 * np.sum((PQ * num)[:, :, None] * (Y[:, None, :] - Y[None, :, :]), axis=1)


def tsne_grad_bug(P: Float[np.ndarray, "N, N"], Y: Float[np.ndarray, "N, E"]
                  ) -> Float[np.ndarray, "N, E"]:
    sum_Y = np.sum(np.square(Y), axis=1)
    num = 1.0 / (1.0 + np.add(np.add(-2.0 * Y @ Y.T, sum_Y).T, sum_Y))
    num[range(len(Y)), range(len(Y))] = 0.0
    Q = np.maximum(num / np.sum(num), 1e-12)
    PQ = P - Q
    return 4.0 * np.sum((PQ * num) * (Y[:, None, :] - Y[None, :, :]), axis=1)  # BUG: no axis


def tsne_affinities(X: Float[np.ndarray, "N, D"], beta: Float[np.ndarray, "N"]
                    ) -> Float[np.ndarray, "N, N"]:
    sq = np.sum(X ** 2, axis=1)
    D2 = np.maximum(sq[:, None] - 2 * X @ X.T + sq[None, :], 0)
    P = np.exp(-D2 * beta[:, None])
    np.fill_diagonal(P, 0.0)
    P /= P.sum(axis=1, keepdims=True)
    return (P + P.T) / (2 * X.shape[0])


def tsne_affinities_bug(X: Float[np.ndarray, "N, D"], beta: Float[np.ndarray, "N"]
                        ) -> Float[np.ndarray, "N, N"]:
    sq = np.sum(X ** 2, axis=0)  # BUG: the squared norms of the features
    D2 = np.maximum(sq[:, None] - 2 * X @ X.T + sq[None, :], 0)
    P = np.exp(-D2 * beta[:, None])
    np.fill_diagonal(P, 0.0)
    P /= P.sum(axis=1, keepdims=True)
    return (P + P.T) / (2 * X.shape[0])


def dbscan_core(X: Float[np.ndarray, "N, D"], eps: float = 0.5, min_samples: int = 5
                ) -> Float[np.ndarray, "N, N"]:
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=-1)
    neighbors = d2 <= eps ** 2
    core = neighbors.sum(axis=1) >= min_samples
    return (neighbors & core[:, None]).astype(float)


def dbscan_core_bug(X: Float[np.ndarray, "N, D"], eps: float = 0.5, min_samples: int = 5
                    ) -> Float[np.ndarray, "N, N"]:
    d2 = ((X[:, None, :] - X) ** 2).sum(axis=1)  # BUG: sums over the second point
    neighbors = d2 <= eps ** 2
    core = neighbors.sum(axis=1) >= min_samples
    return (neighbors & core[:, None]).astype(float)


def spectral_embedding(W: Float[np.ndarray, "N, N"], C: Float[np.ndarray, "K, K"]
                       ) -> Float[np.ndarray, "N, K"]:
    k = C.shape[0]
    d = W.sum(axis=1)
    d_inv_sqrt = 1.0 / np.sqrt(d)
    L = np.eye(len(W)) - d_inv_sqrt[:, None] * W * d_inv_sqrt[None, :]
    _, evecs = np.linalg.eigh(L)
    U = evecs[:, :k]
    return U / np.linalg.norm(U, axis=1, keepdims=True)


def spectral_embedding_bug(W: Float[np.ndarray, "N, N"], C: Float[np.ndarray, "K, K"]
                           ) -> Float[np.ndarray, "N, K"]:
    k = C.shape[0]
    d = W.sum(axis=1)
    d_inv_sqrt = 1.0 / np.sqrt(d)
    L = np.eye(len(W)) - d_inv_sqrt[:, None] * W * d_inv_sqrt[None, :]
    _, evecs = np.linalg.eigh(L)
    U = evecs[:, :k]
    return U / np.linalg.norm(U, axis=1)  # BUG: the row norms spread over K


def knn_regress(Xtr: Float[np.ndarray, "N, D"], ytr: Float[np.ndarray, "N"],
                Xte: Float[np.ndarray, "M, D"], k: int = 5) -> Float[np.ndarray, "M"]:
    d2 = (Xte ** 2).sum(1)[:, None] - 2 * Xte @ Xtr.T + (Xtr ** 2).sum(1)[None, :]
    idx = np.argpartition(d2, k, axis=1)[:, :k]
    return ytr[idx].mean(axis=1)


def knn_regress_bug(Xtr: Float[np.ndarray, "N, D"], ytr: Float[np.ndarray, "N"],
                    Xte: Float[np.ndarray, "M, D"], k: int = 5) -> Float[np.ndarray, "M"]:
    d2 = (Xte ** 2).sum(1)[:, None] - 2 * Xte @ Xtr.T + (Xtr ** 2).sum(1)[None, :]
    idx = np.argpartition(d2, k, axis=0)[:k]  # BUG: the k nearest queries of each point
    return ytr[idx].mean(axis=1)


def softmax_regression_grad(X: Float[np.ndarray, "N, D"], y: Int[np.ndarray, "N"],
                            W: Float[np.ndarray, "D, C"], reg: float = 1e-3
                            ) -> Float[np.ndarray, "D, C"]:
    n = X.shape[0]
    scores = X @ W
    scores -= scores.max(axis=1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=1, keepdims=True)
    probs[np.arange(n), y] -= 1
    return X.T @ probs / n + reg * W


def softmax_regression_grad_bug(X: Float[np.ndarray, "N, D"], y: Int[np.ndarray, "N"],
                                W: Float[np.ndarray, "D, C"], reg: float = 1e-3
                                ) -> Float[np.ndarray, "D, C"]:
    n = X.shape[0]
    scores = X @ W
    scores -= scores.max(axis=1, keepdims=True)
    probs = np.exp(scores)
    probs /= probs.sum(axis=1, keepdims=True)
    probs[np.arange(n), y] -= 1
    return probs.T @ X / n + reg * W  # BUG: the gradient transposed


# -- convolutions by stride tricks and FFT --------------------------------------------------------


def conv2d_strided(x: Float[np.ndarray, "N, C, H, W"], w: Float[np.ndarray, "F, C, K, K"]
                   ) -> Float[np.ndarray, "N, F, H-K+1, W-K+1"]:
    n, c, h, wd = x.shape
    k = w.shape[-1]
    s0, s1, s2, s3 = x.strides
    patches = as_strided(x, shape=(n, c, h - k + 1, wd - k + 1, k, k),
                         strides=(s0, s1, s2, s3, s2, s3), writeable=False)
    return np.einsum("nchwij,fcij->nfhw", patches, w, optimize=True)


def conv2d_strided_bug(x: Float[np.ndarray, "N, C, H, W"], w: Float[np.ndarray, "F, C, K, K"]
                       ) -> Float[np.ndarray, "N, F, H-K+1, W-K+1"]:
    n, c, h, wd = x.shape
    k = w.shape[-1]
    s0, s1, s2, s3 = x.strides
    patches = as_strided(x, shape=(n, c, h - k + 1, wd - k + 1, k, k),
                         strides=(s0, s1, s2, s3, s2, s3), writeable=False)
    return np.einsum("nchwij,cfij->nfhw", patches, w, optimize=True)  # BUG: F and C swapped


def im2col_swv(x: Float[np.ndarray, "N, C, H, W"], w: Float[np.ndarray, "F, C, K, K"],
               b: Float[np.ndarray, "F"]) -> Float[np.ndarray, "N, F, H-K+1, W-K+1"]:
    k = w.shape[2]
    win = sliding_window_view(x, (k, k), axis=(2, 3))
    n, c, oh, ow = win.shape[:4]
    cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * oh * ow, c * k * k)
    out = cols @ w.reshape(len(w), -1).T + b
    return out.reshape(n, oh, ow, -1).transpose(0, 3, 1, 2)


def im2col_swv_bug(x: Float[np.ndarray, "N, C, H, W"], w: Float[np.ndarray, "F, C, K, K"],
                   b: Float[np.ndarray, "F"]) -> Float[np.ndarray, "N, F, H-K+1, W-K+1"]:
    k = w.shape[2]
    win = sliding_window_view(x, (k, k), axis=(2, 3))
    n, c, oh, ow = win.shape[:4]
    cols = win.reshape(n * oh * ow, c * k * k)  # BUG: channels not moved past the positions
    out = cols @ w.reshape(len(w), -1).T + b
    return out.reshape(n, oh, ow, -1).transpose(0, 3, 1, 2)


def fft_convolve(x: Float[np.ndarray, "B, N"], h: Float[np.ndarray, "K"]
                 ) -> Float[np.ndarray, "B, N+K-1"]:
    n = x.shape[-1] + h.shape[0] - 1
    X = np.fft.rfft(x, n=n, axis=-1)
    Hf = np.fft.rfft(h, n=n)
    return np.fft.irfft(X * Hf, n=n, axis=-1)


def fft_convolve_bug(x: Float[np.ndarray, "B, N"], h: Float[np.ndarray, "K"]
                     ) -> Float[np.ndarray, "B, N+K-1"]:
    n = x.shape[-1] + h.shape[0] - 1
    X = np.fft.rfft(x, n=n, axis=-1)
    Hf = np.fft.rfft(h)  # BUG: the filter's spectrum not padded to n
    return np.fft.irfft(X * Hf, n=n, axis=-1)


def moving_average(x: Float[np.ndarray, "N"], w: Float[np.ndarray, "K"]
                   ) -> Float[np.ndarray, "N-K+1"]:
    kernel = w / w.sum()
    return np.convolve(x, kernel[::-1], mode="valid")


def moving_average_bug(x: Float[np.ndarray, "N"], w: Float[np.ndarray, "K"]
                       ) -> Float[np.ndarray, "N-K+1"]:
    kernel = w / w.sum()
    return np.convolve(x, kernel[::-1], mode="same")  # BUG: 'same' keeps N samples


def cumsum_moving_average(x: Float[np.ndarray, "T, D"], w: Float[np.ndarray, "K"]
                          ) -> Float[np.ndarray, "T-K+1, D"]:
    k = len(w)
    c = np.cumsum(np.vstack([np.zeros((1, x.shape[1])), x]), axis=0)
    return (c[k:] - c[:-k]) / k


def cumsum_moving_average_bug(x: Float[np.ndarray, "T, D"], w: Float[np.ndarray, "K"]
                              ) -> Float[np.ndarray, "T-K+1, D"]:
    k = len(w)
    c = np.cumsum(x, axis=0)  # BUG: no leading zero row: one window short
    return (c[k:] - c[:-k]) / k


def savgol_smooth(x: Float[np.ndarray, "N"], half: int = 3, order: int = 2
                  ) -> Float[np.ndarray, "N-6"]:
    offsets = np.arange(-half, half + 1)
    A = np.vander(offsets, order + 1, increasing=True)
    coeffs = np.linalg.pinv(A)[0]
    return sliding_window_view(x, 2 * half + 1) @ coeffs


def savgol_smooth_bug(x: Float[np.ndarray, "N"], half: int = 3, order: int = 2
                      ) -> Float[np.ndarray, "N-6"]:
    offsets = np.arange(-half, half + 1)
    A = np.vander(offsets, order + 1, increasing=True)
    coeffs = np.linalg.pinv(A)[:, 0]  # BUG: a column of the pseudo-inverse
    return sliding_window_view(x, 2 * half + 1) @ coeffs


# -- particle filters and tabular reinforcement learning ------------------------------------------


def particle_filter_step(particles: Float[np.ndarray, "N, D"], weights: Float[np.ndarray, "N"],
                         z: Float[np.ndarray, "M"], H: Float[np.ndarray, "M, D"],
                         rng: np.random.Generator) -> Float[np.ndarray, "N, D"]:
    n = len(weights)
    particles = particles + 0.1 * rng.standard_normal(particles.shape)
    resid = z[None, :] - particles @ H.T
    weights = weights * np.exp(-0.5 * np.sum(resid ** 2, axis=1))
    weights /= weights.sum()
    positions = (rng.random() + np.arange(n)) / n
    cumulative = np.cumsum(weights)
    cumulative[-1] = 1.0
    return particles[np.searchsorted(cumulative, positions)]


def particle_filter_step_bug(particles: Float[np.ndarray, "N, D"],
                             weights: Float[np.ndarray, "N"], z: Float[np.ndarray, "M"],
                             H: Float[np.ndarray, "M, D"], rng: np.random.Generator
                             ) -> Float[np.ndarray, "N, D"]:
    n = len(weights)
    particles = particles + 0.1 * rng.standard_normal(particles.shape)
    resid = z[None, :] - particles @ H.T
    weights = weights * np.exp(-0.5 * np.sum(resid ** 2, axis=0))  # BUG: summed over particles
    weights /= weights.sum()
    positions = (rng.random() + np.arange(n)) / n
    cumulative = np.cumsum(weights)
    cumulative[-1] = 1.0
    return particles[np.searchsorted(cumulative, positions)]


def q_learning(Q: Float[np.ndarray, "S, A"], s: Int[np.ndarray, "T"], a: Int[np.ndarray, "T"],
               r: Float[np.ndarray, "T"], s2: Int[np.ndarray, "T"], alpha: float = 0.1,
               gamma: float = 0.99) -> Float[np.ndarray, "S, A"]:
    Q = Q.copy()
    for t in range(len(s)):
        target = r[t] + gamma * np.max(Q[s2[t]])
        Q[s[t], a[t]] += alpha * (target - Q[s[t], a[t]])
    return Q


def q_learning_bug(Q: Float[np.ndarray, "S, A"], s: Int[np.ndarray, "T"],
                   a: Int[np.ndarray, "T"], r: Float[np.ndarray, "T"],
                   s2: Int[np.ndarray, "T"], alpha: float = 0.1, gamma: float = 0.99
                   ) -> Float[np.ndarray, "S, A"]:
    Q = Q.copy()
    for t in range(len(s)):
        target = r[t] + gamma * Q[s2[t]]  # BUG: the next state's values, not their max
        Q[s[t], a[t]] += alpha * (target - Q[s[t], a[t]])
    return Q


def q_learning_batch(Q: Float[np.ndarray, "S, A"], s: Int[np.ndarray, "B"],
                     a: Int[np.ndarray, "B"], r: Float[np.ndarray, "B"],
                     s2: Int[np.ndarray, "B"], done: Float[np.ndarray, "B"],
                     alpha: float = 0.1, gamma: float = 0.99) -> Float[np.ndarray, "S, A"]:
    Q = Q.copy()
    td = r + gamma * (1.0 - done) * Q[s2].max(axis=1) - Q[s, a]
    np.add.at(Q, (s, a), alpha * td)
    return Q


def q_learning_batch_bug(Q: Float[np.ndarray, "S, A"], s: Int[np.ndarray, "B"],
                         a: Int[np.ndarray, "B"], r: Float[np.ndarray, "B"],
                         s2: Int[np.ndarray, "B"], done: Float[np.ndarray, "B"],
                         alpha: float = 0.1, gamma: float = 0.99) -> Float[np.ndarray, "S, A"]:
    Q = Q.copy()
    td = r + gamma * (1.0 - done) * Q[s2].max(axis=0) - Q[s, a]  # BUG: the best per action
    np.add.at(Q, (s, a), alpha * td)
    return Q


def value_iteration(P: Float[np.ndarray, "S, A, S"], R: Float[np.ndarray, "S, A"],
                    gamma: float = 0.9, n_iter: int = 4) -> Float[np.ndarray, "S"]:
    V = np.zeros(P.shape[0])
    for _ in range(n_iter):
        Q = R + gamma * np.einsum("sat,t->sa", P, V)
        V = Q.max(axis=1)
    return V


def value_iteration_bug(P: Float[np.ndarray, "S, A, S"], R: Float[np.ndarray, "S, A"],
                        gamma: float = 0.9, n_iter: int = 4) -> Float[np.ndarray, "S"]:
    V = np.zeros(P.shape[0])
    for _ in range(n_iter):
        Q = R + gamma * np.einsum("sat,t->sa", P, V)
        V = Q.max(axis=0)  # BUG: the best state per action
    return V


def policy_evaluation(P: Float[np.ndarray, "S, A, S"], R: Float[np.ndarray, "S, A"],
                      pi: Float[np.ndarray, "S, A"], gamma: float = 0.9
                      ) -> Float[np.ndarray, "S"]:
    P_pi = np.einsum("sa,sat->st", pi, P)
    r_pi = np.sum(pi * R, axis=1)
    return np.linalg.solve(np.eye(len(R)) - gamma * P_pi, r_pi)


def policy_evaluation_bug(P: Float[np.ndarray, "S, A, S"], R: Float[np.ndarray, "S, A"],
                          pi: Float[np.ndarray, "S, A"], gamma: float = 0.9
                          ) -> Float[np.ndarray, "S"]:
    P_pi = np.einsum("sa,sat->st", pi, P)
    r_pi = np.sum(pi * R, axis=0)  # BUG: the expected reward per action
    return np.linalg.solve(np.eye(len(R)) - gamma * P_pi, r_pi)


def n_step_returns(rewards: Float[np.ndarray, "T"], values: Float[np.ndarray, "T+1"],
                   n: int = 3, gamma: float = 0.99) -> Float[np.ndarray, "T"]:
    T = len(rewards)
    padded = np.concatenate([rewards, np.zeros(n - 1)])
    boot = np.concatenate([values, np.full(n - 1, values[-1])])
    G = np.zeros(T)
    for k in range(n):
        G += gamma ** k * padded[k:k + T]
    return G + gamma ** n * boot[n:n + T]


def n_step_returns_bug(rewards: Float[np.ndarray, "T"], values: Float[np.ndarray, "T+1"],
                       n: int = 3, gamma: float = 0.99) -> Float[np.ndarray, "T"]:
    T = len(rewards)
    padded = np.concatenate([rewards, np.zeros(n - 2)])  # BUG: one step of padding short
    boot = np.concatenate([values, np.full(n - 1, values[-1])])
    G = np.zeros(T)
    for k in range(n):
        G += gamma ** k * padded[k:k + T]
    return G + gamma ** n * boot[n:n + T]


def discounted_returns(rewards: Float[np.ndarray, "T"], dones: Float[np.ndarray, "T"],
                       last_value: float = 0.0, gamma: float = 0.99
                       ) -> Float[np.ndarray, "T"]:
    T = len(rewards)
    out = np.empty(T)
    running = last_value
    for t in reversed(range(T)):
        running = rewards[t] + gamma * running * (1.0 - dones[t])
        out[t] = running
    return out * gamma ** np.arange(T)[::-1] / gamma ** T


def discounted_returns_bug(rewards: Float[np.ndarray, "T"], dones: Float[np.ndarray, "T"],
                           last_value: float = 0.0, gamma: float = 0.99
                           ) -> Float[np.ndarray, "T"]:
    T = len(rewards)
    out = np.empty(T)
    running = last_value
    for t in reversed(range(T)):
        running = rewards[t] + gamma * running * (1.0 - dones[t + 1])  # BUG: the next step's
        out[t] = running
    return out * gamma ** np.arange(T)[::-1] / gamma ** T


def td_lambda(phi: Float[np.ndarray, "T, D"], rewards: Float[np.ndarray, "T"],
              w: Float[np.ndarray, "D"], alpha: float = 0.01, gamma: float = 0.99,
              lam: float = 0.9) -> Float[np.ndarray, "D"]:
    w = w.copy()
    z = np.zeros_like(w)
    for t in range(len(rewards) - 1):
        delta = rewards[t] + gamma * phi[t + 1] @ w - phi[t] @ w
        z = gamma * lam * z + phi[t]
        w += alpha * delta * z
    return w


def td_lambda_bug(phi: Float[np.ndarray, "T, D"], rewards: Float[np.ndarray, "T"],
                  w: Float[np.ndarray, "D"], alpha: float = 0.01, gamma: float = 0.99,
                  lam: float = 0.9) -> Float[np.ndarray, "D"]:
    w = w.copy()
    z = np.zeros(len(rewards))  # BUG: one trace per step, not per feature
    for t in range(len(rewards) - 1):
        delta = rewards[t] + gamma * phi[t + 1] @ w - phi[t] @ w
        z = gamma * lam * z + phi[t]
        w += alpha * delta * z
    return w


# -- state-space smoothing ------------------------------------------------------------------------


def kalman_filter(zs: Float[np.ndarray, "T, M"], F: Float[np.ndarray, "D, D"],
                  H: Float[np.ndarray, "M, D"], Q: Float[np.ndarray, "D, D"],
                  R: Float[np.ndarray, "M, M"], x0: Float[np.ndarray, "D"],
                  P0: Float[np.ndarray, "D, D"]) -> Float[np.ndarray, "T, D"]:
    x, P = x0, P0
    out = np.empty((len(zs), len(x0)))
    for t, z in enumerate(zs):
        x, P = F @ x, F @ P @ F.T + Q
        S = H @ P @ H.T + R
        K = np.linalg.solve(S, H @ P).T
        x = x + K @ (z - H @ x)
        P = (np.eye(len(x)) - K @ H) @ P
        out[t] = x
    return out


def kalman_filter_bug(zs: Float[np.ndarray, "T, M"], F: Float[np.ndarray, "D, D"],
                      H: Float[np.ndarray, "M, D"], Q: Float[np.ndarray, "D, D"],
                      R: Float[np.ndarray, "M, M"], x0: Float[np.ndarray, "D"],
                      P0: Float[np.ndarray, "D, D"]) -> Float[np.ndarray, "T, D"]:
    x, P = x0, P0
    out = np.empty((len(zs), len(x0)))
    for t, z in enumerate(zs):
        x, P = F @ x, F @ P @ F.T + Q
        S = H @ P @ H.T + R
        K = np.linalg.solve(S, H @ P)  # BUG: the gain's transpose
        x = x + K @ (z - H @ x)
        P = (np.eye(len(x)) - K @ H) @ P
        out[t] = x
    return out


def rts_smoother(xs: Float[np.ndarray, "T, D"], Ps: Float[np.ndarray, "T, D, D"],
                 F: Float[np.ndarray, "D, D"], Q: Float[np.ndarray, "D, D"]
                 ) -> Float[np.ndarray, "T, D"]:
    x_s, P_s = xs.copy(), Ps.copy()
    for t in range(len(xs) - 2, -1, -1):
        P_pred = F @ Ps[t] @ F.T + Q
        G = Ps[t] @ F.T @ np.linalg.inv(P_pred)
        x_s[t] = xs[t] + G @ (x_s[t + 1] - F @ xs[t])
        P_s[t] = Ps[t] + G @ (P_s[t + 1] - P_pred) @ G.T
    return x_s


def rts_smoother_bug(xs: Float[np.ndarray, "T, D"], Ps: Float[np.ndarray, "T, D, D"],
                     F: Float[np.ndarray, "D, D"], Q: Float[np.ndarray, "D, D"]
                     ) -> Float[np.ndarray, "T, D"]:
    x_s, P_s = xs.copy(), Ps.copy()
    for t in range(len(xs) - 2, -1, -1):
        P_pred = F @ Ps[t] @ F.T + Q
        G = Ps[t] @ F.T @ np.linalg.inv(P_pred)
        x_s[t] = xs[t] + G @ (x_s[t + 1:] - F @ xs[t])  # BUG: the rest of the sequence
        P_s[t] = Ps[t] + G @ (P_s[t + 1] - P_pred) @ G.T
    return x_s


# -- images and signals ---------------------------------------------------------------------------


def equalize_hist(img: Int[np.ndarray, "H, W"]) -> Float[np.ndarray, "H, W"]:
    hist, bins = np.histogram(img.ravel(), bins=256, range=(0, 256))
    cdf = hist.cumsum()
    cdf = 255 * cdf / cdf[-1]
    return np.interp(img.ravel(), bins[:-1], cdf).reshape(img.shape)


def equalize_hist_bug(img: Int[np.ndarray, "H, W"]) -> Float[np.ndarray, "H, W"]:
    hist, bins = np.histogram(img.ravel(), bins=256, range=(0, 256))
    cdf = hist.cumsum()
    cdf = 255 * cdf / cdf[-1]
    return np.interp(img.ravel(), bins, cdf).reshape(img.shape)  # BUG: 257 edges, 256 counts


def resize_bilinear(img: Float[np.ndarray, "H, W"], OH: int, OW: int
                    ) -> Float[np.ndarray, "OH, OW"]:
    h, w = img.shape
    rows, cols = np.linspace(0, h - 1, OH), np.linspace(0, w - 1, OW)
    tmp = np.empty((h, OW))
    for i in range(h):
        tmp[i] = np.interp(cols, np.arange(w), img[i])
    out = np.empty((OH, OW))
    for j in range(OW):
        out[:, j] = np.interp(rows, np.arange(h), tmp[:, j])
    return out


def resize_bilinear_bug(img: Float[np.ndarray, "H, W"], OH: int, OW: int
                        ) -> Float[np.ndarray, "OH, OW"]:
    h, w = img.shape
    rows, cols = np.linspace(0, h - 1, OH), np.linspace(0, w - 1, OW)
    tmp = np.empty((h, OW))
    for i in range(h):
        tmp[i] = np.interp(cols, np.arange(h), img[i])  # BUG: a row's positions are W, not H
    out = np.empty((OH, OW))
    for j in range(OW):
        out[:, j] = np.interp(rows, np.arange(h), tmp[:, j])
    return out


def lucas_kanade(I0: Float[np.ndarray, "H, W"], I1: Float[np.ndarray, "H, W"]
                 ) -> Float[np.ndarray, "2"]:
    Iy, Ix = np.gradient(I0)
    It = I1 - I0
    A = np.stack([Ix.ravel(), Iy.ravel()], axis=1)
    flow, *_ = np.linalg.lstsq(A, -It.ravel(), rcond=None)
    return flow


def lucas_kanade_bug(I0: Float[np.ndarray, "H, W"], I1: Float[np.ndarray, "H, W"]
                     ) -> Float[np.ndarray, "2"]:
    Iy, Ix = np.gradient(I0)
    It = I1 - I0
    A = np.stack([Ix.ravel(), Iy.ravel()])  # BUG: the gradients as rows
    flow, *_ = np.linalg.lstsq(A, -It.ravel(), rcond=None)
    return flow


def maxpool2x2(x: Float[np.ndarray, "N, C, H, W"]
               ) -> Float[np.ndarray, "N, C, H // 2, W // 2"]:
    n, c, h, w = x.shape
    x = x[:, :, :h - h % 2, :w - w % 2]
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def maxpool2x2_bug(x: Float[np.ndarray, "N, C, H, W"]
                   ) -> Float[np.ndarray, "N, C, H // 2, W // 2"]:
    n, c, h, w = x.shape
    x = x[:, :, :h - h % 2, :w - w % 2]
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(2, 4))  # BUG: pools the rows apart


# -- Monte-Carlo and resampling -------------------------------------------------------------------


def gbm_paths(Z: Float[np.ndarray, "P, T"], s0: float = 100.0, mu: float = 0.05,
              sigma: float = 0.2, dt: float = 1 / 252) -> Float[np.ndarray, "P, T+1"]:
    growth = np.exp((mu - 0.5 * sigma ** 2) * dt + sigma * np.sqrt(dt) * Z)
    paths = s0 * np.cumprod(growth, axis=1)
    return np.hstack([np.full((Z.shape[0], 1), s0), paths])


def gbm_paths_bug(Z: Float[np.ndarray, "P, T"], s0: float = 100.0, mu: float = 0.05,
                  sigma: float = 0.2, dt: float = 1 / 252) -> Float[np.ndarray, "P, T+1"]:
    growth = np.exp((mu - 0.5 * sigma ** 2) * dt + sigma * np.sqrt(dt) * Z)
    paths = s0 * np.cumprod(growth, axis=1)
    return np.hstack([np.full(Z.shape[0], s0), paths])  # BUG: the start prices a vector


def asian_call_cv(Z: Float[np.ndarray, "P, T"], strike: float = 100.0, s0: float = 100.0,
                  r: float = 0.01, sigma: float = 0.2, dt: float = 1 / 252
                  ) -> Float[np.ndarray, "2"]:
    log_paths = np.log(s0) + np.cumsum((r - 0.5 * sigma ** 2) * dt
                                       + sigma * np.sqrt(dt) * Z, axis=1)
    payoff = np.maximum(np.exp(log_paths).mean(axis=1) - strike, 0.0)
    geo = np.maximum(np.exp(log_paths.mean(axis=1)) - strike, 0.0)  # the control variate
    beta = np.cov(payoff, geo)[0, 1] / geo.var(ddof=1)
    adj = np.exp(-r * dt * Z.shape[1]) * (payoff - beta * (geo - geo.mean()))
    return np.array([adj.mean(), adj.std(ddof=1) / np.sqrt(len(adj))])


def asian_call_cv_bug(Z: Float[np.ndarray, "P, T"], strike: float = 100.0, s0: float = 100.0,
                      r: float = 0.01, sigma: float = 0.2, dt: float = 1 / 252
                      ) -> Float[np.ndarray, "2"]:
    log_paths = np.log(s0) + np.cumsum((r - 0.5 * sigma ** 2) * dt
                                       + sigma * np.sqrt(dt) * Z, axis=1)
    payoff = np.maximum(np.exp(log_paths).mean(axis=1) - strike, 0.0)
    geo = np.maximum(np.exp(log_paths.mean(axis=0)) - strike, 0.0)  # BUG: averaged over paths
    beta = np.cov(payoff, geo)[0, 1] / geo.var(ddof=1)
    adj = np.exp(-r * dt * Z.shape[1]) * (payoff - beta * (geo - geo.mean()))
    return np.array([adj.mean(), adj.std(ddof=1) / np.sqrt(len(adj))])


def bootstrap_coef_ci(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"],
                      rng: np.random.Generator, n_boot: int = 20) -> Float[np.ndarray, "2, D"]:
    n = len(y)
    coefs = np.empty((n_boot, X.shape[1]))
    for b in range(n_boot):
        idx = rng.integers(0, n, size=n)
        coefs[b], *_ = np.linalg.lstsq(X[idx], y[idx], rcond=None)
    return np.percentile(coefs, [2.5, 97.5], axis=0)


def bootstrap_coef_ci_bug(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"],
                          rng: np.random.Generator, n_boot: int = 20
                          ) -> Float[np.ndarray, "2, D"]:
    n = len(y)
    coefs = np.empty((n_boot, X.shape[1]))
    for b in range(n_boot):
        idx = rng.integers(0, n, size=n)
        coefs[b], *_ = np.linalg.lstsq(X[idx], y[idx], rcond=None)
    return np.percentile(coefs, [2.5, 97.5], axis=1)  # BUG: over the coefficients


def bootstrap_mean_diff(x: Float[np.ndarray, "N"], y: Float[np.ndarray, "M"],
                        rng: np.random.Generator, n_boot: int = 500
                        ) -> Float[np.ndarray, "2"]:
    bx = x[rng.integers(0, len(x), size=(n_boot, len(x)))].mean(axis=1)
    by = y[rng.integers(0, len(y), size=(n_boot, len(y)))].mean(axis=1)
    return np.quantile(bx - by, [0.025, 0.975])


def bootstrap_mean_diff_bug(x: Float[np.ndarray, "N"], y: Float[np.ndarray, "M"],
                            rng: np.random.Generator, n_boot: int = 500
                            ) -> Float[np.ndarray, "2"]:
    bx = x[rng.integers(0, len(x), size=(n_boot, len(x)))].mean(axis=0)  # BUG: per sample
    by = y[rng.integers(0, len(y), size=(n_boot, len(y)))].mean(axis=1)
    return np.quantile(bx - by, [0.025, 0.975])


# -- clustering, factorisation, fitting -----------------------------------------------------------


def mean_shift(seeds: Float[np.ndarray, "M, D"], X: Float[np.ndarray, "N, D"],
               bandwidth: float = 1.0, n_iter: int = 3) -> Float[np.ndarray, "M, D"]:
    Y = seeds.copy()
    for _ in range(n_iter):
        d2 = ((Y[:, None, :] - X[None, :, :]) ** 2).sum(axis=-1)
        W = np.exp(-d2 / (2 * bandwidth ** 2))
        Y = W @ X / W.sum(axis=1, keepdims=True)
    return Y


def mean_shift_bug(seeds: Float[np.ndarray, "M, D"], X: Float[np.ndarray, "N, D"],
                   bandwidth: float = 1.0, n_iter: int = 3) -> Float[np.ndarray, "M, D"]:
    Y = seeds.copy()
    for _ in range(n_iter):
        d2 = ((Y[:, None, :] - X[None, :, :]) ** 2).sum(axis=-1)
        W = np.exp(-d2 / (2 * bandwidth ** 2))
        Y = W @ X / W.sum(axis=1)  # BUG: the weights' sums spread over D
    return Y


def polyfit_vander(x: Float[np.ndarray, "N"], y: Float[np.ndarray, "N"], deg: int = 3
                   ) -> Float[np.ndarray, "N"]:
    A = np.vander(x, deg + 1)
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    return np.polyval(coef, x)


def polyfit_vander_bug(x: Float[np.ndarray, "N"], y: Float[np.ndarray, "N"], deg: int = 3
                       ) -> Float[np.ndarray, "N"]:
    A = np.vander(x, deg + 1)
    coef, *_ = np.linalg.lstsq(A.T, y, rcond=None)  # BUG: the design matrix transposed
    return np.polyval(coef, x)


def nmf(V: Float[np.ndarray, "M, N"], W: Float[np.ndarray, "M, R"],
        H: Float[np.ndarray, "R, N"], n_iter: int = 3, eps: float = 1e-9
        ) -> Float[np.ndarray, "M, R"]:
    W, H = W.copy(), H.copy()
    for _ in range(n_iter):
        H *= (W.T @ V) / (W.T @ W @ H + eps)
        W *= (V @ H.T) / (W @ H @ H.T + eps)
    return W


def nmf_bug(V: Float[np.ndarray, "M, N"], W: Float[np.ndarray, "M, R"],
            H: Float[np.ndarray, "R, N"], n_iter: int = 3, eps: float = 1e-9
            ) -> Float[np.ndarray, "M, R"]:
    W, H = W.copy(), H.copy()
    for _ in range(n_iter):
        H *= (W.T @ V) / (W.T @ W @ H + eps)
        W *= (V @ H.T) / (W @ H @ H + eps)  # BUG: H where H.T was meant
    return W


def hits(A: Float[np.ndarray, "U, I"], n_iter: int = 5) -> Float[np.ndarray, "I"]:
    hubs = np.ones(A.shape[0])
    for _ in range(n_iter):
        auth = A.T @ hubs
        auth /= np.linalg.norm(auth)
        hubs = A @ auth
        hubs /= np.linalg.norm(hubs)
    return auth


def hits_bug(A: Float[np.ndarray, "U, I"], n_iter: int = 5) -> Float[np.ndarray, "I"]:
    hubs = np.ones(A.shape[0])
    for _ in range(n_iter):
        auth = A @ hubs  # BUG: the authorities from the hubs need A.T
        auth /= np.linalg.norm(auth)
        hubs = A @ auth
        hubs /= np.linalg.norm(hubs)
    return auth


def als_users(R: Float[np.ndarray, "U, I"], mask: Float[np.ndarray, "U, I"],
              V: Float[np.ndarray, "I, F"], lam: float = 0.1) -> Float[np.ndarray, "U, F"]:
    n_f = V.shape[1]
    U = np.empty((R.shape[0], n_f))
    for u in range(R.shape[0]):
        rated = mask[u] > 0
        Vu = V[rated]
        U[u] = np.linalg.solve(Vu.T @ Vu + lam * np.eye(n_f), Vu.T @ R[u, rated])
    return U


def als_users_bug(R: Float[np.ndarray, "U, I"], mask: Float[np.ndarray, "U, I"],
                  V: Float[np.ndarray, "I, F"], lam: float = 0.1) -> Float[np.ndarray, "U, F"]:
    n_f = V.shape[1]
    U = np.empty((R.shape[0], n_f))
    for u in range(R.shape[0]):
        rated = mask[u] > 0
        Vu = V[rated]
        U[u] = np.linalg.solve(Vu.T @ Vu + lam * np.eye(n_f), Vu.T @ R[u])  # BUG: all items
    return U


def classical_mds(D: Float[np.ndarray, "N, N"], k: int = 2) -> Float[np.ndarray, "N, 2"]:
    n = D.shape[0]
    J = np.eye(n) - np.ones((n, n)) / n
    B = -0.5 * J @ (D ** 2) @ J
    evals, evecs = np.linalg.eigh(B)
    idx = np.argsort(evals)[::-1][:k]
    return evecs[:, idx] * np.sqrt(np.maximum(evals[idx], 0))


def classical_mds_bug(D: Float[np.ndarray, "N, N"], k: int = 2) -> Float[np.ndarray, "N, 2"]:
    n = D.shape[0]
    J = np.eye(n) - np.ones((n, n)) / n
    B = -0.5 * J @ (D ** 2) @ J
    evals, evecs = np.linalg.eigh(B)
    idx = np.argsort(evals)[::-1][:k]
    return evecs[:, idx] * np.sqrt(np.maximum(evals, 0))[idx, None]  # BUG: scales rows


def lda_direction(X: Float[np.ndarray, "N, D"], y: Int[np.ndarray, "N"]
                  ) -> Float[np.ndarray, "D"]:
    X0, X1 = X[y == 0], X[y == 1]
    mu0, mu1 = X0.mean(axis=0), X1.mean(axis=0)
    Sw = (X0 - mu0).T @ (X0 - mu0) + (X1 - mu1).T @ (X1 - mu1)
    w = np.linalg.solve(Sw, mu1 - mu0)
    return w / np.linalg.norm(w)


def lda_direction_bug(X: Float[np.ndarray, "N, D"], y: Int[np.ndarray, "N"]
                      ) -> Float[np.ndarray, "D"]:
    X0, X1 = X[y == 0], X[y == 1]
    mu0, mu1 = X0.mean(axis=0), X1.mean(axis=0)
    Sw = (X0 - mu0) @ (X0 - mu0).T + (X1 - mu1).T @ (X1 - mu1)  # BUG: the Gram matrix
    w = np.linalg.solve(Sw, mu1 - mu0)
    return w / np.linalg.norm(w)


def gaussian_nb(X: Float[np.ndarray, "N, D"], theta: Float[np.ndarray, "C, D"],
                var: Float[np.ndarray, "C, D"], prior: Float[np.ndarray, "C"]
                ) -> Float[np.ndarray, "N, C"]:
    jll = np.log(prior) - 0.5 * np.sum(np.log(2.0 * np.pi * var), axis=1)
    jll = jll - 0.5 * np.sum((X[:, None, :] - theta[None, :, :]) ** 2 / var[None], axis=2)
    return jll - logsumexp(jll, axis=1, keepdims=True)


def gaussian_nb_bug(X: Float[np.ndarray, "N, D"], theta: Float[np.ndarray, "C, D"],
                    var: Float[np.ndarray, "C, D"], prior: Float[np.ndarray, "C"]
                    ) -> Float[np.ndarray, "N, C"]:
    jll = np.log(prior) - 0.5 * np.sum(np.log(2.0 * np.pi * var), axis=1)
    sq = (X[:, None, :] - theta[None, :, :]) ** 2 / var[None]
    jll = jll - 0.5 * np.sum(sq, axis=1)  # BUG: summed over the classes, not the features
    return jll - logsumexp(jll, axis=1, keepdims=True)


def elastic_net_cd(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"],
                   alpha: float = 0.1, l1_ratio: float = 0.5, n_iter: int = 2
                   ) -> Float[np.ndarray, "D"]:
    n, d = X.shape
    w = np.zeros(d)
    col_sq = (X ** 2).sum(axis=0) / n
    resid = y - X @ w
    for _ in range(n_iter):
        for j in range(d):
            resid += X[:, j] * w[j]
            rho = X[:, j] @ resid / n
            shrunk = np.maximum(np.abs(rho) - alpha * l1_ratio, 0.0)
            w[j] = np.sign(rho) * shrunk / (col_sq[j] + alpha * (1 - l1_ratio))
            resid -= X[:, j] * w[j]
    return w


def elastic_net_cd_bug(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"],
                       alpha: float = 0.1, l1_ratio: float = 0.5, n_iter: int = 2
                       ) -> Float[np.ndarray, "D"]:
    n, d = X.shape
    w = np.zeros(d)
    col_sq = (X ** 2).sum(axis=0) / n
    resid = y - X @ w
    for _ in range(n_iter):
        for j in range(d):
            resid += X[j] * w[j]  # BUG: a row of X where its column was meant
            rho = X[:, j] @ resid / n
            shrunk = np.maximum(np.abs(rho) - alpha * l1_ratio, 0.0)
            w[j] = np.sign(rho) * shrunk / (col_sq[j] + alpha * (1 - l1_ratio))
            resid -= X[:, j] * w[j]
    return w


def svm_subgradient(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"],
                    w: Float[np.ndarray, "D"], lam: float = 1e-3) -> Float[np.ndarray, "D"]:
    active = y * (X @ w) < 1
    return lam * w - (y[active, None] * X[active]).sum(axis=0) / len(y)


def svm_subgradient_bug(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"],
                        w: Float[np.ndarray, "D"], lam: float = 1e-3) -> Float[np.ndarray, "D"]:
    active = y * (X @ w) < 1
    return lam * w - (y[active] * X[active]).sum(axis=0) / len(y)  # BUG: labels along D


# -- neural-network layers by hand ----------------------------------------------------------------


def batchnorm_backward(dout: Float[np.ndarray, "N, D"], x: Float[np.ndarray, "N, D"],
                       gamma: Float[np.ndarray, "D"], eps: float = 1e-5
                       ) -> Float[np.ndarray, "N, D"]:
    n = x.shape[0]
    inv_std = 1.0 / np.sqrt(x.var(axis=0) + eps)
    xhat = (x - x.mean(axis=0)) * inv_std
    dxhat = dout * gamma
    return inv_std / n * (n * dxhat - dxhat.sum(axis=0) - xhat * (dxhat * xhat).sum(axis=0))


def batchnorm_backward_bug(dout: Float[np.ndarray, "N, D"], x: Float[np.ndarray, "N, D"],
                           gamma: Float[np.ndarray, "D"], eps: float = 1e-5
                           ) -> Float[np.ndarray, "N, D"]:
    n = x.shape[0]
    inv_std = 1.0 / np.sqrt(x.var(axis=0) + eps)
    xhat = (x - x.mean(axis=0)) * inv_std
    dxhat = dout * gamma
    dsum = dxhat.sum(axis=1)  # BUG: the sum over features, not over the batch
    return inv_std / n * (n * dxhat - dsum - xhat * (dxhat * xhat).sum(axis=0))


def rnn_forward(x: Float[np.ndarray, "N, T, D"], h0: Float[np.ndarray, "N, H"],
                Wx: Float[np.ndarray, "D, H"], Wh: Float[np.ndarray, "H, H"],
                b: Float[np.ndarray, "H"]) -> Float[np.ndarray, "N, T, H"]:
    n, t_len, _ = x.shape
    h = np.zeros((n, t_len, h0.shape[1]))
    prev = h0
    for t in range(t_len):
        prev = np.tanh(x[:, t, :] @ Wx + prev @ Wh + b)
        h[:, t, :] = prev
    return h


def rnn_forward_bug(x: Float[np.ndarray, "N, T, D"], h0: Float[np.ndarray, "N, H"],
                    Wx: Float[np.ndarray, "D, H"], Wh: Float[np.ndarray, "H, H"],
                    b: Float[np.ndarray, "H"]) -> Float[np.ndarray, "N, T, H"]:
    n, t_len, _ = x.shape
    h = np.zeros((n, t_len, h0.shape[1]))
    prev = h0
    for t in range(t_len):
        prev = np.tanh(x[t] @ Wx + prev @ Wh + b)  # BUG: x[t] is a sequence, not a batch
        h[:, t, :] = prev
    return h


def lstm_step(x: Float[np.ndarray, "N, D"], prev_h: Float[np.ndarray, "N, H"],
              prev_c: Float[np.ndarray, "N, H"], Wx: Float[np.ndarray, "D, 4*H"],
              Wh: Float[np.ndarray, "H, 4*H"], b: Float[np.ndarray, "4*H"]
              ) -> Float[np.ndarray, "N, H"]:
    a = x @ Wx + prev_h @ Wh + b
    i, f, o, g = np.split(a, 4, axis=1)
    sig = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
    next_c = sig(f) * prev_c + sig(i) * np.tanh(g)
    return sig(o) * np.tanh(next_c)


def lstm_step_bug(x: Float[np.ndarray, "N, D"], prev_h: Float[np.ndarray, "N, H"],
                  prev_c: Float[np.ndarray, "N, H"], Wx: Float[np.ndarray, "D, 4*H"],
                  Wh: Float[np.ndarray, "H, 4*H"], b: Float[np.ndarray, "4*H"]
                  ) -> Float[np.ndarray, "N, H"]:
    a = x @ Wx + prev_h @ Wh + b
    i, f, o, g = np.split(a, 4, axis=0)  # BUG: the batch split, not the gates
    sig = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
    next_c = sig(f) * prev_c + sig(i) * np.tanh(g)
    return sig(o) * np.tanh(next_c)


def skipgram_neg_grad(v: Float[np.ndarray, "D"], u_pos: Float[np.ndarray, "D"],
                      U_neg: Float[np.ndarray, "K, D"]) -> Float[np.ndarray, "D"]:
    pos = 1.0 / (1.0 + np.exp(-u_pos @ v))
    neg = 1.0 / (1.0 + np.exp(U_neg @ v))
    return (pos - 1.0) * u_pos + ((1.0 - neg)[:, None] * U_neg).sum(axis=0)


def skipgram_neg_grad_bug(v: Float[np.ndarray, "D"], u_pos: Float[np.ndarray, "D"],
                          U_neg: Float[np.ndarray, "K, D"]) -> Float[np.ndarray, "D"]:
    pos = 1.0 / (1.0 + np.exp(-u_pos @ v))
    neg = 1.0 / (1.0 + np.exp(U_neg @ v))
    return (pos - 1.0) * u_pos + ((1.0 - neg) * U_neg).sum(axis=0)  # BUG: K along D


# -- idioms verify once stopped on (each also has a focused test) --------------------------------


def confusion_matrix(y: Int[np.ndarray, "N"], pred: Int[np.ndarray, "N"],
                     classes: Float[np.ndarray, "K"]) -> Float[np.ndarray, "K"]:
    k = len(classes)
    cm = np.bincount(k * y + pred, minlength=k * k).reshape(k, k)
    return np.diag(cm) / np.maximum(cm.sum(axis=1), 1)


def confusion_matrix_bug(y: Int[np.ndarray, "N"], pred: Int[np.ndarray, "N"],
                         classes: Float[np.ndarray, "K"]) -> Float[np.ndarray, "K"]:
    k = len(classes)
    cm = np.bincount(k * y + pred, minlength=k * k).reshape(k, k)
    return np.diag(cm) / np.maximum(cm.sum(axis=1, keepdims=True), 1)  # BUG: a column


def spectral_centroid(x: Float[np.ndarray, "B, T"], dt: float = 0.01) -> Float[np.ndarray, "B"]:
    mag = np.abs(np.fft.rfft(x * np.hanning(x.shape[-1]), axis=-1))
    return (mag * np.fft.rfftfreq(x.shape[-1], dt)).sum(axis=-1) / mag.sum(axis=-1)


def spectral_centroid_bug(x: Float[np.ndarray, "B, T"], dt: float = 0.01
                          ) -> Float[np.ndarray, "B"]:
    mag = np.abs(np.fft.rfft(x * np.hanning(x.shape[-1]), axis=-1))
    return (mag * np.fft.fftfreq(x.shape[-1], dt)).sum(axis=-1) / mag.sum(axis=-1)  # BUG


def upsample_nearest(x: Float[np.ndarray, "B, C, H, W"], w: Float[np.ndarray, "C"]
                     ) -> Float[np.ndarray, "B, C, 2*H, 2*W"]:
    up = x.repeat(2, axis=2).repeat(2, axis=3)
    return up * np.expand_dims(w, (0, 2, 3))


def upsample_nearest_bug(x: Float[np.ndarray, "B, C, H, W"], w: Float[np.ndarray, "C"]
                         ) -> Float[np.ndarray, "B, C, 2*H, 2*W"]:
    up = x.repeat(2, axis=2).repeat(2, axis=3)
    return up * np.expand_dims(w, (0, 1, 2))  # BUG: the channel weights along W


def radial_profile(img: Float[np.ndarray, "H, W"], n_bins: int = 16) -> Float[np.ndarray, "16"]:
    yy, xx = np.mgrid[0:img.shape[0], 0:img.shape[1]]
    r = np.hypot(yy - img.shape[0] / 2, xx - img.shape[1] / 2)
    idx = np.minimum((r / r.max() * n_bins).astype(int), n_bins - 1)
    sums = np.bincount(idx.ravel(), weights=img.ravel(), minlength=n_bins)
    return sums / np.maximum(np.bincount(idx.ravel(), minlength=n_bins), 1)


def radial_profile_bug(img: Float[np.ndarray, "H, W"], n_bins: int = 16
                       ) -> Float[np.ndarray, "16"]:
    yy, xx = np.mgrid[0:img.shape[0], 0:img.shape[1]]
    r = np.hypot(yy - img.shape[0] / 2, xx - img.shape[1] / 2)
    idx = np.minimum((r / r.max() * n_bins).astype(int), n_bins - 1)
    sums = np.bincount(idx.ravel(), weights=img.ravel()[::2], minlength=n_bins)  # BUG
    return sums / np.maximum(np.bincount(idx.ravel(), minlength=n_bins), 1)


def row_histograms(X: Float[np.ndarray, "N, D"], bins: int = 10) -> Float[np.ndarray, "N, 10"]:
    H = np.array([np.histogram(row, bins=bins, range=(0.0, 1.0))[0] for row in X])
    return H / np.maximum(H.sum(axis=1, keepdims=True), 1)


def row_histograms_bug(X: Float[np.ndarray, "N, D"], bins: int = 10
                       ) -> Float[np.ndarray, "N, 10"]:
    H = np.array([np.histogram(row, bins=bins, range=(0.0, 1.0))[0] for row in X])
    return H / np.maximum(H.sum(axis=1), 1)  # BUG: the row totals spread over the bins


def detrend_quadratic(Y: Float[np.ndarray, "T, D"]) -> Float[np.ndarray, "T, D"]:
    t = np.arange(len(Y), dtype=float)
    coef = np.polyfit(t, Y, 2)
    return Y - np.vander(t, 3) @ coef


def detrend_quadratic_bug(Y: Float[np.ndarray, "T, D"]) -> Float[np.ndarray, "T, D"]:
    t = np.arange(len(Y), dtype=float)
    coef = np.polyfit(t, Y, 2)
    return Y - np.vander(t, 3) @ coef.T  # BUG: the coefficients transposed


def one_hot_targets(y: Int[np.ndarray, "N"], W: Float[np.ndarray, "D, C"],
                    X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "D, C"]:
    T = np.zeros((len(y), W.shape[1]), np.float32)
    T[np.arange(len(y)), y] = 1.0
    P = np.exp(X @ W)
    P /= P.sum(axis=1, keepdims=True)
    return X.T @ (P - T) / len(y)


def one_hot_targets_bug(y: Int[np.ndarray, "N"], W: Float[np.ndarray, "D, C"],
                        X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "D, C"]:
    T = np.zeros((W.shape[1], len(y)), np.float32)  # BUG: classes by samples
    T[np.arange(len(y)), y] = 1.0
    P = np.exp(X @ W)
    P /= P.sum(axis=1, keepdims=True)
    return X.T @ (P - T) / len(y)


ASSUMING = [  # correct where one size bounds another: that condition, a warning, is the finding
    ("spectral embedding eigh", spectral_embedding, spectral_embedding_bug, "TS101", "K <= N"),
    ("knn argpartition", knn_regress, knn_regress_bug, "TS103", "6 <= N"),  # kth 5: 6 of N
    ("moving average convolve", moving_average, moving_average_bug, "TS103", "K <= N"),
    ("classical mds", classical_mds, classical_mds_bug, "TS101", "2 <= N"),
    ("lucas-kanade lstsq", lucas_kanade, lucas_kanade_bug, "TS102", "2 <= H"),  # and 2 <= W
]

CASES = [
    ("hmm forward-backward log space", hmm_posteriors, hmm_posteriors_bug, "TS101"),
    ("baum-welch xi", baum_welch_xi, baum_welch_xi_bug, "TS101"),
    ("viterbi fancy backpointers", viterbi_log, viterbi_log_bug, "TS101"),
    ("gmm m-step einsum", gmm_mstep_einsum, gmm_mstep_einsum_bug, "TS101"),
    ("gp regression solve", gp_predict, gp_predict_bug, "TS101"),
    ("logistic newton hessian", logistic_newton, logistic_newton_bug, "TS101"),
    ("ridge closed form", ridge, ridge_bug, "TS101"),
    ("pca whitening svd", pca_whiten, pca_whiten_bug, "TS101"),
    ("fastica symmetric", fastica, fastica_bug, "TS101"),
    ("t-sne gradient", tsne_grad, tsne_grad_bug, "TS101"),
    ("t-sne affinities", tsne_affinities, tsne_affinities_bug, "TS101"),
    ("dbscan neighbourhoods", dbscan_core, dbscan_core_bug, "TS103"),
    ("softmax regression grad", softmax_regression_grad, softmax_regression_grad_bug, "TS101"),
    ("conv2d as_strided", conv2d_strided, conv2d_strided_bug, "TS102"),
    ("im2col sliding_window_view", im2col_swv, im2col_swv_bug, "TS202",
     {"im2col sliding_window_view": "assumes K <= H"}),
    ("fft convolution", fft_convolve, fft_convolve_bug, "TS101"),
    ("cumsum moving average", cumsum_moving_average, cumsum_moving_average_bug, "TS103"),
    ("savitzky-golay window", savgol_smooth, savgol_smooth_bug, "TS102",
     {"savitzky-golay window": "assumes 7 <= N"}),
    ("particle filter resampling", particle_filter_step, particle_filter_step_bug, "TS101"),
    ("q-learning loop", q_learning, q_learning_bug, "TS101"),
    ("q-learning batch np.add.at", q_learning_batch, q_learning_batch_bug, "TS101"),
    ("value iteration einsum", value_iteration, value_iteration_bug, "TS102"),
    ("policy evaluation solve", policy_evaluation, policy_evaluation_bug, "TS102"),
    ("n-step returns", n_step_returns, n_step_returns_bug, "TS105"),
    ("discounted returns with dones", discounted_returns, discounted_returns_bug, "TS105"),
    ("td(lambda) traces", td_lambda, td_lambda_bug, "TS101"),
    ("kalman filter loop", kalman_filter, kalman_filter_bug, "TS102"),
    ("rts smoother", rts_smoother, rts_smoother_bug, "TS101"),
    ("histogram equalisation", equalize_hist, equalize_hist_bug, "TS108"),
    ("resize by np.interp", resize_bilinear, resize_bilinear_bug, "TS108"),
    ("max pool by reshape", maxpool2x2, maxpool2x2_bug, "TS103"),
    ("gbm paths cumprod", gbm_paths, gbm_paths_bug, "TS106"),
    ("asian option control variate", asian_call_cv, asian_call_cv_bug, "TS106"),
    ("bootstrap lstsq ci", bootstrap_coef_ci, bootstrap_coef_ci_bug, "TS103"),
    ("bootstrap mean difference", bootstrap_mean_diff, bootstrap_mean_diff_bug, "TS101"),
    ("mean-shift", mean_shift, mean_shift_bug, "TS101"),
    ("polyfit np.vander", polyfit_vander, polyfit_vander_bug, "TS102"),
    ("nmf multiplicative", nmf, nmf_bug, "TS102"),
    ("hits power iteration", hits, hits_bug, "TS102"),
    ("als boolean rows", als_users, als_users_bug, "TS102"),
    ("lda fisher direction", lda_direction, lda_direction_bug, "TS101"),
    ("gaussian naive bayes", gaussian_nb, gaussian_nb_bug, "TS101"),
    ("elastic net coordinate descent", elastic_net_cd, elastic_net_cd_bug, "TS101"),
    ("svm subgradient mask", svm_subgradient, svm_subgradient_bug, "TS101"),
    ("batchnorm backward", batchnorm_backward, batchnorm_backward_bug, "TS101"),
    ("rnn forward loop", rnn_forward, rnn_forward_bug, "TS101"),
    ("lstm step np.split", lstm_step, lstm_step_bug, "TS101"),
    ("skip-gram negative sampling", skipgram_neg_grad, skipgram_neg_grad_bug, "TS101"),
    ("confusion matrix bincount", confusion_matrix, confusion_matrix_bug, "TS103"),
    ("spectral centroid rfftfreq", spectral_centroid, spectral_centroid_bug, "TS101"),
    ("nearest upsampling repeat", upsample_nearest, upsample_nearest_bug, "TS101"),
    ("radial profile mgrid", radial_profile, radial_profile_bug, "TS101"),
    ("row histograms list", row_histograms, row_histograms_bug, "TS101"),
    ("quadratic detrend polyfit", detrend_quadratic, detrend_quadratic_bug, "TS102"),
    ("one-hot positional dtype", one_hot_targets, one_hot_targets_bug, "TS101"),
]
