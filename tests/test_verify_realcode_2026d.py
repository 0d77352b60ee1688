"""verify through torch.func's transformations and torch's recurrent modules
(tests/verify_corpus/probe_2026d.py): MAML by functional_call, per-sample gradients,
jvp(grad) Hessian-vector products, grad_and_value, vjp; GRU and BiLSTM encoders;
torch.vmap's randomness with plain sizes; writes through detach() and same-dtype casts of an
expanded tensor; JAX's vmap with keyword arguments; SciPy's expm and cho_solve.  Each pair is a
correct function and a twin with one planted bug; the oracles run each correct one, and each
bug, on real arrays of its own library."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from torch import nn

from arrays import clean, kinds
from tensig import Float
from tensig.check import trace_torch
from tensig.check.tracer import SymArray
from tensig.check.verify import verify
from test_verify_realcode_domains import corpus_tests, mixes_libraries
from verify_corpus.probe_2026d import ASSUMES, CASES, STOPS, learner


def test_the_corpus_mixes_the_three_libraries():
    mixes_libraries(CASES, 13, 2)


(test_correct_one_verifies_and_the_bug_gives_its_code,
 test_correct_one_runs_and_returns_its_declared_shape,
 test_each_bug_fails_when_run) = corpus_tests(CASES, ASSUMES, STOPS)


# -- the gaps the corpus closed, each fixed in src/tensig/check ---------------------------------


def test_functional_call_puts_the_module_s_own_parameters_back():
    """functional_call runs the module with the given (symbolic) values in its slots, then
    restores them: after verify, and after a trace that failed inside the module, the module
    holds its real parameters and torch's own runs on real tensors."""
    before = {k: v for k, v in learner.named_parameters()}
    bad = lambda x: torch.func.functional_call(learner, {"0.weight": x}, (x,))  # noqa: E731
    r = verify(bad, "B 8 => B 4")
    assert not clean(r), str(r)  # a [B, 8] weight for a [16, 8] one: F.linear refuses
    assert all(learner.get_parameter(k) is v for k, v in before.items())
    x = torch.ones(3, 8)
    out = torch.func.functional_call(learner, dict(learner.named_parameters()), (x,))
    assert out.shape == (3, 4)


def test_a_transformed_function_closing_over_a_batch_is_traced():
    """grad over a module's real parameters, of a loss that closes over the symbolic batch:
    torch's own grad ran and refused the batch inside (a stopped trace)."""
    lin = nn.Linear(8, 4)
    f = lambda x: torch.func.grad(  # noqa: E731
        lambda p: torch.func.functional_call(lin, p, (x,)).sum())(dict(lin.named_parameters()))
    assert f(torch.ones(3, 8))["weight"].shape == (4, 8)
    r = verify(lambda x: f(x)["weight"], "B 8 => 4 8")
    assert clean(r), str(r)
    g = lambda x: torch.func.grad(functools.partial(  # noqa: E731  the batch bound by partial
        lambda p, x: torch.func.functional_call(lin, p, (x,)).sum(), x=x))(
            dict(lin.named_parameters()))
    assert g(torch.ones(3, 8))["weight"].shape == (4, 8)
    r = verify(lambda x: g(x)["weight"], "B 8 => 4 8")
    assert clean(r), str(r)


def test_recurrent_modules_give_torch_s_shapes(monkeypatch):
    """nn.GRU/LSTM/RNN by hand, not fitted on meta tensors (whose kernels step through time
    on every fit run: a 2-layer BiLSTM took 17 s): the shapes verify derives, checked against
    the real modules' at two sizes each, unbatched input, a projection and two directions
    included."""
    def fitted(func, *a):
        raise AssertionError(f"{func} fitted on meta tensors")
    monkeypatch.setattr(trace_torch, "fallback", fitted)
    lstm = nn.LSTM(6, 10, num_layers=2, proj_size=3, bidirectional=True, batch_first=True)
    rnn = nn.RNN(6, 10, nonlinearity="relu")
    gru = nn.GRU(6, 10)
    cases = [(lambda x: lstm(x)[0], "B T 6 => B T 6"),
             (lambda x: lstm(x)[1][0], "B T 6 => 4 B 3"),
             (lambda x: lstm(x)[1][1], "B T 6 => 4 B 10"),
             (lambda x: rnn(x)[1], "T B 6 => 1 B 10"),
             (lambda x: gru(x)[0], "T 6 => T 10")]
    for f, spec in cases:
        r = verify(f, spec)
        assert clean(r), (spec, str(r))
        ins, outs = (s.split() for s in spec.split(" => "))
        for n, m in ((5, 7), (9, 2)):
            env = {"B": n, "T": m}
            assert f(torch.ones([env.get(a) or int(a) for a in ins])).shape == \
                tuple(env.get(a) or int(a) for a in outs)
    r = verify(lambda x: gru(x)[0], "T B 6 => T B 20")
    assert kinds(r) == ["return-shape"] and "[T, B, 10]" in str(r), str(r)


def test_creation_draws_under_torch_vmap_are_refused():
    """torch.randint/randperm/rand with plain sizes inside torch.vmap (randomness 'error', its
    default) raise in torch at every size; outside vmap, or with randomness 'same', they run."""
    x = torch.ones(4, 3)
    bad = [lambda v: torch.vmap(lambda r: r + torch.randint(0, 5, (3,)))(v),
           lambda v: torch.vmap(lambda r: r[torch.randperm(3)])(v),
           lambda v: torch.vmap(lambda r: r * torch.rand(r.shape[0]))(v)]
    for f in bad:
        with pytest.raises(RuntimeError, match="randomness"):
            f(x)
        r = verify(f, "B 3 => B 3")
        assert kinds(r) == ["op-shape"] and "randomness" in str(r), str(r)
    ok = [lambda v: torch.vmap(lambda r: r + torch.randn(3), randomness="same")(v),
          lambda v: v + torch.randn(3)]
    for f in ok:
        assert f(x).shape == (4, 3)
        assert clean(verify(f, "B 3 => B 3"))


def _write_through(cast):
    def f(x: Float[torch.Tensor, "B 1"], t: Float[torch.Tensor, "T"]
          ) -> Float[torch.Tensor, "B T"]:
        y = cast(x.expand(-1, t.shape[0]))
        y[0] = 1.0
        return y
    return f


def test_a_view_or_a_same_dtype_cast_of_an_expand_shares_its_memory():
    """detach(), .float() of a float32, .to(its dtype) give the expanded tensor's memory (the
    tensor itself, or a view): a write into several of its elements at once raises in torch;
    .double(), .to(float64) and .to(copy=True) copy.  verify said nothing of the first three."""
    shared = [lambda y: y.detach(), lambda y: y.float(), lambda y: y.to(torch.float32),
              lambda y: y.detach().float()]
    copies = [lambda y: y.double(), lambda y: y.to(torch.float64), lambda y: y.clone(),
              lambda y: y.to(torch.float32, copy=True)]
    x, t = torch.ones(3, 1), torch.ones(4)
    for cast in shared:
        with pytest.raises(RuntimeError, match="single memory location"):
            _write_through(cast)(x, t)
        r = verify(_write_through(cast))
        assert kinds(r) == ["assumption"] and "share memory" in str(r), str(r)
    for cast in copies:
        assert _write_through(cast)(x, t).shape == (3, 4)
        r = verify(_write_through(cast))
        assert clean(r), str(r)
    # a copy still casts: copy=True (astype's default) kept the float kind of an int cast
    assert SymArray((), "f").to(torch.int64, copy=True).kind == "i"
    assert SymArray((), "f").astype(int).kind == "i" and torch.zeros(2).to(torch.int64).is_signed()



def test_numpy_s_astype_copies_in_code_that_names_torch():
    """NumPy's astype copies unless told copy=False, to the dtype an array has too: a write into
    a broadcast made writable by astype("float32") runs; in code that names torch (its result
    handed to torch) the same-dtype cast kept the broadcast's mark, a false warning."""
    def pad_mask(m: Float[np.ndarray, "1 T"], b: Float[np.ndarray, "B"]
                 ) -> Float[np.ndarray, "B T"]:
        w = np.broadcast_to(m, (b.shape[0], m.shape[1])).astype("float32")
        w[:, 0] = 0.0
        return w
    assert pad_mask(np.ones((1, 4), np.float32), np.ones(3)).shape == (3, 4)
    r = verify(pad_mask, torch_style=True)
    assert clean(r), str(r)
    with pytest.raises(ValueError, match="read-only"):
        np.broadcast_to(np.ones((1, 4), np.float32), (3, 4)).astype("float32", copy=False)[0] = 1


def test_jax_vmap_maps_keyword_arguments_torch_s_does_not():
    """JAX maps keyword arguments over axis 0 whatever in_axes says; torch.vmap leaves them
    unmapped.  The model passed JAX's whole: a false return-shape error on correct code."""
    f = lambda x, *, scale: x * scale  # noqa: E731
    x = jnp.ones((3, 4))
    assert jax.vmap(f, in_axes=(1,))(x, scale=jnp.ones((4, 3))).shape == (4, 3)
    r = verify(lambda a, s: jax.vmap(f, in_axes=(1,))(a, scale=s), "B D; D B => D B")
    assert clean(r), str(r)
    with pytest.raises(ValueError, match="inconsistent sizes"):
        jax.vmap(f)(x, scale=jnp.ones(4))
    r = verify(lambda a, s: jax.vmap(f)(a, scale=s), "B D; B D => B D")
    assert clean(r), str(r)
    r = verify(lambda a, s: jax.vmap(f)(a, scale=s), "B D; D => B D")
    assert kinds(r) == ["broadcast"] and "B and D" in str(r), str(r)
    g = lambda r, scale: r * scale  # noqa: E731
    assert torch.vmap(g)(torch.ones(3, 4), scale=torch.ones(4)).shape == (3, 4)
    r = verify(lambda a, s: torch.vmap(g)(a, scale=s), "B D; D => B D")
    assert clean(r), str(r)


def test_a_mapped_python_scalar_is_refused():
    """A Python scalar on a mapped axis (a training flag by keyword, which JAX maps) has no
    axis: JAX and torch raise; the model passed it through, and verified the code."""
    f = lambda x, train: x * 2 if train else x  # noqa: E731
    with pytest.raises(ValueError, match="rank should be at least 1"):
        jax.vmap(f)(jnp.ones((3, 2)), train=True)
    with pytest.raises(ValueError, match="non-Tensor"):
        torch.vmap(f)(torch.ones(3, 2), 2.0)
    for bad in (lambda x: jax.vmap(f)(x, train=True), lambda x: torch.vmap(f)(x, 2.0)):
        r = verify(bad, "B D => B D")
        assert kinds(r) == ["op-shape"] and "no axis 0" in str(r), str(r)
        assert "functools.partial binds JAX's keywords" in str(r), str(r)  # in_axes can't
    ok = lambda x: jax.vmap(f, in_axes=(0, None))(x, True)  # noqa: E731
    assert ok(jnp.ones((3, 2))).shape == (3, 2)
    assert clean(verify(ok, "B D => B D"))
