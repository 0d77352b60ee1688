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


def test_a_demos_help_names_its_module_and_its_whole_first_sentence(capsys, monkeypatch):
    """``python -m tensig.demos.digits --help`` (the demo as ``__main__``) and the GPT's
    command line say ``usage: tensig.demos.NAME`` (not the file's name, ``digits.py``) and
    describe the demo by its docstring's first paragraph, not its first line (a sentence cut
    at "convolution and max")."""
    import subprocess
    import sys

    from tensig.demos import gpt
    from tensig.demos.common import command_line

    # argparse wraps at the terminal's width (COLUMNS, a 60-column one splits the sentence),
    # so the words compare, not the lines; Python 3.14's colours it unless told not to
    monkeypatch.setenv("PYTHON_COLORS", "0")
    run = subprocess.run([sys.executable, "-m", "tensig.demos.digits", "--help"],
                         capture_output=True, text=True, check=True)
    text = " ".join(run.stdout.split())
    assert text.startswith("usage: tensig.demos.digits [-h] [--epochs EPOCHS]")
    assert "pooling are written in the notation." in text
    with pytest.raises(SystemExit):
        command_line(gpt.main, ["--help"], count="steps", small=gpt.SMALL)
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith("usage: tensig.demos.gpt [-h] [--steps STEPS]") and "--small" in out
    assert "short tales the package ships (``tales.txt``)." in out
