"""GPT-2 forward pieces in NumPy, in the style of picoGPT (written for this corpus).

Each case is (name, correct function, function with one realistic injected bug, signature).
"""

import numpy as np


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def softmax(x):
    exp_x = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return exp_x / np.sum(exp_x, axis=-1, keepdims=True)


def layer_norm(x, g, b, eps: float = 1e-5):
    mean = np.mean(x, axis=-1, keepdims=True)
    variance = np.var(x, axis=-1, keepdims=True)
    x = (x - mean) / np.sqrt(variance + eps)
    return g * x + b


def layer_norm_bug(x, g, b, eps: float = 1e-5):
    mean = np.mean(x, axis=-1)  # keepdims dropped: runs whenever T == d
    variance = np.var(x, axis=-1, keepdims=True)
    x = (x - mean) / np.sqrt(variance + eps)
    return g * x + b


def attention(q, k, v, mask):
    return softmax(q @ k.T / np.sqrt(q.shape[-1]) + mask) @ v


def attention_bug(q, k, v, mask):
    return softmax(k @ q.T / np.sqrt(q.shape[-1]) + mask) @ v  # scores transposed


def mha(x, c_attn_w, c_attn_b, c_proj_w, c_proj_b, n_head: int = 4):
    x = x @ c_attn_w + c_attn_b
    qkv = np.split(x, 3, axis=-1)
    qkv_heads = [np.split(part, n_head, axis=-1) for part in qkv]
    causal_mask = (1 - np.tri(x.shape[0], dtype=x.dtype)) * -1e10
    out_heads = [attention(q, k, v, causal_mask) for q, k, v in zip(*qkv_heads, strict=True)]
    x = np.hstack(out_heads)
    return x @ c_proj_w + c_proj_b


def mha_bug(x, c_attn_w, c_attn_b, c_proj_w, c_proj_b, n_head: int = 4):
    x = x @ c_attn_w + c_attn_b
    qkv = np.split(x, 3, axis=-1)
    qkv_heads = [np.split(part, n_head, axis=0) for part in qkv]  # heads split along time
    causal_mask = (1 - np.tri(x.shape[0], dtype=x.dtype)) * -1e10
    out_heads = [attention(q, k, v, causal_mask) for q, k, v in zip(*qkv_heads, strict=True)]
    x = np.hstack(out_heads)
    return x @ c_proj_w + c_proj_b


def ffn(x, fc_w, fc_b, proj_w, proj_b):
    return gelu(x @ fc_w + fc_b) @ proj_w + proj_b


def ffn_bug(x, fc_w, fc_b, proj_w, proj_b):
    return gelu(x @ fc_w + fc_b) @ proj_w.T + proj_b  # the projection transposed


def logits(inputs, wte, wpe):
    x = wte[inputs] + wpe[range(len(inputs))]
    return x @ wte.T


def logits_bug(inputs, wte, wpe):
    x = wte[inputs] + wpe[range(len(inputs))]
    return x @ wpe.T  # the head tied to the position table


CASES = [
    ("numpy gpt2 layer_norm", layer_norm, layer_norm_bug, "T, d; d; d => T, d"),
    ("numpy gpt2 attention", attention, attention_bug, "T, k; S, k; S, v; T, S => T, v"),
    ("numpy gpt2 mha", mha, mha_bug, "T, 48; 48, 144; 144; 48, 48; 48 => T, 48"),
    ("numpy gpt2 ffn", ffn, ffn_bug, "T, d; d, h; h; h, d; d => T, d"),
    ("numpy gpt2 logits", logits, logits_bug, "T; V, d; C, d => T, V"),
]
