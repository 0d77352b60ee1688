"""Classic NumPy numerics (written for this corpus): k-means, PCA, a Kalman filter, box IoU,
GAE, a strided 1-D convolution, softmax cross-entropy and a squared error.

Each case is (name, correct function, function with one realistic injected bug, signature).
"""

import numpy as np


def kmeans_assign(X, C):
    d = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=-1)
    return np.argmin(d, axis=1)


def kmeans_assign_bug(X, C):
    d = ((X[:, None, :] - C[None, :, :]) ** 2).sum(axis=-1)
    return np.argmin(d, axis=0)  # the nearest point per centroid


def kmeans_update(X, onehot):
    counts = onehot.sum(axis=0)
    return (onehot.T @ X) / np.maximum(counts, 1)[:, None]


def kmeans_update_bug(X, onehot):
    counts = onehot.sum(axis=0)
    return (onehot.T @ X) / np.maximum(counts, 1)  # divides each column, not each row


def pca_svd(X):
    Xc = X - X.mean(axis=0)
    _, _, Vt = np.linalg.svd(Xc, full_matrices=False)
    return Xc @ Vt[:2].T


def pca_svd_bug(X):
    Xc = X - X.mean(axis=1)  # centres rows: runs whenever N == D
    _, _, Vt = np.linalg.svd(Xc, full_matrices=False)
    return Xc @ Vt[:2].T


def pca_eigh(X):
    Xc = X - X.mean(axis=0, keepdims=True)
    cov = Xc.T @ Xc / (len(X) - 1)
    w, V = np.linalg.eigh(cov)
    order = np.argsort(w)[::-1]
    return Xc @ V[:, order[:2]]


def pca_eigh_bug(X):
    Xc = X - X.mean(axis=0, keepdims=True)
    cov = Xc.T @ Xc / (len(X) - 1)
    w, V = np.linalg.eigh(cov)
    order = np.argsort(w)[::-1]
    return Xc @ V[order[:2]]  # rows of V are not the eigenvectors


def kalman_update(x, P, z, H, R):
    y = z - H @ x
    S = H @ P @ H.T + R
    K = P @ H.T @ np.linalg.inv(S)
    x_new = x + K @ y
    P_new = (np.eye(len(x)) - K @ H) @ P
    return x_new + 0.0 * np.diag(P_new)


def kalman_update_bug(x, P, z, H, R):
    y = z - H @ x
    S = H @ P @ H.T + R
    K = P @ H @ np.linalg.inv(S)  # H where H.T was meant: runs whenever m == n
    x_new = x + K @ y
    P_new = (np.eye(len(x)) - K @ H) @ P
    return x_new + 0.0 * np.diag(P_new)


def kalman_solve(x, P, z, H, R):
    S = H @ P @ H.T + R
    K = np.linalg.solve(S, H @ P).T
    return x + K @ (z - H @ x)


def kalman_solve_bug(x, P, z, H, R):
    S = H @ P @ H.T + R
    K = np.linalg.solve(S, H @ P)  # the gain left untransposed
    return x + K @ (z - H @ x)


def box_iou(a, b):
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.clip(rb - lt, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    return inter / (area_a[:, None] + area_b[None, :] - inter)


def box_iou_bug(a, b):
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.clip(rb - lt, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    return inter / (area_a + area_b - inter)  # the areas are not spread over the pairs


def gae(rewards, values, dones, gamma: float = 0.99, lam: float = 0.95):
    n = len(rewards)
    advantages = np.zeros_like(rewards)
    last = 0.0
    for t in reversed(range(n)):
        next_value = values[t + 1] if t + 1 < n else 0.0
        nonterminal = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_value * nonterminal - values[t]
        advantages[t] = last = delta + gamma * lam * nonterminal * last
    return advantages + values


def gae_bug(rewards, values, dones, gamma: float = 0.99, lam: float = 0.95):
    n = len(rewards)
    advantages = np.zeros_like(rewards)
    last = np.zeros_like(values)  # a whole vector carried where a scalar was meant
    for t in reversed(range(n)):
        next_value = values[t + 1] if t + 1 < n else 0.0
        nonterminal = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_value * nonterminal - values[t]
        advantages[t] = last = delta + gamma * lam * nonterminal * last
    return advantages + values


def conv1d_strided(x, w, stride: int = 2):
    k = w.shape[0]
    idx = np.arange(0, len(x) - k + 1, stride)[:, None] + np.arange(k)[None, :]
    return x[idx] @ w


def conv1d_strided_bug(x, w, stride: int = 2):
    k = w.shape[0]
    idx = np.arange(0, len(x) - k + 1, stride) + np.arange(k)  # the window axis is missing
    return x[idx] @ w


def conv1d_windows(x, w):
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[0])[::2]
    return windows @ w


def conv1d_windows_bug(x, w):
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[0])[::2]
    return windows.T @ w  # windows transposed


def softmax_xent(logits, labels):
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(labels)), labels.astype(int)].mean()


def softmax_xent_bug(logits, labels):
    z = logits - logits.max(axis=1)  # keepdims dropped: runs whenever N == C
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(labels)), labels.astype(int)].mean()


def mse(pred, target):
    return np.mean((pred[:, 0] - target) ** 2)


def mse_bug(pred, target):
    return np.mean((pred - target) ** 2)  # (N, 1) - (N,): an N by N outer product


CASES = [
    ("numpy kmeans assign", kmeans_assign, kmeans_assign_bug, "N, D; K, D => N"),
    ("numpy kmeans update", kmeans_update, kmeans_update_bug, "N, D; N, K => K, D"),
    ("numpy pca svd", pca_svd, pca_svd_bug, "N, D => N, 2"),
    ("numpy pca eigh", pca_eigh, pca_eigh_bug, "N, D => N, 2"),
    ("numpy kalman update", kalman_update, kalman_update_bug, "n; n, n; m; m, n; m, m => n"),
    ("numpy kalman solve", kalman_solve, kalman_solve_bug, "n; n, n; m; m, n; m, m => n"),
    ("numpy box iou", box_iou, box_iou_bug, "N, 4; M, 4 => N, M"),
    ("numpy gae", gae, gae_bug, "T; T; T => T"),
    ("numpy conv1d strided", conv1d_strided, conv1d_strided_bug, "L; K => n"),
    ("numpy conv1d windows", conv1d_windows, conv1d_windows_bug, "L; K => n"),
    ("numpy softmax xent", softmax_xent, softmax_xent_bug, "N, C; N =>"),
    ("numpy mse", mse, mse_bug, "N, 1; N =>"),
]
