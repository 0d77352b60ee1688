"""verify on real NumPy and JAX code (issue 13, sections 1-4): the array API real code touches,
concrete buffers met by symbolic sizes, NumPy's long tail through fitting, JAX chosen by the
values that reach it, and a corpus of realistic models with one injected bug each.

The oracle for shapes is the library itself: a result verify computes symbolically is
evaluated at sizes other than the witnesses and compared with the shape NumPy (or JAX)
produces on real arrays of those sizes.
"""

from __future__ import annotations

import importlib.util
import math
import pathlib
from typing import Any

import numpy as np
import pytest

from arrays import kinds
from tensig.check.verify import Report, Signature, verify

CORPUS = pathlib.Path(__file__).parent / "verify_corpus"


def errors(report: Report) -> list[str]:
    return [f.message for f in report if f.severity == "error"]


def agrees(fn: Any, signature: str, sizes: dict[str, int], report: Report | None = None) -> bool:
    """The symbolic result evaluated at ``sizes`` equals NumPy's result shape at those sizes."""
    sig = Signature.parse(signature)
    report = report or verify(fn, signature)
    assert report.result is not None, str(report)
    args = [_filled(tuple(d.evaluate(sizes) for d in dims)) for dims in sig.args]
    out = fn(*args)
    items = out if isinstance(out, tuple) else (out,)
    return [tuple(np.shape(o)) for o in items] == \
        [tuple(d.evaluate(sizes) for d in dims) for dims in report.result]


def _filled(shape: tuple[int, ...]) -> np.ndarray:
    """Zeros, except square matrices: symmetric positive definite, so every solver runs."""
    if len(shape) >= 2 and shape[-1] == shape[-2]:
        m = np.random.default_rng(0).standard_normal(shape)
        return m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])
    return np.zeros(shape)


# -- 1. the array API real code touches -------------------------------------------------------


def test_numpy_and_math_of_a_size_are_witness_numbers():
    for scale in (np.sqrt, np.log, math.sqrt, math.log, lambda d: d ** -0.5):
        r = verify(lambda q, scale=scale: q / scale(q.shape[-1]), "T d => T d")
        assert r.ok, str(r)


def test_dtype_is_numpy_dtype():
    def f(x):
        assert isinstance(x.dtype, np.dtype)
        eps = np.finfo(x.dtype).eps
        return x.astype(x.dtype) + eps

    assert verify(f, "B, 8 => B, 8").ok


def test_indexing_by_range_and_arange_of_len():
    for f in (lambda ids, wpe: wpe[range(len(ids))],
              lambda ids, wpe: wpe[np.arange(len(ids))],
              lambda ids, wpe: wpe[np.arange(ids.shape[0])]):
        r = verify(f, "T; C, d => T, d")
        assert r.ok, str(r)
        assert agrees(f, "T; C, d => T, d", {"T": 3, "C": 7, "d": 2}, r)


def test_creation_with_symbolic_sizes():
    def causal(x):
        T = x.shape[0]
        mask = (1 - np.tri(T, dtype=x.dtype)) * -1e10
        ones = np.tril(np.ones((T, T)))
        return x @ x.T + mask + ones + np.eye(len(x)) + np.identity(T)

    r = verify(causal, "T, d => T, T")
    assert r.ok, str(r)
    assert agrees(causal, "T, d => T, T", {"T": 4, "d": 3}, r)


def test_random_with_symbolic_sizes():
    def init(X):
        centroids = X[np.random.choice(len(X), 3, replace=False)]
        noise = np.random.randn(*X.shape) + np.random.normal(size=X.shape)
        return (X + noise)[:, None, :] - centroids[None]

    r = verify(init, "N, D => N, 3, D")
    assert r.complete and [f.message.split(":")[0] for f in r] == ["assumes 3 <= N"], str(r)



def _fresh(code: str) -> str:
    """``code``'s output in a fresh interpreter (where NumPy has not imported numpy.random):
    a crash of the verifier fails the test, not the session."""
    import os
    import subprocess
    import sys

    src = str(pathlib.Path(__file__).parents[1] / "src")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": src}, timeout=120)
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    return run.stdout


def test_random_is_symbolic_before_numpy_random_is_imported():
    """NumPy imports ``numpy.random`` on first use: verify must patch it all the same (the real
    ``np.random.normal`` with symbolic sizes filled a symbolic array from C: a segfault)."""
    out = _fresh("import sys, numpy as np; from tensig import verify; "
                 "assert 'numpy.random' not in sys.modules; "
                 "r = verify(lambda x: np.random.normal(size=x.shape) + x, 'N, D => N, D'); "
                 "print(r.ok, r.result)")
    assert out.split()[0] == "True"


@pytest.mark.parametrize("call, codes", [
    ("np.random.default_rng().normal(size=x.shape) + x", []),
    ("np.random.RandomState(0).randn(*x.shape)", []),
    ("np.random.mtrand.RandomState(0).randn(*x.shape)", ["TS301"]),
    ("np.random.default_rng(0).standard_normal(x.shape)", []),
    ("np.random.default_rng(0).integers(0, 9, size=(x.shape[0], 1)) * x", []),
])
def test_generator_methods_build_real_arrays(call, codes):
    """A generator's methods are compiled code that calls NumPy's ``np.empty(size)`` and
    writes into the result: it must stay a real array (a symbolic one was a segfault), of the
    witness sizes, read back as the symbols under an assumption.  ``np.random.default_rng``'s
    and ``np.random.RandomState``'s take symbolic sizes as ``np.random``'s functions do."""
    out = _fresh("import numpy as np; from tensig import verify; "
                 f"fn = lambda x: {call}; "
                 "assert fn(np.ones((4, 3))).shape == (4, 3); "
                 "r = verify(fn, 'N, D => N, D'); "
                 "print(r.notes, [str(d) for d in r.result[0]], sorted({f.code for f in r}))")
    assert out.split("\n")[0] == f"[] ['N', 'D'] {codes}", out


@pytest.mark.parametrize("fn, sig", [
    (lambda a, b: np.hstack([a, b]), "T, d; T, e =>"),
    (lambda a, b: np.vstack([a, b]), "T, d; S, d =>"),
    (lambda a, b: np.dstack([a, b]), "T, d; T, d =>"),
    (lambda a, b: np.hstack([a, b]), "T; S =>"),
    (lambda a, b: np.column_stack([a, b]), "T; T, d =>"),
    (lambda a: np.pad(a, ((0, 0), (1, 2))), "T, d =>"),
    (lambda a: np.pad(a, 2), "T, d =>"),
    (lambda a: np.cumsum(a), "T, d =>"),
    (lambda a: np.cumsum(a, axis=1), "T, d =>"),
    (lambda a, b: np.outer(a, b), "T; S =>"),
    (lambda a, i: np.take(a, i.astype(int), axis=0), "T, d; K =>"),
    (lambda a: np.argsort(a, axis=-1), "T, d =>"),
    (lambda a: np.sort(a, axis=None), "T, d =>"),
    (lambda a, b: np.linalg.solve(a, b), "n, n; n =>"),
    (lambda a, b: np.linalg.solve(a, b), "B, n, n; B, n, k =>"),
    (lambda a: np.linalg.inv(a), "n, n =>"),
    (lambda a: np.linalg.det(a), "B, n, n =>"),
    (lambda a: np.linalg.eigh(a), "n, n =>"),
    (lambda a: np.linalg.svd(a), "n, n =>"),
    (lambda a: np.linalg.qr(a), "n, n =>"),
    (lambda a: np.linalg.cholesky(a), "n, n =>"),
    (lambda a, b: np.subtract.outer(a, b), "T; S =>"),
    (lambda a: np.add.accumulate(a, axis=0), "T, d =>"),
    (lambda a: a[::2] + a[1::2][:1], "T, d =>"),
    (lambda a: a[::-1], "T, d =>"),
    (lambda a: np.arange(0, a.shape[0], 3), "T =>"),
])
def test_long_tail_matches_numpy(fn, sig):
    r = verify(fn, sig)
    assert not errors(r) and r.complete, str(r)
    names = Signature.parse(sig).symbols
    for sizes in ({n: 4 + 2 * i for i, n in enumerate(names)}, dict.fromkeys(names, 6)):
        assert agrees(fn, sig, sizes, r), (sizes, r.result)


def test_linalg_checks_square_and_right_hand_side():
    assert kinds(verify(lambda a: np.linalg.inv(a), "n, m =>")) == ["contraction"]
    assert kinds(verify(lambda a, b: np.linalg.solve(a, b), "n, n; m =>")) == ["contraction"]
    assert kinds(verify(lambda a: np.linalg.det(a), "n, m =>")) == ["contraction"]


def test_data_dependent_sizes_are_fresh_sizes_not_crashes():
    for f in (lambda x: np.bincount(x.astype(int)), lambda x: np.unique(x),
              lambda x: np.nonzero(x)[0], lambda x: x[x > 0], lambda x: np.flatnonzero(x)):
        r = verify(f, "N =>")
        assert r.complete and not errors(r), str(r)
        ((d,),) = r.result
        assert d.constant is None and "N" not in d.symbols  # a new size, not N


def test_unique_along_an_axis_keeps_the_other_axes():
    """``np.unique(X, axis=0)`` is the distinct rows, ``[uniq, D]`` (it was ``[uniq]``), its
    inverse one index per row, ``[N]``; without an axis the inverse is ``X``'s shape (NumPy 2)."""
    x = np.array([[1, 2], [1, 2], [3, 4]])
    rows, index, inverse, counts = np.unique(x, axis=0, return_index=True,
                                             return_inverse=True, return_counts=True)
    assert (rows.shape, index.shape, inverse.shape, counts.shape) == ((2, 2), (2,), (3,), (2,))
    r = verify(lambda a: np.unique(a, axis=0, return_index=True, return_inverse=True,
                                   return_counts=True), "N, D =>")
    assert r.complete and not errors(r), str(r)
    (u, d), (i,), (n,), (c,) = r.result
    assert (str(d), str(n)) == ("D", "N") and u == i == c and u.constant is None
    ((n, u),) = verify(lambda a: np.unique(a, axis=-1), "N, D =>").result  # distinct columns
    assert str(n) == "N" and u.constant is None and not {"N", "D"} & set(u.symbols)
    r = verify(lambda a: np.unique(a, return_inverse=True)[1], "N, D =>")
    assert [list(map(str, dims)) for dims in r.result] == [["N", "D"]]


def test_assignment_into_arrays_checks_the_value():
    def ok(x, v):
        out = np.zeros((x.shape[0], x.shape[1]))
        for t in range(x.shape[0]):
            out[t] = x[t] * 2
        out[:, 0] += v
        return out

    def bad(x, v):
        out = np.zeros_like(x)
        out[0] = v  # a [T] row written into a [d] row
        return out

    def bad_inplace(x, v):
        x[:, 0] += x  # [T, d] added into a column
        return x

    assert verify(ok, "T, d; T => T, d").ok
    assert kinds(verify(bad, "T, d; T => T, d")) == ["broadcast"]
    assert "broadcast" in kinds(verify(bad_inplace, "T, d; T => T, d"))


def test_loop_indices_near_the_end_are_symbolic():
    def returns(rewards):
        n = len(rewards)
        out = np.zeros(n)
        for t in reversed(range(n)):
            out[t] = rewards[t] + (out[t + 1] if t + 1 < n else 0.0)
        return out

    r = verify(returns, "T => T")
    assert not errors(r) and r.complete, str(r)
    assert len(r.findings) <= 2  # one assumption per line at most, never one per step


# -- 2. concrete buffers met by symbolic sizes -------------------------------------------------


PE = np.zeros((32, 16))


def test_concrete_buffer_sliced_by_a_symbol_is_a_warning_not_a_false_alarm():
    def add_positions(x):
        return x + PE[: x.shape[0]]

    r = verify(add_positions, "T, 16 => T, 16")
    assert kinds(r, "error") == [] and r.complete, str(r)
    assert kinds(r) == ["assumption"] and "read as T" in r.findings[0].message


def test_recorded_divisibility_is_used_by_later_checks():
    def f(x, w):
        return np.concatenate(np.split(x, 4, -1), -1) @ w

    r = verify(f, "T, d; d, d => T, d")
    assert kinds(r, "error") == [], str(r)

    def halves(x):
        h = x.shape[-1] // 2
        return x[..., :h] * x[..., h:]

    assert kinds(verify(halves, "T, d =>"), "error") == []


# -- 3. NumPy's long tail: fitting -----------------------------------------------------------


@pytest.mark.parametrize("fn, sig", [
    (lambda a: np.roll(np.flip(a, 0), 2, axis=1), "B, T =>"),
    (lambda a: np.diff(a, axis=1), "B, T =>"),
    (lambda a: np.repeat(a, 3, axis=0), "B, T =>"),
    (lambda a, b: np.kron(a, b), "B, T; C, S =>"),
    (lambda a: np.ravel(a), "B, T =>"),
    (lambda a: np.fft.rfft(a), "B, T =>"),
    (lambda a: np.tile(a, (2, 1)), "B, T =>"),
    (lambda a, w: np.lib.stride_tricks.sliding_window_view(a, w.shape[0]), "L; K =>"),
    (lambda a: np.diag(a), "T, T =>"),
    (lambda a: np.convolve(a, np.ones(3), mode="valid"), "L =>"),
])
def test_fitted_sizes_match_numpy(fn, sig):
    r = verify(fn, sig)
    assert not errors(r) and r.complete, str(r)
    names = Signature.parse(sig).symbols
    for sizes in ({n: 9 + 3 * i for i, n in enumerate(names)},
                  {n: 20 - 4 * i for i, n in enumerate(names)}):
        try:
            expected_ok = agrees(fn, sig, sizes, r)
        except ValueError:  # outside the function's domain (a window longer than its input)
            continue
        assert expected_ok, (sizes, r.result)


def test_a_size_that_does_not_fit_is_a_fresh_size_with_a_warning():
    r = verify(lambda a: np.resize(a, a.shape[0] ** 3), "T =>")  # T**3: no product tried
    assert kinds(r) == ["assumption"] and r.complete
    ((d,),) = r.result
    assert "T" not in d.symbols and d.constant is None


def test_fitting_refuses_witness_arrays_too_large_to_evaluate():
    r = verify(lambda a: np.diff(a, axis=1), "B, 1000, 3000 =>")  # no 3e9-element evaluation
    assert not r.complete and "too large" in r.notes[0], str(r)


def test_fitted_operation_reports_shape_failures():
    r = verify(lambda a, b: np.cross(a, b), "N, 3; M, 3 =>")
    assert kinds(r, "error") == ["broadcast"], str(r)
    assert "N" in r.findings[0].message and "M" in r.findings[0].message


@pytest.mark.parametrize("fn, sig, kind", [
    (lambda a, b: np.histogram(a, bins=3, weights=b)[0], "N, M; K =>", "op-shape"),
    (lambda a, b: np.cross(a, b), "N, 5; N, 5 =>", "op-shape"),
    (lambda a: np.diag(a), "N, M, K =>", "op-shape"),
    (lambda a, b: np.broadcast_arrays(a, b)[0], "N, M; K =>", "broadcast"),
    ("diag", "N, M, K =>", "op-shape"),
    ("dynamic_update_slice", "B, S, H; B, H =>", "op-shape"),
    ("take_along_axis", "N, M; K, L: int =>", "broadcast")])
def test_a_fitted_op_s_refusal_is_labelled_by_what_the_library_says(fn, sig, kind):
    """NumPy's and JAX's fitted refusals were "contraction" unless the message said
    "broadcast" (a histogram's weights, a cross product of 5-vectors, a slice update of
    another rank), torch's always "op-shape": one rule for the three now, a broadcast where
    the library says so, else the op's refusal; ``np.diag`` of a 3-d array stopped the trace."""
    if isinstance(fn, str):
        jax = pytest.importorskip("jax")
        fn = {"diag": lambda a: jax.numpy.diag(a),
              "dynamic_update_slice": lambda a, u: jax.lax.dynamic_update_slice(a, u, (0, 0, 0)),
              "take_along_axis": lambda a, i: jax.numpy.take_along_axis(a, i, axis=1)}[fn]
    r = verify(fn, sig)
    assert kinds(r, "error")[:1] == [kind] and not r.notes, str(r)
    assert "at every size" in r.findings[0].message, str(r)


def test_a_fitted_constant_size_is_run_below_the_literal_it_came_from():
    """``np.diag`` of ``[B, 3]`` is ``[min(B, 3)]``, and ``top_k(x, 3)`` needs 3 elements: the
    fit, at witnesses above 3, read ``[3]`` and ``[B, 3]`` for every size.  Run at 2, the
    result (or the refusal) differs: verified only where ``3 <= B`` (``3 <= T``)."""
    r = verify(lambda x: np.diag(x), "B, 3 => 3")
    assert kinds(r) == ["assumption"] and "assumes 3 <= B" in str(r), str(r)
    assert np.diag(np.zeros((2, 3))).shape == (2,)  # the oracle: NumPy at B = 2
    jax = pytest.importorskip("jax")
    r = verify(lambda x: jax.lax.top_k(x, 3)[0], "B, T => B, 3")
    assert kinds(r) == ["assumption"] and "assumes 3 <= T" in str(r), str(r)
    assert verify(lambda x: np.diag(x), "3, 3 => 3").ok  # no symbol: nothing below
    r = verify(lambda x: np.vander(x, 3), "B => B, 3")  # fitted, and [B, 3] at every B
    assert r.ok and not r.findings, str(r)


def test_lax_binary_operations_do_not_broadcast():
    """``lax.add`` of ``[B, T]`` and ``[T]`` is an error (JAX refuses it at every size, unlike
    ``jnp.add``); equal shapes and a scalar operand pass."""
    jax = pytest.importorskip("jax")
    lax = jax.lax
    with pytest.raises(TypeError, match="same number of dimensions"):  # the oracle
        lax.add(jax.numpy.ones((2, 3)), jax.numpy.ones(3))
    r = verify(lambda x, y: lax.add(x, y), "B, T; T => B, T")
    assert errors(r) and "lax does not broadcast" in errors(r)[0], str(r)
    assert verify(lambda x, y: lax.mul(x, y), "B, T; B, T => B, T").ok
    assert verify(lambda x: lax.sub(x, 2.0), "B, T => B, T").ok


def _array_functions() -> list[tuple[str, Any]]:
    out = []
    for prefix, module in (("", np), ("linalg.", np.linalg), ("fft.", np.fft)):
        for name in sorted(dir(module)):
            obj = getattr(module, name)
            if not name.startswith("_") and type(obj).__name__ == "_ArrayFunctionDispatcher":
                out.append((prefix + name, obj))
    return out


_RECIPES = [("B, T =>", 1), ("B, T; B, T =>", 2), ("T =>", 1), ("T; T =>", 2), ("T, T =>", 1)]


def _coverage() -> tuple[int, int, int, list[str]]:
    total, exercised, traced, missing = 0, 0, 0, []
    for name, func in _array_functions():
        total += 1
        for sig, n in _RECIPES:
            fn = (lambda a, f=func: f(a)) if n == 1 else (lambda a, b, f=func: f(a, b))
            names = Signature.parse(sig).symbols
            sizes = {s: 4 + 2 * i for i, s in enumerate(names)}
            try:
                args = [np.ones(tuple(d.evaluate(sizes) for d in dims)) + np.eye(1)[0, 0]
                        for dims in Signature.parse(sig).args]
                real = fn(*args)
                if not all(hasattr(o, "shape") for o in
                           (real if isinstance(real, tuple) else (real,))):
                    continue
            except Exception:
                continue
            exercised += 1
            try:
                r = verify(fn, sig)
                ok = r.complete and not errors(r) and all(
                    d.symbols <= set(names) or True for dims in r.result or () for d in dims)
                ok = ok and _matches(real, r, sizes)
            except Exception:
                ok = False
            traced += ok
            if not ok:
                missing.append(name)
            break
    return total, exercised, traced, missing


def _matches(real: Any, r: Report, sizes: dict[str, int]) -> bool:
    items = real if isinstance(real, tuple) else (real,)
    if r.result is None or len(r.result) != len(items):
        return False
    for o, dims in zip(items, r.result, strict=True):
        if len(dims) != np.ndim(o):
            return False
        for d, s in zip(dims, np.shape(o), strict=True):
            if d.symbols <= set(sizes) and d.evaluate(sizes) != s:
                return False
    return True


def test_coverage_of_numpy_array_functions():
    """The share of NumPy's ``__array_function__`` functions that verify traces, checked
    against NumPy's own result shapes at sizes other than the witnesses."""
    total, exercised, traced, missing = _coverage()
    print(f"\nNumPy array functions: {total}; exercised by a simple call: {exercised}; "
          f"traced with the right shape: {traced} ({traced / exercised:.0%})")
    print("not traced:", ", ".join(missing))
    assert exercised >= 180
    assert traced / exercised >= 0.95


# -- 4. JAX ------------------------------------------------------------------------------------


jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


def jax_model(x):
    return jnp.tanh(x)


def test_jax_reproductions():
    assert verify(lambda x: jax_model(x), "N, D => N, D").ok
    assert verify(lambda q: jnp.tanh(q) / math.sqrt(q.shape[-1]), "T, d => T, d").ok
    r = verify(lambda p, y: jnp.sum((p - y) ** 2), "N; N, 1 =>")
    assert kinds(r) == ["outer-product"]
    r = verify(lambda y: y.reshape(y.shape[0], y.shape[2], y.shape[1]), "B, T, E =>")
    assert kinds(r) == ["reorder"]  # a reshape that moves axes (TS202)


def test_jax_transformations_and_control_flow():
    def mlp(w, x):
        return jax.nn.relu(w @ x)

    assert verify(lambda w, X: jax.vmap(mlp, in_axes=(None, 0))(w, X), "H, D; B, D => B, H").ok
    assert kinds(verify(lambda w, X: jax.vmap(mlp, in_axes=(None, 1))(w, X),
                        "H, D; B, D => B, H"), "error")
    assert verify(lambda x: jax.jit(jnp.sin)(x) + 1, "N => N").ok
    assert verify(lambda x, i, v: x.at[i].set(v), "N, D; ; D => N, D").ok
    assert kinds(verify(lambda x, v: x.at[0].set(v), "N, D; N => N, D")) == ["broadcast"]
    loss = verify(lambda w, x: jax.grad(lambda w: jnp.sum((x @ w) ** 2))(w), "D, H; B, D => D, H")
    assert loss.ok, str(loss)
    assert kinds(verify(lambda w, x: jax.grad(lambda w: x @ w)(w), "D, H; B, D =>")) \
        == ["return-shape"]

    def cumulative(xs):
        def step(c, x):
            return c + x, c * x
        return jax.lax.scan(step, jnp.zeros(xs.shape[1:]), xs)[1]

    assert verify(cumulative, "T, D => T, D").ok

    def growing(xs):
        return jax.lax.fori_loop(0, 3, lambda i, c: jnp.concatenate([c, c]), xs)

    assert kinds(verify(growing, "T =>")) == ["broadcast"]


def test_jax_fitting_and_exceptions():
    r = verify(lambda x: jax.nn.dot_product_attention(x, x, x), "B, T, N, H => B, T, N, H")
    assert r.ok, str(r)
    r = verify(lambda x: jnp.fft.rfft(x), "B, T =>")
    assert r.ok and str(r.result[0][1]) == "T // 2 + 1", str(r)

    # an exception inside JAX that is not a shape error is a note, not a finding
    compiled = jax.jit(lambda x: jnp.asarray(float(x.sum())))
    r = verify(lambda x: compiled(x) + x, "N => N")
    assert r.findings == [] and not r.complete, str(r)


def test_jax_function_jitted_at_import_falls_back_to_jax_shapes():
    norm = jax.jit(lambda x: x - x.mean(-1, keepdims=True))
    assert verify(lambda x: x + norm(x), "B, D => B, D").ok
    assert kinds(verify(lambda x: x + norm(x).mean(-1), "B, D => B, D")) == ["broadcast"]
    assert verify(norm, "B, D => B, D").ok  # jitted itself: its Python function is traced


# -- the corpus ---------------------------------------------------------------------------------


def _corpus() -> list[tuple[str, Any, Any, str]]:
    cases = []
    for path in sorted(CORPUS.glob("numpy_*.py")) + sorted(CORPUS.glob("jax_*.py")):
        spec = importlib.util.spec_from_file_location(f"verify_corpus_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        cases += module.CASES
    return cases


def test_corpus_verifies_clean_and_catches_every_injected_bug():
    cases = _corpus()
    verified, caught, false_alarms, crashes, warned = 0, 0, [], [], 0
    for name, good, bad, sig in cases:
        try:
            r = verify(good, sig)
            rb = verify(bad, sig)
        except Exception as e:  # a crash of verify itself
            crashes.append(f"{name}: {type(e).__name__}: {e}")
            continue
        if errors(r) or r.notes:
            false_alarms.append(f"{name}: {r}")
        else:
            verified += 1
            warned += bool(r.findings)
        caught += bool(errors(rb))
    n = len(cases)
    print(f"\nNumPy/JAX corpus: verified {verified}/{n} (with warnings: {warned}), caught "
          f"{caught}/{n}, false alarms {len(false_alarms)}, crashes {len(crashes)}")
    assert n >= 14
    assert not crashes, crashes
    assert not false_alarms, "\n".join(false_alarms)
    assert verified == n and caught == n


def test_a_literal_size_is_run_below_even_where_another_symbol_s_division_sets_the_step():
    """``np.diag`` of ``[V, 4]`` is ``[min(V, 4)]``; a division assumed of another symbol made
    the step 2, and the run just below the literal (``V = 3``, of the other residue) was
    skipped: only ``N divisible by 2`` was said, and the code fails at ``N = 6, V = 3``."""
    def f(x, z):
        x.reshape(-1, 2)
        return np.diag(z) + np.ones(4)

    with pytest.raises(ValueError, match="broadcast"):  # the oracle
        f(np.zeros(6), np.zeros((3, 4)))
    r = verify(f, "N; V, 4 =>")
    assert "assumes 4 <= V" in str(r), str(r)
