"""Padded batches: the blog's numbers, every method against a loop over the unpadded sequences
(drawn ragged batches, both sides, trailing shapes), and bad input refused before any array is
built."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import tensig
from arrays import to_backend
from tensig import Float
from tensig.execution.padding import Padded, PaddingError, pad

LIBS = ["numpy", "torch", "jax"]


@pytest.fixture(params=LIBS)
def lib(request):
    if request.param == "jax":
        pytest.importorskip("jax")
    return request.param


def host(x) -> np.ndarray:
    return x.cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def right_mask(lengths, T) -> np.ndarray:
    return np.arange(T) < np.asarray(lengths)[:, None]


# -- the blog's numbers ------------------------------------------------------------------------
def test_lengths_5_3_1_are_40_percent_padding(lib):
    p = pad([to_backend(lib, np.arange(n)) for n in (5, 3, 1)])
    assert p.shape == (3, 5)
    assert p.padding_fraction == pytest.approx(0.4)
    assert host(p.lengths).tolist() == [5, 3, 1]
    bill = tensig.price(p)
    assert bill.padding == 6 * p.data.dtype.itemsize and bill.padding_fraction == pytest.approx(0.4)


def test_last_token_index_right_and_left(lib):
    seqs = [to_backend(lib, np.arange(n)) for n in (5, 3, 1)]
    right, left = pad(seqs), pad(seqs, side="left")
    assert host(right.last_index()).tolist() == [4, 2, 0]
    assert host(left.last_index()).tolist() == [4, 4, 4]
    # the last token read is the sequence's last, whichever side: 4, 2, 0
    assert host(right.last()).tolist() == host(left.last()).tolist() == [4, 2, 0]


def test_masked_mean_of_the_length_one_sequence(lib):
    x = np.arange(1, 31, dtype=np.float32).reshape(3, 5, 2)
    p = Padded(to_backend(lib, x), to_backend(lib, right_mask([5, 3, 1], 5)), side="right")
    assert host(p.data.mean(axis=1))[2].tolist() == [25, 26]  # unmasked: four rows of padding
    assert host(p.mean())[2].tolist() == [21, 22]  # its only real row


def test_key_mask_is_b_1_t_and_masks_keys_not_queries(lib):
    B, T = 3, 5
    p = Padded(to_backend(lib, np.zeros((B, T, 2))), to_backend(lib, right_mask([5, 3, 1], T)),
               "right")
    keys = host(p.key_mask())
    assert keys.shape == (B, 1, T)
    scores = np.zeros((B, T, T), np.float32)
    masked = host(to_backend(lib, scores) + p.additive_key_mask())
    for b, n in enumerate([5, 3, 1]):
        for i in range(T):  # every query row, padded or not, sees exactly the real keys
            assert np.isneginf(masked[b, i]).tolist() == [j >= n for j in range(T)]
    # the [B, T, 1] form masks whole query rows instead: a different, wrong pattern
    assert not np.array_equal(np.isneginf(scores + np.where(right_mask([5, 3, 1], T), 0,
                                                            -np.inf)[:, :, None]),
                              np.isneginf(masked))


# -- every method against a loop over the unpadded sequences -----------------------------------
@st.composite
def ragged(draw, max_rows=5, max_len=6):
    """Sequences of lengths 0..T with one trailing shape, a side, and a pad length >= T."""
    trailing = draw(st.sampled_from([(), (2,), (2, 3)]))
    lengths = draw(st.lists(st.integers(0, max_len), min_size=1, max_size=max_rows))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    seqs = [rng.standard_normal((n, *trailing)).astype(np.float32) for n in lengths]
    side = draw(st.sampled_from(["right", "left"]))
    extra = draw(st.integers(0, 2))
    return seqs, side, extra


def check_against_loop(lib: str, seqs: list[np.ndarray], side: str, extra: int) -> None:
    lengths = [len(s) for s in seqs]
    T = max(lengths) + extra
    p = pad([to_backend(lib, s) for s in seqs], side=side, length=T, value=7)
    B, trailing = len(seqs), seqs[0].shape[1:]
    data, mask = host(p.data), host(p.mask)
    assert data.shape == (B, T, *trailing) and mask.shape == (B, T) and mask.dtype == bool
    assert host(p.lengths).tolist() == lengths and p.side == side
    tol = dict(rtol=8 * np.finfo(np.float32).eps * max(T, 1), atol=1e-6 * max(T, 1))
    for b, s in enumerate(seqs):
        n = len(s)
        real = slice(0, n) if side == "right" else slice(T - n, T)
        assert mask[b].tolist() == [real.start <= t < real.stop for t in range(T)]
        np.testing.assert_array_equal(data[b, real], s)
        assert (data[b][~mask[b]] == 7).all()
        np.testing.assert_array_equal(host(p.unpad()[b]), s)
    assert p.padding_fraction == pytest.approx(1 - sum(lengths) / (B * T) if T else 0)
    # reductions through the mask; empty rows: 0, NaN, -inf
    sums, means, maxes = host(p.sum()), host(p.mean()), host(p.max())
    for b, s in enumerate(seqs):
        np.testing.assert_allclose(sums[b], s.sum(axis=0), **tol)
        if len(s):
            np.testing.assert_allclose(means[b], s.mean(axis=0), **tol)
            np.testing.assert_array_equal(maxes[b], s.max(axis=0))
        else:
            assert np.isnan(means[b]).all() and np.isneginf(maxes[b]).all()
    # the last real item, or an error naming the first empty row
    if 0 in lengths:
        with pytest.raises(PaddingError, match=f"row {lengths.index(0)} is empty"):
            p.last()
    else:
        np.testing.assert_array_equal(host(p.last()), np.stack([s[-1] for s in seqs]))
        assert host(p.last_index()).tolist() == [n - 1 if side == "right" else T - 1
                                                 for n in lengths]
    # attention masks: [B, 1, T] keys, [B, T, T] causal
    keys, causal = host(p.key_mask()), host(p.causal_key_mask())
    additive = host(p.additive_key_mask())
    for b in range(B):
        for i in range(T):
            for j in range(T):
                assert keys[b, 0, j] == mask[b, j]
                assert causal[b, i, j] == (mask[b, j] and j <= i)
                assert additive[b, 0, j] == (0 if mask[b, j] else -np.inf)
    # the other side: same sequences, and the batch still validates on it
    other = p.to_side("left" if side == "right" else "right")
    for b, s in enumerate(seqs):
        np.testing.assert_array_equal(host(other.unpad()[b]), s)
    again = Padded(other.data, other.mask, other.side)
    assert host(again.lengths).tolist() == lengths
    # a re-built batch agrees; the opposite side is refused unless every row is full or empty
    ambiguous = all(n in (0, T) for n in lengths)
    if ambiguous:
        with pytest.raises(PaddingError, match="does not show the side"):
            Padded(p.data, p.mask)
    else:
        assert Padded(p.data, p.mask).side == side
        with pytest.raises(PaddingError, match=r"mask row \d+ is not"):
            Padded(p.data, p.mask, "left" if side == "right" else "right")


@settings(max_examples=60)
@given(ragged())
def test_numpy_methods_match_a_loop(case):
    check_against_loop("numpy", *case)


@settings(max_examples=60)
@given(ragged())
def test_torch_methods_match_a_loop(case):
    check_against_loop("torch", *case)


def test_jax_methods_match_a_loop():
    """One case (JAX compiles each new shape: drawn cases cost seconds each): left padding, an
    empty row, a trailing axis, a pad length over the longest."""
    pytest.importorskip("jax")
    rng = np.random.default_rng(0)
    seqs = [rng.standard_normal((n, 2)).astype(np.float32) for n in (3, 0, 2)]
    check_against_loop("jax", seqs, "left", 1)


def test_to_side_runs_under_jax_jit():
    """Inside ``jax.jit`` the rows are tracers and so is the batch's mask; to_side repacks by
    NumPy masks (concrete, as JAX's boolean indices must be), as pad() does."""
    jax = pytest.importorskip("jax")
    rows = [np.arange(1.0, 4.0), np.arange(1.0, 2.0)]

    def left(a, b):
        p = pad([a, b]).to_side("left", -1.0)
        return p.data, p.mask

    data, mask = jax.jit(left)(*rows)
    assert np.asarray(data).tolist() == [[1.0, 2.0, 3.0], [-1.0, -1.0, 1.0]]
    assert np.asarray(mask).tolist() == [[True, True, True], [False, False, True]]


@settings(max_examples=60)
@given(st.lists(st.lists(st.integers(-5, 5), max_size=6), min_size=1, max_size=5),
       st.sampled_from(["right", "left"]), st.integers(1, 4))
def test_token_lists_pad_like_a_loop(tokens, side, multiple):
    p = pad(tokens, side=side, multiple_of=multiple, value=-9)
    T = p.shape[1]
    assert T % multiple == 0 and max(map(len, tokens)) <= T < max(map(len, tokens)) + multiple
    for row, seq in zip(p.data.tolist(), tokens, strict=True):
        padding = [-9] * (T - len(seq))
        assert row == (seq + padding if side == "right" else padding + seq)


def mask_oracle(mask: np.ndarray) -> tuple[list[bool], list[bool]]:
    """Per row: is it right-padded (real, then padding), is it left-padded."""
    rows = [list(map(bool, r)) for r in mask]
    return ([r == sorted(r, reverse=True) for r in rows], [r == sorted(r) for r in rows])


@settings(max_examples=150)
@given(st.integers(1, 4).flatmap(lambda T: st.lists(
    st.lists(st.booleans(), min_size=T, max_size=T), min_size=1, max_size=4)),
       st.sampled_from(LIBS[:2]))
def test_any_mask_is_accepted_or_refused_like_a_loop(rows, lib):
    mask = np.array(rows, dtype=bool)
    right, left = mask_oracle(mask)
    data, on = to_backend(lib, np.zeros(mask.shape)), to_backend(lib, mask)
    for side, ok in (("right", right), ("left", left)):
        if all(ok):
            assert host(Padded(data, on, side).lengths).tolist() == mask.sum(1).tolist()
        else:
            with pytest.raises(PaddingError, match=f"mask row {ok.index(False)} is not {side}"):
                Padded(data, on, side)
    neither = [not r and not q for r, q in zip(right, left, strict=True)]
    only_right = [r and not q for r, q in zip(right, left, strict=True)]
    only_left = [q and not r for r, q in zip(right, left, strict=True)]
    if any(neither):
        with pytest.raises(PaddingError, match=f"row {neither.index(True)} is padded on neither"):
            Padded.infer_side(on)
    elif any(only_right) and any(only_left):
        with pytest.raises(PaddingError, match="the mask mixes sides"):
            Padded.infer_side(on)
    elif any(only_right) or any(only_left):
        assert Padded.infer_side(on) == ("right" if any(only_right) else "left")
    else:
        with pytest.raises(PaddingError, match="does not show the side"):
            Padded.infer_side(on)


# -- policies and options ----------------------------------------------------------------------
def test_additive_key_mask_dtype_and_finite(lib):
    p = pad([to_backend(lib, np.ones(3, np.int32)), to_backend(lib, np.ones(1, np.int32))])
    default = p.additive_key_mask()  # integer data: the library's default float
    assert "float32" in str(default.dtype)
    finite = host(p.additive_key_mask("float16", finite=True))
    assert finite.dtype == np.float16
    assert finite[1, 0].tolist() == [0, np.finfo(np.float16).min, np.finfo(np.float16).min]


def test_causal_additive_mask_softmax_has_no_nan_when_finite():
    p = pad([torch.ones(2), torch.ones(4)], side="left")
    scores = torch.zeros(2, 4, 4)
    assert torch.isnan((scores + p.additive_key_mask(causal=True)).softmax(-1)).any()
    assert not torch.isnan((scores + p.additive_key_mask(causal=True, finite=True))
                           .softmax(-1)).any()


def test_max_of_an_empty_integer_row_is_the_dtype_minimum():
    p = pad([np.array([3, 1], np.int16), np.array([], np.int16)])
    assert p.max().tolist() == [3, np.iinfo(np.int16).min]
    assert p.sum().tolist() == [4, 0]


def test_price_in_another_dtype():
    p = pad([np.zeros((5, 4)), np.zeros((3, 4)), np.zeros((1, 4))])
    bill = tensig.price(p, "bf16")
    assert (bill.data, bill.mask, bill.padding) == (3 * 5 * 4 * 2, 15, 6 * 4 * 2)
    assert bill.total == bill.data + bill.mask + bill.lengths


def test_padding_error_is_a_shape_error_with_data():
    with pytest.raises(tensig.ShapeError) as info:
        Padded(np.zeros((2, 3)), np.array([[True, False, True], [True, True, True]]), "right")
    e = info.value
    assert isinstance(e, PaddingError)
    assert (e.row, e.side) == (0, "right")
    assert e.to_dict()["row"] == 0 and e.to_dict()["error"] == "PaddingError"
    assert "1 real, 1 padding, 1 real" in str(e)


# -- bad input: clear errors, before any array is built ----------------------------------------
@pytest.fixture
def no_arrays(monkeypatch):
    """Building the padded array fails the test: every refusal must come before it."""
    def built(*args, **kwargs):
        raise AssertionError("an array was built before the input was checked")

    from tensig.backends import JaxBackend, NumpyBackend, TorchBackend

    for adapter in (NumpyBackend, JaxBackend, TorchBackend):
        monkeypatch.setattr(adapter, "pad_rows", built)


@pytest.mark.parametrize(("sequences", "kwargs", "message"), [
    ([np.zeros((3, 2)), np.zeros((2, 4))], {},
     r"row 1 has items of shape \(4,\), row 0 of shape \(2,\)"),
    ([torch.zeros(3, 2), torch.zeros(2, 2), torch.zeros(1, 3)], {},
     r"row 2 has items of shape \(3,\), row 0 of shape \(2,\)"),
    ([torch.zeros(3), torch.zeros(2, dtype=torch.int64)], {},
     "row 1 has dtype torch.int64, row 0 torch.float32"),
    ([np.zeros(3), torch.zeros(2)], {}, "row 1 is a torch.Tensor, row 0 a numpy array"),
    ([np.zeros(3), [1, 2]], {}, "row 1 is a builtins.list, row 0 a numpy array"),
    ([[1, 2], np.zeros(3)], {}, "row 1 is a ndarray, row 0 a list"),
    ([np.zeros(3), np.array(1.0)], {}, r"row 1 is a scalar \(shape \(\)\)"),
    ([[1, 2], [[1, 2]]], {}, "row 1's items do not share row 0's shape"),
    ([[[1, 2], [3]], [[1, 2]]], {}, "row 0's items are not numbers of one shape"),
    ([[1, 2, 3], [1]], {"length": 2}, "row 0 has length 3, over length=2"),
    ([[1], [1, 2, 3]], {"length": -1}, "length= must be an integer >= 0, not -1"),
    ([[1]], {"multiple_of": 0}, "multiple_of= must be an integer >= 1, not 0"),
    ([[1]], {"side": "middle"}, "side must be 'left' or 'right', not 'middle'"),
    ([], {}, "pad.. got no sequences"),
])
def test_pad_refuses_bad_input(no_arrays, sequences, kwargs, message):
    with pytest.raises(PaddingError, match=message):
        pad(sequences, **kwargs)


@pytest.mark.parametrize(("data", "mask", "side", "message"), [
    (np.zeros((2, 3)), np.ones((2, 4), bool), "right",
     r"data of shape \(2, 3\) does not start with the mask's \[B, T\] = \[2, 4\]"),
    (np.zeros((2, 3)), np.ones((2, 3, 1), bool), "right", r"mask must be \[B, T\]"),
    (np.zeros((2, 3)), np.ones((2, 3)), "right", "mask must be bool, not float64"),
    (torch.zeros(2, 3), np.ones((2, 3), bool), "right", "give both in one library"),
    (np.zeros((2, 3)), [[True] * 3] * 2, "right", "mask must be an array, not a list"),
    (np.zeros((2, 3)), np.ones((2, 3), bool), "up", "side must be 'left' or 'right'"),
    (np.zeros((2, 3)), np.array([[0, 1, 1], [1, 1, 1]], bool), "right",
     r"mask row 0 is not right-padded: it reads 1 padding, 2 real(.|\n)*pass side='left'"),
    (np.zeros((2, 3)), np.array([[1, 1, 1], [1, 0, 0]], bool), "left",
     "mask row 1 is not left-padded: it reads 1 real, 2 padding"),
    (np.zeros((2, 3)), np.array([[1, 1, 0], [0, 1, 1]], bool), None,
     "the mask mixes sides: row 0 is right-padded .2 real, 1 padding., row 1 left-padded"),
    (np.zeros((1, 3)), np.array([[0, 1, 0]], bool), None, "row 0 is padded on neither side"),
    (np.zeros((1, 3)), np.ones((1, 3), bool), None, "every mask row is full or empty"),
])
def test_padded_refuses_a_mask_that_disagrees(data, mask, side, message):
    with pytest.raises(PaddingError, match=message):
        Padded(data, mask, side)


def test_last_of_an_empty_row_names_it():
    p = pad([[1, 2], [], [3]])
    with pytest.raises(PaddingError, match=r"last\(\): row 1 is empty"):
        p.last()


# -- annotations: @shaped and verify know padded batches ---------------------------------------
def test_a_padded_batch_is_read_only():
    p = pad([[1, 2], [3]])
    with pytest.raises(AttributeError):
        p.mask = np.ones((2, 2), bool)


@pytest.mark.parametrize("compiled", [True, False])
def test_shaped_checks_a_padded_argument(compiled):
    @tensig.shaped(compiled=compiled)
    def pool(batch: Padded[Float[torch.Tensor, "B T d"]]) -> Float[torch.Tensor, "B d"]:
        return batch.mean()

    @tensig.shaped(compiled=compiled)
    def wrong_axis(batch: Padded[Float[torch.Tensor, "B T d"]]) -> Float[torch.Tensor, "B d"]:
        return batch.data.mean(0)

    batch = pad([torch.ones(3, 4), torch.ones(1, 4)])
    assert pool(batch).shape == (2, 4)
    with pytest.raises(TypeError, match=r"'batch' is a Tensor, but its annotation is "
                                        r"Padded\[Float\['B T d'\]\]"):
        pool(batch.data)  # the data alone, without its mask
    with pytest.raises(tensig.ShapeError, match="'batch' has 2 axes"):
        pool(pad([torch.ones(3), torch.ones(2)]))
    with pytest.raises(tensig.ShapeError, match="needs a floating dtype"):
        pool(pad([torch.ones(3, 4, dtype=torch.int64)]))
    with pytest.raises(tensig.ShapeError, match="B = 2 was bound by argument 'batch'"):
        wrong_axis(batch)


def test_padded_annotation_needs_a_shape_of_rank_two():
    assert repr(Padded[Float[np.ndarray, "B T d"]].__metadata__[0]) == "Padded[Float['B T d']]"
    with pytest.raises(tensig.SpecSyntaxError, match=r"a padded batch is \[B, T, ...\]"):
        Padded[Float[np.ndarray, "B"]]
    with pytest.raises(TypeError, match=r"Padded\[...\] takes a shape annotation"):
        Padded[np.ndarray]


def np_attend_bad(q: Float[np.ndarray, "B T d"],
                  batch: Padded[Float[np.ndarray, "B T d"]]) -> Float[np.ndarray, "B T T"]:
    scores = q @ batch.data.swapaxes(-1, -2)
    return scores + np.where(batch.mask, 0.0, -np.inf)  # the dropped None


def np_attend(q: Float[np.ndarray, "B T d"],
              batch: Padded[Float[np.ndarray, "B T d"]]) -> Float[np.ndarray, "B T T"]:
    scores = q @ batch.data.swapaxes(-1, -2)
    return scores + batch.additive_key_mask()


def torch_attend_bad(q: Float[torch.Tensor, "B T d"],
                     batch: Padded[Float[torch.Tensor, "B T d"]]) -> Float[torch.Tensor, "B T T"]:
    return q @ batch.data.transpose(-1, -2) + batch.mask


def torch_attend(q: Float[torch.Tensor, "B T d"],
                 batch: Padded[Float[torch.Tensor, "B T d"]]) -> Float[torch.Tensor, "B T T"]:
    return (q @ batch.data.transpose(-1, -2)).masked_fill(~batch.key_mask(), float("-inf"))


def np_pool(batch: Padded[Float[np.ndarray, "B T d"]]) -> Float[np.ndarray, "B d"]:
    return batch.mean() + batch.last() + batch.max()


def np_pool_unmasked(batch: Padded[Float[np.ndarray, "B T d"]]) -> Float[np.ndarray, "B d"]:
    return (batch.data * batch.mask).sum(axis=1)  # mask[..., None] was meant


@pytest.mark.parametrize(("fn", "finding"), [
    (np_attend_bad, r"broadcasts T against B .*\[B, T, T\] and \[B, T\]"),
    (torch_attend_bad, r"broadcasts T against B .*\[B, T, T\] and \[B, T\]"),
    (np_pool_unmasked, "broadcasts d against T"),
    (np_attend, None), (torch_attend, None), (np_pool, None),
])
def test_verify_reads_the_mask_as_b_t_bool(fn, finding):
    report = tensig.verify(fn)
    if finding is None:
        assert report.ok, (report.findings, report.notes)
    else:
        assert any(re.search(finding, f.message) for f in report.findings), report.findings


def test_dask_rows_are_refused_naming_why():
    """Dask arrays are lazy: a padded batch's checks read the mask's values.  pad() said
    "row 0 is a Array, row 0 a Array" (the list path's message) instead of that."""
    da = pytest.importorskip("dask.array")
    with pytest.raises(TypeError, match=r"not dask arrays .* read the mask's values"):
        pad([da.ones((3, 2)), da.ones((2, 2))])


def test_is_float_on_every_adapter():
    """The dtype test padded batches and the convolution kernels ask: dask.array has no
    ``issubdtype`` (it raised AttributeError there)."""
    from tensig.backends import backend_named

    for name in ("numpy", "dask", "torch", "jax"):
        pytest.importorskip(name)
        b = backend_named(name)
        floating, integer = b.as_dtype("float32"), b.as_dtype("int64")
        assert b.is_float(floating) and not b.is_float(integer), name


def test_a_mask_of_jax_prng_keys_is_refused_as_not_bool():
    """A dtype NumPy cannot interpret (JAX's PRNG keys) gets the mask check's PaddingError."""
    jax = pytest.importorskip("jax")
    keys = jax.random.split(jax.random.key(0), 4).reshape(2, 2)
    with pytest.raises(PaddingError, match="the mask must be bool, not key<fry>"):
        Padded.infer_side(keys)
