"""The command line: exit codes, text and JSON output, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tensig.cli import main


def run(capsys, *args):
    status = main(list(args))
    out = capsys.readouterr()
    return status, out.out, out.err


def test_spec_structure_only(capsys):
    status, out, _ = run(capsys, "spec", "ij;jk=>ik")
    assert status == 0
    assert "canonical: ij; jk => ik" in out
    assert "mode:      single-char" in out
    assert "operand 1" in out and "... (context ellipsis)" in out


def test_spec_with_shapes(capsys):
    status, out, _ = run(capsys, "spec", "ij;jk=>ik", "3,4", "4,5")
    assert status == 0
    assert "result shape: 3,5" in out
    assert "  j = 4" in out


def test_params_padding_and_conditions(capsys):
    status, out, _ = run(capsys, "spec", "stride*o<+k; k => o", "T", "3", "--param", "stride=2")
    assert status == 0
    assert "requires T >= 3" in out
    status, out, _ = run(capsys, "spec", "o+k; k => o", "8", "3", "--use-padding")
    assert status == 0 and "result shape: 8" in out
    status, out, _ = run(capsys, "spec", "o+k; k => o", "8", "3", "--no-padding")
    assert status == 0 and "result shape: 6" in out


def test_shape_error_exit_1(capsys):
    status, _, err = run(capsys, "spec", "ij;jk=>ik", "3,4", "5,4")
    assert status == 1
    assert "size mismatch for label 'j': 4 vs 5" in err
    assert "       ^" in err


def test_syntax_error_exit_1_json(capsys):
    status, out, _ = run(capsys, "spec", "s a; s b => s a^b", "--json")
    assert status == 1
    data = json.loads(out)
    assert data["error"] == "SpecSyntaxError" and data["column"] == 2
    assert data["hint"] == "separate axes with commas: s, a; s, b => s, a^b"


def test_json_success(capsys):
    status, out, _ = run(capsys, "spec", "b|i->o; o->p => b|i->p", "8|3->4", "4->5", "--json")
    assert status == 0
    data = json.loads(out)
    assert data["inferred"]["result"] == "8|3->5"
    assert data["operands"][0]["batch"]["left"] == []
    assert data["operands"][0]["batch"]["right"] == ["b"]


def test_shape_error_json(capsys):
    status, out, _ = run(capsys, "spec", "ij;jk=>ik", "3,4", "5,4", "--json")
    data = json.loads(out)
    assert status == 1 and data["label"] == "j" and data["sizes"] == ["4", "5"]


def test_usage_errors_exit_2(capsys):
    assert main([]) == 2
    assert main(["spec", "ij=>i", "--param", "stride"]) == 2
    assert main(["frobnicate"]) == 2


def test_module_entry_point():
    p = subprocess.run([sys.executable, "-m", "tensig", "spec", "i=>i", "3"],
                       capture_output=True, text=True, check=False)
    assert p.returncode == 0 and "result shape: 3" in p.stdout


def test_demo_runs(capsys):
    from tensig.demo import main as demo

    assert demo(train=False) == 0
    out = capsys.readouterr()
    assert out.out.count("(exit status 0)") == 5
    assert out.out.count("(exit status 1)") == 2
    assert "(exit status 1: 1 means something was found)" in out.out
    assert "size mismatch for label 'j'" in out.err


def test_verify_command_on_the_examples(capsys):
    from pathlib import Path

    examples = Path(__file__).resolve().parents[1] / "examples"
    status, out, _ = run(capsys, "verify", str(examples))
    assert status == 1
    assert "blog_bugs.py:17: error: broadcasts T against B" in out
    assert "ok: masked_scores verified for all B, T" in out
    assert "returns [T, d] but the signature declares [B, d]" in out
    assert "implicit two-sided broadcast: [N] and [N, 1] become [N, N]" in out
    assert "only reorders the dimensions" in out
    # every fixed version verifies clean
    for name in ("masked_scores", "squared_error", "mean_pool", "add_bias", "attention"):
        assert f"ok: {name} verified" in out
    status, out, _ = run(capsys, "verify", f"{examples}/blog_bugs.py::mean_pool", "--json")
    data = json.loads(out)
    assert status == 0 and [r["function"] for r in data] == ["mean_pool"] and data[0]["ok"]
    status, _, err = run(capsys, "verify", f"{examples}/blog_bugs.py::nothing")
    assert status == 2 and "no shape-annotated function 'nothing'" in err
    assert run(capsys, "verify", "/no/such/file.py")[0] == 2


WARNS = '''
import numpy as np
from tensig import Float

def heads(x: Float[np.ndarray, "B T d"]) -> Float[np.ndarray, "B 4 T e"]:
    b, t, d = x.shape
    return x.reshape(b, t, 4, d // 4).transpose(0, 2, 1, 3)
'''

ERRS = '''
import numpy as np
from tensig import Float

def merge(y: Float[np.ndarray, "B H T E"]) -> Float[np.ndarray, "B T F"]:
    b, h, t, e = y.shape
    return y.reshape(b, t, h * e)  # meant y.transpose(0, 2, 1, 3).reshape(...)

def merge_known(y: Float[np.ndarray, "B H T E"]) -> Float[np.ndarray, "B T F"]:
    b, h, t, e = y.shape
    return y.reshape(b, t, h * e)  # tensig: ignore[TS202]
'''


def test_verify_exit_codes_follow_severity(capsys, tmp_path):
    warns, errs = tmp_path / "warns.py", tmp_path / "errs.py"
    warns.write_text(WARNS)
    errs.write_text(ERRS)
    status, out, _ = run(capsys, "verify", str(warns))
    assert status == 0 and "warning: requires d divisible by 4  [TS301]" in out
    assert run(capsys, "verify", str(warns), "--strict")[0] == 1
    assert run(capsys, "verify", str(warns), "--strict", "--ignore", "assumption")[0] == 0
    status, out, _ = run(capsys, "verify", str(errs), str(warns))  # several paths (pre-commit)
    assert status == 1 and "errs.py:7: error: reshape of [B, H, T, E] into [B, T, E*H] moves " \
        "T before H" in out and "[TS202]" in out
    assert "1 error(s), 1 warning(s), 0 note(s)" in out
    assert "ok: merge_known verified" in out  # suppressed by its comment
    assert run(capsys, "verify", str(errs), "--ignore", "TS202")[0] == 0
    status, out, _ = run(capsys, "verify", str(errs), "--json", "--in-process")
    data = json.loads(out)
    assert status == 1 and data[0]["findings"][0]["code"] == "TS202"
    assert data[1]["suppressed"] == [{"code": "TS202", "file": str(errs), "line": 11}]


def test_verify_output_is_the_same_under_every_hash_seed(tmp_path):
    """A note quotes the user's exception, and a class's repr names its module: the module
    verify imports a file as must be named alike in every run, not by the seeded ``hash()``."""
    f = tmp_path / "boxes.py"
    f.write_text("import numpy as np\nfrom tensig import Float\n\n\nclass Box:\n    pass\n\n\n"
                 "def f(x: Float[np.ndarray, 'B T']) -> Float[np.ndarray, 'B T']:\n"
                 "    raise ValueError(repr(Box))\n")
    outs = {subprocess.run([sys.executable, "-m", "tensig", "verify", str(f), "--in-process"],
                           text=True, capture_output=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout
            for seed in range(2)}
    assert len(outs) == 1 and "ValueError: <class '_tensig_verify_" in outs.pop(), outs


def test_verify_usage_errors(capsys, tmp_path):
    (tmp_path / "warns.py").write_text(WARNS)
    status, _, err = run(capsys, "verify", str(tmp_path), "--ignore", "E501")
    assert status == 2 and "unknown finding code 'E501'" in err
    assert run(capsys, "verify")[0] == 2
    assert run(capsys, "verify", str(tmp_path), "--timeout", "0")[0] == 2
    assert run(capsys, "verify", str(tmp_path / "nothere.py"))[0] == 2


def test_findings_command_prints_the_registry(capsys):
    from tensig.check.findings import RULES

    status, out, _ = run(capsys, "findings")
    assert status == 0
    assert [line.split()[0] for line in out.splitlines() if not line.startswith(" ")] == \
        [r.code for r in RULES]
    reorder = next(r for r in RULES if r.name == "reorder")
    status, out, _ = run(capsys, "findings", "reorder")
    assert status == 0 and out == (f"{reorder.code} reorder ({reorder.severity}): "
                                   f"{reorder.doc}\n    e.g. {reorder.example}\n")
    assumption = next(r for r in RULES if r.code == "TS301")
    status, out, _ = run(capsys, "findings", "TS301", "--json")
    assert status == 0 and json.loads(out) == [
        {"code": "TS301", "name": "assumption", "severity": "warning",
         "doc": assumption.doc, "example": assumption.example}]
    status, _, err = run(capsys, "findings", "TS999")
    assert status == 2 and "unknown finding code 'TS999'" in err


def test_json_names_each_kind_of_axis(capsys):
    """``--json`` describes every axis kind of the grammar (each branch of ``_axis_text``)."""
    status, out, _ = run(capsys, "spec", "b, _, 2, s+k, 2*o<+k, 2*o=+k, t+1, a^c, (h, e); k => b",
                         "--json")
    assert status == 0
    assert json.loads(out)["operands"][0]["output"]["right"] == [
        "b", "_ (placeholder)", "2 (fixed index)", "s+k (affine, padding from use_padding)",
        "2*o<+k (affine, valid)", "2*o=+k (affine, padded)", "t+1 (affine, offset)",
        "a^c (concatenation)", "(h, e) (merged, row-major)"]


MODULES = '''
from __future__ import annotations
import torch
from torch import nn
from tensig import Float

class Encoder(nn.Module):
    def __init__(self, d: int = 8):
        super().__init__()
        self.lin = nn.Linear(d, 16)

    def forward(self, x: Float[torch.Tensor, "B, T, 8"]) -> Float[torch.Tensor, "B, T, 16"]:
        return self.lin(x)

class Swapped(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 16)

    def forward(self, x: Float[torch.Tensor, "B, T, 8"]) -> Float[torch.Tensor, "B, 16, T"]:
        return self.lin(x)

class Sized(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.lin = nn.Linear(d, 16)

    def forward(self, x: Float[torch.Tensor, "B, T, 8"]) -> Float[torch.Tensor, "B, T, 16"]:
        return self.lin(x)
'''


def test_verify_checks_module_classes_with_an_annotated_forward(capsys, tmp_path):
    """A torch module's annotated ``forward`` was skipped by ``tensig verify`` without a word
    (and ``tensig.verify(module)`` read the module's call, not its forward): a class built
    without arguments is verified on an instance, one that needs them gets a note saying how."""
    from tensig import verify
    from tensig.check.verify import Unbuilt

    path = tmp_path / "modules.py"
    path.write_text(MODULES)
    status, out, _ = run(capsys, "verify", str(path), "--in-process")
    assert status == 1 and "3 function(s) verified: 1 error(s), 0 warning(s), 1 note(s)" in out
    assert ":12: ok: Encoder verified for all B, T" in out
    assert ":20: error: returns [B, T, 16] but the signature declares [B, 16, T]  [TS103]" in out
    assert ":28: note: not verified: Sized() needs d; call tensig.verify(Sized(...))" in out
    assert run(capsys, "verify", f"{path}::Encoder", "--in-process")[0] == 0
    namespace: dict = {}
    exec(compile(MODULES, str(path), "exec"), namespace)
    assert verify(namespace["Sized"](8)).ok and not verify(namespace["Swapped"]()).ok
    # the class itself: the one builder both the command line and pytest --tensig call
    assert verify(namespace["Encoder"]).ok and verify(namespace["Swapped"]).errors
    with pytest.raises(Unbuilt, match=r"not verified: Sized\(\) needs d; call tensig"):
        verify(namespace["Sized"])

    class Broken(namespace["Encoder"]):
        def __init__(self):
            raise RuntimeError("no weights file")
    with pytest.raises(Unbuilt, match=r"Broken\(\) raised RuntimeError: no weights file"):
        verify(Broken)
