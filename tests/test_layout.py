"""The package keeps the shape it was given: layers in order, no import circle, a size budget.

Every module under ``src/tensig`` is parsed with :mod:`ast` (nothing is imported) and its tensig
imports, module-level and function-local alike, become edges of an import map. The layers, in
order (a module may import from its own layer and earlier ones only):

    core < backends < execution < check < rank < model < top level

The rules, each with the list of what still breaks it today:

- no upward import (``UPWARD``);
- no import circle between modules (``CIRCLES``: the edges that lie on a circle; an edge is on a
  circle when its two ends import each other through any path, so breaking one edge can only
  shrink the list);
- no function-local tensig import unless ``LOCAL_IMPORTS`` says why (a local import hides an
  edge from a reader of the module's head: the usual reason is a circle being dodged);
- no module over ``LINE_BUDGET`` lines unless ``OVERSIZE`` says why.

The lists can only shrink: a new violation fails, and so does an entry that no longer applies
(fix the code, then delete the entry; the failure says which). The README's module table names
every module in its layer, and its Development section states these rules.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tensig import _moved as MOVED

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "tensig"

#: The layers in import order; a subpackage (or top-level module) of tensig names its layer.
LAYERS = ("core", "backends", "execution", "check", "rank", "model", "top")
#: Top-level modules and packages that sit above every layer.
TOP_LEVEL = {"__init__", "__main__", "_moved", "cli", "demo", "demos"}

#: Module line budget: a module longer than this mixes concepts more often than not.
LINE_BUDGET = 800

# Known violations: each list says exactly what is still violated today. ----------------------

#: Upward imports still present: (importer, imported).
UPWARD: set[tuple[str, str]] = set()

#: Edges that lie on an import circle: (importer, imported).
CIRCLES: set[tuple[str, str]] = set()

#: Function-local tensig imports allowed: (importer, imported) -> why it is local.
LOCAL_IMPORTS: dict[tuple[str, str], str] = {
    ("tensig.check.verify", "tensig.check.trace_torch"): "trace_torch imports torch, so it is "
                                                         "loaded once the user has imported it",
    ("tensig.demo", "tensig.demos.digits"): "the demos load the model layer and their data "
                                            "sets only when `--train` asks for them",
    ("tensig.demo", "tensig.demos.moons"): "as demos.digits",
    ("tensig.demo", "tensig.demos.gpt"): "as demos.digits",
}

#: Modules allowed over the line budget: module -> why.
OVERSIZE: dict[str, str] = {}


# The import map. -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Edge:
    """One tensig import: who imports what (the module file, and the name as written), where,
    and whether inside a function."""

    importer: str
    imported: str
    named: str
    line: int
    local: bool


def module_name(path: Path, root: Path) -> str:
    """``<root>/tensig/core/dims.py`` -> ``tensig.core.dims``; an ``__init__``: its package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules(root: Path = SRC) -> dict[str, Path]:
    """Every module of the package under ``root``, by dotted name."""
    return {module_name(p, root): p for p in sorted((root / PACKAGE).rglob("*.py"))}


def layer_of(module: str) -> int:
    """The index in ``LAYERS`` of a module's layer."""
    parts = module.split(".")
    head = parts[1] if len(parts) > 1 else "__init__"
    if head in TOP_LEVEL:
        return LAYERS.index("top")
    if head not in LAYERS:
        raise AssertionError(f"{module} is in no layer: add {head!r} to LAYERS or TOP_LEVEL")
    return LAYERS.index(head)


def resolve(importer: str, node: ast.Import | ast.ImportFrom, root: Path
            ) -> list[tuple[str, str]]:
    """The tensig names an import statement names, each with the module file that holds it (the
    longest known prefix: ``from tensig.core import dims`` names the module ``dims``,
    ``from tensig import einsum`` the package ``tensig``).

    Only that module counts, not the parent packages Python runs on the way: every module would
    otherwise import ``tensig/__init__`` and sit on one circle with it."""
    if isinstance(node, ast.Import):
        named = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = importer.split(".")
            if modules(root)[importer].name != "__init__.py":
                package = package[:-1]
            package = package[: len(package) - node.level + 1]
            base = ".".join(package + ([base] if base else []))
        named = [f"{base}.{a.name}" for a in node.names]
    return [(name, _holder(name, root)) for name in named if name.split(".")[0] == PACKAGE]


def _holder(name: str, root: Path) -> str:
    """The longest prefix of a dotted name that is a module of the package."""
    while name not in modules(root) and "." in name:
        name = name.rpartition(".")[0]
    return name


class _Imports(ast.NodeVisitor):
    """Collects a module's tensig imports, noting those inside a function body."""

    def __init__(self, module: str, root: Path) -> None:
        self.module, self.root, self.depth = module, root, 0
        self.edges: list[Edge] = []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for named, target in resolve(self.module, node, self.root):
            if target != self.module:
                self.edges.append(Edge(self.module, target, named, node.lineno, self.depth > 0))

    visit_ImportFrom = visit_Import


@cache
def edges(root: Path = SRC) -> tuple[Edge, ...]:
    """Every tensig import in the package under ``root``."""
    found: list[Edge] = []
    for module, path in modules(root).items():
        visitor = _Imports(module, root)
        visitor.visit(ast.parse(path.read_text(), str(path)))
        found += visitor.edges
    return tuple(found)


def moved_paths(root: Path = SRC) -> list[Edge]:
    """Imports through an old path that ``tensig._moved`` keeps for users (``tensig.ops``)."""
    old = MOVED.PUBLIC.keys() | MOVED.DEPRECATED.keys()
    return [e for e in edges(root) if e.named.split(".")[1:2] in ([n] for n in old)]


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components, iterative (no recursion limit to meet)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def enter(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        work.append((node, iter(sorted(graph.get(node, ())))))

    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = []
        enter(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = {stack.pop()}
                    while node not in component:
                        component.add(stack.pop())
                    on_stack -= component
                    components.append(component)
            elif child not in index:
                enter(child)
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return components


def import_graph(root: Path = SRC) -> dict[str, set[str]]:
    """Module -> the modules it imports (module-level and function-local alike)."""
    graph: dict[str, set[str]] = {m: set() for m in modules(root)}
    for e in edges(root):
        if e.imported in graph:
            graph[e.importer].add(e.imported)
    return graph


def circles(root: Path = SRC) -> list[set[str]]:
    """The import circles: components of the import map with more than one module."""
    return [c for c in strongly_connected(import_graph(root)) if len(c) > 1]


def circle_edges(root: Path = SRC) -> set[tuple[str, str]]:
    """The imports whose two ends lie on one circle."""
    component = {m: i for i, c in enumerate(circles(root)) for m in c}
    return {(a, b) for a, targets in import_graph(root).items() for b in targets
            if a in component and component[a] == component.get(b)}


def upward(root: Path = SRC) -> set[tuple[str, str]]:
    """The imports from a later layer."""
    return {(e.importer, e.imported) for e in edges(root)
            if layer_of(e.imported) > layer_of(e.importer)}


def local_imports(root: Path = SRC) -> set[tuple[str, str]]:
    """The function-local imports."""
    return {(e.importer, e.imported) for e in edges(root) if e.local}


def line_counts(root: Path = SRC) -> dict[str, int]:
    return {m: len(p.read_text().splitlines()) for m, p in modules(root).items()}


def oversize(root: Path = SRC) -> set[str]:
    return {m for m, n in line_counts(root).items() if n > LINE_BUDGET}


# The rules. ----------------------------------------------------------------------------------

def _listing(items: set) -> str:
    return "\n".join(f"  {p!r}," for p in sorted(items))


def _lines_of(pairs: set[tuple[str, str]]) -> str:
    where = {(e.importer, e.imported): e.line for e in edges()}
    return "\n".join(f"  {a} -> {b} (line {where[a, b]})" for a, b in sorted(pairs))


def test_every_module_has_a_layer():
    for module in modules():
        layer_of(module)


def test_no_import_of_a_moved_path():
    """Old paths (``tensig.ops``, ...) are kept for users; the package itself uses the new ones."""
    assert not moved_paths(), "\n".join(
        f"{e.importer}:{e.line} imports the old path {e.named}" for e in moved_paths())


def test_no_new_upward_import():
    new = upward() - UPWARD
    assert not new, f"imports from a later layer ({' < '.join(LAYERS)}):\n{_lines_of(new)}"


def test_no_new_import_circle():
    new = circle_edges() - CIRCLES
    shown = "\n".join("  " + " <-> ".join(sorted(c)) for c in circles()
                      if any(a in c for a, _ in new))
    assert not new, f"new imports on an import circle:\n{_lines_of(new)}\ncircles:\n{shown}"


def test_no_new_function_local_import():
    new = local_imports() - LOCAL_IMPORTS.keys()
    assert not new, ("function-local tensig imports (import at the module head, or list it with "
                     f"a reason in LOCAL_IMPORTS):\n{_lines_of(new)}")


def test_no_new_oversize_module():
    counts = line_counts()
    new = oversize() - OVERSIZE.keys()
    assert not new, "split by concept:\n" + "\n".join(
        f"  {m}: {counts[m]} lines > {LINE_BUDGET}" for m in sorted(new))


@pytest.mark.parametrize(("name", "listed", "actual"), [
    ("UPWARD", lambda: UPWARD, upward),
    ("CIRCLES", lambda: CIRCLES, circle_edges),
    ("LOCAL_IMPORTS", lambda: set(LOCAL_IMPORTS), local_imports),
    ("OVERSIZE", lambda: set(OVERSIZE), oversize),
])
def test_no_stale_entry(name, listed, actual):
    """A fixed violation leaves its list too, so the lists only ever shrink."""
    stale = listed() - actual()
    assert not stale, f"{name} lists what no longer happens: delete\n{_listing(stale)}"


def test_every_exception_has_a_reason():
    for key, reason in {**LOCAL_IMPORTS, **OVERSIZE}.items():
        assert reason.strip(), f"{key} is listed without a reason"


# The README's module table states the same layout. -------------------------------------------

README = SRC.parent / "README.md"


def readme_layout() -> tuple[str, dict[str, str]]:
    """The README's Development section (whitespace folded) and its module table: the layer a
    row names (as in ``LAYERS``) -> the row's modules cell."""
    text = README.read_text()
    table = re.search(r"\| layer \(package\) \| modules \|\n\|---\|---\|\n((?:\|.*\n)+)", text)
    assert table, "the README lost its module table (| layer (package) | modules |)"
    rows = {}
    for line in table.group(1).splitlines():
        layer, cell = (c.strip() for c in line.strip().strip("|").split(" | ", 1))
        rows["top" if layer == "top level" else layer.strip("`/")] = cell
    section = text[text.index("## Development"):table.start()]
    return " ".join(section.split()), rows


def readme_name(module: str) -> str | None:
    """How the README's table names a module (None for a subpackage's ``__init__``)."""
    parts = module.split(".")
    if len(parts) == 1:
        return PACKAGE
    if parts[1] == "demos":
        return "demos/"
    subpackage = len(parts) == 2 and modules()[module].name == "__init__.py"
    return None if subpackage else parts[-1]


def test_the_readme_states_the_layout_this_test_enforces():
    prose, rows = readme_layout()
    names = [("top level" if layer == "top" else layer) for layer in LAYERS]
    assert f"guards the layers ({' < '.join(names)})" in prose
    assert f"no module over {LINE_BUDGET} lines" in prose
    assert list(rows) == list(LAYERS), "the table's rows are not the layers in order"
    missing = [m for m in modules() if (name := readme_name(m)) is not None
               and f"`{name}`" not in rows[LAYERS[layer_of(m)]]]
    assert not missing, f"the README's module table does not name, in their layer: {missing}"
    assert ("No module is over the budget today" in prose) == (not OVERSIZE), \
        "the README says whether OVERSIZE lists a module"


# The guard itself, on a package made to break each rule. -------------------------------------

def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_guard_sees_each_kind_of_violation(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "from tensig.core.a import f\n",
        "core/__init__.py": "",
        "core/a.py": "def f():\n    from ..check import b\n    return b\n",
        "core/c.py": "from . import a\nimport tensig.core.d\n",
        "core/d.py": "from tensig.core import c\n",
        "cli.py": "from tensig import ops, einsum\nimport tensig.graph.x\n",
        "check/__init__.py": "",
        "check/b.py": "from tensig.core import a\n" + "x = 1\n" * LINE_BUDGET,
    })
    assert upward(root) == {("tensig.core.a", "tensig.check.b")}
    assert [e.named for e in moved_paths(root)] == ["tensig.ops", "tensig.graph.x"]
    assert local_imports(root) == {("tensig.core.a", "tensig.check.b")}
    assert sorted(map(sorted, circles(root))) == [["tensig.check.b", "tensig.core.a"],
                                                    ["tensig.core.c", "tensig.core.d"]]
    assert ("tensig.__init__" not in modules(root)) and ("tensig" in modules(root))
    assert ("tensig", "tensig.core.a") not in circle_edges(root)
    assert oversize(root) == {"tensig.check.b"}


def test_components_of_a_long_chain_need_no_recursion():
    chain = {str(i): {str(i + 1)} for i in range(5000)} | {"5000": {"0"}, "x": {"0"}}
    components = strongly_connected(chain)
    assert sorted(map(len, components)) == [1, 5001]


def test_an_old_path_is_the_module_itself_with_its_own_spec():
    """``tensig.graph`` is ``tensig.model.graph`` (one object), and importing the old path leaves
    the module's spec naming its real place (``importlib.reload`` and ``__package__`` rely on it;
    reloading here would redefine the graph's classes under every later test)."""
    import importlib

    import tensig.model.graph

    old = importlib.import_module("tensig.graph")
    assert old is tensig.model.graph
    assert old.__spec__.name == "tensig.model.graph"
    assert old.__spec__.parent == old.__package__ == "tensig.model"
