"""JAX code as flax examples, haiku, optax, cleanrl/purejaxrl, diffusion samplers and jraph
write it (written for this corpus, from the probe of verify's JAX path): attention masks, GPT
embeddings, cross entropy with one_hot and take_along_axis, per-example gradients under
vmap(grad), RNNs, LSTMs and GAE under lax.scan, convolutions through lax.conv_general_dilated,
a DDPM forward step, a segment_sum GNN layer, a reparameterisation taking a PRNG key, a KV cache
update, lax.dot_general, fori_loop, and sizes given as ints.

Each case is (name, correct function, function with one realistic injected bug, the finding
code the bug must give); the signatures are the functions' annotations.
"""

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.nn import log_softmax, one_hot

from tensig import Bool, Float, Int


def padding_mask_attn(q: Float[jax.Array, "B, T, H, K"], k: Float[jax.Array, "B, S, H, K"],
                      v: Float[jax.Array, "B, S, H, K"], mask: Bool[jax.Array, "B, S"]
                      ) -> Float[jax.Array, "B, T, H, K"]:
    logits = jnp.einsum("...qhd,...khd->...hqk", q, k) * q.shape[-1] ** -0.5
    logits = jnp.where(mask[:, None, None, :], logits, -1e10)
    probs = jax.nn.softmax(logits)
    return jnp.einsum("...hqk,...khd->...qhd", probs, v)


def padding_mask_attn_bug(q: Float[jax.Array, "B, T, H, K"], k: Float[jax.Array, "B, S, H, K"],
                          v: Float[jax.Array, "B, S, H, K"], mask: Bool[jax.Array, "B, S"]
                          ) -> Float[jax.Array, "B, T, H, K"]:
    logits = jnp.einsum("...qhd,...khd->...hqk", q, k) * q.shape[-1] ** -0.5
    logits = jnp.where(mask[:, None, :, None], logits, -1e10)  # masks queries axis
    probs = jax.nn.softmax(logits)
    return jnp.einsum("...hqk,...khd->...qhd", probs, v)


def gpt_logits(tokens: Int[jax.Array, "B, T"], wte: Float[jax.Array, "V, D"],
               wpe: Float[jax.Array, "P, D"]) -> Float[jax.Array, "B, T, V"]:
    T = tokens.shape[1]
    h = wte[tokens] + wpe[jnp.arange(T)]
    h = h / jnp.linalg.norm(h, axis=-1, keepdims=True)
    return h @ wte.T


def gpt_logits_bug(tokens: Int[jax.Array, "B, T"], wte: Float[jax.Array, "V, D"],
                   wpe: Float[jax.Array, "P, D"]) -> Float[jax.Array, "B, T, V"]:
    h = jnp.take(wte, tokens, axis=0) + wpe  # whole position table, not the first T rows
    return h @ wte.T


def cross_entropy(logits: Float[jax.Array, "B, C"], labels: Int[jax.Array, "B"]
                  ) -> Float[jax.Array, ""]:
    one_hot = jax.nn.one_hot(labels, num_classes=logits.shape[-1])
    return -jnp.mean(jnp.sum(one_hot * jax.nn.log_softmax(logits), axis=-1))


def cross_entropy_bug(logits: Float[jax.Array, "B, C"], labels: Int[jax.Array, "B"]
                      ) -> Float[jax.Array, ""]:
    one_hot = jax.nn.one_hot(labels, num_classes=logits.shape[0])  # batch size
    return -jnp.mean(jnp.sum(one_hot * jax.nn.log_softmax(logits), axis=-1))


def nll_take_along(logits: Float[jax.Array, "B, T, V"], targets: Int[jax.Array, "B, T"]
                   ) -> Float[jax.Array, ""]:
    logp = jax.nn.log_softmax(logits, axis=-1)
    picked = jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    return -picked.mean()


def nll_take_along_bug(logits: Float[jax.Array, "B, T, V"], targets: Int[jax.Array, "B, T"]
                       ) -> Float[jax.Array, "B, T"]:
    logp = jax.nn.log_softmax(logits, axis=-1)
    picked = jnp.take_along_axis(logp, targets[..., None], axis=-1)  # [..., 0] forgotten
    return -picked


def per_example_grads(w: Float[jax.Array, "D"], X: Float[jax.Array, "N, D"],
                      y: Float[jax.Array, "N"]) -> Float[jax.Array, "N, D"]:
    def loss(w, x, t):
        return (jnp.dot(x, w) - t) ** 2
    return jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(w, X, y)


def per_example_grads_bug(w: Float[jax.Array, "D"], X: Float[jax.Array, "N, D"],
                          y: Float[jax.Array, "N"]) -> Float[jax.Array, "N, D"]:
    def loss(w, x, t):
        return (jnp.dot(x, w) - t) ** 2
    return jax.vmap(jax.grad(loss), in_axes=(None, 1, 0))(w, X, y)


def kl_diag_gauss(mean: Float[jax.Array, "B, Z"], logvar: Float[jax.Array, "B, Z"]
                  ) -> Float[jax.Array, "B"]:
    return -0.5 * jnp.sum(1 + logvar - jnp.square(mean) - jnp.exp(logvar), axis=-1)


def kl_diag_gauss_bug(mean: Float[jax.Array, "B, Z"], logvar: Float[jax.Array, "B, Z"]
                      ) -> Float[jax.Array, "B"]:
    return -0.5 * jnp.sum(1 + logvar - jnp.square(mean) - jnp.exp(logvar), axis=0)


def elman_rnn(xs: Float[jax.Array, "T, B, I"], h0: Float[jax.Array, "B, H"],
              W_xh: Float[jax.Array, "I, H"], W_hh: Float[jax.Array, "H, H"],
              b: Float[jax.Array, "H"]) -> Float[jax.Array, "T, B, H"]:
    def step(h, x):
        h = jnp.tanh(x @ W_xh + h @ W_hh + b)
        return h, h
    _, hs = jax.lax.scan(step, h0, xs)
    return hs


def elman_rnn_bug(xs: Float[jax.Array, "T, B, I"], h0: Float[jax.Array, "B, H"],
                  W_xh: Float[jax.Array, "I, H"], W_hh: Float[jax.Array, "H, H"],
                  b: Float[jax.Array, "H"]) -> Float[jax.Array, "T, B, H"]:
    def step(h, x):
        h = jnp.tanh(x @ W_xh + h @ W_hh + b)
        return h.mean(0), h  # carry loses the batch axis
    _, hs = jax.lax.scan(step, h0, xs)
    return hs


def lstm(xs: Float[jax.Array, "T, B, I"], W: Float[jax.Array, "I + H, 4*H"],
         b: Float[jax.Array, "4*H"], h0: Float[jax.Array, "B, H"]) -> Float[jax.Array, "T, B, H"]:
    def cell(carry, x):
        h, c = carry
        gates = jnp.concatenate([x, h], axis=-1) @ W + b
        i, f, g, o = jnp.split(gates, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h
    (_, _), hs = jax.lax.scan(cell, (h0, jnp.zeros_like(h0)), xs)
    return hs


def lstm_bug(xs: Float[jax.Array, "T, B, I"], W: Float[jax.Array, "I + H, 4*H"],
             b: Float[jax.Array, "4*H"], h0: Float[jax.Array, "B, H"]
             ) -> Float[jax.Array, "T, B, H"]:
    def cell(carry, x):
        h, c = carry
        gates = jnp.concatenate([x, h], axis=0) @ W + b  # concatenated over the batch
        i, f, g, o = jnp.split(gates, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h
    (_, _), hs = jax.lax.scan(cell, (h0, jnp.zeros_like(h0)), xs)
    return hs


def gae(rewards: Float[jax.Array, "T, E"], values: Float[jax.Array, "T + 1, E"],
        dones: Float[jax.Array, "T + 1, E"], gamma: float = 0.99, lam: float = 0.95
        ) -> Float[jax.Array, "T, E"]:
    def once(adv, inp):
        nextdone, nextvalue, value, reward = inp
        nonterminal = 1.0 - nextdone
        delta = reward + gamma * nextvalue * nonterminal - value
        adv = delta + gamma * lam * nonterminal * adv
        return adv, adv
    init = jnp.zeros_like(rewards[0])
    _, advs = jax.lax.scan(once, init, (dones[1:], values[1:], values[:-1], rewards),
                           reverse=True)
    return advs


def gae_bug(rewards: Float[jax.Array, "T, E"], values: Float[jax.Array, "T + 1, E"],
            dones: Float[jax.Array, "T + 1, E"], gamma: float = 0.99, lam: float = 0.95
            ) -> Float[jax.Array, "T, E"]:
    def once(adv, inp):
        nextdone, nextvalue, value, reward = inp
        nonterminal = 1.0 - nextdone
        delta = reward + gamma * nextvalue * nonterminal - value
        adv = delta + gamma * lam * nonterminal * adv
        return adv, adv
    init = jnp.zeros_like(rewards[0])
    _, advs = jax.lax.scan(once, init, (dones[1:], values[1:], values, rewards),  # all T + 1
                           reverse=True)
    return advs


def q_learning_target(q_next: Float[jax.Array, "B, A"], rewards: Float[jax.Array, "B"],
                      dones: Float[jax.Array, "B"], gamma: float = 0.99) -> Float[jax.Array, "B"]:
    return rewards + (1.0 - dones) * gamma * jnp.max(q_next, axis=-1)


def q_learning_target_bug(q_next: Float[jax.Array, "B, A"], rewards: Float[jax.Array, "B"],
                          dones: Float[jax.Array, "B"], gamma: float = 0.99
                          ) -> Float[jax.Array, "B"]:
    return rewards + (1.0 - dones) * gamma * jnp.max(q_next, axis=0)


def conv2d_same(x: Float[jax.Array, "N, H, W, C"], w: Float[jax.Array, "3, 3, C, O"]
                ) -> Float[jax.Array, "N, H, W, O"]:
    return lax.conv_general_dilated(x, w, window_strides=(1, 1), padding="SAME",
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))


def conv2d_same_bug(x: Float[jax.Array, "N, H, W, C"], w: Float[jax.Array, "3, 3, C, O"]
                    ) -> Float[jax.Array, "N, H, W, O"]:
    return lax.conv_general_dilated(x, w, window_strides=(1, 1), padding="VALID",  # shrinks
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))


def conv_nchw(x: Float[jax.Array, "N, C, H, W"], w: Float[jax.Array, "O, C, 3, 3"],
              b: Float[jax.Array, "O"]) -> Float[jax.Array, "N, O, H - 2, W - 2"]:
    y = lax.conv(x, w, (1, 1), "VALID")
    return y + b[None, :, None, None]


def conv_nchw_bug(x: Float[jax.Array, "N, C, H, W"], w: Float[jax.Array, "O, C, 3, 3"],
                  b: Float[jax.Array, "O"]) -> Float[jax.Array, "N, O, H - 2, W - 2"]:
    y = lax.conv(x, w, (1, 1), "VALID")
    return y + b[None, None, None, :]


def global_pool_head(x: Float[jax.Array, "N, H, W, C"], w: Float[jax.Array, "C, K"]
                     ) -> Float[jax.Array, "N, K"]:
    return jnp.mean(x, axis=(1, 2)) @ w


def global_pool_head_bug(x: Float[jax.Array, "N, H, W, C"], w: Float[jax.Array, "C, K"]
                         ) -> Float[jax.Array, "N, K"]:
    return jnp.mean(x, axis=(0, 1)) @ w


def ddpm_q_sample(x0: Float[jax.Array, "B, H, W, C"], t: Int[jax.Array, "B"],
                  noise: Float[jax.Array, "B, H, W, C"], alphas_bar: Float[jax.Array, "S"]
                  ) -> Float[jax.Array, "B, H, W, C"]:
    a = alphas_bar[t][:, None, None, None]
    return jnp.sqrt(a) * x0 + jnp.sqrt(1.0 - a) * noise


def ddpm_q_sample_bug(x0: Float[jax.Array, "B, H, W, C"], t: Int[jax.Array, "B"],
                      noise: Float[jax.Array, "B, H, W, C"], alphas_bar: Float[jax.Array, "S"]
                      ) -> Float[jax.Array, "B, H, W, C"]:
    a = alphas_bar[t][None, None, None, :]  # per-example scale on the channel axis
    return jnp.sqrt(a) * x0 + jnp.sqrt(1.0 - a) * noise


def gnn_layer(nodes: Float[jax.Array, "N, F"], senders: Int[jax.Array, "E"],
              receivers: Int[jax.Array, "E"], w: Float[jax.Array, "F, G"]
              ) -> Float[jax.Array, "N, G"]:
    msgs = nodes[senders] @ w
    agg = jax.ops.segment_sum(msgs, receivers, num_segments=nodes.shape[0])
    deg = jax.ops.segment_sum(jnp.ones_like(receivers), receivers, num_segments=nodes.shape[0])
    return agg / jnp.maximum(deg, 1)[:, None]


def gnn_layer_bug(nodes: Float[jax.Array, "N, F"], senders: Int[jax.Array, "E"],
                  receivers: Int[jax.Array, "E"], w: Float[jax.Array, "F, G"]
                  ) -> Float[jax.Array, "N, G"]:
    msgs = nodes[senders] @ w
    agg = jax.ops.segment_sum(msgs, receivers, num_segments=senders.shape[0])  # edges
    return agg


def reparameterize(rng: jax.Array, mean: Float[jax.Array, "B, Z"],
                   logvar: Float[jax.Array, "B, Z"]) -> Float[jax.Array, "B, Z"]:
    std = jnp.exp(0.5 * logvar)
    eps = jax.random.normal(rng, logvar.shape)
    return mean + eps * std


def reparameterize_bug(rng: jax.Array, mean: Float[jax.Array, "B, Z"],
                       logvar: Float[jax.Array, "B, Z"]) -> Float[jax.Array, "B, Z"]:
    std = jnp.exp(0.5 * logvar)
    eps = jax.random.normal(rng, (logvar.shape[0],))  # one draw per row
    return mean + eps * std


def causal_conv1d(x: Float[jax.Array, "B, T, C"], w: Float[jax.Array, "K, C, O"]
                  ) -> Float[jax.Array, "B, T, O"]:
    k = w.shape[0]
    xp = jnp.pad(x, ((0, 0), (k - 1, 0), (0, 0)))
    return jax.lax.conv_general_dilated(xp, w, (1,), "VALID",
                                        dimension_numbers=("NWC", "WIO", "NWC"))


def causal_conv1d_bug(x: Float[jax.Array, "B, T, C"], w: Float[jax.Array, "K, C, O"]
                      ) -> Float[jax.Array, "B, T, O"]:
    k = w.shape[0]
    xp = jnp.pad(x, ((0, 0), (k, 0), (0, 0)))  # one step too much padding
    return jax.lax.conv_general_dilated(xp, w, (1,), "VALID",
                                        dimension_numbers=("NWC", "WIO", "NWC"))


def kv_cache_update(cache: Float[jax.Array, "B, S, H, K"], new: Float[jax.Array, "B, 1, H, K"],
                    index: Int[jax.Array, ""]) -> Float[jax.Array, "B, S, H, K"]:
    return lax.dynamic_update_slice(cache, new, (0, index, 0, 0))


def kv_cache_update_bug(cache: Float[jax.Array, "B, S, H, K"],
                        new: Float[jax.Array, "B, 1, H, K"], index: Int[jax.Array, ""]
                        ) -> Float[jax.Array, "B, S, H, K"]:
    return lax.dynamic_update_slice(cache, new[:, 0], (0, index, 0, 0))


def dense_general(x: Float[jax.Array, "B, T, D"], w: Float[jax.Array, "D, F"]
                  ) -> Float[jax.Array, "B, T, F"]:
    return lax.dot_general(x, w, (((2,), (0,)), ((), ())))


def dense_general_bug(x: Float[jax.Array, "B, T, D"], w: Float[jax.Array, "D, F"]
                      ) -> Float[jax.Array, "B, T, F"]:
    return lax.dot_general(x, w, (((1,), (0,)), ((), ())))


def fori_power_iter(A: Float[jax.Array, "N, N"], v0: Float[jax.Array, "N"]
                    ) -> Float[jax.Array, "N"]:
    def body(i, v):
        w = A @ v
        return w / jnp.linalg.norm(w)
    return lax.fori_loop(0, 20, body, v0)


def fori_power_iter_bug(A: Float[jax.Array, "N, N"], v0: Float[jax.Array, "N"]
                        ) -> Float[jax.Array, "N"]:
    def body(i, v):
        w = A @ v[:, None]  # carry grows an axis
        return w / jnp.linalg.norm(w)
    return lax.fori_loop(0, 20, body, v0)


def one_hot_argmax_acc(logits: Float[jax.Array, "B, C"], labels: Int[jax.Array, "B"]
                       ) -> Float[jax.Array, ""]:
    return jnp.mean(jnp.argmax(logits, -1) == labels)


def one_hot_argmax_acc_bug(logits: Float[jax.Array, "B, C"], labels: Int[jax.Array, "B"]
                           ) -> Float[jax.Array, ""]:
    return jnp.mean(jnp.argmax(logits, 0) == labels)


def meshgrid_coords(H: int, W: int) -> Float[jax.Array, "H, W, 2"]:
    ys, xs = jnp.meshgrid(jnp.arange(H), jnp.arange(W), indexing="ij")
    return jnp.stack([ys, xs], axis=-1).astype(jnp.float32)


def meshgrid_coords_bug(H: int, W: int) -> Float[jax.Array, "H, W, 2"]:
    ys, xs = jnp.meshgrid(jnp.arange(H), jnp.arange(W))  # default 'xy' indexing
    return jnp.stack([ys, xs], axis=-1).astype(jnp.float32)


# -- helpers compiled at import, names imported from JAX, a PRNG key by name (from the review) --


@functools.partial(jax.jit, static_argnames=("num_heads",))
def _split_heads(x, num_heads):
    b, t, d = x.shape
    return x.reshape(b, t, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def mha_scores(q: Float[jax.Array, "B, T, 64"], k: Float[jax.Array, "B, S, 64"]
               ) -> Float[jax.Array, "B, 4, T, S"]:
    qh, kh = _split_heads(q, num_heads=4), _split_heads(k, num_heads=4)
    return jnp.einsum("bhtd,bhsd->bhts", qh, kh) / jnp.sqrt(16.0)


def mha_scores_bug(q: Float[jax.Array, "B, T, 64"], k: Float[jax.Array, "B, S, 64"]
                   ) -> Float[jax.Array, "B, 4, T, S"]:
    qh, kh = _split_heads(q, num_heads=4), _split_heads(k, num_heads=4)
    return qh @ kh / jnp.sqrt(16.0)  # kh not transposed: [.., T, 16] @ [.., S, 16]


def smooth_xent(logits: Float[jax.Array, "B, C"], labels: Int[jax.Array, "B"]
                ) -> Float[jax.Array, "B"]:
    n = logits.shape[-1]
    target = one_hot(labels, n) * 0.9 + 0.1 / n
    return -jnp.sum(target * log_softmax(logits), axis=-1)


def smooth_xent_bug(logits: Float[jax.Array, "B, C"], labels: Int[jax.Array, "B"]
                    ) -> Float[jax.Array, "B"]:
    n = logits.shape[0]  # the batch size, not the class count
    target = one_hot(labels, n) * 0.9 + 0.1 / n
    return -jnp.sum(target * log_softmax(logits), axis=-1)


@jax.custom_jvp
def _safe_norm(x):
    return jnp.sqrt(jnp.maximum(jnp.sum(x * x, axis=-1, keepdims=True), 1e-12))


_safe_norm.defjvp(lambda p, t: (_safe_norm(p[0]),
                                jnp.sum(p[0] * t[0], -1, keepdims=True) / _safe_norm(p[0])))


@jax.custom_jvp
def _safe_norm_flat(x):
    return jnp.sqrt(jnp.maximum(jnp.sum(x * x, axis=-1), 1e-12))  # keepdims lost: [B]


_safe_norm_flat.defjvp(lambda p, t: (_safe_norm_flat(p[0]), jnp.sum(p[0] * t[0], -1)))


def normalize(x: Float[jax.Array, "B, D"]) -> Float[jax.Array, "B, D"]:
    return x / _safe_norm(x)


def normalize_bug(x: Float[jax.Array, "B, D"]) -> Float[jax.Array, "B, D"]:
    return x / _safe_norm_flat(x)  # [B, D] / [B]


def token_dropout(dropout_rng, x: Float[jax.Array, "B, T, D"], rate: float
                  ) -> Float[jax.Array, "B, T, D"]:
    keep = jax.random.bernoulli(dropout_rng, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)


def token_dropout_bug(dropout_rng, x: Float[jax.Array, "B, T, D"], rate: float
                      ) -> Float[jax.Array, "B, T, D"]:
    keep = jax.random.bernoulli(dropout_rng, 1.0 - rate, x.shape[:2])  # [B, T]: not broadcast
    return jnp.where(keep, x / (1.0 - rate), 0.0)


CASES = [
    ("attention padding mask", padding_mask_attn, padding_mask_attn_bug, "TS101"),
    ("gpt embeddings + positions", gpt_logits, gpt_logits_bug, "TS101"),
    ("one_hot cross entropy", cross_entropy, cross_entropy_bug, "TS101"),
    ("take_along_axis nll", nll_take_along, nll_take_along_bug, "TS103"),
    ("vmap(grad) per-example grads", per_example_grads, per_example_grads_bug, "TS101"),
    ("vae kl", kl_diag_gauss, kl_diag_gauss_bug, "TS103"),
    ("scan elman rnn", elman_rnn, elman_rnn_bug, "TS101"),
    ("scan lstm split gates", lstm, lstm_bug, "TS106"),
    ("scan reverse gae", gae, gae_bug, "TS101"),
    ("dqn target", q_learning_target, q_learning_target_bug, "TS101"),
    ("conv_general_dilated NHWC", conv2d_same, conv2d_same_bug, "TS103"),
    ("lax.conv NCHW + bias", conv_nchw, conv_nchw_bug, "TS101"),
    ("global pool head", global_pool_head, global_pool_head_bug, "TS103"),
    ("ddpm q_sample", ddpm_q_sample, ddpm_q_sample_bug, "TS101"),
    ("segment_sum gnn", gnn_layer, gnn_layer_bug, "TS103"),
    ("vae reparameterize rng", reparameterize, reparameterize_bug, "TS101"),
    ("causal conv1d pad", causal_conv1d, causal_conv1d_bug, "TS103"),
    ("kv cache dynamic_update_slice", kv_cache_update, kv_cache_update_bug, "TS108"),
    ("lax.dot_general dense", dense_general, dense_general_bug, "TS102"),
    ("fori_loop power iteration", fori_power_iter, fori_power_iter_bug, "TS101"),
    ("argmax accuracy", one_hot_argmax_acc, one_hot_argmax_acc_bug, "TS101"),
    ("meshgrid coords int sizes", meshgrid_coords, meshgrid_coords_bug, "TS103"),
    ("split heads jitted at import", mha_scores, mha_scores_bug, "TS102"),
    ("label smoothing, one_hot by name", smooth_xent, smooth_xent_bug, "TS101"),
    ("custom_jvp safe norm", normalize, normalize_bug, "TS101"),
    ("dropout_rng by name", token_dropout, token_dropout_bug, "TS101"),
]
