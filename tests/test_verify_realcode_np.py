"""verify on classic NumPy/SciPy/JAX numerics written the way public implementations write
them (k-means, GMM EM, HMMs, Kalman filters, PCA, t-SNE, im2col, RL advantages): each test is a
pattern that verify once stopped on, false-alarmed on, or missed.

The functions are annotated with jaxtyping-style shape annotations, as verified files are.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.special
from scipy.ndimage import uniform_filter1d
from scipy.spatial.distance import cdist
from scipy.special import logsumexp

from arrays import clean, holds_for_corpus, kinds
from tensig import Float, Int
from tensig.check.verify import verify
from verify_corpus.probe_np_more import gae, gram_schmidt, im2col, im2col_bug

# -- NumPy's own conversions and in-place ufunc methods ------------------------------------------


def test_asarray_and_array_of_symbolic_arrays():
    def standardize(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        X = np.asarray(X, dtype=np.float64)  # scikit-learn's first line
        return (X - X.mean(axis=0)) / X.std(axis=0)

    def pair(a: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "2, N, D"]:
        return np.array([a, 2 * a])

    assert clean(verify(standardize)), str(verify(standardize))
    assert clean(verify(pair)), str(verify(pair))


def test_array_ndmin_prepends_axes():
    def row(v: Float[np.ndarray, "N"]) -> Float[np.ndarray, "1, N"]:
        return np.array(v, ndmin=2)

    def row_bug(v: Float[np.ndarray, "N"]) -> Float[np.ndarray, "N"]:
        return np.array(v, ndmin=2)  # [1, N]

    assert clean(verify(row)), str(verify(row))
    assert "return-shape" in kinds(verify(row_bug)), str(verify(row_bug))


def test_ufunc_at_scatters_and_checks_the_value():
    def centroids(X: Float[np.ndarray, "N, D"], labels: Int[np.ndarray, "N"],
                  C: Float[np.ndarray, "K, D"]) -> Float[np.ndarray, "K, D"]:
        sums = np.zeros_like(C)
        np.add.at(sums, labels, X)
        counts = np.bincount(labels, minlength=C.shape[0])
        return sums / np.maximum(counts, 1)[:, None]

    def centroids_bug(X: Float[np.ndarray, "N, D"], labels: Int[np.ndarray, "N"],
                      C: Float[np.ndarray, "K, D"]) -> Float[np.ndarray, "K, D"]:
        sums = np.zeros_like(C)
        np.add.at(sums, labels, X.T)  # the points transposed
        return sums

    r = verify(centroids)
    assert r.ok and not r.notes, str(r)
    assert "broadcast" in kinds(verify(centroids_bug))


def test_flat_view_of_the_diagonal():
    def regularized(X: Float[np.ndarray, "N, D"], reg: float = 1e-6) -> Float[np.ndarray, "D, D"]:
        cov = X.T @ X / X.shape[0]
        cov.flat[:: X.shape[1] + 1] += reg  # scikit-learn's GaussianMixture
        return cov

    assert clean(verify(regularized)), str(verify(regularized))


# -- einsum with an ellipsis ---------------------------------------------------------------------


def test_einsum_with_ellipsis():
    def batched_quad(A: Float[np.ndarray, "B, N, N"], x: Float[np.ndarray, "B, N"]
                     ) -> Float[np.ndarray, "B"]:
        return np.einsum("...i,...ij,...j->...", x, A, x)

    def implicit(A: Float[np.ndarray, "B, T, N, M"]) -> Float[np.ndarray, "B, T, M, N"]:
        return np.einsum("...ij->...ji", A)

    def broadcast_batch(A: Float[np.ndarray, "N, M"], x: Float[np.ndarray, "B, T, M"]
                        ) -> Float[np.ndarray, "B, T, N"]:
        return np.einsum("ij,...j->...i", A, x)

    def bug(A: Float[np.ndarray, "B, N, M"], x: Float[np.ndarray, "B, N"]
            ) -> Float[np.ndarray, "B, N"]:
        return np.einsum("...ij,...j->...i", A, x)  # contracts M with N

    for f in (batched_quad, implicit, broadcast_batch):
        assert clean(verify(f)), str(verify(f))
    assert "contraction" in kinds(verify(bug))


def test_einsum_of_the_wrong_rank_is_a_finding_not_a_crash():
    def f(Y: Float[np.ndarray, "N, E"], P: Float[np.ndarray, "N, N"]) -> Float[np.ndarray, "N, E"]:
        diff = Y[:, None, :] - Y[None, :, :]
        return np.einsum("ij,ijk->ik", P, diff.sum(0))  # the pair axis summed away

    r = verify(f)
    assert "contraction" in kinds(r) and not r.notes, str(r)


def test_einsum_output_index_in_no_operand_and_ellipsis_axes_named():
    def typo(a: Float[np.ndarray, "N, D"], b: Float[np.ndarray, "D, M"]
             ) -> Float[np.ndarray, "N, _"]:
        return np.einsum("ij,jk->il", a, b)  # NumPy: ValueError

    def batch_bug(a: Float[np.ndarray, "B, N, D"], b: Float[np.ndarray, "N, D"]
                  ) -> Float[np.ndarray, "B, N"]:
        return np.einsum("...d,...d->...", a, b.T)

    r = verify(typo)
    assert any("output index 'l' is in no operand" in f.message for f in r.findings), str(r)
    r = verify(batch_bug)
    assert any("'...' axis is N in one operand and D" in f.message for f in r.findings), str(r)


# -- SciPy -----------------------------------------------------------------------------------------


def _gmm_weighted(X, means, precisions_chol, log_w):
    """scikit-learn's weighted log-probabilities of each sample under each component."""
    n, d = X.shape
    log_prob = np.empty((n, means.shape[0]))
    for k, (mu, prec) in enumerate(zip(means, precisions_chol, strict=True)):
        y = X @ prec - mu @ prec
        log_prob[:, k] = np.sum(np.square(y), axis=1)
    return -0.5 * (d * np.log(2 * np.pi) + log_prob) + log_w


def gmm_log_resp(X: Float[np.ndarray, "N, D"], means: Float[np.ndarray, "K, D"],
                 precisions_chol: Float[np.ndarray, "K, D, D"], log_w: Float[np.ndarray, "K"]
                 ) -> Float[np.ndarray, "N, K"]:
    weighted = _gmm_weighted(X, means, precisions_chol, log_w)
    return weighted - logsumexp(weighted, axis=1)[:, np.newaxis]


def gmm_log_resp_bug(X: Float[np.ndarray, "N, D"], means: Float[np.ndarray, "K, D"],
                     precisions_chol: Float[np.ndarray, "K, D, D"], log_w: Float[np.ndarray, "K"]
                     ) -> Float[np.ndarray, "N, K"]:
    weighted = _gmm_weighted(X, means, precisions_chol, log_w)
    return weighted - logsumexp(weighted, axis=1)  # the normalizer not spread over K


def test_scipy_logsumexp_imported_by_name():
    r = verify(gmm_log_resp)
    assert clean(r), str(r)
    assert "broadcast" in kinds(verify(gmm_log_resp_bug))


def test_scipy_linalg_and_cdist():
    def gp_mean(Xtr: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"],
                Xte: Float[np.ndarray, "M, D"]) -> Float[np.ndarray, "M"]:
        K = np.exp(-cdist(Xtr, Xtr, "sqeuclidean")) + 1e-3 * np.eye(len(Xtr))
        c, lower = scipy.linalg.cho_factor(K)
        alpha = scipy.linalg.cho_solve((c, lower), y)
        L = scipy.linalg.cholesky(K, lower=True)
        v = scipy.linalg.solve_triangular(L, np.exp(-cdist(Xtr, Xte)), lower=True)
        return np.exp(-cdist(Xte, Xtr)) @ alpha + 0 * v.sum(axis=0)

    def gp_mean_bug(Xtr: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"],
                    Xte: Float[np.ndarray, "M, D"]) -> Float[np.ndarray, "M"]:
        K = np.exp(-cdist(Xtr, Xtr, "sqeuclidean")) + 1e-3 * np.eye(len(Xtr))
        alpha = scipy.linalg.cho_solve(scipy.linalg.cho_factor(K), y)
        return np.exp(-cdist(Xtr, Xte)) @ alpha  # kernel matrix the wrong way round

    def softmax_rows(z: Float[np.ndarray, "N, C"]) -> Float[np.ndarray, "N, C"]:
        return scipy.special.softmax(z, axis=1) * scipy.special.expit(z)

    assert clean(verify(gp_mean)), str(verify(gp_mean))
    assert clean(verify(softmax_rows)), str(verify(softmax_rows))
    assert "contraction" in kinds(verify(gp_mean_bug))
    assert "contraction" in kinds(verify(lambda a, b: cdist(a, b), "N, D; M, E => N, M"))


def test_scipy_is_patched_again_on_every_verify_and_after_a_rebinding():
    """The scan of a module's globals for SciPy is kept between verify calls (it cost more than
    the rest of the setup): a second verify still patches SciPy, a name rebound since (to
    SciPy's function, then away from it) is seen."""
    namespace = {"np": np}
    exec("def pool(x):\n    return logsumexp(x, axis=0)  # meant axis=1", namespace)
    pool = namespace["pool"]
    namespace["logsumexp"] = lambda x, axis=None: np.log(np.exp(x).sum(axis=axis))  # NumPy's
    assert kinds(verify(pool, "B, T => B")) == ["return-shape"]
    namespace["logsumexp"] = logsumexp
    for _ in range(2):
        r = verify(pool, "B, T => B")
        assert kinds(r) == ["return-shape"] and not r.notes, str(r)
    namespace["logsumexp"] = lambda x, axis=None: x  # no SciPy left: its result is kept
    assert clean(verify(pool, "B, T => B, T")), str(verify(pool, "B, T => B, T"))


def test_sizes_equal_under_a_divisibility_assumption_match():
    """``4 * (D // 4)`` is ``D`` once the code requires ``D`` divisible by 4 (the heads'
    reshape): cdist, solve and average compared sizes with ``!=`` and reported a mismatch."""
    def split(v, axis):  # heads and back, as attention code does
        n = v.shape[axis] // 4
        return v.reshape(*v.shape[:axis], 4, n).reshape(*v.shape[:axis], 4 * n)

    def fine(x, y, a, b):
        return (cdist(x, split(y, 1)), np.linalg.solve(a, split(b, 0)),
                np.average(a, axis=0, weights=split(b, 0)))

    r = verify(fine, "N, D; M, D; D, D; D => N, M; D; D")
    assert kinds(r) == ["assumption"], str(r)
    r = verify(lambda a, b: np.average(a, axis=1, weights=split(b, 0)[:-1]), "D, D; D =>")
    assert "broadcast" in kinds(r), str(r)


def test_scipy_function_not_modelled_is_fitted():
    r = verify(lambda x: uniform_filter1d(x, 3, axis=1), "B, T => B, T")
    assert clean(r), str(r)


# -- loops filling preallocated arrays -----------------------------------------------------------


def hmm_forward(pi: Float[np.ndarray, "K"], A: Float[np.ndarray, "K, K"],
                B: Float[np.ndarray, "K, V"], obs: Int[np.ndarray, "T"]
                ) -> Float[np.ndarray, "T, K"]:
    T, K = len(obs), len(pi)
    alpha = np.zeros((T, K))
    alpha[0] = pi * B[:, obs[0]]
    for t in range(1, T):
        alpha[t] = (alpha[t - 1] @ A) * B[:, obs[t]]
        alpha[t] /= alpha[t].sum()
    return alpha


def test_loop_indices_assume_nothing():
    """``t - 1`` in ``range(1, T)``, ``t + 1`` guarded by ``t == T - 1``, ``range(j)`` inside
    ``range(K)``, the count of ``enumerate`` over rows: all in range, no assumption."""
    for f in (hmm_forward, gae, gram_schmidt, gmm_log_resp):
        r = verify(f)
        assert clean(r), str(r)


def test_loop_index_past_the_end_is_still_found():
    def lookahead(x: Float[np.ndarray, "T, D"]) -> Float[np.ndarray, "T, D"]:
        out = np.zeros_like(x)
        for t in range(len(x)):
            out[t] = x[t + 1] - x[t]  # the last step reads past the end
        return out

    def unguarded(values: Float[np.ndarray, "T"]) -> Float[np.ndarray, "T"]:
        out = np.zeros_like(values)
        for t in reversed(range(len(values))):
            out[t] = values[t + 2]
        return out

    assert "index" in kinds(verify(lookahead)), str(verify(lookahead))
    assert "index" in kinds(verify(unguarded)), str(verify(unguarded))


def test_loop_end_offset_beyond_the_traced_steps_is_assumed():
    """``t > T - 20`` is true at every traced step for a witness below 20, false for early steps
    of a long loop: the branch is assumed (its other side, past the end, is never traced)."""
    def skip_tail(x: Float[np.ndarray, "T, D"]) -> Float[np.ndarray, "T, D"]:
        out = np.zeros_like(x)
        for t in range(len(x)):
            if t > len(x) - 20:
                out[t] = x[t]
            else:
                out[t] = x[t + 25]  # past the end: only a long sequence takes this side
        return out

    assert "assumption" in kinds(verify(skip_tail)), str(verify(skip_tail))


def test_range_of_a_loop_index_keeps_negative_starts():
    counts = []

    def pairs(x: Float[np.ndarray, "K, D"]) -> Float[np.ndarray, "D"]:
        n = 0
        for j in range(x.shape[0]):
            for _ in range(-1, j):
                n += 1
        counts.append((n, int(x.shape[0])))
        return x[0]

    verify(pairs)
    n, k = counts[-1]
    assert n == sum(j + 1 for j in range(k)), counts


def test_first_step_only_index_past_a_short_loop():
    """A first step's ``t + 1`` is taken as in range as the loop's last steps check it; a loop
    left before them assumes it (as before the loop rule)."""
    def first_difference(x: Float[np.ndarray, "T, D"]) -> Float[np.ndarray, "D"]:
        for t in range(len(x)):
            d = x[t + 1] - x[t]  # T == 1: out of range
            break
        return d

    r = verify(first_difference)
    assert any("assumes 1 < T" in f.message and f.line for f in r.findings), str(r)


def test_sliding_window_view_needs_a_window_per_axis_and_a_window_that_fits():
    swv = np.lib.stride_tricks.sliding_window_view

    def no_axis(x: Float[np.ndarray, "N, T"]) -> Float[np.ndarray, "N, _, 3"]:
        return swv(x, 3)  # NumPy: axis=None wants a window for each of the 2 axes

    def too_long(x: Float[np.ndarray, "N, T"]) -> Float[np.ndarray, "N, _, _"]:
        return swv(x, x.shape[1] + 1, axis=1)

    def last_axis(x: Float[np.ndarray, "N, T"]) -> Float[np.ndarray, "N, _, 3"]:
        return swv(x, 3, axis=-1)

    assert "op-shape" in kinds(verify(no_axis)), str(verify(no_axis))
    assert "op-shape" in kinds(verify(too_long)), str(verify(too_long))
    r = verify(last_axis)  # NumPy refuses a window longer than T
    assert kinds(r) == ["assumption"] and "assumes 3 <= T" in str(r), str(r)


# -- im2col with a stride: window counts are sums -----------------------------------------------


def test_reshape_with_window_counts():
    """``-1`` divides a product of sums (``N*oh*ow*C*K*K / (N*oh*ow)``), and a reshape that moves
    an axis past a sum-sized one is still a reorder."""
    r = verify(im2col)  # the windows fit: K <= H and K <= W, assumed
    assert kinds(r) == ["assumption"] * 2 and "assumes K <= W" in str(r), str(r)
    assert kinds(verify(im2col_bug), "error") == ["reorder"], str(verify(im2col_bug))
    r = verify(lambda x: x[:, 2:].reshape(-1, x.shape[2]).reshape(x.shape[0], -1, x.shape[2]),
               "N, H, F => N, H - 2, F")
    assert clean(r), str(r)


# -- NumPy idioms of scikit-learn-style code -----------------------------------------------------


def test_dot_ravel_and_index_tricks():
    def fit_intercept(X: Float[np.ndarray, "N, D"], w: Float[np.ndarray, "D+1, 1"]
                      ) -> Float[np.ndarray, "N"]:
        Xb = np.c_[np.ones(len(X)), X]
        return Xb.dot(w).ravel()

    def fit_intercept_bug(X: Float[np.ndarray, "N, D"], w: Float[np.ndarray, "D+1, 1"]
                          ) -> Float[np.ndarray, "N"]:
        Xb = np.r_[np.ones(len(X)), X]  # rows where a column was meant
        return Xb.dot(w).ravel()

    assert clean(verify(fit_intercept)), str(verify(fit_intercept))
    assert kinds(verify(fit_intercept_bug))[0] == "concat", str(verify(fit_intercept_bug))
    r = verify(lambda a, b: np.r_[a, b, 1.0], "N; M => N + M + 1")
    assert clean(r), str(r)


def test_average_weights_of_another_shape_must_be_one_axis():
    def same_rank(X: Float[np.ndarray, "N, D"], w: Float[np.ndarray, "1, D"]
                  ) -> Float[np.ndarray, "D"]:
        return np.average(X, axis=0, weights=w)  # NumPy: not a's shape, not 1-d: an error

    def full(X: Float[np.ndarray, "N, D"], w: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, ""]:
        return np.average(X, weights=w)

    assert "broadcast" in kinds(verify(same_rank)), str(verify(same_rank))
    assert clean(verify(full)), str(verify(full))


def test_triangle_indices_kron_and_weighted_average():
    def upper(D: Float[np.ndarray, "N, N"]) -> Float[np.ndarray, "N*(N-1)//2"]:
        return D[np.triu_indices(D.shape[0], k=1)]

    def lower(C: Float[np.ndarray, "N, N"]) -> Float[np.ndarray, "N*(N+1)//2"]:
        return C[np.tril_indices_from(C)]

    def weighted(X: Float[np.ndarray, "N, D"], w: Float[np.ndarray, "N"]) -> Float[np.ndarray, "D"]:
        return np.average(X, axis=0, weights=w)

    def weighted_bug(X: Float[np.ndarray, "N, D"], w: Float[np.ndarray, "N"]
                     ) -> Float[np.ndarray, "N"]:
        return np.average(X, axis=1, weights=w)  # weights per point, averaged per feature

    for f in (upper, lower, weighted):
        assert clean(verify(f)), str(verify(f))
    assert kinds(verify(weighted_bug)) == ["broadcast"], str(verify(weighted_bug))
    r = verify(lambda a, b: np.kron(a, b), "N, N; M, M => N*M, N*M")
    assert clean(r), str(r)


def test_triangle_counts_against_numpy_at_every_offset():
    """NumPy's triangle indices count as torch's do (one formula, in ``n``), exact from the size
    an assumption names on: the polynomial of a diagonal beyond the matrix (``k`` past ``n``)
    was negative or too large without a warning.  A symbolic ``k`` gets a fresh size (it was
    counted at its witness)."""
    for fn in (np.triu_indices, np.tril_indices):
        for k in range(-6, 7):
            r = verify(lambda a, f=fn.__name__, k=k: getattr(np, f)(a.shape[0], k, a.shape[0])[0],
                       "F =>")
            assert not r.errors and not r.notes and len(r.findings) <= 1, str(r)
            least = int(r.findings[0].message.split(":")[0].removeprefix("assumes F >= ")) \
                if r.findings else 1
            count = r.result[0][0]
            assert all(count.evaluate({"F": n}) == len(fn(n, k)[0]) for n in range(least, 12))
            assert least == 1 or count.evaluate({"F": least - 1}) != len(fn(least - 1, k)[0])
    r = verify(lambda a: np.triu_indices(a.shape[0], a.shape[1] // 2)[0], "F, G =>")
    assert r.result[0][0].constant is None and "G" not in str(r.result[0][0]), str(r)
    assert verify(lambda a: np.triu_indices(a.shape[0], 9)[0], "3 =>").result[0] == (0,)


# -- the corpus ---------------------------------------------------------------------------------


def test_probe_corpus_correct_ones_verify_and_each_bug_gives_its_code():
    from verify_corpus.probe_np_more import CASES

    holds_for_corpus(CASES, 12)


def test_size_attribute_and_one_fresh_size_per_sampled_value():
    def flat_pairs(a: Float[np.ndarray, "N, N"]) -> Float[np.ndarray, "N*N"]:
        i, j = np.unravel_index(np.arange(a.size), a.shape)  # one length, fitted as fresh
        return a[i, j]

    r = verify(flat_pairs)
    assert r.ok and not r.notes and kinds(r) in ([], ["assumption"]), str(r)
    r = verify(lambda a: a.reshape(a.size(0), -1), "N, K, 2 => N, 2*K")  # torch's size()
    assert clean(r), str(r)
