"""Attacks on ``tensig verify`` (issue 12, items 20-22): a function that never returns, a file
that raises at import or has a malformed annotation, a script that calls ``sys.exit`` at top
level, a file that kills its interpreter.  Each is that file's or function's note, the rest of
the folder is still verified, and the exit status follows the findings.  Every run is a child
interpreter under a time and memory limit (tests/limits.py): a hang fails the test, never the
session."""

from __future__ import annotations

import inspect
import json
import textwrap

import pytest

from limits import run_limited
from tensig.cli import main

FILES = {
    "wrong_axis.py": '''
        import numpy as np
        from tensig import Float

        def pool(x: Float[np.ndarray, "B T d"]) -> Float[np.ndarray, "B d"]:
            return x.mean(axis=0)
    ''',
    "good.py": '''
        import numpy as np
        from tensig import Float

        def pool(x: Float[np.ndarray, "B T d"]) -> Float[np.ndarray, "B d"]:
            return x.mean(axis=1)
    ''',
    "spins.py": '''
        import numpy as np
        from tensig import Float

        def spin(x: Float[np.ndarray, "B T"]) -> Float[np.ndarray, "B T"]:
            while True:
                pass

        def after(x: Float[np.ndarray, "B T"]) -> Float[np.ndarray, "B T"]:
            return x * 2
    ''',
    "raises.py": '''
        import numpy as np
        from tensig import Float

        def f(x: Float[np.ndarray, "B T"]) -> Float[np.ndarray, "B T"]:
            return x

        raise RuntimeError("needs a GPU")
    ''',
    "malformed.py": '''
        import numpy as np
        from tensig import Float

        def f(x: Float[np.ndarray, "B T ("]) -> Float[np.ndarray, "B T"]:
            return x
    ''',
    "malformed_lazy.py": '''
        from __future__ import annotations
        import numpy as np
        from tensig import Float

        def f(x: Float[np.ndarray, "B T ("]) -> Float[np.ndarray, "B T"]:
            return x

        def g(x: Float[np.ndarray, "B T"]) -> Float[np.ndarray, "T B"]:
            return x
    ''',
    "script.py": '''
        import sys
        import numpy as np
        from tensig import Float

        def f(x: Float[np.ndarray, "B T"]) -> Float[np.ndarray, "B T"]:
            return x

        def main():
            print("the script ran")
            return 3

        sys.exit(main())
    ''',
    "a_dies.py": '''
        import os
        os._exit(7)
    ''',
}


def _folder(tmp_path, *names):
    for name in names:
        (tmp_path / name).write_text(textwrap.dedent(FILES[name]))
    return tmp_path


def _verify(*args, timeout=180.0):
    """``tensig verify ARGS`` in a limited child: (exit status, stdout, stderr)."""
    argv = ["verify", *args]
    out = run_limited(f"import sys\nfrom tensig.cli import main\nsys.exit(main({argv!r}))",
                      timeout=timeout)
    assert not out.timed_out, f"tensig verify {args} did not return:\n{out.stderr[-2000:]}"
    return out.returncode, out.stdout, out.stderr


def test_a_function_that_never_returns_is_a_note(tmp_path):
    """Item 20: ``while True: pass`` is stopped after --timeout; the folder goes on."""
    folder = _folder(tmp_path, "spins.py", "wrong_axis.py")
    status, out, err = _verify(str(folder), "--timeout", "1")
    assert "spins.py:5: note: verification stopped: the function did not finish within 1 s" \
        in out
    assert "ok: after verified for all B, T" in out  # the next function of the same file
    assert "wrong_axis.py:5: error: returns [T, d] but the signature declares [B, d]" in out
    assert status == 1 and "Traceback" not in out + err
    status, out, _ = _verify(str(folder / "spins.py"), "--timeout", "1")
    assert status == 0 and "1 note(s)" in out  # only a note: not an error
    assert _verify(str(folder / "spins.py"), "--timeout", "1", "--strict")[0] == 1


def test_a_file_that_raises_at_import_is_a_note(tmp_path):
    """Item 21: an import error and malformed annotations are notes, not tracebacks."""
    folder = _folder(tmp_path, "raises.py", "malformed.py", "malformed_lazy.py", "good.py")
    status, out, err = _verify(str(folder))
    assert "raises.py:8: note: not verified: importing it raises RuntimeError: needs a GPU" in out
    assert "malformed.py:5: note: not verified: importing it raises SpecSyntaxError" in out
    assert "malformed_lazy.py:6: note: malformed annotation: TypeError: cannot read the " \
        "annotations of f(): unexpected end of the dimension expression" in out
    assert "malformed_lazy.py:9: error: returns [B, T] but the signature declares [T, B]" in out
    assert "good.py:5: ok: pool verified for all B, T, d" in out
    assert status == 1 and "Traceback" not in out + err  # 1: malformed_lazy.g's error
    status, out, err = _verify(str(folder / "raises.py"), str(folder / "good.py"))
    assert status == 0 and "Traceback" not in out + err  # notes alone are not errors
    assert _verify(str(folder / "raises.py"), "--strict")[0] == 1


def test_a_top_level_sys_exit_is_a_note(tmp_path):
    """Item 22: ``sys.exit(main())`` at top level no longer ends the whole run silently."""
    folder = _folder(tmp_path, "script.py", "wrong_axis.py")
    status, out, _ = _verify(str(folder))
    assert "script.py:13: note: not verified: importing it calls sys.exit(3)" in out
    assert "wrong_axis.py:5: error: returns [T, d] but the signature declares [B, d]" in out
    assert "the script ran" not in out  # the user code's prints do not mix with the report
    assert status == 1 and "1 function(s) verified: 1 error(s), 0 warning(s), 1 note(s)" in out


def test_verifying_tensigs_own_files_leaves_its_tables_alone(tmp_path):
    """Verifying a folder runs each file afresh, tensig's own too: sym_functions.py run again
    copied NumPy's creation table (np.average by then) into torch's, and every torch file
    verified after it crashed (torch has no attribute 'average'); trace_numpy.py run again
    wrapped its wrapper of np.concatenate once more (without end, run after run)."""
    pytest.importorskip("torch")
    from tensig.check import sym_functions, trace_numpy, trace_torch, tracer, tracing
    from tensig.check.verify_files import verify_path
    tables = [tracer.NUMPY, tracer.TORCH, tracer.CREATION_NUMPY, tracer.CREATION_TORCH,
              tracing.PLUGINS]
    assert trace_torch.HAND  # imported: its entries are in the tables saved
    saved = [dict(t) for t in tables]  # the run again swaps in its own (equal) functions
    try:
        verify_path(sym_functions.__file__)
        assert set(tracer.CREATION_TORCH) == set(saved[3])
        verify_path(trace_numpy.__file__)
        model = inspect.getclosurevars(tracer.NUMPY["concatenate"]).nonlocals["model"]
        assert model is sym_functions.concatenate  # the model, not a wrapper of it
        (tmp_path / "t.py").write_text(textwrap.dedent("""\
            import torch
            from tensig import Float
            def f(x: Float[torch.Tensor, "B, T"]) -> Float[torch.Tensor, "B, T"]:
                return x + torch.zeros(x.shape[0], x.shape[1])
            """))
        [report] = verify_path(str(tmp_path / "t.py"))
        assert (report.function, report.findings, report.notes) == ("f", [], [])
    finally:
        for table, old in zip(tables, saved, strict=True):
            table.clear()
            table.update(old)


def test_a_file_that_kills_the_interpreter_is_a_note(tmp_path):
    """``os._exit`` at import ends the worker; it is restarted for the files after it."""
    folder = _folder(tmp_path, "a_dies.py", "wrong_axis.py", "good.py")
    status, out, _ = _verify(str(folder), "--json")
    data = json.loads(out)
    by_file = {r["function"] + ":" + r["notes"][0] if r["notes"] else r["function"]: r
               for r in data}
    assert any("exited (7)" in key for key in by_file), data
    assert sorted(r["ok"] for r in data if r["function"] == "pool") == [False, True]
    assert status == 1


@pytest.mark.parametrize("args, message", [
    (["--ignore", "TS999"], "unknown finding code 'TS999'"),
    (["--timeout", "-1"], "the timeout must be a positive number"),
    (["--timeout", "nan"], "the timeout must be a positive number"),
])
def test_usage_errors_exit_2(tmp_path, args, message):
    folder = _folder(tmp_path, "good.py")
    status, _, err = _verify(str(folder), *args)
    assert status == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize("path", ["", "::", "::f", " ::f"])
def test_an_empty_path_is_a_usage_error(tmp_path, monkeypatch, capsys, path):
    """Found by fuzzing the CLI: ``tensig verify ::`` verified every file under the current
    folder (an empty path is ``.``), importing them all."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.py").write_text(textwrap.dedent(FILES["good.py"]))
    assert main(["verify", path, "--in-process"]) == 2
    assert "an empty path" in capsys.readouterr().err


@pytest.mark.parametrize("then, expected", [
    ("time.sleep(60)", "TimeoutError"),  # stalled halfway: given up after the 1 s patience
    ("sys.exit(0)", "EOF"),  # died halfway: the stream ends, no unpickling error
])
def test_a_worker_cut_short_in_a_large_message(then, expected):
    """A fake worker sends one whole message, then the first 100 KB of a 1 MB one (more than
    a pipe holds) and stalls or exits: the reader gives up after ``patience`` s, or ends.
    The reader starts once the worker has written (its interpreter's start-up, 0.5 s here,
    may take more than the 1 s patience on a loaded machine)."""
    worker = (f"import sys, time; from tensig.check.verify_files import _send; "
              f"_send(sys.stdout.buffer, ('start', 'f.py')); "
              f"sys.stdout.buffer.write((2**20).to_bytes(8, 'big') + bytes(10**5)); "
              f"sys.stdout.buffer.flush(); {then}")
    out = run_limited(f"""
        import select, subprocess, sys
        from tensig.check.verify_files import _frames
        proc = subprocess.Popen([sys.executable, "-c", {worker!r}], stdout=subprocess.PIPE)
        select.select([proc.stdout], [], [], 25)
        got = []
        try:
            got.extend(_frames(proc.stdout, 1.0))
            print(got, "EOF")
        except TimeoutError:
            print(got, "TimeoutError")
        proc.kill()
    """)
    assert not out.timed_out and out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[('start',", "'f.py')]", expected], out.stdout


def test_text_before_the_first_message_ends_the_stream():
    """Text on the worker's stdout before its first message (a ``sitecustomize`` that prints)
    is read as a length of ~7e18: the stream ends (the worker exited), no MemoryError."""
    worker = ("import sys; from tensig.check.verify_files import _send; "
              "sys.stdout.buffer.write(b'hello from sitecustomize\\n'); "
              "_send(sys.stdout.buffer, ('start', 'f.py'))")
    out = run_limited(f"""
        import subprocess, sys
        from tensig.check.verify_files import _frames
        proc = subprocess.Popen([sys.executable, "-c", {worker!r}], stdout=subprocess.PIPE)
        print(list(_frames(proc.stdout, 30.0)), "EOF")
        proc.wait()
    """)
    assert not out.timed_out and out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["[]", "EOF"], out.stdout
