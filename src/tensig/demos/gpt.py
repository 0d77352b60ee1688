"""A character-level GPT trained on the short tales the package ships (``tales.txt``).

The README's "A character-level GPT" section describes the model (pre-norm transformer blocks
from :mod:`tensig.model.blocks`, heads split from ``d -> d`` projections, weight tying;
sequence positions on the batch row, ``b, t | d``) and what a run prints.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tensig.backends import to_numpy
from tensig.demos.common import Built, command_line, place
from tensig.model import blocks as B
from tensig.model import graph as G
from tensig.model.train import Trainer, _progress

#: the shipped corpus: :func:`compose` (seed 0, 1200 tales) wrote it
TEXT = Path(__file__).with_name("tales.txt")


@dataclass(frozen=True)
class Config:
    """The model's sizes: context ``T``, width ``D = H * E``, ``layers`` blocks, batch."""

    T: int = 64
    H: int = 4
    E: int = 16
    layers: int = 2
    batch: int = 32
    lr: float = 3e-3

    @property
    def D(self) -> int:
        return self.H * self.E


#: the demo's model (the bench's GPT row too)
CONFIG = Config()
#: ``make demo``'s: narrower and shorter, a few seconds on two cores
SMALL = Config(T=32, H=2, E=16, layers=1, batch=16)


def compose(seed: int = 0, tales: int = 1200) -> str:
    """The corpus: one short tale a line, from a small grammar; names recur within a tale, so
    predicting them needs attention back along the line."""
    names, animals, adjectives, things, places, feelings = (words.split() for words in (
        "Mia Tom Lena Sam Ben Ada Noor Ivo Kit Rosa",
        "fox cat dog owl frog duck bear mouse hen goat",
        "little big red old happy sleepy brave tiny green kind",
        "ball kite book cake hat boat drum box lamp shell",
        "garden forest house river park barn hill shop sea wood",
        "happy sad tired glad cold hungry proud calm"))
    when = ["One day", "In the morning", "At night", "After lunch", "On a rainy day", "Later"]
    r = random.Random(seed)

    def a(word: str) -> str:
        return ("an " if word[0] in "aeiou" else "a ") + word

    def tale() -> str:
        n, b, t = r.choice(names), r.choice(animals), r.choice(things)
        lines = [f"{r.choice(when)}, {n} went to the {r.choice(places)}.",
                 f"{n} saw {a(r.choice(adjectives))} {b} with {a(r.choice(adjectives))} {t}.",
                 r.choice([f"The {b} gave the {t} to {n}.", f"{n} and the {b} played.",
                           f"The {b} ran away with the {t}.", f"{n} asked the {b} for the {t}."]),
                 f"{n} was {r.choice(feelings)}."]
        if r.random() < 0.5:
            lines.append(r.choice(["Then they went home.", f"The {b} said good night.",
                                   "It was a good day.", f"They sat by the {r.choice(places)}."]))
        return " ".join(lines)

    return "".join(tale() + "\n" for _ in range(tales))


@dataclass
class Corpus:
    """The text as ids, its vocabulary, and windows of ``T + 1`` characters cut into inputs
    and next-character targets (the last tenth of the text held out)."""

    vocab: str
    train_x: np.ndarray
    train_y: np.ndarray
    val_x: np.ndarray
    val_y: np.ndarray

    def decode(self, ids: np.ndarray) -> str:
        return "".join(self.vocab[int(i)] for i in ids)


def corpus(T: int, text: str | None = None) -> Corpus:
    """Windows starting every ``T // 2`` characters (so every character is a target twice)."""
    text = TEXT.read_text(encoding="utf-8") if text is None else text
    vocab = "".join(sorted(set(text)))
    ids = np.frombuffer(text.encode("ascii"), np.uint8)
    ids = np.searchsorted(np.frombuffer(vocab.encode("ascii"), np.uint8), ids).astype(np.int64)
    cut = len(ids) * 9 // 10

    def windows(part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        starts = np.arange(0, len(part) - T - 1, max(1, T // 2))
        w = part[starts[:, None] + np.arange(T + 1)]
        return w[:, :-1].copy(), w[:, 1:].copy()

    return Corpus(vocab, *windows(ids[:cut]), *windows(ids[cut:]))


def build(xs: np.ndarray, ys: np.ndarray, vocab: int, cfg: Config = CONFIG) -> Built:
    """The GPT in the current graph for batches of windows of ids ``xs`` and target ids ``ys``
    (``b, t |``); its loss is the mean next-character cross-entropy."""
    b, t, d = cfg.batch, cfg.T, cfg.D
    x = G.leaf("x", xs[:b], batch=2)                                    # b, t |
    y = G.leaf("y", ys[:b], batch=2)                                    # b, t |
    positions = G.leaf("positions", np.arange(t), batch=1)              # t |
    tokens = G.param("tokens", output=[vocab], input=[d], init=_normal(0.02))   # d -> V
    wpe = G.param("wpe", output=[t], input=[d], init=_normal(0.02))     # d -> T
    hid = G.embedding(tokens, x) + G.embedding(wpe, positions)         # b, t | d
    for i in range(cfg.layers):
        with G.scope(f"block{i}"):
            a = B.layer_norm(hid, name="ln1")
            q, k, v = (B.split_heads(G.param(n, output=[d], init=_normal(0.02)) @ a, cfg.H)
                       for n in "qkv")                                 # b, t | h, e
            att = B.multi_head_attention(q, k, v, mask="causal")       # b, t | h, e
            out = G.param("o", output=[d], init=_normal(0.02 / math.sqrt(2 * cfg.layers)))
            hid = hid + out @ B.merge_heads(att)                       # b, t | d
            a = B.layer_norm(hid, name="ln2")
            up = G.param("up", output=[4 * d], init=_normal(0.02)) @ a + G.param("up_b")
            down = G.param("down", output=[d], init=_normal(0.02 / math.sqrt(2 * cfg.layers)))
            hid = hid + down @ B.gelu(up) + G.param("down_b")
    logits = tokens @ B.layer_norm(hid, name="ln_f")                   # b, t | V
    params = [t for t in x.graph.tensors if t.kind == "param"]
    return Built(x, y, params, logits, B.cross_entropy(logits, y))


def _normal(std: float):
    """GPT-2's initialisation: normal with a fixed standard deviation."""
    return lambda shape, rng: rng.normal(0.0, std, shape).astype(np.float32)


def evaluate(model: G.Model, m: Built, xs: np.ndarray, ys: np.ndarray, batch: int) -> float:
    """The mean loss over whole batches of ``(xs, ys)``, in eval mode."""
    losses = []
    graph = m.loss.graph.eval()
    for i in range(0, len(xs) - batch + 1, batch):
        model.set(m.x, xs[i:i + batch])
        model.set(m.t, ys[i:i + batch])
        losses.append(float(to_numpy(model.run()).reshape(-1)[0]))
    graph.train()
    return float(np.mean(losses))


def sample(model: G.Model, m: Built, c: Corpus, prompts: list[str], *, length: int,
           temperature: float = 0.8, seed: int = 0) -> list[str]:
    """Continue each prompt to ``length`` characters (at most the context), one per forward run
    (causal attention: the filler after position ``i`` does not matter), drawn from the
    softmax of the logits over ``temperature``."""
    batch, T = m.x.shape.int_dims
    length = min(length, T)
    rng = np.random.default_rng(seed)
    ctx = np.zeros((batch, T), np.int64)
    start = min(len(p) for p in prompts)
    for row, p in enumerate(prompts[:batch]):
        ctx[row, :start] = [c.vocab.index(ch) for ch in p[:start]]
    m.loss.graph.eval()
    for i in range(start, length):
        model.set(m.x, ctx)
        z = to_numpy(model.run())[:, i - 1].astype(np.float64) / temperature
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        ctx[:, i] = [rng.choice(len(c.vocab), p=row) for row in p]
    m.loss.graph.train()
    return [c.decode(row[:length]) for row in ctx[:len(prompts)]]


def main(steps: int = 300, backend: str = "numpy", device: str | None = None,
         distributed: bool = False, cfg: Config = CONFIG, plot: str | None = "gpt_loss.png",
         samples: int = 4) -> float:
    """Train for ``steps`` batches and return the validation loss (nats per character)."""
    c = corpus(cfg.T)
    here = place(distributed, device)
    say = here.say
    say(f"  corpus: {len(c.train_x)} training and {len(c.val_x)} validation windows of "
        f"{cfg.T} characters; vocabulary of {len(c.vocab)}")
    with G.new_graph(backend, here.device):
        m = build(c.train_x, c.train_y, len(c.vocab), cfg)
        trainer = here.start(m, c.train_x, c.train_y, cfg.lr, distributed)
        t0 = time.perf_counter()
        _train(trainer, steps, show=here.root)
        seconds = time.perf_counter() - t0
        model = G.Model(m.logits)
        val = evaluate(G.Model(m.loss), m, c.val_x, c.val_y, cfg.batch)
        lines = sample(model, m, c, [ln[:8] for ln in _lines(c)][:samples], length=cfg.T)
        if trainer.replicas is not None:
            trainer.replicas.close()
    first, last = trainer.history[0], float(np.mean(trainer.history[-20:]))
    say(f"  {steps} steps in {seconds:.1f} s ({seconds / steps * 1e3:.0f} ms/step); training "
        f"loss {first:.3f} -> {last:.3f}; validation loss {val:.3f} nats/char "
        f"(uniform: {math.log(len(c.vocab)):.3f})")
    if plot and here.root:
        try:
            trainer.save_plot(plot)
            say(f"  loss curve saved to {plot}")
        except ImportError:
            say("  (matplotlib is not installed: no loss plot)")
    say("  samples (8 characters of a held-out line, then the model's):")
    for line in lines:
        say("    " + line.split("\n")[0])
    return val


def _lines(c: Corpus) -> list[str]:
    """Held-out lines to prompt with: validation windows that start a tale."""
    text = "".join(c.decode(w) for w in c.val_x)
    return [ln for ln in text.split("\n")[1:] if len(ln) >= 8]


def _train(trainer: Trainer, steps: int, *, show: bool) -> None:
    """``steps`` updates in the trainer's epoch order, with a progress bar over steps."""
    bar = _progress(steps, "step") if show else None
    with bar if bar is not None else contextlib.nullcontext():  # tqdm is falsy at total=0
        for s in range(steps):
            loss = trainer.step(trainer.rows_of(trainer.position))
            if bar is not None:
                bar.update(1)
                if s % 10 == 0:
                    bar.set_postfix(loss=f"{loss:.3f}")


if __name__ == "__main__":
    command_line(main, count="steps", small=SMALL)
