"""JAX models in the style of flax/equinox code (written for this corpus): attention, an MLP
under vmap, layer norm, rotary embeddings, an RNN under lax.scan, a squared error, and a
block calling a function JAX compiled at import.

Each case is (name, correct function, function with one realistic injected bug, signature).
"""

import math

import jax
import jax.numpy as jnp


def attention(x, wq, wk, wv, wo, n_heads: int = 4):
    T, D = x.shape
    q = (x @ wq).reshape(T, n_heads, D // n_heads)
    k = (x @ wk).reshape(T, n_heads, D // n_heads)
    v = (x @ wv).reshape(T, n_heads, D // n_heads)
    logits = jnp.einsum("thd,shd->hts", q, k) / math.sqrt(D // n_heads)
    mask = jnp.tril(jnp.ones((T, T), dtype=bool))
    logits = jnp.where(mask[None], logits, -1e9)
    weights = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("hts,shd->thd", weights, v).reshape(T, D)
    return out @ wo


def attention_bug(x, wq, wk, wv, wo, n_heads: int = 4):
    T, D = x.shape
    q = (x @ wq).reshape(T, n_heads, D // n_heads)
    k = (x @ wk).reshape(T, n_heads, D // n_heads)
    v = (x @ wv).reshape(T, n_heads, D // n_heads)
    logits = jnp.einsum("thd,shd->hts", q, k) / math.sqrt(D // n_heads)
    mask = jnp.tril(jnp.ones((T, T), dtype=bool))
    logits = jnp.where(mask[:, None], logits, -1e9)  # the mask spread over the wrong axis
    weights = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("hts,shd->thd", weights, v).reshape(T, D)
    return out @ wo


def predict(w1, b1, w2, b2, x):
    h = jax.nn.relu(w1 @ x + b1)
    return w2 @ h + b2


def batched_mlp(w1, b1, w2, b2, X):
    return jax.vmap(predict, in_axes=(None, None, None, None, 0))(w1, b1, w2, b2, X)


def batched_mlp_bug(w1, b1, w2, b2, X):
    return jax.vmap(predict, in_axes=(None, None, None, None, 1))(w1, b1, w2, b2, X)


def layer_norm(x, scale, bias, eps: float = 1e-6):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.var(x, axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * scale + bias


def layer_norm_bug(x, scale, bias, eps: float = 1e-6):
    mean = jnp.mean(x, axis=-1)  # keepdims dropped
    var = jnp.var(x, axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * scale + bias


def rope(x):
    T, _, D = x.shape
    half = D // 2
    freqs = 1.0 / (10000 ** (jnp.arange(half) / half))
    angles = jnp.arange(T)[:, None] * freqs[None, :]
    sin, cos = jnp.sin(angles)[:, None, :], jnp.cos(angles)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


def rope_bug(x):
    T, _, D = x.shape
    half = D // 2
    freqs = 1.0 / (10000 ** (jnp.arange(half) / half))
    angles = jnp.arange(T) * freqs  # positions times frequencies, elementwise
    sin, cos = jnp.sin(angles)[:, None, :], jnp.cos(angles)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


def rnn(xs, h0, W, U):
    def step(h, x):
        h = jnp.tanh(x @ W + h @ U)
        return h, h

    _, hs = jax.lax.scan(step, h0, xs)
    return hs


def rnn_bug(xs, h0, W, U):
    def step(h, x):
        h = jnp.tanh(h @ W + x @ U)  # weights swapped: runs whenever D == H
        return h, h

    _, hs = jax.lax.scan(step, h0, xs)
    return hs


def mse(pred, y):
    return jnp.mean((pred.squeeze(-1) - y) ** 2)


def mse_bug(pred, y):
    return jnp.mean((pred - y) ** 2)


_norm = jax.jit(layer_norm)


def residual(x, scale, bias):
    return x + _norm(x, scale, bias)


def residual_bug(x, scale, bias):
    return x + _norm(x, scale, bias).mean(-1)


CASES = [
    ("jax attention", attention, attention_bug,
     "T, D; D, D; D, D; D, D; D, D => T, D"),
    ("jax mlp vmap", batched_mlp, batched_mlp_bug, "H, D; H; C, H; C; B, D => B, C"),
    ("jax layer_norm", layer_norm, layer_norm_bug, "B, T, D; D; D => B, T, D"),
    ("jax rope", rope, rope_bug, "T, H, D => T, H, D"),
    ("jax rnn scan", rnn, rnn_bug, "T, B, D; B, H; D, H; H, H => T, B, H"),
    ("jax mse", mse, mse_bug, "N, 1; N =>"),
    ("jax residual (jitted at import)", residual, residual_bug, "B, T, D; D; D => B, T, D"),
]
