"""``pytest --tensig``: prove the shape contracts of the project code the tests import.

A ``pytest11`` entry point, inactive unless ``--tensig`` is given (the README's "pytest" item
says which modules are project code): one item ``<module path>::tensig[<qualname>]`` per
shape-annotated function, as ``tensig verify`` reads them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tensig.check import findings
from tensig.check.verify import DEFAULT_TIMEOUT, Unbuilt, verify
from tensig.check.verify_files import annotated_functions

__all__ = ["TensigItem", "project_functions"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tensig", "shape verification of annotated functions")
    group.addoption("--tensig", action="store_true",
                    help="verify every shape-annotated function of the imported project modules")
    group.addoption("--tensig-strict", action="store_true",
                    help="warnings and notes (assumptions, incomplete traces) fail too")
    group.addoption("--tensig-ignore", action="append", default=[], metavar="CODE",
                    help="leave out findings of a code or name (TS301, assumption)")
    group.addoption("--tensig-timeout", type=float, default=None, metavar="SECONDS",
                    help="time limit per function (default: tensig verify's)")


def pytest_configure(config: pytest.Config) -> None:
    try:
        findings.resolve(config.getoption("tensig_ignore"))
    except ValueError as e:
        raise pytest.UsageError(f"--tensig-ignore: {e}") from None


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    if not config.getoption("tensig"):
        return
    tests = {Path(str(item.path)).resolve() for item in items}
    files: dict[Path, pytest.File] = {}
    for path, fn in project_functions(Path(str(config.rootpath)), tests):
        if path not in files:
            files[path] = _Source.from_parent(session, path=path)
        items.append(TensigItem.from_parent(files[path], name=f"tensig[{fn.__qualname__}]", fn=fn))


def project_functions(rootdir: Path, tests: set[Path]) -> Iterator[tuple[Path, Any]]:
    """The shape-annotated functions of the imported project modules (see the module doc)."""
    root = rootdir.resolve()
    for module in sorted(list(sys.modules.values()), key=lambda m: getattr(m, "__name__", "")):
        file = getattr(module, "__file__", None)
        if not isinstance(file, str) or not file.endswith(".py"):
            continue
        path = Path(os.path.abspath(file))
        if root in path.parents and path not in tests and path.name != "conftest.py" \
                and findings.user_code(str(path)):  # a malformed annotation too: items report it
            yield from ((path, fn) for _, fn, _ in annotated_functions(module))


class _Source(pytest.File):
    """A project file whose functions are verified (it collects nothing by itself)."""

    def collect(self) -> list[pytest.Item]:
        return []


class TensigFailure(Exception):
    """A function that verification did not prove: the message is its report."""


class TensigItem(pytest.Item):
    """One annotated function, proved for all sizes by ``tensig.verify``."""

    def __init__(self, *, fn: Any, **kw: Any):
        super().__init__(**kw)
        self.fn = fn

    def runtest(self) -> None:
        config = self.config
        timeout = config.getoption("tensig_timeout") or DEFAULT_TIMEOUT
        strict = config.getoption("tensig_strict")
        try:
            report = verify(self.fn, ignore=config.getoption("tensig_ignore"), timeout=timeout)
        except Unbuilt as e:  # a module class whose constructor needs arguments: a note
            if not strict:
                pytest.skip(str(e))
            raise TensigFailure(f"{self.path}: {self.fn.__qualname__}: {e}") from None
        except Exception as e:  # a malformed annotation, a signature that does not fit
            raise TensigFailure(f"{self.path}: {self.fn.__qualname__}: {type(e).__name__}: "
                                f"{e}") from None
        if report.errors or (strict and (report.warnings or report.notes)):
            raise TensigFailure(str(report))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        if isinstance(excinfo.value, TensigFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Any, int | None, str]:
        line = getattr(getattr(self.fn, "__code__", None), "co_firstlineno", 1) - 1
        return self.path, line, f"tensig verify {self.fn.__qualname__}"
