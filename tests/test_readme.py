"""The README's Python examples run, so the README keeps describing what the code does."""

from __future__ import annotations

import doctest
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example(index):
    parser = doctest.DocTestParser()
    test = parser.get_doctest(BLOCKS[index], {}, f"README block {index}", str(README), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0, f"README python block {index} fails (see the output above)"


def modelled_block() -> str:
    """The README's list of modelled operations, rendered from the code."""
    import textwrap

    from tensig.check.verify import modelled_operations

    lines = []
    for library, names in modelled_operations().items():
        shown = [n for n in names if not n.startswith("_")]
        text = f"- **{library}** ({len(shown)} by hand): " + ", ".join(f"`{n}`" for n in shown)
        lines.append(textwrap.fill(text, 100, subsequent_indent="  ", break_long_words=False,
                                   break_on_hyphens=False))
    return "\n".join(lines)


def test_modelled_operations_list_is_generated_from_the_code():
    text = README.read_text()
    found = re.search(r"<!-- modelled:start -->\n(.*?)\n<!-- modelled:end -->", text, re.S)
    assert found, "the README's verify section lost its generated list of modelled operations"
    expected = modelled_block()
    assert found.group(1) == expected, f"regenerate the README's list:\n{expected}"


def test_readme_names_modules_by_their_current_paths():
    """A module path the README names is the real one, not an alias kept for old imports."""
    from tensig._moved import DEPRECATED

    old = re.findall(rf"\btensig\.({'|'.join(DEPRECATED)})\b(?![(\w])", README.read_text())
    assert not old, f"README names moved modules: {sorted(set(old))}"
