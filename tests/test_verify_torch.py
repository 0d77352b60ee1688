"""verify on PyTorch code: tensor attributes, concrete buffers, the long tail of layers, and the
meta-tensor fallback (its fitted sizes checked against real torch at sizes it never saw)."""

from __future__ import annotations

import dataclasses
import itertools

import einops
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from arrays import clean, kinds, real_tensors
from tensig.check import tracer as S
from tensig.check.verify import Report, Signature, verify


def with_kinds(text: str, kinds: str) -> Signature:
    """A signature whose arguments have the given dtype kinds (``"fi"``: float, int)."""
    return dataclasses.replace(Signature.parse(text), kinds=tuple(kinds))


# -- 1. the tensor API real code touches ----------------------------------------------------------


def test_issue_reproductions_trace_to_the_end():
    assert verify(lambda i: torch.arange(0, i.size(1), device=i.device), "B, T => T").ok
    assert verify(lambda x: F.linear(x, torch.ones(8, 8).to(x.dtype)), "B, 8 => B, 8").ok
    assert verify(lambda x: x.float().type(x.dtype), "B, 8 => B, 8").ok
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    r = verify(lambda x: mha(x, x, x, need_weights=False)[0], "B, T, 8 => B, T, 8")
    assert r.ok, str(r)


def test_tensor_attributes_are_torch_objects():
    seen = {}

    def f(x):
        seen.update(dtype=x.dtype, device=x.device, type=x.type(), nested=x.is_nested,
                    grad=x.requires_grad, cuda=x.is_cuda, ndim=x.ndim, size=x.element_size(),
                    data=x.data, numel=x.numel(), length=len(x))
        ids = x.long()
        seen.update(int_dtype=ids.dtype, int_size=ids.element_size())
        return x.detach().contiguous().clone().to(torch.float16).to(x).to("cpu")

    r = verify(f, "B, T => B, T")
    assert r.ok, str(r)
    assert seen["dtype"] is torch.float32 and seen["int_dtype"] is torch.int64
    assert seen["device"] == torch.device("cpu") and seen["type"] == "torch.FloatTensor"
    assert (seen["nested"], seen["grad"], seen["cuda"]) == (False, False, False)
    assert (seen["ndim"], seen["size"], seen["int_size"]) == (2, 4, 8)
    assert isinstance(seen["data"], S.SymArray) and str(seen["numel"].dim) == "B*T"


def test_creation_with_symbolic_sizes():
    def f(x):
        t = x.size(1)
        causal = torch.tril(torch.ones(t, t)) == 0
        pos = torch.arange(t, device=x.device)
        return x.masked_fill(causal, 0.0) + pos[None, :]

    assert verify(f, "B, T, T => B, T, T").ok


def test_wrong_axis_is_still_found_through_attributes():
    def f(x):
        t = x.size(0)  # meant size(1)
        return x + torch.zeros(t, device=x.device, dtype=x.dtype)

    assert kinds(verify(f, "B, T => B, T")) == ["broadcast"]



def test_unsqueeze_takes_its_axis_as_torch_spells_it():
    """``x.unsqueeze(dim=1)`` and ``torch.unsqueeze(x, dim=0)``: torch's keyword, as positional."""
    r = verify(lambda x: x.unsqueeze(dim=1), "B, T => B, 1, T", torch_style=True)
    assert r.ok and r.complete, str(r)
    r = verify(lambda x: torch.unsqueeze(x, dim=0), "B, T => 1, B, T", torch_style=True)
    assert r.ok and r.complete, str(r)
    assert torch.zeros(2, 3).unsqueeze(dim=1).shape == (2, 1, 3)  # the oracle: torch itself
    assert kinds(verify(lambda x: x.unsqueeze(dim=0), "B, T => B, 1, T")) == ["return-shape"]



def test_torch_norm_is_modelled_by_hand_as_the_method_is(monkeypatch):
    """``torch.norm(x, dim=...)`` reduces as ``x.norm(dim=...)`` does, without the meta-tensor
    fallback (a fit per shape signature, about 20x the cost)."""
    from tensig.check import trace_torch

    fitted = []
    real_fallback = trace_torch.fallback
    monkeypatch.setattr(trace_torch, "fallback",
                        lambda *a, **k: fitted.append(a[0]) or real_fallback(*a, **k))
    r = verify(lambda x: torch.norm(x, dim=-1, keepdim=True) + x.norm(2, -1, True),
               "B, T, D => B, T, 1", torch_style=True)
    assert r.ok and r.complete, str(r)
    assert verify(lambda x: torch.norm(x), "B, T => ", torch_style=True).ok
    assert kinds(verify(lambda x: torch.norm(x, dim=1), "B, T, D => B, T",
                        torch_style=True)) == ["return-shape"]
    assert fitted == []
    x = torch.randn(2, 3, 5)  # the oracle: torch's own shapes
    assert torch.norm(x, dim=-1, keepdim=True).shape == x.norm(2, -1, True).shape == (2, 3, 1)
    assert torch.norm(x, dim=1).shape == (2, 5)



def test_a_torch_function_that_is_no_tensor_method_is_no_attribute():
    """``x.linear(w)`` fails in torch (no such method), so it stops the trace as it did before
    methods were read from the TORCH table; ``x.split`` (a method) is that table's function."""
    assert not hasattr(torch.Tensor, "linear") and hasattr(torch.Tensor, "split")  # the oracle
    r = verify(lambda x, w: x.linear(w), "B, 8; 4, 8 => B, 4", torch_style=True)
    assert not r.ok and "AttributeError" in r.notes[0], str(r)
    assert verify(lambda x: x.split(4, dim=1)[0], "B, 8 => B, 4", torch_style=True).ok


# -- 2. concrete buffers met by symbolic sizes ----------------------------------------------------


CAUSAL = torch.tril(torch.ones(32, 32))
PE = torch.zeros(1, 64, 8)


def test_max_and_min_methods_are_torchs():
    """``x.max(dim)`` gives values and indices, ``x.max(other)`` is elementwise, as torch.max."""
    def f(x, y):
        values, indices = x.max(dim=1, keepdim=True)
        return values + x.min(1).values[:, None] + indices, x.max(y)

    r = verify(f, "B, T; B, T => B, 1; B, T", torch_style=True)
    assert r.ok and r.result[0] == (S.Dim.symbol("B"), S.Dim.const(1)), str(r)
    r = verify(lambda x: x.max(dim=1).indices, "B, T => T", torch_style=True)
    assert kinds(r) == ["return-shape"]


def test_squeeze_and_transpose_of_two_axes_are_torchs():
    """torch's ``squeeze(dim)`` of an axis that is not 1 keeps it (NumPy's raises) and its
    ``transpose(0, 1)`` of a matrix swaps (NumPy's keeps it), in code that names torch and in
    a body of tensor methods alone; a squeezed ``B`` is dropped at ``B = 1``: assumed not."""
    x = torch.randn(3, 4)
    assert x.squeeze(0).shape == (3, 4) and x[:1].squeeze(0).shape == (4,)
    assert x.transpose(0, 1).shape == (4, 3)
    for squeezed in (lambda x: x.squeeze(0), lambda x: torch.squeeze(x, 0),
                     lambda x: torch.relu(x).squeeze(dim=0)):
        r = verify(squeezed, "B, T => B, T")
        assert not r.errors and [f.message.split(":")[0] for f in r] == ["assumes 2 <= B"], \
            str(r)
    assert verify(lambda x: x[:, :1].squeeze(1), "B, T => B").ok
    for swapped in (lambda x: x.transpose(0, 1), lambda x: torch.relu(x).transpose(0, 1)):
        assert verify(swapped, "d, B => B, d").ok
        assert kinds(verify(swapped, "d, B => d, B")) == ["return-shape"]


def test_causal_buffer_sliced_by_a_symbolic_size_is_an_assumption():
    def f(att):
        t = att.size(-1)
        return att.masked_fill(CAUSAL[:t, :t] == 0, float("-inf"))

    r = verify(f, "B, T, T => B, T, T")
    assert [(x.kind, x.severity) for x in r] == [("assumption", "warning")], str(r)
    assert "assumes T <= 32" in r.findings[0].message
    assert r.result == ((S.Dim.symbol("B"), S.Dim.symbol("T"), S.Dim.symbol("T")),)


def test_positional_table_sliced_by_a_symbolic_size():
    r = verify(lambda x: x + PE[:, :x.size(1)], "B, T, 8 => B, T, 8")
    assert [x.severity for x in r] == ["warning"] and "T <= 64" in r.findings[0].message
    # the slice of the wrong axis is still an error
    r = verify(lambda x: x + PE[:, :x.size(0)], "B, T, 8 => B, T, 8")
    assert "broadcast" in kinds(r)


def test_buffers_behave_normally_outside_verify():
    assert CAUSAL[:3, :3].shape == (3, 3) and isinstance(CAUSAL[:3, :3], torch.Tensor)
    verify(lambda x: x + PE[:, :x.size(1)], "B, T, 8 => B, T, 8")
    assert type(PE[:, :5]) is torch.Tensor and "__getitem__" not in torch.Tensor.__dict__


def test_recorded_divisibility_is_used_by_later_checks():
    def f(x, w):
        parts = torch.split(x, x.size(-1) // 4, -1)
        return torch.cat(parts, -1) @ w

    r = verify(f, "B, d; d, d => B, d")
    assert [(x.kind, x.severity) for x in r] == [("assumption", "warning")], str(r)
    assert "d divisible by 4" in r.findings[0].message

    def chunked(x, w):
        return torch.cat(torch.chunk(x, 4, -1), -1) @ w

    r = verify(chunked, "B, d; d, d => B, d")
    assert [x.severity for x in r] == ["warning"], str(r)
    r = verify(chunked, "B, d; e, e => B, e")  # a real mismatch stays an error
    assert "contraction" in kinds(r)


# -- 3. the long tail of layers -------------------------------------------------------------------


LAYERS = [
    (lambda x: torch.pow(x, 2) + x.pow(3), "B, T => B, T"),
    (nn.BatchNorm2d(8).eval(), "B, 8, H, W => B, 8, H, W"),
    (nn.BatchNorm1d(8).eval(), "B, 8, T => B, 8, T"),
    (nn.GroupNorm(2, 8), "B, 8, H, W => B, 8, H, W"),
    (nn.InstanceNorm1d(8), "B, 8, T => B, 8, T"),
    (nn.Embedding(100, 8), "B, T => B, T, 8"),
    (nn.Dropout(0.1), "B, T => B, T"),
    (nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1), "B, 8, H, W => B, 4, H2, W2"),
    (nn.MaxPool2d(2), "B, 8, H, W => B, 8, H2, W2"),
    (nn.AvgPool1d(3, stride=1, padding=1), "B, 8, T => B, 8, T"),
    (nn.AdaptiveAvgPool2d(1), "B, 8, H, W => B, 8, 1, 1"),
    (nn.Upsample(scale_factor=2), "B, 8, H, W => B, 8, H2, W2"),
    (nn.PixelShuffle(2), "B, 16, H, W => B, 4, H2, W2"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
     "B, H, T, E; B, H, T, E; B, H, T, E => B, H, T, E"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
     "B, 8, T, E; B, 2, T, E; B, 2, T, E => B, 8, T, E"),
    (lambda x: einops.rearrange(x, "b t (h d) -> b h t d", h=4).sum(-1),
     "B, T, 32 => B, 4, T"),
    (lambda x: einops.repeat(einops.reduce(x, "b t d -> b d", "mean"), "b d -> b n d", n=3),
     "B, T, D => B, 3, D"),
]


@pytest.mark.parametrize("layer, sig", LAYERS)
def test_layers_trace_clean(layer, sig):
    r = verify(layer, sig)
    pool = isinstance(layer, torch.nn.MaxPool2d)  # of 2: it refuses H = 1 or W = 1
    assert r.ok or (pool and [f.message.split(":")[0] for f in r] == [
        "assumes 2 <= H", "assumes 2 <= W"]), str(r)


def test_embedding_with_integer_ids():
    emb = nn.Embedding(100, 8)
    r = verify(lambda ids: emb(ids).sum(1), with_kinds("B, T => B, 8", "i"))
    assert r.ok, str(r)


def test_sdpa_with_different_key_and_value_lengths_is_an_error():
    q, k, v = torch.zeros(2, 1, 5, 4), torch.zeros(2, 1, 6, 4), torch.zeros(2, 1, 7, 4)
    # torch's CPU kernel runs it (keys of length 6, values of length 7) without a word
    assert F.scaled_dot_product_attention(q, k, v).shape == (2, 1, 5, 4)
    r = verify(lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
               "B, H, T, E; B, H, S, E; B, H, S2, E => B, H, T, E")
    assert kinds(r) == ["contraction"] and "keys have length S but values S2" in str(r)


def test_a_division_no_size_makes_exact_is_an_error():
    """Groups of ``2*C + 1`` channels, ``3`` query heads over ``2`` key heads, ``2*D + 1``
    features viewed as 2 heads: torch refuses each at every size; verify warned "requires
    2*C + 1 divisible by 2", an assumption no size meets, as if the code held under it."""
    def odd(x, dim):
        return torch.cat([x, x, x.narrow(dim, 0, 1)], dim)

    def heads(x):
        B, T, _ = x.shape
        return odd(x, 2).view(B, T, 2, -1)

    cases = [(lambda x: F.group_norm(odd(x, 1), 2), "B, T, D => B, 2*T + 1, D",
              lambda b, t, d: [(b, t, d)]),
             (heads, "B, T, D => B, T, 2, D", lambda b, t, d: [(b, t, d)]),
             (lambda q, k: F.scaled_dot_product_attention(q, k, k, enable_gqa=True),
              "B, 3, T, D; B, 2, T, D => B, 3, T, D",
              lambda b, t, d: [(b, 3, t, d), (b, 2, t, d)])]
    for f, sig, shapes in cases:
        r = verify(f, sig)
        assert r.errors and not r.warnings, str(r)
        for sizes in itertools.product((1, 2, 5), (1, 2, 3, 4), (2, 6)):
            with pytest.raises(RuntimeError):  # no size runs
                f(*(torch.zeros(s) for s in shapes(*sizes)))
    # torch's split by a size leaves a shorter last piece: no division is required
    assert torch.split(torch.zeros(3, 1), 2, dim=1)[0].shape == (3, 1)
    r = verify(lambda x: torch.split(x[:, None], 2, dim=1)[0], "B => B, 1")
    assert r.ok, str(r)


def test_mha_catches_a_wrong_embedding_size():
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    r = verify(lambda x: mha(x, x, x, need_weights=False)[0], "B, T, 6 => B, T, 6")
    assert not r.ok and "op-shape" in kinds(r)


def test_einops_split_records_divisibility_and_finds_mismatches():
    r = verify(lambda x: einops.rearrange(x, "b t (h d) -> b h t d", h=4), "B, T, D => B, 4, T, E")
    assert [x.severity for x in r] == ["warning"] and "D divisible by 4" in str(r)
    r = verify(lambda q, k: einops.einsum(q, k, "b t d, b s d -> b t s"),
               "B, T, D; B, S, E => B, T, S")
    assert kinds(r) == ["contraction"]


# -- the general mechanism: meta tensors, fitted sizes --------------------------------------------


FITTED = [
    (lambda x: F.pad(x, (1, 2)), "B, T", ["B", "T + 3"]),
    (lambda x: F.max_pool1d(x, 2), "B, 4, T", ["B", "4", "T // 2"]),
    (lambda x: F.conv_transpose1d(x, torch.zeros(4, 2, 4), stride=2, padding=1), "B, 4, T",
     ["B", "2", "2*T"]),
    (lambda x: F.avg_pool1d(x, 3, stride=2), "B, 4, T", ["B", "4", "(T + 1) // 2 - 1"]),
    (lambda x: torch.roll(x, 1, 0).cumsum(1), "B, T", ["B", "T"]),
    (lambda x: torch.kron(x, torch.ones(2, 3)), "B, T", ["2*B", "3*T"]),
    (lambda x: torch.diff(x, dim=1), "B, T", ["B", "T - 1"]),
]


@pytest.mark.parametrize("fn, args, expected", FITTED)
def test_fitted_sizes_match_real_torch(fn, args, expected):
    """The fit, checked against running the op on real tensors at sizes the fit never saw."""
    r = verify(fn, args + " =>")
    assert r.complete and not [f for f in r if f.severity == "error"], str(r)
    (dims,) = r.result
    assert [str(d) for d in dims] == expected
    names = sorted({n for d in Signature.parse(args).args[0] for n in d.symbols})
    for values in itertools.product((9, 10, 13), repeat=len(names)):
        env = dict(zip(names, values, strict=True))
        x = torch.zeros([d.evaluate(env) for d in Signature.parse(args).args[0]])
        assert list(fn(x).shape) == [d.evaluate(env) for d in dims]


def test_an_op_torch_rejects_at_every_size_is_a_finding():
    r = verify(lambda x, i, s: x.index_add(0, i, s), with_kinds("N, D; E; F, D => N, D", "fif"))
    assert kinds(r) == ["op-shape"] and "Tensor.index_add" in str(r)
    assert verify(lambda x, i, s: x.index_add(0, i, s),
                  with_kinds("N, D; E; E, D => N, D", "fif")).ok


def test_data_dependent_ops_stop_with_a_note():
    r = verify(lambda x: torch.zeros(int(x.sum().item())), "B, T =>")
    assert not r.complete and "item" in r.notes[0]
    r = verify(lambda x: torch.nonzero(x), "B, T =>")  # a fresh size, as NumPy's nonzero
    assert r.complete and str(r.result[0][0]).startswith("nnz") and r.result[0][1] == 2


# -- coverage: the share of torch's API verify traces, measured against torch itself --------------

_NOT_SHAPES = {"backward", "share_memory_", "pin_memory", "cuda", "set_", "detach_",
               "requires_grad_", "retain_grad", "storage", "untyped_storage", "numpy", "tolist",
               "item", "xpu", "ipu", "mtia", "hpu", "mps"}
_SIZES = {"B": 2, "T": 7, "H": 9, "W": 11}


def _traced(fn, sig, real) -> bool:
    """verify runs to the end without an error and predicts the real result's shape."""
    try:
        r = verify(fn, sig, torch_style=True)
    except Exception:
        return False
    if not r.complete or any(f.severity == "error" for f in r) or r.result is None:
        return False
    outs = real if isinstance(real, tuple) else (real,)
    try:
        return len(outs) == len(r.result) and all(
            list(o.shape) == [d.evaluate(_SIZES) for d in dims]
            for o, dims in zip(outs, r.result, strict=True))
    except (KeyError, ValueError):  # a fresh (unfitted) size: not a prediction
        return False


def _probe(calls) -> tuple[int, int, list[str]]:
    """(traced, runnable, missed) over ``(name, fn, sig, real input)`` candidates: the
    denominator is what torch itself runs on the real input and answers with a tensor."""
    traced = runnable = 0
    missed = []
    for name, fn, sig, x in calls:
        try:
            with torch.no_grad():
                real = fn(*(a.clone() for a in x))
        except Exception:
            continue
        if not isinstance(real, torch.Tensor):
            continue
        runnable += 1
        if _traced(fn, sig, real):
            traced += 1
        else:
            missed.append(name)
    return traced, runnable, missed


def _module_calls():
    import inspect

    inputs = [((torch.randn(2, 3, 9, 11),), "B, 3, H, W"), ((torch.randn(2, 3, 9),), "B, 3, H"),
              ((torch.randn(2, 7, 3),), "B, T, 3")]
    for name in sorted(dir(nn)):
        cls = getattr(nn, name)
        if not (inspect.isclass(cls) and issubclass(cls, nn.Module)) or cls is nn.Module:
            continue
        found = None
        for ctor, (x, sig) in itertools.product([(), (3,), (3, 3), (3, 3, 3)], inputs):
            try:
                module = cls(*ctor).eval()
                with torch.no_grad():
                    if isinstance(module(*(a.clone() for a in x)), torch.Tensor):
                        found = name, module, sig, x
                        break
            except Exception:
                continue
        if found is not None:
            yield found


def test_coverage_of_torch_api(capsys):
    import inspect
    import warnings

    x2, x4 = (torch.randn(2, 7),), (torch.randn(2, 3, 9, 11),)
    methods = [(n, lambda a, n=n: getattr(a, n)(), "B, T", x2) for n in sorted(dir(torch.Tensor))
               if not n.startswith("_") and n not in _NOT_SHAPES]
    functional = []
    for n in sorted(dir(F)):
        fn = getattr(F, n)
        if n.startswith("_") or not callable(fn) or inspect.isclass(fn):
            continue
        functional.append((n, lambda a, fn=fn: fn(a), "B, 3, H, W", x4))
        functional.append((n + "(x, x)", lambda a, fn=fn: fn(a, a), "B, 3, H, W", x4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = {"torch.Tensor methods": _probe(methods),
                   "torch.nn.functional": _probe(functional),
                   "torch.nn modules": _probe(_module_calls())}
    with capsys.disabled():
        print()
        for what, (ok, total, missed) in results.items():
            print(f"verify traces {ok}/{total} ({ok / total:.0%}) of the {what} that run on "
                  f"a real input; missed: {', '.join(missed) or 'none'}")
    floors = {"torch.Tensor methods": 0.9, "torch.nn.functional": 0.9, "torch.nn modules": 0.9}
    for what, (ok, total, _) in results.items():
        assert total > 30 and ok / total >= floors[what], (what, ok, total)


# -- the corpus: realistic models, each verified clean, each injected bug caught ------------------


def _corpus():
    from verify_corpus import torch_models

    return torch_models


def _sizes(sig: Signature, override: dict[str, int] | None = None) -> dict[str, int]:
    sizes = {name: 4 * (i + 2) for i, name in enumerate(sig.symbols)}
    return {**sizes, **(override or {})}


def _verdicts():
    """(case, report on the correct code, report on the buggy code, crashes)."""
    corpus = _corpus()
    out = []
    for case in corpus.CASES:
        reports, crashes = [], []
        for fn in (case.good, case.bad):
            try:
                reports.append(verify(fn, corpus.signature(case)))
            except Exception as e:  # a crash of verify itself
                crashes.append(f"{type(e).__name__}: {e}")
                reports.append(None)
        out.append((case, *reports, crashes))
    return out


def _errors(r: Report | None) -> list:
    return [] if r is None else [f for f in r if f.severity == "error"]


def test_corpus_verifies_clean_and_catches_each_bug(capsys):
    results = _verdicts()
    n = len(results)
    verified = [c.name for c, good, _, _ in results
                if good is not None and good.complete and not _errors(good)]
    false_alarms = [(c.name, str(f)) for c, good, _, _ in results for f in _errors(good)]
    crashes = [(c.name, x) for c, *_, xs in results for x in xs]
    crashes += [(c.name, note) for c, good, _, _ in results if good is not None
                for note in good.notes]
    caught = [c.name for c, _, bad, _ in results if _errors(bad)]
    pending = [c for c, _, bad, _ in results if not _errors(bad) and c.needs]
    missed = [c.name for c, _, bad, _ in results if not _errors(bad) and not c.needs]
    silent = [c for c, *_ in results if c.silent]
    silent_caught = [c for c in silent if c.name in caught]
    warnings = sum(1 for _, good, _, _ in results if good is not None
                   for f in good if f.severity == "warning")
    with capsys.disabled():
        print(f"\ntorch corpus: verified {len(verified)}/{n}, caught {len(caught)}/{n} "
              f"(silent bugs {len(silent_caught)}/{len(silent)}), false alarms "
              f"{len(false_alarms)}, crashes {len(crashes)}, warnings on correct code "
              f"{warnings}")
        for c in pending:
            print(f"  not caught yet, expected once it lands: {c.name} ({c.needs})")
    assert n >= 18
    assert not false_alarms and not crashes, (false_alarms, crashes)
    assert len(verified) == n and not missed, missed


def test_corpus_correct_code_runs_and_matches_its_signature():
    """The oracle for the corpus itself: torch runs the correct code at concrete sizes and the
    result has the declared shape (so "verified" is about code that works)."""
    corpus = _corpus()
    for case in corpus.CASES:
        sig = corpus.signature(case)
        sizes = _sizes(sig)
        with torch.no_grad():
            out = case.good(*real_tensors(sig, sizes))
        if sig.results is None:
            continue
        declared = sig.results[0]
        bound = {n for dims in sig.args for d in dims for n in d.symbols}
        assert len(out.shape) == len(declared), case.name
        for got, want in zip(out.shape, declared, strict=True):
            if want.symbols <= bound:  # a result-only symbol (H2, T2) binds to anything
                assert got == want.evaluate(sizes), case.name


def test_corpus_silent_bugs_run_without_error_where_sizes_collide():
    """What makes these bugs dangerous: at the colliding sizes torch runs them silently."""
    import warnings

    corpus = _corpus()
    for case in corpus.CASES:
        if not case.silent:
            continue
        sig = corpus.signature(case)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            case.bad(*real_tensors(sig, _sizes(sig, case.collide)))


# -- number parameters: a sampler's float schedule, a size passed as an int -------------------

from tensig import Float, Int  # noqa: E402


def _ddpm_step(x: Float[torch.Tensor, "B, C, H, W"], eps: Float[torch.Tensor, "B, C, H, W"],
               alpha: float, alpha_bar: float, sigma: float) -> Float[torch.Tensor, "B, C, H, W"]:
    mean = (x - (1 - alpha) / (1 - alpha_bar) ** 0.5 * eps) / alpha ** 0.5
    return mean + sigma * torch.randn_like(x)


def _scaled(x: Float[torch.Tensor, "B, D"], scale: float, w: Float[torch.Tensor, "D, E"]
            ) -> Float[torch.Tensor, "B, E"]:
    return scale * x @ w


def _positional_encoding(T: int, D: int) -> Float[torch.Tensor, "T, D"]:
    """The textbook sinusoidal table: correct for even D only (the odd columns are one
    fewer than the even ones)."""
    pos = torch.arange(T).unsqueeze(1)
    div = torch.exp(torch.arange(0, D, 2) * (-9.2 / D))
    pe = torch.zeros(T, D)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe


def _mixup(x: Float[torch.Tensor, "B, C"], y: Float[torch.Tensor, "B, K"], lam: float
           ) -> tuple[Float[torch.Tensor, "B, C"], Float[torch.Tensor, "B, K"]]:
    idx = torch.randperm(x.size(0))
    noise = torch.randint(0, 3, (x.shape[0],))
    return lam * x[idx] + noise[:, None], lam * y + (1 - lam) * y[idx]


def _wrong_scale(x: Float[torch.Tensor, "B, D"], w: Float[torch.Tensor, "D, E"], n: int
                 ) -> Float[torch.Tensor, "B, E"]:
    return (x @ w)[:n]


@pytest.mark.parametrize("fn", [_ddpm_step, _scaled, _mixup])
def test_required_number_parameters_are_numbers_not_arrays(fn):
    """A parameter annotated ``float`` (a sampler's alpha, mixup's lambda) is a number: before,
    verify counted it as an array and gave up on the function; a number between two arrays
    must not shift the second array into its place either."""
    report = verify(fn)
    assert report.ok and not report.notes, report
    assert report.result == report.signature.results


def test_an_int_parameter_named_like_a_size_is_that_size():
    """``T: int`` beside a result ``T, D`` is the size T: the table's shape is checked for all
    T and D, and the odd-D bug of the textbook table (``pe[:, 1::2]`` has D // 2 columns, the
    values (D + 1) // 2) is found, while it runs for every even D."""
    report = verify(_positional_encoding)
    assert [f.code for f in report.findings] == ["TS101"], report
    assert "D // 2" in str(report.findings[0]) and "(D + 1) // 2" in str(report.findings[0])
    _positional_encoding(5, 8)  # even: runs
    with pytest.raises(RuntimeError):
        _positional_encoding(5, 7)


def test_an_int_parameter_that_names_no_size_is_refused_with_the_fix():
    """``n`` names no size of the signature: a count, a seed or a size, verify cannot tell, so
    it says so and shows the fix (``functools.partial``), which then verifies and finds that
    the slice makes the rows n (at most B), not B."""
    import functools

    with pytest.raises(TypeError, match=r"'n': no shape annotation, no default.*"
                                        r"functools.partial\(_wrong_scale, n=\.\.\.\)"):
        verify(_wrong_scale)
    report = verify(functools.partial(_wrong_scale, n=5), "B D; D E => B E")
    assert [f.code for f in report.errors] == ["TS103"], report


def test_randint_with_every_argument_by_keyword_is_a_symbolic_creation():
    def f(x: Float[torch.Tensor, "B T"]) -> Int[torch.Tensor, "B"]:
        return torch.randint(low=0, high=10, size=(x.shape[0],))

    report = verify(f)
    assert report.ok and not report.notes and not report.findings, report


def test_a_required_parameter_without_annotation_is_named():
    def f(x: Float[torch.Tensor, "B, D"], mode) -> Float[torch.Tensor, "B, D"]:
        return x

    with pytest.raises(TypeError, match="'mode': no shape annotation, no default"):
        verify(f)


def _init_scaled(x: Float[torch.Tensor, "N D"]) -> Float[torch.Tensor, "N D"]:
    w = torch.empty(4, 4)
    torch.nn.init.trunc_normal_(w, std=x.shape[1] ** -0.5)  # checks its bounds with the float
    return x + w.sum()


def test_a_float_of_sizes_compared_inside_a_library_is_not_the_users_assumption():
    """``trunc_normal_`` compares its std (``D ** -0.5`` here) with its bounds: a check the
    user did not write, which had become two assumptions such as ``not (-2.55 > 0.0)`` at the
    user's line.  Only the user's own comparisons of such a number are assumptions."""
    r = verify(_init_scaled)
    assert clean(r), str(r)


def test_torch_repeat_method_is_a_tile():
    """``x.repeat(2, 1)`` on a tensor is torch's tile (``[2B, D]``), in torch code; NumPy's
    ``repeat`` (each element along an axis) is the method in NumPy code.  In code that names no
    torch (a tensor passed in), the two readings differ: an assumption, not a silent one."""
    r = verify(lambda x: torch.relu(x).repeat(2, 1), "B D => 2*B D")
    assert not r.findings and not r.notes, str(r)
    r = verify(lambda x: torch.relu(x).repeat(1, 3, 2), "B D => 1 3*B 2*D")
    assert not r.findings and not r.notes, str(r)
    assert kinds(verify(lambda x: torch.relu(x).repeat(2, 1), "B D => B 2*D")) == ["return-shape"]
    namespace: dict = {}
    exec("def up(x):\n    return x.repeat(2, 1)\n", namespace)  # a module without torch
    r = verify(namespace["up"], "B D => B 2*D")
    assert kinds(r) == ["assumption"] and "torch's tile ([2*B, D])" in str(r), str(r)


def test_a_numpy_integer_size_after_a_symbolic_one_is_a_size_not_a_dtype():
    """``torch.zeros(T, np.int64(3))``: NumPy's ``(shape, dtype)`` reading took any second
    argument that was no ``int`` for a dtype, so the result was ``[T]``; torch gives
    ``[T, 3]``."""
    import numpy as np

    r = verify(lambda x: torch.zeros(x.shape[0], np.int64(3)) + x, "T 3 => T 3")
    assert clean(r), str(r)


def test_complex_values_have_their_own_kind():
    """A complex tensor times a real one stays complex, its ``.real``/``.abs()`` are real, and
    torch.view_as_real takes only a complex one (torch's own rule, checked against torch)."""
    def spectrum(z, g):
        return torch.view_as_real(z * g / 2)

    def parts(z):
        return torch.view_as_real(z.real)

    def magnitude(z):
        return torch.view_as_real(z.abs())

    z, g = torch.zeros(3, 4, dtype=torch.complex64), torch.ones(4)
    assert spectrum(z, g).shape == (3, 4, 2)
    for bad in (parts, magnitude):
        with pytest.raises(RuntimeError, match="complex"):
            bad(z)
    assert kinds(verify(spectrum, "B F: complex; F => B F 2")) == []
    assert kinds(verify(parts, "B F: complex => B F 2")) == ["op-shape"]
    assert kinds(verify(magnitude, "B F: complex => B F 2")) == ["op-shape"]
    assert kinds(verify(spectrum, "B F; F => B F 2")) == ["op-shape"]  # a real z


def test_a_size_turned_into_an_int_is_that_size_again():
    """``int(T)`` is T's witness; used as a size it is read back as T, not the number (the
    reshape was a false TS104 at every size but the witness), under a stated assumption (a
    literal of the code may equal the witness)."""
    def view(x):
        b, t, c = x.shape
        return x.view(b, int(t), c)

    assert view(torch.zeros(2, 3, 4)).shape == (2, 3, 4)
    r = verify(view, "B T C => B T C")
    assert kinds(r) == ["assumption"] and "read as T" in str(r) and not r.notes, str(r)


def test_a_reorder_written_in_place_keeps_its_finding_when_viewed_back():
    """``y += z`` and ``y.add_(z)`` use a reorder's mixed axes (z is laid out as
    ``[B, H, T, E]``, y is not), though they make no array: each reshape is judged alone."""
    def added(x, z):
        B, T, H, E = x.shape
        y = x.reshape(B, H, T, E)
        y += z
        return y.reshape(B, T, H * E)

    def added_(x, z):
        B, T, H, E = x.shape
        y = x.reshape(B, H, T, E)
        y.add_(z)
        return y.reshape(B, T, H * E)

    x, z = torch.zeros(2, 3, 5, 7), torch.arange(2 * 5 * 3 * 7.0).reshape(2, 5, 3, 7)
    assert not torch.equal(added(x, z), z.permute(0, 2, 1, 3).reshape(2, 3, 35))
    for fn in (added, added_):
        assert kinds(verify(fn, "B T H E; B H T E =>")) == ["reorder"] * 2, fn.__name__


def test_a_complex_mean_or_einsum_stays_complex():
    """A mean and an einsum of complex tensors are complex (torch's), so view_as_real takes
    them: a float kind there was a false error."""
    def mean(z):
        return torch.view_as_real(z.mean(0))

    def contract(z, w):
        return torch.view_as_real(torch.einsum("bf,fg->bg", z, w.to(z.dtype)))

    z = torch.zeros(3, 4, dtype=torch.complex64)
    assert mean(z).shape == (4, 2) and contract(z, torch.ones(4, 4)).shape == (3, 4, 2)
    assert verify(mean, "B F: complex => F 2").ok
    assert verify(contract, "B F: complex; F F => B F 2").ok


def test_a_complex_where_with_a_float_fill_stays_complex():
    """torch.where(m, z, 0.0) of a complex z is complex: view_as_real takes it."""
    def masked(z, m):
        return torch.view_as_real(torch.where(m, z, 0.0))

    z = torch.zeros(3, 4, dtype=torch.complex64)
    assert masked(z, torch.ones(3, 4, dtype=torch.bool)).shape == (3, 4, 2)
    assert verify(masked, "B F: complex; B F: bool => B F 2").ok


def test_a_cached_in_place_op_returns_its_own_tensor_whatever_the_first_call_aliased():
    """An in-place op returns the tensor it changed, found by its place among the arguments:
    the first call's ``x.addcmul_(x, x)`` had ``x`` at three places, the last kept, so the
    cached ``x.addcmul_(y, y)`` returned ``y`` (torch returns ``x``)."""
    a, b = torch.zeros(2, 3), torch.ones(2, 3)
    assert a.addcmul_(b, b) is a  # the oracle
    seen = []

    def f(x, y):
        x.addcmul_(x, x)
        seen.append(x.addcmul_(y, y) is x)
        return x

    assert verify(f, "B, T; B, T =>").ok and seen == [True], seen


@pytest.mark.parametrize(("n_fft", "hop", "center", "batch", "complex_"), [
    (512, 128, True, True, True), (64, None, True, False, True),
    (63, 10, False, True, False), (64, None, False, False, True)])
def test_stft_frames_against_torch(n_fft, hop, center, batch, complex_):
    """torch.stft was fitted, and a fit finds no floor by a hop above 8: ``L // 128 + 1``
    frames were a fresh size.  Shapes against torch's at odd and even lengths."""
    sig = "B, L => B, F, T" if batch else "L => F, T"
    if not complex_:
        sig += ", 2"
    r = verify(lambda x: torch.stft(x, n_fft, hop, window=torch.hann_window(n_fft),
                                    center=center, return_complex=complex_), sig)
    for length in (301, 640, 1001):
        env = {"B": 3, "L": length}
        real = torch.stft(torch.ones((3, length) if batch else (length,)), n_fft, hop,
                          window=torch.hann_window(n_fft), center=center,
                          return_complex=complex_)
        assert [d.evaluate(env) for d in r.result[0]] == list(real.shape), (length, r.result)
        assert real.is_complex() == complex_


def test_stft_signature_and_window_length_checked():
    """A log-spectrogram's ``L // 128 + 1`` frames hold; one frame short is TS103, and a
    window of other than win_length samples is torch's error (the method spelling too)."""
    def spec(x):
        return torch.stft(x, n_fft=512, hop_length=128, window=torch.hann_window(512),
                          center=True, return_complex=True).abs()
    r = verify(spec, "B, L => B, 257, L//128+1")
    assert "TS103" not in str(r) and r.result[0][-1].evaluate({"B": 2, "L": 1001}) == \
        spec(torch.ones(2, 1001)).shape[-1], str(r)
    assert "TS103" in str(verify(spec, "B, L => B, 257, L//128")), "one frame short"
    with pytest.raises(RuntimeError, match="win_length"):
        torch.ones(1000).stft(400, window=torch.hann_window(300), return_complex=True)
    r = verify(lambda x: x.stft(400, window=torch.hann_window(300), return_complex=True),
               "L => 201, T")
    assert "op-shape" in kinds(r) and "win_length=400" in str(r), str(r)
    with pytest.raises(RuntimeError, match="return_complex"):
        torch.stft(torch.ones(1000), 400)
    r = verify(lambda x: torch.stft(x, 400), "L => 201, T")
    assert "op-shape" in kinds(r) and "requires return_complex" in str(r), str(r)


_NOISY = {"randn_like": lambda r: r + torch.randn_like(r),
          "dropout": lambda r: F.dropout(r, 0.5, training=True),
          "nn.Dropout": nn.Dropout(0.1).train(), "uniform_": lambda r: r.clone().uniform_()}
_QUIET = {"eval dropout": nn.Dropout(0.1).eval(), "p = 0": lambda r: F.dropout(r, 0.0)}


def test_a_random_op_under_torch_vmap_needs_its_randomness():
    """torch.vmap's randomness is "error" by default: a random op inside raises at every size
    (``randn_like``, a dropout while training), where verify found nothing.  "different" and
    "same" draw; an eval dropout or p = 0 draws nothing.  Oracle: torch at two sizes."""
    for name, f in {**_NOISY, **_QUIET}.items():
        for mode in ("error", "different", "same"):
            def g(x: Float[torch.Tensor, "B D"], f=f, mode=mode) -> Float[torch.Tensor, "B D"]:
                return torch.vmap(f, randomness=mode)(x)

            raises = mode == "error" and name in _NOISY
            for shape in ((4, 3), (2, 5)):
                try:
                    assert g(torch.ones(shape)).shape == shape
                except RuntimeError as e:
                    assert raises and "randomness error mode" in str(e), (name, mode, e)
                else:
                    assert not raises, (name, mode)
            r = verify(g)
            assert (kinds(r) == ["op-shape"] and "random operation" in str(r)) if raises \
                else clean(r), (name, mode, str(r))
    r = verify(lambda x: torch.vmap(lambda r: r * torch.rand_like(r))(x), "B D => B D")
    assert kinds(r) == ["op-shape"], str(r)  # the default randomness
