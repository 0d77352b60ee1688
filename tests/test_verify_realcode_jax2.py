"""verify on a second round of JAX code written as public JAX code writes it (scan cells with
pytree carries, associative scans, fori_loop samplers and decoders, vmap with pytree axes,
tree_map optimizers, segment ops, sampling, blockwise attention, FFT convolutions, filters,
GPs, Jacobians, initializers, resizes): the corpus tests/verify_corpus/probe_jax_2026.py, an
oracle that gives each correct function's output shapes by JAX's own shape rules
(``jax.eval_shape``), and one test per pattern verify once got wrong.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from arrays import clean, holds_for_corpus, kinds
from tensig import Bool, Float, Int
from tensig.check.testing import shape_for, sizes
from tensig.check.verify import verify
from tensig.core.annotations import signature_of

# -- the corpus ---------------------------------------------------------------------------------


def _cases():
    from verify_corpus.probe_jax_2026 import CASES
    return CASES


def test_corpus_correct_ones_verify_and_each_bug_gives_its_code():
    holds_for_corpus(_cases(), 35)


def test_corpus_size_conditions_the_code_relies_on_are_its_only_warning():
    """Correct code that holds only where one size bounds another (the 5 best of V): that
    condition is its one finding, a warning (it verified clean: the fit never ran V < 5); the
    twin's bug is still found."""
    from verify_corpus.probe_jax_2026 import ASSUMING

    for name, good, bad, code, condition in ASSUMING:
        r, rb = verify(good), verify(bad)
        assert not r.notes and [f.kind for f in r] == ["assumption"], f"{name}: {r}"
        assert r.findings[0].message.startswith(f"assumes {condition}:"), f"{name}: {r}"
        assert code in [f.code for f in rb], f"{name}: {rb}"


def _arguments(fn, env: dict[str, int], seed: int) -> list:
    """Real arguments for ``fn`` at the sizes ``env``: random arrays of the annotated shapes
    (integer arrays as valid indices into any axis: zeros), a PRNG key for a parameter named
    key, the size for an int named like one, True for a bool, the default otherwise."""
    rng = np.random.default_rng(seed)
    markers = {p.name: p.marker for p in signature_of(fn).parameters}
    out = []
    for p in inspect.signature(fn).parameters.values():
        if p.name in markers:
            m = markers[p.name]
            shape = shape_for(m.shape, env)
            if m.dtype in ("Int", "int"):
                out.append(jnp.zeros(shape, jnp.int32))
            elif m.dtype in ("Bool", "bool"):
                out.append(jnp.asarray(rng.random(shape) < 0.7))
            else:
                out.append(jnp.asarray(rng.uniform(0.5, 1.5, shape), jnp.float32))
        elif p.name == "key":
            out.append(jax.random.PRNGKey(seed))
        elif p.annotation in (int, "int"):
            out.append(env[p.name])
        elif p.annotation in (bool, "bool"):
            out.append(True)
        else:
            assert p.default is not inspect.Parameter.empty, (fn.__name__, p.name)
            out.append(p.default)
    return out


def _declared(fn, env: dict[str, int]) -> tuple[tuple[int, ...], ...]:
    result = signature_of(fn).result
    markers = result if isinstance(result, tuple) else (result,)
    return tuple(shape_for(m.shape, env) for m in markers)


# the errors of JAX code that needs concrete values (a Python branch on data, a NumPy call on a
# traced array): only such a function runs on real arrays
_NEEDS_VALUES = (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError,
                 jax.errors.TracerArrayConversionError)


def _shapes(fn, env: dict[str, int], seed: int) -> tuple[tuple[int, ...], ...]:
    """The shapes ``fn`` returns at the sizes ``env`` by JAX's own shape rules:
    ``jax.eval_shape`` traces it on abstract arrays of the arguments' shapes (the ints, bools
    and defaults stay Python values), without running a kernel; a function that needs concrete
    values runs eagerly instead."""
    args = _arguments(fn, env, seed)
    at = [i for i, a in enumerate(args) if isinstance(a, jax.Array)]

    def on_arrays(*arrays):
        full = list(args)
        for i, a in zip(at, arrays, strict=True):
            full[i] = a
        return fn(*full)

    try:
        out = jax.eval_shape(on_arrays, *(args[i] for i in at))
    except _NEEDS_VALUES:
        out = fn(*args)
    return tuple(tuple(np.shape(o)) if not hasattr(o, "shape") else tuple(o.shape)
                 for o in (out if isinstance(out, tuple) else (out,)))


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c[0])
def test_corpus_correct_ones_return_their_declared_shape_by_jax_shape_rules(case):
    """The oracle: what verify proves clean returns, by JAX's own shape rules
    (``jax.eval_shape``, or a real run where it needs values), at two sets of distinct sizes,
    the shape its annotation declares (so the corpus is correct code)."""
    _, good, _, _ = case
    for start, seed in ((2, 0), (5, 1)):
        env = sizes(good, start=start)
        assert _shapes(good, env, seed) == _declared(good, env), (good.__name__, env)


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


def test_fft_transforms_are_modelled():
    """np.fft's (and jnp.fft's, through their NumPy twins) transforms were fitted: NumPy's
    witness arrays of a 4-axis FNO input were refused as too large (a stop note), and an rfft2
    result's W // 2 + 1 fed to irfft2(..., s=(H, W)) required W even, although it returns W
    at every W."""
    from verify_corpus.probe_jax_2026 import spectral_conv2d, spectral_conv2d_bug

    def roundtrip(x: Float[np.ndarray, "B, T"]) -> Float[np.ndarray, "B, T"]:
        return np.fft.irfft(np.fft.rfft(x, axis=-1) * 2.0, n=x.shape[-1])

    def roundtrip_bug(x: Float[np.ndarray, "B, T"]) -> Float[np.ndarray, "B, T"]:
        return np.fft.irfft(np.fft.rfft(x))  # without n: T - 1 samples back at an odd T

    assert clean(verify(roundtrip)), str(verify(roundtrip))
    r = verify(roundtrip_bug)
    assert kinds(r) == ["return-shape"] and "2*(T // 2)" in str(r), str(r)
    assert clean(verify(lambda x: np.abs(np.fft.fftn(x, axes=(1, 2))) + np.abs(np.fft.ifft2(x)),
                        "B, H, W => B, H, W"))
    assert clean(verify(lambda x: np.fft.rfftn(x, s=(8, 6), axes=(1, 2)), "B, H, W => B, 8, 4"))
    assert clean(verify(lambda x: np.fft.irfft(x, axis=0), "T, C => 2*T - 2, C"))
    r = verify(spectral_conv2d)  # the kept modes assume a grid of at least 2 x 2: all it says
    assert r.findings and set(kinds(r)) == {"assumption"} and not r.notes, str(r)
    assert "divisible by" not in str(r), str(r)  # not a path's word
    r = verify(spectral_conv2d_bug)  # irfft2 without s=: W back only at an even W
    assert "requires W divisible by 2" in str(r) and not r.notes, str(r)


def test_real_and_imag_parts_keep_the_shape():
    """x.real and x.imag stopped NumPy code with an AttributeError (only torch's attributes
    were looked up); JAX code hid it by re-running under JAX's own shapes."""
    def power(x: Float[np.ndarray, "B, T"]) -> Float[np.ndarray, "B, T // 2 + 1"]:
        f = np.fft.rfft(x)
        return f.real ** 2 + f.imag ** 2

    def power_bug(x: Float[np.ndarray, "B, T"]) -> Float[np.ndarray, "B, T // 2 + 1"]:
        f = np.fft.rfft(x)
        return f.real ** 2 + f.imag.T ** 2  # [B, F] + [F, B]

    assert clean(verify(power)), str(verify(power))
    r = verify(power_bug)
    assert kinds(r)[0] == "broadcast" and not r.notes, str(r)


def test_initializers_take_symbolic_shapes():
    """jax.nn.initializers' factories (glorot_uniform(), normal(0.02)) return an
    init(key, shape) that JAX ran on the witnesses' numbers: a correct haiku-style layer got a
    'concrete array's axis of size 13 is read as D' warning."""
    def dense(key: jax.Array, x: Float[jax.Array, "B, D"]) -> Float[jax.Array, "B, 32"]:
        k1, k2 = jax.random.split(key)
        w = jax.nn.initializers.glorot_uniform()(k1, (x.shape[-1], 32))
        b = jax.nn.initializers.normal(0.02)(k2, (32,)) + jax.nn.initializers.zeros(k2, (32,))
        return x @ w + b

    def dense_bug(key: jax.Array, x: Float[jax.Array, "B, D"]) -> Float[jax.Array, "B, 32"]:
        w = jax.nn.initializers.lecun_normal()(key, (32, x.shape[-1]))  # PyTorch's layout
        return x @ w

    assert clean(verify(dense)), str(verify(dense))
    r = verify(dense_bug)
    assert kinds(r)[0] == "contraction" and "D with 32" in str(r) and not r.notes, str(r)
    assert jax.nn.initializers.glorot_uniform()(jax.random.PRNGKey(0), (3, 4)).shape == (3, 4)


def test_jacobians_jvp_and_vjp_are_traced_symbolically():
    """jax.jacrev/jacfwd/hessian/jvp/vjp ran only under JAX's own shapes: an outer product
    inside the differentiated function ([N] - [N, 1]) verified clean."""
    def jac(x: Float[jax.Array, "N"], W: Float[jax.Array, "M, N"]) -> Float[jax.Array, "M, N"]:
        return jax.jacrev(lambda v: jnp.tanh(W @ v))(x) + jax.jacfwd(lambda v: W @ v)(x)

    def jac_outer(x: Float[jax.Array, "N"], y: Float[jax.Array, "N, 1"]
                  ) -> Float[jax.Array, "N, N"]:
        return jax.jacrev(lambda v: jnp.sum((v - y) ** 2, axis=0))(x)  # [N] - [N, 1]

    def hess_tree(w: Float[jax.Array, "D"], b: Float[jax.Array, ""]
                  ) -> tuple[Float[jax.Array, "D, D"], Float[jax.Array, "D"]]:
        h = jax.hessian(lambda p: jnp.sum(jnp.tanh(p["w"] * p["b"])))({"w": w, "b": b})
        return h["w"]["w"], h["w"]["b"]

    def hutchinson(key: jax.Array, x: Float[jax.Array, "N"], W: Float[jax.Array, "N, N"]
                   ) -> Float[jax.Array, ""]:
        v = jax.random.normal(key, x.shape)
        _, jv = jax.jvp(lambda u: jnp.tanh(W @ u), (x,), (v,))
        return v @ jv

    def pulled(x: Float[jax.Array, "N"], W: Float[jax.Array, "M, N"], g: Float[jax.Array, "M"]
               ) -> Float[jax.Array, "N"]:
        _, pull = jax.vjp(lambda u: jnp.tanh(W @ u), x)
        return pull(g)[0]

    def pulled_bug(x: Float[jax.Array, "N"], W: Float[jax.Array, "M, N"],
                   g: Float[jax.Array, "N"]) -> Float[jax.Array, "N"]:
        _, pull = jax.vjp(lambda u: jnp.tanh(W @ u), x)
        return pull(g)[0]  # a cotangent of the input's shape, not the output's

    for f in (jac, hess_tree, hutchinson, pulled):
        assert clean(verify(f)), str(verify(f))
    r = verify(jac_outer)
    assert kinds(r) == ["outer-product"] and not r.notes, str(r)
    r = verify(pulled_bug)
    assert kinds(r) == ["broadcast"] and "cotangent" in str(r) and not r.notes, str(r)
    h = jax.hessian(lambda p: jnp.sum(jnp.tanh(p["w"] * p["b"])))(
        {"w": jnp.ones(3), "b": jnp.ones(())})  # the nesting modelled is JAX's
    assert h["w"]["w"].shape == (3, 3) and h["w"]["b"].shape == (3,) and h["b"]["w"].shape == (3,)


def test_glu_halves_its_axis():
    """jax.nn.glu was fitted: at an odd witness its 'axis size must be divisible by 2' assert
    stopped the trace with a note, so a GLU branch of a switch that halves D went unreported."""
    def gated(x: Float[jax.Array, "B, 2*D"]) -> Float[jax.Array, "B, D"]:
        return jax.nn.glu(x)

    def switch_bug(x: Float[jax.Array, "B, D"], which: Int[jax.Array, ""]
                   ) -> Float[jax.Array, "B, D"]:
        return jax.lax.switch(which, [jax.nn.relu, jax.nn.glu], x)  # the second halves D

    assert clean(verify(gated)), str(verify(gated))
    r = verify(lambda x: jax.nn.glu(x), "B, D => B, D//2")
    assert kinds(r) == ["assumption"] and "D divisible by 2" in str(r) and not r.notes, str(r)
    r = verify(switch_bug)
    assert "broadcast" in kinds(r) and not r.notes, str(r)


def test_image_resize_is_traced_symbolically():
    """jax.image was not patched: resize ran under JAX's own shapes, so a concatenation after
    it that failed was reported as a contraction (TS102), not a concat error."""
    def up(x: Float[jax.Array, "B, H, W, C"], skip: Float[jax.Array, "B, 2*H, 2*W, C"]
           ) -> Float[jax.Array, "B, 2*H, 2*W, 2*C"]:
        B, H, W, C = x.shape
        return jnp.concatenate([jax.image.resize(x, (B, 2 * H, 2 * W, C), "bilinear"), skip], -1)

    def up_bug(x: Float[jax.Array, "B, H, W, C"], skip: Float[jax.Array, "B, 2*H, 2*W, C"]
               ) -> Float[jax.Array, "B, 2*H, 2*W, 2*C"]:
        B, H, W, C = x.shape
        return jnp.concatenate([jax.image.resize(x, (B, 2 * W, 2 * H, C), "bilinear"), skip], -1)

    assert clean(verify(up)), str(verify(up))
    r = verify(up_bug)
    assert kinds(r)[0] == "concat" and not r.notes, str(r)


def test_where_masks_of_reductions_and_softmax_are_checked():
    """A reduction's or softmax's where= mask was ignored: a [B, T] padding mask of a
    [B, T, D] operand (JAX and NumPy raise at any B, T, D) verified clean."""
    def pool(x: Float[jax.Array, "B, T, D"], mask: Bool[jax.Array, "B, T"]
             ) -> Float[jax.Array, "B, D"]:
        return jnp.mean(x, axis=1, where=mask[..., None])

    def pool_bug(x: Float[jax.Array, "B, T, D"], mask: Bool[jax.Array, "B, T"]
                 ) -> Float[jax.Array, "B, D"]:
        return jnp.mean(x, axis=1, where=mask)

    def attend_bug(s: Float[jax.Array, "B, T, S"], mask: Bool[jax.Array, "B, S"]
                   ) -> Float[jax.Array, "B, T, S"]:
        return jax.nn.softmax(s, axis=-1, where=mask)  # needs mask[:, None, :]

    def np_max_bug(x: Float[np.ndarray, "B, T"], m: Bool[np.ndarray, "B"]
                   ) -> Float[np.ndarray, "B"]:
        return np.max(x, axis=1, where=m, initial=-np.inf)

    assert clean(verify(pool)), str(verify(pool))
    assert clean(verify(lambda x, m: x.sum(-1, where=m), "B, T; B, T: bool => B"))
    for f in (pool_bug, attend_bug, np_max_bug):
        r = verify(f)
        assert set(kinds(r)) == {"broadcast"} and "where= mask" in str(r) and not r.notes, str(r)


def test_clip_bounds_broadcast_with_the_operand():
    """clip's array bounds were ignored (clip modelled as elementwise of x alone): a per-row
    bound [B] of a [B, D] array, an error at every size, verified clean."""
    def clip_rows(x: Float[jax.Array, "B, D"], lo: Float[jax.Array, "B"]
                  ) -> Float[jax.Array, "B, D"]:
        return jnp.clip(x, lo[:, None], 1.0)

    def clip_rows_bug(x: Float[jax.Array, "B, D"], lo: Float[jax.Array, "B"]
                      ) -> Float[jax.Array, "B, D"]:
        return jnp.clip(x, min=lo)

    def np_clip_bug(x: Float[np.ndarray, "B, D"], hi: Float[np.ndarray, "B"]
                    ) -> Float[np.ndarray, "B, D"]:
        return x.clip(0.0, hi)

    assert clean(verify(clip_rows)), str(verify(clip_rows))
    assert clean(verify(lambda x: np.clip(x, 0, 1), "B, D => B, D"))
    for f in (clip_rows_bug, np_clip_bug):
        r = verify(f)
        assert kinds(r) == ["broadcast"] and "D against B" in str(r) and not r.notes, str(r)


def test_logsumexp_weights_broadcast_with_the_operand():
    """logsumexp's b= weights were ignored: per-example weights [N] of a mixture's [N, K] log
    probabilities (an error at every size) verified clean."""
    def mixture(lp: Float[jax.Array, "N, K"], w: Float[jax.Array, "K"]) -> Float[jax.Array, "N"]:
        return jax.scipy.special.logsumexp(lp, axis=-1, b=w)

    def mixture_bug(lp: Float[jax.Array, "N, K"], w: Float[jax.Array, "N"]
                    ) -> Float[jax.Array, "N"]:
        return jax.nn.logsumexp(lp, axis=-1, b=w)

    def shared(lp: Float[jax.Array, "K"], w: Float[jax.Array, "N, K"]) -> Float[jax.Array, "N"]:
        return jax.scipy.special.logsumexp(lp, axis=-1, b=w)  # JAX broadcasts both ways

    for f in (mixture, shared):
        assert clean(verify(f)), str(verify(f))
        env = sizes(f)
        assert _shapes(f, env, 0) == _declared(f, env)
    r = verify(mixture_bug)
    assert kinds(r) == ["broadcast"] and "b= weights" in str(r) and not r.notes, str(r)


def test_jacobians_over_several_argnums_nest_as_jax_nests_them():
    """With a tuple of argnums JAX puts the output's tree outermost, then the argnums' tuple
    (twice for a Hessian: h[i][j] is the block of arguments i and j): the model put the
    argnums' tuple outermost and a Hessian's second level over the same argument, so h[0][1]
    of [N] and [M] read as a row of an [N, N] block."""
    def cross(x: Float[jax.Array, "N"], y: Float[jax.Array, "M"]) -> Float[jax.Array, "N, M"]:
        return jax.hessian(lambda a, b: jnp.sum(a) * jnp.sum(b), argnums=(0, 1))(x, y)[0][1]

    def jac_pair(x: Float[jax.Array, "N"], y: Float[jax.Array, "M"]
                 ) -> Float[jax.Array, "N, M"]:
        return jax.jacrev(lambda a, b: (a * jnp.sum(b), b * jnp.sum(a)), argnums=(0, 1))(x, y)[0][1]

    for f in (cross, jac_pair):
        assert clean(verify(f)), str(verify(f))
        env = sizes(f)
        assert _shapes(f, env, 0) == _declared(f, env)  # the nesting modelled is JAX's


def test_jax_s_like_functions_take_their_shape_second():
    """``jnp.zeros_like(a, dtype, shape)`` and ``jnp.full_like(a, v, dtype, shape)`` take the
    shape right after the dtype (NumPy's comes after ``order`` and ``subok``): read by NumPy's
    order, the shape was ignored, and ``[D]`` returned as ``[N, D]``, a false error."""
    def zeros(x: Float[jax.Array, "N, D"]) -> Float[jax.Array, "D"]:
        return jnp.zeros_like(x, jnp.float32, (x.shape[1],))

    def full(x: Float[jax.Array, "N, D"]) -> Int[jax.Array, "D"]:
        return jnp.full_like(x, 0, jnp.int32, (x.shape[1],))

    for fn in (zeros, full):
        assert clean(verify(fn)), f"{fn.__name__}: {verify(fn)}"
        assert fn(jnp.ones((2, 3))).shape == (3,)
