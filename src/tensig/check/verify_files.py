"""``tensig verify PATH``: verify the shape-annotated functions of files and folders
(:func:`verify_path`), each file imported on its own, guarded."""

from __future__ import annotations

import inspect
import json
import os
import pickle
import sys
import tempfile
import time
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from tensig.check import findings, tracing
from tensig.check.verify import (
    DEFAULT_TIMEOUT,
    Report,
    Signature,
    _signature_from_annotations,
    _time_limit,
    verify,
)

__all__ = ["annotated_functions", "verify_file", "verify_path"]


def verify_path(path: str, *, ignore: Iterable[str] = (), timeout: float | None = DEFAULT_TIMEOUT,
                isolate: bool = False) -> list[Report]:
    """Verify the shape-annotated functions of a file, a folder, or ``FILE::FUNCTION``.

    Each file is imported on its own, guarded: an import that raises or calls ``sys.exit``, and
    a function that does not finish within ``timeout``, become notes, and the other files are
    still verified.  ``isolate`` (the command line's choice) runs them in a worker interpreter:
    a file that kills or hangs it in C code is then a note too, and the worker is restarted.
    """
    skip = sorted(findings.resolve(ignore))
    target, _, only = path.partition("::")
    if not target.strip():  # Path("") is the current folder: every file under it
        raise ValueError(f"an empty path in {path!r}: give a file or folder (FILE::FUNCTION)")
    root = Path(target)
    if not root.exists():
        raise FileNotFoundError(f"no such file or folder: {target}")
    if not (root.is_dir() or root.is_file()):  # a pipe would block the import for good
        raise OSError(f"not a file or a folder: {target}")
    # a folder's regular files only: not a pipe, not a folder named like a module (rglob
    # visits its files anyway)
    files = sorted(f for f in root.rglob("*.py") if f.is_file()) if root.is_dir() else [root]
    if isolate:
        reports = _isolated([str(f) for f in files], only or None, skip, timeout)
    else:
        reports = [r for f in files for r in verify_file(str(f), only or None, ignore=skip,
                                                         timeout=timeout)]
    if only and not any(r.function in (only, _MODULE) for r in reports):
        raise LookupError(f"{target} has no shape-annotated function {only!r}")
    return reports


_MODULE = "<module>"  # the function name of a report about a whole file


def _note(file: str, line: int | None, note: str, function: str = _MODULE) -> Report:
    """A report of only a note, about a whole file unless a function is named."""
    return Report(function, Signature((), None, ()), notes=[note], file=file, line=line or 1)


def verify_file(file: str, only: str | None = None, *, ignore: Iterable[str] = (),
                timeout: float | None = DEFAULT_TIMEOUT) -> list[Report]:
    """Import one file, guarded, and verify its shape-annotated functions (see verify_path)."""
    module = _import_guarded(file, timeout)
    if isinstance(module, Report):
        return [module]
    reports = []
    for attr, fn, sig in annotated_functions(module):
        if only and attr != only:
            continue
        code = getattr(fn, "__code__", None) or getattr(getattr(fn, "forward", None),
                                                        "__code__", None)  # a module class's
        line = getattr(code, "co_firstlineno", None)
        if isinstance(sig, Exception):  # a malformed annotation read lazily: a note
            reports.append(_note(file, line, f"malformed annotation: {type(sig).__name__}: "
                                             f"{sig}", attr))
            continue
        try:  # a class: its bound forward's signature (self is no argument)
            reports.append(verify(fn, None if inspect.isclass(fn) else sig, ignore=ignore,
                                  timeout=timeout))
        except TypeError as e:  # the signature does not fit, a module class that needs args
            reports.append(Report(attr, sig, file=file, line=line, notes=[str(e)]))
    return reports


def annotated_functions(module: Any) -> Iterator[tuple[str, Any, Signature | Exception]]:
    """The shape-annotated functions defined in ``module`` (decorated ones too), and the
    classes whose ``forward`` is annotated (torch modules), each with its signature or the
    error its malformed annotation raises."""
    for attr, fn in list(vars(module).items()):
        if getattr(fn, "__module__", None) != module.__name__:
            continue
        forward = inspect.isclass(fn) and inspect.isfunction(getattr(fn, "forward", None))
        if forward or inspect.isfunction(fn) or hasattr(fn, "__wrapped__"):
            try:
                sig: Signature | Exception | None = _signature_from_annotations(
                    fn.forward if forward else fn)
            except Exception as e:
                sig = e
            if sig is not None:
                yield attr, fn, sig


def _import_guarded(file: str, timeout: float | None) -> Any:
    """The module of ``file``, or a :class:`Report` note saying why it could not be imported.

    ``SystemExit`` (a script's top-level ``sys.exit(main())``) and every exception are caught;
    the import is under the same time limit as a function.  The file's folder is put first on
    ``sys.path`` for the import, as running the script would.
    """
    import importlib.util

    name = f"_tensig_verify_{zlib.crc32(os.path.abspath(file).encode())}"  # not hash(): seeded
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folder = os.path.dirname(os.path.abspath(file))
    sys.path.insert(0, folder)
    try:
        with _time_limit(None if timeout is None else max(timeout, 30.0)):
            spec.loader.exec_module(module)
    except SystemExit as e:
        return _note(file, _line_in(e, file),
                     f"not verified: importing it calls sys.exit({e.code!r}) (guard the "
                     "script's entry point with if __name__ == '__main__')")
    except tracing.TraceLimit:
        return _note(file, None, "not verified: importing it did not finish within the time "
                                 "limit")
    except SyntaxError as e:
        return _note(file, e.lineno, f"not verified: SyntaxError: {e.msg}")
    except Exception as e:
        return _note(file, _line_in(e, file),
                     f"not verified: importing it raises {type(e).__name__}: {e}")
    finally:
        sys.modules.pop(name, None)
        if folder in sys.path:
            sys.path.remove(folder)
    return module


def _line_in(e: BaseException, file: str) -> int | None:
    """The last line of ``file`` in a traceback."""
    return tracing.failure_line(e, lambda name: os.path.abspath(name) == os.path.abspath(file))[1]


def _isolated(files: list[str], only: str | None, ignore: list[str],
              timeout: float | None) -> list[Report]:
    """Verify ``files`` in a worker interpreter, restarted after a file that kills it.

    One worker serves all files (one start, ~0.3 s of CPU; each library imported once) and
    streams a report per function; a watchdog here kills it when nothing arrives, or a message
    stops halfway, for ``max(60, 3 * timeout)`` s (a hang inside C code, which ``SIGALRM``
    cannot interrupt).
    """
    import subprocess

    patience = max(60.0, 3 * (timeout or 0))
    src = str(Path(__file__).resolve().parents[2])  # the folder that holds tensig/
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [
        src, os.environ.get("PYTHONPATH")])))
    reports: list[Report] = []
    pending = list(files)
    while pending:
        job = json.dumps({"files": pending, "only": only, "ignore": ignore, "timeout": timeout})
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                [sys.executable, "-c", f"from {__name__} import _worker; _worker()", job],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, env=env)
            assert proc.stdout is not None
            current: str | None = None
            try:
                for kind, value in _frames(proc.stdout, patience):
                    if kind == "start":
                        current = value
                    elif kind == "report":
                        reports.append(value)
                    else:
                        pending.remove(value)
                        current = None
                why = f"the verifier's interpreter exited ({proc.wait()}) while importing or " \
                      "verifying it"
            except TimeoutError:
                proc.kill()
                proc.wait()
                why = f"no answer within {patience:g} s (a hang inside compiled code?)"
            finally:
                proc.stdout.close()
            if current is None and pending:  # the worker died before starting a file
                err.seek(0)
                tail = err.read().decode(errors="replace").strip().splitlines()[-1:]
                current = pending[0]
                why += f": {tail[0]}" if tail else ""
            if current is not None:
                reports.append(_note(current, None, f"not verified: {why}"))
                pending.remove(current)
    return reports


def _frames(stream: Any, patience: float) -> Iterator[Any]:
    """The worker's messages (length-prefixed pickles, :func:`_send`) until it closes its end,
    one cut short included; ``TimeoutError`` when the start of a message, or all the rest of
    it, takes more than ``patience`` s (a worker stalled halfway through a large one too)."""
    import select

    fd = stream.fileno()

    def read(n: int) -> bytes:
        # a bytearray and reads of at most 1 MB: copying ``out`` per pipe read was quadratic
        # (32 MB took 5.6 s), and a length that is not one (text printed by the interpreter's
        # start-up: 7e18) asked os.read for that much, a MemoryError
        out, deadline = bytearray(), time.monotonic() + patience
        while len(out) < n:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, min(n - len(out), 1 << 20))
            if not chunk:  # the worker's end is closed
                raise EOFError
            out += chunk
        return bytes(out)

    while True:
        try:
            body = read(int.from_bytes(read(8), "big"))
        except EOFError:
            return
        yield pickle.loads(body)


def _send(channel: Any, message: Any) -> None:
    """One message to :func:`_frames`: its pickle's length (8 bytes) then the pickle."""
    body = pickle.dumps(message)
    channel.write(len(body).to_bytes(8, "big") + body)
    channel.flush()


def _worker() -> None:
    """The worker's main: verify the files named in ``argv[1]``, one message per event on a
    copy of the original stdout (the user code's own prints go nowhere)."""
    job = json.loads(sys.argv[1])
    channel = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    for file in job["files"]:
        _send(channel, ("start", file))
        for report in verify_file(file, job["only"], ignore=job["ignore"],
                                  timeout=job["timeout"]):
            _send(channel, ("report", report))
        _send(channel, ("done", file))
