"""verify on the NumPy probe of 2026 (``verify_corpus/probe_np_2026.py``: HMMs, mixtures, GP
regression, Newton's method, PCA whitening, FastICA, t-SNE, clustering, stride-trick and FFT
convolutions, particle filters, tabular RL, smoothers, Monte-Carlo, bootstrap, resizing), and
the patterns of it that verify once stopped on, false-alarmed on or missed.

The functions are annotated with jaxtyping-style shape annotations, as verified files are.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import scipy.linalg
import scipy.signal
from numpy.lib.stride_tricks import as_strided
from scipy.spatial.distance import pdist, squareform

from arrays import clean, holds_for_corpus, kinds
from tensig import Float, Int
from tensig.check.verify import verify

# -- the corpus ----------------------------------------------------------------------------------


def test_probe_2026_correct_ones_verify_and_each_bug_gives_its_code():
    from verify_corpus.probe_np_2026 import CASES

    holds_for_corpus(CASES, 40)


def test_probe_2026_size_conditions_the_code_relies_on_are_its_only_warning():
    """Correct code that holds only where one size bounds another (the k smallest of N, the
    first K eigenvectors of N, a window of K on N samples): that condition is its one finding,
    a warning; the twin's bug is still found."""
    from verify_corpus.probe_np_2026 import ASSUMING

    for name, good, bad, code, condition in ASSUMING:
        r, rb = verify(good), verify(bad)
        assert not r.notes and set(kinds(r)) == {"assumption"}, f"{name}: {r}"
        assert r.findings[0].message.startswith(f"assumes {condition}:"), f"{name}: {r}"
        assert code in [f.code for f in rb], f"{name}: {rb}"


# -- stride tricks -------------------------------------------------------------------------------


def test_as_strided_takes_its_shape_and_the_array_has_strides():
    """cs231n's and many blogs' convolutions view ``x`` with ``as_strided(x, shape,
    x.strides + ...)``: ``x.strides`` stopped the trace, and ``as_strided`` reads the array's
    memory in C (patched by name too: ``from numpy.lib.stride_tricks import as_strided``)."""
    def frames(x: Float[np.ndarray, "T"], w: Float[np.ndarray, "K"]
               ) -> Float[np.ndarray, "T-K+1, K"]:
        n = x.shape[0] - w.shape[0] + 1
        return as_strided(x, shape=(n, w.shape[0]), strides=x.strides * 2)

    def by_module(x: Float[np.ndarray, "B, T"]) -> Float[np.ndarray, "B, T-2, 3"]:
        s0, s1 = x.strides
        return np.lib.stride_tricks.as_strided(x, (x.shape[0], x.shape[1] - 2, 3), (s0, s1, s1))

    assert clean(verify(frames)), str(verify(frames))
    assert clean(verify(by_module)), str(verify(by_module))
    r = verify(lambda x: as_strided(x, (x.shape[0] - 2, 3), x.strides * 2), "N => N, 3")
    assert kinds(r) == ["return-shape"], str(r)
    a = np.arange(6.0)  # outside a trace: NumPy's own
    assert as_strided(a, (4, 3), a.strides * 2)[3].tolist() == [3.0, 4.0, 5.0]


# -- convolution lengths -------------------------------------------------------------------------


def test_convolve_length_of_each_mode():
    """``np.convolve``'s 'valid' is the longer less the shorter plus one: fitted at witnesses
    where the kernel was the longer (``N = 11``, ``K = 13``), a moving average returned
    ``K - N + 1`` (a false return-shape error).  Undecided, the kernel is assumed the shorter
    (a warning); decided, no warning, and NumPy's swap is followed."""
    r = verify(lambda x, w: np.convolve(x, w, mode="valid"), "N; K => N - K + 1")
    assert kinds(r) == ["assumption"] and "assumes K <= N" in str(r), str(r)
    assert clean(verify(lambda x, w: np.convolve(x, w), "N; K => N + K - 1"))
    r = verify(lambda x: np.convolve(x[:-2], x, "valid"), "N => 3")
    assert [f.message.split(":")[0] for f in r] == ["assumes 1 <= N - 2"], str(r)  # N = 2: empty
    r = verify(lambda x: np.correlate(x, x[2:], "same"), "N => N")
    assert [f.message.split(":")[0] for f in r] == ["assumes 1 <= N - 2"], str(r)
    r = verify(lambda x, w: np.convolve(x, w, "same"), "N; K => N - K + 1")
    assert "return-shape" in kinds(r), str(r)


# -- boolean masks -------------------------------------------------------------------------------


def test_one_mask_selects_as_many_elements_wherever_it_indexes():
    """``V[rated]`` and ``r[rated]`` (ALS), ``y[active, None] * X[active]`` (an SVM's
    subgradient): each use of one mask got a fresh count, a false contraction or broadcast.
    Two masks' counts stay distinct, and a mask written to gets a new one."""
    def als_row(r: Float[np.ndarray, "I"], V: Float[np.ndarray, "I, F"]) -> Float[np.ndarray, "F"]:
        rated = r > 0
        Vu = V[rated]
        return np.linalg.solve(Vu.T @ Vu + np.eye(V.shape[1]), Vu.T @ r[rated])

    def two_masks(r: Float[np.ndarray, "I"], V: Float[np.ndarray, "I, F"]
                  ) -> Float[np.ndarray, "F"]:
        return V[r > 0].T @ r[r > 0]  # two masks: as many elements only by the data

    def written(r: Float[np.ndarray, "I"], V: Float[np.ndarray, "I, F"]) -> Float[np.ndarray, "F"]:
        m = r > 0
        Vm = V[m]
        m[0] = True
        return Vm.T @ r[m]

    assert clean(verify(als_row)), str(verify(als_row))
    assert kinds(verify(two_masks)) == ["contraction"], str(verify(two_masks))
    assert kinds(verify(written)) == ["contraction"], str(verify(written))


def test_a_mask_written_through_a_view_selects_another_count():
    """``m[:]`` is a view of the mask: a write through it changes what ``m`` selects, so
    ``V[m]`` before and after are as many rows only by the data (verified silently)."""
    def through_view(r: Float[np.ndarray, "I"], V: Float[np.ndarray, "I, F"]
                     ) -> Float[np.ndarray, "F"]:
        m = r > 0
        Vm = V[m]
        view = m[:]
        view[0] = True
        return Vm.T @ r[m]

    def numbers_written(r: Float[np.ndarray, "I"], V: Float[np.ndarray, "I, F"]
                        ) -> Float[np.ndarray, "F"]:
        m = r > 0
        Vm = V[m]
        V[0] = 0.0  # numbers: no mask changes
        return Vm.T @ r[m]

    assert kinds(verify(through_view)) == ["contraction"], str(verify(through_view))
    assert clean(verify(numbers_written)), str(verify(numbers_written))


# -- a number to the power of a size -------------------------------------------------------------


def test_a_number_to_the_power_of_a_size_is_a_number():
    """``gamma ** horizon``, the discount of an n-step return's bootstrap value, stopped the
    trace (``float ** SymSize``); it is a number at the witness, as ``math.sqrt(d)`` is, and
    an int's power of a size (no polynomial) is a fresh size."""
    def discounted_tail(r: Float[np.ndarray, "T"], v: Float[np.ndarray, "T+1"],
                        gamma: float = 0.99) -> Float[np.ndarray, ""]:
        T = len(r)
        return gamma ** np.arange(T) @ r + gamma ** T * v[T]

    assert clean(verify(discounted_tail)), str(verify(discounted_tail))
    r = verify(lambda x: np.zeros(2 ** x.shape[0]), "N => N")  # 2 ** N: a fresh size
    assert not r.notes and kinds(r) == ["return-shape"] and "[pow" in str(r), str(r)


# -- NumPy's array methods -----------------------------------------------------------------------


def test_array_methods_that_are_numpy_functions():
    """``hist.cumsum()`` (histogram equalisation), ``d.argsort(axis=1)``, ``x.diagonal()``:
    NumPy's methods that are its functions of the array stopped the trace (no attribute)."""
    def cdf(img: Float[np.ndarray, "H, W"]) -> Float[np.ndarray, "256"]:
        hist, _ = np.histogram(img.ravel(), bins=256, range=(0, 256))
        c = hist.cumsum()
        return c / c[-1]

    def nearest(d: Float[np.ndarray, "N, M"]) -> Float[np.ndarray, "N, M"]:
        return d.argsort(axis=1).cumprod(axis=0) + (d @ d.T).diagonal().sum() + d.trace()

    assert clean(verify(cdf)), str(verify(cdf))
    assert clean(verify(nearest)), str(verify(nearest))
    r = verify(lambda x: x.cumsum(), "N, D => N, D")  # no axis: flattened, as NumPy's
    assert kinds(r) == ["return-shape"], str(r)


def test_a_fitted_function_refusing_lengths_is_a_finding_not_a_note():
    """``np.interp(x, bins, cdf)`` with 257 edges and 256 counts: NumPy's "fp and xp are not
    of the same length" was no shape word, so the trace stopped with a note ("not modelled").
    An op NumPy refuses, not a contraction (TS102, as it once was labelled): op-shape."""
    r = verify(lambda x, xp, fp: np.interp(x, xp, fp), "N; M; K => N")
    assert kinds(r) == ["op-shape"] and not r.notes, str(r)
    assert clean(verify(lambda x, xp, fp: np.interp(x, xp, fp), "N; M; M => N"))


def test_expand_dims_with_a_tuple_of_axes():
    """``np.expand_dims(w, (0, 2))`` (a per-channel scale spread over a batch and positions)
    stopped the trace: NumPy's tuple of new axes, counted in the result, was read as one."""
    def scale(x: Float[np.ndarray, "B, C, T"], w: Float[np.ndarray, "C"]
              ) -> Float[np.ndarray, "B, C, T"]:
        return x * np.expand_dims(w, (0, 2))

    def scale_bug(x: Float[np.ndarray, "B, C, T"], w: Float[np.ndarray, "C"]
                  ) -> Float[np.ndarray, "B, C, T"]:
        return x * np.expand_dims(w, (0, 1))  # C along T

    assert clean(verify(scale)), str(verify(scale))
    assert kinds(verify(scale_bug)) == ["broadcast"], str(verify(scale_bug))
    r = verify(lambda x: np.expand_dims(x, (-1, 0)), "N, D => 1, N, D, 1")
    assert clean(r), str(r)


def test_indices_of_a_symbolic_shape():
    """``yy, xx = np.indices(img.shape)`` (a radial mask, a Gaussian window) turned H and W into
    numbers: two warnings on correct code, a concrete grid read back by its witnesses."""
    def radial(img: Float[np.ndarray, "H, W"]) -> Float[np.ndarray, "H, W"]:
        yy, xx = np.indices(img.shape)
        r = np.hypot(yy - img.shape[0] / 2, xx - img.shape[1] / 2)
        return img * (r < 5)

    def radial_bug(img: Float[np.ndarray, "H, W"]) -> Float[np.ndarray, "H, W"]:
        yy, xx = np.indices(img.shape[::-1])  # the grid of the transpose
        r = np.hypot(yy - img.shape[0] / 2, xx - img.shape[1] / 2)
        return img * (r < 5)

    assert clean(verify(radial)), str(verify(radial))
    assert "broadcast" in kinds(verify(radial_bug)), str(verify(radial_bug))
    assert clean(verify(lambda x: np.indices(x.shape, sparse=True)[1], "H, W => 1, W"))


def test_a_function_that_refuses_zeros_as_data_is_fitted_on_distinct_values():
    """``np.polyfit`` on zero arrays fails in its SVD (a data error, not a shape error): the
    trace stopped with a note saying it is "not modelled"; it is fitted on distinct values."""
    def trend(y: Float[np.ndarray, "T, D"]) -> Float[np.ndarray, "T, D"]:
        t = np.arange(len(y))
        coef = np.polyfit(t, y, 2)
        return y - np.vander(t, 3) @ coef

    def trend_bug(y: Float[np.ndarray, "T, D"]) -> Float[np.ndarray, "T, D"]:
        t = np.arange(len(y))
        coef = np.polyfit(t, y, 2)
        return y - np.vander(t, 3) @ coef.T  # the coefficients transposed

    assert clean(verify(trend)), str(verify(trend))
    r = verify(trend_bug)
    assert kinds(r)[0] == "contraction" and not r.notes, str(r)


def test_mgrid_and_ogrid_with_symbolic_bounds():
    """``yy, xx = np.mgrid[0:H, 0:W]`` (image coordinates) and ``np.ogrid`` stopped the trace
    ('tuple' object has no attribute 'step'): NumPy's index tricks read the slices' ints."""
    def centroid(img: Float[np.ndarray, "H, W"]) -> Float[np.ndarray, "2"]:
        yy, xx = np.mgrid[0:img.shape[0], 0:img.shape[1]]
        m = img.sum()
        return np.array([(yy * img).sum() / m, (xx * img).sum() / m])

    def gaussian(img: Float[np.ndarray, "H, W"], sigma: float = 2.0) -> Float[np.ndarray, "H, W"]:
        h, w = img.shape
        y, x = np.ogrid[-(h // 2):h - h // 2, -(w // 2):w - w // 2]
        return img * np.exp(-(x ** 2 + y ** 2) / (2 * sigma ** 2))

    def gaussian_bug(img: Float[np.ndarray, "H, W"], sigma: float = 2.0
                     ) -> Float[np.ndarray, "H, W"]:
        h, w = img.shape
        y, x = np.ogrid[-(w // 2):w - w // 2, -(h // 2):h - h // 2]  # the axes swapped
        return img * np.exp(-(x ** 2 + y ** 2) / (2 * sigma ** 2))

    for f in (centroid, gaussian):
        assert clean(verify(f)), str(verify(f))
    assert "broadcast" in kinds(verify(gaussian_bug)), str(verify(gaussian_bug))
    assert np.mgrid[0:2, 0:3].shape == (2, 2, 3)  # outside a trace: NumPy's own


def test_a_fit_that_holds_in_one_order_of_the_sizes_says_so():
    """A fitted function whose result is ``max - min + 1`` of two sizes (scipy's 'valid'
    convolutions) or ``min`` (the diagonal of a rectangle) fits the witnesses' order only: at
    ``N = 11``, ``K = 13`` a moving average's ``fftconvolve(x, h, 'valid')`` was silently
    ``K - N + 1``.  Now the order it was traced in is an assumption."""
    def smooth(x: Float[np.ndarray, "N"], h: Float[np.ndarray, "K"]) -> Float[np.ndarray, "N-K+1"]:
        return scipy.signal.fftconvolve(x, h, mode="valid")

    r = verify(smooth)
    assert "assumes N <= K: scipy.signal.fftconvolve's result sizes depend on the order" in \
        str(r), str(r)
    r = verify(lambda x: x.diagonal(), "N, M => N")
    assert kinds(r) == ["assumption"] and "assumes N <= M" in str(r), str(r)
    assert clean(verify(lambda x, h: scipy.signal.fftconvolve(x, h), "N; K => N + K - 1"))
    assert clean(verify(lambda x: x.diagonal(), "N, N => N"))


def test_a_call_refused_in_the_other_order_of_the_sizes_says_so():
    """``np.insert(y, len(x), v)`` and ``np.partition(y, len(x))`` run at ``N = 11 < K = 13``
    and raise where ``N > K`` (partition where ``N >= K``: its kth must lie on the axis): the
    other order was never tried, so both were verified."""
    with pytest.raises(ValueError, match="out of bounds"):
        np.partition(np.ones(3), 3)
    for body, out, why in (("np.insert(y, len(x), 0.0)", "K + 1", "assumes N <= K: numpy.insert "
                            "refuses them in the other order"),
                           ("np.partition(y, len(x))", "K", "assumes N + 1 <= K: kth = N")):
        r = verify(eval(f"lambda x, y: {body}"), f"N; K => {out}")
        assert kinds(r) == ["assumption"] and why in str(r), (body, str(r))
    assert clean(verify(lambda x, y: np.insert(y, 0, x), "N; K => N + K"))


# -- lists built one item per loop step ----------------------------------------------------------


def test_a_list_of_one_item_per_loop_step_stacks_to_the_loop_size():
    """``np.array([f(row) for row in X])``, ``np.stack([x[:, j] for j in range(D)], 1)``: the
    loop ran at the witness, so the stack was ``[11, ...]`` against the signature's ``N`` (a
    false return-shape error); it has as many items as the loop has steps."""
    def row_features(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, 10"]:
        return np.stack([np.histogram(row, bins=10, range=(0, 1))[0] for row in X])

    def columns(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        return np.stack([X[:, j] - X[:, j].mean() for j in range(X.shape[1])], axis=1)

    def columns_bug(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        return np.stack([X[:, j] - X[:, j].mean() for j in range(X.shape[1])])  # [D, N]

    for f in (row_features, columns):
        assert clean(verify(f)), str(verify(f))
    assert kinds(verify(columns_bug)) == ["return-shape"], str(verify(columns_bug))
    assert clean(verify(lambda x: np.array([r.sum() for r in x]), "N, D => N"))
    assert clean(verify(lambda x: np.stack([x[0], x[-1]]), "N, D => 2, D"))


def test_a_literal_count_of_items_is_no_loops_size():
    """After a loop over ``N`` (11 steps at its witness), a list of 11 items from a literal
    ``range(11)`` or ``[x] * 11`` has 11 of them at every size: stacked, it was ``[N, D]``,
    verified silently against a signature of ``N``."""
    def literal_range(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        means = [row.mean() for row in X]
        return np.stack([X[0] * means[0] for _ in range(11)])

    def repeated(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        means = [row.mean() for row in X]
        return np.stack([X[0] * means[0]] * 11)

    for f in (literal_range, repeated):
        r = verify(f)
        assert kinds(r) == ["return-shape"] and "[11, D]" in str(r), (f.__name__, str(r))


def test_a_literal_range_leaves_a_loop_over_a_size_of_that_count_its_size():
    """Rows of a loop over ``N - 3`` (8 steps at the witness 11) and a literal ``range(8)``,
    before or after it: the literal count cancelled the loop's, so the stack of the rows was
    ``[8, D]`` and their sum with 8 copies verified, though it fails at every ``N`` but 11."""
    def copies_after(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "8, D"]:
        rows = [X[i] for i in range(X.shape[0] - 3)]
        copies = [X[0] * k for k in range(8)]
        return np.stack(rows) + np.stack(copies)

    def copies_before(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "8, D"]:
        copies = [X[0] * k for k in range(8)]
        rows = [X[i] for i in range(X.shape[0] - 3)]
        return np.stack(rows) + np.stack(copies)

    for f in (copies_after, copies_before):
        assert f(np.ones((11, 4))).shape == (8, 4)
        with pytest.raises(ValueError):  # N = 12: 9 rows
            f(np.ones((12, 4)))
        r = verify(f)
        assert "broadcast" in kinds(r) and "N - 3" in str(r), (f.__name__, str(r))


def test_an_inner_loop_of_the_same_count_is_not_the_rows_loop():
    """Rows of a loop over ``N - 3`` with an inner loop over ``M - 9`` (8 steps each at the
    witnesses 11 and 17): the inner loop, the last begun before the first row, was taken for
    the rows' count, and their sum with ``M - 9`` rows verified, though it fails wherever
    ``N - 3 != M - 9``."""
    def nested(X: Float[np.ndarray, "N D"], Y: Float[np.ndarray, "M D"]
               ) -> Float[np.ndarray, "M-9 D"]:
        rows = []
        for i in range(X.shape[0] - 3):
            for _ in range(Y.shape[0] - 9):
                pass
            rows.append(X[i] * 2)
        return np.stack(rows) + Y[9:]

    assert nested(np.ones((11, 4)), np.ones((17, 4))).shape == (8, 4)
    with pytest.raises(ValueError):  # N = 12: 9 rows against 8
        nested(np.ones((12, 4)), np.ones((17, 4)))
    r = verify(nested)
    assert not r.ok and "N - 3" in str(r) and "M - 9" in str(r), str(r)  # which made them

    def pairs(X: Float[np.ndarray, "N D"], Y: Float[np.ndarray, "M D"]
              ) -> Float[np.ndarray, "N-3 D"]:  # an inner loop of the rows' own size
        for _ in range(Y.shape[0] - 9):
            pass
        rows = []
        for i in range(X.shape[0] - 3):
            acc = X[i] * 0
            for j in range(X.shape[0] - 3):
                acc = acc + X[j]
            rows.append(acc)
        return np.stack(rows) + X[3:]

    assert verify(pairs).ok, str(verify(pairs))


def test_a_loop_that_ended_before_the_rows_is_not_their_loop():
    """Indices listed by a loop over ``N - 3``, then a loop over ``M - 9`` (8 steps each at
    the witnesses 11 and 17), then the rows: the last loop begun was taken for the rows'
    count, and their sum with ``M - 9`` rows verified, though it fails wherever ``N - 3 !=
    M - 9``.  With one loop of that count, its indices' rows still join to it."""
    def later(X: Float[np.ndarray, "N D"], Y: Float[np.ndarray, "M D"]
              ) -> Float[np.ndarray, "M-9 D"]:
        idx = [i for i in range(X.shape[0] - 3)]
        for _ in range(Y.shape[0] - 9):
            pass
        return np.stack([X[i] * 2 for i in idx]) + Y[9:]

    def alone(X: Float[np.ndarray, "N D"]) -> Float[np.ndarray, "N-3 D"]:
        idx = [i for i in range(X.shape[0] - 3)]
        return np.stack([X[i] * 2 for i in idx]) + X[3:]

    assert later(np.ones((11, 4)), np.ones((17, 4))).shape == (8, 4)
    with pytest.raises(ValueError):  # N = 12: 9 rows against 8
        later(np.ones((12, 4)), np.ones((17, 4)))
    assert not verify(later).ok
    assert verify(alone).ok, str(verify(alone))


def test_a_library_s_own_literal_range_leaves_a_loop_s_count():
    """``range`` is patched in builtins, so a library's own loop of 11 steps (the stdlib's
    ``sample(..., 11)``) came there too: only the user's literal range cancels a loop's
    count, or the stack of one row per step of ``N`` was ``[11, D]``, a false error."""
    def rows_and_a_sample(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        rows = [row * 2 for row in X]
        random.Random(0).sample(range(100), 11)
        return np.stack(rows)

    assert clean(verify(rows_and_a_sample)), str(verify(rows_and_a_sample))


def test_numpy_repeat_method_is_numpys():
    """``x.repeat(2, axis=2).repeat(2, axis=3)`` (nearest-neighbour upsampling) stopped the
    trace: the method was torch's ``repeat`` (a tile) with no ``axis``."""
    def upsample(x: Float[np.ndarray, "B, C, H, W"]) -> Float[np.ndarray, "B, C, 2*H, 2*W"]:
        return x.repeat(2, axis=2).repeat(2, axis=3)

    def upsample_bug(x: Float[np.ndarray, "B, C, H, W"]
                     ) -> Float[np.ndarray, "B, C, 2*H, 2*W"]:
        return x.repeat(2, axis=1).repeat(2, axis=3)  # the channels doubled, not the rows

    assert clean(verify(upsample)), str(verify(upsample))
    assert kinds(verify(upsample_bug)) == ["return-shape"], str(verify(upsample_bug))


# -- creation and sampling -----------------------------------------------------------------------


def test_creation_with_a_positional_dtype():
    """``np.zeros(n, int)``, ``np.ones((n, 2), np.float32)``: the dtype was read as one more
    size (torch's ``zeros(B, T)``), and the trace stopped at ``int()`` of a type."""
    def labels_onehot(y: Int[np.ndarray, "N"], C: Float[np.ndarray, "K, D"]
                      ) -> Float[np.ndarray, "N, K"]:
        out = np.zeros((len(y), C.shape[0]), np.float32)
        out[np.arange(len(y)), y] = 1.0
        return out

    def first_rows(x: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        return x[np.zeros(len(x), int)]

    for f in (labels_onehot, first_rows):
        assert clean(verify(f)), str(verify(f))


def test_one_random_integer_of_symbolic_bounds_is_a_number():
    """``i = rng.integers(0, H - size + 1)`` then ``x[:, :, i:i + size]`` (a random crop): one
    draw was a 0-d symbolic array, and slicing by it stopped the trace.  It is a number (the
    least it can be) that knows its largest (``H - size``), so the crop's one condition, a
    draw from a range that is not empty (``size <= H``), is what remains."""
    def crop(x: Float[np.ndarray, "B, C, H, W"], rng: np.random.Generator, size: int = 8
             ) -> Float[np.ndarray, "B, C, 8, 8"]:
        i = rng.integers(0, x.shape[2] - size + 1)
        j = rng.integers(0, x.shape[3] - size + 1)
        return x[:, :, i:i + size, j:j + size]

    def crop_bug(x: Float[np.ndarray, "B, C, H, W"], rng: np.random.Generator, size: int = 8
                 ) -> Float[np.ndarray, "B, C, 8, 8"]:
        i = rng.integers(0, x.shape[2] - size + 1)
        j = rng.integers(0, x.shape[3] - size + 1)
        return x[:, i:i + size, j:j + size]  # the channel axis cropped

    r = verify(crop)
    assert kinds(r) == ["assumption", "assumption"] and not r.notes, str(r)
    assert "assumes 1 <= H - 7" in str(r) and "assumes 1 <= W - 7" in str(r), str(r)
    assert "return-shape" in kinds(verify(crop_bug)), str(verify(crop_bug))
    rng = np.random.default_rng(0)
    assert clean(verify(lambda x: rng.integers(0, len(x), size=5), "N => 5"))


def test_a_slice_by_one_random_integer_depends_on_its_largest():
    """The least draw alone made ``x[i:]`` all ``H`` and ``x[:i]`` one long, and an off-by-one
    crop (``i`` up to ``H - 2``, ``x[i:i + 3]``) in range: three silent wrong verdicts."""
    def tail(x: Float[np.ndarray, "H"], rng: np.random.Generator) -> Float[np.ndarray, "H"]:
        return x[rng.integers(0, len(x)):]

    def head(x: Float[np.ndarray, "H"], rng: np.random.Generator) -> Float[np.ndarray, "1"]:
        return x[:rng.integers(1, len(x))]

    def off_by_one(x: Float[np.ndarray, "H"], rng: np.random.Generator
                   ) -> Float[np.ndarray, "3"]:
        i = rng.integers(0, len(x) - 1)
        return x[i:i + 3]

    def row(x: Float[np.ndarray, "H, D"], rng: np.random.Generator) -> Float[np.ndarray, "D"]:
        return x[rng.integers(0, len(x))]

    def row_past(x: Float[np.ndarray, "H, D"], rng: np.random.Generator
                 ) -> Float[np.ndarray, "D"]:
        return x[rng.integers(0, len(x) + 1)]

    def window(x: Float[np.ndarray, "H"], w: Float[np.ndarray, "K"], rng: np.random.Generator
               ) -> Float[np.ndarray, "K"]:
        i = rng.integers(0, len(x) - len(w) + 1)
        return x[i:i + len(w)]

    def short(x: Float[np.ndarray, "H"], rng: np.random.Generator) -> Float[np.ndarray, "H"]:
        return x[:len(x) - rng.integers(0, len(x))]  # H - i: no known size

    def even(x: Float[np.ndarray, "H"], rng: np.random.Generator) -> Float[np.ndarray, "H"]:
        return x[2 * rng.integers(0, len(x) // 2):]

    def even_crop(x: Float[np.ndarray, "H"], rng: np.random.Generator
                  ) -> Float[np.ndarray, "4"]:
        i = rng.integers(0, len(x) // 2 - 1)
        return x[2 * i:2 * i + 4]

    for f in (tail, head, short, even):
        assert "return-shape" in kinds(verify(f)), (f.__name__, str(verify(f)))
    assert kinds(verify(even_crop)) == ["assumption"], str(verify(even_crop))
    assert "index" in kinds(verify(off_by_one)), str(verify(off_by_one))
    assert clean(verify(row)), str(verify(row))
    assert kinds(verify(row_past)) == ["index"], str(verify(row_past))
    r = verify(window)
    assert kinds(r) == ["assumption"] and "a draw from" in str(r), str(r)


def test_bincount_with_minlength_has_that_many_bins():
    """A confusion matrix, ``np.bincount(K * y + p, minlength=K * K).reshape(K, K)``: fitted,
    the count was a fresh size (``K * K`` is no affine fit) and the reshape a false error; with
    ``minlength=K`` it was ``K`` only where the witnesses happened to make it so."""
    def confusion(y: Int[np.ndarray, "N"], p: Int[np.ndarray, "N"],
                  C: Float[np.ndarray, "K, K"]) -> Int[np.ndarray, "K, K"]:
        k = C.shape[0]
        return np.bincount(k * y + p, minlength=k * k).reshape(k, k)

    def class_weights(y: Int[np.ndarray, "N"], w: Float[np.ndarray, "N"],
                      C: Float[np.ndarray, "K, D"]) -> Float[np.ndarray, "K"]:
        return np.bincount(y, weights=w, minlength=len(C)) / np.bincount(y, minlength=len(C))

    def class_weights_bug(y: Int[np.ndarray, "N"], w: Float[np.ndarray, "N"],
                          C: Float[np.ndarray, "K, D"]) -> Float[np.ndarray, "K"]:
        return np.bincount(y, weights=C[:, 0], minlength=len(C))  # weights per class

    for f in (confusion, class_weights):
        assert clean(verify(f)), str(verify(f))
    assert kinds(verify(class_weights_bug)) == ["broadcast"], str(verify(class_weights_bug))
    r = verify(lambda y: np.bincount(y), "N: int => N")  # no minlength: the data's count
    assert kinds(r) == ["return-shape"], str(r)


def test_fft_frequencies_of_a_symbolic_length():
    """``np.fft.rfftfreq(T, dt)`` (a spectrum's frequency axis) stopped the trace: NumPy asks
    ``isinstance(n, int)`` of the size.  The full spectrum's ``fftfreq`` against ``rfft``'s
    half is a broadcast error."""
    def centroid(x: Float[np.ndarray, "B, T"], dt: float = 0.01) -> Float[np.ndarray, "B"]:
        mag = np.abs(np.fft.rfft(x, axis=-1))
        return (mag * np.fft.rfftfreq(x.shape[-1], dt)).sum(-1) / mag.sum(-1)

    def centroid_bug(x: Float[np.ndarray, "B, T"], dt: float = 0.01) -> Float[np.ndarray, "B"]:
        mag = np.abs(np.fft.rfft(x, axis=-1))
        return (mag * np.fft.fftfreq(x.shape[-1], dt)).sum(-1) / mag.sum(-1)

    assert clean(verify(centroid)), str(verify(centroid))
    assert "broadcast" in kinds(verify(centroid_bug)), str(verify(centroid_bug))
    assert np.fft.rfftfreq(7).shape == (4,)  # outside a trace: NumPy's own


def test_too_many_indices_is_an_index_finding():
    """``cm.sum()[:, None]`` (a total meant per row) and ``x.sum(1)[:, 0]``: NumPy's "too many
    indices"; the trace stopped with a note (IndexError inside verify) instead of a finding."""
    def per_row(cm: Float[np.ndarray, "K, K"]) -> Float[np.ndarray, "K"]:
        return np.diag(cm) / cm.sum()[:, None]

    r = verify(per_row)
    assert "index" in kinds(r) and not r.notes, str(r)
    assert "too many indices: 1 for an array of rank 0" in str(r), str(r)
    r = verify(lambda x: x.sum(1)[:, 0], "N, D => N")
    assert kinds(r) == ["index"] and not r.notes, str(r)
    assert clean(verify(lambda x: x[..., None, 0], "N, D => N, 1"))


def test_window_functions_of_a_symbolic_length():
    """``x * np.hanning(T)`` before an FFT: NumPy's window reads its length as an array and
    branches on it (``if M < 1``), so the trace stopped ("the truth value of an array")."""
    def windowed(x: Float[np.ndarray, "B, T"]) -> Float[np.ndarray, "B, T"]:
        return x * np.hanning(x.shape[1]) * np.kaiser(x.shape[1], 8.0)

    def windowed_bug(x: Float[np.ndarray, "B, T"]) -> Float[np.ndarray, "B, T"]:
        return x * np.hamming(len(x))  # a window as long as the batch

    assert clean(verify(windowed)), str(verify(windowed))
    assert kinds(verify(windowed_bug)) == ["broadcast"], str(verify(windowed_bug))


def test_numpy_reductions_of_a_list_of_symbolic_arrays():
    """``np.min([d2_a, d2_b], axis=0)`` (k-means++), ``np.mean([p1, p2], axis=0)`` (an
    ensemble): NumPy converts the list in C without asking its items, so the trace stopped
    ("converting a symbolic array to a concrete one"); the list is stacked first."""
    def ensemble(Xs: Float[np.ndarray, "N, D"], W1: Float[np.ndarray, "D, C"],
                 W2: Float[np.ndarray, "D, C"]) -> Float[np.ndarray, "N, C"]:
        return np.mean([Xs @ W1, Xs @ W2], axis=0)

    def ensemble_bug(Xs: Float[np.ndarray, "N, D"], W1: Float[np.ndarray, "D, C"],
                     W2: Float[np.ndarray, "D, C"]) -> Float[np.ndarray, "N, C"]:
        return np.mean([Xs @ W1, Xs @ W2])  # every prediction averaged into one number

    def nearest(X: Float[np.ndarray, "N, D"], C: Float[np.ndarray, "K, D"]
                ) -> Float[np.ndarray, "N"]:
        return np.min([((X - c) ** 2).sum(axis=1) for c in C], axis=0)

    for f in (ensemble, nearest):
        assert clean(verify(f)), str(verify(f))
    assert kinds(verify(ensemble_bug)) == ["return-shape"], str(verify(ensemble_bug))
    assert clean(verify(lambda a: np.max([a.shape[0], 3]), "N, D => "))  # sizes: as before


def test_like_creation_takes_its_shape_and_dtype():
    """``np.zeros_like(x, shape=(n, 3))`` kept ``x``'s shape (a silent wrong one: a false
    error here, a missed one elsewhere), and ``dtype=int`` its kind."""
    def scores(x: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, 3"]:
        out = np.zeros_like(x, shape=(len(x), 3))
        out[:, 0] = x.mean(axis=1)
        return out

    def scores_bug(x: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, 3"]:
        out = np.zeros_like(x, shape=(3, len(x)))
        out[:, 0] = x.mean(axis=1)  # N values into a column of 3
        return out

    assert clean(verify(scores)), str(verify(scores))
    assert "broadcast" in kinds(verify(scores_bug)), str(verify(scores_bug))
    assert clean(verify(lambda x: np.full_like(x, 2.0) + x, "N, D => N, D"))


def test_like_creation_takes_a_positional_dtype_and_shape():
    """``np.zeros_like(x, bool)`` (NumPy's ``(a, dtype, order, subok, shape)``) kept ``x``'s
    kind: as an index it was a gather of ``[N, D]``, verified silently, not a mask's count."""
    for like in ("np.zeros_like(x, bool)", "np.zeros_like(x, dtype=bool)",
                 "np.full_like(x, False, bool)"):
        r = verify(eval(f"lambda x, V: V[{like}]"), "N; N, D => N, D")
        assert kinds(r) == ["return-shape"] and "nnz" in str(r), (like, str(r))
    assert clean(verify(lambda x: np.full_like(x, 0, float, "C", True, (3,)), "N, D => 3"))
    assert clean(verify(lambda x: np.ones_like(x, None, "C", True, len(x)), "N, D => N"))


# -- SciPy ---------------------------------------------------------------------------------------


def test_scipy_eigh_subset_and_pairwise_distances():
    """``eigh(L, subset_by_index=[0, k - 1])`` (spectral clustering's first k eigenvectors) was
    all ``N`` of them, a silent wrong shape; ``pdist``'s ``N(N - 1)/2`` fits no affine size, so
    ``squareform(pdist(X))`` was ``[n2, n2]`` against ``[N, N]``."""
    def spectral(W: Float[np.ndarray, "N, N"], k: int = 3) -> Float[np.ndarray, "N, 3"]:
        L = np.diag(W.sum(axis=1)) - W
        _, vecs = scipy.linalg.eigh(L, subset_by_index=[0, k - 1])
        return vecs

    def rbf(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"]) -> Float[np.ndarray, "N"]:
        return np.exp(-squareform(pdist(X, "sqeuclidean"))) @ y

    def rbf_bug(X: Float[np.ndarray, "N, D"], y: Float[np.ndarray, "N"]) -> Float[np.ndarray, "N"]:
        return np.exp(-squareform(pdist(X.T, "sqeuclidean"))) @ y  # pairs of features

    for f in (spectral, rbf):
        assert clean(verify(f)), str(verify(f))
    assert kinds(verify(rbf_bug))[0] == "contraction", str(verify(rbf_bug))
    assert clean(verify(lambda x: pdist(x), "N, D => N*(N-1)//2"))


def test_log_and_geometric_spaces_of_a_symbolic_count():
    """``np.logspace(-3, 1, n)`` (a grid of regularisation strengths, one per row) turned the
    count into a number: a warning that a concrete axis was read back as ``N``."""
    def path(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        return X * np.logspace(-3, 1, len(X))[:, None] + np.geomspace(1, 2, X.shape[1])

    def path_bug(X: Float[np.ndarray, "N, D"]) -> Float[np.ndarray, "N, D"]:
        return X * np.logspace(-3, 1, len(X)) + np.geomspace(1, 2, X.shape[1])  # along D

    assert clean(verify(path)), str(verify(path))
    assert "broadcast" in kinds(verify(path_bug)), str(verify(path_bug))


def test_bincount_is_one_model_for_numpy_and_torch():
    """NumPy's bincount had been written a second time, without the 1-d check torch's had:
    ``np.bincount`` of an ``[N, M]`` array verified, though NumPy refuses it."""
    import torch

    assert kinds(verify(lambda y: np.bincount(y), "N, M: int => K: int")) == ["op-shape"]
    r = verify(lambda y: torch.bincount(y), "N, M: int => K: int", torch_style=True)
    assert kinds(r) == ["op-shape"], str(r)
