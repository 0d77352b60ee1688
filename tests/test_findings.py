"""The findings registry: stable codes, every reported kind registered, suppressions, the
README's generated list, and findings located at the user's line, not inside a library."""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import sys
import sysconfig
import textwrap
from pathlib import Path

import numpy as np
import pytest

from limits import run_limited
from tensig.check import findings, tracing
from tensig.check import tracer as S
from tensig.check.verify import verify

ROOT = Path(__file__).resolve().parents[1]


# -- the registry ---------------------------------------------------------------------------


def test_rules_are_well_formed_and_unique():
    codes = [r.code for r in findings.RULES]
    names = [r.name for r in findings.RULES]
    assert len(set(codes)) == len(codes) and len(set(names)) == len(names)
    for r in findings.RULES:
        assert re.fullmatch(r"TS[1-9]\d\d", r.code), r
        assert r.severity in ("error", "warning"), r
        assert r.doc.endswith(".") and "\n" not in r.doc and r.example, r
        # the group of the code says what kind of answer it is
        assert (r.code[2] == "3") == (r.severity == "warning"), r


def _reported_kinds() -> list[tuple[str, int, str]]:
    """Every literal kind passed to ``report(...)`` or ``Finding(...)`` anywhere in src/."""
    out = []
    for path in sorted((ROOT / "src" / "tensig").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            first = node.args[0]
            if name in ("report", "Finding") and isinstance(first, ast.Constant) and \
                    isinstance(first.value, str):
                out.append((str(path.relative_to(ROOT)), node.lineno, first.value))
    return out


def test_every_reported_kind_is_registered():
    found = _reported_kinds()
    assert len(found) > 20  # the scan sees the call sites (a broken scan passes nothing)
    unknown = [f for f in found if f[2] not in {r.name for r in findings.RULES}]
    assert not unknown, (
        f"unregistered finding kinds (add them to tensig.check.findings.RULES): {unknown}")
    # and every registered kind is reported somewhere (no dead codes)
    assert {r.name for r in findings.RULES} <= {f[2] for f in found}


def test_an_unknown_kind_is_a_programming_error():
    with pytest.raises(KeyError, match="not a registered verify finding"):
        tracing.Finding("shape-mismatch", "oops")
    t = tracing.Tracer({})
    with pytest.raises(KeyError):
        t.report("no-such-kind", "oops")


def test_findings_carry_their_code_and_default_severity():
    f = tracing.Finding("broadcast", "broadcasts T against B", "x.py", 3)
    assert f.code == "TS101" and str(f) == "x.py:3: error: broadcasts T against B  [TS101]"
    t = tracing.Tracer({})
    t.report("assumption", "requires d divisible by 4")
    assert t.findings[0].severity == "warning" and t.findings[0].code == "TS301"


def test_severity_is_declared_once_in_the_registry(monkeypatch):
    """Nothing but the registry says how severe a kind is: changing its rule changes every
    finding of that kind, the tracer's and the constructor's."""
    rule = findings.rule("assumption")
    monkeypatch.setitem(findings._BY_NAME, "assumption",
                        dataclasses.replace(rule, severity="error"))
    t = tracing.Tracer({})
    t.report("assumption", "requires d divisible by 4")
    assert t.findings[0].severity == "error"
    assert tracing.Finding("assumption", "x").severity == "error"
    for path in (ROOT / "src" / "tensig").rglob("*.py"):  # no call site restates a severity
        assert 'severity="' not in path.read_text(), path


def test_resolve_codes_and_names():
    assert findings.resolve(["ts101", "reorder", "TS301,outer-product"]) == \
        {"TS101", "TS202", "TS301", "TS201"}
    with pytest.raises(ValueError, match="unknown finding code 'TS999'"):
        findings.resolve(["TS999"])


# -- suppressions ---------------------------------------------------------------------------


def bug_suppressed(scores, mask):
    return scores + mask  # tensig: ignore[TS101]


def bug_suppressed_by_name(scores, mask):
    return scores + mask  # tensig: ignore[broadcast]


def bug_suppressed_bare(scores, mask):
    return scores + mask  # tensig:ignore


def bug_other_code(scores, mask):
    return scores + mask  # tensig: ignore[TS201]


def bug_plain(scores, mask):
    return scores + mask


@pytest.mark.parametrize("fn", [bug_suppressed, bug_suppressed_by_name, bug_suppressed_bare])
def test_a_comment_suppresses_the_finding_on_its_line(fn):
    r = verify(fn, "B T T; B T => B T T")
    assert r.ok and [f.code for f in r.suppressed] == ["TS101"]
    assert r.to_dict()["suppressed"][0]["code"] == "TS101"


def test_a_comment_for_another_code_suppresses_nothing():
    assert [f.code for f in verify(bug_other_code, "B T T; B T => B T T")] == ["TS101"]
    assert [f.code for f in verify(bug_plain, "B T T; B T => B T T")] == ["TS101"]


def test_ignore_argument():
    r = verify(bug_plain, "B T T; B T => B T T", ignore=["TS101"])
    assert r.ok and len(r.suppressed) == 1
    assert not verify(bug_plain, "B T T; B T => B T T", ignore=["TS202"]).ok
    with pytest.raises(ValueError):
        verify(bug_plain, "B T T; B T => B T T", ignore=["TS000"])


def test_ignored_on_parses_lists():
    assert findings.ignored_on("x = 1") == frozenset()
    assert findings.ignored_on("x = 1  # tensig: ignore") == {findings.ALL}
    assert findings.ignored_on("x  # tensig: ignore[TS101,reorder , TS999]") == \
        {"TS101", "TS202", "TS999"}
    assert findings.ignored_on("x  # noqa: E501") == frozenset()


# -- the README's list is the registry --------------------------------------------------------


def test_readme_lists_the_registry():
    text = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- findings:start -->\n(.*?)\n<!-- findings:end -->", text, re.S)
    assert m, (
        "README.md lacks the generated findings list (see tensig.check.findings.markdown_table)")
    assert m.group(1) == findings.markdown_table(), (
        "README's findings list differs from the registry: paste tensig.check.findings."
        "markdown_table() between the findings markers")


# -- findings raised inside library code are the user's line --------------------------------


def test_user_code_is_not_tensig_stdlib_or_packages():
    assert findings.user_code(__file__)
    assert not findings.user_code(np.__file__)
    assert not findings.user_code(os.__file__)
    assert not findings.user_code(sysconfig.get_path("stdlib") + "/json/decoder.py")
    assert not findings.user_code(S.__file__)
    import tensig.core.dims
    import tensig.model.graph

    # every layer of tensig, not only check/ where findings.py lives
    assert not findings.user_code(tensig.core.dims.__file__)
    assert not findings.user_code(tensig.model.graph.__file__)
    assert not findings.user_code("/usr/lib/python3/dist-packages/numpy/core/fromnumeric.py")
    assert not findings.user_code("<frozen importlib._bootstrap>")


@pytest.fixture()
def fake_library(tmp_path, monkeypatch):
    """A library installed the way Debian installs NumPy (under dist-packages)."""
    root = tmp_path / "dist-packages"
    root.mkdir()
    (root / "fakelib_tensig.py").write_text(textwrap.dedent("""
        def combine(a, b):
            scaled = a * 2
            return scaled + b          # the broadcast happens here, inside the library

        def explode(a):
            raise ValueError("library internals failed")
    """))
    monkeypatch.syspath_prepend(str(root))
    import fakelib_tensig

    yield fakelib_tensig
    sys.modules.pop("fakelib_tensig", None)


def test_a_finding_inside_a_library_is_reported_at_the_users_call(fake_library):
    def model(x, m):
        return fake_library.combine(x, m)  # the user's line

    r = verify(model, "B T; T B => B T")
    line = model.__code__.co_firstlineno + 1
    assert r.findings and {(f.kind, f.file, f.line) for f in r} == {("broadcast", __file__, line)}


def test_a_failure_inside_a_library_is_noted_at_the_users_call(fake_library):
    def model(x):
        return fake_library.explode(x)

    r = verify(model, "B T => B T")
    assert r.notes == [f"verification stopped at {__file__}:{model.__code__.co_firstlineno + 1}"
                       f": ValueError: library internals failed"]


def test_a_torch_module_finding_is_the_users_line():
    torch = pytest.importorskip("torch")
    lin = torch.nn.Linear(15, 4)

    def model(x):
        return lin(x)

    r = verify(model, "B, 16 => B, 4")
    assert [(f.code, f.line) for f in r] == [("TS102", model.__code__.co_firstlineno + 1)]


def test_step_limit_stops_a_long_trace(monkeypatch):
    monkeypatch.setattr(tracing, "MAX_STEPS", 50)

    def loop(x):
        for _ in range(10_000):
            x = x + 1
        return x

    r = verify(loop, "B T => B T")
    assert not r.ok and r.notes == ["verification stopped: the trace passed 50 symbolic "
                                    "operations"]


def test_timeout_stops_a_function_that_never_finishes():
    if not hasattr(__import__("signal"), "setitimer"):
        pytest.skip("no interval timer on this platform")

    def spin(x):
        while True:
            pass

    r = verify(spin, "B T => B T", timeout=0.2)
    assert r.notes == ["verification stopped: the function did not finish within 0.2 s "
                       "(--timeout)"]


def test_the_timeout_is_not_swallowed_by_except_exception():
    if not hasattr(__import__("signal"), "setitimer"):
        pytest.skip("no interval timer on this platform")

    def stubborn(x):
        while True:
            try:  # noqa: SIM105 (the pattern that would swallow an Exception-based timeout)
                sum(range(1000))
            except Exception:
                pass

    r = verify(stubborn, "B T => B T", timeout=0.2)
    assert r.notes and "did not finish within 0.2 s" in r.notes[0]


def test_a_timeout_lost_once_fires_again():
    """The timer was one-shot: a stop raised where Python only prints it (a finalizer, a
    weakref callback: "Exception ignored in ...") left the trace running for good, a CI hang
    once memory grew.  Here the first stop is swallowed by hand; the next one must end it."""
    out = run_limited("""
        import tensig as ts

        def swallows_once(x):
            lost = 0
            while True:
                try:
                    sum(range(1000))
                except BaseException:  # stands for a finalizer that ignores the first stop
                    if lost:
                        raise
                    lost += 1

        print(ts.verify(swallows_once, "B T => B T", timeout=0.2).notes)
    """, timeout=60)
    assert not out.timed_out and out.returncode == 0, out.stderr[-2000:]
    assert "did not finish within 0.2 s" in out.stdout, out.stdout


# -- the pytest plugin -------------------------------------------------------------------------

pytest_plugins = ["pytester"]

PROJECT = {
    "shapes_pkg/__init__.py": "",
    "shapes_pkg/model.py": '''
        import numpy as np
        from tensig import Float

        def pool(x: Float[np.ndarray, "B T d"]) -> Float[np.ndarray, "B d"]:
            return x.mean(axis=1)

        def pool_bug(x: Float[np.ndarray, "B T d"]) -> Float[np.ndarray, "B d"]:
            return x.mean(axis=0)

        def heads(x: Float[np.ndarray, "B T d"]) -> Float[np.ndarray, "B 4 T e"]:
            b, t, d = x.shape
            return x.reshape(b, t, 4, d // 4).transpose(0, 2, 1, 3)

        def plain(x):
            return x
    ''',
    "test_model.py": '''
        import numpy as np
        from shapes_pkg.model import pool

        def test_pool():
            assert pool(np.ones((2, 3, 4))).shape == (2, 4)

        def helper(x: "Float[np.ndarray, 'B T']") -> None:  # test files are not verified
            return x + x.T
    ''',
}


def _project(pytester):
    for name, text in PROJECT.items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    pytester.syspathinsert()


def test_pytest_plugin_verifies_the_imported_project_functions(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    _project(pytester)
    result = pytester.runpytest("-p", "tensig.check.pytest_plugin", "--tensig", "-v")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines([
        "*shapes_pkg/model.py::tensig?pool? PASSED*",
        "*shapes_pkg/model.py::tensig?pool_bug? FAILED*",
        "*shapes_pkg/model.py::tensig?heads? PASSED*",
    ])
    assert "model.py:8: error: returns [T, d] but the signature declares [B, d]  [TS103]" in \
        result.stdout.str()
    assert "plain" not in result.stdout.str() and "helper" not in result.stdout.str()


def test_pytest_plugin_strict_ignore_and_off_by_default(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    _project(pytester)
    pytester.runpytest("-p", "tensig.check.pytest_plugin").assert_outcomes(passed=1)
    # the divisibility assumption of heads() is a warning: it fails only under --tensig-strict
    strict = pytester.runpytest("-p", "tensig.check.pytest_plugin", "--tensig", "--tensig-strict")
    strict.assert_outcomes(passed=2, failed=2)
    assert "warning: requires d divisible by 4  [TS301]" in strict.stdout.str()
    ignored = pytester.runpytest("-p", "tensig.check.pytest_plugin", "--tensig", "--tensig-strict",
                                 "--tensig-ignore", "TS103", "--tensig-ignore", "assumption")
    ignored.assert_outcomes(passed=4)
    bad = pytester.runpytest(
        "-p", "tensig.check.pytest_plugin", "--tensig", "--tensig-ignore", "X1")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR


def test_the_plugin_and_the_hook_are_declared():
    text = (ROOT / "pyproject.toml").read_text()
    assert '[project.entry-points.pytest11]\ntensig = "tensig.check.pytest_plugin"' in text
    hooks = (ROOT / ".pre-commit-hooks.yaml").read_text()
    assert "- id: tensig-verify" in hooks and "entry: tensig verify" in hooks
    assert "types: [python]" in hooks and 'tensig = "tensig.cli:main"' in text


def test_pytest_plugin_verifies_torch_module_classes(pytester, monkeypatch):
    """A module class with an annotated ``forward`` is an item too: verified on an instance
    built without arguments; skipped with the reason (failed under --tensig-strict) where its
    constructor needs arguments."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    files = {"mods_pkg/__init__.py": "", "mods_pkg/nets.py": '''
        import torch
        from torch import nn
        from tensig import Float

        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(8, 16)

            def forward(self, x: Float[torch.Tensor, "B T 8"]) -> Float[torch.Tensor, "B T 16"]:
                return self.lin(x)

        class Swapped(Encoder):
            def forward(self, x: Float[torch.Tensor, "B T 8"]) -> Float[torch.Tensor, "B 16 T"]:
                return self.lin(x)

        class Sized(nn.Module):
            def __init__(self, d):
                super().__init__()

            def forward(self, x: Float[torch.Tensor, "B d"]) -> Float[torch.Tensor, "B d"]:
                return x
    ''', "test_nets.py": '''
        import mods_pkg.nets

        def test_nothing():
            pass
    '''}
    for name, text in files.items():
        path = pytester.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "tensig.check.pytest_plugin", "--tensig", "-rs")
    result.assert_outcomes(passed=2, failed=1, skipped=1)
    assert "returns [B, T, 16] but the signature declares [B, 16, T]  [TS103]" in \
        result.stdout.str()
    assert "Sized() needs d" in result.stdout.str()
    strict = pytester.runpytest("-p", "tensig.check.pytest_plugin", "--tensig", "--tensig-strict")
    strict.assert_outcomes(passed=2, failed=2)
