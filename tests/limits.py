"""Run an adversarial snippet in a child Python with a time and memory limit.

Attacks that could hang or blow up (huge exponents, deep nesting, quadratic planning) must not
take the test session down with them: each runs in its own interpreter, under ``RLIMIT_AS`` and
a wall-clock timeout, and the test asserts on what the child printed.  The timeout is a bound
on damage, not a speed assertion: it is set far above the time a correct run needs on any
machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")


@dataclass(frozen=True)
class Outcome:
    """What a limited child did: its exit code and output, or that it ran out of time."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool


def run_limited(code: str, *, timeout: float = 30.0, memory_mb: int = 4096) -> Outcome:
    """Run ``code`` (dedented) in a fresh interpreter with tensig's source first on the path."""

    # The child limits itself: a preexec_fn would make the parent fork without exec, which
    # is unsafe in a test process where JAX or torch have started threads.
    limit = memory_mb * 2**20
    prologue = f"import resource\nresource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))\n"
    # one BLAS/OpenMP thread: a many-core machine's per-thread buffers would count against the
    # address-space limit (an import failing there, not the attack)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    try:
        done = subprocess.run([sys.executable, "-c", prologue + textwrap.dedent(code)],
                              env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return Outcome(None, _text(e.stdout), _text(e.stderr), True)
    return Outcome(done.returncode, done.stdout, done.stderr, False)


def _text(b: bytes | str | None) -> str:
    if b is None:
        return ""
    return b if isinstance(b, str) else b.decode(errors="replace")


def assert_clean_error(code: str, *errors: str, timeout: float = 30.0) -> str:
    """Run ``code`` limited; it must print the name of one of ``errors`` and exit 0.

    The snippet is expected to catch the exception itself and print
    ``type(e).__name__``; any traceback, a hang or a memory blow-up fails the test with the
    child's output shown.
    """
    out = run_limited(code, timeout=timeout)
    assert not out.timed_out, f"no answer within {timeout} s:\n{out.stderr[-2000:]}"
    assert out.returncode == 0, f"child failed ({out.returncode}):\n{out.stderr[-3000:]}"
    printed = out.stdout.strip().splitlines()
    assert printed and printed[-1] in errors, (
        f"expected one of {errors}, got {printed[-1:]}\n{out.stderr[-2000:]}")
    return out.stdout


@contextmanager
def alarm(seconds: int, message: str) -> Iterator[None]:
    """Fail what runs over ``seconds`` in this process (a hang, or work no bound stops) with
    ``message``: a bound on damage, set far above a correct run.  POSIX only; elsewhere the
    block runs unbounded."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def expire(*_: object) -> None:
        raise AssertionError(message)

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
