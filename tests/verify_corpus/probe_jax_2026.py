"""JAX code in the style of flax, optax, purejaxrl, diffusers-jax, jraph, mamba/hyena ports,
NeRF and Gaussian-splatting ports and tinygp (written for this corpus, pure JAX with params as
arrays or dicts): GRU/LSTM under lax.scan with carry pytrees, associative_scan recurrences,
fori_loop samplers and decoders, vmap with pytree in_axes/out_axes, tree_map optimizers,
segment_max attention over graphs, top-k/top-p/gumbel sampling, blockwise attention with
dynamic_slice, FFT long convolutions, complex rotary embeddings, Kalman filtering, GP
likelihoods, volume rendering, chex-style shape asserts, Hessians and jvp under vmap,
nn.initializers, vmap over split keys, jnp.vectorize, image.resize and lax.switch.

Each case is (name, correct function, function with one realistic injected bug, the finding
code the bug must give); the signatures are the functions' annotations.
"""

import math

import jax
import jax.numpy as jnp
from jax import lax

from tensig import Bool, Float, Int

# -- recurrent cells under lax.scan ------------------------------------------------------------


def gru_batch_major(xs: Float[jax.Array, "B, T, I"], h0: Float[jax.Array, "B, H"],
                    Wx: Float[jax.Array, "I, 3*H"], Wh: Float[jax.Array, "H, 3*H"],
                    b: Float[jax.Array, "3*H"]) -> Float[jax.Array, "B, T, H"]:
    def cell(h, x):
        gx = x @ Wx + b
        gh = h @ Wh
        xr, xz, xn = jnp.split(gx, 3, axis=-1)
        hr, hz, hn = jnp.split(gh, 3, axis=-1)
        r = jax.nn.sigmoid(xr + hr)
        z = jax.nn.sigmoid(xz + hz)
        n = jnp.tanh(xn + r * hn)
        h = (1.0 - z) * n + z * h
        return h, h
    _, hs = lax.scan(cell, h0, jnp.swapaxes(xs, 0, 1))
    return jnp.swapaxes(hs, 0, 1)


def gru_batch_major_bug(xs: Float[jax.Array, "B, T, I"], h0: Float[jax.Array, "B, H"],
                        Wx: Float[jax.Array, "I, 3*H"], Wh: Float[jax.Array, "H, 3*H"],
                        b: Float[jax.Array, "3*H"]) -> Float[jax.Array, "B, T, H"]:
    def cell(h, x):
        gx = x @ Wx + b
        gh = h @ Wh
        xr, xz, xn = jnp.split(gx, 3, axis=-1)
        hr, hz, hn = jnp.split(gh, 3, axis=-1)
        r = jax.nn.sigmoid(xr + hr)
        z = jax.nn.sigmoid(xz + hz)
        n = jnp.tanh(xn + r * hn)
        h = (1.0 - z) * n + z * h
        return h, h
    _, hs = lax.scan(cell, h0, xs)  # BUG: scans over the batch, each step sees [T, I]
    return jnp.swapaxes(hs, 0, 1)


def lstm_dict_carry(xs: Float[jax.Array, "T, B, I"], W: Float[jax.Array, "I, 4*H"],
                    U: Float[jax.Array, "H, 4*H"], b: Float[jax.Array, "4*H"],
                    Wo: Float[jax.Array, "H, C"]) -> Float[jax.Array, "B, C"]:
    B, H = xs.shape[1], U.shape[0]

    def cell(carry, x):
        z = x @ W + carry["h"] @ U + b
        i, f, g, o = jnp.split(z, 4, axis=-1)
        c = jax.nn.sigmoid(f + 1.0) * carry["c"] + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return {"h": h, "c": c}, None
    init = {"h": jnp.zeros((B, H)), "c": jnp.zeros((B, H))}
    last, _ = lax.scan(cell, init, xs)
    return last["h"] @ Wo


def lstm_dict_carry_bug(xs: Float[jax.Array, "T, B, I"], W: Float[jax.Array, "I, 4*H"],
                        U: Float[jax.Array, "H, 4*H"], b: Float[jax.Array, "4*H"],
                        Wo: Float[jax.Array, "H, C"]) -> Float[jax.Array, "B, C"]:
    B, H = xs.shape[1], U.shape[0]

    def cell(carry, x):
        z = x @ W + carry["h"] @ U + b
        i, f, g, o = jnp.split(z, 4, axis=-1)
        c = jax.nn.sigmoid(f + 1.0) * carry["c"] + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return {"h": h, "c": c}, None
    init = {"h": jnp.zeros((B, H)), "c": jnp.zeros((H, B))}  # BUG: the cell state transposed
    last, _ = lax.scan(cell, init, xs)
    return last["h"] @ Wo


def bidirectional_rnn(xs: Float[jax.Array, "T, B, I"], Wf: Float[jax.Array, "I + H, H"],
                      Wb: Float[jax.Array, "I + H, H"], h0: Float[jax.Array, "B, H"]
                      ) -> Float[jax.Array, "T, B, 2*H"]:
    def make(W):
        def step(h, x):
            h = jnp.tanh(jnp.concatenate([x, h], axis=-1) @ W)
            return h, h
        return step
    _, fwd = lax.scan(make(Wf), h0, xs)
    _, bwd = lax.scan(make(Wb), h0, xs, reverse=True)
    return jnp.concatenate([fwd, bwd], axis=-1)


def bidirectional_rnn_bug(xs: Float[jax.Array, "T, B, I"], Wf: Float[jax.Array, "I + H, H"],
                          Wb: Float[jax.Array, "I + H, H"], h0: Float[jax.Array, "B, H"]
                          ) -> Float[jax.Array, "T, B, 2*H"]:
    def make(W):
        def step(h, x):
            h = jnp.tanh(jnp.concatenate([x, h], axis=-1) @ W)
            return h, h
        return step
    _, fwd = lax.scan(make(Wf), h0, xs)
    _, bwd = lax.scan(make(Wb), h0, xs, reverse=True)
    return jnp.concatenate([fwd, bwd], axis=0)  # BUG: stacked in time, not in features


# -- associative scans: linear recurrences, a selective (Mamba-style) scan -------------------


def linear_recurrence(a: Float[jax.Array, "T"], b: Float[jax.Array, "T, D"]
                      ) -> Float[jax.Array, "T, D"]:
    def combine(left, right):
        a_l, b_l = left
        a_r, b_r = right
        return a_l * a_r, a_r * b_l + b_r
    a_full = jnp.broadcast_to(a[:, None], b.shape)
    _, h = lax.associative_scan(combine, (a_full, b))
    return h


def linear_recurrence_bug(a: Float[jax.Array, "T"], b: Float[jax.Array, "T, D"]
                          ) -> Float[jax.Array, "T, D"]:
    def combine(left, right):
        a_l, b_l = left
        a_r, b_r = right
        return a_l * a_r, a_r * b_l + b_r
    _, h = lax.associative_scan(combine, (a, b))  # BUG: one decay per step against [T, D]
    return h


def selective_scan(x: Float[jax.Array, "B, L, D"], delta: Float[jax.Array, "B, L, D"],
                   A: Float[jax.Array, "D, N"], Bm: Float[jax.Array, "B, L, N"],
                   C: Float[jax.Array, "B, L, N"]) -> Float[jax.Array, "B, L, D"]:
    dA = jnp.exp(delta[..., None] * A)
    dBx = delta[..., None] * Bm[:, :, None, :] * x[..., None]

    def combine(left, right):
        return left[0] * right[0], right[0] * left[1] + right[1]
    _, h = lax.associative_scan(combine, (dA, dBx), axis=1)
    return jnp.einsum("bldn,bln->bld", h, C)


def selective_scan_bug(x: Float[jax.Array, "B, L, D"], delta: Float[jax.Array, "B, L, D"],
                       A: Float[jax.Array, "D, N"], Bm: Float[jax.Array, "B, L, N"],
                       C: Float[jax.Array, "B, L, N"]) -> Float[jax.Array, "B, L, D"]:
    dA = jnp.exp(delta[..., None] * A)
    dBx = delta[..., None] * Bm[:, :, :, None] * x[..., None]  # BUG: N spread on the D axis

    def combine(left, right):
        return left[0] * right[0], right[0] * left[1] + right[1]
    _, h = lax.associative_scan(combine, (dA, dBx), axis=1)
    return jnp.einsum("bldn,bln->bld", h, C)


def cumulative_max_pool(x: Float[jax.Array, "B, T, D"]) -> Float[jax.Array, "B, T, D"]:
    return lax.associative_scan(jnp.maximum, x, axis=1)


def cumulative_max_pool_bug(x: Float[jax.Array, "B, T, D"]) -> Float[jax.Array, "B, T, D"]:
    return lax.associative_scan(jnp.maximum, x.mean(1), axis=0)  # BUG: pooled before the scan


# -- diffusion samplers under fori_loop ---------------------------------------------------------


def ddim_sample(x_T: Float[jax.Array, "B, D"], W: Float[jax.Array, "D, D"],
                alphas_bar: Float[jax.Array, "S"]) -> Float[jax.Array, "B, D"]:
    steps = alphas_bar.shape[0]

    def body(i, x):
        t = steps - 1 - i
        a_t = alphas_bar[t]
        a_prev = jnp.where(t > 0, alphas_bar[jnp.maximum(t - 1, 0)], 1.0)
        eps = jnp.tanh(x @ W)
        x0 = (x - jnp.sqrt(1.0 - a_t) * eps) / jnp.sqrt(a_t)
        return jnp.sqrt(a_prev) * x0 + jnp.sqrt(1.0 - a_prev) * eps
    return lax.fori_loop(0, steps, body, x_T)


def ddim_sample_bug(x_T: Float[jax.Array, "B, D"], W: Float[jax.Array, "D, D"],
                    alphas_bar: Float[jax.Array, "S"]) -> Float[jax.Array, "B, D"]:
    steps = alphas_bar.shape[0]

    def body(i, x):
        t = steps - 1 - i
        a_t = alphas_bar[t]
        a_prev = jnp.where(t > 0, alphas_bar[jnp.maximum(t - 1, 0)], 1.0)
        eps = jnp.tanh(x @ W).mean(-1)  # BUG: a per-sample scalar, not per-feature noise
        x0 = (x - jnp.sqrt(1.0 - a_t) * eps) / jnp.sqrt(a_t)
        return jnp.sqrt(a_prev) * x0 + jnp.sqrt(1.0 - a_prev) * eps
    return lax.fori_loop(0, steps, body, x_T)


def euler_karras(x: Float[jax.Array, "B, H, W, C"], w: Float[jax.Array, "C, C"],
                 sigmas: Float[jax.Array, "S + 1"]) -> Float[jax.Array, "B, H, W, C"]:
    def body(i, x):
        sigma, sigma_next = sigmas[i], sigmas[i + 1]
        denoised = x - sigma * jnp.tanh(x @ w)
        d = (x - denoised) / sigma
        return x + d * (sigma_next - sigma)
    return lax.fori_loop(0, sigmas.shape[0] - 1, body, x * sigmas[0])


def euler_karras_bug(x: Float[jax.Array, "B, H, W, C"], w: Float[jax.Array, "C, C"],
                     sigmas: Float[jax.Array, "S + 1"]) -> Float[jax.Array, "B, H, W, C"]:
    def body(i, x):
        sigma, sigma_next = sigmas[i], sigmas[i + 1]
        denoised = x - sigma * jnp.tanh(w @ x)  # BUG: the channel mixing applied from the left
        d = (x - denoised) / sigma
        return x + d * (sigma_next - sigma)
    return lax.fori_loop(0, sigmas.shape[0] - 1, body, x * sigmas[0])


def timestep_embedding(t: Float[jax.Array, "B"], H: int) -> Float[jax.Array, "B, 2*H"]:
    freqs = jnp.exp(-math.log(10000.0) * jnp.arange(H) / H)
    args = t[:, None] * freqs[None, :]
    return jnp.concatenate([jnp.cos(args), jnp.sin(args)], axis=-1)


def timestep_embedding_bug(t: Float[jax.Array, "B"], H: int) -> Float[jax.Array, "B, 2*H"]:
    freqs = jnp.exp(-math.log(10000.0) * jnp.arange(H) / H)
    args = t * freqs  # BUG: timesteps times frequencies elementwise
    return jnp.concatenate([jnp.cos(args), jnp.sin(args)], axis=-1)


# -- vmap with pytree in_axes/out_axes, per-example gradients --------------------------------


def _linear_ce(params, x, t):
    logits = x @ params["w"] + params["b"]
    return -jax.nn.log_softmax(logits)[t]


def dp_sgd_grad(w: Float[jax.Array, "D, C"], b: Float[jax.Array, "C"],
                X: Float[jax.Array, "N, D"], y: Int[jax.Array, "N"], clip: float = 1.0
                ) -> Float[jax.Array, "D, C"]:
    params = {"w": w, "b": b}
    g = jax.vmap(jax.grad(_linear_ce), in_axes=(None, 0, 0))(params, X, y)
    norms = jnp.sqrt(jnp.sum(g["w"] ** 2, axis=(1, 2)) + jnp.sum(g["b"] ** 2, axis=1))
    scale = jnp.minimum(1.0, clip / (norms + 1e-6))
    return jnp.mean(g["w"] * scale[:, None, None], axis=0)


def dp_sgd_grad_bug(w: Float[jax.Array, "D, C"], b: Float[jax.Array, "C"],
                    X: Float[jax.Array, "N, D"], y: Int[jax.Array, "N"], clip: float = 1.0
                    ) -> Float[jax.Array, "D, C"]:
    params = {"w": w, "b": b}
    g = jax.vmap(jax.grad(_linear_ce), in_axes=(None, 0, 0))(params, X, y)
    norms = jnp.sqrt(jnp.sum(g["w"] ** 2, axis=(1, 2)) + jnp.sum(g["b"] ** 2, axis=1))
    scale = jnp.minimum(1.0, clip / (norms + 1e-6))
    return jnp.mean(g["w"] * scale[:, None], axis=0)  # BUG: [N, 1] against [N, D, C]


def _head(params, x):
    return x @ params["w"] + params["b"]


def ensemble_heads(Ws: Float[jax.Array, "E, D, C"], bs: Float[jax.Array, "E, C"],
                   x: Float[jax.Array, "B, D"]) -> Float[jax.Array, "B, E, C"]:
    return jax.vmap(_head, in_axes=({"w": 0, "b": 0}, None), out_axes=1)({"w": Ws, "b": bs}, x)


def ensemble_heads_bug(Ws: Float[jax.Array, "E, D, C"], bs: Float[jax.Array, "E, C"],
                       x: Float[jax.Array, "B, D"]) -> Float[jax.Array, "B, E, C"]:
    return jax.vmap(_head, in_axes=({"w": 0, "b": None}, None), out_axes=1)(  # BUG: b unmapped
        {"w": Ws, "b": bs}, x)


def rbf_gram(X: Float[jax.Array, "N, D"], Y: Float[jax.Array, "M, D"], ls: float = 1.0
             ) -> Float[jax.Array, "N, M"]:
    def k(x, y):
        return jnp.exp(-0.5 * jnp.sum((x - y) ** 2) / ls ** 2)
    return jax.vmap(jax.vmap(k, in_axes=(None, 0)), in_axes=(0, None))(X, Y)


def rbf_gram_bug(X: Float[jax.Array, "N, D"], Y: Float[jax.Array, "M, D"], ls: float = 1.0
                 ) -> Float[jax.Array, "N, M"]:
    def k(x, y):
        return jnp.exp(-0.5 * jnp.sum((x - y) ** 2) / ls ** 2)
    return jax.vmap(jax.vmap(k, in_axes=(0, None)), in_axes=(None, 0))(X, Y)  # BUG: [M, N]


def value_and_grad_aux(w: Float[jax.Array, "D"], X: Float[jax.Array, "N, D"],
                       y: Float[jax.Array, "N"]) -> tuple[Float[jax.Array, "N"],
                                                          Float[jax.Array, "N, D"]]:
    def loss(w, x, t):
        pred = x @ w
        return (pred - t) ** 2, pred
    (losses, _), grads = jax.vmap(jax.value_and_grad(loss, has_aux=True),
                                  in_axes=(None, 0, 0))(w, X, y)
    return losses, grads


def value_and_grad_aux_bug(w: Float[jax.Array, "D"], X: Float[jax.Array, "N, D"],
                           y: Float[jax.Array, "N"]) -> tuple[Float[jax.Array, "N"],
                                                              Float[jax.Array, "N, D"]]:
    def loss(w, x, t):
        pred = x @ w
        return (pred - t) ** 2, pred
    (losses, _), grads = jax.vmap(jax.value_and_grad(loss, has_aux=True),
                                  in_axes=(None, 0, 0), out_axes=1)(w, X, y)  # BUG: JAX
    # raises (the scalar loss has no axis 1; the gradients would be [D, N])
    return losses, grads


# -- tree_map optimizers ----------------------------------------------------------------------


def adamw_step(w: Float[jax.Array, "D, F"], b: Float[jax.Array, "F"],
               gw: Float[jax.Array, "D, F"], gb: Float[jax.Array, "F"],
               mw: Float[jax.Array, "D, F"], mb: Float[jax.Array, "F"],
               vw: Float[jax.Array, "D, F"], vb: Float[jax.Array, "F"], step: float = 1.0,
               lr: float = 1e-3) -> tuple[Float[jax.Array, "D, F"], Float[jax.Array, "F"]]:
    params, grads = {"w": w, "b": b}, {"w": gw, "b": gb}
    m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, {"w": mw, "b": mb}, grads)
    v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, {"w": vw, "b": vb},
                               grads)
    new = jax.tree_util.tree_map(
        lambda p, m, v: p - lr * ((m / (1 - 0.9 ** step)) / (jnp.sqrt(v / (1 - 0.999 ** step))
                                                               + 1e-8) + 0.01 * p),
        params, m, v)
    return new["w"], new["b"]


def adamw_step_bug(w: Float[jax.Array, "D, F"], b: Float[jax.Array, "F"],
                   gw: Float[jax.Array, "D, F"], gb: Float[jax.Array, "F"],
                   mw: Float[jax.Array, "D, F"], mb: Float[jax.Array, "F"],
                   vw: Float[jax.Array, "D, F"], vb: Float[jax.Array, "F"], step: float = 1.0,
                   lr: float = 1e-3) -> tuple[Float[jax.Array, "D, F"], Float[jax.Array, "F"]]:
    params = {"w": w, "b": b}
    leaves, treedef = jax.tree_util.tree_flatten(params)
    # BUG: tree_leaves sorts the dict's keys: the leaves are [b, w], the grads [gw, gb]
    new = [p - lr * g for p, g in zip(leaves, [gw, gb], strict=True)]
    new_params = jax.tree_util.tree_unflatten(treedef, new)
    return new_params["w"], new_params["b"]


def adafactor_update(g: Float[jax.Array, "D, F"], v_row: Float[jax.Array, "D"],
                     v_col: Float[jax.Array, "F"], decay: float = 0.8
                     ) -> tuple[Float[jax.Array, "D, F"], Float[jax.Array, "D"],
                                Float[jax.Array, "F"]]:
    g2 = g * g + 1e-30
    v_row = decay * v_row + (1 - decay) * jnp.mean(g2, axis=1)
    v_col = decay * v_col + (1 - decay) * jnp.mean(g2, axis=0)
    v_hat = jnp.outer(v_row, v_col) / jnp.mean(v_row)
    update = g * lax.rsqrt(v_hat)
    rms = jnp.sqrt(jnp.mean(update ** 2))
    return update / jnp.maximum(1.0, rms), v_row, v_col


def adafactor_update_bug(g: Float[jax.Array, "D, F"], v_row: Float[jax.Array, "D"],
                         v_col: Float[jax.Array, "F"], decay: float = 0.8
                         ) -> tuple[Float[jax.Array, "D, F"], Float[jax.Array, "D"],
                                    Float[jax.Array, "F"]]:
    g2 = g * g + 1e-30
    v_row = decay * v_row + (1 - decay) * jnp.mean(g2, axis=0)  # BUG: the column means
    v_col = decay * v_col + (1 - decay) * jnp.mean(g2, axis=0)
    v_hat = jnp.outer(v_row, v_col) / jnp.mean(v_row)
    update = g * lax.rsqrt(v_hat)
    rms = jnp.sqrt(jnp.mean(update ** 2))
    return update / jnp.maximum(1.0, rms), v_row, v_col


def lion_step(params: Float[jax.Array, "L, D"], grads: Float[jax.Array, "L, D"],
              m: Float[jax.Array, "L, D"], lr: Float[jax.Array, "L"]
              ) -> tuple[Float[jax.Array, "L, D"], Float[jax.Array, "L, D"]]:
    update = jnp.sign(0.9 * m + 0.1 * grads)
    new_p = params - lr[:, None] * (update + 0.1 * params)
    return new_p, 0.99 * m + 0.01 * grads


def lion_step_bug(params: Float[jax.Array, "L, D"], grads: Float[jax.Array, "L, D"],
                  m: Float[jax.Array, "L, D"], lr: Float[jax.Array, "L"]
                  ) -> tuple[Float[jax.Array, "L, D"], Float[jax.Array, "L, D"]]:
    update = jnp.sign(0.9 * m + 0.1 * grads)
    new_p = params - lr * (update + 0.1 * params)  # BUG: per-layer rates on the feature axis
    return new_p, 0.99 * m + 0.01 * grads


def global_norm_clip(gw: Float[jax.Array, "D, F"], gb: Float[jax.Array, "F"],
                     max_norm: float = 1.0) -> tuple[Float[jax.Array, "D, F"],
                                                     Float[jax.Array, "F"]]:
    grads = {"w": gw, "b": gb}
    norm = jnp.sqrt(sum(jnp.sum(x ** 2) for x in jax.tree_util.tree_leaves(grads)))
    scale = jnp.minimum(1.0, max_norm / (norm + 1e-6))
    out = jax.tree_util.tree_map(lambda x: x * scale, grads)
    return out["w"], out["b"]


def global_norm_clip_bug(gw: Float[jax.Array, "D, F"], gb: Float[jax.Array, "F"],
                         max_norm: float = 1.0) -> tuple[Float[jax.Array, "D, F"],
                                                         Float[jax.Array, "F"]]:
    grads = {"w": gw, "b": gb}
    norm = jnp.sqrt(sum(jnp.sum(x ** 2, axis=-1) for x in jax.tree_util.tree_leaves(grads)))
    scale = jnp.minimum(1.0, max_norm / (norm + 1e-6))  # BUG: per-row norms: [D] + []
    out = jax.tree_util.tree_map(lambda x: x * scale, grads)
    return out["w"], out["b"]


# -- graph networks with segment ops ----------------------------------------------------------


def gat_layer(h: Float[jax.Array, "N, F"], senders: Int[jax.Array, "E"],
              receivers: Int[jax.Array, "E"], a_src: Float[jax.Array, "F"],
              a_dst: Float[jax.Array, "F"]) -> Float[jax.Array, "N, F"]:
    n = h.shape[0]
    e = jax.nn.leaky_relu(h[senders] @ a_src + h[receivers] @ a_dst, 0.2)
    e = e - jax.ops.segment_max(e, receivers, num_segments=n)[receivers]
    w = jnp.exp(e)
    denom = jax.ops.segment_sum(w, receivers, num_segments=n)[receivers]
    alpha = w / (denom + 1e-9)
    return jax.ops.segment_sum(alpha[:, None] * h[senders], receivers, num_segments=n)


def gat_layer_bug(h: Float[jax.Array, "N, F"], senders: Int[jax.Array, "E"],
                  receivers: Int[jax.Array, "E"], a_src: Float[jax.Array, "F"],
                  a_dst: Float[jax.Array, "F"]) -> Float[jax.Array, "N, F"]:
    n = h.shape[0]
    e = jax.nn.leaky_relu(h[senders] @ a_src + h[receivers] @ a_dst, 0.2)
    e = e - jax.ops.segment_max(e, receivers, num_segments=n)  # BUG: per node, not per edge
    w = jnp.exp(e)
    denom = jax.ops.segment_sum(w, receivers, num_segments=n)[receivers]
    alpha = w / (denom + 1e-9)
    return jax.ops.segment_sum(alpha[:, None] * h[senders], receivers, num_segments=n)


def graph_readout(nodes: Float[jax.Array, "N, F"], graph_ids: Int[jax.Array, "N"],
                  w: Float[jax.Array, "F, C"], G: int) -> Float[jax.Array, "G, C"]:
    sums = jax.ops.segment_sum(nodes, graph_ids, num_segments=G)
    counts = jax.ops.segment_sum(jnp.ones((nodes.shape[0], 1)), graph_ids, num_segments=G)
    return (sums / jnp.maximum(counts, 1.0)) @ w


def graph_readout_bug(nodes: Float[jax.Array, "N, F"], graph_ids: Int[jax.Array, "N"],
                      w: Float[jax.Array, "F, C"], G: int) -> Float[jax.Array, "G, C"]:
    sums = jax.ops.segment_sum(nodes, graph_ids, num_segments=G)
    counts = jax.ops.segment_sum(jnp.ones(nodes.shape[0]), graph_ids, num_segments=G)
    return (sums / jnp.maximum(counts, 1.0)) @ w  # BUG: [G, F] / [G]


# -- sampling: top-k, top-p, gumbel, a policy ------------------------------------------------


def top_k_sample(key: jax.Array, logits: Float[jax.Array, "B, V"]) -> Int[jax.Array, "B"]:
    vals, idx = lax.top_k(logits, 5)
    choice = jax.random.categorical(key, vals, axis=-1)
    return jnp.take_along_axis(idx, choice[:, None], axis=-1)[:, 0]


def top_k_sample_bug(key: jax.Array, logits: Float[jax.Array, "B, V"]) -> Int[jax.Array, "B"]:
    vals, idx = lax.top_k(logits, 5)
    choice = jax.random.categorical(key, vals, axis=0)  # BUG: samples a row per candidate
    return jnp.take_along_axis(idx, choice[:, None], axis=-1)[:, 0]


def top_p_filter(logits: Float[jax.Array, "B, V"], p: float = 0.9) -> Float[jax.Array, "B, V"]:
    sorted_logits = jnp.sort(logits, axis=-1)[..., ::-1]
    probs = jax.nn.softmax(sorted_logits, axis=-1)
    cum = jnp.cumsum(probs, axis=-1)
    cutoff_mask = cum - probs > p
    threshold = jnp.min(jnp.where(cutoff_mask, jnp.inf, sorted_logits), axis=-1, keepdims=True)
    return jnp.where(logits < threshold, -jnp.inf, logits)


def top_p_filter_bug(logits: Float[jax.Array, "B, V"], p: float = 0.9
                     ) -> Float[jax.Array, "B, V"]:
    sorted_logits = jnp.sort(logits, axis=-1)[..., ::-1]
    probs = jax.nn.softmax(sorted_logits, axis=-1)
    cum = jnp.cumsum(probs, axis=-1)
    cutoff_mask = cum - probs > p
    threshold = jnp.min(jnp.where(cutoff_mask, jnp.inf, sorted_logits), axis=-1)  # BUG: [B]
    return jnp.where(logits < threshold, -jnp.inf, logits)


def gumbel_top_k(key: jax.Array, logits: Float[jax.Array, "B, V"]) -> Int[jax.Array, "B, 3"]:
    perturbed = logits + jax.random.gumbel(key, logits.shape)
    return lax.top_k(perturbed, 3)[1]


def gumbel_top_k_bug(key: jax.Array, logits: Float[jax.Array, "B, V"]
                     ) -> Int[jax.Array, "B, 3"]:
    perturbed = logits + jax.random.gumbel(key, logits.shape[:1])  # BUG: one draw per row
    return lax.top_k(perturbed, 3)[1]


def policy_act(key: jax.Array, obs: Float[jax.Array, "B, O"], w: Float[jax.Array, "O, A"]
               ) -> tuple[Int[jax.Array, "B"], Float[jax.Array, "B"], Float[jax.Array, "B"]]:
    logits = obs @ w
    k_act, k_eps = jax.random.split(key)
    greedy = jnp.argmax(logits, axis=-1)
    sampled = jax.random.categorical(k_act, logits)
    explore = jax.random.uniform(k_eps, (obs.shape[0],)) < 0.05
    action = jnp.where(explore, sampled, greedy)
    logp = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], axis=-1)[:, 0]
    entropy = -jnp.sum(jax.nn.softmax(logits) * jax.nn.log_softmax(logits), axis=-1)
    return action, logp, entropy


def policy_act_bug(key: jax.Array, obs: Float[jax.Array, "B, O"], w: Float[jax.Array, "O, A"]
                   ) -> tuple[Int[jax.Array, "B"], Float[jax.Array, "B"],
                              Float[jax.Array, "B"]]:
    logits = obs @ w
    k_act, k_eps = jax.random.split(key)
    greedy = jnp.argmax(logits, axis=-1)
    sampled = jax.random.categorical(k_act, logits)
    explore = jax.random.uniform(k_eps, (obs.shape[1],)) < 0.05  # BUG: one coin per feature
    action = jnp.where(explore, sampled, greedy)
    logp = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], axis=-1)[:, 0]
    entropy = -jnp.sum(jax.nn.softmax(logits) * jax.nn.log_softmax(logits), axis=-1)
    return action, logp, entropy


def mixture_of_experts(x: Float[jax.Array, "T, D"], Wg: Float[jax.Array, "D, E"],
                       W: Float[jax.Array, "E, D, F"]) -> Float[jax.Array, "T, F"]:
    gates = jax.nn.softmax(x @ Wg, axis=-1)
    vals, idx = lax.top_k(gates, 2)
    vals = vals / vals.sum(-1, keepdims=True)
    outs = jnp.einsum("td,edf->tef", x, W)
    picked = jnp.take_along_axis(outs, idx[..., None], axis=1)
    return jnp.sum(vals[..., None] * picked, axis=1)


def mixture_of_experts_bug(x: Float[jax.Array, "T, D"], Wg: Float[jax.Array, "D, E"],
                           W: Float[jax.Array, "E, D, F"]) -> Float[jax.Array, "T, F"]:
    gates = jax.nn.softmax(x @ Wg, axis=-1)
    vals, idx = lax.top_k(gates, 2)
    vals = vals / vals.sum(-1, keepdims=True)
    outs = jnp.einsum("td,edf->tef", x, W)
    picked = jnp.take_along_axis(outs, idx[..., None], axis=1)
    return jnp.sum(vals[:, None] * picked, axis=1)  # BUG: [T, 1, 2] against [T, 2, F]


def clip_loss(img: Float[jax.Array, "B, D"], txt: Float[jax.Array, "B, D"],
              log_temp: Float[jax.Array, ""]) -> Float[jax.Array, ""]:
    img = img / jnp.linalg.norm(img, axis=-1, keepdims=True)
    txt = txt / jnp.linalg.norm(txt, axis=-1, keepdims=True)
    logits = img @ txt.T * jnp.exp(log_temp)
    labels = jax.nn.one_hot(jnp.arange(img.shape[0]), img.shape[0])
    li = -jnp.sum(labels * jax.nn.log_softmax(logits, axis=-1), axis=-1)
    lt = -jnp.sum(labels * jax.nn.log_softmax(logits.T, axis=-1), axis=-1)
    return jnp.mean(li + lt) / 2


def clip_loss_bug(img: Float[jax.Array, "B, D"], txt: Float[jax.Array, "B, D"],
                  log_temp: Float[jax.Array, ""]) -> Float[jax.Array, ""]:
    img = img / jnp.linalg.norm(img, axis=-1, keepdims=True)
    txt = txt / jnp.linalg.norm(txt, axis=-1, keepdims=True)
    logits = img @ txt.T * jnp.exp(log_temp)
    labels = jax.nn.one_hot(jnp.arange(img.shape[0]), img.shape[1])  # BUG: D classes
    li = -jnp.sum(labels * jax.nn.log_softmax(logits, axis=-1), axis=-1)
    lt = -jnp.sum(labels * jax.nn.log_softmax(logits.T, axis=-1), axis=-1)
    return jnp.mean(li + lt) / 2


def masked_token_loss(logits: Float[jax.Array, "B, T, V"], targets: Int[jax.Array, "B, T"],
                      mask: Bool[jax.Array, "B, T"], smoothing: float = 0.1
                      ) -> Float[jax.Array, ""]:
    V = logits.shape[-1]
    soft = jax.nn.one_hot(targets, V) * (1.0 - smoothing) + smoothing / V
    ce = -jnp.sum(soft * jax.nn.log_softmax(logits), axis=-1)
    w = mask.astype(ce.dtype)
    return jnp.sum(ce * w) / jnp.maximum(jnp.sum(w), 1.0)


def masked_token_loss_bug(logits: Float[jax.Array, "B, T, V"], targets: Int[jax.Array, "B, T"],
                          mask: Bool[jax.Array, "B, T"], smoothing: float = 0.1
                          ) -> Float[jax.Array, ""]:
    V = logits.shape[-1]
    soft = jax.nn.one_hot(targets, V) * (1.0 - smoothing) + smoothing / V
    ce = -jnp.sum(soft * jax.nn.log_softmax(logits), axis=-1)
    w = mask.astype(ce.dtype)
    return jnp.sum(ce * w) / jnp.maximum(jnp.sum(w, axis=-1), 1.0)  # BUG: per-row counts


# -- blockwise attention with dynamic_slice, decoding buffers --------------------------------


def blockwise_attention(q: Float[jax.Array, "T, K"], k: Float[jax.Array, "4*NB, K"],
                        v: Float[jax.Array, "4*NB, K"]) -> Float[jax.Array, "T, K"]:
    T, d = q.shape
    nb = k.shape[0] // 4

    def body(i, carry):
        o, m, denom = carry
        kb = lax.dynamic_slice(k, (i * 4, 0), (4, d))
        vb = lax.dynamic_slice(v, (i * 4, 0), (4, d))
        s = q @ kb.T / math.sqrt(d)
        m_new = jnp.maximum(m, s.max(-1))
        p = jnp.exp(s - m_new[:, None])
        corr = jnp.exp(m - m_new)
        return o * corr[:, None] + p @ vb, m_new, denom * corr + p.sum(-1)
    init = (jnp.zeros((T, d)), jnp.full((T,), -jnp.inf), jnp.zeros((T,)))
    o, _, denom = lax.fori_loop(0, nb, body, init)
    return o / denom[:, None]


def blockwise_attention_bug(q: Float[jax.Array, "T, K"], k: Float[jax.Array, "4*NB, K"],
                            v: Float[jax.Array, "4*NB, K"]) -> Float[jax.Array, "T, K"]:
    T, d = q.shape
    nb = k.shape[0] // 4

    def body(i, carry):
        o, m, denom = carry
        kb = lax.dynamic_slice(k, (i * 4, 0), (4, d))
        vb = lax.dynamic_slice(v, (i * 4, 0), (4, d))
        s = q @ kb.T / math.sqrt(d)
        m_new = jnp.maximum(m, s.max(-1))
        p = jnp.exp(s - m_new[:, None])
        corr = jnp.exp(m - m_new)
        return o * corr[:, None] + p @ vb, m_new, denom * corr + p.sum(0)  # BUG: sums queries
    init = (jnp.zeros((T, d)), jnp.full((T,), -jnp.inf), jnp.zeros((T,)))
    o, _, denom = lax.fori_loop(0, nb, body, init)
    return o / denom[:, None]


def ring_attention_scan(q: Float[jax.Array, "T, K"], k: Float[jax.Array, "4*NB, K"],
                        v: Float[jax.Array, "4*NB, K"]) -> Float[jax.Array, "T, K"]:
    d = q.shape[-1]
    kb = k.reshape(-1, 4, d)
    vb = v.reshape(-1, 4, d)

    def step(carry, blk):
        num, den = carry
        kk, vv = blk
        p = jnp.exp(q @ kk.T / math.sqrt(d))
        return (num + p @ vv, den + p.sum(-1, keepdims=True)), None
    (num, den), _ = lax.scan(step, (jnp.zeros_like(q), jnp.zeros((q.shape[0], 1))), (kb, vb))
    return num / den


def ring_attention_scan_bug(q: Float[jax.Array, "T, K"], k: Float[jax.Array, "4*NB, K"],
                            v: Float[jax.Array, "4*NB, K"]) -> Float[jax.Array, "T, K"]:
    d = q.shape[-1]
    kb = k.reshape(-1, 4, d)
    vb = v.reshape(-1, 4, d)

    def step(carry, blk):
        num, den = carry
        kk, vv = blk
        p = jnp.exp(q @ kk / math.sqrt(d))  # BUG: the key block not transposed
        return (num + p @ vv, den + p.sum(-1, keepdims=True)), None
    (num, den), _ = lax.scan(step, (jnp.zeros_like(q), jnp.zeros((q.shape[0], 1))), (kb, vb))
    return num / den


def decode_step_cache(q: Float[jax.Array, "B, 1, H, K"], cache_k: Float[jax.Array, "B, S, H, K"],
                      cache_v: Float[jax.Array, "B, S, H, K"], pos: Int[jax.Array, ""]
                      ) -> Float[jax.Array, "B, 1, H, K"]:
    valid = jnp.arange(cache_k.shape[1]) <= pos
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, cache_k) / math.sqrt(q.shape[-1])
    logits = jnp.where(valid[None, None, None, :], logits, jnp.finfo(logits.dtype).min)
    return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, axis=-1), cache_v)


def decode_step_cache_bug(q: Float[jax.Array, "B, 1, H, K"],
                          cache_k: Float[jax.Array, "B, S, H, K"],
                          cache_v: Float[jax.Array, "B, S, H, K"], pos: Int[jax.Array, ""]
                          ) -> Float[jax.Array, "B, 1, H, K"]:
    valid = jnp.arange(cache_k.shape[1]) <= pos
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, cache_k) / math.sqrt(q.shape[-1])
    logits = jnp.where(valid[None, :, None, None], logits, jnp.finfo(logits.dtype).min)  # BUG
    return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, axis=-1), cache_v)


def greedy_decode(tokens: Int[jax.Array, "B, T"], emb: Float[jax.Array, "V, D"],
                  W: Float[jax.Array, "D, V"]) -> Int[jax.Array, "B, T"]:
    def body(i, toks):
        h = jnp.mean(emb[toks], axis=1)
        nxt = jnp.argmax(h @ W, axis=-1)
        return toks.at[:, i].set(nxt)
    return lax.fori_loop(1, tokens.shape[1], body, tokens)


def greedy_decode_bug(tokens: Int[jax.Array, "B, T"], emb: Float[jax.Array, "V, D"],
                      W: Float[jax.Array, "D, V"]) -> Int[jax.Array, "B, T"]:
    def body(i, toks):
        h = jnp.mean(emb[toks], axis=1)
        nxt = jnp.argmax(h @ W, axis=-1)
        return toks.at[i].set(nxt)  # BUG: writes row i, not column i
    return lax.fori_loop(1, tokens.shape[1], body, tokens)


def trajectory_buffer(x0: Float[jax.Array, "B, D"], W: Float[jax.Array, "D, D"], T: int
                      ) -> Float[jax.Array, "T, B, D"]:
    buf = jnp.zeros((T, *x0.shape))

    def body(i, state):
        x, buf = state
        x = jnp.tanh(x @ W)
        return x, lax.dynamic_update_slice(buf, x[None], (i, 0, 0))
    _, buf = lax.fori_loop(0, T, body, (x0, buf))
    return buf


def trajectory_buffer_bug(x0: Float[jax.Array, "B, D"], W: Float[jax.Array, "D, D"], T: int
                          ) -> Float[jax.Array, "T, B, D"]:
    buf = jnp.zeros((T, *x0.shape))

    def body(i, state):
        x, buf = state
        x = jnp.tanh(x @ W)
        return x, lax.dynamic_update_slice(buf, x.T[None], (i, 0, 0))  # BUG: [1, D, B]
    _, buf = lax.fori_loop(0, T, body, (x0, buf))
    return buf


# -- FFT long convolutions (S4/Hyena), spectral layers ----------------------------------------


def fft_long_conv(u: Float[jax.Array, "B, L, H"], K: Float[jax.Array, "H, L"],
                  D: Float[jax.Array, "H"]) -> Float[jax.Array, "B, L, H"]:
    L = u.shape[1]
    uf = jnp.fft.rfft(u, n=2 * L, axis=1)
    kf = jnp.fft.rfft(K.T, n=2 * L, axis=0)
    y = jnp.fft.irfft(uf * kf[None], n=2 * L, axis=1)[:, :L]
    return y + u * D


def fft_long_conv_bug(u: Float[jax.Array, "B, L, H"], K: Float[jax.Array, "H, L"],
                      D: Float[jax.Array, "H"]) -> Float[jax.Array, "B, L, H"]:
    L = u.shape[1]
    uf = jnp.fft.rfft(u, n=2 * L, axis=1)
    kf = jnp.fft.rfft(K.T, n=2 * L, axis=0)
    y = jnp.fft.irfft(uf * kf[None], n=2 * L, axis=1)  # BUG: the causal half not sliced off
    return y + u * D


def hyena_filter(u: Float[jax.Array, "B, D, L"], k: Float[jax.Array, "D, L"],
                 bias: Float[jax.Array, "D"]) -> Float[jax.Array, "B, D, L"]:
    seqlen = u.shape[-1]
    fft_size = 2 * seqlen
    k_f = jnp.fft.rfft(k, n=fft_size) / fft_size
    u_f = jnp.fft.rfft(u, n=fft_size)
    y = jnp.fft.irfft(u_f * k_f, n=fft_size, norm="forward")[..., :seqlen]
    return y + u * bias[:, None]


def hyena_filter_bug(u: Float[jax.Array, "B, D, L"], k: Float[jax.Array, "D, L"],
                     bias: Float[jax.Array, "D"]) -> Float[jax.Array, "B, D, L"]:
    seqlen = u.shape[-1]
    fft_size = 2 * seqlen
    k_f = jnp.fft.rfft(k, n=fft_size) / fft_size
    u_f = jnp.fft.rfft(u, n=fft_size)
    y = jnp.fft.irfft(u_f * k_f, n=fft_size, norm="forward")[..., :seqlen]
    return y + u * bias  # BUG: the per-channel bias on the time axis


def rope_complex(x: Float[jax.Array, "B, T, H, 2*P"]) -> Float[jax.Array, "B, T, H, 2*P"]:
    B, T, H, D = x.shape
    freqs = 1.0 / (10000.0 ** (jnp.arange(0, D, 2) / D))
    angles = jnp.outer(jnp.arange(T), freqs)
    rot = jnp.exp(1j * angles)
    xc = lax.complex(x[..., 0::2], x[..., 1::2])
    out = xc * rot[None, :, None, :]
    return jnp.stack([out.real, out.imag], axis=-1).reshape(B, T, H, D)


def rope_complex_bug(x: Float[jax.Array, "B, T, H, 2*P"]) -> Float[jax.Array, "B, T, H, 2*P"]:
    B, T, H, D = x.shape
    freqs = 1.0 / (10000.0 ** (jnp.arange(0, D, 2) / D))
    angles = jnp.outer(jnp.arange(T), freqs)
    rot = jnp.exp(1j * angles)
    xc = lax.complex(x[..., 0::2], x[..., 1::2])
    out = xc * rot[None, :, :]  # BUG: [1, T, P] against [B, T, H, P]
    return jnp.stack([out.real, out.imag], axis=-1).reshape(B, T, H, D)


# -- NeRF and Gaussian splatting ---------------------------------------------------------------


def volume_render(rays_o: Float[jax.Array, "R, 3"], rays_d: Float[jax.Array, "R, 3"],
                  t: Float[jax.Array, "R, S"], W: Float[jax.Array, "3, 4"]
                  ) -> tuple[Float[jax.Array, "R, 3"], Float[jax.Array, "R"]]:
    pts = rays_o[:, None, :] + rays_d[:, None, :] * t[..., None]
    raw = pts @ W
    rgb, sigma = jax.nn.sigmoid(raw[..., :3]), jax.nn.relu(raw[..., 3])
    deltas = jnp.concatenate([jnp.diff(t, axis=-1), jnp.full_like(t[..., :1], 1e10)], axis=-1)
    alpha = 1.0 - jnp.exp(-sigma * deltas)
    trans = jnp.cumprod(1.0 - alpha + 1e-10, axis=-1)
    trans = jnp.concatenate([jnp.ones_like(trans[..., :1]), trans[..., :-1]], axis=-1)
    weights = alpha * trans
    return jnp.sum(weights[..., None] * rgb, axis=-2), jnp.sum(weights * t, axis=-1)


def volume_render_bug(rays_o: Float[jax.Array, "R, 3"], rays_d: Float[jax.Array, "R, 3"],
                      t: Float[jax.Array, "R, S"], W: Float[jax.Array, "3, 4"]
                      ) -> tuple[Float[jax.Array, "R, 3"], Float[jax.Array, "R"]]:
    pts = rays_o[:, None, :] + rays_d[:, None, :] * t[..., None]
    raw = pts @ W
    rgb, sigma = jax.nn.sigmoid(raw[..., :3]), jax.nn.relu(raw[..., 3])
    deltas = jnp.diff(t, axis=-1)  # BUG: S - 1 intervals for S samples
    alpha = 1.0 - jnp.exp(-sigma * deltas)
    trans = jnp.cumprod(1.0 - alpha + 1e-10, axis=-1)
    trans = jnp.concatenate([jnp.ones_like(trans[..., :1]), trans[..., :-1]], axis=-1)
    weights = alpha * trans
    return jnp.sum(weights[..., None] * rgb, axis=-2), jnp.sum(weights * t, axis=-1)


def posenc(x: Float[jax.Array, "N, 3"], L: int) -> Float[jax.Array, "N, 3 + 6*L"]:
    scales = 2.0 ** jnp.arange(L)
    xb = (x[..., None, :] * scales[:, None]).reshape(x.shape[0], -1)
    return jnp.concatenate([x, jnp.sin(xb), jnp.cos(xb)], axis=-1)


def posenc_bug(x: Float[jax.Array, "N, 3"], L: int) -> Float[jax.Array, "N, 3 + 6*L"]:
    scales = 2.0 ** jnp.arange(L)
    xb = (x[..., None, :] * scales[:, None]).reshape(x.shape[0], -1)
    return jnp.concatenate([x, jnp.sin(xb), jnp.cos(xb)], axis=0)  # BUG: stacked as rows


def _quat_to_rot(q):
    q = q / jnp.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return jnp.stack([
        jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        jnp.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        jnp.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], axis=-2)


def splat_cov2d(scales: Float[jax.Array, "N, 3"], quats: Float[jax.Array, "N, 4"],
                J: Float[jax.Array, "N, 2, 3"], W: Float[jax.Array, "3, 3"]
                ) -> Float[jax.Array, "N, 2, 2"]:
    R = _quat_to_rot(quats)
    M = R * scales[:, None, :]
    cov3d = jnp.einsum("nij,nkj->nik", M, M)
    T = J @ W
    return T @ cov3d @ jnp.swapaxes(T, -1, -2) + 0.3 * jnp.eye(2)


def splat_cov2d_bug(scales: Float[jax.Array, "N, 3"], quats: Float[jax.Array, "N, 4"],
                    J: Float[jax.Array, "N, 2, 3"], W: Float[jax.Array, "3, 3"]
                    ) -> Float[jax.Array, "N, 2, 2"]:
    R = _quat_to_rot(quats)
    M = R * scales[:, None, :]
    cov3d = jnp.einsum("nij,nkj->nik", M, M)
    T = J @ W
    return T @ cov3d @ T.T + 0.3 * jnp.eye(2)  # BUG: .T reverses all three axes


# -- state-space filtering and Gaussian processes ------------------------------------------------


def kalman_filter(ys: Float[jax.Array, "T, M"], F: Float[jax.Array, "S, S"],
                  Hm: Float[jax.Array, "M, S"], Q: Float[jax.Array, "S, S"],
                  R: Float[jax.Array, "M, M"], mu0: Float[jax.Array, "S"],
                  P0: Float[jax.Array, "S, S"]) -> Float[jax.Array, "T, S"]:
    def step(carry, y):
        mu, P = carry
        mu, P = F @ mu, F @ P @ F.T + Q
        Sm = Hm @ P @ Hm.T + R
        K = jnp.linalg.solve(Sm, Hm @ P).T
        mu = mu + K @ (y - Hm @ mu)
        P = (jnp.eye(P.shape[0]) - K @ Hm) @ P
        return (mu, P), mu
    _, mus = lax.scan(step, (mu0, P0), ys)
    return mus


def kalman_filter_bug(ys: Float[jax.Array, "T, M"], F: Float[jax.Array, "S, S"],
                      Hm: Float[jax.Array, "M, S"], Q: Float[jax.Array, "S, S"],
                      R: Float[jax.Array, "M, M"], mu0: Float[jax.Array, "S"],
                      P0: Float[jax.Array, "S, S"]) -> Float[jax.Array, "T, S"]:
    def step(carry, y):
        mu, P = carry
        mu, P = F @ mu, F @ P @ F.T + Q
        Sm = Hm @ P @ Hm.T + R
        K = P @ Hm @ jnp.linalg.inv(Sm)  # BUG: H where H^T belongs
        mu = mu + K @ (y - Hm @ mu)
        P = (jnp.eye(P.shape[0]) - K @ Hm) @ P
        return (mu, P), mu
    _, mus = lax.scan(step, (mu0, P0), ys)
    return mus


def gp_log_marginal(X: Float[jax.Array, "N, D"], y: Float[jax.Array, "N"],
                    ls: float = 1.0, noise: float = 0.1) -> Float[jax.Array, ""]:
    sq = jnp.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    K = jnp.exp(-0.5 * sq / ls ** 2) + noise * jnp.eye(X.shape[0])
    L = jnp.linalg.cholesky(K)
    alpha = jax.scipy.linalg.cho_solve((L, True), y)
    return (-0.5 * y @ alpha - jnp.sum(jnp.log(jnp.diag(L)))
            - 0.5 * X.shape[0] * jnp.log(2 * jnp.pi))


def gp_log_marginal_bug(X: Float[jax.Array, "N, D"], y: Float[jax.Array, "N"],
                        ls: float = 1.0, noise: float = 0.1) -> Float[jax.Array, ""]:
    sq = jnp.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=1)  # BUG: sums the points
    K = jnp.exp(-0.5 * sq / ls ** 2) + noise * jnp.eye(X.shape[0])
    L = jnp.linalg.cholesky(K)
    alpha = jax.scipy.linalg.cho_solve((L, True), y)
    return (-0.5 * y @ alpha - jnp.sum(jnp.log(jnp.diag(L)))
            - 0.5 * X.shape[0] * jnp.log(2 * jnp.pi))


def batched_gauss_nll(K: Float[jax.Array, "B, N, N"], y: Float[jax.Array, "B, N"]
                      ) -> Float[jax.Array, "B"]:
    _, logdet = jnp.linalg.slogdet(K)
    alpha = jnp.linalg.solve(K, y[..., None])[..., 0]
    return 0.5 * (jnp.sum(y * alpha, axis=-1) + logdet + y.shape[-1] * jnp.log(2 * jnp.pi))


def batched_gauss_nll_bug(K: Float[jax.Array, "B, N, N"], y: Float[jax.Array, "B, N"]
                          ) -> Float[jax.Array, "B"]:
    _, logdet = jnp.linalg.slogdet(K)
    alpha = jnp.linalg.solve(K, y[..., None])[..., 0]
    return 0.5 * (y @ alpha + logdet + y.shape[-1] * jnp.log(2 * jnp.pi))  # BUG: [B,N]@[B,N]


def conjugate_gradient(A: Float[jax.Array, "N, N"], b: Float[jax.Array, "N"]
                       ) -> Float[jax.Array, "N"]:
    def cond(state):
        _, _, _, rs, k = state
        return (rs > 1e-10) & (k < 50)

    def body(state):
        x, r, p, rs, k = state
        Ap = A @ p
        alpha = rs / (p @ Ap)
        x, r = x + alpha * p, r - alpha * Ap
        rs_new = r @ r
        return x, r, r + (rs_new / rs) * p, rs_new, k + 1
    x0 = jnp.zeros_like(b)
    out = lax.while_loop(cond, body, (x0, b, b, b @ b, 0))
    return out[0]


def conjugate_gradient_bug(A: Float[jax.Array, "N, N"], b: Float[jax.Array, "N"]
                           ) -> Float[jax.Array, "N"]:
    def cond(state):
        _, _, _, rs, k = state
        return (rs > 1e-10) & (k < 50)

    def body(state):
        x, r, p, rs, k = state
        Ap = A @ p
        alpha = rs / (p @ Ap)
        x, r = x + alpha * p, r - alpha * Ap
        rs_new = r * r  # BUG: the residual's squares, not its squared norm
        return x, r, r + (rs_new / rs) * p, rs_new, k + 1
    x0 = jnp.zeros_like(b)
    out = lax.while_loop(cond, body, (x0, b, b, b @ b, 0))
    return out[0]


def vtrace(log_rhos: Float[jax.Array, "T, B"], discounts: Float[jax.Array, "T, B"],
           rewards: Float[jax.Array, "T, B"], values: Float[jax.Array, "T, B"],
           bootstrap: Float[jax.Array, "B"]) -> Float[jax.Array, "T, B"]:
    rhos = jnp.minimum(1.0, jnp.exp(log_rhos))
    next_values = jnp.concatenate([values[1:], bootstrap[None]], axis=0)
    deltas = rhos * (rewards + discounts * next_values - values)

    def step(acc, inp):
        delta, disc, c = inp
        acc = delta + disc * c * acc
        return acc, acc
    _, vs_minus_v = lax.scan(step, jnp.zeros_like(bootstrap), (deltas, discounts, rhos),
                             reverse=True)
    return values + vs_minus_v


def vtrace_bug(log_rhos: Float[jax.Array, "T, B"], discounts: Float[jax.Array, "T, B"],
               rewards: Float[jax.Array, "T, B"], values: Float[jax.Array, "T, B"],
               bootstrap: Float[jax.Array, "B"]) -> Float[jax.Array, "T, B"]:
    rhos = jnp.minimum(1.0, jnp.exp(log_rhos))
    next_values = jnp.concatenate([values[1:], bootstrap], axis=0)  # BUG: [B] joined to [T-1, B]
    deltas = rhos * (rewards + discounts * next_values - values)

    def step(acc, inp):
        delta, disc, c = inp
        acc = delta + disc * c * acc
        return acc, acc
    _, vs_minus_v = lax.scan(step, jnp.zeros_like(bootstrap), (deltas, discounts, rhos),
                             reverse=True)
    return values + vs_minus_v


# -- control flow, pooling, convolutions ---------------------------------------------------------


def stochastic_depth(key: jax.Array, x: Float[jax.Array, "B, T, D"],
                     w: Float[jax.Array, "D, D"], train: bool) -> Float[jax.Array, "B, T, D"]:
    def drop(x):
        keep = jax.random.bernoulli(key, 0.9, (x.shape[0], 1, 1))
        return x + jnp.where(keep, jax.nn.gelu(x @ w) / 0.9, 0.0)

    def full(x):
        return x + jax.nn.gelu(x @ w)
    return lax.cond(train, drop, full, x)


def stochastic_depth_bug(key: jax.Array, x: Float[jax.Array, "B, T, D"],
                         w: Float[jax.Array, "D, D"], train: bool
                         ) -> Float[jax.Array, "B, T, D"]:
    def drop(x):
        keep = jax.random.bernoulli(key, 0.9, (x.shape[0], 1))  # BUG: [B, 1] against [B, T, D]
        return x + jnp.where(keep, jax.nn.gelu(x @ w) / 0.9, 0.0)

    def full(x):
        return x + jax.nn.gelu(x @ w)
    return lax.cond(train, drop, full, x)


def max_pool_2x2(x: Float[jax.Array, "N, 2*H, 2*W, C"]) -> Float[jax.Array, "N, H, W, C"]:
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def max_pool_2x2_bug(x: Float[jax.Array, "N, 2*H, 2*W, C"]) -> Float[jax.Array, "N, H, W, C"]:
    return lax.reduce_window(x, -jnp.inf, lax.max, (2, 2, 1, 1), (2, 2, 1, 1), "VALID")  # BUG


def depthwise_conv(x: Float[jax.Array, "N, H, W, C"], w: Float[jax.Array, "3, 3, 1, C"]
                   ) -> Float[jax.Array, "N, H, W, C"]:
    return lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                    feature_group_count=x.shape[-1])


def depthwise_conv_bug(x: Float[jax.Array, "N, H, W, C"], w: Float[jax.Array, "3, 3, 1, C"]
                       ) -> Float[jax.Array, "N, H, W, C"]:
    return lax.conv_general_dilated(x, w, (1, 1), "SAME",  # BUG: no feature_group_count
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))


def spectral_conv2d(x: Float[jax.Array, "B, H, W, C"], wr: Float[jax.Array, "2, 2, C, O"],
                    wi: Float[jax.Array, "2, 2, C, O"]) -> Float[jax.Array, "B, H, W, O"]:
    B, H, W, _ = x.shape
    xf = jnp.fft.rfft2(x, axes=(1, 2))
    out = jnp.zeros((B, H, W // 2 + 1, wr.shape[-1]), dtype=xf.dtype)
    low = jnp.einsum("bxyc,xyco->bxyo", xf[:, :2, :2], wr + 1j * wi)
    out = out.at[:, :2, :2].set(low)
    return jnp.fft.irfft2(out, s=(H, W), axes=(1, 2))


def spectral_conv2d_bug(x: Float[jax.Array, "B, H, W, C"], wr: Float[jax.Array, "2, 2, C, O"],
                        wi: Float[jax.Array, "2, 2, C, O"]) -> Float[jax.Array, "B, H, W, O"]:
    B, H, W, _ = x.shape
    xf = jnp.fft.rfft2(x, axes=(1, 2))
    out = jnp.zeros((B, H, W // 2 + 1, wr.shape[-1]), dtype=xf.dtype)
    low = jnp.einsum("bxyc,xyco->bxyo", xf[:, :2, :2], wr + 1j * wi)
    out = out.at[:, :2, :2].set(low)
    return jnp.fft.irfft2(out, axes=(1, 2))  # BUG: no s=: W comes back as 2*(W//2)


# -- chex-style shape asserts written as plain asserts --------------------------------------------


def asserted_attention(q: Float[jax.Array, "B, T, D"], k: Float[jax.Array, "B, S, D"],
                       v: Float[jax.Array, "B, S, E"], mask: Bool[jax.Array, "B, T, S"]
                       ) -> Float[jax.Array, "B, T, E"]:
    B, T, D = q.shape
    S = k.shape[1]
    assert k.shape == (B, S, D), k.shape
    assert v.shape[:2] == (B, S)
    assert mask.shape == (B, T, S) and mask.ndim == 3
    scores = jnp.einsum("btd,bsd->bts", q, k) / jnp.sqrt(D)
    scores = jnp.where(mask, scores, -1e9)
    out = jax.nn.softmax(scores, axis=-1) @ v
    assert out.shape == (B, T, v.shape[-1])
    return out


def asserted_attention_bug(q: Float[jax.Array, "B, T, D"], k: Float[jax.Array, "B, S, D"],
                           v: Float[jax.Array, "B, S, E"], mask: Bool[jax.Array, "B, T, S"]
                           ) -> Float[jax.Array, "B, T, E"]:
    B, T, D = q.shape
    S = k.shape[1]
    assert k.shape == (B, S, D), k.shape
    assert v.shape[:2] == (B, S)
    assert mask.shape == (B, T, S) and mask.ndim == 3
    scores = jnp.einsum("btd,bsd->bts", q, k) / jnp.sqrt(D)
    scores = jnp.where(mask[:, 0], scores, -1e9)  # BUG: the first query's mask for all
    out = jax.nn.softmax(scores, axis=-1) @ v
    return out



# -- differentiation beyond grad, initializers, per-env keys, vectorize, resize ---------------


def pinn_laplacian(x: Float[jax.Array, "N, 2"], W1: Float[jax.Array, "2, H"],
                   w2: Float[jax.Array, "H"]) -> Float[jax.Array, "N"]:
    def u(p):
        return jnp.tanh(p @ W1) @ w2
    hess = jax.vmap(jax.hessian(u))(x)
    return jnp.trace(hess, axis1=-2, axis2=-1)


def pinn_laplacian_bug(x: Float[jax.Array, "N, 2"], W1: Float[jax.Array, "2, H"],
                       w2: Float[jax.Array, "H"]) -> Float[jax.Array, "N"]:
    def u(p):
        return jnp.tanh(p @ W1) @ w2
    hess = jax.hessian(u)(x)  # BUG: without vmap, the Hessian of the whole batch
    return jnp.trace(hess, axis1=-2, axis2=-1)


def hutchinson_trace(key: jax.Array, x: Float[jax.Array, "B, D"], W: Float[jax.Array, "D, D"]
                     ) -> Float[jax.Array, "B"]:
    v = jax.random.rademacher(key, x.shape, dtype=jnp.float32)
    _, jv = jax.jvp(lambda u: jnp.tanh(u @ W), (x,), (v,))
    return jnp.sum(v * jv, axis=-1)


def hutchinson_trace_bug(key: jax.Array, x: Float[jax.Array, "B, D"],
                         W: Float[jax.Array, "D, D"]) -> Float[jax.Array, "B"]:
    v = jax.random.rademacher(key, x.shape[-1:], dtype=jnp.float32)  # BUG: one probe for all
    _, jv = jax.jvp(lambda u: jnp.tanh(u @ W), (x,), (v,))
    return jnp.sum(v * jv, axis=-1)


def init_dense(key: jax.Array, x: Float[jax.Array, "B, D"]) -> Float[jax.Array, "B, 64"]:
    k1, k2 = jax.random.split(key)
    w = jax.nn.initializers.lecun_normal()(k1, (x.shape[-1], 64))
    b = jax.nn.initializers.normal(0.02)(k2, (64,))
    return jax.nn.gelu(x @ w + b)


def init_dense_bug(key: jax.Array, x: Float[jax.Array, "B, D"]) -> Float[jax.Array, "B, 64"]:
    k1, k2 = jax.random.split(key)
    w = jax.nn.initializers.lecun_normal()(k1, (64, x.shape[-1]))  # BUG: PyTorch's layout
    b = jax.nn.initializers.normal(0.02)(k2, (64,))
    return jax.nn.gelu(x @ w + b)


def vmapped_env_step(key: jax.Array, states: Float[jax.Array, "E, S"],
                     actions: Int[jax.Array, "E"], A: Float[jax.Array, "S, S"]
                     ) -> Float[jax.Array, "E, S"]:
    def step(k, s, a):
        return jnp.tanh(A @ s) + a * 0.1 + 0.01 * jax.random.normal(k, s.shape)
    keys = jax.random.split(key, states.shape[0])
    return jax.vmap(step)(keys, states, actions)


def vmapped_env_step_bug(key: jax.Array, states: Float[jax.Array, "E, S"],
                         actions: Int[jax.Array, "E"], A: Float[jax.Array, "S, S"]
                         ) -> Float[jax.Array, "E, S"]:
    def step(k, s, a):
        return jnp.tanh(A @ s) + a * 0.1 + 0.01 * jax.random.normal(k, s.shape)
    keys = jax.random.split(key, states.shape[1])  # BUG: one key per state feature
    return jax.vmap(step)(keys, states, actions)


def vectorized_bilinear(x: Float[jax.Array, "B, N"], y: Float[jax.Array, "B, M"],
                        W: Float[jax.Array, "N, M"]) -> Float[jax.Array, "B"]:
    return jnp.vectorize(lambda a, b: a @ W @ b, signature="(n),(m)->()")(x, y)


def vectorized_bilinear_bug(x: Float[jax.Array, "B, N"], y: Float[jax.Array, "B, M"],
                            W: Float[jax.Array, "N, M"]) -> Float[jax.Array, "B"]:
    return jnp.vectorize(lambda a, b: a @ W @ b, signature="(n),(m)->()")(y, x)  # BUG: swapped


def upsample_skip(x: Float[jax.Array, "B, H, W, C"], skip: Float[jax.Array, "B, 2*H, 2*W, C"]
                  ) -> Float[jax.Array, "B, 2*H, 2*W, 2*C"]:
    B, H, W, C = x.shape
    up = jax.image.resize(x, (B, 2 * H, 2 * W, C), method="nearest")
    return jnp.concatenate([up, skip], axis=-1)


def upsample_skip_bug(x: Float[jax.Array, "B, H, W, C"],
                      skip: Float[jax.Array, "B, 2*H, 2*W, C"]
                      ) -> Float[jax.Array, "B, 2*H, 2*W, 2*C"]:
    B, H, W, C = x.shape
    up = jax.image.resize(x, (B, 2 * W, 2 * H, C), method="nearest")  # BUG: H and W swapped
    return jnp.concatenate([up, skip], axis=-1)


def activation_switch(x: Float[jax.Array, "B, D"], which: Int[jax.Array, ""]
                      ) -> Float[jax.Array, "B, D"]:
    return lax.switch(which, [jax.nn.relu, jax.nn.gelu, lambda v: v * jax.nn.sigmoid(v)], x)


def activation_switch_bug(x: Float[jax.Array, "B, D"], which: Int[jax.Array, ""]
                          ) -> Float[jax.Array, "B, D"]:
    return lax.switch(which, [jax.nn.relu, jax.nn.gelu,
                              lambda v: jax.nn.glu(v, axis=-1)], x)  # BUG: GLU halves D



def masked_mean_pool(h: Float[jax.Array, "B, T, D"], lengths: Int[jax.Array, "B"],
                     w: Float[jax.Array, "D, C"]) -> Float[jax.Array, "B, C"]:
    valid = jnp.arange(h.shape[1])[None, :] < lengths[:, None]
    pooled = jnp.mean(h, axis=1, where=valid[..., None])
    return jax.nn.log_softmax(pooled @ w, axis=-1)


def masked_mean_pool_bug(h: Float[jax.Array, "B, T, D"], lengths: Int[jax.Array, "B"],
                         w: Float[jax.Array, "D, C"]) -> Float[jax.Array, "B, C"]:
    valid = jnp.arange(h.shape[1])[None, :] < lengths[:, None]
    pooled = jnp.mean(h, axis=1, where=valid)  # BUG: the [B, T] mask of a [B, T, D] mean
    return jax.nn.log_softmax(pooled @ w, axis=-1)


ASSUMING = [  # correct where one size bounds another: that condition, a warning, is the finding
    ("top_k + categorical sampling", top_k_sample, top_k_sample_bug, "TS101", "5 <= V"),
    ("mixture of experts top-2", mixture_of_experts, mixture_of_experts_bug, "TS101", "2 <= E"),
    ("gumbel top-k", gumbel_top_k, gumbel_top_k_bug, "TS101", "3 <= V"),
]

CASES = [
    ("scan gru batch-major swapaxes", gru_batch_major, gru_batch_major_bug, "TS101"),
    ("scan lstm dict carry", lstm_dict_carry, lstm_dict_carry_bug, "TS101"),
    ("scan bidirectional rnn", bidirectional_rnn, bidirectional_rnn_bug, "TS103"),
    ("associative_scan linear recurrence", linear_recurrence, linear_recurrence_bug, "TS101"),
    ("associative_scan selective scan", selective_scan, selective_scan_bug, "TS101"),
    ("associative_scan cumulative max", cumulative_max_pool, cumulative_max_pool_bug, "TS103"),
    ("fori_loop ddim sampler", ddim_sample, ddim_sample_bug, "TS101"),
    ("fori_loop euler karras sampler", euler_karras, euler_karras_bug, "TS102"),
    ("diffusion timestep embedding", timestep_embedding, timestep_embedding_bug, "TS101"),
    ("vmap(grad) dp-sgd clipping on a params dict", dp_sgd_grad, dp_sgd_grad_bug, "TS101"),
    ("vmap dict in_axes, out_axes=1", ensemble_heads, ensemble_heads_bug, "TS101"),
    ("nested vmap gram matrix", rbf_gram, rbf_gram_bug, "TS103"),
    ("vmap value_and_grad has_aux", value_and_grad_aux, value_and_grad_aux_bug, "TS108"),
    ("tree_map adamw", adamw_step, adamw_step_bug, "TS103"),
    ("adafactor factored moments", adafactor_update, adafactor_update_bug, "TS101"),
    ("lion per-layer rates", lion_step, lion_step_bug, "TS101"),
    ("tree_leaves global norm clip", global_norm_clip, global_norm_clip_bug, "TS101"),
    ("segment_max graph attention", gat_layer, gat_layer_bug, "TS101"),
    ("segment_sum graph readout", graph_readout, graph_readout_bug, "TS101"),
    ("top-p filter", top_p_filter, top_p_filter_bug, "TS101"),
    ("epsilon-greedy policy split keys", policy_act, policy_act_bug, "TS101"),
    ("clip contrastive loss", clip_loss, clip_loss_bug, "TS101"),
    ("masked smoothed token loss", masked_token_loss, masked_token_loss_bug, "TS103"),
    ("fori_loop blockwise attention dynamic_slice", blockwise_attention,
     blockwise_attention_bug, "TS101"),
    ("scan ring attention blocks", ring_attention_scan, ring_attention_scan_bug, "TS102"),
    ("decode step against a cache", decode_step_cache, decode_step_cache_bug, "TS101"),
    ("fori_loop greedy decode .at[:, i]", greedy_decode, greedy_decode_bug, "TS101"),
    ("fori_loop trajectory buffer", trajectory_buffer, trajectory_buffer_bug, "TS108"),
    ("fft long convolution", fft_long_conv, fft_long_conv_bug, "TS101"),
    ("hyena fft filter", hyena_filter, hyena_filter_bug, "TS101"),
    ("complex rotary embedding", rope_complex, rope_complex_bug, "TS101"),
    ("nerf volume rendering", volume_render, volume_render_bug, "TS101"),
    ("nerf positional encoding", posenc, posenc_bug, "TS106"),
    ("gaussian splatting 2d covariance", splat_cov2d, splat_cov2d_bug, "TS102"),
    ("scan kalman filter", kalman_filter, kalman_filter_bug, "TS102"),
    ("gp log marginal likelihood", gp_log_marginal, gp_log_marginal_bug, "TS101"),
    ("slogdet batched gaussian nll", batched_gauss_nll, batched_gauss_nll_bug, "TS102"),
    ("while_loop conjugate gradient", conjugate_gradient, conjugate_gradient_bug, "TS101"),
    ("scan reverse v-trace", vtrace, vtrace_bug, "TS106"),
    ("cond stochastic depth", stochastic_depth, stochastic_depth_bug, "TS101"),
    ("reduce_window max pool", max_pool_2x2, max_pool_2x2_bug, "TS103"),
    ("depthwise conv feature groups", depthwise_conv, depthwise_conv_bug, "TS102"),
    ("chex-style asserted attention", asserted_attention, asserted_attention_bug, "TS101"),
    ("vmap(hessian) pinn laplacian", pinn_laplacian, pinn_laplacian_bug, "TS103"),
    ("jvp hutchinson trace", hutchinson_trace, hutchinson_trace_bug, "TS101"),
    ("nn.initializers dense layer", init_dense, init_dense_bug, "TS102"),
    ("vmap over split keys", vmapped_env_step, vmapped_env_step_bug, "TS101"),
    ("jnp.vectorize gufunc signature", vectorized_bilinear, vectorized_bilinear_bug, "TS102"),
    ("image.resize upsample + skip", upsample_skip, upsample_skip_bug, "TS106"),
    ("lax.switch activations", activation_switch, activation_switch_bug, "TS101"),
    ("mean where= padding mask", masked_mean_pool, masked_mean_pool_bug, "TS101"),
]
