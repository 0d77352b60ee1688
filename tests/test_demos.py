"""The training demos reach their accuracy targets (they are part of ``make demo``)."""

from __future__ import annotations

import pytest

pytest.importorskip("sklearn")


def test_two_moons_reaches_98_percent():
    from tensig.demos import moons

    assert moons.main(epochs=60) >= 0.98


def test_digits_cnn_reaches_97_percent():
    from tensig.demos import digits

    assert digits.main(epochs=15) >= 0.97


def test_digits_cnn_on_the_torch_backend():
    from tensig.demos import digits

    assert digits.main(epochs=8, backend="torch") >= 0.95
