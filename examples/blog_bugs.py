"""The four shape bugs of "Shapes are the type system of ML" (NumPy), and their fixes.

Each buggy function runs without an error at B == T == 16; three of them also run at the sizes
a test would pick by habit.  ``tensig verify examples/`` finds all four at every size.
"""

from __future__ import annotations

import numpy as np

from tensig import Bool, Float


def masked_scores_bug(scores: Float[np.ndarray, "B T T"],
                      mask: Float[np.ndarray, "B T"]) -> Float[np.ndarray, "B T T"]:
    """Bug 1: the dropped None. The mask lines up as [1, B, T] and masks the wrong rows."""
    return scores + mask


def masked_scores(scores: Float[np.ndarray, "B T T"],
                  mask: Float[np.ndarray, "B T"]) -> Float[np.ndarray, "B T T"]:
    """Fixed: the mask becomes [B, 1, T] and stretches across the query axis."""
    return scores + mask[:, None, :]


def squared_error_bug(pred: Float[np.ndarray, "N"],
                      target: Float[np.ndarray, "N 1"]) -> Float[np.ndarray, ""]:
    """Bug 2: [N] minus [N, 1] is an [N, N] matrix: every prediction against every target."""
    return ((pred - target) ** 2).mean()


def squared_error(pred: Float[np.ndarray, "N"],
                  target: Float[np.ndarray, "N 1"]) -> Float[np.ndarray, ""]:
    """Fixed: compare element by element."""
    return ((pred - target[:, 0]) ** 2).mean()


def mean_pool_bug(x: Float[np.ndarray, "B T d"]) -> Float[np.ndarray, "B d"]:
    """Bug 3: the wrong axis. At B == T the result has the right shape and wrong numbers."""
    return x.mean(axis=0)


def mean_pool(x: Float[np.ndarray, "B T d"], mask: Bool[np.ndarray, "B T"]
              ) -> Float[np.ndarray, "B d"]:
    """Fixed, and masked: divide by the number of real positions (the blog's pool)."""
    m = mask[:, :, None].astype(np.float32)
    return (x * m).sum(axis=1) / m.sum(axis=1)


def add_bias_bug(x: Float[np.ndarray, "B T d"], bias: Float[np.ndarray, "B T"]
                 ) -> Float[np.ndarray, "B T d"]:
    """Bug 4, the control: [3, 5, 7] + [3, 5] raises at run time, but only when T != d."""
    return x + bias


def add_bias(x: Float[np.ndarray, "B T d"], bias: Float[np.ndarray, "B T"]
             ) -> Float[np.ndarray, "B T d"]:
    """Fixed: a per-position bias needs its own trailing axis."""
    return x + bias[:, :, None]
