"""OCANNL's dimension captures: a label's solved size as a value (:class:`Captured`).

``capture=[...]`` on a graph einsum and :func:`variable` make them; :func:`dim` puts one into
the model as a number; their ``set_*`` methods constrain the solve.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensig.core.errors import ShapeError
from tensig.core.inference import ShapeGraph, TensorNode
from tensig.core.shapes import Shape
from tensig.core.solver import DimVar
from tensig.model.tensor import Arithmetic, Graph, Tensor, _valued, current_graph


class Captured(Arithmetic):
    """The size of a label (or of a row variable: its axes' product) in a graph's solve: OCANNL's
    ``capture_dims`` reference.  :func:`dim` (or ``x / d``) puts it into the model; the ``set_*``
    methods constrain it (a row variable's only checked after the solve: they cannot size a tensor).
    """

    __slots__ = ("graph", "name", "node", "var")

    def __init__(self, graph: Graph, name: str, node: TensorNode | None, var: DimVar | None):
        self.graph, self.name, self.node, self.var = graph, name, node, var

    def __repr__(self) -> str:
        return f"Captured({self.name!r})"

    @property
    def value(self) -> int:
        """The solved size (solving the graph)."""
        self.graph.solve()
        v = self._size()
        if v is None:
            raise ShapeError(f"variable {self.name!r} has no size: nothing sets it",
                             label=self.name, hint="set_dim it, or set_equal it to a "
                                                   "captured label")
        return v

    def _size(self) -> int | None:
        """The size as the solver has it now (a row variable's: once solved)."""
        if self.node is None:
            v = ShapeGraph.value(self.var) if self.var is not None else None
            return None if v is None else int(v)
        return int(self.graph.shapes.projections(self.node).capture([self.name])[self.name])

    def __int__(self) -> int:
        return self.value

    def set_dim(self, size: int) -> None:
        """This size is ``size``."""
        if self.var is None:
            self._check(lambda: size, f"set_dim({self.name!r}, {size})")
        else:
            self.graph.shapes.set_dim(self.var, size)

    def set_equal(self, other: Captured) -> None:
        """This size and ``other``'s are equal (a row variable: the product of its axes)."""
        if other.graph is not self.graph:
            raise ValueError(f"set_equal({self.name!r}, {other.name!r}): the sizes belong to "
                             "different graphs")
        if self.var is not None and other.var is not None:
            self.graph.shapes.set_equal(self.var, other.var)
        elif self.var is None:
            self._check(other._size, f"set_equal({self.name!r}, {other.name!r})",
                        settle=other)
        else:
            other.set_equal(self)

    def set_scale(self, small: Captured, factor: int) -> None:
        """This size is ``factor`` times ``small``'s (dimension labels only, as OCANNL's)."""
        if self.var is None or small.var is None:
            raise ShapeError(f"set_scale({self.name!r}, {small.name!r}): a row variable takes "
                             "no scale, only dimension labels do (as OCANNL's set_scale)")
        self.graph.shapes.set_scale(self.var, small.var, factor)

    def _check(self, want: Callable[[], int | None], what: str,
               settle: Captured | None = None) -> None:
        """A row variable's constraint, checked after the solve: a free ``settle`` variable
        takes the row's size, anything else must equal it."""
        def check() -> None:
            size = self._size()
            assert size is not None  # a row variable's size is known once the graph solved
            if settle is not None and settle.var is not None and \
                    ShapeGraph.value(settle.var) is None:
                settle.set_dim(size)
                return
            other = want()
            if other != size:
                raise ShapeError(f"{what}: the row variable {self.name!r} has {size} elements "
                                 f"(the product of its axes), not {other}", label=self.name,
                                 sizes=(size, other))

        self.graph.checks.append(check)
        self.graph._solved = -1  # checked at the next solve

    def tensor(self) -> Tensor:
        """:func:`dim` of this size: what its arithmetic operators compute on."""
        return dim(self)


def variable(name: str) -> Captured:
    """A free size variable of the current graph (OCANNL's ``Shape.get_variable_ref``)."""
    g = current_graph()
    return Captured(g, name, None, g.shapes.variable(name))


def dim(c: Captured) -> Tensor:
    """A captured size as a number in the model (OCANNL's ``dim`` / ``embed_dim``): a float32
    constant with no axes, valued from the solved shapes at initialisation.

    >>> from tensig.model import graph as G
    >>> x = G.leaf("x", np.ones((2, 5), np.float32), batch=1)
    >>> total, d = G.einsum1("...|d => ...|", x, capture=["d"])
    >>> G.Model(total / d["d"]).run().tolist()     # the mean over d
    [1.0, 1.0]
    """
    return _valued("const", f"dim.{c.name}", Shape(), lambda: np.array(c.value, np.float32),
                  c.graph)


def _capture(t: Tensor, names: Sequence[str] | None) -> Any:
    """``t``, or ``(t, {name: Captured})`` for ``capture=names`` (as the eager functions return
    ``(array, sizes)``); unknown names fail here, not at the solve."""
    if names is None:
        return t
    if isinstance(names, str):
        raise TypeError("capture takes a list of names, e.g. capture=['h', 'w']")
    shapes, out = t.graph.shapes, {}
    for name in names:
        try:
            var: DimVar | None = shapes.label(t.node, name)
        except ShapeError:  # a row variable: its size is its axes' product, read when solved
            var = None
        out[name] = Captured(t.graph, name, t.node, var)
    return t, out
