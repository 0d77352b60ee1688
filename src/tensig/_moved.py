"""Old module paths, kept importable for one release after the move to subpackages by layer.

Until version 0.2 the modules lay flat in ``tensig/``. Each old path is an alias of the module
that now holds its contents: ``import tensig.graph`` gives ``tensig.model.graph`` itself (not a
copy), so patches and ``isinstance`` checks see one object. Public faces (``tensig.graph``,
``tensig.train``, ...) stay quiet; private paths warn once with the new name.

``tensig.dims`` and ``tensig.verify`` are functions now (``tensig.dims("B T")``,
``tensig.verify(fn)``), so their old module paths cannot be aliases: importing a submodule
rebinds the parent's attribute. Their contents are in ``tensig.core.dims`` and
``tensig.check.verify``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

#: Public faces: documented import paths that keep working without a warning.
PUBLIC = {
    "graph": "model.graph", "train": "model.train", "checkpoint": "model.checkpoint",
    "blocks": "model.blocks", "distributed": "model.distributed", "testing": "check.testing",
}

#: Private modules that moved in 0.2; importing the old path warns.
DEPRECATED = {
    "errors": "core.errors", "lexical": "core.lexical", "notation": "core.notation",
    "shapes": "core.shapes", "solver": "core.solver", "inference": "core.inference",
    "annotations": "core.annotations", "projections": "core.projections", "ops": "execution.eager",
    "lowering": "execution.lowering", "padding": "execution.padding",
    "price": "execution.price", "runtime": "check.decorator", "findings": "check.findings",
    "symbolic": "check.tracer", "symbolic_numpy": "check.trace_numpy",
    "symbolic_torch": "check.trace_torch", "symbolic_jax": "check.trace_jax",
    "symbolic_einops": "check.trace_einops", "pytest_plugin": "check.pytest_plugin",
    "ir": "execution.ir", "compile": "model.compile", "codegen": "model.codegen",
    "fusion": "model.fusion",
}


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module that now holds it."""

    def __init__(self, target: str, warn: bool) -> None:
        self.target, self.warn = target, warn

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        if self.warn:
            warnings.warn(f"{spec.name} moved to {self.target}; the old path goes in 0.3",
                          DeprecationWarning, stacklevel=2)
        module = importlib.import_module(self.target)
        self.spec = module.__spec__  # the import system overwrites it with the old path's
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run (the target is already executed): give the module back its own
        spec, so ``importlib.reload`` and ``__spec__.parent`` still see the new path."""
        module.__spec__ = self.spec


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Answers only for ``tensig.<old name>``; every other import passes through."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.partition(".")
        target = PUBLIC.get(name) or DEPRECATED.get(name)
        if package != "tensig" or target is None:
            return None
        return importlib.machinery.ModuleSpec(
            fullname, _Alias(f"tensig.{target}", warn=name in DEPRECATED))


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
