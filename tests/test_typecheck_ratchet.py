"""The type checker's escape hatches may only shrink.

`make test` runs mypy on src/ (configured in pyproject.toml). Two ways around it exist: a
`# type: ignore` comment and a module listed with `ignore_errors` in the config. Both are
counted here against the numbers of the last clean-up; lower the numbers when you remove one.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "tensig"

#: The counts after the last clean-up (lower them as the code gets cleaner; never raise them).
MAX_TYPE_IGNORES = 14
MAX_UNCHECKED_MODULES = 0

_IGNORE = re.compile(r"#\s*type:\s*ignore\b")


def type_ignores() -> list[str]:
    """Every `# type: ignore` comment in src/, as "path:line"."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if _IGNORE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}")
    return found


def unchecked_modules() -> list[str]:
    """Modules that pyproject.toml exempts from checking (`ignore_errors = true`)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    exempt: list[str] = []
    for override in config.get("overrides", []):
        if override.get("ignore_errors"):
            modules = override["module"]
            exempt += [modules] if isinstance(modules, str) else modules
    return exempt


def test_type_ignore_comments_do_not_grow():
    found = type_ignores()
    assert len(found) <= MAX_TYPE_IGNORES, (
        f"{len(found)} `# type: ignore` comments in src/, at most {MAX_TYPE_IGNORES} allowed: "
        "type the code instead")


def test_modules_exempt_from_the_type_checker_do_not_grow():
    exempt = unchecked_modules()
    assert len(exempt) <= MAX_UNCHECKED_MODULES, (
        f"{len(exempt)} modules exempt from mypy (at most {MAX_UNCHECKED_MODULES}): {exempt}")
    for name in exempt:  # an exemption names a module that exists (no stale entries)
        assert (SRC.parent / (name.replace(".", "/") + ".py")).exists(), name


def test_the_type_checker_checks_src_and_runs_in_make_test():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert config["files"] == ["src/tensig"]
    assert config["warn_unused_ignores"] is True
    recipe = (ROOT / "Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "$(BIN)/mypy" in recipe
